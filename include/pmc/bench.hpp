// SPDX-License-Identifier: MIT
// pmc/bench.hpp: microbenchmarks with exact counts per iteration where a counter is exact, and a gate on them.
//
//     #include <pmc/bench.hpp>
//     PMC_BENCHMARK(sort_1000) {                  // `bench` is this benchmark's pmc::bench::Bench
//         std::vector<int> input = make_input();  // setup: not measured
//         bench.run([&] {                         // the measured body, called many times
//             auto v = input;
//             std::sort(v.begin(), v.end());
//             pmc::bench::do_not_optimize(v.data());
//         });
//     }
//     PMC_BENCHMARK_MAIN()                        // --help, --filter, --json, --compare
//
// Read top down: 1. do_not_optimize; 2. results (what a run measures); 3. the Bench that measures; 4. JSON in and
// out; 5. the comparison of two results (the gate); 6. the Markdown tables; 7. registration and main.
//
// How a figure is measured. Counts (instructions:u, and cycles, branches, misses where they open): the body runs N
// times and then 2N times between two reads of every counter; a figure per iteration is (count(2N) - count(N)) / N,
// so everything the harness adds once per measurement (the reads, the call into the loop) cancels. N is chosen by
// the first exact counter (doubled until N iterations count at least min_count events), so N is the same every
// run; without an exact counter, by time. Under `pmc emulate` instructions are exact: a deterministic body prints the same number, to
// the instruction, every run. Time: epochs (11 by default) of enough iterations to last epoch_ns each; ns/op is
// their median, err% the median absolute deviation from it in percent (nanobench's measure). Time is noisy.
// Requires {fmt}: link pmc::report.
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/detail/json.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/emulated.hpp>
#include <pmc/error.hpp>
#include <pmc/gate.hpp>
#include <pmc/report.hpp>

#include <fmt/format.h>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE
namespace bench {

// ---- 1. Keeping the compiler honest -------------------------------------------------------------------------------

/// Makes the compiler believe `value` is read here: its computation cannot be removed. Emits no instruction (the
/// value's address may be materialized in a register).
template <class T>
BOOST_FORCEINLINE void do_not_optimize(T&& value) noexcept {
    asm volatile("" : : "r"(&value) : "memory");
}

/// Makes the compiler forget what it knows about memory here (a value computed before is recomputed after).
BOOST_FORCEINLINE void clobber_memory() noexcept { asm volatile("" : : : "memory"); }

// ---- 2. Results ---------------------------------------------------------------------------------------------------

/// One counter's figure for one benchmark: `difference` events in `iterations` more iterations (2N - N).
struct CountFigure {
    std::string event;            ///< as given ("instructions:u")
    bool exact = false;           ///< the counter counts exactly (the emulated PMU; instructions-minus-irqs:u)
    std::int64_t difference = 0;  ///< count(2N) - count(N)
    std::uint64_t iterations = 0; ///< N
    /// count(3N) - count(2N), measured for a modelled event (a cache or predictor warming up is not linear in N):
    /// the figure is steady when it equals `difference`.
    std::optional<std::int64_t> next_difference;
    double per_iteration() const noexcept {
        return iterations ? static_cast<double>(difference) / static_cast<double>(iterations) : 0.0;
    }
    bool steady() const noexcept { return !next_difference || *next_difference == difference; }
};

/// The time figure: epochs of `iterations_per_epoch` iterations each.
struct TimeFigure {
    std::vector<double> epoch_ns_per_op; ///< each epoch's ns per iteration, in run order
    std::uint64_t iterations_per_epoch = 0;
    double median = 0; ///< ns per iteration
    double err_pct = 0; ///< median absolute deviation from the median, in % of it
    double min = 0, max = 0;
};

/// What one benchmark measured.
struct Result {
    std::string name;
    std::vector<CountFigure> counts; ///< one per counter that opened, in the order asked
    TimeFigure time;
    double run_seconds = 0; ///< how long measuring this benchmark took (calibration included)
    const CountFigure* count(std::string_view event) const {
        for (const auto& c : counts)
            if (c.event == event) return &c;
        return nullptr;
    }
};

/// A counter asked for, and whether it opened here (and why not).
struct EventStatus {
    std::string event;
    bool opened = false;
    bool exact = false;
    std::string why; ///< why it did not open, or why it is not exact
};

/// What the harness itself adds, measured with a body that only calls do_not_optimize.
struct Overhead {
    std::string event;                ///< the counter it is measured in ("" when no counter opened)
    double per_iteration = 0;         ///< events per iteration of the loop (in every per-iteration figure)
    std::int64_t per_measurement = 0; ///< events per measurement (cancels between N and 2N)
    double ns_per_iteration = 0;
};

/// A whole run: the counters, the benchmarks' results and the harness's own cost.
struct Report {
    std::string emulated;   ///< the emulated PMU's guest architecture under `pmc emulate`, else ""
    // What the figures were counted on, as a profile's header and counter notes say it (--compare refuses to compare
    // across them): the emulator ("" natively), the CPU (under pmc emulate the model QEMU presents), and the models
    // behind the modelled events ("" without pmc emulate --cache, --branches).
    std::string emulator, cpu, cache_model, branch_model;
    bool machine_recorded = false; ///< the file had those keys (a result of format version 1 has none)
    std::vector<EventStatus> events;
    std::vector<Result> results;
    std::optional<Overhead> overhead;
};

/// How a Bench measures.
struct Options {
    /// Counters per iteration: those that do not open here are left out (Report::events says why).
    std::vector<std::string> events{"instructions:u", "cycles:u", "branches:u", "branch-misses:u"};
    /// N grows until N iterations count at least this many events of the first exact counter (without one: until
    /// they last epoch_ns)
    std::uint64_t min_count = 100000;
    std::uint64_t iterations = 0;     ///< a fixed N instead (0: chosen as above)
    std::uint64_t max_iterations = std::uint64_t{1} << 30;
    unsigned epochs = 11;             ///< time epochs
    std::uint64_t epoch_ns = 1000000; ///< each epoch lasts at least this long (1 ms)
    /// Under `pmc emulate` an epoch is instead this many instructions (from the exact per-iteration figure): the
    /// same iterations every run, so what a body does after its time epochs (a second run()) does not depend on
    /// how fast the machine was.
    std::uint64_t epoch_instructions = 2000000;
    bool measure_overhead = true; ///< measure the harness's own cost before the first benchmark
};

// ---- 3. The Bench ---------------------------------------------------------------------------------------------------

namespace detail {
inline double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

inline TimeFigure time_statistics(std::vector<double> epochs, std::uint64_t iterations_per_epoch) {
    TimeFigure t;
    t.iterations_per_epoch = iterations_per_epoch;
    if (epochs.empty()) return t;
    t.median = median_of(epochs);
    std::vector<double> deviation;
    for (double e : epochs) deviation.push_back(std::fabs(e - t.median));
    t.err_pct = t.median > 0 ? 100.0 * median_of(deviation) / t.median : 0.0;
    t.min = *std::min_element(epochs.begin(), epochs.end());
    t.max = *std::max_element(epochs.begin(), epochs.end());
    t.epoch_ns_per_op = std::move(epochs);
    return t;
}

/// Whether `counter` counts exactly, and if not, why not (for people).
inline std::pair<bool, std::string> exactness(const Counter& counter) {
    if (counter.path() == ReadPath::emulated) return {true, ""};
    if (counter.path() == ReadPath::rdpmc_difference || counter.path() == ReadPath::syscall_difference)
        return {true, ""}; // instructions-minus-irqs: the interrupts' extra instructions taken off
    if (counter.event().kind == EventKind::wall_time || counter.event().kind == EventKind::tsc)
        return {false, "a time"};
    return {false, "counted by the kernel or the PMU, where interrupts and the machine's state move it from run to "
                   "run (exact: instructions-minus-irqs:u on a PMU, or instructions:u under pmc emulate)"};
}
} // namespace detail

/// Measures benchmarks on the thread that made it (a counter counts the thread that opened it).
class Bench {
public:
    explicit Bench(Options options = {}) : options_(std::move(options)), clock_("wall-time") {
        report_.cpu = recorded_cpu();
        report_.emulator = recorded_emulator();
        if (const auto& pmu = emulated_pmu()) {
            report_.emulated = pmu->target;
            if (pmu->cache_model) report_.cache_model = cache_model_text(*pmu);
            if (pmu->branch_model) report_.branch_model = branch_model_text;
        }
        report_.machine_recorded = true;
        for (const auto& event : options_.events) {
            EventStatus status{event, false, false, ""};
            auto counter = Counter::try_open(event);
            if (counter) {
                status.opened = true;
                auto [exact, why] = detail::exactness(*counter);
                status.exact = exact;
                status.why = why;
                counters_.push_back(std::move(*counter));
            } else {
                status.why = counter.failure().message;
            }
            report_.events.push_back(std::move(status));
        }
    }

