// SPDX-License-Identifier: MIT
// pmc-example-profiler: a toy compiler shaped like rustc's query system, embedding pmc's profiler.
//
//     PMC_PROFILE=query.pmcprof ./pmc-example-profiler            # wall-time
//     PMC_PROFILE=query.pmcprof PMC_PROFILE_COUNTERS=page-faults,wall-time ./pmc-example-profiler
//     pmc summarize query.pmcprof
//     ./pmc-example-profiler --plant optimize   # extra work in one query, for trying pmc diff
//
// A worker pool compiles functions. Compiling one runs nested queries: typeck needs the signatures of the
// functions it calls (type_of, memoized per worker: a cache hit is an instant event), then optimize and codegen
// (whose output size is an integer event). Without PMC_PROFILE the profiler is off and costs a branch per query.
//
// Each worker compiles a fixed share of the functions (every Nth) with a query cache of its own, so every run makes
// the same queries on the same threads: under an exact counter (pmc emulate -- ./pmc-example-profiler with
// PMC_PROFILE_COUNTERS=instructions:u) two runs' profiles are identical, interval by interval. Workers that took
// functions from a shared queue and shared one cache would wait on each other at moments that differ from run to
// run, and the waiting would show in their counts; so would memory allocated inside the queries (glibc's
// allocator state is shared by the threads), which is why callees() returns an array.
#include <pmc/profiler.hpp>

#include <command_line.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

constexpr const char* help = R"(usage: pmc-example-profiler [--threads N] [--functions N] [--plant QUERY]

A toy compiler with nested, memoized queries and a worker pool, profiled by pmc::Profiler when
PMC_PROFILE names a file (PMC_PROFILE_COUNTERS chooses the counters; default wall-time).
Then: pmc summarize FILE.

Options:
  --threads N    Worker threads (default 2).
  --functions N  Functions to compile (default 400).
  --plant QUERY  Extra work in every call of QUERY (parse, typeck, type_of, optimize or
                 codegen): more busy work and 16 fresh pages touched (16 more page faults per
                 call), a change for pmc diff to find in that query and no other.
  -h, --help     Show this help.
)";

/// Busy work standing in for a query's real work; `n` scales it.
std::uint64_t churn(std::uint64_t seed, std::uint64_t n) {
    std::uint64_t x = seed | 1;
    for (std::uint64_t i = 0; i < n; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

/// Writes one word in each of `pages` fresh anonymous pages: exactly one page fault each (anonymous memory has no
/// fault-around, and these are too few pages for a huge page). mmap, not malloc: glibc's mmap threshold moves up
/// after a free, and reused heap would make the faults vary from run to run.
std::uint64_t touch_fresh_pages(std::uint64_t seed, std::size_t pages) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), bytes = pages * page;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return seed;
    auto* words = static_cast<volatile std::uint64_t*>(p);
    for (std::size_t at = 0; at < bytes / sizeof(std::uint64_t); at += page / sizeof(std::uint64_t))
        words[at] = seed = churn(seed, 4);
    ::munmap(p, bytes);
    return seed;
}

/// --plant's extra work: busy work and 16 fresh pages (16 page faults).
std::uint64_t planted_work(std::uint64_t seed) { return touch_fresh_pages(churn(seed, 4000), 16); }

enum class Query { none, parse, typeck, type_of, optimize, codegen };

struct Compiler {
    pmc::Profiler& prof;
    std::size_t functions;
    // --plant: the query that does extra work. An enum compared in every query costs the same instructions whichever
    // query it names, so the other queries count the same with and without --plant (a string compare would not).
    Query plant = Query::none;
    // The query kinds, interned once.
    pmc::Label compile_fn = prof.label("compile"), parse = prof.label("parse"), typeck = prof.label("typeck"), type_of = prof.label("type_of"),
               optimize = prof.label("optimize"), codegen = prof.label("codegen"),
               cache_hit = prof.label("cache-hit"), ir_size = prof.label("ir-size");
    std::vector<pmc::Label> names; // one argument per function: its name
    Compiler(pmc::Profiler& p, std::size_t n) : prof(p), functions(n) {
        for (std::size_t f = 0; f < n; ++f) names.push_back(prof.label("fn_" + std::to_string(f)));
    }

    /// One worker's query cache: type_of's memo (0: not computed yet; a signature is never 0).
    struct Cache {
        std::vector<std::uint64_t> signatures;
    };

