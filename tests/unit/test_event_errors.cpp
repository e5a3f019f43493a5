// SPDX-License-Identifier: MIT
// Malformed event strings: each gets a failure whose message quotes the string and puts a caret under the bad
// token, with an errno-style code. None may crash or be accepted.
#include "catch.hpp"
#include "fake_sysfs.hpp"

#include <pmc/detail/explain.hpp>
#include <pmc/event.hpp>

#include <cerrno>
#include <string>

namespace {

struct Bad {
    std::string text;
    int column;           ///< where the caret must be (offset into the string); -1: don't check
    const char* mentions; ///< a phrase the message must contain
    int code;
};

/// The caret's column in a parser message (its last line is four spaces, padding, then '^').
int caret_column(const std::string& message) {
    auto line_start = message.rfind('\n');
    if (line_start == std::string::npos) return -100;
    auto caret = message.find('^', line_start);
    if (caret == std::string::npos) return -100;
    return static_cast<int>(caret - line_start - 1 - 4);
}

const Bad bad_strings[] = {
    {"", 0, "empty", EINVAL},
    {"   ", 3, "empty", EINVAL},
    {"instructions:uu", 14, "given twice", EINVAL},
    {"instructions:kuk", 15, "given twice", EINVAL},
    {"instructions:x", 13, "unknown modifier 'x'", EINVAL},
    {"instructions::u", 13, "after one ':'", EINVAL},
    {"instructions:u:k", 14, "after one ':'", EINVAL},
    {"instructions:pppp", 16, "at most three", EINVAL},
    {"instructions:", 12, "empty modifier list", EINVAL},
    {"instructions u", 13, "modifiers follow a ':'", EINVAL},
    {"instructions:u k", 14, "unknown modifier ' '", EINVAL},
    {"instrucions", 0, "did you mean 'instructions'", ENOENT},
    {"cylces:u", 0, "did you mean 'cycles'", ENOENT},
    {"pagefaults", 0, "did you mean 'page-faults'", ENOENT},
    {"nosuchevent", 0, "unknown event 'nosuchevent'", ENOENT},
    {"cycles,instructions", 6, "one counter per event", EINVAL},
    {"{cycles,instructions}", 0, "groups", EINVAL},
    {"r", 0, "unknown event 'r'", ENOENT},
    {"rxyz", 0, "unknown event", ENOENT},
    {"r1a8x", 0, "unknown event", ENOENT},
    {"r0x1a8", 0, "unknown event", ENOENT},
    {"r10000000000000000", 0, "does not fit in 64 bits", EINVAL},
    {"4294967296:1", 0, "out of range", EINVAL},
    {"4:zz", 2, "config number", EINVAL},
    {"nosuchpmu/event=1/", 0, "no PMU named 'nosuchpmu'", ENOENT},
    {"../cpu/event=1/", 0, "no PMU named '..'", ENOENT},
    {"msr/tsc", 0, "missing the closing '/'", EINVAL},
    {"msr/", 0, "missing the closing '/'", EINVAL},
    {"msr", 0, "unknown event 'msr'", ENOENT},
    {"/tsc/", 0, "unexpected '/'", EINVAL},
    {"msr/foo=1/", 4, "has no term or event 'foo'", ENOENT},
    {"msr/event=0x1ffffffffffffffff/", 4, "not a number", EINVAL},
    {"msr/event=-1/", 4, "not a number", EINVAL},
    {"msr/event=1e3/", 4, "not a number", EINVAL},
    {"msr/event=0XFF/", 4, "not a number", EINVAL},
    {"msr/event=/", 4, "has no value", EINVAL},
    {"msr/=1/", 4, "a term is NAME", EINVAL},
    {"msr/event=1,,/", 12, "empty term", EINVAL},
    {"msr/,event=1/", 4, "empty term", EINVAL},
    {"msr/event=1,/", 12, "empty term", EINVAL},
    {"msr/tsc,tsc/", 8, "given twice", EINVAL},
    {"msr/event=1,event=2/", 12, "given twice", EINVAL},
    {"msr/tsc,aperf/", 8, "two named events", EINVAL},
    {"msr/tsc=1/", 4, "a named event takes no value", ENOENT},
    {"msr/tsc/:u", 8, "follow directly", EINVAL},
    {"msr/tsc/x", 8, "unknown modifier 'x'", EINVAL},
    {"cpu/event=0x1000/", 4, "too big for 'event'", EINVAL},
    {"cpu/inv=2/", 4, "maximum 0x1", EINVAL},
    {"cpu/ldlat=0x10000/", 4, "maximum 0xffff", EINVAL},
    {"cpu/cycles-ct/", 4, "needs a value for 'cmask'", EINVAL},
    {"cpu/call-graph=dwarf/", 4, "configures perf record", EINVAL},
    {"cpu/config/", 4, "needs a value", EINVAL},
    {"cpu/name/", 4, "needs a value", EINVAL},
    {"cpu/event=1,umask=1,edge=1,inv=1,cmask=1,ldlat=1,filter=1,bogus=1/", 58, "no term or event 'bogus'", ENOENT},
    {"broken/event=1/", 0, "format pmc cannot read", EINVAL},
    {"L1-icache-stores", 0, "L1-icache has no store", EINVAL},
    {"iTLB-prefetches", 0, "iTLB has no prefetch", EINVAL},
    {"L1-dcache-load-store", 15, "two cache operations", EINVAL},
    {"L1-dcache-misses-misses", 17, "two cache results", EINVAL},
    {"L1-dcache-loads-misses-refs", 0, "unknown event", ENOENT},
    {"duration_time", 0, "computed by the perf tool", EINVAL},
    {"wall-time:u", 9, "takes no modifiers", EINVAL},
    {"tsc:k", 3, "takes no modifiers", EINVAL},
    {"TSC", 0, "write 'msr/tsc/'", EINVAL},
    {"Wall-Time", 0, "lower case", EINVAL},
    {"mem:", 4, "expected an address", EINVAL},
    {"mem:zz", 4, "expected an address", EINVAL},
    {"mem:0x1000/3", 11, "length must be 1, 2, 4 or 8", EINVAL},
    {"mem:0x1000:rr", 12, "given twice", EINVAL},
    {"mem:0x1000:rwx", 4, "execute breakpoint", EINVAL},
    {"sched:sched_switch", 0, "tracepoint", ENOENT},
    {"\x01\x02", 0, "unexpected", EINVAL},
    {"instructions\x7f", 12, "modifiers follow a ':'", EINVAL},
    {std::string("instructions\0:u", 15), 12, "modifiers follow a ':'", EINVAL},
    {std::string(5000, 'a'), 0, "unknown event", ENOENT},
    {std::string(300, '/'), 0, "unexpected '/'", EINVAL},
    {"cpu/" + std::string(5000, ',') + "/", 4, "empty term", EINVAL},
};

} // namespace

