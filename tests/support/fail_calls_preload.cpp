// SPDX-License-Identifier: MIT
// LD_PRELOAD shim for pmc count's error paths, which the machine cannot produce on demand: fork() always fails
// (EAGAIN); with PMC_TEST_FAIL=pipe2 in the environment, pipe2() fails (EMFILE) instead. At exit it prints to
// stderr "fail-calls: N pipe fds left open" for the pipes opened since it was loaded (those inherited are not pmc's).
#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int max_fd = 4096;
bool open_at_start[max_fd];

bool is_pipe(int fd) {
    char path[64], target[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t n = ::readlink(path, target, sizeof target - 1);
    return n > 0 && std::strncmp(target, "pipe:", 5) == 0;
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
    errno = EAGAIN;
    return -1;
}

extern "C" int pipe2(int fds[2], int flags) noexcept {
    const char* fail = std::getenv("PMC_TEST_FAIL");
    if (fail && std::strcmp(fail, "pipe2") == 0) {
        errno = EMFILE;
        return -1;
    }
    return static_cast<int>(::syscall(SYS_pipe2, fds, flags));
}
