// SPDX-License-Identifier: MIT
// pmc/detail/arch.hpp: the few instructions pmc's hot path is made of (rdpmc, rdtsc, fences, cpuid) and the
// per-thread owner token that lets a counter notice it is read from the wrong thread or after fork().
#pragma once

#include <pmc/config.hpp>

#include <pthread.h>

#include <atomic>
#include <cstdint>

#if PMC_ARCH_X86_64
#include <cpuid.h>
#endif

PMC_BEGIN_NAMESPACE
namespace detail {

/// True where pmc can read counters and the time-stamp counter itself (x86-64, AArch64); elsewhere counters use
/// read() and clock_gettime.
inline constexpr bool has_user_counters = PMC_ARCH_X86_64 != 0 || PMC_ARCH_AARCH64 != 0;

#if PMC_ARCH_X86_64
/// Reads performance counter `counter` (the mmap page's index - 1). Not serializing by itself. The memory clobber
/// keeps the compiler from moving the seqlock load that validates this read to before it.
/// (Both instructions clear the upper halves of RAX and RDX, so the outputs are taken as 64-bit values and need no
/// zero-extension.)
BOOST_FORCEINLINE std::uint64_t rdpmc(std::uint32_t counter) noexcept {
    std::uint64_t lo, hi;
    asm volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(counter) : "memory");
    return (hi << 32) | lo;
}

BOOST_FORCEINLINE std::uint64_t rdtsc() noexcept {
    std::uint64_t lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (hi << 32) | lo;
}

BOOST_FORCEINLINE void lfence() noexcept { asm volatile("lfence" ::: "memory"); }
BOOST_FORCEINLINE void mfence() noexcept { asm volatile("mfence" ::: "memory"); }
BOOST_FORCEINLINE void cpuid_barrier() noexcept {
    std::uint32_t a = 0, b, c = 0, d;
    asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d)::"memory");
}
BOOST_FORCEINLINE void cpu_relax() noexcept { asm volatile("pause" ::: "memory"); }

struct CpuidRegs {
    std::uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};
