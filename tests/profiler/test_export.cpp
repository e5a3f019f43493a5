// SPDX-License-Identifier: MIT
// pmc export (tools/export.cpp): the Chrome trace checked against the trace-event rules, folded stacks whose
// weights sum to the self totals, speedscope JSON checked against its schema's required fields with balanced
// open/close events; labels that JSON must escape; --min-value; -o replaced atomically; every cut and flipped byte
// of the input; a profile larger than the address space the export may use.
#include <pmc/detail/json.hpp>
#include <pmc/profile_format.hpp>

#include "catch.hpp"
#include "command.hpp"
#include "profile_builder.hpp"
#include "sanitizers.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace pf = pmc::profile_format;
using pmc::detail::JsonValue;

struct ExportDir {
    std::string path;
    ExportDir() {
        char tmpl[] = "/tmp/pmc-export-test-XXXXXX";
        const char* p = ::mkdtemp(tmpl);
        REQUIRE(p != nullptr);
        path = p;
    }
    ~ExportDir() { std::system(("rm -rf '" + path + "'").c_str()); }
    std::string file(const std::string& name) const { return path + "/" + name; }
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        if (DIR* d = ::opendir(path.c_str())) {
            while (dirent* e = ::readdir(d))
                if (e->d_name[0] != '.') out.push_back(e->d_name);
            ::closedir(d);
        }
        std::sort(out.begin(), out.end());
        return out;
    }
};

using pmc_test::tool;

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Runs `pmc export ARGS`, stdout to OUT, stderr returned (and the status).
pmc_test::CommandResult run_export(const std::string& args, const std::string& out) {
    return pmc_test::run_command("'" + tool() + "' export " + args + " 2>&1 >'" + out + "'");
}

/// Whether `s` is well-formed UTF-8 (what JSON text must be).
bool valid_utf8(const std::string& s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    for (std::size_t i = 0; i < s.size();) {
        const unsigned char c = p[i];
        std::size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > s.size()) return false;
        for (std::size_t k = 1; k < len; ++k)
            if ((p[i + k] & 0xC0) != 0x80) return false;
        if (len == 3 && ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] >= 0xA0))) return false;
        if (len == 4 && ((c == 0xF0 && p[i + 1] < 0x90) || (c == 0xF4 && p[i + 1] >= 0x90))) return false;
        i += len;
    }
    return true;
}

JsonValue parse_json(const std::string& text) {
    INFO(text.substr(0, 2000));
    REQUIRE(valid_utf8(text));
    auto v = pmc::detail::JsonReader::parse(text, "export");
    if (!v) FAIL(v.failure().message);
    return *v;
}

const JsonValue& member(const JsonValue& o, const char* key) {
    const JsonValue* v = o.find(key);
    INFO("member " << key);
    REQUIRE(v != nullptr);
    return *v;
}

/// ts and dur in ns (three decimals of a microsecond), exactly.
long long ns_of(const JsonValue& v) {
    REQUIRE(v.is_number());
    return std::llround(v.number * 1000.0);
}

/// What the Chrome checker found.
struct ChromeFacts {
    std::map<std::string, int> slices;  ///< X events per name
    int instants = 0, counter_events = 0, metadata = 0;
    int scope_values = 0; ///< the instant events (cat "scope values") that carry each call's values
    std::set<double> tids;
    std::map<std::string, double> last_counter; ///< the C events' last value per track (by ts)
};

