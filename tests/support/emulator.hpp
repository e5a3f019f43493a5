// SPDX-License-Identifier: MIT
// Whether the suites that run programs under `pmc emulate` can do so here: the one check they share.
#pragma once

#include "command.hpp"

#include <string>

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

} // namespace pmc_test
