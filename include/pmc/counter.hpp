// SPDX-License-Identifier: MIT
// pmc/counter.hpp: pmc::Counter, a RAII counter opened from an event string, and pmc::Interval.
//
//     pmc::Counter c{"instructions:u"};          // or "page-faults", "msr/tsc/", "wall-time", "tsc", ...
//     auto iv = c.interval();                   // starts now
//     work();
//     std::uint64_t n = iv.stop();
//
// How a read works. At open pmc calls perf_event_open (this thread, any CPU) and maps the event's control page.
// If the page says user-space rdpmc is allowed (cap_user_rdpmc) and the event sits on a hardware counter
// (index != 0), pmc caches the counter number, the offset and the counter width under the page's seqlock. A read
// is then: check the owner thread, compare the page's lock word with the cached one, fence, rdpmc, compare the
// lock word again, sign-extend the raw value by the page's pmc_width and add the cached offset. The kernel
// rewrites the page, bumping the lock, whenever it schedules the event in again, possibly on another counter or
// with a new offset (after a context switch, multiplexing, or a counter overflow). A changed lock sends the read
// to a cold path that re-reads the page under the seqlock, re-caches it and returns that consistent value; if the
// event is not on a counter at that moment (index 0) it is read with read(). So the common read costs two loads
// and compares of one word over a bare rdpmc, and rdpmc runs only with a counter number that the page published
// and has not changed since (never counter "index 0 - 1": on arm64 that read traps). The reading is the kernel's
// 64-bit count, so intervals are plain differences modulo 2^64; counter wrap-around within pmc_width bits is
// absorbed by the sign extension plus the offset the kernel adjusts on overflow (see tests/emulated).
//
// Events the kernel does not put on a user-readable counter (software events, msr/tsc/, or rdpmc disabled) are
// read with read(2). "wall-time" and "tsc" are read with rdtsc and never enter the kernel. Under `pmc emulate`
// (QEMU user mode with pmc's plugin: pmc/emulated.hpp) the instruction events open on the emulated PMU instead,
// and a read is a request to the emulator, exact at the read.
//
// A perf counter counts only the thread that opened it. Reading it from another thread, or in a child process
// after fork(), raises pmc::error instead of returning another thread's (or a stale) number.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/clock.hpp>
#include <pmc/detail/explain.hpp>
#include <pmc/detail/page.hpp>
#include <pmc/detail/sys.hpp>
#include <pmc/emulated.hpp>
#include <pmc/error.hpp>
#include <pmc/event.hpp>
#include <pmc/hybrid.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE

/// How reads are ordered against the code around them (a template choice of BasicCounter).
namespace serialize {
/// lfence before the read: earlier instructions finish first. Cheap (~18 ns with rdtsc on our VMs); Linux makes
/// lfence dispatch-serializing on AMD too. The default, as in nanoBench.
struct lfence {
    static constexpr const char* name = "lfence";
    BOOST_FORCEINLINE static void before() noexcept { detail::lfence(); }
};
/// mfence before the read: also waits for earlier stores to be globally visible.
struct mfence {
    static constexpr const char* name = "mfence";
    BOOST_FORCEINLINE static void before() noexcept { detail::mfence(); }
};
/// cpuid before the read: fully serializing, as measureme does. Very slow in a VM (a VM exit, ~6 us here).
struct cpuid {
    static constexpr const char* name = "cpuid";
    BOOST_FORCEINLINE static void before() noexcept { detail::cpuid_barrier(); }
};
/// No fence: the read may execute before earlier instructions finish. For throughput-style sampling only.
struct none {
    static constexpr const char* name = "none";
    BOOST_FORCEINLINE static void before() noexcept { detail::compiler_barrier(); }
};
} // namespace serialize

/// Counter width handling (a template choice of BasicCounter).
namespace width {
/// Sign-extend by the pmc_width the kernel publishes in the mmap page (checked at open).
struct from_page {
    static constexpr unsigned bits = 0;
};
/// Assume a fixed width, checked against the page at open (open fails on a mismatch); saves a load per read.
template <unsigned Bits>
struct fixed {
    static_assert(Bits >= 8 && Bits <= 64, "counter width must be 8..64 bits");
    static constexpr unsigned bits = Bits;
};
} // namespace width

/// Where a counter's value comes from (a template choice of BasicCounter).
namespace source {
struct any {};       ///< decided at open from the event string: rdpmc, read(), tsc or wall-time
struct rdpmc {};     ///< user-space rdpmc only: open fails, with the reason, when the kernel does not allow it
struct tsc {};       ///< the "tsc" counter only
struct wall_time {}; ///< the "wall-time" counter only
} // namespace source

/// How an opened counter is read.
enum class ReadPath : std::uint8_t {
    rdpmc,              ///< user-space rdpmc of a hardware counter
    syscall,            ///< read(2) of the perf fd (software events, or rdpmc not allowed)
    tsc,                ///< rdtsc
    wall_time,          ///< rdtsc converted to nanoseconds
    clock,              ///< clock_gettime(CLOCK_MONOTONIC), for wall-time where the TSC cannot be used
    rdpmc_difference,   ///< a composite (instructions-minus-irqs): two rdpmc under one fence
    syscall_difference, ///< a composite read with one read(2) of its group
    syscall_sum,        ///< a hybrid CPU's event opened on both core types: two read(2), added
    emulated,           ///< the emulated PMU of `pmc emulate`: a request to QEMU's plugin (pmc/emulated.hpp)
};

/// The read path as this architecture executes it (AArch64: `mrs` of the PMU registers and of CNTVCT_EL0).
inline const char* to_string(ReadPath p) {
    switch (p) {
    case ReadPath::rdpmc: return PMC_ARCH_AARCH64 ? "mrs" : "rdpmc";
    case ReadPath::syscall: return "read()";
    case ReadPath::tsc: return PMC_ARCH_AARCH64 ? "cntvct" : "rdtsc";
    case ReadPath::wall_time: return PMC_ARCH_AARCH64 ? "cntvct->ns" : "rdtsc->ns";
    case ReadPath::clock: return "clock_gettime";
    case ReadPath::rdpmc_difference: return PMC_ARCH_AARCH64 ? "2 x mrs" : "2 x rdpmc";
    case ReadPath::syscall_difference: return "group read()";
    case ReadPath::syscall_sum: return "read() x 2, summed";
    case ReadPath::emulated: return "emulator";
    }
    return "?";
}

/// A perf event's count with how long it was enabled and actually counting (they differ when multiplexed).
struct Reading {
    std::uint64_t value = 0;
    std::uint64_t time_enabled = 0;
    std::uint64_t time_running = 0;
};

/// Hybrid CPUs: how a hardware event is opened when the thread could run on either core type.
enum class HybridPolicy {
    require_pinned, ///< refuse unless the thread is confined to one core type (pmc::pin_this_thread)
    sum_core_types, ///< open the event on every core type's PMU and add the counts (read with read())
};

/// How to open a counter, beyond the event string.
struct OpenOptions {
    /// Also count the threads and processes this thread creates after opening (perf's inherit): the kernel adds
    /// their counts to this counter. rdpmc sees only the calling thread's counter, so such a counter is read with
    /// read(), and may be read from any thread.
    bool count_children = false;
    HybridPolicy hybrid = HybridPolicy::require_pinned;
    /// Count another process (its pid) instead of the calling thread, as perf stat does for a command. Read with
    /// read(), from any thread.
    pid_t pid = 0;
    /// Start counting when the counted process next calls exec (with `pid`: the command pmc count starts).
    bool enable_on_exec = false;
    /// perf's fallback for a user the kernel does not let count kernel mode (perf_event_paranoid above 1 without
    /// CAP_PERFMON, the kernel's default for non-root users): an event whose string chose no mode (no u, k or h
    /// modifier) is opened again with exclude_kernel=1 and exclude_hv=1, counting user mode only, as perf does
    /// (perf then shows it as 'page-faults:u': see name_as_opened()); notes() says so. false: fail instead.
    bool exclude_kernel_fallback = true;
    /// Where the PMUs are described (tests point this at a fake tree).
    std::string sysfs_root{default_sysfs_root};
};

