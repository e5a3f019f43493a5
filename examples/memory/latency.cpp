// SPDX-License-Identifier: MIT
// latency.cpp: see latency.hpp.
#include "latency.hpp"

#include <pmc/emulated.hpp>
#include <pmc/group.hpp>

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>

namespace pmc_mem {

namespace {

// Every chase ends by storing its last pointer here, so no load of the chain is dead code.
volatile void* g_chase_sink;

std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/// A uniform integer in [0, bound) from 64 random bits (Lemire's multiply-shift).
std::size_t below(std::uint64_t bits, std::size_t bound) {
    __extension__ typedef unsigned __int128 U128;
    return static_cast<std::size_t>((static_cast<U128>(bits) * bound) >> 64);
}

/// An empty loop with the chase's trip count: what the loop costs at most, per iteration.
PMC_MEM_KERNEL std::size_t empty_loop(std::size_t blocks) {
    std::size_t i = 0;
    for (; i < blocks; ++i) asm volatile("" ::: "memory");
    return i;
}

/// Anonymous memory, 2 MiB aligned, written once so that no page fault lands in a measurement.
class Buffer {
public:
    Buffer(std::size_t bytes, bool hugepages) : bytes_(bytes) {
        const std::size_t align = 2u << 20;
        map_bytes_ = bytes + align;
        void* m = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            throw std::runtime_error("cannot map " + size_text(static_cast<double>(map_bytes_)) + ": " +
                                     std::strerror(errno));
        map_ = static_cast<char*>(m);
        data_ = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(map_) + align - 1) & ~(align - 1));
        const int advice = hugepages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
        const bool advised = ::madvise(data_, bytes_, advice) == 0;
        std::memset(data_, 0x5a, bytes_);
        if (!hugepages) {
            note_ = fmt::format("base pages ({}; madvise MADV_NOHUGEPAGE{})",
                                size_text(static_cast<double>(::sysconf(_SC_PAGESIZE))),
                                advised ? "" : " refused");
        } else {
            note_ = fmt::format("transparent huge pages requested (madvise MADV_HUGEPAGE{}); {} of the process's "
                                "anonymous memory is in huge pages",
                                advised ? "" : " refused", size_text(anon_huge_bytes()));
        }
    }
    ~Buffer() { ::munmap(map_, map_bytes_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    char* data() const { return data_; }
    const std::string& note() const { return note_; }

private:
    static double anon_huge_bytes() {
        std::ifstream f("/proc/self/smaps_rollup");
        std::string key;
        double kb = 0;
        while (f >> key) {
            if (key == "AnonHugePages:") {
                f >> kb;
                return kb * 1024;
            }
            f.ignore(1 << 20, '\n');
        }
        return 0;
    }
    std::size_t bytes_;
    std::size_t map_bytes_;
    char* map_ = nullptr;
    char* data_ = nullptr;
    std::string note_;
};

} // namespace

const char* chain_name(Chain c) {
    switch (c) {
    case Chain::random: return "random";
    case Chain::forward: return "forward";
    case Chain::backward: return "backward";
    }
    return "?";
}

Chain parse_chain(const std::string& text) {
    if (text == "random") return Chain::random;
    if (text == "forward" || text == "lmbench" || text == "lmbench3") return Chain::forward;
    if (text == "backward" || text == "lmbench2") return Chain::backward;
    throw UsageError("unknown chain '" + text + "' (random, forward or lmbench, backward or lmbench2)");
}

std::vector<std::uint32_t> random_cycle(std::size_t n, std::uint64_t seed) {
    if (n > UINT32_MAX) throw std::length_error("random_cycle: more than 2^32 elements");
    std::vector<std::uint32_t> next(n);
    std::iota(next.begin(), next.end(), 0u);
    std::uint64_t state = seed;
    // Sattolo: like Fisher-Yates, but j < i strictly, which yields one cycle through all n elements.
    for (std::size_t i = n; i-- > 1;) std::swap(next[i], next[below(splitmix64(state), i)]);
    return next;
}

void* build_chain(char* base, std::size_t n, std::size_t stride, Chain chain, std::uint64_t seed) {
    if (n == 0) return nullptr;
    auto link = [&](std::size_t from, std::size_t to) {
        void* target = base + to * stride;
        std::memcpy(base + from * stride, &target, sizeof target);
    };
    switch (chain) {
    case Chain::random: {
        const std::vector<std::uint32_t> next = random_cycle(n, seed);
        for (std::size_t i = 0; i < n; ++i) link(i, next[i]); // in address order: sequential writes
        return base;
    }
    case Chain::forward:
        for (std::size_t i = 0; i < n; ++i) link(i, i + 1 == n ? 0 : i + 1);
        return base;
    case Chain::backward:
        for (std::size_t i = 0; i < n; ++i) link(i, i == 0 ? n - 1 : i - 1);
        return base + (n - 1) * stride;
    }
    return nullptr;
}

#define PMC_MEM_LOAD p = static_cast<void**>(*p);
#define PMC_MEM_LOAD10                                                                                            \
    PMC_MEM_LOAD PMC_MEM_LOAD PMC_MEM_LOAD PMC_MEM_LOAD PMC_MEM_LOAD PMC_MEM_LOAD PMC_MEM_LOAD PMC_MEM_LOAD       \
        PMC_MEM_LOAD PMC_MEM_LOAD
#define PMC_MEM_LOAD100                                                                                           \
    PMC_MEM_LOAD10 PMC_MEM_LOAD10 PMC_MEM_LOAD10 PMC_MEM_LOAD10 PMC_MEM_LOAD10 PMC_MEM_LOAD10 PMC_MEM_LOAD10     \
        PMC_MEM_LOAD10 PMC_MEM_LOAD10 PMC_MEM_LOAD10

// The measured loop: 100 dependent loads per iteration, so the loop's own increment and branch (which run in the
// shadow of the loads anyway) are at most 1/100 of an iteration. The empty asm statement that takes the final
// pointer makes the function impure: without it GCC proves that chase() only reads memory and moves the call out
// of the timed interval.
PMC_MEM_KERNEL void* chase(void* start, std::size_t blocks) {
    void** p = static_cast<void**>(start);
    for (std::size_t i = 0; i < blocks; ++i) {
        PMC_MEM_LOAD100
    }
    asm volatile("" : : "r"(p) : "memory");
    return p;
}

#undef PMC_MEM_LOAD100
#undef PMC_MEM_LOAD10
#undef PMC_MEM_LOAD

std::vector<std::vector<std::uint64_t>> latency_grids(const LatencyOptions& o) {
    if (o.min_size == 0) throw UsageError("--min must be at least 1 byte");
    if (o.max_size < o.min_size) throw UsageError("--max is smaller than --min");
    std::vector<std::vector<std::uint64_t>> grids;
    for (std::size_t c = 0; c < o.chains.size(); ++c) {
        unsigned per = c < o.chain_per_octave.size() && o.chain_per_octave[c] ? o.chain_per_octave[c] : o.per_octave;
        grids.push_back(sweep_sizes(std::max(o.min_size, 2 * o.stride), o.max_size, per, o.stride));
    }
    return grids;
}

const Level* main_memory_level(const Regimes& regimes) {
    const Level* l = memory_level(regimes);
    return l && l->last_size >= static_cast<double>(memory_sweep_bytes) ? l : nullptr;
}

void compare_with_memory(LatencyResult& r, double memory_ns, const std::string& source) {
    r.memory_apart_ns = memory_ns;
    r.memory_apart_source = source;
    auto& levels = r.regimes.levels;
    if (levels.empty() || memory_ns <= 0 || main_memory_level(r.regimes) || levels.back().name != "memory") return;
    Level& last = levels.back();
    // This replaces the sweep's "may be a cache" note with the answer.
    auto& notes = r.regimes.notes;
    notes.erase(std::remove_if(notes.begin(), notes.end(),
                               [](const std::string& n) { return n.rfind("the sweep ends at", 0) == 0; }),
                notes.end());
    const std::string sweep_end = size_text(static_cast<double>(r.options.max_size));
    if (last.latency * cache_below_memory_ratio < memory_ns) {
        last.name = "L" + std::to_string(levels.size());
        notes.push_back(fmt::format("the sweep ends at {} inside a cache: its last level ({}) is {}, not memory, since "
                                    "a load from memory measured on its own takes {} ({}x; {})",
                                    sweep_end, duration_text(last.latency), last.name, duration_text(memory_ns),
                                    num(memory_ns / last.latency, 2), source));
    } else {
        notes.push_back(fmt::format("the sweep ends at {}: its last level ({}) is memory, as a load from memory measured "
                                    "on its own takes {} ({}; less than {}x the level: TLB misses add page walks at "
                                    "the larger size)",
                                    sweep_end, duration_text(last.latency), duration_text(memory_ns), source,
                                    num(cache_below_memory_ratio, 2)));
    }
}

LatencyResult run_latency(const LatencyOptions& o, Clock& clock, Progress& progress, const std::string& pin_note) {
    // The sizes first: a range with no size in it is a usage error, found before anything is allocated or timed.
    const std::vector<std::vector<std::uint64_t>> grids = latency_grids(o);
    LatencyResult r;
    r.options = o;
    // What the sweep really does: at most one sweep per run (the JSON, the figure and the summary report this).
    r.options.sweeps = std::clamp(o.sweeps, 1u, o.reps);
    r.pin_note = pin_note;
    r.wall_note = clock.wall_note();
    r.cycles_note = clock.cycles_note();
    r.load_before = load_average();
    const std::uint64_t t0 = clock.now_ns();

    Buffer buffer(o.max_size, o.hugepages);
    r.pages_note = buffer.note();
    char* base = buffer.data();

    // Loop overhead: the same trip count with no loads, beside the chain on a single line (an L1 hit each time).
    {
        void* self = base;
        std::memcpy(base, &self, sizeof self);
        const std::size_t blocks = 2000; // 0.2 ms: short, like the measured runs
        std::vector<double> loop, l1;
        for (int i = 0; i < 21; ++i) {
            loop.push_back(clock.time([&] { g_chase_sink = reinterpret_cast<void*>(empty_loop(blocks)); }).ns);
            l1.push_back(clock.time([&] { g_chase_sink = chase(self, blocks); }).ns);
        }
        r.loop_ns_per_load = min_of(loop) / (blocks * 100.0);
        r.l1_ns_per_load = min_of(l1) / (blocks * 100.0);
    }

    std::size_t total = 0;
    for (const auto& g : grids) total += g.size();

    // Side by side: `sweeps` passes over all sizes of all chains, each taking its share of the runs, so that a
    // burst of interference on the host spreads over many sizes instead of bending a few.
    const double target_ns = o.rep_ms * 1e6;
    const unsigned sweeps = r.options.sweeps;
    std::size_t done = 0;
    for (std::size_t c = 0; c < o.chains.size(); ++c) {
        r.curves.push_back(LatencyCurve{o.chains[c], {}});
        for (std::uint64_t size : grids[c]) {
            LatencyPoint point;
            point.size = size;
            r.curves.back().points.push_back(point);
        }
    }
    for (unsigned sweep = 0; sweep < sweeps; ++sweep) {
        const unsigned runs = o.reps / sweeps + (sweep < o.reps % sweeps ? 1 : 0);
        for (std::size_t c = 0; c < o.chains.size(); ++c) {
            LatencyCurve& curve = r.curves[c];
            for (std::size_t k = 0; k < curve.points.size(); ++k) {
                LatencyPoint& point = curve.points[k];
                const std::size_t n = point.size / o.stride;
                // Each sweep places the chain in another 2 MiB-aligned window of the buffer where there is room.
                const std::uint64_t room = o.max_size - point.size;
                const std::uint64_t offset = std::min<std::uint64_t>(room, sweep * (o.max_size / sweeps)) &
                                             ~std::uint64_t{(2u << 20) - 1};
                void* p = build_chain(base + offset, n, o.stride, curve.chain, o.seed + point.size); // not timed

                // The first sweep sets how many loads a run needs from a first estimate of the latency. Then the
                // chain is walked once (or for warm_ms if that is shorter), so the caches hold what they will hold.
                const double est = std::max(clock.time([&] { p = chase(p, 100); }).ns / 1e4, 0.05);
                if (point.loads_per_rep == 0) {
                    const double loads = std::max(target_ns / est, static_cast<double>(o.min_loads));
                    point.loads_per_rep = 100 * std::max<std::uint64_t>(1, static_cast<std::uint64_t>(loads / 100));
                }
                const std::size_t blocks = point.loads_per_rep / 100;
                const double warm = std::min(static_cast<double>(n), o.warm_ms * 1e6 / est);
                p = chase(p, std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(warm / 100))));

                double fastest = 0;
                for (unsigned rep = 0; rep < runs; ++rep) {
                    const Timing t = clock.time([&] { p = chase(p, blocks); });
                    const double ns = t.ns / static_cast<double>(point.loads_per_rep);
                    point.ns.push_back(ns);
                    fastest = rep == 0 ? ns : std::min(fastest, ns);
                    if (t.cycles) point.cycles.push_back(*t.cycles / static_cast<double>(point.loads_per_rep));
                }
                point.sweep_min.push_back(fastest);
                g_chase_sink = p;
                ++done;
                progress.detail(fmt::format("latency: sweep {}/{}, {} chain {:>3}/{:<3} {:>6}  {:7.2f} ns per load  "
                                            "[{}/{}]",
                                            sweep + 1, sweeps, chain_name(curve.chain), k + 1, curve.points.size(),
                                            size_label(static_cast<double>(point.size)), point.latency_ns(), done,
                                            total * sweeps));
            }
        }
        if (!progress.tty())
            progress.note(fmt::format("latency: sweep {}/{} done, {:.1f} s", sweep + 1, sweeps,
                                      static_cast<double>(clock.now_ns() - t0) / 1e9));
    }
    for (const auto& curve : r.curves)
        for (const auto& point : curve.points)
            if (!progress.tty())
                progress.note(fmt::format("latency: {} chain {:>6}  {:7.2f} ns per load", chain_name(curve.chain),
                                          size_label(static_cast<double>(point.size)), point.latency_ns()));
    for (const auto& curve : r.curves)
        progress.note(fmt::format("latency: {} chain, {} sizes from {} to {}, {} runs each in {} sweeps",
                                  chain_name(curve.chain), curve.points.size(),
                                  size_text(static_cast<double>(curve.points.front().size)),
                                  size_text(static_cast<double>(curve.points.back().size)), o.reps, sweeps));

    // The regimes come from the random chain (latency; the sequential chains measure prefetching), from each point's
    // latency_ns(): the median over the sweeps of the fastest run of each sweep (see LatencyPoint).
    const LatencyCurve* source = r.curves.empty() ? nullptr : &r.curves.front();
    for (const auto& c : r.curves)
        if (c.chain == Chain::random) source = &c;
    if (source) {
        r.regimes_chain = source->chain;
        std::vector<CurvePoint> pts;
        for (const auto& p : source->points) pts.push_back({static_cast<double>(p.size), p.latency_ns()});
        r.regimes = detect_regimes(pts);
        // The detector knows only the curve; the sweep's end is worth a word when it is short of today's caches.
        if (o.max_size < memory_sweep_bytes && !r.regimes.levels.empty() && r.regimes.levels.back().name == "memory")
            r.regimes.notes.push_back("the sweep ends at " + size_text(static_cast<double>(o.max_size)) +
                                      ": the level called memory may be a cache that did not overflow (use --max "
                                      "256M or more)");
    }
    r.seconds = static_cast<double>(clock.now_ns() - t0) / 1e9;
    r.load_after = load_average();
    return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Output

