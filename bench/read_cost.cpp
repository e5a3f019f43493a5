// SPDX-License-Identifier: MIT
// pmc-bench-read: what one counter read costs, pmc's counters side by side with the bare instructions and system
// calls they are made of. Run with --help for what every row means.
//
// Method. Every source is read N times in a loop ("a batch") inside its own non-inlined function; each batch is
// timed with clock_gettime(CLOCK_MONOTONIC) around the call and divided by N. After a warm-up, R batches are
// taken per source and the table shows the min, median and 90th percentile of the per-read time over the
// batches. The fast sources' batches are interleaved round-robin (batch 1 of every source, then batch 2, ...),
// so background load and frequency drift hit every row alike and the ratios stay meaningful on a noisy VM; the
// slow sources (cpuid, read(2)) are interleaved among themselves afterwards, with fewer and shorter batches.
// The loop overhead is not subtracted: the "empty loop" row measures it (well under a nanosecond per read).
// Each value read is added to an accumulator that is written to a volatile sink after the batch, and every
// source is an `asm volatile` (or an opaque call), so the compiler can neither drop nor merge reads.
#include <pmc/counter.hpp>
#include <pmc/machine.hpp>
#include <pmc/report.hpp>

#include <command_line.hpp>
#include <fmt/format.h>

#include <linux/perf_event.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if !defined(__x86_64__)
#error "pmc-bench-read compares pmc's reads with the x86-64 instructions they are built from; it builds on x86-64 only"
#endif

#define BENCH_NOINLINE __attribute__((noinline))

namespace {

volatile std::uint64_t g_sink; // every batch's accumulated reads end here, so no read is dead code

// ----------------------------------------------------------------------------------------------------------------
// The bare instructions (baselines). Each is asm volatile with a memory clobber, like pmc's own.

inline std::uint64_t bare_rdtsc() {
    std::uint32_t lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (std::uint64_t{hi} << 32) | lo;
}
inline std::uint64_t bare_lfence_rdtsc() {
    std::uint32_t lo, hi;
    asm volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (std::uint64_t{hi} << 32) | lo;
}
inline std::uint64_t bare_mfence_rdtsc() {
    std::uint32_t lo, hi;
    asm volatile("mfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (std::uint64_t{hi} << 32) | lo;
}
inline std::uint64_t bare_rdtscp() {
    std::uint32_t lo, hi, aux;
    asm volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    return (std::uint64_t{hi} << 32) | lo;
}
inline std::uint64_t bare_cpuid_rdtsc() {
    std::uint32_t a = 0, b, c = 0, d;
    asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d)::"memory");
    return bare_rdtsc();
}
/// A constant that the compiler must materialize on every call: the "read" of the empty-loop row and the
/// baseline of the instruction counts.
inline std::uint64_t constant_source() {
    std::uint64_t v = 42;
    asm volatile("" : "+r"(v)::"memory");
    return v;
}
inline std::uint64_t monotonic_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The sources as named function objects, so that each batch loop has a readable symbol in `objdump -dC`
// (e.g. `batch<(anonymous namespace)::LfenceRdtsc>`, `batch<(anonymous namespace)::PmcRead<pmc::...>>`).
struct EmptyRead {
    std::uint64_t operator()() const { return constant_source(); }
};
struct Rdtsc {
    std::uint64_t operator()() const { return bare_rdtsc(); }
};
struct Rdtscp {
    std::uint64_t operator()() const { return bare_rdtscp(); }
};
struct LfenceRdtsc {
    std::uint64_t operator()() const { return bare_lfence_rdtsc(); }
};
/// What converting ticks to ns costs at least: lfence;rdtsc, a 64x64->128 multiply, a constant shift, an add.
struct LfenceRdtscToNs {
    std::uint64_t mult; ///< ns per tick * 2^32
    std::uint64_t zero;
    std::uint64_t operator()() const {
        __extension__ typedef unsigned __int128 u128;
        return zero + static_cast<std::uint64_t>((static_cast<u128>(bare_lfence_rdtsc()) * mult) >> 32);
    }
};
struct MfenceRdtsc {
    std::uint64_t operator()() const { return bare_mfence_rdtsc(); }
};
struct CpuidRdtsc {
    std::uint64_t operator()() const { return bare_cpuid_rdtsc(); }
};
struct ClockGettime {
    std::uint64_t operator()() const { return monotonic_ns(); }
};
/// read(2) of value, time enabled and time running: what pmc's read() path asks the kernel for.
struct RawRead {
    int fd;
    std::uint64_t operator()() const {
        std::uint64_t v[3] = {0, 0, 0};
        if (::read(fd, v, sizeof v) != static_cast<ssize_t>(sizeof v))
            throw std::runtime_error(std::string("read() of the perf fd failed: ") + std::strerror(errno));
        return v[0];
    }
};
template <class C>
struct PmcRead {
    C* counter;
    std::uint64_t operator()() const { return counter->read(); }
};

