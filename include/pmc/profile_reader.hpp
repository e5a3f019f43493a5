// SPDX-License-Identifier: MIT
// pmc/profile_reader.hpp: a profile read as a stream, and its nesting walked, without loading the file whole.
//
//     auto reader = pmc::ProfileReader::open("out.pmcprof");         // pmc::Result<pmc::ProfileReader>
//     for (const auto& problem : reader->profile().problems) std::fprintf(stderr, "%s\n", problem.c_str());
//     reader->walk([&](const pmc::NestedInterval& s) {               // every scope, with its nesting
//         // s.path(): label ids from the outermost scope to this one; s.total(c), s.self(c) per counter
//     });
//
// open() reads the file once, page by page (memory: the largest page, the strings, and a 16-byte entry per events
// page), checking every page as pmc::read_profile does and with the same messages: a cut or corrupt file is read
// up to its last whole record and what was lost is in profile().problems. The records themselves are read again,
// one page at a time, by each for_each_event() or walk(). read_profile (pmc/profile_format.hpp) is simpler where
// the whole profile fits in memory; this reader is for tools that must not assume it does.
//
// Why the walker reads each thread backwards: records are written as scopes end (postorder), so a scope's
// enclosing scopes come after it in the file. Read from the end, every record's enclosing scopes have been met
// already (a stack as deep as the nesting), and a scope is complete (its children known, so its self value) when
// the walk leaves it. Nothing else is held, however many records the file has.
#pragma once

#include <pmc/config.hpp>
#include <pmc/error.hpp>
#include <pmc/modelled_events.hpp>
#include <pmc/profile_format.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE

/// One record as the stream reads it, with its values inline.
struct ProfileEvent {
    profile_format::RecordKind kind = profile_format::RecordKind::interval;
    std::uint32_t thread = 0;  ///< the profiler's number for its thread
    std::uint64_t ordinal = 0; ///< its position among its thread's records, in file order (0: the first written)
    std::uint32_t depth = 0;   ///< scopes open around it on its thread
    std::uint32_t label = 0;   ///< string id
    std::uint32_t arg = 0;     ///< string id of its argument; 0: none
    /// Interval: start, end per counter (start0, end0, start1, end1, ...). Instant: the primary counter's reading.
    /// Integer event: the primary counter's reading, then the integer.
    std::uint64_t values[2 * profile_format::max_counters] = {};
};

inline constexpr std::uint64_t no_parent = std::numeric_limits<std::uint64_t>::max();

/// A scope as the nesting walker reports it: once its children have all been seen.
struct NestedInterval {
    std::uint32_t thread = 0;
    std::uint64_t ordinal = 0;        ///< as ProfileEvent::ordinal
    std::uint64_t parent = no_parent; ///< the enclosing scope's ordinal (no_parent: outermost, or none was found)
    std::uint32_t depth = 0;          ///< as recorded
    std::uint32_t label = 0, arg = 0;
    /// False when the enclosing scopes found are fewer than its depth says: they were lost (a cut file: the
    /// scopes still open when the program stopped; a corrupt page). The path then starts below the loss.
    bool path_complete = true;
    std::size_t counters = 1;
    std::uint64_t start[profile_format::max_counters] = {}, end[profile_format::max_counters] = {};
    std::uint64_t children = 0;                                          ///< direct child scopes
    std::uint64_t children_total[profile_format::max_counters] = {};     ///< the sum of their totals
    const std::vector<std::uint32_t>* labels = nullptr;

    /// Label ids from the outermost enclosing scope found to this scope (itself last; a label may repeat).
    const std::vector<std::uint32_t>& path() const { return *labels; }
    /// Inclusive value of counter c (differences modulo 2^64, as the counters wrap).
    std::uint64_t total(std::size_t c = 0) const { return end[c] - start[c]; }
    /// Exclusive value: the total less its children's totals.
    std::int64_t self(std::size_t c = 0) const { return static_cast<std::int64_t>(total(c) - children_total[c]); }
};

/// An instant or integer event as the walker reports it, with the scopes open around it.
struct NestedMark {
    profile_format::RecordKind kind = profile_format::RecordKind::instant;
    std::uint32_t thread = 0;
    std::uint64_t ordinal = 0;
    std::uint64_t parent = no_parent; ///< the innermost enclosing scope's ordinal
    std::uint32_t depth = 0;
    std::uint32_t label = 0, arg = 0;
    bool path_complete = true;
    std::uint64_t reading = 0; ///< the primary counter's reading when it happened
    std::uint64_t integer = 0; ///< an integer event's value (0 for an instant)
    /// An own-work mark (Profile::own_work_label): the profiler's own work, `integer` long from `reading`, not an
    /// event of the program's.
    bool own_work = false;
    const std::vector<std::uint32_t>* labels = nullptr;
    /// Label ids of the enclosing scopes, outermost first, then this event's own label.
    const std::vector<std::uint32_t>& path() const { return *labels; }
};

