// SPDX-License-Identifier: MIT
// pmc/address_map.hpp: address attribution — which variable, named heap block or process region a data address
// (a sample's ADDR) belongs to, and a data summary by variable and by region, after HP Caliper's.
//
// Three sources, most specific first:
//   1. variables: global and static data symbols of the executable and its libraries. Reading ELF symbol tables
//      needs libelf: include <pmc/symbols.hpp> and link pmc::symbols, then call pmc::load_symbols(map). Without it
//      the map still attributes by region and says that symbols are unavailable.
//   2. named blocks: memory the program names itself (pmc::NamedRegion, or AddressMap::name_block), e.g. heap
//      blocks, which no symbol table can know.
//   3. regions: the lines of /proc/PID/maps — stack, heap, anonymous, file-mapped (by path), kernel-provided.
// Nothing here is on a hot path: a map is built once, after sampling, and queried per sample.
#pragma once

#include <pmc/config.hpp>
#include <pmc/error.hpp>
#include <pmc/detail/text.hpp>

#include <link.h>
#include <malloc.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE

/// What a line of /proc/PID/maps is.
enum class RegionKind {
    stack,     ///< [stack]: the main thread's stack (other threads' stacks are anonymous mappings)
    heap,      ///< [heap]: the brk heap (large malloc blocks are anonymous mappings)
    anonymous, ///< no file: mmap(MAP_ANONYMOUS), thread stacks, large malloc blocks, a big .bss
    file,      ///< a mapped file, by path (executable, libraries, data files)
    kernel,    ///< [vdso], [vvar], [vsyscall], anon_inode:[perf_event] and other names the kernel gives
};

inline const char* region_kind_name(RegionKind k) {
    switch (k) {
    case RegionKind::stack: return "stack";
    case RegionKind::heap: return "heap";
    case RegionKind::anonymous: return "anonymous";
    case RegionKind::file: return "file";
    case RegionKind::kernel: return "kernel";
    }
    return "?";
}

/// One line of /proc/PID/maps.
struct MappedRegion {
    std::uint64_t begin = 0, end = 0; ///< [begin, end)
    std::string perms;                ///< "rw-p"
    std::uint64_t offset = 0;         ///< file offset of begin
    std::uint64_t inode = 0;
    std::string path;                 ///< file path, or "[heap]", "[stack]", "[anon:NAME]", "" ...
    RegionKind kind = RegionKind::anonymous;
    /// Set for an anonymous region that starts where a writable private mapping of a file ends (or where such a
    /// region ends): most likely that file's .bss (zero-initialized globals beyond the file's last page). The
    /// file's path; empty otherwise.
    std::string follows_file;

    /// The name the data summary groups by: "stack", "heap", "anonymous", the file's path, "[vdso]"...
    std::string label() const {
        switch (kind) {
        case RegionKind::file:
        case RegionKind::kernel: return path;
        case RegionKind::anonymous:
            if (!path.empty()) return path; // [anon:NAME] (prctl PR_SET_VMA_ANON_NAME)
            if (!follows_file.empty()) return "anonymous after " + follows_file + " (its .bss?)";
            return "anonymous";
        default: return region_kind_name(kind);
        }
    }
};

namespace detail {
inline RegionKind region_kind_of(std::string_view path) {
    if (path.empty()) return RegionKind::anonymous;
    if (path == "[stack]" || starts_with(path, "[stack:")) return RegionKind::stack;
    if (path == "[heap]") return RegionKind::heap;
    if (starts_with(path, "[anon:") || starts_with(path, "[anon_shmem:")) return RegionKind::anonymous;
    if (path.front() != '/') return RegionKind::kernel; // [vdso], [vvar], anon_inode:[perf_event], ...
    return RegionKind::file;
}

inline bool parse_hex(std::string_view s, std::uint64_t& out) {
    if (s.empty() || s.size() > 16) return false;
    std::uint64_t v = 0;
    for (char c : s) {
        unsigned d;
        if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = static_cast<unsigned>(c - 'A' + 10);
        else return false;
        v = v * 16 + d;
    }
    out = v;
    return true;
}

/// Splits off the next space-separated field of a maps line.
inline std::string_view next_field(std::string_view& s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    std::size_t n = s.find(' ');
    std::string_view f = s.substr(0, n);
    s.remove_prefix(n == std::string_view::npos ? s.size() : n);
    return f;
}
} // namespace detail

