// SPDX-License-Identifier: MIT
// The cache plugin's table of decoded meminfos (tools/emulate/plugin_cache.hpp, MeminfoTable), without QEMU: more
// distinct meminfos than the table has entries, looked up in a random order, each decode must be the one QEMU's
// two calls give, and repeated lookups must mostly not call QEMU (the table is there to save those calls).
#include "plugin_cache.hpp"

#include <cstdio>
#include <random>

namespace {
long calls = 0;
}

// What the plugin calls in QEMU: this test's meminfo is (size shift << 1) | store, above it other bits that change
// nothing decoded (as QEMU's mmu index and sign bits do).
extern "C" bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info) {
    ++calls;
    return (info & 1) != 0;
}
extern "C" unsigned qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info) { return (info >> 1) & 3; }

int main() {
    plugin_cache::MeminfoTable table;
    std::mt19937 random(33);
    constexpr long lookups = 200000;
    // 64 meminfos: every size and kind, with 8 values of the bits above.
    for (long i = 0; i < lookups; ++i) {
        const auto info = static_cast<qemu_plugin_meminfo_t>(random() % 8 | (random() % 8) << 8);
        const plugin_cache::MeminfoTable::Decoded d = table.decode(info);
        if (d.store != ((info & 1) != 0) || d.size != 1u << ((info >> 1) & 3)) {
            std::printf("FAILED: meminfo %#x decoded as %s of %u bytes\n", static_cast<unsigned>(info),
                        d.store ? "store" : "load", d.size);
            return 1;
        }
    }
    // An instruction's load and store alternating, as `add [m], r` does: two calls into QEMU, not one per access.
    const long before = calls;
    for (int i = 0; i < 1000; ++i) {
        table.decode(0x306); // load, 8 bytes
        table.decode(0x307); // store, 8 bytes
    }
    if (calls - before > 2) {
        std::printf("FAILED: 2,000 alternating lookups of two meminfos called QEMU %ld times\n", calls - before);
        return 1;
    }
    std::printf("meminfo table: %ld lookups of 64 meminfos decoded right; an alternating pair: %ld calls\n", lookups,
                calls - before);
    return 0;
}
