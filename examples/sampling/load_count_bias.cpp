// SPDX-License-Identifier: MIT
// pmc-example-load-count-bias: the load-latency "shadow" (design.md §7). Two loops with a known number of loads per
// iteration (7 and 8; 10 M iterations) run while load-latency sampling (Intel mem-loads with ldlat, AMD IBS op)
// samples them at several periods, and the exact retired-loads count is read beside each run. Load-latency sampling
// tracks one load at a time: loads issued while it is busy fall in its shadow and are never candidates, so samples x
// period is not the load count, and the error depends on the loop (7 against 8 loads). The table shows it.
//
// Under `pmc emulate --cache` (no PMU needed) the emulated PMU samples the loads from its cache model instead: every
// Nth load exactly, so there is no shadow, and the exact count is the model's L1-dcache-loads; the table is the same
// on every run.
//
// Where the PMU has no such events (our VMs have no PMU at all) it says so, and shows the same method on an event
// it has: page faults, with loops that touch 7 and 8 fresh pages per iteration, where samples x period does match
// the exact count (software events have no shadow). Exit status 0 (with "SKIPPED: reason" when the load part
// cannot run here), 1 when the page-fault method disagrees with the exact count or for a bad command line (said as
// every pmc program says it: tools/command_line.hpp).
#include <pmc/counter.hpp>
#include <pmc/cpu.hpp>
#include <pmc/emulated.hpp>
#include <pmc/sampler.hpp>

#include <command_line.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char* usage = R"(usage: pmc-example-load-count-bias [--iterations N] [--periods LIST] [--software]

Runs two loops with 7 and 8 loads per iteration under load-latency sampling (Intel: cpu/mem-loads,ldlat=3/P with
MEM_INST_RETIRED.ALL_LOADS r81d0 as the exact count; AMD: ibs_op// with LsDispatch loads r0129 as the count) and
prints, per loop and period, samples x period against the exact load count: the shadow of load-latency sampling.
Under pmc emulate --cache the emulated PMU samples them from its cache model (cpu/mem-loads,ldlat=3/Pu against the
model's L1-dcache-loads:u): modelled, exact, the same on every run. Without those events it says why and shows the
method with page faults (7 and 8 fresh pages per iteration).

  --iterations N   iterations of each loop (default 10000000, 100000 under the emulator; with page faults the
                   default is 1000, at most 1048576: the pages are mapped and freed 16 MiB at a time)
  --periods LIST   sampling periods, comma-separated (default 10007,100003,1000003; under the emulator
                   1009,10007,100003; page faults 1,10,100,1000)
  --software       the page-fault method even where the PMU has the load events
  -h, --help       this text
)";

// The loops: exactly 7 or 8 loads per iteration from one cache line, the loop counter in a register.
__attribute__((noinline)) void loads7(const std::uint64_t* p, std::uint64_t n) {
#if defined(__x86_64__)
    asm volatile("1:\n\t"
                 "mov (%1), %%rax\n\tmov 8(%1), %%rax\n\tmov 16(%1), %%rax\n\tmov 24(%1), %%rax\n\t"
                 "mov 32(%1), %%rax\n\tmov 40(%1), %%rax\n\tmov 48(%1), %%rax\n\t"
                 "dec %0\n\tjnz 1b"
                 : "+r"(n)
                 : "r"(p)
                 : "rax", "memory", "cc");
#elif defined(__aarch64__)
    asm volatile("1:\n\t"
                 "ldr x9, [%1]\n\tldr x9, [%1, #8]\n\tldr x9, [%1, #16]\n\tldr x9, [%1, #24]\n\t"
                 "ldr x9, [%1, #32]\n\tldr x9, [%1, #40]\n\tldr x9, [%1, #48]\n\t"
                 "subs %0, %0, #1\n\tb.ne 1b"
                 : "+r"(n)
                 : "r"(p)
                 : "x9", "memory", "cc");
#else
    const volatile std::uint64_t* v = p;
    for (; n; --n) (void)(v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6]); // the compiler decides the rest
#endif
}
__attribute__((noinline)) void loads8(const std::uint64_t* p, std::uint64_t n) {
#if defined(__x86_64__)
    asm volatile("1:\n\t"
                 "mov (%1), %%rax\n\tmov 8(%1), %%rax\n\tmov 16(%1), %%rax\n\tmov 24(%1), %%rax\n\t"
                 "mov 32(%1), %%rax\n\tmov 40(%1), %%rax\n\tmov 48(%1), %%rax\n\tmov 56(%1), %%rax\n\t"
                 "dec %0\n\tjnz 1b"
                 : "+r"(n)
                 : "r"(p)
                 : "rax", "memory", "cc");
#elif defined(__aarch64__)
    asm volatile("1:\n\t"
                 "ldr x9, [%1]\n\tldr x9, [%1, #8]\n\tldr x9, [%1, #16]\n\tldr x9, [%1, #24]\n\t"
                 "ldr x9, [%1, #32]\n\tldr x9, [%1, #40]\n\tldr x9, [%1, #48]\n\tldr x9, [%1, #56]\n\t"
                 "subs %0, %0, #1\n\tb.ne 1b"
                 : "+r"(n)
                 : "r"(p)
                 : "x9", "memory", "cc");
#else
    const volatile std::uint64_t* v = p;
    for (; n; --n) (void)(v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]);
