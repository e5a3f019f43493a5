// SPDX-License-Identifier: MIT
// Latency buckets (pmc/latency_buckets.hpp): edges from the levels of a measured latency curve (two latency.json
// files pmc-mem-latency wrote on one of our VMs: a sweep that reached memory, and a short one that stopped at L3),
// edges given by the user, and malformed input (a clear error, never a crash).
#include "catch.hpp"

#include <pmc/latency_buckets.hpp>

#include <cmath>
#include <random>
#include <string>

namespace {
std::string data(const char* name) { return std::string(PMC_TEST_DATA_DIR) + "/" + name; }
} // namespace

TEST_CASE("buckets from a curve that reached memory: one per level, edges between plateaus", "[buckets]") {
    auto curve = pmc::read_latency_curve(data("latency-to-memory.json"));
    REQUIRE(curve.ok());
    REQUIRE(curve->levels.size() == 4);
    CHECK(curve->reaches_memory);
    CHECK_FALSE(curve->cycles_per_ns); // that run had no cycles counter
    CHECK(curve->levels[0].first_size_bytes == 512);
    CHECK(curve->levels[0].last_size_bytes > curve->levels[0].first_size_bytes);
    auto b = pmc::LatencyBuckets::try_from_curve(*curve);
    REQUIRE(b.ok());
    const auto& k = b->buckets();
    REQUIRE(k.size() == 4);
    CHECK(k[0].label == "L1");
    CHECK(k[1].label == "L2");
    CHECK(k[2].label == "L3");
    CHECK(k[3].label == "memory (DRAM)");
    CHECK(b->unit() == "ns");
    CHECK(k[0].from == 0);
    // The edge between two levels is the geometric mean of their plateaus (read from the file, not a table).
    const auto& lv = curve->levels;
    CHECK(k[0].to == Approx(std::sqrt(lv[0].latency_ns * lv[1].latency_ns)));
    CHECK(k[1].from == k[0].to);
    CHECK(k[2].to == Approx(std::sqrt(lv[2].latency_ns * lv[3].latency_ns)));
    CHECK(std::isinf(k[3].to));
    // Each level's own plateau latency lands in its own bucket.
    for (std::size_t i = 0; i < lv.size(); ++i) b->add(lv[i].latency_ns, i + 1);
    for (std::size_t i = 0; i < lv.size(); ++i) CHECK(k[i].samples == i + 1);
    b->add(1e9);
    b->add(-1);
    b->add(NAN);
    CHECK(k[3].samples == 5);
    CHECK(k[0].samples == 3);
    CHECK(b->total() == 13);
    std::string text = b->text();
    CHECK_THAT(text, ContainsSubstring("latency-to-memory.json"));
    CHECK_THAT(text, ContainsSubstring("memory (DRAM)"));
}

TEST_CASE("a curve that stops before memory: the last bucket says so instead of calling it DRAM", "[buckets]") {
    auto curve = pmc::read_latency_curve(data("latency-short-sweep.json"));
    REQUIRE(curve.ok());
    CHECK_FALSE(curve->reaches_memory);
    auto b = pmc::LatencyBuckets::try_from_curve(*curve);
    REQUIRE(b.ok());
    const auto& k = b->buckets();
    REQUIRE(k.size() == curve->levels.size() + 1);
    CHECK(k.back().label == "beyond L3 (the curve stops before memory)");
    CHECK(k.back().from == Approx(curve->levels.back().latency_high_ns));
    for (const auto& x : k) CHECK_THAT(x.label, !ContainsSubstring("DRAM"));
}

TEST_CASE("cycles: the curve's own cycles per ns, or a stated frequency", "[buckets]") {
    const char* json = R"({"curves":[{"points":[{"min_ns":1.0,"min_cycles":3.0},{"min_ns":2.0,"min_cycles":6.2},
        {"min_ns":10.0,"min_cycles":29.0}]}],
        "regimes":{"levels":[{"name":"L1","latency_ns":1.0},{"name":"L2","latency_ns":4.0},
        {"name":"memory","latency_ns":100.0}]}})";
    auto curve = pmc::parse_latency_curve(json, "inline.json");
    REQUIRE(curve.ok());
    REQUIRE(curve->cycles_per_ns);
    CHECK(*curve->cycles_per_ns == Approx(3.0)); // the median of 3.0, 3.1, 2.9
    auto b = pmc::LatencyBuckets::try_from_curve(*curve, *curve->cycles_per_ns);
    REQUIRE(b.ok());
    CHECK(b->unit() == "cycles");
    CHECK(b->buckets()[0].to == Approx(2.0 * 3.0)); // sqrt(1 * 4) ns at 3 cycles per ns
    CHECK(b->buckets()[1].to == Approx(20.0 * 3.0));
    b->add(5);  // cycles: L1
    b->add(7);  // L2
    b->add(61); // memory
    CHECK(b->buckets()[0].samples == 1);
    CHECK(b->buckets()[1].samples == 1);
    CHECK(b->buckets()[2].samples == 1);
    CHECK_FALSE(pmc::LatencyBuckets::try_from_curve(*curve, -1).ok());
}

