// SPDX-License-Identifier: MIT
// cache_model.hpp: the caches `pmc emulate --cache` simulates, plain C++ with no QEMU in it (the plugin only feeds
// it addresses). One CacheHierarchy per guest thread: its counts never depend on what other threads do.
//
// The model is Cachegrind's (valgrind/cachegrind/cg_sim.c, read, not copied), so that its figures compare with the
// figures CI tools built on Cachegrind publish:
//   - I1 and D1, an optional L2, and a last level (LL) that both L1s (or the L2) fill; set-associative, LRU,
//     write-allocate (a store that misses brings its line in), sets chosen by the line number's low bits
//     (bit selection) of virtual addresses;
//   - an access that straddles two lines counts once: a miss if either line misses, and the next level is asked
//     for both lines;
//   - an access wider than the narrowest line of the configuration is cut to that width (Cachegrind's rule for
//     its "large data-sized instructions"), so that no access spans more than two lines;
//   - inclusion, by default Cachegrind's: every line an L1 takes is also taken by the LL, but the LL evicting a
//     line leaves the L1 copies alone. Inclusion::strict also removes them (back-invalidation, as inclusive
//     hardware caches do); it needs the lower levels' lines to be at least as long as the upper ones'.
// What the plugin adds on top (docs/emulated-pmu.md): QEMU's split accesses joined back (DataAccessMerger below),
// and a block's instruction fetches planned once at translation (plan_fetches).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pmc_model {

/// One cache's shape, in bytes, as Valgrind writes it: --D1=SIZE,ASSOC,LINE.
struct CacheGeometry {
    std::uint32_t size = 0;
    std::uint32_t assoc = 0;
    std::uint32_t line = 0;

    std::uint32_t sets() const noexcept { return size / (assoc * line); }
    friend bool operator==(const CacheGeometry& a, const CacheGeometry& b) noexcept {
        return a.size == b.size && a.assoc == b.assoc && a.line == b.line;
    }
};

/// The geometry Gungraun and CodSpeed pin Cachegrind to, and pmc's default: 32 KiB, 8-way, 64-byte lines for
/// I1 and D1; an 8 MiB, 16-way LL with 64-byte lines.
inline constexpr CacheGeometry default_i1{32768, 8, 64};
inline constexpr CacheGeometry default_d1{32768, 8, 64};
inline constexpr CacheGeometry default_ll{8388608, 16, 64};
/// The default D1 as constants, for the plugin's paths compiled for it (CacheLevel::small_hits_first_two_as).
struct DefaultD1 {
    static constexpr std::uint64_t line = default_d1.line;
    static constexpr std::uint64_t sets = default_d1.size / (default_d1.assoc * default_d1.line);
    static constexpr std::uint64_t assoc = default_d1.assoc;
};

/// Cachegrind's smallest line: a shorter one would let an instruction straddle three lines.
inline constexpr std::uint32_t min_line_size = 16;

inline bool is_power_of_two(std::uint64_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }
inline unsigned log2_exact(std::uint64_t x) noexcept { return static_cast<unsigned>(__builtin_ctzll(x)); }

/// Why `g` cannot be simulated, or "" if it can. Cachegrind's checks (cg_arch.c), with the numbers in the message:
/// it refuses a set count that is not a power of two when the user gives the geometry, and so does pmc (see
/// round_sets_like_cachegrind for what Cachegrind does with a geometry it read from CPUID).
inline std::string geometry_problem(const CacheGeometry& g) {
    const auto n = [](std::uint64_t v) { return std::to_string(v); };
    if (g.size == 0 || g.assoc == 0 || g.line == 0) return "size, associativity and line size must all be above 0";
    if (!is_power_of_two(g.line)) return "the line size " + n(g.line) + " is not a power of two";
    if (g.line < min_line_size)
        return "the line size " + n(g.line) + " is below " + n(min_line_size) +
               " bytes (an instruction could straddle three lines)";
    if (g.size <= g.line) return "the size " + n(g.size) + " is not above the line size " + n(g.line);
    if (g.assoc > g.size / g.line)
        return "the associativity " + n(g.assoc) + " is above the " + n(g.size / g.line) + " lines the cache holds";
    const std::uint64_t set_bytes = std::uint64_t{g.assoc} * g.line;
    if (g.size % set_bytes != 0)
        return "the size " + n(g.size) + " is not a whole number of " + n(g.assoc) + "-way sets of " + n(g.line) +
               "-byte lines (" + n(set_bytes) + " bytes each)";
    if (!is_power_of_two(g.size / set_bytes))
        return n(g.size / set_bytes) +
               " sets: the set count must be a power of two (sets are chosen by address bits; Cachegrind refuses "
               "this too)";
    return "";
}

/// Parses Valgrind's SIZE,ASSOC,LINE (three decimal byte counts). Returns "" and sets `out`, or says what is wrong.
inline std::string parse_geometry(std::string_view text, CacheGeometry& out) {
    std::array<std::uint64_t, 3> v{};
    std::size_t at = 0;
    for (std::size_t field = 0; field < 3; ++field) {
        if (at >= text.size() || text[at] < '0' || text[at] > '9')
            return "'" + std::string(text) + "' is not SIZE,ASSOC,LINE (three numbers of bytes, as 32768,8,64)";
        std::uint64_t x = 0;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
            x = x * 10 + static_cast<std::uint64_t>(text[at] - '0');
            if (x > 0x7fffffff) return "'" + std::string(text) + "': a number is too large (at most 2147483647)";
            ++at;
        }
        v[field] = x;
        const bool last = field == 2;
        if (last ? at != text.size() : (at >= text.size() || text[at] != ','))
            return "'" + std::string(text) + "' is not SIZE,ASSOC,LINE (three numbers of bytes, as 32768,8,64)";
        ++at;
    }
    const CacheGeometry g{static_cast<std::uint32_t>(v[0]), static_cast<std::uint32_t>(v[1]),
                          static_cast<std::uint32_t>(v[2])};
    std::string problem = geometry_problem(g);
    if (problem.empty()) out = g;
    return problem;
}

