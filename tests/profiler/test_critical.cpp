// SPDX-License-Identifier: MIT
// The synthetic-profile builder (tests/support/profile_builder.hpp) read back by the real reader, and `pmc critical`
// (tools/critical.cpp): the label graph, its edges' costs, frequencies and probabilities, the costliest path by its
// documented definition, recursion, threads, JSON, colour, and damaged files.
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
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

namespace pf = pmc::profile_format;

using pmc_test::TempDir;

std::uint64_t total(const pmc::Profile& p, const pmc::ProfileRecord& r, std::size_t c = 0) {
    return p.values[r.first_value + 2 * c + 1] - p.values[r.first_value + 2 * c];
}

} // namespace

TEST_CASE("profile builder: the real reader reads back its labels, nesting, values, threads and pages") {
    pmc_test::ProfileBuilder b({pmc_test::exact_counter(), pmc_test::time_counter()});
    b.page_records = 2; // several pages per thread, interleaved
    auto& main = b.thread(0, "main", 77);
    main.scope("compile", 5, [&] {
        main.scope("parse", 10);
        main.advance(7, 1); // the second counter only
        main.scope("typeck", 20, [&] { main.scope("parse", 3); });
        main.instant("cache-hit", "key");
        main.integer("size", 1234);
    });
    auto& worker = b.thread(1, "worker");
    worker.scope("parse", 9);
    const auto bytes = b.bytes();
    auto read = pmc::parse_profile(bytes.data(), bytes.size());
    REQUIRE(read.ok());
    const pmc::Profile& p = *read;
    CHECK(p.problems.empty());
    CHECK(p.bytes_lost == 0);
    REQUIRE(p.counters.size() == 2);
    CHECK(p.counters[0].name == "page-faults");
    CHECK(p.counters[0].exact());
    CHECK(p.counters[1].unit == "ns");
    CHECK(!p.counters[1].exact());
    REQUIRE(p.threads.size() == 2);
    CHECK(p.threads[0].name == "main");
    CHECK(p.threads[0].tid == 77);
    CHECK(p.threads[0].pages == 3); // 6 records, 2 a page
    CHECK(p.threads[1].name == "worker");
    const auto& r = p.threads[0].records;
    REQUIRE(r.size() == 6);
    const std::vector<std::string> labels{"parse", "parse", "typeck", "cache-hit", "size", "compile"};
    const std::vector<std::uint32_t> depths{1, 2, 1, 1, 1, 0};
    for (std::size_t i = 0; i < r.size(); ++i) {
        CHECK(p.string(r[i].label) == labels[i]);
        CHECK(r[i].depth == depths[i]);
    }
    CHECK(total(p, r[0]) == 10);
    CHECK(total(p, r[1]) == 3);
    CHECK(total(p, r[2]) == 23);
    CHECK(total(p, r[5]) == 38);
    CHECK(total(p, r[5], 1) == 7);
    CHECK(total(p, r[2], 1) == 0);
    CHECK(r[3].kind == pf::RecordKind::instant);
    CHECK(p.string(r[3].arg) == "key");
    CHECK(r[4].kind == pf::RecordKind::integer);
    CHECK(p.values[r[4].first_value + 1] == 1234);
    REQUIRE(p.threads[1].records.size() == 1);
    CHECK(total(p, p.threads[1].records[0]) == 9);
    // Byte-identical run to run (fixed start time, pid, string order): tests may compare files.
    CHECK(b.bytes() == bytes);
}

namespace {

using pmc_test::tool;

/// `text` with every run of spaces made one: table rows compared without their column widths.
std::string squeeze(const std::string& text) {
    std::string out;
    for (char ch : text)
        if (ch != ' ' || (!out.empty() && out.back() != ' ' && out.back() != '\n')) out += ch;
    return out;
}

/// The command's stdout and stderr together (spaces squeezed), and its exit status.
pmc_test::CommandResult critical(const std::string& args) {
    auto r = pmc_test::run_command("'" + tool() + "' critical " + args + " 2>&1");
    r.out = squeeze(r.out);
    return r;
}

/// One main call: A twice (each 5 of its own, x 10, y 10: A costs 50 in all) and B four times (1 of its own; C
/// twice in the first call, once in the second, never in the others; each C holds a D). Greedy takes main > A (50
/// beats B's 44) and ends at x or y with 20; the chain main > B > C > D carries 40 to its end.
void greedy_trap(pmc_test::ProfileBuilder& b, std::uint32_t thread = 0) {
    auto& t = b.thread(thread, "main");
    t.scope("main", 0, [&] {
        for (int i = 0; i < 2; ++i)
            t.scope("A", 5, [&] {
                t.scope("x", 10);
                t.scope("y", 10);
            });
        t.scope("B", 1, [&] {
            t.scope("C", 0, [&] { t.scope("D", 10); });
            t.scope("C", 0, [&] { t.scope("D", 10); });
        });
        t.scope("B", 1, [&] { t.scope("C", 0, [&] { t.scope("D", 20); }); });
        t.scope("B", 1);
        t.scope("B", 1);
    });
}

} // namespace

