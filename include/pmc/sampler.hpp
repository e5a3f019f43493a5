// SPDX-License-Identifier: MIT
// pmc/sampler.hpp: pmc::Sampler, RAII sampling of any event string with a period or a frequency, and the bias
// check that comes with every result.
//
//     pmc::SamplerOptions o;
//     o.period = 1;                                   // or o.frequency = 1000 (samples a second)
//     o.fields = pmc::sample::ip | pmc::sample::addr;
//     pmc::Sampler s{"page-faults", o};
//     work();                                         // s.wait(ms) + s.drain(on_sample) while it runs, if long
//     pmc::BiasCheck check = s.stop([](const pmc::Sample& x) { use(x.addr); });
//     // check.estimated (samples x period), check.exact, check.ratio, check.lost, check.warning
//
// The event samples the calling thread (with `inherit`, also the threads and processes it creates later; with
// `pid`, another process) into a ring buffer of 1 + 2^n pages that drain() empties; records that wrap the ring's
// end are copied whole into a fixed scratch buffer, and nothing is allocated per record. The same event is also
// counted exactly by a second, non-sampling counter opened beside it (it keeps counting while the kernel
// throttles the sampler), so a result always holds the estimate (samples x period, or the sum of the samples'
// periods in frequency mode) beside the exact count, their ratio, the samples the kernel lost (PERF_FORMAT_LOST
// from Linux 6.0, and the ring's LOST records) and how often it throttled, with a warning when estimate and count
// disagree beyond the tolerance. There is no way to get the estimate without the exact count: stop() returns both.
//
// Under `pmc emulate --cache` (no PMU, no perf_event_open) a load-latency event (cpu/mem-loads,ldlat=N/P) opens on
// the emulated PMU instead: its plugin samples every Nth load of the calling thread from its cache model and
// drain() asks it for the samples (a request to the emulator, which writes them as the kernel's PERF_RECORD_SAMPLE
// records), decoded here as the kernel's; the exact count is the plugin's count of the loads sampled from.
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/detail/explain.hpp>
#include <pmc/detail/records.hpp>
#include <pmc/detail/ring.hpp>
#include <pmc/detail/sys.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/emulated.hpp>
#include <pmc/error.hpp>
#include <pmc/event.hpp>
#include <pmc/hybrid.hpp>
#include <pmc/sample.hpp>

#include <poll.h>
#include <sys/types.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE

/// How to sample, beyond the event string.
struct SamplerOptions {
    /// A sample every `period` events; or about `frequency` samples a second (the kernel adapts the period and
    /// each sample carries the one it stood for). Exactly one must be set, here or in the event string's
    /// period=/freq= terms.
    std::uint64_t period = 0;
    std::uint64_t frequency = 0;
    /// What each sample records: an OR of pmc::sample::*. Frequency mode adds PERIOD (the estimate needs it).
    std::uint64_t fields = sample::ip | sample::tid | sample::time | sample::addr;
    /// Callchain frames kept per sample with sample::callchain (the kernel's limit is
    /// kernel.perf_event_max_stack, 127 by default).
    std::uint16_t callchain_depth = 64;
    /// Data pages in each ring: a power of two. 64 pages (256 KiB with 4 KiB pages) hold about 5,000 samples of the
    /// default fields. An unprivileged user may lock kernel.perf_event_mlock_kb (516 KiB by default) per CPU, then
    /// RLIMIT_MEMLOCK.
    std::size_t data_pages = 64;
    /// Also sample the threads and processes created after opening (perf's inherit). The kernel maps no ring for a
    /// per-thread inherited event, so pmc opens one per CPU (as perf record does); drain() reads them all.
    bool inherit = false;
    /// Sample another process (its pid) instead of the calling thread.
    pid_t pid = 0;
    /// Start when the sampled process next calls exec (pmc sample starts its command this way).
    bool enable_on_exec = false;
    /// Also record the process's mmap()s (PERF_RECORD_MMAP2, code and data), handed to drain()'s second callback.
    bool mappings = false;
    /// The bias check's tolerance: estimate and exact count agree when they differ by at most this fraction of the
    /// exact count plus one sampling period (the events after the last sample, which no sample stands for).
    double tolerance = 0.05;
    /// perf's user-mode-only retry where the kernel refuses kernel-mode counting (see OpenOptions).
    bool exclude_kernel_fallback = true;
    std::string sysfs_root{default_sysfs_root};
};

