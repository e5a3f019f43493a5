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
// is then: check the owner thread, fence, rdpmc, compare the page's lock word with the cached one, sign-extend
// the raw value by the page's pmc_width and add the cached offset. The kernel rewrites the page, bumping the lock,
// whenever it schedules the event in again, possibly on another counter or with a new offset (after a context
// switch, multiplexing, or a counter overflow). A changed lock sends the read to a cold path that re-reads the
// page under the seqlock, re-caches it and returns that consistent value; if the event is not on a counter at that
// moment (index 0) it is read with read(). So the common read costs one extra load and compare over a bare rdpmc,
// and a moved event is never read from its old counter. The reading is the kernel's 64-bit count, so intervals
// are plain differences modulo 2^64; counter wrap-around within pmc_width bits is absorbed by the sign extension
// plus the offset the kernel adjusts on overflow (see tests/emulated).
//
// Events the kernel does not put on a user-readable counter (software events, msr/tsc/, or rdpmc disabled) are
// read with read(2). "wall-time" and "tsc" are read with rdtsc and never enter the kernel.
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
#include <pmc/error.hpp>
#include <pmc/event.hpp>

#include <unistd.h>

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
    rdpmc,     ///< user-space rdpmc of a hardware counter
    syscall,   ///< read(2) of the perf fd (software events, or rdpmc not allowed)
    tsc,       ///< rdtsc
    wall_time, ///< rdtsc converted to nanoseconds
    clock,     ///< clock_gettime(CLOCK_MONOTONIC), for wall-time where the TSC cannot be used
};

inline const char* to_string(ReadPath p) {
    switch (p) {
    case ReadPath::rdpmc: return "rdpmc";
    case ReadPath::syscall: return "read()";
    case ReadPath::tsc: return "rdtsc";
    case ReadPath::wall_time: return "rdtsc->ns";
    case ReadPath::clock: return "clock_gettime";
    }
    return "?";
}

/// A perf event's count with how long it was enabled and actually counting (they differ when multiplexed).
struct Reading {
    std::uint64_t value = 0;
    std::uint64_t time_enabled = 0;
    std::uint64_t time_running = 0;
};

namespace detail {

/// What a counter knows that the hot path does not need.
struct CounterInfo {
    EventSpec spec;
    perf_event_attr attr{}; ///< as finally opened (perf events)
    pid_t pid = 0;          ///< process that opened it
    std::vector<std::string> notes;
    unsigned width = 64;
};

enum class Requirement { any, rdpmc, tsc, wall_time };

/// Everything a counter holds. The first members are all read() touches.
struct CounterCore {
    ReadPath path = ReadPath::syscall;
    std::uint8_t shift = 0;           ///< 64 - pmc_width
    std::uint32_t rdpmc_index = 0;    ///< cached page index - 1
    std::uint32_t seq = 1;            ///< page lock when the cache was filled; odd: nothing valid cached
    std::int64_t offset = 0;          ///< cached page offset
    const perf_event_mmap_page* page = nullptr;
    std::uint64_t owner = UINT64_MAX; ///< opener's thread token; never matches when closed or moved from
    std::uint64_t fast_owner = UINT64_MAX; ///< `owner` while the rdpmc fast path may run, else never matches:
                                           ///< one compare checks both the thread and the path
    std::uint64_t time_mult = 0;      ///< wall-time: ns = time_zero + (ticks * time_mult) >> time_shift
    std::uint64_t time_zero = 0;
    std::uint32_t time_shift = 0;

    FileDescriptor fd;
    Mapping map;
    std::unique_ptr<CounterInfo> info;

