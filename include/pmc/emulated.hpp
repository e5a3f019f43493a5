// SPDX-License-Identifier: MIT
// pmc/emulated.hpp: the emulated PMU, exact instruction counts on machines without a hardware PMU.
//
//     pmc emulate -- ./my_program args      # runs it under QEMU user mode with pmc's TCG plugin
//
// Inside such a program, pmc::Counter{"instructions:u"} (also "instructions" and "instructions-minus-irqs:u")
// opens on the emulated PMU: each read asks the plugin for the calling thread's count of executed instructions,
// exact at the read. Under `pmc emulate --cache` perf's generic cache events (L1-dcache-load-misses:u, LLC-loads:u,
// cache-misses:u, ...) open too and read the thread's cache model (modelled, not a real core's caches; without
// --cache they are refused naming the flag). Nothing in the program changes: the same counter opens the hardware PMU when the program runs
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
    bool cache_model = false;    ///< pmc emulate --cache: the modelled cache events open too
    std::string cache_geometry;  ///< the model's geometry, as "I1 32768,8,64, D1 32768,8,64, LL 8388608,16,64"
    bool branch_model = false;   ///< pmc emulate --branches: branch-instructions and branch-misses open too
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
    pmu.branch_model = (hello.flags & emulated::hello_branch_model) != 0;
    if (hello.flags & emulated::hello_cache_model) {
        emulated::CacheConfig c{};
        emulated::request(emulated::Op::cache_config, &c);
        const auto shape = [](const char* name, const std::uint32_t (&g)[3]) {
            return std::string(name) + " " + std::to_string(g[0]) + "," + std::to_string(g[1]) + "," +
                   std::to_string(g[2]);
        };
        pmu.cache_model = true;
        pmu.cache_geometry = shape("I1", c.i1) + ", " + shape("D1", c.d1) + ", " +
                             (c.l2[0] ? shape("L2", c.l2) + ", " : std::string()) + shape("LL", c.ll) +
                             (c.strict_inclusion ? ", strict inclusion" : "");
    }
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

/// The modelled cache event `spec` names (perf's generic cache events: L1-dcache-loads, L1-dcache-load-misses,
/// L1-dcache-stores, L1-dcache-store-misses, L1-icache-load-misses, LLC-loads, LLC-load-misses, LLC-stores,
/// LLC-store-misses, cache-references, cache-misses), or nothing. Under `pmc emulate --cache` these read the
/// thread's cache model.
inline std::optional<detail::emulated::Event> modelled_cache_event(const EventSpec& spec) {
    using E = detail::emulated::Event;
    if (spec.kind != EventKind::perf) return std::nullopt;
    const std::uint64_t config = spec.attr.config & 0xffffffffULL;
    if (spec.attr.type == PERF_TYPE_HARDWARE) {
        if (config == PERF_COUNT_HW_CACHE_REFERENCES) return E::cache_references;
        if (config == PERF_COUNT_HW_CACHE_MISSES) return E::cache_misses;
        return std::nullopt;
    }
    if (spec.attr.type != PERF_TYPE_HW_CACHE) return std::nullopt;
    const std::uint64_t cache = config & 0xff, op = (config >> 8) & 0xff, result = (config >> 16) & 0xff;
    const bool miss = result == PERF_COUNT_HW_CACHE_RESULT_MISS;
    if (result > PERF_COUNT_HW_CACHE_RESULT_MISS || op > PERF_COUNT_HW_CACHE_OP_WRITE) return std::nullopt;
    const bool write = op == PERF_COUNT_HW_CACHE_OP_WRITE;
    if (cache == PERF_COUNT_HW_CACHE_L1D)
        return write ? (miss ? E::l1d_store_misses : E::l1d_stores) : (miss ? E::l1d_load_misses : E::l1d_loads);
    if (cache == PERF_COUNT_HW_CACHE_LL)
        return write ? (miss ? E::llc_store_misses : E::llc_stores) : (miss ? E::llc_load_misses : E::llc_loads);
    if (cache == PERF_COUNT_HW_CACHE_L1I && !write && miss) return E::l1i_load_misses;
    return std::nullopt;
}