/// Parses the text of /proc/PID/maps. `source` names it in errors ("/proc/123/maps"). A malformed line is a
/// failure naming the line and what is wrong with it; nothing is guessed.
inline Result<std::vector<MappedRegion>> parse_maps(std::string_view text, std::string_view source = "maps") {
    std::vector<MappedRegion> out;
    std::size_t line_no = 0;
    auto bad = [&](const char* what, std::string_view line) {
        return make_failure(EINVAL, std::string(source) + " line " + std::to_string(line_no) + ": " + what +
                                        " in \"" + std::string(line.substr(0, 120)) +
                                        "\" (expected /proc/PID/maps lines: BEGIN-END PERMS OFFSET DEV INODE [PATH])");
    };
    while (!text.empty()) {
        std::size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        ++line_no;
        if (detail::trim(line).empty()) continue;
        std::string_view rest = line;
        MappedRegion r;
        std::string_view range = detail::next_field(rest);
        std::size_t dash = range.find('-');
        if (dash == std::string_view::npos || !detail::parse_hex(range.substr(0, dash), r.begin) ||
            !detail::parse_hex(range.substr(dash + 1), r.end))
            return bad("no BEGIN-END address range", line);
        if (r.end <= r.begin) return bad("an empty or reversed address range", line);
        std::string_view perms = detail::next_field(rest);
        if (perms.size() != 4) return bad("permissions that are not 4 characters (rwxp)", line);
        r.perms = std::string(perms);
        if (!detail::parse_hex(detail::next_field(rest), r.offset)) return bad("no hexadecimal offset", line);
        std::string_view dev = detail::next_field(rest);
        if (dev.find(':') == std::string_view::npos) return bad("no MAJOR:MINOR device", line);
        std::string_view inode = detail::next_field(rest);
        auto ino = detail::parse_number(inode);
        if (!ino || inode.find_first_not_of("0123456789") != std::string_view::npos) return bad("no decimal inode", line);
        r.inode = *ino;
        while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
        r.path = std::string(rest); // may contain spaces, and end in " (deleted)"
        r.kind = detail::region_kind_of(r.path);
        // QEMU's user mode (7.2) lists [vsyscall] twice: a line repeating the one before is the same mapping.
        if (!out.empty() && r.begin == out.back().begin && r.end == out.back().end && r.path == out.back().path &&
            r.perms == out.back().perms)
            continue;
        if (!out.empty() && r.begin < out.back().end) return bad("a range that overlaps or precedes the line before", line);
        // A .bss split into several regions (madvise or mprotect on part of it) keeps the label in each part.
        if (r.kind == RegionKind::anonymous && r.path.empty() && !out.empty() && out.back().end == r.begin) {
            const MappedRegion& before = out.back();
            if (before.kind == RegionKind::file && before.perms[1] == 'w' && before.perms[3] == 'p')
                r.follows_file = before.path;
            else if (!before.follows_file.empty() && before.perms == r.perms)
                r.follows_file = before.follows_file;
        }
        out.push_back(std::move(r));
    }
    if (out.empty()) return make_failure(EINVAL, std::string(source) + ": no mappings in it (an empty file?)");
    return out;
}

/// Reads /proc/PID/maps (pid 0: this process).
inline Result<std::vector<MappedRegion>> read_maps(pid_t pid = 0) {
    std::string path = pid == 0 ? "/proc/self/maps" : "/proc/" + std::to_string(pid) + "/maps";
    auto text = detail::read_file(path);
    if (!text) {
        int e = errno ? errno : ENOENT;
        return make_failure(e, "cannot read " + path + ": " + std::generic_category().message(e) +
                                   (pid ? " (is the process still running, and are you allowed to trace it? reading "
                                          "another user's maps needs ptrace access)"
                                        : ""));
    }
    return parse_maps(*text, path);
}

namespace detail {
/// Splits `regions[i]` at `at` (inside it): the part from `at` on becomes a region of its own, right after it.
inline void split_region(std::vector<MappedRegion>& regions, std::size_t i, std::uint64_t at) {
    MappedRegion tail = regions[i];
    regions[i].end = at;
    tail.begin = at;
    if (tail.kind == RegionKind::file) tail.offset += at - regions[i].begin;
    regions.insert(regions.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(tail));
}

/// This process's writable ELF segments as loaded, each to the page its memory size (its .bss included) ends in.
inline std::vector<std::pair<std::uint64_t, std::uint64_t>> own_writable_segments() {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto& segments = *static_cast<std::vector<std::pair<std::uint64_t, std::uint64_t>>*>(data);
            const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
            for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
                const auto& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W)) continue;
                const std::uint64_t begin = info->dlpi_addr + ph.p_vaddr;
                segments.emplace_back(begin, (begin + ph.p_memsz + page - 1) / page * page);
            }
            return 0;
        },
        &out);
    return out;
}

