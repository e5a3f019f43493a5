// SPDX-License-Identifier: MIT
// pmc/cpu.hpp: which CPU this is, as far as exact counting is concerned.
//
// identify() maps the cpuid signature (vendor string and leaf 1 EAX: family, model, stepping, with the extended
// fields) to a named microarchitecture, the hardware-interrupt event instructions-minus-irqs subtracts, and the
// quirks that matter (AMD's SpecLockMap, hybrid cores). It is a pure function, so every row of the tables is
// tested without the CPU; this_cpu() feeds it the running CPU's cpuid. A model the tables do not know is a named
// outcome, explained in CpuModel::warning: above a family's highest known model pmc assumes the family's newest
// microarchitecture; an unknown model below it (a gap in the tables, or an old part) stays "unknown", with no
// interrupt event. On AArch64 the CPU is named by MIDR_EL1 instead (decode_midr(): implementer and part, from
// the kernel's arch/arm64/include/asm/cputype.h); no interrupt event is known there.
//
// Sources: Intel models from the kernel's arch/x86/include/asm/intel-family.h; AMD Zen generations from the
// kernel's bsp_init_amd(); interrupt events from measureme, rr and the kernel's perf event tables (see
// design notes §4 and docs/exact-counts.md).
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/text.hpp>

#if PMC_ARCH_AARCH64
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

PMC_BEGIN_NAMESPACE

enum class Vendor { intel, amd, hygon, other };

inline const char* to_string(Vendor v) {
    switch (v) {
    case Vendor::intel: return "Intel";
    case Vendor::amd: return "AMD";
    case Vendor::hygon: return "Hygon";
    case Vendor::other: return "other";
    }
    return "?";
}

/// The cpuid signature: vendor, and family/model/stepping with the extended fields folded in. On AArch64 the CPU
/// is named by its MIDR_EL1 instead (vendor other, family 0).
struct CpuSignature {
    Vendor vendor = Vendor::other;
    std::string vendor_id; ///< the 12-character cpuid vendor string, e.g. "AuthenticAMD"
    unsigned family = 0, model = 0, stepping = 0;
    std::uint32_t midr = 0; ///< AArch64: MIDR_EL1 (never 0: its architecture field is 0xf); 0 elsewhere
};

/// Decodes leaf 1 EAX as the SDM and APM define it: the extended family is added when the base family is 0xF; the
/// extended model is prefixed when the base family is 6 or 0xF.
inline CpuSignature decode_signature(std::string_view vendor_id, std::uint32_t leaf1_eax) {
    CpuSignature s;
    s.vendor_id = std::string(vendor_id);
    s.vendor = vendor_id == "GenuineIntel"   ? Vendor::intel
               : vendor_id == "AuthenticAMD" ? Vendor::amd
               : vendor_id == "HygonGenuine" ? Vendor::hygon
                                             : Vendor::other;
    const unsigned base_family = (leaf1_eax >> 8) & 0xf, base_model = (leaf1_eax >> 4) & 0xf;
    s.stepping = leaf1_eax & 0xf;
    s.family = base_family == 0xf ? base_family + ((leaf1_eax >> 20) & 0xff) : base_family;
    s.model = (base_family == 6 || base_family == 0xf) ? (((leaf1_eax >> 16) & 0xf) << 4) | base_model : base_model;
    return s;
}

/// An AArch64 CPU as its MIDR_EL1 names it: implementer, variant, part number and revision (Arm's "rVpR").
struct ArmCpu {
    std::uint32_t midr = 0;
    unsigned implementer = 0, variant = 0, part = 0, revision = 0;
    std::string implementer_name; ///< "Arm", "Apple", "Ampere", ...; "implementer 0x4b" when not in the tables
    std::string core;             ///< "Neoverse N1", "M1 Firestorm (performance core)"; "unknown" when not in them
    std::string warning;          ///< set when the implementer or part is not in pmc's tables

    /// "Arm Neoverse N1"
    std::string name() const { return implementer_name + " " + core; }
    /// "Arm Neoverse N1 r3p1 (MIDR 0x413fd0c1)"; QEMU's max CPU has no revision to speak of.
    std::string description() const {
        char buf[48];
        if (implementer == 0)
            std::snprintf(buf, sizeof buf, " (MIDR 0x%08x)", midr);
        else
            std::snprintf(buf, sizeof buf, " r%up%u (MIDR 0x%08x)", variant, revision, midr);
        return name() + buf;
    }
};

