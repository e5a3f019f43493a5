// SPDX-License-Identifier: MIT
// The profiler with an exact instruction counter (hardware suite: needs a PMU; on our machines the QEMU PMU machine,
// scripts/qemu-pmu). Every scope's value is a count, so what recording costs is a constant for given machine code:
// the header's cost_in_scope (what an empty scope records) and cost_to_parent (what a scope adds to its enclosing
// scope) must be what the scopes recorded here show, to within what inlining into other code changes.
#include "catch.hpp"

#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

/// Exactly 2 * n user-mode instructions (as known_loop in test_hardware.cpp), n >= 1.
__attribute__((noinline)) void profiled_loop(std::uint64_t n) {
#if PMC_ARCH_X86_64
    asm volatile("1:\n\tdec %0\n\tjnz 1b" : "+r"(n) : : "cc");
#elif PMC_ARCH_AARCH64
    asm volatile("1:\n\tsubs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
#else
#error "needs a known instruction loop for this architecture"
#endif
}

/// The most frequent value and the share of values equal to it.
std::pair<std::uint64_t, double> mode(const std::vector<std::uint64_t>& v) {
    std::map<std::uint64_t, std::size_t> count;
    for (auto x : v) ++count[x];
    std::pair<std::uint64_t, std::size_t> best{0, 0};
    for (auto& [value, n] : count)
        if (n > best.second) best = {value, n};
    return {best.first, v.empty() ? 0.0 : static_cast<double>(best.second) / static_cast<double>(v.size())};
}

// Parents with `children` empty child scopes, or the same loop with no scope in it: the difference per child is
// what one scope adds to its parent. Not inlined, so that both are compiled once, as a program's code would be.
__attribute__((noinline)) void parent_with_children(pmc::Profiler& prof, pmc::Label parent, pmc::Label child,
                                                    int children) {
    auto p = prof.scope(parent);
    for (int k = 0; k < children; ++k) {
        auto c = prof.scope(child);
        pmc::detail::compiler_barrier();
    }
}
__attribute__((noinline)) void parent_without_children(pmc::Profiler& prof, pmc::Label parent, int children) {
    auto p = prof.scope(parent);
    for (int k = 0; k < children; ++k) {
        pmc::detail::compiler_barrier();
        pmc::detail::compiler_barrier();
    }
}
__attribute__((noinline)) void scope_around_loop(pmc::Profiler& prof, pmc::Label label, std::uint64_t n) {
    auto s = prof.scope(label);
    profiled_loop(n);
}

/// The calling thread's context switches so far (voluntary and not).
long context_switches() {
    rusage u{};
    ::getrusage(RUSAGE_THREAD, &u);
    return u.ru_nvcsw + u.ru_nivcsw;
}

} // namespace