TEST_CASE("pmc critical: the chain that carries the most cost to its end, not the greedy one, with its numbers") {
    TempDir dir;
    pmc_test::ProfileBuilder b;
    greedy_trap(b);
    const std::string file = dir.file("trap.pmcprof");
    REQUIRE(b.write(file));
    const auto r = critical("'" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("path: main > B > C > D\n"));
    CHECK_THAT(r.out, ContainsSubstring("costliest path: 40 page-faults spent in D's own code at the end of this chain (42.55% of its root's 94)"));
    CHECK_THAT(r.out, ContainsSubstring("exact: the same program and input give this path on every run"));
    // Each step: cost, share of the root, share of the label, frequency, per parent call, probability.
    CHECK_THAT(r.out, ContainsSubstring("\nmain 94 100.00% 100.00% 1 (root)\n"));
    CHECK_THAT(r.out, ContainsSubstring("\nB 44 46.81% 100.00% 4 4.00 100.00%\n"));
    CHECK_THAT(r.out, ContainsSubstring("\nC 40 42.55% 100.00% 3 0.75 50.00%\n"));
    CHECK_THAT(r.out, ContainsSubstring("\nD 40 42.55% 100.00% 3 1.00 100.00% (sink: its own self value 40)\n"));

    const auto j = pmc_test::run_command("'" + tool() + "' critical --json '" + file + "'");
    REQUIRE(j.status == 0);
    CHECK(pmc_test::JsonCheck::valid(j.out));
    CHECK_THAT(j.out, ContainsSubstring(R"("text":"main > B > C > D")"));
    CHECK_THAT(j.out, ContainsSubstring(R"("bottleneck":40,)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("parent":"B","child":"C","cost":40,"frequency":3,"per_parent_call":0.75,"parent_calls_with":2,"parent_calls":4,"probability":0.5,)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("parent":"main","child":"A","cost":50,"frequency":2,)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("parent":"A","child":"x","cost":20,"frequency":2,"per_parent_call":1,"parent_calls_with":2,"parent_calls":2,"probability":1,)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("label":"main","calls":1,"top_level_calls":1,"cost":94,"self":0,"root":true,"sink":false)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("label":"D","calls":3,"top_level_calls":0,"cost":40,"self":40,"root":false,"sink":true)"));
}

TEST_CASE("pmc critical: the path's value is its smallest step, not the sum of its steps") {
    // main > X carries 90 to its end; main > Y > Z > W carries 50 through three steps (150 summed).
    TempDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0);
    t.scope("main", 0, [&] {
        t.scope("X", 90);
        t.scope("Y", 0, [&] { t.scope("Z", 0, [&] { t.scope("W", 50); }); });
    });
    const std::string file = dir.file("sum.pmcprof");
    REQUIRE(b.write(file));
    const auto r = critical("'" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("path: main > X\n"));
}

TEST_CASE("pmc critical: a path ends where the cost is: a label's own self value is a sink") {
    // An interpreter-shaped profile: "eval" spends 335 in its own code and calls one cheap "lookup" (49). The old
    // path had to end at a label without children: main > eval > lookup, at 49.
    TempDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0);
    t.scope("main", 1, [&] { t.scope("eval", 335, [&] { t.scope("lookup", 49); }); });
    const std::string file = dir.file("self.pmcprof");
    REQUIRE(b.write(file));
    const auto r = critical("'" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("path: main > eval\n"));
    CHECK_THAT(r.out, ContainsSubstring("costliest path: 335 page-faults spent in eval's own code"));
    CHECK_THAT(r.out, ContainsSubstring("(sink: its own self value 335)"));
}

