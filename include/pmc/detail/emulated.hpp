// SPDX-License-Identifier: MIT
// pmc/detail/emulated.hpp: the protocol between pmc and its QEMU TCG plugin, the emulated PMU that
// `pmc emulate` runs a program under (tools/emulate/, docs/emulated-pmu.md).
//
// Under QEMU user mode every guest thread is its own vCPU, and the plugin counts each vCPU's executed instructions.
// A program asks for its thread's count with a system call number no kernel has: QEMU hands every guest system
// call to the plugin before emulating it, the plugin writes the count into the guest's variable, and QEMU then
// fails the call with ENOSYS. A system call ends the emulator's translation block, so the count is exact at the
// call. On a real kernel the same call fails with ENOSYS and writes nothing: the handshake at open (a magic reply
// the plugin writes) cannot be mistaken. It is made only where pmc emulate says so (PMC_EMULATED=1), once per
// process.
//
// Under `pmc emulate --cache` the hello's flags say the plugin runs a cache model per thread, and a read_events
// request reads the thread's modelled cache events as well (several at one request, for pmc::Group), and
// pmc::Sampler samples the thread's loads from the model (sampler_open, sampler_drain: load-latency sampling, the
// samples written as the kernel's PERF_RECORD_SAMPLE records). Under `pmc emulate --branches` (hello_branch_model)
// read_events reads the thread's branch instructions and the branch model's misses.
//
// The plugin touches guest memory only when the first argument is `magic`, so another program's use of the same
// number is harmless to it.
#pragma once

#include <pmc/config.hpp>

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>

