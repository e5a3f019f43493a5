// SPDX-License-Identifier: MIT
// pmc: the command-line face of the pmc library.
//
//   pmc list                 generic events, pmc's clocks, and every PMU of this machine with its formats/events
//   pmc encode EVENT...      the perf_event_attr pmc builds, in `perf stat -vv` layout (or --json)
//   pmc doctor               what this machine can count, how precisely, and what stands in the way
//
// Uses only pmc's public headers.
#include <pmc/counter.hpp>
#include <pmc/event.hpp>
#include <pmc/machine.hpp>
#include <pmc/pmu.hpp>
#include <pmc/report.hpp>

#include "command_line.hpp"
#include "commands.hpp"
#include "profile_cli.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char* usage_text = R"(usage: pmc [--sysfs DIR] COMMAND [OPTIONS] [ARGS]

Precise in-process hardware performance counters for Linux: the command-line tool.

Commands:
  list              List the events this machine offers: perf's generic hardware, software and
                    hardware-cache events, pmc's own clocks (wall-time, tsc), and every PMU in sysfs
                    with its format fields and named events.
  encode EVENT...   Print the perf_event_attr pmc builds for each event string, field by field in
                    the names and layout `perf stat -vv -e EVENT` uses, so the two can be diffed.
  count [-e EVENT]... -- COMMAND [ARGS]
                    Run COMMAND and count its events from its exec to its exit, children included,
                    as one group (perf stat opens each event alone unless given a {group}): counts
                    scaled where the kernel multiplexed, each with the share of time it was counted.
                    Default events: task-clock, context-switches, page-faults (and instructions:u,
                    cycles:u with a PMU). The table goes to stderr (or -o FILE, opened before COMMAND
                    runs); the exit status is COMMAND's (1 where it exited 0 but a count is missing),
                    and a Ctrl-C still gives the report.
  doctor            One screen on what this machine can count and how precisely: kernel and timer,
                    perf_event_paranoid, PMUs, hypervisor, rdpmc (AArch64: perf_user_access), CPU and
                    its interrupt event, hybrid cores, NMI watchdog, SpecLockMap, ASLR, allocator, the
                    wall-time clock, and trial opens; each line a verdict (ok / advisory / degraded /
                    impossible) and the exact fix.
  emulate [--] COMMAND [ARGS]
                    Run COMMAND under QEMU user mode with pmc's plugin, an emulated PMU: its
                    instructions:u counters and profiles read exact counts on any machine, a
                    PMU-less VM included (emulated, not a real core's); address randomization off.
  summarize FILE    Summarize a profile written by a program embedding pmc::Profiler
                    (PMC_PROFILE=FILE): per label count, self, total, min/median/max.
  critical FILE     The costliest nesting path through a profile: a graph of labels with each
                    nesting's cost, frequency and probability, and the root-to-sink chain that
                    carries the most cost all the way down (recursion found and said).
  sample [-e EVENT] [-c PERIOD | -F FREQ] -- COMMAND [ARGS]
                    Sample COMMAND (and its children) and print the bias check, the estimate
                    beside the exact count of the same event, and where the samples fell: by
                    variable and by memory region (default: every page fault, with its address).
  diff BASE NEW     Compare profiles per label (self, total, calls, events): "unchanged" or
                    "changed by N" with an exact counter; with several runs a side
                    (A1 A2 -- B1 B2) a change beyond the runs' noise, the rule stated.
  aggregate FILE... Several runs' profiles lined up: per label and interval min/median/max and
                    the spread, the noisiest and the largest intervals; says if the counter is exact.
  export (--chrome | --folded | --speedscope) FILE [-o OUT] [--min-value N]
                    A profile for real viewers: Chrome trace-event JSON (Perfetto, chrome://tracing),
                    folded stacks (flamegraph.pl, inferno, speedscope) or speedscope's own JSON;
                    read a page at a time, so a profile larger than memory is exported.

Options (each command has more of its own: pmc COMMAND --help):
  --sysfs DIR       Read PMUs from DIR instead of /sys/bus/event_source/devices (list, encode,
                    doctor, count, sample).
  --json            Machine-readable output (every command but emulate and export).
  --csv             count: CSV output (not with --json).
  -e EVENT[,EVENT]  count: an event to count (repeatable).
  -o FILE           count: write the counts to FILE instead of stderr.
  --emulate         count: run COMMAND under pmc emulate and count its instructions exactly.
  --cache[=host]    count --emulate: model the caches too (Cachegrind's model; --I1/--D1/--L2/--LL
                    SIZE,ASSOC,LINE set a geometry, =host this machine's; --inclusion strict an
                    inclusive LL): L1-dcache-loads, L1-dcache-load-misses, L1-dcache-stores,
                    L1-dcache-store-misses, L1-icache-load-misses, LLC-loads, LLC-load-misses,
                    LLC-stores, LLC-store-misses, cache-references, cache-misses, marked modelled.
  --branches        count --emulate: count branches too: branch-instructions (exact) and
                    branch-misses (Cachegrind's branch predictor, marked modelled).
  --qemu PATH       count --emulate: the QEMU user-mode binary (as pmc emulate --qemu; $PMC_QEMU).
  --like-perf-stat  encode: add the fields perf stat itself sets (sample_type, read_format, disabled,
                    inherit, enable_on_exec), so the output matches perf's -vv block line for line;
                    where this user may not count kernel mode, the attr perf stat falls back to
                    (exclude_kernel=1, exclude_hv=1: its ':u' event).
  -h, --help        Show this help (also: pmc COMMAND --help).
  --version         Print pmc's version.

Event strings: perf syntax, e.g. instructions:u, r01cb:u, cpu/event=0x2c,umask=0x1/u, msr/tsc/,
L1-dcache-load-misses, page-faults, mem:0x1000/8:w; plus pmc's clocks wall-time and tsc.

Exit status: 0 success; 1 an event string or the command line was wrong. pmc doctor: 0 exact
user-mode instruction counts are possible here (instructions-minus-irqs:u with rdpmc); 2 hardware
counts, but not exact ones; 3 only software events and clocks; 4 no perf events at all.
)";

constexpr const char* list_help = R"(usage: pmc [--sysfs DIR] list [--json]

List the events this machine offers: perf's generic hardware, software and hardware-cache events
(with their other spellings), pmc's clocks (wall-time, tsc) and composites
(instructions-minus-irqs:u), and every PMU in sysfs with its type, rdpmc setting, CPUs, format
fields and named events. Hardware events are marked where this machine has no cpu PMU.

Options:
  --json       One JSON object: named_events (name, aliases as a list, category, note for pmc's
               own) and pmus (name, type, rdpmc, cpus, formats, events).
  --sysfs DIR  Read PMUs from DIR instead of /sys/bus/event_source/devices.
  -h, --help   Show this help.
)";

constexpr const char* encode_help = R"(usage: pmc [--sysfs DIR] encode [--like-perf-stat] [--json] EVENT...

Print the perf_event_attr pmc builds for each event string, field by field in the names and layout
`perf stat -vv -e EVENT` prints, so the two can be diffed. A composite (instructions-minus-irqs:u)
shows both of its attrs; pmc's clocks (wall-time, tsc) are not perf events, and say so.

Options:
  --like-perf-stat  Add the fields perf stat itself sets (sample_type, read_format, disabled,
                    inherit, enable_on_exec), so the output matches perf's -vv block line for line;
                    where this user may not count kernel mode, the attr perf stat falls back to
                    (exclude_kernel=1, exclude_hv=1: its ':u' event).
  --json            A JSON array, one object per event: its kind and attr, or the error.
  --sysfs DIR       Read PMUs from DIR instead of /sys/bus/event_source/devices.
  -h, --help        Show this help.

Exit status: 0 every EVENT was encoded; 1 one was not (the error says where and why), or none given.
)";

