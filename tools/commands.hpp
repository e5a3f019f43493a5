// The pmc tool's commands, shared between its source files.
#pragma once

#include <pmc/pmu.hpp>

#include <string>
#include <vector>

namespace pmc_tool {

struct Options {
    std::string sysfs{pmc::default_sysfs_root};
    bool json = false;
    bool csv = false;
    bool like_perf_stat = false;
    std::string output; ///< -o FILE (count)
    bool help = false;
    std::string command;
    std::vector<std::string> args;
};

/// pmc doctor (tools/doctor.cpp): returns the documented exit status.
int cmd_doctor(const Options& o);

/// pmc count (tools/count.cpp): counts `command` with `events`; returns the command's exit status.
int cmd_count(const Options& o, const std::vector<std::string>& command, const std::vector<std::string>& events);

} // namespace pmc_tool
