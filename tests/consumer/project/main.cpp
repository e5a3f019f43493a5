// SPDX-License-Identifier: MIT
// A program as a user of pmc writes it: parse an event string, open two counters, measure an interval.
// Built by tests/consumer against an installed pmc (find_package), a pmc source tree (add_subdirectory,
// FetchContent) and with a bare compiler command line (-I<include dir>). Exit 0 when every check holds;
// otherwise it prints each failed check and exits 1. Exit 77 ("SKIPPED: ...") when everything else passed but the
// kernel refuses perf_event_open (EACCES, EPERM, ENOSYS), so nothing could be measured.
//
// PMC_CONSUMER_HAVE_REPORT=1 (set when the project links pmc::report) also uses pmc/report.hpp, which needs {fmt}.
#include <pmc/counter.hpp>
#include <pmc/error.hpp>
#include <pmc/event.hpp>
#if PMC_CONSUMER_HAVE_REPORT
#include <pmc/report.hpp>
#endif
#if PMC_CONSUMER_HAVE_SYMBOLS
#include <pmc/symbols.hpp> // PMC_CONSUMER_HAVE_SYMBOLS=1: the project links pmc::symbols (libelf)
#endif

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

int failures = 0;
bool skipped = false;

void expect(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok:    " : "FAILED:", what.c_str());
    if (!ok) ++failures;
}

constexpr std::size_t pages_to_touch = 64;

} // namespace

int pmc_consumer_global[16]; // named from the symbol table by pmc::symbols

int main() {
    std::printf("pmc %s consumer\n", PMC_VERSION_STRING);

    // Event strings, without opening anything.
    const pmc::EventSpec spec = pmc::parse_event("page-faults:u");
    expect(spec.attr.type == PERF_TYPE_SOFTWARE, "parse_event(\"page-faults:u\") has attr.type PERF_TYPE_SOFTWARE");
    expect(spec.attr.config == PERF_COUNT_SW_PAGE_FAULTS, "... and config PERF_COUNT_SW_PAGE_FAULTS");
    expect(spec.attr.exclude_kernel == 1 && spec.attr.exclude_user == 0, "... and counts user mode only");
    expect(pmc::parse_event("r01cb:k").attr.type == PERF_TYPE_RAW, "parse_event(\"r01cb:k\") has attr.type PERF_TYPE_RAW");
    try {
        pmc::parse_event("instrutions");
        expect(false, "parse_event(\"instrutions\") throws pmc::error");
    } catch (const pmc::error& e) {
        const int code = e.code().value();
        expect((code == EINVAL || code == ENOENT) && std::strstr(e.what(), "instrutions") != nullptr,
               "parse_event(\"instrutions\") throws pmc::error (" + std::string(std::strerror(code)) + ")");
    }
    auto bad = pmc::try_parse_event("cycles:q");
    expect(!bad.ok() && !bad.failure().message.empty(), "try_parse_event(\"cycles:q\") fails without throwing");

#if PMC_CONSUMER_HAVE_REPORT
    const std::string text = pmc::attr_text(spec.attr);
    expect(text.find("perf_event_attr:") == 0 && text.find("exclude_kernel") != std::string::npos,
           "pmc::attr_text() (pmc::report) describes the attr");
    pmc::JsonWriter json;
    json.begin_object().field("event", spec.text).field("type", spec.attr.type).end_object();
    expect(json.str() == "{\"event\":\"page-faults:u\",\"type\":1}", "pmc::JsonWriter writes " + json.str());
#endif
#if PMC_CONSUMER_HAVE_SYMBOLS
    auto map = pmc::AddressMap::of_process();
    pmc::load_symbols(map);
    expect(map.attribute(&pmc_consumer_global[3]).label() == "pmc_consumer_global",
           "pmc::load_symbols (pmc::symbols) names a global: " + map.attribute(&pmc_consumer_global[3]).label());
#endif

    // Two counters around touching fresh anonymous memory: every page's first write is a (minor) page fault.
    const long page = ::sysconf(_SC_PAGESIZE);
    const std::size_t bytes = pages_to_touch * static_cast<std::size_t>(page);
    void* region = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) {
        std::printf("FAILED: mmap of %zu bytes: %s\n", bytes, std::strerror(errno));
        return 1;
    }
    ::madvise(region, bytes, MADV_NOHUGEPAGE); // one fault per page, not one per huge page

    try {
        pmc::Counter wall{"wall-time"};
        pmc::Counter faults{"page-faults"};
        auto wall_interval = wall.interval();
        auto fault_interval = faults.interval();
        auto* bytes_p = static_cast<volatile unsigned char*>(region);
        for (std::size_t i = 0; i < pages_to_touch; ++i) bytes_p[i * static_cast<std::size_t>(page)] = 1;
        const std::uint64_t n_faults = fault_interval.stop();
        const std::uint64_t ns = wall_interval.stop();
        std::printf("touching %zu fresh pages: %llu page faults, %llu ns of wall-time\n", pages_to_touch,
                    static_cast<unsigned long long>(n_faults), static_cast<unsigned long long>(ns));
        for (const auto& note : faults.notes()) std::printf("  page-faults: %s\n", note.c_str());
        for (const auto& note : wall.notes()) std::printf("  wall-time: %s\n", note.c_str());
        expect(ns > 0, "wall-time advanced");
        expect(ns < 60ull * 1000 * 1000 * 1000, "wall-time is below a minute");
        expect(n_faults >= pages_to_touch, "page-faults counted at least one fault per touched page");
        expect(n_faults < pages_to_touch + 10000, "page-faults is not implausibly large");
    } catch (const pmc::error& e) {
        const int code = e.code().value();
        if (code == EACCES || code == EPERM || code == ENOSYS) {
            // The machine, not the package: perf_event_open is refused here (perf_event_paranoid, seccomp).
            std::printf("cannot measure here: pmc::error (%s):\n%s\n", std::strerror(code), e.what());
            skipped = true;
        } else {
            std::printf("FAILED: opening or reading a counter threw pmc::error (%s):\n%s\n", std::strerror(code),
                        e.what());
            ++failures;
        }
    }
    ::munmap(region, bytes);

    if (failures != 0) {
        std::printf("consumer: SOME CHECKS FAILED\n");
        return 1;
    }
    if (skipped) {
        std::printf("SKIPPED: the consumer built and parsed events, but this machine refuses perf_event_open\n");
        return 77;
    }
    std::printf("consumer: all checks passed\n");
    return 0;
}
