// SPDX-License-Identifier: MIT
// Tests that fail for the mutations that survived the suite before issue 19 (each names the mutation it kills):
// summarize's median returning the minimum, diff's exact verdict ignoring call counts or not requiring each side's
// runs to agree on them, a reader's bounds check weakened, the folded export keeping negative self values.
#include <pmc/detail/json.hpp>
#include <pmc/profile_format.hpp>

#include "catch.hpp"
#include "temp_dir.hpp"
#include "command.hpp"
#include "profile_builder.hpp"

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace pf = pmc::profile_format;

using pmc_test::TempDir;

using pmc_test::tool;

pmc::detail::JsonValue json(const pmc_test::CommandResult& r, const char* what) {
    INFO(r.out);
    auto v = pmc::detail::JsonReader::parse(r.out, what);
    REQUIRE(v.ok());
    return *v;
}

const pmc::detail::JsonValue& by_label(const pmc::detail::JsonValue& labels, const std::string& name) {
    for (const auto& l : labels.items)
        if (l.find("label")->string == name) return l;
    FAIL("no label " << name);
    throw;
}

/// One run: label q called with these self values (no children), under main.
std::string run_with(const TempDir& dir, const std::string& name, const std::vector<std::uint64_t>& calls) {
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0, "main");
    t.scope("main", 1, [&] {
        for (auto v : calls) t.scope("q", v);
    });
    const std::string path = dir.file(name);
    REQUIRE(b.write(path));
    return path;
}

} // namespace

TEST_CASE("mutation: summarize's median is the middle call, not the minimum (nor the maximum)") {
    TempDir dir;
    const auto a = run_with(dir, "a.pmcprof", {9, 1, 5});
    auto r = pmc_test::run_command(tool() + " summarize --json '" + a + "'");
    REQUIRE(r.status == 0);
    const auto j = json(r, "pmc summarize --json");
    const auto& q = by_label(*j.find("labels"), "q");
    CHECK(q.find("min")->number == 1);
    CHECK(q.find("median")->number == 5);
    CHECK(q.find("max")->number == 9);
}

TEST_CASE("mutation: diff's exact verdict counts calls: equal self values over a different number of calls changed") {
    TempDir dir;
    const auto a = run_with(dir, "a.pmcprof", {5, 5});
    const auto b = run_with(dir, "b.pmcprof", {4, 3, 3}); // self 10 either way, 2 calls against 3
    auto r = pmc_test::run_command(tool() + " diff --json '" + a + "' '" + b + "'");
    const auto j = json(r, "pmc diff --json");
    CHECK(by_label(*j.find("labels"), "q").find("verdict")->string != "unchanged");
    auto gate = pmc_test::run_command(tool() + " diff --fail-on-change '" + a + "' '" + b + "' >/dev/null 2>&1");
    CHECK(gate.status != 0);
}

TEST_CASE("mutation: diff's exact verdict needs each side's runs to agree on their calls") {
    TempDir dir;
    // Each side: one run with 2 calls, one with 3 (the same self sum): the program is not deterministic, so
    // "unchanged" would be a claim the runs do not support.
    const auto a1 = run_with(dir, "a1.pmcprof", {5, 5}), a2 = run_with(dir, "a2.pmcprof", {4, 3, 3});
    const auto b1 = run_with(dir, "b1.pmcprof", {5, 5}), b2 = run_with(dir, "b2.pmcprof", {4, 3, 3});
    auto r = pmc_test::run_command(tool() + " diff --json '" + a1 + "' '" + a2 + "' -- '" + b1 + "' '" + b2 + "'");
    const auto j = json(r, "pmc diff --json");
    CHECK(by_label(*j.find("labels"), "q").find("verdict")->string != "unchanged");
}

TEST_CASE("mutation: the readers' bounds checks: a string or thread name longer than its page is malformed, not read") {
    TempDir dir;
    pmc_test::ProfileBuilder b;
    b.thread(0, "main").scope("q", 1);
    auto bytes = b.bytes();
    // The strings page (the first after the header): its first string's length made larger than the page, with
    // both checksums redone so that only the bounds check stands between the reader and the bytes past the page.
    std::uint32_t at = 0;
    std::memcpy(&at, bytes.data() + 12, 4);
    auto h = pmc::detail::read_page_header(&bytes[at], bytes.size() - at);
    REQUIRE(h.kind == static_cast<std::uint16_t>(pf::PageKind::strings));
    const std::uint32_t huge = h.len; // one byte more than the page has left after it
    std::memcpy(&bytes[at + pf::page_header_bytes + 4], &huge, 4);
    pf::write_page_header(&bytes[at], pf::PageKind::strings, h.thread, h.seq, &bytes[at + pf::page_header_bytes], h.len,
                          h.records);
    auto p = pmc::parse_profile(bytes.data(), bytes.size());
    REQUIRE(p.ok());
    std::string all;
    for (const auto& w : p->problems) all += w + "\n";
    CHECK_THAT(all, ContainsSubstring("strings page at byte " + std::to_string(at) + " is malformed"));
    CHECK(p->strings.empty());
    // The thread page's name length likewise.
    auto bytes2 = b.bytes();
    std::uint32_t pos = at;
    for (;;) {
        const auto ph = pmc::detail::read_page_header(&bytes2[pos], bytes2.size() - pos);
        REQUIRE(ph.checked);
        if (ph.kind == static_cast<std::uint16_t>(pf::PageKind::thread)) {
            const std::uint32_t name_len = ph.len; // past the page
            std::memcpy(&bytes2[pos + pf::page_header_bytes + 12], &name_len, 4);
            pf::write_page_header(&bytes2[pos], pf::PageKind::thread, ph.thread, ph.seq,
                                  &bytes2[pos + pf::page_header_bytes], ph.len, ph.records);
            break;
        }
        pos += static_cast<std::uint32_t>(pf::page_header_bytes) + ph.len;
    }
    auto p2 = pmc::parse_profile(bytes2.data(), bytes2.size());
    REQUIRE(p2.ok());
    all.clear();
    for (const auto& w : p2->problems) all += w + "\n";
    CHECK_THAT(all, ContainsSubstring("thread page at byte " + std::to_string(pos) + " is malformed"));
    CHECK(p2->threads.at(0).name.empty());
}

TEST_CASE("mutation: the folded export never writes a negative (or wrapped) self value") {
    TempDir dir;
    // A noisy counter: the child measured more than its parent (total 10 against 14): the parent's self is -4.
    pmc_test::ProfileBuilder b({pmc_test::time_counter()});
    auto& t = b.thread(0, "main");
    t.raw_interval("child", 1, {1000, 1014});
    t.raw_interval("parent", 0, {1000, 1010});
    const std::string path = dir.file("negative.pmcprof");
    REQUIRE(b.write(path));
    auto r = pmc_test::run_command(tool() + " export --folded '" + path + "' 2>/dev/null");
    INFO(r.out);
    std::istringstream lines(r.out);
    std::string line;
    int seen = 0;
    while (std::getline(lines, line)) {
        const std::string n = line.substr(line.rfind(' ') + 1);
        REQUIRE(!n.empty());
        CHECK(n.find_first_not_of("0123456789") == std::string::npos); // no '-'
        CHECK(n.size() < 12);                                         // nor 2^64 - 4
        ++seen;
    }
    CHECK(seen >= 1); // the child's line
}
