// SPDX-License-Identifier: MIT
// pmc diff (tools/diff.cpp) on synthetic profiles with chosen values (tests/support/profile_builder.hpp): a profile
// against itself, a planted change found in its query and no other, the noise rule with several runs a side, what
// makes a counter not exact, mismatched profiles, usage errors; and damaged files (every cut length, byte flips)
// for diff and aggregate both: a message, never a crash.
#include <pmc/detail/json.hpp>
#include <pmc/profile_format.hpp>

#include "catch.hpp"
#include "temp_dir.hpp"
#include "command.hpp"
#include "json_check.hpp"
#include "profile_builder.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace pf = pmc::profile_format;

using pmc_test::TempDir;

using pmc_test::tool;

/// A small compiler run: three functions on thread 0 (compile > parse, typeck > type_of), cache hits, sizes, and a
/// worker thread. `typeck_extra` is added to the second typeck's own value; `parse_self` is each parse's.
void compiler_run(pmc_test::ProfileBuilder& b, std::uint64_t typeck_extra = 0, std::uint64_t parse_self = 10) {
    auto& t = b.thread(0, "main");
    for (int f = 0; f < 3; ++f)
        t.scope("compile", 5, [&] {
            t.scope("parse", parse_self);
            t.scope("typeck", 20 + (f == 1 ? typeck_extra : 0), [&] { t.scope("type_of", 3); });
            t.instant("cache-hit", "type_of");
            t.integer("ir-size", 100 + static_cast<std::uint64_t>(f));
        });
    auto& w = b.thread(1, "worker");
    w.scope("codegen", 7);
}

std::string write(const TempDir& dir, const std::string& name, const std::function<void(pmc_test::ProfileBuilder&)>& fill,
                  std::vector<pmc_test::BuilderCounter> counters = {pmc_test::exact_counter()}) {
    pmc_test::ProfileBuilder b(std::move(counters));
    fill(b);
    const std::string path = dir.file(name);
    REQUIRE(b.write(path));
    return path;
}

/// A damaged profile: the compiler run with typeck +4, its last page cut by 5 bytes.
std::string write_cut(const TempDir& dir) {
    pmc_test::ProfileBuilder b({pmc_test::exact_counter()});
    b.page_records = 3;
    compiler_run(b, 4);
    auto bytes = b.bytes();
    bytes.resize(bytes.size() - 5);
    const std::string path = dir.file("cut.pmcprof");
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
}

pmc::detail::JsonValue json_of(const pmc_test::CommandResult& r) {
    INFO(r.out);
    REQUIRE(pmc_test::JsonCheck::valid(r.out));
    auto v = pmc::detail::JsonReader::parse(r.out, "pmc diff --json");
    REQUIRE(v.ok());
    return *v;
}

/// The labels array of pmc diff --json, by label.
const pmc::detail::JsonValue& label(const pmc::detail::JsonValue& j, const std::string& name) {
    for (const auto& l : j.find("labels")->items)
        if (l.find("label")->string == name) return l;
    FAIL("no label " << name);
    throw;
}

pmc_test::CommandResult diff(const std::string& args) { return pmc_test::run_command(tool() + " diff " + args + " 2>&1"); }

} // namespace

TEST_CASE("pmc diff: a profile against itself is unchanged everywhere") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    auto j = json_of(pmc_test::run_command(tool() + " diff --json '" + a + "' '" + a + "'"));
    CHECK(j.find("exact")->boolean);
    const auto& labels = j.find("labels")->items;
    REQUIRE(labels.size() == 5); // compile, parse, typeck, type_of, codegen
    for (const auto& l : labels) {
        INFO(l.find("label")->string);
        CHECK(l.find("verdict")->string == "unchanged");
        CHECK(l.find("self_delta")->number == 0);
        CHECK(l.find("total_delta")->number == 0);
    }
    CHECK(label(j, "typeck").find("before")->find("self")->number == 60);
    CHECK(label(j, "compile").find("before")->find("total")->number == 3 * (5 + 10 + 20 + 3));
    REQUIRE(j.find("instants")->items.size() == 1);
    CHECK(j.find("instants")->items[0].find("event")->string == "cache-hit(type_of)");
    CHECK(j.find("instants")->items[0].find("count_delta")->number == 0);
    CHECK(j.find("integers")->items[0].find("sum_before")->number == 303);

    auto text = diff("'" + a + "' '" + a + "'");
    CHECK(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("5 labels: 5 unchanged"));
    CHECK_THAT(text.out, ContainsSubstring("page-faults (a count): exact"));
}

TEST_CASE("pmc diff: a planted change in one query is found there and nowhere else") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    const auto b = write(dir, "b.pmcprof", [](auto& p) { compiler_run(p, 4); });
    auto j = json_of(pmc_test::run_command(tool() + " diff --json '" + a + "' '" + b + "'"));
    const auto& labels = j.find("labels")->items;
    REQUIRE(!labels.empty());
    CHECK(labels[0].find("label")->string == "typeck"); // sorted by |self delta|
    CHECK(labels[0].find("verdict")->string == "changed");
    CHECK(labels[0].find("self_delta")->number == 4);
    CHECK(labels[0].find("self_delta_percent")->number == Approx(100.0 * 4 / 60));
    for (const auto& l : labels)
        if (l.find("label")->string != "typeck") {
            INFO(l.find("label")->string);
            CHECK(l.find("verdict")->string == "unchanged");
        }
    // Its caller's total carries the change, but the caller itself did not change.
    CHECK(label(j, "compile").find("total_delta")->number == 4);
    auto text = diff("'" + a + "' '" + b + "'");
    CHECK_THAT(text.out, ContainsSubstring("changed by +4"));
    CHECK_THAT(text.out, ContainsSubstring("4 unchanged, 1 changed"));
}

TEST_CASE("pmc diff: several runs a side, a change beyond the noise only when the rank-sum test passes Holm's rule") {
    TempDir dir;
    // parse's self value per run: BASE 10, 12, 11, 13 (x3 calls); NEW 20, 22, 21, 23 (beyond) for one set, 11, 13,
    // 12, 14 for another (within). The other labels are the same in every run: unchanged, though the counter is a
    // time. Four runs a side: the smallest p-value is 2 / C(8, 4) = 2.9 %, under 5 % for the one label judged.
    std::vector<std::string> base, moved, overlapping;
    for (std::uint64_t r = 0; r < 4; ++r) {
        const std::uint64_t jitter = r == 1 ? 2 : r == 2 ? 1 : r == 3 ? 3 : 0;
        base.push_back(write(dir, "a" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 10 + jitter); },
                             {pmc_test::time_counter()}));
        moved.push_back(write(dir, "b" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 20 + jitter); },
                              {pmc_test::time_counter()}));
        overlapping.push_back(write(dir, "c" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 11 + jitter); },
                                    {pmc_test::time_counter()}));
    }
    auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& f : v) s += " '" + f + "'";
        return s;
    };
    auto j = json_of(pmc_test::run_command(tool() + " diff --json" + join(base) + " --" + join(moved)));
    CHECK(!j.find("exact")->boolean);
    CHECK(j.find("chance_apart")->number == Approx(2.0 / 70)); // 2 * 4! * 4! / 8!
    CHECK_THAT(j.find("rule")->string, ContainsSubstring("Holm's step-down at 5.0% over the 1 label so judged"));
    CHECK(j.find("judged_by_noise")->number == 1);
    CHECK(label(j, "parse").find("verdict")->string == "beyond the noise");
    CHECK(label(j, "parse").find("p")->number == Approx(2.0 / 70));
    CHECK(label(j, "parse").find("self_delta")->number == 30); // medians 34.5 -> 64.5 (the mean of the middle two)
    CHECK(label(j, "parse").find("before")->find("self")->number == 34.5);
    CHECK(label(j, "parse").find("before")->find("self_min")->number == 30);
    CHECK(label(j, "parse").find("before")->find("self_max")->number == 39);
    CHECK(label(j, "typeck").find("verdict")->string == "unchanged"); // the same in every run, though a time
    auto within = json_of(pmc_test::run_command(tool() + " diff --json" + join(base) + " --" + join(overlapping)));
    CHECK(label(within, "parse").find("verdict")->string == "within the noise"); // 30-39 against 33-42
    CHECK(label(within, "parse").find("self_delta")->number == 3);
    auto text = diff(join(base) + " --" + join(moved));
    CHECK_THAT(text.out, ContainsSubstring("an unchanged program fails the gate with a chance of at most 5.0%, whatever "
                                           "the number of labels"));
    CHECK_THAT(text.out, ContainsSubstring("wall-time (ns): not exact: a time"));
    // One run a side of a noisy counter: no verdict pretends to know the noise.
    auto single = json_of(pmc_test::run_command(tool() + " diff --json '" + base[0] + "' '" + moved[0] + "'"));
    CHECK(label(single, "parse").find("verdict")->string == "no noise estimate");
    CHECK_THAT(single.find("rule")->string, ContainsSubstring("A1 A2 A3 -- B1 B2 B3"));
    // An exact counter whose runs differ on one side is judged by the same rule, not called changed.
    std::vector<std::string> exact_base, exact_new;
    for (std::uint64_t r = 0; r < 2; ++r) {
        exact_base.push_back(write(dir, "e" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 10 + r); }));
        exact_new.push_back(write(dir, "f" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 10); }));
    }
    auto mixed = json_of(pmc_test::run_command(tool() + " diff --json" + join(exact_base) + " --" + join(exact_new)));
    CHECK(mixed.find("exact")->boolean);
    CHECK(label(mixed, "parse").find("verdict")->string == "within the noise");
    CHECK(label(mixed, "typeck").find("verdict")->string == "unchanged");
}

namespace {

/// Ten labels, one outermost scope each, with the given self values (a time counter: noisy).
std::string write_labels(const TempDir& dir, const std::string& name, const std::vector<std::uint64_t>& selfs) {
    return write(dir, name, [&](auto& b) {
        auto& t = b.thread(0, "main");
        for (std::size_t i = 0; i < selfs.size(); ++i) t.scope("q" + std::to_string(i), selfs[i]);
    }, {pmc_test::time_counter()});
}

std::string join_files(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& f : v) s += " '" + f + "'";
    return s;
}

} // namespace

