// SPDX-License-Identifier: MIT
// pmc/profiler.hpp: a query-level profiler that programs embed, with exact counters on every thread.
//
//     auto prof = pmc::Profiler::from_env();        // PMC_PROFILE=out.pmcprof turns it on; absent: off
//     auto typeck = prof.label("typeck");           // interned once; events store its id
//     {
//         auto s = prof.scope(typeck, prof.label("fn main"));   // an interval, with an optional argument
//         ...                                                   // nested scopes, on any thread
//     }
//     prof.instant(prof.label("cache-hit"));
//     prof.integer(prof.label("artifact-size"), 12345);
//
// Each thread records into its own page buffer with its own counters, opened on the thread's first event (a perf
// counter counts only the thread that opened it): no lock and no allocation per event. A full page is written to the
// file with one writev(2) (O_APPEND; with its thread page, which carries the counters' times) by the thread that
// filled it, so memory stays bounded; a SIGKILL loses at most each thread's unwritten page. File blocks are reserved
// ahead of the end in chunks (fallocate, ProfilerOptions::preallocate_bytes), which makes each append cheaper for the
// kernel, and given back at the end (not after a SIGKILL). A thread's exit, the profiler's destruction, exit() and
// the fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGINT, SIGTERM, SIGQUIT, SIGHUP, where the program
// left them at their default) write what is buffered, and the calling thread's counters' times as of then. The
// format is docs/profile-format.md; pmc/profile_format.hpp reads it, `pmc summarize` shows it.
//
// The Profiler must outlive every scope and every thread's recording: destroy it after joining its threads. A
// profiler that is off (from_env without PMC_PROFILE) costs a predictable branch per event. A fork() child records
// nothing into the parent's file (its counters count the parent's threads, and its pages would clash).
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/cpu.hpp>
#include <pmc/determinism.hpp>
#include <pmc/error.hpp>
#include <pmc/group.hpp>
#include <pmc/machine.hpp>
#include <pmc/profile_format.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <ctime>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

PMC_BEGIN_NAMESPACE

/// An interned string: a label or an argument. Label{} (id 0) means none.
struct Label {
    std::uint32_t id = 0;
    explicit operator bool() const noexcept { return id != 0; }
};

/// How to build a Profiler.
struct ProfilerOptions {
    std::string path;                             ///< the profile file (created or truncated)
    std::vector<std::string> counters{"wall-time"}; ///< the first is the primary value; up to 3 more ride along
    std::size_t page_bytes = 64 * 1024;           ///< per thread: the memory held and what a SIGKILL can lose
    /// File blocks reserved ahead of the end, this many at a time (fallocate, FALLOC_FL_KEEP_SIZE): a page appended
    /// into reserved blocks costs the kernel less than one that allocates its own. 0: off. Only on a regular file
    /// outside tmpfs; the blocks past the end are given back when the profiler ends (not after a SIGKILL).
    std::size_t preallocate_bytes = 8u << 20;
    bool flush_on_fatal_signals = true;           ///< install handlers for signals left at their default
    bool measure_cost = true;                     ///< measure what one scope adds to its parent (header)
    /// For CI: from_env never replaces a counter that cannot be opened, nor turns profiling off when its file cannot
    /// be created: it throws pmc::error with the reason instead (PMC_PROFILE_STRICT=1 sets it). The constructor
    /// always behaves so.
    bool strict = false;
};

namespace detail {
/// The profile's path with `%p` replaced by the process id, zero-padded to 7 digits (the most a Linux pid has:
/// pid_max is at most 2^22), and `%%` by `%`. Any other `%` is an error (nullopt, `why` says which).
inline std::optional<std::string> expand_profile_path(std::string_view pattern, pid_t pid, std::string& why) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%') {
            out += pattern[i];
            continue;
        }
        const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
        if (next == 'p') {
            char digits[16];
            std::snprintf(digits, sizeof digits, "%07d", static_cast<int>(pid));
            out += digits;
        } else if (next == '%') {
            out += '%';
        } else {
            why = "'%" + std::string(next ? 1 : 0, next) + "' at position " + std::to_string(i) +
                  ": a profile path knows %p (the process id) and %% (a percent sign)";
            return std::nullopt;
        }
        ++i;
    }
    return out;
}

/// `path` with `.%p` before its extension (or at its end): the file of a process that found `path` in use.
inline std::string per_process_path(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    const std::size_t dot = path.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1)
        return path + ".%p";
    return path.substr(0, dot) + ".%p" + path.substr(dot);
}
} // namespace detail

namespace detail {

struct ProfilerShared;
struct ProfilerTestAccess;

/// One thread's recording state: its counters and its page. Written only by its thread, except when the
/// process ends (exit(), a fatal signal) and what it committed is written out by another.
/// A scope or begin() interval open on a thread: its label, argument and start readings.
struct OpenInterval {
    std::uint32_t label = 0, arg = 0;
    std::uint64_t start[profile_format::max_counters] = {};
    bool ended = false; ///< ended out of order (reported): dropped when it reaches the top
};

struct ProfilerThread {
    ProfilerShared* shared = nullptr;
    std::uint32_t index = 0;
    std::uint32_t depth = 0;     ///< intervals open: open[0, depth)
    std::uint32_t open_capacity = 0;
    std::uint32_t ended_slots = 0; ///< open intervals marked ended (out of order): dropped once on top
    std::unique_ptr<OpenInterval[]> open; ///< the thread's nesting (scopes and begin/end share it); grows, never shrinks
    std::uint32_t sequence = 0;  ///< the next events page's number (changed under page_state, by the owner)
    /// Per counter, the last value encoded in the page (records store differences from it; 0 at a page's start,
    /// so that each page decodes alone).
    std::uint64_t last[profile_format::max_counters] = {};
    std::uint32_t max_record = 0; ///< profile_format::max_record_bytes(ncounters)
    /// Records a page holds: capacity / max_record. A page is written when it holds this many, not when its bytes
    /// run out, so the write happens in the same scope whatever the values recorded (their varints' lengths vary):
    /// under an exact counter, the write's instructions must not move between scopes when a value changes.
    std::uint32_t record_limit = 1;
    /// Who may touch the page's written part: 0 nobody, 1 its thread writing it out and starting afresh, 2 another
    /// thread copying it (exit(), a fatal signal). The owner appends past `committed` in any state.
    std::atomic<std::uint32_t> page_state{0};
    std::atomic<std::uint32_t> thread_pages{0}; ///< thread pages written (the next one's number)
    std::size_t ncounters = 1;
    unsigned char* page = nullptr; ///< page header space + payload
    std::uint32_t capacity = 0;    ///< payload bytes
    std::atomic<std::uint64_t> committed{0}; ///< payload bytes (low 32 bits) and records (high): one store per event
    bool broken = false;         ///< its counters failed: records hold zeros
    std::atomic<bool> discard{false}; ///< measuring the cost, or the thread ended: pages are not written
    std::optional<Counter> primary;
    std::vector<Counter> clocks;   ///< ride-along counters that cannot be group members (clocks, composites)
    std::optional<Group> group;    ///< ride-along perf events, read together
    GroupReading reading;
    std::array<std::int8_t, profile_format::max_counters> slot{}; ///< for counter i > 0: group member (>= 0) or ~clock
    std::string name, error;
    pid_t tid = 0;
    std::atomic<ProfilerThread*> next{nullptr};
    /// Per counter, time enabled and time running (ns) at the last look: how much of the time it counted.
    std::array<std::uint64_t, 2 * profile_format::max_counters> times{};
    /// This thread's thread page, ready to send with the times filled in at each flush (built where the name
    /// changes, so that a flush allocates nothing).
    std::vector<unsigned char> info_page;
    /// Where the thread page is assembled (info_page, then the events pages written and the open intervals): sized
    /// for the stack's capacity, so that writing it allocates nothing (a signal handler writes it).
    std::unique_ptr<unsigned char[]> info_buf;
    std::size_t info_buf_bytes = 0;
    /// Per counter, the perf fd whose read(2) gives its times and the bytes to read (fd -1: a clock, no times);
    /// group members share their leader's. Set once the counters are open.
    std::array<int, profile_format::max_counters> times_fd = [] {
        std::array<int, profile_format::max_counters> none{};
        none.fill(-1);
        return none;
    }();
    std::array<std::uint32_t, profile_format::max_counters> times_bytes{};
    /// Set by this thread while it uses `times` and `info_page`: a fatal signal's handler on this thread then
    /// leaves them alone.
    std::atomic<bool> info_busy{false};

    ~ProfilerThread() {
        if (page) ::munmap(page, capacity + profile_format::page_header_bytes);
    }

    /// Opens an interval: its slot, then the start readings last (as close to the body as possible).
    BOOST_FORCEINLINE std::uint32_t push(Label label, Label arg) noexcept {
        if (BOOST_UNLIKELY(depth == open_capacity)) grow();
        OpenInterval& o = open[depth];
        o.label = label.id;
        o.arg = arg.id;
        o.ended = false;
        const std::uint32_t at = depth++;
        if (BOOST_LIKELY(ncounters == 1)) {
            o.start[0] = read_primary();
        } else {
            std::uint64_t v[profile_format::max_counters] = {}; // read_rest is out of line: o.start must not escape
            read_all(v);
            std::memcpy(o.start, v, sizeof v);
        }
        return at;
    }
    /// Doubles the stack (at most once per new deepest nesting: no allocation per event; register_thread makes
    /// the first 64). Out of memory: the thread stops recording (broken: zeros) and reuses the top slot rather than
    /// throw from a scope.
    BOOST_NOINLINE void grow() noexcept {
        const std::uint32_t want = 2 * open_capacity;
        OpenInterval* bigger = want > open_capacity ? new (std::nothrow) OpenInterval[want] : nullptr;
        if (!bigger) {
            broken = true;
            --depth;
            return;
        }
        const std::size_t buf_bytes = info_page.size() + 8 + 16 * std::size_t{want};
        unsigned char* buf = new (std::nothrow) unsigned char[buf_bytes];
        if (!buf) {
            delete[] bigger;
            broken = true;
            --depth;
            return;
        }
        for (std::uint32_t i = 0; i < depth; ++i) bigger[i] = open[i];
        InfoBusy busy(*this); // a signal now leaves the thread page alone
        open.reset(bigger);
        info_buf.reset(buf);
        info_buf_bytes = buf_bytes;
        open_capacity = want;
    }

