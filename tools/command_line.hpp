// SPDX-License-Identifier: MIT
// One way for every pmc program (pmc and its commands, pmc-memory and the memory experiments, the examples and the
// benchmarks) to read its command line and to fail. CLI11 parses; the program's own hand-written help is its
// -h/--help (to stdout, status 0); and every usage error reads the same, on stderr, with status 1:
//
//     PROGRAM: WHAT IS WRONG
//     Run 'PROGRAM --help' for usage.
//
// PROGRAM is what the user typed to run it: "pmc", "pmc count", "pmc-memory".
//
//     pmc_cli::CommandLine cl("pmc-memory", help_text);
//     cl.option("--max", max_text, "a size such as 64M");         // the description: what the value is
//     if (auto status = cl.parse(argc, argv)) return *status;      // --help, or a usage error
//     if (!valid(max_text)) return cl.usage_error("--max needs a size such as 64M, not '" + max_text + "'");
//
// Only command_line.cpp includes CLI11: its headers cost 6 s of compile time per file at -O2 and 26 s under the
// sanitizers, and 21 programs include this one.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pmc_cli {

/// A usage error: the two lines on stderr; returns the status to exit with (1). For what parsing cannot see (a
/// value out of range, options that exclude each other, a missing argument).
inline int usage_error(const std::string& program, const std::string& why) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", program.c_str(), why.c_str(), program.c_str());
    return 1;
}

/// An option's whole number: digits only (strtoull alone takes "-1", " 5" and "1e3" in part), at most `max`.
inline std::optional<std::uint64_t> whole_number(const std::string& text, std::uint64_t max = UINT64_MAX) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE || v > max) return std::nullopt;
    return static_cast<std::uint64_t>(v);
}

/// Prints a help text to stdout, as -h/--help does: returns 0, or 1 when it cannot be written (said on stderr).
inline int print_help(const std::string& program, const std::string& help) {
    std::fputs(help.c_str(), stdout);
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        const int err = errno;
        std::fprintf(stderr, "%s: cannot write the help to standard output: %s\n", program.c_str(), std::strerror(err));
        return 1;
    }
    return 0;
}

/// One option of a CommandLine: how often it was given (after parse()). A default-constructed one was never declared.
class Option {
public:
    Option() = default;
    std::size_t count() const;
    bool given() const { return count() > 0; }
    /// Its name as errors give it: "--top", "-c".
    std::string name() const;
    /// A repeatable option (-e A -e B into a vector) takes one value each time it is given: otherwise a vector
    /// option takes every word that follows it (-e A COMMAND would take COMMAND as an event).
    Option& one_value_each();
    /// An empty value (`--D1 ''`, an unset shell variable) is a usage error, not the option left out.
    Option& not_empty();

private:
    friend class CommandLine;
    explicit Option(void* option) : option_(option) {}
    void* option_ = nullptr; // a CLI::Option, owned by the CommandLine
};

/// A whole-number option's value, read as `text` (CLI11's own conversion takes "+5", " 5" and "-1"): `fallback`
/// when `option` was not given, nothing when the text is not a whole number up to `max`.
inline std::optional<std::uint64_t> whole_number_option(const Option& option, const std::string& text,
                                                        std::uint64_t fallback, std::uint64_t max = UINT64_MAX) {
    if (!option.given()) return fallback;
    return whole_number(text, max);
}

/// A program's command line: options bound to variables, whose -h/--help prints the program's own help text, and
/// whose parse errors become usage errors.
///
/// An option taking a value gets a description that says what the value is ("a counter name"): where the value is
/// missing, the error then reads "--counter needs a counter name". A name in capitals ("FILE") is positional.
class CommandLine {
public:
    CommandLine(std::string program, std::string help);
    ~CommandLine();
    CommandLine(const CommandLine&) = delete;
    CommandLine& operator=(const CommandLine&) = delete;

    /// NAMES: "--name", "-n,--name" or "NAME" (positional).
    Option option(const std::string& names, std::string& value, const std::string& description);
    Option option(const std::string& names, std::vector<std::string>& values, const std::string& description);
    Option flag(const std::string& names, bool& value);
    /// A flag that may take a value after '=': `value` gets `bare` when the flag is given alone (--cache), the value
    /// when one follows (--cache=host), and stays "" when the flag is absent. A value never comes from the next
    /// word, so `--cache ./prog` leaves ./prog to the command.
    Option flag(const std::string& names, std::string& value, const std::string& bare);
    /// The program runs a command (pmc count -- COMMAND ARGS): the first word that is not an option, or what
    /// follows "--", and everything after it, is the command (command()).
    void command_follows();
    /// Words that are no option are left for the program (remaining()) instead of being a usage error.
    void allow_extras();

    const std::string& program() const { return program_; }
    const std::string& help() const { return help_; }

    /// Parses `args` (the arguments, without the program's name). Returns nothing when the program goes on, or the
    /// status to exit with now: 0 after --help printed the help, 1 after a usage error was said.
    std::optional<int> parse(std::vector<std::string> args);
    std::optional<int> parse(int argc, const char* const* argv) {
        return parse(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc));
    }

    /// How often the option NAME was given.
    std::size_t count(const std::string& name) const;
    /// What parsing left: the command and its arguments (command_follows), or the extras (allow_extras).
    std::vector<std::string> remaining() const;
    /// For a program that runs a command: the command and its arguments, as given after the options (and after
    /// "--", which is not part of it). Empty when none was given.
    std::vector<std::string> command() const;

    /// A usage error of this program (see pmc_cli::usage_error).
    int usage_error(const std::string& why) const { return pmc_cli::usage_error(program_, why); }

private:
    struct Parser;
    std::string program_, help_;
    std::unique_ptr<Parser> parser_;
};

} // namespace pmc_cli
