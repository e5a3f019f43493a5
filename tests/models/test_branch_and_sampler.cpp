// SPDX-License-Identifier: MIT
// The branch predictor (tools/emulate/model/branch_model.hpp) on patterns whose mispredictions are known by hand,
// and the load sampler (load_sampler.hpp): every Nth load, its fields, and data-source bits that pmc's own decoder
// of PMU samples reads back as the level.
#include "catch.hpp"

#include <model/branch_model.hpp>
#include <model/load_sampler.hpp>

#include <pmc/sample.hpp>

#include <cstdint>
#include <vector>

using namespace pmc_model;

TEST_CASE("predictor: an always-taken branch mispredicts 9 times, then never") {
    // Counters start at 0 (strongly not taken). The history fills with ones over the first 7 branches (indexes
    // 0, 1, 3, ..., 63: a fresh counter each, 7 misses); at history 127 the counter needs two more (0 -> 1 -> 2).
    BranchPredictor p;
    std::uint64_t misses_after_ten = 0;
    for (int i = 0; i < 1000; ++i) {
        const bool miss = p.conditional(0x401000, true);
        if (i >= 9) misses_after_ten += miss ? 1 : 0;
    }
    REQUIRE(p.counts().conditional == 1000);
    REQUIRE(p.counts().conditional_misses == 9);
    REQUIRE(misses_after_ten == 0);
}

TEST_CASE("predictor: a counter saturates at 3, so one not-taken branch leaves it predicting taken") {
    // 20 taken: the counter at history 127 climbs to 3 and stays. One not taken there: a miss, 3 -> 2. Then 7 taken
    // come back to history 127 through histories 126, 125, 123, 119, 111, 95 (fresh: 0) and 63 (1 since the
    // warm-up): 7 misses. At 127 the counter is 2, still taken: no miss (one that stopped short of 3 would now be
    // at 1 and miss).
    BranchPredictor p;
    for (int i = 0; i < 20; ++i) p.conditional(0x401000, true);
    const std::uint64_t warm = p.counts().conditional_misses;
    REQUIRE(p.conditional(0x401000, false));
    for (int i = 0; i < 7; ++i) REQUIRE(p.conditional(0x401000, true));
    REQUIRE(!p.conditional(0x401000, true));
    REQUIRE(p.counts().conditional_misses == warm + 8);
}

TEST_CASE("predictor: the same misses as a plain model of two-bit counters, global history and a target table") {
    // The reference: the predictor's description (branch_model.hpp) written out the plain way, against 200,000
    // branches from a fixed pseudo-random sequence over a few addresses, for both address shifts.
    for (const unsigned shift : {0u, 2u}) {
        BranchPredictor p(shift);
        std::vector<int> counter(16384, 0);
        std::vector<std::uint64_t> target(512, 0);
        unsigned history = 0;
        std::uint64_t x = 88172645463325252ull, misses = 0;
        for (int i = 0; i < 200000; ++i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const std::uint64_t pc = 0x400000 + ((x >> 8) % 40) * 4;
            if ((x & 7) == 0) { // an indirect branch to one of 3 targets
                const std::uint64_t to = 0x500000 + ((x >> 20) % 3) * 64;
                std::uint64_t& last = target[(pc >> shift) % 512];
                const bool miss = last != to;
                last = to;
                REQUIRE(p.indirect(pc, to) == miss);
                continue;
            }
            const bool taken = ((x >> 32) % 4) != 0 || (pc & 8) != 0; // mostly taken, some addresses always
            int& c = counter[((history % 128) * 128) + ((pc >> shift) % 128)];
            const bool miss = (c >= 2) != taken;
            c = taken ? (c == 3 ? 3 : c + 1) : (c == 0 ? 0 : c - 1);
            history = (history << 1 | (taken ? 1u : 0u)) % 128;
            misses += miss ? 1 : 0;
            REQUIRE(p.conditional(pc, taken) == miss);
        }
        REQUIRE(p.counts().conditional_misses == misses);
    }
}

TEST_CASE("predictor: a never-taken branch never mispredicts") {
    BranchPredictor p;
    for (int i = 0; i < 1000; ++i) REQUIRE(!p.conditional(0x401000, false));
    REQUIRE(p.counts().conditional_misses == 0);
}

TEST_CASE("predictor: alternation is learnt through the history, without history it would miss half the time") {
    // Taken, not taken, ...: the history alternates 0101010 / 1010101, each with a counter of its own, which learns
    // its outcome after two visits. Misses: the warm-up only (by hand: branches 0, 2, 4, 6 on fresh counters and 8
    // on a counter at 1), none after.
    BranchPredictor p;
    std::uint64_t late = 0;
    for (int i = 0; i < 1000; ++i) {
        const bool miss = p.conditional(0x401000, i % 2 == 0);
        if (i >= 10) late += miss ? 1 : 0;
    }
    REQUIRE(late == 0);
    REQUIRE(p.counts().conditional_misses == 5);
    // Period 3 (taken, taken, not taken): three histories, each with one outcome: learnt too.
    BranchPredictor q;
    late = 0;
    for (int i = 0; i < 3000; ++i) {
        const bool miss = q.conditional(0x401000, i % 3 != 2);
        if (i >= 30) late += miss ? 1 : 0;
    }
    REQUIRE(late == 0);
}

