// SPDX-License-Identifier: MIT
// plugin_threads.hpp: the per-thread registry of pmc's QEMU plugin models (plugin_cache.hpp, plugin_branches.hpp).
//
// Each guest thread (a vCPU: a host thread of its own in user mode) feeds a model of its own, with no lock, from
// the plugin's callbacks. The process's total is wanted by another thread (at an exit_group, an execve, a fork),
// while the others still run. So a thread's counts reach other threads only through a copy it publishes under a
// lock of its own: at each system call (where a count read is exact), at its exit, and every `publish_every`
// blocks (cache model) or branches (branch model) in between. A total therefore lacks at most that many of each
// thread that is still running and has made no system call since; a thread that exited is counted in full.
//
// What `Model` provides:
//   Model()                                  built on the thread's first callback (from the plugin's settings)
//   using Counts = ...;                      what it counts, copyable and zero when value-initialised
//   Counts counts() const noexcept;          its counts now (only its own thread calls it)
//   void finish() noexcept;                  completes work in flight before a publication (may be empty)
//   void started() noexcept;                 on its thread, once registered (may be empty)
//   void exiting() noexcept;                 on its thread at its exit, after the last publication (may be empty)
//   static void add(Counts&, const Counts&) and static void subtract(Counts&, const Counts&)
//
// One registry per model type (the thread's pointer is a static member): Registry<Model> is used through its
// static functions.
#pragma once

#include <pthread.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace plugin_threads {

/// One guest thread's model and what it last published.
template <class Model>
struct Thread : Model {
    using Counts = typename Model::Counts;

    /// A model's events (the cache model's blocks, the branch model's branches) between two publications while the
    /// thread runs with no system call: the model counts them and calls publish().
    static constexpr std::uint64_t publish_every = 1024;

    /// By this thread: work in flight completed (its counts are exact here) and published.
    void flush() noexcept {
        this->finish();
        publish();
    }
    __attribute__((noinline)) void publish() noexcept {
        const Counts now = this->counts();
        std::lock_guard<std::mutex> hold(lock_);
        published_ = now;
    }
    /// By any thread: the counts at the last publication.
    Counts published_counts() {
        std::lock_guard<std::mutex> hold(lock_);
        return published_;
    }
    /// In a fork child: a thread that is gone may have held the lock.
    void reset_lock() noexcept { new (&lock_) std::mutex; }

private:
    std::mutex lock_;
    Counts published_{};
};

template <class Model>
class Registry {
public:
    using Counts = typename Model::Counts;
    using Thread = plugin_threads::Thread<Model>;

    /// Once, before any thread runs: the key whose destructor folds an exiting thread into the total. "" or why not.
    static std::string start() {
        if (::pthread_key_create(&exit_key_, thread_exits) != 0) return "no pthread key for the threads' models";
        return "";
    }

    /// The calling thread's model, made on its first call. The fast path is one load of an initial-exec TLS
    /// pointer (a dlopen'd library's default TLS model would call __tls_get_addr) and a test.
    static Thread& this_thread() {
        Thread* t = current_;
        return __builtin_expect(t != nullptr, 1) ? *t : new_thread();
    }
    /// The calling thread's model, or null before its first call of this_thread().
    static Thread* this_thread_if_made() noexcept { return current_; }
    /// Before each system call: the thread's counts, exact there, published.
    static void at_syscall() noexcept {
        if (Thread* t = current_) t->flush();
    }

    /// The process's counts since the last call (or, in a fork child, since the fork): exited threads' in full,
    /// live ones' as last published (the calling thread's flushed first). Called at an exit or an execve.
    static Counts since_last_report() {
        std::lock_guard<std::mutex> hold(lock_);
        Counts total = exited_;
        for (Thread* t : live_) {
            if (t == current_) t->flush();
            Model::add(total, t->published_counts());
        }
        Counts since = total;
        Model::subtract(since, reported_);
        reported_ = total;
        return since;
    }

    /// What since_last_report() would return now, without taking it (the totals stay for the next report): for
    /// the progress file at each system call, after the calling thread's publication.
    static Counts peek_since_last_report() {
        std::lock_guard<std::mutex> hold(lock_);
        Counts total = exited_;
        for (Thread* t : live_) Model::add(total, t->published_counts());
        Model::subtract(total, reported_);
        return total;
    }

    /// In a fork child: only the forking thread lives on, and what it counted belongs to the parent's report.
    static void in_fork_child() {
        new (&lock_) std::mutex;
        live_.clear();
        exited_ = Counts{};
        reported_ = Counts{};
        if (Thread* t = current_) {
            t->reset_lock();
            live_.push_back(t);
            reported_ = t->published_counts(); // published at the fork's system call
        }
    }

    /// The live thread after `t` in the registry's list (the plugin's planted fault that hands a thread another's
    /// counts, tests/emulate).
    static Thread& next_live(Thread& t) {
        std::lock_guard<std::mutex> hold(lock_);
        for (std::size_t i = 0; i < live_.size(); ++i)
            if (live_[i] == &t) return *live_[(i + 1) % live_.size()];
        return t;
    }

private:
    static void thread_exits(void* state) {
        auto* t = static_cast<Thread*>(state);
        t->flush();
        t->exiting();
        {
            std::lock_guard<std::mutex> hold(lock_);
            Model::add(exited_, t->published_counts());
            for (auto& p : live_)
                if (p == t) {
                    p = live_.back();
                    live_.pop_back();
                    break;
                }
        }
        current_ = nullptr;
        delete t;
    }

    __attribute__((noinline)) static Thread& new_thread() {
        auto* t = new Thread();
        {
            std::lock_guard<std::mutex> hold(lock_);
            live_.push_back(t);
        }
        ::pthread_setspecific(exit_key_, t);
        current_ = t;
        t->started();
        return *t;
    }

    static inline __attribute__((tls_model("initial-exec"))) thread_local Thread* current_ = nullptr;
    static inline pthread_key_t exit_key_;
    static inline std::mutex lock_;
    static inline std::vector<Thread*> live_;
    static inline Counts exited_{};
    static inline Counts reported_{}; ///< already in a report (at an execve, or the parent's at a fork)
};

} // namespace plugin_threads
