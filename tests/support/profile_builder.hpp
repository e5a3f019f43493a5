// SPDX-License-Identifier: MIT
// A synthetic profile file for tests: chosen labels, nesting, threads and exact counter values, written in the real
// format (docs/profile-format.md) with the writer's own pieces from pmc/profile_format.hpp (record_head, put_varint,
// write_page_header, checksum, the header's tags), so that the readers under test read it as they read a real one.
//
//     pmc_test::ProfileBuilder b;                       // one counter: page-faults, exact, unit "events"
//     auto& t = b.thread(0, "main");
//     t.scope("compile", 5, [&] {                       // 5 of its own, then its children
//         t.scope("parse", 10);
//         t.scope("typeck", 20, [&] { t.scope("parse", 3); });
//     });                                               // compile: self 5, total 38
//     t.instant("cache-hit");
//     b.write(path);                                    // or b.bytes()
//
// Each thread has its own running reading per counter (starting at `start`); `advance` moves them (the primary by
// default), `scope` opens an interval, advances it by its own value, runs its children, and closes it. Records are
// written in postorder with their depth, as the profiler writes them. Pages hold at most `page_records` records, so
// a test can force many pages; the threads' pages are interleaved round-robin, as concurrent threads write them.
#pragma once

#include <pmc/profile_format.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pmc_test {

/// One recorded counter as the header describes it.
struct BuilderCounter {
    std::string name = "page-faults";
    std::string unit = "events"; ///< "ns" for wall-time, "events" for a count
    std::uint32_t flags = pmc::profile_format::exact;
    double cost_to_parent = 0; ///< what one child scope adds to its parent (header field; the values do not include it)
    double cost_in_scope = 0;
    std::string read_path = "read()";
    std::string note = "synthetic (tests/support/profile_builder.hpp)";
};

/// The exact counter most tests want, and a noisy time counter.
inline BuilderCounter exact_counter(std::string name = "page-faults") {
    BuilderCounter c;
    c.name = std::move(name);
    return c;
}
inline BuilderCounter time_counter() {
    BuilderCounter c;
    c.name = "wall-time";
    c.unit = "ns";
    c.flags = 0;
    c.read_path = "rdtsc->ns";
    return c;
}

class ProfileBuilder {
public:
    class Thread {
    public:
        /// Moves this thread's reading of counter `counter` (0: the primary) forward by `n`.
        Thread& advance(std::uint64_t n, std::size_t counter = 0) {
            reading_.at(counter) += n;
            return *this;
        }
        /// Moves every counter forward, the primary by `values[0]`, the next by `values[1]`, ...
        Thread& advance_all(const std::vector<std::uint64_t>& values) {
            for (std::size_t i = 0; i < values.size() && i < reading_.size(); ++i) reading_[i] += values[i];
            return *this;
        }
        /// Opens a scope (its start readings are the current ones).
        Thread& begin(const std::string& label, const std::string& arg = {}) {
            open_.push_back(Open{owner_->id(label), arg.empty() ? 0 : owner_->id(arg), reading_});
            return *this;
        }
        /// Closes the innermost open scope: an interval record at its depth, start and end readings per counter.
        Thread& end() {
            if (open_.empty()) throw std::logic_error("ProfileBuilder: end() without an open scope");
            Open o = open_.back();
            open_.pop_back();
            std::vector<std::uint64_t> values;
            for (std::size_t i = 0; i < reading_.size(); ++i) {
                values.push_back(o.start[i]);
                values.push_back(reading_[i]);
            }
            return record(pmc::profile_format::RecordKind::interval, o.label, o.arg, depth(), values);
        }
        /// A scope with `self` of its own (advanced before its children run), then `children`, then closed. Its
        /// total is `self` plus its children's totals, exactly.
        Thread& scope(const std::string& label, std::uint64_t self, const std::function<void()>& children = {}) {
            begin(label);
            advance(self);
            if (children) children();
            return end();
        }
        /// An instant event (cache hit) at the current primary reading.
        Thread& instant(const std::string& label, const std::string& arg = {}) {
            return record(pmc::profile_format::RecordKind::instant, owner_->id(label),
                          arg.empty() ? 0 : owner_->id(arg), depth(), {reading_[0]});
        }
        /// An integer event (a size, a count) at the current primary reading.
        Thread& integer(const std::string& label, std::uint64_t value) {
            return record(pmc::profile_format::RecordKind::integer, owner_->id(label), 0, depth(),
                          {reading_[0], value});
        }
        /// A raw interval record with any depth and readings (for nesting the writer would never produce).
        Thread& raw_interval(const std::string& label, std::uint32_t depth, const std::vector<std::uint64_t>& values) {
            return record(pmc::profile_format::RecordKind::interval, owner_->id(label), 0, depth, values);
        }
        std::size_t open_scopes() const { return open_.size(); }
        std::uint64_t reading(std::size_t counter = 0) const { return reading_.at(counter); }

