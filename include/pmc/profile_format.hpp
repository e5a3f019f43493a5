// pmc/profile_format.hpp: the profiler's file (docs/profile-format.md) and its reader.
//
//     auto profile = pmc::read_profile("out.pmcprof");   // pmc::Result<pmc::Profile>
//     for (const auto& problem : profile->problems) std::fprintf(stderr, "%s\n", problem.c_str());
//
// The reader never trusts the file: a truncated or corrupt file is read up to its last whole record, and every
// byte it could not use is reported in Profile::problems (what was lost and where). Only a file whose header
// cannot be read is a failure. Pure: no kernel, no counters; the writer is pmc/profiler.hpp.
#pragma once

#include <pmc/config.hpp>
#include <pmc/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pmc's profile format is little-endian and pmc writes it with plain stores: a little-endian target is needed"
#endif

PMC_BEGIN_NAMESPACE

namespace profile_format {

inline constexpr char file_magic[8] = {'P', 'M', 'C', 'P', 'R', 'O', 'F', '\n'};
inline constexpr std::uint32_t version = 1;
inline constexpr std::size_t file_header_fixed = 24; ///< magic, version, header bytes, checksum, reserved
inline constexpr std::uint32_t page_magic = 0x50434D50; ///< the bytes "PMCP"
inline constexpr std::size_t page_header_bytes = 32;
inline constexpr std::uint32_t max_page_payload = 16u << 20; ///< a reader refuses larger pages as corrupt
inline constexpr std::size_t max_counters = 4;               ///< the primary and up to three riding along

enum class PageKind : std::uint16_t { events = 1, strings = 2, thread = 3 };

enum class Tag : std::uint16_t {
    pmc_version = 1,  ///< string
    pid = 2,          ///< u64
    command_line = 3, ///< the arguments, each followed by a NUL
    start_time = 4,   ///< u64: Unix time in ns when the profiler started
    cpu = 5,          ///< string
    kernel = 6,       ///< string
    aslr = 7,         ///< string
    counter = 8,      ///< one per counter, the primary first (see CounterFlag and docs)
    warning = 9,      ///< string: a fallback or problem the writer noticed
    page_bytes = 10,  ///< u64: the writer's page size
    start_values = 11 ///< u64 per counter: each counter's reading when the profiler started
};

/// Bits of a counter's flags.
enum CounterFlag : std::uint32_t {
    exact = 1u << 0,         ///< an event count read whole (not a time, not sampled, not scaled)
    irq_corrected = 1u << 1, ///< a composite with the interrupts taken subtracted (instructions-minus-irqs)
    may_multiplex = 1u << 2, ///< a hardware event that shares the PMU: the kernel may time-share it
    fallback = 1u << 3,      ///< recorded in place of a counter that could not be opened (see the warnings)
};

/// The kind of an event record (the low 2 bits of its first word).
/// nesting_error: an end (Profiler::end, or a scope ended before the intervals opened inside it) that did not match
/// the innermost open interval; a reader reports it and does not keep it as an event.
enum class RecordKind : std::uint8_t { interval = 0, instant = 1, integer = 2, nesting_error = 3 };

inline constexpr unsigned depth_bits = 10;
inline constexpr std::uint32_t max_depth = (1u << depth_bits) - 1; ///< deeper scopes are stored at this depth
inline constexpr std::uint32_t max_label = (1u << (32 - 2 - depth_bits)) - 1;

/// The first word of a record: kind (2 bits), depth (10 bits), label (20 bits).
constexpr std::uint32_t record_word(RecordKind kind, std::uint32_t depth, std::uint32_t label) {
    return static_cast<std::uint32_t>(kind) | (std::min(depth, max_depth) << 2) | (label << (2 + depth_bits));
}

/// Bytes of a record with `counters` counters.
constexpr std::size_t record_bytes(RecordKind kind, std::size_t counters) {
    return kind == RecordKind::interval ? 8 + 16 * counters
           : kind == RecordKind::instant || kind == RecordKind::nesting_error ? 16
                                                                             : 24;
}

/// The pages' checksum: four 64-bit multiply-xor lanes over the payload, seeded by the page header. Fast enough to
/// run on every page flush (a few microseconds per 64 KiB); not cryptographic.
inline std::uint32_t checksum(const unsigned char* p, std::size_t n, std::uint64_t seed) noexcept {
    constexpr std::uint64_t k = 0x9E3779B97F4A7C15ull;
    std::uint64_t h[4] = {seed ^ k, seed + k, ~seed, seed * k + 1};
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; ++l) {
            std::uint64_t w;
            std::memcpy(&w, p + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * k;
            h[l] ^= h[l] >> 29;
        }
    std::uint64_t tail = n;
    for (; i < n; ++i) tail = (tail ^ p[i]) * 0x100000001B3ull;
    std::uint64_t r = tail;
    for (int l = 0; l < 4; ++l) r = (r ^ h[l]) * k, r ^= r >> 32;
    // A full avalanche last (splitmix64's finalizer): a change in any bit reaches the 32 bits kept. (Without it a
    // flip high in the last block's last word touched only 5 of them: 1 in 32 such flips went unnoticed.)
    r ^= r >> 30;
    r *= 0xBF58476D1CE4E5B9ull;
    r ^= r >> 27;
    r *= 0x94D049BB133111EBull;
    r ^= r >> 31;
    return static_cast<std::uint32_t>(r);
}

/// The seed of a page's checksum: its header fields. The record count is rotated, not shifted, by 40 bits, so that
/// its high byte is covered too (a shift would drop it, and a flipped byte there would go unnoticed).
constexpr std::uint64_t page_seed(std::uint16_t kind, std::uint32_t thread, std::uint32_t sequence,
                                  std::uint32_t payload, std::uint32_t records) {
    return (std::uint64_t{kind} << 48) ^ (std::uint64_t{thread} << 32) ^ sequence ^ (std::uint64_t{payload} << 20) ^
           (std::uint64_t{records} << 40) ^ (std::uint64_t{records} >> 24);
}

/// Writes a page header for `payload` into `out` (32 bytes). Async-signal-safe.
inline void write_page_header(unsigned char* out, PageKind kind, std::uint32_t thread, std::uint32_t sequence,
                              const unsigned char* payload, std::uint32_t payload_bytes, std::uint32_t records) noexcept {
    const auto k = static_cast<std::uint16_t>(kind);
    const std::uint16_t header = page_header_bytes;
    const std::uint32_t sum = checksum(payload, payload_bytes, page_seed(k, thread, sequence, payload_bytes, records));
    const std::uint32_t zero = 0;
    std::memcpy(out + 0, &page_magic, 4);
    std::memcpy(out + 4, &k, 2);
    std::memcpy(out + 6, &header, 2);
    std::memcpy(out + 8, &thread, 4);
    std::memcpy(out + 12, &sequence, 4);
    std::memcpy(out + 16, &payload_bytes, 4);
    std::memcpy(out + 20, &records, 4);
    std::memcpy(out + 24, &sum, 4);
    std::memcpy(out + 28, &zero, 4);
}

} // namespace profile_format