/// What Cachegrind does to a last-level geometry it read from the host's CPUID whose set count is not a power of
/// two (cg_arch.c, maybe_tweak_LLc): the sets are rounded down to a power of two and the associativity raised by
/// the same factor (rounded to nearest), the size recomputed; e.g. 12 MiB, 16-way -> 12 MiB, 24-way. For
/// `--cache=host` only: a geometry the user writes is refused instead (geometry_problem).
inline CacheGeometry round_sets_like_cachegrind(CacheGeometry g) noexcept {
    if (g.size == 0 || g.assoc == 0 || g.line == 0) return g;
    const std::uint32_t sets = g.size / (g.assoc * g.line);
    if (sets == 0) return g;
    if (is_power_of_two(sets)) {
        g.size = g.line * g.assoc * sets;
        return g;
    }
    std::uint32_t rounded = 1;
    while (rounded * 2 <= sets) rounded *= 2;
    const double factor = static_cast<double>(sets) / static_cast<double>(rounded);
    g.assoc = static_cast<std::uint32_t>(0.5 + factor * static_cast<double>(g.assoc));
    g.size = g.line * g.assoc * rounded;
    return g;
}

/// One set-associative LRU cache of line numbers. Each set keeps its tags most recently used first, as
/// Cachegrind's does: a hit on the most recent line is one compare; a hit further down moves the line to the front.
/// Each set's first tag is also kept in a compact array of its own (one tag per set, 8 bytes, where the sets'
/// tags lie 8 * assoc bytes apart): the common check, a hit on the most recent line, reads a few host lines (4 KiB
/// for a 32 KiB 8-way D1) instead of one per set (32 KiB), which keeps them in the host's L1 beside QEMU's own data.
class CacheLevel {
public:
    /// `g` must be valid (geometry_problem(g) empty).
    explicit CacheLevel(const CacheGeometry& g)
        : geometry_(g), assoc_(g.assoc), set_mask_(g.sets() - 1), line_bits_(log2_exact(g.line)),
          // calloc: a large LL's tags stay untouched zero pages until its sets are used; the most recent tags
          // first (sets() of them), then the sets' tags, each part starting at a host line (so that an 8-way set,
          // 64 bytes of tags, lies in one), a word after the sets (small_hits_first_two), and a host line more for
          // that alignment
          storage_(static_cast<std::uint64_t*>(std::calloc(
              aligned_words(g.sets()) + std::size_t{g.sets()} * g.assoc + 1 + host_line / sizeof(std::uint64_t),
              sizeof(std::uint64_t)))),
          most_recent_(reinterpret_cast<std::uint64_t*>(
              (reinterpret_cast<std::uintptr_t>(storage_.get()) + host_line - 1) & ~std::uintptr_t{host_line - 1})),
          tags_(most_recent_ + aligned_words(g.sets())) {
        if (!storage_) throw std::bad_alloc();
    }
    CacheLevel(const CacheLevel&) = delete;
    CacheLevel& operator=(const CacheLevel&) = delete;

    const CacheGeometry& geometry() const noexcept { return geometry_; }
    unsigned line_bits() const noexcept { return line_bits_; }

    /// Uses line `line` (an address >> line_bits()): true if it missed. A miss takes the line in, evicting the
    /// set's least recently used line, whose number `evicted` receives (or no_line).
    __attribute__((always_inline)) bool touch(std::uint64_t line, std::uint64_t& evicted) noexcept {
        const std::uint64_t index = line & set_mask_;
        std::uint64_t* set = tags_ + index * assoc_;
        const std::uint64_t tag = line + 1; // 0 marks an empty way
        evicted = no_line;
        if (__builtin_expect(most_recent_[index] == tag, 1)) return false;
        most_recent_[index] = tag; // found or taken in, the line is the set's most recent
        // One pass: each way takes the tag before it until the line is found (a hit) or falls off the end (a miss).
        // (Written as a carried value, not a shift: compilers turn a shift loop into a call of memmove.)
        std::uint64_t carried = tag;
        for (std::uint32_t i = 0; i < assoc_; ++i) {
            const std::uint64_t here = set[i];
            set[i] = carried;
            if (here == tag) return false;
            carried = here;
        }
        evicted = carried - 1; // no_line if the way was empty
        return true;
    }
    __attribute__((always_inline)) bool touch(std::uint64_t line) noexcept {
        if (__builtin_expect(most_recent_[line & set_mask_] == line + 1, 1)) return false;
        return touch_further(line);
    }
    /// touch() past the most recent way.
    __attribute__((noinline)) bool touch_further(std::uint64_t line) noexcept {
        std::uint64_t evicted;
        return touch(line, evicted);
    }
    /// Whether an access of `size` bytes at `address` (cut to `widest` bytes, as CacheHierarchy::access does)
    /// lies in one line that is the most recent of its set: a hit that changes no state.
    __attribute__((always_inline)) bool hits_most_recent(std::uint64_t address, std::uint32_t size,
                                                         std::uint32_t widest) const noexcept {
        const std::uint64_t line = address >> line_bits_;
        // (widest is never below min_line_size: a constant size up to that needs no cut, and the compare folds; a
        // size known only here, as on_memory's, takes the same cut without a branch, which its callers' many
        // sizes would mispredict)
        const std::uint32_t cut = __builtin_constant_p(size)
                                      ? (size == 0 ? 1 : size <= min_line_size ? size : (size < widest ? size : widest))
                                      : std::max<std::uint32_t>(1, std::min(size, widest));
        if (((address + cut - 1) >> line_bits_) != line) return false;
        return most_recent_[line & set_mask_] == line + 1;
    }
    /// hits_most_recent() for an access of 1 to min_line_size bytes, which no level cuts: no size test at all.
    __attribute__((always_inline)) bool small_hits_most_recent(std::uint64_t address,
                                                               std::uint32_t size) const noexcept {
        const std::uint64_t line = address >> line_bits_;
        return ((address + size - 1) >> line_bits_) == line && most_recent_[line & set_mask_] == line + 1;
    }
    /// small_hits_most_recent(), and also true for an access in one line that is its set's second most recent,
    /// which then becomes the most recent (the hit touch() would make). False, nothing changed, otherwise. (A
    /// direct-mapped level reads the next set's only way, or the word after the last set: neither holds the line.)
    __attribute__((always_inline)) bool small_hits_first_two(std::uint64_t address, std::uint32_t size) noexcept {
        return small_hits_first_two(address, size, line_bits_, set_mask_, assoc_);
    }
    /// small_hits_first_two() where the level's geometry is known when compiling, `Geometry`'s constants `line`,
    /// `sets` and `assoc` (no loads of them; shifts and masks by immediates). The level must have that geometry
    /// (has_geometry).
    template <class Geometry>
    __attribute__((always_inline)) bool small_hits_first_two_as(std::uint64_t address, std::uint32_t size) noexcept {
        static_assert(Geometry::line >= min_line_size && (Geometry::line & (Geometry::line - 1)) == 0 &&
                      Geometry::sets > 0 && (Geometry::sets & (Geometry::sets - 1)) == 0);
        return small_hits_first_two(address, size, static_cast<unsigned>(__builtin_ctzll(Geometry::line)),
                                    Geometry::sets - 1, Geometry::assoc);
    }
    bool has_geometry(const CacheGeometry& g) const noexcept { return geometry_ == g; }
    __attribute__((always_inline)) bool small_hits_first_two(std::uint64_t address, std::uint32_t size,
                                                             unsigned line_bits, std::uint64_t set_mask,
                                                             std::uint64_t assoc) noexcept {
        const std::uint64_t line = address >> line_bits;
        if (((address + size - 1) >> line_bits) != line) return false;
        const std::uint64_t index = line & set_mask, tag = line + 1;
        if (__builtin_expect(most_recent_[index] == tag, 1)) return true;
        std::uint64_t* set = tags_ + index * assoc;
        if (set[1] != tag) return false;
        set[1] = set[0];
        set[0] = tag;
        most_recent_[index] = tag;
        return true;
    }
    /// Uses `line` if it is held (a hit: it becomes its set's most recent) and returns true; false, with nothing
    /// changed, if it would miss.
    bool touch_if_held(std::uint64_t line) noexcept {
        const std::uint64_t index = line & set_mask_;
        std::uint64_t* set = tags_ + index * assoc_;
        const std::uint64_t tag = line + 1;
        if (most_recent_[index] == tag) return true;
        for (std::uint32_t i = 1; i < assoc_; ++i)
            if (set[i] == tag) {
                for (std::uint32_t j = i; j > 0; --j) set[j] = set[j - 1];
                set[0] = tag;
                most_recent_[index] = tag;
                return true;
            }
        return false;
    }
    /// Whether `line` is held (no change to the LRU order).
    bool holds(std::uint64_t line) const noexcept {
        const std::uint64_t* set = tags_ + (line & set_mask_) * assoc_;
        return std::find(set, set + assoc_, line + 1) != set + assoc_;
    }
    /// Drops `line` if held; the lines behind it move up one way (LRU order kept).
    void invalidate(std::uint64_t line) noexcept {
        const std::uint64_t index = line & set_mask_;
        std::uint64_t* set = tags_ + index * assoc_;
        for (std::uint32_t i = 0; i < assoc_; ++i)
            if (set[i] == line + 1) {
                for (std::uint32_t j = i; j + 1 < assoc_; ++j) set[j] = set[j + 1];
                set[assoc_ - 1] = 0;
                most_recent_[index] = set[0];
                return;
            }
    }

