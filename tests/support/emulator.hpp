// SPDX-License-Identifier: MIT
// What the suites that run programs under `pmc emulate` share: whether they can run here, and a whole command's
// output taken from the runs that agree.
#pragma once

#include "command.hpp"

#include <regex>
#include <string>
#include <vector>

namespace pmc_test {

#ifdef PMC_TOOL_PATH
/// Why `pmc emulate` (the suite's PMC_TOOL_PATH) cannot run a program here, or "": a sanitized build, or no QEMU
/// that loads pmc's plugin (asked once per process, by running /bin/true under it).
inline std::string why_no_emulator() {
#if defined(PMC_SANITIZED)
    return "this build is sanitized: AddressSanitizer's shadow memory does not fit QEMU user mode's address space";
#else
    static const std::string why = [] {
        const auto r = run_command("'" + tool() + "' emulate -- /bin/true 2>&1");
        if (r.status == 0) return std::string();
        return "pmc emulate cannot run here (scripts/install-deps installs qemu-user): " + r.out;
    }();
    return why;
#endif
}
#endif

/// A whole command under the emulator, run until two runs print the same (at most three; elapsed times aside) and
/// end alike: that run, or the first if no two agreed (the caller's checks then show it; `agreed` says which).
/// `runs` receives every run, for what must hold in each. A whole command's count includes its start-up and exit:
/// single-threaded ones have repeated in every run since the preload library stopped searching the plugin's random
/// report path with strstr (docs/emulated-pmu.md, Limits); this keeps a regression there from failing cases that
/// test something else. An interval's count is exact in every run.
inline CommandResult run_agreed(const std::string& command, bool* agreed = nullptr,
                                std::vector<CommandResult>* runs = nullptr) {
    const auto key = [](const std::string& out) {
        return std::regex_replace(out, std::regex("\"elapsed_ns\":[0-9]+|[0-9.]+ seconds time elapsed"), "");
    };
    std::vector<CommandResult> made;
    std::vector<CommandResult>& all = runs ? *runs : made;
    all.clear();
    for (int i = 0; i < 3; ++i) {
        all.push_back(run_command(command));
        for (std::size_t j = 0; j + 1 < all.size(); ++j)
            if (key(all[j].out) == key(all.back().out) && all[j].status == all.back().status) {
                if (agreed) *agreed = true;
                return all.back();
            }
    }
    if (agreed) *agreed = false;
    return all.front();
}

} // namespace pmc_test
