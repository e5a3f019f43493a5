// SPDX-License-Identifier: MIT
// pmc-memory: the memory hierarchy of this machine in about 20 s (15-30 s on a 2-CPU VM; --quick about 2 s of CPU time) -- load
// latency against working-set size with the levels found in the curve (pmc-mem-latency), bandwidth per level
// (pmc-mem-bandwidth) and page-fault costs (pmc-mem-pagefault) -- written to a report folder: CSV and JSON data,
// figures, and summary.md.
//
// How: it runs the three experiments in turn with their defaults (the random chain at 8 points per octave from
// 512 B to 256 MiB plus lmbench3's forward chain at 4; twelve bandwidth kernels at 2 points per octave, then the
// memory bandwidth with every CPU; 16 MiB of page faults three times), pinned to one CPU, timed with pmc's
// wall-time counter and counted with pmc's software counters. The bandwidth table is split by the levels the
// latency experiment found, and the page-fault cost is compared with the memory latency it measured (when its
// sweep reached 64 MiB; otherwise, as with --quick, a random chain over 256 MiB measures it). Each
// experiment also runs alone (pmc-mem-latency, pmc-mem-bandwidth, pmc-mem-pagefault; --help).
//
// Under pmc emulate --cache, time measures the emulator: the levels come from pmc's cache model instead (the same
// modelled sweep as pmc-mem-latency's), and bandwidth and page faults, which only time and perf_event_open could
// measure, are left out with a note saying so.
#include "bandwidth.hpp"
#include "common.hpp"
#include "latency.hpp"
#include "pagefault.hpp"
#include "report.hpp"

#include <command_line.hpp>
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace {

const char* usage = R"(usage: pmc-memory [options]

Measures this machine's memory hierarchy -- load latency and the levels found in it, bandwidth per level, page
fault costs -- and writes a report folder: latency/bandwidth/pagefault .csv and .json, latency.png and
bandwidth.png (.svg, with their gnuplot scripts) and summary.md. About 20 s with the defaults (15-30 s on a
2-CPU VM, with the load).

  --out DIR       report folder (default pmc-memory-report)
  --quick         a short run (about 1.5 s there) with fewer sizes and runs: latency and bandwidth to
                  8 MiB (read, write, copy-vec, memcpy, memset with a non-zero byte and with zeros), page
                  faults on 4 MiB twice, a load from memory on its own
  --skip LIST     comma-separated experiments to leave out: latency, bandwidth, pagefault
  --dir DIR       where the page-fault test file goes (default: the report folder; not tmpfs)
  --cpu N         pin to CPU N (default: the last CPU this process may use)
  --no-pin        do not pin
  --no-plot       do not run gnuplot
  --quiet         no progress lines
  -h, --help      this text

Each experiment runs alone with more options: pmc-mem-latency, pmc-mem-bandwidth, pmc-mem-pagefault (--help).

Under pmc emulate --cache (`pmc emulate --cache [--D1 G] [--L2 G] [--LL G] -- pmc-memory`), time measures the
emulator, not memory: the levels come from pmc's cache model, as pmc-mem-latency finds them there (a random chain's
modelled misses per load from 512 B to 4x the largest data cache, at 8 points per octave, --quick 4, the elements
64 bytes apart or the model's longest line where longer), shown beside the model's D1, L2 and LL. Bandwidth
and page faults are not measured there (their figures would be QEMU's speed, and the page-fault counts need
perf_event_open, which QEMU's user mode lacks): the output and summary.md say so, and --skip latency is a usage
error. Writes latency-modelled.csv and summary.md. --cpu, --no-pin (nothing is timed, and the model is the same on
any CPU) and --dir (no page-fault file) do not apply there: each is a usage error that says why. Under pmc
emulate without --cache it exits with status 1.

Exit status: 0 when the run is done; 1 on a usage or run error. Under pmc emulate --cache, 2 (after the
report is written) when the curve misses one of the model's cache levels, or finds a level the model lacks or
one more than a sweep step from the model's size (said on stderr), as pmc-mem-latency does: the model oracle
fails a script. A timed run does not fail on a level that disagrees with the CPU's reported caches (timing on a
shared machine is noisy): it warns.
)";