TEST_CASE("pmc critical: a path starts at any label outermost on some thread, only chains that ran, no share above 100 %") {
    // W > X on thread 0 (X cheap there); X > Y on thread 1, where X is outermost. The label graph's W > X > Y never
    // ran (X never held a Y under W); the old tool reported it, Y's 1000 at 50000 % of W's 2.
    TempDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0, "one");
    t.scope("W", 1, [&] { t.scope("X", 1); });
    auto& u = b.thread(1, "two");
    u.scope("X", 0, [&] { u.scope("Y", 1000); });
    const std::string file = dir.file("roots.pmcprof");
    REQUIRE(b.write(file));
    const auto r = critical("'" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("path: X > Y\n"));
    CHECK_THAT(r.out, ContainsSubstring("\nX 1000 100.00%"));
    // Every share printed is at most 100 %.
    for (std::size_t at = r.out.find('%'); at != std::string::npos; at = r.out.find('%', at + 1)) {
        std::size_t from = at;
        while (from > 0 && (std::isdigit(static_cast<unsigned char>(r.out[from - 1])) || r.out[from - 1] == '.')) --from;
        if (from == at) continue;
        INFO(r.out.substr(from, at - from + 1));
        CHECK(std::stod(r.out.substr(from, at - from)) <= 100.0);
    }
    const auto j = pmc_test::run_command("'" + tool() + "' critical --json '" + file + "'");
    REQUIRE(j.status == 0);
    CHECK_THAT(j.out, ContainsSubstring(R"("label":"X","calls":2,"top_level_calls":1,"cost":1001,"self":1,"root":true,)"));
}

TEST_CASE("pmc critical: recursion, direct and through another label, is counted once and said") {
    TempDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0);
    t.scope("main", 0, [&] {
        // expand inside expand inside expand: 3 in all, not 3 + 2 + 1.
        t.scope("expand", 1, [&] { t.scope("expand", 1, [&] { t.scope("expand", 1); }); });
        // a > b > a: the inner a's 5 are inside the outer a's 7 already.
        t.scope("a", 1, [&] { t.scope("b", 1, [&] { t.scope("a", 5); }); });
    });
    const std::string file = dir.file("recursion.pmcprof");
    REQUIRE(b.write(file));
    const auto r = critical("'" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("recursion: expand -> expand (2 nested calls; its value counted once, in the outermost call)"));
    CHECK_THAT(r.out, ContainsSubstring("recursion: a -> b -> a (1 nested call;"));
    // The inner a's 5 are spent in a's own code, inside b, inside the outer a: a chain that ran.
    CHECK_THAT(r.out, ContainsSubstring("path: main > a > b > a\n"));
    const auto j = pmc_test::run_command("'" + tool() + "' critical --json '" + file + "'");
    REQUIRE(j.status == 0);
    CHECK(pmc_test::JsonCheck::valid(j.out));
    CHECK_THAT(j.out, ContainsSubstring(R"("label":"expand","calls":3,"top_level_calls":0,"cost":3,)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("label":"a","calls":2,"top_level_calls":0,"cost":7,)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("parent":"b","child":"a","cost":0,"frequency":0,)"));
    CHECK_THAT(j.out, ContainsSubstring(R"("recursive":1,"closes_cycle":false,"recursion":"a -> b -> a")"));
    CHECK_THAT(j.out, ContainsSubstring(R"("label":"main","calls":1,"top_level_calls":1,"cost":10,)"));
}

TEST_CASE("pmc critical: a cycle without recursion (each label inside the other in different calls) is broken and said") {
    TempDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0);
    t.scope("a", 1, [&] { t.scope("b", 4); });
    t.scope("b", 1, [&] { t.scope("a", 2); });
    const std::string file = dir.file("cycle.pmcprof");
    REQUIRE(b.write(file));
    const auto r = critical("'" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("cycle: b -> a closes a cycle without recursion"));
    CHECK_THAT(r.out, ContainsSubstring("path: a > b\n"));
}

