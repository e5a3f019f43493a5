// SPDX-License-Identifier: MIT
// LD_PRELOAD shim for pmc count's and pmc sample's error paths, which the machine cannot produce on demand. What
// fails is chosen by PMC_TEST_FAIL in the environment:
//   fork               fork() fails (EAGAIN)
//   pipe2              pipe2() fails (EMFILE)
//   perf-read          read() of a perf event's fd fails (EIO): the counts cannot be read after the command ran
//   perf-unscheduled   read() of a perf event's fd says the event never ran (time_running 0, the third word in
//                      both layouts pmc reads: a group's nr, enabled, running and a single event's value, enabled,
//                      running), as a group that never got onto the counters
// At exit it prints to stderr "fail-calls: N pipe fds left open" for the pipes opened since it was loaded (those
// inherited are not pmc's).
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int max_fd = 4096;
bool open_at_start[max_fd];

bool fd_is(int fd, const char* kind) {
    char path[64], target[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t n = ::readlink(path, target, sizeof target - 1);
    return n > 0 && std::strncmp(target, kind, std::strlen(kind)) == 0;
}
bool is_pipe(int fd) { return fd_is(fd, "pipe:"); }
bool is_perf_event(int fd) { return fd_is(fd, "anon_inode:[perf_event]"); }

bool failing(const char* call) {
    const char* fail = std::getenv("PMC_TEST_FAIL");
    return fail && std::strcmp(fail, call) == 0;
}

template <typename F>
void each_open_fd(F f) {
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir) return;
    const int own = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
        const int fd = std::atoi(e->d_name);
        if (e->d_name[0] != '.' && fd != own && fd < max_fd) f(fd);
    }
    ::closedir(dir);
}

__attribute__((constructor)) void remember_open_fds() {
    each_open_fd([](int fd) { open_at_start[fd] = true; });
}

__attribute__((destructor)) void report_pipes_left_open() {
    int n = 0;
    char fds[512] = "";
    each_open_fd([&](int fd) {
        if (open_at_start[fd] || !is_pipe(fd)) return;
        ++n;
        const std::size_t at = std::strlen(fds);
        std::snprintf(fds + at, sizeof fds - at, " %d", fd);
    });
    char line[600];
    const int len = std::snprintf(line, sizeof line, "fail-calls: %d pipe fds left open%s%s\n", n, n ? ":" : "", fds);
    if (len > 0) {
        [[maybe_unused]] const ssize_t written = ::write(2, line, static_cast<std::size_t>(len));
    }
}

} // namespace

// noexcept: as glibc declares them for C++.
extern "C" pid_t fork() noexcept {
    if (failing("fork")) {
        errno = EAGAIN;
        return -1;
    }
    using Fork = pid_t (*)();
    static const auto real_fork = reinterpret_cast<Fork>(::dlsym(RTLD_NEXT, "fork")); // (glibc's atfork handlers)
    return real_fork();
}

extern "C" int pipe2(int fds[2], int flags) noexcept {
    if (failing("pipe2")) {
        errno = EMFILE;
        return -1;
    }
    return static_cast<int>(::syscall(SYS_pipe2, fds, flags));
}

extern "C" ssize_t read(int fd, void* buffer, std::size_t size) {
    const bool fail_read = failing("perf-read"), unscheduled = failing("perf-unscheduled");
    if ((fail_read || unscheduled) && is_perf_event(fd)) {
        if (fail_read) {
            errno = EIO;
            return -1;
        }
        const ssize_t got = ::syscall(SYS_read, fd, buffer, size);
        if (got >= static_cast<ssize_t>(3 * sizeof(std::uint64_t))) static_cast<std::uint64_t*>(buffer)[2] = 0;
        return got;
    }
    return ::syscall(SYS_read, fd, buffer, size);
}
