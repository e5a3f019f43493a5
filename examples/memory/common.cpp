// SPDX-License-Identifier: MIT
// common.cpp: see common.hpp.
#include "common.hpp"

#include <pmc/machine.hpp>

#include <fmt/format.h>

#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pmc_mem {

// ---------------------------------------------------------------------------------------------------------------
// Sizes

std::uint64_t parse_size(const std::string& text) {
    const char* s = text.c_str();
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s, &end);
    if (end == s || errno != 0 || !std::isfinite(v) || v < 0 || text.find_first_of("eExXpP") != std::string::npos)
        throw UsageError("'" + text + "' is not a size (examples: 512, 48K, 1.5M, 2G)");
    std::string unit(end);
    double scale = 1;
    if (unit.empty() || unit == "B" || unit == "b") scale = 1;
    else if (unit == "K" || unit == "k" || unit == "KB" || unit == "KiB" || unit == "kB") scale = 1024.0;
    else if (unit == "M" || unit == "m" || unit == "MB" || unit == "MiB") scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "g" || unit == "GB" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
    else throw UsageError("'" + text + "': unknown unit '" + unit + "' (use B, K, M or G; they are powers of 1024)");
    const double bytes = v * scale;
    if (bytes > 1e15) throw UsageError("'" + text + "' is too large");
    if (bytes != std::floor(bytes)) throw UsageError("'" + text + "' is not a whole number of bytes");
    return static_cast<std::uint64_t>(bytes);
}

std::string size_label(double bytes) {
    static const char* units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    double v = bytes;
    while (v >= 999.5 && u < 4) { // what would print as 1e+03 of a unit prints as 0.977.. of the next
        v /= 1024;
        ++u;
    }
    return fmt::format("{:.3g}{}", v, units[u]);
}

std::string size_text(double bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = bytes;
    while (v >= 999.5 && u < 4) {
        v /= 1024;
        ++u;
    }
    return fmt::format("{:.3g} {}", v, units[u]);
}

std::vector<std::uint64_t> size_grid(std::uint64_t min, std::uint64_t max, unsigned per_octave,
                                     std::uint64_t granule) {
    std::vector<std::uint64_t> out;
    if (min == 0 || max < min || per_octave == 0 || granule == 0) return out;
    std::uint64_t base = 1;
    while (base * 2 <= min) base *= 2;
    for (; base <= max; base *= 2) {
        for (unsigned k = 0; k < per_octave; ++k) {
            const double exact = static_cast<double>(base) * (1.0 + static_cast<double>(k) / per_octave);
            std::uint64_t s = static_cast<std::uint64_t>(std::llround(exact / static_cast<double>(granule))) * granule;
            if (s < granule) s = granule;
            if (s >= min && s <= max && (out.empty() || s > out.back())) out.push_back(s);
        }
        if (base > (UINT64_MAX >> 2)) break;
    }
    return out;
}

std::vector<std::uint64_t> sweep_sizes(std::uint64_t min, std::uint64_t max, unsigned per_octave,
                                       std::uint64_t granule) {
    if (min == 0) throw UsageError("--min must be at least 1 byte");
    if (max < min) throw UsageError("--max is smaller than --min");
    if (per_octave == 0 || granule == 0) throw UsageError("--per-octave must be at least 1");
    std::vector<std::uint64_t> sizes = size_grid(min, max, per_octave, granule);
    if (!sizes.empty()) return sizes;
    const std::vector<std::uint64_t> below = size_grid(granule, min, per_octave, granule);
    const std::vector<std::uint64_t> above = size_grid(max, 2 * max + 2 * granule, per_octave, granule);
    std::string nearest, fix;
    if (!below.empty() && below.back() < min) {
        nearest = size_text(static_cast<double>(below.back()));
        fix = "lower --min to " + size_label(static_cast<double>(below.back()));
    }
    if (!above.empty()) {
        nearest += (nearest.empty() ? "" : " and ") + size_text(static_cast<double>(above.front()));
        fix += (fix.empty() ? "" : " or ") + std::string("raise --max to ") +
               size_label(static_cast<double>(above.front()));
    }
    throw UsageError(fmt::format("no working-set size to measure between --min {} and --max {}: the sweep measures "
                                 "2^n * (1 + k/{}) bytes rounded to {} B, and the nearest are {}; {}",
                                 size_text(static_cast<double>(min)), size_text(static_cast<double>(max)),
                                 per_octave, granule, nearest.empty() ? "none" : nearest,
                                 fix.empty() ? "widen the range" : fix));
}

