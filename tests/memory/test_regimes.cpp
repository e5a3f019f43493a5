// SPDX-License-Identifier: MIT
// The regime detector (examples/memory/regimes.hpp) on synthetic latency curves: clean steps, noisy steps with
// spikes, gradual transitions, a TLB-like bump inside a level, drift, a single level, no level, bad input; and
// the levels found on such curves checked against synthetic sizes as a CPU reports them (latency.hpp).
#include "catch.hpp"

#include "common.hpp"
#include "latency.hpp"
#include "regimes.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

using pmc_mem::CurvePoint;
using pmc_mem::detect_regimes;
using pmc_mem::Regimes;

namespace {

/// lmbench-style sizes: 8 points per octave from 512 B to `max`.
std::vector<double> grid(double max = 256.0 * 1024 * 1024, unsigned per_octave = 8) {
    std::vector<double> out;
    for (std::uint64_t s : pmc_mem::size_grid(512, static_cast<std::uint64_t>(max), per_octave, 64))
        out.push_back(static_cast<double>(s));
    return out;
}

std::vector<CurvePoint> curve(const std::vector<double>& sizes, const std::function<double(double)>& latency) {
    std::vector<CurvePoint> out;
    for (double s : sizes) out.push_back({s, latency(s)});
    return out;
}

/// A hierarchy with sharp steps: 1 ns up to 32 KiB, 4 ns up to 512 KiB, 15 ns up to 8 MiB, then 100 ns.
double steps(double s) {
    if (s <= 32 * 1024) return 1;
    if (s <= 512 * 1024) return 4;
    if (s <= 8 * 1024 * 1024) return 15;
    return 100;
}

/// A deterministic uniform number in [-1, 1).
double noise(std::uint64_t& state) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53) * 2 - 1;
}

/// True when `found` is within one grid step (1/8 octave on the lmbench grid: at most a factor 1.125) of `want`.
bool within_step(double found, double want) { return std::abs(std::log2(found / want)) <= std::log2(1.125) + 1e-9; }

} // namespace

TEST_CASE("clean steps: four levels, boundaries at the capacities, exact latencies") {
    const Regimes r = detect_regimes(curve(grid(), steps));
    REQUIRE(r.levels.size() == 4);
    CHECK(r.levels[0].name == "L1");
    CHECK(r.levels[1].name == "L2");
    CHECK(r.levels[2].name == "L3");
    CHECK(r.levels[3].name == "memory");
    CHECK(r.levels[0].latency == Approx(1));
    CHECK(r.levels[1].latency == Approx(4));
    CHECK(r.levels[2].latency == Approx(15));
    CHECK(r.levels[3].latency == Approx(100));
    REQUIRE(r.levels[0].boundary);
    REQUIRE(r.levels[1].boundary);
    REQUIRE(r.levels[2].boundary);
    CHECK_FALSE(r.levels[3].boundary);
    // The step lies between the last size that fits and the next one.
    CHECK(r.levels[0].boundary->below == 32 * 1024);
    CHECK(r.levels[0].boundary->above == 36 * 1024);
    CHECK(within_step(r.levels[0].boundary->size, 32 * 1024));
    CHECK(within_step(r.levels[1].boundary->size, 512 * 1024));
    CHECK(within_step(r.levels[2].boundary->size, 8 * 1024 * 1024));
    CHECK(r.minor_steps.empty());
    CHECK(r.notes.empty());
}

