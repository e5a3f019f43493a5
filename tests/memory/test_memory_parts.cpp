// SPDX-License-Identifier: MIT
// The pure parts of the memory experiments: sizes and their labels, the size grid, the checks of option values,
// statistics, the pointer chains (one cycle through every element), the chase, every bandwidth kernel (each pass
// touches every word), bandwidth per level, the CSV layout, empty sweeps, the sweeps a latency run reports, when
// the latency curve's last level is main memory, and what a short sweep's last level is, the page-fault tables (one
// run per row), the reported caches, numbers without exponents, and the warnings of a busy machine or of levels
// that disagree with the CPU's report, beside the table and at the top of summary.md.
#include "catch.hpp"

#include "bandwidth.hpp"
#include "common.hpp"
#include "latency.hpp"
#include "pagefault.hpp"
#include "report.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace pmc_mem;

TEST_CASE("parse_size reads bytes and binary units, and refuses the rest") {
    CHECK(parse_size("512") == 512);
    CHECK(parse_size("4096B") == 4096);
    CHECK(parse_size("48K") == 48 * 1024);
    CHECK(parse_size("48KiB") == 48 * 1024);
    CHECK(parse_size("1.5M") == 1536 * 1024);
    CHECK(parse_size("256MiB") == 256ull << 20);
    CHECK(parse_size("2G") == 2ull << 30);
    for (const char* bad : {"", "abc", "12Q", "-1", "1.3", "1e3", "0x10", "K"})
        CHECK_THROWS_AS(parse_size(bad), UsageError);
}

TEST_CASE("size labels for axes and prose") {
    CHECK(size_label(512) == "512");
    CHECK(size_label(49152) == "48K");
    CHECK(size_label(1 << 20) == "1M");
    CHECK(size_label(1.5 * (1 << 20)) == "1.5M");
    CHECK(size_label(256.0 * (1 << 20)) == "256M");
    CHECK(size_label(1000.0 * 1024) == "0.977M");
    CHECK(size_text(512) == "512 B");
    CHECK(size_text(49152) == "48 KiB");
    CHECK(size_text(1.02 * (1 << 20)) == "1.02 MiB");
}

TEST_CASE("the size grid steps like lmbench: 2^n * (1 + k/N)") {
    CHECK(size_grid(512, 4096, 2, 64) == std::vector<std::uint64_t>{512, 768, 1024, 1536, 2048, 3072, 4096});
    const auto g8 = size_grid(512, 256ull << 20, 8, 64);
    CHECK(g8.size() == 19 * 8 + 1);
    CHECK(std::set<std::uint64_t>(g8.begin(), g8.end()).count(48 * 1024) == 1);
    CHECK(std::is_sorted(g8.begin(), g8.end()));
    for (auto s : g8) CHECK(s % 64 == 0);
    // Rounded to the granule, never below it, no duplicates.
    CHECK(size_grid(100, 1000, 4, 256) == std::vector<std::uint64_t>{256, 512, 768});
    CHECK(size_grid(0, 100, 2, 64).empty());
    CHECK(size_grid(100, 50, 2, 64).empty());
}

TEST_CASE("option values: integers and numbers in range, and errors that name the option") {
    CHECK(integer_option("--runs", "7", 1, 10) == 7);
    CHECK_THROWS_WITH(integer_option("--runs", "x", 1, 10), "--runs: 'x' is not an integer");
    CHECK_THROWS_WITH(integer_option("--runs", "7x", 1, 10), "--runs: '7x' is not an integer");
    CHECK_THROWS_WITH(integer_option("--runs", "0", 1, 10), "--runs: 0 is outside 1..10");
    CHECK(number_option("--run-ms", "0.25", 0.01, 10) == 0.25);
    CHECK_THROWS_WITH(number_option("--run-ms", "", 0.01, 10), "--run-ms: '' is not a number");
    CHECK_THROWS_WITH(number_option("--run-ms", "inf", 0.01, 10), "--run-ms: 'inf' is not a number");
    CHECK_THROWS_WITH(number_option("--run-ms", "20", 0.01, 10), "--run-ms: 20 is outside 0.01..10");
}

