// SPDX-License-Identifier: MIT
// The hot path is a few instructions with no system call: checked on the machine code of this very binary
// (objdump -d), for each read function of hot_path_functions.cpp (compiled with -O2):
//   - a fast path exists: a path through the function's own code from its entry to a `ret` that executes the
//     read's instructions (e.g. lfence then rdpmc) and no call, system call, interrupt or indirect jump;
//   - nothing of that kind comes before the read instruction on any path (no call on the way to the rdpmc);
//   - every call or jump out of the function, from any path, including its split-off .cold parts, goes to one of
//     the function's known out-of-line cold paths (refresh_rdpmc, read_slow, ...), never to anything else (a libc
//     read(), a PLT stub, an unknown helper); and no syscall/sysenter/int instruction is anywhere in it.
// So a read() that calls read_slow (a read(2) per call), tail-jumps to it, or inlines it fails, under g++ and
// clang++ alike (whatever order they lay the blocks out in). Run with -s to see the fast paths found.
#include "catch.hpp"

#include <pmc/config.hpp>

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Instruction {
    std::uint64_t addr = 0;
    std::string mnemonic; // without prefixes such as notrack, bnd, rep
    std::string text;     // as objdump prints it
    bool direct = false;  // a branch or call with a target address
    std::uint64_t target = 0;
    std::vector<std::uint64_t> table; // an indirect jump through a jump table: its targets
};

struct Function {
    std::string name;
    std::uint64_t start = 0, end = 0; // [start, end): start of the next symbol
    std::vector<Instruction> code;
};

struct Binary {
    std::vector<Function> functions; // by address
    std::string error;

    const Function* containing(std::uint64_t addr) const {
        const Function* best = nullptr;
        for (const auto& f : functions)
            if (f.start <= addr && (!best || f.start > best->start)) best = &f;
        return best && addr < best->end ? best : nullptr;
    }
    const Function* named(const std::string& name) const {
        for (const auto& f : functions)
            if (f.name == name) return &f;
        return nullptr;
    }
};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_ret(const Instruction& i) { return starts_with(i.mnemonic, "ret"); }
bool is_jmp(const Instruction& i) { return starts_with(i.mnemonic, "jmp"); }
bool is_conditional(const Instruction& i) {
    return (starts_with(i.mnemonic, "j") && !is_jmp(i)) || starts_with(i.mnemonic, "loop");
}
bool is_call(const Instruction& i) { return starts_with(i.mnemonic, "call"); }
bool is_system_call(const Instruction& i) {
    return i.mnemonic == "syscall" || i.mnemonic == "sysenter" || starts_with(i.mnemonic, "int");
}
/// Leaves the straight line of this function's code: a call, a system call, or a jump whose target is unknown.
bool is_dirty(const Instruction& i) {
    return is_call(i) || is_system_call(i) || (is_jmp(i) && !i.direct && i.table.empty());
}
bool ends_flow(const Instruction& i) { return is_ret(i) || is_jmp(i) || i.mnemonic == "ud2" || i.mnemonic == "hlt"; }

/// The bytes at a virtual address of an ELF file's sections (this program's jump tables).
bool read_at_address(const std::string& path, std::uint64_t addr, void* out, std::size_t size) {
    std::ifstream in(path, std::ios::binary);
    Elf64_Ehdr eh{};
    if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || eh.e_ident[EI_CLASS] != ELFCLASS64) return false;
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
        Elf64_Shdr sh{};
        in.seekg(static_cast<std::streamoff>(eh.e_shoff + i * eh.e_shentsize));
        if (!in.read(reinterpret_cast<char*>(&sh), sizeof sh)) return false;
        if (sh.sh_type == SHT_NOBITS || addr < sh.sh_addr || addr + size > sh.sh_addr + sh.sh_size) continue;
        in.seekg(static_cast<std::streamoff>(sh.sh_offset + (addr - sh.sh_addr)));
        return static_cast<bool>(in.read(static_cast<char*>(out), static_cast<std::streamsize>(size)));
    }
    return false;
}

