// SPDX-License-Identifier: MIT
// pmc/emulated.hpp: the emulated PMU, exact instruction counts on machines without a hardware PMU.
//
//     pmc emulate -- ./my_program args      # runs it under QEMU user mode with pmc's TCG plugin
//
// Inside such a program, pmc::Counter{"instructions:u"} (also "instructions" and "instructions-minus-irqs:u")
// opens on the emulated PMU: each read asks the plugin for the calling thread's count of executed instructions,
// exact at the read. Under `pmc emulate --cache` perf's generic cache events (L1-dcache-load-misses:u, LLC-loads:u,
// cache-misses:u, ...) open too and read the thread's cache model (modelled, not a real core's caches; without
// --cache they are refused naming the flag), and pmc::Sampler samples the thread's loads on a load-latency event
// (cpu/mem-loads,ldlat=N/P: every Nth load, its level and a latency from the model). Nothing in the program changes: the same counter opens the hardware PMU when the program runs
// directly. The other events need perf_event_open, which QEMU's user mode does not implement: they are refused
// with that reason (wall-time and tsc work, read from the host's clock). docs/emulated-pmu.md says how emulated
// counts differ from a real core's.
#pragma once

#include <pmc/config.hpp>
#include <pmc/cpu.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/emulated.hpp>
#include <pmc/event.hpp>
#include <pmc/modelled_events.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

PMC_BEGIN_NAMESPACE

/// What pmc says wherever an emulated count is shown.
inline constexpr const char* emulated_count_note =
    "emulated (QEMU TCG): exact count of the instructions the emulator executed for this thread, not a real core's";

