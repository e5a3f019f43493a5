// SPDX-License-Identifier: MIT
// pmc sample --emulate --cache: a whole program's loads sampled from the cache model under QEMU, tested from outside
// with a known pattern (tests/sampler/load_target.cpp): N loads of a named global array in a row give exactly
// N / PERIOD samples attributed to it, on the main thread, on a thread created later and in a fork child, the same in
// every run; the bias check against the model's count; the command's status; the refusals. Skipped, with the reason,
// where pmc emulate cannot run.
#include "catch.hpp"
#include "command.hpp"
#include "sample_report.hpp"
#include "emulator.hpp"
#include "temp_dir.hpp"

#include <pmc/detail/json.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

const std::string pmc_tool = PMC_TOOL_PATH;
const std::string target = PMC_SAMPLE_LOAD_TARGET;

#define REQUIRE_EMULATOR()                                                                                             \
    do {                                                                                                               \
        if (auto why = pmc_test::why_no_emulator(); !why.empty()) PMC_SKIP(why);                                       \
    } while (0)

pmc::detail::JsonValue parse(const std::string& text) { return pmc_test::parse_sample_report(text); }
using pmc_test::row_samples;
double number(const pmc::detail::JsonValue& v, const char* key) { return pmc_test::json_number(v, key); }

} // namespace

TEST_CASE("pmc sample --emulate --cache: N loads of a variable give exactly N / period samples there, on every thread "
          "and child, the same in every run", "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // 200,000 loads on the main thread, 100,000 on a thread started after them, 50,000 in a fork child; period 1000.
    const std::string command = pmc_tool + " sample --emulate --cache -c 1000 --json -o /dev/stdout -- " + target +
                                " 200000 100000 50000 5";
    const auto first = pmc_test::run_command(command);
    INFO(first.out);
    REQUIRE(first.status == 5); // the command's status is pmc's
    const auto report = parse(first.out);
    CHECK(report.find("event")->string == "cpu/mem-loads,ldlat=3/");
    CHECK(report.find("addresses")->string == "data");
    CHECK(row_samples(report, "by_variable", "sampled_by_main") == 200);
    CHECK(row_samples(report, "by_variable", "sampled_by_thread") == 100);
    CHECK(row_samples(report, "by_variable", "sampled_by_child") == 50);
    const auto* bias = report.find("bias");
    REQUIRE(bias);
    CHECK(number(*bias, "period") == 1000);
    CHECK(number(*bias, "estimated") == number(*bias, "samples") * 1000);
    CHECK(number(*bias, "exact") >= 350000);
    CHECK(number(*bias, "lost") == 0);
    CHECK(number(*bias, "malformed") == 0);
    CHECK(bias->find("agrees")->boolean);
    // The rest of the loads (the loader's, the C library's) fall in the program's files and memory: no sample is
    // outside every mapping (the thread's stack, gone before the exit's reading, is named by its mmap).
    CHECK(row_samples(report, "by_region", "unmapped") == 0);
    // The arrays are the program's .bss, which QEMU's maps show in one region with the brk heap after it: named as a
    // native run names it, not "heap" (the region is split at the first break).
    CHECK(row_samples(report, "by_region", "anonymous after " + target + " (its .bss?)") >= 350);
    // Again: the same samples in the arrays (the main thread's join and wait make a few loads more or fewer).
    const auto second = pmc_test::run_command(command);
    CHECK(second.status == 5);
    const auto again = parse(second.out);
    for (const char* name : {"sampled_by_main", "sampled_by_thread", "sampled_by_child"})
        CHECK(row_samples(again, "by_variable", name) == row_samples(report, "by_variable", name));
    // One thread: the same report, byte for byte, in every run.
    const std::string alone = pmc_tool + " sample --emulate --cache -c 1000 --json -o /dev/stdout -- " + target +
                              " 200000 0 0";
    // (Byte for byte in two of at most three runs, as pmc_test::run_agreed says why; the variable's samples are
    // checked in every run.)
    bool agreed = false;
    std::vector<pmc_test::CommandResult> runs;
    pmc_test::run_agreed(alone, &agreed, &runs);
    for (const auto& run : runs) {
        INFO(run.out);
        CHECK(run.status == 0);
        CHECK(row_samples(parse(run.out), "by_variable", "sampled_by_main") == 200);
    }
    CHECK(agreed);
}