/// Estimate against exact count: what every sampling result is. Fill the counts and call judge() to get the
/// verdict (Sampler::stop() does both).
struct BiasCheck {
    std::string event;
    bool frequency_mode = false;
    bool summed_periods = false;    ///< the samples carried PERIOD: the estimate is their sum
    std::uint64_t period = 0;       ///< the fixed period (period mode)
    std::uint64_t samples = 0;      ///< samples received
    std::uint64_t estimated = 0;    ///< samples x period; or the sum of the samples' PERIOD where they carry it
    std::uint64_t exact = 0;        ///< the same event counted by a non-sampling counter
    bool exact_missing = false;     ///< no counter could be read after the run: `exact` is 0, not a count
    double exact_running_fraction = 1; ///< < 1: the exact counter was multiplexed (and scaled)
    std::uint64_t lost = 0;         ///< records the kernel could not write (ring full): samples, and with
                                    ///< SamplerOptions::mappings also mmap records
    bool lost_from_kernel_count = false; ///< `lost` includes PERF_FORMAT_LOST (Linux 6.0+), not just LOST records
    std::uint64_t throttled = 0;    ///< times the kernel throttled the sampler (kernel.perf_event_max_sample_rate)
    std::uint64_t malformed = 0;    ///< records pmc refused (sizes that cannot be right): not counted as samples
    std::uint64_t allowance = 0;    ///< one period: events after the last sample (frequency mode: the events in
                                    ///< 1/frequency s of enabled time, or the last period if larger)
    double tolerance = 0.05;

    // The verdict (judge()).
    double ratio = 0;               ///< estimated / exact (1 when both are 0)
    bool agrees = false;
    std::string warning;            ///< empty when they agree
};

inline const char* estimate_method(const BiasCheck& b) {
    return b.summed_periods ? "sum of the samples' periods" : "samples x period";
}

/// Fills ratio, agrees and warning: agreement is |estimated - exact| <= tolerance * exact + allowance.
inline void judge(BiasCheck& b) {
    const double exact = static_cast<double>(b.exact), est = static_cast<double>(b.estimated);
    b.warning.clear();
    if (b.exact_missing) { // nothing to check the estimate against: never "agrees"
        b.ratio = 0;
        b.agrees = false;
        b.warning = "no exact count of '" + b.event + "': neither its non-sampling twin nor the sampling event " +
                    "could be read after the run, so the estimate (" + std::to_string(b.estimated) +
                    ") cannot be checked and is not to be trusted.";
        return;
    }
    b.ratio = b.exact == 0 ? (b.estimated == 0 ? 1.0 : HUGE_VAL) : est / exact;
    b.agrees = std::fabs(est - exact) <= b.tolerance * exact + static_cast<double>(b.allowance);
    if (b.agrees) return;
    char ratio[64];
    std::snprintf(ratio, sizeof ratio, "%.4g", b.ratio);
    char tol[32];
    std::snprintf(tol, sizeof tol, "%g%%", b.tolerance * 100);
    b.warning = std::string("sampling ") + (est < exact ? "undercounts" : "overcounts") + " '" + b.event +
                "': the estimate (" + estimate_method(b) + ") is " + std::to_string(b.estimated) + ", " + ratio +
                " x the exact count " + std::to_string(b.exact) + " (tolerance " + tol + " + one period). ";
    std::string why;
    if (b.lost)
        why += std::to_string(b.lost) + " samples were lost because the ring buffer was full (more data_pages, or "
               "drain() more often); ";
    if (b.throttled)
        why += "the kernel throttled sampling " + std::to_string(b.throttled) + " times (it allows "
               "kernel.perf_event_max_sample_rate samples a second: a longer period or lower frequency); ";
    if (b.malformed) why += std::to_string(b.malformed) + " records were malformed and skipped; ";
    if (b.exact_running_fraction < 1)
        why += "the exact counter was multiplexed (counted " + std::to_string(b.exact_running_fraction * 100) +
               "% of the time, scaled); ";
    // Lost samples are countable: with a fixed period they may account for the whole gap. Throttling and
    // multiplexing cannot be sized, so the sampling's own bias stays a candidate beside them.
    const bool lost_covers_gap = b.lost && b.period && est < exact &&
                                 est + static_cast<double>(b.lost) * static_cast<double>(b.period) >=
                                     exact * (1 - b.tolerance) - static_cast<double>(b.allowance);
    const char* bias = "the sampling itself is biased here (the PMU raises its overflow late or early, the kernel "
                       "runs the event slower than asked, or the event skips samples, as load-latency sampling "
                       "does): do not scale samples by the period for this event; ";
    if (why.empty()) why = std::string("nothing was lost or throttled, so ") + bias;
    else if (!lost_covers_gap) why += std::string("where that does not account for the whole gap, ") + bias;
    why.resize(why.size() - 2);
    b.warning += "Why: " + why + ".";
}

/// The bias check in a few lines, for people.
inline std::string to_text(const BiasCheck& b) {
    char ratio[64];
    std::snprintf(ratio, sizeof ratio, "%.4f", b.ratio);
    std::string s = "bias check for '" + b.event + "': estimated " + std::to_string(b.estimated) + " (" +
                    std::to_string(b.samples) + " samples, " + estimate_method(b) + "), exact " +
                    std::to_string(b.exact) + ", ratio " + ratio + "; lost " + std::to_string(b.lost) +
                    (b.lost_from_kernel_count ? "" : " (LOST records only: kernel < 6.0)") + ", throttled " +
                    std::to_string(b.throttled);
    if (b.malformed) s += ", malformed records " + std::to_string(b.malformed);
    s += b.agrees ? "; agrees within tolerance\n" : "\nWARNING: " + b.warning + "\n";
    return s;
}

