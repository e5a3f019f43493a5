// SPDX-License-Identifier: MIT
// pmc aggregate FILE...: several runs of one program, lined up interval by interval, to show how much each interval
// and each label varies from run to run (the noise), in the counter's own unit.
//
// Alignment: threads are matched across runs by name (then by place among threads of the same name), never by the
// profiler's thread number, which follows registration order and changes from run to run. When every thread recorded
// the same sequence of intervals (label, argument, depth) in every run, the k-th interval of thread t is matched
// across runs. Otherwise (threads took work in another order, a cache hit
// differed) intervals are matched by their label path from the outermost scope and their occurrence, threads
// merged, and the output says so and where each thread's runs first diverged.
#include <pmc/report.hpp>

#include "command_line.hpp"
#include "commands.hpp"
#include "profile_runs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace pmc_tool {

const char* const aggregate_help = R"(usage: pmc aggregate [--counter NAME] [--top N] [--json] [--any-emulator] FILE FILE...

Several profiles of the same program (PMC_PROFILE=FILE, one run each), lined up: per label and per
interval, the min / median / max across the runs and the spread (max - min, and as a % of the
median), the N noisiest intervals (largest spread; an interval with no spread is not listed, and
"no spread" is said when none has any) and the N largest (largest median), in the counter's own unit. The output says whether the counter is exact (a count read whole, never
multiplexed: a deterministic program then gives the same value every run) or not (a time).

