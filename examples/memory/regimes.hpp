// SPDX-License-Identifier: MIT
// regimes.hpp: finds the levels of a memory hierarchy (L1, L2, ..., memory) from a load-latency curve alone.
// A pure function over (working-set size, latency) points: no cpuid, no sysfs, no clock. Unit-tested on
// synthetic curves in tests/memory; docs/memory.md explains it with this machine's curve.
//
// How it works (all comparisons in ratios, so the same rules hold at 1 ns and at 200 ns):
//  1. Smooth: each latency becomes the median of itself and its two neighbours, so one disturbed point cannot
//     end a plateau or fake a step. A median of three keeps a real step exactly where it is. An end point becomes
//     the median of itself, its neighbour and its neighbour's smoothed value (a spike at the end is no level).
//  2. Plateaus: scanning from small to large sizes, a plateau is a maximal run of consecutive points whose
//     latencies stay within a factor `plateau_band` (1.2: about +-10 %) of each other, with at least
//     `min_plateau_points` points spanning at least `min_plateau_octaves`. Points that belong to no plateau are
//     transitions (a cache filling up: where a physically indexed cache meets randomly placed pages, that takes
//     more than an octave).
//  3. Levels: neighbouring plateaus whose latencies differ by less than `level_ratio` (1.5, the threshold of
//     lmbench3's cache.c) are one level; the smaller steps inside a level of at least `minor_step_ratio` (1.1)
//     are reported as minor steps -- where a TLB's reach shows, or a latency that drifts with size.
//  4. Boundaries: between two levels the boundary is where the curve is halfway up the step on a logarithmic
//     latency axis -- where it crosses the geometric mean of the two levels' latencies, searched between the last
//     plateau of the lower level and the first of the upper. That is where a step drawn in log-log coordinates is
//     steepest, the point lmbench3's cache.c looks for as the largest latency ratio between neighbouring sizes.
//     For a cache that holds the whole working set until it overflows (a virtually indexed L1) it is the step
//     itself; where a physically indexed cache fills gradually because pages land on random colours, it is where
//     roughly a third of the loads miss (measured on a Zen 5 L2: at exactly its capacity 35-40 % of the loads
//     missed; the arithmetic mean, "half of the loads miss", lands 6-15 % above the capacity). The crossing is
//     interpolated in log(latency) against log2(size) between the two measured sizes around it, which are
//     reported too: the honest resolution is one measurement step. A level's latency is the median of its plateau
//     points well inside it: at least twice its lower boundary and at most half its upper one (the last level: at
//     least four times its lower boundary, STREAM's rule), so that neither a minor step inside a level nor where
//     a drifting level's transitions happened to end moves it; a level with fewer than `min_core_points` (3) such
//     points keeps the median of all its plateau points, so that no single raw point sets it. The boundaries are
//     found once from the plateaus' medians, then again from these latencies.
//  5. Names: L1, L2, ... in order; the last level is "memory" when there are at least two and it lasts to the
//     largest size measured (points after its last plateau that stay within level_ratio of it only drift, and
//     belong to it). If the sweep stops before the last cache overflows, that level is in fact the last cache:
//     sweep further. The curve cannot tell; check_against_reported (latency.hpp) renames a "memory" that lies
//     inside the last-level cache the CPU reports, and warns where a level is more than 2x off its reported size.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace pmc_mem {

/// One measured point: working-set size in bytes and latency (ns per load, or any positive cost).
struct CurvePoint {
    double size = 0;
    double latency = 0;
};

struct RegimeOptions {
    double plateau_band = 1.2;        ///< max/min latency within one plateau
    std::size_t min_plateau_points = 3;
    double min_plateau_octaves = 0.75; ///< a plateau spans at least this much of log2(size)
    double level_ratio = 1.5;         ///< plateaus closer than this are the same level
    double minor_step_ratio = 1.1;    ///< steps inside a level at least this big are reported
    bool smooth = true;               ///< median of three before looking for plateaus
    std::size_t min_core_points = 3;  ///< a level's latency from the points well inside it needs this many
};

/// Where the latency crosses from one regime to the next.
struct Transition {
    double size = 0;           ///< interpolated size of the crossing (bytes)
    double below = 0;          ///< largest measured size below the crossing
    double above = 0;          ///< smallest measured size above it
    double latency_from = 0;   ///< latency of the regime below
    double latency_to = 0;     ///< latency of the regime above
    double ratio() const { return latency_to / latency_from; }
};

struct Level {
    std::string name;          ///< "L1", "L2", ..., "memory"
    double first_size = 0;     ///< first and last measured size on the level's plateaus
    double last_size = 0;
    double latency = 0;        ///< median latency of its plateau points well inside the level (see step 4)
    double latency_low = 0;    ///< lowest and highest latency on its plateaus (smoothed)
    double latency_high = 0;
    std::size_t points = 0;
    std::optional<Transition> boundary; ///< to the next level; none for the last one
    /// Beside the level in the tables: how it disagrees with what the CPU reports ("" where it agrees or where
    /// nothing is reported). The detector leaves it empty; check_against_reported (latency.hpp) fills it.
    std::string check;
};