namespace detail {

struct ArmImplementerRow {
    unsigned implementer;
    const char* name;
};
// The kernel's ARM_CPU_IMP_* (arch/arm64/include/asm/cputype.h); 0 is "reserved for software use" (QEMU).
inline constexpr ArmImplementerRow arm_implementers[] = {
    {0x00, "QEMU"},      {0x41, "Arm"},      {0x42, "Broadcom"},  {0x43, "Cavium"},
    {0x46, "Fujitsu"},   {0x48, "HiSilicon"}, {0x4e, "NVIDIA"},   {0x50, "Applied Micro (Ampere)"},
    {0x51, "Qualcomm"},  {0x61, "Apple"},    {0x6d, "Microsoft"}, {0xc0, "Ampere"},
};

struct ArmPartRow {
    unsigned implementer, part;
    int variant; ///< -1: any; otherwise only this variant (APM's X-Gene generations share part 0)
    const char* core;
};
// Part numbers from the kernel's cputype.h (the *_CPU_PART_* macros). Ampere's Altra and Altra Max are Neoverse
// N1 cores and report Arm's implementer; only AmpereOne reports Ampere's. QEMU's "-cpu max" under TCG reports
// implementer 0, part 'Q' (target/arm/cpu64.c, aarch64_max_tcg_initfn); under KVM it reports the host's MIDR.
inline constexpr ArmPartRow arm_parts[] = {
    {0x00, 0x051, -1, "max CPU (TCG emulation)"},
    {0x41, 0xd00, -1, "Foundation model"},
    {0x41, 0xd0f, -1, "AEM v8 model"},
    {0x41, 0xd03, -1, "Cortex-A53"},
    {0x41, 0xd04, -1, "Cortex-A35"},
    {0x41, 0xd05, -1, "Cortex-A55"},
    {0x41, 0xd07, -1, "Cortex-A57"},
    {0x41, 0xd08, -1, "Cortex-A72"},
    {0x41, 0xd09, -1, "Cortex-A73"},
    {0x41, 0xd0a, -1, "Cortex-A75"},
    {0x41, 0xd0b, -1, "Cortex-A76"},
    {0x41, 0xd0c, -1, "Neoverse N1"},
    {0x41, 0xd0d, -1, "Cortex-A77"},
    {0x41, 0xd0e, -1, "Cortex-A76AE"},
    {0x41, 0xd40, -1, "Neoverse V1"},
    {0x41, 0xd41, -1, "Cortex-A78"},
    {0x41, 0xd42, -1, "Cortex-A78AE"},
    {0x41, 0xd44, -1, "Cortex-X1"},
    {0x41, 0xd46, -1, "Cortex-A510"},
    {0x41, 0xd47, -1, "Cortex-A710"},
    {0x41, 0xd48, -1, "Cortex-X2"},
    {0x41, 0xd49, -1, "Neoverse N2"},
    {0x41, 0xd4b, -1, "Cortex-A78C"},
    {0x41, 0xd4c, -1, "Cortex-X1C"},
    {0x41, 0xd4d, -1, "Cortex-A715"},
    {0x41, 0xd4e, -1, "Cortex-X3"},
    {0x41, 0xd4f, -1, "Neoverse V2"},
    {0x41, 0xd80, -1, "Cortex-A520"},
    {0x41, 0xd81, -1, "Cortex-A720"},
    {0x41, 0xd82, -1, "Cortex-X4"},
    {0x41, 0xd83, -1, "Neoverse V3AE"},
    {0x41, 0xd84, -1, "Neoverse V3"},
    {0x41, 0xd85, -1, "Cortex-X925"},
    {0x41, 0xd87, -1, "Cortex-A725"},
    {0x41, 0xd8e, -1, "Neoverse N3"},
    {0x42, 0x100, -1, "Brahma-B53"},
    {0x42, 0x516, -1, "Vulcan"},
    {0x43, 0x0a1, -1, "ThunderX"},
    {0x43, 0x0a2, -1, "ThunderX 81xx"},
    {0x43, 0x0a3, -1, "ThunderX 83xx"},
    {0x43, 0x0af, -1, "ThunderX2"},
    {0x43, 0x0b1, -1, "OcteonTX2 98xx"},
    {0x43, 0x0b2, -1, "OcteonTX2 96xx"},
    {0x43, 0x0b3, -1, "OcteonTX2 95xx"},
    {0x43, 0x0b4, -1, "OcteonTX2 95xxN"},
    {0x43, 0x0b5, -1, "OcteonTX2 95xxMM"},
    {0x43, 0x0b6, -1, "OcteonTX2 95xxO"},
    {0x46, 0x001, -1, "A64FX"},
    {0x48, 0xd01, -1, "TSV110 (Kunpeng 920)"},
    {0x48, 0xd02, -1, "HIP09"},
    {0x48, 0xd06, -1, "HIP12"},
    {0x4e, 0x003, -1, "Denver"},
    {0x4e, 0x004, -1, "Carmel"},
    {0x50, 0x000, 3, "eMAG (X-Gene 3)"}, // the kernel: X-Gene 1 reports 0x500f0000, eMAG 0x503f0002
    {0x50, 0x000, -1, "X-Gene"},
    {0x51, 0x001, -1, "Oryon (X1)"},
    {0x51, 0x200, -1, "Kryo"},
    {0x51, 0x800, -1, "Falkor V1 / Kryo 2xx Gold"}, // the kernel gives both names to part 0x800
    {0x51, 0x801, -1, "Kryo 2xx Silver"},
    {0x51, 0x802, -1, "Kryo 3xx Gold"},
    {0x51, 0x803, -1, "Kryo 3xx Silver"},
    {0x51, 0x804, -1, "Kryo 4xx Gold"},
    {0x51, 0x805, -1, "Kryo 4xx Silver"},
    {0x51, 0xc00, -1, "Falkor"},
    {0x61, 0x022, -1, "M1 Icestorm (efficiency core)"},
    {0x61, 0x023, -1, "M1 Firestorm (performance core)"},
    {0x61, 0x024, -1, "M1 Pro Icestorm (efficiency core)"},
    {0x61, 0x025, -1, "M1 Pro Firestorm (performance core)"},
    {0x61, 0x028, -1, "M1 Max Icestorm (efficiency core)"},
    {0x61, 0x029, -1, "M1 Max Firestorm (performance core)"},
    {0x61, 0x032, -1, "M2 Blizzard (efficiency core)"},
    {0x61, 0x033, -1, "M2 Avalanche (performance core)"},
    {0x61, 0x034, -1, "M2 Pro Blizzard (efficiency core)"},
    {0x61, 0x035, -1, "M2 Pro Avalanche (performance core)"},
    {0x61, 0x038, -1, "M2 Max Blizzard (efficiency core)"},
    {0x61, 0x039, -1, "M2 Max Avalanche (performance core)"},
    {0x6d, 0xd49, -1, "Azure Cobalt 100 (Neoverse N2)"},
    {0xc0, 0xac3, -1, "AmpereOne"},
    {0xc0, 0xac4, -1, "AmpereOne A"},
};

} // namespace detail

