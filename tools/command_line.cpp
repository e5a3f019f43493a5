// SPDX-License-Identifier: MIT
// pmc_cli::CommandLine over CLI11: the one file that includes CLI11 (see command_line.hpp).
#include "command_line.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <utility>

namespace pmc_cli {

namespace {

CLI::Option* cli(void* option) { return static_cast<CLI::Option*>(option); }

bool is_option(const std::string& a) { return a.size() > 1 && a[0] == '-' && a != "--"; }

std::string unknown_option(const std::string& a) {
    const auto eq = a.find('=');
    return "unknown option '" + (a.compare(0, 2, "--") == 0 && eq != std::string::npos ? a.substr(0, eq) : a) + "'";
}

} // namespace

std::size_t Option::count() const { return option_ ? cli(option_)->count() : 0; }

std::string Option::name() const { return option_ ? cli(option_)->get_name() : std::string(); }

Option& Option::one_value_each() {
    if (option_) cli(option_)->allow_extra_args(false);
    return *this;
}

Option& Option::not_empty() {
    if (option_)
        cli(option_)->check(CLI::Validator(
            [](std::string& value) {
                return value.empty() ? std::string("was given an empty value: give one, or leave the option out")
                                     : std::string();
            },
            "", "not empty"));
    return *this;
}

struct CommandLine::Parser {
    CLI::App app;

    /// The option's description (what its value is), or `otherwise`.
    std::string described(const std::string& name, const char* otherwise) const {
        const CLI::Option* o = app.get_option_no_throw(name);
        return o && !o->get_description().empty() ? o->get_description() : otherwise;
    }

    /// What the user wrote wrong, in our words: CLI11's own message where it is clear.
    std::string what_is_wrong(const CLI::ParseError& e) const {
        const std::string text = e.what();
        if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
            std::vector<std::string> extra;
            for (auto& a : app.remaining())
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
            // "--D1: At Most 1 required but received 2": an option that takes one value, given again.
            const std::string received = "but received ";
            if (text.find("At Most 1 ") != std::string::npos && text.find(received) != std::string::npos)
                return name + " was given " + text.substr(text.find(received) + received.size()) +
                       " times: it takes one value; give it once";
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
};

CommandLine::CommandLine(std::string program, std::string help)
    : program_(std::move(program)), help_(std::move(help)), parser_(std::make_unique<Parser>()) {
    CLI::App& app = parser_->app;
    app.name(program_);
    app.set_help_flag("-h,--help");
    // CLI11's generated help is never shown: the hand-written one is the program's documentation.
    app.formatter_fn([this](const CLI::App*, std::string, CLI::AppFormatMode) { return help_; });
}

CommandLine::~CommandLine() = default;

Option CommandLine::option(const std::string& names, std::string& value, const std::string& description) {
    return Option(parser_->app.add_option(names, value, description));
}

Option CommandLine::option(const std::string& names, std::vector<std::string>& values,
                           const std::string& description) {
    return Option(parser_->app.add_option(names, values, description));
}

Option CommandLine::flag(const std::string& names, bool& value) { return Option(parser_->app.add_flag(names, value)); }

Option CommandLine::flag(const std::string& names, std::string& value, const std::string& bare) {
    // CLI11: {X} is what a bare flag gives. Given twice (--cache --cache=host) it is refused, not the last taken.
    CLI::Option* o = parser_->app.add_flag(names + "{" + bare + "}", value);
    o->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    return Option(o);
}

void CommandLine::command_follows() { parser_->app.prefix_command(); }

void CommandLine::allow_extras() { parser_->app.allow_extras(); }

std::optional<int> CommandLine::parse(std::vector<std::string> args) {
    CLI::App& app = parser_->app;
    // "--name=" with nothing after '=': CLI11 would take it as the flag alone (--cache=) or take the next word as
    // the value (--D1= -- prog: "--"). Refused, up to the command's start.
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") break;
        if (!is_option(a)) {
            if (app.get_prefix_command()) break; // the command
            continue;
        }
        const auto eq = a.find('=');
        if (a.compare(0, 2, "--") != 0) continue;
        const std::string name = a.substr(0, eq);
        const CLI::Option* o = app.get_option_no_throw(name);
        if (!o) continue;
        if (eq == a.size() - 1)
            return usage_error(name + " was given an empty value ('" + a + "'): give one, or leave the option out");
        if (eq == std::string::npos && o->get_items_expected_min() > 0) ++i; // (its value: the next word)
    }
    std::reverse(args.begin(), args.end()); // CLI11 takes them last first
    try {
        app.parse(args);
    } catch (const CLI::CallForHelp&) {
        return print_help(program_, help_);
    } catch (const CLI::ParseError& e) {
        return usage_error(parser_->what_is_wrong(e));
    }
    if (app.get_prefix_command()) {
        // Unknown options before the command are left with it: the command starts at the first word that is not
        // an option, or after "--".
        const auto rest = app.remaining();
        if (!rest.empty() && is_option(rest.front())) return usage_error(unknown_option(rest.front()));
    }
    return std::nullopt;
}

std::size_t CommandLine::count(const std::string& name) const { return parser_->app.count(name); }

std::vector<std::string> CommandLine::remaining() const { return parser_->app.remaining(); }

std::vector<std::string> CommandLine::command() const {
    auto rest = parser_->app.remaining();
    if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
    return rest;
}

} // namespace pmc_cli
