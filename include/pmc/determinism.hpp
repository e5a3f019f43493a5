// SPDX-License-Identifier: MIT
// pmc/determinism.hpp: what, besides the counter, makes the same program count differently from run to run, and
// the one-call fixes. Effect sizes are measureme's, on rustc (design notes §4); see docs/exact-counts.md.
//
//   SpecLockMap (AMD Zen)  Zen retires instructions speculatively past a lock-prefixed instruction and does not
//                          roll the counters back on a mis-speculation, so whole loop iterations are over-counted.
//   ASLR                   different addresses change hashing, layout and branch outcomes: measureme saw
//                          +-2.5 M instructions of 43 G on one query until it re-executed without randomization.
//   allocator              jemalloc purges dirty pages on a 10 s timer (page faults and address reuse then depend on
//                          wall time); glibc moves its mmap threshold as memory is freed (where a large block lands
//                          depends on history). measureme also found allocation sizes depending on the length of
//                          the PID in a file name; pmc's own allocations do not depend on the PID (tested).
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/cpu.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/error.hpp>
#include <pmc/hybrid.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

PMC_BEGIN_NAMESPACE

/// The state of one thing that stands between a program and exact, repeatable counts.
enum class Hazard {
    absent,        ///< checked: not present
    present,       ///< checked: present (see `fix`)
    unknown,       ///< could not be checked here (see `detail`)
    not_applicable ///< does not apply to this machine
};

inline const char* to_string(Hazard h) {
    switch (h) {
    case Hazard::absent: return "absent";
    case Hazard::present: return "present";
    case Hazard::unknown: return "cannot be checked";
    case Hazard::not_applicable: return "not applicable";
    }
    return "?";
}

struct HazardReport {
    Hazard state = Hazard::unknown;
    std::string detail; ///< what was found, and how
    std::string fix;    ///< the exact fix when present (or how to make it checkable)
};

// ---- SpecLockMap -----------------------------------------------------------------------------------------------

namespace detail {
inline constexpr std::uint32_t amd_msr_ls_cfg2 = 0xc0011020; // bit 54 disables SpecLockMap (rr wiki, "Zen")
inline constexpr const char* speclockmap_fix =
    "as root, sudo modprobe msr, then set bit 54 of MSR 0xc0011020 on every CPU (wrmsr -p CPU from msr-tools; rr's "
    "scripts/zen_workaround.py does this); it is lost at reboot";

/// Reads an MSR through /dev/cpu/N/msr (root and the msr module); nullopt if that is not possible here.
inline std::optional<std::uint64_t> read_msr(int cpu, std::uint32_t msr) {
    const std::string path = "/dev/cpu/" + std::to_string(cpu) + "/msr";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::uint64_t value = 0;
    const ssize_t n = ::pread(fd, &value, sizeof value, static_cast<off_t>(msr));
    ::close(fd);
    if (n != static_cast<ssize_t>(sizeof value)) return std::nullopt;
    return value;
}

/// MSR 0xc0011020 as read on one CPU (nullopt: not readable there).
struct MsrReading {
    int cpu = 0;
    std::optional<std::uint64_t> value;
};

/// Pure: SpecLockMap's state from bit 54 of MSR 0xc0011020 on each online CPU. The bit is per CPU, so a machine
/// where the fix reached only some CPUs counts differently depending on where the thread runs: that is reported as
/// present, naming both sets. nullopt when no CPU's MSR could be read.
inline std::optional<HazardReport> speclockmap_from_msrs(const std::vector<MsrReading>& readings) {
    std::vector<int> set, clear, unreadable;
    for (const auto& r : readings) (r.value ? ((*r.value >> 54) & 1 ? set : clear) : unreadable).push_back(r.cpu);
    if (set.empty() && clear.empty()) return std::nullopt;
    HazardReport h;
    const std::string not_read =
        unreadable.empty() ? "" : "; it cannot be read on CPUs " + format_cpu_list(unreadable);
    if (!clear.empty()) {
        h.state = Hazard::present;
        h.detail = set.empty() ? "MSR 0xc0011020 bit 54 is clear on CPUs " + format_cpu_list(clear) +
                                     ": SpecLockMap is active and locked instructions over-count"
                               : "MSR 0xc0011020 bit 54 is mixed: set on CPUs " + format_cpu_list(set) +
                                     ", clear on CPUs " + format_cpu_list(clear) + ": SpecLockMap is active on the "
                                     "latter, so counts depend on where the thread runs";
        h.detail += not_read;
        h.fix = speclockmap_fix;
    } else if (!unreadable.empty()) {
        h.state = Hazard::unknown;
        h.detail = "MSR 0xc0011020 bit 54 is set on CPUs " + format_cpu_list(set) + not_read;
        h.fix = "read it on every CPU as root with the msr module loaded, or apply the fix on every CPU: " +
                std::string(speclockmap_fix);
    } else {
        h.state = Hazard::absent;
        h.detail = "MSR 0xc0011020 bit 54 is set on every online CPU (" + format_cpu_list(set) +
                   "): SpecLockMap is disabled";
    }
    return h;
}

inline void locked_increment(volatile long* p) {
#if PMC_ARCH_X86_64
    long one = 1;
    asm volatile("lock xaddq %0, %1" : "+r"(one), "+m"(*p) : : "memory");
#else
    __atomic_fetch_add(p, 1, __ATOMIC_SEQ_CST);
#endif
}
} // namespace detail

