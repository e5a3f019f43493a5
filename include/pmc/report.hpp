// SPDX-License-Identifier: MIT
// pmc/report.hpp: printing what pmc builds and measures — perf_event_attr in `perf stat -vv` layout, counts with
// their scaling and running fraction (fmt formatters; a table, CSV and JSON for a group's counts), and a small JSON
// writer for the tools' --json output. The only public header that needs {fmt}.
#pragma once

#include <pmc/config.hpp>
#include <pmc/counter.hpp>
#include <pmc/event.hpp>
#include <pmc/group.hpp>

#include <fmt/format.h>

#include <linux/perf_event.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

PMC_BEGIN_NAMESPACE

namespace detail {
struct BitName {
    std::uint64_t bit;
    const char* name;
};
inline std::string bit_names(std::uint64_t value, const BitName* names, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i)
        if (value & names[i].bit) out += (out.empty() ? "" : "|") + std::string(names[i].name);
    return out;
}
inline std::string sample_type_names(std::uint64_t v) {
    static constexpr BitName names[] = {
        {PERF_SAMPLE_IP, "IP"},
        {PERF_SAMPLE_TID, "TID"},
        {PERF_SAMPLE_TIME, "TIME"},
        {PERF_SAMPLE_ADDR, "ADDR"},
        {PERF_SAMPLE_READ, "READ"},
        {PERF_SAMPLE_CALLCHAIN, "CALLCHAIN"},
        {PERF_SAMPLE_ID, "ID"},
        {PERF_SAMPLE_CPU, "CPU"},
        {PERF_SAMPLE_PERIOD, "PERIOD"},
        {PERF_SAMPLE_STREAM_ID, "STREAM_ID"},
        {PERF_SAMPLE_RAW, "RAW"},
        {PERF_SAMPLE_BRANCH_STACK, "BRANCH_STACK"},
        {PERF_SAMPLE_REGS_USER, "REGS_USER"},
        {PERF_SAMPLE_STACK_USER, "STACK_USER"},
        {PERF_SAMPLE_IDENTIFIER, "IDENTIFIER"},
        {PERF_SAMPLE_REGS_INTR, "REGS_INTR"},
        {PERF_SAMPLE_DATA_SRC, "DATA_SRC"},
        {PERF_SAMPLE_WEIGHT, "WEIGHT"},
        {PERF_SAMPLE_PHYS_ADDR, "PHYS_ADDR"},
        {PERF_SAMPLE_AUX, "AUX"},
        {PERF_SAMPLE_CGROUP, "CGROUP"},
        {PERF_SAMPLE_DATA_PAGE_SIZE, "DATA_PAGE_SIZE"},
        {PERF_SAMPLE_CODE_PAGE_SIZE, "CODE_PAGE_SIZE"},
        {PERF_SAMPLE_WEIGHT_STRUCT, "WEIGHT_STRUCT"},
    };
    return bit_names(v, names, sizeof names / sizeof names[0]);
}
inline std::string read_format_names(std::uint64_t v) {
    static constexpr BitName names[] = {
        {PERF_FORMAT_TOTAL_TIME_ENABLED, "TOTAL_TIME_ENABLED"},
        {PERF_FORMAT_TOTAL_TIME_RUNNING, "TOTAL_TIME_RUNNING"},
        {PERF_FORMAT_ID, "ID"},
        {PERF_FORMAT_GROUP, "GROUP"},
        {1u << 4, "LOST"},
    };
    return bit_names(v, names, sizeof names / sizeof names[0]);
}
} // namespace detail

