// SPDX-License-Identifier: MIT
// branch_model.hpp: the branch predictor `pmc emulate` models for branch-misses, plain C++ with no QEMU in it.
// One BranchPredictor per guest thread.
//
// It is Cachegrind's (valgrind/cachegrind/cg_branchpred.c, read, not copied), so that Bcm and Bim compare:
//   - conditional branches: 16,384 two-bit saturating counters, all starting at 0 (strongly not taken), indexed
//     by the last 7 outcomes of conditional branches (global history, newest in the lowest bit) above the low 7
//     bits of the branch's address; a counter of 2 or 3 predicts taken;
//   - indirect branches (and returns: there is no return stack): 512 entries, indexed by the low 9 bits of the
//     branch's address, each the last target seen there (all 0 at first); a different target is a miss.
// Instruction addresses are shifted right first by the bits the architecture keeps zero: 0 on x86-64, 2 on
// AArch64 (Cachegrind's N_IADDR_LO_ZERO_BITS).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace pmc_model {

struct BranchCounts {
    std::uint64_t conditional = 0;        ///< Cachegrind's Bc
    std::uint64_t conditional_misses = 0; ///< Bcm
    std::uint64_t indirect = 0;           ///< Bi
    std::uint64_t indirect_misses = 0;    ///< Bim
};

class BranchPredictor {
public:
    static constexpr unsigned history_bits = 7;
    static constexpr unsigned address_bits = 7;
    static constexpr unsigned target_table_bits = 9;

    /// `zero_low_bits`: 0 for x86-64, 2 for AArch64 (instructions are 4-byte aligned).
    explicit BranchPredictor(unsigned zero_low_bits = 0) noexcept : shift_(zero_low_bits) {}

    /// What a branch's address gives its index, the low bits after the shift (address_bits of them for a
    /// conditional branch, target_table_bits for an indirect one): the plugin works them out once per translated
    /// block and calls the *_at forms at each execution.
    static std::uint32_t conditional_slot(std::uint64_t pc, unsigned zero_low_bits) noexcept {
        return static_cast<std::uint32_t>((pc >> zero_low_bits) & ((1u << address_bits) - 1));
    }
    static std::uint32_t indirect_slot(std::uint64_t pc, unsigned zero_low_bits) noexcept {
        return static_cast<std::uint32_t>((pc >> zero_low_bits) & ((1u << target_table_bits) - 1));
    }

    /// A conditional branch at `pc`, taken or not: true if the predictor got it wrong.
    bool conditional(std::uint64_t pc, bool taken) noexcept {
        return conditional_at(conditional_slot(pc, shift_), taken);
    }
    /// The same, from the branch's conditional_slot.
    bool conditional_at(std::uint32_t slot, bool taken) noexcept {
        const unsigned outcome = taken ? 1u : 0u;
        std::uint8_t& counter = counters_[history_row_ | slot];
        const std::size_t at = std::size_t{counter} * 2 + outcome; // (a size_t: 8 + at is then an address offset)
        counter = counter_after[at];
        history_row_ = ((history_row_ << 1) | (outcome << address_bits)) & history_row_mask;
        ++counts_.conditional;
        counts_.conditional_misses += counter_after[8 + at];
        return counter_after[8 + at] != 0;
    }

    /// An indirect branch (or return) at `pc` going to `target`: true if the predictor got it wrong.
    bool indirect(std::uint64_t pc, std::uint64_t target) noexcept {
        return indirect_at(indirect_slot(pc, shift_), target);
    }
    /// The same, from the branch's indirect_slot.
    bool indirect_at(std::uint32_t slot, std::uint64_t target) noexcept {
        std::uint64_t& last = targets_[slot];
        const bool miss = last != target;
        last = target;
        ++counts_.indirect;
        counts_.indirect_misses += miss ? 1 : 0;
        return miss;
    }

    const BranchCounts& counts() const noexcept { return counts_; }

private:
    /// By (counter * 2 + taken): a two-bit counter's next value (up when taken, down when not, saturating at 0 and
    /// 3); 8 further, whether it mispredicted (2 and 3 predict taken). One table: one address to form.
    static constexpr std::uint8_t counter_after[16] = {0, 1, 0, 2, 1, 3, 2, 3, /**/ 0, 1, 0, 1, 1, 0, 1, 0};
    static constexpr std::uint32_t history_row_mask = ((1u << history_bits) - 1) << address_bits;

    unsigned shift_;
    /// The last history_bits outcomes (newest lowest) shifted above the address bits: the counter's row.
    std::uint32_t history_row_ = 0;
    std::array<std::uint8_t, std::size_t{1} << (history_bits + address_bits)> counters_{};
    std::array<std::uint64_t, std::size_t{1} << target_table_bits> targets_{};
    BranchCounts counts_;
};

} // namespace pmc_model