/// Whether perf's exclude_kernel fallback may apply to `attr`, the attr of `spec` about to be opened: it counts
/// kernel mode and the string chose no mode. An explicit mode ('page-faults:k', ':uk') is kept, and refused.
inline bool kernel_fallback_applies(const EventSpec& spec, const perf_event_attr& attr) {
    return !attr.exclude_kernel && !attr.exclude_user && spec.modifiers.find_first_of("ukh") == std::string::npos;
}

/// `attr` as perf opens it again after the kernel refused kernel-mode counting: user mode only.
inline perf_event_attr without_kernel_mode(perf_event_attr attr) {
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return attr;
}

/// The name perf shows for `spec` opened as `opened`: spec.name, plus perf's 'u' suffix when the exclude_kernel
/// fallback made it count user mode only ("page-faults:u"; just "u" after a name with a ':' or '/', as perf
/// writes "cpu/event=0x3c/u").
inline std::string name_as_opened(const EventSpec& spec, const perf_event_attr& opened) {
    if (!opened.exclude_kernel || !kernel_fallback_applies(spec, spec.attr)) return spec.name;
    return spec.name + (spec.name.find_first_of(":/") == std::string::npos ? ":u" : "u");
}

namespace detail {
/// perf applies the fallback only when perf_event_paranoid is above 1 (or unreadable): at 1 and below the kernel
/// refuses for another reason (a security policy), which user-mode counting does not get around.
inline bool paranoid_allows_kernel_fallback() {
    const auto level = perf_event_paranoid();
    return !level || *level > 1;
}
} // namespace detail

/// Whether this process may count kernel mode of its own threads. false where the kernel refuses (a software event
/// that counts kernel mode fails to open with EACCES or EPERM): pmc and perf then open events that chose no mode in
/// user mode only. One perf_event_open, closed at once.
inline bool kernel_counting_allowed() {
    perf_event_attr probe{};
    probe.size = sizeof probe;
    probe.type = PERF_TYPE_SOFTWARE;
    probe.config = PERF_COUNT_SW_DUMMY;
    probe.disabled = 1;
    const int fd = detail::system_calls().perf_event_open(&probe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0) {
        detail::FileDescriptor close_it(fd);
        return true;
    }
    return errno != EACCES && errno != EPERM;
}

/// The attr perf stat ends up opening for `spec` as this user: `attr`, or with perf's exclude_kernel fallback
/// where it applies (see OpenOptions::exclude_kernel_fallback) and this user may not count kernel mode.
inline perf_event_attr as_this_user_opens_it(const EventSpec& spec, const perf_event_attr& attr) {
    if (kernel_fallback_applies(spec, attr) && detail::paranoid_allows_kernel_fallback() && !kernel_counting_allowed())
        return without_kernel_mode(attr);
    return attr;
}

namespace detail {

/// What a counter knows that the hot path does not need.
struct CounterInfo {
    EventSpec spec;
    perf_event_attr attr{};       ///< as finally opened (perf events)
    perf_event_attr minus_attr{}; ///< difference counters: the subtracted event, as opened
    pid_t pid = 0;                ///< process that opened it
    std::vector<std::string> notes;
    unsigned width = 64;
    std::uint64_t opened_ns = 0;  ///< emulated counters: CLOCK_MONOTONIC at open, for their times
};

enum class Requirement { any, rdpmc, tsc, wall_time };

/// The cached state of one hardware counter read with rdpmc: valid while the page's lock equals `seq`.
struct RdpmcCache {
    std::uint32_t index = 0; ///< the page's index - 1: the rdpmc counter number
    std::uint32_t seq = 1;   ///< the page's lock when this was filled; odd: nothing valid (the lock is even)
    std::int64_t offset = 0; ///< the page's offset
    const perf_event_mmap_page* page = nullptr;
    std::uint8_t shift = 0;  ///< 64 - pmc_width

    /// The kernel's count from a raw rdpmc value read while the cache was valid.
    BOOST_FORCEINLINE std::int64_t count(std::uint64_t raw, unsigned sign_shift) const noexcept {
        return offset + sign_extend(raw, sign_shift);
    }
    void invalidate() noexcept {
        seq = 1;
        index = 0; // a counter number that is harmless to read until the cache is valid again
    }
};

/// Everything a counter holds. The first 64 bytes are all that the rdpmc and wall-time reads touch (AArch64's
/// wall-time also reads time_ticks, just past them).
struct CounterCore {
    ReadPath path = ReadPath::syscall;
    std::uint32_t time_shift = 0;          ///< wall-time: ns = time_zero + (ticks * time_mult) >> time_shift
    std::uint64_t time_mult = 0;
    std::uint64_t time_zero = 0;
    std::uint64_t fast_owner = UINT64_MAX; ///< `owner` while an rdpmc fast path may run, else never matches:
                                           ///< one compare checks both the thread and the path
    RdpmcCache a;                          ///< the counter (for a difference: the event subtracted from)
    ShortTicks time_ticks;                 ///< wall-time: a narrower-than-64-bit timer's wrap (identity on x86)
    std::uint64_t owner = UINT64_MAX;      ///< opener's thread token; never matches when closed or moved from
    RdpmcCache b;                          ///< difference counters: the subtracted event

    bool any_thread = false; ///< counts children (inherit): read() may come from any thread
    std::uint64_t emulated_event = 0; ///< ReadPath::emulated: a modelled event's code (emulated::Event), 0: instructions
    FileDescriptor fd;   ///< the event (for a difference: the group leader)
    FileDescriptor fd_b; ///< difference counters: the subtracted event
    Mapping map, map_b;
    std::unique_ptr<CounterInfo> info;

    CounterCore() = default;
    CounterCore(CounterCore&& o) noexcept { *this = std::move(o); }
    CounterCore& operator=(CounterCore&& o) noexcept {
        if (this == &o) return *this;
        path = std::exchange(o.path, ReadPath::syscall);
        time_shift = o.time_shift;
        time_mult = o.time_mult;
        time_zero = o.time_zero;
        time_ticks = o.time_ticks;
        fast_owner = std::exchange(o.fast_owner, UINT64_MAX);
        a = std::exchange(o.a, RdpmcCache{});
        owner = std::exchange(o.owner, UINT64_MAX);
        b = std::exchange(o.b, RdpmcCache{});
        emulated_event = o.emulated_event;
        any_thread = std::exchange(o.any_thread, false); // a moved-from counter is read by no thread
        fd = std::move(o.fd);
        fd_b = std::move(o.fd_b);
        map = std::move(o.map);
        map_b = std::move(o.map_b);
        info = std::move(o.info);
        return *this;
    }

