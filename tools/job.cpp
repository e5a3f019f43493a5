// SPDX-License-Identifier: MIT
// The command as a job of its own (job.hpp): process group, watchdog, signals passed on once, terminal, stops.
#include "job.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace pmc_tool {

namespace {

/// What pmc passes on to the command: the signals a terminal, timeout(1), a CI runner's cancel or kill(1) send.
constexpr int passed_on[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
struct sigaction saved_actions[std::size(passed_on)];
struct sigaction saved_child_action;
std::atomic<pid_t> job_group{0};

/// The last signal passed on: its number, its sender and when (the handler's own; the handlers block each other).
int last_signal = 0;
pid_t last_sender = 0;
timespec last_time{};

/// To the command's whole group, once per signal pmc receives: pmc's own group (where a group signal lands) holds
/// none of the command's processes, so nothing reaches them twice. One exception: the same signal from the same
/// sender again within 50 ms is the same request, as timeout(1) makes it (to its child, then to the child's group);
/// passed on twice it would run the program's handler twice, where natively the kernel merged the two 9 times in 10.
extern "C" void pass_on(int sig, siginfo_t* info, void*) {
    const int saved = errno;
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const long long since_ns = (now.tv_sec - last_time.tv_sec) * 1000000000LL + (now.tv_nsec - last_time.tv_nsec);
    const bool repeat = sig == last_signal && info && info->si_code == SI_USER && info->si_pid == last_sender &&
                        since_ns < 50000000;
    last_signal = sig;
    last_sender = info && info->si_code == SI_USER ? info->si_pid : 0;
    last_time = now;
    if (const pid_t group = job_group.load(); group > 0 && !repeat) ::kill(-group, sig);
    errno = saved;
}

sigset_t set_of(std::initializer_list<int> signals) {
    sigset_t set;
    sigemptyset(&set);
    for (int s : signals) sigaddset(&set, s);
    return set;
}

/// tcsetpgrp from a background process group raises SIGTTOU unless it is blocked.
void give_terminal(int tty, pid_t group) noexcept {
    const sigset_t ttou = set_of({SIGTTOU});
    sigset_t old;
    ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
    ::tcsetpgrp(tty, group);
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

/// What finish() writes to the watchdog before closing the pipe: pmc lives on and removes its own files.
constexpr char pmc_finishing = 'f';

/// The watchdog: leads the command's process group, holds nothing of pmc's but the pipe's read end, and ends the
/// whole group (itself included) when the pipe closes: pmc finished, or died in any way. If pmc died (no word
/// before the end of the pipe) and named a run directory, a process of its own removes that directory once no
/// process of the group is left to write there.
[[noreturn]] void watchdog(int pipe_read, const char* run_directory) {
    ::setpgid(0, 0);
    // (Every signal is blocked from the fork on, by start(): those pmc passes on to the group are not for it.)
    ::prctl(PR_SET_NAME, "pmc-watchdog", 0, 0, 0);
    if (pipe_read != 0) ::dup2(pipe_read, 0);
    // Nothing else of pmc's kept open (its output, the command's pipes, -o FILE): their readers see EOF as before.
    if (::syscall(SYS_close_range, 1u, ~0u, 0u) != 0)
        for (int fd = 1; fd < 1024; ++fd) ::close(fd);
    if (::chdir("/") != 0) {} // (holds no directory busy)
    bool finishing = false;
    for (char byte;;) {
        const ssize_t n = ::read(0, &byte, 1);
        if (n == 1 && byte == pmc_finishing) finishing = true;
        if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    if (!finishing && run_directory && *run_directory) {
        // The remover leaves the group before the group's SIGKILL, and waits for the group to be gone.
        const pid_t group = ::getpgrp();
        const pid_t remover = ::fork();
        if (remover == 0) {
            ::setpgid(0, 0);
            ::close(0);
            for (int i = 0; i < 2000 && !(::kill(-group, 0) != 0 && errno == ESRCH); ++i) {
                const timespec pause{0, 5000000}; // 5 ms, 10 s at most
                ::nanosleep(&pause, nullptr);
            }
            remove_run_directory(run_directory);
            _exit(0);
        }
        if (remover > 0) ::setpgid(remover, remover); // (it does so too: out of the group before the kill, either way)
    }
    ::kill(0, SIGKILL);
    _exit(0);
}

/// The processes of `group` still alive (not zombies), other than `except_a` and `except_b`.
int members_alive(pid_t group, pid_t except_a, pid_t except_b) {
    int alive = 0;
    DIR* proc = ::opendir("/proc");
    if (!proc) return 0;
    while (const dirent* e = ::readdir(proc)) {
        char* end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == except_a || pid == except_b) continue;
        // (read(2), not a stream: a process that exits meanwhile makes the read fail with ESRCH)
        char buffer[1024];
        const int fd = ::open((std::string("/proc/") + e->d_name + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        const ssize_t got = ::read(fd, buffer, sizeof buffer - 1);
        ::close(fd);
        if (got <= 0) continue;
        const std::string stat(buffer, static_cast<std::size_t>(got));
        const auto paren = stat.rfind(')'); // (the command's name may hold spaces and parentheses)
        if (paren == std::string::npos) continue;
        char state = 0;
        long parent = 0, pgrp = 0;
        if (std::sscanf(stat.c_str() + paren + 1, " %c %ld %ld", &state, &parent, &pgrp) == 3 && pgrp == group &&
            state != 'Z' && state != 'X')
            ++alive;
    }
    ::closedir(proc);
    return alive;
}

} // namespace

pmc::Result<pid_t> Job::start(const std::function<void()>& in_child) {
    if (started_) return pmc::make_failure(EBUSY, "a command is running already");
    // The terminal goes to the command's group only if pmc has it and is its shell's whole job (a foreground
    // group that pmc leads alone), as a shell hands it over. Beside others in its group (`pmc ... | less`, make's
    // recipes) pmc keeps it: they read it, and the terminal's Ctrl-C reaches pmc, which passes it on.
    int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (tty >= 0 && (::tcgetpgrp(tty) != ::getpgrp() || ::getpgrp() != ::getpid() ||
                     members_alive(::getpgrp(), ::getpid(), ::getpid()) > 0)) {
        ::close(tty);
        tty = -1;
    }
    int pipe_ends[2];
    if (::pipe2(pipe_ends, O_CLOEXEC) != 0) {
        const int err = errno;
        if (tty >= 0) ::close(tty);
        return pmc::make_failure(err, std::string("cannot make a pipe: ") + std::strerror(err));
    }
    // Blocked from before the forks until the handlers know the group: a signal sent in between waits, then reaches
    // the command. SIGCHLD at its default so that waitpid sees the command end (not so if pmc started with it
    // ignored); the command gets pmc's own back.
    sigset_t blocked = set_of({SIGINT, SIGTERM, SIGHUP, SIGQUIT}), old_mask;
    ::sigprocmask(SIG_BLOCK, &blocked, &old_mask);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    ::sigaction(SIGCHLD, &default_action, &saved_child_action);
    auto undo = [&](int err, const char* what) {
        ::sigaction(SIGCHLD, &saved_child_action, nullptr);
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        if (tty >= 0) ::close(tty);
        return pmc::make_failure(err, std::string(what) + std::strerror(err));
    };
    std::fflush(nullptr);
    // The watchdog starts with every signal blocked. Under load it may not run for a while after the fork; a Ctrl-Z
    // to the group then stopped it before it closed the descriptors it inherited, and pmc sample, reading to the
    // end of its exec-error pipe, waited for it for ever, with the command stopped and the terminal not taken back.
    sigset_t all, before_watchdog;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, &before_watchdog);
    const pid_t watchdog_pid = ::fork();
    if (watchdog_pid != 0) ::sigprocmask(SIG_SETMASK, &before_watchdog, nullptr);
    if (watchdog_pid < 0) {
        const int err = errno;
        ::close(pipe_ends[0]);
        ::close(pipe_ends[1]);
        return undo(err, "fork failed: ");
    }
    if (watchdog_pid == 0) watchdog(pipe_ends[0], run_directory_.c_str());
    ::setpgid(watchdog_pid, watchdog_pid); // (the watchdog does it too: whichever runs first)
    ::close(pipe_ends[0]);
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child < 0) {
        const int err = errno;
        ::close(pipe_ends[1]); // the watchdog ends itself
        while (::waitpid(watchdog_pid, nullptr, 0) < 0 && errno == EINTR) {}
        return undo(err, "fork failed: ");
    }
    if (child == 0) {
        ::close(pipe_ends[1]);
        ::setpgid(0, watchdog_pid);
        if (tty >= 0) {
            give_terminal(tty, watchdog_pid); // before exec too: a command that reads at once gets no SIGTTIN
            ::close(tty);
        }
        // Should pmc die before its watchdog acts, the command's first process goes at once.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) _exit(128 + SIGKILL);
        ::sigaction(SIGCHLD, &saved_child_action, nullptr);
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr); // pmc's dispositions, untouched in this process
        in_child();
        _exit(127);
    }
    ::setpgid(child, watchdog_pid);
    if (tty >= 0) give_terminal(tty, watchdog_pid);
    child_ = child;
    watchdog_ = watchdog_pid;
    watchdog_pipe_ = pipe_ends[1];
    tty_ = tty;
    reaped_ = false;
    started_ = true;
    job_group.store(watchdog_pid);
    // Passed on even where pmc started with the signal ignored (a background job's SIGINT): the command inherited
    // that SIG_IGN and ignores it too, unless it set a handler of its own, which then runs, as it would natively.
    struct sigaction sa {};
    sa.sa_sigaction = pass_on;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sa.sa_mask = blocked; // (one handler at a time: they share the last signal's record)
    last_signal = 0;
    for (std::size_t i = 0; i < std::size(passed_on); ++i) ::sigaction(passed_on[i], &sa, &saved_actions[i]);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return child;
}

void Job::follow_stop(int sig) noexcept {
    if (tty_ >= 0) give_terminal(tty_, ::getpgrp());
    // pmc stops as its command did, so that the shell that runs pmc sees its job stopped and takes the terminal.
    const int stop = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU ? sig : SIGSTOP;
    struct sigaction default_action {}, old {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    if (stop != SIGSTOP) ::sigaction(stop, &default_action, &old);
    ::raise(stop); // returns when pmc is continued (fg, bg, kill -CONT)
    if (stop != SIGSTOP) ::sigaction(stop, &old, nullptr);
    // Continued in the foreground (fg): the command's group gets the terminal again; in the background (bg) not.
    if (tty_ >= 0 && ::tcgetpgrp(tty_) == ::getpgrp()) give_terminal(tty_, watchdog_);
    ::kill(-watchdog_, SIGCONT);
}

void Job::wait_readable(int fd) {
    for (;;) {
        pollfd ready{fd, POLLIN, 0};
        const int n = ::poll(&ready, 1, 100);
        if (n > 0 || (n < 0 && errno != EINTR)) return;
        // A stop only (no WEXITED): an end stays for wait() to reap.
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(child_), &info, WSTOPPED | WNOHANG) == 0) {
            if (info.si_pid == child_) follow_stop(info.si_status);
        } else if (errno == ECHILD) {
            return;
        }
    }
}

