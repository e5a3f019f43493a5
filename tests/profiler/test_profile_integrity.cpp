// SPDX-License-Identifier: MIT
// Profiles that never lie (issue 19): one file per process, no torn pages at exit(), and every damage to a file
// (cut at any length, a page deleted, duplicated or moved, a length field changed) either read as the same data or
// named as a loss, never a crash or a hang. Format version 2 (docs/profile-format.md).
#include <pmc/profile_format.hpp>
#include <pmc/profile_reader.hpp>
#include <pmc/profiler.hpp>

#include "catch.hpp"
#include "temp_dir.hpp"
#include "command.hpp"
#include "profile_builder.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace pf = pmc::profile_format;

using pmc_test::TempDir;

bool spit(const std::string& path, const std::vector<unsigned char>& b) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const bool ok = b.empty() || std::fwrite(b.data(), 1, b.size(), f) == b.size(); // (data() may be null when empty)
    return std::fclose(f) == 0 && ok;
}

/// Everything a tool could show, as text: two profiles that print alike hold the same data.
std::string canonical(const pmc::Profile& p) {
    std::string out;
    for (const auto& t : p.threads) {
        out += "thread " + std::to_string(t.index) + " " + t.name + " tid " + std::to_string(t.tid) + "\n";
        for (const auto& r : t.records) {
            out += std::to_string(static_cast<int>(r.kind)) + " " + std::to_string(r.depth) + " " + p.string(r.label) +
                   " " + (r.arg ? p.string(r.arg) : std::string("-"));
            for (std::size_t i = 0; i < p.values_per_record(r.kind); ++i)
                out += " " + std::to_string(p.values[r.first_value + i]);
            out += "\n";
        }
        for (const auto& o : t.open) out += "open " + p.string(o.label) + "\n";
    }
    return out;
}

/// The page boundaries of a file: [start, end) of each page after the header.
std::vector<std::pair<std::size_t, std::size_t>> pages_of(const std::vector<unsigned char>& b) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::uint32_t at = 0;
    std::memcpy(&at, b.data() + 12, 4);
    while (at + pf::page_header_bytes <= b.size()) {
        std::uint32_t len = 0;
        std::memcpy(&len, b.data() + at + 16, 4);
        out.emplace_back(at, at + pf::page_header_bytes + len);
        at += static_cast<std::uint32_t>(pf::page_header_bytes) + len;
    }
    REQUIRE(at == b.size());
    return out;
}

/// A synthetic two-thread profile with several events pages each, strings and an end record.
std::vector<unsigned char> sample_profile() {
    pmc_test::ProfileBuilder b;
    b.page_records = 4;
    for (std::uint32_t i = 0; i < 2; ++i) {
        auto& t = b.thread(i, "worker" + std::to_string(i));
        for (int k = 0; k < 3; ++k)
            t.scope("outer", 5 + i, [&] {
                t.scope("inner", 3, [&] { t.scope("leaf", 1); });
                t.instant("hit");
                t.integer("size", 40 + static_cast<std::uint64_t>(k));
            });
    }
    return b.bytes();
}

/// Reads `bytes` with both readers; they must agree. Returns the problems (empty: the data must equal `whole`).
struct Verdict {
    bool header_ok = false;
    std::vector<std::string> problems;
    std::string data;
};
Verdict read_both(const std::vector<unsigned char>& bytes, const std::string& scratch) {
    Verdict v;
    auto p = pmc::parse_profile(bytes.data(), bytes.size());
    REQUIRE(spit(scratch, bytes));
    auto r = pmc::ProfileReader::open(scratch);
    REQUIRE(p.ok() == r.ok());
    if (!p) return v;
    v.header_ok = true;
    v.problems = p->problems;
    v.data = canonical(*p);
    CHECK(r->profile().problems == p->problems); // the same words from both readers
    CHECK(r->profile().bytes_lost == p->bytes_lost);
    CHECK(p->bytes_read + p->bytes_lost <= bytes.size());
    return v;
}

} // namespace