/// The trace-event rules (design.md §8): every event has ph; all but M have ts; X has dur; names, pids and tids
/// present; M events name the process and the threads; slices on one thread nest (no partial overlap).
ChromeFacts check_chrome(const JsonValue& doc) {
    ChromeFacts f;
    const JsonValue& events = member(doc, "traceEvents");
    REQUIRE(events.is_array());
    struct Slice {
        long long ts, dur;
        std::string name;
    };
    std::map<double, std::vector<Slice>> by_tid;
    std::set<double> named_threads;
    bool named_process = false;
    std::map<std::string, std::pair<long long, double>> counters;
    for (const JsonValue& e : events.items) {
        REQUIRE(e.is_object());
        const JsonValue& ph = member(e, "ph");
        REQUIRE(ph.is_string());
        REQUIRE(member(e, "name").is_string());
        REQUIRE(member(e, "pid").is_number());
        if (ph.string != "C") REQUIRE(member(e, "tid").is_number());
        if (ph.string == "M") {
            ++f.metadata;
            const JsonValue& args = member(e, "args");
            if (member(e, "name").string == "process_name") named_process = true;
            if (member(e, "name").string == "thread_name") {
                REQUIRE(member(args, "name").is_string());
                named_threads.insert(member(e, "tid").number);
            }
            continue;
        }
        const long long ts = ns_of(member(e, "ts"));
        if (ph.string == "X") {
            const long long dur = ns_of(member(e, "dur"));
            CHECK(dur >= 0);
            // No args on a slice: speedscope names a frame by its name and args, one row per call otherwise.
            CHECK(e.find("args") == nullptr);
            by_tid[member(e, "tid").number].push_back(Slice{ts, dur, member(e, "name").string});
            ++f.slices[member(e, "name").string];
            f.tids.insert(member(e, "tid").number);
        } else if (ph.string == "i" && e.find("cat") && e.find("cat")->string == "scope values") {
            ++f.scope_values;
            const JsonValue& args = member(e, "args");
            REQUIRE(args.is_object());
            CHECK(member(args, "self").is_number());
        } else if (ph.string == "i") {
            ++f.instants;
        } else if (ph.string == "C") {
            ++f.counter_events;
            const JsonValue& args = member(e, "args");
            REQUIRE(args.is_object());
            REQUIRE(!args.members.empty());
            for (const auto& [k, v] : args.members) REQUIRE(v.is_number());
            auto& last = counters[member(e, "name").string];
            if (ts >= last.first) last = {ts, args.members.front().second.number};
        } else {
            FAIL("unexpected phase " << ph.string);
        }
    }
    CHECK(named_process);
    for (double tid : f.tids) CHECK(named_threads.count(tid) == 1);
    for (auto& [tid, slices] : by_tid) {
        // Sorted by start, the longer first: each slice must lie inside the open one or start after it ends.
        std::sort(slices.begin(), slices.end(),
                  [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur; });
        std::vector<Slice> open;
        for (const Slice& s : slices) {
            while (!open.empty()) {
                const Slice& up = open.back();
                if (s.ts >= up.ts && s.ts + s.dur <= up.ts + up.dur) break; // inside: a child
                INFO("slice " << s.name << " [" << s.ts << ", +" << s.dur << "] overlaps " << up.name << " [" << up.ts
                              << ", +" << up.dur << "] on tid " << tid);
                REQUIRE(s.ts >= up.ts + up.dur); // otherwise a partial overlap
                open.pop_back();
            }
            open.push_back(s);
        }
    }
    for (auto& [name, last] : counters) f.last_counter[name] = last.second;
    return f;
}

/// Folded lines: "frame;frame;frame N", N a whole number; returns weight per stack.
std::map<std::string, unsigned long long> parse_folded(const std::string& text) {
    std::map<std::string, unsigned long long> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        INFO("line: " << line);
        const auto space = line.rfind(' ');
        REQUIRE(space != std::string::npos);
        const std::string weight = line.substr(space + 1);
        REQUIRE(!weight.empty());
        REQUIRE(weight.find_first_not_of("0123456789") == std::string::npos);
        REQUIRE(space > 0);
        REQUIRE(out.count(line.substr(0, space)) == 0); // one line per distinct stack
        out[line.substr(0, space)] = std::stoull(weight);
    }
    return out;
}

/// speedscope's file-format schema, its required fields (https://www.speedscope.app/file-format-schema.json):
/// $schema, shared.frames[].name, profiles[] evented {type, name, unit, startValue, endValue, events[] {type O|C,
/// frame, at}}. O and C must balance as a stack (C closes the innermost open frame), at never decreasing, between
/// startValue and endValue. Returns the opened frames' names per profile.
std::map<std::string, std::map<std::string, int>> check_speedscope(const JsonValue& doc, const std::string& unit) {
    CHECK(member(doc, "$schema").string == "https://www.speedscope.app/file-format-schema.json");
    const JsonValue& frames = member(member(doc, "shared"), "frames");
    REQUIRE(frames.is_array());
    for (const JsonValue& fr : frames.items) REQUIRE(member(fr, "name").is_string());
    const JsonValue& profiles = member(doc, "profiles");
    REQUIRE(profiles.is_array());
    REQUIRE(!profiles.items.empty());
    std::map<std::string, std::map<std::string, int>> opened;
    for (const JsonValue& p : profiles.items) {
        CHECK(member(p, "type").string == "evented");
        REQUIRE(member(p, "name").is_string());
        CHECK(member(p, "unit").string == unit);
        const double start = member(p, "startValue").number, end = member(p, "endValue").number;
        CHECK(start <= end);
        const JsonValue& events = member(p, "events");
        REQUIRE(events.is_array());
        std::vector<double> stack;
        double last = start;
        auto& names = opened[member(p, "name").string];
        for (const JsonValue& e : events.items) {
            const std::string& type = member(e, "type").string;
            const double frame = member(e, "frame").number, at = member(e, "at").number;
            REQUIRE(frame >= 0);
            REQUIRE(frame < static_cast<double>(frames.items.size()));
            CHECK(at >= last);
            CHECK(at <= end);
            last = at;
            if (type == "O") {
                stack.push_back(frame);
                ++names[member(frames.items[static_cast<std::size_t>(frame)], "name").string];
            } else {
                REQUIRE(type == "C");
                REQUIRE(!stack.empty());
                CHECK(stack.back() == frame);
                stack.pop_back();
            }
        }
        CHECK(stack.empty());
    }
    return opened;
}