    bool is_difference() const noexcept {
        return path == ReadPath::rdpmc_difference || path == ReadPath::syscall_difference;
    }
};

/// Reports a read from a thread other than the opener, after fork(), or of a moved-from counter.
[[noreturn]] BOOST_NOINLINE PMC_COLD inline void wrong_thread(const CounterCore& c) {
    if (!c.info) raise(make_failure(EBADF, "read of a pmc counter that was moved from or never opened"));
    const std::string& name = c.info->spec.text;
    if (::getpid() != c.info->pid)
        raise(make_failure(ECHILD, concat({"counter '", name, "' was opened by process ", decimal(c.info->pid),
                                           " and read in process ", decimal(::getpid()),
                                           " after fork(): it does not count the child. Open a new counter in the "
                                           "child."})));
    raise(make_failure(EPERM, concat({"counter '", name, "' was read from a thread that did not open it: a perf "
                                      "counter counts only the thread that opened it, so this read would be another "
                                      "thread's count (or garbage, with rdpmc). Open one counter per thread."})));
}

/// read(2) of a perf fd, retried on EINTR, and on ECHILD: from Linux 6.6 a PERF_FORMAT_GROUP read of a group that
/// counts children (inherit) fails with ECHILD while a counted thread or process exits, because its copy of the
/// group is taken apart member by member and the kernel refuses to add up a half-removed copy. That is transient:
/// let the exit finish and read again (bounded, in case it is not).
///
/// read_perf_fd, read_fd and read_with_syscall are inlined into their callers (read_slow): every call frame around
/// a system call costs a mispredicted return afterwards where the kernel clears the return-stack predictor on
/// entry (SRSO "Safe RET" on AMD Zen), 8-20 ns each here; three such frames made pmc's read(2) path 1.05-1.17x a
/// bare read(2) (docs/hot-path.md).
BOOST_FORCEINLINE ssize_t read_perf_fd(int fd, void* buf, std::size_t want) {
    for (int exiting = 0;;) {
        const ssize_t got = system_calls().read(fd, buf, want);
        if (got >= 0) return got;
        if (errno == EINTR) continue;
        if (errno != ECHILD || ++exiting > 100000) return got;
        ::sched_yield();
    }
}

/// read(2) of one perf fd: the count plus time enabled/running. With `group` (a difference counter's leader), one
/// read of the group (PERF_FORMAT_GROUP: nr, enabled, running, then one value per member) gives both counts at the
/// same instant, and the value is the first minus the second.
[[noreturn]] BOOST_NOINLINE PMC_COLD inline void read_fd_failed(ssize_t n, int err, const CounterInfo* info) {
    const std::string name = info ? info->spec.text : "?";
    if (n == 0)
        raise(make_failure(EIO, concat({"counter '", name, "' is in an error state: the kernel could not schedule "
                                        "it (a pinned ':D' event whose PMU is full). Drop ':D' or free counters."})));
    raise(make_failure(err, concat({"read() of counter '", name, "' failed: ",
                                    n < 0 ? std::strerror(err) : "short read"})));
}
BOOST_FORCEINLINE Reading read_fd(int fd, bool group, const CounterInfo* info) {
    std::uint64_t buf[5] = {0, 0, 0, 0, 0};
    const std::size_t want = group ? sizeof buf : 3 * sizeof(std::uint64_t);
    const ssize_t n = read_perf_fd(fd, buf, want);
    if (BOOST_UNLIKELY(n != static_cast<ssize_t>(want) || (group && buf[0] != 2)))
        read_fd_failed(n, n < 0 ? errno : EIO, info);
    if (group) return Reading{buf[3] - buf[4], buf[1], buf[2]};
    return Reading{buf[0], buf[1], buf[2]};
}

/// The kernel's count of a counter via read(2).
BOOST_FORCEINLINE Reading read_with_syscall(const CounterCore& c) {
    if (c.path == ReadPath::syscall_sum) {
        // Each core type's event counts while the thread runs there: the sum is the thread's count.
        const Reading a = read_fd(c.fd.get(), false, c.info.get());
        const Reading b = read_fd(c.fd_b.get(), false, c.info.get());
        return Reading{a.value + b.value, a.time_enabled, a.time_running + b.time_running};
    }
    return read_fd(c.fd.get(), c.is_difference(), c.info.get());
}

/// One consistent look at a control page for the rdpmc paths.
struct PageState {
    std::uint32_t seq, index;
    std::int64_t offset;
    bool allowed;
};
BOOST_FORCEINLINE PageState page_state(const perf_event_mmap_page& page) {
    PageState s;
    s.seq = load_once(page.lock);
    compiler_barrier();
    s.index = load_once(page.index);
    s.offset = load_once(page.offset);
    s.allowed = user_rdpmc_allowed(load_once(page.capabilities));
    return s;
}

/// Called when a page's lock no longer matches the cache (the kernel moved or re-offset an event): runs the full
/// seqlock protocol of linux/perf_event.h over the counter's page(s), refills the cache(s) and returns the value.
/// If an event is off the hardware at this moment (index 0: multiplexed out) it reads with read() and leaves the
/// cache invalid so the next read comes back here; if a page no longer allows rdpmc at all, the counter stops
/// executing rdpmc and is read with read() from then on.
template <class Serialize>
BOOST_NOINLINE PMC_COLD std::uint64_t refresh_rdpmc(CounterCore& c) {
    const bool pair = c.path == ReadPath::rdpmc_difference;
    for (;;) {
        const PageState sa = page_state(*c.a.page);
        const PageState sb = pair ? page_state(*c.b.page) : PageState{0, 1, 0, true};
        if ((sa.seq | sb.seq) & 1) { // a writer is mid-update (only a test playing the kernel does this concurrently)
            cpu_relax();
            continue;
        }
        if (!sa.allowed || !sb.allowed || sa.index == 0 || sb.index == 0) {
            c.a.invalidate();
            c.b.invalidate();
            if (!sa.allowed || !sb.allowed) {
                c.path = pair ? ReadPath::syscall_difference : ReadPath::syscall;
                c.fast_owner = UINT64_MAX;
            }
            return read_with_syscall(c).value;
        }
        Serialize::before();
        const std::uint64_t raw_a = rdpmc(sa.index - 1);
        const std::uint64_t raw_b = pair ? rdpmc(sb.index - 1) : 0;
        if (load_once(c.a.page->lock) != sa.seq || (pair && load_once(c.b.page->lock) != sb.seq)) continue;
        c.a.index = sa.index - 1;
        c.a.offset = sa.offset;
        c.a.seq = sa.seq;
        if (!pair) return static_cast<std::uint64_t>(c.a.count(raw_a, c.a.shift));
        c.b.index = sb.index - 1;
        c.b.offset = sb.offset;
        c.b.seq = sb.seq;
        return static_cast<std::uint64_t>(c.a.count(raw_a, c.a.shift) - c.b.count(raw_b, c.b.shift));
    }
}

/// The out-of-line read paths: read(2), clock_gettime for wall-time without a usable TSC, and the emulated PMU
/// (whose request to the emulator costs far more than this call).
BOOST_NOINLINE inline std::uint64_t read_slow(CounterCore& c) {
    if (c.path == ReadPath::clock) return clock_ns(CLOCK_MONOTONIC);
    if (BOOST_UNLIKELY(thread_token != c.owner) && !c.any_thread) wrong_thread(c);
    if (c.path == ReadPath::emulated)
        return c.emulated_event ? emulated::read_event(c.emulated_event) : emulated::read_instructions();
    return read_with_syscall(c).value;
}

/// Where an rdpmc read goes when the owner check fails: the wrong thread, or a counter no longer on that path.
BOOST_NOINLINE PMC_COLD inline std::uint64_t read_off_fast_path(CounterCore& c) {
    if (c.path == ReadPath::rdpmc || c.path == ReadPath::rdpmc_difference) wrong_thread(c);
    return read_slow(c);
}

/// AArch64: why user-space counter reads are off system-wide, or nothing. The kernel then still sets
/// cap_user_rdpmc for an event that asks (config1 bit 1) but publishes index 0, and an mrs of a counter traps.
inline std::optional<std::string> user_counter_access_off(std::string_view proc_root = "/proc") {
    if (!PMC_ARCH_AARCH64) return std::nullopt;
    const auto value = read_file(concat({proc_root, "/sys/kernel/perf_user_access"}));
    if (!value)
        return std::string("read with read(): this kernel has no kernel.perf_user_access (Linux 5.17+ lets user "
                           "space read Arm PMU counters)");
    if (trim(*value) != "0") return std::nullopt;
    return std::string("read with read(): kernel.perf_user_access is 0, so user-space counter reads (mrs) are off; "
                       "enable them with: sudo sysctl kernel.perf_user_access=1");
}

inline bool may_use_rdpmc(const perf_event_attr& attr) {
    return has_user_counters && attr.type != PERF_TYPE_SOFTWARE && attr.type != PERF_TYPE_TRACEPOINT &&
           attr.type != PERF_TYPE_BREAKPOINT;
}

/// Why an event is kept from user-space rdpmc and what setting governs it, naming only files that exist.
inline std::string rdpmc_setting_hint(const EventSpec& spec, std::string_view sysfs_root = default_sysfs_root) {
    if (!spec.core_pmu)
        return concat({spec.pmu.empty() ? "this event" : "the ", spec.pmu, spec.pmu.empty() ? "" : " PMU",
                       " is not counted on the CPU's core PMU counters, the only ones rdpmc reads: read() is the way "
                       "to read it, whatever the settings"});
    std::string hint;
    for (const auto& pmu : pmu_names(sysfs_root)) {
        if (pmu != "cpu" && pmu != "cpu_core" && pmu != "cpu_atom") continue;
        const std::string path = concat({sysfs_root, "/", pmu, "/rdpmc"});
        const auto value = read_file(path);
        if (!value) continue;
        const std::string v(trim(*value));
        append(hint, {hint.empty() ? "" : "; ", path, " is ", v, " (0: rdpmc off, 1: on while mmapped, 2: always)"});
        if (v == "0") append(hint, {"; enable with: echo 1 | sudo tee ", path});
    }
    if (!hint.empty()) return hint;
    if (PMC_ARCH_AARCH64)
        return "Arm PMU counters are readable in user space only with: sudo sysctl kernel.perf_user_access=1";
    return concat({"the CPU's PMU in ", sysfs_root, " has no rdpmc setting: the kernel does not offer rdpmc for it"});
}

/// Fills `cache` from a control page if the page allows user rdpmc with a width pmc trusts. `allowed` says whether
/// it does; a failure means the width is unusable. `name` is for messages; `width` receives the counter width.
inline std::optional<Failure> attach_page(const std::string& name, RdpmcCache& cache, const perf_event_mmap_page* page,
                                          unsigned fixed_width, bool& allowed, unsigned& width) {
    cache.page = page;
    const PageSnapshot s = snapshot(*page);
    allowed = s.user_rdpmc() && has_user_counters;
    if (!allowed) return std::nullopt;
    if (s.pmc_width < 8 || s.pmc_width > 64)
        return make_failure(EPROTO, concat({"cannot open counter '", name, "': the kernel reports a counter width of ",
                                            decimal(s.pmc_width), " bits, which pmc does not trust for rdpmc"}));
    if (fixed_width && fixed_width != s.pmc_width)
        return make_failure(EINVAL, concat({"cannot open counter '", name, "' with width::fixed<", decimal(fixed_width),
                                            ">: this PMU's counters are ", decimal(s.pmc_width),
                                            " bits wide; use width::from_page"}));
    width = s.pmc_width;
    cache.shift = static_cast<std::uint8_t>(64 - s.pmc_width);
    if (s.index != 0) {
        cache.index = s.index - 1;
        cache.offset = s.offset;
        cache.seq = s.lock;
    }
    return std::nullopt;
}

/// Chooses the read path once the pages are attached: rdpmc only when every page allows it.
inline void choose_rdpmc_path(CounterCore& c, bool allowed, bool difference,
                              std::string_view sysfs_root = default_sysfs_root) {
    if (allowed) {
        c.path = difference ? ReadPath::rdpmc_difference : ReadPath::rdpmc;
        c.info->notes.push_back(concat({"read in user space with ", difference ? "two " : "",
                                        PMC_ARCH_AARCH64 ? "mrs" : "rdpmc", " (counter width ",
                                        decimal(c.info->width), " bits)"}));
    } else {
        c.path = difference ? ReadPath::syscall_difference : ReadPath::syscall;
        c.info->notes.push_back(concat({"read with read(): the kernel does not allow user-space rdpmc for this event "
                                        "(cap_user_rdpmc = 0); ", rdpmc_setting_hint(c.info->spec, sysfs_root)}));
    }
}

/// What notes() says when perf's exclude_kernel fallback opened `spec` as `attr`.
inline std::string kernel_fallback_note(const EventSpec& spec, const perf_event_attr& attr) {
    const auto level = perf_event_paranoid();
    std::string note = concat({"'", spec.text, "' opened with exclude_kernel=1 as perf does (perf_event_paranoid ",
                               level ? std::string_view(decimal(*level)) : std::string_view("unreadable"),
                               ": this user may not count kernel mode): it counts user mode only, as perf's '",
                               name_as_opened(spec, attr), "'"});
    // The scheduler's events happen in kernel mode only: perf, too, shows 0 for cs:u.
    if (attr.type == PERF_TYPE_SOFTWARE &&
        (attr.config == PERF_COUNT_SW_CONTEXT_SWITCHES || attr.config == PERF_COUNT_SW_CPU_MIGRATIONS ||
         attr.config == 11 /* PERF_COUNT_SW_CGROUP_SWITCHES */))
        note += ", which for this event is always 0 (it happens in kernel mode)";
    append(note, {". To count every mode: CAP_PERFMON, or sudo sysctl kernel.perf_event_paranoid=1; "
                  "OpenOptions::exclude_kernel_fallback = false fails instead"});
    return note;
}

/// perf_event_open with perf's own fallbacks, explaining the final failure. A group leader is opened disabled
/// (`start_disabled`) and enabled with enable_group() once its members are in: the kernel does not schedule a
/// member added to a running leader until the thread is next scheduled in. `kernel_fallback`: perf's retry in user
/// mode only when the kernel refuses kernel-mode counting (OpenOptions::exclude_kernel_fallback). `cpu`: -1 (any
/// CPU) for counters; pmc::Sampler opens an inherited event once per CPU (the kernel maps no per-task inherit ring).
inline Result<FileDescriptor> open_event(const EventSpec& spec, perf_event_attr& attr, int group_fd,
                                         std::vector<std::string>& notes, bool start_disabled = false,
                                         pid_t pid = 0, bool kernel_fallback = true, int cpu = -1) {
    attr.size = sizeof attr;
    attr.disabled = start_disabled;
    if (spec.precise_max) attr.precise_ip = 3;
    std::optional<perf_event_attr> refused; // the attr the kernel refused kernel-mode counting for, once retried
    int refused_err = 0;
    for (;;) {
        int fd = system_calls().perf_event_open(&attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
        if (fd >= 0) {
            if (refused) {
                std::string note = kernel_fallback_note(spec, attr);
                if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
            }
            return FileDescriptor(fd);
        }
        const int err = errno;
        // perf's fallback (evsel__fallback): where the paranoid level refuses kernel mode, count user mode only.
        if ((err == EACCES || err == EPERM) && kernel_fallback && !refused && kernel_fallback_applies(spec, attr) &&
            paranoid_allows_kernel_fallback()) {
            refused = attr;
            refused_err = err;
            attr = without_kernel_mode(attr);
            continue;
        }
        if ((err == EINVAL || err == EOPNOTSUPP) && spec.precise_max && attr.precise_ip > 0) {
            --attr.precise_ip;
            continue;
        }
        // perf's own fallback: some PMUs (msr, uncore) reject exclude_guest, which perf sets by default.
        if ((err == EINVAL || err == EOPNOTSUPP) && attr.exclude_guest && !spec.guest_host_explicit) {
            attr.exclude_guest = 0;
            notes.push_back("the PMU refused exclude_guest=1 (perf's default); opened with exclude_guest=0, as perf "
                            "does");
            continue;
        }
        if (refused && (err == EINVAL || err == EOPNOTSUPP)) {
            // The PMU cannot count user mode alone (msr, uncore): the first refusal is the one to explain.
            Failure f = explain_open_failure(refused_err, spec, *refused, default_sysfs_root, true);
            append(f.message, {"\n(pmc retried with exclude_kernel=1, user mode only, as perf does; this PMU "
                               "refused that with ", errno_name(err), ": it cannot count user mode alone.)"});
            return f;
        }
        Failure f = explain_open_failure(err, spec, attr);
        if (refused && (err == EACCES || err == EPERM))
            f.message += "\n(The kernel refused kernel-mode counting first; pmc retried with exclude_kernel=1, user "
                         "mode only, as perf does, and was refused again.)";
        return f;
    }
}

/// Hybrid CPUs: rewrites a core-PMU event's attr(s) onto the PMU of the core type this thread is confined to, or
/// fails with how to pin (see pmc/hybrid.hpp). Nothing to do elsewhere.
inline std::optional<Failure> place_on_core_pmu(const EventSpec& spec, perf_event_attr& attr, perf_event_attr* minus,
                                                std::vector<std::string>& notes,
                                                std::string_view sysfs_root = default_sysfs_root) {
    if (!spec.core_pmu) return std::nullopt;
    const auto hybrid = hybrid_pmus(sysfs_root);
    const bool explicit_pmu = spec.pmu == "cpu_core" || spec.pmu == "cpu_atom";
    if (hybrid.empty() || !(spec.pmu.empty() || explicit_pmu)) return std::nullopt;
    auto choice = choose_core_pmu(hybrid, thread_affinity(), explicit_pmu ? spec.pmu : std::string());
    if (!choice.pmu) return make_failure(EINVAL, concat({"cannot open counter '", spec.text, "': ", choice.error}));
    if (!explicit_pmu) {
        attr = on_core_pmu(attr, *choice.pmu);
        if (minus) *minus = on_core_pmu(*minus, *choice.pmu);
        notes.push_back(concat({"hybrid CPU: opened on ", choice.pmu->pmu, " (this thread runs only on its CPUs, ",
                                choice.pmu->cpus_text, ")"}));
    }
    return std::nullopt;
}

/// Starts a group opened with its leader disabled: all its events begin counting at once.
inline std::optional<Failure> enable_group(const FileDescriptor& leader, const std::string& name) {
    if (system_calls().ioctl(leader.get(), PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) != 0) {
        const int err = errno;
        return make_failure(err, concat({"cannot start '", name, "': enabling its group failed: ", std::strerror(err)}));
    }
    return std::nullopt;
}

/// Maps an event's control page (the first page of its ring buffer; pmc maps no data pages).
inline Result<Mapping> map_control_page(const FileDescriptor& fd, const EventSpec& spec) {
    void* addr = system_calls().mmap(nullptr, page_size(), PROT_READ, MAP_SHARED, fd.get(), 0);
    if (addr == MAP_FAILED) {
        const int err = errno;
        return make_failure(err, concat({"cannot open counter '", spec.text, "': mmap of its control page failed (",
                                         std::strerror(err), ").\nFix: check RLIMIT_MEMLOCK and "
                                         "kernel.perf_event_mlock_kb; the control page is one page."}));
    }
    return Mapping(addr, page_size());
}

/// Opens a perf event (or, for a difference, its two events as one group), maps the control pages, and decides
/// the read path.
inline Result<CounterCore> open_perf(const EventSpec& spec, Requirement req, unsigned fixed_width,
                                     const OpenOptions& options) {
    CounterCore c;
    c.info = std::make_unique<CounterInfo>();
    c.info->spec = spec;
    const bool difference = spec.kind == EventKind::difference;
    perf_event_attr attr = spec.attr;
    perf_event_attr minus = spec.minus_attr;
    attr.inherit = minus.inherit = options.count_children;
    attr.enable_on_exec = options.enable_on_exec;
    if (PMC_ARCH_AARCH64 && spec.core_pmu) {
        // Arm PMUs grant user-space counter reads only to events that ask (config1 bit 1; sysctl perf_user_access).
        attr.config1 |= 0x2;
        minus.config1 |= 0x2;
    }
    c.any_thread = options.count_children || options.pid != 0;

    const auto hybrid = spec.core_pmu && spec.pmu.empty() ? hybrid_pmus(options.sysfs_root) : std::vector<CoreTypePmu>{};
    // With a single core-type PMU (the other's CPUs offline) there is nothing to sum: it is placed like any event.
    if (hybrid.size() >= 2 && options.hybrid == HybridPolicy::sum_core_types && !difference) {
        // One event per core type, each counting while the thread runs there; read() both and add. (Two PMUs:
        // cpu_core and cpu_atom, the only core types hybrid_pmus() knows.)
        perf_event_attr second = attr;
        attr = on_core_pmu(attr, hybrid[0]);
        second = on_core_pmu(second, hybrid[1]);
        attr.read_format = second.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        // As below: opened disabled when enable_on_exec is to start them, on options.pid's process.
        auto fd = open_event(spec, attr, -1, c.info->notes, options.enable_on_exec, options.pid,
                             options.exclude_kernel_fallback);
        if (!fd) return fd.failure();
        auto fd_b = open_event(spec, second, -1, c.info->notes, options.enable_on_exec, options.pid,
                               options.exclude_kernel_fallback);
        if (!fd_b) return fd_b.failure();
        c.fd = std::move(*fd);
        c.fd_b = std::move(*fd_b);
        c.info->attr = attr;
        c.info->minus_attr = second;
        c.path = ReadPath::syscall_sum;
        c.info->notes.push_back(concat({"hybrid CPU: opened on ", hybrid[0].pmu, " and ", hybrid[1].pmu,
                                        " and summed (read with read(): rdpmc sees only the core the thread is on)"}));
        if (req == Requirement::rdpmc)
            return make_failure(EOPNOTSUPP, concat({"cannot open '", spec.text, "' for source::rdpmc: summing core "
                                                    "types needs read()"}));
        return c;
    }
    if (auto failure = place_on_core_pmu(spec, attr, &minus, c.info->notes, options.sysfs_root))
        return std::move(*failure);
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
                       (difference ? std::uint64_t{PERF_FORMAT_GROUP} : 0u);
    auto fd = open_event(spec, attr, -1, c.info->notes, /*start_disabled=*/difference || options.enable_on_exec,
                         options.pid, options.exclude_kernel_fallback);
    if (!fd) return fd.failure();
    c.fd = std::move(*fd);
    c.info->attr = attr;
    if (difference) {
        // The subtracted event joins the leader's group, so the kernel schedules both at once, or neither.
        minus.read_format = attr.read_format;
        EventSpec minus_spec = spec;
        minus_spec.text = concat({spec.text, " (its ", spec.minus_text, " member)"});
        auto fd_b = open_event(minus_spec, minus, c.fd.get(), c.info->notes, false, options.pid,
                               options.exclude_kernel_fallback);
        if (!fd_b) return fd_b.failure();
        c.fd_b = std::move(*fd_b);
        c.info->minus_attr = minus;
        if (!options.enable_on_exec)
            if (auto failure = enable_group(c.fd, spec.text)) return std::move(*failure);
    }

    if (options.pid != 0) {
        c.path = difference ? ReadPath::syscall_difference : ReadPath::syscall;
        c.info->notes.push_back(concat({"counts process ", decimal(options.pid), ": read with read()"}));
    } else if (options.count_children) {
        c.path = difference ? ReadPath::syscall_difference : ReadPath::syscall;
        c.info->notes.push_back("counts this thread and the threads and processes it creates (inherit): read with "
                                "read(), since rdpmc sees only the calling thread's counter");
    } else if (!may_use_rdpmc(attr)) {
        c.path = difference ? ReadPath::syscall_difference : ReadPath::syscall;
        c.info->notes.push_back(has_user_counters ? "read with read(): this kind of event is never on a hardware "
                                                    "counter"
                                                  : "read with read(): no user-space counter access on this "
                                                    "architecture");
    } else if (auto off = user_counter_access_off()) {
        c.path = difference ? ReadPath::syscall_difference : ReadPath::syscall;
        c.info->notes.push_back(std::move(*off));
    } else {
        auto map = map_control_page(c.fd, spec);
        if (!map) return map.failure();
        c.map = std::move(*map);
        bool allowed = false, allowed_b = true;
        if (auto failure = attach_page(spec.text, c.a, static_cast<const perf_event_mmap_page*>(c.map.get()),
                                       fixed_width, allowed, c.info->width))
            return std::move(*failure);
        if (difference) {
            auto map_b = map_control_page(c.fd_b, spec);
            if (!map_b) return map_b.failure();
            c.map_b = std::move(*map_b);
            if (auto failure = attach_page(spec.text, c.b, static_cast<const perf_event_mmap_page*>(c.map_b.get()),
                                           fixed_width, allowed_b, c.info->width))
                return std::move(*failure);
        }
        choose_rdpmc_path(c, allowed && allowed_b, difference, options.sysfs_root);
    }
    if (req == Requirement::rdpmc && c.path != ReadPath::rdpmc)
        return make_failure(EOPNOTSUPP, concat({"cannot open counter '", spec.text, "' for source::rdpmc: ",
                                                difference ? std::string_view("a difference counter needs pmc::Counter")
                                                           : std::string_view(c.info->notes.back())}));
    return c;
}

/// Opens an instruction event, a modelled cache event or a branch event, on the emulated PMU of `pmc emulate` (the caller found it
/// there).
inline Result<CounterCore> open_emulated(const EventSpec& spec, Requirement req, const OpenOptions& options) {
    const EmulatedPmu& pmu = *emulated_pmu();
    auto refuse = [&](const std::string& why) {
        return make_failure(EOPNOTSUPP, concat({"cannot open counter '", spec.text, "' on the emulated PMU: ", why}));
    };
    if (!pmu.compatible())
        return refuse(concat({"pmc's QEMU plugin speaks protocol ", decimal(pmu.protocol), ", this program's pmc "
                              "headers protocol ", decimal(emulated::protocol_version), ". Fix: run it with the "
                              "pmc emulate of the pmc version the program was built with"}));
    if (auto why = emulated_refusal(spec); !why.empty()) return refuse(why);
    const auto modelled = modelled_event(spec);
    if (auto why = missing_model(pmu, spec); !why.empty()) return refuse(why);
    if (req == Requirement::rdpmc)
        return refuse("source::rdpmc reads a hardware counter, and the emulated PMU is read with a request to the "
                      "emulator; use pmc::Counter");
    if (options.pid != 0 || options.count_children || options.enable_on_exec)
        return refuse("it counts the calling thread only (another process, children or a count from exec need "
                      "perf_event_open). For a whole command's count: pmc count --emulate -e instructions:u -- CMD");
    CounterCore c;
    c.info = std::make_unique<CounterInfo>();
    c.info->spec = spec;
    c.info->attr = spec.attr;
    c.info->minus_attr = spec.minus_attr;
    c.info->opened_ns = clock_ns(CLOCK_MONOTONIC);
    c.path = ReadPath::emulated;
    if (modelled) {
        const bool branch = modelled_branch_event(spec).has_value();
        c.emulated_event = static_cast<std::uint64_t>(*modelled);
        c.info->notes.push_back(concat({branch ? branch_count_note(spec) : modelled_count_note(pmu),
                                        "; read with a request to QEMU's plugin (", pmu.target, " guest)"}));
        if (!spec.attr.exclude_kernel)
            c.info->notes.push_back(branch ? "user mode only, as :u: the emulator runs no kernel code"
                                           : "user mode only, as :u: the model sees no kernel accesses");
        return c;
    }
    c.info->notes.push_back(concat({emulated_count_note, "; read with a request to QEMU's plugin (", pmu.target,
                                    " guest), exact at the read"}));
    if (spec.kind == EventKind::difference)
        c.info->notes.push_back("no interrupt reaches an emulated program's count: the same count as instructions:u");
    else if (!spec.attr.exclude_kernel)
        c.info->notes.push_back("user mode only, as instructions:u: the emulator runs no kernel code to count");
    return c;
}

// Not inlined into BasicCounter's constructors: the open path is compiled once per file that opens a counter, not
// once per place that does.
BOOST_NOINLINE inline Result<CounterCore> open_core(const EventSpec& spec, Requirement req, unsigned fixed_width,
                                                    const OpenOptions& options = {}) {
    auto mismatch = [&](const char* wanted) {
        return make_failure(EINVAL, concat({"cannot open '", spec.text, "' as a ", wanted, " counter: that source "
                                            "reads only the event named '", wanted, "'"}));
    };
    if (req == Requirement::tsc && spec.kind != EventKind::tsc) return mismatch("tsc");
    if (req == Requirement::wall_time && spec.kind != EventKind::wall_time) return mismatch("wall-time");
    if (req == Requirement::rdpmc && spec.kind != EventKind::perf && spec.kind != EventKind::difference)
        return make_failure(EINVAL, concat({"cannot open '", spec.text, "' for source::rdpmc: it is not a perf event"}));

    if (spec.kind == EventKind::perf || spec.kind == EventKind::difference) {
        // Under pmc emulate the instruction events are the emulator's (probed once, and only where PMC_EMULATED=1
        // says so); the other perf events go to perf_event_open, which explains QEMU's refusal.
        auto c = (is_instruction_event(spec) || modelled_event(spec)) && emulated_pmu()
                     ? open_emulated(spec, req, options)
                     : open_perf(spec, req, fixed_width, options);
        if (c) {
            c->owner = acquire_thread_token();
            if (c->path == ReadPath::rdpmc || c->path == ReadPath::rdpmc_difference) c->fast_owner = c->owner;
            c->info->pid = ::getpid();
        }
        return c;
    }
    CounterCore c;
    c.info = std::make_unique<CounterInfo>();
    c.info->spec = spec;
    c.info->pid = ::getpid();
    c.owner = acquire_thread_token();
    if (spec.kind == EventKind::tsc) {
        if (!has_user_counters)
            return make_failure(EOPNOTSUPP, "cannot open 'tsc': this architecture has no time-stamp counter pmc "
                                            "can read; use 'wall-time'");
        c.path = ReadPath::tsc;
        c.info->notes.push_back("serialized rdtsc, in TSC ticks");
        return c;
    }
    const TscConversion conv = tsc_conversion();
    c.path = conv.usable ? ReadPath::wall_time : ReadPath::clock;
    c.time_mult = conv.mult;
    c.time_shift = conv.shift;
    c.time_zero = conv.zero;
    c.time_ticks = conv.ticks;
    c.info->notes.push_back(std::string("nanoseconds from ") + conv.source);
    return c;
}

template <class Source>
constexpr Requirement requirement_of() {
    if constexpr (std::is_same_v<Source, source::rdpmc>) return Requirement::rdpmc;
    else if constexpr (std::is_same_v<Source, source::tsc>) return Requirement::tsc;
    else if constexpr (std::is_same_v<Source, source::wall_time>) return Requirement::wall_time;
    else {
        static_assert(std::is_same_v<Source, source::any>, "Source must be one of pmc::source::*");
        return Requirement::any;
    }
}

struct CounterAccess;   // lets tests build a counter around a fake control page
struct CrossThreadRead; // pmc::PerThread's totals

} // namespace detail

template <class Counter>
class Interval;
/// ScopedInterval's default failure callback: ignores the failure (on_exit is not called either).
struct ignore_failure {
    void operator()(const Failure&) const noexcept {}
};
template <class Counter, class Callback, class OnFailure = ignore_failure>
class ScopedInterval;

/// A counter. Template choices: Serialize (serialize::lfence, mfence, cpuid, none), Source (source::any, rdpmc,
/// tsc, wall_time) and Width (width::from_page or width::fixed<N>). Most code wants pmc::Counter.
template <class Serialize = serialize::lfence, class Source = source::any, class Width = width::from_page>
class BasicCounter {
public:
    using serialization = Serialize;
    static constexpr unsigned width_bits = Width::bits; ///< 0: from the kernel's mmap page

