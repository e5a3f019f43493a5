// SPDX-License-Identifier: MIT
// pmc-bench-timelines: the order of threads' intervals on a clock, at scale. Threads take turns (a turn begins only
// after the previous turn, on another thread, ended), recording millions of scopes and doing the profiler's own work
// (page writes, flush(), label()) inside their turns; then the turns' order is checked in the file, in
// `pmc export --chrome` and (completeness: it has no time axis) in `pmc critical --json`. Printed results, not a
// test: tests/profiler/test_timelines.cpp is the small version ctest runs.
#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>

#include <command_line.hpp>
#include <fmt/format.h>

#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* help = R"(usage: pmc-bench-timelines [--runs N] [--scopes N] [--threads N] [--work N] [--dir DIR] [--pmc PATH]

Checks that on a clock (wall-time) an interval one thread begins after another thread's interval
ended is never recorded before it, at scale. In each run, --threads threads take turns: turn k
runs on thread k mod T and begins once turn k-1 has ended (an acquire/release hand-off); a turn is
a "turn" scope, then a "busy" scope holding --work "work" scopes, and every 16th turn a flush()
and a label() inside "busy" (the profiler's own work, which stays in the thread's clock). About
--scopes scopes are recorded per run. Then, per run:
  file      every turn's start (as read back with pmc::read_profile) is at or after the previous
            turn's end, and the file has no problem;
  export    the same in `pmc export --chrome` (ts and dur, exact to the ns);
  critical  `pmc critical --json` reads the file whole (status 0) and counts every turn and work
            scope (it has no time axis: this is what it can say).
Prints a line per run and a summary; exit status 1 if any run failed.

Options:
  --runs N     Runs (default 20).
  --scopes N   Scopes per run, about (default 2000000).
  --threads N  Threads taking turns (default 2).
  --work N     "work" scopes per turn (default 200: fewer hand-offs, which a loaded machine
               makes slow, each one waiting for the other thread to be scheduled).
  --dir DIR    Where the profiles and exports go (default: a new directory under /tmp, removed after).
  --pmc PATH   The pmc tool (default: the one built with this program).
  -h, --help   Show this help.
)";

#ifndef PMC_TOOL_PATH
#define PMC_TOOL_PATH "pmc"
#endif

struct Span {
    std::uint64_t start = 0, end = 0;
};

/// How turns' order held in one view: turns out of order, the worst overlap (ns), turns seen.
struct Order {
    std::uint64_t turns = 0, before = 0;
    std::int64_t worst = 0;
    std::string problem;
};

/// Turn k is the (k / T)-th "turn" of thread k mod T; each must start at or after turn k-1's end.
Order check_order(const std::vector<std::vector<Span>>& per_thread, std::uint64_t turns) {
    Order o;
    const std::size_t t = per_thread.size();
    for (std::size_t i = 0; i < t; ++i) {
        const std::uint64_t want = turns / t + (i < turns % t ? 1 : 0);
        if (per_thread[i].size() != want) {
            o.problem = fmt::format("thread {} has {} turns, {} were recorded", i, per_thread[i].size(), want);
            return o;
        }
    }
    for (std::uint64_t k = 1; k < turns; ++k) {
        const Span& prev = per_thread[(k - 1) % t][(k - 1) / t];
        const Span& cur = per_thread[k % t][k / t];
        const auto gap = static_cast<std::int64_t>(cur.start - prev.end);
        if (gap < 0) ++o.before;
        o.worst = std::min(o.worst, gap);
    }
    o.turns = turns;
    return o;
}

/// Runs `command`, its stdout read line by line into `line`; returns its exit status (-1: not run).
template <class F>
int run_lines(const std::string& command, F&& line) {
    FILE* f = ::popen(command.c_str(), "r");
    if (!f) return -1;
    std::string cur;
    char buf[1 << 16];
    std::size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) {
        const char* at = buf;
        const char* const end = buf + got;
        while (const char* nl = static_cast<const char*>(std::memchr(at, '\n', static_cast<std::size_t>(end - at)))) {
            cur.append(at, nl);
            line(cur);
            cur.clear();
            at = nl + 1;
        }
        cur.append(at, end);
    }
    if (!cur.empty()) line(cur);
    const int status = ::pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// The number after `"key":` in `s`, from `from` on (npos: none).
std::optional<std::string> field(const std::string& s, const std::string& key, std::size_t from = 0) {
    const std::string k = "\"" + key + "\":";
    const std::size_t at = s.find(k, from);
    if (at == std::string::npos) return std::nullopt;
    std::size_t b = at + k.size(), e = b;
    while (e < s.size() && (std::isdigit(static_cast<unsigned char>(s[e])) || s[e] == '.')) ++e;
    return s.substr(b, e - b);
}

