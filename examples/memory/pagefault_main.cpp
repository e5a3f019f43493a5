// SPDX-License-Identifier: MIT
// pmc-mem-pagefault: what a page fault costs when the page comes from the disk (major), from the page cache
// (minor), or is fresh anonymous memory -- one byte touched per page -- with the fault counts that show it.
//
// How: a file is written, fsync'd and evicted from the page cache (posix_fadvise DONTNEED, checked with mincore:
// no page resident); read-ahead is turned off (POSIX_FADV_RANDOM, MADV_RANDOM); the file is mapped and one byte
// per page is read. pmc's major-faults and minor-faults software counters count the faults, /proc/self/io's
// read_bytes the bytes read from the device, pmc's wall-time each touch. Then the same file again, now cached,
// in a new mapping (minor faults: the kernel also maps up to 16 cached neighbours per fault, "fault-around"), and
// fresh anonymous memory written once per page. The result is compared with the latency of a load from memory
// (measured here with a random pointer chain, or given with --memory-latency-ns). lmbench's lat_pagefault
// evicts with msync(MS_INVALIDATE), which on Linux drops nothing: it measures minor faults.
#include "common.hpp"
#include "latency.hpp"
#include "pagefault.hpp"
#include "report.hpp"

#include <command_line.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

const char* usage = R"(usage: pmc-mem-pagefault [options]

The cost of major (from the device), minor (page cache) and anonymous page faults, one byte touched per page,
with the fault counts from pmc's software counters.

  --dir DIR            where to create the test file (default: the report folder); it must be on a disk
                       filesystem (not tmpfs) for major faults; the file is unlinked at once
  --file-size SIZE     size of the file and of the anonymous mapping (default 16M)
  --runs N             runs of each case (default 3); the median run (by time per fault) is reported
  --order ORDER        address (default) or random: the order in which pages are touched
  --memory-latency-ns X  the load latency from memory to compare with (default: measured here)
  --out DIR            report folder (default pmc-memory-report)
  --quick              a short run for tests: 4 MiB, 2 runs (not with --file-size, --runs)
  --quiet              no progress lines
  -h, --help           this text

Writes DIR/pagefault.csv and pagefault.json; the table goes to stdout.

Under pmc emulate (--cache too) it measures nothing, since fault counts need perf_event_open and times
are the emulator's: it says so and exits with status 1, writing no report.
)";

int run(int argc, char** argv) {
    using namespace pmc_mem;
    PagefaultOptions o;
    CommonOptions common;
    std::string dir;
    std::string file_size_text, runs_text, order_text, memory_latency_text;
    pmc_cli::CommandLine cl("pmc-mem-pagefault", usage);
    cl.option("--dir", dir, "a folder");
    cl.option("--file-size", file_size_text, "a size such as 16M");
    cl.option("--runs", runs_text, "a number of runs");
    cl.option("--order", order_text, "address or random");
    cl.option("--memory-latency-ns", memory_latency_text, "nanoseconds");
    common.add_to(cl, false);
    if (auto status = cl.parse(argc, argv)) return *status;
    common.check_quick(cl, {"--file-size", "--runs"}, "the file size and runs");
    if (!file_size_text.empty()) o.file_size = parse_size(file_size_text);
    if (!runs_text.empty()) o.runs = static_cast<unsigned>(integer_option("--runs", runs_text, 1, 1000));
    if (cl.count("--order") > 0) {
        if (order_text != "address" && order_text != "random")
            throw UsageError("--order: address or random, not '" + order_text + "'");
        o.random_order = order_text == "random";
    }
    if (cl.count("--memory-latency-ns") > 0) {
        o.memory_latency_ns = number_option("--memory-latency-ns", memory_latency_text, 0.1, 1e6);
        o.memory_latency_source = "given with --memory-latency-ns";
    }
    if (common.quick) {
        o.file_size = 4u << 20;
        o.runs = 2;
    }
    const long page = ::sysconf(_SC_PAGESIZE);
    if (o.file_size < static_cast<std::uint64_t>(page))
        throw UsageError("--file-size must be at least one page (" + std::to_string(page) + " bytes)");
    if (const std::string note = not_measured_under_emulator(
            "pmc-mem-pagefault", "the fault counts need perf_event_open, which QEMU's user mode does not implement, "
                                 "and their time is the emulator's");
        !note.empty()) {
        std::fprintf(stderr, "%s\n", note.c_str());
        return 1;
    }
    probe_output_dir(common.out);
    if (!dir.empty()) probe_test_file_dir(dir);
    o.dir = dir.empty() ? common.out : dir;

    Clock clock;
    Progress progress(common.quiet);
    const MachineFacts machine = machine_facts();
    const PagefaultResult r = run_pagefault(o, clock, progress);
    const Written w = save_pagefault(common.out, r, machine);
    std::printf("%s", pagefault_text(r).c_str());
    print_written(w);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (...) {
        return pmc_mem::report_exception("pmc-mem-pagefault");
    }
}