/// Nesting, two threads, recursion, instants, integer events; wall-time primary, page-faults riding along.
void export_sample(pmc_test::ProfileBuilder& b) {
    b.page_records = 4;
    auto& m = b.thread(0, "main", 101);
    m.scope("compile", 500, [&] {
        m.scope("parse", 1000, [&] { m.advance(3, 1); });
        m.instant("cache-hit", "key");
        m.scope("typeck", 2000, [&] {
            m.scope("typeck", 300, [&] { m.scope("parse", 100); });
            m.advance(5, 1);
        });
        m.integer("ir-size", 4096);
    });
    m.advance(50);
    m.scope("link", 700);
    auto& w = b.thread(1, "worker", 102);
    w.scope("parse", 900, [&] { w.instant("cache-hit"); });
    w.integer("ir-size", 77);
}

} // namespace

TEST_CASE("pmc export --chrome: the trace-event rules hold on nesting, threads, instants and integer events") {
    ExportDir dir;
    pmc_test::ProfileBuilder b({pmc_test::time_counter(), pmc_test::exact_counter()});
    export_sample(b);
    const std::string in = dir.file("p.pmcprof"), out = dir.file("p.json");
    REQUIRE(b.write(in));
    auto r = run_export("--chrome '" + in + "'", out);
    INFO(r.out);
    REQUIRE(r.status == 0);
    const JsonValue doc = parse_json(slurp(out));
    const ChromeFacts f = check_chrome(doc);
    CHECK(f.slices == std::map<std::string, int>{{"compile", 1}, {"parse", 3}, {"typeck", 2}, {"link", 1}});
    CHECK(f.instants == 2);
    CHECK(f.scope_values == 7); // one per call
    CHECK(f.tids == std::set<double>{101, 102});
    // Integer events as counter tracks, with their values; page-faults riding along as a track per thread.
    CHECK(f.last_counter.at("ir-size (thread 0)") == 4096);
    CHECK(f.last_counter.at("ir-size (thread 1)") == 77);
    CHECK(f.last_counter.at("page-faults (thread 0)") == 8);
    // wall-time: ts and dur are microseconds: compile lasted 500 + 1000 + 2000 + 300 + 100 ns.
    CHECK_THAT(slurp(out), ContainsSubstring("\"name\":\"compile\",\"cat\":\"scope\",\"pid\":4242,\"tid\":101,"
                                             "\"ts\":0.000,\"dur\":3.900}"));
    // Its values, where Perfetto shows them and speedscope does not key on them: an instant at its start.
    CHECK_THAT(slurp(out), ContainsSubstring("\"name\":\"compile\",\"cat\":\"scope values\",\"pid\":4242,\"tid\":101,"
                                             "\"ts\":0.000,\"args\":{\"wall-time\":3900,\"self\":500,\"page-faults\":8}}"));
    CHECK(member(member(doc, "otherData"), "microsecond_means").string.find("wall-time") != std::string::npos);

    // A count as the axis: the file and stderr say what a microsecond is.
    auto counts = run_export("--chrome --counter page-faults '" + in + "'", out);
    REQUIRE(counts.status == 0);
    CHECK_THAT(counts.out, ContainsSubstring("not microseconds: 1 \"us\" = 1 page-faults event"));
    const JsonValue cdoc = parse_json(slurp(out));
    check_chrome(cdoc);
    CHECK_THAT(member(member(cdoc, "otherData"), "microsecond_means").string,
               ContainsSubstring("one page-faults event (the counter is not a time"));
    // Exact or not by the rule every profile tool shares (pmc::counter_exactness), with the reason.
    CHECK(member(member(cdoc, "otherData"), "exact").boolean);
    CHECK_THAT(member(member(cdoc, "otherData"), "exact_why").string, ContainsSubstring("a count of events read whole"));
    CHECK(!member(member(doc, "otherData"), "exact").boolean);
    CHECK(member(member(doc, "otherData"), "exact_why").string == "a time: it varies from run to run");
    auto fallback_counter = pmc_test::exact_counter();
    fallback_counter.flags |= pf::fallback;
    pmc_test::ProfileBuilder fb({fallback_counter});
    fb.thread(0).scope("a", 1);
    REQUIRE(fb.write(in));
    REQUIRE(run_export("--chrome '" + in + "'", out).status == 0);
    const JsonValue fdoc = parse_json(slurp(out));
    CHECK(!member(member(fdoc, "otherData"), "exact").boolean);
    CHECK_THAT(member(member(fdoc, "otherData"), "exact_why").string, ContainsSubstring("(a fallback)"));
}