/// Per thread: what the first pass learned (for time bases and spans without a second pass).
struct ProfileThreadSpan {
    std::uint64_t records = 0; ///< whole records kept
    std::uint64_t min_start = std::numeric_limits<std::uint64_t>::max(); ///< the primary's lowest reading
    std::uint64_t max_end = 0;                                           ///< and highest
    /// Each counter's lowest start reading in its intervals (a base for the ride-along counters' tracks).
    std::uint64_t min_reading[profile_format::max_counters] = {
        std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::uint64_t>::max(),
        std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::uint64_t>::max()};
};

/// Whether a profile's counter counted exactly, and why (or why not), in words for people.
struct CounterExactness {
    bool exact = false;
    std::string why;
};

/// The one rule every profile tool uses: the header marks counter `c` exact, it is not a fallback, no thread that
/// recorded events failed to open its counters, and, for an event the kernel may multiplex, every such thread's
/// times show it counted all the time it was enabled. `records_of(thread index)` is how many records a thread holds
/// (threads with none are not asked about).
template <class RecordsOf>
CounterExactness counter_exactness(const Profile& p, std::size_t c, RecordsOf&& records_of) {
    namespace pf = profile_format;
    const ProfileCounter& k = p.counters.at(c);
    if (!k.exact())
        return {false, k.unit == "ns" || k.unit == "TSC ticks" ? "a time: it varies from run to run"
                                                               : "the file does not mark it exact"};
    if (k.flags & pf::fallback) return {false, "recorded in place of a counter that could not be opened (a fallback)"};
    bool checked = false;
    for (const auto& t : p.threads) {
        if (records_of(t.index) == 0) continue; // recorded nothing
        if (!t.error.empty()) return {false, "thread " + std::to_string(t.index) + "'s counters could not be opened"};
        if (!(k.flags & pf::may_multiplex)) continue;
        if (c >= t.times.size() || !t.times[c].known())
            return {false, "a hardware event the kernel may multiplex, and thread " + std::to_string(t.index) +
                               "'s times do not say whether it did"};
        if (t.times[c].multiplexed()) {
            char share[32];
            std::snprintf(share, sizeof share, "%.1f", 100.0 * t.times[c].running_fraction());
            return {false, "multiplexed on thread " + std::to_string(t.index) + " (counted " + share +
                               "% of the time)"};
        }
        checked = true;
    }
    if (k.read_path == "emulator" && k.note.find("modelled (pmc emulate --cache)") != std::string::npos) {
        // A modelled cache event (by its name: a group's notes name the model for every member).
        if (is_modelled_cache_event_name(k.name)) {
            const auto at = k.note.find("Cachegrind's cache model (");
            const auto end = at == std::string::npos ? at : k.note.find(')', at);
            return {true, "modelled (pmc emulate --cache): an exact count of " +
                              (end == std::string::npos ? std::string("Cachegrind's cache model")
                                                        : k.note.substr(at, end + 1 - at)) +
                              " for each thread, not a real core's caches"};
        }
    }
    if (k.read_path == "emulator" && k.note.find("(pmc emulate --branches)") != std::string::npos) {
        if (is_branch_count_event_name(k.name))
            return {true, "emulated (pmc emulate --branches): an exact count of the branch instructions the emulator "
                          "executed for each thread, not a real core's"};
        if (is_modelled_branch_event_name(k.name))
            return {true, "modelled (pmc emulate --branches): an exact count of Cachegrind's branch predictor's "
                          "misses for each thread, not a real core's predictor"};
    }
    if (k.read_path == "emulator") // pmc emulate's PMU: it counts all along, and is not a real core
        return {true, "emulated (QEMU TCG): an exact count of the instructions the emulator executed for each thread, "
                      "not a real core's"};
    if (checked)
        return {true, "a count of events read whole; never multiplexed (every thread counted it all the time it "
                      "was enabled)"};
    return {true, "a count of events read whole, never multiplexed or replaced"};
}

namespace detail {

/// A read-only window on a file: the bytes asked for, read with pread, in a buffer reused and grown only to the
/// largest single request (a page) or the read-ahead.
class FileWindow {
public:
    static constexpr std::size_t read_ahead = 1u << 20;
    int fd = -1;
    std::uint64_t size = 0;

