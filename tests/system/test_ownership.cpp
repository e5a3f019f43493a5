// SPDX-License-Identifier: MIT
// A perf counter counts the thread that opened it: reads from elsewhere are refused, not silently wrong.
#include "catch.hpp"
#include "test_support.hpp"

#include <pmc/counter.hpp>

#include <atomic>
#include <thread>
#include <vector>

TEST_CASE("reading a counter from another thread raises pmc::error", "[system][ownership]") {
    pmc::Counter c{"page-faults"};
    (void)c.read();
    std::string message;
    int code = 0;
    std::thread t([&] {
        try {
            (void)c.read();
        } catch (const pmc::error& e) {
            message = e.what();
            code = e.code().value();
        }
    });
    t.join();
    CHECK(code == EPERM);
    CHECK_THAT(message, ContainsSubstring("'page-faults'"));
    CHECK_THAT(message, ContainsSubstring("thread that did not open it"));
    CHECK_NOTHROW(c.read()); // still fine in its own thread
}

TEST_CASE("after fork() the child's copy refuses to read, and the child can open its own", "[system][ownership]") {
    pmc::Counter c{"page-faults"};
    const int status = pmc_test::in_child([&] {
        try {
            (void)c.read();
            return 1; // silently read the parent's count
        } catch (const pmc::error& e) {
            if (e.code().value() != ECHILD) return 2;
            if (std::string(e.what()).find("after fork()") == std::string::npos) return 3;
        }
        pmc::Counter own{"page-faults"};
        pmc_test::FreshPages pages(8);
        auto iv = own.interval();
        pages.touch();
        return iv.stop() >= 8 ? 0 : 4;
    });
    CHECK(status == 0);
    CHECK_NOTHROW(c.read()); // the parent's counter is unaffected
}

TEST_CASE("per-thread counters count their own thread only", "[system][ownership]") {
    constexpr int threads = 3;
    std::vector<std::uint64_t> counted(threads);
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i)
        pool.emplace_back([i, &counted] {
            pmc::Counter c{"minor-faults"};
            pmc_test::FreshPages pages(static_cast<std::size_t>(64 * (i + 1)));
            auto iv = c.interval();
            pages.touch();
            counted[static_cast<std::size_t>(i)] = iv.stop();
        });
    for (auto& t : pool) t.join();
    for (int i = 0; i < threads; ++i) {
        INFO("thread " << i);
        CHECK(counted[static_cast<std::size_t>(i)] >= static_cast<std::uint64_t>(64 * (i + 1)));
        CHECK(counted[static_cast<std::size_t>(i)] <=
              static_cast<std::uint64_t>(64 * (i + 1) + 32) + pmc_test::sanitizer_fault_slack(64 * (i + 1)));
    }
}

TEST_CASE("a scoped interval that ends in a fork() child neither throws nor reports a count", "[system][ownership][interval]") {
    pmc::Counter c{"page-faults"};
    std::fflush(nullptr);
    bool counted = false, failed = false, plain_counted = false;
    int failure_code = 0;
    pid_t pid = -1;
    {
        auto plain = c.scoped([&](std::uint64_t) { plain_counted = true; });
        auto told = c.scoped([&](std::uint64_t) { counted = true; },
                             [&](const pmc::Failure& f) {
                                 failed = true;
                                 failure_code = f.code.value();
                             });
        pid = ::fork();
        // Both scopes end here, in the child too: their last read fails there (the counter is the parent's).
    }
    if (pid == 0) {
        // Exit 0 only if neither destructor threw (that would have been std::terminate), neither callback got a
        // count, and the failure callback heard ECHILD.
        _exit(!counted && !plain_counted && failed && failure_code == ECHILD ? 0 : 1);
    }
    REQUIRE(pid > 0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    INFO("child status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(counted); // in the parent, the counts were reported as usual
    CHECK(plain_counted);
    CHECK_FALSE(failed);
}

TEST_CASE("a scoped interval whose counter was moved away reports the failure, not a count", "[system][ownership][interval]") {
    pmc::Counter c{"page-faults"};
    bool counted = false;
    std::string failure;
    int code = 0;
    {
        auto scope = c.scoped([&](std::uint64_t) { counted = true; },
                              [&](const pmc::Failure& f) {
                                  failure = f.message;
                                  code = f.code.value();
                              });
        pmc::Counter moved = std::move(c); // the scope's counter is now a moved-from shell
        (void)moved;
    } // must not throw (that would be std::terminate)
    CHECK_FALSE(counted);
    CHECK(code == EBADF);
    CHECK_THAT(failure, ContainsSubstring("moved from"));
    // Without a failure callback: neither a count nor an exception.
    pmc::Counter d{"page-faults"};
    bool d_counted = false;
    CHECK_NOTHROW([&] {
        auto scope = d.scoped([&](std::uint64_t) { d_counted = true; });
        pmc::Counter gone = std::move(d);
    }());
    CHECK_FALSE(d_counted);
}

TEST_CASE("an explicit stop() of a scoped interval raises the failure and calls neither callback", "[system][ownership][interval]") {
    pmc::Counter c{"page-faults"};
    int calls = 0;
    {
        auto scope = c.scoped([&](std::uint64_t) { ++calls; }, [&](const pmc::Failure&) { ++calls; });
        pmc::Counter moved = std::move(c);
        CHECK_THROWS_AS(scope.stop(), pmc::error);
    } // and the destructor stays quiet
    CHECK(calls == 0);
    // On success, stop() calls on_exit once and the destructor does not call it again.
    pmc::Counter d{"page-faults"};
    std::uint64_t seen = 0;
    calls = 0;
    {
        auto scope = d.scoped([&](std::uint64_t n) {
            seen = n;
            ++calls;
        });
        const std::uint64_t n = scope.stop();
        CHECK(n == seen);
        CHECK(scope.stop() == n);
    }
    CHECK(calls == 1);
}
