// SPDX-License-Identifier: MIT
// pmc/latency_buckets.hpp: a histogram of sampled load latencies whose bucket edges come from a latency curve
// measured on this machine (the memory experiment's latency.json: its levels L1, L2, ..., memory) or from edges the
// user gives, never from a built-in table of what a CPU is supposed to take. Each bucket is labelled with the level
// it stands for.
//
// Edges from a curve: the geometric mean of two neighbouring levels' plateau latencies (the curve is read on a log
// scale, so "halfway" is multiplicative). When the curve stops before memory, a last bucket holds what is slower
// than anything measured in its last level, labelled as such rather than called DRAM.
// Sample weights (Intel PEBS load latency, AMD IBS) are core cycles; the curve is in ns. Convert with the curve's own
// cycles-per-ns where it measured cycles, or with a frequency the caller states; buckets say which unit they hold.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/json.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

PMC_BEGIN_NAMESPACE

/// One level found in a measured latency curve.
struct LatencyLevel {
    std::string name;          ///< "L1", "L2", ..., "memory"
    double latency_ns = 0;     ///< its plateau
    double latency_high_ns = 0; ///< the slowest point measured within it
    double first_size_bytes = 0, last_size_bytes = 0; ///< the working sets it spans (0: not in the file)
};

/// The levels of a latency curve, as the memory experiment (pmc-mem-latency, pmc-memory) writes them.
struct LatencyCurve {
    std::vector<LatencyLevel> levels; ///< fastest first
    bool reaches_memory = false;      ///< the last level is memory (the sweep went past the last cache)
    std::optional<double> cycles_per_ns; ///< where the curve measured cycles too (median over its points)
    std::string source;
};

/// Reads the levels of latency.json text (`regimes.levels`; `curves[].points[].min_cycles` for cycles per ns).
inline Result<LatencyCurve> parse_latency_curve(std::string_view text, std::string_view source) {
    auto doc = detail::JsonReader::parse(text, source);
    if (!doc) return doc.failure();
    std::string src(source);
    auto bad = [&](const std::string& what) {
        return make_failure(EINVAL, src + ": " + what +
                                        " (expected the latency.json that pmc-mem-latency or pmc-memory writes: "
                                        "regimes.levels[] with name and latency_ns; or give bucket edges instead)");
    };
    const auto* regimes = doc->find("regimes");
    const auto* levels = regimes ? regimes->find("levels") : nullptr;
    if (!levels || !levels->is_array()) return bad("no regimes.levels array");
    if (levels->items.empty()) return bad("regimes.levels is empty: the run found no levels in its curve");
    LatencyCurve curve;
    curve.source = src;
    for (std::size_t i = 0; i < levels->items.size(); ++i) {
        const auto& l = levels->items[i];
        const auto* name = l.find("name");
        const auto* lat = l.find("latency_ns");
        const auto* high = l.find("latency_high_ns");
        std::string at = "regimes.levels[" + std::to_string(i) + "]";
        if (!name || !name->is_string() || name->string.empty()) return bad(at + " has no name");
        if (!lat || !lat->is_number() || !(lat->number > 0)) return bad(at + " has no positive latency_ns");
        LatencyLevel level{name->string, lat->number, high && high->is_number() ? high->number : lat->number, 0, 0};
        if (const auto* first = l.find("first_size_bytes"); first && first->is_number() && first->number > 0)
            level.first_size_bytes = first->number;
        if (const auto* last = l.find("last_size_bytes"); last && last->is_number() && last->number > 0)
            level.last_size_bytes = last->number;
        if (level.latency_high_ns < level.latency_ns) level.latency_high_ns = level.latency_ns;
        if (!curve.levels.empty() && !(level.latency_ns > curve.levels.back().latency_ns))
            return bad(at + " (" + level.name + ", " + std::to_string(level.latency_ns) +
                       " ns) is not slower than the level before it: the levels must rise");
        curve.levels.push_back(std::move(level));
    }
    curve.reaches_memory = curve.levels.size() >= 2 && curve.levels.back().name == "memory";
    // Cycles per ns from the points that measured both (a cycles counter was available to the experiment).
    std::vector<double> ratios;
    if (const auto* curves = doc->find("curves"); curves && curves->is_array())
        for (const auto& c : curves->items)
            if (const auto* points = c.find("points"); points && points->is_array())
                for (const auto& p : points->items) {
                    const auto* cyc = p.find("min_cycles");
                    const auto* ns = p.find("min_ns");
                    if (cyc && ns && cyc->is_number() && ns->is_number() && cyc->number > 0 && ns->number > 0)
                        ratios.push_back(cyc->number / ns->number);
                }
    if (!ratios.empty()) {
        std::nth_element(ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2), ratios.end());
        curve.cycles_per_ns = ratios[ratios.size() / 2];
    }
    return curve;
}

