// SPDX-License-Identifier: MIT
// Software events through the real kernel (read() path): they count what the test really does.
#include "catch.hpp"
#include "test_support.hpp"

#include <pmc/counter.hpp>
#include <pmc/machine.hpp>

#include <fcntl.h>

#include <ctime>
#include <string>
#include <thread>

using pmc_test::FreshPages;

TEST_CASE("page-faults counts the page faults the test causes", "[system][software]") {
    for (const char* event : {"page-faults", "page-faults:u", "minor-faults", "faults"}) {
        INFO(event);
        pmc::Counter c{event};
        CHECK(c.path() == pmc::ReadPath::syscall);
        CHECK(c.fd() >= 0);
        FreshPages pages(256);
        auto iv = c.interval();
        pages.touch();
        const std::uint64_t faults = iv.stop();
        CHECK(faults >= 256);
        CHECK(faults <= 256 + 32 + pmc_test::sanitizer_fault_slack(256));
    }
}

TEST_CASE("major-faults stays at zero for anonymous memory", "[system][software]") {
    pmc::Counter major{"major-faults"};
    FreshPages pages(64);
    auto iv = major.interval();
    pages.touch();
    CHECK(iv.stop() == 0);
}

TEST_CASE("task-clock follows this thread's CPU time", "[system][software]") {
    pmc::Counter c{"task-clock"};
    // The two clocks are read a few instructions apart, but a busy machine can preempt the thread between them and
    // charge a scheduler tick to one side: the best of five tries must agree (a loaded CI run saw 38 vs 30 ms once).
    std::string tries;
    bool agreed = false;
    for (int attempt = 0; attempt < 5 && !agreed; ++attempt) {
        timespec a{}, b{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        auto iv = c.interval();
        pmc_test::spin_cpu_ms(30);
        const double counted_ms = static_cast<double>(iv.stop()) / 1e6;
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        const double cpu_ms = (pmc_test::to_ns(b) - pmc_test::to_ns(a)) / 1e6;
        tries += " " + std::to_string(counted_ms) + " vs " + std::to_string(cpu_ms) + " ms;";
        agreed = counted_ms > 0.8 * cpu_ms && counted_ms < 1.2 * cpu_ms + 1;
    }
    INFO("task-clock vs CLOCK_THREAD_CPUTIME_ID:" << tries);
    CHECK(agreed);
    const pmc::Reading r = c.read_detailed();
    CHECK(r.time_enabled >= r.time_running);
    CHECK(r.time_running > 0);
}

TEST_CASE("context-switches counts voluntary sleeps", "[system][software]") {
    pmc::Counter c{"cs"};
    auto iv = c.interval();
    for (int i = 0; i < 10; ++i) {
        timespec ms{0, 1000000};
        ::nanosleep(&ms, nullptr);
    }
    if (c.attr().exclude_kernel) {
        // An unprivileged user: opened in user mode only, as perf does, where the scheduler never runs (perf shows
        // 0 cs:u too); the note says so.
        CHECK(iv.stop() == 0);
        std::string notes;
        for (const auto& n : c.notes()) notes += n;
        CHECK_THAT(notes, ContainsSubstring("always 0"));
    } else {
        CHECK(iv.stop() >= 10);
    }
}

TEST_CASE("msr/tsc/ opens through sysfs and ticks with the TSC", "[system][sysfs]") {
    // Not every kernel has the msr PMU; where it exists it must open.
    if (!pmc::load_pmu("msr")) PMC_SKIP("this kernel has no msr PMU (msr/tsc/)");
    if (const auto why = pmc_test::msr_refused_reason(); !why.empty()) PMC_SKIP(why);
    auto opened = pmc::Counter::try_open("msr/tsc/");
    INFO((opened ? std::string() : opened.failure().message));
    REQUIRE(opened.ok());
    pmc::Counter& c = *opened;
    CHECK(c.attr().type == pmc::load_pmu("msr")->type);
    CHECK(c.path() == pmc::ReadPath::syscall);
    // The msr PMU refuses perf's default exclude_guest=1; pmc falls back as perf does, and says so.
    CHECK(c.attr().exclude_guest == 0);
    bool noted = false;
    for (auto& n : c.notes()) noted = noted || n.find("exclude_guest") != std::string::npos;
    CHECK(noted);
    // Opened for this thread, it counts TSC ticks only while the thread runs: compare with task-clock around it, which
    // counts the same scheduled-in time. (Not with CLOCK_THREAD_CPUTIME_ID: it leaves out interrupt and steal time,
    // which both perf events count: under load it fell up to 15 % short of ticks / TSC rate, and failed a 5 % check;
    // task-clock stayed within 0.4 % in 400 tries, hence 2 %.)
    const auto clock = pmc::wall_time_clock();
    pmc::Counter task{"task-clock"};
    auto on_cpu = task.interval();
    auto iv = c.interval();
    pmc_test::spin_cpu_ms(50);
    const double ticks = static_cast<double>(iv.stop());
    const double seconds = static_cast<double>(on_cpu.stop()) / 1e9;
    CHECK(ticks > 0);
    INFO(ticks << " ticks in " << seconds << " s of task-clock");
    if (clock.uses_tsc) CHECK(ticks / seconds == Approx(clock.tsc_hz).epsilon(0.02));
    // Asleep, it does not count (unlike pmc's "tsc", which is the CPU's clock).
    auto asleep = c.interval();
    timespec pause{0, 30 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
    if (clock.uses_tsc) CHECK(static_cast<double>(asleep.stop()) < 0.1 * 0.030 * clock.tsc_hz);
}

TEST_CASE("counters close their descriptor: no leak over many opens", "[system][lifetime]") {
    const int before = pmc_test::open_fd_count();
    // msr/tsc/ has a control page to unmap; an unprivileged user cannot open it, and closes fds only.
    const char* other = pmc_test::msr_refused_reason().empty() ? "msr/tsc/" : "task-clock";
    for (int i = 0; i < 300; ++i) {
        pmc::Counter c{i % 2 ? "page-faults" : other};
        (void)c.read();
    }
    CHECK(pmc_test::open_fd_count() == before);
}

TEST_CASE("a moved counter keeps counting, and the moved-from one refuses to read", "[system][lifetime]") {
    pmc::Counter a{"page-faults"};
    const int fd = a.fd();
    pmc::Counter b = std::move(a);
    CHECK(b.fd() == fd);
    CHECK(a.fd() == -1);
    FreshPages pages(16);
    auto iv = b.interval();
    pages.touch();
    CHECK(iv.stop() >= 16);
    CHECK_THROWS_AS(a.read(), pmc::error);
    pmc::Counter c{"task-clock"};
    c = std::move(b); // closes task-clock's fd
    CHECK(c.fd() == fd);
    {
        pmc::Counter gone = std::move(c);
    }
    CHECK(::fcntl(fd, F_GETFD) == -1); // the destructor closed it
}

TEST_CASE("a scoped interval reports page faults once, at scope exit", "[system][interval]") {
    pmc::Counter c{"page-faults"};
    std::uint64_t reported = 0;
    int calls = 0;
    {
        FreshPages pages(32);
        auto scope = c.scoped([&](std::uint64_t n) {
            reported = n;
            ++calls;
        });
        pages.touch();
        CHECK(scope.elapsed() >= 32);
    }
    CHECK(calls == 1);
    CHECK(reported >= 32);
}
