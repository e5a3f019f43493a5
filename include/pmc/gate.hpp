// SPDX-License-Identifier: MIT
// pmc/gate.hpp: the gate's judgement of two sides (BASE and NEW), label by label, in one place for every gate pmc has
// (pmc diff on profiles, pmc/bench.hpp's --compare on benchmark results).
//
//     pmc::gate::Options options;                   // exact or noisy, direction, threshold, accepted changes
//     options.exact = true;
//     std::vector<pmc::gate::Label> labels = ...;   // per label, one value a run on each side
//     const pmc::gate::Judgement j = pmc::gate::judge(labels, runs_before, runs_after, options);
//     return j.exit_status();                       // 0 unchanged, 3 changed, 4 cannot judge
//
// The rule. Identical values in every run of both sides: unchanged, whatever the figure. An exact figure whose runs
// agree on each side: any difference is a change (of the values, or of the calls). Otherwise the noise rule: each
// label's exact rank-sum (Mann-Whitney) p-value, Holm's step-down over the labels so judged (the family-wise chance
// that an unchanged program is flagged stays at most alpha), and the medians further apart than either side's spread.
// A flagged label then fails unless it is under the threshold (for a modelled figure by default: under 10 % or under
// an absolute floor), goes the way the direction lets pass, or is accepted as it changed. Parsing (a threshold, an accept file's text) is here so every tool reads them alike; reading files
// and printing are the tools' (parse -> judge -> render).
#pragma once

#include <pmc/config.hpp>
#include <pmc/modelled_events.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

