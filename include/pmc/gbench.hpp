// SPDX-License-Identifier: MIT
// pmc/gbench.hpp: pmc's counters per iteration in a Google Benchmark suite (1.7 and later), with one line a
// benchmark and no other change:
//
//     static void BM_Sort(benchmark::State& state) {
//         auto input = make_input(state.range(0));
//         PMC_GBENCH_COUNT(state);                 // the one line: before the loop
//         for (auto _ : state) { ... }
//     }
//
// Each benchmark then reports a user counter "instructions:u/iter" (pmc emulate, or a PMU) per iteration. How:
// Google Benchmark calls a benchmark's function several times with growing iteration counts (1, 10, ..., then the
// reported run), and the line reads the counter when it runs and again when the function returns. Between two
// calls of one benchmark with n1 < n2 iterations, (count2 - count1) / (n2 - n1) is the count per iteration:
// everything the function does once (its setup, the line's own reads, Google Benchmark's start and stop) cancels.
// Under `pmc emulate` that figure is exact and the same every run for a deterministic body, whatever iteration
// counts the timing chose. Where a benchmark ran once only (->Iterations(n), or one iteration took longer than the
// minimum time), there is nothing to subtract: it reports count / n, which includes the function's fixed cost, and
// adds a counter "fixed_cost_included" = 1. Counted on the benchmark's first thread only (thread_index() 0).
// The counter opens once per thread; if it cannot open, nothing is reported and the reason is printed once.
// docs/bench.md has what this adapter can and cannot do.
#pragma once

#if __has_include(<benchmark/benchmark.h>)

#include <pmc/config.hpp>
#include <pmc/counter.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

PMC_BEGIN_NAMESPACE
namespace gbench {

/// The event counted; set it before the first benchmark runs (default instructions:u).
inline std::string& event() {
    static std::string name = "instructions:u";
    return name;
}

namespace detail {
/// This thread's counter, opened on first use; null (and the reason printed once) where it cannot open.
inline Counter* counter() {
    thread_local std::unique_ptr<Counter> c;
    thread_local bool tried = false;
    if (!tried) {
        tried = true;
        auto opened = Counter::try_open(event());
        if (opened) {
            c = std::make_unique<Counter>(std::move(*opened));
        } else {
            static std::once_flag said;
            std::call_once(said, [&] {
                std::fprintf(stderr, "pmc/gbench.hpp: no '%s' per iteration: %s\n", event().c_str(),
                             opened.failure().message.c_str());
            });
        }
    }
    return c.get();
}

/// Each benchmark's calls since its calibration began (a call of 1 iteration): iterations -> count. Keyed by the
/// function (and the arguments PMC_GBENCH_COUNT_ARGS adds).
inline std::map<std::string, std::map<std::uint64_t, std::uint64_t>>& history() {
    static std::map<std::string, std::map<std::uint64_t, std::uint64_t>> h;
    return h;
}
inline std::mutex& history_lock() {
    static std::mutex m;
    return m;
}
} // namespace detail

/// Reads the counter now and again when it leaves scope (after the benchmark's loop), then sets the state's user
/// counters. Make it with PMC_GBENCH_COUNT(state).
class Count {
public:
    Count(benchmark::State& state, std::string key) : state_(state), key_(std::move(key)) {
        if (state_.thread_index() != 0) return;
        counter_ = detail::counter();
        if (counter_) start_ = counter_->read(); // the last thing before the loop
    }
    Count(const Count&) = delete;
    Count& operator=(const Count&) = delete;
    ~Count() {
        if (!counter_) return;
        const std::uint64_t count = counter_->read() - start_;
        const auto n = static_cast<std::uint64_t>(state_.iterations());
        if (n == 0) return; // skipped, or an error
        try {
            std::uint64_t fewer = 0, fewer_count = 0; // the call with the most iterations under n
            {
                std::lock_guard<std::mutex> lock(detail::history_lock());
                auto& calls = detail::history()[key_];
                if (n == 1) calls.clear(); // Google Benchmark's calibration starts again: another instance
                auto below = calls.lower_bound(n);
                if (below != calls.begin()) {
                    --below;
                    fewer = below->first;
                    fewer_count = below->second;
                }
                calls.emplace(n, count); // repetitions of n keep the first
            }
            const std::string name = event() + "/iter";
            if (fewer) {
                const double per = (static_cast<double>(count) - static_cast<double>(fewer_count)) /
                                   static_cast<double>(n - fewer);
                state_.counters[name] = benchmark::Counter(per);
            } else {
                state_.counters[name] = benchmark::Counter(static_cast<double>(count) / static_cast<double>(n));
                state_.counters["fixed_cost_included"] = benchmark::Counter(1);
            }
        } catch (...) { // a destructor never throws: std::bad_alloc leaves the counters unset
        }
    }

private:
    benchmark::State& state_;
    std::string key_;
    Counter* counter_ = nullptr;
    std::uint64_t start_ = 0;
};


} // namespace gbench
PMC_END_NAMESPACE

/// Counts this benchmark's iterations with pmc (one line, before the loop). Benchmarks of one function with
/// different arguments: PMC_GBENCH_COUNT_ARGS(state, state.range(0)) tells them apart.
#define PMC_GBENCH_COUNT(state) ::pmc::gbench::Count pmc_gbench_count_((state), __func__)
#define PMC_GBENCH_COUNT_ARGS(state, ...)                                                                              \
    ::pmc::gbench::Count pmc_gbench_count_((state), ::pmc::gbench::detail::args_key(__func__, __VA_ARGS__))

PMC_BEGIN_NAMESPACE
namespace gbench::detail {
template <class... Args>
std::string args_key(const char* function, const Args&... args) {
    std::string key = function;
    ((key += "/" + std::to_string(args)), ...);
    return key;
}
} // namespace gbench::detail
PMC_END_NAMESPACE

#endif // __has_include(<benchmark/benchmark.h>)