TEST_CASE("noisy steps with spikes: the same levels") {
    std::uint64_t state = 42;
    auto points = curve(grid(), [&](double s) { return steps(s) * (1 + 0.03 * noise(state)); });
    // Single disturbed points, as an interrupt in a run makes: 3x for one size in each level.
    for (std::size_t i : {10u, 60u, 100u, 140u}) points[i].latency *= 3;
    const Regimes r = detect_regimes(points);
    REQUIRE(r.levels.size() == 4);
    CHECK(r.levels[3].name == "memory");
    CHECK(r.levels[0].latency == Approx(1).epsilon(0.03));
    CHECK(r.levels[1].latency == Approx(4).epsilon(0.03));
    CHECK(r.levels[2].latency == Approx(15).epsilon(0.03));
    CHECK(r.levels[3].latency == Approx(100).epsilon(0.03));
    CHECK(within_step(r.levels[0].boundary->size, 32 * 1024));
    CHECK(within_step(r.levels[1].boundary->size, 512 * 1024));
    CHECK(within_step(r.levels[2].boundary->size, 8 * 1024 * 1024));
    CHECK(r.minor_steps.empty());
}

TEST_CASE("gradual transitions: the boundary is halfway up the step on the log-latency axis") {
    // log(latency) follows a logistic in log2(size) centred on each capacity, 1.5 octaves wide: how a physically
    // indexed cache fills when pages land on random colours.
    auto smooth_step = [](double s, double capacity, double lo, double hi) {
        const double x = (std::log2(s) - std::log2(capacity)) / 0.25;
        const double f = 1 / (1 + std::exp(-x));
        return std::exp(std::log(lo) + f * (std::log(hi) - std::log(lo)));
    };
    auto latency = [&](double s) {
        double l = smooth_step(s, 48 * 1024, 1, 4);
        l *= smooth_step(s, 1024 * 1024, 1, 4); // 4 -> 16
        l *= smooth_step(s, 32 * 1024 * 1024, 1, 10); // 16 -> 160
        return l;
    };
    const Regimes r = detect_regimes(curve(grid(), latency));
    REQUIRE(r.levels.size() == 4);
    CHECK(within_step(r.levels[0].boundary->size, 48 * 1024));
    CHECK(within_step(r.levels[1].boundary->size, 1024 * 1024));
    CHECK(within_step(r.levels[2].boundary->size, 32 * 1024 * 1024));
    CHECK(r.levels[3].name == "memory");
    CHECK(r.levels[1].latency == Approx(4).epsilon(0.1));
    CHECK(r.levels[3].latency == Approx(160).epsilon(0.1));
}

TEST_CASE("a TLB bump inside a level is a minor step, not a level") {
    // Memory at 100 ns, then +25 % once the working set outgrows a TLB's reach at 128 MiB. (A step smaller than the
    // plateau band, 1.2, stays inside one plateau.)
    auto latency = [](double s) {
        if (s > 128.0 * 1024 * 1024) return 125.0;
        return steps(s);
    };
    const Regimes r = detect_regimes(curve(grid(1024.0 * 1024 * 1024), latency));
    REQUIRE(r.levels.size() == 4);
    CHECK(r.levels.back().name == "memory");
    REQUIRE(r.minor_steps.size() == 1);
    CHECK(r.minor_steps[0].ratio() == Approx(1.25));
    CHECK(within_step(r.minor_steps[0].size, 128.0 * 1024 * 1024));
    CHECK(r.minor_steps[0].below == 128.0 * 1024 * 1024);
}

TEST_CASE("a level that drifts upward at the end of the sweep is still memory") {
    auto latency = [](double s) {
        const double base = steps(s);
        return s > 64.0 * 1024 * 1024 ? base * (1 + 0.3 * std::log2(s / (64.0 * 1024 * 1024)) / 2) : base;
    };
    const Regimes r = detect_regimes(curve(grid(), latency));
    REQUIRE(r.levels.size() == 4);
    CHECK(r.levels.back().name == "memory");
    CHECK(r.levels.back().last_size == 256.0 * 1024 * 1024);
    CHECK(r.notes.empty());
}

TEST_CASE("a sweep that ends in a transition names no memory") {
    auto points = curve(grid(16.0 * 1024 * 1024), steps);
    // The last octave rises steeply: a cache overflowing where the sweep stops.
    for (auto& p : points)
        if (p.size > 8.0 * 1024 * 1024) p.latency = 15 * std::pow(2.0, 4 * std::log2(p.size / (8.0 * 1024 * 1024)));
    const Regimes r = detect_regimes(points);
    REQUIRE(r.levels.size() == 3);
    CHECK(r.levels.back().name == "L3");
    REQUIRE_FALSE(r.notes.empty());
    CHECK_THAT(r.notes.back(), ContainsSubstring("before memory"));
}

