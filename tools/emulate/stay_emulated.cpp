// SPDX-License-Identifier: MIT
// libpmc-emulate-preload.so: keeps the programs that an emulated program executes under the emulator.
//
// QEMU's user mode runs a program's execve() of a same-architecture program natively, so the children of a program
// under `pmc emulate` (a compiler driver's cc1, a shell's commands, pmc::reexec_without_aslr's re-exec) would leave
// the emulator and lose its PMU. pmc emulate puts this library in the emulated program's LD_PRELOAD; every
// dynamically linked program started from there loads it too. Its constructor runs before the program's own code:
// under the emulator it does nothing but the handshake; natively it re-executes the program under QEMU with pmc's
// plugin, as pmc emulate started the first one. Statically linked programs load no preload library and stay
// native (docs/emulated-pmu.md).
//
// The environment it reads, set by pmc emulate: PMC_EMULATE_QEMU (the qemu-* binary), PMC_EMULATE_PLUGIN (the
// plugin with its arguments, as QEMU's -plugin takes it), PMC_EMULATE_PRELOAD (this library), PMC_EMULATE_CPU (QEMU's
// -cpu, when pmc emulate gave one: each program sees the first one's CPU). Without the first three it does nothing.
//
// It is loaded into every program the emulated one starts, so it stays small: C library calls only (no libstdc++,
// whose loading cost an emulated /bin/true 1.7 million instructions), and nothing but the handshake under the
// emulator.
#include <pmc/detail/emulated.hpp>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace {

namespace proto = pmc::detail::emulated;

/// Removes NAME=... from the environment array itself. unsetenv() is not enough: bash exports its own unsetenv, which
/// leaves `environ` alone until bash has read it, so a marker "removed" that way reaches the next program bash
/// executes under the same pid (`bash -c CMD`, `exec`, a #!/usr/bin/env bash shim), which would then give up.
void drop_from_environment(char** env, const char* name) {
    const size_t len = strlen(name);
    if (!env) return;
    char** out = env;
    for (char** in = env; *in; ++in)
        if (!(strncmp(*in, name, len) == 0 && (*in)[len] == '=')) *out++ = *in;
    *out = nullptr;
}

bool under_emulator() {
    // Asked once per process image: the constructor and the signal functions below share the answer.
    static int known = 0; // 0: not asked yet, 1: emulated, 2: native
    int state = __atomic_load_n(&known, __ATOMIC_ACQUIRE);
    if (state == 0) {
        proto::Hello hello{};
        proto::request(proto::Op::hello, &hello);
        state = hello.reply == proto::hello_reply ? 1 : 2;
        __atomic_store_n(&known, state, __ATOMIC_RELEASE);
    }
    return state == 1;
}

// ---- signal handlers on a realigned stack (QEMU's x86-64 user mode before 9.1) ----
//
// The x86-64 ABI wants the stack 16-byte aligned at every call; QEMU before 9.1 ("linux-user/i386: Properly align
// signal frame", merged in May 2024) enters a signal handler with it 8 bytes off. A handler that keeps an SSE value
// on its stack with an aligned move (libuv's SIGCHLD handler in ctest) then dies of SIGSEGV. Where pmc
// emulate says its QEMU does this (PMC_EMULATE_REALIGN_SIGNALS=1), every handler installed through the C library's
// sigaction, signal, bsd_signal, ssignal, sysv_signal or sigset is entered through realigned_handler, which
// realigns the stack and calls the program's handler. The kernel's action keeps the program's flags and mask
// (SA_RESETHAND, SA_NODEFER, SA_RESTART, SA_ONSTACK act as asked); SIG_DFL and SIG_IGN pass untouched; what these
// functions report as the old handler is the program's own, never the trampoline. Not seen: a handler installed
// by a raw rt_sigaction system call, and statically linked programs (pmc emulate explains their SIGSEGV).

constexpr const char* realign_variable = "PMC_EMULATE_REALIGN_SIGNALS"; // (tools/emulate.cpp sets it)
using Handler = void (*)(int, siginfo_t*, void*);
using PlainHandler = void (*)(int);
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
/// The program's handler for each signal whose kernel action is realigned_handler (a function address: loaded and
/// stored atomically, as handlers are installed from any thread and from inside handlers).
uintptr_t program_handlers[_NSIG];

