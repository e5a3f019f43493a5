// SPDX-License-Identifier: MIT
// Address attribution (pmc/address_map.hpp, pmc/symbols.hpp): /proc/PID/maps parsing and its errors, named blocks,
// the stack, a mapped file, and globals and statics from the ELF symbol tables of this (non-stripped) test binary and
// of a stripped copy of it (PMC_STRIPPED_COPY, made by objcopy --strip-all at build time).
#include "catch.hpp"
#include "sanitizers.hpp"

#include <pmc/address_map.hpp>
#if PMC_HAVE_SYMBOLS
#include <pmc/symbols.hpp>
#endif

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <memory>
#include <string>

// Known variables: a global, a static in an unnamed namespace, a function-local static. Used through volatile
// pointers so that they exist.
int pmc_test_global_array[4096];
namespace {
double static_table[512] = {1.0};
}
static char* function_static() {
    static char buffer[3000];
    return buffer;
}
volatile void* keep_alive[] = {pmc_test_global_array, static_table, nullptr};


namespace {
const char* sample_maps =
    "55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1234       /usr/bin/prog with space\n"
    "55d0c0a02000-55d0c0a05000 r-xp 00002000 08:01 1234       /usr/bin/prog with space\n"
    "55d0c0a05000-55d0c0a06000 rw-p 00005000 08:01 1234       /usr/bin/prog with space\n"
    "55d0c0a06000-55d0c0a26000 rw-p 00000000 00:00 0 \n"
    "55d0c0a26000-55d0c0a46000 rw-p 00000000 00:00 0\n"
    "55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0          [heap]\n"
    "7f0000000000-7f0000100000 rw-p 00000000 00:00 0          [anon:pool]\n"
    "7f0000100000-7f0000200000 rw-s 00000000 00:05 77         /memfd:buf (deleted)\n"
    "7f0000200000-7f0000300000 rw-p 00000000 00:00 0\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0          [stack]\n"
    "7ffd000f0000-7ffd000f2000 r-xp 00000000 00:00 0          [vdso]\n"
    "7ffd000f2000-7ffd000f3000 rw-s 00000000 00:0e 1055       anon_inode:[perf_event]\n";

std::string self_exe() {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    REQUIRE(n > 0);
    return std::string(buf, static_cast<std::size_t>(n));
}
} // namespace

TEST_CASE("maps lines: ranges, kinds and labels", "[attribution]") {
    auto regions = pmc::parse_maps(sample_maps);
    REQUIRE(regions.ok());
    REQUIRE(regions->size() == 12);
    const auto& r = *regions;
    CHECK(r[0].begin == 0x55d0c0a00000);
    CHECK(r[0].end == 0x55d0c0a02000);
    CHECK(r[1].perms == "r-xp");
    CHECK(r[1].offset == 0x2000);
    CHECK(r[1].inode == 1234);
    CHECK(r[0].kind == pmc::RegionKind::file);
    CHECK(r[0].path == "/usr/bin/prog with space");
    CHECK(r[3].kind == pmc::RegionKind::anonymous);
    CHECK(r[3].follows_file == "/usr/bin/prog with space"); // a .bss after the writable data segment
    CHECK_THAT(r[3].label(), ContainsSubstring(".bss"));
    CHECK(r[4].follows_file == "/usr/bin/prog with space"); // the same .bss, split in two (madvise on part of it)
    CHECK(r[5].kind == pmc::RegionKind::heap);
    CHECK(r[6].kind == pmc::RegionKind::anonymous);
    CHECK(r[6].label() == "[anon:pool]");
    CHECK(r[7].kind == pmc::RegionKind::file);
    CHECK(r[7].label() == "/memfd:buf (deleted)");
    CHECK(r[8].label() == "anonymous"); // follows a shared mapping of a file, not a writable private one: no .bss
    CHECK(r[9].kind == pmc::RegionKind::stack);
    CHECK(r[10].kind == pmc::RegionKind::kernel);
    CHECK(r[11].kind == pmc::RegionKind::kernel); // not a file: nothing to read symbols from

    pmc::AddressMap map(*regions);
    CHECK(map.attribute(std::uint64_t{0x55d0c0a03000}).region == &map.regions()[1]);
    CHECK(map.attribute(std::uint64_t{0x55d0c0a02000 - 1}).region == &map.regions()[0]); // last byte of the first
    CHECK(map.attribute(std::uint64_t{0x55d0c1021000}).kind == pmc::AttributionKind::unmapped); // one past [heap]
    CHECK(map.attribute(std::uint64_t{0}).kind == pmc::AttributionKind::unmapped);
    auto stack = map.attribute(std::uint64_t{0x7ffd00000010});
    CHECK(stack.kind == pmc::AttributionKind::region);
    CHECK(stack.label() == "stack");
    CHECK(stack.offset == 0x10);
    CHECK_THAT(map.symbols_note(), ContainsSubstring("symbols unavailable"));
}

