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

#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace pf = pmc::profile_format;

using pmc_test::TempDir;

std::string tool() { return PMC_TOOL_PATH; }

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
