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
