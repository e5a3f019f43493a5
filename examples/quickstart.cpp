// SPDX-License-Identifier: MIT
#include <pmc/counter.hpp>
#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
    if (argc > 1) {  // it takes no arguments: --help says what it does, anything else is a usage error
        const bool help = std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h";
        std::fprintf(help ? stdout : stderr, "usage: %s (no arguments): page faults and time to fill 64 MiB\n",
                     argv[0]);
        return help ? 0 : 1;
    }
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
