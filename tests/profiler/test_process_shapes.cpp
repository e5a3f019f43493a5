// SPDX-License-Identifier: MIT
// Process shapes (issue 23, part 3): a fork() child (no exec) of a threaded profiled program never hangs and never
// holds its parent's lock or file; a thread's own page is never lost to a fatal signal taken while it writes it; a
// static Profiler, destroyed by exit() while other threads record, leaves a whole profile. Each case runs the shape
// many times in children of this process and reads every profile back.
#include <pmc/counter.hpp>
#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>

#include "catch.hpp"
#include "command.hpp"
#include "temp_dir.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace shapes {

using pmc_test::TempDir;

/// Waits up to `seconds` for `kid`; 1 if it did not end (then it is killed), else 0 and its status.
int wait_bounded(pid_t kid, int& status, double seconds) {
    timespec start{}, now{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        const pid_t got = ::waitpid(kid, &status, WNOHANG);
        if (got == kid) return 0;
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        if (static_cast<double>(now.tv_sec - start.tv_sec) + static_cast<double>(now.tv_nsec - start.tv_nsec) * 1e-9 > seconds) {
            ::kill(kid, SIGKILL);
            ::waitpid(kid, &status, 0);
            return 1;
        }
        ::usleep(200);
    }
}

/// Per thread of a profile, its integer events' values in order.
std::vector<std::vector<std::uint64_t>> integers_of(const pmc::Profile& p) {
    std::vector<std::vector<std::uint64_t>> out;
    for (const auto& t : p.threads) {
        out.emplace_back();
        for (const auto& r : t.records)
            if (r.kind == pmc::profile_format::RecordKind::integer) out.back().push_back(p.values[r.first_value + 1]);
    }
    return out;
}

/// True when `v` is 0, 1, 2, ... (no gap, no repeat).
bool consecutive(const std::vector<std::uint64_t>& v) {
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != i) return false;
    return true;
}

void calibrate_wall_time() { (void)pmc::Counter::try_open("wall-time"); } // once per process: children inherit it

} // namespace shapes

TEST_CASE("process shapes: a fork() child (no exec) of a threaded profiled program exits promptly, 200 runs, while "
          "threads intern labels, register and write pages", "[once]") {
#if defined(PMC_SANITIZED)
    // (The first run hung: a thread allocating at the fork holds the sanitizer allocator's lock, which the child's
    // exit then waits for. The unsanitized build runs this case.)
    PMC_SKIP("built with AddressSanitizer, whose allocator lock another thread holds at fork() hangs a child that "
             "allocates (the sanitizer's, not pmc's)");
#endif
    using namespace shapes;
    TempDir dir;
    const std::string path = dir.file("forks.pmcprof");
    calibrate_wall_time();
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.page_bytes = 4096;
    o.measure_cost = false;
    auto prof = std::make_unique<pmc::Profiler>(o);
    const auto a = prof->label("a");
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int k = 0; k < 2; ++k) // labels: the lock, and a strings page written under it
        workers.emplace_back([&, k] {
            for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i) {
                (void)prof->label("l" + std::to_string(k) + "." + std::to_string(i % 3000));
                if (i % 32 == 0) ::usleep(50); // (busy threads on a small machine starve the children)
            }
        });
    workers.emplace_back([&] { // threads registering (the lock) and ending (their exit hook takes it)
        while (!stop.load(std::memory_order_relaxed)) {
            std::thread([&] { auto s = prof->scope(a); }).join();
            ::usleep(20);
        }
    });
    workers.emplace_back([&] { // pages written, and flushes
        for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i) {
            auto s = prof->scope(a);
            if (i % 64 == 0) prof->flush();
            if (i % 4096 == 0) ::usleep(50);
        }
    });
    { auto s = prof->scope(a); } // this thread is registered too: its exit hook runs in every child
    int hung = 0, bad_status = 0, runs = 0;
    std::fflush(nullptr); // (a child's exit would write this process's buffered output again)
    for (int run = 0; run < 200 && hung == 0; ++run, ++runs) {
        const pid_t kid = ::fork();
        REQUIRE(kid >= 0);
        if (kid == 0) {
            if (run % 3 == 1) { // records and interns in the child (written nowhere)
                auto s = prof->scope(a);
                (void)prof->label("child");
            } else if (run % 3 == 2) {
                prof.reset(); // the Profiler's close, in the child
            }
            std::exit(0); // the thread's exit hook, exit()'s flush, the static destructors
        }
        int status = 0;
        hung += wait_bounded(kid, status, 5.0);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) ++bad_status;
    }
    stop = true;
    for (auto& w : workers) w.join();
    prof.reset();
    INFO("runs " << runs << ", hung " << hung);
    CHECK(hung == 0);
    CHECK(bad_status == 0);
    CHECK(runs == 200);
    auto p = pmc::read_profile(path); // and the parent's profile is whole
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    CHECK(p->ended_by() == "closed");
}

