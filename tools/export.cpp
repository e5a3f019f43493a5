// SPDX-License-Identifier: MIT
// pmc export --chrome|--folded|--speedscope FILE: a profile in a format that real viewers open.
//
// Streams: the profile is read a page at a time through pmc::ProfileReader's nesting walker, which reports each
// thread's scopes from the last to the first (a scope after its descendants). The Chrome trace and the folded
// stacks do not care about order (viewers sort the one, the other is summed per stack). speedscope's evented
// profile needs open/close events in time order: the walk's reports, reversed, are in preorder, so they are
// spooled to an unlinked temporary file (24 bytes each) and read back from its end.
#include <pmc/profile_reader.hpp>

#include "command_line.hpp"
#include "commands.hpp"
#include "profile_cli.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pmc_tool {

const char* const export_help = R"help(usage: pmc export (--chrome | --folded | --speedscope) [-o OUT] [--min-value N]
                  [--counter NAME] [--collapse] FILE

Write a profile recorded by pmc::Profiler (PMC_PROFILE=FILE) in a format that viewers open:

  --chrome      Chrome trace-event JSON (Perfetto UI, chrome://tracing, speedscope): one X event
                per scope (ts and dur in microseconds) named by its label alone, so that
                speedscope's views have one row per label; each call's values (the counter's
                total and self, each riding counter's total, its argument) on an instant event
                at its start (cat "scope values"), which Perfetto shows on the call's track and
                speedscope ignores; M events naming the process and threads, i events for
                instant events, C counter tracks for integer events and for each counter riding
                along. When the counter is not a time, 1 "microsecond" of the trace
                is one unit of the counter (e.g. one page fault): said in "otherData" and on stderr.
  --folded      Folded stacks, one "root;child;leaf N" line per distinct stack, N its summed self
                value as an integer (flamegraph.pl, inferno, speedscope). One root frame per thread
                ("name (thread N)") unless --collapse merges the threads. ';' in a label is written
                as ':' and line breaks as spaces, which the format cannot hold.
  --speedscope  speedscope's own JSON: one evented profile per thread over frames shared by all,
                in the counter's unit ("nanoseconds" for wall-time, "none" for counts: instruction
                or page-fault counts are shown as they are).

Options:
  -o OUT          Write to OUT (replaced only once the export is complete: an error leaves no half
                  file) instead of standard output.
  --min-value N   Leave out scopes whose total is below N (in the counter's unit: ns for wall-time):
                  huge traces that viewers cannot open. What was left out is said on stderr and, in
                  --chrome, in "otherData". In --folded their values go to the enclosing stack and
                  outermost scopes stay, so the totals stay whole.
  --counter NAME  Use this recorded counter instead of the primary (the first one) for the times
                  or weights. A name without modifiers finds the one recorded with them (cycles:
                  cycles:u).
  --collapse      --folded: all threads together, without a frame per thread.
  -h, --help      Show this help.

The file is read a page at a time (a profile larger than memory is exported); it must be a regular
file, not a pipe. A truncated or corrupt file is exported up to its last whole record; what was lost
is said on stderr and the exit status is 2.

Exit status: 0 exported all of it; 2 exported, but part of the profile was lost or corrupt, or
scopes were open when its program stopped (killed: what was open is said; see the messages); 1
nothing was written (the profile could not be read, OUT could not be written, or the command line
was wrong).
)help";

namespace {

namespace pf = pmc::profile_format;

/// Buffered output to a file descriptor that remembers the first error.
class Sink {
public:
    explicit Sink(int fd) : fd_(fd) { buf_.reserve(1 << 16); }
    void put(std::string_view s) {
        buf_.append(s.data(), s.size());
        if (buf_.size() >= (1 << 16)) flush();
    }
    void put(char c) {
        buf_ += c;
        if (buf_.size() >= (1 << 16)) flush();
    }
    template <class... A>
    void print(fmt::format_string<A...> f, A&&... a) {
        fmt::format_to(std::back_inserter(buf_), f, std::forward<A>(a)...);
        if (buf_.size() >= (1 << 16)) flush();
    }
    bool flush() {
        std::size_t done = 0;
        while (done < buf_.size() && !error_) {
            const ssize_t w = ::write(fd_, buf_.data() + done, buf_.size() - done);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) error_ = errno;
            else done += static_cast<std::size_t>(w);
        }
        buf_.clear();
        return !error_;
    }
    int error() const { return error_; }

private:
    int fd_;
    int error_ = 0;
    std::string buf_;
};

/// `s` as a JSON string: quotes, backslashes and control bytes escaped, bytes that are not UTF-8 replaced by
/// U+FFFD (labels are the program's bytes; a viewer must still parse the file).
void json_string(Sink& out, std::string_view s) {
    std::string o = "\"";
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            if (c == '"') o += "\\\"";
            else if (c == '\\') o += "\\\\";
            else if (c == '\n') o += "\\n";
            else if (c == '\t') o += "\\t";
            else if (c < 0x20 || c == 0x7f) o += fmt::format("\\u{:04x}", c);
            else o += static_cast<char>(c);
            ++i;
            continue;
        }
        // A whole, shortest-form, non-surrogate UTF-8 sequence is copied; anything else is one U+FFFD per byte.
        std::size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = len != 0 && i + len <= n;
        for (std::size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xC0) == 0x80;
        if (ok && len == 3) ok = !(c == 0xE0 && p[i + 1] < 0xA0) && !(c == 0xED && p[i + 1] >= 0xA0);
        if (ok && len == 4) ok = !(c == 0xF0 && p[i + 1] < 0x90) && !(c == 0xF4 && p[i + 1] >= 0x90);
        if (ok) {
            o.append(s.data() + i, len);
            i += len;
        } else {
            o += "\xEF\xBF\xBD";
            ++i;
        }
    }
    o += '"';
    out.put(o);
}