/// "123.456" (µs with three decimals, as pmc export writes ns) as ns.
std::uint64_t us_text_ns(const std::string& t) {
    const std::size_t dot = t.find('.');
    const std::uint64_t whole = std::strtoull(t.substr(0, dot).c_str(), nullptr, 10);
    std::uint64_t frac = 0;
    if (dot != std::string::npos) {
        std::string f = t.substr(dot + 1);
        f.resize(3, '0');
        frac = std::strtoull(f.c_str(), nullptr, 10);
    }
    return whole * 1000 + frac;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

struct RunResult {
    bool ok = false;
    std::uint64_t scopes = 0, bytes = 0;
    Order file, chrome;
    std::string critical;
    double record_s = 0;
};

double now_s() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

RunResult one_run(const std::string& path, const std::string& pmc, std::uint64_t turns, unsigned threads,
                  unsigned work) {
    RunResult r;
    std::vector<std::uint64_t> tids(threads);
    const double t0 = now_s();
    {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const pmc::Label turn_label = prof.label("turn"), busy = prof.label("busy"), work_label = prof.label("work");
        std::atomic<std::uint64_t> turn{0};
        std::vector<std::thread> pool;
        for (unsigned i = 0; i < threads; ++i)
            pool.emplace_back([&, i] {
                tids[i] = static_cast<std::uint64_t>(::syscall(SYS_gettid));
                for (std::uint64_t k = i; k < turns; k += threads) {
                    for (unsigned spin = 0; turn.load(std::memory_order_acquire) != k; ++spin)
                        if (spin > 64) ::sched_yield(); // (2 cores shared: let the other thread run)
                    { auto s = prof.scope(turn_label); }
                    {
                        auto outer = prof.scope(busy);
                        for (unsigned w = 0; w < work; ++w) auto s = prof.scope(work_label);
                        if (k % 16 == i % 16) {
                            prof.flush();
                            (void)prof.label("label " + std::to_string(k % 64));
                        }
                    }
                    turn.store(k + 1, std::memory_order_release);
                }
            });
        for (auto& t : pool) t.join();
    }
    r.record_s = now_s() - t0;
    r.scopes = turns * (2 + work);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) r.bytes = static_cast<std::uint64_t>(st.st_size);
    std::map<std::uint64_t, std::size_t> thread_of_tid;
    for (unsigned i = 0; i < threads; ++i) thread_of_tid[tids[i]] = i;

    // The file.
    {
        auto p = pmc::read_profile(path);
        if (!p.ok()) {
            r.file.problem = p.failure().message;
            return r;
        }
        if (!p->problems.empty()) {
            r.file.problem = fmt::format("{} problem(s), the first: {}", p->problems.size(), p->problems.front());
            return r;
        }
        std::vector<std::vector<Span>> spans(threads);
        for (const auto& t : p->threads) {
            auto it = thread_of_tid.find(t.tid);
            if (it == thread_of_tid.end()) continue; // the main thread (records nothing)
            for (const auto& rec : t.records)
                if (rec.kind == pmc::profile_format::RecordKind::interval && p->string(rec.label) == "turn")
                    spans[it->second].push_back({p->values[rec.first_value], p->values[rec.first_value + 1]});
        }
        r.file = check_order(spans, turns);
    }

    // pmc export --chrome, read as it is written (hundreds of MB for millions of scopes: never stored).
    {
        std::vector<std::vector<Span>> spans(threads);
        const std::string command = quoted(pmc) + " export --chrome " + quoted(path) + " -o -";
        const int status = run_lines(command, [&](const std::string& l) {
            if (l.find("\"ph\":\"X\",\"name\":\"turn\"") == std::string::npos) return;
            const auto tid = field(l, "tid"), ts = field(l, "ts"), dur = field(l, "dur");
            if (!tid || !ts || !dur) return;
            auto it = thread_of_tid.find(std::strtoull(tid->c_str(), nullptr, 10));
            if (it == thread_of_tid.end()) return;
            const std::uint64_t start = us_text_ns(*ts);
            spans[it->second].push_back({start, start + us_text_ns(*dur)});
        });
        if (status != 0) {
            r.chrome.problem = fmt::format("pmc export --chrome exited with status {}", status);
            return r;
        }
        for (auto& s : spans) // (the export walks each thread from its end: put its turns back in order)
            std::sort(s.begin(), s.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
        r.chrome = check_order(spans, turns);
    }

    // pmc critical --json: the file read whole, every scope counted.
    {
        std::string json;
        const int status = run_lines(quoted(pmc) + " critical --json " + quoted(path), [&](const std::string& l) { json += l; });
        auto calls = [&](const std::string& label) -> std::uint64_t {
            const std::size_t at = json.find("{\"label\":\"" + label + "\"");
            if (at == std::string::npos) return 0;
            const auto c = field(json, "calls", at);
            return c ? std::strtoull(c->c_str(), nullptr, 10) : 0;
        };
        const std::uint64_t turn_calls = calls("turn"), work_calls = calls("work");
        if (status != 0)
            r.critical = fmt::format("pmc critical exited with status {}", status);
        else if (turn_calls != turns || work_calls != turns * work)
            r.critical = fmt::format("pmc critical counts {} turns and {} work scopes; {} and {} were recorded",
                                     turn_calls, work_calls, turns, turns * work);
    }
    r.ok = r.file.problem.empty() && r.file.before == 0 && r.chrome.problem.empty() && r.chrome.before == 0 &&
           r.critical.empty();
    return r;
}

std::string order_text(const Order& o) {
    if (!o.problem.empty()) return o.problem;
    if (o.before == 0) return "in order";
    return fmt::format("{} turn(s) before the turn they followed, by up to {} ns", o.before, -o.worst);
}

} // namespace

