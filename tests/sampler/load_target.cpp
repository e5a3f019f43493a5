// SPDX-License-Identifier: MIT
// pmc-sample-load-target: a known pattern of loads for `pmc sample --emulate --cache` (tests/sampler/
// test_sample_emulated.cpp). `pmc-sample-load-target MAIN THREAD CHILD [STATUS]`: MAIN loads of the global array
// sampled_by_main on the main thread; then a thread started only now makes THREAD loads of sampled_by_thread; then a
// fork child makes CHILD loads of sampled_by_child and leaves with _exit (no exit() handlers: its memory map is its
// parent's); a count of 0 leaves that part out (a single thread runs the same loads in every run: a join's or a
// wait's loads depend on timing). Exits with STATUS (default 0). Each load loop is assembly where it can be, one load per iteration, so
// that N loads in a row hold exactly N / PERIOD samples whatever the compiler or a sanitizer does.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <thread>

extern "C" {
// Named in the symbol table: what pmc sample's summary by variable finds.
alignas(64) volatile std::uint64_t sampled_by_main[4096];
alignas(64) volatile std::uint64_t sampled_by_thread[4096];
alignas(64) volatile std::uint64_t sampled_by_child[4096];
}

namespace {

/// `n` loads of a[i % 4096], one per iteration, nothing else loaded in the loop.
void load_n(const volatile std::uint64_t* a, std::uint64_t n) {
    if (n == 0) return;
#if defined(__x86_64__)
    asm volatile("xor %%ecx, %%ecx\n"
                 "1:\n\t"
                 "mov %%rcx, %%rdx\n\t"
                 "and $4095, %%rdx\n\t"
                 "mov (%[a],%%rdx,8), %%rax\n\t"
                 "inc %%rcx\n\t"
                 "cmp %[n], %%rcx\n\t"
                 "jb 1b\n"
                 :
                 : [a] "r"(a), [n] "r"(n)
                 : "rax", "rcx", "rdx", "cc", "memory");
#elif defined(__aarch64__)
    asm volatile("mov x9, xzr\n"
                 "1:\n\t"
                 "and x10, x9, #4095\n\t"
                 "ldr x11, [%[a], x10, lsl #3]\n\t"
                 "add x9, x9, #1\n\t"
                 "cmp x9, %[n]\n\t"
                 "b.lo 1b\n"
                 :
                 : [a] "r"(a), [n] "r"(n)
                 : "x9", "x10", "x11", "cc", "memory");
#else
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) sum += a[i % 4096];
    static volatile std::uint64_t sink;
    sink = sum;
#endif
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    const std::uint64_t main_loads = std::strtoull(argv[1], nullptr, 10);
    const std::uint64_t thread_loads = std::strtoull(argv[2], nullptr, 10);
    const std::uint64_t child_loads = std::strtoull(argv[3], nullptr, 10);
    load_n(sampled_by_main, main_loads);
    if (thread_loads) { // (the join's wait, and so the main thread's loads, depend on when the thread ends)
        std::thread later([&] { load_n(sampled_by_thread, thread_loads); });
        later.join();
    }
    if (child_loads) {
        const pid_t child = ::fork();
        if (child == 0) {
            load_n(sampled_by_child, child_loads);
            ::_exit(0);
        }
        int status = 0;
        if (child < 0 || ::waitpid(child, &status, 0) != child || status != 0) return 3;
    }
    return argc > 4 ? std::atoi(argv[4]) : 0;
}