TEST_CASE("pmc export --folded: integer self weights per stack that sum to the self totals, per thread or "
          "collapsed, and --min-value keeps the sums") {
    ExportDir dir;
    pmc_test::ProfileBuilder b({pmc_test::time_counter(), pmc_test::exact_counter()});
    export_sample(b);
    const std::string in = dir.file("p.pmcprof"), out = dir.file("p.folded");
    REQUIRE(b.write(in));
    auto r = run_export("--folded '" + in + "'", out);
    REQUIRE(r.status == 0);
    const auto stacks = parse_folded(slurp(out));
    const std::map<std::string, unsigned long long> expected{
        {"main (thread 0);compile", 500},
        {"main (thread 0);compile;parse", 1000},
        {"main (thread 0);compile;typeck", 2000},
        {"main (thread 0);compile;typeck;typeck", 300},
        {"main (thread 0);compile;typeck;typeck;parse", 100},
        {"main (thread 0);link", 700},
        {"worker (thread 1);parse", 900}};
    CHECK(stacks == expected);
    auto collapsed = run_export("--folded --collapse '" + in + "'", out);
    REQUIRE(collapsed.status == 0);
    const auto merged = parse_folded(slurp(out));
    CHECK(merged.at("compile;parse") == 1000);
    CHECK(merged.at("parse") == 900);
    unsigned long long sum = 0;
    for (const auto& [stack, w] : merged) sum += w;
    CHECK(sum == 500 + 1000 + 2000 + 300 + 100 + 700 + 900); // the self totals: every scope's own value once

    // --min-value 1000: the scopes below it give their whole value to the enclosing stack.
    auto min = run_export("--folded --min-value 1000 '" + in + "'", out);
    REQUIRE(min.status == 0);
    CHECK_THAT(min.out, ContainsSubstring("left out 2 of 7 scopes with a total below 1000 ns; their values are in their "
                                             "enclosing scopes' stacks"));
    const auto pruned = parse_folded(slurp(out));
    CHECK(pruned.at("main (thread 0);compile;typeck") == 2400);
    CHECK(pruned.count("main (thread 0);compile;typeck;typeck") == 0);
    CHECK(pruned.at("main (thread 0);link") == 700); // outermost scopes stay, however small
    unsigned long long psum = 0;
    for (const auto& [stack, w] : pruned) psum += w;
    CHECK(psum == sum);
}

TEST_CASE("pmc export --speedscope: the schema's required fields, balanced open/close events, the counter's unit") {
    ExportDir dir;
    pmc_test::ProfileBuilder b({pmc_test::time_counter(), pmc_test::exact_counter()});
    export_sample(b);
    const std::string in = dir.file("p.pmcprof"), out = dir.file("p.speedscope.json");
    REQUIRE(b.write(in));
    auto r = run_export("--speedscope '" + in + "'", out);
    REQUIRE(r.status == 0);
    CHECK(r.out.empty()); // nothing out of order, nothing left out
    const JsonValue doc = parse_json(slurp(out));
    auto opened = check_speedscope(doc, "nanoseconds");
    // The events at the built values: compile from 0 to 3900 ns, link from 3950 (50 ns later) to 4650.
    std::map<std::string, std::vector<std::pair<std::string, double>>> at;
    const JsonValue& main_profile = member(doc, "profiles").items.at(0);
    CHECK(member(main_profile, "name").string == "main (thread 0)");
    for (const JsonValue& e : member(main_profile, "events").items)
        at[member(member(member(doc, "shared"), "frames").items.at(static_cast<std::size_t>(member(e, "frame").number)),
                  "name")
               .string]
            .emplace_back(member(e, "type").string, member(e, "at").number);
    using Events = std::vector<std::pair<std::string, double>>;
    CHECK(at["compile"] == Events{{"O", 0}, {"C", 3900}});
    CHECK(at["link"] == Events{{"O", 3950}, {"C", 4650}});
    CHECK(at["typeck"] == Events{{"O", 1500}, {"O", 3500}, {"C", 3900}, {"C", 3900}});
    CHECK(opened["main (thread 0)"] ==
          std::map<std::string, int>{{"compile", 1}, {"parse", 2}, {"typeck", 2}, {"link", 1}});
    CHECK(opened["worker (thread 1)"] == std::map<std::string, int>{{"parse", 1}});
    // A count: unit "none", the events in counts.
    auto counts = run_export("--speedscope --counter page-faults '" + in + "'", out);
    REQUIRE(counts.status == 0);
    check_speedscope(parse_json(slurp(out)), "none");
    // --min-value leaves scopes out and still balances.
    auto min = run_export("--speedscope --min-value 1000 '" + in + "'", out);
    REQUIRE(min.status == 0);
    CHECK_THAT(min.out, ContainsSubstring("left out 4 of 7 scopes with a total below 1000 ns\n"));
    opened = check_speedscope(parse_json(slurp(out)), "nanoseconds");
    CHECK(opened["main (thread 0)"] == std::map<std::string, int>{{"compile", 1}, {"parse", 1}, {"typeck", 1}});
    CHECK(opened.count("worker (thread 1)") == 0); // nothing left in it: no empty profile
}