struct Regimes {
    std::vector<Level> levels;
    std::vector<Transition> minor_steps; ///< steps inside a level (ratio between minor_step_ratio and level_ratio)
    std::vector<std::string> notes;      ///< what the detector could not decide, for people
    /// Reasons to distrust the levels (they disagree with the CPU's report, the machine was busy), each a sentence
    /// that says what to do. The detector leaves it empty: it knows only the curve (see latency.hpp).
    std::vector<std::string> warnings;
};

namespace detail {

struct Run {
    std::size_t first = 0;
    std::size_t last = 0;
    double latency = 0; // median of the raw latencies of the run's points
};

inline double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double median3(double a, double b, double c) { return std::max(std::min(a, b), std::min(std::max(a, b), c)); }

/// Where the (smoothed) curve crosses the geometric mean of two latencies between points `from` < `to`: the
/// first crossing in the direction of the change, or else the biggest single change.
inline Transition crossing(const std::vector<CurvePoint>& p, const std::vector<double>& smooth, std::size_t from,
                           std::size_t to, double latency_from, double latency_to) {
    Transition t;
    t.latency_from = latency_from;
    t.latency_to = latency_to;
    const double threshold = std::sqrt(latency_from * latency_to);
    const bool rising = latency_to >= latency_from;
    auto crosses = [&](std::size_t k) {
        return rising ? smooth[k] < threshold && smooth[k + 1] >= threshold
                      : smooth[k] > threshold && smooth[k + 1] <= threshold;
    };
    std::size_t k = from;
    while (k + 1 < to && !crosses(k)) ++k;
    if (!crosses(k)) {
        k = from;
        for (std::size_t i = from; i < to; ++i)
            if (std::abs(smooth[i + 1] - smooth[i]) > std::abs(smooth[k + 1] - smooth[k])) k = i;
    }
    const double v0 = std::log(smooth[k]), v1 = std::log(smooth[k + 1]);
    const double x0 = std::log2(p[k].size), x1 = std::log2(p[k + 1].size);
    double f = v1 != v0 ? (std::log(threshold) - v0) / (v1 - v0) : 0.5;
    f = std::clamp(f, 0.0, 1.0);
    t.size = std::exp2(x0 + f * (x1 - x0));
    t.below = p[k].size;
    t.above = p[k + 1].size;
    return t;
}

} // namespace detail