    /// Opens `event` (see pmc/event.hpp for the syntax). Throws pmc::error with the reason and the fix.
    explicit BasicCounter(std::string_view event, const OpenOptions& options = {})
        : BasicCounter(parse_event(event, options.sysfs_root), options) {}
    explicit BasicCounter(const EventSpec& spec, const OpenOptions& options = {})
        : core_(detail::open_core(spec, detail::requirement_of<Source>(), Width::bits, options).value()) {}

    /// Opens without throwing pmc::error: the Result holds the counter or the Failure (code + message).
    static Result<BasicCounter> try_open(std::string_view event, const OpenOptions& options = {}) {
        auto spec = try_parse_event(event, options.sysfs_root);
        if (!spec) return spec.failure();
        return try_open(*spec, options);
    }
    static Result<BasicCounter> try_open(const EventSpec& spec, const OpenOptions& options = {}) {
        auto core = detail::open_core(spec, detail::requirement_of<Source>(), Width::bits, options);
        if (!core) return core.failure();
        return BasicCounter(std::move(*core));
    }

    BasicCounter(BasicCounter&&) noexcept = default;
    BasicCounter& operator=(BasicCounter&&) noexcept = default;
    BasicCounter(const BasicCounter&) = delete;
    BasicCounter& operator=(const BasicCounter&) = delete;
    ~BasicCounter() = default; // closes the fds and unmaps the pages (noexcept)

