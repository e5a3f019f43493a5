// SPDX-License-Identifier: MIT
// pmc aggregate (tools/aggregate.cpp) on synthetic runs with chosen values: alignment by position and its fallback
// by label path (with where the runs diverge), per-label and per-interval min / median / max / spread, the noisiest
// and largest intervals, which counter is exact, mismatched runs and usage errors. Then the end-to-end
// checks on the real example (pmc-example-profiler): aggregate over three runs with wall-time and with page-faults,
// and diff finding a planted change in one query.
#include <pmc/detail/json.hpp>
#include <pmc/profile_format.hpp>

#include "catch.hpp"
#include "temp_dir.hpp"
#include "command.hpp"
#include "json_check.hpp"
#include "profile_builder.hpp"
#include "sanitizers.hpp"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace pf = pmc::profile_format;
using pmc::detail::JsonValue;

using pmc_test::TempDir;

using pmc_test::tool;

std::string write_run(const TempDir& dir, const std::string& name, const std::function<void(pmc_test::ProfileBuilder&)>& fill,
                  std::vector<pmc_test::BuilderCounter> counters = {pmc_test::exact_counter()}) {
    pmc_test::ProfileBuilder b(std::move(counters));
    fill(b);
    const std::string path = dir.file(name);
    REQUIRE(b.write(path));
    return path;
}

JsonValue json_of(const std::string& command) {
    auto r = pmc_test::run_command(command);
    INFO(command << "\n" << r.out);
    REQUIRE(pmc_test::JsonCheck::valid(r.out));
    auto v = pmc::detail::JsonReader::parse(r.out, "--json");
    REQUIRE(v.ok());
    return *v;
}

const JsonValue& find_by(const JsonValue& array, const char* key, const std::string& value) {
    for (const auto& e : array.items)
        if (e.find(key) && e.find(key)->string == value) return e;
    FAIL("no " << key << " " << value);
    throw;
}

double num(const JsonValue& v, const char* a, const char* b) { return v.find(a)->find(b)->number; }

std::string join(const std::vector<std::string>& files) {
    std::string s;
    for (const auto& f : files) s += " '" + f + "'";
    return s;
}

/// Run r of a two-thread program: thread 0 parses three files (parse: 10, 10 + r, 10; each with lex: 4) and
/// thread 1 runs one check of 100 * (r + 1).
void two_threads(pmc_test::ProfileBuilder& b, std::uint64_t r) {
    auto& t = b.thread(0, "main");
    for (std::uint64_t f = 0; f < 3; ++f) t.scope("parse", f == 1 ? 10 + r : 10, [&] { t.scope("lex", 4); });
    b.thread(1, "worker").scope("check", 100 * (r + 1));
}

} // namespace

