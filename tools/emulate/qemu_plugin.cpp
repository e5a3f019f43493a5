// SPDX-License-Identifier: MIT
// libpmc-qemu-plugin.so: pmc's emulated PMU, a TCG plugin for QEMU user mode (qemu-x86_64, qemu-aarch64).
//
//     qemu-x86_64 -plugin libpmc-qemu-plugin.so PROGRAM ARGS       (what `pmc emulate -- PROGRAM ARGS` runs)
//     qemu-x86_64 -plugin libpmc-qemu-plugin.so,report=FILE ...    (pmc count --emulate: at exit, the process's
//                                                                    total is appended to FILE as one line)
//
// What it counts: for each guest thread (in user mode each thread is its own vCPU), the guest instructions QEMU
// executes, counted a translated block at a time when the block starts. A program reads its thread's count with
// the request of pmc/detail/emulated.hpp, a system call, which ends its block: the count is exact at the read and
// includes the system call instruction itself. pmc::Counter{"instructions:u"} finds this by a handshake at open.
//
// What it does not count: the kernel's work for a system call (QEMU does it on the host), QEMU's own work, other
// threads (each thread reads only its own count). A block that a synchronous fault (SIGSEGV, SIGBUS) or an atomic
// instruction QEMU must replay alone leaves part-way has been counted whole, and the replay counts again. These are
// deterministic: the same program and input count the same. docs/emulated-pmu.md measures how these counts differ
// from a real core's instructions:u.
//
// x86 rep-prefixed string instructions (rep movsb, repe cmpsb, ...): QEMU runs each iteration as a block of its own
// that starts at the instruction, and a last one that finds the count register zero. Real x86 cores count such an
// instruction once however often it repeats (V. Weaver's notes on retired-instruction counts), so the plugin does
// too: a block that is just that instruction, entered straight from the block that ended with it, adds nothing.
//
// Cost: one call per executed block (a few host instructions) and nothing per instruction; a read costs a guest
// system call.
#include "qemu_plugin_api.h"

#include <pmc/detail/emulated.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <mutex>
#include <unordered_map>