TEST_CASE("profiler with instructions:u: instructions per recorded interval, and the header's costs are what "
          "scopes add (to within inlining)",
          "[hardware][profiler]") {
    char tmpl[] = "/tmp/pmc-profiler-hw-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string path = std::string(tmpl) + "/hw.pmcprof";
    constexpr int rounds = 2000, children = 16;
    constexpr std::uint64_t loop = 1000;
    // The thread's context switches by the end of each round (read between rounds, outside every scope): after
    // one, the kernel has rewritten the counter's page (a new offset, maybe another counter) and the next mrs
    // read takes the re-caching path, whose extra instructions land in the intervals around it.
    std::vector<long> switches(rounds + 1);
    {
        pmc::ProfilerOptions o{path, {"instructions:u"}};
        o.page_bytes = 4 << 20; // one page for everything: no page write inside a scope
        pmc::Profiler prof{o};
        const auto with = prof.label("with"), without = prof.label("without"), child = prof.label("child");
        const auto empty = prof.label("empty"), looped = prof.label("loop");
        switches[0] = context_switches();
        for (int r = 0; r < rounds; ++r) {
            parent_with_children(prof, with, child, children);
            parent_without_children(prof, without, children);
            scope_around_loop(prof, empty, 1);
            scope_around_loop(prof, looped, loop + 1);
            switches[static_cast<std::size_t>(r) + 1] = context_switches();
        }
    }
    auto read = pmc::read_profile(path);
    std::remove(path.c_str());
    ::rmdir(tmpl);
    REQUIRE(read.ok());
    const pmc::Profile& p = *read;
    REQUIRE(p.problems.empty());
    REQUIRE(p.counters.size() == 1);
    const pmc::ProfileCounter& counter = p.counters[0];
    CHECK(counter.exact());
    std::map<std::string, std::vector<std::uint64_t>> values;
    for (const auto& t : p.threads)
        for (const auto& r : t.records)
            if (r.kind == pmc::profile_format::RecordKind::interval)
                values[p.string(r.label)].push_back(p.values[r.first_value + 1] - p.values[r.first_value]);
    REQUIRE(values["with"].size() == rounds);
    REQUIRE(values["child"].size() == rounds * children);

    const auto [child_value, child_share] = mode(values["child"]);
    const auto [with_value, with_share] = mode(values["with"]);
    const auto [without_value, without_share] = mode(values["without"]);
    const auto [empty_value, empty_share] = mode(values["empty"]);
    const auto [loop_value, loop_share] = mode(values["loop"]);
    const double added = static_cast<double>(with_value - without_value) / children;
    std::printf("profiler, instructions:u read with %s: an empty scope records %llu instructions (header: %.3f), "
                "one scope adds %.3f to its parent (header: %.3f)\n",
                counter.read_path.c_str(), static_cast<unsigned long long>(child_value), counter.cost_in_scope, added,
                counter.cost_to_parent);
    std::printf("  shares at the mode: child %.4f, parent with %d children %.4f, without %.4f, scope around a "
                "1-iteration loop %.4f, around a %llu-iteration loop %.4f\n",
                child_share, children, with_share, without_share, empty_share,
                static_cast<unsigned long long>(loop + 1), loop_share);
    // Exact counts: the same value in every interval of a round in which the thread was not rescheduled. After a
    // context switch the kernel has rewritten the counter's page and the next mrs read re-caches it: in the QEMU
    // guest, rounds with a switch in their window or the one before (a switch during the previous round's
    // getrusage) showed +16 to +79 in the parent or +39 in the loop; none without. The read() path never varies.
    // (So no share at the mode is asked: 3 switches landing in parents make it 0.9985, 4 made it 0.998.)
    const std::map<std::string, std::uint64_t> modes{
        {"child", child_value}, {"with", with_value}, {"without", without_value}, {"empty", empty_value},
        {"loop", loop_value}};
    int varied_rounds = 0, unexplained = 0, rescheduled_rounds = 0;
    for (int r = 0; r < rounds; ++r) {
        const auto at = static_cast<std::size_t>(r);
        rescheduled_rounds += switches[at + 1] != switches[at];
        bool varied = false;
        for (const auto& [label, value] : modes) {
            if (label == "child") {
                for (int k = 0; k < children; ++k)
                    varied |= values["child"][at * children + static_cast<std::size_t>(k)] != value;
            } else {
                varied |= values[label][at] != value;
            }
        }
        if (!varied) continue;
        ++varied_rounds;
        const bool rescheduled = switches[at + 1] != switches[at] || (r > 0 && switches[at] != switches[at - 1]);
        if (!rescheduled) ++unexplained;
        std::printf("  round %d differs (parent %+lld, without %+lld, loop %+lld): %s\n", r,
                    static_cast<long long>(values["with"][at] - with_value),
                    static_cast<long long>(values["without"][at] - without_value),
                    static_cast<long long>(values["loop"][at] - loop_value),
                    rescheduled ? "the thread was rescheduled then" : "NOT rescheduled");
    }
    std::printf("  %d of %d rounds differ somewhere; %d rounds saw a context switch; %d differ without one\n",
                varied_rounds, rounds, rescheduled_rounds, unexplained);
    // On x86 an interrupt may add to a :u count too (its iret): 0.1 % of the rounds may differ unexplained there.
    CHECK(unexplained <= (PMC_ARCH_X86_64 ? rounds / 1000 : 0));
    // Something left to judge: the kernel left the thread alone in at least 99 % of the rounds (pinned, the other
    // vCPU idle: 0 to 3 switches in 2,000 rounds seen).
    CHECK(rescheduled_rounds <= rounds / 100);
    // What the header says recording costs is what these scopes show, to within what inlining changes: the profiler
    // measures its own loop of scopes at start, and a program's compiler inlines the same scope into other code
    // (other registers, spills). Seen in the QEMU guest: read() path 91 = 91 in the scope and 217.0 vs 215.9 added
    // to the parent; mrs path 43 vs 49 and 120.0 vs 130.9. So: within 8 instructions and 10 %.
    const double in_scope = static_cast<double>(child_value);
    CHECK(std::fabs(counter.cost_in_scope - in_scope) <= 8);
    CHECK(std::fabs(counter.cost_to_parent - added) <= std::max(8.0, 0.10 * added));
    CHECK(counter.cost_to_parent > 0);
    // A scope's value is its body's instructions plus that constant: 2 per iteration of the loop, exactly.
    CHECK(loop_value - empty_value == 2 * loop);
}