TEST_CASE("pmc aggregate: runs with the same sequences are lined up by position, with their spread") {
    TempDir dir;
    std::vector<std::string> files;
    for (std::uint64_t r = 0; r < 3; ++r)
        files.push_back(write_run(dir, "run" + std::to_string(r), [&](auto& b) { two_threads(b, r); },
                              {pmc_test::time_counter()}));
    auto j = json_of(tool() + " aggregate --json" + join(files));
    CHECK(j.find("alignment")->string == "position");
    CHECK(j.find("divergences")->items.empty());
    CHECK(!j.find("exact")->boolean);
    CHECK(j.find("intervals_aligned")->number == 7); // 3 parse, 3 lex, 1 check
    CHECK(j.find("intervals_identical")->number == 5);
    // Per label: parse's self per run 30, 31, 32 (10 + r in one of its three calls; lex's 4 excluded).
    const auto& parse = find_by(*j.find("labels"), "label", "parse");
    CHECK(num(parse, "self", "min") == 30);
    CHECK(num(parse, "self", "median") == 31);
    CHECK(num(parse, "self", "max") == 32);
    CHECK(num(parse, "self", "spread") == 2);
    CHECK(num(parse, "total", "median") == 43);
    CHECK(num(parse, "calls", "spread") == 0);
    CHECK(num(find_by(*j.find("labels"), "label", "lex"), "self", "spread") == 0);
    // Intervals: check (100, 200, 300) is both the noisiest and the largest; then parse's second call (14..16).
    const auto& noisiest = j.find("noisiest")->items;
    REQUIRE(noisiest.size() == 2); // the 5 identical in every run have no spread: not listed as noisy
    CHECK(noisiest[0].find("path")->string == "check");
    CHECK(noisiest[0].find("thread")->number == 1);
    CHECK(num(noisiest[0], "total", "min") == 100);
    CHECK(num(noisiest[0], "total", "median") == 200);
    CHECK(num(noisiest[0], "total", "max") == 300);
    CHECK(num(noisiest[0], "total", "spread_percent") == Approx(100.0));
    CHECK(noisiest[1].find("path")->string == "parse");
    CHECK(noisiest[1].find("interval")->number == 3); // postorder: lex, parse, lex, parse (the second)
    CHECK(num(noisiest[1], "total", "spread") == 2);
    CHECK(j.find("largest")->items[0].find("path")->string == "check");
    // --top 1: one of each, and the text says the unit.
    auto text = pmc_test::run_command(tool() + " aggregate --top 1" + join(files));
    CHECK(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("the 1 noisiest intervals"));
    CHECK_THAT(text.out, ContainsSubstring("counter: wall-time (ns): not exact: a time"));
    CHECK_THAT(text.out, ContainsSubstring("alignment: by position"));
}

TEST_CASE("pmc aggregate: an exact counter is said to be exact, and identical runs deterministic") {
    TempDir dir;
    std::vector<std::string> files;
    for (int r = 0; r < 3; ++r)
        files.push_back(write_run(dir, "run" + std::to_string(r), [&](auto& b) { two_threads(b, 0); },
                              {pmc_test::exact_counter(), pmc_test::time_counter()}));
    auto text = pmc_test::run_command(tool() + " aggregate" + join(files));
    CHECK(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("counter: page-faults (a count): exact: a count of events read whole"));
    CHECK_THAT(text.out, ContainsSubstring("also recorded: wall-time (not exact: a time"));
    CHECK_THAT(text.out, ContainsSubstring("identical in every run: 7 (100.0%)"));
    CHECK_THAT(text.out, ContainsSubstring("deterministic for this counter"));
    // No interval varies: "no spread", not a table of the "noisiest" intervals with a spread of 0.
    CHECK_THAT(text.out, ContainsSubstring("no spread: each of the 7 intervals found in every run has the same value"));
    CHECK_THAT(text.out, !ContainsSubstring("noisiest intervals (largest max - min)"));
    CHECK_THAT(text.out, ContainsSubstring("the 7 largest intervals"));
    CHECK(json_of(tool() + " aggregate --json" + join(files)).find("noisiest")->items.empty());
    // The same runs with a counter the kernel may multiplex, or a fallback: never called exact.
    for (std::uint32_t flag : {std::uint32_t{pf::may_multiplex}, std::uint32_t{pf::fallback}}) {
        auto counter = pmc_test::exact_counter("instructions:u");
        counter.flags |= flag;
        const auto f = write_run(dir, "flagged", [&](auto& b) { two_threads(b, 0); }, {counter});
        auto j = json_of(tool() + " aggregate --json '" + f + "' '" + f + "'");
        CHECK(!j.find("exact")->boolean);
        CHECK_THAT(j.find("exact_reason")->string, ContainsSubstring(flag == pf::fallback ? "fallback" : "multiplex"));
    }
    // A hardware event that may be multiplexed is exact where every thread's times show it counted all along, and
    // not where one thread's counter ran part of the time.
    auto hardware = pmc_test::exact_counter("instructions:u");
    hardware.flags |= pf::may_multiplex;
    for (std::uint64_t running : {1000, 500}) {
        const auto f = write_run(dir, "timed", [&](auto& b) {
            two_threads(b, 0);
            b.thread_times(0, {{1000, 1000}});
            b.thread_times(1, {{1000, running}});
        }, {hardware});
        auto j = json_of(tool() + " aggregate --json '" + f + "' '" + f + "'");
        INFO(j.find("exact_reason")->string);
        CHECK(j.find("exact")->boolean == (running == 1000));
        if (running != 1000)
            CHECK_THAT(j.find("exact_reason")->string, ContainsSubstring("multiplexed on thread 1 (counted 50.0%"));
    }
}

