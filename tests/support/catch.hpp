// SPDX-License-Identifier: MIT
// Catch2 v2 (Debian 12's catch2 2.13) or v3, whichever CMake found.
#pragma once
#if PMC_CATCH2_V3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;
#else
#include <catch2/catch.hpp>
// Catch2 v2 spells it Contains.
inline Catch::Matchers::StdString::ContainsMatcher ContainsSubstring(const std::string& s) {
    return Catch::Matchers::Contains(s);
}
#endif

#include <cstdio>
#include <string>

// A test case whose precondition is missing here (no objdump, rdtsc not trappable, too few CPUs, ...) is reported
// as skipped with the reason, never as passed: PMC_SKIP("reason") prints "SKIPPED: reason" on a line of its own
// (scripts/run-tests lists these) and leaves the case; the test main then exits 77, which ctest reports as
// skipped (SKIP_RETURN_CODE, tests/CMakeLists.txt), unless an assertion failed: a failure always wins. With
// Catch2 v3, SKIP() also marks the case in Catch's own report.
namespace pmc_test {
/// Set by PMC_SKIP; read by tests/support/main.cpp.
inline bool& skipped() {
    static bool flag = false;
    return flag;
}
inline void print_skip(const std::string& reason) {
    std::printf("\nSKIPPED: %s\n", reason.c_str());
    std::fflush(stdout);
    skipped() = true;
}
} // namespace pmc_test
#if PMC_CATCH2_V3
#include <catch2/catch_test_macros.hpp>
#define PMC_SKIP(reason)                                                                                               \
    do {                                                                                                               \
        const std::string pmc_skip_reason_ = (reason);                                                                 \
        pmc_test::print_skip(pmc_skip_reason_);                                                                        \
        SKIP(pmc_skip_reason_);                                                                                        \
    } while (false)
#else
#define PMC_SKIP(reason)                                                                                               \
    do {                                                                                                               \
        pmc_test::print_skip(reason);                                                                                  \
        return;                                                                                                        \
    } while (false)
#endif