PMC_BEGIN_NAMESPACE
namespace gate {

// ---- Modelled figures ---------------------------------------------------------------------------------------------

/// The default rule for a modelled figure (pmc emulate --cache's cache events, --branches' branch-misses): a change
/// fails only when it is both at least this share of the label's BASE value and at least the absolute floor below.
/// A model's misses move with the heap and stack layout, which an unrelated change shifts: with the code unchanged,
/// up to 4.4 % of a whole run (scripts/layout-sensitivity, docs/emulated-pmu.md), and 10 % is about twice that.
constexpr double modelled_threshold_percent = 10.0;

/// The absolute floor of the modelled default: a change must also be at least the larger of this many events and
/// modelled_floor_share_percent of the event's whole-run BASE total (every label's self value summed). A label with
/// few misses moves by a large share when the heap moves: 104 -> 120 L1 misses (+15 %), 15 -> 11 branch misses
/// (-27 %) in runs of 245,957 and 138,625, a change that only added a malloc (docs/emulated-pmu.md, "small labels").
/// The largest such move measured was 24 events and 0.26 % of a whole run's LL misses (3 misses).
constexpr double modelled_floor_events = 64;
constexpr double modelled_floor_share_percent = 0.1;

/// The floor for an event whose whole-run BASE total is `run_total`.
inline double modelled_floor(double run_total) noexcept {
    return std::max(modelled_floor_events, run_total * modelled_floor_share_percent / 100.0);
}

/// Whether `event` names a figure pmc's emulator models rather than counts (under `pmc emulate --cache`: perf's
/// generic cache events, and branch-misses; the list is pmc/modelled_events.hpp's): such a figure is gated only when
/// asked. Modifiers (":u") are ignored.
inline bool is_modelled_event(std::string_view event) { return is_modelled_event_name(event); }

// ---- Options and their parsers ------------------------------------------------------------------------------------

/// Which changes fail the gate: any, only increases, or only decreases.
enum class Direction { change, increase, decrease };

/// A change smaller than this does not fail the gate: a count in the figure's unit, or a percentage of the BASE
/// median.
struct Threshold {
    double value = 0;
    bool percent = false;
    std::string text; ///< as given ("100", "0.5%")
};

namespace detail {
/// A decimal number, the whole text: digits with at most one '.' ("", " 1", "1x", "0x10", "1e3" and "inf" are not).
inline std::optional<double> number_text(const std::string& text) {
    const std::size_t dot = text.find('.');
    const bool digits = !text.empty() && text != "." && text.find_first_not_of("0123456789.") == std::string::npos &&
                        (dot == std::string::npos || text.find('.', dot + 1) == std::string::npos);
    if (!digits) return std::nullopt;
    return std::strtod(text.c_str(), nullptr);
}

/// Half a unit of a decimal number's last written digit ("2.5": 0.05, "120": 0.5).
inline double half_last_digit(const std::string& number) {
    const std::size_t dot = number.find('.');
    const std::size_t decimals = dot == std::string::npos ? 0 : number.size() - dot - 1;
    return 0.5 * std::pow(10.0, -static_cast<double>(decimals));
}

/// Text from a file, for a message: at most 40 bytes, bytes that are not printable as '?' (a binary file must not
/// write control bytes to the terminal).
inline std::string shown(const std::string& text) {
    std::string out = text.substr(0, 40);
    for (char& c : out)
        if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
    return text.size() > 40 ? out + "..." : out;
}
} // namespace detail

/// Whether `text` is a threshold parse_threshold takes, checked without allocating (pmc/bench.hpp checks its
/// --threshold before measuring, when nothing may touch the heap).
inline bool threshold_syntax(std::string_view text) noexcept {
    if (!text.empty() && text.back() == '%') text.remove_suffix(1);
    const std::size_t dot = text.find('.');
    return !text.empty() && text != "." && text.find_first_not_of("0123456789.") == std::string_view::npos &&
           (dot == std::string_view::npos || text.find('.', dot + 1) == std::string_view::npos);
}

/// "100" or "0.5%": a size without a sign, a count in the figure's unit or a percentage of the BASE value; pmc diff
/// and pmc/bench.hpp read --threshold with it. Nothing for any other text.
inline std::optional<Threshold> parse_threshold(const std::string& text) {
    if (!threshold_syntax(text)) return std::nullopt; // signless: a size, not a direction
    Threshold t;
    t.text = text;
    t.percent = text.back() == '%';
    t.value = std::strtod(text.c_str(), nullptr); // stops at the '%'
    return t;
}

/// One line of an accept file: the change a label is allowed to show.
struct Accepted {
    enum class Kind { delta, added, removed } kind = Kind::delta;
    double lo = 0, hi = 0; ///< the delta's accepted range (lo == hi: one value)
    bool percent = false;  ///< the range is in % of the BASE median
    std::string text;      ///< the value as written
    std::size_t line = 0;
};

/// Accepted changes by label.
using AcceptList = std::map<std::string, Accepted>;

/// Why an accept file's text was refused: the line, and what is wrong with it.
struct AcceptError {
    std::size_t line = 0;
    std::string why;
};

/// How an accept line is written, for a message about a malformed one.
inline const char* const accept_format_hint =
    "a line is VALUE LABEL: +4 typeck, -100..0 parse, 0%..5% scan, new link, gone old_pass; # starts a comment line";

/// An accept file's text: one label a line, "VALUE LABEL" (VALUE first: a label may hold spaces and '#'), where VALUE
/// is a signed delta (+4, -120, +2.5%), a range MIN..MAX of them (-100..0, 0%..5%), "new" or "gone"; blank lines and
/// lines starting with '#' are comments. One percentage (+2.5%) matches at the precision written (2.45% to 2.55%):
/// it is what a diff showed. Any other line is an error, with its number.
inline std::variant<AcceptList, AcceptError> parse_accept(std::string_view text) {
    AcceptList out;
    std::size_t number = 0;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        std::string line(text.substr(at, end - at));
        at = end + 1;
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const std::size_t first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#') continue;
        auto bad = [&](std::string why) { return AcceptError{number, std::move(why)}; };
        const std::size_t gap = line.find_first_of(" \t", first);
        const std::size_t label_at = gap == std::string::npos ? gap : line.find_first_not_of(" \t", gap);
        if (label_at == std::string::npos)
            return bad("no label after the value '" + detail::shown(line.substr(first)) + "'");
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
                auto n = detail::number_text(sign ? v.substr(1) : v);
                if (!n || (sign && v.size() > 1 && (v[1] == '+' || v[1] == '-'))) return std::nullopt;
                return v[0] == '-' ? -*n : *n;
            };
            bool lo_percent = false, hi_percent = false;
            const auto l = value(lo, lo_percent), h = value(hi, hi_percent);
            if (!l || !h)
                return bad("'" + detail::shown(a.text) + "' is not a self delta (+4, -2.5%), a range (-100..0) or new/gone");
            if (lo_percent != hi_percent) return bad("'" + a.text + "': both ends in % or neither");
            if (*l > *h) return bad("'" + a.text + "': the range's low end is above its high end");
            a.lo = *l;
            a.hi = *h;
            a.percent = lo_percent;
            if (a.percent && dots == std::string::npos) { // one percentage matches at the precision written
                const double half = detail::half_last_digit(lo.substr(0, lo.size() - 1));
                a.lo -= half;
                a.hi += half;
            }
        }
        if (!out.emplace(label, a).second)
            return bad("label '" + detail::shown(label) + "' is already accepted on line " +
                       std::to_string(out.at(label).line));
    }
    return out;
}

