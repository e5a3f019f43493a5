// SPDX-License-Identifier: MIT
// pmc::Sampler on the real kernel, with software events (no PMU needed): page-fault samples carry the faulting
// data address (design.md §3), so a test knows exactly which samples to expect and where.
#include "catch.hpp"
#include "../system/test_support.hpp"

#include <pmc/sampler.hpp>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t region_bytes = 4u << 20;
alignas(4096) char global_array[region_bytes];

std::size_t page() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

/// Pages of [p, p + n) that are not resident: each is one page fault when touched (huge pages off).
std::size_t pages_not_resident(const char* p, std::size_t n) {
    std::vector<unsigned char> vec(n / page());
    if (::mincore(const_cast<char*>(p), n, vec.data()) != 0) return SIZE_MAX;
    std::size_t count = 0;
    for (unsigned char v : vec) count += (v & 1) == 0;
    return count;
}

void touch(char* p, std::size_t n) {
    for (std::size_t off = 0; off < n; off += page()) static_cast<volatile char*>(p)[off] = 1;
}

struct Range {
    std::uint64_t begin, end;
    bool contains(std::uint64_t a) const { return a >= begin && a < end; }
};
Range range_of(const void* p, std::size_t n) {
    auto b = reinterpret_cast<std::uint64_t>(p);
    return {b, b + n};
}

/// A 4 MiB heap block, page-aligned (so mincore covers exactly its pages), huge pages off.
struct HeapBlock {
    char* p = nullptr;
    HeapBlock() {
        void* mem = nullptr;
        if (::posix_memalign(&mem, page(), region_bytes) == 0) p = static_cast<char*>(mem);
        if (p) ::madvise(p, region_bytes, MADV_NOHUGEPAGE);
    }
    ~HeapBlock() { std::free(p); }
};

bool under_asan() { return pmc_test::sanitizer_fault_slack(1) != 0; }

} // namespace

TEST_CASE("page-fault sampling at period 1: every sample lands in the array or block touched, and samples x period "
          "equals the exact count", "[sampler][system]") {
    ::madvise(global_array, region_bytes, MADV_NOHUGEPAGE);
    HeapBlock heap;
    REQUIRE(heap.p);
    const std::size_t expect_global = pages_not_resident(global_array, region_bytes);
    const std::size_t expect_heap = pages_not_resident(heap.p, region_bytes);
    REQUIRE(expect_global > 0);
    REQUIRE(expect_heap > 0);

    pmc::SamplerOptions o;
    o.period = 1;
    o.fields = pmc::sample::ip | pmc::sample::tid | pmc::sample::addr | pmc::sample::time;
    pmc::Sampler s{"page-faults", o};
    touch(global_array, region_bytes);
    touch(heap.p, region_bytes);
    std::size_t in_global = 0, in_heap = 0, elsewhere = 0, other_thread = 0;
    const auto g = range_of(global_array, region_bytes), h = range_of(heap.p, region_bytes);
    const auto tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
    std::uint64_t last_time = 0;
    bool time_ordered = true;
    const pmc::BiasCheck check = s.stop([&](const pmc::Sample& x) {
        if (g.contains(x.addr)) ++in_global;
        else if (h.contains(x.addr)) ++in_heap;
        else ++elsewhere;
        other_thread += x.tid != tid;
        time_ordered = time_ordered && x.time >= last_time;
        last_time = x.time;
    });
    INFO(pmc::to_text(check));
    CHECK(in_global == expect_global);
    CHECK(in_heap == expect_heap);
    if (!under_asan()) CHECK(elsewhere <= 8); // AddressSanitizer's shadow pages fault too
    CHECK(other_thread == 0);
    CHECK(time_ordered);
    CHECK(check.samples == in_global + in_heap + elsewhere);
    CHECK(check.estimated == check.exact); // period 1: exact agreement, not just within tolerance
    CHECK(check.lost == 0);
    CHECK(check.agrees);
    CHECK(check.warning.empty());
    CHECK(check.lost_from_kernel_count); // PERF_FORMAT_LOST: Linux 6.0+ (the note says so on older kernels)
}

