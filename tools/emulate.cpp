// SPDX-License-Identifier: MIT
// pmc emulate: runs a command under QEMU user mode with pmc's TCG plugin, the emulated PMU, so that its
// instructions:u counters read exact counts on a machine without a hardware PMU; and pmc count --emulate, the
// whole command's count.
//
// What it runs: QEMU_BINARY -E LD_PRELOAD=libpmc-emulate-preload.so[:...] -cpu MODEL -plugin libpmc-qemu-plugin.so
// COMMAND, with address randomization off (personality ADDR_NO_RANDOMIZE) and QEMU's allocator pinned (GLIBC_TUNABLES for
// QEMU alone) so that repeated runs match. The preload library
// keeps the dynamically linked programs the command executes under the emulator (QEMU runs them natively). The
// plugin and the preload library are found beside the pmc binary (the build tree), in ../LIBDIR/pmc (an install),
// or in $PMC_EMULATE_LIBDIR.
#include "command_line.hpp"
#include "commands.hpp"
#include "emulate/host_caches.hpp"
#include "emulate/progress_file.hpp"
#include "emulate/model/cache_model.hpp"

#include <pmc/emulated.hpp>
#include <pmc/modelled_events.hpp>
#include <pmc/report.hpp>

#include <fmt/format.h>

#include <elf.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

#ifndef PMC_INSTALL_LIBDIR
#define PMC_INSTALL_LIBDIR "lib"
#endif

namespace pmc_tool {

const char* const emulate_help = R"(usage: pmc emulate [--qemu PATH] [--cpu MODEL] [--keep-aslr]
                   [--cache[=host] [--I1 G] [--D1 G] [--L2 G] [--LL G]
                   [--inclusion cachegrind|strict]]
                   [--branches]
                   [--] COMMAND [ARGS]

Run COMMAND under QEMU user mode with pmc's TCG plugin: an emulated PMU on any machine, a PMU-less
cloud VM included. In COMMAND, pmc::Counter{"instructions:u"} (also "instructions" and
"instructions-minus-irqs:u"), pmc::Group and the profiler (PMC_PROFILE_COUNTERS=instructions:u)
read exact counts: emulated (QEMU TCG), the instructions the emulator executed for each thread, not
a real core's. The program is not rebuilt; run directly it uses the hardware PMU as before. With
--cache, perf's generic cache events read the modelled caches, with --branches branch-instructions
and branch-misses read the thread's branches (below). Other perf events cannot be
opened under the emulator (QEMU implements no perf_event_open) and say so; wall-time and tsc work.

So that repeated runs count the same: the program's memory lies at the same addresses in every run:
pmc turns address randomization off for QEMU and for any native child (as setarch -R), and gives
QEMU alone GLIBC_TUNABLES that keep its own allocations out of the program's way (QEMU 10 lets the
kernel place the program's memory beside its own; the program gets the caller's GLIBC_TUNABLES, or
none); library symbols are bound at startup (LD_BIND_NOW=1, unless set: with lazy binding the thread
that first calls a library function pays for resolving it, a different thread in each run); the
environment gets PMC_EMULATE_PAD, sized so that the program's stack starts at the same page offset
whatever its path's length and the environment's size. The dynamically linked programs COMMAND
executes run emulated too (their libraries' constructors run once natively first); statically
linked ones, and those started without pmc's LD_PRELOAD (env -i), run natively, and pmc names them
at the end. Emulation costs about 2.6-11x the native CPU time (20-30x for many short processes:
QEMU starts for each; the figures: docs/emulated-pmu.md, installed as
share/doc/pmc/emulated-pmu.md).

x86-64 QEMU before 9.1 (Debian 12's 7.2) starts signal handlers 8 bytes off the stack alignment
the ABI promises, where a handler keeping an SSE value faults (ctest's libuv one): pmc's preload
library realigns the handlers programs install through the C library. A SIGSEGV under such a QEMU
is explained, with the fix (a QEMU 9.1 or later: scripts/build-qemu).

Options:
  --qemu PATH   The QEMU user-mode binary (default: qemu-x86_64 or qemu-aarch64, this machine's
                architecture, from PATH; $PMC_QEMU also sets it). It must load TCG plugins, QEMU 6.0
                or later: Debian 12's dynamic qemu-user package does, a static one does not. When the
                default is missing or static, pmc takes the newest QEMU that scripts/build-qemu built
                (~/.cache/pmc-qemu-build, or $PMC_QEMU_BUILD_CACHE).
  --cpu MODEL   The CPU the program sees (QEMU's -cpu: a model that 'qemu-x86_64 -cpu help' lists,
                optionally followed by ,+FEATURE or ,-FEATURE). The default, on every QEMU version:
                Haswell-noTSX,-pcid,-x2apic,-tsc-deadline,-invpcid, the Haswell Valgrind shows
                every AVX2 host (family 6 model 0x3c: AVX2, ERMS, no TSX), so that the C library
                picks the string routines it picks under Cachegrind and on today's AVX2 machines
                (QEMU's own defaults differ: 7.2's qemu64 has no AVX, 10.0's has ERMS). $QEMU_CPU,
                when set, replaces the default; --cpu replaces both. The programs COMMAND starts
                get the same model; profiles and pmc doctor name it. Other guests (qemu-aarch64)
                keep QEMU's default unless --cpu or QEMU_CPU names one. A model QEMU does not know
                is refused before COMMAND runs (status 1).
  --keep-aslr   Leave address randomization on for QEMU's own process and native children (QEMU
                7.2 still lays the program out the same way every run; QEMU 10 then places its
                stack, libraries and mmap area at random).
  --cache       Model the caches too (Cachegrind's model: I1, D1 and LL, LRU, write-allocate; each
                thread caches of its own) and print the command's totals at its end (pmc count
                --emulate --cache counts them as events). In COMMAND, pmc::Counter, pmc::Group
                and the profiler then open L1-dcache-loads, L1-dcache-load-misses,
                L1-dcache-stores, L1-dcache-store-misses, L1-icache-load-misses, LLC-loads,
                LLC-load-misses, LLC-stores, LLC-store-misses, cache-references and cache-misses
                (:u or none): the thread's modelled counts, exact at each read, marked modelled.
                Costs a call per memory access; without it none is registered, and those events
                are refused naming --cache.
  --cache=host  As --cache, with this machine's caches (sysfs, else CPUID, where Cachegrind reads
                CPUID alone; a set count that is not a power of two rounded as Cachegrind does; an
                L2 when a level lies above it): pmc prints the geometry it read at the start.
  --I1 G, --D1 G, --L2 G, --LL G
                A cache's geometry G = SIZE,ASSOC,LINE in bytes, as Valgrind's options (default
                32768,8,64 for I1 and D1, 8388608,16,64 for LL, and no L2: the geometry Gungraun
                and CodSpeed pin Cachegrind to; never the host's unless --cache=host, whose
                levels these replace). --L2 adds a level between the L1s and the LL (not in
                Cachegrind): LLC-loads and LLC-stores then count the L2's misses. The set count
                must be a power of two; an L2 must be larger than the L1s and smaller than the
                LL. A geometry the model cannot run is a usage error (status 1).
  --inclusion cachegrind|strict
                With --cache: how the levels hold each other's lines. cachegrind (the default,
                Cachegrind's): every line an L1 takes goes into the LL too, but a line the LL
                evicts stays in the L1s. strict (an inclusive LL that back-invalidates): a line
                the LL (or the L2) evicts leaves the levels above it too, so a line the program
                keeps hitting in the D1 is lost when the rest of its LL set streams past. The
                geometry then reads "..., strict inclusion"; each level's lines must be at least
                as long as those above it.
  --branches    Count each thread's branch instructions and run a branch predictor for it
                (Cachegrind's: 16384 2-bit counters indexed by 7 bits of global history and 7 of
                the address, a 512-entry indirect target table, returns never miss), and print the
                command's totals at its end. In COMMAND, pmc::Counter, pmc::Group and the profiler
                then open branch-instructions (or branches; exact: every branch executed,
                conditional or not, jumps, calls, returns) and branch-misses (modelled: the
                predictor's misses on conditional and indirect branches), :u or none. Costs a
                call per executed block; without it those events are refused naming --branches.
  -h, --help    Show this help.

Environment: PMC_QEMU (the QEMU binary), QEMU_CPU (the CPU model, where --cpu is not given),
PMC_EMULATE_LIBDIR (the directory that holds the plugin and its preload library: only there, when
set).
Signals: COMMAND (QEMU) runs in a process group of its own. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent
to pmc or to its process group (kill, timeout(1), a CI runner's cancel) reach COMMAND's processes
once, passed on by pmc; at a terminal, COMMAND has it (Ctrl-C, Ctrl-Z, reads) as a shell's job
does. pmc ends of COMMAND's SIGINT or SIGQUIT as COMMAND did. When COMMAND ends, or pmc is killed
(kill -9 too), no process COMMAND started runs on (one that calls setsid escapes), and pmc's
temporary directory ($TMPDIR/pmc-emulate-*) goes too. QEMU calls no plugin exit callback when a
signal ends a process (QEMU 8.0 and later: except a core-dumping one, such as SIGQUIT): with
--cache or --branches pmc then says which totals lack it (pmc count --emulate counts its
instructions up to its last system call, marked partial).
Exit status: COMMAND's (128 + N if signal N ended it); 127 if COMMAND cannot be found, 126 if it is
not a program QEMU can run (a #! script runs its interpreter under the emulator) or --qemu names a
QEMU for another architecture; 1 if QEMU or the plugin is missing or cannot load (pmc says what to
install), and 1 instead of COMMAND's 0 when the --cache or --branches totals are partial (a process
never reached its exit, or its report line could not be written: said).
)";

namespace {

/// This machine's architecture as QEMU names its user-mode binary.
const char* host_qemu_name() {
#if defined(__x86_64__)
    return "qemu-x86_64";
#elif defined(__aarch64__)
    return "qemu-aarch64";
#else
    return nullptr;
#endif
}

/// `name` found on PATH (or as given, if it has a slash), or "".
std::string find_on_path(const std::string& name) {
    auto executable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
    };
    if (name.find('/') != std::string::npos) return executable(name) ? name : "";
    const char* path = ::getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const std::string p = (dir.empty() ? "." : dir) + "/" + name;
        if (executable(p)) return p;
    }
    return "";
}

std::string real_path(const std::string& path) {
    char buffer[PATH_MAX];
    return ::realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

std::string directory_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// What the ELF file at `path` says about itself: whether it is a 64-bit ELF of this machine's type, whether it
/// names a program interpreter (dynamically linked), and whether its dynamic symbols include `symbol`.
struct ElfFacts {
    bool elf = false, dynamic = false, exports = false;
    bool exports_second = false; ///< and `second_symbol`
    std::string version;         ///< QEMU's version, if asked and found ("7.2.22")
    std::string qemu_target;     ///< the guest QEMU emulates, from the same text ("x86_64", "aarch64"), or ""
};
ElfFacts elf_facts(const std::string& path, const char* symbol = nullptr, const char* second_symbol = nullptr,
                   bool qemu_version = false) {
    ElfFacts f;
    std::vector<char> bytes;
    if (FILE* in = std::fopen(path.c_str(), "rb")) { // (one read: QEMU is megabytes, read at every start)
        struct stat st {};
        if (::fstat(::fileno(in), &st) == 0 && st.st_size > 0) {
            bytes.resize(static_cast<std::size_t>(st.st_size));
            bytes.resize(std::fread(bytes.data(), 1, bytes.size(), in));
        }
        std::fclose(in);
    }
    if (bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0 ||
        bytes[EI_CLASS] != ELFCLASS64)
        return f;
    f.elf = true;
    if (qemu_version) { // (QEMU's --version text is one literal in its binary: "qemu-x86_64 version 7.2.22")
        const std::string_view qemu = "qemu-", version = " version ";
        auto guest_char = [](char c) {
            const auto u = static_cast<unsigned char>(c);
            return std::islower(u) || std::isdigit(u) || c == '_';
        };
        for (auto at = bytes.begin(); f.version.empty();) {
            at = std::search(at, bytes.end(), qemu.begin(), qemu.end());
            if (at == bytes.end()) break;
            at += static_cast<std::ptrdiff_t>(qemu.size());
            auto end = std::find_if_not(at, bytes.end(), guest_char);
            if (end == at || bytes.end() - end < static_cast<std::ptrdiff_t>(version.size()) ||
                !std::equal(version.begin(), version.end(), end))
                continue;
            for (auto c = end + static_cast<std::ptrdiff_t>(version.size());
                 c != bytes.end() && (std::isdigit(static_cast<unsigned char>(*c)) || *c == '.'); ++c)
                f.version += *c;
            if (!f.version.empty()) f.qemu_target.assign(at, end);
        }
    }
    Elf64_Ehdr eh;
    std::memcpy(&eh, bytes.data(), sizeof eh);
    auto in_file = [&](std::uint64_t off, std::uint64_t len) { return off <= bytes.size() && len <= bytes.size() - off; };
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        const std::uint64_t off = eh.e_phoff + std::uint64_t{i} * eh.e_phentsize;
        if (!in_file(off, sizeof(Elf64_Phdr))) break;
        Elf64_Phdr ph;
        std::memcpy(&ph, bytes.data() + off, sizeof ph);
        if (ph.p_type == PT_INTERP) f.dynamic = true;
    }
    if (!symbol) return f;
    std::vector<Elf64_Shdr> sections;
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
        const std::uint64_t off = eh.e_shoff + std::uint64_t{i} * eh.e_shentsize;
        if (!in_file(off, sizeof(Elf64_Shdr))) return f;
        Elf64_Shdr sh;
        std::memcpy(&sh, bytes.data() + off, sizeof sh);
        sections.push_back(sh);
    }
    for (const auto& sh : sections) {
        if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= sections.size() || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
        const Elf64_Shdr& strings = sections[sh.sh_link];
        if (!in_file(sh.sh_offset, sh.sh_size) || !in_file(strings.sh_offset, strings.sh_size)) continue;
        for (std::uint64_t at = 0; at + sizeof(Elf64_Sym) <= sh.sh_size; at += sizeof(Elf64_Sym)) {
            Elf64_Sym sym;
            std::memcpy(&sym, bytes.data() + sh.sh_offset + at, sizeof sym);
            if (sym.st_name >= strings.sh_size || sym.st_shndx == SHN_UNDEF) continue;
            const char* name = bytes.data() + strings.sh_offset + sym.st_name;
            if (std::strncmp(name, symbol, strings.sh_size - sym.st_name) == 0) f.exports = true;
            if (second_symbol && std::strncmp(name, second_symbol, strings.sh_size - sym.st_name) == 0)
                f.exports_second = true;
            if (f.exports && (f.exports_second || !second_symbol)) return f;
        }
    }
    return f;
}

