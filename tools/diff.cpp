// SPDX-License-Identifier: MIT
// pmc diff BASE NEW, or pmc diff A1 A2 A3 -- B1 B2 B3: what changed between two builds or runs of one program, per
// label, in the counter's own unit, and whether each change is real: with an exact counter a difference of 1 is a
// change; with a noisy one a change counts only when it is beyond the spread the runs of each side show.
#include <pmc/gate.hpp>
#include <pmc/report.hpp>

#include "command_line.hpp"
#include "commands.hpp"
#include "profile_runs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace pmc_tool {

// The help states pmc::gate::modelled_threshold_percent in words: the two move together.
static_assert(pmc::gate::modelled_threshold_percent == 10.0 && pmc::gate::modelled_floor_events == 64 &&
                  pmc::gate::modelled_floor_share_percent == 0.1,
              "say the modelled threshold and floor in diff_help's --counter");
const char* const diff_help = R"(usage: pmc diff [--counter NAME] [--top N] [--json] [--alpha A]
                [--fail-on-change | --fail-on-increase] [--threshold VALUE] [--accept FILE]
                BASE NEW | BASE... -- NEW...

Compare profiles of two builds or runs of one program (PMC_PROFILE=FILE), per label: calls, self
(exclusive) and total (inclusive) before and after, the delta and delta %, sorted by the largest
|self delta|; then instant events (cache hits) and integer events, before, after and delta.
Values are in the counter's unit. With several runs a side, "before" and "after" are the medians.

Each label gets a verdict on its self value (so a change shows at the query that changed, not at
its callers) and its calls:
  - the same values in every run of both sides: "unchanged", whatever the counter (pmc diff
    a.pmcprof a.pmcprof is unchanged everywhere, on wall-time too);
  - exact counter (the file says: a count read whole, never multiplexed or replaced) and each
    side's runs agree: "unchanged" when equal, else "changed by N". With one run a side this
    assumes the program is deterministic (said in the output); where the runs of one side differ,
    the program is not deterministic there: the labels are named, and judged as a noisy counter;
  - otherwise (wall-time, or runs that differ): the noise rule. Each label's self values get the
    exact rank-sum (Mann-Whitney) test's p-value: the chance that runs of one program split so
    lopsidedly. Holm's step-down over the L labels so judged (the smallest p-value against A/L,
    the next against A/(L-1), ..., stopping at the first that fails) flags a label "beyond the
    noise" when it passes and its medians also differ by more than either side's spread (max -
    min: a guard against load that changes while the runs are recorded); the others are
    "within the noise". The chance that an unchanged program fails the gate is then at most A
    (--alpha, default 0.05) across all labels, not per label. Recording BASE and NEW runs
    alternately (A1 B1 A2 B2 ...) keeps a slow drift of the machine off one side. n and m runs
    give p-values no smaller than 2 n! m! / (n+m)! (10% for 3 and 3 runs, 0.79% for 5 and 5,
    0.022% for 8 and 8): with 5 and 5 runs at most 6 labels can be judged at 5% (the output says
    when no label can be flagged, and a fail option then exits 4). One run a side gives no noise
    estimate;
  - "new" / "gone": a label only one side has. With an exact counter, when every run of that side
    has it: a change, whatever its values. Otherwise (a noisy counter, or a label only some runs of
    a side recorded) by the noise rule above, its values 0 in the runs without it, in the same
    Holm family as the other labels: a label recorded in 1 run of 5 is within the noise.
A label's total (shown, not judged) is the inclusive value of its outermost calls: a call inside
a call of the same label on its thread (recursion) is counted once. Each label's values are summed
over all threads, so the order threads registered in (their numbers) changes nothing.

