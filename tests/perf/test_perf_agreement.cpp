// SPDX-License-Identifier: MIT
// perf as the oracle: for every event string in the tables below, the perf_event_attr pmc builds must match the
// first attr block `perf stat -vv -e EVENT true` prints (perf prints it even where it then fails to open the
// event). Compared field by field (type, config, config1, config2, every exclude_* bit, precise_ip, bp_type) and
// line by line after adding the fields perf stat itself sets. Sysfs strings for PMUs this machine lacks (a cpu
// PMU with multi-range formats, an uncore PMU) run against the fake tree of fake_sysfs.hpp, bind-mounted over
// /sys/bus/event_source/devices in a private mount namespace so that perf reads it too (needs root and unshare).
#include "catch.hpp"
#include "command.hpp"
#include "fake_sysfs.hpp"

#include <pmc/event.hpp>
#include <pmc/report.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

std::string run(const std::string& command) { return pmc_test::run_command(command).out; }

struct PerfAttr {
    bool found = false;
    std::string block;                         // "perf_event_attr:\n  type ...\n" as printed
    std::map<std::string, std::string> fields; // name -> value text
};

/// The first attr block perf prints for `event`; with `fake_root`, perf runs with that tree mounted over sysfs.
PerfAttr perf_attr(const std::string& event, const std::string& fake_root = {}) {
    std::string perf = "LC_ALL=C perf stat -vv -e '" + event + "' true 2>&1";
    std::string command = fake_root.empty()
                              ? perf
                              : "unshare -m sh -c \"mount --bind '" + fake_root +
                                    "' /sys/bus/event_source/devices && " + perf + "\" 2>&1";
    const std::string out = run(command);
    PerfAttr a;
    auto start = out.find("perf_event_attr:\n");
    if (start == std::string::npos) return a;
    auto end = out.find("------", start);
    a.block = out.substr(start, end == std::string::npos ? std::string::npos : end - start);
    a.found = true;
    std::size_t pos = a.block.find('\n') + 1;
    while (pos < a.block.size()) {
        auto nl = a.block.find('\n', pos);
        std::string line = a.block.substr(pos, nl - pos);
        pos = nl == std::string::npos ? a.block.size() : nl + 1;
        if (line.size() < 36) continue;
        std::string name = line.substr(2, 32);
        while (!name.empty() && name.back() == ' ') name.pop_back();
        a.fields[name] = line.substr(35);
    }
    return a;
}

std::string field(const std::map<std::string, std::string>& fields, const std::string& name) {
    auto it = fields.find(name);
    return it == fields.end() ? "0" : it->second;
}

bool perf_usable() { return perf_attr("task-clock").found; }

bool can_mount_fake_sysfs() {
    if (::geteuid() != 0) return false;
    pmc_test::FakeSysfs probe(/*broken_pmu=*/false);
    return perf_attr("cpu/event=0x1/", probe.root()).found;
}

/// Compares pmc's encoding of `event` with perf's; every string given is one perf accepts.
void compare(const std::string& event, const std::string& root, const std::string& fake_root, int& compared) {
    INFO("event string: " << event);
    PerfAttr perf = perf_attr(event, fake_root);
    REQUIRE(perf.found); // every string in the tables is one perf accepts
    auto spec = pmc::try_parse_event(event, root);
    if (!spec) FAIL(spec.failure().message);
    const auto mine = pmc::attr_fields(pmc::as_perf_stat_opens_it(spec->attr));
    std::map<std::string, std::string> ours(mine.begin(), mine.end());
    for (const char* name : {"type", "config", "{ bp_addr, config1 }", "{ bp_len, config2 }", "exclude_user",
                             "exclude_kernel", "exclude_hv", "exclude_idle", "exclude_host", "exclude_guest",
                             "precise_ip", "bp_type", "pinned", "exclusive"}) {
        INFO("field " << name);
        CHECK(field(ours, name) == field(perf.fields, name));
    }
    // Line by line: the same block perf printed.
    const std::string text = pmc::attr_text(pmc::as_perf_stat_opens_it(spec->attr));
    if (text != perf.block) WARN("whole block differs (other fields):\nperf:\n" << perf.block << "pmc:\n" << text);
    ++compared;
}

// Strings that need no PMU beyond those every kernel has; perf prints their attrs here even without a PMU.
const char* const generic_events[] = {
    "instructions", "instructions:u", "instructions:k", "instructions:h", "instructions:G", "instructions:H",
    "instructions:uk", "instructions:up", "instructions:pp", "cycles:ppp", "instructions:uG", "instructions:GH",
    "instructions:I", "instructions:D", "cycles:ukhGHIpppDe", "cpu-cycles", "cache-references", "cache-misses",
    "branches", "branch-instructions", "branch-misses", "bus-cycles", "ref-cycles", "stalled-cycles-frontend",
    "idle-cycles-backend", "cpu-clock", "task-clock", "page-faults", "faults:u", "cs", "migrations",
    "minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy", "bpf-output",
    "cgroup-switches", "page-faults:k", "L1-dcache-loads", "L1-dcache-load-misses", "L1-dcache-stores",
    "L1-icache-load-misses", "LLC-loads", "LLC-store-misses", "LLC-prefetch-misses", "dTLB-load-misses",
    "iTLB-loads", "branch-load-misses", "node-loads", "L1-dcache-prefetch-misses", "L1-data-load-misses",
    "l1d-loads", "dTLB-speculative-read-access", "L1-dcache-loads:k", "r1a8", "r01cb:u", "r01cb:uk",
    "rfff0000000000000", "r1a8:ppp", "4:1", "mem:0x1000", "mem:0x1000/8:w", "mem:0x2000:x",
};