TEST_CASE("statistics") {
    CHECK(median_of({3, 1, 2}) == 2);
    CHECK(median_of({4, 1, 2, 3}) == 2.5);
    CHECK(min_of({3, 1, 2}) == 1);
    CHECK(max_of({3, 1, 2}) == 3);
    CHECK(percentile_of({1, 2, 3, 4, 5}, 10) == Approx(1.4));
    CHECK(median_of({}) == 0);
}

TEST_CASE("random_cycle is one cycle through every element, reproducible from its seed") {
    for (std::size_t n : {1u, 2u, 3u, 1000u, 65536u}) {
        const auto next = random_cycle(n, 7);
        std::vector<bool> seen(n);
        std::size_t i = 0;
        for (std::size_t step = 0; step < n; ++step) {
            REQUIRE_FALSE(seen[i]);
            seen[i] = true;
            i = next[i];
        }
        CHECK(i == 0); // back at the start after exactly n steps
    }
    CHECK(random_cycle(1000, 7) == random_cycle(1000, 7));
    CHECK(random_cycle(1000, 7) != random_cycle(1000, 8));
}

TEST_CASE("build_chain links every element once, and chase follows it") {
    const std::size_t stride = 64, n = 1000;
    std::unique_ptr<char[]> storage(new char[n * stride + 64]);
    char* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(storage.get()) + 63) & ~std::uintptr_t{63});
    for (Chain c : {Chain::random, Chain::forward, Chain::backward}) {
        void* start = build_chain(base, n, stride, c, 1);
        std::set<void*> seen;
        void* p = start;
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(seen.insert(p).second);
            const auto offset = static_cast<std::size_t>(static_cast<char*>(p) - base);
            REQUIRE(offset % stride == 0);
            REQUIRE(offset < n * stride);
            void* next;
            std::memcpy(&next, p, sizeof next);
            if (c == Chain::forward) CHECK(next == base + ((offset / stride + 1) % n) * stride);
            if (c == Chain::backward) CHECK(next == base + ((offset / stride + n - 1) % n) * stride);
            p = next;
        }
        CHECK(p == start);
        // 100 loads per block: 10 blocks are 1000 loads, one full cycle.
        CHECK(chase(start, 10) == start);
        void* after_one_block = start;
        for (int i = 0; i < 100; ++i) std::memcpy(&after_one_block, after_one_block, sizeof after_one_block);
        CHECK(chase(start, 1) == after_one_block);
    }
    CHECK(parse_chain("lmbench") == Chain::forward);
    CHECK(parse_chain("lmbench2") == Chain::backward);
    CHECK_THROWS_AS(parse_chain("sideways"), UsageError);
}

TEST_CASE("every bandwidth kernel touches every word on every pass") {
    const std::size_t bytes = 16 * kernel_granule(), words = bytes / 8, passes = 3;
    struct Free {
        void operator()(void* p) const { std::free(p); }
    };
    for (const KernelInfo& k : available_kernels()) {
        INFO("kernel " << k.name);
        std::unique_ptr<std::uint64_t, Free> a(static_cast<std::uint64_t*>(std::aligned_alloc(64, bytes)));
        std::unique_ptr<std::uint64_t, Free> b(static_cast<std::uint64_t*>(std::aligned_alloc(64, bytes)));
        for (std::size_t i = 0; i < words; ++i) {
            a.get()[i] = i;
            b.get()[i] = 1000000 + i;
        }
        const std::uint64_t sum = run_kernel(k.name, reinterpret_cast<char*>(b.get()),
                                             reinterpret_cast<const char*>(a.get()), bytes, passes);
        if (k.name.rfind("read", 0) == 0) {
            CHECK(sum == passes * (words * (words - 1) / 2));
        } else if (k.name.find("rmw") != std::string::npos) {
            for (std::size_t i = 0; i < words; ++i) REQUIRE(b.get()[i] == 1000000 + i + passes);
        } else if (k.copy) {
            for (std::size_t i = 0; i < words; ++i) REQUIRE(b.get()[i] == i);
        } else { // write, write-vec, write-nt, memset: one value everywhere, not the old one
            for (std::size_t i = 0; i < words; ++i) REQUIRE(b.get()[i] == b.get()[0]);
            CHECK(b.get()[0] != 1000000);
        }
    }
    CHECK_THROWS_AS(run_kernel("nope", nullptr, nullptr, kernel_granule(), 1), std::invalid_argument);
    CHECK_THROWS_AS(run_kernel("read", nullptr, nullptr, 100, 1), std::invalid_argument);
}

