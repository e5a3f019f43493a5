// SPDX-License-Identifier: MIT
// host_caches.hpp: the host's cache geometry for `pmc emulate --cache=host`, read the way Cachegrind reads it when
// it is not told one: from the CPU. Only on request: the default model is the pinned geometry (cache_model.hpp),
// so that counts are the same on every machine.
//
// Where from: Linux's sysfs (/sys/devices/system/cpu/cpu0/cache/index*/: level, type, size, ways, line), else
// CPUID's deterministic cache leaf (4 on Intel, 0x8000001D on AMD). The L1 data and instruction caches become D1
// and I1, the highest unified level the LL, and a unified level 2 below a higher one the L2. A level whose set count
// is not a power of two is rounded as Cachegrind rounds its LL (round_sets_like_cachegrind), and the result says so.
#pragma once

#include "model/cache_model.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace pmc_host_caches {

/// One cache as the system describes it.
struct HostCache {
    unsigned level = 0;
    char type = 'U'; ///< 'D' data, 'I' instruction, 'U' unified
    pmc_model::CacheGeometry geometry;
};

struct HostCaches {
    pmc_model::CacheConfig config; ///< what the model runs
    std::string source;            ///< where it came from: the sysfs directory, or "CPUID leaf 4"
    std::string adjustments;       ///< what was changed to model it ("LL: 245760 sets rounded ..."), or ""
};

/// "48K", "2048K", "1M", "32768" in bytes; 0 if unreadable.
inline std::uint64_t parse_sysfs_size(const std::string& text) {
    std::uint64_t v = 0;
    std::size_t i = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) v = v * 10 + static_cast<unsigned>(text[i] - '0');
    if (i == 0) return 0;
    if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) v <<= 10;
    else if (i < text.size() && text[i] == 'M') v <<= 20;
    else if (i < text.size() && text[i] == 'G') v <<= 30;
    return v;
}

/// The caches described under `dir` (a sysfs cpuN/cache directory); empty if none could be read.
inline std::vector<HostCache> read_sysfs_caches(const std::string& dir) {
    std::vector<HostCache> caches;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return caches;
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d))
        if (std::string(e->d_name).rfind("index", 0) == 0) names.push_back(e->d_name);
    ::closedir(d);
    std::sort(names.begin(), names.end());
    const auto field = [](const std::string& path) {
        std::ifstream in(path);
        std::string text;
        std::getline(in, text);
        return text;
    };
    for (const std::string& name : names) {
        const std::string at = dir + "/" + name + "/";
        HostCache c;
        c.level = static_cast<unsigned>(parse_sysfs_size(field(at + "level")));
        const std::string type = field(at + "type");
        c.type = type == "Data" ? 'D' : type == "Instruction" ? 'I' : 'U';
        const std::uint64_t size = parse_sysfs_size(field(at + "size"));
        const std::uint64_t line = parse_sysfs_size(field(at + "coherency_line_size"));
        std::uint64_t ways = parse_sysfs_size(field(at + "ways_of_associativity"));
        if (ways == 0 && line != 0) ways = size / line; // sysfs's 0: fully associative
        if (c.level == 0 || size == 0 || line == 0 || ways == 0 || size > 0x7fffffff) continue;
        c.geometry = {static_cast<std::uint32_t>(size), static_cast<std::uint32_t>(ways),
                      static_cast<std::uint32_t>(line)};
        caches.push_back(c);
    }
    return caches;
}