TEST_CASE("variables: the innermost containing symbol, past symbols that end below the address", "[attribution]") {
    auto regions = pmc::parse_maps(sample_maps);
    REQUIRE(regions.ok());
    pmc::AddressMap map(*regions);
    auto sym = [](std::uint64_t b, std::uint64_t n, const char* name) { return pmc::DataSymbol{b, n, name, "f", false}; };
    map.add_symbols({sym(0x1000, 0x1000, "outer"), sym(0x1100, 0x10, "inner"), sym(0x1200, 0x10, "other"),
                     sym(0x3000, 0x8, "after"), sym(0x1100, 0x10, "inner")}, // a duplicate (.symtab and .dynsym)
                    pmc::SymbolFile{"f", 4, 1, false, ""});
    CHECK(map.symbols().size() == 4);
    CHECK(map.attribute(std::uint64_t{0x1105}).label() == "inner");
    CHECK(map.attribute(std::uint64_t{0x1500}).label() == "outer"); // "other" ends below: scan on to "outer"
    CHECK(map.attribute(std::uint64_t{0x1500}).offset == 0x500);
    CHECK(map.attribute(std::uint64_t{0x1fff}).label() == "outer");
    CHECK(map.attribute(std::uint64_t{0x2000}).kind == pmc::AttributionKind::unmapped);
    CHECK(map.attribute(std::uint64_t{0xfff}).kind == pmc::AttributionKind::unmapped);
    CHECK(map.attribute(std::uint64_t{0x3007}).label() == "after");
    CHECK(map.attribute(std::uint64_t{0x3008}).kind != pmc::AttributionKind::variable);
    CHECK_THAT(map.symbols_note(), ContainsSubstring("symbol tables of 1 files"));
}

TEST_CASE("malformed maps text: a clear error naming the line, never a crash", "[attribution]") {
    struct Bad {
        const char* text;
        const char* says;
    } cases[] = {
        {"", "no mappings"},
        {"\n\n", "no mappings"},
        {"garbage\n", "line 1: no BEGIN-END"},
        {"1000-zz00 r--p 00000000 08:01 1 /x\n", "no BEGIN-END"},
        {"2000-1000 r--p 00000000 08:01 1 /x\n", "reversed"},
        {"1000-2000 r--p 00000000 08:01 1 /x\n1000-3000 rw-p 00000000 08:01 1 /x\n", "line 2: a range that overlaps"},
        {"1000-2000 rw 00000000 08:01 1 /x\n", "permissions"},
        {"1000-2000 r--p xyz 08:01 1 /x\n", "offset"},
        {"1000-2000 r--p 00000000 0801 1 /x\n", "device"},
        {"1000-2000 r--p 00000000 08:01 1a /x\n", "inode"},
        {"1000-2000 r--p 00000000 08:01\n", "inode"},
        {"11112222333344445-2000 r--p 0 08:01 1 /x\n", "no BEGIN-END"}, // 17 hex digits
    };
    for (const auto& c : cases) {
        INFO(c.text);
        auto r = pmc::parse_maps(c.text, "/proc/9/maps");
        REQUIRE_FALSE(r.ok());
        CHECK(r.failure().code == std::errc::invalid_argument);
        CHECK_THAT(r.failure().message, ContainsSubstring(c.says));
        CHECK_THAT(r.failure().message, ContainsSubstring("/proc/9/maps"));
    }
    // QEMU's user mode (7.2) lists [vsyscall] twice: the same line again is one mapping, not an overlap.
    const char* twice = "1000-2000 r--p 00000000 08:01 1 /x\n"
                        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
                        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
    auto repeated = pmc::parse_maps(twice);
    REQUIRE(repeated.ok());
    CHECK(repeated->size() == 2);
    // Every cut and many byte flips of a real maps file: parsed or refused, never a crash or a read out of bounds
    // (AddressSanitizer checks the latter in the sanitizer build).
    auto text = pmc::detail::read_file("/proc/self/maps");
    REQUIRE(text);
    for (std::size_t cut = 0; cut < text->size(); cut += 7) (void)pmc::parse_maps(std::string_view(*text).substr(0, cut));
    std::mt19937 rng(14);
    for (int i = 0; i < 2000; ++i) {
        std::string t = *text;
        t[rng() % t.size()] = static_cast<char>(rng() % 256);
        auto r = pmc::parse_maps(t);
        if (!r.ok()) CHECK_FALSE(r.failure().message.empty());
    }
    auto gone = pmc::read_maps(999999999);
    REQUIRE_FALSE(gone.ok());
    CHECK_THAT(gone.failure().message, ContainsSubstring("/proc/999999999/maps"));
}

