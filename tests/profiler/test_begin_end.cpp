// SPDX-License-Identifier: MIT
// Profiler::begin/end (intervals begun in one call and ended in another: hooks and callbacks), the nesting they
// share with scopes, ends out of order reported as nesting errors, and a scope recorded by a thread_local destroyed
// after the profiler's thread-exit hook.
#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>

#include "catch.hpp"
#include "temp_dir.hpp"
#include "command.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

using pmc_test::TempDir;

/// Each record of the profile's only recording thread as "label@depth" (intervals; errors are not records).
std::vector<std::string> shape(const pmc::Profile& p, std::size_t thread = 0) {
    std::vector<std::string> out;
    for (const auto& r : p.threads.at(thread).records)
        if (r.kind == pmc::profile_format::RecordKind::interval)
            out.push_back(p.string(r.label) + "@" + std::to_string(r.depth));
    return out;
}

pmc::ProfilerOptions options(const std::string& path) {
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.measure_cost = false;
    return o;
}

} // namespace

TEST_CASE("begin/end: intervals from hooks nest with scopes on the same thread") {
    TempDir dir;
    const std::string path = dir.file("hooks.pmcprof");
    {
        pmc::Profiler prof{options(path)};
        const auto call = prof.label("call"), parse = prof.label("parse"), fn = prof.label("fn f");
        // An interpreter's call hook begins, its return hook ends: a scope in between nests inside.
        prof.begin(call, fn);
        {
            auto s = prof.scope(parse);
            prof.begin(call);
            prof.end(call);
        }
        prof.end(call);
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    CHECK(shape(*p) == std::vector<std::string>{"call@2", "parse@1", "call@0"});
    CHECK(p->string(p->threads[0].records.back().arg) == "fn f");
    CHECK(p->threads[0].nesting_errors.empty());
}

TEST_CASE("begin/end: an end that does not match the innermost interval is reported, never re-nested") {
    TempDir dir;
    const std::string path = dir.file("mismatch.pmcprof");
    {
        pmc::Profiler prof{options(path)};
        const auto a = prof.label("a"), b = prof.label("b"), c = prof.label("c");
        prof.end(a);   // nothing open
        prof.begin(a);
        prof.begin(b);
        prof.end(a);   // b is innermost: an error, b and a stay open
        prof.end(b);   // b closes at depth 1
        prof.end(a);   // then a at depth 0
        {
            auto s = prof.scope(c);
            prof.begin(b);
            s.end();    // out of order: b is still open inside it
            prof.end(b); // b closes, and c (ended) goes with it: the next interval is outermost again
        }
        prof.begin(a);
        prof.end(a);
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(shape(*p) == std::vector<std::string>{"b@1", "a@0", "b@1", "a@0"});
    const auto& errors = p->threads[0].nesting_errors;
    REQUIRE(errors.size() == 3);
    CHECK(p->string(errors[0].label) == "a");
    CHECK(errors[0].inner == 0);
    CHECK(p->string(errors[1].label) == "a");
    CHECK(p->string(errors[1].inner) == "b");
    CHECK(errors[1].depth == 2);
    CHECK(p->string(errors[2].label) == "c");
    CHECK(p->string(errors[2].inner) == "b");
    REQUIRE(p->problems.size() == 1);
    CHECK(p->problems[0].find("3 end(s) that did not match the innermost open interval") != std::string::npos);
    CHECK(p->problems[0].find("the end of 'a' while nothing was open") != std::string::npos);
    // And the tools say so, with exit status 2.
    auto r = pmc_test::run_command(std::string(PMC_TOOL_PATH) + " summarize '" + path + "' 2>&1");
    CHECK(r.status == 2);
    CHECK(r.out.find("did not match the innermost open interval") != std::string::npos);
}

TEST_CASE("a killed program: pmc summarize names the intervals open as of each thread's last page, exit status 2") {
    TempDir dir;
    const std::string path = dir.file("killed.pmcprof");
    const pid_t kid = ::fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
        pmc::Profiler prof{options(path)};
        const auto outer = prof.label("outer"), inner = prof.label("inner");
        prof.begin(outer);
        auto s = prof.scope(inner);
        prof.flush(); // its page and thread page go out, with both open
        ::raise(SIGKILL);
    }
    int st = 0;
    REQUIRE(::waitpid(kid, &st, 0) == kid);
    REQUIRE(WIFSIGNALED(st));
    auto r = pmc_test::run_command(std::string(PMC_TOOL_PATH) + " summarize '" + path + "' 2>&1");
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("no end record") != std::string::npos);
    CHECK(r.out.find("intervals still open") != std::string::npos);
    CHECK(r.out.find("thread 0: outer > inner") != std::string::npos);
}

