// SPDX-License-Identifier: MIT
// pmc/group.hpp: several events read together, and what multiplexing did to them.
//
//     pmc::Group g{"instructions:u", "cycles:u", "branch-misses:u"};
//     auto iv = g.interval();
//     work();
//     const auto& counts = iv.stop();               // one pmc::EventCount per event, by index or by name
//     std::printf("%f\n", counts[g.index("cycles:u")].estimate);
//
// The events form one perf group: the kernel puts them on the counters all at once or not at all. When more events
// are wanted than there are counters, the kernel time-shares (multiplexes) the counters: each group then counts
// only part of the time. A reading carries the group's time enabled and time running, and an interval's count is
// scaled by enabled/running and marked with its running fraction; an event that never ran in the interval is "not
// counted" — never a 0 that looks like a measurement.
//
// How a read works. When every event's control page allows rdpmc and the leader's page publishes a user-space time
// conversion (cap_user_time), a read is: one owner check, a check of every page's lock word against the cache,
// one fence, one rdpmc per event, one rdtsc, and the lock words checked again (as for pmc::Counter); the times
// come from the leader's page plus the TSC ticks since its last update. Otherwise one read(2) of the leader with PERF_FORMAT_GROUP returns every
// count and the two times at the same instant.
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/detail/clock.hpp>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

PMC_BEGIN_NAMESPACE

/// One read of a group: each event's raw count since open, and the group's times.
struct GroupReading {
    std::vector<std::uint64_t> values; ///< sized by Group::make_reading(); reading into it does not allocate
                                       ///< (Group::read resizes a reading of another size)
    std::uint64_t time_enabled = 0;    ///< ns the group was enabled
    std::uint64_t time_running = 0;    ///< ns it was on the counters (less than enabled when multiplexed)
};

/// One event's count over an interval, and how much of the interval it was counting.
struct EventCount {
    std::uint64_t raw = 0;          ///< counted while the group was on the counters
    double estimate = 0;            ///< raw x enabled / running: the count for the whole interval (== raw if it ran all along)
    double running_fraction = 0;    ///< running / enabled over the interval: 1 = counted throughout
    bool counted = false;           ///< false: the group never ran in the interval; `raw` and `estimate` mean nothing
    bool multiplexed() const noexcept { return counted && running_fraction < 1.0; }
};

/// Fills `out` (sized like the readings) with each event's count between two readings of the same group.
inline void difference(const GroupReading& start, const GroupReading& stop, std::vector<EventCount>& out) {
    if (start.values.size() != stop.values.size())
        raise(make_failure(EINVAL, "pmc::difference: the readings hold " + std::to_string(start.values.size()) +
                                       " and " + std::to_string(stop.values.size()) + " values: they are not two "
                                       "readings of the same group"));
    const std::uint64_t enabled = stop.time_enabled - start.time_enabled;
    const std::uint64_t running = stop.time_running - start.time_running;
    out.resize(stop.values.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        EventCount& c = out[i];
        c.raw = stop.values[i] - start.values[i];
        c.counted = running > 0;
        if (!c.counted) {
            c.estimate = 0;
            c.running_fraction = 0;
        } else if (running >= enabled) {
            c.estimate = static_cast<double>(c.raw);
            c.running_fraction = 1.0;
        } else {
            c.estimate = static_cast<double>(c.raw) * static_cast<double>(enabled) / static_cast<double>(running);
            c.running_fraction = static_cast<double>(running) / static_cast<double>(enabled);
        }
    }
}

/// The most events one pmc group holds.
inline constexpr std::size_t max_group_events = 64;