/// Counts while sampling runs (no estimate: that comes only with the exact count, from stop()).
struct SamplingProgress {
    std::uint64_t samples = 0;
    std::uint64_t lost = 0;      ///< from LOST records so far
    std::uint64_t throttled = 0, unthrottled = 0;
    std::uint64_t malformed = 0; ///< SAMPLE records pmc could not parse
    std::uint64_t wrapped = 0;   ///< records that ran past the ring's end (read from the scratch copy)
    std::uint64_t corrupt_bytes = 0, oversized = 0;
};

namespace detail {
struct SamplerRing {
    int cpu = -1;
    FileDescriptor fd;
    Mapping map;
    RingReader reader;
};

inline std::optional<std::uint64_t> max_sample_rate() {
    auto text = read_file("/proc/sys/kernel/perf_event_max_sample_rate");
    return text ? parse_number(trim(*text)) : std::nullopt;
}

struct SamplerAccess; // tests: rings over memory that is not the kernel's

/// A sampler on the emulated PMU (pmc emulate --cache): the plugin's id for it and the buffer its records are
/// drained into (allocated at open, and not written until a drain: zeroing it would pass it through the modelled
/// caches and evict the program's lines). Closing it (the destructor) frees the plugin's side.
struct EmulatedSampling {
    std::uint64_t id = 0;
    std::unique_ptr<unsigned char[]> buffer;
    std::size_t buffer_size = 0;

    EmulatedSampling() = default;
    EmulatedSampling(EmulatedSampling&& o) noexcept
        : id(o.id), buffer(std::move(o.buffer)), buffer_size(o.buffer_size) {
        o.id = 0;
    }
    EmulatedSampling& operator=(EmulatedSampling&& o) noexcept {
        if (this != &o) {
            close();
            id = o.id;
            buffer = std::move(o.buffer);
            buffer_size = o.buffer_size;
            o.id = 0;
        }
        return *this;
    }
    ~EmulatedSampling() { close(); }
    void close() noexcept {
        if (!id) return;
        emulated::SamplerRequest r;
        r.id = id;
        emulated::request(emulated::Op::sampler_close, &r);
        id = 0;
    }
    /// One request about this sampler (stop, or a drain into the buffer: `room` bytes of it).
    emulated::SamplerRequest ask(emulated::Op op, std::size_t room = 0) noexcept {
        emulated::SamplerRequest r;
        r.id = id;
        r.buffer = reinterpret_cast<std::uintptr_t>(buffer.get());
        r.buffer_size = room;
        emulated::request(op, &r);
        return r;
    }
};
} // namespace detail

/// RAII sampling of one event (see the top of this file). Move-only. Drain from one thread at a time.
class Sampler {
public:
    /// Opens and starts sampling `event` (unless options.enable_on_exec). Throws pmc::error with the reason.
    explicit Sampler(std::string_view event, const SamplerOptions& options = {})
        : Sampler(try_open(event, options).value()) {}

    static Result<Sampler> try_open(std::string_view event, const SamplerOptions& options = {});

    Sampler(Sampler&&) noexcept = default;
    Sampler& operator=(Sampler&&) noexcept = default;
    Sampler(const Sampler&) = delete;
    Sampler& operator=(const Sampler&) = delete;
    ~Sampler() = default; // closing the fds stops the events; unmapping frees the rings (noexcept)

    /// Hands every sample now in the rings to on_sample(const pmc::Sample&) and returns how many. No system
    /// call, no allocation (on the emulated PMU: one request to the emulator per buffer of records). Call it while
    /// running (after wait()) so the rings do not fill.
    template <class OnSample>
    std::size_t drain(OnSample&& on_sample) {
        return drain(on_sample, [](const detail::MappingRecord&) {});
    }
    /// The same, with on_mapping(const pmc::detail::MappingRecord&) for SamplerOptions::mappings.
    template <class OnSample, class OnMapping>
    std::size_t drain(OnSample&& on_sample, OnMapping&& on_mapping);

    /// Waits up to timeout_ms (-1: no limit) until a ring is half full or the sampled process exits (poll(2)).
    /// True if there is data to drain.
    bool wait(int timeout_ms);

    /// Stops sampling, drains what is left into on_sample, reads the exact count and the kernel's lost count and
    /// returns the bias check. Later calls return the same check and hand out nothing.
    template <class OnSample>
    BiasCheck stop(OnSample&& on_sample) {
        return stop(on_sample, [](const detail::MappingRecord&) {});
    }
    template <class OnSample, class OnMapping>
    BiasCheck stop(OnSample&& on_sample, OnMapping&& on_mapping);
    /// Stops and discards the samples still in the rings; returns the bias check.
    BiasCheck stop() {
        return stop([](const Sample&) {});
    }

