// SPDX-License-Identifier: MIT
// The embedded profiler (pmc/profiler.hpp), its file (pmc/profile_format.hpp) and `pmc summarize`: round trips,
// damaged files, crashes, and exact per-thread counts with the page-faults software event (no PMU needed).
#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>

#include "catch.hpp"
#include "temp_dir.hpp"
#include "command.hpp"
#include "profile_builder.hpp"
#include "sanitizers.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

// Allocations per thread, counted by a replaced operator new (not under AddressSanitizer, which replaces it too).
#define PMC_TEST_COUNTS_ALLOCATIONS (!PMC_TEST_ASAN)
#if PMC_TEST_COUNTS_ALLOCATIONS
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete" // free() of what this operator new got from malloc()
#endif
namespace {
thread_local std::size_t allocations = 0;
}
void* operator new(std::size_t n) {
    ++allocations;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

namespace pf = pmc::profile_format;

/// A thread's page faults for touching `pages` fresh pages: exactly that, or under AddressSanitizer up to the faults
/// of their shadow memory (1/8) on top.
bool faults_match(std::uint64_t got, std::uint64_t pages) {
    // ThreadSanitizer's shadow (several bytes per byte, mapped as touched) faults in without bound: only a
    // floor is checked there; that build is for the races.
    if (PMC_TEST_TSAN) return got >= pages;
    const std::uint64_t slack = PMC_TEST_ASAN ? pages / 8 + 8 : 0;
    return got >= pages && got <= pages + slack;
}

/// A fresh temporary directory, removed with its files at the end.
using pmc_test::TempDir;

std::vector<unsigned char> slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Anonymous pages never touched: one minor fault each when written.
struct Fresh {
    char* p;
    std::size_t pages, size;
    explicit Fresh(std::size_t n) : pages(n), size(n * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
        p = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (p == MAP_FAILED) { // (made on worker threads too, where Catch's assertions are not thread-safe)
            std::perror("Fresh: mmap");
            std::abort();
        }
        ::madvise(p, size, MADV_NOHUGEPAGE);
    }
    ~Fresh() { ::munmap(p, size); }
    void touch() {
        const std::size_t step = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        for (std::size_t off = 0; off < size; off += step) static_cast<volatile char*>(p)[off] = 1;
    }
};

/// The sum of self values and the sum of outermost totals of one thread, for counter c (as summarize computes).
std::pair<std::uint64_t, std::uint64_t> self_and_run(const pmc::Profile& p, const pmc::ProfileThread& t, std::size_t c) {
    std::vector<std::uint64_t> child;
    std::uint64_t self = 0, run = 0;
    for (const auto& r : t.records) {
        if (r.kind != pf::RecordKind::interval) continue;
        if (child.size() < r.depth + 2u) child.resize(r.depth + 2u, 0);
        const std::uint64_t total = p.values[r.first_value + 2 * c + 1] - p.values[r.first_value + 2 * c];
        self += total - child[r.depth + 1u];
        child[r.depth + 1u] = 0;
        child[r.depth] += total;
        if (r.depth == 0) run += total;
    }
    return {self, run};
}

using pmc_test::tool;

} // namespace

TEST_CASE("profiler round trip: labels, arguments, nesting, threads, every counter, instants, integers") {
    TempDir dir;
    const std::string path = dir.file("round.pmcprof");
    constexpr std::size_t threads = 3;
    {
        pmc::Profiler prof{pmc::ProfilerOptions{path, {"page-faults", "wall-time", "minor-faults"}}};
        REQUIRE(prof.enabled());
        const auto parse = prof.label("parse"), check = prof.label("typeck"), leaf = prof.label("leaf");
        const auto hit = prof.label("cache-hit"), size = prof.label("artifact-size");
        auto work = [&](std::size_t i) {
            prof.thread_name("worker " + std::to_string(i));
            Fresh pages(3 * (i + 1));
            auto outer = prof.scope(parse, prof.label("file" + std::to_string(i) + ".rs"));
            {
                auto s = prof.scope(check);
                for (int k = 0; k < 2; ++k) {
                    auto l = prof.scope(leaf);
                    prof.instant(hit);
                }
                pages.touch(); // in typeck's self value
            }
            prof.integer(size, 1000 + i);
        };
        std::vector<std::thread> pool;
        for (std::size_t i = 0; i < threads; ++i) pool.emplace_back(work, i);
        for (auto& t : pool) t.join();
    }
    auto read = pmc::read_profile(path);
    REQUIRE(read.ok());
    const pmc::Profile& p = *read;
    CHECK(p.problems.empty());
    REQUIRE(p.counters.size() == 3);
    CHECK(p.counters[0].name == "page-faults");
    CHECK(p.counters[0].unit == "events");
    CHECK(p.counters[0].exact());
    CHECK(p.counters[1].unit == "ns");
    CHECK(!p.counters[1].exact());
    CHECK(p.pid == static_cast<std::uint64_t>(::getpid()));
    CHECK(!p.command_line.empty());
    CHECK(!p.kernel.empty());
    CHECK(!p.aslr.empty());
    CHECK(p.start_time_ns > 1600000000ull * 1000000000ull);
    // The constructing thread registered first (it recorded nothing) and each worker after it.
    REQUIRE(p.threads.size() == threads + 1);
    std::size_t named = 0;
    for (const auto& t : p.threads) {
        if (t.records.empty()) continue;
        ++named;
        CHECK(t.name.rfind("worker ", 0) == 0);
        const std::size_t i = std::stoul(t.name.substr(7));
        // In the order they ended: the instant inside leaf, leaf, again, typeck, the integer, parse.
        REQUIRE(t.records.size() == 7);
        const std::vector<std::string> labels{"cache-hit", "leaf", "cache-hit", "leaf", "typeck", "artifact-size", "parse"};
        const std::vector<std::uint32_t> depths{3, 2, 3, 2, 1, 1, 0};
        for (std::size_t k = 0; k < 7; ++k) {
            CHECK(p.string(t.records[k].label) == labels[k]);
            CHECK(t.records[k].depth == depths[k]);
        }
        CHECK(p.string(t.records[6].arg) == "file" + std::to_string(i) + ".rs");
        CHECK(t.records[1].arg == 0);
        CHECK(t.records[0].kind == pf::RecordKind::instant);
        CHECK(t.records[5].kind == pf::RecordKind::integer);
        CHECK(p.values[t.records[5].first_value + 1] == 1000 + i);
        // Each thread's own faults, exactly, in both fault counters; typeck's children faulted nothing.
        for (std::size_t c : {std::size_t{0}, std::size_t{2}}) {
            const auto& tr = t.records[4];
            CHECK(faults_match(p.values[tr.first_value + 2 * c + 1] - p.values[tr.first_value + 2 * c], 3 * (i + 1)));
            const auto [self, run] = self_and_run(p, t, c);
            CHECK(self == run);
        }
        const auto [self, run] = self_and_run(p, t, 1);
        CHECK(self == run);
        CHECK(run > 0);
    }
    CHECK(named == threads);
}