/// One counter of a profile, as its header describes it.
struct ProfileCounter {
    std::string name;      ///< the event string, e.g. "wall-time", "page-faults", "instructions-minus-irqs:u"
    std::string unit;      ///< "ns", "TSC ticks", or "events" (a count of the named event)
    std::string read_path; ///< how it was read: "rdpmc", "read()", "rdtsc->ns", ...
    std::string note;      ///< what pmc chose and why
    std::uint32_t flags = 0;
    double cost_to_parent = 0; ///< what recording one scope adds to its enclosing scope's value (measured at start)
    double cost_in_scope = 0;  ///< the value an empty scope records (the recording's own share inside it)
    bool exact() const noexcept { return flags & profile_format::exact; }
};

/// One event as recorded. Values are in `Profile::values`, from `first_value`: an interval has a start and an end
/// per counter (start0, end0, start1, end1, ...); an instant the primary counter's reading; an integer event the
/// primary counter's reading and then the integer.
struct ProfileRecord {
    profile_format::RecordKind kind = profile_format::RecordKind::interval;
    std::uint16_t depth = 0;   ///< nesting depth on its thread (0: outermost); saturates at max_depth
    std::uint32_t label = 0;   ///< string id
    std::uint32_t arg = 0;     ///< string id of its argument; 0: none
    std::size_t first_value = 0;
};

