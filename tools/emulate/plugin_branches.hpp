// SPDX-License-Identifier: MIT
// plugin_branches.hpp: `pmc emulate --branches` inside pmc's QEMU plugin (included by qemu_plugin.cpp alone). It
// counts the branch instructions each guest thread executes and feeds that thread's own branch predictor
// (model/branch_model.hpp, Cachegrind's), so that a thread's counts never depend on how threads interleave.
//
// Nothing here runs unless the plugin is given branches=on. With it:
//   - at translation, each block's last instruction is decoded (x86-64, AArch64): a conditional branch, a direct
//     jump or call, an indirect jump or call, a return, or none (QEMU ends a block at every branch, so a block holds
//     at most one, last). Its fall-through address is its address plus its length;
//   - at each execution of a block, one call: it first settles the branch the thread's previous block ended with,
//     from where execution went (this block's start: a conditional branch was taken unless this is its fall-through;
//     an indirect one went here), as QEMU's contrib/plugins/cflow.c learns branch outcomes; then it counts this
//     block's branch and leaves it to be settled by the next block;
//   - a system call starts no block of its own and ends the block it is in, which holds no branch: a count read
//     there has every branch before it settled, and the thread's counts are published there for the process's
//     total (plugin_threads.hpp; also at its exit, and whenever its count of conditional, of indirect or of other
//     branches reaches a multiple of 1,024).
// What is counted (docs/emulated-pmu.md): branch-instructions = every branch executed (conditional or not, jumps,
// calls, returns: perf's meaning); Bc, Bcm = conditional branches and the predictor's misses on them; Bi, Bim =
// indirect jumps and calls (not returns: Cachegrind assumes a perfect return stack) and misses; branch-misses =
// Bcm + Bim.
#pragma once

#include "model/branch_decode.hpp"
#include "model/branch_model.hpp"
#include "plugin_threads.hpp"
#include "qemu_plugin_api.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace plugin_branches {

struct Settings {
    bool on = false;
    unsigned zero_low_bits = 0; ///< what the predictor shifts instruction addresses by: 0 x86-64, 2 AArch64
    bool x86 = true;
};
inline Settings settings;

/// Takes one plugin argument if it is this model's: true if it was (then `error` says what is wrong, or is "").
inline bool parse_argument(const char* arg, std::string& error) {
    if (std::strncmp(arg, "branches=", 9) != 0) return false;
    const std::string value = arg + 9;
    if (value != "on" && value != "off") error = "branches=" + value + ": on or off";
    settings.on = value == "on";
    return true;
}

using Kind = pmc_model::BranchKind;
using pmc_model::decode_aarch64;
using pmc_model::decode_x86;

/// A block, as its executions need it.
struct Block {
    std::uint64_t start; ///< its first instruction's address: where the previous block's branch went
    std::uint64_t pc;    ///< its last instruction's address
    std::uint64_t next;  ///< the address after it: a conditional branch's fall-through
    Kind kind;           ///< what the last instruction is (none: not a branch, or counted by its own call)
    // Precomputed at translation (each_execution picks the call by them):
    std::uint32_t branches;  ///< 1 if it ends with a branch (kind != none), else 0
    const Block* to_settle;  ///< this block if its branch is conditional or indirect (settled by the next block)
    std::uint32_t slot = 0;  ///< the predictor's index bits of `pc` (BranchPredictor::*_slot)
    std::uint64_t counted = 0; ///< plugin API 1: what the block adds to the instruction count (qemu_plugin.cpp)
    void prepare() {
        branches = kind != Kind::none ? 1 : 0;
        to_settle = kind == Kind::conditional || kind == Kind::indirect ? this : nullptr;
        slot = kind == Kind::conditional ? pmc_model::BranchPredictor::conditional_slot(pc, settings.zero_low_bits)
                                         : pmc_model::BranchPredictor::indirect_slot(pc, settings.zero_low_bits);
    }
};
/// What a thread's `pending` points to when its last block left nothing to settle (kind none): the call per block
/// then tests the pending block's kind alone, never a null pointer.
inline const Block nothing_pending{};
/// Kept for the plugin's life: QEMU does not say when it drops a translation.
inline std::mutex blocks_lock;
inline std::vector<std::unique_ptr<Block>> blocks;

