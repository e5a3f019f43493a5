// SPDX-License-Identifier: MIT
// latency.hpp: the load-latency experiment (lmbench's lat_mem_rd definition: back-to-back dependent loads).
//
// A circular chain of pointers, one per `stride` bytes of a working set, is followed with `p = *p`, 100 loads
// per loop iteration; ns per load = elapsed / loads. Working sets sweep from 512 B to 256 MiB at `per_octave`
// points per octave. Chains: `random` (Sattolo's algorithm: one random cycle through every element, so the
// prefetchers cannot guess the next address -- the default, since it measures latency), `forward` (lmbench3:
// element i points to i+1, which prefetchers follow) and `backward` (lmbench2). See docs/memory.md.
#pragma once

#include "common.hpp"
#include "regimes.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pmc_mem {

enum class Chain { random, forward, backward };
const char* chain_name(Chain c);
/// "random", "forward" (alias "lmbench"), "backward" (alias "lmbench2"). Throws UsageError.
Chain parse_chain(const std::string& text);

struct LatencyOptions {
    std::uint64_t min_size = 512;
    std::uint64_t max_size = 256ull << 20;
    unsigned per_octave = 8;
    std::uint64_t stride = 64;
    unsigned reps = 45;         ///< timed runs per size (over all sweeps)
    double rep_ms = 0.25;       ///< each timed run lasts about this long: short, so that most runs fall between
                                ///< the periodic interruptions a VM suffers (3-5 % of a run longer than ~1 ms here)
    std::uint64_t min_loads = 2000; ///< at least this many loads per run (a sample of the chain)
    double warm_ms = 5;         ///< before the runs, one traversal of the chain, or this long if that is longer
    unsigned sweeps = 9;        ///< the runs of each size are spread over this many sweeps over all sizes, each
                                ///< with the chain in another part of the buffer (other physical pages)
    std::vector<Chain> chains{Chain::random};
    std::vector<unsigned> chain_per_octave; ///< per chain; empty or 0: per_octave
    std::uint64_t seed = 1;
    bool hugepages = false;     ///< MADV_HUGEPAGE on the buffer (default MADV_NOHUGEPAGE: base pages)
};

struct LatencyPoint {
    std::uint64_t size = 0;
    std::uint64_t loads_per_rep = 0;
    std::vector<double> ns;        ///< ns per load, one per timed run
    std::vector<double> sweep_min; ///< the fastest run of each sweep
    std::vector<double> cycles;    ///< cycles per load, one per run (empty without a cycle counter)
    /// The point's latency: the median over the sweeps of each sweep's fastest run. Within a sweep the fastest
    /// run is the one least disturbed (interference only adds time); across sweeps, which place the chain on
    /// different physical pages, the median averages how the pages happen to fall into the cache sets.
    double latency_ns() const { return median_of(sweep_min); }
    double min_ns() const { return min_of(ns); }
    double median_ns() const { return median_of(ns); }
};

struct LatencyCurve {
    Chain chain = Chain::random;
    std::vector<LatencyPoint> points;
};

/// How much the sweeps' fastest runs of each size disagree (LatencyPoint::sweep_min): on an idle machine the
/// sweeps of a size agree within a few percent on a plateau (they differ at most where a physically indexed cache
/// fills, by where its pages land); interference from other work makes them disagree everywhere.
struct SweepSpread {
    std::size_t sizes = 0;       ///< sizes measured in two sweeps or more
    std::size_t disagreeing = 0; ///< of those, where the slowest sweep took sweep_disagreement_ratio x the fastest
    double worst_ratio = 1;      ///< the largest slowest/fastest sweep ratio, and where
    double worst_size = 0;
};

