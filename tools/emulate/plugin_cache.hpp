// SPDX-License-Identifier: MIT
// plugin_cache.hpp: `pmc emulate --cache` inside pmc's QEMU plugin (included by qemu_plugin.cpp alone). It only
// feeds the models of model/cache_model.hpp: each guest thread has a CacheHierarchy of its own, so that its
// counts never depend on how threads interleave.
//
// Nothing here runs unless the plugin is given cache=on: without it no memory callback is registered and the
// plugin costs what it did. With it:
//   - at translation, each block gets its instruction-fetch plan (plan_fetches) and a call at each execution that
//     simulates it; each instruction gets a call after each memory access it makes (QEMU's mem callback);
//   - an instruction that makes one plain access of a size and kind its bytes tell (a mov, push, pop, call, ret,
//     a compare with memory: most of them) gets on_single_access, whose common case is a few instructions: no
//     meminfo, no execution number, nothing to join; as nothing can join it, a D1 hit in a further way is counted
//     at once too (a miss waits, so that its LL access keeps its order with the next block's fetches); with the
//     default D1 the geometry is compiled into that case (pmc_model::DefaultD1);
//   - the accesses of one execution of one instruction are joined back (DataAccessMerger): an execution is the
//     thread's count of executed blocks and the instruction's index in its block; an access that hits the most
//     recent line of its D1 set is counted at once, in a call with no stack frame (on_memory), and anything else
//     waits for the next access, which shows it complete (the next piece of a counted access that stays in its line
//     joins it with no recount); on plugin API 1, whose filter by kind is off by one, an instruction whose bytes say
//     it loads alone or stores alone (a vector move or compare, in 8-byte pieces on QEMU 7.2) gets on_memory_of of
//     its kind, which takes a piece of the other kind to the general path;
//   - adjacent x86 instructions whose accesses follow from %rsp (push, pop, call, ret, mov 8(%rsp): a run,
//     model/access_runs.hpp) get one call, after the run's last access, that passes each member on in order with
//     its own pc: the same accesses in the same order as a call per access, in fewer calls (a run of more than 3
//     members within a D1 line, at an aligned address: one check of two lines for all, pmc_model::AccessSpan);
//   - a rep string instruction (plugin API 2: QEMU 10 runs its iterations inside one execution) passes each element
//     on alone and counts each iteration as an instruction, as Cachegrind does (on_rep_string_memory);
//   - a block's fetches are simulated when it starts, before its data accesses (Cachegrind interleaves them
//     instruction by instruction: only the LL, which both sides share, can see the difference);
//   - at each system call the thread's pending access is completed, so that a count read there is exact, and its
//     counts are published for other threads (the process's total at an exit or execve reads only those).
// Arguments (QEMU splits plugin arguments at commas, so geometries use colons): cache=on, i1=SIZE:ASSOC:LINE,
// d1=..., l2=..., ll=..., inclusion=strict.
#pragma once

#include "guest_registers.hpp"
#include "model/access_decode.hpp"
#include "model/access_runs.hpp"
#include "model/cache_model.hpp"
#include "plugin_sampling.hpp"
#include "plugin_threads.hpp"
#include "qemu_plugin_api.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace plugin_cache {

/// A variant for tests (tests/emulate): every access through on_memory, every planned fetch through the whole model.
#if defined(PMC_PLUGIN_GENERAL_PATH)
inline constexpr bool general_path = true;
#else
inline constexpr bool general_path = false;
#endif

struct Settings {
    bool on = false;
    bool lean = !general_path; ///< instructions that make one plain access get on_single_access
    pmc_model::CacheConfig config;
};
inline Settings settings;

/// Takes one plugin argument if it is the cache's: true if it was (then `error` says what is wrong, or is "").
inline bool parse_argument(const char* arg, std::string& error) {
    const std::string a = arg;
    const auto eq = a.find('=');
    if (eq == std::string::npos) return false;
    const std::string name = a.substr(0, eq), value = a.substr(eq + 1);
    if (name == "cache") {
        if (value != "on" && value != "off") error = "cache=" + value + ": on or off";
        settings.on = value == "on";
        return true;
    }
    if (name == "inclusion") {
        if (value == "strict") settings.config.inclusion = pmc_model::Inclusion::strict;
        else if (value == "cachegrind") settings.config.inclusion = pmc_model::Inclusion::cachegrind;
        else error = "inclusion=" + value + ": cachegrind or strict";
        return true;
    }
    pmc_model::CacheGeometry* target = name == "i1"   ? &settings.config.i1
                                       : name == "d1" ? &settings.config.d1
                                       : name == "ll" ? &settings.config.ll
                                                      : nullptr;
    if (name == "l2") target = &settings.config.l2.emplace();
    if (!target) return false;
    std::string text = value;
    for (char& c : text)
        if (c == ':') c = ',';
    const std::string problem = pmc_model::parse_geometry(text, *target);
    if (!problem.empty()) error = name + "=" + value + ": " + problem;
    return true;
}

/// The cache counts, summed; what a report line says.
inline void add(pmc_model::CacheCounts& to, const pmc_model::CacheCounts& from, bool subtract = false) {
    const auto each = [&](auto& a, const auto& b) {
        for (std::size_t k = 0; k < a.size(); ++k) {
            a[k].accesses = subtract ? a[k].accesses - b[k].accesses : a[k].accesses + b[k].accesses;
            a[k].misses = subtract ? a[k].misses - b[k].misses : a[k].misses + b[k].misses;
        }
    };
    each(to.l1, from.l1);
    each(to.l2, from.l2);
    each(to.ll, from.ll);
}

/// What QEMU's meminfos say (store or load, size), decoded once each: a direct-mapped table, as an instruction's
/// load and store alternate (`add [m], r`) and would keep missing a one-entry memo. Decoding is two calls into QEMU,
/// whose meminfo layout is its own (it changed between versions): the table only hashes the 32 bits.
class MeminfoTable {
public:
    struct Decoded {
        std::uint32_t size;
        bool store;
    };
    __attribute__((always_inline)) Decoded decode(qemu_plugin_meminfo_t info) noexcept {
        Entry& e = entry(info);
        if (__builtin_expect(e.info != info, 0)) fill(e, info);
        return e.decoded;
    }
    /// decode() if `info` is in the table, else null (with no call into QEMU).
    __attribute__((always_inline)) const Decoded* find(qemu_plugin_meminfo_t info) const noexcept {
        const Entry& e = entries_[slot(info)];
        return __builtin_expect(e.info == info, 1) ? &e.decoded : nullptr;
    }

private:
    static constexpr unsigned bits = 4;
    struct Entry {
        std::uint64_t info = ~std::uint64_t{0}; ///< none yet: no 32-bit meminfo equals it
        Decoded decoded{0, false};
    };
    static std::uint32_t slot(qemu_plugin_meminfo_t info) noexcept {
        return (static_cast<std::uint32_t>(info) * 0x9E3779B1u) >> (32 - bits);
    }
    Entry& entry(qemu_plugin_meminfo_t info) noexcept { return entries_[slot(info)]; }
    __attribute__((noinline)) static void fill(Entry& e, qemu_plugin_meminfo_t info) noexcept {
        e.info = info;
        e.decoded = Decoded{1u << qemu_plugin_mem_size_shift(info), qemu_plugin_mem_is_store(info)};
    }
    Entry entries_[1u << bits];
};

/// One guest thread's cache model, changed by its own thread alone with no lock (a call per block and per access);
/// plugin_threads publishes its counts for the process's total, taken at an exit or an execve while other threads
/// may still run.
struct CacheThread {
    using Counts = pmc_model::CacheCounts;
    pmc_model::CacheHierarchy caches;
    pmc_model::DataAccessMerger merger;
    std::uint64_t blocks = 0; ///< blocks this thread executed: with an instruction's index, one execution of it
    MeminfoTable meminfos;
    std::uint64_t state_image_execution = ~std::uint64_t{0}; ///< the state image whose accesses were last replaced
    // The rep string instruction running on this thread (plugin API 2: on_rep_string_start, on_rep_string_memory).
    std::uint64_t rep_string_count = 0;      ///< its count register when QEMU entered it (0 if QEMU would not say)
    std::uint64_t rep_string_iterations = 0; ///< the iterations it has made since
    std::uint64_t rep_string_accesses = 0;   ///< and their accesses
    std::uint64_t rep_string_last_access = 0; ///< cmps, scas: rep_string_accesses at the count's last access (0: none)
    std::uint64_t rep_string_elements = 0;   ///< numbers each element's access, so that none joins another
    std::uint64_t rep_string_accumulator = 0; ///< scas: %rax when QEMU entered it (the value it looks for)
    std::uint64_t rep_string_first = 0;       ///< cmps: the current iteration's first address

