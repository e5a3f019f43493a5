// SPDX-License-Identifier: MIT
// Running a command from a test: its standard output, exit status, and the signal that ended it.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace pmc_test {

struct CommandResult {
    std::string out; ///< what the command wrote to stdout (add "2>&1" to the command for stderr too)
    int status = -1; ///< exit status, or -1 if the shell running it was ended by a signal
    int signal = 0;  ///< that signal
};

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

} // namespace pmc_test