// ----------------------------------------------------------------------------------------------------------------
// Batches.

/// N reads of `read` in a loop; one instantiation (one function in the binary) per source, so `objdump -d` shows
/// each loop on its own: look for the `batch<...>` symbols.
template <class Read>
BENCH_NOINLINE std::uint64_t batch(const Read& source, int n) {
    Read read = source; // a local copy whose address does not escape: its fields stay in registers
    std::uint64_t acc = 0;
    for (int i = 0; i < n; ++i) acc += read();
    return acc;
}

/// Instructions retired (user space) by K reads of `read`, counted with `ic` around the loop.
template <class Read>
BENCH_NOINLINE std::uint64_t counted_batch(pmc::Counter& ic, const Read& source, int k) {
    Read read = source;
    std::uint64_t acc = 0;
    const std::uint64_t start = ic.read();
    for (int i = 0; i < k; ++i) acc += read();
    const std::uint64_t end = ic.read();
    g_sink = acc;
    return end - start;
}

struct Stats {
    double min = 0, median = 0, p90 = 0;
};

Stats stats_of(std::vector<double> v) {
    Stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.min = v.front();
    const std::size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    std::size_t rank = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(n))); // nearest rank, 1-based
    s.p90 = v[std::min(n, std::max<std::size_t>(rank, 1)) - 1];
    return s;
}

enum class Group { baseline, pmc };

struct Row {
    std::string name;
    Group group = Group::baseline;
    std::string path;  ///< how the value is read
    std::string notes; ///< shown in the table
    bool slow = false; ///< fewer, shorter batches (cpuid, system calls)
    std::function<std::uint64_t(int)> run; ///< one batch of n reads; empty: not available
    std::string unavailable;               ///< why `run` is empty ("n/a" rows)
    bool must_work = false;                ///< a failure here makes the exit status non-zero
    std::vector<double> per_read_ns;       ///< one entry per timed batch
    std::string failure;                   ///< what a read threw
    int reads_per_batch = 0;
    Stats s;

    bool measured() const { return run && failure.empty() && !per_read_ns.empty(); }
};

template <class Read>
std::function<std::uint64_t(int)> runner(Read read) {
    return [read](int n) mutable { return batch(read, n); };
}

/// Runs one batch of `row` and records its per-read time; a pmc::error (or any exception) marks the row failed.
void timed_batch(Row& row, int n, bool record) {
    if (!row.run || !row.failure.empty()) return;
    try {
        const std::uint64_t t0 = monotonic_ns();
        const std::uint64_t acc = row.run(n);
        const std::uint64_t t1 = monotonic_ns();
        g_sink = acc;
        if (record) row.per_read_ns.push_back(static_cast<double>(t1 - t0) / n);
    } catch (const std::exception& e) {
        row.failure = e.what();
    }
}

/// Warm-up, then `batches` rounds, each running one batch of every row in `rows`.
void measure(std::vector<Row*>& rows, int batches, int n, int warmup) {
    for (Row* r : rows) r->reads_per_batch = n;
    for (int i = 0; i < warmup; ++i)
        for (Row* r : rows) timed_batch(*r, n, false);
    for (int i = 0; i < batches; ++i)
        for (Row* r : rows) timed_batch(*r, n, true);
    for (Row* r : rows) r->s = stats_of(r->per_read_ns);
}

// ----------------------------------------------------------------------------------------------------------------
// Machine facts.

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon == std::string::npos) break;
            auto v = line.substr(colon + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            return v;
        }
    }
    return "unknown";
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

