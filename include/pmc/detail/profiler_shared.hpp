// SPDX-License-Identifier: MIT
// pmc/detail/profiler_shared.hpp: what every thread of one pmc::Profiler shares: the file, appended to one whole
// page per write(2) (O_APPEND), with blocks reserved ahead of its end and given back at the end; the labels (under one
// mutex, which the recording path never takes); the list of threads (each links itself in, with no lock); the strings
// waiting to be written (under a second lock, which a page write takes only while some wait); the end record; and the flush of
// every thread's committed events at exit() or a fatal signal (async-signal-safe). At the end, ProfilerThread::flush
// (detail/profiler_thread.hpp): a thread writing out its own page.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/profiler_thread.hpp>
#include <pmc/profile_format.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE
namespace detail {

/// Appends (WriteGuards) under way on this thread: a fatal signal's handler, taken in the middle of one, does not
/// wait for its own thread's append to finish (it never will: the handler ends the process).
inline thread_local std::uint32_t profiler_appends_here = 0;

/// Nanoseconds since `start` (CLOCK_MONOTONIC). Async-signal-safe.
inline long profiler_elapsed_ns(const timespec& start) noexcept {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec);
}

/// Memory for what a profiler's threads share (the labels, the thread list, the end record's room, a strings page),
/// mapped for the profiler and given back when it ends: never a thread's heap. glibc gives each thread an arena of its
/// own, and an allocation made there for pmc by whichever thread came first (interned a label, grew the thread list)
/// changed what that thread's own mallocs cost afterwards: under an exact counter, runs of a threaded program that
/// allocates differed with the threads' order. Bump allocation; nothing is freed before the end (a container's old
/// buffer, when it grows, is dropped). Used under ProfilerShared::mutex only.
class MappedArena final : public std::pmr::memory_resource {
public:
    MappedArena() = default;
    MappedArena(const MappedArena&) = delete;
    MappedArena& operator=(const MappedArena&) = delete;
    ~MappedArena() override {
        while (chunk_) {
            Chunk* previous = chunk_->previous;
            ::munmap(chunk_, chunk_->bytes);
            chunk_ = previous;
        }
    }

private:
    struct Chunk {
        Chunk* previous;
        std::size_t bytes;
    };
    void* do_allocate(std::size_t bytes, std::size_t align) override {
        std::size_t at = (used_ + align - 1) & ~(align - 1);
        if (!chunk_ || at + bytes > chunk_->bytes) {
            const std::size_t want = std::max<std::size_t>(64 * 1024, (sizeof(Chunk) + align + bytes + 4095) & ~std::size_t{4095});
            void* m = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) throw std::bad_alloc();
            chunk_ = new (m) Chunk{chunk_, want};
            at = (sizeof(Chunk) + align - 1) & ~(align - 1);
        }
        used_ = at + bytes;
        return reinterpret_cast<unsigned char*>(chunk_) + at;
    }
    void do_deallocate(void*, std::size_t, std::size_t) override {}
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

    Chunk* chunk_ = nullptr;
    std::size_t used_ = 0;
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
    std::mutex mutex; ///< labels, closing (never a thread's registration: link_thread)
    MappedArena memory; ///< what the members below allocate (declared first: destroyed after them)
    std::pmr::unordered_map<std::string_view, std::uint32_t> labels{&memory}; ///< keys: texts copied into `memory`
    std::pmr::vector<unsigned char> strings_page{&memory}; ///< a string longer than a strings page, written alone
    /// Strings interned and not yet written, packed into one strings page (header space + `waiting_capacity`
    /// payload bytes, in `memory`): written when full, before any events or thread page goes out (an event can
    /// only name a string interned before it), and at the end. One page for many labels instead of a 32-byte
    /// header each. Appended to and written under `strings_mutex` (taken under `mutex`, never the other way);
    /// `strings_waiting` (payload bytes, low 32 bits; strings, high) is published after the bytes, so that the
    /// ending (exit(), a fatal signal) can write them without the lock.
    std::mutex strings_mutex;
    unsigned char* waiting_page = nullptr;
    std::uint32_t waiting_capacity = 0;
    std::atomic<std::uint64_t> strings_waiting{0};
    std::uint32_t next_label = 1;
    std::array<bool, profile_format::max_counters> time_counter{}; ///< per counter: a time (ProfilerThread::time_counter)
    std::uint32_t own_work_label = 0; ///< the own-work marks' label (a time primary), else 0
    /// The threads, newest first, each linked in by its own registration with no lock (link_thread) and owned
    /// here until the profiler ends. Walked with next_of() (the signal handler too).
    std::atomic<ProfilerThread*> head{nullptr};
    std::atomic<std::uint32_t> next_thread{0}; ///< the next registering thread's number (registrations begun)
    /// Registrations finished (linked, thread page written, the thread's exit hook holding the profiler): close()
    /// waits until every registration begun before `closing` has finished, so that the thread is in its end record.
    std::atomic<std::uint32_t> registered{0};
    /// Set by close() first: a thread that begins registering after it records nothing (its pages are dropped) and
    /// writes no thread page, so that nothing of it lands after the end record.
    std::atomic<bool> closing{false};
    std::atomic<bool> closed{false};
    bool header_written = false; ///< the constructor's thread page waits for the header (under `mutex`)
    std::atomic<std::uint32_t> strings_pages{0}; ///< strings pages written (the next one's number; `strings_mutex`)
    std::atomic<std::uint32_t> strings{0};       ///< strings written
    std::atomic<std::uint32_t> end_pages{0};     ///< end records written (a later one supersedes)
    /// Room for the end record (header, fixed part, 12 bytes per thread) for end_buf_threads threads, reserved at
    /// the start: the signal handler writes it without allocating; more threads than that map a larger one then.
    std::atomic<unsigned char*> end_buf{nullptr};
    std::size_t end_buf_threads = 0;
    std::atomic<std::uint64_t> write_errors{0};
    std::atomic<int> last_errno{0}; ///< the last failed write's errno, or one of the reasons below (no errno)
    static constexpr int short_write = -1;   ///< the write wrote less than asked, without an error
    static constexpr int page_held = -2;     ///< a thread's page stayed claimed past the wait: left unwritten
    ProfilerShared() = default;
    ProfilerShared(const ProfilerShared&) = delete;
    ProfilerShared& operator=(const ProfilerShared&) = delete;
    ~ProfilerShared() {
        for (ProfilerThread* t = head.load(std::memory_order_acquire); t;) {
            ProfilerThread* older = next_of(*t);
            delete t;
            t = older;
        }
    }

    /// Links a registering thread in, as the newest. No lock and no loop: one exchange, then the link to the older
    /// threads. A lock here (or a compare-exchange retried) ran other code on a thread that registered while another
    /// did: under pmc emulate --branches, its predictor then entered the first intervals in another state, and a
    /// label's modelled branch-misses changed by a few between runs of the same program (Docs: emulated-pmu.md).
    /// Signals are blocked between the exchange and the link: a fatal signal's handler (or exit() called from one)
    /// run there on this thread would find the older threads out of reach, and end the profile without them.
    /// (Two system calls per thread, the same on every thread.)
    void link_thread(ProfilerThread& t) noexcept {
        sigset_t all, old;
        ::sigfillset(&all);
        const bool masked = ::pthread_sigmask(SIG_BLOCK, &all, &old) == 0;
        t.next.store(linking(), std::memory_order_relaxed);
        ProfilerThread* older = head.exchange(&t, std::memory_order_acq_rel);
        t.next.store(older, std::memory_order_release);
        if (masked) ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    /// The thread linked in before `t` (nullptr: none, or out of reach: cut_after(t)). Between link_thread's two
    /// stores, waits for the second (bounded), unless `t` is the calling thread itself (link_thread blocks signals
    /// there, so only a fault could bring a handler there) or the process is a fork() child. Async-signal-safe.
    ProfilerThread* next_of(const ProfilerThread& t) const noexcept {
        ProfilerThread* n = t.next.load(std::memory_order_acquire);
        if (n != linking()) return n;
        if (::getpid() != pid) return nullptr; // a fork() child: the thread that was linking it is not here
        if (t.tid == static_cast<pid_t>(::syscall(SYS_gettid))) return nullptr;
        timespec start{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        while ((n = t.next.load(std::memory_order_acquire)) == linking() && profiler_elapsed_ns(start) < 1000000000L)
            ::sched_yield();
        return n == linking() ? nullptr : n;
    }
    /// Whether the walk stopped at `t` with older threads out of reach (next_of(t) gave nullptr while `t` was still
    /// being linked): whatever was walked left them out.
    static bool cut_after(const ProfilerThread& t) noexcept {
        return t.next.load(std::memory_order_acquire) == linking();
    }
    /// f(thread) for every thread linked in, newest first.
    template <class F>
    void for_each_thread(F&& f) const {
        for (ProfilerThread* t = head.load(std::memory_order_acquire); t; t = next_of(*t)) f(*t);
    }
    /// A `next` being linked (never dereferenced).
    static ProfilerThread* linking() noexcept {
        static char marker;
        return reinterpret_cast<ProfilerThread*>(&marker);
    }

    /// Counts a write that failed, and why (an errno, or short_write / page_held). Async-signal-safe.
    void note_write_error(int why) noexcept {
        last_errno.store(why, std::memory_order_relaxed);
        write_errors.fetch_add(1, std::memory_order_relaxed);
    }
    /// What the last failed write's reason means, for a person.
    const char* write_error_reason() const noexcept {
        const int why = last_errno.load(std::memory_order_relaxed);
        if (why == short_write) return "a write stopped short (the disk full, or the file's size limit)";
        if (why == page_held) return "a thread was still writing its page when the profile ended";
        return std::strerror(why);
    }

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
    std::atomic<pid_t> ending_tid{0}; ///< the thread that claimed it

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
        WriteGuard(ProfilerShared& shared, std::size_t bytes, bool reserve_ahead = true) noexcept {
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
            ++profiler_appends_here; // after counting in: never more than this thread's share of `writers`
            std::atomic_signal_fence(std::memory_order_seq_cst);
            if (reserve_ahead && shared.prealloc_chunk != 0) shared.preallocate(bytes);
        }
        ~WriteGuard() {
            if (!s) return;
            std::atomic_signal_fence(std::memory_order_seq_cst);
            --profiler_appends_here; // before counting out
            std::atomic_signal_fence(std::memory_order_seq_cst);
            s->writers.fetch_sub(1, std::memory_order_release);
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
        if (!wait_for_writers(20000000L)) {
            releasing.store(false, std::memory_order_release);
            return;
        }
        allocated.store(prealloc_off, std::memory_order_relaxed);
        struct stat st {};
        if (preallocated.exchange(false, std::memory_order_relaxed) && ::fstat(fd, &st) == 0)
            (void)!::ftruncate(fd, st.st_size);
        releasing.store(false, std::memory_order_release);
    }

    /// Waits, at most `ns`, until no other thread is appending (an append on this thread, interrupted by the signal
    /// being handled, never finishes: not waited for). Async-signal-safe.
    bool wait_for_writers(long ns) noexcept {
        timespec start{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        while (writers.load(std::memory_order_seq_cst) > profiler_appends_here) {
            if (profiler_elapsed_ns(start) > ns) return false;
            ::sched_yield();
        }
        return true;
    }

    /// Writes a whole buffer with O_APPEND (one write(2) per page keeps pages whole). `reserve_ahead`: may reserve
    /// blocks ahead (preallocate), which whichever writer crosses the reserve's middle does.
    bool write_all(const unsigned char* p, std::size_t n, bool reserve_ahead = true) noexcept {
        if (::getpid() != pid) return false; // a fork() child: its copies of the parent's pages would clash with them
        WriteGuard guard(*this, n, reserve_ahead);
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
                note_write_error(got < 0 ? errno : short_write);
                return;
            }
            p += got;
            n -= static_cast<std::size_t>(got);
        }
    }

    /// Interns `name` as label `id`: its text copied into `memory`, and the string added to the strings waiting to
    /// be written (under `mutex`).
    void define_label(std::string_view name, std::uint32_t id) {
        char* text = static_cast<char*>(memory.allocate(std::max<std::size_t>(name.size(), 1), 1));
        std::memcpy(text, name.data(), name.size());
        labels.emplace(std::string_view(text, name.size()), id);
        if (!waiting_page) {
            waiting_capacity = page_bytes;
            waiting_page = static_cast<unsigned char*>(
                memory.allocate(profile_format::page_header_bytes + waiting_capacity, 8));
        }
        const auto len = static_cast<std::uint32_t>(name.size());
        const std::size_t entry = 8 + std::size_t{len};
        std::lock_guard<std::mutex> lock(strings_mutex);
        std::uint64_t c = strings_waiting.load(std::memory_order_relaxed);
        if (static_cast<std::uint32_t>(c) + entry > waiting_capacity) {
            write_waiting_strings_locked();
            c = strings_waiting.load(std::memory_order_relaxed);
            if (c != 0) return; // still full: the profile is ending, and nothing is written any more
        }
        if (entry > waiting_capacity) { // longer than a page: a page of its own (no other string waits now)
            strings_page.resize(profile_format::page_header_bytes + entry);
            unsigned char* page = strings_page.data();
            put_string(page + profile_format::page_header_bytes, id, name);
            write_strings_page(page, static_cast<std::uint32_t>(entry), 1);
            return;
        }
        put_string(waiting_page + profile_format::page_header_bytes + static_cast<std::uint32_t>(c), id, name);
        strings_waiting.store(c + entry + (std::uint64_t{1} << 32), std::memory_order_release);
    }

    /// Writes the strings waiting, if any, so that a page written next may name them. A lock only while some wait
    /// (labels are interned once each: rare).
    void write_waiting_strings() noexcept {
        if (strings_waiting.load(std::memory_order_acquire) == 0) return;
        std::lock_guard<std::mutex> lock(strings_mutex);
        write_waiting_strings_locked();
    }

    /// The same under `strings_mutex`. Emptied within the append's WriteGuard: an ending that waited for the
    /// appends under way finds them either written and gone or still waiting (it writes them then).
    void write_waiting_strings_locked() noexcept {
        const std::uint64_t c = strings_waiting.load(std::memory_order_relaxed);
        if (c == 0 || ::getpid() != pid) return;
        write_strings_page(waiting_page, static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32));
    }

    /// exit() or a fatal signal, once nothing else is appended: writes the strings still waiting, without the lock
    /// (their bytes were published before their count; a label() under way only adds past them). Async-signal-safe.
    void write_waiting_strings_at_end() noexcept {
        const std::uint64_t c = strings_waiting.load(std::memory_order_acquire);
        if (c == 0) return;
        const auto bytes = static_cast<std::uint32_t>(c), count = static_cast<std::uint32_t>(c >> 32);
        unsigned char header[profile_format::page_header_bytes]; // (the page's own header space is the lock's)
        const unsigned char* payload = waiting_page + profile_format::page_header_bytes;
        profile_format::write_page_header(header, profile_format::PageKind::strings, 0,
                                          strings_pages.fetch_add(1, std::memory_order_relaxed), payload, bytes, count);
        iovec parts[2] = {{header, sizeof header}, {const_cast<unsigned char*>(payload), bytes}};
        ssize_t got;
        do got = ::writev(fd, parts, 2);
        while (got < 0 && errno == EINTR);
        if (got != static_cast<ssize_t>(sizeof header + bytes)) note_write_error(got < 0 ? errno : short_write);
        strings.fetch_add(count, std::memory_order_relaxed);
    }

    /// One strings entry: u32 id, u32 length, the bytes.
    static void put_string(unsigned char* at, std::uint32_t id, std::string_view name) noexcept {
        const auto len = static_cast<std::uint32_t>(name.size());
        std::memcpy(at, &id, 4);
        std::memcpy(at + 4, &len, 4);
        if (len) std::memcpy(at + 8, name.data(), len);
    }

    /// Writes a strings page (header space + `bytes` of payload at `page`, `count` strings) under the next strings
    /// page number, and counts it; the waiting page is emptied before the append counts itself out. Nothing when
    /// the profile is ending (the ending writes the waiting strings) or in a fork() child.
    void write_strings_page(unsigned char* page, std::uint32_t bytes, std::uint32_t count) noexcept {
        if (::getpid() != pid) return;
        WriteGuard guard(*this, profile_format::page_header_bytes + bytes);
        if (!guard.allowed) return;
        profile_format::write_page_header(page, profile_format::PageKind::strings, 0,
                                          strings_pages.load(std::memory_order_relaxed),
                                          page + profile_format::page_header_bytes, bytes, count);
        write_raw(page, profile_format::page_header_bytes + bytes);
        strings_pages.fetch_add(1, std::memory_order_relaxed);
        strings.fetch_add(count, std::memory_order_relaxed);
        if (page == waiting_page) strings_waiting.store(0, std::memory_order_release);
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
            note_write_error(errno);
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
    /// A thread page with no interval open names no label, and reserves no blocks: what a thread does to register
    /// or name itself then depends on no other thread (whether labels wait to be written, how much they appended).
    void write_thread_page(ProfilerThread& t, bool last_page = false) {
        if (t.depth > 0) write_waiting_strings(); // its open intervals may name them
        ProfilerThread::InfoBusy busy(t);
        t.read_times();
        if (write_all(t.info_buf.get(), t.finish_info_page(last_page, t.sequence), false))
            t.thread_pages.fetch_add(1, std::memory_order_relaxed);
    }

    /// Makes room in end_buf for `threads` threads (at the start, before any thread registers).
    void reserve_end_record(std::size_t count) {
        if (count <= end_buf_threads) return;
        const std::size_t want = std::max<std::size_t>(2 * end_buf_threads, std::max<std::size_t>(count, 8));
        end_buf.store(static_cast<unsigned char*>(memory.allocate(profile_format::page_header_bytes + 20 + 12 * want, 8)),
                      std::memory_order_release);
        end_buf_threads = want;
    }

    /// Writes the end record: how the profile ended, and per thread the events and thread pages written (`pages`
    /// gives them for a thread). Threads it cannot list (the list cut where a thread was being linked; no memory for
    /// more than end_buf_threads) are counted in its header's thread field and said on stderr: never silently
    /// short. Async-signal-safe.
    template <class Pages>
    void write_end_record(profile_format::EndHow how, std::uint32_t signal, Pages&& pages) noexcept {
        unsigned char* b = end_buf.load(std::memory_order_acquire);
        if (!b) return;
        // The threads linked in by now (one snapshot of the list, walked twice, the second time no further than
        // the first); more than end_buf holds: a larger buffer mapped now (async-signal-safe), else the newest
        // end_buf_threads.
        ProfilerThread* const newest = head.load(std::memory_order_acquire);
        std::size_t threads = 0;
        bool cut = false;
        for (ProfilerThread* t = newest; t;) {
            ++threads;
            ProfilerThread* older = next_of(*t);
            cut = cut || (!older && cut_after(*t));
            t = older;
        }
        std::size_t room = end_buf_threads, mapped = 0;
        if (threads > room) {
            const std::size_t bytes = profile_format::page_header_bytes + 20 + 12 * threads;
            void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m != MAP_FAILED) {
                b = static_cast<unsigned char*>(m);
                room = threads;
                mapped = bytes;
            }
        }
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
        for (ProfilerThread* t = newest; t && n < room && n < threads; ++n) {
            const auto [events, infos] = pages(*t);
            put32(t->index);
            put32(events);
            put32(infos);
            if (n + 1 < threads && n + 1 < room) t = next_of(*t);
        }
        std::memcpy(count_at, &n, 4);
        // Left out: those past the room, and, past a cut, the threads registered that the walk did not reach (an
        // upper bound: a registration under way counts too).
        const std::uint32_t begun = next_thread.load(std::memory_order_acquire);
        const auto walked = static_cast<std::uint32_t>(threads);
        const std::uint32_t left_out =
            (walked - n) + (cut && begun > walked ? begun - walked : 0);
        const auto payload = static_cast<std::uint32_t>(static_cast<std::size_t>(q - b) - profile_format::page_header_bytes);
        profile_format::write_page_header(b, profile_format::PageKind::end, left_out,
                                          end_pages.fetch_add(1, std::memory_order_relaxed),
                                          b + profile_format::page_header_bytes, payload, n);
        write_raw(b, profile_format::page_header_bytes + payload);
        if (mapped) ::munmap(b, mapped);
        if (left_out > 0) say_left_out(left_out, cut);
    }

    /// On stderr, with write(2) only (async-signal-safe): the end record leaves `count` threads out, and why.
    void say_left_out(std::uint32_t count, bool cut) const noexcept {
        char number[16];
        char* p = number + sizeof number;
        std::uint32_t v = count;
        do *--p = static_cast<char>('0' + v % 10);
        while ((v /= 10) != 0);
        const char* parts[] = {
            "pmc profiler: the end record of ", path.c_str(), " leaves out up to ", p, " thread(s) (",
            cut ? "the ending came while a thread was being linked in, on that thread: the threads before it were "
                  "out of reach, and their unwritten pages are lost"
                : "no memory for a larger end record: mmap failed",
            "); the readers report it, and cannot check those threads' pages for losses\n"};
        for (const char* part : parts) {
            const std::size_t len = part == p ? static_cast<std::size_t>(number + sizeof number - p) : std::strlen(part);
            (void)!::write(2, part, len);
        }
    }

    /// exit() or a fatal signal (`signal`, 0 for exit()): writes every thread's committed events, then the calling
    /// thread's thread page with its counters' times and open intervals as of now, then the end record, and gives
    /// back the preallocated blocks. Other threads' times and open intervals stay as of their last thread page
    /// (their thread pages are theirs to write). A page another thread is writing out is not copied (that thread
    /// writes it whole); the calling thread's own page, interrupted while being written, is (see flush_committed).
    /// A fork() child does nothing. Async-signal-safe.
    void flush_all_committed(int signal) noexcept {
        end_while_recording(signal ? profile_format::EndHow::signal : profile_format::EndHow::exit, signal);
    }

    /// flush_all_committed, for `how` (also Profiler::close while other threads still record: a static Profiler
    /// destroyed by exit()). Returns false when another ending had been claimed (and has finished, or did not in 2 s).
    bool end_while_recording(profile_format::EndHow how, int signal) noexcept {
        if (closed.load(std::memory_order_acquire) || ::getpid() != pid) return false;
        const auto me = static_cast<pid_t>(::syscall(SYS_gettid));
        bool first = false;
        if (!ending.compare_exchange_strong(first, true)) {
            // A second exit() or a signal during it. On another thread: let it finish (bounded) before the caller
            // goes on to end the process (a fatal signal re-raised now would cut its end record off).
            timespec start{};
            ::clock_gettime(CLOCK_MONOTONIC, &start);
            while (ending_tid.load(std::memory_order_acquire) != me && !ended.load(std::memory_order_acquire) &&
                   profiler_elapsed_ns(start) < 2000000000L)
                ::sched_yield();
            return false;
        }
        ending_tid.store(me, std::memory_order_release);
        // No other append from now on; the ones under way finish first (bounded; this thread's own, interrupted by
        // this very signal, never will: not waited for).
        frozen.store(true, std::memory_order_seq_cst);
        (void)wait_for_writers(100000000L);
        write_waiting_strings_at_end(); // before the pages that may name them
        for (ProfilerThread* t = head.load(std::memory_order_acquire); t; t = next_of(*t)) {
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
                write_raw(t->info_buf.get(),
                          t->finish_info_page(how == profile_format::EndHow::closed, pages));
                t->thread_pages.fetch_add(1, std::memory_order_relaxed);
            }
        }
        write_end_record(how, static_cast<std::uint32_t>(signal), [](ProfilerThread& t) {
            return std::pair<std::uint32_t, std::uint32_t>{t.exit_pages.load(std::memory_order_relaxed),
                                                           t.thread_pages.load(std::memory_order_relaxed)};
        });
        ended.store(true, std::memory_order_release);
        release_preallocation();
        return true;
    }

    /// Writes a thread's committed events as its current page, without resetting it: if the thread goes on to
    /// write the page itself, readers keep the longer copy (same page number). Claims the page first (page_state
    /// 2), waiting a bounded time while its thread is writing it out. On the calling thread itself (`own`: a fatal
    /// signal that came while it was writing its page, page_state 1) it writes the page as it stands: its own write
    /// will never finish. ProfilerThread::flush empties `committed` before it advances `sequence_seen`, so either
    /// the page is still there under its number (written again if its writev was done: readers keep one copy of a
    /// number) or it is gone and counted. Returns the thread's events pages written, this one included.
    std::uint32_t flush_committed(ProfilerThread& t, bool own) noexcept {
        std::uint32_t expected = 0;
        timespec start{};
        ::clock_gettime(CLOCK_MONOTONIC, &start);
        bool claimed = true;
        while (!t.page_state.compare_exchange_strong(expected, 2, std::memory_order_acquire)) {
            if (own && expected == 1) { // interrupted in its own flush: nobody else touches the page now
                claimed = false;
                break;
            }
            expected = 0;
            if (own || profiler_elapsed_ns(start) > 100000000L) {
                note_write_error(page_held); // its page is its thread's to write
                return t.sequence_seen.load(std::memory_order_relaxed);
            }
            ::sched_yield();
        }
        const std::uint32_t seq = claimed ? t.sequence : t.sequence_seen.load(std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        const std::uint64_t c = t.committed.load(std::memory_order_acquire);
        const auto used = static_cast<std::uint32_t>(c);
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
            if (got != static_cast<ssize_t>(want)) note_write_error(got < 0 ? errno : short_write);
        }
        if (claimed) t.page_state.store(0, std::memory_order_release);
        return seq + (used > 0 ? 1 : 0);
    }
};

// ---- a thread writes out its page ------------------------------------------------------------------------------

inline void ProfilerThread::flush(bool on_own_thread, bool ended) noexcept {
    if (on_own_thread && !defer_mark) write_pending_mark(); // (its page's last record: nothing followed it)
    if (discard.load(std::memory_order_relaxed)) {
        committed.store(0, std::memory_order_release);
        for (auto& v : last) v = 0;
        return;
    }
    shared->write_waiting_strings(); // before a page that may name them
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
    // Emptied before the number advances (a fatal signal's handler on this thread reads them in the other order:
    // it sees the page whole under its number, or gone and counted; see flush_committed).
    committed.store(0, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (used > 0) ++sequence;
    sequence_seen.store(sequence, std::memory_order_relaxed);
    for (auto& v : last) v = 0;
    page_state.store(0, std::memory_order_release);
}

} // namespace detail
PMC_END_NAMESPACE
