// SPDX-License-Identifier: MIT
// pmc sample: sample a command's events (pmc::Sampler, inherit: its threads and children too), then print the bias
// check (the estimate beside the exact count of the same event) and a data summary of where the samples fell.
//
// The command waits on a pipe until the sampler is open on it (enable_on_exec: sampling starts at its exec). While
// it runs, pmc drains the rings whenever they are half full or every 100 ms, and reads /proc/PID/maps at each of
// those moments, because a process's maps are gone once it has exited; the kernel's MMAP2 records add the mappings
// made in between (see MapTracker: perf reports no munmap, so a record is not trusted beyond its own drain).
// Samples are attributed to variables and regions with
// pmc/address_map.hpp (and pmc/symbols.hpp where pmc was built with libelf): by data address when the event
// records one (page faults, memory events), by instruction address otherwise.
//
// With --emulate --cache the command runs under QEMU with pmc's plugin instead (run_emulated), which samples every
// thread's loads from the cache model and writes the records to files in the kernel's layout, with the program's
// mapping calls, and the preload library records the guest's memory map (ImageMaps; each sample is named by the
// mapping live at its time, LiveMappings): the same summaries and report follow. The code reads top-down:
// the arguments, where the report goes, each way of running, the summaries, the report.
#include "command_line.hpp"
#include "commands.hpp"
#include "emulate/model/load_sampler.hpp"

#include <pmc/address_map.hpp>
#include <pmc/report.hpp>
#include <pmc/sampler.hpp>
#if defined(PMC_HAVE_SYMBOLS)
#include <pmc/symbols.hpp>
#endif

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pmc_tool {

const char* const sample_help = R"(usage: pmc sample [-e EVENT] [-c PERIOD | -F FREQ] [-m PAGES] [--tolerance PCT]
                  [--top N] [--json] [-o FILE] [--] COMMAND [ARGS]
       pmc sample --emulate --cache[=host] [--I1 G] [--D1 G] [--L2 G] [--LL G]
                  [--inclusion cachegrind|strict] [--qemu PATH] [--cpu MODEL]
                  [-e 'cpu/mem-loads,ldlat=N/'] [-c PERIOD] [...] [--] COMMAND [ARGS]

Run COMMAND and sample one event in it, its threads and the processes it starts, from its exec to
its exit. Print the bias check, then where the samples fell: by variable (global and static
variables, from the ELF symbol tables) and by region of the process's memory map (heap, stack,
anonymous, each mapped file). The addresses summarized are the data addresses the samples carry
(page faults, memory-access events); for events without one, the instruction addresses.

