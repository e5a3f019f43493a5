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
// nothing into the parent's file (its counters count the parent's threads, and its pages would clash), holds none of
// its parent's locks or files, and never waits on the parent's recording at its exit. A static Profiler destroyed by
// exit() while threads still record ends the file as exit() does (docs/profiling.md, "Process shapes").
//
// This header reads top down: the API (Label, ProfilerOptions, Profiler, ProfilerScope, ProfilerPause, LabelCache,
// KeyedLabelCache), then, past the banner "implementation", the definitions of its members. The internals they use
// are in detail/: profiler_thread.hpp (one thread's recording: its counters, its nesting of open intervals, its
// page; the recording path), profiler_shared.hpp (what a profiler's threads share: the file, its appends, the end record),
// profiler_exit.hpp (a thread's exit, exit(), the fatal signals) and profiler_setup.hpp (the profile's path, the
// counter list).
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/cpu.hpp>
#include <pmc/detail/profiler_exit.hpp>
#include <pmc/detail/profiler_setup.hpp>
#include <pmc/detail/profiler_shared.hpp>
#include <pmc/detail/profiler_thread.hpp>
#include <pmc/determinism.hpp>
#include <pmc/error.hpp>
#include <pmc/group.hpp>
#include <pmc/machine.hpp>
#include <pmc/profile_format.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE

namespace detail {
struct ProfilerTestAccess;
} // namespace detail

class ProfilerScope;
class ProfilerPause;

// ---- Label, ProfilerOptions ------------------------------------------------------------------------------------

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

// ---- Profiler --------------------------------------------------------------------------------------------------

/// The profiler. Move-only; a default-constructed or from_env() profiler without PMC_PROFILE is off.
class Profiler {
public:
    /// Off: records nothing, costs a branch per event.
    Profiler() = default;

    /// Opens the counters on this thread (a failure throws pmc::error saying which and why), measures the cost of
    /// one scope, and writes the header to `options.path`.
    /// `%p` in the path is the process id; a path another live process is writing throws (use `%p`).
    explicit Profiler(ProfilerOptions options);

    /// PMC_PROFILE=PATH turns profiling on and names the file (`%p`: the process id, `%%`: a percent sign);
    /// PMC_PROFILE_COUNTERS (comma-separated event strings) overrides `defaults.counters`. A file another live
    /// process is writing (a driver and the children it exec'd, given one PMC_PROFILE) is never shared: this
    /// process writes PATH with `.%p` before its extension instead, and says so. Nothing here stops the program: a
    /// counter that cannot be opened is replaced (wall-time for the primary, dropped otherwise; a counter then named
    /// twice is recorded once), a file that cannot be created leaves the profiler off; each said on stderr (with the
    /// reason and its fix), and the fallback is written in the file's header. Strict mode (PMC_PROFILE_STRICT=1 or
    /// `defaults.strict`) replaces nothing: any of these throws pmc::error with the reason, so that a CI job's exit
    /// status shows it (uncaught, the program ends with SIGABRT).
    static Profiler from_env(ProfilerOptions defaults = {});

    Profiler(Profiler&&) noexcept = default;
    Profiler& operator=(Profiler&& o) noexcept;
    Profiler(const Profiler&) = delete;
    Profiler& operator=(const Profiler&) = delete;
    /// Writes every thread's buffered events and closes the file (call it after the threads finished recording).
    ~Profiler() { close(); }

    bool enabled() const noexcept { return shared_ != nullptr; }
    /// The file being written (`%p` expanded, or the PATH.%p another process's file made it); "" when off.
    std::string path() const;
    /// The event strings recorded (after any fallback), the primary first.
    std::vector<std::string> counters() const;
    /// Pages that could not be written (a full disk...).
    std::uint64_t write_errors() const noexcept;

    /// Interns `name` (a lock and a lookup: do it once, not per event). Label{} when off. Its cost is left out of the
    /// calling thread's intervals (see pause()).
    Label label(std::string_view name);

