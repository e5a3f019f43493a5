// SPDX-License-Identifier: MIT
// pmc's clocks: wall-time (ns from the TSC) and tsc (ticks), read without entering the kernel.
#include "catch.hpp"
#include "test_support.hpp"

#include <pmc/counter.hpp>
#include <pmc/machine.hpp>

#include <ctime>
#include <thread>

namespace {
double monotonic_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return pmc_test::to_ns(t);
}
void sleep_ms(long ms) {
    timespec t{ms / 1000, (ms % 1000) * 1000000};
    while (::nanosleep(&t, &t) != 0) {
    }
}
} // namespace

TEST_CASE("wall-time measures nanoseconds like CLOCK_MONOTONIC", "[system][clock]") {
    pmc::Counter wall{"wall-time"};
    const auto clock = pmc::wall_time_clock();
    CHECK(wall.path() == (clock.uses_tsc ? pmc::ReadPath::wall_time : pmc::ReadPath::clock));
    CHECK(wall.fd() == -1);
    CHECK_THAT(wall.notes().front(), ContainsSubstring("nanoseconds from"));
    // Bracketed both ways, so that a preemption anywhere (a loaded machine) cannot fail it: the wall-time interval
    // lies within CLOCK_MONOTONIC's [m0, m3] and contains its [m1, m2]. Only the rate is judged (0.1 %).
    for (long ms : {20L, 80L}) {
        const double m0 = monotonic_ns();
        auto iv = wall.interval();
        const double m1 = monotonic_ns();
        sleep_ms(ms);
        const double m2 = monotonic_ns();
        const double counted = static_cast<double>(iv.stop());
        const double m3 = monotonic_ns();
        INFO("sleep " << ms << " ms: wall-time " << counted << " ns, CLOCK_MONOTONIC between " << (m2 - m1)
                      << " and " << (m3 - m0) << " ns");
        CHECK(counted <= (m3 - m0) * 1.001 + 1000);
        CHECK(counted >= (m2 - m1) * 0.999 - 1000);
    }
}

TEST_CASE("wall-time never goes backwards in a thread", "[system][clock]") {
    pmc::Counter wall{"wall-time"};
    std::uint64_t last = wall.read(), backwards = 0;
    for (int i = 0; i < 200000; ++i) {
        const std::uint64_t now = wall.read();
        backwards += now < last;
        last = now;
    }
    CHECK(backwards == 0);
}

TEST_CASE("wall-time is calibrated to CLOCK_MONOTONIC where the kernel publishes no conversion", "[system][clock]") {
    const auto clock = pmc::wall_time_clock();
    if (!clock.uses_tsc || clock.source.find("calibration") == std::string::npos)
        PMC_SKIP("wall-time here comes from " + clock.source + ", not from pmc's own calibration");
    pmc::Counter wall{"wall-time"};
    const double before = monotonic_ns();
    const double w = static_cast<double>(wall.read());
    const double after = monotonic_ns();
    CHECK(w > before - 1e6);
    CHECK(w < after + 1e6);
}

TEST_CASE("tsc ticks at the TSC rate", "[system][clock]") {
    if (!pmc::wall_time_clock().uses_tsc) PMC_SKIP("no invariant TSC here: nothing to compare its rate with");
    auto opened = pmc::Counter::try_open("tsc");
    REQUIRE(opened.ok());
    pmc::Counter& tsc = *opened;
    CHECK(tsc.path() == pmc::ReadPath::tsc);
    // Bracketed both ways as above: the ticks span at most [m0, m3] and at least [m1, m2] of CLOCK_MONOTONIC.
    const double m0 = monotonic_ns();
    auto iv = tsc.interval();
    const double m1 = monotonic_ns();
    sleep_ms(50);
    const double m2 = monotonic_ns();
    const double ticks = static_cast<double>(iv.stop());
    const double m3 = monotonic_ns();
    const double hz = pmc::wall_time_clock().tsc_hz;
    INFO(ticks << " ticks; CLOCK_MONOTONIC between " << (m2 - m1) << " and " << (m3 - m0) << " ns; " << hz << " Hz");
    CHECK(ticks <= hz * (m3 - m0) / 1e9 * 1.01);
    CHECK(ticks >= hz * (m2 - m1) / 1e9 * 0.99);
}

TEST_CASE("clocks may be read from any thread", "[system][clock]") {
    pmc::Counter wall{"wall-time"};
    const std::uint64_t before = wall.read();
    std::uint64_t in_thread = 0;
    std::thread t([&] { in_thread = wall.read(); });
    t.join();
    CHECK(in_thread >= before);
    CHECK(wall.read() >= in_thread);
}

TEST_CASE("every serialization policy gives a working wall-time", "[system][clock]") {
    pmc::BasicCounter<pmc::serialize::none> none{"wall-time"};
    pmc::BasicCounter<pmc::serialize::mfence> mfence{"wall-time"};
    pmc::BasicCounter<pmc::serialize::cpuid> cpuid{"wall-time"};
    pmc::BasicCounter<pmc::serialize::lfence, pmc::source::wall_time> typed{"wall-time"};
    const std::uint64_t a = none.read(), b = mfence.read(), c = cpuid.read(), d = typed.read();
    CHECK(a <= b);
    CHECK(b <= c);
    CHECK(c <= d);
}

TEST_CASE("typed sources refuse events they cannot read", "[system][clock]") {
    using WallOnly = pmc::BasicCounter<pmc::serialize::lfence, pmc::source::wall_time>;
    using TscOnly = pmc::BasicCounter<pmc::serialize::lfence, pmc::source::tsc>;
    using RdpmcOnly = pmc::BasicCounter<pmc::serialize::lfence, pmc::source::rdpmc>;
    auto w = WallOnly::try_open("page-faults");
    REQUIRE_FALSE(w.ok());
    CHECK_THAT(w.failure().message, ContainsSubstring("wall-time"));
    CHECK_FALSE(TscOnly::try_open("wall-time").ok());
    CHECK(TscOnly::try_open("tsc").ok() == pmc::wall_time_clock().uses_tsc);
    auto r = RdpmcOnly::try_open("page-faults");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.failure().message, ContainsSubstring("source::rdpmc"));
    CHECK_THAT(r.failure().message, ContainsSubstring("never on a hardware counter"));
    CHECK_FALSE(RdpmcOnly::try_open("wall-time").ok());
}