    /// Writes the interval in slot `at` ended with readings `stop` (its depth: `at`), and closes it. The record
    /// (docs/profile-format.md): head, depth, [argument], then per counter the end less the page's last value and
    /// the end less the start, as varints: 5 to 8 bytes for a short interval with one counter.
    BOOST_FORCEINLINE void record_interval(std::uint32_t at, const std::uint64_t* stop) noexcept {
        namespace pf = profile_format;
        const OpenInterval& o = open[at];
        depth = at;
        if (BOOST_UNLIKELY(ended_slots != 0)) drop_ended();
        unsigned char* const p0 = reserve(max_record);
        unsigned char* p = pf::put_varint(p0, pf::record_head(pf::RecordKind::interval, o.arg != 0, o.label));
        p = pf::put_varint(p, at);
        if (o.arg) p = pf::put_varint(p, o.arg);
        // The readings at a cost that does not depend on them (put_varint_fixed_cost): a child's value must not
        // change what recording it costs its parent.
        if (BOOST_LIKELY(ncounters == 1)) { // the usual case: no loop
            p = pf::put_varint_fixed_cost(p, stop[0] - last[0]);
            p = pf::put_varint_fixed_cost(p, stop[0] - o.start[0]);
            last[0] = stop[0];
        } else {
            for (std::size_t i = 0; i < ncounters; ++i) {
                p = pf::put_varint_fixed_cost(p, stop[i] - last[i]);
                p = pf::put_varint_fixed_cost(p, stop[i] - o.start[i]);
                last[i] = stop[i];
            }
        }
        commit(static_cast<std::uint32_t>(p - p0));
    }

    /// An instant (`value` unused), integer or nesting-error record (`arg`: the innermost open label) at the
    /// primary reading `now`.
    BOOST_FORCEINLINE void record_mark(profile_format::RecordKind kind, std::uint32_t label, std::uint32_t arg,
                                       std::uint64_t now, std::uint64_t value) noexcept {
        namespace pf = profile_format;
        unsigned char* const p0 = reserve(max_record);
        unsigned char* p = pf::put_varint(p0, pf::record_head(kind, arg != 0, label));
        p = pf::put_varint(p, depth);
        if (arg) p = pf::put_varint(p, arg);
        p = pf::put_varint_fixed_cost(p, now - last[0]); // (as in record_interval: a cost the value does not change)
        last[0] = now;
        if (kind == pf::RecordKind::integer) p = pf::put_varint_fixed_cost(p, value);
        commit(static_cast<std::uint32_t>(p - p0));
    }

    /// Drops the intervals on top that ended out of order (already reported).
    BOOST_NOINLINE void drop_ended() noexcept {
        while (depth > 0 && open[depth - 1].ended) --depth, --ended_slots;
    }

    /// An end that does not match the innermost open interval: a nesting-error record (the label ended, the
    /// innermost open label or 0, the primary reading now). Nothing open is closed: the nesting stays as it was.
    BOOST_NOINLINE void record_mismatch(std::uint32_t label, std::uint64_t now) noexcept {
        const std::uint32_t inner = depth > 0 ? open[depth - 1].label : 0;
        record_mark(profile_format::RecordKind::nesting_error, label, inner, now, 0);
    }

    /// A scope's end (slot `at`): the record, or, out of order, the error and its slot marked ended.
    BOOST_FORCEINLINE void end_scope(std::uint32_t at) noexcept {
        std::uint64_t stop[profile_format::max_counters];
        if (BOOST_LIKELY(ncounters == 1)) stop[0] = read_primary();
        else read_all(stop);
        if (BOOST_UNLIKELY(at + 1 != depth)) return end_scope_slow(at, stop);
        record_interval(at, stop);
    }
    BOOST_NOINLINE void end_scope_slow(std::uint32_t at, const std::uint64_t* stop) noexcept {
        drop_ended();
        if (at + 1 == depth) return record_interval(at, stop);
        const std::uint32_t label = at < depth ? open[at].label : 0;
        record_mismatch(label, stop[0]);
        if (at < depth && !open[at].ended) { // inner intervals are still open: it goes when they have
            open[at].ended = true;
            ++ended_slots;
        }
    }

    /// end(label): closes the innermost open interval if it has this label; otherwise an error record.
    BOOST_FORCEINLINE void end_label(std::uint32_t label) noexcept {
        std::uint64_t stop[profile_format::max_counters];
        if (BOOST_LIKELY(ncounters == 1)) stop[0] = read_primary();
        else read_all(stop);
        if (BOOST_UNLIKELY(depth == 0 || open[depth - 1].label != label || open[depth - 1].ended))
            return end_label_slow(label, stop);
        record_interval(depth - 1, stop);
    }
    BOOST_NOINLINE void end_label_slow(std::uint32_t label, const std::uint64_t* stop) noexcept {
        drop_ended();
        if (depth > 0 && open[depth - 1].label == label) return record_interval(depth - 1, stop);
        record_mismatch(label, stop[0]);
    }

    /// The primary counter alone (one counter recorded).
    BOOST_FORCEINLINE std::uint64_t read_primary() noexcept {
        if (BOOST_UNLIKELY(broken)) return 0;
#if !defined(BOOST_NO_EXCEPTIONS)
        try {
#endif
            return primary->read();
#if !defined(BOOST_NO_EXCEPTIONS)
        } catch (...) { // as in read_all
            broken = true;
            return 0;
        }
#endif
    }

    BOOST_FORCEINLINE void read_all(std::uint64_t* out) noexcept {
        if (BOOST_UNLIKELY(broken)) {
            for (std::size_t i = 0; i < ncounters; ++i) out[i] = 0;
            return;
        }
#if !defined(BOOST_NO_EXCEPTIONS)
        try {
#endif
            if (BOOST_LIKELY(ncounters == 1)) {
                out[0] = primary->read();
                return;
            }
            read_rest(out);
            out[0] = primary->read();
#if !defined(BOOST_NO_EXCEPTIONS)
        } catch (...) { // a read in a fork() child, or read() failing: stop recording on this thread
            broken = true;
            for (std::size_t i = 0; i < ncounters; ++i) out[i] = 0;
        }
#endif
    }
    BOOST_NOINLINE void read_rest(std::uint64_t* out) {
        if (group) group->read(reading);
        for (std::size_t i = 1; i < ncounters; ++i)
            out[i] = slot[i] >= 0 ? reading.values[static_cast<std::size_t>(slot[i])]
                                  : clocks[static_cast<std::size_t>(~slot[i])].read();
    }

    /// Room for `bytes` in the page: writes the page out first if it is full.
    BOOST_FORCEINLINE unsigned char* reserve(std::uint32_t bytes) noexcept {
        const std::uint64_t c = committed.load(std::memory_order_relaxed);
        // (record_limit records of at most max_record bytes fit; the byte check is for a larger `bytes`.)
        if (BOOST_UNLIKELY((c >> 32) >= record_limit || static_cast<std::uint32_t>(c) + bytes > capacity)) {
            flush();
            return page + profile_format::page_header_bytes;
        }
        return page + profile_format::page_header_bytes + static_cast<std::uint32_t>(c);
    }
    BOOST_FORCEINLINE void commit(std::uint32_t bytes) noexcept {
        const std::uint64_t c = committed.load(std::memory_order_relaxed);
        committed.store(c + bytes + (std::uint64_t{1} << 32), std::memory_order_release);
    }

    /// Writes the page (and, on the thread itself, its thread page with its counters' times).
    /// `ended`: the thread's last (its exit, the profiler's close).
    inline void flush(bool on_own_thread = true, bool ended = false) noexcept; // defined after ProfilerShared
    std::atomic<std::uint32_t> sequence_seen{0}; ///< `sequence` for other threads (exit(): a page being written)
    std::atomic<std::uint32_t> exit_pages{0};    ///< events pages as exit()'s flush counted them

    /// The thread page's fixed part: header space, tid, flags, name, error, and room for the times; and the buffer
    /// where finish_info_page assembles the whole page.
    void build_info_page() {
        info_page.assign(profile_format::page_header_bytes, 0);
        auto put = [&](const void* p, std::size_t n) {
            info_page.insert(info_page.end(), static_cast<const unsigned char*>(p),
                             static_cast<const unsigned char*>(p) + n);
        };
        auto put32 = [&](std::uint32_t v) { put(&v, 4); };
        const std::uint64_t id = static_cast<std::uint64_t>(tid);
        put(&id, 8);
        put32(0); // flags: set when the page is finished
        put32(static_cast<std::uint32_t>(name.size()));
        put(name.data(), name.size());
        put32(static_cast<std::uint32_t>(error.size()));
        put(error.data(), error.size());
        put32(static_cast<std::uint32_t>(ncounters));
        put32(0);
        put(times.data(), 16 * ncounters);
        info_buf_bytes = info_page.size() + 8 + 16 * std::size_t{open_capacity};
        info_buf.reset(new unsigned char[info_buf_bytes]);
    }