bool realigning() {
    static int known = 0; // 0: not decided yet, 1: realign, 2: leave the handlers alone
    int state = __atomic_load_n(&known, __ATOMIC_ACQUIRE);
    if (state == 0) {
        const char* wanted = getenv(realign_variable);
        state = wanted && strcmp(wanted, "1") == 0 && under_emulator() ? 1 : 2;
        __atomic_store_n(&known, state, __ATOMIC_RELEASE);
    }
    return state == 1;
}

/// pmc sample --emulate: after the program's handler of a fault returned, with the signal's action left at its
/// default (the handler reset it, as a crash reporter does, or SA_RESETHAND did), the fault recurs and ends the
/// process, and QEMU before 8.0 calls no exit callback: the plugin is asked to write its pending samples now, or a
/// batch (up to 4,095 samples a thread) would be lost. Async-signal-safe: two system calls.
char maps_dir[PATH_MAX]; // (the plugin's samples=DIR: set under pmc sample --emulate only)
SigactionFn real_sigaction_for_faults; // (resolved in the constructor: dlsym is not async-signal-safe)
void before_recurring_fault(int sig) {
    if (!maps_dir[0] || !real_sigaction_for_faults ||
        !(sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS))
        return;
    struct sigaction now {};
    if (real_sigaction_for_faults(sig, nullptr, &now) != 0 || (now.sa_flags & SA_SIGINFO) || now.sa_handler != SIG_DFL)
        return;
    uint64_t unused = 0;
    proto::request(proto::Op::write_samples, &unused);
}

#if defined(__x86_64__)
__attribute__((force_align_arg_pointer))
#endif
__attribute__((noinline)) void realigned_handler(int sig, siginfo_t* info, void* context) {
    // Every handler gets all three: the x86-64 kernel (and QEMU) pass them to SA_SIGINFO and plain handlers alike.
    const uintptr_t handler = __atomic_load_n(&program_handlers[sig], __ATOMIC_ACQUIRE);
    if (handler > 1) reinterpret_cast<Handler>(handler)(sig, info, context);
    before_recurring_fault(sig);
    __asm__ volatile("" ::: "memory"); // a call, not a jump: the handler must run on the realigned stack
}
const uintptr_t trampoline = reinterpret_cast<uintptr_t>(&realigned_handler);

/// Whether `handler` is a function of the program's (not SIG_DFL, SIG_IGN, SIG_HOLD or SIG_ERR).
bool is_function(uintptr_t handler) {
    return handler > reinterpret_cast<uintptr_t>(SIG_IGN) && handler != reinterpret_cast<uintptr_t>(SIG_HOLD) &&
           handler != reinterpret_cast<uintptr_t>(SIG_ERR);
}

/// The C library's own `name` (the next definition after this library's).
template <typename F> F real(F& cached, const char* name) {
    F f = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
    if (!f) {
        f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
        __atomic_store_n(&cached, f, __ATOMIC_RELEASE);
    }
    return f;
}
using SignalFn = PlainHandler (*)(int, PlainHandler);
SigactionFn real_sigaction, real___sigaction;
SignalFn real_signal, real_bsd_signal, real_ssignal, real_sysv_signal, real___sysv_signal, real_sigset;

int realigned_sigaction(SigactionFn libc, int sig, const struct sigaction* act, struct sigaction* old) {
    if (!libc) {
        errno = ENOSYS;
        return -1;
    }
    if (sig <= 0 || sig >= _NSIG || !realigning()) return libc(sig, act, old);
    uintptr_t previous = __atomic_load_n(&program_handlers[sig], __ATOMIC_ACQUIRE);
    struct sigaction through;
    const struct sigaction* passed = act;
    const uintptr_t wanted = act ? reinterpret_cast<uintptr_t>(act->sa_sigaction) : 0;
    if (act && is_function(wanted)) {
        through = *act;
        through.sa_sigaction = realigned_handler; // (the same storage as sa_handler)
        previous = __atomic_exchange_n(&program_handlers[sig], wanted, __ATOMIC_ACQ_REL);
        passed = &through;
    }
    const int result = libc(sig, passed, old);
    if (result != 0) {
        if (passed == &through) __atomic_store_n(&program_handlers[sig], previous, __ATOMIC_RELEASE);
        return result;
    }
    if (old && reinterpret_cast<uintptr_t>(old->sa_sigaction) == trampoline)
        old->sa_sigaction = reinterpret_cast<Handler>(previous);
    return result;
}

