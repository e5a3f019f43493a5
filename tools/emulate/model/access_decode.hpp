// SPDX-License-Identifier: MIT
// access_decode.hpp: which x86-64 instructions Cachegrind counts otherwise than QEMU reports their accesses to a
// plugin, for `pmc emulate --cache` (plain C++, no QEMU in it): the kinds below. The plugin decodes each
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
// program makes no access; QEMU reports none. In order (Valgrind's lackey, --trace-mem=yes): the operand's bytes
// stored at %rsp - 288, the byte holding the bit loaded (%rsp - 288 + (bit mod width) / 8; stored back by bts, btr,
// btc: one modify, a read to Cachegrind), then for those three the operand loaded from %rsp - 288. (VEX drops the
// byte's load when nothing reads the flags it sets before they are set again: Cachegrind then counts no read.)
//
// QEMU 7.2's parallel code: once a process has a second thread or any MAP_SHARED mapping (glibc maps
// gconv-modules.cache shared when it loads iconv's module list: grep, sed, find, tar, sha256sum, perl), QEMU 7.2
// retranslates with real host atomics, and each atomic read-modify-write above, and each LOCK cmpxchg, cmpxchg8b
// and cmpxchg16b, reaches a plugin as one access flagged a store. Serial code reports a load and a store, and so
// does QEMU 10 in both modes. The plugin turns such a lone store back into its load and store
// (plugin_cache.hpp): is_x86_locked_compare_exchange names the instructions beyond is_x86_atomic_rmw's that need
// it, one read in Cachegrind.
//
// An x87 or SSE state image (fxsave, fxrstor, fnsave, frstor, fnstenv, fldenv; and fstpt, fldt, whose 10 bytes
// are one access in VEX and in QEMU 7.2 but none in QEMU 10.0): VEX moves the x87 part as one access of the
// image's size (a helper's declared effect), and fxsave/fxrstor then MXCSR (8 bytes at offset 24) and each of the
// 16 XMM registers (16 bytes at 160 + 16 k) as accesses of their own; Cachegrind cuts the helper's access to its
// narrowest line (I1, D1, LL), as pmc's model cuts any access. QEMU 7.2 moves 2-, 4- and 8-byte pieces (joined,
// fxsave's 18 writes were 12; fldenv's one read 3), QEMU 10.0 reports none. The plugin replaces QEMU's accesses
// with VEX's, at the image's address. (Not xsave and xrstor: what VEX moves follows EDX:EAX and the image's own
// header; nor the masked loads, whose mask QEMU 7.2 does not show.)
//
// The other way round, for speed: most instructions make one plain load or store of at most 8 bytes that nothing
// joins (x86_single_access below); the plugin gives those a lean callback that skips joining QEMU's pieces.
//
// A masked store (vmaskmovps, vmaskmovpd, vpmaskmovd, vpmaskmovq to memory): VEX stores each element whose mask
// bit is set as an access of its own, as QEMU does; the plugin keeps QEMU's pieces apart instead of joining them.
//
// A rep-prefixed string instruction (rep movs, stos, lods; repe/repne cmps, scas; any element size): VEX runs one
// iteration per execution and, once the count reaches 0 with the condition (repe/repne) still holding, one more
// that finds it 0. Cachegrind counts an instruction (Ir, a fetch) per execution, N + 1 for a count of N, k for a
// repe cmps that stops at its k-th element, and each element as an access of its own: movs a read then a write,
// cmps a read of (%rdi) then one of (%rsi), stos a write, lods and scas a read. QEMU reports the same accesses in
// the same order. QEMU 7.2 ends its block after each iteration, as VEX; QEMU 10 loops inside one block (leaving it
// when the count's low 16 bits are 0), so a plugin sees one execution where Cachegrind sees N + 1: pmc counted one
// Ir and joined adjacent elements into one access (a rep stosq of 64 elements: one write of 512 bytes). On plugin
// API 2 the plugin takes each element alone and counts the executions VEX makes (plugin_cache.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

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
    unsigned reads = 0;         ///< 1 for bt, 2 for bts, btr, btc; 0: not such an instruction
    unsigned writes = 0;        ///< 1 when reads > 0
    unsigned operand_bytes = 0; ///< the tested register's width: 2, 4 or 8 (the slot's store and reload)
    unsigned bit_register = 0;  ///< the register holding the bit number, in x86's encoding order (0-15)
};
inline BitTestAccesses x86_register_bit_test(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock);
    if (i + 2 >= n || p[i] != 0x0F || (p[i + 2] >> 6) != 3) return {};
    const unsigned char op = p[i + 1];
    unsigned reads = 0;
    if (op == 0xA3) reads = 1;                                     // bt r, r
    else if (op == 0xAB || op == 0xB3 || op == 0xBB) reads = 2;    // bts, btr, btc r, r
    else return {}; // (the immediate forms, 0F BA, test the register itself)
    const unsigned char rex = i > 0 && (p[i - 1] & 0xF0) == 0x40 ? p[i - 1] : 0; // REX counts only right before
    bool operand_16 = false;
    for (std::size_t k = 0; k < i; ++k) operand_16 |= p[k] == 0x66;
    const unsigned bytes = (rex & 8) ? 8 : operand_16 ? 2 : 4;
    return {reads, 1, bytes, ((p[i + 2] >> 3) & 7u) | ((rex & 4u) << 1)};
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