    /// Bytes [at, at + n) of the file (n clipped at the end of the file); nullptr and errno_value set on an error.
    const unsigned char* get(std::uint64_t at, std::size_t n) {
        if (at >= size) return nullptr;
        n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - at));
        if (at >= start_ && at + n <= start_ + filled_) return buf_.data() + (at - start_);
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(std::max(n, read_ahead), size - at));
        if (buf_.size() < want) buf_.resize(want);
        std::size_t got = 0;
        while (got < want) {
            const ssize_t r = ::pread(fd, buf_.data() + got, want - got, static_cast<off_t>(at + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                errno_value = r < 0 ? errno : EIO; // 0: the file shrank while being read
                filled_ = 0;
                return nullptr;
            }
            got += static_cast<std::size_t>(r);
        }
        start_ = at;
        filled_ = got;
        return buf_.data();
    }
    std::size_t bytes_held() const { return buf_.capacity(); }
    int errno_value = 0;

private:
    std::vector<unsigned char> buf_;
    std::uint64_t start_ = 0;
    std::size_t filled_ = 0;
};

/// Adds one decoded record to a thread's span (its primary readings and each counter's lowest start).
inline void add_to_span(const DecodedRecord& r, std::size_t counters, ProfileThreadSpan& span) {
    namespace pf = profile_format;
    const bool interval = r.kind == pf::RecordKind::interval;
    span.min_start = std::min(span.min_start, r.values[0]);
    span.max_end = std::max(span.max_end, r.values[interval ? 1 : 0]);
    if (interval)
        for (std::size_t c = 0; c < counters; ++c) span.min_reading[c] = std::min(span.min_reading[c], r.values[2 * c]);
    ++span.records;
}

} // namespace detail

/// A profile file read as a stream (see the top of this header).
class ProfileReader {
public:
    /// Opens `path` and reads it through once (header, strings, threads, and where each thread's events are).
    /// Fails only when the file cannot be opened or its header cannot be read (the message says which and why).
    static Result<ProfileReader> open(const std::string& path) {
        ProfileReader r;
        r.path_ = path;
        r.file_.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (r.file_.fd < 0) {
            const int err = errno;
            return make_failure(err, "cannot open profile '" + path + "': " + std::strerror(err));
        }
        struct stat st {};
        if (::fstat(r.file_.fd, &st) != 0) {
            const int err = errno;
            return make_failure(err, "cannot read profile '" + path + "': " + std::strerror(err));
        }
        if (S_ISDIR(st.st_mode))
            return make_failure(EISDIR, "cannot read profile '" + path + "': it is a directory, not a regular file; "
                                        "name the profile file in it (the program wrote it to PMC_PROFILE=FILE)");
        if (!S_ISREG(st.st_mode))
            return make_failure(EINVAL, "cannot read profile '" + path + "': not a regular file (a pipe or a device; "
                                        "it is read in passes: save it to a file first)");
        r.file_.size = static_cast<std::uint64_t>(st.st_size);
        if (auto failure = r.index())
            return make_failure(failure->code.value(), "'" + path + "' is " + failure->message);
        return r;
    }

    ProfileReader(ProfileReader&& o) noexcept { *this = std::move(o); }
    ProfileReader& operator=(ProfileReader&& o) noexcept {
        if (this != &o) {
            close();
            profile_ = std::move(o.profile_);
            threads_ = std::move(o.threads_);
            path_ = std::move(o.path_);
            file_ = std::move(o.file_);
            page_events_ = std::move(o.page_events_);
            peak_ = o.peak_;
            o.file_.fd = -1;
        }
        return *this;
    }
    ProfileReader(const ProfileReader&) = delete;
    ProfileReader& operator=(const ProfileReader&) = delete;
    ~ProfileReader() { close(); }

    /// The header, the strings, the threads (name, tid, error, times, pages; `records` left empty: see
    /// span()), the problems and the bytes read and lost, as read_profile gives them.
    const Profile& profile() const { return profile_; }
    /// What the first pass counted for thread `index` (empty for a thread with no events).
    ProfileThreadSpan span(std::uint32_t index) const {
        auto it = threads_.find(index);
        return it == threads_.end() ? ProfileThreadSpan{} : it->second.span;
    }
    /// counter_exactness for this profile's counter `c`.
    CounterExactness exactness(std::size_t c) const {
        return counter_exactness(profile_, c, [this](std::uint32_t index) { return span(index).records; });
    }
    /// The most bytes this reader has held for file data and records at once (its memory bound, for tests).
    std::size_t peak_bytes_held() const { return peak_; }