PlainHandler realigned_signal(SignalFn libc, int sig, PlainHandler handler) {
    if (!libc) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    if (sig <= 0 || sig >= _NSIG || !realigning()) return libc(sig, handler);
    const uintptr_t wanted = reinterpret_cast<uintptr_t>(handler);
    uintptr_t previous = __atomic_load_n(&program_handlers[sig], __ATOMIC_ACQUIRE);
    PlainHandler passed = handler;
    if (is_function(wanted)) {
        previous = __atomic_exchange_n(&program_handlers[sig], wanted, __ATOMIC_ACQ_REL);
        passed = reinterpret_cast<PlainHandler>(trampoline);
    }
    const PlainHandler result = libc(sig, passed); // the C library's own flags: SA_RESTART per siginterrupt, ...
    if (result == SIG_ERR) {
        if (passed != handler) __atomic_store_n(&program_handlers[sig], previous, __ATOMIC_RELEASE);
        return result;
    }
    return reinterpret_cast<uintptr_t>(result) == trampoline ? reinterpret_cast<PlainHandler>(previous) : result;
}

/// Under the emulator, with pmc's report file: a SIGILL (an instruction QEMU's TCG lacks, such as AVX-512) is noted
/// in the report, so that pmc explains it for a child as it does for the command itself; so is a SIGSEGV where QEMU
/// misaligns signal frames (before 9.1: a handler that spills an SSE value faults). Then the signal ends the process
/// as it would have. Realigned stack: QEMU 7.2 starts handlers 8 bytes off the ABI's alignment.
char noted_program[PATH_MAX];
char noted_report[PATH_MAX];

/// The value of the plugin's argument `key` (",KEY=VALUE" up to the next comma) into `out`; false if it has none, or
/// an empty one, or one that does not fit. Everything this library does under the emulator counts in the program's
/// total, and the values hold a directory that pmc names at random for each run (mkdtemp): the search steps from
/// comma to comma and compares only the keys, so its cost follows where the commas are and never what the values
/// hold. (glibc's strstr, used here before, skips through the text by a table of the character pairs it meets: the
/// random name alone added 4 to 38 instructions to a `pmc count --emulate` in 5 runs of 200 on QEMU 7.2, 12 on 10.)
bool plugin_argument(const char* plugin, const char* key, char* out, size_t size) {
    const size_t key_length = strlen(key);
    for (const char* comma = strchr(plugin, ','); comma; comma = strchr(comma + 1, ',')) {
        if (strncmp(comma + 1, key, key_length) != 0 || comma[1 + key_length] != '=') continue;
        const char* value = comma + 2 + key_length;
        const size_t length = static_cast<size_t>(strchrnul(value, ',') - value);
        if (length == 0 || length >= size) return false;
        memcpy(out, value, length);
        out[length] = '\0';
        return true;
    }
    return false;
}
/// `value` in decimal into `out` (room for 20 characters), its length returned, by the same instructions whatever the
/// value: a pid's or a clock's number of digits must not move the program's total (printf takes a pass per digit).
size_t put_decimal(char* out, uint64_t value) {
    char digits[20];
    for (int i = 19; i >= 0; --i) {
        digits[i] = static_cast<char>('0' + value % 10);
        value /= 10;
    }
    size_t length = 0;
    unsigned begun = 0; // past the leading zeros (the last digit is always written)
    for (int i = 0; i < 20; ++i) {
        begun |= static_cast<unsigned>(digits[i] != '0') | static_cast<unsigned>(i == 19);
        out[length] = digits[i]; // (overwritten until begun)
        length += begun;
    }
    return length;
}