    /// Where read_times() finds each counter's times (once the counters are open).
    void find_time_sources() noexcept {
        times_fd.fill(-1);
        for (std::size_t i = 0; i < ncounters; ++i) {
            const Counter* c = nullptr;
            if (i == 0) c = primary ? &*primary : nullptr;
            else if (slot[i] < 0) c = &clocks[static_cast<std::size_t>(~slot[i])];
            if (c) {
                // {value, enabled, running} or, for a difference's group, {nr, enabled, running, value, value}
                times_fd[i] = c->fd();
                times_bytes[i] = (c->attr().read_format & PERF_FORMAT_GROUP) ? 5 * 8 : 3 * 8;
            } else if (group) {
                times_fd[i] = group->fd(); // {nr, enabled, running, one value per member}
                times_bytes[i] = static_cast<std::uint32_t>(8 * (3 + reading.values.size()));
            }
        }
    }

    /// Refreshes `times` with read(2) of each perf counter (a system call per fd: at flushes only). Clocks keep 0
    /// (they are never multiplexed). Async-signal-safe: read(2) into the stack, no allocation, no exception.
    void read_times() noexcept {
        if (broken || !primary) return;
        std::uint64_t buf[3 + max_group_events];
        int last_fd = -1;
        bool ok = false;
        for (std::size_t i = 0; i < ncounters; ++i) {
            const int fd = times_fd[i];
            if (fd < 0 || times_bytes[i] > sizeof buf) continue;
            if (fd != last_fd) { // a group's members: one read for all
                last_fd = fd;
                ok = read_perf_fd(fd, buf, times_bytes[i]) == static_cast<ssize_t>(times_bytes[i]);
            }
            if (ok) times[2 * i] = buf[1], times[2 * i + 1] = buf[2]; // enabled, running in either layout
        }
    }

    /// Marks `times` and `info_page` in use by their thread (see info_busy).
    struct InfoBusy {
        ProfilerThread& t;
        explicit InfoBusy(ProfilerThread& thread) noexcept : t(thread) {
            t.info_busy.store(true, std::memory_order_relaxed);
            std::atomic_signal_fence(std::memory_order_seq_cst);
        }
        ~InfoBusy() {
            std::atomic_signal_fence(std::memory_order_seq_cst);
            t.info_busy.store(false, std::memory_order_relaxed);
        }
        InfoBusy(const InfoBusy&) = delete;
        InfoBusy& operator=(const InfoBusy&) = delete;
    };

    /// Assembles the thread page in info_buf: the fixed part with the times, `ended` (the thread's last page),
    /// the events pages written so far (`pages`), and the intervals open now (label, argument, primary start,
    /// outermost first). Its number is thread_pages, which the caller advances once the page is written. Returns its
    /// bytes. Allocates nothing.
    std::size_t finish_info_page(bool ended, std::uint32_t pages) noexcept {
        const std::size_t fixed = info_page.size();
        unsigned char* b = info_buf.get();
        std::memcpy(b, info_page.data(), fixed);
        std::memcpy(b + fixed - 16 * ncounters, times.data(), 16 * ncounters);
        const std::uint32_t flags = ended ? 1 : 0;
        std::memcpy(b + profile_format::page_header_bytes + 8, &flags, 4);
        const std::uint32_t n_open = std::min(depth, open_capacity);
        std::memcpy(b + fixed, &pages, 4);
        std::memcpy(b + fixed + 4, &n_open, 4);
        unsigned char* o = b + fixed + 8;
        for (std::uint32_t i = 0; i < n_open; ++i, o += 16) {
            std::memcpy(o, &open[i].label, 4);
            std::memcpy(o + 4, &open[i].arg, 4);
            std::memcpy(o + 8, &open[i].start[0], 8);
        }
        const auto total = static_cast<std::size_t>(o - b);
        const auto payload = static_cast<std::uint32_t>(total - profile_format::page_header_bytes);
        const std::uint32_t seq = thread_pages.load(std::memory_order_relaxed);
        profile_format::write_page_header(b, profile_format::PageKind::thread, index, seq,
                                          b + profile_format::page_header_bytes, payload, 0);
        return total;
    }
};

/// What every thread of one profiler shares.
struct ProfilerShared {
    int fd = -1;
    pid_t pid = 0; ///< the process that opened the file: a fork() child writes nothing into it
    std::string path;
    std::size_t ncounters = 1;
    std::vector<std::string> counters; ///< the event strings actually recorded
    std::uint32_t page_bytes = 0;
    std::uint64_t generation = 0;
    std::mutex mutex; ///< labels, thread registration, closing
    std::unordered_map<std::string, std::uint32_t> labels;
    std::uint32_t next_label = 1;
    std::uint32_t next_thread = 0;
    std::vector<std::unique_ptr<ProfilerThread>> threads;
    std::atomic<ProfilerThread*> head{nullptr}; ///< the same threads, for the signal handler (no lock there)
    std::atomic<bool> closed{false};
    bool header_written = false; ///< thread pages wait for the header (under `mutex`)
    std::atomic<std::uint32_t> strings_pages{0}; ///< strings pages written (the next one's number; under `mutex`)
    std::atomic<std::uint32_t> strings{0};       ///< strings defined
    std::atomic<std::uint32_t> end_pages{0};     ///< end records written (a later one supersedes)
    /// Room for the end record (header, fixed part, 12 bytes per thread), grown as threads register (under
    /// `mutex`, before the thread is linked in): the signal handler writes it without allocating.
    std::unique_ptr<unsigned char[]> end_buf;
    std::size_t end_buf_threads = 0;
    std::vector<std::unique_ptr<unsigned char[]>> retired;
    std::atomic<std::uint64_t> write_errors{0};
    std::atomic<int> last_errno{0};

    // Preallocation: blocks reserved ahead of the end of the file in chunks, claimed by whichever writer gets there
    // first (a compare-exchange, no lock). Writers count themselves in `writers` so that the release at the end
    // (truncating to the file's size) never runs while a page is being appended: it would cut it.
    static constexpr std::uint64_t prealloc_off = UINT64_MAX;
    std::uint64_t prealloc_chunk = 0;             ///< 0: off (not a regular file, tmpfs, or not asked for)
    std::atomic<std::uint64_t> appended{0};       ///< bytes handed to writes so far
    std::atomic<std::uint64_t> allocated{0};      ///< reserved up to here; prealloc_off once it failed or ended
    std::atomic<bool> preallocated{false};        ///< some blocks were reserved: release them at the end
    std::atomic<std::uint32_t> writers{0};
    std::atomic<bool> releasing{false};
    /// exit() or a fatal signal is writing the end: no other append (see WriteGuard); `ended` once it has.
    std::atomic<bool> frozen{false}, ended{false};
    std::atomic<bool> ending{false}; ///< claimed by the first exit()/signal flush

    /// Decides whether to preallocate: on a regular file outside tmpfs (where fallocate takes memory and saves
    /// nothing: measured slower).
    void setup_preallocation(std::size_t chunk) noexcept {
        struct stat st {};
        struct statfs fs {};
        if (chunk == 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::fstatfs(fd, &fs) != 0 ||
            fs.f_type == 0x01021994 /* TMPFS_MAGIC */)
            return;
        prealloc_chunk = chunk;
    }

    /// Counts a writer in for the duration of one append of `bytes`, reserving blocks ahead first if needed; or
    /// refuses (allowed false) once the profile is ending (exit(), a fatal signal: `frozen`), so that nothing is
    /// appended after the end record nor cut by the process's end. seq_cst on both sides: either the ending sees
    /// this writer (and waits for it) or this writer sees the ending.
    struct WriteGuard {
        ProfilerShared* s = nullptr;
        bool allowed = false;
        WriteGuard(ProfilerShared& shared, std::size_t bytes) noexcept {
            for (;;) {
                shared.writers.fetch_add(1, std::memory_order_seq_cst);
                if (shared.frozen.load(std::memory_order_seq_cst)) {
                    shared.writers.fetch_sub(1, std::memory_order_seq_cst);
                    return;
                }
                if (!shared.releasing.load(std::memory_order_seq_cst)) break;
                shared.writers.fetch_sub(1, std::memory_order_seq_cst);
                while (shared.releasing.load(std::memory_order_acquire)) ::sched_yield(); // at the end only
            }
            s = &shared;
            allowed = true;
            if (shared.prealloc_chunk != 0) shared.preallocate(bytes);
        }
        ~WriteGuard() {
            if (s) s->writers.fetch_sub(1, std::memory_order_release);
        }
        WriteGuard(const WriteGuard&) = delete;
        WriteGuard& operator=(const WriteGuard&) = delete;
    };

    /// Keeps at least half a chunk reserved beyond the end after this append. Any failure (EOPNOTSUPP: the file
    /// system cannot; ENOSPC) turns it off: the writes then allocate as they go, and report their own errors.
    void preallocate(std::uint64_t bytes) noexcept {
        const std::uint64_t end = appended.fetch_add(bytes, std::memory_order_relaxed) + bytes;
        std::uint64_t have = allocated.load(std::memory_order_relaxed);
        while (have != prealloc_off && end + prealloc_chunk / 2 > have) {
            if (!allocated.compare_exchange_weak(have, have + prealloc_chunk, std::memory_order_relaxed)) continue;
            if (::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(have), static_cast<off_t>(prealloc_chunk)) != 0) {
                allocated.store(prealloc_off, std::memory_order_relaxed);
                return;
            }
            preallocated.store(true, std::memory_order_relaxed);
            have += prealloc_chunk;
        }
    }

