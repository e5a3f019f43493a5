// SPDX-License-Identifier: MIT
// common.hpp: what the memory experiments share -- sizes and their labels, checks of option values, pinning
// to one CPU, the clock (pmc's wall-time, plus cycles:u where a PMU lets it open), statistics, progress lines,
// output files, and what the machine reports about itself (CPU, caches per cpuid/sysfs, kernel, hypervisor).
#pragma once

#include <pmc/counter.hpp>
#include <pmc/report.hpp>

#include <command_line.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

// Measurement kernels: never inlined (their machine code can be read in `objdump -d`) and never instrumented by a
// sanitizer (an instrumented load is not the load being measured).
#if defined(__GNUC__) || defined(__clang__)
#define PMC_MEM_KERNEL __attribute__((noinline, no_sanitize("address", "undefined")))
#else
#define PMC_MEM_KERNEL
#endif

namespace pmc_mem {

/// A bad command line: main() prints it as every pmc program does (tools/command_line.hpp) and exits with status 1.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------------------------------
// Sizes

/// "512", "4096B", "48K", "48KiB", "1M", "1.5M", "2G" (K, M, G are powers of 1024). Throws UsageError.
std::uint64_t parse_size(const std::string& text);
/// A short binary label for axes and tables: 512, 1K, 48K, 1M, 1.5M, 256M, 1G.
std::string size_label(double bytes);
/// Bytes for prose: "512 B", "48 KiB", "1.02 MiB".
std::string size_text(double bytes);
/// The sweep's sizes: from `min` to `max`, `per_octave` points per octave at 2^n * (1 + k/per_octave), as lmbench
/// steps (so 1.5 * 2^n, a common cache size, is a point whenever per_octave is even); rounded to `granule`.
std::vector<std::uint64_t> size_grid(std::uint64_t min, std::uint64_t max, unsigned per_octave,
                                     std::uint64_t granule);
/// size_grid() for a sweep the user asked for with --min and --max: throws UsageError, naming the range, the
/// nearest sizes the grid has and which option to change, when no size falls in [min, max] (and for min 0,
/// max < min, per_octave 0): never empty.
std::vector<std::uint64_t> sweep_sizes(std::uint64_t min, std::uint64_t max, unsigned per_octave,
                                       std::uint64_t granule);

// ---------------------------------------------------------------------------------------------------------------
// Command line: CLI11 reads it (tools/command_line.hpp); these check an option's value. Each throws UsageError
// naming the option.

/// "--runs: 'x' is not an integer", "--runs: 0 is outside 1..1000".
long integer_option(const std::string& name, const std::string& text, long min, long max);
/// "--run-ms: 'x' is not a number", "--run-ms: 0 is outside 0.01..10000".
double number_option(const std::string& name, const std::string& text, double min, double max);

/// The options the memory programs share: --out and --quick, --quiet; and, for those that pin and plot, --cpu,
/// --no-pin and --no-plot.
struct CommonOptions {
    std::string out = "pmc-memory-report";
    bool quick = false, quiet = false, no_pin = false, no_plot = false;
    std::string cpu_text;

    /// Declares them on the program's command line (before parsing).
    void add_to(pmc_cli::CommandLine& cl, bool pins_and_plots);
    /// After parsing: --cpu's value, or -1 (throws UsageError).
    int cpu() const;
    bool pin() const { return !no_pin; }
    bool plot() const { return !no_plot; }
    /// After parsing, with --quick: throws UsageError when an option --quick sets (`sized`) was given too; `what`
    /// says what --quick sets ("the sizes and runs").
    void check_quick(const pmc_cli::CommandLine& cl, std::initializer_list<const char*> sized,
                     const std::string& what) const;
};

// ---------------------------------------------------------------------------------------------------------------
// Pinning

/// The CPUs this thread may run on now (sched_getaffinity).
std::vector<int> allowed_cpus();
/// The CPUs the process could run on before pin_to_cpu narrowed them (for placing worker threads).
const std::vector<int>& process_cpus();
/// Pins the calling thread to `cpu` (-1: the last CPU it may run on, away from CPU 0's interrupts) with
/// sched_setaffinity. Returns the CPU, or -1 with `note` saying why not.
int pin_to_cpu(int cpu, std::string& note);

// ---------------------------------------------------------------------------------------------------------------
// Clock

/// One timed run: nanoseconds from pmc's wall-time counter, and cycles where cycles:u opened.
struct Timing {
    double ns = 0;
    std::optional<double> cycles;
};

/// pmc's wall-time counter (rdtsc converted to ns, no system call) and, where a PMU allows it, cycles:u.
class Clock {
public:
    Clock();
    bool has_cycles() const { return cycles_.has_value(); }
    /// Why cycles are not counted (the reason pmc gave), or how they are.
    const std::string& cycles_note() const { return cycles_note_; }
    const std::string& wall_note() const { return wall_note_; }