/// A software event opened with perf_event_open directly (no pmc), with pmc's read_format: read(2) returns the
/// value, time enabled and time running (24 bytes), as pmc's does. (The read costs the same with read_format 0 and
/// with kernel mode counted or not: measured within 1 %.)
int open_raw_software(std::uint64_t config) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = config;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    attr.exclude_kernel = 1; // allowed at any perf_event_paranoid <= 2
    attr.exclude_hv = 1;
    return static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

// ----------------------------------------------------------------------------------------------------------------
// Command line.

struct Options {
    bool json = false;
    bool quick = false;
    bool pin = true;
};

const char* const help_text = R"(usage: pmc-bench-read [--quick] [--json] [--no-pin] [--help]

Measures what one read of a counter costs, in nanoseconds, for pmc's counters and for the bare instructions and
system calls they are made of, side by side in one run.

Method
  Each source is read N times in a loop (a "batch"); each batch is timed with clock_gettime(CLOCK_MONOTONIC) and
  divided by N. After a warm-up, R batches are taken per source; the table shows the minimum, the MEDIAN and the
  90th percentile of the per-read time over the batches. Quote the medians: single batches are noisy on a VM.
  Fast sources: R = 201 batches of N = 1000 reads; cpuid: R = 31 of N = 20; read(2): R = 51 of N = 100.
  The batches of all fast sources are interleaved (batch 1 of each, then batch 2, ...), so background load hits
  every row alike. The loop overhead is NOT subtracted; the "empty loop" row shows it. Every read's value is
  accumulated into a volatile sink and every source is asm volatile or an opaque call, so no read is dropped,
  hoisted or merged. The process is pinned to the CPU it starts on (unless --no-pin).

Options
  --quick   fewer batches (R = 31, N = 200; slow rows R = 7..11): the whole run takes well under 5 s (for CI)
  --json    print the same results as one JSON object instead of the table
  --no-pin  do not pin the process to one CPU
  --help    this text

Rows: baselines (bare instructions, inline asm; no pmc)
  empty loop                the batch loop reading a constant through an empty asm: the loop overhead per read
  rdtsc                     rdtsc alone (not ordered: may run before earlier instructions finish)
  rdtscp                    rdtscp (waits for earlier instructions, not for later ones)
  lfence;rdtsc              the reference: every "x" ratio is a row's median over this row's median
  mfence;rdtsc              mfence (also drains the store buffer), then rdtsc
  lfence;rdtsc->ns by hand  lfence;rdtsc converted to ns with a 128-bit multiply and a constant shift: the least
                            a TSC-based nanosecond clock can cost; pmc's wall-time should be close to it
  cpuid;rdtsc               fully serializing cpuid (measureme's fence), then rdtsc; a VM exit under a hypervisor
  clock_gettime(MONOTONIC)  the vDSO clock: what "wall-time" must beat
  read(2) page-faults       read() of a software-event fd opened with perf_event_open directly, with pmc's
                            read_format (24 bytes: value, time enabled, time running), called in the loop itself
  read(2) task-clock        the same for task-clock (the kernel also updates the clock on every read)

Rows: pmc counters (pmc::Counter unless named otherwise)
  wall-time                 pmc::Counter{"wall-time"}: lfence, rdtsc, ticks -> ns (default serialization)
  wall-time [source::wall_time]  BasicCounter<serialize::lfence, source::wall_time>: no read-path dispatch
  wall-time [none|mfence|cpuid]  BasicCounter<serialize::X>{"wall-time"}: the other serialization policies
  tsc                       pmc::Counter{"tsc"}: lfence, rdtsc, in ticks
  tsc [none]                BasicCounter<serialize::none>{"tsc"}: compare with bare rdtsc
  page-faults, task-clock   software events through pmc::Counter: read(2) of 24 bytes (value, time enabled and
                            running) behind pmc's thread check
  msr/tsc/                  the msr PMU's TSC event through pmc::Counter (read(2)); n/a if it does not open
  instructions:u            a hardware event through rdpmc; n/a without a PMU (the reason is printed)

Instruction counts (only with a PMU whose instructions:u pmc reads with rdpmc)
  "+N instructions per read", measured measureme's way: instructions:u counted around a loop of K reads of the
  counter under test, minus the same loop reading a constant (an inlined empty asm returning 42, so the baseline
  loop also has one instruction per read for its value), divided by K; the minimum over the repetitions.
  Rows: instructions:u, wall-time, tsc. Without a PMU they show n/a and why.

Acceptance figures (printed last)
  wall-time / (lfence;rdtsc) = X   the medians' ratio; target <= 1.3
  wall-time vs clock_gettime       the two medians in ns; target: wall-time is less
  page-faults / read(2) page-faults = X   pmc's read() path against a bare read(2) of the same event and
  task-clock / read(2) task-clock = X     read_format: the median over rounds of each pmc batch's time over
                                          the bare batch's in the same round; target <= 1.05

Exit status: 0 on success, also when a row is n/a or a target is missed; 1 when a pmc counter that opened (or
should have) failed to read, 2 for a bad command line.
)";