/// Whether AMD's SpecLockMap speculation (which over-counts retired instructions around locked instructions) is
/// active. Reads the MSR on every online CPU where possible (the bit is per CPU); otherwise, on Zen 1-3, counts raw
/// event 0x0825 (SpecLockMapCommit; Zen 2/3 SpecLockHiSpec) around one `lock xadd`: any count means active. Zen 4/5
/// list no such umask, so without the MSR it cannot be checked there.
inline HazardReport speclockmap_status(const CpuModel& cpu = this_cpu()) {
    HazardReport r;
    if (cpu.zen == 0) {
        r.state = Hazard::not_applicable;
        r.detail = "only AMD Zen cores speculate past locked instructions this way (" + cpu.uarch + ")";
        return r;
    }
    std::vector<detail::MsrReading> readings;
    for (int c : detail::online_cpus()) readings.push_back({c, detail::read_msr(c, detail::amd_msr_ls_cfg2)});
    if (auto from_msrs = detail::speclockmap_from_msrs(readings)) return *from_msrs;
    const std::string no_msr = "MSR 0xc0011020 cannot be read here (/dev/cpu/N/msr needs root and the msr module)";
    if (cpu.zen >= 4) {
        r.state = Hazard::unknown;
        r.detail = no_msr + ", and " + cpu.uarch + "'s event tables list no SpecLockMap umask for event 0x25";
        r.fix = "load the msr module and run as root (sudo modprobe msr), or apply the fix blindly: " +
                std::string(detail::speclockmap_fix);
        return r;
    }
    auto counter = Counter::try_open("r0825:u");
    if (!counter) {
        r.state = Hazard::unknown;
        const std::string& m = counter.failure().message;
        r.detail = no_msr + ", and event r0825 cannot be counted: " + m.substr(0, m.find('\n'));
        r.fix = "make hardware counting possible (pmc doctor), or load the msr module and run as root";
        return r;
    }
    static volatile long target = 0;
    std::uint64_t worst = 0;
    for (int i = 0; i < 8; ++i) {
        auto iv = counter->interval();
        detail::locked_increment(&target);
        worst = std::max(worst, iv.stop());
    }
    r.state = worst ? Hazard::present : Hazard::absent;
    r.detail = "r0825 (SpecLockMap commits) counted " + std::to_string(worst) + " around one lock xadd";
    if (worst) r.fix = detail::speclockmap_fix;
    return r;
}

// ---- ASLR ------------------------------------------------------------------------------------------------------

struct AslrState {
    bool randomized = true;          ///< addresses differ from run to run
    int randomize_va_space = -1;     ///< kernel.randomize_va_space (0 off, 1 stack/mmap, 2 also brk); -1 unreadable
    bool personality_disabled = false; ///< this process runs with ADDR_NO_RANDOMIZE (setarch -R, or a re-exec)
};

