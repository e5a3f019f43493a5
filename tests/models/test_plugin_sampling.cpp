// SPDX-License-Identifier: MIT
// The plugin's side of load-latency sampling (tools/emulate/plugin_sampling.hpp), without QEMU: the records it
// writes for every combination of the fields it offers read back through pmc's decoder of the kernel's records
// (pmc::detail::parse_sample) field for field; a full queue drops and counts, and a drain writes the LOST record
// first and whole records only; and the event names pmc::Sampler takes under the emulator (pmc/emulated.hpp).
#include "catch.hpp"

#include <plugin_sampling.hpp>

#include <pmc/detail/records.hpp>
#include <pmc/emulated.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {
namespace proto = pmc::detail::emulated;

proto::SamplerRequest open_request(std::uint64_t period, std::uint64_t fields, std::uint64_t capacity) {
    proto::SamplerRequest r;
    r.period = period;
    r.sample_type = fields;
    r.capacity = capacity;
    r.min_latency = 3;
    return r;
}
} // namespace

TEST_CASE("plugin sampling: every combination of fields reads back through pmc's decoder of the kernel's records") {
    const std::uint64_t offered[] = {PERF_SAMPLE_IP,     PERF_SAMPLE_TID,    PERF_SAMPLE_TIME,
                                     PERF_SAMPLE_ADDR,   PERF_SAMPLE_CPU,    PERF_SAMPLE_PERIOD,
                                     PERF_SAMPLE_WEIGHT, PERF_SAMPLE_DATA_SRC, PERF_SAMPLE_WEIGHT_STRUCT};
    for (unsigned mask = 0; mask < (1u << 9); ++mask) {
        std::uint64_t fields = 0;
        for (unsigned b = 0; b < 9; ++b)
            if (mask & (1u << b)) fields |= offered[b];
        CAPTURE(fields);
        plugin_sampling::Sampler s(1, open_request(7, fields, 4), 123, 456);
        plugin_sampling::Pending p{{0x401000, 0x7fff0040, pmc_model::Level::ll, 40,
                                    pmc_model::data_source_bits(pmc_model::Level::ll)},
                                   987654321};
        std::vector<unsigned char> out;
        plugin_sampling::write_sample(out, s, p);
        REQUIRE(out.size() == plugin_sampling::record_size(fields));
        perf_event_header h;
        std::memcpy(&h, out.data(), sizeof h);
        CHECK(h.type == PERF_RECORD_SAMPLE);
        CHECK(h.size == out.size());
        pmc::Sample x;
        REQUIRE(pmc::detail::parse_sample(out.data(), out.size(), fields, x) == nullptr);
        if (fields & PERF_SAMPLE_IP) CHECK(x.ip == 0x401000);
        if (fields & PERF_SAMPLE_TID) CHECK((x.pid == 123 && x.tid == 456));
        if (fields & PERF_SAMPLE_TIME) CHECK(x.time == 987654321);
        if (fields & PERF_SAMPLE_ADDR) CHECK(x.addr == 0x7fff0040);
        if (fields & PERF_SAMPLE_CPU) CHECK(x.cpu == 0);
        if (fields & PERF_SAMPLE_PERIOD) CHECK(x.period == 7);
        if (fields & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) CHECK(x.weight == 40);
        if (fields & PERF_SAMPLE_DATA_SRC) {
            CHECK(x.data_source.op == pmc::DataSource::Op::load);
            CHECK(x.data_source.level == pmc::DataSource::Level::l3);
        }
    }
}