/// The caches CPUID's deterministic cache leaf describes (x86-64 only; empty elsewhere or if it has none).
inline std::vector<HostCache> read_cpuid_caches(std::string& leaf_name) {
    std::vector<HostCache> caches;
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    unsigned leaf = 4;
    __cpuid(0, a, b, c, d);
    const bool amd = b == 0x68747541; // "Auth"enticAMD
    if (amd) {
        __cpuid(0x80000000, a, b, c, d);
        if (a < 0x8000001d) return caches;
        __cpuid(0x80000001, a, b, c, d);
        if (!(c & (1u << 22))) return caches; // no topology extensions: no leaf 0x8000001D
        leaf = 0x8000001d;
    } else if (a < 4) {
        return caches;
    }
    leaf_name = amd ? "CPUID leaf 0x8000001D" : "CPUID leaf 4";
    for (unsigned sub = 0; sub < 16; ++sub) {
        __cpuid_count(leaf, sub, a, b, c, d);
        const unsigned type = a & 0x1f;
        if (type == 0) break;
        HostCache h;
        h.level = (a >> 5) & 0x7;
        h.type = type == 1 ? 'D' : type == 2 ? 'I' : 'U';
        const std::uint64_t line = (b & 0xfff) + 1, partitions = ((b >> 12) & 0x3ff) + 1, ways = (b >> 22) + 1;
        const std::uint64_t size = ways * partitions * line * (std::uint64_t{c} + 1);
        if (size > 0x7fffffff) continue;
        h.geometry = {static_cast<std::uint32_t>(size), static_cast<std::uint32_t>(ways),
                      static_cast<std::uint32_t>(line)};
        caches.push_back(h);
    }
#else
    (void)leaf_name;
#endif
    return caches;
}

/// The model for `caches`: "" and `out` set, or what is missing. Pure (tested in tests/models).
inline std::string model_of(const std::vector<HostCache>& caches, HostCaches& out) {
    const HostCache *i1 = nullptr, *d1 = nullptr, *l2 = nullptr, *ll = nullptr;
    for (const HostCache& c : caches) {
        if (c.level == 1 && c.type == 'I') i1 = &c;
        if (c.level == 1 && c.type == 'D') d1 = &c;
        if (c.level >= 2 && c.type == 'U') {
            if (!ll || c.level > ll->level) ll = &c;
            if (c.level == 2) l2 = &c;
        }
    }
    if (!i1 || !d1 || !ll) return "no L1 instruction cache, L1 data cache and unified last level described";
    if (l2 == ll) l2 = nullptr; // two levels: the L2 is the last one
    out.config = pmc_model::CacheConfig{};
    out.adjustments.clear();
    const auto take = [&out](const char* name, const pmc_model::CacheGeometry& g, pmc_model::CacheGeometry& to) {
        to = pmc_model::round_sets_like_cachegrind(g);
        if (!(to == g)) {
            if (!out.adjustments.empty()) out.adjustments += "; ";
            out.adjustments += std::string(name) + " " + std::to_string(g.size) + "," + std::to_string(g.assoc) +
                               "," + std::to_string(g.line) + " has " + std::to_string(g.sets()) +
                               " sets, rounded to a power of two as Cachegrind does";
        }
    };
    take("I1", i1->geometry, out.config.i1);
    take("D1", d1->geometry, out.config.d1);
    if (l2) take("L2", l2->geometry, out.config.l2.emplace());
    take("LL", ll->geometry, out.config.ll);
    if (std::string p = pmc_model::config_problem(out.config); !p.empty()) return "the host's " + p;
    return "";
}

/// This host's caches: sysfs first, then CPUID. "" and `out` set, or why not.
inline std::string read_host_caches(HostCaches& out,
                                    const std::string& sysfs_dir = "/sys/devices/system/cpu/cpu0/cache") {
    std::string why = model_of(read_sysfs_caches(sysfs_dir), out);
    if (why.empty()) {
        out.source = sysfs_dir;
        return "";
    }
    std::string leaf;
    const std::string cpuid_why = model_of(read_cpuid_caches(leaf), out);
    if (cpuid_why.empty()) {
        out.source = leaf;
        return "";
    }
    return sysfs_dir + ": " + why + "; CPUID: " + (leaf.empty() ? "no deterministic cache leaf" : cpuid_why);
}

} // namespace pmc_host_caches