TEST_CASE("pmc diff --fail-on-change: the noise rule's false-alarm chance holds across all labels (Holm), not per label") {
    // Five and five runs of an "unchanged" program with ten labels that all vary: q0's runs happen to split
    // apart (p = 2 / C(10, 5) = 0.79 %), the others interleave. Per label that is under 5 %, and the old rule
    // (any two ranges apart) failed the gate; over ten labels Holm asks 5 % / 10 = 0.5 % of the smallest: a pass.
    TempDir dir;
    std::vector<std::string> base, fresh;
    for (std::uint64_t r = 0; r < 5; ++r) {
        std::vector<std::uint64_t> a(10), b(10);
        for (std::size_t l = 0; l < 10; ++l) {
            a[l] = 100 + 2 * r + (l % 2);      // interleaved with b
            b[l] = 100 + 2 * r + 1 - (l % 2);
        }
        a[0] = 100 + r; // q0: BASE 100..104, NEW 105..109: apart
        b[0] = 105 + r;
        base.push_back(write_labels(dir, "a" + std::to_string(r), a));
        fresh.push_back(write_labels(dir, "b" + std::to_string(r), b));
    }
    // Five and five runs cannot reach Holm's first bar over ten labels (0.79 % > 0.5 %): the gate cannot flag
    // anything, so it cannot pass either: status 4 and the runs it needs.
    auto r = pmc_test::run_command(tool() + " diff --fail-on-change" + join_files(base) + " --" + join_files(fresh) + " 2>&1");
    INFO(r.out);
    CHECK(r.status == 4);
    CHECK_THAT(r.out, ContainsSubstring("within the noise (p 0.8%, needed <= 0.5%)"));
    CHECK_THAT(r.out, ContainsSubstring("over the 10 labels so judged"));
    CHECK_THAT(r.out, ContainsSubstring("cannot judge 10 labels (exit status 4): with 5 and 5 runs the smallest p-value "
                                        "is 0.8%, above Holm's first bar 5.0% / 10 = 0.5%: no label can be flagged. "
                                        "Record 6 runs a side"));
    // Six and six runs can (2 / C(12, 6) = 0.22 %): q0's runs overlap by two pairs (p 0.87 %, under 5 % for one
    // label, not under 5 % / 10): within the noise, and the gate passes.
    std::vector<std::string> base6, fresh6;
    const std::uint64_t q0_base[] = {1000, 1010, 1020, 1030, 1040, 1050}, q0_new[] = {1035, 1060, 1070, 1080, 1090, 1100};
    for (std::uint64_t run = 0; run < 6; ++run) {
        std::vector<std::uint64_t> a(10), b(10);
        for (std::size_t l = 0; l < 10; ++l) {
            a[l] = 100 + 2 * run + (l % 2);
            b[l] = 100 + 2 * run + 1 - (l % 2);
        }
        a[0] = q0_base[run];
        b[0] = q0_new[run];
        base6.push_back(write_labels(dir, "six-a" + std::to_string(run), a));
        fresh6.push_back(write_labels(dir, "six-b" + std::to_string(run), b));
    }
    r = pmc_test::run_command(tool() + " diff --fail-on-change" + join_files(base6) + " --" + join_files(fresh6) + " 2>&1");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("within the noise (p 0.9%, needed <= 0.5%)"));
    // The same split with fewer labels judged passes Holm's bar (5 % / 2 = 2.5 %): flagged.
    std::vector<std::string> base2, fresh2;
    for (std::uint64_t run = 0; run < 5; ++run) {
        base2.push_back(write_labels(dir, "c" + std::to_string(run), {100 + run, 100 + 2 * run}));
        fresh2.push_back(write_labels(dir, "d" + std::to_string(run), {105 + run, 101 + 2 * run}));
    }
    r = pmc_test::run_command(tool() + " diff --fail-on-change" + join_files(base2) + " --" + join_files(fresh2) + " 2>&1");
    CHECK(r.status == 3);
    CHECK_THAT(r.out, ContainsSubstring("q0: beyond the noise: +5 ns (p 0.8%)"));
    // Apart, but by less than a side's own spread (a loaded machine's outliers): BASE 100, 240, 245, 248, 250 and
    // NEW 251..255 split as far as five and five can (p 0.79 %), yet the medians differ by 8 against a spread of 150.
    std::vector<std::string> base3, fresh3;
    const std::uint64_t spread_base[] = {100, 240, 245, 248, 250};
    for (std::uint64_t run = 0; run < 5; ++run) {
        base3.push_back(write_labels(dir, "e" + std::to_string(run), {spread_base[run]}));
        fresh3.push_back(write_labels(dir, "f" + std::to_string(run), {251 + run}));
    }
    r = pmc_test::run_command(tool() + " diff --fail-on-change" + join_files(base3) + " --" + join_files(fresh3) + " 2>&1");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("within the noise (p 0.8%, but the medians differ by less than a side's spread, 150 ns)"));
    // Too few runs for the labels judged: said, with the fix.
    r = pmc_test::run_command(tool() + " diff" + join_files({base[0], base[1], base[2]}) + " --" +
                              join_files({fresh[0], fresh[1], fresh[2]}) + " 2>&1");
    CHECK_THAT(r.out, ContainsSubstring("no label can be flagged; run each side more often"));
    // --alpha: the family-wise chance chosen (0.1: 0.79 % <= 10 % / 10).
    r = pmc_test::run_command(tool() + " diff --alpha 0.1 --fail-on-change" + join_files(base) + " --" + join_files(fresh) + " 2>&1");
    CHECK(r.status == 3);
    CHECK(pmc_test::run_command(tool() + " diff --alpha 2" + join_files(base) + " --" + join_files(fresh) + " 2>&1").status == 1);
    CHECK_THAT(pmc_test::run_command(tool() + " diff --help").out, ContainsSubstring("Holm's step-down"));
}

TEST_CASE("pmc diff --top never hides a flagged label") {
    // Five runs a side: q0 moves a lot but its runs overlap (within the noise), q1 moves a little, apart.
    TempDir dir;
    std::vector<std::string> base, fresh;
    for (std::uint64_t r = 0; r < 5; ++r) {
        base.push_back(write_labels(dir, "a" + std::to_string(r), {1000 + 400 * r, 10 + r}));
        fresh.push_back(write_labels(dir, "b" + std::to_string(r), {1200 + 400 * r, 20 + r}));
    }
    auto r = pmc_test::run_command(tool() + " diff --top 1 --fail-on-change" + join_files(base) + " --" + join_files(fresh) + " 2>&1");
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK_THAT(r.out, ContainsSubstring("\nq0 ")); // the largest |delta|
    CHECK_THAT(r.out, ContainsSubstring("\nq1 ")); // flagged: shown though --top 1
    CHECK_THAT(r.out, ContainsSubstring("1 flagged label shown beyond --top 1"));
    auto j = json_of(pmc_test::run_command(tool() + " diff --json --top 1" + join_files(base) + " --" + join_files(fresh)));
    CHECK(j.find("labels")->items.size() == 2);
    CHECK(label(j, "q1").find("verdict")->string == "beyond the noise");
}

TEST_CASE("pmc diff: an exact counter whose runs of one side differ: not deterministic, and where (and one run a side: assumed)") {
    TempDir dir;
    std::vector<std::string> base, fresh;
    for (std::uint64_t r = 0; r < 2; ++r) {
        base.push_back(write(dir, "e" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 10 + r); }));
        fresh.push_back(write(dir, "f" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 10); }));
    }
    auto r = diff(join_files(base) + " --" + join_files(fresh));
    INFO(r.out);
    CHECK_THAT(r.out, ContainsSubstring("not deterministic: page-faults is exact, but the runs of one side differ at 1 label: parse (BASE)"));
    CHECK(r.out.find("changed by +") == std::string::npos); // not called a change
    auto j = json_of(pmc_test::run_command(tool() + " diff --json" + join_files(base) + " --" + join_files(fresh)));
    REQUIRE(j.find("nondeterministic_labels")->items.size() == 1);
    CHECK(j.find("nondeterministic_labels")->items[0].string == "parse (BASE)");
    CHECK_FALSE(j.find("assumes_determinism")->boolean);
    // One run a side: the verdict assumes determinism, and says so.
    auto one = diff("'" + base[0] + "' '" + base[1] + "'");
    CHECK_THAT(one.out, ContainsSubstring("deterministic? assumed"));
    CHECK(json_of(pmc_test::run_command(tool() + " diff --json '" + base[0] + "' '" + base[1] + "'"))
              .find("assumes_determinism")->boolean);
}

TEST_CASE("pmc diff: two identical sides are unchanged whatever the counter (wall-time, one run a side)") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); }, {pmc_test::time_counter()});
    auto r = pmc_test::run_command(tool() + " diff --fail-on-change --counter wall-time '" + a + "' '" + a + "' 2>&1");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("5 labels: 5 unchanged"));
    CHECK(r.out.find("no noise estimate") == std::string::npos);
    auto j = json_of(pmc_test::run_command(tool() + " diff --json '" + a + "' '" + a + "'"));
    for (const auto& l : j.find("labels")->items) CHECK(l.find("verdict")->string == "unchanged");
}

