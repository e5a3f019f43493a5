// SPDX-License-Identifier: MIT
// pmc-bench-emulate: what exact counts without a PMU cost. In one run, on three workloads (an interpreter, a
// compressor, pmc's profiler example), the CPU time (user + system, of the whole process tree, median of runs)
// natively, under bare qemu-*, under pmc emulate, and under Valgrind's none, cachegrind (no cache simulation) and
// callgrind tools; then, under pmc emulate, the instructions and host nanoseconds one read of instructions:u costs.
// Figures are printed, never asserted: timings here are noisy, and the ratios measured side by side are what to
// quote. Goals (issue 18): pmc emulate at most a third of callgrind's time, and within 1.25x of bare qemu-*; (issue
// 33) the plugin with branches=on within 1.5x of the plugin alone, beside Cachegrind's --branch-sim=yes.
#include <pmc/counter.hpp>

#include <command_line.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

constexpr const char* help = R"(usage: pmc-bench-emulate [--runs N] [--quick] [--cache-only]

Prints the CPU time of five workloads (lua5.4 running a benchmark script, xz -6 compressing 2 MB,
pmc-example-profiler recording instructions:u, /bin/true's start-up, a shell loop of 200 short
processes) natively, under bare qemu-*, qemu-* with pmc's plugin (alone, and with branches=on as pmc
emulate --branches runs it), pmc emulate, and valgrind --tool=none, --tool=cachegrind --cache-sim=no,
--tool=callgrind and --tool=cachegrind --cache-sim=no --branch-sim=yes (--trace-children=yes), as the
median of N runs (default 3; --quick: 1) with each one's ratio to native; then the cache model
(pmc emulate --cache) on compiled code (xz, sort(1), pmc-example-profiler): bare qemu-*, the plugin
counting instructions only, the plugin with cache=on, pmc emulate --cache, and valgrind
--tool=cachegrind --cache-sim=yes at the same geometry (I1 and D1 32768,8,64, LL 8388608,16,64);
then the instructions and host nanoseconds one read of instructions:u costs under pmc emulate.
--cache-only: the cache model's table alone. The QEMU is $PMC_QEMU's
(as pmc emulate takes it), else qemu-x86_64 from PATH, with the plugin for its API version. A tool
or workload that is missing is skipped with the reason. Emulated counts are exact; the times are
this machine's.
)";

std::string pmc_tool = PMC_TOOL_PATH;
std::string example = PMC_EXAMPLE_PROFILER_PATH;

bool on_path(const std::string& name) {
    return std::system(("command -v '" + name + "' >/dev/null 2>&1").c_str()) == 0;
}

/// `name`'s full path (QEMU and Valgrind do not search PATH), or `name`.
std::string full_path(const std::string& name) {
    if (name.find('/') != std::string::npos) return name;
    FILE* p = ::popen(("command -v '" + name + "' 2>/dev/null").c_str(), "r");
    if (!p) return name;
    char line[4096] = {};
    const bool got = std::fgets(line, sizeof line, p) != nullptr;
    ::pclose(p);
    std::string path = got ? line : name;
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
    return path.empty() ? name : path;
}

