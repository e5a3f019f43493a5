// SPDX-License-Identifier: MIT
// What the profile tools (summarize, critical, export, diff, aggregate) share on the command line and in their
// output, so that they take the same numbers, refuse them in the same words and show values alike.
#pragma once

#include <pmc/modelled_events.hpp>
#include <pmc/profile_format.hpp>
#include <pmc/profile_reader.hpp>

#include "command_line.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

namespace pmc_tool::cli {

/// How every profile tool says a profile is incomplete (exit status 2), the same words everywhere: how many
/// problems, the bytes lost if any, and whether the end record is missing (the program did not end its profiler).
inline std::string incomplete_text(const std::string& file, const pmc::Profile& p) {
    std::string s = fmt::format("'{}' is incomplete: {} problem{}", file, p.problems.size(),
                                p.problems.size() == 1 ? "" : "s");
    if (p.bytes_lost) s += fmt::format(", {} of its bytes could not be read", p.bytes_lost);
    if (!p.has_end) s += ", no end record (the program did not end its profiler: killed, or still running)";
    return s;
}

/// Per thread, the intervals open when its last thread page was written (outermost first), for a profile whose
/// program did not close its profiler: what it was inside when it stopped. Empty when none were open.
inline std::vector<std::string> open_intervals_text(const pmc::Profile& p) {
    std::vector<std::string> out;
    if (p.has_end && p.end_how == pmc::profile_format::EndHow::closed) return out;
    for (const auto& t : p.threads) {
        if (t.open.empty()) continue;
        std::string path;
        for (const auto& o : t.open) path += (path.empty() ? "" : " > ") + p.string(o.label);
        out.push_back(fmt::format("thread {}: {}", t.index, path));
    }
    return out;
}

/// Whether `p`'s program stopped inside scopes that the file names (a thread page listed them open, and the profiler
/// was not closed): not whole even when no scope had ended yet, so the file holds no interval at all.
inline bool ended_inside_scopes(const pmc::Profile& p) { return !open_intervals_text(p).empty(); }

/// How `p`'s program stopped, as its end record says, for "scopes were still open when the program stopped (...)".
inline std::string how_it_stopped(const pmc::Profile& p) {
    if (!p.has_end) return "killed, or crashed where no handler could run: the file has no end record";
    switch (p.end_how) {
    case pmc::profile_format::EndHow::signal:
        return "it ended on signal " + std::to_string(p.end_signal) + ", which the profiler's handler recorded";
    case pmc::profile_format::EndHow::exit: return "it called exit() inside them";
    case pmc::profile_format::EndHow::closed: break;
    }
    return "its profiler was closed inside them";
}

/// "'FILE' is not whole: scopes were still open when the program stopped (how)", the same words in every tool.
inline std::string not_whole_text(const std::string& file, const pmc::Profile& p) {
    return fmt::format("'{}' is not whole: scopes were still open when the program stopped ({})", file,
                       how_it_stopped(p));
}

/// The intervals open at the end, one line per thread starting with `indent` (open_intervals_text), or "".
inline std::string open_at_end_text(const pmc::Profile& p, const std::string& indent = "  ") {
    std::string out;
    for (const auto& w : open_intervals_text(p)) out += indent + w + "\n";
    return out;
}

/// Sums that never wrap: false (and the sum left as it was) where `v` cannot be added; the caller reports it as a
/// problem (exit status 2) instead of printing a wrapped number.
inline bool checked_add(std::int64_t& sum, std::int64_t v) { return !__builtin_add_overflow(sum, v, &sum); }
inline bool checked_add(std::uint64_t& sum, std::uint64_t v) { return !__builtin_add_overflow(sum, v, &sum); }
inline std::string overflow_text(const char* what) {
    return fmt::format("{} too large to sum (the file's values are corrupt, or a counter wrapped): left out, not "
                       "wrapped",
                       what);
}

/// The counter --counter `name` names in `counters`: the one of that exact name, else, for a name without modifiers
/// ("L1-dcache-load-misses"), the one counter recorded with some ("L1-dcache-load-misses:u"). `candidates` holds
/// the names that fit when several do (then none is chosen) and is empty otherwise.
struct CounterMatch {
    std::optional<std::size_t> index;
    std::vector<std::string> candidates;
};
inline CounterMatch match_counter(const std::vector<pmc::ProfileCounter>& counters, const std::string& name) {
    CounterMatch m;
    for (std::size_t c = 0; c < counters.size(); ++c)
        if (counters[c].name == name) {
            m.index = c;
            return m;
        }
    if (name.find(':') != std::string::npos) return m;
    std::optional<std::size_t> only;
    for (std::size_t c = 0; c < counters.size(); ++c)
        if (pmc::event_base_name(counters[c].name) == name) {
            only = c;
            m.candidates.push_back(counters[c].name);
        }
    if (m.candidates.size() == 1) {
        m.index = only;
        m.candidates.clear();
    }
    return m;
}

/// Why `file`'s counters hold no counter for --counter `name` (`m`: match_counter's answer), with its counters.
inline std::string no_counter_text(const std::vector<pmc::ProfileCounter>& counters, const std::string& file,
                                   const std::string& name, const CounterMatch& m) {
    auto joined = [](const std::vector<std::string>& names) {
        std::string out;
        for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
        return out;
    };
    if (!m.candidates.empty())
        return fmt::format("'{}' recorded {} counters named '{}' with modifiers: {}; choose one with --counter NAME",
                           file, m.candidates.size(), name, joined(m.candidates));
    std::vector<std::string> names;
    for (const auto& k : counters) names.push_back(k.name);
    return fmt::format("'{}' recorded no counter '{}'; it has: {} (choose one with --counter NAME)", file, name,
                       joined(names));
}

/// The index of counter `name` in `p`, read from `file` (an empty name: the primary, 0; match_counter's rule); else
/// what went wrong, with the counters the file has.
inline std::optional<std::string> find_counter(const pmc::Profile& p, const std::string& file, const std::string& name,
                                               std::size_t& index) {
    index = 0;
    if (name.empty()) return std::nullopt;
    const CounterMatch m = match_counter(p.counters, name);
    if (!m.index) return no_counter_text(p.counters, file, name, m);
    index = *m.index;
    return std::nullopt;
}

/// For "which profile?": when the option before it took the only file as its value (pmc summarize --counter FILE).
inline std::string took_file(const std::string& value) {
    return value.empty() ? "" : "; --counter took '" + value + "' as its counter name";
}

/// A thread as people and other runs know it: its name, and where several threads share that name, its place
/// among them ("worker#2": the second by thread number). The profiler's numbers follow registration order, which
/// changes from run to run when threads start at once; the names a program gives its threads do not.
struct ThreadKey {
    std::string name;      ///< as recorded ("" when the thread had none)
    std::uint32_t rank = 1; ///< 1, 2, ... among the file's threads with this name, by thread number
    std::uint32_t of = 1;   ///< how many threads have this name
    std::string text() const {
        const std::string shown = name.empty() ? "(unnamed)" : name;
        return of > 1 ? fmt::format("{}#{}", shown, rank) : shown;
    }
    bool operator<(const ThreadKey& o) const { return name != o.name ? name < o.name : rank < o.rank; }
    bool operator==(const ThreadKey& o) const { return name == o.name && rank == o.rank; }
};

/// Each thread's key (see ThreadKey), by thread number.
inline std::map<std::uint32_t, ThreadKey> thread_keys(const pmc::Profile& p) {
    std::map<std::string, std::vector<std::uint32_t>> by_name; // name -> thread numbers, in increasing order
    for (const auto& t : p.threads) by_name[t.name].push_back(t.index);
    std::map<std::uint32_t, ThreadKey> out;
    for (auto& [name, indexes] : by_name) {
        std::sort(indexes.begin(), indexes.end());
        for (std::size_t i = 0; i < indexes.size(); ++i)
            out[indexes[i]] = ThreadKey{name, static_cast<std::uint32_t>(i + 1), static_cast<std::uint32_t>(indexes.size())};
    }
    return out;
}

/// The threads of `p`, for a message: "0 "main", 1 "worker"".
inline std::string threads_text(const pmc::Profile& p) {
    std::string have;
    for (const auto& t : p.threads)
        have += (have.empty() ? "" : ", ") + std::to_string(t.index) + (t.name.empty() ? "" : " \"" + t.name + "\"");
    return have.empty() ? "none recorded events" : have;
}

/// No thread `index` in `p`: the numbers it has (not always 0 to n-1), and their names.
inline std::string no_thread(const pmc::Profile& p, const std::string& file, std::uint32_t index) {
    return fmt::format("'{}' has no thread {} (it has {}); its threads: {}", file, index, p.threads.size(),
                       threads_text(p));
}

/// The thread named `name` in `p` ("worker#2": the second of several named worker, by thread number; "#1" also names
/// a thread whose name is its own, so that a script's NAME#1 keeps working), or why none
/// is: no thread has that name, or several do (their numbers and keys listed).
inline std::variant<std::uint32_t, std::string> thread_named(const pmc::Profile& p, const std::string& file,
                                                             const std::string& name) {
    const auto keys = thread_keys(p);
    std::vector<std::uint32_t> named;
    for (const auto& [index, key] : keys) {
        if (key.text() == name) return index; // worker#2, or a name only one thread has
        if (key.of == 1 && name == (key.name.empty() ? "(unnamed)" : key.name) + "#1") return index; // a script's #1
        if (key.name == name) named.push_back(index);
    }
    if (named.empty())
        return fmt::format("'{}' has no thread named '{}' (it has {}); its threads: {}", file, name, p.threads.size(),
                           threads_text(p));
    std::string which;
    for (auto index : named) which += fmt::format("{}{} ({})", which.empty() ? "" : ", ", keys.at(index).text(), index);
    return fmt::format("'{}' has {} threads named '{}': {}; give one of these names or numbers", file, named.size(),
                       name, which);
}

/// The options summarize and critical share: FILE, --counter NAME, --per-thread, --thread N|NAME, --json.
struct ProfileArgs {
    std::string file, counter;
    std::optional<std::uint32_t> only_thread;
    std::optional<std::string> thread_name; ///< --thread NAME (not a number): resolved by select_threads
    bool per_thread = false, json = false;

