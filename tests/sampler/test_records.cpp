// SPDX-License-Identifier: MIT
// The sampler's pure tests: records built in the kernel's layout in a fake ring (tests/sampler/ring_builder.hpp),
// drained through pmc::Sampler: every sample_type combination pmc uses, records split across the ring's end,
// garbage sizes (no crash, nothing read outside the ring: run under AddressSanitizer too), data-source decoding
// and the bias check's verdict.
#include "catch.hpp"
#include "ring_builder.hpp"

#include <pmc/sampler.hpp>

#include <random>
#include <vector>

using pmc_test::FakeRing;
using pmc_test::sample_record;
using pmc_test::SampleValues;
namespace ps = pmc::sample;

namespace {

std::vector<pmc::Sample> drain_all(pmc::Sampler& s, std::vector<std::vector<std::uint64_t>>* chains = nullptr) {
    std::vector<pmc::Sample> out;
    s.drain([&](const pmc::Sample& x) {
        out.push_back(x);
        if (chains) chains->emplace_back(x.callchain, x.callchain + x.callchain_size);
    });
    return out;
}

void check_fields(const pmc::Sample& s, std::uint64_t type, const SampleValues& v) {
    CHECK(s.fields == type);
    CHECK(s.ip == ((type & PERF_SAMPLE_IP) ? v.ip : 0));
    CHECK(s.pid == ((type & PERF_SAMPLE_TID) ? v.pid : 0));
    CHECK(s.tid == ((type & PERF_SAMPLE_TID) ? v.tid : 0));
    CHECK(s.time == ((type & PERF_SAMPLE_TIME) ? v.time : 0));
    CHECK(s.addr == ((type & PERF_SAMPLE_ADDR) ? v.addr : 0));
    CHECK(s.cpu == ((type & PERF_SAMPLE_CPU) ? v.cpu : 0));
    CHECK(s.period == ((type & PERF_SAMPLE_PERIOD) ? v.period : 0));
    CHECK(s.callchain_size == ((type & PERF_SAMPLE_CALLCHAIN) ? v.callchain.size() : 0));
    if (type & PERF_SAMPLE_WEIGHT_STRUCT) {
        CHECK(s.weight == (v.weight & 0xffffffffu));
        CHECK(s.weight_var2 == static_cast<std::uint16_t>(v.weight >> 32));
        CHECK(s.weight_var3 == static_cast<std::uint16_t>(v.weight >> 48));
    } else {
        CHECK(s.weight == ((type & PERF_SAMPLE_WEIGHT) ? v.weight : 0));
    }
    CHECK(s.data_source.raw == ((type & PERF_SAMPLE_DATA_SRC) ? v.data_src : 0));
}

// PEBS-style data source: a load, served by the L3 (mem_lvl_num), hit, snoop HITM, TLB miss, locked.
constexpr std::uint64_t l3_hitm_load = (std::uint64_t{PERF_MEM_OP_LOAD} << PERF_MEM_OP_SHIFT) |
                                       (std::uint64_t{PERF_MEM_LVL_HIT | PERF_MEM_LVL_NA} << PERF_MEM_LVL_SHIFT) |
                                       (std::uint64_t{PERF_MEM_SNOOP_HITM} << PERF_MEM_SNOOP_SHIFT) |
                                       (std::uint64_t{PERF_MEM_LOCK_LOCKED} << PERF_MEM_LOCK_SHIFT) |
                                       (std::uint64_t{PERF_MEM_TLB_MISS | PERF_MEM_TLB_L2} << PERF_MEM_TLB_SHIFT) |
                                       (std::uint64_t{PERF_MEM_LVLNUM_L3} << PERF_MEM_LVLNUM_SHIFT);

} // namespace

