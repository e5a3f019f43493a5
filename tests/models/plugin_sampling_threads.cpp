// SPDX-License-Identifier: MIT
// The QEMU plugin's load samplers (tools/emulate/plugin_sampling.hpp) under threads, without QEMU, built with
// ThreadSanitizer (a reported race fails the test). Two ways a thread's samples leave it while it runs:
//   - pmc sample --emulate (samples=DIR): every guest thread gets a sampler at its first block and writes its
//     records to DIR/PID.samples, while another thread takes the process's report line (which writes every thread's
//     queue too) again and again; the report lines then add up to every thread's loads, and the file holds exactly
//     their samples, each thread's under its own tid; each thread's mmap and munmap calls now and then become lines
//     of DIR/PID.maps (buffered, written before samples and with the report line), all of them, whole; and each
//     sends itself SIGABRT now and then (abort's tgkill), which writes every thread's queue as well;
//   - an inherit sampler opened on this thread: threads started after it get members, drained here while they run;
//     the drained records and the final counts add up to every thread's loads / period.
#include "plugin_cache.hpp"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

// What the plugin calls in QEMU: this test's meminfo is (size shift << 1) | store.
extern "C" bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info) { return (info & 1) != 0; }
extern "C" unsigned qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info) { return (info >> 1) & 7; }

