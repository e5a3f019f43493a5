// SPDX-License-Identifier: MIT
// The cache model of pmc emulate --cache (tools/emulate/model/cache_model.hpp) on access streams whose hits and
// misses are known: LRU in one set, sequential streams, write-allocate, straddles, inclusion, the L2, geometry
// errors, the instruction-side plan and the join of QEMU's split accesses; and, on random streams, against a
// plain reference written from Cachegrind's description (a list per set).
#include "catch.hpp"

#include <model/cache_model.hpp>

#include <cstdint>
#include <list>
#include <random>
#include <string>
#include <vector>

using namespace pmc_model;

namespace {

CacheConfig config(CacheGeometry i1, CacheGeometry d1, CacheGeometry ll) {
    CacheConfig c;
    c.i1 = i1;
    c.d1 = d1;
    c.ll = ll;
    return c;
}

std::string problem(const char* text) {
    CacheGeometry g;
    return parse_geometry(text, g);
}

/// The reference: each set a list, most recently used first; an access's first and last line both used, a miss
/// if either missed; the next level asked only on a miss. Written for clarity, not speed.
struct ReferenceLevel {
    CacheGeometry g;
    std::vector<std::list<std::uint64_t>> sets;
    explicit ReferenceLevel(CacheGeometry geometry) : g(geometry), sets(geometry.sets()) {}
    bool use(std::uint64_t line) {
        auto& set = sets[line % sets.size()];
        for (auto it = set.begin(); it != set.end(); ++it)
            if (*it == line) {
                set.erase(it);
                set.push_front(line);
                return false;
            }
        set.push_front(line);
        if (set.size() > g.assoc) set.pop_back();
        return true;
    }
    bool miss(std::uint64_t address, std::uint32_t size) {
        const std::uint64_t a = address / g.line, b = (address + size - 1) / g.line;
        const bool m = use(a);
        return b != a ? use(b) || m : m;
    }
};

struct Reference {
    ReferenceLevel i1, d1, ll;
    std::vector<ReferenceLevel> l2;
    std::uint32_t widest;
    CacheCounts counts;
    explicit Reference(const CacheConfig& c) : i1(c.i1), d1(c.d1), ll(c.ll), widest(std::min({c.i1.line, c.d1.line, c.ll.line})) {
        if (c.l2) {
            l2.emplace_back(*c.l2);
            widest = std::min(widest, c.l2->line);
        }
    }
    Level access(ReferenceLevel& first, Kind kind, std::uint64_t address, std::uint32_t size) {
        size = std::min(size, widest);
        const auto k = CacheCounts::at(kind);
        ++counts.l1[k].accesses;
        if (!first.miss(address, size)) return Level::l1;
        ++counts.l1[k].misses;
        if (!l2.empty()) {
            ++counts.l2[k].accesses;
            if (!l2[0].miss(address, size)) return Level::l2;
            ++counts.l2[k].misses;
        }
        ++counts.ll[k].accesses;
        if (!ll.miss(address, size)) return Level::ll;
        ++counts.ll[k].misses;
        return Level::memory;
    }
};

void require_same(const CacheCounts& a, const CacheCounts& b) {
    for (std::size_t k = 0; k < 3; ++k) {
        CAPTURE(k);
        REQUIRE(a.l1[k].accesses == b.l1[k].accesses);
        REQUIRE(a.l1[k].misses == b.l1[k].misses);
        REQUIRE(a.l2[k].accesses == b.l2[k].accesses);
        REQUIRE(a.l2[k].misses == b.l2[k].misses);
        REQUIRE(a.ll[k].accesses == b.ll[k].accesses);
        REQUIRE(a.ll[k].misses == b.ll[k].misses);
    }
}

} // namespace

TEST_CASE("geometry: Valgrind's SIZE,ASSOC,LINE parsed, and every unusable one refused with the reason") {
    CacheGeometry g;
    REQUIRE(parse_geometry("32768,8,64", g).empty());
    REQUIRE(g == CacheGeometry{32768, 8, 64});
    REQUIRE(g.sets() == 64);
    REQUIRE(parse_geometry("8388608,16,64", g).empty());
    REQUIRE(g.sets() == 8192);
    REQUIRE(parse_geometry("4096,64,64", g).empty()); // fully associative: one set
    REQUIRE(g.sets() == 1);

    for (const char* bad : {"", "32768", "32768,8", "32768,8,64,", "32768,8,64,1", "32k,8,64", "-1,8,64", " 32768,8,64",
                            "32768,,64", "32768;8;64"})
        REQUIRE_THAT(problem(bad), ContainsSubstring("is not SIZE,ASSOC,LINE"));
    REQUIRE_THAT(problem("99999999999,8,64"), ContainsSubstring("too large"));
    REQUIRE_THAT(problem("0,8,64"), ContainsSubstring("above 0"));
    REQUIRE_THAT(problem("32768,0,64"), ContainsSubstring("above 0"));
    REQUIRE_THAT(problem("32768,8,48"), ContainsSubstring("line size 48 is not a power of two"));
    REQUIRE_THAT(problem("32768,8,8"), ContainsSubstring("below 16"));
    REQUIRE_THAT(problem("64,1,64"), ContainsSubstring("not above the line size"));
    REQUIRE_THAT(problem("32768,1024,64"), ContainsSubstring("above the 512 lines"));
    REQUIRE_THAT(problem("40000,8,64"), ContainsSubstring("not a whole number of 8-way sets"));
    // 48 KiB, 12-way (as some L1Ds): 64 sets, fine; 12 MiB 16-way (a Core i7's LLC): 12288 sets, refused.
    REQUIRE(problem("49152,12,64").empty());
    REQUIRE_THAT(problem("12582912,16,64"), ContainsSubstring("12288 sets: the set count must be a power of two"));
    // A failed parse leaves the geometry as it was.
    g = CacheGeometry{32768, 8, 64};
    REQUIRE(!parse_geometry("12582912,16,64", g).empty());
    REQUIRE(g == CacheGeometry{32768, 8, 64});

    CacheConfig c;
    c.inclusion = Inclusion::strict;
    c.ll = CacheGeometry{1 << 20, 16, 32}; // LL lines shorter than D1's
    REQUIRE_THAT(config_problem(c), ContainsSubstring("strict inclusion"));
    REQUIRE_THROWS_AS(CacheHierarchy(c), std::invalid_argument);
    c.inclusion = Inclusion::cachegrind;
    REQUIRE(config_problem(c).empty());
    c.d1 = CacheGeometry{40000, 8, 64};
    REQUIRE_THAT(config_problem(c), ContainsSubstring("D1: "));
}