TEST_CASE("predictor: the index is 7 history bits above 7 address bits, x86 uses every address bit, AArch64 drops 2") {
    // Train 0x401000 taken until its counter saturates at history 127.
    const auto trained = [](unsigned zero_low_bits) {
        BranchPredictor p(zero_low_bits);
        for (int i = 0; i < 20; ++i) p.conditional(0x401000, true);
        return p;
    };
    // 128 bytes further (x86): the same 7 address bits, the same counter, predicted taken: a not-taken one misses.
    REQUIRE(trained(0).conditional(0x401000 + 128, false));
    // One byte further: another counter (0, predicts not taken): no miss.
    REQUIRE(!trained(0).conditional(0x401001, false));
    // AArch64 (2 zero bits): 4 bytes further is another counter, 512 further the same one.
    REQUIRE(!trained(2).conditional(0x401004, false));
    REQUIRE(!trained(2).conditional(0x401000 + 128, false)); // (x86's alias is another counter here)
    REQUIRE(trained(2).conditional(0x401000 + 512, false));
}

TEST_CASE("predictor: indirect branches predict the last target of their table entry (512, by address)") {
    BranchPredictor p;
    REQUIRE(p.indirect(0x402000, 0x500000));  // the table starts at 0
    REQUIRE(!p.indirect(0x402000, 0x500000));
    REQUIRE(!p.indirect(0x402000, 0x500000));
    REQUIRE(p.indirect(0x402000, 0x500100));  // a new target
    REQUIRE(p.indirect(0x402000, 0x500000));  // and back: each change misses
    REQUIRE(p.indirect(0x402000 + 512, 0x600000)); // aliases with 0x402000: its entry is overwritten
    REQUIRE(p.indirect(0x402000, 0x500000));
    REQUIRE(p.indirect(0x402001, 0x500000));  // another entry, still 0
    REQUIRE(p.counts().indirect == 8);
    REQUIRE(p.counts().indirect_misses == 6);
    // A return alternating between two callers (no return stack): every one misses.
    BranchPredictor r;
    for (int i = 0; i < 100; ++i) r.indirect(0x403000, i % 2 ? 0x404010 : 0x405020);
    REQUIRE(r.counts().indirect_misses == 100);
    REQUIRE(r.counts().conditional == 0);
}

TEST_CASE("load sampler: every Nth load, exactly, with its address, level and the stated latency") {
    LoadSampler s(3);
    std::vector<LoadSample> samples;
    const Level levels[] = {Level::l1, Level::l2, Level::ll, Level::memory};
    for (std::uint64_t i = 1; i <= 12; ++i) {
        LoadSample sample{};
        if (s.load(0x400000 + i, 0x7000 + 8 * i, levels[i % 4], sample)) samples.push_back(sample);
    }
    REQUIRE(samples.size() == 4);
    REQUIRE(s.loads() == 12);
    REQUIRE(s.samples() == 4);
    const LoadLatencies latencies;
    for (std::size_t k = 0; k < samples.size(); ++k) {
        const std::uint64_t i = 3 * (k + 1); // loads 3, 6, 9, 12
        CAPTURE(k);
        REQUIRE(samples[k].ip == 0x400000 + i);
        REQUIRE(samples[k].address == 0x7000 + 8 * i);
        REQUIRE(samples[k].level == levels[i % 4]);
        REQUIRE(samples[k].latency == latencies.of(levels[i % 4]));
    }
    REQUIRE(latencies.of(Level::l1) < latencies.of(Level::l2));
    REQUIRE(latencies.of(Level::l2) < latencies.of(Level::ll));
    REQUIRE(latencies.of(Level::ll) < latencies.of(Level::memory));

    LoadSampler every(1, LoadLatencies{1, 2, 3, 4});
    LoadSample one{};
    REQUIRE(every.load(1, 2, Level::ll, one));
    REQUIRE(one.latency == 3);
    REQUIRE_THROWS_AS(LoadSampler(0), std::invalid_argument);
}

TEST_CASE("load sampler: the data-source bits decode, through pmc's PMU sample decoder, to the level") {
    const std::pair<Level, pmc::DataSource::Level> expected[] = {{Level::l1, pmc::DataSource::Level::l1},
                                                                  {Level::l2, pmc::DataSource::Level::l2},
                                                                  {Level::ll, pmc::DataSource::Level::l3},
                                                                  {Level::memory, pmc::DataSource::Level::ram}};
    for (const auto& [level, decoded] : expected) {
        CAPTURE(to_string(level));
        const pmc::DataSource d = pmc::decode_data_source(data_source_bits(level));
        REQUIRE(d.op == pmc::DataSource::Op::load);
        REQUIRE(d.level == decoded);
        REQUIRE(d.outcome == pmc::DataSource::Outcome::hit);
        REQUIRE(!d.remote);
    }
}
