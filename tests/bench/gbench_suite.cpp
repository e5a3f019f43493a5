// SPDX-License-Identifier: MIT
// A small Google Benchmark suite with pmc/gbench.hpp's one line in each benchmark, for tests/bench: a sum, a sort
// at two sizes (told apart by PMC_GBENCH_COUNT_ARGS), and a benchmark with a fixed iteration count (no second call
// to subtract: fixed_cost_included).
#include <pmc/gbench.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

static void BM_Sum(benchmark::State& state) {
    std::vector<std::uint32_t> v(100);
    std::iota(v.begin(), v.end(), 1u);
    PMC_GBENCH_COUNT(state);
    for (auto _ : state) {
        std::uint32_t sum = 0;
        for (auto x : v) sum += x;
        benchmark::DoNotOptimize(sum);
    }
}
BENCHMARK(BM_Sum);

static void BM_Sort(benchmark::State& state) {
    std::vector<std::uint32_t> input(static_cast<std::size_t>(state.range(0)));
    std::uint32_t seed = 12345;
    for (auto& x : input) x = seed = seed * 1103515245u + 12345u;
    std::vector<std::uint32_t> v(input.size());
    PMC_GBENCH_COUNT_ARGS(state, state.range(0));
    for (auto _ : state) {
        std::copy(input.begin(), input.end(), v.begin());
        std::sort(v.begin(), v.end());
        benchmark::DoNotOptimize(v.data());
    }
}
BENCHMARK(BM_Sort)->Arg(64)->Arg(512);

static void BM_Fixed(benchmark::State& state) {
    PMC_GBENCH_COUNT(state);
    for (auto _ : state) benchmark::DoNotOptimize(state.iterations());
}
BENCHMARK(BM_Fixed)->Iterations(50);

BENCHMARK_MAIN();