    /// The functions f calls: a few, fixed by f. (An array: no allocation inside the queries.)
    std::array<std::size_t, 3> callees(std::size_t f) const {
        return {(f * 7 + 1) % functions, (f * 13 + 5) % functions, (f / 2) % functions};
    }

    std::uint64_t query_type_of(Cache& cache, std::size_t f) {
        if (cache.signatures[f] != 0) {
            prof.instant(cache_hit, type_of); // this worker computed it before
            return cache.signatures[f];
        }
        auto s = prof.scope(type_of, names[f]);
        std::uint64_t sig = churn(f, 2000);
        if (plant == Query::type_of) sig ^= planted_work(f);
        return cache.signatures[f] = sig | 1;
    }

    std::uint64_t compile(Cache& cache, std::size_t f) {
        auto outer = prof.scope(compile_fn, names[f]);
        std::uint64_t h = 0;
        {
            auto s = prof.scope(parse, names[f]);
            h ^= churn(f, 3000 + 50 * (f % 17));
            if (plant == Query::parse) h ^= planted_work(h);
        }
        {
            auto s = prof.scope(typeck, names[f]);
            for (std::size_t c : callees(f)) h ^= query_type_of(cache, c);
            h ^= churn(h, 1500);
            if (plant == Query::typeck) h ^= planted_work(h);
        }
        {
            auto s = prof.scope(optimize, names[f]);
            h ^= churn(h, 8000 + 400 * (f % 5));
            if (plant == Query::optimize) h ^= planted_work(h);
        }
        {
            auto s = prof.scope(codegen, names[f]);
            // Its output in 1 to 4 fresh pages: as many page faults, the same on every run
            const std::size_t pages = 1 + f % 4;
            h = touch_fresh_pages(churn(h, 6000), pages);
            const std::size_t ir_bytes = pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
            if (plant == Query::codegen) h ^= planted_work(h);
            prof.integer(ir_size, ir_bytes, names[f]);
        }
        return h;
    }
};

} // namespace

int main(int argc, char** argv) {
    std::size_t threads = 2, functions = 400;
    Query plant = Query::none;
    pmc_cli::CommandLine command_line("pmc-example-profiler", help);
    std::string threads_text, functions_text, plant_text;
    command_line.option("--threads", threads_text, "a number from 1 to 100000");
    command_line.option("--functions", functions_text, "a number from 1 to 100000");
    command_line.option("--plant", plant_text, "a query (parse, typeck, type_of, optimize or codegen)");
    if (auto status = command_line.parse(argc, argv)) return *status;
    for (auto [name, text, out] : {std::make_tuple("--threads", &threads_text, &threads),
                                   std::make_tuple("--functions", &functions_text, &functions)}) {
        if (command_line.count(name) == 0) continue;
        char* end = nullptr;
        const unsigned long v = std::strtoul(text->c_str(), &end, 10);
        if (text->empty() || *end || v == 0 || v > 100000)
            return command_line.usage_error(std::string(name) + " needs a number from 1 to 100000, not '" + *text +
                                            "'");
        *out = v;
    }
    if (command_line.count("--plant") > 0) {
        const std::string& q = plant_text;
        plant = q == "parse" ? Query::parse : q == "typeck" ? Query::typeck : q == "type_of" ? Query::type_of
              : q == "optimize" ? Query::optimize : q == "codegen" ? Query::codegen : Query::none;
        if (plant == Query::none)
            return command_line.usage_error("--plant '" + q + "': not a query (parse, typeck, type_of, optimize or "
                                            "codegen)");
    }

    auto prof = pmc::Profiler::from_env(); // PMC_PROFILE=FILE turns it on
    Compiler compiler(prof, functions);
    compiler.plant = plant;
    std::atomic<std::uint64_t> result{0};
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            prof.thread_name("worker " + std::to_string(t));
            Compiler::Cache cache{std::vector<std::uint64_t>(functions, 0)};
            std::uint64_t h = 0;
            for (std::size_t f = t; f < functions; f += threads) h ^= compiler.compile(cache, f);
            result ^= h;
        });
    for (auto& t : pool) t.join();
    std::printf("compiled %zu functions on %zu threads (checksum %016llx)%s\n", functions, threads,
                static_cast<unsigned long long>(result.load()),
                prof.enabled() ? "; profile written to $PMC_PROFILE: see pmc summarize" : "");
    return 0;
}
