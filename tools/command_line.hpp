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
//     cl.app().add_option("--max", max_text, "a size such as 64M");   // the description: what the value is
//     if (auto status = cl.parse(argc, argv)) return *status;            // --help, or a usage error
//     if (!valid(max_text)) return cl.usage_error("--max needs a size such as 64M, not '" + max_text + "'");
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pmc_cli {

/// A usage error: the two lines on stderr; returns the status to exit with (1). For what parsing cannot see (a
/// value out of range, options that exclude each other, a missing argument).
inline int usage_error(const std::string& program, const std::string& why) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", program.c_str(), why.c_str(), program.c_str());
    return 1;
}

/// A program's command line: a CLI::App whose -h/--help prints the program's own help text, and whose parse errors
/// become usage errors.
///
/// Options taking a value should get a description that says what the value is ("a counter name"): where the value
/// is missing, the error then reads "--counter needs a counter name" instead of CLI11's "1 required TEXT missing".
/// A program that runs a command (pmc count -- COMMAND ARGS) sets app().prefix_command() and reads it from command().
/// A repeatable option (-e A -e B into a vector) needs ->allow_extra_args(false): CLI11 otherwise lets a vector
/// option take every word that follows it (-e A COMMAND would take COMMAND as an event).
class CommandLine {
public:
    CommandLine(std::string program, std::string help) : program_(std::move(program)), help_(std::move(help)) {
        app_.name(program_);
        app_.set_help_flag("-h,--help");
        // CLI11's generated help is never shown: the hand-written one is the program's documentation.
        app_.formatter_fn([this](const CLI::App*, std::string, CLI::AppFormatMode) { return help_; });
    }
    CommandLine(const CommandLine&) = delete;
    CommandLine& operator=(const CommandLine&) = delete;

    CLI::App& app() { return app_; }
    const std::string& program() const { return program_; }
    const std::string& help() const { return help_; }

    /// Parses `args` (the arguments, without the program's name). Returns nothing when the program goes on, or the
    /// status to exit with now: 0 after --help printed the help, 1 after a usage error was said.
    std::optional<int> parse(std::vector<std::string> args) {
        std::reverse(args.begin(), args.end()); // CLI11 takes them last first
        try {
            app_.parse(args);
        } catch (const CLI::CallForHelp&) {
            return print_help();
        } catch (const CLI::ParseError& e) {
            return usage_error(what_is_wrong(e));
        }
        if (app_.get_prefix_command()) {
            // Unknown options before the command are left with it: the command starts at the first word that is
            // not an option, or after "--".
            const auto rest = app_.remaining();
            if (!rest.empty() && is_option(rest.front())) return usage_error(unknown_option(rest.front()));
        }
        return std::nullopt;
    }
    std::optional<int> parse(int argc, const char* const* argv) {
        return parse(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc));
    }

    /// For a program that runs a command (app().prefix_command()): the command and its arguments, as given after
    /// the options (and after "--", which is not part of it). Empty when none was given.
    std::vector<std::string> command() const {
        auto rest = app_.remaining();
        if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
        return rest;
    }

    /// A usage error of this program (see pmc_cli::usage_error).
    int usage_error(const std::string& why) const { return pmc_cli::usage_error(program_, why); }

    /// What the user wrote wrong, in our words: CLI11's own message where it is clear.
    std::string what_is_wrong(const CLI::ParseError& e) const {
        const std::string text = e.what();
        if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
            std::vector<std::string> extra;
            for (auto& a : app_.remaining())
                if (a != "--") extra.push_back(a);
            if (extra.empty()) return text;
            if (is_option(extra.front())) return unknown_option(extra.front());
            return "unexpected argument '" + extra.front() + "'";
        }
        if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
            // "--counter: 1 required TEXT missing" (the value is missing), or "--json was given a disallowed flag
            // override" (a value given to a flag: --json=yes).
            const std::string name = text.substr(0, text.find_first_of(": "));
            if (text.find(" required ") != std::string::npos && text.find(" missing") != std::string::npos)
                return name + " needs " + described(name, "a value");
            if (text.find("flag override") != std::string::npos) return name + " takes no value";
            return text;
        }
        if (dynamic_cast<const CLI::ConversionError*>(&e)) {
            // "Could not convert: --top = abc"
            const std::string prefix = "Could not convert: ";
            const auto eq = text.find(" = ");
            if (text.compare(0, prefix.size(), prefix) == 0 && eq != std::string::npos) {
                const std::string name = text.substr(prefix.size(), eq - prefix.size());
                return name + " needs " + described(name, "another value") + ", not '" + text.substr(eq + 3) + "'";
            }
            return text;
        }
        if (dynamic_cast<const CLI::ExcludesError*>(&e)) {
            const auto at = text.find(" excludes ");
            if (at != std::string::npos)
                return text.substr(0, at) + " and " + text.substr(at + 10) + " exclude each other: give one";
        }
        return text; // "FILE is required", a validator's own message
    }

private:
    static bool is_option(const std::string& a) { return a.size() > 1 && a[0] == '-' && a != "--"; }
    static std::string unknown_option(const std::string& a) {
        const auto eq = a.find('=');
        return "unknown option '" + (a.compare(0, 2, "--") == 0 && eq != std::string::npos ? a.substr(0, eq) : a) +
               "'";
    }
    /// The option's description (what its value is), or `otherwise`.
    std::string described(const std::string& name, const char* otherwise) const {
        const CLI::Option* o = app_.get_option_no_throw(name);
        return o && !o->get_description().empty() ? o->get_description() : otherwise;
    }
    int print_help() const {
        std::fputs(help_.c_str(), stdout);
        if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
            const int err = errno;
            std::fprintf(stderr, "%s: cannot write the help to standard output: %s\n", program_.c_str(),
                         std::strerror(err));
            return 1;
        }
        return 0;
    }

    std::string program_, help_;
    CLI::App app_;
};

} // namespace pmc_cli
