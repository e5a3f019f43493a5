// SPDX-License-Identifier: MIT
// pmc/detail/sys.hpp: the system calls pmc makes, behind one table of function pointers so tests can inject
// failures (EACCES, EMFILE, ...) without changing the machine; and RAII owners for the fd and the mapping.
#pragma once

#include <pmc/config.hpp>

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <utility>

PMC_BEGIN_NAMESPACE
namespace detail {

inline int real_perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags) {
    return static_cast<int>(::syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags));
}

inline int real_perf_ioctl(int fd, unsigned long request, unsigned long arg) { return ::ioctl(fd, request, arg); }

/// Every system call pmc makes goes through here. Tests swap entries (see tests/support) to simulate failures.
struct SystemCalls {
    int (*perf_event_open)(perf_event_attr*, pid_t, int, int, unsigned long) = &real_perf_event_open;
    void* (*mmap)(void*, std::size_t, int, int, int, off_t) = &::mmap;
    int (*munmap)(void*, std::size_t) = &::munmap;
    ssize_t (*read)(int, void*, std::size_t) = &::read;
    int (*close)(int) = &::close;
    int (*ioctl)(int, unsigned long, unsigned long) = &real_perf_ioctl;
};

inline SystemCalls& system_calls() {
    static SystemCalls calls;
    return calls;
}

/// Owns a file descriptor; -1 when empty.
class FileDescriptor {
public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    FileDescriptor(FileDescriptor&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    FileDescriptor& operator=(FileDescriptor&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    void reset() noexcept {
        if (fd_ >= 0) system_calls().close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

/// Owns a memory mapping.
class Mapping {
public:
    Mapping() = default;
    Mapping(void* addr, std::size_t size) noexcept : addr_(addr), size_(size) {}
    Mapping(Mapping&& o) noexcept : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    Mapping& operator=(Mapping&& o) noexcept {
        if (this != &o) {
            reset();
            addr_ = std::exchange(o.addr_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping() { reset(); }

    void* get() const noexcept { return addr_; }
    void reset() noexcept {
        if (addr_) system_calls().munmap(addr_, size_);
        addr_ = nullptr;
        size_ = 0;
    }

private:
    void* addr_ = nullptr;
    std::size_t size_ = 0;
};

inline std::size_t page_size() {
    static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

} // namespace detail
PMC_END_NAMESPACE
