// pmc count: count a command's events, like perf stat, from its exec to its exit, children included.
//
// The events form one group opened on the command's process before it executes (the child waits on a pipe), with
// enable_on_exec and inherit: counting starts at the exec of the command, not during pmc's own fork, and covers the
// threads and processes it creates. (perf stat opens each event on its own unless asked for a {group}; pmc opens
// one group so that every count covers the same instructions.) The counts come from one read() of the group after
// the command exits, scaled where the kernel multiplexed the counters, each marked with the share of the time it
// was counted.
//
// Signals: like system(), pmc ignores SIGINT and SIGQUIT while the command runs (the command gets them as it
// would without pmc: a Ctrl-C at the terminal reaches the whole foreground process group), so the report is
// still printed when the command is interrupted. If the command died of SIGINT, pmc then ends itself with SIGINT
// too, so that a calling shell script stops as it would have without pmc; other signals give exit status
// 128 + the signal number. If the counters cannot be read after the command ran, pmc says why and exits with the
// command's status.
//
// Hybrid CPUs: a hardware event counts on one core type. If the events include a hardware event and pmc may run on
// both core types, pmc pins itself (and so the command) to the performance cores (to the efficiency cores if the
// events name only cpu_atom/) before it starts the command, and says so; pin it yourself (taskset -c CPUS pmc
// count ...) to choose otherwise.
#include "commands.hpp"

#include <pmc/group.hpp>
#include <pmc/hybrid.hpp>
#include <pmc/pmu.hpp>
#include <pmc/report.hpp>

#include <fmt/format.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace pmc_tool {