    SamplingProgress progress() const noexcept { return progress_; }
    const EventSpec& event() const noexcept { return spec_; }
    /// The sampling event's attr as opened (after perf's fallbacks).
    const perf_event_attr& attr() const noexcept { return attr_; }
    /// What pmc chose and why (fallbacks, rings, the exact counter), for people.
    const std::vector<std::string>& notes() const noexcept { return notes_; }
    std::size_t rings() const noexcept { return rings_.size(); }
    /// Bytes of sample data each ring holds.
    std::size_t ring_bytes() const noexcept { return rings_.empty() ? 0 : rings_.front()->reader.data_size(); }
    bool stopped() const noexcept { return stopped_; }

private:
    friend struct detail::SamplerAccess;
    Sampler() = default;

    template <class OnSample, class OnMapping>
    void handle(const perf_event_header& h, const unsigned char* record, OnSample& on_sample, OnMapping& on_mapping);
    static Result<Sampler> open_emulated(std::string_view event, const LoadLatencyEvent& load,
                                         const SamplerOptions& options);
    template <class OnSample>
    std::uint64_t drain_emulated(OnSample& on_sample); // returns the samples the plugin still holds

    EventSpec spec_;
    perf_event_attr attr_{};
    SamplerOptions options_;
    std::vector<std::string> notes_;
    std::vector<std::unique_ptr<detail::SamplerRing>> rings_;
    detail::EmulatedSampling emulated_; // the emulated PMU's sampler (pmc emulate --cache), or none (id 0)
    detail::FileDescriptor exact_fd_; // the non-sampling twin
    SamplingProgress progress_;
    std::uint64_t period_sum_ = 0, last_period_ = 0;
    bool stopped_ = false;
    BiasCheck result_;
};

template <class OnSample, class OnMapping>
void Sampler::handle(const perf_event_header& h, const unsigned char* record, OnSample& on_sample,
                     OnMapping& on_mapping) {
    switch (h.type) {
    case PERF_RECORD_SAMPLE: {
        Sample s;
        if (detail::parse_sample(record, h.size, attr_.sample_type, s)) {
            ++progress_.malformed;
            return;
        }
        ++progress_.samples;
        period_sum_ += s.period;
        last_period_ = s.period;
        on_sample(static_cast<const Sample&>(s));
        return;
    }
    case PERF_RECORD_LOST: {
        std::uint64_t lost = 0;
        if (detail::parse_lost(record, h.size, lost)) progress_.lost += lost;
        else ++progress_.malformed;
        return;
    }
    case PERF_RECORD_THROTTLE: ++progress_.throttled; return;
    case PERF_RECORD_UNTHROTTLE: ++progress_.unthrottled; return;
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2: {
        detail::MappingRecord m;
        if (detail::parse_mapping(h, record, h.size, m)) on_mapping(static_cast<const detail::MappingRecord&>(m));
        return;
    }
    default: return; // COMM, EXIT, FORK, ... : not asked for, or not needed
    }
}

template <class OnSample>
std::uint64_t Sampler::drain_emulated(OnSample& on_sample) {
    auto no_mapping = [](const detail::MappingRecord&) {};
    for (;;) {
        const detail::emulated::SamplerRequest r =
            emulated_.ask(detail::emulated::Op::sampler_drain, emulated_.buffer_size);
        const std::size_t used = r.error ? 0 : static_cast<std::size_t>(r.buffer_size);
        for (std::size_t at = 0; at + sizeof(perf_event_header) <= used;) {
            perf_event_header h;
            std::memcpy(&h, emulated_.buffer.get() + at, sizeof h);
            if (h.size < sizeof h || at + h.size > used) {
                progress_.corrupt_bytes += used - at;
                break;
            }
            handle(h, emulated_.buffer.get() + at, on_sample, no_mapping);
            at += h.size;
        }
        if (r.error || used == 0 || r.pending == 0) return r.error ? 0 : r.pending;
    }
}

template <class OnSample, class OnMapping>
std::size_t Sampler::drain(OnSample&& on_sample, OnMapping&& on_mapping) {
    const std::uint64_t before = progress_.samples;
    if (emulated_.id) drain_emulated(on_sample);
    for (auto& ring : rings_) {
        const detail::RingStats st = ring->reader.drain(
            [&](const perf_event_header& h, const unsigned char* record) { handle(h, record, on_sample, on_mapping); });
        progress_.wrapped += st.wrapped;
        progress_.corrupt_bytes += st.corrupt_bytes;
        progress_.oversized += st.oversized;
    }
    return static_cast<std::size_t>(progress_.samples - before);
}