TEST_CASE("geometry: a host LL whose set count is not a power of two is rounded as Cachegrind rounds it") {
    // 12 MiB, 16-way: 12,288 sets -> 8,192 sets, 24-way, 12 MiB.
    REQUIRE(round_sets_like_cachegrind({12582912, 16, 64}) == CacheGeometry{12582912, 24, 64});
    // cg_arch.c's own example: 5 MiB, 48-way: 1,706.67 sets -> 1,024 sets, 80-way, 5 MiB.
    REQUIRE(round_sets_like_cachegrind({5242880, 48, 64}) == CacheGeometry{5242880, 80, 64});
    // A power of two is left alone; a size that does not divide is trimmed to whole sets.
    REQUIRE(round_sets_like_cachegrind({8388608, 16, 64}) == CacheGeometry{8388608, 16, 64});
    REQUIRE(round_sets_like_cachegrind({8388608 + 100, 16, 64}) == CacheGeometry{8388608, 16, 64});
    REQUIRE(geometry_problem(round_sets_like_cachegrind({12582912, 16, 64})).empty());
}

TEST_CASE("LRU: a pointer chase over N lines of one set misses exactly as LRU predicts") {
    // D1: 64 sets of 8 ways: lines 4 KiB apart share a set. The LL (8,192 sets) spreads them over sets of its own.
    const std::uint64_t base = 0x10000000, stride = 64 * 64;
    const std::uint64_t rounds = 50;
    for (std::uint64_t n : {1u, 4u, 7u, 8u, 9u, 12u, 16u}) {
        CAPTURE(n);
        CacheHierarchy h(CacheConfig{});
        for (std::uint64_t r = 0; r < rounds; ++r)
            for (std::uint64_t i = 0; i < n; ++i) h.read(base + i * stride, 8);
        // Up to 8 lines fit the set: only the first round misses. A 9th line makes LRU evict, in a cyclic order,
        // exactly the line needed next: every access misses.
        const std::uint64_t d1_misses = n <= 8 ? n : n * rounds;
        REQUIRE(h.counts().Dr() == n * rounds);
        REQUIRE(h.counts().D1mr() == d1_misses);
        REQUIRE(h.counts().ll[CacheCounts::at(Kind::read)].accesses == d1_misses);
        REQUIRE(h.counts().DLmr() == n); // the LL holds them all after the first round
    }
    // In the LL too: lines 512 KiB apart share an LL set (and a D1 set): 16 fit, 17 miss in both levels always.
    for (std::uint64_t n : {16u, 17u}) {
        CAPTURE(n);
        CacheHierarchy h(CacheConfig{});
        for (std::uint64_t r = 0; r < rounds; ++r)
            for (std::uint64_t i = 0; i < n; ++i) h.read(base + i * 8192 * 64, 8);
        REQUIRE(h.counts().D1mr() == n * rounds);
        REQUIRE(h.counts().DLmr() == (n <= 16 ? n : n * rounds));
    }
    // A hit moves the line to the front: touching line 0 before each new line keeps it in a full set.
    CacheHierarchy h(CacheConfig{});
    for (std::uint64_t i = 1; i <= 20; ++i) {
        h.read(base, 8);
        h.read(base + i * stride, 8);
    }
    REQUIRE(h.counts().D1mr() == 21); // line 0 once, each other line once: line 0 never evicted
}

TEST_CASE("sequential streams: one miss per new line, a second pass hits if the data fit, misses if twice the size") {
    for (std::uint64_t bytes : {std::uint64_t{16} << 10, std::uint64_t{32} << 10, std::uint64_t{64} << 10}) {
        CAPTURE(bytes);
        CacheHierarchy h(CacheConfig{});
        const std::uint64_t base = 0x7f0000000000;
        for (std::uint64_t a = 0; a < bytes; a += 8) h.read(base + a, 8);
        REQUIRE(h.counts().Dr() == bytes / 8);
        REQUIRE(h.counts().D1mr() == bytes / 64);
        REQUIRE(h.counts().DLmr() == bytes / 64);
        for (std::uint64_t a = 0; a < bytes; a += 8) h.read(base + a, 8);
        REQUIRE(h.counts().D1mr() == (bytes <= (32u << 10) ? bytes / 64 : 2 * bytes / 64));
        REQUIRE(h.counts().DLmr() == bytes / 64); // the LL holds 8 MiB
    }
}

TEST_CASE("write-allocate: a store that misses brings its line in, later loads of the line hit") {
    CacheHierarchy h(CacheConfig{});
    REQUIRE(h.write(0x1000, 8) == Level::memory);
    REQUIRE(h.counts().Dw() == 1);
    REQUIRE(h.counts().D1mw() == 1);
    REQUIRE(h.counts().DLmw() == 1);
    REQUIRE(h.read(0x1038, 8) == Level::l1);
    REQUIRE(h.write(0x1008, 4) == Level::l1);
    REQUIRE(h.counts().D1mr() == 0);
    REQUIRE(h.counts().D1mw() == 1);
    REQUIRE(h.d1().holds(0x1000 >> 6));
    REQUIRE(h.ll().holds(0x1000 >> 6));
    // Data and instructions have L1s of their own and share the LL.
    REQUIRE(h.fetch(0x1000, 4) == Level::ll);
    REQUIRE(h.counts().I1mr() == 1);
    REQUIRE(h.counts().ILmr() == 0);
}

