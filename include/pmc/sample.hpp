// SPDX-License-Identifier: MIT
// pmc/sample.hpp: what one sample holds (pmc::Sample) and the decoded data source of a memory access
// (pmc::DataSource). pmc::Sampler (pmc/sampler.hpp) fills them from the kernel's PERF_RECORD_SAMPLE records.
#pragma once

#include <pmc/config.hpp>

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <string>

PMC_BEGIN_NAMESPACE

/// The fields a sample can carry: pass an OR of these as SamplerOptions::fields. They are the kernel's
/// PERF_SAMPLE_* bits, so Sample::fields can be tested against them too.
namespace sample {
inline constexpr std::uint64_t ip = PERF_SAMPLE_IP;               ///< instruction pointer
inline constexpr std::uint64_t tid = PERF_SAMPLE_TID;             ///< process and thread id
inline constexpr std::uint64_t time = PERF_SAMPLE_TIME;           ///< perf clock, ns
inline constexpr std::uint64_t addr = PERF_SAMPLE_ADDR;           ///< data address (page faults, memory events)
inline constexpr std::uint64_t cpu = PERF_SAMPLE_CPU;             ///< the CPU it ran on
inline constexpr std::uint64_t period = PERF_SAMPLE_PERIOD;       ///< events this sample stands for (always on)
inline constexpr std::uint64_t callchain = PERF_SAMPLE_CALLCHAIN; ///< return addresses (frame pointers)
inline constexpr std::uint64_t weight = PERF_SAMPLE_WEIGHT;       ///< a latency, in cycles, where the PMU gives one
inline constexpr std::uint64_t weight_struct = PERF_SAMPLE_WEIGHT_STRUCT; ///< the weight split in three (Linux 5.12)
inline constexpr std::uint64_t data_src = PERF_SAMPLE_DATA_SRC;   ///< where the access was served (see DataSource)
/// Every field pmc parses; other PERF_SAMPLE_* bits are refused at open.
inline constexpr std::uint64_t supported =
    ip | tid | time | addr | cpu | period | callchain | weight | weight_struct | data_src | PERF_SAMPLE_IDENTIFIER |
    PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID;
} // namespace sample

/// Where a sampled memory access was served from: PERF_SAMPLE_DATA_SRC decoded (the kernel's perf_mem_data_src).
/// PMUs fill it for their memory events (Intel PEBS loads/stores, AMD IBS op, Arm SPE); elsewhere it reads as
/// "not available".
struct DataSource {
    enum class Op : std::uint8_t { unknown, load, store, prefetch, exec };
    /// The level that served the access (mem_lvl_num where the kernel gives it, else the older mem_lvl bits).
    enum class Level : std::uint8_t { unknown, l1, lfb, l2, l3, l4, any_cache, ram, remote_ram, remote_cache, pmem, io, uncached };
    enum class Outcome : std::uint8_t { unknown, hit, miss };
    enum class Snoop : std::uint8_t { unknown, none, hit, miss, hit_modified };

    std::uint64_t raw = 0;
    Op op = Op::unknown;
    Level level = Level::unknown;
    Outcome outcome = Outcome::unknown; ///< hit or miss at `level`
    bool remote = false;                ///< served by another socket or node
    Outcome tlb = Outcome::unknown;     ///< data TLB: hit or miss
    Snoop snoop = Snoop::unknown;
    bool locked = false;                ///< a locked (atomic) access
};

