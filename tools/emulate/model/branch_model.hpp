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

    /// What a branch's address gives its index, worked out once per translated block by the plugin, which calls the
    /// *_at forms at each execution: for a conditional branch, its address bits (the low address_bits after the
    /// shift) times the history's 128 values, so that the counter is at slot | history (the counter table is stored
    /// by address, then history: each counter has one index, so the predictions are Cachegrind's, and the update
    /// needs no shift); for an indirect one, the low target_table_bits.
    static std::uint32_t conditional_slot(std::uint64_t pc, unsigned zero_low_bits) noexcept {
        return static_cast<std::uint32_t>((pc >> zero_low_bits) & ((1u << address_bits) - 1)) << history_bits;
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
        const std::size_t outcome = taken ? 1 : 0;
        std::uint8_t& counter = counters_[slot | history_];
        const std::size_t at = std::size_t{counter} * 2 + outcome; // size_t: address arithmetic, no extension
        counter = counter_after_[at];
        history_ = (history_ * 2 + outcome) & ((std::size_t{1} << history_bits) - 1);
        ++counts_.conditional;
        counts_.conditional_misses += counter_after_[8 + at];
        return counter_after_[8 + at] != 0;
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
    /// The last history_bits outcomes of conditional branches, newest lowest.
    std::size_t history_ = 0;
    /// By (counter * 2 + taken): a two-bit counter's next value (up when taken, down when not, saturating at 0 and
    /// 3); 8 further, whether it mispredicted (2 and 3 predict taken). In the object, beside the history and the
    /// counts: addressed from the predictor's own address, on the same host cache line.
    std::array<std::uint8_t, 16> counter_after_{0, 1, 0, 2, 1, 3, 2, 3, /**/ 0, 1, 0, 1, 1, 0, 1, 0};
    unsigned shift_;
    BranchCounts counts_;
    /// By conditional_slot | history.
    std::array<std::uint8_t, std::size_t{1} << (history_bits + address_bits)> counters_{};
    std::array<std::uint64_t, std::size_t{1} << target_table_bits> targets_{};
};

} // namespace pmc_model
