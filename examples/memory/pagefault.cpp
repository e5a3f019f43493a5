// SPDX-License-Identifier: MIT
// pagefault.cpp: see pagefault.hpp.
#include "pagefault.hpp"

#include "latency.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

namespace pmc_mem {

namespace {

volatile char g_touch_sink;

std::int64_t io_read_bytes() {
    std::ifstream f("/proc/self/io");
    std::string key;
    long long v = 0;
    while (f >> key >> v)
        if (key == "read_bytes:") return v;
    return -1;
}

std::int64_t resident_pages(void* addr, std::size_t bytes, long page) {
    std::vector<unsigned char> vec((bytes + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page));
    if (::mincore(addr, bytes, vec.data()) != 0) return -1;
    return std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return (c & 1) != 0; });
}

std::string sys_line(const std::string& path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
    return s;
}

std::string fs_name(unsigned long magic) {
    switch (magic) {
    case 0xEF53: return "ext2/3/4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x858458f6: return "ramfs";
    case 0x794c7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x2fc12fc1: return "zfs";
    case 0xF2F52010: return "f2fs";
    case 0x65735546: return "fuse";
    default: return fmt::format("unknown (statfs magic {:#x})", magic);
    }
}

/// The order in which pages are touched.
std::vector<std::size_t> touch_order(std::size_t pages, bool random, std::uint64_t seed) {
    std::vector<std::size_t> order(pages);
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (random) {
        std::uint64_t s = seed;
        for (std::size_t i = pages; i-- > 1;) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            std::swap(order[i], order[(s >> 17) % (i + 1)]);
        }
    }
    return order;
}

/// Touches one byte per page of `base` in `order`, timing each touch and counting the faults. A measurement
/// kernel: under AddressSanitizer an instrumented touch would also fault in the shadow of the mapping.
PMC_MEM_KERNEL FaultRun touch_pages(char* base, const std::vector<std::size_t>& order, long page, bool write, pmc::Counter& major,
                     pmc::Counter& minor, pmc::Counter& wall) {
    FaultRun run;
    run.touched = order.size();
    std::vector<double> t(order.size());
    const std::int64_t io0 = io_read_bytes();
    auto maj = major.interval();
    auto min = minor.interval();
    for (std::size_t i = 0; i < order.size(); ++i) {
        char* p = base + order[i] * static_cast<std::size_t>(page);
        auto iv = wall.interval();
        if (write) *static_cast<volatile char*>(p) = 1;
        else g_touch_sink = *static_cast<volatile char*>(p);
        t[i] = static_cast<double>(iv.stop());
    }
    run.major_faults = maj.stop();
    run.minor_faults = min.stop();
    const std::int64_t io1 = io_read_bytes();
    run.disk_read_bytes = io0 >= 0 && io1 >= 0 ? io1 - io0 : -1;
    run.total_ns = std::accumulate(t.begin(), t.end(), 0.0);
    run.touch_median_ns = median_of(t);
    run.touch_p10_ns = percentile_of(t, 10);
    run.touch_p90_ns = percentile_of(t, 90);
    run.touch_max_ns = max_of(t);
    return run;
}

} // namespace

std::size_t FaultCase::median_run_index() const {
    if (runs.empty()) return 0;
    std::vector<std::size_t> order(runs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return runs[a].ns_per_fault() < runs[b].ns_per_fault();
    });
    return order[(order.size() - 1) / 2];
}

std::string FileSystemInfo::text() const {
    std::string out = path + " is on " + fs_type;
    if (!mount_point.empty()) out += " mounted at " + mount_point;
    if (!mount_source.empty()) out += " from " + mount_source;
    if (!device.empty()) {
        out += " (block device " + device;
        if (!driver.empty()) out += ", driver " + driver;
        if (!model.empty()) out += ", model " + model;
        if (rotational >= 0) out += std::string(", queue/rotational=") + (rotational ? "1" : "0");
        out += ")";
    }
    return out;
}