TEST_CASE("every profile tool: a recursive label's total is counted once, never more than the run's") {
    // An interpreter's eval, recursing: run > eval > eval > eval > eval, 1 of each's own and 5 in the innermost.
    // Inclusive values 8, 7, 6, 5: 26 summed, in a run of 9. Counted once, at the outermost call: 8.
    TempDir dir;
    const auto f = write(dir, "rec.pmcprof", [](auto& b) {
        auto& t = b.thread(0, "main");
        t.scope("run", 1, [&] {
            t.scope("eval", 1, [&] { t.scope("eval", 1, [&] { t.scope("eval", 1, [&] { t.scope("eval", 5); }); }); });
        });
    });
    auto number_after = [](const std::string& text, const std::string& key) {
        const auto at = text.find(key);
        REQUIRE(at != std::string::npos);
        return std::stod(text.substr(at + key.size()));
    };
    auto sum = pmc_test::run_command(tool() + " summarize --json '" + f + "'");
    INFO(sum.out);
    REQUIRE(sum.status == 0);
    CHECK(number_after(sum.out, R"("run":)") == 9);
    CHECK_THAT(sum.out, ContainsSubstring(R"("label":"eval","count":4,"self":8,"self_percent":88.8)"));
    CHECK_THAT(sum.out, ContainsSubstring(R"(,"total":8,"recursive_calls":3,)"));
    CHECK_THAT(sum.out, ContainsSubstring(R"("total_rule":"a label's total is the inclusive value of its outermost calls)"));
    auto text = pmc_test::run_command(tool() + " summarize '" + f + "'");
    CHECK_THAT(text.out, ContainsSubstring("outer total"));
    CHECK_THAT(text.out, ContainsSubstring("3 call(s) were inside a call of their own label"));
    auto d = json_of(pmc_test::run_command(tool() + " diff --json '" + f + "' '" + f + "'"));
    CHECK(label(d, "eval").find("before")->find("total")->number == 8);
    CHECK_THAT(d.find("total_rule")->string, ContainsSubstring("counted once"));
    auto agg = pmc_test::run_command(tool() + " aggregate --json '" + f + "' '" + f + "'");
    REQUIRE(agg.status == 0);
    CHECK_THAT(agg.out, ContainsSubstring(R"("label":"eval","runs":2,"calls":{"min":4,"median":4,"max":4,"spread":0,"spread_percent":0},"self":{"min":8,"median":8,"max":8,)"));
    CHECK_THAT(agg.out, ContainsSubstring(R"("total":{"min":8,"median":8,"max":8,)"));
    auto crit = pmc_test::run_command(tool() + " critical --json '" + f + "'");
    REQUIRE(crit.status == 0);
    CHECK_THAT(crit.out, ContainsSubstring(R"("label":"eval","calls":4,"top_level_calls":0,"cost":8,)"));
}

TEST_CASE("summarize, diff and aggregate: one median rule, and long labels keep the tables' columns in line") {
    TempDir dir;
    const std::string long_label = "SELECT name, price FROM items WHERE category = ? AND price < ? ORDER BY price DESC LIMIT 10";
    const auto f = write(dir, "long.pmcprof", [&](auto& b) {
        auto& t = b.thread(0, "main");
        for (std::uint64_t v : {1, 2, 3, 10}) t.scope("q", v); // four calls: the median is (2 + 3) / 2
        t.scope(long_label, 7);
    });
    auto json = pmc_test::run_command(tool() + " summarize --json '" + f + "'");
    CHECK_THAT(json.out, ContainsSubstring(R"("label":"q","count":4,"self":16,"self_percent":69.5)"));
    CHECK_THAT(json.out, ContainsSubstring(R"("min":1,"median":2.5,"max":10})")); // not the upper middle, 3
    // Each table's rows: the column after the label starts at the same place in every row.
    auto aligned = [&](const std::string& out, const std::string& header) {
        INFO(out);
        std::vector<std::size_t> ends; // where the row's first run of spaces after the label ends
        std::size_t at = out.find(header);
        REQUIRE(at != std::string::npos);
        at = out.find("\nlabel ", at); // the column headers
        REQUIRE(at != std::string::npos);
        at = out.find('\n', at + 1) + 1;
        for (int row = 0; row < 2; ++row) {
            const std::size_t nl = out.find('\n', at);
            const std::string line = out.substr(at, nl - at);
            INFO(line);
            const std::size_t gap = line.find("  ");
            REQUIRE(gap != std::string::npos);
            ends.push_back(line.find_first_not_of(' ', gap));
            CHECK((line.find("...") != std::string::npos || line.rfind("q ", 0) == 0));
            at = nl + 1;
        }
        CHECK(ends[0] == ends[1]);
    };
    aligned(pmc_test::run_command(tool() + " summarize '" + f + "'").out, "showing:");
    aligned(pmc_test::run_command(tool() + " diff '" + f + "' '" + f + "'").out, "totals:");
    aligned(pmc_test::run_command(tool() + " aggregate '" + f + "' '" + f + "'").out, "per label, across runs");
}

TEST_CASE("long labels are never cut into the same text: summarize, diff, aggregate and critical tell them apart") {
    TempDir dir;
    // Four statements that differ in the middle alone, two that differ at the end alone, and a deep chain of them
    // (pmc critical's path), every one longer than any table's label column.
    const std::string head = "SELECT name, price FROM items WHERE category = ", tail = " AND price < ? ORDER BY price DESC";
    std::vector<std::string> labels;
    for (const char* middle : {"'books'", "'tools'", "'music'", "'games'"}) labels.push_back(head + middle + tail);
    labels.push_back(head + "? AND price < ? ORDER BY price DESC LIMIT 10");
    labels.push_back(head + "? AND price < ? ORDER BY price DESC LIMIT 20");
    const auto f = write(dir, "labels.pmcprof", [&](auto& b) {
        auto& t = b.thread(0, "main");
        std::function<void(std::size_t)> nest = [&](std::size_t i) { // the last label the costliest: the path's end
            if (i < labels.size()) t.scope(labels[i], 1 + 10 * i, [&] { nest(i + 1); });
        };
        nest(0);
        for (std::size_t i = 0; i < labels.size(); ++i) t.scope(labels[i], 1);
    });
    // The label column of each table row that shows one of them: each of the six texts once, pairwise distinct.
    auto distinct = [&](const std::string& out, const char* tool_name) {
        INFO(tool_name << ":\n" << out);
        std::set<std::string> shown;
        std::size_t rows = 0;
        std::istringstream in(out);
        for (std::string line; std::getline(in, line);) {
            const std::size_t start = line.find_first_not_of(' ');
            if (start == std::string::npos || line.compare(start, 6, "SELECT") != 0) continue; // a row, not a title
            ++rows;
            shown.insert(line.substr(start, line.find("  ", start) - start));
        }
        CHECK(rows == labels.size());
        CHECK(shown.size() == labels.size());
        CHECK(std::any_of(shown.begin(), shown.end(), [](const std::string& x) { return x.find("...") != std::string::npos; }));
    };
    distinct(pmc_test::run_command(tool() + " summarize '" + f + "'").out, "summarize");
    distinct(pmc_test::run_command(tool() + " diff '" + f + "' '" + f + "'").out, "diff");
    distinct(pmc_test::run_command(tool() + " aggregate '" + f + "' '" + f + "'").out, "aggregate");
    distinct(pmc_test::run_command(tool() + " critical '" + f + "'").out, "critical");
}

TEST_CASE("pmc diff: the gate's message on stderr follows the whole report on stdout (a log of both, 2>&1)") {
    TempDir dir;
    const auto before = write(dir, "a", [](auto& b) { compiler_run(b); });
    const auto after = write(dir, "b", [](auto& b) { compiler_run(b, 4); });
    const auto r = pmc_test::run_command(tool() + " diff --fail-on-change '" + before + "' '" + after + "' 2>&1");
    INFO(r.out);
    CHECK(r.status == 3);
    const std::size_t summary = r.out.find(" labels: "), message = r.out.find("pmc diff: --fail-on-change: 1 label");
    REQUIRE(summary != std::string::npos);
    REQUIRE(message != std::string::npos);
    CHECK(message > summary);
}

TEST_CASE("pmc diff: a counter that may be multiplexed or is a fallback is not called exact") {
    TempDir dir;
    for (std::uint32_t flag : {std::uint32_t{pf::may_multiplex}, std::uint32_t{pf::fallback}}) {
        auto counter = pmc_test::exact_counter("instructions:u");
        counter.flags |= flag;
        const auto a = write(dir, "a", [](auto& b) { compiler_run(b); }, {counter});
        auto j = json_of(pmc_test::run_command(tool() + " diff --json '" + a + "' '" + a + "'"));
        CHECK(!j.find("exact")->boolean);
        CHECK_THAT(j.find("exact_reason")->string,
                   ContainsSubstring(flag == pf::fallback ? "fallback" : "multiplex"));
        CHECK(label(j, "parse").find("verdict")->string == "unchanged"); // the same file: identical values
    }
    // A thread whose counters could not be opened recorded zeros: not exact either.
    const auto broken = write(dir, "broken", [](auto& b) {
        compiler_run(b);
        b.thread_error(1, "EACCES");
    });
    auto j = json_of(pmc_test::run_command(tool() + " diff --json '" + broken + "' '" + broken + "'"));
    CHECK(!j.find("exact")->boolean);
    CHECK_THAT(j.find("exact_reason")->string, ContainsSubstring("thread 1's counters could not be opened"));
}

TEST_CASE("pmc diff: mismatched profiles are compared as far as they can be, and what differs is said") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    const auto other_labels = write(dir, "b.pmcprof", [](auto& b) {
        auto& t = b.thread(0);
        t.scope("compile", 5, [&] { t.scope("lower", 9); });
        t.instant("cache-miss");
    });
    auto j = json_of(pmc_test::run_command(tool() + " diff --json '" + a + "' '" + other_labels + "'"));
    CHECK(label(j, "lower").find("verdict")->string == "new");
    CHECK(label(j, "parse").find("verdict")->string == "gone");
    CHECK(label(j, "compile").find("verdict")->string == "changed");
    bool hit_gone = false, miss_new = false;
    for (const auto& e : j.find("instants")->items) {
        hit_gone |= e.find("event")->string == "cache-hit(type_of)" && e.find("count_delta")->number == -3;
        miss_new |= e.find("event")->string == "cache-miss" && e.find("count_delta")->number == 1;
    }
    CHECK(hit_gone);
    CHECK(miss_new);
    // Different counters: which file lacks the counter, what it has, and how to choose.
    const auto wall = write(dir, "w.pmcprof", [](auto& b) { compiler_run(b); }, {pmc_test::time_counter()});
    auto r = diff("'" + a + "' '" + wall + "'");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, ContainsSubstring("recorded no counter 'page-faults' (it has: wall-time)"));
    CHECK_THAT(r.out, ContainsSubstring("--counter NAME"));
    // Both have wall-time riding along: --counter compares it.
    const auto both = write(dir, "both.pmcprof", [](auto& b) { compiler_run(b); },
                            {pmc_test::exact_counter(), pmc_test::time_counter()});
    auto by_name = json_of(pmc_test::run_command(tool() + " diff --json --counter wall-time '" + both + "' '" + wall + "'"));
    CHECK(by_name.find("counter")->string == "wall-time");
}

TEST_CASE("every profile tool: a counter named without modifiers finds the one recorded with them") {
    TempDir dir;
    const std::vector<pmc_test::BuilderCounter> recorded = {pmc_test::exact_counter("instructions:u"),
                                                            pmc_test::exact_counter("L1-dcache-load-misses:u")};
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); }, recorded);
    const auto b = write(dir, "b.pmcprof", [](auto& p) { compiler_run(p, 4); }, recorded);
    const std::string file = " '" + a + "'";
    for (const std::string& command :
         {"diff --json --counter L1-dcache-load-misses" + file + " '" + b + "'",
          "aggregate --json --counter L1-dcache-load-misses" + file + " '" + b + "'",
          "summarize --counter L1-dcache-load-misses" + file, "critical --counter L1-dcache-load-misses" + file,
          "export --folded -o '" + dir.file("out.folded") + "' --counter L1-dcache-load-misses" + file}) {
        auto r = pmc_test::run_command(tool() + " " + command + " 2>&1");
        INFO(command << "\n" << r.out);
        CHECK(r.status == 0);
        CHECK_THAT(r.out, !ContainsSubstring("recorded no counter"));
    }
    auto j = json_of(pmc_test::run_command(tool() + " diff --json --counter L1-dcache-load-misses" + file + " '" + b + "'"));
    CHECK(j.find("counter")->string == "L1-dcache-load-misses:u");
    // Two counters of that name with modifiers: no guess, the choices listed.
    const auto two = write(dir, "two.pmcprof", [](auto& p) { compiler_run(p); },
                           {pmc_test::exact_counter("cycles:u"), pmc_test::exact_counter("cycles:k")});
    for (const std::string& command : {"diff --counter cycles '" + two + "' '" + two + "'",
                                       "aggregate --counter cycles '" + two + "' '" + two + "'",
                                       "summarize --counter cycles '" + two + "'"}) {
        auto r = pmc_test::run_command(tool() + " " + command + " 2>&1");
        INFO(command << "\n" << r.out);
        CHECK(r.status == 1);
        CHECK_THAT(r.out, ContainsSubstring("recorded 2 counters named 'cycles' with modifiers: cycles:u, cycles:k; "
                                            "choose one with --counter NAME"));
    }
    // A name with modifiers is taken as written.
    auto other = pmc_test::run_command(tool() + " summarize --counter L1-dcache-load-misses:k" + file + " 2>&1");
    CHECK(other.status == 1);
    CHECK_THAT(other.out, ContainsSubstring("recorded no counter 'L1-dcache-load-misses:k'"));
}