std::string latency_csv(const LatencyResult& r) {
    std::string out = "chain,size_bytes,size_label,loads_per_run,runs,latency_ns,min_ns,median_ns,max_ns,min_cycles,"
                      "median_cycles\n";
    for (const auto& c : r.curves)
        for (const auto& p : c.points)
            out += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", chain_name(c.chain), p.size,
                               size_label(static_cast<double>(p.size)), p.loads_per_rep, p.ns.size(),
                               num(p.latency_ns(), 6), num(p.min_ns(), 6), num(p.median_ns(), 6), num(max_of(p.ns), 6),
                               p.cycles.empty() ? "" : num(min_of(p.cycles), 6),
                               p.cycles.empty() ? "" : num(median_of(p.cycles), 6));
    return out;
}

const ReportedCache* reported_for(const Level& level, const MachineFacts& m) {
    if (level.name == "memory") return nullptr;
    const std::string name = level.name == "L1" ? "L1d" : level.name;
    for (const auto& c : m.caches)
        if (c.name == name) return &c;
    return nullptr;
}

const Level* memory_level(const Regimes& regimes) {
    for (const auto& l : regimes.levels)
        if (l.name == "memory") return &l;
    return nullptr;
}

namespace {

std::string level_name_of(const std::string& cache) { return cache == "L1d" ? "L1" : cache; }

/// A factor for people: "2.55x larger" / "3.1x smaller".
std::string factor_text(double found, double reported) {
    return found >= reported ? num(found / reported, 3) + "x larger" : num(reported / found, 3) + "x smaller";
}

} // namespace

