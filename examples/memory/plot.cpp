// SPDX-License-Identifier: MIT
// plot.cpp: see plot.hpp.
#include "plot.hpp"

#include "bandwidth.hpp"
#include "latency.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pmc_mem {

namespace {

/// A string for a double-quoted gnuplot string.
std::string gp_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

/// Runs the script in `dir`, first with the cairo PNG terminal, then (older or smaller gnuplot builds) with the
/// libgd one.
PlotOutcome draw(const std::string& dir, const std::string& name, const std::string& body) {
    PlotOutcome out;
    const std::string script = join_path(dir, name + ".gp");
    out.files.push_back(script);
    auto write = [&](const std::string& png_terminal) {
        std::string s = "# " + name + ".gp: written by pmc's memory experiments. Run `gnuplot " + name +
                        ".gp` in this folder to redraw " + name + ".png and " + name + ".svg from " + name +
                        ".csv.\n";
        s += "set terminal " + png_terminal + "\nset output '" + name + ".png'\n" + body;
        s += "set terminal svg size 1200,720 dynamic font \"DejaVu Sans,11\" noenhanced\nset output '" + name +
             ".svg'\nreplot\n";
        write_text(script, s);
    };
    write("pngcairo size 1200,720 font \"DejaVu Sans,11\" noenhanced");
    if (!have_program("gnuplot")) {
        out.note = "gnuplot is not installed, so no picture was drawn: the data (" + name + ".csv) and the script (" +
                   name + ".gp) are written; install gnuplot (Debian: apt-get install gnuplot-nox) and run `gnuplot " +
                   name + ".gp` in " + (dir.empty() ? "." : dir);
        return out;
    }
    const std::string cd = "cd " + shell_quote(dir.empty() ? "." : dir) + " && ";
    int status = run_command(cd + "gnuplot " + shell_quote(name + ".gp") + " 2>" + shell_quote(name + ".gp.log"));
    if (status != 0) {
        write("png size 1200,720 noenhanced");
        status = run_command(cd + "gnuplot " + shell_quote(name + ".gp") + " 2>" + shell_quote(name + ".gp.log"));
    }
    if (status != 0) {
        out.note = "gnuplot failed on " + script + " (exit status " + std::to_string(status) + "); its messages are in " +
                   join_path(dir, name + ".gp.log");
        return out;
    }
    std::remove(join_path(dir, name + ".gp.log").c_str());
    out.drawn = true;
    out.files.push_back(join_path(dir, name + ".png"));
    out.files.push_back(join_path(dir, name + ".svg"));
    out.note = "drew " + join_path(dir, name + ".png") + " and .svg with gnuplot";
    return out;
}

const char* band_colors[] = {"#cfe2f3", "#fde9d9", "#d9ead3", "#ead1dc", "#fff2cc", "#d0e0e3"};

} // namespace

std::string size_tics(double lo, double hi) {
    std::string out;
    double p = 1;
    while (p * 2 <= lo) p *= 2;
    for (; p <= hi * 1.0001; p *= 2) {
        if (p < lo / 1.0001) continue;
        out += (out.empty() ? "" : ", ") + gp_string(size_label(p)) + " " + fmt::format("{:.0f}", p);
    }
    return "(" + out + ")";
}

