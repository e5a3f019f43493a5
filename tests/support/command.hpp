// SPDX-License-Identifier: MIT
// Running a command from a test: its standard output, exit status, and the signal that ended it.
#pragma once

#include <sys/wait.h>

#include <cstddef>
#include <cstdio>
#include <string>

namespace pmc_test {

struct CommandResult {
    std::string out; ///< what the command wrote to stdout (add "2>&1" to the command for stderr too)
    int status = -1; ///< exit status, or -1 if the shell running it was ended by a signal
    int signal = 0;  ///< that signal
};

#ifdef PMC_TOOL_PATH
/// The pmc command this build made (the suite's PMC_TOOL_PATH).
inline std::string tool() { return PMC_TOOL_PATH; }
#endif

/// Runs `command` through /bin/sh and waits for it.
inline CommandResult run_command(const std::string& command) {
    CommandResult r;
    if (FILE* p = ::popen(command.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
        const int st = ::pclose(p);
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
    return r;
}

/// Tests that run one process per case (every cut length of a file, byte flips) run every `k`th case in a sanitized
/// build, all of them otherwise. There a process costs 15 times its plain start (`pmc --version`: 73 ms of CPU against
/// 4.5, half of it the leak check at exit, most of the rest the shadow memory and UBSan's data), and the reader under
/// those cases is checked at every length in-process, sanitized (test_profile_reader.cpp), and by the fuzzer
/// (scripts/fuzz --target profile).
constexpr std::size_t one_in_sanitized(std::size_t k) {
#if defined(PMC_SANITIZED)
    return k;
#else
    return static_cast<void>(k), std::size_t{1};
#endif
}

} // namespace pmc_test