TEST_CASE("pmc export: labels with quotes, backslashes, control bytes and invalid UTF-8 give valid JSON") {
    ExportDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0, "th\"read\\");
    const std::string nasty = std::string("q\"b\\s\x01\x1f\n\x7f ") + "\xff\xc3(\xed\xa0\x80" + "\xe2\x82\xac ok";
    t.scope(nasty, 3, [&] { t.scope("inner;semi", 2); });
    t.instant(nasty, nasty);
    const std::string in = dir.file("n.pmcprof"), out = dir.file("n.json");
    REQUIRE(b.write(in));
    const std::string expected = std::string("q\"b\\s\x01\x1f\n\x7f ") + "\xEF\xBF\xBD\xEF\xBF\xBD(" +
                                 "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" + "\xe2\x82\xac ok";
    REQUIRE(run_export("--chrome '" + in + "'", out).status == 0);
    const ChromeFacts f = check_chrome(parse_json(slurp(out)));
    CHECK(f.slices.count(expected) == 1);
    REQUIRE(run_export("--speedscope '" + in + "'", out).status == 0);
    const auto opened = check_speedscope(parse_json(slurp(out)), "none");
    CHECK(opened.at("th\"read\\ (thread 0)").count(expected) == 1);
    REQUIRE(run_export("--folded '" + in + "'", out).status == 0);
    const auto stacks = parse_folded(slurp(out));
    CHECK(stacks.size() == 2);
    for (const auto& [stack, w] : stacks) CHECK(std::count(stack.begin(), stack.end(), ';') <= 3); // 'inner:semi'
}

TEST_CASE("pmc export -o: the file appears whole or not at all, and errors say why") {
    ExportDir dir;
    pmc_test::ProfileBuilder b;
    auto& t = b.thread(0, "main");
    for (int i = 0; i < 3000; ++i) t.scope("a long label for a big export", 1);
    const std::string in = dir.file("p.pmcprof"), out = dir.file("out.json");
    REQUIRE(b.write(in));
    { std::ofstream(out) << "previous contents"; }
    // A write that fails halfway (the file size limit: 64 KiB): OUT keeps its old contents, no temporary is left.
    auto r = pmc_test::run_command("trap '' XFSZ; ulimit -f 64; '" + tool() + "' export --chrome -o '" + out + "' '" +
                                   in + "' 2>&1");
    INFO(r.out);
    CHECK(r.status == 1);
    CHECK(r.signal == 0);
    CHECK_THAT(r.out, ContainsSubstring("cannot write"));
    CHECK_THAT(r.out, ContainsSubstring("was not written"));
    CHECK(slurp(out) == "previous contents");
    CHECK(dir.entries() == std::vector<std::string>{"out.json", "p.pmcprof"});
    // Without the limit it is replaced, whole.
    auto ok = pmc_test::run_command("'" + tool() + "' export --chrome -o '" + out + "' '" + in + "' 2>&1");
    REQUIRE(ok.status == 0);
    CHECK(check_chrome(parse_json(slurp(out))).slices.at("a long label for a big export") == 3000);
    CHECK(dir.entries() == std::vector<std::string>{"out.json", "p.pmcprof"});
    // A device is written as it goes.
    CHECK(pmc_test::run_command("'" + tool() + "' export --folded -o /dev/null '" + in + "'").status == 0);
    // Errors: what failed and the fix.
    auto missing = pmc_test::run_command("'" + tool() + "' export --folded '" + dir.file("none") + "' 2>&1");
    CHECK(missing.status == 1);
    CHECK_THAT(missing.out, ContainsSubstring("cannot open profile"));
    auto pipe = pmc_test::run_command("cat '" + in + "' | '" + tool() + "' export --folded /dev/stdin 2>&1");
    CHECK(pipe.status == 1);
    CHECK_THAT(pipe.out, ContainsSubstring("not a regular file"));
    auto noformat = pmc_test::run_command("'" + tool() + "' export '" + in + "' 2>&1");
    CHECK(noformat.status == 1);
    CHECK_THAT(noformat.out, ContainsSubstring("which format?"));
    auto two = pmc_test::run_command("'" + tool() + "' export --chrome --folded '" + in + "' 2>&1");
    CHECK(two.status == 1);
    auto badmin = pmc_test::run_command("'" + tool() + "' export --folded --min-value -3 '" + in + "' 2>&1");
    CHECK(badmin.status == 1);
    CHECK_THAT(badmin.out, ContainsSubstring("--min-value needs a whole number"));
    auto counter = pmc_test::run_command("'" + tool() + "' export --folded --counter cycles '" + in + "' 2>&1");
    CHECK(counter.status == 1);
    CHECK_THAT(counter.out, ContainsSubstring("recorded no counter 'cycles'; it has: page-faults"));
    auto help = pmc_test::run_command("'" + tool() + "' export --help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, ContainsSubstring("usage: pmc export"));
    CHECK(pmc_test::run_command("'" + tool() + "' help export").out == help.out);
}

TEST_CASE("pmc export: every cut length and flipped bytes of the input: a clear message, never a crash") {
    ExportDir dir;
    pmc_test::ProfileBuilder b({pmc_test::time_counter(), pmc_test::exact_counter()});
    export_sample(b);
    const auto bytes = b.bytes();
    const std::string in = dir.file("d.pmcprof"), out = dir.file("d.out");
    const std::vector<std::string> all_formats{"--chrome", "--folded", "--speedscope"};
    auto check_one = [&](const std::vector<unsigned char>& data, const std::string& what,
                         const std::vector<std::string>& formats) {
        {
            std::ofstream f(in, std::ios::binary);
            f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
        }
        for (const std::string& format : formats) {
            auto r = run_export(std::string(format) + " '" + in + "'", out);
            INFO(what << ", " << format << ": " << r.out);
            REQUIRE(r.signal == 0);
            REQUIRE((r.status == 0 || r.status == 1 || r.status == 2));
            if (r.status != 0) REQUIRE_THAT(r.out, ContainsSubstring("pmc export: "));
            if (r.status == 1) REQUIRE_THAT(r.out, ContainsSubstring("not a readable pmc profile"));
            // 2: bytes lost, or (a cut at a page's end) scopes whose enclosing scopes the cut took.
            if (r.status == 2)
                REQUIRE((r.out.find("is incomplete") != std::string::npos ||
                         r.out.find("have no enclosing scope in the file") != std::string::npos));
            // Valid JSON (damaged values need not nest: the rules are checked on whole files above).
            if (r.status != 1 && format != "--folded") parse_json(slurp(out));
            if (r.status != 1 && format == "--folded") parse_folded(slurp(out));
        }
    };
    // Every length past the first pages, each in one format in turn (the three share the reader, which
    // test_profile_reader.cpp checks at every length in-process; a process per length and format took 57 s here,
    // most of the suite's time): every format still sees a cut in every page and at a third of the lengths.
    // Sanitized: one length in 7 throughout, and 16 flips (see pmc_test::one_in_sanitized).
    const std::size_t stride = pmc_test::one_in_sanitized(7);
    for (std::size_t cut = 0, turn = 0; cut < bytes.size(); cut += (cut < 400 ? 7 : stride), ++turn) {
        check_one(std::vector<unsigned char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut)),
                  "cut at " + std::to_string(cut), {all_formats[turn % all_formats.size()]});
    }
    std::mt19937 rng(1313);
    for (std::size_t i = 0; i < 80; i += pmc_test::one_in_sanitized(5)) {
        auto flipped = bytes;
        const std::size_t at = 24 + rng() % (flipped.size() - 24); // past the fixed header: exports, not refusals
        flipped[at] ^= static_cast<unsigned char>(1 + rng() % 255);
        check_one(flipped, "byte " + std::to_string(at) + " flipped", all_formats);
    }
}

