// SPDX-License-Identifier: MIT
// libpmc-qemu-plugin.so: pmc's emulated PMU, a TCG plugin for QEMU user mode (qemu-x86_64, qemu-aarch64).
//
//     qemu-x86_64 -plugin libpmc-qemu-plugin.so PROGRAM ARGS       (what `pmc emulate -- PROGRAM ARGS` runs)
//     qemu-x86_64 -plugin libpmc-qemu-plugin.so,report=FILE ...    (pmc count --emulate: at exit, the process's
//                                                                    total is appended to FILE as one line)
//     ...,cache=on,samples=DIR,sample_period=N,sample_ldlat=L     (pmc sample --emulate: every thread's loads
//                                                                    sampled, the records in DIR/PID.samples)
//
// What it counts: for each guest thread (in user mode each thread is its own vCPU), the guest instructions QEMU
// executes, counted a translated block at a time when the block starts. A program reads its thread's count with
// the request of pmc/detail/emulated.hpp, a system call, which ends its block: the count is exact at the read and
// includes the system call instruction itself. pmc::Counter{"instructions:u"} finds this by a handshake at open.
// With cache=on (pmc emulate --cache) the hello says so, and a read_events request reads the thread's cache model
// (plugin_cache.hpp) too: QEMU calls each memory callback right after its access, so every access before the
// request is in the model when it is answered. A pmc::Sampler on a load-latency event samples the thread's loads from
// the model there (plugin_sampling.hpp).
// With branches=on (pmc emulate --branches) it counts each thread's branch instructions and feeds its branch
// predictor (plugin_branches.hpp), which read_events reads too.
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
// What QEMU's user mode refuses (seccomp, and clone3 where the program does not fall back to clone) the plugin names
// on the program's stderr, once per process: a sandbox that silently vanishes is a trap.
//
// Cost: one call per executed block (a few host instructions) and nothing per instruction; a read costs a guest
// system call (and, once per page and change of the program's mappings, a process_vm_writev that checks the
// address).
#include "qemu_plugin_api.h"
#include "plugin_branches.hpp"
#include "plugin_cache.hpp"
#include "append_file.hpp"
#include "progress_file.hpp"

