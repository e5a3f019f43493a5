// SPDX-License-Identifier: MIT
// pmc sample on a real command (tests/sampler/sample_target.cpp): the bias check, the data summary by variable and
// region, the command's exit status, and bad command lines.
#include "catch.hpp"
#include "command.hpp"
#include "sample_report.hpp"

#include <pmc/detail/json.hpp>

#include <cmath>
#include <regex>
#include <string>

namespace {

const std::string pmc_tool = PMC_TOOL_PATH;
const std::string target = PMC_SAMPLE_TARGET;

pmc::detail::JsonValue parse(const std::string& text) { return pmc_test::parse_sample_report(text); }
using pmc_test::row_samples;
double number(const pmc::detail::JsonValue& v, const char* key) { return pmc_test::json_number(v, key); }

} // namespace

TEST_CASE("pmc sample: page faults of a command, by variable and region, with an exact bias check",
          "[sampler][tool]") {
    for (const char* mode : {"", " --thread"}) {
        INFO("target" << mode);
        const std::string file = "pmc-sample-tool-report.json";
        auto r = pmc_test::run_command(pmc_tool + " sample --json -o " + file + " -- " + target + mode + " 7");
        REQUIRE(r.status == 7); // the command's exit status is pmc's
        r = pmc_test::run_command("cat " + file);
        const auto report = parse(r.out);
        CHECK(number(report, "exit_status") == 7);
        CHECK(report.find("event")->string == "page-faults");
        CHECK(report.find("addresses")->string == "data");
        const auto* bias = report.find("bias");
        REQUIRE(bias);
        CHECK(number(*bias, "estimated") == number(*bias, "exact"));
        CHECK(number(*bias, "lost") == 0);
        CHECK(bias->find("agrees")->boolean);
        // 1024 pages each; the first page of each may have been touched before sampling began (loader, malloc).
        const double global = row_samples(report, "by_variable", "sampled_global");
        CHECK(global >= 1020);
        CHECK(global <= 1024);
        double anonymous = 0;
        for (const auto& row : report.find("by_region")->items)
            if (row.find("kind")->string == "anonymous") anonymous += number(row, "samples");
        CHECK(anonymous >= 2040); // the heap block and the array (its .bss) are anonymous memory
    }
}

TEST_CASE("pmc sample: memory unmapped and mapped again is not credited to the file mapped there before",
          "[sampler][tool]") {
    // perf reports mmaps, not munmaps: the file's record must not name the anonymous memory mapped over it later.
    const std::string file = "pmc-sample-tool-remap.json";
    auto r = pmc_test::run_command(pmc_tool + " sample --json --top 0 -o " + file + " -- " + target + " --remap");
    REQUIRE(r.status == 0);
    r = pmc_test::run_command("cat " + file);
    const auto report = parse(r.out);
    double in_file = 0, anonymous = 0;
    for (const auto& row : report.find("by_region")->items) {
        if (row.find("name")->string.find("pmc-sample-remap-") != std::string::npos) in_file += number(row, "samples");
        if (row.find("kind")->string == "anonymous") anonymous += number(row, "samples");
    }
    INFO(r.out);
    CHECK(in_file <= 8);    // the file had 8 write faults; the 24 later ones are in anonymous memory
    CHECK(anonymous >= 24);
}

TEST_CASE("pmc sample: the text report shows the bias check and warns when the ring overflows", "[sampler][tool]") {
    // One data page per ring and no drain for 2048 faults: most samples are lost, and the report says so.
    // How much is lost depends on how soon pmc drains (load): the verdict must follow the stated rule either way,
    // |estimated - exact| <= 5% of exact + one period (1), and a loss is reported in both verdicts.
    auto r = pmc_test::run_command(pmc_tool + " sample -m 1 -- " + target + " 2>&1");
    INFO(r.out);
    CHECK(r.status == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex(R"(bias check: estimated (\d+) \(\d+ samples[^)]*\), exact (\d+), )"
                                                   R"(ratio [^;]+; lost (\d+),)")));
    const double estimated = std::stod(m[1]), exact = std::stod(m[2]), lost = std::stod(m[3]);
    const bool agrees = std::fabs(estimated - exact) <= 0.05 * exact + 1;
    if (agrees) {
        CHECK_THAT(r.out, ContainsSubstring("agrees within 5% + one period"));
        CHECK_THAT(r.out, !ContainsSubstring("WARNING"));
        if (lost > 0) CHECK_THAT(r.out, ContainsSubstring("samples were lost (the ring was full"));
    } else {
        CHECK_THAT(r.out, ContainsSubstring("WARNING: sampling undercounts"));
        CHECK_THAT(r.out, !ContainsSubstring("agrees within"));
        CHECK(lost > 0); // period 1: nothing else makes the estimate short here
        CHECK_THAT(r.out, ContainsSubstring("lost because the ring buffer was full"));
    }
    CHECK_THAT(r.out, ContainsSubstring("data addresses by region:"));
}

TEST_CASE("pmc sample -F: a command shorter than one period has no sample and no bias warning", "[sampler][tool]") {
    // sleep uses a few ms of task-clock at most (6 ms as nobody at a load of 7, where at 1000 Hz it took a
    // sample and the check rightly warned): at 10 Hz, less than one 100 ms period.
    auto r = pmc_test::run_command(pmc_tool + " sample -e task-clock -F 10 -- sleep 0.2 2>&1");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring("agrees within"));
    CHECK_THAT(r.out, !ContainsSubstring("WARNING"));
    if (r.out.find("(0 samples") != std::string::npos) CHECK_THAT(r.out, ContainsSubstring("too few to judge"));
}

TEST_CASE("pmc sample: bad command lines and events are refused with the reason, the command not run",
          "[sampler][tool]") {
    struct Case {
        const char* args;
        const char* says;
        int status;
    };
    for (const Case c : {Case{"", "no command to sample", 1}, Case{"-c 0 -- true", "positive whole number", 1},
                         Case{"-c 2 -F 3 -- true", "exclude each other", 1}, Case{"-m 3 -- true", "power of two", 1},
                         Case{"-e wall-time -- true", "only kernel perf events", 1},
                         Case{"-e no-such-event -- true", "no-such-event", 1},
                         Case{"--tolerance -1 -- true", "percentage", 1}, Case{"--bogus -- true", "unknown option", 1},
                         Case{"-o /nonexistent/dir/x -- true", "cannot open", 1},
                         Case{"-- /nonexistent/program", "cannot run", 127}}) {
        INFO(c.args);
        auto r = pmc_test::run_command(pmc_tool + " sample " + c.args + " 2>&1");
        CHECK(r.status == c.status);
        CHECK_THAT(r.out, ContainsSubstring(c.says));
    }
    // The command does not run when sampling cannot start.
    auto r = pmc_test::run_command(pmc_tool + " sample -e wall-time -- touch ran-anyway; test -e ran-anyway && echo RAN");
    CHECK_THAT(r.out, !ContainsSubstring("RAN"));
    auto help = pmc_test::run_command(pmc_tool + " sample --help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, ContainsSubstring("usage: pmc sample"));
    CHECK_THAT(help.out, ContainsSubstring("bias check"));
}