TEST_CASE("every sample_type combination pmc uses parses field by field", "[sampler][records]") {
    const std::uint64_t combinations[] = {
        ps::ip | ps::tid | ps::time | ps::addr,                               // SamplerOptions' default, period mode
        ps::ip | ps::tid | ps::time | ps::addr | ps::period,                      // frequency mode adds PERIOD
        ps::ip | ps::tid | ps::addr,                                      // pmc sample
        ps::ip | ps::tid | ps::time | ps::addr | ps::cpu | ps::period,                // pmc sample --json with CPUs
        ps::ip | ps::tid | ps::callchain,                                 // callchains
        ps::ip | ps::tid | ps::addr | ps::weight | ps::data_src,                  // load latency (PEBS ldlat, IBS, SPE)
        ps::ip | ps::tid | ps::time | ps::addr | ps::weight_struct | ps::data_src,     // Intel's split weight
        ps::ip | ps::addr | ps::period | ps::callchain | ps::weight | ps::data_src,
        ps::supported,                                            // everything, identifier and ids included
        ps::supported & ~ps::weight,                                  // everything with the split weight only
    };
    SampleValues v;
    v.period = 5003;
    v.weight = 0x0003000200000123ull; // var3 3, var2 2, var1 0x123
    v.data_src = l3_hitm_load;
    v.callchain = {0xffffffffffffff80ull /* PERF_CONTEXT_USER */, 0x401234, 0x401500, 0x7f0000001000};
    for (std::uint64_t type : combinations) {
        // supported has both weight bits: the kernel writes one u64 either way.
        INFO("sample_type " << std::hex << type);
        FakeRing ring(4096);
        ring.write(sample_record(type, v));
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), type);
        std::vector<std::vector<std::uint64_t>> chains;
        auto got = drain_all(s, &chains);
        REQUIRE(got.size() == 1);
        check_fields(got[0], type, v);
        if (type & ps::callchain) CHECK(chains[0] == v.callchain);
        if (type & ps::data_src) {
            CHECK(got[0].data_source.level == pmc::DataSource::Level::l3);
            CHECK(got[0].data_source.snoop == pmc::DataSource::Snoop::hit_modified);
        }
        CHECK(s.progress().malformed == 0);
        CHECK(ring.page()->data_tail == ring.page()->data_head); // the space is handed back
    }
}

TEST_CASE("a record split across the ring's end is read whole, at every split point", "[sampler][records]") {
    const std::uint64_t type = ps::ip | ps::tid | ps::time | ps::addr | ps::period | ps::callchain;
    SampleValues v;
    v.callchain = {1, 2, 3, 4, 5, 6, 7};
    const auto record = sample_record(type, v); // 104 bytes
    for (std::uint64_t start = 256 - record.size() * 8; start < 256; start += 8) {
        INFO("record starts at byte " << start << " of a 256-byte ring");
        FakeRing ring(256);
        ring.start_at(start + 256 * 3); // head and tail are free-running: the offset is their low bits
        SampleValues first = v, second = v;
        first.ip = 0x111;
        second.ip = 0x222;
        ring.write(sample_record(type, first));
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), type);
        std::vector<std::vector<std::uint64_t>> chains;
        auto got = drain_all(s, &chains);
        REQUIRE(got.size() == 1);
        check_fields(got[0], type, first);
        CHECK(chains[0] == v.callchain);
        CHECK(s.progress().wrapped == (start + record.size() * 8 > 256 ? 1u : 0u));
        // The next record, written after the first was read, lands where the first one wrapped to.
        ring.write(sample_record(type, second));
        got = drain_all(s, &chains);
        REQUIRE(got.size() == 1);
        check_fields(got[0], type, second);
    }
}

TEST_CASE("LOST, THROTTLE and UNTHROTTLE records are counted between samples", "[sampler][records]") {
    const std::uint64_t type = ps::ip | ps::tid | ps::addr;
    FakeRing ring(1024);
    ring.write(sample_record(type, SampleValues{}));
    ring.write(pmc_test::simple_record(PERF_RECORD_LOST, {/*id*/ 1, /*lost*/ 17}));
    ring.write(pmc_test::simple_record(PERF_RECORD_THROTTLE, {/*time*/ 5, /*id*/ 1, /*stream_id*/ 1}));
    ring.write(pmc_test::simple_record(PERF_RECORD_UNTHROTTLE, {6, 1, 1}));
    ring.write(pmc_test::simple_record(PERF_RECORD_THROTTLE, {7, 1, 1}));
    ring.write(pmc_test::simple_record(PERF_RECORD_LOST, {1, 3}));
    ring.write(pmc_test::simple_record(PERF_RECORD_COMM, {0x6f6f66, 0})); // not asked for: skipped
    ring.write(sample_record(type, SampleValues{}));
    auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), type);
    CHECK(drain_all(s).size() == 2);
    CHECK(s.progress().lost == 20);
    CHECK(s.progress().throttled == 2);
    CHECK(s.progress().unthrottled == 1);
    CHECK(s.progress().malformed == 0);
}

