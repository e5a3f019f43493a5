// SPDX-License-Identifier: MIT
// The profiler with an exact instruction counter (hardware suite: needs a PMU; on our machines the QEMU PMU machine,
// scripts/qemu-pmu). Every scope's value is a count, so what recording costs is a constant for given machine code:
// the header's cost_in_scope (what an empty scope records) and cost_to_parent (what a scope adds to its enclosing
// scope) must be what the scopes recorded here show, to within what inlining into other code changes.
#include "catch.hpp"

#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>

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

} // namespace

TEST_CASE("profiler with instructions:u: instructions per recorded interval, and the header's costs are what "
          "scopes add (to within inlining)",
          "[hardware][profiler]") {
    char tmpl[] = "/tmp/pmc-profiler-hw-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string path = std::string(tmpl) + "/hw.pmcprof";
    constexpr int rounds = 2000, children = 16;
    constexpr std::uint64_t loop = 1000;
    {
        pmc::ProfilerOptions o{path, {"instructions:u"}};
        o.page_bytes = 4 << 20; // one page for everything: no page write inside a scope
        pmc::Profiler prof{o};
        const auto with = prof.label("with"), without = prof.label("without"), child = prof.label("child");
        const auto empty = prof.label("empty"), looped = prof.label("loop");
        for (int r = 0; r < rounds; ++r) {
            parent_with_children(prof, with, child, children);
            parent_without_children(prof, without, children);
            scope_around_loop(prof, empty, 1);
            scope_around_loop(prof, looped, loop + 1);
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
    // Exact counts: the same value in (nearly) every interval. An interrupt may add to a :u count on some
    // architectures (x86's iret), so 99.9 % rather than all.
    CHECK(child_share >= 0.999);
    CHECK(with_share >= 0.999);
    CHECK(without_share >= 0.999);
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