TEST_CASE("malformed event strings fail with a message that quotes them and points at the bad token", "[errors]") {
    pmc_test::FakeSysfs sysfs;
    static_assert(sizeof(bad_strings) / sizeof(bad_strings[0]) >= 50, "the issue asks for 50+ malformed strings");
    for (const Bad& b : bad_strings) {
        INFO("event string: '" << b.text << "'");
        auto r = pmc::try_parse_event(b.text, sysfs.root());
        REQUIRE_FALSE(r.ok());
        const std::string& m = r.failure().message;
        INFO("message: " << m);
        CHECK_THAT(m, ContainsSubstring(b.mentions));
        CHECK_THAT(m, ContainsSubstring("'" + b.text + "'"));
        CHECK(r.failure().code.value() == b.code);
        if (b.column >= 0) CHECK(caret_column(m) == b.column);
    }
}

TEST_CASE("the throwing parser raises pmc::error carrying the errno", "[errors]") {
    try {
        pmc::parse_event("instructions:q");
        FAIL("no exception");
    } catch (const pmc::error& e) {
        CHECK(e.code() == std::errc::invalid_argument);
        CHECK_THAT(std::string(e.what()), ContainsSubstring("unknown modifier 'q'"));
        // what() is pmc's own message, without std::system_error's ": Invalid argument" suffix.
        CHECK_THAT(std::string(e.what()), !ContainsSubstring(": Invalid argument"));
    }
}

