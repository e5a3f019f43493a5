// SPDX-License-Identifier: MIT
// plugin_sampling.hpp: load-latency sampling under `pmc emulate --cache`, inside pmc's QEMU plugin (included by
// plugin_cache.hpp, which feeds it, and answered by qemu_plugin.cpp's system call handler).
//
// A program's pmc::Sampler opened on a load-latency event (cpu/mem-loads,ldlat=N/P) asks for it with
// Op::sampler_open and starts it with Op::sampler_start (pmc/detail/emulated.hpp). From then on every load of the calling thread that the cache model
// completes comes here with the level that served it (plugin_cache's ThreadModel::complete), and
// pmc_model::LoadSampler takes every period-th load whose modelled latency reaches the threshold. Which loads are
// sampled depends on that thread's loads alone, so two runs of a program give the same samples. The samples wait
// in a bounded queue (the size of the program's ring, as the kernel's: more are counted as lost) until
// Op::sampler_drain writes them into the program's buffer as the kernel's PERF_RECORD_SAMPLE records, with the
// fields the program asked for, and a PERF_RECORD_LOST record for what was dropped: pmc::Sampler decodes them with
// the code that reads the kernel's ring. A drain is a system call, which ends the emulator's block: every load
// before it has been counted and, if its turn came, sampled.
//
// With samples=DIR (pmc sample --emulate), every thread of the program gets a sampler at its start (its first block,
// when plugin_cache makes its model), counting from its first load, and the program opens none itself: the samples go
// to DIR/PID.samples in the same record layout (whole_program_sample_fields), written whenever a thread's queue
// fills, at its exit and at the process's exit or execve; the report file gets the process's loads and samples.
// DIR/PID.maps gets the image's start, a fork's parent and each mapping call of the program (mmap, munmap, mremap,
// brk, at its return), between the preload library's readings of the guest's /proc/self/maps
// (tools/emulate/stay_emulated.cpp): what pmc attributes the samples with.
//
// Cost: with no sampler open, one thread-local load and a branch per load the model completes.
#pragma once

#include "append_file.hpp"
#include "model/load_sampler.hpp"

