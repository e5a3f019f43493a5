// SPDX-License-Identifier: MIT
// pmc-emulate-target: what the tests of pmc emulate run under it (and natively), using only pmc's public headers.
//
//   exact            known loops read back exactly in every interval, on this thread and on two threads at once;
//                    prints one line per check and exits 1 if any interval is off
//   counts           the counts of a few intervals on two threads, for comparing runs
//   loop N           runs the known loop N times (pmc count --emulate counts it)
//   quirks           what cpuid, a system call and a signal add to an interval (docs/emulated-pmu.md)
//   probe            opens instructions:u, page-faults and wall-time; prints each one's read path or error
//   system CMD       runs CMD with system() and exits with its status
//   spawn PROG ARGS  runs PROG with posix_spawn (a vfork) and exits with its status
//   reexec           pmc::reexec_without_aslr, then says whether it re-executed and what instructions:u opens on
//   page-writes ROUNDS [CHILDREN]  a profile (PMC_PROFILE) with 4 KiB pages: ROUNDS of a 'parent' scope around
//                    CHILDREN (16) empty 'child' scopes, so that a page is written inside a parent every few rounds
//   profile [--plant N]  a two-thread profile (PMC_PROFILE): labels outer, work, planted; --plant N adds exactly 2N
//                    instructions to every 'planted' scope
//   hooks            hook-shaped scopes around LabelCache and KeyedLabelCache lookups and a pause, for 600 names;
//                    then a pcall-like error path ended with end_to (PMC_PROFILE)
//   page-cross       a loop whose block ends where its last instruction crosses a page (x86): 19 per pass
//   page-cut ROUNDS  blocks QEMU 7.2 cuts at a page boundary, rep string instructions among them, pinned by .org
//                    (x86): 83 instructions a round in Cachegrind's Ir, 25 in instructions:u (run_page_cut)
//   rep-last-element ROUNDS  repe/repne cmps and scas whose condition ends them on their last element, and one
//                    that ends by its count (x86): 45 instructions a round in Cachegrind's Ir, 22 in instructions:u
//   alloc-race       three threads interning labels at once, then malloc/free inside 'alloc' (PMC_PROFILE)
//   jit-rep          code with a rep movsb replaced at the same address (x86): the same intervals before and after
//   stack            2000 string calls on stack arrays (their count follows the stack's alignment), and where
//                    the stack lies
//   environment      strlen of each environment variable, 20 times: the interval's instructions (they follow each
//                    variable's length and alignment), the variables' count and bytes
//   addresses        where the stack, small and large malloc blocks, an mmap, TLS and the code lie, on this thread
//                    and on a second one; and GLIBC_TUNABLES as the program sees it
//   churn            12 threads whose lives overlap, each checking its own intervals exact
//   bad-pointer      requests to the plugin naming memory the program cannot write; then a counter still reads
//   until-signal FILE    records scopes on two threads until a signal ends it; creates FILE once both have recorded
//   signal-frames    handlers installed by sigaction, signal, bsd_signal, sysv_signal and sigset, on two threads,
//                    spill an SSE register with an aligned move: each says whether its stack was aligned, and
//                    sigaction's old action, SA_RESETHAND, SA_NODEFER and SIG_IGN behave as natively (x86)
//   signal-race      two threads install two handlers by sigaction and signal while a third raises the signal:
//                    every delivery on an aligned stack, every old action one of the two handlers (x86)
//   raw-handler      a handler installed by a raw rt_sigaction system call, which spills an SSE register (x86)
//   signal-cost      intervals around raise() with a handler installed by sigaction and by the raw system call (x86)
//   inclusion ROUNDS one hot line, then 96 lines of its LL set but other D1 sets, ROUNDS times (pmc count --emulate
//                    --cache --LL=65536,64,64 --inclusion ...: strict inclusion adds one D1 miss per round)
//   cache-read       (pmc emulate --cache) the program's own counters on the cache model: 9 lines of one D1 set
//                    read in turn add exactly 9 L1-dcache-load-misses a round, 8 lines none; a Group reads the
//                    same; two reads back to back add the same every time. Prints a line per check, exits 1 if off
//   cache-threads    (pmc emulate --cache) 4 threads, each chasing lines of its own: each prints its interval's
//                    modelled counts (the same in every run)
//   branch-read      (pmc emulate --branches) the program's own branch counters: a loop of N conditional branches
//                    adds exactly N branch-instructions, and once warm no miss; an indirect call through a table
//                    (x86) adds 3 branches an iteration, and a miss each when its target alternates, none when it
//                    does not; a never-run loop in a new thread mispredicts its first iterations (the predictor
//                    starts at strongly not-taken). Prints a line per check, exits 1 if off
//   branch-threads   (pmc emulate --branches) 4 threads with fixed work: each prints its interval's branch counts
//   profile-threads [THREADS] [racing]  (PMC_PROFILE, pmc emulate --branches) THREADS (6) threads that start up in
//                    turn (racing: all at once), register with the profiler at the same moment, then record 'mix'
//                    (data-dependent branches) and 'loop'
//   branches N       runs N conditional branches (a data-dependent one each iteration) and N indirect calls (x86)
//   refused WHAT     what QEMU's user mode refuses, called twice: seccomp-prctl, seccomp, clone3 (raw, with no
//                    fallback), threads (3 threads and a posix_spawn: glibc tries clone3, then clone)
#include <pmc/counter.hpp>
#include <pmc/determinism.hpp>
#include <pmc/group.hpp>
#include <pmc/profiler.hpp>
#include <pmc/sampler.hpp>

#include "known_loop.hpp"

#include <atomic>
#include <csignal>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <cerrno>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using pmc_test::known_loop;

__attribute__((noinline)) std::uint64_t counted(pmc::Counter& c, std::uint64_t n) {
    const std::uint64_t start = c.read();
    known_loop(n);
    return c.read() - start;
}

/// Every interval of known_loop(n) minus the one-iteration interval is 2 (n - 1), for `reps` intervals per size.
/// Returns the number of intervals that were not; `base` receives the one-iteration interval (2 plus what the
/// reads around the loop add: the read's constant).
int check_exact(const char* where, int reps, std::uint64_t& base) {
    pmc::Counter c{"instructions:u"};
    base = counted(c, 1);
    int off = 0;
    for (std::uint64_t n : {1ull, 100ull, 1000ull, 10000ull}) {
        int wrong = 0;
        std::uint64_t first_wrong = 0;
        for (int i = 0; i < reps; ++i) {
            const std::uint64_t got = counted(c, n) - base;
            if (got != 2 * (n - 1) && wrong++ == 0) first_wrong = got;
        }
        std::printf("%s: loop of %llu: %d of %d intervals exact (2*(n-1) over the one-iteration interval of %llu)%s\n",
                    where, static_cast<unsigned long long>(n), reps - wrong, reps, static_cast<unsigned long long>(base),
                    wrong ? (" FIRST WRONG: " + std::to_string(first_wrong)).c_str() : "");
        off += wrong;
    }
    return off;
}

int run_exact() {
    std::uint64_t base = 0, base_a = 0, base_b = 0;
    int off = check_exact("main thread", 5000, base);
    int off_a = 0, off_b = 0;
    std::thread a([&] { off_a = check_exact("thread A", 2000, base_a); });
    std::thread b([&] { off_b = check_exact("thread B", 2000, base_b); });
    a.join();
    b.join();
    off += off_a + off_b;
    // Two reads around a one-iteration loop cost the same on every thread.
    std::printf("read cost: %s (%llu, %llu, %llu instructions around a one-iteration loop)\n",
                base == base_a && base == base_b ? "the same on every thread" : "NOT the same on every thread",
                static_cast<unsigned long long>(base), static_cast<unsigned long long>(base_a),
                static_cast<unsigned long long>(base_b));
    if (base != base_a || base != base_b) ++off;
    std::printf("%s\n", off == 0 ? "exact: every interval" : "exact: NOT every interval");
    return off == 0 ? 0 : 1;
}

int run_counts() {
    std::vector<std::string> lines(3);
    auto work = [&](int who, std::uint64_t scale) {
        pmc::Counter c{"instructions:u"};
        std::string out;
        for (std::uint64_t n : {10ull, 1000ull, 100000ull}) {
            auto iv = c.interval();
            known_loop(n * scale);
            out += " " + std::to_string(iv.stop());
            // (No allocation inside the interval: glibc's allocator state is shared by the threads, and an
            // allocation's instructions then depend on what the other threads did: docs/emulated-pmu.md.)
        }
        lines[static_cast<std::size_t>(who)] = out;
    };
    work(0, 1);
    std::thread a(work, 1, 2), b(work, 2, 3);
    a.join();
    b.join();
    std::printf("main:%s\nthread a:%s\nthread b:%s\n", lines[0].c_str(), lines[1].c_str(), lines[2].c_str());
    return 0;
}

#if defined(__x86_64__)
/// A rep-prefixed string instruction counts once, whatever its count register says, as real x86 cores count it.
__attribute__((noinline)) std::uint64_t rep_movsb(pmc::Counter& c, std::size_t n) {
    static char from[1 << 16], to[1 << 16];
    char* d = to;
    const char* s = from;
    const std::uint64_t start = c.read();
    asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
    return c.read() - start;
}
int run_rep() {
    pmc::Counter c{"instructions:u"};
    std::printf("rep movsb of");
    for (std::size_t n : {0u, 1u, 2u, 100u, 65536u})
        std::printf(" %zu bytes: %llu;", n, static_cast<unsigned long long>(rep_movsb(c, n)));
    std::printf("\n");
    return 0;
}

/// Code replaced at the same address, as a JIT or dlclose and dlopen do: two functions whose first block has the
/// same start and length and ends with a rep movsb at another address. Both execute the same number of
/// instructions (3, the rep once, ret), so every interval is the same before and after the replacement.
int run_jit_rep() {
    void* code = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        std::printf("jit: cannot map executable memory\n");
        return 1;
    }
    // mov ecx, 16; nop; rep movsb; ret          then          xor ecx, ecx; mov cl, 16; rep movsb; ret
    static const unsigned char first[] = {0xB9, 16, 0, 0, 0, 0x90, 0xF3, 0xA4, 0xC3};
    static const unsigned char second[] = {0x31, 0xC9, 0xB1, 16, 0xF3, 0xA4, 0xC3};
    using Copy = void (*)(void* to, const void* from); // rdi: to, rsi: from, as rep movsb wants them
    const auto copy = reinterpret_cast<Copy>(code);
    char from[16] = "fifteen bytes..", to[16];
    pmc::Counter c{"instructions:u"};
    auto interval = [&] {
        const std::uint64_t start = c.read();
        copy(to, from);
        return c.read() - start;
    };
    std::printf("jit rep: first code");
    std::memcpy(code, first, sizeof first);
    for (int i = 0; i < 3; ++i) std::printf(" %llu", static_cast<unsigned long long>(interval()));
    std::printf("; replaced at the same address");
    std::memcpy(code, second, sizeof second);
    for (int i = 0; i < 3; ++i) std::printf(" %llu", static_cast<unsigned long long>(interval()));
    std::printf("\n");
    return 0;
}

/// A loop whose block ends at a page boundary: its last instruction (a 5-byte mov) crosses into the next page, so
/// QEMU ends the block before it and starts the next block with it. Every pass must count its 19 instructions
/// (dec, 16 nops, mov, jnz): QEMU 7.2 still listed the mov in the first block, and a plugin counting the listed
/// instructions counted 20. Prints the count per pass; exit status 1 when it is not 19.
int run_page_cross() {
    void* code = ::mmap(nullptr, 2 * 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        std::printf("page-cross: cannot map executable memory\n");
        return 1;
    }
    std::vector<unsigned char> f = {0x48, 0x89, 0xF9}; // mov rcx, rdi
    const std::size_t loop = f.size();
    f.insert(f.end(), {0x48, 0xFF, 0xC9});             // loop: dec rcx
    f.insert(f.end(), 16, 0x90);                       // 16 nops
    f.insert(f.end(), {0xB8, 0x78, 0x56, 0x34, 0x12}); // mov eax, 0x12345678: bytes 22 to 26, across the page
    const auto back = static_cast<unsigned char>(static_cast<int>(loop) - static_cast<int>(f.size() + 2));
    f.insert(f.end(), {0x75, back, 0xC3});             // jnz loop; ret
    const std::size_t entry = 4096 - 24;               // the mov starts 2 bytes before the page's end
    std::memcpy(static_cast<unsigned char*>(code) + entry, f.data(), f.size());
    using Loop = void (*)(std::uint64_t passes);
    const auto run = reinterpret_cast<Loop>(static_cast<unsigned char*>(code) + entry);
    pmc::Counter c{"instructions:u"};
    auto interval = [&](std::uint64_t passes) {
        const std::uint64_t start = c.read();
        run(passes);
        return c.read() - start;
    };
    const std::uint64_t one = interval(1), more = interval(1001);
    const double per_pass = static_cast<double>(more - one) / 1000.0;
    std::printf("page-cross: %.3f instructions per pass (19 expected)\n", per_pass);
    return per_pass == 19.0 ? 0 : 1;
}
#endif