    /// Starts an interval on this thread; it ends when the returned scope is destroyed.
    BOOST_FORCEINLINE ProfilerScope scope(Label label, Label arg = {});
    /// The same with an argument interned now (a lock per call: prefer an interned Label for frequent events).
    ProfilerScope scope(Label label, std::string_view arg);

    /// Begins an interval on the calling thread that a later end(label) on the same thread ends: for hooks and
    /// callbacks (an interpreter's call/return hook, a database's trace callback), where no scope can span the
    /// interval. As cheap as a scope, no allocation per event; it shares the thread's nesting with scopes.
    BOOST_FORCEINLINE void begin(Label label, Label arg = {}) noexcept;
    /// Ends the innermost interval open on the calling thread, which must have been begun with `label`. An end that
    /// does not match it (another label, or nothing open) closes nothing: it is written to the file as a nesting
    /// error, which the tools report (exit status 2), never silently re-nested.
    BOOST_FORCEINLINE void end(Label label) noexcept;

    /// Intervals open on the calling thread (scopes and begin()s; 0 when off or before the thread's first event).
    /// Taken where a hook's error path will return to (a setjmp, Lua's pcall, a catch), and given to end_to() there.
    std::uint32_t depth() const noexcept;
    /// Ends every interval open on the calling thread above `depth`, innermost first, all at one reading now: what
    /// the missed end()s would have recorded had they come at once. For error paths that unwind past the hooks that
    /// would have ended them (longjmp, an exception, Lua's pcall): without it, the next end() finds another label
    /// open, and the tools report nesting errors. Nothing when depth() <= `depth`. For begin() intervals: a scope
    /// ends itself (its destructor, later, then finds its interval gone: a nesting error).
    void end_to(std::uint32_t depth) noexcept;

    /// An instant event: the primary counter's reading now.
    BOOST_FORCEINLINE void instant(Label label, Label arg = {});

    /// An integer event (a size, a count): `value` with the primary counter's reading now.
    BOOST_FORCEINLINE void integer(Label label, std::uint64_t value, Label arg = {});

    /// Names the calling thread in the profile (written at once; its cost left out, as with pause()).
    void thread_name(std::string_view name);

    /// Writes this thread's buffered events now (a system call; the page starts afresh; its cost left out).
    void flush();

    /// Leaves the calling thread's work from now until the returned object is destroyed out of its intervals: the
    /// counters are read at both ends and what they counted is taken off every later reading on this thread. For an
    /// instrumentation hook's own bookkeeping (building a label's text, a lookup whose cost varies with the key),
    /// which would otherwise land in the enclosing interval's self value and, under an exact counter, make it
    /// change when nothing in the program did. What remains is constant: the instructions around two readings.
    /// Not for the program's own work (it would hide it). label(), thread_name(), flush() and the recording path's
    /// own page writes pause themselves. Exact counters only: a time (wall-time, tsc, task-clock) keeps the work in,
    /// so that its readings stay absolute across threads (where the primary is a time, the profiler's own work is
    /// marked in the file instead: docs/profile-format.md, "Own-work marks"). Nothing to do on a thread that has not
    /// recorded yet, or when off.
    ProfilerPause pause() noexcept;

private:
    // The calling thread's state in this profiler (registered on its first event).
    BOOST_FORCEINLINE detail::ProfilerThread* local();
    BOOST_FORCEINLINE detail::ProfilerThread* local_noexcept() noexcept;
    BOOST_NOINLINE inline detail::ProfilerThread* local_slow();
    // The calling thread's state if it has one already (nothing is registered): for pause(), depth(), end_to().
    detail::ProfilerThread* local_if_registered() const noexcept;
    detail::ProfilerThread* register_thread(bool from_start = false);

    // The start (the file, the counters, the cost of a scope, the header) and the close.
    static detail::ProfileFile open_profile_file(ProfilerOptions& o, std::vector<std::string>& warnings,
                                                 bool from_env);
    std::optional<Failure> open_counters(detail::ProfilerThread& t);
    void start(ProfilerOptions o, std::vector<std::string> warnings, bool lenient, bool from_env);
    std::vector<std::array<double, 2>> measure_cost(detail::ProfilerThread& t);
    void write_header(const ProfilerOptions& o, const std::vector<std::string>& warnings,
                      const std::vector<std::uint32_t>& extra_flags, const std::vector<std::array<double, 2>>& cost,
                      detail::ProfilerThread& t);
    void close() noexcept;