#include <pmc/detail/emulated.hpp>

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace {

namespace proto = pmc::detail::emulated;

/// One vCPU's state on a cache line of its own: threads run in parallel under user mode, and counts sharing a
/// line would make every block's add contend.
struct Counts {
    std::uint64_t instructions;
    std::uint64_t rep_at;       ///< the rep string instruction that ended a block last
    std::uint64_t count_at_rep; ///< `instructions` just after that block: unchanged if no other block ran since
};

/// Host address of guest address 0 (user mode maps guest memory at a fixed offset), from the first block.
std::atomic<std::intptr_t> guest_base{0};
std::atomic<bool> guest_base_known{false};
char target_name[32];
bool target_x86 = false;

/// The threads with a live count, stored under slots_lock after every change (exited_total first): 1 tells the
/// thread at a system call that nothing else changes the totals, so its progress needs no lock.
std::atomic<unsigned> live_threads{0};
unsigned live_thread_count();

#if PMC_PLUGIN_API == 1
// ---- counting, plugin API 1 (QEMU 6.0 to 8.2): a call per block into a slot per live thread ----

struct alignas(64) Vcpu : Counts {
    std::atomic<std::uint32_t> owner; ///< 1 + the vCPU index that has this slot; 0: free
    bool live;                        ///< a thread of this process has it (for the report's total)
};

/// A slot per live thread. QEMU numbers a new thread one past the highest live index, so a long-lived thread
/// beside short ones pushes the indexes up without bound: a thread's slot is found from its index (open
/// addressing, the index's own slot first) and freed when the thread exits. The array is zero pages until touched.
#if defined(PMC_PLUGIN_SLOTS)
constexpr unsigned slot_count = PMC_PLUGIN_SLOTS; // tests: a few slots, so that they must be reused
#else
constexpr unsigned slot_count = 1u << 16;
#endif
static_assert((slot_count & (slot_count - 1)) == 0, "a power of two");
Vcpu vcpus[slot_count];
/// One past the highest slot ever claimed: what loops over the slots visit (the rest are untouched zero pages,
/// which a loop over all 4 MiB would fault in at every fork and exit).
std::atomic<unsigned> slots_used{0};
std::mutex slots_lock;
Vcpu shared_slot; ///< more live threads than slots: the rest share this one (said once)

/// The slot `vcpu` has, or null.
Vcpu* slot_of(unsigned vcpu) {
    const std::uint32_t owner = vcpu + 1;
    if (vcpus[vcpu & (slot_count - 1)].owner.load(std::memory_order_acquire) == owner)
        return &vcpus[vcpu & (slot_count - 1)];
    const unsigned used = slots_used.load(std::memory_order_acquire);
    for (unsigned i = 0; i < used; ++i)
        if (vcpus[i].owner.load(std::memory_order_acquire) == owner) return &vcpus[i];
    return nullptr;
}

/// A free slot for `vcpu` (its own if it has one), reset to zero: a new thread counts from zero, as a new perf
/// counter would. Under slots_lock.
Vcpu& claim_slot(unsigned vcpu) {
    // The index's own slot if free (or already its own), else the lowest free one: the slots in use stay few.
    Vcpu* free = slot_of(vcpu);
    if (!free && vcpus[vcpu & (slot_count - 1)].owner.load(std::memory_order_relaxed) == 0)
        free = &vcpus[vcpu & (slot_count - 1)];
    for (unsigned i = 0; i < slot_count && !free; ++i)
        if (vcpus[i].owner.load(std::memory_order_relaxed) == 0) free = &vcpus[i];
    const std::uint32_t owner = vcpu + 1;
    if (!free) {
        static bool said = false;
        if (!said)
            std::fprintf(stderr, "pmc's QEMU plugin: more than %u threads at once: the others share one count\n",
                         slot_count);
        said = true;
        return shared_slot;
    }
    free->instructions = free->rep_at = free->count_at_rep = 0;
    free->live = true;
    const auto index = static_cast<unsigned>(free - vcpus);
    if (index >= slots_used.load(std::memory_order_relaxed)) slots_used.store(index + 1, std::memory_order_release);
    free->owner.store(owner, std::memory_order_release);
    return *free;
}

/// The slot of `vcpu` when it is not the index's own: found by probing, remembered by the thread.
__attribute__((noinline)) Vcpu& find_slot(unsigned vcpu) {
    static thread_local unsigned cached_vcpu = ~0u;
    static thread_local Vcpu* cached = nullptr;
    const std::uint32_t owner = vcpu + 1;
    if (cached && cached_vcpu == vcpu && (cached == &shared_slot || cached->owner.load(std::memory_order_relaxed) == owner))
        return *cached;
    Vcpu* found = slot_of(vcpu);
    if (!found) { // a vCPU the plugin was not told of
        std::lock_guard<std::mutex> hold(slots_lock);
        found = &claim_slot(vcpu);
        live_threads.store(live_thread_count(), std::memory_order_release);
    }
    cached_vcpu = vcpu;
    cached = found;
    return *found;
}

inline Vcpu& vcpu_state(unsigned vcpu) {
    Vcpu& own = vcpus[vcpu & (slot_count - 1)];
    if (__builtin_expect(own.owner.load(std::memory_order_relaxed) == vcpu + 1, 1)) return own;
    return find_slot(vcpu);
}
/// The calling thread's slot once its first block has found it, else null: a thread keeps its vCPU index, and so its
/// slot, until it exits (a slot is freed by its own thread's exit alone, or in a fork child for the threads that did
/// not fork). The calls per block then add to it with no lookup.
__attribute__((tls_model("initial-exec"))) thread_local Vcpu* own_slot = nullptr;
/// A call per block (`again`) on a thread whose slot is not known yet: found, then the call made again (kept out of
/// the calls, which then save no register).
__attribute__((noinline)) void find_own_slot(unsigned vcpu, void* block, qemu_plugin_vcpu_udata_cb_t again) {
    own_slot = &vcpu_state(vcpu);
    again(vcpu, block);
}
inline Counts& counts_of(unsigned vcpu) { return vcpu_state(vcpu); }
[[maybe_unused]] bool known_vcpu(unsigned) { return true; }
std::uint64_t instructions_of(unsigned vcpu) { return vcpu_state(vcpu).instructions; }

void thread_started(unsigned vcpu) { // under slots_lock
    claim_slot(vcpu);
}
/// What the exiting thread counted (its slot is freed).
std::uint64_t thread_ended(unsigned vcpu) { // under slots_lock
    Vcpu* v = slot_of(vcpu);
    if (!v) return 0; // one of those sharing shared_slot: its count stays with theirs
    const std::uint64_t counted = v->live ? v->instructions : 0;
    v->live = false;
    v->owner.store(0, std::memory_order_release); // the slot is free for the next thread
    return counted;
}
std::uint64_t live_threads_total() {
    std::uint64_t total = shared_slot.live ? shared_slot.instructions : 0;
    const unsigned used = slots_used.load(std::memory_order_acquire);
    for (unsigned i = 0; i < used; ++i)
        if (vcpus[i].live) total += vcpus[i].instructions;
    return total;
}
/// How many threads have a live slot (under slots_lock).
unsigned live_thread_count() {
    unsigned n = 0;
    const unsigned used = slots_used.load(std::memory_order_acquire);
    for (unsigned i = 0; i < used; ++i) n += vcpus[i].live ? 1 : 0;
    return n;
}
/// A fork child: only `vcpu`, the forking thread, lives on.
void keep_only(unsigned vcpu) {
    const unsigned used = slots_used.load(std::memory_order_acquire);
    for (unsigned i = 0; i < used; ++i)
        if (const std::uint32_t o = vcpus[i].owner.load(std::memory_order_relaxed); o != 0 && o != vcpu + 1) {
            vcpus[i].live = false;
            vcpus[i].owner.store(0, std::memory_order_relaxed);
        }
}
void on_block(unsigned int vcpu, void* insns);
/// The block's count: with the cache model on (`cached`), folded into its call per block (one call, not two); else
/// with the branch model on (`branched`), folded into its call per block the same way.
void count_block(qemu_plugin_tb* tb, std::size_t n, plugin_cache::Block* cached, plugin_branches::Block* branched) {
    if (cached) {
        cached->plan->counted = n;
        return;
    }
    if (branched) {
        branched->counted = n;
        return;
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS,
                                         reinterpret_cast<void*>(static_cast<std::uintptr_t>(n)));
}
bool start_counting() { return true; }

#else
// ---- counting, plugin API 2 and later (QEMU 9.0 on): an inline add per block to a per-vCPU scoreboard ----
//
// No call per block: QEMU adds the block's length to the vCPU's entry in generated code. QEMU reuses a vCPU index
// when its thread exits; the entry is reset when a thread starts on it.

qemu_plugin_scoreboard* board = nullptr;
std::mutex slots_lock;
std::vector<char> live; ///< per vCPU index: a thread of this process has it

inline Counts& counts_of(unsigned vcpu) { return *static_cast<Counts*>(qemu_plugin_scoreboard_find(board, vcpu)); }
std::uint64_t instructions_of(unsigned vcpu) { return counts_of(vcpu).instructions; }
[[maybe_unused]] bool known_vcpu(unsigned vcpu) { // (QEMU asserts on a scoreboard index past its vCPUs)
    std::lock_guard<std::mutex> hold(slots_lock);
    return vcpu < live.size();
}

void thread_started(unsigned vcpu) { // under slots_lock
    counts_of(vcpu) = Counts{};
    if (live.size() <= vcpu) live.resize(vcpu + 1, 0);
    live[vcpu] = 1;
}
std::uint64_t thread_ended(unsigned vcpu) { // under slots_lock
    if (vcpu >= live.size() || !live[vcpu]) return 0;
    live[vcpu] = 0;
    return counts_of(vcpu).instructions;
}
std::uint64_t live_threads_total() {
    std::uint64_t total = 0;
    for (unsigned i = 0; i < live.size(); ++i)
        if (live[i]) total += counts_of(i).instructions;
    return total;
}
unsigned live_thread_count() { // under slots_lock
    unsigned n = 0;
    for (const char l : live) n += l ? 1 : 0;
    return n;
}
void keep_only(unsigned vcpu) {
    for (unsigned i = 0; i < live.size(); ++i)
        if (i != vcpu) live[i] = 0;
}
void count_block(qemu_plugin_tb* tb, std::size_t n, plugin_cache::Block*, plugin_branches::Block*);
bool start_counting() {
    board = qemu_plugin_scoreboard_new(sizeof(Counts));
    return board != nullptr;
}
#endif

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
/// Kept for the plugin's life (blocks are retranslated rarely), one per block start, length and rep address: code
/// replaced at the same address (a JIT, dlclose and dlopen) with its rep elsewhere gets an entry of its own, never
/// the old one's address (which would count the new rep's first iteration twice).
std::mutex rep_blocks_lock;
std::map<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>, std::unique_ptr<RepBlock>> rep_blocks;

#if PMC_PLUGIN_API == 1
// The common case, one add: every block but those ending with a rep string instruction.
void on_block(unsigned int vcpu, void* insns) {
    Vcpu* own = own_slot;
    if (__builtin_expect(own == nullptr, 0)) return find_own_slot(vcpu, insns, on_block);
    own->instructions += block_weight * reinterpret_cast<std::uintptr_t>(insns);
}
void on_instruction(unsigned int vcpu, void*) { vcpu_state(vcpu).instructions += block_weight; }
void count_instruction(qemu_plugin_insn* insn) {
    qemu_plugin_register_vcpu_insn_exec_cb(insn, on_instruction, QEMU_PLUGIN_CB_NO_REGS, nullptr);
}
/// The cache model's call per block, with the block's count (count_block) folded in (`checks`: its plan's, as
/// plugin_cache::on_block_checking).
template <std::uint32_t checks>
void on_cached_block(unsigned int vcpu, void* block) {
    Vcpu* own = own_slot;
    if (__builtin_expect(own == nullptr, 0)) return find_own_slot(vcpu, block, on_cached_block<checks>);
    own->instructions += block_weight * static_cast<const plugin_cache::BlockPlan*>(block)->counted;
    plugin_cache::on_block_checking<checks>(vcpu, block);
}
template <std::uint32_t checks>
struct CachedBlockCall {
    static constexpr qemu_plugin_vcpu_udata_cb_t call = on_cached_block<checks>;
};
/// The branch model's call per block (`model`, by how the block ends), with the block's count (count_block) folded
/// in.
template <void (*model)(unsigned int, void*)>
void on_branch_block(unsigned int vcpu, void* block) {
    Vcpu* own = own_slot;
    if (__builtin_expect(own == nullptr, 0)) return find_own_slot(vcpu, block, on_branch_block<model>);
    own->instructions += block_weight * static_cast<const plugin_branches::Block*>(block)->counted;
    model(vcpu, block);
}
using plugin_branches::Ending;
constexpr plugin_branches::BlockCallbacks counting_branch_callbacks{
    on_branch_block<plugin_branches::on_block<Ending::to_settle>>,
    on_branch_block<plugin_branches::on_block<Ending::settled>>,
    on_branch_block<plugin_branches::on_block<Ending::no_branch>>};
#else
void count_block(qemu_plugin_tb* tb, std::size_t n, plugin_cache::Block*, plugin_branches::Block*) {
    qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64,
                                                      qemu_plugin_u64{board, offsetof(Counts, instructions)},
                                                      block_weight * n);
}
void count_instruction(qemu_plugin_insn* insn) {
    qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                        qemu_plugin_u64{board, offsetof(Counts, instructions)},
                                                        block_weight);
}
#endif

