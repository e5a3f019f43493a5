// SPDX-License-Identifier: MIT
// Which x86-64 instructions pmc emulate --cache counts as Cachegrind counts an atomic read-modify-write, two reads
// (tools/emulate/model/access_decode.hpp): the encodings of each kind, with and without LOCK and memory operands.
#include "catch.hpp"

#include <model/access_decode.hpp>

#include <initializer_list>
#include <vector>

namespace {

bool atomic(std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    return pmc_model::is_x86_atomic_rmw(b.data(), b.size());
}

bool locked_compare_exchange(std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    return pmc_model::is_x86_locked_compare_exchange(b.data(), b.size());
}

} // namespace

TEST_CASE("x86-64: LOCK-prefixed read-modify-writes of memory are atomic, Cachegrind's two reads") {
    CHECK(atomic({0xf0, 0x48, 0x83, 0x05, 0x10, 0x00, 0x00, 0x00, 0x01})); // lock addq $1, 0x10(%rip)
    CHECK(atomic({0xf0, 0x01, 0x07}));                                     // lock add %eax, (%rdi)
    CHECK(atomic({0xf0, 0x80, 0x0f, 0x01}));                               // lock orb $1, (%rdi)
    CHECK(atomic({0xf0, 0x29, 0x07}));                                     // lock sub %eax, (%rdi)
    CHECK(atomic({0xf0, 0x31, 0x07}));                                     // lock xor %eax, (%rdi)
    CHECK(atomic({0xf0, 0x48, 0xff, 0x07}));                               // lock incq (%rdi)
    CHECK(atomic({0xf0, 0xff, 0x0f}));                                     // lock decl (%rdi)
    CHECK(atomic({0xf0, 0xf7, 0x17}));                                     // lock notl (%rdi)
    CHECK(atomic({0xf0, 0xf7, 0x1f}));                                     // lock negl (%rdi)
    CHECK(atomic({0xf0, 0x48, 0x0f, 0xc1, 0x07}));                         // lock xadd %rax, (%rdi)
    CHECK(atomic({0xf0, 0x0f, 0xc0, 0x07}));                               // lock xadd %al, (%rdi)
    CHECK(atomic({0xf0, 0x48, 0x0f, 0xba, 0x2f, 0x03}));                   // lock btsq $3, (%rdi)
    CHECK(atomic({0xf0, 0x0f, 0xb3, 0x07}));                               // lock btr %eax, (%rdi)
    CHECK(atomic({0x64, 0xf0, 0x83, 0x00, 0x01}));                         // lock addl $1, %fs:(%rax)
}

TEST_CASE("x86-64: xchg with memory is atomic without LOCK, with a register it is no access") {
    CHECK(atomic({0x48, 0x87, 0x07}));  // xchg %rax, (%rdi)
    CHECK(atomic({0x86, 0x07}));        // xchg %al, (%rdi)
    CHECK(!atomic({0x48, 0x87, 0xc7})); // xchg %rax, %rdi
    CHECK(!atomic({0x90}));             // nop (xchg %eax, %eax)
}

TEST_CASE("x86-64: cmpxchg, cmpxchg16b, unlocked read-modify-writes, cmp and plain moves are one read or none") {
    CHECK(!atomic({0xf0, 0x48, 0x0f, 0xb1, 0x0f}));       // lock cmpxchg %rcx, (%rdi): one compare-and-swap
    CHECK(!atomic({0xf0, 0x48, 0x0f, 0xc7, 0x0f}));       // lock cmpxchg16b (%rdi)
    CHECK(!atomic({0x48, 0x83, 0x07, 0x01}));             // addq $1, (%rdi): no LOCK
    CHECK(!atomic({0x48, 0x0f, 0xc1, 0x07}));             // xadd %rax, (%rdi): no LOCK
    CHECK(!atomic({0xf0, 0x83, 0x3f, 0x01}));             // (lock) cmpl $1, (%rdi): cmp is no read-modify-write
    CHECK(!atomic({0x39, 0x07}));                         // cmp %eax, (%rdi)
    CHECK(!atomic({0x48, 0x8b, 0x07}));                   // mov (%rdi), %rax
    CHECK(!atomic({0xf0, 0x01, 0xc7}));                   // (lock) add %eax, %edi: no memory operand
    CHECK(!atomic({0xf0, 0x0f, 0xba, 0xe7, 0x03}));       // (lock) bt $3, %edi: a register
    CHECK(!atomic({0xf0, 0x0f, 0xba, 0x27, 0x03}));       // lock bt $3, (%rdi): bt only reads (reg 4)
    CHECK(!atomic({0xf0}));                               // a prefix alone
    CHECK(!atomic({0xf0, 0x0f}));                         // cut short
    CHECK(!atomic({}));
}