#include <pmc/detail/emulated.hpp>

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace plugin_sampling {

namespace proto = pmc::detail::emulated;

/// One pending sample, as the model gave it.
struct Pending {
    pmc_model::LoadSample load;
    std::uint64_t time;
};

/// One open sampler: the loads of the thread that opened it.
struct Sampler {
    std::uint64_t id;
    std::uint64_t sample_type;
    std::uint32_t min_latency;
    std::uint32_t pid, tid;
    pmc_model::LoadSampler loads;
    bool to_file = false; ///< a whole-program sampler (samples=DIR): a full queue is written out, not lost
    bool inherit = false; ///< it follows the threads the process creates after its open (their samplers: `members`)
    std::uint64_t root = 0;            ///< a member: the id of the inherit sampler whose drains take its samples
    std::vector<std::uint64_t> members; ///< an inherit sampler: its members' ids (under samplers_lock)
    std::atomic<bool> running{true};
    std::atomic<bool> forgotten{false}; ///< its thread no longer points at it (it may be freed)
    /// `loads`' counts as the sampled thread last left them, for a drain or stop from another thread
    std::atomic<std::uint64_t> counted{0}, sampled{0};

    std::mutex lock; // the sampled thread adds, the draining thread (any) takes
    std::vector<Pending> pending; ///< a ring of `capacity`
    std::size_t head = 0, size = 0;
    std::uint64_t lost = 0, lost_reported = 0;

    Sampler(std::uint64_t id_, const proto::SamplerRequest& r, std::uint32_t pid_, std::uint32_t tid_)
        : id(id_), sample_type(r.sample_type), min_latency(static_cast<std::uint32_t>(r.min_latency)), pid(pid_),
          tid(tid_), loads(r.period), pending(static_cast<std::size_t>(r.capacity)) {}
};

inline std::mutex samplers_lock;
inline std::map<std::uint64_t, std::unique_ptr<Sampler>> samplers;
inline std::uint64_t next_id = 1;
/// The calling thread's running sampler, or null: what each load checks (initial-exec TLS, a plain load).
inline __attribute__((tls_model("initial-exec"))) thread_local Sampler* current = nullptr;
/// The calling thread's copy of `current != nullptr` in its cache model (plugin_cache's call per access tests it
/// with the model's other state in one instruction), or null before that model is made: set_current keeps it.
inline __attribute__((tls_model("initial-exec"))) thread_local std::uint8_t* current_mirror = nullptr;
inline void set_current(Sampler* s) noexcept {
    current = s;
    if (current_mirror) *current_mirror = s != nullptr ? 1 : 0;
}

/// pmc sample --emulate (samples=DIR): every thread sampled from its start, the records written to files.
struct WholeProgram {
    std::string dir;               ///< samples=DIR ("" : off)
    std::uint64_t period = 0;      ///< sample_period=N
    std::uint32_t min_latency = 3; ///< sample_ldlat=N
    // This process's figures (under samplers_lock): of its exited threads, and those already in a report line.
    std::uint64_t exited_loads = 0, exited_samples = 0, threads = 0, unwritten = 0;
    std::uint64_t reported_loads = 0, reported_samples = 0, reported_threads = 0, reported_unwritten = 0;
    /// Records written by this process: past `max_written`, the rest are dropped and counted as unwritten, so that
    /// a small period on a long program cannot fill the disk (64 bytes a record: 256 MiB a process).
    std::atomic<std::uint64_t> written{0};
    static constexpr std::uint64_t max_written = std::uint64_t{1} << 22;
};
inline WholeProgram whole;

/// The model's latencies, the same for every sampler (stated figures, pmc_model::LoadLatencies).
inline const pmc_model::LoadLatencies latencies{};

inline void write_out(Sampler& s); // (a whole-program sampler's queue, to its file; under s.lock)

__attribute__((noinline)) inline void take(Sampler& s, std::uint64_t ip, std::uint64_t address,
                                          pmc_model::Level level) {
    if (!s.running.load(std::memory_order_relaxed)) { // stopped from another thread
        set_current(nullptr);
        s.forgotten.store(true);
        return;
    }
    if (latencies.of(level) < s.min_latency) return; // below the threshold: not a candidate, as with ldlat
    pmc_model::LoadSample sample;
    const bool take_it = s.loads.load(ip, address, level, sample);
    s.counted.store(s.loads.loads(), std::memory_order_relaxed);
    if (!take_it) return;
    s.sampled.store(s.loads.samples(), std::memory_order_relaxed);
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    std::lock_guard<std::mutex> hold(s.lock);
    if (s.size == s.pending.size()) {
        if (!s.to_file) {
            ++s.lost;
            return;
        }
        write_out(s);
    }
    s.pending[(s.head + s.size) % s.pending.size()] =
        Pending{sample, static_cast<std::uint64_t>(now.tv_sec) * 1000000000u + static_cast<std::uint64_t>(now.tv_nsec)};
    ++s.size;
}

/// One load the cache model completed for this thread, served at `level`.
inline void on_load(std::uint64_t ip, std::uint64_t address, pmc_model::Level level) noexcept {
    if (__builtin_expect(current != nullptr, 0)) take(*current, ip, address, level);
}

/// The size of one record with `sample_type`'s fields.
inline std::size_t record_size(std::uint64_t sample_type) {
    std::size_t n = sizeof(perf_event_header);
    for (std::uint64_t f : {PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ADDR, PERF_SAMPLE_CPU,
                            PERF_SAMPLE_PERIOD, PERF_SAMPLE_DATA_SRC})
        if (sample_type & f) n += 8;
    if (sample_type & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) n += 8;
    return n;
}

/// Appends one PERF_RECORD_SAMPLE in the kernel's layout for `sample_type`.
inline void write_sample(std::vector<unsigned char>& out, const Sampler& s, const Pending& p) {
    const std::size_t at = out.size();
    out.resize(at + record_size(s.sample_type));
    unsigned char* w = out.data() + at;
    const auto put = [&w](std::uint64_t v) {
        std::memcpy(w, &v, 8);
        w += 8;
    };
    perf_event_header h{};
    h.type = PERF_RECORD_SAMPLE;
    h.misc = PERF_RECORD_MISC_USER;
    h.size = static_cast<std::uint16_t>(record_size(s.sample_type));
    std::memcpy(w, &h, sizeof h);
    w += sizeof h;
    const std::uint64_t t = s.sample_type;
    if (t & PERF_SAMPLE_IP) put(p.load.ip);
    if (t & PERF_SAMPLE_TID) put(std::uint64_t{s.pid} | std::uint64_t{s.tid} << 32);
    if (t & PERF_SAMPLE_TIME) put(p.time);
    if (t & PERF_SAMPLE_ADDR) put(p.load.address);
    if (t & PERF_SAMPLE_CPU) put(0);
    if (t & PERF_SAMPLE_PERIOD) put(s.loads.period());
    if (t & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) put(p.load.latency); // var1: the latency
    if (t & PERF_SAMPLE_DATA_SRC) put(p.load.data_source);
}

inline void write_lost(std::vector<unsigned char>& out, std::uint64_t id, std::uint64_t lost) {
    perf_event_header h{};
    h.type = PERF_RECORD_LOST;
    h.size = sizeof h + 16;
    const std::size_t at = out.size();
    out.resize(at + h.size);
    std::memcpy(out.data() + at, &h, sizeof h);
    std::memcpy(out.data() + at + sizeof h, &id, 8);
    std::memcpy(out.data() + at + sizeof h + 8, &lost, 8);
}

inline void fill_counts(Sampler& s, proto::SamplerRequest& r) { // under s.lock
    r.loads = s.counted.load(std::memory_order_relaxed);
    r.samples = s.sampled.load(std::memory_order_relaxed);
    r.lost = s.lost;
    r.pending = s.size;
}

/// A sampler and, for an inherit sampler, its members that still exist. Under samplers_lock.
inline std::vector<Sampler*> group(Sampler& s) {
    std::vector<Sampler*> all{&s};
    for (std::uint64_t id : s.members)
        if (auto m = samplers.find(id); m != samplers.end()) all.push_back(m->second.get());
    return all;
}

/// The counts of a sampler and its members, summed (`inherit`: the threads). Under samplers_lock.
inline void fill_group_counts(Sampler& s, proto::SamplerRequest& r) {
    proto::SamplerRequest sum;
    r.loads = r.samples = r.lost = r.pending = 0;
    for (Sampler* m : group(s)) {
        std::lock_guard<std::mutex> hold(m->lock);
        fill_counts(*m, sum);
        r.loads += sum.loads, r.samples += sum.samples, r.lost += sum.lost, r.pending += sum.pending;
    }
    r.inherit = static_cast<std::uint32_t>(1 + s.members.size());
}

/// The running inherit sampler of this process, or null. Under samplers_lock.
inline Sampler* following() {
    for (auto& [id, s] : samplers)
        if (s->inherit && s->running.load()) return s.get();
    return nullptr;
}

/// Answers one sampler_* request from the calling thread. `model_on`: the run has the cache model. For a drain,
/// `records` gets what to write at r.buffer (r.buffer_size is set to its size).
inline void handle(proto::Op op, proto::SamplerRequest& r, bool model_on, std::vector<unsigned char>& records) {
    using E = proto::SamplerError;
    r.error = static_cast<std::uint32_t>(E::none);
    if (!model_on) {
        r.error = static_cast<std::uint32_t>(E::no_model);
        return;
    }
    if (op == proto::Op::sampler_open) {
        if (!whole.dir.empty()) {
            r.error = static_cast<std::uint32_t>(E::whole_program);
            return;
        }
        if (r.period == 0 || r.capacity == 0 || (r.sample_type & ~proto::sampler_fields) != 0 ||
            r.capacity > (std::uint64_t{1} << 24)) {
            r.error = static_cast<std::uint32_t>(E::bad_request);
            return;
        }
        if (current) {
            r.error = static_cast<std::uint32_t>(E::thread_busy);
            return;
        }
        std::lock_guard<std::mutex> hold(samplers_lock);
        if (r.inherit && following()) {
            r.error = static_cast<std::uint32_t>(E::inherit_busy);
            return;
        }
        const std::uint64_t id = next_id++;
        auto s = std::make_unique<Sampler>(id, r, static_cast<std::uint32_t>(::getpid()),
                                           static_cast<std::uint32_t>(::syscall(SYS_gettid)));
        s->inherit = r.inherit != 0;
        samplers.emplace(id, std::move(s));
        r.id = id;
        r.latencies[0] = latencies.l1, r.latencies[1] = latencies.l2, r.latencies[2] = latencies.ll,
        r.latencies[3] = latencies.memory;
        return;
    }
    std::unique_lock<std::mutex> hold_all(samplers_lock);
    const auto found = samplers.find(r.id);
    if (found == samplers.end()) {
        r.error = static_cast<std::uint32_t>(E::unknown_id);
        return;
    }
    Sampler& s = *found->second;
    if (op == proto::Op::sampler_close) {
        // Freed once its thread no longer points at it; closed from another thread while the sampled thread runs
        // on, it stays allocated (that thread sees `running` cleared at its next load). An inherit sampler's
        // members go with it.
        for (std::uint64_t m : std::vector<std::uint64_t>(s.members)) {
            auto member = samplers.find(m);
            if (member == samplers.end()) continue;
            member->second->running.store(false);
            if (current == member->second.get()) set_current(nullptr), member->second->forgotten.store(true);
            if (member->second->forgotten.load()) samplers.erase(member);
        }
        s.running.store(false);
        if (current == &s) set_current(nullptr), s.forgotten.store(true);
        if (s.forgotten.load()) samplers.erase(found);
        return;
    }
    if (op == proto::Op::sampler_start) {
        if (s.tid != static_cast<std::uint32_t>(::syscall(SYS_gettid))) {
            r.error = static_cast<std::uint32_t>(E::other_thread);
            return;
        }
        if (current && current != &s) {
            r.error = static_cast<std::uint32_t>(E::thread_busy);
            return;
        }
        set_current(&s);
        return;
    }
    if (op == proto::Op::sampler_stop) {
        s.running.store(false);
        if (current == &s) set_current(nullptr), s.forgotten.store(true);
        for (Sampler* m : group(s)) m->running.store(false); // (each member's thread sees it at its next load)
        fill_group_counts(s, r);
        return;
    }
    // sampler_drain: whole records up to the buffer's size, of each thread the sampler follows in turn; a LOST
    // record first where one dropped samples since.
    records.clear();
    const std::size_t room = static_cast<std::size_t>(r.buffer_size), one = record_size(s.sample_type);
    for (Sampler* m : group(s)) {
        std::lock_guard<std::mutex> hold(m->lock);
        if (m->lost != m->lost_reported && records.size() + sizeof(perf_event_header) + 16 <= room) {
            write_lost(records, s.id, m->lost - m->lost_reported);
            m->lost_reported = m->lost;
        }
        while (m->size && records.size() + one <= room) {
            write_sample(records, *m, m->pending[m->head]);
            m->head = (m->head + 1) % m->pending.size();
            --m->size;
        }
    }
    r.buffer_size = records.size();
    fill_group_counts(s, r);
}

// ---- the whole program, every thread from its start (samples=DIR: pmc sample --emulate) ----


/// Takes one plugin argument if it is the sampler's: true if it was (then `error` says what is wrong, or is "").
inline bool parse_argument(const char* arg, std::string& error) {
    const std::string a = arg;
    const auto eq = a.find('=');
    if (eq == std::string::npos) return false;
    const std::string name = a.substr(0, eq), value = a.substr(eq + 1);
    const auto number = [&](std::uint64_t& to) {
        char* end = nullptr;
        to = std::strtoull(value.c_str(), &end, 10);
        if (value.empty() || *end || value[0] == '-') error = name + "=" + value + ": a whole number";
    };
    if (name == "samples") {
        whole.dir = value;
        if (value.empty()) error = "samples=: a directory";
        return true;
    }
    if (name == "sample_period") {
        number(whole.period);
        if (error.empty() && whole.period == 0) error = "sample_period=0: a period of at least 1 load";
        return true;
    }
    if (name == "sample_ldlat") {
        std::uint64_t v = 0;
        number(v);
        whole.min_latency = static_cast<std::uint32_t>(v);
        return true;
    }
    return false;
}

/// "" if the arguments make sense together (`model_on`: cache=on), else why not.
inline std::string check_arguments(bool model_on) {
    if (whole.dir.empty()) return whole.period ? "sample_period= needs samples=DIR" : "";
    if (!model_on) return "samples=DIR samples loads from the cache model: give cache=on";
    if (!whole.period) return "samples=DIR needs sample_period=N";
    return "";
}

inline std::uint64_t monotonic_ns() {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<std::uint64_t>(now.tv_sec) * 1000000000u + static_cast<std::uint64_t>(now.tv_nsec);
}

/// Appends `n` bytes to DIR/PID.SUFFIX in one write (O_APPEND: the writes of threads and processes never mix).
/// This process's files (a reserve descriptor each, for a guest that has none left at its exit: append_file.hpp).
inline plugin_files::AppendFile samples_file, maps_file;
inline bool append_to(std::uint32_t pid, const char* suffix, const void* data, std::size_t n) {
    const std::string path = whole.dir + "/" + std::to_string(pid) + suffix;
    for (plugin_files::AppendFile* own : {&samples_file, &maps_file}) {
        if (own->path() == path) return own->append(data, n) == 0;
    }
    plugin_files::AppendFile other; // (another process's: none now)
    other.set_path(path);
    const bool ok = other.append(data, n) == 0;
    other.close_reserve();
    return ok;
}
/// At an image's start and in a fork child: this process's files. The samples file is made now (empty until its
/// first samples, which may come at the exit of a program that has used up its descriptors), with its reserve.
inline void name_own_files() {
    const std::string own = whole.dir + "/" + std::to_string(::getpid());
    samples_file.set_path(own + ".samples");
    samples_file.open_reserve();
    maps_file.set_path(own + ".maps");
}

/// A line between the readings of DIR/PID.maps: "pmc-maps TIME start" at an image's start, "pmc-maps TIME fork PPID"
/// in a fork child (its maps are its parent's at that time until it reads its own).
inline void mark_maps(const char* what, long parent = 0) {
    char line[96];
    const int n = parent ? std::snprintf(line, sizeof line, "pmc-maps %llu %s %ld\n",
                                         static_cast<unsigned long long>(monotonic_ns()), what, parent)
                         : std::snprintf(line, sizeof line, "pmc-maps %llu %s\n",
                                         static_cast<unsigned long long>(monotonic_ns()), what);
    append_to(static_cast<std::uint32_t>(::getpid()), ".maps", line, static_cast<std::size_t>(n));
}

// ---- the program's own mapping calls, between the readings (samples=DIR) ----
//
// The preload library reads the guest's maps only at an image's start and exit: memory mapped and unmapped between
// (a file mapped to be read, a large malloc block freed, a thread's stack) would leave its samples unnamed. So each
// successful mmap, munmap, mremap and brk of the guest becomes a line stamped with the clock the samples use, taken at
// the call's return: before the program can touch a new mapping, after its last touch of a removed one. The lines
// wait in a buffer of the process (a program that maps and unmaps in a loop would otherwise pay an open, a write
// and a close per call) and go to DIR/PID.maps before any sample is written, and at the process's exit or execve:
// every sample on file has the lines stamped before it. pmc replays them in time order (tools/sample.cpp,
// LiveMappings). Host work only: nothing here runs guest code, so no count changes.

/// The target's numbers for the calls that change the mappings (set at install; -1: none).
struct MappingCallNumbers {
    long mmap = -1, munmap = -1, mremap = -1, brk = -1;
};
inline MappingCallNumbers mapping_call_numbers;

/// A mapping call in flight on this thread: its number and arguments, from its entry to its return.
struct MappingCall {
    long number = -1;
    std::uint64_t args[6] = {};
    std::string path; ///< mmap of a file: the file's path at the call (its descriptor may be closed at once after)
};
inline thread_local MappingCall mapping_call;

/// The process's mapping lines not yet in DIR/PID.maps.
inline std::mutex mapping_lines_lock;
inline std::string mapping_lines;

/// Appends the waiting mapping lines to DIR/PID.maps (one write). Under mapping_lines_lock.
inline void write_mapping_lines() {
    if (mapping_lines.empty()) return;
    append_to(static_cast<std::uint32_t>(::getpid()), ".maps", mapping_lines.data(), mapping_lines.size());
    mapping_lines.clear();
}
inline void flush_mapping_lines() {
    if (whole.dir.empty()) return;
    std::lock_guard<std::mutex> hold(mapping_lines_lock);
    write_mapping_lines();
}

/// At a system call's entry: keeps the arguments of a mapping call (their results come at its return).
inline void mapping_call_starts(long number, std::uint64_t a1, std::uint64_t a2, std::uint64_t a3, std::uint64_t a4,
                                std::uint64_t a5, std::uint64_t a6) {
    const MappingCallNumbers& n = mapping_call_numbers;
    if (whole.dir.empty() || (number != n.mmap && number != n.munmap && number != n.mremap && number != n.brk)) {
        mapping_call.number = -1;
        return;
    }
    mapping_call.number = number;
    const std::uint64_t args[6] = {a1, a2, a3, a4, a5, a6};
    std::memcpy(mapping_call.args, args, sizeof args);
    mapping_call.path.clear();
    constexpr std::uint64_t map_anonymous = 0x20; // (the same on x86-64 and AArch64)
    const auto fd = static_cast<std::int64_t>(a5);
    if (number == n.mmap && !(a4 & map_anonymous) && fd >= 0 && fd < (std::int64_t{1} << 31)) {
        // In user mode the plugin runs in the guest's process: the guest's descriptor is this process's.
        char link[64], target[4096];
        std::snprintf(link, sizeof link, "/proc/self/fd/%lld", static_cast<long long>(fd));
        const ssize_t got = ::readlink(link, target, sizeof target - 1);
        if (got > 0) mapping_call.path.assign(target, static_cast<std::size_t>(got));
        for (char& c : mapping_call.path)
            if (c == '\n') c = '?'; // (one line per change)
    }
}

/// At a system call's return: the mapping call that succeeded, as a line for DIR/PID.maps (written when 64 KiB wait):
///     pmc-maps TIME map BEGIN LENGTH PROT FLAGS OFFSET [PATH]      (PATH: a file's, none for anonymous memory)
///     pmc-maps TIME unmap BEGIN LENGTH
///     pmc-maps TIME remap OLD OLD_LENGTH NEW NEW_LENGTH FLAGS
///     pmc-maps TIME brk BREAK
/// Addresses are the guest's, in hexadecimal; TIME is CLOCK_MONOTONIC in ns, as the samples' time.
inline void mapping_call_returns(long number, std::int64_t result) {
    if (mapping_call.number < 0 || number != mapping_call.number) return;
    mapping_call.number = -1;
    if (result < 0 && result > -4096) return; // failed: nothing changed
    const MappingCallNumbers& n = mapping_call_numbers;
    const std::uint64_t* a = mapping_call.args;
    const auto ret = static_cast<std::uint64_t>(result);
    const auto hex = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    std::string line(160 + mapping_call.path.size(), '\0');
    int length = 0;
    const unsigned long long now = monotonic_ns();
    if (number == n.mmap)
        length = std::snprintf(line.data(), line.size(), "pmc-maps %llu map %llx %llx %llx %llx %llx%s%s\n", now,
                               hex(ret), hex(a[1]), hex(a[2]), hex(a[3]), hex(a[5]),
                               mapping_call.path.empty() ? "" : " ", mapping_call.path.c_str());
    else if (number == n.munmap)
        length = std::snprintf(line.data(), line.size(), "pmc-maps %llu unmap %llx %llx\n", now, hex(a[0]), hex(a[1]));
    else if (number == n.mremap)
        length = std::snprintf(line.data(), line.size(), "pmc-maps %llu remap %llx %llx %llx %llx %llx\n", now,
                               hex(a[0]), hex(a[1]), hex(ret), hex(a[2]), hex(a[3]));
    else if (number == n.brk)
        length = std::snprintf(line.data(), line.size(), "pmc-maps %llu brk %llx\n", now, hex(ret));
    if (length <= 0 || static_cast<std::size_t>(length) >= line.size()) return;
    std::lock_guard<std::mutex> hold(mapping_lines_lock);
    mapping_lines.append(line.data(), static_cast<std::size_t>(length));
    if (mapping_lines.size() >= (std::size_t{1} << 16)) write_mapping_lines();
}

inline void write_out(Sampler& s) { // under s.lock
    if (!s.size) return;
    if (whole.written.fetch_add(s.size) + s.size > WholeProgram::max_written) { // (said in the report line)
        s.lost += s.size;
        s.head = s.size = 0;
        return;
    }
    flush_mapping_lines(); // (first: the samples' mappings are on file before them)
    // A buffer of this call's (one allocation a batch of up to 4,096): a thread_local one is destroyed before the
    // thread-exit callback (a pthread key's destructor) writes the thread's last batch, which then wrote into freed
    // memory (ThreadSanitizer: heap-use-after-free, once a thread had written a batch itself).
    std::vector<unsigned char> records;
    records.reserve(s.size * record_size(s.sample_type));
    const std::size_t taken = s.size;
    while (s.size) {
        write_sample(records, s, s.pending[s.head]);
        s.head = (s.head + 1) % s.pending.size();
        --s.size;
    }
    if (!append_to(s.pid, ".samples", records.data(), records.size())) s.lost += taken; // (said in the report line)
}

/// On a new thread (its first block): its whole-program sampler, from its first load.
inline void thread_starts() {
    if (current) return;
    if (whole.dir.empty()) { // a thread created while an inherit sampler runs: a member of it, from its first load
        std::lock_guard<std::mutex> hold(samplers_lock);
        Sampler* root = following();
        if (!root) return;
        proto::SamplerRequest r;
        r.period = root->loads.period();
        r.sample_type = root->sample_type;
        r.min_latency = root->min_latency;
        r.capacity = root->pending.size();
        const std::uint64_t id = next_id++;
        auto s = std::make_unique<Sampler>(id, r, static_cast<std::uint32_t>(::getpid()),
                                           static_cast<std::uint32_t>(::syscall(SYS_gettid)));
        s->root = root->id;
        root->members.push_back(id);
        set_current(s.get());
        samplers.emplace(id, std::move(s));
        return;
    }
    proto::SamplerRequest r;
    r.period = whole.period;
    r.sample_type = proto::whole_program_sample_fields;
    r.min_latency = whole.min_latency;
    r.capacity = 4096; // samples between two writes
    std::lock_guard<std::mutex> hold(samplers_lock);
    const std::uint64_t id = next_id++;
    auto s = std::make_unique<Sampler>(id, r, static_cast<std::uint32_t>(::getpid()),
                                       static_cast<std::uint32_t>(::syscall(SYS_gettid)));
    s->to_file = true;
    set_current(s.get());
    samplers.emplace(id, std::move(s));
    ++whole.threads;
}

/// On a thread that exits: its samples written, its counts kept for the process's report line.
inline void thread_exits() {
    Sampler* s = current;
    if (s && !s->to_file) { // its samples wait for the drains of the sampler it belongs to (or its own)
        std::lock_guard<std::mutex> hold_all(samplers_lock);
        set_current(nullptr);
        s->forgotten.store(true);
        return;
    }
    if (!s) return;
    set_current(nullptr);
    std::lock_guard<std::mutex> hold_all(samplers_lock);
    {
        std::lock_guard<std::mutex> hold(s->lock);
        write_out(*s);
        whole.exited_loads += s->loads.loads();
        whole.exited_samples += s->loads.samples();
        whole.unwritten += s->lost;
    }
    samplers.erase(s->id);
}

/// The target's numbers for kill, tkill and tgkill (set at install; -1: none).
struct SignalCallNumbers {
    long kill = -1, tkill = -1, tgkill = -1;
};
inline SignalCallNumbers signal_call_numbers;

/// At a system call's entry: a signal the process sends itself whose default action ends it (abort()'s SIGABRT,
/// raise(SIGTERM), kill(getpid(), ...)) has every thread's pending samples written first. QEMU 7.2 ends such a
/// process without the plugin's exit callback (QEMU 10 calls it), so the samples a batch held would be lost; a
/// process ends after the call, with no load after it, so the files then hold every sample it took. If a handler
/// catches the signal instead, the samples it takes later are written as usual. Host work only: no count changes.
inline void write_before_death();
inline void signal_call_starts(long number, std::uint64_t a1, std::uint64_t a2, std::uint64_t a3) {
    const SignalCallNumbers& n = signal_call_numbers;
    if (whole.dir.empty() || number < 0 || (number != n.kill && number != n.tkill && number != n.tgkill)) return;
    const auto pid = static_cast<std::int64_t>(static_cast<std::int32_t>(a1));
    const std::uint64_t sig = number == n.tgkill ? a3 : a2;
    const bool to_self = number == n.kill ? pid == ::getpid() || pid <= 0   // (0, -1, -PGID: its group may hold it)
                         : number == n.tgkill ? pid == ::getpid()
                                              : true; // tkill: a thread id, most likely one of its own
    // Signals whose default action is not to end the process: SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN,
    // SIGTTOU, SIGURG, SIGWINCH (17 to 23 and 28 on x86-64 and AArch64); 0 sends nothing.
    const bool ends = sig != 0 && sig < 65 && !(sig >= 17 && sig <= 23) && sig != 28;
    if (to_self && ends) write_before_death();
}

/// Every thread's pending samples (and the mapping lines before them) written now: the process is about to end
/// with no exit callback (QEMU 7.2). Host work only: no count changes.
inline void write_before_death() {
    if (whole.dir.empty()) return;
    flush_mapping_lines();
    std::lock_guard<std::mutex> hold_all(samplers_lock);
    for (auto& [id, sampler] : samplers) {
        if (!sampler->to_file) continue;
        std::lock_guard<std::mutex> hold(sampler->lock);
        write_out(*sampler);
    }
}

/// The process's loads and samples since its last report line, as one: "pid N loads L samples S threads T unwritten
/// U\n" (L: the loads sampled from; S: the samples taken; U: those not written, past max_written or a write failed). Every thread's queue is
/// written first.
inline std::string report_line(long pid) {
    flush_mapping_lines();
    std::lock_guard<std::mutex> hold_all(samplers_lock);
    std::uint64_t loads = whole.exited_loads, samples = whole.exited_samples, unwritten = whole.unwritten;
    for (auto& [id, s] : samplers) {
        if (!s->to_file) continue;
        std::lock_guard<std::mutex> hold(s->lock);
        write_out(*s);
        loads += s->counted.load(std::memory_order_relaxed);
        samples += s->sampled.load(std::memory_order_relaxed);
        unwritten += s->lost;
    }
    char line[160];
    std::snprintf(line, sizeof line, "pid %ld loads %llu samples %llu threads %llu unwritten %llu\n", pid,
                  static_cast<unsigned long long>(loads - whole.reported_loads),
                  static_cast<unsigned long long>(samples - whole.reported_samples),
                  static_cast<unsigned long long>(whole.threads - whole.reported_threads),
                  static_cast<unsigned long long>(unwritten - whole.reported_unwritten));
    whole.reported_loads = loads, whole.reported_samples = samples, whole.reported_threads = whole.threads;
    whole.reported_unwritten = unwritten;
    return line;
}

/// In a fork child: the samplers are the parent's; the child's thread samples on into its own copy. A whole-program
/// child starts afresh, as a new thread: its thread's sampler counts from zero (the samples it held are the parent's
/// to write), the other threads' are gone.
inline void in_fork_child() {
    new (&samplers_lock) std::mutex;
    new (&mapping_lines_lock) std::mutex;
    mapping_lines.clear(); // (the parent's: it writes them)
    for (auto& [id, s] : samplers) new (&s->lock) std::mutex;
    if (whole.dir.empty()) { // an inherit sampler's members on other threads are the parent's
        for (auto it = samplers.begin(); it != samplers.end();)
            it = it->second->root && it->second.get() != current ? samplers.erase(it) : std::next(it);
        for (auto& [id, s] : samplers) {
            std::vector<std::uint64_t> kept;
            for (std::uint64_t m : s->members)
                if (samplers.count(m)) kept.push_back(m);
            s->members = kept;
        }
        return;
    }
    for (auto it = samplers.begin(); it != samplers.end();)
        it = it->second->to_file && it->second.get() != current ? samplers.erase(it) : std::next(it);
    whole.exited_loads = whole.exited_samples = whole.unwritten = 0;
    whole.reported_loads = whole.reported_samples = whole.reported_threads = whole.reported_unwritten = 0;
    whole.threads = 0;
    whole.written.store(0);
    if (Sampler* s = current; s && s->to_file) {
        s->loads = pmc_model::LoadSampler(whole.period);
        s->counted.store(0), s->sampled.store(0);
        s->head = s->size = 0;
        s->lost = s->lost_reported = 0;
        s->pid = static_cast<std::uint32_t>(::getpid());
        s->tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
        whole.threads = 1;
    }
    name_own_files();
    mark_maps("fork", static_cast<long>(::getppid()));
}

} // namespace plugin_sampling
