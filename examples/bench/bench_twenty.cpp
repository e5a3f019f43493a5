// SPDX-License-Identifier: MIT
// Twenty small benchmarks (sorting, sorted input, std::unordered_map inserts, an open-addressing map's lookups, each
// at 16 to 4096 keys), the suite docs/bench.md's cost table measures natively, under pmc emulate and under Callgrind.
#include "workloads.hpp"

#include <pmc/bench.hpp>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

using example::FlatMap;
using example::random_keys;

namespace {
void sort_random(pmc::bench::Bench& bench, std::size_t n) {
    const auto input = random_keys(n);
    std::vector<std::uint64_t> v(n);
    bench.run([&] {
        std::copy(input.begin(), input.end(), v.begin());
        std::sort(v.begin(), v.end());
        pmc::bench::do_not_optimize(v.data());
    });
}

void sort_sorted(pmc::bench::Bench& bench, std::size_t n) {
    auto input = random_keys(n);
    std::sort(input.begin(), input.end());
    std::vector<std::uint64_t> v(n);
    bench.run([&] {
        std::copy(input.begin(), input.end(), v.begin());
        std::sort(v.begin(), v.end());
        pmc::bench::do_not_optimize(v.data());
    });
}

void unordered_insert(pmc::bench::Bench& bench, std::size_t n) {
    const auto keys = random_keys(n);
    bench.run([&] {
        std::unordered_map<std::uint64_t, std::uint64_t> map;
        map.reserve(n);
        for (auto k : keys) map.emplace(k, k);
        pmc::bench::do_not_optimize(map);
    });
}

void flat_find(pmc::bench::Bench& bench, std::size_t n) {
    const auto keys = random_keys(n);
    FlatMap map(2 * n);
    for (auto k : keys) map.insert(k, k);
    bench.run([&] {
        std::uint64_t sum = 0;
        for (auto k : keys) sum += *map.find(k);
        pmc::bench::do_not_optimize(sum);
    });
}
} // namespace

#define PMC_EXAMPLE_SIZES(kind)                                                                                        \
    PMC_BENCHMARK(kind##_16) { kind(bench, 16); }                                                                      \
    PMC_BENCHMARK(kind##_64) { kind(bench, 64); }                                                                      \
    PMC_BENCHMARK(kind##_256) { kind(bench, 256); }                                                                    \
    PMC_BENCHMARK(kind##_1024) { kind(bench, 1024); }                                                                  \
    PMC_BENCHMARK(kind##_4096) { kind(bench, 4096); }

PMC_EXAMPLE_SIZES(sort_random)
PMC_EXAMPLE_SIZES(sort_sorted)
PMC_EXAMPLE_SIZES(unordered_insert)
PMC_EXAMPLE_SIZES(flat_find)

PMC_BENCHMARK_MAIN()