TEST_CASE("bandwidth per level uses the sizes well inside each level") {
    BandwidthResult r;
    BandwidthCurve c;
    c.kernel = KernelInfo{"read", "", 2, false};
    for (std::uint64_t s : {4096, 16384, 65536, 262144, 1048576, 16777216, 268435456}) {
        BandwidthPoint p;
        p.size = s;
        p.gbps = {s < 49152 ? 100.0 : s < 1048576 ? 50.0 : s < 33554432 ? 30.0 : 10.0};
        c.points.push_back(p);
    }
    r.curves.push_back(c);
    const Regimes regimes = regimes_from_boundaries("48K,1M,32M");
    REQUIRE(regimes.levels.size() == 4);
    CHECK(regimes.levels[3].name == "memory");
    const auto levels = bandwidth_per_level(r, regimes);
    REQUIRE(levels.size() == 4);
    CHECK(levels[0].gbps[0].second == 100); // 4K, 16K (<= 24K)
    CHECK(levels[1].gbps[0].second == 50);  // 256K (96K..512K)
    CHECK(levels[2].gbps[0].second == 30);  // 16M (2M..16M)
    CHECK(levels[3].gbps[0].second == 10);  // 256M (>= 128M)
    CHECK(levels[0].to == 16384);
    CHECK_THROWS_AS(regimes_from_boundaries("1M,48K"), UsageError);
    CHECK_THROWS_AS(regimes_from_boundaries(""), UsageError);
}

TEST_CASE("latency CSV: a header and one row per chain and size") {
    LatencyResult r;
    LatencyCurve c{Chain::random, {}};
    for (std::uint64_t s : {512, 1024}) {
        LatencyPoint p;
        p.size = s;
        p.loads_per_rep = 2000;
        p.ns = {1.1, 1.0, 1.2};
        p.sweep_min = {1.0, 1.1};
        c.points.push_back(p);
    }
    r.curves.push_back(c);
    std::istringstream csv(latency_csv(r));
    std::string line;
    std::getline(csv, line);
    CHECK(line == "chain,size_bytes,size_label,loads_per_run,runs,latency_ns,min_ns,median_ns,max_ns,min_cycles,"
                  "median_cycles");
    std::getline(csv, line);
    CHECK(line == "random,512,512,2000,3,1.05,1,1.1,1.2,,");
    std::getline(csv, line);
    CHECK(line.rfind("random,1024,1K,", 0) == 0);
    CHECK_FALSE(std::getline(csv, line));
}

TEST_CASE("a range with no size in it is a usage error that names the range and the fix") {
    CHECK(sweep_sizes(96 * 1024, 128 * 1024, 8, 64).size() == 5);
    CHECK_THROWS_WITH(sweep_sizes(100 * 1024, 102 * 1024, 8, 64),
                      "no working-set size to measure between --min 100 KiB and --max 102 KiB: the sweep measures "
                      "2^n * (1 + k/8) bytes rounded to 64 B, and the nearest are 96 KiB and 104 KiB; lower --min "
                      "to 96K or raise --max to 104K");
    CHECK_THROWS_AS(sweep_sizes(0, 1024, 8, 64), UsageError);
    CHECK_THROWS_AS(sweep_sizes(4096, 1024, 8, 64), UsageError);
    CHECK_THROWS_AS(sweep_sizes(512, 1024, 0, 64), UsageError);
    LatencyOptions lo;
    lo.min_size = 100 * 1024;
    lo.max_size = 102 * 1024;
    CHECK_THROWS_AS(latency_grids(lo), UsageError);
    lo.min_size = 0;
    CHECK_THROWS_WITH(latency_grids(lo), "--min must be at least 1 byte");
    BandwidthOptions bo;
    bo.min_size = 100 * 1024;
    bo.max_size = 102 * 1024;
    CHECK_THROWS_WITH(bandwidth_sizes(bo), ContainsSubstring("raise --max to 128K"));
    bo.max_size = 128 * 1024;
    CHECK(bandwidth_sizes(bo) == std::vector<std::uint64_t>{128 * 1024});
    // run_latency refuses before measuring (it crashed on curve.points.front()).
    Clock clock;
    Progress quiet(true);
    lo.min_size = 100 * 1024;
    lo.max_size = 102 * 1024;
    CHECK_THROWS_AS(run_latency(lo, clock, quiet, "test"), UsageError);
}