using pmc_tool::Options;

// ---- list -------------------------------------------------------------------------------------------------------

/// NamedEvent::aliases ("a, b") as a list.
std::vector<std::string> split_aliases(const std::string& aliases) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at < aliases.size();) {
        const std::size_t comma = aliases.find(", ", at);
        out.push_back(aliases.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        at = comma == std::string::npos ? aliases.size() : comma + 2;
    }
    return out;
}

int cmd_list(const Options& o) {
    const bool core = pmc::has_core_pmu(o.sysfs);
    const auto named = pmc::named_events();
    std::vector<pmc::Pmu> pmus;
    for (auto& name : pmc::pmu_names(o.sysfs))
        if (auto p = pmc::load_pmu(name, o.sysfs)) pmus.push_back(std::move(*p));

    if (o.json) {
        pmc::JsonWriter j;
        j.begin_object().field("sysfs", o.sysfs).field("core_pmu", core);
        j.key("named_events").begin_array();
        for (auto& e : named) {
            j.begin_object().field("name", e.name).key("aliases").begin_array();
            for (auto& alias : split_aliases(e.aliases)) j.value(alias);
            j.end_array().field("category", e.category);
            if (!e.note.empty()) j.field("note", e.note);
            j.end_object();
        }
        j.end_array();
        j.key("pmus").begin_array();
        for (auto& p : pmus) {
            j.begin_object().field("name", p.name).field("type", p.type);
            if (p.rdpmc) j.field("rdpmc", *p.rdpmc);
            if (!p.cpus.empty()) j.field("cpus", p.cpus);
            j.key("formats").begin_array();
            for (auto& f : p.formats) j.begin_object().field("name", f.name).field("spec", f.spec).end_object();
            j.end_array();
            j.key("events").begin_array();
            for (auto& e : p.events) {
                j.begin_object().field("name", p.name + "/" + e.name + "/").field("terms", e.terms);
                if (!e.unit.empty()) j.field("unit", e.unit);
                if (!e.scale.empty()) j.field("scale", e.scale);
                j.end_object();
            }
            j.end_array().end_object();
        }
        j.end_array().end_object();
        fmt::print("{}\n", j.str());
        return 0;
    }

    auto tag = [&](const std::string& category) -> std::string {
        if (category == "hardware") return core ? "[Hardware event]" : "[Hardware event: no cpu PMU here]";
        if (category == "hardware-cache") return core ? "[Hardware cache event]" : "[Hardware cache event: no cpu PMU here]";
        if (category == "software") return "[Software event]";
        if (category == "pmc composite") return core ? "[pmc composite]" : "[pmc composite: no cpu PMU here]";
        return "[pmc clock]";
    };
    fmt::print("Named events\n");
    for (auto& e : named) {
        std::string shown = e.name;
        for (auto& alias : split_aliases(e.aliases)) shown += " OR " + alias;
        fmt::print("  {:<50} {}{}\n", shown, tag(e.category), e.note.empty() ? "" : "  " + e.note);
    }
    fmt::print("  raw events: rNNNN (hex config, core PMU), TYPE:CONFIG, mem:ADDR[/LEN][:rwx] (breakpoints)\n");
    fmt::print("\nPMUs in {}\n", o.sysfs);
    if (pmus.empty()) fmt::print("  (none readable)\n");
    for (auto& p : pmus) {
        fmt::print("  {} (type {}{}{})\n", p.name, p.type, p.rdpmc ? fmt::format(", rdpmc {}", *p.rdpmc) : "",
                   p.cpus.empty() ? "" : ", cpus " + p.cpus);
        for (auto& f : p.formats) fmt::print("    format  {:<20} {}\n", f.name, f.spec);
        for (auto& e : p.events) {
            std::string extra = e.unit.empty() ? "" : fmt::format("  [unit {}{}]", e.unit, e.scale.empty() ? "" : ", scale " + e.scale);
            fmt::print("    event   {:<40} {}{}\n", p.name + "/" + e.name + "/", e.terms, extra);
        }
    }
    if (!core)
        fmt::print("\nNo cpu PMU: hardware and hardware-cache events cannot be counted on this machine "
                   "(`pmc doctor` says why and what to do).\n");
    return 0;
}