#if defined(__x86_64__)
extern "C" __sighandler_t bsd_signal(int, __sighandler_t); // (glibc exports it; its headers no longer declare it)

/// Signal handlers and the x86-64 ABI's stack alignment: QEMU before 9.1 enters handlers 8 bytes off it, and the
/// preload library of pmc emulate realigns them. A handler that keeps an SSE value on its stack, as libuv's SIGCHLD
/// handler does in ctest, uses an aligned move (movaps): on a misaligned stack it faults.
std::atomic<int> aligned_entries{0}, misaligned_entries{0}, plain_calls{0}, siginfo_calls{0};
std::atomic<bool> blocked_inside{false};
__attribute__((noinline)) void spill_sse() {
    alignas(16) float spill[4];
    auto at = reinterpret_cast<std::uintptr_t>(spill);
    asm volatile("" : "+r"(at)); // the compiler takes the stack as aligned: the address says whether it is
    (at % 16 == 0 ? aligned_entries : misaligned_entries).fetch_add(1);
    asm volatile("xorps %%xmm0, %%xmm0\n\tmovaps %%xmm0, %0" : "=m"(spill) : : "xmm0"); // faults if misaligned
}
void plain_handler(int sig) {
    plain_calls.fetch_add(1);
    sigset_t now;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &now);
    blocked_inside = sigismember(&now, sig) == 1;
    spill_sse();
}
void siginfo_handler(int sig, siginfo_t* info, void* context) {
    if (info && info->si_signo == sig && context) siginfo_calls.fetch_add(1);
    spill_sse();
}
void other_handler(int) {}

int run_signal_frames() {
    int failed = 0;
    auto check = [&](bool ok, const std::string& what) {
        std::printf("%s: %s\n", what.c_str(), ok ? "ok" : "FAILED");
        if (!ok) ++failed;
    };
    auto delivered = [&](const std::string& how, int expect_plain, int expect_siginfo, auto&& again) {
        aligned_entries = misaligned_entries = plain_calls = siginfo_calls = 0;
        std::fflush(stdout);
        ::raise(SIGUSR1); // this thread
        again();          // (sysv_signal's handler is reset at delivery)
        std::thread other([] { ::raise(SIGUSR1); }); // and another
        other.join();
        check(aligned_entries == 2 && misaligned_entries == 0 && plain_calls == expect_plain &&
                  siginfo_calls == expect_siginfo,
              how + ": handler ran twice on an aligned stack, with its arguments");
    };
    using Installer = void (*)(int, void (*)(int));
    const std::pair<const char*, Installer> installers[] = {
        {"signal", [](int sig, void (*h)(int)) { ::signal(sig, h); }},
        {"bsd_signal", [](int sig, void (*h)(int)) { ::bsd_signal(sig, h); }},
        {"sysv_signal", [](int sig, void (*h)(int)) { ::sysv_signal(sig, h); }},
        {"sigset", [](int sig, void (*h)(int)) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
             ::sigset(sig, h);
#pragma GCC diagnostic pop
         }},
    };
    for (const auto& [name, install] : installers) {
        install(SIGUSR1, plain_handler);
        delivered(name, 2, 0, [&, install = install] { install(SIGUSR1, plain_handler); });
        ::signal(SIGUSR1, SIG_DFL);
    }
    struct sigaction sa {}, old {};
    sa.sa_sigaction = siginfo_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    const auto nothing_more = [] {};
    delivered("sigaction with SA_SIGINFO", 0, 2, nothing_more);
    ::sigaction(SIGUSR1, nullptr, &old);
    check(old.sa_sigaction == siginfo_handler && (old.sa_flags & SA_SIGINFO),
          "sigaction's old action: the program's own SA_SIGINFO handler");
    sa.sa_handler = plain_handler;
    sa.sa_flags = 0;
    ::sigaction(SIGUSR1, &sa, &old);
    check(old.sa_sigaction == siginfo_handler, "sigaction replacing it returns the program's previous handler");
    delivered("sigaction without SA_SIGINFO", 2, 0, nothing_more);
    check(blocked_inside, "without SA_NODEFER, the signal is blocked in its handler");
    check(::signal(SIGUSR1, other_handler) == plain_handler, "signal() returns the program's previous handler");
    check(::signal(SIGUSR1, SIG_DFL) == other_handler, "signal(SIG_DFL) returns the program's previous handler");
    sa.sa_flags = static_cast<int>(SA_RESETHAND | SA_NODEFER);
    ::sigaction(SIGUSR1, &sa, nullptr);
    plain_calls = 0;
    ::raise(SIGUSR1);
    ::sigaction(SIGUSR1, nullptr, &old);
    check(plain_calls == 1 && old.sa_handler == SIG_DFL, "SA_RESETHAND: the handler ran once, then SIG_DFL");
    check(!blocked_inside, "SA_NODEFER: the signal is not blocked in its handler");
    ::signal(SIGUSR2, SIG_IGN);
    ::raise(SIGUSR2);
    ::sigaction(SIGUSR2, nullptr, &old);
    check(old.sa_handler == SIG_IGN, "SIG_IGN: ignored, and reported as SIG_IGN");
    std::printf("signal-frames: %s\n", failed ? "SOME CHECKS FAILED" : "all checks passed");
    return failed ? 1 : 0;
}

/// The preload library's table of handlers under threads: installs of two handlers on two threads, by sigaction and
/// by signal, while a third thread raises the signal. Each delivery must reach one of the two on an aligned stack,
/// and each old action must be one of them (never the trampoline, never SIG_DFL once both installed).
void race_handler_a(int) { spill_sse(); }
void race_handler_b(int) { spill_sse(); }
int run_signal_race() {
    aligned_entries = misaligned_entries = 0;
    ::signal(SIGUSR1, race_handler_a);
    std::atomic<bool> stop{false};
    std::atomic<int> strange_old{0};
    auto installer = [&](bool by_sigaction) {
        for (int i = 0; i < 2000; ++i) {
            void (*const wanted)(int) = i % 2 ? race_handler_a : race_handler_b;
            void (*old)(int) = nullptr;
            if (by_sigaction) {
                struct sigaction sa {}, before {};
                sa.sa_handler = wanted;
                sigemptyset(&sa.sa_mask);
                ::sigaction(SIGUSR1, &sa, &before);
                old = before.sa_handler;
            } else {
                old = ::signal(SIGUSR1, wanted);
            }
            if (old != race_handler_a && old != race_handler_b) strange_old.fetch_add(1);
        }
    };
    int raised = 0;
    std::thread raiser([&] {
        while (!stop.load()) {
            ::raise(SIGUSR1);
            ++raised;
        }
    });
    std::thread one(installer, true), two(installer, false);
    one.join();
    two.join();
    stop = true;
    raiser.join();
    const bool ok = misaligned_entries == 0 && aligned_entries == raised && strange_old == 0;
    std::printf("signal-race: %d deliveries, %d on an aligned stack; %d old actions neither handler: %s\n", raised,
                aligned_entries.load(), strange_old.load(), ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

/// What glibc's sigaction does for the kernel on x86-64, by hand: the preload library cannot see it.
extern "C" void pmc_test_restore_rt();
asm(".pushsection .text\n"
    ".type pmc_test_restore_rt, @function\n"
    "pmc_test_restore_rt:\n"
    "  mov $15, %eax\n" // rt_sigreturn
    "  syscall\n"
    ".popsection\n");
struct KernelSigaction {
    void* handler;
    unsigned long flags;
    void (*restorer)();
    std::uint64_t mask;
};
void install_raw(int sig, void (*handler)(int)) {
    KernelSigaction ka{reinterpret_cast<void*>(handler), 0x04000000 /* SA_RESTORER */, pmc_test_restore_rt, 0};
    ::syscall(SYS_rt_sigaction, sig, &ka, nullptr, sizeof ka.mask);
}

int run_raw_handler() {
    install_raw(SIGUSR1, plain_handler);
    std::fflush(stdout);
    ::raise(SIGUSR1);
    std::printf("raw handler: ran %d time(s), on %s stack\n", plain_calls.load(),
                aligned_entries == 1 ? "an aligned" : "a misaligned");
    return 0;
}

/// The same handler entered through the preload library's realigned_handler (installed by sigaction) and directly
/// (the raw system call): each interval around raise() on two threads, and their difference, which must be one
/// constant (0 where nothing is realigned).
volatile int cost_calls = 0;
void cost_handler(int) { cost_calls = cost_calls + 1; } // no SSE: it runs on a misaligned stack too
int run_signal_cost() {
    auto intervals = [](const char* how) {
        std::string line;
        auto measure = [&line] {
            pmc::Counter c{"instructions:u"};
            for (int i = 0; i < 5; ++i) {
                const std::uint64_t start = c.read();
                ::raise(SIGUSR1);
                line += " " + std::to_string(c.read() - start);
            }
        };
        measure();
        std::thread other(measure);
        other.join();
        std::printf("%s:%s\n", how, line.c_str());
    };
    struct sigaction sa {};
    sa.sa_handler = cost_handler;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    intervals("through sigaction");
    install_raw(SIGUSR1, cost_handler);
    intervals("raw rt_sigaction");
    return 0;
}

#endif

/// System calls QEMU's user mode refuses; pmc's plugin names them on stderr once per process (not clone3 when the
/// program falls back to clone, as glibc does).
int run_refused(const std::string& what) {
    sock_filter allow_all[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    sock_fprog program{1, allow_all};
    auto say = [&](long result) {
        const int err = errno;
        std::printf("%s: %ld%s%s\n", what.c_str(), result, result < 0 ? ", " : "", result < 0 ? std::strerror(err) : "");
    };
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); // (what a filter needs without privilege)
    for (int i = 0; i < 2; ++i) {
        if (what == "seccomp-prctl") {
            say(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0));
        } else if (what == "seccomp") {
            say(::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program));
        } else if (what == "clone3") {
            clone_args args{};
            args.exit_signal = SIGCHLD; // a fork, whose child leaves at once
            std::fflush(stdout);
            const long pid = ::syscall(SYS_clone3, &args, sizeof args);
            if (pid == 0) ::syscall(SYS_exit, 0);
            say(pid < 0 ? pid : 0);
            if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
        } else if (what == "threads") {
            std::thread a([] {}), b([] {}), c([] {});
            a.join(), b.join(), c.join();
            pid_t child = 0;
            char* args[] = {const_cast<char*>("/bin/true"), nullptr};
            const int spawned = ::posix_spawn(&child, "/bin/true", nullptr, nullptr, args, environ);
            int status = 1;
            if (spawned == 0) ::waitpid(child, &status, 0);
            say(spawned == 0 && status == 0 ? 0 : -1);
        } else {
            return 2;
        }
    }
    return 0;
}

/// Threads whose lives overlap, one after another: QEMU numbers a new thread one past the highest live index, so
/// the indexes climb past the plugin's slots (a test build has 4) while at most three threads live. Every
/// thread's intervals must be exact: a slot shared by two live threads is not.
int run_churn() {
    std::atomic<int> off{0};
    std::thread previous;
    for (int i = 0; i < 12; ++i) {
        std::promise<void> counting;
        auto started = counting.get_future();
        std::thread next([&off, i, counting = std::move(counting)]() mutable {
            pmc::Counter c{"instructions:u"};
            (void)c.read();
            counting.set_value();
            std::uint64_t base = 0;
            const std::string where = "thread " + std::to_string(i);
            off += check_exact(where.c_str(), 100, base);
        });
        started.wait(); // the new thread counts while the previous one still does
        if (previous.joinable()) previous.join();
        previous = std::move(next);
    }
    previous.join();
    std::printf("churn: %s\n", off == 0 ? "every interval exact on all 12 threads" : "NOT every interval exact");
    return off == 0 ? 0 : 1;
}

