// SPDX-License-Identifier: MIT
// access_decode.hpp: which x86-64 instructions Cachegrind counts with more data accesses than QEMU reports to a
// plugin, for `pmc emulate --cache` (plain C++, no QEMU in it): the two kinds below. The plugin decodes each
// instruction once, at translation (plugin_cache.hpp). Encodings: Intel's architecture manual, volume 2.
//
// An atomic read-modify-write (a LOCK-prefixed add, or, adc, sbb, and, sub, xor, inc, dec, not, neg, bts, btr,
// btc, xadd; xchg with a memory operand, locked without the prefix): Valgrind's x86 front end (VEX) makes it a load
// and a compare-and-swap, and Cachegrind counts the load as a read and the compare-and-swap as a read-modify-write,
// that is a second read of the same bytes. QEMU reports a load and a store, which are one read-modify-write (one
// read). cmpxchg (LOCK or not), cmpxchg8b/16b and the same operations without LOCK are one read in both.
//
// A bit test of a register by a register (bt, bts, btr, btc r, r): VEX stores the tested register in a slot 288
// bytes below the stack pointer and tests the bit in memory, so Cachegrind counts a write (the operand's size) and
// a read of one byte; bts, btr and btc also modify that byte (a read) and load the operand back (a read). The
// program makes no access; QEMU reports none.
//
// QEMU 7.2's parallel code: once a process has a second thread or any MAP_SHARED mapping (glibc maps
// gconv-modules.cache shared when it loads iconv's module list: grep, sed, find, tar, sha256sum, perl), QEMU 7.2
// retranslates with real host atomics, and each atomic read-modify-write above, and each LOCK cmpxchg, cmpxchg8b
// and cmpxchg16b, reaches a plugin as one access flagged a store. Serial code reports a load and a store, and so
// does QEMU 10 in both modes. The plugin turns such a lone store back into its load and store
// (plugin_cache.hpp): is_x86_locked_compare_exchange names the instructions beyond is_x86_atomic_rmw's that need
// it, one read in Cachegrind.
#pragma once

#include <cstddef>

namespace pmc_model {

/// Skips x86 legacy prefixes and REX: the index of the opcode (n if none), and whether LOCK was among them.
inline std::size_t skip_x86_prefixes(const unsigned char* p, std::size_t n, bool& lock) {
    lock = false;
    std::size_t i = 0;
    for (; i < n; ++i) {
        const unsigned char b = p[i];
        if (b == 0xF0) lock = true;
        else if (b == 0xF2 || b == 0xF3 || b == 0x2E || b == 0x36 || b == 0x3E || b == 0x26 || b == 0x64 ||
                 b == 0x65 || b == 0x66 || b == 0x67 || (b & 0xF0) == 0x40)
            continue;
        else break;
    }
    return i;
}

/// What Cachegrind counts for an x86-64 bit test of a register by a register (above), where QEMU reports nothing.
struct BitTestAccesses {
    unsigned reads = 0;  ///< 1 for bt, 2 for bts, btr, btc; 0: not such an instruction
    unsigned writes = 0; ///< 1 when reads > 0
};
inline BitTestAccesses x86_register_bit_test(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock);
    if (i + 2 >= n || p[i] != 0x0F || (p[i + 2] >> 6) != 3) return {};
    const unsigned char op = p[i + 1];
    if (op == 0xA3) return {1, 1};                              // bt r, r
    if (op == 0xAB || op == 0xB3 || op == 0xBB) return {2, 1}; // bts, btr, btc r, r
    return {}; // (the immediate forms, 0F BA, test the register itself)
}

/// x86-64: whether the instruction in `p` (its `n` bytes) is an atomic read-modify-write that Cachegrind counts as
/// two reads (above).
inline bool is_x86_atomic_rmw(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock);
    if (i >= n) return false;
    const bool two_bytes = p[i] == 0x0F; // 0F xx: the ModRM byte follows the second opcode byte
    if (i + 1 + (two_bytes ? 1 : 0) >= n) return false;
    const unsigned char op = p[i + (two_bytes ? 1 : 0)], modrm = p[i + 1 + (two_bytes ? 1 : 0)];
    const bool memory = (modrm >> 6) != 3;
    const unsigned reg = (modrm >> 3) & 7;
    if (!two_bytes && (op == 0x86 || op == 0x87)) return memory; // xchg r/m, r: locked whether prefixed or not
    if (!lock || !memory) return false;
    if (two_bytes) return op == 0xAB || op == 0xB3 || op == 0xBB || op == 0xC0 || op == 0xC1 || // bts btr btc xadd
                          (op == 0xBA && reg >= 5);                                          // bts btr btc imm8
    if (op < 0x38 && (op & 7) <= 1) return true; // add, or, adc, sbb, and, sub, xor r/m, r (not cmp: 0x38)
    if (op == 0x80 || op == 0x81 || op == 0x83) return reg != 7; // the same with an immediate (reg 7: cmp)
    if (op == 0xF6 || op == 0xF7) return reg == 2 || reg == 3; // not, neg
    return (op == 0xFE || op == 0xFF) && reg <= 1;              // inc, dec
}

/// x86-64: whether the instruction is a LOCK-prefixed compare-and-exchange of memory (cmpxchg, cmpxchg8b,
/// cmpxchg16b): one read in Cachegrind, and in QEMU 7.2's parallel code one access flagged a store (above).
inline bool is_x86_locked_compare_exchange(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock);
    if (!lock || i + 2 >= n || p[i] != 0x0F) return false;
    const unsigned char op = p[i + 1], modrm = p[i + 2];
    if ((modrm >> 6) == 3) return false;                    // a register operand: no memory access
    if (op == 0xB0 || op == 0xB1) return true;              // cmpxchg r/m, r
    return op == 0xC7 && ((modrm >> 3) & 7) == 1;           // cmpxchg8b, cmpxchg16b m
}

} // namespace pmc_model