bool Job::wait(int& raw_status, bool block) {
    for (;;) {
        int status = 0;
        const pid_t got = ::waitpid(child_, &status, WUNTRACED | (block ? 0 : WNOHANG));
        if (got == child_) {
            if (WIFSTOPPED(status)) {
                follow_stop(WSTOPSIG(status));
                if (block) continue;
                errno = 0;
                return false;
            }
            raw_status = status;
            reaped_ = true;
            return true;
        }
        if (got == 0 || (got < 0 && errno == EINTR && !block)) {
            errno = 0;
            return false;
        }
        if (got < 0 && errno != EINTR) return false;
    }
}

int Job::last_passed_on() noexcept {
    sigset_t passed, old;
    sigemptyset(&passed);
    for (int sig : passed_on) sigaddset(&passed, sig);
    ::sigprocmask(SIG_BLOCK, &passed, &old); // (the handler writes it)
    const int sig = last_signal;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return sig;
}

int Job::finish() noexcept {
    if (!started_) return 0;
    started_ = false;
    job_group.store(0);
    for (std::size_t i = 0; i < std::size(passed_on); ++i) ::sigaction(passed_on[i], &saved_actions[i], nullptr);
    ::sigaction(SIGCHLD, &saved_child_action, nullptr);
    if (tty_ >= 0) {
        give_terminal(tty_, ::getpgrp());
        ::close(tty_);
        tty_ = -1;
    }
    int leftovers = 0;
    try {
        if (reaped_) leftovers = members_alive(watchdog_, watchdog_, child_);
    } catch (...) {
        // (a failed allocation while counting: the group is ended all the same)
    }
    // pmc lives on and removes its run directory itself: the watchdog leaves it.
    // (SIGPIPE held: a watchdog killed by someone else must not take pmc with it)
    const sigset_t pipe_signal = set_of({SIGPIPE});
    sigset_t old_mask;
    ::pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
    if (::write(watchdog_pipe_, &pmc_finishing, 1) != 1 && errno == EPIPE && !sigismember(&old_mask, SIGPIPE)) {
        const timespec now{0, 0};
        ::sigtimedwait(&pipe_signal, nullptr, &now);
    }
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::close(watchdog_pipe_); // the watchdog ends the group, itself included
    watchdog_pipe_ = -1;
    while (::waitpid(watchdog_, nullptr, 0) < 0 && errno == EINTR) {}
    if (!reaped_) {
        ::kill(child_, SIGKILL); // (in the group unless setpgid failed)
        while (::waitpid(child_, nullptr, 0) < 0 && errno == EINTR) {}
        reaped_ = true;
    }
    return leftovers;
}

void remove_run_directory(const char* dir) noexcept {
    const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    if (DIR* d = ::fdopendir(fd)) {
        while (const dirent* e = ::readdir(d))
            if (e->d_name[0] != '.' || (e->d_name[1] != '\0' && (e->d_name[1] != '.' || e->d_name[2] != '\0')))
                ::unlinkat(fd, e->d_name, 0); // (a directory in it fails, and stays)
        ::closedir(d);
    } else {
        ::close(fd);
    }
    ::rmdir(dir);
}

std::string leftover_note(int leftovers) {
    if (leftovers <= 0) return "";
    return fmt::format("the command left {} process{} running when it ended; pmc ended {} (SIGKILL), as it ends every "
                       "process in the command's process group (one that calls setsid leaves the group and runs on)",
                       leftovers, leftovers == 1 ? "" : "es", leftovers == 1 ? "it" : "them");
}

} // namespace pmc_tool