Options:
  --counter NAME  Compare this recorded counter (default: the first file's primary, or where that
                  is modelled, the first counter that is not, and a "left out:" line, JSON
                  modelled_primary_left_out, names the primary); every file must have recorded it (a
                  name without modifiers finds the one recorded with them: cycles, cycles:u). A
                  modelled counter is gated only when named here: pmc emulate --cache's
                  L1-dcache-loads, L1-dcache-load-misses, L1-dcache-stores, L1-dcache-store-misses,
                  L1-icache-load-misses, LLC-loads, LLC-load-misses, LLC-stores, LLC-store-misses,
                  cache-references and cache-misses, and --branches' branch-misses (the list:
                  pmc/modelled_events.hpp). Their counts are exact for pmc's models, not
                  measured, and move with the program's memory layout, so a change passes unless
                  it is at least 10% of the label's BASE median and at least the floor: 64 events
                  or 0.1% of the counter's whole-run BASE total (every label's self value), the
                  larger; a --threshold replaces both (the output says which applied):
                  --threshold 0 fails any change, for a figure exact by construction (per-thread
                  branch-misses of threads started in turn), --threshold 10% keeps the share
                  without the floor. Where the files record only modelled counters and none is
                  named, the first is shown, and a fail option exits 4 asking for --counter.
  --any-emulator  Compare profiles recorded under different emulators (pmc emulate: QEMU version,
                  plugin API), emulated CPU models, or, for a modelled counter, model
                  configurations (the cache geometry, L2, inclusion; the branch predictor), with
                  a warning. Without it such a diff exits 4 ("cannot judge"), naming both: the
                  emulators' or models' differences would show as the program's.
  --top N         Show the N labels with the largest |self delta|, and every flagged label beyond
                  them (a gate's reason is never hidden).
  --json          One JSON object instead of tables. Each label has "fails_gate", "under_threshold"
                  and "accepted" (its --accept value, or null; "accepted_as_is": its change is as
                  accepted). Its "gate" is the gate's verdict (stated with or without a fail
                  option; without one, as --fail-on-change): fail_on_change, fail_on_increase,
                  threshold ({value, percent, text} or null), accept_file, verdict ("unchanged",
                  "changed", "cannot judge", or "not judged" where a file was damaged), changed,
                  unjudged, changed_labels (exactly the labels that fail the gate, whatever --top),
                  unjudged_labels, under_threshold_labels, accepted_labels and passed_decreases
                  (flagged labels that do not fail, and why), runs_needed (when it cannot judge:
                  the runs a side it needs) and exit_status.
  --fail-on-change
                  For CI: exit status 3 when any label's verdict is "changed by N", "beyond
                  the noise", "new" or "gone" (instant and integer events are not judged), up
                  or down, and not excused by --threshold or --accept. A gate that cannot judge
                  a label that could fail it (a noisy counter with one run a side; or too few
                  runs for Holm's first bar, e.g. 2 and 2 wall-time runs: no label can be
                  flagged) exits 4, never 0, and says how many runs a side it needs.
  --fail-on-increase
                  As --fail-on-change, but only increases fail (a larger self value, or the
                  same self value in more calls; a new label): a decrease is shown and passes.
  --threshold VALUE
                  A flagged label whose self delta is below VALUE does not fail the gate (it is
                  shown, marked "under the threshold"): a count in the counter's unit (100; ns
                  for wall-time), or a percentage of the BASE median (0.5%). A new label's
                  percentage is infinite: only a count threshold can excuse it. 0: any change
                  fails (on a modelled counter too: it replaces the 10% and the floor).
  --accept FILE   Intended changes, in a file committed with the change, one label a line:
                  VALUE LABEL, VALUE being the self delta accepted (+4, -120, +2.5%), a range
                  of them (-100..0, 0%..5%), "new" or "gone"; lines starting with # and blank
                  lines are comments. A flagged label whose change is as accepted does not fail;
                  one whose change is not (another value, outside the range) still fails; an
                  accepted label that did not change passes (remove the line once merged). A
                  malformed line is an error (status 1) naming its line; a label on neither
                  side is warned about.
  --alpha A       The noise rule's family-wise false-alarm chance (default 0.05): an unchanged
                  program fails the gate with a chance of at most A.
  -h, --help      Show this help.

A truncated or corrupt file is used up to its last whole record; what was lost is said on stderr
and the exit status is 2. So it is for a profile whose program stopped with scopes open (killed):
its verdicts are "not judged".

Exit status: 0 every file was read whole (and, with a fail option, no label failed the gate); 2
read, but part of a file was lost or corrupt, or its program stopped with scopes open (verdicts on
lost data are not trusted: 2 comes before 3 and 4); 3 with --fail-on-change or --fail-on-increase,
a label failed the gate (the labels are named on stderr); 4 with a fail option, the gate cannot
judge a label that could fail it (too few runs; the fix is said on stderr; 4 comes before 3), or
the files record only modelled counters and no --counter named one; and, with or without one, the
files come from different emulators, CPU models or model configurations (--any-emulator); 1 a
file could not be read at all, the --accept file is malformed, the command line was wrong, or the
output could not be written.
)";