/// Reads latency.json from a file.
inline Result<LatencyCurve> read_latency_curve(const std::string& path) {
    auto text = detail::read_file(path);
    if (!text)
        return make_failure(errno ? errno : ENOENT,
                            "cannot read " + path + ": " + std::generic_category().message(errno ? errno : ENOENT) +
                                " (make one with pmc-mem-latency --out DIR, which writes DIR/latency.json)");
    return parse_latency_curve(*text, path);
}

/// The histogram.
class LatencyBuckets {
public:
    struct Bucket {
        std::string label;        ///< the level it stands for ("L2"), or the range for user edges without labels
        double from = 0, to = 0;  ///< [from, to) in unit(); the last bucket's `to` is infinity
        std::uint64_t samples = 0;
        double weight = 0;        ///< summed latencies of its samples
    };

    /// Buckets from a measured curve. With cycles_per_ns > 0 the edges are in cycles (for PMU weights), else in ns.
    static Result<LatencyBuckets> try_from_curve(const LatencyCurve& curve, double cycles_per_ns = 0) {
        if (curve.levels.empty()) return make_failure(EINVAL, curve.source + ": a latency curve with no levels");
        if (cycles_per_ns < 0 || !std::isfinite(cycles_per_ns))
            return make_failure(EINVAL, "cycles per ns must be positive (a frequency in GHz), not " +
                                            std::to_string(cycles_per_ns));
        double k = cycles_per_ns > 0 ? cycles_per_ns : 1;
        LatencyBuckets b;
        b.unit_ = cycles_per_ns > 0 ? "cycles" : "ns";
        b.origin_ = "levels of " + curve.source + ":";
        const auto& lv = curve.levels;
        for (std::size_t i = 0; i < lv.size(); ++i) {
            char part[96];
            std::snprintf(part, sizeof part, " %s %.3g ns", lv[i].name.c_str(), lv[i].latency_ns);
            b.origin_ += part;
            Bucket x;
            x.label = lv[i].name == "memory" ? "memory (DRAM)" : lv[i].name;
            x.from = i == 0 ? 0 : std::sqrt(lv[i - 1].latency_ns * lv[i].latency_ns) * k;
            x.to = i + 1 < lv.size() ? std::sqrt(lv[i].latency_ns * lv[i + 1].latency_ns) * k : std::numeric_limits<double>::infinity();
            b.buckets_.push_back(std::move(x));
        }
        if (!curve.reaches_memory) {
            // Slower than the slowest point of the last level: where, the curve does not say.
            double edge = lv.back().latency_high_ns * k;
            if (!(edge > b.buckets_.back().from)) edge = b.buckets_.back().from * 2; // a degenerate plateau
            b.buckets_.back().to = edge;
            b.buckets_.push_back(Bucket{"beyond " + lv.back().name + " (the curve stops before memory)", edge,
                                        std::numeric_limits<double>::infinity(), 0, 0});
        }
        if (cycles_per_ns > 0) {
            char part[64];
            std::snprintf(part, sizeof part, "; at %.3g cycles per ns", cycles_per_ns);
            b.origin_ += part;
        }
        return b;
    }

