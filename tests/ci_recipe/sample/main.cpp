// SPDX-License-Identifier: MIT
// A small program profiled per phase, as a user's project embeds pmc's profiler: PMC_PROFILE=FILE turns it on.
// tests/ci_recipe builds it in a git repository and gates a no-op commit and a commit that adds work to one label.
#include "work.hpp"

#include <pmc/profiler.hpp>

#include <cstdio>
#include <cstring>

#include <unistd.h> // environ

int main() {
    auto prof = pmc::Profiler::from_env();
    const auto l_main = prof.label("main");
    const auto l_input = prof.label("make-input");
    const auto l_parse = prof.label("parse");
    const auto l_checksum = prof.label("checksum");
    const auto l_sort = prof.label("sort");

    auto whole = prof.scope(l_main);
    // The source's path, as a log line or an assert message carries it: built in another directory, the program
    // does other work here (the gate builds both sides in one directory).
    std::printf("sample, built from %s\n", __FILE__);
    // Its environment, as a program that copies it for a child does: run with another, it does other work here (the
    // gate gives both sides the same).
    std::size_t env_bytes = 0;
    for (char** e = environ; *e; ++e) env_bytes += std::strlen(*e) + 1;
    std::string text;
    {
        auto s = prof.scope(l_input);
        text = make_input(400);
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
    std::printf("%zu numbers, checksum %016llx, sum %llu; %zu bytes of environment\n", numbers.size(),
                static_cast<unsigned long long>(h), static_cast<unsigned long long>(sum), env_bytes);
}
