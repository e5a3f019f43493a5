// SPDX-License-Identifier: MIT
// pmc/bench.hpp: the comparison's verdicts and exit statuses, its JSON read back, the figures' arithmetic and the
// Bench in-process (any machine); the example suite and a suite whose benchmarks go wrong, run as programs (their
// messages and exit statuses); and under pmc emulate (skipped, with the reason, without QEMU's dynamic user mode):
// instructions per iteration identical run after run, and the planted regression found exactly, in its benchmark
// alone.
#include "catch.hpp"
#include "command.hpp"
#include "emulator.hpp"

#include <pmc/bench.hpp>
#include <pmc/modelled_events.hpp>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <variant>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace {

using pmc::bench::CountFigure;
using pmc::bench::Report;
using pmc::bench::Result;
using pmc::bench::Verdict;

const std::string pmc_tool = PMC_TOOL_PATH;
const std::string example = PMC_EXAMPLE_BENCH;
const std::string regressed = PMC_EXAMPLE_BENCH_REGRESSED;
const std::string cases = PMC_BENCH_CASES;

Result result(const std::string& name, std::int64_t difference, std::uint64_t n, bool exact,
              std::vector<double> epochs = {10, 10.1, 9.9, 10, 10.2, 10, 9.8, 10, 10.1, 10, 9.9}) {
    Result r;
    r.name = name;
    if (n) r.counts.push_back(CountFigure{"instructions:u", exact, difference, n, {}});
    r.time = pmc::bench::detail::time_statistics(std::move(epochs), 100);
    return r;
}

Report report(std::vector<Result> results, std::string emulated = "x86_64") {
    Report r;
    r.machine_recorded = true; // as a Bench and a result of format version 2 record it
    r.emulator = emulated.empty() ? "" : "QEMU 7.2.22, plugin API 1";
    r.cpu = emulated.empty() ? "a test CPU" : "emulated by QEMU's TCG (pmc emulate): the CPU model QEMU presents, K8";
    r.emulated = std::move(emulated);
    r.events.push_back({"instructions:u", true, true, ""});
    r.results = std::move(results);
    return r;
}

const pmc::bench::BenchmarkChange& change(const pmc::bench::Comparison& c, const std::string& name) {
    for (const auto& b : c.benchmarks)
        if (b.name == name) return b;
    FAIL("no benchmark " << name << " in the comparison");
    throw 0;
}

/// The verdict column of a comparison table, benchmark by benchmark.
std::map<std::string, std::string> verdicts(const std::string& out) {
    std::map<std::string, std::string> v;
    const std::regex row(R"(\| ([a-z_0-9]+) \| ([a-z ]+) \| )");
    const auto at = out.find("compared with");
    REQUIRE(at != std::string::npos);
    const std::string table = out.substr(at);
    for (std::sregex_iterator i(table.begin(), table.end(), row), end; i != end; ++i)
        if ((*i)[1] != "benchmark") v[(*i)[1]] = (*i)[2];
    return v;
}

/// The instruction column of a result table, benchmark by benchmark.
std::map<std::string, std::string> instructions(const std::string& out) {
    std::map<std::string, std::string> v;
    const std::regex row(R"(\| ([a-z_0-9]+) \| [0-9.]+ \| [0-9.]+% \| ([0-9.]+) \|)");
    for (std::sregex_iterator i(out.begin(), out.end(), row), end; i != end; ++i) v[(*i)[1]] = (*i)[2];
    return v;
}

using pmc_test::why_no_emulator;

std::string temp_path(const std::string& name) {
    static const std::string dir = [] {
        char t[] = "/tmp/pmc-test-bench-XXXXXX";
        const char* d = ::mkdtemp(t);
        return std::string(d ? d : "/tmp");
    }();
    return dir + "/" + name;
}

} // namespace