/// Names the CPU a MIDR_EL1 value describes. Pure: tested row by row with the values real CPUs report.
inline ArmCpu decode_midr(std::uint32_t midr) {
    ArmCpu a;
    a.midr = midr;
    a.implementer = midr >> 24;
    a.variant = (midr >> 20) & 0xf;
    a.part = (midr >> 4) & 0xfff;
    a.revision = midr & 0xf;
    a.core = "unknown";
    char id[64];
    std::snprintf(id, sizeof id, "implementer 0x%02x", a.implementer);
    a.implementer_name = id;
    for (const auto& row : detail::arm_implementers)
        if (row.implementer == a.implementer) a.implementer_name = row.name;
    for (const auto& row : detail::arm_parts)
        if (row.implementer == a.implementer && row.part == a.part &&
            (row.variant < 0 || static_cast<unsigned>(row.variant) == a.variant)) {
            a.core = row.core;
            return a;
        }
    if (a.implementer == 0) a.implementer_name = "software-defined (implementer 0x00)"; // not QEMU's part 'Q'
    std::snprintf(id, sizeof id, "MIDR 0x%08x: %s part 0x%03x", midr, a.implementer_name.c_str(), a.part);
    a.warning = std::string(id) + " is not in pmc's tables (on AArch64 nothing pmc does depends on them)";
    return a;
}