Threads are matched across runs by name (Profiler::thread_name, else the kernel's), then by their
place among threads of the same name ("worker#2": the second by thread number), never by the
profiler's thread number alone: it follows the order threads registered in, which changes from run
to run when they start at once. Tables show the thread's name (and number in the first run).

Alignment: where every thread recorded the same sequence of intervals in every run, the k-th
interval of each thread is matched across the runs. Otherwise the intervals are matched by their
label path from the outermost scope (labels with their arguments) and their occurrence, threads
merged; the output says so and where each thread's runs first diverged. Intervals that not every
run has are counted, not aggregated.

A label's total is the inclusive value of its outermost calls: a call inside a call of the same
label on its thread (recursion) is counted once. A median of an even number of runs is the mean of
the two middle values (the rule of every pmc profile tool).

A truncated or corrupt file is used up to its last whole record; what was lost is said on stderr
and the exit status is 2. So it is for a profile whose program stopped with scopes open (killed):
the scopes inside them count as outermost, and what was open is said.

Options:
  --counter NAME  Aggregate this recorded counter instead of the primary (the first file's first).
                  A name without modifiers finds the one recorded with them (cycles: cycles:u).
  --top N         How many noisiest and largest intervals to list (default 10; 0: none).
  --json          One JSON object instead of tables.
  --any-emulator  Aggregate runs recorded under different emulators (pmc emulate: QEMU version,
                  plugin API), emulated CPU models or, for a modelled counter, model
                  configurations (cache geometry, L2, inclusion; branch predictor), with a warning.
                  Without it such runs are refused (exit 4), both named: their spread would be
                  the emulators' or the models', not the program's noise (as in pmc diff).
  -h, --help      Show this help.

Exit status: 0 every file was read whole; 2 read, but part of a file was lost or corrupt, or its
program stopped with scopes open (see the messages); 4 the runs come from different emulators, CPU
models or model configurations (--any-emulator); 1 a file could not be read at all, the command
line was wrong, or the output could not be written.
)";

namespace {

using runs::Interval;
using runs::Run;
using runs::Spread;

/// One interval matched across runs.
struct Slot {
    std::uint32_t thread = 0; ///< the thread's number in the first run seen (threads match by name across runs)
    std::string thread_name;  ///< its thread's key (cli::ThreadKey::text)
    std::size_t ordinal = 0;  ///< its place in its thread (first run seen)
    std::string path;
    std::vector<double> totals; ///< one per run that has it
    Spread s;
};

/// Where one thread's runs first diverge from the first run's.
struct Divergence {
    std::uint32_t thread = 0;  ///< the thread's number in the first run (in this run when the first lacks it)
    std::string thread_name;   ///< its key (cli::ThreadKey::text): what matched it across runs
    std::size_t run = 0;   ///< index into runs
    std::size_t at = 0;    ///< interval ordinal (postorder) where they differ
    std::string here, first; ///< what this run and the first run have there ("(none)": the thread ended)
};

std::string step_text(const Interval& iv) { return fmt::format("{} at depth {}", iv.name, iv.depth); }

/// Per thread, the first place where a run's sequence of intervals differs from the first run's; empty: same.
std::vector<Divergence> divergences(const std::vector<Run>& rs) {
    std::vector<Divergence> out;
    // thread (by name, not number) -> run -> its intervals
    std::map<cli::ThreadKey, std::vector<std::vector<const Interval*>>> by_thread;
    for (std::size_t r = 0; r < rs.size(); ++r)
        for (const auto& iv : rs[r].intervals) {
            auto& runs_of = by_thread[iv.thread_key];
            runs_of.resize(rs.size());
            runs_of[r].push_back(&iv);
        }
    for (auto& [key, per_run] : by_thread) {
        per_run.resize(rs.size());
        const auto& a = per_run[0];
        std::uint32_t number = 0;
        for (const auto& intervals : per_run)
            if (!intervals.empty()) {
                number = intervals.front()->thread;
                break;
            }
        for (std::size_t r = 1; r < rs.size(); ++r) {
            const auto& b = per_run[r];
            std::size_t i = 0;
            while (i < a.size() && i < b.size() && a[i]->name == b[i]->name && a[i]->depth == b[i]->depth) ++i;
            if (i == a.size() && i == b.size()) continue;
            out.push_back(Divergence{number, key.text(), r, i, i < b.size() ? step_text(*b[i]) : "(none: the thread ends)",
                                     i < a.size() ? step_text(*a[i]) : "(none: the thread ends)"});
            break; // the first diverging run is enough per thread
        }
    }
    return out;
}

struct LabelRow {
    std::string label;
    Spread calls, self, total;
    std::size_t runs = 0; ///< runs that have this label
};

// ---- parse ----------------------------------------------------------------------------------------------------------

struct AggregateOptions {
    std::vector<std::string> files;
    std::string counter_name; ///< --counter ("": the first file's primary)
    std::size_t top = 10;
    bool json = false, any_emulator = false;
};

/// The command line into `o`; the status to exit with now (after --help or a usage error), or nothing.
std::optional<int> parse_aggregate_options(const std::vector<std::string>& arguments, AggregateOptions& o) {
    pmc_cli::CommandLine cl("pmc aggregate", aggregate_help);
    std::string top_text;
    cl.flag("--json", o.json);
    cl.option("--counter", o.counter_name, "a counter name");
    cl.flag("--any-emulator", o.any_emulator);
    pmc_cli::Option top_option = cl.option("--top", top_text, "a whole number");
    cl.option("FILE", o.files, "a profile");
    if (auto status = cl.parse(arguments)) return *status;
    const auto top = pmc_cli::whole_number_option(top_option, top_text, 10, SIZE_MAX);
    if (!top) return cl.usage_error("--top needs a whole number");
    o.top = static_cast<std::size_t>(*top);
    if (o.files.size() < 2) return cl.usage_error("give two or more profiles, one per run (pmc aggregate A B C)");
    return std::nullopt;
}

// ---- compute --------------------------------------------------------------------------------------------------------

/// Everything the report shows, computed from the runs. Not copied: the lists point into `slots`.
struct Aggregate {
    runs::Exactness exact;
    std::vector<Divergence> diverged;
    bool by_position = false;
    std::vector<Slot> slots;
    std::vector<const Slot*> everywhere; ///< the slots every run has
    std::size_t partial = 0;             ///< slots only some runs have (not aggregated)
    std::size_t identical = 0;           ///< of `everywhere`, those with the same value in every run
    std::vector<const Slot*> largest, noisiest; ///< the top N of `everywhere` by median, by spread
    std::vector<LabelRow> labels;        ///< by self median, largest first
    std::map<std::string, std::vector<double>> instants; ///< each instant event's count per run
    int status = 0;                      ///< 2 where a file was cut or corrupt
    Aggregate() = default;
    Aggregate(const Aggregate&) = delete;
    Aggregate& operator=(const Aggregate&) = delete;
};

/// Lines the intervals up: by position per thread when every thread's sequence is the same (`by_position`), else by
/// label path and occurrence.
std::vector<Slot> line_up_intervals(const std::vector<Run>& rs, bool by_position) {
    std::vector<Slot> slots;
    std::unordered_map<std::string, std::size_t> slot_of;
    for (std::size_t r = 0; r < rs.size(); ++r) {
        std::unordered_map<std::string, std::size_t> seen; // path -> occurrences so far in this run
        for (const auto& iv : rs[r].intervals) {
            // By position: the thread's name and the interval's place (a thread's number may differ between runs).
            const std::string key = by_position ? fmt::format("{}\n{}", iv.thread_key.text(), iv.ordinal)
                                                : fmt::format("{}#{}", iv.path, seen[iv.path]++);
            auto [it, fresh] = slot_of.emplace(key, slots.size());
            if (fresh) slots.push_back(Slot{iv.thread, iv.thread_key.text(), iv.ordinal, iv.path, {}, {}});
            slots[it->second].totals.push_back(static_cast<double>(iv.total[rs[r].counter]));
        }
    }
    return slots;
}

/// Each slot's spread; which are in every run and identical there; the `top` largest and noisiest of them.
void rank_slots(Aggregate& a, std::size_t runs_count, std::size_t top) {
    for (auto& s : a.slots) {
        s.s = runs::spread(s.totals);
        if (s.totals.size() != runs_count) {
            ++a.partial;
            continue;
        }
        a.everywhere.push_back(&s);
        if (s.s.range() == 0) ++a.identical;
    }
    a.largest = a.noisiest = a.everywhere;
    auto first_n = [&](std::vector<const Slot*>& v, auto better) {
        const std::size_t n = std::min(top, v.size());
        std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), v.end(), better);
        v.resize(n);
    };
    first_n(a.largest, [](const Slot* x, const Slot* y) {
        return x->s.median != y->s.median ? x->s.median > y->s.median : x->path < y->path;
    });
    // An interval with the same value in every run is not noisy: listed as noisiest it would only fill the table.
    a.noisiest.erase(std::remove_if(a.noisiest.begin(), a.noisiest.end(), [](const Slot* x) { return x->s.range() == 0; }),
                     a.noisiest.end());
    first_n(a.noisiest, [](const Slot* x, const Slot* y) {
        return x->s.range() != y->s.range() ? x->s.range() > y->s.range() : x->path < y->path;
    });
}