// ---- one guest thread's counts ----

/// What a report line says: every branch, and Cachegrind's Bc, Bcm, Bi, Bim.
struct Totals {
    std::uint64_t branches = 0, Bc = 0, Bcm = 0, Bi = 0, Bim = 0;
};

/// One guest thread's predictor, changed by its own thread alone with no lock (a call per block); plugin_threads
/// publishes its counts for the process's total, taken at an exit or an execve while other threads may still run.
struct BranchThread {
    using Counts = Totals;
    pmc_model::BranchPredictor predictor;
    /// The direct jumps and calls and the returns executed: with the predictor's Bc and Bi and the pending branch,
    /// every branch (counted that way, a block whose branch is left to settle adds nothing but `pending`).
    std::uint64_t settled = 0;
    const Block* pending = &nothing_pending; ///< the conditional or indirect branch that ended the last block

    BranchThread() : predictor(settings.zero_low_bits) {}
    /// Nothing in flight: a system call ends a block that holds no branch, so every branch before it is settled.
    void finish() noexcept {}
    /// Every branch instruction executed: settled or not yet.
    std::uint64_t branches() const noexcept {
        const pmc_model::BranchCounts& c = predictor.counts();
        return c.conditional + c.indirect + settled + (pending != &nothing_pending ? 1 : 0);
    }
    void started() noexcept {}
    void exiting() noexcept {}
    Counts counts() const noexcept {
        const pmc_model::BranchCounts& c = predictor.counts();
        return Totals{branches(), c.conditional, c.conditional_misses, c.indirect, c.indirect_misses};
    }
    static void add(Counts& to, const Counts& from) {
        to.branches += from.branches, to.Bc += from.Bc, to.Bcm += from.Bcm, to.Bi += from.Bi, to.Bim += from.Bim;
    }
    static void subtract(Counts& to, const Counts& from) {
        to.branches -= from.branches, to.Bc -= from.Bc, to.Bcm -= from.Bcm, to.Bi -= from.Bi, to.Bim -= from.Bim;
    }
};

/// The threads' predictors (plugin_threads.hpp): this_thread() is a plain TLS load.
using threads = plugin_threads::Registry<BranchThread>;
using ThreadBranches = threads::Thread;

static_assert(ThreadBranches::publish_every == 1024, "a power of two");
/// Whether `count`, one of the thread's counts of a kind of branch just incremented, calls for a publication: every
/// publish_every of each kind (where no count is kept for every branch).
inline bool publication_due(std::uint64_t count) {
    return __builtin_expect((count & (ThreadBranches::publish_every - 1)) == 0, 0);
}

/// Where execution went after the pending conditional branch `b`: to `to`. True if a publication is due.
inline bool settle_conditional(ThreadBranches& t, const Block& b, std::uint64_t to) {
#if defined(PMC_PLUGIN_FAULT_BRANCH_SENSE) // the planted fault (tests/emulate): taken and not taken swapped
    t.predictor.conditional_at(b.slot, to == b.next);
#else
    t.predictor.conditional_at(b.slot, to != b.next);
#endif
    return publication_due(t.predictor.counts().conditional);
}
/// The same for a pending indirect branch.
inline bool settle_indirect(ThreadBranches& t, const Block& b, std::uint64_t to) {
    t.predictor.indirect_at(b.slot, to);
    return publication_due(t.predictor.counts().indirect);
}

/// What a block ends with, as its call per execution needs it: a conditional or indirect branch (to settle at the
/// next block), a direct jump or call or a return (counted, nothing to settle), or no branch.
enum class Ending { to_settle, settled, no_branch };