    /// Where the most recent tag of `line`'s set lies in a level of geometry `g` (its set's index in the compact
    /// array), and the tag that says `line` is there: an access known in advance (a planned fetch) checks for a hit
    /// with one load and one compare.
    static std::uint64_t most_recent_slot(const CacheGeometry& g, std::uint64_t line) noexcept {
        return line & (g.sets() - 1);
    }
    static std::uint64_t tag_of(std::uint64_t line) noexcept { return line + 1; }
    std::uint64_t tag_at(std::uint64_t slot) const noexcept { return most_recent_[slot]; }

    static constexpr std::uint64_t no_line = ~std::uint64_t{0};

private:
    static constexpr std::uintptr_t host_line = 64;
    /// `words` 8-byte words rounded up to whole host lines.
    static std::size_t aligned_words(std::size_t words) noexcept {
        constexpr std::size_t per_line = host_line / sizeof(std::uint64_t);
        return (words + per_line - 1) / per_line * per_line;
    }
    struct Free {
        void operator()(std::uint64_t* p) const noexcept { std::free(p); }
    };
    CacheGeometry geometry_;
    std::uint32_t assoc_;
    std::uint64_t set_mask_;
    unsigned line_bits_;
    std::unique_ptr<std::uint64_t[], Free> storage_;
    std::uint64_t* most_recent_; ///< in storage_, at a host line's start: each set's first tag, set[0]
    std::uint64_t* tags_;        ///< in storage_, at a host line's start after most_recent_: the sets, assoc_ each
};

/// Where an access was served: the first level that held its line(s).
enum class Level : std::uint8_t { l1, l2, ll, memory };
/// What asked: an instruction fetch (I1), a data read (a load, or a read-modify-write: Cachegrind counts those as
/// one read), a data write.
enum class Kind : std::uint8_t { instruction, read, write };

inline const char* to_string(Level level) noexcept {
    switch (level) {
    case Level::l1: return "L1";
    case Level::l2: return "L2";
    case Level::ll: return "LL";
    default: return "memory";
    }
}

/// Accesses and misses at one level, for one kind.
struct LevelCounts {
    std::uint64_t accesses = 0;
    std::uint64_t misses = 0;
};

/// A hierarchy's counts. `l1[Kind::instruction]` is I1, the other two D1. Cachegrind's names are spelled out
/// below: Ir, I1mr, ILmr, Dr, D1mr, DLmr, Dw, D1mw, DLmw.
struct CacheCounts {
    std::array<LevelCounts, 3> l1{}, l2{}, ll{}; ///< by Kind

    static constexpr std::size_t at(Kind k) noexcept { return static_cast<std::size_t>(k); }
    std::uint64_t Ir() const noexcept { return l1[at(Kind::instruction)].accesses; }
    std::uint64_t I1mr() const noexcept { return l1[at(Kind::instruction)].misses; }
    std::uint64_t ILmr() const noexcept { return ll[at(Kind::instruction)].misses; }
    std::uint64_t Dr() const noexcept { return l1[at(Kind::read)].accesses; }
    std::uint64_t D1mr() const noexcept { return l1[at(Kind::read)].misses; }
    std::uint64_t DLmr() const noexcept { return ll[at(Kind::read)].misses; }
    std::uint64_t Dw() const noexcept { return l1[at(Kind::write)].accesses; }
    std::uint64_t D1mw() const noexcept { return l1[at(Kind::write)].misses; }
    std::uint64_t DLmw() const noexcept { return ll[at(Kind::write)].misses; }
};