/// The newest `name` that scripts/build-qemu left in its cache ($PMC_QEMU_BUILD_CACHE, else
/// ~/.cache/pmc-qemu-build, as the script takes it), or "".
std::string built_qemu(const char* name) {
    std::string cache;
    if (const char* c = ::getenv("PMC_QEMU_BUILD_CACHE"); c && *c) cache = c;
    else if (const char* x = ::getenv("XDG_CACHE_HOME"); x && *x) cache = std::string(x) + "/pmc-qemu-build";
    else if (const char* h = ::getenv("HOME"); h && *h) cache = std::string(h) + "/.cache/pmc-qemu-build";
    else return "";
    std::string newest;
    glob_t found{};
    if (::glob((cache + "/qemu-*/bin/" + name).c_str(), 0, nullptr, &found) == 0)
        for (std::size_t i = 0; i < found.gl_pathc; ++i)
            if (::access(found.gl_pathv[i], X_OK) == 0 && ::strverscmp(found.gl_pathv[i], newest.c_str()) > 0)
                newest = found.gl_pathv[i];
    ::globfree(&found);
    return newest;
}

/// QEMU's x86-64 user mode before 9.1 starts signal handlers with the stack 8 bytes off the ABI's 16-byte alignment
/// ("linux-user/i386: Properly align signal frame", merged in May 2024 for 9.1). A version not found counts as
/// misaligning: the preload library's realignment is harmless where the stack is aligned already.
bool misaligns_signal_frames(const std::string& version) {
    unsigned major = 0, minor = 0;
    if (std::sscanf(version.c_str(), "%u.%u", &major, &minor) != 2) return true;
    return major < 9 || (major == 9 && minor < 1);
}

