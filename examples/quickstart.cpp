// SPDX-License-Identifier: MIT
#include <pmc/counter.hpp>
#include <cstdio>
#include <vector>

int main() {
    pmc::Counter faults{"page-faults"};  // or "instructions:u" where there is a PMU; throws pmc::error if it can't
    pmc::Counter ns{"wall-time"};
    auto iv = faults.interval();         // starts now
    auto timer = ns.scoped([](std::uint64_t n) { std::printf("%llu ns\n", (unsigned long long)n); });
    std::vector<char> buffer(64 << 20, 1);  // the work: 64 MiB of fresh memory
    std::printf("%llu page faults for %zu bytes\n", (unsigned long long)iv.stop(), buffer.size());
}