enum class Inclusion : std::uint8_t {
    cachegrind, ///< the LL takes every line an upper level misses on, and evicts without touching upper levels
    strict,     ///< as cachegrind, and a line the LL (or L2) evicts leaves the levels above it too
};

struct CacheConfig {
    CacheGeometry i1 = default_i1;
    CacheGeometry d1 = default_d1;
    std::optional<CacheGeometry> l2; ///< between the L1s and the LL; absent in Cachegrind's model
    CacheGeometry ll = default_ll;
    Inclusion inclusion = Inclusion::cachegrind;
};

/// Why `c` cannot be simulated, or "" (each level's geometry, and strict inclusion's line sizes).
inline std::string config_problem(const CacheConfig& c) {
    const std::pair<const char*, const CacheGeometry*> levels[] = {
        {"I1", &c.i1}, {"D1", &c.d1}, {"L2", c.l2 ? &*c.l2 : nullptr}, {"LL", &c.ll}};
    for (const auto& [name, g] : levels)
        if (g)
            if (std::string p = geometry_problem(*g); !p.empty()) return std::string(name) + ": " + p;
    if (c.inclusion == Inclusion::strict) {
        const std::uint32_t upper = std::max({c.i1.line, c.d1.line, c.l2 ? c.l2->line : 0u});
        if (c.ll.line < upper || (c.l2 && c.l2->line < std::max(c.i1.line, c.d1.line)))
            return "strict inclusion needs each level's lines at least as long as the lines above it";
    }
    return "";
}

/// The widest access a configuration simulates: its narrowest line (Cachegrind cuts wider ones to it).
inline std::uint32_t widest_access(const CacheConfig& c) noexcept {
    return std::min({c.i1.line, c.d1.line, c.ll.line, c.l2 ? c.l2->line : c.ll.line});
}

struct FetchRef;

/// Where the accesses of a run (the plugin's: model/access_runs.hpp) lie around the address of its last: whether a
/// check of two lines can stand for a check of each access (CacheHierarchy::span_hits_most_recent). True when every
/// access's offset is a multiple of 8 and its size 1 to 8 bytes, and all lie within `line` bytes: then, at an
/// address that is a multiple of 8, no access straddles a line (lines are multiples of 8 bytes), and each lies in
/// the line of the lowest byte or of the highest.
struct AccessSpan {
    bool within_a_line = false;
    std::int64_t lowest = 0;  ///< the lowest byte's offset
    std::int64_t highest = 0; ///< the highest byte's
    /// The span of accesses given as (offset, size), for a D1 of `line`-byte lines.
    static AccessSpan of(const std::vector<std::pair<std::int64_t, std::uint32_t>>& accesses, std::uint32_t line) {
        AccessSpan span;
        if (accesses.empty()) return span;
        bool aligned = true;
        span.lowest = accesses[0].first;
        span.highest = accesses[0].first;
        for (const auto& [offset, size] : accesses) {
            aligned = aligned && offset % 8 == 0 && size >= 1 && size <= 8;
            span.lowest = std::min(span.lowest, offset);
            span.highest = std::max(span.highest, offset + std::int64_t{size} - 1);
        }
        span.within_a_line = aligned && span.highest - span.lowest < std::int64_t{line};
        return span;
    }
};

/// One thread's caches. Not thread-safe: each guest thread has its own.
class CacheHierarchy {
public:
    /// `config` must be valid (config_problem(config) empty); throws std::invalid_argument otherwise.
    explicit CacheHierarchy(const CacheConfig& config)
        : config_(checked(config)), i1_(config.i1), d1_(config.d1),
          l2_(config.l2 ? std::make_unique<CacheLevel>(*config.l2) : nullptr), ll_(config.ll),
          widest_(pmc_model::widest_access(config)),
          strict_(config.inclusion == Inclusion::strict) {}

    const CacheConfig& config() const noexcept { return config_; }
    const CacheCounts& counts() const noexcept { return counts_; }
    /// The widest access simulated: wider ones are cut to this (Cachegrind's rule), the narrowest line configured.
    std::uint32_t widest_access() const noexcept { return widest_; }