// ---- encode -----------------------------------------------------------------------------------------------------

int cmd_encode(const Options& o, const std::vector<std::string>& events) {
    int status = 0;
    pmc::JsonWriter j;
    if (o.json) j.begin_array();
    for (auto& text : events) {
        auto spec = pmc::try_parse_event(text, o.sysfs);
        if (!spec) {
            status = 1;
            if (o.json) {
                j.begin_object().field("event", text).field("ok", false).field("errno", spec.failure().code.value());
                j.field("error", spec.failure().message).end_object();
            } else {
                fmt::print(stderr, "pmc: {}\n", spec.failure().message);
            }
            continue;
        }
        const bool difference = spec->kind == pmc::EventKind::difference;
        const bool clock = spec->kind == pmc::EventKind::tsc || spec->kind == pmc::EventKind::wall_time;
        const char* clock_text = spec->kind == pmc::EventKind::wall_time
                                     ? "pmc's own clock: nanoseconds from the TSC; not a perf event"
                                     : "pmc's own clock: serialized rdtsc ticks; not a perf event (perf's tsc is msr/tsc/)";
        // As perf stat opens it for this user: with perf's exclude_kernel fallback where the kernel refuses
        // kernel-mode counting (perf -vv prints the refused attr first, then this one).
        const perf_event_attr user_attr =
            o.like_perf_stat && !clock ? pmc::as_this_user_opens_it(*spec, spec->attr) : spec->attr;
        const bool user_mode_only = user_attr.exclude_kernel && !spec->attr.exclude_kernel;
        if (user_mode_only && !o.json)
            fmt::print(stderr, "# {}: this user may not count kernel mode (perf_event_paranoid {}): perf stat opens it "
                               "with exclude_kernel=1 and exclude_hv=1, as {} (so does pmc)\n", text,
                       pmc::perf_event_paranoid() ? std::to_string(*pmc::perf_event_paranoid()) : "unreadable",
                       pmc::name_as_opened(*spec, user_attr));
        perf_event_attr attr = o.like_perf_stat ? pmc::as_perf_stat_opens_it(user_attr) : spec->attr;
        perf_event_attr minus_attr = o.like_perf_stat ? pmc::as_perf_stat_opens_it(spec->minus_attr) : spec->minus_attr;
        if (o.json) {
            j.begin_object().field("event", text).field("ok", true);
            j.field("kind", spec->kind == pmc::EventKind::perf         ? "perf"
                            : spec->kind == pmc::EventKind::difference ? "difference"
                            : spec->kind == pmc::EventKind::tsc        ? "tsc"
                                                                       : "wall-time");
            j.field("name", spec->name).field("pmu", spec->pmu).field("modifiers", spec->modifiers);
            if (user_mode_only) j.field("opened_as", pmc::name_as_opened(*spec, user_attr));
            if (clock) {
                j.field("note", clock_text);
            } else {
                j.field("core_pmu", spec->core_pmu);
                j.key("attr");
                pmc::write_attr_json(j, attr);
                if (difference) {
                    j.field("minus_event", spec->minus_text).field("minus_name", spec->minus_name);
                    j.key("minus_attr");
                    pmc::write_attr_json(j, minus_attr);
                }
            }
            j.end_object();
            continue;
        }
        if (events.size() > 1) fmt::print("# {}\n", text);
        if (clock) {
            fmt::print("{}: {}\n", text, clock_text);
            continue;
        }
        if (difference)
            fmt::print("# {} = instructions:u minus {} ({}), opened as one group; the two attrs:\n", text,
                       spec->minus_text, spec->minus_name);
        fmt::print("------------------------------------------------------------\n{}"
                   "------------------------------------------------------------\n",
                   pmc::attr_text(attr));
        if (difference)
            fmt::print("------------------------------------------------------------\n{}"
                       "------------------------------------------------------------\n",
                       pmc::attr_text(minus_attr));
    }
    if (o.json) {
        j.end_array();
        fmt::print("{}\n", j.str());
    }
    return status;
}