namespace {

namespace proto = pmc::detail::emulated;

/// One vCPU's state on a cache line of its own: threads run in parallel under user mode, and counts sharing a
/// line would make every block's add contend.
struct alignas(64) Vcpu {
    std::uint64_t instructions;
    std::uint64_t rep_at;       ///< the rep string instruction that ended a block last
    std::uint64_t count_at_rep; ///< `instructions` just after that block: unchanged if no other block ran since
    bool live;                  ///< a thread of this process has it (for the report's total)
};

/// Threads get the lowest vCPU index not in use, so live threads, not threads ever made, bound the index. The
/// array is zero pages until touched. A thread past it shares the last slot.
constexpr unsigned max_vcpus = 1u << 16;
Vcpu vcpus[max_vcpus];

/// Host address of guest address 0 (user mode maps guest memory at a fixed offset), from the first block.
std::atomic<std::intptr_t> guest_base{0};
std::atomic<bool> guest_base_known{false};
char target_name[32];
bool target_x86 = false;

inline Vcpu& vcpu_state(unsigned vcpu) { return vcpus[vcpu < max_vcpus ? vcpu : max_vcpus - 1]; }

// Test builds of the plugin with a planted fault (tests/emulated): a test that cannot tell them from the real plugin
// tests nothing.
#if defined(PMC_PLUGIN_FAULT_DOUBLE)
constexpr std::uint64_t block_weight = 2; // counts every block's instructions twice
#else
constexpr std::uint64_t block_weight = 1;
#endif

/// A block that ends with a rep string instruction: its length and that instruction's guest address.
struct RepBlock {
    std::uint64_t insns;
    std::uint64_t rep_at;
};
/// Kept for the plugin's life (blocks are retranslated rarely); one per address, so retranslation adds nothing.
std::mutex rep_blocks_lock;
std::unordered_map<std::uint64_t, std::unique_ptr<RepBlock>> rep_blocks;

// The common case, one add: every block but those ending with a rep string instruction.
void on_block(unsigned int vcpu, void* insns) {
    vcpu_state(vcpu).instructions += block_weight * reinterpret_cast<std::uintptr_t>(insns);
}
void on_block_ending_in_rep(unsigned int vcpu, void* block) {
    const auto* b = static_cast<const RepBlock*>(block);
    Vcpu& v = vcpu_state(vcpu);
    v.instructions += block_weight * b->insns;
    v.rep_at = b->rep_at;
    v.count_at_rep = v.instructions;
}
/// A block of just a rep string instruction: its first execution counts; its next iterations, which follow the
/// block that ended with it with no other block between (the count is as that block left it), do not.
void on_rep_alone(unsigned int vcpu, void* block) {
    const auto* b = static_cast<const RepBlock*>(block);
    Vcpu& v = vcpu_state(vcpu);
    if (v.rep_at != b->rep_at || v.count_at_rep != v.instructions) v.instructions += block_weight;
    v.rep_at = b->rep_at;
    v.count_at_rep = v.instructions;
}

/// Whether x86 instruction bytes are a rep/repe/repne-prefixed string instruction (movs, cmps, stos, lods, scas).
bool is_rep_string(const unsigned char* p, std::size_t n) {
    bool rep = false;
    std::size_t i = 0;
    for (; i < n; ++i) {
        const unsigned char b = p[i];
        if (b == 0xF2 || b == 0xF3) rep = true;
        else if (b == 0xF0 || b == 0x2E || b == 0x36 || b == 0x3E || b == 0x26 || b == 0x64 || b == 0x65 ||
                 b == 0x66 || b == 0x67)
            continue;
        else if ((b & 0xF0) == 0x40) continue; // REX
        else break;
    }
    if (!rep || i >= n) return false;
    const unsigned char op = p[i];
    return op >= 0xA4 && op <= 0xAF && op != 0xA8 && op != 0xA9; // A8/A9 are test al/eax, imm
}

const RepBlock* rep_block(std::uint64_t key, std::uint64_t insns, std::uint64_t rep_at) {
    std::lock_guard<std::mutex> hold(rep_blocks_lock);
    auto& slot = rep_blocks[key];
    if (!slot) slot.reset(new RepBlock{insns, rep_at});
    return slot.get();
}

void on_translate(qemu_plugin_id_t, struct qemu_plugin_tb* tb) {
    const std::size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) return;
    if (!guest_base_known.load(std::memory_order_acquire)) {
        const qemu_plugin_insn* first = qemu_plugin_tb_get_insn(tb, 0);
        const auto host = reinterpret_cast<std::intptr_t>(qemu_plugin_insn_haddr(first));
        guest_base.store(host - static_cast<std::intptr_t>(qemu_plugin_insn_vaddr(first)), std::memory_order_relaxed);
        guest_base_known.store(true, std::memory_order_release);
    }
    if (target_x86) {
        const qemu_plugin_insn* last = qemu_plugin_tb_get_insn(tb, n - 1);
        if (is_rep_string(static_cast<const unsigned char*>(qemu_plugin_insn_data(last)), qemu_plugin_insn_size(last))) {
            const std::uint64_t at = qemu_plugin_insn_vaddr(last);
            // Keyed by the block's start and length: the same rep ends blocks that start elsewhere.
            const std::uint64_t key = qemu_plugin_tb_vaddr(tb) * 1024 + n;
            auto* block = const_cast<RepBlock*>(rep_block(key, n, at));
            qemu_plugin_register_vcpu_tb_exec_cb(tb, n == 1 ? on_rep_alone : on_block_ending_in_rep,
                                                 QEMU_PLUGIN_CB_NO_REGS, block);
            return;
        }
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS,
                                         reinterpret_cast<void*>(static_cast<std::uintptr_t>(n)));
}

// ---- the process's total, for pmc count --emulate (report=FILE) ----
std::mutex totals_lock;
std::uint64_t exited_total = 0;  ///< instructions of this process's threads that have exited
std::uint64_t fork_baseline = 0; ///< a fork child: what its thread had counted in the parent
std::string report_path;
thread_local unsigned this_vcpu = 0; ///< the vCPU of the host thread running it, set at each system call

void on_vcpu_init(qemu_plugin_id_t, unsigned int vcpu) {
    // A new thread may get the index of one that exited: it starts from zero, as a new perf counter would.
    std::lock_guard<std::mutex> hold(totals_lock);
    vcpu_state(vcpu) = Vcpu{0, 0, 0, true};
}
void on_vcpu_exit(qemu_plugin_id_t, unsigned int vcpu) {
    std::lock_guard<std::mutex> hold(totals_lock);
    Vcpu& v = vcpu_state(vcpu);
    if (!v.live) return;
    exited_total += v.instructions;
    v.live = false;
}
/// With report=FILE: "pid N started", so that a process that starts and never reports (killed) is known to be missing.
void say_started() {
    if (report_path.empty()) return;
    char line[64];
    const int n = std::snprintf(line, sizeof line, "pid %ld started\n", static_cast<long>(::getpid()));
    const int fd = ::open(report_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, line, static_cast<std::size_t>(n)) != n)
        std::fprintf(stderr, "pmc's QEMU plugin: cannot write to %s\n", report_path.c_str());
    if (fd >= 0) ::close(fd);
}

