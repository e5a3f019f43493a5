// SPDX-License-Identifier: MIT
// pmc/detail/profiler_exit.hpp: how a pmc::Profiler's data gets out when recording ends without its close: at a
// thread's exit (a thread_local's destructor writes the thread's last page and closes its counters), at exit() (an
// atexit handler) and at the fatal signals left at their default (a handler that writes every live profiler's
// committed events, then lets the signal end the process as it would have).
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/profiler_shared.hpp>
#include <pmc/detail/profiler_thread.hpp>

#include <signal.h>

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

// ---- a thread's exit -------------------------------------------------------------------------------------------

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

} // namespace detail
PMC_END_NAMESPACE
