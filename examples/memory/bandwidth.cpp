// SPDX-License-Identifier: MIT
// bandwidth.cpp: see bandwidth.hpp.
//
// The kernels are written in x86-64 assembly (GNU inline asm) so that what is measured is exactly the loop shown:
// a compiler would vectorize the "scalar" loops, or turn the write and copy loops into calls to memset and
// memcpy. Each kernel makes `passes` passes over its buffer without leaving the asm block; scalar kernels move 8
// bytes per instruction, 16 per 128-byte iteration; vector kernels 8 instructions per iteration (AVX-512: 64
// bytes each, AVX2: 32). Elsewhere than x86-64, plain C++ loops stand in for the scalar kernels.
#include "bandwidth.hpp"

#include <fmt/format.h>

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

namespace pmc_mem {

namespace {

volatile std::uint64_t g_kernel_sink; // every kernel's result ends here

/// A kernel: `passes` passes over `bytes` bytes (dst and/or src); read kernels return the sum of the 64-bit words
/// they read (so tests can check that every pass read every word), the others 0.
using KernelFn = std::uint64_t (*)(char* dst, const char* src, std::size_t bytes, std::size_t passes);

#if defined(__x86_64__)

// What the write kernels store (the *-0 probes store zeros instead).
constexpr std::uint64_t nonzero_pattern = 0x0123456789abcdefull;

// Every operand the asm changes is early-clobber ("+&r"): it is written before the inputs (begin, end) are read
// for the last time, so it must not share their register (GCC would otherwise give p and begin one register,
// both holding src at entry).
//
// The end of a one-pointer loop: next iteration, or back to the start for the next pass.
#define PMC_BW_TAIL(step)                                                                                         \
    "add $" #step ", %[p]\n\t"                                                                                    \
    "cmp %[end], %[p]\n\t"                                                                                        \
    "jb 1b\n\t"                                                                                                   \
    "mov %[begin], %[p]\n\t"                                                                                      \
    "dec %[passes]\n\t"                                                                                           \
    "jnz 1b\n\t"
// The same for copies (source and destination pointers).
#define PMC_BW_COPY_TAIL(step)                                                                                    \
    "add $" #step ", %[s]\n\t"                                                                                    \
    "add $" #step ", %[d]\n\t"                                                                                    \
    "cmp %[send], %[s]\n\t"                                                                                       \
    "jb 1b\n\t"                                                                                                   \
    "mov %[sbegin], %[s]\n\t"                                                                                     \
    "mov %[dbegin], %[d]\n\t"                                                                                     \
    "dec %[passes]\n\t"                                                                                           \
    "jnz 1b\n\t"

// Scalar: 8-byte loads and stores, 16 per 128-byte iteration.
#define PMC_R8(off, acc) "add " #off "(%[p]), %[" #acc "]\n\t"
#define PMC_W8(off) "mov %[v], " #off "(%[p])\n\t"
#define PMC_M8(off) "addq $1, " #off "(%[p])\n\t"
#define PMC_C8x4(off0, off1, off2, off3)                                                                          \
    "mov " #off0 "(%[s]), %[t0]\n\t"                                                                              \
    "mov " #off1 "(%[s]), %[t1]\n\t"                                                                              \
    "mov " #off2 "(%[s]), %[t2]\n\t"                                                                              \
    "mov " #off3 "(%[s]), %[t3]\n\t"                                                                              \
    "mov %[t0], " #off0 "(%[d])\n\t"                                                                              \
    "mov %[t1], " #off1 "(%[d])\n\t"                                                                              \
    "mov %[t2], " #off2 "(%[d])\n\t"                                                                              \
    "mov %[t3], " #off3 "(%[d])\n\t"

PMC_MEM_KERNEL std::uint64_t read_scalar(char*, const char* src, std::size_t bytes, std::size_t passes) {
    std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    const char* p = src;
    asm volatile("1:\n\t" PMC_R8(0, a0) PMC_R8(8, a1) PMC_R8(16, a2) PMC_R8(24, a3) PMC_R8(32, a4) PMC_R8(40, a5)
                     PMC_R8(48, a6) PMC_R8(56, a7) PMC_R8(64, a0) PMC_R8(72, a1) PMC_R8(80, a2) PMC_R8(88, a3)
                         PMC_R8(96, a4) PMC_R8(104, a5) PMC_R8(112, a6) PMC_R8(120, a7) PMC_BW_TAIL(128)
                 : [p] "+&r"(p), [passes] "+&r"(passes), [a0] "+&r"(a0), [a1] "+&r"(a1), [a2] "+&r"(a2), [a3] "+&r"(a3),
                   [a4] "+&r"(a4), [a5] "+&r"(a5), [a6] "+&r"(a6), [a7] "+&r"(a7)
                 : [begin] "r"(src), [end] "r"(src + bytes)
                 : "cc", "memory");
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

PMC_MEM_KERNEL std::uint64_t write_scalar(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    const std::uint64_t v = 0x0123456789abcdefull;
    asm volatile("1:\n\t" PMC_W8(0) PMC_W8(8) PMC_W8(16) PMC_W8(24) PMC_W8(32) PMC_W8(40) PMC_W8(48) PMC_W8(56)
                     PMC_W8(64) PMC_W8(72) PMC_W8(80) PMC_W8(88) PMC_W8(96) PMC_W8(104) PMC_W8(112) PMC_W8(120)
                         PMC_BW_TAIL(128)
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes), [v] "r"(v)
                 : "cc", "memory");
    return 0;
}

PMC_MEM_KERNEL std::uint64_t rmw_scalar(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    asm volatile("1:\n\t" PMC_M8(0) PMC_M8(8) PMC_M8(16) PMC_M8(24) PMC_M8(32) PMC_M8(40) PMC_M8(48) PMC_M8(56)
                     PMC_M8(64) PMC_M8(72) PMC_M8(80) PMC_M8(88) PMC_M8(96) PMC_M8(104) PMC_M8(112) PMC_M8(120)
                         PMC_BW_TAIL(128)
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes)
                 : "cc", "memory");
    return 0;
}

PMC_MEM_KERNEL std::uint64_t copy_scalar(char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    const char* s = src;
    char* d = dst;
    std::uint64_t t0, t1, t2, t3;
    asm volatile("1:\n\t" PMC_C8x4(0, 8, 16, 24) PMC_C8x4(32, 40, 48, 56) PMC_C8x4(64, 72, 80, 88)
                     PMC_C8x4(96, 104, 112, 120) PMC_BW_COPY_TAIL(128)
                 : [s] "+&r"(s), [d] "+&r"(d), [passes] "+&r"(passes), [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2),
                   [t3] "=&r"(t3)
                 : [sbegin] "r"(src), [dbegin] "r"(dst), [send] "r"(src + bytes)
                 : "cc", "memory");
    return 0;
}

// Vector kernels: 8 instructions per iteration. zmm/ymm 0-3 accumulate or carry data, 4-5 hold constants.
#define PMC_VR(reg, off, acc) "vpaddq " #off "(%[p]), %%" #reg #acc ", %%" #reg #acc "\n\t"
#define PMC_VW(insn, reg, off) insn " %%" #reg "4, " #off "(%[p])\n\t"
#define PMC_VM(reg, mov, off, t) "vpaddq " #off "(%[p]), %%" #reg "5, %%" #reg #t "\n\t" mov " %%" #reg #t ", " #off "(%[p])\n\t"
#define PMC_VL(reg, mov, off, t) mov " " #off "(%[s]), %%" #reg #t "\n\t"
#define PMC_VS(reg, insn, off, t) insn " %%" #reg #t ", " #off "(%[d])\n\t"

// AVX-512 (64-byte vectors; 512 bytes per iteration).
PMC_MEM_KERNEL std::uint64_t read_avx512(char*, const char* src, std::size_t bytes, std::size_t passes) {
    const char* p = src;
    std::uint64_t sum;
    asm volatile("vpxorq %%zmm0, %%zmm0, %%zmm0\n\tvpxorq %%zmm1, %%zmm1, %%zmm1\n\t"
                 "vpxorq %%zmm2, %%zmm2, %%zmm2\n\tvpxorq %%zmm3, %%zmm3, %%zmm3\n\t"
                 "1:\n\t" PMC_VR(zmm, 0, 0) PMC_VR(zmm, 64, 1) PMC_VR(zmm, 128, 2) PMC_VR(zmm, 192, 3)
                     PMC_VR(zmm, 256, 0) PMC_VR(zmm, 320, 1) PMC_VR(zmm, 384, 2) PMC_VR(zmm, 448, 3) PMC_BW_TAIL(512)
                 // The sum of the four accumulators' lanes, for the tests.
                 "vpaddq %%zmm1, %%zmm0, %%zmm0\n\tvpaddq %%zmm3, %%zmm2, %%zmm2\n\tvpaddq %%zmm2, %%zmm0, %%zmm0\n\t"
                 "vextracti64x4 $1, %%zmm0, %%ymm1\n\tvpaddq %%ymm1, %%ymm0, %%ymm0\n\t"
                 "vextracti128 $1, %%ymm0, %%xmm1\n\tvpaddq %%xmm1, %%xmm0, %%xmm0\n\t"
                 "vpshufd $0x4e, %%xmm0, %%xmm1\n\tvpaddq %%xmm1, %%xmm0, %%xmm0\n\tvmovq %%xmm0, %[sum]\n\t"
                 "vzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes), [sum] "=r"(sum)
                 : [begin] "r"(src), [end] "r"(src + bytes)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3");
    return sum;
}

template <std::uint64_t V = nonzero_pattern>
PMC_MEM_KERNEL std::uint64_t write_avx512(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    const std::uint64_t v = V;
    asm volatile("vpbroadcastq %[v], %%zmm4\n\t"
                 "1:\n\t" PMC_VW(
                     "vmovdqa64", zmm, 0) PMC_VW("vmovdqa64", zmm, 64) PMC_VW("vmovdqa64", zmm, 128)
                     PMC_VW("vmovdqa64", zmm, 192) PMC_VW("vmovdqa64", zmm, 256) PMC_VW("vmovdqa64", zmm, 320)
                         PMC_VW("vmovdqa64", zmm, 384) PMC_VW("vmovdqa64", zmm, 448) PMC_BW_TAIL(512) "vzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes), [v] "r"(v)
                 : "cc", "memory", "xmm4");
    return 0;
}

template <std::uint64_t V = nonzero_pattern>
PMC_MEM_KERNEL std::uint64_t write_nt_avx512(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    const std::uint64_t v = V;
    asm volatile("vpbroadcastq %[v], %%zmm4\n\t"
                 "1:\n\t" PMC_VW("vmovntdq", zmm, 0) PMC_VW("vmovntdq", zmm, 64) PMC_VW("vmovntdq", zmm, 128)
                     PMC_VW("vmovntdq", zmm, 192) PMC_VW("vmovntdq", zmm, 256) PMC_VW("vmovntdq", zmm, 320)
                         PMC_VW("vmovntdq", zmm, 384) PMC_VW("vmovntdq", zmm, 448) PMC_BW_TAIL(512)
                 "sfence\n\tvzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes), [v] "r"(v)
                 : "cc", "memory", "xmm4");
    return 0;
}

PMC_MEM_KERNEL std::uint64_t rmw_avx512(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    const std::uint64_t one = 1;
    asm volatile("vpbroadcastq %[one], %%zmm5\n\t"
                 "1:\n\t" PMC_VM(zmm, "vmovdqa64", 0, 0) PMC_VM(zmm, "vmovdqa64", 64, 1)
                     PMC_VM(zmm, "vmovdqa64", 128, 2) PMC_VM(zmm, "vmovdqa64", 192, 3) PMC_VM(zmm, "vmovdqa64", 256, 0)
                         PMC_VM(zmm, "vmovdqa64", 320, 1) PMC_VM(zmm, "vmovdqa64", 384, 2)
                             PMC_VM(zmm, "vmovdqa64", 448, 3) PMC_BW_TAIL(512) "vzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes), [one] "r"(one)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm5");
    return 0;
}

#define PMC_VCOPY512(store)                                                                                       \
    PMC_VL(zmm, "vmovdqa64", 0, 0) PMC_VL(zmm, "vmovdqa64", 64, 1) PMC_VL(zmm, "vmovdqa64", 128, 2)               \
        PMC_VL(zmm, "vmovdqa64", 192, 3) PMC_VS(zmm, store, 0, 0) PMC_VS(zmm, store, 64, 1)                        \
            PMC_VS(zmm, store, 128, 2) PMC_VS(zmm, store, 192, 3) PMC_VL(zmm, "vmovdqa64", 256, 0)                 \
                PMC_VL(zmm, "vmovdqa64", 320, 1) PMC_VL(zmm, "vmovdqa64", 384, 2) PMC_VL(zmm, "vmovdqa64", 448, 3) \
                    PMC_VS(zmm, store, 256, 0) PMC_VS(zmm, store, 320, 1) PMC_VS(zmm, store, 384, 2)               \
                        PMC_VS(zmm, store, 448, 3)

PMC_MEM_KERNEL std::uint64_t copy_avx512(char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    const char* s = src;
    char* d = dst;
    asm volatile("1:\n\t" PMC_VCOPY512("vmovdqa64") PMC_BW_COPY_TAIL(512) "vzeroupper\n\t"
                 : [s] "+&r"(s), [d] "+&r"(d), [passes] "+&r"(passes)
                 : [sbegin] "r"(src), [dbegin] "r"(dst), [send] "r"(src + bytes)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3");
    return 0;
}

PMC_MEM_KERNEL std::uint64_t copy_nt_avx512(char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    const char* s = src;
    char* d = dst;
    asm volatile("1:\n\t" PMC_VCOPY512("vmovntdq") PMC_BW_COPY_TAIL(512) "sfence\n\tvzeroupper\n\t"
                 : [s] "+&r"(s), [d] "+&r"(d), [passes] "+&r"(passes)
                 : [sbegin] "r"(src), [dbegin] "r"(dst), [send] "r"(src + bytes)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3");
    return 0;
}

// AVX2 (32-byte vectors; 256 bytes per iteration).
PMC_MEM_KERNEL std::uint64_t read_avx2(char*, const char* src, std::size_t bytes, std::size_t passes) {
    const char* p = src;
    std::uint64_t sum;
    asm volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1\n\t"
                 "vpxor %%ymm2, %%ymm2, %%ymm2\n\tvpxor %%ymm3, %%ymm3, %%ymm3\n\t"
                 "1:\n\t" PMC_VR(ymm, 0, 0) PMC_VR(ymm, 32, 1) PMC_VR(ymm, 64, 2) PMC_VR(ymm, 96, 3)
                     PMC_VR(ymm, 128, 0) PMC_VR(ymm, 160, 1) PMC_VR(ymm, 192, 2) PMC_VR(ymm, 224, 3) PMC_BW_TAIL(256)
                 "vpaddq %%ymm1, %%ymm0, %%ymm0\n\tvpaddq %%ymm3, %%ymm2, %%ymm2\n\tvpaddq %%ymm2, %%ymm0, %%ymm0\n\t"
                 "vextracti128 $1, %%ymm0, %%xmm1\n\tvpaddq %%xmm1, %%xmm0, %%xmm0\n\t"
                 "vpshufd $0x4e, %%xmm0, %%xmm1\n\tvpaddq %%xmm1, %%xmm0, %%xmm0\n\tvmovq %%xmm0, %[sum]\n\t"
                 "vzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes), [sum] "=r"(sum)
                 : [begin] "r"(src), [end] "r"(src + bytes)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3");
    return sum;
}

template <std::uint64_t V = nonzero_pattern>
PMC_MEM_KERNEL std::uint64_t write_avx2(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    const std::uint64_t v = V;
    asm volatile("vmovq %[v], %%xmm4\n\tvpbroadcastq %%xmm4, %%ymm4\n\t"
                 "1:\n\t" PMC_VW("vmovdqa", ymm, 0) PMC_VW("vmovdqa", ymm, 32) PMC_VW("vmovdqa", ymm, 64)
                     PMC_VW("vmovdqa", ymm, 96) PMC_VW("vmovdqa", ymm, 128) PMC_VW("vmovdqa", ymm, 160)
                         PMC_VW("vmovdqa", ymm, 192) PMC_VW("vmovdqa", ymm, 224) PMC_BW_TAIL(256) "vzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes), [v] "r"(v)
                 : "cc", "memory", "xmm4");
    return 0;
}

template <std::uint64_t V = nonzero_pattern>
PMC_MEM_KERNEL std::uint64_t write_nt_avx2(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    const std::uint64_t v = V;
    asm volatile("vmovq %[v], %%xmm4\n\tvpbroadcastq %%xmm4, %%ymm4\n\t"
                 "1:\n\t" PMC_VW("vmovntdq", ymm, 0) PMC_VW("vmovntdq", ymm, 32) PMC_VW("vmovntdq", ymm, 64)
                     PMC_VW("vmovntdq", ymm, 96) PMC_VW("vmovntdq", ymm, 128) PMC_VW("vmovntdq", ymm, 160)
                         PMC_VW("vmovntdq", ymm, 192) PMC_VW("vmovntdq", ymm, 224) PMC_BW_TAIL(256)
                 "sfence\n\tvzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes), [v] "r"(v)
                 : "cc", "memory", "xmm4");
    return 0;
}

PMC_MEM_KERNEL std::uint64_t rmw_avx2(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    char* p = dst;
    const std::uint64_t one = 1;
    asm volatile("vmovq %[one], %%xmm5\n\tvpbroadcastq %%xmm5, %%ymm5\n\t"
                 "1:\n\t" PMC_VM(ymm, "vmovdqa", 0, 0) PMC_VM(ymm, "vmovdqa", 32, 1) PMC_VM(ymm, "vmovdqa", 64, 2)
                     PMC_VM(ymm, "vmovdqa", 96, 3) PMC_VM(ymm, "vmovdqa", 128, 0) PMC_VM(ymm, "vmovdqa", 160, 1)
                         PMC_VM(ymm, "vmovdqa", 192, 2) PMC_VM(ymm, "vmovdqa", 224, 3) PMC_BW_TAIL(256)
                 "vzeroupper\n\t"
                 : [p] "+&r"(p), [passes] "+&r"(passes)
                 : [begin] "r"(dst), [end] "r"(dst + bytes), [one] "r"(one)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm5");
    return 0;
}

#define PMC_VCOPY256(store)                                                                                       \
    PMC_VL(ymm, "vmovdqa", 0, 0) PMC_VL(ymm, "vmovdqa", 32, 1) PMC_VL(ymm, "vmovdqa", 64, 2)                       \
        PMC_VL(ymm, "vmovdqa", 96, 3) PMC_VS(ymm, store, 0, 0) PMC_VS(ymm, store, 32, 1) PMC_VS(ymm, store, 64, 2) \
            PMC_VS(ymm, store, 96, 3) PMC_VL(ymm, "vmovdqa", 128, 0) PMC_VL(ymm, "vmovdqa", 160, 1)                \
                PMC_VL(ymm, "vmovdqa", 192, 2) PMC_VL(ymm, "vmovdqa", 224, 3) PMC_VS(ymm, store, 128, 0)           \
                    PMC_VS(ymm, store, 160, 1) PMC_VS(ymm, store, 192, 2) PMC_VS(ymm, store, 224, 3)

PMC_MEM_KERNEL std::uint64_t copy_avx2(char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    const char* s = src;
    char* d = dst;
    asm volatile("1:\n\t" PMC_VCOPY256("vmovdqa") PMC_BW_COPY_TAIL(256) "vzeroupper\n\t"
                 : [s] "+&r"(s), [d] "+&r"(d), [passes] "+&r"(passes)
                 : [sbegin] "r"(src), [dbegin] "r"(dst), [send] "r"(src + bytes)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3");
    return 0;
}

PMC_MEM_KERNEL std::uint64_t copy_nt_avx2(char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    const char* s = src;
    char* d = dst;
    asm volatile("1:\n\t" PMC_VCOPY256("vmovntdq") PMC_BW_COPY_TAIL(256) "sfence\n\tvzeroupper\n\t"
                 : [s] "+&r"(s), [d] "+&r"(d), [passes] "+&r"(passes)
                 : [sbegin] "r"(src), [dbegin] "r"(dst), [send] "r"(src + bytes)
                 : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3");
    return 0;
}

bool cpu_has(const char* feature) {
    __builtin_cpu_init();
    if (std::strcmp(feature, "avx512f") == 0) return __builtin_cpu_supports("avx512f");
    if (std::strcmp(feature, "avx2") == 0) return __builtin_cpu_supports("avx2");
    return false;
}

#else // not x86-64: plain loops; the compiler may vectorize them.

PMC_MEM_KERNEL std::uint64_t read_scalar(char*, const char* src, std::size_t bytes, std::size_t passes) {
    std::uint64_t a = 0;
    for (std::size_t k = 0; k < passes; ++k) {
        const std::uint64_t* p = reinterpret_cast<const std::uint64_t*>(src);
        for (std::size_t i = 0; i < bytes / 8; ++i) a += p[i];
        asm volatile("" : "+r"(a)::"memory");
    }
    return a;
}
PMC_MEM_KERNEL std::uint64_t write_scalar(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    for (std::size_t k = 0; k < passes; ++k) {
        std::uint64_t* p = reinterpret_cast<std::uint64_t*>(dst);
        for (std::size_t i = 0; i < bytes / 8; ++i) p[i] = i;
        asm volatile("" ::: "memory");
    }
    return 0;
}
PMC_MEM_KERNEL std::uint64_t rmw_scalar(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    for (std::size_t k = 0; k < passes; ++k) {
        std::uint64_t* p = reinterpret_cast<std::uint64_t*>(dst);
        for (std::size_t i = 0; i < bytes / 8; ++i) p[i] += 1;
        asm volatile("" ::: "memory");
    }
    return 0;
}
PMC_MEM_KERNEL std::uint64_t copy_scalar(char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    for (std::size_t k = 0; k < passes; ++k) {
        std::uint64_t* d = reinterpret_cast<std::uint64_t*>(dst);
        const std::uint64_t* s = reinterpret_cast<const std::uint64_t*>(src);
        for (std::size_t i = 0; i < bytes / 8; ++i) d[i] = s[i];
        asm volatile("" ::: "memory");
    }
    return 0;
}
bool cpu_has(const char*) { return false; }

#endif

PMC_MEM_KERNEL std::uint64_t libc_memcpy(char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    for (std::size_t k = 0; k < passes; ++k) {
        std::memcpy(dst, src, bytes);
        asm volatile("" ::: "memory");
    }
    return 0;
}

// memset writes what it is given, and some machines store zeros faster (docs/memory.md): `Zero` writes zeros,
// else a non-zero byte that changes with each pass (1..128).
template <bool Zero>
PMC_MEM_KERNEL std::uint64_t libc_memset(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    for (std::size_t k = 0; k < passes; ++k) {
        std::memset(dst, Zero ? 0 : static_cast<int>(k & 0x7f) + 1, bytes);
        asm volatile("" ::: "memory");
    }
    return 0;
}

#if defined(__x86_64__)
// rep stosb, as glibc's memset runs it above 2 KiB (glibc 2.36: __x86_rep_stosb_threshold), without glibc.
template <bool Zero>
PMC_MEM_KERNEL std::uint64_t rep_stosb(char* dst, const char*, std::size_t bytes, std::size_t passes) {
    for (std::size_t k = 0; k < passes; ++k) {
        char* d = dst;
        std::size_t n = bytes;
        asm volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(Zero ? 0 : static_cast<int>(k & 0x7f) + 1) : "memory");
    }
    return 0;
}
#endif

struct Kernel {
    KernelInfo info;
    KernelFn fn;
};

/// The value probe's kernels: the same stores with zeros and with other bytes (measure_value_dependence).
struct ProbeKernels {
    std::string method, path;
    Kernel zeros, other;
};
std::vector<ProbeKernels> probe_kernels() {
    std::vector<ProbeKernels> out;
    auto pair = [&](std::string method, std::string path, KernelFn zeros, KernelFn other) {
        out.push_back({method, path, {{method + "-0", method + " storing zeros", 2, false}, zeros},
                       {{method, method + " storing non-zero bytes", 2, false}, other}});
    };
    pair("memset", "libc memset (glibc: rep stosb above 2 KiB)", libc_memset<true>, libc_memset<false>);
#if defined(__x86_64__)
    pair("rep-stosb", "rep stosb: a microcoded string store, which may write whole lines without reading them",
         rep_stosb<true>, rep_stosb<false>);
    const bool avx512 = cpu_has("avx512f"), avx2 = cpu_has("avx2");
    if (avx512 || avx2) {
        pair("write-vec", "cached vector stores: each line is read first (write-allocate)",
             avx512 ? write_avx512<0> : write_avx2<0>, avx512 ? write_avx512<> : write_avx2<>);
        pair("write-nt", "non-temporal vector stores: whole lines, not read first",
             avx512 ? write_nt_avx512<0> : write_nt_avx2<0>, avx512 ? write_nt_avx512<> : write_nt_avx2<>);
    }
#endif
    return out;
}

std::vector<Kernel> kernels() {
    std::vector<Kernel> out = {
        {{"read", "8-byte loads, summed into 8 registers", 2, false}, read_scalar},
        {{"write", "8-byte stores", 2, false}, write_scalar},
        {{"rmw", "8-byte add-to-memory (read, add 1, write back)", 4, false}, rmw_scalar},
        {{"copy", "8-byte loads and stores from one buffer to the other", 2, true}, copy_scalar},
    };
#if defined(__x86_64__)
    const bool avx512 = cpu_has("avx512f"), avx2 = cpu_has("avx2");
    if (avx512 || avx2) {
        const std::string w = avx512 ? "64-byte AVX-512" : "32-byte AVX2";
        out.push_back({{"read-vec", w + " loads (vpaddq)", 2, false}, avx512 ? read_avx512 : read_avx2});
        out.push_back({{"write-vec", w + " stores", 2, false}, avx512 ? write_avx512<> : write_avx2<>});
        out.push_back({{"rmw-vec", w + " load, add, store", 4, false}, avx512 ? rmw_avx512 : rmw_avx2});
        out.push_back({{"copy-vec", w + " loads and stores", 2, true}, avx512 ? copy_avx512 : copy_avx2});
        out.push_back({{"write-nt", w + " non-temporal stores (vmovntdq), no read for ownership", 2, false},
                       avx512 ? write_nt_avx512<> : write_nt_avx2<>});
        out.push_back({{"copy-nt", w + " loads, non-temporal stores", 2, true},
                       avx512 ? copy_nt_avx512 : copy_nt_avx2});
    }
#endif
    out.push_back({{"memcpy", "libc memcpy of W/2 bytes", 2, true}, libc_memcpy});
    out.push_back({{"memset", "libc memset of W bytes, a non-zero byte", 2, false}, libc_memset<false>});
    out.push_back({{"memset-0", "libc memset of W bytes with zeros (what bzero and calloc write)", 2, false},
                   libc_memset<true>});
    return out;
}

/// The sweep's kernels and the value probe's, by name.
KernelFn kernel_fn(const std::string& name) {
    for (const auto& k : kernels())
        if (k.info.name == name) return k.fn;
    for (const auto& p : probe_kernels())
        for (const Kernel* k : {&p.zeros, &p.other})
            if (k->info.name == name) return k->fn;
    return nullptr;
}

/// Two anonymous buffers, written once; base pages like the latency experiment.
struct Buffers {
    explicit Buffers(std::size_t bytes) : bytes_(bytes) {
        for (char*& b : buf_) {
            void* m = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                throw std::runtime_error("cannot map " + size_text(static_cast<double>(bytes_)) + ": " +
                                         std::strerror(errno));
            b = static_cast<char*>(m);
            ::madvise(b, bytes_, MADV_NOHUGEPAGE);
            std::memset(b, 0x5a, bytes_);
        }
    }
    ~Buffers() {
        for (char* b : buf_) ::munmap(b, bytes_);
    }
    Buffers(const Buffers&) = delete;
    Buffers& operator=(const Buffers&) = delete;
    std::size_t bytes_;
    char* buf_[2] = {nullptr, nullptr};
};

// The buffers measure_bandwidth uses, sized by the last run_bandwidth (or grown on demand).
std::unique_ptr<Buffers>& shared_buffers() {
    static std::unique_ptr<Buffers> b;
    return b;
}

Buffers& buffers_for(std::uint64_t size) {
    auto& b = shared_buffers();
    if (!b || b->bytes_ < size) {
        b.reset();
        b = std::make_unique<Buffers>(size);
    }
    return *b;
}

/// One timed run of `passes` passes over `size` bytes split among `threads` threads: ns from the first start to
/// the last finish. Thread 0 is the caller; the others are pinned to the other allowed CPUs.
double timed_run(KernelFn fn, const KernelInfo& k, std::uint64_t size, unsigned threads, std::size_t passes,
                 Clock& clock) {
    Buffers& b = buffers_for(size);
    const std::size_t chunk = static_cast<std::size_t>(size / threads) / 1024 * 1024;
    auto args = [&](unsigned t, char*& dst, const char*& src, std::size_t& bytes) {
        if (k.copy) {
            bytes = chunk / 2;
            src = b.buf_[0] + t * bytes;
            dst = b.buf_[1] + t * bytes;
        } else {
            bytes = chunk;
            src = b.buf_[0] + t * chunk;
            dst = b.buf_[0] + t * chunk;
        }
    };
    if (threads == 1) {
        char* dst;
        const char* src;
        std::size_t bytes;
        args(0, dst, src, bytes);
        return clock.time([&] { g_kernel_sink = fn(dst, src, bytes, passes); }).ns;
    }
    // Thread 0 is the caller, on its (pinned) CPU; the others go to the process's other CPUs in turn.
    std::vector<int> cpus;
    const int mine = ::sched_getcpu();
    for (int c : process_cpus())
        if (c != mine) cpus.push_back(c);
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::uint64_t> start(threads), end(threads), sums(threads);
    auto body = [&](unsigned t) {
        pmc::Counter wall{"wall-time"};
        char* dst;
        const char* src;
        std::size_t bytes;
        args(t, dst, src, bytes);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        start[t] = wall.read();
        sums[t] = fn(dst, src, bytes, passes);
        end[t] = wall.read();
    };
    std::vector<std::thread> team;
    for (unsigned t = 1; t < threads; ++t)
        team.emplace_back([&, t] {
            if (!cpus.empty()) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpus[(t - 1) % cpus.size()], &set);
                ::sched_setaffinity(0, sizeof set, &set);
            }
            body(t);
        });
    while (ready.load() != threads - 1) {
    }
    ready.fetch_add(1);
    go.store(true, std::memory_order_release);
    body(0);
    for (auto& th : team) th.join();
    for (std::uint64_t v : sums) g_kernel_sink = v;
    return static_cast<double>(*std::max_element(end.begin(), end.end()) -
                               *std::min_element(start.begin(), start.end()));
}

} // namespace

std::uint64_t run_kernel(const std::string& name, char* dst, const char* src, std::size_t bytes, std::size_t passes) {
    const KernelFn fn = kernel_fn(name);
    if (!fn) throw std::invalid_argument("no kernel named " + name);
    if (bytes == 0 || bytes % kernel_granule() != 0 || passes == 0)
        throw std::invalid_argument("run_kernel: bytes must be a positive multiple of " +
                                    std::to_string(kernel_granule()) + " and passes positive");
    return fn(dst, src, bytes, passes);
}

std::vector<KernelInfo> available_kernels() {
    std::vector<KernelInfo> out;
    for (const auto& k : kernels()) out.push_back(k.info);
    return out;
}

std::string vector_isa() {
#if defined(__x86_64__)
    if (cpu_has("avx512f")) return "AVX-512";
    if (cpu_has("avx2")) return "AVX2";
#endif
    return "";
}

BandwidthPoint measure_bandwidth(const KernelInfo& kernel, std::uint64_t size, unsigned threads, unsigned reps,
                                 double rep_ms, Clock& clock) {
    const KernelFn fn = kernel_fn(kernel.name);
    if (!fn) throw std::runtime_error("no kernel named " + kernel.name);
    threads = std::max(1u, threads);
    BandwidthPoint p;
    const std::uint64_t chunk = size / threads / 1024 * 1024;
    if (chunk < 1024) throw UsageError(size_label(static_cast<double>(size)) + " is too small for " +
                                       std::to_string(threads) + " threads");
    p.size = chunk * threads;
    p.bytes_per_pass = p.size * kernel.bytes_factor / 2;
    // One pass warms the buffers and estimates the time; a run then lasts about rep_ms.
    const double pass_ns = std::max(timed_run(fn, kernel, p.size, threads, 1, clock), 1.0);
    p.passes_per_run = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(rep_ms * 1e6 / pass_ns)));
    timed_run(fn, kernel, p.size, threads, p.passes_per_run, clock);
    for (unsigned r = 0; r < reps; ++r) {
        const double ns = timed_run(fn, kernel, p.size, threads, p.passes_per_run, clock);
        p.gbps.push_back(static_cast<double>(p.bytes_per_pass * p.passes_per_run) / ns);
    }
    return p;
}

std::vector<KernelInfo> value_probe_kernels() {
    std::vector<KernelInfo> out;
    for (const auto& p : probe_kernels()) {
        out.push_back(p.zeros.info);
        out.push_back(p.other.info);
    }
    return out;
}

ValueProbe measure_value_dependence(std::uint64_t size, unsigned reps, double rep_ms, Clock& clock) {
    ValueProbe probe;
    probe.size = size;
    buffers_for(size); // allocated and touched before any fault is counted
    // Page faults in the user's own accesses (:u opens for any user): 0 means the kernel took no part.
    auto faults = pmc::Counter::try_open("page-faults:u");
    probe.faults_note = faults ? "page-faults:u counted around every pass, warm-up included"
                               : "page faults not counted: " + faults.failure().message;
    // One run of `passes` passes of `k`, its page faults added to `counted`.
    auto run = [&](const Kernel& k, std::size_t passes, long long& counted) {
        if (!faults) return timed_run(k.fn, k.info, size, 1, passes, clock);
        auto iv = faults->interval();
        const double ns = timed_run(k.fn, k.info, size, 1, passes, clock);
        counted += static_cast<long long>(iv.stop());
        return ns;
    };
    for (const auto& pk : probe_kernels()) {
        ValueProbeRow row;
        row.method = pk.method;
        row.path = pk.path;
        long long fz = 0, fo = 0;
        // As measure_bandwidth, but the two kernels' runs alternate, so that load which comes and goes on the
        // machine falls on both alike.
        BandwidthPoint* points[2] = {&row.zeros, &row.other};
        const Kernel* ks[2] = {&pk.zeros, &pk.other};
        long long* counts[2] = {&fz, &fo};
        std::size_t passes = 1;
        for (int i = 0; i < 2; ++i) {
            points[i]->size = size;
            points[i]->bytes_per_pass = size;
            const double pass_ns = std::max(run(*ks[i], 1, *counts[i]), 1.0); // warm-up, and the time of a pass
            passes = std::max<std::size_t>(passes, static_cast<std::size_t>(std::ceil(rep_ms * 1e6 / pass_ns)));
        }
        for (int i = 0; i < 2; ++i) points[i]->passes_per_run = passes;
        for (unsigned r = 0; r < reps; ++r)
            for (int i = 0; i < 2; ++i)
                points[i]->gbps.push_back(static_cast<double>(size * passes) / run(*ks[i], passes, *counts[i]));
        if (faults) {
            row.faults_zeros = fz;
            row.faults_other = fo;
        }
        probe.rows.push_back(row);
    }
    return probe;
}

std::string value_probe_markdown(const ValueProbe& probe) {
    std::string out = "| stores | how they reach memory | zeros GB/s | non-zero GB/s | zeros / non-zero | page faults "
                      "(zeros, non-zero) |\n|---|---|---|---|---|---|\n";
    for (const auto& r : probe.rows)
        out += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.2f} | {} |\n", r.method, r.path, r.zeros.best(),
                           r.other.best(), r.ratio(),
                           r.faults_zeros < 0 ? std::string("-") : fmt::format("{}, {}", r.faults_zeros, r.faults_other));
    return out;
}

