// SPDX-License-Identifier: MIT
// pmc/gate.hpp, the judgement pmc diff and pmc/bench.hpp's --compare share: the exact rule, the noise rule with Holm's
// step-down, threshold, direction, accepted changes, what it cannot judge, and modelled figures.
#include "catch.hpp"

#include <pmc/gate.hpp>

#include <string>
#include <variant>
#include <vector>

namespace {

namespace g = pmc::gate;

/// A label with one value a run on each side, every run having it (one call a run).
g::Label gate_label(const std::string& name, std::vector<double> before, std::vector<double> after) {
    return {name, {std::move(before), {}}, {std::move(after), {}}};
}

g::Options exact_gate() {
    g::Options o;
    o.exact = true;
    return o;
}

const g::LabelJudgement& judged(const g::Judgement& j, const std::string& name) {
    for (const auto& l : j.labels)
        if (l.label == name) return l;
    FAIL("no label " << name);
    throw 0;
}

g::AcceptList accept_text(const std::string& text) {
    auto parsed = g::parse_accept(text);
    REQUIRE(std::holds_alternative<g::AcceptList>(parsed));
    return std::get<g::AcceptList>(parsed);
}

} // namespace

TEST_CASE("gate: exact figures, equal is unchanged and one instruction more is a change, with its direction", "[gate]") {
    SECTION("equal: unchanged, exit 0") {
        const auto j = g::judge({gate_label("a", {1000}, {1000}), gate_label("b", {7}, {7})}, 1, 1, exact_gate());
        CHECK(j.overall() == g::Overall::unchanged);
        CHECK(j.exit_status() == 0);
        CHECK(judged(j, "a").verdict == g::Verdict::unchanged);
    }
    SECTION("+1: changed, an increase, exit 3, only that label") {
        const auto j = g::judge({gate_label("a", {1000}, {1001}), gate_label("b", {7}, {7})}, 1, 1, exact_gate());
        const auto& a = judged(j, "a");
        CHECK(a.verdict == g::Verdict::changed);
        CHECK(a.delta == 1);
        CHECK(a.increase);
        CHECK_FALSE(a.decrease);
        CHECK(a.fails);
        CHECK(j.exit_status() == g::changed_status);
        REQUIRE(j.failing.size() == 1);
        CHECK(j.labels[j.failing[0]].label == "a");
    }
    SECTION("the same value over more calls is a change (an increase)") {
        const auto j = g::judge({{"a", {{100}, {1}}, {{100}, {2}}}}, 1, 1, exact_gate());
        CHECK(judged(j, "a").verdict == g::Verdict::changed);
        CHECK(judged(j, "a").increase);
    }
    SECTION("direction: --fail-on-increase lets -1 pass and fails +1; decrease the other way round") {
        auto o = exact_gate();
        o.direction = g::Direction::increase;
        auto j = g::judge({gate_label("down", {10}, {9}), gate_label("up", {10}, {11})}, 1, 1, o);
        CHECK(judged(j, "down").against_direction);
        CHECK_FALSE(judged(j, "down").fails);
        CHECK(judged(j, "up").fails);
        o.direction = g::Direction::decrease;
        j = g::judge({gate_label("down", {10}, {9}), gate_label("up", {10}, {11})}, 1, 1, o);
        CHECK(judged(j, "down").fails);
        CHECK_FALSE(judged(j, "up").fails);
        CHECK(j.exit_status() == 3);
    }
    SECTION("a label on one side only: new or gone, a change") {
        const auto j = g::judge({{"n", {{}, {}}, {{5}, {1}}}, {"o", {{5}, {1}}, {{}, {}}}}, 1, 1, exact_gate());
        CHECK(judged(j, "n").verdict == g::Verdict::added);
        CHECK(judged(j, "o").verdict == g::Verdict::removed);
        CHECK(j.failing.size() == 2);
    }
}

