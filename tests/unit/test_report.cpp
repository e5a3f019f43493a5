// perf -vv style printing and the JSON writer.
#include "catch.hpp"

#include <pmc/event.hpp>
#include <pmc/report.hpp>

TEST_CASE("attr_text prints non-zero fields in perf's order, names and layout", "[report]") {
    auto spec = pmc::parse_event("r01cb:up");
    const std::string expected = "perf_event_attr:\n"
                                 "  type                             4\n"
                                 "  size                             128\n"
                                 "  config                           0x1cb\n"
                                 "  exclude_kernel                   1\n"
                                 "  exclude_hv                       1\n"
                                 "  precise_ip                       1\n"
                                 "  exclude_guest                    1\n";
    CHECK(pmc::attr_text(spec.attr) == expected);
}

TEST_CASE("as_perf_stat_opens_it adds exactly perf stat's own fields", "[report]") {
    auto attr = pmc::as_perf_stat_opens_it(pmc::parse_event("page-faults").attr);
    const std::string expected = "perf_event_attr:\n"
                                 "  type                             1\n"
                                 "  size                             128\n"
                                 "  config                           0x2\n"
                                 "  sample_type                      IDENTIFIER\n"
                                 "  read_format                      TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING\n"
                                 "  disabled                         1\n"
                                 "  inherit                          1\n"
                                 "  enable_on_exec                   1\n"
                                 "  exclude_guest                    1\n";
    CHECK(pmc::attr_text(attr) == expected);
}

TEST_CASE("breakpoint fields print under perf's union names", "[report]") {
    auto text = pmc::attr_text(pmc::parse_event("mem:0x1000/8:w").attr);
    CHECK_THAT(text, ContainsSubstring("  bp_type                          2\n"));
    CHECK_THAT(text, ContainsSubstring("  { bp_addr, config1 }             0x1000\n"));
    CHECK_THAT(text, ContainsSubstring("  { bp_len, config2 }              0x8\n"));
}

TEST_CASE("JsonWriter nests, separates and escapes", "[report]") {
    pmc::JsonWriter j;
    j.begin_object().field("a", 1).field("s", std::string("q\"\\\n\t\x01")).key("list").begin_array();
    j.value(true).value(2.5).null().begin_object().end_object().end_array().field("neg", -3).end_object();
    CHECK(j.str() == R"({"a":1,"s":"q\"\\\n\t\u0001","list":[true,2.5,null,{}],"neg":-3})");
}

TEST_CASE("write_attr_json names union fields plainly", "[report]") {
    pmc::JsonWriter j;
    pmc::write_attr_json(j, pmc::parse_event("mem:0x1000/8:w").attr);
    CHECK(j.str() == R"({"type":5,"size":128,"exclude_guest":1,"bp_type":2,"bp_addr":"0x1000","bp_len":"0x8"})");
    pmc::JsonWriter k;
    pmc::write_attr_json(k, pmc::parse_event("r1a8").attr);
    CHECK(k.str() == R"({"type":4,"size":128,"config":"0x1a8","exclude_guest":1})");
}