    CounterCore() = default;
    CounterCore(CounterCore&& o) noexcept { *this = std::move(o); }
    CounterCore& operator=(CounterCore&& o) noexcept {
        if (this == &o) return *this;
        path = std::exchange(o.path, ReadPath::syscall);
        shift = o.shift;
        rdpmc_index = o.rdpmc_index;
        seq = std::exchange(o.seq, 1);
        offset = o.offset;
        page = std::exchange(o.page, nullptr);
        owner = std::exchange(o.owner, UINT64_MAX);
        fast_owner = std::exchange(o.fast_owner, UINT64_MAX);
        time_mult = o.time_mult;
        time_zero = o.time_zero;
        time_shift = o.time_shift;
        fd = std::move(o.fd);
        map = std::move(o.map);
        info = std::move(o.info);
        return *this;
    }
};

/// Reports a read from a thread other than the opener, after fork(), or of a moved-from counter.
[[noreturn]] BOOST_NOINLINE PMC_COLD inline void wrong_thread(const CounterCore& c) {
    if (!c.info) raise(make_failure(EBADF, "read of a pmc counter that was moved from or never opened"));
    const std::string& name = c.info->spec.text;
    if (::getpid() != c.info->pid)
        raise(make_failure(ECHILD, "counter '" + name + "' was opened by process " + std::to_string(c.info->pid) +
                                       " and read in process " + std::to_string(::getpid()) +
                                       " after fork(): it does not count the child. Open a new counter in the "
                                       "child."));
    raise(make_failure(EPERM, "counter '" + name + "' was read from a thread that did not open it: a perf counter "
                                                   "counts only the thread that opened it, so this read would be "
                                                   "another thread's count (or garbage, with rdpmc). Open one "
                                                   "counter per thread."));
}

/// read(2) of the perf fd: the count plus time enabled/running.
BOOST_NOINLINE inline Reading read_with_syscall(const CounterCore& c) {
    std::uint64_t buf[3] = {0, 0, 0};
    ssize_t n;
    do {
        n = system_calls().read(c.fd.get(), buf, sizeof buf);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof buf)) {
        const int err = n < 0 ? errno : EIO;
        const std::string name = c.info ? c.info->spec.text : "?";
        if (n == 0)
            raise(make_failure(EIO, "counter '" + name + "' is in an error state: the kernel could not schedule it "
                                    "(a pinned ':D' event whose PMU is full). Drop ':D' or free counters."));
        raise(make_failure(err, "read() of counter '" + name + "' failed: " +
                                    (n < 0 ? std::strerror(err) : "short read")));
    }
    return Reading{buf[0], buf[1], buf[2]};
}

/// Reads and returns the value when the page's lock no longer matches the cache (the kernel moved or re-offset
/// the event), re-filling the cache. Runs the full seqlock protocol of linux/perf_event.h.
template <class Serialize>
BOOST_NOINLINE PMC_COLD std::uint64_t refresh_rdpmc(CounterCore& c) {
    for (;;) {
        const std::uint32_t seq = load_once(c.page->lock);
        compiler_barrier();
        if (seq & 1) { // a writer is mid-update (only a test playing the kernel does this concurrently)
            cpu_relax();
            continue;
        }
        const std::uint32_t index = load_once(c.page->index);
        const std::int64_t offset = load_once(c.page->offset);
        const bool allowed = user_rdpmc_allowed(load_once(c.page->capabilities));
        if (!allowed || index == 0) {
            // Not on a counter now (multiplexed out): ask the kernel, and leave the cache invalid, with a counter
            // number that is harmless to read, so the next read comes back here. If the page no longer allows
            // rdpmc at all, stop executing it: this counter is read with read() from now on.
            c.seq = 1;
            c.rdpmc_index = 0;
            if (!allowed) {
                c.path = ReadPath::syscall;
                c.fast_owner = UINT64_MAX;
            }
            return read_with_syscall(c).value;
        }
        Serialize::before();
        const std::uint64_t raw = rdpmc(index - 1);
        if (load_once(c.page->lock) != seq) continue;
        c.rdpmc_index = index - 1;
        c.offset = offset;
        c.seq = seq;
        return static_cast<std::uint64_t>(offset + sign_extend(raw, c.shift));
    }
}

/// The out-of-line read paths: read(2), and clock_gettime for wall-time without a usable TSC.
BOOST_NOINLINE inline std::uint64_t read_slow(CounterCore& c) {
    if (c.path == ReadPath::clock) return clock_ns(CLOCK_MONOTONIC);
    if (BOOST_UNLIKELY(thread_token != c.owner)) wrong_thread(c);
    return read_with_syscall(c).value;
}

/// Where an rdpmc read goes when the owner check fails: the wrong thread, or a counter no longer on the rdpmc path.
BOOST_NOINLINE PMC_COLD inline std::uint64_t read_off_fast_path(CounterCore& c) {
    if (c.path == ReadPath::rdpmc) wrong_thread(c);
    return read_slow(c);
}

