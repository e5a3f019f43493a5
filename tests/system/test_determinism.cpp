// SPDX-License-Identifier: MIT
// Determinism hazards on the real machine: ASLR and its re-exec (for real, in fresh processes), SpecLockMap,
// allocator settings, and pmc's own allocations not depending on the PID.
#include "catch.hpp"
#include "command.hpp"
#include "test_support.hpp"

#include <pmc/counter.hpp>
#include <pmc/determinism.hpp>

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

/// The command's stdout.
std::string run(const std::string& command) { return pmc_test::run_command(command).out; }

const std::string probe = PMC_DETERMINISM_PROBE;

/// The command's stdout and stderr, and its exit status.
pmc_test::CommandResult run_status(const std::string& command) { return pmc_test::run_command(command + " 2>&1"); }

/// Whether a program started from here runs with randomized addresses (the re-exec has something to do).
bool aslr_on_here() {
    const auto s = pmc::aslr_state();
    return s.randomize_va_space != 0 && !s.personality_disabled;
}

/// The name (comm) the kernel gives a program executed from `path`: its basename, cut to 15 bytes.
std::string comm_of(const std::string& path) { return path.substr(path.rfind('/') + 1).substr(0, 15); }

/// The ELF interpreter (dynamic loader) of a 64-bit executable; "" for none.
std::string elf_interpreter(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    Elf64_Ehdr eh{};
    if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || eh.e_ident[EI_CLASS] != ELFCLASS64) return "";
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph{};
        in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * eh.e_phentsize));
        if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return "";
        if (ph.p_type != PT_INTERP) continue;
        std::string interp(ph.p_filesz, '\0');
        in.seekg(static_cast<std::streamoff>(ph.p_offset));
        if (!in.read(&interp[0], static_cast<std::streamsize>(interp.size()))) return "";
        return interp.c_str();
    }
    return "";
}

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

TEST_CASE("the re-executed program keeps its name and does not pass the marker on", "[system][determinism]") {
    if (!aslr_on_here())
        PMC_SKIP("address randomization is off here: nothing is re-executed, so there is no name to restore");
    // An exec through /proc/self/exe names the process "exe"; reexec_without_aslr() restores the name it had.
    const std::string out = run(probe + " aslr");
    INFO(out);
    CHECK_THAT(out, ContainsSubstring("randomized 0 name " + comm_of(probe) + " marker -"));
}

TEST_CASE("still randomized after the re-exec: a failure, not another exec", "[system][determinism]") {
    if (!aslr_on_here())
        PMC_SKIP("address randomization is off here: reexec_without_aslr() returns before looking at the marker");
    // The second entry: the marker says this process is the re-executed copy, yet ASLR is on (the kernel dropped
    // ADDR_NO_RANDOMIZE at exec). Without the check this would exec again (forever, for a setuid program).
    const auto r = run_status("PMC_ASLR_REEXEC=pmc-determinism " + probe + " aslr");
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, ContainsSubstring("still on after re-executing"));
    CHECK_THAT(r.out, ContainsSubstring("kernel.randomize_va_space=0"));
    CHECK_THAT(r.out, !ContainsSubstring("stack 0x"));
}

TEST_CASE("a setuid program re-executes once and then reports that ASLR stays on", "[system][determinism]") {
    if (!aslr_on_here()) PMC_SKIP("address randomization is off here: nothing to re-execute");
    char dir[] = "/tmp/pmc-setuid-probe-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string copy = std::string(dir) + "/probe";
    REQUIRE(run_status("cp " + probe + " " + copy).status == 0);
    REQUIRE(::chmod(copy.c_str(), 04755) == 0);
    // The kernel clears ADDR_NO_RANDOMIZE when it executes a setuid program (PER_CLEAR_ON_SETID), so before the
    // marker this re-executed itself forever; `timeout` turns that into status 124.
    const auto r = run_status("timeout 20 " + copy + " aslr");
    run_status(std::string("rm -rf ") + dir);
    INFO(r.out);
    REQUIRE(r.status != 124);
    if (r.out.find("randomized 0") != std::string::npos)
        PMC_SKIP("the setuid bit is not honoured here (nosuid mount or no_new_privs): the re-exec kept ASLR off");
    CHECK(r.status == 2);
    CHECK_THAT(r.out, ContainsSubstring("still on after re-executing"));
}