    /// Gives back the blocks reserved past the end of the file (truncating it to its own size) and stops
    /// preallocating. Waits, bounded (20 ms), for appends under way; gives up after that rather than cut one.
    /// Async-signal-safe.
    void release_preallocation() noexcept {
        if (prealloc_chunk == 0 || ::getpid() != pid) return;
        bool expected = false;
        if (!releasing.compare_exchange_strong(expected, true, std::memory_order_seq_cst)) return; // under way
        timespec start{}, now{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        while (writers.load(std::memory_order_seq_cst) != 0) {
            ::clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) > 20000000L) {
                releasing.store(false, std::memory_order_release); // (an append interrupted by this signal)
                return;
            }
            ::sched_yield();
        }
        allocated.store(prealloc_off, std::memory_order_relaxed);
        struct stat st {};
        if (preallocated.exchange(false, std::memory_order_relaxed) && ::fstat(fd, &st) == 0)
            (void)!::ftruncate(fd, st.st_size);
        releasing.store(false, std::memory_order_release);
    }

    /// Writes a whole buffer with O_APPEND (one write(2) per page keeps pages whole).
    bool write_all(const unsigned char* p, std::size_t n) noexcept {
        if (::getpid() != pid) return false; // a fork() child: its copies of the parent's pages would clash with them
        WriteGuard guard(*this, n);
        if (!guard.allowed) return false;
        write_raw(p, n);
        return true;
    }
    /// The same without preallocation or counting in (exit(), a fatal signal, a short writev's rest).
    /// Async-signal-safe.
    void write_raw(const unsigned char* p, std::size_t n) noexcept {
        if (::getpid() != pid) return;
        while (n > 0) {
            const ssize_t got = ::write(fd, p, n);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                last_errno.store(got < 0 ? errno : EIO, std::memory_order_relaxed);
                write_errors.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            p += got;
            n -= static_cast<std::size_t>(got);
        }
    }

    /// Writes a page of `kind` holding `payload`, through a buffer of its own (not the signal path).
    void write_page(profile_format::PageKind kind, std::uint32_t thread, std::uint32_t seq, const std::string& payload,
                    std::uint32_t records) {
        std::string out(profile_format::page_header_bytes, '\0');
        out += payload;
        auto* bytes = reinterpret_cast<unsigned char*>(&out[0]);
        profile_format::write_page_header(bytes, kind, thread, seq, bytes + profile_format::page_header_bytes,
                                          static_cast<std::uint32_t>(payload.size()), records);
        write_all(bytes, out.size());
    }

    /// Writes the buffers as one writev(2) (O_APPEND: the pages stay whole and together).
    /// False when nothing was written because the profile is ending (or in a fork() child).
    bool write_parts(iovec* parts, int n) noexcept {
        if (::getpid() != pid) return false;
        std::size_t want = 0;
        for (int i = 0; i < n; ++i) want += parts[i].iov_len;
        WriteGuard guard(*this, want);
        if (!guard.allowed) return false;
        ssize_t got;
        do got = ::writev(fd, parts, n);
        while (got < 0 && errno == EINTR);
        if (got == static_cast<ssize_t>(want)) return true;
        if (got < 0) {
            last_errno.store(errno, std::memory_order_relaxed);
            write_errors.fetch_add(1, std::memory_order_relaxed);
            return true;
        }
        auto done = static_cast<std::size_t>(got); // a short write (a full disk, a signal): the rest one by one
        for (int i = 0; i < n; ++i) {
            const std::size_t skip = std::min(done, parts[i].iov_len);
            done -= skip;
            write_raw(static_cast<const unsigned char*>(parts[i].iov_base) + skip, parts[i].iov_len - skip);
        }
        return true;
    }

    /// Writes the calling thread's thread page (its name, error, its counters' times read now, its open intervals).
    void write_thread_page(ProfilerThread& t, bool last_page = false) {
        ProfilerThread::InfoBusy busy(t);
        t.read_times();
        if (write_all(t.info_buf.get(), t.finish_info_page(last_page, t.sequence)))
            t.thread_pages.fetch_add(1, std::memory_order_relaxed);
    }

    /// Makes room in end_buf for `threads` threads (under `mutex`).
    void reserve_end_record(std::size_t count) {
        if (count <= end_buf_threads) return;
        const std::size_t want = std::max<std::size_t>(2 * end_buf_threads, std::max<std::size_t>(count, 8));
        std::unique_ptr<unsigned char[]> bigger(new unsigned char[profile_format::page_header_bytes + 20 + 12 * want]);
        end_buf.swap(bigger);
        retired.push_back(std::move(bigger)); // a signal handler may be reading it: kept until the profiler ends
        end_buf_threads = want;
    }

    /// Writes the end record: how the profile ended, and per thread the events and thread pages written (`pages`
    /// gives them for a thread). Async-signal-safe (end_buf was sized as threads registered).
    template <class Pages>
    void write_end_record(profile_format::EndHow how, std::uint32_t signal, Pages&& pages) noexcept {
        unsigned char* b = end_buf.get();
        if (!b) return;
        unsigned char* q = b + profile_format::page_header_bytes;
        auto put32 = [&](std::uint32_t v) {
            std::memcpy(q, &v, 4);
            q += 4;
        };
        put32(static_cast<std::uint32_t>(how));
        put32(signal);
        put32(strings_pages.load(std::memory_order_relaxed));
        put32(strings.load(std::memory_order_relaxed));
        unsigned char* count_at = q;
        put32(0);
        std::uint32_t n = 0;
        for (ProfilerThread* t = head.load(std::memory_order_acquire); t && n < end_buf_threads;
             t = t->next.load(std::memory_order_acquire), ++n) {
            const auto [events, infos] = pages(*t);
            put32(t->index);
            put32(events);
            put32(infos);
        }
        std::memcpy(count_at, &n, 4);
        const auto payload = static_cast<std::uint32_t>(static_cast<std::size_t>(q - b) - profile_format::page_header_bytes);
        profile_format::write_page_header(b, profile_format::PageKind::end, 0,
                                          end_pages.fetch_add(1, std::memory_order_relaxed),
                                          b + profile_format::page_header_bytes, payload, n);
        write_raw(b, profile_format::page_header_bytes + payload);
    }

    /// exit() or a fatal signal (`signal`, 0 for exit()): writes every thread's committed events, then the calling
    /// thread's thread page with its counters' times and open intervals as of now, then the end record, and gives
    /// back the preallocated blocks. Other threads' times and open intervals stay as of their last thread page
    /// (their thread pages are theirs to write). A page its thread is writing out is not copied (that thread
    /// writes it whole). Async-signal-safe.
    void flush_all_committed(int signal) noexcept {
        if (closed.load(std::memory_order_acquire) || ::getpid() != pid) return;
        bool first = false;
        if (!ending.compare_exchange_strong(first, true)) return; // a second exit() or a signal during it
        const auto me = static_cast<pid_t>(::syscall(SYS_gettid));
        // No other append from now on; the ones under way finish first (bounded: a writer interrupted by this
        // very signal never will).
        frozen.store(true, std::memory_order_seq_cst);
        timespec start{}, now{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        while (writers.load(std::memory_order_seq_cst) != 0) {
            ::clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) > 100000000L) break;
            ::sched_yield();
        }
        for (ProfilerThread* t = head.load(std::memory_order_acquire); t; t = t->next.load(std::memory_order_acquire)) {
            if (t->discard.load(std::memory_order_relaxed)) {
                t->exit_pages.store(t->sequence_seen.load(std::memory_order_relaxed), std::memory_order_relaxed);
                continue;
            }
            const bool own = t->tid == me;
            const std::uint32_t pages = flush_committed(*t, own);
            t->exit_pages.store(pages, std::memory_order_relaxed);
            // Not when its thread already ended its recording (broken: a thread_local destructor at exit() wrote it)
            // or was using the thread page when the signal came.
            if (own && !t->broken && t->info_buf && !t->info_busy.load(std::memory_order_relaxed)) {
                t->read_times();
                write_raw(t->info_buf.get(), t->finish_info_page(false, pages));
                t->thread_pages.fetch_add(1, std::memory_order_relaxed);
            }
        }
        write_end_record(signal ? profile_format::EndHow::signal : profile_format::EndHow::exit,
                         static_cast<std::uint32_t>(signal), [](ProfilerThread& t) {
                             return std::pair<std::uint32_t, std::uint32_t>{
                                 t.exit_pages.load(std::memory_order_relaxed),
                                 t.thread_pages.load(std::memory_order_relaxed)};
                         });
        ended.store(true, std::memory_order_release);
        release_preallocation();
    }

    /// Writes a thread's committed events as its current page, without resetting it: if the thread goes on to
    /// write the page itself, readers keep the longer copy (same page number). Claims the page first (page_state
    /// 2), waiting a bounded time while its thread is writing it out; never waits on the calling thread itself
    /// (a signal that came while it was writing). Returns the thread's events pages written, this one included.
    std::uint32_t flush_committed(ProfilerThread& t, bool own) noexcept {
        std::uint32_t expected = 0;
        timespec start{}, now{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        while (!t.page_state.compare_exchange_strong(expected, 2, std::memory_order_acquire)) {
            expected = 0;
            ::clock_gettime(CLOCK_MONOTONIC, &now);
            if (own || (now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) > 100000000L) {
                write_errors.fetch_add(1, std::memory_order_relaxed); // its page is its thread's to write
                return t.sequence_seen.load(std::memory_order_relaxed);
            }
            ::sched_yield();
        }
        const std::uint64_t c = t.committed.load(std::memory_order_acquire);
        const auto used = static_cast<std::uint32_t>(c);
        const std::uint32_t seq = t.sequence;
        if (used > 0) {
            // The header goes into a copy: the page's own header space is its thread's.
            unsigned char header[profile_format::page_header_bytes];
            const unsigned char* payload = t.page + profile_format::page_header_bytes;
            profile_format::write_page_header(header, profile_format::PageKind::events, t.index, seq, payload, used,
                                              static_cast<std::uint32_t>(c >> 32));
            iovec parts[2] = {{header, sizeof header}, {const_cast<unsigned char*>(payload), used}};
            const std::size_t want = sizeof header + used;
            ssize_t got;
            do got = ::writev(fd, parts, 2);
            while (got < 0 && errno == EINTR);
            if (got != static_cast<ssize_t>(want)) write_errors.fetch_add(1, std::memory_order_relaxed);
        }
        t.page_state.store(0, std::memory_order_release);
        return seq + (used > 0 ? 1 : 0);
    }
};

