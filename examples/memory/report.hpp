// SPDX-License-Identifier: MIT
// report.hpp: writing an experiment's results into the report folder (CSV, JSON, figure) and the markdown
// summary of pmc-memory.
#pragma once

#include "bandwidth.hpp"
#include "common.hpp"
#include "latency.hpp"
#include "pagefault.hpp"

#include <string>
#include <vector>

namespace pmc_mem {

/// What was written and what people should know about it (a missing gnuplot, ...).
struct Written {
    std::vector<std::string> files;
    std::vector<std::string> notes;
    void add(const Written& w) {
        files.insert(files.end(), w.files.begin(), w.files.end());
        notes.insert(notes.end(), w.notes.begin(), w.notes.end());
    }
};

/// latency.csv, latency.json and (with `plot`) latency.gp/.png/.svg in `dir`.
Written save_latency(const std::string& dir, const LatencyResult& r, const MachineFacts& m, bool plot);
/// bandwidth.csv, bandwidth.json and the figure; `regimes` (may be null) labels the levels.
Written save_bandwidth(const std::string& dir, const BandwidthResult& r, const MachineFacts& m, const Regimes* regimes,
                       bool plot);
/// pagefault.csv and pagefault.json.
Written save_pagefault(const std::string& dir, const PagefaultResult& r, const MachineFacts& m);

/// Extra figures pmc-memory measures beside the sweep: memory bandwidth with every allowed CPU.
struct AllCpuBandwidth {
    unsigned threads = 0;
    std::uint64_t size = 0;
    std::vector<std::pair<std::string, double>> gbps; ///< kernel -> best GB/s
};

struct SummaryInput {
    std::string command;
    double seconds = 0;
    const LatencyResult* latency = nullptr;
    const BandwidthResult* bandwidth = nullptr;
    const PagefaultResult* pagefault = nullptr;
    const AllCpuBandwidth* all_cpus = nullptr;
    std::vector<std::string> notes;
    std::vector<std::string> files; ///< what was written into the report folder: only these are shown or listed
};

/// summary.md: the found regimes, bandwidth per level, page-fault costs, and how they were measured.
std::string summary_markdown(const MachineFacts& m, const SummaryInput& in);

/// summary.md under pmc emulate --cache: the levels found from the model's misses beside its configured ones (`r`:
/// null when --skip latency), and `not_measured`, one line per experiment left out and why.
std::string modelled_summary_markdown(const SummaryInput& in, const ModelledLatencyResult* r,
                                      const std::vector<ModelCheck>& checks, const std::vector<std::string>& not_measured);

/// Prints the files written and the notes to stdout/stderr.
void print_written(const Written& w);

/// The usual ending of main(): a UsageError as every pmc program says a usage error (tools/command_line.hpp), any
/// other exception as "PROGRAM: error: WHAT"; status 1 for both.
int report_exception(const char* program);

} // namespace pmc_mem