struct LatencyResult {
    LatencyOptions options;
    std::vector<LatencyCurve> curves;
    Regimes regimes;               ///< found on the random curve (else the first), from latency_ns()
    Chain regimes_chain = Chain::random;
    double loop_ns_per_load = 0;   ///< an empty loop of the same trip count, per load: the loop overhead's bound
    double l1_ns_per_load = 0;     ///< the chain on one line (always an L1 hit), for comparison
    std::string pin_note;
    std::string pages_note;
    std::string wall_note;
    std::string cycles_note;
    double seconds = 0;
    /// A load from memory measured on its own beside a short sweep (compare_with_memory), for the figure; 0: none.
    double memory_apart_ns = 0;
    std::string memory_apart_source;
    /// The 1-minute load average just before and just after the sweep (-1: /proc/loadavg unreadable).
    double load_before = -1;
    double load_after = -1;
    SweepSpread spread; ///< of the curve the regimes come from (check_latency fills it)
};

/// The sizes each chain measures (options.chains, in order). Throws UsageError for --min 0, --max below --min,
/// or a range with no size of the grid in it (the message names the range and what to change).
std::vector<std::vector<std::uint64_t>> latency_grids(const LatencyOptions& options);

/// Runs the sweep. The calling thread should be pinned already (pin_note is copied into the result). Throws
/// UsageError as latency_grids() does. The result's options.sweeps is the number of sweeps made (at most one per
/// run).
LatencyResult run_latency(const LatencyOptions& options, Clock& clock, Progress& progress,
                          const std::string& pin_note);

// The pure parts, unit-tested.

/// Sattolo's algorithm: a permutation of 0..n-1 that is a single cycle (next[i] follows i), from `seed`.
std::vector<std::uint32_t> random_cycle(std::size_t n, std::uint64_t seed);
/// Writes the chain into `base`: n elements `stride` bytes apart, each holding the address of its successor.
/// Returns the first element. Not timed.
void* build_chain(char* base, std::size_t n, std::size_t stride, Chain chain, std::uint64_t seed);
/// Follows the chain for `blocks` * 100 loads and returns where it stopped.
void* chase(void* start, std::size_t blocks);

/// The curves as CSV (one row per chain and size).
std::string latency_csv(const LatencyResult& r);
void write_latency_json(pmc::JsonWriter& json, const LatencyResult& r, const MachineFacts& m);
/// The found levels beside what the CPU reports, as a plain-text table.
std::string regimes_text(const Regimes& regimes, const MachineFacts& m);
/// The same as a markdown table.
std::string regimes_markdown(const Regimes& regimes, const MachineFacts& m);
/// The reported cache that corresponds to a found level ("L1" -> "L1d"), or nullptr.
const ReportedCache* reported_for(const Level& level, const MachineFacts& m);
/// The level called "memory", or nullptr when none was found.
const Level* memory_level(const Regimes& regimes);
/// A sweep shorter than this may end in the last cache, whatever the detector calls its last level.
constexpr std::uint64_t memory_sweep_bytes = 64ull << 20;
/// The level called "memory" when it is main memory: it lasts to a size of at least memory_sweep_bytes (past
/// the last cache of today's CPUs); otherwise nullptr (a short sweep's last level may be a cache that did not
/// overflow: measure the memory latency on its own, as measure_memory_latency does).
const Level* main_memory_level(const Regimes& regimes);

/// A short sweep's last level is memory only if a load from memory, measured on its own, is not much slower: more
/// than this many times faster, it is a cache that did not overflow. On our VMs a cache level sits 6x or more
/// below memory (L3 14-17 ns, memory 100-180 ns), while memory itself cost 2.5-3.1x more at 256 MiB than at
/// 4-8 MiB, as TLB misses add page walks (nested ones in a VM): 5 lies between.
constexpr double cache_below_memory_ratio = 5;
/// Names a short sweep's last level from `memory_ns` (a load from memory measured on its own, as
/// measure_memory_latency does; `source` says how): "L<n>" when it is a cache by the ratio above, else it stays
/// "memory"; the regimes' note says which and why, and `r` keeps the figure for the plot. A sweep that went past
/// memory_sweep_bytes, or whose last level is not called memory, keeps its names.
void compare_with_memory(LatencyResult& r, double memory_ns, const std::string& source);

