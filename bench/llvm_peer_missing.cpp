// SPDX-License-Identifier: MIT
// Stands in for llvm_peer.cpp where CMake found no LLVM 14: pmc-bench-profiler skips the peer and says why.
#include <cstdint>
#include <string>

namespace pmc_bench {
std::string llvm_peer_missing() {
    return "libLLVM 14 was not found when pmc was configured (Debian: apt-get install llvm-14-dev, or "
           "scripts/install-deps), so llvm::TimeTraceScope is not measured";
}
double llvm_time_trace_ns(std::uint64_t, int) { return 0; }
} // namespace pmc_bench