/// How long one thread's counter was enabled and how long it was actually counting (the kernel's time_enabled and
/// time_running, in ns). They differ when the kernel multiplexed it: its values then count only part of the time.
struct ProfileCounterTimes {
    std::uint64_t enabled = 0; ///< 0: not known (a clock such as wall-time, or not read yet)
    std::uint64_t running = 0;
    bool known() const noexcept { return enabled != 0; }
    /// running / enabled: 1 = counted all along; less = multiplexed, its counts cover only that share of the time.
    double running_fraction() const noexcept {
        return known() ? std::min(1.0, static_cast<double>(running) / static_cast<double>(enabled)) : 1.0;
    }
    bool multiplexed() const noexcept { return known() && running < enabled; }
};

/// One thread that recorded events. Its records are in the order they ended (postorder: children before parents).
struct ProfileThread {
    std::uint32_t index = 0; ///< the profiler's number for it (0: the thread that created the profiler)
    std::uint64_t tid = 0;   ///< the kernel's thread id
    std::string name;        ///< as set with Profiler::thread_name (the last one set), or the kernel's comm
    std::string error;       ///< why its counters could not be opened ("" when they were): its values are 0
    /// Per counter, as of the thread's last page (written at each page flush and at the thread's end): empty when the
    /// file does not say (an older writer: the thread page had no times yet).
    std::vector<ProfileCounterTimes> times;
    std::vector<ProfileRecord> records;
    std::uint32_t pages = 0;        ///< event pages read
    std::uint32_t missing_pages = 0; ///< event pages whose sequence numbers are absent (lost or corrupt)
    bool seen_info = false;
    /// Ends that did not match the innermost open interval (Profiler::end with another label or nothing open, a
    /// scope ended before the intervals opened inside it): those intervals are not in `records`.
    struct NestingError {
        std::uint32_t label = 0; ///< the label ended
        std::uint32_t inner = 0; ///< the innermost interval open then (0: none)
        std::uint32_t depth = 0; ///< intervals open then
    };
    std::vector<NestingError> nesting_errors;
};

/// A profile as read: the header, the strings, and each thread's records.
struct Profile {
    std::uint32_t version = 0;
    std::string pmc_version;
    std::uint64_t pid = 0;
    std::vector<std::string> command_line;
    std::uint64_t start_time_ns = 0;
    std::string cpu, kernel, aslr;
    std::uint64_t page_bytes = 0;
    std::vector<std::string> warnings; ///< the writer's (fallbacks, counters that failed on a thread)
    std::vector<ProfileCounter> counters;
    std::vector<std::uint64_t> start_values;
    std::unordered_map<std::uint32_t, std::string> strings;
    std::vector<ProfileThread> threads;
    std::vector<std::uint64_t> values;
    std::vector<std::string> problems; ///< what the reader could not use, and what that lost
    std::uint64_t bytes_read = 0, bytes_lost = 0;

    /// A string by id; "<string N: lost>" when its definition is not in the file.
    std::string string(std::uint32_t id) const {
        auto it = strings.find(id);
        return it != strings.end() ? it->second : "<string " + std::to_string(id) + ": lost>";
    }
    std::size_t values_per_record(profile_format::RecordKind kind) const {
        return kind == profile_format::RecordKind::interval ? 2 * counters.size()
               : kind == profile_format::RecordKind::instant ? 1
                                                              : 2;
    }
};