/// The emulated PMU this process runs under.
struct EmulatedPmu {
    std::string target;          ///< the guest architecture QEMU emulates: "x86_64", "aarch64"
    std::uint32_t protocol = 0;  ///< the plugin's protocol version
    bool cache_model = false;    ///< pmc emulate --cache: the modelled cache events open too
    bool load_sampling = false;  ///< pmc emulate --cache: pmc::Sampler samples loads from the model
    std::string cache_geometry;  ///< the model's geometry, as "I1 32768,8,64, D1 32768,8,64, LL 8388608,16,64"
    /// One modelled cache's shape in bytes, as Valgrind's --D1=SIZE,ASSOC,LINE; all 0 for a level that is absent.
    struct Cache {
        std::uint32_t size = 0, assoc = 0, line = 0;
    };
    Cache i1, d1, l2, ll;        ///< the model's levels (pmc emulate --cache); l2.size is 0 without --L2
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
    pmu.load_sampling = (hello.flags & emulated::hello_load_sampling) != 0;
    pmu.branch_model = (hello.flags & emulated::hello_branch_model) != 0;
    if (hello.flags & emulated::hello_cache_model) {
        emulated::CacheConfig c{};
        emulated::request(emulated::Op::cache_config, &c);
        const auto shape = [](const char* name, const std::uint32_t (&g)[3]) {
            return std::string(name) + " " + std::to_string(g[0]) + "," + std::to_string(g[1]) + "," +
                   std::to_string(g[2]);
        };
        pmu.cache_model = true;
        const auto take = [](const std::uint32_t (&g)[3]) { return EmulatedPmu::Cache{g[0], g[1], g[2]}; };
        pmu.i1 = take(c.i1);
        pmu.d1 = take(c.d1);
        pmu.l2 = take(c.l2);
        pmu.ll = take(c.ll);
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

/// The emulator a record of this run names (a profile's header, a bench result): what pmc emulate told the program
/// (PMC_EMULATE_EMULATOR: QEMU's version and plugin API); "" outside the emulated PMU.
inline std::string recorded_emulator() {
    if (!emulated_pmu()) return "";
    const char* e = std::getenv(detail::emulated::emulator_variable);
    return e && *e ? std::string(e) : std::string("QEMU, version unknown (not started by pmc emulate)");
}

/// The CPU a record of this run names: under the emulated PMU the model QEMU presents, else this machine's.
inline std::string recorded_cpu() {
    if (emulated_pmu())
        return "emulated by QEMU's TCG (pmc emulate): the CPU model QEMU presents, " + this_cpu().description() +
               ", not the host's";
    return this_cpu().description() + (detail::under_hypervisor() ? ", under a hypervisor" : "");
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
/// LLC-store-misses, cache-references, cache-misses: pmc/modelled_events.hpp's list, which a unit test holds to
/// these codes), or nothing. Under `pmc emulate --cache` these read the thread's cache model.
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

/// The branch predictor branch-misses come from (pmc emulate --branches): recorded and compared as cache_model_text.
inline constexpr const char* branch_model_text =
    "Cachegrind's branch predictor (16384 2-bit counters indexed by 7 bits of global history and 7 of the address; a "
    "512-entry indirect target table; returns never miss)";

/// What pmc says wherever a branch event's count is shown.
inline std::string branch_count_note(const EventSpec& spec) {
    if (modelled_branch_event(spec) == detail::emulated::Event::branch_instructions)
        return "emulated (pmc emulate --branches): an exact count of the branch instructions the emulator executed "
               "for this thread (conditional or not, jumps, calls, returns), not a real core's";
    return "modelled (pmc emulate --branches): " + std::string(branch_model_text) +
           ", this thread's own, exact for the model at the read; not a real core's predictor";
}

/// The cache model a run's modelled cache events come from, with the geometry the plugin reported: what a profile's
/// counter note and a bench result record, and what pmc diff and bench --compare compare.
inline std::string cache_model_text(const EmulatedPmu& pmu) {
    return "Cachegrind's cache model (" + pmu.cache_geometry + "; LRU, write-allocate)";
}

/// What pmc says wherever a modelled count is shown (with the geometry the plugin reported).
inline std::string modelled_count_note(const EmulatedPmu& pmu) {
    return "modelled (pmc emulate --cache): " + cache_model_text(pmu) +
           ", this thread's caches of its own, exact for the model at the read; not a real core's caches";
}

namespace detail {
/// A list of pmc/modelled_events.hpp joined by `separator`, for the refusals' text.
template <std::size_t N>
std::string joined_event_names(const std::string_view (&names)[N], const char* separator) {
    std::string out;
    for (const std::string_view name : names) out += (out.empty() ? "" : separator) + std::string(name);
    return out;
}
} // namespace detail

/// What the emulated PMU counts besides instructions, with which flag: built from pmc/modelled_events.hpp's lists,
/// so that a refusal names every event the emulator answers, and only those.
inline std::string emulated_model_events_text() {
    return "under pmc emulate --cache the modelled cache events (" +
           detail::joined_event_names(modelled_cache_event_names, ", ") + "), under pmc emulate --branches " +
           detail::joined_event_names(branch_count_event_names, " or ") + " and " +
           detail::joined_event_names(modelled_branch_event_names, ", ");
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
    if (!is_instruction_event(spec) && spec.attr.type == PERF_TYPE_SOFTWARE)
        return "the emulated PMU (pmc emulate) counts instructions, " + emulated_model_events_text() + "; '" +
               spec.text + "' is a kernel software event: it needs no PMU but perf_event_open, which QEMU's user "
               "mode does not implement, and the kernel could not tell the program's share anyway (under the "
               "emulator the program's pages, faults, switches and CPU time are QEMU's process's, QEMU's own work "
               "included). Count it natively, where no PMU is needed: pmc count -e " + spec.text + " -- COMMAND";
    if (!is_instruction_event(spec))
        return "the emulated PMU (pmc emulate) counts instructions (instructions:u, instructions, "
               "instructions-minus-irqs:u), " + emulated_model_events_text() + "; '" + spec.text +
               "' is opened with perf_event_open, which QEMU's user mode does not implement. Count it natively, on a "
               "machine whose PMU has it (`pmc doctor` says whether this one has a PMU)";
    if (spec.attr.exclude_user)
        return "the emulated PMU counts the program's own (user-mode) instructions; '" + spec.text +
               "' excludes user mode, and the emulator runs no kernel code to count";
    return "";
}

/// A load-latency sampling event as a program names it on a real PMU, for the emulated PMU's load sampling.
struct LoadLatencyEvent {
    std::uint32_t min_latency = 3; ///< ldlat: loads served in fewer (modelled) cycles are not counted; perf's default 3
    std::uint64_t period = 0;      ///< the period=N term (SamplerOptions::period, when set, takes precedence), or 0
    std::string problem;           ///< why the emulated PMU cannot sample it as written, or ""
};

/// Whether `text` names load-latency sampling: Intel's `cpu/mem-loads[,ldlat=N]/[upP]` (also `cpu_core/...`) or a
/// bare `mem-loads[:upP]`, which the emulated PMU samples from its cache model; or AMD's `ibs_op//`, which it cannot
/// (IBS samples every Nth op, not load), said in `problem`.
inline std::optional<LoadLatencyEvent> load_latency_event(std::string_view text) {
    LoadLatencyEvent e;
    std::string_view modifiers;
    if (text.rfind("ibs_op/", 0) == 0) {
        e.problem = "AMD IBS samples every Nth operation, and the emulated PMU samples loads: under pmc emulate "
                    "--cache open 'cpu/mem-loads,ldlat=N/P' (Intel's load-latency event; pmc::emulated_pmu() says "
                    "when the program runs there)";
        return e;
    }
    if (text.rfind("mem-loads", 0) == 0 && (text.size() == 9 || text[9] == ':')) {
        modifiers = text.size() > 9 ? text.substr(10) : std::string_view{};
    } else {
        const std::size_t slash = text.find('/');
        if (slash == std::string_view::npos || (text.substr(0, slash) != "cpu" && text.substr(0, slash) != "cpu_core"))
            return std::nullopt;
        const std::size_t close = text.find('/', slash + 1);
        if (close == std::string_view::npos) return std::nullopt;
        std::string_view terms = text.substr(slash + 1, close - slash - 1);
        modifiers = text.substr(close + 1);
        bool loads = false;
        while (!terms.empty()) {
            const std::size_t comma = terms.find(',');
            const std::string_view term = terms.substr(0, comma);
            terms = comma == std::string_view::npos ? std::string_view{} : terms.substr(comma + 1);
            if (term == "mem-loads") {
                loads = true;
            } else if (term.rfind("ldlat=", 0) == 0) {
                std::uint32_t v = 0;
                bool digits = term.size() > 6;
                for (char c : term.substr(6)) {
                    if (c < '0' || c > '9' || v > 100000) digits = false;
                    else v = v * 10 + static_cast<std::uint32_t>(c - '0');
                }
                if (!digits) e.problem = "ldlat takes a whole number of cycles, not '" + std::string(term.substr(6)) + "'";
                e.min_latency = v;
            } else if (term.rfind("period=", 0) == 0) {
                std::uint64_t v = 0;
                bool digits = term.size() > 7;
                for (char c : term.substr(7)) {
                    if (c < '0' || c > '9' || v > 1000000000000000u) digits = false;
                    else v = v * 10 + static_cast<std::uint64_t>(c - '0');
                }
                if (!digits || v == 0)
                    e.problem = "period takes a positive whole number of loads, not '" + std::string(term.substr(7)) + "'";
                e.period = v;
            } else if (term.rfind("freq=", 0) == 0) {
                e.problem = "the emulated PMU samples every Nth load, exactly: give period=N, not a frequency";
            } else {
                e.problem = "the emulated PMU's load sampling takes the terms mem-loads, ldlat=N and period=N, not '" +
                            std::string(term) + "'";
            }
        }
        if (!loads) return std::nullopt;
    }
    for (char m : modifiers)
        if (m == 'k')
            e.problem = "the emulated PMU samples the program's own (user-mode) loads; '" + std::string(text) +
                        "' asks for kernel mode";
        else if (m != 'u' && m != 'p' && m != 'P')
            e.problem = "the emulated PMU's load sampling takes the modifiers u, p and P, not '" + std::string(1, m) + "'";
    return e;
}

/// What pmc says wherever a modelled load sample is shown, with the latencies (cycles) the model states for a load
/// served by L1, L2, LL and memory.
inline std::string modelled_load_sample_note(const std::uint32_t (&latencies)[4]) {
    return "modelled (pmc emulate --cache): every Nth load of this thread, exactly, with the level of Cachegrind's "
           "cache model that served it and the latency the model states for that level (L1 " +
           std::to_string(latencies[0]) + ", L2 " + std::to_string(latencies[1]) + ", LL " +
           std::to_string(latencies[2]) + ", memory " + std::to_string(latencies[3]) +
           " cycles); not measured, not a real core's";
}

PMC_END_NAMESPACE