TEST_CASE("pmc sample --emulate: a program executed in the same process is sampled as itself, and a program's own "
          "load Sampler is refused naming why", "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // sh runs the target, then executes it in its own process: both images' arrays are named (100 + 50 samples).
    const auto r = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 1000 --json -o /dev/stdout -- sh -c '" +
                                         target + " 100000 0 0; exec " + target + " 50000 0 0 7'");
    INFO(r.out);
    CHECK(r.status == 7);
    const auto report = parse(r.out);
    CHECK(row_samples(report, "by_variable", "sampled_by_main") == 150);
    CHECK(report.find("bias")->find("agrees")->boolean);
    // Every thread is sampled already: the program's own sampler gets the reason, not a second sampler.
    const auto own = pmc_test::run_command(pmc_tool + " sample --emulate --cache -- " + PMC_EMULATE_TARGET +
                                           " load-samples 16384 1000 10 2>&1");
    CHECK(own.status == 1);
    CHECK_THAT(own.out, ContainsSubstring("`pmc sample --emulate` samples every thread of this program already"));
}

TEST_CASE("pmc sample --emulate: a run with fewer loads than the period has no samples, says why, and its empty "
          "rows are data addresses", "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // The rows were headed "instruction addresses" and the JSON said "addresses":"instruction" when no sample came.
    const auto text = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 100000000 -- " + target +
                                            " 1000 0 0 2>&1");
    INFO(text.out);
    CHECK(text.status == 0); // the loads were counted (the bias check's exact count): nothing is missing
    CHECK_THAT(text.out, ContainsSubstring("WARNING: no samples: the command made fewer than 100000000 loads"));
    CHECK_THAT(text.out, ContainsSubstring("\ndata addresses by region:"));
    CHECK_THAT(text.out, !ContainsSubstring("instruction addresses"));
    const auto json = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 100000000 --json -o /dev/stdout "
                                            "-- " + target + " 1000 0 0");
    INFO(json.out);
    CHECK(json.status == 0);
    CHECK_THAT(json.out, ContainsSubstring("\"addresses\":\"data\""));
}

TEST_CASE("pmc sample --emulate: the text report, and ldlat above the L1's latency counts none of the L1 hits",
          "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    const auto text = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 500 -- " + target + " 100000 0 0 2>&1");
    INFO(text.out);
    CHECK(text.status == 0);
    CHECK_THAT(text.out, ContainsSubstring("pmc sample: 'cpu/mem-loads,ldlat=3/', a sample every 500 events over"));
    CHECK_THAT(text.out, ContainsSubstring("agrees within 5% + one period"));
    CHECK_THAT(text.out, Catch::Matchers::Matches("(.|\n)*\n +200 +[0-9.]+% +[0-9]+ +variable +sampled_by_main  \\(mean "
                                                  "weight [0-9.]+\\)\n(.|\n)*"));
    CHECK_THAT(text.out, ContainsSubstring("note: modelled (pmc sample --emulate): every 500th load"));
    // ldlat=30: a 4,096-entry array of 32 KiB stays in D1 after its first pass, so its loads (4 cycles) are not
    // candidates; only the first pass's misses are.
    const auto slow = pmc_test::run_command(pmc_tool + " sample --emulate --cache -e 'cpu/mem-loads,ldlat=30/' -c 1 "
                                            "--json -o /dev/stdout -- " + target + " 100000 0 0");
    INFO(slow.out);
    REQUIRE(slow.status == 0);
    CHECK(row_samples(parse(slow.out), "by_variable", "sampled_by_main") <= 4096 / 8);
}