TEST_CASE("a single level") {
    const Regimes r = detect_regimes(curve(grid(16 * 1024), [](double) { return 1.07; }));
    REQUIRE(r.levels.size() == 1);
    CHECK(r.levels[0].name == "L1");
    CHECK(r.levels[0].latency == Approx(1.07));
    CHECK_FALSE(r.levels[0].boundary);
    REQUIRE(r.notes.size() == 1);
    CHECK_THAT(r.notes[0], ContainsSubstring("a single level: no step of 1.5x or more"));
}

TEST_CASE("no level: a curve that never settles") {
    // Latency doubling every octave: no run of points stays within the plateau band.
    const Regimes r = detect_regimes(curve(grid(), [](double s) { return s / 512; }));
    CHECK(r.levels.empty());
    REQUIRE(r.notes.size() == 1);
    CHECK_THAT(r.notes[0], ContainsSubstring("no plateau"));
}

TEST_CASE("too few or invalid points") {
    CHECK(detect_regimes({}).levels.empty());
    CHECK(detect_regimes({{512, 1}, {1024, 1}}).levels.empty());
    CHECK_THAT(detect_regimes({{512, 1}}).notes.at(0), ContainsSubstring("too few points"));
    // Unsorted, with NaN, zero and negative entries: those are dropped, the rest sorted.
    std::vector<CurvePoint> points = curve(grid(), steps);
    std::reverse(points.begin(), points.end());
    points.push_back({std::nan(""), 5});
    points.push_back({4096, -1});
    points.push_back({0, 3});
    points.push_back({8192, std::nan("")});
    const Regimes r = detect_regimes(points);
    REQUIRE(r.levels.size() == 4);
    CHECK(within_step(r.levels[1].boundary->size, 512 * 1024));
}

TEST_CASE("options: a wider plateau band merges what a narrow one splits") {
    auto latency = [](double s) { return s > 8 * 1024 ? 1.3 : 1.0; };
    pmc_mem::RegimeOptions narrow;
    const Regimes split = detect_regimes(curve(grid(1024 * 1024), latency), narrow);
    REQUIRE(split.levels.size() == 1); // 1.3x is below level_ratio: one level with a minor step
    REQUIRE(split.minor_steps.size() == 1);
    CHECK(split.minor_steps[0].ratio() == Approx(1.3));
    pmc_mem::RegimeOptions loose;
    loose.plateau_band = 1.4;
    const Regimes merged = detect_regimes(curve(grid(1024 * 1024), latency), loose);
    REQUIRE(merged.levels.size() == 1);
    CHECK(merged.minor_steps.empty());
    pmc_mem::RegimeOptions strict;
    strict.level_ratio = 1.2;
    const Regimes two = detect_regimes(curve(grid(1024 * 1024), latency), strict);
    REQUIRE(two.levels.size() == 2);
    CHECK(two.levels[1].name == "memory");
}

TEST_CASE("a narrow level's latency is its plateau's median, not one raw point") {
    // L2 from 32 KiB to 144 KiB: between twice its lower boundary (~68 KiB) and half its upper one (~76 KiB) lies
    // one measured size, 72 KiB, and that run was disturbed (5 ns instead of 3; smoothing keeps the plateau whole).
    auto latency = [](double s) {
        if (s <= 32 * 1024) return 1.0;
        if (s <= 144 * 1024) return s == 72 * 1024 ? 5.0 : 3.0;
        if (s <= 8 * 1024 * 1024) return 15.0;
        return 100.0;
    };
    const auto points = curve(grid(), latency);
    const Regimes r = detect_regimes(points);
    REQUIRE(r.levels.size() == 4);
    CHECK(r.levels[1].name == "L2");
    CHECK(r.levels[1].latency == Approx(3));
    CHECK(within_step(r.levels[1].boundary->size, 144 * 1024));
    // With a single point allowed, that point would be the level's latency.
    pmc_mem::RegimeOptions one;
    one.min_core_points = 1;
    CHECK(detect_regimes(points, one).levels.at(1).latency == Approx(5));
}

