// Several profiles read as runs of one program, for pmc diff and pmc aggregate: the files read (damage reported),
// one counter chosen in all of them, whether it is exact, each run's intervals with their label paths and self
// values, per-label sums, and min / median / max across runs.
#pragma once

#include <pmc/profile_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pmc_tool::runs {

/// One profile file and the index of the chosen counter in it.
struct Run {
    std::string file;
    pmc::Profile profile;
    std::size_t counter = 0;
};

/// Reads every file. A file whose header cannot be read is an error (the message says which and why); damage after
/// the header is in each profile's problems.
inline std::optional<std::string> load(const std::vector<std::string>& files, std::vector<Run>& out) {
    for (const auto& f : files) {
        auto read = pmc::read_profile(f);
        if (!read) return read.failure().message;
        out.push_back(Run{f, std::move(*read), 0});
    }
    return std::nullopt;
}

/// Chooses counter `name` in every run (empty: the first run's primary counter). Fails, saying which file lacks it
/// and what each has, when it is not in all of them or its unit differs.
inline std::optional<std::string> choose_counter(std::vector<Run>& runs, std::string name) {
    if (runs.empty()) return std::string("no profiles");
    if (name.empty()) name = runs.front().profile.counters.front().name;
    const std::string unit = [&] {
        for (const auto& k : runs.front().profile.counters)
            if (k.name == name) return k.unit;
        return std::string();
    }();
    for (auto& r : runs) {
        const auto& ks = r.profile.counters;
        auto it = std::find_if(ks.begin(), ks.end(), [&](const pmc::ProfileCounter& k) { return k.name == name; });
        if (it == ks.end()) {
            std::string names;
            for (const auto& k : ks) names += (names.empty() ? "" : ", ") + k.name;
            return fmt::format("'{}' recorded no counter '{}' (it has: {}); choose one every file has with --counter "
                               "NAME",
                               r.file, name, names);
        }
        if (!unit.empty() && it->unit != unit)
            return fmt::format("counter '{}' is in {} in '{}' but in {} in '{}': the values cannot be compared", name,
                               it->unit, r.file, unit, runs.front().file);
        r.counter = static_cast<std::size_t>(it - ks.begin());
    }
    return std::nullopt;
}

/// Whether a run's counter values are exact counts, and why (or why not), in words.
struct Exactness {
    bool exact = false;
    std::string why;
};

inline Exactness exactness(const pmc::Profile& p, std::size_t c) {
    namespace pf = pmc::profile_format;
    const auto& k = p.counters[c];
    if (!k.exact())
        return {false, k.unit == "ns" || k.unit == "TSC ticks" ? "a time: it varies from run to run"
                                                               : "the file does not mark it exact"};
    if (k.flags & pf::fallback) return {false, "recorded in place of a counter that could not be opened (a fallback)"};
    if (k.flags & pf::may_multiplex) return {false, "a hardware event the kernel may multiplex (time-share)"};
    for (const auto& t : p.threads) {
        if (!t.error.empty()) return {false, fmt::format("thread {}'s counters could not be opened", t.index)};
        if (c < t.times.size() && t.times[c].multiplexed())
            return {false, fmt::format("multiplexed on thread {} (counted {:.1f}% of the time)", t.index,
                                       100.0 * t.times[c].running_fraction())};
    }
    return {true, "a count of events read whole, never multiplexed or replaced"};
}

/// Exact only when every run's counter is; otherwise the first reason, with its file.
inline Exactness exactness(const std::vector<Run>& runs) {
    for (const auto& r : runs) {
        Exactness e = exactness(r.profile, r.counter);
        if (!e.exact) return {false, runs.size() > 1 ? e.why + " (in '" + r.file + "')" : e.why};
    }
    return exactness(runs.front().profile, runs.front().counter);
}

/// A value in the counter's unit: times scaled (ns, us, ms, s), counts as integers.
inline std::string show(double v, const std::string& unit) {
    if (unit != "ns") return std::fabs(v) >= 1e15 ? fmt::format("{:.3e}", v) : fmt::format("{:.0f}", v);
    const double a = std::fabs(v);
    if (a < 1e3) return fmt::format("{:.0f} ns", v);
    if (a < 1e6) return fmt::format("{:.2f} us", v / 1e3);
    if (a < 1e9) return fmt::format("{:.2f} ms", v / 1e6);
    return fmt::format("{:.3f} s", v / 1e9);
}

/// The unit as a reader says it: "ns", or the event's name for a count.
inline std::string unit_words(const pmc::ProfileCounter& k) { return k.unit == "events" ? k.name : k.unit; }

/// min / median / max of a run's values (the median of an even number: the mean of the middle two).
struct Spread {
    double min = 0, median = 0, max = 0;
    std::size_t n = 0;
    double range() const { return max - min; }
    /// range / |median| in percent; 0 when both are 0, infinite when only the median is.
    double percent() const {
        if (range() == 0) return 0;
        return median != 0 ? 100.0 * range() / std::fabs(median) : HUGE_VAL;
    }
};

inline Spread spread(std::vector<double> v) {
    Spread s;
    s.n = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.min = v.front();
    s.max = v.back();
    s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    return s;
}

inline std::string percent_text(double p) {
    return std::isinf(p) ? std::string("inf") : fmt::format("{:.1f}%", p);
}