/// Per label: each run's sums, then their spread across the runs; by self median, largest first.
std::vector<LabelRow> aggregate_label_rows(const std::vector<Run>& rs) {
    std::map<std::string, std::vector<runs::LabelSums>> per_label;
    for (std::size_t r = 0; r < rs.size(); ++r)
        for (auto& [label, sums] : runs::label_sums(rs[r])) per_label[label].push_back(sums);
    std::vector<LabelRow> labels;
    for (auto& [label, sums] : per_label) {
        std::vector<double> calls, self, total;
        for (const auto& s : sums) {
            calls.push_back(static_cast<double>(s.calls));
            self.push_back(static_cast<double>(s.self));
            total.push_back(static_cast<double>(s.total));
        }
        labels.push_back(LabelRow{label, runs::spread(calls), runs::spread(self), runs::spread(total), sums.size()});
    }
    std::sort(labels.begin(), labels.end(), [](const LabelRow& a, const LabelRow& b) {
        return a.self.median != b.self.median ? a.self.median > b.self.median : a.label < b.label;
    });
    return labels;
}

/// Each instant event's count in each run (0 in a run without it).
std::map<std::string, std::vector<double>> instant_counts_per_run(const std::vector<Run>& rs) {
    std::map<std::string, std::vector<double>> instants;
    for (std::size_t r = 0; r < rs.size(); ++r)
        for (const auto& [name, count] : rs[r].events.instants) {
            auto& v = instants[name];
            v.resize(rs.size(), 0.0);
            v[r] = static_cast<double>(count);
        }
    return instants;
}

