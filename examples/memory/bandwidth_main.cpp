// SPDX-License-Identifier: MIT
// pmc-mem-bandwidth: how many bytes per second one core (or several) reads, writes, reads-modifies-writes and
// copies, against the working-set size, so that each cache level's bandwidth and the memory's show.
//
// How: each kernel is a loop written in assembly (so the compiler neither vectorizes the scalar loops nor turns
// them into memset/memcpy): 8-byte scalar accesses, the widest vector accesses the CPU has (AVX-512 or AVX2),
// non-temporal stores, and libc's memcpy/memset on the same buffers. A run makes as many passes over the working
// set as fill about --run-ms (0.5 ms: short runs miss most of a VM's periodic interruptions), timed with pmc's
// wall-time counter; a warm-up pass comes first; the best and the median of --runs runs are kept. At each size
// all kernels run in turn (side by side). Bytes counted per pass over W bytes: read W, write W, rmw 2W, copy W (W/2 read +
// W/2 written, as STREAM counts), memcpy W, memset W; GB/s = 10^9 bytes per second. The thread is pinned; with
// --threads N each size is split among N threads pinned to distinct CPUs and timed from the first start to the
// last finish. memset runs twice, with a non-zero byte (memset) and with zeros (memset-0): what is written can
// change the speed (docs/memory.md); with a memset kernel, the largest size is then measured once more with the
// same stores of zeros and of other bytes (memset, rep stosb, cached and non-temporal vector stores), counting the
// page faults taken meanwhile, to show where the difference arises.
#include "bandwidth.hpp"
#include "common.hpp"
#include "latency.hpp"
#include "report.hpp"

#include <command_line.hpp>

#include <cstdio>
#include <string>

namespace {

const char* usage = R"(usage: pmc-mem-bandwidth [options]

Read, write, read-modify-write and copy bandwidth against working-set size (scalar, vector, non-temporal, and
libc memcpy/memset on the same buffers).

  --min SIZE           smallest working set (default 4K)
  --max SIZE           largest working set (default 256M; memory wants at least 4x the last cache)
  --per-octave N       points per octave (default 2)
  --kernels LIST       comma-separated subset of: read write rmw copy read-vec write-vec rmw-vec copy-vec
                       write-nt copy-nt memcpy memset memset-0 (default: all this CPU can run); memset
                       writes a non-zero byte, memset-0 zeros (as bzero does)
  --no-value-probe     with a memset kernel, do not measure zeros against other bytes at the largest size
  --threads N          split each working set among N threads on N CPUs (default 1; at most the CPUs
                       this process may run on)
  --runs N             timed runs per kernel and size (default 7); best and median are kept
  --run-ms MS          length of one run (default 0.5, but at least one pass over the working set)
  --boundaries LIST    cache sizes to mark and to summarize per level, e.g. 48K,1M,32M (from pmc-mem-latency)
  --cpu N              pin to CPU N (default: the last CPU this process may use)
  --no-pin             do not pin
  --out DIR            report folder (default pmc-memory-report)
  --no-plot            do not run gnuplot
  --quick              a short run for tests: 4K..8M, 1 point per octave, 3 runs, and (without --kernels)
                       read/write/copy-vec/memcpy/memset/memset-0; not with --min, --max, --per-octave,
                       --runs, --run-ms
  --quiet              no progress lines
  -h, --help           this text

Bytes counted per pass over a working set of W bytes: read W, write W, rmw 2W, copy W (W/2 read + W/2
written), memcpy W, memset W. GB/s = 10^9 bytes per second. With a memset kernel (and one thread), the
largest size is measured again with zeros and with other bytes, by memset, rep stosb, and cached and
non-temporal vector stores, with the page faults taken meanwhile (value_dependence in bandwidth.json). Writes DIR/bandwidth.csv, bandwidth.json and
bandwidth.png (.svg, and the gnuplot script).

Under pmc emulate (--cache too) it measures nothing, since bytes per second there are the emulator's: it
says so and exits with status 1, writing no report.
)";