namespace shapes {
/// A child whose worker fills 4 KiB pages as fast as it can, numbering its integer events (`progress`: how many it
/// committed), until SIGTERM comes after `delay_us`: sent to the worker itself (it is often writing its own page
/// then), or to the process.
[[noreturn]] void sigterm_while_writing(const std::string& path, std::uint64_t* progress, long delay_us, bool to_worker) {
    ::signal(SIGTERM, SIG_DFL); // (the test framework's handler, inherited, would report instead)
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.page_bytes = 4096;
    o.measure_cost = false;
    static pmc::Profiler* prof = nullptr; // never destroyed: the signal ends the recording
    prof = new pmc::Profiler(o);
    const auto n = prof->label("n");
    std::atomic<bool> started{false};
    std::thread worker([&] {
        for (std::uint64_t i = 0;; ++i) {
            prof->integer(n, i);
            __atomic_store_n(progress, i + 1, __ATOMIC_RELEASE);
            if (i == 300) started.store(true);
        }
    });
    while (!started.load()) std::this_thread::yield();
    timespec d{0, delay_us * 1000};
    ::nanosleep(&d, nullptr);
    if (to_worker) ::pthread_kill(worker.native_handle(), SIGTERM);
    else ::kill(::getpid(), SIGTERM);
    for (;;) ::pause();
}
} // namespace shapes

TEST_CASE("process shapes: SIGTERM while a thread writes its own pages, 300 runs: every committed record is in the "
          "file, or the loss is reported", "[once]") {
    using namespace shapes;
    TempDir dir;
    calibrate_wall_time();
    auto* progress = static_cast<std::uint64_t*>(
        ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    REQUIRE(progress != MAP_FAILED);
    int lost = 0, reported = 0, wrong_end = 0, not_signalled = 0;
    std::string first_loss;
    const std::size_t runs = 300 / pmc_test::one_in_sanitized(3); // sanitized: 100
    constexpr std::size_t batch = 4; // children at a time (each mostly waits: its start, its delay, its files)
    for (std::size_t first = 0; first < runs; first += batch) {
        pid_t kids[batch] = {};
        for (std::size_t run = first; run < first + batch && run < runs; ++run) {
            const std::string path = dir.file("term" + std::to_string(run) + ".pmcprof");
            progress[run % batch] = 0;
            std::fflush(nullptr); // (a child's exit would write this process's buffered output again)
            kids[run % batch] = ::fork();
            REQUIRE(kids[run % batch] >= 0);
            if (kids[run % batch] == 0)
                sigterm_while_writing(path, &progress[run % batch], static_cast<long>((run * 137) % 1500),
                                      run % 4 != 3);
        }
        for (std::size_t run = first; run < first + batch && run < runs; ++run) {
            const std::string path = dir.file("term" + std::to_string(run) + ".pmcprof");
            const bool to_worker = run % 4 != 3;
            int status = 0;
            REQUIRE(wait_bounded(kids[run % batch], status, 20.0) == 0);
            if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) ++not_signalled;
            const std::uint64_t committed = __atomic_load_n(&progress[run % batch], __ATOMIC_ACQUIRE);
            auto p = pmc::read_profile(path);
            REQUIRE(p.ok());
            if (p->ended_by() != "signal 15") ++wrong_end;
            if (!p->problems.empty()) { // a loss said is a loss the tools report (exit status 2)
                ++reported;
                continue;
            }
            std::vector<std::uint64_t> values;
            for (auto& v : integers_of(*p))
                if (!v.empty()) values = v;
            // Every committed record (one more when the signal came between its commit and `progress`), in order.
            // Sent to the process, the signal may be taken by main while the worker goes on recording until the end
            // (what it records after the ending froze the file is not written): then the file holds a prefix.
            if (!consecutive(values) || (values.size() < committed && to_worker) || values.size() > committed + 1) {
                if (first_loss.empty())
                    first_loss = "run " + std::to_string(run) + ": committed " + std::to_string(committed) +
                                 ", in the file " + std::to_string(values.size()) +
                                 (consecutive(values) ? "" : " (a gap)");
                ++lost;
            }
            ::unlink(path.c_str());
        }
    }
    ::munmap(progress, 4096);
    INFO("first silent loss: " << first_loss);
    CHECK(lost == 0);
    CHECK(reported == 0); // never lost at all, in fact
    CHECK(wrong_end == 0);
    CHECK(not_signalled == 0);
}