// ---------------------------------------------------------------------------------------------------------------
// The levels found against what the CPU reports (check_against_reported): synthetic curves, synthetic caches.

namespace {

constexpr double KiB = 1024, MiB = 1024 * 1024;

/// A machine that reports these caches (name, bytes), as sysfs would.
pmc_mem::MachineFacts reporting(std::vector<std::pair<std::string, double>> caches, std::string hypervisor = "") {
    pmc_mem::MachineFacts m;
    for (const auto& [name, bytes] : caches)
        m.caches.push_back({name, static_cast<std::uint64_t>(bytes), 0, 0, "sysfs"});
    m.hypervisor = std::move(hypervisor);
    m.online_cpus = 2;
    return m;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const pmc_mem::Level* named(const Regimes& r, const std::string& name) {
    for (const auto& l : r.levels)
        if (l.name == name) return &l;
    return nullptr;
}

} // namespace

TEST_CASE("levels that agree with the reported caches draw no warning") {
    Regimes r = detect_regimes(curve(grid(), steps)); // L1 32K, L2 512K, L3 8M, memory
    pmc_mem::check_against_reported(r, reporting({{"L1d", 32 * KiB}, {"L2", 512 * KiB}, {"L3", 8 * MiB}}));
    CHECK(r.warnings.empty());
    REQUIRE(r.levels.size() == 4);
    CHECK(r.levels.back().name == "memory");
    for (const auto& l : r.levels) CHECK(l.check.empty());
    // Within 2x either way still agrees: an L2 reported at half or twice the found 512 KiB.
    for (double l2 : {300 * KiB, 1 * MiB}) {
        Regimes again = detect_regimes(curve(grid(), steps));
        pmc_mem::check_against_reported(again, reporting({{"L2", l2}, {"L3", 8 * MiB}}));
        CHECK(again.warnings.empty());
    }
}

TEST_CASE("a level found more than 2x from the reported size says so beside it and in a warning") {
    // The busy VM's report: its L2 found at about 2.5 MiB where the CPU reports 1 MiB.
    auto busy = [](double s) {
        if (s <= 32 * KiB) return 1.0;
        if (s <= 2.5 * MiB) return 4.0;
        if (s <= 16 * MiB) return 15.0;
        return 100.0;
    };
    Regimes r = detect_regimes(curve(grid(), busy));
    REQUIRE(r.levels.size() == 4);
    REQUIRE(r.levels[1].boundary);
    pmc_mem::check_against_reported(r, reporting({{"L1d", 32 * KiB}, {"L2", 1 * MiB}, {"L3", 12 * MiB}}));
    CHECK(r.levels[0].check.empty());
    CHECK(r.levels[1].check == "found " + pmc_mem::num(r.levels[1].boundary->size / MiB, 3) + "x larger");
    CHECK(r.levels[2].check.empty()); // L3 found at 16 MiB against 12 MiB: within 2x
    CHECK(r.levels[3].name == "memory");
    REQUIRE(r.warnings.size() == 1);
    CHECK(starts_with(r.warnings[0], "L2 found at 2."));
    CHECK_THAT(r.warnings[0], ContainsSubstring("where the CPU reports 1 MiB (sysfs)"));
    CHECK_THAT(r.warnings[0], ContainsSubstring("larger, more than 2x off"));
    CHECK(ends_with(r.warnings[0], "rerun on an idle machine, without --quick"));
    // Smaller than reported by more than 2x is as wrong: an L2 found at 256 KiB against a reported 1 MiB.
    Regimes small = detect_regimes(curve(grid(), [](double s) { return s <= 256 * KiB ? steps(s) : steps(s * 2); }));
    pmc_mem::check_against_reported(small, reporting({{"L2", 1 * MiB}}));
    REQUIRE(small.levels.size() >= 2);
    CHECK_THAT(small.levels[1].check, ContainsSubstring("x smaller"));
    CHECK(small.warnings.size() == 1);
}

TEST_CASE("a plateau inside the reported last-level cache is never called memory") {
    // pmc-memory --quick stops at 8 MiB: its last plateau (136 ns here) lies inside a reported 32 MiB L3.
    auto quick = [](double s) { return s <= 32 * KiB ? 1.0 : s <= 512 * KiB ? 4.0 : 136.0; };
    Regimes r = detect_regimes(curve(grid(8 * MiB), quick));
    REQUIRE(r.levels.size() == 3);
    REQUIRE(r.levels.back().name == "memory"); // the curve alone calls it memory
    pmc_mem::check_against_reported(r, reporting({{"L1d", 32 * KiB}, {"L2", 512 * KiB}, {"L3", 32 * MiB}}));
    CHECK(pmc_mem::memory_level(r) == nullptr);
    CHECK(r.levels.back().name == "L3"); // the reported cache it lies in
    CHECK(r.levels.back().check == "inside the reported L3: not memory");
    REQUIRE(r.warnings.size() == 1);
    CHECK_THAT(r.warnings[0], ContainsSubstring("lies inside the L3 32 MiB (sysfs) the CPU reports, so it is not "
                                                "memory: it is shown as L3"));
    CHECK_THAT(r.warnings[0], ContainsSubstring("rerun on an idle machine, without --quick"));

    // Where no cache is reported beyond the L2, the same plateau stays memory.
    Regimes unreported = detect_regimes(curve(grid(8 * MiB), quick));
    pmc_mem::check_against_reported(unreported, reporting({{"L1d", 32 * KiB}, {"L2", 512 * KiB}}));
    CHECK(unreported.levels.back().name == "memory");
    CHECK(unreported.warnings.empty());
    // Nothing reported at all: nothing to check against.
    Regimes nothing = detect_regimes(curve(grid(8 * MiB), quick));
    pmc_mem::check_against_reported(nothing, reporting({}));
    CHECK(nothing.levels.back().name == "memory");
    CHECK(nothing.warnings.empty());
}

TEST_CASE("a plateau inside the reported LLC past a found level of that name is beyond the detected levels") {
    // A full sweep finds L1, L2, L3 (to 8 MiB) and a memory plateau from 16 MiB, but the hypervisor reports an L3
    // of 508 MiB (the host's): the plateau is not called memory, nor L3 (a found level has that name).
    Regimes r = detect_regimes(curve(grid(), steps));
    pmc_mem::check_against_reported(r, reporting({{"L1d", 32 * KiB}, {"L2", 512 * KiB}, {"L3", 508 * MiB}}, "KVMKVMKVM"));
    REQUIRE(r.levels.size() == 4);
    CHECK(pmc_mem::memory_level(r) == nullptr);
    CHECK(r.levels[3].name == pmc_mem::beyond_level_name);
    CHECK(named(r, "L3") == &r.levels[2]);
    CHECK_THAT(r.levels[2].check, ContainsSubstring("x smaller"));
    REQUIRE(r.warnings.size() == 2);
    CHECK_THAT(r.warnings[0], ContainsSubstring("beyond the detected levels"));
    CHECK_THAT(r.warnings[0], ContainsSubstring("the host's"));
    CHECK(starts_with(r.warnings[1], "L3 found at "));
    CHECK_THAT(r.warnings[1], ContainsSubstring("the host's"));
    // A memory plateau that starts past the reported LLC stays memory.
    Regimes full = detect_regimes(curve(grid(), steps));
    pmc_mem::check_against_reported(full, reporting({{"L3", 8 * MiB}}));
    CHECK(full.levels.back().name == "memory");
}
