// SPDX-License-Identifier: MIT
// Several profiles read as runs of one program, for pmc diff and pmc aggregate: the files read (damage reported) and
// walked with pmc/profile_reader.hpp's nesting walker, each interval's thread known by name (cli::ThreadKey), one counter chosen in all of them, whether it is exact, each
// run's intervals with their label paths and self values, per-label sums, and min / median / max across runs.
#pragma once

#include <pmc/modelled_events.hpp>
#include <pmc/profile_format.hpp>
#include <pmc/profile_reader.hpp>

#include "profile_cli.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pmc_tool::runs {

/// One interval of one run: where it is, its name and label path from its thread's outermost scope, its values.
struct Interval {
    std::uint32_t thread = 0;  ///< the profiler's thread number (registration order: may differ between runs)
    cli::ThreadKey thread_key; ///< its thread's name and place among equal names: what matches it across runs
    std::size_t ordinal = 0;   ///< its place among its thread's intervals, in the order they ended (postorder)
    std::string label;         ///< label text
    std::string name;          ///< label(argument), or the label when it has no argument
    std::uint32_t depth = 0;
    std::string path;          ///< the labels of its enclosing scopes and its own name, joined by " / "
    bool nested_in_itself = false; ///< inside a call of its own label on its thread: its total is in that call's
    std::uint64_t total[pmc::profile_format::max_counters] = {}; ///< inclusive value per counter
    std::int64_t self[pmc::profile_format::max_counters] = {};   ///< total minus its children's totals
};

/// Instant events (cache hits) per "label(argument)", and integer events' count and sum per label.
struct EventSums {
    std::map<std::string, std::uint64_t> instants;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> integers; ///< count, sum
};

/// One profile file: its header, threads and problems (no records), its intervals and events as the nesting walker
/// (pmc/profile_reader.hpp) reports them, and the index of the chosen counter.
struct Run {
    std::string file;
    pmc::Profile profile;
    std::vector<Interval> intervals; ///< by thread, then in the order they ended
    EventSums events;
    std::map<std::uint32_t, std::uint64_t> records; ///< per thread: whole records read
    cli::OpenScopes open; ///< scopes whose enclosing scopes are not in the file (a killed program's)
    std::size_t counter = 0;

    /// Not whole: part of the file lost, or scopes still open when the program stopped.
    bool cut() const { return !profile.problems.empty() || open.any() || cli::ended_inside_scopes(profile); }
};

inline std::string name_of(const pmc::Profile& p, std::uint32_t label, std::uint32_t arg) {
    return arg ? p.string(label) + "(" + p.string(arg) + ")" : p.string(label);
}

/// One label's sums in one run.
struct LabelSums {
    std::uint64_t calls = 0;
    std::int64_t self = 0;
    std::uint64_t total = 0;     ///< its outermost calls' inclusive values (recursion counted once)
    std::uint64_t recursive = 0; ///< calls inside a call of their own label (in that call's total already)
    bool overflow = false;       ///< self or total could not be summed: the file's values are corrupt
};

/// Said in diff's and aggregate's output: how a label's total treats recursion.
inline const char* const total_rule = "a label's total is the inclusive value of its outermost calls: a call inside a "
                                      "call of the same label on its thread is counted once, in the outermost";

inline std::map<std::string, LabelSums> label_sums(const Run& r) {
    std::map<std::string, LabelSums> out;
    for (const auto& iv : r.intervals) {
        auto& s = out[iv.label];
        ++s.calls;
        // Checked: a sum that cannot be made is reported (exit status 2), never a wrapped number.
        if (!cli::checked_add(s.self, iv.self[r.counter])) s.overflow = true;
        if (iv.nested_in_itself) ++s.recursive;
        else if (!cli::checked_add(s.total, iv.total[r.counter])) s.overflow = true;
    }
    return out;
}

