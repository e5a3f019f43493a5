// pmc-bench-profiler: what recording one interval with pmc::Profiler costs, beside its floor (two bare counter
// reads) and a peer (libLLVM's TimeTraceScope, -ftime-trace's profiler), measured in the same run; the bytes per
// event on disk; recording throughput with 1 and 2 threads. Printed figures, not a test.
#include <pmc/counter.hpp>
#include <pmc/profiler.hpp>

#include <fmt/format.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
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
Each figure is the best of several rounds of a loop of empty scopes, minus the empty loop. The
row "pages to /dev/null" is the recording alone (compared with two reads measured beside it):
the difference from the row above is what the kernel takes to append the pages to the file.
Quote ratios from one run: absolute figures vary from machine to machine and run to run.

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

/// Best ns per iteration of `body` run `n` times, over `rounds` rounds.
template <class F>
double best_ns(std::uint64_t n, int rounds, F&& body) {
    double best = 1e300;
    for (int r = 0; r < rounds; ++r) {
        const double a = now_ns();
        for (std::uint64_t i = 0; i < n; ++i) body();
        const double b = now_ns();
        best = std::min(best, (b - a) / static_cast<double>(n));
    }
    return best;
}

std::uint64_t file_size(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

} // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string dir;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "-h" || a == "--help") {
            fmt::print("{}", help);
            return 0;
        } else if (a == "--quick") quick = true;
        else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
        else {
            fmt::print(stderr, "pmc-bench-profiler: unknown argument '{}'\nRun 'pmc-bench-profiler --help' for usage.\n", a);
            return 1;
        }
    }
    bool remove_dir = false;
    if (dir.empty()) {
        char tmpl[] = "/tmp/pmc-bench-profiler-XXXXXX";
        if (!::mkdtemp(tmpl)) {
            fmt::print(stderr, "pmc-bench-profiler: cannot create a directory under /tmp for the profiles\n");
            return 1;
        }
        dir = tmpl;
        remove_dir = true;
    }
    const std::uint64_t n = quick ? 200000 : 2000000;
    const int rounds = quick ? 3 : 7;
    volatile std::uint64_t sink = 0;

    const double empty = best_ns(n, rounds, [] { asm volatile("" ::: "memory"); });

    pmc::Profiler off;
    const pmc::Label off_label = off.label("query");
    const double off_ns = best_ns(n, rounds, [&] {
        auto s = off.scope(off_label);
        asm volatile("" ::: "memory");
    });

    const std::string on_path = dir + "/wall-time.pmcprof";
    double on_ns = 0, two_reads = 0;
    std::uint64_t on_events = 0;
    std::vector<double> costs;
    {
        pmc::Profiler on{pmc::ProfilerOptions{on_path, {"wall-time"}}};
        const pmc::Label label = on.label("query");
        on_ns = best_ns(n, rounds, [&] {
            auto s = on.scope(label);
            asm volatile("" ::: "memory");
        });
        on_events = n * static_cast<std::uint64_t>(rounds);
        pmc::Counter wall{"wall-time"};
        two_reads = best_ns(n, rounds, [&] {
            const std::uint64_t a = wall.read();
            const std::uint64_t b = wall.read();
            sink = sink + (b - a);
        });
    }
    const std::uint64_t on_bytes = file_size(on_path);

    // The same with its pages written to /dev/null: the recording alone, without the kernel's cost of appending 24
    // bytes per interval to a file (page-cache pages allocated and filled: most of the difference on our VMs).
    double null_ns = 0, null_reads = 0;
    {
        pmc::ProfilerOptions o{"/dev/null", {"wall-time"}};
        o.measure_cost = false;
        pmc::Profiler nul{o};
        const pmc::Label label = nul.label("query");
        pmc::Counter wall{"wall-time"};
        null_ns = best_ns(n, rounds, [&] {
            auto s = nul.scope(label);
            asm volatile("" ::: "memory");
        });
        null_reads = best_ns(n, rounds, [&] {
            const std::uint64_t a = wall.read();
            const std::uint64_t b = wall.read();
            sink = sink + (b - a);
        });
    }

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

    const std::string llvm_missing = pmc_bench::llvm_peer_missing();
    const std::uint64_t llvm_n = quick ? 100000 : 500000; // it keeps every entry in memory until written
    const double llvm_ns = llvm_missing.empty() ? pmc_bench::llvm_time_trace_ns(llvm_n, rounds) : 0;

    // A count read with read(2) per boundary: the syscall dominates (no PMU here for rdpmc).
    const std::string pf_path = dir + "/page-faults.pmcprof";
    double pf_ns = 0, pf_reads = 0;
    {
        pmc::ProfilerOptions o{pf_path, {"page-faults"}};
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const pmc::Label label = prof.label("query");
        const std::uint64_t m = n / 10;
        pf_ns = best_ns(m, rounds, [&] {
            auto s = prof.scope(label);
            asm volatile("" ::: "memory");
        });
        pmc::Counter faults{"page-faults"};
        pf_reads = best_ns(m, rounds, [&] {
            const std::uint64_t a = faults.read();
            const std::uint64_t b = faults.read();
            sink = sink + (b - a);
        });
    }

    fmt::print("pmc-bench-profiler: {} intervals per round, best of {} rounds, empty loop ({:.1f} ns) subtracted\n",
               n, rounds, empty);
    fmt::print("cpu: {}\n\n", pmc::this_cpu().description());
    fmt::print("{:<58} {:>12} {:>14}\n", "per interval (one scope, begin + end)", "ns", "vs two reads");
    auto row = [&](const std::string& what, double ns, double floor) {
        fmt::print("{:<58} {:>12.1f} {:>14}\n", what, ns - empty,
                   floor > 0 ? fmt::format("{:+.1f} ns", (ns - empty) - (floor - empty)) : std::string("-"));
    };
    row("pmc profiler off (from_env without PMC_PROFILE)", off_ns, 0);
    row("two bare wall-time reads (pmc::Counter, the floor)", two_reads, 0);
    row("pmc profiler on, wall-time", on_ns, two_reads);
    row("pmc profiler on, wall-time, pages to /dev/null", null_ns, null_reads);
    if (llvm_missing.empty())
        row("llvm::TimeTraceScope (libLLVM 14, granularity 0)", llvm_ns, two_reads);
    else
        fmt::print("{:<58} {:>12} {:>14}\n", "llvm::TimeTraceScope", "skipped", "-");
    row("two bare page-faults reads (read(2): no rdpmc for it)", pf_reads, 0);
    row("pmc profiler on, page-faults", pf_ns, pf_reads);
    fmt::print("\non disk: {:.2f} bytes per interval with one counter ({} bytes for {} intervals, headers and pages "
               "included)\n",
               on_events ? static_cast<double>(on_bytes) / static_cast<double>(on_events) : 0.0, on_bytes, on_events);
    fmt::print("throughput, wall-time: {:.1f} M intervals/s with 1 thread, {:.1f} M/s with 2 threads (each its own "
               "pages)\n",
               one_thread / 1e6, two_threads / 1e6);
    if (llvm_missing.empty())
        fmt::print("TimeTraceScope / pmc profiler on: {:.1f}x\n", (llvm_ns - empty) / (on_ns - empty));
    else
        fmt::print("llvm::TimeTraceScope skipped: {}\n", llvm_missing);
    if (remove_dir) std::system(("rm -rf '" + dir + "'").c_str());
    return static_cast<int>(sink & 0);
}