inline void ProfilerThread::flush(bool on_own_thread, bool ended) noexcept {
    if (discard.load(std::memory_order_relaxed)) {
        committed.store(0, std::memory_order_release);
        for (auto& v : last) v = 0;
        return;
    }
    // The page is this thread's to write out and start afresh, unless exit() or a signal handler is copying it
    // right now (one writev): wait for that.
    for (std::uint32_t expected = 0; !page_state.compare_exchange_weak(expected, 1, std::memory_order_acquire);
         expected = 0)
        ::sched_yield();
    const std::uint64_t c = committed.load(std::memory_order_relaxed);
    const auto used = static_cast<std::uint32_t>(c);
    iovec parts[2];
    int n = 0;
    if (used > 0) {
        profile_format::write_page_header(page, profile_format::PageKind::events, index, sequence,
                                          page + profile_format::page_header_bytes, used,
                                          static_cast<std::uint32_t>(c >> 32));
        parts[n++] = {page, profile_format::page_header_bytes + used};
    }
    // The counters' times and the open intervals go with every page (only their thread can read them).
    std::optional<InfoBusy> busy;
    if (on_own_thread && info_buf) {
        busy.emplace(*this);
        read_times();
        parts[n++] = {info_buf.get(), finish_info_page(ended, sequence + (used > 0 ? 1 : 0))};
    }
    if (n > 0 && !shared->write_parts(parts, n) && shared->frozen.load(std::memory_order_acquire)) {
        // The profile is ending (exit(), a fatal signal on another thread): the ending copies this page as it
        // is. Let it (bounded: a thread that blocks here must not block a join at exit), then drop it.
        busy.reset();
        page_state.store(0, std::memory_order_release);
        timespec start{}, now{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        while (!shared->ended.load(std::memory_order_acquire)) {
            ::clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) > 1000000000L) break;
            ::sched_yield();
        }
        for (std::uint32_t expected = 0; !page_state.compare_exchange_weak(expected, 1, std::memory_order_acquire);
             expected = 0)
            ::sched_yield();
        committed.store(0, std::memory_order_release);
        for (auto& v : last) v = 0;
        page_state.store(0, std::memory_order_release);
        return;
    }
    if (n > 0 && busy) thread_pages.fetch_add(1, std::memory_order_relaxed); // its thread page went out
    if (used > 0) ++sequence;
    sequence_seen.store(sequence, std::memory_order_relaxed);
    committed.store(0, std::memory_order_release);
    for (auto& v : last) v = 0;
    page_state.store(0, std::memory_order_release);
}

/// Live profilers, for exit() and the fatal signals. Fixed slots: the signal handler takes no lock.
inline std::array<std::atomic<ProfilerShared*>, 16>& live_profilers() {
    static std::array<std::atomic<ProfilerShared*>, 16> slots{};
    return slots;
}

inline void flush_live_profilers(int signal) noexcept {
    for (auto& slot : live_profilers())
        if (ProfilerShared* s = slot.load(std::memory_order_acquire)) s->flush_all_committed(signal);
}

inline constexpr int profiler_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGINT, SIGTERM, SIGQUIT, SIGHUP};

extern "C" inline void pmc_profiler_on_signal(int sig) {
    const int saved = errno;
    flush_live_profilers(sig);
    // SA_RESETHAND put the default back: raised again (or, for a fault, the instruction re-executed), it ends the
    // process as it would have without the profiler.
    errno = saved;
    ::raise(sig);
}

inline void install_profiler_handlers_once(bool signals) {
    static std::once_flag exit_once;
    std::call_once(exit_once, [] { std::atexit([] { flush_live_profilers(0); }); });
    if (!signals) return;
    // At every profiler's start: a signal reset to its default since (or in a fork() child) is covered again.
    for (int sig : profiler_signals) {
        struct sigaction old {};
        if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue; // the program handles it (or ignores it, or this handler is in place): leave it alone
        struct sigaction sa {};
        sa.sa_handler = pmc_profiler_on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = static_cast<int>(SA_RESETHAND | SA_NODEFER);
        ::sigaction(sig, &sa, nullptr);
    }
}

/// The unit of a counter's values, for readers: never "ns" for a count.
inline std::string counter_unit(const EventSpec& spec) {
    if (spec.kind == EventKind::wall_time) return "ns";
    if (spec.kind == EventKind::tsc) return "TSC ticks";
    if (spec.attr.type == PERF_TYPE_SOFTWARE &&
        (spec.attr.config == PERF_COUNT_SW_TASK_CLOCK || spec.attr.config == PERF_COUNT_SW_CPU_CLOCK))
        return "ns";
    return "events";
}

inline std::uint32_t counter_flags(const EventSpec& spec) {
    std::uint32_t f = 0;
    const bool time = counter_unit(spec) != "events";
    if (!time) f |= profile_format::exact;
    if (spec.kind == EventKind::difference) f |= profile_format::irq_corrected;
    if (spec.core_pmu) f |= profile_format::may_multiplex;
    return f;
}

/// The thread-local cache of this thread's state in the profiler used last.
struct ProfilerTls {
    std::uint64_t generation = 0;
    ProfilerThread* state = nullptr;
};
inline thread_local ProfilerTls profiler_tls;

/// Set (and never cleared) once the thread's exit hook below has run: a scope recorded later, by a thread_local
/// destroyed after it, must not reach the hook's destroyed list. Trivially destructible, so valid until the end.
inline thread_local bool profiler_thread_ended = false;

/// At a thread's exit: writes its page and closes its counters, for every profiler it recorded into. A scope
/// recorded after this (by a thread_local destroyed later) still finds its state, owned by the profiler, but is
/// discarded: the thread has written its last page.
struct ProfilerThreadExit {
    std::vector<std::pair<std::shared_ptr<ProfilerShared>, ProfilerThread*>> entries;
    ~ProfilerThreadExit() {
        profiler_thread_ended = true;
        for (auto& [shared, t] : entries) {
            std::lock_guard<std::mutex> lock(shared->mutex);
            if (shared->closed.load(std::memory_order_relaxed)) continue;
            t->flush(true, true);
            t->primary.reset();
            t->clocks.clear();
            t->group.reset();
            t->broken = true; // reads give 0 from now on
            t->discard = true; // and pages are dropped
        }
        // profiler_tls keeps pointing at the states: they live as long as their profilers.
    }
};
inline thread_local ProfilerThreadExit profiler_thread_exit;

/// An open file descriptor, closed unless released.
struct ProfileFile {
    int fd = -1;
    ProfileFile() = default;
    ProfileFile(ProfileFile&& o) noexcept : fd(o.fd) { o.fd = -1; }
    ProfileFile& operator=(ProfileFile&&) = delete;
    ~ProfileFile() {
        if (fd >= 0) ::close(fd);
    }
    int release() noexcept {
        const int f = fd;
        fd = -1;
        return f;
    }
};

/// What a ';' in a counter list means: commas separate counters.
inline std::string semicolon_hint(const std::string& counter) {
    std::string fixed = counter;
    std::replace(fixed.begin(), fixed.end(), ';', ',');
    return "counters are separated by commas, not ';': write '" + fixed + "' (PMC_PROFILE_COUNTERS=" + fixed + ")";
}

inline std::vector<std::string> split_counter_list(std::string_view text) {
    std::vector<std::string> out;
    int in_pmu = 0; // commas inside cpu/event=..,umask=../ separate terms, not events
    std::string cur;
    for (char ch : text) {
        if (ch == '/') in_pmu ^= 1;
        if (ch == ',' && !in_pmu) {
            out.push_back(std::string(trim(cur)));
            cur.clear();
        } else {
            cur += ch;
        }
    }
    out.push_back(std::string(trim(cur)));
    out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
    return out;
}

} // namespace detail

class Profiler;

/// An interval being recorded: from construction to destruction (or end()). Not copyable or movable: it ends on
/// the thread where it began. It shares its thread's nesting with Profiler::begin/end: ending it while intervals
/// opened inside it are still open is an out-of-order end, written to the file as a nesting error (the tools report
/// it), and the interval is not recorded.
class ProfilerScope {
public:
    ProfilerScope(const ProfilerScope&) = delete;
    ProfilerScope& operator=(const ProfilerScope&) = delete;
    // Inlined, so that an off profiler's scope folds to the one branch in Profiler::scope (t_ is known null there).
    BOOST_FORCEINLINE ~ProfilerScope() { end(); }

    /// Ends the interval now (later calls and the destructor do nothing).
    BOOST_FORCEINLINE void end() noexcept {
        if (t_ == nullptr) return;
        detail::ProfilerThread& t = *t_;
        t_ = nullptr;
        t.end_scope(at_);
    }

private:
    friend class Profiler;
    BOOST_FORCEINLINE ProfilerScope() noexcept {} // off
    BOOST_FORCEINLINE ProfilerScope(detail::ProfilerThread* t, Label label, Label arg) noexcept
        : t_(t), at_(t->push(label, arg)) {}

    detail::ProfilerThread* t_ = nullptr;
    std::uint32_t at_ = 0; ///< its slot in the thread's nesting (its depth)
};

/// The profiler. Move-only; a default-constructed or from_env() profiler without PMC_PROFILE is off.
class Profiler {
public:
    /// Off: records nothing, costs a branch per event.
    Profiler() = default;

    /// Opens the counters on this thread (a failure throws pmc::error saying which and why), measures the cost of
    /// one scope, and writes the header to `options.path`.
    /// `%p` in the path is the process id; a path another live process is writing throws (use `%p`).
    explicit Profiler(ProfilerOptions options) { start(std::move(options), {}, false, false); }

