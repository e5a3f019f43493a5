// SPDX-License-Identifier: MIT
// pmc/detail/profiler_thread.hpp: one thread's recording for pmc::Profiler (pmc/profiler.hpp): its counters, the
// nesting of its open intervals, its page of records (docs/profile-format.md) and its thread page. Written only by
// its thread, with no lock and no allocation per event; another thread reads it only when the process ends (exit(),
// a fatal signal: detail/profiler_shared.hpp). The recording path is here: push (an interval's begin), end_scope and
// end_label, record_interval and record_mark, reserve and commit; tests/system/test_hot_path.cpp checks its machine
// code. ProfilerThread::flush writes through ProfilerShared, so it is defined in detail/profiler_shared.hpp, which
// the end of this header includes.
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/group.hpp>
#include <pmc/profile_format.hpp>

#include <sys/mman.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

PMC_BEGIN_NAMESPACE
namespace detail {

struct ProfilerShared;

/// A scope or begin() interval open on a thread: its label, argument and start readings.
struct OpenInterval {
    std::uint32_t label = 0, arg = 0;
    /// Which opening this is (ProfilerThread::openings then): a scope ends its own interval, not one that reused
    /// its slot after end_to() ended it.
    std::uint32_t serial = 0;
    std::uint64_t start[profile_format::max_counters] = {};
    bool ended = false; ///< ended out of order (reported): dropped when it reaches the top
};

/// One thread's recording state: its counters and its page. Written only by its thread, except when the
/// process ends (exit(), a fatal signal) and what it committed is written out by another.
struct ProfilerThread {
    ProfilerShared* shared = nullptr;
    std::uint32_t index = 0;
    std::uint32_t depth = 0;     ///< intervals open: open[0, depth)
    std::uint32_t open_capacity = 0;
    std::uint32_t ended_slots = 0; ///< open intervals marked ended (out of order): dropped once on top
    std::uint32_t openings = 0;    ///< intervals opened so far (wraps): the next one's serial
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
    /// Per exact counter, what the profiler's own work on this thread has counted so far (its page writes, label
    /// interning, growing the nesting, pauses: see Uncounted), subtracted from every reading. Under an exact
    /// counter, that work then adds to no interval, whatever it cost this time (a contended lock, a page whose
    /// checksum covers more bytes, a file that had to grow): what remains is the few instructions around the two
    /// readings, the same every time. Always 0 for a time (see time_counter).
    std::uint64_t skew[profile_format::max_counters] = {};
    /// Per counter, what a record whose reserve() took the slow path (a page written, a pending mark) counts more
    /// than one that did not, outside the slow path's own window: the call, the two readings' edges. Measured once
    /// per thread (calibrate_slow_path) and added to `skew` with each slow path, so that under an exact counter a
    /// page write adds nothing to the intervals open around it, wherever the page boundary falls.
    std::uint64_t slow_path_extra[profile_format::max_counters] = {};
    /// Per counter: a time (wall-time, TSC ticks, task-clock), whose readings stay absolute. Taking the profiler's
    /// work off a clock would slide each thread's timeline back by its own page writes (tens of ms over millions of
    /// scopes), so that an interval begun after another thread's had ended showed before it. A clock keeps all of
    /// its time; where the primary is a clock, each stretch of the profiler's own work is an own-work mark instead.
    std::array<bool, profile_format::max_counters> time_counter{};
    /// The label of own-work marks (integer records: at the primary's reading when the work began, its length),
    /// written when the primary is a time; 0: none (an exact primary, whose readings leave the work out).
    std::uint32_t own_work_label = 0;
    std::uint32_t own_work_nesting = 0; ///< Uncounted regions open that mark (only the outermost writes the mark)
    /// A page written from reserve() (a record under way): its mark waits for the next record, so that every
    /// record stays after the intervals it encloses (postorder); record_limit is lowered meanwhile, so that the
    /// next reserve() takes its slow path and writes it first.
    bool defer_mark = false, mark_pending = false;
    std::uint32_t pending_depth = 0, full_record_limit = 1;
    std::uint64_t pending_at = 0, pending_length = 0;
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

