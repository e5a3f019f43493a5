// SPDX-License-Identifier: MIT
// A fake /sys/bus/event_source/devices tree in a temporary directory: PMUs this VM lacks (a cpu PMU with
// multi-range formats and named events, an uncore PMU with scale/unit) so the parser's sysfs paths are tested
// everywhere. The perf-agreement test bind-mounts the same tree over the real directory so perf reads it too.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

namespace pmc_test {

class FakeSysfs {
public:
    /// `broken_pmu`: also a PMU whose format file is malformed (perf itself refuses to parse any event while
    /// such a PMU exists, so the perf-agreement test leaves it out).
    explicit FakeSysfs(bool broken_pmu = true) {
        char tmpl[] = "/tmp/pmc-fake-sysfs-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        root_ = tmpl;
        pmu("cpu", 4);
        file("cpu/rdpmc", "1");
        format("cpu", "event", "config:0-7,32-35");
        format("cpu", "umask", "config:8-15");
        format("cpu", "edge", "config:18");
        format("cpu", "inv", "config:23");
        format("cpu", "cmask", "config:24-31");
        format("cpu", "ldlat", "config1:0-15");
        format("cpu", "filter", "config2:4-11,20-23");
        event("cpu", "mem-loads", "event=0xcd,umask=0x1,ldlat=3");
        event("cpu", "mem-stores", "event=0xcd,umask=0x2");
        event("cpu", "instructions", "event=0xc0");
        event("cpu", "irqs", "event=0x2c");
        event("cpu", "cycles-ct", "event=0x3c,cmask=?");
        pmu("msr", 9);
        format("msr", "event", "config:0-63");
        event("msr", "tsc", "event=0x00");
        event("msr", "aperf", "event=0x01");
        pmu("uncore_imc_0", 20);
        format("uncore_imc_0", "event", "config:0-7");
        format("uncore_imc_0", "umask", "config:8-15");
        event("uncore_imc_0", "cas_count_read", "event=0x04,umask=0x03");
        file("uncore_imc_0/events/cas_count_read.scale", "6.103515625e-5");
        file("uncore_imc_0/events/cas_count_read.unit", "MiB");
        pmu("software", 1);
        pmu("breakpoint", 5);
        if (broken_pmu) {
            pmu("broken", 30);
            format("broken", "event", "cfg:0-7");
        }
    }
    ~FakeSysfs() {
        std::string cmd = "rm -rf '" + root_ + "'";
        if (std::system(cmd.c_str()) != 0) {
        }
    }
    FakeSysfs(const FakeSysfs&) = delete;
    FakeSysfs& operator=(const FakeSysfs&) = delete;

    const std::string& root() const { return root_; }

    /// A hybrid CPU's core-type PMU (cpu_core or cpu_atom) covering `cpus`, a kernel CPU list such as "0-3".
    void core_type_pmu(const std::string& name, int type, const std::string& cpus) {
        pmu(name, type);
        file(name + "/cpus", cpus);
        format(name, "event", "config:0-7");
    }

private:
    void mkdir(const std::string& rel) { ::mkdir((root_ + "/" + rel).c_str(), 0755); }
    void file(const std::string& rel, const std::string& text) { std::ofstream(root_ + "/" + rel) << text << "\n"; }
    void pmu(const std::string& name, int type) {
        mkdir(name);
        mkdir(name + "/format");
        mkdir(name + "/events");
        file(name + "/type", std::to_string(type));
    }
    void format(const std::string& pmu, const std::string& name, const std::string& spec) {
        file(pmu + "/format/" + name, spec);
    }
    void event(const std::string& pmu, const std::string& name, const std::string& terms) {
        file(pmu + "/events/" + name, terms);
    }
    std::string root_;
};

} // namespace pmc_test
