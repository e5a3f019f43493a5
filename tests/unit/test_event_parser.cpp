// SPDX-License-Identifier: MIT
// Event strings -> perf_event_attr, checked against a table of expected encodings (the values perf prints for
// the same strings; tests/perf checks the agreement against perf itself where perf is installed).
#include "catch.hpp"
#include "fake_sysfs.hpp"

#include <pmc/event.hpp>

#include <string>

namespace {

constexpr unsigned EU = 1, EK = 2, EH = 4, EHOST = 8, EGUEST = 16, EIDLE = 32;

struct Row {
    const char* text;
    std::uint32_t type;
    std::uint64_t config;
    std::uint64_t config1;
    std::uint64_t config2;
    unsigned exclude;
    unsigned precise;
};

unsigned exclude_bits(const perf_event_attr& a) {
    return (a.exclude_user ? EU : 0) | (a.exclude_kernel ? EK : 0) | (a.exclude_hv ? EH : 0) |
           (a.exclude_host ? EHOST : 0) | (a.exclude_guest ? EGUEST : 0) | (a.exclude_idle ? EIDLE : 0);
}

void check_row(const Row& r, const std::string& root) {
    INFO("event string: " << r.text);
    auto spec = pmc::try_parse_event(r.text, root);
    if (!spec) FAIL(spec.failure().message);
    CHECK(spec->kind == pmc::EventKind::perf);
    CHECK(spec->attr.size == sizeof(perf_event_attr));
    CHECK(spec->attr.type == r.type);
    CHECK(spec->attr.config == r.config);
    CHECK(spec->attr.config1 == r.config1);
    CHECK(spec->attr.config2 == r.config2);
    CHECK(exclude_bits(spec->attr) == r.exclude);
    CHECK(spec->attr.precise_ip == r.precise);
}

constexpr unsigned U = EK | EH | EGUEST; // what ":u" sets

// Strings whose encoding does not depend on sysfs.
const Row generic_rows[] = {
    {"instructions", PERF_TYPE_HARDWARE, 1, 0, 0, EGUEST, 0},
    {"instructions:u", PERF_TYPE_HARDWARE, 1, 0, 0, U, 0},
    {"instructions:k", PERF_TYPE_HARDWARE, 1, 0, 0, EU | EH, 0},
    {"instructions:h", PERF_TYPE_HARDWARE, 1, 0, 0, EU | EK, 0},
    {"instructions:G", PERF_TYPE_HARDWARE, 1, 0, 0, EHOST, 0},
    {"instructions:H", PERF_TYPE_HARDWARE, 1, 0, 0, EGUEST, 0},
    {"instructions:uk", PERF_TYPE_HARDWARE, 1, 0, 0, EH | EGUEST, 0},
    {"instructions:ku", PERF_TYPE_HARDWARE, 1, 0, 0, EH | EGUEST, 0},
    {"instructions:up", PERF_TYPE_HARDWARE, 1, 0, 0, U, 1},
    {"instructions:pp", PERF_TYPE_HARDWARE, 1, 0, 0, EGUEST, 2},
    {"cycles:ppp", PERF_TYPE_HARDWARE, 0, 0, 0, EGUEST, 3},
    {"instructions:uG", PERF_TYPE_HARDWARE, 1, 0, 0, EK | EH | EHOST, 0},
    {"instructions:Gu", PERF_TYPE_HARDWARE, 1, 0, 0, EK | EH | EHOST, 0},
    {"instructions:GH", PERF_TYPE_HARDWARE, 1, 0, 0, 0, 0},
    {"instructions:I", PERF_TYPE_HARDWARE, 1, 0, 0, EIDLE, 0},
    {"instructions:D", PERF_TYPE_HARDWARE, 1, 0, 0, 0, 0},
    {"instructions:P", PERF_TYPE_HARDWARE, 1, 0, 0, 0, 0},
    {"cycles:ukhGHIpppDe", PERF_TYPE_HARDWARE, 0, 0, 0, EIDLE, 3},
    {"  instructions:u  ", PERF_TYPE_HARDWARE, 1, 0, 0, U, 0},
    {"cpu-cycles", PERF_TYPE_HARDWARE, 0, 0, 0, EGUEST, 0},
    {"cache-references", PERF_TYPE_HARDWARE, 2, 0, 0, EGUEST, 0},
    {"cache-misses", PERF_TYPE_HARDWARE, 3, 0, 0, EGUEST, 0},
    {"branches", PERF_TYPE_HARDWARE, 4, 0, 0, EGUEST, 0},
    {"branch-instructions", PERF_TYPE_HARDWARE, 4, 0, 0, EGUEST, 0},
    {"branch-misses", PERF_TYPE_HARDWARE, 5, 0, 0, EGUEST, 0},
    {"bus-cycles", PERF_TYPE_HARDWARE, 6, 0, 0, EGUEST, 0},
    {"stalled-cycles-frontend", PERF_TYPE_HARDWARE, 7, 0, 0, EGUEST, 0},
    {"idle-cycles-backend", PERF_TYPE_HARDWARE, 8, 0, 0, EGUEST, 0},
    {"ref-cycles", PERF_TYPE_HARDWARE, 9, 0, 0, EGUEST, 0},
    {"cpu-clock", PERF_TYPE_SOFTWARE, 0, 0, 0, EGUEST, 0},
    {"task-clock", PERF_TYPE_SOFTWARE, 1, 0, 0, EGUEST, 0},
    {"page-faults", PERF_TYPE_SOFTWARE, 2, 0, 0, EGUEST, 0},
    {"faults", PERF_TYPE_SOFTWARE, 2, 0, 0, EGUEST, 0},
    {"page-faults:u", PERF_TYPE_SOFTWARE, 2, 0, 0, U, 0},
    {"context-switches", PERF_TYPE_SOFTWARE, 3, 0, 0, EGUEST, 0},
    {"cs", PERF_TYPE_SOFTWARE, 3, 0, 0, EGUEST, 0},
    {"migrations", PERF_TYPE_SOFTWARE, 4, 0, 0, EGUEST, 0},
    {"minor-faults", PERF_TYPE_SOFTWARE, 5, 0, 0, EGUEST, 0},
    {"major-faults", PERF_TYPE_SOFTWARE, 6, 0, 0, EGUEST, 0},
    {"alignment-faults", PERF_TYPE_SOFTWARE, 7, 0, 0, EGUEST, 0},
    {"emulation-faults", PERF_TYPE_SOFTWARE, 8, 0, 0, EGUEST, 0},
    {"dummy", PERF_TYPE_SOFTWARE, 9, 0, 0, EGUEST, 0},
    {"bpf-output", PERF_TYPE_SOFTWARE, 10, 0, 0, EGUEST, 0},
    {"cgroup-switches", PERF_TYPE_SOFTWARE, 11, 0, 0, EGUEST, 0},
    {"L1-dcache-loads", PERF_TYPE_HW_CACHE, 0x0, 0, 0, EGUEST, 0},
    {"L1-dcache-load-misses", PERF_TYPE_HW_CACHE, 0x10000, 0, 0, EGUEST, 0},
    {"L1-dcache-stores", PERF_TYPE_HW_CACHE, 0x100, 0, 0, EGUEST, 0},
    {"L1-dcache-prefetches", PERF_TYPE_HW_CACHE, 0x200, 0, 0, EGUEST, 0},
    {"L1-dcache-prefetch-misses", PERF_TYPE_HW_CACHE, 0x10200, 0, 0, EGUEST, 0},
    {"L1-icache-load-misses", PERF_TYPE_HW_CACHE, 0x10001, 0, 0, EGUEST, 0},
    {"L1-icache-prefetches", PERF_TYPE_HW_CACHE, 0x201, 0, 0, EGUEST, 0},
    {"LLC-loads", PERF_TYPE_HW_CACHE, 0x2, 0, 0, EGUEST, 0},
    {"LLC-load-misses", PERF_TYPE_HW_CACHE, 0x10002, 0, 0, EGUEST, 0},
    {"LLC-store-misses", PERF_TYPE_HW_CACHE, 0x10102, 0, 0, EGUEST, 0},
    {"LLC-prefetch-misses", PERF_TYPE_HW_CACHE, 0x10202, 0, 0, EGUEST, 0},
    {"dTLB-load-misses", PERF_TYPE_HW_CACHE, 0x10003, 0, 0, EGUEST, 0},
    {"dTLB-speculative-read-access", PERF_TYPE_HW_CACHE, 0x203, 0, 0, EGUEST, 0},
    {"iTLB-loads", PERF_TYPE_HW_CACHE, 0x4, 0, 0, EGUEST, 0},
    {"branch-loads", PERF_TYPE_HW_CACHE, 0x5, 0, 0, EGUEST, 0},
    {"branch-load-misses", PERF_TYPE_HW_CACHE, 0x10005, 0, 0, EGUEST, 0},
    {"node-loads", PERF_TYPE_HW_CACHE, 0x6, 0, 0, EGUEST, 0},
    {"L1-data-load-misses", PERF_TYPE_HW_CACHE, 0x10000, 0, 0, EGUEST, 0},
    {"l1d-loads", PERF_TYPE_HW_CACHE, 0x0, 0, 0, EGUEST, 0},
    {"L1-dcache", PERF_TYPE_HW_CACHE, 0x0, 0, 0, EGUEST, 0},
    {"L1-dcache-misses", PERF_TYPE_HW_CACHE, 0x10000, 0, 0, EGUEST, 0},
    {"l1d-Reference", PERF_TYPE_HW_CACHE, 0x0, 0, 0, EGUEST, 0},
    {"L1-dcache-loads:k", PERF_TYPE_HW_CACHE, 0x0, 0, 0, EU | EH, 0},
    {"r1a8", PERF_TYPE_RAW, 0x1a8, 0, 0, EGUEST, 0},
    {"r01cb:u", PERF_TYPE_RAW, 0x1cb, 0, 0, U, 0},
    {"r01cb:uk", PERF_TYPE_RAW, 0x1cb, 0, 0, EH | EGUEST, 0},
    {"r01cb:uG", PERF_TYPE_RAW, 0x1cb, 0, 0, EK | EH | EHOST, 0},
    {"rfff0000000000000", PERF_TYPE_RAW, 0xfff0000000000000, 0, 0, EGUEST, 0},
    {"r1A8:ppp", PERF_TYPE_RAW, 0x1a8, 0, 0, EGUEST, 3},
    {"4:1", PERF_TYPE_RAW, 1, 0, 0, EGUEST, 0},
    {"1:2:u", PERF_TYPE_SOFTWARE, 2, 0, 0, U, 0},
    {"mem:0x1000", PERF_TYPE_BREAKPOINT, 0, 0x1000, 4, EGUEST, 0},
    {"mem:0x1000/8:w", PERF_TYPE_BREAKPOINT, 0, 0x1000, 8, EGUEST, 0},
    {"mem:0x2000:x", PERF_TYPE_BREAKPOINT, 0, 0x2000, 8, EGUEST, 0},
    {"mem:0x1000:rw:u", PERF_TYPE_BREAKPOINT, 0, 0x1000, 4, U, 0},
};

// Strings that go through sysfs formats and named events (the fake tree in fake_sysfs.hpp).
const Row sysfs_rows[] = {
    // event is config:0-7,32-35: 0x12c puts 0x2c in bits 0-7 and 0x1 in bit 32.
    {"cpu/event=0x12c,umask=0x3,inv,cmask=2/u", 4, 0x10280032c, 0, 0, U, 0},
    {"cpu/event=0xfff/", 4, 0xf000000ff, 0, 0, EGUEST, 0},
    {"cpu/event=0x2c,umask=0x1/", 4, 0x12c, 0, 0, EGUEST, 0},
    {"cpu/edge,event=0x1/", 4, 0x40001, 0, 0, EGUEST, 0},
    {"cpu/mem-loads/", 4, 0x1cd, 0x3, 0, EGUEST, 0},
    {"cpu/mem-loads,ldlat=7/pp", 4, 0x1cd, 0x7, 0, EGUEST, 2},
    {"cpu/mem-loads/k", 4, 0x1cd, 0x3, 0, EU | EH, 0},
    {"cpu/config=0x100,event=1/", 4, 0x101, 0, 0, EGUEST, 0},
    {"cpu/config1=0x100,mem-loads/", 4, 0x1cd, 0x103, 0, EGUEST, 0},
    {"cpu/config2=0x5/", 4, 0, 0, 0x5, EGUEST, 0},
    // filter is config2:4-11,20-23: 12 value bits split 8 + 4.
    {"cpu/filter=0xfff/", 4, 0, 0, 0xf00ff0, EGUEST, 0},
    {"cpu/filter=0x123/", 4, 0, 0, 0x100230, EGUEST, 0},
    {"cpu/cycles-ct,cmask=1/", 4, 0x100003c, 0, 0, EGUEST, 0},
    {"cpu/ event = 0x1 , umask=2 /", 4, 0x201, 0, 0, EGUEST, 0},
    {"irqs:u", 4, 0x2c, 0, 0, U, 0},
    {"mem-loads", 4, 0x1cd, 0x3, 0, EGUEST, 0},
    {"MEM-LOADS", 4, 0x1cd, 0x3, 0, EGUEST, 0},
    {"msr/tsc/", 9, 0, 0, 0, EGUEST, 0},
    {"msr/TSC/", 9, 0, 0, 0, EGUEST, 0},
    {"msr/aperf/", 9, 1, 0, 0, EGUEST, 0},
    {"msr/tsc/G", 9, 0, 0, 0, EHOST, 0},
    {"msr//", 9, 0, 0, 0, EGUEST, 0},
    {"msr/event=0x1,config=0x10/", 9, 0x11, 0, 0, EGUEST, 0},
    {"msr/tsc,event=3/", 9, 3, 0, 0, EGUEST, 0},
    {"uncore_imc_0/cas_count_read/", 20, 0x304, 0, 0, EGUEST, 0},
    {"uncore_imc_0/event=0x4,umask=0x3/", 20, 0x304, 0, 0, EGUEST, 0},
    {"software/config=2/u", 1, 2, 0, 0, U, 0},
    {"aperf", 9, 1, 0, 0, EGUEST, 0},
};

} // namespace

