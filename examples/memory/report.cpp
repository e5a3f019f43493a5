// SPDX-License-Identifier: MIT
// report.cpp: see report.hpp.
#include "report.hpp"

#include "plot.hpp"

#include <command_line.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace pmc_mem {

Written save_latency(const std::string& dir, const LatencyResult& r, const MachineFacts& m, bool plot) {
    Written w;
    make_directories(dir);
    write_text(join_path(dir, "latency.csv"), latency_csv(r));
    pmc::JsonWriter json;
    write_latency_json(json, r, m);
    write_text(join_path(dir, "latency.json"), json.str() + "\n");
    w.files = {join_path(dir, "latency.csv"), join_path(dir, "latency.json")};
    if (plot) {
        const PlotOutcome p = plot_latency(dir, r, m);
        w.files.insert(w.files.end(), p.files.begin(), p.files.end());
        if (!p.drawn) w.notes.push_back(p.note);
    }
    return w;
}

Written save_bandwidth(const std::string& dir, const BandwidthResult& r, const MachineFacts& m, const Regimes* regimes,
                       bool plot) {
    Written w;
    make_directories(dir);
    write_text(join_path(dir, "bandwidth.csv"), bandwidth_csv(r));
    pmc::JsonWriter json;
    write_bandwidth_json(json, r, m, regimes);
    write_text(join_path(dir, "bandwidth.json"), json.str() + "\n");
    w.files = {join_path(dir, "bandwidth.csv"), join_path(dir, "bandwidth.json")};
    if (plot) {
        const PlotOutcome p = plot_bandwidth(dir, r, regimes, m);
        w.files.insert(w.files.end(), p.files.begin(), p.files.end());
        if (!p.drawn) w.notes.push_back(p.note);
    }
    return w;
}

Written save_pagefault(const std::string& dir, const PagefaultResult& r, const MachineFacts& m) {
    Written w;
    make_directories(dir);
    write_text(join_path(dir, "pagefault.csv"), pagefault_csv(r));
    pmc::JsonWriter json;
    write_pagefault_json(json, r, m);
    write_text(join_path(dir, "pagefault.json"), json.str() + "\n");
    w.files = {join_path(dir, "pagefault.csv"), join_path(dir, "pagefault.json")};
    return w;
}

