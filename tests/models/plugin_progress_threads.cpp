// SPDX-License-Identifier: MIT
// The QEMU plugin's thread code at system calls, without QEMU, while threads start and exit: the progress page
// (tools/emulate/progress_file.hpp, pmc_progress::note: no lock while one thread lives, the plugin's slots lock
// otherwise, the call count an atomic add) and the models' per-thread registry (plugin_threads.hpp: a thread
// registers at its first block, publishes at each system call, is folded into the total at its exit, while another
// thread takes the process's totals). Built with ThreadSanitizer (tests/CMakeLists.txt): a total read while a
// starting or exiting thread changes the bookkeeping is a reported race and fails the test.
//
// One thread lives throughout and makes system calls in a tight loop, alone most of the time; short-lived threads
// start beside it, one at a time (the dangerous moment: the first thread leaves its lock-free path) or three at
// once, make system calls and exit. The main thread takes the registry's totals meanwhile. At each call a thread
// also stores the model's counts so far in the page, with no lock, as the plugin's note_model_progress does (relaxed
// atomic stores: several threads at once are no data race). At the end the page's count, call count and model count
// and the registry's reports must equal what the threads did.
//
// Around pmc_progress::note, the plugin's bookkeeping as qemu_plugin.cpp keeps it under plugin API 2 (QEMU 9.0 on):
// a count per vCPU index (QEMU's scoreboard), which indexes are live, the exited threads' total, all under
// `slots_lock`, and `live_threads` stored under it after every change. QEMU adds to a vCPU's count in generated code,
// with plain stores that an aligned 64-bit store keeps whole: relaxed atomics here, so that ThreadSanitizer judges
// the locking around them, not them.
#include "plugin_threads.hpp"
#include "progress_file.hpp"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr unsigned max_vcpus = 16;
constexpr int short_lived = 400;          // threads that start and exit beside the long-lived one
constexpr int short_blocks = 400;         // each one's blocks
constexpr int blocks_per_syscall = 8;     // a system call after every 8th block
constexpr std::uint64_t block_length = 5; // instructions a block

// ---- the plugin's process count (qemu_plugin.cpp, plugin API 2) ----

std::atomic<std::uint64_t> vcpu_counts[max_vcpus];
std::vector<char> live; ///< per vCPU index: a thread has it
std::mutex slots_lock;
std::atomic<unsigned> live_threads{0};
std::atomic<std::uint64_t> exited_total{0}; ///< atomic as in the plugin: read with no lock by a thread alone
pmc_progress::Progress page{pmc_progress::magic, {0}, {0}, {0}, {}, {}};

unsigned live_thread_count() { // under slots_lock
    unsigned n = 0;
    for (const char l : live) n += l ? 1 : 0;
    return n;
}
std::uint64_t live_threads_total() { // under slots_lock
    std::uint64_t total = 0;
    for (unsigned i = 0; i < live.size(); ++i)
        if (live[i]) total += vcpu_counts[i].load(std::memory_order_relaxed);
    return total;
}
/// QEMU's vCPU init callback: a free index (the lowest, as QEMU reuses them), its count from zero.
unsigned on_vcpu_init() {
    std::lock_guard<std::mutex> hold(slots_lock);
    unsigned vcpu = 0;
    while (vcpu < live.size() && live[vcpu]) ++vcpu;
    if (vcpu >= max_vcpus) std::abort();
    vcpu_counts[vcpu].store(0, std::memory_order_relaxed);
    if (live.size() <= vcpu) live.resize(vcpu + 1, 0);
    live[vcpu] = 1;
    live_threads.store(live_thread_count(), std::memory_order_release);
    return vcpu;
}
void on_vcpu_exit(unsigned vcpu) {
    std::lock_guard<std::mutex> hold(slots_lock);
    live[vcpu] = 0;
    exited_total.store(exited_total.load(std::memory_order_relaxed) + vcpu_counts[vcpu].load(std::memory_order_relaxed),
                       std::memory_order_relaxed);
    live_threads.store(live_thread_count(), std::memory_order_release);
}

/// pmc_progress::note's totals, as the plugin's note_progress gives them (no fork here: no baseline).
std::uint64_t own_total(unsigned vcpu) {
    return exited_total.load(std::memory_order_relaxed) + vcpu_counts[vcpu].load(std::memory_order_relaxed);
}
std::uint64_t all_total() { return exited_total.load(std::memory_order_relaxed) + live_threads_total(); }

// ---- a model on the registry: it counts its thread's blocks ----

struct BlockModel {
    struct Counts {
        std::uint64_t blocks;
    };
    std::uint64_t blocks = 0;
    Counts counts() const noexcept { return {blocks}; }
    void finish() noexcept {}
    void started() noexcept {}
    void exiting() noexcept {}
    static void add(Counts& to, const Counts& c) { to.blocks += c.blocks; }
    static void subtract(Counts& from, const Counts& c) { from.blocks -= c.blocks; }
};
using Registry = plugin_threads::Registry<BlockModel>;

