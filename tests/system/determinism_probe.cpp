// SPDX-License-Identifier: MIT
// A separate program for tests/system/test_determinism.cpp: what only a fresh process can show.
//   determinism_probe aslr [--keep-aslr]   re-execute without randomization (unless --keep-aslr), then print the
//                                          addresses of a stack variable, a heap block and a function, the
//                                          process's name (comm) and PMC_ASLR_REEXEC ("-" when unset)
//   determinism_probe allocator            print the allocator pmc detects and its hazards, one per line
//   determinism_probe allocations          print "PID:size,size,..." for the allocations pmc makes to open, read
//                                          and close counters (this program replaces operator new to trace them;
//                                          it is built without sanitizers, which replace it too)
#include <pmc/determinism.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace {
void some_function() {}

bool g_tracing = false;
std::vector<std::size_t>* g_sizes = nullptr;
} // namespace

void* operator new(std::size_t n) {
    if (g_tracing && g_sizes) {
        g_tracing = false; // the vector's own growth is not traced
        g_sizes->push_back(n);
        g_tracing = true;
    }
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "aslr") {
        if (!(argc > 2 && std::string(argv[2]) == "--keep-aslr")) {
            if (auto failure = pmc::reexec_without_aslr(argv)) {
                std::fprintf(stderr, "%s\n", failure->message.c_str());
                return 2;
            }
        }
        int local = 0;
        void* heap = std::malloc(64);
        char comm[64] = {};
        if (FILE* f = std::fopen("/proc/self/comm", "r")) {
            if (!std::fgets(comm, sizeof comm, f)) comm[0] = 0;
            std::fclose(f);
        }
        for (char* c = comm; *c; ++c)
            if (*c == '\n') *c = 0;
        const char* marker = std::getenv("PMC_ASLR_REEXEC");
        std::printf("stack %p heap %p code %p randomized %d name %s marker %s\n", static_cast<void*>(&local), heap,
                    reinterpret_cast<void*>(&some_function), pmc::aslr_state().randomized ? 1 : 0, comm,
                    marker ? marker : "-");
        std::free(heap);
        return 0;
    }
    if (mode == "allocator") {
        const auto report = pmc::allocator_status();
        std::printf("allocator %s\n", report.allocator.c_str());
        for (const auto& h : report.hazards) std::printf("%s: %s\n", pmc::to_string(h.state), h.detail.c_str());
        return 0;
    }
    if (mode == "allocations") {
        { pmc::Counter warm{"wall-time"}; } // one-time work (TSC calibration, fork handler) is not compared
        std::vector<std::size_t> sizes;
        sizes.reserve(4096);
        g_sizes = &sizes;
        g_tracing = true;
        {
            pmc::Counter faults{"page-faults"};
            pmc::Counter wall{"wall-time"};
            auto iv = faults.interval();
            (void)wall.read();
            (void)iv.stop();
            if (auto spec = pmc::try_parse_event("msr/tsc/")) (void)pmc::Counter::try_open(*spec);
        }
        g_tracing = false;
        std::printf("%d:", static_cast<int>(::getpid()));
        for (auto n : sizes) std::printf("%zu,", n);
        std::printf("\n");
        return 0;
    }
    std::fprintf(stderr, "usage: determinism_probe aslr [--keep-aslr] | allocator | allocations\n");
    return 2;
}
