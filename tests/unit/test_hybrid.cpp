// SPDX-License-Identifier: MIT
// Hybrid CPUs: which core-type PMU a hardware event opens on, from the thread's affinity (pure, fake sysfs).
#include "catch.hpp"
#include "fake_sysfs.hpp"

#include <pmc/hybrid.hpp>

#include <fstream>
#include <sys/stat.h>

namespace {
/// A fake sysfs tree of a hybrid machine: cpu_core on CPUs 0-3 (type 4), cpu_atom on 4-7 (type 10).
struct HybridSysfs {
    pmc_test::FakeSysfs base{false};
    HybridSysfs() {
        base.core_type_pmu("cpu_core", 4, "0-3");
        base.core_type_pmu("cpu_atom", 10, "4-7");
    }
};
} // namespace

TEST_CASE("kernel CPU lists", "[hybrid]") {
    CHECK(pmc::parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
    CHECK(pmc::parse_cpu_list("5") == std::vector<int>{5});
    CHECK(pmc::format_cpu_list({3, 0, 1, 2, 8, 10, 11}) == "0-3,8,10-11"); // and back
    CHECK(pmc::format_cpu_list({5}) == "5");
    CHECK(pmc::format_cpu_list({}).empty());
    CHECK(pmc::parse_cpu_list("").empty());
    CHECK(pmc::parse_cpu_list("3-1").empty());
    CHECK(pmc::parse_cpu_list("a-b").empty());
}

TEST_CASE("hybrid machines are detected from their core-type PMUs", "[hybrid]") {
    HybridSysfs hybrid;
    auto pmus = pmc::hybrid_pmus(hybrid.base.root());
    REQUIRE(pmus.size() == 2);
    CHECK(pmus[0].pmu == "cpu_core");
    CHECK(pmus[0].type == 4);
    CHECK(pmus[0].core_type == pmc::CoreType::performance);
    CHECK(pmus[0].cpus == std::vector<int>{0, 1, 2, 3});
    CHECK(pmus[1].core_type == pmc::CoreType::efficiency);
    pmc_test::FakeSysfs plain;
    CHECK(pmc::hybrid_pmus(plain.root()).empty());
}

TEST_CASE("a hardware event opens on the core type the thread is confined to", "[hybrid]") {
    HybridSysfs hybrid;
    const auto pmus = pmc::hybrid_pmus(hybrid.base.root());
    auto p_core = pmc::choose_core_pmu(pmus, {0, 2});
    REQUIRE(p_core.pmu);
    CHECK(p_core.pmu->pmu == "cpu_core");
    auto e_core = pmc::choose_core_pmu(pmus, {5});
    REQUIRE(e_core.pmu);
    CHECK(e_core.pmu->pmu == "cpu_atom");
    // Free to migrate: refused, with the fix.
    auto both = pmc::choose_core_pmu(pmus, {0, 1, 4});
    CHECK_FALSE(both.pmu);
    CHECK_THAT(both.error, ContainsSubstring("both core types"));
    CHECK_THAT(both.error, ContainsSubstring("pmc::pin_this_thread"));
    CHECK_THAT(both.error, ContainsSubstring("cpu_core on CPUs 0-3"));
    // An explicit cpu_core/.../ event on a thread that may run on E-cores.
    auto explicit_core = pmc::choose_core_pmu(pmus, {3, 4}, "cpu_core");
    CHECK_FALSE(explicit_core.pmu);
    CHECK_THAT(explicit_core.error, ContainsSubstring("CPUs outside cpu_core"));
    CHECK(pmc::choose_core_pmu(pmus, {1}, "cpu_core").pmu);
    CHECK_FALSE(pmc::choose_core_pmu(pmus, {}).pmu);
}

TEST_CASE("generic and raw events carry the core-type PMU", "[hybrid]") {
    pmc::CoreTypePmu core{"cpu_core", 4, pmc::CoreType::performance, {0}, "0"};
    perf_event_attr instructions{};
    instructions.type = PERF_TYPE_HARDWARE;
    instructions.config = PERF_COUNT_HW_INSTRUCTIONS;
    auto hw = pmc::on_core_pmu(instructions, core);
    CHECK(hw.type == PERF_TYPE_HARDWARE);
    CHECK(hw.config == 0x0000000400000001ull);
    perf_event_attr cache{};
    cache.type = PERF_TYPE_HW_CACHE;
    cache.config = 0x10000;
    CHECK(pmc::on_core_pmu(cache, core).config == 0x0000000400010000ull);
    perf_event_attr raw{};
    raw.type = PERF_TYPE_RAW;
    raw.config = 0x1cb;
    auto r = pmc::on_core_pmu(raw, core);
    CHECK(r.type == 4);
    CHECK(r.config == 0x1cb);
}

TEST_CASE("pinning needs a hybrid machine", "[hybrid]") {
    pmc_test::FakeSysfs plain;
    auto failure = pmc::pin_this_thread(pmc::CoreType::performance, plain.root());
    REQUIRE(failure);
    CHECK_THAT(failure->message, ContainsSubstring("not hybrid"));
}