/// QEMU 7.2's x86 translator takes an instruction after a block's first that would end past the block's first page
/// out of the block again (it starts the next block), but the plugin API still lists it: the block counted one
/// instruction it never ran, at every execution (one more per pass of a loop whose block ends there; and a change
/// elsewhere that moves code moves which blocks end there). A last instruction that may be such a one is counted by
/// its own execution callback, which QEMU drops with the instruction when it took it out.
bool may_be_taken_out(qemu_plugin_tb* tb, std::size_t n) {
#if defined(PMC_PLUGIN_FAULT_PAGE_CROSSING)
    return false; // the planted fault: every listed instruction counted
#else
    if (!target_x86 || n < 2) return false;
    const std::uint64_t first_page_end = (qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0)) | 4095) + 1;
    return qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, n - 1)) + 14 >= first_page_end; // up to 15 bytes
#endif
}
void on_block_ending_in_rep(unsigned int vcpu, void* block) {
    const auto* b = static_cast<const RepBlock*>(block);
    Counts& v = counts_of(vcpu);
    v.instructions += block_weight * b->insns;
    v.rep_at = b->rep_at;
    v.count_at_rep = v.instructions;
}
/// A block of just a rep string instruction: its first execution counts; its next iterations, which follow the
/// block that ended with it with no other block between (the count is as that block left it), do not.
void on_rep_alone(unsigned int vcpu, void* block) {
    const auto* b = static_cast<const RepBlock*>(block);
    Counts& v = counts_of(vcpu);
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

const RepBlock* rep_block(std::uint64_t start, std::uint64_t insns, std::uint64_t rep_at) {
    std::lock_guard<std::mutex> hold(rep_blocks_lock);
#if defined(PMC_PLUGIN_FAULT_REP_KEY)
    auto& slot = rep_blocks[{start, insns, 0}]; // keyed by start and length only: the old rep address survives
#else
    auto& slot = rep_blocks[{start, insns, rep_at}];
#endif
    if (!slot) slot.reset(new RepBlock{insns, rep_at});
    return slot.get();
}

void on_translate(qemu_plugin_id_t, struct qemu_plugin_tb* tb) {
    const std::size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) return;
#if PMC_PLUGIN_API == 1
    static constexpr plugin_cache::BlockCallbacks cached_block_callbacks = plugin_cache::block_callbacks<CachedBlockCall>();
    // With both models on, the cache model's call counts the block, and the branch model's adds nothing.
    const plugin_branches::BlockCallbacks& branch_callbacks =
        plugin_cache::settings.on ? plugin_branches::model_callbacks : counting_branch_callbacks;
#else
    const plugin_cache::BlockCallbacks& cached_block_callbacks = plugin_cache::plain_block_callbacks;
    const plugin_branches::BlockCallbacks& branch_callbacks = plugin_branches::model_callbacks;
#endif
    plugin_cache::Block* cached = nullptr; // (pmc emulate --cache)
    if (plugin_cache::settings.on)
        cached = plugin_cache::translate(tb, n, target_x86, cached_block_callbacks, may_be_taken_out(tb, n));
    plugin_branches::Block* branched = nullptr; // (pmc emulate --branches)
    if (plugin_branches::settings.on)
        branched = plugin_branches::translate(tb, n, may_be_taken_out(tb, n), branch_callbacks);
    if (!guest_base_known.load(std::memory_order_acquire)) {
        const qemu_plugin_insn* first = qemu_plugin_tb_get_insn(tb, 0);
        const auto host = reinterpret_cast<std::intptr_t>(qemu_plugin_insn_haddr(first));
        guest_base.store(host - static_cast<std::intptr_t>(qemu_plugin_insn_vaddr(first)), std::memory_order_relaxed);
        guest_base_known.store(true, std::memory_order_release);
    }
    if (target_x86) {
        const qemu_plugin_insn* last = qemu_plugin_tb_get_insn(tb, n - 1);
        // The instruction's bytes in the program's memory (user mode): the same call in every API version.
        if (is_rep_string(static_cast<const unsigned char*>(qemu_plugin_insn_haddr(last)), qemu_plugin_insn_size(last))) {
            const std::uint64_t at = qemu_plugin_insn_vaddr(last);
            auto* block = const_cast<RepBlock*>(rep_block(qemu_plugin_tb_vaddr(tb), n, at));
            qemu_plugin_register_vcpu_tb_exec_cb(tb, n == 1 ? on_rep_alone : on_block_ending_in_rep,
                                                 QEMU_PLUGIN_CB_NO_REGS, block);
            return;
        }
    }
    if (may_be_taken_out(tb, n)) {
        count_block(tb, n - 1, cached, branched);
        count_instruction(qemu_plugin_tb_get_insn(tb, n - 1));
        return;
    }
    count_block(tb, n, cached, branched);
}

