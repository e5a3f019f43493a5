// SPDX-License-Identifier: MIT
// Compiled, never run: every public header, and pmc's templates instantiated the ways a user's code instantiates
// them, under the strict warning set a consumer may build with (-Werror). Driven by tests/consumer/run.cmake
// (STEP=strict), once with g++ and once with clang++. Warnings inside a template show only where it is
// instantiated, hence the explicit instantiations.
#include <pmc/bench.hpp>
#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/cpu.hpp>
#include <pmc/determinism.hpp>
#include <pmc/error.hpp>
#include <pmc/event.hpp>
#include <pmc/group.hpp>
#include <pmc/hybrid.hpp>
#include <pmc/machine.hpp>
#include <pmc/modelled_events.hpp>
#include <pmc/pmu.hpp>
#include <pmc/profile_format.hpp>
#include <pmc/profiler.hpp>
#include <pmc/report.hpp>
#include <pmc/threads.hpp>

#include <cstdint>
#include <string>

namespace strict {
struct OnExit {
    void operator()(std::uint64_t) const noexcept {}
};
struct OnFailure {
    void operator()(const pmc::Failure&) const noexcept {}
};
} // namespace strict

template class pmc::BasicCounter<>;
template class pmc::BasicCounter<pmc::serialize::mfence>;
template class pmc::BasicCounter<pmc::serialize::cpuid>;
template class pmc::BasicCounter<pmc::serialize::none>;
template class pmc::BasicCounter<pmc::serialize::lfence, pmc::source::rdpmc>;
template class pmc::BasicCounter<pmc::serialize::lfence, pmc::source::rdpmc, pmc::width::fixed<48>>;
template class pmc::BasicCounter<pmc::serialize::lfence, pmc::source::tsc>;
template class pmc::BasicCounter<pmc::serialize::lfence, pmc::source::wall_time>;
template class pmc::Interval<pmc::Counter>;
template class pmc::ScopedInterval<pmc::Counter, strict::OnExit>;
template class pmc::ScopedInterval<pmc::Counter, strict::OnExit, strict::OnFailure>;
template class pmc::BasicGroup<>;
template class pmc::BasicGroup<pmc::serialize::none>;
template class pmc::GroupInterval<pmc::Group>;
template class pmc::PerThread<pmc::Counter>;
template class pmc::Result<pmc::Counter>;
template class pmc::Result<pmc::Group>;
template class pmc::Result<pmc::EventSpec>;

std::string strict_uses() {
    pmc::Counter c{"page-faults"};
    std::uint64_t sum = 0;
    {
        auto s = c.scoped([&](std::uint64_t n) { sum += n; });
        auto t = c.scoped([&](std::uint64_t n) { sum += n; }, [&](const pmc::Failure& f) { sum += f.message.size(); });
    }
    pmc::Group g{"page-faults", "task-clock"};
    auto iv = g.interval();
    const auto& counts = iv.stop();
    pmc::JsonWriter json;
    json.begin_object().field("sum", sum).field("signed", std::int64_t{-1}).field("ratio", 0.5).field("c", 'x');
    json.field("u8", std::uint8_t{7}).field("flag", true);
    pmc::write_counts_json(json, pmc::event_names(g), counts);
    json.end_object();
    return json.str() + pmc::count_table(pmc::event_names(g), counts) + fmt::format("{}", counts[0]) +
           fmt::format("{}", c.read_detailed()) + pmc::attr_text(c.attr());
}

// pmc/bench.hpp: a registered benchmark and the object style, measured, printed and compared.
PMC_BENCHMARK(strict_registered) {
    std::uint64_t x = 0;
    bench.run([&] { pmc::bench::do_not_optimize(++x); });
}

std::string strict_bench() {
    pmc::bench::Bench b;
    std::uint64_t x = 0;
    b.run("object", [&] { pmc::bench::do_not_optimize(x += 3); });
    const auto& report = b.report();
    pmc::bench::GateOptions gate;
    gate.threshold = pmc::gate::parse_threshold("0.5%");
    gate.time_threshold_pct = 5;
    return pmc::bench::to_markdown(report) + pmc::bench::to_json(report) +
           pmc::bench::to_markdown(pmc::bench::compare(report, report, gate));
}