/// Code whose count follows where its stack buffers lie (glibc's string routines take another path for each
/// alignment): the interval of 2000 strlen and memcpy calls on stack arrays, and the page offset of a local.
__attribute__((noinline)) std::size_t stack_work(int i) {
    char text[96], copy[96];
    std::memset(text, 'a' + i % 26, sizeof text);
    text[40 + i % 50] = '\0';
    std::memcpy(copy, text, sizeof copy);
    asm volatile("" : : "r"(copy) : "memory");
    return std::strlen(copy) + std::strlen(text + i % 7);
}
int run_stack() {
    pmc::Counter c{"instructions:u"};
    volatile char local = 0;
    std::size_t sum = 0;
    const std::uint64_t start = c.read();
    for (int i = 0; i < 2000; ++i) sum += stack_work(i);
    const std::uint64_t got = c.read() - start;
    std::printf("stack: page offset of a local %zu; 2000 calls on stack strings: %llu instructions (%zu)\n",
                static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(&local) & 4095),
                static_cast<unsigned long long>(got), sum);
    return 0;
}

/// Code whose count follows each environment variable's length and alignment (glibc's strlen reads aligned blocks):
/// what a program that copies its environment (Python's os.environ, Perl's %ENV) does at start.
int run_environment() {
    pmc::Counter c{"instructions:u"};
    std::size_t variables = 0, bytes = 0;
    const std::uint64_t start = c.read();
    for (int round = 0; round < 20; ++round)
        for (char** v = environ; *v; ++v) {
            const char* text = *v;
            asm volatile("" : "+r"(text)); // (strlen of the same string again, not folded)
            const std::size_t n = std::strlen(text);
            if (round == 0) ++variables, bytes += n;
        }
    const std::uint64_t got = c.read() - start;
    std::printf("environment: %zu variables, %zu bytes; 20 strlen of each: %llu instructions\n", variables, bytes,
                static_cast<unsigned long long>(got));
    return 0;
}

/// Where this program's memory lies (for comparing runs: QEMU lays it out, and pmc emulate pins what QEMU's own
/// allocations would move), and the GLIBC_TUNABLES it was given.
thread_local int tls_variable = 0;
int run_addresses() {
    auto where = [](const char* who) {
        volatile char local = 0;
        void* small = std::malloc(32);
        void* large = std::malloc(std::size_t{1} << 20); // above glibc's mmap threshold: a mapping of its own
        std::printf("%s: stack %p malloc %p large %p tls %p\n", who, static_cast<void*>(const_cast<char*>(&local)), small,
                    large, static_cast<void*>(&tls_variable));
        std::free(small);
        std::free(large);
    };
    void* mapped = ::mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::printf("mmap %p code %p\n", mapped, reinterpret_cast<void*>(&run_addresses));
    where("main");
    std::thread([&] { where("thread"); }).join();
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    std::printf("GLIBC_TUNABLES %s%s%s\n", tunables ? "[" : "unset", tunables ? tunables : "", tunables ? "]" : "");
    return 0;
}

/// Requests naming memory the program cannot write: the plugin must refuse them, not crash QEMU.
/// A store through a null pointer in a process with no signal handler: its own SIGSEGV, which pmc must not blame on
/// QEMU's signal frames.
int run_segfault() {
    volatile int* volatile nowhere = nullptr;
    *nowhere = 1;
    return 0;
}

int run_bad_pointer() {
    namespace em = pmc::detail::emulated;
    em::request(em::Op::read, reinterpret_cast<void*>(0x10));
    em::request(em::Op::hello, reinterpret_cast<void*>(0x10));
    void* read_only = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (read_only != MAP_FAILED) em::request(em::Op::read, read_only);
    pmc::Counter c{"instructions:u"};
    const std::uint64_t start = c.read();
    known_loop(1000);
    std::printf("bad pointers: still running; a counter reads %s\n", c.read() > start ? "on" : "nothing");
    return 0;
}

/// How instructions the emulator handles specially count (docs/emulated-pmu.md): the extra instructions an interval
/// shows for cpuid, a system call, a signal delivery and a page fault, over the same interval without them.
volatile int handled = 0;
void on_signal(int) { handled = handled + 1; }
__attribute__((noinline)) std::uint64_t nothing(pmc::Counter& c) {
    const std::uint64_t start = c.read();
    asm volatile("nop");
    return c.read() - start;
}
int run_quirks() {
    pmc::Counter c{"instructions:u"};
    const std::uint64_t base = nothing(c);
    auto measure = [&](const char* what, auto&& body) {
        const std::uint64_t start = c.read();
        body();
        const std::uint64_t got = c.read() - start;
        std::printf("%s: %+lld instructions over an empty interval\n", what,
                    static_cast<long long>(got) - static_cast<long long>(base));
    };
#if defined(__x86_64__)
    measure("cpuid (1 instruction)", [] {
        unsigned a = 0, b, cc = 0, d;
        asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(cc), "=d"(d));
    });
    measure("getppid system call (mov + syscall: 2 instructions)", [] {
        long rax = 110; // SYS_getppid
        asm volatile("syscall" : "+a"(rax) : : "rcx", "r11", "memory");
    });
#endif
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigaction(SIGUSR1, &sa, nullptr);
    const std::uint64_t direct_start = c.read();
    on_signal(0);
    const std::uint64_t direct = c.read() - direct_start - base;
    std::printf("the signal handler called directly: %llu instructions\n", static_cast<unsigned long long>(direct));
    measure("raise(SIGUSR1): libc's raise, the delivery, the handler and its return", [] { ::raise(SIGUSR1); });
    return 0;
}

/// A group of instruction events reads the one count for every member, and counts all along.
void probe_group() {
    auto g = pmc::Group::try_open({"instructions:u", "instructions"});
    if (!g) {
        std::printf("group: error: %s\n", g.failure().message.substr(0, g.failure().message.find('\n')).c_str());
        return;
    }
    pmc::GroupReading a = g->make_reading(), b = g->make_reading();
    std::vector<pmc::EventCount> d;
    g->read(a);
    known_loop(1000);
    g->read(b);
    pmc::difference(a, b, d);
    std::printf("group: read with %s; members %llu and %llu, counted %s, running fraction %.2f\n",
                pmc::to_string(g->path()), static_cast<unsigned long long>(d[0].raw),
                static_cast<unsigned long long>(d[1].raw), d[0].counted ? "yes" : "no", d[0].running_fraction);
    auto mixed = pmc::Group::try_open({"instructions:u", "page-faults"});
    std::printf("group with page-faults: %s\n",
                mixed ? "opened" : mixed.failure().message.substr(0, mixed.failure().message.find('\n')).c_str());
}

int run_probe() {
    probe_group();
    for (const char* event : {"instructions:u", "instructions", "instructions-minus-irqs:u", "page-faults", "wall-time"}) {
        auto c = pmc::Counter::try_open(event);
        if (c) {
            std::printf("%s: opened, read with %s; %s\n", event, pmc::to_string(c->path()), c->notes().front().c_str());
        } else {
            std::string m = c.failure().message;
            for (auto& ch : m)
                if (ch == '\n') ch = ' ';
            std::printf("%s: error: %s\n", event, m.c_str());
        }
    }
    return 0;
}

/// A page written inside a scope: with 4 KiB pages, each page holds a few rounds of 17 records, so the writes fall
/// in different parents, after different children. Every parent must record the same count under an exact counter.
int run_page_writes(std::uint64_t rounds, int children) {
    pmc::ProfilerOptions small;
    small.page_bytes = 4096;
    auto prof = pmc::Profiler::from_env(small);
    const pmc::Label parent = prof.label("parent"), child = prof.label("child");
    for (std::uint64_t r = 0; r < rounds; ++r) {
        auto p = prof.scope(parent);
        for (int c = 0; c < children; ++c) auto s = prof.scope(child);
    }
    return 0;
}

int run_profile(std::uint64_t plant) {
    auto prof = pmc::Profiler::from_env();
    const pmc::Label outer = prof.label("outer"), work = prof.label("work"), planted = prof.label("planted");
    auto body = [&](std::uint64_t scale) {
        for (int i = 0; i < 50; ++i) {
            auto s = prof.scope(outer);
            {
                auto w = prof.scope(work);
                known_loop(1000 * scale + static_cast<std::uint64_t>(i));
            }
            auto p = prof.scope(planted);
            known_loop(1 + plant);
        }
    };
    // The threads register with the profiler (their first event) one after the other, so that each run numbers
    // them alike and pmc aggregate lines up each thread's own intervals.
    std::promise<void> a_started;
    std::thread a([&] {
        prof.thread_name("a");
        a_started.set_value();
        body(2);
    });
    a_started.get_future().wait();
    std::thread b([&] {
        prof.thread_name("b");
        body(3);
    });
    body(1);
    a.join();
    b.join();
    return 0;
}

/// An interpreter's hooks, as a user writes them: a 'text' scope around a LabelCache lookup and a 'keyed' scope
/// around a KeyedLabelCache lookup, for 600 names of 1 to 300 characters (each seen first, then twice again), and a
/// 'paused' scope around work inside Profiler::pause(). Every one of them must record the same value: a lookup's
/// cost depends on neither the key nor the names seen before. Then an error path: three calls begun, end_to(depth).
int run_hooks() {
    auto prof = pmc::Profiler::from_env();
    const pmc::Label text = prof.label("text"), keyed = prof.label("keyed"), by_int = prof.label("keyed-id"), paused = prof.label("paused"),
                     call = prof.label("call"), pcall = prof.label("pcall");
    std::vector<std::string> names;
    for (int i = 0; i < 600; ++i) names.push_back("fn" + std::to_string(i) + std::string(static_cast<std::size_t>(i % 300), 'x'));
    pmc::LabelCache by_text{prof};
    pmc::KeyedLabelCache<const std::string*> by_address{prof};
    pmc::KeyedLabelCache<int> by_id{prof};
    for (int round = 0; round < 3; ++round)
        for (std::size_t i = 0; i < names.size(); ++i) {
            const std::string& name = names[i];
            {
                auto s = prof.scope(text);
                by_text(name);
            }
            {
                auto s = prof.scope(keyed);
                by_address(&name, [&] { return name; });
            }
            {
                auto s = prof.scope(by_int);
                by_id(static_cast<int>(i), [&] { return name; });
            }
            {
                auto s = prof.scope(paused);
                const pmc::ProfilerPause own_work = prof.pause();
                known_loop(1 + i);
            }
        }
    // Lua's pcall: an error raised three calls deep unwinds past their return hooks.
    for (int i = 0; i < 10; ++i) {
        prof.begin(pcall);
        const std::uint32_t at = prof.depth();
        prof.begin(call);
        prof.begin(call);
        prof.begin(call);
        prof.end_to(at); // the error lands here
        prof.end(pcall);
    }
    return 0;
}

/// Three threads started at once, each interning its labels lazily (a KeyedLabelCache miss: Profiler::label()),
/// then allocating and freeing inside 'alloc'. Which thread interns a label first changes from run to run; the
/// profiler's bookkeeping must not land on that thread's heap (glibc: its own arena), or its later mallocs cost
/// differently and 'alloc' changes between identical runs. The threads take turns inside 'alloc' (waiting outside
/// any interval): glibc's malloc costs more instructions when another thread is in malloc at the same moment (under
/// load: +96 to +267 in 3 to 12 intervals of 84, 12 runs; none with turns, or with no malloc), which is the
/// program's own cost, not the profiler's.
int run_alloc_race() {
    auto prof = pmc::Profiler::from_env();
    static std::atomic<int> turn{0};
    static const char* const names[] = {"a_long_label_name_number_zero", "a_long_label_name_number_one",
                                        "a_long_label_name_number_two", "a_long_label_name_number_three"};
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i)
        threads.emplace_back([&prof, i] {
            prof.thread_name("worker-" + std::to_string(i));
            pmc::KeyedLabelCache<int> labels{prof};
            const pmc::Label alloc = labels(100, [] { return "alloc"; });
            for (int round = 0; round < 4; ++round) {
                for (int k = 0; k < 4; ++k) {
                    const pmc::Label l = labels(k, [k] { return names[k]; });
                    prof.begin(l);
                    prof.end(l);
                }
                while (turn.load() % 3 != i) std::this_thread::yield();
                prof.begin(alloc);
                void* blocks[8];
                for (int k = 0; k < 8; ++k) blocks[k] = std::malloc(24 + 40 * static_cast<std::size_t>(k));
                for (void* b : blocks) std::free(b);
                prof.end(alloc);
                turn.fetch_add(1);
            }
        });
    for (auto& t : threads) t.join();
    return 0;
}

