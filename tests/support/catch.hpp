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
