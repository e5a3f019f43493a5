// SPDX-License-Identifier: MIT
// pmc count: count a command's events, like perf stat, from its exec to its exit, children included.
//
// The events form one group opened on the command's process before it executes (the child waits on a pipe), with
// enable_on_exec and inherit: counting starts at the exec of the command, not during pmc's own fork, and covers the
// threads and processes it creates. (perf stat opens each event on its own unless asked for a {group}; pmc opens
// one group so that every count covers the same instructions.) The counts come from one read() of the group after
// the command exits, scaled where the kernel multiplexed the counters, each marked with the share of the time it
// was counted.
//
// Signals and processes: the command runs as a job of pmc's (job.hpp): in a process group of its own, so that a
// signal sent to pmc's group or to pmc alone reaches it once, passed on by pmc, which then still writes the report.
// A signal that arrives as pmc starts the command is not lost: the command does not run or is ended by it. If the
// command died of SIGINT or SIGQUIT, pmc then ends itself so too, so that a calling shell script stops as it would
// have without pmc; other signals give exit status 128 + the signal number. SIGCHLD is at its default while pmc
// waits, so the exit status is the command's even if pmc was started with SIGCHLD ignored. If the counters cannot
// be read after the command ran, or an event was never counted, pmc says why and exits with the command's status,
// or 1 where that is 0: never 0 with a count missing.
//
// Output: -o FILE is opened before the command runs; if writing it fails at the end, the counts go to stderr and
// the exit status is 1 where the command's was 0.
//
// Hybrid CPUs: a hardware event counts on one core type. If the events include a hardware event and pmc may run on
// both core types, pmc pins itself (and so the command) to the performance cores (to the efficiency cores if the
// events name only cpu_atom/) before it starts the command, and says so; pin it yourself (taskset -c CPUS pmc
// count ...) to choose otherwise.
//
// The code reads top-down: the events, where the report goes, then each way of counting (--emulate, native) as
// short steps: start the command, wait for it, read its counts, render the report.
#include "commands.hpp"

#include <pmc/emulated.hpp>
#include <pmc/group.hpp>
#include <pmc/hybrid.hpp>
#include <pmc/modelled_events.hpp>
#include <pmc/pmu.hpp>
#include <pmc/report.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pmc_tool {

const char* const count_help = R"(usage: pmc [--sysfs DIR] count [-e EVENT[,EVENT]...]... [--csv | --json] [-o FILE]
                 [--emulate [--cache[=host] [--I1 G] [--D1 G] [--L2 G] [--LL G]
                  [--inclusion cachegrind|strict]] [--branches] [--cpu MODEL] [--qemu PATH]]
                 [--] COMMAND [ARGS]

Run COMMAND and count its events from its exec to its exit, children included, like perf stat but
as one group (perf stat opens each event alone unless given a {group}): counts are scaled where the
kernel multiplexed, each with the share of the time it was counted. Default events: task-clock,
context-switches, page-faults (and instructions:u, cycles:u where there is a cpu PMU).

The report shows the counts, task-clock in msec with the CPUs it kept busy, and the seconds of time
elapsed, as perf stat does. pmc's in-process readings (wall-time, tsc, instructions-minus-irqs:u) are
not counted here; pmc says what to count instead.