TEST_CASE("pmc diff --fail-on-change: 0 when nothing changed, 3 on a change, 4 when it cannot judge, 2 on damage") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    const auto same = write(dir, "same.pmcprof", [](auto& b) { compiler_run(b); });
    const auto planted = write(dir, "b.pmcprof", [](auto& p) { compiler_run(p, 4); });
    auto gate = [](const std::string& args) {
        return pmc_test::run_command(tool() + " diff --fail-on-change " + args + " 2>&1 >/dev/null");
    };
    auto self = gate("'" + a + "' '" + a + "'");
    CHECK(self.status == 0);
    CHECK(self.out.empty());
    CHECK(gate("'" + a + "' '" + same + "'").status == 0);
    // The planted change: status 3, the label named with its verdict; without the flag the status stays 0.
    auto changed = gate("'" + a + "' '" + planted + "'");
    CHECK(changed.status == 3);
    CHECK_THAT(changed.out, ContainsSubstring("1 label changed (exit status 3):\n  typeck: changed by +4"));
    CHECK(diff("'" + a + "' '" + planted + "'").status == 0);
    CHECK(pmc_test::run_command(tool() + " diff --json --fail-on-change '" + a + "' '" + planted + "' >/dev/null 2>&1")
              .status == 3);
    // A label only one side has is a change too.
    const auto other = write(dir, "other.pmcprof", [](auto& b) {
        compiler_run(b);
        b.thread(2, "late").scope("link", 1);
    });
    auto added = gate("'" + a + "' '" + other + "'");
    CHECK(added.status == 3);
    CHECK_THAT(added.out, ContainsSubstring("link: new (not in BASE)"));
    // A noisy counter: beyond the noise fails, within it passes, one run a side cannot be judged (never a pass: 4).
    std::string b3, m3, o3;
    for (std::uint64_t r = 0; r < 4; ++r) {
        const std::uint64_t jitter = r == 1 ? 2 : r == 2 ? 1 : r == 3 ? 3 : 0;
        b3 += " '" + write(dir, "w" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 10 + jitter); },
                           {pmc_test::time_counter()}) + "'";
        m3 += " '" + write(dir, "m" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 20 + jitter); },
                           {pmc_test::time_counter()}) + "'";
        o3 += " '" + write(dir, "o" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 11 + jitter); },
                           {pmc_test::time_counter()}) + "'";
    }
    auto beyond = gate(b3 + " --" + m3);
    CHECK(beyond.status == 3);
    CHECK_THAT(beyond.out, ContainsSubstring("parse: beyond the noise"));
    CHECK(gate(b3 + " --" + o3).status == 0);
    auto single = gate("'" + dir.file("w0") + "' '" + dir.file("m0") + "'");
    CHECK(single.status == 4);
    CHECK_THAT(single.out, ContainsSubstring("cannot judge 1 label (exit status 4): one run a side gives no noise "
                                             "estimate"));
    CHECK_THAT(single.out, ContainsSubstring("wall-time is not exact"));
    CHECK_THAT(single.out, ContainsSubstring("Record 4 runs a side (pmc diff --fail-on-change A1 ... A4 -- B1 ... B4)"));
    CHECK_THAT(single.out, ContainsSubstring("\n  parse: no noise estimate"));
    // A damaged file: 2, before 3 (a change seen in lost data is not trusted).
    const std::string cut = write_cut(dir);
    auto damaged = gate("'" + a + "' '" + cut + "'");
    CHECK(damaged.status == 2);
    CHECK_THAT(damaged.out, ContainsSubstring("is incomplete"));
    CHECK_THAT(pmc_test::run_command(tool() + " diff --help").out, ContainsSubstring("--fail-on-change"));
}

TEST_CASE("pmc diff --json states the gate's verdict, the changed labels (beyond --top) and its exit status") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    const auto two = write(dir, "two.pmcprof", [](auto& b) { // typeck +4 and a new label, link (+1)
        compiler_run(b, 4);
        b.thread(2, "late").scope("link", 1);
    });
    auto gate_of = [](const std::string& args, int expected_status) {
        auto r = pmc_test::run_command(tool() + " diff --json " + args + " 2>/dev/null"); // stdout: the JSON alone
        INFO(args << "\n" << r.out);
        CHECK(r.status == expected_status);
        const auto j = json_of(r);
        REQUIRE(j.find("gate") != nullptr);
        const pmc::detail::JsonValue gate = *j.find("gate");
        CHECK(gate.find("exit_status")->number == r.status);
        return gate;
    };
    auto unchanged = gate_of("--fail-on-change '" + a + "' '" + a + "'", 0);
    CHECK(unchanged.find("fail_on_change")->boolean);
    CHECK(unchanged.find("verdict")->string == "unchanged");
    CHECK(unchanged.find("changed")->number == 0);
    CHECK(unchanged.find("changed_labels")->items.empty());

    auto changed = gate_of("--fail-on-change --top 1 '" + a + "' '" + two + "'", 3);
    CHECK(changed.find("verdict")->string == "changed");
    CHECK(changed.find("changed")->number == 2);
    REQUIRE(changed.find("changed_labels")->items.size() == 2);
    CHECK(changed.find("changed_labels")->items[0].string == "typeck"); // largest |self delta| first
    CHECK(changed.find("changed_labels")->items[1].string == "link");   // listed though --top 1 hides it
    // Without the flag: the same verdict, but the status is 0 and the JSON says the gate was off.
    auto off = gate_of("'" + a + "' '" + two + "'", 0);
    CHECK_FALSE(off.find("fail_on_change")->boolean);
    CHECK(off.find("verdict")->string == "changed");

    // A noisy counter with one run a side: the gate cannot judge (status 4), never a pass.
    const auto w = write(dir, "w.pmcprof", [](auto& b) { compiler_run(b, 0, 10); }, {pmc_test::time_counter()});
    const auto m = write(dir, "m.pmcprof", [](auto& b) { compiler_run(b, 0, 20); }, {pmc_test::time_counter()});
    auto unjudged = gate_of("--fail-on-change '" + w + "' '" + m + "'", 4);
    CHECK(unjudged.find("verdict")->string == "cannot judge");
    CHECK(unjudged.find("unjudged")->number == 1); // parse; the others have the same values on both sides
    REQUIRE(unjudged.find("unjudged_labels")->items.size() == 1);
    CHECK(unjudged.find("unjudged_labels")->items[0].string == "parse");
    CHECK(unjudged.find("runs_needed")->number == 4); // 2 / C(8, 4) = 2.9 % <= 5 % for the one label
    CHECK(changed.find("runs_needed")->type == pmc::detail::JsonValue::Type::null);

    // A damaged file: not judged, status 2 (before 3).
    const std::string cut = write_cut(dir);
    CHECK(gate_of("--fail-on-change '" + a + "' '" + cut + "'", 2).find("verdict")->string == "not judged");
    CHECK_THAT(pmc_test::run_command(tool() + " diff --help").out, ContainsSubstring("\"gate\""));
}

TEST_CASE("pmc diff: usage errors and --help") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    auto help = pmc_test::run_command(tool() + " diff --help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, ContainsSubstring("usage: pmc diff"));
    CHECK_THAT(pmc_test::run_command(tool() + " help diff").out, ContainsSubstring("usage: pmc diff"));
    for (const std::string& args : {std::string(""), "'" + a + "'", "'" + a + "' '" + a + "' '" + a + "'",
                                    "'" + a + "' --", "-- '" + a + "'", "--top x '" + a + "' '" + a + "'",
                                    "--bogus '" + a + "' '" + a + "'", "'" + a + "' -- '" + a + "' -- '" + a + "'"}) {
        auto r = diff(args);
        INFO(args << ": " << r.out);
        CHECK(r.status == 1);
        CHECK_THAT(r.out, ContainsSubstring("Run 'pmc diff --help'"));
    }
    auto missing = diff("'" + a + "' '" + dir.file("nope") + "'");
    CHECK(missing.status == 1);
    CHECK_THAT(missing.out, ContainsSubstring("No such file or directory"));
}

TEST_CASE("pmc diff and pmc aggregate: a file cut at every length, and byte flips: a message, never a crash", "[once]") {
    TempDir dir;
    pmc_test::ProfileBuilder b({pmc_test::exact_counter(), pmc_test::time_counter()});
    b.page_records = 3; // many pages: cuts inside and between them
    compiler_run(b);
    const std::string whole = dir.file("whole.pmcprof");
    REQUIRE(b.write(whole));
    const auto bytes = b.bytes();
    // Every cut whose header survives goes to one diff and one aggregate (each reads them all); the others alone.
    std::string readable;
    std::size_t damaged = 0, unreadable = 0;
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        const std::string f = dir.file("cut" + std::to_string(n));
        std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
        auto p = pmc::parse_profile(bytes.data(), n);
        if (!p) {
            if (n % 7 == 0 || n + 1 == bytes.size()) { // a sample of them: each is a process
                ++unreadable;
                for (const char* cmd : {" diff '", " aggregate '"}) {
                    auto r = pmc_test::run_command(tool() + cmd + whole + "' '" + f + "' 2>&1");
                    INFO(cmd << " cut at " << n << ": " << r.out);
                    CHECK(r.signal == 0);
                    CHECK(r.status == 1);
                    CHECK_THAT(r.out, ContainsSubstring("is not a readable pmc profile"));
                }
            }
            continue;
        }
        readable += " '" + f + "'";
        damaged += p->problems.empty() ? 0 : 1;
    }
    REQUIRE(damaged > 100);
    CHECK(unreadable > 0);
    auto count = [](const std::string& s, const std::string& what) {
        std::size_t n = 0;
        for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
        return n;
    };
    for (const std::string& cmd : {" diff '" + whole + "' --" + readable, " aggregate '" + whole + "'" + readable,
                                   " diff --json '" + whole + "' --" + readable}) {
        auto r = pmc_test::run_command(tool() + cmd + " 2>&1");
        CHECK(r.signal == 0);
        CHECK(r.status == 2);
        CHECK(count(r.out, "is incomplete") == damaged); // every damaged file is named, with what it lost
    }
    // Random byte flips, 200 damaged copies at once.
    std::mt19937 rng(2026);
    std::string flipped;
    std::size_t reported = 0;
    for (int trial = 0; trial < 200; ++trial) {
        auto copy = bytes;
        for (int f = 0; f < 1 + trial % 4; ++f) copy[rng() % copy.size()] ^= static_cast<unsigned char>(1 + rng() % 255);
        auto p = pmc::parse_profile(copy.data(), copy.size());
        if (!p) continue; // the header: covered above
        const std::string f = dir.file("flip" + std::to_string(trial));
        std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(copy.data()), static_cast<std::streamsize>(copy.size()));
        flipped += " '" + f + "'";
        reported += p->problems.empty() ? 0 : 1;
    }
    REQUIRE(reported > 50);
    for (const std::string& cmd : {" diff '" + whole + "' --" + flipped, " aggregate --json" + flipped}) {
        auto r = pmc_test::run_command(tool() + cmd + " 2>&1");
        CHECK(r.signal == 0);
        CHECK(r.status == 2);
        CHECK(count(r.out, "is incomplete") == reported);
    }
}

// ---- The gate's rules (issue 23): new/gone by the noise rule, --threshold, --fail-on-increase, --accept, status 4,
// and the statistics under them (the rank-sum's ties, Holm's step-down) pinned to exact values.

namespace {

/// One run: each label an outermost scope with the given self value, in this order (a label not listed: absent).
std::string write_named(const TempDir& dir, const std::string& name,
                        const std::vector<std::pair<std::string, std::uint64_t>>& labels,
                        pmc_test::BuilderCounter counter = pmc_test::time_counter()) {
    return write(dir, name, [&](auto& b) {
        auto& t = b.thread(0, "main");
        for (const auto& [label, self] : labels) t.scope(label, self);
    }, {counter});
}

/// pmc diff with its stderr (the gate's words) and stdout together.
pmc_test::CommandResult gate_run(const std::string& args) { return pmc_test::run_command(tool() + " diff " + args + " 2>&1"); }

/// pmc diff --json (stdout only), its status checked against the gate's exit_status; and every label's fails_gate
/// is its being in changed_labels: the JSON's facts agree with each other.
pmc::detail::JsonValue gate_json(const std::string& args, int expected_status) {
    auto r = pmc_test::run_command(tool() + " diff --json " + args + " 2>/dev/null");
    INFO(args << "\n" << r.out);
    CHECK(r.status == expected_status);
    auto j = json_of(r);
    const auto& gate = *j.find("gate");
    CHECK(gate.find("exit_status")->number == r.status);
    std::vector<std::string> changed;
    for (const auto& l : gate.find("changed_labels")->items) changed.push_back(l.string);
    CHECK(gate.find("changed")->number == static_cast<double>(changed.size()));
    for (const auto& l : j.find("labels")->items) {
        const bool listed = std::find(changed.begin(), changed.end(), l.find("label")->string) != changed.end();
        INFO(l.find("label")->string);
        CHECK(l.find("fails_gate")->boolean == listed);
    }
    return j;
}

std::vector<std::string> strings(const pmc::detail::JsonValue& array) {
    std::vector<std::string> out;
    for (const auto& v : array.items) out.push_back(v.string);
    return out;
}

std::vector<std::string> gate_list(const pmc::detail::JsonValue& j, const char* key) {
    return strings(*j.find("gate")->find(key));
}

/// Five runs a side of one label "q" (a time) with the given self values: its rank-sum p-value from --json.
double p_of(const TempDir& dir, const std::string& tag, const std::vector<std::uint64_t>& base,
            const std::vector<std::uint64_t>& fresh) {
    std::vector<std::string> a, b;
    for (std::size_t r = 0; r < base.size(); ++r) a.push_back(write_named(dir, tag + "a" + std::to_string(r), {{"q", base[r]}}));
    for (std::size_t r = 0; r < fresh.size(); ++r) b.push_back(write_named(dir, tag + "b" + std::to_string(r), {{"q", fresh[r]}}));
    auto j = json_of(pmc_test::run_command(tool() + " diff --json" + join_files(a) + " --" + join_files(b)));
    return label(j, "q").find("p")->number;
}

} // namespace

