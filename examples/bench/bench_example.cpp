// SPDX-License-Identifier: MIT
// pmc/bench.hpp's example suite: sorting and two hash maps (the standard library's and a small open-addressing
// one), each benchmark with its setup outside the measured body. Built twice: pmc-example-bench, and
// pmc-example-bench-regressed with PMC_EXAMPLE_REGRESSION, where sort_1000's comparator goes through a
// std::function (a planted regression in that benchmark alone, which the gate must find exactly).
//
//     pmc emulate -- build/examples/bench/pmc-example-bench --json base.json
//     pmc emulate -- build/examples/bench/pmc-example-bench-regressed --compare base.json   # exit 3: sort_1000
#include <pmc/bench.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace {

/// The same pseudo-random numbers every run (xorshift64): a benchmark's input must not vary.
std::vector<std::uint64_t> random_keys(std::size_t n, std::uint64_t seed = 88172645463325252ULL) {
    std::vector<std::uint64_t> keys(n);
    for (auto& k : keys) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        k = seed;
    }
    return keys;
}

/// A small open-addressing hash map (linear probing, power-of-two capacity, key 0 reserved as empty).
class FlatMap {
public:
    explicit FlatMap(std::size_t capacity) : slots_(capacity) {}
    void insert(std::uint64_t key, std::uint64_t value) {
        for (std::size_t i = index(key);; i = (i + 1) & (slots_.size() - 1))
            if (slots_[i].key == 0 || slots_[i].key == key) {
                slots_[i] = {key, value};
                return;
            }
    }
    const std::uint64_t* find(std::uint64_t key) const {
        for (std::size_t i = index(key);; i = (i + 1) & (slots_.size() - 1)) {
            if (slots_[i].key == key) return &slots_[i].value;
            if (slots_[i].key == 0) return nullptr;
        }
    }

private:
    struct Slot {
        std::uint64_t key = 0, value = 0;
    };
    std::size_t index(std::uint64_t key) const {
        return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> 32) & (slots_.size() - 1);
    }
    std::vector<Slot> slots_;
};

} // namespace

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
