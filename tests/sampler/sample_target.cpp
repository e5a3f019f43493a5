// SPDX-License-Identifier: MIT
// The program `pmc sample`'s tests sample: touches every page of a 4 MiB global array and of a 4 MiB heap block
// (one page fault each: huge pages off), in a thread when given --thread, then exits with the status given.
// --remap instead writes to 8 pages of a file mapped at X, unmaps it, then maps anonymous memory over [X, X+16 pages)
// and writes to every page, unmaps that and maps [X+8, X+16 pages) again (perf reports the mmaps, not the munmaps).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

alignas(4096) char sampled_global[4u << 20];

namespace {
void touch(char* p, std::size_t n) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    ::madvise(p, n, MADV_NOHUGEPAGE);
    for (std::size_t off = 0; off < n; off += page) static_cast<volatile char*>(p)[off] = 1;
}

int remap() {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    char name[] = "/tmp/pmc-sample-remap-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(8 * page)) != 0) return 98;
    const int rw = PROT_READ | PROT_WRITE, anon = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
    void* x = ::mmap(nullptr, 16 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); // reserve the range
    if (x == MAP_FAILED || ::mmap(x, 8 * page, rw, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) return 97;
    touch(static_cast<char*>(x), 8 * page); // write faults on a private file mapping: one each, no fault-around
    // pmc sample reads /proc/PID/maps every 100 ms: hold the file mapped for a few readings, so that the mappings
    // that follow are always drained after a reading that still shows the file (a loaded machine did that 1 in 8).
    timespec hold{0, 300 * 1000 * 1000};
    while (::nanosleep(&hold, &hold) != 0) {
    }
    ::munmap(x, 16 * page);
    if (::mmap(x, 16 * page, rw, anon, -1, 0) == MAP_FAILED) return 96;
    touch(static_cast<char*>(x), 16 * page);
    ::munmap(x, 16 * page);
    char* upper = static_cast<char*>(x) + 8 * page;
    if (::mmap(upper, 8 * page, rw, anon, -1, 0) == MAP_FAILED) return 95;
    touch(upper, 8 * page);
    ::close(fd);
    ::unlink(name);
    return 0;
}
} // namespace

int main(int argc, char** argv) {
    bool thread = false;
    int status = 0;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--thread") == 0) thread = true;
        else if (std::strcmp(argv[i], "--remap") == 0) return remap();
        else status = std::atoi(argv[i]);
    }
    void* heap = nullptr;
    if (::posix_memalign(&heap, 4096, 4u << 20) != 0) return 99;
    auto work = [&] {
        touch(sampled_global, sizeof sampled_global);
        touch(static_cast<char*>(heap), 4u << 20);
    };
    if (thread) std::thread(work).join();
    else work();
    std::free(heap);
    return status;
}