inline bool may_use_rdpmc(const perf_event_attr& attr) {
    return has_user_counters && attr.type != PERF_TYPE_SOFTWARE && attr.type != PERF_TYPE_TRACEPOINT &&
           attr.type != PERF_TYPE_BREAKPOINT;
}

inline std::string rdpmc_setting_hint(const EventSpec& spec) {
    std::string pmu = spec.pmu.empty() ? "cpu" : spec.pmu;
    std::string path = std::string(default_sysfs_root) + "/" + pmu + "/rdpmc";
    auto value = read_file(path);
    std::string hint = path + (value ? " is " + std::string(trim(*value)) : " cannot be read");
    return hint + " (0: rdpmc off, 1: on while mmapped, 2: always); enable with: echo 1 | sudo tee " + path;
}

/// Points `c` at a control page and decides between rdpmc and read(): rdpmc only when the page allows it
/// (cap_user_rdpmc) with a trustworthy width. Fills the cache when the event is on a counter now.
inline std::optional<Failure> attach_page(CounterCore& c, const perf_event_mmap_page* page, unsigned fixed_width) {
    c.page = page;
    const PageSnapshot s = snapshot(*page);
    const std::string& name = c.info->spec.text;
    if (!s.user_rdpmc() || !has_user_counters) {
        c.info->notes.push_back("read with read(): the kernel does not allow user-space rdpmc for this event "
                                "(cap_user_rdpmc = 0); " + rdpmc_setting_hint(c.info->spec));
        return std::nullopt;
    }
    if (s.pmc_width < 8 || s.pmc_width > 64)
        return make_failure(EPROTO, "cannot open counter '" + name + "': the kernel reports a counter width of " +
                                        std::to_string(s.pmc_width) + " bits, which pmc does not trust for rdpmc");
    if (fixed_width && fixed_width != s.pmc_width)
        return make_failure(EINVAL, "cannot open counter '" + name + "' with width::fixed<" +
                                        std::to_string(fixed_width) + ">: this PMU's counters are " +
                                        std::to_string(s.pmc_width) + " bits wide; use width::from_page");
    c.path = ReadPath::rdpmc;
    c.info->width = s.pmc_width;
    c.shift = static_cast<std::uint8_t>(64 - s.pmc_width);
    if (s.index != 0) {
        c.rdpmc_index = s.index - 1;
        c.offset = s.offset;
        c.seq = s.lock;
    }
    c.info->notes.push_back("read in user space with rdpmc (counter width " + std::to_string(s.pmc_width) + " bits)");
    return std::nullopt;
}

/// Opens the perf event, its control page, and decides the read path.
inline Result<CounterCore> open_perf(const EventSpec& spec, Requirement req, unsigned fixed_width) {
    CounterCore c;
    c.info = std::make_unique<CounterInfo>();
    c.info->spec = spec;
    perf_event_attr attr = spec.attr;
    attr.size = sizeof attr;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    attr.disabled = 0;
    attr.inherit = 0;
    if (spec.precise_max) attr.precise_ip = 3;
    for (;;) {
        int fd = system_calls().perf_event_open(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd >= 0) {
            c.fd = FileDescriptor(fd);
            break;
        }
        const int err = errno;
        if ((err == EINVAL || err == EOPNOTSUPP) && spec.precise_max && attr.precise_ip > 0) {
            --attr.precise_ip;
            continue;
        }
        // perf's own fallback: some PMUs (msr, uncore) reject exclude_guest, which perf sets by default.
        if ((err == EINVAL || err == EOPNOTSUPP) && attr.exclude_guest && !spec.guest_host_explicit) {
            attr.exclude_guest = 0;
            c.info->notes.push_back("the PMU refused exclude_guest=1 (perf's default); opened with exclude_guest=0, "
                                    "as perf does");
            continue;
        }
        return explain_open_failure(err, spec, attr);
    }
    c.info->attr = attr;

    if (may_use_rdpmc(attr)) {
        void* addr = system_calls().mmap(nullptr, page_size(), PROT_READ, MAP_SHARED, c.fd.get(), 0);
        if (addr == MAP_FAILED) {
            const int err = errno;
            return make_failure(err, "cannot open counter '" + spec.text + "': mmap of its control page failed (" +
                                         std::strerror(err) + ").\nFix: check RLIMIT_MEMLOCK and "
                                         "kernel.perf_event_mlock_kb; the control page is one page.");
        }
        c.map = Mapping(addr, page_size());
        if (auto failure = attach_page(c, static_cast<const perf_event_mmap_page*>(addr), fixed_width))
            return std::move(*failure);
    } else {
        c.info->notes.push_back(has_user_counters ? "read with read(): this kind of event is never on a hardware "
                                                    "counter"
                                                  : "read with read(): no user-space counter access on this "
                                                    "architecture");
    }
    if (req == Requirement::rdpmc && c.path != ReadPath::rdpmc)
        return make_failure(EOPNOTSUPP, "cannot open counter '" + spec.text + "' for source::rdpmc: " +
                                            c.info->notes.back());
    return c;
}