TEST_CASE("profiler: four threads count their own page faults, exactly") {
    TempDir dir;
    const std::string path = dir.file("faults.pmcprof");
    constexpr std::size_t threads = 4, rounds = 2000; // 5-byte records: several 4 KiB pages per thread
    {
        // Small pages: several page writes happen inside scopes, which must not count as the thread's faults.
        pmc::ProfilerOptions o{path, {"page-faults"}};
        o.page_bytes = 4096;
        pmc::Profiler prof{o};
        const auto touch = prof.label("touch");
        std::vector<std::thread> pool;
        for (std::size_t i = 0; i < threads; ++i)
            pool.emplace_back([&, i] {
                prof.thread_name("t" + std::to_string(i));
                for (std::size_t r = 0; r < rounds; ++r) {
                    Fresh pages(5 * (i + 1) + r % 3);
                    auto s = prof.scope(touch);
                    pages.touch();
                }
            });
        for (auto& t : pool) t.join();
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    std::size_t seen = 0;
    for (const auto& t : p->threads) {
        if (t.records.empty()) continue;
        ++seen;
        const std::size_t i = std::stoul(t.name.substr(1));
        REQUIRE(t.records.size() == rounds);
        CHECK(t.pages > 1); // pages were written while the threads ran
        for (std::size_t r = 0; r < rounds; ++r) {
            const auto& rec = t.records[r];
            CHECK(faults_match(p->values[rec.first_value + 1] - p->values[rec.first_value], 5 * (i + 1) + r % 3));
        }
    }
    CHECK(seen == threads);
}

TEST_CASE("profiler: a file cut at every length is read up to its last whole record, with a message", "[once]") {
    TempDir dir;
    const std::string path = dir.file("cut.pmcprof");
    {
        pmc::ProfilerOptions o{path, {"wall-time", "page-faults"}};
        o.page_bytes = 4096;
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const auto a = prof.label("a"), b = prof.label("b");
        for (int i = 0; i < 300; ++i) {
            auto s = prof.scope(a);
            auto t = prof.scope(b, a);
            if (i % 7 == 0) prof.instant(b);
        }
    }
    const auto bytes = slurp(path);
    auto whole = pmc::parse_profile(bytes.data(), bytes.size());
    REQUIRE(whole.ok());
    REQUIRE(whole->problems.empty());
    const std::size_t all = whole->threads.at(0).records.size();
    REQUIRE(all == 600 + 43);
    // Where pages end: a file cut there is whole pages, indistinguishable from a shorter complete file.
    std::vector<bool> boundary(bytes.size() + 1, false);
    std::uint32_t at = 0;
    std::memcpy(&at, bytes.data() + 12, 4); // the header's length
    while (at + 32 <= bytes.size()) {
        boundary[at] = true;
        std::uint32_t len = 0;
        std::memcpy(&len, bytes.data() + at + 16, 4);
        at += 32 + len;
    }
    REQUIRE(at == bytes.size());
    std::size_t header_failures = 0, last_records = 0;
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        auto p = pmc::parse_profile(bytes.data(), n);
        if (!p) {
            ++header_failures;
            CHECK_THAT(p.failure().message, ContainsSubstring("not a readable pmc profile"));
            continue;
        }
        // Something was lost, and it says so, even where the cut fell between pages (the end record is missing);
        // the records read are a prefix of the whole file's.
        INFO("cut at " << n << " of " << bytes.size());
        REQUIRE(!p->problems.empty());
        if (boundary[n]) {
            std::string all_problems;
            for (const auto& w : p->problems) all_problems += w + "\n";
            CHECK_THAT(all_problems, ContainsSubstring("no end record"));
        }
        const std::size_t got = p->threads.empty() ? 0 : p->threads[0].records.size();
        CHECK(got <= all);
        CHECK(got >= last_records); // a longer file never reads fewer records
        last_records = got;
        // The last whole record before the cut is there: at most one record's bytes are lost at the end.
        if (got > 0) {
            const auto& r = p->threads[0].records[got - 1];
            const auto& w = whole->threads[0].records[got - 1];
            CHECK(r.label == w.label);
            CHECK(p->values[r.first_value] == whole->values[w.first_value]);
        }
    }
    CHECK(header_failures > 0);
    CHECK(last_records >= all - 1);
}

TEST_CASE("profiler: random byte flips never crash the reader, and are reported", "[once]") {
    TempDir dir;
    const std::string path = dir.file("flip.pmcprof");
    {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.page_bytes = 4096;
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const auto a = prof.label("a");
        for (int i = 0; i < 2000; ++i) {
            auto s = prof.scope(a);
            prof.integer(a, static_cast<std::uint64_t>(i));
        }
    }
    const auto bytes = slurp(path);
    std::mt19937 rng(12345);
    std::size_t reported = 0, failed = 0;
    for (int trial = 0; trial < 400; ++trial) {
        auto copy = bytes;
        const int flips = 1 + trial % 8;
        for (int f = 0; f < flips; ++f) copy[rng() % copy.size()] ^= static_cast<unsigned char>(1 + rng() % 255);
        auto p = pmc::parse_profile(copy.data(), copy.size());
        if (!p) {
            ++failed; // the header was hit
            CHECK(!p.failure().message.empty());
            continue;
        }
        if (!p->problems.empty()) ++reported;
        for (const auto& t : p->threads)
            for (const auto& r : t.records) CHECK(r.first_value + p->values_per_record(r.kind) <= p->values.size());
    }
    CHECK(reported + failed == 400); // every byte is checked: by a checksum, or as a field that must hold one value
    // The tool on damaged files: a message and status 2 (or 1 for a broken header), never a crash.
    for (int trial = 0; trial < 20; ++trial) {
        auto copy = bytes;
        copy[bytes.size() / 2 + static_cast<std::size_t>(trial) * 37] ^= 0x5a;
        const std::string damaged = dir.file("damaged" + std::to_string(trial));
        std::ofstream(damaged, std::ios::binary).write(reinterpret_cast<const char*>(copy.data()),
                                                       static_cast<std::streamsize>(copy.size()));
        auto r = pmc_test::run_command(tool() + " summarize '" + damaged + "' 2>&1");
        CHECK(r.signal == 0);
        CHECK(r.status == 2);
        CHECK_THAT(r.out, ContainsSubstring("is incomplete"));
    }
    std::uint32_t header = 0;
    std::memcpy(&header, bytes.data() + 12, 4);
    auto cut = pmc_test::run_command("head -c " + std::to_string(header + 10) + " '" + path + "' > '" + dir.file("cut") + "'; " + tool() +
                                     " summarize '" + dir.file("cut") + "' 2>&1");
    CHECK(cut.status == 2);
    CHECK_THAT(cut.out, ContainsSubstring("the file ends inside"));
    auto empty = pmc_test::run_command(": > '" + dir.file("empty") + "'; " + tool() + " summarize '" +
                                       dir.file("empty") + "' 2>&1");
    CHECK(empty.status == 1);
    CHECK_THAT(empty.out, ContainsSubstring("less than the 24-byte fixed header"));
}

namespace {
/// Forks a child that records from two threads, numbering its integer events, until `stop` says how: the child is
/// SIGKILLed, calls exit(), or raises SIGSEGV. `progress[t]` is how many events thread t recorded.
struct CrashRun {
    std::string path;
    std::uint64_t* progress = nullptr;
    std::size_t page_records = 0;
};

pid_t start_recording_child(const std::string& path, std::uint64_t* progress, int how) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    ::signal(SIGSEGV, SIG_DFL); // (the test framework's handler, inherited, would report instead)
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.page_bytes = 4096;
    o.measure_cost = false;
    pmc::Profiler prof{o};
    const auto n = prof.label("n");
    auto record = [&](int t, std::uint64_t limit) {
        for (std::uint64_t i = 0; i < limit; ++i) {
            prof.integer(n, i);
            __atomic_store_n(&progress[t], i + 1, __ATOMIC_RELEASE);
        }
    };
    if (how == SIGKILL) {
        std::thread other([&] { record(1, UINT64_MAX); });
        record(0, UINT64_MAX); // until killed
    }
    // The other thread is still alive at the end: only exit()'s or the signal's flush can write its page.
    std::atomic<bool> other_done{false};
    std::thread other([&] {
        record(1, 1000);
        other_done = true;
        for (;;) ::pause();
    });
    other.detach();
    while (!other_done) std::this_thread::yield();
    record(0, 1000);
    if (how == SIGSEGV) ::raise(SIGSEGV);
    std::exit(0); // leaves main's profiler undestroyed
}
} // namespace