static int run(int argc, char** argv) {
    std::string dir, pmc = PMC_TOOL_PATH, runs_text, scopes_text, threads_text, work_text;
    pmc_cli::CommandLine command_line("pmc-bench-timelines", help);
    command_line.option("--runs", runs_text, "a number of runs");
    command_line.option("--scopes", scopes_text, "a number of scopes per run");
    command_line.option("--threads", threads_text, "a number of threads from 2 to 64");
    command_line.option("--work", work_text, "a number of work scopes per turn");
    command_line.option("--dir", dir, "a directory for the profiles");
    command_line.option("--pmc", pmc, "the pmc tool");
    if (auto status = command_line.parse(argc, argv)) return *status;
    auto number = [&](const std::string& text, const char* name, std::uint64_t fallback, std::uint64_t lo,
                      std::uint64_t hi) -> std::optional<std::uint64_t> {
        if (text.empty()) return fallback;
        char* end = nullptr;
        const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
        if (*end != '\0' || text[0] == '-' || v < lo || v > hi) {
            (void)command_line.usage_error(fmt::format("{} needs a whole number from {} to {}, not '{}'", name, lo, hi, text));
            return std::nullopt; // (status 1, as for any usage error)
        }
        return v;
    };
    const auto runs = number(runs_text, "--runs", 20, 1, 100000);
    if (!runs) return 1;
    const auto scopes = number(scopes_text, "--scopes", 2000000, 100, 1000000000);
    if (!scopes) return 1;
    const auto threads = number(threads_text, "--threads", 2, 2, 64);
    if (!threads) return 1;
    const auto work = number(work_text, "--work", 200, 0, 100000);
    if (!work) return 1;
    bool remove_dir = false;
    if (!dir.empty()) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            fmt::print(stderr, "pmc-bench-timelines: --dir {}: not a directory; give an existing one, or leave --dir out\n", dir);
            return 1;
        }
    } else {
        char tmpl[] = "/tmp/pmc-bench-timelines-XXXXXX";
        if (!::mkdtemp(tmpl)) {
            fmt::print(stderr, "pmc-bench-timelines: cannot create a directory under /tmp for the profiles\n");
            return 1;
        }
        dir = tmpl;
        remove_dir = true;
    }
    const std::uint64_t turns = std::max<std::uint64_t>(2, *scopes / (2 + *work));
    fmt::print("pmc-bench-timelines: {} runs; each {} threads taking {} turns, {} scopes (wall-time; {})\n", *runs,
               *threads, turns, turns * (2 + *work), pmc);
    std::uint64_t good = 0;
    for (std::uint64_t i = 0; i < *runs; ++i) {
        const std::string path = dir + "/run" + std::to_string(i) + ".pmcprof";
        const RunResult r = one_run(path, pmc, turns, static_cast<unsigned>(*threads), static_cast<unsigned>(*work));
        good += r.ok ? 1 : 0;
        fmt::print("run {:>3}: {} scopes in {:.1f} s, {:.2f} B/scope; file: {}; export: {}; critical: {}{}\n", i + 1,
                   r.scopes, r.record_s, r.scopes ? static_cast<double>(r.bytes) / static_cast<double>(r.scopes) : 0.0,
                   order_text(r.file), order_text(r.chrome), r.critical.empty() ? "read whole, every scope counted" : r.critical,
                   r.ok ? "" : "  FAILED");
        std::fflush(stdout);
        if (r.ok || remove_dir) std::remove(path.c_str()); // (a failed run's file is kept with --dir)
    }
    fmt::print("{} of {} runs: every turn after the one it followed, in the file, the export and critical's counts\n",
               good, *runs);
    if (remove_dir) std::system(("rm -rf '" + dir + "'").c_str());
    return good == *runs ? 0 : 1;
}

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        const std::string what = e.what();
        fmt::print(stderr, "pmc-bench-timelines: {}\n", what.substr(0, what.find('\n')));
        return 1;
    }
}