/// A memory operand's parts (ModRM, SIB, displacement), in x86's register numbering: the address is
/// base + index * scale + displacement (+ the next instruction's address if RIP-relative, + the FS or GS base).
struct MemoryOperand {
    bool memory = false;      ///< false: a register operand, or not decoded
    int base = -1;            ///< 0-15, or -1 for none
    int index = -1;           ///< 0-15, or -1 for none
    unsigned scale = 1;
    std::int64_t displacement = 0;
    bool rip_relative = false;
    int segment = -1;         ///< 4: FS, 5: GS (their bases added), -1: none (the others are 0 in 64-bit mode)
    bool address_32 = false;  ///< the 0x67 prefix: the address wraps at 32 bits
};
/// A 32-bit little-endian displacement, sign-extended.
inline std::int64_t x86_displacement_32(const unsigned char* p) {
    const std::uint32_t u = std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
                            std::uint32_t{p[3]} << 24;
    return static_cast<std::int32_t>(u);
}
/// The memory operand of the instruction in `p` whose ModRM byte is at `modrm` (`rex`: its REX byte, or 0).
inline MemoryOperand x86_memory_operand(const unsigned char* p, std::size_t n, std::size_t modrm, unsigned char rex) {
    MemoryOperand m;
    if (modrm >= n || (p[modrm] >> 6) == 3) return m;
    bool lock;
    const std::size_t prefixes = skip_x86_prefixes(p, modrm, lock);
    for (std::size_t k = 0; k < prefixes; ++k) {
        if (p[k] == 0x64) m.segment = 4;
        if (p[k] == 0x65) m.segment = 5;
        if (p[k] == 0x67) m.address_32 = true;
    }
    const unsigned mod = p[modrm] >> 6, rm = p[modrm] & 7u;
    std::size_t at = modrm + 1;
    if (rm == 4) { // SIB
        if (at >= n) return m;
        const unsigned sib = p[at++], index = ((sib >> 3) & 7u) | ((rex & 2u) << 2), base = (sib & 7u) | ((rex & 1u) << 3);
        m.scale = 1u << (sib >> 6);
        if (index != 4) m.index = static_cast<int>(index);
        if ((base & 7u) == 5 && mod == 0) m.base = -1; // disp32 alone
        else m.base = static_cast<int>(base);
        if ((base & 7u) == 5 && mod == 0) {
            if (at + 4 > n) return m;
            m.displacement = x86_displacement_32(p + at);
            at += 4;
        }
    } else if (mod == 0 && rm == 5) {
        m.rip_relative = true;
    } else {
        m.base = static_cast<int>(rm | ((rex & 1u) << 3));
    }
    if (mod == 1) {
        if (at >= n) return m;
        m.displacement = static_cast<std::int8_t>(p[at]);
    } else if (mod == 2 || (mod == 0 && rm == 5)) {
        if (at + 4 > n) return m;
        m.displacement = x86_displacement_32(p + at);
    }
    m.memory = true;
    return m;
}

