// SPDX-License-Identifier: MIT
#include <pmc/counter.hpp>
#include <algorithm>
#include <cstdio>
#include <vector>

int main() {
    pmc::Counter faults{"page-faults"};  // or "instructions:u" where there is a PMU; throws pmc::error if it can't
    pmc::Counter ns{"wall-time"};
    auto iv = faults.interval();         // starts now
    auto timer = ns.scoped([](std::uint64_t n) { std::printf("%llu ns\n", (unsigned long long)n); });
    std::vector<char> buffer(64 << 20, 1);  // the work: 64 MiB of fresh memory
    const auto n = iv.stop();
    // Read after the interval: a buffer nothing reads is removed by the optimizer (clang -O2), and with it the work.
    std::printf("%llu page faults for %zu bytes\n", (unsigned long long)n,
                static_cast<std::size_t>(std::count(buffer.begin(), buffer.end(), 1)));
}