/// A label as one frame of a folded stack: ';' separates frames and a line ends a stack, so neither may appear.
std::string folded_frame(std::string s) {
    for (char& c : s)
        if (c == ';') c = ':';
        else if (c == '\n' || c == '\r') c = ' ';
    return s;
}

/// A value of `unit` in microseconds for a trace: ns / 1000 exactly (three decimals); any other unit as it is.
std::string trace_us(std::uint64_t v, bool ns) {
    if (!ns) return std::to_string(v);
    return fmt::format("{}.{:03}", v / 1000, v % 1000);
}

struct ExportOptions {
    enum class Format { none, chrome, folded, speedscope } format = Format::none;
    std::string file, out, counter;
    std::uint64_t min_value = 0;
    bool collapse = false;
};

/// What the export left out or could not place, to say on stderr.
struct Tally {
    std::uint64_t scopes = 0, dropped = 0, incomplete = 0, negative_self = 0, reordered = 0;
    cli::OpenScopes open; ///< what was open when the program stopped, as far as the file says
    std::uint64_t damaged = 0; ///< scopes that end before they start (a corrupt record kept from a cut page)
};

std::string thread_name(const pmc::ProfileThread& t) {
    return (t.name.empty() ? std::string("thread") : t.name) + " (thread " + std::to_string(t.index) + ")";
}

/// A counter's readings start where: one base for clocks (comparable across threads), each thread's own
/// lowest reading for counts (each thread counts with its own counter).
std::uint64_t base_of(pmc::ProfileReader& r, const pmc::ProfileThread& t, std::size_t c, bool time_like) {
    auto lowest = [&](std::uint32_t index) { // instant and integer events carry the primary's reading too
        const pmc::ProfileThreadSpan span = r.span(index);
        return c == 0 ? std::min(span.min_reading[0], span.min_start) : span.min_reading[c];
    };
    std::uint64_t base = UINT64_MAX;
    if (!time_like) base = lowest(t.index);
    else
        for (const auto& u : r.profile().threads) base = std::min(base, lowest(u.index));
    return base == UINT64_MAX ? 0 : base;
}

// ---- Chrome trace events ----