    /// Declares them on the tool's command line (before parsing).
    void add_to(pmc_cli::CommandLine& cl) {
        cl.flag("--json", json);
        cl.flag("--per-thread", per_thread);
        cl.option("--counter", counter, "a counter name");
        thread_option_ = cl.option("--thread", thread_text_, "a thread number or name");
        cl.option("FILE", files_, "a profile");
    }

    /// After parsing: the values read (`file`, `only_thread`), or what is wrong, missing or conflicting.
    std::optional<std::string> check(const char* tool) {
        // Digits are a thread number, anything else a name (found in the file by select_threads).
        const bool digits = !thread_text_.empty() && std::all_of(thread_text_.begin(), thread_text_.end(),
                                                                 [](char ch) { return ch >= '0' && ch <= '9'; });
        if (thread_option_.given() && !digits) {
            if (thread_text_.empty()) return std::string("--thread needs a thread number or name");
            thread_name = thread_text_;
        } else {
            const auto thread = pmc_cli::whole_number_option(thread_option_, thread_text_, UINT64_MAX, UINT32_MAX);
            if (!thread) return std::string("--thread needs a thread number or name");
            if (*thread != UINT64_MAX) only_thread = static_cast<std::uint32_t>(*thread);
        }
        if (files_.size() > 1) return std::string("one FILE at a time");
        if (files_.empty()) return fmt::format("which profile? (pmc {} FILE){}", tool, took_file(counter));
        file = files_.front();
        if (per_thread && (only_thread || thread_name)) return std::string("--per-thread and --thread exclude each other");
        return std::nullopt;
    }

private:
    pmc_cli::Option thread_option_;
    std::string thread_text_;
    std::vector<std::string> files_;
};

/// Opens `file` with the streaming reader and finds counter `name` in it (empty: the primary); when either fails,
/// says why on stderr ("pmc TOOL: ...") and returns nothing: the tool's status is then 1.
inline std::optional<pmc::ProfileReader> open_profile(const char* tool, const std::string& file,
                                                      const std::string& name, std::size_t& counter) {
    auto read = pmc::ProfileReader::open(file);
    if (!read) {
        fmt::print(stderr, "pmc {}: {}\n", tool, read.failure().message);
        return std::nullopt;
    }
    if (auto failure = find_counter(read->profile(), file, name, counter)) {
        fmt::print(stderr, "pmc {}: {}\n", tool, *failure);
        return std::nullopt;
    }
    return std::move(*read);
}

/// The threads to report (all, or thread `only`); false, said on stderr, when `only` is not in the file.
inline bool select_threads(const char* tool, const pmc::Profile& p, const std::string& file,
                           std::optional<std::uint32_t> only, std::vector<const pmc::ProfileThread*>& out) {
    for (const auto& t : p.threads)
        if (!only || t.index == *only) out.push_back(&t);
    if (only && out.empty()) {
        fmt::print(stderr, "pmc {}: {}\n", tool, no_thread(p, file, *only));
        return false;
    }
    return true;
}

/// As above for the tool's --thread: a name is first turned into the thread's number (args.only_thread).
inline bool select_threads(const char* tool, const pmc::Profile& p, ProfileArgs& args,
                           std::vector<const pmc::ProfileThread*>& out) {
    if (args.thread_name) {
        auto found = thread_named(p, args.file, *args.thread_name);
        if (auto* why = std::get_if<std::string>(&found)) {
            fmt::print(stderr, "pmc {}: {}\n", tool, *why);
            return false;
        }
        args.only_thread = std::get<std::uint32_t>(found);
    }
    return select_threads(tool, p, args.file, args.only_thread, out);
}

/// A value in the counter's unit: times scaled (ns, us, ms, s), counts as integers.
inline std::string show(double v, const std::string& unit) {
    if (unit != "ns") // a median of an even number of runs may end in .5: shown so, never rounded to a neighbour
        return std::fabs(v) >= 1e15 ? fmt::format("{:.3e}", v)
                                    : v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
    const double a = std::fabs(v);
    if (a < 1e3) return fmt::format("{:.0f} ns", v);
    if (a < 1e6) return fmt::format("{:.2f} us", v / 1e3);
    if (a < 1e9) return fmt::format("{:.2f} ms", v / 1e6);
    return fmt::format("{:.3f} s", v / 1e9);
}

/// The median of `v` (reordered): its middle value, or the mean of its two middle values when it has an even number.
/// The one rule every profile tool uses (summarize, diff, aggregate); 0 for no values.
template <class T>
double median(std::vector<T>& v) {
    if (v.empty()) return 0;
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    const double upper = static_cast<double>(v[mid]);
    if (v.size() % 2) return upper;
    const double lower = static_cast<double>(*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)));
    return lower + (upper - lower) / 2;
}