TEST_CASE("an exact count that moves fails the gate in its benchmark alone, equal ones pass", "[bench]") {
    const Report base = report({result("a", 1000, 10, true), result("b", 500, 10, true)});
    SECTION("identical: exit 0") {
        const auto c = pmc::bench::compare(base, base);
        CHECK(c.exit_status() == 0);
        CHECK(change(c, "a").verdict == Verdict::unchanged);
    }
    SECTION("one instruction per iteration more in b: exit 3, b alone") {
        const auto c = pmc::bench::compare(base, report({result("a", 1000, 10, true), result("b", 510, 10, true)}));
        CHECK(c.exit_status() == 3);
        CHECK(c.changed == 1);
        CHECK(change(c, "a").verdict == Verdict::unchanged);
        CHECK(change(c, "b").verdict == Verdict::changed);
        const std::string table = pmc::bench::to_markdown(c);
        CHECK(table.find("50 → 51 (+2.00 %)") != std::string::npos);
    }
    SECTION("the same figure from another N is unchanged (compared as fractions, not rounded)") {
        const auto c = pmc::bench::compare(base, report({result("a", 3000, 30, true), result("b", 1000, 20, true)}));
        CHECK(c.exit_status() == 0);
    }
    SECTION("a change of 1 in 3 per iteration is still a change") {
        const auto c = pmc::bench::compare(report({result("a", 1000, 3, true)}), report({result("a", 1001, 3, true)}));
        CHECK(c.exit_status() == 3);
    }
    SECTION("--threshold: a change under it passes, one over it fails") {
        const Report after = report({result("a", 1010, 10, true), result("b", 600, 10, true)});
        pmc::bench::GateOptions options;
        options.threshold = pmc::gate::parse_threshold("5%");
        const auto c = pmc::bench::compare(base, after, options);
        CHECK(change(c, "a").verdict == Verdict::unchanged);
        CHECK(change(c, "a").figures.front().verdict == Verdict::under_threshold);
        CHECK(change(c, "b").verdict == Verdict::changed);
        CHECK(c.exit_status() == 3);
        // A count, as in pmc diff: 10 per iteration. a moved by 1 (passes), b by 40 (fails).
        options.threshold = pmc::gate::parse_threshold("10");
        const auto counts = pmc::bench::compare(base, after, options);
        CHECK(change(counts, "a").figures.front().verdict == Verdict::under_threshold);
        CHECK(change(counts, "b").verdict == Verdict::changed);
    }
}

TEST_CASE("what the gate cannot judge exits 4, new and gone benchmarks are reported and pass", "[bench]") {
    const Report base = report({result("a", 1000, 10, true), result("gone", 1, 1, true)});
    SECTION("exact on one side only") {
        const auto c = pmc::bench::compare(base, report({result("a", 1000, 10, false)}, ""));
        CHECK(c.exit_status() == 4);
        CHECK(change(c, "a").verdict == Verdict::unjudged);
    }
    SECTION("the exact count missing from this run") {
        const auto c = pmc::bench::compare(base, report({result("a", 0, 0, false)}, ""));
        CHECK(c.exit_status() == 4);
    }
    SECTION("emulated for another architecture") {
        const auto c = pmc::bench::compare(base, report({result("a", 1000, 10, true)}, "aarch64"));
        CHECK(c.exit_status() == 4);
    }
    SECTION("4 before 3: a change is not trusted where something else could not be checked") {
        const auto c = pmc::bench::compare(report({result("a", 1000, 10, true), result("b", 1, 1, true)}),
                                           report({result("a", 2000, 10, true), result("b", 0, 0, false)}));
        CHECK(c.changed == 1);
        CHECK(c.exit_status() == 4);
    }
    SECTION("new and gone") {
        const auto c = pmc::bench::compare(base, report({result("a", 1000, 10, true), result("new", 5, 1, true)}));
        CHECK(c.exit_status() == 0);
        CHECK(change(c, "new").verdict == Verdict::added);
        CHECK(change(c, "gone").verdict == Verdict::gone);
    }
}

