// pmc count: count a command's events, like perf stat, from its exec to its exit, children included.
//
// The events form one group opened on the command's process before it executes (the child waits on a pipe), with
// enable_on_exec and inherit: counting starts at the exec of the command, not during pmc's own fork, and covers the
// threads and processes it creates. The counts come from one read() of the group after the command exits,
// scaled where the kernel multiplexed the counters, each marked with the share of the time it was counted.
#include "commands.hpp"

#include <pmc/group.hpp>
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

/// Splits "a,cpu/event=1,umask=2/,b" at the commas that are not inside a PMU's slashes.
std::vector<std::string> split_event_list(const std::string& list) {
    std::vector<std::string> out;
    std::string cur;
    bool in_terms = false;
    for (char c : list) {
        if (c == '/') in_terms = !in_terms;
        if (c == ',' && !in_terms) {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
            continue;
        }
        cur += c;
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

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

    int go[2];
    if (::pipe(go) != 0) {
        fmt::print(stderr, "pmc: count: pipe failed: {}\n", std::strerror(errno));
        return 1;
    }
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child < 0) {
        fmt::print(stderr, "pmc: count: fork failed: {}\n", std::strerror(errno));
        return 1;
    }
    if (child == 0) {
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
        ::waitpid(child, nullptr, 0);
        fmt::print(stderr, "pmc: {}\n", group.failure().message);
        return 1;
    }
    if (::write(go[1], "x", 1) != 1) {
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
        fmt::print(stderr, "pmc: count: cannot start the command\n");
        return 1;
    }
    ::close(go[1]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }

    // Counting began at zero when the command executed: the counts are the readings themselves.
    const pmc::GroupReading zero = group->make_reading();
    const pmc::GroupReading end = group->read();
    std::vector<pmc::EventCount> counts;
    pmc::difference(zero, end, counts);
    const auto names = pmc::event_names(*group);

    const int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
        std::string shown;
        for (const auto& a : command) shown += (shown.empty() ? "" : " ") + a;
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
    return exit_status;
}

} // namespace pmc_tool