    /// A data access of `size` bytes at `address`. Returns the level that served it.
    Level read(std::uint64_t address, std::uint32_t size) noexcept { return access(d1_, Kind::read, address, size); }
    Level write(std::uint64_t address, std::uint32_t size) noexcept { return access(d1_, Kind::write, address, size); }
    /// read() or write(), for the plugin's call per access: a hit on the most recent line of its D1 set (the
    /// common case, which changes no state under either inclusion) is inlined, a few instructions; anything else
    /// is one call of the same access().
    __attribute__((always_inline)) void data(Kind kind, std::uint64_t address, std::uint32_t size) noexcept {
        if (__builtin_expect(d1_.hits_most_recent(address, size, widest_), 1)) {
            ++counts_.l1[CacheCounts::at(kind)].accesses;
            return;
        }
        data_slowly(kind, address, size);
    }
    /// data()'s inlined case alone, for an access the caller may take back (DataAccessMerger::add with a hierarchy):
    /// if the access is a hit on the most recent line of its D1 set, which changes no state, counts it as data()
    /// would and returns true; otherwise changes nothing and returns false. Under strict inclusion always false:
    /// there an instruction fetch's LL eviction can drop a D1 line before the caller would have completed the access.
    __attribute__((always_inline)) bool count_if_most_recent(Kind kind, std::uint64_t address,
                                                             std::uint32_t size) noexcept {
        if (strict_ || !d1_.hits_most_recent(address, size, widest_)) return false;
        ++counts_.l1[CacheCounts::at(kind)].accesses;
        return true;
    }
    /// count_if_most_recent() for any D1 hit within one line, which then moves its line to the front of its set as
    /// data() would; false, with nothing changed, for a miss or a straddle. For an access no later one can join
    /// (it cannot be taken back). A D1 hit touches D1 alone, which under Cachegrind's inclusion only data accesses
    /// change, so it may be counted before instruction fetches that come first in the model's order; under strict
    /// inclusion a fetch's LL eviction could drop the line in between: always false there.
    bool count_if_hit(Kind kind, std::uint64_t address, std::uint32_t size) noexcept {
        size = size == 0 ? 1 : std::min(size, widest_);
        const std::uint64_t line = address >> d1_.line_bits();
        if (strict_ || ((address + size - 1) >> d1_.line_bits()) != line || !d1_.touch_if_held(line)) return false;
        ++counts_.l1[CacheCounts::at(kind)].accesses;
        return true;
    }
    /// Whether a D1 hit may be counted ahead of fetches that come first in the model's order (count_if_most_recent,
    /// count_if_hit, the plugin's runs): not under strict inclusion, where a fetch's LL eviction can drop the line.
    bool counts_hits_early() const noexcept { return !strict_; }
    /// count_if_most_recent()'s check alone, for an access of 1 to min_line_size bytes where counts_hits_early():
    /// whether it is a hit on the most recent line of its D1 set. The caller counts it (count_data_hits).
    __attribute__((always_inline)) bool small_hits_most_recent(std::uint64_t address,
                                                               std::uint32_t size) const noexcept {
        return d1_.small_hits_most_recent(address, size);
    }
    /// Whether every access of `span` from `address` is a hit on the most recent line of its D1 set (as
    /// small_hits_most_recent of each would say), decided by two checks: a span within a line at an address that is a
    /// multiple of 8 (AccessSpan), whose lowest and highest bytes' lines are their sets' most recent. False says
    /// nothing: each access must then be checked alone.
    __attribute__((always_inline)) bool span_hits_most_recent(const AccessSpan& span,
                                                              std::uint64_t address) const noexcept {
        return span.within_a_line && (address & 7) == 0 &&
               d1_.small_hits_most_recent(address + static_cast<std::uint64_t>(span.lowest), 1) &&
               d1_.small_hits_most_recent(address + static_cast<std::uint64_t>(span.highest), 1);
    }
    /// count_if_hit() for an access of 1 to min_line_size bytes where the caller knows that counts_hits_early(), for
    /// the two most recent lines of its set alone (CacheLevel::small_hits_first_two): inlined in the plugin's call.
    __attribute__((always_inline)) bool count_if_recent_early(Kind kind, std::uint64_t address,
                                                              std::uint32_t size) noexcept {
        if (!d1_.small_hits_first_two(address, size)) return false;
        ++counts_.l1[CacheCounts::at(kind)].accesses;
        return true;
    }
    /// count_if_recent_early() for a D1 of `Geometry` (CacheLevel::small_hits_first_two_as; has_d1(Geometry's)).
    template <class Geometry>
    __attribute__((always_inline)) bool count_if_recent_early_as(Kind kind, std::uint64_t address,
                                                                 std::uint32_t size) noexcept {
        if (!d1_.small_hits_first_two_as<Geometry>(address, size)) return false;
        ++counts_.l1[CacheCounts::at(kind)].accesses;
        return true;
    }
    /// Whether D1's geometry is `g` (for count_if_recent_early_as).
    bool has_d1(const CacheGeometry& g) const noexcept { return d1_.has_geometry(g); }
    /// count_if_most_recent() where the caller knows that counts_hits_early() (DataAccessMerger::add_alone_quickly).
    __attribute__((always_inline)) bool count_if_most_recent_early(Kind kind, std::uint64_t address,
                                                                   std::uint32_t size) noexcept {
        if (!d1_.hits_most_recent(address, size, widest_)) return false;
        ++counts_.l1[CacheCounts::at(kind)].accesses;
        return true;
    }
    /// Takes back a count_if_most_recent() that returned true (it changed nothing but that count).
    void uncount_most_recent(Kind kind) noexcept { --counts_.l1[CacheCounts::at(kind)].accesses; }
    /// One instruction's fetch through I1 (`size`: its length), counted in Ir.
    Level fetch(std::uint64_t address, std::uint32_t size) noexcept {
        return access(i1_, Kind::instruction, address, size);
    }
    /// A fetch whose instruction is counted elsewhere (fetch_block): a reference plan_fetches kept.
    Level fetch_uncounted(std::uint64_t address, std::uint32_t size) noexcept {
        return access(i1_, Kind::instruction, address, size, false);
    }
    /// fetch_uncounted(), inlined for a hit on the most recent line of its I1 set (which changes nothing).
    __attribute__((always_inline)) void fetch_planned(std::uint64_t address, std::uint32_t size) noexcept {
        if (__builtin_expect(i1_.hits_most_recent(address, size, widest_), 1)) return;
        fetch_slowly(address, size);
    }
    /// fetch_planned() of a reference plan_fetches(instructions, config) made for this hierarchy's configuration:
    /// the hit on the most recent line is two loads and compares (its sets and tags were found at planning).
    __attribute__((always_inline)) void fetch_planned(const FetchRef& r) noexcept;
    /// Counts `n` data accesses of `kind` as D1 hits that change no state: accesses Cachegrind counts where the
    /// plugin cannot know the address (access_decode.hpp's register bit tests: a stack slot).
    void count_data_hits(Kind kind, std::uint64_t n) noexcept { counts_.l1[CacheCounts::at(kind)].accesses += n; }
    /// Counts `n` instructions in Ir without references (plan_fetches dropped them as certain I1 hits).
    void count_instructions(std::uint64_t n) noexcept { counts_.l1[CacheCounts::at(Kind::instruction)].accesses += n; }

    const CacheLevel& i1() const noexcept { return i1_; }
    const CacheLevel& d1() const noexcept { return d1_; }
    const CacheLevel* l2() const noexcept { return l2_.get(); }
    const CacheLevel& ll() const noexcept { return ll_; }

private:
    static const CacheConfig& checked(const CacheConfig& c) {
        if (std::string p = config_problem(c); !p.empty()) throw std::invalid_argument("cache model: " + p);
        return c;
    }

    /// Cachegrind's reference to one level: the access's first and last line (at most two), both always used.
    /// Inlined for the common case, one line; a straddle and strict inclusion's evictions are calls.
    __attribute__((always_inline)) bool missed(CacheLevel& level, std::uint64_t address, std::uint32_t size) noexcept {
        const std::uint64_t first = address >> level.line_bits();
        const std::uint64_t last = (address + size - 1) >> level.line_bits();
        if (__builtin_expect(first != last || strict_, 0)) return missed_slowly(level, first, last);
        return level.touch(first);
    }
    __attribute__((noinline)) bool missed_slowly(CacheLevel& level, std::uint64_t first, std::uint64_t last) noexcept {
        std::uint64_t evicted;
        bool miss = level.touch(first, evicted);
        if (evicted != CacheLevel::no_line) evict_above(level, evicted);
        if (last != first) {
            miss |= level.touch(last, evicted);
            if (evicted != CacheLevel::no_line) evict_above(level, evicted);
        }
        return miss;
    }

