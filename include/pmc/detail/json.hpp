// SPDX-License-Identifier: MIT
// pmc/detail/json.hpp: a small strict JSON reader (RFC 8259) for the files pmc's own programs write (the memory
// experiment's latency.json). Not on any hot path. Errors say where (line, column) and what was expected; nesting is
// bounded so that a hostile file cannot exhaust the stack.
#pragma once

#include <pmc/config.hpp>
#include <pmc/error.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE
namespace detail {

struct JsonValue {
    enum class Type { null, boolean, number, string, array, object };
    Type type = Type::null;
    bool boolean = false;
    double number = 0;
    std::string string;
    std::vector<JsonValue> items;                           // array
    std::vector<std::pair<std::string, JsonValue>> members; // object, in file order

    bool is_number() const { return type == Type::number; }
    bool is_string() const { return type == Type::string; }
    bool is_array() const { return type == Type::array; }
    bool is_object() const { return type == Type::object; }
    /// The member `key` of an object (the first, if repeated); null if absent or not an object.
    const JsonValue* find(std::string_view key) const {
        if (type != Type::object) return nullptr;
        for (const auto& m : members)
            if (m.first == key) return &m.second;
        return nullptr;
    }
};

class JsonReader {
public:
    /// Parses exactly one JSON value; `source` names the text in errors.
    static Result<JsonValue> parse(std::string_view text, std::string_view source) {
        JsonReader r(text);
        JsonValue v;
        r.ws();
        if (r.value(v, 0)) {
            r.ws();
            if (r.pos_ == text.size()) return v;
            r.fail("the end of the document (there is more after the first value)");
        }
        return make_failure(EINVAL, std::string(source) + ": not valid JSON: at line " + std::to_string(r.line()) +
                                        ", column " + std::to_string(r.column()) + ": expected " + r.expected_);
    }

private:
    static constexpr int max_depth = 64;
    explicit JsonReader(std::string_view t) : s_(t) {}

    bool fail(const char* expected) {
        if (expected_.empty()) expected_ = expected;
        return false;
    }
    std::size_t line() const {
        std::size_t n = 1;
        for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) n += s_[i] == '\n';
        return n;
    }
    std::size_t column() const {
        std::size_t nl = s_.rfind('\n', pos_ ? pos_ - 1 : 0);
        return nl == std::string_view::npos || nl >= pos_ ? pos_ + 1 : pos_ - nl;
    }
    bool eat(char c) {
        if (pos_ < s_.size() && s_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    void ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
    }
    bool literal(std::string_view w) {
        if (s_.substr(pos_, w.size()) != w) return false;
        pos_ += w.size();
        return true;
    }

    bool value(JsonValue& v, int depth) {
        if (depth > max_depth) return fail("at most 64 levels of nesting");
        if (pos_ >= s_.size()) return fail("a value (the text ends here)");
        char c = s_[pos_];
        if (c == '{') return object(v, depth);
        if (c == '[') return array(v, depth);
        if (c == '"') {
            v.type = JsonValue::Type::string;
            return string(v.string);
        }
        if (literal("true")) {
            v.type = JsonValue::Type::boolean;
            v.boolean = true;
            return true;
        }
        if (literal("false")) {
            v.type = JsonValue::Type::boolean;
            return true;
        }
        if (literal("null")) return true;
        return number(v);
    }
    bool object(JsonValue& v, int depth) {
        v.type = JsonValue::Type::object;
        ++pos_;
        ws();
        if (eat('}')) return true;
        for (;;) {
            ws();
            std::string key;
            if (pos_ >= s_.size() || s_[pos_] != '"') return fail("a member name in double quotes");
            if (!string(key)) return false;
            ws();
            if (!eat(':')) return fail("':' after a member name");
            ws();
            JsonValue member;
            if (!value(member, depth + 1)) return false;
            v.members.emplace_back(std::move(key), std::move(member));
            ws();
            if (eat('}')) return true;
            if (!eat(',')) return fail("',' or '}' in an object");
        }
    }
    bool array(JsonValue& v, int depth) {
        v.type = JsonValue::Type::array;
        ++pos_;
        ws();
        if (eat(']')) return true;
        for (;;) {
            ws();
            JsonValue item;
            if (!value(item, depth + 1)) return false;
            v.items.push_back(std::move(item));
            ws();
            if (eat(']')) return true;
            if (!eat(',')) return fail("',' or ']' in an array");
        }
    }
    static int hex_digit(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }
    bool string(std::string& out) {
        ++pos_; // the opening quote
        while (pos_ < s_.size()) {
            char c = s_[pos_++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return fail("no control characters inside a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) break;
            char e = s_[pos_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 0; i < 4; ++i) {
                    int d = pos_ < s_.size() ? hex_digit(s_[pos_]) : -1;
                    if (d < 0) return fail("four hexadecimal digits after \\u");
                    cp = cp * 16 + static_cast<unsigned>(d);
                    ++pos_;
                }
                // Names and labels are ASCII in pmc's files; other code points are kept as UTF-8 (surrogates as is).
                if (cp < 0x80) {
                    out += static_cast<char>(cp);
                } else if (cp < 0x800) {
                    out += static_cast<char>(0xC0 | (cp >> 6));
                    out += static_cast<char>(0x80 | (cp & 0x3F));
                } else {
                    out += static_cast<char>(0xE0 | (cp >> 12));
                    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                    out += static_cast<char>(0x80 | (cp & 0x3F));
                }
                break;
            }
            default: --pos_; return fail("an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX");
            }
        }
        return fail("a closing '\"' (the text ends inside a string)");
    }
    bool number(JsonValue& v) {
        std::size_t start = pos_;
        auto digits = [&] {
            std::size_t d = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
            return pos_ > d;
        };
        eat('-');
        if (!eat('0') && !digits()) {
            pos_ = start;
            return fail("a value: an object, array, string, number, true, false or null");
        }
        if (eat('.') && !digits()) return fail("digits after the decimal point");
        if ((eat('e') || eat('E'))) {
            if (!eat('+')) eat('-');
            if (!digits()) return fail("digits in the exponent");
        }
        std::string text(s_.substr(start, pos_ - start));
        v.type = JsonValue::Type::number;
        v.number = std::strtod(text.c_str(), nullptr);
        if (!std::isfinite(v.number)) {
            pos_ = start;
            return fail("a number that fits in a double");
        }
        return true;
    }

    std::string_view s_;
    std::size_t pos_ = 0;
    std::string expected_;
};

} // namespace detail
PMC_END_NAMESPACE
