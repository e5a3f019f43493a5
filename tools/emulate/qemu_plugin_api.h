/* SPDX-License-Identifier: MIT */
// The part of QEMU's TCG plugin API that pmc's plugin uses, declared from QEMU's documentation ("TCG Plugins",
// docs/devel/tcg-plugins.rst) and its qemu-plugin.h: Debian ships no qemu-plugin.h. The functions are exported by
// the qemu-* binary that loads the plugin; the plugin leaves them undefined at link time.
//
// PMC_PLUGIN_API: 1 for QEMU 6.0 to 8.2 (a call per block), 2 for QEMU 9.0 and later (which refuse version 1, and
// add per-vCPU scoreboards with inline adds). pmc builds the plugin once for each.
#pragma once

#ifndef PMC_PLUGIN_API
#define PMC_PLUGIN_API 1
#endif

#include <stddef.h>
#include <stdint.h>

extern "C" {

typedef uint64_t qemu_plugin_id_t;

/// qemu_info_t's part for system emulation (QEMU's header declares it in place, in an anonymous union of this one
/// member: the same layout; named here, as -Wpedantic asks).
struct qemu_info_system {
    int smp_vcpus;
    int max_vcpus;
};

/// What QEMU tells the plugin at install.
typedef struct qemu_info_t {
    const char* target_name; ///< the guest architecture: "x86_64", "aarch64", ...
    struct {
        int min; ///< the oldest plugin API version this QEMU loads
        int cur; ///< its own plugin API version
    } version;
    bool system_emulation; ///< false under user mode (qemu-x86_64), the only mode pmc's plugin supports
    union {
        struct qemu_info_system system;
    };
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS, ///< the callback reads no guest registers: QEMU need not sync them
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void* userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num, uint64_t a1,
                                              uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                                              uint64_t a7, uint64_t a8);
typedef void (*qemu_plugin_vcpu_syscall_ret_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num,
                                                  int64_t ret);

void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_exit_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb* tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void* userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn* insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void* userdata);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_vcpu_syscall_ret_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_ret_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb* tb);
struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn* insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn* insn);
void* qemu_plugin_insn_haddr(const struct qemu_plugin_insn* insn);

void qemu_plugin_outs(const char* string);

// Memory accesses (pmc emulate --cache): a call after each access an instruction makes, with its guest address.
typedef uint32_t qemu_plugin_meminfo_t;
enum qemu_plugin_mem_rw {
    QEMU_PLUGIN_MEM_R = 1,
    QEMU_PLUGIN_MEM_W,
    QEMU_PLUGIN_MEM_RW,
};
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                                          void* userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn* insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw, void* userdata);
unsigned qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);

#if PMC_PLUGIN_API >= 2
struct qemu_plugin_scoreboard;
/// One uint64_t member of every vCPU's entry in a scoreboard: what inline operations act on.
typedef struct {
    struct qemu_plugin_scoreboard* score;
    size_t offset;
} qemu_plugin_u64;
enum qemu_plugin_op {
    QEMU_PLUGIN_INLINE_ADD_U64,
    QEMU_PLUGIN_INLINE_STORE_U64,
};
struct qemu_plugin_scoreboard* qemu_plugin_scoreboard_new(size_t element_size);
void* qemu_plugin_scoreboard_find(struct qemu_plugin_scoreboard* score, unsigned int vcpu_index);
void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(struct qemu_plugin_tb* tb, enum qemu_plugin_op op,
                                                       qemu_plugin_u64 entry, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(struct qemu_plugin_insn* insn, enum qemu_plugin_op op,
                                                         qemu_plugin_u64 entry, uint64_t imm);

// Guest registers (QEMU 9.0 on), read from a callback registered with QEMU_PLUGIN_CB_R_REGS. QEMU hands them
// over in glib arrays (QEMU links glib, so its functions resolve when QEMU loads the plugin): GArray and
// GByteArray begin with their data and length.
struct qemu_plugin_register;
typedef struct {
    struct qemu_plugin_register* handle;
    const char* name;
    const char* feature;
} qemu_plugin_reg_descriptor;
typedef struct {
    char* data;
    unsigned len;
} GArray;
typedef struct {
    uint8_t* data;
    unsigned len;
} GByteArray;
/// The current vCPU's registers (call from a vCPU callback): an array of qemu_plugin_reg_descriptor.
GArray* qemu_plugin_get_registers(void);
/// Appends the register's bytes (guest byte order) to `buf`; their count, or -1.
int qemu_plugin_read_register(struct qemu_plugin_register* handle, GByteArray* buf);
GByteArray* g_byte_array_new(void);
GByteArray* g_byte_array_set_size(GByteArray* array, unsigned length);
char* g_array_free(GArray* array, int free_segment);
#endif

} // extern "C"