#endif
}

/// The events for the load experiment on this CPU, or why there are none.
struct LoadEvents {
    std::string exact, sampled, exact_name, sampled_name, none_because;
    bool filter_loads = false; // IBS samples every op: keep the loads (data source op)
    bool modelled = false;     // the emulated PMU's cache model (pmc emulate --cache)
};
LoadEvents load_events() {
    LoadEvents e;
    pmc::CpuSignature cpu = pmc::cpu_signature();
    if (pmc::emulated_pmu()) { // under pmc emulate: QEMU's CPU model has no PMU; the plugin's cache model samples
        e.exact = "L1-dcache-loads:u";
        e.exact_name = "the cache model's data reads (L1-dcache-loads:u, Cachegrind's Dr)";
        e.sampled = "cpu/mem-loads,ldlat=3/Pu";
        e.sampled_name = "every Nth load, from the emulated PMU's cache model";
        e.modelled = true;
    } else if (cpu.vendor == pmc::Vendor::intel) {
        e.exact = "r81d0:u";
        e.exact_name = "MEM_INST_RETIRED.ALL_LOADS (r81d0)";
        e.sampled = "cpu/mem-loads,ldlat=3/Pu";
        e.sampled_name = "mem-loads, ldlat 3 (PEBS)";
    } else if (cpu.vendor == pmc::Vendor::amd || cpu.vendor == pmc::Vendor::hygon) {
        e.exact = "r0129:u";
        e.exact_name = "LsDispatch loads (r0129; AMD counts dispatched, not retired, loads)";
        e.sampled = "ibs_op//";
        e.sampled_name = "IBS op samples that are loads";
        e.filter_loads = true;
    } else {
        e.none_because = "this CPU (" + std::string(pmc::to_string(cpu.vendor)) +
                         ") has no load-latency sampling pmc knows (Intel PEBS ldlat or AMD IBS op)";
    }
    return e;
}

bool parse_u64(const char* s, std::uint64_t& out) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || !end || *end || end == s || s[0] == '-' || v == 0) return false;
    out = v;
    return true;
}
bool parse_list(const char* s, std::vector<std::uint64_t>& out) {
    out.clear();
    std::string item;
    for (const char* c = s;; ++c) {
        if (*c == ',' || *c == '\0') {
            std::uint64_t v;
            if (!parse_u64(item.c_str(), v)) return false;
            out.push_back(v);
            item.clear();
            if (*c == '\0') return true;
        } else {
            item += *c;
        }
    }
}

void print_header(const char* unit) {
    std::printf("%-6s %9s %12s %14s %14s %10s %10s %14s %8s  %s\n", "loop", unit, "iterations", "expected",
                "exact", "period", "samples", "samples x per.", "ratio", "bias check of the sampled event");
}