TEST_CASE("the harness's gate is pmc diff's (pmc/gate.hpp): direction, accepted changes, modelled events", "[bench]") {
    const Report base = report({result("a", 1000, 10, true), result("b", 500, 10, true)});
    const Report after = report({result("a", 1040, 10, true), result("b", 450, 10, true)}); // a +4/iter, b -5/iter
    SECTION("--fail-on-increase: the decrease passes, the increase fails") {
        pmc::bench::GateOptions options;
        options.direction = pmc::gate::Direction::increase;
        const auto c = pmc::bench::compare(base, after, options);
        CHECK(change(c, "a").verdict == Verdict::changed);
        CHECK(change(c, "b").figures.front().verdict == Verdict::allowed);
        CHECK(c.exit_status() == 3);
    }
    SECTION("--accept: a change as accepted passes, another still fails") {
        const auto accepted = std::get<pmc::gate::AcceptList>(pmc::gate::parse_accept("+4 a\n-1..0 b\n+1 nowhere\n"));
        pmc::bench::GateOptions options;
        options.accept = &accepted;
        const auto c = pmc::bench::compare(base, after, options);
        CHECK(change(c, "a").figures.front().verdict == Verdict::accepted);
        CHECK(change(c, "b").verdict == Verdict::changed); // -5 is outside -1..0
        CHECK(c.changed == 1);
        CHECK_THAT(pmc::bench::to_markdown(c), ContainsSubstring("not as accepted: -1..0 (--accept line 2)"));
        CHECK_THAT(pmc::bench::to_markdown(c), ContainsSubstring("--accept line 3: no benchmark 'nowhere'"));
    }
    SECTION("a modelled event is shown, and gated only when asked (--counter), with its 10% default") {
        auto with_misses = [](Report r, std::int64_t a_misses) {
            r.events.push_back({"L1-dcache-load-misses:u", true, true, ""});
            for (auto& x : r.results) x.counts.push_back(CountFigure{"L1-dcache-load-misses:u", true, x.name == "a" ? a_misses : 100, 10, {}});
            return r;
        };
        const Report b0 = with_misses(report({result("a", 1000, 10, true), result("b", 500, 10, true)}), 1000);
        const Report small = with_misses(report({result("a", 1000, 10, true), result("b", 500, 10, true)}), 1050);
        const Report large = with_misses(report({result("a", 1000, 10, true), result("b", 500, 10, true)}), 1200);
        auto c = pmc::bench::compare(b0, large);
        CHECK(c.exit_status() == 0);
        CHECK(change(c, "a").figures.at(1).verdict == Verdict::not_gated);
        CHECK_THAT(change(c, "a").figures.at(1).why, ContainsSubstring("gated only with --counter L1-dcache-load-misses:u"));
        pmc::bench::GateOptions options;
        options.modelled_events = {"L1-dcache-load-misses:u"};
        c = pmc::bench::compare(b0, large, options);
        CHECK(c.exit_status() == 3);
        CHECK(change(c, "a").verdict == Verdict::changed);
        CHECK_THAT(pmc::bench::to_markdown(c), ContainsSubstring("L1-dcache-load-misses:u is modelled by pmc's cache model"));
        c = pmc::bench::compare(b0, small, options); // +5 %: under the modelled default of 10 %
        CHECK(c.exit_status() == 0);
        CHECK(change(c, "a").figures.at(1).verdict == Verdict::under_threshold);
        options.threshold = pmc::gate::parse_threshold("1%"); // --threshold overrides it
        CHECK(pmc::bench::compare(b0, small, options).exit_status() == 3);
    }
}

