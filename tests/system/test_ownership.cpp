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
