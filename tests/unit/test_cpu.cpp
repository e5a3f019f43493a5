// SPDX-License-Identifier: MIT
// CPU identification from cpuid values: real leaf-1 signatures of shipped CPUs -> microarchitecture and the
// interrupt event instructions-minus-irqs subtracts. Pure: no CPU of these kinds is needed.
#include "catch.hpp"

#include <pmc/cpu.hpp>
#include <pmc/event.hpp>
#include <pmc/machine.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using S = pmc::IrqEventStatus;

struct CpuidRow {
    const char* vendor;
    std::uint32_t eax; ///< cpuid leaf 1 EAX as the CPU reports it
    unsigned family, model;
    const char* uarch;  ///< expected substring of the microarchitecture name
    const char* irq;    ///< expected raw interrupt event ("" for none)
    S status;
    bool warned;        ///< the model is not in the tables: pmc assumed, and says so
    bool hybrid;
};

const CpuidRow cpuid_rows[] = {
    // Intel cores
    {"GenuineIntel", 0x000106A5, 6, 0x1a, "Nehalem", "", S::none, false, false},
    {"GenuineIntel", 0x000206C2, 6, 0x2c, "Westmere", "", S::none, false, false},
    {"GenuineIntel", 0x000206A7, 6, 0x2a, "Sandy Bridge", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000206D7, 6, 0x2d, "Sandy Bridge", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000306A9, 6, 0x3a, "Ivy Bridge", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000306C3, 6, 0x3c, "Haswell", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000306F2, 6, 0x3f, "Haswell", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000406F1, 6, 0x4f, "Broadwell", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000506E3, 6, 0x5e, "Skylake", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x00050654, 6, 0x55, "Skylake-SP", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x00050657, 6, 0x55, "Cascade Lake", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000906E9, 6, 0x9e, "Kaby Lake", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000906EA, 6, 0x9e, "Coffee Lake", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000806EC, 6, 0x8e, "Kaby Lake", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000A0655, 6, 0xa5, "Comet Lake", "r01cb", S::verified, false, false},
    {"GenuineIntel", 0x000706E5, 6, 0x7e, "Ice Lake", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000606A6, 6, 0x6a, "Ice Lake-SP", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000806C1, 6, 0x8c, "Tiger Lake", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000A0671, 6, 0xa7, "Rocket Lake", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000806F8, 6, 0x8f, "Sapphire Rapids", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000C06F2, 6, 0xcf, "Emerald Rapids", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000A06D1, 6, 0xad, "Granite Rapids", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x00090672, 6, 0x97, "Alder Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000906A3, 6, 0x9a, "Alder Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000B0671, 6, 0xb7, "Raptor Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000B06A2, 6, 0xba, "Raptor Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000A06A4, 6, 0xaa, "Meteor Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000B0650, 6, 0xb5, "Arrow Lake-U (Meteor Lake refresh", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000C0652, 6, 0xc5, "Arrow Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000C0662, 6, 0xc6, "Arrow Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000B06D1, 6, 0xbd, "Lunar Lake", "r01cb", S::documented, false, true},
    {"GenuineIntel", 0x000C06C0, 6, 0xcc, "Panther Lake", "r01cb", S::assumed, false, true},
    {"GenuineIntel", 0x00300F10, 18, 0x01, "Nova Lake", "r01cb", S::assumed, false, true},
    {"GenuineIntel", 0x00400F10, 19, 0x01, "Diamond Rapids", "r01cb", S::assumed, false, false},
    // Intel Atom cores
    {"GenuineIntel", 0x00030678, 6, 0x37, "Silvermont", "", S::none, false, false},
    {"GenuineIntel", 0x000406C4, 6, 0x4c, "Airmont", "", S::none, false, false},
    {"GenuineIntel", 0x000506C9, 6, 0x5c, "Goldmont", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000706A1, 6, 0x7a, "Goldmont Plus", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x00090661, 6, 0x96, "Tremont", "r01cb", S::documented, false, false},
    {"GenuineIntel", 0x000B06E0, 6, 0xbe, "Gracemont", "r01cb", S::assumed, false, false},
    {"GenuineIntel", 0x000A06F3, 6, 0xaf, "Crestmont", "r01cb", S::assumed, false, false},
    {"GenuineIntel", 0x000D06D0, 6, 0xdd, "Darkmont", "r01cb", S::assumed, false, false},
    {"GenuineIntel", 0x00050671, 6, 0x57, "Knights Landing", "", S::none, false, false},
    // Intel models the tables do not know, above the family's highest known model: the family's newest, warned
    {"GenuineIntel", 0x000F06F0, 6, 0xff, "Panther Lake", "r01cb", S::assumed, true, true},
    {"GenuineIntel", 0x000D06E0, 6, 0xde, "Panther Lake", "r01cb", S::assumed, true, true},
    {"GenuineIntel", 0x00350F00, 18, 0x50, "Nova Lake", "r01cb", S::assumed, true, true},
    // ... and below it (older parts, gaps in the tables): unknown, no interrupt event, warned
    {"GenuineIntel", 0x000006D8, 6, 0x0d, "unknown", "", S::none, true, false}, // Pentium M (Dothan)
    {"GenuineIntel", 0x000006E8, 6, 0x0e, "unknown", "", S::none, true, false}, // Core Duo (Yonah)
    {"GenuineIntel", 0x000D0660, 6, 0xd6, "unknown", "", S::none, true, false}, // between Wildcat and Bartlett Lake
    {"GenuineIntel", 0x00300F20, 18, 0x02, "unknown", "", S::none, true, false},
    {"GenuineIntel", 0x00000F29, 15, 0x02, "unknown", "", S::none, true, false},
    // AMD before Zen
    {"AuthenticAMD", 0x00020F32, 0x0f, 0x23, "K8", "r00cf", S::documented, false, false},
    {"AuthenticAMD", 0x00100F42, 0x10, 0x04, "K10", "r00cf", S::documented, false, false},
    {"AuthenticAMD", 0x00500F20, 0x14, 0x02, "Bobcat", "r00cf", S::documented, false, false},
    {"AuthenticAMD", 0x00600F12, 0x15, 0x01, "Bulldozer", "r00cf", S::documented, false, false},
    {"AuthenticAMD", 0x00700F01, 0x16, 0x00, "Jaguar", "r00cf", S::documented, false, false},
    // AMD Zen 1 to 6
    {"AuthenticAMD", 0x00800F11, 0x17, 0x01, "Zen 1", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00800F82, 0x17, 0x08, "Zen 1", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00810F10, 0x17, 0x11, "Zen 1", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00830F10, 0x17, 0x31, "Zen 2", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00860F01, 0x17, 0x60, "Zen 2", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00870F10, 0x17, 0x71, "Zen 2", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00A00F11, 0x19, 0x01, "Zen 3", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00A20F10, 0x19, 0x21, "Zen 3", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00A40F41, 0x19, 0x44, "Zen 3", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00A50F00, 0x19, 0x50, "Zen 3", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00A10F11, 0x19, 0x11, "Zen 4", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00A60F12, 0x19, 0x61, "Zen 4", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00A70F41, 0x19, 0x74, "Zen 4", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00AA0F01, 0x19, 0xa0, "Zen 4", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00B00F21, 0x1a, 0x02, "Zen 5", "r002c", S::documented, false, false}, // this project's VMs
    {"AuthenticAMD", 0x00B20F40, 0x1a, 0x24, "Zen 5", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00B40F40, 0x1a, 0x44, "Zen 5", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00B70F00, 0x1a, 0x70, "Zen 5", "r002c", S::documented, false, false},
    {"AuthenticAMD", 0x00B50F00, 0x1a, 0x50, "Zen 6", "r002c", S::assumed, false, false},
    {"AuthenticAMD", 0x00B80F00, 0x1a, 0x80, "Zen 6", "r002c", S::assumed, false, false}, // the kernel's 0x80-0xaf
    {"AuthenticAMD", 0x00B80FF0, 0x1a, 0x8f, "Zen 6", "r002c", S::assumed, false, false},
    {"AuthenticAMD", 0x00BA0F00, 0x1a, 0xa0, "Zen 6", "r002c", S::assumed, false, false},
    // AMD models the tables do not know
    {"AuthenticAMD", 0x008B0F00, 0x17, 0xb0, "Zen 2", "r002c", S::assumed, true, false},
    {"AuthenticAMD", 0x00AB0F00, 0x19, 0xb0, "Zen 4", "r002c", S::assumed, true, false},
    {"AuthenticAMD", 0x00B30F50, 0x1a, 0x35, "Zen 6", "r002c", S::assumed, true, false},
    {"AuthenticAMD", 0x00C00F00, 0x1b, 0x00, "unknown", "", S::none, true, false},
    // Hygon: Zen 1
    {"HygonGenuine", 0x00900F01, 0x18, 0x00, "Zen 1 (Hygon Dhyana)", "r002c", S::documented, false, false},
    // Others
    {"CentaurHauls", 0x000006FE, 6, 0x0f, "unknown", "", S::none, false, false},
};

} // namespace

TEST_CASE("cpuid signatures of real CPUs name their microarchitecture and interrupt event", "[cpu]") {
    for (const CpuidRow& r : cpuid_rows) {
        INFO(r.vendor << " eax " << std::hex << r.eax << " (expecting " << r.uarch << ")");
        const pmc::CpuSignature sig = pmc::decode_signature(r.vendor, r.eax);
        CHECK(sig.family == r.family);
        CHECK(sig.model == r.model);
        CHECK(sig.stepping == (r.eax & 0xf));
        const pmc::CpuModel m = pmc::identify(sig);
        CHECK_THAT(m.uarch, ContainsSubstring(r.uarch));
        CHECK(m.irq_event == r.irq);
        CHECK(m.irq_status == r.status);
        CHECK(m.warning.empty() == !r.warned);
        CHECK(m.hybrid == r.hybrid);
        CHECK(m.irq_event_name.empty() == (std::string(r.irq).empty()));
    }
}

TEST_CASE("Zen generations and the description", "[cpu]") {
    auto zen5 = pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00B00F21));
    CHECK(zen5.zen == 5);
    CHECK(zen5.signature.vendor == pmc::Vendor::amd);
    CHECK(zen5.description() == "AMD family 0x1a model 0x02 stepping 1 (Zen 5)");
    CHECK(pmc::identify(pmc::decode_signature("HygonGenuine", 0x00900F01)).zen == 1);
    CHECK(pmc::identify(pmc::decode_signature("GenuineIntel", 0x000506E3)).zen == 0);
    auto unknown = pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00B30F50));
    CHECK_THAT(unknown.warning, ContainsSubstring("family 0x1a model 0x35 is not in pmc's tables"));
}