inline AslrState aslr_state() {
    AslrState s;
    if (auto text = detail::read_file("/proc/sys/kernel/randomize_va_space"))
        if (auto v = detail::parse_number(detail::trim(*text))) s.randomize_va_space = static_cast<int>(*v);
    const int persona = ::personality(0xffffffff);
    s.personality_disabled = persona != -1 && (persona & ADDR_NO_RANDOMIZE);
    s.randomized = s.randomize_va_space != 0 && !s.personality_disabled;
    return s;
}

inline HazardReport aslr_status() {
    const AslrState s = aslr_state();
    HazardReport r;
    r.state = s.randomized ? Hazard::present : Hazard::absent;
    r.detail = "kernel.randomize_va_space = " + std::to_string(s.randomize_va_space) +
               (s.personality_disabled ? "; this process runs without randomization (ADDR_NO_RANDOMIZE)" : "");
    if (s.randomized)
        r.fix = "call pmc::reexec_without_aslr(argv) first thing in main, or run under `setarch -R`";
    return r;
}

namespace detail {
/// Set in the environment of the re-executed program (to the name the program had, which the exec through
/// /proc/self/exe replaces with "exe"); removed again as soon as reexec_without_aslr() sees it.
inline constexpr const char* aslr_reexec_marker = "PMC_ASLR_REEXEC";

/// The calling thread's name (comm), as the kernel set it at exec: the basename of the executed path, 15 bytes.
inline std::string thread_name() {
    char name[17] = {};
    if (::prctl(PR_GET_NAME, name) != 0) return {};
    return name;
}

/// The target of /proc/self/exe; "" if unreadable.
inline std::string self_exe() {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf);
    return n > 0 && static_cast<std::size_t>(n) < sizeof buf ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

/// Pure: whether an executable path is the dynamic loader (ld-linux-x86-64.so.2, ld-linux-aarch64.so.1,
/// ld64.so.2, ld-musl-x86_64.so.1, ld.so): then the program was started as `LOADER PROGRAM ARGS` and
/// /proc/self/exe is the loader, not the program.
inline bool is_dynamic_loader(std::string_view path) {
    const auto slash = path.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
    const bool ld_name = base.substr(0, 3) == "ld-" || base.substr(0, 4) == "ld64" || base.substr(0, 5) == "ld.so";
    return ld_name && base.find(".so") != std::string_view::npos;
}
} // namespace detail

/// Re-executes this program with address-space randomization off (personality ADDR_NO_RANDOMIZE), same arguments
/// and environment, so every run sees the same addresses. Call it first thing in main: it does not return when it
/// re-executes; it returns nullopt when randomization is already off (including in the re-executed program, whose
/// name, which the exec through /proc/self/exe turns into "exe", it restores), and the failure if it cannot be
/// turned off. It re-executes at most once: the kernel clears ADDR_NO_RANDOMIZE when it executes a setuid or setgid
/// program (or one with file capabilities), so a program that finds randomization still on after its re-exec (the
/// environment variable PMC_ASLR_REEXEC says it was re-executed) returns that failure instead of looping. A program
/// started through the dynamic loader (`ld-linux-x86-64.so.2 ./prog`) is not re-executed either: /proc/self/exe is
/// the loader there.
[[nodiscard]] inline std::optional<Failure> reexec_without_aslr(char** argv) {
    const char* marker = std::getenv(detail::aslr_reexec_marker);
    const bool reexecuted = marker != nullptr;
    const std::string name = marker ? marker : "";
    if (reexecuted) ::unsetenv(detail::aslr_reexec_marker); // this program's own children do not see it
    if (!aslr_state().randomized) {
        if (reexecuted && !name.empty() && detail::thread_name() == "exe") ::prctl(PR_SET_NAME, name.c_str());
        return std::nullopt;
    }
    if (reexecuted)
        return make_failure(EPERM, "cannot turn address randomization off: it is still on after re-executing with "
                                   "personality(ADDR_NO_RANDOMIZE), so the kernel cleared that flag at exec (a setuid "
                                   "or setgid program, or one with file capabilities, loses it). Fix: set "
                                   "kernel.randomize_va_space=0 (sudo sysctl kernel.randomize_va_space=0; setarch -R "
                                   "does not survive such an exec either), or run a copy without the setuid bit");
    const std::string exe = detail::self_exe();
    if (detail::is_dynamic_loader(exe))
        return make_failure(ENOEXEC, "cannot re-execute without address randomization: this program was started "
                                     "through the dynamic loader (" + exe + "), and re-executing /proc/self/exe "
                                     "would run the loader without the program. Fix: run the program directly, or "
                                     "run the loader command under `setarch -R`");
    const int persona = ::personality(0xffffffff);
    if (persona == -1 || ::personality(static_cast<unsigned long>(persona) | ADDR_NO_RANDOMIZE) == -1) {
        const int err = errno;
        return make_failure(err, std::string("cannot turn address randomization off: personality() failed: ") +
                                     std::strerror(err) + ". Fix: run under `setarch -R`, or set "
                                     "kernel.randomize_va_space=0");
    }
    std::string current = detail::thread_name();
    if (current.empty()) current = "?";
    ::setenv(detail::aslr_reexec_marker, current.c_str(), 1);
    ::execve("/proc/self/exe", argv, environ);
    const int err = errno;
    ::unsetenv(detail::aslr_reexec_marker);
    ::personality(static_cast<unsigned long>(persona));
    return make_failure(err, std::string("cannot re-execute without address randomization: execve(/proc/self/exe) "
                                         "failed: ") + std::strerror(err) + ". Fix: run under `setarch -R`");
}

