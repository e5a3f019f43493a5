// SPDX-License-Identifier: MIT
// pmc/error.hpp: how pmc reports failure.
//
// Every failure is a pmc::Failure: an errno-style std::error_code plus a message written for a person (what
// failed, why, and how to fix it). Throwing APIs raise it as pmc::error (a std::system_error); the try_ APIs
// return it inside a pmc::Result instead.
#pragma once

#include <pmc/config.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

PMC_BEGIN_NAMESPACE

/// A failure: the errno-style code and a message that says what failed, why, and the fix.
struct Failure {
    std::error_code code;
    std::string message;
};

/// The exception pmc throws. code() carries the errno (EINVAL for a bad event string, the errno of the failed
/// system call otherwise); what() is the whole human-readable message, without std::system_error's suffix.
class BOOST_SYMBOL_VISIBLE error : public std::system_error {
public:
    explicit error(Failure failure) : std::system_error(failure.code), message_(std::move(failure.message)) {}
    error(std::error_code code, std::string message) : error(Failure{code, std::move(message)}) {}

    const char* what() const noexcept override { return message_.c_str(); }

private:
    std::string message_;
};

/// Throws `failure` as pmc::error; with exceptions disabled, prints it and aborts.
[[noreturn]] BOOST_NOINLINE PMC_COLD inline void raise(Failure failure) {
#if defined(BOOST_NO_EXCEPTIONS)
    std::fprintf(stderr, "pmc: fatal: %s\n", failure.message.c_str());
    std::abort();
#else
    throw error(std::move(failure));
#endif
}

/// Makes a Failure from an errno value and a message.
inline Failure make_failure(int errno_value, std::string message) {
    return Failure{std::error_code(errno_value, std::generic_category()), std::move(message)};
}

/// Either a T or the Failure that prevented it: pmc's non-throwing results (an expected-like type).
template <class T>
class Result {
public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
    Result(Failure failure) : state_(std::in_place_index<1>, std::move(failure)) {}

    bool ok() const noexcept { return state_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    /// The value; raises the failure as pmc::error if there is none.
    T& value() & {
        check();
        return std::get<0>(state_);
    }
    const T& value() const& {
        check();
        return std::get<0>(state_);
    }
    T&& value() && {
        check();
        return std::get<0>(std::move(state_));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T&& operator*() && { return std::move(*this).value(); }

    /// The failure; raises pmc::error (EINVAL, saying so) when there is none: check ok() first.
    const Failure& failure() const {
        if (ok())
            raise(make_failure(EINVAL, "pmc::Result::failure() was called on a result that holds a value, not a "
                                       "failure: check ok() (or the result's bool) before asking for the failure"));
        return *std::get_if<1>(&state_);
    }

private:
    void check() const {
        if (!ok()) raise(*std::get_if<1>(&state_));
    }
    std::variant<T, Failure> state_;
};

PMC_END_NAMESPACE