TEST_CASE("pmc diff: the rank-sum test's exact p-value, ties counted a half and taken toward the larger p") {
    // Reference values: every one of the C(10, 5) = 252 splits of ten distinct ranks enumerated (a script, not this
    // code): P(U <= 0) = 1/252, P(U <= 1) = 2/252, P(U <= 2) = 4/252; p is twice the smaller tail.
    TempDir dir;
    CHECK(p_of(dir, "apart", {100, 101, 102, 103, 104}, {110, 111, 112, 113, 114}) == Approx(2.0 / 252));
    // One tie (104 on both sides): U = 24.5 of 25 pairs; the tie is taken toward the larger p (U = 24): 4 / 252.
    // Counting it 1 gives 2 / 252; rounding the half the other way, too.
    CHECK(p_of(dir, "tie-up", {100, 101, 102, 103, 104}, {104, 105, 106, 107, 108}) == Approx(4.0 / 252));
    // The mirror image (U = 0.5): counting the tie 0 gives 2 / 252.
    CHECK(p_of(dir, "tie-down", {104, 105, 106, 107, 108}, {100, 101, 102, 103, 104}) == Approx(4.0 / 252));
    // Many ties: U = 22 (10s below every 20 and 30, 20s against 20s a half each): 14 / 252.
    CHECK(p_of(dir, "ties", {10, 10, 20, 20, 20}, {20, 20, 30, 30, 30}) == Approx(14.0 / 252));
    // Two overlapping pairs, no tie (U = 23): 8 / 252.
    CHECK(p_of(dir, "overlap", {100, 101, 102, 103, 113}, {111, 112, 120, 121, 122}) == Approx(8.0 / 252));
}

TEST_CASE("pmc diff: Holm's step-down, neither Bonferroni nor step-up: the k-th smallest p against A / (L - k + 1), stopping at the first that fails") {
    TempDir dir;
    // Two labels, five runs a side, both beyond either side's spread. "apart": p = 2/252 = 0.79 %; "overlap": two
    // pairs cross, p = 8/252 = 3.17 %. Holm: 0.79 % <= 5 % / 2, then 3.17 % <= 5 % / 1: both flagged. Bonferroni
    // (5 % / 2 for both) flags "apart" only.
    const std::uint64_t apart_base[] = {100, 101, 102, 103, 104}, apart_new[] = {110, 111, 112, 113, 114};
    const std::uint64_t overlap_base[] = {100, 101, 102, 103, 113}, overlap_new[] = {111, 112, 120, 121, 122};
    std::vector<std::string> a, b;
    for (std::size_t r = 0; r < 5; ++r) {
        a.push_back(write_named(dir, "a" + std::to_string(r), {{"apart", apart_base[r]}, {"overlap", overlap_base[r]}}));
        b.push_back(write_named(dir, "b" + std::to_string(r), {{"apart", apart_new[r]}, {"overlap", overlap_new[r]}}));
    }
    auto both = gate_json("--fail-on-change" + join_files(a) + " --" + join_files(b), 3);
    CHECK(label(both, "apart").find("p")->number == Approx(2.0 / 252));
    CHECK(label(both, "overlap").find("p")->number == Approx(8.0 / 252));
    CHECK(gate_list(both, "changed_labels") == std::vector<std::string>{"overlap", "apart"}); // by |self delta|
    // Two labels at 3.17 % each: Holm stops at the first (3.17 % > 5 % / 2): none flagged, the gate passes. A
    // step-up rule (Hochberg: the largest p against 5 % / 1 first) would flag both; a rule that does not stop at
    // the first failure would flag the second.
    std::vector<std::string> c, d;
    for (std::size_t r = 0; r < 5; ++r) {
        c.push_back(write_named(dir, "c" + std::to_string(r), {{"one", overlap_base[r]}, {"two", overlap_base[r] + 1000}}));
        d.push_back(write_named(dir, "d" + std::to_string(r), {{"one", overlap_new[r]}, {"two", overlap_new[r] + 1000}}));
    }
    auto neither = gate_json("--fail-on-change" + join_files(c) + " --" + join_files(d), 0);
    CHECK(label(neither, "one").find("verdict")->string == "within the noise");
    CHECK(label(neither, "two").find("verdict")->string == "within the noise");
    CHECK(label(neither, "two").find("p")->number == Approx(8.0 / 252));
    CHECK_THAT(label(neither, "one").find("text")->string, ContainsSubstring("needed <= 2.5%"));
}

TEST_CASE("pmc diff: new and gone labels are judged by the noise rule (exact counter, every run: any new or gone fails)") {
    TempDir dir;
    // Wall-time, five runs a side of an unchanged program: "rare" was recorded in one NEW run only. It is one of
    // the labels judged (the others are identical), its p-value is large: within the noise, the gate passes.
    std::vector<std::string> base, once, always, without;
    for (std::uint64_t r = 0; r < 5; ++r) {
        base.push_back(write_named(dir, "a" + std::to_string(r), {{"work", 100}, {"rare", 50 + r}}));
        without.push_back(write_named(dir, "w" + std::to_string(r), {{"work", 100}}));
        std::vector<std::pair<std::string, std::uint64_t>> labels = {{"work", 100}};
        if (r == 2) labels.push_back({"rare", 60});
        once.push_back(write_named(dir, "o" + std::to_string(r), labels));
        always.push_back(write_named(dir, "n" + std::to_string(r), {{"work", 100}, {"rare", 50 + r}}));
    }
    auto rare = gate_json("--fail-on-change" + join_files(without) + " --" + join_files(once), 0);
    CHECK(label(rare, "rare").find("verdict")->string == "within the noise");
    CHECK(label(rare, "rare").find("p")->number == Approx(0.6904761904761905)); // U = 15 of 25: 174 / 252
    CHECK_THAT(label(rare, "rare").find("text")->string, ContainsSubstring("new: in 1 of 5 NEW runs, no BASE run"));
    CHECK(rare.find("judged_by_noise")->number == 1);
    // In every NEW run: beyond the noise, called new, the gate fails; and gone the other way round.
    auto added = gate_json("--fail-on-change" + join_files(without) + " --" + join_files(always), 3);
    CHECK(label(added, "rare").find("verdict")->string == "new");
    CHECK_THAT(label(added, "rare").find("text")->string, ContainsSubstring("new, beyond the noise: +52 ns (p 0.8%)"));
    CHECK(gate_list(added, "changed_labels") == std::vector<std::string>{"rare"});
    auto removed = gate_json("--fail-on-change" + join_files(base) + " --" + join_files(without), 3);
    CHECK(label(removed, "rare").find("verdict")->string == "gone");
    // An exact counter: a label in one run of five is the program's nondeterminism, judged by the noise rule...
    std::vector<std::string> exact_without, exact_once, exact_always;
    for (std::uint64_t r = 0; r < 5; ++r) {
        exact_without.push_back(write_named(dir, "ew" + std::to_string(r), {{"work", 100}}, pmc_test::exact_counter()));
        std::vector<std::pair<std::string, std::uint64_t>> labels = {{"work", 100}};
        if (r == 2) labels.push_back({"rare", 60});
        exact_once.push_back(write_named(dir, "eo" + std::to_string(r), labels, pmc_test::exact_counter()));
    }
    auto nondeterministic = gate_json("--fail-on-change" + join_files(exact_without) + " --" + join_files(exact_once), 0);
    CHECK(label(nondeterministic, "rare").find("verdict")->string == "within the noise");
    CHECK(strings(*nondeterministic.find("nondeterministic_labels")) == std::vector<std::string>{"rare (NEW)"});
    // ... and a label every run of one side has and no run of the other is a change, whatever the number of runs.
    for (std::uint64_t r = 0; r < 2; ++r)
        exact_always.push_back(write_named(dir, "ea" + std::to_string(r), {{"work", 100}, {"rare", 60 + r}},
                                           pmc_test::exact_counter()));
    auto exact_new = gate_json("--fail-on-change '" + exact_without[0] + "' '" + exact_without[1] + "' --" +
                                   join_files(exact_always), 3);
    CHECK(label(exact_new, "rare").find("verdict")->string == "new");
    CHECK(label(exact_new, "rare").find("text")->string == "new (not in BASE)");
}

TEST_CASE("pmc diff: a gate that cannot flag anything never passes: status 4, with the runs it needs") {
    TempDir dir;
    // Two and two wall-time runs: the smallest p-value is 2 / C(4, 2) = 33 %: no label can be flagged at 5 %.
    std::vector<std::string> base, fresh;
    for (std::uint64_t r = 0; r < 2; ++r) {
        base.push_back(write_named(dir, "a" + std::to_string(r), {{"work", 100 + r}, {"idle", 5}}));
        fresh.push_back(write_named(dir, "b" + std::to_string(r), {{"work", 200 + r}, {"idle", 5}}));
    }
    const std::string sides = join_files(base) + " --" + join_files(fresh);
    auto r = gate_run("--fail-on-change" + sides);
    INFO(r.out);
    CHECK(r.status == 4);
    CHECK_THAT(r.out, ContainsSubstring("pmc diff: --fail-on-change cannot judge 1 label (exit status 4): with 2 and 2 "
                                        "runs the smallest p-value is 33.3%, above Holm's first bar 5.0% / 1 = 5.0%: no "
                                        "label can be flagged. Record 4 runs a side (pmc diff --fail-on-change A1 ... A4 "
                                        "-- B1 ... B4)"));
    CHECK_THAT(r.out, ContainsSubstring("\n  work: within the noise"));
    CHECK(gate_run("--fail-on-increase" + sides).status == 4);
    auto j = gate_json("--fail-on-change" + sides, 4);
    CHECK(j.find("gate")->find("verdict")->string == "cannot judge");
    CHECK(gate_list(j, "unjudged_labels") == std::vector<std::string>{"work"});
    CHECK(j.find("gate")->find("runs_needed")->number == 4);
    // Without a fail option the status stays 0, and the JSON still says the gate could not judge.
    CHECK(gate_json(sides, 0).find("gate")->find("verdict")->string == "cannot judge");
    // A label that could not fail the gate anyway does not make it 4: under the threshold, or a decrease under
    // --fail-on-increase.
    CHECK(gate_json("--fail-on-change --threshold 200" + sides, 0).find("gate")->find("verdict")->string == "unchanged");
    CHECK(gate_run("--fail-on-increase" + join_files(fresh) + " --" + join_files(base)).status == 0);
    CHECK(gate_run("--fail-on-change" + join_files(fresh) + " --" + join_files(base)).status == 4);
    // Enough runs for the labels judged: 4 and 4 (2 / C(8, 4) = 2.9 %) flag the change.
    for (std::uint64_t k = 2; k < 4; ++k) {
        base.push_back(write_named(dir, "a" + std::to_string(k), {{"work", 100 + k}, {"idle", 5}}));
        fresh.push_back(write_named(dir, "b" + std::to_string(k), {{"work", 200 + k}, {"idle", 5}}));
    }
    CHECK(gate_run("--fail-on-change" + join_files(base) + " --" + join_files(fresh)).status == 3);
    CHECK_THAT(pmc_test::run_command(tool() + " diff --help").out, ContainsSubstring("exits 4, never 0"));
}

