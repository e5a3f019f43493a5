// SPDX-License-Identifier: MIT
// A small program profiled per phase, as a user's project embeds pmc's profiler: PMC_PROFILE=FILE turns it on.
// tests/ci_recipe builds it in a git repository and gates a no-op commit and a commit that adds work to one label.
#include <pmc/profiler.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

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

} // namespace

int main() {
    auto prof = pmc::Profiler::from_env();
    const auto l_main = prof.label("main");
    const auto l_input = prof.label("make-input");
    const auto l_parse = prof.label("parse");
    const auto l_checksum = prof.label("checksum");
    const auto l_sort = prof.label("sort");

    auto whole = prof.scope(l_main);
    std::string text;
    {
        auto s = prof.scope(l_input);
        std::uint32_t x = 12345;
        for (int i = 0; i < 400; ++i) {
            x = x * 1103515245u + 12345u;
            text += std::to_string(x % 100000);
            text += ' ';
        }
    }
    std::vector<std::uint32_t> numbers;
    {
        auto s = prof.scope(l_parse);
        numbers = parse(text);
    }
    std::uint64_t h = 0;
    {
        auto s = prof.scope(l_checksum);
        h = checksum(numbers);
    }
    std::uint64_t sum = 0;
    {
        auto s = prof.scope(l_sort);
        sum = sort_and_sum(numbers);
    }
    std::printf("%zu numbers, checksum %016llx, sum %llu\n", numbers.size(), static_cast<unsigned long long>(h),
                static_cast<unsigned long long>(sum));
}