/// At each execution of a block that ends as `ending`: settles the previous block's branch, then counts this one's.
/// The call is picked at translation (each_execution), so it reads nothing of its block but the start.
template <Ending ending>
void on_block(unsigned int vcpu, void* data);
/// What a thread's `pending` is before its first block: a kind that is never left pending (a direct jump), which
/// sends on_block to on_first_block.
inline Block unmade_pending{};
/// The model of a thread before its first block (start() points its `pending` to unmade_pending): never changed.
inline ThreadBranches unmade_thread;
/// The calling thread's model, or unmade_thread before its first block: on_block tests no pointer, the pending
/// block's kind tells it all (the registry's own pointer is null until then, for the rest of the plugin).
inline __attribute__((tls_model("initial-exec"))) thread_local ThreadBranches* calling_thread = &unmade_thread;
/// A thread's first block: its model made (or found, if a system call made it), then the block as on_block does it
/// (kept out of on_block, which then saves no register: a leaf but for the publication, a tail call).
template <Ending ending>
__attribute__((noinline)) void on_first_block(unsigned int vcpu, void* data) {
    calling_thread = &threads::this_thread();
    on_block<ending>(vcpu, data);
}
/// A block that ends as `ending` has executed (`b`): its branch left to settle at the next block (then counted by
/// the predictor), or counted now if it is a direct jump or call or a return. Then the thread's counts published if
/// `due` or if this count calls for it: last, a tail call, so that the call per block saves no register.
template <Ending ending>
inline void block_executed(ThreadBranches& t, const Block* b, bool due) {
    if (ending == Ending::to_settle) t.pending = b;
    else t.pending = &nothing_pending;
    if (ending == Ending::settled && publication_due(++t.settled)) due = true;
    if (__builtin_expect(due, 0)) t.publish();
}
template <Ending ending>
void on_block(unsigned int vcpu, void* data) {
    const auto* b = static_cast<const Block*>(data);
    ThreadBranches* t = calling_thread;
    const Block& p = *t->pending;
    if (p.kind == Kind::conditional) return block_executed<ending>(*t, b, settle_conditional(*t, p, b->start));
    if (p.kind == Kind::indirect) return block_executed<ending>(*t, b, settle_indirect(*t, p, b->start));
    if (__builtin_expect(p.kind != Kind::none, 0)) return on_first_block<ending>(vcpu, data); // unmade_pending
    block_executed<ending>(*t, b, false);
}

/// The call per execution for each ending: the model's own, or (plugin API 1) qemu_plugin.cpp's, which also add
/// the block's `counted` instructions, so that a block costs one call, not two.
struct BlockCallbacks {
    qemu_plugin_vcpu_udata_cb_t to_settle, settled, no_branch;
};
inline constexpr BlockCallbacks model_callbacks{on_block<Ending::to_settle>, on_block<Ending::settled>,
                                                on_block<Ending::no_branch>};
/// The call for each execution of `b`.
inline qemu_plugin_vcpu_udata_cb_t each_execution(const Block& b, const BlockCallbacks& each = model_callbacks) {
    return b.to_settle ? each.to_settle : b.branches != 0 ? each.settled : each.no_branch;
}

/// The branch of a block whose last listed instruction QEMU 7.2 may take out again (qemu_plugin.cpp's
/// may_be_taken_out): counted by that instruction's own call, which QEMU drops with the instruction. If it was taken
/// out, it starts the next block, which counts it.
inline void on_last_instruction(unsigned int, void* data) {
    const auto* b = static_cast<const Block*>(data);
    ThreadBranches& t = threads::this_thread();
    if (b->to_settle) block_executed<Ending::to_settle>(t, b, false);
    else block_executed<Ending::settled>(t, b, false);
}

