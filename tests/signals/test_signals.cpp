// SPDX-License-Identifier: MIT
// Signals and processes of the command that pmc emulate, pmc count (native and --emulate) and pmc sample run
// (tools/job.hpp), each case beside the same program run natively: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the
// process group and to pmc alone reach the program exactly once; no process of the command survives pmc; the report
// is whole or says it was cut; the exit status is the program's. Ctrl-C, Ctrl-Z and a read at a real
// pseudo-terminal; kill -9 of pmc; a signal pmc started with ignored. The program (pmc-signal-target) counts its
// handler calls in itself and in a grandchild it forks.
#include "catch.hpp"
#include "command.hpp"
#include "temp_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

const std::string pmc_tool = PMC_TOOL_PATH;
const std::string target = PMC_SIGNAL_TARGET;
const std::string at_terminal = PMC_AT_TERMINAL;

/// With read(2), not a stream: a /proc file of a process that exits meanwhile fails to read with ESRCH.
std::string file_text(const std::string& path) {
    std::string text;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return text;
    char buffer[4096];
    for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(got));
    ::close(fd);
    return text;
}

/// Why `words` (pmc and its options, before the command) cannot run here, or "".
std::string why_not(const std::vector<std::string>& words) {
    if (words.empty()) return "";
#if defined(PMC_SANITIZED)
    for (const auto& w : words)
        if (w == "emulate" || w == "--emulate")
            return "this build is sanitized: AddressSanitizer's shadow memory does not fit QEMU user mode";
#endif
    std::string line;
    for (const auto& w : words) line += "'" + w + "' ";
    const auto r = pmc_test::run_command(line + "/bin/true 2>&1");
    return r.status == 0 ? "" : "'" + line + "/bin/true' cannot run here: " + r.out;
}

/// Starts `argv` as a job-control shell starts a job: in a process group of its own, the signals at their defaults
/// and unblocked, no core dumps, its output into `out`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& out) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::setpgid(0, 0);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) ::signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        const rlimit no_core{0, 0};
        ::setrlimit(RLIMIT_CORE, &no_core);
        const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::execv(args[0], args.data());
        _exit(127);
    }
    ::setpgid(pid, pid);
    return pid;
}

bool wait_for_file(const std::string& path, int seconds) {
    for (int i = 0; i < seconds * 50; ++i) {
        if (::access(path.c_str(), F_OK) == 0) return true;
        ::usleep(20000);
    }
    return false;
}

/// The raw wait status of `pid`, or -1 if it did not end within `seconds` (its group is then killed).
int wait_status(pid_t pid, int seconds) {
    int raw = 0;
    for (int i = 0; i < seconds * 50; ++i) {
        if (::waitpid(pid, &raw, WNOHANG) == pid) return raw;
        ::usleep(20000);
    }
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &raw, 0);
    return -1;
}

/// The live processes whose command line holds `text` (the program's, and QEMU's for it, name its READY file).
std::vector<long> processes_naming(const std::string& text) {
    std::vector<long> found;
    if (DIR* d = ::opendir("/proc")) {
        while (const dirent* e = ::readdir(d)) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            const std::string stat = file_text(std::string("/proc/") + e->d_name + "/stat");
            const auto paren = stat.rfind(')');
            if (paren == std::string::npos || stat.size() < paren + 3 || stat[paren + 2] == 'Z') continue;
            const std::string cmdline = file_text(std::string("/proc/") + e->d_name + "/cmdline");
            if (cmdline.find(text) != std::string::npos) found.push_back(std::atol(e->d_name));
        }
        ::closedir(d);
    }
    return found;
}

/// Waits up to `seconds` for no process to name `text`; how many still do.
std::size_t survivors(const std::string& text, int seconds) {
    std::size_t left = 0;
    for (int i = 0; i < seconds * 50 && (left = processes_naming(text).size()) > 0; ++i) ::usleep(20000);
    return left;
}

/// The handler calls a process of the program counted ("program" or "grandchild"), -1 if it wrote nothing.
int calls_of(const std::string& results, const std::string& role, int sig) {
    std::istringstream in(results);
    for (std::string who; in >> who;) {
        int got_sig = 0, calls = 0;
        in >> got_sig >> calls;
        if (who == role) return got_sig == sig ? calls : 1000 + got_sig; // (another signal: never "once")
    }
    return -1;
}

const char* name_of(int sig) {
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    default: return "?";
    }
}

/// `pmc` (its words before the command; none: the program natively) running pmc-signal-target, sent each signal
/// to its process group and to pmc alone. `report`: what the report (-o FILE, else the output) must hold, with
/// "{status}" for the exit status.
/// The entries of directory `path` (not . and ..).
std::vector<std::string> entries_of(const std::string& path) {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(path.c_str())) {
        while (const dirent* e = ::readdir(d))
            if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
        ::closedir(d);
    }
    return names;
}

