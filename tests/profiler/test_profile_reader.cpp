// SPDX-License-Identifier: MIT
// The streaming profile reader and nesting walker (pmc/profile_reader.hpp): the same records, problems and
// messages as read_profile on whole, cut and corrupt files; each scope's path, parent, self and total against the
// values the synthetic profile was built with; the memory it holds on a large file.
#include <pmc/profile_format.hpp>
#include <pmc/profile_reader.hpp>
#include <pmc/profiler.hpp>

#include "catch.hpp"
#include "profile_builder.hpp"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace pf = pmc::profile_format;

struct ReaderDir {
    std::string path;
    ReaderDir() {
        char tmpl[] = "/tmp/pmc-reader-test-XXXXXX";
        const char* p = ::mkdtemp(tmpl);
        REQUIRE(p != nullptr);
        path = p;
    }
    ~ReaderDir() { std::system(("rm -rf '" + path + "'").c_str()); }
    std::string file(const std::string& name) const { return path + "/" + name; }
};

bool write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const bool ok = b.empty() || std::fwrite(b.data(), 1, b.size(), f) == b.size();
    return std::fclose(f) == 0 && ok;
}

/// A record as both readers see it: thread, kind, depth, label, arg, values.
using Flat = std::tuple<std::uint32_t, int, int, std::uint32_t, std::uint32_t, std::vector<std::uint64_t>>;

std::vector<Flat> flat(const pmc::Profile& p) {
    std::vector<Flat> out;
    for (const auto& t : p.threads)
        for (const auto& r : t.records)
            out.emplace_back(t.index, static_cast<int>(r.kind), r.depth, r.label, r.arg,
                             std::vector<std::uint64_t>(p.values.begin() + static_cast<std::ptrdiff_t>(r.first_value),
                                                        p.values.begin() + static_cast<std::ptrdiff_t>(
                                                                               r.first_value + p.values_per_record(r.kind))));
    return out;
}

std::vector<Flat> flat(pmc::ProfileReader& reader) {
    std::vector<Flat> out;
    const auto& p = reader.profile();
    std::uint32_t thread = UINT32_MAX;
    std::uint64_t next = 0;
    const auto failure = reader.for_each_event([&](const pmc::ProfileEvent& e) {
        if (e.thread != thread) thread = e.thread, next = 0;
        CHECK(e.ordinal == next++);
        out.emplace_back(e.thread, static_cast<int>(e.kind), e.depth, e.label, e.arg,
                         std::vector<std::uint64_t>(e.values, e.values + p.values_per_record(e.kind)));
    });
    CHECK(!failure);
    return out;
}

/// Both readers on the same bytes: the same failure, or the same header, threads, records, problems and bytes.
void same_as_read_profile(const std::string& path, const std::vector<unsigned char>& bytes) {
    REQUIRE(write_bytes(path, bytes));
    auto whole = pmc::read_profile(path);
    auto stream = pmc::ProfileReader::open(path);
    REQUIRE(whole.ok() == stream.ok());
    if (!whole) {
        CHECK(stream.failure().message == whole.failure().message);
        return;
    }
    const pmc::Profile& a = *whole;
    const pmc::Profile& b = stream->profile();
    CHECK(b.problems == a.problems);
    CHECK(b.bytes_read == a.bytes_read);
    CHECK(b.bytes_lost == a.bytes_lost);
    CHECK(b.strings == a.strings);
    CHECK(b.counters.size() == a.counters.size());
    REQUIRE(b.threads.size() == a.threads.size());
    for (std::size_t i = 0; i < a.threads.size(); ++i) {
        CHECK(b.threads[i].index == a.threads[i].index);
        CHECK(b.threads[i].name == a.threads[i].name);
        CHECK(b.threads[i].tid == a.threads[i].tid);
        CHECK(b.threads[i].pages == a.threads[i].pages);
        CHECK(b.threads[i].missing_pages == a.threads[i].missing_pages);
        CHECK(b.threads[i].error == a.threads[i].error);
        REQUIRE(b.threads[i].times.size() == a.threads[i].times.size());
        for (std::size_t k = 0; k < a.threads[i].times.size(); ++k) {
            CHECK(b.threads[i].times[k].enabled == a.threads[i].times[k].enabled);
            CHECK(b.threads[i].times[k].running == a.threads[i].times[k].running);
        }
        CHECK(stream->span(a.threads[i].index).records == a.threads[i].records.size());
    }
    CHECK(flat(*stream) == flat(a));
}