TEST_CASE("model 0 prints as 0x00, not 0000", "[cpu]") {
    CHECK(pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00700F01)).description() ==
          "AMD family 0x16 model 0x00 stepping 1 (Jaguar / Puma)");
    auto unknown_family = pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00C00F00));
    CHECK_THAT(unknown_family.warning, ContainsSubstring("family 0x1b model 0x00 is not a family"));
    CHECK(pmc::identify(pmc::CpuSignature{}).description() == "other family 0x0 model 0x00 stepping 0 (unknown)");
}

TEST_CASE("an unknown Intel model below the family's highest is not given the newest core's name", "[cpu]") {
    auto yonah = pmc::identify(pmc::decode_signature("GenuineIntel", 0x000006E8));
    CHECK(yonah.uarch == "unknown");
    CHECK(yonah.irq_event.empty());
    CHECK(yonah.irq_status == S::none);
    CHECK_THAT(yonah.warning, ContainsSubstring("family 0x6 model 0x0e is not in pmc's tables"));
    CHECK_THAT(yonah.warning, ContainsSubstring("below the family's highest known model (0xdd)"));
    CHECK_THAT(yonah.warning, ContainsSubstring("no interrupt event"));
    auto newer = pmc::identify(pmc::decode_signature("GenuineIntel", 0x000D06E0));
    CHECK_THAT(newer.warning, ContainsSubstring("assuming the family's newest known core, Panther Lake"));
    CHECK(pmc::detail::intel_highest_model(6) == 0xdd);
    CHECK(pmc::detail::intel_highest_model(18) == 0x03);
    CHECK(pmc::detail::intel_highest_model(19) == 0x01);
}