/// The x87/SSE state images of the note above.
enum class StateImage : std::uint8_t { none, fxsave, fxrstor, fnsave, frstor, fnstenv, fldenv, fldt, fstpt };
struct StateImageInstruction {
    StateImage kind = StateImage::none;
    MemoryOperand operand;
};
inline StateImageInstruction x86_state_image(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock);
    for (std::size_t k = 0; k < i; ++k)
        if (p[k] == 0x66 || p[k] == 0xF2 || p[k] == 0xF3) return {}; // other instructions, or 16-bit images
    const unsigned char rex = i > 0 && (p[i - 1] & 0xF0) == 0x40 ? p[i - 1] : 0;
    const bool two_bytes = i < n && p[i] == 0x0F;
    const std::size_t modrm = i + (two_bytes ? 2 : 1);
    if (modrm >= n || (p[modrm] >> 6) == 3) return {};
    const unsigned reg = (p[modrm] >> 3) & 7u;
    StateImage kind = StateImage::none;
    if (two_bytes && p[i + 1] == 0xAE) kind = reg == 0 ? StateImage::fxsave : reg == 1 ? StateImage::fxrstor : kind;
    else if (p[i] == 0xD9) kind = reg == 6 ? StateImage::fnstenv : reg == 4 ? StateImage::fldenv : kind;
    else if (p[i] == 0xDD) kind = reg == 6 ? StateImage::fnsave : reg == 4 ? StateImage::frstor : kind;
    else if (p[i] == 0xDB) kind = reg == 7 ? StateImage::fstpt : reg == 5 ? StateImage::fldt : kind;
    if (kind == StateImage::none) return {};
    return {kind, x86_memory_operand(p, n, modrm, rex)};
}

/// VEX's accesses for an image at offset 0, in order: `each(offset, size, store)`. (The helper's access, wider
/// than a line, is cut to the narrowest line by the model, as Cachegrind cuts it: cache_model.hpp.)
template <class Each>
void for_each_state_image_access(StateImage kind, Each&& each) {
    const auto helper = [&](std::uint32_t size, bool store) { each(0u, size, store); };
    switch (kind) {
    case StateImage::fxsave:
    case StateImage::fxrstor: {
        const bool store = kind == StateImage::fxsave;
        helper(160, store);  // the x87 part (and the control words)
        each(24u, 8u, store); // MXCSR and its mask
        for (std::uint32_t k = 0; k < 16; ++k) each(160 + 16 * k, 16u, store);
        break;
    }
    case StateImage::fnsave: helper(108, true); break;
    case StateImage::frstor: helper(108, false); break;
    case StateImage::fnstenv: helper(28, true); break;
    case StateImage::fldenv: helper(28, false); break;
    case StateImage::fstpt: helper(10, true); break;
    case StateImage::fldt: helper(10, false); break;
    case StateImage::none: break;
    }
}

/// Whether the instruction is a masked store (VEX-encoded 0F38 2E, 2F, 8E with a memory destination): QEMU's
/// pieces are counted apart (above).
inline bool is_x86_masked_store(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock); // (a segment or address-size prefix)
    // Three-byte VEX (C4) with map 0F38 in its second byte; the two-byte form (C5) has map 0F only.
    if (i + 4 >= n || p[i] != 0xC4 || (p[i + 1] & 0x1Fu) != 2) return false;
    const unsigned char opcode = p[i + 3], modrm = p[i + 4];
    return (opcode == 0x2E || opcode == 0x2F || opcode == 0x8E) && (modrm >> 6) != 3;
}