/// Two threads, nesting, recursion, instants and integer events, two counters, pages of 3 records.
void sample_profile(pmc_test::ProfileBuilder& b) {
    b.page_records = 3;
    auto& m = b.thread(0, "main", 77);
    m.scope("compile", 5, [&] {
        m.scope("parse", 10);
        m.advance(7, 1);
        m.scope("typeck", 20, [&] { m.scope("typeck", 3, [&] { m.scope("parse", 1); }); });
        m.instant("cache-hit", "key");
        m.integer("size", 1234);
    });
    m.scope("link", 4);
    auto& w = b.thread(1, "worker");
    w.scope("parse", 9, [&] { w.instant("cache-hit"); });
}

} // namespace

TEST_CASE("profile reader: the same header, threads, records and problems as read_profile, cut anywhere or "
          "with any byte flipped") {
    ReaderDir dir;
    pmc_test::ProfileBuilder b({pmc_test::exact_counter(), pmc_test::time_counter()});
    sample_profile(b);
    const auto bytes = b.bytes();
    const std::string path = dir.file("p.pmcprof");
    same_as_read_profile(path, bytes);
    {
        auto r = pmc::ProfileReader::open(path);
        REQUIRE(r.ok());
        CHECK(r->profile().problems.empty());
        CHECK(r->span(0).records == 8);
        CHECK(r->span(1).records == 2);
        CHECK(r->span(0).min_start == 1000);
        CHECK(r->span(0).max_end == 1000 + 5 + 10 + 20 + 3 + 1 + 4);
    }
    for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
        INFO("cut at " << cut << " of " << bytes.size());
        same_as_read_profile(path, std::vector<unsigned char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut)));
    }
    std::mt19937 rng(13);
    for (int i = 0; i < 600; ++i) {
        auto flipped = bytes;
        const std::size_t at = rng() % flipped.size();
        flipped[at] ^= static_cast<unsigned char>(1 + rng() % 255);
        INFO("byte " << at << " flipped");
        same_as_read_profile(path, flipped);
    }
}

TEST_CASE("profile reader: a profile the real profiler wrote (threads, their counters' times): the same as "
          "read_profile, whole and cut") {
    ReaderDir dir;
    const std::string path = dir.file("real.pmcprof");
    {
        pmc::Profiler prof{pmc::ProfilerOptions{path, {"page-faults", "wall-time"}}};
        const auto outer = prof.label("outer"), inner = prof.label("inner"), hit = prof.label("hit");
        auto work = [&] {
            for (int i = 0; i < 300; ++i) {
                auto s = prof.scope(outer);
                auto t = prof.scope(inner);
                if (i % 7 == 0) prof.instant(hit);
            }
        };
        std::thread other(work);
        work();
        other.join();
    }
    std::vector<unsigned char> bytes;
    {
        std::FILE* f = std::fopen(path.c_str(), "rb");
        REQUIRE(f != nullptr);
        unsigned char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
        std::fclose(f);
    }
    const std::string copy = dir.file("copy.pmcprof");
    same_as_read_profile(copy, bytes);
    auto whole = pmc::read_profile(path);
    REQUIRE(whole.ok());
    CHECK(whole->threads.size() == 2);
    CHECK(whole->threads[0].times.size() == 2); // the writer records each counter's time enabled and running
    for (std::size_t cut = 0; cut < bytes.size(); cut += 97)
        same_as_read_profile(copy, std::vector<unsigned char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut)));
}