    CacheThread() : caches(settings.config) {
        merger.set_strict(!caches.counts_hits_early());
        plugin_sampling::current_mirror = merger.sampling_flag(); // (made on its own thread: this_thread())
        *merger.sampling_flag() = plugin_sampling::current != nullptr ? 1 : 0;
    }
    void complete(const pmc_model::DataAccess& a) noexcept {
        // With a load sampler on this thread, a load needs the level that served it; otherwise the inlined path.
        if (__builtin_expect(plugin_sampling::current != nullptr, 0) && a.kind != pmc_model::Kind::write)
            plugin_sampling::on_load(a.pc, a.address, caches.read(a.address, a.size));
        else
            caches.data(a.kind, a.address, a.size);
    }
    /// Before a publication: the last access completed (its counts are exact at this point).
    void finish() noexcept {
        merger.flush([this](const pmc_model::DataAccess& a) { complete(a); });
    }
    Counts counts() const noexcept { return caches.counts(); }
    // pmc sample --emulate: every thread sampled from its first load, and its samples written at its exit.
    void started() noexcept { plugin_sampling::thread_starts(); }
    void exiting() noexcept {
        plugin_sampling::thread_exits();
        plugin_sampling::current_mirror = nullptr; // (the model is deleted next)
    }
    static void add(Counts& to, const Counts& from) { plugin_cache::add(to, from); }
    static void subtract(Counts& to, const Counts& from) { plugin_cache::add(to, from, true); }
};

/// The threads' models (plugin_threads.hpp): this_thread() is a plain TLS load; `blocks` numbers executions.
using threads = plugin_threads::Registry<CacheThread>;
using ThreadModel = threads::Thread;
inline ThreadModel& this_thread() { return threads::this_thread(); }

/// What a block's executions need: its fetch plan, and each instruction's address and index for its accesses.
struct Instruction {
    std::uint64_t pc;
    std::uint32_t index;
};
/// A register bit test's site, for on_register_bit_test_slot (QEMU 9.0 on).
struct BitTestSite {
    std::uint64_t pc;
    pmc_model::BitTestAccesses accesses;
};
/// An x87/SSE state image's site, for on_state_image_memory and on_state_image_operand.
struct StateImageSite {
    Instruction instruction;
    pmc_model::StateImageInstruction image;
    std::uint64_t next_pc; ///< for a RIP-relative operand
};
/// A rep string instruction's site, for on_rep_string_memory (plugin API 2).
struct RepStringSite {
    Instruction instruction;
    std::uint32_t length;                 ///< the instruction's bytes, fetched again for each further execution
    std::uint32_t accesses_per_iteration; ///< 1 or 2 (model/access_decode.hpp)
    std::uint64_t count_mask;             ///< the count register's bits: %rcx's, or %ecx's with the 0x67 prefix
    pmc_model::RepStringInstruction rep;  ///< what it is (its last elements decide VEX's last execution: cmps, scas)
};
/// The host address of a guest address (user mode: guest memory at a fixed offset), set by qemu_plugin.cpp; null
/// until known. on_rep_string_memory reads the elements a repe/repne compared last through it.
inline const void* (*host_of)(std::uint64_t guest_address) = nullptr;
/// Where blocks' plans and runs lie (BlockPlan::make, AccessRun::make): one after another in chunks of 64 KiB from
/// the heap (below malloc's mmap threshold: nothing mapped), never freed (QEMU does not say when it drops a
/// translation), so that the plans of blocks translated together, which a hot loop runs together, share host lines
/// instead of lying among the translation's other allocations.
class PlanArena {
public:
    void* allocate(std::size_t bytes) {
        bytes = (bytes + 15) & ~std::size_t{15};
        if (bytes > chunk / 4) return ::operator new(bytes); // (kept for the plugin's life, as the chunks)
        std::lock_guard<std::mutex> hold(lock_);
        if (left_ < bytes) {
            next_ = static_cast<unsigned char*>(::operator new(chunk));
            left_ = chunk;
        }
        void* p = next_;
        next_ += bytes;
        left_ -= bytes;
        return p;
    }
    /// In a fork child: a thread that held the lock is gone.
    void in_fork_child() noexcept { new (&lock_) std::mutex; }

private:
    static constexpr std::size_t chunk = 65536;
    std::mutex lock_;
    unsigned char* next_ = nullptr;
    std::size_t left_ = 0;
};
inline PlanArena plan_arena;
/// A run of accesses (model/access_runs.hpp) as its callback on the last member walks it.
struct RunStep {
    const Instruction* instruction;
    std::int64_t offset; ///< from the last member's address
    std::uint32_t size;
    bool store;
};
/// In one allocation (made by make()): its counts, then its steps, so that its call reads the steps with no pointer
/// to follow (a vector's buffer apart was one more host cache miss per call where the program's data push the
/// plugin's out of the host's L1, as xz's do).
class AccessRun {
public:
    std::uint32_t reads = 0;  ///< how many of its steps load
    std::uint32_t writes = 0; ///< and store
    std::uint64_t count = 0;  ///< its steps
    pmc_model::AccessSpan span; ///< where its steps lie (on_run's check of two lines for all)

    /// `line`: D1's line size (AccessSpan::of).
    static AccessRun* make(const std::vector<RunStep>& steps, std::uint32_t line) {
        void* memory = plan_arena.allocate(sizeof(AccessRun) + steps.size() * sizeof(RunStep));
        auto* run = new (memory) AccessRun();
        run->count = steps.size();
        std::vector<std::pair<std::int64_t, std::uint32_t>> accesses;
        for (std::size_t i = 0; i < steps.size(); ++i) {
            new (&run->steps()[i]) RunStep(steps[i]);
            ++(steps[i].store ? run->writes : run->reads);
            accesses.emplace_back(steps[i].offset, steps[i].size);
        }
        run->span = pmc_model::AccessSpan::of(accesses, line);
        return run;
    }
    struct Free {
        void operator()(AccessRun*) const noexcept {} // (in plan_arena, kept for the plugin's life)
    };
    /// In program order, each of 1 to pmc_model::min_line_size bytes (find_runs).
    const RunStep* steps() const noexcept { return reinterpret_cast<const RunStep*>(this + 1); }
    const RunStep& last() const noexcept { return steps()[count - 1]; }

private:
    AccessRun() = default;
    RunStep* steps() noexcept { return reinterpret_cast<RunStep*>(this + 1); }
};
static_assert(sizeof(AccessRun) % alignof(RunStep) == 0);
/// What a block's call per execution reads, in one allocation (made by make()): the block's counts, then the hit
/// checks of its planned fetches (an I1 set's most-recent slot and the tag that says the line is there: one per
/// fetch, two for a fetch that straddles two lines), then the fetches themselves (plan_fetches' references, read
/// only when a check fails). The common case reads the header and the checks, which lie together, with no pointer
/// to follow.
class BlockPlan {
public:
    struct FetchCheck {
        std::uint64_t tag;
        std::uint32_t slot;
        std::uint32_t fetch; ///< the fetch it checks: where fetch_from goes on when it fails
    };
    std::uint32_t instructions; ///< counted in Ir at each execution
    std::uint32_t check_count;
    std::uint64_t counted = 0; ///< plugin API 1: what the block adds to the instruction count (qemu_plugin.cpp)
    std::uint32_t fetch_count;