/// pmc sample --emulate (the plugin's samples=DIR): the guest's memory map, which QEMU emulates in the guest's
/// /proc/self/maps, appended to DIR/PID.maps as "pmc-maps TIME reading BREAK" and the file's lines, at the image's
/// start (here, before the program's code) and at its exit(): what pmc names the sampled addresses with.
/// Its buffer is on the stack, and the maps go out in pieces of whole lines: never malloc (a malloc before main
/// would move the program's heap, its first sbrk(0) by 68 KiB under glibc) and never mmap (QEMU 7.2 places each
/// mapping above the last one it placed, unmapped or not: a 64 KiB buffer mapped and unmapped here moved every later
/// mapping of the program 64 KiB up). Either way pmc sample would sample another run than pmc emulate and pmc count
/// count. The plugin appends its lines of the program's mapping calls to the same file, whole lines in one write
/// each, so they may fall between two pieces: pmc reads every line that is no "pmc-maps" line as the latest
/// reading's (tools/sample.cpp).
constexpr size_t maps_piece = 4096; // (a line of QEMU's maps: about 100 bytes, at most a path's 4,096 and 80 more)

/// Writes the whole lines of text[0, used) to `out` and moves what follows the last line to the front; the count
/// left. A piece without a line end (a path near 4 KiB long) goes out whole.
size_t write_lines(int out, char* text, size_t used, bool last) {
    const char* end = last ? text + used : static_cast<const char*>(memrchr(text, '\n', used));
    const size_t whole = end ? static_cast<size_t>(end - text) + (last ? 0 : 1) : used;
    for (size_t done = 0; done < whole;) {
        const ssize_t n = write(out, text + done, whole - done);
        if (n <= 0) return 0; // (a failed write loses the rest: nothing to do about it here)
        done += static_cast<size_t>(n);
    }
    memmove(text, text + whole, used - whole);
    return used - whole;
}

// The exit's reading needs descriptors (the maps, which QEMU serves from a file of its own, and DIR/PID.maps), and a
// program that used up its descriptors (open until EMFILE, or RLIMIT_NOFILE lowered) has none left then: its exit's
// reading was lost, silently. So the start's reading keeps two copies of its file's descriptor up near the limit
// (out of the program's lowest-free numbering, as the plugin keeps its report's: tools/emulate/append_file.hpp): at
// exit, when no number is free, both are closed for the maps (the file is opened again after them), and if the maps
// still cannot be read, the file says so ("pmc-maps TIME unread ERRNO"), and pmc sample in its report. Each is used
// only if fstat shows it still is the file (the program may have closed it and opened something else at that
// number), and only by the process that made it to write (a fork child's copies are of its parent's file).
struct Reserve {
    int fd = -1;
    /// Whether `fd` still is the file (a fork child's copy too: closing it frees a number in the child).
    bool ours(dev_t device, ino_t inode) const {
        struct stat st {};
        return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == device && st.st_ino == inode;
    }
};
Reserve reserve_writer, reserve_spare;
pid_t reserve_pid = 0;
dev_t reserve_device = 0;
ino_t reserve_inode = 0;

void keep_reserves(int out) {
    rlimit limit{};
    const bool limited = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
    long top = limited ? static_cast<long>(limit.rlim_cur) : 1024;
    if (top > 1024) top = 1024; // (a table of a million slots would cost 8 MB)
    struct stat st {};
    if (top <= 64 || fstat(out, &st) != 0) return;
    reserve_pid = getpid(), reserve_device = st.st_dev, reserve_inode = st.st_ino;
    reserve_writer.fd = fcntl(out, F_DUPFD_CLOEXEC, static_cast<int>(top - 24));
    reserve_spare.fd = fcntl(out, F_DUPFD_CLOEXEC, static_cast<int>(top - 24));
}

/// Closes the reserve if it is ours: true if that freed a number.
bool release(Reserve& r) {
    const bool freed = r.ours(reserve_device, reserve_inode);
    if (freed) close(r.fd);
    r.fd = -1;
    return freed;
}

bool out_of_descriptors(int error) { return error == EMFILE || error == ENFILE; }

