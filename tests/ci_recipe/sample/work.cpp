// SPDX-License-Identifier: MIT
#include "work.hpp"

#include <utility>

std::string make_input(int count) {
    std::string text;
    std::uint32_t x = 12345;
    for (int i = 0; i < count; ++i) {
        x = x * 1103515245u + 12345u;
        text += std::to_string(x % 100000);
        text += ' ';
    }
    return text;
}

std::vector<std::uint32_t> parse(const std::string& text) {
    std::vector<std::uint32_t> numbers;
    std::uint32_t n = 0;
    for (char c : text) {
        if (c >= '0' && c <= '9') {
            n = n * 10 + static_cast<std::uint32_t>(c - '0');
        } else {
            numbers.push_back(n);
            n = 0;
        }
    }
    return numbers;
}

std::uint64_t checksum(const std::vector<std::uint32_t>& numbers) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::uint32_t n : numbers) h = (h ^ n) * 1099511628211ull;
    return h;
}

std::uint64_t sort_and_sum(std::vector<std::uint32_t> numbers) {
    for (std::size_t i = 1; i < numbers.size(); ++i) // insertion sort: deterministic work, no allocation
        for (std::size_t j = i; j > 0 && numbers[j - 1] > numbers[j]; --j) std::swap(numbers[j - 1], numbers[j]);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < numbers.size(); i += 2) sum += numbers[i];
    return sum;
}