/// In a fork child (the guest's fork is the host's): only the forking thread lives on, and what it counted before
/// belongs to the parent's report.
void in_fork_child() {
    exited_total = 0;
    for (unsigned i = 0; i < max_vcpus; ++i)
        if (vcpus[i].live && i != this_vcpu) vcpus[i].live = false;
    fork_baseline = vcpu_state(this_vcpu).instructions;
    new (&totals_lock) std::mutex; // it may have been held by a thread that is gone
    say_started();
}
/// With report=FILE: "pid N instructions M", what this process executed since it started or last reported. At its
/// exit, and at an execve (QEMU runs the new program natively: this process image, and the plugin, end there; the
/// preload library starts the program under QEMU again, which reports its own).
void report_total() {
    if (report_path.empty()) return;
    std::uint64_t total = exited_total;
    for (unsigned i = 0; i < max_vcpus; ++i)
        if (vcpus[i].live) total += vcpus[i].instructions;
    char line[96];
    const int n = std::snprintf(line, sizeof line, "pid %ld instructions %llu\n", static_cast<long>(::getpid()),
                                static_cast<unsigned long long>(total - fork_baseline));
    fork_baseline = total; // an execve that fails, and the process goes on: its exit reports only what follows
    const int fd = ::open(report_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, line, static_cast<std::size_t>(n)) != n)
        std::fprintf(stderr, "pmc's QEMU plugin: cannot write the instruction count to %s\n", report_path.c_str());
    if (fd >= 0) ::close(fd);
}
void at_exit(qemu_plugin_id_t, void*) { report_total(); }

/// The guest's execve and execveat system call numbers.
long execve_number = -1, execveat_number = -1;

template <class T>
T* guest_pointer(std::uint64_t guest_address) {
    return reinterpret_cast<T*>(guest_base.load(std::memory_order_relaxed) + static_cast<std::intptr_t>(guest_address));
}

void on_syscall(qemu_plugin_id_t, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t,
                uint64_t, uint64_t, uint64_t, uint64_t) {
    this_vcpu = vcpu;
    if (num == execve_number || num == execveat_number) {
        report_total();
        return;
    }
    if (num != proto::syscall_number || a1 != proto::magic || a3 == 0) return;
    if (a2 == static_cast<std::uint64_t>(proto::Op::read)) {
#if defined(PMC_PLUGIN_FAULT_SWAP)
        vcpu ^= 1; // hands a thread another thread's count
#endif
        *guest_pointer<std::uint64_t>(a3) = vcpu_state(vcpu).instructions;
    } else if (a2 == static_cast<std::uint64_t>(proto::Op::hello)) {
        auto* hello = guest_pointer<proto::Hello>(a3);
        hello->protocol = proto::protocol_version;
        hello->flags = 0;
        std::memcpy(hello->target, target_name, sizeof hello->target);
        hello->reply = proto::hello_reply; // last: the program checks it
    }
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info,
                                                               int argc, char** argv) {
    if (info->system_emulation) {
        qemu_plugin_outs("pmc's emulated PMU runs under QEMU user mode only (qemu-x86_64, qemu-aarch64), "
                         "not qemu-system-*\n");
        return -1;
    }
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "report=", 7) == 0 && argv[i][7]) {
            report_path = argv[i] + 7;
            continue;
        }
        std::fprintf(stderr, "pmc's QEMU plugin: unknown argument '%s' (it takes report=FILE)\n", argv[i]);
        return -1;
    }
    std::snprintf(target_name, sizeof target_name, "%s", info->target_name ? info->target_name : "?");
    target_x86 = std::strcmp(target_name, "x86_64") == 0 || std::strcmp(target_name, "i386") == 0;
    if (std::strcmp(target_name, "x86_64") == 0) execve_number = 59, execveat_number = 322;
    if (std::strcmp(target_name, "aarch64") == 0) execve_number = 221, execveat_number = 281;
    say_started();
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
    qemu_plugin_register_atexit_cb(id, at_exit, nullptr);
    ::pthread_atfork(nullptr, nullptr, in_fork_child);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    return 0;
}

} // extern "C"
