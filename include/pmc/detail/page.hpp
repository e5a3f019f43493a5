// SPDX-License-Identifier: MIT
// pmc/detail/page.hpp: consistent snapshots of a perf event's mmap control page (perf_event_mmap_page).
//
// The kernel rewrites the page (index, offset, times) when it schedules the event in, bracketing the update with
// `lock` increments. A reader takes lock, reads the fields, and retries if lock changed; see the comment on
// perf_event_mmap_page in linux/perf_event.h.
#pragma once

#include <pmc/config.hpp>
#include <pmc/detail/arch.hpp>

#include <linux/perf_event.h>

#include <cstdint>

PMC_BEGIN_NAMESPACE
namespace detail {

/// A read the compiler must perform exactly here (the kernel, or a test playing it, changes the page).
template <class T>
BOOST_FORCEINLINE T load_once(const T& field) noexcept {
    return *static_cast<const volatile T*>(&field);
}
BOOST_FORCEINLINE void compiler_barrier() noexcept { asm volatile("" ::: "memory"); }

// Capability bits of perf_event_mmap_page::capabilities.
inline constexpr std::uint64_t cap_bit0_is_deprecated_bit = 1u << 1;
inline constexpr std::uint64_t cap_user_rdpmc_bit = 1u << 2;
inline constexpr std::uint64_t cap_user_time_bit = 1u << 3;
inline constexpr std::uint64_t cap_user_time_zero_bit = 1u << 4;
inline constexpr std::uint64_t cap_user_time_short_bit = 1u << 5;

/// Whether the capabilities allow user-space rdpmc. Kernels before 3.12 overloaded bit 0 and did not set
/// cap_bit0_is_deprecated; their capability bits are not trusted, so such pages never allow rdpmc.
inline bool user_rdpmc_allowed(std::uint64_t capabilities) {
    return (capabilities & cap_bit0_is_deprecated_bit) && (capabilities & cap_user_rdpmc_bit);
}

/// Whether the page publishes the conversion of TSC ticks to time since its last update (time_offset and friends).
inline bool user_time_allowed(std::uint64_t capabilities) {
    return (capabilities & cap_bit0_is_deprecated_bit) && (capabilities & cap_user_time_bit);
}

/// Whether the page's time counter is narrower than 64 bits (see ShortTicks).
inline bool user_time_short_allowed(std::uint64_t capabilities) {
    return (capabilities & cap_bit0_is_deprecated_bit) && (capabilities & cap_user_time_short_bit);
}

struct PageSnapshot {
    std::uint32_t version = 0;
    std::uint32_t lock = 0;
    std::uint32_t index = 0; ///< 0: not on a hardware counter now; else rdpmc counter + 1
    std::int64_t offset = 0;
    std::uint64_t capabilities = 0;
    std::uint16_t pmc_width = 0;
    std::uint16_t time_shift = 0;
    std::uint32_t time_mult = 0;
    std::uint64_t time_zero = 0;
    std::uint64_t time_cycles = 0, time_mask = 0; ///< meaningful with cap_user_time_short (see short_ticks)
    std::uint64_t time_enabled = 0, time_running = 0;

    bool user_rdpmc() const { return user_rdpmc_allowed(capabilities); }
    bool user_time_zero() const {
        return (capabilities & cap_bit0_is_deprecated_bit) && (capabilities & cap_user_time_zero_bit);
    }
    bool user_time_short() const { return user_time_short_allowed(capabilities); }
};

/// The counter behind the page's time conversion may be narrower than 64 bits (cap_user_time_short: arm64's
/// generic timer always, x86 never). The ABI then reads ticks as time_cycles + ((ticks - time_cycles) &
/// time_mask), so a counter that wrapped since the kernel's last update still converts right. Without the bit,
/// cycles 0 and an all-ones mask leave the ticks as they are: no branch on the read.
struct ShortTicks {
    std::uint64_t cycles = 0;
    std::uint64_t mask = ~std::uint64_t{0};
    BOOST_FORCEINLINE std::uint64_t operator()(std::uint64_t ticks) const noexcept {
        return cycles + ((ticks - cycles) & mask);
    }
};
inline ShortTicks short_ticks(bool time_short, std::uint64_t time_cycles, std::uint64_t time_mask) noexcept {
    return time_short ? ShortTicks{time_cycles, time_mask} : ShortTicks{};
}

/// Reads the page's fields consistently (retrying while the writer is mid-update or moved on).
inline PageSnapshot snapshot(const perf_event_mmap_page& page) noexcept {
    PageSnapshot s;
    for (;;) {
        s.lock = load_once(page.lock);
        compiler_barrier();
        if (s.lock & 1) { // only a concurrent writer (a test playing the kernel) leaves it odd
            cpu_relax();
            continue;
        }
        s.version = load_once(page.version);
        s.index = load_once(page.index);
        s.offset = load_once(page.offset);
        s.capabilities = load_once(page.capabilities);
        s.pmc_width = load_once(page.pmc_width);
        s.time_shift = load_once(page.time_shift);
        s.time_mult = load_once(page.time_mult);
        s.time_zero = load_once(page.time_zero);
        s.time_cycles = load_once(page.time_cycles);
        s.time_mask = load_once(page.time_mask);
        s.time_enabled = load_once(page.time_enabled);
        s.time_running = load_once(page.time_running);
        compiler_barrier();
        if (load_once(page.lock) == s.lock) return s;
    }
}

} // namespace detail
PMC_END_NAMESPACE