/// Labels of the scopes that were open on thread `thread` when its last page was written, outermost first, as the
/// file's thread page lists them (pmc::ProfileThread::open).
inline std::vector<std::string> known_open_scopes(const pmc::Profile& p, std::uint32_t thread) {
    std::vector<std::string> out;
    for (const auto& t : p.threads)
        if (t.index == thread)
            for (const auto& o : t.open) out.push_back(p.string(o.label));
    return out;
}

/// Scopes whose enclosing scopes are not in the file, gathered from the nesting walker: a program killed (SIGKILL,
/// or a crash no handler could catch) or ended with scopes open leaves its outer scopes unwritten; a lost page
/// loses some in the middle. The tools count such a scope as outermost (so totals and shares stay whole: the run is
/// what the file holds), say what was open, and exit 2: the profile is not whole.
class OpenScopes {
public:
    struct Thread {
        std::uint32_t index = 0;
        std::uint64_t orphans = 0;      ///< scopes at the top of the walk with depth > 0 (their enclosing not found)
        std::uint64_t lost_middle = 0;  ///< scopes that lost an enclosing scope between two found (a lost page)
        std::uint32_t open_depth = 0;   ///< depth of the last orphan written: scopes open around it, never written
        std::uint64_t last_ordinal = 0;
        bool has_last = false;
    };

