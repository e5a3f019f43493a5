// SPDX-License-Identifier: MIT
// A loop of known length: exactly 2 * n user-mode instructions and n branches (dec+jnz, or subs+b.ne), plus a
// constant for the call; n >= 1. Not inlined, so the instructions around it are the same for every n.
#pragma once

#include <cstdint>

namespace pmc_test {
__attribute__((noinline)) inline void known_loop(std::uint64_t n) {
#if defined(__x86_64__)
    asm volatile("1:\n\tdec %0\n\tjnz 1b" : "+r"(n) : : "cc");
#elif defined(__aarch64__)
    asm volatile("1:\n\tsubs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
#else
#error "pmc's tests need a known instruction loop for this architecture"
#endif
}
} // namespace pmc_test