    /// The current value: events for perf counters, ticks for "tsc", nanoseconds for "wall-time". No system call,
    /// allocation or exception on the rdpmc, tsc and wall-time paths; read(2) for events the kernel keeps.
    BOOST_FORCEINLINE std::uint64_t read() {
        if constexpr (std::is_same_v<Source, source::rdpmc>) {
            return read_rdpmc(); // its owner check also sends a counter that left the rdpmc path to read()
        } else if constexpr (std::is_same_v<Source, source::wall_time>) {
            if (BOOST_LIKELY(core_.path == ReadPath::wall_time)) return read_wall_time();
            return detail::read_slow(core_);
        } else if constexpr (std::is_same_v<Source, source::tsc>) {
            return read_tsc();
        } else {
            if (core_.path == ReadPath::rdpmc) return read_rdpmc();
            if (core_.path == ReadPath::wall_time) return read_wall_time();
            if (core_.path == ReadPath::tsc) return read_tsc();
            if (core_.path == ReadPath::rdpmc_difference) return read_rdpmc_difference();
            return detail::read_slow(core_);
        }
    }

    /// The kernel's count with time enabled/running, via read(2) (perf events only; a system call).
    /// The emulated PMU counts all along: its times are both the time since open.
    Reading read_detailed() {
        if (core_.path == ReadPath::emulated) {
            const std::uint64_t value = read();
            const std::uint64_t ns = detail::clock_ns(CLOCK_MONOTONIC) - info().opened_ns;
            return Reading{value, ns, ns};
        }
        if (!core_.fd) raise(make_failure(EINVAL, "read_detailed() needs a perf event; '" + event().text + "' is a clock"));
        if (BOOST_UNLIKELY(detail::thread_token != core_.owner) && !core_.any_thread) detail::wrong_thread(core_);
        return detail::read_with_syscall(core_);
    }

