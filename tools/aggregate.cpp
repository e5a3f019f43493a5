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

const char* const aggregate_help = R"(usage: pmc aggregate [--counter NAME] [--top N] [--json] FILE FILE...

Several profiles of the same program (PMC_PROFILE=FILE, one run each), lined up: per label and per
interval, the min / median / max across the runs and the spread (max - min, and as a % of the
median), the N noisiest intervals (largest spread) and the N largest (largest median), in the
counter's own unit. The output says whether the counter is exact (a count read whole, never
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
  --top N         How many noisiest and largest intervals to list (default 10; 0: none).
  --json          One JSON object instead of tables.
  -h, --help      Show this help.

Exit status: 0 every file was read whole; 2 read, but part of a file was lost or corrupt, or its
program stopped with scopes open (see the messages); 1 a file could not be read at all, the command
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

} // namespace

int cmd_aggregate(const std::vector<std::string>& arguments) {
    pmc_cli::CommandLine cl("pmc aggregate", aggregate_help);
    std::vector<std::string> files;
    std::string counter_name, top_text;
    bool json = false;
    cl.flag("--json", json);
    cl.option("--counter", counter_name, "a counter name");
    pmc_cli::Option top_option = cl.option("--top", top_text, "a whole number");
    cl.option("FILE", files, "a profile");
    if (auto status = cl.parse(arguments)) return *status;
    const auto top_given = pmc_cli::whole_number_option(top_option, top_text, 10, SIZE_MAX);
    if (!top_given) return cl.usage_error("--top needs a whole number");
    const std::size_t top = static_cast<std::size_t>(*top_given);
    if (files.size() < 2) return cl.usage_error("give two or more profiles, one per run (pmc aggregate A B C)");

    std::vector<Run> rs;
    if (auto failure = runs::load(files, rs)) {
        fmt::print(stderr, "pmc aggregate: {}\n", *failure);
        return 1;
    }
    if (auto failure = runs::choose_counter(rs, counter_name)) {
        fmt::print(stderr, "pmc aggregate: {}\n", *failure);
        return 1;
    }
    const pmc::ProfileCounter& counter = rs[0].profile.counters[rs[0].counter];
    const std::string& unit = counter.unit;
    const runs::Exactness exact = runs::exactness(rs);

    // Line the intervals up: by position per thread when every thread's sequence is the same, else by label path.
    const std::vector<Divergence> diverged = divergences(rs);
    const bool by_position = diverged.empty();
    std::vector<Slot> slots;
    {
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
    }
    std::vector<const Slot*> everywhere; // in every run
    std::size_t partial = 0, identical = 0;
    for (auto& s : slots) {
        s.s = runs::spread(s.totals);
        if (s.totals.size() != rs.size()) {
            ++partial;
            continue;
        }
        everywhere.push_back(&s);
        if (s.s.range() == 0) ++identical;
    }
    auto largest = everywhere, noisiest = everywhere;
    auto first_n = [&](std::vector<const Slot*>& v, auto better) {
        const std::size_t n = std::min(top, v.size());
        std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), v.end(), better);
        v.resize(n);
    };
    first_n(largest, [](const Slot* a, const Slot* b) {
        return a->s.median != b->s.median ? a->s.median > b->s.median : a->path < b->path;
    });
    first_n(noisiest, [](const Slot* a, const Slot* b) {
        return a->s.range() != b->s.range() ? a->s.range() > b->s.range() : a->path < b->path;
    });

    // Per label: each run's sums, then their spread across the runs.
    std::vector<LabelRow> labels;
    {
        std::map<std::string, std::vector<runs::LabelSums>> per_label;
        for (std::size_t r = 0; r < rs.size(); ++r)
            for (auto& [label, sums] : runs::label_sums(rs[r])) per_label[label].push_back(sums);
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
    }
    std::map<std::string, std::vector<double>> instants;
    for (std::size_t r = 0; r < rs.size(); ++r)
        for (const auto& [name, count] : rs[r].events.instants) {
            auto& v = instants[name];
            v.resize(rs.size(), 0.0); // a run without this event had none
            v[r] = static_cast<double>(count);
        }

    const std::string rule =
        by_position ? "by position: every thread recorded the same sequence of intervals in every run"
                    : "by label path (labels with their arguments, from the outermost scope) and occurrence, threads "
                      "merged: the runs' sequences differ";
    const int status = std::any_of(rs.begin(), rs.end(), [](const Run& r) { return r.cut(); }) ? 2 : 0;

    if (json) {
        pmc::JsonWriter j;
        j.begin_object().key("files").begin_array();
        for (const auto& r : rs) j.value(r.file);
        j.end_array().field("counter", counter.name).field("unit", unit).field("exact", exact.exact);
        j.field("exact_reason", exact.why).field("alignment", by_position ? "position" : "label path");
        j.field("total_rule", runs::total_rule);
        j.key("divergences").begin_array();
        for (const auto& d : diverged)
            j.begin_object().field("thread", d.thread).field("thread_name", d.thread_name).field("file", rs[d.run].file).field("interval", d.at)
                .field("this_run", d.here).field("first_run", d.first).end_object();
        j.end_array().field("intervals_aligned", everywhere.size()).field("intervals_in_some_runs_only", partial);
        j.field("intervals_identical", identical);
        auto spread_json = [&](const char* key, const Spread& s) {
            j.key(key).begin_object().field("min", s.min).field("median", s.median).field("max", s.max);
            j.field("spread", s.range());
            if (std::isinf(s.percent())) j.key("spread_percent").null(); // a spread around a median of 0
            else j.field("spread_percent", s.percent());
            j.end_object();
        };
        j.key("labels").begin_array();
        for (const auto& l : labels) {
            j.begin_object().field("label", l.label).field("runs", l.runs);
            spread_json("calls", l.calls);
            spread_json("self", l.self);
            spread_json("total", l.total);
            j.end_object();
        }
        j.end_array();
        auto slots_json = [&](const char* key, const std::vector<const Slot*>& v) {
            j.key(key).begin_array();
            for (const Slot* s : v) {
                j.begin_object().field("thread", s->thread).field("thread_name", s->thread_name).field("interval", s->ordinal).field("path", s->path);
                spread_json("total", s->s);
                j.end_object();
            }
            j.end_array();
        };
        slots_json("largest", largest);
        slots_json("noisiest", noisiest);
        j.key("instants").begin_array();
        for (const auto& [name, counts] : instants) {
            j.begin_object().field("event", name);
            spread_json("count", runs::spread(counts));
            j.end_object();
        }
        j.end_array().key("problems").begin_array();
        for (const auto& r : rs)
            for (const auto& p : r.profile.problems) j.begin_object().field("file", r.file).field("problem", p).end_object();
        j.end_array().end_object();
        fmt::print("{}\n", j.str());
        runs::report_damage("aggregate", rs);
        return status;
    }

    const std::string u = runs::unit_words(counter);
    auto v = [&](double x) { return runs::show(x, unit); };
    fmt::print("aggregate of {} runs:", rs.size());
    for (const auto& r : rs) fmt::print(" {}", r.file);
    fmt::print("\ncounter: {} ({}): {}{}\n", counter.name, counter.unit == "events" ? "a count" : counter.unit,
               exact.exact ? "exact: " : "not exact: ", exact.why);
    for (const auto& k : rs[0].profile.counters)
        if (k.name != counter.name) {
            const auto e = runs::exactness(rs[0].profile, static_cast<std::size_t>(&k - rs[0].profile.counters.data()),
                                           rs[0].records);
            fmt::print("also recorded: {} ({}{}; --counter {})\n", k.name, e.exact ? "exact" : "not exact: ",
                       e.exact ? "" : e.why, k.name);
        }
    fmt::print("alignment: {}\n", rule);
    for (const auto& d : diverged)
        fmt::print("  thread {} ({}): '{}' first differs from '{}' at the thread's interval {} (in the order they ended): "
                   "{} where the first run has {}\n",
                   d.thread_name, d.thread, rs[d.run].file, rs[0].file, d.at, d.here, d.first);
    fmt::print("intervals in every run: {}; identical in every run: {} ({}){}\n", everywhere.size(), identical,
               everywhere.empty() ? "-" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(identical) /
                                                                   static_cast<double>(everywhere.size())),
               partial ? fmt::format("; in some runs only (not aggregated): {}", partial) : "");
    if (exact.exact)
        fmt::print("{}\n", identical == everywhere.size()
                               ? "every interval has the same value in every run: deterministic for this counter"
                               : "an exact counter whose values still differ between runs: the runs did not do the "
                                 "same work in every interval (thread scheduling, memory reuse, ASLR, ...)");

    std::size_t width = 5;
    for (const auto& l : labels) width = std::max(width, l.label.size());
    width = std::min<std::size_t>(width, 40);
    std::vector<std::string> names; // every label the tables show: none cut into another's text
    for (const auto& l : labels) names.push_back(l.label);
    for (const auto& e : instants) names.push_back(e.first);
    const cli::LabelColumn column(names, width);
    fmt::print("totals: {}; the median of an even number of runs: the mean of the middle two\n", runs::total_rule);
    fmt::print("\nper label, across runs ({}):\n", u);
    fmt::print("{:<{}}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {:>11}  {:>7}\n", "label", width, "calls",
               "self min", "self median", "self max", "self spread", "spread%", "total med.", "spread%");
    for (const auto& l : labels) {
        const std::string calls = l.calls.range() == 0 ? fmt::format("{:.0f}", l.calls.median)
                                                        : fmt::format("{:.0f}-{:.0f}", l.calls.min, l.calls.max);
        fmt::print("{:<{}}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {:>11}  {:>7}{}\n", column(l.label), width, calls,
                   v(l.self.min), v(l.self.median), v(l.self.max), v(l.self.range()), runs::percent_text(l.self.percent()),
                   v(l.total.median), runs::percent_text(l.total.percent()),
                   l.runs == rs.size() ? "" : fmt::format("  (in {} of {} runs)", l.runs, rs.size()));
    }
    auto list = [&](const char* title, const std::vector<const Slot*>& v_) {
        if (v_.empty()) return;
        fmt::print("\n{} (inclusive value; {}):\n", title, u);
        std::size_t thread_width = 6; // the thread's name: what matched it across runs
        for (const Slot* s : v_) thread_width = std::max(thread_width, s->thread_name.size());
        fmt::print("{:>{}}  {:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {}\n", "thread", thread_width, "interval", "min",
                   "median", "max", "spread", "spread%", "path");
        for (const Slot* s : v_)
            fmt::print("{:>{}}  {:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>7}  {}\n", s->thread_name, thread_width, s->ordinal, v(s->s.min),
                       v(s->s.median), v(s->s.max), v(s->s.range()), runs::percent_text(s->s.percent()), s->path);
    };
    list(fmt::format("the {} noisiest intervals (largest max - min)", noisiest.size()).c_str(), noisiest);
    list(fmt::format("the {} largest intervals (largest median)", largest.size()).c_str(), largest);
    if (!instants.empty()) {
        fmt::print("\ninstant events per run:\n");
        for (const auto& [name, counts] : instants) {
            const Spread s = runs::spread(counts);
            fmt::print("  {:<{}}  min {:.0f}  median {:g}  max {:.0f}\n", column(name), width, s.min, s.median, s.max);
        }
    }
    runs::report_damage("aggregate", rs);
    return status;
}

} // namespace pmc_tool