// ---- guest memory, read and written without trusting the program's pointers ----

/// Host address of a guest address (user mode maps guest memory at a fixed offset).
std::uintptr_t host_address(std::uint64_t guest_address) {
    return static_cast<std::uintptr_t>(guest_base.load(std::memory_order_relaxed) +
                                       static_cast<std::intptr_t>(guest_address));
}

/// This process's pid, for process_vm_readv/writev (getpid() is a system call; a fork child sets it again).
pid_t own_pid = 0;
/// process_vm_readv/writev refused here (a container's seccomp profile may deny them): plain copies then.
std::atomic<bool> checked_copies{true};

/// Copies into or out of the program's memory through the kernel, which checks the address: a bad pointer in a
/// request gets EFAULT, where a plain copy would crash QEMU. Returns the bytes copied.
std::size_t copy_guest(std::uint64_t guest_address, void* here, std::size_t size, bool to_guest) {
    if (checked_copies.load(std::memory_order_relaxed)) {
        iovec local{here, size}, remote{reinterpret_cast<void*>(host_address(guest_address)), size};
        const ssize_t n = to_guest ? ::process_vm_writev(own_pid, &local, 1, &remote, 1, 0)
                                   : ::process_vm_readv(own_pid, &local, 1, &remote, 1, 0);
        if (n >= 0) return static_cast<std::size_t>(n);
        if (errno != EPERM && errno != ENOSYS) return 0;
        checked_copies.store(false, std::memory_order_relaxed);
    }
    void* guest = reinterpret_cast<void*>(host_address(guest_address));
    if (to_guest) std::memcpy(guest, here, size);
    else std::memcpy(here, guest, size);
    return size;
}

/// Bumped at every system call that may unmap or protect the program's memory (mmap, munmap, mprotect, mremap, brk,
/// shmdt): a page a thread's read was checked on stays writable until then, and the next reads there are plain
/// copies (a checked copy costs a host system call, 15 % of an emulated profiler example's CPU time).
std::atomic<std::uint64_t> mappings_changed{0};
long mapping_calls[6] = {-1, -1, -1, -1, -1, -1};

/// Host memory of a program's variable of `size` bytes (at most a page) that this thread checked before, or null:
/// a page checked once per change of the program's mappings, per thread, is then copied plainly.
struct CheckedPage {
    std::uint64_t page = ~std::uint64_t{0}, at = 0;
};
thread_local CheckedPage checked_page;
void* checked_host(std::uint64_t guest_address, std::size_t size) {
    const std::uint64_t page = guest_address & ~std::uint64_t{4095};
    if (page == checked_page.page && checked_page.at == mappings_changed.load(std::memory_order_acquire) &&
        (guest_address & 4095) + size <= 4096)
        return reinterpret_cast<void*>(host_address(guest_address));
    return nullptr;
}
/// Writes `size` bytes into the program's variable: checked (through the kernel) once per page and mapping change.
bool write_guest(std::uint64_t guest_address, const void* data, std::size_t size) {
    if (void* host = checked_host(guest_address, size)) {
        std::memcpy(host, data, size);
        return true;
    }
    const std::uint64_t now = mappings_changed.load(std::memory_order_acquire);
    if (copy_guest(guest_address, const_cast<void*>(data), size, true) != size) return false;
    checked_page.page = (guest_address & 4095) + size <= 4096 ? guest_address & ~std::uint64_t{4095} : ~std::uint64_t{0};
    checked_page.at = now;
    return true;
}
/// Reads `size` bytes of the program's variable (a page this thread checked: plainly).
bool read_guest(std::uint64_t guest_address, void* data, std::size_t size) {
    if (const void* host = checked_host(guest_address, size)) {
        std::memcpy(data, host, size);
        return true;
    }
    return copy_guest(guest_address, data, size, false) == size;
}
/// Writes a read's count into the program's variable.
bool write_count(std::uint64_t guest_address, std::uint64_t count) {
    return write_guest(guest_address, &count, sizeof count);
}

/// Says once that a request named memory the program cannot write, and ignores it.
void bad_request(std::uint64_t guest_address) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        std::fprintf(stderr, "pmc's QEMU plugin: a request named address 0x%llx, which is not writable memory of the "
                             "program: ignored (the program's counter reads nothing there)\n",
                     static_cast<unsigned long long>(guest_address));
}

/// A NUL-ended string of the program's, or "" if it cannot be read.
std::string guest_string(std::uint64_t guest_address, std::size_t max = 4096) {
    std::string s;
    char chunk[256];
    while (s.size() < max) {
        // Up to the page's end at most: the next page may not be mapped.
        const std::size_t to_page_end = 4096 - (guest_address + s.size()) % 4096;
        const std::size_t want = std::min(sizeof chunk, to_page_end);
        const std::size_t got = copy_guest(guest_address + s.size(), chunk, want, false);
        if (got == 0) return "";
        const void* nul = std::memchr(chunk, '\0', got);
        if (nul) return s.append(chunk, static_cast<std::size_t>(static_cast<const char*>(nul) - chunk));
        s.append(chunk, got);
    }
    return "";
}