    /// Measures `body` as benchmark `name` and keeps its Result (also returned).
    template <class Body>
    const Result& run(std::string name, Body&& body) {
        const std::uint64_t started = clock_.read();
        if (!report_.overhead && options_.measure_overhead) measure_overhead();
        Result r;
        r.name = std::move(name);
        body(); // a first call: code and data brought in, lazy setup done, before anything is measured
        if (!counters_.empty()) r.counts = measure_counts(body);
        r.time = measure_time(body, r.counts);
        r.run_seconds = static_cast<double>(clock_.read() - started) / 1e9;
        report_.results.push_back(std::move(r));
        return report_.results.back();
    }

    /// Measures `body` under the name of the registered benchmark being run (PMC_BENCHMARK).
    template <class Body>
    const Result& run(Body&& body) {
        if (current_name_.empty())
            raise(make_failure(EINVAL, "pmc::bench::Bench::run(body) without a name is for PMC_BENCHMARK bodies; "
                                       "elsewhere call run(\"name\", body)"));
        return run(current_name_, std::forward<Body>(body));
    }

    const Options& options() const noexcept { return options_; }
    const Report& report() const noexcept { return report_; }
    const std::vector<Result>& results() const noexcept { return report_.results; }

    /// The name run(body) uses (set by the main for each registered benchmark).
    void set_current_name(std::string name) { current_name_ = std::move(name); }

private:
    template <class Body>
    BOOST_NOINLINE static void loop(Body& body, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) body();
    }

    // Every counter read before and after n iterations (the last opened is read last before the loop and first
    // after it): the differences.
    template <class Body>
    std::vector<std::uint64_t> count(Body& body, std::uint64_t n) {
        const std::size_t k = counters_.size();
        std::vector<std::uint64_t> start(k), end(k);
        for (std::size_t i = 0; i < k; ++i) start[i] = counters_[i].read();
        loop(body, n);
        for (std::size_t i = k; i-- > 0;) end[i] = counters_[i].read();
        for (std::size_t i = 0; i < k; ++i) end[i] -= start[i];
        return end;
    }

    template <class Body>
    std::vector<CountFigure> measure_counts(Body& body) {
        std::uint64_t n = options_.iterations ? options_.iterations : 1;
        // N grows by the first exact counter (the same N every run); without one, by time (an event such as
        // page-faults may never reach min_count).
        std::size_t exact = counters_.size();
        for (std::size_t i = 0, opened = 0; i < report_.events.size(); ++i)
            if (report_.events[i].opened) {
                if (report_.events[i].exact && exact == counters_.size()) exact = opened;
                ++opened;
            }
        if (!options_.iterations) {
            if (exact < counters_.size())
                while (count(body, n)[exact] < options_.min_count && n < options_.max_iterations) n *= 2;
            else
                while (elapsed_ns(body, n) < options_.epoch_ns && n < options_.max_iterations) n *= 2;
        }
        const auto once = count(body, n);
        const auto twice = count(body, 2 * n);
        // A modelled event (the emulator's caches, its predictor) is checked for steadiness by a third measurement:
        // its state at a measurement's start need not be the same each time, and then 2N - N is no per-iteration
        // figure. Only then: it costs 3N more iterations.
        bool any_modelled = false;
        for (const auto& status : report_.events)
            any_modelled = any_modelled || (status.opened && !report_.emulated.empty() && gate::is_modelled_event(status.event));
        const auto thrice = any_modelled ? count(body, 3 * n) : std::vector<std::uint64_t>{};
        std::vector<CountFigure> figures;
        std::size_t i = 0;
        for (const auto& status : report_.events) {
            if (!status.opened) continue;
            CountFigure f;
            f.event = status.event;
            f.exact = status.exact;
            f.difference = static_cast<std::int64_t>(twice[i] - once[i]);
            f.iterations = n;
            if (!thrice.empty() && gate::is_modelled_event(status.event))
                f.next_difference = static_cast<std::int64_t>(thrice[i] - twice[i]);
            figures.push_back(std::move(f));
            ++i;
        }
        return figures;
    }

    template <class Body>
    std::uint64_t elapsed_ns(Body& body, std::uint64_t n) {
        const std::uint64_t t0 = clock_.read();
        loop(body, n);
        return clock_.read() - t0;
    }

    template <class Body>
    TimeFigure measure_time(Body& body, const std::vector<CountFigure>& counts) {
        std::uint64_t n = 1;
        const CountFigure* exact = nullptr;
        for (const auto& c : counts)
            if (c.exact && !exact) exact = &c;
        if (!report_.emulated.empty() && exact) {
            const double per_iteration = std::max(exact->per_iteration(), 1.0);
            n = static_cast<std::uint64_t>(std::ceil(static_cast<double>(options_.epoch_instructions) / per_iteration));
            n = std::clamp<std::uint64_t>(n, 1, options_.max_iterations);
        } else for (;;) {
            const std::uint64_t t = elapsed_ns(body, n);
            if (t >= options_.epoch_ns || n >= options_.max_iterations) break;
            // Grow towards the epoch's length in one step where the time is known, by at most 10x.
            const double want = t ? static_cast<double>(options_.epoch_ns) / static_cast<double>(t) * 1.2 : 10.0;
            n = static_cast<std::uint64_t>(static_cast<double>(n) * std::clamp(want, 2.0, 10.0));
        }
        std::vector<double> epochs;
        epochs.reserve(options_.epochs);
        for (unsigned e = 0; e < options_.epochs; ++e)
            epochs.push_back(static_cast<double>(elapsed_ns(body, n)) / static_cast<double>(n));
        return detail::time_statistics(std::move(epochs), n);
    }

    void measure_overhead() {
        std::uint64_t x = 0;
        auto empty = [&x] { do_not_optimize(x); };
        Overhead o;
        if (!counters_.empty()) {
            const std::uint64_t n = 1000;
            const auto once = count(empty, n), twice = count(empty, 2 * n);
            o.event = report_.events[first_opened()].event;
            o.per_iteration = static_cast<double>(twice[0] - once[0]) / static_cast<double>(n);
            o.per_measurement = static_cast<std::int64_t>(once[0]) - static_cast<std::int64_t>(twice[0] - once[0]);
        }
        const std::uint64_t n = 100000;
        o.ns_per_iteration = static_cast<double>(elapsed_ns(empty, n)) / static_cast<double>(n);
        report_.overhead = o;
    }

    std::size_t first_opened() const {
        for (std::size_t i = 0; i < report_.events.size(); ++i)
            if (report_.events[i].opened) return i;
        return 0;
    }

    Options options_;
    Counter clock_;
    std::vector<Counter> counters_; // the opened events, in report_.events' order
    Report report_;
    std::string current_name_;
};

// ---- 4. JSON --------------------------------------------------------------------------------------------------------

namespace detail {
/// A time in ns with the decimals that mean something: 56821, 10.3, 0.63.
inline std::string ns_text(double ns) {
    return ns >= 100 ? fmt::format("{:.0f}", ns) : ns >= 10 ? fmt::format("{:.1f}", ns) : fmt::format("{:.2f}", ns);
}

} // namespace detail

/// A whole-number per-iteration figure prints as an integer, anything else with up to 3 decimals.
inline std::string format_per_iteration(const CountFigure& f) {
    if (f.iterations && f.difference % static_cast<std::int64_t>(f.iterations) == 0)
        return fmt::format("{}", f.difference / static_cast<std::int64_t>(f.iterations));
    std::string s = fmt::format("{:.3f}", f.per_iteration());
    while (s.back() == '0') s.pop_back();
    return s;
}