std::string value_probe_findings(const ValueProbe& probe) {
    // 1.15: above the spread of the cached stores' ratio in runs on a loaded VM (0.90-1.06).
    std::string faster, same, slower;
    long long faults = 0;
    bool counted = true;
    for (const auto& r : probe.rows) {
        std::string& list = r.ratio() >= 1.15 ? faster : r.ratio() <= 1 / 1.15 ? slower : same;
        list += (list.empty() ? "" : ", ") + fmt::format("{} ({:.2f}x)", r.method, r.ratio());
        if (r.faults_zeros < 0) counted = false;
        else faults += r.faults_zeros + r.faults_other;
    }
    std::string s = "Zeros were faster (by 1.15x or more) with " + (faster.empty() ? std::string("none") : faster) +
                    "; about as fast with " + (same.empty() ? std::string("none") : same) +
                    (slower.empty() ? std::string() : "; slower with " + slower) + ".";
    if (counted)
        s += fmt::format(" {} page fault{} in all these measurements together (the buffer was touched beforehand): "
                         "{}.", faults, faults == 1 ? "" : "s",
                         faults <= static_cast<long long>(probe.rows.size())
                             ? "the kernel's page-fault handling plays no part in a difference"
                             : "the kernel took part; compare the counts per row");
    return s;
}