/// Whether `line`, of what QEMU printed for `-cpu MODEL /dev/null`, refuses the model. QEMU 7.2 and 10.0 say, each
/// after "qemu-ARCH: ": "unable to find CPU model 'M'" (no such model), "Property 'M-x86_64-cpu.F' not found" (no
/// such feature, +F or -F), "can't apply global M-x86_64-cpu.F=V: ..." (a value it cannot take) and "-cpu option
/// cannot be empty". Anything else is no refusal: the TCG warnings a good model gets, the load of /dev/null, which
/// always fails ("Error while loading /dev/null: Exec format error", or "Permission denied"), a dynamic loader's
/// complaint about LD_PRELOAD.
bool refuses_cpu_model(const std::string& line) {
    return line.find("unable to find CPU model") != std::string::npos ||
           line.find("can't apply global") != std::string::npos ||
           (line.find("Property '") != std::string::npos && line.find("' not found") != std::string::npos) ||
           line.find("-cpu option cannot be empty") != std::string::npos;
}

/// What QEMU says of the CPU model `cpu`: "" when it takes it, else its own words (the lines refuses_cpu_model
/// finds). QEMU builds the CPU before it loads the program, so /dev/null, which it cannot load, runs nothing (about
/// 6 ms). A QEMU that cannot be started counts as taking it: the run then says why.
std::string qemu_refuses_cpu(const std::string& qemu, const std::string& cpu) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return "";
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return "";
    }
    if (pid == 0) {
        ::dup2(fds[1], STDERR_FILENO);
        if (const int null = ::open("/dev/null", O_RDWR); null >= 0) ::dup2(null, STDIN_FILENO), ::dup2(null, STDOUT_FILENO);
        const char* argv[] = {qemu.c_str(), "-cpu", cpu.c_str(), "/dev/null", nullptr};
        ::execv(qemu.c_str(), const_cast<char* const*>(argv));
        _exit(127);
    }
    ::close(fds[1]);
    std::string said;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) != 0;) {
        if (n > 0) said.append(buffer, static_cast<std::size_t>(n));
        else if (errno != EINTR) break;
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    std::string refused;
    std::istringstream lines(said);
    for (std::string line; std::getline(lines, line);)
        if (refuses_cpu_model(line)) refused += (refused.empty() ? "" : "; ") + line;
    return refused;
}

/// The guest's CPU model for `e`: --cpu's (`option`), else $QEMU_CPU, else pmc's default on x86-64; checked with
/// QEMU before anything runs. A model the user named and QEMU refuses is an error; pmc's default refused (a QEMU
/// without it) leaves QEMU's own, with a warning.
std::string choose_cpu(Emulator& e, const std::string& option) {
    const char* env = ::getenv("QEMU_CPU");
    const bool x86_64_guest = e.target.empty() ? PMC_ARCH_X86_64 : e.target == "x86_64";
    if (!option.empty()) e.cpu = option, e.cpu_origin = "--cpu";
    else if (env && *env) e.cpu = env, e.cpu_origin = "QEMU_CPU";
    else if (x86_64_guest) e.cpu = default_emulated_cpu, e.cpu_origin = "pmc's default";
    else return "";
    const std::string refused = qemu_refuses_cpu(e.qemu, e.cpu);
    if (refused.empty()) return "";
    const std::string qemu = "QEMU " + (e.version.empty() ? std::string("(version unknown)") : e.version) + " (" +
                             e.qemu + ")";
    const std::string help = "'" + e.qemu + " -cpu help'";
    if (e.cpu_origin == "pmc's default") {
        e.cpu_warning = qemu + " does not know pmc's default CPU model " + e.cpu + " (" + refused +
                        "): the program runs on QEMU's own default model, whose CPUID differs, and with it the C "
                        "library's string routines and so the counts.\nFix: a QEMU 6.0 or later with the Haswell "
                        "models, or --cpu MODEL with a model " + help + " lists.";
        e.cpu.clear();
        e.cpu_origin.clear();
        return "";
    }
    const bool from_env = e.cpu_origin == "QEMU_CPU";
    return (from_env ? "QEMU_CPU=" + e.cpu + " (in the environment)" : "--cpu=" + e.cpu) + ": " + qemu +
           " refuses this CPU model: " + refused + "\nFix: a model that " + help +
           " lists (MODEL, or MODEL,+FEATURE,-FEATURE), or " + (from_env ? "unset QEMU_CPU" : "no --cpu") +
           (x86_64_guest ? std::string(" for pmc's default, ") + default_emulated_cpu : std::string(" for QEMU's default")) +
           ".";
}

/// QEMU 8.1 and later reserve no room for the program's break (pmc/detail/emulated.hpp, guest_base).
bool loads_without_break_room(const std::string& version) {
    unsigned major = 0, minor = 0;
    if (std::sscanf(version.c_str(), "%u.%u", &major, &minor) != 2) return false;
    return major > 8 || (major == 8 && minor >= 1);
}

} // namespace

// The Haswell Valgrind presents on every AVX2 host (family 6 model 0x3c, AVX2, ERMS, no HLE or RTM), on every QEMU
// alike: glibc picks its string routines from CPUID, so this is what makes counts match Cachegrind's, and the ones
// users' AVX2 machines run. TSX is out (QEMU's TCG has none, and says so); so are PCID, x2APIC, TSC-deadline and
// INVPCID, which QEMU 7.2's TCG lacks (a warning each) and 10.0's has: both then present one CPUID, the one whose
// ld.so --list-diagnostics shows Valgrind's preferred-routine flags (docs/emulated-pmu.md, "CPUID").
const char* const default_emulated_cpu = "Haswell-noTSX,-pcid,-x2apic,-tsc-deadline,-invpcid";