    static BlockPlan* make(std::uint32_t instructions, const std::vector<pmc_model::FetchRef>& fetches) {
        std::size_t checks = 0;
        for (const pmc_model::FetchRef& f : fetches) checks += f.straddles() ? 2 : 1;
        void* memory = plan_arena.allocate(sizeof(BlockPlan) + checks * sizeof(FetchCheck) +
                                      fetches.size() * sizeof(pmc_model::FetchRef));
        auto* plan = new (memory) BlockPlan(instructions, static_cast<std::uint32_t>(checks),
                                            static_cast<std::uint32_t>(fetches.size()));
        FetchCheck* check = plan->checks();
        for (std::size_t i = 0; i < fetches.size(); ++i) {
            const pmc_model::FetchRef& f = fetches[i];
            const auto index = static_cast<std::uint32_t>(i);
            new (check++) FetchCheck{f.tag, f.slot, index};
            if (f.straddles()) new (check++) FetchCheck{f.last_tag, f.last_slot, index};
            new (&plan->fetches()[i]) pmc_model::FetchRef(f);
        }
        return plan;
    }
    struct Free {
        void operator()(BlockPlan*) const noexcept {} // (in plan_arena, kept for the plugin's life)
    };
    const FetchCheck* checks() const noexcept { return reinterpret_cast<const FetchCheck*>(this + 1); }
    const pmc_model::FetchRef* fetches() const noexcept {
        return reinterpret_cast<const pmc_model::FetchRef*>(checks() + check_count);
    }

private:
    BlockPlan(std::uint32_t n, std::uint32_t checks, std::uint32_t fetches)
        : instructions(n), check_count(checks), fetch_count(fetches) {}
    FetchCheck* checks() noexcept { return reinterpret_cast<FetchCheck*>(this + 1); }
    pmc_model::FetchRef* fetches() noexcept { return reinterpret_cast<pmc_model::FetchRef*>(checks() + check_count); }
};
static_assert(sizeof(BlockPlan) % alignof(BlockPlan::FetchCheck) == 0 &&
              sizeof(BlockPlan::FetchCheck) % alignof(pmc_model::FetchRef) == 0);

/// What a block's translation made, kept for the plugin's life: its plan, and what its data callbacks point to.
struct Block {
    std::unique_ptr<BlockPlan, BlockPlan::Free> plan; ///< the call per block's `data`
    std::unique_ptr<Instruction[]> each;
    std::vector<std::unique_ptr<BitTestSite>> bit_tests; ///< (each at a fixed address: QEMU keeps the pointer)
    std::vector<std::unique_ptr<StateImageSite>> state_images; ///< (the same)
    std::vector<std::unique_ptr<AccessRun, AccessRun::Free>> runs; ///< (the same)
    std::vector<std::unique_ptr<RepStringSite>> rep_strings;   ///< (the same)
    /// Per instruction: null, or its run (a member's accesses are passed on by the call on its run's last member).
    std::vector<const AccessRun*> run_of;
    /// The last instruction's fetch, where QEMU may cut the block before it (on_last_instruction's `data`), or null.
    std::unique_ptr<pmc_model::FetchRef> last_apart;
};
/// Kept for the plugin's life: QEMU does not say when it drops a translation.
inline std::mutex blocks_lock;
inline std::vector<std::unique_ptr<Block>> blocks;

/// The fetches of `b` from `first` on, in order, each through the model unless its checks show a hit on the most
/// recent line of its set(s) (which changes nothing): on_block's call once a check fails.
__attribute__((noinline)) inline void fetch_from(ThreadModel& t, const BlockPlan& b, std::uint32_t first) noexcept {
    const pmc_model::FetchRef* fetches = b.fetches();
    for (std::uint32_t i = first; i < b.fetch_count; ++i) t.caches.fetch_planned(fetches[i]);
}
/// The tests' reference (plugin variant general): every planned fetch through the whole model, no check.
__attribute__((noinline)) inline void fetch_each(ThreadModel& t, const BlockPlan& b) noexcept {
    const pmc_model::FetchRef* fetches = b.fetches();
    for (std::uint32_t i = 0; i < b.fetch_count; ++i) t.caches.fetch_uncounted(fetches[i].address, fetches[i].size);
}
/// on_block's whole work where its common case does not apply: the thread's first block, or a publication due.
__attribute__((noinline)) inline void on_block_slowly(ThreadModel& t, const BlockPlan& b) noexcept {
    if ((++t.blocks & (ThreadModel::publish_every - 1)) == 0) t.publish();
    t.caches.count_instructions(b.instructions);
    general_path ? fetch_each(t, b) : fetch_from(t, b, 0);
}
/// on_block on a thread's first block: its model made (kept out of on_block, which then saves no register).
__attribute__((noinline)) inline void on_first_block(const BlockPlan& b) noexcept {
    on_block_slowly(threads::this_thread(), b);
}
/// on_block_checking's `checks` where the plan says how many (on_block).
inline constexpr std::uint32_t any_checks = ~std::uint32_t{0};
/// Plans of up to this many checks get a call of their own, its checks unrolled (block_callbacks).
inline constexpr std::uint32_t unrolled_checks = 3;
/// QEMU's call at each execution of a block (`data`: its BlockPlan): the thread's count of blocks (which numbers
/// executions, and publishes the counts every publish_every), the instructions in Ir, then each planned fetch. The
/// common case is a leaf with no stack frame: the thread's model exists, and each fetch is a hit on its set's most
/// recent line, one load and one compare each (a line another block evicted fails its check, so each is checked).
/// `checks`: the plan's check count, known at translation (block_callbacks), so that the checks are unrolled with
/// no loop branch: one call shared by all blocks would mispredict its loop's end at every change of block length,
/// as the host's predictor sees little of which block called; any_checks: from the plan (on_block).
template <std::uint32_t checks>
inline void on_block_checking(unsigned int, void* data) {
    const auto& b = *static_cast<const BlockPlan*>(data);
    ThreadModel* t = threads::this_thread_if_made();
    if (__builtin_expect(t == nullptr, 0)) return on_first_block(b);
    if (__builtin_expect(((t->blocks + 1) & (ThreadModel::publish_every - 1)) == 0, 0)) return on_block_slowly(*t, b);
    ++t->blocks;
    t->caches.count_instructions(b.instructions);
    if (general_path) return fetch_each(*t, b);
    const BlockPlan::FetchCheck* check = b.checks();
    if constexpr (checks == any_checks) {
        for (std::uint32_t i = 0; i < b.check_count; ++i)
            if (__builtin_expect(t->caches.i1().tag_at(check[i].slot) != check[i].tag, 0))
                return fetch_from(*t, b, check[i].fetch);
    } else {
        static_assert(checks <= unrolled_checks);
#pragma GCC unroll 8
        for (std::uint32_t i = 0; i < checks; ++i)
            if (__builtin_expect(t->caches.i1().tag_at(check[i].slot) != check[i].tag, 0))
                return fetch_from(*t, b, check[i].fetch);
    }
}
inline void on_block(unsigned int vcpu, void* data) { on_block_checking<any_checks>(vcpu, data); }
/// The call per block for each check count: [n] for a plan of n checks up to unrolled_checks, the last for more.
/// `Call<n>` is on_block_checking<n> or a call that ends in it (qemu_plugin.cpp's, which counts the block too).
using BlockCallbacks = std::array<qemu_plugin_vcpu_udata_cb_t, unrolled_checks + 2>;
template <template <std::uint32_t> class Call, std::size_t... n>
constexpr BlockCallbacks block_callbacks_of(std::index_sequence<n...>) {
    return {Call<static_cast<std::uint32_t>(n)>::call..., Call<any_checks>::call};
}
template <template <std::uint32_t> class Call>
constexpr BlockCallbacks block_callbacks() {
    return block_callbacks_of<Call>(std::make_index_sequence<unrolled_checks + 1>{});
}
template <std::uint32_t checks>
struct PlainBlockCall {
    static constexpr qemu_plugin_vcpu_udata_cb_t call = on_block_checking<checks>;
};
inline constexpr BlockCallbacks plain_block_callbacks = block_callbacks<PlainBlockCall>();