namespace detail {

struct GroupMember {
    RdpmcCache cache;
    FileDescriptor fd;
    Mapping map;
};

/// What a group knows that its reads do not need.
struct GroupInfo {
    std::vector<EventSpec> specs;
    std::vector<std::string> names;
    std::vector<perf_event_attr> attrs; ///< as opened
    std::vector<std::string> notes;
    pid_t pid = 0;
    std::uint64_t opened_ns = 0; ///< emulated groups: CLOCK_MONOTONIC at open, for their times
    std::vector<std::uint64_t> emulated_events; ///< emulated groups with a modelled member: each member's code
};

/// Everything a group holds. The leader's time fields are cached with its lock word, like the counts.
struct GroupCore {
    ReadPath path = ReadPath::syscall;     ///< rdpmc, syscall or emulated
    std::uint64_t fast_owner = UINT64_MAX; ///< owner while the rdpmc path may run, else never matches
    std::uint64_t owner = UINT64_MAX;
    bool any_thread = false;               ///< counts children (inherit): read() may come from any thread
    // Leader page times, valid while the leader's cache is: enabled/running at its last update, and the conversion
    // of TSC ticks since then (time_offset + ticks * time_mult >> time_shift).
    std::uint64_t time_enabled = 0, time_running = 0, time_offset = 0;
    std::uint32_t time_mult = 0;
    std::uint16_t time_shift = 0;
    ShortTicks time_ticks;                 ///< the leader page's cap_user_time_short wrap (identity on x86)
    std::vector<GroupMember> members;      ///< members[0] is the leader; at most max_group_events
    std::unique_ptr<GroupInfo> info;

