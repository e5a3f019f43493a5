// SPDX-License-Identifier: MIT
// pmc/event.hpp: perf-style event strings -> perf_event_attr.
//
// Accepted syntax (the attr matches what `perf stat -vv -e EVENT` prints; see docs/events.md for the details):
//   instructions, cycles, branch-misses, ...          generic hardware events       (PERF_TYPE_HARDWARE)
//   task-clock, page-faults, minor-faults, cs, ...    software events               (PERF_TYPE_SOFTWARE)
//   L1-dcache-load-misses, LLC-loads, dTLB-load-misses hardware-cache events         (PERF_TYPE_HW_CACHE)
//   r01cb                                             raw hex config                (PERF_TYPE_RAW)
//   4:1                                               numeric type:config
//   cpu/event=0x2c,umask=0x1/u                        PMU terms, packed through sysfs format/ bit ranges
//   msr/tsc/, cpu/mem-loads,ldlat=30/, mem-loads       sysfs named events, with or without their PMU
//   mem:0x1000/8:w                                    hardware breakpoint           (PERF_TYPE_BREAKPOINT)
// followed by modifiers: ":u" ":k" ":h" ":G" ":H" ":I" ":p" ":pp" ":ppp" ":P" ":D" ":e" ":S" ":W" ":b" (after a
// PMU's closing slash without the colon: "cpu/event=0x2c/u").
// Two names are pmc's own clocks rather than perf events: "wall-time" (nanoseconds from the TSC) and "tsc" (the
// serialized time-stamp counter). perf's bare "tsc" means msr/tsc/; write that for the perf event.
// Two are composites, after measureme: "instructions-minus-irqs:u" (user-mode instructions retired minus the
// hardware interrupts taken, each of which adds one to the user count; the interrupt event comes from the CPU
// tables in pmc/cpu.hpp) and, on AMD Zen, "instructions-minus-r0420:u" (minus the undocumented r0420, which
// appears to count interrupts and exceptions). Both are opened as one group and read with two rdpmc.
#pragma once

#include <pmc/config.hpp>
#include <pmc/cpu.hpp>
#include <pmc/detail/text.hpp>
#include <pmc/error.hpp>
#include <pmc/pmu.hpp>

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

PMC_BEGIN_NAMESPACE

/// What kind of counter an event string names.
enum class EventKind {
    perf,      ///< a kernel perf event, opened with perf_event_open
    tsc,       ///< pmc's "tsc": the serialized time-stamp counter, in ticks
    wall_time, ///< pmc's "wall-time": nanoseconds derived from the TSC
    difference, ///< a composite: `attr` minus `minus_attr`, opened as one group (instructions-minus-irqs:u)
};

/// A parsed event string: everything needed to open it, and to explain it.
struct EventSpec {
    std::string text;          ///< the string as given (trimmed)
    std::string name;          ///< display name: the name= term if given, else `text`
    EventKind kind = EventKind::perf;
    perf_event_attr attr{};    ///< the encoded attributes (meaningful for EventKind::perf)
    std::string pmu;           ///< the sysfs PMU named or found ("" for generic hardware/software/cache events)
    std::string modifiers;     ///< the modifier letters as written
    bool core_pmu = false;     ///< counts on the CPU's PMU (hardware, cache, raw events): fails without a PMU
    bool guest_host_explicit = false; ///< G or H given: pmc must not drop exclude_guest to get the event opened
    bool precise_max = false;  ///< P given: use the highest precise_ip level the kernel accepts
    std::uint64_t sample_period = 0; ///< period= term: kept for sampling; counting ignores it, as perf stat does
    std::uint64_t sample_freq = 0;   ///< freq= term: likewise
    perf_event_attr minus_attr{};    ///< EventKind::difference: the event subtracted from `attr`
    std::string minus_text;          ///< its event string, e.g. "r01cb:u"
    std::string minus_name;          ///< its vendor name, e.g. "HW_INTERRUPTS.RECEIVED"
};