    std::shared_ptr<detail::ProfilerShared> shared_;
    friend struct detail::ProfilerTestAccess;
};

// ---- ProfilerScope ---------------------------------------------------------------------------------------------

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
    BOOST_FORCEINLINE void end() noexcept;

private:
    friend class Profiler;
    BOOST_FORCEINLINE ProfilerScope() noexcept {} // off
    BOOST_FORCEINLINE ProfilerScope(detail::ProfilerThread* t, Label label, Label arg) noexcept;

    detail::ProfilerThread* t_ = nullptr;
    std::uint32_t at_ = 0; ///< its slot in the thread's nesting (its depth)
    std::uint32_t serial_ = 0; ///< its opening's serial: the slot may hold a later interval after end_to()
    std::uint32_t label_ = 0;  ///< for the nesting error when end_to() ended it first
};

// ---- ProfilerPause ---------------------------------------------------------------------------------------------

/// Profiler::pause(): the calling thread's work during its life left out of the thread's intervals.
class ProfilerPause {
public:
    ProfilerPause(const ProfilerPause&) = delete;
    ProfilerPause& operator=(const ProfilerPause&) = delete;

private:
    friend class Profiler;
    explicit ProfilerPause(detail::ProfilerThread* t) noexcept : own_work_(t, false) {}
    detail::ProfilerThread::Uncounted own_work_;
};

// ---- LabelCache ------------------------------------------------------------------------------------------------

/// Labels built at run time from text (a statement's SQL text): one thread's cache in front of Profiler::label(),
/// which takes a lock and builds a string at every call. A name seen before costs a hash lookup (no lock, no
/// allocation); a new one, Profiler::label() once. The lookup's cost depends on the text and on the other names (a
/// longer string to hash, a longer chain): it is left out of the thread's intervals (Profiler::pause(): two counter
/// reads). Where the caller has a pointer or an id for the name (an interpreter's function object), KeyedLabelCache
/// is cheaper and never builds the text again. One cache per thread (it is not locked); the Profiler must outlive it.
///
///     thread_local pmc::LabelCache labels{prof};
///     prof.begin(labels(function_name));      // in a call hook
class LabelCache {
public:
    explicit LabelCache(Profiler& profiler) : profiler_(&profiler) {}
    LabelCache(const LabelCache&) = delete;
    LabelCache& operator=(const LabelCache&) = delete;

