// SPDX-License-Identifier: MIT
// pmc/emulated.hpp: the emulated PMU, exact instruction counts on machines without a hardware PMU.
//
//     pmc emulate -- ./my_program args      # runs it under QEMU user mode with pmc's TCG plugin
//
// Inside such a program, pmc::Counter{"instructions:u"} (also "instructions" and "instructions-minus-irqs:u")
// opens on the emulated PMU: each read asks the plugin for the calling thread's count of executed instructions,
// exact at the read. Nothing in the program changes: the same counter opens the hardware PMU when the program runs
// directly. The other events need perf_event_open, which QEMU's user mode does not implement: they are refused
// with that reason (wall-time and tsc work, read from the host's clock). docs/emulated-pmu.md says how emulated
// counts differ from a real core's.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/emulated.hpp>
#include <pmc/event.hpp>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

PMC_BEGIN_NAMESPACE

/// What pmc says wherever an emulated count is shown.
inline constexpr const char* emulated_count_note =
    "emulated (QEMU TCG): exact count of the instructions the emulator executed for this thread, not a real core's";

/// The emulated PMU this process runs under.
struct EmulatedPmu {
    std::string target;          ///< the guest architecture QEMU emulates: "x86_64", "aarch64"
    std::uint32_t protocol = 0;  ///< the plugin's protocol version
    bool compatible() const noexcept { return protocol == detail::emulated::protocol_version; }
};

namespace detail {
inline std::optional<EmulatedPmu> probe_emulated_pmu() {
    if (!emulated::request_supported) return std::nullopt;
    const char* announced = std::getenv(emulated::announce_variable); // no request outside the emulator
    if (!announced || std::strcmp(announced, "1") != 0) return std::nullopt;
    emulated::Hello hello{};
    emulated::request(emulated::Op::hello, &hello); // a real kernel: ENOSYS, and hello stays zero
    if (hello.reply != emulated::hello_reply) return std::nullopt;
    EmulatedPmu pmu;
    hello.target[sizeof hello.target - 1] = '\0';
    pmu.target = hello.target;
    pmu.protocol = hello.protocol;
    return pmu;
}
} // namespace detail

/// The emulated PMU, if this process runs under `pmc emulate` (which sets PMC_EMULATED=1). There, the first call
/// costs one request to the plugin; elsewhere nothing is asked. The answer is kept for the process's life.
inline const std::optional<EmulatedPmu>& emulated_pmu() {
    static const std::optional<EmulatedPmu> pmu = detail::probe_emulated_pmu();
    return pmu;
}

/// True when this program runs under QEMU's TCG (x86: the CPUID hypervisor signature "TCGTCGTCGTCG"), with or
/// without pmc's plugin.
inline bool under_qemu_tcg() {
#if PMC_ARCH_X86_64
    if (!detail::under_hypervisor()) return false;
    const auto r = detail::cpuid(0x40000000);
    char sig[13] = {};
    std::memcpy(sig, &r.ebx, 4);
    std::memcpy(sig + 4, &r.ecx, 4);
    std::memcpy(sig + 8, &r.edx, 4);
    return std::strcmp(sig, "TCGTCGTCGTCG") == 0;
#else
    return false;
#endif
}

/// Whether `spec` is an instruction count the emulated PMU can give (instructions, instructions:u,
/// instructions-minus-irqs:u). Its raw code (r00c0) is a real CPU's encoding, and is not.
inline bool is_instruction_event(const EventSpec& spec) {
    const bool generic = spec.attr.type == PERF_TYPE_HARDWARE &&
                         (spec.attr.config & 0xffffffffULL) == PERF_COUNT_HW_INSTRUCTIONS;
    return (spec.kind == EventKind::perf || spec.kind == EventKind::difference) && generic;
}

/// Why the emulated PMU cannot count `spec`, or "" if it can.
inline std::string emulated_refusal(const EventSpec& spec) {
    if (spec.kind == EventKind::wall_time || spec.kind == EventKind::tsc) return "";
    if (!is_instruction_event(spec) && spec.attr.type == PERF_TYPE_RAW)
        return "the emulated PMU (pmc emulate) counts instructions only, named: instructions:u, instructions or "
               "instructions-minus-irqs:u; a raw code such as '" + spec.text + "' is a real CPU's encoding";
    if (!is_instruction_event(spec))
        return "the emulated PMU (pmc emulate) counts instructions only (instructions:u, instructions, "
               "instructions-minus-irqs:u); '" + spec.text + "' is opened with perf_event_open, which QEMU's user "
               "mode does not implement. Count it in a run without the emulator, where this machine can";
    if (spec.attr.exclude_user)
        return "the emulated PMU counts the program's own (user-mode) instructions; '" + spec.text +
               "' excludes user mode, and the emulator runs no kernel code to count";
    return "";
}

PMC_END_NAMESPACE