// ---- intervals ------------------------------------------------------------------------------------------------
// A stand-in for the shared nesting walker (helper C's, announced on the board): rebuilds each thread's nesting from
// the records' depths as docs/profile-format.md describes (the children of an interval at depth d are the intervals
// at depth d + 1 written since the previous record at depth <= d).

/// One interval of one run: where it is, its name and path from its thread's outermost scope, its values.
struct Interval {
    std::uint32_t thread = 0;     ///< the profiler's thread number
    std::size_t ordinal = 0;      ///< its place among its thread's intervals (postorder: the order they ended)
    std::string label;            ///< label text
    std::string name;             ///< label(argument), or the label when it has no argument
    std::uint16_t depth = 0;
    std::string path;             ///< names from the outermost scope, joined by " / "
    std::uint64_t total = 0;      ///< inclusive value
    std::int64_t self = 0;        ///< total minus its children's totals
};

inline std::vector<Interval> intervals(const pmc::Profile& p, std::size_t c) {
    namespace pf = pmc::profile_format;
    std::vector<Interval> out;
    for (const auto& t : p.threads) {
        const std::size_t first = out.size();
        std::vector<std::vector<std::size_t>> pending; // per depth: intervals whose parent has not ended yet
        std::vector<std::size_t> parent;               // per interval of this thread (index into out), or SIZE_MAX
        std::size_t deepest = 0;
        for (const auto& r : t.records) {
            if (r.kind != pf::RecordKind::interval || r.first_value + p.values_per_record(r.kind) > p.values.size())
                continue;
            const std::uint64_t* v = &p.values[r.first_value];
            Interval iv;
            iv.thread = t.index;
            iv.ordinal = out.size() - first;
            iv.label = p.string(r.label);
            iv.name = r.arg ? iv.label + "(" + p.string(r.arg) + ")" : iv.label;
            iv.depth = r.depth;
            iv.total = v[2 * c + 1] - v[2 * c];
            const std::size_t d = r.depth;
            if (pending.size() < d + 2) pending.resize(d + 2);
            for (std::size_t k = d + 2; k <= deepest && k < pending.size(); ++k) pending[k].clear(); // parent lost
            std::uint64_t children = 0;
            for (std::size_t ch : pending[d + 1]) {
                children += out[ch].total;
                parent[ch - first] = out.size();
            }
            pending[d + 1].clear();
            iv.self = static_cast<std::int64_t>(iv.total - children);
            pending[d].push_back(out.size());
            deepest = std::max(deepest, d);
            parent.push_back(SIZE_MAX);
            out.push_back(std::move(iv));
        }
        // Parents end after their children: fill paths from the last interval back.
        for (std::size_t i = out.size(); i-- > first;) {
            const std::size_t up = parent[i - first];
            if (up != SIZE_MAX) out[i].path = out[up].path + " / " + out[i].name;
            else out[i].path = out[i].depth > 0 ? "(parent lost) / " + out[i].name : out[i].name;
        }
    }
    return out;
}

/// One label's sums in one run.
struct LabelSums {
    std::uint64_t calls = 0;
    std::int64_t self = 0;
    std::uint64_t total = 0; ///< a recursive label's inner calls are in its outer calls' totals too
};

inline std::map<std::string, LabelSums> label_sums(const std::vector<Interval>& ivs) {
    std::map<std::string, LabelSums> out;
    for (const auto& iv : ivs) {
        auto& s = out[iv.label];
        ++s.calls;
        s.self += iv.self;
        s.total += iv.total;
    }
    return out;
}

/// Instant events (cache hits) per "label(argument)", and integer events' count and sum per label.
struct EventSums {
    std::map<std::string, std::uint64_t> instants;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> integers; ///< count, sum
};

inline EventSums event_sums(const pmc::Profile& p) {
    namespace pf = pmc::profile_format;
    EventSums out;
    for (const auto& t : p.threads)
        for (const auto& r : t.records) {
            if (r.kind == pf::RecordKind::interval || r.first_value + p.values_per_record(r.kind) > p.values.size())
                continue;
            const std::string name = r.arg ? p.string(r.label) + "(" + p.string(r.arg) + ")" : p.string(r.label);
            if (r.kind == pf::RecordKind::instant) ++out.instants[name];
            else {
                auto& [count, sum] = out.integers[p.string(r.label)];
                ++count;
                sum += p.values[r.first_value + 1];
            }
        }
    return out;
}

/// The damage in each run, on stderr (the first few problems of each); returns whether there was any.
inline bool report_damage(const char* tool, const std::vector<Run>& runs) {
    bool any = false;
    for (const auto& r : runs) {
        if (r.profile.problems.empty()) continue;
        any = true;
        fmt::print(stderr, "pmc {}: '{}' is incomplete: {} of its bytes could not be read; what was lost:\n", tool,
                   r.file, r.profile.bytes_lost);
        for (std::size_t i = 0; i < r.profile.problems.size() && i < 5; ++i)
            fmt::print(stderr, "  {}\n", r.profile.problems[i]);
        if (r.profile.problems.size() > 5)
            fmt::print(stderr, "  ... and {} more (pmc summarize --json '{}' lists them all)\n",
                       r.profile.problems.size() - 5, r.file);
    }
    return any;
}

} // namespace pmc_tool::runs