    private:
        friend class ProfileBuilder;
        struct Open {
            std::uint32_t label, arg;
            std::vector<std::uint64_t> start;
        };
        struct Record {
            pmc::profile_format::RecordKind kind;
            std::uint32_t depth, label, arg;
            std::vector<std::uint64_t> values;
        };
        Thread(ProfileBuilder* owner, std::string name, std::uint64_t tid, std::uint64_t start)
            : owner_(owner), name_(std::move(name)), tid_(tid),
              reading_(owner->counters_.size(), start) {}
        std::uint32_t depth() const { return static_cast<std::uint32_t>(open_.size()); }
        Thread& record(pmc::profile_format::RecordKind kind, std::uint32_t label, std::uint32_t arg,
                       std::uint32_t depth, const std::vector<std::uint64_t>& values) {
            const std::size_t want = kind == pmc::profile_format::RecordKind::interval ? 2 * owner_->counters_.size()
                                     : kind == pmc::profile_format::RecordKind::integer ? 2
                                                                                        : 1;
            if (values.size() != want)
                throw std::logic_error("ProfileBuilder: a record of this kind needs " + std::to_string(want) +
                                       " values");
            records_.push_back(Record{kind, depth, label, arg, values});
            return *this;
        }

        ProfileBuilder* owner_;
        std::string name_;
        std::uint64_t tid_;
        std::string error_;
        std::vector<std::pair<std::uint64_t, std::uint64_t>> times_; ///< enabled, running per counter
        std::vector<std::uint64_t> reading_;
        std::vector<Open> open_;
        std::vector<Record> records_;
    };

    explicit ProfileBuilder(std::vector<BuilderCounter> counters = {exact_counter()}) : counters_(std::move(counters)) {
        if (counters_.empty() || counters_.size() > pmc::profile_format::max_counters)
            throw std::logic_error("ProfileBuilder: 1 to 4 counters");
    }
    ProfileBuilder(const ProfileBuilder&) = delete;
    ProfileBuilder& operator=(const ProfileBuilder&) = delete;

    /// The thread with the profiler's number `index` (created on first use; its readings start at `start`).
    Thread& thread(std::uint32_t index, const std::string& name = {}, std::uint64_t tid = 0, std::uint64_t start = 1000) {
        auto it = threads_.find(index);
        if (it == threads_.end())
            it = threads_.emplace(index, Thread(this, name.empty() ? "thread-" + std::to_string(index) : name,
                                                tid ? tid : 4000 + index, start))
                     .first;
        return it->second;
    }
    /// Marks a thread whose counters could not be opened (the thread page's error field).
    void thread_error(std::uint32_t index, const std::string& error) { thread(index).error_ = error; }
    /// A thread's counter times (time enabled, time running, ns; one pair per counter, header order), written at the
    /// end of its thread page as newer writers do; without this call the page ends after the error (times unknown).
    void thread_times(std::uint32_t index, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& times) {
        thread(index).times_ = times;
    }

    std::vector<std::string> warnings;         ///< header warnings (Tag::warning)
    std::string emulator;                      ///< Tag::emulator when not empty (pmc emulate's QEMU)
    std::string cpu = "synthetic CPU";         ///< Tag::cpu (under pmc emulate: the CPU model QEMU presents)
    std::vector<std::string> command_line = {"synthetic", "--profile"};
    std::uint64_t pid = 4242;
    std::uint64_t start_time_ns = 1795000000000000000ull; // a fixed date, so files are byte-identical run to run
    std::size_t page_records = 1000;           ///< records per events page (small values force many pages)
    bool end_record = true;                    ///< write the end record (false: a file whose program was killed)

