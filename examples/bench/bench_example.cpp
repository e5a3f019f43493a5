// SPDX-License-Identifier: MIT
// pmc/bench.hpp's example suite: sorting and two hash maps (the standard library's and a small open-addressing
// one), each benchmark with its setup outside the measured body. Built twice: pmc-example-bench, and
// pmc-example-bench-regressed with PMC_EXAMPLE_REGRESSION, where sort_1000's comparator goes through a
// std::function (a planted regression in that benchmark alone, which the gate must find exactly).
//
//     pmc emulate -- build/examples/bench/pmc-example-bench --json base.json
//     pmc emulate -- build/examples/bench/pmc-example-bench-regressed --compare base.json   # exit 3: sort_1000
#include "workloads.hpp"

#include <pmc/bench.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

using example::FlatMap;
using example::random_keys;

PMC_BENCHMARK(sort_1000) {
    const auto input = random_keys(1000);
    std::vector<std::uint64_t> v(input.size());
#if defined(PMC_EXAMPLE_REGRESSION)
    const std::function<bool(std::uint64_t, std::uint64_t)> less = [](std::uint64_t a, std::uint64_t b) { return a < b; };
#else
    const auto less = [](std::uint64_t a, std::uint64_t b) { return a < b; };
#endif
    bench.run([&] {
        std::copy(input.begin(), input.end(), v.begin());
        std::sort(v.begin(), v.end(), less);
        pmc::bench::do_not_optimize(v.data());
    });
}

PMC_BENCHMARK(sort_sorted_1000) {
    auto input = random_keys(1000);
    std::sort(input.begin(), input.end());
    std::vector<std::uint64_t> v(input.size());
    bench.run([&] {
        std::copy(input.begin(), input.end(), v.begin());
        std::sort(v.begin(), v.end());
        pmc::bench::do_not_optimize(v.data());
    });
}

PMC_BENCHMARK(unordered_map_insert_1000) {
    const auto keys = random_keys(1000);
    bench.run([&] {
        std::unordered_map<std::uint64_t, std::uint64_t> map;
        map.reserve(keys.size());
        for (auto k : keys) map.emplace(k, k);
        pmc::bench::do_not_optimize(map);
    });
}

PMC_BENCHMARK(unordered_map_find_1000) {
    const auto keys = random_keys(1000);
    std::unordered_map<std::uint64_t, std::uint64_t> map;
    for (auto k : keys) map.emplace(k, k);
    bench.run([&] {
        std::uint64_t sum = 0;
        for (auto k : keys) sum += map.find(k)->second;
        pmc::bench::do_not_optimize(sum);
    });
}

PMC_BENCHMARK(flat_map_insert_1000) {
    const auto keys = random_keys(1000);
    bench.run([&] {
        FlatMap map(2048);
        for (auto k : keys) map.insert(k, k);
        pmc::bench::do_not_optimize(map);
    });
}

PMC_BENCHMARK(flat_map_find_1000) {
    const auto keys = random_keys(1000);
    FlatMap map(2048);
    for (auto k : keys) map.insert(k, k);
    bench.run([&] {
        std::uint64_t sum = 0;
        for (auto k : keys) sum += *map.find(k);
        pmc::bench::do_not_optimize(sum);
    });
}

PMC_BENCHMARK_MAIN()