// ---- the command line ----------------------------------------------------------------------------------------

/// --sysfs DIR, which list, encode, doctor and count take.
void add_sysfs(pmc_cli::CommandLine& cl, Options& o) {
    cl.option("--sysfs", o.sysfs, "a directory");
}

int run_list(const std::vector<std::string>& args) {
    pmc_cli::CommandLine cl("pmc list", list_help);
    Options o;
    add_sysfs(cl, o);
    cl.flag("--json", o.json);
    if (auto status = cl.parse(args)) return *status;
    return cmd_list(o);
}

int run_encode(const std::vector<std::string>& args) {
    pmc_cli::CommandLine cl("pmc encode", encode_help);
    Options o;
    std::vector<std::string> events;
    add_sysfs(cl, o);
    cl.flag("--json", o.json);
    cl.flag("--like-perf-stat", o.like_perf_stat);
    cl.option("EVENT", events, "an event");
    if (auto status = cl.parse(args)) return *status;
    if (events.empty()) return cl.usage_error("which events? (pmc encode EVENT...)");
    return cmd_encode(o, events);
}

int run_doctor(const std::vector<std::string>& args) {
    pmc_cli::CommandLine cl("pmc doctor", pmc_tool::doctor_help);
    Options o;
    add_sysfs(cl, o);
    cl.flag("--json", o.json);
    if (auto status = cl.parse(args)) return *status;
    return pmc_tool::cmd_doctor(o);
}

