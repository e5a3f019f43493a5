// SPDX-License-Identifier: MIT
// pmc-sample-load-target: a known pattern of loads for `pmc sample --emulate --cache` (tests/sampler/
// test_sample_emulated.cpp). `pmc-sample-load-target MAIN THREAD CHILD [STATUS]`: MAIN loads of the global array
// sampled_by_main on the main thread; then a thread started only now makes THREAD loads of sampled_by_thread; then a
// fork child makes CHILD loads of sampled_by_child and leaves with _exit (no exit() handlers: its memory map is its
// parent's); a count of 0 leaves that part out (a single thread runs the same loads in every run: a join's or a
// wait's loads depend on timing). Exits with STATUS (default 0). `pmc-sample-load-target inherit LOADS PERIOD`, under
// pmc emulate --cache: a load pmc::Sampler opened with inherit (below). `pmc-sample-load-target heap LOADS`: LOADS loads
// of a 32 KiB block from malloc (the brk heap). `pmc-sample-load-target mappings LOADS FILE [fork]`: LOADS loads of
// 32 KiB of anonymous memory from mmap, unmapped, then LOADS loads of FILE (32 KiB written, mapped, its descriptor
// closed, moved by mremap), unmapped and FILE removed: both gone before the exit's reading of the maps; with `fork`, a fork child does
// it. `pmc-sample-load-target abort LOADS`: LOADS loads of sampled_by_main, then abort() (SIGABRT, sent to itself with tgkill).
// `pmc-sample-load-target exhaust LOADS`: LOADS loads of sampled_by_main, then opens /dev/null until EMFILE and exits.
// `pmc-sample-load-target caught-fault LOADS`: LOADS loads of sampled_by_main, then a SIGSEGV its handler leaves to the
// default action (it recurs and ends the process).
// `pmc-sample-load-target stride LOADS`: LOADS loads of a 1 MiB array in order, 8 bytes apart.
// `pmc-sample-load-target break BLOCKS`: prints the program break at main (sbrk(0)) and where its first mmap lands,
// then mallocs BLOCKS blocks of 16 bytes to 4 KiB, walks and frees them: its loads follow the heap's state at main. Each load loop is assembly where it can be, one load per iteration, so
// that N loads in a row hold exactly N / PERIOD samples whatever the compiler or a sanitizer does.
#include <pmc/sampler.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern "C" {
extern char end; // the end of the program's data (end(3))
// Named in the symbol table: what pmc sample's summary by variable finds.
alignas(64) volatile std::uint64_t sampled_by_main[4096];
alignas(64) volatile std::uint64_t sampled_by_thread[4096];
alignas(64) volatile std::uint64_t sampled_by_child[4096];
alignas(64) volatile std::uint64_t inherit_main_array[4096], inherit_thread_array[4096], inherit_before_array[4096];
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

/// `n` loads of stride_array in order, 8 bytes apart (8 loads a 64-byte line, its first a D1 miss: 1 MiB does not stay
/// in D1), one per iteration: the pattern a round period aliases with.
alignas(64) volatile std::uint64_t stride_array[131072];
void stride_n(std::uint64_t n) {
    if (n == 0) return;
#if defined(__x86_64__)
    asm volatile("xor %%ecx, %%ecx\n"
                 "1:\n\t"
                 "mov %%rcx, %%rdx\n\t"
                 "and $131071, %%rdx\n\t"
                 "mov (%[a],%%rdx,8), %%rax\n\t"
                 "inc %%rcx\n\t"
                 "cmp %[n], %%rcx\n\t"
                 "jb 1b\n"
                 :
                 : [a] "r"(stride_array), [n] "r"(n)
                 : "rax", "rcx", "rdx", "cc", "memory");
#else
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) sum += stride_array[i % 131072];
    static volatile std::uint64_t sink;
    sink = sum;
#endif
}