/// QEMU's call before the last listed instruction of a block QEMU 7.2 may have cut before it (translate's
/// last_may_be_taken_out; `data`: its FetchRef): that instruction in Ir and its fetch. QEMU drops the call with the
/// instruction when it cut it, and the next block, which starts with it, counts it (model/cache_model.hpp's
/// plan_block). After the block's on_block, so the thread's model exists.
inline void on_last_instruction(unsigned int, void* data) {
    const auto& r = *static_cast<const pmc_model::FetchRef*>(data);
    ThreadModel& t = this_thread();
    t.caches.count_instructions(1);
    if (general_path) t.caches.fetch_uncounted(r.address, r.size);
    else t.caches.fetch_planned(r);
}

/// QEMU's call after each memory access of an instruction (`data`: its Instruction). The common case, inlined with
/// no call: the thread's model exists, the meminfo is in its table, and the access needs nothing of the pending
/// one (DataAccessMerger::add_without_sink): a hit on the most recent line of its D1 set is counted at once, unless
/// this thread's load sampler wants the loads' levels. Anything else is on_memory_slowly, a tail call.
__attribute__((noinline)) inline void on_memory_slowly(unsigned int, qemu_plugin_meminfo_t info,
                                                       std::uint64_t address, void* data) {
    const auto& insn = *static_cast<const Instruction*>(data);
    ThreadModel& t = this_thread();
    const MeminfoTable::Decoded m = t.meminfos.decode(info);
    const pmc_model::Kind kind = m.store ? pmc_model::Kind::write : pmc_model::Kind::read;
    const bool count_now = m.store || plugin_sampling::current == nullptr;
    t.merger.add(&t.caches, count_now, (t.blocks << 10) | insn.index, insn.pc, kind, address, m.size,
                 [&t](const pmc_model::DataAccess& a) { t.complete(a); });
}
template <pmc_model::Kind kind>
__attribute__((always_inline)) inline bool access_quickly(ThreadModel& t, const Instruction& insn,
                                                          std::uint64_t address, std::uint32_t size) noexcept {
    const bool count_now = kind == pmc_model::Kind::write || plugin_sampling::current == nullptr;
    return t.merger.add_without_sink(t.caches, count_now, (t.blocks << 10) | insn.index, insn.pc, kind, address,
                                     size);
}
inline void on_memory(unsigned int vcpu, qemu_plugin_meminfo_t info, std::uint64_t address, void* data) {
    const auto& insn = *static_cast<const Instruction*>(data);
    if (ThreadModel* t = threads::this_thread_if_made())
        if (const MeminfoTable::Decoded* m = t->meminfos.find(info))
            if (m->store ? access_quickly<pmc_model::Kind::write>(*t, insn, address, m->size)
                         : access_quickly<pmc_model::Kind::read>(*t, insn, address, m->size))
                return;
    on_memory_slowly(vcpu, info, address, data);
}
/// The same for a callback QEMU calls after loads alone, or after stores alone (plugin API 2 and later).
template <pmc_model::Kind kind>
inline void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, std::uint64_t address, void* data) {
    const auto& insn = *static_cast<const Instruction*>(data);
    if (ThreadModel* t = threads::this_thread_if_made())
        if (const MeminfoTable::Decoded* m = t->meminfos.find(info))
            if (access_quickly<kind>(*t, insn, address, m->size)) return;
    on_memory_slowly(vcpu, info, address, data);
}

/// on_access for plugin API 1, whose filter by kind is off by one (register_data_callbacks): on_memory for an
/// instruction that loads alone or stores alone (model/access_decode.hpp's x86_vector_access: a hint), its kind's
/// path with no branch on it; a piece of the other kind takes on_memory's general path.
template <pmc_model::Kind kind>
inline void on_memory_of(unsigned int vcpu, qemu_plugin_meminfo_t info, std::uint64_t address, void* data) {
    const auto& insn = *static_cast<const Instruction*>(data);
    if (ThreadModel* t = threads::this_thread_if_made())
        if (const MeminfoTable::Decoded* m = t->meminfos.find(info))
            if (__builtin_expect(m->store == (kind == pmc_model::Kind::write), 1) &&
                access_quickly<kind>(*t, insn, address, m->size))
                return;
    on_memory_slowly(vcpu, info, address, data);
}