TEST_CASE("straddles: an access across two lines counts once, a miss if either line misses") {
    CacheHierarchy h(CacheConfig{});
    // Both lines cold: one access, one miss (not two), in D1 and in the LL; both lines are now held.
    REQUIRE(h.read(0x2000 + 60, 8) == Level::memory);
    REQUIRE(h.counts().Dr() == 1);
    REQUIRE(h.counts().D1mr() == 1);
    REQUIRE(h.counts().DLmr() == 1);
    REQUIRE(h.d1().holds(0x2000 >> 6));
    REQUIRE(h.d1().holds((0x2000 >> 6) + 1));
    REQUIRE(h.read(0x2040, 8) == Level::l1);
    REQUIRE(h.read(0x2000 + 124, 8) == Level::memory); // first line held, second cold: still one miss
    REQUIRE(h.counts().D1mr() == 2);
    REQUIRE(h.counts().DLmr() == 2);
    REQUIRE(h.counts().ll[CacheCounts::at(Kind::read)].accesses == 2);
    // Each level cuts an access to the narrowest line configured: with 16-byte D1 lines, a 32-byte load at a line's
    // start touches one line only, and the next 16 bytes still miss.
    CacheHierarchy narrow(config({32768, 8, 64}, {1024, 2, 16}, {1 << 20, 16, 64}));
    REQUIRE(narrow.widest_access() == 16);
    narrow.read(0x4000, 32);
    REQUIRE(narrow.counts().D1mr() == 1);
    REQUIRE(narrow.read(0x4010, 8) == Level::ll);
    REQUIRE(narrow.counts().D1mr() == 2);
    // A straddling instruction fetch likewise.
    REQUIRE(h.fetch(0x9000 + 62, 5) == Level::memory);
    REQUIRE(h.counts().I1mr() == 1);
    REQUIRE(h.i1().holds((0x9000 >> 6) + 1));
}

TEST_CASE("inclusion: Cachegrind's LL evicts without touching L1, strict inclusion takes the L1 copy too") {
    // D1: 8 sets of 2 ways; LL: 64 direct-mapped lines. 0x0 and 0x1000 share a D1 set (both fit) and an LL line.
    const auto small = config({1024, 2, 64}, {1024, 2, 64}, {4096, 1, 64});
    for (const Inclusion inclusion : {Inclusion::cachegrind, Inclusion::strict}) {
        CAPTURE(static_cast<int>(inclusion));
        CacheConfig c = small;
        c.inclusion = inclusion;
        CacheHierarchy h(c);
        h.read(0x0, 8);
        h.read(0x1000, 8); // evicts line 0 from the LL
        REQUIRE(!h.ll().holds(0));
        const Level again = h.read(0x0, 8);
        if (inclusion == Inclusion::cachegrind) {
            REQUIRE(again == Level::l1); // the D1 copy survived the LL's eviction
            REQUIRE(h.counts().D1mr() == 2);
        } else {
            REQUIRE(again == Level::memory); // gone from D1 with the LL's eviction
            REQUIRE(h.counts().D1mr() == 3);
            REQUIRE(!h.d1().holds(0x1000 >> 6)); // ... and line 0's return took 0x1000 out of both
        }
    }
    // Strict, with an L2 between: the LL's eviction reaches the L2 and the L1s, instruction side included.
    CacheConfig c = small;
    c.l2 = CacheGeometry{2048, 2, 64};
    c.inclusion = Inclusion::strict;
    CacheHierarchy h(c);
    h.fetch(0x0, 4);
    h.read(0x1000, 8);
    REQUIRE(!h.i1().holds(0));
    REQUIRE(!h.l2()->holds(0));
    // The line dropped was its D1 set's most recent: the set's compact copy of that tag goes too (the next read
    // of it misses), and the line behind it becomes the most recent (a hit, changing nothing).
    CacheConfig s = small;
    s.inclusion = Inclusion::strict;
    CacheHierarchy d(s);
    d.read(0x200, 8);   // D1 set 0: 0x200 (LL line 8)
    d.read(0x0, 8);     // D1 set 0: 0x0, 0x200 (LL line 0)
    d.fetch(0x1000, 4); // LL line 0: 0x1000 evicts 0x0, which leaves D1, where it was the most recent
    REQUIRE(!d.d1().holds(0));
    REQUIRE(d.d1().hits_most_recent(0x200, 8, 64));
    REQUIRE(!d.d1().hits_most_recent(0x0, 8, 64));
    REQUIRE(d.read(0x0, 8) == Level::memory);
    REQUIRE(d.counts().D1mr() == 3);
}

TEST_CASE("an L2 between the L1s and the LL: the LL is asked only on an L2 miss") {
    CacheConfig c;
    c.l2 = CacheGeometry{262144, 8, 64};
    CacheHierarchy h(c);
    // 64 KiB twice: twice D1, within the L2.
    for (int pass = 0; pass < 2; ++pass)
        for (std::uint64_t a = 0; a < (64u << 10); a += 64) h.read(0x100000 + a, 8);
    const auto r = CacheCounts::at(Kind::read);
    REQUIRE(h.counts().D1mr() == 2 * 1024);
    REQUIRE(h.counts().l2[r].accesses == 2 * 1024);
    REQUIRE(h.counts().l2[r].misses == 1024);
    REQUIRE(h.counts().ll[r].accesses == 1024);
    REQUIRE(h.counts().DLmr() == 1024);
    REQUIRE(h.read(0x100000, 8) == Level::l2);
}

TEST_CASE("random streams: the model's counts and levels equal the plain reference's, access by access") {
    CacheConfig with_l2;
    with_l2.l2 = CacheGeometry{65536, 4, 64};
    const CacheConfig configs[] = {
        CacheConfig{},
        config({4096, 2, 32}, {2048, 4, 16}, {65536, 8, 64}),   // lines of three sizes: cuts at 16
        config({1024, 1, 64}, {1024, 1, 64}, {16384, 2, 64}),  // direct-mapped L1s
        config({32768, 8, 64}, {4096, 64, 64}, {32768, 16, 64}), // a fully associative D1
        config({32768, 8, 64}, {32768, 8, 64}, {16384, 4, 64}),  // an LL smaller than the L1s, as Cachegrind runs it
        with_l2,
    };
    std::mt19937_64 random(12345);
    for (const CacheConfig& c : configs) {
        CacheHierarchy model(c);
        Reference reference(c);
        // Addresses drawn from a few regions of differing sizes, so that hits, misses and straddles all occur.
        const std::uint64_t regions[] = {1u << 12, 1u << 16, 1u << 20, 1u << 24};
        for (int i = 0; i < 200000; ++i) {
            const std::uint64_t region = regions[random() % 4];
            const std::uint64_t address = 0x400000 + region + random() % region;
            const std::uint32_t size = std::uint32_t{1} << (random() % 6); // 1 to 32 bytes
            const int what = static_cast<int>(random() % 3);
            Level got, want;
            if (what == 0) {
                got = model.read(address, size);
                want = reference.access(reference.d1, Kind::read, address, size);
            } else if (what == 1) {
                got = model.write(address, size);
                want = reference.access(reference.d1, Kind::write, address, size);
            } else {
                got = model.fetch(address, size > 15 ? 15 : size);
                want = reference.access(reference.i1, Kind::instruction, address, size > 15 ? 15 : size);
            }
            if (got != want) {
                CAPTURE(i, address, size, what);
                REQUIRE(to_string(got) == std::string(to_string(want)));
            }
        }
        require_same(model.counts(), reference.counts);
        REQUIRE(model.counts().D1mr() > 1000);
        REQUIRE(model.counts().DLmr() > 100);
    }
}