TEST_CASE("pmc diff --threshold: a flagged label whose self delta is under a count or a percentage does not fail") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    const auto planted = write(dir, "b.pmcprof", [](auto& p) { compiler_run(p, 4); }); // typeck 60 -> 64: +6.7 %
    const auto with_link = write(dir, "c.pmcprof", [](auto& p) {
        compiler_run(p);
        p.thread(2, "late").scope("link", 3);
    });
    const std::string sides = " '" + a + "' '" + planted + "'";
    auto under = gate_json("--fail-on-change --threshold 5" + sides, 0);
    CHECK(label(under, "typeck").find("verdict")->string == "changed"); // still shown as changed
    CHECK(label(under, "typeck").find("under_threshold")->boolean);
    CHECK(gate_list(under, "under_threshold_labels") == std::vector<std::string>{"typeck"});
    CHECK(gate_list(under, "changed_labels").empty());
    CHECK(under.find("gate")->find("threshold")->find("value")->number == 5);
    CHECK_FALSE(under.find("gate")->find("threshold")->find("percent")->boolean);
    CHECK_THAT(gate_run("--fail-on-change --threshold 5" + sides).out,
               ContainsSubstring("changed by +4 (under the threshold 5: does not fail)"));
    CHECK(gate_json("--fail-on-change --threshold 4" + sides, 3).find("gate")->find("changed")->number == 1); // not below
    CHECK(gate_json("--fail-on-change --threshold 7%" + sides, 0).find("gate")->find("threshold")->find("percent")->boolean);
    CHECK(gate_run("--fail-on-change --threshold 6.5%" + sides).status == 3);
    CHECK(gate_run("--fail-on-change --threshold 6.7%" + sides).status == 0);
    // A new label: its share of a BASE median of 0 is infinite, so only a count excuses it.
    CHECK(gate_run("--fail-on-change --threshold 99% '" + a + "' '" + with_link + "'").status == 3);
    CHECK(gate_run("--fail-on-change --threshold 4 '" + a + "' '" + with_link + "'").status == 0);
    CHECK(gate_run("--fail-on-change --threshold 3 '" + a + "' '" + with_link + "'").status == 3);
    // A noisy counter: beyond the noise by +30 ns (medians 34.5 -> 64.5), so 31 excuses it, 30 does not.
    std::string b4, m4;
    for (std::uint64_t r = 0; r < 4; ++r) {
        const std::uint64_t jitter = r == 1 ? 2 : r == 2 ? 1 : r == 3 ? 3 : 0;
        b4 += " '" + write(dir, "w" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 10 + jitter); },
                           {pmc_test::time_counter()}) + "'";
        m4 += " '" + write(dir, "m" + std::to_string(r), [&](auto& b) { compiler_run(b, 0, 20 + jitter); },
                           {pmc_test::time_counter()}) + "'";
    }
    CHECK(gate_run("--fail-on-change --threshold 31" + b4 + " --" + m4).status == 0);
    CHECK(gate_run("--fail-on-change --threshold 30" + b4 + " --" + m4).status == 3);
    // Values that are not a count or a percentage: a usage error.
    for (const std::string bad : {"''", "abc", "-5", "+5", "5%%", "%", "1e999", "nan", "' 5'", "5x"}) {
        auto r = gate_run("--fail-on-change --threshold " + bad + sides);
        INFO(bad << ": " << r.out);
        CHECK(r.status == 1);
        CHECK_THAT(r.out, ContainsSubstring("pmc diff: --threshold needs a count (e.g. 100) or a percentage (e.g. 0.5%)"));
        CHECK_THAT(r.out, ContainsSubstring("Run 'pmc diff --help' for usage."));
    }
}

TEST_CASE("pmc diff --fail-on-increase: only increases fail, --fail-on-change stays both ways") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    const auto planted = write(dir, "b.pmcprof", [](auto& p) { compiler_run(p, 4); });
    const auto with_link = write(dir, "c.pmcprof", [](auto& p) {
        compiler_run(p);
        p.thread(2, "late").scope("link", 3);
    });
    auto up = gate_run("--fail-on-increase '" + a + "' '" + planted + "'");
    CHECK(up.status == 3);
    CHECK_THAT(up.out, ContainsSubstring("pmc diff: --fail-on-increase: 1 label changed (exit status 3):\n  typeck: "
                                         "changed by +4"));
    auto down = gate_json("--fail-on-increase '" + planted + "' '" + a + "'", 0);
    CHECK(label(down, "typeck").find("verdict")->string == "changed");
    CHECK(gate_list(down, "passed_decreases") == std::vector<std::string>{"typeck"});
    CHECK(down.find("gate")->find("fail_on_increase")->boolean);
    CHECK_THAT(gate_run("--fail-on-increase '" + planted + "' '" + a + "'").out,
               ContainsSubstring("changed by -4 (a decrease: does not fail --fail-on-increase)"));
    CHECK(gate_run("--fail-on-change '" + planted + "' '" + a + "'").status == 3);
    CHECK(gate_run("--fail-on-increase '" + a + "' '" + with_link + "'").status == 3); // new: an increase
    CHECK(gate_run("--fail-on-increase '" + with_link + "' '" + a + "'").status == 0); // gone: a decrease
    // The same self value in fewer calls is no increase; in more calls, it is.
    const auto two_calls = write_named(dir, "two-calls", {{"x", 5}, {"x", 5}}, pmc_test::exact_counter());
    const auto one_call = write_named(dir, "one-call", {{"x", 10}}, pmc_test::exact_counter());
    CHECK(gate_run("--fail-on-increase '" + two_calls + "' '" + one_call + "'").status == 0);
    CHECK(gate_run("--fail-on-increase '" + one_call + "' '" + two_calls + "'").status == 3);
    auto both = gate_run("--fail-on-increase --fail-on-change '" + a + "' '" + planted + "'");
    CHECK(both.status == 1);
    CHECK_THAT(both.out, ContainsSubstring("exclude each other\nRun 'pmc diff --help' for usage."));
}

TEST_CASE("pmc diff --accept FILE: accepted changes pass as accepted, others still fail, a malformed file is an error") {
    TempDir dir;
    const auto a = write(dir, "a.pmcprof", [](auto& b) { compiler_run(b); });
    const auto two = write(dir, "two.pmcprof", [](auto& b) { // typeck +4 (+6.7 %) and a new label, link
        compiler_run(b, 4);
        b.thread(2, "late").scope("link", 1);
    });
    const std::string sides = " '" + a + "' '" + two + "'";
    auto accept = [&](const std::string& name, const std::string& text) {
        const std::string path = dir.file(name);
        std::ofstream(path) << text;
        return " --accept '" + path + "'";
    };
    const std::string good = accept("good", "# intended by this change\n\n  +4   typeck\r\nnew link\n");
    auto ok = gate_json("--fail-on-change" + good + sides, 0);
    CHECK(gate_list(ok, "accepted_labels") == std::vector<std::string>{"typeck", "link"});
    CHECK(gate_list(ok, "changed_labels").empty());
    CHECK(label(ok, "typeck").find("accepted")->string == "+4");
    CHECK(label(ok, "typeck").find("accepted_as_is")->boolean);
    CHECK(label(ok, "parse").find("accepted")->type == pmc::detail::JsonValue::Type::null);
    CHECK_THAT(gate_run("--fail-on-change" + good + sides).out, ContainsSubstring("changed by +4 (accepted: +4, --accept line 3)"));
    // Ranges, in the unit or in %; the same without the gate's flag is only reported.
    CHECK(gate_run("--fail-on-change" + accept("range", "0..10 typeck\nnew link\n") + sides).status == 0);
    CHECK(gate_run("--fail-on-change" + accept("pct", "+5%..+10% typeck\n1..1 link\n") + sides).status == 0);
    // Not as accepted: still fails, and says so; the unaccepted label fails as before.
    auto other = gate_json("--fail-on-change" + accept("other", "+5 typeck\ngone link\n") + sides, 3);
    CHECK(gate_list(other, "changed_labels") == std::vector<std::string>{"typeck", "link"});
    CHECK_FALSE(label(other, "typeck").find("accepted_as_is")->boolean);
    CHECK_THAT(gate_run("--fail-on-change" + accept("other2", "+7%..+10% typeck\nnew link\n") + sides).out,
               ContainsSubstring("typeck: changed by +4 (not as accepted: +7%..+10%, --accept line 1: fails)"));
    // One share matches at the precision written (+4 on 60 is +6.666...%, shown +6.7%); a range's ends are exact.
    CHECK(gate_run("--fail-on-change" + accept("shown", "+6.7% typeck\nnew link\n") + sides).status == 0);
    CHECK(gate_run("--fail-on-change" + accept("finer", "+6.67% typeck\nnew link\n") + sides).status == 0);
    CHECK(gate_run("--fail-on-change" + accept("off", "+6.6% typeck\nnew link\n") + sides).status == 3);
    CHECK(gate_run("--fail-on-change" + accept("hex", "0x4 typeck\n") + sides).status == 1);
    auto partly = gate_json("--fail-on-change" + accept("partly", "+4 typeck\n") + sides, 3);
    CHECK(gate_list(partly, "changed_labels") == std::vector<std::string>{"link"});
    // An accepted label that did not change passes (a file left in place does not fail the next commit); a label
    // on neither side is warned about.
    auto stale = gate_run("--fail-on-change" + accept("stale", "+4 parse\n+4 typeck\nnew link\n-3 nosuch label\n") + sides);
    CHECK(stale.status == 0);
    CHECK_THAT(stale.out, ContainsSubstring("line 4: no label 'nosuch label' on either side"));
    // Malformed: the file and line, status 1.
    const std::vector<std::pair<std::string, std::string>> malformed = {
        {"typeck\n", "line 1: no label after the value 'typeck'"},
        {"# ok\nfour typeck\n", "line 2: 'four' is not a self delta"},
        {"10..0 typeck\n", "line 1: '10..0': the range's low end is above its high end"},
        {"5%..10 typeck\n", "line 1: '5%..10': both ends in % or neither"},
        {"+4 typeck\n+5 typeck\n", "line 2: label 'typeck' is already accepted on line 1"},
        {"++4 typeck\n", "line 1: '++4' is not a self delta"},
        {"4.. typeck\n", "line 1: '4..' is not a self delta"},
    };
    for (std::size_t i = 0; i < malformed.size(); ++i) {
        const auto& [text, why] = malformed[i];
        auto r = gate_run("--fail-on-change" + accept("bad" + std::to_string(i), text) + sides);
        INFO(text << r.out);
        CHECK(r.status == 1);
        CHECK_THAT(r.out, ContainsSubstring("pmc diff: --accept '" + dir.file("bad" + std::to_string(i)) + "' " + why));
    }
    // Control bytes in the file are not written to the terminal.
    auto binary = gate_run("--fail-on-change" + accept("binary", std::string("\x01\x1b[2J typeck\n")) + sides);
    CHECK(binary.status == 1);
    CHECK_THAT(binary.out, ContainsSubstring("line 1: '??[2J' is not a self delta"));
    CHECK(std::none_of(binary.out.begin(), binary.out.end(), [](char c) {
        return c != '\n' && !std::isprint(static_cast<unsigned char>(c));
    }));
    auto missing = gate_run("--fail-on-change --accept '" + dir.file("nope") + "'" + sides);
    CHECK(missing.status == 1);
    CHECK_THAT(missing.out, ContainsSubstring("No such file or directory"));
    CHECK_THAT(pmc_test::run_command(tool() + " diff --help").out, ContainsSubstring("--accept FILE"));
}