/// A switch compiled to a jump table (clang does this to Counter::read's dispatch): g++ and clang++ emit, for
/// position-independent code, `cmp $N,%idx; ja default; lea TABLE(%rip),%base; movslq (%base,%idx,4),%t;
/// add %base,%t; jmp *%t`, with N+1 32-bit entries relative to TABLE. Their targets become the jump's successors;
/// a jump of another shape stays unresolved, and the check then fails.
void resolve_jump_tables(Function& f, const std::string& path) {
    static const std::regex lea(R"(^lea\s+-?0x[0-9a-f]+\(%rip\),(%\w+)\s+#\s*([0-9a-f]+))");
    static const std::regex movslq(R"(^movslq\s+\((%\w+),%\w+,4\),%\w+$)");
    static const std::regex bound(R"(^cmp[bwlq]?\s+\$0x([0-9a-f]+),%\w+$)");
    for (std::size_t j = 0; j < f.code.size(); ++j) {
        Instruction& jump = f.code[j];
        if (!is_jmp(jump) || jump.direct || jump.text.find("*%") == std::string::npos) continue;
        std::string base_reg;
        std::uint64_t table = 0, entries = 0;
        for (std::size_t back = 1; back <= 12 && back <= j; ++back) {
            const Instruction& i = f.code[j - back];
            std::smatch m;
            if (base_reg.empty() && std::regex_search(i.text, m, movslq)) base_reg = m[1].str();
            else if (!base_reg.empty() && !table && std::regex_search(i.text, m, lea) && m[1].str() == base_reg)
                table = std::stoull(m[2].str(), nullptr, 16);
            else if (table && std::regex_search(i.text, m, bound) && j - back + 1 < f.code.size()) {
                const std::string& cond = f.code[j - back + 1].mnemonic;
                const std::uint64_t n = std::stoull(m[1].str(), nullptr, 16);
                if (cond == "ja") entries = n + 1;
                if (cond == "jae") entries = n;
                break;
            }
        }
        if (!table || !entries || entries > 256) continue;
        std::vector<std::int32_t> offsets(entries);
        if (!read_at_address(path, table, offsets.data(), offsets.size() * sizeof(std::int32_t))) continue;
        for (std::int32_t off : offsets) jump.table.push_back(table + static_cast<std::uint64_t>(std::int64_t{off}));
    }
}

