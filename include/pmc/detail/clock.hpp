// SPDX-License-Identifier: MIT
// pmc/detail/clock.hpp: converting TSC ticks to nanoseconds for the "wall-time" counter.
//
// Preferred source: the kernel's own conversion, published in a perf event's mmap page (time_mult, time_shift,
// time_zero, and time_cycles/time_mask for a counter narrower than 64 bits) when cap_user_time_zero is set;
// wall-time then equals the perf clock. Every wall-time open reads it afresh, under the page's seqlock, from the
// page of a dummy software event opened for the purpose (3 system calls), so a counter opened after the kernel
// changed its conversion gets the new one; a counter keeps the conversion it opened with. Virtual machines whose
// kernel does not use the TSC as sched_clock (kvm-clock guests, like our CI machines) leave that bit clear; pmc
// then stops asking, and calibrates the TSC once per process against CLOCK_MONOTONIC_RAW over ~20 ms (error ~ a
// few ppm; only the first wall-time open pays it) and aligns the result to CLOCK_MONOTONIC. AArch64's generic
// timer states its frequency and needs no calibration. Without an invariant TSC (or off x86-64 and AArch64)
// wall-time reads clock_gettime.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/arch.hpp>
#include <pmc/detail/page.hpp>
#include <pmc/detail/sys.hpp>

#include <time.h>

#include <atomic>
#include <cstdint>