/// Records 'tick' scopes on this thread and another until a signal (left at its default: the profiler's handler
/// writes what was recorded, then the signal ends the process). `ready` is created once both threads have recorded.
int run_until_signal(const char* ready) {
    auto prof = pmc::Profiler::from_env();
    const pmc::Label tick = prof.label("tick"), other = prof.label("other");
    std::atomic<int> started{0};
    std::thread worker([&] {
        prof.thread_name("worker");
        for (std::uint64_t i = 0;; ++i) {
            auto s = prof.scope(other);
            known_loop(100);
            if (i == 100) started.fetch_add(1);
        }
    });
    worker.detach();
    for (std::uint64_t i = 0;; ++i) {
        {
            auto s = prof.scope(tick);
            known_loop(100);
        }
        if (i == 100) started.fetch_add(1);
        if (i > 100 && started.load() == 2 && ready) {
            if (FILE* f = std::fopen(ready, "w")) std::fclose(f);
            ready = nullptr;
        }
    }
}

/// pmc emulate --cache: `lines` lines 4 KiB apart (one set of a 64-set D1), read in turn `rounds` times; on `threads`
/// threads, each over lines of its own.
alignas(4096) char chase_lines[4][16 * 4096];
int run_chase(std::uint64_t lines, std::uint64_t rounds, unsigned threads) {
    if (lines > 16 || threads > 4 || threads == 0) return 2;
    std::atomic<unsigned> sum{0};
    const auto chase = [&](unsigned t) {
        volatile char* base = chase_lines[t];
        unsigned s = 0;
        for (std::uint64_t r = 0; r < rounds; ++r)
            for (std::uint64_t i = 0; i < lines; ++i) s += static_cast<unsigned char>(base[i * 4096]);
        sum += s;
    };
    if (threads == 1) {
        chase(0);
    } else {
        std::vector<std::thread> workers;
        for (unsigned t = 0; t < threads; ++t) workers.emplace_back(chase, t);
        for (auto& w : workers) w.join();
    }
    return sum.load() == 12345 ? 3 : 0;
}

/// For --inclusion: with a 32 KiB 8-way D1 (64 sets: address bits 6-11) and a 64 KiB 64-way LL (16 sets: bits 6-9),
/// the hot line at offset 0 and the 96 lines at 4096 j + 1024 m (j < 32, m = 1..3) share LL set 0, but the 96 fill
/// D1 sets 16, 32 and 48, never the hot line's set 0. Each round reads the hot line, then the 96: they miss D1 and LL
/// every time (32 per 8-way D1 set, 97 lines cycling through 64 LL ways) and push the hot line out of the LL. With
/// Cachegrind's inclusion the hot line stays in the D1 and hits; with strict inclusion it leaves the D1 with the LL
/// and misses both once per round.
alignas(4096) char inclusion_lines[32 * 4096];
int run_inclusion(std::uint64_t rounds) {
    const volatile char* base = inclusion_lines;
    unsigned s = 0;
    for (std::uint64_t r = 0; r < rounds; ++r) {
        s += static_cast<unsigned char>(base[0]);
        for (std::uint64_t j = 0; j < 32; ++j)
            for (std::uint64_t m = 1; m <= 3; ++m) s += static_cast<unsigned char>(base[j * 4096 + m * 1024]);
    }
    return s == 12345 ? 3 : 0;
}

/// Reads `lines` lines 4 KiB apart (one set of a 64-set, 8-way D1) in turn, `rounds` times.
__attribute__((noinline)) void chase_set(const volatile char* base, std::uint64_t lines, std::uint64_t rounds) {
    unsigned s = 0;
    for (std::uint64_t r = 0; r < rounds; ++r)
        for (std::uint64_t i = 0; i < lines; ++i) s += static_cast<unsigned char>(base[i * 4096]);
    if (s == 12345) std::puts("");
}

int run_cache_read() {
    pmc::Counter misses("L1-dcache-load-misses:u"), loads("L1-dcache-loads:u"), llc("LLC-load-misses:u");
    pmc::Group group({"instructions:u", "L1-dcache-load-misses:u", "cache-misses:u"});
    std::printf("note: %s\n", misses.notes().empty() ? "(none)" : misses.notes().front().c_str());
    int off = 0;
    const auto check = [&](const char* what, std::uint64_t got, std::uint64_t want) {
        std::printf("%s: %llu (want %llu)%s\n", what, static_cast<unsigned long long>(got),
                    static_cast<unsigned long long>(want), got == want ? "" : "  OFF");
        off += got != want;
    };
    // What a read adds, back to back: the same every time (the constant-cost rule).
    std::uint64_t constant = 0;
    for (int i = 0; i < 5; ++i) {
        const std::uint64_t a = loads.read();
        const std::uint64_t b = loads.read();
        if (i == 0) constant = b - a;
        check("loads between two reads", b - a, constant);
    }
    // 9 lines of one set, LRU, 8 ways: every access misses. The interval of R rounds minus that of 0 rounds.
    const volatile char* base = chase_lines[0];
    chase_set(base, 9, 2); // warm: the set holds the last 8 lines, the code and the stack are in
    std::uint64_t zero_rounds = 0;
    for (std::uint64_t rounds : {0, 0, 1, 2, 5, 20}) {
        const std::uint64_t m0 = misses.read(), l0 = loads.read();
        chase_set(base, 9, rounds);
        const std::uint64_t dm = misses.read() - m0;
        (void)l0;
        if (rounds == 0) zero_rounds = dm;
        char what[64];
        std::snprintf(what, sizeof what, "9 lines, %llu rounds: misses", static_cast<unsigned long long>(rounds));
        check(what, dm - zero_rounds, 9 * rounds);
    }
    // 8 lines fit the set: no miss once warm.
    chase_set(base, 8, 2);
    const std::uint64_t m8 = misses.read();
    chase_set(base, 8, 20);
    check("8 lines, 20 rounds: misses (after the reads' own)", misses.read() - m8, zero_rounds);
    // The group reads the same model at one request: 9 lines x 20 rounds, and no LL miss once the lines are in.
    // Every window at the same code site, so that the measured one fetches no instruction line the ones before did
    // not (a window written out after the loop fetched lines of its own: an LL miss that depended on code layout).
    pmc::GroupReading a = group.make_reading(), b = group.make_reading();
    std::uint64_t window[3][3] = {};
    const std::uint64_t rounds_of[3] = {0, 0, 20}; // (the first pass runs the group's read code for the first time)
    for (int k = 0; k < 3; ++k) {
        group.read(a);
        chase_set(base, 9, rounds_of[k]);
        group.read(b);
        for (int j = 0; j < 3; ++j) window[k][j] = b.values[static_cast<std::size_t>(j)] - a.values[static_cast<std::size_t>(j)];
    }
    check("group: 9 lines, 20 rounds: misses", window[2][1] - window[1][1], 180);
    check("group: cache-misses (lines already in the LL)", window[2][2] - window[1][2], 0);
    std::printf("group: instructions %llu\n", static_cast<unsigned long long>(window[2][0]));
    const std::uint64_t llc0 = llc.read();
    check("LLC-load-misses of a warm chase", llc.read() - llc0, 0);
    return off ? 1 : 0;
}

/// load-samples BYTES LOADS PERIOD [WARM] [THREADS] [LDLAT]: each thread chases LOADS dependent loads through a cyclic chain
/// of the 64-byte lines of a BYTES block of its own, in address order, under a load sampler of PERIOD (pmc emulate
/// --cache: the emulated PMU's), after WARM passes over the block; prints what the samples say. LDLAT goes into the
/// event as written ("3,period=500": the period from the event, with PERIOD 0 in SamplerOptions).
int run_load_samples(std::size_t bytes, std::uint64_t loads, std::uint64_t options_period, unsigned warm,
                     unsigned threads, const std::string& ldlat) {
    const std::string event = "cpu/mem-loads,ldlat=" + ldlat + "/P";
    const std::size_t in_event = ldlat.find("period=");
    const std::uint64_t period = options_period ? options_period
                                 : in_event != std::string::npos ? std::strtoull(ldlat.c_str() + in_event + 7, nullptr, 10)
                                                                 : 1;
    const std::size_t lines = bytes / 64;
    if (lines < 2) return 2;
    std::vector<std::string> report(threads);
    int failures = 0;
    std::mutex failures_lock;
    const auto one = [&](unsigned t) {
        auto* block = static_cast<char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        for (std::size_t i = 0; i < lines; ++i)
            *reinterpret_cast<void**>(block + i * 64) = block + ((i + 1) % lines) * 64;
        void* p = block;
        for (unsigned w = 0; w < warm; ++w)
            for (std::size_t i = 0; i < lines; ++i) p = *static_cast<void* volatile*>(p);
        struct Seen {
            std::uint64_t ip, addr, weight, time, period;
            pmc::DataSource source;
            std::uint32_t tid;
        };
        std::vector<Seen> seen;
        seen.reserve(static_cast<std::size_t>(loads / period) + 1000);
        pmc::SamplerOptions o;
        o.period = options_period;
        o.fields = pmc::sample::ip | pmc::sample::tid | pmc::sample::time | pmc::sample::addr | pmc::sample::period |
                   pmc::sample::weight | pmc::sample::data_src; // every field the emulated PMU writes but cpu
        auto sampler = pmc::Sampler::try_open(event, o);
        if (!sampler) {
            std::lock_guard<std::mutex> hold(failures_lock);
            report[t] = "cannot sample: " + sampler.failure().message;
            ++failures;
            return;
        }
        for (std::uint64_t n = loads; n; --n) p = *static_cast<void* volatile*>(p);
        const pmc::BiasCheck check = sampler->stop([&](const pmc::Sample& x) {
            if (seen.size() < seen.capacity())
                seen.push_back({x.ip, x.addr, x.weight, x.time, x.period, x.data_source, x.tid});
        });
        const auto begin = reinterpret_cast<std::uint64_t>(block), end = begin + bytes;
        std::uint64_t inside = 0, l1 = 0, l3 = 0, ram = 0, other = 0, not_load = 0, wrong_weight = 0, wrong_tid = 0,
                      wrong_time = 0, last_time = 0;
        std::vector<std::uint64_t> ips;
        const auto tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
        for (const Seen& x : seen) {
            wrong_tid += x.tid != tid;
            wrong_time += x.time == 0 || x.time < last_time || x.period != period; // the host's clock, rising
            last_time = x.time;
            if (x.addr < begin || x.addr >= end) continue;
            ++inside;
            not_load += x.source.op != pmc::DataSource::Op::load;
            const auto level = x.source.level;
            (level == pmc::DataSource::Level::l1 ? l1 : level == pmc::DataSource::Level::l3 ? l3
             : level == pmc::DataSource::Level::ram                                  ? ram
                                                                                     : other)++;
            const std::uint64_t want = level == pmc::DataSource::Level::l1   ? 4
                                       : level == pmc::DataSource::Level::l3 ? 40
                                                                             : 200;
            wrong_weight += x.weight != want;
            if (std::find(ips.begin(), ips.end(), x.ip) == ips.end()) ips.push_back(x.ip);
        }
        char line[512];
        std::snprintf(line, sizeof line,
                      "loads counted %llu, samples %llu, counted/period %llu, lost %llu; in the block %llu: L1 %llu, "
                      "L3 %llu, RAM %llu, other %llu; not loads %llu, weights off %llu, tids off %llu, times off %llu, ips %zu; "
                      "%s\n",
                      static_cast<unsigned long long>(check.exact), static_cast<unsigned long long>(check.samples),
                      static_cast<unsigned long long>(check.exact / period), static_cast<unsigned long long>(check.lost),
                      static_cast<unsigned long long>(inside), static_cast<unsigned long long>(l1),
                      static_cast<unsigned long long>(l3), static_cast<unsigned long long>(ram),
                      static_cast<unsigned long long>(other), static_cast<unsigned long long>(not_load),
                      static_cast<unsigned long long>(wrong_weight), static_cast<unsigned long long>(wrong_tid),
                      static_cast<unsigned long long>(wrong_time), ips.size(), check.agrees ? "agrees" : check.warning.c_str());
        report[t] = line;
        if (t == 0 && threads == 1)
            for (const auto& note : sampler->notes()) report[t] += "note: " + note + "\n";
        ::munmap(block, bytes);
        if (!p) std::printf("\n");
    };
    std::vector<std::thread> running;
    for (unsigned t = 0; t < threads; ++t) running.emplace_back(one, t);
    for (auto& th : running) th.join();
    for (unsigned t = 0; t < threads; ++t) std::printf("thread %u: %s", t, report[t].c_str());
    return failures ? 1 : 0;
}