/// inherit-samples LOADS PERIOD: a load sampler opened with inherit (pmc emulate --cache) on the main thread, which
/// then loads LOADS times from one array; a thread created after the open loads LOADS times from another, and one
/// started before the open (not followed) from a third. Prints the samples in each array, the threads seen, the
/// bias check.
int run_inherit_samples(std::uint64_t loads, std::uint64_t period) {
    std::atomic<int> started{0}, go{0};
    std::thread before([&] {
        started.store(1);
        while (!go.load()) {
        }
        load_n(inherit_before_array, loads);
    });
    while (!started.load()) { // (running, so that the open finds it: not a thread created after the open)
    }
    pmc::SamplerOptions o;
    o.period = period;
    o.inherit = true;
    o.fields = pmc::sample::ip | pmc::sample::tid | pmc::sample::addr;
    auto sampler = pmc::Sampler::try_open("cpu/mem-loads,ldlat=3/P", o);
    go.store(1);
    if (!sampler) {
        before.join();
        std::printf("cannot sample: %s\n", sampler.failure().message.c_str());
        return 1;
    }
    load_n(inherit_main_array, loads);
    std::thread later([&] { load_n(inherit_thread_array, loads); });
    later.join();
    before.join();
    std::uint64_t in_main = 0, in_thread = 0, in_before = 0;
    std::vector<std::uint32_t> tids;
    const auto inside = [](std::uint64_t addr, const volatile std::uint64_t* a) {
        const auto begin = reinterpret_cast<std::uint64_t>(a);
        return addr >= begin && addr < begin + 4096 * 8;
    };
    const pmc::BiasCheck check = sampler->stop([&](const pmc::Sample& x) {
        in_main += inside(x.addr, inherit_main_array);
        in_thread += inside(x.addr, inherit_thread_array);
        in_before += inside(x.addr, inherit_before_array);
        if (std::find(tids.begin(), tids.end(), x.tid) == tids.end()) tids.push_back(x.tid);
    });
    std::printf("main %llu, thread %llu, before %llu; threads %zu; samples %llu, exact %llu, allowance %llu; %s\n",
                static_cast<unsigned long long>(in_main), static_cast<unsigned long long>(in_thread),
                static_cast<unsigned long long>(in_before), tids.size(),
                static_cast<unsigned long long>(check.samples), static_cast<unsigned long long>(check.exact),
                static_cast<unsigned long long>(check.allowance), check.agrees ? "agrees" : check.warning.c_str());
    return 0;
}