pmc::Result<Emulator> find_emulator(const std::string& qemu_option, const std::string& cpu_option) {
    const char* name = host_qemu_name();
    if (!name) return pmc::make_failure(ENOTSUP, "pmc emulate runs x86-64 and AArch64 programs; this pmc was built for "
                                                 "another architecture");
    std::string wanted = qemu_option;
    if (wanted.empty())
        if (const char* env = ::getenv("PMC_QEMU"); env && *env) wanted = env;
    Emulator e;
    e.qemu = find_on_path(wanted.empty() ? name : wanted);
    // QEMU 9.0 and later take plugin API 2 (and refuse 1); they alone have scoreboards.
    auto facts = [](const std::string& qemu) {
        return elf_facts(qemu, "qemu_plugin_register_vcpu_tb_trans_cb", "qemu_plugin_scoreboard_new", true);
    };
    ElfFacts qemu;
    if (!e.qemu.empty()) qemu = facts(e.qemu = real_path(e.qemu));
    // Not asked for one, and the one on PATH is missing or loads no plugin (a static qemu-user): a QEMU that
    // scripts/build-qemu built, from its cache.
    if (wanted.empty() && !qemu.exports)
        if (std::string built = built_qemu(name); !built.empty()) qemu = facts(e.qemu = real_path(built));
    const std::string install = std::string("pmc emulate needs a QEMU user mode that loads TCG plugins: QEMU 6.0 or "
                                            "later, dynamically linked (Debian 12's and Ubuntu's qemu-user package; a "
                                            "static qemu-user, as Debian 13's, loads none).\nFix: sudo apt-get install "
                                            "qemu-user where it is the dynamic one, or build one from the distribution's "
                                            "own source with pmc's scripts/build-qemu (about a minute; pmc emulate "
                                            "then finds it in the script's cache, ~/.cache/pmc-qemu-build, or give it "
                                            "with --qemu PATH or PMC_QEMU).");
    if (e.qemu.empty())
        return pmc::make_failure(ENOENT, "cannot emulate: " + (wanted.empty() ? std::string(name) + " is not on PATH"
                                                                               : "no executable '" + wanted + "'") +
                                             ".\n" + install);
    const char* plugin_name = qemu.exports_second ? "libpmc-qemu-plugin-v2.so" : "libpmc-qemu-plugin.so";
    e.version = qemu.version;
    e.target = qemu.qemu_target;
    if (e.target.empty()) { // no version text: the file's name, as QEMU installs it ("qemu-aarch64", "-static")
        const std::string base = e.qemu.substr(e.qemu.rfind('/') + 1);
        if (base.rfind("qemu-", 0) == 0) e.target = base.substr(5, base.find('-', 5) - 5);
    }
    e.misaligns_signal_frames = PMC_ARCH_X86_64 && misaligns_signal_frames(e.version);
    e.offsets_guest = loads_without_break_room(e.version);
    if (!qemu.exports)
        return pmc::make_failure(ENOTSUP, "cannot emulate: " + e.qemu + " cannot load TCG plugins (" +
                                              (!qemu.elf     ? std::string("it is not a 64-bit ELF program")
                                               : !qemu.dynamic ? std::string("it is statically linked")
                                                               : std::string("it exports no plugin API")) +
                                              ").\n" + install);
    std::vector<std::string> dirs;
    const char* libdir = ::getenv("PMC_EMULATE_LIBDIR");
    if (libdir && *libdir) { // asked for: that directory only (a plugin found elsewhere would be another one)
        dirs.emplace_back(libdir);
    } else {
        const std::string self = directory_of(real_path("/proc/self/exe"));
        dirs.push_back(self);
        dirs.push_back(self + "/../" PMC_INSTALL_LIBDIR "/pmc");
    }
    for (const auto& dir : dirs) {
        const std::string plugin = dir + "/" + plugin_name, preload = dir + "/libpmc-emulate-preload.so";
        if (::access(plugin.c_str(), R_OK) == 0 && ::access(preload.c_str(), R_OK) == 0) {
            e.plugin = real_path(plugin);
            e.preload = real_path(preload);
            break;
        }
    }
    if (e.plugin.empty()) {
        std::string looked;
        for (const auto& d : dirs) looked += "\n  " + d;
        return pmc::make_failure(ENOENT, "cannot emulate: pmc's plugin (" + std::string(plugin_name) + ", for " +
                                         (qemu.exports_second ? "QEMU 9.0 and later" : "QEMU 6.0 to 8.2") +
                                         ", with libpmc-emulate-preload.so) is in none of:" + looked +
                                         "\nFix: build or install pmc with its tools (they are built beside the pmc "
                                         "binary), or point PMC_EMULATE_LIBDIR at their directory" +
                                         std::string(libdir && *libdir ? " (it names one without them)" : "") + ".");
    }
    // Its version (read from its binary above), for the profiles recorded under it: pmc diff then tells runs of
    // two emulators apart.
    e.description = "QEMU " + (e.version.empty() ? std::string("version unknown") : e.version) + ", plugin API " + (qemu.exports_second ? "2" : "1");
    if (std::string why = choose_cpu(e, cpu_option); !why.empty()) return pmc::make_failure(EINVAL, why);
    if (!e.cpu.empty()) e.description += ", -cpu " + e.cpu; // (the CPUID the program sees: pmc diff tells them apart)
    if (e.plugin.find(',') != std::string::npos)
        return pmc::make_failure(EINVAL, "cannot emulate: the plugin's path has a comma, which QEMU's -plugin option "
                                         "takes as a separator: " + e.plugin + "\nFix: install pmc elsewhere.");
    return e;
}

namespace {

/// What QEMU is to load for `command`: QEMU's user mode loads ELF programs only (a script makes it exit 1 without a
/// word), so a "#!" script becomes its interpreter (with the line's one optional argument) and the script, as the
/// kernel does it. An ELF program for another machine is refused, and anything else, with the reason.
pmc::Result<std::vector<std::string>> program_to_load(std::vector<std::string> command) {
    for (int depth = 0; depth < 4; ++depth) {
        const std::string program = find_on_path(command[0]);
        if (program.empty()) {
            struct stat st {};
            if (command[0].find('/') != std::string::npos && ::stat(command[0].c_str(), &st) == 0)
                return pmc::make_failure(ENOEXEC, "cannot run '" + command[0] + "': " +
                                                      (S_ISDIR(st.st_mode) ? "it is a directory"
                                                                           : "permission denied (it is not executable)"));
            return pmc::make_failure(ENOENT, "cannot run '" + command[0] + "': " +
                                                 (command[0].find('/') != std::string::npos ? "no such file"
                                                                                             : "not found on PATH"));
        }
        std::ifstream in(program, std::ios::binary);
        char head[256] = {};
        in.read(head, sizeof head);
        const std::size_t got = static_cast<std::size_t>(in.gcount());
        if (got >= 2 && head[0] == '#' && head[1] == '!') {
            std::string line(head + 2, got - 2);
            line = line.substr(0, line.find('\n'));
            const auto start = line.find_first_not_of(" \t");
            if (start == std::string::npos)
                return pmc::make_failure(ENOEXEC, "cannot run '" + program + "': its #! line names no interpreter");
            line = line.substr(start);
            const auto space = line.find_first_of(" \t");
            std::vector<std::string> next = {line.substr(0, space)};
            if (space != std::string::npos) {
                std::string arg = line.substr(space);
                arg.erase(0, arg.find_first_not_of(" \t"));
                while (!arg.empty() && (arg.back() == ' ' || arg.back() == '\t' || arg.back() == '\r')) arg.pop_back();
                if (!arg.empty()) next.push_back(arg);
            }
            next.push_back(program);
            next.insert(next.end(), command.begin() + 1, command.end());
            command = std::move(next);
            continue;
        }
        const bool elf = got >= 20 && std::memcmp(head, ELFMAG, SELFMAG) == 0;
        if (!elf)
            return pmc::make_failure(ENOEXEC, "cannot run '" + program + "' under the emulator: it is neither an ELF "
                                              "program nor a #! script");
        std::uint16_t machine = 0;
        std::memcpy(&machine, head + 18, 2);
        const std::uint16_t ours = PMC_ARCH_AARCH64 ? EM_AARCH64 : EM_X86_64;
        if (machine != ours || head[EI_CLASS] != ELFCLASS64)
            return pmc::make_failure(ENOEXEC, "cannot run '" + program + "' under pmc emulate: it is not a 64-bit " +
                                              (PMC_ARCH_AARCH64 ? "AArch64" : "x86-64") +
                                              " program, and pmc emulate runs this machine's own architecture");
        command[0] = program;
        return command;
    }
    return pmc::make_failure(ELOOP, "cannot run '" + command[0] + "': #! scripts nested too deeply");
}

/// QEMU's own allocator pinned (pmc/detail/emulated.hpp, qemu_tunables), so that the program's memory is laid out
/// the same way in every run: QEMU's environment `env` gets GLIBC_TUNABLES with pmc's settings after the caller's,
/// and `args` gives the program the caller's value back (-E) or none (-U). A caller's value with a comma, which -E
/// would split, is left as it is, unpinned.
void pin_qemu_allocator(std::vector<std::string>& env, std::vector<std::string>& args) {
    namespace em = pmc::detail::emulated;
    const std::string name = std::string(em::tunables_variable) + "=";
    auto callers = std::find_if(env.begin(), env.end(), [&](const std::string& s) { return s.rfind(name, 0) == 0; });
    if (callers == env.end()) {
        env.push_back(name + em::qemu_tunables);
        args.insert(args.end(), {"-U", em::tunables_variable});
        return;
    }
    if (callers->find(',') != std::string::npos) return;
    args.insert(args.end(), {"-E", *callers});
    *callers += (callers->size() > name.size() ? ":" : "") + std::string(em::qemu_tunables);
}

/// PMC_EMULATE_PLUGIN's value is a whole number of these bytes (start_emulated's filler argument, which the plugin
/// ignores).
constexpr std::size_t plugin_text_period = 1024;

} // namespace