    GroupCore() = default;
    GroupCore(GroupCore&& o) noexcept { *this = std::move(o); }
    GroupCore& operator=(GroupCore&& o) noexcept {
        if (this == &o) return *this;
        path = std::exchange(o.path, ReadPath::syscall);
        fast_owner = std::exchange(o.fast_owner, UINT64_MAX);
        owner = std::exchange(o.owner, UINT64_MAX);
        any_thread = std::exchange(o.any_thread, false); // a moved-from group is read by no thread
        time_enabled = o.time_enabled;
        time_running = o.time_running;
        time_offset = o.time_offset;
        time_mult = o.time_mult;
        time_shift = o.time_shift;
        time_ticks = o.time_ticks;
        members = std::move(o.members);
        o.members.clear(); // (a moved-from vector is only "valid but unspecified")
        info = std::move(o.info);
        return *this;
    }
};

[[noreturn]] BOOST_NOINLINE PMC_COLD inline void group_wrong_thread(const GroupCore& g) {
    if (!g.info) raise(make_failure(EBADF, "read of a pmc group that was moved from"));
    if (::getpid() != g.info->pid)
        raise(make_failure(ECHILD, "a pmc group was read in a child process after fork(): it counts the parent's "
                                   "thread. Open a new group in the child."));
    raise(make_failure(EPERM, "a pmc group was read from a thread that did not open it: its counters count only the "
                              "thread that opened it. Open one group per thread."));
}

/// One read(2) of the leader with PERF_FORMAT_GROUP: every count and both times at the same instant. The buffer is
/// on the stack: a group that counts children may be read from several threads at once.
BOOST_NOINLINE inline void group_read_syscall(const GroupCore& g, GroupReading& out) {
    const std::size_t n = g.members.size();
    if (n == 0) group_wrong_thread(g); // moved from
    std::uint64_t buffer[3 + max_group_events]; // nr, enabled, running, one value per member
    const std::size_t want = (3 + n) * sizeof(std::uint64_t);
    const ssize_t got = read_perf_fd(g.members[0].fd.get(), buffer, want); // retries EINTR and ECHILD
    if (got != static_cast<ssize_t>(want) || buffer[0] != n) {
        const int err = got < 0 ? errno : EIO;
        const bool pinned = g.info && !g.info->attrs.empty() && g.info->attrs[0].pinned;
        raise(make_failure(err, std::string("read() of a pmc group failed: ") +
                                    (got < 0   ? std::strerror(err)
                                     : got > 0 ? "short read"
                                     : pinned  ? "the group is in an error state: it is pinned (':D' on its first "
                                                 "event) and its PMU could not hold it. Drop ':D' or free counters."
                                               : "the group is in an error state (the kernel could not schedule it)")));
    }
    out.time_enabled = buffer[1];
    out.time_running = buffer[2];
    for (std::size_t i = 0; i < n; ++i) out.values[i] = buffer[3 + i];
}

/// The group's pages moved on (or were never cached): re-read all of them and the leader's times under their
/// seqlocks, refill the caches and read. Falls back to read() while the group is off the counters, and for good
/// if a page stops allowing rdpmc or publishing its time conversion.
template <class Serialize>
BOOST_NOINLINE PMC_COLD void group_refresh(GroupCore& g, GroupReading& out) {
    const std::size_t n = g.members.size();
    for (;;) {
        bool stable = true, on_counters = true, allowed = true;
        std::uint32_t seqs[max_group_events];
        for (std::size_t i = 0; i < n; ++i) {
            const PageState s = page_state(*g.members[i].cache.page);
            seqs[i] = s.seq;
            stable = stable && !(s.seq & 1);
            on_counters = on_counters && s.index != 0;
            allowed = allowed && s.allowed;
            g.members[i].cache.index = s.index ? s.index - 1 : 0;
            g.members[i].cache.offset = s.offset;
        }
        const perf_event_mmap_page& leader = *g.members[0].cache.page;
        const bool user_time = user_time_allowed(load_once(leader.capabilities));
        g.time_enabled = load_once(leader.time_enabled);
        g.time_running = load_once(leader.time_running);
        g.time_offset = load_once(leader.time_offset);
        g.time_mult = load_once(leader.time_mult);
        g.time_shift = load_once(leader.time_shift);
        g.time_ticks = short_ticks(user_time_short_allowed(load_once(leader.capabilities)),
                                   load_once(leader.time_cycles), load_once(leader.time_mask));
        compiler_barrier();
        if (!stable) {
            cpu_relax();
            continue;
        }
        if (!allowed || !user_time || !on_counters) {
            for (auto& m : g.members) m.cache.invalidate();
            if (!allowed || !user_time) {
                g.path = ReadPath::syscall;
                g.fast_owner = UINT64_MAX;
            }
            group_read_syscall(g, out);
            return;
        }
        Serialize::before();
        for (std::size_t i = 0; i < n; ++i) out.values[i] = rdpmc(g.members[i].cache.index);
        const std::uint64_t ticks = rdtsc();
        bool moved = false;
        for (std::size_t i = 0; i < n; ++i) moved = moved || load_once(g.members[i].cache.page->lock) != seqs[i];
        if (moved) continue;
        for (std::size_t i = 0; i < n; ++i) {
            g.members[i].cache.seq = seqs[i];
            out.values[i] = static_cast<std::uint64_t>(g.members[i].cache.count(out.values[i], g.members[i].cache.shift));
        }
        const std::uint64_t delta = ticks_to_ns(g.time_ticks(ticks), g.time_mult, g.time_shift, g.time_offset);
        out.time_enabled = g.time_enabled + delta;
        out.time_running = g.time_running + delta;
        return;
    }
}

/// Parses `texts` and opens them as one group. (Not inlined: compiled once per file, not per place that opens.)
BOOST_NOINLINE inline Result<GroupCore> open_group(const std::vector<std::string>& texts, const OpenOptions& options) {
    if (texts.empty()) return make_failure(EINVAL, "a pmc group needs at least one event");
    if (texts.size() > max_group_events)
        return make_failure(E2BIG, concat({"a pmc group holds at most ", decimal(max_group_events), " events"}));
    GroupCore g;
    g.info = std::make_unique<GroupInfo>();
    for (const auto& text : texts) {
        auto spec = try_parse_event(text, options.sysfs_root);
        if (!spec) return spec.failure();
        if (spec->kind != EventKind::perf)
            return make_failure(EINVAL, concat({"'", text, "' cannot be a group member: ",
                                                spec->kind == EventKind::difference
                                                    ? "it is itself a group (open it as a pmc::Counter)"
                                                    : "it is pmc's clock, not a perf event (read it with a "
                                                      "pmc::Counter)"}));
        for (const auto& name : g.info->names)
            if (name == spec->name)
                return make_failure(EINVAL, concat({"'", text, "' is in the group twice; give one a name= term to "
                                                    "tell them apart"}));
        if (!g.info->specs.empty() && (spec->attr.pinned || spec->attr.exclusive))
            return make_failure(EINVAL, concat({"'", text, "' cannot be a group member: ':D' (pinned) and ':e' "
                                                "(exclusive) apply to a whole group, so the kernel takes them only on "
                                                "its first event. Put the modifier on the first event ('",
                                                g.info->specs[0].text, "'), or count '", text,
                                                "' in a group of its own."}));
        g.info->names.push_back(spec->name);
        g.info->specs.push_back(std::move(*spec));
    }
    const std::size_t n = g.info->specs.size();
    // Under pmc emulate: instruction events are the emulator's, the modelled cache events its cache model's (pmc
    // emulate --cache), the branch events its branch counts (--branches), and nothing else can be counted (no perf_event_open). A group of instruction events reads
    // the thread's one count; a group with a modelled member reads every member's count at one request.
    const auto emulated_member = [](const EventSpec& s) {
        return is_instruction_event(s) || modelled_event(s).has_value();
    };
    if (std::any_of(g.info->specs.begin(), g.info->specs.end(), emulated_member) && emulated_pmu()) {
        const EmulatedPmu& pmu = *emulated_pmu();
        bool any_modelled = false;
        for (const auto& spec : g.info->specs) {
            std::string why = emulated_refusal(spec);
            if (why.empty() && !pmu.compatible()) why = "pmc's plugin speaks another protocol version";
            if (why.empty() && (options.pid != 0 || options.count_children || options.enable_on_exec))
                why = "it counts the calling thread only; for a whole command: pmc count --emulate";
            const auto modelled = modelled_event(spec);
            if (why.empty() && modelled) why = missing_model(pmu, spec);
            if (!why.empty())
                return make_failure(EOPNOTSUPP,
                                    concat({"cannot open '", spec.text, "' in a group on the emulated PMU: ", why}));
            g.info->attrs.push_back(spec.attr);
            g.info->emulated_events.push_back(modelled ? static_cast<std::uint64_t>(*modelled) : 0);
            any_modelled = any_modelled || modelled.has_value();
        }
        if (!any_modelled) g.info->emulated_events.clear();
        g.members.resize(n);
        g.path = ReadPath::emulated;
        g.info->notes.push_back(concat({emulated_count_note,
                                        any_modelled ? "; every member's count is read at one request to QEMU's plugin"
                                                     : "; every member reads the thread's one count with a request "
                                                       "to QEMU's plugin"}));
        bool any_cache = false;
        for (const auto& spec : g.info->specs) {
            any_cache = any_cache || modelled_cache_event(spec).has_value();
            if (modelled_branch_event(spec)) g.info->notes.push_back(concat({spec.text, ": ", branch_count_note(spec)}));
        }
        if (any_cache) g.info->notes.push_back(modelled_count_note(pmu));
        g.owner = acquire_thread_token();
        g.info->pid = ::getpid();
        g.info->opened_ns = clock_ns(CLOCK_MONOTONIC);
        return g;
    }
    // (With a single core-type PMU there is nothing to sum: the group is placed as under require_pinned.)
    if (options.hybrid == HybridPolicy::sum_core_types && hybrid_pmus(options.sysfs_root).size() >= 2)
        for (const auto& spec : g.info->specs)
            if (spec.core_pmu && spec.pmu.empty())
                return make_failure(EINVAL, concat({"cannot open '", spec.text, "' in a pmc group with "
                                                    "HybridPolicy::sum_core_types: a group goes onto one PMU, and "
                                                    "summing core types needs one event per core type. Pin the "
                                                    "thread to one core type (pmc::pin_this_thread) and keep "
                                                    "HybridPolicy::require_pinned, or open the event as a "
                                                    "pmc::Counter with sum_core_types."}));
    const bool other_process = options.pid != 0;
    const auto user_access_off = user_counter_access_off();
    bool allowed = !options.count_children && !other_process && !user_access_off;
    for (std::size_t i = 0; i < n; ++i) {
        const EventSpec& spec = g.info->specs[i];
        perf_event_attr attr = spec.attr;
        attr.inherit = options.count_children;
        attr.enable_on_exec = i == 0 && options.enable_on_exec;
        if (PMC_ARCH_AARCH64 && spec.core_pmu) attr.config1 |= 0x2; // user-space reads (see counter.hpp)
        attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        if (auto failure = place_on_core_pmu(spec, attr, nullptr, g.info->notes, options.sysfs_root))
            return std::move(*failure);
        GroupMember m;
        auto fd = open_event(spec, attr, i == 0 ? -1 : g.members[0].fd.get(), g.info->notes,
                             /*start_disabled=*/i == 0, options.pid, options.exclude_kernel_fallback);
        if (!fd) {
            Failure f = fd.failure();
            if (i > 0 && (f.code.value() == EINVAL || f.code.value() == ENOSPC))
                append(f.message, {"\nA group goes onto the counters all at once: with ", decimal(i), " event",
                                   i == 1 ? "" : "s", " before it, '", spec.text,
                                   "' may not fit the PMU's counters. Use fewer events per group, or several groups "
                                   "(the kernel then multiplexes them, and pmc scales the counts)."});
            return f;
        }
        m.fd = std::move(*fd);
        g.info->attrs.push_back(attr);
        if (allowed && may_use_rdpmc(attr)) {
            auto map = map_control_page(m.fd, spec);
            if (!map) return map.failure();
            m.map = std::move(*map);
            bool ok = false;
            unsigned width = 64;
            if (auto failure = attach_page(spec.text, m.cache, static_cast<const perf_event_mmap_page*>(m.map.get()),
                                           0, ok, width))
                return std::move(*failure);
            allowed = allowed && ok;
        } else {
            allowed = false;
        }
        g.members.push_back(std::move(m));
    }
    if (!options.enable_on_exec)
        if (auto failure = enable_group(g.members[0].fd, concat({"the group of '", g.info->specs[0].text, "'"})))
            return std::move(*failure);
    const bool user_time = allowed && user_time_allowed(snapshot(*g.members[0].cache.page).capabilities);
    if (allowed && user_time) {
        g.path = ReadPath::rdpmc;
        for (auto& m : g.members) m.cache.invalidate(); // the first read fills the caches and the leader's times
        g.info->notes.push_back("read in user space: one rdpmc per event and the leader page's time conversion");
    } else {
        g.path = ReadPath::syscall;
        g.info->notes.push_back(
            other_process          ? concat({"counts process ", decimal(options.pid), ": read with one read()"})
            : options.count_children ? "counts children (inherit): read with one read() of the group"
            : user_access_off      ? *user_access_off
            : allowed              ? "read with one read() of the group: the kernel publishes no user-space time "
                                     "conversion here (cap_user_time = 0), which multiplexing scaling needs"
                                   : "read with one read() of the group: not every event is on a user-readable "
                                     "counter");
    }
    g.owner = acquire_thread_token();
    if (g.path == ReadPath::rdpmc) g.fast_owner = g.owner;
    g.any_thread = options.count_children || other_process;
    g.info->pid = ::getpid();
    return g;
}

struct GroupAccess; // lets tests build a group around fake control pages

/// An event index checked against the group's size: pmc::error saying so, not std::out_of_range's library text.
inline std::size_t event_index(std::size_t i, std::size_t events) {
    if (i >= events)
        raise(make_failure(ERANGE, "no event " + std::to_string(i) + " in this group: it holds " +
                                       std::to_string(events) + " event" + (events == 1 ? "" : "s") +
                                       ", numbered from 0 in the order they were given"));
    return i;
}

} // namespace detail