inline bool Sampler::wait(int timeout_ms) {
    if (emulated_.id) // the samples are taken as the program runs: there is nothing to wait for
        return !stopped_ && emulated_.ask(detail::emulated::Op::sampler_drain, 0).pending > 0;
    for (auto& ring : rings_)
        if (ring->reader.pending()) return true;
    if (rings_.empty() || stopped_) return false;
    pollfd fds[64];
    const std::size_t n = rings_.size() < 64 ? rings_.size() : 64;
    for (std::size_t i = 0; i < n; ++i) fds[i] = pollfd{rings_[i]->fd.get(), POLLIN, 0};
    while (::poll(fds, static_cast<nfds_t>(n), timeout_ms) < 0 && errno == EINTR) {
    }
    for (auto& ring : rings_)
        if (ring->reader.pending()) return true;
    return false;
}

template <class OnSample, class OnMapping>
BiasCheck Sampler::stop(OnSample&& on_sample, OnMapping&& on_mapping) {
    if (stopped_) return result_;
    stopped_ = true;
    if (emulated_.id) {
        // The emulated PMU: the plugin's counts are final at the stop; then the samples it still holds.
        const detail::emulated::SamplerRequest r = emulated_.ask(detail::emulated::Op::sampler_stop);
        drain(on_sample, on_mapping);
        BiasCheck& b = result_;
        b.event = spec_.text;
        b.period = attr_.sample_period;
        b.samples = progress_.samples;
        b.estimated = progress_.samples * attr_.sample_period;
        b.exact = r.loads;
        b.lost = r.lost > progress_.lost ? r.lost : progress_.lost;
        b.lost_from_kernel_count = true;
        b.malformed = progress_.malformed;
        // Each thread followed counts from its own first load: each may end up to one period past its last sample.
        b.allowance = attr_.sample_period * (r.inherit ? r.inherit : 1);
        b.tolerance = options_.tolerance;
        judge(b);
        return b;
    }
    // The sampler stops before its twin, as it started after it: the twin sees every event the sampler could.
    for (auto& ring : rings_) detail::system_calls().ioctl(ring->fd.get(), PERF_EVENT_IOC_DISABLE, 0);
    if (exact_fd_) detail::system_calls().ioctl(exact_fd_.get(), PERF_EVENT_IOC_DISABLE, 0);
    drain(on_sample, on_mapping);

    BiasCheck& b = result_;
    b.event = spec_.text;
    b.frequency_mode = attr_.freq;
    b.period = attr_.freq ? 0 : attr_.sample_period;
    b.samples = progress_.samples;
    b.summed_periods = (attr_.sample_type & PERF_SAMPLE_PERIOD) != 0;
    b.estimated = b.summed_periods ? period_sum_ : progress_.samples * attr_.sample_period;
    b.allowance = attr_.freq ? last_period_ : attr_.sample_period; // frequency mode: see below, with the rate
    b.tolerance = options_.tolerance;
    b.throttled = progress_.throttled;
    b.malformed = progress_.malformed;
    // The sampling events' own counts and the kernel's lost counts: value, enabled, running[, lost].
    const bool format_lost = (attr_.read_format & PERF_FORMAT_LOST) != 0;
    std::uint64_t own = 0, kernel_lost = 0, own_enabled = 0, exact_enabled = 0;
    bool own_ok = true;
    for (auto& ring : rings_) {
        std::uint64_t v[4] = {0, 0, 0, 0};
        const std::size_t want = (format_lost ? 4 : 3) * sizeof(std::uint64_t);
        if (detail::system_calls().read(ring->fd.get(), v, want) != static_cast<ssize_t>(want)) {
            own_ok = false;
            continue;
        }
        own += v[0];
        own_enabled += v[1];
        if (format_lost) kernel_lost += v[3];
    }
    b.lost = kernel_lost > progress_.lost ? kernel_lost : progress_.lost;
    b.lost_from_kernel_count = format_lost && own_ok;
    bool exact_ok = false;
    if (exact_fd_) {
        std::uint64_t v[3] = {0, 0, 0};
        if (detail::system_calls().read(exact_fd_.get(), v, sizeof v) == static_cast<ssize_t>(sizeof v)) {
            exact_ok = true;
            b.exact = v[0];
            exact_enabled = v[1];
            if (v[2] != 0 && v[2] < v[1]) {
                b.exact_running_fraction = static_cast<double>(v[2]) / static_cast<double>(v[1]);
                b.exact = static_cast<std::uint64_t>(static_cast<double>(v[0]) / b.exact_running_fraction);
            }
        }
    }
    if (!exact_ok && own_ok) {
        b.exact = own;
        notes_.push_back("exact count from the sampling event itself (its non-sampling twin could not be read): it "
                         "does not count while the kernel throttles it");
    } else if (!exact_ok) {
        b.exact_missing = true;
    }
    // Frequency mode: one period is the events in 1/frequency s of enabled time (the event's rate over the run, per
    // thread time as the kernel adapts it), at least the last period used. A run shorter than that may have no
    // sample, and then agrees; the last period alone would be 0 there and call any count a bias.
    const std::uint64_t enabled_ns = exact_ok ? exact_enabled : own_enabled;
    if (attr_.freq && attr_.sample_freq && enabled_ns) {
        const double expected = static_cast<double>(b.exact) * 1e9 /
                                (static_cast<double>(enabled_ns) * static_cast<double>(attr_.sample_freq));
        if (expected > static_cast<double>(b.allowance)) b.allowance = static_cast<std::uint64_t>(std::ceil(expected));
    }
    judge(b);
    return b;
}