Binary disassemble_self() {
    Binary out;
    char self[4096] = {};
    if (::readlink("/proc/self/exe", self, sizeof self - 1) <= 0) {
        out.error = "cannot read /proc/self/exe";
        return out;
    }
    // -C: demangled names, so the allowed cold paths can be named as in the source.
    const std::string command = std::string("objdump -d -C --no-show-raw-insn '") + self + "' 2>/dev/null";
    FILE* p = ::popen(command.c_str(), "r");
    if (!p) {
        out.error = "cannot run objdump";
        return out;
    }
    static const std::regex header(R"(^([0-9a-f]+) <(.*)>:$)");
    static const std::regex insn(R"(^\s*([0-9a-f]+):\s+(.*)$)");
    static const std::regex target(R"(^([0-9a-f]+)( <.*>)?$)");
    char buf[8192];
    Function* cur = nullptr;
    while (std::fgets(buf, sizeof buf, p)) {
        std::string line(buf);
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
        std::smatch m;
        if (std::regex_match(line, m, header)) {
            out.functions.push_back(Function{m[2].str(), std::stoull(m[1].str(), nullptr, 16), 0, {}});
            cur = &out.functions.back();
            continue;
        }
        if (!cur || !std::regex_match(line, m, insn)) continue;
        Instruction i;
        i.addr = std::stoull(m[1].str(), nullptr, 16);
        i.text = m[2].str();
        std::istringstream words(i.text);
        std::string word;
        while (words >> word && (word == "notrack" || word == "bnd" || word == "rep" || word == "repz" ||
                                 word == "repnz" || word == "ds" || word == "cs" || word == "data16" || word == "lock")) {
        }
        i.mnemonic = word;
        std::string rest;
        std::getline(words, rest);
        while (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
        if ((starts_with(i.mnemonic, "j") || starts_with(i.mnemonic, "call") || starts_with(i.mnemonic, "loop")) &&
            std::regex_match(rest, m, target)) {
            i.direct = true;
            i.target = std::stoull(m[1].str(), nullptr, 16);
        }
        cur->code.push_back(i);
    }
    const int status = ::pclose(p);
    if (out.functions.empty()) out.error = "objdump printed no functions (status " + std::to_string(status) + ")";
    std::sort(out.functions.begin(), out.functions.end(),
              [](const Function& a, const Function& b) { return a.start < b.start; });
    for (std::size_t i = 0; i < out.functions.size(); ++i) {
        auto& f = out.functions[i];
        f.end = i + 1 < out.functions.size() ? out.functions[i + 1].start : UINT64_MAX;
        if (!f.code.empty()) f.end = std::min(f.end, f.code.back().addr + 16);
    }
    for (auto& f : out.functions) resolve_jump_tables(f, std::string(self));
    return out;
}


/// One read function: its own code (the function and its compiler-made parts, `name.cold`, `name.part.0`, ...),
/// and the out-of-line functions it may call or jump to.
struct Analysis {
    std::string name;
    std::vector<std::string> problems;
    std::vector<std::string> fast_path; // the shortest clean path found, as text
};

struct Expect {
    const char* name;
    std::vector<std::vector<const char*>> fast_paths; // each: instructions a clean entry-to-ret path executes, in order
    std::vector<const char*> may_leave_to;            // substrings of the demangled names of allowed targets
    std::vector<const char*> reads_may_follow = {};   // cold calls after which a read is fine (a first-use setup)
};

Analysis analyse(const Binary& bin, const Expect& e) {
    Analysis a;
    a.name = e.name;
    const Function* entry = bin.named(e.name);
    if (!entry) {
        a.problems.push_back("no function named " + std::string(e.name) + " in the binary");
        return a;
    }
    auto matches = [](const Function* f, const std::vector<const char*>& names) {
        if (!f) return false;
        for (const char* n : names)
            if (f->name.find(n) != std::string::npos) return true;
        return false;
    };
    // The function's own code: itself, the read it tail-jumps to when the compiler did not inline it (Group::read),
    // and the parts the compiler split off them (`name.cold`, `name [clone .cold]`, `name.part.0`).
    std::set<std::string> own_names{e.name};
    auto base_name = [](const std::string& name) {
        const auto clone = name.find(" [clone ");
        if (clone != std::string::npos) return name.substr(0, clone);
        const auto dot = name.find('.');
        return dot == std::string::npos ? name : name.substr(0, dot);
    };
    auto own = [&](const Function* f) { return f && own_names.count(base_name(f->name)) > 0; };
    for (bool grew = true; grew;) {
        grew = false;
        for (const auto& f : bin.functions)
            if (own(&f))
                for (const auto& i : f.code) {
                    const Function* to = i.direct && is_jmp(i) ? bin.containing(i.target) : nullptr;
                    if (to && !own(to) && matches(to, {">::read("}) && to->start == i.target)
                        grew = own_names.insert(base_name(to->name)).second || grew;
                }
    }
    auto allowed = [&](const Function* f) { return matches(f, e.may_leave_to); };
    // Every instruction of the own code, by address.
    std::map<std::uint64_t, const Instruction*> at;
    std::map<std::uint64_t, std::uint64_t> next; // fall-through successor
    for (const auto& f : bin.functions)
        if (own(&f))
            for (std::size_t i = 0; i < f.code.size(); ++i) {
                at[f.code[i].addr] = &f.code[i];
                if (i + 1 < f.code.size()) next[f.code[i].addr] = f.code[i + 1].addr;
            }
    // Successors within the own code; exits (to other functions) are checked against the allowed list.
    auto successors = [&](const Instruction& i) {
        std::vector<std::uint64_t> s;
        if (!ends_flow(i) && next.count(i.addr)) s.push_back(next[i.addr]);
        if ((is_jmp(i) || is_conditional(i)) && i.direct && at.count(i.target)) s.push_back(i.target);
        for (auto t : i.table)
            if (at.count(t)) s.push_back(t);
        return s;
    };

    // 1. Everything reachable from the entry (through any path, calls included): no system call, and every exit
    //    goes to an allowed cold path.
    std::set<std::uint64_t> seen;
    std::deque<std::uint64_t> work{entry->start};
    while (!work.empty()) {
        const std::uint64_t addr = work.front();
        work.pop_front();
        if (!at.count(addr) || !seen.insert(addr).second) continue;
        const Instruction& i = *at[addr];
        if (is_system_call(i)) a.problems.push_back("a system call instruction: " + i.text);
        if ((is_jmp(i) || is_call(i)) && !i.direct && i.table.empty())
            a.problems.push_back("an indirect call or jump: " + i.text);
        for (auto t : i.table)
            if (!at.count(t)) a.problems.push_back("a jump table entry leaves the function: " + i.text);
        if ((is_jmp(i) || is_conditional(i) || is_call(i)) && i.direct && !at.count(i.target)) {
            const Function* to = bin.containing(i.target);
            if (!allowed(to))
                a.problems.push_back("leaves for " + (to ? to->name : std::string("an unknown address")) +
                                     ", which is not one of its cold paths: " + i.text);
        }
        for (auto s : successors(i)) work.push_back(s);
    }

    // 2. No call before a read instruction: which instructions are reachable only after a dirty one.
    std::set<std::string> reads;
    for (const auto& path : e.fast_paths)
        for (const char* m : path)
            if (std::string(m) != "lfence" && std::string(m) != "mul") reads.insert(m);
    std::set<std::uint64_t> after_dirty;
    auto setup_call = [&](const Instruction& i) {
        return is_call(i) && i.direct && matches(bin.containing(i.target), e.reads_may_follow);
    };
    for (auto addr : seen)
        if (is_dirty(*at[addr]) && !setup_call(*at[addr]))
            for (auto s : successors(*at[addr])) work.push_back(s);
    while (!work.empty()) {
        const std::uint64_t addr = work.front();
        work.pop_front();
        if (!at.count(addr) || !after_dirty.insert(addr).second) continue;
        for (auto s : successors(*at[addr])) work.push_back(s);
    }
    for (auto addr : after_dirty)
        if (reads.count(at[addr]->mnemonic))
            a.problems.push_back("a call or system call comes before this read on some path: " + at[addr]->text);

    // 3. Each fast path: the shortest clean path from the entry to a ret executing the wanted instructions in
    //    order (a breadth-first search over (instruction, how many of them were seen)).
    for (const auto& wanted : e.fast_paths) {
        using State = std::pair<std::uint64_t, std::size_t>;
        std::map<State, State> parent;
        std::deque<State> queue;
        const State start{entry->start, 0};
        parent[start] = start;
        queue.push_back(start);
        bool found = false;
        State end{};
        while (!queue.empty() && !found) {
            const State st = queue.front();
            queue.pop_front();
            if (!at.count(st.first)) continue;
            const Instruction& i = *at[st.first];
            if (is_dirty(i)) continue; // a clean path never executes it
            std::size_t k = st.second;
            if (k < wanted.size() && starts_with(i.mnemonic, wanted[k])) ++k;
            if (is_ret(i)) {
                if (k == wanted.size()) {
                    found = true;
                    end = st;
                }
                continue;
            }
            for (auto s : successors(i)) {
                const State nx{s, k};
                if (parent.emplace(nx, st).second) queue.push_back(nx);
            }
        }
        std::string want_text;
        for (const char* w : wanted) want_text += std::string(want_text.empty() ? "" : ", ") + w;
        if (!found) {
            a.problems.push_back("no path from the entry to a ret executes " + want_text +
                                 " without a call, system call or jump out of the function");
            continue;
        }
        std::vector<std::string> path;
        for (State st = end;; st = parent[st]) {
            const std::string& t = at[st.first]->text;
            path.insert(path.begin(), t.substr(0, t.find("   #"))); // without objdump's comment
            if (st == parent[st]) break;
        }
        a.fast_path.push_back("fast path (" + want_text + "): " + std::to_string(path.size()) + " instructions");
        for (auto& t : path) a.fast_path.push_back("    " + t);
    }
    return a;
}

// The out-of-line paths a counter read may leave for (unlikely branches only: the checks above keep them off
// the fast path).
const std::vector<const char*> counter_cold = {"detail::refresh_rdpmc<", "detail::read_off_fast_path(",
                                               "detail::read_slow(", "detail::wrong_thread("};
const std::vector<const char*> group_cold = {"detail::group_refresh<", "::read_resized(", "::read_slow(",
                                             "detail::group_wrong_thread(", "detail::group_read_syscall("};
// A profiler scope's: its counter's, the thread's first use (registration), a full page's write, the ride-along
// counters' read, clearing the values of a thread whose counters failed, the nesting stack's growth past its
// deepest so far, and an end out of order (reported) or after one (the ended slots dropped).
std::vector<const char*> profiler_cold() {
    std::vector<const char*> cold = counter_cold;
    for (const char* c : {"Profiler::local_slow(", "ProfilerThread::reserve_slow(", "ProfilerThread::read_rest(", "memset",
                          "ProfilerThread::grow(", "ProfilerThread::end_scope_slow(", "ProfilerThread::drop_ended("})
        cold.push_back(c);
    return cold;
}

/// The shortest path from the function's entry to a ret that reads no counter and calls nothing: a profiler that
/// is off. Empty when there is none.
std::vector<const Instruction*> off_path(const Binary& bin, const char* name) {
    const Function* f = bin.named(name);
    if (!f) return {};
    std::map<std::uint64_t, const Instruction*> at;
    std::map<std::uint64_t, std::uint64_t> next;
    for (std::size_t i = 0; i < f->code.size(); ++i) {
        at[f->code[i].addr] = &f->code[i];
        if (i + 1 < f->code.size()) next[f->code[i].addr] = f->code[i + 1].addr;
    }
    std::map<std::uint64_t, std::uint64_t> parent{{f->start, f->start}};
    std::deque<std::uint64_t> queue{f->start};
    while (!queue.empty()) {
        const std::uint64_t addr = queue.front();
        queue.pop_front();
        const Instruction& i = *at[addr];
        if (is_dirty(i) || i.mnemonic == "rdtsc" || i.mnemonic == "rdpmc" || i.mnemonic == "mrs") continue;
        if (is_ret(i)) {
            std::vector<const Instruction*> path;
            for (std::uint64_t a = addr;; a = parent[a]) {
                path.insert(path.begin(), at[a]);
                if (a == parent[a]) break;
            }
            return path;
        }
        std::vector<std::uint64_t> succ;
        if (!ends_flow(i) && next.count(addr)) succ.push_back(next[addr]);
        if ((is_jmp(i) || is_conditional(i)) && i.direct && at.count(i.target)) succ.push_back(i.target);
        for (auto s : succ)
            if (parent.emplace(s, addr).second) queue.push_back(s);
    }
    return {};
}

} // namespace

