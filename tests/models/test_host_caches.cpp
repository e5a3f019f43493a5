// SPDX-License-Identifier: MIT
// pmc emulate --cache=host (tools/emulate/host_caches.hpp): a sysfs cache directory read into the model's geometry,
// with Cachegrind's rounding of a set count that is not a power of two, an L2 only below a higher level, and the
// refusals.
#include "catch.hpp"

#include <host_caches.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace pmc_host_caches;

namespace {

/// A fake sysfs cpu0/cache directory: one indexN per {level, type, size, ways, line}.
struct FakeSysfs {
    std::string dir;
    explicit FakeSysfs(const std::vector<std::vector<std::string>>& caches) {
        char name[] = "/tmp/pmc-test-host-caches-XXXXXX";
        REQUIRE(::mkdtemp(name) != nullptr);
        dir = name;
        for (std::size_t i = 0; i < caches.size(); ++i) {
            const std::string at = dir + "/index" + std::to_string(i);
            ::mkdir(at.c_str(), 0755);
            const char* files[] = {"level", "type", "size", "ways_of_associativity", "coherency_line_size"};
            for (std::size_t f = 0; f < 5; ++f) std::ofstream(at + "/" + files[f]) << caches[i][f] << "\n";
        }
    }
    ~FakeSysfs() { (void)std::system(("rm -rf '" + dir + "'").c_str()); }
};

} // namespace

TEST_CASE("pmc emulate --cache=host: this VM's sysfs caches become I1, D1, an L2 and an LL rounded as Cachegrind rounds it",
          "[models][host]") {
    // This machine's cpu0 (a Xeon VM): L3 300 MiB 20-way has 245760 sets, rounded to 131072 sets of 38 ways.
    const FakeSysfs sys({{"1", "Data", "48K", "12", "64"},
                         {"1", "Instruction", "32K", "8", "64"},
                         {"2", "Unified", "2048K", "16", "64"},
                         {"3", "Unified", "307200K", "20", "64"}});
    HostCaches h;
    REQUIRE(read_host_caches(h, sys.dir) == "");
    CHECK(h.source == sys.dir);
    CHECK(h.config.d1 == pmc_model::CacheGeometry{49152, 12, 64});
    CHECK(h.config.i1 == pmc_model::CacheGeometry{32768, 8, 64});
    REQUIRE(h.config.l2.has_value());
    CHECK(*h.config.l2 == pmc_model::CacheGeometry{2097152, 16, 64});
    CHECK(h.config.ll == pmc_model::CacheGeometry{318767104, 38, 64});
    CHECK(h.adjustments.find("LL 314572800,20,64 has 245760 sets") != std::string::npos);
}

TEST_CASE("pmc emulate --cache=host: two levels make an LL and no L2, a missing level is refused", "[models][host]") {
    const FakeSysfs two({{"1", "Data", "32K", "8", "64"}, {"1", "Instruction", "32K", "8", "64"},
                         {"2", "Unified", "1024K", "16", "64"}});
    HostCaches h;
    REQUIRE(model_of(read_sysfs_caches(two.dir), h) == "");
    CHECK(!h.config.l2.has_value());
    CHECK(h.config.ll == pmc_model::CacheGeometry{1048576, 16, 64});
    CHECK(h.adjustments.empty());

    const FakeSysfs no_ll({{"1", "Data", "32K", "8", "64"}, {"1", "Instruction", "32K", "8", "64"}});
    CHECK(model_of(read_sysfs_caches(no_ll.dir), h).find("no L1 instruction cache") != std::string::npos);
    CHECK(read_sysfs_caches("/nonexistent-pmc-dir").empty());
}

TEST_CASE("pmc emulate --cache=host: sysfs sizes", "[models][host]") {
    CHECK(parse_sysfs_size("48K") == 49152);
    CHECK(parse_sysfs_size("2M") == 2097152);
    CHECK(parse_sysfs_size("64") == 64);
    CHECK(parse_sysfs_size("") == 0);
    CHECK(parse_sysfs_size("K") == 0);
}