namespace detail {

inline Failure sampler_failure(const EventSpec& spec, std::string why) {
    return make_failure(EINVAL, "cannot sample '" + spec.text + "': " + std::move(why));
}

inline Result<Mapping> map_ring(const FileDescriptor& fd, const EventSpec& spec, std::size_t pages) {
    const std::size_t bytes = (1 + pages) * page_size();
    void* addr = system_calls().mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (addr == MAP_FAILED) {
        const int err = errno;
        auto limit = read_file("/proc/sys/kernel/perf_event_mlock_kb");
        return make_failure(err, "cannot sample '" + spec.text + "': mmap of its ring buffer (1 + " +
                                     std::to_string(pages) + " pages, " + std::to_string(bytes / 1024) +
                                     " KiB) failed: " + std::strerror(err) +
                                     ".\nWhy: an unprivileged user may lock kernel.perf_event_mlock_kb (" +
                                     (limit ? std::string(trim(*limit)) : std::string("?")) +
                                     " KiB) per CPU for perf rings, then RLIMIT_MEMLOCK (ulimit -l).\nFix: fewer "
                                     "data pages (SamplerOptions::data_pages, pmc sample -m), a higher ulimit -l, "
                                     "or sudo sysctl kernel.perf_event_mlock_kb=N.");
    }
    return Mapping(addr, bytes);
}

} // namespace detail

inline Result<Sampler> Sampler::open_emulated(std::string_view event, const LoadLatencyEvent& load,
                                              const SamplerOptions& options) {
    namespace em = detail::emulated;
    const EmulatedPmu& pmu = *emulated_pmu();
    const auto refuse = [&](const std::string& why) {
        return make_failure(EOPNOTSUPP, "cannot sample '" + std::string(event) + "' on the emulated PMU: " + why);
    };
    if (!load.problem.empty()) return refuse(load.problem);
    if (!pmu.load_sampling)
        return refuse(pmu.cache_model ? "this plugin does not sample loads (an older pmc's): run the program with the "
                                        "pmc emulate of the pmc version it was built with"
                                      : "load-latency samples come from the cache model, and this run has none. Fix: "
                                        "run the program under `pmc emulate --cache -- PROGRAM`");
    // The period: SamplerOptions's, else the event's period=N term (as for a kernel event).
    const std::uint64_t period = options.period ? options.period : load.period;
    if (options.frequency)
        return refuse("it samples every Nth load, exactly: give a period (SamplerOptions::period), not a frequency");
    if (!period)
        return refuse("it samples every Nth load, exactly: give the period (SamplerOptions::period, or period=N in "
                      "the event), e.g. 1009 (a prime: a round period can fall on one phase of a regular pattern)");
    if (options.pid || options.enable_on_exec)
        return refuse("it samples the calling thread's loads (with inherit, also the threads created after the open), "
                      "not another process's (no pid or enable_on_exec): sample the whole program from outside with "
                      "`pmc sample --emulate --cache -- PROGRAM` (every thread and child process from its first load)");
    if (options.mappings)
        return refuse("it writes no mapping records (SamplerOptions::mappings): read the mappings with "
                      "pmc::AddressMap::try_of_process()");
    if (options.fields & ~em::sampler_fields)
        return refuse("it writes ip, tid, time, addr, cpu, period, weight and data_src; not " +
                      detail::hex(options.fields & ~em::sampler_fields) + " (a callchain needs the kernel)");
    const std::size_t pages = options.data_pages;
    if (pages == 0 || (pages & (pages - 1)) != 0)
        return refuse("data_pages must be a power of two, not " + std::to_string(pages));

    Sampler s;
    s.spec_.text = std::string(event);
    s.spec_.name = "mem-loads";
    s.options_ = options;
    s.options_.period = period;
    s.attr_.size = sizeof(perf_event_attr);
    s.attr_.sample_type = options.fields;
    s.attr_.sample_period = period;
    s.attr_.exclude_kernel = 1;
    // Held between drains: what a ring of data_pages would hold (more are lost and counted, as the kernel does).
    s.emulated_.buffer_size = pages * detail::page_size();
    s.emulated_.buffer.reset(new unsigned char[s.emulated_.buffer_size]);
    em::SamplerRequest r;
    r.period = period;
    r.sample_type = options.fields;
    r.min_latency = load.min_latency;
    std::size_t record = sizeof(perf_event_header);
    for (std::uint64_t bit = 1; bit; bit <<= 1)
        if ((options.fields & bit) && bit != PERF_SAMPLE_WEIGHT_STRUCT) record += 8;
    if ((options.fields & PERF_SAMPLE_WEIGHT_STRUCT) && !(options.fields & PERF_SAMPLE_WEIGHT)) record += 8;
    r.capacity = s.emulated_.buffer_size / record;
    r.inherit = options.inherit ? 1 : 0;
    em::request(em::Op::sampler_open, &r);
    if (r.id == 0 || r.error) {
        switch (static_cast<em::SamplerError>(r.error)) {
        case em::SamplerError::thread_busy:
            return refuse("this thread already has a load sampler open on the emulated PMU (one per thread: stop it "
                          "first)");
        case em::SamplerError::inherit_busy:
            return refuse("another sampler of this process follows new threads already (inherit: one at a time on the "
                          "emulated PMU): stop it first, or open this one without inherit");
        case em::SamplerError::whole_program:
            return refuse("`pmc sample --emulate` samples every thread of this program already (from its first load); "
                          "run the program under `pmc emulate --cache` to sample inside it");
        case em::SamplerError::no_model:
            return refuse("this run has no cache model. Fix: run the program under `pmc emulate --cache -- PROGRAM`");
        default: return refuse("the plugin refused the request (error " + std::to_string(r.error) + ")");
        }
    }
    s.emulated_.id = r.id;
    s.notes_.push_back(modelled_load_sample_note(r.latencies) + "; model " + pmu.cache_geometry);
    s.notes_.push_back("samples every " + std::to_string(period) + "th load whose modelled latency is at least " +
                       std::to_string(load.min_latency) + " cycles (ldlat); the exact count is the plugin's count of "
                       "those loads");
    if (options.inherit)
        s.notes_.push_back("inherit: the threads this process creates after the open are sampled too, each from its "
                           "first load (any thread's, not only the opener's; not child processes: their samples cannot "
                           "reach this process's drains); one period of allowance per thread");
    // Started last, after every allocation of the open: what the open adds to the count is a constant.
    if (const em::SamplerRequest started = s.emulated_.ask(em::Op::sampler_start); started.error)
        return refuse("the plugin did not start it (error " + std::to_string(started.error) + ")");
    return s;
}