std::string value_probe_text(const ValueProbe& probe) {
    std::string out = fmt::format("{:<10} {:>10} {:>13} {:>7} {:>14}  {}\n", "stores", "zeros GB/s", "non-zero GB/s",
                                  "ratio", "page faults", "how they reach memory");
    for (const auto& r : probe.rows)
        out += fmt::format("{:<10} {:>10.1f} {:>13.1f} {:>7.2f} {:>14}  {}\n", r.method, r.zeros.best(), r.other.best(),
                           r.ratio(),
                           r.faults_zeros < 0 ? std::string("-") : fmt::format("{}, {}", r.faults_zeros, r.faults_other),
                           r.path);
    return out;
}

std::vector<std::uint64_t> bandwidth_sizes(const BandwidthOptions& o) {
    if (o.min_size == 0) throw UsageError("--min must be at least 1 byte");
    if (o.max_size < o.min_size) throw UsageError("--max is smaller than --min");
    const std::uint64_t granule = 1024 * std::max(1u, o.threads);
    return sweep_sizes(std::max<std::uint64_t>(o.min_size, granule), o.max_size, o.per_octave, granule);
}

BandwidthResult run_bandwidth(const BandwidthOptions& o, Clock& clock, Progress& progress,
                              const std::string& pin_note) {
    BandwidthResult r;
    r.options = o;
    r.isa = vector_isa();
    r.pin_note = pin_note;
    r.wall_note = clock.wall_note();
    const std::uint64_t t0 = clock.now_ns();
    std::vector<KernelInfo> chosen;
    const auto all = available_kernels();
    if (o.kernels.empty()) {
        chosen = all;
    } else {
        for (const auto& name : o.kernels) {
            auto it = std::find_if(all.begin(), all.end(), [&](const KernelInfo& k) { return k.name == name; });
            if (it == all.end()) {
                std::string list;
                for (const auto& k : all) list += (list.empty() ? "" : ", ") + k.name;
                throw UsageError("unknown or unavailable kernel '" + name + "' (here: " + list + ")");
            }
            chosen.push_back(*it);
        }
    }
    const std::vector<std::uint64_t> sizes = bandwidth_sizes(o);
    buffers_for(o.max_size);
    // Side by side: at each size every kernel in turn, so that kernels are compared under the same conditions
    // and a burst of interference bends one size of every curve rather than a stretch of one.
    for (const auto& k : chosen) r.curves.push_back(BandwidthCurve{k, o.threads, {}});
    std::size_t done = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        std::string line = fmt::format("bandwidth: {:>6} GB/s:", size_label(static_cast<double>(sizes[i])));
        for (auto& curve : r.curves) {
            curve.points.push_back(measure_bandwidth(curve.kernel, sizes[i], o.threads, o.reps, o.rep_ms, clock));
            progress.detail(fmt::format("bandwidth: {:>3}/{} {:>6} {:<9} {:7.1f} GB/s", ++done,
                                        sizes.size() * chosen.size(), size_label(static_cast<double>(sizes[i])),
                                        curve.kernel.name, curve.points.back().best()));
            line += fmt::format(" {} {:.1f}", curve.kernel.name, curve.points.back().best());
        }
        if (!progress.tty()) progress.note(line);
    }
    const bool memset_chosen = std::any_of(chosen.begin(), chosen.end(),
                                           [](const KernelInfo& k) { return k.name.rfind("memset", 0) == 0; });
    if (o.value_probe && memset_chosen && o.threads == 1) {
        r.values = measure_value_dependence(sizes.back(), o.reps, o.rep_ms, clock);
        progress.note("bandwidth: zeros against other bytes at " + size_text(static_cast<double>(sizes.back())) +
                      ":\n" + value_probe_text(r.values));
    }
    r.seconds = static_cast<double>(clock.now_ns() - t0) / 1e9;
    progress.note(fmt::format("bandwidth: {} kernels x {} sizes from {} to {}, {:.1f} s", chosen.size(), sizes.size(),
                              size_text(static_cast<double>(sizes.front())),
                              size_text(static_cast<double>(sizes.back())), r.seconds));
    return r;
}