namespace {

constexpr qemu_plugin_meminfo_t load8 = 3u << 1, store8 = (3u << 1) | 1;
constexpr int threads = 4, rounds = 20000;
constexpr std::uint64_t period = 7, loads_per_round = 2; // a load, and a read-modify-write's read

const std::vector<pmc_model::FetchRef> block_fetches = {{0x401000, 4}};

plugin_cache::Block make_block() {
    plugin_cache::Block b;
    // (no tag planned: each check fails and the whole model decides, as for a straddle)
    b.plan.reset(plugin_cache::BlockPlan::make(3, block_fetches));
    b.each.reset(new plugin_cache::Instruction[3]{{0x401000, 0}, {0x401004, 1}, {0x401008, 2}});
    return b;
}
const plugin_cache::Block block = make_block();

/// One guest thread: per round a block with a load, a store and a read-modify-write; a system call now and then.
void guest_thread(std::uint64_t base) {
    for (int r = 0; r < rounds; ++r) {
        const std::uint64_t a = base + (static_cast<std::uint64_t>(r) * 200) % (96 * 1024);
        plugin_cache::on_block(0, block.plan.get());
        plugin_cache::on_memory(0, load8, a, const_cast<plugin_cache::Instruction*>(&block.each[0]));
        plugin_cache::on_memory(0, store8, a + 4096, const_cast<plugin_cache::Instruction*>(&block.each[1]));
        plugin_cache::on_memory(0, load8, a + 64, const_cast<plugin_cache::Instruction*>(&block.each[2]));
        plugin_cache::on_memory(0, store8, a + 64, const_cast<plugin_cache::Instruction*>(&block.each[2]));
        if (r % 1000 == 999) { // a system call: an mmap (samples=DIR: a line for DIR/PID.maps), then its munmap
            plugin_cache::at_syscall();
            const std::uint64_t at = base + 0x10000000 + static_cast<std::uint64_t>(r) * 0x1000;
            plugin_sampling::mapping_call_starts(9, 0, 0x1000, 3, 0x22, ~std::uint64_t{0}, 0);
            plugin_sampling::mapping_call_returns(9, static_cast<std::int64_t>(at));
            plugin_sampling::mapping_call_starts(11, at, 0x1000, 0, 0, 0, 0);
            plugin_sampling::mapping_call_returns(11, 0);
        }
        if (r % 1000 == 499) // a signal to itself that would end it (abort's tgkill): every thread's queue written
            plugin_sampling::signal_call_starts(234, static_cast<std::uint64_t>(::getpid()), 0, 6);
    }
}

int failed = 0;
void expect(bool ok, const char* what, std::uint64_t got, std::uint64_t want) {
    if (ok) return;
    std::printf("%s: %" PRIu64 ", expected %" PRIu64 "\n", what, got, want);
    ++failed;
}

void whole_program(const std::string& dir) {
    plugin_sampling::whole.dir = dir;
    plugin_sampling::whole.period = period;
    plugin_sampling::mapping_call_numbers = {9, 11, 25, 12}; // x86-64's mmap munmap mremap brk
    plugin_sampling::signal_call_numbers = {62, 200, 234};   // kill tkill tgkill
    plugin_sampling::name_own_files(); // (the threads' first writes race to keep each file's reserve descriptor)
    std::atomic<int> running{threads};
    std::thread workers[threads];
    for (int t = 0; t < threads; ++t)
        workers[t] = std::thread([t, &running] {
            guest_thread(0x7f0000000000 + static_cast<std::uint64_t>(t) * 0x100000);
            running.fetch_sub(1);
        });
    std::uint64_t loads = 0, samples = 0, sampled_threads = 0, unwritten = 0;
    const auto add = [&](const std::string& line) {
        unsigned long long v[4] = {};
        long pid = 0;
        if (std::sscanf(line.c_str(), "pid %ld loads %llu samples %llu threads %llu unwritten %llu", &pid, &v[0],
                        &v[1], &v[2], &v[3]) == 5)
            loads += v[0], samples += v[1], sampled_threads += v[2], unwritten += v[3];
    };
    int taken = 0;
    while (running.load() > 0) { // as an exit or an execve does while other threads still run
        add(plugin_sampling::report_line(1));
        ++taken;
    }
    for (auto& w : workers) w.join();
    add(plugin_sampling::report_line(1));
    const std::uint64_t each = rounds * loads_per_round;
    expect(loads == threads * each, "whole program: loads in the report lines", loads, threads * each);
    expect(samples == threads * (each / period), "whole program: samples", samples, threads * (each / period));
    expect(sampled_threads == threads, "whole program: threads", sampled_threads, threads);
    expect(unwritten == 0, "whole program: unwritten", unwritten, 0);
    std::ifstream in(dir + "/" + std::to_string(::getpid()) + ".samples", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t one = plugin_sampling::record_size(pmc::detail::emulated::whole_program_sample_fields);
    expect(bytes.size() == samples * one, "whole program: bytes in the samples file", bytes.size(), samples * one);
    std::set<std::uint32_t> tids;
    for (std::size_t at = 0; at + one <= bytes.size(); at += one) {
        std::uint32_t tid = 0;
        std::memcpy(&tid, bytes.data() + at + sizeof(perf_event_header) + 8 + 4, 4); // ip, then pid and tid
        tids.insert(tid);
    }
    expect(tids.size() == threads, "whole program: threads in the records", tids.size(), threads);
    std::ifstream maps(dir + "/" + std::to_string(::getpid()) + ".maps");
    std::uint64_t mapped = 0, unmapped = 0, other = 0;
    for (std::string line; std::getline(maps, line);) {
        unsigned long long time = 0, begin = 0, length = 0, prot = 0, flags = 0, offset = 0;
        int end = 0;
        if (std::sscanf(line.c_str(), "pmc-maps %llu map %llx %llx %llx %llx %llx%n", &time, &begin, &length, &prot,
                        &flags, &offset, &end) == 6 && line[static_cast<std::size_t>(end)] == '\0' && length == 0x1000)
            ++mapped;
        else if (std::sscanf(line.c_str(), "pmc-maps %llu unmap %llx %llx%n", &time, &begin, &length, &end) == 3 &&
                 line[static_cast<std::size_t>(end)] == '\0' && length == 0x1000)
            ++unmapped;
        else
            ++other;
    }
    const std::uint64_t calls = threads * (rounds / 1000);
    expect(mapped == calls, "whole program: mmap lines", mapped, calls);
    expect(unmapped == calls, "whole program: munmap lines", unmapped, calls);
    expect(other == 0, "whole program: other lines in the maps file", other, 0);
    std::printf("whole program: %d threads x %" PRIu64 " loads, the report line taken %d times while they ran: %" PRIu64
                " samples\n", threads, each, taken, samples);
    const bool reserved = plugin_sampling::samples_file.reserve() >= 0 && plugin_sampling::maps_file.reserve() >= 0;
    expect(reserved, "whole program: a reserve descriptor kept for each file", reserved, 1);
    plugin_sampling::samples_file.close_reserve();
    plugin_sampling::maps_file.close_reserve();
    plugin_sampling::whole.dir.clear();
}

void inherit() {
    namespace proto = pmc::detail::emulated;
    proto::SamplerRequest r;
    r.period = period;
    r.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_ADDR;
    r.min_latency = 3;
    r.capacity = 100000;
    r.inherit = 1;
    std::vector<unsigned char> records;
    plugin_sampling::handle(proto::Op::sampler_open, r, true, records);
    if (r.error || !r.id) {
        std::printf("inherit: the open failed (error %u)\n", r.error);
        ++failed;
        return;
    }
    const std::uint64_t id = r.id;
    std::atomic<int> running{threads};
    std::thread workers[threads];
    for (int t = 0; t < threads; ++t)
        workers[t] = std::thread([t, &running] {
            guest_thread(0x7e0000000000 + static_cast<std::uint64_t>(t) * 0x100000);
            running.fetch_sub(1);
        });
    std::uint64_t drained = 0;
    const auto drain = [&] {
        proto::SamplerRequest d;
        d.id = id;
        d.buffer_size = 65536;
        plugin_sampling::handle(proto::Op::sampler_drain, d, true, records);
        drained += d.buffer_size / 24; // header, tid, addr
    };
    while (running.load() > 0) drain();
    for (auto& w : workers) w.join();
    proto::SamplerRequest s;
    s.id = id;
    plugin_sampling::handle(proto::Op::sampler_stop, s, true, records);
    drain();
    drain();
    const std::uint64_t each = rounds * loads_per_round;
    expect(s.loads == threads * each, "inherit: loads", s.loads, threads * each);
    expect(s.inherit == threads + 1, "inherit: threads (this one and its members)", s.inherit, threads + 1);
    expect(drained == threads * (each / period), "inherit: samples drained", drained, threads * (each / period));
    proto::SamplerRequest c;
    c.id = id;
    plugin_sampling::handle(proto::Op::sampler_close, c, true, records);
    std::printf("inherit: %d threads followed, %" PRIu64 " samples drained while they ran\n", threads, drained);
}

} // namespace

int main() {
    plugin_cache::settings.on = true;
    if (const std::string why = plugin_cache::start(); !why.empty()) {
        std::fprintf(stderr, "start: %s\n", why.c_str());
        return 1;
    }
    char dir[] = "/tmp/pmc-plugin-sampling-XXXXXX";
    if (!::mkdtemp(dir)) return 1;
    whole_program(dir);
    inherit();
    std::remove((std::string(dir) + "/" + std::to_string(::getpid()) + ".samples").c_str());
    std::remove((std::string(dir) + "/" + std::to_string(::getpid()) + ".maps").c_str());
    ::rmdir(dir);
    std::printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed ? 1 : 0;
}