// ---- allocator -------------------------------------------------------------------------------------------------

namespace detail {
inline bool& malloc_stabilized() {
    static bool done = false;
    return done;
}
} // namespace detail

struct AllocatorReport {
    std::string allocator;             ///< "jemalloc", "tcmalloc", "glibc" or "unknown"
    std::vector<HazardReport> hazards; ///< one per finding (present, or absent after a check)
};

/// Which allocator this process uses and what in its settings makes addresses or page faults vary across runs.
inline AllocatorReport allocator_status() {
    AllocatorReport out;
    using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
    auto mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
    if (mallctl) {
        out.allocator = "jemalloc";
        for (const char* option : {"opt.dirty_decay_ms", "opt.muzzy_decay_ms"}) {
            ssize_t ms = -2;
            std::size_t len = sizeof ms;
            HazardReport h;
            if (mallctl(option, &ms, &len, nullptr, 0) != 0) {
                h.state = Hazard::unknown;
                h.detail = std::string("jemalloc: cannot read ") + option;
            } else {
                h.state = ms > 0 ? Hazard::present : Hazard::absent;
                h.detail = std::string("jemalloc ") + option + " = " + std::to_string(ms) +
                           (ms > 0 ? " ms: it returns pages to the kernel on a timer, so page faults and address "
                                     "reuse depend on wall time"
                                   : ": no timed purging");
                if (ms > 0) h.fix = "MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0 in the environment";
            }
            out.hazards.push_back(std::move(h));
        }
        return out;
    }
    if (::dlsym(RTLD_DEFAULT, "tc_malloc")) {
        out.allocator = "tcmalloc";
        out.hazards.push_back({Hazard::unknown, "tcmalloc releases memory on its own schedule; pmc cannot inspect it",
                               "use glibc malloc or jemalloc with decay off for exact runs"});
        return out;
    }
#if defined(__GLIBC__)
    out.allocator = "glibc";
    const char* env = std::getenv("MALLOC_MMAP_THRESHOLD_");
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    const bool fixed = detail::malloc_stabilized() || env ||
                       (tunables && std::strstr(tunables, "glibc.malloc.mmap_threshold"));
    HazardReport h;
    h.state = fixed ? Hazard::absent : Hazard::present;
    h.detail = fixed ? "glibc malloc: the mmap threshold is fixed"
                     : "glibc malloc: the mmap threshold moves as large blocks are freed, so where a large block "
                       "lands depends on what the program freed before";
    if (!fixed) h.fix = "call pmc::stabilize_malloc() first thing in main, or set MALLOC_MMAP_THRESHOLD_=131072";
    out.hazards.push_back(std::move(h));
#else
    out.allocator = "unknown";
#endif
    return out;
}

/// glibc: fixes the mmap and trim thresholds at their defaults, which turns off their dynamic adjustment.
inline void stabilize_malloc() {
#if defined(__GLIBC__)
    ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    ::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    detail::malloc_stabilized() = true;
#endif
}

PMC_END_NAMESPACE