TEST_CASE("profile v2: a file cut at every byte length, any page deleted, duplicated or moved, any length field "
          "changed: the same data, or the loss named") {
    TempDir dir;
    const std::string scratch = dir.file("damaged.pmcprof");
    const auto whole = sample_profile();
    const Verdict good = read_both(whole, scratch);
    REQUIRE(good.header_ok);
    REQUIRE(good.problems.empty());
    const auto pages = pages_of(whole);
    REQUIRE(pages.size() >= 8); // strings, 2 thread pages, events pages, end
    std::size_t named = 0, same = 0;
    auto judge = [&](const std::vector<unsigned char>& bytes, const std::string& what) {
        INFO(what);
        const Verdict v = read_both(bytes, scratch);
        if (!v.header_ok) return; // a damaged header: refused (the tools exit 1)
        if (v.problems.empty()) {
            CHECK(v.data == good.data); // never exit 0 with different data
            ++same;
        } else {
            ++named;
        }
    };
    for (std::size_t n = 0; n < whole.size(); ++n) {
        const Verdict v = read_both(std::vector<unsigned char>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n)), scratch);
        INFO("cut at " << n);
        if (v.header_ok) CHECK(!v.problems.empty()); // a cut is always named (at a page boundary: no end record)
    }
    for (std::size_t i = 0; i < pages.size(); ++i) {
        const auto [from, to] = pages[i];
        auto deleted = whole;
        deleted.erase(deleted.begin() + static_cast<std::ptrdiff_t>(from), deleted.begin() + static_cast<std::ptrdiff_t>(to));
        {
            INFO("page " << i << " deleted");
            const Verdict v = read_both(deleted, scratch);
            CHECK(!v.problems.empty()); // every page counts: a deleted one is always missed
        }
        auto dup = whole;
        dup.insert(dup.begin() + static_cast<std::ptrdiff_t>(to), whole.begin() + static_cast<std::ptrdiff_t>(from),
                   whole.begin() + static_cast<std::ptrdiff_t>(to));
        judge(dup, "page " + std::to_string(i) + " duplicated");
        for (std::size_t j = 0; j < pages.size(); j += 3) { // moved before page j
            if (j == i || j == i + 1) continue;
            std::vector<unsigned char> page(whole.begin() + static_cast<std::ptrdiff_t>(from), whole.begin() + static_cast<std::ptrdiff_t>(to));
            auto moved = deleted;
            const std::size_t at = pages[j].first - (j > i ? to - from : 0);
            moved.insert(moved.begin() + static_cast<std::ptrdiff_t>(at), page.begin(), page.end());
            judge(moved, "page " + std::to_string(i) + " moved before page " + std::to_string(j));
        }
        for (std::uint32_t delta : {1u, 0xFFFFFFFFu, 0x100u, 0x80000000u, 4u}) {
            auto changed = whole;
            std::uint32_t len = 0;
            std::memcpy(&len, &changed[from + 16], 4);
            len += delta;
            std::memcpy(&changed[from + 16], &len, 4);
            INFO("page " << i << " length field + " << delta);
            const Verdict v = read_both(changed, scratch);
            CHECK(!v.problems.empty());
        }
    }
    (void)named; // (moves and duplicates all read as the same data: pages are kept by number)
    CHECK(same > 0); // moved or duplicated pages read as the same data (pages are kept by their numbers)
}