namespace {

namespace gate = pmc::gate;
using gate::Verdict;
using runs::Run;
using runs::Spread;

// ---- 1. The command line ------------------------------------------------------------------------------------------

struct DiffOptions {
    std::vector<std::string> before_files, after_files;
    std::string counter_name, accept_file;
    bool json = false, any_emulator = false, accept_given = false;
    std::size_t top = 0;
    bool gate_on = false;  ///< --fail-on-change or --fail-on-increase
    const char* gate_option = "--fail-on-change";
    gate::Options judging; ///< direction, threshold, alpha (exact, modelled and accept are set when reading)
};

/// Parses the command line into `o`; a status to exit with on --help or a usage error.
std::optional<int> parse_command_line(const std::vector<std::string>& arguments, DiffOptions& o) {
    pmc_cli::CommandLine cl("pmc diff", diff_help);
    std::string top_text, alpha_text, threshold_text;
    bool separated = false, fail_on_change = false, fail_on_increase = false;
    cl.flag("--json", o.json);
    cl.flag("--fail-on-change", fail_on_change);
    cl.flag("--fail-on-increase", fail_on_increase);
    pmc_cli::Option threshold_option =
        cl.option("--threshold", threshold_text, "a count (e.g. 100) or a percentage (e.g. 0.5%)");
    pmc_cli::Option accept_option = cl.option("--accept", o.accept_file, "a file of accepted changes");
    pmc_cli::Option alpha_option =
        cl.option("--alpha", alpha_text, "a chance between 0 and 1 (e.g. 0.05 for 5 %)");
    cl.option("--counter", o.counter_name, "a counter name");
    cl.flag("--any-emulator", o.any_emulator);
    pmc_cli::Option top_option = cl.option("--top", top_text, "a whole number");
    cl.allow_extras(); // the files, with the '--' between the sides, are read below
    if (auto status = cl.parse(arguments)) return status;
    for (const auto& a : cl.remaining()) {
        if (a == "--" && !separated) separated = true;
        else if (a == "--") return cl.usage_error("one '--' between the BASE runs and the NEW runs");
        else if (!separated && a.size() > 1 && a[0] == '-') return cl.usage_error(fmt::format("unknown option '{}'", a));
        else (separated ? o.after_files : o.before_files).push_back(a);
    }
    if (alpha_option.given()) {
        char* end = nullptr;
        const double alpha = std::strtod(alpha_text.c_str(), &end);
        if (alpha_text.empty() || *end || !(alpha > 0 && alpha < 1))
            return cl.usage_error("--alpha needs a chance between 0 and 1 (e.g. 0.05 for 5 %)");
        o.judging.alpha = alpha;
    }
    const auto top_given = pmc_cli::whole_number_option(top_option, top_text, 0, SIZE_MAX);
    if (!top_given) return cl.usage_error("--top needs a whole number");
    o.top = static_cast<std::size_t>(*top_given);
    if (fail_on_change && fail_on_increase)
        return cl.usage_error("--fail-on-change (both ways) and --fail-on-increase exclude each other");
    o.gate_on = fail_on_change || fail_on_increase;
    o.gate_option = fail_on_increase ? "--fail-on-increase" : "--fail-on-change";
    o.judging.direction = fail_on_increase ? gate::Direction::increase : gate::Direction::change;
    if (threshold_option.given()) {
        o.judging.threshold = gate::parse_threshold(threshold_text);
        if (!o.judging.threshold)
            return cl.usage_error(fmt::format("--threshold needs a count (e.g. 100) or a percentage (e.g. 0.5%), not "
                                              "'{}'",
                                              threshold_text));
    }
    o.accept_given = accept_option.given();
    if (o.accept_given && o.accept_file.empty()) return cl.usage_error("--accept needs a file");
    if (!separated) {
        if (o.before_files.size() != 2)
            return cl.usage_error("give BASE and NEW (pmc diff BASE NEW), or several runs a side with '--' between "
                                  "them (pmc diff A1 A2 A3 -- B1 B2 B3)");
        o.after_files.push_back(o.before_files.back());
        o.before_files.pop_back();
    }
    if (o.before_files.empty() || o.after_files.empty())
        return cl.usage_error("each side needs at least one profile (BASE... -- NEW...)");
    return std::nullopt;
}

/// Reads an --accept file (gate::parse_accept's format); the message on failure.
std::variant<gate::AcceptList, std::string> read_accept_file(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return fmt::format("--accept '{}': {}", file, std::strerror(errno));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return fmt::format("--accept '{}': {}", file, std::strerror(errno));
    auto parsed = gate::parse_accept(text);
    if (auto* bad = std::get_if<gate::AcceptError>(&parsed))
        return fmt::format("--accept '{}' line {}: {} ({})", file, bad->line, bad->why, gate::accept_format_hint);
    return std::get<gate::AcceptList>(std::move(parsed));
}

// ---- 2. Reading the profiles --------------------------------------------------------------------------------------

/// One side's values for one label: one entry per run (0 where the run does not have it).
struct Side {
    std::vector<double> calls, self, total;
    Spread c, s, t;
};

/// A label as shown: both sides' figures (totals are shown, not judged) and the gate's judgement of it.
struct Row {
    std::string label;
    Side before, after;
    double total_delta = 0;
    gate::LabelJudgement j;
    std::string text; ///< the verdict in words
};

using EventTable = std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>; // per run, before / after

/// Everything read from the files.
struct Read {
    std::vector<Run> all; ///< BASE's runs, then NEW's
    std::size_t nb = 0, na = 0;
    pmc::ProfileCounter counter;
    runs::Exactness exact;
    bool modelled = false;
    /// The counter is modelled and no --counter asked for it (the profiles record no other): shown, never gated.
    bool modelled_unasked = false;
    /// No --counter, and the first file's primary counter is modelled: that primary, left out for `counter`.
    std::string modelled_primary_left_out;
    double base_run_total = 0; ///< the counter's whole-run total on the BASE side: every label's self, median run
    std::vector<Row> table;
    EventTable instants, integer_counts, integer_sums;
    int status = 0; ///< 2: a file was damaged or cut (its verdicts are not trusted)
};

/// A counter pmc's emulator models (pmc emulate --cache) instead of counting: gated only when --counter names it.
bool modelled(const pmc::ProfileCounter& k) { return k.read_path == "emulator" && gate::is_modelled_event(k.name); }

/// Without --counter: the first file's primary counter, or where that is modelled, its first counter that is not.
std::string default_counter(const Run& first) {
    for (const auto& k : first.profile.counters)
        if (!modelled(k)) return k.name;
    return first.profile.counters.front().name;
}

/// Loads every file and sums each label per run; a status to exit with when it cannot.
std::optional<int> read_profiles(const DiffOptions& o, Read& out) {
    std::vector<Run> before, after;
    for (auto [files, side] : {std::pair{&o.before_files, &before}, std::pair{&o.after_files, &after}})
        if (auto failure = runs::load(*files, *side)) {
            fmt::print(stderr, "pmc diff: {}\n", *failure);
            return 1;
        }
    // One counter, in every file of both sides.
    std::vector<Run>& all = out.all;
    for (auto* side : {&before, &after})
        for (auto& r : *side) all.push_back(std::move(r));
    if (auto failure = runs::choose_counter(all, o.counter_name.empty() ? default_counter(all[0]) : o.counter_name)) {
        fmt::print(stderr, "pmc diff: {}\n", *failure);
        return 1;
    }
    // Runs from two emulators, emulated CPU models or model configurations: a difference would be theirs.
    const runs::MismatchWording wording{
        "pmc diff", "cannot judge", "profiles",
        "Their counts differ for the emulator's or the model's sake, not the program's.", "both sides",
        "; pmc emulate now gives x86-64 programs its Haswell unless told otherwise, where profiles recorded before it "
        "had QEMU's default",
        "compare"};
    if (runs::refuse_machine_mismatch(all, wording, o.any_emulator)) return gate::cannot_judge_status;
    const std::size_t nb = out.nb = o.before_files.size(), na = out.na = o.after_files.size();
    out.counter = all[0].profile.counters[all[0].counter];
    out.exact = runs::exactness(all);
    out.modelled = modelled(out.counter);
    out.modelled_unasked = out.modelled && o.counter_name.empty();
    if (const auto& primary = all[0].profile.counters.front();
        o.counter_name.empty() && modelled(primary) && primary.name != out.counter.name)
        out.modelled_primary_left_out = primary.name;

    // Per label and side: each run's sums.
    std::map<std::string, Row> rows;
    for (std::size_t r = 0; r < all.size(); ++r) {
        const bool is_after = r >= nb;
        const std::size_t at = is_after ? r - nb : r, n = is_after ? na : nb;
        for (auto& [label, sums] : runs::label_sums(all[r])) {
            Row& row = rows[label];
            row.label = label;
            Side& side = is_after ? row.after : row.before;
            for (auto* v : {&side.calls, &side.self, &side.total}) v->resize(n, 0.0);
            side.calls[at] = static_cast<double>(sums.calls);
            side.self[at] = static_cast<double>(sums.self);
            side.total[at] = static_cast<double>(sums.total);
        }
        const runs::EventSums& events = all[r].events;
        auto put = [&](EventTable& table, const std::string& name, double value) {
            auto& [b, a] = table[name];
            b.resize(nb, 0.0);
            a.resize(na, 0.0);
            (is_after ? a : b)[at] = value;
        };
        for (const auto& [name, count] : events.instants) put(out.instants, name, static_cast<double>(count));
        for (const auto& [name, cs] : events.integers) {
            put(out.integer_counts, name, static_cast<double>(cs.first));
            put(out.integer_sums, name, static_cast<double>(cs.second));
        }
    }
    for (auto& [label, row] : rows) {
        for (auto [side, n] : {std::pair{&row.before, nb}, std::pair{&row.after, na}}) {
            for (auto* v : {&side->calls, &side->self, &side->total}) v->resize(n, 0.0);
            side->c = runs::spread(side->calls);
            side->s = runs::spread(side->self);
            side->t = runs::spread(side->total);
        }
        row.total_delta = row.after.t.median - row.before.t.median;
        out.table.push_back(std::move(row));
    }
    // The counter's whole run on the BASE side (the modelled floor's share): every label's self, the median run.
    std::vector<double> run_totals(nb, 0.0);
    for (const Row& row : out.table)
        for (std::size_t r = 0; r < nb; ++r) run_totals[r] += row.before.self[r];
    out.base_run_total = gate::summary(run_totals).median;
    // A damaged file, or one whose program stopped with scopes open (killed): its verdicts are not trusted.
    out.status = std::any_of(all.begin(), all.end(), [](const Run& r) { return r.cut(); }) ? 2 : 0;
    return std::nullopt;
}

// ---- 3. Judging (pmc/gate.hpp) ------------------------------------------------------------------------------------

/// Each label's self values and calls, judged by the gate's one rule.
gate::Judgement judge(Read& in, const gate::Options& options) {
    std::vector<gate::Label> labels;
    for (const Row& r : in.table)
        labels.push_back({r.label, {r.before.self, r.before.calls}, {r.after.self, r.after.calls}});
    gate::Judgement j = gate::judge(labels, in.nb, in.na, options);
    for (std::size_t i = 0; i < in.table.size(); ++i) in.table[i].j = j.labels[i];
    return j;
}

// ---- 4. Rendering -------------------------------------------------------------------------------------------------

std::string signed_value(double v, const std::string& unit) { return (v > 0 ? "+" : "") + runs::show(v, unit); }

/// A p-value for people: a percentage.
std::string p_text(double p) { return p < 0.001 ? fmt::format("{:.2g}%", 100 * p) : fmt::format("{:.1f}%", 100 * p); }

std::string signed_pct(double p) {
    if (std::isinf(p)) return p > 0 ? "+inf" : "-inf";
    return fmt::format("{:+.1f}%", p);
}

/// A label's verdict in words, with what excuses it from the gate.
std::string verdict_text(const gate::LabelJudgement& r, const Read& in, const gate::Judgement& judgement,
                         const gate::Options& options) {
    const std::string& unit = in.counter.unit;
    const std::string calls_note = r.calls_before.median != r.calls_after.median
                                       ? fmt::format("; calls {:.0f} -> {:.0f}", r.calls_before.median, r.calls_after.median)
                                       : "";
    std::string text;
    if (!r.by_noise) {
        switch (r.verdict) {
        case Verdict::removed: text = "gone (not in NEW)"; break;
        case Verdict::added: text = "new (not in BASE)"; break;
        case Verdict::unchanged: text = in.exact.exact ? "unchanged" : "unchanged (identical values)"; break;
        case Verdict::changed: text = fmt::format("changed by {}{}", signed_value(r.delta, unit), calls_note); break;
        default:
            text = r.only_after()    ? "no noise estimate (one run a side; new: not in BASE)"
                   : r.only_before() ? "no noise estimate (one run a side; gone: not in NEW)"
                                     : "no noise estimate (one run a side)";
        }
    } else {
        // A label only one side recorded (in some of its runs): said, and called new or gone when flagged.
        const std::string note =
            calls_note +
            (r.only_after()    ? fmt::format("; new: in {} of {} NEW runs, no BASE run", r.runs_after, in.na)
             : r.only_before() ? fmt::format("; gone: in {} of {} BASE runs, no NEW run", r.runs_before, in.nb)
                               : "");
        if (r.flagged())
            text = fmt::format("{}beyond the noise: {} (p {}){}", r.only_after() ? "new, " : r.only_before() ? "gone, " : "",
                               signed_value(r.delta, unit), p_text(r.p), note);
        else if (r.holm_passed)
            text = fmt::format("within the noise (p {}, but the medians differ by less than a side's spread, {}){}",
                               p_text(r.p), runs::show(r.spread, unit), note);
        else
            text = fmt::format("within the noise (p {}{}){}", p_text(r.p),
                               r.p <= options.alpha ? fmt::format(", needed <= {}", p_text(r.holm_bar)) : "", note);
    }
    if (!r.flagged()) return text;
    if (r.under_floor)
        text += fmt::format(" (under the modelled floor {}: does not fail; --threshold 0 fails any change)",
                            runs::show(judgement.floor, ""));
    else if (r.under_threshold) text += fmt::format(" (under the threshold {}: does not fail)", judgement.threshold->text);
    else if (r.against_direction) text += " (a decrease: does not fail --fail-on-increase)";
    else if (r.accepted)
        text += fmt::format(" ({}: {}, --accept line {}{})", r.accepted_ok ? "accepted" : "not as accepted",
                            r.accepted->text, r.accepted->line, r.accepted_ok ? "" : ": fails");
    return text;
}

/// The rule the verdicts followed, in words.
std::string rule_text(const Read& in, const gate::Judgement& j, const gate::Options& options, bool assumes_determinism) {
    const std::size_t nb = in.nb, na = in.na, judged = j.judged_by_noise;
    const double alpha = options.alpha;
    std::string rule = "identical values in every run of both sides are \"unchanged\", whatever the counter";
    if (in.exact.exact)
        rule += "; exact counter, each side's runs agreeing: equal self values and calls are \"unchanged\", any "
                "difference \"changed by N\"";
    if (assumes_determinism)
        rule += " (one run a side: this assumes the program is deterministic; give each side two or more runs to "
                "check it)";
    if (judged)
        rule += fmt::format(
            "; {}a change is \"beyond the noise\" when the rank-sum test of the {} BASE and {} NEW runs' self "
            "values passes Holm's step-down at {} over the {} label{} so judged (the smallest p-value compared with "
            "{} / {}, the next with {} / {}, ...) and the medians differ by more than either side's spread (max - "
            "min): an unchanged program fails the gate with a chance of at most {}, whatever the number of labels; "
            "{} and {} runs give p-values no smaller than {}{}",
            in.exact.exact ? "where runs of one side differ (not deterministic): " : "", nb, na, p_text(alpha), judged,
            judged == 1 ? "" : "s", p_text(alpha), judged, p_text(alpha), judged > 1 ? judged - 1 : 1, p_text(alpha),
            nb, na, p_text(j.p_floor),
            j.noise_blind ? fmt::format(", above {} / {}: no label can be flagged; run each side more often (the "
                                        "smallest p-value is 2 / C(n + m, n))",
                                        p_text(alpha), judged)
                          : "");
    if (!in.exact.exact && (nb < 2 || na < 2) &&
        std::any_of(j.labels.begin(), j.labels.end(), [](const gate::LabelJudgement& r) { return r.verdict == Verdict::no_estimate; }))
        rule += "; with one run a side there is no noise estimate: run each side several times and give "
                "pmc diff A1 A2 A3 -- B1 B2 B3";
    return rule;
}

/// What the gate of a modelled counter follows, in words (or, where no --counter asked for it, that it is not gated).
std::string modelled_text(const Read& in, const gate::Judgement& j) {
    const bool branches = pmc::is_modelled_branch_event_name(in.counter.name);
    const std::string rule =
        j.modelled_default_threshold
            ? fmt::format("a change fails only when it is at least {} of the label's BASE value and at least {} "
                          "events (the floor: {:g} events or {:g}% of the counter's whole-run BASE total, {}; the "
                          "modelled counters' default, which --threshold replaces: --threshold 0 fails any change)",
                          j.threshold->text, runs::show(j.floor, ""), gate::modelled_floor_events,
                          gate::modelled_floor_share_percent, runs::show(in.base_run_total, ""))
        : j.threshold && j.threshold->value > 0
            ? fmt::format("a change under {} passing (--threshold)", j.threshold->text)
            : std::string("any change failing (--threshold 0: no share, no floor)");
    const std::string model = fmt::format("{} is modelled by pmc's {} (pmc emulate {}), not measured", in.counter.name,
                                          branches ? "branch predictor model" : "cache model",
                                          branches ? "--branches" : "--cache");
    if (in.modelled_unasked)
        return model + fmt::format(": shown because the profiles record no counter that is not modelled, and not "
                                   "gated: a modelled counter is gated only when --counter names it (--counter {})",
                                   in.counter.name);
    return model + ": it is gated because --counter named it, by the exact rule; " + rule;
}

std::string label_list(const std::vector<const Row*>& some) {
    std::string out;
    for (std::size_t i = 0; i < some.size() && i < 10; ++i) out += fmt::format("\n  {}: {}", some[i]->label, some[i]->text);
    if (some.size() > 10) out += fmt::format("\n  ... and {} more", some.size() - 10);
    return out;
}

/// The gate's message on stderr, after the report (a CI log then shows the table that failed it); its exit status.
int say_gate(const DiffOptions& o, const Read& in, const gate::Judgement& j, const std::vector<const Row*>& changed,
             const std::vector<const Row*>& unjudged) {
    std::fflush(stdout); // the report first: in a log of both streams (2>&1) the message follows the table whole
    if (!o.gate_on || in.status != 0) return in.status;
    if (in.modelled_unasked) {
        std::string names;
        for (const auto& k : in.all[0].profile.counters) names += (names.empty() ? "" : ", ") + k.name;
        fmt::print(stderr,
                   "pmc diff: {} cannot judge (exit status {}): the profiles record only modelled counters ({}), and "
                   "no --counter named one. A modelled counter is gated only when asked: name the one to gate "
                   "(pmc diff {} --counter {} ...; through pmc-gate: --diff-options \"--counter {}\"), or record a "
                   "counted one too (instructions:u)\n",
                   o.gate_option, gate::cannot_judge_status, names, o.gate_option, in.counter.name, in.counter.name);
        return gate::cannot_judge_status;
    }
    if (const std::size_t n = unjudged.size()) {
        const bool one_run = std::any_of(unjudged.begin(), unjudged.end(),
                                         [](const Row* r) { return r->j.verdict == Verdict::no_estimate; });
        const std::string why =
            one_run ? in.exact.exact ? "the runs of one side differ and the other side has one run: no noise estimate"
                                     : fmt::format("one run a side gives no noise estimate, and {} is not exact: {}",
                                                   in.counter.name, in.exact.why)
                    : fmt::format("with {} and {} runs the smallest p-value is {}, above Holm's first bar {} / {} "
                                  "= {}: no label can be flagged",
                                  in.nb, in.na, p_text(j.p_floor), p_text(o.judging.alpha), j.judged_by_noise,
                                  p_text(o.judging.alpha / static_cast<double>(j.judged_by_noise)));
        fmt::print(stderr,
                   "pmc diff: {} cannot judge {} label{} (exit status {}): {}. Record {} runs a side (pmc diff {} "
                   "A1 ... A{} -- B1 ... B{}){}:{}\n",
                   o.gate_option, n, n == 1 ? "" : "s", gate::cannot_judge_status, why, j.runs_needed, o.gate_option,
                   j.runs_needed, j.runs_needed,
                   in.exact.exact ? "" : ", or record an exact counter (instructions:u under pmc emulate, one run a side)",
                   label_list(unjudged));
        if (!changed.empty())
            fmt::print(stderr, "pmc diff: {}: and {} label{} changed:{}\n", o.gate_option, changed.size(),
                       changed.size() == 1 ? "" : "s", label_list(changed));
        return gate::cannot_judge_status;
    }
    const std::size_t n = changed.size();
    if (n == 0) return 0;
    fmt::print(stderr, "pmc diff: {}: {} label{} changed (exit status {}):{}\n", o.gate_option, n, n == 1 ? "" : "s",
               gate::changed_status, label_list(changed));
    return j.exit_status();
}

/// What both renderings show.
struct View {
    std::vector<const Row*> shown, changed, unjudged;
    std::size_t flagged_beyond_top = 0;
    std::vector<std::string> nondeterministic;
    bool assumes_determinism = false;
    std::string rule, gate_verdict;
    std::map<Verdict, std::size_t> verdicts;
    int exit_status = 0;
};

View view_of(const DiffOptions& o, Read& in, const gate::Judgement& j) {
    View v;
    for (Row& r : in.table) r.text = verdict_text(r.j, in, j, o.judging);
    std::stable_sort(in.table.begin(), in.table.end(),
                     [](const Row& x, const Row& y) { return std::fabs(x.j.delta) > std::fabs(y.j.delta); });
    // --top N: the N largest, and every flagged label whatever its place (a gate's reason is never hidden).
    for (std::size_t i = 0; i < in.table.size(); ++i)
        if (!o.top || i < o.top || in.table[i].j.flagged()) v.shown.push_back(&in.table[i]);
    v.flagged_beyond_top = o.top && v.shown.size() > o.top ? v.shown.size() - o.top : 0;
    for (const Row& r : in.table) {
        if (r.j.nondeterministic_before || r.j.nondeterministic_after)
            v.nondeterministic.push_back(r.label + (r.j.nondeterministic_before && r.j.nondeterministic_after ? " (both sides)"
                                                    : r.j.nondeterministic_before                            ? " (BASE)"
                                                                                                             : " (NEW)"));
        if (r.j.fails && !in.modelled_unasked) v.changed.push_back(&r);
        if (r.j.unjudged && !in.modelled_unasked) v.unjudged.push_back(&r);
        ++v.verdicts[r.j.verdict];
    }
    v.assumes_determinism = in.exact.exact && in.nb == 1 && in.na == 1;
    v.rule = rule_text(in, j, o.judging, v.assumes_determinism);
    v.gate_verdict = in.status != 0         ? "not judged"
                     : in.modelled_unasked ? gate::to_string(gate::Overall::cannot_judge)
                                           : gate::to_string(j.overall());
    v.exit_status = !o.gate_on || in.status != 0 ? in.status
                    : in.modelled_unasked        ? gate::cannot_judge_status
                                                 : j.exit_status();
    return v;
}

void render_json(const DiffOptions& o, const Read& in, const gate::Judgement& j, const View& v) {
    const auto& all = in.all;
    const std::size_t nb = in.nb, na = in.na;
    pmc::JsonWriter w;
    w.begin_object();
    for (auto [key, from, n] : {std::tuple{"before", std::size_t{0}, nb}, std::tuple{"after", nb, na}}) {
        w.key(key).begin_array();
        for (std::size_t r = from; r < from + n; ++r) w.value(all[r].file);
        w.end_array();
    }
    w.field("counter", in.counter.name).field("unit", in.counter.unit).field("exact", in.exact.exact);
    w.field("exact_reason", in.exact.why);
    if (in.modelled) w.field("modelled", modelled_text(in, j));
    if (!in.modelled_primary_left_out.empty())
        w.key("modelled_primary_left_out").begin_object().field("counter", in.modelled_primary_left_out)
            .field("compared_instead", in.counter.name).field("to_compare_it", "--counter " + in.modelled_primary_left_out)
            .end_object();
    else w.key("modelled_primary_left_out").null();
    w.field("rule", v.rule).field("chance_apart", j.p_floor);
    w.field("alpha", o.judging.alpha).field("judged_by_noise", j.judged_by_noise).field("total_rule", runs::total_rule);
    w.field("assumes_determinism", v.assumes_determinism).key("nondeterministic_labels").begin_array();
    for (const auto& l : v.nondeterministic) w.value(l);
    w.end_array();
    auto side_json = [&](const char* key, const Side& s) {
        w.key(key).begin_object().field("calls", s.c.median).field("self", s.s.median).field("total", s.t.median);
        w.field("self_min", s.s.min).field("self_max", s.s.max).end_object();
    };
    w.key("labels").begin_array();
    for (const Row* shown_row : v.shown) {
        const Row& r = *shown_row;
        w.begin_object().field("label", r.label).field("verdict", gate::to_string(r.j.verdict)).field("text", r.text);
        w.field("fails_gate", r.j.fails && !in.modelled_unasked).field("under_threshold", r.j.under_threshold);
        if (r.j.accepted) w.field("accepted", r.j.accepted->text).field("accepted_as_is", r.j.accepted_ok);
        else w.key("accepted").null();
        if (r.j.by_noise) w.field("p", r.j.p);
        side_json("before", r.before);
        side_json("after", r.after);
        w.field("calls_delta", r.after.c.median - r.before.c.median).field("self_delta", r.j.delta);
        const double sp = gate::percent_of(r.j.delta, r.before.s.median), tp = gate::percent_of(r.total_delta, r.before.t.median);
        if (std::isinf(sp)) w.key("self_delta_percent").null();
        else w.field("self_delta_percent", sp);
        w.field("total_delta", r.total_delta);
        if (std::isinf(tp)) w.key("total_delta_percent").null();
        else w.field("total_delta_percent", tp);
        w.end_object();
    }
    w.end_array();
    auto events_json = [&](const char* key, const EventTable& table, const EventTable* sums) {
        w.key(key).begin_array();
        for (const auto& [name, sides] : table) {
            const double b = runs::spread(sides.first).median, a = runs::spread(sides.second).median;
            w.begin_object().field("event", name).field("count_before", b).field("count_after", a);
            w.field("count_delta", a - b);
            if (sums) {
                const auto& s = sums->at(name);
                const double sb = runs::spread(s.first).median, sa = runs::spread(s.second).median;
                w.field("sum_before", sb).field("sum_after", sa).field("sum_delta", sa - sb);
            }
            w.end_object();
        }
        w.end_array();
    };
    events_json("instants", in.instants, nullptr);
    events_json("integers", in.integer_counts, &in.integer_sums);
    w.key("problems").begin_array();
    for (const auto& r : all)
        for (const auto& p : r.profile.problems) w.begin_object().field("file", r.file).field("problem", p).end_object();
    w.end_array();
    auto labels_json = [&](const char* key, auto keep) {
        w.key(key).begin_array();
        for (const Row& r : in.table)
            if (keep(r.j)) w.value(r.label);
        w.end_array();
    };
    w.key("gate").begin_object().field("fail_on_change", o.gate_on && o.judging.direction == gate::Direction::change);
    w.field("fail_on_increase", o.judging.direction == gate::Direction::increase);
    if (j.threshold)
        w.key("threshold").begin_object().field("value", j.threshold->value).field("percent", j.threshold->percent)
            .field("text", j.threshold->text).end_object();
    else w.key("threshold").null();
    if (o.accept_given) w.field("accept_file", o.accept_file);
    else w.key("accept_file").null();
    w.field("verdict", v.gate_verdict);
    if (in.modelled_unasked) w.field("modelled_not_named", in.counter.name);
    else w.key("modelled_not_named").null();
    w.field("changed", v.changed.size()).field("unjudged", v.unjudged.size()).key("changed_labels").begin_array();
    for (const Row* r : v.changed) w.value(r->label);
    w.end_array().key("unjudged_labels").begin_array();
    for (const Row* r : v.unjudged) w.value(r->label);
    w.end_array();
    // Flagged labels that do not fail, and why.
    labels_json("under_threshold_labels", [](const gate::LabelJudgement& r) { return r.flagged() && r.under_threshold; });
    labels_json("accepted_labels", [](const gate::LabelJudgement& r) { return r.flagged() && r.accepted && r.accepted_ok; });
    labels_json("passed_decreases",
                [](const gate::LabelJudgement& r) { return r.flagged() && !r.under_threshold && r.against_direction; });
    if (!v.unjudged.empty()) w.field("runs_needed", j.runs_needed);
    else w.key("runs_needed").null();
    w.field("exit_status", v.exit_status).end_object().end_object();
    fmt::print("{}\n", w.str());
}

void render_text(const DiffOptions& o, const Read& in, const gate::Judgement& j, const View& v) {
    const std::size_t nb = in.nb, na = in.na;
    const std::string& unit = in.counter.unit;
    auto files_text = [&](std::size_t from, std::size_t n) {
        std::string s;
        for (std::size_t r = from; r < from + n; ++r) s += (s.empty() ? "" : " ") + in.all[r].file;
        return s;
    };
    fmt::print("BASE ({} run{}): {}\nNEW  ({} run{}): {}\n", nb, nb == 1 ? "" : "s", files_text(0, nb), na,
               na == 1 ? "" : "s", files_text(nb, na));
    fmt::print("counter: {} ({}): {}{}\n", in.counter.name, unit == "events" ? "a count" : unit,
               in.exact.exact ? "exact: " : "not exact: ", in.exact.why);
    if (in.modelled) fmt::print("modelled: {}\n", modelled_text(in, j));
    if (!in.modelled_primary_left_out.empty())
        fmt::print("left out: the profiles' primary counter {} is modelled (pmc emulate), and a modelled counter is "
                   "compared only when asked: {} is compared instead (--counter {} compares and gates it)\n",
                   in.modelled_primary_left_out, in.counter.name, in.modelled_primary_left_out);
    fmt::print("verdicts are on each label's self value and calls{}: {}\n",
               nb > 1 || na > 1 ? " (before/after: the medians of each side's runs; of an even number, the mean of "
                                  "the middle two)"
                                : "",
               v.rule);
    fmt::print("totals: {}\n", runs::total_rule);
    if (!v.nondeterministic.empty()) {
        const auto& nd = v.nondeterministic;
        std::string list;
        for (std::size_t i = 0; i < nd.size() && i < 10; ++i) list += (i ? ", " : "") + nd[i];
        fmt::print("not deterministic: {} is exact, but the runs of one side differ at {} label{}: {}{}; these are "
                   "judged by the noise rule, not called changed (fix what varies between runs: seeds, addresses, "
                   "the environment)\n",
                   in.counter.name, nd.size(), nd.size() == 1 ? "" : "s", list,
                   nd.size() > 10 ? fmt::format(" and {} more", nd.size() - 10) : "");
    } else if (v.assumes_determinism) {
        fmt::print("deterministic? assumed: with one run a side, a difference is taken for a change; a program whose "
                   "runs differ (a seed from the time, addresses, the environment) makes every one of them \"changed\": "
                   "give each side two or more runs (pmc diff A1 A2 -- B1 B2) to check\n");
    }
    std::size_t width = 5;
    for (const auto& r : in.table) width = std::max(width, r.label.size());
    for (const auto* events : {&in.instants, &in.integer_counts})
        for (const auto& e : *events) width = std::max(width, e.first.size());
    width = std::min<std::size_t>(width, 40);
    std::vector<std::string> names; // every label the tables show: none cut into another's text
    for (const auto& r : in.table) names.push_back(r.label);
    for (const auto* events : {&in.instants, &in.integer_counts})
        for (const auto& e : *events) names.push_back(e.first);
    const cli::LabelColumn column(names, width);
    auto show = [&](double x) { return runs::show(x, unit); };
    fmt::print("\n{:<{}}  {:>12}  {:>11}  {:>11}  {:>11}  {:>8}  {:>12}  {:>11}  {:>11}  {}\n", "label", width, "calls",
               "self before", "self after", "self delta", "delta %", "total before", "total after", "total delta",
               "verdict");
    for (const Row* shown_row : v.shown) {
        const Row& r = *shown_row;
        const std::string calls = r.before.c.median == r.after.c.median
                                      ? fmt::format("{:.0f}", r.before.c.median)
                                      : fmt::format("{:.0f}->{:.0f}", r.before.c.median, r.after.c.median);
        fmt::print("{:<{}}  {:>12}  {:>11}  {:>11}  {:>11}  {:>8}  {:>12}  {:>11}  {:>11}  {}\n", column(r.label), width,
                   calls, show(r.before.s.median), show(r.after.s.median), signed_value(r.j.delta, unit),
                   signed_pct(gate::percent_of(r.j.delta, r.before.s.median)), show(r.before.t.median),
                   show(r.after.t.median), signed_value(r.total_delta, unit), r.text);
    }
    if (in.table.empty()) fmt::print("(no scopes on either side)\n");
    if (v.shown.size() < in.table.size())
        fmt::print("... {} more labels (--top; none of them flagged)\n", in.table.size() - v.shown.size());
    if (v.flagged_beyond_top)
        fmt::print("({} flagged label{} shown beyond --top {}: a gate's reason is never hidden)\n", v.flagged_beyond_top,
                   v.flagged_beyond_top == 1 ? "" : "s", o.top);
    std::string counts;
    for (const auto& [verdict, n] : v.verdicts)
        counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, gate::to_string(verdict));
    fmt::print("\n{} labels: {}\n", in.table.size(), counts);
    auto events_text = [&](const char* title, const EventTable& table, const EventTable* sums) {
        if (table.empty()) return;
        fmt::print("\n{:<{}}  {:>12}  {:>12}  {:>12}{}\n", title, width, "before", "after", "delta",
                   sums ? "  (sum before -> after)" : "");
        for (const auto& [name, sides] : table) {
            const double b = runs::spread(sides.first).median, a = runs::spread(sides.second).median;
            std::string extra;
            if (sums) {
                const auto& s = sums->at(name);
                extra = fmt::format("  ({:.0f} -> {:.0f})", runs::spread(s.first).median, runs::spread(s.second).median);
            }
            fmt::print("{:<{}}  {:>12.0f}  {:>12.0f}  {:>+12.0f}{}\n", column(name), width, b, a, a - b, extra);
        }
    };
    events_text("instant event", in.instants, nullptr);
    events_text("integer event", in.integer_counts, &in.integer_sums);
}

} // namespace