inline Result<Sampler> Sampler::try_open(std::string_view event, const SamplerOptions& options) {
    if (emulated_pmu()) // under pmc emulate: a load-latency event samples the cache model
        if (const auto load = load_latency_event(event)) return open_emulated(event, *load, options);
    auto parsed = try_parse_event(event, options.sysfs_root);
    if (!parsed) return parsed.failure();
    const EventSpec& spec = *parsed;
    if (spec.kind != EventKind::perf)
        return detail::sampler_failure(spec, "only kernel perf events can be sampled; pmc's clocks and composites "
                                             "(wall-time, tsc, instructions-minus-irqs) are read, not sampled");
    std::uint64_t period = options.period, frequency = options.frequency;
    if (!period && !frequency) {
        period = spec.sample_period;
        frequency = spec.sample_freq;
    }
    if ((period != 0) == (frequency != 0))
        return detail::sampler_failure(spec, period ? "give a period or a frequency, not both"
                                                    : "give a period (SamplerOptions::period, -c N) or a frequency "
                                                      "(SamplerOptions::frequency, -F HZ)");
    if (frequency) {
        auto max_rate = detail::max_sample_rate();
        if (max_rate && frequency > *max_rate)
            return detail::sampler_failure(spec, "frequency " + std::to_string(frequency) + " Hz is above "
                                           "kernel.perf_event_max_sample_rate (" + std::to_string(*max_rate) +
                                           ").\nFix: a lower frequency, or a period (-c N).");
    }
    if (options.fields & ~sample::supported)
        return detail::sampler_failure(spec, "SamplerOptions::fields has bits pmc does not parse (" +
                                                 detail::hex(options.fields & ~sample::supported) +
                                                 "); use pmc::sample::* fields");
    const std::size_t pages = options.data_pages;
    if (pages == 0 || (pages & (pages - 1)) != 0)
        return detail::sampler_failure(spec, "data_pages must be a power of two (the kernel's ring is 1 + 2^n pages), "
                                             "not " + std::to_string(pages));
    if (!(options.tolerance >= 0))
        return detail::sampler_failure(spec, "the bias check's tolerance must be 0 or more");

    Sampler s;
    s.spec_ = spec;
    s.options_ = options;
    perf_event_attr attr = spec.attr;
    // PERIOD only where the period varies: with it, the kernel samples a software event at every event whatever
    // the period (perf_swevent_event), each sample standing for 1.
    attr.sample_type = options.fields | (frequency ? std::uint64_t{PERF_SAMPLE_PERIOD} : 0u);
    if (frequency) {
        attr.freq = 1;
        attr.sample_freq = frequency;
    } else {
        attr.freq = 0;
        attr.sample_period = period;
    }
    if (attr.sample_type & PERF_SAMPLE_CALLCHAIN) attr.sample_max_stack = options.callchain_depth;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_LOST;
    attr.inherit = options.inherit;
    attr.enable_on_exec = options.enable_on_exec;
    attr.watermark = 1;
    attr.wakeup_watermark = static_cast<std::uint32_t>(pages * detail::page_size() / 2);
    if (options.mappings) attr.mmap = attr.mmap_data = attr.mmap2 = 1;
    if (auto failure = detail::place_on_core_pmu(spec, attr, nullptr, s.notes_, options.sysfs_root))
        return std::move(*failure);

    const std::vector<int> cpus = options.inherit ? detail::online_cpus() : std::vector<int>{-1};
    for (int cpu : cpus) {
        perf_event_attr a = attr;
        auto fd = detail::open_event(spec, a, -1, s.notes_, /*start_disabled=*/true, options.pid,
                                     options.exclude_kernel_fallback, cpu);
        if (!fd && fd.failure().code.value() == EINVAL && (a.read_format & PERF_FORMAT_LOST)) {
            // PERF_FORMAT_LOST is Linux 6.0: older kernels refuse the read_format bit; lost samples then come only
            // from the ring's LOST records.
            attr.read_format &= ~std::uint64_t{PERF_FORMAT_LOST};
            a = attr;
            fd = detail::open_event(spec, a, -1, s.notes_, true, options.pid, options.exclude_kernel_fallback, cpu);
            if (fd)
                s.notes_.push_back("this kernel refuses PERF_FORMAT_LOST (Linux 6.0+): lost samples are counted from "
                                   "the ring's LOST records only, which miss losses at the end of a run");
        }
        if (!fd) {
            Failure f = fd.failure();
            if (f.code.value() == EOPNOTSUPP || f.code.value() == EINVAL)
                f.message += "\n(Sampling needs a PMU that raises an interrupt on overflow: uncore and msr PMUs "
                             "count but do not sample, and a frequency needs a PMU that can be re-armed.)";
            return f;
        }
        attr = a; // as opened: later CPUs and the twin start from perf's fallbacks
        auto ring = std::make_unique<detail::SamplerRing>();
        ring->cpu = cpu;
        ring->fd = std::move(*fd);
        auto map = detail::map_ring(ring->fd, spec, pages);
        if (!map) return map.failure();
        ring->map = std::move(*map);
        auto* page = static_cast<perf_event_mmap_page*>(ring->map.get());
        ring->reader = detail::RingReader(page, static_cast<const unsigned char*>(ring->map.get()) + detail::page_size(),
                                          pages * detail::page_size());
        s.rings_.push_back(std::move(ring));
    }
    s.attr_ = attr;
    if (options.inherit)
        s.notes_.push_back("inherit: one ring per CPU (" + std::to_string(cpus.size()) +
                           "), as the kernel maps no ring for a per-thread inherited event");

    // The twin: the same event, not sampling, for the exact count.
    perf_event_attr twin = attr;
    twin.sample_period = 0;
    twin.freq = 0;
    twin.sample_type = 0;
    twin.sample_max_stack = 0;
    twin.watermark = 0;
    twin.wakeup_watermark = 0;
    twin.mmap = twin.mmap_data = twin.mmap2 = 0;
    twin.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    std::vector<std::string> twin_notes;
    auto twin_fd = detail::open_event(spec, twin, -1, twin_notes, true, options.pid, false, -1);
    if (twin_fd) {
        s.exact_fd_ = std::move(*twin_fd);
        s.notes_.push_back("exact count from a second, non-sampling counter of the same event");
    } else {
        s.notes_.push_back("the exact count comes from the sampling event itself: its non-sampling twin did not open (" +
                           twin_fd.failure().message.substr(0, twin_fd.failure().message.find('\n')) + ")");
    }
    if (!options.enable_on_exec) {
        // The twin starts first, so it counts every event the sampler can see.
        if (s.exact_fd_ && detail::system_calls().ioctl(s.exact_fd_.get(), PERF_EVENT_IOC_ENABLE, 0) != 0)
            return make_failure(errno, "cannot start the exact counter of '" + spec.text + "': " + std::strerror(errno));
        for (auto& ring : s.rings_)
            if (detail::system_calls().ioctl(ring->fd.get(), PERF_EVENT_IOC_ENABLE, 0) != 0)
                return make_failure(errno, "cannot start sampling '" + spec.text + "': " + std::strerror(errno));
    }
    return s;
}

namespace detail {
/// Test access: a sampler whose single ring is memory the test writes (a fake control page and data area), to
/// drain records it built, split across the end, or garbage.
struct SamplerAccess {
    static Sampler over_memory(perf_event_mmap_page* page, const unsigned char* data, std::size_t data_size,
                               std::uint64_t sample_type, std::uint64_t period = 1) {
        Sampler s;
        s.spec_.text = s.spec_.name = "test";
        s.attr_.sample_type = sample_type;
        s.attr_.sample_period = period;
        auto ring = std::make_unique<SamplerRing>();
        ring->reader = RingReader(page, data, data_size);
        s.rings_.push_back(std::move(ring));
        return s;
    }
};
} // namespace detail

PMC_END_NAMESPACE