TEST_CASE("a latency run reports the sweeps it made and the sizes it measured") {
    LatencyOptions o;
    o.min_size = 512;
    o.max_size = 4096;
    o.per_octave = 2;
    o.reps = 2;
    o.sweeps = 9; // more sweeps than runs: two sweeps of one run
    o.rep_ms = 0.01;
    o.min_loads = 200;
    o.warm_ms = 0.01;
    Clock clock;
    Progress quiet(true);
    const LatencyResult r = run_latency(o, clock, quiet, "test");
    CHECK(r.options.sweeps == 2);
    REQUIRE(r.curves.size() == 1);
    REQUIRE(r.curves[0].points.size() == 7);
    for (const auto& p : r.curves[0].points) {
        CHECK(p.sweep_min.size() == 2);
        CHECK(p.ns.size() == 2);
    }
    pmc::JsonWriter json;
    write_latency_json(json, r, MachineFacts{});
    CHECK_THAT(json.str(), ContainsSubstring("\"sweeps\":2"));
}

TEST_CASE("the latency curve's last level is main memory only past 64 MiB") {
    auto regimes_to = [](double last) {
        Regimes r;
        Level l1;
        l1.name = "L1";
        l1.boundary = Transition{};
        l1.boundary->size = 48 * 1024;
        Level mem;
        mem.name = "memory";
        mem.first_size = 4 * 1024 * 1024;
        mem.last_size = last;
        mem.latency = 12;
        r.levels = {l1, mem};
        return r;
    };
    const Regimes quick = regimes_to(8.0 * 1024 * 1024); // pmc-memory --quick: the "memory" is an L3 plateau
    CHECK(memory_level(quick) != nullptr);
    CHECK(main_memory_level(quick) == nullptr);
    const Regimes full = regimes_to(256.0 * 1024 * 1024);
    REQUIRE(main_memory_level(full) != nullptr);
    CHECK(main_memory_level(full)->latency == 12);
    Regimes no_memory = full;
    no_memory.levels.back().name = "L2";
    CHECK(main_memory_level(no_memory) == nullptr);
}

TEST_CASE("bandwidth per level: a level with no size well inside it uses its plateau's sizes") {
    BandwidthResult r;
    BandwidthCurve c;
    c.kernel = KernelInfo{"read", "", 2, false};
    // Two points per octave; an L2 from 48 KiB to 128 KiB has none in 2x..1/2x of its boundaries.
    for (std::uint64_t s : {16384, 32768, 49152, 65536, 98304, 131072, 196608, 262144}) {
        BandwidthPoint p;
        p.size = s;
        p.gbps = {s <= 32768 ? 100.0 : s <= 131072 ? 50.0 : 20.0};
        c.points.push_back(p);
    }
    r.curves.push_back(c);
    Regimes regimes;
    Level l1, l2, l3;
    l1.name = "L1";
    l1.first_size = 512;
    l1.last_size = 32768;
    l1.boundary = Transition{};
    l1.boundary->size = 40000;
    l2.name = "L2";
    l2.first_size = 65536;
    l2.last_size = 131072;
    l2.boundary = Transition{};
    l2.boundary->size = 140000;
    l3.name = "memory";
    l3.first_size = 196608;
    l3.last_size = 262144;
    regimes.levels = {l1, l2, l3};
    const auto levels = bandwidth_per_level(r, regimes);
    REQUIRE(levels.size() == 3);
    CHECK_FALSE(levels[0].plateau);
    CHECK(levels[0].gbps[0].second == 100);
    CHECK(levels[1].plateau);
    CHECK(levels[1].from == 65536);
    CHECK(levels[1].to == 131072);
    CHECK(levels[1].gbps[0].second == 50);
    CHECK_THAT(level_bandwidth_text(levels), ContainsSubstring("its plateau"));
    CHECK_THAT(level_bandwidth_markdown(levels), ContainsSubstring("64K .. 128K (plateau)"));
    // Levels given as boundaries have no plateau: the sizes between the boundaries.
    const auto given = bandwidth_per_level(r, regimes_from_boundaries("40000,140000"));
    CHECK(given[1].plateau);
    CHECK(given[1].gbps[0].second == 50);
    CHECK_THROWS_AS(regimes_from_boundaries("0,0"), UsageError);
    CHECK_THROWS_AS(regimes_from_boundaries("1M,1M"), UsageError);
}