TEST_CASE("results from two emulators, CPU models or models of a gated event are refused (exit 4, both named) "
          "unless --any-emulator, and a result of format version 1 cannot tell", "[bench]") {
    auto with_misses = [](Report r, const std::string& cache_model) {
        r.cache_model = cache_model;
        r.events.push_back({"L1-dcache-load-misses", true, true, ""});
        for (auto& x : r.results) x.counts.push_back(CountFigure{"L1-dcache-load-misses", true, 100, 10, {}});
        return r;
    };
    const std::string pinned = "Cachegrind's cache model (I1 32768,8,64, D1 32768,8,64, LL 8388608,16,64; LRU, "
                               "write-allocate)";
    const std::string small = "Cachegrind's cache model (I1 32768,8,64, D1 16384,4,64, LL 8388608,16,64; LRU, "
                              "write-allocate)";
    const Report base = with_misses(report({result("a", 1000, 10, true)}), pinned);
    Report after = with_misses(report({result("a", 1000, 10, true)}), small);
    after.results[0].counts[1].difference = 130; // the smaller D1 misses more: +30 %
    pmc::bench::GateOptions gated;
    gated.modelled_events = {"L1-dcache-load-misses"};
    SECTION("another cache model, its event gated: refused, both named, the override said") {
        const auto c = pmc::bench::compare(base, after, gated);
        CHECK(c.exit_status() == 4);
        const std::string table = pmc::bench::to_markdown(c);
        CHECK_THAT(table, ContainsSubstring("cannot judge: the baseline and this run come from different cache models"));
        CHECK_THAT(table, ContainsSubstring("baseline: " + pinned));
        CHECK_THAT(table, ContainsSubstring("this run: " + small));
        CHECK_THAT(table, ContainsSubstring("--any-emulator"));
        CHECK_THAT(table, ContainsSubstring("exit status 4"));
        gated.any_emulator = true;
        const auto anyway = pmc::bench::compare(base, after, gated);
        CHECK(anyway.exit_status() == 3); // compared: +30 % is a change by the modelled rule
        CHECK_THAT(pmc::bench::to_markdown(anyway), ContainsSubstring("warning (--any-emulator)"));
    }
    SECTION("another cache model, its event not gated: the instructions are no model's, compared") {
        CHECK(pmc::bench::compare(base, after).exit_status() == 0);
    }
    SECTION("another predictor, branch-misses gated: refused") {
        Report b = report({result("a", 1000, 10, true)}), a = b;
        a.branch_model = pmc::branch_model_text;
        pmc::bench::GateOptions branches;
        branches.modelled_events = {"branch-misses"};
        const auto c = pmc::bench::compare(b, a, branches);
        CHECK(c.exit_status() == 4);
        CHECK_THAT(pmc::bench::to_markdown(c), ContainsSubstring("different branch predictors"));
    }
    SECTION("another emulator or emulated CPU model: refused, whatever is gated") {
        Report other = base;
        other.emulator = "QEMU 10.0.2, plugin API 2";
        auto c = pmc::bench::compare(base, other);
        CHECK(c.exit_status() == 4);
        CHECK_THAT(pmc::bench::to_markdown(c), ContainsSubstring("this run: QEMU 10.0.2, plugin API 2; emulated by"));
        other = base;
        other.cpu = "emulated by QEMU's TCG (pmc emulate): the CPU model QEMU presents, Skylake-Client";
        c = pmc::bench::compare(base, other);
        CHECK(c.exit_status() == 4);
        CHECK_THAT(pmc::bench::to_markdown(c), ContainsSubstring("different emulators or emulated CPUs"));
        pmc::bench::GateOptions anyway;
        anyway.any_emulator = true;
        CHECK(pmc::bench::compare(base, other, anyway).exit_status() == 0);
    }
    SECTION("natively the CPU may differ (exactness decides, as in pmc diff)") {
        Report n1 = report({result("a", 1000, 10, false)}, ""), n2 = n1;
        n2.cpu = "another CPU";
        CHECK(pmc::bench::compare(n1, n2).exit_status() == 0);
    }
    SECTION("a baseline of format version 1 (no record of the machine) against an emulated run: cannot tell") {
        std::string json = pmc::bench::to_json(base);
        // As version 1 wrote it: none of the four keys.
        json = std::regex_replace(json, std::regex(R"re("(emulator|cpu|cache_model|branch_model)":(null|"[^"]*"),)re"), "");
        REQUIRE(json.find("\"cpu\"") == std::string::npos);
        const Report old = pmc::bench::parse_report(json, "old.json");
        CHECK_FALSE(old.machine_recorded);
        const auto c = pmc::bench::compare(old, base);
        CHECK(c.exit_status() == 4);
        CHECK_THAT(pmc::bench::to_markdown(c), ContainsSubstring("the baseline is a result of format version 1"));
        pmc::bench::GateOptions anyway;
        anyway.any_emulator = true;
        CHECK(pmc::bench::compare(old, base, anyway).exit_status() == 0);
    }
}

TEST_CASE("'not steady' names the side without a doubled article", "[bench]") {
    Report before = report({result("a", 1000, 10, true)}), after = before;
    after.results[0].counts[0].next_difference = 1001; // count(3N) - count(2N) differs: not steady in this run
    pmc::bench::GateOptions options;
    const std::string one = pmc::bench::to_markdown(pmc::bench::compare(before, after, options));
    CHECK_THAT(one, ContainsSubstring("not steady in this run ("));
    CHECK_THAT(one, !ContainsSubstring("the this"));
    before.results[0].counts[0].next_difference = 999;
    CHECK_THAT(pmc::bench::to_markdown(pmc::bench::compare(before, after, options)),
               ContainsSubstring("not steady in the baseline and this run ("));
}

TEST_CASE("a modelled figure is said to be modelled, and one not counted reads 'not counted', not '?'", "[bench]") {
    Report before = report({result("a", 1000, 10, true)});
    before.events.push_back({"L1-dcache-load-misses:u", true, true, ""});
    before.results[0].counts.push_back({"L1-dcache-load-misses:u", true, 40, 10, {}});
    const std::string table = pmc::bench::to_markdown(before);
    CHECK_THAT(table, ContainsSubstring("L1-dcache-load-misses:u/iter (modelled)"));
    CHECK_THAT(table, ContainsSubstring("- modelled: L1-dcache-load-misses:u"));
    CHECK_THAT(table, ContainsSubstring("instructions:u/iter (exact)"));
    const Report after = report({result("a", 1000, 10, true)}); // the misses not counted
    const auto c = pmc::bench::compare(before, after);
    const std::string compared = pmc::bench::to_markdown(c);
    CHECK_THAT(compared, ContainsSubstring("L1-dcache-load-misses:u (modelled) 4 → not counted"));
    CHECK_THAT(compared, !ContainsSubstring("→ ?"));
}

TEST_CASE("without an exact count, time decides by the noise rule", "[bench]") {
    const std::vector<double> slow{12, 12.1, 11.9, 12, 12.2, 12, 11.8, 12, 12.1, 12, 11.9};
    const std::vector<double> overlapping{10, 10.3, 9.9, 10, 10.2, 10, 9.7, 10, 10.1, 10, 9.9};
    const Report base = report({result("t", 0, 0, false)}, "");
    SECTION("every epoch slower and 20 % more: changed") {
        const auto c = pmc::bench::compare(base, report({result("t", 0, 0, false, slow)}, ""));
        CHECK(c.exit_status() == 3);
    }
    SECTION("epochs overlapping: unchanged") {
        const auto c = pmc::bench::compare(base, report({result("t", 0, 0, false, overlapping)}, ""));
        CHECK(c.exit_status() == 0);
    }
    SECTION("apart but under --time-threshold: passes") {
        pmc::bench::GateOptions options;
        options.time_threshold_pct = 25;
        const auto c = pmc::bench::compare(base, report({result("t", 0, 0, false, slow)}, ""), options);
        CHECK(c.exit_status() == 0);
        CHECK(change(c, "t").verdict == Verdict::under_threshold);
    }
    SECTION("too few epochs to judge: exit 4") {
        const auto c = pmc::bench::compare(report({result("t", 0, 0, false, {1, 2})}, ""),
                                           report({result("t", 0, 0, false, {3, 4})}, ""));
        CHECK(c.exit_status() == 4);
    }
}

TEST_CASE("a result written as JSON reads back to the same figures, bad files are refused with the reason", "[bench]") {
    Report r = report({result("sort", 161198, 2, true), result("odd", 7, 2, true)});
    r.overhead = pmc::bench::Overhead{"instructions:u", 4, 63, 0.5};
    const Report back = pmc::bench::parse_report(pmc::bench::to_json(r), "test");
    REQUIRE(back.results.size() == 2);
    CHECK(back.emulated == "x86_64");
    CHECK(back.machine_recorded);
    CHECK(back.emulator == r.emulator);
    CHECK(back.cpu == r.cpu);
    CHECK(back.cache_model.empty());
    CHECK_THAT(pmc::bench::to_json(r), ContainsSubstring("\"version\":2"));
    CHECK_THAT(pmc::bench::to_json(r), ContainsSubstring("\"cache_model\":null"));
    CHECK(back.results[0].counts.at(0).difference == 161198);
    CHECK(pmc::bench::format_per_iteration(back.results[0].counts.at(0)) == "80599");
    CHECK(pmc::bench::format_per_iteration(back.results[1].counts.at(0)) == "3.5");
    CHECK(back.results[0].time.epoch_ns_per_op == r.results[0].time.epoch_ns_per_op);
    CHECK(pmc::bench::compare(r, back).exit_status() == 0);
    REQUIRE(back.overhead);
    CHECK(back.overhead->per_measurement == 63);
    CHECK(pmc::bench::to_markdown(back).find("harness: 4 instructions:u per iteration") != std::string::npos);
    CHECK_THROWS_WITH(pmc::bench::parse_report("{\"format\":\"pmc-profile\"}", "x.json"),
                      ContainsSubstring("not a pmc bench result"));
    CHECK_THROWS_WITH(pmc::bench::parse_report("{\"format\":", "x.json"),
                      ContainsSubstring("x.json: not valid JSON"));
    CHECK_THROWS_WITH(pmc::bench::parse_report(R"({"format":"pmc-bench","events":[],"benchmarks":[{"name":"a"}]})", "x.json"),
                      ContainsSubstring("benchmark 'a': 'counts' is missing"));
    CHECK_THROWS_WITH(pmc::bench::read_report(temp_path("missing.json")),
                      ContainsSubstring("cannot read the bench result"));
}

TEST_CASE("a Bench measures in-process: time statistics always, counts where a counter opens", "[bench]") {
    pmc::bench::Options o;
    o.epochs = 5;
    o.epoch_ns = 100000;
    pmc::bench::Bench bench(o);
    std::uint64_t x = 1;
    const auto& r = bench.run("mix", [&] {
        x = x * 6364136223846793005ULL + 1;
        pmc::bench::do_not_optimize(x);
    });
    CHECK(r.name == "mix");
    CHECK(r.time.epoch_ns_per_op.size() == 5);
    CHECK(r.time.median > 0);
    CHECK(r.time.min <= r.time.median);
    CHECK(r.time.median <= r.time.max);
    std::size_t opened = 0;
    for (const auto& e : bench.report().events) opened += e.opened;
    CHECK(r.counts.size() == opened);
    for (const auto& c : r.counts) CHECK(c.iterations > 0);
    CHECK_THROWS_WITH(bench.run([] {}), ContainsSubstring("without a name"));
    const std::string table = pmc::bench::to_markdown(bench.report());
    CHECK(table.find("| mix |") != std::string::npos);
    CHECK(table.find("harness:") != std::string::npos);
}

TEST_CASE("the example suite runs natively: a table of every benchmark, and what is not exact here", "[bench]") {
    const auto r = pmc_test::run_command("'" + example + "' --epochs 3 --epoch-ms 1 2>&1");
    INFO(r.out);
    CHECK(r.status == 0);
    for (const char* name : {"sort_1000", "sort_sorted_1000", "unordered_map_insert_1000", "unordered_map_find_1000",
                             "flat_map_insert_1000", "flat_map_find_1000"})
        CHECK(r.out.find(std::string("| ") + name + " |") != std::string::npos);
    CHECK(r.out.find("noisy: ns/op") != std::string::npos);
    // A reason given for several events (no PMU here: about 600 characters) is explained once, under the first.
    for (const char* explanation : {"This machine has no hardware PMU", "For exact instruction counts without a PMU"}) {
        const auto first = r.out.find(explanation);
        CHECK((first == std::string::npos || r.out.find(explanation, first + 1) == std::string::npos));
    }
}

TEST_CASE("the harness's command line: --help, --list, --filter, and errors that say what is wrong", "[bench]") {
    auto run = [](const std::string& args) { return pmc_test::run_command("'" + example + "' " + args + " 2>&1"); };
    auto help = run("--help");
    CHECK(help.status == 0);
    CHECK(help.out.find("--compare BASE") != std::string::npos);
    auto list = run("--list --filter '^sort'");
    CHECK(list.status == 0);
    CHECK(list.out == "sort_1000\nsort_sorted_1000\n");
    auto bad_regex = run("--filter '('");
    CHECK(bad_regex.status == 1);
    CHECK(bad_regex.out.find("not a regular expression") != std::string::npos);
    auto none = run("--filter nothing_matches");
    CHECK(none.status == 1);
    CHECK(none.out.find("no benchmark matches") != std::string::npos);
    auto unknown = run("--frobnicate");
    CHECK(unknown.status == 1);
    CHECK(unknown.out.find("unknown argument '--frobnicate'") != std::string::npos);
    auto gap = run("--events 'page-faults,,task-clock'"); // an empty event: refused, not skipped
    CHECK(gap.status == 1);
    CHECK(gap.out.find("--events 'page-faults,,task-clock': event 2 of 3 is empty") != std::string::npos);
    auto epochs = run("--epochs 0");
    CHECK(epochs.status == 1);
    CHECK(epochs.out.find("--epochs needs a whole number from 1 to 100000, not '0'") != std::string::npos);
    // --threshold: pmc diff's syntax and meaning (a count, or a percentage), one parser; a sign or a word is refused.
    CHECK(help.out.find("--threshold VALUE") != std::string::npos);
    CHECK(help.out.find("event: 10%)") != std::string::npos); // the modelled default, as gate.hpp has it
    // --counter lists the modelled events: every name of the one list (pmc/modelled_events.hpp), whole.
    const auto from = help.out.find("--counter EVENT"), to = help.out.find("-h, --help");
    REQUIRE(from != std::string::npos);
    REQUIRE(to > from);
    const std::string counter = help.out.substr(from, to - from);
    const std::regex separated("[\\s,]+");
    std::set<std::string> words;
    for (auto it = std::sregex_token_iterator(counter.begin(), counter.end(), separated, -1);
         it != std::sregex_token_iterator(); ++it)
        words.insert(*it);
    for (const auto& names : {std::vector<std::string_view>(std::begin(pmc::modelled_cache_event_names),
                                                            std::end(pmc::modelled_cache_event_names)),
                              std::vector<std::string_view>(std::begin(pmc::modelled_branch_event_names),
                                                            std::end(pmc::modelled_branch_event_names))})
        for (const std::string_view name : names) {
            INFO(counter << "\nnot named: " << name);
            CHECK(words.count(std::string(name)) == 1);
        }
    for (const char* ok : {"1%", "10", "0.5%"})
        CHECK(run(std::string("--list --threshold ") + ok).status == 0);
    for (const char* refused : {"+1", "-1%", "ten", "1e3"}) {
        auto r = run(std::string("--list --threshold ") + refused);
        CHECK(r.status == 1);
        CHECK(r.out.find("--threshold needs a count (e.g. 100) or a percentage (e.g. 0.5%)") != std::string::npos);
    }
    auto missing = run("--compare " + temp_path("no-such-baseline.json"));
    CHECK(missing.status == 1);
    CHECK(missing.out.find("cannot read the baseline") != std::string::npos);
    std::ofstream(temp_path("bad.json")) << "{\"format\":\"pmc-bench\"";
    auto bad = run("--filter flat_map_find --epochs 1 --compare " + temp_path("bad.json"));
    CHECK(bad.status == 1);
    CHECK(bad.out.find("not valid JSON") != std::string::npos);
}

TEST_CASE("a benchmark that throws, measures nothing or dies is named, the others still run, and the exit is 1",
          "[bench]") {
    auto run = [](const std::string& filter) {
        return pmc_test::run_command("'" + cases + "' --epochs 1 --filter '" + filter + "' 2>&1");
    };
    auto fine = run("fine");
    CHECK(fine.status == 0);
    // A count that never reaches min_count (no page faults in the body) and is not exact: N grows by time, and
    // the figure is printed as noisy.
    const auto faults = pmc_test::run_command("timeout 60 '" + cases + "' --epochs 1 --filter fine --events page-faults 2>&1");
    INFO(faults.out);
    CHECK(faults.status == 0);
    CHECK(faults.out.find("page-faults/iter |") != std::string::npos);
    CHECK(faults.out.find("- noisy: page-faults:") != std::string::npos);
    auto throws = run("fine|throws");
    CHECK(throws.status == 1);
    CHECK(throws.out.find("benchmark 'throws' failed: the setup found no input file") != std::string::npos);
    CHECK(throws.out.find("| fine |") != std::string::npos);
    auto nothing = run("measures_nothing");
    CHECK(nothing.status == 1);
    CHECK(nothing.out.find("benchmark 'measures_nothing' measured nothing") != std::string::npos);
    auto dies = run("dies|fine");
    CHECK(dies.status == 1);
    CHECK(dies.out.find("benchmark 'dies' died of signal 6") != std::string::npos);
    CHECK(dies.out.find("| fine |") != std::string::npos);
}

TEST_CASE("under pmc emulate: instructions per iteration identical every run, the planted regression found exactly "
          "in its benchmark alone", "[bench][emulate]") {
    if (auto why = why_no_emulator(); !why.empty()) PMC_SKIP(why);
    const std::string base = temp_path("base.json");
    auto emulated = [&](const std::string& program, const std::string& args) {
        return pmc_test::run_command("'" + pmc_tool + "' emulate -- '" + program + "' --epochs 3 " + args + " 2>&1");
    };
    const auto first = emulated(example, "--json '" + base + "'");
    INFO(first.out);
    REQUIRE(first.status == 0);
    const auto counts = instructions(first.out);
    REQUIRE(counts.size() == 6);
    CHECK(first.out.find("instructions:u/iter (exact)") != std::string::npos);
    CHECK(first.out.find("- harness: ") != std::string::npos); // measured in the first benchmark's child
    for (int run = 0; run < 2; ++run) { // under load too: the counts cannot depend on time
        const auto again = emulated(example, "--compare '" + base + "'");
        INFO(again.out);
        CHECK(again.status == 0);
        CHECK(instructions(again.out) == counts);
    }
    const auto changed = emulated(regressed, "--compare '" + base + "'");
    INFO(changed.out);
    CHECK(changed.status == 3);
    const auto v = verdicts(changed.out);
    REQUIRE(v.size() == 6);
    for (const auto& [name, verdict] : v) CHECK(verdict == (name == "sort_1000" ? "changed" : "unchanged"));
    // Natively there is no exact count to hold against the baseline's: the gate cannot judge.
    const auto native = pmc_test::run_command("'" + example + "' --epochs 3 --filter sort_1000 --compare '" + base + "' 2>&1");
    INFO(native.out);
    CHECK(native.status == 4);
}

TEST_CASE("under pmc emulate --cache: the gate options (--counter, --threshold) move no modelled figure, and an "
          "unsteady one is said to be", "[bench][emulate]") {
    if (auto why = why_no_emulator(); !why.empty()) PMC_SKIP(why);
    const std::string base = temp_path("cache-base.json");
    auto run = [&](const std::string& args) {
        return pmc_test::run_command("'" + pmc_tool + "' emulate --cache -- '" + example +
                                     "' --epochs 1 --filter find --events instructions:u,L1-dcache-load-misses " + args +
                                     " 2>/dev/null");
    };
    // The counts columns of the results table (before any comparison), benchmark by benchmark.
    auto counts = [](const std::string& out) {
        std::map<std::string, std::string> v;
        const std::regex row(R"(\| ([a-z_0-9]+) \| [0-9.]+ \| [0-9.]+% \| ([0-9.]+) \| (~?[0-9.]+) \|)");
        const std::string table = out.substr(0, out.find("compared with"));
        for (std::sregex_iterator i(table.begin(), table.end(), row), end; i != end; ++i)
            v[(*i)[1]] = std::string((*i)[2]) + " " + std::string((*i)[3]);
        return v;
    };
    const auto plain = run("--json '" + base + "'");
    INFO(plain.out);
    REQUIRE(plain.status == 0);
    CHECK_THAT(plain.out, ContainsSubstring("L1-dcache-load-misses/iter (modelled)"));
    const auto figures = counts(plain.out);
    REQUIRE(figures.size() == 2);
    // Before the fix, --counter's string on the heap before the children were forked moved these (4 -> 2.5 misses).
    const auto gated = run("--compare '" + base + "' --counter L1-dcache-load-misses --threshold 12.5%");
    INFO(gated.out);
    CHECK(gated.status == 0);
    CHECK(counts(gated.out) == figures);
    CHECK_THAT(gated.out, ContainsSubstring("L1-dcache-load-misses is modelled by pmc's cache model"));
    // The result records its model; under another D1 the gated misses are another model's: refused, both named.
    std::ifstream base_file(base);
    const std::string base_json((std::istreambuf_iterator<char>(base_file)), std::istreambuf_iterator<char>());
    CHECK_THAT(base_json, ContainsSubstring("\"cache_model\":\"Cachegrind's cache model (I1 32768,8,64, D1 32768,8,64, "));
    CHECK_THAT(base_json, ContainsSubstring("\"emulator\":\"QEMU "));
    const std::string small_d1 = "'" + pmc_tool + "' emulate --cache --D1 16384,4,64 -- '" + example +
                                 "' --epochs 1 --filter find --events instructions:u,L1-dcache-load-misses --compare '" +
                                 base + "' --counter L1-dcache-load-misses";
    const auto other = pmc_test::run_command(small_d1 + " 2>/dev/null");
    INFO(other.out);
    CHECK(other.status == 4);
    CHECK_THAT(other.out, ContainsSubstring("come from different cache models"));
    CHECK_THAT(other.out, ContainsSubstring("this run: Cachegrind's cache model (I1 32768,8,64, D1 16384,4,64, "));
    CHECK(pmc_test::run_command(small_d1 + " --any-emulator 2>/dev/null").status != 4);
    // Every figure is either steady or said not to be (count(3N) - count(2N) against count(2N) - count(N)).
    for (const auto& [name, figure] : figures)
        CHECK((figure.find('~') == std::string::npos) ==
              (plain.out.find("not steady: L1-dcache-load-misses in " + name) == std::string::npos));
}

TEST_CASE("a Google Benchmark suite with pmc/gbench.hpp's one line gets exact instructions per iteration under pmc "
          "emulate", "[bench][gbench]") {
    // $PMC_GBENCH_SUITE: the suite built against another Google Benchmark (docs/bench.md: the versions checked).
    const char* other = std::getenv("PMC_GBENCH_SUITE");
#if defined(PMC_GBENCH_SUITE)
    const std::string suite = other && *other ? other : PMC_GBENCH_SUITE;
#else
    const std::string suite = other ? other : "";
#endif
    if (suite.empty())
        PMC_SKIP("Google Benchmark is not installed (Debian: libbenchmark-dev; scripts/install-deps installs it)");
    // Natively, without a counter that opens here, the suite still runs and says why there is no count.
    const auto native = pmc_test::run_command("'" + suite + "' --benchmark_min_time=0.001 --benchmark_filter=Fixed 2>&1");
    INFO(native.out);
    CHECK(native.status == 0);
    if (native.out.find("instructions:u/iter") == std::string::npos)
        CHECK(native.out.find("pmc/gbench.hpp: no 'instructions:u' per iteration:") != std::string::npos);
    if (auto why = why_no_emulator(); !why.empty()) PMC_SKIP(why);
    auto figures = [&](const std::string& min_time) {
        const auto r = pmc_test::run_command("'" + pmc_tool + "' emulate -- '" + suite +
                                             "' --benchmark_format=json --benchmark_min_time=" + min_time);
        INFO(r.out);
        REQUIRE(r.status == 0);
        const auto json = pmc::detail::JsonReader::parse(r.out, "gbench").value();
        std::map<std::string, std::pair<double, double>> out; // name -> (per iteration, iterations)
        for (const auto& b : json.find("benchmarks")->items) {
            const auto* per = b.find("instructions:u/iter");
            REQUIRE(per);
            out[b.find("name")->string] = {per->number, b.find("iterations")->number};
            if (b.find("name")->string.find("Fixed") != std::string::npos)
                CHECK(b.find("fixed_cost_included") != nullptr);
            else
                CHECK(b.find("fixed_cost_included") == nullptr);
        }
        return out;
    };
    // Other minimum times give other iteration counts; the instructions per iteration stay the same. At least 10 ms
    // of CPU: a first call of 1 iteration that took 2 ms (QEMU translating the code, under a load of 10) was the
    // reported one, with no earlier call to subtract (fixed_cost_included).
    const auto a = figures("0.01"), b = figures("0.05");
    REQUIRE(a.size() == 4);
    for (const auto& [name, figure] : a) {
        INFO(name);
        REQUIRE(b.count(name));
        CHECK(figure.first == b.at(name).first);
        CHECK(figure.first > 0);
    }
    CHECK(a.at("BM_Sort/512").first > 5 * a.at("BM_Sort/64").first);
}
