// SPDX-License-Identifier: MIT
// Address attribution of real samples (needs no PMU): page-fault samples carry the faulting data address
// (design.md §3). A global array, a named heap block and a mapped file are touched page by page while
// pmc::Sampler samples page-faults at period 1; every sample must be attributed to the one it fell in, by name.
#include "catch.hpp"

#include <pmc/address_map.hpp>
#include <pmc/sampler.hpp>
#if PMC_HAVE_SYMBOLS
#include <pmc/symbols.hpp>
#endif

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

constexpr std::size_t fault_region_bytes = 2u << 20;
alignas(4096) char pmc_fault_global_array[fault_region_bytes];

namespace {
std::size_t page() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

/// Pages of [p, p + n) not resident now: each is one fault when touched (huge pages off).
std::size_t pages_not_resident(const char* p, std::size_t n) {
    std::vector<unsigned char> vec(n / page());
    if (::mincore(const_cast<char*>(p), n, vec.data()) != 0) return SIZE_MAX;
    std::size_t count = 0;
    for (unsigned char v : vec) count += (v & 1) == 0;
    return count;
}
void touch(const char* p, std::size_t n) {
    for (std::size_t off = 0; off < n; off += page()) (void)static_cast<const volatile char*>(p)[off];
}
bool in(const void* base, std::size_t n, std::uint64_t a) {
    auto b = reinterpret_cast<std::uint64_t>(base);
    return a >= b && a < b + n;
}
} // namespace

TEST_CASE("page-fault samples attributed to a global array, a named heap block and a mapped file",
          "[attribution][sampling]") {
    ::madvise(pmc_fault_global_array, fault_region_bytes, MADV_NOHUGEPAGE);
    void* mem = nullptr;
    REQUIRE(::posix_memalign(&mem, page(), fault_region_bytes) == 0);
    char* block = static_cast<char*>(mem);
    ::madvise(block, fault_region_bytes, MADV_NOHUGEPAGE);
    pmc::NamedRegion name(block, fault_region_bytes, "matrix");
    char path[] = "/tmp/pmc-test-faults-XXXXXX";
    int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    const std::size_t file_bytes = 64 * page();
    REQUIRE(::ftruncate(fd, static_cast<off_t>(file_bytes)) == 0);
    char* file = static_cast<char*>(::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0));
    REQUIRE(file != MAP_FAILED);
    ::madvise(file, file_bytes, MADV_RANDOM); // no fault-around: one fault per page
    // Writes to a global in .bss and a heap block fault every page; reads of a file that is in the page cache
    // fault-around several pages at once, so only the pages touched that were not resident are counted.
    const std::size_t expect_global = pages_not_resident(pmc_fault_global_array, fault_region_bytes);
    const std::size_t expect_block = pages_not_resident(block, fault_region_bytes);
    REQUIRE(expect_global > 0);
    REQUIRE(expect_block > 0);

    std::vector<std::uint64_t> addrs;
    addrs.reserve(8 * fault_region_bytes / page());
    pmc::SamplerOptions o;
    o.period = 1;
    o.fields = pmc::sample::addr;
    pmc::Sampler s{"page-faults", o};
    for (std::size_t off = 0; off < fault_region_bytes; off += page()) {
        pmc_fault_global_array[off] = 1;
        block[off] = 1;
    }
    touch(file, file_bytes);
    const pmc::BiasCheck check = s.stop([&](const pmc::Sample& x) { addrs.push_back(x.addr); });
    INFO(pmc::to_text(check));
    CHECK(check.estimated == check.exact);
    CHECK(check.lost == 0);

    auto map = pmc::AddressMap::of_process();
#if PMC_HAVE_SYMBOLS
    pmc::load_symbols(map);
#endif
    pmc::DataSummary summary;
    std::size_t global = 0, named = 0, mapped = 0;
    for (std::uint64_t a : addrs) {
        auto at = map.attribute(a);
        summary.add(at);
        INFO(std::hex << a << " attributed to " << at.label());
        if (in(pmc_fault_global_array, fault_region_bytes, a)) {
            ++global;
#if PMC_HAVE_SYMBOLS
            CHECK(at.label() == "pmc_fault_global_array");
#else
            CHECK(at.kind == pmc::AttributionKind::region);
#endif
        } else if (in(block, fault_region_bytes, a)) {
            ++named;
            CHECK(at.label() == "matrix");
        } else if (in(file, file_bytes, a)) {
            ++mapped;
            CHECK(at.label() == path);
        } else {
            CHECK(at.label() != "matrix");
            CHECK(at.label() != path);
            CHECK(at.label() != "pmc_fault_global_array");
        }
    }
    INFO(summary.text());
    CHECK(global == expect_global);
    CHECK(named == expect_block);
    CHECK(mapped >= 1);
    CHECK(mapped <= file_bytes / page());
    CHECK(summary.samples_of("matrix") == named);
    CHECK(summary.samples_of(path) == mapped);
#if PMC_HAVE_SYMBOLS
    CHECK(summary.samples_of("pmc_fault_global_array") == global);
#endif
    ::munmap(file, file_bytes);
    ::close(fd);
    ::unlink(path);
    std::free(mem);
}