/// The report as JSON (format "pmc-bench" version 2; docs/bench.md describes it).
inline std::string to_json(const Report& report) {
    JsonWriter j;
    j.begin_object().field("format", "pmc-bench").field("version", 2);
    auto text_or_null = [&](const char* key, const std::string& value) {
        j.key(key);
        if (value.empty()) j.null();
        else j.value(value);
    };
    text_or_null("emulated", report.emulated);
    text_or_null("emulator", report.emulator);
    text_or_null("cpu", report.cpu);
    text_or_null("cache_model", report.cache_model);
    text_or_null("branch_model", report.branch_model);
    j.key("events").begin_array();
    for (const auto& e : report.events)
        j.begin_object().field("event", e.event).field("opened", e.opened).field("exact", e.exact)
            .field("why", e.why).end_object();
    j.end_array();
    if (report.overhead) {
        const auto& o = *report.overhead;
        j.key("overhead").begin_object().field("event", o.event).field("per_iteration", o.per_iteration)
            .field("per_measurement", o.per_measurement).field("ns_per_iteration", o.ns_per_iteration).end_object();
    }
    j.key("benchmarks").begin_array();
    for (const auto& r : report.results) {
        j.begin_object().field("name", r.name).field("run_seconds", r.run_seconds);
        j.key("counts").begin_array();
        for (const auto& c : r.counts) {
            j.begin_object().field("event", c.event).field("exact", c.exact).field("difference", c.difference)
                .field("iterations", c.iterations).field("per_iteration", c.per_iteration());
            if (c.next_difference) j.field("next_difference", *c.next_difference);
            j.end_object();
        }
        j.end_array();
        j.key("time").begin_object().field("unit", "ns/op").field("median", r.time.median)
            .field("err_pct", r.time.err_pct).field("min", r.time.min).field("max", r.time.max)
            .field("iterations_per_epoch", r.time.iterations_per_epoch);
        j.key("epochs").begin_array();
        for (double e : r.time.epoch_ns_per_op) j.value(e);
        j.end_array().end_object().end_object();
    }
    j.end_array().end_object();
    return j.str() + "\n";
}

namespace detail {
inline const pmc::detail::JsonValue& member(const pmc::detail::JsonValue& v, std::string_view key,
                                            pmc::detail::JsonValue::Type type, const std::string& where) {
    const auto* m = v.find(key);
    if (!m || m->type != type) raise(make_failure(EINVAL, where + ": '" + std::string(key) + "' is missing or of the "
                                                                                             "wrong type"));
    return *m;
}

inline std::uint64_t whole(const pmc::detail::JsonValue& v, std::string_view key, const std::string& where) {
    const double d = member(v, key, pmc::detail::JsonValue::Type::number, where).number;
    if (!(d >= 0) || d > 9007199254740992.0 || std::floor(d) != d)
        raise(make_failure(EINVAL, where + ": '" + std::string(key) + "' is not a whole number"));
    return static_cast<std::uint64_t>(d);
}
} // namespace detail

/// Reads a report that to_json wrote. Raises pmc::error saying where the text is not one.
inline Report parse_report(std::string_view text, const std::string& source) {
    using Type = pmc::detail::JsonValue::Type;
    auto parsed = pmc::detail::JsonReader::parse(text, source);
    if (!parsed) raise(parsed.failure());
    const auto& root = *parsed;
    const auto* format = root.find("format");
    if (!format || format->string != "pmc-bench")
        raise(make_failure(EINVAL, source + ": not a pmc bench result (no \"format\":\"pmc-bench\"; write one with "
                                            "--json FILE)"));
    Report r;
    if (const auto* e = root.find("emulated"); e && e->is_string()) r.emulated = e->string;
    // Version 2's record of the machine: a key missing means an older file, which cannot say (compare() refuses it
    // against an emulated run); a key present is a string or null.
    r.machine_recorded = true;
    for (auto [key, field] : {std::pair{"emulator", &r.emulator}, std::pair{"cpu", &r.cpu},
                              std::pair{"cache_model", &r.cache_model}, std::pair{"branch_model", &r.branch_model}}) {
        const auto* v = root.find(key);
        if (!v) r.machine_recorded = false;
        else if (v->is_string()) *field = v->string;
        else if (v->type != Type::null)
            raise(make_failure(EINVAL, source + ": '" + key + "' is neither a string nor null"));
    }
    for (const auto& e : detail::member(root, "events", Type::array, source).items) {
        EventStatus s;
        s.event = detail::member(e, "event", Type::string, source + ": an event").string;
        const auto* opened = e.find("opened");
        const auto* exact = e.find("exact");
        s.opened = opened && opened->boolean;
        s.exact = exact && exact->boolean;
        if (const auto* why = e.find("why"); why && why->is_string()) s.why = why->string;
        r.events.push_back(std::move(s));
    }
    if (const auto* o = root.find("overhead"); o && o->is_object()) {
        Overhead overhead;
        if (const auto* e = o->find("event"); e && e->is_string()) overhead.event = e->string;
        if (const auto* n = o->find("per_iteration"); n && n->is_number()) overhead.per_iteration = n->number;
        if (const auto* n = o->find("per_measurement"); n && n->is_number())
            overhead.per_measurement = static_cast<std::int64_t>(n->number);
        if (const auto* n = o->find("ns_per_iteration"); n && n->is_number()) overhead.ns_per_iteration = n->number;
        r.overhead = overhead;
    }
    for (const auto& b : detail::member(root, "benchmarks", Type::array, source).items) {
        Result res;
        res.name = detail::member(b, "name", Type::string, source + ": a benchmark").string;
        const std::string where = source + ": benchmark '" + res.name + "'";
        if (const auto* seconds = b.find("run_seconds"); seconds && seconds->is_number()) res.run_seconds = seconds->number;
        for (const auto& c : detail::member(b, "counts", Type::array, where).items) {
            CountFigure f;
            f.event = detail::member(c, "event", Type::string, where).string;
            const auto* exact = c.find("exact");
            f.exact = exact && exact->boolean;
            const double d = detail::member(c, "difference", Type::number, where).number;
            if (std::floor(d) != d || std::fabs(d) > 9007199254740992.0)
                raise(make_failure(EINVAL, where + ": 'difference' is not a whole number"));
            f.difference = static_cast<std::int64_t>(d);
            f.iterations = detail::whole(c, "iterations", where);
            if (f.iterations == 0) raise(make_failure(EINVAL, where + ": 'iterations' is 0"));
            if (const auto* next = c.find("next_difference"); next && next->is_number() && std::floor(next->number) == next->number &&
                                                               std::fabs(next->number) <= 9007199254740992.0)
                f.next_difference = static_cast<std::int64_t>(next->number);
            res.counts.push_back(std::move(f));
        }
        const auto& t = detail::member(b, "time", Type::object, where);
        std::vector<double> epochs;
        for (const auto& e : detail::member(t, "epochs", Type::array, where).items)
            if (e.is_number()) epochs.push_back(e.number);
        res.time = bench::detail::time_statistics(std::move(epochs), detail::whole(t, "iterations_per_epoch", where));
        r.results.push_back(std::move(res));
    }
    return r;
}

/// Reads a report from a file; raises pmc::error with the reason (missing, unreadable, not a result).
inline Report read_report(const std::string& path) {
    auto text = pmc::detail::read_file(path);
    if (!text) raise(make_failure(ENOENT, "cannot read the bench result '" + path + "': " + std::strerror(errno)));
    return parse_report(*text, path);
}

// ---- 5. The comparison (the gate) ---------------------------------------------------------------------------------
// The judgement is pmc/gate.hpp's, the one pmc diff uses: each exact event across the benchmarks by the exact rule,
// time (where no exact count decides) by the noise rule, the threshold, direction and accepted changes alike. What
// is here is what only results have: a figure counted on one side only, or on another kind of machine.

/// How a comparison judges.
struct GateOptions {
    std::optional<gate::Threshold> threshold; ///< exact counts: a smaller change per iteration (a count, or % of the
                                              ///< BASE figure: gate::parse_threshold) passes; none: any change fails
                                              ///< (a modelled event: gate::modelled_threshold_percent)
    double time_threshold_pct = 5;       ///< time: a change must be at least this large, and beyond the noise
    gate::Direction direction = gate::Direction::change; ///< --fail-on-increase: only increases fail
    const gate::AcceptList* accept = nullptr; ///< accepted changes per benchmark (per-iteration deltas or %); not owned
    std::vector<std::string> modelled_events; ///< modelled events to gate (--counter); the others are shown only
    bool any_emulator = false; ///< compare across emulators, emulated CPUs and models (with a warning) instead of refusing
};