    /// The profiler's own work on this thread, from construction to destruction, left out of its exact readings:
    /// the counters are read at both ends and the difference added to `skew`. On a clock nothing is taken off (its
    /// readings stay absolute); when the primary is a clock, the outermost region that `marks` writes an own-work
    /// mark saying where the work began and how long it took, so that a reader can show durations either way. The
    /// program's pause() does not mark (a clock counts the program's own bookkeeping as the program's time). Null:
    /// nothing to do (a thread that has not recorded yet has no interval open to protect).
    class Uncounted {
    public:
        explicit Uncounted(ProfilerThread* t, bool marks = true) noexcept : t_(t), marks_(marks) {
            if (!t_) return;
            if (marks_) ++t_->own_work_nesting;
            t_->read_all(at_);
        }
        ~Uncounted() {
            if (!t_) return;
            // Marked only inside an interval (outside one, no duration holds it).
            const bool mark = marks_ && --t_->own_work_nesting == 0 && t_->own_work_label != 0 && t_->depth > 0 &&
                              !t_->broken && !t_->discard.load(std::memory_order_relaxed);
            if (mark && !t_->defer_mark && !t_->room_for_mark()) t_->flush(); // full: written now, as its work
            std::uint64_t now[profile_format::max_counters];
            t_->read_all(now);
            for (std::size_t i = 0; i < t_->ncounters; ++i)
                if (!t_->time_counter[i]) t_->skew[i] += now[i] - at_[i];
            if (!mark) return;
            if (t_->defer_mark) {
                t_->mark_pending = true;
                t_->pending_at = at_[0];
                t_->pending_length = now[0] - at_[0];
                t_->pending_depth = t_->depth;
                t_->record_limit = 1; // the record under way, then the mark
                return;
            }
            t_->record_mark(profile_format::RecordKind::integer, t_->own_work_label, 0, at_[0], now[0] - at_[0]);
        }
        Uncounted(const Uncounted&) = delete;
        Uncounted& operator=(const Uncounted&) = delete;

    private:
        ProfilerThread* t_;
        bool marks_;
        std::uint64_t at_[profile_format::max_counters];
    };
    /// The page can take one more record without being written first.
    bool room_for_mark() const noexcept {
        const std::uint64_t c = committed.load(std::memory_order_relaxed);
        return (c >> 32) < full_record_limit && static_cast<std::uint32_t>(c) + max_record <= capacity;
    }