// ---- the process's total, for pmc count --emulate and pmc emulate (report=FILE) ----
//
// The lines, appended to FILE by every emulated process (O_APPEND, one write each):
//   pid N started                 an emulated process began (QEMU started, or a fork)
//   pid N instructions M          it ended: M instructions since it started (or since its last line)
//   pid N exec instructions M     it executes another program: M so far; this image ends if the execve succeeds
//   pid N exec-failed             that execve failed: the process goes on
//   pid N native REASON<TAB>PATH  the program that execve starts will run natively, uncounted (a static binary, an
//                                 environment without pmc's preload library); the preload library writes one
//                                 too when a re-execution under QEMU finds no plugin
std::mutex totals_lock;
// Both changed under slots_lock, and read with no lock where one thread lives (pmc_progress::note): atomic, since a
// thread may start and exit while that one reads them (a race ThreadSanitizer found in
// tests/models/plugin_progress_threads.cpp). Relaxed loads and stores: plain moves on x86-64 and AArch64.
std::atomic<std::uint64_t> exited_total{0};  ///< instructions of this process's threads that have exited
std::atomic<std::uint64_t> fork_baseline{0}; ///< a fork child: what its thread had counted in the parent
std::string report_path;
thread_local unsigned this_vcpu = 0; ///< the vCPU of the host thread running it, set at each system call

void on_vcpu_init(qemu_plugin_id_t, unsigned int vcpu) {
    std::lock_guard<std::mutex> hold(slots_lock);
    thread_started(vcpu);
    live_threads.store(live_thread_count(), std::memory_order_release);
}
void on_vcpu_exit(qemu_plugin_id_t, unsigned int vcpu) {
    std::lock_guard<std::mutex> hold(slots_lock);
    exited_total.store(exited_total.load(std::memory_order_relaxed) + thread_ended(vcpu), std::memory_order_relaxed);
    live_threads.store(live_thread_count(), std::memory_order_release);
}

plugin_files::AppendFile report_file; ///< report_path, with a reserve descriptor (append_file.hpp)
int report_error = 0;                 ///< the errno of the last line that could not be written, or 0

/// Appends a line to the report; false, said on stderr with the reason, if it cannot.
bool append_line(const char* line, int n) {
    if (report_path.empty()) return true;
    const int err = report_file.append(line, static_cast<std::size_t>(n));
    if (err == 0) return true;
    report_error = err;
    std::fprintf(stderr, "pmc's QEMU plugin: cannot write to %s: %s\n", report_path.c_str(), std::strerror(err));
    return false;
}

/// "pid N started", so that a process that starts and never reports (killed) is known to be missing.
void say_started() {
    char line[64];
    append_line(line, std::snprintf(line, sizeof line, "pid %ld started\n", static_cast<long>(own_pid)));
}

void open_progress();
void note_progress();
void note_model_progress();
pmc_progress::Progress* progress = nullptr; ///< this process's progress page (below), or none

/// In a fork child (the guest's fork is the host's): only the forking thread lives on, and what it counted before
/// belongs to the parent's report.
void in_fork_child() {
    own_pid = ::getpid();
    exited_total.store(0, std::memory_order_relaxed);
    keep_only(this_vcpu);
    live_threads.store(live_thread_count(), std::memory_order_release);
    fork_baseline.store(instructions_of(this_vcpu), std::memory_order_relaxed);
    new (&totals_lock) std::mutex; // they may have been held by a thread that is gone
    new (&slots_lock) std::mutex;
    if (plugin_cache::settings.on) plugin_cache::in_fork_child();
    plugin_sampling::in_fork_child();
    if (plugin_branches::settings.on) plugin_branches::in_fork_child();
    say_started();
    open_progress();
}

/// "pid N [exec ]instructions M", what this process executed since it started or last reported: at its exit, and
/// at an execve (QEMU runs the new program natively: this process image, and the plugin, end there; the preload
/// library starts the program under QEMU again, which reports its own).
void report_total(const char* what) {
    if (report_path.empty()) return;
    // The models' counts on the progress page first (the report lines take them): kept if a line cannot be written.
    if (progress && (plugin_cache::settings.on || plugin_branches::settings.on)) note_model_progress();
    bool written = true;
    if (plugin_cache::settings.on) { // the cache counts first: a process's lines end with its instructions
        const std::string cache = plugin_cache::report_line(static_cast<long>(own_pid));
        written &= append_line(cache.data(), static_cast<int>(cache.size()));
    }
    if (!plugin_sampling::whole.dir.empty()) { // pmc sample --emulate: every thread's samples written first
        const std::string loads = plugin_sampling::report_line(static_cast<long>(own_pid));
        written &= append_line(loads.data(), static_cast<int>(loads.size()));
    }
    if (plugin_branches::settings.on) {
        const std::string branches = plugin_branches::report_line(static_cast<long>(own_pid));
        written &= append_line(branches.data(), static_cast<int>(branches.size()));
    }
    std::uint64_t since = 0;
    {
        std::lock_guard<std::mutex> hold(slots_lock); // (the progress file reads these at other threads' calls)
        const std::uint64_t total = exited_total.load(std::memory_order_relaxed) + live_threads_total();
        since = total - fork_baseline.load(std::memory_order_relaxed);
        fork_baseline.store(total, std::memory_order_relaxed); // an execve that fails, and the process goes on: its exit reports only what follows
    }
    char line[96];
    written &= append_line(line, std::snprintf(line, sizeof line, "pid %ld %sinstructions %llu\n",
                                               static_cast<long>(own_pid), what, static_cast<unsigned long long>(since)));
    if (!written && progress) { // the page keeps the total and why its line is missing: pmc blames no signal then
        progress->instructions.store(since, std::memory_order_relaxed);
        progress->report_errno.store(static_cast<std::uint64_t>(report_error), std::memory_order_relaxed);
        return;
    }
    note_progress(); // (0 again: what follows an execve that fails)
}
void at_exit(qemu_plugin_id_t, void*) { report_total(""); }