// ---------------------------------------------------------------------------------------------------------------
// Command line

long integer_option(const std::string& name, const std::string& text, long min, long max) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0) throw UsageError(name + ": '" + text + "' is not an integer");
    if (v < min || v > max)
        throw UsageError(name + ": " + text + " is outside " + std::to_string(min) + ".." + std::to_string(max));
    return v;
}

double number_option(const std::string& name, const std::string& text, double min, double max) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v))
        throw UsageError(name + ": '" + text + "' is not a number");
    if (v < min || v > max) throw UsageError(name + ": " + text + " is outside " + num(min) + ".." + num(max));
    return v;
}

void CommonOptions::add_to(pmc_cli::CommandLine& cl, bool pins_and_plots) {
    cl.option("--out", out, "a folder");
    cl.flag("--quick", quick);
    cl.flag("--quiet", quiet);
    if (!pins_and_plots) return;
    cl.option("--cpu", cpu_text, "a CPU number");
    cl.flag("--no-pin", no_pin);
    cl.flag("--no-plot", no_plot);
}

int CommonOptions::cpu() const {
    return cpu_text.empty() ? -1 : static_cast<int>(integer_option("--cpu", cpu_text, 0, 1 << 20));
}

void CommonOptions::check_quick(const pmc_cli::CommandLine& cl, std::initializer_list<const char*> sized,
                                const std::string& what) const {
    if (!quick) return;
    for (const char* name : sized)
        if (cl.count(name) > 0) throw UsageError("--quick sets " + what + ": give " + name + " or --quick, not both");
}

// ---------------------------------------------------------------------------------------------------------------
// Pinning

std::vector<int> allowed_cpus() {
    std::vector<int> out;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) out.push_back(c);
    return out;
}

const std::vector<int>& process_cpus() {
    static const std::vector<int> cpus = allowed_cpus(); // first called before any pinning (pin_to_cpu calls it)
    return cpus;
}

int pin_to_cpu(int cpu, std::string& note) {
    const std::vector<int> cpus = process_cpus();
    if (cpus.empty()) {
        note = std::string("Not pinned: sched_getaffinity failed (") + std::strerror(errno) + ")";
        return -1;
    }
    if (cpu < 0) cpu = cpus.back();
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) {
        std::string list;
        for (int c : cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
        throw UsageError("--cpu " + std::to_string(cpu) + ": this process may run only on CPUs " + list);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
        note = std::string("Not pinned: sched_setaffinity failed (") + std::strerror(errno) + ")";
        return -1;
    }
    note = "Pinned to CPU " + std::to_string(cpu) + " with sched_setaffinity";
    return cpu;
}

// ---------------------------------------------------------------------------------------------------------------
// Clock

namespace {
std::string joined(const std::vector<std::string>& notes) {
    std::string out;
    for (const auto& n : notes) out += (out.empty() ? "" : "; ") + n;
    return out;
}
std::string first_line(const std::string& s) {
    const auto nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
}
} // namespace

