// SPDX-License-Identifier: MIT
// A strict JSON validator (RFC 8259 grammar, no extensions) for checking the tools' --json output.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace pmc_test {

class JsonCheck {
public:
    /// True if `text` is exactly one JSON value (with surrounding whitespace).
    static bool valid(std::string_view text) {
        JsonCheck j{text};
        j.ws();
        if (!j.value()) return false;
        j.ws();
        return j.pos_ == text.size();
    }

private:
    explicit JsonCheck(std::string_view t) : s_(t) {}
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
    bool literal(std::string_view word) {
        if (s_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }
    bool string() {
        if (!eat('"')) return false;
        while (pos_ < s_.size()) {
            unsigned char c = static_cast<unsigned char>(s_[pos_++]);
            if (c == '"') return true;
            if (c < 0x20) return false;
            if (c == '\\') {
                if (pos_ >= s_.size()) return false;
                char e = s_[pos_++];
                if (e == 'u') {
                    for (int i = 0; i < 4; ++i)
                        if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_++]))) return false;
                } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
                    return false;
                }
            }
        }
        return false;
    }
    bool number() {
        std::size_t start = pos_;
        eat('-');
        if (eat('0')) {
        } else if (pos_ < s_.size() && s_[pos_] >= '1' && s_[pos_] <= '9') {
            while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        } else {
            return false;
        }
        if (eat('.')) {
            if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return false;
            while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        }
        if (eat('e') || eat('E')) {
            if (!eat('+')) eat('-');
            if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return false;
            while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        }
        return pos_ > start;
    }
    bool value() {
        ws();
        if (pos_ >= s_.size()) return false;
        switch (s_[pos_]) {
        case '{': return object();
        case '[': return array();
        case '"': return string();
        case 't': return literal("true");
        case 'f': return literal("false");
        case 'n': return literal("null");
        default: return number();
        }
    }
    bool object() {
        eat('{');
        ws();
        if (eat('}')) return true;
        do {
            ws();
            if (!string()) return false;
            ws();
            if (!eat(':') || !value()) return false;
            ws();
        } while (eat(','));
        return eat('}');
    }
    bool array() {
        eat('[');
        ws();
        if (eat(']')) return true;
        do {
            if (!value()) return false;
            ws();
        } while (eat(','));
        return eat(']');
    }
    std::string_view s_;
    std::size_t pos_ = 0;
};

} // namespace pmc_test