int run_cache_threads() {
    std::string lines[4];
    // The threads set up one after another, then work at once: what they allocate (the group, its readings, and
    // the malloc arena each thread's first allocation makes) lies at the same addresses in every run, whichever
    // thread the emulator runs first. Only the work, whose interleaving varies, runs in parallel.
    std::atomic<unsigned> turn{0};
    const auto work = [&lines, &turn](unsigned t) {
        while (turn.load() != t) std::this_thread::yield();
        pmc::Group g({"L1-dcache-loads:u", "L1-dcache-load-misses:u", "L1-dcache-stores:u", "L1-dcache-store-misses:u",
                      "L1-icache-load-misses:u", "LLC-loads:u", "LLC-load-misses:u", "cache-references:u",
                      "cache-misses:u", "instructions:u"});
        pmc::Counter misses("L1-dcache-load-misses:u");
        pmc::GroupReading a = g.make_reading(), b = g.make_reading();
        std::string line = "thread " + std::to_string(t) + ":";
        line.reserve(256);
        turn.store(t + 1);
        while (turn.load() != 4) std::this_thread::yield();
        const std::uint64_t m0 = misses.read();
        g.read(a);
        chase_set(chase_lines[t], 9 + t, 50 + 10 * t);
        for (int i = 0; i < 2000; ++i) chase_lines[t][(i * 64) % sizeof chase_lines[t]] = static_cast<char>(i);
        g.read(b);
        const std::uint64_t m1 = misses.read();
        for (std::size_t k = 0; k < b.values.size(); ++k) line += " " + std::to_string(b.values[k] - a.values[k]);
        line += " counter " + std::to_string(m1 - m0);
        lines[t] = line;
    };
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < 4; ++t) workers.emplace_back(work, t);
    for (auto& w : workers) w.join();
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    return 0;
}

#if defined(__x86_64__)
// An indirect call through a table, as a compiler emits for a virtual call: per iteration, exactly one indirect
// call, its return and the loop's conditional branch (3 branch instructions, 1 indirect). `mask` 0 calls table[0]
// every time; 1 alternates between table[0] and table[1]. The red zone below the stack pointer is the caller's:
// the calls push below it.
extern "C" void pmc_test_indirect_loop(std::uint64_t n, void (*const* table)(), std::uint64_t mask);
extern "C" void pmc_test_target_a();
extern "C" void pmc_test_target_b();
asm(R"(
    .text
    .p2align 4
    .type pmc_test_indirect_loop, @function
pmc_test_indirect_loop:
    push %rbx
    mov %rdi, %rbx
1:  mov %rbx, %rax
    and %rdx, %rax
    call *(%rsi,%rax,8)
    dec %rbx
    jnz 1b
    pop %rbx
    ret
    .size pmc_test_indirect_loop, .-pmc_test_indirect_loop
    .p2align 4
    .type pmc_test_target_a, @function
pmc_test_target_a:
    ret
    .size pmc_test_target_a, .-pmc_test_target_a
    .p2align 4
    .type pmc_test_target_b, @function
pmc_test_target_b:
    ret
    .size pmc_test_target_b, .-pmc_test_target_b
)");
void (*const indirect_table[2])() = {pmc_test_target_a, pmc_test_target_b};

// 128 conditional branches, each taken over one byte, 3 bytes apart: their addresses' low 7 bits are all 128 values,
// so with the all-taken history each indexes a counter of its own. The predictor starts every counter at strongly
// not-taken: a thread's first pass mispredicts each branch whose counter nothing trained, its second each again
// (weakly not-taken), its third none.
extern "C" void pmc_test_taken_chain();
asm(R"(
    .text
    .p2align 7
    .type pmc_test_taken_chain, @function
pmc_test_taken_chain:
    xor %eax, %eax
    .rept 128
    jz 1f
    nop
1:
    .endr
    ret
    .size pmc_test_taken_chain, .-pmc_test_taken_chain
)");
#endif

/// A conditional branch whose outcome is a pseudo-random bit (a 32-bit xorshift), `n` times: the predictor misses
/// about half of them.
__attribute__((noinline)) std::uint64_t random_branches(std::uint64_t n, std::uint32_t seed) {
    std::uint64_t taken = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
        if (seed & 1) {
            asm volatile("" : "+r"(taken)); // (a branch, not a cmov)
            ++taken;
        }
    }
    return taken;
}

int run_branch_read() {
    pmc::Counter branches("branch-instructions:u"), misses("branch-misses:u");
    pmc::Group group({"instructions:u", "branch-instructions:u", "branch-misses:u"});
    std::printf("note: %s\n", branches.notes().empty() ? "(none)" : branches.notes().front().c_str());
    std::printf("note: %s\n", misses.notes().empty() ? "(none)" : misses.notes().front().c_str());
    int off = 0;
    const auto check = [&](const char* what, std::uint64_t got, std::uint64_t want) {
        std::printf("%s: %llu (want %llu)%s\n", what, static_cast<unsigned long long>(got),
                    static_cast<unsigned long long>(want), got == want ? "" : "  OFF");
        off += got != want;
    };
    const auto at_least = [&](const char* what, std::uint64_t got, std::uint64_t least) {
        std::printf("%s: %llu (want at least %llu)%s\n", what, static_cast<unsigned long long>(got),
                    static_cast<unsigned long long>(least), got >= least ? "" : "  OFF");
        off += got < least;
    };
    // The interval of N loop iterations, minus that of 1000 (each measured twice: the first warms the predictor).
    const auto interval = [&](pmc::Counter& c, std::uint64_t n) {
        std::uint64_t d = 0;
        for (int pass = 0; pass < 2; ++pass) {
            const std::uint64_t a = c.read();
            known_loop(n);
            d = c.read() - a;
        }
        return d;
    };
    const std::uint64_t b1000 = interval(branches, 1000), m1000 = interval(misses, 1000);
    std::printf("1000 iterations: %llu branches (1000 and the read's own), %llu misses\n",
                static_cast<unsigned long long>(b1000), static_cast<unsigned long long>(m1000));
    for (std::uint64_t n : {1001, 2000, 5000}) {
        char what[96];
        std::snprintf(what, sizeof what, "%llu iterations: branches - those of 1000", static_cast<unsigned long long>(n));
        check(what, interval(branches, n) - b1000, n - 1000);
        std::snprintf(what, sizeof what, "%llu iterations: misses - those of 1000 (a warm loop)",
                      static_cast<unsigned long long>(n));
        check(what, interval(misses, n) - m1000, 0);
    }
    // The group reads the same counts at one request.
    // Both windows at one code site: two sites' own instructions around the reads may differ (register choice).
    pmc::GroupReading a = group.make_reading(), b = group.make_reading();
    std::uint64_t window[2][3] = {};
    const volatile std::uint64_t iterations[2] = {1000, 3000}; // (a load, not a branch: the same code for both)
    for (int pass = 0; pass < 2; ++pass)
        for (std::size_t k = 0; k < 2; ++k) {
            const std::uint64_t n = iterations[k];
            group.read(a), known_loop(n), group.read(b);
            for (std::size_t j = 0; j < 3; ++j) window[k][j] = b.values[j] - a.values[j];
        }
    check("group: 3000 - 1000 iterations: branches", window[1][1] - window[0][1], 2000);
    check("group: 3000 - 1000 iterations: instructions", window[1][0] - window[0][0], 4000);
    check("group: 3000 - 1000 iterations: misses", window[1][2] - window[0][2], 0);
#if defined(__x86_64__)
    // Indirect calls: 3 branches an iteration; a miss each when the target alternates, none when it stays.
    const auto indirect = [&](pmc::Counter& counter, std::uint64_t n, std::uint64_t mask) {
        std::uint64_t v = 0;
        for (int pass = 0; pass < 2; ++pass) {
            const std::uint64_t start = counter.read();
            pmc_test_indirect_loop(n, indirect_table, mask);
            v = counter.read() - start;
        }
        return v;
    };
    check("indirect calls, 2000 - 1000: branches", indirect(branches, 2000, 1) - indirect(branches, 1000, 1), 3000);
    check("indirect calls, one target, 2000 - 1000: misses", indirect(misses, 2000, 0) - indirect(misses, 1000, 0), 0);
    check("indirect calls, alternating targets, 2000 - 1000: misses",
          indirect(misses, 2000, 1) - indirect(misses, 1000, 1), 1000);
#endif
    // A conditional branch on a pseudo-random bit: about half mispredicted (and exactly the same in every run).
    {
        const std::uint64_t m0 = misses.read();
        const std::uint64_t taken = random_branches(10000, 12345);
        const std::uint64_t m = misses.read() - m0;
        std::printf("random branches: %llu misses of 10000 (%llu taken)\n", static_cast<unsigned long long>(m),
                    static_cast<unsigned long long>(taken));
        at_least("random branches: misses", m, 3000);
        check("random branches: misses at most 7000", m <= 7000, 1);
    }
#if defined(__x86_64__)
    // A new thread's predictor starts cold: 128 taken branches, each with a counter of its own, mispredicted on the
    // first pass and the second, predicted on the third (the reads add a few of their own).
    std::uint64_t pass[3] = {};
    std::thread([&pass] {
        pmc::Counter m("branch-misses:u");
        for (auto& p : pass) {
            const std::uint64_t m0 = m.read();
            pmc_test_taken_chain();
            p = m.read() - m0;
        }
    }).join();
    std::printf("128 taken branches in a new thread: %llu, %llu, %llu misses\n", static_cast<unsigned long long>(pass[0]),
                static_cast<unsigned long long>(pass[1]), static_cast<unsigned long long>(pass[2]));
    at_least("first pass: misses", pass[0], 120);
    at_least("second pass: misses", pass[1], 100);
    check("third pass: at most 8 misses", pass[2] <= 8, 1);
#endif
    return off ? 1 : 0;
}

/// 64 conditional branches an iteration, each on one bit of a 64-bit xorshift: branches at many addresses, under
/// every history, so that what they miss at first follows the state of most of the predictor's counters.
__attribute__((noinline)) std::uint64_t scattered_branches(std::uint64_t n, std::uint64_t seed) {
    std::uint64_t taken = 0;
#define PMC_TEST_BIT(k)                                                                                                \
    if ((seed >> (k)) & 1) {                                                                                           \
        asm volatile("" : "+r"(taken)); /* (a branch, not a cmov) */                                                   \
        ++taken;                                                                                                       \
    }
#define PMC_TEST_BITS8(k)                                                                                              \
    PMC_TEST_BIT(k) PMC_TEST_BIT(k + 1) PMC_TEST_BIT(k + 2) PMC_TEST_BIT(k + 3) PMC_TEST_BIT(k + 4)                     \
    PMC_TEST_BIT(k + 5) PMC_TEST_BIT(k + 6) PMC_TEST_BIT(k + 7)
    for (std::uint64_t i = 0; i < n; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        PMC_TEST_BITS8(0) PMC_TEST_BITS8(8) PMC_TEST_BITS8(16) PMC_TEST_BITS8(24)
        PMC_TEST_BITS8(32) PMC_TEST_BITS8(40) PMC_TEST_BITS8(48) PMC_TEST_BITS8(56)
    }
#undef PMC_TEST_BITS8
#undef PMC_TEST_BIT
    return taken;
}