// parse -> read -> judge (pmc/gate.hpp) -> render.
int cmd_diff(const std::vector<std::string>& arguments) {
    DiffOptions o;
    if (auto status = parse_command_line(arguments, o)) return *status;
    gate::AcceptList accepted;
    if (o.accept_given) {
        auto read = read_accept_file(o.accept_file);
        if (auto* why = std::get_if<std::string>(&read)) {
            fmt::print(stderr, "pmc diff: {}\n", *why);
            return 1;
        }
        accepted = std::move(std::get<gate::AcceptList>(read));
        o.judging.accept = &accepted;
    }
    Read in;
    if (auto status = read_profiles(o, in)) return *status;
    o.judging.exact = in.exact.exact;
    o.judging.modelled = in.modelled;
    o.judging.modelled_floor = gate::modelled_floor(in.base_run_total);
    const gate::Judgement j = judge(in, o.judging);
    const View v = view_of(o, in, j);
    for (const gate::Accepted* a : j.unused_accepts)
        for (const auto& [label, line] : accepted)
            if (&line == a)
                fmt::print(stderr, "pmc diff: --accept '{}' line {}: no label '{}' on either side (mistyped, or gone "
                                   "from the program?)\n",
                           o.accept_file, a->line, label);
    if (o.json) render_json(o, in, j, v);
    else render_text(o, in, j, v);
    runs::report_damage("diff", in.all);
    return say_gate(o, in, j, v.changed, v.unjudged);
}

} // namespace pmc_tool