namespace {
/// A field of /proc/cpuinfo's first processor ("vendor_id", "cpu family", "model", "stepping"); "" if absent.
std::string cpuinfo_field(const std::string& name) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) break; // the end of the first processor
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
        if (key == name) return line.substr(std::min(line.size(), colon + 2));
    }
    return "";
}
} // namespace

TEST_CASE("this machine's cpuid decodes to the vendor, family, model and stepping the kernel reports", "[cpu]") {
    // The kernel decodes the same leaf-1 EAX with its own code (x86_family(), x86_model()): an independent check of
    // decode_signature() on a real CPU.
    const pmc::CpuSignature sig = pmc::cpu_signature();
    const std::string vendor = cpuinfo_field("vendor_id"), family = cpuinfo_field("cpu family"),
                      model = cpuinfo_field("model"), stepping = cpuinfo_field("stepping");
#if PMC_ARCH_X86_64
    if (vendor.empty() || family.empty() || model.empty())
        PMC_SKIP("/proc/cpuinfo has no vendor_id/cpu family/model here: nothing to compare with");
    INFO("cpuinfo: " << vendor << " family " << family << " model " << model << " stepping " << stepping
                     << "; pmc: " << pmc::this_cpu().description());
    CHECK(sig.vendor_id == vendor);
    CHECK(sig.family == std::stoul(family));
    CHECK(sig.model == std::stoul(model));
    if (!stepping.empty() && stepping != "unknown") CHECK(sig.stepping == std::stoul(stepping));
    CHECK(pmc::this_cpu().signature.model == sig.model);
    if (sig.vendor == pmc::Vendor::amd && sig.family == 0x1a && sig.model == 0x02)
        CHECK(pmc::this_cpu().uarch == "Zen 5"); // this project's VMs
#elif PMC_ARCH_AARCH64
    // The mrs of MIDR_EL1 (the kernel's emulation, or QEMU's) against the fields the kernel prints for some CPU.
    CHECK(sig.family == 0);
    REQUIRE(sig.midr != 0);
    CHECK(pmc::this_cpu().uarch == pmc::decode_midr(sig.midr).name());
    std::ifstream in("/proc/cpuinfo");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find("CPU implementer") == std::string::npos) {
        WARN("/proc/cpuinfo has no arm64 fields here (qemu-user shows the host's): nothing to compare with");
        return;
    }
    char implementer[40], part[40];
    std::snprintf(implementer, sizeof implementer, "CPU implementer\t: 0x%02x\n", sig.midr >> 24);
    std::snprintf(part, sizeof part, "CPU part\t: 0x%03x\n", (sig.midr >> 4) & 0xfff);
    INFO("MIDR 0x" << std::hex << sig.midr << "; pmc: " << pmc::this_cpu().description());
    CHECK_THAT(text.str(), ContainsSubstring(implementer));
    CHECK_THAT(text.str(), ContainsSubstring(part));