/// The rep string instructions of the note above. `element_bytes` is each access's size (1, 2, 4 or 8);
/// `accesses_per_iteration` 2 for movs (read, write) and cmps (two reads), 1 for the others.
enum class RepString : std::uint8_t { none, movs, stos, lods, cmps, scas };
struct RepStringInstruction {
    RepString kind = RepString::none;
    std::uint32_t element_bytes = 0;
    std::uint32_t accesses_per_iteration = 0;
    bool address_32 = false; ///< the 0x67 prefix: %ecx counts, not %rcx
    bool repne = false;      ///< the last of its F2/F3 prefixes is F2 (for cmps and scas: repne, else repe)
};
/// Whether VEX executes a rep string instruction once more after the iteration that takes its count to 0, to find
/// the count 0 (Cachegrind counts that execution in Ir): always for movs, stos and lods; for cmps and scas only if
/// their condition still holds after that last element (repe: its elements were equal; repne: they differed),
/// for otherwise the condition ends the instruction there. `last_equal`: whether the last elements compared equal.
inline bool executes_after_count_end(const RepStringInstruction& r, bool last_equal) {
    if (r.kind != RepString::cmps && r.kind != RepString::scas) return true;
    return r.repne ? !last_equal : last_equal;
}
/// x86-64: whether the instruction in `p` (its `n` bytes) is a rep, repe or repne string instruction, and which.
/// (F2 before movs, stos or lods repeats as F3 does, on CPUs and in QEMU.)
inline RepStringInstruction x86_rep_string(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock);
    if (i >= n || lock) return {};
    bool rep = false, repne = false, operand_16 = false, address_32 = false;
    for (std::size_t k = 0; k < i; ++k) {
        rep |= p[k] == 0xF2 || p[k] == 0xF3;
        if (p[k] == 0xF2 || p[k] == 0xF3) repne = p[k] == 0xF2;
        operand_16 |= p[k] == 0x66;
        address_32 |= p[k] == 0x67;
    }
    const unsigned char op = p[i];
    if (!rep || op < 0xA4 || op > 0xAF || op == 0xA8 || op == 0xA9) return {}; // A8, A9: test al/eax, imm
    const unsigned char rex = i > 0 && (p[i - 1] & 0xF0) == 0x40 ? p[i - 1] : 0; // REX counts only right before
    const std::uint32_t bytes = (op & 1) == 0 ? 1 : (rex & 8) ? 8 : operand_16 ? 2 : 4;
    switch (op & 0xFE) {
    case 0xA4: return {RepString::movs, bytes, 2, address_32, repne};
    case 0xA6: return {RepString::cmps, bytes, 2, address_32, repne};
    case 0xAA: return {RepString::stos, bytes, 1, address_32, repne};
    case 0xAC: return {RepString::lods, bytes, 1, address_32, repne};
    default: return {RepString::scas, bytes, 1, address_32, repne}; // AE, AF
    }
}