int write_chrome(pmc::ProfileReader& r, std::size_t c, const ExportOptions& o, Sink& out, Tally& tally,
                 std::string& failure) {
    const pmc::Profile& p = r.profile();
    const pmc::ProfileCounter& k = p.counters[c];
    const bool ns = k.unit == "ns";
    const bool time_like = k.unit != "events";
    const std::uint64_t pid = p.pid ? p.pid : 1;
    std::string command;
    for (const auto& a : p.command_line) command += (command.empty() ? "" : " ") + a;
    out.put("{\"traceEvents\":[\n");
    out.print("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":", pid);
    json_string(out, command.empty() ? "pmc profile" : command);
    out.put("}}");
    std::unordered_map<std::uint32_t, std::uint64_t> tids;
    for (const auto& t : p.threads) {
        const std::uint64_t tid = t.tid ? t.tid : t.index;
        tids[t.index] = tid;
        out.print(",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", pid, tid);
        json_string(out, thread_name(t));
        out.put("}}");
        out.print(",\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
                  pid, tid, t.index);
    }
    std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> bases; // per thread, per counter
    for (const auto& t : p.threads)
        for (std::size_t i = 0; i < p.counters.size(); ++i)
            bases[t.index].push_back(base_of(r, t, i, p.counters[i].unit != "events"));
    // The primary axis: counter c's readings (one base for clocks, each thread's own for counts).
    std::uint32_t thread = UINT32_MAX;
    std::uint64_t tid = 0, base = 0;
    std::vector<std::uint64_t>* tb = nullptr;
    auto enter_thread = [&](std::uint32_t index) {
        if (index == thread) return;
        thread = index;
        tid = tids[index];
        tb = &bases[index];
        base = (*tb)[c];
    };
    auto ts = [&](std::uint64_t reading) { return trace_us(reading - base, ns); };
    const std::size_t nc = p.counters.size();
    auto walked = r.walk(
        [&](const pmc::NestedInterval& s) {
            ++tally.scopes;
            if (!s.path_complete) ++tally.incomplete;
            tally.open.note(s);
            const std::uint64_t total = s.total(c);
            if (static_cast<std::int64_t>(total) < 0) {
                ++tally.damaged;
                return;
            }
            if (total < o.min_value) {
                ++tally.dropped;
                return;
            }
            enter_thread(s.thread);
            // No "args" on the slice: speedscope names a trace event's frame by its name and its args together, so
            // per-call values there would make every call a frame of its own (thousands of rows in its left-heavy
            // and sandwich views instead of one per label). Each call's values go on a thread-scoped instant event
            // at the call's start, on the same track (cat "scope values"): Perfetto and chrome://tracing show it
            // and its args; speedscope reads only B, E and X events.
            const std::string label = p.string(s.label);
            out.print(",\n{{\"ph\":\"X\",\"name\":");
            json_string(out, label);
            out.print(",\"cat\":\"scope\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{}}}", pid, tid,
                      ts(s.start[c]), trace_us(total, ns));
            out.print(",\n{{\"ph\":\"i\",\"s\":\"t\",\"name\":");
            json_string(out, label);
            out.print(",\"cat\":\"scope values\",\"pid\":{},\"tid\":{},\"ts\":{},\"args\":{{", pid, tid,
                      ts(s.start[c]));
            json_string(out, k.name);
            out.print(":{},\"self\":{}", total, s.self(c));
            for (std::size_t i = 0; i < nc; ++i)
                if (i != c) {
                    out.put(',');
                    json_string(out, p.counters[i].name);
                    out.print(":{}", s.total(i));
                }
            if (s.arg) {
                out.put(",\"arg\":");
                json_string(out, p.string(s.arg));
            }
            out.put("}}");
            // The other counters as counter tracks: their reading at the scope's start and end.
            for (std::size_t i = 0; i < nc; ++i) {
                if (i == c) continue;
                for (const std::uint64_t* at : {&s.start[c], &s.end[c]}) {
                    const std::uint64_t value = (at == &s.start[c] ? s.start[i] : s.end[i]) - (*tb)[i];
                    out.print(",\n{{\"ph\":\"C\",\"name\":");
                    json_string(out, p.counters[i].name + " (thread " + std::to_string(s.thread) + ")");
                    out.print(",\"pid\":{},\"tid\":{},\"ts\":{},\"args\":{{\"value\":{}}}}}", pid, tid, ts(*at), value);
                }
            }
        },
        [&](const pmc::NestedMark& m) {
            enter_thread(m.thread);
            if (c != 0) return; // marks carry the primary counter's reading only
            if (m.own_work) { // the profiler's page write or label interning, inside the enclosing slices
                out.print(",\n{{\"ph\":\"X\",\"name\":\"pmc: own work\",\"cat\":\"pmc\",\"pid\":{},\"tid\":{},"
                          "\"ts\":{},\"dur\":{}}}",
                          pid, tid, ts(m.reading), trace_us(m.integer, ns));
                return;
            }
            if (m.kind == pf::RecordKind::instant) {
                out.print(",\n{{\"ph\":\"i\",\"s\":\"t\",\"name\":");
                json_string(out, p.string(m.label));
                out.print(",\"cat\":\"instant\",\"pid\":{},\"tid\":{},\"ts\":{}", pid, tid, ts(m.reading));
                if (m.arg) {
                    out.put(",\"args\":{\"arg\":");
                    json_string(out, p.string(m.arg));
                    out.put('}');
                }
                out.put('}');
            } else {
                out.print(",\n{{\"ph\":\"C\",\"name\":");
                json_string(out, p.string(m.label) + " (thread " + std::to_string(m.thread) + ")");
                out.print(",\"pid\":{},\"tid\":{},\"ts\":{},\"args\":{{\"value\":{}}}}}", pid, tid, ts(m.reading),
                          m.integer);
            }
        });
    if (walked) {
        failure = walked->message;
        return 1;
    }
    out.put("\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"exporter\":");
    json_string(out, std::string("pmc export ") + PMC_VERSION_STRING);
    out.put(",\"counter\":");
    json_string(out, k.name);
    out.put(",\"unit\":");
    json_string(out, k.unit);
    out.put(",\"microsecond_means\":");
    json_string(out, ns ? "one microsecond (the counter is wall-time, in ns)"
                        : "one " + (k.unit == "events" ? k.name + " event" : k.unit) +
                              " (the counter is not a time; ts and dur count " + k.name +
                              (time_like ? ")" : ", each thread from its own lowest reading)"));
    const pmc::CounterExactness exact = r.exactness(c);
    out.print(",\"exact\":{},\"exact_why\":", exact.exact ? "true" : "false");
    json_string(out, exact.why);
    out.print(",\"min_value\":{},\"scopes_left_out\":{},\"scopes\":{}", o.min_value, tally.dropped, tally.scopes);
    out.put(",\"problems\":[");
    for (std::size_t i = 0; i < p.problems.size(); ++i) {
        if (i) out.put(',');
        json_string(out, p.problems[i]);
    }
    out.put("]}\n}\n");
    if (!ns)
        fmt::print(stderr, "pmc export: the trace's times are {} counts, not microseconds: 1 \"us\" = 1 {}{}{}\n",
                   k.name, k.unit == "events" ? k.name + " event" : k.unit,
                   time_like ? "" : " (each thread from its own lowest reading)",
                   k.read_path == "emulator" ? "; " + exact.why : "");
    return 0;
}

// ---- Folded stacks ----

int write_folded(pmc::ProfileReader& r, std::size_t c, const ExportOptions& o, Sink& out, Tally& tally,
                 std::string& failure) {
    const pmc::Profile& p = r.profile();
    // Summed self value per distinct stack: held in memory, but it grows with the distinct stacks, not the records.
    std::map<std::string, std::uint64_t> stacks;
    std::unordered_map<std::uint64_t, std::uint64_t> carried; // parent ordinal -> values of its left-out children
    std::unordered_map<std::uint32_t, std::string> roots;
    for (const auto& t : p.threads) roots[t.index] = folded_frame(thread_name(t));
    std::string key;
    std::uint32_t thread = UINT32_MAX;
    auto walked = r.walk(
        [&](const pmc::NestedInterval& s) {
            if (s.thread != thread) carried.clear(), thread = s.thread;
            ++tally.scopes;
            if (!s.path_complete) ++tally.incomplete;
            tally.open.note(s);
            std::int64_t self = s.self(c);
            if (auto it = carried.find(s.ordinal); it != carried.end()) {
                self += static_cast<std::int64_t>(it->second);
                carried.erase(it);
            }
            const std::uint64_t total = s.total(c);
            if (static_cast<std::int64_t>(total) < 0) {
                ++tally.damaged;
                return;
            }
            if (total < o.min_value && s.parent != pmc::no_parent) {
                // Left out: its whole value goes to the enclosing scope's own.
                ++tally.dropped;
                carried[s.parent] += total;
                return;
            }
            if (self < 0) {
                ++tally.negative_self; // a noisy counter: children measured more than their parent
                return;
            }
            if (self == 0) return;
            key.clear();
            if (!o.collapse) key = roots[s.thread];
            if (!s.path_complete) key += std::string(key.empty() ? "" : ";") + "[enclosing scopes lost]";
            for (const std::uint32_t id : s.path()) {
                if (!key.empty()) key += ';';
                key += folded_frame(p.string(id));
            }
            stacks[key] += static_cast<std::uint64_t>(self);
        },
        [](const pmc::NestedMark&) {});
    if (walked) {
        failure = walked->message;
        return 1;
    }
    for (const auto& [stack, weight] : stacks) out.print("{} {}\n", stack, weight);
    return 0;
}

// ---- speedscope ----

/// Fixed-size records appended to an unlinked temporary file and read back from the last to the first.
class Spool {
public:
    struct Item {
        std::uint64_t start, end;
        std::uint32_t frame;
        std::uint32_t depth;
    };
    bool open() {
        const char* dir = std::getenv("TMPDIR");
        std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/pmc-export-XXXXXX";
        fd_ = ::mkstemp(tmpl.data());
        if (fd_ < 0) return false;
        ::unlink(tmpl.c_str());
        return true;
    }
    ~Spool() {
        if (fd_ >= 0) ::close(fd_);
    }
    void reset() {
        buf_.clear();
        written_ = 0;
    }
    bool push(const Item& item) {
        buf_.push_back(item);
        return buf_.size() < chunk || flush();
    }
    /// Calls f(item) for every item pushed since reset(), the last first.
    template <class F>
    bool backwards(F&& f) {
        if (!flush()) return false;
        std::uint64_t left = written_;
        while (left) {
            const std::uint64_t take = std::min<std::uint64_t>(left, chunk);
            left -= take;
            buf_.resize(static_cast<std::size_t>(take));
            const std::size_t bytes = static_cast<std::size_t>(take) * sizeof(Item);
            std::size_t got = 0;
            while (got < bytes) {
                const ssize_t n = ::pread(fd_, reinterpret_cast<char*>(buf_.data()) + got, bytes - got,
                                          static_cast<off_t>(left * sizeof(Item) + got));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) {
                    error_ = n < 0 ? errno : EIO;
                    return false;
                }
                got += static_cast<std::size_t>(n);
            }
            for (auto it = buf_.rbegin(); it != buf_.rend(); ++it) f(*it);
        }
        buf_.clear();
        return true;
    }
    int error() const { return error_; }
    std::uint64_t size() const { return written_ + buf_.size(); }

private:
    static constexpr std::size_t chunk = 1 << 15; // items: 768 KiB
    bool flush() {
        const std::size_t bytes = buf_.size() * sizeof(Item);
        std::size_t done = 0;
        while (done < bytes) {
            const ssize_t n = ::pwrite(fd_, reinterpret_cast<const char*>(buf_.data()) + done, bytes - done,
                                       static_cast<off_t>(written_ * sizeof(Item) + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                error_ = errno;
                return false;
            }
            done += static_cast<std::size_t>(n);
        }
        written_ += buf_.size();
        buf_.clear();
        return true;
    }
    int fd_ = -1;
    int error_ = 0;
    std::vector<Item> buf_;
    std::uint64_t written_ = 0;
};

int write_speedscope(pmc::ProfileReader& r, std::size_t c, const ExportOptions& o, Sink& out, Tally& tally,
                     std::string& failure) {
    const pmc::Profile& p = r.profile();
    const pmc::ProfileCounter& k = p.counters[c];
    const bool time_like = k.unit != "events";
    Spool spool;
    if (!spool.open()) {
        failure = fmt::format("cannot create a temporary file in {} for the events (set TMPDIR elsewhere): {}",
                              std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp", std::strerror(errno));
        return 1;
    }
    std::unordered_map<std::uint32_t, std::uint32_t> frame_of; // label id -> frame index
    std::vector<std::uint32_t> frames;
    std::string command;
    for (const auto& a : p.command_line) command += (command.empty() ? "" : " ") + a;
    out.put("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n\"profiles\":[");
    bool first_profile = true;
    std::size_t left = p.threads.size();
    for (const auto& t : p.threads) {
        --left;
        spool.reset();
        bool spooled = true;
        auto walked = r.walk(
            [&](const pmc::NestedInterval& s) {
                ++tally.scopes;
                if (!s.path_complete) ++tally.incomplete;
            tally.open.note(s);
                if (static_cast<std::int64_t>(s.total(c)) < 0) {
                    ++tally.damaged;
                    return;
                }
                if (s.total(c) < o.min_value) {
                    ++tally.dropped;
                    return;
                }
                auto [it, added] = frame_of.emplace(s.label, static_cast<std::uint32_t>(frames.size()));
                if (added) frames.push_back(s.label);
                spooled = spooled && spool.push(Spool::Item{s.start[c], s.end[c], it->second, s.depth});
            },
            [](const pmc::NestedMark&) {}, t.index);
        if (walked) {
            failure = walked->message;
            return 1;
        }
        if (!spooled) {
            failure = fmt::format("cannot write the temporary file of events: {}", std::strerror(spool.error()));
            return 1;
        }
        // A thread without scopes (instant events only) gets no profile, unless no thread has any: speedscope
        // opens the first profile, and an empty one shows nothing.
        if (spool.size() == 0 && (left > 0 || !first_profile)) continue;
        const std::uint64_t base = base_of(r, t, c, time_like);
        out.put(first_profile ? "\n" : ",\n");
        first_profile = false;
        out.put("{\"type\":\"evented\",\"name\":");
        json_string(out, thread_name(t));
        out.print(",\"unit\":\"{}\",\"events\":[", k.unit == "ns" ? "nanoseconds" : "none");
        // Reversed, the walk is in preorder: open each scope, closing first those it does not nest in.
        std::vector<Spool::Item> open;
        std::uint64_t last = 0, first_at = 0;
        bool any = false;
        auto event = [&](char type, std::uint32_t frame, std::uint64_t reading) {
            std::uint64_t at = reading - base;
            if (any && at < last) {
                ++tally.reordered; // a noisy or damaged reading before the previous event: held at the previous
                at = last;
            }
            if (!any) first_at = at;
            out.print("{}{{\"type\":\"{}\",\"frame\":{},\"at\":{}}}", any ? "," : "", type, frame, at);
            any = true;
            last = at;
        };
        auto close_to = [&](std::uint32_t depth) {
            while (!open.empty() && open.back().depth >= depth) {
                event('C', open.back().frame, open.back().end);
                open.pop_back();
            }
        };
        const bool read_back = spool.backwards([&](const Spool::Item& item) {
            close_to(item.depth);
            event('O', item.frame, item.start);
            open.push_back(item);
        });
        if (!read_back) {
            failure = fmt::format("cannot read the temporary file of events back: {}", std::strerror(spool.error()));
            return 1;
        }
        close_to(0);
        out.print("],\"startValue\":{},\"endValue\":{}}}", any ? first_at : 0, any ? last : 0);
    }
    out.put("\n],\n\"shared\":{\"frames\":[");
    for (std::size_t i = 0; i < frames.size(); ++i) {
        out.put(i ? ",\n{\"name\":" : "\n{\"name\":");
        json_string(out, p.string(frames[i]));
        out.put('}');
    }
    out.put("]},\n\"activeProfileIndex\":0,\"exporter\":");
    json_string(out, std::string("pmc export ") + PMC_VERSION_STRING);
    out.put(",\"name\":");
    json_string(out, (command.empty() ? std::string("pmc profile") : command) + " [" + k.name + "]");
    out.put("}\n");
    return 0;
}

/// Where the export goes: standard output, or a temporary file next to OUT renamed over it once complete.
class Destination {
public:
    ~Destination() { abandon(); }
    std::optional<std::string> open(const std::string& out) {
        if (out.empty() || out == "-") {
            fd_ = STDOUT_FILENO;
            return std::nullopt;
        }
        struct stat st {};
        if (::stat(out.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
            // A device or a pipe (/dev/null, a FIFO): nothing to replace, written as it goes.
            fd_ = ::open(out.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd_ < 0) return fmt::format("cannot write '{}': {}", out, std::strerror(errno));
            own_ = true;
            return std::nullopt;
        }
        final_ = out;
        temp_ = out + ".pmc-export-XXXXXX";
        fd_ = ::mkstemp(temp_.data());
        if (fd_ < 0) {
            const int err = errno;
            temp_.clear();
            return fmt::format("cannot write '{}': {} (a temporary file next to it could not be created)", out,
                               std::strerror(err));
        }
        ::fchmod(fd_, 0644 & ~current_umask());
        return std::nullopt;
    }
    int fd() const { return fd_; }
    /// Moves the finished file into place.
    std::optional<std::string> commit() {
        if (own_) {
            own_ = false;
            if (::close(fd_) != 0) return fmt::format("cannot write: {}", std::strerror(errno));
            fd_ = -1;
        }
        if (temp_.empty()) return std::nullopt;
        const int fd = fd_;
        fd_ = -1;
        if (::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(temp_.c_str(), final_.c_str()) != 0) {
            const int err = errno;
            ::unlink(temp_.c_str());
            temp_.clear();
            return fmt::format("cannot write '{}': {}", final_, std::strerror(err));
        }
        temp_.clear();
        return std::nullopt;
    }
    /// Removes the unfinished file (nothing is left where OUT was, and an older OUT stays as it was).
    void abandon() noexcept {
        if (own_) ::close(fd_), fd_ = -1, own_ = false;
        if (temp_.empty()) return;
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        ::unlink(temp_.c_str());
        temp_.clear();
    }

private:
    static mode_t current_umask() {
        const mode_t m = ::umask(022);
        ::umask(m);
        return m;
    }
    int fd_ = -1;
    bool own_ = false; ///< fd_ is a device or pipe this opened
    std::string final_, temp_;
};

} // namespace

int cmd_export(const std::vector<std::string>& arguments) {
    pmc_cli::CommandLine cl("pmc export", export_help);
    ExportOptions o;
    bool chrome = false, folded = false, speedscope = false;
    std::vector<std::string> files;
    std::string min_value_text;
    cl.flag("--chrome", chrome);
    cl.flag("--folded", folded);
    cl.flag("--speedscope", speedscope);
    cl.flag("--collapse", o.collapse);
    pmc_cli::Option out_option = cl.option("-o,--output", o.out, "a file name");
    cl.option("--counter", o.counter, "a counter name");
    pmc_cli::Option min_value_option = cl.option(
        "--min-value", min_value_text, "a whole number (in the counter's unit; ns for wall-time)");
    cl.option("FILE", files, "a profile");
    if (auto status = cl.parse(arguments)) return *status;
    if (chrome + folded + speedscope > 1) return cl.usage_error("one format at a time (--chrome, --folded or --speedscope)");
    o.format = chrome ? ExportOptions::Format::chrome
               : folded ? ExportOptions::Format::folded
               : speedscope ? ExportOptions::Format::speedscope
                            : ExportOptions::Format::none;
    if (out_option.given() && o.out.empty()) return cl.usage_error("-o needs a file name");
    const auto min_value = pmc_cli::whole_number_option(min_value_option, min_value_text, 0);
    if (!min_value) return cl.usage_error("--min-value needs a whole number (in the counter's unit; ns for wall-time)");
    o.min_value = *min_value;
    if (files.size() > 1) return cl.usage_error("one FILE at a time");
    if (!files.empty()) o.file = files.front();
    if (o.format == ExportOptions::Format::none) return cl.usage_error("which format? --chrome, --folded or --speedscope");
    if (o.file.empty()) return cl.usage_error("which profile? (pmc export --chrome FILE)" + cli::took_file(o.counter));
    if (o.collapse && o.format != ExportOptions::Format::folded) return cl.usage_error("--collapse belongs to --folded");

    std::size_t c = 0;
    auto read = cli::open_profile("export", o.file, o.counter, c);
    if (!read) return 1;
    pmc::ProfileReader& reader = *read;
    const pmc::Profile& p = reader.profile();
    // -o naming the profile itself (or a link to it) would replace the profile with its export.
    struct stat in_st {}, out_st {};
    if (!o.out.empty() && o.out != "-" && ::stat(o.out.c_str(), &out_st) == 0 && ::stat(o.file.c_str(), &in_st) == 0 &&
        out_st.st_dev == in_st.st_dev && out_st.st_ino == in_st.st_ino) {
        fmt::print(stderr, "pmc export: -o '{}' is the profile being read ('{}'): the export would replace it; give "
                           "another file name\n",
                   o.out, o.file);
        return 1;
    }
    Destination dest;
    if (auto failure = dest.open(o.out)) {
        fmt::print(stderr, "pmc export: {}\n", *failure);
        return 1;
    }
    Sink out(dest.fd());
    Tally tally;
    std::string failure;
    const int status = o.format == ExportOptions::Format::chrome   ? write_chrome(reader, c, o, out, tally, failure)
                       : o.format == ExportOptions::Format::folded ? write_folded(reader, c, o, out, tally, failure)
                                                             : write_speedscope(reader, c, o, out, tally, failure);
    // Folded stacks and speedscope's JSON have no place for a note: an emulated count is said here (the Chrome
    // trace says it in its otherData and its own note).
    if (o.format != ExportOptions::Format::chrome && reader.profile().counters[c].read_path == "emulator")
        fmt::print(stderr, "pmc export: the values are {}: {}\n", reader.profile().counters[c].name,
                   reader.exactness(c).why);
    if (status == 0 && !out.flush())
        failure = fmt::format("cannot write {}: {}", o.out.empty() ? "to standard output" : "'" + o.out + "'",
                              std::strerror(out.error()));
    if (failure.empty())
        if (auto f = dest.commit()) failure = *f;
    if (!failure.empty()) {
        dest.abandon();
        fmt::print(stderr, "pmc export: {}{}\n", failure,
                   o.out.empty() ? "" : fmt::format(" ('{}' was not written)", o.out));
        return 1;
    }
    const pmc::ProfileCounter& k = p.counters[c];
    if (tally.dropped)
        fmt::print(stderr, "pmc export: left out {} of {} scopes with a total below {} {}{}\n", tally.dropped,
                   tally.scopes, o.min_value, k.unit == "events" ? k.name : k.unit,
                   o.format == ExportOptions::Format::folded ? "; their values are in their enclosing scopes' stacks"
                                                             : "");
    if (tally.damaged)
        fmt::print(stderr, "pmc export: left out {} scopes that end before they start (corrupt records kept from a "
                           "damaged page: see below)\n",
                   tally.damaged);
    if (tally.incomplete)
        fmt::print(stderr, "pmc export: {} scopes have no enclosing scope in the file ({}); they are placed at the "
                           "top\n",
                   tally.incomplete,
                   p.problems.empty() ? "their enclosing scopes had not ended when the recording stopped: " +
                                            cli::how_it_stopped(p)
                                      : std::string("the file was cut or damaged: see below"));
    if (tally.open.any()) fmt::print(stderr, "{}", tally.open.text(p, "pmc export: "));
    const bool open_at_end = tally.incomplete != 0 || cli::ended_inside_scopes(p);
    if (open_at_end && p.problems.empty())
        fmt::print(stderr, "pmc export: {}; exported what was read\n{}", cli::not_whole_text(o.file, p),
                   cli::open_at_end_text(p, "pmc export: "));
    if (tally.negative_self)
        fmt::print(stderr, "pmc export: {} scopes measured less than their children ({} is noisy); their own "
                           "value is left out of the stacks\n",
                   tally.negative_self, k.name);
    if (tally.reordered)
        fmt::print(stderr, "pmc export: {} events read earlier than the event before them; held at that event's "
                           "value so that the profile stays in order\n",
                   tally.reordered);
    if (!p.problems.empty()) {
        fmt::print(stderr, "pmc export: {}; exported what was read. What was lost:\n",
                   cli::incomplete_text(o.file, p));
        for (std::size_t i = 0; i < p.problems.size() && i < 20; ++i) fmt::print(stderr, "  {}\n", p.problems[i]);
        if (p.problems.size() > 20) fmt::print(stderr, "  ... and {} more\n", p.problems.size() - 20);
        return 2;
    }
    // Scopes were open when the program stopped (killed): exported, but the profile is not whole.
    return open_at_end ? 2 : 0;
}

} // namespace pmc_tool