    /// One scope from the walker. A walk's root (no enclosing scope found) comes right after its descendants, so
    /// these wait for it: a descendant whose depth is more than its root's plus its place in the path lost a scope
    /// in between (a lost page); one below an open root lost nothing more.
    void note(const pmc::NestedInterval& s) {
        if (!s.path_complete) ++incomplete_;
        const std::uint64_t above = s.path().size() - 1; // enclosing scopes found
        const std::uint64_t gap = s.depth >= above ? s.depth - above : 0; // the depth its root should have
        if (s.parent != pmc::no_parent) {
            if (!s.path_complete) {
                auto& gaps = pending_[s.thread];
                auto it = std::find_if(gaps.begin(), gaps.end(), [&](const auto& g) { return g.first == gap; });
                if (it == gaps.end()) gaps.emplace_back(gap, 1);
                else ++it->second;
            }
            return;
        }
        std::uint64_t lost = 0;
        if (auto it = pending_.find(s.thread); it != pending_.end()) {
            for (const auto& [g, n] : it->second)
                if (g != s.depth) lost += n;
            pending_.erase(it);
        }
        if (s.depth == 0 && lost == 0) return;
        Thread& t = thread(s.thread);
        t.lost_middle += lost;
        if (s.depth == 0) return;
        ++t.orphans;
        if (!t.has_last || s.ordinal > t.last_ordinal) {
            t.has_last = true;
            t.last_ordinal = s.ordinal;
            t.open_depth = s.depth;
        }
    }
    bool any() const { return !threads_.empty(); }
    /// Scopes whose enclosing scopes are not all in the file (those inside an open scope too).
    std::uint64_t orphans() const { return incomplete_; }
    const std::vector<Thread>& threads() const { return threads_; }