/// The load experiment: one row per loop and period. False if it cannot run here (reason in `why`).
bool run_loads(const LoadEvents& ev, std::uint64_t iterations, const std::vector<std::uint64_t>& periods,
               std::string& why) {
    alignas(64) static std::uint64_t line[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    auto exact = pmc::Counter::try_open(ev.exact);
    if (!exact) {
        why = "the exact load count '" + ev.exact + "' does not open: " + exact.failure().message;
        return false;
    }
    std::printf("exact: %s; sampled: %s (%s)\n", ev.exact_name.c_str(), ev.sampled_name.c_str(), ev.sampled.c_str());
    bool said_header = false;
    for (int per : {7, 8}) {
        for (std::uint64_t period : periods) {
            pmc::SamplerOptions o;
            o.period = period;
            o.fields = pmc::sample::ip | pmc::sample::addr | pmc::sample::weight | pmc::sample::data_src;
            auto s = pmc::Sampler::try_open(ev.sampled, o);
            if (!s) {
                why = "load-latency sampling '" + ev.sampled + "' does not open: " + s.failure().message;
                return false;
            }
            if (!said_header) { // with where modelled figures come from, once
                if (ev.modelled)
                    for (const auto& note : s->notes()) std::printf("note: %s\n", note.c_str());
                print_header("loads/it");
                said_header = true;
            }
            std::uint64_t load_samples = 0;
            auto count = [&](const pmc::Sample& x) {
                if (!ev.filter_loads || x.data_source.op == pmc::DataSource::Op::load) ++load_samples;
            };
            std::uint64_t before = exact->read();
            if (per == 7) loads7(line, iterations);
            else loads8(line, iterations);
            std::uint64_t loads = exact->read() - before;
            s->drain(count);
            pmc::BiasCheck check = s->stop(count);
            std::uint64_t est = load_samples * period;
            std::printf("%-6s %9d %12llu %14llu %14llu %10llu %10llu %14llu %8.4f  %s\n", per == 7 ? "7-load" : "8-load",
                        per, static_cast<unsigned long long>(iterations),
                        static_cast<unsigned long long>(iterations * static_cast<std::uint64_t>(per)),
                        static_cast<unsigned long long>(loads), static_cast<unsigned long long>(period),
                        static_cast<unsigned long long>(load_samples), static_cast<unsigned long long>(est),
                        loads ? static_cast<double>(est) / static_cast<double>(loads) : 0.0,
                        check.agrees ? "agrees" : "DISAGREES (see below)");
            if (!check.agrees) std::printf("        %s\n", check.warning.c_str());
        }
    }
    if (ev.modelled) {
        std::printf("\nratio = samples x period / exact loads. The emulated PMU takes every Nth load exactly, so there is no\n"
                    "shadow, and both loops come out alike. What is above 1 is pmc's own work while the sampler runs (the\n"
                    "reads around each loop, and the drain's, about 25 loads a sample), which the sampler counts too: the\n"
                    "bias check, against the sampler's own count, agrees within one period. A real PMU's load-latency\n"
                    "sampling misses the loads in its shadow.\n");
        return true;
    }
    std::printf("\nratio = samples x period / exact loads. Where it is far from 1 and differs between the 7- and 8-load\n"
                "loops, the loads hidden in the sampler's shadow are the reason: do not scale load-latency samples by\n"
                "the period.\n");
    return true;
}

/// The same method with page faults: loops touching `per` fresh pages per iteration. False if a check fails.
bool run_faults(std::uint64_t iterations, const std::vector<std::uint64_t>& periods, bool& skipped) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::printf("the method on page faults (a software event: no shadow, so samples x period should match):\n");
    print_header("pages/it");
    bool ok = true;
    for (int per : {7, 8}) {
        for (std::uint64_t period : periods) {
            // The fresh pages are mapped and freed a chunk at a time (drained before each unmap), so the memory
            // held stays at one chunk (16 MiB) whatever the iterations.
            const std::size_t chunk_pages = 4096;
            pmc::SamplerOptions o;
            o.period = period;
            o.fields = pmc::sample::addr;
            auto s = pmc::Sampler::try_open("page-faults", o);
            if (!s) {
                std::printf("SKIPPED: cannot sample page faults either: %s\n", s.failure().message.c_str());
                skipped = true;
                return true;
            }
            std::uint64_t samples = 0, in_loop = 0, lo = 0, hi = 0;
            auto count = [&](const pmc::Sample& x) {
                ++samples;
                in_loop += x.addr >= lo && x.addr < hi;
            };
            for (std::uint64_t left = iterations * static_cast<std::uint64_t>(per); left;) { // pages to touch
                const std::size_t pages = left < chunk_pages ? static_cast<std::size_t>(left) : chunk_pages;
                const std::size_t bytes = pages * page;
                char* mem = static_cast<char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
                if (mem == MAP_FAILED) {
                    std::fprintf(stderr, "pmc-example-load-count-bias: cannot map %zu bytes: %s\n", bytes,
                                 std::strerror(errno));
                    return false;
                }
                ::madvise(mem, bytes, MADV_NOHUGEPAGE);
                char* p = mem;
                for (std::size_t k = 0; k < pages; ++k, p += page) *p = 1;
                lo = reinterpret_cast<std::uint64_t>(mem);
                hi = lo + bytes;
                s->drain(count);
                lo = hi = 0;
                ::munmap(mem, bytes);
                left -= pages;
            }
            pmc::BiasCheck check = s->stop(count);
            const std::uint64_t expected = iterations * static_cast<std::uint64_t>(per);
            std::printf("%-6s %9d %12llu %14llu %14llu %10llu %10llu %14llu %8.4f  %s\n", per == 7 ? "7-page" : "8-page",
                        per, static_cast<unsigned long long>(iterations), static_cast<unsigned long long>(expected),
                        static_cast<unsigned long long>(check.exact), static_cast<unsigned long long>(period),
                        static_cast<unsigned long long>(samples), static_cast<unsigned long long>(check.estimated),
                        check.ratio, check.agrees ? "agrees" : "DISAGREES");
            if (!check.agrees) std::printf("        %s\n", check.warning.c_str());
            // The exact count holds the loop's faults and a few others (the sampler's own setup); each sample
            // stands for `period` of them.
            ok = ok && check.agrees && check.exact >= expected && in_loop + 1 >= expected / period;
        }
    }
    return ok;
}

} // namespace