TEST_CASE("edges given by the user", "[buckets]") {
    auto edges = pmc::LatencyBuckets::try_parse_list("5, 15,60");
    REQUIRE(edges.ok());
    CHECK(*edges == std::vector<double>{5, 15, 60});
    auto b = pmc::LatencyBuckets::try_from_edges(*edges, "cycles", {"L1", "L2", "L3", "DRAM"});
    REQUIRE(b.ok());
    b->add(4.99);
    b->add(5);
    b->add(60);
    CHECK(b->buckets()[0].samples == 1);
    CHECK(b->buckets()[1].samples == 1);
    CHECK(b->buckets()[3].samples == 1);
    CHECK(b->buckets()[3].label == "DRAM");
    auto unlabeled = pmc::LatencyBuckets::try_from_edges({5, 15}, "ns");
    REQUIRE(unlabeled.ok());
    CHECK(unlabeled->buckets()[0].label == "< 5");
    CHECK(unlabeled->buckets()[1].label == "5-15");
    CHECK(unlabeled->buckets()[2].label == ">= 15");

    struct Bad {
        const char* list;
        const char* says;
    } bad_lists[] = {{"", "not a list"}, {"5,,6", "not a list"}, {"5,x", "\"x\" is not a number"}, {"5;6", "not a list"}};
    for (const auto& c : bad_lists) {
        INFO(c.list);
        auto r = pmc::LatencyBuckets::try_parse_list(c.list);
        REQUIRE_FALSE(r.ok());
        CHECK_THAT(r.failure().message, ContainsSubstring(c.says));
    }
    CHECK_THAT(pmc::LatencyBuckets::try_from_edges({6, 5}, "ns").failure().message, ContainsSubstring("must rise"));
    CHECK_THAT(pmc::LatencyBuckets::try_from_edges({0, 5}, "ns").failure().message, ContainsSubstring("positive"));
    CHECK_THAT(pmc::LatencyBuckets::try_from_edges({}, "ns").failure().message, ContainsSubstring("no bucket edges"));
    CHECK_THAT(pmc::LatencyBuckets::try_from_edges({5}, "ns", {"a"}).failure().message,
               ContainsSubstring("2 buckets, but 1 labels"));
}

TEST_CASE("malformed latency JSON: a clear error, never a crash", "[buckets]") {
    struct Bad {
        const char* text;
        const char* says;
    } cases[] = {
        {"", "not valid JSON: at line 1, column 1"},
        {"{\"regimes\": {\"levels\": [}", "not valid JSON"},
        {"{\n  \"a\": tru\n}", "line 2, column 8"},
        {"{\"a\":1} x", "more after the first value"},
        {"\"unterminated", "closing"},
        {"{\"a\":\"\\q\"}", "an escape"},
        {"{\"a\":01}", "',' or '}'"},
        {"{\"a\":1e999}", "fits in a double"},
        {"[]", "no regimes.levels array"},
        {"{\"regimes\":{\"levels\":{}}}", "no regimes.levels array"},
        {"{\"regimes\":{\"levels\":[]}}", "empty"},
        {"{\"regimes\":{\"levels\":[{\"latency_ns\":1}]}}", "levels[0] has no name"},
        {"{\"regimes\":{\"levels\":[{\"name\":\"L1\",\"latency_ns\":-1}]}}", "no positive latency_ns"},
        {"{\"regimes\":{\"levels\":[{\"name\":\"L1\",\"latency_ns\":\"1\"}]}}", "no positive latency_ns"},
        {"{\"regimes\":{\"levels\":[{\"name\":\"L1\",\"latency_ns\":4},{\"name\":\"L2\",\"latency_ns\":3}]}}",
         "levels[1] (L2, 3.000000 ns) is not slower"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        auto r = pmc::parse_latency_curve(c.text, "bad.json");
        REQUIRE_FALSE(r.ok());
        CHECK_THAT(r.failure().message, ContainsSubstring("bad.json"));
        CHECK_THAT(r.failure().message, ContainsSubstring(c.says));
    }
    CHECK_THAT(pmc::parse_latency_curve(std::string(100000, '['), "deep.json").failure().message,
               ContainsSubstring("64 levels of nesting"));
    auto missing = pmc::read_latency_curve("/nonexistent/latency.json");
    REQUIRE_FALSE(missing.ok());
    CHECK_THAT(missing.failure().message, ContainsSubstring("pmc-mem-latency --out"));
    // A directory is not an empty file (an ifstream reads one as "", which read as "the text ends here").
    auto dir = pmc::read_latency_curve("/tmp");
    REQUIRE_FALSE(dir.ok());
    CHECK_THAT(dir.failure().message, ContainsSubstring("Is a directory"));

    // Every prefix and many byte flips of a real file: refused with a message or read, never a crash (ASan checks
    // for reads out of bounds in the sanitizer build).
    auto text = pmc::detail::read_file(data("latency-short-sweep.json"));
    REQUIRE(text);
    // Every prefix that cuts into the object is incomplete JSON (only the trailing newline may go): every 5th cut
    // and each of the last 100.
    std::size_t whole = pmc::detail::trim(*text).size();
    for (std::size_t cut = 0; cut < whole; cut += cut + 100 < whole ? 5 : 1) {
        INFO(cut);
        CHECK_FALSE(pmc::parse_latency_curve(std::string_view(*text).substr(0, cut), "cut.json").ok());
    }
    std::mt19937 rng(4);
    for (int i = 0; i < 1000; ++i) {
        std::string t = *text;
        t[rng() % t.size()] = static_cast<char>(rng() % 256);
        auto r = pmc::parse_latency_curve(t, "flip.json");
        if (!r.ok()) CHECK_FALSE(r.failure().message.empty());
        else CHECK_FALSE(r->levels.empty());
    }
}
