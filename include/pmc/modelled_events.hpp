// SPDX-License-Identifier: MIT
// pmc/modelled_events.hpp: the names of the events pmc's emulated PMU answers beside instructions -- one list, used
// by the emulated PMU (pmc/emulated.hpp), pmc emulate and pmc count --emulate, the profile reader's notes and the
// gate's modelled default (pmc/gate.hpp).
//
//     pmc::is_modelled_event_name("LLC-load-misses:u")   // true: a figure of the cache model
//     pmc::is_modelled_event_name("branch-instructions")  // false: an exact count of the emulator, not a model's
//
// perf's generic names, as pmc::parse_event takes them; a modifier (":u") is ignored.
#pragma once

#include <pmc/config.hpp>

#include <cstddef>
#include <string_view>

PMC_BEGIN_NAMESPACE

/// The cache events `pmc emulate --cache` answers from its cache model (Cachegrind's, per thread).
inline constexpr std::string_view modelled_cache_event_names[] = {
    "L1-dcache-loads", "L1-dcache-load-misses", "L1-dcache-stores", "L1-dcache-store-misses", "L1-icache-load-misses",
    "LLC-loads",       "LLC-load-misses",       "LLC-stores",       "LLC-store-misses",       "cache-references",
    "cache-misses"};

/// The branch events `pmc emulate --branches` answers: the branch instructions executed, an exact count (not
/// modelled; "branches" is perf's other name for it), and the branch predictor's misses, modelled.
inline constexpr std::string_view branch_count_event_names[] = {"branch-instructions", "branches"};
inline constexpr std::string_view modelled_branch_event_names[] = {"branch-misses"};

/// `event` without its modifiers: "LLC-loads:u" -> "LLC-loads".
constexpr std::string_view event_base_name(std::string_view event) noexcept {
    return event.substr(0, event.find(':'));
}

namespace detail {
template <std::size_t N>
constexpr bool names_hold(const std::string_view (&names)[N], std::string_view event) noexcept {
    const std::string_view base = event_base_name(event);
    for (const std::string_view name : names)
        if (name == base) return true;
    return false;
}
} // namespace detail

/// Whether `event` is one of modelled_cache_event_names (modifiers ignored).
constexpr bool is_modelled_cache_event_name(std::string_view event) noexcept {
    return detail::names_hold(modelled_cache_event_names, event);
}
/// Whether `event` is one of branch_count_event_names: the exact count of branches (modifiers ignored).
constexpr bool is_branch_count_event_name(std::string_view event) noexcept {
    return detail::names_hold(branch_count_event_names, event);
}
/// Whether `event` is one of modelled_branch_event_names (modifiers ignored).
constexpr bool is_modelled_branch_event_name(std::string_view event) noexcept {
    return detail::names_hold(modelled_branch_event_names, event);
}
/// Whether `event` names a figure the emulator models rather than counts: a modelled cache event or branch-misses.
constexpr bool is_modelled_event_name(std::string_view event) noexcept {
    return is_modelled_cache_event_name(event) || is_modelled_branch_event_name(event);
}

PMC_END_NAMESPACE