TEST_CASE("profiler: a child SIGKILLed mid-run leaves a readable profile missing at most a page per thread") {
    TempDir dir;
    const std::string path = dir.file("killed.pmcprof");
    auto* progress = static_cast<std::uint64_t*>(
        ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    REQUIRE(progress != MAP_FAILED);
    const pid_t child = start_recording_child(path, progress, SIGKILL);
    REQUIRE(child > 0);
    // Let both threads fill several pages.
    for (int i = 0; i < 20000 && (__atomic_load_n(&progress[0], __ATOMIC_ACQUIRE) < 5000 ||
                                  __atomic_load_n(&progress[1], __ATOMIC_ACQUIRE) < 5000);
         ++i)
        ::usleep(1000);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    const std::uint64_t done[2] = {progress[0], progress[1]};
    REQUIRE(done[0] >= 5000);
    REQUIRE(done[1] >= 5000);
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    const std::size_t per_page = (4096) / 4; // integer records in a 4 KiB page (4 bytes at least)
    std::size_t threads_seen = 0;
    for (const auto& t : p->threads) {
        if (t.records.empty()) continue;
        ++threads_seen;
        // The values are 0, 1, 2, ...: nothing missing in between.
        for (std::size_t i = 0; i < t.records.size(); ++i) REQUIRE(p->values[t.records[i].first_value + 1] == i);
        CHECK(t.missing_pages == 0);
    }
    CHECK(threads_seen == 2);
    // Each thread lost at most its page in memory (plus a record being written when the kill came).
    std::vector<std::size_t> counts;
    for (const auto& t : p->threads)
        if (!t.records.empty()) counts.push_back(t.records.size());
    std::sort(counts.begin(), counts.end());
    std::vector<std::uint64_t> recorded{done[0], done[1]};
    std::sort(recorded.begin(), recorded.end());
    // Match by which thread: compare each thread's count with both and require one within a page.
    for (auto c : counts) {
        bool within = false;
        for (auto d : recorded) within = within || (c <= d + 1 && d <= c + per_page + 1);
        CHECK(within);
    }
    ::munmap(progress, 4096);
}

TEST_CASE("profiler: exit() and a fatal signal write every thread's buffered events") {
    for (int how : {0, SIGSEGV}) {
        TempDir dir;
        const std::string path = dir.file("end.pmcprof");
        auto* progress = static_cast<std::uint64_t*>(
            ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
        REQUIRE(progress != MAP_FAILED);
        const pid_t child = start_recording_child(path, progress, how);
        int status = 0;
        ::waitpid(child, &status, 0);
        if (how == 0) CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
        else CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)); // the handler re-raised it
        auto p = pmc::read_profile(path);
        REQUIRE(p.ok());
        CHECK(p->problems.empty());
        std::size_t full = 0;
        for (const auto& t : p->threads)
            if (t.records.size() == 1000) ++full;
        INFO("how = " << how);
        CHECK(full == 2);
        ::munmap(progress, 4096);
    }
}

namespace {
/// Spins `ns` of this thread's CPU time (a thread's perf times advance only while it runs).
void spin_cpu(long ns) {
    timespec start{}, now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    do ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < ns);
}
} // namespace

TEST_CASE("profiler: exit() and a fatal signal write the calling thread's counter times as of the end") {
    for (int how : {0, SIGSEGV, SIGTERM}) {
        INFO("how = " << how);
        TempDir dir;
        const std::string path = dir.file("times-at-end.pmcprof");
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            ::signal(SIGSEGV, SIG_DFL);
            ::signal(SIGTERM, SIG_DFL);
            pmc::ProfilerOptions o{path, {"page-faults"}};
            o.page_bytes = 4096; // a full page (with the times as of then) goes out early
            o.measure_cost = false;
            pmc::Profiler prof{o};
            const auto n = prof.label("n");
            for (int i = 0; i < 1000; ++i) prof.integer(n, static_cast<std::uint64_t>(i));
            spin_cpu(60000000L); // after the last full page: only a thread page written at the end has these
            if (how != 0) ::raise(how);
            std::exit(0); // leaves the profiler undestroyed
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        if (how == 0) CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
        else CHECK((WIFSIGNALED(status) && WTERMSIG(status) == how));
        auto p = pmc::read_profile(path);
        REQUIRE(p.ok());
        CHECK(p->problems.empty());
        REQUIRE(p->threads.size() == 1);
        CHECK(p->threads[0].records.size() == 1000);
        REQUIRE(p->threads[0].times.size() == 1);
        // 50 of the 60 ms: the kernel's and the CPU clock's accounting of a thread's run time may differ slightly.
        CHECK(p->threads[0].times[0].enabled >= 50000000);
    }
}

namespace {
/// The bytes of disk blocks a file holds.
std::uint64_t allocated_bytes(const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return static_cast<std::uint64_t>(st.st_blocks) * 512;
}
std::uint64_t file_bytes(const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return static_cast<std::uint64_t>(st.st_size);
}
} // namespace

TEST_CASE("profiler: file blocks are reserved ahead while recording and given back at the end (destructor, exit(), "
          "fatal signal)") {
    TempDir dir;
    {
        // The profiler reserves blocks on a file system that can (fallocate) other than tmpfs (by choice).
        struct statfs fs {};
        REQUIRE(::statfs(dir.path.c_str(), &fs) == 0);
        const int probe = ::open(dir.file("probe").c_str(), O_WRONLY | O_CREAT, 0644);
        REQUIRE(probe >= 0);
        const bool can = ::fallocate(probe, FALLOC_FL_KEEP_SIZE, 0, 65536) == 0;
        const int err = errno;
        ::close(probe);
        if (fs.f_type == 0x01021994 /* TMPFS_MAGIC */)
            PMC_SKIP(dir.path + " is on tmpfs, where the profiler does not preallocate (it would only take memory)");
        if (!can)
            PMC_SKIP("the file system of " + dir.path + " cannot preallocate: fallocate(FALLOC_FL_KEEP_SIZE): " +
                     std::strerror(err));
    }
    const std::size_t chunk = 4u << 20;
    // 1: the destructor; 2: exit(); 3: SIGSEGV. In a child, which reports the blocks held while it records.
    for (int how : {1, 2, 3}) {
        INFO("how = " << how);
        const std::string path = dir.file("prealloc" + std::to_string(how) + ".pmcprof");
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            ::close(fds[0]);
            ::signal(SIGSEGV, SIG_DFL);
            {
                pmc::ProfilerOptions o{path, {"wall-time"}};
                o.measure_cost = false;
                o.preallocate_bytes = chunk;
                pmc::Profiler prof{o};
                const auto n = prof.label("n");
                for (std::uint64_t i = 0; i < 100000; ++i) prof.integer(n, i); // 2.4 MB: 36 pages of 64 KiB
                prof.flush();
                struct stat st {};
                ::stat(path.c_str(), &st);
                const std::uint64_t during[2] = {static_cast<std::uint64_t>(st.st_size),
                                                 static_cast<std::uint64_t>(st.st_blocks) * 512};
                if (::write(fds[1], during, sizeof during) != sizeof during) ::_exit(3);
                for (std::uint64_t i = 0; i < 1000; ++i) prof.integer(n, i); // buffered: written at the end
                if (how == 2) std::exit(0);
                if (how == 3) ::raise(SIGSEGV);
            }
            ::_exit(0);
        }
        ::close(fds[1]);
        std::uint64_t during[2] = {0, 0};
        const bool got = ::read(fds[0], during, sizeof during) == static_cast<ssize_t>(sizeof during);
        ::close(fds[0]);
        int status = 0;
        ::waitpid(child, &status, 0);
        REQUIRE(got);
        auto p = pmc::read_profile(path);
        REQUIRE(p.ok());
        CHECK(p->problems.empty());
        REQUIRE(p->threads.size() == 1);
        CHECK(p->threads[0].records.size() == 101000);
        // Half a chunk or more reserved past the end while recording; at most a block's rounding after it.
        CHECK(during[1] >= during[0] + chunk / 2);
        CHECK(allocated_bytes(path) <= file_bytes(path) + 65536);
    }
}