The bias check: the sampled event is also counted exactly by a second counter. pmc shows the
estimate (samples x period; with -F, the sum of the samples' periods) beside the exact count, their
ratio, the samples the kernel lost (ring full) and how often it throttled sampling, and warns when
estimate and count differ by more than the tolerance plus one period. Scaled estimates per row are
shown only when the check agrees.

Options:
  -e EVENT          The event to sample (default: page-faults). `pmc list` shows the events.
  -c PERIOD         A sample every PERIOD events (default for page-faults: 1; with --emulate,
                    1009, or the event's period=N; the two must agree).
  -F FREQ           About FREQ samples a second; the kernel adapts the period (default for other
                    events: 1000).
  -m PAGES          Data pages per ring buffer, a power of two (default 64; one ring per CPU).
  --tolerance PCT   The bias check's tolerance, in percent (default 5).
  --top N           Show the N largest rows of each summary (default 20; 0: all).
  --json            JSON: command, exit_status, event, addresses, bias, by_variable (data
                    addresses only), by_region, notes.
  -o FILE           Write the report to FILE (opened before COMMAND runs) instead of stderr.
  --sysfs DIR       Read PMUs from DIR instead of /sys/bus/event_source/devices.
  --emulate         No PMU needed: run COMMAND under pmc emulate (QEMU user mode with pmc's plugin)
                    and sample its loads from the cache model, which --cache turns on (required;
                    --cache=host, --I1, --D1, --L2, --LL, --inclusion as for pmc emulate). Every
                    thread of every emulated process, from its first load: every PERIOD-th load (-c,
                    default 1009, a prime) whose modelled latency reaches ldlat (-e
                    'cpu/mem-loads,ldlat=N/', the default with N=3: every load; the model's
                    largest latency is 200: a higher ldlat is refused, as no load could reach it),
                    exactly, the same samples in every run. The period is
                    fixed: one that shares a factor with the program's loads per cache line or per
                    loop iteration (1000 on 8-byte reads: 8 a line) samples one phase of the pattern
                    (every sample an L1 hit): keep it prime. The level check compares the samples'
                    L1-hit share with the model's exact one and names such an alias. Each sample has
                    the load's data address and, as its weight, the latency the model states for
                    the level that served it (L1 4, L2 12, LL 40, memory 200 cycles). The bias
                    check compares samples x period with the loads the model counted (allowance:
                    one period per thread). Regions come from the program's own mmap, munmap,
                    mremap and brk calls, replayed in time order with the samples, and from
                    the guest's /proc/self/maps, read in each process at its start and its
                    exit(); variables from the latter. Other events, -F and -m are refused:
                    QEMU implements no perf events.
  --inclusion cachegrind|strict
                    With --emulate --cache: how the modelled caches hold each other's lines (as for
                    pmc emulate; default cachegrind).
  --qemu PATH       With --emulate: the QEMU user-mode binary (as pmc emulate --qemu; $PMC_QEMU).
  --cpu MODEL       With --emulate: the CPU the program sees (QEMU's -cpu, as pmc emulate --cpu;
                    default: $QEMU_CPU, else pmc's Haswell, Valgrind's, on every QEMU version).
  -h, --help        Show this help.

Signals: COMMAND runs in a process group of its own. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to
pmc or to its process group (kill, timeout(1), a CI runner's cancel) reach COMMAND's processes once,
passed on by pmc; at a terminal, COMMAND has it (Ctrl-C, Ctrl-Z, reads) as a shell's job does. pmc
still prints the report, then ends of COMMAND's SIGINT or SIGQUIT as COMMAND did. When COMMAND ends,
or pmc is killed (kill -9 too), no process COMMAND started runs on (one that calls setsid escapes).
With --emulate, a process a signal ends keeps the samples the plugin had written (in batches;
all of them when the process sent the signal itself, as abort() does): the report shows them,
marked interrupted, without a bias check (its exact count is lost); pmc's
temporary files ($TMPDIR/pmc-emulate-*) are removed, by pmc's watchdog if pmc is killed.
Exit status: COMMAND's (128 + N if signal N ended it); 127 if COMMAND cannot be run; 1 if the
command line or the event is wrong or sampling cannot start (COMMAND does not run then), or if
COMMAND exited 0 but figures are missing (the exact count unreadable after the run; with --emulate,
a process that never reached its exit), said on stderr. With --emulate, also 126 if COMMAND is not
a program QEMU can run, and 1 if QEMU or the plugin is missing, or if no emulated process reached
its exit nor wrote a sample and COMMAND exited 0. A run that counted its loads but made fewer than
one period of them has no samples and a warning that says so, with COMMAND's status.
)";

namespace {

/// One sample as the summary needs it (kept until the end: the memory map is complete only then).
struct Kept {
    std::uint64_t addr;
    std::uint32_t pid;
    float weight;
    std::uint32_t cycle; // MapTracker::cycle when it was drained; under --emulate, the process image it came from
    std::uint32_t space; // whose variables: the pid; under --emulate, the process image
    /// --emulate: the mapping live at the sample's time, from the program's mapping calls (an index into
    /// SampledRun::live_regions), or no_live_region: the region is looked up in the readings.
    std::uint32_t live = no_live_region;
    static constexpr std::uint32_t no_live_region = ~0u;
};

using Cover = std::map<std::uint64_t, pmc::MappedRegion>; // disjoint regions by begin

/// Adds the parts of `r` that no region in `cover` holds yet (what is already there wins).
void fill_gaps(Cover& cover, const pmc::MappedRegion& r) {
    std::uint64_t at = r.begin;
    auto it = cover.upper_bound(at);
    if (it != cover.begin() && std::prev(it)->second.end > at) at = std::prev(it)->second.end;
    while (at < r.end) {
        it = cover.lower_bound(at);
        const std::uint64_t stop = it == cover.end() ? r.end : std::min(r.end, it->first);
        if (stop > at) {
            pmc::MappedRegion piece = r;
            piece.begin = at;
            piece.end = stop;
            piece.offset = r.offset + (at - r.begin);
            cover.emplace(at, std::move(piece));
        }
        if (it == cover.end() || it->first >= r.end) break;
        at = it->second.end;
    }
}

const pmc::MappedRegion* region_at(const Cover& cover, std::uint64_t addr) {
    auto it = cover.upper_bound(addr);
    if (it == cover.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &it->second : nullptr;
}

/// The memory maps of the sampled processes over time: the readings of /proc/PID/maps (the command itself) and the
/// kernel's MMAP2 records, each tagged with the drain cycle it came in. perf reports no munmap, so a record is
/// trusted only for the samples drained with it (the latest record at an address wins) and otherwise only where a
/// reading still shows the mapping: an address freed and mapped again must not keep its old file's name.
struct MapTracker {
    pid_t pid = 0;
    std::vector<std::vector<pmc::MappedRegion>> readings; // the distinct successful, non-empty readings, in order
    std::vector<int> reading_after;                       // per look(): the index of the last good reading then
    struct Recorded {
        std::uint32_t cycle;
        pmc::MappedRegion region;
    };
    std::map<std::uint32_t, std::vector<Recorded>> recorded; // by pid, in arrival order
    std::size_t reads = 0;
    std::uint32_t cycle = 0; // look() calls so far: what is drained after the k-th look is in cycle k

    static bool same(const std::vector<pmc::MappedRegion>& a, const std::vector<pmc::MappedRegion>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](auto& x, auto& y) {
            return x.begin == y.begin && x.end == y.end && x.offset == y.offset && x.path == y.path &&
                   x.perms == y.perms;
        });
    }
    void look() {
        auto maps = pmc::read_maps(pid);
        if (maps && !maps->empty()) {
            if (readings.empty() || !same(readings.back(), *maps)) readings.push_back(std::move(*maps));
            ++reads;
        }
        reading_after.push_back(static_cast<int>(readings.size()) - 1);
        ++cycle;
    }
    void add(const pmc::detail::MappingRecord& m) {
        pmc::MappedRegion r;
        r.begin = m.start;
        r.end = m.start + m.length;
        r.offset = m.file_offset;
        r.perms = m.executable ? "r-xp" : "rw-p";
        r.path = std::string(m.name);
        if (r.path == "//anon" || r.path == "/dev/zero (deleted)") r.path.clear();
        r.kind = pmc::detail::region_kind_of(r.path);
        if (r.end > r.begin) recorded[m.pid].push_back(Recorded{cycle, std::move(r)});
    }
    /// The regions for samples of process `p` drained in cycle `c`: the records of that cycle (later first), then
    /// the readings just before and just after it, then the records of the cycle before. For a process without
    /// readings (a child of the command): every record up to that cycle, later first.
    Cover regions_at(std::uint32_t p, std::uint32_t c) const {
        Cover cover;
        const int before = c >= 1 && c <= reading_after.size() ? reading_after[c - 1] : -1;
        const int after = c < reading_after.size() ? reading_after[c] : -1;
        const bool has_readings = static_cast<pid_t>(p) == pid && (before >= 0 || after >= 0);
        auto it = recorded.find(p);
        if (it != recorded.end())
            for (auto r = it->second.rbegin(); r != it->second.rend(); ++r)
                if (r->cycle == c || (!has_readings && r->cycle < c)) fill_gaps(cover, r->region);
        if (has_readings) {
            if (before >= 0)
                for (const auto& r : readings[static_cast<std::size_t>(before)]) fill_gaps(cover, r);
            if (after >= 0)
                for (const auto& r : readings[static_cast<std::size_t>(after)]) fill_gaps(cover, r);
            // Last, the records of the cycle before: a mapping drained then may be used and unmapped before the
            // reading that follows that drain, its samples drained now.
            if (it != recorded.end())
                for (auto r = it->second.rbegin(); r != it->second.rend(); ++r)
                    if (r->cycle + 1 == c) fill_gaps(cover, r->region);
            // A record has no ".bss?" guess: take it from a reading's region that starts at the same place with the
            // same permissions (a reading from before an munmap may show another mapping there: a file's PROT_NONE
            // neighbour named the anonymous memory mapped later "anonymous after FILE").
            for (auto& [begin, r] : cover)
                if (r.kind == pmc::RegionKind::anonymous && r.follows_file.empty())
                    for (int i : {before, after})
                        if (i >= 0)
                            for (const auto& m : readings[static_cast<std::size_t>(i)])
                                if (m.begin == begin && m.perms == r.perms && !m.follows_file.empty())
                                    r.follows_file = m.follows_file;
        }
        return cover;
    }
    /// Every file mapped at some time (for the ELF symbol tables): the last reading, then the records, later first.
    std::vector<pmc::MappedRegion> all_regions_of(std::uint32_t p) const {
        Cover cover;
        if (static_cast<pid_t>(p) == pid && !readings.empty())
            for (const auto& r : readings.back()) fill_gaps(cover, r);
        auto it = recorded.find(p);
        if (it != recorded.end())
            for (auto r = it->second.rbegin(); r != it->second.rend(); ++r) fill_gaps(cover, r->region);
        std::vector<pmc::MappedRegion> out;
        for (auto& [begin, r] : cover) out.push_back(r);
        return out;
    }
};

struct SampleArgs {
    std::string event = "page-faults";
    bool event_given = false;
    std::uint64_t period = 0, frequency = 0;
    std::size_t pages = 64;
    double tolerance = 0.05;
    std::size_t top = 20;
    bool json = false;
    std::string output, sysfs{pmc::default_sysfs_root};
    std::vector<std::string> command;
    // --emulate: the whole program's loads sampled from the cache model under QEMU
    bool emulate = false;
    std::string qemu;
    std::string cpu; ///< --cpu: QEMU's -cpu ("": QEMU_CPU, else pmc's default)
    CacheOptions cache;
    CacheModelChoice model;
    std::uint32_t min_latency = 3; ///< the event's ldlat
};

/// pmc sample --emulate's default period: a prime (see parse_sample_arguments).
constexpr std::uint64_t default_emulated_period = 1009;

std::string ratio_text(double r) { return std::isfinite(r) ? fmt::format("{:.4f}", r) : std::string("inf"); }

void write_rows_json(pmc::JsonWriter& j, const char* key, const std::vector<pmc::DataSummary::Row>& rows,
                     std::uint64_t total) {
    j.key(key).begin_array();
    for (const auto& r : rows) {
        j.begin_object();
        j.key("name").value(r.name).key("kind").value(r.kind).key("samples").value(r.samples);
        j.key("share").value(total ? static_cast<double>(r.samples) / static_cast<double>(total) : 0.0);
        if (r.weight > 0) j.key("mean_weight").value(r.weight / static_cast<double>(r.samples));
        j.end_object();
    }
    j.end_array();
}

std::string rows_text(const char* title, const std::vector<pmc::DataSummary::Row>& rows, std::uint64_t total,
                      std::size_t top, double scale) {
    std::string out = fmt::format("{}\n  {:>10} {:>7}{}  {:<10} {}\n", title, "samples", "share",
                                  scale > 0 ? fmt::format(" {:>14}", "est. events") : "", "kind", "name");
    std::size_t shown = 0;
    for (const auto& r : rows) {
        if (top && shown++ == top) {
            out += fmt::format("  ... {} more rows (--top 0 shows all)\n", rows.size() - top);
            break;
        }
        const double share = total ? 100.0 * static_cast<double>(r.samples) / static_cast<double>(total) : 0;
        out += fmt::format("  {:>10} {:>6.2f}%{}  {:<10} {}", r.samples, share,
                           scale > 0 ? fmt::format(" {:>14.0f}", static_cast<double>(r.samples) * scale) : "", r.kind,
                           r.name);
        if (r.weight > 0) out += fmt::format("  (mean weight {:.1f})", r.weight / static_cast<double>(r.samples));
        out += '\n';
    }
    return out;
}

// ---- the steps of pmc sample: parse, then run (natively, or under the emulator), summarize, report ----------------

/// The command line into `a`; the status to exit with if it is wrong (said), or nothing.
std::optional<int> parse_sample_arguments(pmc_cli::CommandLine& cl, const std::vector<std::string>& arguments,
                                          SampleArgs& a) {
    std::string period_text, frequency_text, pages_text, top_text, tolerance_text;
    cl.flag("--json", a.json);
    pmc_cli::Option event = cl.option("-e,--event", a.event, "an event");
    pmc_cli::Option period = cl.option("-c", period_text, "a positive whole number");
    pmc_cli::Option frequency = cl.option("-F", frequency_text, "a positive whole number");
    pmc_cli::Option pages = cl.option("-m", pages_text, "a positive whole number");
    pmc_cli::Option top = cl.option("--top", top_text, "a whole number");
    pmc_cli::Option tolerance = cl.option("--tolerance", tolerance_text, "a percentage (0 to 1000), e.g. 5");
    cl.option("-o", a.output, "a file");
    cl.option("--sysfs", a.sysfs, "a directory");
    cl.flag("--emulate", a.emulate);
    pmc_cli::Option qemu = cl.option("--qemu", a.qemu, "a path");
    pmc_cli::Option cpu = cl.option("--cpu", a.cpu, "a CPU model").not_empty();
    add_cache_options(cl, a.cache);
    cl.command_follows(); // the command starts at the first word that is not an option, or after '--'
    if (auto status = cl.parse(arguments)) return *status;
    a.event_given = event.given();
    a.command = cl.command();
    // -c, -F, -m and --top: whole numbers (-c, -F and -m above 0); the first wrong one is said.
    std::optional<std::string> wrong;
    auto number = [&](pmc_cli::Option option, const std::string& text, bool positive, std::uint64_t fallback) {
        const auto n = pmc_cli::whole_number_option(option, text, fallback);
        if (!wrong && option.given() && (!n || (positive && *n == 0)))
            wrong = fmt::format("{} needs a {}whole number, not '{}'", option.name(), positive ? "positive " : "",
                                text);
        return n.value_or(fallback);
    };
    a.period = number(period, period_text, true, a.period);
    a.frequency = number(frequency, frequency_text, true, a.frequency);
    a.pages = static_cast<std::size_t>(number(pages, pages_text, true, a.pages));
    a.top = static_cast<std::size_t>(number(top, top_text, false, a.top));
    if (wrong) return cl.usage_error(*wrong);
    if (tolerance.given()) {
        char* end = nullptr;
        const double pct = std::strtod(tolerance_text.c_str(), &end);
        if (tolerance_text.empty() || *end != '\0' || !(pct >= 0) || pct > 1000)
            return cl.usage_error("--tolerance needs a percentage (0 to 1000), e.g. 5");
        a.tolerance = pct / 100;
    }
    if (a.command.empty()) return cl.usage_error("no command to sample: pmc sample [-e EVENT] -- COMMAND [ARGS]");
    if (a.period && a.frequency) return cl.usage_error("-c and -F exclude each other: give a period or a frequency");
    if (!a.emulate) {
        if (a.cache || !(a.cache.i1 + a.cache.d1 + a.cache.l2 + a.cache.ll).empty() || qemu.given() || cpu.given())
            return cl.usage_error(std::string(a.cache || qemu.given() || cpu.given() ? "--cache, --qemu and --cpu"
                                                                                     : "--I1, --D1, --L2 and --LL") +
                                  " shape the emulator's run: give --emulate with them (pmc sample --emulate --cache -- "
                                  "COMMAND samples its loads from the cache model)");
        if (!a.period && !a.frequency) {
            if (a.event_given) a.frequency = 1000;
            else a.period = 1;
        }
        return std::nullopt;
    }
    // --emulate: loads from the cache model, every Nth exactly.
    if (!a.cache)
        return cl.usage_error("--emulate samples loads from the cache model, and needs it: give --cache (pmc sample "
                              "--emulate --cache [-e 'cpu/mem-loads,ldlat=N/'] [-c PERIOD] -- COMMAND)");
    if (!a.event_given) a.event = "cpu/mem-loads,ldlat=3/";
    const auto load = pmc::load_latency_event(a.event);
    if (!load)
        return cl.usage_error(fmt::format("under --emulate there is no '{}' to sample: QEMU implements no perf events, "
                                          "and the emulator samples loads alone, from its cache model. Give -e "
                                          "'cpu/mem-loads,ldlat=N/' (the default), or sample '{}' natively, without "
                                          "--emulate", a.event, a.event));
    if (!load->problem.empty()) return cl.usage_error(fmt::format("under --emulate, '{}': {}", a.event, load->problem));
    a.min_latency = load->min_latency;
    if (a.frequency)
        return cl.usage_error("-F: under --emulate the model takes every Nth load exactly: give a period with -c "
                              "(default 1009)");
    if (pages.given()) return cl.usage_error("-m sizes the kernel's ring buffers, and --emulate uses none: leave it out");
    if (a.period && load->period && a.period != load->period)
        return cl.usage_error(fmt::format("the period is given twice, -c {} and period={} in '{}': give one", a.period,
                                          load->period, a.event));
    // A prime: a round period shares factors with the loads per cache line (8 of 8 bytes) or per loop iteration,
    // and every sample then falls on one phase of a regular pattern (1000 on a sequential read: every one an L1 hit).
    if (!a.period) a.period = load->period ? load->period : default_emulated_period;
    // No load can reach it: a run would end with no samples whatever the program does, so the command is not run.
    if (a.min_latency > pmc_model::LoadLatencies{}.memory)
        return cl.usage_error(fmt::format("under --emulate, ldlat={} is above the model's largest latency ({} cycles, "
                                          "a load served by memory): no load can reach it, so there would be no "
                                          "samples. Give ldlat={} or less (ldlat=3: every load)",
                                          a.min_latency, pmc_model::LoadLatencies{}.memory,
                                          pmc_model::LoadLatencies{}.memory));
    if (std::string why = choose_cache_model(a.cache, a.model); !why.empty()) return cl.usage_error(why);
    if (!a.model.host_source.empty())
        fmt::print(stderr, "pmc sample: --cache=host: {} ({})\n", a.model.geometry, a.model.host_source);
    return std::nullopt;
}

/// Where the report goes: stderr, or -o FILE (opened before COMMAND runs).
struct ReportOutput {
    std::FILE* file = stderr;
    std::string path;
    bool open(const std::string& to) {
        if (to.empty()) return true;
        file = std::fopen(to.c_str(), "w");
        if (!file) {
            fmt::print(stderr, "pmc sample: cannot open '{}' for the report: {}\n", to, std::strerror(errno));
            file = stderr;
            return false;
        }
        path = to;
        return true;
    }
    /// Closes the file (once): `status`, or 1 if writing it failed.
    int finish(int status) {
        if (file != stderr && std::fclose(file) != 0) {
            fmt::print(stderr, "pmc sample: writing '{}' failed: {}\n", path, std::strerror(errno));
            if (status == 0) status = 1;
        }
        file = stderr;
        return status;
    }
};

/// What a run gave the summaries and the report: the samples, the bias check, where the samples' addresses lie.
struct SampledRun {
    std::vector<Kept> kept;
    std::size_t with_addr = 0;
    /// --emulate: every sample is a load with its data address, so the report is by data address even with none.
    bool loads = false;
    pmc::BiasCheck check;
    std::vector<std::string> notes; ///< before the symbols' note
    std::string regions_note;       ///< after it
    int exit_status = 0, raw_status = 0;
    /// --emulate: why the figures lack processes that never reached their exit ("" if none did): the samples
    /// are those written before, and the exact count, hence the bias check, is missing.
    std::string interrupted;
    /// Every region of an address space at some time (for the ELF symbol tables), and the regions for the samples
    /// of process `pid` in `cycle` (Kept::space and Kept::cycle).
    std::function<std::vector<pmc::MappedRegion>(std::uint32_t space, std::uint32_t pid)> all_regions_of;
    std::function<Cover(std::uint32_t pid, std::uint32_t cycle)> regions_at;
    /// --emulate: the mappings Kept::live points at.
    std::vector<pmc::MappedRegion> live_regions;
    /// --emulate, every load a candidate (ldlat at most the L1's latency): the samples' L1-hit share against the
    /// model's exact one (1 - D1mr / Dr). A fixed period that falls on one phase of a regular pattern passes the
    /// bias check (the count is right) but not this one.
    struct LevelCheck {
        bool made = false, agrees = true;
        std::uint64_t l1_samples = 0;
        double sampled = 0, model = 0, allowance = 0;
    } levels;
};

/// Natively: COMMAND sampled with perf_event_open (inherit, enable_on_exec), drained while it runs. The status to
/// exit with if it could not run (said), or nothing.
std::optional<int> run_native(const SampleArgs& a, ReportOutput&, SampledRun& run) {
    // The child waits for a byte on `go`; `exec_error` (close-on-exec) carries errno if exec fails.
    Pipe go, exec_error;
    if (::pipe2(go.end, O_CLOEXEC) != 0 || ::pipe2(exec_error.end, O_CLOEXEC) != 0) {
        fmt::print(stderr, "pmc sample: pipe failed: {}\n", std::strerror(errno));
        return 1;
    }
    std::vector<std::string> command = a.command;
    std::vector<char*> child_argv;
    for (auto& s : command) child_argv.push_back(s.data());
    child_argv.push_back(nullptr);
    // The command runs as a job of pmc's (job.hpp): a process group of its own with a watchdog, the signals pmc
    // receives passed on once (pmc still reports), the terminal handed over.
    Job job;
    auto started = job.start([&] {
        ::close(go.end[1]);
        ::close(exec_error.end[0]);
        char byte = 0;
        if (::read(go.end[0], &byte, 1) != 1) _exit(127); // pmc could not start sampling: do not run
        ::execvp(child_argv[0], child_argv.data());
        const int err = errno;
        [[maybe_unused]] auto n = ::write(exec_error.end[1], &err, sizeof err);
        _exit(127);
    });
    if (!started) {
        fmt::print(stderr, "pmc sample: {}\n", started.failure().message);
        return 1;
    }
    const pid_t child = *started;
    go.close(0);
    exec_error.close(1);

    pmc::SamplerOptions so;
    so.period = a.period;
    so.frequency = a.frequency;
    so.fields = pmc::sample::ip | pmc::sample::tid | pmc::sample::addr | pmc::sample::weight;
    so.data_pages = a.pages;
    so.inherit = true;
    so.pid = child;
    so.enable_on_exec = true;
    so.mappings = true;
    so.tolerance = a.tolerance;
    so.sysfs_root = a.sysfs;
    auto opened = pmc::Sampler::try_open(a.event, so);
    if (!opened && opened.failure().code.value() == EINVAL && (so.fields & pmc::sample::weight)) {
        so.fields &= ~pmc::sample::weight; // PMUs without a latency weight may refuse it
        opened = pmc::Sampler::try_open(a.event, so);
    }
    if (!opened) {
        go.close(1);
        exec_error.close(0);
        const int passed = Job::last_passed_on(); // (before finish() puts pmc's dispositions back)
        job.finish(); // (the child exits without running the command)
        // A Ctrl-C passed on while the sampler opened ended the held command (ESRCH): pmc ends as interrupted, as
        // pmc count does, rather than blame the event.
        if (passed == SIGINT || passed == SIGQUIT) {
            fmt::print(stderr, "pmc sample: interrupted before the command started\n");
            end_like(passed); // (a status whose WTERMSIG is the signal)
            return 128 + passed;
        }
        fmt::print(stderr, "pmc sample: {}\n", opened.failure().message);
        return 1;
    }
    pmc::Sampler& sampler = *opened;
    auto maps = std::make_shared<MapTracker>();
    maps->pid = child;
    auto keep = [&](const pmc::Sample& s) {
        run.kept.push_back(Kept{s.addr ? s.addr : s.ip, s.pid, static_cast<float>(s.weight), maps->cycle, s.pid});
        run.with_addr += s.addr != 0;
    };
    auto on_mapping = [&](const pmc::detail::MappingRecord& m) { maps->add(m); };

    const char byte = 1;
    [[maybe_unused]] auto w = ::write(go.end[1], &byte, 1);
    go.close(1);
    int exec_errno = 0;
    job.wait_readable(exec_error.end[0]); // (a stop before the exec is followed: pmc stops too)
    const bool exec_failed = ::read(exec_error.end[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
    exec_error.close(0);
    int status = 0;
    bool reaped = false;
    if (!exec_failed) {
        maps->look();
        for (;;) {
            sampler.wait(100);
            sampler.drain(keep, on_mapping);
            maps->look();
            if ((reaped = job.wait(status, false)) || errno != 0) break;
        }
    } else {
        reaped = job.wait(status);
    }
    const int wait_errno = errno;
    // pmc's own dispositions and the terminal again, and no process of the command left running.
    const std::string leftovers = leftover_note(job.finish());
    run.check = sampler.stop(keep, on_mapping);
    if (!leftovers.empty()) fmt::print(stderr, "pmc sample: {}\n", leftovers);
    if (!reaped) {
        fmt::print(stderr, "pmc sample: cannot wait for '{}': {}\n", a.command[0], std::strerror(wait_errno));
        return 1;
    }
    if (exec_failed) {
        fmt::print(stderr, "pmc sample: cannot run '{}': {}\n", a.command[0], std::strerror(exec_errno));
        return 127;
    }
    run.raw_status = status;
    run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    run.notes = sampler.notes();
    run.regions_note =
        fmt::format("regions: /proc/{}/maps read {} times while it ran (the last reading is used) and the "
                    "kernel's mmap records: a sample's region is the latest mmap record drained with it, else the "
                    "reading before or after, else the records of the drain before (perf reports no "
                    "munmap, so older records are not trusted); "
                    "an address none of them holds shows as 'unmapped'",
                    child, maps->reads);
    run.all_regions_of = [maps](std::uint32_t, std::uint32_t pid) { return maps->all_regions_of(pid); };
    run.regions_at = [maps](std::uint32_t pid, std::uint32_t cycle) { return maps->regions_at(pid, cycle); };
    return std::nullopt;
}

// ---- under the emulator (--emulate --cache) ----

/// One successful mapping call of the program under the emulator, as the plugin wrote it to DIR/PID.maps
/// (plugin_sampling.hpp, mapping_call_returns): at the call's return, on the samples' clock.
struct MappingChange {
    enum Kind { map, unmap, remap, brk };
    std::uint64_t time = 0;
    Kind kind = map;
    std::uint64_t begin = 0, end = 0;      ///< map, unmap: the range; remap: the old range; brk: the break (begin)
    std::uint64_t to = 0, to_end = 0;      ///< remap: the new range
    std::uint64_t remap_flags = 0;         ///< remap: MREMAP_DONTUNMAP keeps the old range
    bool fixed = false;                    ///< map: at an address asked for (MAP_FIXED), as the loader maps a .bss
    pmc::MappedRegion region;              ///< map: what it maps (no .bss guess yet)

    static constexpr std::uint64_t page = 4096;
    static std::uint64_t page_end(std::uint64_t begin, std::uint64_t length) {
        return begin + ((length + page - 1) & ~(page - 1));
    }
    /// One line's fields after "pmc-maps TIME ", or nothing if they are not a mapping change.
    static std::optional<MappingChange> parse(std::uint64_t time, const std::string& kind, const char* fields) {
        MappingChange c;
        c.time = time;
        unsigned long long v[5] = {};
        int used = 0;
        if (kind == "map" && std::sscanf(fields, "%llx %llx %llx %llx %llx%n", &v[0], &v[1], &v[2], &v[3], &v[4], &used) == 5) {
            c.kind = map;
            c.begin = v[0];
            c.end = page_end(v[0], v[1]);
            const char* path = fields + used;
            c.region.path = *path == ' ' ? path + 1 : "";
            c.region.begin = c.begin, c.region.end = c.end, c.region.offset = v[4];
            c.region.perms = {v[2] & 1 ? 'r' : '-', v[2] & 2 ? 'w' : '-', v[2] & 4 ? 'x' : '-', (v[3] & 1) ? 's' : 'p'}; // MAP_SHARED(_VALIDATE) or MAP_PRIVATE
            c.fixed = (v[3] & 0x10) != 0;
            c.region.kind = pmc::detail::region_kind_of(c.region.path);
        } else if (kind == "unmap" && std::sscanf(fields, "%llx %llx", &v[0], &v[1]) == 2) {
            c.kind = unmap;
            c.begin = v[0];
            c.end = page_end(v[0], v[1]);
        } else if (kind == "remap" && std::sscanf(fields, "%llx %llx %llx %llx %llx", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
            c.kind = remap;
            c.begin = v[0], c.end = page_end(v[0], v[1]);
            c.to = v[2], c.to_end = page_end(v[2], v[3]);
            c.remap_flags = v[4];
        } else if (kind == "brk" && std::sscanf(fields, "%llx", &v[0]) == 1) {
            c.kind = brk;
            c.begin = v[0];
        } else {
            return std::nullopt;
        }
        if (c.kind != brk && c.end <= c.begin) return std::nullopt;
        return c;
    }
};

/// The mappings of one process image at one time, replayed from its mapping calls: disjoint regions by begin, each
/// an index into a store (SampledRun::live_regions) that samples point at.
struct LiveMappings {
    std::map<std::uint64_t, std::uint32_t> regions;
    std::uint64_t heap_begin = 0, heap_end = 0; ///< the brk heap: [heap_begin, heap_end) once a brk was seen

    const pmc::MappedRegion* at(const std::vector<pmc::MappedRegion>& store, std::uint64_t addr,
                                std::uint32_t* index = nullptr) const {
        auto it = regions.upper_bound(addr);
        if (it == regions.begin()) return nullptr;
        --it;
        const pmc::MappedRegion& r = store[it->second];
        if (addr >= r.end) return nullptr;
        if (index) *index = it->second;
        return &r;
    }
    void insert(std::vector<pmc::MappedRegion>& store, pmc::MappedRegion r) {
        store.push_back(std::move(r));
        regions[store.back().begin] = static_cast<std::uint32_t>(store.size() - 1);
    }
    /// Removes [begin, end) from every region; what a region keeps outside it stays, as a piece of its own.
    void carve(std::vector<pmc::MappedRegion>& store, std::uint64_t begin, std::uint64_t end) {
        auto it = regions.upper_bound(begin);
        if (it != regions.begin()) --it;
        std::vector<pmc::MappedRegion> kept;
        while (it != regions.end() && it->first < end) {
            const pmc::MappedRegion r = store[it->second];
            if (r.end <= begin) {
                ++it;
                continue;
            }
            it = regions.erase(it);
            if (r.begin < begin) {
                pmc::MappedRegion piece = r;
                piece.end = begin;
                kept.push_back(std::move(piece));
            }
            if (r.end > end) {
                pmc::MappedRegion piece = r;
                piece.begin = end;
                piece.offset = r.offset + (end - r.begin);
                kept.push_back(std::move(piece));
            }
        }
        for (auto& piece : kept) insert(store, std::move(piece));
    }
    /// `r` mapped, over whatever was there. Anonymous memory mapped at a fixed address right after a writable private
    /// mapping of a file is labelled as probably its .bss, as a reading of the maps labels it (pmc::parse_maps): the
    /// loader maps a .bss so. Memory the program maps where the system chooses is just "anonymous", wherever it lands
    /// (QEMU places mappings upwards, often right after a library's .bss).
    void map(std::vector<pmc::MappedRegion>& store, pmc::MappedRegion r, bool fixed) {
        carve(store, r.begin, r.end);
        if (fixed && r.kind == pmc::RegionKind::anonymous && r.path.empty())
            if (const pmc::MappedRegion* before = r.begin ? at(store, r.begin - 1) : nullptr; before && before->end == r.begin) {
                if (before->kind == pmc::RegionKind::file && before->perms[1] == 'w' && before->perms[3] == 'p')
                    r.follows_file = before->path;
                else if (!before->follows_file.empty() && before->perms == r.perms)
                    r.follows_file = before->follows_file;
            }
        insert(store, std::move(r));
    }
    /// One mapping call replayed. `readings`: the image's regions from the readings, for an mremap of memory the
    /// program did not map itself (QEMU maps the program, its loader and its stack).
    void apply(std::vector<pmc::MappedRegion>& store, const MappingChange& c, const Cover& readings) {
        switch (c.kind) {
        case MappingChange::map: map(store, c.region, c.fixed); break;
        case MappingChange::unmap: carve(store, c.begin, c.end); break;
        case MappingChange::remap: {
            std::optional<pmc::MappedRegion> moved;
            if (const pmc::MappedRegion* r = at(store, c.begin)) moved = *r;
            else if (const pmc::MappedRegion* read = region_at(readings, c.begin)) moved = *read;
            constexpr std::uint64_t mremap_dontunmap = 4;
            if (!(c.remap_flags & mremap_dontunmap)) carve(store, c.begin, c.end);
            if (!moved) break;
            moved->offset += c.begin - moved->begin;
            moved->begin = c.to, moved->end = c.to_end;
            moved->follows_file.clear();
            map(store, std::move(*moved), false);
            break;
        }
        case MappingChange::brk: {
            // The heap runs from the first break seen (the preload library asks for it before the program's code
            // runs) to the current one, in whole pages, as the kernel's [heap].
            const std::uint64_t brk_end = MappingChange::page_end(c.begin, 0);
            if (!heap_begin || brk_end < heap_begin) heap_begin = brk_end;
            const std::uint64_t end = std::max(brk_end, heap_begin);
            if (end == heap_end) break;
            carve(store, heap_begin, std::max(end, heap_end));
            heap_end = end;
            if (end > heap_begin) {
                pmc::MappedRegion heap;
                heap.begin = heap_begin, heap.end = end, heap.perms = "rw-p", heap.path = "[heap]";
                heap.kind = pmc::RegionKind::heap;
                insert(store, std::move(heap));
            }
            break;
        }
        }
    }
};

/// The guest's memory maps that the run left in the sample directory (DIR/PID.maps: the plugin marks each process
/// image's start and a fork's parent, and adds each mapping call of the program; the preload library adds its
/// readings of the guest's /proc/self/maps at the image's start and at its exit()), grouped by process image.
struct ImageMaps {
    struct Image {
        std::uint32_t pid = 0;
        std::uint64_t begin = 0;    ///< CLOCK_MONOTONIC at its start (or fork)
        std::uint32_t parent = 0;   ///< a fork child: its parent's pid (its map is the parent's until it reads its own)
        std::vector<std::vector<pmc::MappedRegion>> readings;
        std::vector<MappingChange> changes; ///< the program's mapping calls, in time order
    };
    std::vector<Image> images;
    std::map<std::uint32_t, std::vector<std::size_t>> by_pid; ///< image indexes, in order of start
    std::size_t readings = 0, mapping_changes = 0;
    /// The readings the preload library could not make (a process out of descriptors at its exit): pid, errno.
    std::vector<std::pair<std::uint32_t, int>> unread;
    mutable std::map<std::size_t, Cover> covers;

    /// QEMU's emulated maps (7.2 and 10) leave the brk heap unnamed: the unnamed region holding the break's last
    /// byte (the preload library's reading gives the break) is named [heap], as a native run's kernel names it.
    static void name_the_brk_heap(std::vector<pmc::MappedRegion>& regions, unsigned long long program_break) {
        if (program_break == 0) return;
        for (auto& r : regions)
            if (r.begin < program_break && program_break <= r.end && r.path.empty() &&
                r.kind == pmc::RegionKind::anonymous) {
                r.path = "[heap]";
                r.kind = pmc::RegionKind::heap;
                r.follows_file.clear();
            }
    }
    void read(const std::string& path, std::uint32_t pid) {
        std::ifstream in(path);
        std::string line, text;
        Image* current = nullptr;
        unsigned long long program_break = 0; // the reading's, or 0
        const auto close_reading = [&] {
            if (current && !text.empty())
                if (auto regions = pmc::parse_maps(text, path); regions && !regions->empty()) {
                    name_the_brk_heap(*regions, program_break);
                    current->readings.push_back(std::move(*regions));
                    ++readings;
                }
            text.clear();
        };
        bool in_reading = false;
        std::vector<MappingChange> changes;
        while (std::getline(in, line)) {
            unsigned long long time = 0;
            char kind[16] = {};
            long parent = 0;
            int kind_end = 0;
            const int fields = std::sscanf(line.c_str(), "pmc-maps %llu %15s%n %ld", &time, kind, &kind_end, &parent);
            if (fields < 2) {
                if (in_reading) text += line + "\n";
                continue;
            }
            // A mapping call's line does not end a reading: the preload library writes its reading in pieces of
            // whole lines, and the plugin's lines of a call (another thread's) may fall between them.
            if (auto change = MappingChange::parse(time, kind, line.c_str() + kind_end + (line[kind_end] == ' '))) {
                changes.push_back(std::move(*change));
                ++mapping_changes;
                continue;
            }
            if (in_reading) close_reading();
            if (std::strcmp(kind, "unread") == 0) { // the preload library could not read the maps (its errno)
                in_reading = false;
                unread.push_back({pid, static_cast<int>(parent)});
                continue;
            }
            in_reading = std::strcmp(kind, "reading") == 0;
            program_break = in_reading && fields == 3 && parent > 0 ? static_cast<unsigned long long>(parent) : 0;
            if (!in_reading || !current) { // a start, a fork, or a reading before any mark: a new image
                images.push_back(Image{pid, time, std::strcmp(kind, "fork") == 0 ? static_cast<std::uint32_t>(parent) : 0u, {}, {}});
                by_pid[pid].push_back(images.size() - 1);
                current = &images.back();
            }
        }
        if (in_reading) close_reading();
        // Each change to the image its process ran at its time (an exec's changes before it are the old image's).
        for (auto& c : changes)
            if (const long image = image_of(pid, c.time); image >= 0)
                images[static_cast<std::size_t>(image)].changes.push_back(std::move(c));
        for (auto i : by_pid[pid])
            std::stable_sort(images[i].changes.begin(), images[i].changes.end(),
                             [](const MappingChange& x, const MappingChange& y) { return x.time < y.time; });
    }
    /// Where the brk heap of `image` starts: its first break (the preload library asks for it before the program's
    /// code runs), page-aligned; for a fork child without brk calls, its parent's; 0 if unknown.
    std::uint64_t heap_begin(std::size_t image, int depth = 0) const {
        const Image& m = images[image];
        for (const MappingChange& c : m.changes)
            if (c.kind == MappingChange::brk) return MappingChange::page_end(c.begin, 0);
        if (m.parent && depth < 16)
            if (const long p = image_of(m.parent, m.begin); p >= 0 && static_cast<std::size_t>(p) != image)
                return heap_begin(static_cast<std::size_t>(p), depth + 1);
        return 0;
    }
    /// QEMU's maps show a program's .bss beyond its file's last page and the brk heap after it as one region (same
    /// permissions), which name_the_brk_heap named [heap] whole: the part below the first break is the .bss, as a
    /// native run shows it (the kernel starts the heap elsewhere); all of it where the break never grew (QEMU 10
    /// with ASLR off). Once all files are read, before any cover().
    void split_heaps_at_first_break() {
        for (std::size_t i = 0; i < images.size(); ++i) {
            const std::uint64_t begin = heap_begin(i);
            if (!begin) continue;
            for (auto& reading : images[i].readings)
                for (std::size_t k = 0; k < reading.size(); ++k) {
                    pmc::MappedRegion& r = reading[k];
                    if (r.kind != pmc::RegionKind::heap || r.path != "[heap]" || r.begin >= begin) continue;
                    pmc::MappedRegion below = r;
                    below.end = std::min(begin, r.end);
                    below.path.clear();
                    below.kind = pmc::RegionKind::anonymous;
                    if (k > 0 && reading[k - 1].end == below.begin) { // (pmc::parse_maps' .bss guess)
                        const pmc::MappedRegion& before = reading[k - 1];
                        if (before.kind == pmc::RegionKind::file && before.perms[1] == 'w' && before.perms[3] == 'p')
                            below.follows_file = before.path;
                        else if (!before.follows_file.empty() && before.perms == below.perms)
                            below.follows_file = before.follows_file;
                    }
                    if (below.end == r.end) { // no heap in it
                        r = std::move(below);
                        continue;
                    }
                    r.begin = begin;
                    reading.insert(reading.begin() + static_cast<std::ptrdiff_t>(k), std::move(below));
                    ++k;
                }
        }
    }
    /// The image of process `pid` at `time`: the last that started by then (or its first); -1 if it has none.
    long image_of(std::uint32_t pid, std::uint64_t time) const {
        auto it = by_pid.find(pid);
        if (it == by_pid.end()) return -1;
        long found = static_cast<long>(it->second.front());
        for (std::size_t i : it->second)
            if (images[i].begin <= time) found = static_cast<long>(i);
        return found;
    }
    /// An image's regions: its readings, the later first (the exit's holds the heap and what was loaded later);
    /// then, for a fork child, its parent's at the fork.
    const Cover& cover(std::size_t image, int depth = 0) const {
        auto known = covers.find(image);
        if (known != covers.end()) return known->second;
        Cover c;
        const Image& m = images[image];
        for (auto r = m.readings.rbegin(); r != m.readings.rend(); ++r)
            for (const auto& region : *r) fill_gaps(c, region);
        if (m.parent && depth < 16)
            if (const long p = image_of(m.parent, m.begin); p >= 0)
                for (const auto& [begin, region] : cover(static_cast<std::size_t>(p), depth + 1)) fill_gaps(c, region);
        return covers.emplace(image, std::move(c)).first->second;
    }
};

/// An image's mappings at `time`: its parent's at the fork (a fork child), then its own calls up to `time`.
LiveMappings live_mappings_at(const ImageMaps& maps, std::size_t image, std::uint64_t time,
                              std::vector<pmc::MappedRegion>& store, int depth = 0) {
    LiveMappings live;
    const ImageMaps::Image& m = maps.images[image];
    if (m.parent && depth < 16)
        if (const long p = maps.image_of(m.parent, m.begin); p >= 0 && static_cast<std::size_t>(p) != image)
            live = live_mappings_at(maps, static_cast<std::size_t>(p), m.begin, store, depth + 1);
    for (const MappingChange& c : m.changes) {
        if (c.time > time) break;
        live.apply(store, c, maps.cover(image));
    }
    return live;
}

/// Names each sample's address with the mapping live at its time (Kept::live), replaying each image's mapping calls
/// in time order beside its samples; `times[i]` is kept[i]'s time, kept[i].cycle its image.
void name_live_mappings(const ImageMaps& maps, std::vector<Kept>& kept, const std::vector<std::uint64_t>& times,
                        std::vector<pmc::MappedRegion>& store) {
    std::map<std::uint32_t, std::vector<std::size_t>> by_image;
    for (std::size_t i = 0; i < kept.size(); ++i) by_image[kept[i].cycle].push_back(i);
    for (auto& [image, samples] : by_image) {
        std::stable_sort(samples.begin(), samples.end(), [&](std::size_t x, std::size_t y) { return times[x] < times[y]; });
        const ImageMaps::Image& m = maps.images[image];
        const Cover& readings = maps.cover(image);
        LiveMappings live = live_mappings_at(maps, image, times[samples.front()], store);
        auto next = std::upper_bound(m.changes.begin(), m.changes.end(), times[samples.front()],
                                     [](std::uint64_t t, const MappingChange& c) { return t < c.time; });
        for (std::size_t i : samples) {
            for (; next != m.changes.end() && next->time <= times[i]; ++next) live.apply(store, *next, readings);
            std::uint32_t index = 0;
            if (live.at(store, kept[i].addr, &index)) kept[i].live = index;
        }
    }
}

/// The files of a directory whose names end with `suffix`, with the pid their name starts with.
std::vector<std::pair<std::string, std::uint32_t>> files_ending(const std::string& dir, const std::string& suffix) {
    std::vector<std::pair<std::string, std::uint32_t>> found;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
                continue;
            found.emplace_back(dir + "/" + name, static_cast<std::uint32_t>(std::strtoul(name.c_str(), nullptr, 10)));
        }
        ::closedir(d);
    }
    std::sort(found.begin(), found.end());
    return found;
}

/// Removes the sample directory's files (before EmulatedReportFile removes its report and the directory).
struct SampleFilesRemoved {
    std::string dir;
    ~SampleFilesRemoved() {
        for (const char* suffix : {".samples", ".maps"})
            for (const auto& [path, pid] : files_ending(dir, suffix)) ::unlink(path.c_str());
    }
};

/// The PERF_RECORD_SAMPLE records of one DIR/PID.samples file (the kernel's layout, whole_program_sample_fields),
/// to `on_sample`; records pmc cannot parse are counted in `malformed`.
template <class OnSample>
std::uint64_t read_sample_records(const std::string& path, std::uint64_t& malformed, OnSample&& on_sample) {
    std::ifstream in(path, std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::uint64_t samples = 0;
    std::size_t at = 0;
    while (at + sizeof(perf_event_header) <= bytes.size()) {
        perf_event_header h;
        std::memcpy(&h, bytes.data() + at, sizeof h);
        if (h.size < sizeof h || at + h.size > bytes.size()) {
            ++malformed; // a truncated file: the rest cannot be trusted
            break;
        }
        if (h.type == PERF_RECORD_SAMPLE) {
            alignas(8) unsigned char record[256];
            pmc::Sample s;
            if (h.size > sizeof record || pmc::detail::parse_sample((std::memcpy(record, bytes.data() + at, h.size), record), h.size,
                                                                    pmc::detail::emulated::whole_program_sample_fields, s))
                ++malformed;
            else {
                ++samples;
                on_sample(s);
            }
        }
        at += h.size;
    }
    return samples;
}

/// Under the emulator: COMMAND under QEMU with pmc's plugin, every thread's loads sampled from the cache model from
/// its first; the records and the maps read from the sample directory at the end. The status to exit with if it
/// could not run or left no samples (said), or nothing.
std::optional<int> run_emulated(const SampleArgs& a, ReportOutput&, SampledRun& run) {
    run.loads = true;
    auto emulator = find_emulator(a.qemu, a.cpu);
    if (!emulator) {
        fmt::print(stderr, "pmc sample: {}\n", emulator.failure().message);
        return 1;
    }
    if (!emulator->cpu_warning.empty()) fmt::print(stderr, "pmc sample: warning: {}\n", emulator->cpu_warning);
    const EmulatedReportFile report;
    if (report.path.empty()) {
        fmt::print(stderr, "pmc sample: {}; nothing was run. {}\n", report.failure, report.fix);
        return 1;
    }
    const SampleFilesRemoved removed{report.dir};
    std::string shown;
    for (const auto& c : a.command) shown += (shown.empty() ? "" : " ") + c;
    Job job;
    job.remove_if_pmc_dies(report.dir);
    auto child = start_emulated(job, *emulator, a.command, false,
                                ",report=" + report.path + a.model.plugin_arguments +
                                    fmt::format(",samples={},sample_period={},sample_ldlat={}", report.dir, a.period,
                                                a.min_latency));
    if (!child) {
        fmt::print(stderr, "pmc sample: {}\n", child.failure().message);
        return child.failure().code.value() == ENOENT ? 127 : child.failure().code.value() == ENOEXEC ? 126 : 1;
    }
    run.exit_status = finish_emulated(job, shown, run.raw_status, "pmc sample");
    if (WIFSIGNALED(run.raw_status) && WTERMSIG(run.raw_status) == SIGSEGV && emulator->misaligns_signal_frames)
        fmt::print(stderr, "pmc sample: {}\n", signal_frame_explanation(*emulator, "'" + shown + "'"));
    const EmulatedReport processes = read_emulated_report(report.path);
    explain_child_sigills(processes, *child, "pmc sample");
    explain_child_segfaults(processes, *child, *emulator, "pmc sample");
    // A process a signal ended wrote no report line, but its sample files keep what it had written before.
    // (the plugin makes each process's samples file at its start: an empty one holds no sample)
    const auto sample_files = files_ending(report.dir, ".samples");
    const bool any_samples = std::any_of(sample_files.begin(), sample_files.end(), [](const auto& file) {
        struct stat st {};
        return ::stat(file.first.c_str(), &st) == 0 && st.st_size > 0;
    });
    if (processes.processes_with_loads == 0 && !any_samples) {
        if (processes.unwritten > 0) { // reached its exit: no signal, its lines lost (the reason is the plugin's)
            fmt::print(stderr, "pmc sample: '{}' (exit status {}) left no samples: {}\n", shown, run.exit_status,
                       unfinished_note(processes, run.raw_status));
            return run.exit_status ? run.exit_status : 1;
        }
        fmt::print(stderr, "pmc sample: '{}' (exit status {}) left no samples: no emulated process reached its exit "
                           "or wrote a sample (killed by a signal, or QEMU did not start it)\n", shown, run.exit_status);
        return run.exit_status ? run.exit_status : 1; // (cmd_sample ends as the command did, the files removed)
    }

    auto maps = std::make_shared<ImageMaps>();
    for (const auto& [path, pid] : files_ending(report.dir, ".maps")) maps->read(path, pid);
    maps->split_heaps_at_first_break();
    std::uint64_t malformed = 0, read = 0;
    std::uint32_t unknown_image = 0;
    std::vector<std::uint64_t> times; // each kept sample's
    for (const auto& [path, pid] : files_ending(report.dir, ".samples"))
        read += read_sample_records(path, malformed, [&](const pmc::Sample& s) {
            long image = maps->image_of(s.pid, s.time);
            if (image < 0) { // no map at all for it: its addresses show as unmapped
                maps->images.push_back(ImageMaps::Image{s.pid, 0, 0, {}, {}});
                maps->by_pid[s.pid].push_back(maps->images.size() - 1);
                image = static_cast<long>(maps->images.size() - 1);
                ++unknown_image;
            }
            const auto i = static_cast<std::uint32_t>(image);
            run.kept.push_back(Kept{s.addr ? s.addr : s.ip, s.pid, static_cast<float>(s.weight), i, i});
            run.levels.l1_samples += s.weight == pmc_model::LoadLatencies{}.l1;
            times.push_back(s.time);
            run.with_addr += s.addr != 0;
        });
    name_live_mappings(*maps, run.kept, times, run.live_regions);

    // The bias check: samples x period against the loads the model counted for every thread. Each thread counts
    // from its own first load, so each may end up to a period short of its next sample: one period per thread.
    pmc::BiasCheck& b = run.check;
    b.event = a.event;
    b.period = a.period;
    b.samples = read;
    b.estimated = read * a.period;
    b.exact = processes.sampled_loads;
    // The plugin's samples: those it wrote, and those it did not (a failed write, or past its limit per process).
    const std::uint64_t written = processes.load_samples - std::min(processes.unwritten_samples, processes.load_samples);
    const std::uint64_t missing = written > read ? written - read : 0;
    b.lost = processes.unwritten_samples + missing;
    b.lost_from_kernel_count = true;
    b.malformed = malformed;
    b.allowance = a.period * std::max<std::uint64_t>(processes.sampled_threads, 1);
    b.tolerance = a.tolerance;
    pmc::judge(b);
    const std::string ring = "because the ring buffer was full (more data_pages, or drain() more often)";
    if (const auto at = b.warning.find(ring); at != std::string::npos) // (there is no ring here)
        b.warning.replace(at, ring.size(), "unwritten: the plugin writes at most 4194304 a process (a longer period, "
                                           "-c), or a write failed, or a file lacks them");

    run.notes.push_back(a.model.note);
    run.notes.push_back(fmt::format(
        "modelled (pmc sample --emulate): every {}th load whose modelled latency is at least {} cycles (ldlat), of "
        "every thread from its first load ({} thread{} in {} emulated process image{}); the weight is the latency the "
        "model states for the level that served it (L1 4, L2 12, LL 40, memory 200 cycles): not measured, not a real "
        "core's; the exact count is the loads the model counted; one period of allowance per thread",
        a.period, a.min_latency, processes.sampled_threads, processes.sampled_threads == 1 ? "" : "s",
        processes.processes_with_loads, processes.processes_with_loads == 1 ? "" : "s"));
    if (processes.unfinished > 0) {
        run.interrupted = fmt::format(
            "interrupted: {} of the {} emulated process{} never reached {} exit{}: the samples are those the plugin had "
            "written to its files before (it writes them in batches), the rest are lost; the model's exact load count "
            "is missing, so the bias check cannot be made",
            processes.unfinished, processes.processes, processes.processes == 1 ? "" : "es",
            processes.unfinished == 1 ? "its" : "their",
            WIFSIGNALED(run.raw_status) ? " (the command ended by " + signal_name(WTERMSIG(run.raw_status)) + ")" : "");
        b.agrees = false;
        b.warning = run.interrupted;
    }
    // The level check (made with 100 samples or more): the share of samples the L1 served against the model's
    // exact share of L1 read hits, within 4 standard errors of a random sample of that size plus 1 %. A regular
    // pattern whose loads per line or per iteration share a factor with the period puts every sample on one phase.
    SampledRun::LevelCheck& levels = run.levels;
    if (run.interrupted.empty() && processes.has_cache && processes.Dr > 0 && read >= 100 &&
        a.min_latency <= pmc_model::LoadLatencies{}.l1) {
        levels.made = true;
        levels.model = 1.0 - static_cast<double>(std::min(processes.D1mr, processes.Dr)) / static_cast<double>(processes.Dr);
        levels.sampled = static_cast<double>(levels.l1_samples) / static_cast<double>(read);
        levels.allowance = 4 * std::sqrt(levels.model * (1 - levels.model) / static_cast<double>(read)) + 0.01;
        levels.agrees = std::fabs(levels.sampled - levels.model) <= levels.allowance;
        if (!levels.agrees) {
            b.agrees = false; // (the rows' scaled estimates would carry the alias)
            b.warning = fmt::format(
                "level check: {:.1f}% of the samples are L1 hits where the model's exact totals give {:.1f}% ({} D1 "
                "read misses in {} reads): the period ({}) may alias with the program's access pattern (a period "
                "sharing a factor with the loads per cache line or per loop iteration samples one phase of it): try "
                "a prime period, e.g. -c 1009 or -c 997",
                100 * levels.sampled, 100 * levels.model, processes.D1mr, processes.Dr, a.period);
        }
    }
    if (b.agrees && read == 0) { // nothing to judge: 0 samples of 0 loads agree, and say nothing
        b.agrees = false;
        b.warning = fmt::format("no samples: the command made fewer than {} loads (the period) whose modelled "
                                "latency reaches ldlat={}", a.period, a.min_latency);
    }
    if (processes.unwritten_samples)
        run.notes.push_back(fmt::format("the plugin took {} samples and wrote {}: at most 4194304 a process (a longer "
                                        "period, -c), and none where a write failed (counted as lost)",
                                        processes.load_samples, written));
    if (missing)
        run.notes.push_back(fmt::format("the plugin wrote {} samples and pmc read {}: {} are missing (counted as lost)",
                                        written, read, missing));
    if (const std::string native = native_programs_note(processes); !native.empty()) run.notes.push_back(native);
    for (const auto& [pid, error] : maps->unread) // (never silently: what the missing reading would have named)
        run.notes.push_back(fmt::format(
            "process {} could not read its memory map at its exit(): {} (the program had used up its file "
            "descriptors, and had closed the ones pmc's preload library kept for it): variables of the libraries it "
            "loaded after its start are not named, and memory QEMU mapped for it since then shows as 'unmapped'",
            pid, std::strerror(error)));
    run.regions_note = fmt::format(
        "regions: the mapping live at each sample's time, from the program's own mmap, munmap, mremap and brk calls "
        "({} seen by pmc's plugin); else the guest's /proc/self/maps (QEMU's view of the program: what QEMU mapped "
        "itself), read by pmc's preload library in each process image at its start and at its exit() ({} readings); a "
        "fork child starts with its parent's; an address none of them holds (shmat's memory; a statically linked "
        "program, which has no readings: its executable and stack) shows as 'unmapped'{}",
        maps->mapping_changes, maps->readings,
        unknown_image ? fmt::format("; {} samples came from processes with no map at all", unknown_image) : "");
    run.all_regions_of = [maps](std::uint32_t image, std::uint32_t) {
        std::vector<pmc::MappedRegion> out;
        for (const auto& [begin, r] : maps->cover(image)) out.push_back(r);
        return out;
    };
    run.regions_at = [maps](std::uint32_t, std::uint32_t image) { return maps->cover(image); };
    return std::nullopt;
}

/// The data summary of a run's samples (by data address where the samples have one) and the notes that go with it.
struct Summaries {
    pmc::DataSummary summary;
    bool by_data = false;
    std::vector<std::string> notes;
};
Summaries summarize(const SampledRun& run) {
    Summaries out;
    out.by_data = run.with_addr > 0 || run.loads; // (with no sample at all, a load's rows are still data addresses)
    std::map<std::uint32_t, pmc::AddressMap> by_space; // variables: from every file mapped at some time
    std::map<std::uint32_t, Cover> regions;            // regions: for the cycle `regions_cycle`
    std::uint32_t regions_cycle = 0;
    out.notes = run.notes;
    for (const Kept& k : run.kept) {
        if (out.by_data && k.addr == 0) continue;
        auto it = by_space.find(k.space);
        if (it == by_space.end()) {
            pmc::AddressMap map(run.all_regions_of(k.space, k.pid), static_cast<int>(k.pid));
#if defined(PMC_HAVE_SYMBOLS)
            pmc::load_symbols(map);
#endif
            it = by_space.emplace(k.space, std::move(map)).first;
        }
        if (k.cycle != regions_cycle) regions.clear();
        regions_cycle = k.cycle;
        auto cover = regions.find(k.pid);
        if (cover == regions.end()) cover = regions.emplace(k.pid, run.regions_at(k.pid, k.cycle)).first;
        pmc::Attribution where = it->second.attribute(k.addr);
        where.region = k.live != Kept::no_live_region ? &run.live_regions[k.live] : region_at(cover->second, k.addr);
        if (where.kind == pmc::AttributionKind::region || where.kind == pmc::AttributionKind::unmapped)
            where.kind = where.region ? pmc::AttributionKind::region : pmc::AttributionKind::unmapped;
        out.summary.add(where, k.weight);
    }
    if (!by_space.empty()) out.notes.push_back(by_space.begin()->second.symbols_note());
    out.notes.push_back(run.regions_note);
    if (out.by_data && run.with_addr < run.kept.size())
        out.notes.push_back(fmt::format("{} samples carried no data address and are not in the summary",
                                        run.kept.size() - run.with_addr));
    return out;
}

/// The report, as text or JSON, to `out`.
void write_report(const SampleArgs& a, const SampledRun& run, const Summaries& s, std::FILE* out) {
    const pmc::BiasCheck& check = run.check;
    const bool by_data = s.by_data;
    const int exit_status = run.exit_status;
    const pmc::DataSummary& summary = s.summary;
    const std::vector<std::string>& notes = s.notes;
    // Per-row estimates only where the bias check holds, and with a fixed period.
    const double scale = check.agrees && !check.frequency_mode && check.period > 1 ? static_cast<double>(check.period) : 0;
    if (a.json) {
        pmc::JsonWriter j;
        j.begin_object();
        j.key("command").begin_array();
        for (auto& c : a.command) j.value(c);
        j.end_array();
        j.key("exit_status").value(exit_status);
        j.key("event").value(check.event);
        if (a.emulate) j.key("emulated").value(true);
        if (!run.interrupted.empty()) j.key("interrupted").value(run.interrupted);
        j.key("addresses").value(by_data ? "data" : "instruction");
        j.key("bias").begin_object();
        j.key("mode").value(check.frequency_mode ? "frequency" : "period");
        if (!check.frequency_mode) j.key("period").value(check.period);
        j.key("samples").value(check.samples).key("estimated").value(check.estimated);
        j.key("estimate_method").value(pmc::estimate_method(check));
        if (check.exact_missing) j.key("exact").null().key("ratio").null(); // (no counter could be read)
        else j.key("exact").value(check.exact).key("ratio").value(check.ratio);
        j.key("lost").value(check.lost).key("lost_from_kernel_count").value(check.lost_from_kernel_count);
        j.key("throttled").value(check.throttled).key("malformed").value(check.malformed);
        j.key("tolerance").value(check.tolerance).key("agrees").value(check.agrees);
        j.key("warning").value(check.warning);
        j.end_object();
        if (run.levels.made) {
            j.key("level_check").begin_object();
            j.key("l1_share_sampled").value(run.levels.sampled).key("l1_share_model").value(run.levels.model);
            j.key("allowance").value(run.levels.allowance).key("agrees").value(run.levels.agrees);
            j.end_object();
        }
        if (by_data) write_rows_json(j, "by_variable", summary.by_variable(), summary.total());
        write_rows_json(j, "by_region", summary.by_region(), summary.total());
        j.key("notes").begin_array();
        for (auto& n : notes) j.value(n);
        j.end_array();
        j.end_object();
        fmt::print(out, "{}\n", j.str());
        return;
    }
    std::string text = fmt::format("pmc sample: '{}', {} over '{}' (exit status {})\n", check.event,
                                   check.frequency_mode ? fmt::format("about {} samples a second", a.frequency)
                                                        : check.period == 1 ? std::string("a sample at every event") : fmt::format("a sample every {} events", check.period),
                                   a.command[0], exit_status);
    if (!run.interrupted.empty())
        text += fmt::format("{} samples, {}\n", check.samples, run.interrupted);
    else if (check.exact_missing)
        text += fmt::format("bias check: estimated {} ({} samples, {}), exact: none (no counter could be read); lost "
                            "{}, throttled {}\n", check.estimated, check.samples, pmc::estimate_method(check),
                            check.lost, check.throttled);
    else
        text += fmt::format("bias check: estimated {} ({} samples, {}), exact {}, ratio {}; lost {}, throttled {}{}\n",
                            check.estimated, check.samples, pmc::estimate_method(check), check.exact,
                            ratio_text(check.ratio), check.lost, check.throttled,
                            check.agrees ? fmt::format("; agrees within {:g}% + one period", check.tolerance * 100)
                                         : std::string());
    if (run.levels.made && run.levels.agrees)
        text += fmt::format("level check: {:.1f}% of the samples are L1 hits, the model's exact share {:.1f}%; agrees "
                            "within {:.1f} points\n", 100 * run.levels.sampled, 100 * run.levels.model,
                            100 * run.levels.allowance);
    if (check.agrees && check.lost) // both: the loss is real, though within the tolerance
        text += fmt::format("note: {} samples were lost ({}), within the tolerance\n", check.lost,
                            a.emulate ? "the plugin's sample files lack them: a write failed, or a process was killed"
                                      : "the ring was full: more pages with -m");
    if (check.agrees && check.samples < 10)
        text += fmt::format("note: {} samples: too few to judge a bias (the check holds only within one "
                            "period at this run's rate, {} events)\n",
                            check.samples, check.allowance);
    if (!check.agrees && run.interrupted.empty()) text += "WARNING: " + check.warning + "\n";
    const char* what = by_data ? "data addresses" : "instruction addresses";
    if (by_data) // code addresses fall in functions, not variables
        text += rows_text(fmt::format("\n{} by variable:", what).c_str(), summary.by_variable(),
                          summary.total(), a.top, scale);
    text += rows_text(fmt::format("\n{} by region:", what).c_str(), summary.by_region(), summary.total(), a.top,
                      scale);
    text += "\n";
    for (auto& n : notes) text += "note: " + n + "\n";
    fmt::print(out, "{}", text);
}

} // namespace

int cmd_sample(const std::vector<std::string>& arguments) {
    pmc_cli::CommandLine cl("pmc sample", sample_help);
    SampleArgs a;
    if (auto status = parse_sample_arguments(cl, arguments, a)) return *status;
    ReportOutput out;
    if (!out.open(a.output)) return 1;
    SampledRun run;
    if (auto failed = a.emulate ? run_emulated(a, out, run) : run_native(a, out, run)) {
        const int status = out.finish(*failed);
        if (a.emulate) end_like(run.raw_status); // (after run_emulated removed its files)
        return status;
    }
    write_report(a, run, summarize(run), out.file);
    int reported = out.finish(run.exit_status);
    // A report with figures missing (the exact count unread, or --emulate's interrupted processes) is never status 0,
    // which a script that checks only the status would take for a whole one.
    const char* missing = !run.interrupted.empty()    ? "a process never reached its exit, so samples and the exact "
                                                        "count are missing (the report says interrupted)"
                          : run.check.exact_missing ? "no exact count: the counters could not be read after the run"
                                                    : nullptr;
    if (reported == 0 && missing) {
        fmt::print(stderr, "pmc sample: exit status 1, though '{}' exited 0: {}\n", a.command[0], missing);
        reported = 1;
    }
    end_like(run.raw_status); // ended by SIGINT or SIGQUIT: pmc ends so too, so that a calling shell script stops
    return reported;
}

} // namespace pmc_tool