/// TMPDIR set for what the test starts, put back at the end.
struct TmpdirFor {
    std::string old;
    bool had;
    explicit TmpdirFor(const std::string& path) : had(std::getenv("TMPDIR") != nullptr) {
        if (had) old = std::getenv("TMPDIR");
        ::setenv("TMPDIR", path.c_str(), 1);
    }
    ~TmpdirFor() {
        if (had) ::setenv("TMPDIR", old.c_str(), 1);
        else ::unsetenv("TMPDIR");
    }
};

void check_signals(const std::vector<std::string>& pmc, const std::string& report) {
    if (auto why = why_not(pmc); !why.empty()) PMC_SKIP(why);
    const pmc_test::TempDir dir;
    // pmc's temporary files (the emulator's run directory) go to TMPDIR: none may be left, whatever the signal (pmc
    // ends of a SIGINT or SIGQUIT by raising it, where no destructor runs).
    const std::string tmp = dir.file("tmp");
    REQUIRE(::mkdir(tmp.c_str(), 0700) == 0);
    const TmpdirFor tmpdir(tmp);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
        for (const bool to_group : {true, false}) {
            const std::string name = dir.file(std::string(name_of(sig)) + (to_group ? "-group" : "-alone"));
            const std::string results = name + ".results", ready = name + ".ready", out = name + ".out",
                              report_file = name + ".report";
            std::vector<std::string> argv;
            for (const auto& w : pmc) {
                argv.push_back(w);
                if (w == "-o") argv.push_back(report_file);
            }
            argv.insert(argv.end(), {target, results, ready});
            const pid_t pid = spawn(argv, out);
            INFO((pmc.empty() ? "natively" : argv[1]) << ", " << name_of(sig) << " to "
                                                      << (to_group ? "the process group" : "pmc alone"));
            const bool started = wait_for_file(ready, 120);
            if (!started) ::kill(-pid, SIGKILL);
            INFO("output: " << file_text(out));
            REQUIRE(started);
            ::kill(to_group ? -pid : pid, sig);
            const int raw = wait_status(pid, 60);
            REQUIRE(raw != -1);
            // (Natively, with the signal to the program alone, its grandchild runs on: counted at once.)
            const std::size_t left = pmc.empty() && !to_group ? processes_naming(ready).size() : survivors(ready, 5);
            const std::string said = file_text(results);
            INFO("results: " << said << "report: " << file_text(report_file) << "output: " << file_text(out));
            CHECK(calls_of(said, "program", sig) == 1);
            if (pmc.empty() && !to_group) {
                // Natively a signal to the program alone leaves its grandchild running: the orphan pmc prevents.
                CHECK(calls_of(said, "grandchild", sig) == -1);
                CHECK(left == 1);
                ::kill(-pid, SIGKILL);
                CHECK(survivors(ready, 5) == 0);
            } else {
                // The grandchild got it once too, or was ended before it wrote (when the program ended first).
                const int grandchild = calls_of(said, "grandchild", sig);
                CHECK((grandchild == 1 || grandchild == -1));
                CHECK(left == 0);
            }
            INFO("left in TMPDIR: " << entries_of(tmp).size());
            CHECK(entries_of(tmp).empty());
            if (pmc.empty() || sig == SIGINT || sig == SIGQUIT) { // pmc dies of it too, so a calling script stops
                CHECK(WIFSIGNALED(raw));
                CHECK(WTERMSIG(raw) == sig);
            } else {
                CHECK(WIFEXITED(raw));
                CHECK(WEXITSTATUS(raw) == 128 + sig);
            }
            if (!report.empty()) {
                std::string expected = report;
                const auto at = expected.find("{status}");
                if (at != std::string::npos) expected.replace(at, 8, std::to_string(128 + sig));
                const std::string written = file_text(report_file) + file_text(out);
                for (std::size_t from = 0, bar; from <= expected.size(); from = bar + 1) {
                    bar = expected.find('|', from);
                    if (bar == std::string::npos) bar = expected.size();
                    CHECK_THAT(written, ContainsSubstring(expected.substr(from, bar - from)));
                }
            }
        }
}

} // namespace

TEST_CASE("natively (the baseline): a signal to the group reaches the program and its grandchild once, to the "
          "program alone, the grandchild runs on",
          "[signals]") {
    check_signals({}, "");
}

TEST_CASE("pmc emulate: a signal to the group or to pmc alone reaches the program once, nothing survives, the "
          "status is the program's",
          "[signals][emulate]") {
    check_signals({pmc_tool, "emulate", "--"}, "");
}