TEST_CASE("the compiled fast path of every read has no call and no system call", "[hot-path]") {
#if !PMC_ARCH_X86_64
    PMC_SKIP("the hot-path disassembly check is written for x86-64");
#else
    if (std::system("objdump --version >/dev/null 2>&1") != 0)
        PMC_SKIP("objdump is not installed (Debian: binutils): the machine code cannot be inspected");
    const Binary bin = disassemble_self();
    INFO(bin.error);
    REQUIRE(bin.error.empty());
    const Expect expected[] = {
        {"pmc_hot_read_rdpmc", {{"lfence", "rdpmc"}}, counter_cold},
        {"pmc_hot_read_rdpmc_fixed48", {{"lfence", "rdpmc"}}, counter_cold},
        {"pmc_hot_read_counter", {{"lfence", "rdpmc"}, {"lfence", "rdtsc", "mul"}, {"lfence", "rdtsc"}}, counter_cold},
        {"pmc_hot_read_wall_time", {{"lfence", "rdtsc", "mul"}}, counter_cold},
        {"pmc_hot_read_tsc", {{"lfence", "rdtsc"}}, {}},
        {"pmc_hot_read_group", {{"lfence", "rdpmc", "rdtsc"}}, group_cold},
    };
    for (const Expect& e : expected) {
        const Analysis a = analyse(bin, e);
        std::printf("%s\n", e.name);
        for (auto& line : a.fast_path) std::printf("  %s\n", line.c_str());
        INFO(e.name);
        for (auto& p : a.problems) FAIL_CHECK(p);
        CHECK(a.problems.empty());
    }
#endif
}