/// QEMU's call after the one access of an instruction that makes exactly one, of this kind and size (decided at
/// translation: model/access_decode.hpp's x86_single_access, most instructions). No piece can join it, so the common
/// case needs neither the meminfo nor the instruction's execution number: the thread's model exists, no access
/// waits, and the access hits the most recent line of its D1 set (DataAccessMerger::add_alone_without_sink): it is
/// counted, and `data` is not read. Anything else is on_single_access_slowly, on_memory's general path.
__attribute__((noinline)) inline void on_single_access_slowly(pmc_model::Kind kind, std::uint32_t size,
                                                              std::uint64_t address, const void* data) {
    const auto& insn = *static_cast<const Instruction*>(data);
    ThreadModel& t = this_thread();
    const bool count_now = kind == pmc_model::Kind::write || plugin_sampling::current == nullptr;
    const auto sink = [&t](const pmc_model::DataAccess& a) { t.complete(a); };
    if (count_now && t.merger.add_alone_if_hit(t.caches, kind, address, size, sink)) return;
    t.merger.add(&t.caches, count_now, (t.blocks << 10) | insn.index, insn.pc, kind, address, size, sink);
}
/// `default_d1`: the thread's D1 has the default geometry (pmc_model::DefaultD1), compiled in as constants.
template <pmc_model::Kind kind, std::uint32_t size, bool default_d1 = false>
inline void on_single_access(unsigned int, qemu_plugin_meminfo_t, std::uint64_t address, void* data) {
    if (ThreadModel* t = threads::this_thread_if_made()) {
        if (default_d1 ? t->merger.add_small_alone_quickly_as<pmc_model::DefaultD1>(t->caches, kind, address, size)
                       : t->merger.add_small_alone_quickly(t->caches, kind, address, size))
            return;
    }
    on_single_access_slowly(kind, size, address, data);
}
/// on_single_access for what x86_single_access decoded, for a D1 of the default geometry or not (`default_d1`).
template <bool default_d1>
inline qemu_plugin_vcpu_mem_cb_t single_access_callback_for(pmc_model::SingleAccess a) {
    using pmc_model::Kind;
    switch (a.size) {
    case 1: return a.store ? on_single_access<Kind::write, 1, default_d1> : on_single_access<Kind::read, 1, default_d1>;
    case 2: return a.store ? on_single_access<Kind::write, 2, default_d1> : on_single_access<Kind::read, 2, default_d1>;
    case 4: return a.store ? on_single_access<Kind::write, 4, default_d1> : on_single_access<Kind::read, 4, default_d1>;
    case 8: return a.store ? on_single_access<Kind::write, 8, default_d1> : on_single_access<Kind::read, 8, default_d1>;
    default: return nullptr;
    }
}
inline qemu_plugin_vcpu_mem_cb_t single_access_callback(pmc_model::SingleAccess a) {
    return settings.config.d1 == pmc_model::default_d1 ? single_access_callback_for<true>(a)
                                                       : single_access_callback_for<false>(a);
}
/// One access that QEMU reported through another instruction's call (a run member): on_memory's path, the kind and
/// size known from the decoder instead of a meminfo.
template <pmc_model::Kind kind>
inline void pass_access(ThreadModel& t, const Instruction& insn, std::uint64_t address, std::uint32_t size) {
    const bool count_now = kind == pmc_model::Kind::write || plugin_sampling::current == nullptr;
    const auto sink = [&t](const pmc_model::DataAccess& a) { t.complete(a); };
    if (count_now && t.merger.add_alone_if_hit(t.caches, kind, address, size, sink)) return;
    t.merger.add(&t.caches, count_now, (t.blocks << 10) | insn.index, insn.pc, kind, address, size, sink);
}
/// A run member's access: each member makes exactly one plain access of at most 8 bytes (model/access_runs.hpp),
/// so on_single_access's common case applies (no access waits and it hits the most recent line of its D1 set:
/// counted, the member's Instruction not read); anything else is pass_access, the general path.
template <pmc_model::Kind kind>
__attribute__((always_inline)) inline void pass_member(ThreadModel& t, const RunStep& s, std::uint64_t address) {
    if (t.merger.add_small_alone_quickly(t.caches, kind, address, s.size)) return;
    pass_access<kind>(t, *s.instruction, address, s.size);
}
/// on_run's work from member `first` on, each member as a call of its own would pass it on (pass_member); the
/// members before it were hits on the most recent line of their D1 sets, which on_run checked and this counts.
/// (`model`: the thread's, or null before its first block, when this makes it: on_run's common case stays a leaf.)
__attribute__((noinline)) inline void on_run_from(ThreadModel* model, const AccessRun& run, std::size_t first,
                                                  std::uint64_t address) {
    ThreadModel& t = model ? *model : this_thread();
    std::uint64_t reads = 0;
    const RunStep* steps = run.steps();
    for (std::size_t i = 0; i < first; ++i) reads += steps[i].store ? 0 : 1;
    t.caches.count_data_hits(pmc_model::Kind::read, reads);
    t.caches.count_data_hits(pmc_model::Kind::write, first - reads);
    for (std::size_t i = first; i < run.count; ++i) {
        const RunStep& s = steps[i];
        const std::uint64_t at = address + static_cast<std::uint64_t>(s.offset);
        if (s.store) pass_member<pmc_model::Kind::write>(t, s, at);
        else pass_member<pmc_model::Kind::read>(t, s, at);
    }
}
/// QEMU's call after a run's last access (`data`: its AccessRun): every member's access, in program order, each
/// at its offset from `address`. Each is a plain access of its own execution, so each is what a call of its own
/// would have passed on. The common case is a leaf that saves one register: the thread's model exists, no access waits,
/// no load sampler runs, Cachegrind's inclusion, and every member hits the most recent line of its D1 set. Then
/// each member is one check (such hits change no state and nothing waits, so the order of counting is free) and
/// the run's loads and stores are counted at the end; the first member that fails goes on in on_run_from.
/// `members`: the run's, known at translation (run_callback), so that the checks are unrolled with no loop branch
/// to mispredict (as on_block_checking's); any_members: from the run.
inline constexpr std::size_t any_members = ~std::size_t{0};
inline constexpr std::size_t unrolled_members = 3;
template <std::size_t members>
inline void on_run_of(unsigned int, qemu_plugin_meminfo_t, std::uint64_t address, void* data) {
    const auto& run = *static_cast<const AccessRun*>(data);
    ThreadModel* t = threads::this_thread_if_made();
    if (__builtin_expect(t == nullptr || !t->merger.may_count_alone(pmc_model::Kind::read), 0))
        return on_run_from(t, run, 0, address);
    const RunStep* steps = run.steps();
    const std::size_t n = members == any_members ? run.count : members;
    if constexpr (members == any_members) {
        // A run within a line (AccessSpan): two checks for all its members, when they can tell.
        if (t->caches.span_hits_most_recent(run.span, address)) {
            t->caches.count_data_hits(pmc_model::Kind::read, run.reads);
            t->caches.count_data_hits(pmc_model::Kind::write, run.writes);
            return;
        }
        for (std::size_t i = 0; i < n; ++i)
            if (__builtin_expect(!t->caches.small_hits_most_recent(address + static_cast<std::uint64_t>(steps[i].offset),
                                                                   steps[i].size),
                                 0))
                return on_run_from(t, run, i, address);
    } else {
        static_assert(members <= unrolled_members);
#pragma GCC unroll 8
        for (std::size_t i = 0; i < n; ++i)
            if (__builtin_expect(!t->caches.small_hits_most_recent(address + static_cast<std::uint64_t>(steps[i].offset),
                                                                   steps[i].size),
                                 0))
                return on_run_from(t, run, i, address);
    }
    t->caches.count_data_hits(pmc_model::Kind::read, run.reads);
    t->caches.count_data_hits(pmc_model::Kind::write, run.writes);
}
inline void on_run(unsigned int vcpu, qemu_plugin_meminfo_t info, std::uint64_t address, void* data) {
    on_run_of<any_members>(vcpu, info, address, data);
}
/// The call for a run of `members` members.
template <std::size_t... n>
constexpr std::array<qemu_plugin_vcpu_mem_cb_t, unrolled_members + 1> run_callbacks_of(std::index_sequence<n...>) {
    return {(n < 2 ? on_run : on_run_of<n>)...};
}
inline qemu_plugin_vcpu_mem_cb_t run_callback(std::size_t members) {
    static constexpr auto calls = run_callbacks_of(std::make_index_sequence<unrolled_members + 1>{});
    return members <= unrolled_members ? calls[members] : on_run;
}

/// At translation: the block's runs on the stack (model/access_runs.hpp), each member marked in block.run_of. A last instruction
/// that QEMU 7.2 may take out of the block again (qemu_plugin.cpp) is no member: its call would go with it.
inline void find_runs(Block& block, qemu_plugin_tb* tb, std::size_t n, bool last_may_be_taken_out) {
    block.run_of.assign(n, nullptr);
    std::vector<pmc_model::RunAccess> accesses(n);
    for (std::size_t i = 0; i < n; ++i) {
        if (i + 1 == n && last_may_be_taken_out) break;
        qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
        accesses[i] = pmc_model::x86_run_access(static_cast<const unsigned char*>(qemu_plugin_insn_haddr(insn)),
                                                qemu_plugin_insn_size(insn));
        // The stack's runs alone: a handled fault in a run's middle loses its members before it (the call on the
        // last member never comes), and on the stack only an overflow faults there; elsewhere a page protected
        // for a handler to open (a garbage collector's write barrier) may (docs/emulated-pmu.md).
        if (accesses[i].base != 4) accesses[i].member = false;
    }
    for (const pmc_model::AccessRun& found : pmc_model::find_access_runs(accesses)) {
        // (on_run's check takes each member's bytes within one D1 line uncut: every member has at most 8, but
        // should one ever have more, its run's members keep a call each)
        bool small = true;
        for (const pmc_model::RunMember& m : found.members)
            small = small && m.size >= 1 && m.size <= pmc_model::min_line_size;
        if (!small) continue;
        std::vector<RunStep> steps;
        for (const pmc_model::RunMember& m : found.members)
            steps.push_back(RunStep{&block.each[m.index], m.offset, m.size, m.store});
        std::unique_ptr<AccessRun, AccessRun::Free> run(AccessRun::make(steps, settings.config.d1.line));
        for (const pmc_model::RunMember& m : found.members) block.run_of[m.index] = run.get();
        block.runs.push_back(std::move(run));
    }
}

/// Whether this access by an x86 atomic instruction is QEMU 7.2's whole read-modify-write in parallel code: a store
/// that no load of the same execution came before (model/access_decode.hpp). Serial code, and QEMU 10 always,
/// report the load first; a load is remembered here for the store that follows it.
inline bool is_whole_rmw_store(const ThreadModel& t, const Instruction* insn, bool store) {
    thread_local std::uint64_t loaded = ~std::uint64_t{0}; // the execution whose load came last
    const std::uint64_t execution = (t.blocks << 10) | insn->index;
    const bool whole = store && loaded != execution;
    loaded = execution; // (a whole store's next piece, if any, is no new read-modify-write)
    return whole;
}

/// The load a whole read-modify-write store stands for, passed on before the store itself.
inline void pass_rmw_load(ThreadModel& t, const Instruction* insn, std::uint64_t address, std::uint32_t size) {
    t.merger.add((t.blocks << 10) | insn->index, insn->pc, false, address, size,
                 [&t](const pmc_model::DataAccess& a) { t.complete(a); });
}