pmc::Result<pid_t> start_emulated(Job& job, const Emulator& e, const std::vector<std::string>& original,
                                  bool keep_aslr, const std::string& plugin_args) {
    if (original.empty()) return pmc::make_failure(EINVAL, "no command to run");
    auto loaded = program_to_load(original);
    if (!loaded) return loaded.failure();
    const std::vector<std::string>& command = *loaded;
    const std::string& program = command[0];
    // (program_to_load took only this machine's programs: a QEMU for another guest would refuse it, status 255.)
    if (const std::string ours = std::string(host_qemu_name()).substr(5); !e.target.empty() && e.target != ours)
        return pmc::make_failure(ENOEXEC, "cannot run '" + program + "', " +
                                              (PMC_ARCH_AARCH64 ? "an AArch64" : "an x86-64") + " program, under " +
                                              e.qemu + ", which emulates " + e.target +
                                              " programs.\nFix: give --qemu (or PMC_QEMU) a qemu-" + ours +
                                              ", or neither: pmc emulate then takes qemu-" + ours + " from PATH");
    // The plugin's path and arguments, filled up to one length whatever the models and their geometry: the program
    // sees them in PMC_EMULATE_PLUGIN, and one that reads each variable (Python's os.environ, Perl's %ENV) would
    // otherwise do other work under --cache, --branches or another geometry (strlen of a variable follows its length).
    std::string plugin = e.plugin + plugin_args;
    const std::size_t filled = plugin.size() + sizeof(",pad=") - 1;
    plugin += ",pad=" + std::string((plugin_text_period - filled % plugin_text_period) % plugin_text_period, '.');
    // QEMU gets the environment without LD_PRELOAD; the command gets it back, with the preload library first.
    std::vector<std::string> env;
    std::string preload = e.preload;
    for (char** v = environ; v && *v; ++v) {
        const std::string_view s = *v;
        if (s.rfind("LD_PRELOAD=", 0) == 0) {
            if (s.size() > 11) preload += ":" + std::string(s.substr(11));
            continue;
        }
        if (s.rfind("PMC_EMULATE_", 0) == 0 || s.rfind("PMC_EMULATED=", 0) == 0) continue;
        env.emplace_back(s);
    }
    // Symbols bound at startup: with lazy binding, the first call of each library function resolves it, and which
    // thread makes that call (and pays ~1,500 instructions for it) changes from run to run.
    const bool bind_now_set = ::getenv("LD_BIND_NOW") != nullptr;
    env.push_back("PMC_EMULATE_QEMU=" + e.qemu);
    env.push_back("PMC_EMULATE_PLUGIN=" + plugin);
    env.push_back("PMC_EMULATE_PRELOAD=" + e.preload);
    if (!e.cpu.empty()) env.push_back("PMC_EMULATE_CPU=" + e.cpu); // (the preload gives the programs it starts the same)
    env.push_back(std::string(pmc::detail::emulated::announce_variable) + "=1"); // the program may ask the plugin
    if (e.misaligns_signal_frames) env.push_back("PMC_EMULATE_REALIGN_SIGNALS=1"); // (tools/emulate/stay_emulated.cpp)
    env.push_back(std::string(pmc::detail::emulated::emulator_variable) + "=" + e.description);
    if (e.offsets_guest) // (for the preload library's re-executions)
        env.push_back(std::string(pmc::detail::emulated::guest_base_variable) + "=" + pmc::detail::emulated::guest_base);
    const std::string argv0 = command.size() == original.size() ? original[0] : command[0];
    std::vector<std::string> args = {e.qemu, "-0", argv0, "-E", "LD_PRELOAD=" + preload};
    if (!e.cpu.empty()) args.insert(args.end(), {"-cpu", e.cpu}); // (over QEMU_CPU, which QEMU would read itself)
    if (!bind_now_set) args.insert(args.end(), {"-E", "LD_BIND_NOW=1"});
    // The program's initial stack at one page offset whatever its path and environment (pmc/detail/emulated.hpp):
    // QEMU copies the program's real path, argv and the environment (its own, with -E's) onto it.
    namespace em = pmc::detail::emulated;
    std::size_t used = real_path(program).size() + 1 + argv0.size() + 1 + 8 * command.size();
    for (std::size_t i = 1; i < command.size(); ++i) used += command[i].size() + 1;
    for (const auto& s : env) used += s.size() + 1 + 8;
    used += preload.size() + sizeof("LD_PRELOAD=") + 8;
    if (!bind_now_set) used += sizeof("LD_BIND_NOW=1") + 8;
    args.insert(args.end(), {"-E", std::string(em::pad_variable) + "=" + std::string(em::pad_value_length(used), '.')});
    pin_qemu_allocator(env, args); // (after the pad: the program sees the caller's GLIBC_TUNABLES, or none)
    if (e.offsets_guest) args.insert(args.end(), {"-B", em::guest_base}); // room for the program's break
    args.insert(args.end(), {"-plugin", plugin, program});
    args.insert(args.end(), command.begin() + 1, command.end());
    std::vector<char*> a, v;
    for (auto& s : args) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : env) v.push_back(s.data());
    v.push_back(nullptr);
    // QEMU runs as a job of pmc's (job.hpp): a process group of its own with a watchdog, signals passed on once.
    return job.start([&] {
        if (!keep_aslr) ::personality(ADDR_NO_RANDOMIZE | static_cast<unsigned long>(::personality(0xffffffff)));
        ::execve(e.qemu.c_str(), a.data(), v.data());
        std::fprintf(stderr, "pmc emulate: cannot run %s: %s\n", e.qemu.c_str(), std::strerror(errno));
        _exit(127);
    });
}

int finish_emulated(Job& job, const std::string& shown, int& raw_status, const std::string& who) {
    raw_status = 0;
    const bool waited = job.wait(raw_status);
    const int wait_errno = errno;
    // pmc's own dispositions and the terminal again (a signal from now on is pmc's), and no process of the
    // command left running.
    if (const std::string note = leftover_note(job.finish()); !note.empty()) fmt::print(stderr, "{}: {}\n", who, note);
    if (!waited) {
        fmt::print(stderr, "{}: cannot wait for '{}': {}\n", who, shown, std::strerror(wait_errno));
        return 1;
    }
    if (WIFEXITED(raw_status)) return WEXITSTATUS(raw_status);
    const int sig = WTERMSIG(raw_status);
    if (sig == SIGILL) fmt::print(stderr, "{}: {}\n", who, sigill_explanation("'" + shown + "'"));
    return 128 + sig;
}

std::string sigill_explanation(const std::string& program) {
    return program + " died of SIGILL under the emulator: it executed an illegal instruction. If it runs natively, "
           "that is one QEMU's TCG cannot emulate, most likely AVX-512 (code built with -march=native on a CPU that "
           "has it, or a library that chose AVX-512 code itself): QEMU's TCG (7.2 to 10) emulates x86-64 up to "
           "AVX2. (If it dies natively too, it is illegal anywhere, as the ud2 of __builtin_trap() is.)\nFix: build "
           "it for the emulator "
           "with -march=x86-64-v3 (or without -march=native) to count it under pmc emulate.";
}

std::string signal_frame_explanation(const Emulator& e, const std::string& program) {
    if (!e.misaligns_signal_frames) return "";
    return program + " died of SIGSEGV under QEMU " + (e.version.empty() ? std::string("(version unknown)") : e.version) +
           ". If it runs natively, the likely cause is a signal handler: QEMU's x86-64 user mode before 9.1 starts "
           "handlers with the stack 8 bytes off the ABI's 16-byte alignment, and a handler that keeps an SSE value on "
           "its stack (libuv's SIGCHLD handler in ctest, code built with SSE) faults there. pmc's preload "
           "library realigns the handlers a dynamically linked program installs through the C library (sigaction, "
           "signal, sigset, ...), not those installed by a raw rt_sigaction system call, nor any in a statically "
           "linked program.\nFix: a QEMU that aligns signal frames, 9.1 or later: scripts/build-qemu builds QEMU 10 "
           "from Debian's source (about a minute), which pmc emulate then takes with --qemu PATH or PMC_QEMU=PATH; "
           "or __attribute__((force_align_arg_pointer)) on the program's handler.";
}

namespace {
/// How a child is named in an explanation: its program, pid, and that the command started it.
std::string child_text(long pid, const std::string& program) {
    return program + " (pid " + std::to_string(pid) + ", a process the command started)";
}
} // namespace

void explain_child_sigills(const EmulatedReport& r, pid_t command_pid, const std::string& who) {
    for (const auto& [pid, program] : r.sigill)
        if (pid != command_pid) fmt::print(stderr, "{}: {}\n", who, sigill_explanation(child_text(pid, program)));
}

