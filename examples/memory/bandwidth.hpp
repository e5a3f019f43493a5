// SPDX-License-Identifier: MIT
// bandwidth.hpp: the bandwidth experiment -- read, write, read-modify-write and copy loops over a working set swept
// from a few KiB to past the last cache, with scalar 8-byte accesses and with the widest vector loads and stores
// the CPU has, non-temporal stores, and libc's memcpy/memset on the same buffers.
//
// Bytes counted (per pass over a working set of W bytes): read W, write W, read-modify-write 2W (every byte read
// and written), copy W (W/2 read from one buffer, W/2 written to the other; STREAM counts the same way), memcpy
// W, memset W. What the hardware moves can be more: a cached store first reads its line (write-allocate), which
// the non-temporal kernels avoid. GB/s = 10^9 bytes per second. lmbench's bw_mem counts a copy of N bytes as N.
#pragma once

#include "common.hpp"
#include "regimes.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pmc_mem {

struct KernelInfo {
    std::string name;        ///< "read", "read-vec", "write-nt", "memcpy", ...
    std::string description; ///< what one pass does, for tables and --help
    unsigned bytes_factor;   ///< bytes counted per pass = bytes_factor * W / 2 (2: W, 4: 2W, copy: 2 -> W)
    bool copy;               ///< two buffers of W/2
};

/// The kernels this machine can run, in presentation order (vector ones only with AVX2 or AVX-512).
std::vector<KernelInfo> available_kernels();
/// The vector instruction set the *-vec and *-nt kernels use ("AVX-512", "AVX2"), or "" if none.
std::string vector_isa();
/// What one buffer of a kernel must be a multiple of (bytes), and be aligned to.
constexpr std::size_t kernel_granule() { return 512; }
/// Runs kernel `name` directly (for tests): `passes` passes over `bytes` bytes of dst/src (copy kernels read src and
/// write dst; read kernels read src; the others write dst). Read kernels return the sum of the 64-bit words read
/// over all passes, the others 0. Throws std::invalid_argument for an unknown kernel or a bad size.
std::uint64_t run_kernel(const std::string& name, char* dst, const char* src, std::size_t bytes, std::size_t passes);

struct BandwidthOptions {
    std::uint64_t min_size = 4096;
    std::uint64_t max_size = 256ull << 20;
    unsigned per_octave = 2;
    unsigned reps = 7;
    double rep_ms = 0.5; ///< short runs miss most of a VM's periodic interruptions (at least one pass, though)
    std::vector<std::string> kernels; ///< empty: all available
    unsigned threads = 1;
    bool value_probe = true; ///< with a memset kernel and one thread: measure_value_dependence at the largest size
};

struct BandwidthPoint {
    std::uint64_t size = 0;           ///< working set W (all buffers)
    std::uint64_t bytes_per_pass = 0; ///< bytes counted per pass
    std::uint64_t passes_per_run = 0;
    std::vector<double> gbps;         ///< one per timed run
    double best() const { return max_of(gbps); }
    double median() const { return median_of(gbps); }
};

struct BandwidthCurve {
    KernelInfo kernel;
    unsigned threads = 1;
    std::vector<BandwidthPoint> points;
};

/// memset is value-dependent on some machines (our Zen 3 VM: zeros about twice as fast to memory; docs/memory.md):
/// the same stores with zeros and with non-zero bytes, side by side at one size, with the page faults taken
/// meanwhile, to show where the difference arises.
struct ValueProbeRow {
    std::string method;          ///< "memset", "rep-stosb", "write-vec", "write-nt"
    std::string path;            ///< how its stores reach memory
    BandwidthPoint zeros, other; ///< other: non-zero bytes
    long long faults_zeros = -1, faults_other = -1; ///< page faults in the measurements; -1: not counted
    double ratio() const { return zeros.best() / other.best(); }
};
struct ValueProbe {
    std::uint64_t size = 0; ///< 0: not measured
    std::vector<ValueProbeRow> rows;
    std::string faults_note; ///< how page faults were counted, or why they were not
};
/// Runs each pair once (warm-up and `reps` runs each, as measure_bandwidth), zeros first, on one thread.
ValueProbe measure_value_dependence(std::uint64_t size, unsigned reps, double rep_ms, Clock& clock);
/// The probe's kernels ("memset-0", "memset", "rep-stosb-0", ...), for tests through run_kernel.
std::vector<KernelInfo> value_probe_kernels();
/// The probe as a markdown table and as plain text.
std::string value_probe_markdown(const ValueProbe& probe);
std::string value_probe_text(const ValueProbe& probe);
/// What the probe shows, in words: which stores were faster with zeros (1.15x or more), and the page faults.
std::string value_probe_findings(const ValueProbe& probe);

struct BandwidthResult {
    BandwidthOptions options;
    std::vector<BandwidthCurve> curves;
    std::string isa;
    std::string pin_note;
    std::string wall_note;
    std::string levels_caption = "shaded: levels found by the latency experiment"; ///< when levels are drawn
    ValueProbe values; ///< zeros against other bytes (options.value_probe)
    double seconds = 0;
};

/// The sizes a sweep measures. Throws UsageError for --min 0, --max below --min, or a range with no size of the
/// grid in it (the message names the range and what to change).
std::vector<std::uint64_t> bandwidth_sizes(const BandwidthOptions& options);

/// Runs every kernel over every size (throws UsageError as bandwidth_sizes() does); the calling thread should be
/// pinned already. With options.threads > 1,
/// each size is split among that many threads, each pinned to its own CPU, started together; the time is from
/// the first start to the last finish.
BandwidthResult run_bandwidth(const BandwidthOptions& options, Clock& clock, Progress& progress,
                              const std::string& pin_note);

/// One kernel at one size with `threads` threads (used by run_bandwidth and for the all-CPU memory figures).
BandwidthPoint measure_bandwidth(const KernelInfo& kernel, std::uint64_t size, unsigned threads, unsigned reps,
                                 double rep_ms, Clock& clock);

/// Bandwidth per level: for each level of `regimes` and each kernel, the median of the best GB/s over the sizes
/// well inside the level (at least twice its lower boundary, at most half its upper one; for memory at least four
/// times the last boundary, as STREAM asks). A level with no size well inside it falls back to the sizes of its
/// plateau in the latency curve (first_size..last_size; for levels from --boundaries, the sizes between its
/// boundaries), and says so (`plateau`).
struct LevelBandwidth {
    std::string level;
    double from = 0, to = 0; ///< the sizes used
    bool plateau = false;    ///< no size well inside the level: its plateau's sizes were used
    std::vector<std::pair<std::string, double>> gbps; ///< kernel -> GB/s (0: no size qualified)
};
std::vector<LevelBandwidth> bandwidth_per_level(const BandwidthResult& r, const Regimes& regimes);

std::string bandwidth_csv(const BandwidthResult& r);
void write_bandwidth_json(pmc::JsonWriter& json, const BandwidthResult& r, const MachineFacts& m,
                          const Regimes* regimes);
/// A markdown table: rows = levels, columns = kernels.
std::string level_bandwidth_markdown(const std::vector<LevelBandwidth>& levels);
/// The same as plain text.
std::string level_bandwidth_text(const std::vector<LevelBandwidth>& levels);
/// Parses "48K,1M,32M" into a Regimes with levels L1.. and memory (for --boundaries).
Regimes regimes_from_boundaries(const std::string& list);

} // namespace pmc_mem
