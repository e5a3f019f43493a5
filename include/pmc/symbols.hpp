// SPDX-License-Identifier: MIT
// pmc/symbols.hpp: global and static variables from the ELF symbol tables (.symtab and .dynsym) of the executable
// and every library a process has mapped, placed at their run-time addresses in a pmc::AddressMap.
//
// dladdr() sees only exported symbols (.dynsym); statics and the executable's globals are only in .symtab, which
// strip removes: a stripped file is reported as such, and its unexported variables fall to their region.
// Needs elfutils' libelf (Debian libelf-dev): link the CMake target pmc::symbols, which also defines
// PMC_HAVE_SYMBOLS=1 so that code can use this header only where it is available.
#pragma once

#include <pmc/address_map.hpp>
#include <pmc/config.hpp>

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

PMC_BEGIN_NAMESPACE

/// One PT_LOAD segment: how file offsets map to the file's virtual addresses.
struct LoadSegment {
    std::uint64_t offset = 0, vaddr = 0, filesz = 0, memsz = 0;
};

/// An ELF file's data symbols at their link-time addresses, and its load segments.
struct ElfDataSymbols {
    SymbolFile info;
    std::vector<DataSymbol> symbols; ///< begin = st_value (add the load bias for the run-time address)
    std::vector<LoadSegment> segments;
    bool is_elf = false; ///< false for a mapped data file: not an error
};

namespace detail {
inline std::string demangle(const char* name) {
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || !d) return name;
    std::string out(d);
    std::free(d);
    return out;
}

/// Closes the fd and ends the Elf handle on every path out.
struct ElfFile {
    int fd = -1;
    Elf* elf = nullptr;
    ~ElfFile() {
        if (elf) elf_end(elf);
        if (fd >= 0) ::close(fd);
    }
};
} // namespace detail

/// Reads the data symbols (STT_OBJECT, STT_COMMON; thread-locals excluded: their addresses differ per thread) of
/// one ELF file. Failures are recorded in info.error, never thrown: one unreadable library must not stop a report.
inline ElfDataSymbols read_elf_data_symbols(const std::string& path) {
    ElfDataSymbols out;
    out.info.path = path;
    detail::ElfFile f;
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) {
        out.info.error = std::string("cannot open: ") + std::strerror(errno);
        return out;
    }
    char magic[4] = {};
    if (::pread(f.fd, magic, 4, 0) != 4 || std::memcmp(magic, ELFMAG, SELFMAG) != 0) return out; // not ELF
    out.is_elf = true;
    if (elf_version(EV_CURRENT) == EV_NONE) {
        out.info.error = std::string("libelf is unusable: ") + elf_errmsg(-1);
        return out;
    }
    f.elf = elf_begin(f.fd, ELF_C_READ, nullptr);
    if (!f.elf || elf_kind(f.elf) != ELF_K_ELF) {
        out.info.error = std::string("not a readable ELF file: ") + elf_errmsg(-1);
        return out;
    }
    std::size_t phnum = 0;
    if (elf_getphdrnum(f.elf, &phnum) == 0)
        for (std::size_t i = 0; i < phnum; ++i) {
            GElf_Phdr ph;
            if (gelf_getphdr(f.elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
                out.segments.push_back(LoadSegment{ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz});
        }
    bool has_symtab = false;
    for (Elf_Scn* scn = elf_nextscn(f.elf, nullptr); scn; scn = elf_nextscn(f.elf, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
        bool symtab = sh.sh_type == SHT_SYMTAB;
        has_symtab = has_symtab || symtab;
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data || sh.sh_entsize == 0) continue;
        std::size_t n = sh.sh_size / sh.sh_entsize;
        for (std::size_t i = 0; i < n; ++i) {
            GElf_Sym sym;
            if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
            int type = GELF_ST_TYPE(sym.st_info);
            if ((type != STT_OBJECT && type != STT_COMMON) || sym.st_shndx == SHN_UNDEF || sym.st_size == 0) continue;
            const char* name = elf_strptr(f.elf, sh.sh_link, sym.st_name);
            if (!name || !*name) continue;
            DataSymbol s;
            s.begin = sym.st_value;
            s.size = sym.st_size;
            s.name = detail::demangle(name);
            s.file = path;
            s.local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
            out.symbols.push_back(std::move(s));
            ++(symtab ? out.info.symtab_objects : out.info.dynsym_objects);
        }
    }
    out.info.stripped = !has_symtab;
    return out;
}

/// The load bias of a file from one of its mappings: run-time address = link-time address + bias. The mapping's
/// file offset lies in one PT_LOAD segment, whose file offsets and addresses move together.
inline std::optional<std::uint64_t> load_bias(const MappedRegion& r, const std::vector<LoadSegment>& segments) {
    const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    for (const auto& s : segments) {
        std::uint64_t first = s.offset & ~(page - 1);
        if (r.offset >= first && r.offset < s.offset + std::max<std::uint64_t>(s.filesz, 1))
            return r.begin - r.offset + s.offset - s.vaddr; // unsigned wrap-around is the intended arithmetic
    }
    return std::nullopt;
}

/// Adds the data symbols of every ELF file mapped in `map` at their run-time addresses. Records per file whether it
/// is stripped or could not be read (see AddressMap::symbols_note). Files that are not ELF (data files) are skipped.
inline void load_symbols(AddressMap& map) {
    std::set<std::string> done;
    for (const auto& r : map.regions()) {
        if (r.kind != RegionKind::file || done.count(r.path)) continue;
        done.insert(r.path);
        std::string path = r.path;
        const std::string deleted = " (deleted)";
        if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
            path.resize(path.size() - deleted.size());
        // Another process's paths are in its mount namespace: reach them through its root where we may.
        std::string open_path = path;
        if (map.pid() != 0) {
            std::string via_root = "/proc/" + std::to_string(map.pid()) + "/root" + path;
            if (::access(via_root.c_str(), R_OK) == 0) open_path = via_root;
        }
        ElfDataSymbols elf = read_elf_data_symbols(open_path);
        elf.info.path = r.path;
        if (!elf.is_elf && elf.info.error.empty()) continue;
        std::optional<std::uint64_t> bias;
        for (const auto& m : map.regions())
            if (m.path == r.path && (bias = load_bias(m, elf.segments))) break;
        if (!bias && elf.info.error.empty() && !elf.symbols.empty()) {
            elf.info.error = "no mapping of it matches a PT_LOAD segment (cannot place its symbols)";
            elf.symbols.clear();
        }
        for (auto& s : elf.symbols) s.begin += bias.value_or(0);
        map.add_symbols(std::move(elf.symbols), std::move(elf.info));
    }
    if (!map.symbols_loaded()) map.add_symbols({}, SymbolFile{}); // loaded, though no file had any
}

PMC_END_NAMESPACE