namespace shapes {
/// A child with a static Profiler (destroyed by exit(), from its atexit list) and three threads recording in a loop
/// that are never joined; main records, then calls exit().
[[noreturn]] void static_profiler_exit(const std::string& path) {
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.page_bytes = 4096;
    o.measure_cost = false;
    static pmc::Profiler prof{o};
    const auto a = prof.label("a"), b = prof.label("b");
    std::atomic<int> started{0};
    for (int k = 0; k < 3; ++k)
        std::thread([&] {
            bool counted = false;
            for (std::uint64_t i = 0;; ++i) {
                auto s = prof.scope(a);
                prof.integer(b, i);
                if (i == 500 && !counted) counted = true, started.fetch_add(1);
            }
        }).detach();
    while (started.load() < 3) std::this_thread::yield();
    for (std::uint64_t i = 0; i < 3000; ++i) {
        auto s = prof.scope(b);
        prof.integer(a, i);
    }
    std::exit(0);
}
} // namespace shapes

TEST_CASE("process shapes: a static Profiler destroyed by exit() while three threads record, 40 runs: every "
          "profile whole, no gap, every tool exits 0", "[once]") {
    using namespace shapes;
    TempDir dir;
    calibrate_wall_time();
    int bad = 0, gaps = 0, tool_failures = 0;
    std::string first_problem;
    constexpr int batch = 4;
    for (int first = 0; first < 40; first += batch) {
        pid_t kids[batch] = {};
        for (int run = first; run < first + batch; ++run) {
            std::fflush(nullptr);
            kids[run - first] = ::fork();
            REQUIRE(kids[run - first] >= 0);
            if (kids[run - first] == 0) static_profiler_exit(dir.file("static" + std::to_string(run) + ".pmcprof"));
        }
        for (int run = first; run < first + batch; ++run) {
            const std::string path = dir.file("static" + std::to_string(run) + ".pmcprof");
            int status = 0;
            REQUIRE(wait_bounded(kids[run - first], status, 20.0) == 0);
            CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
            auto p = pmc::read_profile(path);
            REQUIRE(p.ok());
            if (!p->problems.empty()) {
                ++bad;
                if (first_problem.empty()) first_problem = p->problems.front();
            }
            for (const auto& v : integers_of(*p))
                if (!consecutive(v)) ++gaps;
            if (run % 10 == 0) { // the tools too (a few: each is a process)
                auto r = pmc_test::run_command(std::string(PMC_TOOL_PATH) + " summarize " + path + " >/dev/null 2>&1");
                if (r.status != 0) ++tool_failures;
            }
            ::unlink(path.c_str());
        }
    }
    INFO("first problem: " << first_problem);
    CHECK(bad == 0);
    CHECK(gaps == 0);
    CHECK(tool_failures == 0);
}