int run_count(const std::vector<std::string>& args) {
    pmc_cli::CommandLine cl("pmc count", pmc_tool::count_help);
    Options o;
    std::vector<std::string> events;
    add_sysfs(cl, o);
    cl.flag("--json", o.json);
    cl.flag("--csv", o.csv);
    cl.flag("--emulate", o.emulate);
    pmc_tool::add_cache_options(cl, o.cache);
    cl.flag("--branches", o.branches);
    cl.option("--cpu", o.cpu, "a CPU model").not_empty();
    const pmc_cli::Option qemu = cl.option("--qemu", o.qemu, "a path");
    cl.option("-e,--event", events, "an event").one_value_each();
    cl.option("-o", o.output, "a file");
    cl.command_follows(); // the command starts at the first word that is not an option, or after '--'
    if (auto status = cl.parse(args)) return *status;
    if (o.csv && o.json) return cl.usage_error("--csv and --json exclude each other: give one output format");
    const auto command = cl.command();
    if (command.empty()) return cl.usage_error("no command to count: pmc count [-e EVENT]... -- COMMAND [ARGS]");
    if ((o.cache || !(o.cache.i1 + o.cache.d1 + o.cache.l2 + o.cache.ll + o.cache.inclusion).empty()) && !o.emulate)
        return cl.usage_error("--cache and --I1/--D1/--L2/--LL/--inclusion model the caches under the emulator: give "
                              "--emulate too");
    if (o.branches && !o.emulate)
        return cl.usage_error("--branches counts branches under the emulator: give --emulate too");
    if (!o.cpu.empty() && !o.emulate)
        return cl.usage_error("--cpu names the CPU the emulator presents: give --emulate too");
    if (qemu.given() && !o.emulate) return cl.usage_error("--qemu names the emulator of --emulate: give --emulate too");
    return pmc_tool::cmd_count(o, command, events);
}

struct Command {
    const char* name;
    const char* help;
    int (*run)(const std::vector<std::string>& args);
    bool guarded; ///< a profile tool: a failed write of its output is an error too (profile_cli.hpp)
};
const Command commands[] = {
    {"list", list_help, run_list, false},
    {"encode", encode_help, run_encode, false},
    {"doctor", pmc_tool::doctor_help, run_doctor, false},
    {"count", pmc_tool::count_help, run_count, false},
    {"emulate", pmc_tool::emulate_help, pmc_tool::cmd_emulate, false},
    {"sample", pmc_tool::sample_help, pmc_tool::cmd_sample, false},
    {"summarize", pmc_tool::summarize_help, pmc_tool::cmd_summarize, true},
    {"critical", pmc_tool::critical_help, pmc_tool::cmd_critical, true},
    {"diff", pmc_tool::diff_help, pmc_tool::cmd_diff, true},
    {"aggregate", pmc_tool::aggregate_help, pmc_tool::cmd_aggregate, true},
    {"export", pmc_tool::export_help, pmc_tool::cmd_export, true},
};

const Command* find_command(const std::string& name) {
    for (const auto& c : commands)
        if (name == c.name) return &c;
    return nullptr;
}

/// pmc help [COMMAND]: the help of pmc, or of COMMAND (as pmc COMMAND --help).
int run_help(const std::vector<std::string>& args) {
    pmc_cli::CommandLine cl("pmc help", usage_text);
    std::string name;
    cl.option("COMMAND", name, "a command");
    if (auto status = cl.parse(args)) return *status;
    if (name.empty()) return pmc_cli::print_help("pmc help", usage_text);
    const Command* c = find_command(name);
    if (!c) return cl.usage_error(fmt::format("unknown command '{}' (the commands are listed by pmc --help)", name));
    return pmc_cli::print_help("pmc help", c->help);
}

} // namespace

int main(int argc, char** argv) {
    pmc_cli::CommandLine cl("pmc", usage_text);
    // The options the usage line puts before COMMAND are the command's own: `pmc --json summarize F` is
    // `pmc summarize --json F`. They are read here only to find COMMAND, and handed to it.
    std::string sysfs;
    bool flag = false, version = false;
    cl.option("--sysfs", sysfs, "a directory");
    cl.flag("--json", flag);
    cl.flag("--csv", flag);
    cl.flag("--like-perf-stat", flag);
    cl.flag("--version", version);
    cl.command_follows(); // COMMAND and what follows it
    if (auto status = cl.parse(argc, argv)) return *status;
    if (version) {
        fmt::print("pmc {}\n", PMC_VERSION_STRING);
        return 0;
    }
    const std::vector<std::string> rest = cl.command();
    if (rest.empty()) return cl.usage_error("no command given (pmc COMMAND; pmc --help lists them)");
    const int before = argc - 1 - static_cast<int>(cl.remaining().size()); // the options before COMMAND
    std::vector<std::string> args(argv + 1, argv + 1 + before);
    args.insert(args.end(), rest.begin() + 1, rest.end());
    if (rest.front() == "help") return run_help(args);
    if (const Command* c = find_command(rest.front()))
        return c->guarded ? pmc_tool::cli::guarded(c->name, [&] { return c->run(args); }) : c->run(args);
    return cl.usage_error(fmt::format("unknown command '{}'", rest.front()));
}