template <class Group>
class GroupInterval;

/// Several events counted together. Template choice: Serialize, as for BasicCounter. Most code wants pmc::Group.
template <class Serialize = serialize::lfence>
class BasicGroup {
public:
    /// Opens the events as one group. Throws pmc::error with the reason and the fix.
    BasicGroup(std::initializer_list<std::string_view> events, const OpenOptions& options = {})
        : BasicGroup(std::vector<std::string>(events.begin(), events.end()), options) {}
    explicit BasicGroup(const std::vector<std::string>& events, const OpenOptions& options = {})
        : core_(detail::open_group(events, options).value()) {}
    /// Opens without throwing pmc::error.
    static Result<BasicGroup> try_open(const std::vector<std::string>& events, const OpenOptions& options = {}) {
        auto core = detail::open_group(events, options);
        if (!core) return core.failure();
        return BasicGroup(std::move(*core));
    }

    BasicGroup(BasicGroup&&) noexcept = default;
    BasicGroup& operator=(BasicGroup&&) noexcept = default;

    std::size_t size() const { return info().names.size(); }
    /// The event's display name: its text, or its name= term.
    const std::string& name(std::size_t i) const { return info().names[detail::event_index(i, info().names.size())]; }
    std::optional<std::size_t> find(std::string_view name) const {
        const auto& names = info().names;
        auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) return std::nullopt;
        return static_cast<std::size_t>(it - names.begin());
    }
    /// The index of the event called `name`; throws pmc::error if there is none.
    std::size_t index(std::string_view name) const {
        if (auto i = find(name)) return *i;
        raise(make_failure(ENOENT, "no event named '" + std::string(name) + "' in this group"));
    }
    ReadPath path() const noexcept { return core_.path; }
    /// The leader's perf fd (-1 when moved from, and on the emulated PMU): its read(2) returns every count and the group's times
    /// (PERF_FORMAT_GROUP: nr, time enabled, time running, one value per member).
    int fd() const noexcept { return core_.members.empty() ? -1 : core_.members[0].fd.get(); }
    const std::vector<std::string>& notes() const { return info().notes; }
    const EventSpec& event(std::size_t i) const { return info().specs[detail::event_index(i, info().specs.size())]; }
    /// Event i's perf_event_attr as opened (after any fallback: pmc::name_as_opened(event(i), attr(i)) is the name
    /// perf shows for it).
    const perf_event_attr& attr(std::size_t i) const {
        return info().attrs[detail::event_index(i, info().attrs.size())];
    }

    /// A reading sized for this group: reading into it does not allocate.
    GroupReading make_reading() const {
        GroupReading r;
        r.values.assign(size(), 0);
        return r;
    }
    /// Reads every event and the group's times into `out` (made by make_reading()). No system call, allocation
    /// or exception on the rdpmc path. A reading of another size (default-constructed, or another group's) is
    /// resized first, which allocates.
    void read(GroupReading& out) {
        if (BOOST_UNLIKELY(out.values.size() != core_.members.size())) return read_resized(out);
        if (BOOST_LIKELY(detail::thread_token == core_.fast_owner)) {
            const std::size_t n = core_.members.size();
            // As for pmc::Counter: the cached counter numbers are used only while every page is unchanged since
            // they were cached (checked before the rdpmc and again after it).
            if (BOOST_UNLIKELY(!caches_valid(n))) {
                detail::group_refresh<Serialize>(core_, out);
                return;
            }
            Serialize::before();
            for (std::size_t i = 0; i < n; ++i) out.values[i] = detail::rdpmc(core_.members[i].cache.index);
            const std::uint64_t ticks = detail::rdtsc();
            if (BOOST_LIKELY(caches_valid(n))) {
                for (std::size_t i = 0; i < n; ++i) {
                    const auto& c = core_.members[i].cache;
                    out.values[i] = static_cast<std::uint64_t>(c.count(out.values[i], c.shift));
                }
                const std::uint64_t delta = detail::ticks_to_ns(core_.time_ticks(ticks), core_.time_mult,
                                                                core_.time_shift, core_.time_offset);
                out.time_enabled = core_.time_enabled + delta;
                out.time_running = core_.time_running + delta;
                return;
            }
            detail::group_refresh<Serialize>(core_, out);
            return;
        }
        read_slow(out);
    }
    GroupReading read() {
        GroupReading r = make_reading();
        read(r);
        return r;
    }

    /// Starts an interval now.
    GroupInterval<BasicGroup> interval() { return GroupInterval<BasicGroup>(*this); }