TEST_CASE("pmc sample --emulate: loads of a malloc'd block fall in the heap, as natively (QEMU's maps leave it unnamed)",
          "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    const auto r = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 1000 --json -o /dev/stdout -- " +
                                         target + " heap 100000");
    INFO(r.out);
    REQUIRE((r.status == 0 || r.status == 3));
    if (r.status == 3) {
        WARN("malloc's block is not in the brk heap under this QEMU's layout: nothing to name [heap]");
        return;
    }
    const auto report = parse(r.out);
    // 100 samples of the block's loads, and a few of malloc's own.
    CHECK(row_samples(report, "by_region", "heap") >= 100);
    CHECK(row_samples(report, "by_region", "heap") <= 110);
}

TEST_CASE("pmc sample --emulate: memory mapped and unmapped between the readings of the maps is named as natively "
          "(anonymous memory, a file by its path), in a fork child and an exec'd program too", "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // The target maps 32 KiB of anonymous memory, loads it 100,000 times and unmaps it, then does the same with a
    // file (likely at the same address), moved by mremap onto reserved anonymous memory: both are gone before the
    // exit's reading of the maps, so only the program's mapping calls, replayed in time order with the samples, name
    // them.
    const pmc_test::TempDir dir;
    const std::string file = dir.file("mapped-data");
    const auto report_of = [&](const std::string& command) {
        const auto r = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 1000 --json -o /dev/stdout -- " +
                                             command);
        INFO(command);
        INFO(r.out);
        REQUIRE(r.status == 0);
        return parse(r.out);
    };
    // The same program with no loads in the mappings (a count as long: the arguments' length moves the C library's
    // loads): what else is anonymous.
    const auto none = report_of(target + " mappings 000000 " + file);
    CHECK(row_samples(none, "by_region", file) == 0);
    const double other_anonymous = row_samples(none, "by_region", "anonymous");
    const std::string loads = target + " mappings 100000 " + file;
    for (const std::string& command : {loads, loads + " fork", "sh -c '" + loads + "; true'"}) {
        INFO(command);
        const auto report = report_of(command);
        CHECK(row_samples(report, "by_region", file) == 100);
        CHECK(row_samples(report, "by_region", "unmapped") == 0);
        if (command == loads) { // (the loops' setup adds 2 loads to the 200,000: a sample elsewhere may move by one)
            CHECK(row_samples(report, "by_region", "anonymous") >= other_anonymous + 99);
            CHECK(row_samples(report, "by_region", "anonymous") <= other_anonymous + 101);
        } else {
            CHECK(row_samples(report, "by_region", "anonymous") >= 100);
        }
    }
}

TEST_CASE("pmc sample --emulate: what the model cannot sample is refused with the fix, the command not run",
          "[sampler][tool][emulate]") {
    const std::string marker = "pmc-sample-emulated-ran";
    struct Case {
        const char* args;
        const char* says;
    };
    const Case cases[] = {
        {"--emulate", "--emulate samples loads from the cache model, and needs it: give --cache"},
        {"--cache", "--cache, --qemu and --cpu shape the emulator's run: give --emulate with them"},
        {"--cpu Haswell", "--cache, --qemu and --cpu shape the emulator's run: give --emulate with them"},
        {"--D1 32768,8,64", "--I1, --D1, --L2 and --LL shape the emulator's run: give --emulate with them"},
        {"--emulate --cache -e page-faults", "under --emulate there is no 'page-faults' to sample: QEMU implements no "
                                            "perf events"},
        {"--emulate --cache -e ibs_op//", "AMD IBS samples every Nth operation"},
        {"--emulate --cache -F 100", "-F: under --emulate the model takes every Nth load exactly: give a period with -c"},
        {"--emulate --cache -m 8", "-m sizes the kernel's ring buffers, and --emulate uses none"},
        {"--emulate --cache=bogus", "--cache=bogus: --cache alone models the pinned geometry"},
        {"--emulate --cache --D1 100,3,64", "--D1=100,3,64"},
    };
    for (const Case& c : cases) {
        INFO(c.args);
        const auto r = pmc_test::run_command(pmc_tool + " sample " + c.args + " -- touch " + marker + " 2>&1");
        CHECK(r.status == 1);
        CHECK_THAT(r.out, ContainsSubstring(c.says));
        CHECK(pmc_test::run_command("test -e " + marker).status != 0);
    }
    REQUIRE_EMULATOR();
    const auto missing = pmc_test::run_command(pmc_tool + " sample --emulate --cache -- /nonexistent/program 2>&1");
    CHECK(missing.status == 127);
    CHECK_THAT(missing.out, ContainsSubstring("cannot run '/nonexistent/program'"));
    // A command killed by another process before it reaches its exit or writes a batch leaves no samples: not a
    // report of nothing with status 0 (pmc passes its SIGTERM on to the command).
    const auto killed = pmc_test::run_command("sh -c '" + pmc_tool + " sample --emulate --cache -- sleep 30 & pid=$!; "
                                              "sleep 2; kill -TERM $pid; wait $pid' 2>&1");
    CHECK(killed.status == 143);
    CHECK_THAT(killed.out, ContainsSubstring("left no samples"));
    // One that kills itself keeps the samples it took (written at its kill call): the report says interrupted.
    const auto itself = pmc_test::run_command(pmc_tool + " sample --emulate --cache -- sh -c 'kill -KILL $$' 2>&1");
    CHECK(itself.status == 137);
    CHECK_THAT(itself.out, ContainsSubstring("interrupted: 1 of the 1 emulated process never reached its exit (the "
                                             "command ended by SIGKILL)"));
}