Options:
  -e EVENT[,EVENT]  An event to count (repeatable); commas inside a PMU's terms stay in the event,
                    and perf's {a,b} braces are accepted. `pmc list` shows the events.
  --csv             CSV: event,count,raw,running_fraction,counted (counts in the events' units); with
                    --emulate two more: modelled (true for a model's figure: --cache, branch-misses)
                    and partial (true on every row when a process never reached its exit; below).
  --json            JSON: command, exit_status, elapsed_ns, time_enabled_ns, time_running_ns, counts
                    (with --emulate each count has "modelled": true or false).
                    --csv and --json exclude each other (a usage error, status 1).
  -o FILE           Write the report to FILE (opened before COMMAND runs) instead of stderr.
  --emulate         Run COMMAND under pmc emulate (QEMU user mode with pmc's plugin) and count its
                    instructions exactly on any machine: instructions:u (the default here) or
                    instructions, emulated (QEMU TCG), not a real core's; the dynamically linked
                    programs it executes are counted too. No other event can be counted so,
                    but for the modelled cache events of --cache and the branch events of
                    --branches.
  --cache           With --emulate: model the caches too (Cachegrind's model: I1, D1, LL; LRU,
                    write-allocate; each thread caches of its own) and count L1-dcache-loads,
                    L1-dcache-load-misses, L1-dcache-stores, L1-dcache-store-misses,
                    L1-icache-load-misses, LLC-loads, LLC-load-misses, LLC-stores, LLC-store-misses,
                    cache-references, cache-misses (:u or none; the default events then: instructions:u,
                    the L1 ones, LLC-load-misses and LLC-store-misses, and with --L2 also LLC-loads,
                    LLC-stores and cache-references, the L2's misses), each marked modelled.
  --cache=host      As --cache, with this machine's caches (sysfs, else CPUID; an L2 when there is
                    a level above it), printed at the start. Without it never the host's.
  --I1 G, --D1 G, --L2 G, --LL G
                    With --cache: a cache's geometry, SIZE,ASSOC,LINE in bytes, as Valgrind's options
                    (default 32768,8,64 for I1 and D1 and 8388608,16,64 for LL, no L2). An L2 lies
                    between the L1s and the LL: LLC-loads, LLC-stores and cache-references then count
                    its misses (and are among the default events).
                    The set count must be a power of two; an L2 larger than the L1s, smaller than
                    the LL. A wrong geometry is a usage error (status 1).
  --inclusion cachegrind|strict
                    With --cache: cachegrind (the default: a line the LL evicts stays in the L1s)
                    or strict (an inclusive LL: it leaves the L1s, and the L2, too); pmc emulate
                    --help says more.
  --branches        With --emulate: count branches too (each thread's own): branch-instructions
                    (or branches; exact: every branch executed, conditional or not, jumps, calls,
                    returns) and branch-misses (modelled: Cachegrind's branch predictor's misses on
                    conditional and indirect branches); :u or none. Added to the default events; the
                    footer (JSON: "branch_model") gives Cachegrind's Bc, Bcm, Bi and Bim.
  --cpu MODEL       With --emulate: the CPU the program sees (QEMU's -cpu, as pmc emulate --cpu;
                    default: $QEMU_CPU, else pmc's Haswell, Valgrind's, on every QEMU version).
  --qemu PATH       With --emulate: the QEMU user-mode binary (as pmc emulate --qemu; default
                    $PMC_QEMU, else qemu-x86_64 or qemu-aarch64 on PATH, else scripts/build-qemu's).
  --sysfs DIR       Read PMUs from DIR instead of /sys/bus/event_source/devices.
  -h, --help        Show this help.

Signals: COMMAND runs in a process group of its own. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to
pmc or to its process group (kill, timeout(1), a CI runner's cancel) reach COMMAND's processes once,
passed on by pmc; at a terminal, COMMAND has it (Ctrl-C, Ctrl-Z, reads) as a shell's job does. pmc
still prints the report, then ends of COMMAND's SIGINT or SIGQUIT as COMMAND did. When COMMAND ends,
or pmc is killed (kill -9 too), no process COMMAND started runs on (one that calls setsid escapes).
With --emulate, a process that a signal ends (SIGINT, SIGTERM, SIGHUP, SIGKILL; QEMU 8.0 and later
report a core-dumping one such as SIGQUIT) is counted up to its last system call, the models'
events too: the counts are marked (partial) (an event with nothing kept reads "not counted"), and
the status is COMMAND's, or 1 where COMMAND exited 0 (a child it started was killed): never 0 with a
count missing.
Exit status: COMMAND's (128 + N if signal N ended it); 127 if COMMAND cannot be run; 1 if the
command line or an event is wrong or the counters cannot be opened (COMMAND does not run then),
or if COMMAND exited 0 but the report is incomplete (-o's file not written, the counts unreadable
after the run, an event never counted, --emulate partial), said on stderr.
)";

namespace {

/// Ends pmc with `sig` (after the report) when pmc was started with its default disposition, so that a shell
/// script running pmc stops as it would have without pmc.
void die_of(int sig) {
    std::fflush(nullptr);
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) ::raise(sig);
}

/// Hybrid CPUs: if a hardware event is wanted and this process may run on both core types, pins it (and so the
/// command, which inherits the affinity) to one core type: the one the events name (cpu_atom/...), else the
/// performance cores. Returns what it did ("" if nothing), or a failure.
pmc::Result<std::string> pin_for_hybrid(const std::vector<std::string>& events, const std::string& sysfs) {
    const auto hybrid = pmc::hybrid_pmus(sysfs);
    if (hybrid.size() < 2) return std::string();
    bool generic = false, want_atom = false, want_core = false;
    for (const auto& text : events) {
        auto spec = pmc::try_parse_event(text, sysfs);
        if (!spec || !spec->core_pmu) continue; // a bad event string is reported when the group opens
        generic = generic || spec->pmu.empty();
        want_atom = want_atom || spec->pmu == "cpu_atom";
        want_core = want_core || spec->pmu == "cpu_core";
    }
    // Both core types named explicitly cannot share a group anyway: leave that to the group's refusal.
    if (!(generic || want_atom || want_core) || (want_atom && want_core)) return std::string();
    const pmc::CoreType type = want_atom && !want_core ? pmc::CoreType::efficiency : pmc::CoreType::performance;
    auto confined = confine_to_core_type(type, sysfs);
    if (!confined) return confined.failure();
    if (!confined->pinned) return std::string(); // already on one core type
    return "hybrid CPU: the command runs " + confined->text + ", since a hardware event counts on one core type "
           "only. To choose, pin it yourself: taskset -c CPUS pmc count ...";
}

/// Why `event` is one of pmc's in-process readings that a count of another command cannot use, said for someone
/// at the command line; "" for a perf event (or a bad string, which the group's open reports).
std::string not_countable_here(const std::string& event, const std::string& sysfs) {
    auto spec = pmc::try_parse_event(event, sysfs);
    if (!spec) {
        // A composite this CPU cannot form (no known interrupt event, e.g. on Arm): still advice, not a parse error.
        const std::string why = spec.failure().message;
        if (event.rfind("instructions-minus-", 0) == 0)
            return "'" + event + "' is pmc's composite of two counters read in-process, and this CPU cannot form "
                   "it here (" + why.substr(0, why.find('\n')) + "). pmc count reports the counts it is made of "
                   "where they exist: -e instructions:u,<the CPU's interrupt event>";
        return "";
    }
    if (spec->kind == pmc::EventKind::wall_time)
        return "'" + event + "' is pmc's in-process clock, for programs that read it themselves; pmc count always "
               "prints the command's elapsed time (\"seconds time elapsed\"). For its CPU time, count task-clock "
               "(the default).";
    if (spec->kind == pmc::EventKind::tsc)
        return "'" + event + "' is pmc's in-process TSC clock, for programs that read it themselves; pmc count "
               "always prints the command's elapsed time. To count TSC ticks, use perf's msr/tsc/ (pmc list shows "
               "whether this machine has the msr PMU).";
    if (spec->kind == pmc::EventKind::difference)
        return "'" + event + "' is pmc's composite of two counters read in-process (instructions:u minus " +
               spec->minus_text + ", " + spec->minus_name + "); pmc count reports its parts: -e instructions:u," +
               spec->minus_text;
    return "";
}

/// perf stat's clock events (task-clock, cpu-clock): counted in ns, shown in msec with the CPUs they kept busy.
bool is_clock_event(const std::string& name, const std::string& sysfs) {
    auto spec = pmc::try_parse_event(name, sysfs);
    return spec && spec->kind == pmc::EventKind::perf && spec->attr.type == PERF_TYPE_SOFTWARE &&
           (spec->attr.config == PERF_COUNT_SW_TASK_CLOCK || spec->attr.config == PERF_COUNT_SW_CPU_CLOCK);
}

/// The text report's table, in perf stat's units: clock events in msec with "CPUs utilized" (their time over the
/// elapsed time), the raw (unscaled) count beside each, and the share of the time each was counted.
std::string count_text_table(const std::vector<std::string>& names, const std::vector<pmc::EventCount>& counts,
                             const std::string& sysfs, std::uint64_t elapsed_ns) {
    std::size_t width = 5;
    for (const auto& n : names) width = std::max(width, n.size());
    std::string out = fmt::format("{:<{}}  {:>18}  {:>18}  {:>8}\n", "event", width, "count", "raw", "counted");
    for (std::size_t i = 0; i < counts.size() && i < names.size(); ++i) {
        const pmc::EventCount& c = counts[i];
        if (!c.counted) {
            out += fmt::format("{:<{}}  {:>18}  {:>18}  {:>8}\n", names[i], width, "not counted", "-", "0 %");
            continue;
        }
        const std::string scaled = c.multiplexed() ? "  (scaled)" : "";
        if (is_clock_event(names[i], sysfs)) {
            const std::string busy =
                elapsed_ns ? fmt::format("  # {:.3f} CPUs utilized", c.estimate / static_cast<double>(elapsed_ns)) : "";
            out += fmt::format("{:<{}}  {:>18}  {:>18}  {:>7.1f}%{}{}\n", names[i], width,
                               fmt::format("{:.2f} msec", c.estimate / 1e6), fmt::format("{} ns", c.raw),
                               100.0 * c.running_fraction, scaled, busy);
        } else {
            out += fmt::format("{:<{}}  {:>18.0f}  {:>18}  {:>7.1f}%{}\n", names[i], width, c.estimate, c.raw,
                               100.0 * c.running_fraction, scaled);
        }
    }
    return out;
}

// ---- the events -----------------------------------------------------------------------------------------------------

/// -e's values as one list of events: split at the commas between events, perf's {a,b} braces dropped, and pmc's
/// in-process readings refused (natively). Nothing, with the reason said, when they cannot be counted.
std::optional<std::vector<std::string>> events_to_count(const Options& o, const std::vector<std::string>& given) {
    std::vector<std::string> events;
    for (const auto& e : given) {
        auto list = pmc::split_event_list(e);
        if (auto why = pmc::empty_event_text("-e", e, list); !why.empty()) {
            const bool none = std::all_of(list.begin(), list.end(), [](const auto& x) { return x.empty(); });
            fmt::print(stderr, "pmc: count: {}{}\n", why,
                       none ? ": give an event, e.g. -e page-faults (or no -e for the default events)" : "");
            return std::nullopt;
        }
        for (auto& one : list) {
            // perf stat's group braces, "{a,b}": pmc count groups all its events anyway.
            if (!one.empty() && one.front() == '{') one.erase(0, 1);
            if (!one.empty() && one.back() == '}') one.pop_back();
            if (one.find_first_of("{}") != std::string::npos) {
                fmt::print(stderr, "pmc: count: '{}': pmc count opens all its events as one group already, so braces "
                                   "are taken only as perf's {{a,b}} with no group modifier after them; put a "
                                   "modifier on each event instead (e.g. -e a:u,b:u)\n", e);
                return std::nullopt;
            }
            events.push_back(one);
        }
    }
    for (const auto& e : events)
        if (auto why = o.emulate ? std::string() : not_countable_here(e, o.sysfs); !why.empty()) {
            fmt::print(stderr, "pmc: count: {}\n", why);
            return std::nullopt;
        }
    return events;
}

/// The events counted natively when -e names none: perf stat's software ones, and instructions and cycles where
/// there is a cpu PMU.
std::vector<std::string> default_native_events(const std::string& sysfs) {
    std::vector<std::string> events = {"task-clock", "context-switches", "page-faults"};
    if (pmc::has_core_pmu(sysfs)) events.insert(events.begin(), {"instructions:u", "cycles:u"});
    return events;
}

/// The events pmc count --emulate counts, and which of them the cache model answers (--cache).
struct EmulatedCountEvents {
    std::vector<std::string> names;
    std::vector<bool> modelled;
    std::vector<bool> branch; ///< a --branches event (branch-misses among them is modelled)
    /// Each event's mark in the report: a model's figure (a cache event, or branch-misses), not a count.
    std::vector<bool> marked_modelled() const {
        std::vector<bool> out(names.size());
        for (std::size_t i = 0; i < names.size(); ++i)
            out[i] = modelled[i] || (branch[i] && pmc::is_modelled_branch_event_name(names[i]));
        return out;
    }
    std::string plugin_arguments; ///< the plugin's ",cache=..." for --cache, or ""
    std::string model_note;       ///< what the cache model is, for the report (--cache), or ""
    bool has_l2 = false;          ///< --L2 (or --cache=host with one): the LLC-loads/-stores events count its misses
};

/// What the emulator can count with `o`'s models, from the one list (pmc/modelled_events.hpp), to end a refusal
/// with: "" without --cache or --branches (the refusal names instructions then).
std::string modelled_names_text(bool cache, bool branches) {
    std::string names = "instructions";
    auto add = [&](const auto& list) {
        for (const std::string_view n : list) names += ", " + std::string(n);
    };
    if (cache) add(pmc::modelled_cache_event_names);
    if (branches) {
        add(pmc::branch_count_event_names);
        add(pmc::modelled_branch_event_names);
    }
    return names;
}
std::string emulated_events_text(const Options& o) {
    if (!o.cache && !o.branches) return "";
    return fmt::format("With {}, pmc count --emulate counts: {} (each :u or none)",
                       o.cache && o.branches ? "--cache and --branches" : o.cache ? "--cache" : "--branches",
                       modelled_names_text(static_cast<bool>(o.cache), o.branches));
}

/// What pmc says (after "pmc: ") when the emulator cannot count `event`, not a modelled cache event; "" when it can.
std::string not_emulated(const Options& o, const std::string& event) {
    auto spec = pmc::try_parse_event(event, o.sysfs);
    const std::string can = emulated_events_text(o);
    if (!spec) return spec.failure().message + (can.empty() ? "" : "\n" + can);
    std::string why = spec->kind == pmc::EventKind::perf ? pmc::emulated_refusal(*spec) : std::string();
    if (!why.empty() || spec->kind != pmc::EventKind::perf)
        why = std::string(o.cache || o.branches ? "the emulator neither counts nor models it"
                                                : "pmc count --emulate counts instructions:u or instructions") +
              (why.empty() ? std::string(" (pmc's composites and clocks are read inside a program)")
                           : ": " + why.substr(why.find(';') == std::string::npos ? 0 : why.find(';') + 2));
    // A modelled event's own name with another modifier than :u (":uk", ":p"): the name is right, the modifier is not.
    if (why.empty() && (pmc::is_modelled_event_name(event) || pmc::is_branch_count_event_name(event)) &&
        event.find(':') != std::string::npos)
        return fmt::format("count --emulate: cannot count '{}': the emulator counts '{}' with :u or no modifier, not "
                           "'{}': it sees the program's user-mode work alone (it runs no kernel code), and a model has "
                           "no skid to make precise. Fix: -e {}:u",
                           event, pmc::event_base_name(event), event.substr(event.find(':')),
                           pmc::event_base_name(event));
    if (why.empty() && !pmc::is_instruction_event(*spec)) // perf's other spellings of a modelled event (its "-miss")
        return fmt::format("count --emulate: cannot count '{}': it is a cache or branch event spelled otherwise than "
                           "the emulator's names, which are: {} (each :u or none)",
                           event, modelled_names_text(true, true));
    if (why.empty()) return "";
    return fmt::format("count --emulate: cannot count '{}': {}{}", event, why, can.empty() ? "" : ".\n" + can);
}

/// pmc count --emulate's events (the defaults where -e named none) and the cache model's arguments; nothing, with
/// the reason said, when the emulator cannot count one or a geometry is wrong.
std::optional<EmulatedCountEvents> emulated_count_events(const Options& o, std::vector<std::string> events) {
    CacheModelChoice model;
    if (std::string why = choose_cache_model(o.cache, model); !why.empty()) {
        fmt::print(stderr, "pmc: count --emulate: {}\n", why);
        return std::nullopt;
    }
    const bool events_given = !events.empty();
    if (events.empty() && o.cache) // the default with --cache: the model's counts too
        events = {"instructions:u", "L1-dcache-loads", "L1-dcache-load-misses", "L1-dcache-stores",
                  "L1-dcache-store-misses", "L1-icache-load-misses", "LLC-load-misses", "LLC-store-misses"};
    if (!events_given && model.has_l2) // with an L2: what reaches the LL is the L2's misses, which add up to its total
        events.insert(events.end() - 2, {"LLC-loads", "LLC-stores", "cache-references"});
    if (events.empty()) events = {"instructions:u"};
    if (o.branches && !events_given) // the default with --branches: the branch events too
        for (const char* e : {"branch-instructions:u", "branch-misses:u"}) events.push_back(e);
    EmulatedCountEvents out{events, std::vector<bool>(events.size(), false), std::vector<bool>(events.size(), false),
                            "", ""};
    out.has_l2 = model.has_l2;
    if (!model.host_source.empty())
        fmt::print(stderr, "pmc: count --emulate --cache=host: {} ({})\n", model.geometry, model.host_source);
    out.plugin_arguments = model.plugin_arguments;
    if (o.branches) out.plugin_arguments += ",branches=on";
    out.model_note = model.note;
    for (std::size_t i = 0; i < events.size(); ++i) {
        const std::string& e = events[i];
        // Refused as pmc count refuses a group that names an event twice: two rows of one count help no one.
        if (std::find(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(i), e) !=
            events.begin() + static_cast<std::ptrdiff_t>(i)) {
            fmt::print(stderr, "pmc: count --emulate: '{}' is in -e twice: name each event once\n", e);
            return std::nullopt;
        }
        if (branch_count(e, EmulatedReport{})) {
            if (!o.branches) {
                fmt::print(stderr, "pmc: count --emulate: '{}' is a branch event: the emulator counts branches only "
                                   "with --branches (pmc count --emulate --branches -e {} -- COMMAND)\n", e, e);
                return std::nullopt;
            }
            out.branch[i] = true;
        } else if (modelled_cache_count(e, EmulatedReport{})) {
            if (!o.cache) {
                fmt::print(stderr, "pmc: count --emulate: '{}' is a cache event: the emulator models the caches only "
                                   "with --cache (pmc count --emulate --cache -e {} -- COMMAND)\n", e, e);
                return std::nullopt;
            }
            out.modelled[i] = true;
        } else if (const std::string why = not_emulated(o, e); !why.empty()) {
            fmt::print(stderr, "pmc: {}\n", why);
            return std::nullopt;
        }
    }
    return out;
}

// ---- the report's file and text -------------------------------------------------------------------------------------

/// Where the report goes: -o's file, opened before the command runs (as perf stat -o does: a bad path costs no
/// run), or stderr. Closed at the end of its scope if the report was not written.
class CountReportOutput {
public:
    explicit CountReportOutput(std::string path) : path_(std::move(path)) {}
    CountReportOutput(const CountReportOutput&) = delete;
    CountReportOutput& operator=(const CountReportOutput&) = delete;
    ~CountReportOutput() {
        if (file_) std::fclose(file_);
    }

    /// Opens -o's file, if one was given; false after saying why it cannot be.
    bool open() {
        if (path_.empty() || (file_ = std::fopen(path_.c_str(), "w"))) return true;
        fmt::print(stderr, "pmc: count: cannot write {}: {} (nothing was run)\n", path_, std::strerror(errno));
        return false;
    }

    /// Writes the report to the file (closing it) or to stderr, like perf stat (the command's own output stays on
    /// stdout). If the file cannot be written, the counts are not lost: they go to stderr, and a status of 0
    /// becomes 1. Returns the status to exit with.
    int write(const std::string& text, int exit_status) {
        if (!file_) {
            std::fputs(text.c_str(), stderr);
            return exit_status;
        }
        const bool written = std::fputs(text.c_str(), file_) >= 0;
        const int closed = std::fclose(file_);
        file_ = nullptr;
        if (written && closed == 0) return exit_status;
        fmt::print(stderr, "pmc: count: cannot write {}: {}; the counts:\n{}", path_, std::strerror(errno), text);
        return exit_status == 0 ? 1 : exit_status;
    }

private:
    std::string path_;
    FILE* file_ = nullptr;
};

/// The command as the report shows it: its words joined by spaces.
std::string count_command_text(const std::vector<std::string>& command) {
    std::string shown;
    for (const auto& a : command) shown += (shown.empty() ? "" : " ") + a;
    return shown;
}

std::uint64_t nanoseconds_since(std::chrono::steady_clock::time_point start) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

/// The JSON report's opening: the command, its exit status and elapsed time; the caller adds the rest.
pmc::JsonWriter& json_report_head(pmc::JsonWriter& j, const std::vector<std::string>& command, int exit_status,
                                  std::uint64_t elapsed_ns) {
    j.begin_object().key("command").begin_array();
    for (const auto& a : command) j.value(a);
    return j.end_array().field("exit_status", exit_status).field("elapsed_ns", elapsed_ns);
}

// ---- pmc count --emulate --------------------------------------------------------------------------------------------

/// What one run under the emulator gave: the command's status, its time, and the plugin's report of its processes.
struct EmulatedCountRun {
    int exit_status = 0;
    int raw_status = 0; ///< from waitpid
    std::uint64_t elapsed_ns = 0;
    EmulatedReport processes;
};

/// Runs the command under the emulator and reads the plugin's report; the status to exit with if it cannot run.
std::optional<int> run_count_emulated(const Options& o, const std::vector<std::string>& command,
                                      const std::string& plugin_arguments, EmulatedCountRun& run, bool say_unfinished) {
    auto emulator = find_emulator(o.qemu, o.cpu);
    if (!emulator) {
        fmt::print(stderr, "pmc: count --emulate: {}\n", emulator.failure().message);
        return 1;
    }
    if (!emulator->cpu_warning.empty()) fmt::print(stderr, "pmc: count --emulate: warning: {}\n", emulator->cpu_warning);
    const EmulatedReportFile report_file;
    if (report_file.path.empty()) {
        fmt::print(stderr, "pmc: count --emulate: {}; nothing was run. {}\n", report_file.failure, report_file.fix);
        return 1;
    }
    const std::string shown = count_command_text(command);
    const auto go_time = std::chrono::steady_clock::now();
    Job job;
    job.remove_if_pmc_dies(report_file.dir);
    auto child = start_emulated(job, *emulator, command, false, ",report=" + report_file.path + plugin_arguments);
    if (!child) {
        fmt::print(stderr, "pmc: count: {}\n", child.failure().message);
        return child.failure().code.value() == ENOENT ? 127 : child.failure().code.value() == ENOEXEC ? 126 : 1;
    }
    run.exit_status = finish_emulated(job, shown, run.raw_status, "pmc: count --emulate");
    run.elapsed_ns = nanoseconds_since(go_time);
    run.processes = read_emulated_report(report_file.path);
    if (WIFSIGNALED(run.raw_status) && WTERMSIG(run.raw_status) == SIGSEGV && emulator->misaligns_signal_frames &&
        !run.processes.faulted_without_handler(*child))
        fmt::print(stderr, "pmc: count: {}\n", signal_frame_explanation(*emulator, "'" + shown + "'"));
    if (const std::string note = unfinished_note(run.processes, run.raw_status); !note.empty() && say_unfinished)
        fmt::print(stderr, "pmc: count --emulate: {}\n", note); // (the text report says it, on stderr)
    explain_child_sigills(run.processes, *child, "pmc: count --emulate");
    explain_child_segfaults(run.processes, *child, *emulator, "pmc: count --emulate");
    const std::string native = native_programs_note(run.processes);
    if (!native.empty()) fmt::print(stderr, "pmc: count --emulate: {}\n", native);
    return std::nullopt;
}

/// Each event's count in the plugin's report: the instructions of every emulated process (with the partial counts
/// of those a signal ended), or the model's figure.
std::vector<std::uint64_t> emulated_counts(const EmulatedCountEvents& events, const EmulatedReport& r) {
    std::vector<std::uint64_t> values(events.names.size(), r.instructions + r.partial_instructions);
    for (std::size_t i = 0; i < values.size(); ++i)
        if (events.modelled[i]) values[i] = modelled_cache_count(events.names[i], r).value_or(0);
        else if (events.branch[i]) values[i] = branch_count(events.names[i], r).value_or(0);
    return values;
}

/// Whether an event's count is missing: a model's, when no emulated process reported the model's counts (at its
/// exit, or in its progress file at a system call: progress_file.hpp).
bool model_count_missing(const EmulatedCountEvents& events, const EmulatedReport& r, std::size_t i) {
    return (events.modelled[i] && !r.has_cache) ||
           (events.branch[i] && !r.has_branches); // (branch-instructions too: the branch model counts them)
}

/// The counts as the library's report functions take them: counted the whole time, or not counted (missing).
std::vector<pmc::EventCount> exact_event_counts(const std::vector<std::uint64_t>& values,
                                                const std::vector<bool>& missing = {}) {
    std::vector<pmc::EventCount> counts(values.size());
    for (std::size_t i = 0; i < counts.size(); ++i) {
        counts[i].raw = values[i];
        counts[i].estimate = static_cast<double>(values[i]);
        counts[i].running_fraction = 1.0;
        counts[i].counted = i >= missing.size() || !missing[i];
    }
    return counts;
}

std::vector<bool> missing_counts(const EmulatedCountEvents& events, const EmulatedReport& r) {
    std::vector<bool> missing(events.names.size());
    for (std::size_t i = 0; i < missing.size(); ++i) missing[i] = model_count_missing(events, r, i);
    return missing;
}

/// How pmc's Bc differs from Cachegrind's, said wherever the fields are shown: a one-to-one comparison is off by the
/// program's rep-string iterations (a `rep stosb` of 100,000 bytes: 100,000 Bc in Cachegrind, none in pmc).
const char* const rep_string_note =
    "Bc as Cachegrind's without its one conditional branch per rep-string iteration (pmc counts a rep-prefixed "
    "string instruction once, as a core does)";

/// The footer's line of Cachegrind's branch fields, or what it lacks: never a 0 for a figure that was not counted.
std::string branch_fields_text(const EmulatedReport& r) {
    if (!r.has_branches)
        return "Cachegrind's fields (Bc Bcm Bi Bim): not counted (no emulated process reported the branch model's "
               "totals, at its exit or its system calls).";
    return fmt::format("Cachegrind's fields: Bc {} Bcm {} Bi {} Bim {}{}; {}.", r.Bc, r.Bcm, r.Bi, r.Bim,
                       r.unfinished == 0                     ? ""
                       : r.partial_models == r.unfinished    ? " (partial: up to the last system call)"
                                                             : " (lacking the processes that never reached their exit)",
                       rep_string_note);
}

/// Whether the events counted include an instruction count (else the notes name "the events above", not instructions).
bool counts_instructions(const EmulatedCountEvents& events) {
    return std::any_of(events.names.begin(), events.names.end(),
                       [](const std::string& n) { return n.rfind("instructions", 0) == 0; });
}

std::string emulated_json(const Options& o, const std::vector<std::string>& command, const EmulatedCountRun& run,
                          const EmulatedCountEvents& events, const std::vector<std::uint64_t>& values) {
    pmc::JsonWriter j;
    const bool instructions = counts_instructions(events);
    json_report_head(j, command, run.exit_status, run.elapsed_ns)
        .field("emulated", std::string("emulated (QEMU TCG): ") +
                               (run.processes.unfinished > 0
                                    ? std::string(instructions ? "a partial count" : "partial counts") + " (" +
                                          unfinished_note(run.processes, run.raw_status) + ")"
                                    : std::string(instructions ? "an exact count" : "counts")) +
                               (instructions ? " of the instructions the emulator executed"
                                             : " of the events counted, over what the emulator executed") +
                               " for the whole command, not a real core's" +
                               (instructions ? "" : "; no instruction count was asked for"));
    if (o.cache) j.field("modelled", events.model_note);
    if (o.branches) { // (null where no process reported the model's counts: never a 0 that was not counted)
        j.key("branch_model").begin_object().field("note", branch_model_note).field("rep_strings", rep_string_note);
        const std::pair<const char*, std::uint64_t> fields[] = {{"Bc", run.processes.Bc}, {"Bcm", run.processes.Bcm},
                                                                {"Bi", run.processes.Bi}, {"Bim", run.processes.Bim}};
        for (const auto& [name, value] : fields)
            if (run.processes.has_branches) j.field(name, value);
            else j.key(name).null();
        j.end_object();
    }
    j.field("processes", run.processes.processes)
        .field("unfinished_processes", run.processes.unfinished)
        .field("partial", run.processes.unfinished > 0)
        .field("partial_processes", run.processes.partial_processes)
        // (of the unfinished: those that reached their exit but whose report line could not be written, and why)
        .field("unwritten_processes", run.processes.unwritten)
        .key("unwritten_error");
    if (run.processes.unwritten > 0) j.value(std::string(std::strerror(run.processes.unwritten_errno)));
    else j.null();
    j.key("native_programs").begin_array();
    for (const auto& n : run.processes.native) j.value(n);
    j.end_array().key("counts");
    pmc::write_counts_json(j, events.names, exact_event_counts(values, missing_counts(events, run.processes)),
                           events.marked_modelled());
    j.end_object();
    return j.str() + "\n";
}

std::string emulated_text(const Options& o, const std::string& shown, const EmulatedCountRun& run,
                          const EmulatedCountEvents& events, const std::vector<std::uint64_t>& values) {
    const EmulatedReport& r = run.processes;
    std::string text = fmt::format("\n pmc count --emulate of '{}' (exit status {}; {} emulated process{}):\n\n", shown,
                                   run.exit_status, r.processes, r.processes == 1 ? "" : "es");
    std::size_t width = 5;
    for (const auto& n : events.names) width = std::max(width, n.size());
    text += fmt::format("{:<{}}  {:>18}\n", "event", width, "count");
    const std::vector<bool> modelled = events.marked_modelled();
    for (std::size_t i = 0; i < events.names.size(); ++i) {
        if (model_count_missing(events, r, i))
            text += fmt::format("{:<{}}  {:>18}\n", events.names[i], width, "not counted");
        else
            text += fmt::format("{:<{}}  {:>18}{}{}\n", events.names[i], width, values[i],
                                modelled[i] ? "  (modelled)" : "", r.unfinished > 0 ? "  (partial)" : "");
    }
    const std::string covered =
        r.native.empty() ? "every thread, and every program it executed"
                         : fmt::format("every thread and every emulated process; not the {} program{} that ran "
                                       "natively", r.native.size(), r.native.size() == 1 ? "" : "s");
    if (r.unfinished > 0)
        text += "\n partial, not exact: " + unfinished_note(r, run.raw_status) + ".\n";
    else if (WIFSIGNALED(run.raw_status))
        text += fmt::format("\n (ended by {}: counted up to the signal)\n", signal_name(WTERMSIG(run.raw_status)));
    // The footer names what was counted: the instructions, or only the events listed (-e L1-dcache-load-misses).
    const bool instructions = counts_instructions(events);
    const std::string what =
        instructions ? fmt::format("{} of the instructions the emulator executed",
                                   r.unfinished > 0 ? "a partial count" : "an exact count")
                     : fmt::format("{} of the events above, over what the emulator executed",
                                   r.unfinished > 0 ? "partial counts" : "counts");
    text += fmt::format("\n emulated (QEMU TCG): {} for the whole command ({}), not a real core's.{}\n {:>14.9f} "
                        "seconds time elapsed (under the emulator)\n",
                        what, covered, instructions ? "" : " No instruction count was asked for (add -e instructions:u).",
                        static_cast<double>(run.elapsed_ns) / 1e9);
    if (o.cache) text += " " + events.model_note + ".\n";
    if (o.cache && events.has_l2)
        text += " With the L2: LLC-loads, LLC-stores and cache-references count what misses it (reads, writes, and "
                "those with instruction fetches), the LLC-*-misses what misses the LL too.\n";
    if (o.branches) text += " " + std::string(branch_model_note) + ".\n " + branch_fields_text(r) + "\n";
    return text;
}

/// pmc count --emulate: the command under the emulator, its instructions from the plugin's per-process totals.
int count_emulated(const Options& o, const std::vector<std::string>& command, const std::vector<std::string>& given) {
    CountReportOutput out(o.output);
    if (!out.open()) return 1;
    const auto events = emulated_count_events(o, given);
    if (!events) return 1;
    EmulatedCountRun run;
    if (auto failed = run_count_emulated(o, command, events->plugin_arguments, run, o.json || o.csv || !o.output.empty()))
        return *failed;
    const std::string shown = count_command_text(command);
    if (run.processes.processes - run.processes.unfinished + run.processes.partial_processes == 0) {
        if (const std::string note = unfinished_note(run.processes, run.raw_status); !note.empty())
            fmt::print(stderr, "pmc: count --emulate: {}\n", note);
        fmt::print(stderr, "pmc: count --emulate: '{}' (exit status {}) left no count: no emulated process reached its "
                           "exit (killed by a signal, or QEMU did not start it)\n", shown, run.exit_status);
        end_like(run.raw_status); // (a calling script stops on the command's SIGINT or SIGQUIT all the same)
        return run.exit_status ? run.exit_status : 1;
    }
    const std::vector<std::uint64_t> values = emulated_counts(*events, run.processes);
    // (CSV: every row says whether the run is partial, as the text's "(partial)" and the JSON's "partial" do.)
    const std::string text =
        o.json  ? emulated_json(o, command, run, *events, values)
        : o.csv ? pmc::count_csv(events->names, exact_event_counts(values, missing_counts(*events, run.processes)),
                                 events->marked_modelled(),
                                 std::vector<bool>(events->names.size(), run.processes.unfinished > 0))
                : emulated_text(o, shown, run, *events, values);
    int status = out.write(text, run.exit_status);
    // A process that never reached its exit leaves the counts partial: never status 0 then, as when -o's file
    // cannot be written (a script that checks only the status must not take them for whole).
    if (status == 0 && run.processes.unfinished > 0) {
        const bool one = run.processes.unfinished == 1;
        if (run.processes.unwritten == run.processes.unfinished)
            fmt::print(stderr, "pmc: count --emulate: exit status 1, though '{}' exited 0: the report line{} of {} "
                               "emulated process{} could not be written ({}), so the counts are not known to be "
                               "whole\n", shown, one ? "" : "s", run.processes.unfinished, one ? "" : "es",
                       std::strerror(run.processes.unwritten_errno));
        else
            fmt::print(stderr, "pmc: count --emulate: exit status 1, though '{}' exited 0: {} emulated process{} "
                               "never reached {} exit (a signal ended {}), so the counts are partial. For an "
                               "exact count, let every process the command starts exit\n",
                       shown, run.processes.unfinished, one ? "" : "es", one ? "its" : "their", one ? "it" : "them");
        status = 1;
    }
    end_like(run.raw_status); // (the report is written: now end as the command did)
    return status;
}

// ---- pmc count, natively --------------------------------------------------------------------------------------------

/// Pins pmc (and so the command) to one core type where a hybrid CPU needs it, and says so; false after saying why
/// it could not.
bool pin_and_say(const std::vector<std::string>& events, const std::string& sysfs) {
    auto pinned = pin_for_hybrid(events, sysfs);
    if (!pinned) {
        fmt::print(stderr, "pmc: count: {}\n", pinned.failure().message);
        return false;
    }
    if (!pinned->empty()) fmt::print(stderr, "pmc: count: {}\n", *pinned);
    return true;
}

/// The command's process, started and held before its exec until its counters are open (go), as a job of pmc's
/// (job.hpp): a process group of its own with a watchdog, the signals pmc receives passed on once, the terminal
/// handed over; a signal that arrives as it starts is not lost. (Members end in reverse: the job first.)
struct HeldCommand {
    Pipe go;
    /// The child writes its errno here when exec fails (close-on-exec: a command that runs closes it unwritten), so
    /// a command that never ran gets its error alone, not a table of zeros.
    Pipe exec_failed;
    Job job;
    pid_t pid = -1;
};

/// Starts the command held; the status to exit with if it cannot be.
std::optional<int> hold_command(HeldCommand& held, const std::vector<std::string>& command) {
    if (::pipe(held.go.end) != 0 || ::pipe2(held.exec_failed.end, O_CLOEXEC) != 0) {
        fmt::print(stderr, "pmc: count: pipe failed: {}\n", std::strerror(errno));
        return 1;
    }
    Pipe& go = held.go;
    Pipe& exec_failed = held.exec_failed;
    auto started = held.job.start([&] {
        ::close(go.end[1]);
        char byte;
        if (::read(go.end[0], &byte, 1) != 1) _exit(126); // pmc could not open the counters
        ::close(go.end[0]);
        std::vector<char*> argv;
        for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execvp(argv[0], argv.data());
        const int err = errno;
        std::fprintf(stderr, "pmc: count: cannot run '%s': %s\n", argv[0], std::strerror(err));
        [[maybe_unused]] const ssize_t told = ::write(exec_failed.end[1], &err, sizeof err);
        _exit(127);
    });
    if (!started) {
        fmt::print(stderr, "pmc: count: {}\n", started.failure().message);
        return 1;
    }
    held.pid = *started;
    exec_failed.close(1);
    go.close(0);
    return std::nullopt;
}

/// The events as one group on the held command, counting from its exec, its children included.
pmc::Result<pmc::Group> open_group_on(pid_t pid, const std::vector<std::string>& events, const std::string& sysfs) {
    pmc::OpenOptions options;
    options.pid = pid;
    options.count_children = true;
    options.enable_on_exec = true;
    options.sysfs_root = sysfs;
    return pmc::Group::try_open(events, options);
}

/// When the command never ran: if a Ctrl-C (or SIGQUIT) ended its process before it did, says so and ends pmc as
/// the command would have (returning true); false otherwise. Finishes the job either way.
bool interrupted_before_start(Job& job, bool waited, int status) {
    job.finish();
    if (!waited || !WIFSIGNALED(status) || (WTERMSIG(status) != SIGINT && WTERMSIG(status) != SIGQUIT)) return false;
    fmt::print(stderr, "pmc: count: interrupted before the command started\n");
    die_of(WTERMSIG(status));
    return true;
}

/// The counters did not open: the held command exits without running; the status to exit with.
int refuse_command(HeldCommand& held, const pmc::Failure& why) {
    int status = 0;
    held.go.close(1);
    const bool waited = held.job.wait(status);
    const int passed = Job::last_passed_on(); // (before finish() puts pmc's dispositions back)
    if (interrupted_before_start(held.job, waited, status)) return 128 + WTERMSIG(status);
    // A Ctrl-C passed on while the counters opened ended the held command (ESRCH), by whatever status: the same.
    if (passed == SIGINT || passed == SIGQUIT) {
        fmt::print(stderr, "pmc: count: interrupted before the command started\n");
        die_of(passed);
        return 128 + passed;
    }
    fmt::print(stderr, "pmc: {}\n", why.message);
    return 1;
}

/// How the command ran: its raw wait status and the time from its go-ahead to its reaping.
struct NativeCountRun {
    int raw_status = 0;
    int exit_status = 0; ///< the command's (128 + N for signal N)
    std::uint64_t elapsed_ns = 0;
};

/// Lets the held command exec, and waits for it; the status to exit with if it did not run or cannot be waited for.
std::optional<int> release_and_wait(HeldCommand& held, NativeCountRun& run) {
    int& status = run.raw_status;
    // (SIGPIPE ignored for this write: a child already ended by a Ctrl-C must not end pmc silently.)
    struct sigaction ignore_pipe {}, old_pipe {};
    ignore_pipe.sa_handler = SIG_IGN;
    sigemptyset(&ignore_pipe.sa_mask);
    ::sigaction(SIGPIPE, &ignore_pipe, &old_pipe);
    // Elapsed time as perf stat measures it: from the go-ahead to the command's exec until its exit is reaped.
    const auto go_time = std::chrono::steady_clock::now();
    const bool started = ::write(held.go.end[1], "x", 1) == 1;
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
    if (!started) {
        ::kill(held.pid, SIGKILL);
        const bool waited = held.job.wait(status);
        held.go.close(1);
        if (interrupted_before_start(held.job, waited, status)) return 128 + WTERMSIG(status);
        fmt::print(stderr, "pmc: count: cannot start the command\n");
        return 1;
    }
    held.go.close(1);
    const bool reaped = held.job.wait(status);
    run.elapsed_ns = nanoseconds_since(go_time);
    const int wait_errno = errno;
    // pmc's own dispositions and the terminal again, and no process of the command left running.
    if (const std::string note = leftover_note(held.job.finish()); !note.empty())
        fmt::print(stderr, "pmc: count: {}\n", note);
    if (!reaped) {
        fmt::print(stderr, "pmc: count: cannot wait for the command: {}\n", std::strerror(wait_errno));
        return 1;
    }
    run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    int exec_errno = 0;
    if (::read(held.exec_failed.end[0], &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno))
        return run.exit_status; // the child said why; nothing was counted
    return std::nullopt;
}

/// Counts missing after the command ran (`what`): never status 0, which a script that checks only the status would
/// take for a whole report; the command's own status otherwise. Says so where it changes the status.
int status_with_counts_missing(int exit_status, const std::string& shown, const std::string& what) {
    if (exit_status != 0) return exit_status;
    fmt::print(stderr, "pmc: count: exit status 1, though '{}' exited 0: {}\n", shown, what);
    return 1;
}

/// The group's counts, read once after the command ended, with perf's names for its events.
struct NativeGroupCounts {
    pmc::GroupReading end;
    std::vector<pmc::EventCount> counts;
    std::vector<std::string> names;
};

/// Counting began at zero when the command executed: the counts are the readings themselves. Nothing, said, if the
/// group cannot be read.
std::optional<NativeGroupCounts> read_counts(pmc::Group& group, const std::string& shown, int exit_status) {
    NativeGroupCounts c;
    try {
        const pmc::GroupReading zero = group.make_reading();
        c.end = group.read();
        pmc::difference(zero, c.end, c.counts);
        // perf's names: 'page-faults:u' where the kernel refused kernel mode and the event fell back to user mode.
        for (std::size_t i = 0; i < group.size(); ++i)
            c.names.push_back(pmc::name_as_opened(group.event(i), group.attr(i)));
    } catch (const std::exception& e) {
        fmt::print(stderr, "pmc: count: '{}' ran (exit status {}), but its counts cannot be read: {}\n", shown,
                   exit_status, e.what());
        return std::nullopt;
    }
    return c;
}

std::string native_json(const std::vector<std::string>& command, const NativeCountRun& run, const NativeGroupCounts& c) {
    pmc::JsonWriter j;
    json_report_head(j, command, run.exit_status, run.elapsed_ns)
        .field("time_enabled_ns", c.end.time_enabled)
        .field("time_running_ns", c.end.time_running).key("counts");
    pmc::write_counts_json(j, c.names, c.counts);
    j.end_object();
    return j.str() + "\n";
}

std::string native_text(const Options& o, const std::string& shown, const NativeCountRun& run, const NativeGroupCounts& c) {
    return fmt::format("\n pmc count of '{}' (exit status {}; from exec to exit, children included):\n\n", shown,
                       run.exit_status) +
           count_text_table(c.names, c.counts, o.sysfs, run.elapsed_ns) +
           fmt::format("\n {:>14.9f} seconds time elapsed\n", static_cast<double>(run.elapsed_ns) / 1e9) +
           fmt::format(" {:.3f} ms enabled, {:.3f} ms on the counters (summed over the command's threads)\n",
                       static_cast<double>(c.end.time_enabled) / 1e6, static_cast<double>(c.end.time_running) / 1e6);
}

/// pmc count: the command's events as one group from its exec to its exit.
int count_native(const Options& o, const std::vector<std::string>& command, std::vector<std::string> events) {
    if (events.empty()) events = default_native_events(o.sysfs);
    if (!pin_and_say(events, o.sysfs)) return 1;
    CountReportOutput out(o.output);
    if (!out.open()) return 1;
    HeldCommand held;
    if (auto failed = hold_command(held, command)) return *failed;
    auto group = open_group_on(held.pid, events, o.sysfs);
    if (!group) return refuse_command(held, group.failure());
    NativeCountRun run;
    if (auto failed = release_and_wait(held, run)) return *failed;
    const std::string shown = count_command_text(command);
    // Ended by SIGINT or SIGQUIT: pmc ends so too after its report (unless pmc itself was started with it
    // ignored), so that a calling shell script stops.
    const int sig = WIFSIGNALED(run.raw_status) ? WTERMSIG(run.raw_status) : 0;
    const auto counts = read_counts(*group, shown, run.exit_status);
    if (!counts) {
        const int status = status_with_counts_missing(run.exit_status, shown, "no count could be read");
        if (sig == SIGINT || sig == SIGQUIT) die_of(sig);
        return status;
    }
    const std::string text = o.json  ? native_json(command, run, *counts)
                             : o.csv ? pmc::count_csv(counts->names, counts->counts)
                                     : native_text(o, shown, run, *counts);
    int reported = out.write(text, run.exit_status);
    const auto never = static_cast<std::size_t>(
        std::count_if(counts->counts.begin(), counts->counts.end(), [](const pmc::EventCount& c) { return !c.counted; }));
    if (never > 0) {
        const std::string what = fmt::format(
            "{} of the {} events were never counted: the kernel never put the group on the counters while the command "
            "ran (other users held them: the NMI watchdog, a pinned event); count fewer events at once, or again",
            never, counts->counts.size());
        if (reported == 0) reported = status_with_counts_missing(0, shown, what);
        else fmt::print(stderr, "pmc: count: {}\n", what);
    }
    if (sig == SIGINT || sig == SIGQUIT) die_of(sig);
    return reported;
}

} // namespace

int cmd_count(const Options& o, const std::vector<std::string>& command, const std::vector<std::string>& given) {
    const auto events = events_to_count(o, given);
    if (!events) return 1;
    return o.emulate ? count_emulated(o, command, *events) : count_native(o, command, *events);
}

} // namespace pmc_tool