// ---- the count so far, for a process that a signal ends (progress_file.hpp) ----
//
// QEMU before 8.0 calls no exit callback when a signal ends the program, so at_exit above never reports it. At each
// system call the process's total so far is stored in DIR/PID.progress (DIR: the report file's), mapped shared: plain
// stores that the kernel keeps when the process dies. pmc reads it for a process that never reported, as a partial
// count: exact up to that call for a single thread (a system call ends its block), other threads wherever they were.
/// Maps this process's progress file (a fork child: its own, the parent's mapping dropped first). Without it (no
/// report file, or it cannot be made) nothing is kept, and pmc says that the process left no count.
void open_progress() {
    if (progress) ::munmap(progress, sizeof *progress);
    progress = nullptr;
    if (report_path.empty()) return;
    const std::string path = pmc_progress::path_for(report_path, static_cast<long>(own_pid));
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (::ftruncate(fd, sizeof(pmc_progress::Progress)) == 0) {
        void* at = ::mmap(nullptr, sizeof(pmc_progress::Progress), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (at != MAP_FAILED) {
            progress = new (at) pmc_progress::Progress{};
            progress->magic = pmc_progress::magic;
        }
    }
    ::close(fd);
}

/// The models' counts so far, as the process's report lines would give them (each model's registry lock and its
/// threads' locks, uncontended at a system call of a single-threaded process). Several threads' calls at once store
/// with no lock: relaxed atomic stores, no data race (tests/models/plugin_progress_threads.cpp, under TSan); the page
/// may then hold fields of two of those calls, each a count so far.
void note_model_progress() {
    std::uint64_t models = 0;
    if (plugin_cache::settings.on) {
        const auto c = plugin_cache::counts_so_far();
        for (int i = 0; i < pmc_progress::cache_fields; ++i)
            progress->cache[i].store(c[static_cast<std::size_t>(i)], std::memory_order_relaxed);
        models |= pmc_progress::has_cache;
    }
    if (plugin_branches::settings.on) {
        const auto b = plugin_branches::counts_so_far();
        for (int i = 0; i < pmc_progress::branch_fields; ++i)
            progress->branches[i].store(b[static_cast<std::size_t>(i)], std::memory_order_relaxed);
        models |= pmc_progress::has_branches;
    }
    progress->models.store(models, std::memory_order_relaxed);
}

/// At each system call (and after each report): the process's total so far, as its exit line would give it.
std::uint64_t since_baseline(std::uint64_t total) { return total - fork_baseline.load(std::memory_order_relaxed); }

void note_progress() {
    if (!progress) return;
    if (plugin_cache::settings.on || plugin_branches::settings.on) note_model_progress();
    // The calling thread alone: its own count is the live total, read with no lock (pmc_progress::note says why).
    // (A thread the plugin is not yet told of is in neither total, as before.)
    pmc_progress::note(
        *progress, live_threads, slots_lock,
        [] { return since_baseline(exited_total.load(std::memory_order_relaxed) + instructions_of(this_vcpu)); },
        [] { return since_baseline(exited_total.load(std::memory_order_relaxed) + live_threads_total()); });
}

/// The guest's execve and execveat system call numbers.
long execve_number = -1, execveat_number = -1;

/// Why the program an execve starts will run natively, outside the emulator, or "" if it will be emulated (or
/// the execve will fail). QEMU runs every execve natively; the preload library, loaded by every dynamically
/// linked program whose environment keeps it in LD_PRELOAD, brings it back under QEMU.
std::string runs_natively(const std::string& path, std::uint64_t envp) {
    std::string program = path;
    for (int depth = 0; depth < 2; ++depth) {
        const int fd = ::open(program.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return ""; // the execve fails too
        unsigned char head[4096];
        const ssize_t got = ::read(fd, head, sizeof head);
        struct stat st {};
        ::fstat(fd, &st);
        ::close(fd);
        if (got >= 2 && head[0] == '#' && head[1] == '!') { // its interpreter is what runs
            std::string line(reinterpret_cast<const char*>(head) + 2, static_cast<std::size_t>(got) - 2);
            line = line.substr(0, line.find('\n'));
            const auto b = line.find_first_not_of(" \t");
            if (b == std::string::npos) return "";
            program = line.substr(b, line.find_first_of(" \t\r", b) - b);
            continue;
        }
        if (got < static_cast<ssize_t>(sizeof(Elf64_Ehdr)) || std::memcmp(head, ELFMAG, SELFMAG) != 0) return "";
        Elf64_Ehdr eh;
        std::memcpy(&eh, head, sizeof eh);
        const std::uint16_t ours = target_x86 ? EM_X86_64 : EM_AARCH64;
        if (head[EI_CLASS] != ELFCLASS64 || eh.e_machine != ours)
            return "not a 64-bit " + std::string(target_name) + " program (another emulator, or none, runs it)";
        bool dynamic = false;
        for (unsigned i = 0; i < eh.e_phnum; ++i) {
            const std::uint64_t off = eh.e_phoff + std::uint64_t{i} * sizeof(Elf64_Phdr);
            if (off + sizeof(Elf64_Phdr) > static_cast<std::uint64_t>(got)) break;
            Elf64_Phdr ph;
            std::memcpy(&ph, head + off, sizeof ph);
            if (ph.p_type == PT_INTERP) dynamic = true;
        }
        if (!dynamic) return "statically linked: it loads no preload library";
        if (st.st_mode & (S_ISUID | S_ISGID)) return "set-user-ID or set-group-ID: the loader ignores LD_PRELOAD";
        break;
    }
    // Its environment must keep pmc's library in LD_PRELOAD.
    for (int i = 0; i < 100000; ++i) {
        std::uint64_t entry = 0;
        if (copy_guest(envp + 8 * static_cast<std::uint64_t>(i), &entry, sizeof entry, false) != sizeof entry) return "";
        if (entry == 0) break;
        const std::string var = guest_string(entry, 65536);
        if (var.rfind("LD_PRELOAD=", 0) == 0 && var.find("libpmc-emulate-preload") != std::string::npos) return "";
    }
    return "its environment drops pmc's LD_PRELOAD: env -i, or a cleaned environment";
}

void on_execve(int64_t num, std::uint64_t a1, std::uint64_t a2, std::uint64_t a3, std::uint64_t a5) {
    if (report_path.empty()) return;
    std::string path;
    std::uint64_t envp = a3;
    if (num == execve_number) {
        path = guest_string(a1);
    } else { // execveat(dirfd, path, argv, envp, flags)
        path = guest_string(a2);
        envp = 0; // (a4, not passed on by this callback's caller)
        const auto dirfd = static_cast<int>(a1);
        if (path.empty() && (a5 & AT_EMPTY_PATH)) path = "/proc/self/fd/" + std::to_string(dirfd);
        else if (!path.empty() && path[0] != '/' && dirfd != AT_FDCWD)
            path = "/proc/self/fd/" + std::to_string(dirfd) + "/" + path;
    }
    const std::string why = path.empty() ? "" : runs_natively(path, envp);
    if (why.empty()) return;
    std::string line = "pid " + std::to_string(own_pid) + " native " + why + "\t" + path + "\n";
    append_line(line.data(), static_cast<int>(line.size()));
}

// ---- what QEMU's user mode refuses, said once per process ----
//
// QEMU refuses prctl(PR_SET_SECCOMP) (EINVAL) and seccomp(2) (ENOSYS), so that no guest filter can block the system
// calls QEMU itself makes: a sandboxing program then runs without its sandbox, or takes its error path, silently.
// clone3 is ENOSYS too, but glibc tries it for every thread and posix_spawn and falls back to clone at once: it is
// named only when the thread's next system call is not that clone (the program did not fall back). Said once per
// process image, on the program's stderr; a fork child of a process that said it stays quiet.
struct RefusedCalls {
    long seccomp = -1, prctl = -1, clone3 = -1, clone = -1;
};
RefusedCalls refused_calls;
std::atomic<bool> said_seccomp{false}, said_clone3{false};
thread_local bool clone3_refused = false; ///< this thread's last system call was a clone3 that QEMU refused

void say_refused(const char* what) {
    char name[64] = "?";
    const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC); // (the preload library names it after the program)
    if (fd >= 0) {
        const ssize_t n = ::read(fd, name, sizeof name - 1);
        name[n > 0 ? n - (name[n - 1] == '\n') : 0] = '\0';
        ::close(fd);
    }
    std::fprintf(stderr, "pmc emulate: %s (pid %ld) %s\n", name, static_cast<long>(own_pid), what);
}

/// Before each system call.
void note_refused_call(int64_t num, std::uint64_t a1) {
    if (clone3_refused) {
        clone3_refused = false;
        if (num != refused_calls.clone && !said_clone3.exchange(true))
            say_refused("called clone3, which QEMU's user mode does not implement (ENOSYS), and did not fall back to "
                        "clone as glibc does: the thread or process it asked for was not created");
    }
    const bool prctl_seccomp = num == refused_calls.prctl && a1 == 22; // PR_SET_SECCOMP
    if ((prctl_seccomp || num == refused_calls.seccomp) && !said_seccomp.exchange(true))
        say_refused(prctl_seccomp
                        ? "asked for seccomp with prctl(PR_SET_SECCOMP), which QEMU's user mode refuses (EINVAL) so that "
                          "no filter blocks QEMU's own system calls: under the emulator it runs without its sandbox, or "
                          "takes its error path. Test the sandbox natively (docs/emulated-pmu.md, Limits)."
                        : "called seccomp(2), which QEMU's user mode does not implement (ENOSYS) so that no filter "
                          "blocks QEMU's own system calls: under the emulator it runs without its sandbox, or takes its "
                          "error path. Test the sandbox natively (docs/emulated-pmu.md, Limits).");
}
/// After each system call that returns.
void note_refused_result(int64_t num, int64_t ret) {
    if (num == refused_calls.clone3 && ret == -ENOSYS) clone3_refused = true;
}

/// A load-sampling request (plugin_sampling.hpp): the request read from the program, answered, the records written
/// into its buffer, the request's answer written back.
void answer_sampler(proto::Op op, std::uint64_t at) {
    proto::SamplerRequest r;
    if (!read_guest(at, &r, sizeof r)) return bad_request(at);
    thread_local std::vector<unsigned char> records;
    plugin_sampling::handle(op, r, plugin_cache::settings.on, records);
    if (op == proto::Op::sampler_drain && !records.empty() &&
        copy_guest(r.buffer, records.data(), records.size(), true) != records.size()) {
        bad_request(r.buffer);
        r.buffer_size = 0;
    }
    if (!write_guest(at, &r, sizeof r)) bad_request(at);
}

void on_syscall(qemu_plugin_id_t, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                uint64_t a4, uint64_t a5, uint64_t a6, uint64_t, uint64_t) {
    this_vcpu = vcpu;
    note_refused_call(num, a1);
    plugin_sampling::mapping_call_starts(static_cast<long>(num), a1, a2, a3, a4, a5, a6); // (pmc sample --emulate)
    plugin_sampling::signal_call_starts(static_cast<long>(num), a1, a2, a3); // (its samples kept before a fatal signal)
    if (plugin_cache::settings.on) plugin_cache::at_syscall();
    if (plugin_branches::settings.on) plugin_branches::at_syscall();
    note_progress();
    if (num == execve_number || num == execveat_number) {
        on_execve(num, a1, a2, num == execve_number ? a3 : a4, a5);
        report_total("exec ");
        return;
    }
    for (long call : mapping_calls)
        if (num == call) mappings_changed.fetch_add(1, std::memory_order_acq_rel);
    if (num != proto::syscall_number || a1 != proto::magic || a3 == 0) return;
    if (a2 == static_cast<std::uint64_t>(proto::Op::write_samples)) {
        plugin_sampling::write_before_death(); // (a caught fault's handler left the default action: death follows)
    } else if (a2 == static_cast<std::uint64_t>(proto::Op::read)) {
#if defined(PMC_PLUGIN_FAULT_SWAP)
        if (known_vcpu(vcpu ^ 1)) vcpu ^= 1; // hands a thread another thread's count
#endif
        if (!write_count(a3, instructions_of(vcpu))) bad_request(a3);
    } else if (a2 == static_cast<std::uint64_t>(proto::Op::read_events)) {
        // Every code in the program's array replaced by this thread's count, all at this system call: the cache
        // model has been fed every access the thread made before it (QEMU calls a memory callback right after
        // its access, and plugin_cache::at_syscall above completed the last one).
        std::uint64_t values[proto::max_events];
        const std::uint64_t n = a4;
        if (n == 0 || n > proto::max_events || !read_guest(a3, values, n * sizeof values[0])) {
            bad_request(a3);
            return;
        }
        for (std::uint64_t i = 0; i < n; ++i)
            values[i] = values[i] == static_cast<std::uint64_t>(proto::Event::instructions) ? instructions_of(vcpu)
                        : plugin_branches::settings.on && proto::is_branch_event(values[i])
                            ? plugin_branches::modelled_count(values[i])
                        : plugin_cache::settings.on && values[i] < proto::event_count && !proto::is_branch_event(values[i])
                            ? plugin_cache::modelled_count(values[i])
                            : ~std::uint64_t{0};
        if (!write_guest(a3, values, n * sizeof values[0])) bad_request(a3);
    } else if (a2 == static_cast<std::uint64_t>(proto::Op::cache_config)) {
        proto::CacheConfig c{};
        if (plugin_cache::settings.on) {
            const auto put = [](std::uint32_t (&to)[3], const pmc_model::CacheGeometry& g) {
                to[0] = g.size, to[1] = g.assoc, to[2] = g.line;
            };
            const pmc_model::CacheConfig& m = plugin_cache::settings.config;
            put(c.i1, m.i1);
            put(c.d1, m.d1);
            if (m.l2) put(c.l2, *m.l2);
            put(c.ll, m.ll);
            c.strict_inclusion = m.inclusion == pmc_model::Inclusion::strict ? 1 : 0;
        }
        if (copy_guest(a3, &c, sizeof c, true) != sizeof c) bad_request(a3);
    } else if (a2 >= static_cast<std::uint64_t>(proto::Op::sampler_open) &&
               a2 <= static_cast<std::uint64_t>(proto::Op::sampler_start)) {
        answer_sampler(static_cast<proto::Op>(a2), a3); // plugin_sampling.hpp
    } else if (a2 == static_cast<std::uint64_t>(proto::Op::hello)) {
        proto::Hello hello{};
        hello.protocol = proto::protocol_version;
        hello.flags = (plugin_cache::settings.on ? proto::hello_cache_model | proto::hello_load_sampling : 0) |
                      (plugin_branches::settings.on ? proto::hello_branch_model : 0);
        std::memcpy(hello.target, target_name, sizeof hello.target);
        hello.reply = proto::hello_reply;
        if (copy_guest(a3, &hello, sizeof hello, true) != sizeof hello) bad_request(a3);
    }
}

/// After each system call that returns: an execve that failed (one that succeeds never returns to QEMU), the process
/// going on; a mapping call's result (pmc sample --emulate).
void on_syscall_return(qemu_plugin_id_t, unsigned int, int64_t num, int64_t ret) {
    note_refused_result(num, ret);
    plugin_sampling::mapping_call_returns(static_cast<long>(num), ret);
    if ((num == execve_number || num == execveat_number) && ret < 0) {
        char line[64];
        append_line(line, std::snprintf(line, sizeof line, "pid %ld exec-failed\n", static_cast<long>(own_pid)));
    }
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) int qemu_plugin_version = PMC_PLUGIN_API;

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info,
                                                               int argc, char** argv) {
    if (info->system_emulation) {
        qemu_plugin_outs("pmc's emulated PMU runs under QEMU user mode only (qemu-x86_64, qemu-aarch64), "
                         "not qemu-system-*\n");
        return -1;
    }
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "pad=", 4) == 0) continue; // pmc emulate's filler: one length whatever the rest
        if (std::strncmp(argv[i], "report=", 7) == 0 && argv[i][7]) {
            report_path = argv[i] + 7;
            report_file.set_path(report_path);
            continue;
        }
        std::string error;
        if (plugin_cache::parse_argument(argv[i], error) || plugin_branches::parse_argument(argv[i], error) ||
            plugin_sampling::parse_argument(argv[i], error)) {
            if (error.empty()) continue;
            std::fprintf(stderr, "pmc's QEMU plugin: %s\n", error.c_str());
            return -1;
        }
        std::fprintf(stderr, "pmc's QEMU plugin: unknown argument '%s' (it takes report=FILE, cache=on, "
                             "i1=, d1=, l2=, ll=SIZE:ASSOC:LINE, inclusion=strict, branches=on, samples=DIR, "
                             "sample_period=N, sample_ldlat=N)\n", argv[i]);
        return -1;
    }
    if (const std::string why = plugin_sampling::check_arguments(plugin_cache::settings.on); !why.empty()) {
        std::fprintf(stderr, "pmc's QEMU plugin: %s\n", why.c_str());
        return -1;
    }
    if (const std::string why = plugin_cache::start(); !why.empty()) {
        std::fprintf(stderr, "pmc's QEMU plugin: the cache model cannot start: %s\n", why.c_str());
        return -1;
    }
    plugin_cache::host_of = [](std::uint64_t guest_address) -> const void* { // (a repe/repne's last elements)
        return reinterpret_cast<const void*>(host_address(guest_address));
    };
    std::snprintf(target_name, sizeof target_name, "%s", info->target_name ? info->target_name : "?");
    if (const std::string why = plugin_branches::start(target_name); !why.empty()) {
        std::fprintf(stderr, "pmc's QEMU plugin: the branch model cannot start: %s\n", why.c_str());
        return -1;
    }
    target_x86 = std::strcmp(target_name, "x86_64") == 0 || std::strcmp(target_name, "i386") == 0;
    if (std::strcmp(target_name, "x86_64") == 0) {
        execve_number = 59, execveat_number = 322;
        const long mapping[] = {9, 11, 10, 25, 12, 67}; // mmap munmap mprotect mremap brk shmdt
        std::copy(std::begin(mapping), std::end(mapping), mapping_calls);
        refused_calls = {317, 157, 435, 56}; // seccomp prctl clone3 clone
        plugin_sampling::mapping_call_numbers = {9, 11, 25, 12}; // mmap munmap mremap brk
        plugin_sampling::signal_call_numbers = {62, 200, 234};   // kill tkill tgkill
    }
    if (std::strcmp(target_name, "aarch64") == 0) {
        execve_number = 221, execveat_number = 281;
        const long mapping[] = {222, 215, 226, 216, 214, 197};
        std::copy(std::begin(mapping), std::end(mapping), mapping_calls);
        refused_calls = {277, 167, 435, 220};
        plugin_sampling::mapping_call_numbers = {222, 215, 216, 214};
        plugin_sampling::signal_call_numbers = {129, 130, 131};
    }
    if (!start_counting()) {
        std::fprintf(stderr, "pmc's QEMU plugin: QEMU could not make its per-vCPU counts\n");
        return -1;
    }
    own_pid = ::getpid();
    say_started();
    open_progress();
    if (!plugin_sampling::whole.dir.empty()) { // (pmc sample --emulate)
        plugin_sampling::name_own_files();
        plugin_sampling::mark_maps("start");
    }
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
    qemu_plugin_register_atexit_cb(id, at_exit, nullptr);
    ::pthread_atfork(nullptr, nullptr, in_fork_child);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_return);
    return 0;
}

} // extern "C"