/// The non-zero fields of `attr` as (name, value text) pairs, in the order and spelling of perf's
/// perf_event_attr__fprintf (tools/perf/util/perf_event_attr_fprintf.c).
inline std::vector<std::pair<std::string, std::string>> attr_fields(const perf_event_attr& a) {
    std::vector<std::pair<std::string, std::string>> out;
    auto dec = [&](const char* name, std::uint64_t v) {
        if (v) out.emplace_back(name, fmt::format("{}", v));
    };
    auto hex = [&](const char* name, std::uint64_t v) {
        if (v) out.emplace_back(name, fmt::format("{:#x}", v));
    };
    dec("type", a.type);
    dec("size", a.size);
    hex("config", a.config);
    dec("{ sample_period, sample_freq }", a.sample_period);
    if (a.sample_type) out.emplace_back("sample_type", detail::sample_type_names(a.sample_type));
    if (a.read_format) out.emplace_back("read_format", detail::read_format_names(a.read_format));
    dec("disabled", a.disabled);
    dec("inherit", a.inherit);
    dec("pinned", a.pinned);
    dec("exclusive", a.exclusive);
    dec("exclude_user", a.exclude_user);
    dec("exclude_kernel", a.exclude_kernel);
    dec("exclude_hv", a.exclude_hv);
    dec("exclude_idle", a.exclude_idle);
    dec("mmap", a.mmap);
    dec("comm", a.comm);
    dec("freq", a.freq);
    dec("inherit_stat", a.inherit_stat);
    dec("enable_on_exec", a.enable_on_exec);
    dec("task", a.task);
    dec("watermark", a.watermark);
    dec("precise_ip", a.precise_ip);
    dec("mmap_data", a.mmap_data);
    dec("sample_id_all", a.sample_id_all);
    dec("exclude_host", a.exclude_host);
    dec("exclude_guest", a.exclude_guest);
    dec("exclude_callchain_kernel", a.exclude_callchain_kernel);
    dec("exclude_callchain_user", a.exclude_callchain_user);
    dec("mmap2", a.mmap2);
    dec("comm_exec", a.comm_exec);
    dec("use_clockid", a.use_clockid);
    dec("context_switch", a.context_switch);
    dec("write_backward", a.write_backward);
    dec("namespaces", a.namespaces);
    dec("ksymbol", a.ksymbol);
    dec("bpf_event", a.bpf_event);
    dec("aux_output", a.aux_output);
    dec("cgroup", a.cgroup);
    dec("text_poke", a.text_poke);
    dec("build_id", a.build_id);
    dec("inherit_thread", a.inherit_thread);
    dec("remove_on_exec", a.remove_on_exec);
    dec("sigtrap", a.sigtrap);
    dec("{ wakeup_events, wakeup_watermark }", a.wakeup_events);
    dec("bp_type", a.bp_type);
    hex("{ bp_addr, config1 }", a.bp_addr);
    hex("{ bp_len, config2 }", a.bp_len);
    if (a.branch_sample_type) out.emplace_back("branch_sample_type", fmt::format("{:#x}", a.branch_sample_type));
    hex("sample_regs_user", a.sample_regs_user);
    dec("sample_stack_user", a.sample_stack_user);
    if (a.clockid) out.emplace_back("clockid", fmt::format("{}", a.clockid));
    hex("sample_regs_intr", a.sample_regs_intr);
    dec("aux_watermark", a.aux_watermark);
    dec("sample_max_stack", a.sample_max_stack);
    dec("aux_sample_size", a.aux_sample_size);
    dec("sig_data", a.sig_data);
    return out;
}

/// `attr` exactly as `perf stat -vv` prints it (the block between its dashed lines, with its header line).
inline std::string attr_text(const perf_event_attr& attr) {
    std::string out = "perf_event_attr:\n";
    for (auto& [name, value] : attr_fields(attr)) out += fmt::format("  {:<32} {}\n", name, value);
    return out;
}

/// The fields perf stat adds to every event it opens for a command (sample_type, read_format, disabled, inherit,
/// enable_on_exec): applied to pmc's encoding, attr_text() matches perf's output line for line.
inline perf_event_attr as_perf_stat_opens_it(perf_event_attr attr) {
    attr.sample_type = PERF_SAMPLE_IDENTIFIER;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    attr.disabled = 1;
    attr.inherit = 1;
    attr.enable_on_exec = 1;
    return attr;
}

/// A small streaming JSON writer: enough for the tools' --json output, with correct string escaping.
class JsonWriter {
public:
    JsonWriter& begin_object() { return open('{'); }
    JsonWriter& end_object() { return close('}'); }
    JsonWriter& begin_array() { return open('['); }
    JsonWriter& end_array() { return close(']'); }