TEST_CASE("pmc critical: the same path and output whatever the label ids, thread numbers, call order and pages") {
    // Two chains that tie (main > P > Q and main > R > S, 30 each): the tie goes to the larger step, then the name.
    auto build = [](pmc_test::ProfileBuilder& b, std::uint32_t first, std::uint32_t second, bool reverse) {
        if (reverse)
            for (const char* s : {"S", "R", "Q", "P", "main", "other"}) b.id(s);
        auto& t = b.thread(first, "one");
        t.scope("main", 0, [&] {
            for (int i = 0; i < 2; ++i)
                if ((i == 0) == reverse) t.scope("R", 0, [&] { t.scope("S", 30); });
                else t.scope("P", 0, [&] { t.scope("Q", 30); });
        });
        auto& u = b.thread(second, "two");
        u.scope("other", 3);
    };
    TempDir dir;
    pmc_test::ProfileBuilder one, two;
    build(one, 0, 1, false);
    build(two, 5, 2, true);
    two.page_records = 1;
    REQUIRE(one.write(dir.file("one.pmcprof")));
    REQUIRE(two.write(dir.file("two.pmcprof")));
    const auto a = pmc_test::run_command("cd '" + dir.path + "' && '" + tool() + "' critical --graph one.pmcprof");
    const auto b = pmc_test::run_command("cd '" + dir.path + "' && '" + tool() + "' critical --graph two.pmcprof");
    INFO(a.out);
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK_THAT(a.out, ContainsSubstring("path: main > P > Q\n"));
    CHECK(a.out.substr(a.out.find('\n')) == b.out.substr(b.out.find('\n'))); // all but the file name
    CHECK(pmc_test::run_command("cd '" + dir.path + "' && '" + tool() + "' critical --graph one.pmcprof").out == a.out);
}

TEST_CASE("summarize and critical --thread: a number stays a number, a name shared by threads is told apart by place") {
    TempDir dir;
    pmc_test::ProfileBuilder b({pmc_test::exact_counter()});
    b.thread(3, "worker").scope("first", 1);
    b.thread(5, "worker").scope("second", 2);
    b.thread(7, "9").scope("numbered", 3); // a thread whose name is digits
    const std::string file = dir.file("names.pmcprof");
    REQUIRE(b.write(file));
    for (const std::string tool_name : {"critical", "summarize"}) {
        auto run = [&](const std::string& args) {
            return pmc_test::run_command(tool() + " " + tool_name + " " + args + " '" + file + "' 2>&1");
        };
        INFO(tool_name);
        auto shared = run("--thread worker");
        CHECK(shared.status == 1);
        CHECK_THAT(shared.out, ContainsSubstring("has 2 threads named 'worker': worker#1 (3), worker#2 (5); give one "
                                                 "of these names or numbers"));
        auto second = run("--thread worker#2");
        CHECK(second.status == 0);
        CHECK_THAT(second.out, ContainsSubstring("thread 5 only"));
        CHECK_THAT(second.out, ContainsSubstring("second"));
        CHECK(second.out.find("first") == std::string::npos);
        CHECK_THAT(run("--thread 7").out, ContainsSubstring("thread 7 only")); // the number, not the thread named 7
        auto nine = run("--thread 9");
        CHECK(nine.status == 1);
        CHECK_THAT(nine.out, ContainsSubstring("has no thread 9 (it has 3); its threads: 3 \"worker\", 5 \"worker\", "
                                               "7 \"9\""));
        CHECK(run("--thread worker#3").status == 1);
        CHECK(run("--per-thread --thread worker#1").status == 1);
        // NAME#1 names a thread whose name is its own too (a script that always writes #1 keeps working).
        auto unique = run("--thread 9#1");
        CHECK(unique.status == 0);
        CHECK_THAT(unique.out, ContainsSubstring("thread 7 only"));
        CHECK(run("--thread 9#2").status == 1);
    }
}

