// SPDX-License-Identifier: MIT
// The pmc tool's commands, shared between its source files.
#pragma once

#include "job.hpp"

#include <pmc/error.hpp>
#include <pmc/hybrid.hpp>
#include <pmc/pmu.hpp>

#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

namespace pmc_cli {
class CommandLine;
}

namespace pmc_tool {

/// The cache model's options, the same on pmc emulate and pmc count --emulate (add_cache_options).
struct CacheOptions {
    std::string mode;           ///< "" without --cache; "pinned" for --cache (the default geometry); "host"
    std::string i1, d1, l2, ll; ///< --I1, --D1, --L2, --LL: SIZE,ASSOC,LINE, or "" (the default's or the host's)
    std::string inclusion;      ///< --inclusion: "cachegrind" (also ""), "strict"
    explicit operator bool() const noexcept { return !mode.empty(); }
};

/// A pipe whose ends still open are closed when it goes out of scope, so every way out of a command that runs a
/// child (a failed pipe2 or fork included) closes what pmc holds. (The child leaves by exec or _exit: no destructor
/// runs there.)
struct Pipe {
    int end[2] = {-1, -1}; // pipe() leaves them so when it fails
    Pipe() = default;
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;
    ~Pipe() {
        close(0);
        close(1);
    }
    void close(int i) noexcept {
        if (end[i] >= 0) ::close(end[i]);
        end[i] = -1;
    }
};

struct Options {
    std::string sysfs{pmc::default_sysfs_root};
    bool json = false;
    bool csv = false;
    bool like_perf_stat = false;
    bool emulate = false; ///< count --emulate
    CacheOptions cache;   ///< count --emulate --cache[=host] --I1 --D1 --L2 --LL
    bool branches = false; ///< count --emulate --branches
    std::string cpu;       ///< count --emulate --cpu MODEL (QEMU's -cpu; "": QEMU_CPU, else pmc's default)
    std::string qemu;      ///< count --emulate --qemu PATH ("": $PMC_QEMU, else PATH's)
    std::string output; ///< -o FILE (count)
};

/// On a hybrid CPU, where a hardware counter counts on one core type only: confines the calling thread (and what
/// it starts later) to `type`'s cores within its current affinity, unless it is confined to one type already.
/// `text` says which, with the CPUs it may now use; empty on a machine with fewer than two core types.
struct CoreTypeConfinement {
    bool pinned = false; ///< this call changed the affinity
    std::string text;    ///< "pinned to the performance cores (cpu_core, CPUs 0-7)" or "already confined to ..."
};
inline pmc::Result<CoreTypeConfinement> confine_to_core_type(pmc::CoreType type, const std::string& sysfs) {
    const auto hybrid = pmc::hybrid_pmus(sysfs);
    if (hybrid.size() < 2) return CoreTypeConfinement{};
    auto describe = [](const char* what, pmc::CoreType t, const std::string& pmu) {
        return std::string(what) + " the " + pmc::to_string(t) + " cores (" + pmu + ", CPUs " +
               pmc::format_cpu_list(pmc::thread_affinity()) + ")";
    };
    if (auto choice = pmc::choose_core_pmu(hybrid, pmc::thread_affinity()); choice.pmu)
        return CoreTypeConfinement{false, describe("already confined to", choice.pmu->core_type, choice.pmu->pmu)};
    if (auto failure = pmc::pin_this_thread(type, sysfs)) return std::move(*failure);
    for (const auto& p : hybrid)
        if (p.core_type == type) return CoreTypeConfinement{true, describe("pinned to", type, p.pmu)};
    return CoreTypeConfinement{};
}

/// pmc doctor (tools/doctor.cpp): returns the documented exit status.
int cmd_doctor(const Options& o);
/// `pmc doctor --help` and `pmc count --help`.
extern const char* const doctor_help;
extern const char* const count_help;

/// pmc count (tools/count.cpp): counts `command` (not empty) with `events`; returns the command's exit status.
int cmd_count(const Options& o, const std::vector<std::string>& command, const std::vector<std::string>& events);

/// pmc summarize (tools/summarize.cpp): parses its own arguments (those after "summarize").
int cmd_summarize(const std::vector<std::string>& args);
extern const char* const summarize_help;

/// pmc critical (tools/critical.cpp): the costliest nesting path; parses its own arguments (those after "critical").
int cmd_critical(const std::vector<std::string>& args);
extern const char* const critical_help;

/// pmc sample (tools/sample.cpp): parses its own arguments (those after "sample").
int cmd_sample(const std::vector<std::string>& args);
extern const char* const sample_help;

/// pmc diff and pmc aggregate (tools/diff.cpp, tools/aggregate.cpp): parse their own arguments.
int cmd_diff(const std::vector<std::string>& args);
extern const char* const diff_help;
int cmd_aggregate(const std::vector<std::string>& args);
extern const char* const aggregate_help;

/// pmc emulate (tools/emulate.cpp): runs a command under QEMU user mode with pmc's plugin; parses its own arguments.
int cmd_emulate(const std::vector<std::string>& args);
extern const char* const emulate_help;
/// QEMU's user-mode binary and pmc's plugin and preload library, as found for this machine.
struct Emulator {
    std::string qemu, plugin, preload;
    std::string version;                   ///< QEMU's, from its binary ("7.2.22"), or "" if not found
    std::string target;                    ///< the guest it emulates ("x86_64", "aarch64"), or "" if not found
    bool misaligns_signal_frames = false; ///< x86-64 before QEMU 9.1: handlers start 8 bytes off the ABI's alignment
    /// QEMU's -cpu for the guest: --cpu's, else $QEMU_CPU, else for x86-64 default_emulated_cpu; "" for QEMU's own
    /// default (another guest, or a QEMU without the default model: `cpu_warning` says so).
    std::string cpu;
    std::string cpu_origin;  ///< where `cpu` came from: "--cpu", "QEMU_CPU", "pmc's default", or ""
    std::string cpu_warning; ///< the default model refused by this QEMU: what the guest gets instead, and the fix
    std::string description; ///< "QEMU 7.2.22, plugin API 1, -cpu MODEL": for profiles (pmc diff compares them)
    bool offsets_guest = false; ///< QEMU 8.1 and later: run with -B (pmc/detail/emulated.hpp, guest_base)
};
/// The CPU model every x86-64 emulated run gives the guest unless --cpu or QEMU_CPU names another (QEMU's -cpu
/// spelling; tools/emulate.cpp says why this one).
extern const char* const default_emulated_cpu;
/// Finds them (`qemu`: --qemu's value, or ""; `cpu`: --cpu's, or ""), or says what is missing and what to install,
/// or that QEMU does not know the CPU model asked for.
pmc::Result<Emulator> find_emulator(const std::string& qemu, const std::string& cpu = "");
/// Starts `command` under the emulator as `job` (`plugin_args`: ",report=FILE" or ""); QEMU's pid.
pmc::Result<pid_t> start_emulated(Job& job, const Emulator& e, const std::vector<std::string>& command,
                                  bool keep_aslr, const std::string& plugin_args);
/// Waits for it and finishes the job: the command's exit status (128 + N for signal N, explaining SIGILL);
/// `raw_status` from waitpid. `who` begins its messages: the command the user ran ("pmc: count --emulate").
int finish_emulated(Job& job, const std::string& shown, int& raw_status, const std::string& who = "pmc emulate");
/// Ends pmc of the command's SIGINT or SIGQUIT, if one ended it, so that a calling script stops as it would have.
void end_like(int raw_status);
/// A temporary file for the plugin's report=FILE, in a directory of its own ($TMPDIR/pmc-emulate-XXXXXX, /tmp without
/// TMPDIR) that also holds the plugin's progress and sample files: removed with all of them at the end (and by the
/// job's watchdog if pmc dies first: Job::remove_if_pmc_dies).
struct EmulatedReportFile {
    std::string dir, path;
    /// When the directory could not be made (path empty): what failed and why, to print after "pmc ...: "; the fix.
    std::string failure, fix;
    EmulatedReportFile();
    ~EmulatedReportFile() { remove(); }
    /// Removes the directory and everything in it, now (before pmc raises the command's SIGINT: no destructor runs
    /// after that); nothing the second time.
    void remove() noexcept;
    EmulatedReportFile(const EmulatedReportFile&) = delete;
    EmulatedReportFile& operator=(const EmulatedReportFile&) = delete;
};
/// What the plugin's report says about a command's processes (its lines: tools/emulate/qemu_plugin.cpp).
struct EmulatedReport {
    std::uint64_t instructions = 0; ///< every emulated process's, summed
    int processes = 0;              ///< emulated processes (a process that executes another program: one for each)
    int unfinished = 0;             ///< of them, those that never reported their count (ended by a signal)
    /// Of the unfinished, those whose count up to their last system call the plugin kept (DIR/PID.progress,
    /// tools/emulate/progress_file.hpp), and those counts summed: partial, never in `instructions`.
    int partial_processes = 0;
    std::uint64_t partial_instructions = 0;
    /// Of those, the ones whose file kept the models' counts too, which are summed into the models' fields below
    /// (partial like the instructions).
    int partial_models = 0;
    /// Of the unfinished, those that reached their exit but whose report line the plugin could not write (not a
    /// signal): the last such errno.
    int unwritten = 0, unwritten_errno = 0;
    std::vector<std::string> native; ///< "PATH (why)" for each program that ran natively, not counted
    std::vector<std::pair<long, std::string>> sigill; ///< pid and program of each process that died of SIGILL
    /// The same for SIGSEGV in a process that had installed a signal handler, noted only under a QEMU that misaligns
    /// signal frames (tools/emulate/stay_emulated.cpp)
    std::vector<std::pair<long, std::string>> sigsegv;
    /// Processes whose SIGSEGV came with no handler of their own installed: not the misaligned frame's doing.
    std::vector<long> plain_sigsegv;
    bool faulted_without_handler(long pid) const {
        for (long p : plain_sigsegv)
            if (p == pid) return true;
        return false;
    }
    /// With --cache: the modelled caches' counts, every emulated process's summed, by Cachegrind's names.
    bool has_cache = false;
    std::uint64_t Ir = 0, I1mr = 0, ILmr = 0, Dr = 0, D1mr = 0, DLmr = 0, Dw = 0, D1mw = 0, DLmw = 0;
    /// The LL's accesses by instruction fetches, reads and writes: the L1 misses, or with an L2 the L2's misses.
    std::uint64_t LLi = 0, LLr = 0, LLw = 0;
    /// With --branches: every branch instruction, and the branch model's counts by Cachegrind's names.
    bool has_branches = false;
    std::uint64_t branches = 0, Bc = 0, Bcm = 0, Bi = 0, Bim = 0;
    /// With samples=DIR (pmc sample --emulate): the loads sampled from (every thread's, from its first), the samples
    /// the plugin wrote, the threads sampled, the samples a write lost; and the processes that gave these figures.
    std::uint64_t sampled_loads = 0, load_samples = 0, sampled_threads = 0, unwritten_samples = 0;
    int processes_with_loads = 0;
};
EmulatedReport read_emulated_report(const std::string& path);
/// "SIGINT", "SIGTERM", ... or "signal N".
std::string signal_name(int sig);
/// What the report lacks for the processes that never reached their exit ("" if none): how many, which kept a count
/// up to their last system call (partial), which left none, and that their modelled counts are missing.
std::string unfinished_note(const EmulatedReport& r, int raw_status);
/// Declares --cache[=host], --I1, --D1, --L2 and --LL on `cl`, into `o`.
void add_cache_options(pmc_cli::CommandLine& cl, CacheOptions& o);
/// The cache model a command line asks for.
struct CacheModelChoice {
    std::string plugin_arguments; ///< ",cache=on,i1=...,ll=..." ("" without --cache)
    std::string geometry;         ///< "I1 32768,8,64, D1 32768,8,64, LL 8388608,16,64" (with ", L2 ..." if any)
    std::string note;             ///< what a modelled figure is, for output: the model and its geometry
    std::string host_source;      ///< --cache=host: where the geometry came from, and what was rounded
    bool has_l2 = false;
};
/// `o` checked and resolved into `out` (the host's caches read for --cache=host): "", or the usage error, which
/// names the option and says what the model requires.
std::string choose_cache_model(const CacheOptions& o, CacheModelChoice& out);
/// One of the modelled cache events' count in a report (pmc/modelled_events.hpp lists them), nothing for another
/// event.
std::optional<std::uint64_t> modelled_cache_count(const std::string& event, const EmulatedReport& r);
/// The branch events --branches answers (branch-instructions or branches, branch-misses; :u or none): one's count
/// in a report, or nothing for another event.
std::optional<std::uint64_t> branch_count(const std::string& event, const EmulatedReport& r);
/// What the branch figures are, for output.
extern const char* const branch_model_note;
/// The note pmc prints when some programs ran natively; "" if none did.
std::string native_programs_note(const EmulatedReport& r);
/// Why a program died of SIGILL under the emulator, and the fix ("pmc emulate: " + this, on stderr).
std::string sigill_explanation(const std::string& program);
/// Why a program died of SIGSEGV under a QEMU that misaligns signal frames, and the fixes; "" under another QEMU.
std::string signal_frame_explanation(const Emulator& e, const std::string& program);
/// The explanations for the command's children (not `command_pid`, explained already) that died of SIGILL, or of
/// SIGSEGV under a QEMU that misaligns signal frames; `who` begins each ("pmc emulate").
void explain_child_sigills(const EmulatedReport& r, pid_t command_pid, const std::string& who = "pmc emulate");
void explain_child_segfaults(const EmulatedReport& r, pid_t command_pid, const Emulator& e,
                             const std::string& who = "pmc emulate");

/// pmc export (tools/export.cpp): a profile as Chrome trace events, folded stacks or speedscope JSON.
int cmd_export(const std::vector<std::string>& args);
extern const char* const export_help;

} // namespace pmc_tool
