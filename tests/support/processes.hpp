// SPDX-License-Identifier: MIT
// Finding the live processes a test started, by their command lines in /proc. A process may end while it is being
// looked at: its files then fail to open or to read (ESRCH), and it is skipped, never an error. (A std::ifstream
// throws there: libstdc++'s filebuf reports a failed read() with an exception, whatever the stream's mask.)
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace pmc_test {

/// The whole of a small file (a /proc entry) into `text`; false if it cannot be opened or read to its end.
inline bool read_whole(const std::string& path, std::string& text) {
    text.clear();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buffer[4096];
    ssize_t got;
    while ((got = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
    ::close(fd);
    return got == 0;
}

/// The pids of the live processes (zombies left out) whose command line holds `text`, this process excepted;
/// those that vanish meanwhile are skipped. `proc`: the proc file system's root (a fake one in tests).
inline std::vector<long> processes_naming(const std::string& text, const std::string& proc = "/proc") {
    std::vector<long> found;
    DIR* d = ::opendir(proc.c_str());
    if (!d) return found;
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        const std::string dir = proc + "/" + e->d_name;
        std::string stat, cmdline;
        if (!read_whole(dir + "/stat", stat) || !read_whole(dir + "/cmdline", cmdline)) continue; // (it ended)
        const auto paren = stat.rfind(')');
        if (paren == std::string::npos || stat.size() < paren + 3 || stat[paren + 2] == 'Z') continue;
        const long pid = std::atol(e->d_name);
        if (cmdline.find(text) != std::string::npos && pid != static_cast<long>(::getpid())) found.push_back(pid);
    }
    ::closedir(d);
    return found;
}

} // namespace pmc_test