TEST_CASE("the plugin's inline paths (data, fetch_planned) count as read, write and fetch_uncounted do") {
    CacheConfig strict;
    strict.inclusion = Inclusion::strict;
    const CacheConfig configs[] = {
        CacheConfig{},
        config({4096, 2, 32}, {2048, 4, 16}, {65536, 8, 64}), // cuts at 16: the inline check cuts the same
        config({1024, 1, 64}, {1024, 1, 64}, {16384, 2, 64}),
        strict,                                                // a hit on the most recent line evicts nothing
    };
    std::mt19937_64 random(777);
    for (const CacheConfig& c : configs) {
        CacheHierarchy inline_paths(c), full(c);
        const std::uint64_t regions[] = {1u << 8, 1u << 12, 1u << 16, 1u << 22};
        for (int i = 0; i < 200000; ++i) {
            const std::uint64_t region = regions[random() % 4];
            const std::uint64_t address = 0x400000 + region + random() % region;
            const std::uint32_t size = std::uint32_t{1} << (random() % 7); // 1 to 64 bytes: straddles and cuts
            switch (random() % 3) {
            case 0:
                inline_paths.data(Kind::read, address, size);
                full.read(address, size);
                break;
            case 1:
                inline_paths.data(Kind::write, address, size);
                full.write(address, size);
                break;
            default:
                inline_paths.fetch_planned(address, size > 15 ? 15 : size);
                full.fetch_uncounted(address, size > 15 ? 15 : size);
            }
        }
        require_same(inline_paths.counts(), full.counts());
        REQUIRE(full.counts().D1mr() > 1000);
        REQUIRE(full.counts().Dr() > 50000);
    }
}

TEST_CASE("instruction side: a block's planned fetches count as every instruction fetched one by one") {
    std::mt19937_64 random(777);
    CacheConfig c = config({2048, 2, 64}, {32768, 8, 64}, {65536, 4, 64});
    CacheHierarchy planned(c), one_by_one(c);
    // 300 blocks of 1 to 30 instructions of 1 to 15 bytes, placed at random, executed 20,000 times in random order.
    std::vector<std::vector<std::pair<std::uint64_t, std::uint32_t>>> blocks(300);
    std::vector<std::vector<FetchRef>> plans;
    for (auto& block : blocks) {
        std::uint64_t at = 0x400000 + random() % (1u << 16);
        for (std::uint64_t n = 1 + random() % 30; n > 0; --n) {
            const auto length = static_cast<std::uint32_t>(1 + random() % 15);
            block.emplace_back(at, length);
            at += length;
        }
        plans.push_back(plan_fetches(block, c.i1.line));
    }
    std::size_t references = 0, instructions = 0;
    for (int i = 0; i < 20000; ++i) {
        const std::size_t b = random() % blocks.size();
        planned.count_instructions(blocks[b].size());
        for (const FetchRef& r : plans[b]) planned.fetch_uncounted(r.address, r.size);
        for (const auto& [address, length] : blocks[b]) one_by_one.fetch(address, length);
        references += plans[b].size();
        instructions += blocks[b].size();
    }
    require_same(planned.counts(), one_by_one.counts());
    REQUIRE(planned.counts().I1mr() > 1000);
    REQUIRE(references < instructions / 2); // the plan drops most references

    // A block within one line is one reference; a straddling instruction is kept with its first line.
    REQUIRE(plan_fetches({{0x1000, 4}, {0x1004, 3}, {0x1007, 5}}, 64).size() == 1);
    const auto across = plan_fetches({{0x1030, 8}, {0x1038, 12}, {0x1044, 2}, {0x1046, 2}}, 64);
    REQUIRE(across.size() == 2);
    REQUIRE(across[1].address == 0x1038);
}