/// Splits "a,cpu/event=1,umask=2/,b,mem:0x1000/8:w" at the commas that are not inside a PMU's term list. A '/'
/// opens a term list only right after a PMU name at the start of an event (the next '/' closes it); the slash of a
/// breakpoint's "mem:ADDR/LEN" and those after a term list are ordinary characters.
std::vector<std::string> split_event_list(const std::string& list) {
    std::vector<std::string> out;
    std::string cur;
    enum { name, terms, rest } state = name; // reading the event's leading word, a term list, or anything else
    auto blank = [&] { return cur.find_first_not_of(" \t") == std::string::npos; };
    for (char c : list) {
        if (state == terms) {
            if (c == '/') state = rest;
        } else if (c == ',') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
            state = name;
            continue;
        } else if (state == name) {
            if (c == '/') state = blank() ? rest : terms; // "pmu/": a term list; a bare "/" is the parser's to refuse
            else if (!pmc::detail::is_word_char(c) && !((c == ' ' || c == '\t') && blank()))
                state = rest; // "mem:", "r01cb:u", "4:1": no term list follows
        }
        cur += c;
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

namespace {

/// While alive, SIGINT and SIGQUIT are ignored (as system() does while its command runs); restores them after.
class IgnoreInterrupts {
public:
    IgnoreInterrupts() {
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        sigemptyset(&ignore.sa_mask);
        ::sigaction(SIGINT, &ignore, &old_int_);
        ::sigaction(SIGQUIT, &ignore, &old_quit_);
    }
    ~IgnoreInterrupts() { restore(); }
    IgnoreInterrupts(const IgnoreInterrupts&) = delete;
    IgnoreInterrupts& operator=(const IgnoreInterrupts&) = delete;
    /// Puts back the dispositions pmc was started with (in the child, before exec; in pmc, after the wait).
    void restore() noexcept {
        ::sigaction(SIGINT, &old_int_, nullptr);
        ::sigaction(SIGQUIT, &old_quit_, nullptr);
    }

private:
    struct sigaction old_int_ {}, old_quit_ {};
};

/// Waits for the child, retrying on EINTR.
int wait_for(pid_t child) {
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

/// Hybrid CPUs: if a hardware event is wanted and this process may run on both core types, pins it (and so the
/// command, which inherits the affinity) to one core type: the one the events name (cpu_atom/...), else the
/// performance cores. Returns what it did ("" if nothing), or a failure.
pmc::Result<std::string> pin_for_hybrid(const std::vector<std::string>& events, const std::string& sysfs) {
    const auto hybrid = pmc::hybrid_pmus(sysfs);
    if (hybrid.size() < 2) return std::string();
    bool generic = false, want_atom = false, want_core = false;
    for (const auto& text : events) {
        auto spec = pmc::try_parse_event(text, sysfs);
        if (!spec || !spec->core_pmu) continue; // a bad event string is reported when the group opens
        generic = generic || spec->pmu.empty();
        want_atom = want_atom || spec->pmu == "cpu_atom";
        want_core = want_core || spec->pmu == "cpu_core";
    }
    // Both core types named explicitly cannot share a group anyway: leave that to the group's refusal.
    if (!(generic || want_atom || want_core) || (want_atom && want_core)) return std::string();
    if (pmc::choose_core_pmu(hybrid, pmc::thread_affinity()).pmu) return std::string(); // already on one type
    const pmc::CoreType type = want_atom && !want_core ? pmc::CoreType::efficiency : pmc::CoreType::performance;
    if (auto failure = pmc::pin_this_thread(type, sysfs)) return std::move(*failure);
    for (const auto& p : hybrid)
        if (p.core_type == type)
            return "hybrid CPU: the command runs pinned to the " + std::string(pmc::to_string(type)) + " cores (" +
                   p.pmu + ", CPUs " + p.cpus_text + "), since a hardware event counts on one core type only. "
                   "To choose, pin it yourself: taskset -c CPUS pmc count ...";
    return std::string();
}

} // namespace

int cmd_count(const Options& o, const std::vector<std::string>& command, const std::vector<std::string>& events_in) {
    if (command.empty()) {
        fmt::print(stderr, "pmc: count needs a command after '--': pmc count [-e EVENT]... -- COMMAND [ARGS]\n");
        return 1;
    }
    std::vector<std::string> events;
    for (const auto& e : events_in)
        for (auto& one : split_event_list(e)) events.push_back(one);
    if (events.empty()) {
        events = {"task-clock", "context-switches", "page-faults"};
        if (pmc::has_core_pmu(o.sysfs)) events.insert(events.begin(), {"instructions:u", "cycles:u"});
    }

    auto pinned = pin_for_hybrid(events, o.sysfs);
    if (!pinned) {
        fmt::print(stderr, "pmc: count: {}\n", pinned.failure().message);
        return 1;
    }
    if (!pinned->empty()) fmt::print(stderr, "pmc: count: {}\n", *pinned);

    int go[2];
    if (::pipe(go) != 0) {
        fmt::print(stderr, "pmc: count: pipe failed: {}\n", std::strerror(errno));
        return 1;
    }
    std::fflush(nullptr);
    // Ignored from before the fork, so that no Ctrl-C can end pmc between the fork and the wait; the child puts
    // the original dispositions back before it executes the command.
    IgnoreInterrupts ignore_interrupts;
    const pid_t child = ::fork();
    if (child < 0) {
        fmt::print(stderr, "pmc: count: fork failed: {}\n", std::strerror(errno));
        ::close(go[0]);
        ::close(go[1]);
        return 1;
    }
    if (child == 0) {
        ignore_interrupts.restore();
        ::close(go[1]);
        char byte;
        if (::read(go[0], &byte, 1) != 1) _exit(126); // pmc could not open the counters
        ::close(go[0]);
        std::vector<char*> argv;
        for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execvp(argv[0], argv.data());
        std::fprintf(stderr, "pmc: count: cannot run '%s': %s\n", argv[0], std::strerror(errno));
        _exit(127);
    }
    ::close(go[0]);

    pmc::OpenOptions options;
    options.pid = child;
    options.count_children = true;
    options.enable_on_exec = true;
    options.sysfs_root = o.sysfs;
    auto group = pmc::Group::try_open(events, options);
    if (!group) {
        ::close(go[1]); // the child exits without running the command
        wait_for(child);
        fmt::print(stderr, "pmc: {}\n", group.failure().message);
        return 1;
    }
    // (SIGPIPE ignored for this write: a child already ended by a Ctrl-C must not end pmc silently.)
    struct sigaction ignore_pipe {}, old_pipe {};
    ignore_pipe.sa_handler = SIG_IGN;
    sigemptyset(&ignore_pipe.sa_mask);
    ::sigaction(SIGPIPE, &ignore_pipe, &old_pipe);
    const bool started = ::write(go[1], "x", 1) == 1;
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
    if (!started) {
        ::kill(child, SIGKILL);
        wait_for(child);
        fmt::print(stderr, "pmc: count: cannot start the command\n");
        return 1;
    }
    ::close(go[1]);
    const int status = wait_for(child);
    ignore_interrupts.restore();
    const int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const bool interrupted = WIFSIGNALED(status) && WTERMSIG(status) == SIGINT;
    std::string shown;
    for (const auto& a : command) shown += (shown.empty() ? "" : " ") + a;

    // Counting began at zero when the command executed: the counts are the readings themselves.
    pmc::GroupReading end;
    std::vector<pmc::EventCount> counts;
    std::vector<std::string> names;
    try {
        const pmc::GroupReading zero = group->make_reading();
        end = group->read();
        pmc::difference(zero, end, counts);
        names = pmc::event_names(*group);
    } catch (const std::exception& e) {
        fmt::print(stderr, "pmc: count: '{}' ran (exit status {}), but its counts cannot be read: {}\n", shown,
                   exit_status, e.what());
        return exit_status;
    }

    std::string text;
    if (o.json) {
        pmc::JsonWriter j;
        j.begin_object().key("command").begin_array();
        for (const auto& a : command) j.value(a);
        j.end_array().field("exit_status", exit_status).field("time_enabled_ns", end.time_enabled)
            .field("time_running_ns", end.time_running).key("counts");
        pmc::write_counts_json(j, names, counts);
        j.end_object();
        text = j.str() + "\n";
    } else if (o.csv) {
        text = pmc::count_csv(names, counts);
    } else {
        text = fmt::format("\n pmc count of '{}' (exit status {}; from exec to exit, children included):\n\n", shown,
                           exit_status) +
               pmc::count_table(names, counts) +
               fmt::format("\n {:.3f} ms enabled, {:.3f} ms on the counters\n",
                           static_cast<double>(end.time_enabled) / 1e6, static_cast<double>(end.time_running) / 1e6);
    }
    if (!o.output.empty()) {
        if (FILE* f = std::fopen(o.output.c_str(), "w")) {
            std::fputs(text.c_str(), f);
            std::fclose(f);
        } else {
            fmt::print(stderr, "pmc: count: cannot write {}: {}\n", o.output, std::strerror(errno));
            return 1;
        }
    } else {
        std::fputs(text.c_str(), stderr); // like perf stat: the command's own output stays on stdout
    }
    if (interrupted) {
        // Die of the same SIGINT, so that a shell script running pmc stops as it would without pmc.
        // (Unless pmc itself was started with SIGINT ignored.)
        std::fflush(nullptr);
        struct sigaction now {};
        if (::sigaction(SIGINT, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) ::raise(SIGINT);
    }
    return exit_status;
}

} // namespace pmc_tool