    JsonWriter& key(std::string_view k) {
        comma();
        append_string(k);
        out_ += ':';
        after_key_ = true;
        return *this;
    }
    JsonWriter& value(std::string_view s) {
        comma();
        append_string(s);
        return *this;
    }
    JsonWriter& value(const char* s) { return value(std::string_view(s)); }
    JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
    /// A char is a one-character string, not its code.
    JsonWriter& value(char c) { return value(std::string_view(&c, 1)); }
    JsonWriter& value(bool b) {
        comma();
        out_ += b ? "true" : "false";
        return *this;
    }
    JsonWriter& value(double d) {
        comma();
        out_ += std::isfinite(d) ? fmt::format("{}", d) : "null";
        return *this;
    }
    template <class Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool> &&
                                              !std::is_same_v<Int, char>, int> = 0>
    JsonWriter& value(Int i) {
        comma();
        out_ += fmt::format("{}", i);
        return *this;
    }
    JsonWriter& null() {
        comma();
        out_ += "null";
        return *this;
    }
    template <class T>
    JsonWriter& field(std::string_view k, const T& v) {
        key(k);
        return value(v);
    }

    const std::string& str() const { return out_; }

private:
    JsonWriter& open(char c) {
        comma();
        out_ += c;
        first_ = true;
        return *this;
    }
    JsonWriter& close(char c) {
        out_ += c;
        first_ = false;
        return *this;
    }
    void comma() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (!first_ && !out_.empty()) out_ += ',';
        first_ = false;
    }
    void append_string(std::string_view s) {
        out_ += '"';
        for (const char ch : s) {
            const auto c = static_cast<unsigned char>(ch);
            switch (c) {
            case '"': out_ += "\\\""; break;
            case '\\': out_ += "\\\\"; break;
            case '\n': out_ += "\\n"; break;
            case '\r': out_ += "\\r"; break;
            case '\t': out_ += "\\t"; break;
            default:
                if (c < 0x20)
                    out_ += fmt::format("\\u{:04x}", c);
                else
                    out_ += static_cast<char>(c);
            }
        }
        out_ += '"';
    }

    std::string out_;
    bool first_ = true;
    bool after_key_ = false;
};

/// Writes `attr`'s non-zero fields as a JSON object (config words as hex strings, like perf prints them).
inline void write_attr_json(JsonWriter& json, const perf_event_attr& attr) {
    json.begin_object();
    for (auto& [name, value] : attr_fields(attr)) {
        // perf's "{ bp_addr, config1 }" names two union members; JSON gets the plain one.
        std::string key = name;
        if (key == "{ bp_addr, config1 }") key = attr.type == PERF_TYPE_BREAKPOINT ? "bp_addr" : "config1";
        else if (key == "{ bp_len, config2 }") key = attr.type == PERF_TYPE_BREAKPOINT ? "bp_len" : "config2";
        else if (key == "{ sample_period, sample_freq }") key = attr.freq ? "sample_freq" : "sample_period";
        else if (key == "{ wakeup_events, wakeup_watermark }") key = "wakeup_events";
        bool numeric = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
        if (numeric)
            json.field(key, std::stoull(value));
        else
            json.field(key, value);
    }
    json.end_object();
}

// ---- counts --------------------------------------------------------------------------------------------------

/// "1234", "2468 (scaled from 1234: counted 50.0 % of the time)" or "not counted": a count as it should be read.
inline std::string describe(const EventCount& c) {
    if (!c.counted) return "not counted";
    if (!c.multiplexed()) return fmt::format("{}", c.raw);
    return fmt::format("{:.0f} (scaled from {}: counted {:.1f} % of the time)", c.estimate, c.raw,
                       100.0 * c.running_fraction);
}

