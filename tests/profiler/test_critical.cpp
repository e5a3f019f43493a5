// The synthetic-profile builder (tests/support/profile_builder.hpp) read back by the real reader, and `pmc critical`
// (tools/critical.cpp): the label graph, its edges' costs, frequencies and probabilities, the costliest path by its
// documented definition, recursion, threads, JSON, colour, and damaged files.
#include <pmc/profile_format.hpp>

#include "catch.hpp"
#include "command.hpp"
#include "json_check.hpp"
#include "profile_builder.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

namespace pf = pmc::profile_format;

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/pmc-critical-test-XXXXXX";
        const char* p = ::mkdtemp(tmpl);
        REQUIRE(p != nullptr);
        path = p;
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
    std::string file(const std::string& name) const { return path + "/" + name; }
};

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
    const std::vector<int> depths{1, 2, 1, 1, 1, 0};
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

std::string tool() { return PMC_TOOL_PATH; }

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
    CHECK_THAT(r.out, ContainsSubstring("costliest path: 40 page-faults reaches the end of this chain (42.55% of its root's 94)"));
    CHECK_THAT(r.out, ContainsSubstring("exact: the same program and input give this path on every run"));
    // Each step: cost, share of the root, share of the label, frequency, per parent call, probability.
    CHECK_THAT(r.out, ContainsSubstring("\nmain 94 100.00% 100.00% 1 (root)\n"));
    CHECK_THAT(r.out, ContainsSubstring("\nB 44 46.81% 100.00% 4 4.00 100.00%\n"));
    CHECK_THAT(r.out, ContainsSubstring("\nC 40 42.55% 100.00% 3 0.75 50.00%\n"));
    CHECK_THAT(r.out, ContainsSubstring("\nD 40 42.55% 100.00% 3 1.00 100.00% (sink)\n"));

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
