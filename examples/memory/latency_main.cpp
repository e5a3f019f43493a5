// SPDX-License-Identifier: MIT
// pmc-mem-latency: how long one load waits for memory, against the working-set size -- lmbench's lat_mem_rd
// curve -- and the levels of the memory hierarchy found from that curve alone, beside what the CPU reports.
//
// How: a circular chain of pointers, one every 64 bytes of the working set, is walked with back-to-back
// dependent loads (p = *p, 100 per loop iteration, the result stored to a volatile), so each load waits for the
// previous one. ns per load = elapsed / loads, timed with pmc's wall-time counter (rdtsc, no system call; cycles:u
// too where a PMU lets it open). The chain is built before timing and walked once before the runs; each size is
// timed in 45 short runs (0.25 ms: long enough to dwarf the clock's cost, short enough that most runs miss a
// VM's periodic interruptions) spread over 9 sweeps over all sizes, each sweep with the chain in another part of
// the buffer; a point is the median over the sweeps of each sweep's fastest run (interference only adds time; the
// sweeps average how physical pages fall into cache sets). The thread is pinned to one CPU. The default chain is a random cycle (prefetchers cannot guess it); --chain forward is
// lmbench3's sequential one for comparison. The regime detector is in regimes.hpp (docs/memory.md).
#include "common.hpp"
#include "latency.hpp"
#include "report.hpp"

#include <command_line.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace {

const char* usage = R"(usage: pmc-mem-latency [options]