namespace {
FaultRun fault_run(double us_per_fault, std::uint64_t majors) {
    FaultRun f;
    f.pages = f.touched = f.major_faults = majors;
    f.total_ns = us_per_fault * 1e3 * static_cast<double>(majors);
    f.touch_median_ns = us_per_fault * 1e3;
    return f;
}
} // namespace

TEST_CASE("page-fault tables: every figure of a row from the median run") {
    PagefaultResult r;
    r.memory_latency_ns = 100;
    r.page_size = 4096;
    r.options.runs = 3;
    FaultCase c;
    c.name = "major";
    c.runs = {fault_run(80, 1000), fault_run(60, 1001), fault_run(100, 1002)};
    r.cases.push_back(c);
    CHECK(r.cases[0].median_run_index() == 0);
    CHECK(r.cases[0].median_ns_per_fault() == Approx(80000));
    const std::string md = pagefault_markdown(r);
    CHECK_THAT(md, ContainsSubstring("| major | 80 us | 80 us | 19.5 ns | 800 | 1000 + 0 for 1000 pages | 80 us"));
    CHECK_THAT(pagefault_text(r), ContainsSubstring("1000"));
    CHECK_THAT(pagefault_text(r), !ContainsSubstring("1001"));
    // Of two runs, the faster; the page size is the result's.
    r.cases[0].runs = {fault_run(100, 1002), fault_run(60, 1001)};
    r.page_size = 16384;
    CHECK(r.cases[0].median_run_index() == 1);
    CHECK_THAT(pagefault_markdown(r), ContainsSubstring("| major | 60 us | 60 us | 3.66 ns | 600 | 1001 + 0 for 1001"));
    pmc::JsonWriter json;
    write_pagefault_json(json, r, MachineFacts{});
    CHECK_THAT(json.str(), ContainsSubstring("\"memory_loads_per_fault\":600"));
    CHECK_THAT(json.str(), !ContainsSubstring("faults_per_memory_load"));
    CHECK_THAT(json.str(), ContainsSubstring("\"median_run\":1"));
    CHECK_THAT(pagefault_csv(r), ContainsSubstring(",3.66211,")); // ns per byte: 60 us / 16 KiB
}

TEST_CASE("the reported caches: one entry per cache") {
    const MachineFacts m = machine_facts();
    std::set<std::string> names;
    for (const auto& c : m.caches) CHECK(names.insert(c.name).second);
}

TEST_CASE("a short sweep's last level is named by a load from memory measured on its own") {
    // pmc-memory --quick stops at 8 MiB. On a Zen 5 VM its last plateau was the L3 (16.2 ns) and the detector
    // called it memory while the same report measured memory at 148 ns.
    auto quick = [](double last_latency) {
        LatencyResult r;
        r.options.max_size = 8u << 20;
        Level l1, l2, last;
        l1.name = "L1";
        l1.latency = 1.1;
        l2.name = "L2";
        l2.latency = 3.8;
        last.name = "memory";
        last.first_size = 2 << 20;
        last.last_size = 8 << 20;
        last.latency = last_latency;
        r.regimes.levels = {l1, l2, last};
        r.regimes.notes = {"the sweep ends at 8 MiB: the level called memory may be a cache that did not overflow"};
        return r;
    };
    LatencyResult l3 = quick(16.2);
    compare_with_memory(l3, 148, "random pointer chain over 256 MiB");
    CHECK(l3.regimes.levels.back().name == "L3");
    CHECK(memory_level(l3.regimes) == nullptr);
    REQUIRE(l3.regimes.notes.size() == 1); // the question replaced by its answer
    CHECK_THAT(l3.regimes.notes[0], ContainsSubstring("148 ns"));
    CHECK(l3.memory_apart_ns == 148);
    // Memory at 8 MiB (few TLB misses) is slower at 256 MiB, but not like a cache: it stays memory.
    LatencyResult mem = quick(127);
    compare_with_memory(mem, 398, "random pointer chain over 256 MiB");
    CHECK(mem.regimes.levels.back().name == "memory");
    CHECK_THAT(mem.regimes.notes.back(), ContainsSubstring("is memory"));
    // A sweep past 64 MiB keeps its names.
    LatencyResult full = quick(16.2);
    full.regimes.levels.back().last_size = 256.0 * 1024 * 1024;
    compare_with_memory(full, 148, "x");
    CHECK(full.regimes.levels.back().name == "memory");
}

