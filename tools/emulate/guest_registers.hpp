// SPDX-License-Identifier: MIT
// guest_registers.hpp: an x86-64 guest's general-purpose registers, read from inside a plugin callback (QEMU 9.0
// and later: plugin API 2's qemu_plugin_read_register; QEMU 6.0 to 8.2 give plugins no registers). Used where
// Cachegrind's count depends on a register QEMU's accesses do not show: the stack slot of a register bit test, the
// count of a rep string instruction (plugin_cache.hpp). A callback that reads registers must be registered with
// QEMU_PLUGIN_CB_R_REGS, which makes QEMU write them back before the call: register it on the few instructions that
// need it, nowhere else.
#pragma once

#include "qemu_plugin_api.h"

#include <cstdint>
#include <cstring>
#include <mutex>

namespace guest_registers {

#if PMC_PLUGIN_API >= 2
inline constexpr bool available = true;

/// The handles of the 16 registers in x86's encoding order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8 ... r15),
/// looked up by name once, on the first read (QEMU lists them only from a vCPU's callback; a handle is a register
/// number, the same on every vCPU).
/// Then fs_base and gs_base (16, 17).
struct Handles {
    qemu_plugin_register* of[18] = {};
};
inline const Handles& handles() {
    static Handles h;
    static std::once_flag once;
    std::call_once(once, [] {
        static const char* const names[18] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8",
                                              "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "fs_base", "gs_base"};
        GArray* all = qemu_plugin_get_registers();
        if (!all) return;
        const auto* d = reinterpret_cast<const qemu_plugin_reg_descriptor*>(all->data);
        for (unsigned i = 0; i < all->len; ++i)
            for (unsigned r = 0; r < 18; ++r)
                if (d[i].name && !h.of[r] && std::strcmp(d[i].name, names[r]) == 0) h.of[r] = d[i].handle;
        g_array_free(all, 1);
    });
    return h;
}
inline bool read_64(unsigned r, std::uint64_t& value) {
    qemu_plugin_register* handle = handles().of[r];
    if (!handle) return false;
    static thread_local GByteArray* buffer = g_byte_array_new(); // one per vCPU thread, kept for its life
    g_byte_array_set_size(buffer, 0);
    if (qemu_plugin_read_register(handle, buffer) != 8 || buffer->len != 8) return false;
    std::memcpy(&value, buffer->data, 8); // little-endian guest on a little-endian host (x86-64 under QEMU)
    return true;
}

/// Register `r` (0-15, x86's encoding order) of the calling vCPU into `value`; false if QEMU would not say.
inline bool read_x86_gpr(unsigned r, std::uint64_t& value) { return r < 16 && read_64(r, value); }
/// The FS (`fs` true) or GS segment's base.
inline bool read_x86_segment_base(bool fs, std::uint64_t& value) { return read_64(fs ? 16 : 17, value); }
#else
inline constexpr bool available = false;
inline bool read_x86_gpr(unsigned, std::uint64_t&) { return false; }
inline bool read_x86_segment_base(bool, std::uint64_t&) { return false; }
#endif

} // namespace guest_registers