TEST_CASE("a program started through the dynamic loader is not re-executed as the loader", "[system][determinism]") {
    CHECK(pmc::detail::is_dynamic_loader("/lib64/ld-linux-x86-64.so.2"));
    CHECK(pmc::detail::is_dynamic_loader("/lib/ld-linux-aarch64.so.1"));
    CHECK(pmc::detail::is_dynamic_loader("/lib64/ld64.so.2"));
    CHECK(pmc::detail::is_dynamic_loader("/lib/ld-musl-x86_64.so.1"));
    CHECK_FALSE(pmc::detail::is_dynamic_loader(probe));
    CHECK_FALSE(pmc::detail::is_dynamic_loader("/usr/bin/ld"));
    CHECK_FALSE(pmc::detail::is_dynamic_loader("/usr/bin/ld-wrapper"));
}

TEST_CASE("a program run as `ld.so PROGRAM` is not re-executed as the loader", "[system][determinism]") {
    const std::string loader = elf_interpreter(probe);
    if (loader.empty()) PMC_SKIP("the probe has no dynamic loader (a static build): nothing to start it through");
    if (!aslr_on_here()) PMC_SKIP("address randomization is off here: nothing to re-execute");
    // Re-executing /proc/self/exe (the loader) with the program's argv would make the loader run "aslr".
    const auto r = run_status(loader + " " + probe + " aslr");
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, ContainsSubstring("started through the dynamic loader"));
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
    if (lib.empty())
        PMC_SKIP("libjemalloc2 is not installed: jemalloc detection is checked only where it is (scripts/install-deps "
                 "installs it)");
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

TEST_CASE("SpecLockMap's MSR is judged on every online CPU", "[system][determinism]") {
    using pmc::detail::MsrReading;
    using pmc::detail::speclockmap_from_msrs;
    const std::uint64_t set = std::uint64_t{1} << 54, clear = 0x1234;
    CHECK_FALSE(speclockmap_from_msrs({{0, std::nullopt}, {1, std::nullopt}}).has_value());
    auto all_set = speclockmap_from_msrs({{0, set}, {1, set | clear}});
    REQUIRE(all_set);
    CHECK(all_set->state == pmc::Hazard::absent);
    CHECK_THAT(all_set->detail, ContainsSubstring("set on every online CPU (0-1)"));
    auto all_clear = speclockmap_from_msrs({{0, clear}, {1, clear}});
    REQUIRE(all_clear);
    CHECK(all_clear->state == pmc::Hazard::present);
    CHECK_THAT(all_clear->detail, ContainsSubstring("clear on CPUs 0-1"));
    CHECK_THAT(all_clear->fix, ContainsSubstring("every CPU"));
    // The fix applied to CPU 0 only (the old check read CPU 0 and called it absent).
    auto mixed = speclockmap_from_msrs({{0, set}, {1, clear}, {2, clear}, {3, set}});
    REQUIRE(mixed);
    CHECK(mixed->state == pmc::Hazard::present);
    CHECK_THAT(mixed->detail, ContainsSubstring("mixed: set on CPUs 0,3, clear on CPUs 1-2"));
    auto partial = speclockmap_from_msrs({{0, set}, {1, std::nullopt}});
    REQUIRE(partial);
    CHECK(partial->state == pmc::Hazard::unknown);
    CHECK_THAT(partial->detail, ContainsSubstring("cannot be read on CPUs 1"));
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
    if (::geteuid() != 0 || ::access("/proc/sys/kernel/ns_last_pid", W_OK) != 0)
        PMC_SKIP("needs root to choose PIDs through /proc/sys/kernel/ns_last_pid");
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