/// This process's own maps made exact where the text alone can only guess. Natively nothing changes; QEMU's user
/// mode emulates /proc/self/maps from its own page table, which merges neighbours and names no "[heap]" (7.2), and
/// places the program's mappings upwards, right after a library's data:
///   - an anonymous region after a library's writable data is its .bss only up to where that segment's memory
///     size ends (dl_iterate_phdr): what lies beyond is split off as plain anonymous memory;
///   - where no line says "[heap]", glibc's heap is the memory below the program break that its main arena took
///     with brk (sbrk(0) less mallinfo2's arena), split off and named heap. (Where brk fails, as under QEMU 10
///     when the host has a mapping above the program, glibc takes that memory with mmap: anonymous, as any.)
inline void refine_own_regions(std::vector<MappedRegion>& regions) {
    const auto segments = own_writable_segments();
    for (std::size_t i = 0; i < regions.size(); ++i) {
        MappedRegion& r = regions[i];
        if (r.follows_file.empty()) continue;
        std::uint64_t bss_end = 0; // the end of the writable segment that reaches into this region
        for (const auto& [begin, end] : segments)
            if (begin < r.begin && end > r.begin) bss_end = std::max(bss_end, end);
        if (bss_end == 0) r.follows_file.clear(); // no segment's memory reaches here: not a .bss
        else if (bss_end < r.end) {
            split_region(regions, i, bss_end);
            regions[i + 1].follows_file.clear();
        }
    }
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 33)
    for (const auto& r : regions)
        if (r.kind == RegionKind::heap) return;
    const auto top = reinterpret_cast<std::uint64_t>(::sbrk(0));
    const auto taken = static_cast<std::uint64_t>(::mallinfo2().arena); // the main arena's system memory
    const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    if (taken == 0 || top == ~std::uint64_t{0} || taken > top) return;
    const std::uint64_t begin = (top - taken) / page * page, end = (top + page - 1) / page * page;
    for (std::size_t i = 0; i < regions.size(); ++i) {
        if (regions[i].kind != RegionKind::anonymous || !regions[i].path.empty() || regions[i].end < end ||
            regions[i].begin > begin || regions[i].begin >= end)
            continue; // (the heap lies wholly in one anonymous region, or brk failed and it is not there)
        if (regions[i].begin < begin) split_region(regions, i++, begin);
        if (end < regions[i].end) split_region(regions, i, end);
        regions[i].kind = RegionKind::heap;
        regions[i].follows_file.clear();
        if (i + 1 < regions.size()) regions[i + 1].follows_file.clear();
        return;
    }
    // brk failed: on the main thread a small block comes from the main arena, wherever glibc mapped it. Its region
    // is the heap when it holds no more than the arena took (not merged with a neighbour that is not).
    if (::getpid() != static_cast<pid_t>(::gettid())) return;
    void* probe = std::malloc(1);
    const auto at = reinterpret_cast<std::uint64_t>(probe);
    std::free(probe);
    for (auto& r : regions)
        if (r.begin <= at && at < r.end && r.kind == RegionKind::anonymous && r.path.empty() && r.end - r.begin <= taken) {
            r.kind = RegionKind::heap;
            r.follows_file.clear();
        }
#endif
#endif
}
} // namespace detail

/// A global or static variable: a data symbol at its run-time address.
struct DataSymbol {
    std::uint64_t begin = 0, size = 0;
    std::string name; ///< demangled where it was a C++ name
    std::string file; ///< the ELF file it came from
    bool local = false; ///< a static (STB_LOCAL) symbol: only .symtab has these
};

/// What was learnt about one ELF file's symbol tables (filled by pmc::load_symbols).
struct SymbolFile {
    std::string path;
    std::size_t symtab_objects = 0; ///< data symbols from .symtab (all, statics included)
    std::size_t dynsym_objects = 0; ///< data symbols from .dynsym (exported ones only)
    bool stripped = false;          ///< no .symtab: statics and unexported globals cannot be named
    std::string error;              ///< why the file could not be read, if it could not
};