TEST_CASE("MMAP2 records give the mapping's range and name", "[sampler][records]") {
    std::vector<std::uint64_t> body = {std::uint64_t{42} | std::uint64_t{43} << 32, 0x7f0000000000, 0x21000, 0x1000,
                                       0, 0, 0, /*prot, flags*/ 0};
    const char name[17] = "/usr/lib/libc.so";
    std::uint64_t words[2];
    std::memcpy(words, name, 16);
    body.push_back(words[0]);
    body.push_back(words[1]);
    body.push_back(0); // the NUL, padded to 8
    auto rec = pmc_test::simple_record(PERF_RECORD_MMAP2, body);
    perf_event_header h;
    std::memcpy(&h, rec.data(), sizeof h);
    pmc::detail::MappingRecord m;
    REQUIRE(pmc::detail::parse_mapping(h, reinterpret_cast<const unsigned char*>(rec.data()), h.size, m));
    CHECK(m.pid == 42);
    CHECK(m.tid == 43);
    CHECK(m.start == 0x7f0000000000);
    CHECK(m.length == 0x21000);
    CHECK(m.file_offset == 0x1000);
    CHECK(m.name == "/usr/lib/libc.so");
    CHECK(m.executable);
    // A name without its NUL inside the record is refused, not read past the record.
    rec.pop_back();
    h.size = static_cast<std::uint16_t>(rec.size() * 8);
    CHECK_FALSE(pmc::detail::parse_mapping(h, reinterpret_cast<const unsigned char*>(rec.data()), h.size, m));
}

TEST_CASE("garbage sizes: no crash, nothing read outside the ring, the valid records before them kept",
          "[sampler][records][garbage]") {
    const std::uint64_t type = ps::ip | ps::tid | ps::time | ps::addr;
    const auto good = sample_record(type, SampleValues{});
    struct Case {
        const char* what;
        std::uint16_t size;
    };
    for (const Case c : {Case{"size 0", 0}, Case{"size 4 (less than a header)", 4}, Case{"size 12 (not 8-aligned)", 12},
                         Case{"size past data_head", 4000}, Case{"size 65528 (larger than the ring)", 65528}}) {
        INFO(c.what);
        FakeRing ring(512);
        ring.start_at(480); // the good record wraps, the garbage follows it
        ring.write(good);
        perf_event_header bad{PERF_RECORD_SAMPLE, 0, c.size};
        std::uint64_t garbage[3] = {0, 0xdeadbeef, 0xdeadbeef};
        std::memcpy(garbage, &bad, sizeof bad);
        ring.write_bytes(garbage, sizeof garbage);
        ring.write(good); // after the garbage: unreachable, dropped with it
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), type);
        CHECK(drain_all(s).size() == 1);
        CHECK(s.progress().corrupt_bytes == sizeof garbage + good.size() * 8);
        CHECK(ring.page()->data_tail == ring.page()->data_head); // the ring is usable again
        ring.write(good);
        CHECK(drain_all(s).size() == 1);
    }
    SECTION("a SAMPLE record too short for its sample_type is refused, not read past its end") {
        FakeRing ring(512);
        auto shorter = good;
        shorter.pop_back(); // no ADDR
        perf_event_header h{PERF_RECORD_SAMPLE, 0, static_cast<std::uint16_t>(shorter.size() * 8)};
        std::memcpy(shorter.data(), &h, sizeof h);
        ring.write(shorter);
        ring.write(good);
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), type);
        CHECK(drain_all(s).size() == 1);
        CHECK(s.progress().malformed == 1);
    }
    SECTION("a callchain count past the record's end is refused") {
        FakeRing ring(512);
        SampleValues v;
        v.callchain = {1, 2};
        auto rec = sample_record(ps::ip | ps::callchain, v);
        rec[2] = 1u << 20; // nr
        ring.write(rec);
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), ps::ip | ps::callchain);
        CHECK(drain_all(s).empty());
        CHECK(s.progress().malformed == 1);
    }
    SECTION("data_head more than a ring ahead of data_tail: everything dropped, nothing read") {
        FakeRing ring(512);
        ring.write(good);
        ring.page()->data_head += 4096;
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), type);
        CHECK(drain_all(s).empty());
        CHECK(s.progress().corrupt_bytes == 4096 + good.size() * 8);
    }
    SECTION("a wrapped record larger than the scratch buffer is skipped whole") {
        FakeRing ring(8192);
        SampleValues v;
        v.callchain.assign(300, 0x401000); // 2.4 KiB, more than RingReader::scratch_size
        auto big = sample_record(ps::ip | ps::callchain, v);
        ring.start_at(8192 - 64);
        ring.write(big);
        ring.write(sample_record(ps::ip | ps::callchain, SampleValues{}));
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(), ps::ip | ps::callchain);
        CHECK(drain_all(s).size() == 1);
        CHECK(s.progress().oversized == 1);
    }
}

