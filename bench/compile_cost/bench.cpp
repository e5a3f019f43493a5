// SPDX-License-Identifier: MIT
// What #include <pmc/bench.hpp> costs a user's file: one benchmark and the runner's main.
#include <pmc/bench.hpp>

void work();

PMC_BENCHMARK(work) {
    bench.run([] { work(); });
}
PMC_BENCHMARK_MAIN()