void check_against_reported(Regimes& regimes, const MachineFacts& m) {
    const ReportedCache* llc = nullptr;
    for (const auto& c : m.caches)
        if (c.bytes > 0 && (!llc || c.bytes > llc->bytes)) llc = &c;
    if (!llc) return;
    auto& levels = regimes.levels;
    const std::string rerun = "rerun on an idle machine, without --quick";
    auto host_clause = [&](const ReportedCache& c) {
        return &c == llc && !m.hypervisor.empty()
                   ? " (under the hypervisor \"" + m.hypervisor + "\" the reported " + c.name +
                         " can be the host's, not what this virtual CPU sees)"
                   : std::string();
    };

    // 1. A plateau inside the reported last-level cache is never memory.
    for (std::size_t i = 0; i < levels.size(); ++i) {
        Level& l = levels[i];
        if (l.name != "memory" || l.first_size >= static_cast<double>(llc->bytes)) continue;
        const ReportedCache* in = llc; // the smallest reported cache that holds the plateau's first size
        for (const auto& c : m.caches)
            if (static_cast<double>(c.bytes) > l.first_size && c.bytes < in->bytes) in = &c;
        const std::string name = level_name_of(in->name);
        const bool taken = std::any_of(levels.begin(), levels.end(), [&](const Level& o) { return o.name == name; });
        const std::string reported = in->name + " " + size_text(static_cast<double>(in->bytes)) + " (" + in->source + ")";
        const std::string found = fmt::format("the level found at {}..{} ({})", size_label(l.first_size),
                                              size_label(l.last_size), duration_text(l.latency));
        l.name = taken ? beyond_level_name : name;
        l.check = "inside the reported " + in->name + ": not memory";
        regimes.warnings.push_back(
            found + " lies inside the " + reported + " the CPU reports, so it is not memory: " +
            (taken ? fmt::format("it is shown as \"{}\" (beyond the detected levels), since the found {} already "
                                 "ends at {}",
                                 beyond_level_name, name, i > 0 && levels[i - 1].boundary
                                                              ? size_text(levels[i - 1].boundary->size)
                                                              : std::string("?"))
                   : "it is shown as " + name) +
            host_clause(*in) + "; to measure memory, " + rerun + " (the sweep must go well past the " + in->name +
            ")");
    }

    // 2. Each cache level against the reported size of the same name.
    for (Level& l : levels) {
        const ReportedCache* c = reported_for(l, m);
        if (!l.boundary || !c || c->bytes == 0) continue;
        const double reported = static_cast<double>(c->bytes), found = l.boundary->size;
        if (found <= reported * reported_disagreement_ratio && found * reported_disagreement_ratio >= reported)
            continue;
        const std::string factor = factor_text(found, reported);
        l.check = "found " + factor;
        regimes.warnings.push_back(fmt::format(
            "{} found at {} (between the measured sizes {} and {}; its plateau {}..{}) where the CPU reports {} "
            "({}): {}, more than {}x off{}; a busy machine or a short sweep moves a boundary, so {}",
            l.name, size_text(found), size_label(l.boundary->below), size_label(l.boundary->above),
            size_label(l.first_size), size_label(l.last_size), size_text(reported), c->source, factor,
            num(reported_disagreement_ratio, 2), host_clause(*c), rerun));
    }
}

