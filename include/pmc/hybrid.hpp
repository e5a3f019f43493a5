// SPDX-License-Identifier: MIT
// pmc/hybrid.hpp: hybrid CPUs (Intel P-cores + E-cores), where each core type has its own PMU.
//
// On a hybrid machine the kernel exposes cpu_core and cpu_atom instead of cpu, each with its own `type` and the
// list of CPUs it counts on. A hardware event must be opened on the PMU of the core type the thread runs on; a
// thread-bound event on cpu_core simply stops counting while the thread runs on an E-core, so a thread free to
// migrate would get a silently partial count. pmc therefore opens a hardware event on the core type the calling
// thread is confined to, and refuses (saying how to pin) when its affinity spans both types. That is
// rustc-perf's answer too: pin the benchmark to P-cores. pin_this_thread() does it.
#pragma once

#include <pmc/config.hpp>
#include <pmc/cpu.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/error.hpp>
#include <pmc/pmu.hpp>

#include <linux/perf_event.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

PMC_BEGIN_NAMESPACE

/// One core type's PMU on a hybrid machine.
struct CoreTypePmu {
    std::string pmu; ///< "cpu_core" or "cpu_atom"
    std::uint32_t type = 0;
    CoreType core_type = CoreType::unknown;
    std::vector<int> cpus;
    std::string cpus_text; ///< the sysfs list, e.g. "0-15"
};

/// Parses a kernel CPU list such as "0-3,8,10-11"; empty on malformed input.
inline std::vector<int> parse_cpu_list(std::string_view text) {
    std::vector<int> cpus;
    text = detail::trim(text);
    while (!text.empty()) {
        auto comma = text.find(',');
        std::string_view part = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        auto dash = part.find('-');
        auto lo = detail::parse_number(part.substr(0, dash));
        auto hi = dash == std::string_view::npos ? lo : detail::parse_number(part.substr(dash + 1));
        if (!lo || !hi || *lo > *hi || *hi > 65535) return {};
        for (auto c = *lo; c <= *hi; ++c) cpus.push_back(static_cast<int>(c));
    }
    return cpus;
}

namespace detail {
/// The online CPUs (/sys/devices/system/cpu/online); else 0 .. sysconf(_SC_NPROCESSORS_CONF) - 1; else {0}.
inline std::vector<int> online_cpus() {
    if (auto text = read_file("/sys/devices/system/cpu/online")) {
        auto cpus = parse_cpu_list(*text);
        if (!cpus.empty()) return cpus;
    }
    std::vector<int> cpus;
    for (long i = 0, n = ::sysconf(_SC_NPROCESSORS_CONF); i < n; ++i) cpus.push_back(static_cast<int>(i));
    if (cpus.empty()) cpus.push_back(0);
    return cpus;
}
} // namespace detail

/// The inverse: "0-3,8" for {0, 1, 2, 3, 8} (in any order).
inline std::string format_cpu_list(std::vector<int> cpus) {
    std::sort(cpus.begin(), cpus.end());
    std::string out;
    for (std::size_t i = 0; i < cpus.size();) {
        std::size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
        i = j + 1;
    }
    return out;
}

/// The core-type PMUs of a hybrid machine; empty when the machine is not hybrid.
inline std::vector<CoreTypePmu> hybrid_pmus(std::string_view root = default_sysfs_root) {
    std::vector<CoreTypePmu> out;
    for (const char* name : {"cpu_core", "cpu_atom"}) {
        auto pmu = load_pmu(name, root);
        if (!pmu) continue;
        CoreTypePmu p;
        p.pmu = name;
        p.type = pmu->type;
        p.core_type = p.pmu == "cpu_core" ? CoreType::performance : CoreType::efficiency;
        p.cpus_text = pmu->cpus;
        p.cpus = parse_cpu_list(pmu->cpus);
        out.push_back(std::move(p));
    }
    return out;
}

/// The CPUs the calling thread may run on.
inline std::vector<int> thread_affinity() {
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(static_cast<std::size_t>(c), &set)) cpus.push_back(c);
    return cpus;
}