void explain_child_segfaults(const EmulatedReport& r, pid_t command_pid, const Emulator& e, const std::string& who) {
    for (const auto& [pid, program] : r.sigsegv)
        if (pid != command_pid && e.misaligns_signal_frames)
            fmt::print(stderr, "{}: {}\n", who, signal_frame_explanation(e, child_text(pid, program)));
}

EmulatedReportFile::EmulatedReportFile() {
    const char* tmp = ::getenv("TMPDIR");
    std::string dir_template = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/pmc-emulate-XXXXXX";
    const std::string shown = dir_template; // (mkdtemp writes its try into the template, even when it fails)
    if (const char* d = ::mkdtemp(dir_template.data())) {
        dir = d;
        path = dir + "/processes";
    } else {
        const int error = errno;
        failure = fmt::format("cannot make a temporary directory {} for the plugin's report, progress and sample "
                              "files: {}", shown, std::strerror(error));
        fix = std::string("Fix: set TMPDIR to a directory this user can write") +
              (tmp && *tmp == '/' ? "" : " (TMPDIR is unset or not absolute: /tmp was used)");
    }
}
void EmulatedReportFile::remove() noexcept {
    if (!dir.empty()) remove_run_directory(dir.c_str()); // the report, progress and sample files, then it
    dir.clear();
    path.clear();
}

void add_cache_options(pmc_cli::CommandLine& cl, CacheOptions& o) {
    cl.flag("--cache", o.mode, "pinned");
    cl.option("--I1", o.i1, "a geometry SIZE,ASSOC,LINE").not_empty();
    cl.option("--D1", o.d1, "a geometry SIZE,ASSOC,LINE").not_empty();
    cl.option("--L2", o.l2, "a geometry SIZE,ASSOC,LINE").not_empty();
    cl.option("--LL", o.ll, "a geometry SIZE,ASSOC,LINE").not_empty();
    cl.option("--inclusion", o.inclusion, "cachegrind or strict");
}

std::string choose_cache_model(const CacheOptions& o, CacheModelChoice& out) {
    out = CacheModelChoice{};
    if (!o) {
        if (!(o.i1 + o.d1 + o.l2 + o.ll).empty())
            return "--I1, --D1, --L2 and --LL shape the modelled caches: give --cache with them";
        if (!o.inclusion.empty()) return "--inclusion says how the modelled caches hold each other's lines: give --cache with it";
        return "";
    }
    if (o.mode != "pinned" && o.mode != "host")
        return "--cache=" + o.mode + ": --cache alone models the pinned geometry, --cache=host this machine's caches";
    pmc_model::CacheConfig config; // the pinned geometry (cache_model.hpp)
    if (o.inclusion == "strict") config.inclusion = pmc_model::Inclusion::strict;
    else if (!o.inclusion.empty() && o.inclusion != "cachegrind")
        return "--inclusion=" + o.inclusion + ": cachegrind (the default: a line the LL evicts stays in the L1s) or "
               "strict (a line the LL, or an L2, evicts leaves the levels above it too)";
    if (o.mode == "host") {
        pmc_host_caches::HostCaches host;
        if (std::string why = pmc_host_caches::read_host_caches(host); !why.empty())
            return "--cache=host: cannot read this machine's caches (" + why +
                   ").\nFix: give the geometry with --I1, --D1, --LL (and --L2), or use --cache alone";
        const pmc_model::Inclusion inclusion = config.inclusion; // (--inclusion applies to the host's levels too:
        config = host.config;                                    // this copy once dropped it, silently)
        config.inclusion = inclusion;
        out.host_source = "read from " + host.source + (host.adjustments.empty() ? "" : "; " + host.adjustments);
    }
    const std::pair<const char*, const std::string*> options[] = {{"I1", &o.i1}, {"D1", &o.d1}, {"L2", &o.l2},
                                                                  {"LL", &o.ll}};
    for (const auto& [name, text] : options) {
        if (text->empty()) continue;
        pmc_model::CacheGeometry g;
        if (std::string problem = pmc_model::parse_geometry(*text, g); !problem.empty())
            return std::string("--") + name + "=" + *text + ": " + problem;
        const std::string level = name;
        (level == "I1" ? config.i1 : level == "D1" ? config.d1 : level == "LL" ? config.ll : config.l2.emplace()) = g;
    }
    const auto shape = [](const pmc_model::CacheGeometry& g) { return fmt::format("{},{},{}", g.size, g.assoc, g.line); };
    if (config.l2) {
        // An L2 sits between the L1s and the LL: it must hold more than each L1 and less than the LL, or one of the
        // levels could never miss where the one above it hits.
        const pmc_model::CacheGeometry& l2 = *config.l2;
        if (l2.size >= config.ll.size)
            return "--L2=" + shape(l2) + ": the L2 (" + std::to_string(l2.size) + " bytes) must be smaller than the LL (" +
                   std::to_string(config.ll.size) + " bytes, --LL=" + shape(config.ll) + ")";
        if (l2.size <= std::max(config.i1.size, config.d1.size))
            return "--L2=" + shape(l2) + ": the L2 (" + std::to_string(l2.size) + " bytes) must be larger than I1 (" +
                   std::to_string(config.i1.size) + ") and D1 (" + std::to_string(config.d1.size) + " bytes)";
    }
    // Cachegrind simulates an LL no larger than an L1 (its LL is only asked on an L1 miss), so the model does too.
    // Strict inclusion would then keep back-invalidating the L1s from a smaller level: refused there.
    if (config.inclusion == pmc_model::Inclusion::strict && config.ll.size <= std::max(config.i1.size, config.d1.size))
        return "--LL=" + shape(config.ll) + ": with --inclusion=strict the LL (" + std::to_string(config.ll.size) +
               " bytes) must be larger than I1 (" + std::to_string(config.i1.size) + ") and D1 (" +
               std::to_string(config.d1.size) + " bytes)";
    if (std::string problem = pmc_model::config_problem(config); !problem.empty())
        return (problem.rfind("strict inclusion", 0) == 0 ? "--inclusion=strict: " : "") + problem;
    const bool strict = config.inclusion == pmc_model::Inclusion::strict;
    out.has_l2 = config.l2.has_value();
    out.geometry = "I1 " + shape(config.i1) + ", D1 " + shape(config.d1) +
                   (config.l2 ? ", L2 " + shape(*config.l2) : std::string()) + ", LL " + shape(config.ll) +
                   (strict ? ", strict inclusion" : ""); // as the program's pmc::emulated_pmu() states it
    out.plugin_arguments = fmt::format(",cache=on,i1={}:{}:{},d1={}:{}:{},ll={}:{}:{}", config.i1.size, config.i1.assoc,
                                       config.i1.line, config.d1.size, config.d1.assoc, config.d1.line, config.ll.size,
                                       config.ll.assoc, config.ll.line);
    if (config.l2)
        out.plugin_arguments += fmt::format(",l2={}:{}:{}", config.l2->size, config.l2->assoc, config.l2->line);
    if (strict) out.plugin_arguments += ",inclusion=strict";
    out.note = "modelled: Cachegrind's cache model" + std::string(config.l2 ? " with an L2" : "") + " (" + out.geometry +
               (o.mode == "host" ? ", this machine's caches" : "") +
               "; LRU, write-allocate), a model's figures, not a real core's; each thread has caches of its own";
    return "";
}

std::optional<std::uint64_t> branch_count(const std::string& event, const EmulatedReport& r) {
    const auto colon = event.find(':');
    const std::string name = event.substr(0, colon);
    if (colon != std::string::npos && event.substr(colon) != ":u") return std::nullopt; // user mode only
    if (pmc::is_branch_count_event_name(name)) return r.branches;
    if (pmc::is_modelled_branch_event_name(name)) return r.Bcm + r.Bim;
    return std::nullopt;
}

const char* const branch_model_note =
    "branch-instructions: emulated, every branch executed (conditional or not, jumps, calls, returns); "
    "branch-misses: modelled, Cachegrind's branch predictor (16384 2-bit counters, 7 bits of global history and 7 "
    "of the address; 512-entry indirect target table; returns never miss), each thread's own, not a real core's";

