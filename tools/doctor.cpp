// SPDX-License-Identifier: MIT
// pmc doctor: one screen that says what this machine can count, how precisely, what stands in the way, and the
// exact fix for each. Every line has a verdict: ok, degraded (works, but less precisely or less repeatably than it
// could), impossible, or advisory (ASLR, the allocator: a property of the measured program, not of this machine or
// of the doctor's own process; not counted as degraded). Exit status: 0 exact user-mode instruction counts are
// possible; 2 hardware counts, but not exact ones; 3 only software events (task-clock opens) and clocks; 4 no perf
// events at all (task-clock does not open).
#include "commands.hpp"

#include <pmc/emulated.hpp>

#include <pmc/counter.hpp>
#include <pmc/cpu.hpp>
#include <pmc/determinism.hpp>
#include <pmc/hybrid.hpp>
#include <pmc/machine.hpp>
#include <pmc/pmu.hpp>
#include <pmc/report.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace pmc_tool {

const char* const doctor_help = R"(usage: pmc [--sysfs DIR] doctor [--json]

One screen on what this machine can count, how precisely, and what stands in the way: kernel and
timer, perf_event_paranoid, PMUs and their rdpmc settings (AArch64: kernel.perf_user_access),
hypervisor, CPU and its interrupt event (AArch64: each kind of core, from MIDR_EL1), hybrid cores,
NMI watchdog, SpecLockMap, ASLR, allocator, the wall-time clock (the TSC, or AArch64's generic
timer), then trial opens of instructions-minus-irqs:u, instructions:u, task-clock and wall-time.
On AArch64 perf_user_access 0 is degraded, not impossible: hardware counts still work, read with
read(). Each line has a verdict and, where it is not ok, the exact fix:
  ok          works as well as it can
  advisory    up to the measured program (ASLR, the allocator), not this machine
  degraded    works, but less precisely or less repeatably than it could
  impossible  cannot work here
The last line is the best precision available here.

Options:
  --json       One JSON object: checks (verdict, check, finding, fix), trials (event, ok, read_path
               or errno and why, opened_as where it fell back to user mode: "task-clock:u"),
               precision, summary and exit_status.
  --sysfs DIR  Read PMUs from DIR instead of /sys/bus/event_source/devices.
  -h, --help   Show this help.

Under pmc emulate (pmc emulate -- pmc doctor) it describes the emulated machine: the emulated PMU,
the CPU as QEMU presents it, and what can be counted there (with pmc emulate --cache or --branches,
the models' events and the cache geometry).

Exit status: 0 exact user-mode instruction counts are possible here (instructions-minus-irqs:u with
rdpmc, or the emulated PMU under pmc emulate); 2 hardware counts, but not exact ones; 3 only
software events and clocks; 4 no perf events.
)";