TEST_CASE("gate: a threshold excuses a change below it, not at or above it", "[gate]") {
    auto o = exact_gate();
    SECTION("a count") {
        o.threshold = g::parse_threshold("100");
        REQUIRE(o.threshold);
        const auto j = g::judge({gate_label("below", {1000}, {1099}), gate_label("at", {1000}, {1100}),
                                 gate_label("down", {1000}, {901})},
                                1, 1, o);
        CHECK(judged(j, "below").under_threshold);
        CHECK_FALSE(judged(j, "below").fails);
        CHECK_FALSE(judged(j, "at").under_threshold);
        CHECK(judged(j, "at").fails);
        CHECK(judged(j, "down").under_threshold); // a size: either way
        CHECK(j.exit_status() == 3);
    }
    SECTION("a percentage of BASE; a new label's is infinite") {
        o.threshold = g::parse_threshold("1%");
        REQUIRE(o.threshold);
        const auto j = g::judge({gate_label("below", {1000}, {1009}), gate_label("at", {1000}, {1010}),
                                 {"n", {{}, {}}, {{1}, {1}}}},
                                1, 1, o);
        CHECK(judged(j, "below").under_threshold);
        CHECK(judged(j, "at").fails);
        CHECK(judged(j, "n").fails);
    }
    SECTION("what is not a threshold") {
        for (const char* bad : {"", "-5", "+5", "5x", "1e3", "%", "inf", " 5"}) CHECK_FALSE(g::parse_threshold(bad));
        CHECK(g::parse_threshold("2.5%")->value == 2.5);
    }
}

TEST_CASE("gate: accepted changes pass as accepted, and fail when the change is another", "[gate]") {
    const g::AcceptList accepted = accept_text("# intended\n+4 a\n-100..0 b\n0%..5% c\nnew n\n+2.5% d\n\n+1 nowhere\n");
    auto o = exact_gate();
    o.accept = &accepted;
    const auto j = g::judge({gate_label("a", {10}, {14}), gate_label("b", {1000}, {950}), gate_label("c", {100}, {106}),
                             {"n", {{}, {}}, {{3}, {1}}}, gate_label("d", {1000}, {1025}), gate_label("e", {1}, {2})},
                            1, 1, o);
    CHECK(judged(j, "a").accepted_ok);
    CHECK_FALSE(judged(j, "a").fails);
    CHECK(judged(j, "b").accepted_ok);
    CHECK_FALSE(judged(j, "c").accepted_ok); // +6% is outside 0%..5%
    CHECK(judged(j, "c").fails);
    CHECK(judged(j, "n").accepted_ok);
    CHECK(judged(j, "d").accepted_ok); // +2.5% as written matches 2.45% to 2.55%
    CHECK(judged(j, "e").fails);       // no line for it
    REQUIRE(j.unused_accepts.size() == 1);
    CHECK(j.unused_accepts[0]->line == 8);
    CHECK(j.failing.size() == 2);

    SECTION("a malformed line is refused with its number") {
        for (auto [text, line] : {std::pair{"+4 a\n+5\n", 2}, std::pair{"x4 a\n", 1}, std::pair{"5..1 a\n", 1},
                                  std::pair{"1%..2 a\n", 1}, std::pair{"+1 a\n+2 a\n", 2}, std::pair{"++1 a\n", 1}}) {
            auto parsed = g::parse_accept(text);
            REQUIRE(std::holds_alternative<g::AcceptError>(parsed));
            CHECK(std::get<g::AcceptError>(parsed).line == static_cast<std::size_t>(line));
        }
    }
}

