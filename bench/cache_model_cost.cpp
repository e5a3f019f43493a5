// SPDX-License-Identifier: MIT
// pmc-bench-cache-model: what the models of `pmc emulate --cache` cost per guest access, on the host, without
// QEMU: the cache hierarchy (tools/emulate/model/cache_model.hpp) on streams that hit L1, miss L1 and hit the LL,
// and miss everything; a block's planned instruction fetches; QEMU's split accesses through the merger; the
// branch predictor; the load sampler. Each row: the median of --runs timings of a fixed stream, in ns per access
// and millions of accesses per second.
#include <model/branch_model.hpp>
#include <model/cache_model.hpp>
#include <model/load_sampler.hpp>

#include <command_line.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace pmc_model;

const char* const help_text = R"(usage: pmc-bench-cache-model [--runs N] [--accesses N]

What the cache, branch and load-sampling models of `pmc emulate --cache` cost per guest access on this host,
without QEMU: each row runs a fixed access stream through the model --runs times (default 5) and prints the
median CPU time per access (this thread's: other processes' turns on a shared machine are not counted) and
the accesses per second. The default geometry: I1 and D1 32768,8,64, LL 8388608,16,64.

Options:
  --runs N       timings per row (the median is printed), 1 to 1000 (default 5)
  --accesses N   accesses per timing, 1000 to 10^9 (default 4000000)
  -h, --help     this help
)";

/// Keeps a result alive, so that no stream is optimized away.
inline void keep(std::uint64_t value) { asm volatile("" : : "r"(value) : "memory"); }

/// This thread's CPU time: on a shared machine, wall time would count the other processes' turns.
double thread_cpu_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

double median_ns_per_access(std::uint64_t runs, std::uint64_t accesses, const std::function<void()>& run) {
    std::vector<double> ns;
    for (std::uint64_t r = 0; r < runs; ++r) {
        const double start = thread_cpu_ns();
        run();
        ns.push_back((thread_cpu_ns() - start) / static_cast<double>(accesses));
    }
    std::sort(ns.begin(), ns.end());
    return ns[ns.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    pmc_cli::CommandLine command_line("pmc-bench-cache-model", help_text);
    std::string runs_text, accesses_text;
    const pmc_cli::Option runs_option = command_line.option("--runs", runs_text, "a number of runs");
    const pmc_cli::Option accesses_option = command_line.option("--accesses", accesses_text, "a number of accesses");
    if (auto status = command_line.parse(argc, argv)) return *status;
    const auto runs = pmc_cli::whole_number_option(runs_option, runs_text, 5, 1000);
    if (!runs || *runs == 0)
        return command_line.usage_error("--runs needs a number of runs from 1 to 1000, not '" + runs_text + "'");
    const auto accesses = pmc_cli::whole_number_option(accesses_option, accesses_text, 4000000, 1000000000);
    if (!accesses || *accesses < 1000)
        return command_line.usage_error("--accesses needs a number from 1000 to 1000000000, not '" + accesses_text +
                                        "'");
    const std::uint64_t n = *accesses;

    // Addresses drawn beforehand, so that a row times the model and not the random numbers.
    std::mt19937_64 random(1);
    std::vector<std::uint64_t> in_ll(n), anywhere(n);
    for (std::uint64_t i = 0; i < n; ++i) {
        in_ll[i] = 0x10000000 + (random() % (std::uint64_t{4} << 20)) / 8 * 8;    // 4 MiB: misses D1, hits LL
        anywhere[i] = 0x10000000 + (random() % (std::uint64_t{1} << 30)) / 8 * 8; // 1 GiB: misses both
    }
    std::vector<std::pair<std::uint64_t, std::uint32_t>> block;
    for (std::uint64_t at = 0x401000; block.size() < 10; at += 4) block.emplace_back(at, 4);
    const std::vector<FetchRef> plan = plan_fetches(block, default_i1.line);

    struct Row {
        std::string name;
        std::function<void()> run;
    };
    std::vector<Row> rows;
    rows.push_back({"D1 hit: 8-byte loads, sequential over 16 KiB", [&] {
                        CacheHierarchy h(CacheConfig{});
                        for (std::uint64_t i = 0; i < n; ++i) h.read(0x10000000 + (i * 8) % 16384, 8);
                        keep(h.counts().D1mr());
                    }});
    rows.push_back({"D1 miss, LL hit: random loads over 4 MiB", [&] {
                        CacheHierarchy h(CacheConfig{});
                        for (std::uint64_t i = 0; i < n; ++i) h.read(in_ll[i], 8);
                        keep(h.counts().DLmr());
                    }});
    rows.push_back({"D1 and LL miss: random loads over 1 GiB", [&] {
                        CacheHierarchy h(CacheConfig{});
                        for (std::uint64_t i = 0; i < n; ++i) h.read(anywhere[i], 8);
                        keep(h.counts().DLmr());
                    }});
    rows.push_back({"split 16-byte loads joined (2 pieces an access)", [&] {
                        CacheHierarchy h(CacheConfig{});
                        DataAccessMerger m;
                        const auto to_model = [&h](const DataAccess& a) { h.read(a.address, a.size); };
                        for (std::uint64_t i = 0; i < n / 2; ++i) {
                            const std::uint64_t at = 0x10000000 + (i * 16) % 16384;
                            m.add(i, 0x401000, false, at, 8, to_model);
                            m.add(i, 0x401000, false, at + 8, 8, to_model);
                        }
                        m.flush(to_model);
                        keep(h.counts().Dr());
                    }});
    rows.push_back({"instruction fetch: a 10-instruction block, planned (per instruction)", [&] {
                        CacheHierarchy h(CacheConfig{});
                        for (std::uint64_t i = 0; i < n / block.size(); ++i) {
                            h.count_instructions(block.size());
                            for (const FetchRef& r : plan) h.fetch_uncounted(r.address, r.size);
                        }
                        keep(h.counts().Ir());
                    }});
    rows.push_back({"conditional branch, taken every third time", [&] {
                        BranchPredictor p;
                        for (std::uint64_t i = 0; i < n; ++i) p.conditional(0x401000 + (i & 0xff0), i % 3 == 0);
                        keep(p.counts().conditional_misses);
                    }});
    rows.push_back({"load sampler, period 1000", [&] {
                        LoadSampler s(1000);
                        LoadSample sample{};
                        for (std::uint64_t i = 0; i < n; ++i) keep(s.load(0x401000, i, Level::l1, sample));
                    }});

    fmt::print("pmc-bench-cache-model: {} accesses a timing, median of {} (this thread's CPU time on the host, no QEMU)\n\n", n, *runs);
    fmt::print("{:<72} {:>10} {:>14}\n", "stream", "ns/access", "M accesses/s");
    for (const Row& row : rows) {
        const double ns = median_ns_per_access(*runs, n, row.run);
        fmt::print("{:<72} {:>10.2f} {:>14.1f}\n", row.name, ns, 1e3 / ns);
    }
    return 0;
}
