// SPDX-License-Identifier: MIT
// The QEMU plugin's per-thread registry (tools/emulate/plugin_threads.hpp) under threads, without QEMU, for both
// models that use it (plugin_cache.hpp, plugin_branches.hpp): guest threads feed their cache model and branch
// predictor through the plugin's own callbacks and exit (their pthread key destructors fold them into the
// process's totals) while another thread takes both totals again and again, as an exit or an execve does while
// other vCPUs still run. Built with ThreadSanitizer (tests/CMakeLists.txt): a read of a model its thread is
// changing is a reported race and fails the test. Checked too: the report lines add up to every thread's exact
// counts (each the same as one model fed the same stream alone), and a fork child's reports hold only what it ran
// after the fork. Two of the four threads feed their accesses through the calls for one kind (on_memory_of, plugin
// API 1's for vector loads and stores), one of them with the other kind's call for each access: that must change
// nothing counted.
#include "plugin_branches.hpp"
#include "plugin_cache.hpp"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

// What the plugin calls in QEMU: this test's meminfo is (size shift << 1) | store.
extern "C" bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info) { return (info & 1) != 0; }
extern "C" unsigned qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info) { return (info >> 1) & 7; }

namespace {

constexpr qemu_plugin_meminfo_t load8 = 3u << 1, store8 = (3u << 1) | 1;
constexpr int threads = 4, rounds = 20000;

const std::vector<pmc_model::FetchRef> block_fetches = {{0x401000, 4}, {0x40103e, 4}}; // the second straddles two I1 lines

plugin_cache::Block make_block() {
    plugin_cache::Block b;
    // (no tag planned: each check fails and the whole model decides, as for a straddle)
    b.plan.reset(plugin_cache::BlockPlan::make(3, block_fetches));
    b.each.reset(new plugin_cache::Instruction[3]{{0x401000, 0}, {0x40103e, 1}, {0x401042, 2}});
    return b;
}
const plugin_cache::Block block = make_block();

/// One thread's stream: per round a block whose instructions load, store and read-modify-write lines spread
/// over 96 KiB (D1 misses, LL hits), then a system call now and then.
template <class OnBlock, class OnMemory, class AtSyscall>
void stream(std::uint64_t base, OnBlock on_block, OnMemory on_memory, AtSyscall at_syscall) {
    for (int r = 0; r < rounds; ++r) {
        const std::uint64_t a = base + (static_cast<std::uint64_t>(r) * 200) % (96 * 1024);
        on_block();
        on_memory(load8, a, &block.each[0]);
        on_memory(store8, a + 4096, &block.each[1]);
        on_memory(load8, a + 64, &block.each[2]); // read-modify-write: one read
        on_memory(store8, a + 64, &block.each[2]);
        if (r % 1000 == 999) at_syscall();
    }
}

/// The counts of one model fed the stream alone, with the merger the plugin uses.
pmc_model::CacheCounts alone(std::uint64_t base) {
    pmc_model::CacheHierarchy caches(plugin_cache::settings.config);
    pmc_model::DataAccessMerger merger;
    std::uint64_t blocks = 0;
    const auto sink = [&](const pmc_model::DataAccess& a) {
        if (a.kind == pmc_model::Kind::write) caches.write(a.address, a.size);
        else caches.read(a.address, a.size);
    };
    stream(
        base,
        [&] {
            ++blocks;
            caches.count_instructions(block.plan->instructions);
            for (const auto& f : block_fetches) caches.fetch_uncounted(f.address, f.size);
        },
        [&](qemu_plugin_meminfo_t info, std::uint64_t address, const plugin_cache::Instruction* insn) {
            merger.add((blocks << 10) | insn->index, insn->pc, (info & 1) != 0, address, 1u << ((info >> 1) & 7), sink);
        },
        [&] { merger.flush(sink); });
    merger.flush(sink);
    return caches.counts();
}

/// Adds the fields of a report line ("pid N cache Ir A I1mr B ...") to `sums`.
void add_line(const std::string& line, std::uint64_t (&sums)[9]) {
    std::istringstream in(line);
    std::string word;
    in >> word >> word >> word; // pid N cache
    for (std::uint64_t& s : sums) {
        std::uint64_t v = 0;
        in >> word >> v;
        s += v;
    }
}

// ---- the branch model's stream ----

using pmc_model::BranchKind;

/// Blocks that end with each kind of branch; a conditional's fall-through and taken target both start blocks.
plugin_branches::Block branch_block(std::uint64_t start, std::uint64_t pc, std::uint64_t next, BranchKind kind) {
    plugin_branches::Block b{start, pc, next, kind, 0, nullptr};
    b.prepare();
    return b;
}
const plugin_branches::Block branch_blocks[] = {
    branch_block(0x401000, 0x401010, 0x401012, BranchKind::conditional),
    branch_block(0x401012, 0x401020, 0x401022, BranchKind::indirect),    // the conditional's fall-through
    branch_block(0x401100, 0x401110, 0x401115, BranchKind::direct),      // its taken target
    branch_block(0x401200, 0x401208, 0x40120a, BranchKind::none),
    branch_block(0x401300, 0x401304, 0x401305, BranchKind::ret),
    branch_block(0x401400, 0x401480, 0x401482, BranchKind::conditional), // another predictor entry
};
constexpr std::size_t branch_kinds = sizeof branch_blocks / sizeof branch_blocks[0];

/// Thread `t`'s block at round `r`: a fixed pseudo-random walk, so that the predictor both hits and misses.
const plugin_branches::Block& branch_block_at(int t, int r) {
    std::uint64_t x = (static_cast<std::uint64_t>(t) << 32 | static_cast<std::uint64_t>(r)) * 0x9E3779B97F4A7C15u;
    x ^= x >> 29;
    // A thread's own bias: thread 0 mostly runs the first conditional and its fall-through (mostly predicted).
    const std::size_t pick = static_cast<std::size_t>(x % (branch_kinds + 2 * static_cast<std::uint64_t>(t == 0)));
    return branch_blocks[pick < branch_kinds ? pick : pick - branch_kinds];
}

/// The five counts of a report line, in its order: all, Bc, Bcm, Bi, Bim.
using BranchSums = std::uint64_t[5];

/// Thread `t`'s stream fed to one predictor alone, settled as a block's successor says (the plugin's rule).
void branches_alone(int t, BranchSums& sums) {
    pmc_model::BranchPredictor predictor(0);
    std::uint64_t all = 0;
    const plugin_branches::Block* pending = nullptr;
    for (int r = 0; r < rounds; ++r) {
        const plugin_branches::Block& b = branch_block_at(t, r);
        if (pending && pending->kind == BranchKind::conditional) predictor.conditional(pending->pc, b.start != pending->next);
        else if (pending) predictor.indirect(pending->pc, b.start);
        all += b.kind != BranchKind::none ? 1 : 0;
        pending = b.kind == BranchKind::conditional || b.kind == BranchKind::indirect ? &b : nullptr;
    }
    const pmc_model::BranchCounts& c = predictor.counts();
    const std::uint64_t each[5] = {all, c.conditional, c.conditional_misses, c.indirect, c.indirect_misses};
    for (int k = 0; k < 5; ++k) sums[k] += each[k];
}

/// Adds the fields of a report line ("pid N branches all A Bc B Bcm C Bi D Bim E") to `sums`.
void add_branch_line(const std::string& line, BranchSums& sums) {
    std::istringstream in(line);
    std::string word;
    in >> word >> word >> word; // pid N branches
    for (std::uint64_t& s : sums) {
        std::uint64_t v = 0;
        in >> word >> v;
        s += v;
    }
}

} // namespace

