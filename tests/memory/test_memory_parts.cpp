// The pure parts of the memory experiments: sizes and their labels, the size grid, the command-line reader,
// statistics, the pointer chains (one cycle through every element), the chase, every bandwidth kernel (each pass
// touches every word), bandwidth per level, and the CSV layout.
#include "catch.hpp"

#include "bandwidth.hpp"
#include "common.hpp"
#include "latency.hpp"

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

TEST_CASE("Args: values, --name=value, and errors for people") {
    const char* argv[] = {"prog", "--out", "dir", "--max=1M", "--runs", "x", "--what"};
    Args a(7, const_cast<char**>(argv));
    REQUIRE(a.next());
    CHECK(a.is("--out"));
    CHECK(a.value() == "dir");
    REQUIRE(a.next());
    CHECK(a.is("--max"));
    CHECK(a.size_value() == 1 << 20);
    REQUIRE(a.next());
    CHECK_THROWS_WITH(a.integer_value(1, 10), "--runs: 'x' is not an integer");
    REQUIRE(a.next());
    CHECK_THROWS_WITH(a.unknown(), "unknown option '--what'");
    CHECK_FALSE(a.next());
    const char* argv2[] = {"prog", "--runs"};
    Args b(2, const_cast<char**>(argv2));
    REQUIRE(b.next());
    CHECK_THROWS_WITH(b.value(), "--runs needs a value");
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

TEST_CASE("build_chain links every element once; chase follows it") {
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