#else
    CHECK(sig.family == 0);
    CHECK(pmc::this_cpu().uarch == "unknown");
#endif
}

TEST_CASE("instructions-minus-irqs:u subtracts the CPU's interrupt event", "[cpu][parser]") {
    struct Case {
        const char* vendor;
        std::uint32_t eax;
        std::uint64_t config;
    };
    for (const Case& c : {Case{"AuthenticAMD", 0x00B00F21, 0x2c}, Case{"GenuineIntel", 0x000506E3, 0x1cb},
                          Case{"AuthenticAMD", 0x00100F42, 0xcf}}) {
        const auto cpu = pmc::identify(pmc::decode_signature(c.vendor, c.eax));
        INFO(cpu.description());
        auto spec = pmc::parse_event("instructions-minus-irqs:u", pmc::default_sysfs_root, cpu);
        CHECK(spec.kind == pmc::EventKind::difference);
        CHECK(spec.attr.type == PERF_TYPE_HARDWARE);
        CHECK(spec.attr.config == PERF_COUNT_HW_INSTRUCTIONS);
        CHECK(spec.minus_attr.type == PERF_TYPE_RAW);
        CHECK(spec.minus_attr.config == c.config);
        for (const perf_event_attr* a : {&spec.attr, &spec.minus_attr}) {
            CHECK(a->exclude_kernel == 1);
            CHECK(a->exclude_hv == 1);
            CHECK(a->exclude_user == 0);
            CHECK(a->exclude_guest == 1);
        }
        CHECK(spec.core_pmu);
    }
    auto zen3 = pmc::identify(pmc::decode_signature("AuthenticAMD", 0x00A20F10));
    CHECK(pmc::parse_event("instructions-minus-r0420:u", pmc::default_sysfs_root, zen3).minus_attr.config == 0x420);
}

