// SPDX-License-Identifier: MIT
// pmc/detail/records.hpp: the layouts of the ring-buffer records pmc reads (linux/perf_event.h, enum
// perf_event_type): PERF_RECORD_SAMPLE for the fields pmc supports, LOST, THROTTLE/UNTHROTTLE and MMAP/MMAP2.
// Every parser checks each field against the record's size and refuses a record that would read past it.
#pragma once

#include <pmc/config.hpp>
#include <pmc/sample.hpp>

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

PMC_BEGIN_NAMESPACE
namespace detail {

/// Reads a record's fields in order, never past its end.
class RecordCursor {
public:
    RecordCursor(const unsigned char* record, std::size_t size) noexcept : p_(record), end_(record + size) {}
    bool u64(std::uint64_t& v) noexcept { return take(&v, 8); }
    bool u32_pair(std::uint32_t& a, std::uint32_t& b) noexcept { return take(&a, 4) && take(&b, 4); }
    bool skip(std::uint64_t n) noexcept {
        if (n > static_cast<std::uint64_t>(end_ - p_)) return false;
        p_ += n;
        return true;
    }
    const unsigned char* here() const noexcept { return p_; }
    std::size_t left() const noexcept { return static_cast<std::size_t>(end_ - p_); }

private:
    bool take(void* out, std::size_t n) noexcept {
        if (left() < n) return false;
        std::memcpy(out, p_, n);
        p_ += n;
        return true;
    }
    const unsigned char* p_;
    const unsigned char* end_;
};

/// Parses a PERF_RECORD_SAMPLE record (`record` starts at its header, `size` bytes) opened with `sample_type`,
/// which holds only pmc::sample::supported bits. Returns nullptr, or what was wrong with the record. The callchain
/// points into `record` (8-byte aligned: ring records are, and so is the scratch copy).
inline const char* parse_sample(const unsigned char* record, std::size_t size, std::uint64_t sample_type,
                                Sample& s) noexcept {
    s = Sample{};
    s.fields = sample_type;
    if ((sample_type & ~sample::supported) != 0) return "sample_type has fields pmc does not parse";
    RecordCursor c(record, size);
    std::uint64_t ignored = 0;
    if (!c.skip(sizeof(perf_event_header))) return "record smaller than its header";
    if ((sample_type & PERF_SAMPLE_IDENTIFIER) && !c.u64(ignored)) return "record ends inside IDENTIFIER";
    if ((sample_type & PERF_SAMPLE_IP) && !c.u64(s.ip)) return "record ends inside IP";
    if ((sample_type & PERF_SAMPLE_TID) && !c.u32_pair(s.pid, s.tid)) return "record ends inside TID";
    if ((sample_type & PERF_SAMPLE_TIME) && !c.u64(s.time)) return "record ends inside TIME";
    if ((sample_type & PERF_SAMPLE_ADDR) && !c.u64(s.addr)) return "record ends inside ADDR";
    if ((sample_type & PERF_SAMPLE_ID) && !c.u64(ignored)) return "record ends inside ID";
    if ((sample_type & PERF_SAMPLE_STREAM_ID) && !c.u64(ignored)) return "record ends inside STREAM_ID";
    std::uint32_t reserved = 0;
    if ((sample_type & PERF_SAMPLE_CPU) && !c.u32_pair(s.cpu, reserved)) return "record ends inside CPU";
    if ((sample_type & PERF_SAMPLE_PERIOD) && !c.u64(s.period)) return "record ends inside PERIOD";
    if (sample_type & PERF_SAMPLE_CALLCHAIN) {
        std::uint64_t nr = 0;
        if (!c.u64(nr)) return "record ends inside CALLCHAIN's count";
        if (nr > c.left() / 8) return "CALLCHAIN count runs past the record";
        s.callchain = reinterpret_cast<const std::uint64_t*>(c.here());
        s.callchain_size = static_cast<std::size_t>(nr);
        c.skip(nr * 8);
    }
    if (sample_type & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) {
        std::uint64_t w = 0;
        if (!c.u64(w)) return "record ends inside WEIGHT";
        if (sample_type & PERF_SAMPLE_WEIGHT_STRUCT) { // little-endian layout: var1_dw, var2_w, var3_w
            s.weight = w & 0xffffffffu;
            s.weight_var2 = static_cast<std::uint16_t>(w >> 32);
            s.weight_var3 = static_cast<std::uint16_t>(w >> 48);
        } else {
            s.weight = w;
        }
    }
    if (sample_type & PERF_SAMPLE_DATA_SRC) {
        std::uint64_t raw = 0;
        if (!c.u64(raw)) return "record ends inside DATA_SRC";
        s.data_source = decode_data_source(raw);
    }
    return nullptr;
}

/// PERF_RECORD_LOST: how many records the kernel dropped because the ring was full.
inline bool parse_lost(const unsigned char* record, std::size_t size, std::uint64_t& lost) noexcept {
    RecordCursor c(record, size);
    std::uint64_t id = 0;
    return c.skip(sizeof(perf_event_header)) && c.u64(id) && c.u64(lost);
}

/// A mapping the process made (PERF_RECORD_MMAP or MMAP2, with attr.mmap/mmap_data): what pmc sample uses to put
/// sampled addresses in regions. `name` points into the record: valid during the callback only.
struct MappingRecord {
    std::uint32_t pid = 0, tid = 0;
    std::uint64_t start = 0, length = 0, file_offset = 0;
    bool executable = false;     ///< header.misc has PERF_RECORD_MISC_MMAP_DATA clear: a code mapping
    std::string_view name;       ///< a file's path, "//anon", "[heap]", ...
};

inline bool parse_mapping(const perf_event_header& h, const unsigned char* record, std::size_t size,
                          MappingRecord& m) noexcept {
    RecordCursor c(record, size);
    if (!c.skip(sizeof(perf_event_header)) || !c.u32_pair(m.pid, m.tid) || !c.u64(m.start) || !c.u64(m.length) ||
        !c.u64(m.file_offset))
        return false;
    if (h.type == PERF_RECORD_MMAP2 && !c.skip(24 + 8)) return false; // maj, min, ino, generation; prot, flags
    const char* name = reinterpret_cast<const char*>(c.here());
    const void* nul = std::memchr(name, 0, c.left());
    if (!nul) return false;
    m.name = std::string_view(name, static_cast<std::size_t>(static_cast<const char*>(nul) - name));
    m.executable = (h.misc & PERF_RECORD_MISC_MMAP_DATA) == 0;
    return true;
}

} // namespace detail
PMC_END_NAMESPACE