int main(int argc, char** argv) {
    std::uint64_t iterations = 0;
    std::vector<std::uint64_t> periods;
    bool software = false;
    pmc_cli::CommandLine command_line("pmc-example-load-count-bias", usage);
    std::string iterations_text, periods_text;
    command_line.option("--iterations", iterations_text, "a positive whole number");
    command_line.option("--periods", periods_text, "positive whole numbers separated by commas");
    command_line.flag("--software", software);
    if (auto status = command_line.parse(argc, argv)) return *status;
    if (command_line.count("--iterations") > 0 && !parse_u64(iterations_text.c_str(), iterations))
        return command_line.usage_error("--iterations needs a positive whole number, not '" + iterations_text + "'");
    if (command_line.count("--periods") > 0 && !parse_list(periods_text.c_str(), periods))
        return command_line.usage_error("--periods needs positive whole numbers separated by commas (e.g. 1,10,100), "
                                        "not '" + periods_text + "'");

    std::string why;
    if (!software) {
        LoadEvents ev = load_events();
        if (ev.none_because.empty() &&
            run_loads(ev, iterations ? iterations : ev.modelled ? 100000 : 10000000,
                      !periods.empty() ? periods
                      : ev.modelled    ? std::vector<std::uint64_t>{1009, 10007, 100003}
                                       : std::vector<std::uint64_t>{10007, 100003, 1000003},
                      why))
            return 0;
        if (why.empty()) why = ev.none_because;
        std::printf("no load-latency sampling here: %s\n\n", why.c_str());
    }
    const std::uint64_t fault_iterations = iterations ? iterations : 1000;
    if (fault_iterations > (std::uint64_t{1} << 20)) {
        return command_line.usage_error("with page faults, at most 1048576 iterations (8 pages each, mapped and "
                                        "freed 16 MiB at a time)");
    }
    bool skipped = false;
    bool ok = run_faults(fault_iterations, periods.empty() ? std::vector<std::uint64_t>{1, 10, 100, 1000} : periods,
                         skipped);
    if (skipped) return 0;
    std::printf("%s\n", ok ? "page-fault method: every estimate agrees with its exact count"
                           : "A CHECK FAILED: an estimate disagrees with its exact count (see above)");
    if (!ok) return 1;
    if (!software) std::printf("SKIPPED: the load-latency shadow cannot be shown here: %s\n", why.c_str());
    return 0;
}