/// An aligned table of a group's counts: event, count (scaled where multiplexed), raw, share of time counted.
inline std::string count_table(const std::vector<std::string>& names, const std::vector<EventCount>& counts) {
    std::size_t width = 5;
    for (const auto& n : names) width = std::max(width, n.size());
    std::string out = fmt::format("{:<{}}  {:>18}  {:>18}  {:>8}\n", "event", width, "count", "raw", "counted");
    for (std::size_t i = 0; i < counts.size() && i < names.size(); ++i) {
        const EventCount& c = counts[i];
        if (!c.counted)
            out += fmt::format("{:<{}}  {:>18}  {:>18}  {:>8}\n", names[i], width, "not counted", "-", "0 %");
        else
            out += fmt::format("{:<{}}  {:>18.0f}  {:>18}  {:>7.1f}%{}\n", names[i], width, c.estimate, c.raw,
                               100.0 * c.running_fraction, c.multiplexed() ? "  (scaled)" : "");
    }
    return out;
}

/// The same as CSV (RFC 4180): event,count,raw,running_fraction,counted (count empty when not counted). Given
/// `modelled` (one flag per count: a model's figure, not a count; pmc count --emulate --cache), a column modelled
/// says true or false; given `partial` (one flag per count: it lacks part of the run, e.g. a process a signal
/// ended; pmc count --emulate), a last column partial does, so that a script reading the file sees it.
inline std::string count_csv(const std::vector<std::string>& names, const std::vector<EventCount>& counts,
                             const std::vector<bool>& modelled = {}, const std::vector<bool>& partial = {}) {
    auto quote = [](const std::string& s) {
        if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
        std::string q = "\"";
        for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        return q + "\"";
    };
    const bool marked = !modelled.empty(), marked_partial = !partial.empty();
    std::string out = std::string("event,count,raw,running_fraction,counted") + (marked ? ",modelled" : "") +
                      (marked_partial ? ",partial" : "") + "\n";
    for (std::size_t i = 0; i < counts.size() && i < names.size(); ++i) {
        const EventCount& c = counts[i];
        out += c.counted
                   ? fmt::format("{},{:.0f},{},{:.6f},true", quote(names[i]), c.estimate, c.raw, c.running_fraction)
                   : fmt::format("{},,,0,false", quote(names[i]));
        if (marked) out += i < modelled.size() && modelled[i] ? ",true" : ",false";
        if (marked_partial) out += i < partial.size() && partial[i] ? ",true" : ",false";
        out += '\n';
    }
    return out;
}

/// The same as a JSON array of objects; a count that was not counted has "count": null. Given `modelled` (as
/// count_csv), each object ends with "modelled": true or false.
inline void write_counts_json(JsonWriter& json, const std::vector<std::string>& names,
                              const std::vector<EventCount>& counts, const std::vector<bool>& modelled = {}) {
    json.begin_array();
    for (std::size_t i = 0; i < counts.size() && i < names.size(); ++i) {
        const EventCount& c = counts[i];
        json.begin_object().field("event", names[i]).field("counted", c.counted);
        if (c.counted)
            json.field("count", c.estimate).field("raw", c.raw).field("running_fraction", c.running_fraction)
                .field("scaled", c.multiplexed());
        else
            json.key("count").null();
        if (!modelled.empty()) json.field("modelled", i < modelled.size() && modelled[i]);
        json.end_object();
    }
    json.end_array();
}

/// A group's event names, for the writers above.
template <class Group>
std::vector<std::string> event_names(const Group& group) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < group.size(); ++i) names.push_back(group.name(i));
    return names;
}

PMC_END_NAMESPACE

/// fmt formatters: a count as describe() writes it, and a reading with its times.
template <>
struct fmt::formatter<pmc::EventCount> : fmt::formatter<std::string_view> {
    template <class Context>
    auto format(const pmc::EventCount& c, Context& ctx) const {
        return fmt::formatter<std::string_view>::format(pmc::describe(c), ctx);
    }
};

template <>
struct fmt::formatter<pmc::Reading> : fmt::formatter<std::string_view> {
    template <class Context>
    auto format(const pmc::Reading& r, Context& ctx) const {
        const std::string text =
            r.time_running == 0 && r.time_enabled > 0
                ? std::string("not counted (never on a counter)")
                : fmt::format("{} (enabled {:.3f} ms, running {:.3f} ms)", r.value,
                              static_cast<double>(r.time_enabled) / 1e6,
                              static_cast<double>(r.time_running) / 1e6);
        return fmt::formatter<std::string_view>::format(text, ctx);
    }
};