namespace {

/// Writes a large profile page by page without holding it: one thread, `pages` events pages, each a complete
/// "request" scope holding `groups` chains step > step > step (totals 10, 8, 6: self 2, 2, 6 ticks of `tick`
/// nanoseconds); wall-time. Each request's self is groups + 1 ticks (one before each chain and one at its end).
/// A large tick makes each record longer (its readings take more varint bytes): the same file in fewer records.
[[maybe_unused]] void write_big_profile(const std::string& path, std::uint32_t pages, std::uint32_t groups,
                                       std::uint64_t tick) {
    pmc_test::ProfileBuilder head({pmc_test::time_counter()});
    head.thread(0, "main");
    head.id("request");
    head.id("step");
    head.end_record = false;
    auto prefix = head.bytes(); // header, strings, thread page (no events)
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(prefix.data(), 1, prefix.size(), f) == prefix.size());
    std::vector<unsigned char> payload;
    std::uint64_t now = 1000;
    for (std::uint32_t page = 0; page < pages; ++page) {
        payload.clear();
        auto put = [&](const void* p, std::size_t n) {
            const auto* c = static_cast<const unsigned char*>(p);
            payload.insert(payload.end(), c, c + n);
        };
        const std::uint64_t start = now;
        std::uint64_t last = 0; // the page's last end reading (records store differences from it)
        auto var = [&](std::uint64_t v) {
            unsigned char b[10];
            put(b, static_cast<std::size_t>(pf::put_varint(b, v) - b));
        };
        auto interval = [&](std::uint32_t label, std::uint32_t depth, std::uint64_t s, std::uint64_t e) {
            var(pf::record_head(pf::RecordKind::interval, false, label));
            var(depth);
            var((e - last) * tick);
            var((e - s) * tick);
            last = e;
        };
        for (std::uint32_t g = 0; g < groups; ++g) {
            const std::uint64_t t = now + 1; // one tick of the request's own first
            for (std::uint32_t depth = 3; depth >= 1; --depth) // postorder: the innermost ends first
                interval(2, depth, t + (depth - 1), t + 10 - (depth - 1));
            now = t + 10;
        }
        interval(1, 0, start, ++now);
        unsigned char h[pf::page_header_bytes];
        pf::write_page_header(h, pf::PageKind::events, 0, page, payload.data(),
                              static_cast<std::uint32_t>(payload.size()), 3 * groups + 1);
        REQUIRE(std::fwrite(h, 1, sizeof h, f) == sizeof h);
        REQUIRE(std::fwrite(payload.data(), 1, payload.size(), f) == payload.size());
    }
    // The end record: two strings in one page, thread 0's pages and its one thread page.
    std::vector<unsigned char> end;
    for (std::uint32_t v : {static_cast<std::uint32_t>(pf::EndHow::closed), 0u, 1u, 2u, 1u, 0u, pages, 1u}) {
        const auto* c = reinterpret_cast<const unsigned char*>(&v);
        end.insert(end.end(), c, c + 4);
    }
    unsigned char h[pf::page_header_bytes];
    pf::write_page_header(h, pf::PageKind::end, 0, 0, end.data(), static_cast<std::uint32_t>(end.size()), 1);
    REQUIRE(std::fwrite(h, 1, sizeof h, f) == sizeof h);
    REQUIRE(std::fwrite(end.data(), 1, end.size(), f) == end.size());
    REQUIRE(std::fclose(f) == 0);
}

} // namespace