    __attribute__((always_inline)) Level access(CacheLevel& l1, Kind kind, std::uint64_t address, std::uint32_t size,
                 bool counted = true) noexcept {
        size = size == 0 ? 1 : std::min(size, widest_);
        const std::size_t k = CacheCounts::at(kind);
        counts_.l1[k].accesses += counted ? 1 : 0;
        if (__builtin_expect(!missed(l1, address, size), 1)) return Level::l1;
        ++counts_.l1[k].misses;
        if (l2_) {
            ++counts_.l2[k].accesses;
            if (!missed(*l2_, address, size)) return Level::l2;
            ++counts_.l2[k].misses;
        }
        ++counts_.ll[k].accesses;
        if (!missed(ll_, address, size)) return Level::ll;
        ++counts_.ll[k].misses;
        return Level::memory;
    }

    __attribute__((noinline)) void data_slowly(Kind kind, std::uint64_t address, std::uint32_t size) noexcept {
        access(d1_, kind, address, size);
    }
    __attribute__((noinline)) void fetch_slowly(std::uint64_t address, std::uint32_t size) noexcept {
        access(i1_, Kind::instruction, address, size, false);
    }

    /// Strict inclusion: the lines of the levels above `level` that lie in its evicted line go too.
    void evict_above(const CacheLevel& level, std::uint64_t line) noexcept {
        if (!strict_ || &level == &i1_ || &level == &d1_) return;
        const std::uint64_t first = line << level.line_bits();
        const std::uint64_t end = (line + 1) << level.line_bits();
        const auto drop = [&](CacheLevel& upper) {
            for (std::uint64_t a = first; a < end; a += upper.geometry().line) upper.invalidate(a >> upper.line_bits());
        };
        drop(i1_);
        drop(d1_);
        if (l2_ && &level == &ll_) drop(*l2_);
    }

    CacheConfig config_;
    CacheLevel i1_, d1_;
    std::unique_ptr<CacheLevel> l2_;
    CacheLevel ll_;
    std::uint32_t widest_;
    bool strict_;
    CacheCounts counts_;
};

// ---- the instruction side: a translated block's fetches, planned once ----

/// One I1 reference a block's execution makes: an instruction (address, length) that may miss. Planned for a
/// configuration, it also says where a hit that changes nothing would show: its first line's tag at `slot` of I1's
/// most recent tags (CacheLevel::tag_at), and its last line's at `last_slot` (the same for a reference within one
/// line; for one that straddles two, both lines must be their sets' most recent). A plan for a line size alone has
/// no tags (always checked in full).
struct FetchRef {
    std::uint64_t address;
    std::uint32_t size;
    std::uint32_t slot = 0;
    std::uint64_t tag = no_tag;
    std::uint32_t last_slot = 0;
    std::uint64_t last_tag = no_tag;

    /// Matches no way: a tag is a line number + 1 (lines are addresses >> 4 or more), an empty way holds 0.
    static constexpr std::uint64_t no_tag = ~std::uint64_t{0};
    bool straddles() const noexcept { return last_slot != slot || last_tag != tag; }
};

/// The I1 references of a block whose instructions are `instructions` (address, length), in order: Cachegrind
/// references I1 once per instruction, but an instruction lying wholly in the line its predecessor ended in is a
/// certain hit on the most recent line, which changes no state: it is dropped. Executing the block is then
/// `count_instructions(n)` and `fetch_uncounted` of each reference, with the same counts as every instruction
/// fetched one by one.
inline std::vector<FetchRef> plan_fetches(const std::vector<std::pair<std::uint64_t, std::uint32_t>>& instructions,
                                          std::uint32_t i1_line) {
    std::vector<FetchRef> refs;
    const unsigned bits = log2_exact(i1_line);
    std::uint64_t previous_last_line = ~std::uint64_t{0};
    for (const auto& [address, length] : instructions) {
        const std::uint32_t size = length == 0 ? 1 : length;
        const std::uint64_t first = address >> bits, last = (address + size - 1) >> bits;
        if (!(first == last && first == previous_last_line)) refs.push_back({address, size});
        previous_last_line = last;
    }
    return refs;
}
/// plan_fetches() for CacheHierarchy::fetch_planned(const FetchRef&) of a hierarchy configured as `config`: each
/// reference gets the most-recent slots and tags of its first and last line (after Cachegrind's cut to the widest
/// access). A straddle touches both lines, each a hit that changes nothing when it is its set's most recent.
inline std::vector<FetchRef> plan_fetches(const std::vector<std::pair<std::uint64_t, std::uint32_t>>& instructions,
                                          const CacheConfig& config) {
    std::vector<FetchRef> refs = plan_fetches(instructions, config.i1.line);
    const unsigned bits = log2_exact(config.i1.line);
    const std::uint32_t widest = widest_access(config);
    for (FetchRef& r : refs) {
        const std::uint32_t cut = std::min(r.size, widest);
        const std::uint64_t first = r.address >> bits, last = (r.address + cut - 1) >> bits;
        r.slot = static_cast<std::uint32_t>(CacheLevel::most_recent_slot(config.i1, first));
        r.tag = CacheLevel::tag_of(first);
        r.last_slot = static_cast<std::uint32_t>(CacheLevel::most_recent_slot(config.i1, last));
        r.last_tag = CacheLevel::tag_of(last);
    }
    return refs;
}

