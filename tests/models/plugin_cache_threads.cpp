// SPDX-License-Identifier: MIT
// The QEMU plugin's cache registry (tools/emulate/plugin_cache.hpp) under threads, without QEMU: guest threads
// feed their models through the plugin's own callbacks and exit (their pthread key destructor folds them into the
// process's total) while another thread takes the process's total again and again, as an exit or an execve does
// while other vCPUs still run. Built with ThreadSanitizer (tests/CMakeLists.txt): a read of a model its thread is
// changing is a reported race and fails the test. Checked too: the report lines add up to every thread's exact
// counts (each the same as one model fed the same stream alone).
#include "plugin_cache.hpp"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

// What the plugin calls in QEMU: this test's meminfo is (size shift << 1) | store.
extern "C" bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info) { return (info & 1) != 0; }
extern "C" unsigned qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info) { return (info >> 1) & 7; }

namespace {

constexpr qemu_plugin_meminfo_t load8 = 3u << 1, store8 = (3u << 1) | 1;
constexpr int threads = 4, rounds = 20000;

plugin_cache::Block make_block() {
    plugin_cache::Block b;
    b.instructions = 3;
    b.fetches = {{0x401000, 4}, {0x40103e, 4}}; // the second straddles two I1 lines
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
            caches.count_instructions(block.instructions);
            for (const auto& f : block.fetches) caches.fetch_uncounted(f.address, f.size);
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

} // namespace

int main() {
    plugin_cache::settings.on = true;
    plugin_cache::settings.config.ll = {262144, 8, 64}; // small: four threads' LL tags allocated at once
    if (const std::string why = plugin_cache::start(); !why.empty()) {
        std::fprintf(stderr, "start: %s\n", why.c_str());
        return 1;
    }
    std::uint64_t sums[9] = {};
    std::atomic<int> running{threads};
    std::thread workers[threads];
    for (int t = 0; t < threads; ++t)
        workers[t] = std::thread([t, &running] {
            stream(
                0x7f0000000000 + static_cast<std::uint64_t>(t) * 0x100000,
                [] { plugin_cache::on_block(0, const_cast<plugin_cache::Block*>(&block)); },
                [](qemu_plugin_meminfo_t info, std::uint64_t address, const plugin_cache::Instruction* insn) {
                    plugin_cache::on_memory(0, info, address, const_cast<plugin_cache::Instruction*>(insn));
                },
                [] { plugin_cache::at_syscall(); });
            running.fetch_sub(1);
        });
    int totals_taken = 0;
    while (running.load() > 0) { // the process's total, taken while the threads run and exit
        add_line(plugin_cache::report_line(1), sums);
        ++totals_taken;
    }
    for (auto& w : workers) w.join();
    add_line(plugin_cache::report_line(1), sums);

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
    std::printf("%d threads x %d rounds, the total taken %d times while they ran: Ir %" PRIu64 " D1mr %" PRIu64
                " Dw %" PRIu64 "\n",
                threads, rounds, totals_taken, sums[0], sums[4], sums[6]);
    std::printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed ? 1 : 0;
}