/// MIDR_EL1 from the text of /sys/devices/system/cpu/cpuN/regs/identification/midr_el1 ("0x00000000410fd083");
/// nullopt if it is not one.
inline std::optional<std::uint32_t> parse_midr(std::string_view text) {
    auto v = detail::parse_number(detail::trim(text));
    if (!v || *v > UINT32_MAX) return std::nullopt;
    return static_cast<std::uint32_t>(*v);
}

/// One processor of /proc/cpuinfo and the MIDR_EL1 its arm64 fields make up.
struct CpuMidr {
    int cpu = -1;
    std::uint32_t midr = 0;
};

/// Each processor's MIDR_EL1, rebuilt from the arm64 kernel's /proc/cpuinfo fields "CPU implementer", "CPU
/// variant", "CPU part" and "CPU revision" (its "CPU architecture: 8" stands for MIDR's 0xf). Processors without
/// the implementer and part (an x86 cpuinfo) are left out.
inline std::vector<CpuMidr> midrs_from_cpuinfo(std::string_view text) {
    std::vector<CpuMidr> out;
    struct Fields {
        int cpu = -1;
        std::optional<std::uint64_t> implementer, variant, part, revision;
    } f;
    auto flush = [&] {
        if (f.cpu >= 0 && f.implementer && f.part && *f.implementer <= 0xff && *f.part <= 0xfff)
            out.push_back({f.cpu, static_cast<std::uint32_t>(*f.implementer << 24 | (f.variant.value_or(0) & 0xf) << 20 |
                                                             0xfu << 16 | *f.part << 4 | (f.revision.value_or(0) & 0xf))});
        f = Fields{};
    };
    while (!text.empty()) {
        const auto eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view key = detail::trim(line.substr(0, colon)), value = detail::trim(line.substr(colon + 1));
        if (key == "processor") {
            flush();
            if (auto n = detail::parse_number(value); n && *n < 65536) f.cpu = static_cast<int>(*n);
        } else if (key == "CPU implementer") f.implementer = detail::parse_number(value);
        else if (key == "CPU variant") f.variant = detail::parse_number(value);
        else if (key == "CPU part") f.part = detail::parse_number(value);
        else if (key == "CPU revision") f.revision = detail::parse_number(value);
    }
    flush();
    return out;
}

/// How much is known about a CPU's hardware-interrupt event.
enum class IrqEventStatus {
    none,       ///< no event known: instructions-minus-irqs is not available
    verified,   ///< used for exact counts by measureme/rr, and documented
    documented, ///< in the vendor's event tables for this core, but exact subtraction not verified by others
    assumed,    ///< not listed for this core; assumed from its predecessors
};

inline const char* to_string(IrqEventStatus s) {
    switch (s) {
    case IrqEventStatus::none: return "none";
    case IrqEventStatus::verified: return "verified";
    case IrqEventStatus::documented: return "documented, not verified";
    case IrqEventStatus::assumed: return "assumed, not documented for this core";
    }
    return "?";
}

/// What pmc knows about a CPU model.
struct CpuModel {
    CpuSignature signature;
    std::string uarch;    ///< e.g. "Zen 5", "Skylake", "Alder Lake (Golden Cove + Gracemont)"; "unknown" if none
    std::string warning;  ///< set when the model was not in the tables and `uarch` was assumed
    int zen = 0;          ///< AMD Zen generation (1-6), 0 otherwise
    bool hybrid = false;  ///< the model mixes performance and efficiency cores
    std::string irq_event;      ///< perf raw event of hardware interrupts taken, e.g. "r01cb"; "" if none
    std::string irq_event_name; ///< its vendor name, e.g. "HW_INTERRUPTS.RECEIVED"
    IrqEventStatus irq_status = IrqEventStatus::none;

    /// "AMD family 0x1a model 0x02 stepping 1 (Zen 5)"; on AArch64 "Arm Neoverse N1 r3p1 (MIDR 0x413fd0c1)"
    std::string description() const {
        if (signature.midr) return decode_midr(signature.midr).description();
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s family 0x%x model 0x%02x stepping %u", to_string(signature.vendor),
                      signature.family, signature.model, signature.stepping);
        return std::string(buf) + " (" + uarch + ")";
    }
};