/// A translated block's instruction side: `instructions` counted in Ir and `refs` fetched at each execution of the
/// block, and, where the last listed instruction may not run in the block, that one apart (`last`): the plugin
/// counts and fetches it in a call of its own, which QEMU makes only when the instruction ran there. QEMU 7.2's x86
/// translator cuts a block before an instruction after its first that ends past the block's first page (that
/// instruction starts the next block, which counts it) while its plugin API still lists it in the first: counted in
/// both, it was one instruction and one fetch too many at every execution of such a block.
struct BlockFetchPlan {
    std::uint32_t instructions = 0;
    std::vector<FetchRef> refs;
    bool last_apart = false;
    FetchRef last{};
};
/// plan_fetches() of a block's `instructions` (address, length; at least one), with the last planned apart if
/// `last_apart` and there are two or more (a block's first instruction always runs in it).
inline BlockFetchPlan plan_block(const std::vector<std::pair<std::uint64_t, std::uint32_t>>& instructions,
                                 const CacheConfig& config, bool last_apart) {
    BlockFetchPlan plan;
    plan.last_apart = last_apart && instructions.size() >= 2;
    if (!plan.last_apart) {
        plan.instructions = static_cast<std::uint32_t>(instructions.size());
        plan.refs = plan_fetches(instructions, config);
        return plan;
    }
    const std::vector<std::pair<std::uint64_t, std::uint32_t>> head(instructions.begin(), instructions.end() - 1);
    plan.instructions = static_cast<std::uint32_t>(head.size());
    plan.refs = plan_fetches(head, config);
    plan.last = plan_fetches({instructions.back()}, config).front(); // (one instruction: always one reference)
    return plan;
}

inline void CacheHierarchy::fetch_planned(const FetchRef& r) noexcept {
    if (__builtin_expect(i1_.tag_at(r.slot) == r.tag && i1_.tag_at(r.last_slot) == r.last_tag, 1)) return;
    fetch_slowly(r.address, r.size);
}

// ---- the data side: QEMU's accesses joined back into the instruction's own ----

/// One data access as Cachegrind sees it.
struct DataAccess {
    std::uint64_t pc;      ///< the instruction's address
    std::uint64_t address;
    std::uint32_t size;
    Kind kind;             ///< read (loads, and read-modify-writes) or write
};

/// Joins the accesses QEMU reports for one execution of one instruction the way Cachegrind's instrumentation sees
/// that instruction, so that access counts compare:
///   - QEMU splits a wide access into pieces (7.2: a 16-byte SSE load into two 8-byte loads, a 32-byte AVX one
///     into four): pieces of the same kind, each starting where the previous ended, are one access;
///   - a store right after a load of the same address and size (x86 read-modify-write: `add [m], r`) is one read,
///     as Cachegrind counts it; so are stores in pieces that write back the load's bytes from its start
///     (QEMU 7.2's `lock cmpxchg16b`: a 16-byte load, then two 8-byte stores).
/// `execution` identifies one execution of one instruction (the plugin: a per-thread block-execution count and
/// the instruction's index in the block; ~0 is none); accesses of another execution are never joined. An access is
/// passed on to `sink(DataAccess)` once the next one shows it complete, or at flush() (before counts are read).
///
/// The plugin's call per access uses add() with its thread's hierarchy: an access that hits the most recent line of
/// its D1 set is counted at once (CacheHierarchy::count_if_most_recent) instead of waiting in the merger, and taken
/// back if the next access joins it. The counts are the same as with the sink alone: such a hit changes no state,
/// and nothing but data accesses changes D1 under Cachegrind's inclusion (the hierarchy declines under strict
/// inclusion). It saves reloading the pending access for the common case.
class DataAccessMerger {
public:
    /// Joins and passes on to `sink` alone.
    template <class Sink>
    void add(std::uint64_t execution, std::uint64_t pc, bool store, std::uint64_t address, std::uint32_t size,
             Sink&& sink) {
        add(nullptr, false, execution, pc, store ? Kind::write : Kind::read, address, size, sink);
    }
    /// Joins, counting a hit on the most recent line in `caches` at once when `count_now` (the caller's sink would
    /// do no more with it than count it: the plugin's load sampler wants every load's level, so not while it runs);
    /// the rest goes to `sink`, which must feed the same `caches`.
    template <class Sink>
    void add(CacheHierarchy* caches, bool count_now, std::uint64_t execution, std::uint64_t pc, Kind kind,
             std::uint64_t address, std::uint32_t size, Sink&& sink) {
        if (execution == execution_) return join(caches, count_now, pc, kind, address, size, sink);
        if (gate_.state == State::waiting) sink(static_cast<const DataAccess&>(access_));
        start(caches, count_now, execution, pc, kind, address, size);
    }
    /// add() when it needs no sink, and then true: the access joins the pending one, or is of another execution than
    /// the pending one, which is none or counted. Inlined with no call, for the plugin's call per access; on false,
    /// nothing changed and the caller calls add().
    __attribute__((always_inline)) bool add_without_sink(CacheHierarchy& caches, bool count_now,
                                                         std::uint64_t execution, std::uint64_t pc, Kind kind,
                                                         std::uint64_t address, std::uint32_t size) noexcept {
        if (__builtin_expect(execution == execution_, 0)) return joined(&caches, count_now, kind, address, size);
        if (__builtin_expect(gate_.state == State::waiting, 0)) return false;
        start(&caches, count_now, execution, pc, kind, address, size);
        return true;
    }
    /// add_without_sink() for an access that is the only one its instruction makes (decided at translation: a plain
    /// load or store of at most 8 bytes, model/access_decode.hpp's x86_single_access), so that no piece can join
    /// it and its execution number is not needed: true if the access is a hit on the most recent line of its D1 set,
    /// counted, and no access waits. The pending access, if counted, is left as it is: it is of another execution,
    /// which no later access can continue. On false nothing changed: the caller calls add() with the execution.
    __attribute__((always_inline)) bool add_alone_without_sink(CacheHierarchy& caches, Kind kind,
                                                               std::uint64_t address, std::uint32_t size) noexcept {
        return __builtin_expect(gate_.state != State::waiting, 1) && caches.count_if_most_recent(kind, address, size);
    }
    /// For an access that is the only one its instruction makes (as add_alone_without_sink), where that declined:
    /// the access waiting, if any, goes to `sink`, then the access is counted at once if it hits D1 at all
    /// (CacheHierarchy::count_if_hit) and true is returned. On false only the waiting access was passed on (as
    /// add() would have before this one): the caller calls add().
    template <class Sink>
    bool add_alone_if_hit(CacheHierarchy& caches, Kind kind, std::uint64_t address, std::uint32_t size, Sink&& sink) {
        if (gate_.state == State::waiting) {
            sink(static_cast<const DataAccess&>(access_));
            gate_.state = State::none;
            execution_ = no_execution;
        }
        return caches.count_if_hit(kind, address, size);
    }
    /// What the plugin's call per access checks first, in one test: no access waits, no strict inclusion, and for a
    /// read no load sampler on the thread (set_sampling). Then a hit on the most recent line may be counted at once.
    __attribute__((always_inline)) bool may_count_alone(Kind kind) const noexcept {
        static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the masks below read Gate's bytes little-endian");
        std::uint32_t word;
        std::memcpy(&word, &gate_, sizeof word);
        return (word & (kind == Kind::write ? 0x0101u : 0x010101u)) == 0; // (little-endian: state, strict, sampling)
    }
    /// add_alone_without_sink() for a hierarchy configured with strict inclusion `strict` (set_strict), its checks of
    /// the merger's state, the inclusion and the sampler made in one (may_count_alone).
    __attribute__((always_inline)) bool add_alone_quickly(CacheHierarchy& caches, Kind kind, std::uint64_t address,
                                                          std::uint32_t size) noexcept {
        return __builtin_expect(may_count_alone(kind), 1) && caches.count_if_most_recent_early(kind, address, size);
    }
    /// add_alone_quickly() for an access of 1 to min_line_size bytes that also counts a hit on its set's second most
    /// recent line at once (CacheHierarchy::count_if_recent_early), as add_alone_if_hit would.
    __attribute__((always_inline)) bool add_small_alone_quickly(CacheHierarchy& caches, Kind kind, std::uint64_t address,
                                                                std::uint32_t size) noexcept {
        return __builtin_expect(may_count_alone(kind), 1) && caches.count_if_recent_early(kind, address, size);
    }
    /// add_small_alone_quickly() for a hierarchy whose D1 has `Geometry` (CacheHierarchy::count_if_recent_early_as).
    template <class Geometry>
    __attribute__((always_inline)) bool add_small_alone_quickly_as(CacheHierarchy& caches, Kind kind,
                                                                   std::uint64_t address, std::uint32_t size) noexcept {
        return __builtin_expect(may_count_alone(kind), 1) &&
               caches.count_if_recent_early_as<Geometry>(kind, address, size);
    }
    void set_strict(bool strict) noexcept { gate_.strict = strict ? 1 : 0; }
    /// The byte that says a load sampler runs (0 or 1), for the sampler to set (plugin_sampling::current_mirror).
    std::uint8_t* sampling_flag() noexcept { return &gate_.sampling; }
    bool sampling() const noexcept { return gate_.sampling != 0; }
    /// Whether an access waits for the next one (then add_alone_without_sink() declines whatever the access).
    bool waiting() const noexcept { return gate_.state == State::waiting; }
    template <class Sink>
    void flush(Sink&& sink) {
        if (gate_.state == State::waiting) sink(static_cast<const DataAccess&>(access_));
        gate_.state = State::none;
        execution_ = no_execution;
    }
    bool pending() const noexcept { return gate_.state != State::none; }

private:
    static constexpr std::uint64_t no_execution = ~std::uint64_t{0};
    enum class State : std::uint8_t {
        none = 0,    ///< no access pending
        waiting = 1, ///< the pending access goes to the sink once complete
        counted = 2, ///< the pending access was counted as a hit on the most recent line (taken back if it grows)
    };