PMC_BEGIN_NAMESPACE
namespace detail {

struct TscConversion {
    bool usable = false;     ///< false: wall-time falls back to clock_gettime(CLOCK_MONOTONIC)
    std::uint64_t mult = 0;  ///< ns = zero + (ticks * mult) >> shift, with a 128-bit product
    std::uint32_t shift = 0;
    std::uint64_t zero = 0;
    ShortTicks ticks;        ///< applied to the raw ticks first (cap_user_time_short); identity otherwise
    double ticks_per_second = 0;
    const char* source = ""; ///< how the conversion was obtained, for `pmc doctor` and docs
};

__extension__ typedef unsigned __int128 uint128;

BOOST_FORCEINLINE std::uint64_t ticks_to_ns(std::uint64_t ticks, std::uint64_t mult, std::uint32_t shift,
                                            std::uint64_t zero) noexcept {
    return zero + static_cast<std::uint64_t>((static_cast<uint128>(ticks) * mult) >> (shift & 63)); // & 63: no shift-by-64 guard code
}

inline std::uint64_t clock_ns(clockid_t clock) noexcept {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

/// The kernel's conversion from a control page, read under its seqlock, if the page publishes one.
inline bool conversion_from_page(const perf_event_mmap_page& page, TscConversion& out) {
    const PageSnapshot s = snapshot(page);
    if (!s.user_time_zero() || s.time_mult == 0) return false;
    out.mult = s.time_mult;
    out.shift = s.time_shift;
    out.zero = s.time_zero;
    out.ticks = short_ticks(s.user_time_short(), s.time_cycles, s.time_mask);
    out.ticks_per_second = 1e9 * static_cast<double>(std::uint64_t{1} << s.time_shift) / s.time_mult;
    out.source = "the kernel's perf clock conversion (mmap page time_mult/time_shift/time_zero)";
    return true;
}

/// The kernel's conversion as of now, from the control page of a dummy software event opened for the purpose.
inline bool conversion_from_perf_page(TscConversion& out) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    FileDescriptor fd(system_calls().perf_event_open(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (!fd) return false;
    void* addr = system_calls().mmap(nullptr, page_size(), PROT_READ, MAP_SHARED, fd.get(), 0);
    if (addr == MAP_FAILED) return false;
    Mapping map(addr, page_size());
    return conversion_from_page(*static_cast<const perf_event_mmap_page*>(addr), out);
}

/// One (tsc, ns) pair taken as close together as possible: the tightest of several brackets.
inline void paired_sample(clockid_t clock, std::uint64_t& tsc, std::uint64_t& ns) {
    std::uint64_t best = UINT64_MAX;
    for (int i = 0; i < 9; ++i) {
        lfence();
        std::uint64_t t0 = rdtsc();
        std::uint64_t n = clock_ns(clock);
        lfence();
        std::uint64_t t1 = rdtsc();
        if (t1 - t0 < best) {
            best = t1 - t0;
            tsc = t0 + (t1 - t0) / 2;
            ns = n;
        }
    }
}

inline void calibrate(TscConversion& out) {
    std::uint64_t tsc0 = 0, ns0 = 0, tsc1 = 0, ns1 = 0;
    paired_sample(CLOCK_MONOTONIC_RAW, tsc0, ns0);
    timespec pause{0, 20 * 1000 * 1000};
    while (::nanosleep(&pause, &pause) != 0) {
    }
    paired_sample(CLOCK_MONOTONIC_RAW, tsc1, ns1);
    const double hz = static_cast<double>(tsc1 - tsc0) * 1e9 / static_cast<double>(ns1 - ns0);
    out.shift = 32;
    out.mult = static_cast<std::uint64_t>(1e9 * 4294967296.0 / hz + 0.5);
    out.ticks_per_second = hz;
    // Align to CLOCK_MONOTONIC so wall-time readings are comparable with clock_gettime.
    std::uint64_t tsc_now = 0, mono_now = 0;
    paired_sample(CLOCK_MONOTONIC, tsc_now, mono_now);
    out.zero = mono_now - ticks_to_ns(tsc_now, out.mult, out.shift, 0);
    out.source = "a 20 ms calibration against CLOCK_MONOTONIC_RAW (the kernel publishes no TSC conversion here)";
}

/// A conversion that never needs the kernel's page: the generic timer's stated frequency (AArch64) or a one-time
/// calibration (x86-64), computed once per process (thread-safe), or clock_gettime where neither is possible.
inline const TscConversion& own_tsc_conversion() {
    static const TscConversion conversion = [] {
        TscConversion c;
        if (!has_user_counters || !has_invariant_tsc()) {
            c.source = has_user_counters ? "clock_gettime(CLOCK_MONOTONIC): this CPU has no constant-rate TSC"
                                         : "clock_gettime(CLOCK_MONOTONIC): no user-readable TSC on this architecture";
            return c;
        }
#if PMC_ARCH_AARCH64
        const double hz = static_cast<double>(timer_frequency());
        c.shift = 32;
        c.mult = static_cast<std::uint64_t>(1e9 * 4294967296.0 / hz + 0.5);
        c.ticks_per_second = hz;
        std::uint64_t now_ticks = 0, now_ns = 0;
        paired_sample(CLOCK_MONOTONIC, now_ticks, now_ns);
        c.zero = now_ns - ticks_to_ns(now_ticks, c.mult, c.shift, 0);
        c.source = "the generic timer CNTVCT_EL0 at its stated CNTFRQ_EL0";
#else
        calibrate(c);
#endif
        c.usable = true;
        return c;
    }();
    return conversion;
}

/// Whether wall-time reads apply a page's cap_user_time_short wrap (3 instructions, ~1 ns): only where a kernel
/// publishes it (arm64's generic timer). x86 kernels never set it (the TSC is 64 bits); if one did, pmc would
/// use its own conversion instead of a page whose ticks it does not unwrap.
inline constexpr bool timer_may_be_short = PMC_ARCH_AARCH64 != 0;

/// The conversion a wall-time counter opened now uses: the kernel's, read afresh from its page, where it publishes
/// one; pmc's own otherwise.
inline TscConversion tsc_conversion() {
    static std::atomic<bool> kernel_publishes{true}; // until a page says otherwise: then never ask again
    if (has_user_counters && kernel_publishes.load(std::memory_order_relaxed) && has_invariant_tsc()) {
        TscConversion c;
        if (conversion_from_perf_page(c) && (timer_may_be_short || c.ticks.mask == ShortTicks{}.mask)) {
            c.usable = true;
            return c;
        }
        kernel_publishes.store(false, std::memory_order_relaxed);
    }
    return own_tsc_conversion();
}

} // namespace detail
PMC_END_NAMESPACE