TEST_CASE("pmc count: a signal to the group or to pmc alone reaches the program once, nothing survives, the report "
          "is written",
          "[signals][count]") {
    check_signals({pmc_tool, "count", "-e", "task-clock,page-faults", "-o", "--"},
                  "(exit status {status}; from exec to exit|page-faults");
}

TEST_CASE("pmc count --emulate: a signal to the group or to pmc alone reaches the program once, nothing survives, "
          "the count is written (partial where a process never reached its exit)",
          "[signals][count][emulate]") {
    check_signals({pmc_tool, "count", "--emulate", "-o", "--"},
                  "(exit status {status}; |instructions:u|emulated (QEMU TCG): ");
}

TEST_CASE("pmc sample: a signal to the group or to pmc alone reaches the program once, nothing survives, the "
          "report is written",
          "[signals][sample]") {
    check_signals({pmc_tool, "sample", "-o", "--"}, "(exit status {status})|bias check:");
}

namespace {

/// pmc (its words before the command) killed with SIGKILL while the program and its grandchild run: `runs` times.
/// False (with a warning) if that pmc command cannot run here.
bool check_kill_9(const std::vector<std::string>& pmc, int runs) {
    if (auto why = why_not(pmc); !why.empty()) {
        WARN("not run: " << why);
        return false;
    }
    const pmc_test::TempDir dir;
    for (int run = 0; run < runs; ++run) {
        const std::string name = dir.file("kill-9-" + std::to_string(run));
        const std::string ready = name + ".ready";
        std::vector<std::string> argv = pmc;
        argv.insert(argv.end(), {target, name + ".results", ready});
        const pid_t pid = spawn(argv, name + ".out");
        const bool started = wait_for_file(ready, 120);
        if (!started) ::kill(-pid, SIGKILL);
        REQUIRE(started);
        REQUIRE(processes_naming(ready).size() >= 3); // (pmc's watchdog, the program, its grandchild)
        ::kill(pid, SIGKILL);
        const int raw = wait_status(pid, 60);
        CHECK((WIFSIGNALED(raw) && WTERMSIG(raw) == SIGKILL));
        INFO("run " << run << ": left " << processes_naming(ready).size());
        CHECK(survivors(ready, 5) == 0);
        for (long p : processes_naming(ready)) ::kill(static_cast<pid_t>(p), SIGKILL); // (not left spinning)
    }
    return true;
}

} // namespace

TEST_CASE("kill -9 of pmc emulate, pmc count and pmc sample leaves no process of the command alive", "[signals]") {
    int ran = 0;
    ran += check_kill_9({pmc_tool, "count", "-e", "task-clock", "--"}, 3);
    ran += check_kill_9({pmc_tool, "sample", "--"}, 2);
    ran += check_kill_9({pmc_tool, "emulate", "--"}, 3);
    if (ran == 0) PMC_SKIP("neither pmc count, pmc sample nor pmc emulate can run here");
}

TEST_CASE("at a terminal: the program reads it, Ctrl-Z stops the job and fg continues it, Ctrl-C reaches the "
          "program once, and under pmc a Ctrl-Z as the command starts (before its exec) stops the job too",
          "[signals][terminal]") {
    if (::access("/usr/bin/python3", X_OK) != 0) PMC_SKIP("the pseudo-terminal test runs /usr/bin/python3");
    for (const std::vector<std::string>& pmc :
         {std::vector<std::string>{}, {pmc_tool, "count", "-e", "task-clock", "--"}, {pmc_tool, "emulate", "--"},
          {pmc_tool, "sample", "--"}}) {
        if (auto why = why_not(pmc); !why.empty()) {
            WARN("not run: " << why);
            continue;
        }
        // The early Ctrl-Z comes as soon as pmc hands the terminal to the command's group: the command waits before
        // its exec, and the watchdog may not have run yet. pmc sample once read on to its exec's word there, never
        // following the stop (6 hangs in 10 runs): a few runs, as the moment varies.
        for (int run = 0; run < (pmc.empty() ? 1 : 4); ++run) {
            const bool stop_early = run > 0;
            const pmc_test::TempDir dir;
            const std::string results = dir.file("results"), ready = dir.file("ready");
            std::string line = "/usr/bin/python3 '" + at_terminal + "' '" + ready + "'" +
                               (stop_early ? " --stop-early" : "") + " --";
            for (const auto& w : pmc) line += " '" + w + "'";
            line += " '" + target + "' '" + results + "' '" + ready + "' --read-terminal 2>&1";
            const auto r = pmc_test::run_command(line);
            INFO((pmc.empty() ? std::string("natively") : pmc[1]) << (stop_early ? ", stopped early" : "") << ":\n"
                                                                  << r.out << "\nresults: " << file_text(results));
            CHECK(r.status == 0);
            CHECK_THAT(r.out, ContainsSubstring("read: hello")); // no SIGTTIN: it had the terminal
            CHECK_THAT(r.out, ContainsSubstring("job stopped by"));
            CHECK_THAT(r.out, ContainsSubstring("job continued"));
            CHECK_THAT(r.out, ContainsSubstring("job status signal 2")); // pmc died of SIGINT too
            CHECK(calls_of(file_text(results), "program", SIGINT) == 1);
            const int grandchild = calls_of(file_text(results), "grandchild", SIGINT);
            CHECK((grandchild == 1 || grandchild == -1));
            CHECK(survivors(ready, 5) == 0);
            for (long p : processes_naming(ready)) ::kill(static_cast<pid_t>(p), SIGKILL);
        }
    }
}

