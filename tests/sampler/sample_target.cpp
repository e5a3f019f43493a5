// The program `pmc sample`'s tests sample: touches every page of a 4 MiB global array and of a 4 MiB heap block
// (one page fault each: huge pages off), in a thread when given --thread, then exits with the status given.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

alignas(4096) char sampled_global[4u << 20];

namespace {
void touch(char* p, std::size_t n) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    ::madvise(p, n, MADV_NOHUGEPAGE);
    for (std::size_t off = 0; off < n; off += page) static_cast<volatile char*>(p)[off] = 1;
}
} // namespace

int main(int argc, char** argv) {
    bool thread = false;
    int status = 0;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--thread") == 0) thread = true;
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