enum class Verdict { unchanged, changed, under_threshold, unjudged, not_gated, added, gone, accepted, allowed };

inline const char* to_string(Verdict v) {
    switch (v) {
    case Verdict::unchanged: return "unchanged";
    case Verdict::changed: return "changed";
    case Verdict::under_threshold: return "under the threshold";
    case Verdict::unjudged: return "cannot judge";
    case Verdict::not_gated: return "differs, not gated";
    case Verdict::added: return "new";
    case Verdict::gone: return "gone";
    case Verdict::accepted: return "changed as accepted";
    case Verdict::allowed: return "a decrease, allowed";
    }
    return "?";
}

/// One figure's comparison.
struct FigureChange {
    std::string figure; ///< an event, or "ns/op"
    bool exact = false;
    bool modelled = false; ///< a modelled event (pmc emulate --cache)
    double before = 0, after = 0;
    std::string before_text, after_text;
    Verdict verdict = Verdict::unchanged;
    std::string why;
    double change_pct() const noexcept {
        return before != 0 ? 100.0 * (after - before) / std::fabs(before) : (after == before ? 0.0 : std::numeric_limits<double>::infinity());
    }
};

/// One benchmark's comparison: the figures, and the verdict the gate takes (the exact counts decide where there
/// are any; time decides only where no exact count was measured on both sides).
struct BenchmarkChange {
    std::string name;
    std::vector<FigureChange> figures;
    Verdict verdict = Verdict::unchanged;
    std::string why;
};

struct Comparison {
    std::vector<BenchmarkChange> benchmarks;
    std::size_t changed = 0, unjudged = 0;
    std::vector<std::string> notes; ///< what the gate followed beyond its defaults (a modelled event, unused accepts)
    /// How the two sides' machines differ (emulator, emulated CPU, the model of a gated modelled event), or why that
    /// cannot be told; "" when they agree. Refused unless GateOptions::any_emulator.
    std::string machine_difference;
    bool refused = false;
    /// The gate's exit status: 0 nothing changed; 3 a benchmark changed; 4 a benchmark could not be judged, or the
    /// sides' machines differ (before 3, as pmc diff: a change is not trusted where something else could not be
    /// checked).
    int exit_status() const noexcept {
        return refused || unjudged ? gate::cannot_judge_status : changed ? gate::changed_status : 0;
    }
};

namespace detail {
__extension__ typedef __int128 wide_int; // products of two 64-bit numbers

/// Exact per-iteration figures compared without rounding: a/n against b/m.
inline int compare_exact(const CountFigure& a, const CountFigure& b) {
    const wide_int l = static_cast<wide_int>(a.difference) * static_cast<wide_int>(b.iterations);
    const wide_int r = static_cast<wide_int>(b.difference) * static_cast<wide_int>(a.iterations);
    return l < r ? -1 : l > r ? 1 : 0;
}

/// `after`'s per-iteration figure, as far from `before`'s as the fractions are apart: two figures that differ as
/// fractions never round to one double (the gate compares doubles).
inline double exact_after(const CountFigure& before, const CountFigure& after) {
    const double a = before.per_iteration(), b = after.per_iteration();
    const int order = compare_exact(before, after);
    if (order == 0) return a;
    if (a == b) return std::nextafter(b, order < 0 ? HUGE_VAL : -HUGE_VAL);
    return b;
}

/// A figure's verdict from the gate's judgement of its benchmark.
inline Verdict verdict_of(const gate::LabelJudgement& j) {
    if (j.unjudged) return Verdict::unjudged;
    if (!j.flagged()) return Verdict::unchanged;
    if (j.fails) return Verdict::changed;
    if (j.under_threshold) return Verdict::under_threshold;
    if (j.against_direction) return Verdict::allowed;
    return Verdict::accepted;
}

inline std::string why_of(const gate::LabelJudgement& j, const gate::Judgement& all, bool exact) {
    if (j.unjudged)
        return exact ? "no estimate of the noise"
                     : fmt::format("{} and {} epochs: too few for the noise rule (the smallest p-value {:.2g} is above "
                                   "Holm's bar)", all.runs_before, all.runs_after, all.p_floor);
    if (j.by_noise && !j.flagged()) return j.holm_passed ? "within the epochs' spread" : "within the noise";
    if (!j.flagged()) return "";
    std::string why = exact ? "" : "beyond the noise";
    if (j.under_threshold) why += (why.empty() ? "" : ", ") + std::string("under ") + all.threshold->text;
    else if (j.against_direction) why += (why.empty() ? "" : ", ") + std::string("--fail-on-increase");
    else if (j.accepted)
        why += fmt::format("{}{} {} (--accept line {})", why.empty() ? "" : ", ",
                           j.accepted_ok ? "accepted:" : "not as accepted:", j.accepted->text, j.accepted->line);
    return why;
}
} // namespace detail

namespace detail {
/// How the machines of two results differ where it matters to the gate, in words ("" when it does not): pmc diff's
/// rule. Natively only the figures' exactness matters (a CPU may differ); under the emulator the emulator (QEMU
/// version, plugin API), the CPU model it presents, and the model behind each gated modelled event.
inline std::string machine_difference(const Report& before, const Report& after, const GateOptions& options) {
    if (before.emulated.empty() && after.emulated.empty()) return "";
    if (!before.machine_recorded || !after.machine_recorded)
        return fmt::format("{} is a result of format version 1, which records no emulator, CPU model or models: "
                           "whether they are {}'s cannot be told (write it again with this pmc/bench.hpp)",
                           before.machine_recorded ? "this run" : "the baseline",
                           before.machine_recorded ? "the baseline" : "this run");
    auto machine = [](const Report& r) {
        return (r.emulator.empty() ? std::string("not emulated") : r.emulator) + "; " + r.cpu;
    };
    auto model = [](const std::string& m) { return m.empty() ? std::string("none") : m; };
    const auto gates = [&](bool branch) {
        return std::any_of(options.modelled_events.begin(), options.modelled_events.end(), [&](const std::string& e) {
            return gate::is_modelled_event(e) && is_modelled_branch_event_name(e) == branch;
        });
    };
    if (before.emulator != after.emulator || before.cpu != after.cpu)
        return fmt::format("different emulators or emulated CPUs:\n  baseline: {}\n  this run: {}", machine(before),
                           machine(after));
    if (gates(false) && before.cache_model != after.cache_model)
        return fmt::format("different cache models (the --counter events'):\n  baseline: {}\n  this run: {}",
                           model(before.cache_model), model(after.cache_model));
    if (gates(true) && before.branch_model != after.branch_model)
        return fmt::format("different branch predictors (the --counter events'):\n  baseline: {}\n  this run: {}",
                           model(before.branch_model), model(after.branch_model));
    return "";
}
} // namespace detail

