// The reads whose machine code tests/system/test_hot_path.cpp inspects (and docs/hot-path.md shows): one
// out-of-line function per counter flavour, compiled with -O2 and without sanitizers (see tests/CMakeLists.txt).
#include <pmc/counter.hpp>

#define PMC_HOT extern "C" __attribute__((noinline, used))

using RdpmcCounter = pmc::BasicCounter<pmc::serialize::lfence, pmc::source::rdpmc>;
using Rdpmc48Counter = pmc::BasicCounter<pmc::serialize::lfence, pmc::source::rdpmc, pmc::width::fixed<48>>;
using WallTimeCounter = pmc::BasicCounter<pmc::serialize::lfence, pmc::source::wall_time>;
using TscCounter = pmc::BasicCounter<pmc::serialize::lfence, pmc::source::tsc>;

PMC_HOT std::uint64_t pmc_hot_read_counter(pmc::Counter& c) { return c.read(); }
PMC_HOT std::uint64_t pmc_hot_read_rdpmc(RdpmcCounter& c) { return c.read(); }
PMC_HOT std::uint64_t pmc_hot_read_rdpmc_fixed48(Rdpmc48Counter& c) { return c.read(); }
PMC_HOT std::uint64_t pmc_hot_read_wall_time(WallTimeCounter& c) { return c.read(); }
PMC_HOT std::uint64_t pmc_hot_read_tsc(TscCounter& c) { return c.read(); }