FileSystemInfo describe_file_system(int fd, const std::string& path) {
    FileSystemInfo fs;
    fs.path = path;
    struct statfs sfs {};
    if (::fstatfs(fd, &sfs) == 0) {
        fs.fs_type = fs_name(static_cast<unsigned long>(sfs.f_type));
        fs.can_evict = sfs.f_type != 0x01021994 && sfs.f_type != 0x858458f6;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fs;
    const unsigned maj = major(st.st_dev), mnr = minor(st.st_dev);
    // /proc/self/mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
    std::ifstream mi("/proc/self/mountinfo");
    std::string line;
    const std::string devno = fmt::format("{}:{}", maj, mnr);
    while (std::getline(mi, line)) {
        std::istringstream ss(line);
        std::string id, parent, dev, root, point;
        ss >> id >> parent >> dev >> root >> point;
        if (dev != devno) continue;
        std::string tok;
        while (ss >> tok && tok != "-") {
        }
        std::string type, source;
        ss >> type >> source;
        // Prefer the mount whose point is the longest prefix of the path.
        if (point.size() >= fs.mount_point.size() && path.rfind(point, 0) == 0) {
            fs.mount_point = point;
            fs.mount_source = source;
            if (!type.empty()) fs.fs_type = type;
        } else if (fs.mount_point.empty()) {
            fs.mount_point = point;
            fs.mount_source = source;
            if (!type.empty()) fs.fs_type = type;
        }
    }
    // /sys/dev/block/MAJ:MIN is the device or partition; a partition's queue and device are its parent's.
    char buf[PATH_MAX];
    const std::string sys = "/sys/dev/block/" + devno;
    if (::realpath(sys.c_str(), buf)) {
        std::string dir = buf;
        fs.device = dir.substr(dir.rfind('/') + 1);
        if (::access((dir + "/partition").c_str(), F_OK) == 0) dir = dir.substr(0, dir.rfind('/'));
        const std::string r = sys_line(dir + "/queue/rotational");
        if (!r.empty()) fs.rotational = r == "1" ? 1 : 0;
        fs.model = sys_line(dir + "/device/model");
        if (::realpath((dir + "/device/driver").c_str(), buf)) {
            const std::string d = buf;
            fs.driver = d.substr(d.rfind('/') + 1);
        }
    }
    return fs;
}

double measure_memory_latency(std::uint64_t bytes, Clock& clock) {
    const std::size_t stride = 64, n = bytes / stride;
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("cannot map " + size_text(static_cast<double>(bytes)));
    ::madvise(m, bytes, MADV_NOHUGEPAGE);
    char* base = static_cast<char*>(m);
    void* p = build_chain(base, n, stride, Chain::random, 7);
    p = chase(p, 1000);
    std::vector<double> ns; // as the latency experiment does: the median of 31 runs of 2000 loads
    for (int i = 0; i < 31; ++i) ns.push_back(clock.time([&] { p = chase(p, 20); }).ns / 2000);
    g_touch_sink = static_cast<char>(reinterpret_cast<std::uintptr_t>(p));
    ::munmap(m, bytes);
    return median_of(ns);
}

PagefaultResult run_pagefault(const PagefaultOptions& o, Clock& clock, Progress& progress) {
    PagefaultResult r;
    r.options = o;
    const std::uint64_t t0 = clock.now_ns();
    const long page = ::sysconf(_SC_PAGESIZE);
    r.page_size = page;
    const std::size_t bytes = static_cast<std::size_t>(o.file_size / static_cast<std::uint64_t>(page)) *
                              static_cast<std::size_t>(page);
    const std::size_t pages = bytes / static_cast<std::size_t>(page);
    if (pages == 0) throw UsageError("--file-size must be at least one page");

    pmc::Counter major{"major-faults"}, minor{"minor-faults"}, wall{"wall-time"};
    {
        std::vector<double> empty;
        for (int i = 0; i < 1000; ++i) {
            auto iv = wall.interval();
            empty.push_back(static_cast<double>(iv.stop()));
        }
        r.timer_ns = median_of(empty);
    }

    // The file: created, filled with a pattern (no holes), fsync'd, and unlinked at once so nothing is left behind.
    char dir_real[PATH_MAX];
    const std::string dir = ::realpath(o.dir.c_str(), dir_real) ? std::string(dir_real) : o.dir;
    const std::string path = join_path(dir, fmt::format("pmc-pagefault-{}.tmp", ::getpid()));
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
    ::unlink(path.c_str());
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    r.fs = describe_file_system(fd, path);
    {
        std::vector<char> chunk(1 << 20);
        for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>('a' + i % 26);
        for (std::size_t off = 0; off < bytes;) {
            const std::size_t n = std::min(chunk.size(), bytes - off);
            const ssize_t w = ::write(fd, chunk.data(), n);
            if (w <= 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
            off += static_cast<std::size_t>(w);
        }
        if (::fsync(fd) != 0) throw std::runtime_error("fsync of " + path + " failed: " + std::strerror(errno));
    }
    const std::vector<std::size_t> order = touch_order(pages, o.random_order, o.seed);
    const std::string order_text = o.random_order ? "in random order" : "in address order";

    FaultCase major_case{"major",
                         "file page read from the device: file fsync'd, evicted with posix_fadvise(DONTNEED) "
                         "(mincore: 0 pages resident), read-ahead off (POSIX_FADV_RANDOM, MADV_RANDOM), one byte "
                         "read per page " + order_text,
                         {}, "", false};
    FaultCase minor_case{"minor",
                         "file page already in the page cache: a new read-only mapping of the same file, one byte "
                         "read per page " + order_text + " (the kernel maps up to 16 cached neighbours per fault: "
                         "fault-around)",
                         {}, "", false};
    FaultCase anon_case{"anonymous",
                        "fresh anonymous memory (base pages, MADV_NOHUGEPAGE): one byte written per page " +
                            order_text + "; each fault allocates and zeroes a page",
                        {}, "", false};
    FaultCase zero_case{"zero-page",
                        "fresh anonymous memory read, one byte per page " + order_text +
                            ": each fault maps the shared zero page (no allocation, no copy): the bare cost of a fault",
                        {}, "", false};

    for (unsigned run = 0; run < o.runs; ++run) {
        if (r.fs.can_evict) {
            ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED) throw std::runtime_error("cannot map " + path + ": " + std::strerror(errno));
            char* base = static_cast<char*>(m);
            std::int64_t resident = resident_pages(base, bytes, page);
            for (int tries = 0; resident > 0 && tries < 5; ++tries) { // writeback may still hold a few pages
                ::fsync(fd);
                ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
                resident = resident_pages(base, bytes, page);
            }
            ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
            ::madvise(base, bytes, MADV_RANDOM);
            FaultRun fr = touch_pages(base, order, page, false, major, minor, wall);
            fr.pages = pages;
            fr.resident_before = resident;
            fr.resident_after = resident_pages(base, bytes, page);
            ::munmap(base, bytes);
            major_case.runs.push_back(fr);
            progress.step(fmt::format("page faults: run {}/{}: major {:.1f} us per fault ({} majors for {} pages)",
                                      run + 1, o.runs, fr.ns_per_fault() / 1e3, fr.major_faults, fr.touched));
        }
        {
            // The file is in the page cache now (read by the run above, or never evictable).
            void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED) throw std::runtime_error("cannot map " + path + ": " + std::strerror(errno));
            char* base = static_cast<char*>(m);
            if (!r.fs.can_evict || run == 0) // make sure every page is cached
                for (std::size_t off = 0; off < bytes; off += static_cast<std::size_t>(page)) {
                    char c;
                    if (::pread(fd, &c, 1, static_cast<off_t>(off)) != 1) break;
                }
            ::madvise(base, bytes, MADV_RANDOM);
            const std::int64_t before = resident_pages(base, bytes, page);
            FaultRun fr = touch_pages(base, order, page, false, major, minor, wall);
            fr.pages = pages;
            fr.resident_before = before;
            fr.resident_after = resident_pages(base, bytes, page);
            ::munmap(base, bytes);
            minor_case.runs.push_back(fr);
        }
        {
            void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) throw std::runtime_error(std::string("cannot map anonymous memory: ") + std::strerror(errno));
            char* base = static_cast<char*>(m);
            ::madvise(base, bytes, MADV_NOHUGEPAGE);
            FaultRun fr = touch_pages(base, order, page, true, major, minor, wall);
            fr.pages = pages;
            ::munmap(base, bytes);
            anon_case.runs.push_back(fr);
        }
        {
            void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) throw std::runtime_error(std::string("cannot map anonymous memory: ") + std::strerror(errno));
            char* base = static_cast<char*>(m);
            ::madvise(base, bytes, MADV_NOHUGEPAGE);
            FaultRun fr = touch_pages(base, order, page, false, major, minor, wall);
            fr.pages = pages;
            ::munmap(base, bytes);
            zero_case.runs.push_back(fr);
        }
    }

    // What the counts show, run by run.
    auto counts = [&](const FaultCase& c, bool io) {
        std::string out;
        for (const auto& fr : c.runs) {
            out += fmt::format("{}{} major + {} minor", out.empty() ? "" : "; ", fr.major_faults, fr.minor_faults);
            if (fr.resident_before >= 0 && io) out += fmt::format(", {} resident before", fr.resident_before);
            if (io && fr.disk_read_bytes >= 0) out += fmt::format(", {} bytes read from the device", fr.disk_read_bytes);
        }
        return fmt::format("{} runs of {} touched pages: ", c.runs.size(), pages) + out;
    };
    if (!r.fs.can_evict) {
        r.notes.push_back("the file is on " + r.fs.fs_type + ", whose pages cannot be evicted: no major faults "
                          "measured; use --dir on a disk filesystem");
    } else {
        // The device bytes are the process's (/proc/self/io): a filesystem may read a metadata block or two on the
        // way (seen here: one extra 4 KiB block in some runs). Read-ahead would multiply the bytes instead.
        bool all = !major_case.runs.empty();
        std::int64_t surplus = 0;
        for (const auto& fr : major_case.runs) {
            const std::int64_t data = static_cast<std::int64_t>(fr.touched) * page;
            const bool bytes_ok = fr.disk_read_bytes < 0 ||
                                  (fr.disk_read_bytes >= data && fr.disk_read_bytes <= data + data / 100 + 16 * page);
            if (fr.disk_read_bytes > data) surplus = std::max(surplus, fr.disk_read_bytes - data);
            all = all && fr.resident_before == 0 && fr.major_faults == fr.touched && fr.minor_faults == 0 && bytes_ok;
        }
        major_case.verified = all;
        major_case.check = std::string(all ? "every touched page was a major fault that read one page from the "
                                             "device, and none was resident before"
                                           : "NOT every touched page was a major fault reading one page (read-ahead, "
                                             "fault-around or pages that stayed cached)") +
                           (all && surplus > 0 ? fmt::format(" (the process read at most {} more bytes, filesystem "
                                                             "metadata)", surplus)
                                               : std::string()) +
                           " -- " + counts(major_case, true);
    }
    {
        bool ok = true;
        for (const auto& fr : minor_case.runs) ok = ok && fr.major_faults == 0 && fr.minor_faults > 0;
        minor_case.verified = ok;
        minor_case.check = std::string(ok ? "no page came from the device; fewer faults than pages where "
                                            "fault-around mapped cached neighbours"
                                          : "some faults were major") +
                           " -- " + counts(minor_case, false);
    }
    for (FaultCase* c : {&anon_case, &zero_case}) {
        bool ok = true;
        for (const auto& fr : c->runs) ok = ok && fr.major_faults == 0 && fr.minor_faults == fr.touched;
        c->verified = ok;
        c->check = std::string(ok ? "one minor fault per touched page" : "not one minor fault per page") + " -- " +
                   counts(*c, false);
    }
    if (r.fs.can_evict) r.cases.push_back(major_case);
    r.cases.push_back(minor_case);
    r.cases.push_back(anon_case);
    r.cases.push_back(zero_case);

    if (o.memory_latency_ns > 0) {
        r.memory_latency_ns = o.memory_latency_ns;
        r.memory_latency_source = o.memory_latency_source;
    } else {
        const std::uint64_t size = 256ull << 20;
        r.memory_latency_ns = measure_memory_latency(size, clock);
        r.memory_latency_source = "random pointer chain over " + size_text(static_cast<double>(size)) +
                                  ", measured by this run (median of 31 runs of 2000 loads)";
    }
    r.seconds = static_cast<double>(clock.now_ns() - t0) / 1e9;
    progress.note(fmt::format("page faults: {} runs of {} pages, {:.1f} s", o.runs, pages, r.seconds));
    return r;
}