TEST_CASE("instructions-minus-irqs fails clearly where it cannot work", "[cpu][parser]") {
    auto silvermont = pmc::identify(pmc::decode_signature("GenuineIntel", 0x00030678));
    auto r = pmc::try_parse_event("instructions-minus-irqs:u", pmc::default_sysfs_root, silvermont);
    REQUIRE_FALSE(r.ok());
    CHECK(r.failure().code.value() == ENOENT);
    CHECK_THAT(r.failure().message, ContainsSubstring("Atom Silvermont"));
    CHECK_THAT(r.failure().message, ContainsSubstring("use instructions:u"));
    auto skylake = pmc::identify(pmc::decode_signature("GenuineIntel", 0x000506E3));
    auto r0420 = pmc::try_parse_event("instructions-minus-r0420:u", pmc::default_sysfs_root, skylake);
    REQUIRE_FALSE(r0420.ok());
    CHECK_THAT(r0420.failure().message, ContainsSubstring("AMD Zen event"));
    for (const char* bad : {"instructions-minus-irqs", "instructions-minus-irqs:k", "instructions-minus-irqs:uk",
                            "instructions-minus-irqs:u,cycles"}) {
        INFO(bad);
        auto b = pmc::try_parse_event(bad, pmc::default_sysfs_root, skylake);
        REQUIRE_FALSE(b.ok());
        CHECK_THAT(b.failure().message, ContainsSubstring("counts user mode only"));
    }
}

// ---- AArch64: the CPU from MIDR_EL1 ---------------------------------------------------------------------------

namespace {

using Catch::Matchers::StartsWith;

struct MidrRow {
    std::uint32_t midr; ///< as the CPU reports it (source in the comment)
    const char* implementer;
    const char* core;
    unsigned variant, revision;
    bool warned; ///< not in the tables
};

const MidrRow midr_rows[] = {
    {0x410fd034, "Arm", "Cortex-A53", 0, 4, false},  // Raspberry Pi 3; QEMU's cortex-a53
    {0x410fd083, "Arm", "Cortex-A72", 0, 3, false},  // Raspberry Pi 4; QEMU's cortex-a72
    {0x414fd0b1, "Arm", "Cortex-A76", 4, 1, false},  // Raspberry Pi 5; QEMU's cortex-a76
    {0x412fd050, "Arm", "Cortex-A55", 2, 0, false},  // Qualcomm SC7280 CPUs 0-3 (kernel commit, dts fix)
    {0x411fd410, "Arm", "Cortex-A78", 1, 0, false},  // SC7280 CPUs 4-6 (that commit says r1p1: the value is r1p0)
    {0x411fd440, "Arm", "Cortex-X1", 1, 0, false},   // SC7280 CPU 7; TF-A's "Cortex-X1 MIDR for r1p0"
    {0x413fd0c1, "Arm", "Neoverse N1", 3, 1, false}, // AWS Graviton2, Ampere Altra (Arm's implementer code)
    {0x414fd0c1, "Arm", "Neoverse N1", 4, 1, false}, // QEMU's neoverse-n1
    {0x410fd490, "Arm", "Neoverse N2", 0, 0, false}, // boot log "Booting Linux on physical CPU ... [0x410fd490]"
    {0x411fd401, "Arm", "Neoverse V1", 1, 1, false}, // AWS Graviton3 (c7g)
    {0x410fd4f0, "Arm", "Neoverse V2", 0, 0, false}, // NVIDIA Grace (boot log)
    {0x410fd4f1, "Arm", "Neoverse V2", 0, 1, false}, // AWS Graviton4 (c8g), Google Axion
    {0x410fd840, "Arm", "Neoverse V3", 0, 0, false}, // Arm's own MIDR constant for V3 r0p0
    {0x611f0221, "Apple", "M1 Icestorm (efficiency core)", 1, 1, false},  // Mac mini M1 under Linux (boot log)
    {0x611f0380, "Apple", "M2 Max Blizzard (efficiency core)", 1, 0, false}, // M2 Max under Linux (boot log)
    {0x610f0230, "Apple", "M1 Firestorm (performance core)", 0, 0, false}, // the kernel's MIDR_APPLE_M1_FIRESTORM
    {0x503f0002, "Applied Micro (Ampere)", "eMAG (X-Gene 3)", 3, 2, false}, // the kernel: "our eMAG reports"
    {0x500f0000, "Applied Micro (Ampere)", "X-Gene", 0, 0, false},          // the kernel: X-Gene 1
    {0xc00fac30, "Ampere", "AmpereOne", 0, 0, false},   // the kernel's MIDR_AMPERE1 (r0p0)
    {0xc00fac40, "Ampere", "AmpereOne A", 0, 0, false}, // the kernel's MIDR_AMPERE1A
    {0x6d0fd490, "Microsoft", "Azure Cobalt 100 (Neoverse N2)", 0, 0, false}, // MIDR_MICROSOFT_AZURE_COBALT_100
    {0x461f0010, "Fujitsu", "A64FX", 1, 0, false},      // QEMU's a64fx
    {0x480fd010, "HiSilicon", "TSV110 (Kunpeng 920)", 0, 0, false},
    {0x000f0510, "QEMU", "max CPU (TCG emulation)", 0, 0, false}, // qemu-aarch64 -cpu max, read with mrs
    // not in the tables
    {0x410fd990, "Arm", "unknown", 0, 0, true},
    {0x4b1f0012, "implementer 0x4b", "unknown", 1, 2, true},
    {0x000f0000, "software-defined (implementer 0x00)", "unknown", 0, 0, true},
};

/// A fake root with /sys/devices/system/cpu and /proc, removed when done.
class FakeRoot {
public:
    FakeRoot() {
        char tmpl[] = "/tmp/pmc-fake-root-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        root_ = tmpl;
        for (const char* d : {"/sys", "/sys/devices", "/sys/devices/system", "/sys/devices/system/cpu", "/proc",
                              "/proc/sys", "/proc/sys/kernel"})
            ::mkdir((root_ + d).c_str(), 0755);
        ::mkdir((root_ + "/sys/devices/system/cpu/cpufreq").c_str(), 0755); // not a CPU
    }
    ~FakeRoot() {
        const std::string cmd = "rm -rf '" + root_ + "'";
        if (std::system(cmd.c_str()) != 0) {
        }
    }
    FakeRoot(const FakeRoot&) = delete;
    FakeRoot& operator=(const FakeRoot&) = delete;
    const std::string& path() const { return root_; }
    void cpu_midr(int cpu, const std::string& text) {
        const std::string dir = root_ + "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
        for (const std::string& d : {dir, dir + "/regs", dir + "/regs/identification"}) ::mkdir(d.c_str(), 0755);
        std::ofstream(dir + "/regs/identification/midr_el1") << text;
    }
    void file(const std::string& rel, const std::string& text) { std::ofstream(root_ + rel) << text; }

private:
    std::string root_;
};

// /proc/cpuinfo as the arm64 kernel prints it (arch/arm64/kernel/cpuinfo.c, c_show), for a Raspberry Pi 4.
const char* const pi4_cpuinfo = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n"
                                "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n"
                                "CPU revision\t: 3\n\n"
                                "processor\t: 1\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n"
                                "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n"
                                "CPU revision\t: 3\n\nRevision\t: c03111\nModel\t\t: Raspberry Pi 4 Model B\n";

} // namespace