    /// Opens an interval (`label`, `arg`: Label ids, 0 for none): its slot, then the start readings last (as close to
    /// the body as possible).
    BOOST_FORCEINLINE std::uint32_t push(std::uint32_t label, std::uint32_t arg) noexcept {
        if (BOOST_UNLIKELY(depth == open_capacity)) grow();
        OpenInterval& o = open[depth];
        o.label = label;
        o.arg = arg;
        o.ended = false;
        o.serial = ++openings;
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
        Uncounted own_work(this);
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
        // Every field at a cost that does not depend on its value: label ids follow the order threads interned
        // them in, which changes from run to run; a child's value must not change what recording it costs its parent.
        unsigned char* p = pf::put_varint_fixed_cost(p0, pf::record_head(pf::RecordKind::interval, o.arg != 0, o.label));
        p = pf::put_varint_fixed_cost(p, at);
        if (o.arg) p = pf::put_varint_fixed_cost(p, o.arg);
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
        unsigned char* p = pf::put_varint_fixed_cost(p0, pf::record_head(kind, arg != 0, label)); // (as in
        p = pf::put_varint_fixed_cost(p, depth);                                                 // record_interval)
        if (arg) p = pf::put_varint_fixed_cost(p, arg);
        p = pf::put_varint_fixed_cost(p, now - last[0]);
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

    /// A scope's end (slot `at`, opening `serial`): the record, or, out of order, the error and its slot marked
    /// ended, or, its interval already ended by end_to(), the error alone (whatever reuses the slot now is not its).
    BOOST_FORCEINLINE void end_scope(std::uint32_t at, std::uint32_t serial, std::uint32_t label) noexcept {
        std::uint64_t stop[profile_format::max_counters];
        if (BOOST_LIKELY(ncounters == 1)) stop[0] = read_primary();
        else read_all(stop);
        if (BOOST_UNLIKELY(at + 1 != depth || open[at].serial != serial))
            return end_scope_slow(at, serial, label, stop);
        record_interval(at, stop);
    }
    BOOST_NOINLINE void end_scope_slow(std::uint32_t at, std::uint32_t serial, std::uint32_t label,
                                       const std::uint64_t* stop) noexcept {
        drop_ended();
        const bool still_open = at < depth && open[at].serial == serial;
        if (still_open && at + 1 == depth) return record_interval(at, stop);
        record_mismatch(label, stop[0]);
        if (still_open && !open[at].ended) { // inner intervals are still open: it goes when they have
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

    /// Profiler::end_to: ends the intervals open above `target`, innermost first, at one reading.
    BOOST_NOINLINE void end_to(std::uint32_t target) noexcept {
        if (depth <= target) return;
        std::uint64_t stop[profile_format::max_counters];
        read_all(stop);
        while (depth > target) {
            if (open[depth - 1].ended) drop_ended(); // already reported: nothing to record
            else record_interval(depth - 1, stop);
        }
    }

    /// The primary counter alone (one counter recorded).
    BOOST_FORCEINLINE std::uint64_t read_primary() noexcept {
        if (BOOST_UNLIKELY(broken)) return 0;
#if !defined(BOOST_NO_EXCEPTIONS)
        try {
#endif
            return primary->read() - skew[0];
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
                out[0] = primary->read() - skew[0];
                return;
            }
            read_rest(out);
            out[0] = primary->read();
            for (std::size_t i = 0; i < ncounters; ++i) out[i] -= skew[i];
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
        if (BOOST_UNLIKELY((c >> 32) >= record_limit || static_cast<std::uint32_t>(c) + bytes > capacity))
            return reserve_slow(bytes);
        return page + profile_format::page_header_bytes + static_cast<std::uint32_t>(c);
    }
    /// The whole slow path is the profiler's own work: read at its entry and its exit, the difference and the
    /// calibrated rest (slow_path_extra) go to `skew`. What it does in between (a pending mark, a page written, a
    /// clock's own-work mark) may vary; what is counted outside the window is the same code every time.
    BOOST_NOINLINE unsigned char* reserve_slow(std::uint32_t bytes) noexcept {
        std::uint64_t at[profile_format::max_counters];
        read_all(at);
        write_pending_mark();
        const std::uint64_t c = committed.load(std::memory_order_relaxed);
        if ((c >> 32) >= record_limit || static_cast<std::uint32_t>(c) + bytes > capacity) {
            defer_mark = true; // its mark goes after the record under way
            flush_uncounted();
            defer_mark = false;
        }
        unsigned char* const p = page + profile_format::page_header_bytes +
                                 static_cast<std::uint32_t>(committed.load(std::memory_order_relaxed));
        std::uint64_t now[profile_format::max_counters];
        read_all(now);
        // Without a branch on which counters are times: the same instructions whatever they are (calibration runs
        // before they are known), a mask of 0 for a time.
        for (std::size_t i = 0; i < ncounters; ++i)
            skew[i] += (now[i] - at[i] + slow_path_extra[i]) & (std::uint64_t{time_counter[i]} - 1);
        return p;
    }
    /// Measures slow_path_extra: a record through the slow path less the same record through the fast one, each
    /// between two readings, the page discarded meanwhile (nothing is written); on a real PMU the median of a few
    /// tries. Called once the counters are open, before the thread records. (The slow call's cost at the site that
    /// inlined reserve(), the registers saved around it, is this site's: the same as a scope's end with g++ 12.)
    BOOST_NOINLINE void calibrate_slow_path() noexcept {
        if (broken) return;
        constexpr int tries = 9;
        const bool was_discarding = discard.load(std::memory_order_relaxed);
        discard.store(true, std::memory_order_relaxed);
        // Restored after: the slow paths here add to skew, and which counters are times may not be known yet (a
        // clock's readings must stay absolute).
        std::uint64_t skew_before[profile_format::max_counters];
        std::memcpy(skew_before, skew, sizeof skew);
        std::int64_t extra[profile_format::max_counters][tries] = {};
        for (int k = 0; k < tries; ++k) {
            std::uint64_t a[profile_format::max_counters], b[profile_format::max_counters];
            std::uint64_t fast[profile_format::max_counters], slow[profile_format::max_counters];
            committed.store(0, std::memory_order_relaxed);
            read_all(a);
            record_mark(profile_format::RecordKind::instant, 0, 0, a[0], 0); // room: the fast path
            read_all(b);
            for (std::size_t i = 0; i < ncounters; ++i) fast[i] = b[i] - a[i];
            record_limit = 0; // full: the slow path, whose flush only empties the page (discard)
            compiler_barrier(); // (a limit known to be 0 would compile the test away: not the path a record takes)
            read_all(a);
            record_mark(profile_format::RecordKind::instant, 0, 0, a[0], 0);
            read_all(b);
            record_limit = full_record_limit;
            for (std::size_t i = 0; i < ncounters; ++i) {
                slow[i] = b[i] - a[i];
                extra[i][k] = static_cast<std::int64_t>(slow[i] - fast[i]);
            }
        }
        for (std::size_t i = 0; i < ncounters; ++i) {
            std::int64_t* e = extra[i];
            std::nth_element(e, e + tries / 2, e + tries);
            // A time, or a try disturbed beyond reason: nothing (a real PMU's noise must not slide the readings).
            slow_path_extra[i] = e[tries / 2] > 0 && e[tries / 2] < 100000 ? static_cast<std::uint64_t>(e[tries / 2]) : 0;
        }
        committed.store(0, std::memory_order_relaxed);
        for (auto& v : last) v = 0;
        std::memcpy(skew, skew_before, sizeof skew);
        discard.store(was_discarding, std::memory_order_relaxed);
    }
    /// The mark of a page written from reserve(), held back until the record then under way was written.
    void write_pending_mark() noexcept {
        if (!mark_pending) return;
        mark_pending = false;
        record_limit = full_record_limit;
        if (!room_for_mark()) return; // (cannot happen: the page was fresh)
        namespace pf = profile_format;
        unsigned char* const p0 = page + pf::page_header_bytes +
                                  static_cast<std::uint32_t>(committed.load(std::memory_order_relaxed));
        unsigned char* p = pf::put_varint_fixed_cost(p0, pf::record_head(pf::RecordKind::integer, false, own_work_label));
        p = pf::put_varint_fixed_cost(p, pending_depth);
        p = pf::put_varint_fixed_cost(p, pending_at - last[0]);
        last[0] = pending_at;
        p = pf::put_varint_fixed_cost(p, pending_length);
        commit(static_cast<std::uint32_t>(p - p0));
    }
    BOOST_FORCEINLINE void commit(std::uint32_t bytes) noexcept {
        const std::uint64_t c = committed.load(std::memory_order_relaxed);
        committed.store(c + bytes + (std::uint64_t{1} << 32), std::memory_order_release);
    }

    /// Writes the page (and, on the thread itself, its thread page with its counters' times).
    /// `ended`: the thread's last (its exit, the profiler's close).
    inline void flush(bool on_own_thread = true, bool ended = false) noexcept; // defined after ProfilerShared
    /// flush() from the recording path: its cost (a checksum over the page's bytes, a system call, a wait for
    /// exit()'s copy) left out of the readings.
    BOOST_NOINLINE void flush_uncounted() noexcept {
        Uncounted own_work(this);
        flush();
    }
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

    /// Counter i's event (its counters open).
    EventSpec event_of(std::size_t i) const {
        if (i == 0) return primary->event();
        if (slot[i] < 0) return clocks[static_cast<std::size_t>(~slot[i])].event();
        return group->event(static_cast<std::size_t>(slot[i]));
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

/// The thread-local cache of this thread's state in the profiler used last.
struct ProfilerTls {
    std::uint64_t generation = 0;
    ProfilerThread* state = nullptr;
};
inline thread_local ProfilerTls profiler_tls;

} // namespace detail
PMC_END_NAMESPACE

// ProfilerThread::flush, which needs ProfilerShared (and ProfilerShared needs ProfilerThread whole).
#include <pmc/detail/profiler_shared.hpp>
