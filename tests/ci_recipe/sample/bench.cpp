// SPDX-License-Identifier: MIT
// The sample's microbenchmarks (pmc/bench.hpp), for pmc-gate --bench: the same work as main.cpp's labels, each
// measured per iteration. A change inside checksum() moves the benchmark "checksum" alone.
#include "work.hpp"

#include <pmc/bench.hpp>

PMC_BENCHMARK(checksum) {
    const std::vector<std::uint32_t> numbers = parse(make_input(200));
    bench.run([&] { pmc::bench::do_not_optimize(checksum(numbers)); });
}

PMC_BENCHMARK(parse) {
    const std::string text = make_input(200);
    bench.run([&] {
        auto numbers = parse(text);
        pmc::bench::do_not_optimize(numbers.data());
    });
}

PMC_BENCHMARK_MAIN()