private:
    friend struct detail::GroupAccess;
    explicit BasicGroup(detail::GroupCore core) : core_(std::move(core)) {}

    const detail::GroupInfo& info() const {
        if (!core_.info) raise(make_failure(EBADF, "use of a pmc group that was moved from"));
        return *core_.info;
    }

    BOOST_FORCEINLINE bool caches_valid(std::size_t n) const noexcept {
        bool moved = false;
        for (std::size_t i = 0; i < n; ++i)
            moved |= detail::load_once(core_.members[i].cache.page->lock) != core_.members[i].cache.seq;
        return !moved;
    }

    // Every read writes one value per member: a reading of another size is resized first (off the fast path).
    BOOST_NOINLINE PMC_COLD void read_resized(GroupReading& out) {
        out.values.resize(core_.members.size());
        read(out);
    }

    BOOST_NOINLINE void read_slow(GroupReading& out) {
        if (core_.path == ReadPath::rdpmc || (detail::thread_token != core_.owner && !core_.any_thread))
            detail::group_wrong_thread(core_); // another thread, a fork() child, or moved from (EBADF)
        if (core_.path == ReadPath::emulated) {
            const auto& events = core_.info->emulated_events;
            if (!events.empty()) { // the members' codes in place, replaced by their counts at one request
                std::copy(events.begin(), events.end(), out.values.begin());
                detail::emulated::read_events(out.values.data(), events.size());
            } else {
                const std::uint64_t count = detail::emulated::read_instructions();
                for (auto& v : out.values) v = count;
            }
            out.time_enabled = out.time_running = detail::clock_ns(CLOCK_MONOTONIC) - core_.info->opened_ns;
            return;
        }
        detail::group_read_syscall(core_, out);
    }

    detail::GroupCore core_;
};