TEST_CASE("profile reader: a longer copy of a thread's page replaces the first, as in read_profile") {
    // The exit-time flush writes a thread's page while it still runs; the thread then writes it again, longer.
    ReaderDir dir;
    auto build = [](std::size_t per_page) {
        pmc_test::ProfileBuilder b;
        b.page_records = per_page;
        auto& t = b.thread(0, "main");
        for (int i = 0; i < 5; ++i) t.scope("step", 1 + static_cast<std::uint64_t>(i));
        return b.bytes();
    };
    const auto short_pages = build(2), long_pages = build(3);
    // Both start with the same header, strings and thread pages; then page 0 (2 records, then 3 records).
    auto page_at = [](const std::vector<unsigned char>& b, int which) {
        std::uint32_t header;
        std::memcpy(&header, b.data() + 12, 4);
        std::size_t at = header;
        for (int i = 0; i < which; ++i) {
            std::uint32_t len;
            std::memcpy(&len, b.data() + at + 16, 4);
            at += 32 + len;
        }
        return at;
    };
    const std::size_t events = page_at(long_pages, 2); // after the strings and thread pages
    std::vector<unsigned char> file(long_pages.begin(), long_pages.begin() + static_cast<std::ptrdiff_t>(events));
    file.insert(file.end(), short_pages.begin() + static_cast<std::ptrdiff_t>(page_at(short_pages, 2)),
                short_pages.begin() + static_cast<std::ptrdiff_t>(page_at(short_pages, 3)));
    file.insert(file.end(), long_pages.begin() + static_cast<std::ptrdiff_t>(events), long_pages.end());
    const std::string path = dir.file("dup.pmcprof");
    same_as_read_profile(path, file);
    auto r = pmc::ProfileReader::open(path);
    REQUIRE(r.ok());
    CHECK(r->span(0).records == 5);
    CHECK(r->profile().problems.empty());
}

namespace {

/// One scope as the test built it: thread, label path, self, total, depth.
using Built = std::tuple<std::uint32_t, std::string, std::int64_t, std::uint64_t, int>;

/// Random nesting with known self values, recorded as the builder writes it.
struct RandomTree {
    pmc_test::ProfileBuilder& b;
    std::mt19937& rng;
    std::vector<Built> expected;
    std::uint64_t grow(std::uint32_t thread, std::string path, int depth) {
        static const char* names[] = {"parse", "typeck", "codegen", "opt"};
        auto& t = b.thread(thread);
        const std::string label = names[rng() % 4];
        const std::string full = path.empty() ? label : path + ";" + label;
        const std::uint64_t self = rng() % 50;
        std::uint64_t total = self;
        t.scope(label, self, [&] {
            if (rng() % 4 == 0) t.instant("hit");
            const int kids = depth < 6 ? static_cast<int>(rng() % 4) : 0;
            for (int k = 0; k < kids; ++k) total += grow(thread, full, depth + 1);
        });
        expected.emplace_back(thread, full, static_cast<std::int64_t>(self), total, depth);
        return total;
    }
};

std::string joined(const pmc::Profile& p, const std::vector<std::uint32_t>& path) {
    std::string s;
    for (auto id : path) s += (s.empty() ? "" : ";") + p.string(id);
    return s;
}

} // namespace

TEST_CASE("nesting walker: each scope's path, depth, self and total are the ones built, with parents and order") {
    std::mt19937 rng(7);
    pmc_test::ProfileBuilder b;
    b.page_records = 7;
    RandomTree tree{b, rng, {}};
    for (std::uint32_t thread = 0; thread < 3; ++thread)
        for (int i = 0; i < 4; ++i) tree.grow(thread, "", 0);
    ReaderDir dir;
    const std::string path = dir.file("tree.pmcprof");
    REQUIRE(b.write(path));
    auto reader = pmc::ProfileReader::open(path);
    REQUIRE(reader.ok());
    const pmc::Profile& p = reader->profile();
    std::vector<Built> seen;
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> children_of; // (thread, parent ordinal)
    std::vector<std::pair<std::uint32_t, std::uint64_t>> order;
    std::uint64_t marks = 0;
    const auto failure = reader->walk(
        [&](const pmc::NestedInterval& s) {
            CHECK(s.path_complete);
            CHECK(s.path().size() == s.depth + 1u);
            CHECK(s.path().back() == s.label);
            seen.emplace_back(s.thread, joined(p, s.path()), s.self(), s.total(), s.depth);
            // Every scope after all its children (so, by induction, after all its descendants).
            CHECK(children_of[{s.thread, s.ordinal}] == s.children);
            if (s.parent != pmc::no_parent) {
                CHECK(s.parent > s.ordinal); // written after it: postorder
                ++children_of[{s.thread, s.parent}];
            } else {
                CHECK(s.depth == 0);
            }
            order.emplace_back(s.thread, s.ordinal);
        },
        [&](const pmc::NestedMark& m) {
            ++marks;
            CHECK(p.string(m.label) == "hit");
            CHECK(m.path().size() == m.depth + 1u);
            CHECK(m.parent != pmc::no_parent);
        });
    REQUIRE(!failure);
    std::sort(seen.begin(), seen.end());
    std::sort(tree.expected.begin(), tree.expected.end());
    CHECK(seen == tree.expected);
    std::uint64_t hits = 0;
    for (const auto& t : p.threads) hits += reader->span(t.index).records;
    CHECK(marks == hits - tree.expected.size());
    // One thread after the other, by number.
    for (std::size_t i = 1; i < order.size(); ++i) CHECK(order[i].first >= order[i - 1].first);

    // Only one thread.
    std::uint64_t one = 0;
    REQUIRE(!reader->walk([&](const pmc::NestedInterval& s) { one += s.thread == 1; }, [](const pmc::NestedMark&) {},
                          1u));
    CHECK(one == static_cast<std::uint64_t>(std::count_if(tree.expected.begin(), tree.expected.end(),
                                                          [](const Built& e) { return std::get<0>(e) == 1; })));
}

