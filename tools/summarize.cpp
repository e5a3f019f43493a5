// SPDX-License-Identifier: MIT
// pmc summarize FILE: what a profile written by pmc::Profiler says, per label, in the counter's own unit.
//
// Self (exclusive) values come from each thread's nesting, as pmc::ProfileReader's walker rebuilds it (a scope's
// total minus its children's totals); the file is read a page at a time, never whole.
#include <pmc/profile_reader.hpp>
#include <pmc/report.hpp>

#include "command_line.hpp"
#include "commands.hpp"
#include "profile_cli.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pmc_tool {

const char* const summarize_help = R"(usage: pmc summarize [--counter NAME] [--per-thread | --thread N|NAME] [--without-overhead]
                     [--top N] [--json] FILE

Summarize a profile written by a program that embeds pmc::Profiler (PMC_PROFILE=FILE): one line
per label with its count, total (inclusive), self (exclusive), self as a % of the run, and the
min / median / max of one call's total, sorted by self. Values are in the counter's own unit:
times in ns (shown scaled), counts as counts. Instant events (count) and integer events (count,
sum, min, max) have tables of their own. The run is the sum of the outermost scopes' totals; the
self % of all labels add up to 100. A median of an even number of calls is the mean of the two
middle ones (as in pmc diff and pmc aggregate).

Recursion: a label's total is the inclusive value of its outermost calls. A call inside a call of
the same label on its thread is in that call's total already and is counted once (the column is
then headed "outer total"; --json: "total_rule", and "recursive_calls" per label).

A truncated or corrupt file is read up to its last whole record; what was lost is said on
stderr (with --json, in "problems"), and the exit status is 2. So it is when scopes were still
open when the program stopped (killed with SIGKILL, or a crash no handler could catch): the
scopes recorded inside them count as outermost (the run is what the file holds, the shares still
add up to 100 %), and what was open is said (with --json, in "open_scopes").