TEST_CASE("pmc aggregate: runs whose sequences differ are lined up by label path, and where they diverge is said") {
    TempDir dir;
    const auto a = write_run(dir, "a", [](auto& b) { two_threads(b, 0); });
    // Run b: thread 0 runs an extra scope after its first parse; run c: the worker's work moved to thread 0.
    const auto b = write_run(dir, "b", [](auto& p) {
        auto& t = p.thread(0, "main");
        t.scope("parse", 10, [&] { t.scope("lex", 4); });
        t.scope("cache", 1);
        t.scope("parse", 12, [&] { t.scope("lex", 4); });
        t.scope("parse", 10, [&] { t.scope("lex", 4); });
        p.thread(1, "worker").scope("check", 100);
    });
    const auto c = write_run(dir, "c", [](auto& p) {
        auto& t = p.thread(0, "main");
        for (int f = 0; f < 3; ++f) t.scope("parse", 10, [&] { t.scope("lex", 4); });
        t.scope("check", 130);
    });
    auto j = json_of(tool() + " aggregate --json '" + a + "' '" + b + "' '" + c + "'");
    CHECK(j.find("alignment")->string == "label path");
    const auto& d = j.find("divergences")->items;
    REQUIRE(d.size() == 2); // thread 0 (b's extra scope) and thread 1 (c has none)
    CHECK(d[0].find("thread")->number == 0);
    CHECK(d[0].find("file")->string == b);
    CHECK(d[0].find("interval")->number == 2);
    CHECK(d[0].find("this_run")->string == "cache at depth 0");
    CHECK(d[0].find("first_run")->string == "lex at depth 1");
    CHECK(d[1].find("thread")->number == 1);
    CHECK(d[1].find("file")->string == c);
    CHECK(d[1].find("this_run")->string == "(none: the thread ends)");
    CHECK(j.find("intervals_in_some_runs_only")->number == 1); // b's cache
    CHECK(j.find("intervals_aligned")->number == 7);           // check matched across threads by its path
    const auto& check = find_by(*j.find("largest"), "path", "check");
    CHECK(num(check, "total", "min") == 100);
    CHECK(num(check, "total", "max") == 130);
    // The second parse (path "parse", occurrence 1): 14, 16, 14.
    CHECK(num(find_by(*j.find("labels"), "label", "parse"), "total", "max") == 44);
    CHECK(find_by(*j.find("labels"), "label", "cache").find("runs")->number == 1);
    auto text = pmc_test::run_command(tool() + " aggregate '" + a + "' '" + b + "' '" + c + "'");
    CHECK_THAT(text.out, ContainsSubstring("alignment: by label path"));
    CHECK_THAT(text.out, ContainsSubstring("thread main (0): '" + b + "' first differs from '" + a +
                                           "' at the thread's interval 2 (in the order they ended): cache at depth 0 "
                                           "where the first run has lex at depth 1"));
    CHECK_THAT(text.out, ContainsSubstring("(in 1 of 3 runs)"));
    CHECK_THAT(text.out, ContainsSubstring("in some runs only (not aggregated): 1"));
}