std::vector<LevelBandwidth> bandwidth_per_level(const BandwidthResult& r, const Regimes& regimes) {
    std::vector<LevelBandwidth> out;
    const auto& levels = regimes.levels;
    // The sizes of the curves in [lo, hi]: the kernels' figures (median of the best runs), or none.
    auto over = [&](LevelBandwidth& lb, double lo, double hi) {
        lb.from = 1e300;
        lb.to = 0;
        lb.gbps.clear();
        bool any = false;
        for (const auto& c : r.curves) {
            std::vector<double> v;
            for (const auto& p : c.points) {
                const double s = static_cast<double>(p.size);
                if (s >= lo && s <= hi) {
                    v.push_back(p.best());
                    lb.from = std::min(lb.from, s);
                    lb.to = std::max(lb.to, s);
                }
            }
            any = any || !v.empty();
            lb.gbps.emplace_back(c.kernel.name, v.empty() ? 0.0 : median_of(v));
        }
        if (lb.to == 0) lb.from = 0;
        return any;
    };
    for (std::size_t i = 0; i < levels.size(); ++i) {
        LevelBandwidth lb;
        lb.level = levels[i].name;
        const double lower = i == 0 ? 0 : levels[i - 1].boundary->size;
        const double upper = levels[i].boundary ? levels[i].boundary->size : 1e300;
        const bool memory = !levels[i].boundary;
        const double lo = memory ? 4 * lower : 2 * lower, hi = upper / 2;
        if (!over(lb, lo, hi)) {
            // A level too narrow for a size well inside it (the bandwidth grid is coarse): the sizes of its
            // plateau in the latency curve, or (levels given as boundaries have none) the sizes between its
            // boundaries.
            lb.plateau = true;
            if (!(levels[i].last_size > 0 && over(lb, levels[i].first_size, levels[i].last_size)))
                over(lb, lower, upper);
        }
        out.push_back(lb);
    }
    return out;
}

