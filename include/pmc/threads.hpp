// SPDX-License-Identifier: MIT
// pmc/threads.hpp: counting a pool of threads.
//
// A perf counter counts the thread that opened it. Two ways to count several threads:
//
//  - pmc::PerThread: each thread that calls local() gets its own counter (opened on first use, read with rdpmc
//    like any pmc::Counter); total() adds up every thread's count, reading the live threads' counters with read()
//    and remembering the final count of threads that have exited.
//
//        pmc::PerThread faults{"page-faults"};
//        pool.run([&] { auto iv = faults.local().interval(); work(); });
//        std::uint64_t all = faults.total();
//
//  - OpenOptions{.count_children = true} on a Counter or Group (perf's inherit): one counter that also counts the
//    threads and processes created after it was opened; the kernel adds their counts. Read with read().
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

PMC_BEGIN_NAMESPACE

namespace detail {
/// Reads a counter's kernel count with read(2), from any thread: the kernel returns the count of the thread that
/// opened it. Used for totals across threads, never for a thread's own reads.
struct CrossThreadRead {
    template <class C>
    static std::uint64_t read(const C& counter) {
        return read_with_syscall(counter.core_).value;
    }
};
} // namespace detail

/// One counter per thread, summed on request. Each thread's counter closes (fd and control page) when that thread
/// exits or when the PerThread object is destroyed, whichever comes first. So the object may be destroyed before
/// the threads that used it, but only once none of them is using its counters: the references local() returned
/// must not be used after that. What stays behind in such a thread is a few dozen bytes of bookkeeping, freed at
/// its next first call of local() on any PerThread, or at its exit.
template <class C = Counter>
class PerThread {
public:
    explicit PerThread(std::string event, OpenOptions options = {})
        : registry_(std::make_shared<Registry>()), event_(std::move(event)), options_(options) {
        auto spec = try_parse_event(event_, options_.sysfs_root);
        if (!spec) raise(spec.failure());
        if (spec->kind == EventKind::tsc || spec->kind == EventKind::wall_time)
            raise(make_failure(EINVAL, "pmc::PerThread counts a perf event per thread; '" + event_ +
                                           "' is a clock, the same for every thread"));
    }
    PerThread(const PerThread&) = delete;
    PerThread& operator=(const PerThread&) = delete;
    /// Closes every thread's counter now (their fds and control pages), not at each thread's exit.
    ~PerThread() {
        std::vector<C> closing; // destroyed after the lock is released
        std::lock_guard<std::mutex> lock(registry_->mutex);
        registry_->closed.store(true, std::memory_order_release);
        for (Slot* s : registry_->live) closing.push_back(std::move(s->counter));
        registry_->live.clear();
    }

    /// This thread's counter, opened on its first call in this thread (throws pmc::error if it cannot be).
    C& local() {
        auto& slots = thread_slots();
        auto it = slots.find(registry_.get());
        if (it != slots.end()) return it->second->counter;
        // First use of this PerThread here: drop what destroyed PerThreads left in this thread. (A live Slot keeps
        // its Registry alive, so a new Registry never reuses the address of one still in the map.)
        for (auto i = slots.begin(); i != slots.end();)
            i = i->second->registry->closed.load(std::memory_order_acquire) ? slots.erase(i) : std::next(i);
        auto slot = std::make_unique<Slot>(C(event_, options_), registry_);
        C& counter = slot->counter;
        {
            std::lock_guard<std::mutex> lock(registry_->mutex);
            registry_->live.push_back(slot.get());
            ++registry_->threads;
        }
        slots.emplace(registry_.get(), std::move(slot));
        return counter;
    }

    /// Every thread's count since its first local(): live threads read now (one read() each), exited threads as
    /// they left.
    std::uint64_t total() const {
        std::lock_guard<std::mutex> lock(registry_->mutex);
        std::uint64_t sum = registry_->retired;
        for (const Slot* s : registry_->live) sum += detail::CrossThreadRead::read(s->counter) - s->start;
        return sum;
    }

    /// How many threads have used it.
    std::size_t threads() const {
        std::lock_guard<std::mutex> lock(registry_->mutex);
        return registry_->threads;
    }

private:
    struct Slot;
    struct Registry {
        std::mutex mutex;
        std::atomic<bool> closed{false}; ///< the PerThread was destroyed: its counters are closed
        std::vector<Slot*> live;
        std::uint64_t retired = 0;
        std::size_t threads = 0;
    };
    struct Slot {
        Slot(C c, std::shared_ptr<Registry> r) : counter(std::move(c)), start(counter.read()), registry(std::move(r)) {}
        ~Slot() {
            // Runs in the owning thread (at its exit, or when local() drops a closed PerThread's slot): its last
            // read is its own. Under the lock: ~PerThread may be closing the counter from another thread.
            std::lock_guard<std::mutex> lock(registry->mutex);
            if (registry->closed.load(std::memory_order_relaxed)) return; // the counter is closed already
            std::uint64_t final_count = start;
#if !defined(BOOST_NO_EXCEPTIONS)
            try {
                final_count = counter.read();
            } catch (const error&) { // a copy in a fork() child: nothing of its own to add
            }
#else
            final_count = counter.read();
#endif
            registry->retired += final_count - start;
            auto& live = registry->live;
            live.erase(std::remove(live.begin(), live.end(), this), live.end());
        }
        C counter;
        std::uint64_t start;
        std::shared_ptr<Registry> registry;
    };

    static std::unordered_map<const Registry*, std::unique_ptr<Slot>>& thread_slots() {
        thread_local std::unordered_map<const Registry*, std::unique_ptr<Slot>> slots;
        return slots;
    }

    std::shared_ptr<Registry> registry_;
    std::string event_;
    OpenOptions options_;
};

PMC_END_NAMESPACE