/// An instruction that makes exactly one data access of a size and kind known from its bytes: a plain load or
/// store of 1 to 8 bytes, in one piece (QEMU splits none of them), which no other access of its instruction joins.
struct SingleAccess {
    std::uint32_t size = 0; ///< 1, 2, 4 or 8; 0: not such an instruction
    bool store = false;
};
/// x86-64: whether the instruction in `p` (its `n` bytes) is a SingleAccess, and which. Only the common general-
/// purpose forms, each with a memory operand where it has a ModRM byte: mov to and from memory (88, 89, 8A, 8B,
/// C6 /0, C7 /0), movzx, movsx and movsxd, the ALU operations that only read memory (add, or, adc, sbb, and, sub,
/// xor, cmp into a register; cmp r/m with a register or an immediate; test r/m; imul r, r/m; cmovcc, which loads
/// whether or not it moves), push and pop of a register or an immediate, call (a relative or a register target:
/// its return address stored), ret, leave, and jmp through memory. Anything else, or these with LOCK, REP,
/// an address-size prefix or a 16-bit stack operation, is not one (0): its accesses take the general path.
inline SingleAccess x86_single_access(const unsigned char* p, std::size_t n) {
    bool lock;
    const std::size_t i = skip_x86_prefixes(p, n, lock);
    if (i >= n) return {};
    bool operand_16 = false;
    for (std::size_t k = 0; k < i; ++k) {
        const unsigned char b = p[k];
        if (b == 0xF0 || b == 0xF2 || b == 0xF3 || b == 0x67) return {}; // LOCK, REP or mandatory, address size
        if (b == 0x66) operand_16 = true;
        if ((b & 0xF0) == 0x40 && k + 1 != i) return {}; // a REX not right before the opcode is ignored: unusual
    }
    const unsigned char rex = i > 0 && (p[i - 1] & 0xF0) == 0x40 ? p[i - 1] : 0;
    const std::uint32_t operand = (rex & 8) ? 8 : operand_16 ? 2 : 4; // the operand's size (not byte forms)
    const unsigned char op = p[i];
    const auto load = [](std::uint32_t size) { return SingleAccess{size, false}; };
    const auto store = [](std::uint32_t size) { return SingleAccess{size, true}; };
    // The stack's and control transfers' 8 bytes (a 16-bit push, pop, call or ret would move 2: not taken).
    if (op >= 0x50 && op <= 0x57) return operand_16 ? SingleAccess{} : store(8); // push r
    if (op >= 0x58 && op <= 0x5F) return operand_16 ? SingleAccess{} : load(8);  // pop r
    if (op == 0x68 || op == 0x6A || op == 0xE8) return operand_16 ? SingleAccess{} : store(8); // push imm, call
    if (op == 0xC3 || op == 0xC2 || op == 0xC9) return operand_16 ? SingleAccess{} : load(8); // ret, leave
    // The forms with a ModRM byte (after 0F for the two-byte opcodes).
    const bool two_bytes = op == 0x0F;
    const std::size_t at = i + (two_bytes ? 2 : 1);
    if (at >= n) return {};
    const unsigned char modrm = p[at];
    const bool memory = (modrm >> 6) != 3;
    const unsigned reg = (modrm >> 3) & 7u;
    if (two_bytes) {
        const unsigned char op2 = p[i + 1];
        if (!memory) return {};
        if (op2 == 0xB6 || op2 == 0xBE) return load(1);                    // movzx, movsx r, r/m8
        if (op2 == 0xB7 || op2 == 0xBF) return load(2);                    // movzx, movsx r, r/m16
        if (op2 == 0xAF || (op2 >= 0x40 && op2 <= 0x4F)) return load(operand); // imul r, r/m; cmovcc r, r/m
        return {};
    }
    if (!memory && op == 0xFF && reg == 2) return operand_16 ? SingleAccess{} : store(8); // call *%reg
    if (!memory) return {};
    if (op == 0xFF) return reg == 4 && !operand_16 ? load(8) : SingleAccess{};      // jmp *m
    if (op == 0x88) return store(1);                                                // mov r/m8, r8
    if (op == 0x89) return store(operand);                                          // mov r/m, r
    if (op == 0x8A) return load(1);                                                 // mov r8, r/m8
    if (op == 0x8B) return load(operand);                                           // mov r, r/m
    if (op == 0xC6) return reg == 0 ? store(1) : SingleAccess{};                    // mov r/m8, imm8
    if (op == 0xC7) return reg == 0 ? store(operand) : SingleAccess{};              // mov r/m, imm32
    if (op == 0x63) return operand_16 ? SingleAccess{} : load(4);                   // movsxd r, r/m32
    if (op == 0x69 || op == 0x6B) return load(operand);                             // imul r, r/m, imm
    if (op < 0x40 && (op & 7) == 2) return load(1);            // add, or, adc, sbb, and, sub, xor, cmp r8, r/m8
    if (op < 0x40 && (op & 7) == 3) return load(operand);      // the same, r, r/m
    if (op == 0x38 || op == 0x84) return load(1);              // cmp r/m8, r8; test r/m8, r8
    if (op == 0x39 || op == 0x85) return load(operand);        // cmp r/m, r; test r/m, r
    if (op == 0x80 && reg == 7) return load(1);                // cmp r/m8, imm8
    if ((op == 0x81 || op == 0x83) && reg == 7) return load(operand); // cmp r/m, imm
    if (op == 0xF6 && reg == 0) return load(1);                // test r/m8, imm8
    if (op == 0xF7 && reg == 0) return load(operand);          // test r/m, imm
    return {};
}

