// SPDX-License-Identifier: MIT
// pmc/detail/profiler_exit.hpp: how a pmc::Profiler's data gets out when recording ends without its close: at a
// thread's exit (a thread_local's destructor writes the thread's last page and closes its counters), at exit() (an
// atexit handler) and at the fatal signals left at their default (a handler that writes every live profiler's
// committed events, then lets the signal end the process as it would have); and fork(): a child that does not
// exec inherits every profiler's lock consistent and unlocked (pthread_atfork), holds none of its parent's files, and
// never writes, flushes or waits on its parent's recording (docs/profiling.md, "Process shapes").
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/profiler_shared.hpp>
#include <pmc/detail/profiler_thread.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE
namespace detail {

// ---- exit() and the fatal signals ------------------------------------------------------------------------------

/// Live profilers, for exit() and the fatal signals: blocks of slots chained from a static first one. A block is
/// added (under live_profilers_mutex) when every slot is taken and never freed, so that the signal handler walks
/// them with no lock, and a 17th profiler is covered by the fork lock and the exit/signal flush like the first.
struct LiveProfilers {
    std::array<std::atomic<ProfilerShared*>, 16> slots{};
    std::atomic<LiveProfilers*> next{nullptr};
};
inline LiveProfilers& live_profilers() {
    static LiveProfilers first;
    return first;
}
/// f(slot) for every slot of every block (async-signal-safe: atomic loads only).
template <class F>
void for_each_live_slot(F&& f) noexcept {
    for (LiveProfilers* b = &live_profilers(); b; b = b->next.load(std::memory_order_acquire))
        for (auto& slot : b->slots) f(slot);
}

/// Guards adding and removing live profilers against fork()'s handlers below (which lock each one's mutex): never
/// taken while a profiler's own mutex is held. The signal handler does not take it.
inline std::mutex& live_profilers_mutex() {
    static std::mutex m;
    return m;
}

inline void add_live_profiler(ProfilerShared* s) {
    std::lock_guard<std::mutex> lock(live_profilers_mutex());
    LiveProfilers* b = &live_profilers();
    for (;; b = b->next.load(std::memory_order_relaxed)) {
        for (auto& slot : b->slots) {
            ProfilerShared* expected = nullptr;
            if (slot.compare_exchange_strong(expected, s)) return;
        }
        if (!b->next.load(std::memory_order_relaxed)) break;
    }
    auto* more = new LiveProfilers; // never freed: the signal handler may be walking it
    more->slots[0].store(s, std::memory_order_relaxed);
    b->next.store(more, std::memory_order_release);
}

inline void remove_live_profiler(ProfilerShared* s) noexcept {
    std::lock_guard<std::mutex> lock(live_profilers_mutex());
    for_each_live_slot([s](std::atomic<ProfilerShared*>& slot) {
        ProfilerShared* expected = s;
        slot.compare_exchange_strong(expected, nullptr);
    });
}

/// fork() in a threaded program: the child has one thread, and a lock another thread held at the fork stays held
/// there for ever. Before the fork every live profiler's lock is taken (waiting for a label() under way: short),
/// then its strings lock (which a page write takes while labels wait to be written), so the child gets their data consistent; after it, parent and child release them. The child also
/// closes its copies of the profiles' descriptors: it never holds its parent's file (nor, through it, the file's
/// lock) and never writes into it.
inline void profiler_fork_prepare() noexcept {
    live_profilers_mutex().lock();
    for_each_live_slot([](std::atomic<ProfilerShared*>& slot) {
        if (ProfilerShared* s = slot.load(std::memory_order_acquire)) {
            s->mutex.lock();
            s->strings_mutex.lock(); // (a page write that is writing the waiting strings)
        }
    });
}
inline void profiler_fork_parent() noexcept {
    for_each_live_slot([](std::atomic<ProfilerShared*>& slot) {
        if (ProfilerShared* s = slot.load(std::memory_order_acquire)) {
            s->strings_mutex.unlock();
            s->mutex.unlock();
        }
    });
    live_profilers_mutex().unlock();
}
/// fork() children this process descends from, as far as fork's handler saw (a lock of the C API, held by another
/// thread at a fork, is left alone in the child: src/pmc_c.cpp).
inline std::atomic<std::uint32_t> profiler_forks{0};

inline void profiler_fork_child() noexcept {
    profiler_forks.fetch_add(1, std::memory_order_relaxed);
    for_each_live_slot([](std::atomic<ProfilerShared*>& slot) {
        if (ProfilerShared* s = slot.load(std::memory_order_acquire)) {
            if (s->fd >= 0 && s->pid != ::getpid()) {
                ::close(s->fd);
                s->fd = -1;
            }
            s->strings_mutex.unlock();
            s->mutex.unlock();
        }
    });
    live_profilers_mutex().unlock();
}

inline void flush_live_profilers(int signal) noexcept {
    for_each_live_slot([signal](std::atomic<ProfilerShared*>& slot) {
        if (ProfilerShared* s = slot.load(std::memory_order_acquire)) s->flush_all_committed(signal);
    });
}

inline constexpr int profiler_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGINT, SIGTERM, SIGQUIT, SIGHUP};

