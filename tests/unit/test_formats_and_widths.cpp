// SPDX-License-Identifier: MIT
// sysfs format specs and bit packing; sign extension and interval arithmetic at several counter widths.
#include "catch.hpp"

#include <pmc/counter.hpp>
#include <pmc/pmu.hpp>
#include <pmc/profile_format.hpp>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

using pmc::detail::parse_format_spec;

TEST_CASE("format specs parse into word and bit mask", "[formats]") {
    auto event = parse_format_spec("event", "config:0-7,32-35\n");
    REQUIRE(event);
    CHECK(event->word == pmc::ConfigWord::config);
    CHECK(event->mask == 0xf000000ffull);
    CHECK(event->width() == 12);
    CHECK(event->max_value() == 0xfff);

    auto single = parse_format_spec("inv", "config:23");
    REQUIRE(single);
    CHECK(single->mask == (1ull << 23));
    CHECK(single->max_value() == 1);

    auto ldlat = parse_format_spec("ldlat", "config1:0-15");
    REQUIRE(ldlat);
    CHECK(ldlat->word == pmc::ConfigWord::config1);
    CHECK(ldlat->max_value() == 0xffff);

    auto whole = parse_format_spec("event", "config2:0-63");
    REQUIRE(whole);
    CHECK(whole->word == pmc::ConfigWord::config2);
    CHECK(whole->width() == 64);
    CHECK(whole->max_value() == UINT64_MAX);
}

TEST_CASE("malformed format specs are rejected", "[formats]") {
    for (const char* bad : {"config", "config:", "config:8-7", "config:64", "config:0-64", "config3:0-7", "cfg:0-7",
                            "config:0-7,", "config:a-b", "config:-3", "", "config:0-7,,9"}) {
        INFO(bad);
        CHECK_FALSE(parse_format_spec("f", bad));
    }
}

TEST_CASE("values are scattered into the field's bits lowest first, as perf's pmu_format_value", "[formats]") {
    auto event = *parse_format_spec("event", "config:0-7,32-35");
    CHECK(event.pack(0xfff) == 0xf000000ffull);
    CHECK(event.pack(0x123) == 0x100000023ull);
    CHECK(event.pack(0x2c) == 0x2c);
    auto split = *parse_format_spec("filter", "config2:4-11,20-23");
    CHECK(split.pack(0xfff) == 0xf00ff0);
    CHECK(split.pack(0x100) == 0x100000);
    auto gaps = *parse_format_spec("g", "config:1,3,5,7");
    CHECK(gaps.pack(0xf) == 0xaa);
    CHECK(gaps.pack(0x5) == 0x22);
    auto full = *parse_format_spec("all", "config:0-63");
    CHECK(full.pack(UINT64_MAX) == UINT64_MAX);
}

TEST_CASE("sign extension by the counter width", "[widths]") {
    using pmc::detail::sign_extend;
    for (unsigned width : {8u, 16u, 31u, 32u, 40u, 47u, 48u, 63u, 64u}) {
        INFO("width " << width);
        const unsigned shift = 64 - width;
        const std::uint64_t top = width == 64 ? UINT64_MAX : (std::uint64_t{1} << width) - 1;
        const std::uint64_t half = std::uint64_t{1} << (width - 1);
        CHECK(sign_extend(0, shift) == 0);
        CHECK(sign_extend(half - 1, shift) == static_cast<std::int64_t>(half - 1));
        CHECK(sign_extend(half, shift) == -static_cast<std::int64_t>(half - 1) - 1);
        CHECK(sign_extend(top, shift) == -1);
        CHECK(sign_extend(top - 4, shift) == -5);
    }
}

