// CPU identification from cpuid values: real leaf-1 signatures of shipped CPUs -> microarchitecture and the
// interrupt event instructions-minus-irqs subtracts. Pure: no CPU of these kinds is needed.
#include "catch.hpp"

#include <pmc/cpu.hpp>
#include <pmc/event.hpp>

#include <algorithm>
#include <fstream>
#include <string>

namespace {

using S = pmc::IrqEventStatus;

struct Row {
    const char* vendor;
    std::uint32_t eax; ///< cpuid leaf 1 EAX as the CPU reports it
    unsigned family, model;
    const char* uarch;  ///< expected substring of the microarchitecture name
    const char* irq;    ///< expected raw interrupt event ("" for none)
    S status;
    bool warned;        ///< the model is not in the tables: pmc assumed, and says so
    bool hybrid;
};

const Row rows[] = {
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
    for (const Row& r : rows) {
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
    if (vendor.empty() || family.empty() || model.empty()) {
        WARN("/proc/cpuinfo has no vendor_id/cpu family/model here: nothing to compare with");
        return;
    }
    INFO("cpuinfo: " << vendor << " family " << family << " model " << model << " stepping " << stepping
                     << "; pmc: " << pmc::this_cpu().description());
    CHECK(sig.vendor_id == vendor);
    CHECK(sig.family == std::stoul(family));
    CHECK(sig.model == std::stoul(model));
    if (!stepping.empty() && stepping != "unknown") CHECK(sig.stepping == std::stoul(stepping));
    CHECK(pmc::this_cpu().signature.model == sig.model);
    if (sig.vendor == pmc::Vendor::amd && sig.family == 0x1a && sig.model == 0x02)
        CHECK(pmc::this_cpu().uarch == "Zen 5"); // this project's VMs
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