    /// Starts an interval now.
    Interval<BasicCounter> interval() { return Interval<BasicCounter>(*this); }
    /// Starts an interval that calls `on_exit(elapsed)` when it leaves scope; if that last read fails, it calls
    /// `on_failure(const pmc::Failure&)` instead (see ScopedInterval).
    template <class Callback>
    ScopedInterval<BasicCounter, std::decay_t<Callback>> scoped(Callback&& on_exit) {
        return ScopedInterval<BasicCounter, std::decay_t<Callback>>(*this, std::forward<Callback>(on_exit));
    }
    template <class Callback, class OnFailure>
    ScopedInterval<BasicCounter, std::decay_t<Callback>, std::decay_t<OnFailure>> scoped(Callback&& on_exit,
                                                                                        OnFailure&& on_failure) {
        return ScopedInterval<BasicCounter, std::decay_t<Callback>, std::decay_t<OnFailure>>(
            *this, std::forward<Callback>(on_exit), std::forward<OnFailure>(on_failure));
    }

    const EventSpec& event() const { return info().spec; }
    /// The perf_event_attr as opened (after any fallback); zero for the clock counters.
    const perf_event_attr& attr() const { return info().attr; }
    ReadPath path() const noexcept { return core_.path; }
    /// Bits in the hardware counter (pmc_width) on the rdpmc paths; 64 otherwise.
    unsigned width() const { return info().width; }
    /// The perf fd (-1 for the clock counters and the emulated PMU; a difference counter's group leader).
    int fd() const noexcept { return core_.fd.get(); }
    /// What pmc chose and why (read path, fallbacks), for people.
    const std::vector<std::string>& notes() const { return info().notes; }

private:
    friend struct detail::CounterAccess;
    friend struct detail::CrossThreadRead;
    explicit BasicCounter(detail::CounterCore core) : core_(std::move(core)) {}

