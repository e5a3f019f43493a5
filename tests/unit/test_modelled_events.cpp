// SPDX-License-Identifier: MIT
// pmc/modelled_events.hpp, the one list of the events pmc's emulated PMU answers beside instructions: each name
// opens on the emulated PMU as the event code it stands for, every code the plugin answers has its name in the list,
// and the gate and the names agree on what is modelled.
#include "catch.hpp"

#include <pmc/emulated.hpp>
#include <pmc/event.hpp>
#include <pmc/gate.hpp>
#include <pmc/modelled_events.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace {
namespace proto = pmc::detail::emulated;

/// The code the emulated PMU asks the plugin for when `name` opens, or -1.
std::int64_t code_of(std::string_view name) {
    const pmc::EventSpec spec = pmc::parse_event(name);
    const auto event = pmc::modelled_event(spec);
    return event ? static_cast<std::int64_t>(*event) : -1;
}

static_assert(pmc::is_modelled_event_name("LLC-load-misses:u") && !pmc::is_modelled_event_name("branches"),
              "the names are usable at compile time");
} // namespace

TEST_CASE("modelled events: each name opens as its own event code, and every code the plugin answers has a name",
          "[emulated][modelled]") {
    std::map<std::int64_t, std::string> named; // code -> the name that opens it
    const auto take = [&](std::string_view name, bool modelled) {
        CAPTURE(name);
        for (const std::string& text : {std::string(name), std::string(name) + ":u"}) {
            CAPTURE(text);
            const std::int64_t code = code_of(text);
            REQUIRE(code > 0);
            CHECK(pmc::is_modelled_event_name(text) == modelled);
            CHECK(pmc::gate::is_modelled_event(text) == modelled);
        }
        const std::int64_t code = code_of(name);
        // Two names for one code only where perf has two (branch-instructions and branches).
        if (named.count(code)) CHECK(pmc::is_branch_count_event_name(name));
        named.emplace(code, std::string(name));
    };
    for (const std::string_view name : pmc::modelled_cache_event_names) {
        CHECK(pmc::is_modelled_cache_event_name(name));
        CHECK(pmc::modelled_cache_event(pmc::parse_event(name)).has_value());
        take(name, true);
    }
    for (const std::string_view name : pmc::branch_count_event_names) {
        CHECK(code_of(name) == static_cast<std::int64_t>(proto::Event::branch_instructions));
        take(name, false);
    }
    for (const std::string_view name : pmc::modelled_branch_event_names) {
        CHECK(code_of(name) == static_cast<std::int64_t>(proto::Event::branch_misses));
        take(name, true);
    }
    // The plugin answers every code below event_count (instructions, code 0, through the read request): each other
    // one must be opened by a name of the list, so that a code added to the protocol cannot miss its name.
    for (std::uint64_t code = 1; code < proto::event_count; ++code) {
        CAPTURE(code);
        CHECK(named.count(static_cast<std::int64_t>(code)) == 1);
    }
    CHECK(named.size() == proto::event_count - 1);
}

TEST_CASE("modelled events: instructions, other cache events and other names are not in the list", "[emulated][modelled]") {
    for (const char* e : {"instructions:u", "instructions", "cycles", "wall-time", "page-faults", "LLC-prefetches",
                          "L1-dcache-prefetches", "L1-icache-loads", "LLC", "cache-misses-extra", ""}) {
        CAPTURE(e);
        CHECK_FALSE(pmc::is_modelled_event_name(e));
        CHECK_FALSE(pmc::gate::is_modelled_event(e));
        CHECK_FALSE(pmc::is_branch_count_event_name(e));
    }
    CHECK(pmc::event_base_name("L1-dcache-loads:u") == "L1-dcache-loads");
    CHECK(pmc::event_base_name("branch-misses") == "branch-misses");
}

TEST_CASE("modelled events: the refusal of an event the emulator cannot count names every event it can, from the "
          "one list", "[emulated][modelled]") {
    const std::string why = pmc::emulated_refusal(pmc::parse_event("page-faults"));
    CAPTURE(why);
    REQUIRE_FALSE(why.empty());
    const auto named = [&](std::string_view name) {
        // Whole names: "LLC-loads" inside "LLC-loads-x" would not do.
        for (auto at = why.find(name); at != std::string::npos; at = why.find(name, at + 1)) {
            const char after = at + name.size() < why.size() ? why[at + name.size()] : ' ';
            if (after == ',' || after == ')' || after == ' ' || after == ';') return true;
        }
        return false;
    };
    for (const std::string_view name : pmc::modelled_cache_event_names) CHECK(named(name));
    for (const std::string_view name : pmc::branch_count_event_names) CHECK(named(name));
    for (const std::string_view name : pmc::modelled_branch_event_names) CHECK(named(name));
    CHECK_THAT(why, ContainsSubstring("pmc emulate --cache"));
    CHECK_THAT(why, ContainsSubstring("pmc emulate --branches"));
}