void print_written(const Written& w) {
    std::string files;
    for (const auto& f : w.files) files += (files.empty() ? "" : " ") + f;
    std::printf("wrote: %s\n", files.c_str());
    for (const auto& n : w.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
}

int report_exception(const char* program) {
    try {
        throw;
    } catch (const UsageError& e) {
        return pmc_cli::usage_error(program, e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        return 1;
    }
}

namespace {

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

/// The figure `name`.png embedded where it was drawn; where only its script was written, how to draw it.
std::string figure_markdown(const SummaryInput& in, const std::string& name, const std::string& alt) {
    auto wrote = [&](const std::string& file) {
        return std::any_of(in.files.begin(), in.files.end(), [&](const std::string& f) { return base_name(f) == file; });
    };
    if (wrote(name + ".png")) return "![" + alt + "](" + name + ".png)\n\n";
    if (wrote(name + ".gp"))
        return "(No figure was drawn: see the notes below. `gnuplot " + name + ".gp` in this folder draws it from " +
               name + ".csv.)\n\n";
    return "";
}

/// The "Files" section: what this run wrote, with what each holds.
std::string files_markdown(const std::vector<std::string>& files) {
    auto what = [](const std::string& f) -> std::string {
        const std::string ext = f.substr(f.rfind('.') + 1);
        const std::string stem = f.substr(0, f.rfind('.'));
        if (f == "latency.csv" || f == "latency.json") return "every point: min, median, max of the runs; the regimes";
        if (f == "latency-modelled.csv") return "each size's modelled loads, misses and cost per load";
        if (ext == "csv" || ext == "json") return "the " + stem + " data";
        if (ext == "png" || ext == "svg") return "the figure";
        if (ext == "gp") return "the gnuplot script of the figure: run `gnuplot " + f + "` here to redraw it";
        if (f == "summary.md") return "this page";
        return "";
    };
    std::string s;
    for (const auto& path : files) {
        const std::string f = base_name(path);
        const std::string w = what(f);
        s += "- `" + f + "`" + (w.empty() ? "" : ": " + w) + "\n";
    }
    return s;
}

const LatencyCurve* curve_of(const LatencyResult& r, Chain c) {
    for (const auto& curve : r.curves)
        if (curve.chain == c) return &curve;
    return nullptr;
}

/// The smallest and largest working set measured (on any chain).
std::uint64_t first_size(const LatencyResult& r) {
    std::uint64_t s = 0;
    for (const auto& c : r.curves)
        if (!c.points.empty() && (s == 0 || c.points.front().size < s)) s = c.points.front().size;
    return s;
}
std::uint64_t last_size(const LatencyResult& r) {
    std::uint64_t s = 0;
    for (const auto& c : r.curves)
        if (!c.points.empty()) s = std::max(s, c.points.back().size);
    return s;
}

} // namespace

std::string summary_markdown(const MachineFacts& m, const SummaryInput& in) {
    std::string s = "# Memory hierarchy report (pmc-memory)\n\n";
    s += "`" + in.command + "` took " + fmt::format("{:.0f}", in.seconds) + " s. " + machine_text(m) + "\n\n";
    // Reasons to distrust the levels come first, where nobody reads past them.
    if (in.latency)
        for (std::string w : in.latency->regimes.warnings) {
            if (!w.empty() && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
            s += "> **Warning:** " + w + ".\n\n";
        }

    if (const LatencyResult* l = in.latency) {
        s += "## Load latency and the levels found in it\n\n" + figure_markdown(in, "latency", "load latency");
        s += fmt::format("Back-to-back dependent loads (`p = *p`, 100 per loop iteration) through a circular chain "
                         "with one element every {} bytes, over working sets from {} to {}, timed in {} runs of about {} ms "
                         "per size (short, so that most runs miss the periodic interruptions of a VM) spread over {} "
                         "sweeps over all sizes, each sweep with the chain on other physical pages; a point is the "
                         "median over the sweeps of each sweep's fastest run (latency.csv also has the fastest and "
                         "the median of all runs). {}. {}; {}.\n\n",
                         l->options.stride, size_text(static_cast<double>(first_size(*l))),
                         size_text(static_cast<double>(last_size(*l))), l->options.reps, num(l->options.rep_ms, 3),
                         l->options.sweeps,
                         l->pin_note, "Pages: " + l->pages_note, l->cycles_note);
        s += "The levels below were found from the " + std::string(chain_name(l->regimes_chain)) +
             "-chain curve alone, without cpuid or sysfs (docs/memory.md, installed as share/doc/pmc/memory.md: "
             "plateaus of points within ±10 % of each other, levels at least 1.5× apart, each boundary where the "
             "curve is halfway up its step on the log-latency axis); the last column is what the CPU reports, "
             "for comparison: it says where a level found is more than 2× off the reported size or lies inside the "
             "reported last-level cache (the warnings above say why and what to do).\n\n";
        s += regimes_markdown(l->regimes, m) + "\n";
        for (const auto& st : l->regimes.minor_steps)
            s += fmt::format("- Minor step inside a level (not a new level, ratio below 1.5): ×{:.2f} ({} → "
                             "{}) near {}, between the measured sizes {} and {}.\n",
                             st.ratio(), duration_text(st.latency_from), duration_text(st.latency_to), size_text(st.size), size_label(st.below),
                             size_label(st.above));
        for (const auto& n : l->regimes.notes) s += "- Note: " + n + ".\n";
        s += fmt::format("- Loop overhead: an empty loop with the same trip count costs {:.4f} ns per load, {} % "
                         "of an L1 hit through a one-element chain ({}): not subtracted.\n",
                         l->loop_ns_per_load, num(100 * l->loop_ns_per_load / l->l1_ns_per_load, 2),
                         duration_text(l->l1_ns_per_load));
        const LatencyCurve* fwd = curve_of(*l, Chain::forward);
        const LatencyCurve* rnd = curve_of(*l, Chain::random);
        if (fwd && rnd && !fwd->points.empty() && !rnd->points.empty())
            s += fmt::format("- The forward chain (lmbench3's `lat_mem_rd` pattern, which prefetchers follow) costs "
                             "{} per load at {} where the random chain costs {}: sequential "
                             "strides measure the prefetcher, not the latency.\n",
                             duration_text(fwd->points.back().latency_ns()),
                             size_label(static_cast<double>(fwd->points.back().size)),
                             duration_text(rnd->points.back().latency_ns()));
        s += "\n";
    }

    if (const BandwidthResult* b = in.bandwidth) {
        s += "## Bandwidth\n\n" + figure_markdown(in, "bandwidth", "bandwidth");
        s += fmt::format("One thread, {} runs of about {} ms per kernel and size, the best run shown (the median "
                         "is in bandwidth.csv). GB/s = 10⁹ bytes counted per second. Bytes counted per pass over a "
                         "working set of W bytes: read W, write W, read-modify-write 2W, copy W (W/2 read + W/2 "
                         "written, as STREAM counts), memcpy W, memset W. Stores that are not non-temporal also read "
                         "each line first (write-allocate), which the counts leave out. Vector kernels: {}.\n\n",
                         b->options.reps, num(b->options.rep_ms, 3), b->isa.empty() ? "none" : b->isa);
        if (in.latency) {
            s += "GB/s per level (median over the sizes well inside each level found above):\n\n";
            s += level_bandwidth_markdown(bandwidth_per_level(*b, in.latency->regimes)) + "\n";
        }
        if (b->values.size > 0) {
            s += fmt::format("memset writes what it is given, and what is written can change the speed: memset-0 "
                             "writes zeros (as bzero and calloc do), memset a non-zero byte. The same stores with "
                             "zeros and with other bytes at W = {} (best GB/s; {}):\n\n",
                             size_text(static_cast<double>(b->values.size)), b->values.faults_note);
            s += value_probe_markdown(b->values) + "\n" + value_probe_findings(b->values) +
                 " Where only the stores that write whole lines without reading them first are faster with zeros, "
                 "the difference arises below the core, on the way to memory, where no core PMU event sees it "
                 "(section 3 of docs/memory.md, installed as share/doc/pmc/memory.md).\n\n";
        }
        if (in.all_cpus && !in.all_cpus->gbps.empty()) {
            s += fmt::format("With {} threads on {} CPUs at W = {} (memory): ", in.all_cpus->threads,
                             in.all_cpus->threads, size_text(static_cast<double>(in.all_cpus->size)));
            for (std::size_t i = 0; i < in.all_cpus->gbps.size(); ++i)
                s += fmt::format("{}{} {:.1f} GB/s", i ? ", " : "", in.all_cpus->gbps[i].first,
                                 in.all_cpus->gbps[i].second);
            s += ".\n\n";
        }
    }

    if (const PagefaultResult* p = in.pagefault) {
        s += "## Page faults\n\n";
        s += "The file: " + p->fs.text() + ", " + size_text(static_cast<double>(p->options.file_size)) + ", " +
             std::to_string(p->options.runs) + " runs per case; each row is one run, the median run by time per "
             "fault" + (p->options.runs % 2 ? "" : " (of an even number, the faster middle one)") + ".\n\n";
        s += pagefault_markdown(*p) + "\n";
        for (const auto& c : p->cases) s += "- **" + c.name + "**: " + c.description + ". Check: " + c.check + ".\n";
        s += fmt::format("- A load from memory for the comparison: {} ({}). Each touch is timed with "
                         "pmc's wall-time (an empty interval costs {:.0f} ns, included).\n",
                         duration_text(p->memory_latency_ns), p->memory_latency_source, p->timer_ns);
        for (const auto& c : p->cases)
            if (c.name == "major")
                s += fmt::format("- So one major fault costs as much as {:.0f} dependent loads from memory; per "
                                 "byte, a page read by a fault costs {}, a 64-byte line loaded from memory {} per "
                                 "byte.\n",
                                 c.median_ns_per_fault() / p->memory_latency_ns,
                                 duration_text(c.median_ns_per_page() / static_cast<double>(p->page_size)),
                                 duration_text(p->memory_latency_ns / 64));
        for (const auto& n : p->notes) s += "- Note: " + n + ".\n";
        s += "\n";
    }

    for (const auto& n : in.notes) s += "- " + n + "\n";
    s += "\n## Files\n\n" + files_markdown(in.files) +
         "\nHow each experiment works: docs/memory.md, installed as share/doc/pmc/memory.md.\n";
    return s;
}

std::string modelled_summary_markdown(const SummaryInput& in, const ModelledLatencyResult* r,
                                      const std::vector<ModelCheck>& checks, const std::vector<std::string>& not_measured) {
    std::string s = "# Memory hierarchy report (pmc-memory), under pmc's cache model\n\n";
    s += "`" + in.command + "` took " + fmt::format("{:.0f}", in.seconds) + " s under `pmc emulate --cache` (QEMU " +
         "user mode): the caches below are pmc's model (" + modelled_geometry() + "), not this machine's, and " +
         "time under the emulator measures QEMU, not memory.\n\n";
    if (r) {
        s += "## Levels found from the model's misses\n\n";
        s += fmt::format("A random pointer chain over working sets from {} to {} ({} per octave), walked once to warm "
                         "and once between two readings of the modelled L1-dcache-load-misses, LLC-loads and "
                         "LLC-load-misses. A size's cost per load is built from its miss rates (an L1 hit 1, +{:g} a "
                         "D1 miss, {}+{:g} an LL miss), and the same detector as for time finds the levels in that "
                         "curve, the last cache level named LL as Cachegrind names it (latency-modelled.csv has the "
                         "counts).\n\n",
                         size_text(static_cast<double>(r->points.front().size)),
                         size_text(static_cast<double>(r->points.back().size)), r->per_octave, ModelledCost::d1_miss,
                         r->caches.size() > 2 ? fmt::format("+{:g} an L2 miss, ", ModelledCost::l2_miss)
                                              : std::string(),
                         ModelledCost::ll_miss);
        s += modelled_levels_markdown(*r, checks) + "\n";
    }
    for (const auto& n : not_measured) s += "- " + n + "\n";
    for (const auto& n : in.notes) s += "- " + n + "\n";
    s += "\n## Files\n\n" + files_markdown(in.files) +
         "\nHow each experiment works: docs/memory.md, installed as share/doc/pmc/memory.md.\n";
    return s;
}

} // namespace pmc_mem