TEST_CASE("pmc critical: per thread, one thread, another counter") {
    TempDir dir;
    pmc_test::ProfileBuilder b({pmc_test::exact_counter("page-faults"), pmc_test::exact_counter("minor-faults")});
    greedy_trap(b, 0);
    auto& w = b.thread(1, "worker");
    w.scope("job", 1, [&] {
        w.scope("light", 2);
        w.begin("heavy").advance(1).advance(500, 1).end(); // heavy in minor-faults only
    });
    const std::string file = dir.file("threads.pmcprof");
    REQUIRE(b.write(file));
    auto r = critical("'" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("all 2 threads together"));
    CHECK_THAT(r.out, ContainsSubstring("path: main > B > C > D\n"));
    r = critical("--per-thread '" + file + "'");
    CHECK_THAT(r.out, ContainsSubstring("== thread 0 \"main\""));
    CHECK_THAT(r.out, ContainsSubstring("path: main > B > C > D\n"));
    CHECK_THAT(r.out, ContainsSubstring("== thread 1 \"worker\""));
    CHECK_THAT(r.out, ContainsSubstring("path: job > light\n"));
    r = critical("--thread 1 '" + file + "'");
    CHECK_THAT(r.out, ContainsSubstring("thread 1 only"));
    CHECK_THAT(r.out, ContainsSubstring("path: job > light\n"));
    CHECK(r.out.find("main") == std::string::npos);
    r = critical("--counter minor-faults '" + file + "'");
    CHECK_THAT(r.out, ContainsSubstring("counter minor-faults"));
    CHECK_THAT(r.out, ContainsSubstring("path: job > heavy\n"));
    const auto j = pmc_test::run_command("'" + tool() + "' critical --json --per-thread '" + file + "'");
    REQUIRE(j.status == 0);
    CHECK(pmc_test::JsonCheck::valid(j.out));
    CHECK_THAT(j.out, ContainsSubstring(R"("thread":1,)"));
    // Mistakes: what is wrong and what exists.
    r = critical("--counter cycles '" + file + "'");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, ContainsSubstring("recorded no counter 'cycles'; it has: page-faults, minor-faults"));
    r = critical("--thread 9 '" + file + "'");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, ContainsSubstring("has no thread 9 (it has 2); its threads: 0 \"main\", 1 \"worker\""));
    // --thread NAME: the thread with that name (numbers follow registration order, which changes between runs).
    for (const char* tool_name : {"critical", "summarize"}) {
        auto by_name = pmc_test::run_command(tool() + " " + tool_name + " --thread worker '" + file + "' 2>&1");
        INFO(tool_name << ": " << by_name.out);
        CHECK(by_name.status == 0);
        CHECK_THAT(by_name.out, ContainsSubstring("thread 1 only"));
        CHECK(by_name.out == pmc_test::run_command(tool() + " " + tool_name + " --thread 1 '" + file + "' 2>&1").out);
        auto unknown = pmc_test::run_command(tool() + " " + tool_name + " --thread parser '" + file + "' 2>&1");
        CHECK(unknown.status == 1);
        CHECK_THAT(unknown.out, ContainsSubstring("has no thread named 'parser' (it has 2); its threads: 0 \"main\", 1 "
                                                  "\"worker\""));
        CHECK_THAT(pmc_test::run_command(tool() + " " + tool_name + " --help").out, ContainsSubstring("--thread N|NAME"));
    }
    CHECK(critical("--per-thread --thread 1 '" + file + "'").status == 1);
    CHECK(critical("--bogus '" + file + "'").status == 1);
    CHECK(critical("").status == 1);
    CHECK(critical("--color sometimes '" + file + "'").status == 1);
    r = critical("'" + dir.file("absent.pmcprof") + "'");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, ContainsSubstring("cannot open profile"));
    CHECK_THAT(r.out, ContainsSubstring("No such file or directory"));
    r = critical("--help");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("The costliest path ends where the cost is"));
    CHECK(pmc_test::run_command("'" + tool() + "' help critical").out == pmc_test::run_command("'" + tool() + "' critical --help").out);
}