TEST_CASE("plugin sampling: a full queue counts what it drops, a drain writes LOST first and whole records only") {
    using plugin_sampling::current;
    const std::uint64_t fields = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR;
    proto::SamplerRequest r = open_request(2, fields, 3);
    std::vector<unsigned char> records;
    plugin_sampling::handle(proto::Op::sampler_open, r, true, records);
    REQUIRE(r.error == 0);
    REQUIRE(r.id != 0);
    CHECK(current == nullptr); // made, not started: the open's own work is not counted
    proto::SamplerRequest start;
    start.id = r.id;
    plugin_sampling::handle(proto::Op::sampler_start, start, true, records);
    REQUIRE(start.error == 0);
    REQUIRE(current != nullptr);
    // 20 loads at period 2: 10 samples, 3 kept, 7 lost. Loads below ldlat 3 do not exist in the model (L1 is 4).
    for (std::uint64_t i = 1; i <= 20; ++i) plugin_sampling::on_load(0x1000 + i, 0x9000 + 64 * i, pmc_model::Level::l1);
    // A buffer with room for the LOST record and one sample (24 bytes each): the rest stay pending.
    proto::SamplerRequest d;
    d.id = r.id;
    d.buffer_size = 24 + 24 + 23;
    plugin_sampling::handle(proto::Op::sampler_drain, d, true, records);
    CHECK(d.buffer_size == 48);
    CHECK(d.loads == 20);
    CHECK(d.samples == 10);
    CHECK(d.lost == 7);
    CHECK(d.pending == 2);
    perf_event_header h;
    std::memcpy(&h, records.data(), sizeof h);
    CHECK(h.type == PERF_RECORD_LOST);
    std::uint64_t lost = 0;
    CHECK(pmc::detail::parse_lost(records.data(), h.size, lost));
    CHECK(lost == 7);
    pmc::Sample x;
    REQUIRE(pmc::detail::parse_sample(records.data() + 24, 24, fields, x) == nullptr);
    CHECK(x.ip == 0x1002); // the 2nd load
    CHECK(x.addr == 0x9000 + 64 * 2);
    proto::SamplerRequest stop;
    stop.id = r.id;
    plugin_sampling::handle(proto::Op::sampler_stop, stop, true, records);
    CHECK(current == nullptr);
    plugin_sampling::on_load(0x1, 0x2, pmc_model::Level::memory); // after the stop: not counted
    d.buffer_size = 4096;
    plugin_sampling::handle(proto::Op::sampler_drain, d, true, records);
    CHECK(d.buffer_size == 48); // the two still pending, no new LOST record
    CHECK(d.loads == 20);
    CHECK(d.pending == 0);
    proto::SamplerRequest close;
    close.id = r.id;
    plugin_sampling::handle(proto::Op::sampler_close, close, true, records);
    plugin_sampling::handle(proto::Op::sampler_drain, close, true, records);
    CHECK(close.error == static_cast<std::uint32_t>(proto::SamplerError::unknown_id));
    // Without the cache model: refused as such.
    proto::SamplerRequest none = open_request(1, fields, 1);
    plugin_sampling::handle(proto::Op::sampler_open, none, false, records);
    CHECK(none.error == static_cast<std::uint32_t>(proto::SamplerError::no_model));
}

TEST_CASE("the load-latency event names pmc::Sampler samples under pmc emulate --cache") {
    const auto ok = [](const char* text, std::uint32_t ldlat) {
        CAPTURE(text);
        const auto e = pmc::load_latency_event(text);
        REQUIRE(e);
        CHECK(e->problem.empty());
        CHECK(e->min_latency == ldlat);
    };
    ok("cpu/mem-loads,ldlat=30/P", 30);
    ok("cpu/mem-loads,ldlat=3/Pu", 3);
    ok("cpu_core/mem-loads,ldlat=5/pp", 5);
    ok("cpu/mem-loads/", 3);
    ok("mem-loads", 3);
    ok("mem-loads:u", 3);
    const auto with_period = pmc::load_latency_event("cpu/mem-loads,ldlat=30,period=5/P");
    REQUIRE(with_period);
    CHECK(with_period->problem.empty());
    CHECK(with_period->period == 5);
    CHECK(with_period->min_latency == 30);
    CHECK(pmc::load_latency_event("cpu/mem-loads/P")->period == 0);
    const auto refused = [](const char* text, const char* says) {
        CAPTURE(text);
        const auto e = pmc::load_latency_event(text);
        REQUIRE(e);
        CHECK_THAT(e->problem, ContainsSubstring(says));
    };
    refused("ibs_op//", "cpu/mem-loads,ldlat=N/P");
    refused("cpu/mem-loads,ldlat=3/k", "kernel mode");
    refused("cpu/mem-loads,ldlat=x/P", "ldlat takes a whole number");
    refused("cpu/mem-loads,period=0/P", "period takes a positive whole number of loads, not '0'");
    refused("cpu/mem-loads,period=x/P", "not 'x'");
    refused("cpu/mem-loads,freq=1000/P", "give period=N, not a frequency");
    refused("cpu/mem-loads,weight=1/P", "not 'weight=1'");
    refused("mem-loads:S", "not 'S'");
    for (const char* other : {"cpu/cycles/", "instructions:u", "mem-loads-aux", "cpu/mem-stores/", "page-faults"}) {
        CAPTURE(other);
        CHECK_FALSE(pmc::load_latency_event(other));
    }
}

