// The pmc command as a user runs it: exit statuses, --help, and --json that is valid JSON.
#include "catch.hpp"
#include "json_check.hpp"

#include <pmc/cpu.hpp>
#include <pmc/pmu.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
struct Run {
    std::string out;
    int status = -1;
};
Run run(const std::string& args) {
    Run r;
    const std::string command = std::string(PMC_TOOL_PATH) + " " + args + " 2>&1";
    if (FILE* p = ::popen(command.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
        const int st = ::pclose(p);
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    return r;
}
} // namespace

TEST_CASE("the JSON validator itself", "[tool]") {
    using pmc_test::JsonCheck;
    CHECK(JsonCheck::valid(R"({"a":[1,-2.5e3,true,null,"x\"\u00e9"],"b":{}})"));
    CHECK_FALSE(JsonCheck::valid(R"({"a":1,})"));
    CHECK_FALSE(JsonCheck::valid(R"({"a":01})"));
    CHECK_FALSE(JsonCheck::valid("{\"a\":\"\n\"}"));
    CHECK_FALSE(JsonCheck::valid("[1] [2]"));
}

TEST_CASE("pmc --help, and usage errors", "[tool]") {
    auto help = run("--help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, ContainsSubstring("usage: pmc"));
    for (const char* cmd : {"list --help", "encode --help", "doctor --help"}) CHECK(run(cmd).status == 0);
    CHECK(run("").status == 1);
    CHECK(run("frobnicate").status == 1);
    CHECK(run("--bogus-option list").status == 1);
    CHECK(run("encode").status == 1);
    auto bad = run("encode 'instructions:uu'");
    CHECK(bad.status == 1);
    CHECK_THAT(bad.out, ContainsSubstring("given twice"));
}

TEST_CASE("pmc list and encode, as text and JSON", "[tool]") {
    auto list = run("list");
    CHECK(list.status == 0);
    CHECK_THAT(list.out, ContainsSubstring("instructions-minus-irqs:u"));
    auto list_json = run("list --json");
    CHECK(list_json.status == 0);
    CHECK(pmc_test::JsonCheck::valid(list_json.out));
    auto encode = run("encode --json instructions:u 'bad:::' wall-time");
    CHECK(encode.status == 1); // one string was bad
    CHECK(pmc_test::JsonCheck::valid(encode.out));
    CHECK_THAT(encode.out, ContainsSubstring("\"ok\":false"));
}

TEST_CASE("pmc doctor: one screen, a verdict per line, and the documented exit status", "[tool][doctor]") {
    auto doctor = run("doctor");
    INFO(doctor.out);
    CHECK_THAT(doctor.out, ContainsSubstring("best precision here:"));
    CHECK_THAT(doctor.out, ContainsSubstring(pmc::this_cpu().uarch));
    int lines = 0;
    for (char c : doctor.out) lines += c == '\n';
    CHECK(lines <= 45);
    if (!pmc::has_core_pmu()) {
        CHECK(doctor.status == 3);
        CHECK_THAT(doctor.out, ContainsSubstring("impossible hardware PMU"));
        CHECK_THAT(doctor.out, ContainsSubstring("time and software events only"));
    } else {
        CHECK((doctor.status == 0 || doctor.status == 2));
    }
    auto json = run("doctor --json");
    CHECK(json.status == doctor.status);
    CHECK(pmc_test::JsonCheck::valid(json.out));
    CHECK_THAT(json.out, ContainsSubstring("\"exit_status\":" + std::to_string(doctor.status)));
}

TEST_CASE("pmc count runs a command, counts it from exec to exit, and returns its exit status", "[tool][count]") {
    auto r = run("count -e page-faults -e task-clock -- sh -c 'exit 3'");
    CHECK(r.status == 3);
    CHECK_THAT(r.out, ContainsSubstring("page-faults"));
    CHECK_THAT(r.out, ContainsSubstring("100.0%"));
    auto json = run("count --json -e 'page-faults,minor-faults' -- true");
    CHECK(json.status == 0);
    CHECK(pmc_test::JsonCheck::valid(json.out));
    CHECK_THAT(json.out, ContainsSubstring("\"event\":\"minor-faults\""));
    auto csv = run("count --csv -e context-switches -- true");
    CHECK_THAT(csv.out, ContainsSubstring("event,count,raw,running_fraction,counted\ncontext-switches,"));
    auto missing = run("count -e page-faults -- /nonexistent/program");
    CHECK(missing.status == 127);
    CHECK_THAT(missing.out, ContainsSubstring("cannot run"));
    auto bad = run("count -e 'page-faults:uu' -- true");
    CHECK(bad.status == 1);
    CHECK_THAT(bad.out, ContainsSubstring("given twice"));
    CHECK(run("count").status == 1);
    CHECK(run("list -e page-faults").status == 1); // -e belongs to count
}

TEST_CASE("pmc count agrees with perf stat on the page faults of the same command", "[tool][count]") {
    if (::system("command -v perf >/dev/null 2>&1") != 0) {
        WARN("perf is not installed: the comparison with perf stat is skipped");
        return;
    }
    const std::string work = "dd if=/dev/zero of=/dev/null bs=8M count=4";
    auto ours = run("count --csv -e page-faults -- " + work);
    REQUIRE(ours.status == 0);
    const auto at = ours.out.find("page-faults,");
    REQUIRE(at != std::string::npos);
    const double pmc_faults = std::stod(ours.out.substr(at + 12));
    std::string perf;
    if (FILE* p = ::popen(("LC_ALL=C perf stat -x, -e page-faults -- " + work + " 2>&1 >/dev/null").c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) perf.append(buf, n);
        ::pclose(p);
    }
    const auto line = perf.rfind(",page-faults");
    REQUIRE(line != std::string::npos);
    const auto start = perf.rfind('\n', line);
    const double perf_faults = std::stod(perf.substr(start == std::string::npos ? 0 : start + 1));
    INFO("pmc count " << pmc_faults << ", perf stat " << perf_faults);
    CHECK(pmc_faults == Approx(perf_faults).epsilon(0.05));
}