TEST_CASE("pmc export: a profile larger than the address space it may use is exported in all three formats") {
#if PMC_TEST_ASAN
    PMC_SKIP("AddressSanitizer reserves terabytes of address space: an address-space limit cannot be tested under it");
#else
    ExportDir dir;
    const std::string in = dir.file("big.pmcprof");
    // 4200 pages of 613 records of about 13 bytes (format version 2; ticks of 2^32 ns): 34 MB, and the export may
    // use 16 MB of address space. (Small ticks made 2002 records of 4 bytes a page: the same file, 3 times the work.)
    constexpr unsigned long long pages = 4200, groups = 204, tick = 1ull << 32;
    write_big_profile(in, static_cast<std::uint32_t>(pages), static_cast<std::uint32_t>(groups), tick);
    struct stat st {};
    REQUIRE(::stat(in.c_str(), &st) == 0);
    const long long limit_kib = 16 * 1024;
    REQUIRE(st.st_size > limit_kib * 1024 * 2);
    const std::string limited = "ulimit -v " + std::to_string(limit_kib) + "; TMPDIR='" + dir.path + "' '" + tool() +
                                "' export ";
    auto folded = pmc_test::run_command(limited + "--folded '" + in + "' 2>&1");
    INFO(folded.out);
    REQUIRE(folded.status == 0);
    CHECK_THAT(folded.out,
               ContainsSubstring("main (thread 0);request " + std::to_string(pages * (groups + 1) * tick) + "\n"));
    CHECK_THAT(folded.out,
               ContainsSubstring("main (thread 0);request;step " + std::to_string(pages * groups * 2 * tick) + "\n"));
    CHECK_THAT(folded.out, ContainsSubstring("main (thread 0);request;step;step;step " +
                                             std::to_string(pages * groups * 6 * tick) + "\n"));
    auto chrome = pmc_test::run_command(limited + "--chrome -o /dev/null '" + in + "' 2>&1");
    INFO(chrome.out);
    CHECK(chrome.status == 0);
    const std::string out = dir.file("big.speedscope.json");
    auto speedscope = pmc_test::run_command(limited + "--speedscope -o '" + out + "' '" + in + "' 2>&1");
    INFO(speedscope.out);
    CHECK(speedscope.status == 0);
    // The events came out in order and balanced: count and check the opens without parsing 100+ MB as a tree.
    const std::string text = slurp(out);
    std::size_t opens = 0, closes = 0;
    for (std::size_t at = text.find("\"type\":\"O\""); at != std::string::npos; at = text.find("\"type\":\"O\"", at + 1))
        ++opens;
    for (std::size_t at = text.find("\"type\":\"C\""); at != std::string::npos; at = text.find("\"type\":\"C\"", at + 1))
        ++closes;
    CHECK(opens == pages * (groups * 3 + 1));
    CHECK(closes == opens);
#endif
}