/// (pmc emulate --branches) THREADS threads released at once (a pipe: they wait inside read(2), so that the wait
/// runs the same instructions however long it lasts), each registering with the profiler at the same moment by
/// naming itself, then recording 'mix' (scattered_branches from a seed of its own: what it misses follows the
/// predictor's state at its start) and 'loop' (a known loop). Under an exact counter every thread's labels must
/// record the same in every run, whatever the other threads did meanwhile.
/// Before that, each thread opens its counter and makes its first malloc in turn (thread t after thread t - 1): a
/// thread's first malloc makes its glibc arena, and whether that takes one munmap or two follows which thread made
/// its arena just before (glibc keeps an aligned address for the next arena in a variable all threads share) and,
/// on QEMU 10, where the kernel put the mapping beside QEMU's thread stacks. Made at once, the threads did it in
/// another order in most runs under load; instructions are not counted there, but each thread's predictor keeps
/// the other path and 'mix' missed a few more or fewer (docs/emulated-pmu.md).
int run_profile_threads(unsigned threads, bool racing) {
    static const char* const names[] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"};
    if (threads == 0 || threads > 8) return 2;
    auto prof = pmc::Profiler::from_env();
    const pmc::Label mix = prof.label("mix"), loop = prof.label("loop");
    int go[2], turn[9][2];
    if (::pipe(go) != 0) return 2;
    for (auto& p : turn)
        if (::pipe(p) != 0) return 2;
    std::uint64_t registration[8] = {}; // each thread's instructions in thread_name, its registration
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] { // (racing: all at once, in an order that follows the scheduling)
            char c = 0;
            if (!racing && ::read(turn[t][0], &c, 1) != 1) std::abort();
            pmc::Counter instructions("instructions:u");
            std::free(std::malloc(64)); // the thread's glibc arena, made in turn
            if (::write(turn[t + 1][1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) std::abort();
            const std::uint64_t before = instructions.read();
            prof.thread_name(names[t]); // its registration: every thread at once
            registration[t] = instructions.read() - before;
            for (unsigned round = 0; round < 2; ++round) {
                {
                    auto s = prof.scope(mix);
                    scattered_branches(150, 7 + t + 10 * round);
                }
                auto s = prof.scope(loop);
                known_loop(200 + t);
            }
        });
    }
    char all[8] = {};
    if (racing) {
        for (unsigned t = 0; t < threads; ++t)
            if (::read(turn[t + 1][0], all, 1) != 1) return 2;
    } else if (::write(turn[0][1], all, 1) != 1 || ::read(turn[threads][0], all, 1) != 1) {
        return 2;
    }
    if (::write(go[1], all, threads) != static_cast<ssize_t>(threads)) return 2;
    for (auto& w : workers) w.join();
    for (unsigned t = 0; t < threads; ++t) std::printf("registration %s: %llu\n", names[t], static_cast<unsigned long long>(registration[t]));
    for (auto& p : turn) ::close(p[0]), ::close(p[1]);
    ::close(go[0]), ::close(go[1]);
    return 0;
}