std::optional<std::uint64_t> modelled_cache_count(const std::string& event, const EmulatedReport& r) {
    const auto colon = event.find(':');
    const std::string name = event.substr(0, colon);
    if (colon != std::string::npos && event.substr(colon) != ":u") return std::nullopt; // user mode only
    if (!pmc::is_modelled_cache_event_name(name)) return std::nullopt; // pmc/modelled_events.hpp's list
    // Cachegrind's fields; the LL is asked on every L1 miss, or with an L2 on every L2 miss (LLi, LLr, LLw).
    if (name == "L1-dcache-loads") return r.Dr;
    if (name == "L1-dcache-load-misses") return r.D1mr;
    if (name == "L1-dcache-stores") return r.Dw;
    if (name == "L1-dcache-store-misses") return r.D1mw;
    if (name == "L1-icache-load-misses") return r.I1mr;
    if (name == "LLC-loads") return r.LLr;
    if (name == "LLC-load-misses") return r.DLmr;
    if (name == "LLC-stores") return r.LLw;
    if (name == "LLC-store-misses") return r.DLmw;
    if (name == "cache-references") return r.LLi + r.LLr + r.LLw;
    if (name == "cache-misses") return r.ILmr + r.DLmr + r.DLmw;
    return std::nullopt;
}

EmulatedReport read_emulated_report(const std::string& path) {
    EmulatedReport r;
    std::ifstream in(path);
    // Per pid, in order: an open process image, and a native program its pending execve would start.
    struct Pid {
        bool open = false;
        std::vector<std::string> native;
    };
    std::map<long, Pid> pids;
    for (std::string line; std::getline(in, line);) {
        long pid = 0;
        unsigned long long n = 0;
        int used = 0;
        if (std::sscanf(line.c_str(), "pid %ld %n", &pid, &used) != 1 || used == 0) continue;
        const std::string rest = line.substr(static_cast<std::size_t>(used));
        Pid& p = pids[pid];
        if (rest == "started") {
            ++r.processes;
            if (p.open) ++r.unfinished; // (a pid reused after a process vanished without a word)
            p.open = true;
            p.native.clear();
        } else if (std::sscanf(rest.c_str(), "instructions %llu", &n) == 1) {
            r.instructions += n;
            p.open = false;
        } else if (std::sscanf(rest.c_str(), "exec instructions %llu", &n) == 1) {
            r.instructions += n;
            p.open = false;
            for (auto& native : p.native) r.native.push_back(std::move(native)); // (a previous execve that worked)
            p.native.clear();
        } else if (rest.rfind("cache ", 0) == 0) {
            unsigned long long v[12];
            if (std::sscanf(rest.c_str(), "cache Ir %llu I1mr %llu ILmr %llu Dr %llu D1mr %llu DLmr %llu Dw %llu D1mw "
                                          "%llu DLmw %llu LLi %llu LLr %llu LLw %llu", &v[0], &v[1], &v[2], &v[3],
                            &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11]) == 12) {
                r.has_cache = true;
                std::uint64_t* fields[] = {&r.Ir, &r.I1mr, &r.ILmr, &r.Dr,  &r.D1mr, &r.DLmr,
                                           &r.Dw, &r.D1mw, &r.DLmw, &r.LLi, &r.LLr,  &r.LLw};
                for (int i = 0; i < 12; ++i) *fields[i] += v[i];
            }
        } else if (rest.rfind("branches ", 0) == 0) {
            unsigned long long v[5];
            if (std::sscanf(rest.c_str(), "branches all %llu Bc %llu Bcm %llu Bi %llu Bim %llu", &v[0], &v[1], &v[2],
                            &v[3], &v[4]) == 5) {
                r.has_branches = true;
                std::uint64_t* fields[] = {&r.branches, &r.Bc, &r.Bcm, &r.Bi, &r.Bim};
                for (int i = 0; i < 5; ++i) *fields[i] += v[i];
            }
        } else if (rest.rfind("loads ", 0) == 0) {
            unsigned long long v[4];
            if (std::sscanf(rest.c_str(), "loads %llu samples %llu threads %llu unwritten %llu", &v[0], &v[1], &v[2],
                            &v[3]) == 4) {
                ++r.processes_with_loads;
                r.sampled_loads += v[0], r.load_samples += v[1], r.sampled_threads += v[2];
                r.unwritten_samples += v[3];
            }
        } else if (rest == "exec-failed") {
            p.open = true; // the execve failed, and the process goes on
            p.native.clear();
        } else if (rest.rfind("sigill\t", 0) == 0) {
            r.sigill.emplace_back(pid, rest.substr(7));
        } else if (rest.rfind("sigsegv\t", 0) == 0) {
            r.sigsegv.emplace_back(pid, rest.substr(8));
        } else if (rest.rfind("sigsegv-plain\t", 0) == 0) {
            r.plain_sigsegv.push_back(pid);
        } else if (rest.rfind("native ", 0) == 0) {
            const auto tab = rest.find('\t');
            const std::string why = rest.substr(7, tab == std::string::npos ? std::string::npos : tab - 7);
            p.native.push_back((tab == std::string::npos ? std::string("?") : rest.substr(tab + 1)) + " (" + why + ")");
        }
    }
    for (auto& [pid, p] : pids) {
        if (p.open) {
            ++r.unfinished;
            // Never reported (a signal ended it, under a QEMU before 8.0): its totals at its last system call.
            // (The file's layout: magic, instructions, system calls, models, the cache's and the branches' fields.)
            constexpr int words = 4 + pmc_progress::cache_fields + pmc_progress::branch_fields + 1;
            std::uint64_t kept[words] = {};
            static_assert(sizeof kept == sizeof(pmc_progress::Progress));
            std::ifstream progress(pmc_progress::path_for(path, pid), std::ios::binary);
            if (progress.read(reinterpret_cast<char*>(kept), sizeof kept) && kept[0] == pmc_progress::magic) {
                ++r.partial_processes;
                r.partial_instructions += kept[1];
                const std::uint64_t* fields = kept + 4;
                if (kept[3] & pmc_progress::has_cache) {
                    r.has_cache = true;
                    std::uint64_t* to[] = {&r.Ir, &r.I1mr, &r.ILmr, &r.Dr,  &r.D1mr, &r.DLmr,
                                           &r.Dw, &r.D1mw, &r.DLmw, &r.LLi, &r.LLr,  &r.LLw};
                    for (int i = 0; i < pmc_progress::cache_fields; ++i) *to[i] += fields[i];
                }
                fields += pmc_progress::cache_fields;
                if (kept[3] & pmc_progress::has_branches) {
                    r.has_branches = true;
                    std::uint64_t* to[] = {&r.branches, &r.Bc, &r.Bcm, &r.Bi, &r.Bim};
                    for (int i = 0; i < pmc_progress::branch_fields; ++i) *to[i] += fields[i];
                }
                if (kept[3] != 0) ++r.partial_models;
                if (const std::uint64_t err = kept[words - 1]; err != 0) { // it reached its exit: no signal
                    ++r.unwritten;
                    r.unwritten_errno = static_cast<int>(err);
                }
            }
        }
        for (auto& native : p.native) r.native.push_back(std::move(native));
    }
    return r;
}

std::string signal_name(int sig) {
    switch (sig) { // (the ones that end commands; glibc's sigabbrev_np is 2.32 and later only)
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(sig);
    }
}

/// What to do about a report line the plugin could not write.
static const char* report_error_fix(int err) {
    switch (err) {
    case EMFILE:
    case ENFILE: return "no file descriptor was free and the plugin's reserve was gone; leave one free at exit";
    case ENOSPC:
    case EDQUOT: return "the disk is full; free space in $TMPDIR";
    default: return "check $TMPDIR";
    }
}

