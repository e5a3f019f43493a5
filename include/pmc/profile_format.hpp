// SPDX-License-Identifier: MIT
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
inline constexpr std::uint32_t version = 2;
inline constexpr std::size_t file_header_fixed = 24; ///< magic, version, header bytes, checksum, reserved
inline constexpr std::uint32_t page_magic = 0x50434D50; ///< the bytes "PMCP"
inline constexpr std::size_t page_header_bytes = 32;
inline constexpr std::uint32_t max_page_payload = 16u << 20; ///< a reader refuses larger pages as corrupt
inline constexpr std::size_t max_counters = 4;               ///< the primary and up to three riding along

/// end: what the whole file holds (written when the profiler ends: its close, exit(), a fatal signal).
enum class PageKind : std::uint16_t { events = 1, strings = 2, thread = 3, end = 4 };

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
    start_values = 11, ///< u64 per counter: each counter's reading when the profiler started
    own_work_label = 12, ///< u32: the label of own-work marks (a time primary; absent: none)
    emulator = 13        ///< string: the emulator the program ran on (pmc emulate); absent: none
};

/// The text of the own-work marks' label: integer records of the profiler's own work on a clock (page writes, label
/// interning), at the primary's reading when it began, the integer its length. Readers know them by the header's
/// own_work_label, never by this text.
inline constexpr char own_work_text[] = "pmc: own work";

/// Bits of a counter's flags.
enum CounterFlag : std::uint32_t {
    exact = 1u << 0,         ///< an event count read whole (not a time, not sampled, not scaled)
    irq_corrected = 1u << 1, ///< a composite with the interrupts taken subtracted (instructions-minus-irqs)
    may_multiplex = 1u << 2, ///< a hardware event that shares the PMU: the kernel may time-share it
    fallback = 1u << 3,      ///< recorded in place of a counter that could not be opened (see the warnings)
};

/// The kind of an event record (the low 2 bits of its head). nesting_error: an end (Profiler::end, or a scope
/// ended before the intervals opened inside it) that did not match the innermost open interval; a reader reports
/// it and does not keep it as an event.
enum class RecordKind : std::uint8_t { interval = 0, instant = 1, integer = 2, nesting_error = 3 };

/// Label ids are u32 varints in the records; the highest the writer hands out.
inline constexpr std::uint32_t max_label = 0x7FFFFFFF;

/// How the profiler's end record says it ended.
enum class EndHow : std::uint32_t { closed = 1, exit = 2, signal = 3 };