/// How a judgement judges.
struct Options {
    bool exact = false;      ///< the figure is an exact count (a difference of 1 is a change)
    bool modelled = false;   ///< the figure is modelled (is_modelled_event): without a threshold, modelled_threshold_percent
                             ///< and the floor below
    double modelled_floor = modelled_floor_events; ///< the modelled default's floor, in events (modelled_floor())
    Direction direction = Direction::change;
    std::optional<Threshold> threshold;
    const AcceptList* accept = nullptr; ///< not owned; null: none
    double alpha = 0.05;     ///< the noise rule's family-wise false-alarm chance
};

// ---- Inputs and outputs -------------------------------------------------------------------------------------------

/// One side's figures for one label: one entry per run of the side, 0 where a run has no such label. `calls`: how
/// many calls each run's value covers (0: the run did not record the label); empty: every run has the label, calls
/// are not compared.
struct Side {
    std::vector<double> values, calls;
};

/// One label's figures on both sides.
struct Label {
    std::string name;
    Side before, after;
};

/// min / median / max of a side's runs (the median of an even number: the mean of the middle two).
struct Summary {
    double min = 0, median = 0, max = 0;
    double range() const noexcept { return max - min; }
};

inline Summary summary(std::vector<double> v) {
    Summary s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.min = v.front();
    s.max = v.back();
    const std::size_t mid = v.size() / 2;
    s.median = v.size() % 2 ? v[mid] : v[mid - 1] + (v[mid] - v[mid - 1]) / 2;
    return s;
}

enum class Verdict { unchanged, changed, beyond_noise, within_noise, no_estimate, added, removed };