TEST_CASE("nesting walker: a cut file's scopes that never ended leave their children on top, said incomplete") {
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0, "main");
    t.scope("main", 1, [&] {
        t.scope("a", 2, [&] { t.scope("b", 3); });
        t.scope("c", 4);
    });
    b.end_record = false; // killed
    auto bytes = b.bytes();
    // Cut the last record (main's, its last byte): a and c are left without their parent.
    bytes.resize(bytes.size() - 1);
    ReaderDir dir;
    const std::string path = dir.file("cut.pmcprof");
    REQUIRE(write_bytes(path, bytes));
    auto reader = pmc::ProfileReader::open(path);
    REQUIRE(reader.ok());
    CHECK(!reader->profile().problems.empty());
    std::map<std::string, std::tuple<bool, std::int64_t, std::size_t>> got;
    REQUIRE(!reader->walk([&](const pmc::NestedInterval& s) {
        got[joined(reader->profile(), s.path())] = {s.path_complete, s.self(), s.depth};
    }, [](const pmc::NestedMark&) {}));
    CHECK(got.size() == 3);
    CHECK(got["a"] == std::make_tuple(false, std::int64_t{2}, std::size_t{1}));
    CHECK(got["a;b"] == std::make_tuple(false, std::int64_t{3}, std::size_t{2}));
    CHECK(got["c"] == std::make_tuple(false, std::int64_t{4}, std::size_t{1}));
}

TEST_CASE("profile reader: memory held stays at a page's worth on a file many times larger") {
    // 4378 pages of 500 records (5 bytes each, format version 2): a 9 MB file. The reader holds its read-ahead window
    // and one page's records.
    pmc_test::ProfileBuilder b;
    b.page_records = 500;
    auto& t = b.thread(0, "main");
    for (int i = 0; i < 11000; ++i) t.scope("outer", 1, [&] {
            for (int j = 0; j < 99; ++j) t.scope("inner", 2, [&] { t.scope("leaf", 1); });
        });
    ReaderDir dir;
    const std::string path = dir.file("big.pmcprof");
    REQUIRE(b.write(path));
    auto reader = pmc::ProfileReader::open(path);
    REQUIRE(reader.ok());
    std::uint64_t scopes = 0;
    std::int64_t self = 0;
    REQUIRE(!reader->walk([&](const pmc::NestedInterval& s) {
        ++scopes;
        self += s.self();
    }, [](const pmc::NestedMark&) {}));
    CHECK(scopes == 11000u * (1 + 99 * 2));
    CHECK(self == 11000 * (1 + 99 * 3));
    const std::size_t file_bytes = static_cast<std::size_t>(reader->profile().bytes_read);
    INFO("file " << file_bytes << " bytes, held at most " << reader->peak_bytes_held());
    CHECK(file_bytes > 8u << 20);
    CHECK(reader->peak_bytes_held() < (1u << 20) + 500 * sizeof(pmc::ProfileEvent) + 4096);
}

TEST_CASE("profile reader: a file it cannot open or that is no profile: the reason") {
    auto missing = pmc::ProfileReader::open("/nonexistent/x.pmcprof");
    REQUIRE(!missing.ok());
    CHECK_THAT(missing.failure().message, ContainsSubstring("No such file"));
    auto dir = pmc::ProfileReader::open("/tmp");
    REQUIRE(!dir.ok());
    CHECK_THAT(dir.failure().message, ContainsSubstring("not a regular file"));
}