inline Result<CounterCore> open_core(const EventSpec& spec, Requirement req, unsigned fixed_width) {
    auto mismatch = [&](const char* wanted) {
        return make_failure(EINVAL, "cannot open '" + spec.text + "' as a " + wanted + " counter: that source reads "
                                    "only the event named '" + wanted + "'");
    };
    if (req == Requirement::tsc && spec.kind != EventKind::tsc) return mismatch("tsc");
    if (req == Requirement::wall_time && spec.kind != EventKind::wall_time) return mismatch("wall-time");
    if (req == Requirement::rdpmc && spec.kind != EventKind::perf)
        return make_failure(EINVAL, "cannot open '" + spec.text + "' for source::rdpmc: it is not a perf event");

    if (spec.kind == EventKind::perf) {
        auto c = open_perf(spec, req, fixed_width);
        if (c) {
            c->owner = acquire_thread_token();
            if (c->path == ReadPath::rdpmc) c->fast_owner = c->owner;
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
    const TscConversion& conv = tsc_conversion();
    c.path = conv.usable ? ReadPath::wall_time : ReadPath::clock;
    c.time_mult = conv.mult;
    c.time_shift = conv.shift;
    c.time_zero = conv.zero;
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

struct CounterAccess; // lets tests build a counter around a fake control page

} // namespace detail

template <class Counter>
class Interval;
template <class Counter, class Callback>
class ScopedInterval;

/// A counter. Template choices: Serialize (serialize::lfence, mfence, cpuid, none), Source (source::any, rdpmc,
/// tsc, wall_time) and Width (width::from_page or width::fixed<N>). Most code wants pmc::Counter.
template <class Serialize = serialize::lfence, class Source = source::any, class Width = width::from_page>
class BasicCounter {
public:
    using serialization = Serialize;
    static constexpr unsigned width_bits = Width::bits; ///< 0: from the kernel's mmap page

    /// Opens `event` (see pmc/event.hpp for the syntax). Throws pmc::error with the reason and the fix.
    explicit BasicCounter(std::string_view event) : BasicCounter(parse_event(event)) {}
    explicit BasicCounter(const EventSpec& spec)
        : core_(detail::open_core(spec, detail::requirement_of<Source>(), Width::bits).value()) {}

    /// Opens without throwing pmc::error: the Result holds the counter or the Failure (code + message).
    static Result<BasicCounter> try_open(std::string_view event) {
        auto spec = try_parse_event(event);
        if (!spec) return spec.failure();
        return try_open(*spec);
    }
    static Result<BasicCounter> try_open(const EventSpec& spec) {
        auto core = detail::open_core(spec, detail::requirement_of<Source>(), Width::bits);
        if (!core) return core.failure();
        return BasicCounter(std::move(*core));
    }

    BasicCounter(BasicCounter&&) noexcept = default;
    BasicCounter& operator=(BasicCounter&&) noexcept = default;
    BasicCounter(const BasicCounter&) = delete;
    BasicCounter& operator=(const BasicCounter&) = delete;
    ~BasicCounter() = default; // closes the fd and unmaps the page (noexcept)

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
            return detail::read_slow(core_);
        }
    }

    /// The kernel's count with time enabled/running, via read(2) (perf events only; a system call).
    Reading read_detailed() {
        if (!core_.fd) raise(make_failure(EINVAL, "read_detailed() needs a perf event; '" + event().text + "' is a clock"));
        if (BOOST_UNLIKELY(detail::thread_token != core_.owner)) detail::wrong_thread(core_);
        return detail::read_with_syscall(core_);
    }

    /// Starts an interval now.
    Interval<BasicCounter> interval() { return Interval<BasicCounter>(*this); }
    /// Starts an interval that calls `on_exit(elapsed)` when it leaves scope.
    template <class Callback>
    ScopedInterval<BasicCounter, std::decay_t<Callback>> scoped(Callback&& on_exit) {
        return ScopedInterval<BasicCounter, std::decay_t<Callback>>(*this, std::forward<Callback>(on_exit));
    }

    const EventSpec& event() const { return info().spec; }
    /// The perf_event_attr as opened (after any fallback); zero for the clock counters.
    const perf_event_attr& attr() const { return info().attr; }
    ReadPath path() const noexcept { return core_.path; }
    /// Bits in the hardware counter (pmc_width) on the rdpmc path; 64 otherwise.
    unsigned width() const { return info().width; }
    /// The perf fd (-1 for the clock counters).
    int fd() const noexcept { return core_.fd.get(); }
    /// What pmc chose and why (read path, fallbacks), for people.
    const std::vector<std::string>& notes() const { return info().notes; }

private:
    friend struct detail::CounterAccess;
    explicit BasicCounter(detail::CounterCore core) : core_(std::move(core)) {}

    const detail::CounterInfo& info() const {
        if (!core_.info) raise(make_failure(EBADF, "use of a pmc counter that was moved from"));
        return *core_.info;
    }

    BOOST_FORCEINLINE unsigned shift() const noexcept {
        if constexpr (Width::bits != 0) return 64 - Width::bits;
        else return core_.shift;
    }

    BOOST_FORCEINLINE std::uint64_t read_rdpmc() {
        if (BOOST_UNLIKELY(detail::thread_token != core_.fast_owner)) return detail::read_off_fast_path(core_);
        Serialize::before();
        const std::uint64_t raw = detail::rdpmc(core_.rdpmc_index);
        if (BOOST_UNLIKELY(detail::load_once(core_.page->lock) != core_.seq))
            return detail::refresh_rdpmc<Serialize>(core_);
        return static_cast<std::uint64_t>(core_.offset + detail::sign_extend(raw, shift()));
    }

    BOOST_FORCEINLINE std::uint64_t read_tsc() noexcept {
        Serialize::before();
        return detail::rdtsc();
    }

    BOOST_FORCEINLINE std::uint64_t read_wall_time() noexcept {
        Serialize::before();
        return detail::ticks_to_ns(detail::rdtsc(), core_.time_mult, core_.time_shift, core_.time_zero);
    }

    detail::CounterCore core_;
};