std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= list.size()) {
        const auto comma = list.find(',', start);
        const std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
        if (!item.empty()) out.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

int run(int argc, char** argv) {
    using namespace pmc_mem;
    BandwidthOptions o;
    CommonOptions common;
    std::optional<Regimes> regimes;
    std::string min_text, max_text, per_octave_text, kernels_text, threads_text, runs_text, run_ms_text,
        boundaries_text;
    bool no_value_probe = false;
    pmc_cli::CommandLine cl("pmc-mem-bandwidth", usage);
    cl.option("--min", min_text, "a size such as 4K");
    cl.option("--max", max_text, "a size such as 256M");
    cl.option("--per-octave", per_octave_text, "a number of points");
    cl.option("--kernels", kernels_text, "kernel names, e.g. read,copy-vec,memcpy");
    cl.flag("--no-value-probe", no_value_probe);
    cl.option("--threads", threads_text, "a number of threads");
    cl.option("--runs", runs_text, "a number of runs");
    cl.option("--run-ms", run_ms_text, "milliseconds");
    cl.option("--boundaries", boundaries_text, "cache sizes such as 48K,1M,32M");
    common.add_to(cl, true);
    if (auto status = cl.parse(argc, argv)) return *status;
    o.value_probe = !no_value_probe;
    common.check_quick(cl, {"--min", "--max", "--per-octave", "--runs", "--run-ms"}, "the sizes and runs");
    if (!min_text.empty()) o.min_size = parse_size(min_text);
    if (!max_text.empty()) o.max_size = parse_size(max_text);
    if (!per_octave_text.empty()) o.per_octave = static_cast<unsigned>(integer_option("--per-octave", per_octave_text, 1, 64));
    if (cl.count("--kernels") > 0) {
        o.kernels = split(kernels_text);
        if (o.kernels.empty()) throw UsageError("--kernels needs kernel names, e.g. read,copy-vec,memcpy");
    }
    if (!threads_text.empty()) o.threads = static_cast<unsigned>(integer_option("--threads", threads_text, 1, 1024));
    if (!runs_text.empty()) o.reps = static_cast<unsigned>(integer_option("--runs", runs_text, 1, 1000));
    if (!run_ms_text.empty()) o.rep_ms = number_option("--run-ms", run_ms_text, 0.01, 10000);
    if (cl.count("--boundaries") > 0) regimes = regimes_from_boundaries(boundaries_text);
    const int cpu = common.cpu();
    if (common.quick) { // its kernels only where --kernels chose none (in either order)
        o.min_size = 4096;
        o.max_size = 8u << 20;
        o.per_octave = 1;
        o.reps = 3;
        o.rep_ms = 1;
        if (o.kernels.empty()) {
            o.kernels = {"read", "write", "memcpy", "memset", "memset-0"};
            if (!vector_isa().empty()) o.kernels.insert(o.kernels.begin() + 2, "copy-vec");
        }
    }
    if (o.max_size < 1024u * o.threads) throw UsageError("--max must give each thread at least 1 KiB");
    bandwidth_sizes(o); // --min 0, --max below --min, a range with no size in it: usage errors now, not after pinning
    for (const auto& name : o.kernels) { // an unknown kernel too
        bool known = false;
        for (const auto& k : available_kernels()) known = known || k.name == name;
        if (!known) {
            std::string list;
            for (const auto& k : available_kernels()) list += (list.empty() ? "" : ", ") + k.name;
            throw UsageError("unknown or unavailable kernel '" + name + "' (here: " + list + ")");
        }
    }
    if (const std::string note = not_measured_under_emulator("pmc-mem-bandwidth", "bytes per second there are the "
                                                              "emulator's speed, not memory's");
        !note.empty()) {
        std::fprintf(stderr, "%s\n", note.c_str());
        return 1;
    }
    probe_output_dir(common.out);
    // Threads that share a CPU measure the scheduler, not the memory, and their start barrier spins: refuse.
    if (o.threads > process_cpus().size())
        throw UsageError("--threads " + std::to_string(o.threads) + ": this process may run on " +
                         std::to_string(process_cpus().size()) +
                         " CPUs (its affinity mask); give at most that many threads, one per CPU");

    std::string pin_note = "Not pinned (--no-pin)";
    if (common.pin()) pin_to_cpu(cpu, pin_note);
    Clock clock;
    Progress progress(common.quiet);
    const MachineFacts machine = machine_facts();
    progress.note("pmc-mem-bandwidth: " + pin_note + "; vector kernels: " +
                  (vector_isa().empty() ? std::string("none") : vector_isa()));
    BandwidthResult r = run_bandwidth(o, clock, progress, pin_note);
    r.levels_caption = "shaded: levels given with --boundaries";
    const Written w = save_bandwidth(common.out, r, machine, regimes ? &*regimes : nullptr, common.plot());

    if (regimes) std::printf("GB/s per level (best run; median over the sizes well inside each level):\n%s\n",
                             level_bandwidth_text(bandwidth_per_level(r, *regimes)).c_str());
    std::printf("GB/s (best run) at the smallest and largest working sets:\n");
    for (const auto& c : r.curves)
        if (!c.points.empty())
            std::printf("  %-10s %7s: %7.1f   %7s: %7.1f   (%s)\n", c.kernel.name.c_str(),
                        size_label(static_cast<double>(c.points.front().size)).c_str(), c.points.front().best(),
                        size_label(static_cast<double>(c.points.back().size)).c_str(), c.points.back().best(),
                        c.kernel.description.c_str());
    if (r.values.size > 0)
        std::printf("Zeros against other bytes at %s (best GB/s):\n%s", size_text(static_cast<double>(r.values.size)).c_str(),
                    (value_probe_text(r.values) + value_probe_findings(r.values) + "\n").c_str());
    print_written(w);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (...) {
        return pmc_mem::report_exception("pmc-mem-bandwidth");
    }
}