/// At translation (n instructions; `last_may_be_taken_out`: see on_last_instruction). The block's call per
/// execution is one of `each` (each_execution). Returns the block that call receives.
inline Block* translate(qemu_plugin_tb* tb, std::size_t n, bool last_may_be_taken_out, const BlockCallbacks& each) {
    qemu_plugin_insn* last = qemu_plugin_tb_get_insn(tb, n - 1);
    auto block = std::make_unique<Block>();
    block->start = qemu_plugin_tb_vaddr(tb);
    block->pc = qemu_plugin_insn_vaddr(last);
    const std::size_t size = qemu_plugin_insn_size(last);
    block->next = block->pc + size;
    const auto* bytes = static_cast<const unsigned char*>(qemu_plugin_insn_haddr(last));
    Kind kind = Kind::none;
    if (settings.x86) kind = decode_x86(bytes, size);
    else if (size == 4) {
        std::uint32_t word;
        std::memcpy(&word, bytes, 4);
        kind = decode_aarch64(word);
    }
    block->kind = kind;
    block->prepare();
    std::unique_ptr<Block> alone; // the branch, counted by its instruction's own call
    if (last_may_be_taken_out && kind != Kind::none) {
        alone = std::make_unique<Block>(*block);
        alone->prepare();
        block->kind = Kind::none;
        block->prepare();
        qemu_plugin_register_vcpu_insn_exec_cb(last, on_last_instruction, QEMU_PLUGIN_CB_NO_REGS, alone.get());
    }
    Block* called = block.get();
    qemu_plugin_register_vcpu_tb_exec_cb(tb, each_execution(*called, each), QEMU_PLUGIN_CB_NO_REGS, called);
    std::lock_guard<std::mutex> hold(blocks_lock);
    blocks.push_back(std::move(block));
    if (alone) blocks.push_back(std::move(alone));
    return called;
}

/// This thread's count of a branch event (pmc/detail/emulated.hpp's Event codes 12 and 13), exact at a system call;
/// ~0 for another code.
inline std::uint64_t modelled_count(std::uint64_t event) {
    ThreadBranches* t = &threads::this_thread();
#if defined(PMC_PLUGIN_FAULT_SWAP) // the planted fault (tests/emulate): another live thread's counts
    t = &threads::next_live(*t);
#endif
    const pmc_model::BranchCounts& c = t->predictor.counts();
    switch (event) {
    case 12: return t->branches();
    case 13: return c.conditional_misses + c.indirect_misses;
    default: return ~std::uint64_t{0};
    }
}

/// Starts the model, or says why it cannot ("" if it can, or is off). `target`: QEMU's guest architecture.
inline std::string start(const char* target) {
    if (!settings.on) return "";
    settings.x86 = std::strcmp(target, "x86_64") == 0;
    if (!settings.x86 && std::strcmp(target, "aarch64") != 0)
        return std::string("the branch model decodes x86-64 and AArch64 branches, not ") + target + "'s";
    settings.zero_low_bits = settings.x86 ? 0 : 2;
    unmade_pending.kind = Kind::direct;
    unmade_thread.pending = &unmade_pending;
    return threads::start();
}

/// Before a system call: the thread's counts, exact there, published for the process's total.
inline void at_syscall() { threads::at_syscall(); }

/// The process's branch counts since its last report line, as one: "pid N branches all A Bc B Bcm C Bi D Bim E\n"
/// (`all`: every branch instruction; the rest Cachegrind's names and meanings).
inline std::string report_line(long pid) {
    const Totals since = threads::since_last_report();
    char line[256];
    std::snprintf(line, sizeof line, "pid %ld branches all %llu Bc %llu Bcm %llu Bi %llu Bim %llu\n", pid,
                  static_cast<unsigned long long>(since.branches), static_cast<unsigned long long>(since.Bc),
                  static_cast<unsigned long long>(since.Bcm), static_cast<unsigned long long>(since.Bi),
                  static_cast<unsigned long long>(since.Bim));
    return line;
}

/// The same counts so far, without taking them, for the progress file (all Bc Bcm Bi Bim).
inline std::array<unsigned long long, 5> counts_so_far() {
    const Totals t = threads::peek_since_last_report();
    return {t.branches, t.Bc, t.Bcm, t.Bi, t.Bim};
}

/// In a fork child: only the forking thread lives on, and what it counted belongs to the parent's report.
inline void in_fork_child() {
    new (&blocks_lock) std::mutex;
    threads::in_fork_child();
}

} // namespace plugin_branches
