// Determinism hazards on the real machine: ASLR and its re-exec (for real, in fresh processes), SpecLockMap,
// allocator settings, and pmc's own allocations not depending on the PID.
#include "catch.hpp"
#include "test_support.hpp"

#include <pmc/counter.hpp>
#include <pmc/determinism.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::string run(const std::string& command) {
    std::string out;
    if (FILE* p = ::popen(command.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

const std::string probe = PMC_DETERMINISM_PROBE;

} // namespace

TEST_CASE("ASLR state matches the kernel setting and this process's personality", "[system][determinism]") {
    const auto s = pmc::aslr_state();
    std::ifstream in("/proc/sys/kernel/randomize_va_space");
    int setting = -1;
    in >> setting;
    CHECK(s.randomize_va_space == setting);
    CHECK(s.randomized == (setting != 0 && !s.personality_disabled));
    const auto report = pmc::aslr_status();
    CHECK(report.state == (s.randomized ? pmc::Hazard::present : pmc::Hazard::absent));
    if (s.randomized) CHECK_THAT(report.fix, ContainsSubstring("reexec_without_aslr"));
}

TEST_CASE("re-executing without ASLR gives the same addresses in every run", "[system][determinism]") {
    const std::string a = run(probe + " aslr"), b = run(probe + " aslr");
    INFO("run 1: " << a << "run 2: " << b);
    REQUIRE_THAT(a, ContainsSubstring("stack 0x"));
    CHECK(a == b);
    CHECK_THAT(a, ContainsSubstring("randomized 0"));
    if (pmc::aslr_state().randomize_va_space != 0 && !pmc::aslr_state().personality_disabled) {
        // Without the re-exec the kernel randomizes: the stack moves between runs.
        const std::string c = run(probe + " aslr --keep-aslr"), d = run(probe + " aslr --keep-aslr");
        INFO("kept ASLR: " << c << d);
        CHECK(c != d);
        CHECK_THAT(c, ContainsSubstring("randomized 1"));
    }
}

TEST_CASE("glibc's moving mmap threshold is reported until it is fixed", "[system][determinism]") {
#if defined(__GLIBC__)
    const std::string before = run("env -u MALLOC_MMAP_THRESHOLD_ -u GLIBC_TUNABLES " + probe + " allocator");
    CHECK_THAT(before, ContainsSubstring("allocator glibc"));
    CHECK_THAT(before, ContainsSubstring("present: glibc malloc: the mmap threshold moves as"));
    const std::string fixed = run("MALLOC_MMAP_THRESHOLD_=131072 " + probe + " allocator");
    CHECK_THAT(fixed, ContainsSubstring("absent: glibc malloc: the mmap threshold is fixed"));
    pmc::stabilize_malloc();
    auto report = pmc::allocator_status();
    REQUIRE(report.hazards.size() == 1);
    CHECK(report.hazards[0].state == pmc::Hazard::absent);
#endif
}

TEST_CASE("jemalloc's timed purging is reported, and its fix recognised", "[system][determinism]") {
    std::string lib;
    for (const char* candidate : {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                                  "/usr/lib64/libjemalloc.so.2"})
        if (::access(candidate, R_OK) == 0) lib = candidate;
    if (lib.empty()) {
        WARN("libjemalloc2 is not installed: jemalloc detection checked only where it is (scripts/install-deps "
             "installs it)");
        return;
    }
    const std::string with_decay = run("LD_PRELOAD=" + lib + " " + probe + " allocator");
    CHECK_THAT(with_decay, ContainsSubstring("allocator jemalloc"));
    CHECK_THAT(with_decay, ContainsSubstring("present: jemalloc opt.dirty_decay_ms = 10000"));
    const std::string without = run("LD_PRELOAD=" + lib + " MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0 " + probe +
                                    " allocator");
    CHECK_THAT(without, ContainsSubstring("absent: jemalloc opt.dirty_decay_ms = 0"));
    CHECK_THAT(without, ContainsSubstring("absent: jemalloc opt.muzzy_decay_ms = 0"));
}

TEST_CASE("SpecLockMap: not applicable off Zen, and never a silent guess on Zen", "[system][determinism]") {
    auto intel = pmc::identify(pmc::decode_signature("GenuineIntel", 0x000506E3));
    CHECK(pmc::speclockmap_status(intel).state == pmc::Hazard::not_applicable);
    const bool msr_readable = pmc::detail::read_msr(0, 0xc0011020).has_value();
    auto zen5 = pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00B00F21));
    auto r5 = pmc::speclockmap_status(zen5);
    if (msr_readable) {
        CHECK(r5.state != pmc::Hazard::unknown);
        CHECK_THAT(r5.detail, ContainsSubstring("bit 54"));
    } else {
        CHECK(r5.state == pmc::Hazard::unknown);
        CHECK_THAT(r5.detail, ContainsSubstring("list no SpecLockMap umask"));
        CHECK_THAT(r5.fix, ContainsSubstring("0xc0011020"));
    }
    auto zen2 = pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00870F10));
    auto r2 = pmc::speclockmap_status(zen2);
    if (!msr_readable && !pmc::has_core_pmu()) {
        CHECK(r2.state == pmc::Hazard::unknown);
        CHECK_THAT(r2.detail, ContainsSubstring("r0825 cannot be counted"));
    }
    const auto here = pmc::speclockmap_status();
    INFO("this machine: " << pmc::to_string(here.state) << ": " << here.detail);
    if (pmc::this_cpu().zen == 0) CHECK(here.state == pmc::Hazard::not_applicable);
}

// ---- pmc's own allocations do not depend on the PID ----------------------------------------------------------

namespace {
/// Runs the probe's allocation trace in a process whose PID follows `last_pid` (chosen through ns_last_pid).
std::string allocation_trace_with_pid_after(int last_pid) {
    int fds[2];
    if (::pipe(fds) != 0) return "pipe failed";
    {
        std::ofstream ns("/proc/sys/kernel/ns_last_pid");
        ns << last_pid;
    }
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(fds[1], 1);
        ::close(fds[0]);
        ::execl(probe.c_str(), probe.c_str(), "allocations", static_cast<char*>(nullptr));
        _exit(127);
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return out;
}
} // namespace

TEST_CASE("pmc allocates the same sizes whatever the length of the PID", "[system][determinism]") {
    if (::geteuid() != 0 || ::access("/proc/sys/kernel/ns_last_pid", W_OK) != 0) {
        WARN("needs root to choose PIDs through /proc/sys/kernel/ns_last_pid");
        return;
    }
    const std::string four = allocation_trace_with_pid_after(4000);
    const std::string five = allocation_trace_with_pid_after(30000);
    const auto colon4 = four.find(':'), colon5 = five.find(':');
    REQUIRE(colon4 != std::string::npos);
    REQUIRE(colon5 != std::string::npos);
    INFO("child " << four.substr(0, colon4) << " vs " << five.substr(0, colon5));
    REQUIRE(four.substr(0, colon4).size() != five.substr(0, colon5).size()); // PIDs of different lengths
    CHECK(four.substr(colon4) == five.substr(colon5));
    CHECK(four.size() - colon4 > 10); // something was traced
}