TEST_CASE("MIDR_EL1 values of real CPUs name their implementer and core", "[cpu][aarch64]") {
    for (const MidrRow& r : midr_rows) {
        INFO("MIDR " << std::hex << r.midr << " (expecting " << r.implementer << " " << r.core << ")");
        const pmc::ArmCpu a = pmc::decode_midr(r.midr);
        CHECK(a.midr == r.midr);
        CHECK(a.implementer == r.midr >> 24);
        CHECK(a.part == ((r.midr >> 4) & 0xfff));
        CHECK(a.implementer_name == r.implementer);
        CHECK(a.core == r.core);
        CHECK(a.variant == r.variant);
        CHECK(a.revision == r.revision);
        CHECK(a.warning.empty() == !r.warned);
        CHECK(a.name() == std::string(r.implementer) + " " + r.core);
    }
}

TEST_CASE("an Arm CPU's description, and what identify() makes of a MIDR", "[cpu][aarch64]") {
    CHECK(pmc::decode_midr(0x413fd0c1).description() == "Arm Neoverse N1 r3p1 (MIDR 0x413fd0c1)");
    CHECK(pmc::decode_midr(0x000f0510).description() == "QEMU max CPU (TCG emulation) (MIDR 0x000f0510)");
    CHECK(pmc::decode_midr(0x410fd990).warning ==
          "MIDR 0x410fd990: Arm part 0xd99 is not in pmc's tables (on AArch64 nothing pmc does depends on them)");
    pmc::CpuSignature sig;
    sig.midr = 0x411fd401;
    const pmc::CpuModel m = pmc::identify(sig);
    CHECK(m.uarch == "Arm Neoverse V1");
    CHECK(m.description() == "Arm Neoverse V1 r1p1 (MIDR 0x411fd401)");
    CHECK(m.irq_status == S::none);
    CHECK(m.irq_event.empty());
    CHECK(m.warning.empty());
    CHECK_FALSE(m.hybrid);
    sig.midr = 0x410fd990;
    CHECK_THAT(pmc::identify(sig).warning, ContainsSubstring("part 0xd99 is not in pmc's tables"));
    // The error for instructions-minus-irqs names the Arm CPU, not "other family 0x0".
    sig.midr = 0x000f0510;
    auto r = pmc::try_parse_event("instructions-minus-irqs:u", pmc::default_sysfs_root, pmc::identify(sig));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.failure().message, ContainsSubstring("QEMU max CPU (TCG emulation) (MIDR 0x000f0510)"));
}