TEST_CASE("gate: what it cannot judge exits 4, never 0", "[gate]") {
    SECTION("a noisy figure with one run a side: no noise estimate") {
        const auto j = g::judge({gate_label("t", {10}, {20})}, 1, 1, g::Options{});
        CHECK(judged(j, "t").verdict == g::Verdict::no_estimate);
        CHECK(j.overall() == g::Overall::cannot_judge);
        CHECK(j.exit_status() == g::cannot_judge_status);
        CHECK(j.runs_needed == 4); // 2 / C(8, 4) = 2.9% <= 5%
    }
    SECTION("too few runs for Holm's first bar: 2 and 2 runs give p >= 1/3") {
        const auto j = g::judge({gate_label("t", {10, 11}, {20, 21})}, 2, 2, g::Options{});
        CHECK(j.noise_blind);
        CHECK(judged(j, "t").verdict == g::Verdict::within_noise);
        CHECK(j.exit_status() == 4);
    }
    SECTION("an exact figure whose runs of a side differ is not deterministic: judged as noisy") {
        const auto j = g::judge({gate_label("x", {10, 12}, {10})}, 2, 1, exact_gate());
        CHECK(judged(j, "x").nondeterministic_before);
        CHECK(judged(j, "x").verdict == g::Verdict::no_estimate);
        CHECK(j.exit_status() == 4);
    }
    SECTION("identical values need no estimate, whatever the figure") {
        const auto j = g::judge({gate_label("t", {10}, {10})}, 1, 1, g::Options{});
        CHECK(j.exit_status() == 0);
    }
    SECTION("unjudged before changed: 4 wins over 3") {
        const auto j = g::judge({gate_label("t", {10}, {20}), gate_label("u", {10, 10}, {10})}, 1, 1, exact_gate());
        CHECK(j.exit_status() == 3);
        const auto k = g::judge({gate_label("t", {10, 10}, {20}), gate_label("u", {10, 12}, {10})}, 2, 1, exact_gate());
        CHECK(k.exit_status() == 4);
        CHECK(k.failing.size() == 1);
    }
}

TEST_CASE("gate: the noise rule, rank-sum p-values under Holm's step-down", "[gate]") {
    CHECK(g::chance_apart(5, 5) == Approx(2.0 / 252));
    CHECK(g::rank_sum_p({1, 2, 3}, {4, 5, 6}) == Approx(0.1));
    CHECK(g::rank_sum_p({1, 2, 3}, {1, 2, 3}) == 1.0);
    const std::vector<double> base{10, 11, 12, 13, 14, 15, 16, 17}; // 8 and 8 runs: p down to 2 / 12870
    auto shifted = [&](double by) {
        std::vector<double> v = base;
        for (auto& x : v) x += by;
        return v;
    };
    SECTION("apart: beyond the noise; overlapping: within") {
        const auto j = g::judge({gate_label("far", base, shifted(100)), gate_label("near", base, shifted(1))}, 8, 8,
                                g::Options{});
        CHECK(judged(j, "far").verdict == g::Verdict::beyond_noise);
        CHECK(judged(j, "far").fails);
        CHECK(judged(j, "near").verdict == g::Verdict::within_noise);
        CHECK(j.exit_status() == 3);
    }
    SECTION("Holm: the k-th smallest p against alpha / (L - k + 1), stopping at the first that fails") {
        // p(shift 3) = 0.0499, p(shift 100) = 2 / 12870. Two labels: the second bar is 5%, so the shift-3 label
        // passes (Bonferroni's 2.5% would not).
        auto j = g::judge({gate_label("far", base, shifted(100)), gate_label("mid", base, shifted(3))}, 8, 8,
                          g::Options{});
        REQUIRE(judged(j, "mid").p == Approx(0.0499).epsilon(0.01));
        CHECK(judged(j, "far").holm_bar == Approx(0.025));
        CHECK(judged(j, "mid").holm_bar == Approx(0.05));
        CHECK(judged(j, "mid").holm_passed);
        // Four labels: bars 1.25%, 1.67%, 2.5%, 5%. The first shift-3 label fails 2.5% and the step-down stops: the
        // second is not passed though its p is under its own bar of 5% (a step-up would pass it).
        j = g::judge({gate_label("a", base, shifted(100)), gate_label("b", base, shifted(100)),
                      gate_label("c", base, shifted(3)), gate_label("d", base, shifted(3))},
                     8, 8, g::Options{});
        CHECK(judged(j, "a").holm_passed);
        CHECK(judged(j, "b").holm_passed);
        CHECK_FALSE(judged(j, "c").holm_passed);
        CHECK_FALSE(judged(j, "d").holm_passed);
        CHECK(judged(j, "d").holm_bar == Approx(0.05));
        CHECK(j.judged_by_noise == 4);
        CHECK(j.failing.size() == 2);
    }
    SECTION("beyond Holm but within a side's spread: not flagged") {
        const auto j = g::judge({gate_label("s", {10, 10, 10, 10, 10, 10, 10, 90}, {89, 89, 89, 89, 89, 89, 89, 89})},
                                8, 8, g::Options{});
        CHECK(judged(j, "s").holm_passed);
        CHECK(judged(j, "s").verdict == g::Verdict::within_noise);
    }
}

