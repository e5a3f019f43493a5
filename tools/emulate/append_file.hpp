// SPDX-License-Identifier: MIT
// A file the plugin appends lines to (the report, a process's sample and maps files), that still takes them when the
// guest has no file descriptor left.
//
// In QEMU user mode the guest's descriptors are QEMU's: a guest that closes every descriptor (closefrom(3), a
// daemon) would close one the plugin kept open, and the guest may reuse its number for a file of its own. So each
// line opens the file, writes and closes it. But a guest that used up its descriptors (open until EMFILE, or
// setrlimit(RLIMIT_NOFILE) down to 3) leaves no number for that open at its exit, and its count was lost. A
// reserve descriptor, a copy of the first open that works (the report's "started" line, before the guest runs)
// moved up near the descriptor limit (out of the guest's lowest-free numbering), takes the line then: only after
// fstat shows it still is the file (same device and inode), for the guest may have closed it and opened something
// else at that number.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <mutex>
#include <fcntl.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace plugin_files {

class AppendFile {
public:
    /// The file to append to (its reserve, if any, closed: a fork child's per-process files are new ones).
    void set_path(std::string path) {
        close_reserve();
        path_ = std::move(path);
    }
    /// Creates the file now and keeps its reserve: for a file whose first line may come only after the guest has
    /// used up its descriptors (a process's samples, written at its exit). False if it cannot be opened.
    bool open_reserve() {
        const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return false;
        if (reserve_.load(std::memory_order_acquire) < 0) keep_reserve(fd);
        ::close(fd);
        return true;
    }
    /// Closes the reserve, if that number still is the file's.
    void close_reserve() {
        const int fd = reserve_.exchange(-1, std::memory_order_acq_rel);
        if (fd >= 0 && still_ours(fd)) ::close(fd);
    }
    const std::string& path() const { return path_; }
    /// Appends `n` bytes in one write: 0, or the errno of the failure. The first open that works leaves a reserve.
    int append(const void* data, std::size_t n) {
        int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        int err = errno;
        const bool own = fd >= 0;
        if (own && reserve_.load(std::memory_order_acquire) < 0) keep_reserve(fd);
        if (!own && (err == EMFILE || err == ENFILE)) {
            const int reserve = reserve_.load(std::memory_order_acquire);
            if (reserve >= 0 && still_ours(reserve)) fd = reserve;
        }
        if (fd < 0) return err;
        const ssize_t wrote = ::write(fd, data, n);
        err = wrote == static_cast<ssize_t>(n) ? 0 : wrote < 0 ? errno : EIO;
        if (own) ::close(fd);
        return err;
    }
    /// The reserve's number, or -1 (for a test).
    int reserve() const { return reserve_.load(std::memory_order_acquire); }

private:
    /// A copy of `fd` up near the soft limit (at most 1024: a table of a million slots would cost 8 MB), out of the
    /// guest's lowest-free numbering; none if no number is free there.
    void keep_reserve(int fd) {
        rlimit limit{};
        long top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                       ? static_cast<long>(limit.rlim_cur) : 1024;
        if (top > 1024) top = 1024;
        if (top <= 64) return;
        std::unique_lock<std::mutex> hold(making, std::try_to_lock); // (busy: another thread makes it)
        if (!hold.owns_lock() || reserve_.load(std::memory_order_acquire) >= 0) return;
        const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(top - 24));
        struct stat st {};
        if (high < 0) return;
        if (::fstat(high, &st) != 0) {
            ::close(high);
            return;
        }
        device_ = st.st_dev, inode_ = st.st_ino;
        reserve_.store(high, std::memory_order_release);
    }
    bool still_ours(int fd) const {
        struct stat st {};
        return ::fstat(fd, &st) == 0 && st.st_dev == device_ && st.st_ino == inode_;
    }
    std::string path_;
    std::atomic<int> reserve_{-1};
    std::mutex making; // (try_lock only: a fork child never waits for a thread of its parent's)
    // (set before the reserve is published)
    dev_t device_ = 0;
    ino_t inode_ = 0;
};

} // namespace plugin_files
