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

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/personality.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
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
/// active. Reads the MSR where possible; otherwise, on Zen 1-3, counts raw event 0x0825 (SpecLockMapCommit; Zen
/// 2/3 SpecLockHiSpec) around one `lock xadd`: any count means active. Zen 4/5 list no such umask, so without the
/// MSR it cannot be checked there.
inline HazardReport speclockmap_status(const CpuModel& cpu = this_cpu()) {
    HazardReport r;
    if (cpu.zen == 0) {
        r.state = Hazard::not_applicable;
        r.detail = "only AMD Zen cores speculate past locked instructions this way (" + cpu.uarch + ")";
        return r;
    }
    if (auto msr = detail::read_msr(0, detail::amd_msr_ls_cfg2)) {
        const bool disabled = (*msr >> 54) & 1;
        r.state = disabled ? Hazard::absent : Hazard::present;
        r.detail = std::string("MSR 0xc0011020 bit 54 is ") + (disabled ? "set: SpecLockMap is disabled" : "clear: "
                   "SpecLockMap is active and locked instructions over-count");
        if (!disabled) r.fix = detail::speclockmap_fix;
        return r;
    }
    const std::string no_msr = "MSR 0xc0011020 cannot be read here (/dev/cpu/0/msr needs root and the msr module)";
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

/// Re-executes this program with address-space randomization off (personality ADDR_NO_RANDOMIZE), same arguments
/// and environment, so every run sees the same addresses. Call it first thing in main: it does not return when it
/// re-executes; it returns nullopt when randomization is already off (including in the re-executed program), and
/// the failure if it cannot be turned off.
[[nodiscard]] inline std::optional<Failure> reexec_without_aslr(char** argv) {
    if (!aslr_state().randomized) return std::nullopt;
    const int persona = ::personality(0xffffffff);
    if (persona == -1 || ::personality(static_cast<unsigned long>(persona) | ADDR_NO_RANDOMIZE) == -1) {
        const int err = errno;
        return make_failure(err, std::string("cannot turn address randomization off: personality() failed: ") +
                                     std::strerror(err) + ". Fix: run under `setarch -R`, or set "
                                     "kernel.randomize_va_space=0");
    }
    ::execve("/proc/self/exe", argv, environ);
    const int err = errno;
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
