// SPDX-License-Identifier: MIT
// libFuzzer target for the event parser: every input is one event string, parsed against a fake sysfs tree
// (tests/support/fake_sysfs.hpp, created once per process) so that sysfs formats, named events and their errors
// are exercised deterministically, and, for short inputs, against the real /sys/bus/event_source/devices too.
// Nothing is opened: only pmc::try_parse_event runs.
//
// Invariants (a violation is reported on stderr and then __builtin_trap()s, which libFuzzer records as a crash):
//   success  attr.size == sizeof(perf_event_attr); text is the input without leading/trailing space; name is not
//            empty; the clocks ("wall-time", "tsc") are exactly those two strings
//   failure  the code is EINVAL or ENOENT (generic category); the message is not empty, quotes the whole input as
//            '...' and ends with the input on a line of its own followed by a caret line "^~~~" whose caret points
//            into the input or just past its end
//   both     parsing the same input again gives the same result
//
// Built two ways (tests/fuzz/CMakeLists.txt): with -fsanitize=fuzzer for scripts/fuzz, and with replay_main.cpp
// for the corpus replay that runs in every build (ctest -R fuzz-corpus-replay).
#include "fake_sysfs.hpp"

#include <pmc/event.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace {

const pmc_test::FakeSysfs& fake_sysfs() {
    static const auto* tree = new pmc_test::FakeSysfs(); // lives until exit; see cleanup() below
    return *tree;
}

// The fake tree is a directory under /tmp; remove it when the process exits normally (libFuzzer exits through
// exit() after -max_total_time / -runs, so the destructor of a function-local static would also do, but a leaked
// pointer plus atexit keeps the destruction order independent of libFuzzer's own statics).
void cleanup() { delete &fake_sysfs(); }

// What the parser may call whitespace around the event (pmc/detail/text.hpp is_space).
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

std::string printable(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    return out;
}

[[noreturn]] void violated(const char* what, std::string_view input, std::string_view root, const std::string& detail) {
    std::fprintf(stderr, "\npmc fuzz_event: invariant violated: %s\n  root:   %s\n  input:  \"%s\"\n  detail: %s\n", what,
                 std::string(root).c_str(), printable(input).c_str(), printable(detail).c_str());
    std::fflush(stderr);
    __builtin_trap();
}

bool same_spec(const pmc::EventSpec& a, const pmc::EventSpec& b) {
    return a.text == b.text && a.name == b.name && a.kind == b.kind &&
           std::memcmp(&a.attr, &b.attr, sizeof a.attr) == 0 && a.pmu == b.pmu && a.modifiers == b.modifiers &&
           a.core_pmu == b.core_pmu && a.guest_host_explicit == b.guest_host_explicit &&
           a.precise_max == b.precise_max;
}

// The message must end with "\n    <input>\n    <spaces>^<tildes>", the caret within [0, input.size()].
void check_caret(const std::string& msg, std::string_view input, std::string_view root) {
    std::size_t end = msg.size();
    while (end > 0 && msg[end - 1] == '~') --end;
    if (end == 0 || msg[end - 1] != '^') violated("the message does not end with a caret line", input, root, msg);
    const std::size_t caret = end - 1;
    std::size_t line = caret;
    while (line > 0 && msg[line - 1] == ' ') --line;
    if (line == 0 || msg[line - 1] != '\n' || caret - line < 4)
        violated("the caret line is not indented by four spaces", input, root, msg);
    const std::size_t column = caret - line - 4;
    if (column > input.size())
        violated("the caret points past the end of the input", input, root,
                 "column " + std::to_string(column) + " of " + std::to_string(input.size()) + ": " + msg);
    const std::size_t tildes = msg.size() - end;
    if (column + tildes > input.size())
        violated("the caret's underline runs past the end of the input", input, root, msg);
    const std::string echo = "\n    " + std::string(input);
    const std::size_t echo_end = line - 1; // the '\n' that starts the caret line
    if (echo_end < echo.size() || msg.compare(echo_end - echo.size(), echo.size(), echo) != 0)
        violated("the input is not echoed on the line above the caret", input, root, msg);
}

// Checks the invariants for one input against one root; returns whether it parsed.
bool check(std::string_view input, std::string_view root) {
    const pmc::Result<pmc::EventSpec> first = pmc::try_parse_event(input, root);
    if (first.ok()) {
        const pmc::EventSpec& spec = first.value();
        if (spec.attr.size != sizeof(perf_event_attr))
            violated("attr.size != sizeof(perf_event_attr)", input, root, std::to_string(spec.attr.size));
        if (spec.text != trimmed(input)) violated("text is not the trimmed input", input, root, spec.text);
        if (spec.name.empty()) violated("the display name is empty", input, root, spec.text);
        if (spec.kind != pmc::EventKind::perf && spec.text != "wall-time" && spec.text != "tsc")
            violated("a pmc clock from something other than 'wall-time' or 'tsc'", input, root, spec.text);
        if (spec.attr.precise_ip > 3) violated("precise_ip > 3", input, root, spec.text);
    } else {
        const pmc::Failure& f = first.failure();
        const int code = f.code.value();
        if (f.code.category() != std::generic_category() || (code != EINVAL && code != ENOENT))
            violated("the failure code is neither EINVAL nor ENOENT", input, root,
                     f.code.category().name() + std::string(":") + std::to_string(code) + " " + f.message);
        if (f.message.empty()) violated("the failure message is empty", input, root, "");
        if (f.message.find("'" + std::string(input) + "'") == std::string::npos)
            violated("the failure message does not quote the input", input, root, f.message);
        check_caret(f.message, input, root);
    }

    const pmc::Result<pmc::EventSpec> second = pmc::try_parse_event(input, root);
    if (first.ok() != second.ok()) violated("parsing twice gives different outcomes", input, root, "");
    if (first.ok() ? !same_spec(first.value(), second.value())
                   : (first.failure().code != second.failure().code ||
                      first.failure().message != second.failure().message))
        violated("parsing twice gives different results", input, root, "");
    return first.ok();
}

bool last_ok = false; // the outcome against the fake tree, for the replay's ok-/bad- seed check

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // scripts/fuzz reads this line to remove the tree when a crash ends the process without running atexit.
    std::fprintf(stderr, "pmc fuzz_event: fake sysfs tree: %s\n", fake_sysfs().root().c_str());
    std::atexit(cleanup);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A view of libFuzzer's buffer, which holds exactly `size` bytes: ASan reports any read past the input's end.
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    last_ok = check(input, fake_sysfs().root());
    if (size < 64) check(input, pmc::default_sysfs_root);
    return 0;
}

// For replay_main.cpp: whether the last input parsed against the fake tree.
extern "C" int pmc_fuzz_last_input_parsed() { return last_ok ? 1 : 0; }