PMC_BEGIN_NAMESPACE
namespace detail {
namespace emulated {

/// The environment variable `pmc emulate` sets to 1 for the program it runs (set it by hand beside `qemu-x86_64
/// -plugin libpmc-qemu-plugin.so`). pmc asks the plugin only when it is set: a program run directly (on a machine
/// with a PMU, or under a seccomp allowlist that kills on an unknown system call) never issues the request.
inline constexpr const char* announce_variable = "PMC_EMULATED";
/// What pmc emulate ran the program on ("QEMU 7.2.22, plugin API 1"), for the profile's header: the
/// program cannot ask QEMU its version, and two emulators count some code differently.
inline constexpr const char* emulator_variable = "PMC_EMULATE_EMULATOR";

/// The program's initial stack (argv's and the environment's strings and pointers, copied below a top that is the
/// same in every run) moves with the length of the program's path and the size of its environment, and with it
/// every stack buffer's alignment, which changes the instructions of code such as glibc's string routines (2000
/// strlen and memcpy calls on stack arrays: 250,688 or 252,688). pmc emulate, and the preload library for each
/// program it re-executes, add `pad_variable` to the program's environment with a value of as many bytes as make the
/// strings and pointers fill a whole number of `stack_period`s: the stack then starts at the same page offset
/// whatever the path and the environment (a program can still see their text, and this variable).
inline constexpr const char* pad_variable = "PMC_EMULATE_PAD";
inline constexpr std::size_t stack_period = 4096;
/// The length of the pad's value for `used` bytes of strings (with their NULs) and pointers (8 bytes each, argv's
/// and the environment's) on the initial stack without it.
inline constexpr std::size_t pad_value_length(std::size_t used) noexcept {
    const std::size_t entry = sizeof("PMC_EMULATE_PAD=") + 8; // its name, '=', the value's NUL, its pointer
    return (stack_period - (used + entry) % stack_period) % stack_period;
}

/// QEMU's own allocator, pinned for QEMU alone (pmc emulate and the preload library put these tunables in QEMU's
/// environment, after the caller's GLIBC_TUNABLES, and give the program the caller's value back with -E, or none with
/// -U). Why: QEMU 10 (linux-user/mmap.c, without -R) passes the program's mappings that name no address to the
/// kernel, which places them top-down beside QEMU's own; QEMU's call_rcu thread's first malloc makes a glibc arena
/// there (128 MiB reserved, 64 MiB kept, 64 MiB-aligned) at a moment that races the program's loading, and the
/// program's stack, heap and mmap area moved by 128 MiB in 6 of 30 runs. One arena, and no mmap below 32 MiB (so no
/// munmap at another thread's moment), leave that area to the program's own mappings. (-R, a reserved address space,
/// would isolate it, but QEMU 10 refuses it for x86-64 programs: "Cannot allocate vsyscall page".)
inline constexpr const char* tunables_variable = "GLIBC_TUNABLES";
inline constexpr const char* qemu_tunables = "glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=33554432";

/// QEMU 8.1 and later (linux-user/elfload.c) load a position-independent program at the guest address
/// 0x555555556000 if it is free, else wherever the kernel puts it, and reserve no room for its break, which grows
/// only into free pages. Without address randomization QEMU itself sits at 0x555555554000, so the program went
/// top-down beside QEMU's own libraries and its break could not grow at all (malloc then maps its heap). pmc emulate
/// and the preload library give such a QEMU `-B guest_base`: guest addresses are host addresses minus 1 GiB, the
/// program's preferred address is free again (as natively, the break follows the program), and a guest base below
/// 2 GiB is a 32-bit displacement for x86-64 hosts, no register. pmc emulate sets `guest_base_variable` to the
/// value for the QEMU it runs, for the preload library's re-executions.
inline constexpr const char* guest_base_variable = "PMC_EMULATE_GUEST_BASE";
inline constexpr const char* guest_base = "0x40000000";

/// No kernel has this system call (x86-64 and AArch64 tables end below 1,000): ENOSYS everywhere but the plugin.
inline constexpr long syscall_number = 0x504d43; // "PMC"
/// First argument of every request; the plugin ignores the system call without it.
inline constexpr std::uint64_t magic = 0x6c756d652d636d70ULL; // "pmc-emul", little-endian
/// Bumped whenever the request layout or the meaning of a count changes.
inline constexpr std::uint32_t protocol_version = 1;

/// The second argument: what is asked.
enum class Op : std::uint64_t {
    hello = 1, ///< third argument: a Hello the plugin fills
    read = 2,  ///< third argument: a std::uint64_t the plugin sets to this thread's instruction count
    /// third argument: an array of `Event` codes, fourth its length (at most max_events); the plugin replaces each
    /// code with this thread's count of that event, all taken at this one request (pmc emulate --cache for the
    /// modelled ones: the program asks only when the hello said hello_cache_model)
    read_events = 3,
    cache_config = 4, ///< third argument: a CacheConfig the plugin fills (only when the hello said hello_cache_model)
    /// Load-latency sampling from the cache model (only when the hello said hello_load_sampling); the third
    /// argument is a SamplerRequest each time.
    sampler_open = 5,  ///< makes a sampler of the calling thread's loads: every `period`-th at or above min_latency
    sampler_drain = 6, ///< writes pending samples into `buffer` as PERF_RECORD_SAMPLE (and LOST) records
    sampler_stop = 7,  ///< stops sampling; the counts are final, the pending samples stay for drains
    sampler_close = 8, ///< stops and frees the sampler (its pending samples are dropped)
    sampler_start = 9, ///< starts it, from the thread that opened it (the last step of an open: nothing of the
                       ///< open's own work is counted)
    /// pmc's preload library under pmc sample --emulate, in a handler of a fault (SIGSEGV, SIGBUS, ...) after the
    /// program's handler left the signal's action at its default: the process ends when the fault recurs, with no
    /// exit callback before QEMU 8.0, so the plugin writes every pending sample now. The third argument: any
    /// non-null address (not read).
    write_samples = 10,
};

/// What read_events counts. The cache events are the model's (pmc emulate --cache: Cachegrind's model, per thread):
/// exact for the model at the request, including every access the thread made before it.
enum class Event : std::uint64_t {
    instructions = 0,       ///< as Op::read
    l1d_loads = 1,          ///< Cachegrind's Dr: data reads (loads, read-modify-writes)
    l1d_load_misses = 2,    ///< D1mr
    l1d_stores = 3,         ///< Dw
    l1d_store_misses = 4,   ///< D1mw
    l1i_load_misses = 5,    ///< I1mr
    llc_loads = 6,          ///< data reads that reach the LL (D1mr without an L2)
    llc_load_misses = 7,    ///< DLmr
    llc_stores = 8,         ///< data writes that reach the LL (D1mw without an L2)
    llc_store_misses = 9,   ///< DLmw
    cache_references = 10,  ///< every LL access: instruction fetches, reads, writes
    cache_misses = 11,      ///< every LL miss: ILmr + DLmr + DLmw
    /// pmc emulate --branches: every branch instruction the thread executed (conditional or not, jumps, calls,
    /// returns), exact
    branch_instructions = 12,
    branch_misses = 13,     ///< the branch model's misses (Cachegrind's predictor, per thread): Bcm + Bim
};
inline constexpr std::uint64_t event_count = 14;
/// Whether an event code is one of pmc emulate --branches (the rest, above instructions, are the cache model's).
inline constexpr bool is_branch_event(std::uint64_t code) noexcept {
    return code == static_cast<std::uint64_t>(Event::branch_instructions) ||
           code == static_cast<std::uint64_t>(Event::branch_misses);
}
/// The most events one read_events request asks for (pmc::Group's limit too).
inline constexpr std::uint64_t max_events = 64;

/// Hello::flags: the plugin runs the cache model (pmc emulate --cache) and answers read_events and cache_config.
inline constexpr std::uint32_t hello_cache_model = 1;
/// Hello::flags: the plugin samples loads from its cache model (the sampler_* requests).
inline constexpr std::uint32_t hello_load_sampling = 2;

/// The PERF_SAMPLE_* fields the plugin writes into a load sample (in the kernel's order): ip, tid, time, addr,
/// cpu, period, weight or weight_struct, data_src.
inline constexpr std::uint64_t sampler_fields = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                                PERF_SAMPLE_ADDR | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                                                PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT | PERF_SAMPLE_DATA_SRC;
/// The fields of the records the plugin writes to files for `pmc sample --emulate` (its samples=DIR argument: every
/// thread sampled from its start), which pmc decodes with this sample_type.
inline constexpr std::uint64_t whole_program_sample_fields = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                                             PERF_SAMPLE_ADDR | PERF_SAMPLE_PERIOD |
                                                             PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC;

/// What the sampler_* requests exchange (in: set by the program; out: by the plugin).
struct SamplerRequest {
    std::uint64_t id = 0;          ///< open: out, the sampler's id; the others: in
    std::uint64_t period = 0;      ///< open, in: a sample every `period` counted loads
    std::uint64_t sample_type = 0; ///< open, in: the PERF_SAMPLE_* fields of each record (of sampler_fields)
    std::uint64_t min_latency = 0; ///< open, in: loads the model serves in fewer cycles are not counted (ldlat)
    std::uint64_t capacity = 0;    ///< open, in: samples held between drains; more are lost (counted)
    std::uint64_t buffer = 0;      ///< drain, in: where the records go
    std::uint64_t buffer_size = 0; ///< drain, in: its size; out: the bytes written (whole records)
    std::uint64_t loads = 0;       ///< out: loads counted since open (the exact count the samples estimate)
    std::uint64_t samples = 0;     ///< out: samples taken since open
    std::uint64_t lost = 0;        ///< out: samples dropped because `capacity` were pending
    std::uint64_t pending = 0;     ///< drain, out: samples still held
    std::uint32_t latencies[4] = {}; ///< open, out: the cycles a load served by L1, L2, LL, memory reports
    std::uint32_t error = 0;       ///< out: 0, or a SamplerError
    /// open, in: 1 to sample the threads the process creates from now on too (SamplerOptions::inherit); stop and
    /// drain, out: the threads sampled (1 + those)
    std::uint32_t inherit = 0;
};
enum class SamplerError : std::uint32_t {
    none = 0,
    no_model = 1,       ///< the run has no cache model (pmc emulate without --cache)
    bad_request = 2,    ///< a period of 0, fields the plugin does not write, or no capacity
    unknown_id = 3,     ///< no such sampler (closed, or another process's)
    thread_busy = 4,    ///< the calling thread already has a sampler running
    other_thread = 5,   ///< sampler_start from a thread that did not open it
    whole_program = 6,  ///< `pmc sample --emulate` samples every thread of the program already
    inherit_busy = 7,   ///< another sampler of this process follows new threads already (one at a time)
};
/// Hello::flags: the plugin counts branches and runs the branch predictor (pmc emulate --branches): read_events
/// answers branch_instructions and branch_misses.
inline constexpr std::uint32_t hello_branch_model = 4;

/// The model's geometry, in bytes (as Valgrind's --D1=SIZE,ASSOC,LINE); l2 all zero when there is none.
struct CacheConfig {
    std::uint32_t i1[3] = {}, d1[3] = {}, l2[3] = {}, ll[3] = {};
    std::uint32_t strict_inclusion = 0; ///< 1: an LL eviction removes the line above too; 0: Cachegrind's
    std::uint32_t reserved[3] = {};
};

/// What the plugin answers to hello. The program zeroes it first: on a real kernel it stays zero.
struct Hello {
    std::uint64_t reply = 0;            ///< `hello_reply` from the plugin
    std::uint32_t protocol = 0;         ///< the plugin's protocol_version
    std::uint32_t flags = 0;            ///< hello_cache_model, hello_load_sampling, hello_branch_model, or 0
    char target[32] = {};               ///< the guest architecture QEMU emulates ("x86_64", "aarch64"), NUL-ended
};
inline constexpr std::uint64_t hello_reply = 0x796c7065722d636dULL; // "mc-reply"

#if PMC_ARCH_X86_64
/// One request to the emulated PMU: `syscall` with rax = number, rdi = magic, rsi = op, rdx = argument. The result
/// (ENOSYS) is ignored: the answer is what the plugin wrote. Clobbers what the system call ABI clobbers.
BOOST_FORCEINLINE void request(Op op, void* argument) noexcept {
    long rax = syscall_number;
    asm volatile("syscall"
                 : "+a"(rax)
                 : "D"(magic), "S"(static_cast<std::uint64_t>(op)), "d"(argument)
                 : "rcx", "r11", "memory");
}
/// The same with a fourth argument (r10).
BOOST_FORCEINLINE void request(Op op, void* argument, std::uint64_t fourth) noexcept {
    long rax = syscall_number;
    register std::uint64_t r10 asm("r10") = fourth;
    asm volatile("syscall"
                 : "+a"(rax)
                 : "D"(magic), "S"(static_cast<std::uint64_t>(op)), "d"(argument), "r"(r10)
                 : "rcx", "r11", "memory");
}
inline constexpr bool request_supported = true;
#elif PMC_ARCH_AARCH64
/// One request to the emulated PMU: `svc #0` with x8 = number, x0 = magic, x1 = op, x2 = argument.
BOOST_FORCEINLINE void request(Op op, void* argument) noexcept {
    register long x8 asm("x8") = syscall_number;
    register std::uint64_t x0 asm("x0") = magic;
    register std::uint64_t x1 asm("x1") = static_cast<std::uint64_t>(op);
    register void* x2 asm("x2") = argument;
    asm volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
}
/// The same with a fourth argument (x3).
BOOST_FORCEINLINE void request(Op op, void* argument, std::uint64_t fourth) noexcept {
    register long x8 asm("x8") = syscall_number;
    register std::uint64_t x0 asm("x0") = magic;
    register std::uint64_t x1 asm("x1") = static_cast<std::uint64_t>(op);
    register void* x2 asm("x2") = argument;
    register std::uint64_t x3 asm("x3") = fourth;
    asm volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
}
inline constexpr bool request_supported = true;
#else
inline void request(Op, void*) noexcept {}
inline void request(Op, void*, std::uint64_t) noexcept {}
inline constexpr bool request_supported = false;
#endif

/// This thread's count of executed instructions from the emulated PMU (only after a successful hello).
BOOST_FORCEINLINE std::uint64_t read_instructions() noexcept {
    std::uint64_t value = 0;
    request(Op::read, &value);
    return value;
}

/// This thread's count of one event from the emulated PMU (a modelled one only after a hello that said
/// hello_cache_model): one request, the same instructions whatever the event.
BOOST_FORCEINLINE std::uint64_t read_event(std::uint64_t event) noexcept {
    std::uint64_t value = event;
    request(Op::read_events, &value, 1);
    return value;
}

/// `n` (at most max_events) counts at one request: `values` holds the Event codes, and gets their counts.
inline void read_events(std::uint64_t* values, std::uint64_t n) noexcept { request(Op::read_events, values, n); }

} // namespace emulated
} // namespace detail
PMC_END_NAMESPACE