/// The branch event `spec` names under `pmc emulate --branches` (perf's generic branch-instructions, or branches,
/// and branch-misses), or nothing.
inline std::optional<detail::emulated::Event> modelled_branch_event(const EventSpec& spec) {
    using E = detail::emulated::Event;
    if (spec.kind != EventKind::perf || spec.attr.type != PERF_TYPE_HARDWARE) return std::nullopt;
    const std::uint64_t config = spec.attr.config & 0xffffffffULL;
    if (config == PERF_COUNT_HW_BRANCH_INSTRUCTIONS) return E::branch_instructions;
    if (config == PERF_COUNT_HW_BRANCH_MISSES) return E::branch_misses;
    return std::nullopt;
}

/// A modelled cache event (pmc emulate --cache) or a branch event (pmc emulate --branches), or nothing.
inline std::optional<detail::emulated::Event> modelled_event(const EventSpec& spec) {
    if (auto e = modelled_cache_event(spec)) return e;
    return modelled_branch_event(spec);
}

/// Why this run cannot count the modelled event `spec` names, naming the flag that would ("" if it can).
inline std::string missing_model(const EmulatedPmu& pmu, const EventSpec& spec) {
    if (modelled_cache_event(spec) && !pmu.cache_model)
        return "'" + spec.text + "' is a modelled cache event, and this run has no cache model. Fix: run the "
               "program under `pmc emulate --cache -- PROGRAM` (the model: Cachegrind's, per thread)";
    if (modelled_branch_event(spec) && !pmu.branch_model)
        return "'" + spec.text + "' is a branch event, and this run counts no branches. Fix: run the program under "
               "`pmc emulate --branches -- PROGRAM` (branch-instructions exact, branch-misses from Cachegrind's "
               "predictor, per thread)";
    return "";
}

/// What pmc says wherever a branch event's count is shown.
inline std::string branch_count_note(const EventSpec& spec) {
    if (modelled_branch_event(spec) == detail::emulated::Event::branch_instructions)
        return "emulated (pmc emulate --branches): an exact count of the branch instructions the emulator executed "
               "for this thread (conditional or not, jumps, calls, returns), not a real core's";
    return "modelled (pmc emulate --branches): Cachegrind's branch predictor (16384 2-bit counters indexed by 7 bits "
           "of global history and 7 of the address; a 512-entry indirect target table; returns never miss), this "
           "thread's own, exact for the model at the read; not a real core's predictor";
}

/// What pmc says wherever a modelled count is shown (with the geometry the plugin reported).
inline std::string modelled_count_note(const EmulatedPmu& pmu) {
    return "modelled (pmc emulate --cache): Cachegrind's cache model (" + pmu.cache_geometry +
           "; LRU, write-allocate), this thread's caches of its own, exact for the model at the read; not a real "
           "core's caches";
}

/// Why the emulated PMU cannot count `spec`, or "" if it can. A modelled cache event can be counted; whether this
/// run has the model (pmc emulate --cache) is checked when it opens.
inline std::string emulated_refusal(const EventSpec& spec) {
    if (spec.kind == EventKind::wall_time || spec.kind == EventKind::tsc) return "";
    if (modelled_cache_event(spec)) {
        if (spec.attr.exclude_user)
            return "the cache model sees the program's own (user-mode) accesses; '" + spec.text +
                   "' excludes user mode";
        return "";
    }
    if (modelled_branch_event(spec)) {
        if (spec.attr.exclude_user)
            return "the emulator sees the program's own (user-mode) branches; '" + spec.text + "' excludes user mode";
        return "";
    }
    if (!is_instruction_event(spec) && spec.attr.type == PERF_TYPE_RAW)
        return "the emulated PMU (pmc emulate) counts instructions only, named: instructions:u, instructions or "
               "instructions-minus-irqs:u; a raw code such as '" + spec.text + "' is a real CPU's encoding";
    if (!is_instruction_event(spec))
        return "the emulated PMU (pmc emulate) counts instructions (instructions:u, instructions, "
               "instructions-minus-irqs:u), under pmc emulate --cache the modelled cache events (L1-dcache-*, "
               "L1-icache-load-misses, LLC-*, cache-references, cache-misses), under pmc emulate --branches "
               "branch-instructions and branch-misses; '" + spec.text + "' is opened with perf_event_open, which QEMU's user "
               "mode does not implement. Count it in a run without the emulator, where this machine can";
    if (spec.attr.exclude_user)
        return "the emulated PMU counts the program's own (user-mode) instructions; '" + spec.text +
               "' excludes user mode, and the emulator runs no kernel code to count";
    return "";
}

PMC_END_NAMESPACE
