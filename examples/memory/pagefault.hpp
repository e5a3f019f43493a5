// SPDX-License-Identifier: MIT
// pagefault.hpp: what a page fault costs -- a file page read from the disk (major fault), a file page already in
// the page cache (minor fault), a fresh anonymous page (minor fault, zeroed), and a read of fresh anonymous memory
// (minor fault mapping the shared zero page: the bare cost of a fault) -- one byte touched per page.
//
// The honest major fault: the file is written, fsync'd, and evicted from the page cache with
// posix_fadvise(POSIX_FADV_DONTNEED), which mincore() confirms (no page resident). Read-ahead is off
// (posix_fadvise(POSIX_FADV_RANDOM) and madvise(MADV_RANDOM)), so each fault reads one page; pmc's
// major-faults/minor-faults software counters count the faults and /proc/self/io's read_bytes the bytes that
// really came from the device. lmbench's lat_pagefault relies on msync(MS_INVALIDATE), which on Linux evicts
// nothing: it times minor faults on cached pages.
#pragma once

#include "common.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pmc_mem {

struct PagefaultOptions {
    std::string dir = ".";                 ///< where the file is created (then unlinked at once)
    std::uint64_t file_size = 16ull << 20;
    unsigned runs = 3;
    bool random_order = false;             ///< touch pages in a random order instead of address order
    std::uint64_t seed = 1;
    double memory_latency_ns = 0;          ///< from the latency experiment; 0: measured here
    std::string memory_latency_source;
};

/// Where the file lives: filesystem, mount, block device.
struct FileSystemInfo {
    std::string path;
    std::string fs_type;      ///< from statfs (and /proc/self/mountinfo)
    std::string mount_point;
    std::string mount_source; ///< e.g. /dev/vda
    std::string device;       ///< block device name, e.g. vda ("" if none: tmpfs, overlay, ...)
    std::string driver;       ///< e.g. virtio_blk
    std::string model;
    int rotational = -1;      ///< /sys/block/DEV/queue/rotational, -1 unknown
    bool can_evict = true;    ///< false on tmpfs/ramfs: pages cannot leave memory
    std::string text() const;
};

struct FaultRun {
    std::uint64_t pages = 0;          ///< pages in the mapping
    std::uint64_t touched = 0;        ///< pages touched (one byte each)
    double total_ns = 0;              ///< all touches
    std::uint64_t major_faults = 0;   ///< pmc counter "major-faults"
    std::uint64_t minor_faults = 0;   ///< pmc counter "minor-faults"
    std::int64_t disk_read_bytes = -1; ///< /proc/self/io read_bytes over the touches (-1: unavailable)
    std::int64_t resident_before = -1; ///< mincore, file cases only
    std::int64_t resident_after = -1;
    double touch_median_ns = 0, touch_p10_ns = 0, touch_p90_ns = 0, touch_max_ns = 0;
    std::uint64_t faults() const { return major_faults + minor_faults; }
    double ns_per_fault() const { return faults() ? total_ns / static_cast<double>(faults()) : 0; }
    double ns_per_page() const { return touched ? total_ns / static_cast<double>(touched) : 0; }
};

struct FaultCase {
    std::string name;        ///< "major", "minor", "anonymous", "zero-page"
    std::string description;
    std::vector<FaultRun> runs;
    std::string check;       ///< what the counts show, for people ("every touched page was a major fault ...")
    bool verified = false;   ///< the counts show what the case claims
    /// The run the tables report, every figure from it: the median run by ns per fault (with an even number of
    /// runs, the faster of the two middle ones). Index into `runs`; 0 when there are none.
    std::size_t median_run_index() const;
    const FaultRun& median_run() const { return runs.at(median_run_index()); }
    double median_ns_per_fault() const { return runs.empty() ? 0 : median_run().ns_per_fault(); }
    double median_ns_per_page() const { return runs.empty() ? 0 : median_run().ns_per_page(); }
};

struct PagefaultResult {
    PagefaultOptions options;
    FileSystemInfo fs;
    std::vector<FaultCase> cases;
    long page_size = 4096; ///< sysconf(_SC_PAGESIZE), set by run_pagefault
    double memory_latency_ns = 0;
    std::string memory_latency_source;
    double timer_ns = 0; ///< what an empty timed interval costs (included in every touch)
    std::vector<std::string> notes;
    double seconds = 0;
};

PagefaultResult run_pagefault(const PagefaultOptions& options, Clock& clock, Progress& progress);

/// The memory latency from a random chain over `bytes` (for the comparison when run alone).
double measure_memory_latency(std::uint64_t bytes, Clock& clock);

FileSystemInfo describe_file_system(int fd, const std::string& path);

std::string pagefault_csv(const PagefaultResult& r);
void write_pagefault_json(pmc::JsonWriter& json, const PagefaultResult& r, const MachineFacts& m);
std::string pagefault_text(const PagefaultResult& r);
std::string pagefault_markdown(const PagefaultResult& r);

} // namespace pmc_mem
