// SPDX-License-Identifier: MIT
// plot.hpp: the figures, drawn by gnuplot from the CSV files. Each figure's script (latency.gp, bandwidth.gp) is
// written next to its data, so `gnuplot latency.gp` in the report folder redraws it after an edit; without
// gnuplot the data and scripts are still written and the outcome says how to get the pictures.
#pragma once

#include "common.hpp"
#include "regimes.hpp"

#include <string>
#include <vector>

namespace pmc_mem {

struct LatencyResult;
struct BandwidthResult;

struct PlotOutcome {
    bool drawn = false;
    std::vector<std::string> files; ///< what was written (script, PNG, SVG)
    std::string note;               ///< for people: what happened
};

/// latency.gp -> latency.png and latency.svg in `dir` (latency.csv must be there).
PlotOutcome plot_latency(const std::string& dir, const LatencyResult& r, const MachineFacts& m);
/// bandwidth.gp -> bandwidth.png and bandwidth.svg in `dir` (bandwidth.csv must be there). `regimes` (may be
/// null) marks the levels found by the latency experiment.
PlotOutcome plot_bandwidth(const std::string& dir, const BandwidthResult& r, const Regimes* regimes,
                           const MachineFacts& m);

/// The x-axis tics of a log2 size axis: one per octave from `lo` to `hi`, labelled 512, 1K, ..., 256M.
std::string size_tics(double lo, double hi);

} // namespace pmc_mem
