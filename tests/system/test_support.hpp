// SPDX-License-Identifier: MIT
// Helpers for the system tests: fresh memory to fault on, fd counting, child processes.
#pragma once

#include <pmc/counter.hpp>
#include <pmc/machine.hpp>

#include "sanitizers.hpp"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>

namespace pmc_test {

/// Anonymous memory of `pages` pages that has never been touched (no huge pages, so one fault per page).
class FreshPages {
public:
    explicit FreshPages(std::size_t pages) : size_(pages * page()) {
        addr_ = static_cast<char*>(::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (addr_ == MAP_FAILED) addr_ = nullptr;
        if (addr_) ::madvise(addr_, size_, MADV_NOHUGEPAGE);
    }
    ~FreshPages() {
        if (addr_) ::munmap(addr_, size_);
    }
    FreshPages(const FreshPages&) = delete;
    FreshPages& operator=(const FreshPages&) = delete;
    /// Writes one byte in every page: one minor fault each.
    void touch() {
        for (std::size_t off = 0; off < size_; off += page()) static_cast<volatile char*>(addr_)[off] = 1;
    }
    static std::size_t page() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

private:
    std::size_t size_;
    char* addr_ = nullptr;
};

/// Extra page faults AddressSanitizer adds when `pages` fresh pages are touched: their shadow memory (1/8).
constexpr std::size_t sanitizer_fault_slack(std::size_t pages) {
    return PMC_TEST_ASAN ? pages / 8 + 8 : 0;
}

/// Open file descriptors of this process.
inline int open_fd_count() {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d)) ++n;
        ::closedir(d);
    }
    return n - 3; // ".", "..", and the DIR's own fd
}

/// Runs `body` in a fork()ed child and returns its exit status (or 128 + signal).
inline int in_child(const std::function<int()>& body) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) _exit(body());
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Why this process cannot open msr/tsc/, or "" where it can: the msr PMU counts every mode or none, and an
/// unprivileged user at perf_event_paranoid >= 2 may not count kernel mode (the suite's unprivileged run).
inline std::string msr_refused_reason() {
    if (pmc::kernel_counting_allowed()) return {};
    const auto level = pmc::perf_event_paranoid();
    return "msr/tsc/ counts every mode or none, and this user may not count kernel mode (perf_event_paranoid " +
           (level ? std::to_string(*level) : std::string("unreadable")) + ")";
}

/// A timespec as nanoseconds.
inline double to_ns(const timespec& t) { return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec); }

/// Burns CPU in this thread for about `ms` milliseconds of thread CPU time.
inline void spin_cpu_ms(double ms) {
    timespec a{}, b{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    volatile unsigned long sink = 0;
    do {
        for (int i = 0; i < 10000; ++i) sink = sink + static_cast<unsigned long>(i);
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((to_ns(b) - to_ns(a)) / 1e6 < ms);
}

} // namespace pmc_test
