// SPDX-License-Identifier: MIT
// libLLVM's TimeTraceScope (-ftime-trace's profiler), the peer pmc-bench-profiler measures beside pmc's scopes.
// Compiled only where CMake found LLVM 14 (Debian's llvm-14-dev); elsewhere llvm_peer_missing.cpp says why.
#include <llvm/Support/TimeProfiler.h>

#include <time.h>

#include <cstdint>
#include <string>

namespace pmc_bench {

std::string llvm_peer_missing() { return ""; }

/// Nanoseconds per scope: `n` empty TimeTraceScopes on this thread, the profiler recording every one
/// (granularity 0), best of `rounds`.
double llvm_time_trace_ns(std::uint64_t n, int rounds) {
    double best = 1e300;
    for (int r = 0; r < rounds; ++r) {
        llvm::timeTraceProfilerInitialize(0, "pmc-bench-profiler");
        timespec a{}, b{};
        ::clock_gettime(CLOCK_MONOTONIC, &a);
        for (std::uint64_t i = 0; i < n; ++i) {
            llvm::TimeTraceScope scope("query");
            asm volatile("" ::: "memory");
        }
        ::clock_gettime(CLOCK_MONOTONIC, &b);
        llvm::timeTraceProfilerCleanup();
        const double ns = static_cast<double>(b.tv_sec - a.tv_sec) * 1e9 + static_cast<double>(b.tv_nsec - a.tv_nsec);
        if (ns / static_cast<double>(n) < best) best = ns / static_cast<double>(n);
    }
    return best;
}

} // namespace pmc_bench