void compute_aggregate(const std::vector<Run>& rs, std::size_t top, Aggregate& a) {
    a.exact = runs::exactness(rs);
    a.diverged = divergences(rs);
    a.by_position = a.diverged.empty();
    a.slots = line_up_intervals(rs, a.by_position);
    rank_slots(a, rs.size(), top);
    a.labels = aggregate_label_rows(rs);
    a.instants = instant_counts_per_run(rs);
    a.status = std::any_of(rs.begin(), rs.end(), [](const Run& r) { return r.cut(); }) ? 2 : 0;
}

// ---- render: JSON ---------------------------------------------------------------------------------------------------

void aggregate_spread_json(pmc::JsonWriter& j, const char* key, const Spread& s) {
    j.key(key).begin_object().field("min", s.min).field("median", s.median).field("max", s.max);
    j.field("spread", s.range());
    if (std::isinf(s.percent())) j.key("spread_percent").null(); // a spread around a median of 0
    else j.field("spread_percent", s.percent());
    j.end_object();
}

void aggregate_slots_json(pmc::JsonWriter& j, const char* key, const std::vector<const Slot*>& v) {
    j.key(key).begin_array();
    for (const Slot* s : v) {
        j.begin_object().field("thread", s->thread).field("thread_name", s->thread_name).field("interval", s->ordinal)
            .field("path", s->path);
        aggregate_spread_json(j, "total", s->s);
        j.end_object();
    }
    j.end_array();
}

void aggregate_labels_json(pmc::JsonWriter& j, const std::vector<LabelRow>& labels) {
    j.key("labels").begin_array();
    for (const auto& l : labels) {
        j.begin_object().field("label", l.label).field("runs", l.runs);
        aggregate_spread_json(j, "calls", l.calls);
        aggregate_spread_json(j, "self", l.self);
        aggregate_spread_json(j, "total", l.total);
        j.end_object();
    }
    j.end_array();
}

std::string aggregate_json(const std::vector<Run>& rs, const Aggregate& a) {
    const pmc::ProfileCounter& counter = rs[0].profile.counters[rs[0].counter];
    pmc::JsonWriter j;
    j.begin_object().key("files").begin_array();
    for (const auto& r : rs) j.value(r.file);
    j.end_array().field("counter", counter.name).field("unit", counter.unit).field("exact", a.exact.exact);
    j.field("exact_reason", a.exact.why).field("alignment", a.by_position ? "position" : "label path");
    j.field("total_rule", runs::total_rule);
    j.key("divergences").begin_array();
    for (const auto& d : a.diverged)
        j.begin_object().field("thread", d.thread).field("thread_name", d.thread_name).field("file", rs[d.run].file)
            .field("interval", d.at).field("this_run", d.here).field("first_run", d.first).end_object();
    j.end_array().field("intervals_aligned", a.everywhere.size()).field("intervals_in_some_runs_only", a.partial);
    j.field("intervals_identical", a.identical);
    aggregate_labels_json(j, a.labels);
    aggregate_slots_json(j, "largest", a.largest);
    aggregate_slots_json(j, "noisiest", a.noisiest);
    j.key("instants").begin_array();
    for (const auto& [name, counts] : a.instants) {
        j.begin_object().field("event", name);
        aggregate_spread_json(j, "count", runs::spread(counts));
        j.end_object();
    }
    j.end_array().key("problems").begin_array();
    for (const auto& r : rs)
        for (const auto& p : r.profile.problems) j.begin_object().field("file", r.file).field("problem", p).end_object();
    j.end_array().end_object();
    return j.str();
}