TEST_CASE("pmc critical --expect-path: 0 when the path is the one given, 3 (both said) when not") {
    TempDir dir;
    pmc_test::ProfileBuilder b({pmc_test::exact_counter("page-faults")});
    greedy_trap(b, 0);
    b.thread(1, "worker").scope("job", 1, [&] { b.thread(1).scope("light", 2); });
    const std::string file = dir.file("trap.pmcprof");
    REQUIRE(b.write(file));
    auto r = critical("--expect-path 'main > B > C > D' '" + file + "'");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("path: main > B > C > D\n"));
    CHECK(critical("--expect-path 'main;B;C;D' '" + file + "'").status == 0);
    CHECK(critical("--json --expect-path 'main;B;C;D' '" + file + "'").status == 0);
    CHECK(critical("--thread 1 --expect-path 'job > light' '" + file + "'").status == 0);
    r = critical("--expect-path 'main > A > A1' '" + file + "'");
    CHECK(r.status == 3);
    CHECK_THAT(r.out, ContainsSubstring("the costliest path is \"main > B > C > D\", not the expected \"main > A > A1\""));
    CHECK(critical("--json --expect-path 'main;B' '" + file + "'").status == 3);
    // '/' is no separator (a label may contain it): the message shows the forms, with the path in one of them.
    r = critical("--expect-path 'main/B/C/D' '" + file + "'");
    CHECK(r.status == 3);
    CHECK_THAT(r.out, ContainsSubstring("a '/' does not separate labels (a label may contain it): join them by \" > \" "
                                        "as printed, or by ';', e.g. --expect-path 'main > B > C > D'"));
    // One path is checked: --per-thread has several.
    r = critical("--per-thread --expect-path 'main;B;C;D' '" + file + "'");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, ContainsSubstring("--expect-path checks one path"));
    CHECK(critical("--expect-path").status == 1);
    CHECK_THAT(critical("--help").out, ContainsSubstring("--expect-path PATH"));
}

TEST_CASE("pmc critical --json states --expect-path's verdict beside the path, and the exit status") {
    TempDir dir;
    pmc_test::ProfileBuilder b({pmc_test::exact_counter("page-faults")});
    b.page_records = 3;
    greedy_trap(b, 0);
    b.thread(1, "worker").scope("job", 1, [&] { b.thread(1).scope("light", 2); });
    const std::string file = dir.file("trap.pmcprof");
    REQUIRE(b.write(file));
    auto json = [&](const std::string& args, const std::string& on = "") {
        auto r = pmc_test::run_command("'" + tool() + "' critical --json " + args + " '" + (on.empty() ? file : on) +
                                       "' 2>/dev/null"); // stdout: the JSON alone
        INFO(args << "\n" << r.out);
        CHECK(pmc_test::JsonCheck::valid(r.out));
        return r;
    };
    auto r = json("--expect-path 'main;B;C;D'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring(
        R"("gate":{"expect_path":"main > B > C > D","path":"main > B > C > D","verdict":"same","exit_status":0})"));
    r = json("--expect-path 'main > B'");
    CHECK(r.status == 3);
    CHECK_THAT(r.out, ContainsSubstring(
        R"("gate":{"expect_path":"main > B","path":"main > B > C > D","verdict":"differs","exit_status":3})"));
    r = json("--thread 1 --expect-path 'job > light'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out,
               ContainsSubstring(R"("gate":{"expect_path":"job > light","path":"job > light","verdict":"same","exit_status":0})"));
    r = json("");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring(
        R"("gate":{"expect_path":null,"path":"main > B > C > D","verdict":"no path expected","exit_status":0})"));
    r = json("--per-thread");
    CHECK(r.status == 0);
    CHECK_THAT(r.out,
               ContainsSubstring(R"("gate":{"expect_path":null,"path":null,"verdict":"no path expected","exit_status":0})"));
    // A damaged file: not judged, status 2 (before 3).
    auto bytes = b.bytes();
    bytes.resize(bytes.size() - 5);
    const std::string cut = dir.file("cut.pmcprof");
    std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    r = json("--expect-path 'main > B'", cut);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, ContainsSubstring(R"("verdict":"not judged","exit_status":2})"));
    CHECK_THAT(critical("--help").out, ContainsSubstring("\"gate\""));
}

TEST_CASE("pmc critical: colour on a terminal only, and never with NO_COLOR") {
    TempDir dir;
    pmc_test::ProfileBuilder b;
    greedy_trap(b);
    const std::string file = dir.file("colour.pmcprof");
    REQUIRE(b.write(file));
    const std::string esc = "\x1b[";
    const std::string cmd = "'" + tool() + "' critical ";
    CHECK(pmc_test::run_command("NO_COLOR= " + cmd + "'" + file + "'").out.find(esc) == std::string::npos); // a pipe
    CHECK(pmc_test::run_command(cmd + "--color always '" + file + "'").out.find(esc) != std::string::npos);
    CHECK(pmc_test::run_command(cmd + "--color=never '" + file + "'").out.find(esc) == std::string::npos);
    if (pmc_test::run_command("command -v script").status != 0) PMC_SKIP("no 'script' (util-linux) to run pmc on a terminal");
    // script(1) gives the command a pseudo-terminal.
    const auto tty = pmc_test::run_command("NO_COLOR= script -qec \"" + cmd + "'" + file + "'\" /dev/null");
    CHECK(tty.out.find(esc) != std::string::npos);
    const auto no = pmc_test::run_command("NO_COLOR=1 script -qec \"" + cmd + "'" + file + "'\" /dev/null");
    CHECK_THAT(no.out, ContainsSubstring("path: main > B > C > D"));
    CHECK(no.out.find(esc) == std::string::npos);
}