SweepSpread sweep_spread(const LatencyCurve& curve) {
    SweepSpread s;
    for (const auto& p : curve.points) {
        if (p.sweep_min.size() < 2) continue;
        const double lo = min_of(p.sweep_min), hi = max_of(p.sweep_min);
        if (!(lo > 0)) continue;
        ++s.sizes;
        if (hi >= lo * sweep_disagreement_ratio) ++s.disagreeing;
        if (hi / lo > s.worst_ratio) {
            s.worst_ratio = hi / lo;
            s.worst_size = static_cast<double>(p.size);
        }
    }
    return s;
}

std::string busy_warning(double load_before, double load_after, int cpus, const SweepSpread& spread) {
    std::vector<std::string> signs;
    if (cpus > 0 && std::max(load_before, load_after) > cpus)
        signs.push_back(fmt::format("the load average was above the {} CPUs ({} before the sweep, {} after)", cpus,
                                    load_before < 0 ? "?" : num(load_before, 3),
                                    load_after < 0 ? "?" : num(load_after, 3)));
    if (spread.sizes > 0 && spread.disagreeing * 4 > spread.sizes)
        signs.push_back(fmt::format("the sweeps disagreed: at {} of {} sizes the slowest sweep's fastest run took "
                                    "{}x the fastest's or more (the worst {}x at {})",
                                    spread.disagreeing, spread.sizes, num(sweep_disagreement_ratio, 2),
                                    num(spread.worst_ratio, 3), size_label(spread.worst_size)));
    if (signs.empty()) return "";
    std::string text = "the machine was busy: " + signs[0];
    for (std::size_t i = 1; i < signs.size(); ++i) text += "; and " + signs[i];
    return text + ". Other work moves the levels found (their sizes and latencies), so rerun on an idle machine, "
                  "without --quick";
}

