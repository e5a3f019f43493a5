// SPDX-License-Identifier: MIT
// pmc/detail/profiler_setup.hpp: what a pmc::Profiler's start reads and decides before it records: the profile's
// path (`%p`, and the per-process name when another process holds the file), its file descriptor, the counter list
// (PMC_PROFILE_COUNTERS), and what the file's header says of each counter (its unit and flags).
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/event.hpp>
#include <pmc/profile_format.hpp>

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

PMC_BEGIN_NAMESPACE
namespace detail {

// ---- the profile's file ----------------------------------------------------------------------------------------

/// The profile's path with `%p` replaced by the process id, zero-padded to 7 digits (the most a Linux pid has:
/// pid_max is at most 2^22), and `%%` by `%`. Any other `%` is an error (nullopt, `why` says which).
inline std::optional<std::string> expand_profile_path(std::string_view pattern, pid_t pid, std::string& why) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%') {
            out += pattern[i];
            continue;
        }
        const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
        if (next == 'p') {
            char digits[16];
            std::snprintf(digits, sizeof digits, "%07d", static_cast<int>(pid));
            out += digits;
        } else if (next == '%') {
            out += '%';
        } else {
            why = "'%" + std::string(next ? 1 : 0, next) + "' at position " + std::to_string(i) +
                  ": a profile path knows %p (the process id) and %% (a percent sign)";
            return std::nullopt;
        }
        ++i;
    }
    return out;
}

/// `path` with `.%p` before its extension (or at its end): the file of a process that found `path` in use.
inline std::string per_process_path(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    const std::size_t dot = path.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1)
        return path + ".%p";
    return path.substr(0, dot) + ".%p" + path.substr(dot);
}

/// An open file descriptor, closed unless released.
struct ProfileFile {
    int fd = -1;
    ProfileFile() = default;
    ProfileFile(ProfileFile&& o) noexcept : fd(o.fd) { o.fd = -1; }
    ProfileFile& operator=(ProfileFile&&) = delete;
    ~ProfileFile() {
        if (fd >= 0) ::close(fd);
    }
    int release() noexcept {
        const int f = fd;
        fd = -1;
        return f;
    }
};

// ---- the counters ----------------------------------------------------------------------------------------------

/// What a ';' in a counter list means: commas separate counters.
inline std::string semicolon_hint(const std::string& counter) {
    std::string fixed = counter;
    std::replace(fixed.begin(), fixed.end(), ';', ',');
    return "counters are separated by commas, not ';': write '" + fixed + "' (PMC_PROFILE_COUNTERS=" + fixed + ")";
}

/// The unit of a counter's values, for readers: never "ns" for a count.
inline std::string counter_unit(const EventSpec& spec) {
    if (spec.kind == EventKind::wall_time) return "ns";
    if (spec.kind == EventKind::tsc) return "TSC ticks";
    if (spec.attr.type == PERF_TYPE_SOFTWARE &&
        (spec.attr.config == PERF_COUNT_SW_TASK_CLOCK || spec.attr.config == PERF_COUNT_SW_CPU_CLOCK))
        return "ns";
    return "events";
}

inline std::uint32_t counter_flags(const EventSpec& spec) {
    std::uint32_t f = 0;
    const bool time = counter_unit(spec) != "events";
    if (!time) f |= profile_format::exact;
    if (spec.kind == EventKind::difference) f |= profile_format::irq_corrected;
    if (spec.core_pmu) f |= profile_format::may_multiplex;
    return f;
}

} // namespace detail
PMC_END_NAMESPACE