TEST_CASE("profile v2: a crafted file of page headers is resynchronised in linear time") {
    // 2 MiB of "PMCP" with headers whose own checksum fails: every offset is a candidate magic. Quadratic
    // resynchronisation took 17 s on such a file; linear takes milliseconds.
    auto bytes = sample_profile();
    const std::size_t header = pages_of(bytes).front().first;
    bytes.resize(header);
    while (bytes.size() < (2u << 20)) {
        const unsigned char fake[32] = {'P', 'M', 'C', 'P', 1, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                        0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        bytes.insert(bytes.end(), fake, fake + sizeof fake);
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto p = pmc::parse_profile(bytes.data(), bytes.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(p.ok());
    CHECK(!p->problems.empty());
    CHECK(p->bytes_lost == bytes.size() - header);
    CHECK(seconds < 2.0);
}

TEST_CASE("profile v2: a lost strings page, a record naming an undefined string, a thread page moved") {
    TempDir dir;
    const auto whole = sample_profile();
    const auto pages = pages_of(whole);
    // The strings page is the first page: without it every label is unknown, and that is said.
    auto bytes = whole;
    bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(pages[0].first), bytes.begin() + static_cast<std::ptrdiff_t>(pages[0].second));
    auto p = pmc::parse_profile(bytes.data(), bytes.size());
    REQUIRE(p.ok());
    std::string all;
    for (const auto& w : p->problems) all += w + "\n";
    CHECK_THAT(all, ContainsSubstring("strings page(s) lost"));
    CHECK_THAT(all, ContainsSubstring("string id(s) the file does not define"));
}

namespace {
std::vector<unsigned char> profile_file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
std::size_t strings_pages_in(const std::vector<unsigned char>& b) {
    std::size_t n = 0;
    for (const auto& [from, to] : pages_of(b)) {
        std::uint16_t kind = 0;
        std::memcpy(&kind, b.data() + from + 4, 2);
        n += kind == static_cast<std::uint16_t>(pf::PageKind::strings) ? 1 : 0;
    }
    return n;
}
} // namespace

TEST_CASE("profiler: strings interned together share a strings page, and a string longer than a page gets its own") {
    TempDir dir;
    const std::string path = dir.file("packed.pmcprof");
    const std::string long_name(5000, 'x');
    {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096;
        pmc::Profiler prof{o};
        std::vector<pmc::Label> labels;
        for (int i = 0; i < 1000; ++i) labels.push_back(prof.label("function_" + std::to_string(i))); // 20-22 B each
        for (auto l : labels) auto s = prof.scope(l);
        auto s = prof.scope(prof.label(long_name));
    }
    const auto bytes = profile_file_bytes(path);
    auto p = pmc::parse_profile(bytes.data(), bytes.size());
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    CHECK(p->strings.size() == 1002); // with the own-work label
    CHECK(p->string(p->threads.at(0).records.back().label) == long_name);
    // The short strings (8 bytes of id and length each, then the text) fill 4096-byte pages one after the other; the
    // long one has a page of its own.
    std::size_t short_bytes = 0;
    for (const auto& [id, text] : p->strings) short_bytes += text.size() < 4096 ? 8 + text.size() : 0;
    const std::size_t pages = strings_pages_in(bytes);
    INFO("strings pages: " << pages << ", short strings' bytes: " << short_bytes);
    CHECK(pages == (short_bytes + 4095) / 4096 + 1);
}

TEST_CASE("profiler: a string interned while other threads record is in the file before any page that names it") {
    TempDir dir;
    const std::string path = dir.file("strings-order.pmcprof");
    constexpr int count = 400;
    {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096; // a page write every few hundred records
        pmc::Profiler prof{o};
        std::atomic<std::uint32_t> latest{prof.label("first").id};
        std::atomic<bool> done{false};
        std::vector<std::thread> recorders;
        for (int r = 0; r < 2; ++r)
            recorders.emplace_back([&] {
                std::uint32_t seen = 0; // each new label: 20 scopes (a bounded file however slow the interner)
                while (!done.load(std::memory_order_acquire)) {
                    const pmc::Label l{latest.load(std::memory_order_acquire)};
                    if (l.id == seen) {
                        std::this_thread::yield();
                        continue;
                    }
                    seen = l.id;
                    for (int i = 0; i < 20; ++i) auto s = prof.scope(l);
                }
            });
        for (int i = 0; i < count; ++i) {
            const pmc::Label l = prof.label("fresh " + std::to_string(i));
            latest.store(l.id, std::memory_order_release);
            if (i % 40 == 0) { // a thread page whose open interval names a string interned just now
                const pmc::Label open = prof.label("open " + std::to_string(i));
                prof.begin(open);
                prof.thread_name("interner " + std::to_string(i));
                prof.end(open);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        done.store(true, std::memory_order_release);
        for (auto& t : recorders) t.join();
    }
    const auto bytes = profile_file_bytes(path);
    auto whole = pmc::parse_profile(bytes.data(), bytes.size());
    REQUIRE(whole.ok());
    CHECK(whole->problems.empty());
    // Cut after each page (what a SIGKILL leaves): no record and no open interval names a string not yet written.
    std::size_t cuts = 0, undefined = 0;
    for (const auto& [from, to] : pages_of(bytes)) {
        auto p = pmc::parse_profile(bytes.data(), to);
        REQUIRE(p.ok());
        ++cuts;
        bool bad = false;
        for (const auto& w : p->problems) bad = bad || w.find("does not define") != std::string::npos;
        for (const auto& t : p->threads)
            for (const auto& o : t.open) bad = bad || (o.label != 0 && !p->strings.count(o.label));
        if (bad) ++undefined;
    }
    INFO(cuts << " cuts");
    CHECK(cuts > 20);
    CHECK(undefined == 0);
    CHECK(strings_pages_in(bytes) < static_cast<std::size_t>(count));
}

TEST_CASE("profiler: strings still waiting when exit() or a fatal signal ends the program are written with its end") {
    TempDir dir;
    for (const bool by_signal : {false, true}) {
        const std::string path = dir.file(by_signal ? "abort.pmcprof" : "exit.pmcprof");
        std::fflush(nullptr);
        const pid_t kid = ::fork();
        REQUIRE(kid >= 0);
        if (kid == 0) { // fewer records than a page: no page was written, the strings all wait
            std::signal(SIGABRT, SIG_DFL); // (Catch's handler, inherited, would keep the profiler's out)
            pmc::ProfilerOptions o{path, {"wall-time"}};
            o.measure_cost = false;
            static pmc::Profiler* prof = new pmc::Profiler(o); // (never destroyed: exit() or the signal ends it)
            for (int i = 0; i < 5; ++i) auto s = prof->scope(prof->label("waiting " + std::to_string(i)));
            if (by_signal) std::abort();
            std::exit(0);
        }
        int status = 0;
        REQUIRE(::waitpid(kid, &status, 0) == kid);
        CHECK((by_signal ? WIFSIGNALED(status) : WIFEXITED(status)));
        auto p = pmc::read_profile(path);
        REQUIRE(p.ok());
        INFO(path);
        CHECK(p->problems.empty());
        std::size_t named = 0;
        for (const auto& t : p->threads)
            for (const auto& r : t.records) named += p->string(r.label).rfind("waiting ", 0) == 0 ? 1 : 0;
        CHECK(named == 5);
    }
}

TEST_CASE("profiler: %p in the path, and two processes given one path never share a file") {
    TempDir dir;
    // %p: the process id, zero-padded to 7 digits; %%: a percent sign.
    {
        std::string why;
        CHECK(pmc::detail::expand_profile_path("a.%p.%%.pmcprof", 42, why) == std::string("a.0000042.%.pmcprof"));
        CHECK(!pmc::detail::expand_profile_path("a.%d.pmcprof", 42, why));
        CHECK_THAT(why, ContainsSubstring("%p (the process id)"));
        CHECK(pmc::detail::per_process_path("/x/run.pmcprof") == "/x/run.%p.pmcprof");
        CHECK(pmc::detail::per_process_path("/x.d/run") == "/x.d/run.%p");
    }
    const std::string path = dir.file("shared.pmcprof");
    // Two processes started at once, 300 and 700 calls, from_env with one PMC_PROFILE.
    ::setenv("PMC_PROFILE", path.c_str(), 1);
    ::setenv("PMC_PROFILE_COUNTERS", "page-faults", 1);
    // Both hold their profilers open at once: each says so on `opened` and records only after `go`, which the
    // parent sends when both have opened. (Started together but not held, one child could finish before the other
    // opened the path, on a loaded machine: then the path is free again and no second file is made.)
    int go[2], opened[2];
    REQUIRE(::pipe(go) == 0);
    REQUIRE(::pipe(opened) == 0);
    pid_t kids[2];
    const int calls[2] = {300, 700};
    for (int k = 0; k < 2; ++k) {
        kids[k] = ::fork();
        REQUIRE(kids[k] >= 0);
        if (kids[k] == 0) {
            {
                auto prof = pmc::Profiler::from_env();
                (void)!::write(opened[1], "o", 1);
                char c;
                (void)!::read(go[0], &c, 1);
                const auto f = prof.label("call");
                for (int i = 0; i < calls[k]; ++i) auto s = prof.scope(f);
            }
            ::_exit(0);
        }
    }
    ::unsetenv("PMC_PROFILE");
    ::unsetenv("PMC_PROFILE_COUNTERS");
    char both[2];
    REQUIRE(::read(opened[0], both, 1) == 1);
    REQUIRE(::read(opened[0], both + 1, 1) == 1);
    (void)!::write(go[1], "xx", 2);
    ::close(opened[0]);
    ::close(opened[1]);
    for (pid_t kid : kids) {
        int st = 0;
        REQUIRE(::waitpid(kid, &st, 0) == kid);
        CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    }
    ::close(go[0]);
    ::close(go[1]);
    // One wrote the path, the other its .%p name: each holds its own process's calls alone.
    std::vector<int> counts;
    for (const auto& name : {std::string("shared.pmcprof"), "shared." + [&] {
                                 char d[16];
                                 auto p = pmc::read_profile(path);
                                 REQUIRE(p.ok());
                                 const pid_t other = static_cast<pid_t>(p->pid) == kids[0] ? kids[1] : kids[0];
                                 std::snprintf(d, sizeof d, "%07d", static_cast<int>(other));
                                 return std::string(d);
                             }() + ".pmcprof"}) {
        auto p = pmc::read_profile(dir.file(name));
        REQUIRE(p.ok());
        CHECK(p->problems.empty());
        int n = 0;
        for (const auto& t : p->threads) n += static_cast<int>(t.records.size());
        counts.push_back(n);
        CHECK((p->pid == static_cast<std::uint64_t>(kids[0]) || p->pid == static_cast<std::uint64_t>(kids[1])));
    }
    std::sort(counts.begin(), counts.end());
    CHECK(counts == std::vector<int>{300, 700});
}

TEST_CASE("profiler: the constructor refuses a path another process is writing, and says to use %p") {
    TempDir dir;
    const std::string path = dir.file("busy.pmcprof");
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.measure_cost = false;
    pmc::Profiler first{o};
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t kid = ::fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
        std::string msg = "none";
        try {
            pmc::Profiler second{o};
        } catch (const std::exception& e) {
            msg = e.what();
        }
        (void)!::write(fds[1], msg.data(), msg.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    char buf[1024];
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    ::close(fds[0]);
    ::waitpid(kid, nullptr, 0);
    const std::string msg(buf, got > 0 ? static_cast<std::size_t>(got) : 0);
    CHECK_THAT(msg, ContainsSubstring("is being written by another process"));
    CHECK_THAT(msg, ContainsSubstring("%p"));
}

TEST_CASE("profiler: strict mode throws where from_env would fall back, and a semicolon is explained as use commas") {
    TempDir dir;
    const std::string path = dir.file("strict.pmcprof");
    ::setenv("PMC_PROFILE", path.c_str(), 1);
    ::setenv("PMC_PROFILE_STRICT", "1", 1);
    ::setenv("PMC_PROFILE_COUNTERS", "page-faults;wall-time", 1);
    std::string strict_error;
    try {
        auto p = pmc::Profiler::from_env();
    } catch (const std::exception& e) {
        strict_error = e.what();
    }
    CHECK_THAT(strict_error, ContainsSubstring("separated by commas, not ';'"));
    ::setenv("PMC_PROFILE_COUNTERS", "no-such-counter", 1);
    strict_error.clear();
    try {
        auto p = pmc::Profiler::from_env();
    } catch (const std::exception& e) {
        strict_error = e.what();
    }
    CHECK(!strict_error.empty());
    // Lenient (no PMC_PROFILE_STRICT): the fallback, with the same explanation in the header's warning.
    ::unsetenv("PMC_PROFILE_STRICT");
    ::setenv("PMC_PROFILE_COUNTERS", "page-faults;wall-time", 1);
    {
        auto p = pmc::Profiler::from_env();
        CHECK(p.enabled());
        CHECK(p.counters() == std::vector<std::string>{"wall-time"});
    }
    ::unsetenv("PMC_PROFILE");
    ::unsetenv("PMC_PROFILE_COUNTERS");
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    REQUIRE(!p->warnings.empty());
    CHECK_THAT(p->warnings[0], ContainsSubstring("separated by commas, not ';'"));
}

// Run by the next test in a fresh process (this binary again), where wall-time's calibration (a 20 ms nanosleep)
// has not happened yet: the voluntary context switches from_env makes there (a sleep is one; a failed open(2) and a
// message to a pipe with room in it are none).
TEST_CASE("child: from_env with a file that cannot be created", "[.]") {
    rusage before{}, after{};
    ::getrusage(RUSAGE_THREAD, &before);
    auto p = pmc::Profiler::from_env();
    ::getrusage(RUSAGE_THREAD, &after);
    std::printf("enabled=%d sleeps=%ld\n", p.enabled() ? 1 : 0, after.ru_nvcsw - before.ru_nvcsw);
}

TEST_CASE("profiler: from_env opens no counter (no 20 ms wall-time calibration) when the file cannot be created") {
    // Judged by what the child did, not by how long it took (13 ms once at a load of 6, against a 10 ms bar).
    auto r = pmc_test::run_command("PMC_PROFILE=/nonexistent-dir/x.pmcprof /proc/" + std::to_string(::getpid()) +
                                   "/exe 'child: from_env with a file that cannot be created' 2>&1");
    INFO(r.out);
    const std::size_t at = r.out.find("enabled=0 sleeps=");
    REQUIRE(at != std::string::npos);
    CHECK(std::stol(r.out.substr(at + 17)) == 0); // the calibration sleeps 20 ms: one voluntary switch at least
    CHECK(r.out.find("cannot create the profile") != std::string::npos);
}

namespace {
/// A child that records on three threads while main calls exit().
[[noreturn]] void exit_while_recording(const std::string& path) {
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.page_bytes = 4096;
    o.measure_cost = false;
    static pmc::Profiler* prof = nullptr; // never destroyed: exit() ends the recording
    prof = new pmc::Profiler(o);
    const auto a = prof->label("a"), b = prof->label("b");
    std::atomic<int> started{0};
    for (int k = 0; k < 3; ++k)
        std::thread([&] {
            started.fetch_add(1);
            for (std::uint64_t i = 0;; ++i) {
                auto s = prof->scope(a);
                prof->integer(b, i);
            }
        }).detach();
    while (started.load() < 3) std::this_thread::yield();
    for (int i = 0; i < 3000; ++i) auto s = prof->scope(b);
    std::exit(0);
}
} // namespace

TEST_CASE("profiler: exit() while three threads record, 200 runs: every profile reads with no problem", "[once]") {
    TempDir dir;
    int bad = 0;
    std::string first_problem;
    // Sanitized: 50 runs (each child's exit runs the leak check: 0.37 s a run).
    for (std::size_t run = 0; run < 200; run += pmc_test::one_in_sanitized(4)) {
        const std::string path = dir.file("exit" + std::to_string(run) + ".pmcprof");
        const pid_t kid = ::fork();
        REQUIRE(kid >= 0);
        if (kid == 0) exit_while_recording(path);
        int st = 0;
        REQUIRE(::waitpid(kid, &st, 0) == kid);
        REQUIRE(WIFEXITED(st));
        auto p = pmc::read_profile(path);
        REQUIRE(p.ok());
        if (!p->problems.empty()) {
            ++bad;
            if (first_problem.empty()) first_problem = p->problems.front();
        }
        CHECK(p->ended_by() == "exit()");
        ::unlink(path.c_str());
    }
    INFO("first problem: " << first_problem);
    CHECK(bad == 0);
}

// ---- the ending while threads register (close(), exit(), a signal) and an end record that cannot list them all ---

namespace {

/// A child's end: a Profiler closed (static: destroyed by exit()) or left to exit()'s flush (`leaked`) while
/// `workers` threads make their first scopes at that very moment (released by exit() itself). Each worker records scope + integer 0, 1, 2, ...
[[noreturn]] void end_while_registering(const std::string& path, bool leaked, int workers) {
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.measure_cost = false;
    static pmc::Profiler* kept = nullptr;
    pmc::Profiler* prof = nullptr;
    if (leaked) {
        prof = kept = new pmc::Profiler(o); // never destroyed: exit()'s flush ends it
    } else {
        static pmc::Profiler closed_by_exit{o}; // destroyed by exit(): close() runs while the workers register
        prof = &closed_by_exit;
    }
    const auto a = prof->label("a"), b = prof->label("b");
    static std::atomic<bool> go{false};
    static std::atomic<int> ready{0};
    for (int k = 0; k < workers; ++k)
        std::thread([prof, a, b] {
            ready.fetch_add(1);
            while (!go.load()) {
            }
            for (std::uint64_t i = 0;; ++i) { // the first scope registers the thread
                auto s = prof->scope(a);
                prof->integer(b, i);
            }
        }).detach();
    while (ready.load() < workers) std::this_thread::yield();
    for (std::uint64_t i = 0; i < 2000; ++i) prof->integer(b, i); // a page for the end to write (a longer close)
    // Registered after the profiler's destructor and exit flush, so run just before them: the workers' first
    // scopes begin as the profile ends.
    std::atexit([] { go.store(true); });
    std::exit(0);
}

/// Per thread, whether its integer events run 0, 1, 2, ... with no gap.
bool integers_consecutive(const pmc::Profile& p) {
    for (const auto& t : p.threads) {
        std::uint64_t next = 0;
        for (const auto& r : t.records)
            if (r.kind == pf::RecordKind::integer && p.values[r.first_value + 1] != next++) return false;
    }
    return true;
}

} // namespace

TEST_CASE("profiler: close() and exit() while threads register their first scope: every thread that wrote is in the "
          "end record, nothing follows it, every profile reads with no problem") {
    TempDir dir;
    (void)pmc::Counter::try_open("wall-time"); // calibrated once here: the children inherit it
    int bad = 0, gaps = 0, failed = 0;
    std::string first_problem;
    constexpr int runs = 40, batch = 4; // 30 closed, 10 ended by exit()
    for (int first = 0; first < runs; first += batch) {
        pid_t kids[batch] = {};
        for (int run = first; run < first + batch; ++run) {
            std::fflush(nullptr);
            kids[run - first] = ::fork();
            REQUIRE(kids[run - first] >= 0);
            if (kids[run - first] == 0)
                end_while_registering(dir.file("reg" + std::to_string(run) + ".pmcprof"), run % 4 == 3, 4);
        }
        for (int run = first; run < first + batch; ++run) {
            const std::string path = dir.file("reg" + std::to_string(run) + ".pmcprof");
            int st = 0;
            REQUIRE(::waitpid(kids[run - first], &st, 0) == kids[run - first]);
            if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                ++failed;
                if (first_problem.empty())
                    first_problem = "run " + std::to_string(run) + ": status " + std::to_string(st);
            }
            auto p = pmc::read_profile(path);
            REQUIRE(p.ok());
            if (!p->problems.empty()) {
                ++bad;
                if (first_problem.empty()) first_problem = "run " + std::to_string(run) + ": " + p->problems.front();
            }
            CHECK(p->has_end);
            CHECK(p->ended_by() == (run % 4 == 3 ? "exit()" : "closed"));
            if (!integers_consecutive(*p)) ++gaps;
            ::unlink(path.c_str());
        }
    }
    INFO("first problem: " << first_problem);
    CHECK(failed == 0);
    CHECK(bad == 0);
    CHECK(gaps == 0);
}

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Checks that an ending which could not reach every thread said so twice: in the profile (a problem that starts
/// with `problem`) and on the child's stderr (the file `err`, which holds `on_stderr`).
void check_threads_left_out_said(const pmc::Profile& p, const std::string& problem, const std::string& err,
                                 const std::string& on_stderr) {
    bool said = false;
    for (const auto& why : p.problems) said = said || why.find(problem) == 0;
    INFO("problems: " << p.problems.size() << (p.problems.empty() ? std::string() : ", first: " + p.problems[0]));
    CHECK(said);
    const std::string text = read_text(err);
    INFO("stderr: " << text);
    CHECK(text.find(on_stderr) != std::string::npos);
}

/// A child: three workers record (their pages unwritten), then the main thread is caught by SIGTERM's handler as a
/// thread is being linked in on it (the list's head points at it, its link to the older threads not yet stored:
/// what a handler run between link_thread's two stores would see, were signals not blocked there).
[[noreturn]] void signal_while_linking(const std::string& path, const std::string& err) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, 2) < 0) std::_Exit(3);
    std::signal(SIGTERM, SIG_DFL); // (Catch's handler otherwise: the profiler covers only signals at their default)
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.measure_cost = false;
    auto* prof = new pmc::Profiler(o); // never destroyed: the signal ends the process
    const auto a = prof->label("a");
    static std::atomic<int> recorded{0};
    for (int k = 0; k < 3; ++k)
        std::thread([prof, a] {
            for (std::uint64_t i = 0; i < 10; ++i) prof->integer(a, i);
            recorded.fetch_add(1);
            for (;;) ::pause();
        }).detach();
    while (recorded.load() < 3) std::this_thread::yield();
    auto& s = pmc::detail::ProfilerTestAccess::shared(*prof);
    auto* linking = new pmc::detail::ProfilerThread;
    linking->shared = &s;
    linking->tid = static_cast<pid_t>(::syscall(SYS_gettid));
    linking->index = s.next_thread.fetch_add(1);
    linking->next.store(pmc::detail::ProfilerShared::linking());
    s.head.exchange(linking);
    std::raise(SIGTERM);
    std::_Exit(4); // (not reached: the handler re-raises SIGTERM)
}

} // namespace

TEST_CASE("profiler: an ending that cannot reach every thread says so, in the end record and on stderr") {
    TempDir dir;
    const std::string path = dir.file("cut.pmcprof"), err = dir.file("cut.err");
    std::fflush(nullptr);
    const pid_t kid = ::fork();
    REQUIRE(kid >= 0);
    if (kid == 0) signal_while_linking(path, err);
    int st = 0;
    REQUIRE(::waitpid(kid, &st, 0) == kid);
    INFO("status " << st);
    REQUIRE(WIFSIGNALED(st));
    CHECK(WTERMSIG(st) == SIGTERM);
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->ended_by() == "signal 15");
    // The main thread and the three workers (0 to 3) are out of reach: 4 left out, and said.
    check_threads_left_out_said(*p, "the end record leaves out up to 4 thread(s)", err, "leaves out up to 4 thread(s)");
    // pmc summarize says it too, and exits 2 (a profile with problems).
    auto r = pmc_test::run_command(std::string(PMC_TOOL_PATH) + " summarize " + path + " 2>&1");
    CHECK(r.out.find("leaves out up to 4 thread(s)") != std::string::npos);
    CHECK(r.status == 2);
}