void check_latency(LatencyResult& r, const MachineFacts& m) {
    const bool had_memory = memory_level(r.regimes) != nullptr;
    check_against_reported(r.regimes, m);
    if (had_memory && !memory_level(r.regimes)) {
        // What the sweep's end said about its last level ("may be a cache", "is memory") is superseded.
        auto& notes = r.regimes.notes;
        notes.erase(std::remove_if(notes.begin(), notes.end(),
                                   [](const std::string& n) { return n.rfind("the sweep ends at", 0) == 0; }),
                    notes.end());
        if (r.memory_apart_ns > 0)
            notes.push_back("a load from memory takes " + duration_text(r.memory_apart_ns) +
                            " (" + r.memory_apart_source + ")");
    }
    for (const auto& c : r.curves)
        if (c.chain == r.regimes_chain) r.spread = sweep_spread(c);
    const std::string busy = busy_warning(r.load_before, r.load_after, m.online_cpus, r.spread);
    if (!busy.empty()) r.regimes.warnings.push_back(busy);
}

namespace {
void write_transition(pmc::JsonWriter& json, const Transition& t) {
    json.begin_object();
    json.field("size_bytes", t.size);
    json.field("below_bytes", t.below);
    json.field("above_bytes", t.above);
    json.field("latency_from_ns", t.latency_from);
    json.field("latency_to_ns", t.latency_to);
    json.field("ratio", t.ratio());
    json.end_object();
}
} // namespace

void write_latency_json(pmc::JsonWriter& json, const LatencyResult& r, const MachineFacts& m) {
    const LatencyOptions& o = r.options;
    json.begin_object();
    json.field("experiment", "latency");
    json.key("machine");
    write_machine_json(json, m);
    json.key("method").begin_object();
    json.field("definition", "back-to-back dependent loads p = *p through a circular chain, one element per stride "
                             "bytes; ns per load = elapsed / loads");
    json.field("unroll", 100);
    json.field("stride_bytes", o.stride);
    json.field("min_size_bytes", o.min_size);
    json.field("max_size_bytes", o.max_size);
    json.field("points_per_octave", o.per_octave);
    json.field("runs_per_size", o.reps);
    json.field("sweeps", o.sweeps);
    json.field("min_loads_per_run", o.min_loads);
    json.field("run_ms", o.rep_ms);
    json.field("seed", o.seed);
    json.field("timer", r.wall_note);
    json.field("cycles", r.cycles_note);
    json.field("pinning", r.pin_note);
    json.field("pages", r.pages_note);
    json.field("loop_overhead_ns_per_load", r.loop_ns_per_load);
    json.field("single_line_chain_ns_per_load", r.l1_ns_per_load);
    json.field("statistic", "latency_ns: the median over the sweeps of each sweep's fastest run (regimes are found "
                            "from it); min_ns and median_ns over all runs");
    json.end_object();
    json.key("curves").begin_array();
    for (const auto& c : r.curves) {
        json.begin_object();
        json.field("chain", chain_name(c.chain));
        json.key("points").begin_array();
        for (const auto& p : c.points) {
            json.begin_object();
            json.field("size_bytes", p.size);
            json.field("loads_per_run", p.loads_per_rep);
            json.field("latency_ns", p.latency_ns());
            json.field("min_ns", p.min_ns());
            json.field("median_ns", p.median_ns());
            json.field("max_ns", max_of(p.ns));
            if (!p.cycles.empty()) {
                json.field("min_cycles", min_of(p.cycles));
                json.field("median_cycles", median_of(p.cycles));
            }
            json.end_object();
        }
        json.end_array();
        json.end_object();
    }
    json.end_array();
    json.key("regimes").begin_object();
    json.field("chain", chain_name(r.regimes_chain));
    json.key("levels").begin_array();
    for (const auto& l : r.regimes.levels) {
        json.begin_object();
        json.field("name", l.name);
        json.field("first_size_bytes", l.first_size);
        json.field("last_size_bytes", l.last_size);
        json.field("latency_ns", l.latency);
        json.field("latency_low_ns", l.latency_low);
        json.field("latency_high_ns", l.latency_high);
        json.field("points", l.points);
        json.field("check", l.check);
        json.key("boundary");
        if (l.boundary) write_transition(json, *l.boundary);
        else json.null();
        json.key("reported");
        if (const ReportedCache* c = reported_for(l, m)) {
            json.begin_object();
            json.field("name", c->name);
            json.field("bytes", c->bytes);
            json.field("source", c->source);
            json.end_object();
        } else {
            json.null();
        }
        json.end_object();
    }
    json.end_array();
    json.key("minor_steps").begin_array();
    for (const auto& s : r.regimes.minor_steps) write_transition(json, s);
    json.end_array();
    json.key("notes").begin_array();
    for (const auto& n : r.regimes.notes) json.value(n);
    json.end_array();
    json.key("warnings").begin_array();
    for (const auto& w : r.regimes.warnings) json.value(w);
    json.end_array();
    json.end_object();
    json.field("load_average_before", r.load_before).field("load_average_after", r.load_after);
    json.key("sweep_spread").begin_object();
    json.field("sizes", r.spread.sizes).field("disagreeing", r.spread.disagreeing);
    json.field("worst_ratio", r.spread.worst_ratio).field("worst_size_bytes", r.spread.worst_size);
    json.end_object();
    if (r.memory_apart_ns > 0) {
        json.key("memory_measured_apart").begin_object();
        json.field("latency_ns", r.memory_apart_ns).field("source", r.memory_apart_source);
        json.end_object();
    }
    json.field("seconds", r.seconds);
    json.end_object();
}