TEST_CASE("random bytes and random head/tail never make the reader read outside the ring", "[sampler][records][garbage]") {
    std::mt19937_64 rng(14);
    for (int round = 0; round < 2000; ++round) {
        FakeRing ring(256);
        for (std::size_t i = 0; i < ring.size(); ++i) ring.data()[i] = static_cast<unsigned char>(rng());
        // Sizes that are often plausible (small multiples of 8), sometimes not.
        for (std::size_t at = 0; at < ring.size(); at += 8 * (1 + rng() % 6)) {
            perf_event_header h{static_cast<std::uint32_t>(1 + rng() % 12), 0,
                                static_cast<std::uint16_t>(rng() % 4 ? 8 * (rng() % 12) : rng())};
            std::memcpy(ring.data() + at, &h, sizeof h);
        }
        const std::uint64_t tail = rng() % 4096;
        ring.page()->data_tail = tail;
        ring.page()->data_head = tail + (rng() % 3 ? rng() % 257 : rng());
        auto s = pmc::detail::SamplerAccess::over_memory(ring.page(), ring.data(), ring.size(),
                                                         rng() % 2 ? ps::supported & ~ps::weight : ps::ip | ps::callchain | ps::addr);
        std::uint64_t sum = 0;
        s.drain([&](const pmc::Sample& x) {
            sum += x.ip + x.callchain_size;
            for (std::size_t i = 0; i < x.callchain_size; ++i) sum += x.callchain[i];
        });
        CHECK(ring.page()->data_tail == ring.page()->data_head);
        (void)sum;
    }
}

TEST_CASE("data sources decode to level, hit or miss, TLB and snoop", "[sampler][records]") {
    const pmc::DataSource d = pmc::decode_data_source(l3_hitm_load);
    CHECK(d.op == pmc::DataSource::Op::load);
    CHECK(d.level == pmc::DataSource::Level::l3);
    CHECK(d.outcome == pmc::DataSource::Outcome::hit);
    CHECK(d.tlb == pmc::DataSource::Outcome::miss);
    CHECK(d.snoop == pmc::DataSource::Snoop::hit_modified);
    CHECK(d.locked);
    CHECK_FALSE(d.remote);
    CHECK(pmc::describe(d) == "load L3 hit, TLB miss, snoop HITM, locked");
    // The older mem_lvl bits alone (no mem_lvl_num): a store that missed L1, from remote RAM.
    const std::uint64_t old = (std::uint64_t{PERF_MEM_OP_STORE} << PERF_MEM_OP_SHIFT) |
                              (std::uint64_t{PERF_MEM_LVL_MISS | PERF_MEM_LVL_REM_RAM1} << PERF_MEM_LVL_SHIFT);
    const pmc::DataSource r = pmc::decode_data_source(old);
    CHECK(r.op == pmc::DataSource::Op::store);
    CHECK(r.level == pmc::DataSource::Level::remote_ram);
    CHECK(r.outcome == pmc::DataSource::Outcome::miss);
    CHECK(r.remote);
    CHECK(pmc::describe(pmc::decode_data_source(0)) == "n/a");
    const std::uint64_t ram = (std::uint64_t{PERF_MEM_OP_LOAD} << PERF_MEM_OP_SHIFT) |
                              (std::uint64_t{PERF_MEM_LVL_NA} << PERF_MEM_LVL_SHIFT) |
                              (std::uint64_t{PERF_MEM_LVLNUM_RAM} << PERF_MEM_LVLNUM_SHIFT);
    CHECK(pmc::decode_data_source(ram).level == pmc::DataSource::Level::ram);
}