TEST_CASE("pmc critical: scopes whose enclosing scopes are not in the file go under the nearest found, and it is said") {
    TempDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0);
    t.raw_interval("lost-child", 2, {1000, 1010}); // its parent at depth 1 is missing
    t.raw_interval("top", 0, {1000, 1020});
    t.raw_interval("open-child", 1, {1020, 1025}); // its parent never ended
    const std::string file = dir.file("orphans.pmcprof");
    REQUIRE(b.write(file));
    const auto r = critical("--json '" + file + "'");
    INFO(r.out);
    REQUIRE(r.status == 2); // not whole: "open-child"'s enclosing scope never ended
    CHECK_THAT(r.out, ContainsSubstring(R"("orphans":2,)"));
    CHECK_THAT(r.out, ContainsSubstring(R"("open_scopes":[{"thread":0,"open_depth":1,"scopes_counted_outermost":1,"scopes_with_lost_middle":1,"open_labels":null}])"));
    CHECK_THAT(r.out, ContainsSubstring("is not whole: scopes were still open when the program stopped"));
    CHECK_THAT(r.out, ContainsSubstring(R"("label":"lost-child","calls":1,"top_level_calls":0,"cost":10,)"));
    CHECK_THAT(r.out, ContainsSubstring(R"("label":"open-child","calls":1,"top_level_calls":1,"cost":5,)"));
    CHECK_THAT(r.out, ContainsSubstring(R"("text":"top > lost-child")"));
    const auto text = critical("'" + file + "'");
    CHECK(text.status == 2);
    CHECK_THAT(text.out, ContainsSubstring("2 calls whose enclosing scopes are not all in the file"));
    CHECK_THAT(text.out, ContainsSubstring("thread 0: 1 scope had not ended when its last page was written"));
    // --expect-path on such a file: not judged, never 0.
    CHECK(critical("--expect-path 'top > lost-child' '" + file + "'").status == 2);
}