// ---- render: text ---------------------------------------------------------------------------------------------------

/// The lines above the tables: the files, the counter and whether it is exact, the alignment and its divergences.
void print_aggregate_heading(const std::vector<Run>& rs, const Aggregate& a) {
    const pmc::ProfileCounter& counter = rs[0].profile.counters[rs[0].counter];
    fmt::print("aggregate of {} runs:", rs.size());
    for (const auto& r : rs) fmt::print(" {}", r.file);
    fmt::print("\ncounter: {} ({}): {}{}\n", counter.name, counter.unit == "events" ? "a count" : counter.unit,
               a.exact.exact ? "exact: " : "not exact: ", a.exact.why);
    for (const auto& k : rs[0].profile.counters)
        if (k.name != counter.name) {
            const auto e = runs::exactness(rs[0].profile, static_cast<std::size_t>(&k - rs[0].profile.counters.data()),
                                           rs[0].records);
            fmt::print("also recorded: {} ({}{}; --counter {})\n", k.name, e.exact ? "exact" : "not exact: ",
                       e.exact ? "" : e.why, k.name);
        }
    fmt::print("alignment: {}\n",
               a.by_position ? "by position: every thread recorded the same sequence of intervals in every run"
                             : "by label path (labels with their arguments, from the outermost scope) and occurrence, "
                               "threads merged: the runs' sequences differ");
    for (const auto& d : a.diverged)
        fmt::print("  thread {} ({}): '{}' first differs from '{}' at the thread's interval {} (in the order they ended): "
                   "{} where the first run has {}\n",
                   d.thread_name, d.thread, rs[d.run].file, rs[0].file, d.at, d.here, d.first);
    fmt::print("intervals in every run: {}; identical in every run: {} ({}){}\n", a.everywhere.size(), a.identical,
               a.everywhere.empty() ? "-" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(a.identical) /
                                                                     static_cast<double>(a.everywhere.size())),
               a.partial ? fmt::format("; in some runs only (not aggregated): {}", a.partial) : "");
    if (a.exact.exact)
        fmt::print("{}\n", a.identical == a.everywhere.size()
                               ? "every interval has the same value in every run: deterministic for this counter"
                               : "an exact counter whose values still differ between runs: the runs did not do the "
                                 "same work in every interval (thread scheduling, memory reuse, ASLR, ...)");
}

void print_aggregate_labels(const std::vector<Run>& rs, const Aggregate& a, const cli::LabelColumn& column,
                            std::size_t width) {
    const pmc::ProfileCounter& counter = rs[0].profile.counters[rs[0].counter];
    auto v = [&](double x) { return runs::show(x, counter.unit); };
    fmt::print("totals: {}; the median of an even number of runs: the mean of the middle two\n", runs::total_rule);
    fmt::print("\nper label, across runs ({}):\n", runs::unit_words(counter));
    fmt::print("{:<{}}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {:>11}  {:>7}\n", "label", width, "calls",
               "self min", "self median", "self max", "self spread", "spread%", "total med.", "spread%");
    for (const auto& l : a.labels) {
        const std::string calls = l.calls.range() == 0 ? fmt::format("{:.0f}", l.calls.median)
                                                        : fmt::format("{:.0f}-{:.0f}", l.calls.min, l.calls.max);
        fmt::print("{:<{}}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {:>11}  {:>7}{}\n", column(l.label), width, calls,
                   v(l.self.min), v(l.self.median), v(l.self.max), v(l.self.range()), runs::percent_text(l.self.percent()),
                   v(l.total.median), runs::percent_text(l.total.percent()),
                   l.runs == rs.size() ? "" : fmt::format("  (in {} of {} runs)", l.runs, rs.size()));
    }
}