TEST_CASE("a missing cpu PMU is named as the reason for cpu/... events", "[errors]") {
    pmc_test::FakeSysfs sysfs;
    const std::string empty_root = sysfs.root() + "/software"; // a directory with no PMUs in it
    auto r = pmc::try_parse_event("cpu/event=0x2c/u", empty_root);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.failure().message, ContainsSubstring("no hardware counters"));
    CHECK(r.failure().code.value() == ENOENT);
}

TEST_CASE("Result holds a value or a failure", "[errors]") {
    pmc::Result<int> good(7);
    CHECK(good.ok());
    CHECK(good.value() == 7);
    pmc::Result<int> bad(pmc::make_failure(EMFILE, "too many"));
    CHECK_FALSE(bad);
    CHECK(bad.failure().code == std::errc::too_many_files_open);
    CHECK_THROWS_AS(bad.value(), pmc::error);
}

TEST_CASE("Result's accessors on the wrong alternative raise pmc::error that says so", "[errors]") {
    pmc::Result<int> good(7);
    try {
        (void)good.failure();
        FAIL("failure() of a success returned");
    } catch (const pmc::error& e) {
        CHECK(e.code().value() == EINVAL);
        CHECK_THAT(std::string(e.what()), ContainsSubstring("holds a value"));
        CHECK_THAT(std::string(e.what()), ContainsSubstring("check ok()"));
    }
    pmc::Result<std::string> bad(pmc::make_failure(EMFILE, "too many"));
    for (int how = 0; how < 4; ++how) {
        INFO("accessor " << how);
        try {
            if (how == 0) (void)bad.value();
            if (how == 1) (void)bad->size();
            if (how == 2) (void)*bad;
            if (how == 3) (void)*std::move(bad);
            FAIL("the value of a failure was returned");
        } catch (const pmc::error& e) {
            CHECK(e.code().value() == EMFILE); // the failure itself, not std::bad_variant_access
            CHECK(std::string(e.what()) == "too many");
        }
    }
    const pmc::Result<std::string> text(std::string("x"));
    CHECK(*text == "x");
    CHECK(*pmc::Result<std::string>(std::string("y")) == "y");
}

TEST_CASE("open-failure advice never contradicts itself", "[errors]") {
    pmc_test::FakeSysfs sysfs;
    auto spec = pmc::try_parse_event("msr/tsc/", sysfs.root());
    REQUIRE(spec.ok());
    perf_event_attr attr = spec->attr;
    attr.exclude_kernel = 0;
    // Refused kernel mode, then refused user mode alone: ':u' is not offered as the fix.
    auto both = pmc::detail::explain_open_failure(EACCES, *spec, attr, sysfs.root(), true);
    CHECK_THAT(both.message, !ContainsSubstring("adding ':u'"));
    CHECK_THAT(both.message, ContainsSubstring("perf_event_paranoid"));
    auto first = pmc::detail::explain_open_failure(EACCES, *spec, attr, sysfs.root());
    if (auto level = pmc::detail::perf_event_paranoid(); !level || *level <= 2)
        CHECK_THAT(first.message, ContainsSubstring("adding ':u'"));

    // No PMU: msr/tsc/ is named with the permission it needs, not as something that works for everyone.
    const std::string empty_root = sysfs.root() + "/software";
    auto cycles = pmc::try_parse_event("cycles", sysfs.root());
    REQUIRE(cycles.ok());
    auto none = pmc::detail::explain_open_failure(ENOENT, *cycles, cycles->attr, empty_root);
    CHECK_THAT(none.message, ContainsSubstring("no hardware PMU"));
    CHECK_THAT(none.message, ContainsSubstring("msr/tsc/ where kernel.perf_event_paranoid is at most 1"));
    CHECK_THAT(none.message, !ContainsSubstring("--cache"));
    // A modelled event: the fix names the emulator's flag that answers it, not only `pmc emulate`.
    for (const char* name : {"L1-dcache-load-misses:u", "branch-misses:u"}) {
        auto modelled = pmc::try_parse_event(name, sysfs.root());
        REQUIRE(modelled.ok());
        auto advice = pmc::detail::explain_open_failure(ENOENT, *modelled, modelled->attr, empty_root);
        INFO(advice.message);
        CHECK_THAT(advice.message, ContainsSubstring(name[0] == 'L' ? "`pmc emulate --cache -- PROGRAM`"
                                                                    : "`pmc emulate --branches -- PROGRAM`"));
    }
}