/// Finds the levels of the hierarchy in a latency curve. Points may come in any order; non-positive or
/// non-finite ones are ignored.
inline Regimes detect_regimes(std::vector<CurvePoint> points, const RegimeOptions& options = {}) {
    Regimes out;
    points.erase(std::remove_if(points.begin(), points.end(),
                                [](const CurvePoint& p) {
                                    return !(std::isfinite(p.size) && std::isfinite(p.latency) && p.size > 0 &&
                                             p.latency > 0);
                                }),
                 points.end());
    std::sort(points.begin(), points.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.size < b.size; });
    const std::size_t n = points.size();
    if (n < std::max<std::size_t>(options.min_plateau_points, 2)) {
        out.notes.push_back("too few points (" + std::to_string(n) + ") to find a plateau");
        return out;
    }

    // 1. Smoothing: median of three (at the two ends, of the last three points).
    std::vector<double> smooth(n);
    for (std::size_t i = 0; i < n; ++i) smooth[i] = points[i].latency;
    if (options.smooth && n >= 3) {
        for (std::size_t i = 1; i + 1 < n; ++i)
            smooth[i] = detail::median3(points[i - 1].latency, points[i].latency, points[i + 1].latency);
        smooth[0] = detail::median3(points[0].latency, points[1].latency, smooth[1]);
        smooth[n - 1] = detail::median3(points[n - 1].latency, points[n - 2].latency, smooth[n - 2]);
    }

    // 2. Plateaus: maximal runs within the band, long enough; otherwise the first point is a transition point.
    std::vector<detail::Run> plateaus;
    for (std::size_t i = 0; i < n;) {
        double lo = smooth[i], hi = smooth[i];
        std::size_t j = i;
        while (j + 1 < n) {
            const double nlo = std::min(lo, smooth[j + 1]), nhi = std::max(hi, smooth[j + 1]);
            if (nhi > nlo * options.plateau_band) break;
            lo = nlo;
            hi = nhi;
            ++j;
        }
        const double octaves = std::log2(points[j].size / points[i].size);
        if (j + 1 - i >= options.min_plateau_points && octaves + 1e-9 >= options.min_plateau_octaves) {
            std::vector<double> v;
            for (std::size_t k = i; k <= j; ++k) v.push_back(points[k].latency);
            plateaus.push_back({i, j, detail::median_of(v)});
            i = j + 1;
        } else {
            ++i;
        }
    }
    if (plateaus.empty()) {
        out.notes.push_back("no plateau: no run of " + std::to_string(options.min_plateau_points) +
                            " points spanning " + std::to_string(options.min_plateau_octaves) +
                            " octaves stays within a factor " + std::to_string(options.plateau_band));
        return out;
    }

    // 3. Levels: group plateaus closer than level_ratio; record the steps inside a group.
    std::vector<std::vector<detail::Run>> groups{{plateaus.front()}};
    for (std::size_t k = 1; k < plateaus.size(); ++k) {
        const detail::Run& prev = groups.back().back();
        const detail::Run& cur = plateaus[k];
        const double ratio = cur.latency / prev.latency;
        if (ratio < options.level_ratio && ratio > 1 / options.level_ratio) {
            if (ratio >= options.minor_step_ratio || ratio <= 1 / options.minor_step_ratio)
                out.minor_steps.push_back(detail::crossing(points, smooth, prev.last, cur.first, prev.latency,
                                                           cur.latency));
            groups.back().push_back(cur);
        } else {
            groups.push_back({cur});
        }
    }

    for (std::size_t g = 0; g < groups.size(); ++g) {
        Level level;
        std::vector<double> raw;
        level.latency_low = smooth[groups[g].front().first];
        level.latency_high = level.latency_low;
        for (const detail::Run& r : groups[g])
            for (std::size_t k = r.first; k <= r.last; ++k) {
                raw.push_back(points[k].latency);
                level.latency_low = std::min(level.latency_low, smooth[k]);
                level.latency_high = std::max(level.latency_high, smooth[k]);
            }
        level.first_size = points[groups[g].front().first].size;
        level.last_size = points[groups[g].back().last].size;
        level.latency = detail::median_of(raw);
        level.points = raw.size();
        out.levels.push_back(level);
    }

    // The last level reaches the end of the sweep if no point after its last plateau leaves it by level_ratio or
    // more: those points only drift (and belong to it).
    const detail::Run& last_run = groups.back().back();
    bool open_ended = true;
    for (std::size_t k = last_run.last + 1; k < n; ++k)
        if (smooth[k] >= last_run.latency * options.level_ratio || smooth[k] <= last_run.latency / options.level_ratio)
            open_ended = false;
    if (open_ended && last_run.last + 1 < n) {
        Level& l = out.levels.back();
        std::vector<double> raw;
        for (const detail::Run& r : groups.back())
            for (std::size_t k = r.first; k <= r.last; ++k) raw.push_back(points[k].latency);
        for (std::size_t k = last_run.last + 1; k < n; ++k) {
            raw.push_back(points[k].latency);
            l.latency_low = std::min(l.latency_low, smooth[k]);
            l.latency_high = std::max(l.latency_high, smooth[k]);
        }
        l.last_size = points[n - 1].size;
        l.latency = detail::median_of(raw);
        l.points = raw.size();
    }

    // 4. Boundaries: halfway (geometrically) between the two levels' latencies, searched between the last plateau
    // of the lower level and the first of the upper. Then each level's latency is taken again from its plateau
    // points well inside it (at least twice its lower boundary, at most half its upper one; for the last level at
    // least four times its lower boundary, STREAM's rule), so that where a level's latency drifts with size its
    // value does not depend on where the neighbouring transitions happened to end; and the boundaries once more.
    auto boundaries = [&] {
        for (std::size_t g = 0; g + 1 < groups.size(); ++g)
            out.levels[g].boundary = detail::crossing(points, smooth, groups[g].back().last,
                                                      groups[g + 1].front().first, out.levels[g].latency,
                                                      out.levels[g + 1].latency);
    };
    boundaries();
    for (std::size_t g = 0; g < groups.size(); ++g) {
        const double lower = g == 0 ? 0 : out.levels[g - 1].boundary->size;
        const double upper = out.levels[g].boundary ? out.levels[g].boundary->size : 1e300;
        const double lo = g + 1 == groups.size() ? 4 * lower : 2 * lower, hi = upper / 2;
        std::vector<double> core;
        for (const detail::Run& r : groups[g])
            for (std::size_t k = r.first; k <= r.last; ++k)
                if (points[k].size >= lo && points[k].size <= hi) core.push_back(points[k].latency);
        if (g + 1 == groups.size() && open_ended)
            for (std::size_t k = last_run.last + 1; k < n; ++k)
                if (points[k].size >= lo) core.push_back(points[k].latency);
        // Too few points well inside (a narrow level): one raw point could set the level's latency; the median
        // over its whole plateau stays.
        if (core.size() >= options.min_core_points) out.levels[g].latency = detail::median_of(core);
    }
    boundaries();

    // 5. Names.
    for (std::size_t g = 0; g < out.levels.size(); ++g)
        out.levels[g].name = "L" + std::to_string(g + 1);
    if (out.levels.size() >= 2 && open_ended)
        out.levels.back().name = "memory";
    if (out.levels.size() == 1) {
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%g", options.level_ratio); // 1.5, not 1.500000
        out.notes.push_back(std::string("a single level: no step of ") + ratio + "x or more in the measured range");
    }
    if (!open_ended)
        out.notes.push_back("the latency still changes after the last plateau: the sweep may end before memory");
    return out;
}

} // namespace pmc_mem
