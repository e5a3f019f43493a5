// SPDX-License-Identifier: MIT
// pmc/detail/text.hpp: small string helpers for parsing event strings and sysfs files (not on the hot path).
#pragma once

#include <pmc/config.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

PMC_BEGIN_NAMESPACE
namespace detail {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

inline char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

inline bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

inline bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

/// Parses perf's number syntax: decimal digits, or hex digits after a lowercase "0x" (perf's lexer rejects
/// "0X"). Returns nullopt for anything else, including values that do not fit in 64 bits.
inline std::optional<std::uint64_t> parse_number(std::string_view s) {
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && s[1] == 'x') {
        base = 16;
        s.remove_prefix(2);
    }
    if (s.empty()) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : s) {
        unsigned digit;
        if (c >= '0' && c <= '9')
            digit = static_cast<unsigned>(c - '0');
        else if (base == 16 && c >= 'a' && c <= 'f')
            digit = static_cast<unsigned>(c - 'a' + 10);
        else if (base == 16 && c >= 'A' && c <= 'F')
            digit = static_cast<unsigned>(c - 'A' + 10);
        else
            return std::nullopt;
        if (value > (UINT64_MAX - digit) / static_cast<unsigned>(base)) return std::nullopt;
        value = value * static_cast<unsigned>(base) + digit;
    }
    return value;
}

/// A number as text in a buffer of its own: no allocation and nothing to destroy, so passing one to concat()
/// costs its caller a call and a few stores (a std::to_string temporary expands, with its cleanup, in place).
struct Digits {
    char text[24];
    std::size_t size;
    operator std::string_view() const noexcept { return {text, size}; }
};

/// `v` in decimal, as std::to_string writes it.
BOOST_NOINLINE inline Digits decimal(unsigned long long v) {
    Digits d{};
    const int n = std::snprintf(d.text, sizeof d.text, "%llu", v);
    d.size = n > 0 ? static_cast<std::size_t>(n) : 0;
    return d;
}
BOOST_NOINLINE inline Digits decimal(long long v) {
    Digits d{};
    const int n = std::snprintf(d.text, sizeof d.text, "%lld", v);
    d.size = n > 0 ? static_cast<std::size_t>(n) : 0;
    return d;
}
inline Digits decimal(unsigned long v) { return decimal(static_cast<unsigned long long>(v)); }
inline Digits decimal(unsigned v) { return decimal(static_cast<unsigned long long>(v)); }
inline Digits decimal(long v) { return decimal(static_cast<long long>(v)); }
inline Digits decimal(int v) { return decimal(static_cast<long long>(v)); }

/// `v` in hex with a 0x prefix ("0x1c"; "0" for zero, as printf's %#llx).
BOOST_NOINLINE inline Digits hex_digits(std::uint64_t v) {
    Digits d{};
    const int n = std::snprintf(d.text, sizeof d.text, "%#llx", static_cast<unsigned long long>(v));
    d.size = n > 0 ? static_cast<std::size_t>(n) : 0;
    return d;
}

/// The pieces joined into one string. pmc's messages are built with it rather than with chains of
/// std::string operator+, which the optimizer expands in place (each link with its temporary and that
/// temporary's cleanup) in every file that opens a counter; this is one call per message.
BOOST_NOINLINE inline std::string concat(std::initializer_list<std::string_view> pieces) {
    std::size_t size = 0;
    for (auto p : pieces) size += p.size();
    std::string s;
    s.reserve(size);
    for (auto p : pieces) s.append(p.data(), p.size());
    return s;
}
/// Appends the pieces to `s` (one call, as concat()).
BOOST_NOINLINE inline void append(std::string& s, std::initializer_list<std::string_view> pieces) {
    for (auto p : pieces) s.append(p.data(), p.size());
}

inline std::string hex(std::uint64_t v) { return std::string(hex_digits(v)); }

/// Reads a whole (small) file; nullopt with errno set if it cannot be read (EISDIR for a directory, which an
/// ifstream would have read as empty text).
inline std::optional<std::string> read_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            const int e = errno;
            ::close(fd);
            errno = e;
            return std::nullopt;
        }
    }
    ::close(fd);
    return out;
}

/// Joins a directory and a name with exactly one '/'.
inline std::string join_path(std::string_view dir, std::string_view name) {
    std::string p(dir);
    if (!p.empty() && p.back() != '/') p += '/';
    p += name;
    return p;
}

} // namespace detail
PMC_END_NAMESPACE