TEST_CASE("plugin sampling: a thread's loads sampled while another thread drains: every sample arrives once, in "
          "order, or is counted lost") {
    // The sampled thread adds under the sampler's lock, the drainer takes under it (the plugin's threads are the
    // guest's: any thread may drain a sampler). Under ThreadSanitizer (no suppressions): clang++ -fsanitize=thread -DPMC_CATCH2_V3=0 -Iinclude
    // -Itools/emulate -Itests/support tests/support/main.cpp tests/models/test_plugin_sampling.cpp: no report (it
    // reported the sampler's counts read by the drain, before they were published atomically; and the lock taken
    // out of take()).
    const std::uint64_t fields = PERF_SAMPLE_ADDR, period = 3, loads = 300000;
    proto::SamplerRequest r = open_request(period, fields, 64);
    std::vector<unsigned char> scratch;
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> id{0};
    std::atomic<unsigned> drains{0};
    std::thread sampled([&] {
        plugin_sampling::handle(proto::Op::sampler_open, r, true, scratch);
        proto::SamplerRequest start;
        start.id = r.id;
        plugin_sampling::handle(proto::Op::sampler_start, start, true, scratch);
        id.store(r.id);
        for (std::uint64_t i = 1; i <= loads; ++i) {
            plugin_sampling::on_load(i, i, pmc_model::Level::memory);
            if (i % 3000 == 0) // let a drain run between loads (relaxed: no ordering that would hide a race)
                for (const unsigned seen = drains.load(std::memory_order_relaxed);
                     drains.load(std::memory_order_relaxed) == seen;)
                    std::this_thread::yield();
        }
        proto::SamplerRequest stop;
        stop.id = r.id;
        plugin_sampling::handle(proto::Op::sampler_stop, stop, true, scratch);
        done.store(true);
    });
    while (id.load() == 0) std::this_thread::yield();
    std::uint64_t received = 0, last = 0, out_of_order = 0, lost = 0;
    std::vector<unsigned char> records;
    for (bool last_round = false;;) {
        last_round = done.load();
        proto::SamplerRequest d;
        d.id = id.load();
        d.buffer_size = 1024;
        plugin_sampling::handle(proto::Op::sampler_drain, d, true, records);
        drains.fetch_add(1, std::memory_order_relaxed);
        for (std::size_t at = 0; at < records.size();) {
            perf_event_header h;
            std::memcpy(&h, records.data() + at, sizeof h);
            if (h.type == PERF_RECORD_LOST) {
                std::uint64_t n = 0;
                pmc::detail::parse_lost(records.data() + at, h.size, n);
                lost += n;
            } else {
                pmc::Sample x;
                REQUIRE(pmc::detail::parse_sample(records.data() + at, h.size, fields, x) == nullptr);
                out_of_order += x.addr <= last || x.addr % period != 0;
                last = x.addr;
                ++received;
            }
            at += h.size;
        }
        if (last_round && d.pending == 0) break;
    }
    sampled.join();
    CHECK(out_of_order == 0);
    CHECK(received + lost == loads / period);
    CHECK(received > 0);
    proto::SamplerRequest close;
    close.id = id.load();
    plugin_sampling::handle(proto::Op::sampler_close, close, true, scratch);
}