void print_slot_list(const std::string& title, const std::vector<const Slot*>& slots,
                     const pmc::ProfileCounter& counter) {
    if (slots.empty()) return;
    auto v = [&](double x) { return runs::show(x, counter.unit); };
    fmt::print("\n{} (inclusive value; {}):\n", title, runs::unit_words(counter));
    std::size_t thread_width = 6; // the thread's name: what matched it across runs
    for (const Slot* s : slots) thread_width = std::max(thread_width, s->thread_name.size());
    fmt::print("{:>{}}  {:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {}\n", "thread", thread_width, "interval", "min",
               "median", "max", "spread", "spread%", "path");
    for (const Slot* s : slots)
        fmt::print("{:>{}}  {:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {}\n", s->thread_name, thread_width, s->ordinal,
                   v(s->s.min), v(s->s.median), v(s->s.max), v(s->s.range()), runs::percent_text(s->s.percent()),
                   s->path);
}

void print_aggregate_text(const std::vector<Run>& rs, const Aggregate& a) {
    const pmc::ProfileCounter& counter = rs[0].profile.counters[rs[0].counter];
    print_aggregate_heading(rs, a);
    std::size_t width = 5;
    for (const auto& l : a.labels) width = std::max(width, l.label.size());
    width = std::min<std::size_t>(width, 40);
    std::vector<std::string> names; // every label the tables show: none cut into another's text
    for (const auto& l : a.labels) names.push_back(l.label);
    for (const auto& e : a.instants) names.push_back(e.first);
    const cli::LabelColumn column(names, width);
    print_aggregate_labels(rs, a, column, width);
    if (!a.everywhere.empty() && a.identical == a.everywhere.size())
        fmt::print("\nno spread: each of the {} intervals found in every run has the same value in all {} runs (no "
                   "noisiest intervals to list)\n",
                   a.everywhere.size(), rs.size());
    print_slot_list(fmt::format("the {} noisiest intervals (largest max - min)", a.noisiest.size()), a.noisiest, counter);
    print_slot_list(fmt::format("the {} largest intervals (largest median)", a.largest.size()), a.largest, counter);
    if (a.instants.empty()) return;
    fmt::print("\ninstant events per run:\n");
    for (const auto& [name, counts] : a.instants) {
        const Spread s = runs::spread(counts);
        fmt::print("  {:<{}}  min {:.0f}  median {:g}  max {:.0f}\n", column(name), width, s.min, s.median, s.max);
    }
}

} // namespace

int cmd_aggregate(const std::vector<std::string>& arguments) {
    AggregateOptions o;
    if (auto status = parse_aggregate_options(arguments, o)) return *status;
    std::vector<Run> rs;
    if (auto failure = runs::load(o.files, rs)) {
        fmt::print(stderr, "pmc aggregate: {}\n", *failure);
        return 1;
    }
    if (auto failure = runs::choose_counter(rs, o.counter_name)) {
        fmt::print(stderr, "pmc aggregate: {}\n", *failure);
        return 1;
    }
    // pmc diff's refusal: the spread would be the emulators' or models'.
    const runs::MismatchWording wording{
        "pmc aggregate", "refused", "runs", "Their spread would be the emulators' or the models', not the program's noise.",
        "every run", "", "aggregate"};
    if (runs::refuse_machine_mismatch(rs, wording, o.any_emulator)) return 4;
    Aggregate a;
    compute_aggregate(rs, o.top, a);
    if (o.json) fmt::print("{}\n", aggregate_json(rs, a));
    else print_aggregate_text(rs, a);
    runs::report_damage("aggregate", rs);
    return a.status;
}

} // namespace pmc_tool
