// SPDX-License-Identifier: MIT
// pmc-example-dcache-buckets: HP Caliper's data-cache report, honestly scaled. Sampled load latencies by bucket,
// with bucket edges from a latency curve measured on this machine (pmc-mem-latency's latency.json) or given by the
// user, never from a built-in table; and the same samples by variable (pmc::AddressMap: named heap blocks, ELF
// symbols, regions). Caliper scales samples by "total misses / (sampled misses x period)" and its manual warns that
// this can mislead; here every scaled figure stands beside the bias check of the sampled event (estimate, exact
// count, ratio, losses), and load-latency sampling's shadow (pmc-example-load-count-bias) is named.
//
// The workload: one random pointer chain per level of the curve, in a heap block sized inside that level's working
// sets (so each chain's loads are served mostly from that level), each block named after its level.
// Load-latency sampling needs a PMU (Intel PEBS mem-loads with ldlat, AMD IBS op), or `pmc emulate --cache`, whose
// emulated PMU samples every Nth load from its cache model with a latency the model states per level (modelled: the
// same tables on every run); without either the program prints the buckets it would use and "SKIPPED: reason", and
// exits 0. A bad command line or input file: the usage error every
// pmc program prints (tools/command_line.hpp), exit status 1.
#include <pmc/address_map.hpp>
#include <pmc/cpu.hpp>
#include <pmc/emulated.hpp>
#include <pmc/latency_buckets.hpp>
#include <pmc/sampler.hpp>
#if PMC_HAVE_SYMBOLS
#include <pmc/symbols.hpp>

#include <command_line.hpp>
#endif

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

const char* usage = R"(usage: pmc-example-dcache-buckets (--curve LATENCY_JSON | --edges LIST [--labels LIST] --sizes LIST)
                                  [--ghz F] [--period N] [--loads N]

Samples load latencies while chasing pointers through one heap block per cache level and prints them by latency
bucket and by variable, with the bias check of the sampled event beside every scaled figure.

  --curve FILE    bucket edges from the levels of a latency.json written by pmc-mem-latency (or pmc-memory);
                  one block per level, sized inside that level's working sets
  --edges LIST    bucket edges in core cycles instead, rising, e.g. 8,30,150 (the weights' unit)
  --labels LIST   a label per bucket (one more than edges), e.g. L1,L2,L3,DRAM
  --sizes LIST    with --edges: the blocks' sizes in bytes (K, M, G suffixes), one per bucket (a block sized to
                  land in it), e.g. 16K,256K,4M,256M; with fewer, some buckets stay empty (it says so)
  --ghz F         core cycles per ns, to put a curve's ns edges in cycles where the curve has no cycle counts
  --period N      one sample every N events (default 1009, a prime: a period that shares a factor with a
                  regular pattern, such as 1000 = 8 x 125 on 8-byte loads in order, samples one phase of
                  it; AMD IBS counts ops)
  --loads N       loads chased in each block (default 4000000; 400000 under pmc emulate --cache)

Under pmc emulate --cache the emulated PMU samples every Nth load (cpu/mem-loads,ldlat=3/P) from its cache model:
the latencies are the model's stated figures per level, not measured.
  -h, --help      this text
)";

pmc_cli::CommandLine command_line("pmc-example-dcache-buckets", usage);

/// A bad command line or a bad input file it names: the usage error every pmc program prints, status 1.
int bad_usage(const std::string& why) { return command_line.usage_error(why); }

bool parse_size(std::string s, std::size_t& out) {
    std::size_t mult = 1;
    if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'G')) {
        mult = s.back() == 'K' ? 1024 : s.back() == 'M' ? 1024 * 1024 : std::size_t{1} << 30;
        s.pop_back();
    }
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (errno || s.empty() || *end || s[0] == '-' || v == 0 || v > (std::size_t{1} << 40) / mult) return false;
    out = static_cast<std::size_t>(v) * mult;
    return true;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (;;) {
        std::size_t c = s.find(',', start);
        out.push_back(s.substr(start, c == std::string::npos ? std::string::npos : c - start));
        if (c == std::string::npos) return out;
        start = c + 1;
    }
}

/// A random cyclic chain through the cache lines of a block: each load depends on the one before.
struct Chain {
    std::string name;
    std::size_t bytes = 0;
    void* mem = nullptr;
    std::unique_ptr<pmc::NamedRegion> label;
    ~Chain() { std::free(mem); }
};
bool build_chain(Chain& c, std::mt19937_64& rng) {
    const std::size_t line = 64, n = c.bytes / line;
    if (n < 2 || ::posix_memalign(&c.mem, 4096, n * line) != 0) return false;
    char* base = static_cast<char*>(c.mem);
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i < n; ++i)
        *reinterpret_cast<void**>(base + order[i] * line) = base + order[(i + 1) % n] * line;
    c.label = std::make_unique<pmc::NamedRegion>(c.mem, n * line, c.name);
    return true;
}
/// The buckets the samples will be sorted into, before any is taken: each one's label and range (a table of
/// samples here would be all zeros: the bucket table proper comes after the run).
std::string bucket_plan(const pmc::LatencyBuckets& buckets) {
    std::string out = "latency buckets (" + buckets.origin() + ")\n";
    char line[160];
    std::snprintf(line, sizeof line, "  %-44s %s\n", "level", ("range, " + buckets.unit()).c_str());
    out += line;
    for (const auto& b : buckets.buckets()) {
        if (std::isinf(b.to))
            std::snprintf(line, sizeof line, "  %-44s %.4g -\n", b.label.c_str(), b.from);
        else
            std::snprintf(line, sizeof line, "  %-44s %.4g - %.4g\n", b.label.c_str(), b.from, b.to);
        out += line;
    }
    return out;
}

