// SPDX-License-Identifier: MIT
// Timelines across threads: on a clock the profiler keeps every reading absolute (its own page writes, flushes and
// label interning are marked in the file, not taken off later readings), so an interval that one thread begins
// after another thread's interval ended is never recorded before it.
#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>

#include "catch.hpp"
#include "command.hpp"
#include "sanitizers.hpp"
#include "temp_dir.hpp"

#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

constexpr bool under_thread_sanitizer = PMC_TEST_TSAN;

namespace {

namespace pf = pmc::profile_format;
using pmc_test::TempDir;

struct Span {
    std::uint64_t start, end;
};

/// Each interval labelled `name` on `thread`, in the order recorded (the primary counter's readings).
std::vector<Span> spans(const pmc::Profile& p, const pmc::ProfileThread& t, const std::string& name) {
    std::vector<Span> out;
    for (const auto& r : t.records)
        if (r.kind == pf::RecordKind::interval && p.string(r.label) == name)
            out.push_back({p.values[r.first_value], p.values[r.first_value + 1]});
    return out;
}

} // namespace

TEST_CASE("timelines: a scope begun after another thread's ended is never recorded before it, whatever each "
          "thread's page writes, flushes and label interning cost") {
    TempDir dir;
    const std::string path = dir.file("turns.pmcprof");
    constexpr int rounds = 1500, filler = 40;
    {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096; // many page writes
        pmc::Profiler prof{o};
        const auto turn_a = prof.label("turn a"), turn_b = prof.label("turn b"), work = prof.label("work"),
                   busy = prof.label("busy");
        std::atomic<int> turn{0}; // even: A's turn; odd: B's
        // B flushes and interns a label at each of its turns (the profiler's own work: before, taken off B's clock,
        // it slid B's timeline back by milliseconds); A only records.
        std::thread b([&] {
            for (int k = 0; k < rounds; ++k) {
                while (turn.load(std::memory_order_acquire) != 2 * k + 1) {
                }
                { auto s = prof.scope(turn_b); }
                {
                    auto outer = prof.scope(busy); // its own work marked inside it (depth 1)
                    for (int i = 0; i < filler; ++i) auto s = prof.scope(work);
                    prof.flush();
                    prof.label("b label " + std::to_string(k % 50));
                }
                turn.store(2 * k + 2, std::memory_order_release);
            }
        });
        for (int k = 0; k < rounds; ++k) {
            while (turn.load(std::memory_order_acquire) != 2 * k) {
            }
            { auto s = prof.scope(turn_a); }
            auto outer = prof.scope(busy);
            for (int i = 0; i < filler; ++i) auto s = prof.scope(work);
            turn.store(2 * k + 1, std::memory_order_release);
        }
        b.join();
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    REQUIRE(p->threads.size() == 2);
    const auto a = spans(*p, p->threads[0], "turn a"), b = spans(*p, p->threads[1], "turn b");
    REQUIRE(a.size() == static_cast<std::size_t>(rounds));
    REQUIRE(b.size() == static_cast<std::size_t>(rounds));
    int before = 0;
    std::int64_t worst = 0;
    for (int k = 0; k < rounds; ++k) {
        const auto ka = static_cast<std::size_t>(k);
        // b[k] began after a[k] ended; a[k + 1] after b[k] ended.
        const auto gap1 = static_cast<std::int64_t>(b[ka].start - a[ka].end);
        const auto gap2 = k + 1 < rounds ? static_cast<std::int64_t>(a[ka + 1].start - b[ka].end) : 0;
        if (gap1 < 0 || gap2 < 0) ++before;
        worst = std::min({worst, gap1, gap2});
    }
    INFO("intervals recorded before the interval they followed: " << before << ", by up to " << -worst << " ns");
    CHECK(before == 0);

    // B's own work is in the file: one mark per stretch (flushes, page writes, label interning), each inside B's
    // timeline; A, which only records, has its page writes marked too.
    REQUIRE(p->own_work_label != 0);
    CHECK(p->string(p->own_work_label) == pf::own_work_text);
    std::uint64_t total_b = 0;
    for (const auto& w : p->threads[1].own_work) {
        total_b += w.length;
        CHECK(w.at >= b.front().start);
        CHECK(w.at + w.length <= b.back().end + 1000000000);
    }
    CHECK(p->threads[1].own_work.size() >= static_cast<std::size_t>(rounds)); // at least its flushes
    CHECK(total_b > 0);
    CHECK(!p->threads[0].own_work.empty()); // A's page writes
    for (const auto& t : p->threads)
        for (const auto& r : t.records) CHECK(r.kind == pf::RecordKind::interval); // marks are not the program's
    // Every record after the intervals it encloses (a page's mark waits for the record under way): the tools find
    // every scope's enclosing scopes, and show the work.
    const auto summary = pmc_test::run_command("'" + pmc_test::tool() + "' summarize '" + path + "' 2>&1");
    INFO(summary.out);
    CHECK(summary.status == 0);
    CHECK(summary.out.find("enclosing scopes") == std::string::npos);
    CHECK(summary.out.find("pmc's own work") != std::string::npos);
    const auto chrome = pmc_test::run_command("'" + pmc_test::tool() + "' export --chrome '" + path + "' -o '" +
                                              dir.file("t.json") + "' 2>&1 && grep -c 'pmc: own work' '" +
                                              dir.file("t.json") + "'");
    CHECK(chrome.status == 0);
    CHECK(std::atoi(chrome.out.c_str()) > 0);
}

TEST_CASE("timelines: an exact primary leaves the profiler's work out of its readings and writes no own-work marks") {
    TempDir dir;
    const std::string path = dir.file("exact.pmcprof");
    {
        pmc::ProfilerOptions o{path, {"page-faults", "wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096;
        pmc::Profiler prof{o};
        const auto outer = prof.label("outer"), inner = prof.label("inner");
        auto s = prof.scope(outer);
        for (int i = 0; i < 2000; ++i) {
            auto t = prof.scope(inner);
            if (i % 100 == 0) prof.flush();
        }
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    CHECK(p->own_work_label == 0);
    for (const auto& r : p->threads.at(0).records) CHECK(r.kind == pf::RecordKind::interval);
    // The page writes' page faults (the kernel's, on the write) are not in "outer": its self value is 0.
    std::uint64_t children = 0, outer_total = 0;
    for (const auto& r : p->threads[0].records) {
        const std::uint64_t total = p->values[r.first_value + 1] - p->values[r.first_value];
        if (r.depth == 1) children += total;
        else outer_total = total;
    }
    if (under_thread_sanitizer) // its shadow pages fault in where the profiler's work touches memory
        CHECK(outer_total >= children);
    else
        CHECK(outer_total == children);
}