/// Which core-type PMU a hardware event must be opened on, for a thread allowed to run on `affinity`.
struct CorePmuChoice {
    const CoreTypePmu* pmu = nullptr; ///< null with a non-empty `error`: refuse
    std::string error;
};

/// Pure: the PMU whose CPUs contain all of `affinity`; if the affinity spans core types, an error that says how to
/// pin. `wanted` names a PMU the event string chose explicitly (cpu_core/.../), "" for generic events.
inline CorePmuChoice choose_core_pmu(const std::vector<CoreTypePmu>& pmus, const std::vector<int>& affinity,
                                     std::string_view wanted = {}) {
    CorePmuChoice choice;
    auto covers = [&](const CoreTypePmu& p) {
        return !affinity.empty() && std::all_of(affinity.begin(), affinity.end(), [&](int cpu) {
            return std::find(p.cpus.begin(), p.cpus.end(), cpu) != p.cpus.end();
        });
    };
    for (const auto& p : pmus)
        if ((wanted.empty() || p.pmu == wanted) && covers(p)) {
            choice.pmu = &p;
            return choice;
        }
    std::string types;
    for (const auto& p : pmus) detail::append(types, {types.empty() ? "" : ", ", p.pmu, " on CPUs ", p.cpus_text});
    choice.error = detail::concat(
        {"this is a hybrid CPU (", types, ") and this thread may run on ",
         wanted.empty() ? "both core types" : "CPUs outside ", wanted,
         ": a hardware counter counts only on its own core type, so the count would silently miss the time spent on "
         "the other.\nFix: pin the thread to one core type first: pmc::pin_this_thread(pmc::CoreType::performance) "
         "(or taskset -c <",
         pmus.empty() ? std::string_view("cpus") : std::string_view(pmus.front().cpus_text), "> your-program)."});
    return choice;
}

/// Rewrites a core-PMU attr to be opened on `pmu`: generic hardware and cache events carry the PMU type in the
/// upper 32 bits of config (the kernel's extended type, Linux 6.0 and later); raw events take it as their type.
inline perf_event_attr on_core_pmu(perf_event_attr attr, const CoreTypePmu& pmu) {
    if (attr.type == PERF_TYPE_HARDWARE || attr.type == PERF_TYPE_HW_CACHE)
        attr.config = (attr.config & 0xffffffffull) | (std::uint64_t{pmu.type} << 32);
    else if (attr.type == PERF_TYPE_RAW)
        attr.type = pmu.type;
    return attr;
}

/// Confines the calling thread to the CPUs of one core type (hybrid machines only), among those it may already
/// use: `taskset -c 0,15 program` pinned to the performance cores stays on whichever of 0 and 15 is one.
inline std::optional<Failure> pin_this_thread(CoreType type, std::string_view root = default_sysfs_root) {
    for (const auto& p : hybrid_pmus(root)) {
        if (p.core_type != type) continue;
        const std::vector<int> allowed = thread_affinity();
        cpu_set_t set;
        CPU_ZERO(&set);
        int chosen = 0;
        for (int c : p.cpus)
            if (c >= 0 && c < CPU_SETSIZE &&
                (allowed.empty() || std::find(allowed.begin(), allowed.end(), c) != allowed.end())) {
                CPU_SET(static_cast<std::size_t>(c), &set);
                ++chosen;
            }
        if (chosen == 0)
            return make_failure(EINVAL, "cannot pin this thread to the " + std::string(to_string(type)) + " cores (" +
                                            p.cpus_text + "): it may not run on any of them (its CPU affinity "
                                            "excludes them; see taskset -p)");
        if (::sched_setaffinity(0, sizeof set, &set) != 0) {
            const int err = errno;
            return make_failure(err, "cannot pin this thread to the " + std::string(to_string(type)) + " cores (" +
                                         p.cpus_text + "): sched_setaffinity failed: " + std::strerror(err));
        }
        return std::nullopt;
    }
    return make_failure(ENODEV, std::string("cannot pin to ") + to_string(type) +
                                    " cores: this machine is not hybrid (no cpu_core/cpu_atom PMUs)");
}

PMC_END_NAMESPACE
