// SPDX-License-Identifier: MIT
// The command that pmc emulate, pmc count and pmc sample run, kept as a shell keeps a job: a process group of its
// own, a watchdog that ends that group when pmc dies (SIGKILL included), the signals pmc receives passed on once,
// the terminal handed to the command and taken back, and the command's stops followed.
//
// Why a group of its own: in pmc's group a signal sent to the group (kill -- -PGID, timeout(1)) reached the command
// directly and again through pmc. In its own group it reaches pmc alone, which passes it on once, to the whole
// command (its children included). Why a watchdog: PR_SET_PDEATHSIG reaches the command's first process only; the
// watchdog leads the command's group and ends all of it when the pipe from pmc closes, however pmc ended. If pmc
// died (the pipe closed without finish()'s word), the watchdog also removes the run directory pmc named (the
// plugin's report and sample files), once the group is gone: a kill -9 of pmc leaves nothing in /tmp.
#pragma once

#include <pmc/error.hpp>

#include <sys/types.h>

#include <functional>
#include <string>

namespace pmc_tool {

class Job {
public:
    Job() = default;
    Job(const Job&) = delete;
    Job& operator=(const Job&) = delete;
    ~Job() { finish(); }

    /// Starts the watchdog and the command's first process, in a process group of their own. `in_child` runs in
    /// the command's process with pmc's original signal mask and dispositions (SIGCHLD included) back, and must end
    /// in exec or _exit. From then on pmc passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to the group (one that
    /// pmc started with ignored stays ignored in the command, unless it sets a handler), and if pmc was the
    /// terminal's foreground, the group gets the terminal. Returns the command's pid.
    pmc::Result<pid_t> start(const std::function<void()>& in_child);

    /// Before start(): the directory of this run's temporary files (pmc's own, made for this command alone), which
    /// the watchdog removes (the files in it, then it) should pmc die before finish(). After finish() pmc removes
    /// it itself: the watchdog then leaves it alone.
    void remove_if_pmc_dies(std::string directory) { run_directory_ = std::move(directory); }

    /// Waits for the command's first process to end; its raw wait status. A stop of it stops pmc too (as a shell's
    /// job stops), with the terminal taken back; when pmc is continued, so is the command. False with errno set if
    /// it cannot be waited for. With `block` false: returns at once, false with errno 0 while it runs.
    bool wait(int& raw_status, bool block = true);

    /// Waits until `fd` can be read (data, or the end of a pipe whose writers closed it) and follows the command's
    /// stops meanwhile, as wait() does: a Ctrl-Z that stops the command before its exec, while pmc waits for the
    /// exec's word on `fd`, stops pmc too. Reaps nothing: an end of the command is left for wait().
    void wait_readable(int fd);

    /// Ends what the command left running (SIGKILL to its group, by the watchdog), takes the terminal back and
    /// puts back pmc's signal dispositions; kills and reaps the command first if it was not waited for. Returns how
    /// many processes were still running in the group. Idempotent, never throws.
    int finish() noexcept;

    pid_t pid() const { return child_; }
    /// The last signal pmc passed on to the command's group (0: none), e.g. a Ctrl-C that ended the command before
    /// it ran: its status may then not say so (killed while held, or the group ended by the watchdog).
    static int last_passed_on() noexcept;

private:
    void follow_stop(int sig) noexcept;

    pid_t child_ = -1;    ///< the command's first process
    pid_t watchdog_ = -1; ///< its process group's leader
    int watchdog_pipe_ = -1; ///< the write end: closing it (pmc's exit, any) makes the watchdog end the group
    int tty_ = -1;        ///< the controlling terminal, while the command's group has it
    std::string run_directory_; ///< removed by the watchdog if pmc dies ("": none)
    bool reaped_ = false;
    bool started_ = false;
};

/// Removes the regular files directly in `dir`, then `dir` (nothing below it, nor what a link in it points to):
/// a run directory of pmc's own. Never throws; async-signal-safe but for opendir's allocation.
void remove_run_directory(const char* dir) noexcept;

/// "the command left N processes running: pmc ended them (SIGKILL) ..." for a finish() that found some; else "".
std::string leftover_note(int leftovers);

} // namespace pmc_tool