inline const char* to_string(DataSource::Op op) {
    switch (op) {
    case DataSource::Op::load: return "load";
    case DataSource::Op::store: return "store";
    case DataSource::Op::prefetch: return "prefetch";
    case DataSource::Op::exec: return "exec";
    default: return "op?";
    }
}
inline const char* to_string(DataSource::Level level) {
    switch (level) {
    case DataSource::Level::l1: return "L1";
    case DataSource::Level::lfb: return "LFB";
    case DataSource::Level::l2: return "L2";
    case DataSource::Level::l3: return "L3";
    case DataSource::Level::l4: return "L4";
    case DataSource::Level::any_cache: return "cache";
    case DataSource::Level::ram: return "RAM";
    case DataSource::Level::remote_ram: return "remote RAM";
    case DataSource::Level::remote_cache: return "remote cache";
    case DataSource::Level::pmem: return "PMEM";
    case DataSource::Level::io: return "I/O";
    case DataSource::Level::uncached: return "uncached";
    default: return "level?";
    }
}
inline const char* to_string(DataSource::Outcome o) {
    return o == DataSource::Outcome::hit ? "hit" : o == DataSource::Outcome::miss ? "miss" : "?";
}
inline const char* to_string(DataSource::Snoop s) {
    switch (s) {
    case DataSource::Snoop::none: return "none";
    case DataSource::Snoop::hit: return "hit";
    case DataSource::Snoop::miss: return "miss";
    case DataSource::Snoop::hit_modified: return "HITM";
    default: return "?";
    }
}

/// Decodes PERF_SAMPLE_DATA_SRC (bit layout: union perf_mem_data_src in linux/perf_event.h).
inline DataSource decode_data_source(std::uint64_t raw) {
    auto bits = [raw](unsigned shift, unsigned width) { return (raw >> shift) & ((std::uint64_t{1} << width) - 1); };
    DataSource d;
    d.raw = raw;
    const auto op = bits(PERF_MEM_OP_SHIFT, 5);
    d.op = op & PERF_MEM_OP_LOAD ? DataSource::Op::load
           : op & PERF_MEM_OP_STORE ? DataSource::Op::store
           : op & PERF_MEM_OP_PFETCH ? DataSource::Op::prefetch
           : op & PERF_MEM_OP_EXEC ? DataSource::Op::exec
                                    : DataSource::Op::unknown;
    const auto lvl = bits(PERF_MEM_LVL_SHIFT, 14);
    d.outcome = lvl & PERF_MEM_LVL_HIT ? DataSource::Outcome::hit
                : lvl & PERF_MEM_LVL_MISS ? DataSource::Outcome::miss
                                          : DataSource::Outcome::unknown;
    d.remote = bits(PERF_MEM_REMOTE_SHIFT, 1) != 0 || (lvl & (PERF_MEM_LVL_REM_RAM1 | PERF_MEM_LVL_REM_RAM2 |
                                                              PERF_MEM_LVL_REM_CCE1 | PERF_MEM_LVL_REM_CCE2));
    // mem_lvl_num (Linux 4.14) names the level directly; PMUs that fill it set mem_lvl to NA.
    switch (bits(PERF_MEM_LVLNUM_SHIFT, 4)) {
    case PERF_MEM_LVLNUM_L1: d.level = DataSource::Level::l1; break;
    case PERF_MEM_LVLNUM_L2: d.level = DataSource::Level::l2; break;
    case PERF_MEM_LVLNUM_L3: d.level = DataSource::Level::l3; break;
    case PERF_MEM_LVLNUM_L4: d.level = DataSource::Level::l4; break;
    case PERF_MEM_LVLNUM_ANY_CACHE: d.level = DataSource::Level::any_cache; break;
    case PERF_MEM_LVLNUM_LFB: d.level = DataSource::Level::lfb; break;
    case PERF_MEM_LVLNUM_RAM: d.level = d.remote ? DataSource::Level::remote_ram : DataSource::Level::ram; break;
    case PERF_MEM_LVLNUM_PMEM: d.level = DataSource::Level::pmem; break;
    default: break;
    }
    if (d.level == DataSource::Level::unknown) {
        d.level = lvl & PERF_MEM_LVL_L1 ? DataSource::Level::l1
                  : lvl & PERF_MEM_LVL_LFB ? DataSource::Level::lfb
                  : lvl & PERF_MEM_LVL_L2 ? DataSource::Level::l2
                  : lvl & PERF_MEM_LVL_L3 ? DataSource::Level::l3
                  : lvl & PERF_MEM_LVL_LOC_RAM ? DataSource::Level::ram
                  : lvl & (PERF_MEM_LVL_REM_RAM1 | PERF_MEM_LVL_REM_RAM2) ? DataSource::Level::remote_ram
                  : lvl & (PERF_MEM_LVL_REM_CCE1 | PERF_MEM_LVL_REM_CCE2) ? DataSource::Level::remote_cache
                  : lvl & PERF_MEM_LVL_IO ? DataSource::Level::io
                  : lvl & PERF_MEM_LVL_UNC ? DataSource::Level::uncached
                                           : DataSource::Level::unknown;
    }
    const auto snoop = bits(PERF_MEM_SNOOP_SHIFT, 5);
    d.snoop = snoop & PERF_MEM_SNOOP_HITM ? DataSource::Snoop::hit_modified
              : snoop & PERF_MEM_SNOOP_HIT ? DataSource::Snoop::hit
              : snoop & PERF_MEM_SNOOP_MISS ? DataSource::Snoop::miss
              : snoop & PERF_MEM_SNOOP_NONE ? DataSource::Snoop::none
                                            : DataSource::Snoop::unknown;
    d.locked = bits(PERF_MEM_LOCK_SHIFT, 2) & PERF_MEM_LOCK_LOCKED;
    const auto tlb = bits(PERF_MEM_TLB_SHIFT, 7);
    d.tlb = tlb & PERF_MEM_TLB_HIT ? DataSource::Outcome::hit
            : tlb & PERF_MEM_TLB_MISS ? DataSource::Outcome::miss
                                      : DataSource::Outcome::unknown;
    return d;
}