void read_maps_for_samples(bool at_exit) {
    if (!maps_dir[0]) return;
    char path[PATH_MAX + 32]; // DIR/PID.maps
    const size_t dir_length = strlen(maps_dir);
    memcpy(path, maps_dir, dir_length);
    path[dir_length] = '/';
    const size_t pid_end = dir_length + 1 + put_decimal(path + dir_length + 1, static_cast<uint64_t>(getpid()));
    memcpy(path + pid_end, ".maps", sizeof ".maps");
    int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    int unread = in < 0 ? errno : 0;
    // (the writer writes for the process that made it alone: a fork child's copy is its parent's file)
    int writer = reserve_pid == getpid() && reserve_writer.ours(reserve_device, reserve_inode) ? reserve_writer.fd : -1;
    // Both freed at once: QEMU 10 serves the maps from a memfd and reads its own /proc/self/maps to fill it, two
    // numbers at once (with one, the open works but the lines lose their paths: "00:00 0", no file named). The file
    // is opened again below, in the number QEMU's own reading leaves.
    const auto free_both = [] {
        const bool spare = release(reserve_spare);
        return release(reserve_writer) || spare;
    };
    if (at_exit && in < 0 && out_of_descriptors(unread) && free_both()) {
        writer = -1;
        in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
        unread = in < 0 ? errno : 0;
    }
    int out = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    const bool own = out >= 0;
    if (!own && at_exit) out = writer;
    if (out < 0) {
        if (in >= 0) close(in);
        return;
    }
    if (!at_exit && own) keep_reserves(out);
    char text[maps_piece + 64];
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    // "pmc-maps TIME reading BREAK\n", or "pmc-maps TIME unread ERRNO\n"
    memcpy(text, "pmc-maps ", 9);
    const uint64_t ns = static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
    size_t used = 9 + put_decimal(text + 9, ns);
    if (in < 0) {
        memcpy(text + used, " unread ", 8);
        used += 8;
        used += put_decimal(text + used, static_cast<uint64_t>(unread));
        text[used++] = '\n';
        write_lines(out, text, used, true);
        if (own) close(out);
        return;
    }
    memcpy(text + used, " reading ", 9);
    used += 9;
    // The program break: QEMU's emulated maps (7.2 and 10) leave the brk heap unnamed, and pmc names the line that
    // holds the break's last byte [heap], as a native run's kernel does.
    used += put_decimal(text + used, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(sbrk(0))));
    text[used++] = '\n';
    // The header in a write of its own: the pieces below then fall where the maps' text alone puts them, so the
    // instructions that split them (memrchr, memmove) never depend on the pid's, the clock's or the break's digits.
    used = write_lines(out, text, used, true);
    for (;;) {
        const ssize_t n = read(in, text + used, sizeof text - used);
        if (n > 0) used += static_cast<size_t>(n);
        if (n <= 0 || used == sizeof text) used = write_lines(out, text, used, n == 0); // (an error: whole lines only)
        if (n <= 0) break;
    }
    close(in);
    if (own) close(out);
}
void read_maps_at_exit() { read_maps_for_samples(true); }

void on_fatal_signal(int sig);
/// Whether any signal's action is a handler of the program's (through the wrappers, or a raw rt_sigaction they do not
/// see): only a handler runs on QEMU's misaligned frame. Async-signal-safe.
bool has_handler() {
    for (int s = 1; s < _NSIG; ++s) {
        struct sigaction now {};
        if (s == SIGKILL || s == SIGSTOP || real_sigaction(s, nullptr, &now) != 0) continue;
        const auto h = reinterpret_cast<uintptr_t>(now.sa_sigaction);
        if (is_function(h) && h != reinterpret_cast<uintptr_t>(&on_fatal_signal)) return true;
    }
    return false;
}
#if defined(__x86_64__)
__attribute__((force_align_arg_pointer))
#endif
void on_fatal_signal(int sig) {
    // "pid N sigill<TAB>PATH" (or sigsegv), with this process's pid (a fork child's too): async-signal-safe calls.
    char line[PATH_MAX + 64] = "pid ";
    size_t n = 4;
    char digits[24];
    size_t d = 0;
    for (long pid = static_cast<long>(getpid()); pid > 0 && d < sizeof digits; pid /= 10) digits[d++] = static_cast<char>('0' + pid % 10);
    while (d > 0) line[n++] = digits[--d];
    // (a SIGSEGV in a process with no signal handler of its own is its own fault, not the frame's: "sigsegv-plain")
    const char* tag = sig == SIGILL ? " sigill\t" : has_handler() ? " sigsegv\t" : " sigsegv-plain\t";
    memcpy(line + n, tag, strlen(tag));
    n += strlen(tag);
    const size_t len = strlen(noted_program);
    memcpy(line + n, noted_program, len);
    n += len;
    line[n++] = '\n';
    const int fd = open(noted_report, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, line, n) < 0) {} // nothing more to do about it here
        close(fd);
    }
    // A fault runs its instruction again on return and ends the process; a signal sent with kill() is raised again
    // (blocked until this handler returns), so it ends the process too.
    real(real_signal, "signal")(sig, SIG_DFL);
    raise(sig);
}