namespace detail {

struct ByteReader {
    const unsigned char* p;
    std::size_t n, at = 0;
    bool ok = true;
    template <class T>
    T get() {
        T v{};
        if (n - at < sizeof v) {
            ok = false;
            at = n;
            return v;
        }
        std::memcpy(&v, p + at, sizeof v);
        at += sizeof v;
        return v;
    }
    std::string str(std::size_t len) {
        if (n - at < len) {
            ok = false;
            at = n;
            return {};
        }
        std::string s(reinterpret_cast<const char*>(p + at), len);
        at += len;
        return s;
    }
    std::string lstr() { return str(get<std::uint32_t>()); }
};

inline std::string bytes_text(std::uint64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

/// Parses the header's fields into `out`; a failure says what is wrong.
inline std::optional<Failure> parse_profile_header(const unsigned char* p, std::size_t n, Profile& out,
                                                   std::size_t& header_bytes) {
    namespace pf = profile_format;
    auto fail = [](std::string why) { return make_failure(EINVAL, "not a readable pmc profile: " + why); };
    if (n < pf::file_header_fixed)
        return fail("the file has " + bytes_text(n) + ", less than the " + std::to_string(pf::file_header_fixed) +
                    "-byte fixed header (the program stopped before its profiler started, or this is not a profile)");
    if (std::memcmp(p, pf::file_magic, 8) != 0) return fail("it does not start with PMCPROF (wrong file?)");
    ByteReader r{p, n, 8};
    out.version = r.get<std::uint32_t>();
    const auto total = r.get<std::uint32_t>();
    const auto sum = r.get<std::uint32_t>();
    if (r.get<std::uint32_t>() != 0) return fail("its header's reserved word is not 0: corrupt");
    if (out.version != pf::version)
        return fail("format version " + std::to_string(out.version) + "; this pmc reads version " +
                    std::to_string(pf::version) + " (use the pmc that wrote it)");
    if (total < pf::file_header_fixed || total > (1u << 24))
        return fail("its header claims " + bytes_text(total) + ", which is corrupt");
    if (total > n)
        return fail("the header needs " + bytes_text(total) + " but the file has " + bytes_text(n) +
                    ": cut short before any event was written");
    if (pf::checksum(p + pf::file_header_fixed, total - pf::file_header_fixed, total) != sum)
        return fail("the header's checksum does not match: it is corrupt");
    header_bytes = total;
    ByteReader h{p, total, pf::file_header_fixed};
    while (h.at < total) {
        const auto tag = static_cast<pf::Tag>(h.get<std::uint16_t>());
        h.get<std::uint16_t>();
        const auto len = h.get<std::uint32_t>();
        if (!h.ok || total - h.at < len) return fail("a header field runs past the header: corrupt");
        ByteReader f{p + h.at, len};
        h.at += len;
        switch (tag) {
        case pf::Tag::pmc_version: out.pmc_version = f.str(len); break;
        case pf::Tag::pid: out.pid = f.get<std::uint64_t>(); break;
        case pf::Tag::command_line: {
            std::string all = f.str(len);
            for (std::size_t at = 0; at < all.size();) {
                const std::size_t nul = all.find('\0', at);
                out.command_line.push_back(all.substr(at, nul == std::string::npos ? std::string::npos : nul - at));
                at = nul == std::string::npos ? all.size() : nul + 1;
            }
            break;
        }
        case pf::Tag::start_time: out.start_time_ns = f.get<std::uint64_t>(); break;
        case pf::Tag::cpu: out.cpu = f.str(len); break;
        case pf::Tag::kernel: out.kernel = f.str(len); break;
        case pf::Tag::aslr: out.aslr = f.str(len); break;
        case pf::Tag::warning: out.warnings.push_back(f.str(len)); break;
        case pf::Tag::page_bytes: out.page_bytes = f.get<std::uint64_t>(); break;
        case pf::Tag::counter: {
            ProfileCounter c;
            c.flags = f.get<std::uint32_t>();
            f.get<std::uint32_t>();
            c.cost_to_parent = static_cast<double>(f.get<std::int64_t>()) / 1000.0;
            c.cost_in_scope = static_cast<double>(f.get<std::int64_t>()) / 1000.0;
            c.name = f.lstr();
            c.unit = f.lstr();
            c.read_path = f.lstr();
            c.note = f.lstr();
            if (!f.ok) return fail("a counter's description is cut short: corrupt");
            out.counters.push_back(std::move(c));
            break;
        }
        case pf::Tag::start_values:
            while (f.at + 8 <= len) out.start_values.push_back(f.get<std::uint64_t>());
            break;
        default: break; // a later version's field: skipped
        }
        if (!f.ok) return fail("header field " + std::to_string(static_cast<unsigned>(tag)) + " is cut short: corrupt");
    }
    if (out.counters.empty() || out.counters.size() > pf::max_counters)
        return fail("the header names " + std::to_string(out.counters.size()) + " counters (1 to " +
                    std::to_string(pf::max_counters) + " expected): corrupt");
    return std::nullopt;
}

/// A page header's fields as write_page_header lays them out; all zero when fewer than its 32 bytes remain.
struct PageHeader {
    std::uint32_t magic = 0, thread = 0, seq = 0, len = 0, records = 0, sum = 0, reserved = 0;
    std::uint16_t kind = 0, header = 0;

    /// Magic, header size, kind and payload size make sense (checksum and reserved word not checked).
    bool sane() const {
        namespace pf = profile_format;
        return magic == pf::page_magic && header == pf::page_header_bytes && kind >= 1 && kind <= 3 &&
               len <= pf::max_page_payload;
    }
};

inline PageHeader read_page_header(const unsigned char* p, std::size_t n) {
    PageHeader h;
    if (n < profile_format::page_header_bytes) return h;
    std::memcpy(&h.magic, p, 4);
    std::memcpy(&h.kind, p + 4, 2);
    std::memcpy(&h.header, p + 6, 2);
    std::memcpy(&h.thread, p + 8, 4);
    std::memcpy(&h.seq, p + 12, 4);
    std::memcpy(&h.len, p + 16, 4);
    std::memcpy(&h.records, p + 20, 4);
    std::memcpy(&h.sum, p + 24, 4);
    std::memcpy(&h.reserved, p + 28, 4);
    return h;
}

/// Whether a whole, valid page starts at `p` (magic, sane sizes, checksum).
inline bool valid_page_at(const unsigned char* p, std::size_t n) {
    namespace pf = profile_format;
    const PageHeader h = read_page_header(p, n);
    if (!h.sane() || h.reserved != 0 || n - pf::page_header_bytes < h.len) return false;
    return pf::checksum(p + pf::page_header_bytes, h.len, pf::page_seed(h.kind, h.thread, h.seq, h.len, h.records)) ==
           h.sum;
}

/// What both readers (parse_profile, ProfileReader) say of a loss, in the same words: the tools and tests compare them.
inline void lose(Profile& out, std::uint64_t from, std::uint64_t to, const std::string& what) {
    out.bytes_lost += to - from;
    out.problems.push_back("bytes " + std::to_string(from) + "-" + std::to_string(to - 1) + " (" +
                           bytes_text(to - from) + "): " + what);
}
inline std::string cut_page_text(std::uint32_t thread, std::uint32_t seq, std::uint64_t avail, std::uint32_t len) {
    return "the file ends inside a page (thread " + std::to_string(thread) + ", page " + std::to_string(seq) + ": " +
           bytes_text(avail) + " of " + bytes_text(len) + ")";
}
inline std::string cut_page_kept_text(std::uint64_t records) {
    return "; its " + std::to_string(records) +
           " whole records are kept (unverified: the checksum covers the whole page), the rest of the page is lost";
}
inline std::string skipped_page_text(std::uint64_t remaining, bool header_sane, std::uint32_t thread,
                                     std::uint32_t seq) {
    namespace pf = profile_format;
    return remaining < pf::page_header_bytes ? "the file ends inside a page header"
           : !header_sane ? "not a valid page (corrupt); skipped to the next valid page"
                          : "a page whose checksum does not match (thread " + std::to_string(thread) + ", page " +
                                std::to_string(seq) + ": corrupt); skipped";
}
inline std::string bad_records_text(std::uint32_t thread, std::uint32_t seq, std::size_t used, std::uint32_t len) {
    return "thread " + std::to_string(thread) + " page " + std::to_string(seq) + ": a record does not make sense after " +
           std::to_string(used) + " of " + bytes_text(len) + " (written by another version?)";
}

/// An events page's place in its thread's sequence (`next_seq`: each thread's next page number), counted in
/// t.pages: true when it is the thread's previous page again, longer (flushed at exit or by a fatal signal, then by
/// its thread), whose earlier copy the caller then drops. Missing and out-of-order pages are said in out.problems.
inline bool events_page_repeats(Profile& out, ProfileThread& t,
                                std::unordered_map<std::uint32_t, std::uint32_t>& next_seq, std::uint32_t seq) {
    std::uint32_t& want = next_seq[t.index]; // 0 for a thread's first page
    const bool repeat = want > 0 && seq == want - 1;
    if (repeat) {
        --t.pages;
    } else if (seq > want) {
        t.missing_pages += seq - want;
        out.problems.push_back("thread " + std::to_string(t.index) + ": " + std::to_string(seq - want) +
                               " event page(s) missing before page " + std::to_string(seq) + " (lost or corrupt)");
    } else if (seq < want) {
        out.problems.push_back("thread " + std::to_string(t.index) + ": page " + std::to_string(seq) +
                               " appears out of order; read anyway");
    }
    ++t.pages;
    want = std::max(want, seq + 1);
    return repeat;
}

/// Each thread's nesting errors as one problem (with the first's labels).
inline void report_nesting_errors(Profile& out) {
    for (const ProfileThread& t : out.threads) {
        if (t.nesting_errors.empty()) continue;
        const auto& e = t.nesting_errors.front();
        out.problems.push_back(
            "thread " + std::to_string(t.index) + ": " + std::to_string(t.nesting_errors.size()) +
            " end(s) that did not match the innermost open interval (the first: the end of '" + out.string(e.label) +
            "' while " + (e.inner ? "'" + out.string(e.inner) + "' was innermost" : std::string("nothing was open")) +
            ", at depth " + std::to_string(e.depth) +
            "); those intervals are not in the profile (the program's begin/end calls or scopes are unbalanced)");
    }
}

/// A strings page's body (after its page header): (u32 id, string) pairs into `out.strings`. False when it is
/// malformed (the pairs before the damage are kept).
inline bool read_strings_page(ByteReader& r, std::size_t len, Profile& out) {
    while (r.ok && r.at < len) {
        const auto id = r.get<std::uint32_t>();
        std::string s = r.lstr();
        if (r.ok) out.strings[id] = std::move(s);
    }
    return r.ok;
}


/// A thread page's body (after its page header) into `t`: tid, name, error and, from newer writers, the counters'
/// times (u32 counters, u32 reserved, per counter u64 enabled, u64 running). False when it is malformed.
inline bool read_thread_page(ByteReader& r, std::size_t len, ProfileThread& t) {
    const auto tid = r.get<std::uint64_t>();
    r.get<std::uint32_t>();
    std::string name = r.lstr();
    std::string error = r.lstr();
    std::vector<ProfileCounterTimes> times;
    if (r.ok && r.at < len) {
        const auto count = r.get<std::uint32_t>();
        r.get<std::uint32_t>();
        for (std::uint32_t i = 0; r.ok && i < count && i < profile_format::max_counters; ++i) {
            ProfileCounterTimes ct;
            ct.enabled = r.get<std::uint64_t>();
            ct.running = r.get<std::uint64_t>();
            if (r.ok) times.push_back(ct);
        }
    }
    if (!r.ok) return false;
    t.tid = tid;
    t.name = std::move(name);
    t.error = std::move(error);
    if (!times.empty()) t.times = std::move(times);
    t.seen_info = true;
    return true;
}
} // namespace detail

/// Reads a profile from its bytes. Fails only when the header cannot be read; everything after it is read page by
/// page, and what cannot be used is described in Profile::problems.
inline Result<Profile> parse_profile(const unsigned char* p, std::size_t n) {
    namespace pf = profile_format;
    Profile out;
    std::size_t at = 0;
    if (auto failure = detail::parse_profile_header(p, n, out, at)) return std::move(*failure);
    const std::size_t ncounters = out.counters.size();
    std::unordered_map<std::uint32_t, std::size_t> thread_at; // profiler thread number -> index in out.threads
    std::unordered_map<std::uint32_t, std::uint32_t> next_seq;
    std::unordered_map<std::uint32_t, std::size_t> last_page; // records before it
    auto thread = [&](std::uint32_t index) -> ProfileThread& {
        auto it = thread_at.find(index);
        if (it != thread_at.end()) return out.threads[it->second];
        thread_at.emplace(index, out.threads.size());
        out.threads.emplace_back();
        out.threads.back().index = index;
        return out.threads.back();
    };
    // Parses an events page's records; returns false at the first record that does not fit or make sense.
    auto parse_events = [&](ProfileThread& t, const unsigned char* q, std::size_t len, std::size_t& used) {
        used = 0;
        while (used < len) {
            if (len - used < 8) return false;
            std::uint32_t word, arg;
            std::memcpy(&word, q + used, 4);
            std::memcpy(&arg, q + used + 4, 4);
            const auto kind = static_cast<pf::RecordKind>(word & 3);
            const std::size_t size = pf::record_bytes(kind, ncounters);
            if (len - used < size) return false;
            if (kind == pf::RecordKind::nesting_error) {
                t.nesting_errors.push_back({word >> (2 + pf::depth_bits), arg, (word >> 2) & pf::max_depth});
                used += size;
                continue;
            }
            ProfileRecord r;
            r.kind = kind;
            r.depth = static_cast<std::uint16_t>((word >> 2) & pf::max_depth);
            r.label = word >> (2 + pf::depth_bits);
            r.arg = arg;
            r.first_value = out.values.size();
            for (std::size_t i = 8; i < size; i += 8) {
                std::uint64_t v;
                std::memcpy(&v, q + used + i, 8);
                out.values.push_back(v);
            }
            t.records.push_back(r);
            used += size;
        }
        return true;
    };
    while (at < n) {
        const std::size_t remaining = n - at;
        const unsigned char* page = p + at;
        const detail::PageHeader h = detail::read_page_header(page, remaining);
        const std::uint32_t thread_index = h.thread, seq = h.seq, len = h.len;
        const std::uint16_t kind = h.kind;
        const bool header_sane = h.sane(); // false too when fewer than a header's bytes remain
        if (header_sane && remaining - pf::page_header_bytes < len) {
            // The last page, cut short (the program was killed while writing it, or the file was truncated): its
            // whole records are kept, unverified.
            std::string what = detail::cut_page_text(thread_index, seq, remaining - pf::page_header_bytes, len);
            std::size_t used = 0;
            if (static_cast<pf::PageKind>(kind) == pf::PageKind::events) {
                ProfileThread& t = thread(thread_index);
                const std::size_t before = t.records.size();
                parse_events(t, page + pf::page_header_bytes, remaining - pf::page_header_bytes, used);
                what += detail::cut_page_kept_text(t.records.size() - before);
            } else {
                what += "; that page is lost";
            }
            out.bytes_read += pf::page_header_bytes + used;
            detail::lose(out, at + pf::page_header_bytes + used, n, what);
            at = n;
            break;
        }
        if (!header_sane || !detail::valid_page_at(page, remaining)) {
            // Corrupt: look for the next whole page.
            std::size_t next = at + 1;
            while (next < n && !detail::valid_page_at(p + next, n - next)) ++next;
            detail::lose(out, at, next, detail::skipped_page_text(remaining, header_sane, thread_index, seq));
            at = next;
            continue;
        }
        const unsigned char* q = page + pf::page_header_bytes;
        detail::ByteReader r{q, len};
        switch (static_cast<pf::PageKind>(kind)) {
        case pf::PageKind::strings:
            if (!detail::read_strings_page(r, len, out))
                out.problems.push_back("a strings page at byte " + std::to_string(at) + " is malformed");
            break;
        case pf::PageKind::thread: {
            ProfileThread& t = thread(thread_index);
            if (!detail::read_thread_page(r, len, t))
                out.problems.push_back("a thread page at byte " + std::to_string(at) + " is malformed");
            break;
        }
        case pf::PageKind::events: {
            ProfileThread& t = thread(thread_index);
            if (detail::events_page_repeats(out, t, next_seq, seq))
                t.records.resize(last_page[thread_index]); // keep the longer copy
            last_page[thread_index] = t.records.size();
            std::size_t used = 0;
            if (!parse_events(t, q, len, used))
                out.problems.push_back(detail::bad_records_text(thread_index, seq, used, len));
            break;
        }
        }
        out.bytes_read += pf::page_header_bytes + len;
        at += pf::page_header_bytes + len;
    }
    std::sort(out.threads.begin(), out.threads.end(),
              [](const ProfileThread& a, const ProfileThread& b) { return a.index < b.index; });
    detail::report_nesting_errors(out);
    return out;
}

/// Reads the profile at `path` (see parse_profile).
inline Result<Profile> read_profile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        return make_failure(err, "cannot open profile '" + path + "': " + std::strerror(err));
    }
    std::vector<unsigned char> bytes;
    unsigned char buf[1 << 16];
    for (;;) {
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            const int err = errno;
            ::close(fd);
            return make_failure(err, "cannot read profile '" + path + "': " + std::strerror(err));
        }
        if (got == 0) break;
        bytes.insert(bytes.end(), buf, buf + got);
    }
    ::close(fd);
    auto profile = parse_profile(bytes.data(), bytes.size());
    if (!profile) return make_failure(profile.failure().code.value(), "'" + path + "' is " + profile.failure().message);
    return profile;
}

PMC_END_NAMESPACE