    /// PMC_PROFILE=PATH turns profiling on and names the file (`%p`: the process id, `%%`: a percent sign);
    /// PMC_PROFILE_COUNTERS (comma-separated event strings) overrides `defaults.counters`. A file another live
    /// process is writing (a driver and the children it exec'd, given one PMC_PROFILE) is never shared: this
    /// process writes PATH with `.%p` before its extension instead, and says so. Nothing here stops the program: a
    /// counter that cannot be opened is replaced (wall-time for the primary, dropped otherwise; a counter then named
    /// twice is recorded once), a file that cannot be created leaves the profiler off; each said on stderr (with the
    /// reason and its fix), and the fallback is written in the file's header. Strict mode (PMC_PROFILE_STRICT=1 or
    /// `defaults.strict`) replaces nothing: any of these throws pmc::error with the reason, so that a CI job's exit
    /// status shows it (uncaught, the program ends with SIGABRT).
    static Profiler from_env(ProfilerOptions defaults = {}) {
        Profiler p;
        const char* path = std::getenv("PMC_PROFILE");
        if (!path || !*path) return p;
        defaults.path = path;
        if (const char* strict = std::getenv("PMC_PROFILE_STRICT"); strict && *strict && std::string_view(strict) != "0")
            defaults.strict = true;
        if (const char* list = std::getenv("PMC_PROFILE_COUNTERS"); list && *list)
            defaults.counters = detail::split_counter_list(list);
        if (defaults.strict) { // CI: nothing replaced, nothing turned off; the reason is thrown
            p.start(std::move(defaults), {}, false, true);
            return p;
        }
#if !defined(BOOST_NO_EXCEPTIONS)
        try {
            p.start(std::move(defaults), {}, true, true);
        } catch (const std::exception& e) {
            // The error says "pmc profiler: ..." already: said once.
            std::string_view what = e.what();
            if (what.substr(0, 14) == "pmc profiler: ") what.remove_prefix(14);
            std::fprintf(stderr, "pmc profiler: profiling is off: %.*s\n", static_cast<int>(what.size()), what.data());
            p = Profiler();
        }
#else
        p.start(std::move(defaults), {}, true, true);
#endif
        return p;
    }

    Profiler(Profiler&&) noexcept = default;
    Profiler& operator=(Profiler&& o) noexcept {
        if (this != &o) {
            close();
            shared_ = std::move(o.shared_);
        }
        return *this;
    }
    Profiler(const Profiler&) = delete;
    Profiler& operator=(const Profiler&) = delete;
    /// Writes every thread's buffered events and closes the file (call it after the threads finished recording).
    ~Profiler() { close(); }

    bool enabled() const noexcept { return shared_ != nullptr; }
    /// The file being written (`%p` expanded, or the PATH.%p another process's file made it); "" when off.
    std::string path() const { return shared_ ? shared_->path : std::string(); }
    /// The event strings recorded (after any fallback), the primary first.
    std::vector<std::string> counters() const { return shared_ ? shared_->counters : std::vector<std::string>{}; }
    /// Pages that could not be written (a full disk...).
    std::uint64_t write_errors() const noexcept { return shared_ ? shared_->write_errors.load() : 0; }

    /// Interns `name` (a lock and a lookup: do it once, not per event). Label{} when off.
    Label label(std::string_view name) {
        if (!shared_) return Label{};
        auto& s = *shared_;
        std::lock_guard<std::mutex> lock(s.mutex);
        auto it = s.labels.find(std::string(name));
        if (it != s.labels.end()) return Label{it->second};
        if (s.next_label > profile_format::max_label)
            raise(make_failure(E2BIG, "pmc profiler: more than " + std::to_string(profile_format::max_label) +
                                          " distinct labels; intern arguments that vary less, or fewer of them"));
        const std::uint32_t id = s.next_label++;
        s.labels.emplace(std::string(name), id);
        // Written at once, so any event that refers to it comes after it in the file.
        std::string payload;
        const auto len = static_cast<std::uint32_t>(name.size());
        payload.append(reinterpret_cast<const char*>(&id), 4);
        payload.append(reinterpret_cast<const char*>(&len), 4);
        payload.append(name.data(), name.size());
        s.write_page(profile_format::PageKind::strings, 0, s.strings_pages.fetch_add(1, std::memory_order_relaxed), payload,
                     1);
        s.strings.fetch_add(1, std::memory_order_relaxed);
        return Label{id};
    }

    /// Starts an interval on this thread; it ends when the returned scope is destroyed.
    BOOST_FORCEINLINE ProfilerScope scope(Label label, Label arg = {}) {
        if (BOOST_UNLIKELY(!shared_)) return ProfilerScope();
        return ProfilerScope(local(), label, arg);
    }
    /// The same with an argument interned now (a lock per call: prefer an interned Label for frequent events).
    ProfilerScope scope(Label label, std::string_view arg) {
        if (!shared_) return ProfilerScope();
        return ProfilerScope(local(), label, this->label(arg));
    }

    /// Begins an interval on the calling thread that a later end(label) on the same thread ends: for hooks and
    /// callbacks (an interpreter's call/return hook, a database's trace callback), where no scope can span the
    /// interval. As cheap as a scope, no allocation per event; it shares the thread's nesting with scopes.
    BOOST_FORCEINLINE void begin(Label label, Label arg = {}) noexcept {
        if (BOOST_UNLIKELY(!shared_)) return;
        if (detail::ProfilerThread* t = local_noexcept()) t->push(label, arg);
    }
    /// Ends the innermost interval open on the calling thread, which must have been begun with `label`. An end that
    /// does not match it (another label, or nothing open) closes nothing: it is written to the file as a nesting
    /// error, which the tools report (exit status 2), never silently re-nested.
    BOOST_FORCEINLINE void end(Label label) noexcept {
        if (BOOST_UNLIKELY(!shared_)) return;
        if (detail::ProfilerThread* t = local_noexcept()) t->end_label(label.id);
    }

    /// An instant event: the primary counter's reading now.
    BOOST_FORCEINLINE void instant(Label label, Label arg = {}) {
        if (BOOST_UNLIKELY(!shared_)) return;
        detail::ProfilerThread& t = *local();
        std::uint64_t v[profile_format::max_counters] = {};
        t.read_all(v);
        t.record_mark(profile_format::RecordKind::instant, label.id, arg.id, v[0], 0);
    }

    /// An integer event (a size, a count): `value` with the primary counter's reading now.
    BOOST_FORCEINLINE void integer(Label label, std::uint64_t value, Label arg = {}) {
        if (BOOST_UNLIKELY(!shared_)) return;
        detail::ProfilerThread& t = *local();
        std::uint64_t v[profile_format::max_counters] = {};
        t.read_all(v);
        t.record_mark(profile_format::RecordKind::integer, label.id, arg.id, v[0], value);
    }

    /// Names the calling thread in the profile (written at once).
    void thread_name(std::string_view name) {
        if (!shared_) return;
        detail::ProfilerThread& t = *local();
        {
            detail::ProfilerThread::InfoBusy busy(t);
            t.name = std::string(name);
            t.build_info_page();
        }
        shared_->write_thread_page(t);
    }

    /// Writes this thread's buffered events now (a system call; the page starts afresh).
    void flush() {
        if (shared_) local()->flush();
    }

private:
    BOOST_FORCEINLINE detail::ProfilerThread* local() {
        const detail::ProfilerTls& c = detail::profiler_tls;
        if (BOOST_LIKELY(c.generation == shared_->generation)) return c.state;
        return local_slow();
    }

    /// local() for noexcept callers: nullptr where registering the thread failed (its page could not be mapped).
    BOOST_FORCEINLINE detail::ProfilerThread* local_noexcept() noexcept {
        const detail::ProfilerTls& c = detail::profiler_tls;
        if (BOOST_LIKELY(c.generation == shared_->generation)) return c.state;
#if !defined(BOOST_NO_EXCEPTIONS)
        try {
#endif
            return local_slow();
#if !defined(BOOST_NO_EXCEPTIONS)
        } catch (...) {
            return nullptr;
        }
#endif
    }

    BOOST_NOINLINE detail::ProfilerThread* local_slow() {
        auto& entries = detail::profiler_thread_exit.entries;
        if (!detail::profiler_thread_ended)
            for (auto& e : entries)
            if (e.first.get() == shared_.get()) {
                detail::profiler_tls = {shared_->generation, e.second};
                return e.second;
            }
        detail::ProfilerThread* t = register_thread();
        if (detail::profiler_thread_ended) { // after the exit hook (a thread_local's destructor): recorded nowhere
            t->broken = t->discard = true;
            detail::profiler_tls = {shared_->generation, t};
            return t;
        }
        entries.emplace_back(shared_, t);
        detail::profiler_tls = {shared_->generation, t};
        return t;
    }

    /// A state for the calling thread: its page (touched now, so its page faults are not counted in its first
    /// events) and its counters. A counter that fails here is reported in the file, not thrown.
    detail::ProfilerThread* register_thread(bool throw_on_failure = false) {
        auto& s = *shared_;
        auto t = std::make_unique<detail::ProfilerThread>();
        t->shared = &s;
        t->ncounters = s.ncounters;
        t->tid = static_cast<pid_t>(::syscall(SYS_gettid));
        t->name = detail::thread_name();
        t->capacity = s.page_bytes;
        void* mem = ::mmap(nullptr, s.page_bytes + profile_format::page_header_bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) raise(make_failure(errno, "pmc profiler: cannot allocate a thread's page buffer"));
        t->page = static_cast<unsigned char*>(mem);
        std::memset(t->page, 0, s.page_bytes + profile_format::page_header_bytes);
        t->open_capacity = 64;
        t->open.reset(new detail::OpenInterval[t->open_capacity]);
        auto opened = open_counters(*t);
        if (opened) {
            if (throw_on_failure) raise(*opened);
            t->broken = true;
            t->error = opened->message;
        } else {
            t->find_time_sources();
        }
        t->build_info_page();
        t->max_record = static_cast<std::uint32_t>(profile_format::max_record_bytes(t->ncounters));
        t->record_limit = std::max<std::uint32_t>(1, t->capacity / t->max_record);
        std::lock_guard<std::mutex> lock(s.mutex);
        s.reserve_end_record(s.threads.size() + 1);
        t->index = s.next_thread++;
        detail::ProfilerThread* raw = t.get();
        raw->next.store(s.head.load(std::memory_order_relaxed), std::memory_order_relaxed);
        s.head.store(raw, std::memory_order_release);
        s.threads.push_back(std::move(t));
        if (s.header_written) s.write_thread_page(*raw);
        if (raw->broken) // said once, here; the file's thread page has the whole message
            std::fprintf(stderr, "pmc profiler: thread %u (tid %d): its counters could not be opened (%s); its events "
                                 "record zeros, the other threads' are not affected\n",
                         raw->index, static_cast<int>(raw->tid), raw->error.substr(0, raw->error.find('\n')).c_str());
        return raw;
    }