std::string pagefault_csv(const PagefaultResult& r) {
    std::string out = "case,run,pages,touched,total_ns,ns_per_fault,ns_per_page,ns_per_byte,major_faults,minor_faults,"
                      "disk_read_bytes,resident_before,resident_after,touch_median_ns,touch_p10_ns,touch_p90_ns,"
                      "touch_max_ns\n";
    const double page = static_cast<double>(r.page_size);
    for (const auto& c : r.cases)
        for (std::size_t i = 0; i < c.runs.size(); ++i) {
            const FaultRun& f = c.runs[i];
            out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", c.name, i + 1, f.pages, f.touched,
                               num(f.total_ns, 8), num(f.ns_per_fault(), 6), num(f.ns_per_page(), 6),
                               num(f.ns_per_page() / page, 6), f.major_faults, f.minor_faults, f.disk_read_bytes,
                               f.resident_before, f.resident_after, num(f.touch_median_ns, 6),
                               num(f.touch_p10_ns, 6), num(f.touch_p90_ns, 6), num(f.touch_max_ns, 6));
        }
    return out;
}

void write_pagefault_json(pmc::JsonWriter& json, const PagefaultResult& r, const MachineFacts& m) {
    json.begin_object();
    json.field("experiment", "pagefault");
    json.key("machine");
    write_machine_json(json, m);
    json.key("file").begin_object();
    json.field("path", r.fs.path);
    json.field("bytes", r.options.file_size);
    json.field("filesystem", r.fs.fs_type);
    json.field("mount_point", r.fs.mount_point);
    json.field("mount_source", r.fs.mount_source);
    json.field("device", r.fs.device);
    json.field("driver", r.fs.driver);
    json.field("model", r.fs.model);
    json.field("rotational", r.fs.rotational);
    json.field("can_evict", r.fs.can_evict);
    json.end_object();
    json.key("method").begin_object();
    json.field("counters", "pmc software events major-faults and minor-faults, read with read(2) before and after "
                           "the touches");
    json.field("timer", "pmc wall-time around each touch");
    json.field("timer_ns", r.timer_ns);
    json.field("disk_bytes", "/proc/self/io read_bytes before and after the touches");
    json.field("order", r.options.random_order ? "random" : "address");
    json.field("runs", r.options.runs);
    json.field("page_size", r.page_size);
    json.field("statistic", "median_*: the figures of the median run by ns per fault (median_run; of an even "
                            "number of runs, the faster middle one)");
    json.end_object();
    json.key("cases").begin_array();
    for (const auto& c : r.cases) {
        json.begin_object();
        json.field("name", c.name);
        json.field("description", c.description);
        json.field("verified", c.verified);
        json.field("check", c.check);
        // Every median_* figure is from one run, the median run by ns per fault (index in "runs", from 0).
        json.field("median_run", c.median_run_index());
        json.field("median_ns_per_fault", c.median_ns_per_fault());
        json.field("median_ns_per_page", c.median_ns_per_page());
        json.field("median_ns_per_byte", c.median_ns_per_page() / static_cast<double>(r.page_size));
        json.field("memory_loads_per_fault", c.median_ns_per_fault() / r.memory_latency_ns);
        json.key("runs").begin_array();
        for (const auto& f : c.runs) {
            json.begin_object();
            json.field("pages", f.pages);
            json.field("touched", f.touched);
            json.field("total_ns", f.total_ns);
            json.field("major_faults", f.major_faults);
            json.field("minor_faults", f.minor_faults);
            json.field("disk_read_bytes", f.disk_read_bytes);
            json.field("resident_before", f.resident_before);
            json.field("resident_after", f.resident_after);
            json.field("ns_per_fault", f.ns_per_fault());
            json.field("ns_per_page", f.ns_per_page());
            json.field("touch_median_ns", f.touch_median_ns);
            json.field("touch_p10_ns", f.touch_p10_ns);
            json.field("touch_p90_ns", f.touch_p90_ns);
            json.field("touch_max_ns", f.touch_max_ns);
            json.end_object();
        }
        json.end_array();
        json.end_object();
    }
    json.end_array();
    json.key("memory_load").begin_object();
    json.field("latency_ns", r.memory_latency_ns);
    json.field("source", r.memory_latency_source);
    json.end_object();
    json.key("notes").begin_array();
    for (const auto& n : r.notes) json.value(n);
    json.end_array();
    json.field("seconds", r.seconds);
    json.end_object();
}