/// Reads one file through the streaming reader and walks its nesting (the file is closed again at the end, so that
/// any number of files can be given). Fails when the file cannot be opened, its header read, or it changed while
/// being read.
inline std::optional<std::string> load(const std::string& file, Run& out) {
    namespace pf = pmc::profile_format;
    auto reader = pmc::ProfileReader::open(file);
    if (!reader) return reader.failure().message;
    out.file = file;
    out.profile = reader->profile();
    const pmc::Profile& p = out.profile;
    const std::size_t nc = p.counters.size();
    for (const auto& t : p.threads) out.records[t.index] = reader->span(t.index).records;
    const std::map<std::uint32_t, cli::ThreadKey> keys = cli::thread_keys(p);
    auto failure = reader->walk(
        [&](const pmc::NestedInterval& s) {
            Interval iv;
            iv.thread = s.thread;
            auto key = keys.find(s.thread);
            iv.thread_key = key != keys.end() ? key->second : cli::ThreadKey{fmt::format("(thread {})", s.thread)};
            iv.ordinal = static_cast<std::size_t>(s.ordinal); // the record's; renumbered below
            iv.label = p.string(s.label);
            iv.name = name_of(p, s.label, s.arg);
            iv.depth = s.depth;
            iv.path = s.path_complete ? "" : "(parent lost) / ";
            const auto& labels = s.path();
            for (std::size_t i = 0; i + 1 < labels.size(); ++i) {
                iv.path += p.string(labels[i]) + " / ";
                iv.nested_in_itself = iv.nested_in_itself || labels[i] == s.label;
            }
            out.open.note(s);
            iv.path += iv.name;
            for (std::size_t c = 0; c < nc; ++c) {
                iv.total[c] = s.total(c);
                iv.self[c] = s.self(c);
            }
            out.intervals.push_back(std::move(iv));
        },
        [&](const pmc::NestedMark& m) {
            if (m.own_work) return; // the profiler's, not the program's (its time is in the intervals around it)
            if (m.kind == pf::RecordKind::instant) ++out.events.instants[name_of(p, m.label, m.arg)];
            else {
                auto& [count, sum] = out.events.integers[p.string(m.label)];
                ++count;
                sum += m.integer;
            }
        });
    if (failure) return failure->message;
    // Checked arithmetic: sums the tools will make (label_sums, integer sums) that cannot be made are a problem of
    // the file (exit status 2), never a wrapped number.
    for (const auto& [label, sums] : label_sums(out))
        if (sums.overflow) {
            out.profile.problems.push_back("label '" + label + "': " + cli::overflow_text("its values are"));
            break;
        }
    // The walker reports each thread from its last record back: put them in the order they ended, numbered among
    // the thread's intervals only (so that instant events do not shift them). Threads in the order of their names
    // (then their place among equal names), not of their numbers: the numbers follow registration order, which
    // changes from run to run, and runs are compared thread by thread in this order.
    std::sort(out.intervals.begin(), out.intervals.end(), [](const Interval& a, const Interval& b) {
        return !(a.thread_key == b.thread_key) ? a.thread_key < b.thread_key : a.ordinal < b.ordinal;
    });
    for (std::size_t i = 0, n = 0; i < out.intervals.size(); ++i, ++n) {
        if (i > 0 && out.intervals[i].thread != out.intervals[i - 1].thread) n = 0;
        out.intervals[i].ordinal = n;
    }
    return std::nullopt;
}

/// Reads every file (see load); the first failure ends it, with its message.
inline std::optional<std::string> load(const std::vector<std::string>& files, std::vector<Run>& out) {
    for (const auto& f : files) {
        out.emplace_back();
        if (auto failure = load(f, out.back())) return failure;
    }
    return std::nullopt;
}

