// SPDX-License-Identifier: MIT
// Test main shared by every suite. A suite that cannot run on this machine (no PMU, rdpmc does not trap, no
// perf) defines pmc_test_skip_reason(); the suite then prints why and exits 77, which ctest reports as skipped.
// So does a run in which a case skipped itself (PMC_SKIP, catch.hpp) and nothing failed. A run in which the
// filter matched no case fails.
#if PMC_CATCH2_V3
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include "catch.hpp"

#include <cstdio>
#include <string>
#include <vector>

__attribute__((weak)) std::string pmc_test_skip_reason() { return {}; }

int main(int argc, char** argv) {
    bool listing = false;
    for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
    if (!listing) {
        std::string why = pmc_test_skip_reason();
        if (!why.empty()) {
            std::printf("SKIPPED: %s\n", why.c_str());
            return 77;
        }
    }
    // A filter that matches no case fails (Catch2 v2 would exit 0: ctest called a case whose name it had split at a
    // ';' "passed" without running it).
    std::vector<char*> args(argv, argv + argc);
    char warn[] = "--warn", no_tests[] = "NoTests";
    bool warns = false; // Catch2 v2 refuses a second -w (scripts/qemu-pmu passes its own)
    for (int i = 1; i < argc; ++i) warns = warns || std::string(argv[i]) == "-w" || std::string(argv[i]) == "--warn";
    if (!listing && !warns) args.insert(args.begin() + 1, {warn, no_tests});
    const int status = Catch::Session().run(static_cast<int>(args.size()), args.data());
    // Catch2 v3 exits 4 when every case it ran was skipped (SKIP); a failure exits with another status.
    if (pmc_test::skipped() && (status == 0 || (PMC_CATCH2_V3 && status == 4))) return 77;
    // Catch2 v2 exits with the number of failed checks: 77 of them would read as "skipped" to ctest.
    return status == 0 ? 0 : 1;
}