/// Under pmc emulate --cache: the options of the timed run are refused (a usage error), each with why it does not
/// apply, rather than ignored.
void refuse_untimed_options(const pmc_cli::CommandLine& cl) {
    const std::string fix = ": leave it out, or run pmc-memory without the emulator to measure this machine";
    for (const char* option : {"--cpu", "--no-pin"})
        if (cl.count(option) > 0)
            throw pmc_mem::UsageError(std::string(option) + " does not apply under pmc emulate --cache: nothing is "
                                      "timed there, and the cache model runs in the emulator, the same on any CPU" +
                                      fix);
    if (cl.count("--dir") > 0)
        throw pmc_mem::UsageError("--dir does not apply under pmc emulate --cache: it places the page-fault test file, "
                                  "and page faults are not measured there (their counts need perf_event_open, which "
                                  "QEMU's user mode lacks)" + fix);
}

/// Under pmc emulate --cache: the levels of pmc's cache model (pmc-mem-latency's modelled sweep), and a note for
/// each experiment that the emulator cannot measure.
int run_modelled(const pmc_mem::CommonOptions& common, const std::vector<pmc_mem::ModelledCache>& model,
                 bool do_latency, bool do_bandwidth, bool do_pagefault, const std::string& command) {
    using namespace pmc_mem;
    if (!do_latency)
        throw UsageError("--skip latency: under pmc emulate --cache the latency experiment, from the cache model, is "
                         "the only one that runs; leave it in, or run pmc-memory without the emulator");
    const std::string& out = common.out;
    probe_output_dir(out);
    Progress progress(common.quiet);
    const auto t0 = std::chrono::steady_clock::now();
    progress.note("pmc-memory: report in " + out + "/; under pmc emulate --cache (" + modelled_geometry() +
                  "): the levels come from the cache model's modelled misses, not from time");
    Written written;
    SummaryInput summary;
    summary.command = command;
    ModelledLatencyResult latency;
    std::vector<ModelCheck> checks;
    if (do_latency) {
        LatencyOptions o;
        fit_sweep_to_model(o, model, common.quick, false, false);
        latency = run_modelled_latency(o, model, progress);
        checks = check_against_model(latency.regimes, model);
        const std::string csv = join_path(out, "latency-modelled.csv");
        write_text(csv, modelled_latency_csv(latency));
        written.files.push_back(csv);
        std::printf("%s\n", modelled_levels_report(latency, checks).c_str());
    }
    std::vector<std::string> not_measured;
    if (do_bandwidth)
        not_measured.push_back("Bandwidth: not measured under pmc emulate --cache: bytes per second there are the "
                               "emulator's speed, not memory's. Run pmc-memory without the emulator for it.");
    if (do_pagefault)
        not_measured.push_back("Page faults: not measured under pmc emulate --cache: their counts need "
                               "perf_event_open, which QEMU's user mode does not implement, and their time is the "
                               "emulator's. Run pmc-memory without the emulator for them.");
    for (const auto& n : not_measured) std::printf("%s\n", n.c_str());
    if (!not_measured.empty()) std::printf("\n");
    summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string summary_path = join_path(out, "summary.md");
    summary.files = written.files;
    summary.files.push_back(summary_path);
    write_text(summary_path, modelled_summary_markdown(summary, do_latency ? &latency : nullptr, checks, not_measured));
    written.files.push_back(summary_path);
    progress.note(fmt::format("pmc-memory: done in {:.1f} s ({:.1f} s of CPU time: pinned to one CPU, it waits for its "
                              "share on a loaded machine); summary: {}",
                              summary.seconds, static_cast<double>(std::clock()) / CLOCKS_PER_SEC, summary_path));
    print_written(written);
    // The oracle's verdict as the exit status, as pmc-mem-latency gives it (after the report is written).
    return do_latency ? model_verdict(checks, model, "pmc-memory") : 0;
}