    /// Times `work` (which must have a side effect the compiler cannot see through: the kernels end in an asm
    /// statement). The barriers keep the compiler from moving memory accesses across the clock reads.
    template <class F>
    Timing time(F&& work) {
        Timing t;
        if (cycles_) {
            auto c = cycles_->interval();
            auto w = wall_.interval();
            barrier();
            work();
            barrier();
            t.ns = static_cast<double>(w.stop());
            t.cycles = static_cast<double>(c.stop());
        } else {
            auto w = wall_.interval();
            barrier();
            work();
            barrier();
            t.ns = static_cast<double>(w.stop());
        }
        return t;
    }
    /// Nanoseconds since an arbitrary origin (for progress and budgets, not for measurements).
    std::uint64_t now_ns() { return wall_.read(); }

private:
    static void barrier() { asm volatile("" ::: "memory"); }
    pmc::Counter wall_;
    std::optional<pmc::Counter> cycles_;
    std::string cycles_note_;
    std::string wall_note_;
};

// ---------------------------------------------------------------------------------------------------------------
// Statistics (of a copy: the argument is sorted)

double min_of(const std::vector<double>& v);
double max_of(const std::vector<double>& v);
double median_of(std::vector<double> v);
/// Linear-interpolated percentile, p in [0, 100].
double percentile_of(std::vector<double> v, double p);

// ---------------------------------------------------------------------------------------------------------------
// Progress and output

/// Progress on stderr: on a terminal one status line rewritten in place, otherwise one plain line per step.
class Progress {
public:
    explicit Progress(bool quiet = false);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    /// A step of work (a size measured): the status line on a terminal, a line otherwise.
    void step(const std::string& text);
    /// A passing detail: the status line on a terminal, nothing otherwise (keeps logs short).
    void detail(const std::string& text);
    /// A line that stays (a phase done, a warning).
    void note(const std::string& text);
    bool tty() const { return tty_; }

private:
    void clear();
    bool tty_ = false;
    bool quiet_ = false;
    bool dirty_ = false;
};

/// mkdir -p. Throws std::runtime_error with the path and reason.
void make_directories(const std::string& path);
/// Before measuring: creates the report folder and writes (and removes) a test file in it, so that a folder that
/// cannot be written fails at once instead of after the measurement. Throws std::runtime_error naming the folder,
/// the reason and --out.
void probe_output_dir(const std::string& dir);
/// The same for --dir, where the page-fault experiment creates its file: it must exist (it is not created).
void probe_test_file_dir(const std::string& dir);
/// Writes `text` to `path` (replacing it). Throws std::runtime_error with the path and reason.
void write_text(const std::string& path, const std::string& text);
std::string join_path(const std::string& dir, const std::string& name);
/// A double for CSV/markdown: up to `digits` significant digits, no exponent for ordinary magnitudes.
std::string num(double v, int digits = 4);
/// A duration in ns as "512 ns", "1.02 us", "54.3 ms": three significant digits, in the unit that keeps them.
std::string duration_text(double ns);

// ---------------------------------------------------------------------------------------------------------------
// The machine

/// A cache as the kernel (sysfs) or the CPU (cpuid) describes it.
struct ReportedCache {
    std::string name;   ///< "L1d", "L2", "L3"
    std::uint64_t bytes = 0;
    unsigned ways = 0;  ///< 0: unknown / fully associative
    unsigned shared_by = 0; ///< logical CPUs sharing it, 0 if not reported
    std::string source; ///< "cpuid 0x80000005", "sysfs", ...
};

struct MachineFacts {
    std::string cpu_model;
    std::string kernel;
    std::string hypervisor;  ///< "" on bare metal
    long page_size = 4096;
    std::string thp;         ///< /sys/kernel/mm/transparent_hugepage/enabled, the chosen value
    int online_cpus = 0;
    std::vector<ReportedCache> caches; ///< one per name: sysfs's, and cpuid's for a cache sysfs does not list
    std::vector<std::string> notes;
    /// The reported size of `name` ("L1d", "L2", "L3"), 0 if not reported.
    std::uint64_t cache_bytes(const std::string& name) const;
};

MachineFacts machine_facts();
/// The 1-minute load average (/proc/loadavg), or -1 if it cannot be read.
double load_average();
void write_machine_json(pmc::JsonWriter& json, const MachineFacts& m);
/// One paragraph for summaries: CPU, kernel, hypervisor, and the caches it reports.
std::string machine_text(const MachineFacts& m);

/// Runs `command` through /bin/sh; returns its exit status (-1 if it could not run).
int run_command(const std::string& command);
/// True when `program` is found on PATH.
bool have_program(const std::string& program);

/// Escapes a string for a double-quoted gnuplot string or a shell single-quoted argument.
std::string shell_quote(const std::string& s);

} // namespace pmc_mem