// Strings for PMUs found in the real sysfs of many machines; each row runs only where its PMU exists.
const char* const real_sysfs_events[] = {
    "msr/tsc/", "msr/tsc/G", "msr/TSC/", "msr/event=0x0/", "msr/config=5/", "msr/config=5,config1=7,config2=9/",
    "msr/event=5,config=8/", "msr//", "msr/tsc,period=1000/", "uprobe/ref_ctr_offset=5/", "uprobe/retprobe/",
    "uprobe/retprobe=1,ref_ctr_offset=0xffffffff/", "software/config=2/u", "software/config=0x2,config1=1/",
    "breakpoint/config=0/",
};

// Strings for the fake tree (fake_sysfs.hpp), compared with perf reading the same tree.
const char* const fake_sysfs_events[] = {
    "cpu/event=0x12c,umask=0x3,inv,cmask=2/u", "cpu/event=0xfff/", "cpu/event=0x2c,umask=0x1/",
    "cpu/edge,event=0x1/", "cpu/mem-loads/", "cpu/mem-loads/k", "cpu/mem-loads,ldlat=7/pp",
    "cpu/config=0x100,event=1/", "cpu/config1=0x100,mem-loads/", "cpu/filter=0xfff/", "cpu/filter=0x123/",
    "cpu/ event = 0x1 , umask=2 /", "irqs:u", "mem-loads", "uncore_imc_0/cas_count_read/",
    "uncore_imc_0/event=0x4,umask=0x3/", "msr/aperf/", "aperf",
};

} // namespace

std::string pmc_test_skip_reason() {
    if (run("command -v perf").empty()) return "perf is not installed (Debian: apt-get install linux-perf)";
    if (!perf_usable()) return "perf is installed but `perf stat -vv -e task-clock true` prints no perf_event_attr";
    return {};
}

TEST_CASE("pmc encodes generic, cache, raw and breakpoint events exactly as perf does", "[perf]") {
    int compared = 0;
    for (const char* e : generic_events) compare(e, std::string(pmc::default_sysfs_root), {}, compared);
    std::printf("compared %d generic event strings with perf\n", compared);
}

TEST_CASE("pmc encodes this machine's sysfs PMU events exactly as perf does", "[perf][sysfs]") {
    int compared = 0;
    for (const char* e : real_sysfs_events) {
        std::string pmu(e, std::string(e).find('/'));
        if (!pmc::load_pmu(pmu)) continue;
        compare(e, std::string(pmc::default_sysfs_root), {}, compared);
    }
    std::printf("compared %d sysfs event strings with perf\n", compared);
}

TEST_CASE("pmc packs sysfs formats and named events exactly as perf does (fake cpu and uncore PMUs)", "[perf][sysfs]") {
    if (!can_mount_fake_sysfs())
        PMC_SKIP("cannot bind-mount a fake sysfs for perf here (needs root and unshare); the fake-PMU rows are "
                 "checked against expected values in tests/unit instead");
    pmc_test::FakeSysfs sysfs(/*broken_pmu=*/false);
    int compared = 0;
    for (const char* e : fake_sysfs_events) compare(e, sysfs.root(), sysfs.root(), compared);
    std::printf("compared %d fake-PMU event strings with perf\n", compared);
}

TEST_CASE("`pmc encode --like-perf-stat` prints perf's attr block line for line", "[perf][tool]") {
    const char* tool = std::getenv("PMC_TOOL");
#ifdef PMC_TOOL_PATH
    if (!tool) tool = PMC_TOOL_PATH;
#endif
    if (!tool) PMC_SKIP("the pmc tool is not built (PMC_BUILD_TOOLS=OFF) and PMC_TOOL does not name one");
    for (const char* e : {"instructions:u", "r01cb:uk", "L1-dcache-load-misses", "page-faults", "msr/tsc/"}) {
        INFO(e);
        if (std::string(e) == "msr/tsc/" && !pmc::load_pmu("msr")) continue;
        const std::string out = run(std::string(tool) + " encode --like-perf-stat '" + e + "'");
        const PerfAttr perf = perf_attr(e);
        REQUIRE(perf.found);
        CHECK(out == "------------------------------------------------------------\n" + perf.block +
                         "------------------------------------------------------------\n");
    }
}