namespace detail {

struct NamedConfig {
    const char* name;
    std::uint64_t config;
};

// perf's generic event names (tools/perf/util/parse-events.l), kernel ABI values from linux/perf_event.h.
inline constexpr NamedConfig hardware_events[] = {
    {"cpu-cycles", PERF_COUNT_HW_CPU_CYCLES},
    {"cycles", PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_COUNT_HW_CACHE_MISSES},
    {"branch-instructions", PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branches", PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_COUNT_HW_BRANCH_MISSES},
    {"bus-cycles", PERF_COUNT_HW_BUS_CYCLES},
    {"stalled-cycles-frontend", PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"idle-cycles-frontend", PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"stalled-cycles-backend", PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    {"idle-cycles-backend", PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    {"ref-cycles", PERF_COUNT_HW_REF_CPU_CYCLES},
};

inline constexpr NamedConfig software_events[] = {
    {"cpu-clock", PERF_COUNT_SW_CPU_CLOCK},
    {"task-clock", PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_COUNT_SW_PAGE_FAULTS},
    {"context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cs", PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS},
    {"migrations", PERF_COUNT_SW_CPU_MIGRATIONS},
    {"minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"alignment-faults", PERF_COUNT_SW_ALIGNMENT_FAULTS},
    {"emulation-faults", PERF_COUNT_SW_EMULATION_FAULTS},
    {"dummy", PERF_COUNT_SW_DUMMY},
    {"bpf-output", 10},      // PERF_COUNT_SW_BPF_OUTPUT
    {"cgroup-switches", 11}, // PERF_COUNT_SW_CGROUP_SWITCHES
};

// Hardware-cache event spellings, as perf's lexer accepts them (case-sensitive).
struct CacheName {
    const char* name;
    unsigned id;
};
inline constexpr CacheName cache_types[] = {
    {"L1-dcache", 0}, {"l1-d", 0},  {"l1d", 0},   {"L1-data", 0},   {"L1-icache", 1}, {"l1-i", 1},
    {"l1i", 1},       {"L1-instruction", 1},      {"LLC", 2},       {"L2", 2},        {"dTLB", 3},
    {"d-tlb", 3},     {"Data-TLB", 3},            {"iTLB", 4},      {"i-tlb", 4},     {"Instruction-TLB", 4},
    {"branch", 5},    {"branches", 5}, {"bpu", 5}, {"btb", 5},      {"bpc", 5},       {"node", 6},
};
inline constexpr CacheName cache_ops[] = {
    {"load", 0},     {"loads", 0},      {"read", 0},           {"store", 1},           {"stores", 1},
    {"write", 1},    {"prefetch", 2},   {"prefetches", 2},     {"speculative-read", 2}, {"speculative-load", 2},
};
inline constexpr CacheName cache_results[] = {
    {"refs", 0}, {"Reference", 0}, {"ops", 0}, {"access", 0}, {"misses", 1}, {"miss", 1},
};
inline constexpr const char* cache_type_names[] = {"L1-dcache", "L1-icache", "LLC", "dTLB", "iTLB", "branch", "node"};
inline constexpr const char* cache_op_names[] = {"load", "store", "prefetch"};
// Which operations each cache type has (perf's evsel__hw_cache_stat): bit 0 load, 1 store, 2 prefetch.
inline constexpr unsigned cache_valid_ops[] = {7, 5, 7, 7, 1, 1, 7};

// Terms perf accepts inside pmu/.../ that pmc does not: they configure perf record, not a counter.
inline constexpr const char* record_only_terms[] = {
    "call-graph", "stack-size", "max-stack", "inherit", "no-inherit", "overwrite", "no-overwrite", "time",
    "branch_type", "percore", "aux-output", "aux-sample-size", "metric-id", "nr", "config3", "legacy-cache-config",
};

inline constexpr std::string_view modifier_letters = "ukhGHIpPSDeWb";

/// Edit distance, for "did you mean" suggestions.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

inline bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

/// A term inside pmu/.../ or in a sysfs event file: `name`, `name=value`.
struct Term {
    std::string name;
    std::string value; ///< as written ("" when there is no '=')
    bool has_value = false;
    std::size_t pos = 0, len = 0; ///< where it is in the user's string (for error carets)
    bool from_alias = false;
};

/// Recursive-descent parser over one event string. Each error carries the position of the bad token.
class EventParser {
public:
    EventParser(std::string_view text, std::string_view sysfs_root, const CpuModel& cpu)
        : full_(text), root_(sysfs_root), cpu_(cpu) {}

    Result<EventSpec> parse() {
        std::size_t begin = 0, end = full_.size();
        while (begin < end && is_space(full_[begin])) ++begin;
        while (end > begin && is_space(full_[end - 1])) --end;
        pos_ = begin;
        end_ = end;
        spec_.text = std::string(full_.substr(begin, end - begin));
        spec_.name = spec_.text;
        if (begin == end) return *fail(begin, 0, "the event string is empty");
        spec_.attr.size = sizeof(perf_event_attr);
        if (auto f = parse_event()) return std::move(*f);
        return std::move(spec_);
    }

private:
    using Fail = std::optional<Failure>;

    // A string_view: most reasons are literals, and a std::string parameter would build and destroy one at every
    // call site (there are dozens, all compiled in every file that opens a counter).
    BOOST_NOINLINE Fail fail(std::size_t pos, std::size_t len, std::string_view why, int err = EINVAL) const {
        std::string msg = concat({"cannot use event '", full_, "': ", why, "\n    ", full_, "\n    "});
        msg.append(pos, ' ');
        msg += '^';
        msg.append(len > 1 ? len - 1 : 0, '~');
        return make_failure(err, std::move(msg));
    }

    bool at_end() const { return pos_ >= end_; }
    char peek() const { return at_end() ? '\0' : full_[pos_]; }
    void skip_space() {
        while (!at_end() && is_space(full_[pos_])) ++pos_;
    }
    std::string_view take_word() {
        std::size_t start = pos_;
        while (!at_end() && is_word_char(full_[pos_])) ++pos_;
        return full_.substr(start, pos_ - start);
    }

    Fail parse_event() {
        std::size_t word_pos = pos_;
        if (full_.compare(pos_, 4, "mem:") == 0) return parse_breakpoint();
        std::string_view word = take_word();
        if (word.empty()) {
            if (peek() == '{' || peek() == '}')
                return fail(pos_, 1, "event groups {a,b} are not a single counter; open each event on its own");
            return fail(pos_, 1, concat({"unexpected '", full_.substr(pos_, 1), "': an event starts with a name"}));
        }
        if (peek() == '/') return parse_pmu_event(word, word_pos);
        if (peek() == ':' && all_digits(word)) return parse_numeric(word, word_pos);
        if (auto f = parse_named(word, word_pos)) return f;
        return parse_modifier_suffix(true);
    }

    static bool all_digits(std::string_view s) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    }

    // "4:1": perf's numeric type:config form.
    Fail parse_numeric(std::string_view type_word, std::size_t type_pos) {
        auto type = parse_number(type_word);
        if (!type || *type > UINT32_MAX) return fail(type_pos, type_word.size(), "type number out of range");
        ++pos_; // ':'
        std::size_t cfg_pos = pos_;
        std::string_view cfg_word = take_word();
        auto config = parse_number(cfg_word);
        if (!config) return fail(cfg_pos, cfg_word.size(), "expected a config number after 'TYPE:'");
        spec_.attr.type = static_cast<std::uint32_t>(*type);
        spec_.attr.config = *config;
        spec_.core_pmu = *type == PERF_TYPE_HARDWARE || *type == PERF_TYPE_HW_CACHE || *type == PERF_TYPE_RAW;
        return parse_modifier_suffix(true);
    }

    // A name without slashes: pmc clock, generic hardware/software event, cache event, raw event, sysfs alias.
    Fail parse_named(std::string_view word, std::size_t word_pos) {
        if (word == "instructions-minus-irqs" || word == "instructions-minus-r0420") return parse_composite(word, word_pos);
        if (word == "wall-time" || word == "tsc") {
            spec_.kind = word == "tsc" ? EventKind::tsc : EventKind::wall_time;
            if (!at_end())
                return fail(pos_, end_ - pos_,
                            concat({"'", word, "' is pmc's own clock and takes no modifiers (it counts in every mode)"}));
            return std::nullopt;
        }
        for (auto& e : hardware_events)
            if (word == e.name) return set_generic(PERF_TYPE_HARDWARE, e.config, true);
        for (auto& e : software_events)
            if (word == e.name) return set_generic(PERF_TYPE_SOFTWARE, e.config, false);
        if (word == "duration_time" || word == "user_time" || word == "system_time")
            return fail(word_pos, word.size(),
                        concat({"'", word, "' is computed by the perf tool, not counted by the kernel; use pmc's "
                                "'wall-time' or the software event 'task-clock'"}));
        if (auto cache = parse_cache(word, word_pos)) {
            if (cache->failure) return cache->failure;
            return set_generic(PERF_TYPE_HW_CACHE, cache->config, true);
        }
        if (word.size() > 1 && word[0] == 'r' &&
            std::all_of(word.begin() + 1, word.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
            auto config = parse_number(concat({"0x", word.substr(1)}));
            if (!config) return fail(word_pos, word.size(), "raw event value does not fit in 64 bits");
            return set_generic(PERF_TYPE_RAW, *config, true);
        }
        return parse_bare_alias(word, word_pos);
    }

    // instructions-minus-irqs:u and instructions-minus-r0420:u: user-mode instructions minus an interrupt event.
    Fail parse_composite(std::string_view word, std::size_t word_pos) {
        if (full_.substr(pos_, end_ - pos_) != ":u")
            return fail(pos_, std::max<std::size_t>(end_ - pos_, 1),
                        concat({word, " counts user mode only (interrupts add to the user-mode count): write '", word,
                                ":u'"}));
        std::string raw, name;
        if (word == "instructions-minus-irqs") {
            if (cpu_.irq_status == IrqEventStatus::none)
                return fail(word_pos, word.size(),
                            concat({"instructions-minus-irqs needs the CPU's hardware-interrupt event, and pmc knows "
                                    "none for ", cpu_.description(),
                                    "; use instructions:u (each interrupt then adds one instruction)"}),
                            ENOENT);
            raw = cpu_.irq_event;
            name = cpu_.irq_event_name;
        } else {
            if (cpu_.zen == 0)
                return fail(word_pos, word.size(),
                            concat({"r0420 is an AMD Zen event and this CPU is ", cpu_.description(),
                                    "; use instructions-minus-irqs:u"}),
                            ENOENT);
            raw = "r0420";
            name = "undocumented 0x0420 (interrupts and exceptions)";
        }
        auto minus = parse_number(concat({"0x", std::string_view(raw).substr(1)}));
        spec_.kind = EventKind::difference;
        spec_.core_pmu = true;
        spec_.modifiers = "u";
        for (perf_event_attr* a : {&spec_.attr, &spec_.minus_attr}) {
            a->size = sizeof(perf_event_attr);
            a->exclude_kernel = 1;
            a->exclude_hv = 1;
            a->exclude_guest = 1;
        }
        spec_.attr.type = PERF_TYPE_HARDWARE;
        spec_.attr.config = PERF_COUNT_HW_INSTRUCTIONS;
        spec_.minus_attr.type = PERF_TYPE_RAW;
        spec_.minus_attr.config = minus ? *minus : 0;
        spec_.minus_text = concat({raw, ":u"});
        spec_.minus_name = name;
        pos_ = end_;
        return std::nullopt;
    }

    Fail set_generic(std::uint32_t type, std::uint64_t config, bool core) {
        spec_.attr.type = type;
        spec_.attr.config = config;
        spec_.core_pmu = core;
        return std::nullopt;
    }

    struct CacheParse {
        std::uint64_t config = 0;
        Fail failure;
    };

    // TYPE-OP-RESULT, TYPE-OP, TYPE-RESULT or TYPE, e.g. L1-dcache-load-misses (perf's parse_events_add_cache).
    std::optional<CacheParse> parse_cache(std::string_view word, std::size_t word_pos) {
        for (auto& type : cache_types) {
            std::string_view tname = type.name;
            if (word.substr(0, tname.size()) != tname) continue;
            if (word.size() != tname.size() && word[tname.size()] != '-') continue;
            std::string_view rest = word.substr(tname.size());
            int op = -1, result = -1;
            std::size_t items = 0;
            bool ok = true;
            CacheParse out;
            while (ok && !rest.empty()) {
                rest.remove_prefix(1); // '-'
                std::size_t item_pos = word_pos + (word.size() - rest.size());
                // Longest spelling that ends at '-' or the end of the word.
                auto match = [&](auto& table) -> std::pair<int, std::size_t> {
                    int id = -1;
                    std::size_t best = 0;
                    for (auto& e : table) {
                        std::string_view n = e.name;
                        if (rest.substr(0, n.size()) == n && (rest.size() == n.size() || rest[n.size()] == '-') &&
                            n.size() > best) {
                            id = static_cast<int>(e.id);
                            best = n.size();
                        }
                    }
                    return {id, best};
                };
                auto [op_id, op_len] = match(cache_ops);
                auto [res_id, res_len] = match(cache_results);
                if ((op_id < 0 && res_id < 0) || ++items > 2) {
                    ok = false;
                    break;
                }
                std::size_t len = op_id >= 0 ? op_len : res_len;
                if (op_id >= 0) {
                    if (op >= 0 && !out.failure)
                        out.failure = fail(item_pos, len, concat({"two cache operations in one event (",
                                                                  cache_op_names[op], " and ", rest.substr(0, len),
                                                                  ")"}));
                    op = op_id;
                } else {
                    if (result >= 0 && !out.failure)
                        out.failure = fail(item_pos, len, "two cache results in one event; write either -refs or -misses");
                    result = res_id;
                }
                rest.remove_prefix(len);
            }
            if (!ok) continue;
            if (op < 0) op = 0;         // perf: loads unless an operation is given
            if (result < 0) result = 0; // perf: accesses unless misses is asked for
            if (!out.failure && !(cache_valid_ops[type.id] >> op & 1)) {
                std::string valid;
                for (unsigned o = 0; o < 3; ++o)
                    if (cache_valid_ops[type.id] >> o & 1) append(valid, {valid.empty() ? "" : ", ", cache_op_names[o]});
                out.failure = fail(word_pos, word.size(),
                                   concat({cache_type_names[type.id], " has no ", cache_op_names[op],
                                           " operation (it has: ", valid, ")"}));
            }
            out.config = type.id | static_cast<std::uint64_t>(op) << 8 | static_cast<std::uint64_t>(result) << 16;
            return out;
        }
        return std::nullopt;
    }

    // A bare name that is a sysfs event of some PMU, e.g. "mem-loads" or perf's "tsc".
    Fail parse_bare_alias(std::string_view word, std::size_t word_pos) {
        // sysfs names match without regard to case; pmc's clock names do not, so "TSC" must not quietly become
        // a different counter from "tsc".
        if (iequals(word, "tsc") || iequals(word, "wall-time"))
            return fail(word_pos, word.size(),
                        "pmc's clocks are spelled 'tsc' and 'wall-time' (lower case); for the msr PMU's TSC "
                        "event write 'msr/tsc/'");
        std::vector<Pmu> found;
        if (is_safe_sysfs_name(word)) {
            for (auto& name : pmu_names(root_)) {
                auto pmu = load_pmu(name, root_);
                if (pmu && pmu->find_event(word)) found.push_back(std::move(*pmu));
            }
        }
        if (found.size() > 1) {
            std::string where;
            for (auto& p : found) append(where, {where.empty() ? "" : ", ", p.name, "/", word, "/"});
            return fail(word_pos, word.size(), concat({"'", word, "' is an event of several PMUs; write one of ", where}));
        }
        if (found.empty()) return unknown_event(word, word_pos);
        Term alias;
        alias.name = std::string(word);
        alias.pos = word_pos;
        alias.len = word.size();
        return apply_pmu_terms(found.front(), {alias});
    }

    Fail unknown_event(std::string_view word, std::size_t word_pos) {
        std::vector<std::string> known;
        for (auto& e : hardware_events) known.emplace_back(e.name);
        for (auto& e : software_events) known.emplace_back(e.name);
        for (const char* t : {"L1-dcache-loads", "L1-dcache-load-misses", "L1-icache-load-misses", "LLC-loads",
                              "LLC-load-misses", "dTLB-load-misses", "iTLB-load-misses", "branch-load-misses",
                              "wall-time", "tsc"})
            known.emplace_back(t);
        std::string best;
        std::size_t best_distance = 3;
        for (auto& k : known) {
            std::size_t d = edit_distance(word, k);
            if (d < best_distance) {
                best_distance = d;
                best = k;
            }
        }
        std::string why = concat({"unknown event '", word, "'"});
        if (peek() == ':' && full_.substr(pos_ + 1, end_ - pos_ - 1).find_first_not_of(modifier_letters) !=
                                 std::string_view::npos) {
            append(why, {"; '", full_.substr(word_pos, end_ - word_pos),
                         "' looks like a tracepoint (SYSTEM:EVENT), which pmc does not count"});
        } else if (!best.empty()) {
            append(why, {"; did you mean '", best, "'?"});
        }
        why += " (`pmc list` shows the events of this machine)";
        return fail(word_pos, word.size(), why, ENOENT);
    }

    // pmu/term,term=value,.../modifiers
    Fail parse_pmu_event(std::string_view pmu_name, std::size_t pmu_pos) {
        auto pmu = load_pmu(pmu_name, root_);
        if (!pmu) {
            std::string why = pmu.failure().message;
            if ((pmu_name == "cpu" || pmu_name == "cpu_core" || pmu_name == "cpu_atom") && !has_core_pmu(root_))
                why += "; without a cpu PMU this machine has no hardware counters (a virtual machine without a "
                       "virtual PMU?)";
            return fail(pmu_pos, pmu_name.size(), why, pmu.failure().code.value());
        }
        ++pos_; // '/'
        std::vector<Term> terms;
        std::size_t terms_begin = pos_;
        std::size_t close = full_.find('/', pos_);
        if (close == std::string_view::npos || close >= end_)
            return fail(pmu_pos, end_ - pmu_pos, concat({"missing the closing '/' of ", pmu_name, "/.../"}));
        std::string_view body = full_.substr(terms_begin, close - terms_begin);
        if (auto f = split_terms(body, terms_begin, terms, false)) return f;
        pos_ = close + 1;
        if (auto f = apply_pmu_terms(*pmu, terms)) return f;
        return parse_modifier_suffix(false);
    }

    // Splits "a=1, b ,c=0x2" into terms. Positions are offsets into the user's string (alias terms get the
    // position of the alias name that brought them in).
    Fail split_terms(std::string_view body, std::size_t base, std::vector<Term>& out, bool from_alias,
                     std::size_t alias_pos = 0, std::size_t alias_len = 0) {
        if (trim(body).empty()) return std::nullopt;
        std::size_t i = 0;
        while (true) {
            std::size_t comma = body.find(',', i);
            std::string_view raw = body.substr(i, comma == std::string_view::npos ? std::string_view::npos : comma - i);
            std::size_t lead = 0;
            while (lead < raw.size() && is_space(raw[lead])) ++lead;
            std::string_view t = trim(raw);
            Term term;
            term.from_alias = from_alias;
            term.pos = from_alias ? alias_pos : base + i + lead;
            term.len = from_alias ? alias_len : std::max<std::size_t>(t.size(), 1);
            if (t.empty()) {
                if (from_alias) return fail(alias_pos, alias_len, "the sysfs definition of this event has an empty term");
                return fail(base + i, 1, "empty term (two commas, or a comma at an end)");
            }
            auto eq = t.find('=');
            std::string_view name = trim(t.substr(0, eq));
            if (name.empty() || !std::all_of(name.begin(), name.end(), is_word_char))
                return fail(term.pos, term.len, concat({"a term is NAME or NAME=VALUE; '", t, "' is neither"}));
            term.name = std::string(name);
            if (eq != std::string_view::npos) {
                term.has_value = true;
                term.value = std::string(trim(t.substr(eq + 1)));
                if (term.value.empty()) return fail(term.pos, term.len, concat({"term '", term.name, "=' has no value"}));
            }
            out.push_back(std::move(term));
            if (comma == std::string_view::npos) break;
            i = comma + 1;
        }
        return std::nullopt;
    }

    bool is_hardcoded(std::string_view n) const {
        return n == "config" || n == "config1" || n == "config2" || n == "name" || n == "period" || n == "freq";
    }

    // Expands the one sysfs event alias among `user` (if any) into its terms, lets the user's own terms replace
    // alias terms of the same name, then encodes everything into spec_.attr.
    Fail apply_pmu_terms(const Pmu& pmu, const std::vector<Term>& user) {
        spec_.pmu = pmu.name;
        spec_.attr.type = pmu.type;
        spec_.core_pmu = pmu.name == "cpu" || starts_with(pmu.name, "cpu_") || starts_with(pmu.name, "armv");

        std::vector<Term> alias_terms;
        const Term* alias_term = nullptr;
        std::vector<const Term*> own;
        for (std::size_t i = 0; i < user.size(); ++i) {
            const Term& t = user[i];
            for (std::size_t j = 0; j < i; ++j)
                if (user[j].name == t.name) return fail(t.pos, t.len, concat({"term '", t.name, "' is given twice"}));
            if (!t.has_value && !pmu.find_format(t.name) && !is_hardcoded(t.name)) {
                if (const PmuEvent* ev = pmu.find_event(t.name)) {
                    if (alias_term)
                        return fail(t.pos, t.len, concat({"two named events ('", alias_term->name, "' and '", t.name,
                                                          "') in one event; open them as two counters"}));
                    alias_term = &t;
                    if (auto f = split_terms(ev->terms, 0, alias_terms, true, t.pos, t.len)) return f;
                    continue;
                }
            }
            own.push_back(&t);
        }
        std::vector<const Term*> all;
        for (auto& a : alias_terms) {
            bool replaced = false;
            for (auto* o : own) replaced = replaced || o->name == a.name;
            if (!replaced) all.push_back(&a);
        }
        all.insert(all.end(), own.begin(), own.end());

        // perf applies config=, config1=, config2= first, then ORs the format fields in.
        for (auto* t : all) {
            if (t->name == "config" || t->name == "config1" || t->name == "config2") {
                auto v = term_number(*t);
                if (!v) return v.failure;
                (t->name == "config" ? spec_.attr.config
                                     : t->name == "config1" ? spec_.attr.config1 : spec_.attr.config2) = v.value;
            }
        }
        for (auto* t : all) {
            if (t->name == "config" || t->name == "config1" || t->name == "config2") continue;
            if (t->name == "name") {
                if (!t->has_value) return fail(t->pos, t->len, "name= needs a value");
                spec_.name = t->value;
                continue;
            }
            if (t->name == "period" || t->name == "freq") {
                auto v = term_number(*t);
                if (!v) return v.failure;
                (t->name == "period" ? spec_.sample_period : spec_.sample_freq) = v.value;
                continue;
            }
            for (const char* r : record_only_terms)
                if (t->name == r)
                    return fail(t->pos, t->len,
                                concat({"'", t->name, "' configures perf record; pmc counts and does not support it"}));
            const FormatField* field = pmu.find_format(t->name);
            if (!field) return unknown_term(pmu, *t);
            std::uint64_t value = 1;
            if (t->has_value) {
                if (t->value == "?")
                    return fail(t->pos, t->len,
                                concat({"event '", alias_term ? alias_term->name : t->name, "' of PMU ", pmu.name,
                                        " needs a value for '", t->name, "': write ", pmu.name, "/",
                                        alias_term ? std::string_view(alias_term->name) : std::string_view(),
                                        alias_term ? "," : "", t->name, "=VALUE/"}));
                auto v = term_number(*t);
                if (!v) return v.failure;
                value = v.value;
            }
            if (value > field->max_value())
                return fail(t->pos, t->len,
                            concat({"value ", hex_digits(value), " is too big for '", field->name, "' of PMU ",
                                    pmu.name, " (", field->spec, ": ", decimal(field->width()), " bits, maximum ",
                                    hex_digits(field->max_value()), ")"}));
            std::uint64_t bits = field->pack(value);
            switch (field->word) {
            case ConfigWord::config: spec_.attr.config |= bits; break;
            case ConfigWord::config1: spec_.attr.config1 |= bits; break;
            case ConfigWord::config2: spec_.attr.config2 |= bits; break;
            }
        }
        return std::nullopt;
    }

    struct NumberOrFailure {
        std::uint64_t value = 0;
        Fail failure;
        explicit operator bool() const { return !failure; }
    };

    NumberOrFailure term_number(const Term& t) {
        if (!t.has_value) return {0, fail(t.pos, t.len, concat({"term '", t.name, "' needs a value: ", t.name, "=NUMBER"}))};
        auto v = parse_number(t.value);
        if (!v)
            return {0, fail(t.pos, t.len,
                            concat({"'", t.value, "' is not a number (decimal, or hex with 0x), or does not fit in 64 bits"}))};
        return {*v, std::nullopt};
    }

    Fail unknown_term(const Pmu& pmu, const Term& t) {
        std::string have;
        for (auto& f : pmu.formats) append(have, {have.empty() ? "" : ", ", f.name});
        std::string events;
        std::size_t shown = 0;
        for (auto& e : pmu.events) {
            if (shown++ == 12) {
                events += ", ...";
                break;
            }
            append(events, {events.empty() ? "" : ", ", e.name});
        }
        std::string why = concat({"PMU ", pmu.name, " has no term or event '", t.name, "' (terms: ",
                                  have.empty() ? std::string_view("none") : std::string_view(have),
                                  "; config, config1, config2, name, period"});
        if (!events.empty()) append(why, {"; events: ", events});
        why += ")";
        if (t.has_value && pmu.find_event(t.name)) why += "; a named event takes no value";
        return fail(t.pos, t.len, why, ENOENT);
    }

    // mem:ADDR[/LEN][:ACCESS] then modifiers: a hardware breakpoint (perf's parse_events_add_breakpoint).
    Fail parse_breakpoint() {
        pos_ += 4;
        std::size_t addr_pos = pos_;
        std::string_view addr_word = take_word();
        auto addr = parse_number(addr_word);
        if (!addr) return fail(addr_pos, std::max<std::size_t>(addr_word.size(), 1), "expected an address after 'mem:'");
        std::uint64_t len = 0;
        if (peek() == '/') {
            ++pos_;
            std::size_t len_pos = pos_;
            std::string_view len_word = take_word();
            auto l = parse_number(len_word);
            if (!l || (*l != 1 && *l != 2 && *l != 4 && *l != 8))
                return fail(len_pos, std::max<std::size_t>(len_word.size(), 1), "breakpoint length must be 1, 2, 4 or 8");
            len = *l;
        }
        unsigned access = 0;
        if (peek() == ':') {
            std::size_t acc_pos = pos_ + 1;
            std::size_t p = acc_pos;
            while (p < end_ && (full_[p] == 'r' || full_[p] == 'w' || full_[p] == 'x')) ++p;
            if (p > acc_pos && (p == end_ || full_[p] == ':')) {
                for (std::size_t i = acc_pos; i < p; ++i) {
                    unsigned bit = full_[i] == 'r' ? HW_BREAKPOINT_R : full_[i] == 'w' ? HW_BREAKPOINT_W : HW_BREAKPOINT_X;
                    if (access & bit) return fail(i, 1, concat({"access '", full_.substr(i, 1), "' given twice"}));
                    access |= bit;
                }
                pos_ = p;
            }
        }
        if (access == 0) access = HW_BREAKPOINT_R | HW_BREAKPOINT_W;
        if ((access & HW_BREAKPOINT_X) && access != HW_BREAKPOINT_X)
            return fail(addr_pos, end_ - addr_pos, "an execute breakpoint (x) cannot also watch reads or writes");
        if (len == 0) len = access == HW_BREAKPOINT_X ? sizeof(long) : std::uint64_t{HW_BREAKPOINT_LEN_4};
        spec_.attr.type = PERF_TYPE_BREAKPOINT;
        spec_.attr.bp_type = access;
        spec_.attr.bp_addr = *addr;
        spec_.attr.bp_len = len;
        return parse_modifier_suffix(true);
    }

    // [:]modifiers at the end of the string. perf's semantics (get_event_modifier in parse-events.c): without
    // modifiers, exclude_guest=1; with them, the first of u/k/h excludes the other two levels, and u or p
    // (without G/H) exclude guest mode.
    Fail parse_modifier_suffix(bool needs_colon) {
        skip_space();
        if (at_end()) {
            spec_.attr.exclude_guest = 1;
            return std::nullopt;
        }
        std::size_t mod_pos = pos_;
        if (needs_colon) {
            if (peek() != ':')
                return fail(pos_, end_ - pos_,
                            peek() == ',' ? "a list of events is not a single counter; open one counter per event"
                                          : "unexpected text after the event name; modifiers follow a ':'");
            ++pos_;
            mod_pos = pos_;
            if (at_end()) return fail(mod_pos - 1, 1, "empty modifier list after ':'");
        }
        if (!needs_colon && peek() == ':')
            return fail(pos_, 1, "after a PMU's closing '/', modifiers follow directly, without ':' (e.g. msr/tsc/u)");
        std::string_view mods = full_.substr(pos_, end_ - pos_);
        bool eu = false, ek = false, eh = false, eH = false, eG = false, eI = false;
        bool exclude = false, exclude_GH = false, pinned = false, exclusive = false;
        unsigned precise = 0;
        for (std::size_t i = 0; i < mods.size(); ++i) {
            char c = mods[i];
            if (modifier_letters.find(c) == std::string_view::npos || c == '\0') {
                if (c == ':') return fail(mod_pos + i, 1, "modifiers are written together after one ':' (e.g. ':uk')");
                return fail(mod_pos + i, 1,
                            concat({"unknown modifier '", mods.substr(i, 1),
                                    "' (modifiers: u k h G H I p pp ppp P D e S W b)"}));
            }
            if (c != 'p' && mods.find(c, i + 1) != std::string_view::npos)
                return fail(mod_pos + mods.find(c, i + 1), 1, concat({"modifier '", mods.substr(i, 1), "' given twice"}));
            switch (c) {
            case 'u':
            case 'k':
            case 'h':
                if (!exclude) exclude = eu = ek = eh = true;
                if (c == 'u') {
                    if (!exclude_GH) eG = true;
                    eu = false;
                }
                if (c == 'k') ek = false;
                if (c == 'h') eh = false;
                break;
            case 'G':
            case 'H':
                if (!exclude_GH) exclude_GH = eG = eH = true;
                (c == 'G' ? eG : eH) = false;
                spec_.guest_host_explicit = true;
                break;
            case 'I': eI = true; break;
            case 'p':
                if (++precise > 3)
                    return fail(mod_pos + i, 1, "at most three 'p' (precise_ip is 0 to 3)");
                if (!exclude_GH) eG = true;
                break;
            case 'P': spec_.precise_max = true; break;
            case 'D': pinned = true; break;
            case 'e': exclusive = true; break;
            default: break; // S, W, b: perf-tool options with no effect on a single counter's attr
            }
        }
        spec_.modifiers = std::string(mods);
        spec_.attr.exclude_user = eu;
        spec_.attr.exclude_kernel = ek;
        spec_.attr.exclude_hv = eh;
        spec_.attr.exclude_host = eH;
        spec_.attr.exclude_guest = eG;
        spec_.attr.exclude_idle = eI;
        spec_.attr.precise_ip = precise & 3u;
        spec_.attr.pinned = pinned;
        spec_.attr.exclusive = exclusive;
        return std::nullopt;
    }

    std::string_view full_;
    std::string_view root_;
    const CpuModel& cpu_;
    std::size_t pos_ = 0, end_ = 0;
    EventSpec spec_;
};

} // namespace detail

/// A named event pmc knows without sysfs: perf's generic hardware, software and hardware-cache events (canonical
/// spellings), pmc's own clocks and its composite counters.
struct NamedEvent {
    std::string name;
    std::string aliases;  ///< other spellings, ", "-separated, e.g. "cycles" for cpu-cycles
    std::string category; ///< "hardware", "software", "hardware-cache", "pmc clock" or "pmc composite"
    std::string note = {}; ///< for pmc's own: what it is, in a few words
};

inline std::vector<NamedEvent> named_events() {
    std::vector<NamedEvent> out;
    auto add_table = [&](const auto& table, const char* category) {
        for (std::size_t i = 0; i < std::size(table); ++i) {
            // Consecutive rows with the same config are spellings of one event.
            if (i > 0 && table[i].config == table[i - 1].config) {
                out.back().aliases += (out.back().aliases.empty() ? "" : ", ") + std::string(table[i].name);
                continue;
            }
            out.push_back({table[i].name, "", category});
        }
    };
    add_table(detail::hardware_events, "hardware");
    add_table(detail::software_events, "software");
    static constexpr const char* op_plural[] = {"loads", "stores", "prefetches"};
    for (unsigned type = 0; type < 7; ++type)
        for (unsigned op = 0; op < 3; ++op) {
            if (!(detail::cache_valid_ops[type] >> op & 1)) continue;
            const std::string t = detail::cache_type_names[type];
            out.push_back({t + "-" + op_plural[op], "", "hardware-cache"});
            out.push_back({t + "-" + detail::cache_op_names[op] + "-misses", "", "hardware-cache"});
        }
    out.push_back({"wall-time", "", "pmc clock", "nanoseconds from the TSC (clock_gettime without an invariant one)"});
    out.push_back({"tsc", "", "pmc clock", "serialized rdtsc ticks"});
    out.push_back({"instructions-minus-irqs:u", "", "pmc composite",
                   "instructions:u minus this CPU's hardware-interrupt event, one group"});
    out.push_back({"instructions-minus-r0420:u", "", "pmc composite",
                   "AMD Zen: instructions:u minus r0420:u (interrupts and, it appears, exceptions)"});
    return out;
}

/// Parses an event string; on failure the message quotes the string and points at the bad token. The composite
/// events resolve their interrupt event for `cpu` (this machine's by default).
BOOST_NOINLINE inline Result<EventSpec> try_parse_event(std::string_view text,
                                                        std::string_view sysfs_root = default_sysfs_root,
                                                        const CpuModel& cpu = this_cpu()) {
    return detail::EventParser(text, sysfs_root, cpu).parse();
}

/// Splits a comma-separated list of events ("a,cpu/event=1,umask=2/,b,mem:0x1000/8:w") at the commas outside a
/// PMU's term list: a '/' opens one only right after a PMU name at the start of an event (the next '/' closes it);
/// a breakpoint's "mem:ADDR/LEN" slash is an ordinary character. Each event is trimmed. An empty one (",," or a
/// comma at either end) stays in the result as "" for the caller to refuse (empty_event_text), as perf does.
inline std::vector<std::string> split_event_list(std::string_view list) {
    std::vector<std::string> out;
    std::string cur;
    enum { name, terms, rest } state = name; // reading the event's leading word, a term list, or anything else
    auto blank = [&] { return cur.find_first_not_of(" \t") == std::string::npos; };
    for (char c : list) {
        if (state == terms) {
            if (c == '/') state = rest;
        } else if (c == ',') {
            out.emplace_back(detail::trim(cur));
            cur.clear();
            state = name;
            continue;
        } else if (state == name) {
            if (c == '/') state = blank() ? rest : terms; // "pmu/": a term list; a bare "/" is the parser's to refuse
            else if (!detail::is_word_char(c) && !((c == ' ' || c == '\t') && blank()))
                state = rest; // "mem:", "r01cb:u", "4:1": no term list follows
        }
        cur += c;
    }
    out.emplace_back(detail::trim(cur));
    return out;
}

/// Why the event list `list` (given as `where`, e.g. "-e", "PMC_PROFILE_COUNTERS"), split into `events` by
/// split_event_list, cannot be used: it names no event, or has an empty one between its commas; "" when it can.
inline std::string empty_event_text(std::string_view where, std::string_view list,
                                    const std::vector<std::string>& events) {
    std::size_t empty = 0, first = 0;
    for (std::size_t i = 0; i < events.size(); ++i)
        if (events[i].empty() && empty++ == 0) first = i + 1;
    if (empty == 0) return "";
    std::string s = std::string(where) + " '" + std::string(list) + "'";
    if (empty == events.size()) return s + " names no event";
    return s + ": event " + std::to_string(first) + " of " + std::to_string(events.size()) +
           " is empty (two commas in a row, or a comma at an end): remove the extra comma";
}

/// Parses an event string; throws pmc::error (code EINVAL or ENOENT) on failure.
inline EventSpec parse_event(std::string_view text, std::string_view sysfs_root = default_sysfs_root,
                             const CpuModel& cpu = this_cpu()) {
    return try_parse_event(text, sysfs_root, cpu).value();
}

PMC_END_NAMESPACE