    /// Calls f(const ProfileEvent&) for every record: each thread's records in the order written, threads by
    /// number. Returns the failure if the file could not be read again (changed or shrank since open()).
    template <class F>
    std::optional<Failure> for_each_event(F&& f) {
        for (const ProfileThread& t : profile_.threads) {
            auto it = threads_.find(t.index);
            if (it == threads_.end()) continue;
            std::uint64_t ordinal = 0;
            for (const PageRef& page : it->second.pages) {
                if (auto failure = load(page, t.index)) return failure;
                for (ProfileEvent& e : page_events_) {
                    e.ordinal = ordinal++;
                    f(static_cast<const ProfileEvent&>(e));
                }
            }
        }
        return std::nullopt;
    }

    /// Walks every thread's nesting (threads by number; only thread `only` when given): calls
    /// on_interval(const NestedInterval&) for each scope once all its children have been seen, and
    /// on_mark(const NestedMark&) for each instant and integer event. Within a thread the calls go from its last
    /// record to its first; a scope comes after all its descendants (so, read in reverse, the calls are in
    /// preorder: every scope before its children, siblings in time order). A record deeper than the scopes found
    /// around it (its enclosing scopes were lost) is placed under the innermost scope found, or at the top, with
    /// path_complete false. Memory: one page and the stack of open scopes.
    template <class OnInterval, class OnMark>
    std::optional<Failure> walk(OnInterval&& on_interval, OnMark&& on_mark, std::optional<std::uint32_t> only = {}) {
        namespace pf = profile_format;
        const std::size_t nc = profile_.counters.size();
        std::vector<NestedInterval> stack;
        std::vector<std::uint32_t> path;
        auto leave = [&] {
            on_interval(static_cast<const NestedInterval&>(stack.back()));
            stack.pop_back();
            path.pop_back();
        };
        for (const ProfileThread& t : profile_.threads) {
            if (only && t.index != *only) continue;
            auto it = threads_.find(t.index);
            if (it == threads_.end()) continue;
            stack.clear();
            path.clear();
            std::uint64_t ordinal = it->second.span.records;
            const auto& pages = it->second.pages;
            for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
                if (auto failure = load(*page, t.index)) return failure;
                for (auto e = page_events_.rbegin(); e != page_events_.rend(); ++e) {
                    e->ordinal = --ordinal;
                    while (!stack.empty() && stack.back().depth >= e->depth) leave();
                    const NestedInterval* up = stack.empty() ? nullptr : &stack.back();
                    const bool complete = up ? up->path_complete && up->depth + 1 == e->depth : e->depth == 0;
                    if (e->kind == pf::RecordKind::interval) {
                        NestedInterval s;
                        s.thread = t.index;
                        s.ordinal = e->ordinal;
                        s.parent = up ? up->ordinal : no_parent;
                        s.depth = e->depth;
                        s.label = e->label;
                        s.arg = e->arg;
                        s.path_complete = complete;
                        s.counters = nc;
                        for (std::size_t c = 0; c < nc; ++c) {
                            s.start[c] = e->values[2 * c];
                            s.end[c] = e->values[2 * c + 1];
                        }
                        s.labels = &path;
                        if (!stack.empty()) {
                            NestedInterval& p = stack.back();
                            ++p.children;
                            for (std::size_t c = 0; c < nc; ++c) p.children_total[c] += s.total(c);
                        }
                        stack.push_back(s);
                        path.push_back(e->label);
                    } else {
                        NestedMark m;
                        m.kind = e->kind;
                        m.thread = t.index;
                        m.ordinal = e->ordinal;
                        m.parent = up ? up->ordinal : no_parent;
                        m.depth = e->depth;
                        m.label = e->label;
                        m.arg = e->arg;
                        m.path_complete = complete;
                        m.reading = e->values[0];
                        m.integer = e->kind == pf::RecordKind::integer ? e->values[1] : 0;
                        m.own_work = m.kind == pf::RecordKind::integer && m.label != 0 &&
                                     m.label == profile_.own_work_label;
                        path.push_back(e->label);
                        m.labels = &path;
                        on_mark(static_cast<const NestedMark&>(m));
                        path.pop_back();
                    }
                }
            }
            while (!stack.empty()) leave();
        }
        return std::nullopt;
    }