TEST_CASE("MIDR_EL1 from sysfs text and from the arm64 /proc/cpuinfo", "[cpu][aarch64]") {
    CHECK(pmc::parse_midr("0x00000000410fd083\n") == 0x410fd083u);
    CHECK(pmc::parse_midr(" 0x611f0221") == 0x611f0221u);
    CHECK_FALSE(pmc::parse_midr("0x1410fd083").has_value()); // wider than the register's 32 defined bits
    CHECK_FALSE(pmc::parse_midr("").has_value());
    CHECK_FALSE(pmc::parse_midr("unknown").has_value());

    const auto pi4 = pmc::midrs_from_cpuinfo(pi4_cpuinfo);
    REQUIRE(pi4.size() == 2);
    CHECK(pi4[0].cpu == 0);
    CHECK(pi4[1].cpu == 1);
    CHECK(pi4[0].midr == 0x410fd083u); // "CPU architecture: 8" is MIDR's 0xf
    CHECK(pi4[1].midr == 0x410fd083u);
    // Variant and revision in place; the implementer and part are required.
    const auto n1 = pmc::midrs_from_cpuinfo("processor\t: 7\nCPU implementer\t: 0x41\nCPU variant\t: 0x3\n"
                                            "CPU part\t: 0xd0c\nCPU revision\t: 1\n");
    REQUIRE(n1.size() == 1);
    CHECK(n1[0].cpu == 7);
    CHECK(n1[0].midr == 0x413fd0c1u);
    CHECK(pmc::midrs_from_cpuinfo("processor\t: 0\nCPU part\t: 0xd0c\n").empty());
    CHECK(pmc::midrs_from_cpuinfo("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n").empty());
}

TEST_CASE("an AArch64 machine's kinds of core, from a fake /sys and /proc", "[cpu][aarch64]") {
    SECTION("big.LITTLE from sysfs (Qualcomm SC7280): three kinds, and how to pin") {
        FakeRoot root;
        for (int cpu = 0; cpu < 8; ++cpu)
            root.cpu_midr(cpu, cpu < 4 ? "0x00000000412fd050\n" : cpu < 7 ? "0x00000000411fd410\n" : "0x00000000411fd440\n");
        root.file("/proc/cpuinfo", pi4_cpuinfo); // sysfs comes first
        const pmc::ArmCpus arm = pmc::arm_cpus(root.path());
        REQUIRE(arm.kinds.size() == 3);
        CHECK(arm.source == root.path() + "/sys/devices/system/cpu/cpu*/regs/identification/midr_el1");
        CHECK(arm.heterogeneous());
        CHECK(arm.description() == "Arm Cortex-A55 r2p0 (MIDR 0x412fd050) on CPUs 0-3; Arm Cortex-A78 r1p0 "
                                   "(MIDR 0x411fd410) on CPUs 4-6; Arm Cortex-X1 r1p0 (MIDR 0x411fd440) on CPU 7");
        CHECK(arm.layout() == "Cortex-A55 on CPUs 0-3, Cortex-A78 on CPUs 4-6, Cortex-X1 on CPU 7");
        CHECK(arm.pinning() == "taskset -c 0-3 (Cortex-A55), taskset -c 4-6 (Cortex-A78) or taskset -c 7 (Cortex-X1)");
    }
    SECTION("one kind from /proc/cpuinfo when sysfs has no MIDR; revisions alone are not heterogeneous") {
        FakeRoot root;
        root.file("/proc/cpuinfo", pi4_cpuinfo);
        const pmc::ArmCpus pi4 = pmc::arm_cpus(root.path());
        REQUIRE(pi4.kinds.size() == 1);
        CHECK(pi4.source == root.path() + "/proc/cpuinfo");
        CHECK(pi4.description() == "Arm Cortex-A72 r0p3 (MIDR 0x410fd083) on CPUs 0-1");
        CHECK_FALSE(pi4.heterogeneous());
        const auto revisions = pmc::group_arm_cpus({{1, 0x413fd0c1}, {0, 0x414fd0c1}, {2, 0x413fd0c1}}, "test");
        REQUIRE(revisions.kinds.size() == 2);
        CHECK(revisions.kinds[0].cpus == std::vector<int>{0}); // ordered by first CPU
        CHECK(revisions.kinds[1].cpus == std::vector<int>{1, 2});
        CHECK_FALSE(revisions.heterogeneous());
    }
    SECTION("Apple's performance and efficiency cores") {
        const auto m1 = pmc::group_arm_cpus({{0, 0x611f0221}, {1, 0x611f0221}, {4, 0x611f0231}, {5, 0x611f0231}}, "t");
        CHECK(m1.heterogeneous());
        CHECK(m1.layout() == "M1 Icestorm (efficiency core) on CPUs 0-1, M1 Firestorm (performance core) on CPUs 4-5");
    }
    SECTION("nothing to read: no kinds (a fake root never falls back to the running CPU)") {
        FakeRoot root;
        root.file("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\n");
        const pmc::ArmCpus none = pmc::arm_cpus(root.path());
        CHECK(none.kinds.empty());
        CHECK_FALSE(none.heterogeneous());
        CHECK(none.description().empty());
    }
}

