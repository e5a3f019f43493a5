// SPDX-License-Identifier: MIT
// pmc diff BASE NEW, or pmc diff A1 A2 A3 -- B1 B2 B3: what changed between two builds or runs of one program, per
// label, in the counter's own unit, and whether each change is real: with an exact counter a difference of 1 is a
// change; with a noisy one a change counts only when it is beyond the spread the runs of each side show.
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
  --counter NAME  Compare this recorded counter (default: the first file's primary); every file
                  must have recorded it.
  --any-emulator  Compare profiles recorded under different emulators (pmc emulate: QEMU version,
                  plugin API) or emulated CPU models, with a warning. Without it such a diff exits
                  4 ("cannot judge"): the emulators' differences would show as the program's.
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
                  percentage is infinite: only a count threshold can excuse it.
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
judge a label that could fail it (too few runs; the fix is said on stderr; 4 comes before 3); 1 a
file could not be read at all, the --accept file is malformed, the command line was wrong, or the
output could not be written.
)";

namespace {

using runs::Run;
using runs::Spread;

/// The chance that the ranges of n and m exchangeable runs do not overlap: 2 / C(n + m, n).
double chance_apart(std::size_t n, std::size_t m) {
    double c = 1;
    for (std::size_t i = 1; i <= n; ++i) c = c * static_cast<double>(m + i) / static_cast<double>(i);
    return std::min(1.0, 2.0 / c);
}

/// The exact two-sided p-value of the rank-sum (Mann-Whitney) test that x and y are runs of one program: the chance,
/// over every way of splitting the n + m values into sides of n and m (all equally likely for exchangeable runs),
/// of a split at least as lopsided. Its smallest value, for sides that do not overlap, is 2 / C(n + m, n). Ties
/// count a half and are taken in the direction that makes p larger (never a false alarm from a tie).
double rank_sum_p(const std::vector<double>& x, const std::vector<double>& y) {
    const std::size_t n = x.size(), m = y.size();
    if (n == 0 || m == 0) return 1;
    double u = 0; // pairs with x < y, ties a half
    for (double a : x)
        for (double b : y) u += a < b ? 1.0 : a == b ? 0.5 : 0.0;
    const std::size_t top = n * m;
    if (top > 4000000) { // a normal approximation beyond ~2000 runs a side (continuity-corrected, conservative)
        const double mean = static_cast<double>(top) / 2;
        const double sd = std::sqrt(static_cast<double>(n) * static_cast<double>(m) * static_cast<double>(n + m + 1) / 12);
        const double z = std::max(0.0, std::fabs(u - mean) - 0.5) / sd;
        return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
    }
    // How many splits give each U: the coefficients of the Gaussian binomial [n + m choose n] in q, built as
    // prod_{i=1..n} (1 - q^(m+i)) / (1 - q^i).
    std::vector<long double> f(top + 1, 0.0L);
    f[0] = 1;
    for (std::size_t i = 1; i <= n; ++i) {
        for (std::size_t k = top; k >= m + i && k <= top; --k) f[k] -= f[k - (m + i)];
        for (std::size_t k = i; k <= top; ++k) f[k] += f[k - i];
    }
    long double all = 0;
    for (auto c : f) all += c;
    const auto lo = static_cast<std::size_t>(std::ceil(u)), hi = static_cast<std::size_t>(std::floor(u));
    long double below = 0, above = 0; // P(U <= ceil(u)), P(U >= floor(u))
    for (std::size_t k = 0; k <= top; ++k) {
        if (k <= lo) below += f[k];
        if (k >= hi) above += f[k];
    }
    return std::min(1.0, static_cast<double>(2 * std::min(below, above) / all));
}

/// --threshold: a difference of a label's self median below it does not fail the gate. A count in the counter's unit
/// (ns for a time), or a percentage of the BASE median.
struct Threshold {
    double value = 0;
    bool percent = false;
    std::string text; ///< as given
};

/// A decimal number, the whole text: digits with at most one '.' ("", " 1", "1x", "0x10", "1e3" and "inf" are not).
std::optional<double> number_text(const std::string& text) {
    const std::size_t dot = text.find('.');
    const bool digits = !text.empty() && text != "." && text.find_first_not_of("0123456789.") == std::string::npos &&
                        (dot == std::string::npos || text.find('.', dot + 1) == std::string::npos);
    if (!digits) return std::nullopt;
    return std::strtod(text.c_str(), nullptr);
}

/// Half a unit of a decimal number's last written digit ("2.5": 0.05, "120": 0.5): how far a percentage shown at
/// that precision may be from it.
double half_last_digit(const std::string& number) {
    const std::size_t dot = number.find('.');
    const std::size_t decimals = dot == std::string::npos ? 0 : number.size() - dot - 1;
    return 0.5 * std::pow(10.0, -static_cast<double>(decimals));
}

std::optional<Threshold> parse_threshold(const std::string& text) {
    Threshold t;
    t.text = text;
    t.percent = !text.empty() && text.back() == '%';
    auto v = number_text(t.percent ? text.substr(0, text.size() - 1) : text);
    if (!v || text[0] == '+' || text[0] == '-') return std::nullopt; // signless: a size, not a direction
    t.value = *v;
    return t;
}

/// One line of an --accept file: the change a label is allowed to show.
struct Accepted {
    enum class Kind { delta, added, removed } kind = Kind::delta;
    double lo = 0, hi = 0; ///< the self delta's accepted range (lo == hi: one value)
    bool percent = false;  ///< the range is in % of the BASE median
    std::string text;      ///< the value as written
    std::size_t line = 0;
    bool seen = false;     ///< the label is on some side (else said: a stale or mistyped line)
};

/// Text from a file, for a message: at most 40 bytes, bytes that are not printable as '?' (a binary file given as
/// --accept must not write control bytes to the terminal).
std::string shown(const std::string& text) {
    std::string out = text.substr(0, 40);
    for (char& c : out)
        if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
    return text.size() > 40 ? out + "..." : out;
}

/// Reads an --accept file: one label a line, "VALUE LABEL" (VALUE first: a label may hold spaces and '#'), where
/// VALUE is a signed self delta (+4, -120, +2.5%), a range MIN..MAX of them (-100..0, 0%..5%), "new" or "gone";
/// blank lines and lines starting with '#' are comments. Any other line is an error, with its number.
std::variant<std::map<std::string, Accepted>, std::string> read_accept_file(const std::string& file) {
    std::ifstream in(file);
    if (!in) return fmt::format("--accept '{}': {}", file, std::strerror(errno));
    std::map<std::string, Accepted> out;
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const std::size_t first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#') continue;
        auto bad = [&](const std::string& why) {
            return fmt::format("--accept '{}' line {}: {} (a line is VALUE LABEL: +4 typeck, -100..0 parse, 0%..5% "
                               "scan, new link, gone old_pass; # starts a comment line)",
                               file, number, why);
        };
        const std::size_t gap = line.find_first_of(" \t", first);
        const std::size_t label_at = gap == std::string::npos ? gap : line.find_first_not_of(" \t", gap);
        if (label_at == std::string::npos) return bad("no label after the value '" + shown(line.substr(first)) + "'");
        Accepted a;
        a.text = line.substr(first, gap - first);
        a.line = number;
        std::string label = line.substr(label_at);
        label.erase(label.find_last_not_of(" \t") + 1);
        if (a.text == "new") a.kind = Accepted::Kind::added;
        else if (a.text == "gone") a.kind = Accepted::Kind::removed;
        else {
            const std::size_t dots = a.text.find("..");
            const std::string lo = a.text.substr(0, dots), hi = dots == std::string::npos ? lo : a.text.substr(dots + 2);
            auto value = [](std::string v, bool& percent) -> std::optional<double> {
                percent = !v.empty() && v.back() == '%';
                if (percent) v.pop_back();
                const bool sign = !v.empty() && (v[0] == '+' || v[0] == '-');
                auto n = number_text(sign ? v.substr(1) : v);
                if (!n || (sign && v.size() > 1 && (v[1] == '+' || v[1] == '-'))) return std::nullopt;
                return v[0] == '-' ? -*n : *n;
            };
            bool lo_percent = false, hi_percent = false;
            const auto l = value(lo, lo_percent), h = value(hi, hi_percent);
            if (!l || !h) return bad("'" + shown(a.text) + "' is not a self delta (+4, -2.5%), a range (-100..0) or new/gone");
            if (lo_percent != hi_percent) return bad("'" + a.text + "': both ends in % or neither");
            if (*l > *h) return bad("'" + a.text + "': the range's low end is above its high end");
            a.lo = *l;
            a.hi = *h;
            a.percent = lo_percent;
            if (a.percent && dots == std::string::npos) { // one percentage matches at the precision written:
                const double half = half_last_digit(lo.substr(0, lo.size() - 1)); // +120.2% is what pmc diff showed
                a.lo -= half;
                a.hi += half;
            }
        }
        if (!out.emplace(label, a).second)
            return bad(fmt::format("label '{}' is already accepted on line {}", shown(label), out.at(label).line));
    }
    if (in.bad()) return fmt::format("--accept '{}': {}", file, std::strerror(errno));
    return out;
}