TEST_CASE("pmc diff: profiles from two emulators cannot be judged (exit 4, both named) unless --any-emulator") {
    TempDir dir;
    auto under = [](const std::string& emulator) {
        return [emulator](pmc_test::ProfileBuilder& b) {
            b.emulator = emulator;
            compiler_run(b);
        };
    };
    const std::string q7 = write(dir, "q7.pmcprof", under("QEMU 7.2.13 (Debian 1:7.2+dfsg-7+deb12u7), plugin API 1"));
    const std::string q7b = write(dir, "q7b.pmcprof", under("QEMU 7.2.13 (Debian 1:7.2+dfsg-7+deb12u7), plugin API 1"));
    const std::string q10 = write(dir, "q10.pmcprof", under("QEMU 10.0.2, plugin API 2"));
    const std::string native = write(dir, "native.pmcprof", [](pmc_test::ProfileBuilder& b) { compiler_run(b); });
    auto same = pmc_test::run_command(tool() + " diff --fail-on-change " + q7 + " " + q7b + " 2>&1");
    INFO(same.out);
    CHECK(same.status == 0);
    for (const auto& other : {q10, native}) {
        auto r = pmc_test::run_command(tool() + " diff --fail-on-change " + q7 + " " + other + " 2>&1");
        INFO(r.out);
        CHECK(r.status == 4);
        CHECK(r.out.find("cannot judge: the profiles come from different emulators") != std::string::npos);
        CHECK(r.out.find("QEMU 7.2.13") != std::string::npos);
        CHECK(r.out.find("--any-emulator") != std::string::npos);
        auto anyway = pmc_test::run_command(tool() + " diff --fail-on-change --any-emulator " + q7 + " " + other + " 2>&1");
        INFO(anyway.out);
        CHECK(anyway.status == 0);
        CHECK(anyway.out.find("warning: the profiles come from different emulators") != std::string::npos);
    }
    auto summary = pmc_test::run_command(tool() + " summarize " + q10);
    CHECK(summary.out.find("emulator: QEMU 10.0.2, plugin API 2") != std::string::npos);
}

TEST_CASE("pmc diff: a profile from QEMU's default CPU (before pmc chose one) against one from pmc's Haswell cannot "
          "be judged, both models named, unless --any-emulator") {
    TempDir dir;
    // As the profiler writes them: the CPU model the program's CPUID found, and pmc emulate's QEMU and -cpu.
    auto under = [](const std::string& emulator, const std::string& cpu) {
        return [emulator, cpu](pmc_test::ProfileBuilder& b) {
            b.emulator = emulator;
            b.cpu = "emulated by QEMU's TCG (pmc emulate): the CPU model QEMU presents, " + cpu + ", not the host's";
            compiler_run(b);
        };
    };
    const std::string k8 = "AMD family 0xf model 0x6b stepping 1 (K8)", haswell = "Intel family 0x6 model 0x3c stepping 1 (Haswell)";
    const std::string old_run = write(dir, "qemu64.pmcprof", under("QEMU 7.2.22, plugin API 1", k8));
    const std::string new_run = write(dir, "haswell.pmcprof", under("QEMU 7.2.22, plugin API 1, -cpu "
                                                                    "Haswell-noTSX,-pcid,-x2apic,-tsc-deadline,-invpcid",
                                                                    haswell));
    // The same emulator text, other CPUs (QEMU_CPU set for one run): refused all the same.
    const std::string env_run = write(dir, "env.pmcprof", under("QEMU 7.2.22, plugin API 1", haswell));
    for (const auto& other : {new_run, env_run}) {
        auto r = pmc_test::run_command(tool() + " diff --fail-on-change " + old_run + " " + other + " 2>&1");
        INFO(r.out);
        CHECK(r.status == 4);
        CHECK_THAT(r.out, ContainsSubstring("cannot judge: the profiles come from different emulators or emulated CPUs"));
        CHECK_THAT(r.out, ContainsSubstring(k8));
        CHECK_THAT(r.out, ContainsSubstring(haswell));
        CHECK_THAT(r.out, ContainsSubstring("--cpu MODEL"));
        CHECK_THAT(r.out, ContainsSubstring("--any-emulator"));
        auto anyway = pmc_test::run_command(tool() + " diff --fail-on-change --any-emulator " + old_run + " " + other + " 2>&1");
        CHECK(anyway.status == 0);
    }
    CHECK_THAT(pmc_test::run_command(tool() + " diff --fail-on-change " + new_run + " " + new_run + " 2>&1").out,
               !ContainsSubstring("cannot judge"));
}

// ---- Modelled counters (issue 33 item 5): gated only when --counter names one, with their own default threshold.

namespace {

const char* const default_geometry = "I1 32768,8,64, D1 32768,8,64, LL 8388608,16,64";

/// A profile under pmc emulate --cache: the modelled L1-dcache-load-misses:u first (the primary), instructions:u
/// second (none when `instructions` is 0: the profile then records only a modelled counter); one label "scan" with
/// the given counts; the cache model of `geometry`. `event` "branch-misses:u": pmc emulate --branches' instead.
std::string write_modelled(const TempDir& dir, const std::string& name, std::uint64_t misses, std::uint64_t instructions,
                           const std::string& geometry = default_geometry,
                           const std::string& event = "L1-dcache-load-misses:u") {
    pmc_test::BuilderCounter modelled = pmc_test::exact_counter(event);
    modelled.read_path = "emulator";
    modelled.note = event.rfind("branch-misses", 0) == 0
                        ? "modelled (pmc emulate --branches): Cachegrind's branch predictor (16384 2-bit counters), "
                          "this thread's own"
                        : "modelled (pmc emulate --cache): Cachegrind's cache model (" + geometry +
                              "; LRU, write-allocate), this thread's caches of its own";
    pmc_test::BuilderCounter counted = pmc_test::exact_counter("instructions:u");
    counted.read_path = "emulator";
    std::vector<pmc_test::BuilderCounter> counters{modelled};
    if (instructions) counters.push_back(counted);
    pmc_test::ProfileBuilder b(counters);
    b.emulator = "QEMU 7.2.22, plugin API 1";
    auto& t = b.thread(0, "main");
    t.begin("scan");
    if (instructions) t.advance_all({misses, instructions});
    else t.advance_all({misses});
    t.end();
    const std::string path = dir.file(name);
    REQUIRE(b.write(path));
    return path;
}

} // namespace

TEST_CASE("pmc diff: a modelled counter is gated only when --counter names it, under its own 10% default threshold") {
    TempDir dir;
    const auto base = write_modelled(dir, "base.pmcprof", 10000, 5000);
    const auto slight = write_modelled(dir, "slight.pmcprof", 10500, 5000); // +5 % misses, same instructions
    const auto more = write_modelled(dir, "more.pmcprof", 12000, 5000);     // +20 % misses
    const std::string misses = " --counter L1-dcache-load-misses:u";
    // By default the instructions are compared, though the modelled counter is the primary: unchanged.
    auto plain = gate_run("--fail-on-change '" + base + "' '" + more + "'");
    CHECK(plain.status == 0);
    CHECK_THAT(plain.out, ContainsSubstring("counter: instructions:u"));
    CHECK_THAT(plain.out, !ContainsSubstring("modelled:"));
    // ... and says so, in the text and the JSON: the modelled primary left out, and how to compare it.
    CHECK_THAT(plain.out, ContainsSubstring("left out: the profiles' primary counter L1-dcache-load-misses:u is "
                                            "modelled"));
    CHECK_THAT(plain.out, ContainsSubstring("(--counter L1-dcache-load-misses:u compares and gates it)"));
    auto left_out = gate_json("--fail-on-change '" + base + "' '" + more + "'", 0);
    const auto* skipped = left_out.find("modelled_primary_left_out");
    REQUIRE(skipped != nullptr);
    CHECK(skipped->find("counter")->string == "L1-dcache-load-misses:u");
    CHECK(skipped->find("compared_instead")->string == "instructions:u");
    CHECK(skipped->find("to_compare_it")->string == "--counter L1-dcache-load-misses:u");
    // Named: gated, and said; +5 % is under the default 10 %, +20 % is not.
    auto small = gate_run("--fail-on-change" + misses + " '" + base + "' '" + slight + "'");
    CHECK(small.status == 0);
    CHECK_THAT(small.out, ContainsSubstring("modelled: L1-dcache-load-misses:u is modelled by pmc's cache model"));
    CHECK_THAT(small.out, ContainsSubstring("not measured"));
    CHECK_THAT(small.out, ContainsSubstring("under the threshold 10%: does not fail"));
    auto large = gate_run("--fail-on-change" + misses + " '" + base + "' '" + more + "'");
    CHECK(large.status == 3);
    CHECK_THAT(large.out, ContainsSubstring("scan: changed by +2000"));
    // --threshold overrides the default, either way.
    CHECK(gate_run("--fail-on-change --threshold 0" + misses + " '" + base + "' '" + slight + "'").status == 3);
    CHECK(gate_run("--fail-on-change --threshold 30%" + misses + " '" + base + "' '" + more + "'").status == 0);
    auto j = gate_json("--fail-on-change" + misses + " '" + base + "' '" + slight + "'", 0);
    CHECK_THAT(j.find("modelled")->string, ContainsSubstring("the modelled counters' default"));
    REQUIRE(j.find("modelled_primary_left_out") != nullptr); // (asked for: not left out)
    CHECK(j.find("modelled_primary_left_out")->type == pmc::detail::JsonValue::Type::null);
    CHECK(j.find("gate")->find("threshold")->find("value")->number == 10);
    CHECK(gate_list(j, "under_threshold_labels") == std::vector<std::string>{"scan"});
    // A counted (not modelled) counter says nothing of a model.
    CHECK(gate_json("'" + base + "' '" + more + "' --counter instructions:u", 0).find("modelled") == nullptr);
}

