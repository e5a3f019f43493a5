// SPDX-License-Identifier: MIT
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

namespace {
pmc::EventCount counted(std::uint64_t raw, double estimate, double fraction) {
    pmc::EventCount c;
    c.raw = raw;
    c.estimate = estimate;
    c.running_fraction = fraction;
    c.counted = true;
    return c;
}
const std::vector<std::string> g_names{"cycles", "page-faults", "instructions"};
const std::vector<pmc::EventCount> g_counts{counted(1234, 2468, 0.5), counted(77, 77, 1.0), pmc::EventCount{}};
} // namespace

TEST_CASE("describe and the fmt formatters say counted, scaled or not counted", "[report]") {
    CHECK(pmc::describe(g_counts[1]) == "77");
    CHECK(pmc::describe(g_counts[0]) == "2468 (scaled from 1234: counted 50.0 % of the time)");
    CHECK(pmc::describe(g_counts[2]) == "not counted");
    CHECK(fmt::format("{}", g_counts[0]) == pmc::describe(g_counts[0]));
    CHECK(fmt::format("[{:>13}]", g_counts[2]) == "[  not counted]"); // the string_view spec applies
    CHECK(fmt::format("{}", pmc::Reading{42, 2000000, 1000000}) == "42 (enabled 2.000 ms, running 1.000 ms)");
    CHECK(fmt::format("{}", pmc::Reading{42, 2000000, 0}) == "not counted (never on a counter)");
    CHECK(fmt::format("{}", pmc::Reading{0, 0, 0}) == "0 (enabled 0.000 ms, running 0.000 ms)");
}

TEST_CASE("count_table aligns the columns and marks scaled and not-counted rows", "[report]") {
    CHECK(pmc::count_table(g_names, g_counts) == "event                      count                 raw   counted\n"
                                                 "cycles                      2468                1234     50.0%  (scaled)\n"
                                                 "page-faults                   77                  77    100.0%\n"
                                                 "instructions         not counted                   -       0 %\n");
}

TEST_CASE("count_csv quotes names with commas, quotes and line breaks (RFC 4180)", "[report]") {
    CHECK(pmc::count_csv(g_names, g_counts) == "event,count,raw,running_fraction,counted\n"
                                               "cycles,2468,1234,0.500000,true\n"
                                               "page-faults,77,77,1.000000,true\n"
                                               "instructions,,,0,false\n");
    const std::vector<pmc::EventCount> one{counted(5, 5, 1.0)};
    auto row = [&](const std::string& name) {
        const std::string csv = pmc::count_csv({name}, one);
        return csv.substr(csv.find('\n') + 1);
    };
    CHECK(row("cpu/event=0x2c,umask=1/u") == "\"cpu/event=0x2c,umask=1/u\",5,5,1.000000,true\n");
    CHECK(row("say \"hi\"") == "\"say \"\"hi\"\"\",5,5,1.000000,true\n");
    CHECK(row("a\nb") == "\"a\nb\",5,5,1.000000,true\n");
    CHECK(row("a\rb") == "\"a\rb\",5,5,1.000000,true\n");
    CHECK(row("plain") == "plain,5,5,1.000000,true\n");
}

TEST_CASE("write_counts_json writes a not-counted event's count as null", "[report]") {
    pmc::JsonWriter j;
    pmc::write_counts_json(j, g_names, g_counts);
    CHECK(j.str() == R"([{"event":"cycles","counted":true,"count":2468,"raw":1234,"running_fraction":0.5,"scaled":true},)"
                     R"({"event":"page-faults","counted":true,"count":77,"raw":77,"running_fraction":1,"scaled":false},)"
                     R"({"event":"instructions","counted":false,"count":null}])");
}

TEST_CASE("count_csv and write_counts_json mark each count modelled or not when told", "[report]") {
    const std::vector<bool> modelled{false, true, false};
    CHECK(pmc::count_csv(g_names, g_counts, modelled) == "event,count,raw,running_fraction,counted,modelled\n"
                                                         "cycles,2468,1234,0.500000,true,false\n"
                                                         "page-faults,77,77,1.000000,true,true\n"
                                                         "instructions,,,0,false,false\n");
    pmc::JsonWriter j;
    pmc::write_counts_json(j, g_names, g_counts, modelled);
    CHECK(j.str() ==
          R"([{"event":"cycles","counted":true,"count":2468,"raw":1234,"running_fraction":0.5,"scaled":true,"modelled":false},)"
          R"({"event":"page-faults","counted":true,"count":77,"raw":77,"running_fraction":1,"scaled":false,"modelled":true},)"
          R"({"event":"instructions","counted":false,"count":null,"modelled":false}])");
}

TEST_CASE("count_csv marks each count partial or not when told, in a last column after modelled", "[report]") {
    const std::vector<bool> modelled{false, true, false}, partial{true, true, true};
    CHECK(pmc::count_csv(g_names, g_counts, modelled, partial) ==
          "event,count,raw,running_fraction,counted,modelled,partial\n"
          "cycles,2468,1234,0.500000,true,false,true\n"
          "page-faults,77,77,1.000000,true,true,true\n"
          "instructions,,,0,false,false,true\n");
    CHECK(pmc::count_csv(g_names, g_counts, {}, {false, true}) == "event,count,raw,running_fraction,counted,partial\n"
                                                                  "cycles,2468,1234,0.500000,true,false\n"
                                                                  "page-faults,77,77,1.000000,true,true\n"
                                                                  "instructions,,,0,false,false\n");
}

TEST_CASE("JsonWriter writes a char as a one-character string", "[report]") {
    pmc::JsonWriter j;
    j.begin_array().value('x').value('"').value(static_cast<signed char>(-3)).value(std::uint8_t{7}).end_array();
    CHECK(j.str() == R"(["x","\"",-3,7])");
}