TEST_CASE("the plugin's fetch plan: a planned reference's precomputed hit check counts as the full fetch") {
    // Lines of 16 to 64 bytes; 16-byte lines cut nothing (instructions are at most 15 bytes) but straddle often.
    const CacheConfig configs[] = {
        config({2048, 2, 64}, {32768, 8, 64}, {65536, 4, 64}),
        config({1024, 4, 16}, {1024, 2, 16}, {16384, 4, 64}),
        config({4096, 1, 32}, {2048, 4, 16}, {65536, 8, 32}),
        config({512, 8, 64}, {1024, 2, 16}, {16384, 4, 64}), // one I1 set: a straddle's lines share it
    };
    for (const CacheConfig& c : configs) {
        std::mt19937_64 random(4242);
        CacheHierarchy checked(c), full(c);
        std::vector<std::vector<std::pair<std::uint64_t, std::uint32_t>>> blocks(400);
        std::vector<std::vector<FetchRef>> plans;
        std::size_t precomputed = 0, straddling = 0;
        for (auto& block : blocks) {
            std::uint64_t at = 0x400000 + random() % (1u << 15);
            for (std::uint64_t n = 1 + random() % 20; n > 0; --n) {
                const auto length = static_cast<std::uint32_t>(1 + random() % 15);
                block.emplace_back(at, length);
                at += length;
            }
            plans.push_back(plan_fetches(block, c));
            for (const FetchRef& r : plans.back()) (r.straddles() ? straddling : precomputed) += 1;
        }
        for (int i = 0; i < 30000; ++i) {
            const std::size_t b = random() % blocks.size();
            checked.count_instructions(blocks[b].size());
            full.count_instructions(blocks[b].size());
            for (const FetchRef& r : plans[b]) {
                checked.fetch_planned(r);
                full.fetch_uncounted(r.address, r.size);
            }
        }
        require_same(checked.counts(), full.counts());
        REQUIRE(full.counts().I1mr() > 1000);
        REQUIRE(precomputed > 300); // both kinds of reference were there
        REQUIRE(straddling > 50);
    }
    // A reference planned for its line: its slot and tag, twice; one that straddles two lines: each line's.
    const auto refs = plan_fetches({{0x1038, 4}, {0x103c, 8}}, CacheConfig{});
    REQUIRE(refs.size() == 2);
    REQUIRE(refs[0].tag == (0x1038u >> 6) + 1);
    REQUIRE(refs[0].slot == ((0x1038u >> 6) & 63)); // its set, in I1's compact array of most recent tags
    REQUIRE((refs[0].last_tag == refs[0].tag && refs[0].last_slot == refs[0].slot && !refs[0].straddles()));
    REQUIRE(refs[1].straddles());
    REQUIRE(refs[1].tag == (0x103cu >> 6) + 1);
    REQUIRE(refs[1].last_tag == (0x1043u >> 6) + 1);
    REQUIRE(refs[1].last_slot == ((0x1043u >> 6) & 63));
    // A plan for a line size alone has no tags: every reference is checked in full.
    REQUIRE(plan_fetches({{0x1038, 4}}, 64)[0].tag == FetchRef::no_tag);
}

TEST_CASE("the plugin's fetch plan: a block's last instruction planned apart counts once, whether QEMU cut the "
          "block before it or not") {
    // QEMU 7.2 cuts a block before an instruction that ends past the block's first page and still lists it; the
    // next block starts with it. Each instruction must be counted and fetched once per execution, as Cachegrind
    // fetches instructions one by one, in both cases: kept (the last instruction's own call runs) and cut (it
    // does not, and the next block fetches it).
    const CacheConfig configs[] = {CacheConfig{}, config({1024, 2, 16}, {2048, 4, 32}, {32768, 4, 64})};
    for (const CacheConfig& c : configs) {
        std::mt19937_64 random(77);
        CacheHierarchy planned(c), one_by_one(c), listed_whole(c);
        std::uint64_t page_end = 0x401000, cuts = 0;
        for (int i = 0; i < 3000; ++i) {
            // A block of 2 to 12 instructions whose last starts 1 to 14 bytes before a page's end (it may cross),
            // then the next block: from the last instruction if QEMU cut the block before it, else from its end.
            std::vector<std::pair<std::uint64_t, std::uint32_t>> block, next;
            const auto last_length = static_cast<std::uint32_t>(1 + random() % 15);
            const std::uint64_t last_at = page_end - 1 - random() % 14;
            std::uint64_t at = last_at;
            for (std::uint64_t n = 1 + random() % 11; n > 0; --n) {
                const auto length = static_cast<std::uint32_t>(1 + random() % 15);
                at -= length;
                block.insert(block.begin(), {at, length});
            }
            block.emplace_back(last_at, last_length);
            const bool cut = random() % 2 == 0;
            cuts += cut ? 1 : 0;
            if (cut) next.emplace_back(last_at, last_length);
            for (std::uint64_t n = 1 + random() % 6, a = last_at + last_length; n > 0; --n) {
                const auto length = static_cast<std::uint32_t>(1 + random() % 15);
                next.emplace_back(a, length);
                a += length;
            }
            const BlockFetchPlan apart = plan_block(block, c, true), rest = plan_block(next, c, false);
            REQUIRE(apart.last_apart);
            REQUIRE(apart.instructions == block.size() - 1);
            REQUIRE(apart.last.address == last_at);
            REQUIRE(apart.last.size == last_length);
            planned.count_instructions(apart.instructions);
            for (const FetchRef& r : apart.refs) planned.fetch_planned(r);
            if (!cut) { // the last instruction ran in the block: its own call
                planned.count_instructions(1);
                planned.fetch_planned(apart.last);
            }
            planned.count_instructions(rest.instructions);
            for (const FetchRef& r : rest.refs) planned.fetch_planned(r);
            // Cachegrind: every instruction that ran, once, in order.
            for (std::size_t k = 0; k < block.size() - (cut ? 1 : 0); ++k) one_by_one.fetch(block[k].first, block[k].second);
            for (const auto& [address, length] : next) one_by_one.fetch(address, length);
            // Before: the whole listing planned with the block, which counted a cut instruction twice.
            listed_whole.count_instructions(block.size());
            for (const FetchRef& r : plan_fetches(block, c)) listed_whole.fetch_planned(r);
            listed_whole.count_instructions(rest.instructions);
            for (const FetchRef& r : rest.refs) listed_whole.fetch_planned(r);
            page_end += 4096 * (1 + random() % 40);
        }
        require_same(planned.counts(), one_by_one.counts());
        REQUIRE(planned.counts().I1mr() > 500);
        REQUIRE(cuts > 1000);
        REQUIRE(listed_whole.counts().Ir() == one_by_one.counts().Ir() + cuts);
    }
    // Planned apart only with two or more instructions; otherwise plan_fetches' plan.
    const std::vector<std::pair<std::uint64_t, std::uint32_t>> one{{0x1ffe, 7}}, two{{0x1ff8, 3}, {0x1ffb, 7}};
    REQUIRE_FALSE(plan_block(one, CacheConfig{}, true).last_apart);
    REQUIRE(plan_block(one, CacheConfig{}, true).instructions == 1);
    const BlockFetchPlan kept = plan_block(two, CacheConfig{}, false);
    REQUIRE_FALSE(kept.last_apart);
    REQUIRE(kept.instructions == 2);
    REQUIRE(kept.refs.size() == plan_fetches(two, CacheConfig{}).size());
    const BlockFetchPlan apart = plan_block(two, CacheConfig{}, true);
    REQUIRE(apart.instructions == 1);
    REQUIRE(apart.refs.size() == 1);
    REQUIRE(apart.last.address == 0x1ffb);
    REQUIRE(apart.last.straddles()); // (it straddles two lines: a check for each)
    REQUIRE(apart.last.tag != FetchRef::no_tag);
    REQUIRE(apart.last.last_tag != FetchRef::no_tag);
}