    /// The string id of `s` (labels and arguments share the table; ids from 1).
    std::uint32_t id(const std::string& s) {
        auto it = ids_.find(s);
        if (it != ids_.end()) return it->second;
        const auto next = static_cast<std::uint32_t>(ids_.size() + 1);
        ids_.emplace(s, next);
        order_.push_back(s);
        return next;
    }

    /// The whole file. Throws if a scope is left open (a test mistake, not a file property).
    std::vector<unsigned char> bytes() const {
        namespace pf = pmc::profile_format;
        for (const auto& [index, t] : threads_)
            if (!t.open_.empty())
                throw std::logic_error("ProfileBuilder: thread " + std::to_string(index) + " has open scopes");
        std::vector<unsigned char> out = header();
        std::uint32_t strings_pages = 0;
        std::map<std::uint32_t, std::uint32_t> events_pages;
        // Strings first: the writer writes a string before any event that refers to it.
        {
            std::string payload;
            for (std::size_t i = 0; i < order_.size(); ++i) {
                put32(payload, static_cast<std::uint32_t>(i + 1));
                put32(payload, static_cast<std::uint32_t>(order_[i].size()));
                payload += order_[i];
            }
            if (!order_.empty()) {
                page(out, pf::PageKind::strings, 0, 0, payload, static_cast<std::uint32_t>(order_.size()));
                ++strings_pages;
            }
        }
        for (const auto& [index, t] : threads_) {
            std::string payload;
            put64(payload, t.tid_);
            put32(payload, 0);
            put32(payload, static_cast<std::uint32_t>(t.name_.size()));
            payload += t.name_;
            put32(payload, static_cast<std::uint32_t>(t.error_.size()));
            payload += t.error_;
            put32(payload, static_cast<std::uint32_t>(t.times_.size()));
            put32(payload, 0);
            for (const auto& [enabled, running] : t.times_) {
                put64(payload, enabled);
                put64(payload, running);
            }
            const std::size_t per = std::max<std::size_t>(page_records, 1);
            put32(payload, static_cast<std::uint32_t>((t.records_.size() + per - 1) / per)); // events pages
            put32(payload, 0);                                                          // no interval open
            page(out, pf::PageKind::thread, index, 0, payload, 0);
        }
        // Events pages, round-robin across threads.
        const std::size_t per_page = std::max<std::size_t>(page_records, 1);
        for (std::size_t seq = 0;; ++seq) {
            bool any = false;
            for (const auto& [index, t] : threads_) {
                const std::size_t from = seq * per_page;
                if (from >= t.records_.size()) continue;
                any = true;
                const std::size_t to = std::min(t.records_.size(), from + per_page);
                std::string payload;
                std::uint64_t last[pf::max_counters] = {};
                for (std::size_t i = from; i < to; ++i) encode(payload, t.records_[i], last);
                page(out, pf::PageKind::events, index, static_cast<std::uint32_t>(seq), payload,
                     static_cast<std::uint32_t>(to - from));
                events_pages[index] = static_cast<std::uint32_t>(seq + 1);
            }
            if (!any) break;
        }
        if (end_record) {
            std::string payload;
            put32(payload, static_cast<std::uint32_t>(pf::EndHow::closed));
            put32(payload, 0);
            put32(payload, strings_pages);
            put32(payload, static_cast<std::uint32_t>(order_.size()));
            put32(payload, static_cast<std::uint32_t>(threads_.size()));
            for (const auto& [index, t] : threads_) {
                put32(payload, index);
                put32(payload, events_pages.count(index) ? events_pages.at(index) : 0);
                put32(payload, 1);
            }
            page(out, pf::PageKind::end, 0, 0, payload, static_cast<std::uint32_t>(threads_.size()));
        }
        return out;
    }