    __attribute__((always_inline)) void start(CacheHierarchy* caches, bool count_now, std::uint64_t execution,
                                              std::uint64_t pc, Kind kind, std::uint64_t address,
                                              std::uint32_t size) noexcept {
        execution_ = execution;
        modified_ = 0;
        access_ = DataAccess{pc, address, size, kind};
        gate_.state = caches && count_now && caches->count_if_most_recent(kind, address, size) ? State::counted
                                                                                          : State::waiting;
    }
    /// Another access of the pending access's execution: joined to it, or the next access.
    template <class Sink>
    void join(CacheHierarchy* caches, bool count_now, std::uint64_t pc, Kind kind, std::uint64_t address,
              std::uint32_t size, Sink& sink) {
        if (joined(caches, count_now, kind, address, size)) return;
        if (gate_.state == State::waiting) sink(static_cast<const DataAccess&>(access_));
        start(caches, count_now, execution_, pc, kind, address, size);
    }
    /// Joins an access of the pending access's execution to it if it continues it; false (nothing changed) if not.
    __attribute__((always_inline)) bool joined(CacheHierarchy* caches, bool count_now, Kind kind,
                                               std::uint64_t address, std::uint32_t size) noexcept {
        if (kind == access_.kind && address == access_.address + access_.size && modified_ == 0) {
            // The next piece of a split access (QEMU 7.2: a vector access in 8-byte pieces). Counted, and still in
            // the line that was its set's most recent: the grown access is that hit too (count_if_most_recent's
            // cut only shortens it), so it stays counted as it is.
            if (gate_.state == State::counted && caches && count_now &&
                ((address + size - 1) >> caches->d1().line_bits()) == (access_.address >> caches->d1().line_bits())) {
                access_.size += size;
                return true;
            }
            // Otherwise what was counted of the first pieces is taken back.
            if (gate_.state == State::counted) caches->uncount_most_recent(access_.kind);
            access_.size += size;
            gate_.state = caches && count_now && caches->count_if_most_recent(access_.kind, access_.address, access_.size)
                         ? State::counted
                         : State::waiting;
            return true;
        }
        if (kind == Kind::write && access_.kind == Kind::read && address == access_.address + modified_ &&
            modified_ + size <= access_.size) {
            modified_ += size; // read-modify-write (its store, or the store's next piece): counted as its read
            return true;
        }
        return false;
    }

    /// The pending access's state and what makes the call per access decline its common case, side by side, so that
    /// one test of their 4 bytes decides it (may_count_alone): State::waiting is the only state with bit 0 set.
    struct Gate {
        State state = State::none;
        std::uint8_t strict = 0;   ///< 1 under strict inclusion (no hit is counted early)
        std::uint8_t sampling = 0; ///< 1 while a load sampler runs on the thread (its loads need their levels)
        std::uint8_t unused = 0;
    };
    Gate gate_;
    std::uint32_t modified_ = 0; ///< bytes of the pending read its instruction stored back: a read-modify-write
    std::uint64_t execution_ = no_execution;
    DataAccess access_{};
};

} // namespace pmc_model