TEST_CASE("split accesses: QEMU's pieces of one instruction are one access, a read-modify-write one read") {
    std::vector<DataAccess> seen;
    const auto sink = [&](const DataAccess& a) { seen.push_back(a); };
    DataAccessMerger m;
    // A 16-byte SSE load that QEMU 7.2 reports as two 8-byte loads: one 16-byte read.
    m.add(1, 0x400100, false, 0x5000, 8, sink);
    m.add(1, 0x400100, false, 0x5008, 8, sink);
    REQUIRE(seen.empty()); // not complete until the next access or a flush
    // A 32-byte AVX store as four pieces.
    for (std::uint64_t i = 0; i < 4; ++i) m.add(2, 0x400108, true, 0x6000 + 8 * i, 8, sink);
    // add [m], r: a load and a store of the same 4 bytes: one read.
    m.add(3, 0x400110, false, 0x7000, 4, sink);
    m.add(3, 0x400110, true, 0x7000, 4, sink);
    // The same instruction executed again (the next loop iteration): not joined with the last execution.
    m.add(4, 0x400110, false, 0x7004, 4, sink);
    // Two loads of one instruction that are not contiguous (a gather, cmpsb): two accesses.
    m.add(5, 0x400118, false, 0x8000, 1, sink);
    m.add(5, 0x400118, false, 0x9000, 1, sink);
    // A load and a store elsewhere (push [m], movsb): two accesses.
    m.add(6, 0x400120, false, 0xa000, 8, sink);
    m.add(6, 0x400120, true, 0xb000, 8, sink);
    // After a read-modify-write, a further store of the instruction is an access of its own.
    m.add(7, 0x400128, false, 0xc000, 8, sink);
    m.add(7, 0x400128, true, 0xc000, 8, sink);
    m.add(7, 0x400128, true, 0xc008, 8, sink);
    // QEMU 7.2's lock cmpxchg16b: a 16-byte load in two pieces, then its store in two: one read, as Cachegrind's.
    m.add(8, 0x400130, false, 0xd000, 8, sink);
    m.add(8, 0x400130, false, 0xd008, 8, sink);
    m.add(8, 0x400130, true, 0xd000, 8, sink);
    m.add(8, 0x400130, true, 0xd008, 8, sink);
    // A store past the load's bytes is an access of its own.
    m.add(9, 0x400138, false, 0xe000, 8, sink);
    m.add(9, 0x400138, true, 0xe000, 4, sink);
    m.add(9, 0x400138, true, 0xe004, 8, sink);
    m.flush(sink);
    REQUIRE(!m.pending());
    const std::vector<std::tuple<std::uint64_t, std::uint32_t, Kind>> want = {
        {0x5000, 16, Kind::read},  {0x6000, 32, Kind::write}, {0x7000, 4, Kind::read},  {0x7004, 4, Kind::read},
        {0x8000, 1, Kind::read},   {0x9000, 1, Kind::read},   {0xa000, 8, Kind::read},  {0xb000, 8, Kind::write},
        {0xc000, 8, Kind::read},   {0xc008, 8, Kind::write}, {0xd000, 16, Kind::read}, {0xe000, 8, Kind::read},
        {0xe004, 8, Kind::write}};
    REQUIRE(seen.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        CAPTURE(i);
        REQUIRE(seen[i].address == std::get<0>(want[i]));
        REQUIRE(seen[i].size == std::get<1>(want[i]));
        REQUIRE(seen[i].kind == std::get<2>(want[i]));
    }
    REQUIRE(seen[0].pc == 0x400100);
    m.flush(sink); // nothing pending: nothing more
    REQUIRE(seen.size() == want.size());

    // Through the model: the joined 16-byte load at a line's last 8 bytes is one straddling access, one miss.
    CacheHierarchy h(CacheConfig{});
    const auto to_model = [&](const DataAccess& a) {
        if (a.kind == Kind::write) h.write(a.address, a.size);
        else h.read(a.address, a.size);
    };
    m.add(1, 0x400100, false, 0x5038, 8, to_model);
    m.add(1, 0x400100, false, 0x5040, 8, to_model);
    m.flush(to_model);
    REQUIRE(h.counts().Dr() == 1);
    REQUIRE(h.counts().D1mr() == 1);
}