TEST_CASE("numbers in the reports never print with an exponent") {
    CHECK(num(999.7, 3) == "1000");
    CHECK(num(9999.7, 4) == "10000");
    CHECK(num(0.0903, 3) == "0.0903");
    CHECK(num(23.0, 3) == "23");
    CHECK(duration_text(999.7) == "1 us");
    CHECK(duration_text(1234567) == "1.23 ms");
    CHECK(duration_text(80) == "80 ns");
    // The table cell that printed "1e+03 ns": a zero-page fault of 999.7 ns.
    PagefaultResult r;
    r.memory_latency_ns = 100;
    r.page_size = 4096;
    r.options.runs = 1;
    FaultCase c;
    c.name = "zero-page";
    FaultRun f = fault_run(0.9997, 1000);
    f.minor_faults = f.major_faults;
    f.major_faults = 0;
    f.touch_p10_ns = f.touch_p90_ns = f.touch_median_ns;
    c.runs = {f};
    r.cases.push_back(c);
    CHECK_THAT(pagefault_markdown(r), !ContainsSubstring("e+"));
    CHECK_THAT(pagefault_markdown(r), ContainsSubstring("| zero-page | 1 us | 1 us |"));
    CHECK_THAT(pagefault_text(r), !ContainsSubstring("e+"));
}