/// The smallest number of runs a side for which Holm's first step can pass over `labels` labels at `alpha`.
std::size_t runs_needed(std::size_t labels, double alpha) {
    std::size_t n = 2;
    while (n < 1000 && chance_apart(n, n) > alpha / static_cast<double>(std::max<std::size_t>(labels, 1))) ++n;
    return n;
}

/// One side's values for one label: one entry per run (0 where the run does not have it).
struct Side {
    std::vector<double> calls, self, total;
    Spread c, s, t;
    bool present() const { return c.max > 0; }
};

enum class Verdict { unchanged, changed, beyond_noise, within_noise, no_estimate, added, removed };

const char* verdict_key(Verdict v) {
    switch (v) {
    case Verdict::unchanged: return "unchanged";
    case Verdict::changed: return "changed";
    case Verdict::beyond_noise: return "beyond the noise";
    case Verdict::within_noise: return "within the noise";
    case Verdict::no_estimate: return "no noise estimate";
    case Verdict::added: return "new";
    case Verdict::removed: return "gone";
    }
    return "";
}

struct Row {
    std::string label;
    Side before, after;
    double self_delta = 0, total_delta = 0;
    Verdict verdict = Verdict::unchanged;
    std::string text; ///< the verdict in words
    double p = 1;     ///< judged by the noise rule: the rank-sum test's p-value
    bool by_noise = false; ///< judged by the noise rule (p is set)
    bool nondeterministic_before = false, nondeterministic_after = false; ///< an exact counter's runs disagree
    std::size_t runs_before = 0, runs_after = 0; ///< runs of each side that recorded the label
    // The gate's judgement of a flagged label: under the threshold, a decrease under --fail-on-increase, accepted.
    bool under_threshold = false, increase = false;
    const Accepted* accepted = nullptr; ///< its --accept line
    bool accepted_ok = false;           ///< its change is as accepted
    bool fails = false;                 ///< flagged, and none of the above excuses it: fails the gate
    bool only_before() const { return runs_after == 0; }
    bool only_after() const { return runs_before == 0; }
    bool flagged() const {
        return verdict == Verdict::changed || verdict == Verdict::beyond_noise || verdict == Verdict::added ||
               verdict == Verdict::removed;
    }
};

