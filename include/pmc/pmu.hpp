// SPDX-License-Identifier: MIT
// pmc/pmu.hpp: the PMUs the kernel exposes in sysfs, with their formats and named events.
//
// Each PMU is a directory /sys/bus/event_source/devices/NAME holding `type` (the perf_event_attr.type to open it
// with), `format/FIELD` (which bits of config/config1/config2 a term such as `event` or `umask` fills, e.g.
// "config:0-7,32-35") and `events/EVENT` (named events: a list of terms such as "event=0xc0,umask=0x1").
// The root directory is a parameter everywhere so tests and tools can point pmc at a fake tree.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/error.hpp>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

PMC_BEGIN_NAMESPACE

/// Where the kernel lists PMUs.
inline constexpr std::string_view default_sysfs_root = "/sys/bus/event_source/devices";

/// Which perf_event_attr word a format field writes to.
enum class ConfigWord { config, config1, config2 };

inline const char* to_string(ConfigWord w) {
    switch (w) {
    case ConfigWord::config: return "config";
    case ConfigWord::config1: return "config1";
    case ConfigWord::config2: return "config2";
    }
    return "?";
}

/// One sysfs format field: a named term and the bits it fills, lowest value bit into the lowest listed bit.
struct FormatField {
    std::string name;
    ConfigWord word = ConfigWord::config;
    std::uint64_t mask = 0; ///< the bits of `word` the field occupies (may be several ranges)
    std::string spec;       ///< the sysfs text, e.g. "config:0-7,32-35"

    /// Number of value bits the field holds.
    int width() const { return __builtin_popcountll(mask); }
    /// Largest value the field accepts.
    std::uint64_t max_value() const { return width() >= 64 ? UINT64_MAX : (std::uint64_t{1} << width()) - 1; }
    /// Scatters `value` into the field's bits (perf's pmu_format_value); value must be <= max_value().
    std::uint64_t pack(std::uint64_t value) const {
        std::uint64_t out = 0;
        int vbit = 0;
        for (int bit = 0; bit < 64; ++bit) {
            if (!(mask >> bit & 1)) continue;
            if (value >> vbit & 1) out |= std::uint64_t{1} << bit;
            ++vbit;
        }
        return out;
    }
};

/// A named event of a PMU (sysfs `events/NAME`), e.g. msr/tsc/ = "event=0x00".
struct PmuEvent {
    std::string name;
    std::string terms; ///< the file's text, trimmed
    std::string unit;  ///< from NAME.unit, if present
    std::string scale; ///< from NAME.scale, if present
};

/// One PMU as sysfs describes it.
struct Pmu {
    std::string name;
    std::uint32_t type = 0;
    std::vector<FormatField> formats;
    std::vector<PmuEvent> events;
    std::optional<int> rdpmc; ///< the `rdpmc` file (0 off, 1 while mmapped, 2 always), if the PMU has one
    std::string cpus;         ///< the `cpus` file (hybrid PMUs list the CPUs of their core type), if present

    const FormatField* find_format(std::string_view field) const {
        for (const auto& f : formats)
            if (f.name == field) return &f;
        return nullptr;
    }
    /// Event names are matched without regard to case, as perf does.
    const PmuEvent* find_event(std::string_view event) const {
        for (const auto& e : events)
            if (detail::iequals(e.name, event)) return &e;
        return nullptr;
    }
};

namespace detail {

/// PMU and event names become path components: refuse anything that could leave the sysfs directory.
inline bool is_safe_sysfs_name(std::string_view name) {
    if (name.empty() || name.size() > 255 || name.front() == '.') return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
}

/// Names of the entries of a directory, sorted; empty if it cannot be read.
inline std::vector<std::string> list_directory(const std::string& path) {
    std::vector<std::string> names;
    if (DIR* dir = ::opendir(path.c_str())) {
        while (const dirent* entry = ::readdir(dir)) {
            std::string_view name = entry->d_name;
            if (name != "." && name != "..") names.emplace_back(name);
        }
        ::closedir(dir);
    }
    std::sort(names.begin(), names.end());
    return names;
}

/// Parses a format spec such as "config:0-7,32-35" or "config1:3". nullopt if malformed.
inline std::optional<FormatField> parse_format_spec(std::string_view name, std::string_view spec) {
    spec = trim(spec);
    FormatField field;
    field.name = std::string(name);
    field.spec = std::string(spec);
    auto colon = spec.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    std::string_view word = spec.substr(0, colon);
    if (word == "config")
        field.word = ConfigWord::config;
    else if (word == "config1")
        field.word = ConfigWord::config1;
    else if (word == "config2")
        field.word = ConfigWord::config2;
    else
        return std::nullopt; // config3 and beyond: not in the perf_event_attr pmc is built against
    std::string_view ranges = spec.substr(colon + 1);
    if (ranges.empty()) return std::nullopt;
    while (!ranges.empty()) {
        auto comma = ranges.find(',');
        std::string_view range = ranges.substr(0, comma);
        ranges = comma == std::string_view::npos ? std::string_view{} : ranges.substr(comma + 1);
        if (comma != std::string_view::npos && ranges.empty()) return std::nullopt;
        auto dash = range.find('-');
        auto lo = parse_number(range.substr(0, dash));
        auto hi = dash == std::string_view::npos ? lo : parse_number(range.substr(dash + 1));
        if (!lo || !hi || *lo > *hi || *hi > 63) return std::nullopt;
        for (auto bit = *lo; bit <= *hi; ++bit) field.mask |= std::uint64_t{1} << bit;
    }
    return field;
}

} // namespace detail