TEST_CASE("generic, cache, raw, numeric and breakpoint events encode as perf does", "[parser]") {
    pmc_test::FakeSysfs sysfs;
    for (const Row& r : generic_rows) check_row(r, sysfs.root());
}

TEST_CASE("sysfs format fields and named events encode as perf does", "[parser][sysfs]") {
    pmc_test::FakeSysfs sysfs;
    for (const Row& r : sysfs_rows) check_row(r, sysfs.root());
}

TEST_CASE("user terms replace the sysfs alias's terms of the same name", "[parser][sysfs]") {
    // perf 6.1 ORs the two (ldlat 3|4 = 7); pmc lets the user's value win, which is what users mean.
    pmc_test::FakeSysfs sysfs;
    auto spec = pmc::parse_event("cpu/mem-loads,ldlat=4/", sysfs.root());
    CHECK(spec.attr.config1 == 4);
    auto umask = pmc::parse_event("cpu/umask=0x2,mem-loads/", sysfs.root());
    CHECK(umask.attr.config == 0x2cd);
}

TEST_CASE("modifiers that are not attr bits are recorded", "[parser]") {
    auto pinned = pmc::parse_event("instructions:uD");
    CHECK(pinned.attr.pinned == 1);
    CHECK(pinned.modifiers == "uD");
    auto exclusive = pmc::parse_event("instructions:e");
    CHECK(exclusive.attr.exclusive == 1);
    auto pmax = pmc::parse_event("cycles:P");
    CHECK(pmax.precise_max);
    CHECK(pmax.attr.precise_ip == 0);
    auto gh = pmc::parse_event("cycles:uH");
    CHECK(gh.guest_host_explicit);
    CHECK_FALSE(pmc::parse_event("cycles:u").guest_host_explicit);
}