Options:
  --counter NAME      Summarize this recorded counter instead of the primary (the first one). A
                      name without modifiers finds the one recorded with them (cycles: cycles:u).
  --per-thread        One table per thread instead of all threads together.
  --thread N|NAME     Only thread N (the profiler's thread number, as listed in the header), or
                      the thread named NAME (Profiler::thread_name, else the kernel's): numbers
                      follow the order threads registered in, which changes from run to run, names
                      do not. Of several threads with one name, NAME#K is the K-th by number.
  --without-overhead  Subtract from each scope's self value what recording its child scopes added
                      (the header's cost measured when the profile started: what one scope adds to
                      its parent less what it records itself), never below 0 (says how many were
                      clamped), and say so; the run loses the same, so the self % still add up
                      to 100. Approximate for a time or other noisy counter.
  --top N             Show the N labels with the most self value (default: all).
  --json              One JSON object instead of tables.
  -h, --help          Show this help.

Exit status: 0 the whole file was read; 2 it was read, but part of it was lost or corrupt, or
scopes were open when the program stopped (see the messages); 1 it could not be read at all, the
command line was wrong, or the output could not be written.
)";

namespace {

struct LabelStats {
    std::uint32_t label = 0;
    std::uint64_t count = 0;
    std::int64_t self = 0;
    std::uint64_t total = 0;     ///< inclusive, of its outermost calls only (see recursive)
    std::uint64_t recursive = 0; ///< calls inside a call of the same label on their thread: in that call's total
    std::vector<std::uint64_t> calls;
};

struct EventStats {
    std::uint32_t label = 0;
    std::uint64_t count = 0, sum = 0, min = UINT64_MAX, max = 0;
};

struct Summary {
    std::vector<LabelStats> labels;
    std::vector<EventStats> instants, integers;
    std::uint64_t run = 0;          ///< sum of the outermost scopes' totals (less `removed`)
    std::uint64_t removed = 0;      ///< --without-overhead: what came off the self values (and so off the run)
    std::uint64_t scopes = 0;
    std::uint64_t children = 0;     ///< scopes with a parent (what --without-overhead subtracts for)
    std::uint64_t clamped = 0;      ///< --without-overhead: scopes whose self value went below 0, shown as 0
    cli::OpenScopes open;           ///< scopes whose enclosing scopes are not in the file (counted as outermost)
    std::optional<pmc::Failure> failure; ///< the file could not be read again (changed since it was opened)
    std::uint64_t overflows = 0;    ///< values that could not be summed (left out, reported: exit status 2)
    std::uint64_t own_work = 0, own_work_marks = 0; ///< the profiler's own work marked on a time primary
};

/// Walks the threads' nesting (thread `only`, or all) for counter `c`.
Summary summarize(pmc::ProfileReader& reader, std::size_t c, std::optional<std::uint32_t> only,
                  bool without_overhead) {
    namespace pf = pmc::profile_format;
    Summary s;
    std::map<std::uint32_t, LabelStats> labels;
    std::map<std::uint32_t, EventStats> instants, integers;
    // What a child scope adds to its parent's self value: its whole cost, less the share inside the child's own
    // interval (already taken out with the child's total). Subtracting the whole cost took it out twice.
    const auto& k = reader.profile().counters[c];
    const double cost = std::max(0.0, k.cost_to_parent - k.cost_in_scope);
    s.failure = reader.walk(
        [&](const pmc::NestedInterval& scope) {
            const std::uint64_t total = scope.total(c);
            std::int64_t self = scope.self(c);
            if (without_overhead && scope.children) {
                const std::int64_t before = self;
                self -= static_cast<std::int64_t>(std::llround(cost * static_cast<double>(scope.children)));
                if (self < 0) { // a noisy counter's cost (a time) is a median: some scopes' overhead was less
                    self = 0;
                    ++s.clamped;
                }
                // Off the run too, so that the self values still add up to it (100 %).
                if (before > self) s.removed += static_cast<std::uint64_t>(before - self);
            }
            s.children += scope.children;
            s.open.note(scope);
            // Outermost as far as the file tells: at the top of its thread, or its enclosing scopes are not in the
            // file (still open when a killed program stopped): its total is then the most the file knows of them.
            if (scope.parent == pmc::no_parent && !cli::checked_add(s.run, total)) ++s.overflows;
            ++s.scopes;
            auto& l = labels[scope.label];
            l.label = scope.label;
            ++l.count;
            if (!cli::checked_add(l.self, self)) ++s.overflows;
            // Recursion: a call inside a call of its own label is in that call's total already.
            const auto& path = scope.path();
            const bool nested_in_itself =
                std::find(path.begin(), path.end() - 1, scope.label) != path.end() - 1;
            if (nested_in_itself) ++l.recursive;
            else if (!cli::checked_add(l.total, total)) ++s.overflows;
            l.calls.push_back(total);
        },
        [&](const pmc::NestedMark& m) {
            if (m.own_work) { // in the intervals around it (readings stay absolute): said apart
                ++s.own_work_marks;
                if (!cli::checked_add(s.own_work, m.integer)) ++s.overflows;
                return;
            }
            auto& e = (m.kind == pf::RecordKind::instant ? instants : integers)[m.label];
            e.label = m.label;
            ++e.count;
            if (m.kind == pf::RecordKind::integer) {
                if (!cli::checked_add(e.sum, m.integer)) ++s.overflows;
                e.min = std::min(e.min, m.integer);
                e.max = std::max(e.max, m.integer);
            }
        },
        only);
    s.run = s.run >= s.removed ? s.run - s.removed : 0;
    for (auto& [id, l] : labels) s.labels.push_back(std::move(l));
    std::sort(s.labels.begin(), s.labels.end(), [](const LabelStats& a, const LabelStats& b) {
        return a.self != b.self ? a.self > b.self : a.label < b.label;
    });
    for (auto& [id, e] : instants) s.instants.push_back(e);
    for (auto& [id, e] : integers) s.integers.push_back(e);
    return s;
}

using cli::show;

using cli::median;

/// Said under every table and in the JSON: how a recursive label's total is counted.
const char* const total_rule = "a label's total is the inclusive value of its outermost calls: a call inside a call "
                               "of the same label on its thread is in that call's total already, so it is counted "
                               "once";

std::string start_time_text(std::uint64_t ns) {
    const std::time_t t = static_cast<std::time_t>(ns / 1000000000ull);
    std::tm tm{};
    if (!::gmtime_r(&t, &tm)) return std::to_string(ns) + " ns";
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

std::string thread_title(const pmc::ProfileThread& t) {
    return fmt::format("thread {}{}{}", t.index, t.name.empty() ? "" : " \"" + t.name + "\"",
                       t.tid ? fmt::format(" (tid {})", t.tid) : "");
}

/// Which threads' counters the kernel multiplexed, and by how much: one line per such thread and counter, or a
/// line saying every known counter counted all along. Nothing for a file without times (an older writer).
void print_multiplexing(const pmc::Profile& p) {
    bool known = false, multiplexed = false;
    for (const auto& t : p.threads)
        for (std::size_t i = 0; i < t.times.size() && i < p.counters.size(); ++i) {
            const auto& ct = t.times[i];
            known = known || ct.known();
            if (!ct.multiplexed()) continue;
            multiplexed = true;
            fmt::print("warning: {}: {} was multiplexed: it counted {:.1f}% of the {} it was enabled; its values "
                       "cover only that share of the time\n",
                       thread_title(t), p.counters[i].name, 100.0 * ct.running_fraction(),
                       show(static_cast<double>(ct.enabled), "ns"));
        }
    if (known && !multiplexed)
        fmt::print("multiplexing: none (every perf counter counted all the time it was enabled, on every thread)\n");
}

void print_tables(const pmc::Profile& p, const Summary& s, const pmc::ProfileCounter& counter, std::size_t top) {
    const std::string unit = counter.unit == "events" ? counter.name : counter.unit;
    std::size_t width = 5;
    for (const auto& l : s.labels) width = std::max(width, p.string(l.label).size());
    for (const auto* events : {&s.instants, &s.integers})
        for (const auto& e : *events) width = std::max(width, p.string(e.label).size());
    if (!s.instants.empty() || !s.integers.empty()) width = std::max<std::size_t>(width, 13); // "instant event"
    width = std::min<std::size_t>(width, 48); // longer labels are cut (cli::fit): the columns stay in line
    std::vector<std::string> names; // every label the tables show: none cut into another's text
    for (const auto& l : s.labels) names.push_back(p.string(l.label));
    for (const auto* events : {&s.instants, &s.integers})
        for (const auto& e : *events) names.push_back(p.string(e.label));
    const cli::LabelColumn column(names, width);
    bool recursion = false;
    for (const auto& l : s.labels) recursion = recursion || l.recursive;
    fmt::print("{:<{}}  {:>9}  {:>12}  {:>7}  {:>12}  {:>11}  {:>11}  {:>11}\n", "label", width, "count", "self",
               "self %", recursion ? "outer total" : "total", "min", "median", "max");
    std::size_t shown = 0;
    for (auto l : s.labels) {
        if (top && shown++ >= top) break;
        const auto [mn_at, mx_at] = std::minmax_element(l.calls.begin(), l.calls.end());
        const std::uint64_t mn = *mn_at, mx = *mx_at; // before median() reorders the calls
        const double pct = s.run ? 100.0 * static_cast<double>(l.self) / static_cast<double>(s.run) : 0.0;
        fmt::print("{:<{}}  {:>9}  {:>12}  {:>6.2f}%  {:>12}  {:>11}  {:>11}  {:>11}\n", column(p.string(l.label)), width,
                   l.count, show(static_cast<double>(l.self), counter.unit), pct,
                   show(static_cast<double>(l.total), counter.unit), show(static_cast<double>(mn), counter.unit),
                   show(static_cast<double>(median(l.calls)), counter.unit), show(static_cast<double>(mx), counter.unit));
    }
    if (s.labels.empty()) fmt::print("(no scopes)\n");
    fmt::print("run (outermost scopes{}): {}{}; {} scopes\n", s.removed ? ", less the recording's cost" : "",
               show(static_cast<double>(s.run), counter.unit), counter.unit == "ns" ? "" : " " + unit, s.scopes);
    if (recursion) {
        std::uint64_t nested = 0;
        for (const auto& l : s.labels) nested += l.recursive;
        fmt::print("outer total: {} ({} call(s) were inside a call of their own label; min, median and max are of "
                   "every call)\n",
                   total_rule, nested);
    }
    if (s.open.any())
        fmt::print("{} scope(s) have not all their enclosing scopes in the file, so those at the top count as "
                   "outermost (the self % still add up to the run): their enclosing scopes had not ended when the "
                   "recording stopped (each thread's unwritten page is lost), or a page was lost:\n{}",
                   s.open.orphans(), s.open.text(p));
    if (s.clamped)
        fmt::print("{} scope(s) had less self value than their child scopes' recording cost: shown as 0 (the cost is "
                   "a median measured at start; for a time or other noisy counter the correction is approximate)\n",
                   s.clamped);
    if (s.own_work_marks)
        fmt::print("pmc's own work (page writes, flushes, label interning): {} in {} stretch(es), inside the scopes "
                   "around them ({} keeps its readings absolute across threads; `pmc export --chrome` shows each as a "
                   "\"pmc: own work\" slice)\n",
                   show(static_cast<double>(s.own_work), p.counters[0].unit), s.own_work_marks, p.counters[0].name);
    if (!s.instants.empty()) {
        fmt::print("\n{:<{}}  {:>9}\n", "instant event", width, "count");
        for (const auto& e : s.instants) fmt::print("{:<{}}  {:>9}\n", column(p.string(e.label)), width, e.count);
    }
    if (!s.integers.empty()) {
        fmt::print("\n{:<{}}  {:>9}  {:>14}  {:>12}  {:>12}\n", "integer event", width, "count", "sum", "min", "max");
        for (const auto& e : s.integers)
            fmt::print("{:<{}}  {:>9}  {:>14}  {:>12}  {:>12}\n", column(p.string(e.label)), width, e.count, e.sum, e.min,
                       e.max);
    }
}

void json_summary(pmc::JsonWriter& j, const pmc::Profile& p, Summary& s) {
    j.field("run", s.run).field("run_less_recording_cost", s.removed).field("scopes", s.scopes);
    j.field("clamped_to_zero", s.clamped).field("total_rule", total_rule);
    j.field("own_work", s.own_work).field("own_work_stretches", s.own_work_marks);
    j.field("scopes_without_enclosing", s.open.orphans()).key("open_scopes");
    s.open.json(j, p);
    j.key("labels").begin_array();
    for (auto& l : s.labels) {
        const auto [mn_at, mx_at] = std::minmax_element(l.calls.begin(), l.calls.end());
        const std::uint64_t mn = *mn_at, mx = *mx_at; // before median() reorders the calls
        j.begin_object().field("label", p.string(l.label)).field("count", l.count).field("self", l.self);
        j.field("self_percent", s.run ? 100.0 * static_cast<double>(l.self) / static_cast<double>(s.run) : 0.0);
        j.field("total", l.total).field("recursive_calls", l.recursive);
        j.field("min", mn).field("median", median(l.calls)).field("max", mx).end_object();
    }
    j.end_array().key("instants").begin_array();
    for (const auto& e : s.instants) j.begin_object().field("label", p.string(e.label)).field("count", e.count).end_object();
    j.end_array().key("integers").begin_array();
    for (const auto& e : s.integers)
        j.begin_object().field("label", p.string(e.label)).field("count", e.count).field("sum", e.sum)
            .field("min", e.min).field("max", e.max).end_object();
    j.end_array();
}

} // namespace

int cmd_summarize(const std::vector<std::string>& arguments) {
    pmc_cli::CommandLine cl("pmc summarize", summarize_help);
    cli::ProfileArgs args;
    bool without_overhead = false;
    std::string top_text;
    args.add_to(cl);
    cl.flag("--without-overhead", without_overhead);
    pmc_cli::Option top_option = cl.option("--top", top_text, "a whole number");
    if (auto status = cl.parse(arguments)) return *status;
    const auto top_given = pmc_cli::whole_number_option(top_option, top_text, 0, SIZE_MAX);
    if (!top_given) return cl.usage_error("--top needs a whole number");
    const std::size_t top = static_cast<std::size_t>(*top_given);
    if (auto why = args.check("summarize")) return cl.usage_error(*why);
    const std::string& file = args.file;
    const bool json = args.json, per_thread = args.per_thread;

    std::size_t c = 0;
    auto read = cli::open_profile("summarize", file, args.counter, c);
    if (!read) return 1;
    pmc::ProfileReader& reader = *read;
    const pmc::Profile& p = reader.profile();
    const pmc::ProfileCounter& counter = p.counters[c];
    const double overhead = std::max(0.0, counter.cost_to_parent - counter.cost_in_scope);
    // The tables, or the reason the file could not be read again (it changed while being read).
    // Scopes still open when the program stopped: a summary found scopes whose enclosing scopes are not in the file,
    // or the file names open intervals (also when no scope had ended, so none is in the file): not whole.
    bool open_scopes = cli::ended_inside_scopes(p);
    bool overflowed = false;  // a sum that could not be made (checked arithmetic): exit status 2
    auto summary = [&](std::optional<std::uint32_t> only) {
        Summary s = summarize(reader, c, only, without_overhead);
        if (s.failure) {
            fmt::print(stderr, "pmc summarize: {}\n", s.failure->message);
            std::exit(1);
        }
        open_scopes = open_scopes || s.open.any();
        if (s.overflows) overflowed = true;
        return s;
    };
    std::vector<const pmc::ProfileThread*> threads;
    if (!cli::select_threads("summarize", p, args, threads)) return 1; // --thread NAME: its number
    const std::optional<std::uint32_t> only_thread = args.only_thread;
    // 2 when part of the file is lost, a sum could not be made, or scopes were still open when the program stopped
    // (killed): not whole.
    auto status = [&] { return p.problems.empty() && !open_scopes && !overflowed ? 0 : 2; };
    auto say_open = [&] {
        if (open_scopes && p.problems.empty())
            fmt::print(stderr, "pmc summarize: {}; what the file holds is shown\n", cli::not_whole_text(file, p));
    };
    const std::vector<std::string> open_now = cli::open_intervals_text(p);

    if (json) {
        pmc::JsonWriter j;
        j.begin_object().field("file", file).field("format_version", p.version).field("pmc_version", p.pmc_version);
        j.field("pid", p.pid).key("command_line").begin_array();
        for (const auto& a : p.command_line) j.value(a);
        j.end_array().field("start_time_ns", p.start_time_ns).field("cpu", p.cpu).field("kernel", p.kernel);
        j.field("aslr", p.aslr).field("emulator", p.emulator).key("counters").begin_array();
        for (const auto& k : p.counters)
            j.begin_object().field("name", k.name).field("unit", k.unit).field("read_path", k.read_path)
                .field("exact", reader.exactness(static_cast<std::size_t>(&k - p.counters.data())).exact).field("irq_corrected", (k.flags & pmc::profile_format::irq_corrected) != 0)
                .field("may_multiplex", (k.flags & pmc::profile_format::may_multiplex) != 0)
                .field("fallback", (k.flags & pmc::profile_format::fallback) != 0)
                .field("cost_to_parent", k.cost_to_parent).field("cost_in_scope", k.cost_in_scope)
                .field("note", k.note).end_object();
        j.end_array().field("counter", counter.name).field("unit", counter.unit);
        j.field("without_overhead", without_overhead);
        j.key("warnings").begin_array();
        for (const auto& w : p.warnings) j.value(w);
        j.end_array().key("problems").begin_array();
        for (const auto& w : p.problems) j.value(w);
        j.end_array().field("ended_by", p.ended_by()).key("open_at_end").begin_array();
        for (const auto& w : open_now) j.value(w);
        j.end_array().key("threads").begin_array();
        for (const auto* t : threads) {
            j.begin_object().field("index", t->index).field("tid", t->tid).field("name", t->name);
            j.field("events", reader.span(t->index).records).field("missing_pages", t->missing_pages);
            if (!t->error.empty()) j.field("error", t->error);
            // Per counter: how long it was enabled and running on this thread (null: not known, e.g. a clock).
            j.key("counter_times").begin_array();
            for (std::size_t i = 0; i < p.counters.size(); ++i) {
                if (i >= t->times.size() || !t->times[i].known()) {
                    j.null();
                    continue;
                }
                const auto& ct = t->times[i];
                j.begin_object().field("counter", p.counters[i].name).field("enabled_ns", ct.enabled);
                j.field("running_ns", ct.running).field("running_fraction", ct.running_fraction());
                j.field("multiplexed", ct.multiplexed()).end_object();
            }
            j.end_array();
            if (per_thread) {
                Summary s = summary(t->index);
                json_summary(j, p, s);
            }
            j.end_object();
        }
        j.end_array();
        if (!per_thread) {
            Summary s = summary(only_thread);
            json_summary(j, p, s);
        }
        if (overflowed) j.field("overflow", cli::overflow_text("some values were"));
        j.end_object();
        fmt::print("{}\n", j.str());
        if (!p.problems.empty())
            fmt::print(stderr, "pmc summarize: {} (see \"problems\")\n", cli::incomplete_text(file, p));
        if (overflowed) fmt::print(stderr, "pmc summarize: {}\n", cli::overflow_text("some values were"));
        say_open();
        return status();
    }

    std::string command;
    for (const auto& a : p.command_line) command += (command.empty() ? "" : " ") + a;
    fmt::print("profile {}: pmc {} (format {}), pid {}, started {}\n", file, p.pmc_version, p.version, p.pid,
               start_time_text(p.start_time_ns));
    if (!command.empty()) fmt::print("command: {}\n", command);
    fmt::print("cpu: {}; kernel {}; ASLR {}\n", p.cpu, p.kernel, p.aslr);
    if (!p.emulator.empty()) fmt::print("emulator: {}\n", p.emulator);
    for (std::size_t i = 0; i < p.counters.size(); ++i) {
        const auto& k = p.counters[i];
        fmt::print("{} {}: {}{}, read with {}{}; one scope adds {} to its parent, an empty one records {}\n",
                   i == 0 ? "primary counter" : "riding along   ", k.name, k.unit == "events" ? "a count" : k.unit,
                   reader.exactness(i).exact ? " (exact)" : "",
                   k.read_path == "emulator" ? "the emulator: " + reader.exactness(i).why : k.read_path,
                   (k.flags & pmc::profile_format::irq_corrected) ? ", interrupts subtracted" : "",
                   k.unit == "events" ? fmt::format("{:.3g}", k.cost_to_parent) : show(k.cost_to_parent, k.unit),
                   k.unit == "events" ? fmt::format("{:.3g}", k.cost_in_scope) : show(k.cost_in_scope, k.unit));
    }
    for (const auto& w : p.warnings) fmt::print("warning (from the profiled program): {}\n", w);
    for (const auto& t : p.threads)
        if (!t.error.empty())
            fmt::print("warning: {}: its counters could not be opened, its values are 0: {}\n", thread_title(t),
                       t.error);
    print_multiplexing(p);
    fmt::print("threads: ");
    for (std::size_t i = 0; i < p.threads.size(); ++i)
        fmt::print("{}{}: {} events", i ? "; " : "", thread_title(p.threads[i]),
                   reader.span(p.threads[i].index).records);
    fmt::print("\nshowing: {} ({}), {}{}\n\n", counter.name, counter.unit == "events" ? "a count" : counter.unit,
               only_thread ? fmt::format("thread {} only", *only_thread)
               : per_thread ? std::string("each thread")
                            : std::string("all threads together"),
               without_overhead
                   ? fmt::format("; self values without the recording's cost ({} per child scope subtracted: what one "
                                 "adds to its parent less what it records itself, never below 0{})",
                                 counter.unit == "events" ? fmt::format("{:.3g}", overhead) : show(overhead, counter.unit),
                                 counter.exact() ? "" : "; approximate, this counter is noisy")
                   : "");
    if (per_thread) {
        for (const auto* t : threads) {
            fmt::print("== {}\n", thread_title(*t));
            print_tables(p, summary(t->index), counter, top);
            fmt::print("\n");
        }
    } else {
        print_tables(p, summary(only_thread), counter, top);
    }
    if (!open_now.empty()) {
        fmt::print("recording ended: {}; intervals still open (as of each thread's last page):\n", p.ended_by());
        for (const auto& w : open_now) fmt::print("  {}\n", w);
    }
    if (overflowed) fmt::print(stderr, "pmc summarize: {}\n", cli::overflow_text("some values were"));
    if (!p.problems.empty()) {
        fmt::print(stderr, "pmc summarize: {}; what was lost:\n", cli::incomplete_text(file, p));
        for (std::size_t i = 0; i < p.problems.size() && i < 20; ++i) fmt::print(stderr, "  {}\n", p.problems[i]);
        if (p.problems.size() > 20) fmt::print(stderr, "  ... and {} more (--json lists them all)\n", p.problems.size() - 20);
    }
    say_open();
    return status();
}

} // namespace pmc_tool
