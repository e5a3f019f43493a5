// SPDX-License-Identifier: MIT
// load_sampler.hpp: load-latency samples from the cache model, plain C++ with no QEMU in it. One LoadSampler per
// guest thread, fed every load (after DataAccessMerger: a split load is one load) with the level that served it.
//
// It takes every Nth load (N: the period), exactly, from the thread's first: no randomization, so that two runs
// of the same program give the same samples. A sample holds the load's instruction address, its data address,
// the level and a latency that is a fixed figure per level (LoadLatencies: stated, not measured), and the
// perf_mem_data_src bits a PMU would write for it, so that the sample records the PMU path decodes
// (pmc::decode_data_source) carry it unchanged.
#pragma once

#include "cache_model.hpp"

#include <linux/perf_event.h>

#include <cstdint>
#include <stdexcept>

namespace pmc_model {

/// The latency, in cycles, a sample reports for a load served at each level. The defaults are round figures of a
/// current x86 core's load-to-use latencies (L1 4-5, L2 12-16, LLC 40-50, DRAM 200+ cycles), chosen to be plainly
/// a model's: they order the levels, they do not measure a machine.
struct LoadLatencies {
    std::uint32_t l1 = 4;
    std::uint32_t l2 = 12;
    std::uint32_t ll = 40;
    std::uint32_t memory = 200;

    std::uint32_t of(Level level) const noexcept {
        switch (level) {
        case Level::l1: return l1;
        case Level::l2: return l2;
        case Level::ll: return ll;
        default: return memory;
        }
    }
};

/// PERF_SAMPLE_DATA_SRC for a load served at `level`, as the kernel encodes it: op load, the level as a hit (mem_lvl
/// and mem_lvl_num), memory as local RAM. The model's LL is reported as L3: it is the last cache before memory,
/// what perf calls LLC, whether or not an L2 is modelled.
inline std::uint64_t data_source_bits(Level level) noexcept {
    std::uint64_t lvl = PERF_MEM_LVL_HIT, num = 0;
    switch (level) {
    case Level::l1: lvl |= PERF_MEM_LVL_L1, num = PERF_MEM_LVLNUM_L1; break;
    case Level::l2: lvl |= PERF_MEM_LVL_L2, num = PERF_MEM_LVLNUM_L2; break;
    case Level::ll: lvl |= PERF_MEM_LVL_L3, num = PERF_MEM_LVLNUM_L3; break;
    default: lvl |= PERF_MEM_LVL_LOC_RAM, num = PERF_MEM_LVLNUM_RAM; break;
    }
    return (std::uint64_t{PERF_MEM_OP_LOAD} << PERF_MEM_OP_SHIFT) | (lvl << PERF_MEM_LVL_SHIFT) |
           (num << PERF_MEM_LVLNUM_SHIFT) | (std::uint64_t{PERF_MEM_SNOOP_NA} << PERF_MEM_SNOOP_SHIFT) |
           (std::uint64_t{PERF_MEM_LOCK_NA} << PERF_MEM_LOCK_SHIFT) |
           (std::uint64_t{PERF_MEM_TLB_NA} << PERF_MEM_TLB_SHIFT);
}

struct LoadSample {
    std::uint64_t ip;
    std::uint64_t address;
    Level level;
    std::uint32_t latency;     ///< cycles, from LoadLatencies
    std::uint64_t data_source; ///< data_source_bits(level)
};

class LoadSampler {
public:
    /// Throws std::invalid_argument for a period of 0.
    explicit LoadSampler(std::uint64_t period, LoadLatencies latencies = {})
        : period_(period), left_(period), latencies_(latencies) {
        if (period == 0) throw std::invalid_argument("load sampler: the period must be at least 1 load");
    }

    /// One load. Every period-th call fills `sample` and returns true.
    bool load(std::uint64_t ip, std::uint64_t address, Level level, LoadSample& sample) noexcept {
        ++loads_;
        if (__builtin_expect(--left_ != 0, 1)) return false;
        left_ = period_;
        sample = LoadSample{ip, address, level, latencies_.of(level), data_source_bits(level)};
        ++samples_;
        return true;
    }

    std::uint64_t period() const noexcept { return period_; }
    std::uint64_t loads() const noexcept { return loads_; }
    std::uint64_t samples() const noexcept { return samples_; }
    const LoadLatencies& latencies() const noexcept { return latencies_; }

private:
    std::uint64_t period_;
    std::uint64_t left_;
    LoadLatencies latencies_;
    std::uint64_t loads_ = 0;
    std::uint64_t samples_ = 0;
};

} // namespace pmc_model