TEST_CASE("breakpoint access types", "[parser]") {
    CHECK(pmc::parse_event("mem:0x1000").attr.bp_type == (HW_BREAKPOINT_R | HW_BREAKPOINT_W));
    CHECK(pmc::parse_event("mem:0x1000:r").attr.bp_type == HW_BREAKPOINT_R);
    CHECK(pmc::parse_event("mem:0x1000/2:w").attr.bp_type == HW_BREAKPOINT_W);
    CHECK(pmc::parse_event("mem:0x1000/2:w").attr.bp_len == 2);
    CHECK(pmc::parse_event("mem:0x1000:x").attr.bp_type == HW_BREAKPOINT_X);
}

TEST_CASE("pmc's clocks and display names", "[parser]") {
    auto wall = pmc::parse_event("wall-time");
    CHECK(wall.kind == pmc::EventKind::wall_time);
    CHECK(pmc::parse_event(" tsc ").kind == pmc::EventKind::tsc);
    pmc_test::FakeSysfs sysfs;
    auto named = pmc::parse_event("cpu/mem-loads,name=loads/", sysfs.root());
    CHECK(named.name == "loads");
    CHECK(named.text == "cpu/mem-loads,name=loads/");
    CHECK(named.pmu == "cpu");
    CHECK(named.core_pmu);
    auto msr = pmc::parse_event("msr/tsc,period=1000/", sysfs.root());
    CHECK(msr.sample_period == 1000);
    CHECK(msr.attr.sample_period == 0); // a counter does not sample (perf stat leaves it 0 too)
    CHECK_FALSE(msr.core_pmu);
    CHECK(pmc::parse_event("instructions").core_pmu);
    CHECK(pmc::parse_event("L1-dcache-loads").core_pmu);
    CHECK(pmc::parse_event("r1a8").core_pmu);
    CHECK_FALSE(pmc::parse_event("page-faults").core_pmu);
}

TEST_CASE("the list of named events covers every generic name the parser knows", "[parser]") {
    auto events = pmc::named_events();
    CHECK(events.size() > 40);
    // The composites need the CPU's interrupt event: parse them as on our VMs' CPU (AMD Zen 5), whatever runs this.
    const auto zen5 = pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00B00F21));
    for (auto& e : events) {
        INFO(e.name);
        auto spec = pmc::try_parse_event(e.name, pmc::default_sysfs_root, zen5);
        REQUIRE(spec.ok());
        // The category says what the event is: pmc's clocks and composites are never labelled as each other.
        const bool clock = spec->kind == pmc::EventKind::wall_time || spec->kind == pmc::EventKind::tsc;
        CHECK((e.category == "pmc clock") == clock);
        CHECK((e.category == "pmc composite") == (spec->kind == pmc::EventKind::difference));
        CHECK(e.note.empty() == (spec->kind == pmc::EventKind::perf));
    }
    bool cycles_alias = false;
    for (auto& e : events) cycles_alias = cycles_alias || (e.name == "cpu-cycles" && e.aliases == "cycles");
    CHECK(cycles_alias);
}