/// An x86 atomic read-modify-write's accesses (model/access_decode.hpp): Cachegrind counts two reads where QEMU
/// reports a load and a store, so the load is passed on twice (the second joins the store as one read); QEMU 7.2's
/// parallel code reports a store alone, which stands for both. A callback of its own, registered at translation for
/// those instructions alone: on_memory's path is unchanged.
inline void on_atomic_memory(unsigned int vcpu, qemu_plugin_meminfo_t info, std::uint64_t address, void* data) {
    const bool store = qemu_plugin_mem_is_store(info);
    ThreadModel& t = this_thread();
    if (is_whole_rmw_store(t, static_cast<const Instruction*>(data), store)) {
        const std::uint32_t size = t.meminfos.decode(info).size;
        pass_rmw_load(t, static_cast<const Instruction*>(data), address, size);
        pass_rmw_load(t, static_cast<const Instruction*>(data), address, size);
    } else if (!store) {
        on_memory(vcpu, info, address, data);
    }
    on_memory(vcpu, info, address, data);
}

/// A LOCK cmpxchg, cmpxchg8b or cmpxchg16b (model/access_decode.hpp): one read in Cachegrind, a load and a store in
/// QEMU's serial code (one read-modify-write, on_memory's rule), a store alone in QEMU 7.2's parallel code, which
/// stands for both.
inline void on_locked_compare_exchange_memory(unsigned int vcpu, qemu_plugin_meminfo_t info, std::uint64_t address,
                                              void* data) {
    ThreadModel& t = this_thread();
    if (is_whole_rmw_store(t, static_cast<const Instruction*>(data), qemu_plugin_mem_is_store(info)))
        pass_rmw_load(t, static_cast<const Instruction*>(data), address, t.meminfos.decode(info).size);
    on_memory(vcpu, info, address, data);
}

/// An x86 bit test of a register by a register, each execution (model/access_decode.hpp): Cachegrind counts a write
/// and one or two reads of a stack slot 288 bytes below the stack pointer, which QEMU 6.0 to 8.2 do not give
/// plugins; counted as D1 hits (the slot's misses in Cachegrind are not modelled). `data` holds the reads (1 or 2).
inline void on_register_bit_test(unsigned int, void* data) {
    ThreadModel& t = this_thread();
    t.caches.count_data_hits(pmc_model::Kind::read, reinterpret_cast<std::uintptr_t>(data));
    t.caches.count_data_hits(pmc_model::Kind::write, 1);
}

/// At translation, an x86-64 instruction's memory callback: on_atomic_memory for the atomic read-modify-writes,
/// on_locked_compare_exchange_memory for LOCK cmpxchg/cmpxchg8b/cmpxchg16b, on_single_access for an instruction
/// that makes one plain access (but in the tests' variant without it), on_memory for all others.
inline qemu_plugin_vcpu_mem_cb_t x86_memory_callback(qemu_plugin_insn* insn) {
    const auto* bytes = static_cast<const unsigned char*>(qemu_plugin_insn_haddr(insn));
    const std::size_t size = qemu_plugin_insn_size(insn);
    if (pmc_model::is_x86_atomic_rmw(bytes, size)) return on_atomic_memory;
    if (pmc_model::is_x86_locked_compare_exchange(bytes, size)) return on_locked_compare_exchange_memory;
    if (settings.lean)
        if (const pmc_model::SingleAccess a = pmc_model::x86_single_access(bytes, size); a.size != 0)
            return single_access_callback(a);
    return on_memory;
}

/// The same where QEMU gives plugins registers (API 2, QEMU 9.0 on): the slot's real address, %rsp - 288, so that
/// its misses are Cachegrind's too. In VEX's order (model/access_decode.hpp): the operand stored, the bit's byte
/// loaded (its store back, for bts/btr/btc, is part of that read), the operand loaded back (bts/btr/btc), after the
/// previous instruction's access. Registered with QEMU_PLUGIN_CB_R_REGS on these instructions alone.
inline void on_register_bit_test_slot(unsigned int vcpu, void* data) {
    const auto* site = static_cast<const BitTestSite*>(data);
    const pmc_model::BitTestAccesses& bt = site->accesses;
    std::uint64_t rsp = 0, bit = 0;
    if (!guest_registers::read_x86_gpr(4, rsp) || !guest_registers::read_x86_gpr(bt.bit_register, bit)) {
        on_register_bit_test(vcpu, reinterpret_cast<void*>(std::uintptr_t{bt.reads})); // (QEMU would not say)
        return;
    }
    ThreadModel& t = this_thread();
    t.finish();
    using pmc_model::DataAccess, pmc_model::Kind;
    const std::uint64_t slot = rsp - 288;
    t.complete(DataAccess{site->pc, slot, bt.operand_bytes, Kind::write});
    t.complete(DataAccess{site->pc, slot + (bit & (bt.operand_bytes * 8 - 1)) / 8, 1, Kind::read});
    if (bt.reads > 1) t.complete(DataAccess{site->pc, slot, bt.operand_bytes, Kind::read});
}

/// An x87/SSE state image's accesses as VEX makes them (model/access_decode.hpp), at the image's address, after
/// the previous instruction's access.
inline void complete_state_image(ThreadModel& t, const StateImageSite& site, std::uint64_t image) {
    t.finish();
    pmc_model::for_each_state_image_access(site.image.kind, [&](std::uint32_t offset, std::uint32_t size, bool store) {
        const pmc_model::Kind kind = store ? pmc_model::Kind::write : pmc_model::Kind::read;
        t.complete(pmc_model::DataAccess{site.instruction.pc, image + offset, size, kind});
    });
}
/// Where QEMU reports the image's pieces (QEMU 6.0 to 8.2): the first is at the image's address (its control
/// word); VEX's accesses replace them all, once per execution.
inline void on_state_image_memory(unsigned int, qemu_plugin_meminfo_t, std::uint64_t address, void* data) {
    const auto* site = static_cast<const StateImageSite*>(data);
    ThreadModel& t = this_thread();
    const std::uint64_t execution = (t.blocks << 10) | site->instruction.index;
    if (execution == t.state_image_execution) return;
    t.state_image_execution = execution;
    complete_state_image(t, *site, address);
}
/// Where QEMU reports none (QEMU 10.0) and gives registers (9.0 on): the image's address from its operand's
/// registers, before the instruction (none counted if QEMU would not give them). Registered with
/// QEMU_PLUGIN_CB_R_REGS on these instructions alone; QEMU's own accesses, if any, are not asked for.
inline void on_state_image_operand(unsigned int, void* data) {
    const auto* site = static_cast<const StateImageSite*>(data);
    const pmc_model::MemoryOperand& m = site->image.operand;
    std::uint64_t address = static_cast<std::uint64_t>(m.displacement) + (m.rip_relative ? site->next_pc : 0);
    std::uint64_t value = 0;
    if (m.base >= 0) {
        if (!guest_registers::read_x86_gpr(static_cast<unsigned>(m.base), value)) return;
        address += value;
    }
    if (m.index >= 0) {
        if (!guest_registers::read_x86_gpr(static_cast<unsigned>(m.index), value)) return;
        address += value * m.scale;
    }
    if (m.address_32) address &= 0xFFFFFFFFu;
    if (m.segment >= 0) {
        if (!guest_registers::read_x86_segment_base(m.segment == 4, value)) return;
        address += value;
    }
    complete_state_image(this_thread(), *site, address);
}

/// A masked store (model/access_decode.hpp): QEMU's pieces, one per element stored, each an access of its own.
inline void on_masked_store_memory(unsigned int, qemu_plugin_meminfo_t info, std::uint64_t address, void* data) {
    const auto* insn = static_cast<const Instruction*>(data);
    ThreadModel& t = this_thread();
    const MeminfoTable::Decoded m = t.meminfos.decode(info);
    t.finish();
    t.complete(pmc_model::DataAccess{insn->pc, address, m.size, m.store ? pmc_model::Kind::write : pmc_model::Kind::read});
}

/// Whether this QEMU runs a rep string instruction's iterations in a loop inside one execution (QEMU 10): proven
/// by an execution that made two, as QEMU 7.2 makes one per execution. Until then the extra execution VEX makes
/// at a count's end is not counted (the same QEMU either way: set at most once, read by every thread).
inline std::atomic<bool> rep_strings_loop{false};