namespace {
struct RegimeRow {
    std::string level, boundary, bracket, latency, range, reported;
    std::string check; ///< how the level disagrees with the report, "" if it does not
};

std::vector<RegimeRow> regime_rows(const Regimes& regimes, const MachineFacts& m) {
    std::vector<RegimeRow> rows;
    for (const auto& l : regimes.levels) {
        RegimeRow row;
        row.level = l.name;
        if (l.boundary) {
            row.boundary = size_text(l.boundary->size);
            row.bracket = size_label(l.boundary->below) + " .. " + size_label(l.boundary->above);
        } else {
            row.boundary = l.name == "memory"             ? "(beyond the caches)"
                           : l.name == beyond_level_name ? "(beyond the detected levels)"
                                                         : "-";
        }
        row.latency = duration_text(l.latency);
        row.range = fmt::format("{}..{} ns, {}..{}", num(l.latency_low, 3), num(l.latency_high, 3),
                                size_label(l.first_size), size_label(l.last_size));
        if (const ReportedCache* c = reported_for(l, m))
            row.reported = c->name + " " + size_text(static_cast<double>(c->bytes)) + " (" + c->source + ")";
        else
            row.reported = "-";
        row.check = l.check;
        rows.push_back(row);
    }
    return rows;
}
} // namespace

std::string regimes_text(const Regimes& regimes, const MachineFacts& m) {
    std::string out = fmt::format("{:<7} {:<11} {:<14} {:<9} {:<32} {}\n", "level", "size", "between", "latency",
                                  "plateau (latency, sizes)", "the CPU reports");
    for (const auto& row : regime_rows(regimes, m))
        out += fmt::format("{:<7} {:<11} {:<14} {:<9} {:<32} {}{}\n", row.level, row.boundary, row.bracket,
                           row.latency, row.range, row.reported, row.check.empty() ? "" : "  <- " + row.check + "!");
    for (const auto& s : regimes.minor_steps)
        out += fmt::format("minor step (not a new level): x{:.2f} ({} -> {}) near {} (between {} and {})\n",
                           s.ratio(), duration_text(s.latency_from), duration_text(s.latency_to), size_text(s.size), size_label(s.below),
                           size_label(s.above));
    for (const auto& n : regimes.notes) out += "note: " + n + "\n";
    for (const auto& w : regimes.warnings) out += "WARNING: " + w + ".\n";
    return out;
}