namespace {

struct Check {
    std::string verdict; // "ok", "degraded", "impossible"
    std::string name;
    std::string finding;
    std::string fix;
};

struct Trial {
    std::string event;
    bool ok = false;
    std::string path;
    std::string why;
    int err = 0;
    std::string opened_as; ///< perf's name when it differs: "task-clock:u" where kernel mode was refused
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

std::string command_output(const std::string& command) {
    std::string out;
    if (FILE* p = ::popen(command.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

/// CONFIG_HZ of the running kernel, from /boot/config-RELEASE or /proc/config.gz; 0 if unknown.
int kernel_hz(const std::string& release) {
    std::string config = read_text("/boot/config-" + release);
    if (config.empty()) config = command_output("gzip -dc /proc/config.gz 2>/dev/null");
    auto pos = config.find("\nCONFIG_HZ=");
    return pos == std::string::npos ? 0 : std::atoi(config.c_str() + pos + 11);
}

Trial trial(const std::string& event, const pmc::OpenOptions& options) {
    Trial t;
    t.event = event;
    auto c = pmc::Counter::try_open(event, options);
    if (c) {
        t.ok = true;
        t.path = pmc::to_string(c->path());
        // As a user's program opens it, with perf's fallback to user mode where kernel mode is refused.
        if (auto shown = pmc::name_as_opened(c->event(), c->attr()); shown != c->event().name) t.opened_as = shown;
        auto iv = c->interval();
        (void)iv.stop();
    } else {
        t.err = c.failure().code.value();
        t.why = first_line(c.failure().message);
        const std::string& m = c.failure().message;
        if (m.find("no hardware PMU") != std::string::npos) t.why = "no hardware PMU on this machine";
        else if (auto p = t.why.find(": "); p != std::string::npos) t.why = t.why.substr(p + 2);
    }
    return t;
}

/// Prints `text` after `lead`, wrapped at word boundaries to 110 columns with continuation lines indented.
void print_wrapped(const std::string& lead, const std::string& text) {
    constexpr std::size_t width = 110;
    const std::size_t room = width > lead.size() + 20 ? width - lead.size() : 40;
    std::string line = lead;
    std::size_t used = 0;
    std::istringstream words(text);
    std::string word;
    while (words >> word) {
        if (used && used + 1 + word.size() > room) {
            fmt::print("{}\n", line);
            line = std::string(lead.size() + 2, ' ');
            used = 2;
        } else if (used) {
            line += ' ';
            ++used;
        }
        line += word;
        used += word.size();
    }
    fmt::print("{}\n", line);
}

Check hazard_check(const std::string& name, const pmc::HazardReport& r, const std::string& absent_text = {}) {
    Check c{"ok", name, r.detail, ""};
    switch (r.state) {
    case pmc::Hazard::absent:
        if (!absent_text.empty()) c.finding = absent_text;
        break;
    case pmc::Hazard::not_applicable: c.finding = "not applicable: " + r.detail; break;
    case pmc::Hazard::present:
    case pmc::Hazard::unknown:
        c.verdict = "degraded";
        c.fix = r.fix;
        break;
    }
    return c;
}

/// What the checks need to know about this machine, read once.
struct DoctorMachine {
    std::string sysfs;
    bool root = false;
    bool core = false; ///< a cpu PMU in sysfs
    std::string hv;    ///< the hypervisor's signature, "" on bare metal
    const pmc::CpuModel& cpu;
    const std::optional<pmc::EmulatedPmu>& emulated; ///< under pmc emulate: QEMU's plugin is the PMU
    pmc::ArmCpus arm;          ///< AArch64: each kind of core, from MIDR_EL1 (empty elsewhere)
    std::vector<pmc::Pmu> pmus; ///< every PMU sysfs lists
    std::string pmu_names;      ///< "breakpoint, cpu, software" or ""
};

DoctorMachine read_doctor_machine(const std::string& sysfs) {
    DoctorMachine m{sysfs, ::geteuid() == 0, pmc::has_core_pmu(sysfs), pmc::hypervisor_signature(), pmc::this_cpu(),
              pmc::emulated_pmu(), {}, {}, {}};
    for (auto& name : pmc::pmu_names(sysfs))
        if (auto p = pmc::load_pmu(name, sysfs)) {
            m.pmu_names += (m.pmu_names.empty() ? "" : ", ") + p->name;
            m.pmus.push_back(std::move(*p));
        }
    // On AArch64 the CPU is named by MIDR_EL1, for every CPU (big.LITTLE has several kinds).
    if (PMC_ARCH_AARCH64) m.arm = pmc::arm_cpus();
    return m;
}

// ---- the checks, in the order they are shown ------------------------------------------------------------------------

void add_kernel_checks(std::vector<Check>& checks, const DoctorMachine& m) {
    const std::string release = pmc::kernel_release();
    const int hz = kernel_hz(release);
    const std::string nohz = read_text("/sys/devices/system/cpu/nohz_full");
    checks.push_back({"ok", "kernel",
                      release + (hz ? fmt::format(", HZ={} (a timer interrupt every {:.0f} ms)", hz, 1000.0 / hz) : "") +
                          (nohz.empty() || nohz == "(null)" ? ", no nohz_full CPUs" : ", nohz_full=" + nohz),
                      ""});
    const auto paranoid = pmc::perf_event_paranoid();
    if (!paranoid) {
        checks.push_back({"degraded", "perf_event_paranoid", "cannot read /proc/sys/kernel/perf_event_paranoid", ""});
        return;
    }
    const bool allowed = m.root || *paranoid <= 2;
    checks.push_back({allowed ? "ok" : "impossible", "perf_event_paranoid",
                      fmt::format("{}: {}{}", *paranoid, pmc::paranoid_meaning(*paranoid),
                                  m.root ? " (running as root: no limit)" : ""),
                      allowed ? "" : "sudo sysctl kernel.perf_event_paranoid=2, or give the program CAP_PERFMON"});
}

/// Under pmc emulate: the emulated PMU is the one that counts; the host's hardware does not matter.
void add_emulated_pmu_checks(std::vector<Check>& checks, const DoctorMachine& m) {
    const pmc::EmulatedPmu& e = *m.emulated;
    const bool models = e.cache_model || e.branch_model;
    const char* emulator = std::getenv(pmc::detail::emulated::emulator_variable); // (pmc emulate's QEMU and -cpu)
    checks.push_back({"ok", "emulated PMU",
                      "pmc emulate: QEMU user mode with pmc's plugin (" + e.target + " guest, protocol " +
                          std::to_string(e.protocol) +
                          (emulator && *emulator ? "; " + std::string(emulator) : std::string()) +
                          "): instructions:u, instructions and "
                          "instructions-minus-irqs:u, " + pmc::emulated_count_note + ". QEMU's user mode has no "
                          "perf_event_open: no other perf event" +
                          (models ? std::string(" but the models' below") : std::string()),
                      ""});
    // The models this run has (pmc emulate --cache, --branches): the plugin's handshake says which, and the geometry.
    const auto listed = [](const auto& names) {
        std::string text;
        for (const std::string_view n : names) text += (text.empty() ? "" : ", ") + std::string(n);
        return text;
    };
    if (e.cache_model)
        checks.push_back({"ok", "cache model",
                          "pmc emulate --cache: " + listed(pmc::modelled_cache_event_names) +
                              " (each :u or none) read this thread's model of Cachegrind's caches (" +
                              e.cache_geometry + "), modelled, not a real core's" +
                              (e.load_sampling ? "; pmc::Sampler samples loads on cpu/mem-loads,ldlat=N/P" : ""),
                          ""});
    if (e.branch_model)
        checks.push_back({"ok", "branch model",
                          "pmc emulate --branches: " + listed(pmc::branch_count_event_names) +
                              " (exact: every branch executed) and " + listed(pmc::modelled_branch_event_names) +
                              " (modelled: Cachegrind's branch predictor), each :u or none, this thread's own",
                          ""});
    checks.push_back({"ok", "hardware PMU", "not used under the emulator (the host's sysfs lists " +
                                                (m.pmu_names.empty() ? std::string("no PMU") : m.pmu_names) + ")", ""});
    checks.push_back({"ok", "hypervisor", "the emulator (" + (m.hv.empty() ? std::string("QEMU") : m.hv) +
                                              "): the program runs on QEMU's TCG", ""});
}

/// Natively: the hardware PMU, the hypervisor, and what pmc emulate would give here (exact emulated instruction
/// counts, where QEMU can load pmc's plugin).
void add_hardware_pmu_checks(std::vector<Check>& checks, const DoctorMachine& m) {
    checks.push_back({m.core ? "ok" : "impossible", "hardware PMU",
                      m.core ? "present (" + m.pmu_names + ")"
                             : "none: sysfs lists " + (m.pmu_names.empty() ? "no PMU" : m.pmu_names),
                      m.core ? ""
                             : "bare metal, or a guest PMU (QEMU/KVM: -cpu host,pmu=on; libvirt: <pmu state='on'/>; "
                               "VMware: virtualize CPU performance counters; cloud: a bare-metal or PMU instance); "
                               "or, for exact instruction counts on this machine, pmc emulate (see below)"});
    checks.push_back({m.hv.empty() ? "ok" : "degraded", "hypervisor",
                      m.hv.empty() ? "none: bare metal"
                                   : m.hv + ": a virtual machine (cpuid exits to the hypervisor; virtual PMUs lack events)",
                      ""});
    const auto emulator = find_emulator("");
    if (emulator)
        checks.push_back({m.core && emulator->cpu_warning.empty() ? "ok" : "advisory", "emulated PMU",
                          "pmc emulate -- PROGRAM runs a program on an emulated PMU here (" + emulator->qemu +
                              " with pmc's plugin, the guest CPU " +
                              (emulator->cpu.empty() ? std::string("QEMU's default") : emulator->cpu) +
                              (emulator->cpu_origin.empty() ? std::string() : " from " + emulator->cpu_origin) +
                              "): exact instruction counts, emulated, not a real core's",
                          emulator->cpu_warning.empty() ? "" : first_line(emulator->cpu_warning)});
    else
        checks.push_back({m.core ? "ok" : "advisory", "emulated PMU",
                          "pmc emulate is not available: " + first_line(emulator.failure().message),
                          "sudo apt-get install qemu-user (Debian's dynamic QEMU user mode loads pmc's plugin)"});
}

/// The user-space read switches: x86's rdpmc per core PMU; AArch64's perf_user_access. Off (0, the default on
/// AArch64), hardware counts still work, through read(): degraded, not impossible. perf_user_access is absent on
/// x86 (no line), and on an AArch64 kernel without user counter access.
void add_user_read_checks(std::vector<Check>& checks, const DoctorMachine& m) {
    for (const auto& p : m.pmus) {
        if (!p.rdpmc || !(p.name == "cpu" || p.name == "cpu_core" || p.name == "cpu_atom")) continue;
        const std::string path = std::string(m.sysfs) + "/" + p.name + "/rdpmc";
        checks.push_back({*p.rdpmc ? "ok" : "degraded", "rdpmc (" + p.name + ")",
                          *p.rdpmc == 0   ? "0: user-space rdpmc is off, reads go through the kernel"
                          : *p.rdpmc == 1 ? "1: user-space rdpmc while a counter is mapped"
                                          : "2: user-space rdpmc always allowed",
                          *p.rdpmc ? "" : "echo 1 | sudo tee " + path});
    }
    const auto access = pmc::perf_user_access();
    if (!access && !PMC_ARCH_AARCH64) return;
    const auto meaning = pmc::perf_user_access_meaning(access);
    if (!m.core && !meaning.user_reads) // it only matters for hardware counters, and there are none here
        checks.push_back({"ok", "perf_user_access", "irrelevant here (no hardware PMU); " + meaning.meaning, ""});
    else
        checks.push_back({meaning.user_reads ? "ok" : "degraded", "perf_user_access", meaning.meaning, meaning.fix});
}

/// Where the interrupt event's use for exact counts comes from, in words that match the "ok" beside them.
const char* irq_source_text(pmc::IrqEventStatus s) {
    switch (s) {
    case pmc::IrqEventStatus::verified: return "verified (exact counts with it in measureme and rr)";
    case pmc::IrqEventStatus::documented: return "in the vendor's event tables for this core (no other tool's "
                                                 "exact counts rely on it yet)";
    case pmc::IrqEventStatus::assumed: return "assumed from this core's predecessors (not in its event tables)";
    case pmc::IrqEventStatus::none: break;
    }
    return "none";
}

/// The CPU and its interrupt event. An Arm core missing from the tables changes nothing pmc does: not degraded.
void add_cpu_checks(std::vector<Check>& checks, const DoctorMachine& m) {
    if (m.emulated)
        checks.push_back({"ok", "CPU", "as QEMU presents it (CPUID under the emulator, not the host's CPU): " +
                                           m.cpu.description(), ""});
    else if (!PMC_ARCH_AARCH64)
        checks.push_back({m.cpu.warning.empty() ? "ok" : "degraded", "CPU", m.cpu.description(), m.cpu.warning});
    else if (m.arm.kinds.empty())
        checks.push_back({"ok", "CPU", "unknown: no MIDR_EL1 in sysfs, /proc/cpuinfo or (mrs) from the kernel", ""});
    else {
        std::string finding = m.arm.description();
        for (const auto& k : m.arm.kinds)
            if (!k.cpu.warning.empty()) finding += "; " + k.cpu.warning;
        checks.push_back({"ok", "CPU", finding, ""});
    }
    if (m.emulated)
        checks.push_back({"ok", "interrupt event", "none needed: no interrupt reaches an emulated program's count "
                                                   "(instructions-minus-irqs:u is instructions:u)", ""});
    else if (m.cpu.irq_status == pmc::IrqEventStatus::none)
        checks.push_back({"impossible", "interrupt event",
                          "none known for this CPU: instructions-minus-irqs is not available", ""});
    else if (!m.core) // the CPU's tables name an event, but nothing here can count it
        checks.push_back({"impossible", "interrupt event",
                          "none usable: no hardware PMU to count this CPU's " + m.cpu.irq_event + " " +
                              m.cpu.irq_event_name + ", so instructions-minus-irqs is not available",
                          ""});
    else
        checks.push_back({"ok", "interrupt event", m.cpu.irq_event + " " + m.cpu.irq_event_name + ": " +
                                                       irq_source_text(m.cpu.irq_status), ""});
}

Check hybrid_check(const DoctorMachine& m) {
    if (m.arm.heterogeneous())
        return {"degraded", "hybrid cores",
                m.arm.layout() + ": a hardware counter counts only while its thread runs on the cores of the PMU it "
                                 "was opened on",
                "pin the measured thread to one kind of core: " + m.arm.pinning()};
    const auto hybrid = pmc::hybrid_pmus(m.sysfs);
    if (hybrid.empty()) return {"ok", "hybrid cores", "no: one core type", ""};
    std::string types;
    for (auto& h : hybrid) types += (types.empty() ? "" : ", ") + h.pmu + " on CPUs " + h.cpus_text;
    return {"degraded", "hybrid cores", types + ": counters count on one core type only",
            "pin the measured thread: pmc::pin_this_thread(pmc::CoreType::performance), or taskset"};
}

/// What skews hardware counts: the NMI watchdog's counter, and SpecLockMap (irrelevant without hardware counting).
void add_skew_checks(std::vector<Check>& checks, const DoctorMachine& m) {
    const std::string nmi = read_text("/proc/sys/kernel/nmi_watchdog");
    checks.push_back({nmi == "1" && m.core ? "degraded" : "ok", "NMI watchdog",
                      nmi == "1" ? (m.core ? "on: it holds one hardware counter (fewer for you, more multiplexing)"
                                           : "on (no PMU here for it to take a counter from)")
                                 : nmi.empty() ? "unknown" : "off",
                      nmi == "1" && m.core ? "sudo sysctl kernel.nmi_watchdog=0" : ""});
    auto speclock = hazard_check("SpecLockMap", pmc::speclockmap_status(m.cpu));
    if (!m.core && speclock.verdict != "ok")
        speclock = {"ok", "SpecLockMap", "irrelevant here (no hardware counting); " + speclock.finding, ""};
    checks.push_back(speclock);
}

/// ASLR and the allocator belong to the measured program, not to this machine: what the doctor's own process does
/// says nothing about them. The machine-wide part is kernel.randomize_va_space; the rest is advice.
void add_program_advice(std::vector<Check>& checks, const DoctorMachine& m) {
    const auto aslr = pmc::aslr_state();
    if (aslr.randomize_va_space == 0)
        checks.push_back({"ok", "ASLR", "off system-wide (kernel.randomize_va_space = 0)", ""});
    else if (m.emulated && !aslr.randomized)
        checks.push_back({"ok", "ASLR", "off for the programs pmc emulate runs (personality ADDR_NO_RANDOMIZE)", ""});
    else
        checks.push_back({"advisory", "ASLR",
                          (aslr.randomize_va_space < 0
                               ? std::string("kernel.randomize_va_space cannot be read")
                               : fmt::format("on system-wide (kernel.randomize_va_space = {})", aslr.randomize_va_space)) +
                              ": each measured program must turn it off itself",
                          "pmc::reexec_without_aslr(argv) in main, setarch -R, or sudo sysctl "
                          "kernel.randomize_va_space=0"});
    checks.push_back({"advisory", "allocator",
                      "up to the measured program: glibc's moving mmap threshold, jemalloc's 10 s purge timer "
                      "(pmc::allocator_status() reports a program's own)",
                      "pmc::stabilize_malloc() in main (glibc); MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0 "
                      "(jemalloc)"});
}

Check wall_time_check() {
    const auto clock = pmc::wall_time_clock();
    return {clock.uses_tsc ? "ok" : "degraded", "wall-time clock",
            clock.uses_tsc ? clock.counter + ", from " + clock.source : clock.source, ""};
}

std::vector<Check> machine_checks(const DoctorMachine& m) {
    std::vector<Check> checks;
    add_kernel_checks(checks, m);
    if (m.emulated) add_emulated_pmu_checks(checks, m);
    else add_hardware_pmu_checks(checks, m);
    add_user_read_checks(checks, m);
    add_cpu_checks(checks, m);
    checks.push_back(hybrid_check(m));
    add_skew_checks(checks, m);
    add_program_advice(checks, m);
    checks.push_back(wall_time_check());
    return checks;
}

// ---- the trial opens and the verdict --------------------------------------------------------------------------------

/// Trial opens, from the most precise counter down, against the same sysfs tree as the checks. On a hybrid CPU a
/// hardware counter opens only on a thread confined to one core type, so the trials run as a measured program
/// should: pinned to the performance cores (unless the doctor already runs on one core type). `pinning` says how.
std::vector<Trial> trial_opens(const std::string& sysfs, std::string& pinning) {
    const auto confined = confine_to_core_type(pmc::CoreType::performance, sysfs);
    pinning = confined ? confined->text : "not pinned: " + first_line(confined.failure().message);
    pmc::OpenOptions open_options;
    open_options.sysfs_root = sysfs;
    std::vector<Trial> trials;
    for (const char* event : {"instructions-minus-irqs:u", "instructions:u", "task-clock", "wall-time"})
        trials.push_back(trial(event, open_options));
    return trials;
}

/// The best precision available here, in a word and a sentence, and the exit status that says it.
struct Precision {
    std::string word; ///< "exact", "exact (emulated)", "approximate", "time-only", "none"
    std::string summary;
    int status = 4;
};

/// Judges the trials (in trial_opens' order: instructions-minus-irqs:u, instructions:u, task-clock, wall-time).
Precision best_precision(const std::vector<Trial>& trials, const DoctorMachine& m) {
    const Trial& exact = trials[0];
    const Trial& instructions = trials[1];
    const std::string user_pair = pmc::to_string(pmc::ReadPath::rdpmc_difference);
    if (exact.ok && exact.path == user_pair)
        return {"exact", "exact user-mode instruction counts: instructions-minus-irqs:u, read with " + user_pair, 0};
    if (exact.ok && exact.path == pmc::to_string(pmc::ReadPath::emulated))
        return {"exact (emulated)",
                "exact instruction counts from the emulated PMU of pmc emulate: " +
                    std::string(pmc::emulated_count_note) + "; no other perf event under the emulator" +
                    (m.emulated && (m.emulated->cache_model || m.emulated->branch_model)
                         ? " but the modelled ones listed above"
                         : ""),
                0};
    if (instructions.ok)
        return {"approximate",
                std::string("hardware counts, not exact ones: ") +
                    (exact.ok ? "instructions-minus-irqs:u is read through the kernel (rdpmc is off)"
                              : "instructions:u works but instructions-minus-irqs:u does not (" + exact.why + ")"),
                2};
    if (trials[2].ok) // task-clock: a perf software event (wall-time needs no perf event at all)
        return {"time-only",
                "time and software events only: " +
                    (m.core ? instructions.why
                            : std::string("no hardware PMU") +
                                  (m.hv.empty() ? "" : " (a virtual machine without a virtual PMU)")),
                3};
    std::string why = trials[2].why;
    while (!why.empty() && why.back() == '.') why.pop_back();
    return {"none",
            "no perf events can be opened here: task-clock: " + why +
                (trials[3].ok ? "; pmc's wall-time clock still works (it needs no perf event)" : ""),
            4};
}

// ---- the report -----------------------------------------------------------------------------------------------------

std::string doctor_json(const std::vector<Check>& checks, const std::vector<Trial>& trials, const std::string& pinning,
                        const Precision& p) {
    pmc::JsonWriter j;
    j.begin_object().key("checks").begin_array();
    for (auto& c : checks)
        j.begin_object().field("verdict", c.verdict).field("check", c.name).field("finding", c.finding)
            .field("fix", c.fix).end_object();
    j.end_array().key("trials").begin_array();
    for (auto& t : trials) {
        j.begin_object().field("event", t.event).field("ok", t.ok);
        if (t.ok) j.field("read_path", t.path); else j.field("errno", t.err).field("why", t.why);
        if (!t.opened_as.empty()) j.field("opened_as", t.opened_as);
        j.end_object();
    }
    j.end_array();
    if (!pinning.empty()) j.field("trial_pinning", pinning);
    j.field("precision", p.word).field("summary", p.summary).field("exit_status", p.status);
    j.end_object();
    return j.str();
}

/// Where counts could be exact or close, the one line that sends the reader to the degraded and advisory lines.
void print_repeatability_advice(const std::vector<Check>& checks, const Precision& p) {
    int hazards = 0, advice = 0; // advisory lines are about the measured program: not counted as degraded
    for (auto& c : checks) {
        hazards += c.verdict == "degraded" && !c.fix.empty();
        advice += c.verdict == "advisory";
    }
    if (p.status > 2 || !(hazards || advice)) return;
    fmt::print("  for repeatable counts, also {}{}{} (docs/exact-counts.md, installed as "
               "share/doc/pmc/exact-counts.md)\n",
               hazards ? fmt::format("fix the {} degraded line{} above", hazards, hazards == 1 ? "" : "s") : "",
               hazards && advice ? " and " : "", advice ? "follow the advisory lines in the measured program" : "");
}

void print_doctor_text(const std::vector<Check>& checks, const std::vector<Trial>& trials, const std::string& pinning,
                       const Precision& p) {
    fmt::print("pmc doctor: what this machine can count, and how precisely\n\n");
    for (auto& c : checks) {
        print_wrapped(fmt::format("  {:<11}{:<22}", c.verdict, c.name), c.finding);
        if (!c.fix.empty() && c.verdict != "ok") print_wrapped(std::string(35, ' '), "fix: " + c.fix);
    }
    fmt::print("\n  trial opens on this thread{}:\n", pinning.empty() ? "" : ", " + pinning);
    for (auto& t : trials)
        fmt::print("  {:<11}{:<28}{}\n", t.ok ? "ok" : "impossible", t.event,
                   !t.ok                 ? t.why
                   : t.opened_as.empty() ? "read with " + t.path
                                         : "read with " + t.path + "; opened as " + t.opened_as +
                                               " (user mode only, as perf does: kernel mode is refused to this user)");
    fmt::print("\n  best precision here: {}\n", p.summary);
    print_repeatability_advice(checks, p);
}

} // namespace

int cmd_doctor(const Options& o) {
    const DoctorMachine machine = read_doctor_machine(o.sysfs);
    const std::vector<Check> checks = machine_checks(machine);
    std::string pinning;
    const std::vector<Trial> trials = trial_opens(o.sysfs, pinning);
    const Precision precision = best_precision(trials, machine);
    if (o.json) fmt::print("{}\n", doctor_json(checks, trials, pinning, precision));
    else print_doctor_text(checks, trials, pinning, precision);
    return precision.status;
}

} // namespace pmc_tool