TEST_CASE("pmc aggregate: threads are matched across runs by name, then by place among equal names, not by number") {
    // Threads that start at once register in any order: the decoder is thread 1 in one run and thread 2 in the
    // next, and the two "worker" threads are 3 and 4 in one run, 6 and 9 in the other. Matched by name, every
    // thread recorded the same sequence in both runs: lined up by position, every interval identical.
    TempDir dir;
    const auto a = write_run(dir, "a", [](auto& b) {
        b.thread(0, "main").scope("main", 1);
        b.thread(1, "decoder").scope("decode", 50);
        b.thread(2, "encoder").scope("encode", 70);
        b.thread(3, "worker").scope("job", 10);
        b.thread(4, "worker").scope("job", 20);
    });
    const auto b = write_run(dir, "b", [](auto& p) {
        p.thread(0, "main").scope("main", 1);
        p.thread(1, "encoder").scope("encode", 70);
        p.thread(2, "decoder").scope("decode", 50);
        p.thread(6, "worker").scope("job", 10);
        p.thread(9, "worker").scope("job", 20);
    });
    auto j = json_of(tool() + " aggregate --json '" + a + "' '" + b + "'");
    CHECK(j.find("alignment")->string == "position");
    CHECK(j.find("divergences")->items.empty());
    CHECK(j.find("intervals_aligned")->number == 5);
    CHECK(j.find("intervals_identical")->number == 5);
    const auto& largest = j.find("largest")->items;
    CHECK(find_by(*j.find("largest"), "path", "decode").find("thread_name")->string == "decoder");
    CHECK(find_by(*j.find("largest"), "path", "decode").find("thread")->number == 1); // its number in run a
    // Equal names: by place (thread number order) among them.
    std::vector<std::string> worker_threads;
    for (const auto& slot : largest)
        if (slot.find("path")->string == "job") worker_threads.push_back(slot.find("thread_name")->string);
    CHECK(worker_threads == std::vector<std::string>{"worker#2", "worker#1"}); // job 20, then job 10
    auto text = pmc_test::run_command(tool() + " aggregate '" + a + "' '" + b + "'");
    CHECK_THAT(text.out, ContainsSubstring("identical in every run: 5 (100.0%)"));
    CHECK_THAT(text.out, ContainsSubstring("worker#2"));
    CHECK_THAT(pmc_test::run_command(tool() + " aggregate --help").out, ContainsSubstring("matched across runs by name"));
    // Where a thread's runs diverge, the thread is named.
    const auto c = write_run(dir, "c", [](auto& p) {
        p.thread(0, "main").scope("main", 1);
        p.thread(1, "encoder").scope("encode", 70);
        p.thread(2, "decoder").scope("inflate", 50);
        p.thread(6, "worker").scope("job", 10);
        p.thread(9, "worker").scope("job", 20);
    });
    auto diverged = json_of(tool() + " aggregate --json '" + a + "' '" + c + "'");
    REQUIRE(diverged.find("divergences")->items.size() == 1); // the decoder only (thread 1 in a, 2 in c)
    CHECK(diverged.find("divergences")->items[0].find("thread_name")->string == "decoder");
    CHECK(diverged.find("divergences")->items[0].find("this_run")->string == "inflate at depth 0");
    CHECK_THAT(pmc_test::run_command(tool() + " aggregate '" + a + "' '" + c + "'").out,
               ContainsSubstring("thread decoder (1): '" + c + "' first differs"));
    // pmc diff sums each label over all threads: the registration order does not move a label.
    CHECK(pmc_test::run_command(tool() + " diff --fail-on-change '" + a + "' '" + b + "' >/dev/null 2>&1").status == 0);
}

TEST_CASE("pmc aggregate: mismatched counters, usage errors and --help") {
    TempDir dir;
    const auto a = write_run(dir, "a", [](auto& b) { two_threads(b, 0); });
    const auto w = write_run(dir, "w", [](auto& b) { two_threads(b, 0); }, {pmc_test::time_counter()});
    auto r = pmc_test::run_command(tool() + " aggregate '" + a + "' '" + w + "' 2>&1");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, ContainsSubstring("'" + w + "' recorded no counter 'page-faults' (it has: wall-time)"));
    auto help = pmc_test::run_command(tool() + " aggregate --help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, ContainsSubstring("usage: pmc aggregate"));
    for (const std::string& args : {std::string(""), "'" + a + "'", "--top '" + a + "' '" + a + "'",
                                    std::string("--counter"), "--nope '" + a + "' '" + a + "'"}) {
        auto e = pmc_test::run_command(tool() + " aggregate " + args + " 2>&1");
        INFO(args << ": " << e.out);
        CHECK(e.status == 1);
        CHECK_THAT(e.out, ContainsSubstring("Run 'pmc aggregate --help'"));
    }
}