__attribute__((noinline)) void* chase(void* p, std::uint64_t loads) {
    for (; loads; --loads) p = *static_cast<void* volatile*>(p);
    return p;
}

} // namespace

int main(int argc, char** argv) {
    std::string curve_path, edges_list, labels_list, sizes_list;
    double ghz = 0;
    std::uint64_t period = 1009, loads = 4000000; // (a prime: `pmc sample`'s emulated default)
    std::string ghz_text, period_text, loads_text;
    command_line.option("--curve", curve_path, "a latency.json file");
    command_line.option("--edges", edges_list, "bucket edges in cycles, e.g. 8,30,150");
    command_line.option("--labels", labels_list, "a label per bucket, e.g. L1,L2,L3,DRAM");
    command_line.option("--sizes", sizes_list, "block sizes, e.g. 16K,256K,4M,256M");
    command_line.option("--ghz", ghz_text, "a positive number");
    command_line.option("--period", period_text, "a positive whole number");
    command_line.option("--loads", loads_text, "a positive whole number");
    if (auto status = command_line.parse(argc, argv)) return *status;
    if (command_line.count("--ghz") > 0) {
        char* end = nullptr;
        ghz = std::strtod(ghz_text.c_str(), &end);
        if (!end || *end || !(ghz > 0) || !std::isfinite(ghz))
            return bad_usage("--ghz needs a positive number, not '" + ghz_text + "'");
    }
    for (auto [name, text, target] : {std::make_tuple("--period", &period_text, &period),
                                      std::make_tuple("--loads", &loads_text, &loads)}) {
        if (command_line.count(name) == 0) continue;
        char* end = nullptr;
        const unsigned long long n = std::strtoull(text->c_str(), &end, 10);
        if (!end || *end || text->empty() || (*text)[0] == '-' || n == 0)
            return bad_usage(std::string(name) + " needs a positive whole number, not '" + *text + "'");
        *target = n;
    }
    if (curve_path.empty() == edges_list.empty()) return bad_usage("give either --curve FILE or --edges LIST");
    if (command_line.count("--loads") == 0 && pmc::emulated_pmu()) loads = 400000; // the emulator models every load

    // Buckets and the blocks to chase.
    std::deque<Chain> chains; // a deque: blocks never move once named
    std::unique_ptr<pmc::LatencyBuckets> buckets;
    if (!curve_path.empty()) {
        auto curve = pmc::read_latency_curve(curve_path);
        if (!curve) return bad_usage(curve.failure().message);
        double k = curve->cycles_per_ns ? *curve->cycles_per_ns : ghz;
        auto b = pmc::LatencyBuckets::try_from_curve(*curve, k);
        if (!b) return bad_usage(b.failure().message);
        buckets = std::make_unique<pmc::LatencyBuckets>(std::move(*b));
        for (const auto& l : curve->levels) {
            if (!(l.first_size_bytes > 0 && l.last_size_bytes >= l.first_size_bytes))
                return bad_usage(curve_path + ": level " + l.name + " has no first_size_bytes/last_size_bytes");
            // Inside the level: the geometric middle of its working sets (memory: 4x its first size, at most 1 GiB).
            double size = l.name == "memory" ? std::min(4 * l.first_size_bytes, double(1u << 30))
                                             : std::sqrt(l.first_size_bytes * l.last_size_bytes);
            chains.emplace_back();
            chains.back().bytes = static_cast<std::size_t>(size) / 64 * 64;
            chains.back().name = "chain in " + l.name + "-sized block";
        }
    } else {
        auto edges = pmc::LatencyBuckets::try_parse_list(edges_list);
        if (!edges) return bad_usage("--edges: " + edges.failure().message);
        std::vector<std::string> labels;
        if (!labels_list.empty()) labels = split(labels_list);
        auto b = pmc::LatencyBuckets::try_from_edges(*edges, "cycles", labels);
        if (!b) return bad_usage(b.failure().message);
        buckets = std::make_unique<pmc::LatencyBuckets>(std::move(*b));
        if (sizes_list.empty()) return bad_usage("with --edges, give the blocks' sizes with --sizes, one per bucket (e.g. 16K,256K,4M,256M)");
        for (const auto& s : split(sizes_list)) {
            std::size_t bytes = 0;
            if (!parse_size(s, bytes)) return bad_usage("--sizes: '" + s + "' is not a size (e.g. 16K, 1M, 256M)");
            chains.emplace_back();
            chains.back().bytes = bytes;
            chains.back().name = "chain in " + s + " block";
        }
        const std::size_t bucket_count = edges->size() + 1;
        if (chains.size() < bucket_count)
            std::printf("note: %zu buckets (%zu edges) but %zu blocks chased (--sizes): each block's loads land in "
                        "about one bucket, so at least %zu buckets stay empty; give one size per bucket to fill each\n",
                        bucket_count, edges->size(), chains.size(), bucket_count - chains.size());
    }

    std::printf("%s\n", bucket_plan(*buckets).c_str());
    std::printf("blocks chased (%llu dependent loads each):", static_cast<unsigned long long>(loads));
    for (const auto& c : chains) std::printf(" %s (%zu bytes);", c.name.c_str(), c.bytes);
    std::printf("\n\n");

    // The sampled event: load latency where the PMU has it.
    pmc::CpuSignature cpu = pmc::cpu_signature();
    std::string event;
    bool filter_loads = false;
    const bool modelled = pmc::emulated_pmu().has_value(); // pmc emulate: the plugin's cache model samples
    if (modelled) event = "cpu/mem-loads,ldlat=3/P";
    else if (cpu.vendor == pmc::Vendor::intel) event = "cpu/mem-loads,ldlat=30/P";
    else if (cpu.vendor == pmc::Vendor::amd || cpu.vendor == pmc::Vendor::hygon) event = "ibs_op//", filter_loads = true;
    if (event.empty()) {
        std::printf("SKIPPED: no load-latency sampling pmc knows on this CPU (%s): Intel PEBS mem-loads or AMD IBS op\n",
                    pmc::to_string(cpu.vendor));
        return 0;
    }
    pmc::SamplerOptions o;
    o.period = period;
    o.fields = pmc::sample::addr | pmc::sample::weight | pmc::sample::data_src;
    o.data_pages = 256;
    auto sampler = pmc::Sampler::try_open(event, o);
    if (!sampler) {
        std::printf("SKIPPED: load-latency sampling '%s' does not open here: %s\n", event.c_str(),
                    sampler.failure().message.c_str());
        return 0;
    }
    sampler->stop(); // opened to see that it can; the real run starts after the chains are built
    if (buckets->unit() != "cycles") {
        std::printf("SKIPPED: the samples' latencies are core cycles and %s has no cycle counts: give --ghz (the core "
                    "clock in GHz) to put its edges in cycles\n", curve_path.c_str());
        return 0;
    }

    std::mt19937_64 rng(14);
    for (auto& c : chains)
        if (!build_chain(c, rng)) {
            std::fprintf(stderr, "pmc-example-dcache-buckets: cannot allocate %zu bytes for %s\n", c.bytes, c.name.c_str());
            return 1;
        }
    struct Hit {
        std::uint64_t addr, weight;
    };
    std::vector<Hit> hits;
    hits.reserve(static_cast<std::size_t>(chains.size() * loads / period) + 4096);
    auto keep = [&](const pmc::Sample& s) {
        if (filter_loads && s.data_source.op != pmc::DataSource::Op::load) return;
        if (hits.size() < hits.capacity()) hits.push_back({s.addr, s.weight});
    };
    auto run = pmc::Sampler::try_open(event, o);
    if (!run) {
        std::printf("SKIPPED: '%s' did not open again: %s\n", event.c_str(), run.failure().message.c_str());
        return 0;
    }
    void* sink = nullptr;
    for (auto& c : chains) {
        sink = chase(c.mem, loads);
        run->drain(keep);
    }
    pmc::BiasCheck check = run->stop(keep);
    if (!sink) std::printf("\n");

    auto map = pmc::AddressMap::try_of_process();
    if (!map) {
        std::fprintf(stderr, "pmc-example-dcache-buckets: %s\n", map.failure().message.c_str());
        return 1;
    }
#if PMC_HAVE_SYMBOLS
    pmc::load_symbols(*map);
#endif
    pmc::DataSummary summary;
    for (const auto& h : hits) {
        buckets->add(static_cast<double>(h.weight));
        summary.add(map->attribute(h.addr), static_cast<double>(h.weight));
    }
    std::printf("sampled event: %s, one sample every %llu%s\n", event.c_str(), static_cast<unsigned long long>(period),
                filter_loads ? " ops (IBS; the loads among them kept)" : " loads above the latency threshold");
    if (modelled)
        for (const auto& note : run->notes()) std::printf("note: %s\n", note.c_str());
    std::printf("\n");
    std::fputs(buckets->text(static_cast<double>(period)).c_str(), stdout);
    std::printf("\n%s\n", map->symbols_note().c_str());
    std::fputs(summary.text(static_cast<double>(period)).c_str(), stdout);
    std::printf("\n%s", pmc::to_text(check).c_str());
    std::printf("\"est. events\" is samples x period, Caliper's scale. It holds only where the bias check above agrees;\n"
                "load-latency sampling also misses the loads in its shadow (pmc-example-load-count-bias), so read the\n"
                "buckets' shares, not their scaled totals, unless the check says the scale holds.\n");
    return 0;
}