TEST_CASE("an interval across the counter's wrap point is the true distance", "[widths]") {
    // The kernel starts a counter at -left (near 2^width) and it wraps through zero; with a fixed offset the
    // readings offset + sext(raw) stay continuous, so the difference is exact.
    using pmc::detail::sign_extend;
    for (unsigned width : {32u, 40u, 47u, 48u, 64u}) {
        INFO("width " << width);
        const unsigned shift = 64 - width;
        const std::uint64_t mask = width == 64 ? UINT64_MAX : (std::uint64_t{1} << width) - 1;
        const std::int64_t offset = 123456789;
        const std::uint64_t before = (std::uint64_t{0} - 5) & mask; // 5 counts before the wrap
        const std::uint64_t after = 3;                              // 3 counts after it
        const std::uint64_t a = static_cast<std::uint64_t>(offset + sign_extend(before, shift));
        const std::uint64_t b = static_cast<std::uint64_t>(offset + sign_extend(after, shift));
        CHECK(b - a == 8);
    }
    // Readings are 64-bit counts: an interval across 2^64 is a difference modulo 2^64.
    const std::uint64_t start = UINT64_MAX - 9, stop = 10;
    CHECK(stop - start == 20);
}

TEST_CASE("put_varint_fixed_cost writes put_varint's bytes for every length, edges and random values", "[unit][format]") {
    namespace pf = pmc::profile_format;
    std::vector<std::uint64_t> values = {0, 1, 127, 128, 255, 16383, 16384, UINT64_MAX, UINT64_MAX - 1,
                                         std::uint64_t{1} << 63};
    for (unsigned b = 1; b < 64; ++b) {
        values.push_back((std::uint64_t{1} << b) - 1);
        values.push_back(std::uint64_t{1} << b);
        values.push_back((std::uint64_t{1} << b) + 1);
    }
    std::uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 20000; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        values.push_back(x >> (x % 64)); // every magnitude
    }
    for (const std::uint64_t v : values) {
        unsigned char a[16] = {}, b[16] = {};
        const std::size_t na = static_cast<std::size_t>(pf::put_varint(a, v) - a);
        const std::size_t nb = static_cast<std::size_t>(pf::put_varint_fixed_cost(b, v) - b);
        INFO("value " << v);
        REQUIRE(na == nb);
        REQUIRE(std::memcmp(a, b, na) == 0);
    }
}

TEST_CASE("decimal, hex_digits and concat write what std::to_string, %#llx and operator+ write", "[unit][text]") {
    using pmc::detail::concat;
    using pmc::detail::decimal;
    using pmc::detail::hex_digits;
    auto text = [](std::string_view v) { return std::string(v); };
    for (long long v : std::initializer_list<long long>{0, 1, -1, 42, INT64_MIN, INT64_MAX}) CHECK(text(decimal(v)) == std::to_string(v));
    for (unsigned long long v : std::initializer_list<unsigned long long>{0, 9, 10, UINT64_MAX}) CHECK(text(decimal(v)) == std::to_string(v));
    for (int v : std::initializer_list<int>{0, -7, INT32_MIN, INT32_MAX}) CHECK(text(decimal(v)) == std::to_string(v));
    for (unsigned v : std::initializer_list<unsigned>{0, UINT32_MAX}) CHECK(text(decimal(v)) == std::to_string(v));
    for (long v : std::initializer_list<long>{-1, INT64_MIN}) CHECK(text(decimal(v)) == std::to_string(v));
    for (unsigned long v : std::initializer_list<unsigned long>{0, UINT64_MAX}) CHECK(text(decimal(v)) == std::to_string(v));
    CHECK(text(hex_digits(0)) == "0");
    CHECK(text(hex_digits(0x1c)) == "0x1c");
    CHECK(text(hex_digits(UINT64_MAX)) == "0xffffffffffffffff");
    CHECK(pmc::detail::hex(0xabc) == "0xabc");

    CHECK(concat({}).empty());
    const std::string name = "cpu";
    CHECK(concat({"PMU '", name, "' has ", decimal(3), " formats, config ", hex_digits(255), ""}) ==
          "PMU 'cpu' has 3 formats, config 0xff");
    CHECK(concat({std::string_view("a\0b", 3), "c"}) == std::string("a\0bc", 4)); // lengths, not NUL-terminated
    std::string s = "x";
    pmc::detail::append(s, {"", "y", decimal(-2)});
    CHECK(s == "xy-2");
}