/// A rep string instruction entered (plugin API 2; QEMU_PLUGIN_CB_R_REGS, on these instructions alone): its count
/// register, before its first iteration here. QEMU 10 enters it again, with this callback, when it leaves its
/// loop every 65,536 iterations; on_block counts each entry as one instruction.
/// Whether the instruction is a cmps or scas, whose repe/repne condition may end it before its count does.
inline bool is_conditional(const RepStringSite& site) {
    return site.rep.kind == pmc_model::RepString::cmps || site.rep.kind == pmc_model::RepString::scas;
}
inline void on_rep_string_start(unsigned int, void* data) {
    const auto& site = *static_cast<const RepStringSite*>(data);
    ThreadModel& t = this_thread();
    std::uint64_t count = 0;
    t.rep_string_count = guest_registers::read_x86_gpr(1, count) ? count & site.count_mask : 0;
    t.rep_string_iterations = 0;
    t.rep_string_accesses = 0;
    if (site.rep.kind == pmc_model::RepString::scas && !guest_registers::read_x86_gpr(0, t.rep_string_accumulator))
        t.rep_string_count = 0; // (without %rax its last element cannot be compared: no execution added)
    // The access that decides VEX's last execution of a cmps or scas, numbered here so that each access needs one
    // compare to know it is not that one (0: never, as accesses count from 1).
    t.rep_string_last_access = is_conditional(site) ? t.rep_string_count * site.accesses_per_iteration : 0;
}
/// Whether a repe/repne's last elements compared equal: cmps's two, or scas's and %rax's low bytes. They were just
/// read (QEMU calls after the access), so they are mapped. Without host_of: equal, as before.
inline bool last_elements_equal(const ThreadModel& t, const RepStringSite& site, std::uint64_t address,
                                std::uint32_t size) {
    if (host_of == nullptr || size > 8) return true;
    const void* other = site.rep.kind == pmc_model::RepString::cmps ? host_of(t.rep_string_first)
                                                                    : static_cast<const void*>(&t.rep_string_accumulator);
    return std::memcmp(host_of(address), other, size) == 0;
}
/// A cmps's or scas's last access of the iteration that took its count to 0 (QEMU looping within a block): VEX's
/// execution that finds the count 0, if the condition still holds. Once per instruction: out of the common path.
__attribute__((noinline)) inline void conditional_count_end(ThreadModel& t, const RepStringSite& site,
                                                            std::uint64_t address) {
    if (!rep_strings_loop.load(std::memory_order_relaxed) ||
        !pmc_model::executes_after_count_end(site.rep, last_elements_equal(t, site, address, site.rep.element_bytes)))
        return;
    t.caches.count_instructions(1);
    t.caches.fetch_planned(site.instruction.pc, site.length);
}
/// A rep string instruction's access (plugin API 2; model/access_decode.hpp). Each element is an access of its own:
/// an execution number that no other access has (a counter with the top bit set, which no block count reaches), so
/// that on_memory's joining cannot make one access of QEMU 10's adjacent elements. Each iteration after the
/// entry's first is one instruction more, fetched as Cachegrind fetches it, and so is the iteration that takes the
/// count to 0, for VEX's last execution, which finds it 0 (a repe/repne whose condition ends it on that element
/// has none: model/access_decode.hpp's executes_after_count_end, decided after its last access). Where QEMU makes
/// one iteration per entry none of this adds one. `conditional`: a cmps or scas (is_conditional), registered apart
/// so that movs, stos and lods, most of the elements, pay nothing for that decision.
template <bool conditional>
void on_rep_string_memory(unsigned int, qemu_plugin_meminfo_t info, std::uint64_t address, void* data) {
    const auto& site = *static_cast<const RepStringSite*>(data);
    ThreadModel& t = this_thread();
    const std::uint64_t access = ++t.rep_string_accesses; // numbered from 1 since the instruction's entry
    if (((access - 1) & (site.accesses_per_iteration - 1)) == 0) { // an iteration starts
        const std::uint64_t iteration = ++t.rep_string_iterations;
        std::uint64_t executions = 0; // VEX's, beyond the entry's first (on_block's)
        if (iteration == 2 && !rep_strings_loop.load(std::memory_order_relaxed))
            rep_strings_loop.store(true, std::memory_order_relaxed);
        if (iteration > 1) ++executions;
        if (!conditional && iteration == t.rep_string_count && rep_strings_loop.load(std::memory_order_relaxed))
            ++executions;
        for (; executions > 0; --executions) {
            t.caches.count_instructions(1);
            t.caches.fetch_planned(site.instruction.pc, site.length);
        }
        if (conditional) t.rep_string_first = address;
    }
    if (conditional && __builtin_expect(access == t.rep_string_last_access, 0)) // its last iteration's last access
        conditional_count_end(t, site, address);
    const MeminfoTable::Decoded m = t.meminfos.decode(info);
    const pmc_model::Kind kind = m.store ? pmc_model::Kind::write : pmc_model::Kind::read;
    const bool count_now = m.store || plugin_sampling::current == nullptr;
    const std::uint64_t element = (std::uint64_t{1} << 63) | ++t.rep_string_elements;
    if (t.merger.add_without_sink(t.caches, count_now, element, site.instruction.pc, kind, address, m.size)) return;
    t.merger.add(&t.caches, count_now, element, site.instruction.pc, kind, address, m.size,
                 [&t](const pmc_model::DataAccess& a) { t.complete(a); });
}

/// At translation, one instruction's data callbacks: QEMU's accesses through on_memory, or, for the x86
/// instructions Cachegrind counts otherwise (model/access_decode.hpp), the callbacks of their rule.
inline void register_data_callbacks(Block& block, qemu_plugin_insn* insn, std::size_t i, bool x86) {
    Instruction* each = &block.each[i];
    if (!block.run_of.empty() && block.run_of[i]) { // a run member: one call, on the run's last member
        if (block.run_of[i]->last().instruction == each)
            qemu_plugin_register_vcpu_mem_cb(insn, run_callback(block.run_of[i]->count),
                                             QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                             const_cast<AccessRun*>(block.run_of[i]));
        return;
    }
    const auto* bytes = static_cast<const unsigned char*>(qemu_plugin_insn_haddr(insn));
    const std::size_t size = qemu_plugin_insn_size(insn);
#if PMC_PLUGIN_API >= 2 // (QEMU 6.0 to 8.2 run one iteration per execution: on_memory counts them as Cachegrind)
    if (const auto rep = x86 ? pmc_model::x86_rep_string(bytes, size) : pmc_model::RepStringInstruction{};
        rep.kind != pmc_model::RepString::none) {
        const std::uint64_t mask = rep.address_32 ? 0xFFFFFFFFu : ~std::uint64_t{0};
        block.rep_strings.push_back(std::make_unique<RepStringSite>(
            RepStringSite{*each, static_cast<std::uint32_t>(size), rep.accesses_per_iteration, mask, rep}));
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_rep_string_start, QEMU_PLUGIN_CB_R_REGS,
                                               block.rep_strings.back().get());
        qemu_plugin_register_vcpu_mem_cb(
            insn, is_conditional(*block.rep_strings.back()) ? on_rep_string_memory<true> : on_rep_string_memory<false>,
            QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, block.rep_strings.back().get());
        return;
    }
#endif
    if (const auto image = x86 ? pmc_model::x86_state_image(bytes, size) : pmc_model::StateImageInstruction{};
        image.kind != pmc_model::StateImage::none && image.operand.memory) {
        // VEX's accesses in place of QEMU's: from the first piece QEMU reports (API 1), or from the operand's
        // registers (API 2: QEMU 10.0 reports none).
        block.state_images.push_back(std::make_unique<StateImageSite>(StateImageSite{*each, image, each->pc + size}));
        if (guest_registers::available)
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_state_image_operand, QEMU_PLUGIN_CB_R_REGS,
                                                   block.state_images.back().get());
        else
            qemu_plugin_register_vcpu_mem_cb(insn, on_state_image_memory, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                             block.state_images.back().get());
        return;
    }
    const bool masked_store = x86 && pmc_model::is_x86_masked_store(bytes, size);
    const qemu_plugin_vcpu_mem_cb_t callback =
        !x86 ? on_memory : masked_store ? on_masked_store_memory : x86_memory_callback(insn);
