// SPDX-License-Identifier: MIT
// The example suites' workloads: pseudo-random keys that are the same every run, and a small open-addressing hash map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace example {

/// The same pseudo-random numbers every run (xorshift64): a benchmark's input must not vary.
inline std::vector<std::uint64_t> random_keys(std::size_t n, std::uint64_t seed = 88172645463325252ULL) {
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

} // namespace example