/// A heap (or any) block the program names.
struct NamedBlock {
    std::uint64_t begin = 0, size = 0;
    std::string name;
};

namespace detail {
struct NamedRegistry {
    std::mutex mutex;
    std::map<std::uint64_t, NamedBlock> blocks; // by begin
};
inline NamedRegistry& named_registry() {
    static NamedRegistry r;
    return r;
}
} // namespace detail

/// Names [begin, begin + size) for every AddressMap of this process made afterwards (AddressMap::of_process(0)).
/// A later name for the same begin replaces the earlier one. Thread-safe; allocates (not for a hot path).
inline void name_region(const void* begin, std::size_t size, std::string name) {
    auto& r = detail::named_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto b = reinterpret_cast<std::uint64_t>(begin);
    r.blocks[b] = NamedBlock{b, size, std::move(name)};
}
/// Removes the name given to the block that begins at `begin`; false if there was none.
inline bool unname_region(const void* begin) noexcept {
    auto& r = detail::named_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return r.blocks.erase(reinterpret_cast<std::uint64_t>(begin)) != 0;
}
/// The blocks named now, in address order.
inline std::vector<NamedBlock> named_regions() {
    auto& r = detail::named_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<NamedBlock> out;
    for (const auto& kv : r.blocks) out.push_back(kv.second);
    return out;
}

/// RAII: names a block for its lifetime (name it right after allocating, destroy before freeing).
class NamedRegion {
public:
    NamedRegion(const void* begin, std::size_t size, std::string name) : begin_(begin) {
        name_region(begin, size, std::move(name));
    }
    ~NamedRegion() { unname_region(begin_); }
    NamedRegion(const NamedRegion&) = delete;
    NamedRegion& operator=(const NamedRegion&) = delete;

private:
    const void* begin_;
};

/// Where an address belongs.
enum class AttributionKind { variable, named_block, region, unmapped };

struct Attribution {
    AttributionKind kind = AttributionKind::unmapped;
    std::string_view name;        ///< the variable or block ("" for region/unmapped); valid while the map lives
    const MappedRegion* region = nullptr; ///< the maps line holding the address (null when unmapped)
    std::uint64_t offset = 0;     ///< address - begin of the variable, block or region

    /// "variable NAME", "block NAME", the region's label, or "unmapped".
    std::string label() const {
        switch (kind) {
        case AttributionKind::variable: return std::string(name);
        case AttributionKind::named_block: return std::string(name);
        case AttributionKind::region: return region->label();
        case AttributionKind::unmapped: return "unmapped";
        }
        return "?";
    }
};