double pct(double delta, double base) { return base != 0 ? 100.0 * delta / std::fabs(base) : (delta != 0 ? std::copysign(HUGE_VAL, delta) : 0.0); }

std::string signed_value(double v, const std::string& unit) { return (v > 0 ? "+" : "") + runs::show(v, unit); }

/// A p-value for people: a percentage.
std::string p_text(double p) { return p < 0.001 ? fmt::format("{:.2g}%", 100 * p) : fmt::format("{:.1f}%", 100 * p); }

std::string signed_pct(double p) {
    if (std::isinf(p)) return p > 0 ? "+inf" : "-inf";
    return fmt::format("{:+.1f}%", p);
}

} // namespace

int cmd_diff(const std::vector<std::string>& arguments) {
    pmc_cli::CommandLine cl("pmc diff", diff_help);
    std::vector<std::string> before_files, after_files;
    std::string counter_name, top_text, alpha_text, threshold_text, accept_file;
    bool json = false, separated = false, fail_on_change = false, fail_on_increase = false;
    double alpha = 0.05; // the family-wise false-alarm rate of the noise rule
    cl.flag("--json", json);
    cl.flag("--fail-on-change", fail_on_change);
    cl.flag("--fail-on-increase", fail_on_increase);
    pmc_cli::Option threshold_option =
        cl.option("--threshold", threshold_text, "a count (e.g. 100) or a percentage (e.g. 0.5%)");
    pmc_cli::Option accept_option = cl.option("--accept", accept_file, "a file of accepted changes");
    pmc_cli::Option alpha_option =
        cl.option("--alpha", alpha_text, "a chance between 0 and 1 (e.g. 0.05 for 5 %)");
    cl.option("--counter", counter_name, "a counter name");
    bool any_emulator = false;
    cl.flag("--any-emulator", any_emulator);
    pmc_cli::Option top_option = cl.option("--top", top_text, "a whole number");
    cl.allow_extras(); // the files, with the '--' between the sides, are read below
    if (auto status = cl.parse(arguments)) return *status;
    for (const auto& a : cl.remaining()) {
        if (a == "--" && !separated) separated = true;
        else if (a == "--") return cl.usage_error("one '--' between the BASE runs and the NEW runs");
        else if (!separated && a.size() > 1 && a[0] == '-') return cl.usage_error(fmt::format("unknown option '{}'", a));
        else (separated ? after_files : before_files).push_back(a);
    }
    if (alpha_option.given()) {
        char* end = nullptr;
        alpha = std::strtod(alpha_text.c_str(), &end);
        if (alpha_text.empty() || *end || !(alpha > 0 && alpha < 1))
            return cl.usage_error("--alpha needs a chance between 0 and 1 (e.g. 0.05 for 5 %)");
    }
    const auto top_given = pmc_cli::whole_number_option(top_option, top_text, 0, SIZE_MAX);
    if (!top_given) return cl.usage_error("--top needs a whole number");
    const std::size_t top = static_cast<std::size_t>(*top_given);
    if (fail_on_change && fail_on_increase)
        return cl.usage_error("--fail-on-change (both ways) and --fail-on-increase exclude each other");
    const bool gate_on = fail_on_change || fail_on_increase;
    const char* const gate_option = fail_on_increase ? "--fail-on-increase" : "--fail-on-change";
    std::optional<Threshold> threshold;
    if (threshold_option.given()) {
        threshold = parse_threshold(threshold_text);
        if (!threshold)
            return cl.usage_error(fmt::format("--threshold needs a count (e.g. 100) or a percentage (e.g. 0.5%), not "
                                              "'{}'",
                                              threshold_text));
    }
    if (accept_option.given() && accept_file.empty()) return cl.usage_error("--accept needs a file");
    if (!separated) {
        if (before_files.size() != 2)
            return cl.usage_error("give BASE and NEW (pmc diff BASE NEW), or several runs a side with '--' between "
                                  "them (pmc diff A1 A2 A3 -- B1 B2 B3)");
        after_files.push_back(before_files.back());
        before_files.pop_back();
    }
    if (before_files.empty() || after_files.empty())
        return cl.usage_error("each side needs at least one profile (BASE... -- NEW...)");

    std::map<std::string, Accepted> accepted;
    if (accept_option.given()) {
        auto read = read_accept_file(accept_file);
        if (auto* why = std::get_if<std::string>(&read)) {
            fmt::print(stderr, "pmc diff: {}\n", *why);
            return 1;
        }
        accepted = std::move(std::get<0>(read));
    }

    std::vector<Run> before, after;
    for (auto [files, side] : {std::pair{&before_files, &before}, std::pair{&after_files, &after}})
        if (auto failure = runs::load(*files, *side)) {
            fmt::print(stderr, "pmc diff: {}\n", *failure);
            return 1;
        }
    // One counter, in every file of both sides.
    std::vector<Run> all;
    for (auto* side : {&before, &after})
        for (auto& r : *side) all.push_back(std::move(r));
    if (auto failure = runs::choose_counter(all, counter_name)) {
        fmt::print(stderr, "pmc diff: {}\n", *failure);
        return 1;
    }
    // Runs from two emulators (QEMU versions, plugin APIs) or two emulated CPU models count some code differently
    // (QEMU 7.2 and 10 differed in 18 of 38 labels of one program): a difference would be theirs, not the program's.
    for (const Run& r : all) {
        const Run& first = all[0];
        if (r.profile.emulator == first.profile.emulator &&
            (r.profile.emulator.empty() || r.profile.cpu == first.profile.cpu))
            continue;
        auto what = [](const Run& x) {
            return x.profile.emulator.empty() ? "not emulated: " + x.profile.cpu
                                              : x.profile.emulator + "; " + x.profile.cpu;
        };
        fmt::print(stderr, "pmc diff: {}: the profiles come from different emulators or emulated CPUs:\n  {}: {}\n  "
                           "{}: {}\n",
                   any_emulator ? "warning" : "cannot judge", first.file, what(first), r.file, what(r));
        if (!any_emulator) {
            fmt::print(stderr, "Their counts differ for the emulator's sake, not the program's. Record both sides "
                               "under one emulator (pmc emulate --qemu PATH), or compare anyway with "
                               "--any-emulator.\n");
            return 4;
        }
        break;
    }
    const std::size_t nb = before_files.size(), na = after_files.size();
    const pmc::ProfileCounter counter = all[0].profile.counters[all[0].counter];
    const std::string unit = counter.unit;
    const runs::Exactness exact = runs::exactness(all);

    // Per label and side: each run's sums.
    std::map<std::string, Row> rows;
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> instants; // per run, before / after
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> integer_counts, integer_sums;
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
        auto put = [&](auto& table, const std::string& name, double value) {
            auto& [b, a] = table[name];
            b.resize(nb, 0.0);
            a.resize(na, 0.0);
            (is_after ? a : b)[at] = value;
        };
        for (const auto& [name, count] : events.instants) put(instants, name, static_cast<double>(count));
        for (const auto& [name, cs] : events.integers) {
            put(integer_counts, name, static_cast<double>(cs.first));
            put(integer_sums, name, static_cast<double>(cs.second));
        }
    }
    std::vector<Row> table;
    for (auto& [label, row] : rows) {
        for (auto [side, n] : {std::pair{&row.before, nb}, std::pair{&row.after, na}}) {
            for (auto* v : {&side->calls, &side->self, &side->total}) v->resize(n, 0.0);
            side->c = runs::spread(side->calls);
            side->s = runs::spread(side->self);
            side->t = runs::spread(side->total);
        }
        const Side &b = row.before, &a = row.after;
        row.self_delta = a.s.median - b.s.median;
        row.total_delta = a.t.median - b.t.median;
        const bool sides_agree = b.s.range() == 0 && a.s.range() == 0 && b.c.range() == 0 && a.c.range() == 0;
        const std::string calls_note =
            b.c.median != a.c.median ? fmt::format("; calls {:.0f} -> {:.0f}", b.c.median, a.c.median) : "";
        if (exact.exact) {
            row.nondeterministic_before = b.present() && (b.s.range() != 0 || b.c.range() != 0);
            row.nondeterministic_after = a.present() && (a.s.range() != 0 || a.c.range() != 0);
        }
        row.runs_before = static_cast<std::size_t>(std::count_if(b.calls.begin(), b.calls.end(), [](double c) { return c > 0; }));
        row.runs_after = static_cast<std::size_t>(std::count_if(a.calls.begin(), a.calls.end(), [](double c) { return c > 0; }));
        // Whether each side recorded the label in all its runs or in none: then its presence is no accident.
        const bool presence_agrees =
            (row.runs_before == 0 || row.runs_before == nb) && (row.runs_after == 0 || row.runs_after == na);
        if (exact.exact && presence_agrees && (row.only_before() || row.only_after())) {
            // An exact counter, and every run of one side has it and no run of the other: a change, whatever the
            // values. A label in some runs of a side only is judged by the noise rule like any other (below): a
            // label that one run in five records is not a change of the program.
            row.verdict = row.only_before() ? Verdict::removed : Verdict::added;
            row.text = row.only_before() ? "gone (not in NEW)" : "new (not in BASE)";
        } else if (sides_agree && row.self_delta == 0 && b.c.median == a.c.median) {
            // The same values in every run of both sides (pmc diff a.pmcprof a.pmcprof): nothing changed, whatever
            // the counter; no noise estimate is needed to say so.
            row.verdict = Verdict::unchanged;
            row.text = exact.exact ? "unchanged" : "unchanged (identical values)";
        } else if (exact.exact && sides_agree) {
            const bool same = row.self_delta == 0 && b.c.median == a.c.median;
            row.verdict = same ? Verdict::unchanged : Verdict::changed;
            row.text = same ? "unchanged" : fmt::format("changed by {}{}", signed_value(row.self_delta, unit), calls_note);
        } else if (nb < 2 || na < 2) {
            row.verdict = Verdict::no_estimate;
            row.text = row.only_after()    ? "no noise estimate (one run a side; new: not in BASE)"
                       : row.only_before() ? "no noise estimate (one run a side; gone: not in NEW)"
                                           : "no noise estimate (one run a side)";
        } else {
            // Judged by the noise rule below, once every label's p-value is known (Holm's step-down).
            row.p = rank_sum_p(b.self, a.self);
            row.by_noise = true;
            row.verdict = Verdict::within_noise;
            row.text = calls_note;
        }
        table.push_back(std::move(row));
    }
    // Holm's step-down over the labels judged by noise: the smallest p-value is compared with alpha / L, the next
    // with alpha / (L - 1), ..., stopping at the first that fails. The chance that runs of one unchanged program
    // flag any label is then at most alpha, however many labels there are and however they depend on each other.
    std::vector<Row*> judged;
    for (auto& r : table)
        if (r.verdict == Verdict::within_noise) judged.push_back(&r);
    std::stable_sort(judged.begin(), judged.end(), [](const Row* x, const Row* y) { return x->p < y->p; });
    // A label Holm rejects is flagged only when its medians also differ by more than either side's runs spread
    // (max - min): the test assumes the runs are exchangeable, and a machine whose load changes while they are
    // recorded makes them less so (wall-time's heavy tails). Flagging a subset of Holm's rejections keeps the bound.
    const double p_floor = chance_apart(nb, na); // the smallest p-value nb and na runs can give
    bool stepping = true;
    for (std::size_t i = 0; i < judged.size(); ++i) {
        Row& r = *judged[i];
        const double needed = alpha / static_cast<double>(judged.size() - i);
        stepping = stepping && r.p <= needed;
        const double spread = std::max(r.before.s.range(), r.after.s.range());
        // A label only one side recorded (in some of its runs): said, and called new or gone when flagged.
        const std::string calls_note =
            r.text + (r.only_after()    ? fmt::format("; new: in {} of {} NEW runs, no BASE run", r.runs_after, na)
                      : r.only_before() ? fmt::format("; gone: in {} of {} BASE runs, no NEW run", r.runs_before, nb)
                                        : "");
        if (stepping && std::fabs(r.self_delta) > spread) {
            r.verdict = r.only_after() ? Verdict::added : r.only_before() ? Verdict::removed : Verdict::beyond_noise;
            r.text = fmt::format("{}beyond the noise: {} (p {}){}",
                                 r.only_after() ? "new, " : r.only_before() ? "gone, " : "",
                                 signed_value(r.self_delta, unit), p_text(r.p), calls_note);
        } else if (stepping) {
            r.text = fmt::format("within the noise (p {}, but the medians differ by less than a side's spread, {}){}",
                                 p_text(r.p), runs::show(spread, unit), calls_note);
        } else {
            r.text = fmt::format("within the noise (p {}{}){}", p_text(r.p),
                                 r.p <= alpha ? fmt::format(", needed <= {}", p_text(needed)) : "",
                                 calls_note);
        }
    }
    // The gate's rule, per label: a flagged label fails unless its self delta is under --threshold, it is a decrease
    // under --fail-on-increase, or --accept accepts its change as it is (an accepted label that changed otherwise
    // still fails).
    for (auto& r : table) {
        if (threshold) {
            const double size =
                threshold->percent ? std::fabs(pct(r.self_delta, r.before.s.median)) : std::fabs(r.self_delta);
            r.under_threshold = size < threshold->value; // a new label's % is infinite: never under a percentage
        }
        r.increase = r.self_delta > 0 || (r.self_delta == 0 && r.after.c.median > r.before.c.median);
        if (auto it = accepted.find(r.label); it != accepted.end()) {
            Accepted& a = it->second;
            a.seen = true;
            r.accepted = &a;
            const double value = a.percent ? pct(r.self_delta, r.before.s.median) : r.self_delta;
            r.accepted_ok = a.kind == Accepted::Kind::added     ? r.only_after()
                            : a.kind == Accepted::Kind::removed ? r.only_before()
                                                                : value >= a.lo && value <= a.hi;
        }
        const bool excused = r.under_threshold || (fail_on_increase && !r.increase) || (r.accepted && r.accepted_ok);
        r.fails = r.flagged() && !excused;
        if (!r.flagged()) continue;
        if (r.under_threshold) r.text += fmt::format(" (under the threshold {}: does not fail)", threshold->text);
        else if (fail_on_increase && !r.increase) r.text += " (a decrease: does not fail --fail-on-increase)";
        else if (r.accepted)
            r.text += fmt::format(" ({}: {}, --accept line {}{})", r.accepted_ok ? "accepted" : "not as accepted",
                                  r.accepted->text, r.accepted->line, r.accepted_ok ? "" : ": fails");
    }
    std::stable_sort(table.begin(), table.end(), [](const Row& x, const Row& y) {
        return std::fabs(x.self_delta) > std::fabs(y.self_delta);
    });
    // --top N: the N largest, and every flagged label whatever its place (a gate's reason is never hidden).
    std::vector<const Row*> rows_shown;
    for (std::size_t i = 0; i < table.size(); ++i)
        if (!top || i < top || table[i].flagged()) rows_shown.push_back(&table[i]);
    const std::size_t flagged_beyond_top = top && rows_shown.size() > top ? rows_shown.size() - top : 0;

    // An exact counter whose runs of one side disagree: the program is not deterministic there.
    std::vector<std::string> nondeterministic;
    for (const auto& r : table)
        if (r.nondeterministic_before || r.nondeterministic_after)
            nondeterministic.push_back(r.label + (r.nondeterministic_before && r.nondeterministic_after ? " (both sides)"
                                                  : r.nondeterministic_before                            ? " (BASE)"
                                                                                                         : " (NEW)"));
    const bool assumes_determinism = exact.exact && nb == 1 && na == 1;

    std::string rule = "identical values in every run of both sides are \"unchanged\", whatever the counter";
    if (exact.exact)
        rule += "; exact counter, each side's runs agreeing: equal self values and calls are \"unchanged\", any "
                "difference \"changed by N\"";
    if (assumes_determinism)
        rule += " (one run a side: this assumes the program is deterministic; give each side two or more runs to "
                "check it)";
    if (!judged.empty())
        rule += fmt::format(
            "; {}a change is \"beyond the noise\" when the rank-sum test of the {} BASE and {} NEW runs' self "
            "values passes Holm's step-down at {} over the {} label{} so judged (the smallest p-value compared with "
            "{} / {}, the next with {} / {}, ...) and the medians differ by more than either side's spread (max - "
            "min): an unchanged program fails the gate with a chance of at most {}, whatever the number of labels; "
            "{} and {} runs give p-values no smaller than {}{}",
            exact.exact ? "where runs of one side differ (not deterministic): " : "", nb, na, p_text(alpha),
            judged.size(), judged.size() == 1 ? "" : "s", p_text(alpha), judged.size(),
            p_text(alpha), judged.size() > 1 ? judged.size() - 1 : 1, p_text(alpha), nb, na, p_text(p_floor),
            !judged.empty() && p_floor > alpha / static_cast<double>(judged.size())
                ? fmt::format(", above {} / {}: no label can be flagged; run each side more often (the smallest "
                              "p-value is 2 / C(n + m, n))",
                              p_text(alpha), judged.size())
                : "");
    if (!exact.exact && (nb < 2 || na < 2) &&
        std::any_of(table.begin(), table.end(), [](const Row& r) { return r.verdict == Verdict::no_estimate; }))
        rule += "; with one run a side there is no noise estimate: run each side several times and give "
                "pmc diff A1 A2 A3 -- B1 B2 B3";
    std::map<Verdict, std::size_t> verdicts;
    for (const auto& r : table) ++verdicts[r.verdict];
    // A damaged file, or one whose program stopped with scopes open (killed): its verdicts are not trusted.
    const int read_status = std::any_of(all.begin(), all.end(), [](const Run& r) { return r.cut(); }) ? 2 : 0;
    // The gate's judgement (--fail-on-change, or --fail-on-increase), also put in the JSON (so a CI reading it sees
    // the verdict): the labels that fail it, and those it cannot judge though they could fail it (no noise estimate,
    // or too few runs for Holm's bar to be reachable). A gate that cannot judge fails too, with its own status:
    // passing it would hide every change there.
    std::vector<const Row*> changed_rows, unjudged_rows;
    const bool noise_blind = !judged.empty() && p_floor > alpha / static_cast<double>(judged.size());
    for (const auto& r : table) {
        if (r.fails) changed_rows.push_back(&r);
        const bool could_fail =
            !r.under_threshold && (!fail_on_increase || r.increase) && !(r.accepted && r.accepted_ok);
        if (could_fail && (r.verdict == Verdict::no_estimate || (noise_blind && r.verdict == Verdict::within_noise)))
            unjudged_rows.push_back(&r);
    }
    const std::size_t unjudged = unjudged_rows.size();
    // The fix: runs a side for Holm's first step to be reachable over the labels that need the noise rule.
    const std::size_t needs_noise_rule = judged.size() + (verdicts.count(Verdict::no_estimate) ? verdicts.at(Verdict::no_estimate) : 0);
    const std::size_t needed_runs = runs_needed(needs_noise_rule, alpha);
    const char* const gate_verdict = read_status != 0      ? "not judged"
                                     : unjudged             ? "cannot judge"
                                     : changed_rows.empty() ? "unchanged"
                                                            : "changed";
    constexpr int cannot_judge_status = 4; // distinct from 1 (usage, unreadable), 2 (damage) and 3 (a change)
    const int exit_status = !gate_on || read_status != 0 ? read_status
                            : unjudged                   ? cannot_judge_status
                            : changed_rows.empty()       ? 0
                                                         : 3;
    for (const auto& [label, a] : accepted)
        if (!a.seen)
            fmt::print(stderr, "pmc diff: --accept '{}' line {}: no label '{}' on either side (mistyped, or gone "
                               "from the program?)\n",
                       accept_file, a.line, label);
    auto label_list = [](const std::vector<const Row*>& some) {
        std::string out;
        for (std::size_t i = 0; i < some.size() && i < 10; ++i) out += fmt::format("\n  {}: {}", some[i]->label, some[i]->text);
        if (some.size() > 10) out += fmt::format("\n  ... and {} more", some.size() - 10);
        return out;
    };
    // The gate, said after the report (a CI log then shows the table that failed it).
    auto gate = [&]() -> int {
        std::fflush(stdout); // the report first: in a log of both streams (2>&1) the message follows the table whole
        if (!gate_on || read_status != 0) return read_status;
        if (const std::size_t n = unjudged) {
            const bool one_run = std::any_of(unjudged_rows.begin(), unjudged_rows.end(),
                                             [](const Row* r) { return r->verdict == Verdict::no_estimate; });
            const std::string why =
                one_run ? exact.exact ? "the runs of one side differ and the other side has one run: no noise estimate"
                                      : fmt::format("one run a side gives no noise estimate, and {} is not exact: {}",
                                                    counter.name, exact.why)
                        : fmt::format("with {} and {} runs the smallest p-value is {}, above Holm's first bar {} / {} "
                                      "= {}: no label can be flagged",
                                      nb, na, p_text(p_floor), p_text(alpha), judged.size(),
                                      p_text(alpha / static_cast<double>(judged.size())));
            fmt::print(stderr,
                       "pmc diff: {} cannot judge {} label{} (exit status {}): {}. Record {} runs a side (pmc diff {} "
                       "A1 ... A{} -- B1 ... B{}){}:{}\n",
                       gate_option, n, n == 1 ? "" : "s", cannot_judge_status, why, needed_runs, gate_option,
                       needed_runs, needed_runs,
                       exact.exact ? "" : ", or record an exact counter (instructions:u under pmc emulate, one run a side)",
                       label_list(unjudged_rows));
            if (!changed_rows.empty())
                fmt::print(stderr, "pmc diff: {}: and {} label{} changed:{}\n", gate_option, changed_rows.size(),
                           changed_rows.size() == 1 ? "" : "s", label_list(changed_rows));
            return cannot_judge_status;
        }
        const std::size_t n = changed_rows.size();
        if (n == 0) return 0;
        fmt::print(stderr, "pmc diff: {}: {} label{} changed (exit status 3):{}\n", gate_option, n, n == 1 ? "" : "s",
                   label_list(changed_rows));
        return exit_status;
    };

    if (json) {
        pmc::JsonWriter j;
        j.begin_object();
        for (auto [key, from, n] : {std::tuple{"before", std::size_t{0}, nb}, std::tuple{"after", nb, na}}) {
            j.key(key).begin_array();
            for (std::size_t r = from; r < from + n; ++r) j.value(all[r].file);
            j.end_array();
        }
        j.field("counter", counter.name).field("unit", unit).field("exact", exact.exact);
        j.field("exact_reason", exact.why).field("rule", rule).field("chance_apart", p_floor);
        j.field("alpha", alpha).field("judged_by_noise", judged.size()).field("total_rule", runs::total_rule);
        j.field("assumes_determinism", assumes_determinism).key("nondeterministic_labels").begin_array();
        for (const auto& l : nondeterministic) j.value(l);
        j.end_array();
        auto side_json = [&](const char* key, const Side& s) {
            j.key(key).begin_object().field("calls", s.c.median).field("self", s.s.median).field("total", s.t.median);
            j.field("self_min", s.s.min).field("self_max", s.s.max).end_object();
        };
        j.key("labels").begin_array();
        for (const Row* shown_row : rows_shown) {
            const Row& r = *shown_row;
            j.begin_object().field("label", r.label).field("verdict", verdict_key(r.verdict)).field("text", r.text);
            j.field("fails_gate", r.fails).field("under_threshold", r.under_threshold);
            if (r.accepted) j.field("accepted", r.accepted->text).field("accepted_as_is", r.accepted_ok);
            else j.key("accepted").null();
            if (r.by_noise) j.field("p", r.p);
            side_json("before", r.before);
            side_json("after", r.after);
            j.field("calls_delta", r.after.c.median - r.before.c.median).field("self_delta", r.self_delta);
            const double sp = pct(r.self_delta, r.before.s.median), tp = pct(r.total_delta, r.before.t.median);
            if (std::isinf(sp)) j.key("self_delta_percent").null();
            else j.field("self_delta_percent", sp);
            j.field("total_delta", r.total_delta);
            if (std::isinf(tp)) j.key("total_delta_percent").null();
            else j.field("total_delta_percent", tp);
            j.end_object();
        }
        j.end_array();
        auto events_json = [&](const char* key, const auto& table_, const auto* sums) {
            j.key(key).begin_array();
            for (const auto& [name, sides] : table_) {
                const double b = runs::spread(sides.first).median, a = runs::spread(sides.second).median;
                j.begin_object().field("event", name).field("count_before", b).field("count_after", a);
                j.field("count_delta", a - b);
                if (sums) {
                    const auto& s = sums->at(name);
                    const double sb = runs::spread(s.first).median, sa = runs::spread(s.second).median;
                    j.field("sum_before", sb).field("sum_after", sa).field("sum_delta", sa - sb);
                }
                j.end_object();
            }
            j.end_array();
        };
        events_json("instants", instants, static_cast<decltype(&integer_sums)>(nullptr));
        events_json("integers", integer_counts, &integer_sums);
        j.key("problems").begin_array();
        for (const auto& r : all)
            for (const auto& p : r.profile.problems) j.begin_object().field("file", r.file).field("problem", p).end_object();
        j.end_array();
        auto labels_json = [&](const char* key, auto keep) {
            j.key(key).begin_array();
            for (const Row& r : table)
                if (keep(r)) j.value(r.label);
            j.end_array();
        };
        j.key("gate").begin_object().field("fail_on_change", fail_on_change).field("fail_on_increase", fail_on_increase);
        if (threshold)
            j.key("threshold").begin_object().field("value", threshold->value).field("percent", threshold->percent)
                .field("text", threshold->text).end_object();
        else j.key("threshold").null();
        if (accept_option.given()) j.field("accept_file", accept_file);
        else j.key("accept_file").null();
        j.field("verdict", gate_verdict);
        j.field("changed", changed_rows.size()).field("unjudged", unjudged).key("changed_labels").begin_array();
        for (const Row* r : changed_rows) j.value(r->label);
        j.end_array().key("unjudged_labels").begin_array();
        for (const Row* r : unjudged_rows) j.value(r->label);
        j.end_array();
        // Flagged labels that do not fail, and why.
        labels_json("under_threshold_labels", [](const Row& r) { return r.flagged() && r.under_threshold; });
        labels_json("accepted_labels", [](const Row& r) { return r.flagged() && r.accepted && r.accepted_ok; });
        labels_json("passed_decreases", [&](const Row& r) {
            return r.flagged() && !r.under_threshold && fail_on_increase && !r.increase;
        });
        if (unjudged) j.field("runs_needed", needed_runs);
        else j.key("runs_needed").null();
        j.field("exit_status", exit_status).end_object().end_object();
        fmt::print("{}\n", j.str());
        runs::report_damage("diff", all);
        return gate();
    }

    auto files_text = [&](std::size_t from, std::size_t n) {
        std::string s;
        for (std::size_t r = from; r < from + n; ++r) s += (s.empty() ? "" : " ") + all[r].file;
        return s;
    };
    fmt::print("BASE ({} run{}): {}\nNEW  ({} run{}): {}\n", nb, nb == 1 ? "" : "s", files_text(0, nb), na,
               na == 1 ? "" : "s", files_text(nb, na));
    fmt::print("counter: {} ({}): {}{}\n", counter.name, counter.unit == "events" ? "a count" : counter.unit,
               exact.exact ? "exact: " : "not exact: ", exact.why);
    fmt::print("verdicts are on each label's self value and calls{}: {}\n",
               nb > 1 || na > 1 ? " (before/after: the medians of each side's runs; of an even number, the mean of "
                                  "the middle two)"
                                : "",
               rule);
    fmt::print("totals: {}\n", runs::total_rule);
    if (!nondeterministic.empty()) {
        std::string list;
        for (std::size_t i = 0; i < nondeterministic.size() && i < 10; ++i)
            list += (i ? ", " : "") + nondeterministic[i];
        fmt::print("not deterministic: {} is exact, but the runs of one side differ at {} label{}: {}{}; these are "
                   "judged by the noise rule, not called changed (fix what varies between runs: seeds, addresses, "
                   "the environment)\n",
                   counter.name, nondeterministic.size(), nondeterministic.size() == 1 ? "" : "s", list,
                   nondeterministic.size() > 10 ? fmt::format(" and {} more", nondeterministic.size() - 10) : "");
    } else if (assumes_determinism) {
        fmt::print("deterministic? assumed: with one run a side, a difference is taken for a change; a program whose "
                   "runs differ (a seed from the time, addresses, the environment) makes every one of them \"changed\": "
                   "give each side two or more runs (pmc diff A1 A2 -- B1 B2) to check\n");
    }
    std::size_t width = 5;
    for (const auto& r : table) width = std::max(width, r.label.size());
    for (const auto* events : {&instants, &integer_counts})
        for (const auto& e : *events) width = std::max(width, e.first.size());
    width = std::min<std::size_t>(width, 40);
    std::vector<std::string> names; // every label the tables show: none cut into another's text
    for (const auto& r : table) names.push_back(r.label);
    for (const auto* events : {&instants, &integer_counts})
        for (const auto& e : *events) names.push_back(e.first);
    const cli::LabelColumn column(names, width);
    auto v = [&](double x) { return runs::show(x, unit); };
    fmt::print("\n{:<{}}  {:>12}  {:>11}  {:>11}  {:>11}  {:>8}  {:>12}  {:>11}  {:>11}  {}\n", "label", width, "calls",
               "self before", "self after", "self delta", "delta %", "total before", "total after", "total delta",
               "verdict");
    for (const Row* shown_row : rows_shown) {
        const Row& r = *shown_row;
        const std::string calls = r.before.c.median == r.after.c.median
                                      ? fmt::format("{:.0f}", r.before.c.median)
                                      : fmt::format("{:.0f}->{:.0f}", r.before.c.median, r.after.c.median);
        fmt::print("{:<{}}  {:>12}  {:>11}  {:>11}  {:>11}  {:>8}  {:>12}  {:>11}  {:>11}  {}\n", column(r.label), width, calls,
                   v(r.before.s.median), v(r.after.s.median), signed_value(r.self_delta, unit),
                   signed_pct(pct(r.self_delta, r.before.s.median)), v(r.before.t.median), v(r.after.t.median),
                   signed_value(r.total_delta, unit), r.text);
    }
    if (table.empty()) fmt::print("(no scopes on either side)\n");
    if (rows_shown.size() < table.size())
        fmt::print("... {} more labels (--top; none of them flagged)\n", table.size() - rows_shown.size());
    if (flagged_beyond_top)
        fmt::print("({} flagged label{} shown beyond --top {}: a gate's reason is never hidden)\n", flagged_beyond_top,
                   flagged_beyond_top == 1 ? "" : "s", top);
    std::string counts;
    for (const auto& [verdict, n] : verdicts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, verdict_key(verdict));
    fmt::print("\n{} labels: {}\n", table.size(), counts);
    auto events_text = [&](const char* title, const auto& table_, const auto* sums) {
        if (table_.empty()) return;
        fmt::print("\n{:<{}}  {:>12}  {:>12}  {:>12}{}\n", title, width, "before", "after", "delta",
                   sums ? "  (sum before -> after)" : "");
        for (const auto& [name, sides] : table_) {
            const double b = runs::spread(sides.first).median, a = runs::spread(sides.second).median;
            std::string extra;
            if (sums) {
                const auto& s = sums->at(name);
                extra = fmt::format("  ({:.0f} -> {:.0f})", runs::spread(s.first).median, runs::spread(s.second).median);
            }
            fmt::print("{:<{}}  {:>12.0f}  {:>12.0f}  {:>+12.0f}{}\n", column(name), width, b, a, a - b, extra);
        }
    };
    events_text("instant event", instants, static_cast<decltype(&integer_sums)>(nullptr));
    events_text("integer event", integer_counts, &integer_sums);
    runs::report_damage("diff", all);
    return gate();
}

} // namespace pmc_tool