namespace detail {

struct ModelRow {
    unsigned family, model_lo, model_hi;
    const char* uarch;
    IrqEventStatus irq; ///< for Intel rows: status of r01cb (HW_INTERRUPTS.RECEIVED) on this core
    bool hybrid;
};

using S = IrqEventStatus;
// Intel (family 6 unless noted), in the kernel's order. r01cb works back to Sandy Bridge (measureme, Weaver
// 2013) and is documented from Skylake; rr lists none from Ice Lake on, so those are documented, not verified.
inline constexpr ModelRow intel_models[] = {
    {6, 0x0f, 0x0f, "Core 2 (Merom)", S::none, false},
    {6, 0x16, 0x16, "Core 2 (Merom)", S::none, false},
    {6, 0x17, 0x17, "Core 2 (Penryn)", S::none, false},
    {6, 0x1d, 0x1d, "Core 2 (Dunnington)", S::none, false},
    {6, 0x1a, 0x1a, "Nehalem", S::none, false},
    {6, 0x1e, 0x1f, "Nehalem", S::none, false},
    {6, 0x2e, 0x2e, "Nehalem", S::none, false},
    {6, 0x25, 0x25, "Westmere", S::none, false},
    {6, 0x2c, 0x2c, "Westmere", S::none, false},
    {6, 0x2f, 0x2f, "Westmere", S::none, false},
    {6, 0x2a, 0x2a, "Sandy Bridge", S::verified, false},
    {6, 0x2d, 0x2d, "Sandy Bridge", S::verified, false},
    {6, 0x3a, 0x3a, "Ivy Bridge", S::verified, false},
    {6, 0x3e, 0x3e, "Ivy Bridge", S::verified, false},
    {6, 0x3c, 0x3c, "Haswell", S::verified, false},
    {6, 0x3f, 0x3f, "Haswell", S::verified, false},
    {6, 0x45, 0x46, "Haswell", S::verified, false},
    {6, 0x3d, 0x3d, "Broadwell", S::verified, false},
    {6, 0x47, 0x47, "Broadwell", S::verified, false},
    {6, 0x4f, 0x4f, "Broadwell", S::verified, false},
    {6, 0x56, 0x56, "Broadwell", S::verified, false},
    {6, 0x4e, 0x4e, "Skylake", S::verified, false},
    {6, 0x5e, 0x5e, "Skylake", S::verified, false},
    {6, 0x55, 0x55, "Skylake-SP / Cascade Lake / Cooper Lake", S::verified, false},
    {6, 0x8e, 0x8e, "Kaby Lake / Coffee Lake (Skylake core)", S::verified, false},
    {6, 0x9e, 0x9e, "Kaby Lake / Coffee Lake (Skylake core)", S::verified, false},
    {6, 0xa5, 0xa6, "Comet Lake (Skylake core)", S::verified, false},
    {6, 0x66, 0x66, "Cannon Lake", S::documented, false},
    {6, 0x6a, 0x6a, "Ice Lake-SP", S::documented, false},
    {6, 0x6c, 0x6c, "Ice Lake-D", S::documented, false},
    {6, 0x7d, 0x7e, "Ice Lake", S::documented, false},
    {6, 0x9d, 0x9d, "Ice Lake (NNPI)", S::documented, false},
    {6, 0xa7, 0xa7, "Rocket Lake", S::documented, false},
    {6, 0x8c, 0x8d, "Tiger Lake", S::documented, false},
    {6, 0x8f, 0x8f, "Sapphire Rapids", S::documented, false},
    {6, 0xcf, 0xcf, "Emerald Rapids", S::documented, false},
    {6, 0xad, 0xae, "Granite Rapids", S::documented, false},
    {6, 0xd7, 0xd7, "Bartlett Lake", S::documented, false},
    {6, 0x8a, 0x8a, "Lakefield (Sunny Cove + Tremont)", S::documented, true},
    {6, 0x97, 0x97, "Alder Lake (Golden Cove + Gracemont)", S::documented, true},
    {6, 0x9a, 0x9a, "Alder Lake (Golden Cove + Gracemont)", S::documented, true},
    {6, 0xb7, 0xb7, "Raptor Lake (Raptor Cove + Gracemont)", S::documented, true},
    {6, 0xba, 0xba, "Raptor Lake (Raptor Cove + Gracemont)", S::documented, true},
    {6, 0xbf, 0xbf, "Raptor Lake (Raptor Cove + Gracemont)", S::documented, true},
    {6, 0xaa, 0xaa, "Meteor Lake (Redwood Cove + Crestmont)", S::documented, true},
    {6, 0xac, 0xac, "Meteor Lake (Redwood Cove + Crestmont)", S::documented, true},
    {6, 0xb5, 0xb5, "Arrow Lake-U (Meteor Lake refresh: Redwood Cove + Crestmont)", S::documented, true},
    {6, 0xc5, 0xc6, "Arrow Lake (Lion Cove + Skymont)", S::documented, true},
    {6, 0xbd, 0xbd, "Lunar Lake (Lion Cove + Skymont)", S::documented, true},
    {6, 0xcc, 0xcc, "Panther Lake (Cougar Cove + Darkmont)", S::assumed, true},
    {6, 0xd5, 0xd5, "Wildcat Lake", S::assumed, true},
    {6, 0x1c, 0x1c, "Atom Bonnell", S::none, false},
    {6, 0x26, 0x26, "Atom Bonnell", S::none, false},
    {6, 0x27, 0x27, "Atom Saltwell", S::none, false},
    {6, 0x35, 0x36, "Atom Saltwell", S::none, false},
    {6, 0x37, 0x37, "Atom Silvermont", S::none, false},
    {6, 0x4a, 0x4a, "Atom Silvermont", S::none, false},
    {6, 0x4d, 0x4d, "Atom Silvermont", S::none, false},
    {6, 0x5a, 0x5a, "Atom Silvermont", S::none, false},
    {6, 0x4c, 0x4c, "Atom Airmont", S::none, false},
    {6, 0x75, 0x75, "Atom Airmont", S::none, false},
    {6, 0x5c, 0x5c, "Atom Goldmont", S::documented, false},
    {6, 0x5f, 0x5f, "Atom Goldmont", S::documented, false},
    {6, 0x7a, 0x7a, "Atom Goldmont Plus", S::documented, false},
    {6, 0x86, 0x86, "Atom Tremont", S::documented, false},
    {6, 0x96, 0x96, "Atom Tremont", S::documented, false},
    {6, 0x9c, 0x9c, "Atom Tremont", S::documented, false},
    {6, 0xbe, 0xbe, "Atom Gracemont (Alder Lake-N)", S::assumed, false},
    {6, 0xaf, 0xaf, "Atom Crestmont (Sierra Forest)", S::assumed, false},
    {6, 0xb6, 0xb6, "Atom Crestmont (Grand Ridge)", S::assumed, false},
    {6, 0xdd, 0xdd, "Atom Darkmont (Clearwater Forest)", S::assumed, false},
    {6, 0x57, 0x57, "Xeon Phi Knights Landing", S::none, false},
    {6, 0x85, 0x85, "Xeon Phi Knights Mill", S::none, false},
    {18, 0x01, 0x01, "Nova Lake (Coyote Cove + Arctic Wolf)", S::assumed, true},
    {18, 0x03, 0x03, "Nova Lake (Coyote Cove + Arctic Wolf)", S::assumed, true},
    {19, 0x01, 0x01, "Diamond Rapids (Panther Cove)", S::assumed, false},
};

// The model a family's unknown models above its highest known model are assumed to be: its newest core above.
inline constexpr ModelRow intel_newest[] = {
    {6, 0, 0xff, "Panther Lake (Cougar Cove + Darkmont)", S::assumed, true},
    {18, 0, 0xff, "Nova Lake (Coyote Cove + Arctic Wolf)", S::assumed, true},
    {19, 0, 0xff, "Diamond Rapids (Panther Cove)", S::assumed, false},
};

/// The highest model number intel_models lists for `family` (0 if none).
inline constexpr unsigned intel_highest_model(unsigned family) {
    unsigned highest = 0;
    for (const auto& row : intel_models)
        if (row.family == family && row.model_hi > highest) highest = row.model_hi;
    return highest;
}

struct ZenRow {
    unsigned family, model_lo, model_hi;
    int zen;
};
// The kernel's bsp_init_amd(): Zen generation by family and model range (Zen 6 from 0x80: upstream commit 847ebc4476
// "x86/CPU/AMD: Extend Zen6 model range" widened 0x90-0xaf to 0x80-0xaf).
inline constexpr ZenRow zen_models[] = {
    {0x17, 0x00, 0x2f, 1}, {0x17, 0x50, 0x5f, 1}, {0x17, 0x30, 0x4f, 2}, {0x17, 0x60, 0x7f, 2},
    {0x17, 0x90, 0x91, 2}, {0x17, 0xa0, 0xaf, 2}, {0x19, 0x00, 0x0f, 3}, {0x19, 0x20, 0x5f, 3},
    {0x19, 0x10, 0x1f, 4}, {0x19, 0x60, 0xaf, 4}, {0x1a, 0x00, 0x2f, 5}, {0x1a, 0x40, 0x4f, 5},
    {0x1a, 0x60, 0x7f, 5}, {0x1a, 0x50, 0x5f, 6}, {0x1a, 0x80, 0xaf, 6}, {0x1a, 0xc0, 0xcf, 6},
};
// A family's newest generation, assumed for models the table does not list.
inline int zen_newest(unsigned family) { return family == 0x17 ? 2 : family == 0x19 ? 4 : family == 0x1a ? 6 : 0; }

inline const char* amd_pre_zen_name(unsigned family) {
    switch (family) {
    case 0x0f: return "K8";
    case 0x10: return "K10";
    case 0x11: return "K8 (Turion X2 Ultra)";
    case 0x12: return "K10 (Llano)";
    case 0x14: return "Bobcat";
    case 0x15: return "Bulldozer family";
    case 0x16: return "Jaguar / Puma";
    default: return nullptr;
    }
}

inline void set_intel_irq(CpuModel& m, IrqEventStatus status) {
    m.irq_status = status;
    if (status != IrqEventStatus::none) {
        m.irq_event = "r01cb";
        m.irq_event_name = "HW_INTERRUPTS.RECEIVED";
    }
}

} // namespace detail