PlotOutcome plot_latency(const std::string& dir, const LatencyResult& r, const MachineFacts& m) {
    double xmin = 1e300, xmax = 0, ymin = 1e300, ymax = 0;
    for (const auto& c : r.curves)
        for (const auto& p : c.points) {
            xmin = std::min(xmin, static_cast<double>(p.size));
            xmax = std::max(xmax, static_cast<double>(p.size));
            ymin = std::min(ymin, p.min_ns());
            ymax = std::max(ymax, p.latency_ns());
        }
    if (xmax == 0) return PlotOutcome{false, {}, "no data to plot"};
    const double x0 = xmin / 1.25, x1 = xmax * 1.25;
    const double y1 = std::max(ymax, r.memory_apart_ns) * 2.6;
    // The lowest point at least 15 % up the log axis: the strip under it holds the red cache-size labels (at graph
    // 0.035), which would otherwise be drawn over the L1 plateau.
    const double lowest_bottom = std::exp((std::log(ymin) - 0.15 * std::log(y1)) / 0.85);
    const double y0 = std::pow(10, std::floor(std::log10(std::min(ymin / 1.2, lowest_bottom)) * 2) / 2);

    std::string s;
    const std::string chip = m.cpu_model.empty() ? "this CPU" : m.cpu_model;
    s += "set title " +
         gp_string("Load latency on " + chip + (m.hypervisor.empty() ? "" : " (VM)") +
                   ": dependent loads through a " + size_text(static_cast<double>(r.options.stride)) +
                   "-stride pointer chain\n" + r.pages_note + "; " + std::to_string(r.options.reps) + " runs per size in " +
                   std::to_string(r.options.sweeps) + " sweeps, a point is the median of the sweeps' fastest runs") +
         " font \",12\"\n";
    s += "set datafile separator comma\n";
    s += "set logscale x 2\nset logscale y 10\n";
    s += fmt::format("set xrange [{}:{}]\nset yrange [{}:{}]\n", x0, x1, y0, y1);
    s += "set xtics " + size_tics(xmin, xmax) + " font \",9\"\n";
    s += "set ytics (\"0.1\" 0.1, \"0.2\" 0.2, \"0.5\" 0.5, \"1\" 1, \"2\" 2, \"5\" 5, \"10\" 10, \"20\" 20, \"50\" 50, \"100\" 100, \"200\" "
         "200, \"500\" 500, \"1000\" 1000, \"2000\" 2000)\n";
    s += "set grid xtics ytics lc rgb \"#e4e4e4\" lt 1\n";
    s += "set xlabel \"working set (bytes, log scale)\"\nset ylabel \"ns per load (log scale)\"\n";
    s += "set key below horizontal font \",10\" spacing 1.1\n";
    s += "set border back\n";

    // The regimes found: a shaded band per level, its name and latency, a dashed line at each boundary.
    const auto& levels = r.regimes.levels;
    int obj = 1;
    for (std::size_t i = 0; i < levels.size(); ++i) {
        const double from = i == 0 ? x0 : levels[i - 1].boundary->size;
        const double to = levels[i].boundary ? levels[i].boundary->size : x1;
        s += fmt::format("set object {} rect from {},graph 0 to {},graph 1 fc rgb \"{}\" fs solid 0.55 noborder "
                         "behind\n",
                         obj++, from, to, band_colors[i % 6]);
        const double mid = std::sqrt(std::max(from, xmin) * std::min(to, xmax));
        s += fmt::format("set label {} at {},{} center font \",11\"\n",
                         gp_string(levels[i].name + "\n" + duration_text(levels[i].latency)), mid,
                         levels[i].latency_high * 1.75);
        if (levels[i].boundary) {
            const double b = levels[i].boundary->size;
            s += fmt::format("set arrow from {},graph 0 to {},graph 1 nohead dt 2 lw 1.5 lc rgb \"#555555\"\n", b, b);
            s += fmt::format("set label {} at {},graph 0.985 right rotate by 90 offset -0.8,0 font \",9\" tc rgb "
                             "\"#333333\"\n",
                             gp_string("found " + size_text(b)), b);
        }
    }
    // What the CPU reports: red ticks on the x axis.
    std::string off_scale;
    for (const auto& c : m.caches) {
        const double b = static_cast<double>(c.bytes);
        if (b < x0 || b > x1) {
            off_scale += (off_scale.empty() ? "" : ", ") + c.name + " " + size_text(b);
            continue;
        }
        s += fmt::format("set arrow from {},graph 0 to {},graph 0.07 nohead lw 3 lc rgb \"#c0392b\"\n", b, b);
        s += fmt::format("set label {} at {},graph 0.035 right offset -0.4,0 font \",9\" tc rgb \"#c0392b\"\n",
                         gp_string(c.name + " " + size_label(b)), b);
    }
    std::string cpu_key = "red: cache sizes the CPU reports";
    if (!off_scale.empty()) cpu_key += " (off scale: " + off_scale + ")";
    s += fmt::format("set label {} at graph 0.01,graph 0.97 left font \",9\" tc rgb \"#c0392b\"\n",
                     gp_string(std::string("shaded: the levels found in the ") + chain_name(r.regimes_chain) +
                               "-chain curve\n" + cpu_key));

    std::string plots;
    auto add = [&](const std::string& p) { plots += (plots.empty() ? "plot " : ", \\\n     ") + p; };
    const char* colors[] = {"#1f4e9c", "#e67e22", "#27ae60"};
    for (std::size_t i = 0; i < r.curves.size(); ++i) {
        const std::string chain = chain_name(r.curves[i].chain);
        const std::string filter = "(strcol(1) eq \"" + chain + "\" ? $";
        const bool random = r.curves[i].chain == Chain::random;
        const std::string what = random ? "random chain: load latency"
                                        : chain + " chain: sequential, " +
                                              (r.curves[i].chain == Chain::forward ? "lmbench3" : "lmbench2") +
                                              "'s pattern, prefetched";
        add("'latency.csv' every ::1 using 2:" + filter + "6 : NaN) with linespoints lw " + (random ? "2.2" : "1.6") +
            " pt 7 ps " + (random ? "0.55" : "0.45") + " lc rgb \"" + colors[i % 3] + "\"" + (random ? "" : " dt 2") +
            " title " + gp_string(what));
        if (random)
            add("'' every ::1 using 2:" + filter + "8 : NaN) with points pt 1 ps 0.6 lc rgb \"#6c8ebf\" title "
                "\"random chain, median of all runs\"");
    }
    // A load from memory measured on its own beside a short sweep: the level the report compares with (a line
    // across, named in the key, where no label can cover the data or the boundaries' labels).
    if (r.memory_apart_ns > 0)
        add(fmt::format("{} with lines dt 3 lw 1.5 lc rgb \"#8e44ad\" title {}", r.memory_apart_ns,
                        gp_string("a load from memory measured on its own: " + duration_text(r.memory_apart_ns) + " (" +
                                  r.memory_apart_source.substr(0, r.memory_apart_source.find(',')) + ")")));
    s += plots + "\n";
    return draw(dir, "latency", s);
}

