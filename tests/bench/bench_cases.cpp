// SPDX-License-Identifier: MIT
// Benchmarks that go wrong, for tests/bench: one throws, one never calls bench.run, one dies of a signal, and one
// is fine. The tests pick them with --filter and check the harness's messages and exit status.
#include <pmc/bench.hpp>

#include <csignal>
#include <cstdint>
#include <stdexcept>

PMC_BENCHMARK(fine) {
    std::uint64_t x = 1;
    bench.run([&] {
        x = x * 3 + 1;
        pmc::bench::do_not_optimize(x);
    });
}

PMC_BENCHMARK(throws) { throw std::runtime_error("the setup found no input file"); }

PMC_BENCHMARK(measures_nothing) {}

PMC_BENCHMARK(dies) { std::raise(SIGABRT); }

PMC_BENCHMARK_MAIN()