TEST_CASE("the bias check agrees within tolerance and one period, and says why when not", "[sampler][bias]") {
    pmc::BiasCheck b;
    b.event = "e";
    b.period = 1000;
    b.allowance = 1000;
    b.tolerance = 0.05;
    b.samples = 100;
    b.estimated = 100000;
    b.exact = 100999; // within one period
    pmc::judge(b);
    CHECK(b.agrees);
    CHECK(b.warning.empty());
    CHECK(b.ratio == Approx(100000.0 / 100999));

    b.exact = 106000; // 5.7 % off: 5 % of 106000 (5300) + 1000 allows 6300: agrees
    pmc::judge(b);
    CHECK(b.agrees);
    b.exact = 108000; // 8000 off > 5400 + 1000
    pmc::judge(b);
    CHECK_FALSE(b.agrees);
    CHECK_THAT(b.warning, ContainsSubstring("undercounts"));
    CHECK_THAT(b.warning, ContainsSubstring("sampling itself is biased"));

    SECTION("lost samples and throttling are named as the reasons") {
        b.lost = 8;
        b.throttled = 3;
        pmc::judge(b);
        CHECK_THAT(b.warning, ContainsSubstring("8 samples were lost"));
        CHECK_THAT(b.warning, ContainsSubstring("throttled sampling 3 times"));
        CHECK_THAT(b.warning, !ContainsSubstring("sampling itself is biased")); // the lost samples cover the gap
        CHECK_THAT(pmc::to_text(b), ContainsSubstring("WARNING"));
    }
    SECTION("throttling, which cannot be sized, leaves the sampling's own bias named as well") {
        b.throttled = 2;
        pmc::judge(b);
        CHECK_THAT(b.warning, ContainsSubstring("throttled sampling 2 times"));
        CHECK_THAT(b.warning, ContainsSubstring("where that does not account for the whole gap, the sampling itself "
                                                "is biased"));
    }
    SECTION("lost samples too few to cover the gap leave the sampling's own bias named as well") {
        b.lost = 1; // 1 period of the 8 missing (2 would do: tolerance and allowance take the rest)
        pmc::judge(b);
        CHECK_THAT(b.warning, ContainsSubstring("1 samples were lost"));
        CHECK_THAT(b.warning, ContainsSubstring("the sampling itself is biased"));
    }
    SECTION("the emulated PMU's case: 3 samples at period 100,000 over 10 M instructions") {
        b.period = b.allowance = 100000;
        b.samples = 3;
        b.estimated = 300000;
        b.exact = 10000000;
        pmc::judge(b);
        CHECK_FALSE(b.agrees);
        CHECK(b.ratio == Approx(0.03));
        CHECK_THAT(pmc::to_text(b), ContainsSubstring("ratio 0.0300"));
    }
    SECTION("overcounting and an empty run") {
        b.exact = 50000;
        pmc::judge(b);
        CHECK_THAT(b.warning, ContainsSubstring("overcounts"));
        b.estimated = b.exact = 0;
        pmc::judge(b);
        CHECK(b.agrees);
        CHECK(b.ratio == 1.0);
        b.estimated = 5;
        pmc::judge(b);
        CHECK(b.allowance >= 5); // within one period of nothing
        b.allowance = 0;
        pmc::judge(b);
        CHECK_FALSE(b.agrees);
    }
}
