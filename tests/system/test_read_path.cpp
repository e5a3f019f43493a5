// SPDX-License-Identifier: MIT
// The read(2) path's shape: one call frame between the caller of Counter::read() and read(2). Each frame around a
// system call costs a mispredicted return after it where the kernel clears the return-stack predictor (8-20 ns
// each on our AMD Zen VMs, SRSO "Safe RET"); three frames made pmc's read(2) path 1.05-1.17x a bare read(2).
#include "catch.hpp"
#include "inject.hpp"

#include <pmc/counter.hpp>

#include <execinfo.h>
#include <unistd.h>

namespace {

int frames_at_read = 0; // the stack depth inside read(2), as the counter called it

ssize_t traced_read(int fd, void* buf, std::size_t n) {
    void* frames[64];
    frames_at_read = ::backtrace(frames, 64);
    return ::read(fd, buf, n);
}

/// Reads the counter; `depth` gets this function's own stack depth. (The asm keeps c.read() from being a tail call.)
__attribute__((noinline)) std::uint64_t read_through(pmc::Counter& c, int& depth) {
    void* frames[64];
    depth = ::backtrace(frames, 64);
    std::uint64_t v = c.read();
    asm volatile("" : "+r"(v));
    return v;
}

} // namespace

TEST_CASE("a read(2)-path read calls read(2) from one out-of-line frame", "[system][software]") {
    pmc::Counter c{"task-clock"};
    REQUIRE(c.path() == pmc::ReadPath::syscall);
    pmc_test::SystemCallOverride traced;
    traced.calls().read = traced_read;
    int depth = 0;
    CHECK(read_through(c, depth) > 0);
    // Inside traced_read: itself and read_slow above read_through (read_fd and read_with_syscall are inlined).
    CHECK(frames_at_read - depth == 2);
    // read_detailed() takes the same single frame... or none: it is inlined into its caller.
    frames_at_read = 0;
    CHECK(c.read_detailed().time_enabled > 0);
    CHECK(frames_at_read > 0);
}