    const detail::CounterInfo& info() const {
        if (!core_.info) raise(make_failure(EBADF, "use of a pmc counter that was moved from"));
        return *core_.info;
    }

    BOOST_FORCEINLINE unsigned shift(const detail::RdpmcCache& cache) const noexcept {
        if constexpr (Width::bits != 0) return 64 - Width::bits;
        else return cache.shift;
    }

    // The cached counter number is used only while the page still holds the state it was cached from (the same
    // lock word), checked before the rdpmc as the ABI reads the index before it: a counter that was never on the
    // hardware, or that the kernel has taken off it, is never read (on arm64 such a read traps). After the rdpmc
    // the same check catches a move that raced with it.
    BOOST_FORCEINLINE std::uint64_t read_rdpmc() {
        if (BOOST_UNLIKELY(detail::thread_token != core_.fast_owner)) return detail::read_off_fast_path(core_);
        if (BOOST_UNLIKELY(detail::load_once(core_.a.page->lock) != core_.a.seq))
            return detail::refresh_rdpmc<Serialize>(core_);
        Serialize::before();
        const std::uint64_t raw = detail::rdpmc(core_.a.index);
        if (BOOST_UNLIKELY(detail::load_once(core_.a.page->lock) != core_.a.seq))
            return detail::refresh_rdpmc<Serialize>(core_);
        return static_cast<std::uint64_t>(core_.a.count(raw, shift(core_.a)));
    }