TEST_CASE("kernel.perf_user_access: read, and what each value means for pmc's reads", "[cpu][aarch64]") {
    FakeRoot root;
    const std::string proc = root.path() + "/proc";
    CHECK_FALSE(pmc::perf_user_access(proc).has_value());
    root.file("/proc/sys/kernel/perf_user_access", "0\n");
    CHECK(pmc::perf_user_access(proc) == 0);
    root.file("/proc/sys/kernel/perf_user_access", "1\n");
    CHECK(pmc::perf_user_access(proc) == 1);

    const auto off = pmc::perf_user_access_meaning(0);
    CHECK_FALSE(off.user_reads);
    CHECK_THAT(off.meaning, ContainsSubstring("0 (the default): user-space counter reads are off"));
    CHECK_THAT(off.meaning, ContainsSubstring("read()"));
    CHECK_THAT(off.fix, StartsWith("sudo sysctl kernel.perf_user_access=1"));
    const auto on = pmc::perf_user_access_meaning(1);
    CHECK(on.user_reads);
    CHECK_THAT(on.meaning, StartsWith("1: "));
    CHECK(on.fix.empty());
    const auto absent = pmc::perf_user_access_meaning(std::nullopt);
    CHECK_FALSE(absent.user_reads);
    CHECK_THAT(absent.meaning, ContainsSubstring("Linux 5.17"));
    CHECK_THAT(absent.fix, ContainsSubstring("sudo sysctl kernel.perf_user_access=1"));
    CHECK_FALSE(pmc::perf_user_access_meaning(2).user_reads);
    CHECK_THAT(pmc::perf_user_access_meaning(2).meaning, ContainsSubstring("not a value the kernel accepts"));
#if PMC_ARCH_X86_64
    CHECK_FALSE(pmc::perf_user_access().has_value()); // an arm64 setting: x86 kernels have no such file
#endif
}

TEST_CASE("wall-time's counter is named for what it is: the TSC, or AArch64's generic timer", "[cpu][aarch64]") {
    CHECK(pmc::wall_time_counter(false, 2445404000.0) == "TSC at 2445.404 MHz");
    CHECK(pmc::wall_time_counter(true, 62500000.0) == "the generic timer (CNTVCT_EL0 at CNTFRQ_EL0 = 62500000 Hz)");
    CHECK(pmc::wall_time_counter(true, 1e9) == "the generic timer (CNTVCT_EL0 at CNTFRQ_EL0 = 1000000000 Hz)");
    const auto here = pmc::wall_time_clock();
    if (here.uses_tsc) {
        CHECK_THAT(here.counter, StartsWith(PMC_ARCH_AARCH64 ? "the generic timer (CNTVCT_EL0" : "TSC at "));
        CHECK(here.source.find("the generic timer") == std::string::npos); // the doctor prints both: not twice
    } else {
        CHECK(here.counter.empty());
    }
}
