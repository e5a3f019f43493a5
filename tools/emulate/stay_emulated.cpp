// libpmc-emulate-preload.so: keeps the programs that an emulated program executes under the emulator.
//
// QEMU's user mode runs a program's execve() of a same-architecture program natively, so the children of a program
// under `pmc emulate` (a compiler driver's cc1, a shell's commands, pmc::reexec_without_aslr's re-exec) would leave
// the emulator and lose its PMU. pmc emulate puts this library in the emulated program's LD_PRELOAD; every
// dynamically linked program started from there loads it too. Its constructor runs before the program's own code:
// under the emulator it does nothing but the handshake; natively it re-executes the program under QEMU with pmc's
// plugin, as pmc emulate started the first one. Statically linked programs load no preload library and stay
// native (docs/emulated-pmu.md).
//
// The environment it reads, set by pmc emulate: PMC_EMULATE_QEMU (the qemu-* binary), PMC_EMULATE_PLUGIN (the
// plugin with its arguments, as QEMU's -plugin takes it), PMC_EMULATE_PRELOAD (this library). Without them it does
// nothing.
#include <pmc/emulated.hpp>

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string real_path(const char* path) {
    char buffer[PATH_MAX];
    return ::realpath(path, buffer) ? std::string(buffer) : std::string();
}

/// `list` (colon- or space-separated, as ld.so reads LD_PRELOAD) without `entry`.
std::string without(const std::string& list, const std::string& entry) {
    std::string out, item;
    auto flush = [&] {
        if (!item.empty() && item != entry) out += (out.empty() ? "" : ":") + item;
        item.clear();
    };
    for (char c : list) {
        if (c == ':' || c == ' ') flush();
        else item += c;
    }
    flush();
    return out;
}

__attribute__((constructor)) void stay_emulated(int argc, char** argv, char** envp) {
    const char* qemu = ::getenv("PMC_EMULATE_QEMU");
    const char* plugin = ::getenv("PMC_EMULATE_PLUGIN");
    const char* preload = ::getenv("PMC_EMULATE_PRELOAD");
    if (!qemu || !plugin || !preload || argc < 1) return;
    if (pmc::emulated_pmu()) { // under the emulator: the re-exec, if any, worked
        ::unsetenv("PMC_EMULATE_REEXEC");
        return;
    }
    const std::string exe = real_path("/proc/self/exe");
    if (exe.empty() || exe == real_path(qemu)) return; // QEMU itself, should it be given this library
    // Once per process: if the re-executed program still finds no emulated PMU, it runs natively, and says so.
    const std::string me = std::to_string(::getpid());
    if (const char* tried = ::getenv("PMC_EMULATE_REEXEC"); tried && me == tried) {
        std::fprintf(stderr, "pmc emulate: %s (pid %s) runs natively: under %s with %s it found no emulated PMU\n",
                     exe.c_str(), me.c_str(), qemu, plugin);
        ::unsetenv("PMC_EMULATE_REEXEC");
        return;
    }
    // QEMU itself gets the environment without this library; the program gets it back through -E.
    std::vector<std::string> env;
    std::string guest_preload;
    for (char** e = envp; e && *e; ++e) {
        if (std::strncmp(*e, "LD_PRELOAD=", 11) == 0) {
            guest_preload = *e + 11;
            const std::string rest = without(guest_preload, preload);
            if (!rest.empty()) env.push_back("LD_PRELOAD=" + rest);
            continue;
        }
        if (std::strncmp(*e, "PMC_EMULATE_REEXEC=", 19) == 0) continue;
        env.emplace_back(*e);
    }
    env.push_back("PMC_EMULATE_REEXEC=" + me);
    std::vector<std::string> args = {qemu, "-0", argv[0], "-E", "LD_PRELOAD=" + guest_preload, "-plugin", plugin, exe};
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    std::vector<char*> a, e;
    for (auto& s : args) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(s.data());
    e.push_back(nullptr);
    ::execve(qemu, a.data(), e.data());
    std::fprintf(stderr, "pmc emulate: cannot run %s under %s: %s; it runs natively\n", exe.c_str(), qemu,
                 std::strerror(errno));
}

} // namespace