private:
    struct PageRef {
        std::uint64_t at = 0;      ///< the payload's offset in the file
        std::uint32_t bytes = 0;   ///< of whole records
        std::uint32_t records = 0; ///< whole records
    };
    struct ThreadPages {
        std::vector<PageRef> pages;
        ProfileThreadSpan span;
    };

    ProfileReader() = default;
    void close() noexcept {
        if (file_.fd >= 0) ::close(file_.fd);
        file_.fd = -1;
    }
    void note_held() { peak_ = std::max(peak_, file_.bytes_held() + page_events_.capacity() * sizeof(ProfileEvent)); }

    /// Reads one page's records into page_events_.
    std::optional<Failure> load(const PageRef& page, std::uint32_t thread) {
        namespace pf = profile_format;
        const unsigned char* q = file_.get(page.at, page.bytes);
        if (page.bytes && !q)
            return make_failure(file_.errno_value, "cannot read profile '" + path_ + "' again at byte " +
                                                       std::to_string(page.at) + ": " +
                                                       std::strerror(file_.errno_value) +
                                                       " (was it changed or cut while being read?)");
        const std::size_t nc = profile_.counters.size();
        page_events_.clear();
        std::size_t used = 0;
        detail::decode_events(q, page.bytes, nc, used, [&](const detail::DecodedRecord& r) {
            if (r.kind == pf::RecordKind::nesting_error) return;
            ProfileEvent e;
            e.kind = r.kind;
            e.thread = thread;
            e.depth = r.depth;
            e.label = r.label;
            e.arg = r.arg;
            std::memcpy(e.values, r.values, sizeof e.values);
            page_events_.push_back(e);
        });
        note_held();
        return std::nullopt;
    }

    /// The first pass: parse_profile's page loop (same checks, same problems), keeping where the records are
    /// instead of the records.
    std::optional<Failure> index() {
        namespace pf = profile_format;
        Profile& out = profile_;
        const std::uint64_t n = file_.size;
        // The header: as long as it says (parse_profile_header refuses more than 16 MiB).
        std::size_t head = static_cast<std::size_t>(std::min<std::uint64_t>(n, pf::file_header_fixed));
        const unsigned char* p = n ? file_.get(0, head) : nullptr;
        if (p && head == pf::file_header_fixed) {
            std::uint32_t claimed;
            std::memcpy(&claimed, p + 12, 4);
            head = static_cast<std::size_t>(
                std::min<std::uint64_t>(n, std::max<std::uint64_t>(head, std::min(claimed, (1u << 24) + 1))));
            p = file_.get(0, head);
        }
        if (n && !p)
            return make_failure(file_.errno_value, std::string("unreadable: ") + std::strerror(file_.errno_value));
        std::size_t header_bytes = 0;
        static const unsigned char nothing = 0;
        if (auto failure = detail::parse_profile_header(p ? p : &nothing, p ? head : 0, out, header_bytes))
            return failure;
        const std::size_t nc = out.counters.size();
        detail::PageScan scan;
        bool read_ok = true;
        auto get = [&](std::uint64_t from, std::size_t len) -> const unsigned char* {
            const unsigned char* q = len ? file_.get(from, len) : &nothing;
            read_ok = read_ok && q != nullptr;
            return q;
        };
        auto failed_read = [&] {
            return make_failure(file_.errno_value, std::string("unreadable: ") + std::strerror(file_.errno_value));
        };
        if (!scan.run(get, n, header_bytes, out) || !read_ok) return failed_read();
        scan.finish(out);
        std::unordered_map<std::uint32_t, std::uint64_t> undefined;
        for (ProfileThread& t : out.threads) {
            auto it = scan.events.find(t.index);
            if (it == scan.events.end()) continue;
            ThreadPages& tp = threads_[t.index];
            for (const detail::EventsPageRef& page : it->second) {
                const unsigned char* q = get(page.at, page.len);
                if (!q) return failed_read();
                std::size_t kept = 0;
                const std::size_t used = scan.decode_page(out, t, page, q, n, nc, undefined, [&](const detail::DecodedRecord& r) {
                    ++kept;
                    detail::add_to_span(r, nc, tp.span);
                });
                if (kept) tp.pages.push_back(PageRef{page.at, static_cast<std::uint32_t>(used), static_cast<std::uint32_t>(kept)});
            }
        }
        detail::PageScan::report_records(out, undefined);
        note_held();
        return std::nullopt;
    }

    Profile profile_;
    std::unordered_map<std::uint32_t, ThreadPages> threads_;
    std::string path_;
    detail::FileWindow file_;
    std::vector<ProfileEvent> page_events_;
    std::size_t peak_ = 0;
};

PMC_END_NAMESPACE