TEST_CASE("a signal pmc started with ignored (a background job's SIGINT) stays ignored in the command, as natively",
          "[signals]") {
    if (auto why = why_not({pmc_tool, "count", "--"}); !why.empty()) PMC_SKIP(why);
    // sleep keeps SIGINT ignored: the SIGINT sent to pmc is passed on and ignored, and sleep ends normally (0).
    for (const std::string& prefix : {std::string(), "'" + pmc_tool + "' count -e task-clock -- "}) {
        const auto r = pmc_test::run_command("sh -c 'trap \"\" INT; " + prefix + "sleep 1 & p=$!; sleep 0.3; "
                                             "kill -INT $p; wait $p; echo status $?' 2>&1");
        INFO(prefix << "\n" << r.out);
        CHECK_THAT(r.out, ContainsSubstring("status 0"));
    }
}

TEST_CASE("what the command leaves running when it ends is ended, and pmc says so in the name of the command run",
          "[signals]") {
    // Each way of running a command, and how its messages begin: the command the user typed.
    const std::pair<std::vector<std::string>, std::string> runs[] = {
        {{pmc_tool, "count", "-e", "task-clock", "--"}, "pmc: count: "},
        {{pmc_tool, "emulate", "--"}, "pmc emulate: "},
        {{pmc_tool, "count", "--emulate", "--"}, "pmc: count --emulate: "},
    };
    for (const auto& [pmc, who] : runs) {
        if (auto why = why_not(pmc); !why.empty()) {
            WARN("not run: " << why);
            continue;
        }
        std::string line;
        for (const auto& w : pmc) line += "'" + w + "' ";
        // A sleep of an odd length, to be found by its command line: natively it would run on for 31 s.
        const auto r = pmc_test::run_command(line + "/bin/sh -c 'sleep 31.4159 >/dev/null 2>&1 & exit 3' 2>&1");
        INFO(r.out);
        CHECK(r.status == 3);
        CHECK_THAT(r.out, ContainsSubstring(who + "the command left 1 process running when it ended; pmc ended it "
                                                  "(SIGKILL)"));
        CHECK(survivors("31.4159", 5) == 0);
    }
}

TEST_CASE("the same signal from one sender twice within 50 ms, as timeout(1) sends it (to pmc, then to its group), "
          "runs the program's handler once",
          "[signals]") {
    int ran = 0;
    for (const std::vector<std::string>& pmc :
         {std::vector<std::string>{pmc_tool, "count", "-e", "task-clock", "--"}, {pmc_tool, "emulate", "--"}}) {
        if (auto why = why_not(pmc); !why.empty()) {
            WARN("not run: " << why);
            continue;
        }
        ++ran;
        const pmc_test::TempDir dir;
        for (int run = 0; run < 2; ++run) {
            const std::string name = dir.file("twice-" + std::to_string(run));
            std::vector<std::string> argv = pmc;
            argv.insert(argv.end(), {target, name + ".results", name + ".ready"});
            const pid_t pid = spawn(argv, name + ".out");
            const bool started = wait_for_file(name + ".ready", 120);
            if (!started) ::kill(-pid, SIGKILL);
            REQUIRE(started);
            ::kill(pid, SIGTERM);
            ::usleep(5000); // (pmc has passed the first on by now: without the rule, the program would see two)
            ::kill(-pid, SIGTERM);
            const int raw = wait_status(pid, 60);
            INFO(pmc[1] << " run " << run << ": " << file_text(name + ".results"));
            CHECK((WIFEXITED(raw) && WEXITSTATUS(raw) == 128 + SIGTERM));
            CHECK(calls_of(file_text(name + ".results"), "program", SIGTERM) == 1);
            CHECK(survivors(name + ".ready", 5) == 0);
        }
    }
    if (ran == 0) PMC_SKIP("neither pmc count nor pmc emulate can run here");
}
