// The hot path is a few instructions with no system call: checked on the machine code of this very binary.
// Each read function's fast path (from its entry to its first ret, with the unlikely branches laid out after it
// or in a .cold clone) must contain the read instruction and no call, syscall or int; no read function may
// contain a syscall anywhere. Run with -s to see the disassembly (docs/hot-path.md quotes it).
#include "catch.hpp"

#include <pmc/config.hpp>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Function {
    std::vector<std::string> lines;     // "addr: mnemonic operands"
    std::vector<std::string> mnemonics; // just the mnemonic
};

std::map<std::string, Function> disassemble_self() {
    std::map<std::string, Function> out;
    char self[4096] = {};
    if (::readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return out;
    const std::string command = std::string("objdump -d --no-show-raw-insn -C '") + self + "' 2>/dev/null";
    FILE* p = ::popen(command.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    Function* cur = nullptr;
    while (std::fgets(buf, sizeof buf, p)) {
        std::string line(buf);
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
        auto lt = line.find(" <");
        if (lt != std::string::npos && !line.empty() && line.back() == ':' && line.find("pmc_hot_read_") != std::string::npos) {
            std::string name = line.substr(lt + 2, line.size() - lt - 4);
            cur = &out[name];
            continue;
        }
        if (line.empty()) {
            cur = nullptr;
            continue;
        }
        if (!cur) continue;
        auto colon = line.find(":\t");
        if (colon == std::string::npos) continue;
        std::string insn = line.substr(colon + 2);
        std::istringstream words(insn);
        std::string mnemonic;
        words >> mnemonic;
        cur->lines.push_back(insn);
        cur->mnemonics.push_back(mnemonic);
    }
    ::pclose(p);
    return out;
}

/// The instructions from the entry to the first ret.
std::vector<std::string> fast_path(const Function& f, std::vector<std::string>* text = nullptr) {
    std::vector<std::string> path;
    for (std::size_t i = 0; i < f.mnemonics.size(); ++i) {
        path.push_back(f.mnemonics[i]);
        if (text) text->push_back(f.lines[i]);
        if (f.mnemonics[i].rfind("ret", 0) == 0) break;
    }
    return path;
}

bool contains(const std::vector<std::string>& v, const std::string& prefix) {
    for (auto& s : v)
        if (s.rfind(prefix, 0) == 0) return true;
    return false;
}

} // namespace

TEST_CASE("the compiled fast path of every read has no call and no system call", "[hot-path]") {
#if !PMC_ARCH_X86_64
    WARN("the hot-path disassembly check is written for x86-64");
    return;
#endif
    auto functions = disassemble_self();
    if (functions.empty()) {
        WARN("objdump is not available: cannot inspect the machine code");
        return;
    }
    struct Expect {
        const char* name;
        std::vector<const char*> must_have;
    };
    const Expect expected[] = {
        {"pmc_hot_read_rdpmc", {"lfence", "rdpmc"}},
        {"pmc_hot_read_rdpmc_fixed48", {"lfence", "rdpmc"}},
        {"pmc_hot_read_wall_time", {"lfence", "rdtsc", "mul"}},
        {"pmc_hot_read_tsc", {"lfence", "rdtsc"}},
        {"pmc_hot_read_counter", {}},
    };
    for (const Expect& e : expected) {
        INFO(e.name);
        REQUIRE(functions.count(e.name) == 1);
        const Function& f = functions[e.name];
        std::vector<std::string> text;
        const auto path = fast_path(f, &text);
        std::printf("%s: %zu instructions to the first ret\n", e.name, path.size());
        for (auto& t : text) std::printf("    %s\n", t.c_str());
        for (const char* m : e.must_have) CHECK(contains(path, m));
        CHECK_FALSE(contains(path, "call"));
        CHECK_FALSE(contains(path, "syscall"));
        CHECK_FALSE(contains(path, "int"));
        CHECK_FALSE(contains(f.mnemonics, "syscall"));
        if (std::string(e.name) != "pmc_hot_read_counter") CHECK(path.size() <= 24);
    }
}