/// "load L3 hit, TLB miss, snoop HITM" (parts the PMU did not fill are left out); "n/a" when nothing is known.
inline std::string describe(const DataSource& d) {
    std::string s;
    auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
    std::string access;
    if (d.op != DataSource::Op::unknown) access = to_string(d.op);
    if (d.level != DataSource::Level::unknown) access += (access.empty() ? "" : " ") + std::string(to_string(d.level));
    if (d.outcome != DataSource::Outcome::unknown)
        access += (access.empty() ? "" : " ") + std::string(to_string(d.outcome));
    if (!access.empty()) add(access);
    if (d.tlb != DataSource::Outcome::unknown) add(std::string("TLB ") + to_string(d.tlb));
    if (d.snoop != DataSource::Snoop::unknown) add(std::string("snoop ") + to_string(d.snoop));
    if (d.locked) add("locked");
    if (d.remote) add("remote");
    return s.empty() ? "n/a" : s;
}

/// One sample. Only the fields in `fields` were recorded (the rest are 0). `callchain` points into the ring (or
/// pmc's scratch copy of a record that wrapped) and is valid only during the callback that received the sample.
struct Sample {
    std::uint64_t fields = 0; ///< the PERF_SAMPLE_* bits recorded (pmc::sample::*)
    std::uint64_t ip = 0;
    std::uint32_t pid = 0, tid = 0;
    std::uint64_t time = 0;
    std::uint64_t addr = 0;
    std::uint32_t cpu = 0;
    std::uint64_t period = 0; ///< the events this sample stands for
    /// PERF_SAMPLE_WEIGHT: the whole weight (a latency in cycles on most PMUs). PERF_SAMPLE_WEIGHT_STRUCT: its
    /// first 32 bits (var1, the total latency), with var2 (Intel: the instruction latency) and var3 beside it.
    std::uint64_t weight = 0;
    std::uint16_t weight_var2 = 0, weight_var3 = 0;
    DataSource data_source;
    const std::uint64_t* callchain = nullptr;
    std::size_t callchain_size = 0;

    bool has(std::uint64_t field) const noexcept { return (fields & field) == field; }
};

PMC_END_NAMESPACE