// ----------------------------------------------------------------------------------------------------------------
// Output.

std::string fmt_ns(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v); }

struct InsnRow {
    std::string name;
    std::optional<double> per_read; ///< instructions per read over the constant baseline
    std::string reason;             ///< why per_read is empty
};

template <class T>
struct Type {
    using type = T;
};

struct Machine {
    std::string cpu, kernel, hypervisor;
    bool pmu = false;
    std::string pmu_note;
    std::string wall_time_source;
    double tsc_hz = 0;
    int pinned_cpu = -1;
};

} // namespace

int main(int argc, char** argv) {
    Options opt;
    pmc_cli::CommandLine command_line("pmc-bench-read", help_text);
    bool no_pin = false;
    command_line.flag("--json", opt.json);
    command_line.flag("--quick", opt.quick);
    command_line.flag("--no-pin", no_pin);
    if (auto status = command_line.parse(argc, argv)) return *status;
    opt.pin = !no_pin;

    const int fast_r = opt.quick ? 31 : 201, fast_n = opt.quick ? 200 : 1000;
    const int cpuid_r = opt.quick ? 7 : 31, cpuid_n = opt.quick ? 10 : 20;
    const int sys_r = opt.quick ? 11 : 51, sys_n = opt.quick ? 50 : 100;
    const int insn_k = 1000, insn_reps = opt.quick ? 5 : 21;

    Machine m;
    m.cpu = cpu_model();
    m.kernel = pmc::kernel_release();
    m.hypervisor = pmc::under_hypervisor() ? pmc::hypervisor_signature() : "";
    if (m.hypervisor.empty() && pmc::under_hypervisor()) m.hypervisor = "unknown hypervisor";
    if (opt.pin) {
        const int cpu = ::sched_getcpu();
        if (cpu >= 0 && cpu < CPU_SETSIZE) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(static_cast<unsigned>(cpu), &set);
            if (::sched_setaffinity(0, sizeof set, &set) == 0) m.pinned_cpu = cpu;
        }
    }

    // Open everything first (wall-time's first open may calibrate the TSC for ~20 ms).
    bool failed = false; // something that should work did not
    std::vector<std::string> errors;

    std::vector<std::unique_ptr<Row>> rows;
    auto add = [&](std::string name, Group g, std::string path, std::string notes = "") -> Row& {
        rows.push_back(std::make_unique<Row>());
        Row& r = *rows.back();
        r.name = std::move(name);
        r.group = g;
        r.path = std::move(path);
        r.notes = std::move(notes);
        return r;
    };

    // Baselines.
    add("empty loop", Group::baseline, "-", "loop overhead (not subtracted from other rows)").run =
        runner(EmptyRead{});
    add("rdtsc", Group::baseline, "asm").run = runner(Rdtsc{});
    add("rdtscp", Group::baseline, "asm").run = runner(Rdtscp{});
    Row& ref = add("lfence;rdtsc", Group::baseline, "asm", "reference for the ratios");
    ref.run = runner(LfenceRdtsc{});
    add("mfence;rdtsc", Group::baseline, "asm").run = runner(MfenceRdtsc{});
    {
        const double hz = pmc::wall_time_clock().tsc_hz;
        Row& r = add("lfence;rdtsc->ns by hand", Group::baseline, "asm", "128-bit mul, >> 32: the conversion's floor");
        if (hz > 0) r.run = runner(LfenceRdtscToNs{static_cast<std::uint64_t>(1e9 * 4294967296.0 / hz), 12345});
        else r.unavailable = "no TSC rate: wall-time does not use the TSC here";
    }
    Row& clock_row = add("clock_gettime(MONOTONIC)", Group::baseline, "vDSO");
    clock_row.run = runner(ClockGettime{});
    {
        timespec res{};
        if (::clock_getres(CLOCK_MONOTONIC, &res) == 0 && res.tv_sec == 0 && res.tv_nsec > 1)
            clock_row.notes = fmt::format("resolution {} ns", res.tv_nsec);
    }
    Row& cpuid_row = add("cpuid;rdtsc", Group::baseline, "asm",
                         pmc::under_hypervisor() ? "cpuid exits to the hypervisor" : "");
    cpuid_row.slow = true;
    cpuid_row.run = runner(CpuidRdtsc{});

    std::vector<int> raw_fds;
    for (auto [name, config] : {std::pair<const char*, std::uint64_t>{"read(2) page-faults", PERF_COUNT_SW_PAGE_FAULTS},
                                {"read(2) task-clock", PERF_COUNT_SW_TASK_CLOCK}}) {
        Row& r = add(name, Group::baseline, "read()", "own perf_event_open fd, 24-byte read");
        r.slow = true;
        int fd = open_raw_software(config);
        if (fd < 0) {
            r.unavailable = fmt::format("perf_event_open failed: {}", std::strerror(errno));
            continue;
        }
        raw_fds.push_back(fd);
        r.must_work = true; // it opened: reads must not fail
        r.run = runner(RawRead{fd});
    }

    // pmc counters. Each lives until the end of main; the rows refer to them.
    std::vector<std::shared_ptr<void>> keep;
    auto add_pmc = [&](auto tag, std::string name, const char* event, bool must_work,
                       std::string notes = "") -> Row& {
        using C = typename decltype(tag)::type;
        Row& r = add(std::move(name), Group::pmc, "", std::move(notes));
        auto opened = C::try_open(event);
        if (!opened) {
            r.unavailable = first_line(opened.failure().message);
            if (must_work) {
                failed = true;
                errors.push_back(fmt::format("'{}' did not open: {}", r.name, opened.failure().message));
            }
            return r;
        }
        auto c = std::make_shared<C>(std::move(opened.value()));
        keep.push_back(c);
        r.must_work = true; // it opened: reads must not fail
        r.path = pmc::to_string(c->path());
        r.slow = c->path() == pmc::ReadPath::syscall;
        if (c->path() == pmc::ReadPath::clock && r.notes.empty()) r.notes = "no usable TSC: clock_gettime fallback";
        r.run = runner(PmcRead<C>{c.get()});
        return r;
    };
    namespace sz = pmc::serialize;
    Row& wall = add_pmc(Type<pmc::Counter>{}, "wall-time", "wall-time", true, "pmc::Counter: lfence (default)");
    add_pmc(Type<pmc::BasicCounter<sz::lfence, pmc::source::wall_time>>{}, "wall-time [source::wall_time]",
            "wall-time", true, "lfence; no read-path dispatch");
    add_pmc(Type<pmc::BasicCounter<sz::none>>{}, "wall-time [none]", "wall-time", true, "no fence");
    add_pmc(Type<pmc::BasicCounter<sz::mfence>>{}, "wall-time [mfence]", "wall-time", true);
    add_pmc(Type<pmc::BasicCounter<sz::cpuid>>{}, "wall-time [cpuid]", "wall-time", true,
            pmc::under_hypervisor() ? "cpuid exits to the hypervisor" : "")
        .slow = true;
    add_pmc(Type<pmc::Counter>{}, "tsc", "tsc", true, "ticks; lfence (default)");
    add_pmc(Type<pmc::BasicCounter<sz::none>>{}, "tsc [none]", "tsc", true, "ticks, no fence");
    add_pmc(Type<pmc::Counter>{}, "page-faults", "page-faults", false, "24-byte read(): value, enabled, running");
    add_pmc(Type<pmc::Counter>{}, "task-clock", "task-clock", false, "24-byte read(): value, enabled, running");
    add_pmc(Type<pmc::Counter>{}, "msr/tsc/", "msr/tsc/", false, "TSC ticks from perf's msr PMU");
    Row& insn_row = add_pmc(Type<pmc::Counter>{}, "instructions:u", "instructions:u", false);

    // Is there a PMU pmc reads with rdpmc? (instructions:u as the probe; a second instance counts the instructions.)
    std::optional<pmc::Counter> ic;
    {
        auto probe = pmc::Counter::try_open("instructions:u");
        if (!probe) {
            m.pmu_note = first_line(probe.failure().message);
        } else if (probe->path() != pmc::ReadPath::rdpmc) {
            m.pmu_note = "instructions:u opens but is read with read(), not rdpmc" +
                         (probe->notes().empty() ? std::string() : ": " + first_line(probe->notes().back()));
        } else {
            m.pmu = true;
            m.pmu_note = "instructions:u read with rdpmc";
            ic.emplace(std::move(probe.value()));
        }
    }
    if (!m.pmu && !insn_row.run) insn_row.unavailable = m.pmu_note;
    {
        auto wc = pmc::wall_time_clock();
        m.wall_time_source = wc.source;
        m.tsc_hz = wc.tsc_hz;
    }

    // Measure.
    std::vector<Row*> fast, cpuid_rows, sys_rows;
    for (auto& r : rows) {
        if (!r->run) continue;
        if (!r->slow) fast.push_back(r.get());
        else if (r->path == "read()") sys_rows.push_back(r.get());
        else cpuid_rows.push_back(r.get());
    }
    measure(fast, fast_r, fast_n, opt.quick ? 3 : 10);
    measure(cpuid_rows, cpuid_r, cpuid_n, 1);
    measure(sys_rows, sys_r, sys_n, 2);
    for (int fd : raw_fds) ::close(fd);
    for (auto& r : rows) {
        if (!r->failure.empty() && r->must_work) {
            failed = true;
            errors.push_back(fmt::format("'{}' opened but its read failed: {}", r->name, r->failure));
        }
    }

    // Instructions per read, measureme's way (PMU only).
    std::vector<InsnRow> insn;
    const char* const insn_names[] = {"instructions:u", "wall-time", "tsc"};
    if (m.pmu) {
        auto per_read = [&](auto read) -> double {
            EmptyRead base;
            std::uint64_t best_read = UINT64_MAX, best_base = UINT64_MAX;
            for (int i = 0; i < insn_reps + 1; ++i) { // the first repetition warms up
                const std::uint64_t t = counted_batch(*ic, read, insn_k);
                const std::uint64_t b = counted_batch(*ic, base, insn_k);
                if (i == 0) continue;
                best_read = std::min(best_read, t);
                best_base = std::min(best_base, b);
            }
            return (static_cast<double>(best_read) - static_cast<double>(best_base)) / insn_k;
        };
        for (const char* name : insn_names) {
            InsnRow row{name, std::nullopt, ""};
            try {
                pmc::Counter c{name};
                if (std::string_view(name) == "instructions:u" && c.path() != pmc::ReadPath::rdpmc)
                    row.reason = "second instructions:u counter is not read with rdpmc";
                else
                    row.per_read = per_read(PmcRead<pmc::Counter>{&c});
            } catch (const std::exception& e) {
                row.reason = first_line(e.what());
                failed = true;
                errors.push_back(fmt::format("instruction count of '{}' failed: {}", name, e.what()));
            }
            insn.push_back(std::move(row));
        }
    } else {
        for (const char* name : insn_names) insn.push_back({name, std::nullopt, m.pmu_note});
    }

    // Acceptance figures.
    const bool have_ratio = ref.measured() && wall.measured();
    const double wall_ratio = have_ratio ? wall.s.median / ref.s.median : 0;
    const bool have_vs_clock = wall.measured() && clock_row.measured();
    auto ratio_of = [&](const Row& r) -> std::optional<double> {
        if (!r.measured() || !ref.measured() || ref.s.median <= 0) return std::nullopt;
        return r.s.median / ref.s.median;
    };
    // pmc's read(2) path over a bare read(2) of the same event: each pmc batch over the bare batch of the same
    // round (the read(2) rows are interleaved), so load that comes and goes between rounds cancels; the median.
    struct SyscallRatio {
        std::string pmc_row, bare_row;
        std::optional<double> value;
    };
    std::vector<SyscallRatio> syscall_ratios;
    for (const char* event : {"page-faults", "task-clock"}) {
        SyscallRatio sr{event, std::string("read(2) ") + event, std::nullopt};
        const Row *p = nullptr, *b = nullptr;
        for (auto& r : rows) {
            if (r->name == sr.pmc_row) p = r.get();
            if (r->name == sr.bare_row) b = r.get();
        }
        if (p && b && p->measured() && b->measured() && p->path == "read()" &&
            p->per_read_ns.size() == b->per_read_ns.size()) {
            std::vector<double> q;
            for (std::size_t i = 0; i < p->per_read_ns.size(); ++i) q.push_back(p->per_read_ns[i] / b->per_read_ns[i]);
            sr.value = stats_of(q).median;
        }
        syscall_ratios.push_back(sr);
    }

    if (opt.json) {
        pmc::JsonWriter j;
        j.begin_object();
        j.field("benchmark", "pmc-bench-read").field("pmc_version", PMC_VERSION_STRING);
        j.key("machine").begin_object();
        j.field("cpu", m.cpu).field("kernel", m.kernel);
        j.key("hypervisor");
        if (m.hypervisor.empty()) j.null();
        else j.value(m.hypervisor);
        j.field("pmu", m.pmu).field("pmu_note", m.pmu_note);
        j.field("wall_time_source", m.wall_time_source).field("tsc_hz", m.tsc_hz);
        j.key("pinned_cpu");
        if (m.pinned_cpu < 0) j.null();
        else j.value(m.pinned_cpu);
        j.end_object();
        j.key("method").begin_object();
        j.field("unit", "ns per read").field("statistic", "min/median/p90 over batches of per-read time");
        j.field("timer", "clock_gettime(CLOCK_MONOTONIC) around each batch");
        j.field("loop_overhead_subtracted", false).field("interleaved", true).field("quick", opt.quick);
        j.end_object();
        j.key("rows").begin_array();
        for (auto& r : rows) {
            j.begin_object();
            j.field("name", r->name).field("group", r->group == Group::baseline ? "baseline" : "pmc");
            j.field("path", r->path.empty() ? "n/a" : r->path);
            const bool ok = r->measured();
            j.field("available", static_cast<bool>(r->run));
            if (ok) {
                j.field("batches", static_cast<int>(r->per_read_ns.size())).field("reads_per_batch", r->reads_per_batch);
                j.field("min_ns", r->s.min).field("median_ns", r->s.median).field("p90_ns", r->s.p90);
                j.key("ratio_to_lfence_rdtsc");
                if (auto x = ratio_of(*r)) j.value(*x);
                else j.null();
            }
            if (!r->unavailable.empty()) j.field("reason", r->unavailable);
            if (!r->failure.empty()) j.field("error", r->failure);
            if (!r->notes.empty()) j.field("notes", r->notes);
            j.end_object();
        }
        j.end_array();
        j.key("instructions_per_read").begin_object();
        j.field("method", "instructions:u around K reads minus the same loop reading a constant, / K (min of reps)");
        j.field("k", insn_k);
        j.key("rows").begin_array();
        for (auto& r : insn) {
            j.begin_object().field("name", r.name).key("value");
            if (r.per_read) j.value(*r.per_read);
            else j.null();
            if (!r.per_read) j.field("reason", r.reason);
            j.end_object();
        }
        j.end_array().end_object();
        j.key("acceptance").begin_object();
        j.key("wall_time_over_lfence_rdtsc").begin_object();
        if (have_ratio) j.field("value", wall_ratio).field("target_max", 1.3).field("met", wall_ratio <= 1.3);
        else j.key("value").null();
        j.end_object();
        j.key("wall_time_vs_clock_gettime").begin_object();
        if (have_vs_clock)
            j.field("wall_time_ns", wall.s.median).field("clock_gettime_ns", clock_row.s.median)
                .field("met", wall.s.median < clock_row.s.median);
        else j.key("wall_time_ns").null();
        j.end_object();
        for (const auto& sr : syscall_ratios) {
            j.key(sr.pmc_row + "_over_bare_read").begin_object();
            if (sr.value) j.field("value", *sr.value).field("target_max", 1.05).field("met", *sr.value <= 1.05);
            else j.key("value").null();
            j.end_object();
        }
        j.end_object();
        j.key("errors").begin_array();
        for (auto& e : errors) j.value(e);
        j.end_array();
        j.field("ok", !failed);
        j.end_object();
        fmt::print("{}\n", j.str());
        return failed ? 1 : 0;
    }

    // The table.
    fmt::print("pmc-bench-read: nanoseconds per read, min / MEDIAN / p90 over batches (quote the medians)\n");
    fmt::print("  CPU         {}\n", m.cpu);
    fmt::print("  kernel      {}{}\n", m.kernel, m.hypervisor.empty() ? "" : ", under " + m.hypervisor);
    fmt::print("  PMU         {}\n", m.pmu ? "yes (" + m.pmu_note + ")" : "no: " + m.pmu_note);
    fmt::print("  wall-time   {}", m.wall_time_source);
    if (m.tsc_hz > 0) fmt::print("; TSC {:.4f} GHz", m.tsc_hz / 1e9);
    fmt::print("\n");
    fmt::print("  batches     fast rows {} x {} reads, cpuid rows {} x {}, read(2) rows {} x {}; interleaved; "
               "timed with clock_gettime(MONOTONIC); loop overhead not subtracted{}\n",
               fast_r, fast_n, cpuid_r, cpuid_n, sys_r, sys_n,
               m.pinned_cpu >= 0 ? fmt::format("; pinned to CPU {}", m.pinned_cpu) : "; not pinned");
    fmt::print("\n{:<31} {:<14} {:>8} {:>8} {:>8} {:>9}  {}\n", "name", "path", "min", "median", "p90",
               "x lf;rdtsc", "notes");
    fmt::print("{}\n", std::string(100, '-'));
    Group current = Group::pmc;
    for (auto& r : rows) {
        if (r->group != current || &r == &rows.front()) {
            current = r->group;
            fmt::print("{}\n", current == Group::baseline ? "# baselines: bare instructions and system calls, no pmc"
                                                          : "# pmc counters");
        }
        if (!r->run) {
            fmt::print("{:<31} {:<14} {:>8} {:>8} {:>8} {:>9}  {}\n", r->name, "n/a", "-", "-", "-", "-",
                       r->unavailable);
        } else if (!r->failure.empty()) {
            fmt::print("{:<31} {:<14} {:>8} {:>8} {:>8} {:>9}  FAILED: {}\n", r->name, r->path, "-", "-", "-", "-",
                       first_line(r->failure));
        } else {
            auto x = ratio_of(*r);
            fmt::print("{:<31} {:<14} {:>8} {:>8} {:>8} {:>9}  {}\n", r->name, r->path, fmt_ns(r->s.min),
                       fmt_ns(r->s.median), fmt_ns(r->s.p90), x ? fmt::format("{:.2f}", *x) : "-", r->notes);
        }
    }
    fmt::print("# instructions per read over a constant (measureme's way: instructions:u around {} reads)\n", insn_k);
    for (auto& r : insn) {
        if (r.per_read) fmt::print("{:<31} +{:.1f} instructions per read\n", r.name, *r.per_read);
        else fmt::print("{:<31} n/a: {}\n", r.name, r.reason);
    }

    fmt::print("\nAcceptance\n");
    if (have_ratio)
        fmt::print("  wall-time / (lfence;rdtsc) = {:.2f} (target <= 1.3): {}\n", wall_ratio,
                   wall_ratio <= 1.3 ? "met" : "MISSED");
    else
        fmt::print("  wall-time / (lfence;rdtsc) = n/a (a row was not measured)\n");
    if (have_vs_clock)
        fmt::print("  wall-time vs clock_gettime: {} ns vs {} ns (target: less): {}\n", fmt_ns(wall.s.median),
                   fmt_ns(clock_row.s.median), wall.s.median < clock_row.s.median ? "met" : "MISSED");
    else
        fmt::print("  wall-time vs clock_gettime: n/a (a row was not measured)\n");
    for (const auto& sr : syscall_ratios) {
        if (sr.value)
            fmt::print("  {} / {} = {:.3f} (median of paired batches; target <= 1.05): {}\n", sr.pmc_row,
                       sr.bare_row, *sr.value, *sr.value <= 1.05 ? "met" : "MISSED");
        else
            fmt::print("  {} / {} = n/a (a row was not measured, or pmc does not read it with read(2))\n",
                       sr.pmc_row, sr.bare_row);
    }
    for (auto& e : errors) fmt::print(stderr, "pmc-bench-read: error: {}\n", e);
    return failed ? 1 : 0;
}