/// LEB128: 7 bits a byte, low first, the high bit set on all but the last. At most 10 bytes.
BOOST_FORCEINLINE unsigned char* put_varint(unsigned char* p, std::uint64_t v) noexcept {
    while (v >= 0x80) {
        *p++ = static_cast<unsigned char>(v | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<unsigned char>(v);
    return p;
}
/// put_varint at a cost that does not depend on the value: the same instructions for every v, no branch. The profiler
/// encodes counter readings with it, so that recording a child costs its parent the same whatever the child's value
/// (under an exact counter a child's change must not show in its parent: put_varint's loop ran once more per 7 bits,
/// and a planted change in a child made its parent "changed by" 8 instructions per call). Writes 10 bytes (the
/// caller reserves them) and returns p plus the varint's length. The same bytes as put_varint.
namespace detail {
/// For put_varint_fixed_cost, by the value's leading zeros: its length, the continuation bits of its first 8 bytes,
/// and that of its 9th.
struct VarintShape {
    std::uint64_t continuation;
    std::uint8_t bytes, ninth;
};
struct VarintShapes {
    VarintShape by_leading_zeros[64];
};
constexpr VarintShapes varint_shapes() {
    VarintShapes t{};
    for (unsigned lz = 0; lz < 64; ++lz) {
        const unsigned n = (64 - lz + 6) / 7; // 1 to 10 bytes
        std::uint64_t c = 0;
        for (unsigned b = 0; b + 1 < n && b < 8; ++b) c |= std::uint64_t{0x80} << (8 * b);
        t.by_leading_zeros[lz] = VarintShape{c, static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n == 10 ? 0x80 : 0)};
    }
    return t;
}
inline constexpr VarintShapes varint_shape_table = varint_shapes();
} // namespace detail

BOOST_FORCEINLINE unsigned char* put_varint_fixed_cost(unsigned char* p, std::uint64_t v) noexcept {
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the 8-byte store below is little-endian");
    const detail::VarintShape& shape =
        detail::varint_shape_table.by_leading_zeros[static_cast<unsigned>(__builtin_clzll(v | 1))];
    // The low 56 bits, spread into 8 bytes of 7 bits: 28-bit halves, then 14-bit quarters, then 7-bit bytes.
    std::uint64_t x = v & 0x00FFFFFFFFFFFFFFull;
    x = (x & 0x000000000FFFFFFFull) | ((x & 0x00FFFFFFF0000000ull) << 4);
    x = (x & 0x00003FFF00003FFFull) | ((x & 0x0FFFC0000FFFC000ull) << 2);
    x = (x & 0x007F007F007F007Full) | ((x & 0x3F803F803F803F80ull) << 1);
    x |= shape.continuation;
    std::memcpy(p, &x, 8);
    p[8] = static_cast<unsigned char>(((v >> 56) & 0x7F) | shape.ninth);
    p[9] = static_cast<unsigned char>(v >> 63);
    return p + shape.bytes;
}

/// Reads a varint at `p` (not past `end`); false when it runs past `end` or over 64 bits.
inline bool get_varint(const unsigned char*& p, const unsigned char* end, std::uint64_t& v) noexcept {
    v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (p == end) return false;
        const unsigned char b = *p++;
        if (shift == 63 && (b & 0x7E)) return false; // bits past 64
        v |= std::uint64_t{b & 0x7Fu} << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/// The most bytes one record takes with `counters` counters (the writer reserves this much before encoding).
constexpr std::size_t max_record_bytes(std::size_t counters) { return 10 + 5 + 5 + 20 * counters; }

/// A record's head: kind (2 bits), whether an argument follows (1 bit), then the label id.
constexpr std::uint64_t record_head(RecordKind kind, bool has_arg, std::uint32_t label) {
    return static_cast<std::uint64_t>(kind) | (std::uint64_t{has_arg} << 2) | (std::uint64_t{label} << 3);
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

/// The seed of a page's payload checksum: its header fields. The record count is rotated, not shifted, by 40 bits,
/// so that its high byte is covered too (a shift would drop it, and a flipped byte there would go unnoticed).
constexpr std::uint64_t page_seed(std::uint16_t kind, std::uint32_t thread, std::uint32_t sequence,
                                  std::uint32_t payload, std::uint32_t records) {
    return (std::uint64_t{kind} << 48) ^ (std::uint64_t{thread} << 32) ^ sequence ^ (std::uint64_t{payload} << 20) ^
           (std::uint64_t{records} << 40) ^ (std::uint64_t{records} >> 24);
}

/// The seed of the header checksum (over a page header's first 28 bytes).
inline constexpr std::uint64_t header_seed = 0x5041474548454144ull;

/// Writes a page header for `payload` into `out` (32 bytes): the payload's checksum, then the header's own over its
/// first 28 bytes (so that a reader trusts a header's length before it reads the payload). Async-signal-safe.
inline void write_page_header(unsigned char* out, PageKind kind, std::uint32_t thread, std::uint32_t sequence,
                              const unsigned char* payload, std::uint32_t payload_bytes, std::uint32_t records) noexcept {
    const auto k = static_cast<std::uint16_t>(kind);
    const std::uint16_t header = page_header_bytes;
    const std::uint32_t sum = checksum(payload, payload_bytes, page_seed(k, thread, sequence, payload_bytes, records));
    std::memcpy(out + 0, &page_magic, 4);
    std::memcpy(out + 4, &k, 2);
    std::memcpy(out + 6, &header, 2);
    std::memcpy(out + 8, &thread, 4);
    std::memcpy(out + 12, &sequence, 4);
    std::memcpy(out + 16, &payload_bytes, 4);
    std::memcpy(out + 20, &records, 4);
    std::memcpy(out + 24, &sum, 4);
    const std::uint32_t hsum = checksum(out, 28, header_seed);
    std::memcpy(out + 28, &hsum, 4);
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
    std::uint32_t depth = 0;   ///< nesting depth on its thread (0: outermost); not limited
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

/// An interval open on a thread when its last thread page was written (outermost first).
struct ProfileOpenInterval {
    std::uint32_t label = 0, arg = 0;
    std::uint64_t start = 0; ///< the primary counter's reading when it began
};

/// A stretch of the profiler's own work on a thread (page writes, flush(), label interning), on a time primary:
/// left in the enclosing intervals' durations (the readings stay absolute), marked so that a reader can show it or
/// take it out.
struct ProfileOwnWork {
    std::uint64_t at = 0;     ///< the primary counter's reading when it began
    std::uint64_t length = 0; ///< how long it took, in the primary's unit
    std::uint32_t depth = 0;  ///< intervals open around it
};

/// One thread that recorded events. Its records are in the order they ended (postorder: children before parents).
struct ProfileThread {
    std::uint32_t index = 0; ///< the profiler's number for it (0: the thread that created the profiler)
    std::uint64_t tid = 0;   ///< the kernel's thread id
    std::string name;        ///< as set with Profiler::thread_name (the last one set), or the kernel's comm
    std::string error;       ///< why its counters could not be opened ("" when they were): its values are 0
    /// Per counter, as of the thread's last thread page (written with each events page and at the thread's end).
    std::vector<ProfileCounterTimes> times;
    /// The intervals open when its last thread page was written, outermost first: after a SIGKILL, what the thread
    /// was inside (as of its last page).
    std::vector<ProfileOpenInterval> open;
    bool ended = false;              ///< its last thread page was written at its end (thread exit, profiler close)
    std::uint32_t pages_written = 0; ///< events pages it had written when its last thread page was written
    std::vector<ProfileRecord> records;
    std::vector<ProfileOwnWork> own_work; ///< the profiler's own work, in the order marked (not in `records`)
    std::uint32_t pages = 0;         ///< event pages read
    std::uint32_t missing_pages = 0; ///< event pages known to be written but absent (lost or corrupt)
    std::uint32_t thread_pages = 0;  ///< thread pages read (the one with the highest number counts)
    bool seen_info = false;
    std::uint32_t info_seq = 0; ///< the number of the thread page read
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
    /// The emulator the program ran on, under pmc emulate ("QEMU 7.2.22, plugin API 1"); "" for a
    /// program that ran on the machine. `cpu` is then the CPU model the emulator presents.
    std::string emulator;
    std::uint64_t page_bytes = 0;
    std::vector<std::string> warnings; ///< the writer's (fallbacks, counters that failed on a thread)
    std::vector<ProfileCounter> counters;
    std::vector<std::uint64_t> start_values;
    /// The label of the profiler's own-work marks (integer records; 0: none). Where the primary is a time, the
    /// writer keeps its readings absolute, and marks each stretch of its own work (page writes, label interning)
    /// inside the intervals: a reader may show them, or take them out of durations.
    std::uint32_t own_work_label = 0;
    bool own_work(const ProfileRecord& r) const noexcept {
        return own_work_label != 0 && r.kind == profile_format::RecordKind::integer && r.label == own_work_label;
    }
    std::unordered_map<std::uint32_t, std::string> strings;
    std::vector<ProfileThread> threads;
    std::vector<std::uint64_t> values;
    std::vector<std::string> problems; ///< what the reader could not use, and what that lost
    std::uint64_t bytes_read = 0, bytes_lost = 0;
    /// The end record: present when the profiler ended (closed, exit(), a fatal signal). Without it the file is
    /// cut (the program was killed, or is still running): a problem says so.
    bool has_end = false;
    profile_format::EndHow end_how = profile_format::EndHow::closed;
    std::uint32_t end_signal = 0;
    /// How the recording ended, in words: "closed", "exit()", "signal 11", or "cut (no end record)".
    std::string ended_by() const {
        if (!has_end) return "cut (no end record)";
        if (end_how == profile_format::EndHow::exit) return "exit()";
        if (end_how == profile_format::EndHow::signal) return "signal " + std::to_string(end_signal);
        return "closed";
    }

    /// A string by id; "<string N: lost>" when its definition is not in the file.
    std::string string(std::uint32_t id) const {
        auto it = strings.find(id);
        return it != strings.end() ? it->second : "<string " + std::to_string(id) + ": lost>";
    }
    std::size_t values_per_record(profile_format::RecordKind kind) const {
        return kind == profile_format::RecordKind::interval ? 2 * counters.size()
               : kind == profile_format::RecordKind::integer ? 2
                                                              : 1;
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
    if (out.version == 1)
        return fail("format version 1, written by pmc 0.1.0 before profiles had end records and compact records; "
                    "this pmc reads version 2 only: record the profile again, or read it with the pmc that wrote it");
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
        case pf::Tag::emulator: out.emulator = f.str(len); break;
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
        case pf::Tag::own_work_label: out.own_work_label = f.get<std::uint32_t>(); break;
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
    std::uint32_t magic = 0, thread = 0, seq = 0, len = 0, records = 0, sum = 0, header_sum = 0;
    std::uint16_t kind = 0, header = 0;
    bool checked = false; ///< the header's own checksum matches (its fields, the length first, can be trusted)
};

inline PageHeader read_page_header(const unsigned char* p, std::size_t n) {
    namespace pf = profile_format;
    PageHeader h;
    if (n < pf::page_header_bytes) return h;
    std::memcpy(&h.magic, p, 4);
    std::memcpy(&h.kind, p + 4, 2);
    std::memcpy(&h.header, p + 6, 2);
    std::memcpy(&h.thread, p + 8, 4);
    std::memcpy(&h.seq, p + 12, 4);
    std::memcpy(&h.len, p + 16, 4);
    std::memcpy(&h.records, p + 20, 4);
    std::memcpy(&h.sum, p + 24, 4);
    std::memcpy(&h.header_sum, p + 28, 4);
    h.checked = h.magic == pf::page_magic && h.header == pf::page_header_bytes && h.kind >= 1 && h.kind <= 4 &&
                h.len <= pf::max_page_payload && pf::checksum(p, 28, pf::header_seed) == h.header_sum;
    return h;
}

/// Whether the payload `q` (h.len bytes) matches its header's checksum.
inline bool payload_matches(const PageHeader& h, const unsigned char* q) {
    namespace pf = profile_format;
    return pf::checksum(q, h.len, pf::page_seed(h.kind, h.thread, h.seq, h.len, h.records)) == h.sum;
}

/// What both readers (parse_profile, ProfileReader) say of a loss, in the same words: the tools and tests compare them.
inline void lose(Profile& out, std::uint64_t from, std::uint64_t to, const std::string& what) {
    out.bytes_lost += to - from;
    out.problems.push_back("bytes " + std::to_string(from) + "-" + std::to_string(to - 1) + " (" +
                           bytes_text(to - from) + "): " + what);
}

/// One record as decoded from an events page.
struct DecodedRecord {
    profile_format::RecordKind kind = profile_format::RecordKind::interval;
    std::uint32_t label = 0, arg = 0, depth = 0; ///< a nesting error's arg: the innermost open label (0: none)
    std::size_t nvalues = 0;
    std::uint64_t values[2 * profile_format::max_counters] = {};
};

/// Calls f(const DecodedRecord&) for each whole record of an events page's payload (docs/profile-format.md);
/// `used` is the bytes of whole records. False at the first record that runs past the payload or makes no sense.
template <class F>
bool decode_events(const unsigned char* q, std::size_t len, std::size_t counters, std::size_t& used, F&& f) {
    namespace pf = profile_format;
    std::uint64_t prev[pf::max_counters] = {};
    const unsigned char* p = q;
    const unsigned char* const end = q + len;
    used = 0;
    while (p < end) {
        DecodedRecord r;
        std::uint64_t head, depth, v, d;
        if (!pf::get_varint(p, end, head) || !pf::get_varint(p, end, depth)) return false;
        if ((head >> 3) > UINT32_MAX || depth > UINT32_MAX) return false;
        r.kind = static_cast<pf::RecordKind>(head & 3);
        r.label = static_cast<std::uint32_t>(head >> 3);
        r.depth = static_cast<std::uint32_t>(depth);
        if (head & 4) {
            if (!pf::get_varint(p, end, v) || v == 0 || v > UINT32_MAX) return false;
            r.arg = static_cast<std::uint32_t>(v);
        }
        switch (r.kind) {
        case pf::RecordKind::interval:
            for (std::size_t c = 0; c < counters; ++c) {
                if (!pf::get_varint(p, end, v) || !pf::get_varint(p, end, d)) return false;
                const std::uint64_t stop = prev[c] + v; // modulo 2^64, as written
                r.values[2 * c] = stop - d;
                r.values[2 * c + 1] = stop;
                prev[c] = stop;
            }
            r.nvalues = 2 * counters;
            break;
        case pf::RecordKind::integer:
            if (!pf::get_varint(p, end, v) || !pf::get_varint(p, end, d)) return false;
            prev[0] += v;
            r.values[0] = prev[0];
            r.values[1] = d;
            r.nvalues = 2;
            break;
        default: // instant, nesting error: the primary's reading
            if (!pf::get_varint(p, end, v)) return false;
            prev[0] += v;
            r.values[0] = prev[0];
            r.nvalues = 1;
            break;
        }
        used = static_cast<std::size_t>(p - q);
        f(static_cast<const DecodedRecord&>(r));
    }
    return true;
}

/// A strings page's body: (u32 id, string) pairs into `out.strings`. False when it is malformed (the pairs
/// before the damage are kept).
inline bool read_strings_page(ByteReader& r, std::size_t len, Profile& out) {
    while (r.ok && r.at < len) {
        const auto id = r.get<std::uint32_t>();
        std::string s = r.lstr();
        if (r.ok && id != 0) out.strings[id] = std::move(s);
    }
    return r.ok;
}

/// A thread page's body into `t` (docs/profile-format.md). False when it is malformed (`t` unchanged).
inline bool read_thread_page(ByteReader& r, std::size_t len, ProfileThread& t) {
    const auto tid = r.get<std::uint64_t>();
    const auto flags = r.get<std::uint32_t>();
    std::string name = r.lstr();
    std::string error = r.lstr();
    std::vector<ProfileCounterTimes> times;
    const auto count = r.get<std::uint32_t>();
    r.get<std::uint32_t>();
    if (count > profile_format::max_counters) return false;
    for (std::uint32_t i = 0; r.ok && i < count; ++i) {
        ProfileCounterTimes ct;
        ct.enabled = r.get<std::uint64_t>();
        ct.running = r.get<std::uint64_t>();
        times.push_back(ct);
    }
    const auto pages = r.get<std::uint32_t>();
    const auto nopen = r.get<std::uint32_t>();
    if (!r.ok || nopen > (len - r.at) / 16) return false;
    std::vector<ProfileOpenInterval> open(nopen);
    for (auto& o : open) {
        o.label = r.get<std::uint32_t>();
        o.arg = r.get<std::uint32_t>();
        o.start = r.get<std::uint64_t>();
    }
    if (!r.ok || r.at != len) return false;
    t.tid = tid;
    t.ended = flags & 1;
    t.name = std::move(name);
    t.error = std::move(error);
    t.times = std::move(times);
    t.pages_written = pages;
    t.open = std::move(open);
    t.seen_info = true;
    return true;
}

/// The end record's body.
struct EndRecord {
    std::uint32_t how = 0, signal = 0, strings_pages = 0, strings = 0;
    struct Thread {
        std::uint32_t index = 0, events_pages = 0, thread_pages = 0;
    };
    std::vector<Thread> threads;
};
inline bool read_end_page(ByteReader& r, std::size_t len, EndRecord& e) {
    e.how = r.get<std::uint32_t>();
    e.signal = r.get<std::uint32_t>();
    e.strings_pages = r.get<std::uint32_t>();
    e.strings = r.get<std::uint32_t>();
    const auto n = r.get<std::uint32_t>();
    if (!r.ok || n > (len - r.at) / 12 || e.how < 1 || e.how > 3) return false;
    e.threads.resize(n);
    for (auto& t : e.threads) {
        t.index = r.get<std::uint32_t>();
        t.events_pages = r.get<std::uint32_t>();
        t.thread_pages = r.get<std::uint32_t>();
    }
    return r.ok && r.at == len;
}

/// One copy of an events page found in the file.
struct EventsPageRef {
    std::uint64_t at = 0;    ///< its payload's offset
    std::uint32_t len = 0;   ///< payload bytes present (less than the header says for a cut page)
    std::uint32_t seq = 0;
    std::uint32_t records = 0; ///< as its header says (a cut page: unknown, 0)
    bool cut = false;          ///< the file ends inside it: whole records kept, unverified
};

/// The first pass that both readers share: every page checked (header checksum, then payload checksum), damage
/// skipped to the next valid page header (each byte looked at a bounded number of times: linear in the file's
/// size), strings and thread pages read, events pages listed per thread (a thread's copies of one page number: the
/// one with more records kept), and what is missing said against the end record, or, without one, against the
/// page numbers and the threads' own counts. `get(at, n)` gives the file's bytes [at, at + n) or nullptr (a read
/// error: the scan stops and returns false).
class PageScan {
public:
    std::unordered_map<std::uint32_t, std::vector<EventsPageRef>> events; ///< per thread, by page number after finish()
    std::unordered_map<std::uint32_t, std::size_t> thread_at;             ///< thread index -> out.threads slot

    template <class Get>
    bool run(Get&& get, std::uint64_t n, std::uint64_t at, Profile& out) {
        namespace pf = profile_format;
        while (at < n) {
            const std::uint64_t remaining = n - at;
            const unsigned char* hp = get(at, static_cast<std::size_t>(std::min<std::uint64_t>(remaining, 32)));
            if (!hp) return false;
            const PageHeader h = read_page_header(hp, static_cast<std::size_t>(std::min<std::uint64_t>(remaining, 32)));
            if (!h.checked) {
                if (remaining < pf::page_header_bytes) {
                    lose(out, at, n, "the file ends inside a page header");
                    break;
                }
                // Not a page: the next position where a valid page header starts.
                std::uint64_t next = at + 1;
                for (; next < n; ++next) {
                    const unsigned char* c = get(next, static_cast<std::size_t>(std::min<std::uint64_t>(n - next, 32)));
                    if (!c) return false;
                    if (c[0] != 'P') continue;
                    if (read_page_header(c, static_cast<std::size_t>(std::min<std::uint64_t>(n - next, 32))).checked)
                        break;
                }
                lose(out, at, next, "not a valid page (corrupt or cut); skipped to the next valid page");
                at = next;
                continue;
            }
            const std::uint64_t body = at + pf::page_header_bytes;
            if (n - body < h.len) { // the file ends inside this page
                const auto avail = static_cast<std::uint32_t>(n - body);
                std::string what = "the file ends inside a page (" + page_name(h) + ": " + bytes_text(avail) +
                                   " of " + bytes_text(h.len) + ")";
                if (static_cast<pf::PageKind>(h.kind) == pf::PageKind::events) {
                    thread(out, h.thread);
                    events[h.thread].push_back(EventsPageRef{body, avail, h.seq, 0, true});
                    cut_at_ = at;
                    cut_end_ = n;
                    cut_what_ = std::move(what); // said once its whole records are counted (finish)
                } else {
                    lose(out, at, n, what + "; that page is lost");
                }
                break;
            }
            const unsigned char* q = h.len ? get(body, h.len) : hp + pf::page_header_bytes;
            if (!q) return false;
            if (!payload_matches(h, q)) {
                lose(out, at, body + h.len,
                     "a page whose checksum does not match (" + page_name(h) + ": corrupt); skipped");
                at = body + h.len;
                continue;
            }
            ByteReader r{q, h.len};
            switch (static_cast<pf::PageKind>(h.kind)) {
            case pf::PageKind::strings:
                if (!read_strings_page(r, h.len, out))
                    out.problems.push_back("a strings page at byte " + std::to_string(at) + " is malformed");
                strings_pages_.push_back(h.seq);
                break;
            case pf::PageKind::thread: {
                ProfileThread& t = thread(out, h.thread);
                ++t.thread_pages;
                thread_page_seqs_[h.thread].push_back(h.seq);
                if (!t.seen_info || h.seq >= t.info_seq) { // the latest (by number) counts
                    ProfileThread copy = t;
                    if (read_thread_page(r, h.len, copy)) {
                        copy.info_seq = h.seq;
                        t = std::move(copy);
                    } else {
                        out.problems.push_back("a thread page at byte " + std::to_string(at) + " is malformed");
                    }
                }
                break;
            }
            case pf::PageKind::events:
                thread(out, h.thread);
                events[h.thread].push_back(EventsPageRef{body, h.len, h.seq, h.records, false});
                break;
            case pf::PageKind::end: {
                EndRecord e;
                if (!read_end_page(r, h.len, e)) {
                    out.problems.push_back("the end record at byte " + std::to_string(at) + " is malformed");
                } else if (!has_end_ || h.seq >= end_seq_) { // a later end (exit(), then a close) supersedes
                    end_ = std::move(e);
                    end_seq_ = h.seq;
                    end_left_out_ = h.thread; // (an end record's thread field: the threads it could not list)
                    has_end_ = true;
                }
                break;
            }
            }
            out.bytes_read += pf::page_header_bytes + h.len;
            at = body + h.len;
        }
        return true;
    }

    /// Orders each thread's events pages by number, keeps one copy of each, and says what is missing. Call
    /// `cut_page_records(records, used)` after decoding a cut page (see decode step), before finish().
    void finish(Profile& out) {
        namespace pf = profile_format;
        out.has_end = has_end_;
        if (has_end_) {
            out.end_how = static_cast<pf::EndHow>(end_.how);
            out.end_signal = end_.signal;
        }
        for (auto& [index, pages] : events) {
            ProfileThread& t = out.threads[thread_at.at(index)];
            std::stable_sort(pages.begin(), pages.end(),
                             [](const EventsPageRef& a, const EventsPageRef& b) { return a.seq < b.seq; });
            std::vector<EventsPageRef> kept;
            for (const EventsPageRef& pg : pages) {
                if (!kept.empty() && kept.back().seq == pg.seq) {
                    // Two copies (exit() or a fatal signal wrote it while its thread went on, then the thread did;
                    // or a duplicate): the one with more records, the whole one on a tie.
                    EventsPageRef& k = kept.back();
                    if (pg.records > k.records || (pg.records == k.records && k.cut && !pg.cut)) k = pg;
                    continue;
                }
                kept.push_back(pg);
            }
            pages = std::move(kept);
            t.pages = static_cast<std::uint32_t>(pages.size());
        }
        if (!cut_what_.empty()) { // the cut copy lost to a whole one: said now
            bool kept_cut = false;
            for (const auto& [index, pages] : events)
                for (const EventsPageRef& pg : pages) kept_cut = kept_cut || pg.cut;
            if (!kept_cut) {
                lose(out, cut_at_, cut_end_, cut_what_ + "; a whole copy of that page is read instead");
                cut_what_.clear();
            }
        }
        // What should be there: the end record's counts, else what the pages' numbers and thread pages say.
        std::unordered_map<std::uint32_t, std::pair<std::uint32_t, std::uint32_t>> expect; // events, thread pages
        if (has_end_) {
            if (end_left_out_ > 0)
                out.problems.push_back(
                    "the end record leaves out up to " + std::to_string(end_left_out_) +
                    " thread(s) it could not list (the program's ending came while a thread was being linked in, or "
                    "found no memory for a larger record): what those threads had not written is lost, and their "
                    "pages cannot be checked for losses");
            for (const auto& et : end_.threads) {
                expect[et.index] = {et.events_pages, et.thread_pages};
                if (!thread_at.count(et.index)) {
                    thread(out, et.index);
                    events[et.index];
                }
            }
        } else {
            out.problems.push_back(
                "the file has no end record: the program did not end its profiler (it was killed, or is still "
                "running); what each thread had not yet written is lost, at most a page per thread" +
                open_text(out));
        }
        for (ProfileThread& t : out.threads) {
            auto& pages = events[t.index];
            std::uint32_t want = pages.empty() ? 0 : pages.back().seq + 1;
            std::uint32_t want_info = 0;
            if (has_end_) {
                auto it = expect.find(t.index);
                if (it == expect.end()) {
                    // The writer lists every thread that wrote a page (one that registers once the end has begun
                    // writes nothing): a thread left out, or a page written after the end.
                    if (end_left_out_ == 0)
                        out.problems.push_back("thread " + std::to_string(t.index) +
                                               ": its pages are in the file but the end record does not list it (a "
                                               "page written after the end?): its pages cannot be checked for losses");
                    continue;
                }
                want = std::max(want, it->second.first);
                want_info = it->second.second;
            } else {
                want = std::max(want, t.pages_written);
            }
            std::vector<std::uint32_t> missing;
            std::uint32_t k = 0;
            for (std::uint32_t seq = 0; seq < want; ++seq) {
                while (k < pages.size() && pages[k].seq < seq) ++k;
                if (k >= pages.size() || pages[k].seq != seq) missing.push_back(seq);
            }
            t.missing_pages = static_cast<std::uint32_t>(missing.size());
            if (!missing.empty())
                out.problems.push_back("thread " + std::to_string(t.index) + ": " + std::to_string(missing.size()) +
                                       " events page(s) lost (" + list_text(missing) + " of " +
                                       std::to_string(want) + "): their records are missing");
            auto& infos = thread_page_seqs_[t.index];
            std::sort(infos.begin(), infos.end());
            infos.erase(std::unique(infos.begin(), infos.end()), infos.end());
            const std::uint32_t have_info = infos.empty() ? 0 : infos.back() + 1;
            missing.clear();
            for (std::uint32_t seq = 0, j = 0; seq < std::max(want_info, have_info); ++seq) {
                while (j < infos.size() && infos[j] < seq) ++j;
                if (j >= infos.size() || infos[j] != seq) missing.push_back(seq);
            }
            if (!missing.empty())
                out.problems.push_back("thread " + std::to_string(t.index) + ": " + std::to_string(missing.size()) +
                                       " thread page(s) lost (" + list_text(missing) +
                                       "): its name, counter times or open intervals may be older than written");
            if (!t.seen_info && !(has_end_ && want_info == 0)) // (0 written: it began as the profile ended)
                out.problems.push_back("thread " + std::to_string(t.index) +
                                       ": its thread page is lost (no tid, name, counter times)");
        }
        std::sort(strings_pages_.begin(), strings_pages_.end());
        strings_pages_.erase(std::unique(strings_pages_.begin(), strings_pages_.end()), strings_pages_.end());
        const std::uint32_t want_strings = std::max<std::uint32_t>(
            has_end_ ? end_.strings_pages : 0, strings_pages_.empty() ? 0 : strings_pages_.back() + 1);
        std::vector<std::uint32_t> missing;
        for (std::uint32_t seq = 0, j = 0; seq < want_strings; ++seq) {
            while (j < strings_pages_.size() && strings_pages_[j] < seq) ++j;
            if (j >= strings_pages_.size() || strings_pages_[j] != seq) missing.push_back(seq);
        }
        if (!missing.empty())
            out.problems.push_back(std::to_string(missing.size()) + " strings page(s) lost (" + list_text(missing) +
                                   "): labels defined there print as <string N: lost>");
        if (has_end_ && out.strings.size() < end_.strings && missing.empty())
            out.problems.push_back("the end record counts " + std::to_string(end_.strings) + " strings, the file "
                                   "defines " + std::to_string(out.strings.size()));
        std::sort(out.threads.begin(), out.threads.end(),
                  [](const ProfileThread& a, const ProfileThread& b) { return a.index < b.index; });
        thread_at.clear();
        for (std::size_t i = 0; i < out.threads.size(); ++i) thread_at[out.threads[i].index] = i;
    }

    /// The cut last page, once decoded: its whole records kept, the rest lost.
    void cut_page_decoded(Profile& out, std::uint64_t n, std::uint64_t payload_at, std::size_t used, std::size_t records) {
        if (cut_what_.empty()) return;
        out.bytes_read += profile_format::page_header_bytes + used;
        lose(out, payload_at + used, n,
             cut_what_ + "; its " + std::to_string(records) +
                 " whole records are kept (unverified: the checksum covers the whole page), the rest of the page is lost");
        cut_what_.clear();
    }
    bool has_cut() const { return !cut_what_.empty(); }

    /// Decodes thread `t`'s events page `page` (its bytes at `q`; the file is `n` bytes, with `nc` counters), as both
    /// readers do: nesting errors go to `t`, string ids no strings page defines are counted in `undefined`, every
    /// other record goes to `keep`, and what the page lost is said. Returns the bytes that decoded.
    template <class Keep>
    std::size_t decode_page(Profile& out, ProfileThread& t, const EventsPageRef& page, const unsigned char* q,
                            std::uint64_t n, std::size_t nc, std::unordered_map<std::uint32_t, std::uint64_t>& undefined,
                            Keep&& keep) {
        auto known = [&](std::uint32_t id) {
            if (id != 0 && !out.strings.count(id)) ++undefined[id];
        };
        std::size_t used = 0, records = 0;
        const bool ok = decode_events(q, page.len, nc, used, [&](const DecodedRecord& r) {
            ++records;
            known(r.label);
            if (r.kind == profile_format::RecordKind::nesting_error) {
                t.nesting_errors.push_back({r.label, r.arg, r.depth});
                return;
            }
            known(r.arg);
            keep(r);
        });
        if (page.cut) cut_page_decoded(out, n, page.at, used, records);
        else if (!ok || records != page.records)
            out.problems.push_back("thread " + std::to_string(t.index) + " events page " + std::to_string(page.seq) +
                                   ": " + std::to_string(records) + " record(s) make sense, in " + bytes_text(used) +
                                   " of " + bytes_text(page.len) + ", where its header says " +
                                   std::to_string(page.records) + " (written by another version?)");
        return used;
    }

    /// After decoding: nesting errors and records that name strings the file does not define.
    static void report_records(Profile& out, const std::unordered_map<std::uint32_t, std::uint64_t>& undefined) {
        for (const ProfileThread& t : out.threads) {
            if (t.nesting_errors.empty()) continue;
            const auto& e = t.nesting_errors.front();
            out.problems.push_back(
                "thread " + std::to_string(t.index) + ": " + std::to_string(t.nesting_errors.size()) +
                " end(s) that did not match the innermost open interval (the first: the end of '" +
                out.string(e.label) + "' while " +
                (e.inner ? "'" + out.string(e.inner) + "' was innermost" : std::string("nothing was open")) +
                ", at depth " + std::to_string(e.depth) +
                "); those intervals are not in the profile (the program's begin/end calls or scopes are unbalanced)");
        }
        if (!undefined.empty()) {
            std::uint64_t uses = 0;
            std::vector<std::uint32_t> ids;
            for (const auto& [id, count] : undefined) uses += count, ids.push_back(id);
            std::sort(ids.begin(), ids.end());
            out.problems.push_back(std::to_string(uses) + " record(s) name " + std::to_string(ids.size()) +
                                   " string id(s) the file does not define (" + list_text(ids) +
                                   "): their strings page was lost or the records are corrupt");
        }
    }

private:
    bool has_end_ = false;
    std::uint32_t end_seq_ = 0;
    std::uint32_t end_left_out_ = 0;
    EndRecord end_;
    std::vector<std::uint32_t> strings_pages_;
    std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> thread_page_seqs_;
    std::uint64_t cut_at_ = 0, cut_end_ = 0;
    std::string cut_what_;

    ProfileThread& thread(Profile& out, std::uint32_t index) {
        auto it = thread_at.find(index);
        if (it != thread_at.end()) return out.threads[it->second];
        thread_at.emplace(index, out.threads.size());
        out.threads.emplace_back();
        out.threads.back().index = index;
        return out.threads.back();
    }
    static std::string page_name(const PageHeader& h) {
        namespace pf = profile_format;
        switch (static_cast<pf::PageKind>(h.kind)) {
        case pf::PageKind::events: return "thread " + std::to_string(h.thread) + ", events page " + std::to_string(h.seq);
        case pf::PageKind::thread: return "thread " + std::to_string(h.thread) + ", thread page " + std::to_string(h.seq);
        case pf::PageKind::strings: return "strings page " + std::to_string(h.seq);
        default: return "the end record";
        }
    }
    static std::string list_text(const std::vector<std::uint32_t>& v) {
        std::string s;
        for (std::size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
        if (v.size() > 8) s += ", ...";
        return s;
    }
    static std::string open_text(const Profile& out) {
        std::string s;
        for (const ProfileThread& t : out.threads) {
            if (t.open.empty() || t.ended) continue;
            s += "; thread " + std::to_string(t.index) + " was inside ";
            for (std::size_t i = 0; i < t.open.size(); ++i) s += (i ? " > " : "") + out.string(t.open[i].label);
        }
        return s.empty() ? s : s + " (as of each thread's last page)";
    }
};

} // namespace detail

/// Reads a profile from its bytes. Fails only when the header cannot be read; everything after it is read page by
/// page, and what cannot be used is described in Profile::problems.
inline Result<Profile> parse_profile(const unsigned char* p, std::size_t n) {
    namespace pf = profile_format;
    Profile out;
    std::size_t at = 0;
    if (auto failure = detail::parse_profile_header(p, n, out, at)) return std::move(*failure);
    const std::size_t ncounters = out.counters.size();
    detail::PageScan scan;
    scan.run([&](std::uint64_t from, std::size_t) { return p + from; }, n, at, out);
    scan.finish(out);
    std::unordered_map<std::uint32_t, std::uint64_t> undefined;
    for (ProfileThread& t : out.threads) {
        auto it = scan.events.find(t.index);
        if (it == scan.events.end()) continue;
        for (const detail::EventsPageRef& page : it->second)
            scan.decode_page(out, t, page, p + page.at, n, ncounters, undefined, [&](const detail::DecodedRecord& r) {
                ProfileRecord rec;
                rec.kind = r.kind;
                rec.depth = r.depth;
                rec.label = r.label;
                rec.arg = r.arg;
                if (out.own_work(rec)) { // the profiler's, not the program's: kept apart
                    t.own_work.push_back(ProfileOwnWork{r.values[0], r.values[1], r.depth});
                    return;
                }
                rec.first_value = out.values.size();
                out.values.insert(out.values.end(), r.values, r.values + r.nvalues);
                t.records.push_back(rec);
            });
    }
    detail::PageScan::report_records(out, undefined);
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