TEST_CASE("profiler: giving the blocks back at exit() never cuts a page another thread is appending", "[once]") {
    // Another thread appends a page every few microseconds while exit() truncates the file to its size: a truncation
    // between that page's append and its own look at the size would drop the page (a gap in the numbering).
    for (int trial = 0; trial < 20; ++trial) {
        INFO("trial " << trial);
        TempDir dir;
        const std::string path = dir.file("race.pmcprof");
        auto* progress = static_cast<std::uint64_t*>(
            ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
        REQUIRE(progress != MAP_FAILED);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            pmc::ProfilerOptions o{path, {"wall-time"}};
            o.page_bytes = 4096;
            o.measure_cost = false;
            o.preallocate_bytes = 1u << 20;
            pmc::Profiler prof{o};
            const auto n = prof.label("n");
            std::thread([&] {
                for (std::uint64_t i = 0;; ++i) {
                    prof.integer(n, i);
                    __atomic_store_n(&progress[0], i + 1, __ATOMIC_RELEASE);
                }
            }).detach();
            while (__atomic_load_n(&progress[0], __ATOMIC_ACQUIRE) < 20000) std::this_thread::yield();
            std::exit(0); // the other thread goes on appending through exit()'s flush and release
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
        ::munmap(progress, 4096);
        auto p = pmc::read_profile(path);
        REQUIRE(p.ok());
        for (const auto& t : p->threads) {
            CHECK(t.missing_pages == 0);
            // 0, 1, 2, ...: nothing dropped in between (the end may be cut where the process ended mid-append).
            bool consecutive = true;
            for (std::size_t i = 0; i < t.records.size(); ++i)
                consecutive = consecutive && p->values[t.records[i].first_value + 1] == i;
            CHECK(consecutive);
        }
    }
}

TEST_CASE("profiler: preallocate_bytes = 0 reserves nothing ahead") {
    TempDir dir;
    const std::string path = dir.file("plain.pmcprof");
    pmc::ProfilerOptions o{path, {"wall-time"}};
    o.measure_cost = false;
    o.preallocate_bytes = 0;
    pmc::Profiler prof{o};
    const auto n = prof.label("n");
    for (std::uint64_t i = 0; i < 100000; ++i) prof.integer(n, i);
    prof.flush();
    CHECK(allocated_bytes(path) <= file_bytes(path) + 65536);
}

TEST_CASE("profiler: pages that cannot be written are counted and said, with why (an errno or a short write)") {
    TempDir dir;
    const std::string path = dir.file("limited.pmcprof"), err = dir.file("stderr.txt");
    // A child whose files may not grow past 20,000 bytes: the write that crosses it stops short (no errno), the
    // next fail with EFBIG (SIGXFSZ ignored). Both must be counted and named: never "(Success)".
    const pid_t child = ::fork();
    if (child == 0) {
        const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ::dup2(fd, 2) < 0) ::_exit(10);
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{20000, 20000};
        if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(11);
        std::uint64_t errors = 0;
        {
            pmc::ProfilerOptions o{path, {"wall-time"}};
            o.page_bytes = 4096;
            o.measure_cost = false;
            o.preallocate_bytes = 0;
            pmc::Profiler prof{o};
            const auto n = prof.label("n");
            for (std::uint64_t i = 0; i < 20000; ++i) prof.integer(n, i);
            prof.flush();
            errors = prof.write_errors();
        }
        ::_exit(errors > 0 ? 0 : 12);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0); // 12: no write error counted
    std::ifstream in(err);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    INFO(text);
    CHECK(text.find("could not be written") != std::string::npos);
    CHECK(text.find("Success") == std::string::npos);
    const bool named = text.find("File too large") != std::string::npos || text.find("stopped short") != std::string::npos;
    CHECK(named);
}