    /// Creates the profile file, locked against other processes (flock: released when the process ends, however it
    /// ends). `%p` expands to the process id. A file another live process holds: from_env writes PATH.%p instead
    /// (said on stderr and in the header), the constructor throws.
    static detail::ProfileFile open_profile_file(ProfilerOptions& o, std::vector<std::string>& warnings,
                                                 bool from_env) {
        std::string why;
        const pid_t me = ::getpid();
        auto expanded = detail::expand_profile_path(o.path, me, why);
        if (!expanded) raise(make_failure(EINVAL, "pmc profiler: the profile path '" + o.path + "' has " + why));
        for (int attempt = 0;; ++attempt) {
            detail::ProfileFile f;
            f.fd = ::open(expanded->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (f.fd < 0) {
                const int err = errno;
                raise(make_failure(err, "pmc profiler: cannot create the profile '" + *expanded + "': " +
                                            std::strerror(err)));
            }
            // Only a regular file is locked and truncated (/dev/null, a pipe: shared by nature, nothing to mix).
            struct stat st {};
            const bool regular = ::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode);
            if (!regular || ::flock(f.fd, LOCK_EX | LOCK_NB) == 0 || (errno != EWOULDBLOCK && errno != EAGAIN)) {
                if (regular) (void)!::ftruncate(f.fd, 0);
                o.path = *expanded;
                return f;
            }
            const std::string taken = *expanded;
            if (!from_env || attempt > 0)
                raise(make_failure(EBUSY, "pmc profiler: the profile '" + taken + "' is being written by another "
                                          "process (two processes given one path would mix their events in one "
                                          "file); give each process its own file with %p (the process id) in the "
                                          "path, e.g. '" + detail::per_process_path(o.path) + "'"));
            expanded = detail::expand_profile_path(detail::per_process_path(o.path), me, why);
            std::string w = "the profile '" + taken + "' is being written by another process (a parent that exec'd "
                            "this one?): this process writes '" + *expanded + "' (put %p in PMC_PROFILE to choose "
                            "the name)";
            std::fprintf(stderr, "pmc profiler: %s\n", w.c_str());
            warnings.push_back(std::move(w));
        }
    }

    std::optional<Failure> open_counters(detail::ProfilerThread& t) {
        const auto& names = shared_->counters;
        auto primary = Counter::try_open(names[0]);
        if (!primary) return primary.failure();
        t.primary.emplace(std::move(*primary));
        std::vector<std::string> members;
        for (std::size_t i = 1; i < names.size(); ++i) {
            auto spec = try_parse_event(names[i]);
            if (!spec) return spec.failure();
            if (spec->kind == EventKind::perf) {
                t.slot[i] = static_cast<std::int8_t>(members.size());
                members.push_back(names[i]);
            } else {
                auto c = Counter::try_open(*spec);
                if (!c) return c.failure();
                t.slot[i] = static_cast<std::int8_t>(~t.clocks.size());
                t.clocks.push_back(std::move(*c));
            }
        }
        if (!members.empty()) {
            auto g = Group::try_open(members);
            if (!g) return g.failure();
            t.group.emplace(std::move(*g));
            t.reading = t.group->make_reading();
        }
        return std::nullopt;
    }

    void start(ProfilerOptions o, std::vector<std::string> warnings, bool lenient, bool from_env) {
        namespace pf = profile_format;
        if (o.counters.empty()) o.counters = {"wall-time"};
        for (const auto& c : o.counters)
            if (!lenient && c.find(';') != std::string::npos)
                raise(make_failure(EINVAL, "pmc profiler: counter '" + c + "': " + detail::semicolon_hint(c)));
        if (o.counters.size() > pf::max_counters)
            raise(make_failure(E2BIG, "pmc profiler: " + std::to_string(o.counters.size()) + " counters asked for; "
                                      "it records at most " + std::to_string(pf::max_counters) +
                                      " (the primary and three riding along)"));
        o.page_bytes = std::clamp<std::size_t>(o.page_bytes, 4096, pf::max_page_payload);
        // The file first: when it cannot be created, no counter is opened (wall-time's calibration takes 20 ms).
        detail::ProfileFile file = open_profile_file(o, warnings, from_env);
        std::vector<std::uint32_t> flags(o.counters.size(), 0);
        if (lenient) {
            // Try each counter on this thread now; replace what fails, and say so.
            std::vector<std::string> kept;
            for (std::size_t i = 0; i < o.counters.size(); ++i) {
                auto c = Counter::try_open(o.counters[i]);
                if (c) {
                    kept.push_back(o.counters[i]);
                    continue;
                }
                // The whole reason and its fix (the first line alone, "perf_event_open failed with ENOENT", hid
                // "this machine has no hardware PMU" and what to do), its lines indented under this one.
                std::string why = c.failure().message;
                if (o.counters[i].find(';') != std::string::npos) why = detail::semicolon_hint(o.counters[i]) + "\n" + why;
                for (std::size_t at = 0; (at = why.find('\n', at)) != std::string::npos; at += 3) why.replace(at, 1, "\n  ");
                std::string w = "counter '" + o.counters[i] + "' could not be opened; " +
                                (i == 0 ? std::string("recording wall-time instead as the primary value")
                                        : std::string("recorded without it")) +
                                ":\n  " + why;
                std::fprintf(stderr, "pmc profiler: %s\n", w.c_str());
                warnings.push_back(std::move(w));
                if (i == 0) kept.push_back("wall-time");
            }
            // Once each: wall-time as the fallback primary and asked for as a ride-along would be recorded twice
            // (two columns with one name: --counter wall-time could not tell them apart).
            for (std::size_t i = 1; i < kept.size();)
                if (std::find(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(i), kept[i]) !=
                    kept.begin() + static_cast<std::ptrdiff_t>(i)) {
                    std::string w = "counter '" + kept[i] + "' was asked for twice" +
                                    (kept[i] == "wall-time" && o.counters[0] != "wall-time"
                                         ? std::string(" (the primary fell back to it)")
                                         : std::string()) +
                                    "; it is recorded once";
                    std::fprintf(stderr, "pmc profiler: %s\n", w.c_str());
                    warnings.push_back(std::move(w));
                    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
                } else {
                    ++i;
                }
            flags.assign(kept.size(), 0);
            if (kept[0] == "wall-time" && o.counters[0] != "wall-time") flags[0] |= pf::fallback;
            o.counters = std::move(kept);
        }
        auto s = std::make_shared<detail::ProfilerShared>();
        static std::atomic<std::uint64_t> generations{0};
        s->generation = ++generations;
        s->path = o.path;
        s->pid = ::getpid();
        s->counters = o.counters;
        s->ncounters = o.counters.size();
        s->page_bytes = static_cast<std::uint32_t>(o.page_bytes);
        s->fd = file.release();
        s->setup_preallocation(o.preallocate_bytes);
        shared_ = s;
        // This thread's counters: a failure here throws (the caller asked for these counters).
        detail::ProfilerThread* t = nullptr;
#if !defined(BOOST_NO_EXCEPTIONS)
        try {
#endif
            t = register_thread(true);
#if !defined(BOOST_NO_EXCEPTIONS)
        } catch (...) {
            ::close(s->fd);
            ::unlink(o.path.c_str());
            s->fd = -1;
            shared_.reset();
            throw;
        }
#endif
        detail::profiler_thread_exit.entries.emplace_back(shared_, t);
        detail::profiler_tls = {s->generation, t};
        std::vector<std::array<double, 2>> cost(s->ncounters, {0.0, 0.0});
        if (o.measure_cost) cost = measure_cost(*t);
        write_header(o, warnings, flags, cost, *t);
        for (auto& slot : detail::live_profilers()) {
            detail::ProfilerShared* expected = nullptr;
            if (slot.compare_exchange_strong(expected, s.get())) break;
        }
        detail::install_profiler_handlers_once(o.flush_on_fatal_signals);
    }