Clock::Clock() : wall_("wall-time") {
    wall_note_ = "wall-time: " + joined(wall_.notes());
    auto cycles = pmc::Counter::try_open("cycles:u");
    if (cycles.ok()) {
        cycles_.emplace(std::move(cycles).value());
        cycles_note_ = "cycles:u: " + joined(cycles_->notes());
    } else {
        std::string why = first_line(cycles.failure().message);
        while (!why.empty() && (why.back() == '.' || why.back() == ' ')) why.pop_back();
        cycles_note_ = "no cycle counts: cycles:u did not open (" + why + ")";
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Statistics

double min_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

double median_of(std::vector<double> v) { return percentile_of(std::move(v), 50); }

double percentile_of(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// ---------------------------------------------------------------------------------------------------------------
// Progress and output

Progress::Progress(bool quiet) : tty_(::isatty(STDERR_FILENO) == 1), quiet_(quiet) {}

Progress::~Progress() { clear(); }

void Progress::clear() {
    if (dirty_) {
        std::fputs("\r\x1b[2K", stderr);
        std::fflush(stderr);
        dirty_ = false;
    }
}

void Progress::step(const std::string& text) {
    if (quiet_) return;
    if (!tty_) {
        std::fprintf(stderr, "%s\n", text.c_str());
        return;
    }
    winsize ws{};
    std::size_t width = 100;
    if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10) width = ws.ws_col - 1u;
    std::fprintf(stderr, "\r\x1b[2K%s", text.substr(0, width).c_str());
    std::fflush(stderr);
    dirty_ = true;
}

void Progress::detail(const std::string& text) {
    if (tty_) step(text);
}

void Progress::note(const std::string& text) {
    if (quiet_) return;
    clear();
    std::fprintf(stderr, "%s\n", text.c_str());
}

void make_directories(const std::string& path) {
    if (path.empty()) return;
    std::string partial;
    std::stringstream ss(path);
    std::string part;
    if (path[0] == '/') partial = "/";
    while (std::getline(ss, part, '/')) {
        if (part.empty()) continue;
        partial += part;
        if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST)
            throw std::runtime_error("cannot create directory " + partial + ": " + std::strerror(errno));
        struct stat st {};
        if (::stat(partial.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            throw std::runtime_error(partial + " exists and is not a directory");
        partial += "/";
    }
}

namespace {
/// Writes (and removes) a small file in `dir`: "" if that works, else why not.
std::string write_probe(const std::string& dir) {
    const std::string probe = join_path(dir, fmt::format(".pmc-write-test-{}", ::getpid()));
    try {
        write_text(probe, "pmc: a test that this folder can be written; removed at once\n");
    } catch (const std::exception& e) {
        return e.what();
    }
    std::remove(probe.c_str());
    return "";
}
} // namespace

void probe_output_dir(const std::string& dir) {
    std::string why;
    try {
        make_directories(dir);
        why = write_probe(dir);
    } catch (const std::exception& e) {
        why = e.what();
    }
    if (!why.empty())
        throw std::runtime_error("the report folder " + (dir.empty() ? std::string(".") : dir) +
                                 " cannot be written (" + why + "); nothing was measured: choose another folder with "
                                 "--out");
}

void probe_test_file_dir(const std::string& dir) {
    struct stat st {};
    const std::string why = ::stat(dir.c_str(), &st) != 0 ? std::strerror(errno)
                            : !S_ISDIR(st.st_mode)        ? "not a directory"
                                                          : write_probe(dir);
    if (!why.empty())
        throw std::runtime_error("the folder for the page-fault test file, " + dir + ", cannot be used (" + why +
                                 "); nothing was measured: choose an existing, writable folder on a disk with --dir");
}

void write_text(const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

std::string join_path(const std::string& dir, const std::string& name) {
    if (dir.empty() || dir == ".") return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string num(double v, int digits) {
    if (!std::isfinite(v)) return "";
    if (v == 0) return "0";
    const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
    if (magnitude < -4) return fmt::format("{:.{}g}", v, digits); // tiny: the exponent is the readable form
    // Fixed notation: what rounds up to the next power of ten (999.7 -> "1000") keeps its digits instead of
    // becoming "1e+03"; trailing zeros after the point go, as with %g.
    std::string s = fmt::format("{:.{}f}", v, std::max(0, digits - 1 - magnitude));
    if (s.find('.') != std::string::npos) {
        s.erase(s.find_last_not_of('0') + 1);
        if (s.back() == '.') s.pop_back();
    }
    return s;
}

std::string duration_text(double ns) {
    static const char* units[] = {"ns", "us", "ms", "s"};
    int u = 0;
    while (std::fabs(ns) >= 999.5 && u < 3) { // 999.7 ns is "1 us", not "1e+03 ns"
        ns /= 1000;
        ++u;
    }
    return num(ns, 3) + " " + units[u];
}

// ---------------------------------------------------------------------------------------------------------------
// The machine

std::uint64_t MachineFacts::cache_bytes(const std::string& name) const {
    for (const auto& c : caches)
        if (c.name == name) return c.bytes;
    return 0;
}

namespace {

std::optional<std::string> read_line(const std::string& path) {
    std::ifstream f(path);
    std::string line;
    if (!f || !std::getline(f, line)) return std::nullopt;
    return line;
}

void sysfs_caches(MachineFacts& m) {
    for (int i = 0; i < 16; ++i) {
        const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
        auto level = read_line(dir + "level");
        auto type = read_line(dir + "type");
        auto size = read_line(dir + "size");
        if (!level || !type || !size) continue;
        if (*type == "Instruction") continue;
        ReportedCache c;
        c.name = "L" + *level + (*level == "1" ? "d" : "");
        try {
            c.bytes = parse_size(*size);
        } catch (const UsageError&) {
            continue;
        }
        if (auto ways = read_line(dir + "ways_of_associativity")) c.ways = static_cast<unsigned>(std::atoi(ways->c_str()));
        c.source = "sysfs";
        m.caches.push_back(c);
    }
}

#if defined(__x86_64__)
unsigned amd_ways(unsigned code) {
    static const unsigned ways[16] = {0, 1, 2, 3, 4, 6, 8, 0, 16, 0, 32, 48, 64, 96, 128, 0};
    return ways[code & 15];
}

void cpuid_caches(MachineFacts& m) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    const unsigned max_leaf = a;
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    const std::string v(vendor);
    if (v == "GenuineIntel" && max_leaf >= 4) {
        for (unsigned i = 0; i < 16; ++i) {
            __cpuid_count(4, i, a, b, c, d);
            const unsigned type = a & 31;
            if (type == 0) break;
            if (type == 2) continue; // instruction cache
            ReportedCache r;
            const unsigned level = (a >> 5) & 7;
            r.name = "L" + std::to_string(level) + (level == 1 ? "d" : "");
            r.ways = ((b >> 22) & 0x3ff) + 1;
            r.bytes = std::uint64_t{r.ways} * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * (std::uint64_t{c} + 1);
            r.shared_by = ((a >> 14) & 0xfff) + 1;
            r.source = "cpuid 4";
            m.caches.push_back(r);
        }
        return;
    }
    if (v != "AuthenticAMD" && v != "HygonGenuine") return;
    __get_cpuid(0x80000000, &a, &b, &c, &d);
    const unsigned max_ext = a;
    if (max_ext >= 0x80000005) {
        __get_cpuid(0x80000005, &a, &b, &c, &d);
        ReportedCache l1{"L1d", std::uint64_t{c >> 24} * 1024, (c >> 16) & 0xff, 0, "cpuid 0x80000005"};
        if (l1.bytes) m.caches.push_back(l1);
    }
    if (max_ext >= 0x80000006) {
        __get_cpuid(0x80000006, &a, &b, &c, &d);
        ReportedCache l2{"L2", std::uint64_t{c >> 16} * 1024, amd_ways(c >> 12), 0, "cpuid 0x80000006"};
        if (l2.bytes) m.caches.push_back(l2);
        ReportedCache l3{"L3", std::uint64_t{d >> 18} * 512 * 1024, amd_ways(d >> 12), 0, "cpuid 0x80000006"};
        if (l3.bytes) m.caches.push_back(l3);
    }
}
#endif

} // namespace

MachineFacts machine_facts() {
    MachineFacts m;
    {
        std::ifstream f("/proc/cpuinfo");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("model name", 0) == 0) {
                const auto colon = line.find(':');
                if (colon != std::string::npos) m.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
                break;
            }
    }
    m.kernel = pmc::kernel_release();
    m.hypervisor = pmc::hypervisor_signature();
    m.page_size = ::sysconf(_SC_PAGESIZE);
    m.online_cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    if (auto thp = read_line("/sys/kernel/mm/transparent_hugepage/enabled")) {
        const auto open = thp->find('['), close = thp->find(']');
        m.thp = open != std::string::npos && close > open ? thp->substr(open + 1, close - open - 1) : *thp;
    }
    sysfs_caches(m);
    if (m.caches.empty()) m.notes.push_back("no cache information in /sys/devices/system/cpu/cpu0/cache");
#if defined(__x86_64__)
    // cpuid only for the caches sysfs does not list: one entry per cache (the kernel's view first).
    MachineFacts from_cpuid;
    cpuid_caches(from_cpuid);
    for (const auto& c : from_cpuid.caches)
        if (m.cache_bytes(c.name) == 0) m.caches.push_back(c);
#endif
    if (!m.hypervisor.empty() && m.cache_bytes("L3") > 0)
        m.notes.push_back("under a hypervisor the L3 size the CPU reports can be the host's total, not what one "
                          "virtual CPU sees");
    return m;
}

double load_average() {
    std::ifstream f("/proc/loadavg");
    double one_minute = -1;
    if (!(f >> one_minute)) return -1;
    return one_minute;
}

void write_machine_json(pmc::JsonWriter& json, const MachineFacts& m) {
    json.begin_object();
    json.field("cpu_model", m.cpu_model);
    json.field("kernel", m.kernel);
    json.field("hypervisor", m.hypervisor);
    json.field("page_size", m.page_size);
    json.field("transparent_hugepages", m.thp);
    json.field("online_cpus", m.online_cpus);
    json.key("reported_caches").begin_array();
    for (const auto& c : m.caches) {
        json.begin_object();
        json.field("name", c.name);
        json.field("bytes", c.bytes);
        json.field("ways", c.ways);
        json.field("shared_by", c.shared_by);
        json.field("source", c.source);
        json.end_object();
    }
    json.end_array();
    json.key("notes").begin_array();
    for (const auto& n : m.notes) json.value(n);
    json.end_array();
    json.end_object();
}

std::string machine_text(const MachineFacts& m) {
    std::string out = (m.cpu_model.empty() ? "unknown CPU" : m.cpu_model) + " (" + std::to_string(m.online_cpus) +
                      " CPUs), Linux " + m.kernel;
    out += m.hypervisor.empty() ? ", no hypervisor" : ", hypervisor \"" + m.hypervisor + "\"";
    out += "; " + size_text(static_cast<double>(m.page_size)) + " pages, transparent huge pages: " +
           (m.thp.empty() ? "?" : m.thp) + ".";
    if (!m.caches.empty()) {
        out += " Caches as reported:";
        for (std::size_t i = 0; i < m.caches.size(); ++i) {
            const auto& c = m.caches[i];
            out += std::string(i ? "," : "") + " " + c.name + " " + size_text(static_cast<double>(c.bytes));
            if (c.ways) out += " " + std::to_string(c.ways) + "-way";
            out += " (" + c.source + ")";
        }
        out += ".";
    }
    for (const auto& n : m.notes) out += " Note: " + n + ".";
    return out;
}

int run_command(const std::string& command) {
    const int status = std::system(command.c_str());
    if (status == -1) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool have_program(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/bin:/bin");
    std::string dir;
    while (std::getline(ss, dir, ':'))
        if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    return false;
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

} // namespace pmc_mem
