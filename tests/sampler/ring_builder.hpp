// SPDX-License-Identifier: MIT
// A fake perf ring for the sampler's pure tests: a control page and a data area in ordinary memory, and a writer
// that plays the kernel (records at data_head, wrapping at the end of the data area).
#pragma once

#include <pmc/sample.hpp>

#include <linux/perf_event.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace pmc_test {

/// The fields of one sample, for building a PERF_RECORD_SAMPLE in the kernel's layout.
struct SampleValues {
    std::uint64_t identifier = 0x1d, ip = 0x401000, time = 123456789, addr = 0x7fff0000, id = 7, stream_id = 8,
                  period = 1, weight = 0, data_src = 0;
    std::uint32_t pid = 100, tid = 101, cpu = 1;
    std::vector<std::uint64_t> callchain;
};

/// Builds a PERF_RECORD_SAMPLE for `type` in the order of linux/perf_event.h.
inline std::vector<std::uint64_t> sample_record(std::uint64_t type, const SampleValues& v) {
    std::vector<std::uint64_t> w(1, 0); // the header, filled last
    if (type & PERF_SAMPLE_IDENTIFIER) w.push_back(v.identifier);
    if (type & PERF_SAMPLE_IP) w.push_back(v.ip);
    if (type & PERF_SAMPLE_TID) w.push_back(std::uint64_t{v.pid} | std::uint64_t{v.tid} << 32);
    if (type & PERF_SAMPLE_TIME) w.push_back(v.time);
    if (type & PERF_SAMPLE_ADDR) w.push_back(v.addr);
    if (type & PERF_SAMPLE_ID) w.push_back(v.id);
    if (type & PERF_SAMPLE_STREAM_ID) w.push_back(v.stream_id);
    if (type & PERF_SAMPLE_CPU) w.push_back(v.cpu);
    if (type & PERF_SAMPLE_PERIOD) w.push_back(v.period);
    if (type & PERF_SAMPLE_CALLCHAIN) {
        w.push_back(v.callchain.size());
        w.insert(w.end(), v.callchain.begin(), v.callchain.end());
    }
    if (type & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) w.push_back(v.weight);
    if (type & PERF_SAMPLE_DATA_SRC) w.push_back(v.data_src);
    perf_event_header h{PERF_RECORD_SAMPLE, 0, static_cast<std::uint16_t>(w.size() * 8)};
    std::memcpy(&w[0], &h, sizeof h);
    return w;
}

inline std::vector<std::uint64_t> simple_record(std::uint32_t type, std::vector<std::uint64_t> body) {
    body.insert(body.begin(), 0);
    perf_event_header h{type, 0, static_cast<std::uint16_t>(body.size() * 8)};
    std::memcpy(&body[0], &h, sizeof h);
    return body;
}

/// A control page and a data area of `data_size` bytes (a power of two) in its own heap block of exactly that size,
/// so that under AddressSanitizer any read or write outside it fails the test.
class FakeRing {
public:
    explicit FakeRing(std::size_t data_size)
        : page_(new perf_event_mmap_page{}), storage_(new std::uint64_t[data_size / 8]()), size_(data_size) {}
    perf_event_mmap_page* page() { return page_.get(); }
    unsigned char* data() { return reinterpret_cast<unsigned char*>(storage_.get()); }
    std::size_t size() const { return size_; }

    /// Starts the ring at byte `offset` (as if earlier records had been written and read).
    void start_at(std::uint64_t offset) { page_->data_head = page_->data_tail = offset; }

    /// Writes `words` at data_head, wrapping, and publishes them.
    void write(const std::vector<std::uint64_t>& words) { write_bytes(words.data(), words.size() * 8); }
    void write_bytes(const void* bytes, std::size_t n) {
        const auto* b = static_cast<const unsigned char*>(bytes);
        for (std::size_t i = 0; i < n; ++i) data()[(page_->data_head + i) & (size_ - 1)] = b[i];
        page_->data_head += n;
    }

private:
    std::unique_ptr<perf_event_mmap_page> page_;
    std::unique_ptr<std::uint64_t[]> storage_;
    std::size_t size_;
};

} // namespace pmc_test