    // instructions-minus-irqs: both counters under one fence, back to back, each validated by its page's lock.
    BOOST_FORCEINLINE std::uint64_t read_rdpmc_difference() {
        if (BOOST_UNLIKELY(detail::thread_token != core_.fast_owner)) return detail::read_off_fast_path(core_);
        if (BOOST_UNLIKELY(!cached_pair_valid())) return detail::refresh_rdpmc<Serialize>(core_);
        Serialize::before();
        const std::uint64_t raw_a = detail::rdpmc(core_.a.index);
        const std::uint64_t raw_b = detail::rdpmc(core_.b.index);
        if (BOOST_UNLIKELY(!cached_pair_valid())) return detail::refresh_rdpmc<Serialize>(core_);
        return static_cast<std::uint64_t>(core_.a.count(raw_a, shift(core_.a)) - core_.b.count(raw_b, shift(core_.b)));
    }

    // XOR-OR: one branch for both pages (a '|' of two comparisons draws clang's bitwise-on-bool warning).
    BOOST_FORCEINLINE bool cached_pair_valid() const noexcept {
        return ((detail::load_once(core_.a.page->lock) ^ core_.a.seq) |
                (detail::load_once(core_.b.page->lock) ^ core_.b.seq)) == 0;
    }

    BOOST_FORCEINLINE std::uint64_t read_tsc() noexcept {
        Serialize::before();
        return detail::rdtsc();
    }

    BOOST_FORCEINLINE std::uint64_t read_wall_time() noexcept {
        Serialize::before();
        std::uint64_t ticks = detail::rdtsc();
        if constexpr (detail::timer_may_be_short) ticks = core_.time_ticks(ticks); // see detail/clock.hpp
        return detail::ticks_to_ns(ticks, core_.time_mult, core_.time_shift, core_.time_zero);
    }

    detail::CounterCore core_;
};

/// The counter most code wants: lfence-serialized, any source, width from the kernel.
using Counter = BasicCounter<>;

namespace detail {
/// Test access: builds a counter around control pages that are not the kernel's (tests/emulated), as if the perf
/// event (and for a difference spec, its group member at `page_b`) had been opened and mapped. `read_fd` serves
/// the read() fallback (may be -1).
struct CounterAccess {
    template <class C>
    static Result<C> attach(const perf_event_mmap_page* page, const EventSpec& spec, int read_fd = -1,
                            const perf_event_mmap_page* page_b = nullptr) {
        CounterCore c;
        c.info = std::make_unique<CounterInfo>();
        c.info->spec = spec;
        c.info->pid = ::getpid();
        c.fd = FileDescriptor(read_fd);
        const bool difference = spec.kind == EventKind::difference;
        bool allowed = false, allowed_b = true;
        if (auto failure = attach_page(spec.text, c.a, page, C::width_bits, allowed, c.info->width))
            return std::move(*failure);
        if (difference)
            if (auto failure = attach_page(spec.text, c.b, page_b, C::width_bits, allowed_b, c.info->width))
                return std::move(*failure);
        choose_rdpmc_path(c, allowed && allowed_b, difference);
        c.owner = acquire_thread_token();
        if (c.path == ReadPath::rdpmc || c.path == ReadPath::rdpmc_difference) c.fast_owner = c.owner;
        return C(std::move(c));
    }
};
} // namespace detail

/// A measurement in progress on one counter. Refers to the counter, which must outlive it and not be moved.
template <class Counter>
class Interval {
public:
    explicit Interval(Counter& counter) : counter_(&counter), start_(counter.read()) {}

    /// Counts since the start (or the result, once stopped). Does not stop the interval.
    std::uint64_t elapsed() { return stopped_ ? result_ : counter_->read() - start_; }

    /// Stops the interval and returns its count; later calls return the same count.
    std::uint64_t stop() {
        if (!stopped_) {
            result_ = counter_->read() - start_;
            stopped_ = true;
        }
        return result_;
    }

    /// Starts again from now.
    void restart() {
        stopped_ = false;
        start_ = counter_->read();
    }

    bool stopped() const noexcept { return stopped_; }
    std::uint64_t start_value() const noexcept { return start_; }

private:
    Counter* counter_;
    std::uint64_t start_;
    std::uint64_t result_ = 0;
    bool stopped_ = false;
};

/// An interval that hands its count to a callback when it leaves scope (or at stop()).
///
/// The destructor never throws. When its last read fails (the scope outlived a fork() and ends in the child, its
/// counter was moved away, or read() failed), there is no count to hand over: `on_exit` is not called, since a
/// made-up count would be recorded as a measurement, and `on_failure` receives the pmc::Failure instead (by
/// default it is ignored). So exactly one of the two is called, once. An explicit stop() raises the failure as
/// pmc::error instead, and then calls neither. (Built without exceptions, a failure aborts, as everywhere in pmc.)
/// The callbacks run in a destructor: they must not throw.
template <class Counter, class Callback, class OnFailure>
class ScopedInterval {
public:
    ScopedInterval(Counter& counter, Callback on_exit, OnFailure on_failure = OnFailure{})
        : on_exit_(std::move(on_exit)), on_failure_(std::move(on_failure)), interval_(counter) {}
    ScopedInterval(const ScopedInterval&) = delete;
    ScopedInterval& operator=(const ScopedInterval&) = delete;
    ~ScopedInterval() {
        if (finished_) return;
        finished_ = true;
        std::uint64_t count = 0;
#if !defined(BOOST_NO_EXCEPTIONS)
        try {
            count = interval_.stop();
        } catch (const error& e) {
            on_failure_(Failure{e.code(), e.what()});
            return;
        } catch (const std::exception& e) { // std::bad_alloc while building a failure's message
            on_failure_(make_failure(ENOMEM, std::string("the scoped interval's last read failed: ") + e.what()));
            return;
        }
#else
        count = interval_.stop();
#endif
        on_exit_(count);
    }

    /// Ends the interval now and calls on_exit (once); later calls return the same count. Raises pmc::error if the
    /// read fails (and calls neither callback).
    std::uint64_t stop() {
        if (finished_) return interval_.stop();
        finished_ = true;
        const std::uint64_t count = interval_.stop();
        on_exit_(count);
        return count;
    }
    std::uint64_t elapsed() { return interval_.elapsed(); }

private:
    Callback on_exit_;
    OnFailure on_failure_;
    bool finished_ = false;      // a callback was called, or stop() raised: the destructor does nothing
    Interval<Counter> interval_; // constructed last: its start read is the last thing before the scope's body
};

PMC_END_NAMESPACE