TEST_CASE("the plugin's merger, counting hits on the most recent line at once, counts as the merger with its sink") {
    // The plugin's path (plugin_cache.hpp): add_without_sink, else add() with the hierarchy; against the merger that
    // passes every access to its sink (the plugin before), on random instruction executions between blocks' fetches:
    // one access, QEMU's pieces of a split one, read-modify-writes (in pieces too), two unrelated accesses, runs
    // (each member's most-recent check, the run counted in bulk, the rest one by one from the first that fails), and
    // system calls (flush). count_now flips at random (the plugin's load sampler turns it off for loads).
    CacheConfig with_l2;
    with_l2.l2 = CacheGeometry{16384, 4, 64};
    CacheConfig strict_small = config({4096, 2, 64}, {4096, 4, 64}, {16384, 2, 64});
    strict_small.inclusion = Inclusion::strict; // LL evictions by fetches drop D1 lines: counting at once would differ
    CacheConfig strict_l2 = strict_small;
    strict_l2.l2 = CacheGeometry{8192, 2, 64};
    const CacheConfig configs[] = {
        CacheConfig{},
        config({4096, 2, 32}, {2048, 4, 16}, {65536, 8, 64}), // cuts at 16
        config({1024, 1, 64}, {1024, 1, 64}, {16384, 2, 64}),  // direct-mapped L1s
        with_l2, strict_small, strict_l2,
    };
    std::mt19937_64 random(4242);
    for (const CacheConfig& c : configs) {
        CacheHierarchy quick(c), plain(c);
        DataAccessMerger quick_merger, plain_merger;
        quick_merger.set_strict(!quick.counts_hits_early()); // (as the plugin's CacheThread)
        const auto quick_sink = [&](const DataAccess& a) { quick.data(a.kind, a.address, a.size); };
        const auto plain_sink = [&](const DataAccess& a) {
            if (a.kind == Kind::write) plain.write(a.address, a.size);
            else plain.read(a.address, a.size);
        };
        std::uint64_t block = 0, counted_at_once = 0, counted_alone = 0, counted_hits = 0, counted_in_runs = 0,
                      last = 0x10000000;
        // `alone`: the instruction's only access (the plugin's on_single_access and run members):
        // add_small_alone_quickly first (its gate told whether a sampler runs: count_now), then add_alone_if_hit
        // (any D1 hit counted at once), then add().
        const auto access = [&](std::uint64_t execution, Kind kind, std::uint64_t address, std::uint32_t size,
                                bool alone = false) {
            const bool count_now = kind == Kind::write || random() % 8 != 0;
            *quick_merger.sampling_flag() = random() % 8 == 0 || (kind == Kind::read && !count_now) ? 1 : 0;
            const std::uint64_t before = quick.counts().Dr() + quick.counts().Dw();
            // (with the default D1, half of them through the path compiled for its geometry, as the plugin's)
            const bool as_default = quick.has_d1(default_d1) && random() % 2 == 0;
            if (alone && size <= pmc_model::min_line_size &&
                (as_default ? quick_merger.add_small_alone_quickly_as<DefaultD1>(quick, kind, address, size)
                            : quick_merger.add_small_alone_quickly(quick, kind, address, size))) {
                REQUIRE(count_now);
                ++counted_alone;
            } else if (alone && count_now && quick_merger.add_alone_without_sink(quick, kind, address, size))
                ++counted_alone;
            else if (alone && count_now && quick_merger.add_alone_if_hit(quick, kind, address, size, quick_sink))
                ++counted_hits;
            else if (alone && count_now)
                quick_merger.add(&quick, count_now, execution, 0x400000, kind, address, size, quick_sink);
            else if (quick_merger.add_without_sink(quick, count_now, execution, 0x400000, kind, address, size))
                counted_at_once += quick.counts().Dr() + quick.counts().Dw() > before ? 1 : 0; // (it completes none)
            else
                quick_merger.add(&quick, count_now, execution, 0x400000, kind, address, size, quick_sink);
            plain_merger.add(execution, 0x400000, kind == Kind::write, address, size, plain_sink);
        };
        const std::uint64_t regions[] = {1u << 8, 1u << 12, 1u << 16, 1u << 20};
        for (int i = 0; i < 200000; ++i) {
            const int what = static_cast<int>(random() % 16);
            if (what == 0) { // a block starts: its fetches
                ++block;
                const std::uint64_t at = 0x800000 + random() % (1u << 16);
                for (std::uint64_t k = 0; k < 1 + random() % 3; ++k) {
                    quick.fetch_uncounted(at + 4 * k, 4);
                    plain.fetch_uncounted(at + 4 * k, 4);
                }
                continue;
            }
            if (what == 1) { // a system call: the pending access completed, the counts compared
                quick_merger.flush(quick_sink);
                plain_merger.flush(plain_sink);
                require_same(quick.counts(), plain.counts());
                continue;
            }
            if (what == 15) { // a run of stack accesses, as the plugin's on_run and on_run_from pass it on
                const std::uint64_t members = 2 + random() % 4, top = last + random() % 48;
                std::vector<std::pair<Kind, std::uint32_t>> run; // each member's kind and size (1 to 8 bytes)
                std::uint64_t reads = 0, writes = 0;
                for (std::uint64_t k = 0; k < members; ++k) {
                    run.emplace_back(random() % 2 ? Kind::write : Kind::read, std::uint32_t{1} << (random() % 4));
                    ++(run.back().first == Kind::write ? writes : reads);
                }
                const auto at = [&](std::uint64_t k) { return top - 8 * (members - 1 - k); }; // pushes, say
                std::uint64_t first = 0; // on_run: every member one check, if nothing waits and nothing samples
                if (!quick_merger.waiting() && quick.counts_hits_early() && random() % 8 != 0)
                    while (first < members && quick.small_hits_most_recent(at(first), run[first].second)) ++first;
                std::uint64_t first_reads = 0; // on_run_from: the members checked before it counted, in bulk
                for (std::uint64_t k = 0; k < first; ++k) first_reads += run[k].first == Kind::read ? 1 : 0;
                if (first == members) {
                    quick.count_data_hits(Kind::read, reads);
                    quick.count_data_hits(Kind::write, writes);
                    counted_in_runs += members;
                } else {
                    quick.count_data_hits(Kind::read, first_reads);
                    quick.count_data_hits(Kind::write, first - first_reads);
                }
                for (std::uint64_t k = 0; k < members; ++k) {
                    // (executions of their own, as the plugin's members are instructions of their own)
                    const std::uint64_t execution = std::uint64_t{1} << 62 | static_cast<std::uint64_t>(i) << 3 | k;
                    if (k >= first && first < members) access(execution, run[k].first, at(k), run[k].second, true);
                    else plain_merger.add(execution, 0x400000, run[k].first == Kind::write, at(k), run[k].second,
                                          plain_sink);
                }
                last = top;
                continue;
            }
            const std::uint64_t execution = (block << 10) | static_cast<std::uint64_t>(i % 1024);
            const std::uint64_t region = regions[random() % 4];
            // Mostly near the last access (hits on the most recent line), else anywhere in a region.
            const std::uint64_t address =
                random() % 4 != 0 ? last + random() % 24 : 0x10000000 + region + random() % region;
            last = address;
            const std::uint32_t size = std::uint32_t{1} << (random() % 4);
            switch (what % 6) {
            case 0: // QEMU's pieces of one wide access
                for (std::uint64_t k = 0; k < 2 + random() % 3; ++k) access(execution, Kind::read, address + 8 * k, 8);
                break;
            case 1: // add [m], r
                access(execution, Kind::read, address, size);
                access(execution, Kind::write, address, size);
                break;
            case 2: // lock cmpxchg16b in QEMU 7.2: a load in two pieces, its store in two
                access(execution, Kind::read, address, 8);
                access(execution, Kind::read, address + 8, 8);
                access(execution, Kind::write, address, 8);
                access(execution, Kind::write, address + 8, 8);
                break;
            case 3: // movsq: a load and a store elsewhere
                access(execution, Kind::read, address, 8);
                access(execution, Kind::write, 0x10000000 + region + random() % region, 8);
                break;
            case 4: // mov, push, pop, ...: the instruction's only access, through the plugin's lean path
                access(execution, random() % 3 == 0 ? Kind::write : Kind::read, address, size, true);
                break;
            default:
                access(execution, random() % 3 == 0 ? Kind::write : Kind::read, address, size);
            }
        }
        quick_merger.flush(quick_sink);
        plain_merger.flush(plain_sink);
        require_same(quick.counts(), plain.counts());
        REQUIRE(plain.counts().D1mr() > 1000);
        CAPTURE(counted_at_once, counted_alone, counted_hits, counted_in_runs);
        if (c.inclusion == Inclusion::strict)
            REQUIRE(counted_at_once + counted_alone + counted_hits + counted_in_runs == 0);
        else REQUIRE(counted_at_once > 5000); // the path under test was taken (9,020 to 57,083 here)
        if (c.inclusion != Inclusion::strict) REQUIRE(counted_alone > 1000); // and the lean one (2,113 to 9,495)
        if (c.inclusion != Inclusion::strict) REQUIRE(counted_hits > 100);    // and any D1 hit of a lone access
        if (c.inclusion != Inclusion::strict) REQUIRE(counted_in_runs > 1000); // and whole runs by their checks
    }
}