/// Names the microarchitecture of a cpuid signature and what pmc knows about it. Pure: tested row by row.
inline CpuModel identify(const CpuSignature& sig) {
    CpuModel m;
    m.signature = sig;
    m.uarch = "unknown";
    if (sig.midr) { // AArch64: no interrupt event known (instructions-minus-irqs is x86-only)
        const ArmCpu arm = decode_midr(sig.midr);
        m.uarch = arm.name();
        m.warning = arm.warning;
        return m;
    }
    char fm[64];
    std::snprintf(fm, sizeof fm, "family 0x%x model 0x%02x", sig.family, sig.model);
    if (sig.vendor == Vendor::intel) {
        for (const auto& row : detail::intel_models)
            if (row.family == sig.family && sig.model >= row.model_lo && sig.model <= row.model_hi) {
                m.uarch = row.uarch;
                m.hybrid = row.hybrid;
                detail::set_intel_irq(m, row.irq);
                return m;
            }
        const unsigned highest = detail::intel_highest_model(sig.family);
        for (const auto& row : detail::intel_newest) {
            if (row.family != sig.family) continue;
            if (sig.model < highest) {
                // A gap in the tables or a part older than them: its core cannot be inferred from the newest.
                char top[16];
                std::snprintf(top, sizeof top, "0x%02x", highest);
                m.warning = std::string("Intel ") + fm + " is not in pmc's tables and is below the family's highest "
                            "known model (" + top + "), so pmc does not guess its core and knows no interrupt event "
                            "for it (instructions-minus-irqs is not available; instructions:u is)";
                return m;
            }
            m.uarch = row.uarch;
            m.hybrid = row.hybrid;
            detail::set_intel_irq(m, IrqEventStatus::assumed);
            m.warning = std::string("Intel ") + fm + " is not in pmc's tables; assuming the family's newest known "
                        "core, " + row.uarch + ", and its interrupt event r01cb (unverified)";
            return m;
        }
        m.warning = std::string("Intel ") + fm + " is not a family pmc knows (6, 18, 19)";
        return m;
    }
    if (sig.vendor == Vendor::hygon) {
        // Hygon Dhyana (family 0x18) is AMD's Zen 1.
        m.zen = 1;
        m.uarch = "Zen 1 (Hygon Dhyana)";
        if (sig.family != 0x18)
            m.warning = std::string("Hygon ") + fm + " is not the known family 0x18; assuming Zen 1";
    } else if (sig.vendor == Vendor::amd) {
        if (const char* old = detail::amd_pre_zen_name(sig.family)) {
            m.uarch = old;
            m.irq_event = "r00cf";
            m.irq_event_name = "INTERRUPTS_TAKEN (event 0xcf)";
            m.irq_status = IrqEventStatus::documented;
            return m;
        }
        for (const auto& row : detail::zen_models)
            if (row.family == sig.family && sig.model >= row.model_lo && sig.model <= row.model_hi) m.zen = row.zen;
        if (m.zen == 0 && detail::zen_newest(sig.family)) {
            m.zen = detail::zen_newest(sig.family);
            m.warning = std::string("AMD ") + fm + " is not in pmc's tables; assuming the family's newest, Zen " +
                        std::to_string(m.zen);
        }
        if (m.zen == 0) {
            m.warning = std::string("AMD ") + fm + " is not a family pmc knows (0xf-0x16, 0x17, 0x19, 0x1a)";
            return m;
        }
        m.uarch = "Zen " + std::to_string(m.zen);
    } else {
        return m;
    }
    // Zen 1-5: LsIntTaken (kernel amdzen1..amdzen5 tables); Zen 6 has no published table yet.
    m.irq_event = "r002c";
    m.irq_event_name = "LsIntTaken (ls_int_taken)";
    m.irq_status = m.zen <= 5 && m.warning.empty() ? IrqEventStatus::documented : IrqEventStatus::assumed;
    return m;
}

