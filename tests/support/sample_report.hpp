// SPDX-License-Identifier: MIT
// Reading `pmc sample --json` reports in tests: the report parsed (a failed parse fails the case), a number by key,
// and a summary row's samples.
#pragma once

#include "catch.hpp"

#include <pmc/detail/json.hpp>

#include <string>

namespace pmc_test {

inline pmc::detail::JsonValue parse_sample_report(const std::string& text) {
    auto v = pmc::detail::JsonReader::parse(text, "pmc sample --json");
    INFO(text);
    REQUIRE(v.ok());
    return *v;
}

inline double json_number(const pmc::detail::JsonValue& v, const char* key) {
    const auto* m = v.find(key);
    INFO(key);
    REQUIRE(m);
    REQUIRE(m->is_number());
    return m->number;
}

/// Samples of the row named `name` in the array `key` (by_variable, by_region), 0 if absent.
inline double row_samples(const pmc::detail::JsonValue& report, const char* key, const std::string& name) {
    const auto* rows = report.find(key);
    REQUIRE(rows);
    for (const auto& r : rows->items)
        if (r.find("name") && r.find("name")->string == name) return json_number(r, "samples");
    return 0;
}

} // namespace pmc_test