/// The counter most code wants: lfence-serialized, any source, width from the kernel.
using Counter = BasicCounter<>;

namespace detail {
/// Test access: builds a counter around a control page that is not the kernel's (tests/emulated), as if the
/// perf event had been opened and mapped. `read_fd` is used by the read() fallback (may be -1).
struct CounterAccess {
    template <class C>
    static Result<C> attach(const perf_event_mmap_page* page, const EventSpec& spec, int read_fd = -1) {
        CounterCore c;
        c.info = std::make_unique<CounterInfo>();
        c.info->spec = spec;
        c.info->pid = ::getpid();
        c.fd = FileDescriptor(read_fd);
        if (auto failure = attach_page(c, page, C::width_bits)) return std::move(*failure);
        c.owner = acquire_thread_token();
        if (c.path == ReadPath::rdpmc) c.fast_owner = c.owner;
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
/// The callback runs in a destructor: it must not throw.
template <class Counter, class Callback>
class ScopedInterval {
public:
    ScopedInterval(Counter& counter, Callback on_exit) : on_exit_(std::move(on_exit)), interval_(counter) {}
    ScopedInterval(const ScopedInterval&) = delete;
    ScopedInterval& operator=(const ScopedInterval&) = delete;
    ~ScopedInterval() { stop(); }

    /// Ends the interval now and calls the callback (once).
    std::uint64_t stop() {
        if (!interval_.stopped()) on_exit_(interval_.stop());
        return interval_.stop();
    }
    std::uint64_t elapsed() { return interval_.elapsed(); }

private:
    Callback on_exit_;
    Interval<Counter> interval_; // constructed last: its start read is the last thing before the scope's body
};

PMC_END_NAMESPACE
