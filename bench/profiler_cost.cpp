// SPDX-License-Identifier: MIT
// pmc-bench-profiler: what recording one interval with pmc::Profiler costs, beside its floor (two bare counter
// reads) and a peer (libLLVM's TimeTraceScope, -ftime-trace's profiler), measured in the same run; the bytes per
// event on disk; recording throughput with 1 and 2 threads. Printed figures, not a test.
#include <pmc/counter.hpp>
#include <pmc/profiler.hpp>

#include <command_line.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace pmc_bench {
std::string llvm_peer_missing();
double llvm_time_trace_ns(std::uint64_t n, int rounds);
} // namespace pmc_bench

namespace {

constexpr const char* help = R"(usage: pmc-bench-profiler [--quick] [--dir DIR]

What recording one interval (a scope) with pmc::Profiler costs in wall time, on and off, beside
two bare reads of the same counter (the floor: a scope reads its counter twice) and beside
libLLVM's llvm::TimeTraceScope (-ftime-trace's profiler, recording every scope) measured in the
same run; the bytes each event takes on disk; and recording throughput with 1 and 2 threads.
In each round every row runs once, one after the other (the two file rows alternate their
order), so that changes in the machine's load reach them alike; each figure is the median over
the rounds of a loop of empty scopes, minus the empty loop (beside it the best round, and the
median of this thread's CPU time, system calls included: on a loaded machine the steadier
figure). Two rows write a file: with the default preallocation (file blocks reserved
8 MiB ahead of the end, ProfilerOptions::preallocate_bytes) and without it. The row "pages to
/dev/null" is the recording alone: the difference from a file row is what the kernel takes to
append the pages to the file. Quote ratios from one run: absolute figures vary from machine to
machine and run to run.

Options:
  --quick     Fewer iterations (a smoke run; noisier figures).
  --dir DIR   Where the profiles are written (default: a new directory under /tmp, removed after).
  -h, --help  Show this help.
)";

double now_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

double thread_cpu_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

/// One row's rounds: ns per iteration in wall time and in this thread's CPU time (system calls included).
struct Series {
    std::vector<double> wall, cpu;
};

/// One round: `body` run `n` times.
template <class F>
void round(Series& s, std::uint64_t n, F&& body) {
    const double c = thread_cpu_ns(), a = now_ns();
    for (std::uint64_t i = 0; i < n; ++i) body();
    const double b = now_ns(), d = thread_cpu_ns();
    s.wall.push_back((b - a) / static_cast<double>(n));
    s.cpu.push_back((d - c) / static_cast<double>(n));
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}
double best(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

/// A file's size and the bytes of disk blocks it holds.
struct FileBlocks {
    std::uint64_t size = 0, allocated = 0;
};
FileBlocks file_blocks(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    return {static_cast<std::uint64_t>(st.st_size), static_cast<std::uint64_t>(st.st_blocks) * 512};
}

} // namespace