TEST_CASE("the plugin's runs: two lines' check of a span within a line stands for each member's check") {
    // on_run (plugin_cache.hpp) counts a run of more than 3 members as hits when span_hits_most_recent says so; it
    // must say so only when each member alone is a hit on the most recent line of its D1 set (small_hits_most_recent).
    // Random runs (pushes 8 bytes apart, or any offsets and sizes), at aligned and unaligned addresses, against D1s
    // whose recent lines come from accesses around them; lines of 16, 32 and 64 bytes, 1 to 8 ways.
    const CacheConfig configs[] = {
        CacheConfig{},
        config({4096, 2, 32}, {2048, 4, 16}, {65536, 8, 64}),
        config({1024, 1, 64}, {1024, 1, 32}, {16384, 2, 64}),
    };
    std::mt19937_64 random(4444);
    for (const CacheConfig& c : configs) {
        CacheHierarchy caches(c);
        std::uint64_t said = 0, all_hit = 0;
        for (int i = 0; i < 200000; ++i) {
            const std::uint64_t near = 0x7ff000 + random() % 512;
            for (int k = 0; k < 4; ++k) caches.read(near + random() % 96 - 48, 8); // the stack's recent lines
            const std::size_t members = 2 + random() % 7;
            const bool pushes = random() % 4 != 0;
            std::vector<std::pair<std::int64_t, std::uint32_t>> run;
            for (std::size_t m = 0; m < members; ++m) {
                if (pushes) run.emplace_back(-8 * static_cast<std::int64_t>(members - 1 - m), 8);
                else run.emplace_back(static_cast<std::int64_t>(random() % 80) - 64, 1u + random() % 16);
            }
            const AccessSpan span = AccessSpan::of(run, c.d1.line);
            const std::uint64_t address = (near & ~std::uint64_t{7}) + (random() % 4 == 0 ? random() % 8 : 0);
            bool each = true;
            for (const auto& [offset, size] : run)
                each = each && caches.small_hits_most_recent(address + static_cast<std::uint64_t>(offset), size);
            const bool whole = caches.span_hits_most_recent(span, address);
            CAPTURE(i, address, members, pushes);
            if (whole) REQUIRE(each);
            said += whole ? 1 : 0;
            all_hit += each ? 1 : 0;
        }
        CAPTURE(said, all_hit);
        REQUIRE(said > 5000); // the check decided many runs (16,452 to ...; not all: a span may cross into a line not recent)
    }
}

TEST_CASE("the plugin's path compiled for the default D1 decides each access as the general one") {
    // on_single_access with the default geometry (plugin_cache.hpp) checks the two most recent lines of a set with
    // the geometry's constants (small_hits_first_two_as<DefaultD1>): access by access it must say what the general
    // check says on a hierarchy fed the same stream (a wrong constant would miss hits, or find false ones).
    CacheHierarchy general(CacheConfig{}), fixed(CacheConfig{});
    REQUIRE(fixed.has_d1(default_d1));
    std::mt19937_64 random(4545);
    std::uint64_t last = 0x10000000, hits = 0, second = 0;
    for (int i = 0; i < 400000; ++i) {
        const std::uint64_t address = random() % 4 != 0 ? last + random() % 200 - 100 : 0x10000000 + random() % (1u << 20);
        last = address;
        const std::uint32_t size = std::uint32_t{1} << (random() % 4);
        const Kind kind = random() % 3 == 0 ? Kind::write : Kind::read;
        const bool most_recent = general.small_hits_most_recent(address, size);
        const bool a = general.count_if_recent_early(kind, address, size);
        const bool b = fixed.count_if_recent_early_as<DefaultD1>(kind, address, size);
        CAPTURE(i, address, size);
        REQUIRE(a == b);
        if (!a) {
            general.data(kind, address, size);
            fixed.data(kind, address, size);
        }
        hits += a ? 1 : 0;
        second += a && !most_recent ? 1 : 0;
    }
    require_same(general.counts(), fixed.counts());
    CAPTURE(hits, second);
    REQUIRE(hits > 100000);
    REQUIRE(second > 500); // and the second most recent line's hits, promoted (851 here)
}

TEST_CASE("per thread: two hierarchies share nothing") {
    CacheHierarchy a(CacheConfig{}), b(CacheConfig{});
    for (std::uint64_t i = 0; i < 1000; ++i) a.read(0x10000 + 64 * i, 8);
    REQUIRE(b.read(0x10000, 8) == Level::memory);
    REQUIRE(b.counts().Dr() == 1);
    REQUIRE(a.counts().Dr() == 1000);
}
