// A separate program for tests/system/test_determinism.cpp: what only a fresh process can show.
//   determinism_probe aslr [--keep-aslr]   re-execute without randomization (unless --keep-aslr), then print the
//                                          addresses of a stack variable, a heap block and a function
//   determinism_probe allocator            print the allocator pmc detects and its hazards, one per line
#include <pmc/determinism.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
void some_function() {}
} // namespace

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
        std::printf("stack %p heap %p code %p randomized %d\n", static_cast<void*>(&local), heap,
                    reinterpret_cast<void*>(&some_function), pmc::aslr_state().randomized ? 1 : 0);
        std::free(heap);
        return 0;
    }
    if (mode == "allocator") {
        const auto report = pmc::allocator_status();
        std::printf("allocator %s\n", report.allocator.c_str());
        for (const auto& h : report.hazards) std::printf("%s: %s\n", pmc::to_string(h.state), h.detail.c_str());
        return 0;
    }
    std::fprintf(stderr, "usage: determinism_probe aslr [--keep-aslr] | allocator\n");
    return 2;
}
