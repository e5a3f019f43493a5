// SPDX-License-Identifier: MIT
// DIR/PID.progress: an emulated process's instructions so far, kept by pmc's QEMU plugin at each of its system calls
// and read by pmc only when the process never reported its total (tools/emulate/qemu_plugin.cpp, report=FILE).
//
// Why: QEMU before 8.0 calls no plugin exit callback when a signal ends the program (linux-user's
// dump_core_and_abort restores the host signal's default action and kills itself; QEMU 8.0 added the exit cleanup,
// and with it the callbacks, to that path). Under Debian 12's QEMU 7.2 a Ctrl-C, timeout(1) or kill then left no
// count at all. The plugin stores the process's total in a shared mapping of this file at every system call
// (plain stores, no system call); the page outlives the process, and pmc reads it as a partial count. With the
// models on (cache=on, branches=on) it keeps their counts the same way, so that a killed run keeps them too.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace pmc_progress {

/// "pmcprog3": a file that is one of these, written by a plugin of this layout.
constexpr std::uint64_t magic = 0x33676f7270636d70ULL;

/// Which models' counts a file keeps (Progress::models).
constexpr std::uint64_t has_cache = 1, has_branches = 2;
/// The cache model's counts, in its report line's order: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw LLi LLr LLw.
constexpr int cache_fields = 12;
/// The branch model's: all Bc Bcm Bi Bim.
constexpr int branch_fields = 5;

struct Progress {
    std::uint64_t magic;
    /// The process image's instructions (every thread's, those exited included) at its latest system call, that
    /// call included; what its exit line would have said. 0 again after an execve's report.
    std::atomic<std::uint64_t> instructions;
    /// System calls seen (0: the count is from its start, none made yet).
    std::atomic<std::uint64_t> system_calls;
    /// has_cache | has_branches: the models whose counts follow, as the process's report lines would give them at
    /// that call (every thread's as last published; the calling thread's exact there).
    std::atomic<std::uint64_t> models;
    std::atomic<std::uint64_t> cache[cache_fields];
    std::atomic<std::uint64_t> branches[branch_fields];
    /// Not 0: the process reached its exit (or execve) but its report line could not be written, for this errno
    /// (the counts above are then those of its exit): no signal ended it.
    std::atomic<std::uint64_t> report_errno;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "stores visible to another process through the page");

/// At a system call: the process's total so far (as its exit line would give it) stored in `page`, and the call
/// counted. `live_threads` is how many threads have a live count, stored under `lock` after every change. One (the
/// caller, as in most system-call-heavy programs): no other thread changes the totals, so `own_total()` runs with no
/// lock, which cost ~4 % of `dd bs=1`'s CPU under QEMU 7.2 (docs/emulated-pmu.md). More: `all_total()` runs under
/// `lock`. The call count is an add either way, not a load and a store: a thread that starts at this moment may
/// already take the locked path. (tests/models/plugin_progress_threads.cpp: threads starting and exiting.)
template <class OwnTotal, class AllTotal>
void note(Progress& page, const std::atomic<unsigned>& live_threads, std::mutex& lock, OwnTotal own_total,
          AllTotal all_total) {
    if (live_threads.load(std::memory_order_acquire) == 1) {
        page.instructions.store(own_total(), std::memory_order_relaxed);
        page.system_calls.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    std::lock_guard<std::mutex> hold(lock);
    page.instructions.store(all_total(), std::memory_order_relaxed);
    page.system_calls.fetch_add(1, std::memory_order_relaxed);
}

/// The file for process `pid` in the directory of the plugin's report file `report_path`.
inline std::string path_for(const std::string& report_path, long pid) {
    const auto slash = report_path.rfind('/');
    return (slash == std::string::npos ? std::string(".") : report_path.substr(0, slash)) + "/" + std::to_string(pid) +
           ".progress";
}

} // namespace pmc_progress
