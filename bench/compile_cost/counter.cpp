// SPDX-License-Identifier: MIT
// What #include <pmc/counter.hpp> costs a user's file: one counter opened and one interval read.
#include <pmc/counter.hpp>

#include <cstdint>

std::uint64_t count_work(void (*work)()) {
    pmc::Counter c{"instructions:u"};
    auto iv = c.interval();
    work();
    return iv.stop();
}