// ---------------------------------------------------------------------------------------------------------------
// Knowing when the levels are wrong: the found levels against what the CPU reports, and a busy machine.

/// A found boundary more than this factor away from the size the CPU reports (either way) puts the level in doubt.
constexpr double reported_disagreement_ratio = 2;
/// The name of a level past the last one the curve found that cannot be called memory: it lies inside a reported
/// cache whose name a found level already has (see check_against_reported).
constexpr const char* beyond_level_name = "beyond";

/// Checks the found levels against the caches the CPU reports (m.caches: sysfs, else cpuid), in place:
///  - a level called "memory" whose plateau starts inside the reported last-level cache is not memory: it takes the
///    name of the smallest reported cache that holds that size ("L3"), or beyond_level_name ("beyond the detected
///    levels") when a found level has that name already; its `check` and a warning say why;
///  - a cache level whose boundary is more than reported_disagreement_ratio from the reported size of the same
///    name: its `check` says by how much, and a warning says what disagreed, by how much and what to do.
/// Under a hypervisor (m.hypervisor) the warnings add that a reported last-level cache can be the host's. Pure:
/// the reported caches come from `m`.
void check_against_reported(Regimes& regimes, const MachineFacts& m);

/// Sweeps of one size this far apart disagree as much as two levels do (RegimeOptions::level_ratio).
constexpr double sweep_disagreement_ratio = 1.5;
SweepSpread sweep_spread(const LatencyCurve& curve);

/// "" on a quiet machine; otherwise a warning saying that the machine was busy and how it shows -- the load average
/// (before or after the sweep; negative: unknown) above `cpus`, or the sweeps disagreeing at more than a quarter of
/// the sizes -- and what to do.
std::string busy_warning(double load_before, double load_after, int cpus, const SweepSpread& spread);

/// Both checks on a finished run (after compare_with_memory, when a load from memory was measured apart):
/// check_against_reported on r.regimes, and busy_warning from r's load averages and its regimes' curve.
void check_latency(LatencyResult& r, const MachineFacts& m);

// ---------------------------------------------------------------------------------------------------------------
// Under pmc emulate --cache: the levels of pmc's cache model, found from its modelled misses. There, time means
// nothing (every load costs what the emulator takes), but the program can read the model's own counts: the sweep
// walks each size's chain once to warm it and once more between two readings of a pmc::Group of modelled events,
// and the "latency" of a size is a cost per load built from its miss rates. The same detector then finds the levels,
// which must fall on the model's configured sizes -- an oracle for the detector and the model together.

/// One data-side level of the model the program runs under: "D1", "L2", "LL", and its size in bytes.
struct ModelledCache {
    std::string name;
    std::uint64_t bytes = 0;
    std::uint64_t line = 0; ///< its line size in bytes
};
/// The model's D1, L2 (if any) and LL, from pmc::emulated_pmu(); empty when not under pmc emulate --cache.
std::vector<ModelledCache> modelled_caches();
/// Under pmc emulate without --cache: why `program` cannot measure anything there, and the fix; "" elsewhere (natively,
/// or with the model).
std::string emulator_without_model(const std::string& program);
/// Under pmc emulate (with --cache or not): the line `program` prints instead of figures, as pmc-memory's "not
/// measured" notes, for an experiment the emulator cannot measure (`why`: what its figures would be); "" natively.
std::string not_measured_under_emulator(const std::string& program, const std::string& why);
/// The model's geometry as pmc emulate gave it ("I1 32768,8,64, D1 ..."), "" when not under the model.
std::string modelled_geometry();

/// What a load costs in the model's cost per load: an L1 hit costs 1, and each miss adds the next level's share
/// (Gungraun's "estimated cycles" without an L2: L1 1, LL 5, memory 35; with one: 1, 5, 15, 45). Each level's
/// plateau stands 2.3x or more above the one before: well clear of the detector's level_ratio (1.5).
struct ModelledCost {
    static constexpr double hit = 1, d1_miss = 4, l2_miss = 10, ll_miss = 30;
};