/// Names of the PMUs under `root`, sorted.
inline std::vector<std::string> pmu_names(std::string_view root = default_sysfs_root) {
    std::vector<std::string> names;
    for (auto& name : detail::list_directory(std::string(root)))
        if (detail::read_file(detail::join_path(detail::join_path(root, name), "type"))) names.push_back(name);
    return names;
}

/// Loads one PMU's type, formats and events from `root`. Fails with ENOENT and a message listing the PMUs that
/// do exist when there is no such PMU.
inline Result<Pmu> load_pmu(std::string_view name, std::string_view root = default_sysfs_root) {
    auto missing = [&] {
        std::string have;
        for (auto& n : pmu_names(root)) detail::append(have, {have.empty() ? "" : ", ", n});
        return make_failure(ENOENT, detail::concat({"no PMU named '", name, "' in ", root, " (this machine has: ",
                                                    have.empty() ? "none" : have, ")"}));
    };
    if (!detail::is_safe_sysfs_name(name)) return missing();
    const std::string dir = detail::join_path(root, name);
    auto type_text = detail::read_file(detail::join_path(dir, "type"));
    if (!type_text) return missing();
    auto type = detail::parse_number(detail::trim(*type_text));
    if (!type || *type > UINT32_MAX)
        return make_failure(EINVAL, detail::concat({"cannot read the type of PMU '", name, "' from ", dir, "/type"}));

    Pmu pmu;
    pmu.name = std::string(name);
    pmu.type = static_cast<std::uint32_t>(*type);
    for (auto& field : detail::list_directory(detail::concat({dir, "/format"}))) {
        auto spec = detail::read_file(detail::concat({dir, "/format/", field}));
        if (!spec) continue;
        auto parsed = detail::parse_format_spec(field, *spec);
        if (!parsed)
            return make_failure(EINVAL, detail::concat({"PMU '", pmu.name, "' has a format pmc cannot read: ", dir,
                                                        "/format/", field, " = '", detail::trim(*spec), "'"}));
        pmu.formats.push_back(std::move(*parsed));
    }
    const std::string events_dir = detail::concat({dir, "/events"});
    for (auto& file : detail::list_directory(events_dir)) {
        // NAME.scale, NAME.unit, NAME.per-pkg and NAME.snapshot describe NAME; they are not events.
        auto dot = file.rfind('.');
        if (dot != std::string::npos) {
            std::string_view suffix = std::string_view(file).substr(dot + 1);
            if (suffix == "scale" || suffix == "unit" || suffix == "per-pkg" || suffix == "snapshot") continue;
        }
        auto terms = detail::read_file(detail::concat({events_dir, "/", file}));
        if (!terms) continue;
        PmuEvent event{file, std::string(detail::trim(*terms)), {}, {}};
        if (auto unit = detail::read_file(detail::concat({events_dir, "/", file, ".unit"})))
            event.unit = std::string(detail::trim(*unit));
        if (auto scale = detail::read_file(detail::concat({events_dir, "/", file, ".scale"})))
            event.scale = std::string(detail::trim(*scale));
        pmu.events.push_back(std::move(event));
    }
    if (auto rdpmc = detail::read_file(detail::concat({dir, "/rdpmc"})))
        if (auto v = detail::parse_number(detail::trim(*rdpmc))) pmu.rdpmc = static_cast<int>(*v);
    if (auto cpus = detail::read_file(detail::concat({dir, "/cpus"}))) pmu.cpus = std::string(detail::trim(*cpus));
    return pmu;
}

/// True when the kernel exposes a core (CPU) PMU: `cpu`, the hybrid `cpu_core`/`cpu_atom`, or an Arm PMU.
/// Without one, hardware events (instructions, cycles, raw rNNNN) cannot be counted on this machine.
inline bool has_core_pmu(std::string_view root = default_sysfs_root) {
    for (auto& name : pmu_names(root))
        if (name == "cpu" || name == "cpu_core" || name == "cpu_atom" || detail::starts_with(name, "armv"))
            return true;
    return false;
}

PMC_END_NAMESPACE