/// The plugin's note_model_progress at a system call (qemu_plugin.cpp): the model's counts so far, as the process's
/// report would give them, stored in the page with no lock by whichever thread makes the call, several at once.
void note_model_progress() {
    const std::uint64_t blocks = Registry::peek_since_last_report().blocks;
    for (auto& field : page.cache) field.store(blocks, std::memory_order_relaxed);
    page.models.store(pmc_progress::has_cache, std::memory_order_relaxed);
}

/// A guest thread's life: `blocks` blocks, a system call after every `blocks_per_syscall`th, as the plugin's
/// callbacks see them (the block's add, the registry's model; at a system call the registry, then the page).
/// Returns the system calls it made.
std::uint64_t run_thread(unsigned vcpu, int blocks, const std::atomic<bool>* until = nullptr) {
    std::uint64_t calls = 0;
    for (int b = 0; until ? !until->load(std::memory_order_acquire) : b < blocks; ++b) {
        vcpu_counts[vcpu].fetch_add(block_length, std::memory_order_relaxed);
        ++Registry::this_thread().blocks;
        if (b % blocks_per_syscall == blocks_per_syscall - 1) {
            Registry::at_syscall();
            note_model_progress();
            pmc_progress::note(
                page, live_threads, slots_lock,
                [vcpu] { return own_total(vcpu); }, [] { return all_total(); });
            ++calls;
        }
    }
    return calls;
}

int failures = 0;
void check(bool ok, const char* what, std::uint64_t got, std::uint64_t want) {
    std::printf("%s %s: %" PRIu64 " (expected %" PRIu64 ")\n", ok ? "ok  " : "FAIL", what, got, want);
    failures += ok ? 0 : 1;
}

} // namespace

int main() {
    if (const std::string why = Registry::start(); !why.empty()) {
        std::printf("FAIL %s\n", why.c_str());
        return 1;
    }
    std::atomic<bool> stop{false}, first_ready{false};
    std::atomic<std::uint64_t> calls{0}, long_lived_blocks{0};
    std::uint64_t reported_blocks = 0;

    // The long-lived thread: alone between the waves, on the page's lock-free path.
    std::thread first([&] {
        const unsigned vcpu = on_vcpu_init();
        first_ready.store(true, std::memory_order_release);
        calls.fetch_add(run_thread(vcpu, 0, &stop), std::memory_order_relaxed);
        // Its last act: a system call with every other thread gone (the count the page must hold at the end).
        Registry::at_syscall();
        note_model_progress();
        pmc_progress::note(
            page, live_threads, slots_lock,
            [vcpu] { return own_total(vcpu); }, [] { return all_total(); });
        calls.fetch_add(1, std::memory_order_relaxed);
        long_lived_blocks.store(Registry::this_thread().blocks, std::memory_order_relaxed);
        on_vcpu_exit(vcpu);
    });
    while (!first_ready.load(std::memory_order_acquire)) std::this_thread::yield();

    // Waves of short-lived threads: one at a time, then three at once, alternately; the registry's totals taken
    // between and during them.
    int started = 0;
    for (int wave = 0; started < short_lived; ++wave) {
        const int n = wave % 2 == 0 ? 1 : 3;
        std::vector<std::thread> threads;
        for (int i = 0; i < n && started < short_lived; ++i, ++started)
            threads.emplace_back([&] {
                const unsigned vcpu = on_vcpu_init();
                calls.fetch_add(run_thread(vcpu, short_blocks), std::memory_order_relaxed);
                on_vcpu_exit(vcpu);
            });
        reported_blocks += Registry::since_last_report().blocks;
        for (auto& t : threads) t.join();
        reported_blocks += Registry::since_last_report().blocks;
    }
    stop.store(true, std::memory_order_release);
    first.join();
    const std::uint64_t last_report = Registry::since_last_report().blocks;
    reported_blocks += last_report;

    const std::uint64_t all_blocks =
        static_cast<std::uint64_t>(short_lived) * short_blocks + long_lived_blocks.load(std::memory_order_relaxed);
    // The long-lived thread's last call ran alone, after every other thread had exited: the whole count.
    check(page.instructions.load() == all_blocks * block_length, "the page's instructions after the last call",
          page.instructions.load(), all_blocks * block_length);
    check(page.system_calls.load() == calls.load(), "the page's system calls", page.system_calls.load(), calls.load());
    // Its model note too: what the process's last report took, every thread's blocks since the report before.
    for (const auto& field : page.cache)
        check(field.load() == last_report, "the page's model count after the last call", field.load(), last_report);
    check(page.models.load() == pmc_progress::has_cache, "the page's models", page.models.load(), pmc_progress::has_cache);
    check(reported_blocks == all_blocks, "the registry's reports, summed", reported_blocks, all_blocks);
    check(exited_total.load() == all_blocks * block_length, "the exited threads' total", exited_total.load(),
          all_blocks * block_length);
    return failures ? 1 : 0;
}