Load latency against working-set size (lmbench's lat_mem_rd), and the cache levels found from the curve.

  --min SIZE           smallest working set (default 512)
  --max SIZE           largest working set (default 256M; past the last cache)
  --per-octave N       points per octave, at 2^n * (1 + k/N) (default 8)
  --stride BYTES       bytes between chain elements (default 64, one cache line)
  --chain LIST         comma-separated: random (default), forward (= lmbench, lmbench3's sequential chain),
                       backward (= lmbench2)
  --runs N             timed runs per size (default 45)
  --run-ms MS          length of one run (default 0.25: short runs miss the periodic interruptions of a VM)
  --sweeps N           spread each size's runs over N sweeps over all sizes, each with the chain on other
                       physical pages (default 9); a point is the median of the sweeps' fastest runs
  --seed N             seed of the random chain (default 1)
  --hugepages          ask for transparent huge pages (default: base pages, like malloc)
  --cpu N              pin to CPU N (default: the last CPU this process may use)
  --no-pin             do not pin
  --out DIR            report folder (default pmc-memory-report)
  --no-plot            do not run gnuplot
  --quick              a short run for tests: 512 B..4 MiB, 15 runs in 5 sweeps (not with --min, --max,
                       --per-octave, --runs, --sweeps)
  --quiet              no progress lines
  -h, --help           this text

SIZE: bytes, or with K, M, G (powers of 1024): 48K, 1.5M. Writes DIR/latency.csv, latency.json and latency.png
(.svg, and the gnuplot script). Progress goes to stderr; the table of levels to stdout.

Under pmc emulate --cache (pmc-mem-latency run as `pmc emulate --cache [--D1 G] [--L2 G] [--LL G] --
pmc-mem-latency`), time means nothing: the levels come from pmc's cache model instead. Each size's random
chain is walked once to warm and once between two readings of the modelled L1-dcache-load-misses, LLC-loads
and LLC-load-misses; a size's cost per load is built from its miss rates, and the levels found in that curve
are shown beside the model's D1, L2 and LL (the last cache level named LL, as Cachegrind does). The sweep
runs from --min to --max (default 4x the largest data cache: the LL, or a D1 above it) at --per-octave
points (--quick: 4), with --stride (default 64, or the model's longest line where longer: one element a
line) and --seed. --runs, --run-ms, --sweeps, --chain forward or backward, --hugepages, --cpu and --no-pin
do not apply there (nothing is timed; the model has no prefetcher): each is a usage error that says why. Writes
DIR/latency-modelled.csv (size, loads, d1_misses, l2_misses, ll_misses, cost_per_load).

Exit status: 0 when the run is done; 1 on a usage or run error. Under pmc emulate --cache, 2 when the curve
misses one of the model's cache levels, or finds a level the model lacks or one more than a sweep step from the
model's size (said on stderr): the model oracle fails a script. A timed run does not fail on a level that
disagrees with the CPU's reported caches (timing on a shared machine is noisy): it warns.
)";

/// Under pmc emulate --cache: the options of a timed sweep are refused (a usage error), each with why it does not
/// apply, rather than ignored.
void refuse_untimed_options(const pmc_cli::CommandLine& cl, const pmc_mem::LatencyOptions& o) {
    const std::string fix = ": leave it out, or run pmc-mem-latency without the emulator to time this machine";
    for (const char* option : {"--runs", "--run-ms", "--sweeps"})
        if (cl.count(option) > 0)
            throw pmc_mem::UsageError(std::string(option) + " does not apply under pmc emulate --cache: nothing is "
                                      "timed there, and each size's chain is walked once, its modelled misses exact "
                                      "and the same in every run" + fix);
    if (cl.count("--chain") > 0 && (o.chains.size() != 1 || o.chains.front() != pmc_mem::Chain::random))
        throw pmc_mem::UsageError("--chain: under pmc emulate --cache the sweep walks the random chain only: the cache "
                                  "model has no prefetcher, so a forward or backward chain misses exactly as the "
                                  "random one does" + fix);
    for (const char* option : {"--hugepages", "--cpu", "--no-pin"})
        if (cl.count(option) > 0)
            throw pmc_mem::UsageError(std::string(option) + " does not apply under pmc emulate --cache: the cache "
                                      "model indexes its sets by virtual address and runs in the emulator, so pages "
                                      "and CPUs change nothing" + fix);
}

/// The sweep under pmc emulate --cache: the levels of pmc's cache model, beside its configured sizes.
int run_modelled(const pmc_mem::LatencyOptions& o, const pmc_mem::CommonOptions& common,
                 const std::vector<pmc_mem::ModelledCache>& model) {
    using namespace pmc_mem;
    Progress progress(common.quiet);
    progress.note("pmc-mem-latency: under pmc emulate --cache (" + modelled_geometry() +
                  "): the levels come from the cache model's modelled misses, not from time");
    const ModelledLatencyResult r = run_modelled_latency(o, model, progress);
    const std::vector<ModelCheck> checks = check_against_model(r.regimes, model);
    const std::string csv = common.out + "/latency-modelled.csv";
    write_text(csv, modelled_latency_csv(r));
    std::printf("%s\nwrote %s\n", modelled_levels_report(r, checks).c_str(), csv.c_str());
    // The oracle's verdict as the exit status, so that a script can fail on it: every modelled data cache found,
    // each within one step of its configured size, and no level the model lacks.
    return model_verdict(checks, model, "pmc-mem-latency");
}

int run(int argc, char** argv) {
    using namespace pmc_mem;
    LatencyOptions o;
    CommonOptions common;
    std::string min_text, max_text, per_octave_text, stride_text, chain_text, runs_text, run_ms_text, sweeps_text,
        seed_text;
    pmc_cli::CommandLine cl("pmc-mem-latency", usage);
    cl.option("--min", min_text, "a size such as 512 or 48K");
    cl.option("--max", max_text, "a size such as 256M");
    cl.option("--per-octave", per_octave_text, "a number of points");
    cl.option("--stride", stride_text, "a size in bytes");
    cl.option("--chain", chain_text, "chain names: random, forward, backward");
    cl.option("--runs", runs_text, "a number of runs");
    cl.option("--run-ms", run_ms_text, "milliseconds");
    cl.option("--sweeps", sweeps_text, "a number of sweeps");
    cl.option("--seed", seed_text, "a number");
    cl.flag("--hugepages", o.hugepages);
    common.add_to(cl, true);
    if (auto status = cl.parse(argc, argv)) return *status;
    common.check_quick(cl, {"--min", "--max", "--per-octave", "--runs", "--sweeps"}, "the sizes and runs");
    if (!min_text.empty()) o.min_size = parse_size(min_text);
    if (!max_text.empty()) o.max_size = parse_size(max_text);
    if (!per_octave_text.empty()) o.per_octave = static_cast<unsigned>(integer_option("--per-octave", per_octave_text, 1, 64));
    if (!stride_text.empty()) o.stride = parse_size(stride_text);
    if (cl.count("--chain") > 0) {
        o.chains.clear();
        std::size_t start = 0;
        while (start <= chain_text.size()) {
            const auto comma = chain_text.find(',', start);
            o.chains.push_back(
                parse_chain(chain_text.substr(start, comma == std::string::npos ? comma : comma - start)));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    if (!runs_text.empty()) o.reps = static_cast<unsigned>(integer_option("--runs", runs_text, 1, 1000));
    if (!run_ms_text.empty()) o.rep_ms = number_option("--run-ms", run_ms_text, 0.01, 10000);
    if (!sweeps_text.empty()) o.sweeps = static_cast<unsigned>(integer_option("--sweeps", sweeps_text, 1, 1000));
    if (!seed_text.empty()) o.seed = static_cast<std::uint64_t>(integer_option("--seed", seed_text, 0, INT64_MAX));
    const int cpu = common.cpu();
    if (common.quick) {
        o.min_size = 512;
        o.max_size = 4u << 20;
        o.per_octave = 8;
        o.reps = 15;
        o.sweeps = 5;
    }
    if (o.stride < sizeof(void*) || o.stride % sizeof(void*) != 0)
        throw UsageError("--stride must be a multiple of " + std::to_string(sizeof(void*)) + " bytes");
    if (o.max_size < 4 * o.stride) throw UsageError("--max must hold at least 4 chain elements");
    if (o.max_size / o.stride > UINT32_MAX) throw UsageError("--max / --stride must be below 2^32 elements");
    // Under pmc emulate --cache time means nothing: the levels come from the model's own miss counts.
    const std::vector<ModelledCache> model = modelled_caches();
    if (!model.empty()) {
        refuse_untimed_options(cl, o);
        // --quick excludes --min and --max
        fit_sweep_to_model(o, model, common.quick, !max_text.empty(), !stride_text.empty());
        if (o.max_size < 4 * o.stride)
            throw UsageError("--max must hold at least 4 chain elements (" + std::to_string(o.stride) +
                             " bytes apart under the model: its longest line; --stride sets it)");
        if (o.max_size / o.stride > UINT32_MAX) throw UsageError("--max / --stride must be below 2^32 elements");
        latency_grids(o);
        probe_output_dir(common.out);
        return run_modelled(o, common, model);
    }
    if (const std::string why = emulator_without_model("pmc-mem-latency"); !why.empty()) throw std::runtime_error(why);
    latency_grids(o); // --min 0, --max below --min, a range with no size in it: usage errors now, not after pinning
    probe_output_dir(common.out);

    std::string pin_note = "Not pinned (--no-pin)";
    if (common.pin()) pin_to_cpu(cpu, pin_note);
    Clock clock;
    Progress progress(common.quiet);
    const MachineFacts machine = machine_facts();
    progress.note("pmc-mem-latency: " + pin_note + "; " + clock.cycles_note());
    LatencyResult r = run_latency(o, clock, progress, pin_note);
    check_latency(r, machine); // the levels against what the CPU reports, and whether the machine was busy
    const Written w = save_latency(common.out, r, machine, common.plot());

    std::printf("Levels found in the %s-chain latency curve (%u runs per size), beside what the CPU "
                "reports:\n\n%s\n",
                chain_name(r.regimes_chain), r.options.reps, regimes_text(r.regimes, machine).c_str());
    std::printf("loop overhead: %.4f ns per load (an empty loop of the same trip count) = %.2g %% of an L1 hit "
                "(%.3g ns); %s; %s\n",
                r.loop_ns_per_load, 100 * r.loop_ns_per_load / r.l1_ns_per_load, r.l1_ns_per_load, pin_note.c_str(),
                r.pages_note.c_str());
    print_written(w);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (...) {
        return pmc_mem::report_exception("pmc-mem-latency");
    }
}
