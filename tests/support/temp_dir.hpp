// SPDX-License-Identifier: MIT
// A scratch directory for one test case, removed with what it holds when the case ends (PMC_KEEP_TMP=1 keeps it,
// to look at what a failing case wrote).
#pragma once

#include "catch.hpp"

#include <stdlib.h>

#include <cstdlib>
#include <string>

namespace pmc_test {

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/pmc-test-XXXXXX";
        const char* p = ::mkdtemp(tmpl);
        REQUIRE(p != nullptr);
        path = p;
    }
    ~TempDir() {
        if (!std::getenv("PMC_KEEP_TMP")) std::system(("rm -rf '" + path + "'").c_str());
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return path + "/" + name; }
};

} // namespace pmc_test