int run(int argc, char** argv) {
    using namespace pmc_mem;
    CommonOptions common;
    std::string pf_dir, skip;
    bool do_latency = true, do_bandwidth = true, do_pagefault = true;
    std::string command = "pmc-memory";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    pmc_cli::CommandLine cl("pmc-memory", usage);
    common.add_to(cl, true);
    cl.option("--skip", skip, "experiments to leave out: latency, bandwidth, pagefault");
    cl.option("--dir", pf_dir, "a folder");
    if (auto status = cl.parse(argc, argv)) return *status;
    const std::string list = skip + ",";
    for (std::size_t start = 0, comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1) {
        const std::string item = list.substr(start, comma - start);
        if (item == "latency") do_latency = false;
        else if (item == "bandwidth") do_bandwidth = false;
        else if (item == "pagefault") do_pagefault = false;
        else if (!item.empty()) throw UsageError("--skip: latency, bandwidth or pagefault, not '" + item + "'");
    }
    // Under pmc emulate --cache time means nothing: the levels come from the model's own miss counts.
    if (const std::vector<ModelledCache> model = modelled_caches(); !model.empty()) {
        refuse_untimed_options(cl);
        return run_modelled(common, model, do_latency, do_bandwidth, do_pagefault, command);
    }
    if (const std::string why = emulator_without_model("pmc-memory"); !why.empty()) throw std::runtime_error(why);
    const int cpu = common.cpu();
    const std::string& out = common.out;
    const bool pin = common.pin(), plot = common.plot(), quiet = common.quiet, quick = common.quick;

    std::string pin_note = "Not pinned (--no-pin)";
    if (pin) pin_to_cpu(cpu, pin_note);
    Clock clock;
    Progress progress(quiet);
    const MachineFacts machine = machine_facts();
    probe_output_dir(out);
    if (!pf_dir.empty() && do_pagefault) probe_test_file_dir(pf_dir);
    const std::uint64_t t0 = clock.now_ns();
    progress.note("pmc-memory: report in " + out + "/; " + pin_note + "; " + clock.cycles_note());
    Written written;
    SummaryInput summary;
    summary.command = command;

    LatencyResult latency;
    double memory_ns = 0; // a load from memory measured on its own: measured once, used by the figure and page faults
    std::string memory_source;
    if (do_latency) {
        LatencyOptions o;
        o.chains = {Chain::random, Chain::forward};
        o.chain_per_octave = {8, 4};
        if (quick) {
            o.max_size = 8u << 20;
            o.chain_per_octave = {8, 4};
            o.reps = 15;
            o.sweeps = 5;
        }
        latency = run_latency(o, clock, progress, pin_note);
        // A sweep that stops short of memory (--quick): is its last level memory or a cache? A load from memory
        // measured on its own answers it, before the figure and tables name it.
        if (!main_memory_level(latency.regimes)) {
            const std::uint64_t size = 256ull << 20;
            memory_ns = measure_memory_latency(size, clock);
            memory_source = "random pointer chain over " + size_text(static_cast<double>(size)) +
                            ", measured on its own (median of 31 runs of 2000 loads)";
            compare_with_memory(latency, memory_ns, memory_source);
        }
        // Then the levels against what the CPU reports, and whether the machine was busy: said beside the table.
        check_latency(latency, machine);
        written.add(save_latency(out, latency, machine, plot));
        summary.latency = &latency;
        std::printf("Levels found in the random-chain load latency (%u runs per size), beside what the CPU "
                    "reports:\n\n%s\n",
                    o.reps, regimes_text(latency.regimes, machine).c_str());
    }

    BandwidthResult bandwidth;
    AllCpuBandwidth all_cpus;
    if (do_bandwidth) {
        BandwidthOptions o;
        if (quick) {
            o.max_size = 8u << 20;
            o.per_octave = 1;
            o.reps = 3;
            o.rep_ms = 1;
            o.kernels = {"read", "write", "memcpy", "memset", "memset-0"};
            if (!vector_isa().empty()) o.kernels.insert(o.kernels.begin() + 2, "copy-vec");
        }
        bandwidth = run_bandwidth(o, clock, progress, pin_note);
        const unsigned cpus = static_cast<unsigned>(process_cpus().size());
        if (cpus > 1 && pin) {
            all_cpus.threads = cpus;
            all_cpus.size = o.max_size;
            for (const auto& k : available_kernels()) {
                if (k.name != "read-vec" && k.name != "write-nt" && k.name != "copy-vec" && k.name != "memcpy")
                    continue;
                if (quick && k.name != "memcpy") continue;
                const BandwidthPoint p = measure_bandwidth(k, o.max_size, cpus, 3, o.rep_ms, clock);
                all_cpus.gbps.emplace_back(k.name, p.best());
                progress.detail(fmt::format("bandwidth: {} threads, {} at {}: {:.1f} GB/s", cpus, k.name,
                                          size_label(static_cast<double>(o.max_size)), p.best()));
            }
            summary.all_cpus = &all_cpus;
        }
        const Regimes* regimes = do_latency ? &latency.regimes : nullptr;
        written.add(save_bandwidth(out, bandwidth, machine, regimes, plot));
        summary.bandwidth = &bandwidth;
        if (regimes)
            std::printf("Bandwidth per level in GB/s (best run; median over the sizes well inside each level):\n\n%s\n",
                        level_bandwidth_text(bandwidth_per_level(bandwidth, *regimes)).c_str());
        if (!all_cpus.gbps.empty()) {
            std::printf("With %u threads on %u CPUs at %s:", all_cpus.threads, all_cpus.threads,
                        size_text(static_cast<double>(all_cpus.size)).c_str());
            for (const auto& [k, v] : all_cpus.gbps) std::printf(" %s %.1f GB/s", k.c_str(), v);
            std::printf("\n\n");
        }
    }

    PagefaultResult pagefault;
    if (do_pagefault) {
        PagefaultOptions o;
        o.dir = pf_dir.empty() ? out : pf_dir;
        if (quick) {
            o.file_size = 4u << 20;
            o.runs = 2;
        }
        // The latency curve's last level is main memory only when the sweep went past the caches (--quick stops
        // at 8 MiB, inside an L3): otherwise run_pagefault measures a load from memory on its own.
        if (const Level* mem = do_latency ? main_memory_level(latency.regimes) : nullptr) {
            o.memory_latency_ns = mem->latency;
            o.memory_latency_source = "the memory level found by the latency experiment (" +
                                      size_label(mem->first_size) + ".." + size_label(mem->last_size) +
                                      "; the median of its points from 4x the last cache boundary up, or of its whole plateau if "
                                      "fewer than 3 lie there)";
        } else if (memory_ns > 0) {
            o.memory_latency_ns = memory_ns;
            o.memory_latency_source = memory_source;
        }
        pagefault = run_pagefault(o, clock, progress);
        written.add(save_pagefault(out, pagefault, machine));
        summary.pagefault = &pagefault;
        std::printf("Page faults, one byte touched per page:\n\n%s\n", pagefault_text(pagefault).c_str());
    }

    summary.seconds = static_cast<double>(clock.now_ns() - t0) / 1e9;
    summary.notes = written.notes;
    const std::string summary_path = join_path(out, "summary.md");
    summary.files = written.files;
    summary.files.push_back(summary_path);
    write_text(summary_path, summary_markdown(machine, summary));
    written.files.push_back(summary_path);
    progress.note(fmt::format("pmc-memory: done in {:.1f} s ({:.1f} s of CPU time: pinned to one CPU, it waits for its "
                              "share on a loaded machine); summary: {}",
                              summary.seconds, static_cast<double>(std::clock()) / CLOCKS_PER_SEC, summary_path));
    print_written(written);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (...) {
        return pmc_mem::report_exception("pmc-memory");
    }
}