int run_branch_threads() {
    // Every wait is a read(2) on a pipe, never a spin: the guest runs the same instructions and branches whatever
    // the scheduling, and a thread's predictor enters its interval in the same state in every run. (A spin's
    // iterations follow the host's load, and trained the predictor by them.) The threads open their counters one
    // at a time (turn[t]), then start together (go).
    std::string lines[4];
    int turn[5][2], go[2];
    for (auto& p : turn)
        if (::pipe(p) != 0) return 2;
    if (::pipe(go) != 0) return 2;
    const auto work = [&lines, &turn, &go](unsigned t) {
        char c = 0;
        if (::read(turn[t][0], &c, 1) != 1) std::abort();
        pmc::Group g({"branch-instructions:u", "branch-misses:u", "instructions:u"});
        pmc::Counter misses("branch-misses:u");
        pmc::GroupReading a = g.make_reading(), b = g.make_reading();
        std::string line = "thread " + std::to_string(t) + ":";
        line.reserve(256);
        if (::write(turn[t + 1][1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) std::abort();
        const std::uint64_t m0 = misses.read();
        g.read(a);
        known_loop(1000 + 100 * t);
        random_branches(2000 + 500 * t, 7 + t);
#if defined(__x86_64__)
        pmc_test_indirect_loop(300 + 10 * t, indirect_table, t & 1);
#endif
        g.read(b);
        const std::uint64_t m1 = misses.read();
        for (std::size_t k = 0; k < b.values.size(); ++k) line += " " + std::to_string(b.values[k] - a.values[k]);
        line += " counter " + std::to_string(m1 - m0);
        lines[t] = line;
    };
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < 4; ++t) workers.emplace_back(work, t);
    char c = 0, all[4] = {};
    if (::write(turn[0][1], &c, 1) != 1 || ::read(turn[4][0], &c, 1) != 1 || ::write(go[1], all, 4) != 4) return 2;
    for (auto& w : workers) w.join();
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    for (auto& p : turn) ::close(p[0]), ::close(p[1]);
    ::close(go[0]), ::close(go[1]);
    return 0;
}

/// pmc emulate --cache against Cachegrind: an N x N matrix multiply (N <= 200), naive loop order (b walked by
/// columns: its reads miss the D1 once a column's lines no longer fit).
double mm_a[200][200], mm_b[200][200], mm_c[200][200];
int run_matmul(unsigned n) {
    if (n == 0 || n > 200) return 2;
    for (unsigned i = 0; i < n; ++i)
        for (unsigned j = 0; j < n; ++j) mm_a[i][j] = i + j, mm_b[i][j] = static_cast<double>(i) - j;
    for (unsigned i = 0; i < n; ++i)
        for (unsigned j = 0; j < n; ++j) {
            double s = 0;
            for (unsigned k = 0; k < n; ++k) s += mm_a[i][k] * mm_b[k][j];
            mm_c[i][j] = s;
        }
    // A loop whose one load walks memory contiguously: every execution an access of its own, never joined.
    double total = 0;
    for (unsigned i = 0; i < n; ++i)
        for (unsigned j = 0; j < n; ++j) total += mm_c[i][j];
    return total == 0.5 ? 3 : 0;
}

/// pmc emulate --cache against Cachegrind's counting of atomics: per round a lock add, an xchg with memory, a lock
/// xadd (each two reads in Cachegrind: VEX's load and compare-and-swap), a lock cmpxchg and a lock cmpxchg16b (one
/// read each): 8 reads, no write, all on one line.
alignas(64) volatile std::uint64_t atomics_word[2];
int run_atomics(std::uint64_t rounds) {
#if defined(__x86_64__)
    std::uint64_t r = 1;
    for (std::uint64_t i = 0; i < rounds; ++i) {
        std::uint64_t expected = i, lo = 0, hi = 0;
        __asm__ volatile("lock addq $1, %0\n\t"
                         "xchgq %1, %0\n\t"
                         "lock xaddq %1, %0\n\t"
                         "lock cmpxchgq %1, %0\n\t"
                         : "+m"(atomics_word[0]), "+r"(r), "+a"(expected)
                         :
                         : "cc", "memory");
        __asm__ volatile("lock cmpxchg16b %0" : "+m"(atomics_word), "+a"(lo), "+d"(hi) : "b"(lo), "c"(hi) : "cc", "memory");
    }
    return 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// run_atomics after a MAP_SHARED mapping: QEMU 7.2 then translates in parallel mode, whose atomics reach the plugin
/// as one store each (tools/emulate/model/access_decode.hpp); Cachegrind counts them as before.
int run_atomics_in_parallel_code(std::uint64_t rounds) {
    void* shared = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        std::perror("mmap MAP_SHARED");
        return 1;
    }
    const int status = run_atomics(rounds);
    ::munmap(shared, 4096);
    return status;
}

/// Runs of accesses that pmc emulate --cache passes on from one call (tools/emulate/model/access_runs.hpp): per
/// round a run of 4 pushes and 4 pops at a stack pointer moved by 0 to 56 bytes (a run straddles 16-byte lines),
/// then stores and loads through one base at pseudo-random offsets, 512 bytes apart (one set of a small D1: their
/// order decides what LRU keeps).
alignas(4096) unsigned char runs_buffer[3 * 4096];
int run_access_runs(std::uint64_t rounds) {
#if defined(__x86_64__)
    std::uint64_t x = 88172645463325252ULL;
    for (std::uint64_t i = 0; i < rounds; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned char* base = runs_buffer + 8 * (x % 128);
        const std::uint64_t drop = 128 + 8 * ((x >> 8) % 8); // (below the red zone)
        __asm__ volatile("sub %[drop], %%rsp\n\t"
                         "push %%rbx\n\tpush %%rbp\n\tpush %%r12\n\tpush %%r13\n\t"
                         "pop %%r13\n\tpop %%r12\n\tpop %%rbp\n\tpop %%rbx\n\t"
                         "add %[drop], %%rsp\n\t"
                         "mov %%rax, 0(%[base])\n\tmov %%rcx, 512(%[base])\n\tmov 1024(%[base]), %%rdx\n\t"
                         "movzbl 9(%[base]), %%esi\n\tmov %%edx, 1536(%[base])\n\t"
                         :
                         : [drop] "r"(drop), [base] "D"(base), "a"(i), "c"(x)
                         : "rdx", "rsi", "memory");
    }
    return 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// Per round, a fault in the middle of what would be a run, handled: the page the second access reaches is made
/// inaccessible, and the handler makes it accessible again and returns, so that the access runs again. `on_stack`:
/// three pushes on a stack of the program's own whose third reaches the page (a stack run); else three stores
/// through one base (not a run: access_runs.hpp's runs are the stack's).
unsigned char* fault_page = nullptr;
volatile std::uint64_t faults_handled = 0;
void reopen_fault_page(int, siginfo_t*, void*) {
    ::mprotect(fault_page, 4096, PROT_READ | PROT_WRITE);
    faults_handled = faults_handled + 1;
}
int run_access_runs_fault(std::uint64_t rounds, bool on_stack) {
#if defined(__x86_64__)
    auto* pages = static_cast<unsigned char*>(
        ::mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (pages == MAP_FAILED) return 1;
    static unsigned char handler_stack[64 * 1024];
    stack_t alternate{};
    alternate.ss_sp = handler_stack;
    alternate.ss_size = sizeof handler_stack;
    ::sigaltstack(&alternate, nullptr);
    struct sigaction action{};
    action.sa_sigaction = reopen_fault_page;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    ::sigaction(SIGSEGV, &action, nullptr);
    for (std::uint64_t i = 0; i < rounds; ++i) {
        if (on_stack) { // pushes at top - 8, top - 16, then top - 24: the page below `top`
            fault_page = pages + 4096;
            ::mprotect(fault_page, 4096, PROT_NONE);
            unsigned char* top = pages + 2 * 4096 + 16;
            __asm__ volatile("mov %%rsp, %%rdx\n\tmov %[top], %%rsp\n\t"
                             "push %%rax\n\tpush %%rcx\n\tpush %%rax\n\tpush %%rcx\n\t"
                             "mov %%rdx, %%rsp\n\t"
                             :
                             : [top] "r"(top), "a"(i), "c"(i)
                             : "rdx", "memory");
        } else { // stores at page - 8, page (the fault), page + 8
            fault_page = pages + 4096;
            ::mprotect(fault_page, 4096, PROT_NONE);
            __asm__ volatile("mov %%rax, -8(%[at])\n\tmov %%rcx, 0(%[at])\n\tmov %%rax, 8(%[at])\n\t"
                             :
                             : [at] "D"(fault_page), "a"(i), "c"(i)
                             : "memory");
        }
    }
    std::printf("access-runs-fault: %llu faults handled\n", static_cast<unsigned long long>(faults_handled));
    return faults_handled == rounds ? 0 : 1;
#else
    (void)rounds, (void)on_stack;
    return 77;
#endif
}

/// pmc emulate --cache against Cachegrind's counting of a bit test of a register by a register: per round a bt and
/// a bts (VEX: the register stored below the stack pointer and its bit tested there): 3 reads and 2 writes in
/// Cachegrind, none in the program.
int run_bit_tests(std::uint64_t rounds) {
#if defined(__x86_64__)
    std::uint64_t value = 5, bit = 3, carries = 0;
    for (std::uint64_t i = 0; i < rounds; ++i)
        __asm__ volatile("bt %1, %0\n\t"
                         "adc $0, %2\n\t"
                         "bts %1, %0"
                         : "+r"(value), "+r"(bit), "+r"(carries)
                         :
                         : "cc");
    return carries == 12345 ? 3 : 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// pmc emulate --cache against Cachegrind's misses on a register bit test's stack slot (%rsp - 288): per round a
/// bt, then loads of 8 lines 4 KiB apart that share the slot's D1 set (32768,8,64: 64 sets). The slot and the 8
/// lines are 9 lines of one 8-way set, used in turn: each round the slot's store and the 8 loads miss (the byte's
/// load follows the store, a hit). Where the slot is counted as hits (QEMU before 9), the 8 lines fit and never miss.
/// The slot takes a line's last 8 bytes: a slot 8 bytes off would lie in the next set.
/// Every loaded value is used: VEX drops a load whose value nothing reads, and Cachegrind then counts none.
alignas(4096) unsigned char slot_set_lines[8 * 4096];
int run_bit_test_slot(std::uint64_t rounds) {
#if defined(__x86_64__)
    std::uint64_t value = 5, bit = 3, carries = 0, sum = 0;
    for (std::uint64_t i = 0; i < rounds; ++i)
        __asm__ volatile("mov %%rsp, %%r11\n\t"      // the slot in a line's last 8 bytes: (rsp - 288) % 64 == 56
                         "and $-64, %%rsp\n\t"        // (no call in between; the slot lies below the red zone)
                         "sub $40, %%rsp\n\t"
                         "lea -288(%%rsp), %%rax\n\t" // the slot's set: address bits 6-11
                         "and $0xFC0, %%eax\n\t"
                         "add %[lines], %%rax\n\t"
                         "bt %[bit], %[value]\n\t"
                         "adc $0, %[carries]\n\t"
                         "add (%%rax), %[sum]\n\t"
                         "add 4096(%%rax), %[sum]\n\t"
                         "add 8192(%%rax), %[sum]\n\t"
                         "add 12288(%%rax), %[sum]\n\t"
                         "add 16384(%%rax), %[sum]\n\t"
                         "add 20480(%%rax), %[sum]\n\t"
                         "add 24576(%%rax), %[sum]\n\t"
                         "add 28672(%%rax), %[sum]\n\t"
                         "mov %%r11, %%rsp"
                         : [value] "+r"(value), [carries] "+r"(carries), [sum] "+r"(sum)
                         : [bit] "r"(bit), [lines] "r"(slot_set_lines)
                         : "rax", "r11", "cc", "memory");
    return carries + sum == 12345 ? 3 : 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// pmc emulate --cache against Cachegrind's counting of x87/SSE state images: per round fxsave and fxrstor of a
/// 512-byte image, fnstenv and fldenv of a 28-byte one, fnsave and frstor of a 108-byte one, fstpt and fldt of a
/// 10-byte one (VEX: 18 + 1 + 1 + 1 writes and as many reads), then 16 loads: 8 of lines 4 KiB apart in the set
/// of the fxsave image's second line, 8 in that of the fnsave image's second line. The x87 part is one access cut
/// to a line (64 bytes), so neither second line is touched and the 16 lines stay in the D1: no miss a round.
/// QEMU 7.2's pieces touch both second lines: those sets become 9 lines in turn, every access a miss.
alignas(4096) unsigned char state_image_pages[9 * 4096];
int run_state_images(std::uint64_t rounds) {
#if defined(__x86_64__)
    unsigned char* const page = state_image_pages;
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < rounds; ++i) {
        __asm__ volatile("fxsave64 (%[image])\n\t"
                         "fxrstor64 (%[image])\n\t"
                         "fnstenv 2048(%[image])\n\t"
                         "fldenv 2048(%[image])\n\t"
                         "fnsave 3072(%[image])\n\t"
                         "frstor 3072(%[image])\n\t"
                         "fldz\n\t"
                         "fstpt 2560(%[image])\n\t"
                         "fldt 2560(%[image])\n\t"
                         "fstp %%st(0)"
                         :
                         : [image] "r"(page)
                         : "memory");
        __asm__ volatile("add 1*4096+64(%[page]), %[sum]\n\t"
                         "add 2*4096+64(%[page]), %[sum]\n\t"
                         "add 3*4096+64(%[page]), %[sum]\n\t"
                         "add 4*4096+64(%[page]), %[sum]\n\t"
                         "add 5*4096+64(%[page]), %[sum]\n\t"
                         "add 6*4096+64(%[page]), %[sum]\n\t"
                         "add 7*4096+64(%[page]), %[sum]\n\t"
                         "add 8*4096+64(%[page]), %[sum]\n\t"
                         "add 1*4096+3136(%[page]), %[sum]\n\t"
                         "add 2*4096+3136(%[page]), %[sum]\n\t"
                         "add 3*4096+3136(%[page]), %[sum]\n\t"
                         "add 4*4096+3136(%[page]), %[sum]\n\t"
                         "add 5*4096+3136(%[page]), %[sum]\n\t"
                         "add 6*4096+3136(%[page]), %[sum]\n\t"
                         "add 7*4096+3136(%[page]), %[sum]\n\t"
                         "add 8*4096+3136(%[page]), %[sum]"
                         : [sum] "+r"(sum)
                         : [page] "r"(page)
                         : "cc", "memory");
    }
    return sum == 12345 ? 3 : 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// pmc emulate --cache against Cachegrind's counting of rep string instructions (docs/emulated-pmu.md): per round
/// rep stosq of 8 and of 64 quadwords, rep movsb of 3,000 bytes, rep movsq of 16 backwards (DF set), a repe cmpsb
/// that stops at its 6th byte, a repne scasb of 40 bytes that finds none and a rep stosb of 0: 3,088 writes and
/// 3,068 reads, each element an access, and 3,140 executions of rep string instructions in Cachegrind's Ir (a count
/// of N: N + 1; the cmpsb: 6). QEMU 10 runs each in one execution (a loop within its block).
alignas(64) unsigned char rep_string_area[16384];
int run_rep_strings(std::uint64_t rounds) {
#if defined(__x86_64__)
    unsigned char* const area = rep_string_area;
    for (int k = 0; k < 100; ++k) area[8192 + k] = area[8192 + 128 + k] = static_cast<unsigned char>(k);
    area[8192 + 5] = 0xFF; // repe cmpsb stops at its 6th byte
    for (int k = 0; k < 40; ++k) area[8192 + 256 + k] = 1; // repne scasb for 0x5a finds none
    for (std::uint64_t i = 0; i < rounds; ++i)
        __asm__ volatile("xor %%eax, %%eax\n\t"
                         "lea 12288(%[area]), %%rdi\n\t"
                         "mov $8, %%ecx\n\t"
                         "rep stosq\n\t"
                         "lea 12800(%[area]), %%rdi\n\t"
                         "mov $64, %%ecx\n\t"
                         "rep stosq\n\t"
                         "mov %[area], %%rsi\n\t"
                         "lea 4096(%[area]), %%rdi\n\t"
                         "mov $3000, %%ecx\n\t"
                         "rep movsb\n\t"
                         "lea 120(%[area]), %%rsi\n\t"
                         "lea 4096+120(%[area]), %%rdi\n\t"
                         "mov $16, %%ecx\n\t"
                         "std\n\t"
                         "rep movsq\n\t"
                         "cld\n\t"
                         "lea 8192(%[area]), %%rsi\n\t"
                         "lea 8192+128(%[area]), %%rdi\n\t"
                         "mov $100, %%ecx\n\t"
                         "repe cmpsb\n\t"
                         "lea 8192+256(%[area]), %%rdi\n\t"
                         "mov $0x5a, %%eax\n\t"
                         "mov $40, %%ecx\n\t"
                         "repne scasb\n\t"
                         "xor %%ecx, %%ecx\n\t"
                         "rep stosb"
                         :
                         : [area] "r"(area)
                         : "rax", "rcx", "rsi", "rdi", "cc", "memory");
    return 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// repe/repne string instructions whose condition ends them on the element that takes the count to 0: VEX makes
/// no execution after such an element (the count's 0 is never tested). Per round: a repe cmpsb of 6 whose 6th
/// bytes differ (6 executions), a repne scasb of 8 that finds its byte at the 8th (8), a repe cmpsq of 4 whose 4th
/// quadwords differ (4), a repne scasl of 5 that finds its doubleword at the 5th (5), and a repe cmpsb of 4 that
/// are all equal (5: one more that finds the count 0); with the loop's 17 others, 45 in Cachegrind's Ir, 22 in
/// instructions:u, 41 reads. pmc_rep_last_rounds(area, rounds): rounds >= 1; area: 512 bytes set up below.
extern "C" void pmc_rep_last_rounds(unsigned char* area, std::uint64_t rounds);
#if defined(__x86_64__)
asm(R"(
    .text
    .p2align 6
    .globl pmc_rep_last_rounds
    .hidden pmc_rep_last_rounds
    .type pmc_rep_last_rounds, @function
pmc_rep_last_rounds:
    mov %rdi, %rdx
    mov %rsi, %r8
1:  mov %rdx, %rsi
    lea 64(%rdx), %rdi
    mov $6, %ecx
    repe cmpsb
    lea 128(%rdx), %rdi
    mov $0x5a, %eax
    mov $8, %ecx
    repne scasb
    lea 192(%rdx), %rsi
    lea 256(%rdx), %rdi
    mov $4, %ecx
    repe cmpsq
    lea 320(%rdx), %rdi
    mov $0x5a5a5a5a, %eax
    mov $5, %ecx
    repne scasl
    lea 384(%rdx), %rsi
    lea 448(%rdx), %rdi
    mov $4, %ecx
    repe cmpsb
    dec %r8
    jnz 1b
    ret
    .size pmc_rep_last_rounds, .-pmc_rep_last_rounds
)");
#endif
alignas(64) unsigned char rep_last_area[512];
int run_rep_last_element(std::uint64_t rounds) {
#if defined(__x86_64__)
    unsigned char* const area = rep_last_area;
    for (int k = 0; k < 6; ++k) area[k] = area[64 + k] = static_cast<unsigned char>(k + 1);
    area[5] = 0xFF; // the cmpsb's 6th bytes differ
    for (int k = 0; k < 8; ++k) area[128 + k] = 1;
    area[128 + 7] = 0x5a; // the scasb finds 0x5a at its 8th byte
    for (int k = 0; k < 32; ++k) area[192 + k] = area[256 + k] = static_cast<unsigned char>(k + 1);
    area[192 + 24] = 0xFF; // the cmpsq's 4th quadwords differ
    for (int k = 0; k < 20; ++k) area[320 + k] = 1;
    std::memset(area + 320 + 16, 0x5a, 4); // the scasl finds 0x5a5a5a5a at its 5th doubleword
    for (int k = 0; k < 4; ++k) area[384 + k] = area[448 + k] = 7; // the last cmpsb's 4 bytes all equal
    if (rounds > 0) pmc_rep_last_rounds(area, rounds);
    return 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// Blocks cut at a page boundary: QEMU 7.2's x86 translator takes an instruction after a block's first that ends
/// past the block's first page out of the block (it starts the next one), while its plugin API still lists it in
/// the first. Five cases, each pinned by .org at the end of a page of a section of its own (page-aligned), one
/// round of each per pass of the loop: (a) a rep stosq of 8 ends a block, then cld and an lea crossing the page;
/// (b) a block entered by a jmp whose second instruction, an lea, crosses; (c) a rep stosq of 5 that crosses;
/// (d) a repe cmpsb of 100 that stops at its 6th byte and ends exactly at the page's end (kept in its block);
/// (e) a repne scasb of 40 that finds none and crosses. Per round: 83 instructions in Cachegrind's Ir (a rep
/// with count N is N + 1 executions, the cmpsb 6), 25 in instructions:u, 52 reads and 13 writes.
/// pmc_page_cut_rounds(area, rounds): rounds >= 1; area: 16 KiB (bytes 0x2000.. and 0x2080.. and 0x2100.. set up).
extern "C" void pmc_page_cut_rounds(unsigned char* area, std::uint64_t rounds);
/// Where the crossing (or, for d, last) instruction of each case lies: each at its page offset below.
extern "C" const unsigned char pmc_page_cut_a[], pmc_page_cut_b[], pmc_page_cut_c[], pmc_page_cut_d[],
    pmc_page_cut_e[];
#if defined(__x86_64__)
asm(R"(
    .section .text.pmc_page_cut, "ax", @progbits
    .balign 4096
    .globl pmc_page_cut_rounds, pmc_page_cut_a, pmc_page_cut_b, pmc_page_cut_c, pmc_page_cut_d, pmc_page_cut_e
    .hidden pmc_page_cut_rounds, pmc_page_cut_a, pmc_page_cut_b, pmc_page_cut_c, pmc_page_cut_d, pmc_page_cut_e
    .type pmc_page_cut_rounds, @function
pmc_page_cut_rounds:
    mov %rdi, %rdx
    mov %rsi, %r8
    jmp 1f
    .org 4096 - 20, 0xcc
1:  xor %eax, %eax
    lea 0x1000(%rdx), %rdi
    mov $8, %ecx
    rep stosq
    cld
pmc_page_cut_a:
    lea 0x2000(%rdx), %rsi
    jmp 2f
    .org 2 * 4096 - 10, 0xcc
2:  mov $4, %ecx
pmc_page_cut_b:
    lea 0x1800(%rdx), %rdi
    jmp 3f
    .org 3 * 4096 - 13, 0xcc
3:  mov $5, %ecx
    lea 0x1400(%rdx), %rdi
pmc_page_cut_c:
    rep stosq
    jmp 4f
    .org 4 * 4096 - 21, 0xcc
4:  mov $100, %ecx
    lea 0x2000(%rdx), %rsi
    lea 0x2080(%rdx), %rdi
pmc_page_cut_d:
    repe cmpsb
    jmp 5f
    .org 5 * 4096 - 18, 0xcc
5:  mov $0x5a, %eax
    mov $40, %ecx
    lea 0x2100(%rdx), %rdi
pmc_page_cut_e:
    repne scasb
    dec %r8
    jnz 1b
    ret
    .size pmc_page_cut_rounds, .-pmc_page_cut_rounds
    .text
)");
#endif
alignas(64) unsigned char page_cut_area[16384];
int run_page_cut(std::uint64_t rounds) {
#if defined(__x86_64__)
    // The layout the cases need, checked here: a build that moved it fails instead of passing by accident.
    const std::pair<const unsigned char*, unsigned> pinned[] = {
        {pmc_page_cut_a, 4094}, {pmc_page_cut_b, 4091}, {pmc_page_cut_c, 4095}, {pmc_page_cut_d, 4094},
        {pmc_page_cut_e, 4095}};
    for (const auto& [at, offset] : pinned)
        if (reinterpret_cast<std::uintptr_t>(at) % 4096 != offset) {
            std::printf("page-cut: an instruction at page offset %u, not %u\n",
                        static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(at) % 4096), offset);
            return 2;
        }
    unsigned char* const area = page_cut_area;
    for (int k = 0; k < 100; ++k) area[0x2000 + k] = area[0x2080 + k] = static_cast<unsigned char>(k);
    area[0x2000 + 5] = 0xFF; // the repe cmpsb stops at its 6th byte
    for (int k = 0; k < 40; ++k) area[0x2100 + k] = 1; // the repne scasb for 0x5a finds none
    if (rounds > 0) pmc_page_cut_rounds(area, rounds);
    return 0;
#else
    (void)rounds;
    return 77;
#endif
}

/// pmc emulate --cache against Cachegrind's counting of masked stores (AVX2, which pmc's default CPU has): per round a
/// vmaskmovps with the low 4 of 8 elements' mask set and a vpmaskmovq with all 4 set, 8 stores in both (an element
/// each), where the pieces joined would be 2.
alignas(64) unsigned char masked_store_area[64];
int run_masked_stores(std::uint64_t rounds) {
#if defined(__x86_64__)
    for (std::uint64_t i = 0; i < rounds; ++i)
        __asm__ volatile("vpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t"
                         "vpxor %%xmm2, %%xmm2, %%xmm2\n\t"
                         "vpblendd $0xF0, %%ymm2, %%ymm1, %%ymm2\n\t" // the low 4 elements' mask
                         "vmaskmovps %%ymm0, %%ymm2, (%[area])\n\t"
                         "vpmaskmovq %%ymm0, %%ymm1, 32(%[area])"
                         :
                         : [area] "r"(masked_store_area)
                         : "xmm0", "xmm1", "xmm2", "memory");
    return 0;
#else
    (void)rounds;
    return 77;
#endif
}

} // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    try {
        if (mode == "exact") return run_exact();
        if (mode == "counts") return run_counts();
        if (mode == "probe") return run_probe();
        if (mode == "quirks") return run_quirks();
#if defined(__x86_64__)
        if (mode == "rep") return run_rep();
        if (mode == "jit-rep") return run_jit_rep();
        if (mode == "page-cross") return run_page_cross();
        if (mode == "signal-frames") return run_signal_frames();
        if (mode == "signal-race") return run_signal_race();
        if (mode == "raw-handler") return run_raw_handler();
        if (mode == "signal-cost") return run_signal_cost();
#endif
        if (mode == "churn") return run_churn();
        if (mode == "refused" && argc > 2) return run_refused(argv[2]);
        if (mode == "stack") return run_stack();
        if (mode == "environment") return run_environment();
        if (mode == "addresses") return run_addresses();
        if (mode == "bad-pointer") return run_bad_pointer();
        if (mode == "segfault") return run_segfault();
        if (mode == "loop" && argc > 2) {
            known_loop(std::strtoull(argv[2], nullptr, 10));
            return 0;
        }
        // fds HOW LOOPS: a known loop in a program that leaves the emulator's plugin no descriptor of its own:
        // "exhaust" opens /dev/null until EMFILE (under a soft limit of 64, to stay cheap), "limit" sets
        // RLIMIT_NOFILE to 3, "close-all" closes every descriptor from 3 to 1023 first (a daemon, closefrom), and
        // "reuse-exhaust" closes them, puts /dev/null at every number from 64 to 1023, then exhausts.
        if (mode == "fds" && argc > 3) {
            const std::string how = argv[2];
            if (how == "close-all" || how == "reuse-exhaust")
                for (int fd = 3; fd < 1024; ++fd) ::close(fd);
            if (how == "reuse-exhaust") {
                const int null = ::open("/dev/null", O_WRONLY);
                for (int fd = 64; fd < 1024; ++fd) ::dup2(null, fd);
                ::close(null);
            }
            known_loop(std::strtoull(argv[3], nullptr, 10));
            if (how == "limit") {
                const rlimit three{3, 3};
                if (::setrlimit(RLIMIT_NOFILE, &three) != 0) return 2;
            } else if (how == "exhaust" || how == "reuse-exhaust") {
                rlimit limit{};
                ::getrlimit(RLIMIT_NOFILE, &limit);
                limit.rlim_cur = 64;
                if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 2;
                while (::open("/dev/null", O_RDONLY) >= 0) {}
                if (errno != EMFILE) return 3;
            }
            return 0;
        }
        if (mode == "spawn" && argc > 2) { // posix_spawn, which glibc does with clone(CLONE_VM | CLONE_VFORK)
            pid_t child = 0;
            if (::posix_spawn(&child, argv[2], nullptr, nullptr, argv + 2, environ) != 0) return 127;
            int status = 0;
            ::waitpid(child, &status, 0);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        }
        if (mode == "system" && argc > 2) {
            std::fflush(nullptr);
            const int status = std::system(argv[2]);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        }
        if (mode == "reexec") {
            const bool again = std::getenv("PMC_TEST_REEXECUTED") != nullptr;
            ::setenv("PMC_TEST_REEXECUTED", "1", 1);
            if (auto failure = pmc::reexec_without_aslr(argv)) {
                std::printf("reexec failed: %s\n", failure->message.c_str());
                return 1;
            }
            std::printf("re-executed: %s; address randomization: %s\n", again ? "yes" : "no",
                        pmc::aslr_state().randomized ? "on" : "off");
            return run_probe();
        }
        if (mode == "until-signal" && argc > 2) return run_until_signal(argv[2]);
        // pause LOOPS READY: a known loop, READY made, then waits in pause(); pause-thread: the loop runs on a
        // thread, which has exited (joined) by then.
        if ((mode == "pause" || mode == "pause-thread") && argc > 3) {
            const std::uint64_t loops = std::strtoull(argv[2], nullptr, 10);
            if (mode == "pause") known_loop(loops);
            else std::thread([loops] { known_loop(loops); }).join();
            if (FILE* f = std::fopen(argv[3], "w")) std::fclose(f);
            for (;;) ::pause(); // (the last system call before a deadly signal)
        }
        if (mode == "chase" && argc > 3) // chase LINES ROUNDS [THREADS]
            return run_chase(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10),
                             argc > 4 ? static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)) : 1);
        if (mode == "matmul" && argc > 2) return run_matmul(static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10)));
        if (mode == "cache-read") return run_cache_read();
        if (mode == "inclusion" && argc > 2) return run_inclusion(std::strtoull(argv[2], nullptr, 10));
        if (mode == "access-runs" && argc > 2) return run_access_runs(std::strtoull(argv[2], nullptr, 10));
        if (mode == "access-runs-fault" && argc > 3) // access-runs-fault ROUNDS stack|base
            return run_access_runs_fault(std::strtoull(argv[2], nullptr, 10), std::string(argv[3]) == "stack");
        if (mode == "atomics" && argc > 2) return run_atomics(std::strtoull(argv[2], nullptr, 10));
        if (mode == "atomics-shared" && argc > 2)
            return run_atomics_in_parallel_code(std::strtoull(argv[2], nullptr, 10));
        if (mode == "bit-tests" && argc > 2) return run_bit_tests(std::strtoull(argv[2], nullptr, 10));
        if (mode == "masked-stores" && argc > 2) return run_masked_stores(std::strtoull(argv[2], nullptr, 10));
        if (mode == "state-images" && argc > 2) return run_state_images(std::strtoull(argv[2], nullptr, 10));
        if (mode == "rep-strings" && argc > 2) return run_rep_strings(std::strtoull(argv[2], nullptr, 10));
        if (mode == "page-cut" && argc > 2) return run_page_cut(std::strtoull(argv[2], nullptr, 10));
        if (mode == "rep-last-element" && argc > 2) return run_rep_last_element(std::strtoull(argv[2], nullptr, 10));
        if (mode == "bit-test-slot" && argc > 2) return run_bit_test_slot(std::strtoull(argv[2], nullptr, 10));
        if (mode == "cache-threads") return run_cache_threads();
        if (mode == "load-samples" && argc > 4) // load-samples BYTES LOADS PERIOD [WARM] [THREADS] [LDLAT]
            return run_load_samples(std::strtoul(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10),
                                    std::strtoull(argv[4], nullptr, 10),
                                    argc > 5 ? static_cast<unsigned>(std::strtoul(argv[5], nullptr, 10)) : 0,
                                    argc > 6 ? static_cast<unsigned>(std::strtoul(argv[6], nullptr, 10)) : 1,
                                    argc > 7 ? argv[7] : "3");
        if (mode == "branch-read") return run_branch_read();
        if (mode == "branch-threads") return run_branch_threads();
        if (mode == "profile-threads")
            return run_profile_threads(argc > 2 ? static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10)) : 6,
                                       argc > 3 && std::strcmp(argv[3], "racing") == 0);
        if (mode == "branches" && argc > 2) {
            const std::uint64_t n = std::strtoull(argv[2], nullptr, 10);
            const std::uint64_t taken = random_branches(n, 99);
#if defined(__x86_64__)
            pmc_test_indirect_loop(n, indirect_table, 1);
#endif
            return taken == 1 ? 3 : 0;
        }
        if (mode == "hooks") return run_hooks();
        if (mode == "alloc-race") return run_alloc_race();
        if (mode == "page-writes" && argc > 2)
            return run_page_writes(std::strtoull(argv[2], nullptr, 10), argc > 3 ? std::atoi(argv[3]) : 16);
        if (mode == "profile") {
            const std::uint64_t plant = argc > 3 && std::string(argv[2]) == "--plant" ? std::strtoull(argv[3], nullptr, 10) : 0;
            return run_profile(plant);
        }
    } catch (const std::exception& e) {
        std::printf("error: %s\n", e.what());
        return 2;
    }
    std::fprintf(stderr, "usage: pmc-emulate-target exact | counts | loop N | probe | system CMD | reexec | "
                         "load-samples BYTES LOADS PERIOD [WARM] [THREADS] [LDLAT] | "
                         "profile [--plant N] | page-writes ROUNDS [CHILDREN] | hooks | chase LINES ROUNDS [THREADS] | matmul N | "
                         "inclusion ROUNDS | "
                         "cache-read | cache-threads | branch-read | branch-threads | profile-threads [THREADS] [racing] | branches N | "
                         "until-signal FILE | "
                         "jit-rep | churn | bad-pointer | stack | signal-frames | signal-race | raw-handler | signal-cost | "
                         "pause[-thread] LOOPS READY | refused WHAT\n");
    return 2;
}