    /// What was open, one line per thread (each starting with `indent`), for people.
    std::string text(const pmc::Profile& p, const std::string& indent = "  ") const {
        std::string out;
        for (const auto& t : threads_) {
            const auto labels = known_open_scopes(p, t.index);
            std::string named;
            for (const auto& l : labels) named += (named.empty() ? "" : " > ") + l;
            if (t.orphans)
                out += fmt::format(
                    "{}thread {}: {} scope{} had not ended when its last page was written ({}){}; the {} scope{} "
                    "recorded inside them count{} as outermost\n",
                    indent, t.index, t.open_depth, t.open_depth == 1 ? "" : "s", how_it_stopped(p),
                    named.empty() ? ": their labels are not in the file (format " + std::to_string(p.version) +
                                        " does not record open scopes)"
                                  : ": " + named,
                    t.orphans, t.orphans == 1 ? "" : "s", t.orphans == 1 ? "s" : "");
            if (t.lost_middle)
                out += fmt::format("{}thread {}: {} scope{} lost some enclosing scopes (a lost page): placed under the "
                                   "nearest enclosing scope found\n",
                                   indent, t.index, t.lost_middle, t.lost_middle == 1 ? "" : "s");
        }
        return out;
    }

    /// The same as a JSON array (JsonWriter from pmc/report.hpp).
    template <class Json>
    void json(Json& j, const pmc::Profile& p) const {
        j.begin_array();
        for (const auto& t : threads_) {
            j.begin_object().field("thread", t.index).field("open_depth", t.open_depth);
            j.field("scopes_counted_outermost", t.orphans).field("scopes_with_lost_middle", t.lost_middle);
            j.key("open_labels");
            const auto labels = known_open_scopes(p, t.index);
            if (labels.empty()) j.null();
            else {
                j.begin_array();
                for (const auto& l : labels) j.value(l);
                j.end_array();
            }
            j.end_object();
        }
        j.end_array();
    }

private:
    Thread& thread(std::uint32_t index) {
        for (auto& t : threads_)
            if (t.index == index) return t;
        threads_.push_back(Thread{});
        threads_.back().index = index;
        return threads_.back();
    }
    std::vector<Thread> threads_;
    std::uint64_t incomplete_ = 0;
    std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> pending_; // thread -> (gap, scopes)
};