TEST_CASE("memset runs with zeros and with a non-zero byte, and the value probe compares the same stores") {
    // memset(buf, 0, 256M) ran at twice the speed of memset(buf, 1, 256M) on a Zen 3 VM: both are measured.
    bool zeros = false, other = false;
    for (const KernelInfo& k : available_kernels()) {
        zeros = zeros || k.name == "memset-0";
        other = other || k.name == "memset";
    }
    CHECK(zeros);
    CHECK(other);
    const std::size_t bytes = 16 * kernel_granule(), words = bytes / 8;
    struct Free {
        void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<std::uint64_t, Free> aligned(static_cast<std::uint64_t*>(std::aligned_alloc(64, bytes)));
    std::uint64_t* buf = aligned.get(); // the vector kernels need aligned buffers
    const auto probes = value_probe_kernels();
    CHECK(probes.size() >= 4); // memset and rep stosb everywhere on x86-64; the vector stores with AVX2
    for (const KernelInfo& k : probes) {
        INFO("kernel " << k.name);
        for (std::size_t i = 0; i < words; ++i) buf[i] = 1000000 + i;
        run_kernel(k.name, reinterpret_cast<char*>(buf), nullptr, bytes, 2);
        const bool zero_kernel = k.name.size() > 2 && k.name.compare(k.name.size() - 2, 2, "-0") == 0;
        for (std::size_t i = 0; i < words; ++i) REQUIRE(buf[i] == buf[0]);
        CHECK((buf[0] == 0) == zero_kernel);
    }
    Clock clock;
    const ValueProbe probe = measure_value_dependence(64 * 1024, 1, 0.01, clock);
    CHECK(probe.size == 64 * 1024);
    REQUIRE(probe.rows.size() * 2 == probes.size());
    for (const auto& row : probe.rows) {
        INFO(row.method);
        CHECK(row.zeros.best() > 0);
        CHECK(row.other.best() > 0);
    }
    CHECK_THAT(value_probe_markdown(probe), ContainsSubstring("| memset | libc memset"));
}

namespace {

/// One point of a latency curve with the fastest run of each sweep.
LatencyPoint point_with_sweeps(std::uint64_t size, std::vector<double> sweep_min) {
    LatencyPoint p;
    p.size = size;
    p.sweep_min = std::move(sweep_min);
    p.ns = p.sweep_min;
    return p;
}

} // namespace

TEST_CASE("sweeps that disagree: how many sizes, and the worst") {
    LatencyCurve c;
    c.points = {point_with_sweeps(1024, {1.0, 1.1, 1.05}), point_with_sweeps(2048, {1.0, 1.6}),
                point_with_sweeps(4096, {4.0, 4.1}), point_with_sweeps(8192, {4.0}), // one sweep: not compared
                point_with_sweeps(16384, {15, 40})};
    const SweepSpread s = sweep_spread(c);
    CHECK(s.sizes == 4);
    CHECK(s.disagreeing == 2); // 1.6x and 2.67x; 1.1x and 1.025x agree
    CHECK(s.worst_ratio == Approx(40.0 / 15));
    CHECK(s.worst_size == 16384);
}

TEST_CASE("a busy machine: the load average above the CPUs, or sweeps that disagree, draws a warning") {
    SweepSpread agree;
    agree.sizes = 100;
    agree.disagreeing = 25; // a quarter: where physically indexed caches fill, sweeps may differ
    CHECK(busy_warning(0.4, 1.2, 2, agree).empty());
    CHECK(busy_warning(-1, -1, 2, agree).empty()); // no /proc/loadavg: no claim
    CHECK(busy_warning(2, 2, 2, agree).empty());   // at the CPUs, not above

    const std::string loaded = busy_warning(5.9, 8.4, 2, agree);
    CHECK_THAT(loaded, ContainsSubstring("the machine was busy: the load average was above the 2 CPUs (5.9 before "
                                         "the sweep, 8.4 after)"));
    CHECK_THAT(loaded, ContainsSubstring("rerun on an idle machine, without --quick"));
    CHECK_THAT(busy_warning(0.5, 2.5, 2, agree), ContainsSubstring("0.5 before the sweep, 2.5 after"));

    SweepSpread disagree = agree;
    disagree.disagreeing = 26;
    disagree.worst_ratio = 9.23;
    disagree.worst_size = 2.75 * 1024 * 1024;
    const std::string runs = busy_warning(0.3, 0.5, 2, disagree);
    CHECK_THAT(runs, ContainsSubstring("the sweeps disagreed: at 26 of 100 sizes"));
    CHECK_THAT(runs, ContainsSubstring("the worst 9.23x at 2.75M"));
    CHECK(runs.find("load average") == std::string::npos);
    const std::string both = busy_warning(3, 3, 2, disagree);
    CHECK_THAT(both, ContainsSubstring("load average"));
    CHECK_THAT(both, ContainsSubstring("; and the sweeps disagreed"));
}

TEST_CASE("check_latency: a quick sweep's memory inside the reported L3, on a busy machine, and what it says") {
    // The busy VM's --quick run: its last plateau (136 ns, to 8 MiB) stayed "memory" beside a load from memory at
    // 382 ns (less than 5x apart), inside a reported 32 MiB L3.
    LatencyResult r;
    r.options.max_size = 8u << 20;
    Level l1, l2, last;
    l1.name = "L1";
    l1.latency = 1.1;
    l1.boundary = Transition{};
    l1.boundary->size = 49 * 1024;
    l2.name = "L2";
    l2.latency = 4;
    l2.first_size = 36 * 1024;
    l2.last_size = 416 * 1024;
    l2.boundary = Transition{};
    l2.boundary->size = 2.55 * 1024 * 1024;
    l2.boundary->below = 2.5 * 1024 * 1024;
    l2.boundary->above = 2.75 * 1024 * 1024;
    last.name = "memory";
    last.first_size = 3 << 20;
    last.last_size = 8 << 20;
    last.latency = 136;
    r.regimes.levels = {l1, l2, last};
    r.regimes.notes = {"the sweep ends at 8 MiB: the level called memory may be a cache that did not overflow"};
    compare_with_memory(r, 382, "random pointer chain over 256 MiB");
    REQUIRE(memory_level(r.regimes) != nullptr); // the latency alone keeps it memory
    r.load_before = 5.9;
    r.load_after = 6.2;
    MachineFacts m;
    m.online_cpus = 2;
    m.caches = {{"L1d", 48 * 1024, 12, 0, "sysfs"}, {"L2", 1 << 20, 16, 0, "sysfs"}, {"L3", 32u << 20, 16, 0, "sysfs"}};
    check_latency(r, m);

    CHECK(memory_level(r.regimes) == nullptr);
    CHECK(r.regimes.levels.back().name == "L3");
    // The sweep's end no longer claims memory; the load from memory measured apart is still reported.
    REQUIRE(r.regimes.notes.size() == 1);
    CHECK_THAT(r.regimes.notes[0], ContainsSubstring("a load from memory takes 382 ns (random pointer chain"));
    REQUIRE(r.regimes.warnings.size() == 3); // memory inside the L3, L2 2.55x off, busy
    CHECK_THAT(r.regimes.warnings[0], ContainsSubstring("the level found at 3M..8M (136 ns) lies inside the L3"));
    CHECK_THAT(r.regimes.warnings[1], ContainsSubstring("L2 found at 2.55 MiB"));
    CHECK_THAT(r.regimes.warnings[1], ContainsSubstring("its plateau 36K..416K"));
    CHECK_THAT(r.regimes.warnings[1], ContainsSubstring("2.55x larger"));
    CHECK_THAT(r.regimes.warnings[2], ContainsSubstring("the machine was busy"));

    // Beside the result: the table marks the level, and the warnings follow it.
    const std::string text = regimes_text(r.regimes, m);
    CHECK_THAT(text, ContainsSubstring("L2 1 MiB (sysfs)  <- found 2.55x larger!"));
    CHECK_THAT(text, ContainsSubstring("L3 32 MiB (sysfs)  <- inside the reported L3: not memory!"));
    CHECK_THAT(text, ContainsSubstring("WARNING: the machine was busy"));
    CHECK_THAT(regimes_markdown(r.regimes, m), ContainsSubstring("| L2 1 MiB (sysfs) — **found 2.55x larger** |"));

    // summary.md: each warning a line of its own at the top, before the first section.
    SummaryInput in;
    in.command = "pmc-memory --quick";
    in.latency = &r;
    const std::string md = summary_markdown(m, in);
    const auto first_section = md.find("\n## ");
    for (const char* w : {"> **Warning:** The level found at 3M..8M (136 ns) lies inside the L3",
                          "> **Warning:** L2 found at 2.55 MiB", "> **Warning:** The machine was busy"}) {
        INFO(w);
        CHECK(md.find(w) < first_section);
    }
    pmc::JsonWriter json;
    write_latency_json(json, r, m);
    CHECK_THAT(json.str(), ContainsSubstring("\"warnings\":[\"the level found at 3M..8M"));
    CHECK_THAT(json.str(), ContainsSubstring("\"check\":\"found 2.55x larger\""));
}

TEST_CASE("check_latency on a quiet machine whose levels agree with the report adds nothing") {
    LatencyResult r;
    Level l1, mem;
    l1.name = "L1";
    l1.boundary = Transition{};
    l1.boundary->size = 48 * 1024;
    mem.name = "memory";
    mem.first_size = 64 * 1024;
    mem.last_size = 256 << 20;
    r.regimes.levels = {l1, mem};
    r.curves = {LatencyCurve{Chain::random, {point_with_sweeps(1024, {1, 1.02}), point_with_sweeps(2048, {1, 1.01})}}};
    r.load_before = 0.2;
    r.load_after = 1.1;
    MachineFacts m;
    m.online_cpus = 2;
    m.caches = {{"L1d", 48 * 1024, 12, 0, "cpuid 0x80000005"}};
    check_latency(r, m);
    CHECK(r.regimes.warnings.empty());
    CHECK(r.regimes.levels.back().name == "memory");
    CHECK(r.spread.sizes == 2);
    CHECK(r.spread.disagreeing == 0);
}