/// The address map of one process at one moment: regions, named blocks and (when loaded) data symbols.
class AddressMap {
public:
    explicit AddressMap(std::vector<MappedRegion> regions, int pid = 0) : regions_(std::move(regions)), pid_(pid) {
        std::sort(regions_.begin(), regions_.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    }

    /// The map of process `pid` (0: this one, with the blocks named by pmc::name_region) now.
    static Result<AddressMap> try_of_process(pid_t pid = 0) {
        auto regions = read_maps(pid);
        if (!regions) return regions.failure();
        if (pid == 0 || pid == ::getpid()) detail::refine_own_regions(*regions);
        AddressMap map(std::move(*regions), pid);
        if (pid == 0)
            for (auto& b : named_regions()) map.name_block(b.begin, b.size, b.name);
        return map;
    }
    static AddressMap of_process(pid_t pid = 0) { return std::move(try_of_process(pid).value()); }

    /// Names [begin, begin + size) in this map only (e.g. a block another process told you about).
    void name_block(std::uint64_t begin, std::uint64_t size, std::string name) {
        if (size == 0) return;
        forget_block(begin);
        auto it = std::lower_bound(blocks_.begin(), blocks_.end(), begin,
                                   [](const NamedBlock& b, std::uint64_t a) { return b.begin < a; });
        blocks_.insert(it, NamedBlock{begin, size, std::move(name)});
    }
    void name_block(const void* begin, std::size_t size, std::string name) {
        name_block(reinterpret_cast<std::uint64_t>(begin), size, std::move(name));
    }
    bool forget_block(std::uint64_t begin) {
        auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](const NamedBlock& b) { return b.begin == begin; });
        if (it == blocks_.end()) return false;
        blocks_.erase(it);
        return true;
    }

    /// Adds variables (pmc::load_symbols does this from the ELF files in the map) and what was learnt per file.
    void add_symbols(std::vector<DataSymbol> symbols, SymbolFile file) {
        for (auto& s : symbols)
            if (s.size) symbols_.push_back(std::move(s));
        std::sort(symbols_.begin(), symbols_.end(), [](auto& a, auto& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.size > b.size;
        });
        // The same variable can be in .symtab and .dynsym: keep one.
        symbols_.erase(std::unique(symbols_.begin(), symbols_.end(),
                                   [](auto& a, auto& b) { return a.begin == b.begin && a.name == b.name; }),
                       symbols_.end());
        // max_end_[i]: the highest end among symbols 0..i, so a lookup stops scanning back where none can reach.
        max_end_.resize(symbols_.size());
        std::uint64_t reach = 0;
        for (std::size_t i = 0; i < symbols_.size(); ++i) max_end_[i] = reach = std::max(reach, symbols_[i].begin + symbols_[i].size);
        if (!file.path.empty()) files_.push_back(std::move(file));
        symbols_loaded_ = true;
    }

    /// Attributes one address: the variable, else the named block, else the region, else unmapped.
    Attribution attribute(std::uint64_t addr) const {
        Attribution a;
        a.region = region_of(addr);
        if (const DataSymbol* s = symbol_of(addr)) {
            a.kind = AttributionKind::variable;
            a.name = s->name;
            a.offset = addr - s->begin;
            return a;
        }
        if (const NamedBlock* b = block_of(addr)) {
            a.kind = AttributionKind::named_block;
            a.name = b->name;
            a.offset = addr - b->begin;
            return a;
        }
        if (a.region) {
            a.kind = AttributionKind::region;
            a.offset = addr - a.region->begin;
        }
        return a;
    }
    Attribution attribute(const void* p) const { return attribute(reinterpret_cast<std::uint64_t>(p)); }

    const MappedRegion* region_of(std::uint64_t addr) const {
        auto it = std::upper_bound(regions_.begin(), regions_.end(), addr,
                                   [](std::uint64_t a, const MappedRegion& r) { return a < r.begin; });
        if (it == regions_.begin()) return nullptr;
        --it;
        return addr < it->end ? &*it : nullptr;
    }
    const DataSymbol* symbol_of(std::uint64_t addr) const {
        // Symbols sorted by begin: scan back from the last that begins at or below addr while one can still reach it.
        auto i = static_cast<std::size_t>(std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                                                           [](std::uint64_t a, const DataSymbol& s) { return a < s.begin; }) -
                                          symbols_.begin());
        const DataSymbol* best = nullptr;
        while (i > 0 && max_end_[i - 1] > addr) {
            const DataSymbol& s = symbols_[--i];
            if (addr - s.begin < s.size && (!best || s.size < best->size)) best = &s; // innermost
        }
        return best;
    }
    const NamedBlock* block_of(std::uint64_t addr) const {
        const NamedBlock* best = nullptr;
        for (const auto& b : blocks_)
            if (addr >= b.begin && addr - b.begin < b.size && (!best || b.size < best->size)) best = &b;
        return best;
    }

    const std::vector<MappedRegion>& regions() const { return regions_; }
    const std::vector<NamedBlock>& blocks() const { return blocks_; }
    const std::vector<DataSymbol>& symbols() const { return symbols_; }
    const std::vector<SymbolFile>& symbol_files() const { return files_; }
    int pid() const { return pid_; }
    bool symbols_loaded() const { return symbols_loaded_; }

    /// One line for a report: where variable names come from, which files are stripped, or why there are none.
    std::string symbols_note() const {
        if (!symbols_loaded_)
            return "variables: symbols unavailable (pmc built without libelf: link pmc::symbols and call "
                   "pmc::load_symbols; Debian: apt-get install libelf-dev); attributed by region only";
        std::string stripped, failed;
        for (const auto& f : files_) {
            if (!f.error.empty()) failed += (failed.empty() ? "" : ", ") + f.path + " (" + f.error + ")";
            else if (f.stripped) stripped += (stripped.empty() ? "" : ", ") + f.path;
        }
        std::string note = "variables: from the ELF symbol tables of " + std::to_string(files_.size()) + " files";
        if (!stripped.empty())
            note += "; stripped (no .symtab: only exported variables are named, statics fall to their region): " +
                    stripped;
        if (!failed.empty()) note += "; not read: " + failed;
        return note;
    }