TEST_CASE("gate: a modelled figure is known by its event and gated with its own default threshold", "[gate]") {
    for (const char* e : {"L1-dcache-load-misses:u", "LLC-loads", "cache-misses:u", "cache-references", "branch-misses",
                          "L1-icache-load-misses"})
        CHECK(g::is_modelled_event(e));
    for (const char* e : {"instructions:u", "instructions-minus-irqs:u", "cycles", "wall-time", "page-faults",
                          "branches"})
        CHECK_FALSE(g::is_modelled_event(e));
    auto o = exact_gate();
    o.modelled = true;
    auto j = g::judge({gate_label("small", {1000}, {1099}), gate_label("large", {1000}, {1100})}, 1, 1, o);
    REQUIRE(j.threshold);
    CHECK(j.modelled_default_threshold);
    CHECK(j.threshold->percent);
    CHECK(j.threshold->value == g::modelled_threshold_percent);
    CHECK(j.threshold->text == "10%");
    CHECK(judged(j, "small").under_threshold);
    CHECK(judged(j, "large").fails);
    o.threshold = g::parse_threshold("0");
    j = g::judge({gate_label("small", {1000}, {1099})}, 1, 1, o);
    CHECK_FALSE(j.modelled_default_threshold);
    CHECK(judged(j, "small").fails); // --threshold 0: any change
}

TEST_CASE("gate: a modelled change must pass both the relative threshold and the absolute floor to fail", "[gate]") {
    auto o = exact_gate();
    o.modelled = true;
    o.modelled_floor = g::modelled_floor(245957); // a run of 245,957 misses: 0.1 % is 246 misses, above 64
    CHECK(o.modelled_floor == Approx(245.957));
    CHECK(g::modelled_floor(1000) == g::modelled_floor_events); // a small run: the 64-event floor
    // The heap moved (branch layout2 of the review): a small label moves by a large share, a few misses.
    auto j = g::judge({gate_label("probe", {104}, {120}), gate_label("spin", {15}, {11}),
                       gate_label("big", {220527}, {220539})},
                      1, 1, o);
    CHECK(j.floor == o.modelled_floor);
    CHECK(judged(j, "probe").under_floor);
    CHECK(judged(j, "spin").under_floor);
    CHECK(judged(j, "big").under_threshold); // +12 of 220,527: under 10 % (and the floor)
    CHECK(j.exit_status() == 0);
    // A real regression: one label's misses doubled (a stride change): above both.
    j = g::judge({gate_label("probe", {104}, {120}), gate_label("stride", {16396}, {32792})}, 1, 1, o);
    CHECK(judged(j, "stride").fails);
    CHECK_FALSE(judged(j, "stride").under_floor);
    CHECK(j.exit_status() == g::changed_status);
    // Above the floor but under 10 %: passes; above 10 % but under the floor: passes.
    j = g::judge({gate_label("a", {10000}, {10900}), gate_label("b", {100}, {300})}, 1, 1, o);
    CHECK(judged(j, "a").under_threshold);
    CHECK_FALSE(judged(j, "a").under_floor);
    CHECK(judged(j, "b").under_floor);
    CHECK(j.exit_status() == 0);
    // An explicit threshold replaces the default, floor and all; an exact figure that is not modelled has none.
    o.threshold = g::parse_threshold("10%");
    j = g::judge({gate_label("b", {100}, {300})}, 1, 1, o);
    CHECK(j.floor == 0);
    CHECK(judged(j, "b").fails);
    o.threshold.reset();
    o.modelled = false;
    j = g::judge({gate_label("b", {100}, {101})}, 1, 1, o);
    CHECK(j.floor == 0);
    CHECK(judged(j, "b").fails);
}