namespace {

/// Makes mmap(2) of exactly `bytes` fail with ENOMEM in this process from now on (seccomp, after no_new_privs).
/// False where seccomp filters are not available (then nothing changed).
bool fail_mmap_of(std::size_t bytes) {
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
    constexpr std::uint32_t arch = AUDIT_ARCH_X86_64;
#else
    constexpr std::uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
    sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])), // the length's low half (little-endian)
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(bytes), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
    return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0;
#else
    (void)bytes;
    return false;
#endif
}

} // namespace

TEST_CASE("profiler: more threads than the end record's room and no memory for a larger one: the threads left out "
          "are counted and said") {
    TempDir dir;
    const std::string path = dir.file("room.pmcprof"), err = dir.file("room.err");
    constexpr int workers = 70; // with the main thread 71: 7 more than the 64 reserved at the start
    std::fflush(nullptr);
    const pid_t kid = ::fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
        const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ::dup2(fd, 2) < 0) std::_Exit(3);
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096;
        auto* prof = new pmc::Profiler(o); // ended by exit()
        const auto a = prof->label("a");
        for (int k = 0; k < workers; ++k) std::thread([prof, a] { prof->integer(a, 1); }).join();
        // The end record for 71 threads: the page header, its fixed part, 12 bytes a thread.
        if (!fail_mmap_of(pf::page_header_bytes + 20 + 12 * (workers + 1))) std::_Exit(77);
        std::exit(0);
    }
    int st = 0;
    REQUIRE(::waitpid(kid, &st, 0) == kid);
    REQUIRE(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) PMC_SKIP("seccomp filters are not available here (prctl PR_SET_SECCOMP failed)");
    REQUIRE(WEXITSTATUS(st) == 0);
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->ended_by() == "exit()");
    CHECK(p->threads.size() == workers + 1); // every thread's pages are read
    check_threads_left_out_said(*p, "the end record leaves out up to 7 thread(s)", err,
                                "leaves out up to 7 thread(s) (no memory for a larger end record");
}