/// Compares `after` with `before`, benchmark by benchmark (by name), figure by figure (by event).
inline Comparison compare(const Report& before, const Report& after, const GateOptions& options = {}) {
    Comparison out;
    out.machine_difference = detail::machine_difference(before, after, options);
    out.refused = !out.machine_difference.empty() && !options.any_emulator;
    auto find = [](const Report& r, const std::string& name) -> const Result* {
        for (const auto& x : r.results)
            if (x.name == name) return &x;
        return nullptr;
    };
    const bool same_machine_kind = before.emulated == after.emulated;
    auto gated_modelled = [&](const std::string& event) {
        return std::find(options.modelled_events.begin(), options.modelled_events.end(), event) !=
               options.modelled_events.end();
    };
    // 1. Each figure, and what only results can tell: counted on one side only, exact on one side only, another
    // kind of machine. The exact figures that can be compared are gathered per event for the gate.
    struct Pending { std::size_t benchmark, figure; };
    std::vector<std::string> exact_events;                       // in the order met
    std::vector<std::vector<gate::Label>> exact_labels;          // per event: its benchmarks
    std::vector<std::vector<Pending>> exact_at;
    std::vector<gate::Label> time_labels;
    std::vector<Pending> time_at;
    std::vector<char> exact_unjudged, exact_judged;
    const bool emulated = !after.emulated.empty();
    for (const auto& b : after.results) {
        BenchmarkChange bc;
        bc.name = b.name;
        const Result* a = find(before, b.name);
        if (!a) {
            bc.verdict = Verdict::added;
            bc.why = "not in the baseline";
            out.benchmarks.push_back(std::move(bc));
            exact_unjudged.push_back(0);
            exact_judged.push_back(0);
            continue;
        }
        const std::size_t index = out.benchmarks.size();
        bool judged = false, unjudged = false;
        for (const auto& fb : b.counts) {
            const CountFigure* fa = a->count(fb.event);
            FigureChange f;
            f.figure = fb.event;
            f.exact = fb.exact && fa && fa->exact;
            f.modelled = emulated && fb.exact && gate::is_modelled_event(fb.event);
            f.after = fb.per_iteration();
            f.after_text = format_per_iteration(fb);
            if (!fa) {
                f.verdict = Verdict::unjudged;
                f.why = "the baseline did not count it";
                if (fb.exact && (!f.modelled || gated_modelled(fb.event))) unjudged = true;
            } else {
                f.before = fa->per_iteration();
                f.before_text = format_per_iteration(*fa);
                if (fb.exact != fa->exact) {
                    f.verdict = Verdict::unjudged;
                    f.why = "exact on one side only";
                    unjudged = true;
                } else if (!f.exact) {
                    f.verdict = detail::compare_exact(*fa, fb) == 0 ? Verdict::unchanged : Verdict::not_gated;
                    f.why = "not exact: shown, not gated";
                } else if (!same_machine_kind) {
                    f.verdict = Verdict::unjudged;
                    f.why = "counted on another kind of machine (emulated '" + before.emulated + "' against '" +
                            after.emulated + "')";
                    unjudged = true;
                } else if (f.modelled && !gated_modelled(fb.event)) {
                    f.verdict = detail::compare_exact(*fa, fb) == 0 ? Verdict::unchanged : Verdict::not_gated;
                    f.why = "modelled, not measured: gated only with --counter " + fb.event;
                } else {
                    judged = true;
                    if (!fa->steady() || !fb.steady())
                        out.notes.push_back(fmt::format("{} in {}: not steady in {} (count(3N) - count(2N) differs "
                                                        "from count(2N) - count(N)): its per-iteration figure is an "
                                                        "estimate, and so is this comparison",
                                                        fb.event, b.name,
                                                        !fa->steady() && !fb.steady() ? "the baseline and this run"
                                                        : !fa->steady()               ? "the baseline"
                                                                                      : "this run"));
                    std::size_t e = static_cast<std::size_t>(
                        std::find(exact_events.begin(), exact_events.end(), fb.event) - exact_events.begin());
                    if (e == exact_events.size()) {
                        exact_events.push_back(fb.event);
                        exact_labels.emplace_back();
                        exact_at.emplace_back();
                    }
                    exact_labels[e].push_back({b.name, {{fa->per_iteration()}, {}}, {{detail::exact_after(*fa, fb)}, {}}});
                    exact_at[e].push_back({index, bc.figures.size()});
                }
            }
            bc.figures.push_back(std::move(f));
        }
        for (const auto& fa : a->counts)
            if (fa.exact && !b.count(fa.event)) {
                FigureChange f;
                f.figure = fa.event;
                f.before = fa.per_iteration();
                f.before_text = format_per_iteration(fa);
                f.exact = true;
                f.modelled = emulated && gate::is_modelled_event(fa.event);
                f.verdict = Verdict::unjudged;
                f.why = "not counted in this run";
                unjudged = true;
                bc.figures.push_back(std::move(f));
            }
        FigureChange t;
        t.figure = "ns/op";
        t.before = a->time.median;
        t.after = b.time.median;
        t.before_text = detail::ns_text(a->time.median);
        t.after_text = detail::ns_text(b.time.median);
        if (!judged && !unjudged) { // time decides: judged with the other benchmarks that time decides
            time_labels.push_back({b.name, {a->time.epoch_ns_per_op, {}}, {b.time.epoch_ns_per_op, {}}});
            time_at.push_back({index, bc.figures.size()});
        }
        bc.figures.push_back(std::move(t));
        exact_unjudged.push_back(unjudged);
        exact_judged.push_back(judged);
        out.benchmarks.push_back(std::move(bc));
    }
    // 2. The gate's judgement: each exact event over its benchmarks, and time over those it decides.
    gate::Options exact_options;
    exact_options.exact = true;
    exact_options.direction = options.direction;
    exact_options.accept = options.accept;
    for (std::size_t e = 0; e < exact_events.size(); ++e) {
        gate::Options o = exact_options;
        o.modelled = gate::is_modelled_event(exact_events[e]) && emulated;
        o.threshold = options.threshold;
        o.modelled_floor = 0; // per-iteration figures: the floor is in events of a whole run (pmc diff's)
        const gate::Judgement j = gate::judge(exact_labels[e], 1, 1, o);
        if (o.modelled)
            out.notes.push_back(fmt::format("{} is modelled by pmc's {}, not measured: gated because --counter named "
                                            "it, by the exact rule, a change under {} passing{}",
                                            exact_events[e],
                                            pmc::is_modelled_branch_event_name(exact_events[e])
                                                ? "branch predictor model (pmc emulate --branches)"
                                                : "cache model (pmc emulate --cache)",
                                            j.threshold->text,
                                            j.modelled_default_threshold ? " (the modelled default; --threshold changes it)" : ""));
        for (std::size_t i = 0; i < j.labels.size(); ++i) {
            FigureChange& f = out.benchmarks[exact_at[e][i].benchmark].figures[exact_at[e][i].figure];
            f.verdict = detail::verdict_of(j.labels[i]);
            f.why = detail::why_of(j.labels[i], j, true);
        }
    }
    gate::Options time_options;
    time_options.direction = options.direction;
    time_options.accept = options.accept;
    time_options.threshold = gate::Threshold{options.time_threshold_pct, true, fmt::format("{:g}%", options.time_threshold_pct)};
    std::size_t time_epochs_before = 0, time_epochs_after = 0;
    for (const auto& l : time_labels) {
        time_epochs_before = std::max(time_epochs_before, l.before.values.size());
        time_epochs_after = std::max(time_epochs_after, l.after.values.size());
    }
    const gate::Judgement time = gate::judge(time_labels, time_epochs_before, time_epochs_after, time_options);
    for (std::size_t i = 0; i < time.labels.size(); ++i) {
        FigureChange& f = out.benchmarks[time_at[i].benchmark].figures[time_at[i].figure];
        f.verdict = detail::verdict_of(time.labels[i]);
        f.why = detail::why_of(time.labels[i], time, false);
    }
    // 3. Each benchmark's verdict: its exact counts decide where it has any, else its time.
    for (std::size_t i = 0; i < out.benchmarks.size(); ++i) {
        BenchmarkChange& bc = out.benchmarks[i];
        if (bc.verdict == Verdict::added) continue;
        auto worst = [&](bool exact_figures) {
            Verdict v = Verdict::unchanged;
            for (const auto& f : bc.figures) {
                if ((f.figure == "ns/op") == exact_figures) continue;
                if (exact_figures && (!f.exact || (f.modelled && !gated_modelled(f.figure)))) continue;
                if (f.verdict == Verdict::unjudged) return Verdict::unjudged;
                if (f.verdict == Verdict::changed) v = Verdict::changed;
                else if (v == Verdict::unchanged && !exact_figures) v = f.verdict; // an exact count's excuse: its figure's
            }
            return v;
        };
        if (exact_unjudged[i]) {
            bc.verdict = Verdict::unjudged;
            bc.why = "an exact count could not be compared";
        } else if (exact_judged[i]) {
            bc.verdict = worst(true);
            bc.why = "exact counts decide; time is shown";
        } else {
            bc.verdict = worst(false);
            bc.why = "time decides (no exact count on both sides): " + bc.figures.back().why;
        }
        if (bc.verdict == Verdict::changed) ++out.changed;
        if (bc.verdict == Verdict::unjudged) ++out.unjudged;
    }
    for (const auto& a : before.results)
        if (!find(after, a.name)) {
            BenchmarkChange bc;
            bc.name = a.name;
            bc.verdict = Verdict::gone;
            bc.why = "in the baseline only (not run: filtered out or removed)";
            out.benchmarks.push_back(std::move(bc));
        }
    if (options.accept)
        for (const auto& [name, accepted] : *options.accept)
            if (!find(after, name) && !find(before, name))
                out.notes.push_back(fmt::format("--accept line {}: no benchmark '{}' on either side (mistyped, or "
                                                "removed?)", accepted.line, name));
    for (const auto& event : options.modelled_events)
        if (std::find(exact_events.begin(), exact_events.end(), event) == exact_events.end())
            out.notes.push_back("--counter " + event + ": not an exact modelled event both sides counted: not gated");
    return out;
}