TEST_CASE("the hot-path check fails on the mutations it exists to catch", "[hot-path]") {
#if !PMC_ARCH_X86_64
    PMC_SKIP("the hot-path disassembly check is written for x86-64");
#else
    if (std::system("objdump --version >/dev/null 2>&1") != 0)
        PMC_SKIP("objdump is not installed (Debian: binutils): the machine code cannot be inspected");
    const Binary bin = disassemble_self();
    REQUIRE(bin.error.empty());
    // hot_path_functions.cpp also compiles broken reads: a read() that calls read_slow (a read(2) per call) as a
    // tail jump and as a call, one that calls a libc function before its rdpmc, and one that has no rdpmc.
    struct Broken {
        const char* name;
        const char* why;
    };
    const Broken broken[] = {
        {"pmc_mutant_read_slow_tail", "no path from the entry to a ret executes"},
        {"pmc_mutant_read_slow_call", "no path from the entry to a ret executes"},
        {"pmc_mutant_getpid_first", "comes before this read"},
        {"pmc_mutant_libc_call", "which is not one of its cold paths"},
    };
    for (const Broken& b : broken) {
        INFO(b.name);
        const Analysis a = analyse(bin, Expect{b.name, {{"lfence", "rdpmc"}}, counter_cold});
        std::string all;
        for (auto& p : a.problems) all += p + "\n";
        INFO(all);
        CHECK_FALSE(a.problems.empty());
        CHECK_THAT(all, ContainsSubstring(b.why));
    }
#endif
}