TEST_CASE("under pmc emulate --cache a load Sampler opened with inherit follows the threads created after it, "
          "each from its first load", "[emulate][cache][sampling]") {
    REQUIRE_EMULATOR();
    // 100,000 loads of an array on the opening thread and on a thread created after the open, period 1000: exactly
    // 100 samples in each; none from a thread running before the open; two threads in the samples; one period of
    // allowance per thread; the arrays' the same in two runs.
    const std::string command = "'" + pmc_tool + "' emulate --cache -- '" + target + "' inherit 100000 1000";
    const auto a = pmc_test::run_command(command);
    INFO(a.out);
    CHECK(a.status == 0);
    CHECK_THAT(a.out, ContainsSubstring("main 100, thread 100, before 0; threads 2; samples "));
    CHECK_THAT(a.out, ContainsSubstring("allowance 2000; agrees"));
    // Again: the arrays' samples are the same (the joins make a few loads elsewhere more or fewer).
    const auto b = pmc_test::run_command(command);
    CHECK_THAT(b.out, ContainsSubstring("main 100, thread 100, before 0; threads 2; samples "));
}

TEST_CASE("pmc sample --emulate samples the run pmc count --emulate counts: the same heap at main, the same mmap "
          "area, the same loads but for the preload library's constant", "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // `break BLOCKS` prints sbrk(0) and where an mmap lands at main, then mallocs and frees BLOCKS blocks: a malloc
    // in pmc's preload library before main (its reading of the maps) moved the break by 68 KiB and the loads by
    // hundreds; its buffer mapped and unmapped instead moved every mapping of the program 64 KiB up on QEMU 7.2,
    // whose mappings only go up (0x4002fae000 under pmc sample, 0x4002f9e000 under pmc count).
    long long added[2] = {0, 0};
    const char* blocks[2] = {"0", "3000"};
    for (int i = 0; i < 2; ++i) {
        const std::string command = target + " break " + blocks[i];
        INFO(command);
        const auto counted = pmc_test::run_command(pmc_tool + " count --emulate --cache -e L1-dcache-loads -- " +
                                                   command + " 2>&1");
        INFO(counted.out);
        REQUIRE(counted.status == 0);
        const pmc_test::TempDir dir;
        const std::string json = dir.file("report.json");
        const auto printed = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 1000 --json -o " + json +
                                                   " -- " + command);
        INFO(printed.out);
        REQUIRE(printed.status == 0);
        std::ifstream in(json);
        const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        // The break at main, as the program printed it (the count's output holds it too).
        const std::string line = printed.out.substr(0, printed.out.find('\n'));
        REQUIRE(line.rfind("break at main 0x", 0) == 0);
        REQUIRE_THAT(line, ContainsSubstring(", mmap at main 0x"));
        CHECK_THAT(counted.out, ContainsSubstring(line + "\n")); // the break and the mmap, as pmc count's run had them
        const auto at = counted.out.find("L1-dcache-loads");
        REQUIRE(at != std::string::npos);
        const long long count = std::stoll(counted.out.substr(at + 15));
        const long long exact = static_cast<long long>(number(*parse(report).find("bias"), "exact"));
        added[i] = exact - count;
    }
    // What pmc sample's preload library adds (its two readings of the maps, at the start and at exit()): the same
    // loads whatever the program's heap does. Its size depends on the program and its environment (from a shell 337
    // on QEMU 7.2 and 394 on QEMU 10, whose vDSO serves the clock), so only a broad range here.
    CHECK(added[0] == added[1]);
    CHECK(added[0] >= 200);
    CHECK(added[0] <= 600);
}