TEST_CASE("profiler: off costs nothing and writes nothing, and from_env reads PMC_PROFILE and PMC_PROFILE_COUNTERS") {
    TempDir dir;
    ::unsetenv("PMC_PROFILE");
    {
        auto prof = pmc::Profiler::from_env();
        CHECK(!prof.enabled());
        auto s = prof.scope(prof.label("x"));
        prof.instant(prof.label("y"));
    }
    const std::string path = dir.file("env.pmcprof");
    ::setenv("PMC_PROFILE", path.c_str(), 1);
    ::setenv("PMC_PROFILE_COUNTERS", "page-faults,nosuchpmu/event=1/", 1);
    {
        auto prof = pmc::Profiler::from_env();
        REQUIRE(prof.enabled());
        CHECK(prof.counters() == std::vector<std::string>{"page-faults"});
    }
    ::setenv("PMC_PROFILE_COUNTERS", "nosuchpmu/event=1/", 1);
    {
        auto prof = pmc::Profiler::from_env();
        REQUIRE(prof.enabled());
        CHECK(prof.counters() == std::vector<std::string>{"wall-time"});
        auto s = prof.scope(prof.label("x"));
    }
    ::unsetenv("PMC_PROFILE");
    ::unsetenv("PMC_PROFILE_COUNTERS");
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    REQUIRE(p->counters.size() == 1);
    CHECK(p->counters[0].name == "wall-time");
    CHECK((p->counters[0].flags & pf::fallback) != 0); // never a silent change of unit
    REQUIRE(p->warnings.size() == 1);
    CHECK_THAT(p->warnings[0], ContainsSubstring("nosuchpmu/event=1/"));
    CHECK_THAT(p->warnings[0], ContainsSubstring("recording wall-time instead"));
    // The fallback primary and wall-time asked for riding along: recorded once, and the warnings say so and keep
    // the whole reason with its fix (the first line alone hid it). Stderr to a file: the prefix is said once.
    const std::string twice = dir.file("twice.pmcprof"), err = dir.file("stderr.txt");
    ::setenv("PMC_PROFILE", twice.c_str(), 1);
    ::setenv("PMC_PROFILE_COUNTERS", "nosuchpmu/event=1/,wall-time", 1);
    const int saved_stderr = ::dup(2);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(saved_stderr >= 0);
    REQUIRE(err_fd >= 0);
    ::dup2(err_fd, 2);
    {
        auto prof = pmc::Profiler::from_env();
        CHECK(prof.counters() == std::vector<std::string>{"wall-time"});
    }
    // An empty counter between commas is refused as pmc count -e refuses it, never skipped.
    ::setenv("PMC_PROFILE_COUNTERS", "page-faults,,wall-time", 1);
    CHECK(!pmc::Profiler::from_env().enabled());
    ::setenv("PMC_PROFILE", dir.file("no/such/dir.pmcprof").c_str(), 1);
    ::unsetenv("PMC_PROFILE_COUNTERS");
    CHECK(!pmc::Profiler::from_env().enabled());
    std::fflush(stderr);
    ::dup2(saved_stderr, 2);
    ::close(saved_stderr);
    ::close(err_fd);
    ::unsetenv("PMC_PROFILE");
    std::ifstream err_in(err);
    const std::string said((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
    CHECK_THAT(said, ContainsSubstring("pmc profiler: profiling is off: cannot create the profile"));
    CHECK_THAT(said, ContainsSubstring("pmc profiler: profiling is off: PMC_PROFILE_COUNTERS 'page-faults,,wall-time': "
                                       "event 2 of 3 is empty"));
    const std::string why = pmc::Counter::try_open("nosuchpmu/event=1/").failure().message;
    REQUIRE(why.find('\n') != std::string::npos); // a reason and a fix after the first line
    const std::string second_line = why.substr(why.find('\n') + 1, why.find('\n', why.find('\n') + 1) - why.find('\n') - 1);
    auto tp = pmc::read_profile(twice);
    REQUIRE(tp.ok());
    REQUIRE(tp->counters.size() == 1);
    REQUIRE(tp->warnings.size() == 2);
    CHECK_THAT(tp->warnings[0], ContainsSubstring(second_line));
    CHECK_THAT(tp->warnings[1], ContainsSubstring("'wall-time' was asked for twice (the primary fell back to it); it "
                                                  "is recorded once"));
    CHECK_THAT(said, ContainsSubstring(second_line));
    // Asked for explicitly, a counter that cannot be opened is an error at construction.
    try {
        pmc::Profiler prof{pmc::ProfilerOptions{dir.file("x.pmcprof"), {"nosuchpmu/event=1/"}}};
        FAIL("constructed a profiler with a counter that cannot be opened");
    } catch (const pmc::error& e) {
        CHECK_THAT(std::string(e.what()), ContainsSubstring("nosuchpmu"));
    }
}

TEST_CASE("profiler: once a thread is warm, recording allocates nothing, page writes included") {
#if !PMC_TEST_COUNTS_ALLOCATIONS
    PMC_SKIP("built with AddressSanitizer, which replaces operator new itself: allocations are not counted");
#else
    TempDir dir;
    pmc::ProfilerOptions o{dir.file("alloc.pmcprof"), {"wall-time", "page-faults"}};
    o.page_bytes = 4096; // many page writes in the loop
    o.measure_cost = false;
    pmc::Profiler prof{o};
    const auto a = prof.label("a"), b = prof.label("b");
    std::size_t during = 0;
    std::thread worker([&] {
        { auto warm = prof.scope(a); } // this thread's first event: its page and counters
        const std::size_t before = allocations;
        for (int i = 0; i < 5000; ++i) {
            auto s = prof.scope(a, b);
            auto t = prof.scope(b);
            prof.instant(a);
            prof.integer(b, static_cast<std::uint64_t>(i));
        }
        during = allocations - before;
    });
    worker.join();
    CHECK(during == 0);
#endif
}

TEST_CASE("profiler: pause(), depth() and end_to() on a thread that never recorded allocate nothing and register "
          "nothing (they are noexcept)") {
#if !PMC_TEST_COUNTS_ALLOCATIONS
    PMC_SKIP("built with AddressSanitizer, which replaces operator new itself: allocations are not counted");
#else
    TempDir dir;
    pmc::ProfilerOptions o{dir.file("unregistered.pmcprof"), {"wall-time"}};
    o.measure_cost = false;
    std::size_t during = 0;
    std::uint32_t depth = 1;
    {
        pmc::Profiler prof{o};
        std::thread worker([&] { // a thread that has never recorded (into any profiler)
            const std::size_t before = allocations;
            { const auto paused = prof.pause(); }
            depth = prof.depth();
            prof.end_to(0);
            during = allocations - before;
        });
        worker.join();
    }
    CHECK(during == 0);
    CHECK(depth == 0);
    auto p = pmc::read_profile(o.path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    CHECK(p->threads.size() == 1); // the constructor's thread only
#endif
}

TEST_CASE("profiler: the cost of one scope is measured and stored in the header") {
    TempDir dir;
    const std::string path = dir.file("cost.pmcprof");
    { pmc::Profiler prof{pmc::ProfilerOptions{path, {"wall-time", "page-faults"}}}; }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->counters[0].cost_to_parent > 0);      // time: the recording takes some
    CHECK(p->counters[0].cost_in_scope > 0);
    CHECK(p->counters[1].cost_to_parent == 0);     // recording a scope faults no page (its page is pre-touched)
    CHECK(p->counters[1].cost_in_scope == 0);
}

TEST_CASE("pmc summarize: the profile's labels, self values and events, as text and JSON") {
    if (PMC_TEST_ASAN || PMC_TEST_TSAN)
        PMC_SKIP("built with a sanitizer whose shadow memory adds page faults (ThreadSanitizer: one more in the outer "
                 "scope in about 1 run of 15): the exact counts this test reads back cannot be known");
    TempDir dir;
    const std::string path = dir.file("sum.pmcprof");
    {
        pmc::Profiler prof{pmc::ProfilerOptions{path, {"page-faults", "wall-time"}}};
        const auto outer = prof.label("outer"), inner = prof.label("inner"), hit = prof.label("hit");
        Fresh a(7), b(3);
        auto s = prof.scope(outer);
        a.touch();
        for (int i = 0; i < 3; ++i) {
            auto t = prof.scope(inner);
            if (i == 0) b.touch();
            prof.instant(hit);
        }
        prof.integer(prof.label("size"), 40);
        prof.integer(prof.label("size"), 2);
    }
    auto r = pmc_test::run_command(tool() + " summarize --json '" + path + "'");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring(R"("label":"outer","count":1,"self":7,)"));
    CHECK_THAT(r.out, ContainsSubstring(R"("label":"inner","count":3,"self":3,"self_percent":30,"total":3,"recursive_calls":0,"min":0,"median":0,"max":3})"));
    CHECK_THAT(r.out, ContainsSubstring(R"("run":10,)"));
    CHECK_THAT(r.out, ContainsSubstring(R"({"label":"hit","count":3})"));
    CHECK_THAT(r.out, ContainsSubstring(R"({"label":"size","count":2,"sum":42,"min":2,"max":40})"));
    CHECK_THAT(r.out, ContainsSubstring(R"("unit":"events")"));
    auto text = pmc_test::run_command(tool() + " summarize '" + path + "'");
    REQUIRE(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("primary counter page-faults: a count (exact)"));
    CHECK_THAT(text.out, ContainsSubstring("run (outermost scopes): 10 page-faults"));
    auto wall = pmc_test::run_command(tool() + " summarize --counter wall-time '" + path + "'");
    REQUIRE(wall.status == 0);
    CHECK_THAT(wall.out, ContainsSubstring("showing: wall-time (ns)"));
    auto bad = pmc_test::run_command(tool() + " summarize --counter cycles '" + path + "' 2>&1");
    CHECK(bad.status == 1);
    CHECK_THAT(bad.out, ContainsSubstring("recorded no counter 'cycles'; it has: page-faults, wall-time"));
    auto help = pmc_test::run_command(tool() + " summarize --help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, ContainsSubstring("usage: pmc summarize"));
    auto missing = pmc_test::run_command(tool() + " summarize '" + dir.file("nope") + "' 2>&1");
    CHECK(missing.status == 1);
    CHECK_THAT(missing.out, ContainsSubstring("cannot open profile"));
}

TEST_CASE("pmc summarize: --without-overhead, --per-thread, --thread and --top") {
    TempDir dir;
    const std::string path = dir.file("options.pmcprof");
    {
        pmc::Profiler prof{pmc::ProfilerOptions{path, {"wall-time"}}};
        const auto outer = prof.label("outer"), inner = prof.label("inner");
        {
            auto s = prof.scope(outer);
            for (int i = 0; i < 3; ++i) auto t = prof.scope(inner);
        }
        std::thread([&] { prof.thread_name("second"); auto s = prof.scope(inner); }).join();
    }
    auto number = [](const std::string& text, const std::string& key) {
        const auto at = text.find(key);
        REQUIRE(at != std::string::npos);
        return std::stod(text.substr(at + key.size()));
    };
    auto plain = pmc_test::run_command(tool() + " summarize --json --thread 0 '" + path + "'");
    auto bare = pmc_test::run_command(tool() + " summarize --json --thread 0 --without-overhead '" + path + "'");
    REQUIRE(plain.status == 0);
    REQUIRE(bare.status == 0);
    const double cost = number(plain.out, R"("cost_to_parent":)");
    CHECK(cost > 0);
    const double overhead = std::max(0.0, cost - number(plain.out, R"("cost_in_scope":)"));
    const double self = number(plain.out, R"("label":"outer","count":1,"self":)");
    const double self_bare = number(bare.out, R"("label":"outer","count":1,"self":)");
    // Three children, each adding its cost less its own share; never below 0 (a time: no timing assumption).
    CHECK(self - self_bare == std::min(self, static_cast<double>(std::llround(3 * overhead))));
    CHECK_THAT(bare.out, ContainsSubstring(R"("without_overhead":true)"));
    auto per = pmc_test::run_command(tool() + " summarize --per-thread '" + path + "'");
    CHECK(per.status == 0);
    CHECK_THAT(per.out, ContainsSubstring("== thread 0"));
    CHECK_THAT(per.out, ContainsSubstring("== thread 1 \"second\""));
    auto one = pmc_test::run_command(tool() + " summarize --thread 1 '" + path + "'");
    CHECK_THAT(one.out, ContainsSubstring("thread 1 only"));
    CHECK(one.out.find("outer ") == std::string::npos);
    auto top = pmc_test::run_command(tool() + " summarize --top 1 --thread 0 '" + path + "'");
    // One label row, whichever had the most self time (no timing assumption).
    CHECK((top.out.find("\nouter ") == std::string::npos) != (top.out.find("\ninner ") == std::string::npos));
    auto none = pmc_test::run_command(tool() + " summarize --thread 7 '" + path + "' 2>&1");
    CHECK(none.status == 1);
    CHECK_THAT(none.out, ContainsSubstring("has no thread 7"));
    auto both = pmc_test::run_command(tool() + " summarize --thread 0 --per-thread '" + path + "' 2>&1");
    CHECK(both.status == 1);
}

TEST_CASE("pmc summarize --without-overhead: subtracts a child's cost less its own share, never below 0") {
    // Costs as a page-faults primary gives its wall-time ride-along: a child adds 100 to its parent, 40 of them
    // inside its own interval (its total has them already), so 60 per child come off the parent's self value.
    auto time = pmc_test::time_counter();
    time.cost_to_parent = 100;
    time.cost_in_scope = 40;
    pmc_test::ProfileBuilder b({time});
    auto& t = b.thread(0, "main");
    t.scope("big", 500, [&] { for (int i = 0; i < 4; ++i) t.scope("child", 10); });   // 500 - 4 x 60 = 260
    t.scope("small", 100, [&] { for (int i = 0; i < 2; ++i) t.scope("child", 10); }); // 100 - 2 x 60 < 0: 0
    TempDir dir;
    const std::string path = dir.file("costs.pmcprof");
    REQUIRE(b.write(path));
    auto json = pmc_test::run_command(tool() + " summarize --json --without-overhead '" + path + "'");
    REQUIRE(json.status == 0);
    CHECK_THAT(json.out, ContainsSubstring(R"("label":"big","count":1,"self":260,)"));
    CHECK_THAT(json.out, ContainsSubstring(R"("label":"small","count":1,"self":0,)"));
    CHECK_THAT(json.out, ContainsSubstring(R"("clamped_to_zero":1)"));
    // The run loses what the self values lost (240 from big, 100 from small), so self % still adds up to 100:
    // 260 + 0 + 6 x 10 = 320 of a run of 660 - 340.
    CHECK_THAT(json.out, ContainsSubstring(R"("run":320,"run_less_recording_cost":340,)"));
    auto text = pmc_test::run_command(tool() + " summarize --without-overhead '" + path + "'");
    REQUIRE(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("60 ns per child scope subtracted"));
    CHECK_THAT(text.out, ContainsSubstring("approximate, this counter is noisy"));
    CHECK_THAT(text.out, ContainsSubstring("1 scope(s) had less self value than their child scopes' recording cost: "
                                           "shown as 0"));
}

TEST_CASE("pmc summarize and export name scopes left open by a killed program as that, not as lost bytes") {
    // A program killed inside "outer": its child scope ended and was written, "outer" never ended.
    pmc_test::ProfileBuilder b({pmc_test::time_counter()});
    auto& t = b.thread(0, "main");
    t.scope("done", 5);
    t.raw_interval("leaf", 2, {t.reading() + 1, t.reading() + 4}); // inside inner: it lost nothing more than inner
    t.raw_interval("inner", 1, {t.reading(), t.reading() + 10}); // depth 1: its parent "outer" is not in the file
    TempDir dir;
    const std::string path = dir.file("killed.pmcprof");
    REQUIRE(b.write(path));
    auto text = pmc_test::run_command(tool() + " summarize '" + path + "' 2>&1");
    CHECK(text.status == 2); // not whole
    CHECK_THAT(text.out, ContainsSubstring("2 scope(s) have not all their enclosing scopes in the file"));
    CHECK_THAT(text.out, ContainsSubstring("the self % still add up to the run"));
    CHECK_THAT(text.out, ContainsSubstring("had not ended when the recording stopped"));
    CHECK_THAT(text.out, ContainsSubstring("thread 0: 1 scope had not ended when its last page was written"));
    CHECK_THAT(text.out, ContainsSubstring("is not whole"));
    // The orphan counts as outermost: the run is 15, not 5 (the old "self % 200").
    CHECK_THAT(text.out, ContainsSubstring("run (outermost scopes): 15 ns"));
    auto json = pmc_test::run_command(tool() + " summarize --json '" + path + "'");
    CHECK(json.status == 2);
    CHECK_THAT(json.out, ContainsSubstring(R"("scopes_without_enclosing":2)"));
    // leaf is inside the open scope's child: no scope was lost between it and inner (no lost page).
    CHECK_THAT(json.out, ContainsSubstring(R"("open_scopes":[{"thread":0,"open_depth":1,"scopes_counted_outermost":1,"scopes_with_lost_middle":0,)"));
    auto exported =
        pmc_test::run_command(tool() + " export --folded '" + path + "' -o '" + dir.file("k.folded") + "' 2>&1");
    CHECK(exported.status == 2);
    CHECK_THAT(exported.out, ContainsSubstring("pmc export: thread 0: 1 scope had not ended when its last page was written"));
    CHECK_THAT(exported.out, ContainsSubstring("had not ended when the recording stopped"));
    CHECK_THAT(exported.out, !ContainsSubstring("cut or damaged"));
}

TEST_CASE("a program killed with SIGKILL inside a scope: every tool's shares sum to 100 %, what was open is said, "
          "status 2") {
    TempDir dir;
    const std::string path = dir.file("sigkill.pmcprof");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.page_bytes = 4096; // several pages reach the file before the kill
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const auto outer = prof.label("outer"), work = prof.label("work"), step = prof.label("step");
        auto s = prof.scope(outer);
        for (int i = 0; i < 3000; ++i) {
            auto w = prof.scope(work);
            auto t = prof.scope(step);
        }
        ::raise(SIGKILL); // inside "outer": it never ends, its page with the last scopes is never written
        ::_exit(0);
    }
    int wstatus = 0;
    REQUIRE(::waitpid(child, &wstatus, 0) == child);
    REQUIRE(WIFSIGNALED(wstatus));
    REQUIRE(WTERMSIG(wstatus) == SIGKILL);
    auto json = pmc_test::run_command(tool() + " summarize --json '" + path + "'");
    INFO(json.out);
    CHECK(json.status == 2);
    // Every label's self %, summed: 100 (the old tool: a run of 0, every share 0.00).
    double sum = 0;
    std::size_t labels = 0;
    for (std::size_t at = json.out.find("\"self_percent\":"); at != std::string::npos;
         at = json.out.find("\"self_percent\":", at + 1), ++labels)
        sum += std::stod(json.out.substr(at + 15));
    CHECK(labels == 2); // work and step; outer was never written
    CHECK(sum == Approx(100.0).margin(0.01));
    // Open when its last page was written: outer, and work too when that page ended inside one (1 or 2).
    CHECK_THAT(json.out, ContainsSubstring(R"("open_scopes":[{"thread":0,"open_depth":)"));
    // A kill loses the open scopes, never one between two written ones.
    for (std::size_t at = json.out.find("\"scopes_with_lost_middle\":"); at != std::string::npos;
         at = json.out.find("\"scopes_with_lost_middle\":", at + 1))
        CHECK(json.out.substr(at + 26, 2) == "0,");
    auto text = pmc_test::run_command(tool() + " summarize '" + path + "' 2>&1");
    CHECK(text.status == 2);
    CHECK_THAT(text.out, ContainsSubstring("had not ended when its last page was written"));
    // The verdicts of every tool on it: never 0 as if whole.
    CHECK(pmc_test::run_command(tool() + " critical --expect-path 'work > step' '" + path + "' >/dev/null 2>&1").status == 2);
    CHECK(pmc_test::run_command(tool() + " diff --fail-on-change '" + path + "' '" + path + "' >/dev/null 2>&1").status == 2);
    CHECK(pmc_test::run_command(tool() + " aggregate '" + path + "' '" + path + "' >/dev/null 2>&1").status == 2);
    CHECK(pmc_test::run_command(tool() + " export --folded '" + path + "' -o '" + dir.file("k.folded") + "' 2>/dev/null").status == 2);
}

TEST_CASE("profiler: a fork() child writes nothing into its parent's profile") {
    TempDir dir;
    const std::string path = dir.file("fork.pmcprof");
    {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.page_bytes = 4096;
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const auto n = prof.label("n");
        for (std::uint64_t i = 0; i < 100; ++i) prof.integer(n, i); // buffered, not yet written
        const pid_t child = ::fork();
        if (child == 0) {
            for (std::uint64_t i = 0; i < 1000; ++i) prof.integer(n, 1000000 + i); // fills pages in the child
            std::exit(0); // exit()'s flush, too
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
        for (std::uint64_t i = 100; i < 200; ++i) prof.integer(n, i);
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    std::size_t records = 0;
    for (const auto& t : p->threads)
        for (std::size_t i = 0; i < t.records.size(); ++i) {
            CHECK(p->values[t.records[i].first_value + 1] == i); // the parent's 0..199, nothing of the child's
            ++records;
        }
    CHECK(records == 200);
}

namespace {

/// Rewrites the times of counter `c` in every thread page of profiler thread `thread` (as if the kernel had
/// multiplexed it), with the page's checksum redone.
void fake_multiplexing(std::vector<unsigned char>& bytes, std::uint32_t thread, std::size_t c, std::uint64_t enabled,
                       std::uint64_t running, std::uint32_t ncounters_hint) {
    std::uint32_t at = 0;
    std::memcpy(&at, &bytes[12], 4); // the header's length
    int patched = 0;
    while (at + pf::page_header_bytes <= bytes.size()) {
        const auto h = pmc::detail::read_page_header(&bytes[at], bytes.size() - at);
        REQUIRE(h.checked);
        unsigned char* payload = &bytes[at + pf::page_header_bytes];
        if (h.kind == static_cast<std::uint16_t>(pf::PageKind::thread) && h.thread == thread) {
            // tid, flags, name, error, then u32 N and a reserved word before the N counters' {enabled, running}.
            std::size_t off = 12;
            std::uint32_t len = 0;
            std::memcpy(&len, payload + off, 4);
            off += 4 + len;
            std::memcpy(&len, payload + off, 4);
            off += 4 + len;
            std::uint32_t ncounters = 0;
            std::memcpy(&ncounters, payload + off, 4);
            REQUIRE(ncounters == ncounters_hint);
            const std::size_t times_at = off + 8 + 16 * c;
            std::memcpy(payload + times_at, &enabled, 8);
            std::memcpy(payload + times_at + 8, &running, 8);
            pf::write_page_header(&bytes[at], pf::PageKind::thread, h.thread, h.seq, payload, h.len, h.records);
            ++patched;
        }
        at += static_cast<std::uint32_t>(pf::page_header_bytes) + h.len;
    }
    REQUIRE(patched > 0);
}

} // namespace

TEST_CASE("profiler: each thread's counters' time enabled and running are in the file, and summarize names the "
          "multiplexed ones") {
    TempDir dir;
    const std::string path = dir.file("times.pmcprof");
    {
        pmc::ProfilerOptions o{path, {"page-faults", "wall-time"}};
        o.page_bytes = 4096; // several pages, each with the thread's times
        pmc::Profiler prof{o};
        const auto spin = prof.label("spin"), tick = prof.label("tick");
        std::thread([&] {
            prof.thread_name("sleeper");
            for (int i = 0; i < 1000; ++i) prof.instant(tick);
            auto s = prof.scope(spin);
            // 30 ms on the CPU: a thread's perf times advance only while it runs (sleeping would not do).
            timespec start{}, now{};
            ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
            do ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
            while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 30000000L);
        }).join();
    }
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    REQUIRE(p->threads.size() == 2);
    const pmc::ProfileThread& t = p->threads[1];
    REQUIRE(t.times.size() == 2);
    // page-faults, a software event, counts whenever its thread runs; the times were read at the thread's end,
    // after its 30 ms scope (not only with its first pages). 25 ms: the kernel's and the CPU clock's accounting of
    // the thread's run time may differ slightly.
    CHECK(t.times[0].known());
    CHECK(t.times[0].enabled >= 25000000);
    CHECK(t.times[0].running == t.times[0].enabled);
    CHECK(!t.times[0].multiplexed());
    CHECK(!t.times[1].known()); // wall-time is a clock: no times
    CHECK(p->threads[0].times.size() == 2);
    CHECK(p->threads[0].times[0].known()); // the creating thread's, written when the profiler closed

    auto plain = pmc_test::run_command(tool() + " summarize '" + path + "'");
    CHECK(plain.status == 0);
    CHECK_THAT(plain.out, ContainsSubstring("multiplexing: none"));

    auto bytes = slurp(path);
    fake_multiplexing(bytes, 1, 0, 40000000, 10000000, 2);
    const std::string muxed = dir.file("muxed.pmcprof");
    std::ofstream(muxed, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
    auto q = pmc::read_profile(muxed);
    REQUIRE(q.ok());
    CHECK(q->problems.empty());
    REQUIRE(q->threads[1].times.size() == 2);
    CHECK(q->threads[1].times[0].multiplexed());
    CHECK(std::fabs(q->threads[1].times[0].running_fraction() - 0.25) < 1e-6);
    auto text = pmc_test::run_command(tool() + " summarize '" + muxed + "'");
    CHECK(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("thread 1 \"sleeper\""));
    CHECK_THAT(text.out, ContainsSubstring("page-faults was multiplexed: it counted 25.0% of the 40.00 ms it was enabled"));
    auto json = pmc_test::run_command(tool() + " summarize --json '" + muxed + "'");
    CHECK(json.status == 0);
    CHECK_THAT(json.out, ContainsSubstring(R"("running_fraction":0.25,"multiplexed":true})"));
    CHECK_THAT(json.out, ContainsSubstring(R"("counter_times":[{"counter":"page-faults","enabled_ns":40000000,"running_ns":10000000,)"));
}

TEST_CASE("profiler: a counter that fails to open only on a later thread: its error is recorded, its values are 0, "
          "a warning is printed, the other threads are unaffected") {
    if (PMC_TEST_ASAN) // the sanitizers' runtime needs a descriptor (a pipe) to check memory: the limit breaks it
        PMC_SKIP("built with the sanitizers, whose runtime fails (a false 'invalid vptr' report) when no file "
                 "descriptor is left, which is how this test makes a later thread's counter fail");
    TempDir dir;
    const std::string path = dir.file("later.pmcprof");
    const std::string err_path = dir.file("stderr.txt");
    std::fflush(stderr);
    const int saved_stderr = ::dup(2);
    const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved_stderr >= 0);
    REQUIRE(err_fd >= 0);
    ::dup2(err_fd, 2);
    ::close(err_fd);
    bool limited = false;
    {
        pmc::Profiler prof{pmc::ProfilerOptions{path, {"page-faults"}}};
        const auto touch = prof.label("touch");
        auto work = [&](const char* name) {
            if (name) prof.thread_name(name);
            Fresh pages(5);
            auto s = prof.scope(touch);
            pages.touch();
        };
        std::thread(work, "before").join();
        // No file descriptor left: the next thread's perf_event_open fails (EMFILE), as a counter might on any
        // later thread (a PMU full by then, a limit reached).
        rlimit old{};
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
        const int lowest = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        REQUIRE(lowest >= 0);
        ::close(lowest);
        rlimit tight = old;
        tight.rlim_cur = static_cast<rlim_t>(lowest);
        limited = ::setrlimit(RLIMIT_NOFILE, &tight) == 0;
        std::thread(work, nullptr).join();
        ::setrlimit(RLIMIT_NOFILE, &old);
        std::thread(work, "after").join();
        work(nullptr); // the creating thread, too
    }
    std::fflush(stderr);
    ::dup2(saved_stderr, 2);
    ::close(saved_stderr);
    REQUIRE(limited);
    const auto err_bytes = slurp(err_path);
    const std::string err(err_bytes.begin(), err_bytes.end());
    INFO(err);
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    REQUIRE(p->threads.size() == 4); // the creating thread, before, the failed one, after
    for (const auto& t : p->threads) {
        INFO("thread " << t.index << " " << t.name << ": " << t.error);
        REQUIRE(t.records.size() == 1);
        const auto& r = t.records[0];
        const std::uint64_t start = p->values[r.first_value], end = p->values[r.first_value + 1];
        if (t.index == 2) {
            CHECK_THAT(t.error, ContainsSubstring("page-faults"));
            CHECK_THAT(t.error, ContainsSubstring("EMFILE"));
            CHECK(start == 0);
            CHECK(end == 0);
        } else {
            CHECK(t.error.empty());
            CHECK(faults_match(end - start, 5));
        }
    }
    CHECK_THAT(err, ContainsSubstring("pmc profiler: thread 2 (tid "));
    CHECK_THAT(err, ContainsSubstring("its counters could not be opened"));
    auto text = pmc_test::run_command(tool() + " summarize '" + path + "'");
    CHECK(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("warning: thread 2"));
    CHECK_THAT(text.out, ContainsSubstring("its values are 0"));
}

TEST_CASE("profiler: a warm thread records scopes, instants, integers and page writes while its lock is held "
          "elsewhere (the recording path takes no lock)") {
    TempDir dir;
    const std::string path = dir.file("nolock.pmcprof");
    constexpr int warm = 300, measured = 3000;
    std::atomic<int> phase{0};
    bool finished_under_lock = false;
    {
        pmc::ProfilerOptions o{path, {"wall-time"}};
        o.page_bytes = 4096; // pages are written while the lock is held
        pmc::Profiler prof{o};
        const auto a = prof.label("a"), b = prof.label("b"), c = prof.label("c");
        auto record = [&](int n) {
            for (int i = 0; i < n; ++i) {
                auto s = prof.scope(a);
                prof.instant(b);
                prof.integer(c, static_cast<std::uint64_t>(i));
            }
        };
        std::thread worker([&] {
            record(warm); // registers the thread (which takes the lock) and writes pages
            phase = 1;
            while (phase.load() != 2) std::this_thread::yield();
            record(measured);
            prof.flush();
            phase = 3;
        });
        while (phase.load() != 1) std::this_thread::yield();
        {
            std::lock_guard<std::mutex> lock(pmc::detail::ProfilerTestAccess::mutex(prof));
            phase = 2;
            // A deadline, not a timing: 3000 rounds take milliseconds; blocked, they never finish.
            for (int i = 0; i < 20000 && phase.load() != 3; ++i) ::usleep(1000);
            finished_under_lock = phase.load() == 3;
        }
        worker.join();
    }
    INFO("the worker did not finish recording in 20 s while the test held the profiler's lock: the recording path "
         "takes it");
    CHECK(finished_under_lock);
    auto p = pmc::read_profile(path);
    REQUIRE(p.ok());
    CHECK(p->problems.empty());
    std::size_t records = 0;
    for (const auto& t : p->threads) records += t.records.size();
    CHECK(records == 3u * (warm + measured));
}

TEST_CASE("profiler: LabelCache gives Profiler::label()'s labels, and a name seen before takes no lock") {
    TempDir dir;
    const std::string path = dir.file("labelcache.pmcprof");
    pmc::ProfilerOptions o{path, {"wall-time"}};
    pmc::Profiler prof{o};
    pmc::LabelCache cache{prof};
    std::string name = "fn_";
    const pmc::Label first = cache(name + "a"), again = cache("fn_a"), other = cache("fn_b");
    CHECK(first.id == prof.label("fn_a").id);
    CHECK(again.id == first.id);
    CHECK(other.id != first.id);
    CHECK(cache.size() == 2);
    // A name seen before, while another thread holds the profiler's lock: answered without it.
    std::atomic<int> phase{0};
    pmc::Label seen{};
    std::thread worker([&] {
        while (phase.load() != 1) std::this_thread::yield();
        seen = cache("fn_b");
        phase = 2;
    });
    bool answered_under_lock = false;
    {
        std::lock_guard<std::mutex> lock(pmc::detail::ProfilerTestAccess::mutex(prof));
        phase = 1;
        for (int i = 0; i < 20000 && phase.load() != 2; ++i) ::usleep(1000); // a deadline, not a timing
        answered_under_lock = phase.load() == 2;
    }
    worker.join();
    CHECK(answered_under_lock);
    CHECK(seen.id == other.id);
    // Off: Label{} for everything, and nothing kept.
    pmc::Profiler off;
    pmc::LabelCache off_cache{off};
    CHECK(off_cache("x").id == 0);
}