    /// Per counter: what one scope adds to its parent, and what an empty scope records, as medians of rounds of
    /// 64 scopes on this thread (its page is discarded meanwhile).
    std::vector<std::array<double, 2>> measure_cost(detail::ProfilerThread& t) {
        const std::size_t n = t.ncounters;
        constexpr int rounds = 31, per_round = 64;
        std::vector<std::vector<double>> added(n), inner(n);
        t.discard = true;
        const Label probe{profile_format::max_label}; // never written
        std::uint64_t a[profile_format::max_counters], b[profile_format::max_counters];
        for (int r = 0; r < rounds; ++r) {
            std::uint64_t with[profile_format::max_counters], without[profile_format::max_counters];
            t.committed.store(0, std::memory_order_relaxed);
            for (auto& v : t.last) v = 0;
            t.read_all(a);
            // Through scope(), as a program records: its on/off test and thread lookup are part of the cost.
            for (int k = 0; k < per_round; ++k) auto s = scope(probe);
            t.read_all(b);
            for (std::size_t i = 0; i < n; ++i) with[i] = b[i] - a[i];
            t.read_all(a);
            for (int k = 0; k < per_round; ++k) detail::compiler_barrier();
            t.read_all(b);
            for (std::size_t i = 0; i < n; ++i) without[i] = b[i] - a[i];
            // Each empty scope's own value, from the records in the (discarded) page.
            std::vector<std::array<std::uint64_t, profile_format::max_counters>> own_values;
            std::size_t used = 0;
            detail::decode_events(t.page + profile_format::page_header_bytes,
                                  static_cast<std::uint32_t>(t.committed.load(std::memory_order_relaxed)), n, used,
                                  [&](const detail::DecodedRecord& rec) {
                                      std::array<std::uint64_t, profile_format::max_counters> v{};
                                      for (std::size_t i = 0; i < n; ++i) v[i] = rec.values[2 * i + 1] - rec.values[2 * i];
                                      own_values.push_back(v);
                                  });
            for (std::size_t i = 0; i < n; ++i) {
                added[i].push_back((static_cast<double>(with[i]) - static_cast<double>(without[i])) / per_round);
                std::vector<double> own;
                for (const auto& v : own_values) own.push_back(static_cast<double>(v[i]));
                if (own.empty()) own.push_back(0);
                std::nth_element(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(own.size() / 2), own.end());
                inner[i].push_back(own[own.size() / 2]);
            }
        }
        t.committed.store(0, std::memory_order_relaxed);
        for (auto& v : t.last) v = 0;
        t.discard = false;
        std::vector<std::array<double, 2>> out(n);
        for (std::size_t i = 0; i < n; ++i) {
            std::nth_element(added[i].begin(), added[i].begin() + rounds / 2, added[i].end());
            std::nth_element(inner[i].begin(), inner[i].begin() + rounds / 2, inner[i].end());
            out[i] = {std::max(0.0, added[i][rounds / 2]), inner[i][rounds / 2]};
        }
        return out;
    }

    void write_header(const ProfilerOptions& o, const std::vector<std::string>& warnings,
                      const std::vector<std::uint32_t>& extra_flags, const std::vector<std::array<double, 2>>& cost,
                      detail::ProfilerThread& t) {
        namespace pf = profile_format;
        std::string fields;
        auto field = [&](pf::Tag tag, const void* data, std::size_t len) {
            const auto tg = static_cast<std::uint16_t>(tag);
            const std::uint16_t zero = 0;
            const auto l = static_cast<std::uint32_t>(len);
            fields.append(reinterpret_cast<const char*>(&tg), 2);
            fields.append(reinterpret_cast<const char*>(&zero), 2);
            fields.append(reinterpret_cast<const char*>(&l), 4);
            fields.append(static_cast<const char*>(data), len);
        };
        auto text = [&](pf::Tag tag, const std::string& s) { field(tag, s.data(), s.size()); };
        auto u64 = [&](pf::Tag tag, std::uint64_t v) { field(tag, &v, 8); };
        text(pf::Tag::pmc_version, PMC_VERSION_STRING);
        u64(pf::Tag::pid, static_cast<std::uint64_t>(::getpid()));
        text(pf::Tag::command_line, detail::read_file("/proc/self/cmdline").value_or(""));
        timespec now{};
        ::clock_gettime(CLOCK_REALTIME, &now);
        u64(pf::Tag::start_time, static_cast<std::uint64_t>(now.tv_sec) * 1000000000ull +
                                     static_cast<std::uint64_t>(now.tv_nsec));
        text(pf::Tag::cpu, emulated_pmu() ? "emulated by QEMU's TCG (pmc emulate): the CPU model QEMU presents, " +
                                                 this_cpu().description() + ", not the host's"
                                           : this_cpu().description() + (under_hypervisor() ? ", under a hypervisor" : ""));
        text(pf::Tag::kernel, kernel_release());
        const AslrState aslr = aslr_state();
        text(pf::Tag::aslr, std::string(aslr.randomized ? "on" : "off") + " (kernel.randomize_va_space = " +
                                std::to_string(aslr.randomize_va_space) +
                                (aslr.personality_disabled ? "; ADDR_NO_RANDOMIZE" : "") + ")");
        u64(pf::Tag::page_bytes, o.page_bytes);
        for (const auto& w : warnings) text(pf::Tag::warning, w);
        for (std::size_t i = 0; i < shared_->counters.size(); ++i) {
            const std::string& name = shared_->counters[i];
            const Counter* c = nullptr;
            if (i == 0) c = &*t.primary;
            else if (t.slot[i] < 0) c = &t.clocks[static_cast<std::size_t>(~t.slot[i])];
            const EventSpec spec = c ? c->event() : t.group->event(static_cast<std::size_t>(t.slot[i]));
            std::string path = c ? to_string(c->path()) : to_string(t.group->path());
            std::string note;
            for (const auto& s : c ? c->notes() : t.group->notes()) note += (note.empty() ? "" : "; ") + s;
            if (i > 0 && !c) note = "read with the other ride-along events as one group; " + note;
            std::string v;
            auto put32 = [&](std::uint32_t x) { v.append(reinterpret_cast<const char*>(&x), 4); };
            auto put64 = [&](std::int64_t x) { v.append(reinterpret_cast<const char*>(&x), 8); };
            auto str = [&](const std::string& s) {
                put32(static_cast<std::uint32_t>(s.size()));
                v += s;
            };
            std::uint32_t flags = detail::counter_flags(spec) | (i < extra_flags.size() ? extra_flags[i] : 0);
            // The emulated PMU (pmc emulate) counts all along: nothing to multiplex.
            if ((c ? c->path() : t.group->path()) == ReadPath::emulated) flags &= ~profile_format::may_multiplex;
            put32(flags);
            put32(0);
            put64(static_cast<std::int64_t>(cost[i][0] * 1000.0 + 0.5));
            put64(static_cast<std::int64_t>(cost[i][1] * 1000.0 + 0.5));
            str(name);
            str(detail::counter_unit(spec));
            str(path);
            str(note);
            field(pf::Tag::counter, v.data(), v.size());
        }
        std::uint64_t starts[pf::max_counters];
        t.read_all(starts);
        field(pf::Tag::start_values, starts, 8 * shared_->ncounters);
        std::string out(pf::file_magic, 8);
        const std::uint32_t version = pf::version;
        const auto total = static_cast<std::uint32_t>(pf::file_header_fixed + fields.size());
        const std::uint32_t sum =
            pf::checksum(reinterpret_cast<const unsigned char*>(fields.data()), fields.size(), total);
        const std::uint32_t zero = 0;
        out.append(reinterpret_cast<const char*>(&version), 4);
        out.append(reinterpret_cast<const char*>(&total), 4);
        out.append(reinterpret_cast<const char*>(&sum), 4);
        out.append(reinterpret_cast<const char*>(&zero), 4);
        out += fields;
        shared_->write_all(reinterpret_cast<const unsigned char*>(out.data()), out.size());
        std::lock_guard<std::mutex> lock(shared_->mutex);
        shared_->header_written = true;
        shared_->write_thread_page(t); // held back until the header was out
    }

    void close() noexcept {
        if (!shared_) return;
        auto& s = *shared_;
        for (auto& slot : detail::live_profilers()) {
            detail::ProfilerShared* expected = &s;
            slot.compare_exchange_strong(expected, nullptr);
        }
        {
            std::lock_guard<std::mutex> lock(s.mutex);
            const auto me = static_cast<pid_t>(::syscall(SYS_gettid));
            for (auto& t : s.threads) t->flush(t->tid == me, true);
            if (!s.frozen.load()) // (after exit()'s end record, nothing more is written)
                s.write_end_record(profile_format::EndHow::closed, 0, [](detail::ProfilerThread& t) {
                return std::pair<std::uint32_t, std::uint32_t>{t.sequence, t.thread_pages.load()};
            });
            s.closed.store(true, std::memory_order_release);
            if (s.write_errors.load() > 0)
                std::fprintf(stderr, "pmc profiler: %llu page(s) could not be written to %s (%s): the profile is "
                                     "incomplete\n",
                             static_cast<unsigned long long>(s.write_errors.load()), s.path.c_str(),
                             std::strerror(s.last_errno.load()));
            s.release_preallocation();
            ::close(s.fd);
            s.fd = -1;
        }
        if (detail::profiler_tls.generation == s.generation) detail::profiler_tls = {};
        shared_.reset();
    }

    std::shared_ptr<detail::ProfilerShared> shared_;
    friend struct detail::ProfilerTestAccess;
};

/// Labels built at run time (a function's name from an interpreter's hook, a statement's SQL text): one thread's
/// cache in front of Profiler::label(), which takes a lock and builds a string at every call. A name seen before
/// costs a hash lookup (no lock, no allocation); a new one, Profiler::label() once. One cache per thread (it is not
/// locked); the Profiler must outlive it.
///
///     thread_local pmc::LabelCache labels{prof};
///     prof.begin(labels(function_name));      // in a call hook
class LabelCache {
public:
    explicit LabelCache(Profiler& profiler) : profiler_(&profiler) {}
    LabelCache(const LabelCache&) = delete;
    LabelCache& operator=(const LabelCache&) = delete;

    Label operator()(std::string_view name) {
        if (auto it = labels_.find(name); it != labels_.end()) return it->second;
        const Label label = profiler_->label(name);
        names_.emplace_back(name); // keys point into names_, whose strings never move (a deque grows at its end)
        labels_.emplace(names_.back(), label);
        return label;
    }
    std::size_t size() const noexcept { return labels_.size(); }

private:
    Profiler* profiler_;
    std::deque<std::string> names_;
    std::unordered_map<std::string_view, Label> labels_;
};

namespace detail {
/// For tests: the lock that labels, thread registration and closing take (the recording path must never).
struct ProfilerTestAccess {
    static std::mutex& mutex(Profiler& p) { return p.shared_->mutex; }
};
} // namespace detail

PMC_END_NAMESPACE
