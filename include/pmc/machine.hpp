// SPDX-License-Identifier: MIT
// pmc/machine.hpp: facts about this machine that decide what pmc can count, for tools and for people.
#pragma once

#include <pmc/config.hpp>
#include <pmc/cpu.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/clock.hpp>
#include <pmc/detail/explain.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/hybrid.hpp>

#include <dirent.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

PMC_BEGIN_NAMESPACE

/// kernel.perf_event_paranoid (nullopt if unreadable) and what the level allows.
inline std::optional<int> perf_event_paranoid() { return detail::perf_event_paranoid(); }
inline const char* paranoid_meaning(int level) { return detail::paranoid_meaning(level); }

/// The running kernel's release, e.g. "6.1.0-18-amd64".
inline std::string kernel_release() {
    utsname u{};
    if (::uname(&u) != 0) return "unknown";
    return u.release;
}

/// True when the CPU reports that it runs under a hypervisor (CPUID.1:ECX[31]).
inline bool under_hypervisor() { return detail::under_hypervisor(); }

/// The hypervisor's CPUID signature (e.g. "KVMKVMKVM", "VMwareVMware", "Microsoft Hv"), or "" on bare metal.
inline std::string hypervisor_signature() {
#if PMC_ARCH_X86_64
    if (!detail::under_hypervisor()) return "";
    auto r = detail::cpuid(0x40000000);
    char sig[13] = {};
    std::memcpy(sig, &r.ebx, 4);
    std::memcpy(sig + 4, &r.ecx, 4);
    std::memcpy(sig + 8, &r.edx, 4);
    std::string s(sig);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
    return s;
#else
    return "";
#endif
}

/// True when the CPU's counter ticks at a constant rate: x86's TSC (CPUID 0x80000007 EDX[8]); AArch64's generic
/// timer always does (CNTFRQ_EL0 non-zero). wall-time needs it.
inline bool has_invariant_tsc() { return detail::has_invariant_tsc(); }

/// Names the counter wall-time reads, with its rate: "TSC at 2445.404 MHz", or on AArch64 "the generic timer
/// (CNTVCT_EL0 at CNTFRQ_EL0 = 62500000 Hz)". Pure.
inline std::string wall_time_counter(bool generic_timer, double hz) {
    char buf[96];
    if (generic_timer)
        std::snprintf(buf, sizeof buf, "the generic timer (CNTVCT_EL0 at CNTFRQ_EL0 = %.0f Hz)", hz);
    else
        std::snprintf(buf, sizeof buf, "TSC at %.3f MHz", hz / 1e6);
    return buf;
}

/// How wall-time turns the CPU's counter (x86: the TSC; AArch64: the generic timer) into nanoseconds on this
/// machine, and the counter's rate (0 if not used).
struct WallTimeClock {
    bool uses_tsc = false; ///< wall-time reads the CPU's counter (else clock_gettime)
    double tsc_hz = 0;
    std::string source;
    std::string counter;   ///< wall_time_counter() for this machine; "" if not used
};
inline WallTimeClock wall_time_clock() {
    const auto c = detail::tsc_conversion();
    WallTimeClock w{c.usable, c.ticks_per_second, c.source, ""};
#if PMC_ARCH_AARCH64
    if (w.uses_tsc) {
        w.counter = wall_time_counter(true, static_cast<double>(detail::timer_frequency())); // exact
        if (w.source.find("kernel") == std::string::npos) // pmc's own conversion: say so without naming the timer twice
            w.source = "CNTFRQ_EL0 itself (the timer states its rate: no calibration needed)";
    }
#else
    if (w.uses_tsc) w.counter = wall_time_counter(false, w.tsc_hz);
#endif
    return w;
}

/// kernel.perf_user_access (arm64, Linux 5.17+): 1 lets user space read the counters of events that ask for it
/// (pmc asks: config1 bit 1); 0, the default, does not. nullopt where the file does not exist: x86, an older arm64
/// kernel, or one without the Arm PMUv3 driver. `proc_root` stands for /proc (tests point it elsewhere).
inline std::optional<int> perf_user_access(const std::string& proc_root = "/proc") {
    auto text = detail::read_file(proc_root + "/sys/kernel/perf_user_access");
    if (!text) return std::nullopt;
    auto v = detail::parse_number(detail::trim(*text));
    if (!v || *v > 100) return std::nullopt;
    return static_cast<int>(*v);
}

/// What a perf_user_access value means for pmc's reads on AArch64, and the fix when user-space reads are off.
/// `value` nullopt: the setting does not exist on this (AArch64) kernel. Pure.
struct UserAccessMeaning {
    bool user_reads = false; ///< pmc reads hardware counters with mrs (else with read())
    std::string meaning;
    std::string fix;         ///< "" when nothing is to be done
};
inline UserAccessMeaning perf_user_access_meaning(std::optional<int> value) {
    const std::string sysctl = "sudo sysctl kernel.perf_user_access=1 (to keep it: kernel.perf_user_access = 1 in a "
                               "file in /etc/sysctl.d/)";
    if (!value)
        return {false,
                "absent (no /proc/sys/kernel/perf_user_access): this kernel gives user space no counter access on Arm "
                "(it came with Linux 5.17, in the Arm PMUv3 driver), so pmc reads hardware counters with read(), a "
                "system call per read",
                "Linux 5.17 or later with CONFIG_ARM_PMUV3, then " + sysctl};
    if (*value == 1)
        return {true, "1: user space reads the counters of events that ask (pmc asks) with mrs, no system call", ""};
    if (*value == 0)
        return {false,
                "0 (the default): user-space counter reads are off, so pmc reads hardware counters with read(), a "
                "system call per read: slower, but the counts are the same",
                sysctl};
    return {false, std::to_string(*value) + ": not a value the kernel accepts (0 or 1)", sysctl};
}