inline CpuidRegs cpuid(std::uint32_t leaf, std::uint32_t subleaf = 0) {
    CpuidRegs r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
}
/// CPUID 0x80000007 EDX bit 8: the TSC ticks at a constant rate in every P-/C-state.
inline bool has_invariant_tsc() {
    if (cpuid(0x80000000).eax < 0x80000007) return false;
    return (cpuid(0x80000007).edx >> 8) & 1;
}
/// CPUID 1 ECX bit 31: running under a hypervisor.
inline bool under_hypervisor() { return (cpuid(1).ecx >> 31) & 1; }
#elif PMC_ARCH_AARCH64
// AArch64: the mmap page's index - 1 names the counter: 31 is the cycle counter PMCCNTR_EL0, 0-30 the event
// counters PMEVCNTR<n>_EL0 (an mrs needs the register number at compile time, hence the table). User access needs
// sysctl kernel.perf_user_access=1 and attr.config1 bit 1, which pmc sets when it opens a core-PMU event; the kernel
// then publishes the index as on x86 (libperf reads it the same way). "tsc" is the virtual counter CNTVCT_EL0,
// which ticks at the constant CNTFRQ_EL0. isb is the fence: it completes earlier instructions before the read.
#define PMC_AARCH64_READ(reg)                                                                                     \
    [] {                                                                                                          \
        std::uint64_t v;                                                                                          \
        asm volatile("mrs %0, " #reg : "=r"(v)::"memory");                                                       \
        return v;                                                                                                 \
    }
inline std::uint64_t rdpmc(std::uint32_t counter) noexcept {
    using Read = std::uint64_t (*)();
    static constexpr Read event_counters[31] = {
        PMC_AARCH64_READ(pmevcntr0_el0),  PMC_AARCH64_READ(pmevcntr1_el0),  PMC_AARCH64_READ(pmevcntr2_el0),
        PMC_AARCH64_READ(pmevcntr3_el0),  PMC_AARCH64_READ(pmevcntr4_el0),  PMC_AARCH64_READ(pmevcntr5_el0),
        PMC_AARCH64_READ(pmevcntr6_el0),  PMC_AARCH64_READ(pmevcntr7_el0),  PMC_AARCH64_READ(pmevcntr8_el0),
        PMC_AARCH64_READ(pmevcntr9_el0),  PMC_AARCH64_READ(pmevcntr10_el0), PMC_AARCH64_READ(pmevcntr11_el0),
        PMC_AARCH64_READ(pmevcntr12_el0), PMC_AARCH64_READ(pmevcntr13_el0), PMC_AARCH64_READ(pmevcntr14_el0),
        PMC_AARCH64_READ(pmevcntr15_el0), PMC_AARCH64_READ(pmevcntr16_el0), PMC_AARCH64_READ(pmevcntr17_el0),
        PMC_AARCH64_READ(pmevcntr18_el0), PMC_AARCH64_READ(pmevcntr19_el0), PMC_AARCH64_READ(pmevcntr20_el0),
        PMC_AARCH64_READ(pmevcntr21_el0), PMC_AARCH64_READ(pmevcntr22_el0), PMC_AARCH64_READ(pmevcntr23_el0),
        PMC_AARCH64_READ(pmevcntr24_el0), PMC_AARCH64_READ(pmevcntr25_el0), PMC_AARCH64_READ(pmevcntr26_el0),
        PMC_AARCH64_READ(pmevcntr27_el0), PMC_AARCH64_READ(pmevcntr28_el0), PMC_AARCH64_READ(pmevcntr29_el0),
        PMC_AARCH64_READ(pmevcntr30_el0),
    };
    if (counter == 31) return PMC_AARCH64_READ(pmccntr_el0)();
    return counter < 31 ? event_counters[counter]() : 0;
}
#undef PMC_AARCH64_READ
inline std::uint64_t rdtsc() noexcept {
    std::uint64_t v;
    asm volatile("mrs %0, cntvct_el0" : "=r"(v)::"memory");
    return v;
}
inline std::uint64_t timer_frequency() noexcept {
    std::uint64_t v;
    asm volatile("mrs %0, cntfrq_el0" : "=r"(v));
    return v;
}
BOOST_FORCEINLINE void lfence() noexcept { asm volatile("isb" ::: "memory"); }
BOOST_FORCEINLINE void mfence() noexcept { asm volatile("dsb sy\n\tisb" ::: "memory"); }
BOOST_FORCEINLINE void cpuid_barrier() noexcept { asm volatile("dsb sy\n\tisb" ::: "memory"); }
BOOST_FORCEINLINE void cpu_relax() noexcept { asm volatile("yield" ::: "memory"); }
inline bool has_invariant_tsc() { return timer_frequency() != 0; } // the generic timer has a constant rate
inline bool under_hypervisor() { return false; }
#else
inline std::uint64_t rdpmc(std::uint32_t) noexcept { return 0; }
inline std::uint64_t rdtsc() noexcept { return 0; }
inline void lfence() noexcept { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void mfence() noexcept { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void cpuid_barrier() noexcept { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void cpu_relax() noexcept {}
inline bool has_invariant_tsc() { return false; }
inline bool under_hypervisor() { return false; }
#endif

/// Sign-extends the low (64 - shift) bits of `raw` (shift = 64 - pmc_width), as the kernel documents for rdpmc.
BOOST_FORCEINLINE std::int64_t sign_extend(std::uint64_t raw, unsigned shift) noexcept {
    return static_cast<std::int64_t>(raw << shift) >> shift;
}

// Owner tokens. Each thread that opens a counter gets a token unique in the process's lifetime; a counter
// remembers its opener's. In a fork() child the forking thread's token is cleared, so a counter copied into the
// child no longer matches. Checking costs one thread-local load and a compare. initial-exec keeps the load to a
// %fs-relative access even when pmc is compiled into a shared library.
__attribute__((tls_model("initial-exec"))) inline thread_local std::uint64_t thread_token = 0;

inline std::atomic<std::uint64_t>& token_source() {
    static std::atomic<std::uint64_t> next{0};
    return next;
}

inline void clear_token_in_child() { thread_token = 0; }

/// The calling thread's token, assigned on first use (not on the hot path).
inline std::uint64_t acquire_thread_token() {
    static const bool registered = (::pthread_atfork(nullptr, nullptr, &clear_token_in_child), true);
    (void)registered;
    if (thread_token == 0) thread_token = ++token_source();
    return thread_token;
}

} // namespace detail
PMC_END_NAMESPACE
