// pmc/machine.hpp: facts about this machine that decide what pmc can count, for tools and for people.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/clock.hpp>
#include <pmc/detail/explain.hpp>

#include <sys/utsname.h>

#include <cstring>
#include <optional>
#include <string>

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

/// True when the TSC ticks at a constant rate (CPUID 0x80000007 EDX[8]); wall-time needs it.
inline bool has_invariant_tsc() { return detail::has_invariant_tsc(); }

/// How wall-time turns TSC ticks into nanoseconds on this machine, and the TSC rate (0 if not used).
struct WallTimeClock {
    bool uses_tsc = false;
    double tsc_hz = 0;
    std::string source;
};
inline WallTimeClock wall_time_clock() {
    const auto& c = detail::tsc_conversion();
    return WallTimeClock{c.usable, c.ticks_per_second, c.source};
}

PMC_END_NAMESPACE