// ---- 6. Markdown ----------------------------------------------------------------------------------------------------

namespace detail {
inline std::string markdown_cell(std::string s) {
    for (std::size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    return s;
}
} // namespace detail

namespace detail {
/// Whether a figure of `event` in `report` is a model's (pmc emulate --cache, --branches), not a count.
inline bool modelled(const Report& report, const std::string& event) {
    return !report.emulated.empty() && gate::is_modelled_event(event);
}
} // namespace detail

/// The results as a Markdown table, with notes saying which figures are exact, modelled and noisy.
inline std::string to_markdown(const Report& report) {
    std::string out = "| benchmark | ns/op | err% |";
    std::string rule = "|---|---:|---:|";
    for (const auto& e : report.events)
        if (e.opened) {
            out += " " + detail::markdown_cell(e.event) + "/iter" +
                   (e.exact ? (detail::modelled(report, e.event) ? " (modelled)" : " (exact)") : "") + " |";
            rule += "---:|";
        }
    out += "\n" + rule + "\n";
    for (const auto& r : report.results) {
        out += fmt::format("| {} | {} | {:.1f}% |", detail::markdown_cell(r.name), detail::ns_text(r.time.median),
                           r.time.err_pct);
        for (const auto& c : r.counts) // "~": not steady, or negative: no exact per-iteration figure (notes below)
            out += std::string(" ") + (c.steady() && c.difference >= 0 ? "" : "~") + format_per_iteration(c) + " |";
        out += "\n";
    }
    out += "\n";
    bool any_exact = false;
    for (const auto& e : report.events)
        if (e.opened && e.exact) {
            any_exact = true;
            if (detail::modelled(report, e.event))
                out += fmt::format("- modelled: {}: count(2N) - count(N) over N, of pmc's {} model (pmc emulate): the "
                                   "same every run, but a model's figure, not a real core's, and it moves with the "
                                   "memory layout\n",
                                   e.event, pmc::is_modelled_branch_event_name(e.event) ? "branch predictor" : "cache");
            else
                out += fmt::format("- exact: {}{}: count(2N) - count(N) over N; the same every run for a deterministic "
                                   "body\n", e.event, report.emulated.empty() ? "" : " (emulated: " + report.emulated + ")");
        }
    for (const auto& e : report.events)
        if (e.opened && !e.exact) out += fmt::format("- noisy: {}: {}\n", e.event, e.why);
    out += "- noisy: ns/op: the median of the time epochs; err%: their median absolute deviation from it";
    out += report.emulated.empty() ? "\n" : " (under the emulator: the emulator's time, not a native run's)\n";
    std::vector<std::string> explained; // a reason's explanation (after its first line) once, not per event
    for (const auto& e : report.events) {
        if (e.opened) continue;
        const std::size_t nl = e.why.find('\n');
        out += fmt::format("- not counted: {}: {}\n", e.event, e.why.substr(0, nl));
        if (nl == std::string::npos) continue;
        std::string rest = e.why.substr(nl + 1);
        std::string key = rest; // the same explanation about another event: not repeated
        for (std::size_t at; (at = key.find("'" + e.event + "'")) != std::string::npos;) key.erase(at, e.event.size() + 2);
        // An earlier event's explanation may be the start of this one (a sentence added for this event): only the
        // rest is new.
        std::size_t known = 0;
        for (const auto& k : explained)
            if (k.size() > known && key.compare(0, k.size(), k) == 0) known = k.size();
        if (known == key.size()) continue;
        if (key != rest) known = 0; // the event is named in it: shown whole
        rest.erase(0, rest.find_first_not_of(' ', known));
        for (auto& c : rest)
            if (c == '\n') c = ' ';
        out += "  " + rest + "\n";
        explained.push_back(std::move(key));
    }
    for (const auto& r : report.results)
        for (const auto& c : r.counts) {
            if (!c.steady())
                out += fmt::format("- not steady: {} in {}: count(2N) - count(N) = {}, but count(3N) - count(2N) = {} "
                                   "(N = {}): the model's state differs at each measurement's start (warming up), so "
                                   "{} per iteration is an estimate, not an exact figure\n",
                                   c.event, r.name, c.difference, *c.next_difference, c.iterations,
                                   format_per_iteration(c));
            else if (c.difference < 0)
                out += fmt::format("- negative: {} in {}: count(2N) - count(N) = {}: fewer events in more iterations, "
                                   "which no per-iteration count can be\n", c.event, r.name, c.difference);
        }
    if (!any_exact) out += "- no exact counter here: run under `pmc emulate` for exact instruction counts\n";
    if (report.overhead) {
        const auto& o = *report.overhead;
        if (!o.event.empty())
            out += fmt::format("- harness: {} {} per iteration (included in each figure), {} per measurement "
                               "(cancels between N and 2N), {:.2g} ns per iteration\n",
                               fmt::format("{:g}", o.per_iteration), o.event, o.per_measurement, o.ns_per_iteration);
        else
            out += fmt::format("- harness: {:.2g} ns per iteration\n", o.ns_per_iteration);
    }
    double seconds = 0;
    for (const auto& r : report.results) seconds += r.run_seconds;
    out += fmt::format("- measuring took {:.2f} s\n", seconds);
    return out;
}

/// A comparison as a Markdown table, `old → new (+x %)` per figure and the verdict per benchmark.
inline std::string to_markdown(const Comparison& c) {
    std::string out = "| benchmark | verdict | figures (old → new) |\n|---|---|---|\n";
    for (const auto& b : c.benchmarks) {
        std::string figures;
        for (const auto& f : b.figures) {
            if (!figures.empty()) figures += "; ";
            if (f.before_text.empty()) {
                figures += fmt::format("{} {}", f.figure, f.after_text);
            } else {
                const double pct = f.change_pct();
                const char* kind = f.modelled ? " (modelled)" : f.exact ? " (exact)" : "";
                if (f.after_text.empty()) // a figure this run did not count: no change to compute
                    figures += fmt::format("{}{} {} → not counted", f.figure, kind, f.before_text);
                else
                    figures += fmt::format("{}{} {} → {} ({}{:.2f} %)", f.figure, kind, f.before_text, f.after_text,
                                           pct >= 0 ? "+" : "", pct);
            }
            if (f.verdict != Verdict::unchanged) figures += std::string(" ") + to_string(f.verdict);
            if (!f.why.empty() && f.verdict != Verdict::unchanged)
                figures += " (" + f.why + ")";
        }
        out += fmt::format("| {} | {} | {} |\n", detail::markdown_cell(b.name), to_string(b.verdict),
                           detail::markdown_cell(figures));
    }
    out += "\n";
    for (const auto& note : c.notes) out += "- " + note + "\n";
    if (!c.machine_difference.empty()) {
        std::string what = c.machine_difference;
        for (std::size_t i = 0; (i = what.find('\n', i)) != std::string::npos; i += 3) what.replace(i, 1, "\n  ");
        out += c.refused ? fmt::format("- cannot judge: the baseline and this run come from {}\n  Their figures differ "
                                       "for the emulator's or the model's sake, not the program's. Record both under "
                                       "one emulator (pmc emulate --qemu PATH) with the same model options (--cache, "
                                       "--I1, --D1, --L2, --LL, --inclusion, --branches), or compare anyway with "
                                       "--any-emulator.\n",
                                       what)
                         : fmt::format("- warning (--any-emulator): the baseline and this run come from {}\n", what);
    }
    const bool listed = !c.notes.empty() || !c.machine_difference.empty();
    if (c.refused)
        out += fmt::format("{}{} changed, {} could not be judged, and the sides cannot be compared (above): exit "
                           "status {}\n",
                           listed ? "\n" : "", c.changed, c.unjudged, c.exit_status());
    else
        out += fmt::format("{}{} changed, {} could not be judged: exit status {}\n", listed ? "\n" : "", c.changed,
                           c.unjudged, c.exit_status());
    return out;
}

// ---- 7. Registration and main ---------------------------------------------------------------------------------------

/// A registered benchmark: PMC_BENCHMARK(name) { ... } adds one.
struct Registered {
    const char* name;
    void (*function)(Bench&);
};

inline std::vector<Registered>& registry() {
    static std::vector<Registered> benchmarks;
    return benchmarks;
}

struct Registrar {
    Registrar(const char* name, void (*function)(Bench&)) { registry().push_back({name, function}); }
};

namespace detail {
inline const char* const usage =
    "usage: {0} [OPTIONS]\n"
    "Runs this program's benchmarks and prints a Markdown table: ns/op with its spread, and per iteration each\n"
    "counter that opens here (exact instructions under `pmc emulate`: pmc emulate -- {0}).\n"
    "\n"
    "  --filter REGEX        only the benchmarks whose name REGEX finds (ECMAScript)\n"
    "  --list                list the benchmarks and exit\n"
    "  --events LIST         counters, comma-separated (default: instructions:u,cycles:u,branches:u,branch-misses:u)\n"
    "  --iterations N        a fixed N for the counts (default: doubled until N iterations count 100000\n"
    "                        instructions of an exact counter; without one, until they last an epoch)\n"
    "  --epochs N            time epochs (default 11)\n"
    "  --epoch-ms MS         each time epoch lasts at least MS milliseconds (default 1)\n"
    "  --json FILE           also write the results as JSON (a baseline for --compare)\n"
    "  --compare BASE        compare with BASE (a --json file) and gate: exit 3 on a change, 4 when it cannot judge\n"
    "  --threshold VALUE     exact counts: a change under VALUE per iteration (100) or under VALUE of the BASE\n"
    "                        figure (0.5%) passes, as in pmc diff (default: any change fails; a modelled\n"
    "                        event: 10%)\n"
    "  --time-threshold PCT  time, judged only without an exact count: at least PCT % and beyond the noise\n"
    "                        (the rank-sum test of the epochs, Holm's step-down over the benchmarks; default 5)\n"
    "  --fail-on-increase    only increases fail the gate (a decrease is shown and passes)\n"
    "  --accept FILE         intended changes, one benchmark a line: VALUE NAME, VALUE the per-iteration delta\n"
    "                        accepted (+4, -120, +2.5%), a range (-100..0, 0%..5%); pmc diff's --accept format\n"
    "  --counter EVENT       also gate EVENT, a modelled event, which is otherwise shown, not gated: pmc emulate\n"
    "                        --cache's L1-dcache-loads, L1-dcache-load-misses, L1-dcache-stores,\n"
    "                        L1-dcache-store-misses, L1-icache-load-misses, LLC-loads, LLC-load-misses, LLC-stores,\n"
    "                        LLC-store-misses, cache-references and cache-misses, and --branches' branch-misses\n"
    "                        (the list: pmc/modelled_events.hpp)\n"
    "  --any-emulator        compare with a BASE counted under another emulator, emulated CPU model, or (for a\n"
    "                        --counter event) another cache model or predictor, with a warning; without it such a\n"
    "                        comparison exits 4, naming both (so does a BASE of format version 1 against a run\n"
    "                        under pmc emulate: it records none of them)\n"
    "  -h, --help            this help\n"
    "Exit status: 0 done (with --compare: nothing changed); 1 a usage error, a benchmark failed, or a file could not\n"
    "be read or written; 3 a benchmark changed; 4 a benchmark could not be judged (docs/bench.md).\n";

inline bool number_arg(const char* text, double& out) {
    char* end = nullptr;
    errno = 0;
    out = std::strtod(text, &end);
    return errno == 0 && end != text && *end == '\0' && std::isfinite(out) && out >= 0;
}

inline int usage_error(const std::string& message) {
    std::fprintf(stderr, "%s (see --help)\n", message.c_str());
    return 1;
}
} // namespace detail

namespace detail {
inline constexpr std::size_t child_output_limit = std::size_t{1} << 20; // a benchmark's JSON, at most

/// Marks in `selected` (one byte per registered benchmark, already sized) the benchmarks whose name `filter` finds.
/// The regular expression is built in a child process: its allocations stay out of this one, whose state every
/// benchmark's child inherits. False, with the reason on stderr, for a bad expression.
inline bool select(const char* filter, std::vector<char>& selected) {
    int fds[2];
    if (::pipe(fds) != 0) return std::perror("pipe"), false;
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return std::perror("fork"), false;
    if (pid == 0) {
        ::close(fds[0]);
        int code = 0;
        try {
            const std::regex pattern(filter);
            for (std::size_t i = 0; i < selected.size(); ++i)
                selected[i] = std::regex_search(registry()[i].name, pattern) ? 1 : 0;
            if (::write(fds[1], selected.data(), selected.size()) != static_cast<ssize_t>(selected.size())) code = 1;
        } catch (const std::regex_error& e) {
            std::fprintf(stderr, "--filter '%s' is not a regular expression: %s (see --help)\n", filter, e.what());
            code = 1;
        }
        ::_exit(code);
    }
    ::close(fds[1]);
    std::size_t got = 0;
    while (got < selected.size()) {
        const ssize_t n = ::read(fds[0], selected.data() + got, selected.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    ::close(fds[0]);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return got == selected.size() && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}

/// Runs registered benchmark `r` in a child process forked from this one, and appends the child's report (JSON) to
/// `out`, whose capacity must already hold it: the parent allocates nothing between forks, so every child starts
/// from the same process state, and what one benchmark leaves behind (the heap's shape, lazily built state) cannot
/// move another's counts. False, with the reason on stderr, when the benchmark failed.
inline bool run_in_child(const Registered& r, const Options& options, bool measure_overhead, std::vector<char>& out) {
    int fds[2];
    if (::pipe(fds) != 0) {
        std::fprintf(stderr, "benchmark '%s': pipe failed: %s\n", r.name, std::strerror(errno));
        return false;
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
        std::fprintf(stderr, "benchmark '%s': fork failed: %s\n", r.name, std::strerror(errno));
        ::close(fds[0]);
        ::close(fds[1]);
        return false;
    }
    if (pid == 0) {
        ::close(fds[0]);
        int code = 0;
        std::string json;
        try {
            Options mine = options;
            mine.measure_overhead = measure_overhead;
            Bench bench(std::move(mine));
            bench.set_current_name(r.name);
            r.function(bench);
            if (bench.results().empty()) {
                std::fprintf(stderr, "benchmark '%s' measured nothing: its body must call bench.run(...)\n", r.name);
                code = 1;
            }
            json = to_json(bench.report());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "benchmark '%s' failed: %s\n", r.name, e.what());
            code = 1;
        }
        for (std::size_t done = 0; done < json.size();) {
            const ssize_t n = ::write(fds[1], json.data() + done, json.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            done += static_cast<std::size_t>(n);
        }
        std::fflush(nullptr);
        ::_exit(code);
    }
    ::close(fds[1]);
    bool too_long = false;
    for (;;) {
        char chunk[4096];
        const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (out.size() + static_cast<std::size_t>(n) > out.capacity()) too_long = true;
        else out.insert(out.end(), chunk, chunk + n);
    }
    ::close(fds[0]);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(wstatus)) {
        std::fprintf(stderr, "benchmark '%s' died of signal %d (%s)\n", r.name, WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
        return false;
    }
    if (too_long) {
        std::fprintf(stderr, "benchmark '%s': its results exceed %zu bytes\n", r.name, child_output_limit);
        return false;
    }
    return WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}
} // namespace detail

/// Runs the registered benchmarks with the command line's options; PMC_BENCHMARK_MAIN() calls it.
inline int run_main(int argc, char** argv) {
    // Nothing here allocates in proportion to an argument's text (paths, the filter) before the benchmarks' children
    // are forked: the children's start state must not depend on them (see run_in_child).
    const char* self = argc > 0 ? argv[0] : "bench";
    Options options;
    GateOptions gate;
    const char* filter = nullptr;
    const char* json_path = nullptr;
    const char* compare_path = nullptr;
    const char* accept_path = nullptr;
    bool list = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const char* v = nullptr;
        double number = 0;
        if (arg == "-h" || arg == "--help") {
            fmt::print(fmt::runtime(detail::usage), self);
            return 0;
        } else if (arg == "--list") {
            list = true;
        } else if (arg == "--fail-on-increase") {
            gate.direction = pmc::gate::Direction::increase;
        } else if (arg == "--any-emulator") {
            gate.any_emulator = true;
        } else if (arg == "--filter" || arg == "--json" || arg == "--compare" || arg == "--events" ||
                   arg == "--iterations" || arg == "--epochs" || arg == "--epoch-ms" || arg == "--threshold" ||
                   arg == "--time-threshold" || arg == "--accept" || arg == "--counter") {
            // --counter and --threshold are read again after measuring: nothing that only selects what is gated may
            // allocate before the benchmarks' children are forked (their heaps, so their modelled misses, would move).
            if (i + 1 >= argc) return detail::usage_error(std::string(arg) + " needs a value");
            v = argv[++i];
            if (arg == "--filter") filter = v;
            else if (arg == "--json") json_path = v;
            else if (arg == "--compare") compare_path = v;
            else if (arg == "--accept") accept_path = v;
            else if (arg == "--counter") continue;
            else if (arg == "--threshold") {
                if (!gate::threshold_syntax(v))
                    return detail::usage_error(std::string("--threshold needs a count (e.g. 100) or a percentage (e.g. "
                                                           "0.5%), without a sign, not '") + v + "'");
            }
            else if (arg == "--events") {
                options.events = pmc::split_event_list(v); // pmc count -e's rule: an empty event is refused
                if (std::string why = pmc::empty_event_text("--events", v, options.events); !why.empty())
                    return detail::usage_error(why);
            } else if (!detail::number_arg(v, number) ||
                       ((arg == "--iterations" || arg == "--epochs") && std::floor(number) != number) ||
                       ((arg == "--epochs" || arg == "--epoch-ms") && (number < 1 || number > 100000)) ||
                       (arg == "--iterations" && number > 1e12)) {
                return detail::usage_error(std::string(arg) + " needs a " +
                                           (arg == "--epochs" ? "whole number from 1 to 100000"
                                            : arg == "--iterations" ? "whole number (0: chosen)"
                                            : arg == "--epoch-ms" ? "number of milliseconds from 1 to 100000"
                                                                  : "percentage, 0 or more") +
                                           ", not '" + v + "'");
            } else if (arg == "--iterations") options.iterations = static_cast<std::uint64_t>(number);
            else if (arg == "--epochs") options.epochs = static_cast<unsigned>(number);
            else if (arg == "--epoch-ms") options.epoch_ns = static_cast<std::uint64_t>(number * 1e6);
            else gate.time_threshold_pct = number;
        } else {
            return detail::usage_error("unknown argument '" + std::string(arg) + "'");
        }
    }
    const auto& all = registry();
    std::vector<char> selected(all.size(), 1);
    if (filter && !detail::select(filter, selected)) return 1;
    std::vector<Registered> chosen;
    chosen.reserve(all.size()); // its size, like every allocation here, independent of the filter
    for (std::size_t i = 0; i < all.size(); ++i)
        if (selected[i]) chosen.push_back(all[i]);
    if (list) {
        for (const auto& r : chosen) std::printf("%s\n", r.name);
        return 0;
    }
    if (chosen.empty()) {
        std::fprintf(stderr, "no benchmark matches --filter '%s' (--list shows them)\n", filter ? filter : "");
        return 1;
    }
    if (compare_path && ::access(compare_path, R_OK) != 0) { // fail before measuring
        std::fprintf(stderr, "cannot read the baseline '%s': %s\n", compare_path, std::strerror(errno));
        return 1;
    }
    if (accept_path && !compare_path) return detail::usage_error("--accept needs --compare BASE");
    if (accept_path && ::access(accept_path, R_OK) != 0) {
        std::fprintf(stderr, "cannot read --accept '%s': %s\n", accept_path, std::strerror(errno));
        return 1;
    }
    int status = 0;
    Report merged;
    try {
        std::vector<char> buffer;
        buffer.reserve(detail::child_output_limit * all.size()); // before the first fork: no allocation between
        std::vector<std::pair<std::size_t, std::size_t>> outputs(all.size());
        for (std::size_t i = 0; i < chosen.size(); ++i) {
            const std::size_t begin = buffer.size();
            if (!detail::run_in_child(chosen[i], options, i == 0, buffer)) status = 1;
            outputs[i] = {begin, buffer.size() - begin};
        }
        for (std::size_t i = 0; i < chosen.size(); ++i) {
            if (outputs[i].second == 0) continue;
            Report one = parse_report(std::string_view(buffer.data() + outputs[i].first, outputs[i].second),
                                      std::string("benchmark '") + chosen[i].name + "''s child");
            if (merged.events.empty()) merged.events = one.events;
            if (one.overhead) merged.overhead = one.overhead;
            merged.emulated = one.emulated;
            merged.emulator = one.emulator;
            merged.cpu = one.cpu;
            merged.cache_model = one.cache_model;
            merged.branch_model = one.branch_model;
            merged.machine_recorded = one.machine_recorded;
            for (auto& r : one.results) merged.results.push_back(std::move(r));
        }
        std::fputs(to_markdown(merged).c_str(), stdout);
        std::fflush(stdout);
        if (json_path) {
            std::ofstream f(json_path, std::ios::trunc);
            f << to_json(merged);
            f.close();
            if (!f) {
                std::fprintf(stderr, "cannot write '%s': %s\n", json_path, std::strerror(errno));
                return 1;
            }
        }
        if (compare_path) {
            const Report baseline = read_report(compare_path); // after measuring: its size moves no benchmark
            for (int i = 1; i + 1 < argc; ++i) { // the gate's own options, read only now (see the first reading)
                const std::string_view arg = argv[i];
                if (arg == "--counter") gate.modelled_events.emplace_back(argv[++i]);
                else if (arg == "--threshold") gate.threshold = pmc::gate::parse_threshold(argv[++i]);
                else if (arg != "--list" && arg != "--fail-on-increase" && arg != "--any-emulator" &&
                         arg.rfind("--", 0) == 0)
                    ++i; // its value
            }
            pmc::gate::AcceptList accepted;
            if (accept_path) {
                const auto text = pmc::detail::read_file(accept_path);
                if (!text) raise(make_failure(errno, std::string("cannot read --accept '") + accept_path + "'"));
                auto parsed = pmc::gate::parse_accept(*text);
                if (const auto* bad = std::get_if<pmc::gate::AcceptError>(&parsed)) {
                    std::fprintf(stderr, "--accept '%s' line %zu: %s (%s)\n", accept_path, bad->line, bad->why.c_str(),
                                 pmc::gate::accept_format_hint);
                    return 1;
                }
                accepted = std::get<pmc::gate::AcceptList>(std::move(parsed));
                gate.accept = &accepted;
            }
            const Comparison c = compare(baseline, merged, gate);
            std::printf("\ncompared with %s:\n\n%s", compare_path, to_markdown(c).c_str());
            std::fflush(stdout);
            if (status == 0) status = c.exit_status();
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return status;
}

} // namespace bench
PMC_END_NAMESPACE

/// Defines and registers a benchmark; its body receives `bench` (pmc::bench::Bench&) and calls bench.run(body).
#define PMC_BENCHMARK(name)                                                                                            \
    static void pmc_benchmark_##name(::pmc::bench::Bench& bench);                                                      \
    static const ::pmc::bench::Registrar pmc_benchmark_registrar_##name{#name, &pmc_benchmark_##name};                 \
    static void pmc_benchmark_##name([[maybe_unused]] ::pmc::bench::Bench& bench)

/// Defines main(): runs the registered benchmarks (pmc::bench::run_main).
#define PMC_BENCHMARK_MAIN()                                                                                           \
    int main(int argc, char** argv) { return ::pmc::bench::run_main(argc, argv); }
