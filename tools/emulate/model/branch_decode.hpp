// SPDX-License-Identifier: MIT
// branch_decode.hpp: what kind of branch an instruction is, for `pmc emulate --branches` (plain C++, no QEMU in it).
// QEMU ends a translated block at every branch, so the plugin decodes each block's last instruction once, at
// translation (plugin_branches.hpp), and the branch model needs no more than this: conditional or not, direct or
// indirect, or a return. Encodings: Intel's and Arm's architecture manuals.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pmc_model {

/// What a branch instruction is, for the branch model: a conditional branch, a direct jump or call, an indirect
/// jump or call (through a register or memory), a return, or no branch.
enum class BranchKind : std::uint8_t { none, conditional, direct, indirect, ret };

/// x86-64: the kind of the instruction in `p` (its `n` bytes).
inline BranchKind decode_x86(const unsigned char* p, std::size_t n) {
    std::size_t i = 0;
    for (; i < n; ++i) { // legacy prefixes and REX
        const unsigned char b = p[i];
        if (b == 0xF0 || b == 0xF2 || b == 0xF3 || b == 0x2E || b == 0x36 || b == 0x3E || b == 0x26 || b == 0x64 ||
            b == 0x65 || b == 0x66 || b == 0x67 || (b & 0xF0) == 0x40)
            continue;
        break;
    }
    if (i >= n) return BranchKind::none;
    const unsigned char op = p[i];
    if ((op & 0xF0) == 0x70) return BranchKind::conditional;         // Jcc rel8
    if (op >= 0xE0 && op <= 0xE3) return BranchKind::conditional;     // LOOPNE, LOOPE, LOOP, JrCXZ
    if (op == 0xE8 || op == 0xE9 || op == 0xEB) return BranchKind::direct; // call rel32, jmp rel32, jmp rel8
    if (op == 0xC3 || op == 0xC2 || op == 0xCB || op == 0xCA) return BranchKind::ret;
    if (op == 0x0F && i + 1 < n && (p[i + 1] & 0xF0) == 0x80) return BranchKind::conditional; // Jcc rel32
    if (op == 0xFF && i + 1 < n) {
        const unsigned reg = (p[i + 1] >> 3) & 7; // ModRM.reg: 2 call, 3 far call, 4 jmp, 5 far jmp (r/m)
        if (reg >= 2 && reg <= 5) return BranchKind::indirect;
    }
    return BranchKind::none;
}

/// AArch64: the kind of the instruction word `w`.
inline BranchKind decode_aarch64(std::uint32_t w) {
    if ((w & 0xFF000010u) == 0x54000000u) return BranchKind::conditional; // B.cond
    if ((w & 0x7E000000u) == 0x34000000u) return BranchKind::conditional; // CBZ, CBNZ
    if ((w & 0x7E000000u) == 0x36000000u) return BranchKind::conditional; // TBZ, TBNZ
    if ((w & 0x7C000000u) == 0x14000000u) return BranchKind::direct;      // B, BL
    if ((w & 0xFE000000u) == 0xD6000000u) {                          // branch to a register
        const unsigned opc = (w >> 21) & 0xF;
        if (opc == 0 || opc == 1 || opc == 8 || opc == 9) return BranchKind::indirect; // BR, BLR (and their PAC forms)
        if (opc == 2) return BranchKind::ret;                                           // RET (RETAA, RETAB)
    }
    return BranchKind::none;
}

} // namespace pmc_model