TEST_CASE("pmc diff: a modelled change fails only above 10% and the floor (64 events or 0.1% of the run), so a moved "
          "heap passes and a doubled label fails") {
    TempDir dir;
    const std::string misses = " --counter L1-dcache-load-misses:u";
    // A small label that a moved heap shifts by a large share: 104 -> 120 misses (+15 %), 16 misses.
    const auto base = write_modelled(dir, "base.pmcprof", 104, 5000);
    const auto moved = write_modelled(dir, "moved.pmcprof", 120, 5000);
    auto passed = gate_run("--fail-on-change" + misses + " '" + base + "' '" + moved + "'");
    CHECK(passed.status == 0);
    CHECK_THAT(passed.out, ContainsSubstring("(under the modelled floor 64: does not fail; --threshold 0 fails any "
                                             "change)"));
    CHECK_THAT(passed.out, ContainsSubstring("at least 10% of the label's BASE value and at least 64 events"));
    // Doubled: a regression, above both.
    const auto doubled = write_modelled(dir, "doubled.pmcprof", 208, 5000);
    CHECK(gate_run("--fail-on-change" + misses + " '" + base + "' '" + doubled + "'").status == 3);
    // A large run (200,000 misses: a floor of 200): +150 passes by default; an explicit threshold replaces the rule.
    const auto large = write_modelled(dir, "large.pmcprof", 200000, 5000);
    const auto large_moved = write_modelled(dir, "large-moved.pmcprof", 200150, 5000);
    auto large_run = gate_run("--fail-on-change --threshold 0%" + misses + " '" + large + "' '" + large_moved + "'");
    CHECK(large_run.status == 3); // an explicit threshold replaces the floor
    CHECK(gate_run("--fail-on-change" + misses + " '" + large + "' '" + large_moved + "'").status == 0);
}

TEST_CASE("pmc diff: --threshold 0 gates a modelled figure exact by construction, below the floor (any change "
          "fails)") {
    // Per-thread branch misses of threads started in turn are the same in every run (docs/emulated-pmu.md,
    // Branches): a change of 2 is the program's, though under the default's floor of 64.
    TempDir dir;
    const auto base = write_modelled(dir, "base.pmcprof", 40, 5000, default_geometry, "branch-misses:u");
    const auto fewer = write_modelled(dir, "fewer.pmcprof", 38, 5000, default_geometry, "branch-misses:u");
    const std::string files = " --counter branch-misses:u '" + base + "' '" + fewer + "'";
    auto by_default = gate_run("--fail-on-change" + files);
    CHECK(by_default.status == 0);
    CHECK_THAT(by_default.out, ContainsSubstring("changed by -2 (under the modelled floor 64: does not fail; --threshold 0 "
                                                 "fails any change)"));
    CHECK_THAT(by_default.out, ContainsSubstring("which --threshold replaces: --threshold 0 fails any change"));
    auto any_change = gate_run("--fail-on-change --threshold 0" + files);
    CHECK(any_change.status == 3);
    CHECK_THAT(any_change.out, ContainsSubstring("any change failing (--threshold 0: no share, no floor)"));
    CHECK_THAT(any_change.out, !ContainsSubstring("under the modelled floor"));
    auto j = gate_json("--fail-on-change --threshold 0" + files, 3);
    CHECK(gate_list(j, "changed_labels") == std::vector<std::string>{"scan"});
    CHECK(j.find("gate")->find("threshold")->find("value")->number == 0);
    // The same with 0%, and the share alone (10%, no floor): -5 % passes, as by default.
    CHECK(gate_run("--fail-on-change --threshold 0%" + files).status == 3);
    CHECK(gate_run("--fail-on-change --threshold 10%" + files).status == 0);
    CHECK_THAT(pmc_test::run_command(tool() + " diff --help").out, ContainsSubstring("--threshold 0 fails any change"));
}

// ---- What the gate compares and refuses (review 40) ----------------------------------------------------------------

TEST_CASE("pmc diff and pmc aggregate: a modelled counter from two model configurations is refused (exit 4, both "
          "named) unless --any-emulator") {
    TempDir dir;
    const auto base = write_modelled(dir, "base.pmcprof", 10000, 5000);
    const auto same = write_modelled(dir, "same.pmcprof", 10000, 5000);
    const std::string misses = " --counter L1-dcache-load-misses:u";
    CHECK(gate_run("--fail-on-change" + misses + " '" + base + "' '" + same + "'").status == 0);
    // A smaller D1, an L2, strict inclusion: each a configuration of its own, even where the counts agree.
    for (const std::string geometry : {"I1 32768,8,64, D1 16384,4,64, LL 8388608,16,64",
                                       "I1 32768,8,64, D1 32768,8,64, L2 262144,8,64, LL 8388608,16,64",
                                       "I1 32768,8,64, D1 32768,8,64, LL 8388608,16,64, strict inclusion"}) {
        const auto other = write_modelled(dir, "other.pmcprof", 10000, 5000, geometry);
        auto r = gate_run("--fail-on-change" + misses + " '" + base + "' '" + other + "'");
        INFO(r.out);
        CHECK(r.status == 4);
        CHECK_THAT(r.out, ContainsSubstring("cannot judge: the profiles come from different model configurations "
                                            "(L1-dcache-load-misses:u)"));
        CHECK_THAT(r.out, ContainsSubstring("base.pmcprof: Cachegrind's cache model (" + std::string(default_geometry) +
                                            "; LRU, write-allocate)"));
        CHECK_THAT(r.out, ContainsSubstring("other.pmcprof: Cachegrind's cache model (" + geometry + "; LRU"));
        CHECK_THAT(r.out, ContainsSubstring("--any-emulator"));
        // Without a fail option too: the table would show the model's difference as the program's.
        CHECK(gate_run(misses.substr(1) + " '" + base + "' '" + other + "'").status == 4);
        auto anyway = gate_run("--fail-on-change --any-emulator" + misses + " '" + base + "' '" + other + "'");
        INFO(anyway.out);
        CHECK(anyway.status == 0);
        CHECK_THAT(anyway.out, ContainsSubstring("warning: the profiles come from different model configurations"));
        // The instructions are no model's: compared, whatever the geometry.
        CHECK(gate_run("--fail-on-change '" + base + "' '" + other + "'").status == 0);
        // pmc aggregate refuses such runs alike (their spread would be the models').
        auto aggregate = pmc_test::run_command(tool() + " aggregate --counter L1-dcache-load-misses:u '" + base + "' '" +
                                               same + "' '" + other + "' 2>&1");
        INFO(aggregate.out);
        CHECK(aggregate.status == 4);
        CHECK_THAT(aggregate.out, ContainsSubstring("refused: the runs come from different model configurations"));
        CHECK_THAT(aggregate.out, ContainsSubstring("--any-emulator"));
        CHECK(pmc_test::run_command(tool() + " aggregate --any-emulator --counter L1-dcache-load-misses:u '" + base +
                                    "' '" + other + "' >/dev/null 2>&1")
                  .status == 0);
        CHECK(pmc_test::run_command(tool() + " aggregate --counter instructions:u '" + base + "' '" + other +
                                    "' >/dev/null 2>&1")
                  .status == 0);
    }
}

TEST_CASE("pmc aggregate: runs from two emulators are refused (exit 4, both named) unless --any-emulator") {
    TempDir dir;
    auto under = [](const std::string& emulator) {
        return [emulator](pmc_test::ProfileBuilder& b) {
            b.emulator = emulator;
            compiler_run(b);
        };
    };
    const std::string q7 = write(dir, "q7.pmcprof", under("QEMU 7.2.13, plugin API 1"));
    const std::string q7b = write(dir, "q7b.pmcprof", under("QEMU 7.2.13, plugin API 1"));
    const std::string q10 = write(dir, "q10.pmcprof", under("QEMU 10.0.2, plugin API 2"));
    CHECK(pmc_test::run_command(tool() + " aggregate " + q7 + " " + q7b + " >/dev/null 2>&1").status == 0);
    auto r = pmc_test::run_command(tool() + " aggregate " + q7 + " " + q7b + " " + q10 + " 2>&1");
    INFO(r.out);
    CHECK(r.status == 4);
    CHECK_THAT(r.out, ContainsSubstring("refused: the runs come from different emulators or emulated CPUs"));
    CHECK_THAT(r.out, ContainsSubstring("QEMU 10.0.2, plugin API 2"));
    CHECK(pmc_test::run_command(tool() + " aggregate --any-emulator " + q7 + " " + q10 + " >/dev/null 2>&1").status == 0);
    // One emulator presenting two CPU models (pmc emulate's default model, or another): refused by both tools.
    const std::string haswell = write(dir, "haswell.pmcprof", [](pmc_test::ProfileBuilder& b) {
        b.emulator = "QEMU 7.2.13, plugin API 1";
        b.cpu = "emulated by QEMU's TCG (pmc emulate): the CPU model QEMU presents, Intel Haswell, not the host's";
        compiler_run(b);
    });
    for (const char* command : {" aggregate ", " diff --fail-on-change "}) {
        auto cpus = pmc_test::run_command(tool() + command + q7 + " " + haswell + " 2>&1");
        INFO(cpus.out);
        CHECK(cpus.status == 4);
        CHECK_THAT(cpus.out, ContainsSubstring("different emulators or emulated CPUs"));
        CHECK_THAT(cpus.out, ContainsSubstring("Intel Haswell"));
    }
}

TEST_CASE("pmc diff: profiles that record only modelled counters are not gated unless --counter names one (exit 4 "
          "asking for it, never said to be named)") {
    TempDir dir;
    const auto base = write_modelled(dir, "base.pmcprof", 10000, 0);
    const auto more = write_modelled(dir, "more.pmcprof", 12000, 0); // +20 %: a change the modelled rule fails
    auto refused = gate_run("--fail-on-change '" + base + "' '" + more + "'");
    INFO(refused.out);
    CHECK(refused.status == 4);
    CHECK_THAT(refused.out, !ContainsSubstring("--counter named it"));
    CHECK_THAT(refused.out, ContainsSubstring("not gated: a modelled counter is gated only when --counter names it"));
    CHECK_THAT(refused.out, ContainsSubstring("record only modelled counters (L1-dcache-load-misses:u), and no --counter "
                                              "named one"));
    CHECK_THAT(refused.out, ContainsSubstring("--counter L1-dcache-load-misses:u"));
    auto j = gate_json("--fail-on-change '" + base + "' '" + more + "'", 4);
    CHECK(j.find("gate")->find("verdict")->string == "cannot judge");
    CHECK(j.find("gate")->find("modelled_not_named")->string == "L1-dcache-load-misses:u");
    CHECK(gate_list(j, "changed_labels").empty());
    // Without a fail option: shown, status 0.
    CHECK(gate_run("'" + base + "' '" + more + "'").status == 0);
    // Named: gated by the modelled rule, and said to be named.
    auto named = gate_run("--fail-on-change --counter L1-dcache-load-misses '" + base + "' '" + more + "'");
    CHECK(named.status == 3);
    CHECK_THAT(named.out, ContainsSubstring("it is gated because --counter named it"));
}

TEST_CASE("pmc diff: a median of two runs is shown unrounded, so before, after and delta agree") {
    TempDir dir;
    // BASE 342 and 341 (median 341.5), NEW 343 and 343: the delta is +1.5, not "342 -> 343, +2".
    auto one_label = [&](const std::string& name, std::uint64_t self) {
        return write(dir, name, [&](pmc_test::ProfileBuilder& b) { b.thread(0, "main").scope("worker", self); });
    };
    const auto b1 = one_label("b1.pmcprof", 342), b2 = one_label("b2.pmcprof", 341);
    const auto a1 = one_label("a1.pmcprof", 343), a2 = one_label("a2.pmcprof", 343);
    auto r = gate_run("'" + b1 + "' '" + b2 + "' -- '" + a1 + "' '" + a2 + "'");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("341.5"));
    CHECK_THAT(r.out, ContainsSubstring("+1.5"));
    CHECK_THAT(r.out, !ContainsSubstring("+2 "));
}