/// The signature of the CPU this code runs on (vendor "" and family 0 off x86; on AArch64 its MIDR_EL1).
inline CpuSignature cpu_signature() {
#if PMC_ARCH_X86_64
    auto leaf0 = detail::cpuid(0);
    char vendor[13] = {};
    std::memcpy(vendor, &leaf0.ebx, 4);
    std::memcpy(vendor + 4, &leaf0.edx, 4);
    std::memcpy(vendor + 8, &leaf0.ecx, 4);
    return decode_signature(vendor, detail::cpuid(1).eax);
#elif PMC_ARCH_AARCH64
    // The running CPU's MIDR_EL1, as cpuid gives x86's: the kernel emulates the mrs where it says so (HWCAP_CPUID,
    // Linux 4.11+); else the first CPU's, from sysfs or /proc/cpuinfo.
    CpuSignature s;
    if (::getauxval(AT_HWCAP) & HWCAP_CPUID) {
        std::uint64_t midr;
        asm volatile("mrs %0, midr_el1" : "=r"(midr));
        s.midr = static_cast<std::uint32_t>(midr);
    } else if (auto text = detail::read_file("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")) {
        s.midr = parse_midr(*text).value_or(0);
    } else if (auto info = detail::read_file("/proc/cpuinfo")) {
        const auto cpus = midrs_from_cpuinfo(*info);
        if (!cpus.empty()) s.midr = cpus.front().midr;
    }
    return s;
#else
    return CpuSignature{};
#endif
}

/// identify(cpu_signature()), computed once. (Not inlined: it is the default argument of parse_event, evaluated
/// where that is called.)
BOOST_NOINLINE inline const CpuModel& this_cpu() {
    static const CpuModel model = identify(cpu_signature());
    return model;
}

/// The kind of core the calling thread runs on now, on hybrid Intel CPUs (CPUID leaf 0x1A).
enum class CoreType { unknown, performance, efficiency };

inline const char* to_string(CoreType t) {
    switch (t) {
    case CoreType::unknown: return "unknown";
    case CoreType::performance: return "performance";
    case CoreType::efficiency: return "efficiency";
    }
    return "?";
}

inline CoreType current_core_type() {
#if PMC_ARCH_X86_64
    if (detail::cpuid(0).eax < 0x1a || !((detail::cpuid(7).edx >> 15) & 1)) return CoreType::unknown; // not hybrid
    switch (detail::cpuid(0x1a).eax >> 24) {
    case 0x40: return CoreType::performance;
    case 0x20: return CoreType::efficiency;
    default: return CoreType::unknown;
    }
#else
    return CoreType::unknown;
#endif
}

PMC_END_NAMESPACE