std::string bandwidth_csv(const BandwidthResult& r) {
    std::string out = "kernel,threads,size_bytes,size_label,bytes_per_pass,passes_per_run,runs,best_gbps,median_gbps,"
                      "worst_gbps\n";
    for (const auto& c : r.curves)
        for (const auto& p : c.points)
            out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", c.kernel.name, c.threads, p.size,
                               size_label(static_cast<double>(p.size)), p.bytes_per_pass, p.passes_per_run,
                               p.gbps.size(), num(p.best(), 5), num(p.median(), 5), num(min_of(p.gbps), 5));
    return out;
}

void write_bandwidth_json(pmc::JsonWriter& json, const BandwidthResult& r, const MachineFacts& m,
                          const Regimes* regimes) {
    json.begin_object();
    json.field("experiment", "bandwidth");
    json.key("machine");
    write_machine_json(json, m);
    json.key("method").begin_object();
    json.field("unit", "GB/s = 1e9 bytes counted per second");
    json.field("bytes_counted", "per pass over a working set of W bytes: read W, write W, rmw 2W, copy W (W/2 read "
                                "+ W/2 written), memcpy W, memset W");
    json.field("statistic", "best (and median) of the runs");
    json.field("runs", r.options.reps);
    json.field("run_ms", r.options.rep_ms);
    json.field("threads", r.options.threads);
    json.field("vector_isa", r.isa);
    json.field("timer", r.wall_note);
    json.field("pinning", r.pin_note);
    json.field("pages", "base pages (madvise MADV_NOHUGEPAGE), written once before measuring");
    json.end_object();
    json.key("kernels").begin_array();
    for (const auto& c : r.curves) {
        json.begin_object();
        json.field("name", c.kernel.name);
        json.field("description", c.kernel.description);
        json.field("threads", c.threads);
        json.key("points").begin_array();
        for (const auto& p : c.points) {
            json.begin_object();
            json.field("size_bytes", p.size);
            json.field("bytes_per_pass", p.bytes_per_pass);
            json.field("passes_per_run", p.passes_per_run);
            json.field("best_gbps", p.best());
            json.field("median_gbps", p.median());
            json.field("worst_gbps", min_of(p.gbps));
            json.end_object();
        }
        json.end_array();
        json.end_object();
    }
    json.end_array();
    if (regimes) {
        json.key("per_level").begin_array();
        for (const auto& lb : bandwidth_per_level(r, *regimes)) {
            json.begin_object();
            json.field("level", lb.level);
            json.field("from_bytes", lb.from);
            json.field("to_bytes", lb.to);
            json.field("sizes_from_plateau", lb.plateau);
            json.key("gbps").begin_object();
            for (const auto& [k, v] : lb.gbps) {
                json.key(k);
                if (v > 0) json.value(v);
                else json.null();
            }
            json.end_object();
            json.end_object();
        }
        json.end_array();
    }
    if (r.values.size > 0) {
        json.key("value_dependence").begin_object();
        json.field("size_bytes", r.values.size).field("page_faults", r.values.faults_note);
        json.key("rows").begin_array();
        for (const auto& v : r.values.rows) {
            json.begin_object().field("stores", v.method).field("path", v.path);
            json.field("zeros_gbps_best", v.zeros.best()).field("zeros_gbps_median", v.zeros.median());
            json.field("other_gbps_best", v.other.best()).field("other_gbps_median", v.other.median());
            json.field("zeros_over_other", v.ratio());
            if (v.faults_zeros >= 0) json.field("page_faults_zeros", v.faults_zeros).field("page_faults_other", v.faults_other);
            json.end_object();
        }
        json.end_array().end_object();
    }
    json.field("seconds", r.seconds);
    json.end_object();
}