/// Notes `sig` in the report when the program has not set its own action (it may replace this one later).
void note_fatal_signal(int sig) {
    struct sigaction old {};
    if (real_sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    real_sigaction(sig, &sa, nullptr);
}

void note_fatal_signals(const char* plugin, const char* exe) {
    if (!plugin_argument(plugin, "report", noted_report, sizeof noted_report) || strlen(exe) >= sizeof noted_program ||
        !real(real_sigaction, "sigaction") || !real(real_signal, "signal"))
        return;
    memcpy(noted_program, exe, strlen(exe) + 1);
    note_fatal_signal(SIGILL);
    if (realigning()) note_fatal_signal(SIGSEGV);
}

/// Whether `list` (LD_PRELOAD: colon- or space-separated) names `entry`; `out` receives the list without it.
void without(const char* list, const char* entry, char* out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    const size_t entry_len = strlen(entry);
    for (const char* p = list; *p;) {
        const size_t len = strcspn(p, ": ");
        if (len > 0 && !(len == entry_len && strncmp(p, entry, len) == 0) && used + len + 2 < size) {
            if (used) out[used++] = ':';
            memcpy(out + used, p, len);
            used += len;
            out[used] = '\0';
        }
        p += len;
        if (*p) ++p;
    }
}

__attribute__((constructor)) void stay_emulated(int argc, char** argv, char** envp) {
    const char* qemu = getenv("PMC_EMULATE_QEMU");
    const char* plugin = getenv("PMC_EMULATE_PLUGIN");
    const char* preload = getenv("PMC_EMULATE_PRELOAD");
    if (!qemu || !plugin || !preload || argc < 1 || !argv) return;
    if (under_emulator()) { // the re-exec, if any, worked
        if (realigning()) { // resolved here, outside any signal handler (dlsym is not async-signal-safe)
            real(real_sigaction, "sigaction"), real(real___sigaction, "__sigaction"), real(real_signal, "signal");
            real(real_bsd_signal, "bsd_signal"), real(real_ssignal, "ssignal"), real(real_sysv_signal, "sysv_signal");
            real(real___sysv_signal, "__sysv_signal"), real(real_sigset, "sigset");
        }
        drop_from_environment(environ, "PMC_EMULATE_REEXEC");
        if (envp != environ) drop_from_environment(envp, "PMC_EMULATE_REEXEC");
        // The thread is QEMU's, named after qemu-x86_64: give it the program's name, as an exec would (what ps and
        // the profiler's thread names show). QEMU's /proc/self/exe is the program.
        static char path[PATH_MAX];
        const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n > 0) {
            path[n] = '\0';
            const char* base = strrchr(path, '/');
            prctl(PR_SET_NAME, base ? base + 1 : path, 0, 0, 0); // (the kernel keeps 15 characters)
            note_fatal_signals(plugin, path);
        }
        if (plugin_argument(plugin, "samples", maps_dir, sizeof maps_dir)) { // pmc sample --emulate
            if (realigning()) real_sigaction_for_faults = real(real_sigaction, "sigaction");
            read_maps_for_samples(false);
            atexit(read_maps_at_exit);
        }
        return;
    }
    static char exe[PATH_MAX], qemu_real[PATH_MAX];
    if (!realpath("/proc/self/exe", exe)) return;
    if (realpath(qemu, qemu_real) && strcmp(exe, qemu_real) == 0) return; // QEMU itself, should it load this
    // Once per process: if the re-executed program still finds no emulated PMU, it runs natively, and says so.
    // The marker holds the pid in 10 digits: its length moves every string QEMU puts after it on the program's
    // stack (the pad keeps only their total), and a C library function that reads a string across a page's end
    // takes a longer way: a pid of other digits would count other instructions.
    char me[32], marked[32];
    snprintf(me, sizeof me, "%ld", static_cast<long>(getpid()));
    snprintf(marked, sizeof marked, "%010ld", static_cast<long>(getpid()));
    if (const char* tried = getenv("PMC_EMULATE_REEXEC"); tried && strcmp(tried, marked) == 0) {
        fprintf(stderr, "pmc emulate: %s (pid %s) runs natively: under %s with %s it found no emulated PMU\n", exe, me,
                qemu, plugin);
        // For pmc's closing note of the programs that ran natively: the plugin's report file, if it has one.
        if (static char report[PATH_MAX]; plugin_argument(plugin, "report", report, sizeof report)) {
            FILE* f = fopen(report, "a");
            if (f) {
                fprintf(f, "pid %s native under QEMU it found no emulated PMU\t%s\n", me, exe);
                fclose(f);
            }
        }
        drop_from_environment(environ, "PMC_EMULATE_REEXEC");
        return;
    }
    // QEMU itself gets the environment without this library; the program gets it back through -E.
    size_t envc = 0;
    while (envp && envp[envc]) ++envc;
    char** env = static_cast<char**>(calloc(envc + 3, sizeof(char*)));
    char** args = static_cast<char**>(calloc(static_cast<size_t>(argc) + 17, sizeof(char*)));
    static char guest_preload[8192] = "LD_PRELOAD=", host_preload[8192] = "LD_PRELOAD=", marker[64];
    // QEMU's allocator pinned, as pmc emulate does it (pmc/detail/emulated.hpp): QEMU gets the program's
    // GLIBC_TUNABLES with pmc's after it; the program gets its own back (-E), or none (-U).
    static char host_tunables[8192];
    const char* guest_tunables = nullptr; // the program's GLIBC_TUNABLES=... entry
    const size_t tunables_name = strlen(proto::tunables_variable);
    if (!env || !args) return;
    size_t n = 0;
    for (size_t i = 0; i < envc; ++i) {
        if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0) {
            snprintf(guest_preload + 11, sizeof guest_preload - 11, "%s", envp[i] + 11);
            without(envp[i] + 11, preload, host_preload + 11, sizeof host_preload - 11);
            if (host_preload[11]) env[n++] = host_preload;
            continue;
        }
        if (strncmp(envp[i], "PMC_EMULATE_REEXEC=", 19) == 0 || strncmp(envp[i], "PMC_EMULATE_PAD=", 16) == 0) continue;
        if (strncmp(envp[i], proto::tunables_variable, tunables_name) == 0 && envp[i][tunables_name] == '=')
            guest_tunables = envp[i];
        env[n++] = envp[i];
    }
    snprintf(marker, sizeof marker, "PMC_EMULATE_REEXEC=%s", marked);
    env[n++] = marker;
    // The program's initial stack at one page offset whatever its path and environment, as pmc emulate does for
    // the first program (pmc/detail/emulated.hpp): QEMU copies the real path, argv and the environment (its own,
    // with -E's LD_PRELOAD) onto it.
    size_t used = strlen(exe) + 1;
    for (int i = 0; i < argc; ++i) used += strlen(argv[i]) + 1 + 8;
    for (size_t i = 0; i < n; ++i)
        if (strncmp(env[i], "LD_PRELOAD=", 11) != 0) used += strlen(env[i]) + 1 + 8;
    used += strlen(guest_preload) + 1 + 8;
    static char pad[sizeof "PMC_EMULATE_PAD=" + proto::stack_period];
    const size_t pad_length = proto::pad_value_length(used);
    memcpy(pad, "PMC_EMULATE_PAD=", 16);
    memset(pad + 16, '.', pad_length);
    pad[16 + pad_length] = '\0';
    size_t a = 0;
    // (After the pad's count: the program sees its own GLIBC_TUNABLES. A value with a comma, which -E would split,
    // or one too long for the buffer, is left as it is, unpinned.)
    bool pinned = false;
    if (!guest_tunables) {
        snprintf(host_tunables, sizeof host_tunables, "%s=%s", proto::tunables_variable, proto::qemu_tunables);
        env[n++] = host_tunables;
        pinned = true;
    } else if (!strchr(guest_tunables, ',')) {
        const char* value = guest_tunables + tunables_name + 1;
        const int w = snprintf(host_tunables, sizeof host_tunables, "%s=%s%s%s", proto::tunables_variable, value,
                               *value ? ":" : "", proto::qemu_tunables);
        if (w > 0 && static_cast<size_t>(w) < sizeof host_tunables) {
            for (size_t i = 0; i < n; ++i)
                if (env[i] == guest_tunables) env[i] = host_tunables;
            pinned = true;
        }
    }
    args[a++] = const_cast<char*>(qemu);
    args[a++] = const_cast<char*>("-0");
    args[a++] = argv[0];
    args[a++] = const_cast<char*>("-E");
    args[a++] = guest_preload;
    args[a++] = const_cast<char*>("-E");
    args[a++] = pad;
    if (pinned) {
        args[a++] = const_cast<char*>(guest_tunables ? "-E" : "-U");
        args[a++] = const_cast<char*>(guest_tunables ? guest_tunables : proto::tunables_variable);
    }
    if (const char* cpu = getenv("PMC_EMULATE_CPU"); cpu && *cpu) { // (the model pmc emulate gave the first program)
        args[a++] = const_cast<char*>("-cpu");
        args[a++] = const_cast<char*>(cpu);
    }
    if (const char* base = getenv(proto::guest_base_variable); base && *base) { // as pmc emulate ran the first QEMU
        args[a++] = const_cast<char*>("-B");
        args[a++] = const_cast<char*>(base);
    }
    args[a++] = const_cast<char*>("-plugin");
    args[a++] = const_cast<char*>(plugin);
    args[a++] = exe;
    for (int i = 1; i < argc; ++i) args[a++] = argv[i];
    execve(qemu, args, env);
    fprintf(stderr, "pmc emulate: cannot run %s under %s: %s; it runs natively\n", exe, qemu, strerror(errno));
    free(env);
    free(args);
}

} // namespace