TEST_CASE("a profiler scope: on, two reads and no call, and off, one branch", "[hot-path][profiler]") {
#if !PMC_ARCH_X86_64
    PMC_SKIP("the hot-path disassembly check is written for x86-64");
#else
    if (std::system("objdump --version >/dev/null 2>&1") != 0)
        PMC_SKIP("objdump is not installed (Debian: binutils): the machine code cannot be inspected");
    const Binary bin = disassemble_self();
    REQUIRE(bin.error.empty());
    // On: begin and end read the counter (wall-time: lfence, rdtsc, mul; a hardware event: lfence, rdpmc) and store
    // the record, with nothing out of line on the way; the first use on a thread and a full page are cold calls (and
    // the end's read may follow the begin's cold path: those are the only calls allowed before a read).
    const Expect on{"pmc_hot_profiler_scope",
                    {{"lfence", "rdtsc", "mul", "lfence", "rdtsc", "mul"}, {"lfence", "rdpmc", "lfence", "rdpmc"}},
                    profiler_cold(),
                    profiler_cold()};
    const Analysis a = analyse(bin, on);
    for (auto& line : a.fast_path) std::printf("  %s\n", line.c_str());
    for (auto& p : a.problems) FAIL_CHECK(p);
    CHECK(a.problems.empty());
    // Off: the shortest path that reads nothing is the test of the profiler's state and one conditional branch
    // (g++: load, test, je, ret; clang++ also runs the function's prologue and epilogue on it, which a program's
    // function around the scope has anyway).
    const auto off = off_path(bin, "pmc_hot_profiler_scope");
    REQUIRE(!off.empty());
    std::printf("off (profiler not enabled): %zu instructions\n", off.size());
    std::size_t branches = 0, loads = 0;
    for (const Instruction* i : off) {
        std::printf("    %s\n", i->text.c_str());
        branches += is_conditional(*i);
        loads += starts_with(i->mnemonic, "mov") && i->text.find("(%rdi)") != std::string::npos;
    }
    CHECK(branches == 1);
    CHECK(loads == 1); // the profiler's state, nothing else of it
    // The check itself: a scope that interns its label per call (a lock) has no clean path.
    const Analysis bad =
        analyse(bin, Expect{"pmc_mutant_profiler_scope_label", on.fast_paths, profiler_cold(), profiler_cold()});
    std::string why;
    for (auto& p : bad.problems) why += p + "\n";
    INFO(why);
    CHECK_FALSE(bad.problems.empty());
#endif
}