std::string regimes_markdown(const Regimes& regimes, const MachineFacts& m) {
    std::string out = "| level | found size | between measured sizes | latency | plateau (latency range, sizes) | "
                      "the CPU reports |\n|---|---|---|---|---|---|\n";
    for (const auto& row : regime_rows(regimes, m))
        out += "| " + row.level + " | " + row.boundary + " | " + row.bracket + " | " + row.latency + " | " +
               row.range + " | " + row.reported + (row.check.empty() ? "" : " — **" + row.check + "**") + " |\n";
    return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Under pmc emulate --cache

std::vector<ModelledCache> modelled_caches() {
    const auto& pmu = pmc::emulated_pmu();
    if (!pmu || !pmu->cache_model) return {};
    std::vector<ModelledCache> caches{{"D1", pmu->d1.size, pmu->d1.line}};
    if (pmu->l2.size) caches.push_back({"L2", pmu->l2.size, pmu->l2.line});
    caches.push_back({"LL", pmu->ll.size, pmu->ll.line});
    return caches;
}

std::string emulator_without_model(const std::string& program) {
    const auto& pmu = pmc::emulated_pmu();
    if (!pmu || pmu->cache_model) return "";
    return "this runs under pmc emulate without --cache, where time measures the emulator, not memory, and "
           "perf_event_open is missing. Fix: `pmc emulate --cache [--D1 G] [--L2 G] [--LL G] -- " + program +
           "` finds the levels of pmc's cache model; run " + program + " without the emulator to measure this machine";
}

std::string not_measured_under_emulator(const std::string& program, const std::string& why) {
    if (!pmc::emulated_pmu()) return "";
    return program + ": not measured under pmc emulate: " + why + ". Run " + program +
           " without the emulator to measure this machine (under pmc emulate --cache, pmc-mem-latency and pmc-memory "
           "find the cache model's levels)";
}

std::string modelled_geometry() {
    const auto& pmu = pmc::emulated_pmu();
    return pmu && pmu->cache_model ? pmu->cache_geometry : std::string();
}

void fit_sweep_to_model(LatencyOptions& o, const std::vector<ModelledCache>& caches, bool quick, bool max_given,
                        bool stride_given) {
    std::uint64_t largest = 0, longest_line = 0;
    for (const auto& c : caches) {
        largest = std::max(largest, c.bytes);
        longest_line = std::max(longest_line, c.line);
    }
    // The largest level overflows by two octaves: the LL, or a D1 above an LL no larger (Cachegrind allows it).
    if (!max_given && largest) o.max_size = 4 * largest;
    // One element per line of every level: with 256-byte LL lines and 64-byte elements the chain's four elements of
    // a line come back at random distances, and the LL's miss rate climbs over two octaves instead of stepping.
    if (!stride_given && longest_line > o.stride) o.stride = longest_line;
    if (quick) {
        o.min_size = 512;
        o.per_octave = 4;
    }
}

ModelledLatencyResult run_modelled_latency(const LatencyOptions& o, const std::vector<ModelledCache>& caches,
                                           Progress& progress) {
    LatencyOptions random = o;
    random.chains = {Chain::random};
    random.chain_per_octave.clear();
    const std::vector<std::uint64_t> grid = latency_grids(random).front();
    ModelledLatencyResult r;
    r.caches = caches;
    r.geometry = modelled_geometry();
    r.per_octave = o.per_octave;
    r.stride = o.stride;
    const bool l2 = caches.size() > 2;
    // Opened before the buffer: a refusal (not under the model after all) costs nothing.
    pmc::Group group({"L1-dcache-loads:u", "L1-dcache-load-misses:u", "LLC-loads:u", "LLC-load-misses:u"});
    pmc::GroupReading before = group.make_reading(), after = group.make_reading();
    const auto t0 = std::chrono::steady_clock::now();
    Buffer buffer(o.max_size, false);
    char* base = buffer.data();
    for (const std::uint64_t size : grid) {
        const std::size_t n = size / o.stride;
        void* p = build_chain(base, n, o.stride, Chain::random, o.seed + size);
        // One walk through every element warms the caches with the chain; the measured walk is a second one (at
        // least 2,000 loads, so that a tiny chain's few cold misses weigh nothing).
        const std::size_t walk = (n + 99) / 100;
        p = chase(p, walk);
        const std::size_t blocks = std::max<std::size_t>(walk, 20);
        group.read(before);
        p = chase(p, blocks);
        group.read(after);
        g_chase_sink = p;
        ModelledPoint point;
        point.size = size;
        point.loads = blocks * 100;
        point.d1_misses = after.values[1] - before.values[1];
        point.l2_misses = l2 ? after.values[2] - before.values[2] : 0;
        point.ll_misses = after.values[3] - before.values[3];
        const double loads = static_cast<double>(point.loads);
        point.cost = ModelledCost::hit + ModelledCost::d1_miss * static_cast<double>(point.d1_misses) / loads +
                     ModelledCost::l2_miss * static_cast<double>(point.l2_misses) / loads +
                     ModelledCost::ll_miss * static_cast<double>(point.ll_misses) / loads;
        r.points.push_back(point);
        progress.detail(fmt::format("latency (modelled): {:>6}  {:7.3f} per load", size_label(static_cast<double>(size)),
                                    point.cost));
    }
    std::vector<CurvePoint> pts;
    for (const auto& p : r.points) pts.push_back({static_cast<double>(p.size), p.cost});
    r.regimes = detect_regimes(pts);
    // Cachegrind's name for the model's last level: LL, also where there is no L2 (the detector numbers L1, L2, ...).
    auto& levels = r.regimes.levels;
    if (levels.size() >= 2 && levels.back().name == "memory") levels[levels.size() - 2].name = "LL";
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

std::vector<ModelCheck> check_against_model(const Regimes& regimes, const std::vector<ModelledCache>& caches) {
    std::vector<ModelCheck> checks;
    for (std::size_t i = 0; i + 1 < regimes.levels.size(); ++i) {
        const Level& l = regimes.levels[i];
        ModelCheck c;
        c.level = l.name;
        if (l.boundary) {
            c.found = l.boundary->size;
            c.below = l.boundary->below;
            c.above = l.boundary->above;
        }
        if (i < caches.size()) {
            c.cache = caches[i].name;
            c.configured = caches[i].bytes;
            const double step = c.below > 0 ? c.above / c.below : 0;
            const double configured = static_cast<double>(c.configured);
            c.within_step = step > 0 && c.found >= configured / step && c.found <= configured * step;
        }
        checks.push_back(c);
    }
    return checks;
}

int model_verdict(const std::vector<ModelCheck>& checks, const std::vector<ModelledCache>& caches, const char* program) {
    const std::size_t missing = checks.size() < caches.size() ? caches.size() - checks.size() : 0;
    std::size_t disagreeing = 0;
    for (const ModelCheck& c : checks) disagreeing += c.cache.empty() || !c.within_step;
    if (missing + disagreeing == 0) return 0;
    std::fprintf(stderr, "%s: exit status 2: %zu of the model's %zu cache levels not found in the curve, %zu found "
                 "level%s disagreeing with the model (see the table; a --max below the last cache, or a --min above "
                 "the first, leaves levels out; caches too close in size merge into one level)\n", program, missing,
                 caches.size(), disagreeing, disagreeing == 1 ? "" : "s");
    return 2;
}

std::string unbounded_size_label(const Level& l) {
    return l.name == "memory" ? "(beyond the caches)" : "(no boundary in the sweep)";
}

std::string modelled_levels_text(const ModelledLatencyResult& r, const std::vector<ModelCheck>& checks) {
    std::string out = fmt::format("{:<7} {:<11} {:<16} {:<14} {}\n", "level", "size", "between", "cost per load",
                                  "pmc's cache model");
    for (std::size_t i = 0; i < r.regimes.levels.size(); ++i) {
        const Level& l = r.regimes.levels[i];
        const ModelCheck* c = i < checks.size() ? &checks[i] : nullptr;
        out += fmt::format("{:<7} {:<11} {:<16} {:<14} {}\n", l.name,
                           l.boundary ? size_text(l.boundary->size) : unbounded_size_label(l),
                           l.boundary ? size_label(l.boundary->below) + " .. " + size_label(l.boundary->above) : "",
                           num(l.latency, 3),
                           !c ? std::string(l.name == "memory" ? "memory" : "-")
                           : c->cache.empty() ? std::string("no such level in the model  <- DISAGREES")
                                              : c->cache + " " + size_text(static_cast<double>(c->configured)) +
                                                    (c->within_step ? "" : "  <- DISAGREES"));
    }
    out += "\n";
    for (const ModelCheck& c : checks)
        out += fmt::format("level {}: boundary {:.0f} bytes (between {:.0f} and {:.0f}); {}\n", c.level, c.found,
                           c.below, c.above,
                           c.cache.empty() ? std::string("the model has no such level")
                                           : fmt::format("the model's {}: {} bytes, {}", c.cache, c.configured,
                                                         c.within_step ? "within one step" : "NOT within one step"));
    if (checks.size() < r.caches.size())
        for (std::size_t i = checks.size(); i < r.caches.size(); ++i)
            out += fmt::format("level missing: the model's {} ({} bytes) was not found in the curve\n", r.caches[i].name,
                               r.caches[i].bytes);
    for (const auto& n : r.regimes.notes) out += "note: " + n + "\n";
    return out;
}

std::string modelled_levels_report(const ModelledLatencyResult& r, const std::vector<ModelCheck>& checks) {
    const bool l2 = r.caches.size() > 2;
    return fmt::format("Levels found from pmc's cache model (pmc emulate --cache: {}): a random chain's modelled "
                       "misses per load, not time (cost per load: an L1 hit 1, +{:g} a D1 miss, {}+{:g} an LL miss), "
                       "{} sizes from {} to {} at {} per octave, elements {} bytes apart, {:.1f} s:\n\n{}",
                       r.geometry, ModelledCost::d1_miss,
                       l2 ? fmt::format("+{:g} an L2 miss, ", ModelledCost::l2_miss) : std::string(),
                       ModelledCost::ll_miss,
                       r.points.size(), size_text(static_cast<double>(r.points.front().size)),
                       size_text(static_cast<double>(r.points.back().size)), r.per_octave, r.stride, r.seconds,
                       modelled_levels_text(r, checks));
}

std::string modelled_levels_markdown(const ModelledLatencyResult& r, const std::vector<ModelCheck>& checks) {
    std::string out = "| level | found size | between measured sizes | cost per load | pmc's cache model |\n"
                      "|---|---|---|---|---|\n";
    for (std::size_t i = 0; i < r.regimes.levels.size(); ++i) {
        const Level& l = r.regimes.levels[i];
        const ModelCheck* c = i < checks.size() ? &checks[i] : nullptr;
        const std::string model = !c                ? std::string(l.name == "memory" ? "memory" : "-")
                                  : c->cache.empty() ? std::string("no such level in the model — **disagrees**")
                                                     : c->cache + " " + size_text(static_cast<double>(c->configured)) +
                                                           (c->within_step ? ", within one step" : " — **not within one step**");
        out += "| " + l.name + " | " + (l.boundary ? size_text(l.boundary->size) : unbounded_size_label(l)) + " | " +
               (l.boundary ? size_label(l.boundary->below) + " .. " + size_label(l.boundary->above) : "") + " | " +
               num(l.latency, 3) + " | " + model + " |\n";
    }
    for (std::size_t i = checks.size(); i < r.caches.size(); ++i)
        out += "\n- Level missing: the model's " + r.caches[i].name + " (" + std::to_string(r.caches[i].bytes) +
               " bytes) was not found in the curve.\n";
    return out;
}

std::string modelled_latency_csv(const ModelledLatencyResult& r) {
    std::string out = "size,loads,d1_misses,l2_misses,ll_misses,cost_per_load\n";
    for (const auto& p : r.points)
        out += fmt::format("{},{},{},{},{},{:.6f}\n", p.size, p.loads, p.d1_misses, p.l2_misses, p.ll_misses, p.cost);
    return out;
}

} // namespace pmc_mem