TEST_CASE("the kernel's own records with callchain, weight and data source parse with every field in place",
          "[sampler][system]") {
    // A software event's samples carry weight 0 and a data source of "not available" (the kernel's PERF_MEM_NA),
    // and the callchain starts with a context marker: if pmc misplaced a field, the addresses would not match.
    pmc::SamplerOptions o;
    o.period = 1;
    o.fields = pmc::sample::ip | pmc::sample::tid | pmc::sample::addr | pmc::sample::callchain |
               pmc::sample::weight | pmc::sample::data_src;
    o.callchain_depth = 16;
    char* base = static_cast<char*>(::mmap(nullptr, 64 * page(), PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    ::madvise(base, 64 * page(), MADV_NOHUGEPAGE);
    const auto r = range_of(base, 64 * page());
    pmc::Sampler s{"page-faults", o};
    touch(base, 64 * page());
    std::size_t in_range = 0, with_chain = 0, not_available = 0, max_depth = 0;
    const pmc::BiasCheck check = s.stop([&](const pmc::Sample& x) {
        if (!r.contains(x.addr)) return;
        ++in_range;
        with_chain += x.callchain_size >= 2 && x.callchain[0] >= PERF_CONTEXT_MAX; // a context marker first
        not_available += x.weight == 0 && pmc::describe(x.data_source) == "n/a";
        max_depth = std::max(max_depth, x.callchain_size);
    });
    ::munmap(base, 64 * page());
    INFO(pmc::to_text(check));
    CHECK(in_range == 64);
    CHECK(with_chain == 64);
    CHECK(not_available == 64);
    CHECK(max_depth <= 16 + 8); // the depth asked for, plus the kernel's context markers
    CHECK(s.progress().malformed == 0);
    CHECK(check.estimated == check.exact);
}

TEST_CASE("draining while running: a one-page ring wraps many times and every record comes out whole",
          "[sampler][system]") {
    pmc::SamplerOptions o;
    o.period = 1;
    o.data_pages = 1;
    o.fields = pmc::sample::ip | pmc::sample::tid | pmc::sample::time | pmc::sample::addr; // 40-byte records
    char* base = static_cast<char*>(::mmap(nullptr, 1024 * page(), PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    ::madvise(base, 1024 * page(), MADV_NOHUGEPAGE);
    pmc::Sampler s{"page-faults", o};
    const auto tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
    std::size_t bad = 0, samples = 0;
    auto check_sample = [&](const pmc::Sample& x) {
        ++samples;
        bad += x.tid != tid || x.fields != o.fields || x.addr == 0;
    };
    // 1024 faults of 40 bytes each through 4 KiB: drain every 32 pages (1.3 KiB), so nothing is lost.
    for (std::size_t i = 0; i < 1024; ++i) {
        static_cast<volatile char*>(base)[i * page()] = 1;
        if (i % 32 == 31) s.drain(check_sample);
    }
    const pmc::BiasCheck check = s.stop(check_sample);
    ::munmap(base, 1024 * page());
    INFO(pmc::to_text(check));
    CHECK(bad == 0);
    CHECK(samples >= 1024);
    CHECK(s.progress().wrapped > 0); // 40 does not divide 4096: some records run past the end
    CHECK(s.progress().malformed == 0);
    CHECK(s.progress().corrupt_bytes == 0);
    CHECK(check.lost == 0);
    CHECK(check.estimated == check.exact);
    CHECK(check.agrees);
}

TEST_CASE("a ring that overflows: the lost count makes up the difference, no torn record, and the bias warning "
          "fires", "[sampler][system][bias]") {
    pmc::SamplerOptions o;
    o.period = 1;
    o.data_pages = 1;
    o.fields = pmc::sample::ip | pmc::sample::tid | pmc::sample::addr;
    char* base = static_cast<char*>(::mmap(nullptr, 2048 * page(), PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    ::madvise(base, 2048 * page(), MADV_NOHUGEPAGE);
    const auto r = range_of(base, 2048 * page());
    const auto tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
    pmc::Sampler s{"page-faults", o};
    touch(base, 2048 * page()); // 2048 samples of 32 bytes into 4 KiB, no drain: most are lost
    std::size_t torn = 0, in_range = 0;
    const pmc::BiasCheck check = s.stop([&](const pmc::Sample& x) {
        torn += x.tid != tid || x.fields != o.fields;
        if (r.contains(x.addr)) {
            ++in_range;
            torn += (x.addr - r.begin) % page() != 0; // each fault is at the start of a page
        }
    });
    ::munmap(base, 2048 * page());
    INFO(pmc::to_text(check));
    CHECK(torn == 0);
    CHECK(in_range > 0);
    CHECK(check.lost > 0);
    CHECK(check.samples + check.lost == check.exact); // period 1: every event is a sample or a lost one
    CHECK_FALSE(check.agrees);
    CHECK(check.ratio < 0.5);
    CHECK_THAT(check.warning, ContainsSubstring("undercounts"));
    CHECK_THAT(check.warning, ContainsSubstring("lost because the ring buffer was full"));
}

TEST_CASE("a sampler the kernel runs slower than asked: cpu-clock at 1 us fires at most every 10 us, and the bias "
          "check says so though nothing was lost", "[sampler][system][bias]") {
    // The kernel's hrtimer-based clock events sample no faster than every 10 us (perf_swevent_init_hrtimer), so
    // samples x 1000 ns estimates about a tenth of the time counted.
    pmc::SamplerOptions o;
    o.period = 1000;
    o.fields = pmc::sample::ip;
    o.data_pages = 256; // 1 MiB: under a loaded ctest -j2 a 64 KiB ring overflowed between two drains (4,092 lost)
    // The case is about a bias with nothing lost: a run that lost samples (the drain starved on a loaded machine:
    // 71,119 lost once under ASan at -O1 beside the other tests) says nothing about it and is tried again.
    pmc::BiasCheck check;
    for (int attempt = 0; attempt < 3; ++attempt) {
        pmc::Sampler s{"cpu-clock", o};
        pmc::Counter clock{"task-clock"};
        const auto start = clock.read();
        volatile std::uint64_t x = 0;
        while (clock.read() - start < 30'000'000) { // 30 ms of this thread's CPU time
            for (int i = 0; i < 1000; ++i) x = x + static_cast<std::uint64_t>(i);
            s.drain([](const pmc::Sample&) {});
        }
        check = s.stop();
        if (check.lost == 0) break;
    }
    INFO(pmc::to_text(check));
    if (check.lost != 0)
        PMC_SKIP("the ring overflowed in 3 runs (the drain could not keep up on this loaded machine): the bias "
                 "without loss is not shown here");
    CHECK(check.samples > 0);
    CHECK(check.ratio < 0.5);
    CHECK_FALSE(check.agrees);
    CHECK_THAT(check.warning, ContainsSubstring("sampling itself is biased"));
}

TEST_CASE("frequency mode: the estimate is the sum of the samples' periods", "[sampler][system]") {
    pmc::SamplerOptions o;
    o.frequency = 1000;
    o.fields = pmc::sample::ip | pmc::sample::tid;
    pmc::Sampler s{"task-clock", o};
    pmc::Counter clock{"task-clock"};
    const auto start = clock.read();
    volatile std::uint64_t x = 0;
    while (clock.read() - start < 50'000'000)
        for (int i = 0; i < 10000; ++i) x = x + static_cast<std::uint64_t>(i);
    std::uint64_t sum = 0;
    std::size_t without_period = 0;
    const pmc::BiasCheck check = s.stop([&](const pmc::Sample& smp) {
        sum += smp.period;
        without_period += !smp.has(pmc::sample::period);
    });
    INFO(pmc::to_text(check));
    CHECK(check.frequency_mode);
    CHECK(check.summed_periods);
    CHECK(without_period == 0);
    CHECK(check.samples > 0);
    CHECK(check.estimated == sum);
    CHECK(check.exact >= 50'000'000);
}

TEST_CASE("frequency mode, a run shorter than one period: no sample, and the bias check agrees (no false warning)",
          "[sampler][system][bias]") {
    // At 1000 Hz one task-clock period is 1 ms; 200 us of CPU time may end before the first sample. The allowance is
    // one period at the run's rate, not the last sample's period (0 when there is none).
    // The run must be shorter than a period: usually 0.25 ms (0.24 to 0.30 in 60 runs under load), but a loaded
    // machine once charged it 7.3 ms with one sample (time counted but not sampled, e.g. the vCPU stolen: a real
    // undercount, rightly warned about). So up to five tries for a run shorter than a period.
    pmc::BiasCheck check;
    std::string tries;
    for (int attempt = 0; attempt < 5 && (attempt == 0 || check.exact >= 1'000'000); ++attempt) {
        pmc::SamplerOptions o;
        o.frequency = 1000;
        o.fields = pmc::sample::ip;
        pmc::Sampler s{"task-clock", o};
        pmc::Counter clock{"task-clock"};
        const auto start = clock.read();
        volatile std::uint64_t x = 0;
        while (clock.read() - start < 200'000)
            for (int i = 0; i < 1000; ++i) x = x + static_cast<std::uint64_t>(i);
        check = s.stop();
        tries += " " + std::to_string(check.exact);
    }
    INFO("task-clock of each try, ns:" << tries);
    INFO(pmc::to_text(check));
    REQUIRE(check.exact < 1'000'000);
    CHECK(check.exact >= 200'000);
    CHECK(check.allowance >= 500'000); // about 1 ms of task-clock
    CHECK(check.agrees);
    CHECK(check.warning.empty());
}

TEST_CASE("inherit: a thread started after opening is sampled too, into per-CPU rings", "[sampler][system]") {
    pmc::SamplerOptions o;
    o.period = 1;
    o.inherit = true;
    o.fields = pmc::sample::tid | pmc::sample::addr;
    char* base = static_cast<char*>(::mmap(nullptr, 256 * page(), PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    ::madvise(base, 256 * page(), MADV_NOHUGEPAGE);
    const auto r = range_of(base, 256 * page());
    pmc::Sampler s{"page-faults", o};
    CHECK(s.rings() >= 1);
    std::uint32_t child_tid = 0;
    std::thread t([&] {
        child_tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
        touch(base, 256 * page());
    });
    t.join();
    std::size_t from_child = 0;
    const pmc::BiasCheck check = s.stop([&](const pmc::Sample& x) { from_child += x.tid == child_tid && r.contains(x.addr); });
    ::munmap(base, 256 * page());
    INFO(pmc::to_text(check));
    CHECK(from_child == 256);
    CHECK(check.estimated == check.exact);
    CHECK(check.agrees);
}

TEST_CASE("sampler errors say what failed, why, and the fix", "[sampler][system][errors]") {
    pmc::SamplerOptions o;
    o.period = 1;
    auto open = [](const char* event, const pmc::SamplerOptions& opts) {
        auto r = pmc::Sampler::try_open(event, opts);
        return r.ok() ? std::string("opened") : r.failure().message;
    };
    CHECK_THAT(open("wall-time", o), ContainsSubstring("pmc's clocks"));
    CHECK_THAT(open("page-faults", pmc::SamplerOptions{}), ContainsSubstring("give a period"));
    pmc::SamplerOptions both = o;
    both.frequency = 10;
    CHECK_THAT(open("page-faults", both), ContainsSubstring("not both"));
    pmc::SamplerOptions three = o;
    three.data_pages = 3;
    CHECK_THAT(open("page-faults", three), ContainsSubstring("power of two"));
    pmc::SamplerOptions fast;
    fast.frequency = 1'000'000'000;
    CHECK_THAT(open("page-faults", fast), ContainsSubstring("perf_event_max_sample_rate"));
    pmc::SamplerOptions raw = o;
    raw.fields |= PERF_SAMPLE_RAW;
    CHECK_THAT(open("page-faults", raw), ContainsSubstring("does not parse"));
    CHECK_THAT(open("no-such-event", o), ContainsSubstring("no-such-event"));
    CHECK(open("software/config=2,period=3/", pmc::SamplerOptions{}) == "opened"); // page-faults, its own period
    if (!pmc::has_core_pmu()) {
        const std::string msg = open("instructions", o);
        CHECK_THAT(msg, ContainsSubstring("no hardware PMU"));
        CHECK_THAT(msg, ContainsSubstring("Fix:"));
    }
    pmc::SamplerOptions huge = o;
    huge.data_pages = std::size_t{1} << 20; // 4 GiB of ring: over any unprivileged lock limit
    if (::geteuid() != 0) CHECK_THAT(open("page-faults", huge), ContainsSubstring("perf_event_mlock_kb"));
}

TEST_CASE("a sampler that is moved, stopped twice or destroyed running is safe", "[sampler][system]") {
    pmc::SamplerOptions o;
    o.period = 1;
    pmc::Sampler a{"page-faults", o};
    pmc::Sampler b = std::move(a);
    pmc_test::FreshPages pages(16);
    pages.touch();
    const auto first = b.stop();
    const auto second = b.stop();
    CHECK(first.samples == second.samples);
    CHECK(first.exact == second.exact);
    CHECK(first.samples >= 16);
    { pmc::Sampler running{"page-faults", o}; } // closes without stop()
}
