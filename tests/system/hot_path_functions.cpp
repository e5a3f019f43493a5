// SPDX-License-Identifier: MIT
// The reads whose machine code tests/system/test_hot_path.cpp inspects (and docs/hot-path.md shows): one
// out-of-line function per counter flavour, compiled with -O2 and without sanitizers (see tests/CMakeLists.txt).
#include <pmc/counter.hpp>
#include <pmc/group.hpp>
#include <pmc/profiler.hpp>

#include <sched.h>
#include <unistd.h>

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
PMC_HOT void pmc_hot_read_group(pmc::Group& g, pmc::GroupReading& r) { g.read(r); }
// The profiler's interval (a scope's begin and end): on, two reads of its counter and a record stored; off, a branch.
PMC_HOT void pmc_hot_profiler_scope(pmc::Profiler& p, pmc::Label l) {
    auto s = p.scope(l);
    asm volatile("" ::: "memory");
}

// Broken reads, for the check's own test: what test_hot_path.cpp must reject.
// read() replaced by read_slow (one read(2) per call), as a tail jump and as a call.
PMC_HOT std::uint64_t pmc_mutant_read_slow_tail(pmc::detail::CounterCore& c) { return pmc::detail::read_slow(c); }
PMC_HOT std::uint64_t pmc_mutant_read_slow_call(pmc::detail::CounterCore& c) { return pmc::detail::read_slow(c) + 1; }
// A system call (through libc) before the rdpmc.
PMC_HOT std::uint64_t pmc_mutant_getpid_first(RdpmcCounter& c) {
    if (::getpid() == 1) return 0;
    return c.read();
}
// A libc call on a branch after the rdpmc (the fast path itself is clean).
PMC_HOT std::uint64_t pmc_mutant_libc_call(RdpmcCounter& c) {
    const std::uint64_t v = c.read();
    if (v == 12345) ::sched_yield();
    return v;
}
// A scope whose label is interned per call (a lock and an allocation each time: what Profiler::label says not to do).
PMC_HOT void pmc_mutant_profiler_scope_label(pmc::Profiler& p) {
    auto s = p.scope(p.label("per call"));
    asm volatile("" ::: "memory");
}