// The C library's functions that install signal handlers, interposed (see realigned_handler). Each calls the C
// library's own, so its semantics stay the C library's; glibc's signal() and the others call its sigaction
// internally, not through the dynamic linker, so each is interposed by name.
#define PMC_INTERPOSED extern "C" __attribute__((visibility("default")))
PMC_INTERPOSED int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
    return realigned_sigaction(real(real_sigaction, "sigaction"), sig, act, old);
}
PMC_INTERPOSED int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
    return realigned_sigaction(real(real___sigaction, "__sigaction"), sig, act, old);
}
PMC_INTERPOSED PlainHandler signal(int sig, PlainHandler handler) noexcept {
    return realigned_signal(real(real_signal, "signal"), sig, handler);
}
PMC_INTERPOSED PlainHandler bsd_signal(int sig, PlainHandler handler) noexcept {
    return realigned_signal(real(real_bsd_signal, "bsd_signal"), sig, handler);
}
PMC_INTERPOSED PlainHandler ssignal(int sig, PlainHandler handler) noexcept {
    return realigned_signal(real(real_ssignal, "ssignal"), sig, handler);
}
PMC_INTERPOSED PlainHandler sysv_signal(int sig, PlainHandler handler) noexcept {
    return realigned_signal(real(real_sysv_signal, "sysv_signal"), sig, handler);
}
PMC_INTERPOSED PlainHandler __sysv_signal(int sig, PlainHandler handler) noexcept {
    return realigned_signal(real(real___sysv_signal, "__sysv_signal"), sig, handler);
}
PMC_INTERPOSED PlainHandler sigset(int sig, PlainHandler handler) noexcept {
    return realigned_signal(real(real_sigset, "sigset"), sig, handler);
}