TEST_CASE("every profile tool: no profile, an unusable option, conflicting flags or an unwritable output: the reason, "
          "status 1, never a crash") {
    ExportDir dir;
    // A profile with many labels: every tool's output is larger than stdio's buffer, so a failed write shows while
    // the tool runs, not only at exit.
    pmc_test::ProfileBuilder b({pmc_test::exact_counter(), pmc_test::time_counter()});
    auto& t = b.thread(0, "main");
    for (int i = 0; i < 300; ++i)
        t.scope("outer_query_" + std::to_string(i), 1, [&] { t.scope("inner_query_" + std::to_string(i), 2); });
    const std::string good = dir.file("good.pmcprof");
    REQUIRE(b.write(good));
    const auto bytes = b.bytes();
    auto put = [&](const std::string& name, const std::string& content) {
        std::ofstream(dir.file(name), std::ios::binary) << content;
        return dir.file(name);
    };
    REQUIRE(::mkdir(dir.file("a-directory").c_str(), 0755) == 0);
    const std::string header_cut = put("header-cut", std::string(reinterpret_cast<const char*>(bytes.data()), 40));
    // Each bad input and what the message must say about it.
    const std::vector<std::pair<std::string, std::string>> inputs = {
        {dir.file("a-directory"), "it is a directory, not a regular file; name the profile file in it"},
        {put("empty", ""), "the file has 0 bytes"},
        {"/dev/null", "not a regular file (a pipe or a device"},
        {dir.file("absent"), "No such file or directory"},
        {header_cut, "but the file has 40 bytes: cut short"},
        {put("text", "just some text, not a profile\n"), "does not start with PMCPROF"},
    };
    const std::vector<std::string> tools = {"summarize", "critical", "export --chrome", "export --folded",
                                            "export --speedscope"};
    for (const auto& [file, why] : inputs) {
        std::vector<std::string> commands;
        for (const auto& name : tools) commands.push_back(name + " '" + file + "'");
        commands.push_back("diff '" + good + "' '" + file + "'");
        commands.push_back("diff --fail-on-change '" + good + "' '" + file + "'");
        commands.push_back("aggregate '" + good + "' '" + file + "'");
        for (const auto& c : commands) {
            auto r = pmc_test::run_command(tool() + " " + c + " 2>&1 >/dev/null");
            INFO(c << ": " << r.out);
            CHECK(r.status == 1);
            CHECK_THAT(r.out, ContainsSubstring("'" + file + "'"));
            CHECK_THAT(r.out, ContainsSubstring(why));
        }
    }
    // Options: a counter the file lacks, numbers that are not whole numbers, flags that exclude each other.
    const std::vector<std::pair<std::string, std::string>> mistakes = {
        {"summarize --counter cycles", "recorded no counter 'cycles'; it has: page-faults, wall-time (choose one "
                                       "with --counter NAME)"},
        {"critical --counter cycles", "choose one with --counter NAME"},
        {"export --chrome --counter cycles", "choose one with --counter NAME"},
        {"summarize --counter", "which profile? (pmc summarize FILE); --counter took '" + good + "' as its counter name"},
        {"critical --counter", "--counter took '" + good + "' as its counter name"},
        {"export --folded --counter", "--counter took '" + good + "' as its counter name"},
        {"summarize --thread 7", "has no thread 7 (it has 1); its threads: 0"},
        {"critical --thread 7", "has no thread 7 (it has 1); its threads: 0"},
        {"summarize --top 99999999999999999999999", "--top needs a whole number"},
        {"summarize --top +5", "--top needs a whole number"},
        {"summarize --thread ' 0'", "has no thread named ' 0' (it has 1); its threads: 0"}, // not digits: a name
        {"critical --thread +0", "has no thread named '+0'"},
        {"critical --thread 99999999999", "--thread needs a thread number or name"},
        {"export --chrome --min-value garbage", "--min-value needs a whole number"},
        {"export --chrome --min-value +5", "--min-value needs a whole number"},
        {"export --chrome --min-value ' 5'", "--min-value needs a whole number"},
        {"export --chrome --min-value 99999999999999999999999", "--min-value needs a whole number"},
        {"export --chrome --folded", "one format at a time"},
        {"export --speedscope --collapse", "--collapse belongs to --folded"},
        {"export --folded -o '" + good + "'", "is the profile being read"},
        {"export --chrome -o '" + dir.path + "/./good.pmcprof'", "the export would replace it; give another file name"},
        {"summarize --per-thread --thread 0", "--per-thread and --thread exclude each other"},
        {"critical --per-thread --expect-path main", "--expect-path checks one path"},
        {"diff --top 99999999999999999999999 '" + good + "'", "--top needs a whole number"},
        {"aggregate --top +3 '" + good + "'", "--top needs a whole number"},
    };
    for (const auto& [args, why] : mistakes) {
        auto r = pmc_test::run_command(tool() + " " + args + " '" + good + "' 2>&1 >/dev/null");
        INFO(args << ": " << r.out);
        CHECK(r.status == 1);
        CHECK_THAT(r.out, ContainsSubstring(why));
    }
    REQUIRE(pmc_test::run_command(tool() + " summarize '" + good + "' >/dev/null 2>&1").status == 0); // still whole
    // A full disk: the output cannot be written. Status 1 and the reason, not 0 over a cut output nor an abort.
    if (::access("/dev/full", W_OK) != 0) {
        WARN("SKIPPED (the unwritable-output part): no writable /dev/full here");
        return;
    }
    for (const std::string& c : {"summarize '" + good + "'", "summarize --json '" + good + "'", "critical --graph '" +
                                 good + "'", "diff '" + good + "' '" + good + "'", "diff --json '" + good + "' '" +
                                 good + "'", "aggregate '" + good + "' '" + good + "'", "export --folded '" + good + "'",
                                 std::string("summarize --help")}) {
        auto r = pmc_test::run_command(tool() + " " + c + " 2>&1 >/dev/full");
        INFO(c << ": " << r.out);
        CHECK(r.status == 1);
        CHECK_THAT(r.out, ContainsSubstring("No space left on device"));
    }
}