inline const char* to_string(Verdict v) noexcept {
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

/// delta in % of |base|; +-infinity for a change from 0, 0 for none.
inline double percent_of(double delta, double base) noexcept {
    return base != 0 ? 100.0 * delta / std::fabs(base) : (delta != 0 ? std::copysign(HUGE_VAL, delta) : 0.0);
}

/// One label's judgement.
struct LabelJudgement {
    std::string label;
    Summary before, after;             ///< its values on each side
    Summary calls_before, calls_after; ///< its calls (1 a run that has it, where calls were not given)
    double delta = 0;                  ///< after.median - before.median
    Verdict verdict = Verdict::unchanged;
    std::size_t runs_before = 0, runs_after = 0; ///< runs of each side that have the label
    bool nondeterministic_before = false, nondeterministic_after = false; ///< an exact figure's runs disagree
    // The noise rule (by_noise): the rank-sum p-value, Holm's bar for it, whether the step-down reached and passed
    // it, and the larger side's spread the medians had to exceed.
    bool by_noise = false, holm_passed = false;
    double p = 1, holm_bar = 0, spread = 0;
    // The gate's rule on a flagged label.
    bool under_threshold = false;            ///< under the threshold, or the modelled default's floor
    bool under_floor = false;                ///< under the modelled default's floor (Judgement::floor)
    bool increase = false, decrease = false; ///< a larger (smaller) value, or the same value in more (fewer) calls
    bool against_direction = false;          ///< goes the way the direction lets pass
    const Accepted* accepted = nullptr;      ///< its accept line (in Options::accept)
    bool accepted_ok = false;                ///< its change is as accepted
    bool fails = false;                      ///< flagged, and nothing excuses it
    bool unjudged = false;                   ///< could fail, but the rule cannot tell (no noise estimate, Holm out of reach)
    bool only_before() const noexcept { return runs_after == 0; }
    bool only_after() const noexcept { return runs_before == 0; }
    bool flagged() const noexcept {
        return verdict == Verdict::changed || verdict == Verdict::beyond_noise || verdict == Verdict::added ||
               verdict == Verdict::removed;
    }
    double delta_percent() const noexcept { return percent_of(delta, before.median); }
};

enum class Overall { unchanged, changed, cannot_judge };

inline const char* to_string(Overall v) noexcept {
    return v == Overall::unchanged ? "unchanged" : v == Overall::changed ? "changed" : "cannot judge";
}

/// Exit status of a gate: 0 nothing failed; 3 a label failed the gate; 4 it cannot judge a label that could fail it
/// (4 before 3: a change is not the whole story where something could not be checked).
constexpr int changed_status = 3;
constexpr int cannot_judge_status = 4;

/// Every label's judgement, and the gate's.
struct Judgement {
    std::vector<LabelJudgement> labels; ///< in the order given
    std::size_t runs_before = 0, runs_after = 0;
    std::size_t judged_by_noise = 0; ///< labels the noise rule judged (Holm's family)
    double p_floor = 1;              ///< the smallest p-value runs_before and runs_after runs can give
    bool noise_blind = false;        ///< p_floor is above Holm's first bar: the noise rule can flag no label
    std::optional<Threshold> threshold; ///< the one applied (Options', or the modelled default)
    bool modelled_default_threshold = false;
    double floor = 0; ///< the modelled default's absolute floor (0: none): a smaller change passes
    std::vector<std::size_t> failing, unjudged; ///< indices into labels
    std::size_t runs_needed = 0; ///< runs a side for Holm's first bar to be reachable over the labels that need it
    std::vector<const Accepted*> unused_accepts; ///< accept lines whose label is on neither side (mistyped, stale)
    Overall overall() const noexcept {
        return !unjudged.empty() ? Overall::cannot_judge : failing.empty() ? Overall::unchanged : Overall::changed;
    }
    int exit_status() const noexcept {
        return !unjudged.empty() ? cannot_judge_status : failing.empty() ? 0 : changed_status;
    }
};

// ---- The rule -----------------------------------------------------------------------------------------------------

/// The chance that the ranges of n and m exchangeable runs do not overlap: 2 / C(n + m, n).
inline double chance_apart(std::size_t n, std::size_t m) {
    double c = 1;
    for (std::size_t i = 1; i <= n; ++i) c = c * static_cast<double>(m + i) / static_cast<double>(i);
    return std::min(1.0, 2.0 / c);
}

/// The exact two-sided p-value of the rank-sum (Mann-Whitney) test that x and y are runs of one program: the chance,
/// over every way of splitting the n + m values into sides of n and m, of a split at least as lopsided. Ties count a
/// half and are taken in the direction that makes p larger (never a false alarm from a tie).
inline double rank_sum_p(const std::vector<double>& x, const std::vector<double>& y) {
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
    // How many splits give each U: the coefficients of the Gaussian binomial [n + m choose n] in q.
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

/// The smallest number of runs a side for which Holm's first step can pass over `labels` labels at `alpha`.
inline std::size_t runs_needed(std::size_t labels, double alpha) {
    std::size_t n = 2;
    while (n < 1000 && chance_apart(n, n) > alpha / static_cast<double>(std::max<std::size_t>(labels, 1))) ++n;
    return n;
}

namespace detail {
inline std::size_t runs_with(const Side& s, std::size_t runs) {
    if (s.calls.empty()) return s.values.empty() ? 0 : runs;
    return static_cast<std::size_t>(std::count_if(s.calls.begin(), s.calls.end(), [](double c) { return c > 0; }));
}

/// A side with one entry a run: missing runs as 0; calls 1 where a run has the label and none were given.
inline Side padded(Side s, std::size_t runs) {
    const bool present = !s.values.empty();
    if (s.calls.empty()) s.calls.assign(present ? s.values.size() : 0, 1.0);
    s.values.resize(runs, 0.0);
    s.calls.resize(runs, 0.0);
    return s;
}
} // namespace detail

/// Judges each label: `runs_before` and `runs_after` runs a side (every label's sides have at most as many entries;
/// a shorter one is padded with runs that lack the label).
inline Judgement judge(const std::vector<Label>& input, std::size_t runs_before, std::size_t runs_after,
                       const Options& options) {
    Judgement j;
    j.runs_before = runs_before;
    j.runs_after = runs_after;
    const std::size_t nb = runs_before, na = runs_after;
    j.threshold = options.threshold;
    if (!j.threshold && options.modelled) {
        j.threshold = Threshold{modelled_threshold_percent, true, ""};
        j.threshold->text = std::to_string(modelled_threshold_percent);
        j.threshold->text.erase(j.threshold->text.find_last_not_of('0') + 1);
        if (j.threshold->text.back() == '.') j.threshold->text.pop_back();
        j.threshold->text += "%";
        j.modelled_default_threshold = true;
        j.floor = options.modelled_floor;
    }
    std::vector<Side> before_sides, after_sides; // padded, for the rank-sum test
    for (const Label& in : input) {
        LabelJudgement r;
        r.label = in.name;
        const Side b = detail::padded(in.before, nb), a = detail::padded(in.after, na);
        r.before = summary(b.values);
        r.after = summary(a.values);
        r.calls_before = summary(b.calls);
        r.calls_after = summary(a.calls);
        r.delta = r.after.median - r.before.median;
        r.runs_before = detail::runs_with(b, nb);
        r.runs_after = detail::runs_with(a, na);
        const bool sides_agree = r.before.range() == 0 && r.after.range() == 0 && r.calls_before.range() == 0 &&
                                 r.calls_after.range() == 0;
        if (options.exact) {
            r.nondeterministic_before = r.calls_before.max > 0 && (r.before.range() != 0 || r.calls_before.range() != 0);
            r.nondeterministic_after = r.calls_after.max > 0 && (r.after.range() != 0 || r.calls_after.range() != 0);
        }
        // Whether each side has the label in all its runs or in none: then its presence is no accident.
        const bool presence_agrees = (r.runs_before == 0 || r.runs_before == nb) && (r.runs_after == 0 || r.runs_after == na);
        const bool same = r.delta == 0 && r.calls_before.median == r.calls_after.median;
        if (options.exact && presence_agrees && (r.only_before() || r.only_after())) {
            // An exact figure, every run of one side has the label and no run of the other: a change.
            r.verdict = r.only_before() ? Verdict::removed : Verdict::added;
        } else if (sides_agree && same) {
            r.verdict = Verdict::unchanged; // identical values in every run: no noise estimate needed
        } else if (options.exact && sides_agree) {
            r.verdict = Verdict::changed;
        } else if (nb < 2 || na < 2) {
            r.verdict = Verdict::no_estimate;
        } else {
            r.p = rank_sum_p(b.values, a.values);
            r.by_noise = true;
            r.verdict = Verdict::within_noise; // until Holm's step-down below
        }
        j.labels.push_back(std::move(r));
        before_sides.push_back(b);
        after_sides.push_back(a);
    }
    // Holm's step-down over the labels judged by noise: the smallest p-value against alpha / L, the next against
    // alpha / (L - 1), ..., stopping at the first that fails: an unchanged program flags any label with a chance of
    // at most alpha. A rejected label is flagged only when its medians also differ by more than either side's spread
    // (a guard against load that changes while the runs are recorded; a subset of Holm's rejections keeps the bound).
    std::vector<LabelJudgement*> judged;
    for (auto& r : j.labels)
        if (r.by_noise) judged.push_back(&r);
    std::stable_sort(judged.begin(), judged.end(), [](const LabelJudgement* x, const LabelJudgement* y) { return x->p < y->p; });
    j.judged_by_noise = judged.size();
    j.p_floor = chance_apart(nb, na);
    bool stepping = true;
    for (std::size_t i = 0; i < judged.size(); ++i) {
        LabelJudgement& r = *judged[i];
        r.holm_bar = options.alpha / static_cast<double>(judged.size() - i);
        stepping = stepping && r.p <= r.holm_bar;
        r.holm_passed = stepping;
        r.spread = std::max(r.before.range(), r.after.range());
        if (stepping && std::fabs(r.delta) > r.spread)
            r.verdict = r.only_after() ? Verdict::added : r.only_before() ? Verdict::removed : Verdict::beyond_noise;
    }
    j.noise_blind = !judged.empty() && j.p_floor > options.alpha / static_cast<double>(judged.size());
    // The gate's rule: a flagged label fails unless under the threshold, going the way the direction lets pass, or
    // accepted as it changed (an accepted label that changed otherwise still fails).
    std::size_t needs_noise_rule = judged.size();
    for (std::size_t i = 0; i < j.labels.size(); ++i) {
        LabelJudgement& r = j.labels[i];
        if (j.threshold) {
            const double size = j.threshold->percent ? std::fabs(r.delta_percent()) : std::fabs(r.delta);
            r.under_threshold = size < j.threshold->value; // a new label's % is infinite: never under a percentage
        }
        r.under_floor = std::fabs(r.delta) < j.floor;
        r.under_threshold = r.under_threshold || r.under_floor;
        r.increase = r.delta > 0 || (r.delta == 0 && r.calls_after.median > r.calls_before.median);
        r.decrease = r.delta < 0 || (r.delta == 0 && r.calls_after.median < r.calls_before.median);
        r.against_direction = (options.direction == Direction::increase && !r.increase) ||
                              (options.direction == Direction::decrease && !r.decrease);
        if (options.accept)
            if (auto it = options.accept->find(r.label); it != options.accept->end()) {
                const Accepted& acc = it->second;
                r.accepted = &acc;
                const double value = acc.percent ? r.delta_percent() : r.delta;
                r.accepted_ok = acc.kind == Accepted::Kind::added     ? r.only_after()
                                : acc.kind == Accepted::Kind::removed ? r.only_before()
                                                                      : value >= acc.lo && value <= acc.hi;
            }
        const bool excused = r.under_threshold || r.against_direction || (r.accepted && r.accepted_ok);
        r.fails = r.flagged() && !excused;
        r.unjudged = !excused && (r.verdict == Verdict::no_estimate || (j.noise_blind && r.verdict == Verdict::within_noise));
        if (r.verdict == Verdict::no_estimate) ++needs_noise_rule;
        if (r.fails) j.failing.push_back(i);
        if (r.unjudged) j.unjudged.push_back(i);
    }
    j.runs_needed = runs_needed(needs_noise_rule, options.alpha);
    if (options.accept)
        for (const auto& entry : *options.accept) // (a structured binding: clang 14 cannot capture it)
            if (std::none_of(j.labels.begin(), j.labels.end(),
                             [&](const LabelJudgement& r) { return r.label == entry.first; }))
                j.unused_accepts.push_back(&entry.second);
    return j;
}

} // namespace gate
PMC_END_NAMESPACE