/// A label cut to `width` columns for a table: its start and its end kept around "..." (labels that share a long
/// start, such as SQL text or a namespace, differ at the end), so that a long label does not push the other columns
/// out of line. Counts bytes; a cut never splits a UTF-8 sequence. A table uses LabelColumn, which never cuts two
/// labels into the same text.
inline std::string fit(const std::string& s, std::size_t width) {
    if (s.size() <= width || width < 7) return s;
    auto continuation = [&](std::size_t i) { return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
    const std::size_t keep = width - 3, head_wanted = (keep + 1) / 2;
    std::size_t head = head_wanted, tail = s.size() - (keep - head_wanted);
    while (head > 0 && continuation(head)) --head;
    while (tail < s.size() && continuation(tail)) ++tail;
    return s.substr(0, head) + "..." + s.substr(tail);
}

/// A table's label column: each label as `fit` cuts it to `width`, except labels that would then read like another
/// label of the table (cut or whole), which are shown whole: four labels that differ only in the middle must not
/// print as one.
class LabelColumn {
public:
    LabelColumn(const std::vector<std::string>& labels, std::size_t width) : width_(width) {
        for (const auto& l : labels) shown_[l] = fit(l, width);
        for (bool again = true; again;) { // showing a label whole may make it read like another's cut: look again
            again = false;
            std::map<std::string, std::vector<std::string>> readers; // shown text -> the labels shown so
            for (const auto& [label, text] : shown_) readers[text].push_back(label);
            for (const auto& entry : readers) {
                const std::vector<std::string>& same = entry.second;
                if (same.size() < 2) continue;
                for (const auto& l : same)
                    if (shown_[l] != l) shown_[l] = l, again = true;
            }
        }
    }
    std::size_t width() const { return width_; }
    /// `label` as the column shows it (a label not given to the constructor: cut alone).
    std::string operator()(const std::string& label) const {
        const auto it = shown_.find(label);
        return it == shown_.end() ? fit(label, width_) : it->second;
    }

private:
    std::size_t width_;
    std::map<std::string, std::string> shown_;
};

/// Runs a profile tool and makes the fate of its output part of its status: a write that failed on the way (a full
/// disk: fmt::print throws) or at the final flush is said, status 1, instead of an uncaught exception (abort) or a
/// silent 0 over a cut output. stderr is written with fprintf here: it must not throw again.
template <class Run>
int guarded(const char* tool, Run&& run) {
    int status = 1;
    try {
        status = run();
    } catch (const std::system_error& e) {
        std::fflush(stdout); // what is buffered may still go
        std::fprintf(stderr, "pmc %s: cannot write the output: %s (what was written is incomplete)\n", tool, e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "pmc %s: out of memory\n", tool);
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pmc %s: internal error: %s (please report it with the file that caused it)\n", tool,
                     e.what());
        return 1;
    }
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        const int err = errno;
        std::fprintf(stderr, "pmc %s: cannot write to standard output: %s (what was written is incomplete)\n", tool,
                     std::strerror(err));
        return 1;
    }
    return status;
}

} // namespace pmc_tool::cli