/// `pmc sample --emulate` of the load target's MODE after 100,000 loads of sampled_by_main, a mode that ends the
/// program by a signal: the command's status is `status`, and the 100 samples it took at period 1000 are all kept.
static void check_samples_kept_at_death(const std::string& mode, int status) {
    const auto r = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 1000 --json -o /dev/stdout -- " +
                                         target + " " + mode + " 100000");
    INFO(r.out);
    CHECK(r.status == status);
    const auto report = parse(r.out);
    CHECK(row_samples(report, "by_variable", "sampled_by_main") == 100);
}

TEST_CASE("pmc sample --emulate: a program that aborts keeps every sample it took (fewer than a batch)",
          "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // 100,000 loads of sampled_by_main, then abort(): 100 samples there at period 1000, and fewer than the 4,096 the
    // plugin writes at once. QEMU 7.2 ends the process without the plugin's exit callback; the plugin writes the
    // pending samples when the program sends itself the signal (abort's tgkill).
    check_samples_kept_at_death("abort", 134); // 128 + SIGABRT, as the command ended
}

TEST_CASE("pmc sample --emulate: a program that used up its file descriptors still has its maps read at its exit",
          "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // 100,000 loads, then /dev/null opened until EMFILE, then exit(): the preload library's reading of the maps at
    // exit needs descriptors; it frees the ones it kept at the start (it lost the reading, silently).
    const auto r = pmc_test::run_command(pmc_tool + " sample --emulate --cache -c 1000 --json -o /dev/stdout -- " +
                                         target + " exhaust 100000");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, ContainsSubstring(" descriptors, then EMFILE"));
    const auto report = parse(r.out.substr(r.out.find('{')));
    CHECK(row_samples(report, "by_variable", "sampled_by_main") == 100);
    std::string notes;
    for (const auto& n : report.find("notes")->items) notes += n.string + "\n";
    INFO(notes);
    CHECK_THAT(notes, ContainsSubstring("at its exit() (2 readings)"));
    CHECK_THAT(notes, !ContainsSubstring("could not read its memory map"));
}

TEST_CASE("pmc sample --emulate: a program that a caught fault ends keeps every sample it took (fewer than a batch)",
          "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // 100,000 loads of sampled_by_main, then a SIGSEGV whose handler resets the action to the default and returns:
    // the fault recurs and ends the process, with no kill call and, on QEMU 7.2, no exit callback. pmc's preload
    // library sees the handler return with the default action and has the plugin write its samples first.
    check_samples_kept_at_death("caught-fault", 139); // 128 + SIGSEGV, as the command ended
}