TEST_CASE("interrupted before any scope ended: every profile tool says what was open and how it stopped, exit 2") {
    // SIGINT (the profiler's handler writes the end record, "signal 2") inside outer > inner, no scope ended: the
    // file holds no interval at all, only the open ones on the thread page.
    TempDir dir;
    const std::string path = dir.file("interrupted.pmcprof");
    const pid_t kid = ::fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
        ::signal(SIGINT, SIG_DFL); // a test run from a non-interactive shell may inherit it ignored
        pmc::Profiler prof{options(path)};
        const auto outer = prof.label("outer"), inner = prof.label("inner");
        prof.begin(outer);
        prof.begin(inner);
        ::raise(SIGINT);
        ::_exit(0);
    }
    int st = 0;
    REQUIRE(::waitpid(kid, &st, 0) == kid);
    REQUIRE(WIFSIGNALED(st));
    REQUIRE(WTERMSIG(st) == SIGINT);
    // A whole run to compare with (pmc diff).
    const std::string whole = dir.file("whole.pmcprof");
    {
        pmc::Profiler prof{options(whole)};
        auto s = prof.scope(prof.label("outer"));
    }
    const std::string tool = PMC_TOOL_PATH;
    const std::string q = "'" + path + "'";
    for (const std::string& cmd : {"summarize " + q, "summarize --json " + q, "critical " + q,
                                  "critical --expect-path 'outer > inner' " + q, "export --chrome -o /dev/null " + q,
                                  "aggregate " + q + " '" + whole + "'", "diff --fail-on-change '" + whole + "' " + q}) {
        auto r = pmc_test::run_command(tool + " " + cmd + " 2>&1");
        INFO(cmd << "\n" << r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find("ended on signal 2") != std::string::npos);
        CHECK(r.out.find("no handler could run") == std::string::npos); // the handler did run: the file says so
        CHECK(r.out.find("outer > inner") != std::string::npos);
    }
}

TEST_CASE("begin/end: deep nesting (more than the first stack allocation) records every depth") {
    TempDir dir;
    const std::string path = dir.file("deep.pmcprof");
    constexpr int depth = 3000; // past the 64 slots allocated first, and past version 1's 1,023 levels
    {
        pmc::Profiler prof{options(path)};
        const auto f = prof.label("f");
        for (int i = 0; i < depth; ++i) prof.begin(f);
        for (int i = 0; i < depth; ++i) prof.end(f);
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    const auto& r = p->threads.at(0).records;
    REQUIRE(r.size() == depth);
    for (int i = 0; i < depth; ++i) CHECK(r[static_cast<std::size_t>(i)].depth == static_cast<std::uint32_t>(depth - 1 - i));
}

namespace {
/// Records a scope (and a begin/end) from its destructor: as a thread_local, before the profiler's thread-exit hook
/// (a pthread key's destructor, run after every thread_local's); as a later key's value, after it.
struct LateScope {
    pmc::Profiler* prof = nullptr;
    pmc::Label label;
    ~LateScope() {
        if (!prof) return;
        auto s = prof->scope(label);
        prof->begin(label);
        prof->end(label);
    }
};
} // namespace

TEST_CASE("profiler: a thread_local's destructor records at the thread's exit, and a pthread key's destructor run after "
          "the thread-exit hook is dropped") {
    TempDir dir;
    const std::string path = dir.file("late.pmcprof");
    {
        pmc::Profiler prof{options(path)}; // (its start made the exit hook's key: a lower one than the test's)
        const auto work = prof.label("work"), in_dtor = prof.label("in a thread_local's destructor"),
                   after = prof.label("after the exit hook");
        // A key made after the profiler's: glibc runs key destructors in the keys' order, after the thread_locals'.
        pthread_key_t key{};
        REQUIRE(::pthread_key_create(&key, [](void* p) { delete static_cast<LateScope*>(p); }) == 0);
        std::thread t([&] {
            static thread_local LateScope late;
            late.prof = &prof; // constructed now, before the profiler's per-thread state
            late.label = in_dtor;
            auto* keyed = new LateScope;
            keyed->prof = &prof;
            keyed->label = after;
            ::pthread_setspecific(key, keyed);
            auto s = prof.scope(work);
        });
        t.join();
        ::pthread_key_delete(key);
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    std::map<std::string, std::size_t> count;
    for (const auto& t : p->threads)
        for (const auto& r : t.records) ++count[p->string(r.label)];
    CHECK(count["work"] == 1);
    CHECK(count["in a thread_local's destructor"] == 2); // its scope, and its begin/end
    CHECK(count["after the exit hook"] == 0);
}

TEST_CASE("begin/end: after end_to() a later begin() reuses a scope's slot, and the scope's end reports its own label "
          "and leaves the later interval open for its own end()") {
    TempDir dir;
    const std::string path = dir.file("end_to_reuse.pmcprof");
    {
        pmc::Profiler prof{options(path)};
        const auto call = prof.label("call"), scope = prof.label("scope"), later = prof.label("later");
        prof.begin(call);
        {
            auto s = prof.scope(scope); // slot 1
            prof.end_to(1);             // an error path unwound past it: ended here
            prof.begin(later);          // slot 1 again
        }                               // the scope's end: its interval is gone; "later" is not its to end
        prof.end(later);                // the program's own, correct end
        prof.end(call);
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(shape(*p) == std::vector<std::string>{"scope@1", "later@1", "call@0"});
    const auto& errors = p->threads.at(0).nesting_errors;
    REQUIRE(errors.size() == 1);
    CHECK(p->string(errors[0].label) == "scope"); // at the scope's end, naming the scope
    CHECK(p->string(errors[0].inner) == "later");
}
