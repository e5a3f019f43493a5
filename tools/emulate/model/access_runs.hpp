// SPDX-License-Identifier: MIT
// access_runs.hpp: runs of x86-64 data accesses whose addresses follow from one another, found at translation, so
// that `pmc emulate --cache` needs one QEMU callback per run instead of one per access (plain C++, no QEMU in it).
//
// A run is two or more adjacent instructions of one translated block, each making one plain access of at most 8
// bytes at a known offset from one base register that no member changes except by a known amount: push and pop
// (and call and ret, which end a block) move %rsp by 8 and access the slot at it; a mov-family access
// `disp(base)` (no index, no RIP, no segment) leaves its base alone unless it loads into it, which ends the run.
// QEMU calls a memory callback after its access completes, so the callback on a run's last member sees every
// member done and, from the last address, every member's address; it models them in program order. No other
// access of the thread comes between them, so every cache count is what a callback per access would count.
// Encodings: Intel's architecture manual, volume 2.
#pragma once

#include "access_decode.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pmc_model {

/// One instruction seen as a possible run member: its access is at base + displacement (base as it was before the
/// instruction), after which the instruction adds base_change to base; writes_base: it also sets base to a value
/// the decoder does not know (a load into the base register).
struct RunAccess {
    bool member = false; ///< false: its accesses keep their own callbacks
    int base = -1;       ///< 0-15 in x86's order (4: %rsp)
    std::int64_t displacement = 0;
    std::int64_t base_change = 0;
    std::uint32_t size = 0;
    bool store = false;
    int written = -1; ///< the general register the instruction loads into, -1 for none (a store)
};

/// Decodes the instruction in `p` (its `n` bytes) as a run member, or returns member == false.
inline RunAccess x86_run_access(const unsigned char* p, std::size_t n) {
    std::size_t i = 0;
    bool operand_16 = false;
    unsigned char rex = 0;
    for (; i < n; ++i) {
        if (p[i] == 0x66) operand_16 = true;
        else if ((p[i] & 0xF0) == 0x40 && !rex) rex = p[i];
        else break;
    }
    // REX counts only right before the opcode; any other prefix (LOCK, REP, a segment, 0x67) leaves the decoder.
    if (i >= n || (rex && p[i - 1] != rex)) return {};
    const unsigned char op = p[i];
    const bool wide = (rex & 8) != 0;
    RunAccess a;
    const auto stack = [&](std::int64_t displacement, std::int64_t change, bool store) {
        if (operand_16) return RunAccess{};
        return RunAccess{true, 4, displacement, change, 8, store, -1};
    };
    if (op >= 0x50 && op <= 0x57) return stack(-8, -8, true);              // push r
    if (op >= 0x58 && op <= 0x5F) {                                         // pop r
        const int reg = (op & 7) | ((rex & 1) << 3);
        if (reg == 4) return {};                                            // pop %rsp: %rsp from memory
        RunAccess r = stack(0, 8, false);
        r.written = reg;
        return r;
    }
    if (op == 0xE8) return stack(-8, -8, true);                             // call rel32
    if (op == 0xC3) return stack(0, 8, false);                              // ret
    if (op == 0xFF && i + 1 < n && (p[i + 1] >> 6) == 3 && ((p[i + 1] >> 3) & 7) == 2)
        return stack(-8, -8, true);                                         // call *%reg
    // The mov family: opcode, ModRM (a memory operand), then its displacement (and an immediate: not needed).
    std::size_t modrm = i + 1;
    std::uint32_t size = 0;
    bool store = false, byte_register = false;
    const std::uint32_t operand = wide ? 8 : operand_16 ? 2 : 4;
    if (op == 0x88) size = 1, store = true;                                 // mov r/m8, r8
    else if (op == 0x89) size = operand, store = true;                      // mov r/m, r
    else if (op == 0x8A) size = 1, byte_register = true;                    // mov r8, r/m8
    else if (op == 0x8B) size = operand;                                    // mov r, r/m
    else if (op == 0xC6 || op == 0xC7) {                                    // mov r/m, imm
        if (modrm >= n || ((p[modrm] >> 3) & 7) != 0) return {};
        size = op == 0xC6 ? 1 : operand, store = true;
    } else if (op == 0x63 && wide) size = 4;                                // movsxd r64, r/m32
    else if (op == 0x0F && i + 1 < n) {                                     // movzx, movsx
        const unsigned char op2 = p[i + 1];
        if (op2 != 0xB6 && op2 != 0xB7 && op2 != 0xBE && op2 != 0xBF) return {};
        size = (op2 & 1) ? 2 : 1;
        modrm = i + 2;
    } else return {};
    const MemoryOperand m = x86_memory_operand(p, n, modrm, rex);
    if (!m.memory || m.base < 0 || m.index >= 0 || m.rip_relative || m.segment >= 0 || m.address_32) return {};
    a.member = true;
    a.base = m.base;
    a.displacement = m.displacement;
    a.size = size;
    a.store = store;
    if (!store) {
        int reg = static_cast<int>(((p[modrm] >> 3) & 7u) | ((rex & 4u) << 1));
        if (byte_register && !rex && reg >= 4) reg -= 4; // %ah..%bh: parts of %rax..%rbx
        a.written = reg;
    }
    return a;
}

/// One member of a run: its instruction's index in the block, and where its access is, from the run's last
/// address (0 for the last member itself).
struct RunMember {
    std::uint32_t index;
    std::int64_t offset;
    std::uint32_t size;
    bool store;
};
struct AccessRun {
    std::vector<RunMember> members; ///< in program order; the last one's callback models them all
};

/// A run may hold at most this many members (a longer sequence is cut into runs).
constexpr std::size_t max_run_members = 16;

/// The runs in a block whose instructions decode as `accesses` (x86_run_access of each, in order).
inline std::vector<AccessRun> find_access_runs(const std::vector<RunAccess>& accesses) {
    std::vector<AccessRun> runs;
    std::vector<RunMember> open;
    std::vector<std::int64_t> at; // each open member's address from the base's value at the run's start
    int base = -1;
    std::int64_t change = 0;
    const auto close = [&] {
        if (open.size() >= 2) {
            AccessRun r;
            for (std::size_t k = 0; k < open.size(); ++k)
                r.members.push_back(RunMember{open[k].index, at[k] - at.back(), open[k].size, open[k].store});
            runs.push_back(std::move(r));
        }
        open.clear();
        at.clear();
        base = -1;
    };
    for (std::size_t i = 0; i < accesses.size(); ++i) {
        const RunAccess& a = accesses[i];
        if (!a.member) {
            close();
            continue;
        }
        if (a.base != base || open.size() == max_run_members) {
            close();
            base = a.base;
            change = 0;
        }
        open.push_back(RunMember{static_cast<std::uint32_t>(i), 0, a.size, a.store});
        at.push_back(change + a.displacement);
        change += a.base_change;
        if (a.written == base) close(); // the base is now unknown: this member ends its run
    }
    close();
    return runs;
}

} // namespace pmc_model