TEST_CASE("pmc sample --emulate: a period that aliases with a regular pattern is named by the level check, and the "
          "default period is a prime", "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    // 2,000,000 reads of a 1 MiB array in order, 8 bytes apart: 8 loads a line, the first a D1 miss. Period 1000 (8 x
    // 125) takes every sample at one offset in the line: all hits or all misses, where the model has 1 in 8 misses.
    const auto at = [&](const std::string& period) {
        const auto r = pmc_test::run_command(pmc_tool + " sample --emulate --cache " + period +
                                             " --json -o /dev/stdout -- " + target + " stride 2000000");
        INFO(r.out);
        REQUIRE(r.status == 0);
        return parse(r.out);
    };
    const auto round = at("-c 1000");
    const auto* levels = round.find("level_check");
    REQUIRE(levels);
    CHECK_FALSE(levels->find("agrees")->boolean);
    CHECK_FALSE(round.find("bias")->find("agrees")->boolean); // (the rows' estimates would carry the alias)
    CHECK_THAT(round.find("bias")->find("warning")->string,
               ContainsSubstring("the period (1000) may alias with the program's access pattern"));
    CHECK_THAT(round.find("bias")->find("warning")->string, ContainsSubstring("try a prime period"));
    // The default: 1009, and the samples' L1 share is the model's.
    const auto prime = at("");
    CHECK(number(*prime.find("bias"), "period") == 1009);
    CHECK(prime.find("level_check")->find("agrees")->boolean);
    CHECK(prime.find("bias")->find("agrees")->boolean);
    const double model = number(*prime.find("level_check"), "l1_share_model");
    CHECK(model > 0.85);
    CHECK(model < 0.95);
}

TEST_CASE("pmc sample --emulate: period=N in the event sets the period, and an ldlat above the model's largest latency is "
          "refused before the run", "[sampler][tool][emulate]") {
    REQUIRE_EMULATOR();
    const auto r = pmc_test::run_command(pmc_tool + " sample --emulate --cache -e 'cpu/mem-loads,period=500/' --json "
                                         "-o /dev/stdout -- " + target + " 100000 0 0");
    INFO(r.out);
    REQUIRE(r.status == 0);
    const auto report = parse(r.out);
    CHECK(number(*report.find("bias"), "period") == 500);
    CHECK(row_samples(report, "by_variable", "sampled_by_main") == 200);
    // Two periods that disagree (-c and period=) are refused, not one of them taken quietly; the same one twice is taken.
    const auto twice = pmc_test::run_command(pmc_tool + " sample --emulate --cache -e 'cpu/mem-loads,period=7/' -c 9 "
                                             "-o /dev/null -- " + target + " 1000 0 0 2>&1");
    INFO(twice.out);
    CHECK(twice.status == 1);
    CHECK_THAT(twice.out, ContainsSubstring("the period is given twice, -c 9 and period=7"));
    CHECK(pmc_test::run_command(pmc_tool + " sample --emulate --cache -e 'cpu/mem-loads,period=7/' -c 7 -o /dev/null -- " +
                                target + " 1000 0 0").status == 0);
    // No load can reach an ldlat above 200 (memory's): a usage error, status 1, and the command does not run (it
    // warned and exited 0 with no samples).
    const pmc_test::TempDir dir;
    const std::string marker = dir.file("ran");
    const auto none = pmc_test::run_command(pmc_tool + " sample --emulate --cache -e 'cpu/mem-loads,ldlat=201/' -- " +
                                            "touch " + marker + " 2>&1");
    INFO(none.out);
    CHECK(none.status == 1);
    CHECK_THAT(none.out, ContainsSubstring("ldlat=201 is above the model's largest latency (200 cycles"));
    CHECK_THAT(none.out, ContainsSubstring("Give ldlat=200 or less"));
    CHECK(pmc_test::run_command("test -e " + marker).status != 0);
    // 200 itself is taken: the loads served by memory.
    const auto memory = pmc_test::run_command(pmc_tool + " sample --emulate --cache -e 'cpu/mem-loads,ldlat=200/' -c 1 "
                                              "-o /dev/null -- " + target + " 1000 0 0 2>&1");
    INFO(memory.out);
    CHECK(memory.status != 1);
    // --inclusion is listed in the help.
    CHECK_THAT(pmc_test::run_command(pmc_tool + " sample --help").out, ContainsSubstring("--inclusion cachegrind|strict"));
}