std::string level_bandwidth_markdown(const std::vector<LevelBandwidth>& levels) {
    if (levels.empty()) return "";
    std::string out = "| level | sizes used |";
    std::string rule = "|---|---|";
    for (const auto& [k, v] : levels.front().gbps) {
        out += " " + k + " |";
        rule += "---|";
    }
    out += "\n" + rule + "\n";
    for (const auto& lb : levels) {
        out += "| " + lb.level + " | " +
               (lb.to > 0 ? size_label(lb.from) + " .. " + size_label(lb.to) + (lb.plateau ? " (plateau)" : "")
                          : std::string("(none)")) +
               " |";
        for (const auto& [k, v] : lb.gbps) out += " " + (v > 0 ? fmt::format("{:.1f}", v) : std::string("-")) + " |";
        out += "\n";
    }
    return out;
}

std::string level_bandwidth_text(const std::vector<LevelBandwidth>& levels) {
    if (levels.empty()) return "";
    std::string out = fmt::format("{:<7} {:<14}", "GB/s", "sizes");
    for (const auto& [k, v] : levels.front().gbps) out += fmt::format(" {:>9}", k);
    out += "\n";
    for (const auto& lb : levels) {
        out += fmt::format("{:<7} {:<14}", lb.level,
                           lb.to > 0 ? size_label(lb.from) + ".." + size_label(lb.to) + (lb.plateau ? "*" : "")
                                     : std::string("(none)"));
        for (const auto& [k, v] : lb.gbps) out += fmt::format(" {:>9}", v > 0 ? fmt::format("{:.1f}", v) : "-");
        out += "\n";
    }
    for (const auto& lb : levels)
        if (lb.plateau) {
            out += "*: no measured size well inside the level; the sizes of its plateau instead\n";
            break;
        }
    return out;
}

Regimes regimes_from_boundaries(const std::string& list) {
    Regimes r;
    std::vector<double> b;
    std::size_t start = 0;
    while (start <= list.size()) {
        const auto comma = list.find(',', start);
        const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) b.push_back(static_cast<double>(parse_size(item)));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (b.empty()) throw UsageError("--boundaries needs sizes, e.g. 48K,1M,32M");
    if (b.front() <= 0) throw UsageError("--boundaries: a boundary of 0 bytes (sizes, e.g. 48K,1M,32M)");
    if (std::adjacent_find(b.begin(), b.end(), std::greater_equal<double>()) != b.end())
        throw UsageError("--boundaries must be in strictly increasing order, e.g. 48K,1M,32M");
    for (std::size_t i = 0; i <= b.size(); ++i) {
        Level l;
        l.name = i < b.size() ? "L" + std::to_string(i + 1) : "memory";
        if (i < b.size()) {
            Transition t;
            t.size = t.below = t.above = b[i];
            l.boundary = t;
        }
        r.levels.push_back(l);
    }
    return r;
}

} // namespace pmc_mem