TEST_CASE("pmc critical: a file cut at every length or with flipped bytes: a clear message and status, no crash") {
    TempDir dir;
    // Small (every length is a process run) but with all it can hold: two counters, two threads, three pages of
    // one thread, recursion, an instant and an integer event.
    pmc_test::ProfileBuilder b({pmc_test::exact_counter(), pmc_test::time_counter()});
    b.page_records = 3;
    auto& t = b.thread(0, "m");
    t.scope("a", 1, [&] {
        t.scope("b", 2, [&] { t.scope("a", 1); });
        t.instant("h");
        t.scope("c", 4);
        t.integer("n", 7);
    });
    b.thread(1, "w").scope("c", 3, [&] { b.thread(1).scope("b", 1); });
    const auto bytes = b.bytes();
    REQUIRE(b.write(dir.file("whole.pmcprof")));
    // One shell runs every case (a process per case, pmc's alone: the messages are looked for by the shell's own
    // read and case, not by a grep per case): it prints "N STATUS" and, where the expected message is missing,
    // "NOMSG N".
    auto run_all = [&](const std::string& pattern) {
        return pmc_test::run_command(
            "has() { while IFS= read -r l || [ -n \"$l\" ]; do case $l in *\"$2\"*) return 0 ;; esac; done <\"$1\"; "
            "return 1; }; cd '" + dir.path + "' && for f in " + pattern + "; do '" + tool() +
            "' critical \"$f\" >out 2>err; s=$?; echo \"$f $s\"; "
            "if [ $s = 1 ]; then has err 'not a readable pmc profile' || echo \"NOMSG $f\"; "
            "elif [ $s = 2 ]; then { has err 'is incomplete' || has err 'is not whole'; } && has out path || "
            "echo \"NOMSG $f\"; fi; done");
    };
    // Where the header and each page end, from the format's own length fields: a cut there loses whole pages and
    // the end record, which format version 2 always notices (status 2, as for any other cut; 0 only for the whole).
    std::vector<std::size_t> ends;
    std::uint32_t header = 0;
    std::memcpy(&header, bytes.data() + 12, 4);
    for (std::size_t at = header; at <= bytes.size();) {
        ends.push_back(at);
        if (at == bytes.size()) break;
        std::uint32_t payload = 0;
        std::memcpy(&payload, bytes.data() + at + 16, 4);
        at += pf::page_header_bytes + payload;
    }
    REQUIRE(ends.size() > 6);
    // Every cut length (sanitized: one in 6, and every length next to the header's and each page's end).
    const std::size_t stride = pmc_test::one_in_sanitized(6);
    std::size_t cuts = 0;
    for (std::size_t n = 0; n <= bytes.size(); ++n) {
        const bool near_end = std::any_of(ends.begin(), ends.end(), [&](std::size_t e) { return n + 1 >= e && n <= e + 1; });
        if (n % stride != 0 && !near_end) continue;
        std::FILE* f = std::fopen(dir.file("cut-" + std::to_string(n)).c_str(), "wb");
        REQUIRE(f);
        std::fwrite(bytes.data(), 1, n, f);
        std::fclose(f);
        ++cuts;
    }
    auto r = run_all("cut-*");
    REQUIRE(!r.out.empty());
    std::size_t ran = 0, unreadable = 0, partial = 0;
    for (std::size_t at = 0; at < r.out.size();) {
        const std::size_t nl = r.out.find('\n', at);
        const std::string line = r.out.substr(at, nl - at);
        at = nl == std::string::npos ? r.out.size() : nl + 1;
        INFO(line);
        CHECK(line.rfind("NOMSG", 0) != 0);
        if (line.rfind("NOMSG", 0) == 0) continue;
        const std::size_t sp = line.find(' '), sp2 = line.find(' ', sp + 1);
        const std::string status = line.substr(sp + 1, sp2 - sp - 1);
        const std::size_t n = std::stoul(line.substr(4, sp - 4));
        const bool at_end = n == bytes.size();
        CHECK(status == (at_end ? "0" : n < header ? "1" : "2")); // never a signal (128+)
        ++ran;
        unreadable += status == "1";
        partial += status == "2";
    }
    CHECK(ran == cuts);
    CHECK(partial > cuts / 2); // most cuts keep a readable part
    CHECK(unreadable > 0);
    CHECK(critical("'" + dir.file("whole.pmcprof") + "'").status == 0);
    // Flipped bytes: a random byte of the file set to a random other value, 300 times (seeded: reproducible).
    // (Sanitized: 60 of them.)
    std::mt19937 rng(1234);
    std::size_t flipped = 0;
    for (std::size_t i = 0; i < 300; i += pmc_test::one_in_sanitized(5), ++flipped) {
        auto copy = bytes;
        const std::size_t at = std::uniform_int_distribution<std::size_t>(0, copy.size() - 1)(rng);
        copy[at] = static_cast<unsigned char>(copy[at] ^ std::uniform_int_distribution<int>(1, 255)(rng));
        std::FILE* f = std::fopen(dir.file("flip-" + std::to_string(i)).c_str(), "wb");
        REQUIRE(f);
        std::fwrite(copy.data(), 1, copy.size(), f);
        std::fclose(f);
    }
    r = run_all("flip-*");
    std::size_t flips = 0;
    for (std::size_t at = 0; at < r.out.size();) {
        const std::size_t nl = r.out.find('\n', at);
        const std::string line = r.out.substr(at, nl - at);
        at = nl == std::string::npos ? r.out.size() : nl + 1;
        INFO(line);
        CHECK(line.rfind("NOMSG", 0) != 0);
        if (line.rfind("NOMSG", 0) == 0) continue;
        const std::size_t sp = line.find(' ');
        const std::string status = line.substr(sp + 1, line.find(' ', sp + 1) - sp - 1);
        CHECK((status == "1" || status == "2")); // every flip is noticed (the header and pages are checksummed)
        ++flips;
    }
    CHECK(flips == flipped);
}