PlotOutcome plot_bandwidth(const std::string& dir, const BandwidthResult& r, const Regimes* regimes,
                           const MachineFacts& m) {
    double xmin = 1e300, xmax = 0, ymin = 1e300, ymax = 0;
    for (const auto& c : r.curves)
        for (const auto& p : c.points) {
            xmin = std::min(xmin, static_cast<double>(p.size));
            xmax = std::max(xmax, static_cast<double>(p.size));
            ymin = std::min(ymin, p.best());
            ymax = std::max(ymax, p.best());
        }
    if (xmax == 0) return PlotOutcome{false, {}, "no data to plot"};
    const double x0 = xmin / 1.25, x1 = xmax * 1.25;
    const double y0 = std::max(0.1, ymin / 1.6), y1 = ymax * 2.2;
    std::string s;
    const std::string chip = m.cpu_model.empty() ? "this CPU" : m.cpu_model;
    s += "set title " +
         gp_string("Bandwidth on " + chip + (m.hypervisor.empty() ? "" : " (VM)") + ", " +
                   std::to_string(r.options.threads) + " thread" + (r.options.threads > 1 ? "s" : "") +
                   ": GB/s = 10^9 bytes counted per second, best of " + std::to_string(r.options.reps) +
                   " runs\nread, write: W bytes per pass; read-modify-write: 2W; copy: W (W/2 read + W/2 written); "
                   "vector = " +
                   (r.isa.empty() ? "none" : r.isa)) +
         " font \",12\"\n";
    s += "set datafile separator comma\nset logscale x 2\nset logscale y 10\n";
    s += fmt::format("set xrange [{}:{}]\nset yrange [{}:{}]\n", x0, x1, y0, y1);
    s += "set xtics " + size_tics(xmin, xmax) + " font \",9\"\n";
    s += "set ytics (\"1\" 1, \"2\" 2, \"5\" 5, \"10\" 10, \"20\" 20, \"50\" 50, \"100\" 100, \"200\" 200, \"500\" "
         "500, \"1000\" 1000)\n";
    s += "set grid xtics ytics lc rgb \"#e4e4e4\" lt 1\n";
    s += "set xlabel \"working set W (bytes, all buffers, log scale)\"\nset ylabel \"GB/s (log scale)\"\n";
    s += "set key outside right top font \",10\"\nset border back\n";
    if (regimes) {
        const auto& levels = regimes->levels;
        for (std::size_t i = 0; i < levels.size(); ++i) {
            const double from = i == 0 ? x0 : levels[i - 1].boundary->size;
            const double to = levels[i].boundary ? levels[i].boundary->size : x1;
            s += fmt::format("set object {} rect from {},graph 0 to {},graph 1 fc rgb \"{}\" fs solid 0.45 noborder "
                             "behind\n",
                             i + 1, from, to, band_colors[i % 6]);
            const double mid = std::sqrt(std::max(from, xmin) * std::min(to, xmax));
            s += fmt::format("set label {} at {},graph 0.96 center font \",11\"\n", gp_string(levels[i].name), mid);
            if (levels[i].boundary)
                s += fmt::format("set arrow from {},graph 0 to {},graph 1 nohead dt 2 lw 1.2 lc rgb \"#555555\"\n",
                                 levels[i].boundary->size, levels[i].boundary->size);
        }
        s += "set label " + gp_string(r.levels_caption) + " at graph 0.01,graph 0.03 left font \",9\" tc rgb "
             "\"#555555\"\n";
    }
    std::string plots;
    for (const auto& c : r.curves) {
        const std::string& k = c.kernel.name;
        std::string color = "#1f77b4";
        if (k.find("write") != std::string::npos) color = "#d62728";
        if (k.find("rmw") != std::string::npos) color = "#9467bd";
        if (k.find("copy") != std::string::npos) color = "#2ca02c";
        if (k == "memcpy") color = "#17becf";
        if (k == "memset") color = "#ff7f0e";
        if (k == "memset-0") color = "#8c564b";
        std::string dash = "1";
        if (k.find("-vec") != std::string::npos) dash = "2";
        if (k.find("-nt") != std::string::npos) dash = "3";
        const std::string width = k.rfind("mem", 0) == 0 ? "2.5" : "1.8";
        plots += (plots.empty() ? "plot " : ", \\\n     ");
        plots += "'bandwidth.csv' every ::1 using 3:(strcol(1) eq \"" + k + "\" && $2 == " + std::to_string(c.threads) +
                 " ? $8 : NaN) with linespoints lw " + width + " dt " + dash + " pt 7 ps 0.4 lc rgb \"" + color +
                 "\" title " + gp_string(k);
    }
    s += plots + "\n";
    return draw(dir, "bandwidth", s);
}

} // namespace pmc_mem