    /// Buckets from edges the user gives (rising, positive), in `unit`; labels: one per bucket (edges + 1) or none.
    static Result<LatencyBuckets> try_from_edges(std::vector<double> edges, std::string unit,
                                                 std::vector<std::string> labels = {}) {
        if (edges.empty()) return make_failure(EINVAL, "no bucket edges: give at least one, e.g. 5,15,60");
        for (std::size_t i = 0; i < edges.size(); ++i) {
            if (!(edges[i] > 0) || !std::isfinite(edges[i]))
                return make_failure(EINVAL, "bucket edge " + std::to_string(i + 1) + " is not a positive number");
            if (i && !(edges[i] > edges[i - 1]))
                return make_failure(EINVAL, "bucket edges must rise: edge " + std::to_string(i + 1) + " (" +
                                                num(edges[i]) + ") is not above " + num(edges[i - 1]));
        }
        if (!labels.empty() && labels.size() != edges.size() + 1)
            return make_failure(EINVAL, std::to_string(edges.size()) + " edges make " +
                                            std::to_string(edges.size() + 1) + " buckets, but " +
                                            std::to_string(labels.size()) + " labels were given");
        LatencyBuckets b;
        b.unit_ = std::move(unit);
        b.origin_ = "edges given:";
        for (double e : edges) b.origin_ += " " + num(e);
        b.origin_ += " " + b.unit_;
        for (std::size_t i = 0; i <= edges.size(); ++i) {
            Bucket x;
            x.from = i == 0 ? 0 : edges[i - 1];
            x.to = i < edges.size() ? edges[i] : std::numeric_limits<double>::infinity();
            x.label = !labels.empty() ? labels[i]
                      : i == 0        ? "< " + num(x.to)
                      : i < edges.size() ? num(x.from) + "-" + num(x.to)
                                         : ">= " + num(x.from);
            b.buckets_.push_back(std::move(x));
        }
        return b;
    }

    /// Edges from a comma-separated list ("5,15,60"), as a command line gives them.
    static Result<std::vector<double>> try_parse_list(std::string_view list) {
        std::vector<double> out;
        std::string_view rest = list;
        for (;;) {
            std::size_t comma = rest.find(',');
            std::string item(detail::trim(rest.substr(0, comma)));
            char* end = nullptr;
            double v = item.empty() ? 0 : std::strtod(item.c_str(), &end);
            if (item.empty() || !end || *end != '\0')
                return make_failure(EINVAL, "not a list of numbers: \"" + std::string(list) + "\" (\"" + item +
                                                "\" is not a number; write e.g. 5,15,60)");
            out.push_back(v);
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
        }
        return out;
    }

    /// Counts `n` samples of latency `latency` (in unit()).
    void add(double latency, std::uint64_t n = 1) {
        if (!(latency >= 0)) latency = 0; // NaN or negative: the fastest bucket, never out of range
        auto it = std::upper_bound(buckets_.begin(), buckets_.end(), latency,
                                   [](double l, const Bucket& b) { return l < b.to; });
        if (it == buckets_.end()) --it; // only reachable for +infinity
        it->samples += n;
        it->weight += latency * static_cast<double>(n);
        total_ += n;
    }

    const std::vector<Bucket>& buckets() const { return buckets_; }
    const std::string& unit() const { return unit_; }
    /// Where the edges came from: "levels of latency.json: L1 1.4 ns L2 4.6 ns ..." or "edges given: ...".
    const std::string& origin() const { return origin_; }
    std::uint64_t total() const { return total_; }

    /// A table: bucket, range, samples, %, mean latency; with scale != 1 also samples x scale as "est. events"
    /// (print the bias check beside it: for load-latency sampling that estimate is known to mislead).
    std::string text(double scale = 1) const {
        std::string out = "latency buckets (" + origin_ + ")\n";
        char line[256];
        std::snprintf(line, sizeof line, "  %-44s %-22s %10s %7s %12s %10s\n", "level", ("range, " + unit_).c_str(),
                      "samples", "%", scale != 1 ? "est. events" : "", "mean");
        out += line;
        for (const auto& b : buckets_) {
            std::string range = num(b.from) + " - " + (std::isinf(b.to) ? std::string("") : num(b.to));
            double pct = total_ ? 100.0 * static_cast<double>(b.samples) / static_cast<double>(total_) : 0;
            char est[32] = "", mean[32] = "";
            if (scale != 1) std::snprintf(est, sizeof est, "%.0f", static_cast<double>(b.samples) * scale);
            if (b.samples) std::snprintf(mean, sizeof mean, "%.1f", b.weight / static_cast<double>(b.samples));
            std::snprintf(line, sizeof line, "  %-44s %-22s %10llu %6.2f%% %12s %10s\n", b.label.c_str(), range.c_str(),
                          static_cast<unsigned long long>(b.samples), pct, est, mean);
            out += line;
        }
        return out;
    }

private:
    static std::string num(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g", v);
        return buf;
    }
    std::vector<Bucket> buckets_;
    std::string unit_ = "ns";
    std::string origin_;
    std::uint64_t total_ = 0;
};

PMC_END_NAMESPACE