#ifdef PMC_EXAMPLE_PROFILER_PATH
namespace {
/// Records one run of the example; false when it could not (the reason in `why`).
bool record(const std::string& file, const std::string& counters, const std::string& flags, std::string& why) {
    auto r = pmc_test::run_command("PMC_PROFILE='" + file + "' PMC_PROFILE_COUNTERS='" + counters + "' '" +
                                   PMC_EXAMPLE_PROFILER_PATH + "' --functions 120 " + flags + " 2>&1");
    why = r.out;
    return r.status == 0;
}
} // namespace

TEST_CASE("the example, three runs: aggregate shows wall-time's spread and page-faults' exactness, and diff finds a "
          "planted change in one query and no other") {
#if PMC_TEST_ASAN
    PMC_SKIP("built with AddressSanitizer, whose shadow memory adds page faults to the example's queries: their exact "
             "counts differ from run to run");
#endif
    TempDir dir;
    std::vector<std::string> wall, faults, planted;
    std::string why;
    for (int r = 0; r < 3; ++r) {
        wall.push_back(dir.file("wall" + std::to_string(r)));
        faults.push_back(dir.file("faults" + std::to_string(r)));
        planted.push_back(dir.file("planted" + std::to_string(r)));
        if (!record(wall.back(), "wall-time", "", why) || !record(faults.back(), "page-faults,wall-time", "", why) ||
            !record(planted.back(), "page-faults,wall-time", "--plant optimize", why)) {
            if (why.find("page-faults") != std::string::npos) PMC_SKIP("page-faults cannot be counted here: " + why);
            FAIL("the example failed: " << why);
        }
    }
    auto w = json_of(tool() + " aggregate --json" + join(wall));
    CHECK(!w.find("exact")->boolean);
    double spread = 0;
    for (const auto& l : w.find("labels")->items) spread += num(l, "self", "spread");
    CHECK(spread > 0); // three runs never take exactly the same nanoseconds in every query

    auto f = json_of(tool() + " aggregate --json" + join(faults));
    INFO(f.find("exact_reason")->string);
    CHECK(f.find("exact")->boolean);
    CHECK(f.find("counter")->string == "page-faults");
    auto text = pmc_test::run_command(tool() + " aggregate" + join(faults));
    CHECK_THAT(text.out, ContainsSubstring("counter: page-faults (a count): exact"));

    // The same profile against itself: unchanged everywhere.
    auto self = json_of(tool() + " diff --json '" + faults[0] + "' '" + faults[0] + "'");
    for (const auto& l : self.find("labels")->items) CHECK(l.find("verdict")->string == "unchanged");
    // The planted change: 16 more page faults in each of the 120 optimize calls, and in no other query. The example
    // faults in fresh mmap'd pages and computes each memo entry once, so every other query is exactly unchanged.
    auto d = json_of(tool() + " diff --json" + join(faults) + " --" + join(planted));
    const auto& labels = d.find("labels")->items;
    REQUIRE(!labels.empty());
    CHECK(labels[0].find("label")->string == "optimize");
    CHECK(labels[0].find("self_delta")->number == 16 * 120);
    CHECK((labels[0].find("verdict")->string == "changed" || labels[0].find("verdict")->string == "beyond the noise"));
    for (std::size_t i = 1; i < labels.size(); ++i) {
        INFO(labels[i].find("label")->string << ": " << labels[i].find("text")->string);
        CHECK(labels[i].find("verdict")->string == "unchanged");
    }
    // The CI gate on the same runs: two runs of one build pass, the planted build fails with status 3.
    auto pass = pmc_test::run_command(tool() + " diff --fail-on-change '" + faults[0] + "' '" + faults[1] + "' 2>&1");
    INFO(pass.out);
    CHECK(pass.status == 0);
    auto fail = pmc_test::run_command(tool() + " diff --fail-on-change" + join(faults) + " --" + join(planted) +
                                      " 2>&1 >/dev/null");
    CHECK(fail.status == 3);
    CHECK_THAT(fail.out, ContainsSubstring("1 label changed (exit status 3):\n  optimize: "));
}
#endif