/// Chooses counter `name` in every run (empty: the first run's primary counter). Fails, saying which file lacks it
/// and what each has, when it is not in all of them or its unit differs.
inline std::optional<std::string> choose_counter(std::vector<Run>& runs, std::string name) {
    if (runs.empty()) return std::string("no profiles");
    if (name.empty()) name = runs.front().profile.counters.front().name;
    std::string unit;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        Run& r = runs[i];
        const auto& ks = r.profile.counters;
        // A name without modifiers finds the one counter recorded with some (cli::match_counter), in each file.
        const cli::CounterMatch m = cli::match_counter(ks, name);
        if (!m.index) {
            if (!m.candidates.empty()) return cli::no_counter_text(ks, r.file, name, m);
            std::string names;
            for (const auto& k : ks) names += (names.empty() ? "" : ", ") + k.name;
            return fmt::format("'{}' recorded no counter '{}' (it has: {}); choose one every file has with --counter "
                               "NAME",
                               r.file, name, names);
        }
        const pmc::ProfileCounter& k = ks[*m.index];
        if (i == 0) unit = k.unit;
        else if (!unit.empty() && k.unit != unit)
            return fmt::format("counter '{}' is in {} in '{}' but in {} in '{}': the values cannot be compared", name,
                               k.unit, r.file, unit, runs.front().file);
        r.counter = *m.index;
    }
    return std::nullopt;
}

/// The model behind counter `k` as its note records it (pmc emulate --cache: "Cachegrind's cache model (I1 ..., D1
/// ..., [L2 ...,] LL ...[, strict inclusion]; LRU, write-allocate)"; --branches: "Cachegrind's branch predictor
/// (...)"), or "" for a counter no model makes.
inline std::string model_of(const pmc::ProfileCounter& k) {
    if (k.read_path != "emulator" || !pmc::is_modelled_event_name(k.name)) return "";
    // A group's note names every member's model: take the one this event's kind comes from.
    const char* start = pmc::is_modelled_branch_event_name(k.name) ? "Cachegrind's branch predictor ("
                                                                    : "Cachegrind's cache model (";
    const std::size_t at = k.note.find(start);
    if (at == std::string::npos) return "";
    const std::size_t end = k.note.find(')', at);
    return k.note.substr(at, end == std::string::npos ? std::string::npos : end + 1 - at);
}

/// Two runs whose chosen counter cannot be compared: recorded under different emulators, emulated CPU models, or
/// (for a modelled counter) model configurations. `what` says which; `first` and `other` describe each run.
struct MachineMismatch {
    const Run* first = nullptr;
    const Run* other = nullptr;
    std::string what, first_text, other_text;
};

/// The first run whose emulator, emulated CPU model or (for the chosen counter) model differs from the first run's.
/// QEMU 7.2 and 10 counted 18 of 38 labels of one program differently; a D1 of 16 KiB misses where one of 32 KiB
/// hits: either difference would be taken for the program's.
inline std::optional<MachineMismatch> machine_mismatch(const std::vector<Run>& runs) {
    if (runs.empty()) return std::nullopt;
    const Run& first = runs.front();
    auto machine = [](const Run& x) {
        return x.profile.emulator.empty() ? "not emulated: " + x.profile.cpu : x.profile.emulator + "; " + x.profile.cpu;
    };
    auto model = [](const Run& x) {
        const std::string m = model_of(x.profile.counters[x.counter]);
        return m.empty() ? std::string("no model recorded") : m;
    };
    for (const Run& r : runs) {
        if (r.profile.emulator != first.profile.emulator ||
            (!r.profile.emulator.empty() && r.profile.cpu != first.profile.cpu))
            return MachineMismatch{&first, &r, "emulators or emulated CPUs", machine(first), machine(r)};
        if (model(r) != model(first))
            return MachineMismatch{&first, &r, "model configurations (" + first.profile.counters[first.counter].name + ")",
                                   model(first), model(r)};
    }
    return std::nullopt;
}

/// How a tool that compares runs words its refusal of runs from different machines (machine_mismatch).
struct MismatchWording {
    const char* tool;         ///< "pmc diff"
    const char* verdict;      ///< what it says instead of a result: "cannot judge"
    const char* items;        ///< what it read: "profiles"
    const char* consequence;  ///< why a comparison would mislead
    const char* record;       ///< which runs to record alike: "both sides"
    const char* emulate_note; ///< said after pmc emulate's options ("" or "; ...")
    const char* verb;         ///< what --any-emulator does anyway: "compare"
};