namespace shapes {
/// `n` profilers, each with its own file in `dir` (the last one is the one a test uses).
std::vector<std::unique_ptr<pmc::Profiler>> many_profilers(const TempDir& dir, int n) {
    std::vector<std::unique_ptr<pmc::Profiler>> out;
    for (int i = 0; i < n; ++i) {
        pmc::ProfilerOptions o{dir.file("p" + std::to_string(i) + ".pmcprof"), {"wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096;
        out.push_back(std::make_unique<pmc::Profiler>(o));
    }
    return out;
}
} // namespace shapes

TEST_CASE("process shapes: the 20th live profiler is written out by exit() like the first (no fixed number of "
          "profilers)") {
    using namespace shapes;
    TempDir dir;
    calibrate_wall_time();
    std::fflush(nullptr);
    const pid_t kid = ::fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
        auto profs = many_profilers(dir, 20);
        for (auto& prof : profs) {
            const auto n = prof->label("n");
            for (std::uint64_t i = 0; i < 100; ++i) prof->integer(n, i);
        }
        // Never destroyed: exit() must write them out. Kept in a static array without a destructor, so that
        // LeakSanitizer's check at exit finds them reachable.
        static pmc::Profiler* volatile kept[20]; // (volatile: stores the compiler keeps, for LeakSanitizer to see)
        for (std::size_t i = 0; i < profs.size(); ++i) kept[i] = profs[i].release();
        (void)kept[0]; // (read once: the array is used)
        std::exit(0);
    }
    int status = 0;
    REQUIRE(wait_bounded(kid, status, 20.0) == 0);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    for (int i = 0; i < 20; ++i) {
        auto p = pmc::read_profile(dir.file("p" + std::to_string(i) + ".pmcprof"));
        REQUIRE(p.ok());
        INFO("profiler " << i << ": " << (p->problems.empty() ? std::string() : p->problems.front()));
        CHECK(p->problems.empty());
        CHECK(p->ended_by() == "exit()");
        const auto values = integers_of(*p);
        REQUIRE(values.size() == 1);
        CHECK(values[0].size() == 100);
        CHECK(consecutive(values[0]));
    }
}

TEST_CASE("process shapes: a fork() child of a program with 17 live profilers exits promptly while a thread interns "
          "labels in the 17th, 40 runs", "[once]") {
#if defined(PMC_SANITIZED)
    PMC_SKIP("built with AddressSanitizer, whose allocator lock another thread holds at fork() hangs a child that "
             "allocates (the sanitizer's, not pmc's)");
#endif
    using namespace shapes;
    TempDir dir;
    calibrate_wall_time();
    auto profs = many_profilers(dir, 17);
    pmc::Profiler& last = *profs.back();
    { auto s = last.scope(last.label("main")); }
    std::atomic<bool> stop{false};
    std::thread worker([&] { // the 17th's lock, taken and released all the time
        for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i) {
            (void)last.label("l" + std::to_string(i % 3000));
            if (i % 32 == 0) ::usleep(20);
        }
    });
    int hung = 0, bad_status = 0, runs = 0;
    std::fflush(nullptr);
    for (int run = 0; run < 40 && hung == 0; ++run, ++runs) {
        const pid_t kid = ::fork();
        REQUIRE(kid >= 0);
        if (kid == 0) {
            (void)last.label("child"); // the lock a thread of the parent may have held at the fork
            std::exit(0);
        }
        int status = 0;
        hung += wait_bounded(kid, status, 5.0);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) ++bad_status;
    }
    stop = true;
    worker.join();
    INFO("runs " << runs << ", hung " << hung);
    CHECK(hung == 0);
    CHECK(bad_status == 0);
    profs.clear();
    auto p = pmc::read_profile(dir.file("p16.pmcprof"));
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
}