static int run(int argc, char** argv) {
    bool quick = false;
    std::string dir;
    pmc_cli::CommandLine command_line("pmc-bench-profiler", help);
    command_line.flag("--quick", quick);
    command_line.option("--dir", dir, "a directory for the profiles");
    if (auto status = command_line.parse(argc, argv)) return *status;
    if (command_line.count("--dir") > 0 && dir.empty())
        return command_line.usage_error("--dir needs a directory for the profiles, not ''");
    bool remove_dir = false;
    if (!dir.empty()) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            fmt::print(stderr, "pmc-bench-profiler: --dir {}: {}; give an existing directory, or leave --dir out\n", dir,
                       ::stat(dir.c_str(), &st) != 0 ? "no such directory" : "not a directory");
            return 1;
        }
    } else {
        char tmpl[] = "/tmp/pmc-bench-profiler-XXXXXX";
        if (!::mkdtemp(tmpl)) {
            fmt::print(stderr, "pmc-bench-profiler: cannot create a directory under /tmp for the profiles\n");
            return 1;
        }
        dir = tmpl;
        remove_dir = true;
    }
    const std::uint64_t n = quick ? 200000 : 2000000;
    const int rounds = quick ? 3 : 11;
    volatile std::uint64_t sink = 0;

    // The main rows run in the same rounds, one after the other in each (alternating the two file rows' order), so
    // that a change in the machine's load reaches them all alike; every profiler is open throughout.
    pmc::Profiler off;
    const pmc::Label off_label = off.label("query");
    const std::string on_path = dir + "/wall-time.pmcprof", plain_path = dir + "/wall-time-plain.pmcprof";
    std::optional<pmc::Profiler> on{pmc::ProfilerOptions{on_path, {"wall-time"}}}; // the defaults: preallocated
    pmc::ProfilerOptions plain_options{plain_path, {"wall-time"}};
    plain_options.preallocate_bytes = 0;
    plain_options.measure_cost = false;
    std::optional<pmc::Profiler> plain{plain_options};
    // The pages written to /dev/null: the recording alone, without the kernel's cost of appending its bytes per
    // interval to a file (page-cache pages allocated and filled, file blocks allocated).
    pmc::ProfilerOptions null_options{"/dev/null", {"wall-time"}};
    null_options.measure_cost = false;
    std::optional<pmc::Profiler> nul{null_options};
    const pmc::Label on_label = on->label("query"), plain_label = plain->label("query"), null_label = nul->label("query");
    pmc::Counter wall{"wall-time"};
    // A count read with read(2) per boundary: the system call dominates (no PMU here for rdpmc).
    pmc::ProfilerOptions pf_options{dir + "/page-faults.pmcprof", {"page-faults"}};
    pf_options.measure_cost = false;
    std::optional<pmc::Profiler> pf{pf_options};
    const pmc::Label pf_label = pf->label("query");
    pmc::Counter faults{"page-faults"};
    const std::uint64_t m = n / 10;
    const std::string llvm_missing = pmc_bench::llvm_peer_missing();
    const std::uint64_t llvm_n = quick ? 100000 : 500000; // it keeps every entry in memory until written

    Series empty_s, off_s, reads_s, on_s, plain_s, null_s, llvm_s, pf_reads_s, pf_s;
    for (int r = 0; r < rounds; ++r) {
        round(empty_s, n, [] { asm volatile("" ::: "memory"); });
        round(off_s, n, [&] {
            auto s = off.scope(off_label);
            asm volatile("" ::: "memory");
        });
        round(reads_s, n, [&] {
            const std::uint64_t a = wall.read();
            const std::uint64_t b = wall.read();
            sink = sink + (b - a);
        });
        auto on_round = [&] {
            round(on_s, n, [&] {
                auto s = on->scope(on_label);
                asm volatile("" ::: "memory");
            });
        };
        auto plain_round = [&] {
            round(plain_s, n, [&] {
                auto s = plain->scope(plain_label);
                asm volatile("" ::: "memory");
            });
        };
        if (r % 2 == 0) on_round(), plain_round();
        else plain_round(), on_round();
        round(null_s, n, [&] {
            auto s = nul->scope(null_label);
            asm volatile("" ::: "memory");
        });
        if (llvm_missing.empty()) llvm_s.wall.push_back(pmc_bench::llvm_time_trace_ns(llvm_n, 1)); // (no CPU time)
        round(pf_reads_s, m, [&] {
            const std::uint64_t a = faults.read();
            const std::uint64_t b = faults.read();
            sink = sink + (b - a);
        });
        round(pf_s, m, [&] {
            auto s = pf->scope(pf_label);
            asm volatile("" ::: "memory");
        });
    }
    const std::uint64_t on_events = n * static_cast<std::uint64_t>(rounds);
    on.reset();
    plain.reset();
    nul.reset();
    pf.reset();
    const FileBlocks on_file = file_blocks(on_path), plain_file = file_blocks(plain_path);

    // Throughput: every thread records its own scopes into its own pages.
    auto throughput = [&](int threads) {
        const std::string path = dir + "/threads" + std::to_string(threads) + ".pmcprof";
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const pmc::Label label = prof.label("query");
        const std::uint64_t per_thread = n;
        std::vector<std::thread> pool;
        const double a = now_ns();
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&] {
                for (std::uint64_t i = 0; i < per_thread; ++i) {
                    auto s = prof.scope(label);
                    asm volatile("" ::: "memory");
                }
            });
        for (auto& t : pool) t.join();
        const double b = now_ns();
        return static_cast<double>(per_thread) * threads / ((b - a) / 1e9);
    };
    const double one_thread = throughput(1), two_threads = throughput(2);

    const double empty = median(empty_s.wall), empty_cpu = median(empty_s.cpu);
    fmt::print("pmc-bench-profiler: {} intervals per round ({} for page-faults), {} rounds, every row once per round; "
               "medians (and the best round), empty loop ({:.1f} ns) subtracted\n",
               n, m, rounds, empty);
    fmt::print("cpu: {}\n\n", pmc::this_cpu().description());
    fmt::print("{:<62} {:>9} {:>13} {:>8} {:>8}\n", "per interval (one scope, begin + end)", "ns", "vs two reads", "best",
               "CPU ns");
    auto row = [&](const std::string& what, const Series& x, const Series* floor) {
        const double ns = median(x.wall) - empty;
        fmt::print("{:<62} {:>9.1f} {:>13} {:>8.1f} {:>8}\n", what, ns,
                   floor ? fmt::format("{:+.1f} ns", ns - (median(floor->wall) - empty)) : std::string("-"),
                   best(x.wall) - best(empty_s.wall),
                   x.cpu.empty() ? std::string("-") : fmt::format("{:.1f}", median(x.cpu) - empty_cpu));
    };
    row("pmc profiler off (from_env without PMC_PROFILE)", off_s, nullptr);
    row("two bare wall-time reads (pmc::Counter, the floor)", reads_s, nullptr);
    row("pmc profiler on, wall-time (file, preallocated: the default)", on_s, &reads_s);
    row("pmc profiler on, wall-time (file, preallocate_bytes = 0)", plain_s, &reads_s);
    row("pmc profiler on, wall-time, pages to /dev/null", null_s, &reads_s);
    if (llvm_missing.empty())
        row("llvm::TimeTraceScope (libLLVM 14, granularity 0)", llvm_s, &reads_s);
    else
        fmt::print("{:<62} {:>9} {:>13}\n", "llvm::TimeTraceScope", "skipped", "-");
    row("two bare page-faults reads (read(2): no rdpmc for it)", pf_reads_s, nullptr);
    row("pmc profiler on, page-faults", pf_s, &pf_reads_s);

    const double append_plain = median(plain_s.wall) - median(null_s.wall);
    const double append_on = median(on_s.wall) - median(null_s.wall);
    fmt::print("\nCPU ns: this thread's CPU time, its system calls included (what the load of others does not "
               "inflate); the kernel threads' later writeback of the pages is not in it\n");
    fmt::print("the file's append per interval (file row minus /dev/null row): {:.1f} ns preallocated, {:.1f} ns "
               "without (CPU: {:.1f}, {:.1f})\n",
               append_on, append_plain, median(on_s.cpu) - median(null_s.cpu), median(plain_s.cpu) - median(null_s.cpu));
    fmt::print("on disk: {:.2f} bytes per interval with one counter ({} bytes for {} intervals, headers and pages "
               "included); blocks held after the profiler ended: {} KiB preallocated, {} KiB without\n",
               on_events ? static_cast<double>(on_file.size) / static_cast<double>(on_events) : 0.0, on_file.size,
               on_events, on_file.allocated / 1024, plain_file.allocated / 1024);
    fmt::print("throughput, wall-time: {:.1f} M intervals/s with 1 thread, {:.1f} M/s with 2 threads (each its own "
               "pages)\n",
               one_thread / 1e6, two_threads / 1e6);
    if (llvm_missing.empty())
        fmt::print("TimeTraceScope / pmc profiler on: {:.1f}x\n", (median(llvm_s.wall) - empty) / (median(on_s.wall) - empty));
    else
        fmt::print("llvm::TimeTraceScope skipped: {}\n", llvm_missing);
    if (remove_dir) std::system(("rm -rf '" + dir + "'").c_str());
    return static_cast<int>(sink & 0);
}

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) { // an unwritable directory, a full disk: one line, not an abort
        const std::string what = e.what();
        fmt::print(stderr, "pmc-bench-profiler: {}\n", what.substr(0, what.find('\n')));
        return 1;
    }
}