/// pmc diff's and pmc aggregate's one rule for runs from different emulators, CPU models or model configurations:
/// says which two differ; refuses (true: the caller exits) unless `any_emulator`, which turns it into a warning.
inline bool refuse_machine_mismatch(const std::vector<Run>& runs, const MismatchWording& w, bool any_emulator) {
    const auto m = machine_mismatch(runs);
    if (!m) return false;
    fmt::print(stderr, "{}: {}: the {} come from different {}:\n  {}: {}\n  {}: {}\n", w.tool,
               any_emulator ? "warning" : w.verdict, w.items, m->what, m->first->file, m->first_text, m->other->file,
               m->other_text);
    if (any_emulator) return false;
    fmt::print(stderr, "{} Record {} under one emulator and one CPU model (pmc emulate --qemu PATH --cpu MODEL{}) with "
                       "the same model options (--cache, --I1, --D1, --L2, --LL, --inclusion, --branches), or {} anyway "
                       "with --any-emulator.\n",
               w.consequence, w.record, w.emulate_note, w.verb);
    return true;
}

/// Whether a run's counter values are exact counts, and why (or why not), in words.
struct Exactness {
    bool exact = false;
    std::string why;
};

/// pmc::counter_exactness (pmc/profile_reader.hpp), the rule every profile tool uses, over a run's record counts.
inline Exactness exactness(const pmc::Profile& p, std::size_t c, const std::map<std::uint32_t, std::uint64_t>& records) {
    const pmc::CounterExactness e = pmc::counter_exactness(p, c, [&](std::uint32_t index) -> std::uint64_t {
        auto it = records.find(index);
        return it == records.end() ? 0 : it->second;
    });
    return {e.exact, e.why};
}

/// Exact only when every run's counter is; otherwise the first reason, with its file.
inline Exactness exactness(const std::vector<Run>& runs) {
    for (const auto& r : runs) {
        Exactness e = exactness(r.profile, r.counter, r.records);
        if (!e.exact) return {false, runs.size() > 1 ? e.why + " (in '" + r.file + "')" : e.why};
    }
    return exactness(runs.front().profile, runs.front().counter, runs.front().records);
}

using cli::show;

/// The unit as a reader says it: "ns", or the event's name for a count.
inline std::string unit_words(const pmc::ProfileCounter& k) { return k.unit == "events" ? k.name : k.unit; }

/// min / median / max of a run's values (the median: cli::median, the one rule of every tool).
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
    s.median = cli::median(v);
    return s;
}

inline std::string percent_text(double p) {
    return std::isinf(p) ? std::string("inf") : fmt::format("{:.1f}%", p);
}

/// The damage in each run, on stderr (the first few problems of each); returns whether there was any.
inline bool report_damage(const char* tool, const std::vector<Run>& runs) {
    std::fflush(stdout); // what was printed first: in a log of both streams (2>&1) the two do not interleave
    bool any = false;
    for (const auto& r : runs) {
        if (r.open.any() || (cli::ended_inside_scopes(r.profile) && r.profile.problems.empty())) {
            any = true;
            fmt::print(stderr, "pmc {}: {}{}\n{}{}", tool, cli::not_whole_text(r.file, r.profile),
                       r.open.any() ? "; the scopes inside them count as outermost:" : "; open:",
                       r.open.text(r.profile), r.open.any() ? "" : cli::open_at_end_text(r.profile));
        }
        if (r.profile.problems.empty()) continue;
        any = true;
        fmt::print(stderr, "pmc {}: {}; what was lost:\n", tool, cli::incomplete_text(r.file, r.profile));
        for (std::size_t i = 0; i < r.profile.problems.size() && i < 5; ++i)
            fmt::print(stderr, "  {}\n", r.profile.problems[i]);
        if (r.profile.problems.size() > 5)
            fmt::print(stderr, "  ... and {} more (pmc summarize --json '{}' lists them all)\n",
                       r.profile.problems.size() - 5, r.file);
    }
    return any;
}

} // namespace pmc_tool::runs