using Group = BasicGroup<>;

/// A measurement in progress on a group. Refers to the group, which must outlive it and not be moved.
template <class Group>
class GroupInterval {
public:
    explicit GroupInterval(Group& group)
        : group_(&group), start_(group.make_reading()), stop_(group.make_reading()), counts_(group.size()) {
        group.read(start_);
    }
    /// Reads the group and returns each event's count since the start (scaled, with running fractions). The
    /// returned vector lives in the interval; stop() again updates it. No allocation.
    const std::vector<EventCount>& stop() {
        group_->read(stop_);
        difference(start_, stop_, counts_);
        return counts_;
    }
    const EventCount& operator[](std::size_t i) const { return counts_[detail::event_index(i, counts_.size())]; }
    const EventCount& operator[](std::string_view name) const { return counts_.at(group_->index(name)); }
    const GroupReading& start_reading() const { return start_; }

private:
    Group* group_;
    GroupReading start_, stop_;
    std::vector<EventCount> counts_;
};

namespace detail {
/// Test access: builds a group around control pages that are not the kernel's (tests/emulated), as if its events
/// had been opened and mapped. `read_fd` serves the read() fallback.
struct GroupAccess {
    template <class G>
    static Result<G> attach(const std::vector<const perf_event_mmap_page*>& pages, const std::vector<std::string>& names,
                            int read_fd) {
        if (pages.empty() || pages.size() > max_group_events) {
            FileDescriptor owned(read_fd); // closed: attach() owns it either way
            return make_failure(E2BIG, "a pmc group holds 1 to " + std::to_string(max_group_events) + " events");
        }
        GroupCore g;
        g.info = std::make_unique<GroupInfo>();
        g.info->names = names;
        g.info->pid = ::getpid();
        bool allowed = true;
        for (std::size_t i = 0; i < pages.size(); ++i) {
            GroupMember m;
            if (i == 0) m.fd = FileDescriptor(read_fd);
            bool ok = false;
            unsigned width = 64;
            if (auto failure = attach_page(names[i], m.cache, pages[i], 0, ok, width)) return std::move(*failure);
            allowed = allowed && ok;
            m.cache.invalidate();
            g.members.push_back(std::move(m));
        }
        const bool user_time = user_time_allowed(snapshot(*pages[0]).capabilities);
        g.path = allowed && user_time ? ReadPath::rdpmc : ReadPath::syscall;
        g.owner = acquire_thread_token();
        if (g.path == ReadPath::rdpmc) g.fast_owner = g.owner;
        return G(std::move(g));
    }
};
} // namespace detail

PMC_END_NAMESPACE