struct ModelledPoint {
    std::uint64_t size = 0;
    std::uint64_t loads = 0;     ///< loads of the measured walk
    std::uint64_t d1_misses = 0; ///< L1-dcache-load-misses over it
    std::uint64_t l2_misses = 0; ///< with an L2: LLC-loads (what reaches the LL); 0 without
    std::uint64_t ll_misses = 0; ///< LLC-load-misses
    double cost = 0;             ///< per load (ModelledCost)
};

struct ModelledLatencyResult {
    std::vector<ModelledPoint> points;
    std::vector<ModelledCache> caches;
    std::string geometry;
    unsigned per_octave = 0;
    std::uint64_t stride = 0; ///< bytes between chain elements
    Regimes regimes;
    double seconds = 0;
};

/// Fits the sweep to the model: up to 4x the largest data cache (two octaves past it: the LL, or a D1 larger than the
/// LL) unless `max_given`; chain elements the longest line apart unless `stride_given` (several elements in one line
/// make the miss rate climb over octaves, not step); with `quick`, from 512 B at 4 points per octave (one step: a
/// factor of 1.25).
void fit_sweep_to_model(LatencyOptions& o, const std::vector<ModelledCache>& caches, bool quick, bool max_given,
                        bool stride_given);

/// The sweep under the model: o.min_size..o.max_size at o.per_octave, o.stride, a random chain (o.seed); one walk to
/// warm and one measured per size. Throws UsageError as latency_grids() does, pmc::error if the events cannot open.
ModelledLatencyResult run_modelled_latency(const LatencyOptions& o, const std::vector<ModelledCache>& caches,
                                           Progress& progress);

/// A found level beside the model's level of the same rank (L1 - D1, L2 - L2 or LL, ...).
struct ModelCheck {
    std::string level;          ///< found: "L1", "L2", ...
    std::string cache;          ///< the model's: "D1", "L2", "LL"; "" when the model has no such level
    double found = 0;           ///< the boundary found (bytes)
    double below = 0, above = 0; ///< the measured sizes around it
    std::uint64_t configured = 0;
    bool within_step = false;   ///< configured / step <= found <= configured * step, step = above / below
};
/// Pairs each found cache level (every level but the last, memory) with the model's levels in order. Pure.
std::vector<ModelCheck> check_against_model(const Regimes& regimes, const std::vector<ModelledCache>& caches);
/// The table of found levels beside the model's, with a line per level the test reads:
/// "level L1: boundary 33587 bytes (between 32768 and 36864); the model's D1: 32768 bytes, within one step".
std::string modelled_levels_text(const ModelledLatencyResult& r, const std::vector<ModelCheck>& checks);
/// The oracle's verdict, the same for pmc-mem-latency and pmc-memory: 0 when every modelled data cache was found
/// within one step of its configured size and no level the model lacks was; else 2, with what missed said on stderr
/// by `program`.
int model_verdict(const std::vector<ModelCheck>& checks, const std::vector<ModelledCache>& caches, const char* program);
/// The size column of a level with no boundary after it (the sweep's last): "(beyond the caches)" for memory, past
/// a cache level's boundary; "(no boundary in the sweep)" for a cache level the sweep never left (a --max inside it).
std::string unbounded_size_label(const Level& l);
/// The modelled sweep as CSV: size,loads,d1_misses,l2_misses,ll_misses,cost_per_load.
std::string modelled_latency_csv(const ModelledLatencyResult& r);
/// What pmc-mem-latency and pmc-memory print under the model: that the levels are modelled and by which geometry,
/// how the sweep ran, and modelled_levels_text.
std::string modelled_levels_report(const ModelledLatencyResult& r, const std::vector<ModelCheck>& checks);
/// The same for summary.md: a markdown table of the found levels beside the model's, and the check lines.
std::string modelled_levels_markdown(const ModelledLatencyResult& r, const std::vector<ModelCheck>& checks);

} // namespace pmc_mem