std::string pagefault_text(const PagefaultResult& r) {
    std::string out = "file: " + r.fs.text() + "\n";
    out += fmt::format("{:<10} {:>11} {:>11} {:>11} {:>14} {:>10} {:>10}  {}\n", "case", "per fault", "per page",
                       "per byte", "= memory loads", "majors", "minors", "touch median (p10..p90)");
    for (const auto& c : r.cases) {
        if (c.runs.empty()) continue;
        const FaultRun& f = c.median_run();
        out += fmt::format("{:<10} {:>11} {:>11} {:>11} {:>14.0f} {:>10} {:>10}  {} ({}..{})\n", c.name,
                           duration_text(f.ns_per_fault()), duration_text(f.ns_per_page()),
                           duration_text(f.ns_per_page() / static_cast<double>(r.page_size)),
                           f.ns_per_fault() / r.memory_latency_ns, f.major_faults, f.minor_faults,
                           duration_text(f.touch_median_ns), duration_text(f.touch_p10_ns),
                           duration_text(f.touch_p90_ns));
    }
    out += fmt::format("each row is one run of {}: the median run by time per fault\n", r.options.runs);
    out += fmt::format("memory load latency for the comparison: {} ({})\n", duration_text(r.memory_latency_ns),
                       r.memory_latency_source);
    for (const auto& c : r.cases) out += "check " + c.name + ": " + c.check + "\n";
    for (const auto& n : r.notes) out += "note: " + n + "\n";
    return out;
}

std::string pagefault_markdown(const PagefaultResult& r) {
    std::string out = "| case | per fault | per page | per byte | a fault = N loads from memory | faults (major + minor) "
                      "per run | touches: median (p10..p90) |\n|---|---|---|---|---|---|---|\n";
    for (const auto& c : r.cases) {
        if (c.runs.empty()) continue;
        const FaultRun& f = c.median_run();
        out += fmt::format("| {} | {} | {} | {} | {:.0f} | {} + {} for {} pages | {} ({}..{}) |\n", c.name,
                           duration_text(f.ns_per_fault()), duration_text(f.ns_per_page()),
                           duration_text(f.ns_per_page() / static_cast<double>(r.page_size)),
                           f.ns_per_fault() / r.memory_latency_ns, f.major_faults, f.minor_faults, f.touched,
                           duration_text(f.touch_median_ns), duration_text(f.touch_p10_ns),
                           duration_text(f.touch_p90_ns));
    }
    return out;
}

} // namespace pmc_mem