    Label operator()(std::string_view name) {
        const ProfilerPause own_work = profiler_->pause();
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

// ---- KeyedLabelCache -------------------------------------------------------------------------------------------

/// Labels for keys the caller already has (a function's address, an integer id): one thread's cache in front of
/// Profiler::label() for an instrumentation hook. A key seen before costs a hash and four compares, the same
/// instructions for every key and however full the table is (no probe sequence: a lookup's cost must not move when
/// another key is added, or under an exact counter a caller's self value would change when nothing it does did). A
/// new key calls `name_of()` to build its name, once, with the cost left out of the thread's intervals
/// (Profiler::pause()). One cache per thread (it is not locked); the Profiler must outlive it.
///
///     thread_local pmc::KeyedLabelCache<const Proto*> labels{prof};
///     prof.begin(labels(f, [&] { return function_name(f); }));     // in a call hook: the name built once
template <class Key = const void*>
class KeyedLabelCache {
    static_assert(std::is_pointer_v<Key> || std::is_integral_v<Key> || std::is_enum_v<Key>,
                  "KeyedLabelCache's key is a pointer or an integer");

public:
    explicit KeyedLabelCache(Profiler& profiler) : profiler_(&profiler), buckets_(16) {}
    KeyedLabelCache(const KeyedLabelCache&) = delete;
    KeyedLabelCache& operator=(const KeyedLabelCache&) = delete;

    /// The label of `key`; `name_of()` (returning something a std::string_view takes) builds its name on a miss.
    template <class NameOf>
    BOOST_FORCEINLINE Label operator()(Key key, NameOf&& name_of) {
        const std::uint64_t k = bits(key);
        const Bucket& b = buckets_[index(k)];
        std::uint32_t found = 0; // an empty slot's label is 0: it adds nothing, whatever its key
        for (int i = 0; i < slots; ++i) found |= b.labels[i] & (0u - static_cast<std::uint32_t>(b.keys[i] == k));
        if (BOOST_LIKELY(found != 0)) return Label{found};
        return miss(k, std::forward<NameOf>(name_of));
    }
    std::size_t size() const noexcept { return size_; }

private:
    static constexpr int slots = 4;
    struct Bucket {
        std::uint64_t keys[slots] = {};
        std::uint32_t labels[slots] = {};
    };
    static std::uint64_t bits(Key key) noexcept {
        if constexpr (std::is_pointer_v<Key>) return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(key));
        else return static_cast<std::uint64_t>(key);
    }
    std::size_t index(std::uint64_t k) const noexcept {
        return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    template <class NameOf>
    BOOST_NOINLINE Label miss(std::uint64_t k, NameOf&& name_of) {
        if (!profiler_->enabled()) return Label{}; // off: no name built, nothing remembered
        const ProfilerPause own_work = profiler_->pause();
        const Label label = profiler_->label(std::string_view(name_of()));
        while (!insert(k, label.id)) grow();
        ++size_;
        return label;
    }
    bool insert(std::uint64_t k, std::uint32_t label) noexcept {
        Bucket& b = buckets_[index(k)];
        for (int i = 0; i < slots; ++i)
            if (b.labels[i] == 0) {
                b.keys[i] = k;
                b.labels[i] = label;
                return true;
            }
        return false; // full: the table doubles
    }
    /// Twice the buckets, every key placed again (and again, should five keys still share one).
    void grow() {
        const std::vector<Bucket> old = std::move(buckets_);
        for (std::size_t n = 2 * old.size();; n *= 2) {
            buckets_.assign(n, Bucket{});
            shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
            if (reinsert(old)) return;
        }
    }
    bool reinsert(const std::vector<Bucket>& from) noexcept {
        for (const Bucket& b : from)
            for (int i = 0; i < slots; ++i)
                if (b.labels[i] != 0 && !insert(b.keys[i], b.labels[i])) return false;
        return true;
    }

    Profiler* profiler_;
    std::vector<Bucket> buckets_;
    unsigned shift_ = 60; ///< 64 - log2(buckets): the hash's top bits pick the bucket
    std::size_t size_ = 0;
};

// ================================================================================================================
// implementation: the members of Profiler and ProfilerScope (their internals: detail/profiler_*.hpp)
// ================================================================================================================

// ---- recording: scopes, begin and end, instants, integers ------------------------------------------------------

BOOST_FORCEINLINE ProfilerScope Profiler::scope(Label label, Label arg) {
    if (BOOST_UNLIKELY(!shared_)) return ProfilerScope();
    return ProfilerScope(local(), label, arg);
}

inline ProfilerScope Profiler::scope(Label label, std::string_view arg) {
    if (!shared_) return ProfilerScope();
    return ProfilerScope(local(), label, this->label(arg));
}

BOOST_FORCEINLINE ProfilerScope::ProfilerScope(detail::ProfilerThread* t, Label label, Label arg) noexcept
    : t_(t), at_(t->push(label.id, arg.id)), serial_(t->openings), label_(label.id) {}

BOOST_FORCEINLINE void ProfilerScope::end() noexcept {
    if (t_ == nullptr) return;
    detail::ProfilerThread& t = *t_;
    t_ = nullptr;
    t.end_scope(at_, serial_, label_);
}

BOOST_FORCEINLINE void Profiler::begin(Label label, Label arg) noexcept {
    if (BOOST_UNLIKELY(!shared_)) return;
    if (detail::ProfilerThread* t = local_noexcept()) t->push(label.id, arg.id);
}

BOOST_FORCEINLINE void Profiler::end(Label label) noexcept {
    if (BOOST_UNLIKELY(!shared_)) return;
    if (detail::ProfilerThread* t = local_noexcept()) t->end_label(label.id);
}

BOOST_FORCEINLINE void Profiler::instant(Label label, Label arg) {
    if (BOOST_UNLIKELY(!shared_)) return;
    detail::ProfilerThread& t = *local();
    std::uint64_t v[profile_format::max_counters] = {};
    t.read_all(v);
    t.record_mark(profile_format::RecordKind::instant, label.id, arg.id, v[0], 0);
}

BOOST_FORCEINLINE void Profiler::integer(Label label, std::uint64_t value, Label arg) {
    if (BOOST_UNLIKELY(!shared_)) return;
    detail::ProfilerThread& t = *local();
    std::uint64_t v[profile_format::max_counters] = {};
    t.read_all(v);
    t.record_mark(profile_format::RecordKind::integer, label.id, arg.id, v[0], value);
}

// ---- the calling thread's state --------------------------------------------------------------------------------

BOOST_FORCEINLINE detail::ProfilerThread* Profiler::local() {
    const detail::ProfilerTls& c = detail::profiler_tls;
    if (BOOST_LIKELY(c.generation == shared_->generation)) return c.state;
    return local_slow();
}

/// local() for noexcept callers: nullptr where registering the thread failed (its page could not be mapped).
BOOST_FORCEINLINE detail::ProfilerThread* Profiler::local_noexcept() noexcept {
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

// Declared inline in the class, beside BOOST_NOINLINE (GCC refuses an inline definition after a noinline declaration).
detail::ProfilerThread* Profiler::local_slow() {
    if (!detail::profiler_thread_ended)
        for (auto& e : detail::profiler_thread_exit().entries)
            if (e.first.get() == shared_.get()) {
                detail::profiler_tls = {shared_->generation, e.second};
                return e.second;
            }
    detail::ProfilerThread* t = register_thread();
    // Finished (counted for close(), which waits for it) once the exit hook holds the profiler, or this throws.
    struct Finished {
        detail::ProfilerShared& s;
        ~Finished() { s.registered.fetch_add(1, std::memory_order_release); }
    } finished{*shared_};
    if (detail::profiler_thread_ended) { // after the exit hook (another key's destructor): recorded nowhere
        t->broken = t->discard = true;
        detail::profiler_tls = {shared_->generation, t};
        return t;
    }
    detail::profiler_thread_exit().entries.emplace_back(shared_, t);
    detail::profiler_tls = {shared_->generation, t};
    return t;
}

/// A state for the calling thread: its page (touched now, so its page faults are not counted in its first
/// events) and its counters. A counter that fails here is reported in the file, not thrown (except for the
/// constructor's thread: `from_start`).
inline detail::ProfilerThread* Profiler::register_thread(bool from_start) {
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
        if (from_start) raise(*opened);
        t->broken = true;
        t->error = opened->message;
    } else {
        t->find_time_sources();
    }
    t->build_info_page();
    t->max_record = static_cast<std::uint32_t>(profile_format::max_record_bytes(t->ncounters));
    t->record_limit = t->full_record_limit = std::max<std::uint32_t>(1, t->capacity / t->max_record);
    t->calibrate_slow_path();
    // No lock from here on: what this thread runs must not depend on whether another registers at the same moment
    // (under pmc emulate --branches its predictor carries that code's branches into its first intervals). A number
    // (one atomic add), a link (one exchange: ProfilerShared::link_thread), a thread page that names no label.
    // seq_cst with close()'s `closing`: either close() counts this registration (and waits for it to finish) or
    // this thread sees the close begun, and records nothing (never a page after the end record).
    t->index = s.next_thread.fetch_add(1, std::memory_order_seq_cst);
    const bool too_late = s.closing.load(std::memory_order_seq_cst);
    if (BOOST_UNLIKELY(too_late)) t->discard.store(true, std::memory_order_relaxed);
    detail::ProfilerThread* raw = t.release(); // owned by the list from here (freed when the profiler ends)
    raw->time_counter = s.time_counter;   // (both set at the start, before any other thread could register)
    raw->own_work_label = s.own_work_label;
    s.link_thread(*raw);
    if (!from_start && !too_late) s.write_thread_page(*raw); // the constructor's waits for the header (write_header)
    if (raw->broken) // said once, here; the file's thread page has the whole message
        std::fprintf(stderr, "pmc profiler: thread %u (tid %d): its counters could not be opened (%s); its events "
                             "record zeros, the other threads' are not affected\n",
                     raw->index, static_cast<int>(raw->tid), raw->error.substr(0, raw->error.find('\n')).c_str());
    return raw;
}

// ---- labels, thread names, flush, the accessors ----------------------------------------------------------------

inline Label Profiler::label(std::string_view name) {
    if (!shared_) return Label{};
    auto& s = *shared_;
    // A lock that may be contended, a lookup, a page written: nothing an interval open here should count (on a
    // clock: marked as the profiler's own work).
    detail::ProfilerThread* t = local_if_registered();
    const detail::ProfilerThread::Uncounted own_work(t && !t->broken ? t : nullptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.labels.find(name);
    if (it != s.labels.end()) return Label{it->second};
    if (s.next_label > profile_format::max_label)
        raise(make_failure(E2BIG, "pmc profiler: more than " + std::to_string(profile_format::max_label) +
                                      " distinct labels; intern arguments that vary less, or fewer of them"));
    const std::uint32_t id = s.next_label++;
    s.define_label(name, id); // in the profiler's own memory, not this thread's heap (detail::MappedArena)
    return Label{id};
}

inline void Profiler::thread_name(std::string_view name) {
    if (!shared_) return;
    detail::ProfilerThread& t = *local();
    const detail::ProfilerThread::Uncounted own_work(&t);
    {
        detail::ProfilerThread::InfoBusy busy(t);
        t.name = std::string(name);
        t.build_info_page();
    }
    shared_->write_thread_page(t);
}

inline void Profiler::flush() {
    if (shared_) local()->flush_uncounted();
}

inline ProfilerPause Profiler::pause() noexcept {
    detail::ProfilerThread* t = shared_ ? local_if_registered() : nullptr;
    return ProfilerPause(t && !t->broken ? t : nullptr);
}

inline std::uint32_t Profiler::depth() const noexcept {
    const detail::ProfilerThread* t = shared_ ? local_if_registered() : nullptr;
    return t ? t->depth : 0;
}

inline void Profiler::end_to(std::uint32_t depth) noexcept {
    if (detail::ProfilerThread* t = shared_ ? local_if_registered() : nullptr) t->end_to(depth);
}

inline detail::ProfilerThread* Profiler::local_if_registered() const noexcept {
    const detail::ProfilerTls& c = detail::profiler_tls;
    if (BOOST_LIKELY(c.generation == shared_->generation)) return c.state;
    // The hook as it is (profiler_thread_exit() would make one: an allocation, which may throw, in a noexcept path).
    if (!detail::profiler_thread_ended && detail::profiler_thread_exit_hook)
        for (auto& e : detail::profiler_thread_exit_hook->entries)
            if (e.first.get() == shared_.get()) return e.second;
    return nullptr;
}

inline std::string Profiler::path() const { return shared_ ? shared_->path : std::string(); }
inline std::vector<std::string> Profiler::counters() const {
    return shared_ ? shared_->counters : std::vector<std::string>{};
}
inline std::uint64_t Profiler::write_errors() const noexcept { return shared_ ? shared_->write_errors.load() : 0; }

// ---- the start: the file, the counters, the cost of a scope, the header ----------------------------------------

inline Profiler::Profiler(ProfilerOptions options) { start(std::move(options), {}, false, false); }

inline Profiler Profiler::from_env(ProfilerOptions defaults) {
    Profiler p;
    const char* path = std::getenv("PMC_PROFILE");
    if (!path || !*path) return p;
    defaults.path = path;
    if (const char* strict = std::getenv("PMC_PROFILE_STRICT"); strict && *strict && std::string_view(strict) != "0")
        defaults.strict = true;
    if (const char* list = std::getenv("PMC_PROFILE_COUNTERS"); list && *list) {
        defaults.counters = split_event_list(list); // pmc count -e's rule: an empty event is refused, not skipped
        if (std::string why = empty_event_text("PMC_PROFILE_COUNTERS", list, defaults.counters); !why.empty()) {
            if (defaults.strict) raise(make_failure(EINVAL, "pmc profiler: " + why));
            std::fprintf(stderr, "pmc profiler: profiling is off: %s\n", why.c_str());
            return p;
        }
    }
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

/// Creates the profile file, locked against other processes (flock: released when the process ends, however it
/// ends). `%p` expands to the process id. A file another live process holds: from_env writes PATH.%p instead
/// (said on stderr and in the header), the constructor throws.
inline detail::ProfileFile Profiler::open_profile_file(ProfilerOptions& o, std::vector<std::string>& warnings,
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

inline std::optional<Failure> Profiler::open_counters(detail::ProfilerThread& t) {
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

inline void Profiler::start(ProfilerOptions o, std::vector<std::string> warnings, bool lenient, bool from_env) {
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
    s->reserve_end_record(64); // threads beyond: ProfilerShared::write_end_record
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
    detail::profiler_thread_exit().entries.emplace_back(shared_, t);
    detail::profiler_tls = {s->generation, t};
    s->registered.fetch_add(1, std::memory_order_release);
    // Which counters are times (their readings stay absolute), and, with a time as the primary, the label of the
    // own-work marks (its id goes in the header; its text is written once the header is out).
    for (std::size_t i = 0; i < s->ncounters; ++i)
        s->time_counter[i] = !(detail::counter_flags(t->event_of(i)) & pf::exact);
    if (s->time_counter[0]) s->own_work_label = s->next_label++;
    t->time_counter = s->time_counter;
    std::vector<std::array<double, 2>> cost(s->ncounters, {0.0, 0.0});
    if (o.measure_cost) cost = measure_cost(*t);
    write_header(o, warnings, flags, cost, *t);
    if (s->own_work_label != 0) {
        std::lock_guard<std::mutex> lock(s->mutex);
        s->define_label(pf::own_work_text, s->own_work_label);
        s->for_each_thread([&](detail::ProfilerThread& th) { th.own_work_label = s->own_work_label; }); // (only this one yet)
    }
    detail::add_live_profiler(s.get());
    detail::install_profiler_handlers_once(o.flush_on_fatal_signals);
}

/// Per counter: what one scope adds to its parent, and what an empty scope records, as medians of rounds of
/// 64 scopes on this thread (its page is discarded meanwhile).
inline std::vector<std::array<double, 2>> Profiler::measure_cost(detail::ProfilerThread& t) {
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

inline void Profiler::write_header(const ProfilerOptions& o, const std::vector<std::string>& warnings,
                                   const std::vector<std::uint32_t>& extra_flags,
                                   const std::vector<std::array<double, 2>>& cost, detail::ProfilerThread& t) {
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
    text(pf::Tag::cpu, recorded_cpu());
    text(pf::Tag::kernel, kernel_release());
    if (emulated_pmu()) text(pf::Tag::emulator, recorded_emulator()); // pmc emulate's word: the program cannot ask QEMU
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
        const EventSpec spec = t.event_of(i);
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
    if (shared_->own_work_label != 0) field(pf::Tag::own_work_label, &shared_->own_work_label, 4);
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

// ---- the close -------------------------------------------------------------------------------------------------

inline Profiler& Profiler::operator=(Profiler&& o) noexcept {
    if (this != &o) {
        close();
        shared_ = std::move(o.shared_);
    }
    return *this;
}

inline void Profiler::close() noexcept {
    if (!shared_) return;
    auto& s = *shared_;
    detail::remove_live_profiler(&s);
    if (::getpid() != s.pid) { // a fork() child: nothing of its parent's recording is its to write, flush or lock
        if (s.fd >= 0) ::close(s.fd); // (its copy; fork's handler closed it already, if it ran)
        s.fd = -1;
        if (detail::profiler_tls.generation == s.generation) detail::profiler_tls = {};
        shared_.reset();
        return;
    }
    // Registrations first: from `closing` on, a thread that begins registering records nothing; one begun before
    // is waited for (bounded), so that it is in the end record. No lock: a registration takes none.
    s.closing.store(true, std::memory_order_seq_cst);
    const std::uint32_t begun = s.next_thread.load(std::memory_order_seq_cst);
    bool registering = false;
    {
        timespec start{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        while (s.registered.load(std::memory_order_acquire) < begun) {
            if (detail::profiler_elapsed_ns(start) > 2000000000L) {
                registering = true; // still under way: treated as a thread recording (the file is frozen for it)
                break;
            }
            ::sched_yield();
        }
    }
    bool others_recording = registering;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        const auto me = static_cast<pid_t>(::syscall(SYS_gettid));
        s.for_each_thread([&](detail::ProfilerThread& t) {
            others_recording = others_recording || (t.tid != me && !t.discard.load(std::memory_order_relaxed));
        });
        if (others_recording) {
            // Threads that have not ended may still be recording (a static Profiler destroyed by exit() while
            // threads run): their pages are copied as committed, never reset under them, as at exit(); what they
            // record from now on is not written (the file is frozen), and the end record counts what was.
            (void)s.end_while_recording(profile_format::EndHow::closed, 0);
        } else {
            // Only this thread records; the others ended (or began registering after `closing`: they write nothing,
            // and their pages are theirs: not touched).
            s.for_each_thread([&](detail::ProfilerThread& t) {
                if (t.tid == me || !t.discard.load(std::memory_order_relaxed)) t.flush(t.tid == me, true);
            });
            s.write_waiting_strings(); // labels no page named yet
            if (!s.frozen.load()) { // (after exit()'s end record, nothing more is written)
                // Frozen before the end record: a label() or a late thread's write after this one is refused.
                s.frozen.store(true, std::memory_order_seq_cst);
                (void)s.wait_for_writers(100000000L);
                s.write_end_record(profile_format::EndHow::closed, 0, [](detail::ProfilerThread& t) {
                    return std::pair<std::uint32_t, std::uint32_t>{t.sequence, t.thread_pages.load()};
                });
                s.ended.store(true, std::memory_order_release);
            }
        }
        s.closed.store(true, std::memory_order_release);
        if (s.write_errors.load() > 0)
            std::fprintf(stderr, "pmc profiler: %llu page(s) could not be written to %s (%s): the profile is "
                                 "incomplete\n",
                         static_cast<unsigned long long>(s.write_errors.load()), s.path.c_str(),
                         s.write_error_reason());
        s.release_preallocation();
        // Not while an append may still be under way (one that outlasted the ending's wait): its descriptor's number
        // could be reused by then. The frozen file takes no new ones.
        if (s.wait_for_writers(100000000L)) {
            ::close(s.fd);
            s.fd = -1;
        }
    }
    if (detail::profiler_tls.generation == s.generation) detail::profiler_tls = {};
    // shared_ is left for the destructor's (or the move's) release, never nulled here: threads still recording, or
    // registering now (a static Profiler destroyed by exit()), read it (scope(), local()). Their states stay alive:
    // each thread's exit hook holds the shared state.
}

// ---- for tests -------------------------------------------------------------------------------------------------

namespace detail {
/// For tests: the lock that labels and closing take (the recording path and a thread's registration never do).
struct ProfilerTestAccess {
    static std::mutex& mutex(Profiler& p) { return p.shared_->mutex; }
    static ProfilerShared& shared(Profiler& p) { return *p.shared_; }
};
} // namespace detail

PMC_END_NAMESPACE