// The handler realigns its stack on entry (x86-64): QEMU's user mode (7.2) starts a guest's handler with the stack 8
// bytes off the ABI's 16, and the compiler's aligned SSE spills (movaps) would fault there, under `pmc emulate`.
#if PMC_ARCH_X86_64
#define PMC_DETAIL_SIGNAL_HANDLER __attribute__((force_align_arg_pointer))
#else
#define PMC_DETAIL_SIGNAL_HANDLER
#endif

extern "C" inline PMC_DETAIL_SIGNAL_HANDLER void pmc_profiler_on_signal(int sig) {
    const int saved = errno;
    flush_live_profilers(sig);
    // SA_RESETHAND put the default back: raised again (or, for a fault, the instruction re-executed), it ends the
    // process as it would have without the profiler.
    errno = saved;
    ::raise(sig);
}

inline void install_profiler_handlers_once(bool signals) {
    static std::once_flag exit_once;
    std::call_once(exit_once, [] {
        std::atexit([] { flush_live_profilers(0); });
        ::pthread_atfork(profiler_fork_prepare, profiler_fork_parent, profiler_fork_child);
    });
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

// ---- a thread's exit -------------------------------------------------------------------------------------------

/// Set (and never cleared) once the thread's exit hook below has run: a scope recorded later, by another pthread
/// key's destructor, must not reach the hook's destroyed list. Trivially destructible, so valid until the end.
inline thread_local bool profiler_thread_ended = false;

/// At a thread's exit: writes its page and closes its counters, for every profiler it recorded into. A scope
/// recorded after this (by another pthread key's destructor) still finds its state, owned by the profiler, but is
/// discarded: the thread has written its last page.
struct ProfilerThreadExit {
    std::vector<std::pair<std::shared_ptr<ProfilerShared>, ProfilerThread*>> entries;
    ~ProfilerThreadExit() {
        profiler_thread_ended = true;
        for (auto& [shared, t] : entries) {
            if (::getpid() != shared->pid) { // a fork() child: its parent's recording is not its to end (no lock)
                t->broken = true;
                t->discard = true;
                continue;
            }
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

/// The calling thread's exit hook, made at its first registration and run by a pthread key's destructor at its
/// exit (not at exit(): the main thread's recording ends with exit()'s flush). Not a thread_local object with a
/// destructor: glibc registers each under ld.so's global lock (__cxa_thread_atexit_impl), so a thread that
/// registered while another did ran other code, and under pmc emulate --branches its predictor carried that into
/// its first intervals. Setting a key's value takes no lock. Trivially destructible.
inline thread_local ProfilerThreadExit* profiler_thread_exit_hook = nullptr;

/// The key whose destructor runs a thread's exit hook (made once, by the first profiler's start).
inline pthread_key_t profiler_exit_key() {
    static const pthread_key_t key = [] {
        pthread_key_t k{};
        if (::pthread_key_create(&k, [](void* hook) {
                delete static_cast<ProfilerThreadExit*>(hook);
                profiler_thread_exit_hook = nullptr;
            }) != 0)
            raise(make_failure(EAGAIN, "pmc profiler: no pthread key left for the threads' exit hook"));
        return k;
    }();
    return key;
}

inline ProfilerThreadExit& profiler_thread_exit() {
    if (!profiler_thread_exit_hook) {
        auto hook = std::make_unique<ProfilerThreadExit>();
        if (::pthread_setspecific(profiler_exit_key(), hook.get()) != 0)
            raise(make_failure(ENOMEM, "pmc profiler: cannot set the thread's exit hook (pthread_setspecific)"));
        profiler_thread_exit_hook = hook.release();
    }
    return *profiler_thread_exit_hook;
}

} // namespace detail
PMC_END_NAMESPACE