TEST_CASE("a named heap block, the stack and a mapped file of this process", "[attribution]") {
    const std::size_t size = 1 << 20;
    char* block = static_cast<char*>(std::malloc(size));
    REQUIRE(block);
    int local = 0;
    char path[] = "/tmp/pmc-test-mapped-XXXXXX";
    int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 3 * 4096) == 0);
    void* file = ::mmap(nullptr, 3 * 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    REQUIRE(file != MAP_FAILED);
    {
        pmc::NamedRegion name(block, size, "matrix");
        auto map = pmc::AddressMap::of_process();
        auto a = map.attribute(block + 1000);
        CHECK(a.kind == pmc::AttributionKind::named_block);
        CHECK(a.label() == "matrix");
        CHECK(a.offset == 1000);
        CHECK(map.attribute(block + size).label() != "matrix"); // one past its end
        auto s = map.attribute(&local);
        CHECK(s.kind == pmc::AttributionKind::region);
        CHECK(s.region->kind == pmc::RegionKind::stack);
        auto f = map.attribute(static_cast<char*>(file) + 5000);
        CHECK(f.kind == pmc::AttributionKind::region);
        CHECK(f.region->kind == pmc::RegionKind::file);
        CHECK(f.label() == path);
        CHECK(f.offset == 5000);
    }
    // Unnamed: the block falls back to its region (the brk heap, or an anonymous mapping for a large block).
    auto map_after = pmc::AddressMap::of_process(); // an Attribution points into its map: keep the map
    auto after = map_after.attribute(block + 1000);
    CHECK(after.kind == pmc::AttributionKind::region);
    CHECK((after.region->kind == pmc::RegionKind::heap || after.region->kind == pmc::RegionKind::anonymous));
    CHECK_FALSE(pmc::unname_region(block));
    ::munmap(file, 3 * 4096);
    ::close(fd);
    ::unlink(path);
    std::free(block);
}