private:
    std::vector<MappedRegion> regions_;
    std::vector<NamedBlock> blocks_;
    std::vector<DataSymbol> symbols_;
    std::vector<SymbolFile> files_;
    std::vector<std::uint64_t> max_end_;
    int pid_ = 0;
    bool symbols_loaded_ = false;
};

/// A data summary: samples (and their summed weights) by variable or block, and by region — HP Caliper's.
class DataSummary {
public:
    struct Row {
        std::string name;
        std::string kind; ///< "variable", "block", or a region kind ("stack", "file", ...), "unmapped"
        std::uint64_t samples = 0;
        double weight = 0;  ///< summed sample weights (latency), 0 when samples have none
    };

    /// Adds one sample. `weight` is its latency weight where it has one.
    void add(const Attribution& a, double weight = 0) {
        ++total_;
        total_weight_ += weight;
        std::string region = a.region ? a.region->label() : std::string("unmapped");
        std::string region_kind = a.region ? region_kind_name(a.region->kind) : "unmapped";
        bump(by_region_, region, region_kind, weight);
        switch (a.kind) {
        case AttributionKind::variable: bump(by_object_, std::string(a.name), "variable", weight); break;
        case AttributionKind::named_block: bump(by_object_, std::string(a.name), "block", weight); break;
        default: bump(by_object_, "(no variable) " + region, region_kind, weight); break;
        }
    }

    std::uint64_t total() const { return total_; }
    double total_weight() const { return total_weight_; }
    /// Rows by variable or named block (addresses in neither fall to "(no variable) REGION"), most samples first.
    std::vector<Row> by_variable() const { return sorted(by_object_); }
    /// Rows by region (maps line label), most samples first.
    std::vector<Row> by_region() const { return sorted(by_region_); }
    /// Samples of one row by name (0 when absent).
    std::uint64_t samples_of(std::string_view name) const {
        auto it = by_object_.find(std::string(name));
        if (it != by_object_.end()) return it->second.samples;
        it = by_region_.find(std::string(name));
        return it != by_region_.end() ? it->second.samples : 0;
    }

    /// A plain-text table of both summaries. `scale` multiplies sample counts into event estimates (the period),
    /// shown as "estimated events" only when it is not 1: the bias check belongs beside it.
    std::string text(double scale = 1) const {
        std::string out;
        auto table = [&](const char* title, const std::vector<Row>& rows) {
            char line[512];
            std::snprintf(line, sizeof line, "%s\n  %10s %7s %12s  %-10s %s\n", title, "samples", "%",
                          scale != 1 ? "est. events" : "", "kind", "name");
            out += line;
            for (const auto& r : rows) {
                double pct = total_ ? 100.0 * static_cast<double>(r.samples) / static_cast<double>(total_) : 0;
                char est[32] = "";
                if (scale != 1) std::snprintf(est, sizeof est, "%.0f", static_cast<double>(r.samples) * scale);
                std::snprintf(line, sizeof line, "  %10llu %6.2f%% %12s  %-10s %s", static_cast<unsigned long long>(r.samples),
                              pct, est, r.kind.c_str(), r.name.c_str());
                out += line;
                if (total_weight_ > 0) {
                    std::snprintf(line, sizeof line, "  (mean weight %.1f)",
                                  r.samples ? r.weight / static_cast<double>(r.samples) : 0.0);
                    out += line;
                }
                out += '\n';
            }
        };
        table("by variable:", by_variable());
        table("by region:", by_region());
        return out;
    }

private:
    static void bump(std::map<std::string, Row>& m, const std::string& name, const std::string& kind, double w) {
        Row& r = m[name];
        if (r.name.empty()) {
            r.name = name;
            r.kind = kind;
        }
        ++r.samples;
        r.weight += w;
    }
    static std::vector<Row> sorted(const std::map<std::string, Row>& m) {
        std::vector<Row> rows;
        for (const auto& kv : m) rows.push_back(kv.second);
        std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.samples > b.samples; });
        return rows;
    }
    std::map<std::string, Row> by_object_, by_region_;
    std::uint64_t total_ = 0;
    double total_weight_ = 0;
};

PMC_END_NAMESPACE
