// SPDX-License-Identifier: MIT
// pmc/detail/ring.hpp: reading records out of a perf event's ring buffer (the data pages after the control page).
//
// The kernel writes records at data_head and never past data_tail, which user space advances. data_head is read
// with acquire ordering (the records before it are then visible), data_tail written with release ordering (the
// kernel may reuse the space only after pmc has read it): linux/perf_event.h, the comment on data_head. A record
// may run past the end of the buffer and continue at its start; such a record is copied into a fixed scratch
// buffer, so a reader always sees it whole. A size field that cannot be right (smaller than a header, not a
// multiple of 8, or beyond what the kernel published) means the ring cannot be trusted: pmc stops there, drops
// what is left (counted) and reads on from the kernel's next record. Nothing here reads outside the data area.
#pragma once

#include <pmc/config.hpp>

#include <linux/perf_event.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

PMC_BEGIN_NAMESPACE
namespace detail {

/// What one drain of a ring did besides handing out records.
struct RingStats {
    std::uint64_t records = 0;        ///< whole records handed out
    std::uint64_t wrapped = 0;        ///< of which ran past the buffer's end (copied into the scratch buffer)
    std::uint64_t oversized = 0;      ///< wrapped records larger than the scratch buffer: skipped whole
    std::uint64_t corrupt_bytes = 0;  ///< bytes dropped after a size field that cannot be right
};

/// A reader of one ring: `page` the control page, `data` the 2^n-byte data area after it.
class RingReader {
public:
    /// The largest wrapped record pmc copies: a sample with every supported field and a 127-frame callchain
    /// (PERF_MAX_STACK_DEPTH plus context markers) fits with room to spare.
    static constexpr std::size_t scratch_size = 2048;

    RingReader() = default;
    RingReader(perf_event_mmap_page* page, const unsigned char* data, std::size_t data_size) noexcept
        : page_(page), data_(data), size_(data_size) {}

    bool valid() const noexcept { return page_ && data_ && size_ && (size_ & (size_ - 1)) == 0; }
    std::size_t data_size() const noexcept { return size_; }

    /// Bytes the kernel has written that pmc has not read.
    std::uint64_t pending() const noexcept {
        if (!valid()) return 0;
        return __atomic_load_n(&page_->data_head, __ATOMIC_ACQUIRE) - page_->data_tail;
    }

    /// Calls on_record(const perf_event_header&, const unsigned char* record) for every whole record between
    /// data_tail and data_head (`record` starts at the header and holds header.size bytes; it is valid during the
    /// call), then hands the space back to the kernel. No allocation, no system call.
    template <class OnRecord>
    RingStats drain(OnRecord&& on_record) {
        RingStats stats;
        if (!valid()) return stats;
        const std::uint64_t head = __atomic_load_n(&page_->data_head, __ATOMIC_ACQUIRE);
        std::uint64_t tail = page_->data_tail; // only this reader writes it
        const std::uint64_t mask = size_ - 1;
        if (head - tail > size_) { // more than the ring holds: the page is not what the kernel wrote
            stats.corrupt_bytes += head - tail;
            tail = head;
        }
        while (tail != head) {
            const std::uint64_t available = head - tail;
            if (available < sizeof(perf_event_header)) {
                stats.corrupt_bytes += available;
                tail = head;
                break;
            }
            perf_event_header header;
            copy_out(tail & mask, &header, sizeof header);
            const std::size_t size = header.size;
            if (size < sizeof header || size % 8 != 0 || size > available) {
                stats.corrupt_bytes += available;
                tail = head;
                break;
            }
            const std::size_t offset = tail & mask;
            if (offset + size <= size_) {
                on_record(header, data_ + offset);
            } else if (size <= scratch_size) {
                copy_out(offset, scratch_.data(), size);
                ++stats.wrapped;
                on_record(header, scratch_.data());
            } else {
                ++stats.oversized;
                tail += size;
                continue;
            }
            ++stats.records;
            tail += size;
        }
        __atomic_store_n(&page_->data_tail, tail, __ATOMIC_RELEASE);
        return stats;
    }

private:
    // Copies `n` bytes starting at data offset `offset`, continuing at the start of the data area past its end.
    void copy_out(std::size_t offset, void* out, std::size_t n) const noexcept {
        const std::size_t first = n < size_ - offset ? n : size_ - offset;
        std::memcpy(out, data_ + offset, first);
        if (first < n) std::memcpy(static_cast<unsigned char*>(out) + first, data_, n - first);
    }

    perf_event_mmap_page* page_ = nullptr;
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
    alignas(8) std::array<unsigned char, scratch_size> scratch_{};
};

} // namespace detail
PMC_END_NAMESPACE