TEST_CASE("this process's map made exact where QEMU's emulated maps only allow a guess: the brk heap unnamed, "
          "anonymous memory after a library's data", "[attribution]") {
    // Natively the kernel names [heap]; QEMU 7.2's emulated /proc/self/maps does not, and QEMU places mappings right
    // after a library's writable data. Both are made here from this process's own lines, then refined.
    // (freed however the case ends: a skip below throws)
    const std::unique_ptr<char, void (*)(void*)> small_block(static_cast<char*>(std::malloc(64)), &std::free);
    char* const small = small_block.get();
    REQUIRE(small);
    small[0] = 1;
    auto real = pmc::read_maps();
    REQUIRE(real);
    const pmc::MappedRegion* heap = nullptr;
    for (const auto& r : *real)
        if (r.kind == pmc::RegionKind::heap) heap = &r;
    if (!heap) PMC_SKIP("this process's maps have no [heap] line to hide");
    const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const auto hex = [](std::uint64_t v) {
        char b[32];
        std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
        return std::string(b);
    };
    // This program's writable segment, to the page its .bss ends in.
    std::pair<std::uint64_t, std::uint64_t> own{0, 0};
    for (const auto& seg : pmc::detail::own_writable_segments())
        if (seg.first <= reinterpret_cast<std::uint64_t>(&pmc_test_global_array[0]) &&
            reinterpret_cast<std::uint64_t>(&pmc_test_global_array[0]) < seg.second)
            own = seg;
    REQUIRE(own.second > own.first + page);
    const std::uint64_t file_end = own.second - page; // the file's line ends inside the segment: a .bss after it
    if (heap->begin < own.second + 80 * page) PMC_SKIP("the brk heap starts too close to the program for this layout");
    const std::string maps =
        hex(own.first / page * page) + "-" + hex(file_end) + " rw-p 00000000 08:01 1 /prog\n" +
        hex(file_end) + "-" + hex(own.second + 64 * page) + " rw-p 00000000 00:00 0\n" +      // .bss, then more
        hex(heap->begin - 16 * page) + "-" + hex(heap->end + 16 * page) + " rw-p 00000000 00:00 0\n"; // unnamed heap
    auto regions = pmc::parse_maps(maps);
    REQUIRE(regions);
    REQUIRE(regions->size() == 3);
    CHECK((*regions)[1].label() == "anonymous after /prog (its .bss?)");
    pmc::detail::refine_own_regions(*regions);
    pmc::AddressMap map(*regions);
    CHECK(map.attribute(file_end).label() == "anonymous after /prog (its .bss?)");
    CHECK(map.attribute(own.second - 1).label() == "anonymous after /prog (its .bss?)");
    CHECK(map.attribute(own.second).label() == "anonymous"); // beyond the segment's memory: not its .bss
    CHECK(map.attribute(own.second + 63 * page).label() == "anonymous");
    if (!PMC_TEST_ASAN) CHECK(map.attribute(small).label() == "heap"); // (ASan's malloc takes no memory with brk)
    CHECK(map.attribute(heap->begin - 8 * page).label() == "anonymous");
    CHECK(map.attribute(heap->end + 8 * page).label() == "anonymous");
    // Anonymous memory after a file no loaded segment reaches into is no .bss.
    auto other = pmc::parse_maps("100000-101000 rw-p 00000000 08:01 2 /lib/other.so\n101000-201000 rw-p 00000000 00:00 0\n");
    REQUIRE(other);
    pmc::detail::refine_own_regions(*other);
    CHECK((*other)[1].label() == "anonymous");
}

TEST_CASE("a data summary by variable and by region", "[attribution]") {
    auto regions = pmc::parse_maps(sample_maps);
    REQUIRE(regions.ok());
    pmc::AddressMap map(*regions);
    map.name_block(std::uint64_t{0x55d0c1000100}, 0x100, "nodes");
    pmc::DataSummary sum;
    for (int i = 0; i < 3; ++i) sum.add(map.attribute(std::uint64_t{0x55d0c1000100} + std::uint64_t(i)), 10);
    sum.add(map.attribute(std::uint64_t{0x55d0c1000800}), 100); // heap, outside the block
    sum.add(map.attribute(std::uint64_t{0x7ffd00000010}), 4);
    sum.add(map.attribute(std::uint64_t{0x10}), 4);
    CHECK(sum.total() == 6);
    CHECK(sum.total_weight() == Approx(138));
    auto vars = sum.by_variable();
    REQUIRE(vars.size() == 4);
    CHECK(vars[0].name == "nodes");
    CHECK(vars[0].kind == "block");
    CHECK(vars[0].samples == 3);
    CHECK(vars[0].weight == Approx(30));
    auto regs = sum.by_region();
    REQUIRE(regs.size() == 3);
    CHECK(regs[0].name == "heap");
    CHECK(regs[0].samples == 4);
    CHECK(sum.samples_of("stack") == 1);
    CHECK(sum.samples_of("unmapped") == 1);
    std::string text = sum.text(1000);
    CHECK_THAT(text, ContainsSubstring("by variable:"));
    CHECK_THAT(text, ContainsSubstring("3000")); // 3 samples x period 1000
    CHECK_THAT(text, ContainsSubstring("(no variable) heap"));
}

#if PMC_HAVE_SYMBOLS
TEST_CASE("globals and statics of a non-stripped binary are named", "[attribution][symbols]") {
    keep_alive[2] = function_static();
    auto map = pmc::AddressMap::of_process();
    pmc::load_symbols(map);
    REQUIRE(map.symbols_loaded());
    auto g = map.attribute(&pmc_test_global_array[100]);
    CHECK(g.kind == pmc::AttributionKind::variable);
    CHECK(g.label() == "pmc_test_global_array");
    CHECK(g.offset == 400);
    auto s = map.attribute(&static_table[3]);
    CHECK(s.kind == pmc::AttributionKind::variable);
    CHECK(s.label() == "(anonymous namespace)::static_table");
    auto f = map.attribute(function_static() + 2999);
    CHECK(f.kind == pmc::AttributionKind::variable);
    CHECK(f.label() == "function_static()::buffer");
    CHECK(f.offset == 2999);
    // libc's exported variables too (from .dynsym even where libc is stripped).
    auto e = map.attribute(&environ);
    CHECK(e.kind == pmc::AttributionKind::variable);
    CHECK_THAT(e.label(), ContainsSubstring("environ"));
    std::string exe = self_exe();
    bool found = false;
    for (const auto& file : map.symbol_files())
        if (file.path == exe) {
            found = true;
            CHECK_FALSE(file.stripped);
            CHECK(file.symtab_objects >= 3);
        }
    CHECK(found);
}