std::string unfinished_note(const EmulatedReport& r, int raw_status) {
    if (r.unfinished <= 0) return "";
    const int lost = r.unfinished - r.partial_processes;
    const bool one = r.unfinished == 1;
    if (r.unwritten == r.unfinished) // every one reached its exit, and the plugin could not write its line
        return fmt::format("{} of the {} emulated process{} reached {} exit but pmc's QEMU plugin could not write {} "
                           "report line{} ({}: {}), so {} counted at {} exit, from the plugin's progress file{}",
                           r.unfinished, r.processes, r.processes == 1 ? "" : "es", one ? "its" : "their",
                           one ? "its" : "their", one ? "" : "s", std::strerror(r.unwritten_errno),
                           report_error_fix(r.unwritten_errno), one ? "it is" : "they are", one ? "its" : "their",
                           r.partial_models > 0 ? " (modelled counts as each thread last published them)" : "");
    std::string note = fmt::format("{} of the {} emulated process{} never reached {} exit{}, so {} exit count{} "
                                   "missing (QEMU calls no plugin exit callback when a signal ends the program, "
                                   "but, from QEMU 8.0, for one that dumps core, such as SIGQUIT)",
                                   r.unfinished, r.processes, r.processes == 1 ? "" : "es", one ? "its" : "their",
                                   WIFSIGNALED(raw_status) ? " (the command ended by " +
                                                                 signal_name(WTERMSIG(raw_status)) + ")"
                                                           : std::string(),
                                   one ? "its" : "their", one ? " is" : "s are");
    if (r.partial_processes > 0)
        note += fmt::format(": {} counted up to {} last system call before the end, not after it",
                            r.partial_processes == r.unfinished ? std::string(one ? "it is" : "they are")
                                                                : fmt::format("{} are", r.partial_processes),
                            r.partial_processes == 1 ? "its" : "each one's");
    if (lost > 0) note += fmt::format("{} {} left no count at all", r.partial_processes > 0 ? ";" : ":", lost);
    if (r.partial_models > 0 && r.partial_models == r.unfinished)
        return note + fmt::format("; {} modelled counts (--cache, --branches) too", one ? "its" : "their");
    return note + fmt::format("; {} modelled counts (--cache, --branches) are missing", one ? "its" : "their");
}

std::string native_programs_note(const EmulatedReport& r) {
    if (r.native.empty()) return "";
    std::string note = fmt::format("{} program{} ran natively, outside the emulator (not counted; {} counters find no "
                                   "emulated PMU):", r.native.size(), r.native.size() == 1 ? "" : "s",
                                   r.native.size() == 1 ? "its" : "their");
    std::vector<std::string> shown = r.native;
    std::sort(shown.begin(), shown.end());
    shown.erase(std::unique(shown.begin(), shown.end()), shown.end());
    for (std::size_t i = 0; i < shown.size() && i < 10; ++i) note += "\n  " + shown[i];
    if (shown.size() > 10) note += fmt::format("\n  and {} more", shown.size() - 10);
    return note;
}

void end_like(int raw_status) {
    // Die of the command's SIGINT or SIGQUIT, so that a calling shell script stops as it would have.
    if (WIFSIGNALED(raw_status) && (WTERMSIG(raw_status) == SIGINT || WTERMSIG(raw_status) == SIGQUIT)) {
        std::fflush(nullptr);
        ::signal(WTERMSIG(raw_status), SIG_DFL);
        ::raise(WTERMSIG(raw_status));
    }
}

int cmd_emulate(const std::vector<std::string>& arguments) {
    pmc_cli::CommandLine cl("pmc emulate", emulate_help);
    std::string qemu, cpu;
    bool keep_aslr = false;
    cl.flag("--keep-aslr", keep_aslr);
    cl.option("--qemu", qemu, "a path");
    cl.option("--cpu", cpu, "a CPU model").not_empty();
    CacheOptions cache;
    add_cache_options(cl, cache);
    bool branches = false;
    cl.flag("--branches", branches);
    cl.command_follows(); // the command starts at the first word that is not an option, or after '--'
    if (auto status = cl.parse(arguments)) return *status;
    const std::vector<std::string> command = cl.command();
    if (command.empty()) return cl.usage_error("no command to emulate: pmc emulate [OPTIONS] -- COMMAND [ARGS]");
    CacheModelChoice model;
    if (std::string why = choose_cache_model(cache, model); !why.empty()) return cl.usage_error(why);
    if (!model.host_source.empty())
        fmt::print(stderr, "pmc emulate: --cache=host: {} ({})\n", model.geometry, model.host_source);
    auto emulator = find_emulator(qemu, cpu);
    if (!emulator) {
        fmt::print(stderr, "pmc emulate: {}\n", emulator.failure().message);
        return 1;
    }
    if (!emulator->cpu_warning.empty()) fmt::print(stderr, "pmc emulate: warning: {}\n", emulator->cpu_warning);
    // The plugin's report of the command's processes: which programs ran natively, outside the emulator; with --cache
    // or --branches the models' totals, which must not go missing with status 0.
    EmulatedReportFile report;
    if (report.path.empty()) {
        if (cache || branches) {
            fmt::print(stderr, "pmc emulate: {}; without it the --cache and --branches totals could not be printed, "
                               "so the command was not run. {}\n", report.failure, report.fix);
            return 1;
        }
        fmt::print(stderr, "pmc emulate: warning: {}; without it the programs that run natively are not named. {}\n",
                   report.failure, report.fix);
    }
    Job job;
    job.remove_if_pmc_dies(report.dir);
    auto child = start_emulated(job, *emulator, command, keep_aslr,
                                (report.path.empty() ? "" : ",report=" + report.path) + model.plugin_arguments +
                                    (branches ? ",branches=on" : ""));
    if (!child) {
        fmt::print(stderr, "pmc emulate: {}\n", child.failure().message);
        return child.failure().code.value() == ENOENT ? 127 : child.failure().code.value() == ENOEXEC ? 126 : 1;
    }
    std::string shown;
    for (const auto& c : command) shown += (shown.empty() ? "" : " ") + c;
    int raw = 0;
    const int status = finish_emulated(job, shown, raw);
    const EmulatedReport processes = report.path.empty() ? EmulatedReport{} : read_emulated_report(report.path);
    if (WIFSIGNALED(raw) && WTERMSIG(raw) == SIGSEGV && emulator->misaligns_signal_frames &&
        !processes.faulted_without_handler(*child))
        fmt::print(stderr, "pmc emulate: {}\n", signal_frame_explanation(*emulator, "'" + shown + "'"));
    if (!report.path.empty()) {
        explain_child_sigills(processes, *child);
        explain_child_segfaults(processes, *child, *emulator);
        // A process a signal ended never reported its models' counts: say so rather than print nothing, or totals
        // that silently lack it.
        if ((cache || branches) && processes.unfinished > 0)
            fmt::print(stderr, "pmc emulate: {} ({})\n", unfinished_note(processes, raw),
                       processes.partial_models == processes.unfinished ? "the totals below are partial"
                       : processes.has_cache || processes.has_branches  ? "the totals below lack them"
                                                                        : "no modelled totals");
        if (cache && processes.has_cache) // (the command's totals; the program's counters read its threads' own)
            fmt::print(stderr,
                       "pmc emulate: the command's caches, {}:\n  D1: {} reads, {} misses; {} writes, {} misses\n"
                       "  I1: {} misses\n{}  LL: {} instruction-fetch misses, {} read misses, {} write misses\n",
                       model.note, processes.Dr, processes.D1mr, processes.Dw, processes.D1mw, processes.I1mr,
                       // (each level's three add up to what reaches the next: the L2's to cache-references, the
                       // LL's to cache-misses)
                       model.has_l2 ? fmt::format("  L2: {} instruction-fetch misses, {} read misses, {} write "
                                                  "misses\n", processes.LLi, processes.LLr, processes.LLw)
                                    : std::string(),
                       processes.ILmr, processes.DLmr, processes.DLmw);
        if (branches && processes.has_branches)
            fmt::print(stderr,
                       "pmc emulate: the command's branches: {} branch instructions; {} conditional, {} mispredicted; "
                       "{} indirect, {} mispredicted ({})\n",
                       processes.branches, processes.Bc, processes.Bcm, processes.Bi, processes.Bim, branch_model_note);
        if (const std::string note = native_programs_note(processes); !note.empty())
            fmt::print(stderr, "pmc emulate: {}\n", note);
    }
    report.remove(); // (end_like may end pmc of the command's SIGINT, where no destructor runs)
    end_like(raw);
    // Modelled totals printed partial: never status 0 (a script that checks only the status must not take them for
    // whole), as pmc count --emulate.
    if (status == 0 && (cache || branches) && processes.unfinished > 0) {
        fmt::print(stderr, "pmc emulate: exit status 1, though '{}' exited 0: the totals above are partial\n", shown);
        return 1;
    }
    return status;
}

} // namespace pmc_tool