/// mappings LOADS FILE: loads of anonymous memory and of a file, each mapped for them and unmapped after.
int run_short_mappings(std::uint64_t loads, const char* file) {
    constexpr std::size_t size = 4096 * sizeof(std::uint64_t);
    void* anonymous = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (anonymous == MAP_FAILED) return 1;
    load_n(static_cast<const volatile std::uint64_t*>(anonymous), loads);
    ::munmap(anonymous, size);
    const int fd = ::open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, size) != 0) return 1;
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd); // (the mapping stays; pmc names it by the file it was mapped from)
    if (mapped == MAP_FAILED) return 1;
    // Moved by mremap onto memory reserved for it: only the move names that address after the file.
    void* reserved = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (reserved == MAP_FAILED) return 1;
    void* moved = ::mremap(mapped, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, reserved);
    if (moved == MAP_FAILED) return 1;
    load_n(static_cast<const volatile std::uint64_t*>(moved), loads);
    ::munmap(moved, size);
    ::unlink(file);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::string(argv[1]) == "inherit") // inherit LOADS PERIOD (under pmc emulate --cache)
        return run_inherit_samples(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10));
    if (argc == 3 && std::string(argv[1]) == "heap") { // heap LOADS: from a small malloc'd block (the brk heap)
        auto* block = static_cast<volatile std::uint64_t*>(std::calloc(4096, sizeof(std::uint64_t)));
        if (!block) return 1;
        load_n(block, std::strtoull(argv[2], nullptr, 10));
        // Status 3: malloc's block is not between the program's end and the break (QEMU 10 with ASLR off loads a PIE
        // where brk cannot grow, and glibc's malloc then maps its heap).
        const auto at = reinterpret_cast<std::uintptr_t>(block);
        const bool in_brk_heap = at > reinterpret_cast<std::uintptr_t>(&end) && at < reinterpret_cast<std::uintptr_t>(sbrk(0));
        std::free(const_cast<std::uint64_t*>(block));
        return in_brk_heap ? 0 : 3;
    }
    if (argc == 3 && std::string(argv[1]) == "stride") { // stride LOADS: a sequential read, 8 bytes at a time
        stride_n(std::strtoull(argv[2], nullptr, 10));
        return 0;
    }
    if (argc == 3 && std::string(argv[1]) == "abort") { // abort LOADS: LOADS loads of sampled_by_main, then abort()
        load_n(sampled_by_main, std::strtoull(argv[2], nullptr, 10));
        std::abort();
    }
    if (argc == 3 && std::string(argv[1]) == "exhaust") { // exhaust LOADS: LOADS loads, then every descriptor used
        load_n(sampled_by_main, std::strtoull(argv[2], nullptr, 10));
        int opened = 0;
        while (::open("/dev/null", O_RDONLY) >= 0) ++opened;
        std::printf("opened %d descriptors, then %s\n", opened, errno == EMFILE ? "EMFILE" : "another error");
        return errno == EMFILE ? 0 : 4; // (exit(): the preload library reads the maps with no descriptor free)
    }
    if (argc == 3 && std::string(argv[1]) == "caught-fault") { // caught-fault LOADS: LOADS loads, then a SIGSEGV
        // whose handler (installed through the C library) resets the action to the default and returns: the fault
        // recurs and ends the process, as a crash reporter's handler does. No kill call: QEMU 7.2's plugin sees none.
        load_n(sampled_by_main, std::strtoull(argv[2], nullptr, 10));
        std::signal(SIGSEGV, [](int) { std::signal(SIGSEGV, SIG_DFL); });
        *static_cast<volatile int*>(nullptr) = 1;
        return 0;
    }
    if (argc == 3 && std::string(argv[1]) == "break") { // break BLOCKS: the break at main, then malloc's work
        // The break before any allocation of the program's: what a malloc in pmc's preload library would move.
        const auto at_main = reinterpret_cast<std::uintptr_t>(sbrk(0));
        // Where the program's first mapping lands: what an mmap in pmc's preload library before main would move (QEMU
        // 7.2 places each mapping above the last one it placed, even one unmapped since).
        void* const mapped = ::mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mapped == MAP_FAILED) return 1;
        const std::uint64_t blocks = std::strtoull(argv[2], nullptr, 10);
        struct Node { Node* next; std::uint64_t value; };
        Node* list = nullptr;
        for (std::uint64_t i = 0; i < blocks; ++i) { // sizes 16 to ~4 KiB: bins, splits and the heap's growth
            auto* n = static_cast<Node*>(std::malloc(sizeof(Node) + (i * 37) % 4000));
            if (!n) return 1;
            *n = Node{list, i};
            list = n;
        }
        std::uint64_t sum = 0;
        for (Node* n = list; n; n = n->next) sum += n->value;
        while (list) {
            Node* next = list->next;
            std::free(list);
            list = next;
        }
        std::printf("break at main %#llx, mmap at main %#llx, sum %llu\n", static_cast<unsigned long long>(at_main),
                    static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(mapped)),
                    static_cast<unsigned long long>(sum));
        ::munmap(mapped, 1 << 16);
        return 0;
    }
    if ((argc == 4 || argc == 5) && std::string(argv[1]) == "mappings") { // mappings LOADS FILE [fork]
        const std::uint64_t loads = std::strtoull(argv[2], nullptr, 10);
        if (argc == 4) return run_short_mappings(loads, argv[3]);
        const pid_t child = ::fork();
        if (child == 0) ::_exit(run_short_mappings(loads, argv[3]));
        int status = 0;
        return child > 0 && ::waitpid(child, &status, 0) == child && status == 0 ? 0 : 3;
    }
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