namespace {

pmc_model::BitTestAccesses bit_test(std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    return pmc_model::x86_register_bit_test(b.data(), b.size());
}

} // namespace

TEST_CASE("x86-64: a bit test of a register by a register is Cachegrind's stack-slot write and reads") {
    CHECK(bit_test({0x48, 0x0f, 0xa3, 0xf2}).reads == 1); // bt %rsi, %rdx (glibc's strtod)
    CHECK(bit_test({0x48, 0x0f, 0xa3, 0xf2}).writes == 1);
    CHECK(bit_test({0x0f, 0xa3, 0xc6}).reads == 1);        // bt %eax, %esi
    CHECK(bit_test({0x66, 0x0f, 0xa3, 0xc6}).reads == 1);  // bt %ax, %si
    CHECK(bit_test({0x48, 0x0f, 0xab, 0xc6}).reads == 2);  // bts %rax, %rsi: the byte modified, the operand reloaded
    CHECK(bit_test({0x48, 0x0f, 0xb3, 0xc6}).reads == 2);  // btr
    CHECK(bit_test({0x48, 0x0f, 0xbb, 0xc6}).reads == 2);  // btc
    CHECK(bit_test({0x48, 0x0f, 0xbb, 0xc6}).writes == 1);
    CHECK(bit_test({0x48, 0x0f, 0xa3, 0x07}).reads == 0);  // bt %rax, (%rdi): memory, QEMU reports its load
    CHECK(bit_test({0x48, 0x0f, 0xba, 0xe6, 0x03}).reads == 0); // bt $3, %rsi: the register itself
    CHECK(bit_test({0x48, 0x0f, 0xaf, 0xc6}).reads == 0);  // imul %rsi, %rax
    CHECK(bit_test({0x0f, 0xa3}).reads == 0);              // cut short
    CHECK(bit_test({}).writes == 0);
}

TEST_CASE("x86-64: LOCK cmpxchg, cmpxchg8b and cmpxchg16b of memory are locked compare-exchanges, nothing else is") {
    CHECK(locked_compare_exchange({0xf0, 0x48, 0x0f, 0xb1, 0x0f}));       // lock cmpxchg %rcx, (%rdi)
    CHECK(locked_compare_exchange({0xf0, 0x0f, 0xb0, 0x0f}));             // lock cmpxchg %cl, (%rdi)
    CHECK(locked_compare_exchange({0xf0, 0x0f, 0xb1, 0x15, 0, 0, 0, 0})); // lock cmpxchg %edx, 0(%rip)
    CHECK(locked_compare_exchange({0xf0, 0x48, 0x0f, 0xc7, 0x0f}));       // lock cmpxchg16b (%rdi)
    CHECK(locked_compare_exchange({0xf0, 0x0f, 0xc7, 0x0f}));             // lock cmpxchg8b (%rdi)
    CHECK(!locked_compare_exchange({0x48, 0x0f, 0xb1, 0x0f}));            // cmpxchg without LOCK: plain accesses
    CHECK(!locked_compare_exchange({0xf0, 0x48, 0x0f, 0xb1, 0xcf}));      // a register operand
    CHECK(!locked_compare_exchange({0xf0, 0x0f, 0xc7, 0x37}));            // 0F C7 /6 (not cmpxchg8b)
    CHECK(!locked_compare_exchange({0xf0, 0x48, 0x0f, 0xc1, 0x07}));      // lock xadd: an atomic read-modify-write
    CHECK(!locked_compare_exchange({0xf0, 0x0f}));                         // cut short
    // Disjoint from is_x86_atomic_rmw: each instruction gets one of the plugin's two callbacks.
    CHECK(!atomic({0xf0, 0x48, 0x0f, 0xb1, 0x0f}));
    CHECK(!atomic({0xf0, 0x48, 0x0f, 0xc7, 0x0f}));
}