/// Runs argv (stdin /dev/null, stdout and stderr discarded) and returns the CPU seconds of its whole process tree,
/// or a negative number if it failed.
double cpu_seconds(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    const pid_t child = ::fork();
    if (child < 0) return -1;
    if (child == 0) {
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(null, 2);
        for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
        std::vector<char*> a;
        for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
        a.push_back(nullptr);
        ::execvp(a[0], a.data());
        _exit(127);
    }
    int status = 0;
    rusage ru{};
    if (::wait4(child, &status, 0, &ru) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// The read cost, measured inside this process (run under pmc emulate): instructions per read from the counter
/// itself, host nanoseconds per read from the wall clock.
int read_cost() {
    pmc::Counter c{"instructions:u"};
    constexpr int reads = 100000;
    volatile std::uint64_t sink = 0;
    const std::uint64_t before = c.read();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reads; ++i) sink = sink + c.read();
    const auto t1 = std::chrono::steady_clock::now();
    const std::uint64_t after = c.read();
    // The same loop with a constant instead of a read, for the loop's own instructions.
    const std::uint64_t b2 = c.read();
    for (int i = 0; i < reads; ++i) sink = sink + 1;
    const std::uint64_t a2 = c.read();
    const double per_read = static_cast<double>((after - before) - (a2 - b2)) / reads;
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / reads;
    std::printf("one read of instructions:u under pmc emulate: %.2f instructions (the same on every read: the "
                "count is exact), %.0f ns of host time (%s)\n",
                per_read, ns, pmc::to_string(c.path()));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    int runs = 3;
    pmc_cli::CommandLine command_line("pmc-bench-emulate", help);
    bool quick = false, read_cost_only = false, cache_only = false;
    std::string runs_text;
    command_line.option("--runs", runs_text, "a number of runs from 1");
    command_line.flag("--quick", quick);
    command_line.flag("--read-cost", read_cost_only);
    command_line.flag("--cache-only", cache_only);
    if (auto status = command_line.parse(argc, argv)) return *status;
    if (read_cost_only) return read_cost();
    if (command_line.count("--runs") > 0) {
        char* end = nullptr;
        const long n = std::strtol(runs_text.c_str(), &end, 10);
        if (runs_text.empty() || *end || n < 1 || n > 1000)
            return command_line.usage_error("--runs needs a number of runs from 1 to 1000, not '" + runs_text + "'");
        runs = static_cast<int>(n);
    }
    if (quick) runs = 1;
    // The QEMU pmc emulate runs ($PMC_QEMU, as pmc emulate takes it), with the plugin for its API version.
    const char* chosen_qemu = std::getenv("PMC_QEMU");
    const std::string qemu_path = full_path(chosen_qemu && *chosen_qemu ? chosen_qemu
                                                                        : PMC_ARCH_AARCH64 ? "qemu-aarch64" : "qemu-x86_64");
    const char* qemu_name = "qemu";
    std::string qemu_version = "?";
    if (FILE* p = ::popen(("'" + qemu_path + "' --version 2>/dev/null").c_str(), "r")) {
        char line[256] = {};
        if (std::fgets(line, sizeof line, p)) {
            qemu_version = line;
            if (const auto v = qemu_version.find("version "); v != std::string::npos) qemu_version = qemu_version.substr(v + 8);
            qemu_version = qemu_version.substr(0, qemu_version.find_first_of(" \n"));
        }
        ::pclose(p);
    }
    const bool api2 = std::atoi(qemu_version.c_str()) >= 9; // QEMU 9.0 and later take plugin API 2 only
    const std::string plugin_path = api2 ? PMC_QEMU_PLUGIN_V2_PATH : PMC_QEMU_PLUGIN_PATH;
    if (std::system((pmc_tool + " emulate -- /bin/true >/dev/null 2>&1").c_str()) != 0) {
        std::printf("pmc-bench-emulate: skipped: pmc emulate cannot run here (install Debian's qemu-user)\n");
        return 0;
    }
    char dir_template[] = "/tmp/pmc-bench-emulate-XXXXXX";
    const std::string dir = ::mkdtemp(dir_template) ? dir_template : "/tmp";
    // The compressor's input: 2 MB of text-like, compressible bytes, the same on every run.
    const std::string data = dir + "/input";
    {
        std::ofstream out(data, std::ios::binary);
        std::uint64_t x = 42;
        const char* words[] = {"counter ", "profile ", "emulated ", "instructions ", "exact ", "the ", "a ", "\n"};
        for (std::size_t n = 0; n < (2u << 20);) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const char* w = words[(x >> 33) % 8];
            out << w;
            n += std::strlen(w);
        }
    }
    const std::string lua_script =
        "local function fannkuch(n) local p, q, s, sign, maxflips, sum = {}, {}, {}, 1, 0, 0 "
        "for i = 1, n do p[i] = i; q[i] = i; s[i] = i end "
        "repeat local q1 = p[1] if q1 ~= 1 then for i = 2, n do q[i] = p[i] end local flips = 1 "
        "repeat local qq = q[q1] if qq == 1 then sum = sum + sign * flips if flips > maxflips then maxflips = flips end break end "
        "q[q1] = q1 if q1 >= 4 then local i, j = 2, q1 - 1 repeat q[i], q[j] = q[j], q[i]; i = i + 1; j = j - 1; until i >= j end "
        "q1 = qq; flips = flips + 1 until false end "
        "if sign == 1 then p[2], p[1] = p[1], p[2]; sign = -1 else p[2], p[3] = p[3], p[2]; sign = 1 "
        "for i = 3, n do local sx = s[i] if sx ~= 1 then s[i] = sx - 1; break end "
        "if i == n then return sum, maxflips end s[i] = i local t = p[1]; for j = 1, i do p[j] = p[j + 1] end p[i + 1] = t end end "
        "until false end print(fannkuch(9))";
    struct Workload {
        const char* name;
        std::vector<std::string> command;
        std::vector<std::string> env;
        std::string missing;
        const char* goal = "goal <= 1.25x"; ///< beside pmc emulate's ratio to bare QEMU
    };
    std::vector<Workload> workloads = {
        {"interpreter (lua5.4 fannkuch 9)", {full_path("lua5.4"), "-e", lua_script}, {},
         on_path("lua5.4") ? "" : "lua5.4 is not installed"},
        {"compressor (xz -6, 2 MB)", {full_path("xz"), "-T1", "-6", "-c", data}, {}, on_path("xz") ? "" : "xz is not installed"},
        {"pmc-example-profiler", {example, "--functions", "200"},
         {"PMC_PROFILE=" + dir + "/example.pmcprof", "PMC_PROFILE_COUNTERS=instructions:u"}, ""},
        // Start-up alone, and a test suite's shape: many short processes (each one QEMU's start, and pmc's preload).
        {"start-up (/bin/true)", {"/bin/true"}, {}, "", "goal <= 2x"},
        {"200 short processes (sh loop)", {"/bin/sh", "-c", "i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done"},
         {}, "", "bare QEMU emulates the shell alone: its children run natively"},
    };
    struct Config {
        const char* name;
        std::vector<std::string> prefix;
        std::string missing;
    };
    const bool valgrind = on_path("valgrind");
    std::vector<Config> configs = {
        {"native", {}, ""},
        // Bare QEMU runs the first process only (a child's execve runs natively): on the short-processes row, it and
        // the plugin alone are the shell's share; pmc emulate and Valgrind (--trace-children) run every process.
        {qemu_name, {qemu_path}, on_path(qemu_path) ? "" : qemu_path + " is not installed"},
        // The plugin alone, without pmc emulate's environment (bound symbols, the preload library): its own cost.
        {"qemu + plugin", {qemu_path, "-plugin", plugin_path}, on_path(qemu_path) ? "" : qemu_path + " is not installed"},
        // The plugin with branches=on (pmc emulate --branches): a call per executed block feeding the predictor.
        {"plugin + branches", {qemu_path, "-plugin", plugin_path + ",branches=on"},
         on_path(qemu_path) ? "" : qemu_path + " is not installed"},
        {"pmc emulate", {pmc_tool, "emulate", "--"}, ""},
        {"valgrind none", {"valgrind", "--tool=none", "--trace-children=yes", "-q"}, valgrind ? "" : "valgrind is not installed"},
        {"cachegrind --cache-sim=no", {"valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                                       "--trace-children=yes", "-q"}, valgrind ? "" : "valgrind is not installed"},
        {"callgrind", {"valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--trace-children=yes", "-q"},
         valgrind ? "" : "valgrind is not installed"},
        {"cachegrind --branch-sim", {"valgrind", "--tool=cachegrind", "--cache-sim=no", "--branch-sim=yes",
                                     "--cachegrind-out-file=/dev/null", "--trace-children=yes", "-q"},
         valgrind ? "" : "valgrind is not installed"},
    };
    std::printf("QEMU %s (%s), plugin API %d (%s)\n", qemu_version.c_str(), qemu_path.c_str(), api2 ? 2 : 1,
                plugin_path.substr(plugin_path.rfind('/') + 1).c_str());
    std::printf("CPU seconds (user + system, the whole process tree), median of %d run%s; x: ratio to native\n\n", runs,
                runs == 1 ? "" : "s");
    // One row: each configuration's median time, printed, and returned by name (negative: missing or failed).
    const auto row = [&](const Workload& w, const std::vector<Config>& columns) {
        std::vector<std::pair<std::string, double>> by_name;
        double native = 0;
        std::printf("%-34s", w.name);
        for (const auto& c : columns) {
            if (!c.missing.empty()) {
                std::printf("  %20s", "(missing)");
                by_name.emplace_back(c.name, -1);
                continue;
            }
            std::vector<std::string> command = c.prefix;
            command.insert(command.end(), w.command.begin(), w.command.end());
            std::vector<double> times;
            for (int r = 0; r < runs; ++r) times.push_back(cpu_seconds(command, w.env));
            const double t = median(times);
            by_name.emplace_back(c.name, t);
            if (t < 0) {
                std::printf("  %20s", "failed");
                continue;
            }
            if (c.prefix.empty()) native = t;
            char cell[64];
            std::snprintf(cell, sizeof cell, native > 0 ? "%.3f s %5.1fx" : "%.3f s", t, native > 0 ? t / native : 0.0);
            std::printf("  %20s", cell);
        }
        std::printf("\n");
        return [by_name](const std::string& name) {
            for (const auto& [n, t] : by_name)
                if (n == name) return t;
            return -1.0;
        };
    };
    const auto header = [](const std::vector<Config>& columns) {
        std::printf("%-34s", "workload");
        for (const auto& c : columns) std::printf("  %20s", c.name);
        std::printf("\n");
    };
    if (!cache_only) {
        header(configs);
        for (const auto& w : workloads) {
            if (!w.missing.empty()) {
                std::printf("%-34s  skipped: %s\n", w.name, w.missing.c_str());
                continue;
            }
            const auto time = row(w, configs);
            const double qemu = time(qemu_name), plugin = time("qemu + plugin"), emulate = time("pmc emulate"),
                         callgrind = time("callgrind"), branches = time("plugin + branches"),
                         branch_sim = time("cachegrind --branch-sim");
            if (emulate > 0 && qemu > 0)
                std::printf("%-34s  qemu + plugin / qemu: %.2fx (goal <= 1.25x); pmc emulate / qemu: %.2fx (%s)%s\n", "",
                            plugin / qemu, emulate / qemu, w.goal,
                            callgrind > 0 ? (", pmc emulate / callgrind: " + std::to_string(emulate / callgrind).substr(0, 4) +
                                             "x (goal <= 0.33x)").c_str()
                                          : "");
            if (branches > 0 && plugin > 0)
                std::printf("%-34s  plugin + branches / qemu + plugin: %.2fx (goal <= 1.5x)%s\n", "", branches / plugin,
                            branch_sim > 0 ? (", / cachegrind --branch-sim: " +
                                              std::to_string(branches / branch_sim).substr(0, 4) + "x").c_str()
                                           : "");
        }
        std::printf("\n");
    }

    // The cache model (issue 33): on compiled code, within 3x bare QEMU and no slower than Cachegrind's simulation
    // at the same geometry. One process each (xz -T1, sort --parallel=1): Cachegrind serializes threads.
    const char* geometry[] = {"--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"};
    const std::vector<Config> cache_configs = {
        {"native", {}, ""},
        {qemu_name, {qemu_path}, on_path(qemu_path) ? "" : qemu_path + " is not installed"},
        {"plugin, instructions", {qemu_path, "-plugin", plugin_path}, on_path(qemu_path) ? "" : qemu_path + " is not installed"},
        {"plugin, cache=on", {qemu_path, "-plugin", plugin_path + ",cache=on"},
         on_path(qemu_path) ? "" : qemu_path + " is not installed"},
        {"pmc emulate --cache", {pmc_tool, "emulate", "--cache", "--"}, ""},
        {"cachegrind cache-sim", {"valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=no", geometry[0],
                                  geometry[1], geometry[2], "--cachegrind-out-file=/dev/null", "-q"},
         valgrind ? "" : "valgrind is not installed"},
    };
    const std::vector<Workload> compiled = {
        workloads[1],
        {"sort(1) of 2 MB of lines", {full_path("sort"), "--parallel=1", "-S", "64M", data}, {},
         on_path("sort") ? "" : "sort is not installed"},
        workloads[2],
    };
    std::printf("The cache model on compiled code (geometry I1 32768,8,64, D1 32768,8,64, LL 8388608,16,64)\n");
    header(cache_configs);
    for (const auto& w : compiled) {
        if (!w.missing.empty()) {
            std::printf("%-34s  skipped: %s\n", w.name, w.missing.c_str());
            continue;
        }
        const auto time = row(w, cache_configs);
        const double qemu = time(qemu_name), instructions = time("plugin, instructions"), cache = time("plugin, cache=on"),
                     cachegrind = time("cachegrind cache-sim");
        if (qemu > 0 && cache > 0)
            std::printf("%-34s  instructions / qemu: %.2fx; cache=on / qemu: %.2fx (goal <= 3x)%s\n", "", instructions / qemu,
                        cache / qemu,
                        cachegrind > 0 ? ("; cache=on / cachegrind: " + std::to_string(cache / cachegrind).substr(0, 4) +
                                          "x (goal <= 1x)").c_str()
                                       : "");
    }
    std::printf("\n");
    std::fflush(stdout);
    const std::string self = argv[0];
    const int status = cache_only ? 0 : std::system((pmc_tool + " emulate -- '" + self + "' --read-cost").c_str());
    std::system(("rm -rf '" + dir + "'").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