/// One kind of core of an AArch64 machine: a MIDR_EL1 value and the CPUs that report it.
struct ArmCoreKind {
    ArmCpu cpu;
    std::vector<int> cpus; ///< empty when only the current CPU could be read
};

/// The cores of an AArch64 machine, by MIDR_EL1.
struct ArmCpus {
    std::vector<ArmCoreKind> kinds; ///< in order of their first CPU; empty when no MIDR could be read
    std::string source;             ///< where the MIDRs were read

    /// Cores of more than one design (big.LITTLE, Apple's performance and efficiency cores), not just revisions.
    bool heterogeneous() const {
        for (const auto& k : kinds)
            if (k.cpu.implementer != kinds.front().cpu.implementer || k.cpu.part != kinds.front().cpu.part)
                return true;
        return false;
    }
    /// "Arm Cortex-A55 r2p0 (MIDR 0x412fd050) on CPUs 0-3; Arm Cortex-A78 r1p1 (MIDR 0x411fd410) on CPUs 4-6"
    std::string description() const {
        std::string out;
        for (const auto& k : kinds)
            out += (out.empty() ? "" : "; ") + k.cpu.description() +
                   (k.cpus.empty()        ? " (the CPU this thread ran on; the others could not be read)"
                    : k.cpus.size() == 1 ? " on CPU " + format_cpu_list(k.cpus)
                                         : " on CPUs " + format_cpu_list(k.cpus));
        return out;
    }
    /// For a heterogeneous machine: "Cortex-A55 on CPUs 0-3, Cortex-A78 on CPUs 4-6, Cortex-X1 on CPU 7".
    std::string layout() const {
        std::string out;
        for (const auto& k : kinds)
            out += (out.empty() ? "" : ", ") + k.cpu.core + (k.cpus.size() == 1 ? " on CPU " : " on CPUs ") +
                   format_cpu_list(k.cpus);
        return out;
    }
    /// How to keep a measured thread on one kind of core: "taskset -c 0-3 (Cortex-A55), taskset -c 4-6
    /// (Cortex-A78) or taskset -c 7 (Cortex-X1)".
    std::string pinning() const {
        std::string out;
        for (std::size_t i = 0; i < kinds.size(); ++i)
            out += std::string(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + "taskset -c " +
                   format_cpu_list(kinds[i].cpus) + " (" + kinds[i].cpu.core + ")";
        return out;
    }
};

/// Groups CPUs by their MIDR_EL1 value. Pure.
inline ArmCpus group_arm_cpus(std::vector<CpuMidr> cpus, std::string source) {
    std::sort(cpus.begin(), cpus.end(), [](const CpuMidr& a, const CpuMidr& b) { return a.cpu < b.cpu; });
    ArmCpus out;
    out.source = std::move(source);
    for (const auto& c : cpus) {
        auto kind = std::find_if(out.kinds.begin(), out.kinds.end(),
                                 [&](const ArmCoreKind& k) { return k.cpu.midr == c.midr; });
        if (kind == out.kinds.end()) kind = out.kinds.insert(out.kinds.end(), ArmCoreKind{decode_midr(c.midr), {}});
        if (c.cpu >= 0) kind->cpus.push_back(c.cpu);
    }
    return out;
}

/// Every CPU's MIDR_EL1: from sysfs (/sys/devices/system/cpu/cpuN/regs/identification/midr_el1, Linux 4.11+), else
/// /proc/cpuinfo, else (on AArch64, with `root` empty) the current CPU's through the mrs the kernel emulates.
/// `root` is prefixed to /sys and /proc (tests point it at a fake tree).
inline ArmCpus arm_cpus(const std::string& root = "") {
    const std::string cpu_dir = root + "/sys/devices/system/cpu";
    std::vector<CpuMidr> found;
    if (DIR* dir = ::opendir(cpu_dir.c_str())) {
        while (const dirent* entry = ::readdir(dir)) {
            const std::string_view name = entry->d_name;
            if (name.size() < 4 || !detail::starts_with(name, "cpu")) continue;
            const auto n = detail::parse_number(name.substr(3)); // cpu0, cpu1, ...; not cpufreq or cpuidle
            if (!n || *n > 65535) continue;
            if (auto text = detail::read_file(cpu_dir + "/" + std::string(name) + "/regs/identification/midr_el1"))
                if (auto midr = parse_midr(*text)) found.push_back({static_cast<int>(*n), *midr});
        }
        ::closedir(dir);
    }
    if (!found.empty()) return group_arm_cpus(std::move(found), cpu_dir + "/cpu*/regs/identification/midr_el1");
    if (auto info = detail::read_file(root + "/proc/cpuinfo")) {
        auto cpus = midrs_from_cpuinfo(*info);
        if (!cpus.empty()) return group_arm_cpus(std::move(cpus), root + "/proc/cpuinfo");
    }
    if (root.empty() && cpu_signature().midr) return group_arm_cpus({{-1, cpu_signature().midr}}, "mrs MIDR_EL1");
    return ArmCpus{};
}

PMC_END_NAMESPACE