#if PMC_PLUGIN_API >= 2
    if (callback == on_memory) { // a call for loads and one for stores: no meminfo to decode
        qemu_plugin_register_vcpu_mem_cb(insn, on_access<pmc_model::Kind::read>, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_R, each);
        qemu_plugin_register_vcpu_mem_cb(insn, on_access<pmc_model::Kind::write>, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_W, each);
    } else {
        qemu_plugin_register_vcpu_mem_cb(insn, callback, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, each);
    }
#else
    // One callback, the kind from the meminfo: QEMU 7.2 calls a callback registered for stores after loads and
    // stores, and one registered for loads after stores only (its filter is off by one). For an instruction whose
    // bytes say its kind (a vector load or store, in pieces), the callback of that kind.
    qemu_plugin_vcpu_mem_cb_t chosen = callback;
    if (callback == on_memory && x86 && settings.lean)
        if (const pmc_model::SingleAccess v = pmc_model::x86_vector_access(bytes, size); v.size != 0)
            chosen = v.store ? on_memory_of<pmc_model::Kind::write> : on_memory_of<pmc_model::Kind::read>;
    qemu_plugin_register_vcpu_mem_cb(insn, chosen, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, each);
#endif
    const auto bt = x86 ? pmc_model::x86_register_bit_test(bytes, size) : pmc_model::BitTestAccesses{};
    if (bt.reads == 0) return;
    if (guest_registers::available) { // QEMU 9.0 on: the slot's address from %rsp
        block.bit_tests.push_back(std::make_unique<BitTestSite>(BitTestSite{each->pc, bt}));
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_register_bit_test_slot, QEMU_PLUGIN_CB_R_REGS,
                                               block.bit_tests.back().get());
    } else {
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_register_bit_test, QEMU_PLUGIN_CB_NO_REGS,
                                               reinterpret_cast<void*>(std::uintptr_t{bt.reads}));
    }
}

/// At translation: the block's plan and calls (TCG blocks hold at most 512 instructions: the index fits 10 bits).
/// `x86`: the guest is x86-64, whose instructions of model/access_decode.hpp get their rules' callbacks.
/// `on_each`: the call per execution by the plan's check count (block_callbacks: on_block_checking or calls that end
/// in it), given the block's plan.
/// `last_may_be_taken_out`: QEMU 7.2 may drop the last instruction from the block (qemu_plugin.cpp's may_be_taken_out):
/// no run ends with it, and on_last_instruction counts and fetches it.
inline Block* translate(qemu_plugin_tb* tb, std::size_t n, bool x86,
                        const BlockCallbacks& on_each = plain_block_callbacks, bool last_may_be_taken_out = true) {
    auto block = std::make_unique<Block>();
    block->each.reset(new Instruction[n]);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> fetched;
    for (std::size_t i = 0; i < n; ++i) {
        qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
        const std::uint64_t pc = qemu_plugin_insn_vaddr(insn);
        fetched.emplace_back(pc, static_cast<std::uint32_t>(qemu_plugin_insn_size(insn)));
        block->each[i] = Instruction{pc, static_cast<std::uint32_t>(i & 1023)};
    }
#if !defined(PMC_PLUGIN_NO_RUNS)
    if (x86) find_runs(*block, tb, n, last_may_be_taken_out);
#endif
    for (std::size_t i = 0; i < n; ++i) register_data_callbacks(*block, qemu_plugin_tb_get_insn(tb, i), i, x86);
    const pmc_model::BlockFetchPlan fetches = pmc_model::plan_block(fetched, settings.config, last_may_be_taken_out);
    block->plan.reset(BlockPlan::make(fetches.instructions, fetches.refs));
    const std::uint32_t checks = block->plan->check_count;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_each[checks <= unrolled_checks ? checks : unrolled_checks + 1],
                                         QEMU_PLUGIN_CB_NO_REGS, block->plan.get());
    if (fetches.last_apart) { // (an instruction's call comes after its block's: the model exists)
        block->last_apart = std::make_unique<pmc_model::FetchRef>(fetches.last);
        qemu_plugin_register_vcpu_insn_exec_cb(qemu_plugin_tb_get_insn(tb, n - 1), on_last_instruction,
                                               QEMU_PLUGIN_CB_NO_REGS, block->last_apart.get());
    }
    Block* made = block.get();
    std::lock_guard<std::mutex> hold(blocks_lock);
    blocks.push_back(std::move(block));
    return made;
}

/// Before a system call: the thread's last access is complete (a count read there includes it).
inline void at_syscall() { threads::at_syscall(); }

/// This thread's count of a modelled event (pmc/detail/emulated.hpp's Event codes 1 to 11), exact at a system
/// call (at_syscall has completed its last access); ~0 for a code the model does not have.
inline std::uint64_t modelled_count(std::uint64_t event) {
    using pmc_model::Kind;
    ThreadModel* model = &this_thread();
#if defined(PMC_PLUGIN_FAULT_SWAP) // the planted fault (tests/emulate): another live thread's model
    model = &threads::next_live(*model);
#endif
    const pmc_model::CacheCounts& c = model->caches.counts();
    const auto at = [](Kind k) { return pmc_model::CacheCounts::at(k); };
    switch (event) {
    case 1: return c.Dr();
    case 2: return c.D1mr();
    case 3: return c.Dw();
    case 4: return c.D1mw();
    case 5: return c.I1mr();
    case 6: return c.ll[at(Kind::read)].accesses;
    case 7: return c.DLmr();
    case 8: return c.ll[at(Kind::write)].accesses;
    case 9: return c.DLmw();
    case 10: return c.ll[0].accesses + c.ll[1].accesses + c.ll[2].accesses;
    case 11: return c.ILmr() + c.DLmr() + c.DLmw();
    default: return ~std::uint64_t{0};
    }
}

/// Starts the cache model, or says why it cannot ("" if it can, or is off).
inline std::string start() {
    if (!settings.on) return "";
    if (std::string p = pmc_model::config_problem(settings.config); !p.empty()) return p;
    return threads::start();
}

/// Cachegrind's fields of `c` in the report line's order (Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw LLi LLr LLw).
inline std::array<unsigned long long, 12> report_fields(const pmc_model::CacheCounts& c) {
    return {c.Ir(),  c.I1mr(), c.ILmr(), c.Dr(),  c.D1mr(), c.DLmr(), c.Dw(), c.D1mw(), c.DLmw(), c.ll[0].accesses,
            c.ll[1].accesses, c.ll[2].accesses};
}

/// The process's cache counts since its last report line, as one: "pid N cache Ir A I1mr B ILmr C Dr D D1mr E
/// DLmr F Dw G D1mw H DLmw I LLi J LLr K LLw L\n" (Cachegrind's names and meanings; LLi, LLr, LLw: the LL's
/// accesses by fetches, reads and writes, which an L2 makes fewer than the L1 misses).
inline std::string report_line(long pid) {
    const auto f = report_fields(threads::since_last_report());
    char line[512];
    std::snprintf(line, sizeof line,
                  "pid %ld cache Ir %llu I1mr %llu ILmr %llu Dr %llu D1mr %llu DLmr %llu Dw %llu D1mw %llu DLmw %llu "
                  "LLi %llu LLr %llu LLw %llu\n",
                  pid, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11]);
    return line;
}

/// The same counts so far, without taking them, for the progress file (progress_file.hpp's order).
inline std::array<unsigned long long, 12> counts_so_far() { return report_fields(threads::peek_since_last_report()); }

/// In a fork child: only the forking thread lives on, and what it counted belongs to the parent's report. A thread
/// that was translating a block at the fork held blocks_lock and is gone: the child's lock starts free.
inline void in_fork_child() {
    new (&blocks_lock) std::mutex;
    plan_arena.in_fork_child();
    threads::in_fork_child();
}

} // namespace plugin_cache