    /// One record as the writer encodes it (docs/profile-format.md): head, depth, [argument], values as varints,
    /// each counter's reading relative to the page's last one.
    static void encode(std::string& out, const Thread::Record& r, std::uint64_t* last) {
        namespace pf = pmc::profile_format;
        auto var = [&](std::uint64_t v) {
            unsigned char b[10];
            out.append(reinterpret_cast<const char*>(b), static_cast<std::size_t>(pf::put_varint(b, v) - b));
        };
        var(pf::record_head(r.kind, r.arg != 0, r.label));
        var(r.depth);
        if (r.arg) var(r.arg);
        if (r.kind == pf::RecordKind::interval) {
            for (std::size_t c = 0; 2 * c < r.values.size(); ++c) {
                var(r.values[2 * c + 1] - last[c]);
                var(r.values[2 * c + 1] - r.values[2 * c]);
                last[c] = r.values[2 * c + 1];
            }
        } else {
            var(r.values[0] - last[0]);
            last[0] = r.values[0];
            if (r.kind == pf::RecordKind::integer) var(r.values[1]);
        }
    }

    /// Writes the file; false (with errno) if it could not.
    bool write(const std::string& path) const {
        const std::vector<unsigned char> b = bytes();
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) return false;
        const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
        return std::fclose(f) == 0 && ok;
    }

private:
    static void put32(std::string& s, std::uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
    static void put64(std::string& s, std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

    std::vector<unsigned char> header() const {
        namespace pf = pmc::profile_format;
        std::string fields;
        auto field = [&](pf::Tag tag, const std::string& value) {
            const auto tg = static_cast<std::uint16_t>(tag);
            const std::uint16_t zero = 0;
            fields.append(reinterpret_cast<const char*>(&tg), 2);
            fields.append(reinterpret_cast<const char*>(&zero), 2);
            put32(fields, static_cast<std::uint32_t>(value.size()));
            fields += value;
        };
        auto u64 = [](std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
        field(pf::Tag::pmc_version, PMC_VERSION_STRING);
        field(pf::Tag::pid, u64(pid));
        std::string cmd;
        for (const auto& a : command_line) cmd += a + '\0';
        field(pf::Tag::command_line, cmd);
        field(pf::Tag::start_time, u64(start_time_ns));
        field(pf::Tag::cpu, cpu);
        field(pf::Tag::kernel, "synthetic");
        field(pf::Tag::aslr, "off (synthetic)");
        field(pf::Tag::page_bytes, u64(65536));
        for (const auto& w : warnings) field(pf::Tag::warning, w);
        if (!emulator.empty()) field(pf::Tag::emulator, emulator);
        for (const auto& c : counters_) {
            std::string v;
            put32(v, c.flags);
            put32(v, 0);
            put64(v, static_cast<std::uint64_t>(static_cast<std::int64_t>(c.cost_to_parent * 1000.0 + 0.5)));
            put64(v, static_cast<std::uint64_t>(static_cast<std::int64_t>(c.cost_in_scope * 1000.0 + 0.5)));
            for (const std::string* s : {&c.name, &c.unit, &c.read_path, &c.note}) {
                put32(v, static_cast<std::uint32_t>(s->size()));
                v += *s;
            }
            field(pf::Tag::counter, v);
        }
        std::string starts;
        for (std::size_t i = 0; i < counters_.size(); ++i) put64(starts, 1000);
        field(pf::Tag::start_values, starts);
        const std::uint32_t version = pf::version, zero = 0;
        const auto total = static_cast<std::uint32_t>(pf::file_header_fixed + fields.size());
        const std::uint32_t sum =
            pf::checksum(reinterpret_cast<const unsigned char*>(fields.data()), fields.size(), total);
        std::string out(pf::file_magic, 8);
        put32(out, version);
        put32(out, total);
        put32(out, sum);
        put32(out, zero);
        out += fields;
        return std::vector<unsigned char>(out.begin(), out.end());
    }

    static void page(std::vector<unsigned char>& out, pmc::profile_format::PageKind kind, std::uint32_t thread,
                     std::uint32_t seq, const std::string& payload, std::uint32_t records) {
        namespace pf = pmc::profile_format;
        unsigned char h[pf::page_header_bytes];
        const auto* p = reinterpret_cast<const unsigned char*>(payload.data());
        pf::write_page_header(h, kind, thread, seq, p, static_cast<std::uint32_t>(payload.size()), records);
        out.insert(out.end(), h, h + sizeof h);
        out.insert(out.end(), p, p + payload.size());
    }

    std::vector<BuilderCounter> counters_;
    std::map<std::uint32_t, Thread> threads_;
    std::map<std::string, std::uint32_t> ids_;
    std::vector<std::string> order_;
};

} // namespace pmc_test