/// x86-64: whether the instruction in `p` (its `n` bytes) moves or compares a whole vector register with memory, and
/// then its one access (16 or 32 bytes, which QEMU 7.2 reports in 8-byte pieces): the SSE and AVX forms string and
/// copy routines use most (loads: movups, movupd, movaps, movapd, movdqa, movdqu, pcmpeqb/w/d, pminub, pmaxub, por,
/// pxor, pand; stores: movups, movupd, movaps, movapd, movdqa, movdqu, movntdq, movntps), legacy or VEX-encoded (VEX.L
/// gives 32 bytes); 0 for anything else. A hint: the plugin gives these a callback for their kind, which still
/// checks each piece's kind (a wrong hint costs a call, not a count).
inline SingleAccess x86_vector_access(const unsigned char* p, std::size_t n) {
    std::size_t i = 0;
    unsigned pp = 0; // the mandatory prefix: 0 none, 1 66, 2 F3, 3 F2
    bool wide = false;
    for (; i < n; ++i) { // legacy prefixes (a REX right before 0F), at most one of 66, F3, F2
        const unsigned char b = p[i];
        if (b == 0x66) pp = pp == 0 || pp == 1 ? 1 : 4;
        else if (b == 0xF3) pp = pp == 0 || pp == 2 ? 2 : 4;
        else if (b == 0xF2) pp = pp == 0 || pp == 3 ? 3 : 4;
        else if (b == 0xF0 || b == 0x67) return {}; // LOCK, address size: not taken
        else if (b == 0x2E || b == 0x36 || b == 0x3E || b == 0x26 || b == 0x64 || b == 0x65) continue;
        else if ((b & 0xF0) == 0x40 && i + 1 < n && p[i + 1] == 0x0F) continue;
        else break;
    }
    if (pp == 4 || i >= n) return {};
    unsigned char op = 0;
    if (p[i] == 0xC5 || p[i] == 0xC4) { // VEX (64-bit mode: always), after no legacy prefix
        if (i != 0) return {};
        if (p[i] == 0xC5) {
            if (i + 2 >= n) return {};
            wide = (p[i + 1] & 4) != 0;
            pp = p[i + 1] & 3;
            op = p[i + 2];
            i += 3;
        } else {
            if (i + 3 >= n || (p[i + 1] & 0x1F) != 1) return {}; // the 0F map alone
            wide = (p[i + 2] & 4) != 0;
            pp = p[i + 2] & 3;
            op = p[i + 3];
            i += 4;
        }
    } else {
        if (p[i] != 0x0F || i + 1 >= n) return {};
        op = p[i + 1];
        i += 2;
    }
    if (i >= n || (p[i] >> 6) == 3) return {}; // no memory operand
    const std::uint32_t size = wide ? 32 : 16;
    const bool plain = pp == 0 || pp == 1; // no prefix or 66: the packed forms (F3, F2: scalar ones)
    switch (op) {
    case 0x10: case 0x28: return plain ? SingleAccess{size, false} : SingleAccess{}; // movups/pd, movaps/pd
    case 0x11: case 0x29: case 0x2B: return plain ? SingleAccess{size, true} : SingleAccess{};
    case 0x6F: return pp == 1 || pp == 2 ? SingleAccess{size, false} : SingleAccess{}; // movdqa, movdqu
    case 0x7F: return pp == 1 || pp == 2 ? SingleAccess{size, true} : SingleAccess{};
    case 0xE7: return pp == 1 ? SingleAccess{size, true} : SingleAccess{}; // movntdq
    case 0x74: case 0x75: case 0x76: case 0xDA: case 0xDE: case 0xEB: case 0xEF: case 0xDB:
        return pp == 1 ? SingleAccess{size, false} : SingleAccess{}; // pcmpeqb/w/d, pminub, pmaxub, por, pxor, pand
    default: return {};
    }
}

} // namespace pmc_model