TEST_CASE("another process's map: its regions and variables (pmc sample of a running program)", "[attribution][symbols]") {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) { // the same binary, forked: its variables at the same addresses
        pmc_test_global_array[1] = 7;
        (void)!::write(ready[1], "x", 1);
        ::pause();
        ::_exit(0);
    }
    char c;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    pmc::NamedRegion parent_only(&c, 1, "parent's block");
    auto map = pmc::AddressMap::try_of_process(child);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ::close(ready[0]);
    ::close(ready[1]);
    REQUIRE(map.ok());
    CHECK(map->pid() == child);
    pmc::load_symbols(*map);
    CHECK(map->attribute(&pmc_test_global_array[1]).label() == "pmc_test_global_array");
    CHECK(map->blocks().empty()); // this process's named blocks are not the child's
}

TEST_CASE("a stripped binary is said to be stripped, and its statics fall to their region", "[attribution][symbols]") {
    std::string stripped = PMC_STRIPPED_COPY;
    if (::access(stripped.c_str(), R_OK) != 0) PMC_SKIP("no stripped copy at " + stripped + " (objcopy missing?)");
    auto elf = pmc::read_elf_data_symbols(stripped);
    CHECK(elf.is_elf);
    CHECK(elf.info.error.empty());
    CHECK(elf.info.stripped);
    CHECK(elf.info.symtab_objects == 0);
    auto full = pmc::read_elf_data_symbols(self_exe());
    CHECK_FALSE(full.info.stripped);
    CHECK(full.info.symtab_objects > 0);

    // This process's map with the executable's lines pointing at the stripped copy (same layout, no .symtab).
    auto regions = pmc::read_maps();
    REQUIRE(regions.ok());
    std::string exe = self_exe();
    for (auto& r : *regions)
        if (r.path == exe) r.path = stripped;
    pmc::AddressMap map(*regions);
    pmc::load_symbols(map);
    auto g = map.attribute(&pmc_test_global_array[100]);
    CHECK(g.kind == pmc::AttributionKind::region);
    CHECK(map.attribute(&static_table[3]).kind == pmc::AttributionKind::region);
    CHECK_THAT(map.symbols_note(), ContainsSubstring("stripped"));
    CHECK_THAT(map.symbols_note(), ContainsSubstring(stripped));
}

TEST_CASE("unreadable and non-ELF files", "[attribution][symbols]") {
    auto missing = pmc::read_elf_data_symbols("/nonexistent/lib.so");
    CHECK_THAT(missing.info.error, ContainsSubstring("cannot open"));
    auto text = pmc::read_elf_data_symbols("/proc/self/maps");
    CHECK_FALSE(text.is_elf);
    CHECK(text.info.error.empty());
    // A truncated ELF file: an error or no symbols, never a crash.
    std::string exe = self_exe();
    auto bytes = pmc::detail::read_file(exe);
    REQUIRE(bytes);
    char path[] = "/tmp/pmc-test-elf-XXXXXX";
    int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    for (std::size_t cut : {std::size_t{5}, std::size_t{64}, std::size_t{200}, bytes->size() / 2, bytes->size() - 100}) {
        REQUIRE(::ftruncate(fd, 0) == 0);
        REQUIRE(::pwrite(fd, bytes->data(), cut, 0) == static_cast<ssize_t>(cut));
        auto cutr = pmc::read_elf_data_symbols(path);
        INFO(cut);
        CHECK(cutr.is_elf);
    }
    ::close(fd);
    ::unlink(path);
}
#else
TEST_CASE("globals and statics of a non-stripped binary are named", "[attribution][symbols]") {
    PMC_SKIP("pmc::symbols is not available (libelf not found at configure time: apt-get install libelf-dev)");
}
#endif
