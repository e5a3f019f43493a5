// SPDX-License-Identifier: MIT
// What #include <pmc/group.hpp> costs a user's file: one group of two events opened and one interval read.
#include <pmc/group.hpp>

#include <cstdint>

std::uint64_t count_work(void (*work)()) {
    pmc::Group g{"instructions:u", "cycles:u"};
    auto iv = g.interval();
    work();
    return iv.stop()[0].raw;
}