int main() {
    plugin_cache::settings.on = true;
    plugin_cache::settings.config.ll = {262144, 8, 64}; // small: four threads' LL tags allocated at once
    if (const std::string why = plugin_cache::start(); !why.empty()) {
        std::fprintf(stderr, "start: %s\n", why.c_str());
        return 1;
    }
    plugin_branches::settings.on = true;
    if (const std::string why = plugin_branches::start("x86_64"); !why.empty()) {
        std::fprintf(stderr, "start: %s\n", why.c_str());
        return 1;
    }
    std::uint64_t sums[9] = {};
    BranchSums branch_sums = {};
    std::atomic<int> running{threads};
    std::thread workers[threads];
    for (int t = 0; t < threads; ++t)
        workers[t] = std::thread([t, &running] {
            int round = 0; // each block also runs the branch model's block of that round, as with both models on
            stream(
                0x7f0000000000 + static_cast<std::uint64_t>(t) * 0x100000,
                [t, &round] {
                    plugin_cache::on_block(0, block.plan.get());
                    const plugin_branches::Block& b = branch_block_at(t, round++);
                    plugin_branches::each_execution(b)(0, const_cast<plugin_branches::Block*>(&b));
                },
                [t](qemu_plugin_meminfo_t info, std::uint64_t address, const plugin_cache::Instruction* insn) {
                    auto* data = const_cast<plugin_cache::Instruction*>(insn);
                    // Thread 1: the calls for an instruction of one kind (plugin API 1's vector loads and stores),
                    // the load's for the read-modify-write too; thread 3: each the other kind's. An access of the
                    // other kind must take the general path.
                    const bool store_call = (insn->index == 1) == (t == 1);
                    if (t % 2 == 0) plugin_cache::on_memory(0, info, address, data);
                    else if (store_call) plugin_cache::on_memory_of<pmc_model::Kind::write>(0, info, address, data);
                    else plugin_cache::on_memory_of<pmc_model::Kind::read>(0, info, address, data);
                },
                [] {
                    plugin_cache::at_syscall();
                    plugin_branches::at_syscall();
                });
            running.fetch_sub(1);
        });
    int totals_taken = 0;
    while (running.load() > 0) { // the process's total, taken while the threads run and exit
        add_line(plugin_cache::report_line(1), sums);
        add_branch_line(plugin_branches::report_line(1), branch_sums);
        ++totals_taken;
    }
    for (auto& w : workers) w.join();
    add_line(plugin_cache::report_line(1), sums);
    add_branch_line(plugin_branches::report_line(1), branch_sums);

    std::uint64_t expected[9] = {};
    for (int t = 0; t < threads; ++t) {
        const pmc_model::CacheCounts c = alone(0x7f0000000000 + static_cast<std::uint64_t>(t) * 0x100000);
        const std::uint64_t each[9] = {c.Ir(), c.I1mr(), c.ILmr(), c.Dr(), c.D1mr(), c.DLmr(), c.Dw(), c.D1mw(), c.DLmw()};
        for (int k = 0; k < 9; ++k) expected[k] += each[k];
    }
    const char* names[9] = {"Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw"};
    int failed = 0;
    for (int k = 0; k < 9; ++k)
        if (sums[k] != expected[k]) {
            std::printf("%s: the report lines add up to %" PRIu64 ", the threads' models alone count %" PRIu64 "\n",
                        names[k], sums[k], expected[k]);
            ++failed;
        }
    if (expected[4] == 0 || expected[0] == 0) {
        std::printf("the stream made no D1 read miss: the test checks nothing\n");
        ++failed;
    }
    BranchSums branch_expected = {};
    for (int t = 0; t < threads; ++t) branches_alone(t, branch_expected);
    const char* branch_names[5] = {"all", "Bc", "Bcm", "Bi", "Bim"};
    for (int k = 0; k < 5; ++k) {
        if (branch_sums[k] != branch_expected[k]) {
            std::printf("branches %s: the report lines add up to %" PRIu64 ", the threads' predictors alone count %" PRIu64
                        "\n",
                        branch_names[k], branch_sums[k], branch_expected[k]);
            ++failed;
        }
        if (branch_expected[k] == 0) {
            std::printf("branches %s: the stream counted none: the test checks nothing there\n", branch_names[k]);
            ++failed;
        }
    }
    // A fork child, played on this thread (the workers are gone, as in a child only the forking thread lives on):
    // what the thread counted before the fork is the parent's; the child's reports hold only what it ran after.
    const auto run = [](int from, int to) {
        for (int r = from; r < to; ++r) {
            plugin_cache::on_block(0, block.plan.get());
            const plugin_branches::Block& b = branch_block_at(0, r);
            plugin_branches::each_execution(b)(0, const_cast<plugin_branches::Block*>(&b));
        }
    };
    run(0, 100);
    plugin_cache::at_syscall(); // the fork's system call
    plugin_branches::at_syscall();
    // A thread that was translating a block at the fork holds a model's blocks_lock, and is gone in the child: the
    // child's lock must be free again (played here by this thread holding both locks at the fork).
    plugin_cache::blocks_lock.lock();
    plugin_branches::blocks_lock.lock();
    plugin_cache::in_fork_child();
    plugin_branches::in_fork_child();
    for (auto [model, lock] : {std::pair{"cache", &plugin_cache::blocks_lock},
                               std::pair{"branch", &plugin_branches::blocks_lock}}) {
        if (lock->try_lock()) {
            lock->unlock();
        } else {
            std::printf("fork child: the %s model's blocks_lock is still held: the child's next translation would "
                        "wait forever\n", model);
            ++failed;
        }
    }
    std::uint64_t child_cache[2][9] = {};
    BranchSums child_branches[2] = {};
    add_line(plugin_cache::report_line(2), child_cache[0]);
    add_branch_line(plugin_branches::report_line(2), child_branches[0]);
    run(100, 150);
    add_line(plugin_cache::report_line(2), child_cache[1]);
    add_branch_line(plugin_branches::report_line(2), child_branches[1]);
    std::uint64_t child_all = 0;
    for (int r = 100; r < 150; ++r) child_all += branch_block_at(0, r).kind != BranchKind::none ? 1 : 0;
    for (int k = 0; k < 9; ++k)
        if (child_cache[0][k] != 0) {
            std::printf("fork child: its first cache report has %s %" PRIu64 " from before the fork\n", names[k],
                        child_cache[0][k]);
            ++failed;
        }
    for (int k = 0; k < 5; ++k)
        if (child_branches[0][k] != 0) {
            std::printf("fork child: its first branch report has %s %" PRIu64 " from before the fork\n",
                        branch_names[k], child_branches[0][k]);
            ++failed;
        }
    if (child_cache[1][0] != 3 * 50 || child_branches[1][0] != child_all) {
        std::printf("fork child: 50 blocks after the fork reported Ir %" PRIu64 " (expected 150) and branches %" PRIu64
                    " (expected %" PRIu64 ")\n",
                    child_cache[1][0], child_branches[1][0], child_all);
        ++failed;
    }

    std::printf("%d threads x %d rounds, the totals taken %d times while they ran: Ir %" PRIu64 " D1mr %" PRIu64
                " Dw %" PRIu64 "; branches %" PRIu64 " Bcm %" PRIu64 " Bim %" PRIu64 "\n",
                threads, rounds, totals_taken, sums[0], sums[4], sums[6], branch_sums[0], branch_sums[2],
                branch_sums[4]);
    std::printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed ? 1 : 0;
}
