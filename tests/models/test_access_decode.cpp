// SPDX-License-Identifier: MIT
// Which x86-64 instructions pmc emulate --cache counts as Cachegrind counts them where QEMU reports otherwise
// (tools/emulate/model/access_decode.hpp): atomic read-modify-writes, register bit tests, x87/SSE state images,
// masked stores, rep string instructions; the encodings of each kind, with and without prefixes and memory operands.
#include "catch.hpp"

#include <model/access_decode.hpp>

#include <initializer_list>
#include <string>
#include <tuple>
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
    // The slot's accesses (QEMU 9 on, at %rsp - 288): the operand's width, and which register holds the bit.
    CHECK(bit_test({0x48, 0x0f, 0xa3, 0xf2}).operand_bytes == 8);
    CHECK(bit_test({0x48, 0x0f, 0xa3, 0xf2}).bit_register == 6);   // %rsi
    CHECK(bit_test({0x0f, 0xa3, 0xc6}).operand_bytes == 4);
    CHECK(bit_test({0x66, 0x0f, 0xa3, 0xc6}).operand_bytes == 2);
    CHECK(bit_test({0x4c, 0x0f, 0xab, 0xc6}).bit_register == 8);   // bts %r8, %rsi (REX.R)
    CHECK(bit_test({0x4c, 0x0f, 0xab, 0xc6}).operand_bytes == 8);
    CHECK(bit_test({0x41, 0x0f, 0xa3, 0xc6}).bit_register == 0);   // bt %eax, %r14d (REX.B: the tested one)
    CHECK(bit_test({0x41, 0x0f, 0xa3, 0xc6}).operand_bytes == 4);
    CHECK(bit_test({0x66, 0x45, 0x0f, 0xbb, 0xd8}).bit_register == 11); // btc %r11w, %r8w
    CHECK(bit_test({0x66, 0x45, 0x0f, 0xbb, 0xd8}).operand_bytes == 2);
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

namespace {

pmc_model::StateImageInstruction image(std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    return pmc_model::x86_state_image(b.data(), b.size());
}
bool masked_store(std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    return pmc_model::is_x86_masked_store(b.data(), b.size());
}

} // namespace

TEST_CASE("x86-64: x87/SSE state images and their memory operands") {
    using pmc_model::StateImage;
    CHECK(image({0x49, 0x0f, 0xae, 0x06}).kind == StateImage::fxsave); // fxsave64 (%r14)
    CHECK(image({0x49, 0x0f, 0xae, 0x06}).operand.base == 14);
    auto a = image({0x0f, 0xae, 0x44, 0x98, 0x10}); // fxsave 0x10(%rax,%rbx,4)
    CHECK(a.kind == StateImage::fxsave);
    CHECK((a.operand.base == 0 && a.operand.index == 3 && a.operand.scale == 4 && a.operand.displacement == 0x10));
    a = image({0x0f, 0xae, 0x0d, 0x00, 0x02, 0x00, 0x00}); // fxrstor 0x200(%rip)
    CHECK(a.kind == StateImage::fxrstor);
    CHECK((a.operand.rip_relative && a.operand.base == -1 && a.operand.displacement == 0x200));
    a = image({0xd9, 0x74, 0x24, 0xf8}); // fnstenv -8(%rsp)
    CHECK(a.kind == StateImage::fnstenv);
    CHECK((a.operand.base == 4 && a.operand.index == -1 && a.operand.displacement == -8));
    a = image({0x41, 0xd9, 0x65, 0x00}); // fldenv 0(%r13)
    CHECK((a.kind == StateImage::fldenv && a.operand.base == 13 && a.operand.displacement == 0));
    a = image({0x64, 0xdd, 0x34, 0x25, 0x40, 0x00, 0x00, 0x00}); // fnsave %fs:0x40
    CHECK((a.kind == StateImage::fnsave && a.operand.segment == 4 && a.operand.base == -1 && a.operand.index == -1));
    CHECK(a.operand.displacement == 0x40);
    CHECK(image({0xdd, 0x20}).kind == StateImage::frstor); // frstor (%rax)
    a = image({0x43, 0x0f, 0xae, 0x04, 0xcc}); // fxsave (%r12,%r9,8)
    CHECK((a.operand.base == 12 && a.operand.index == 9 && a.operand.scale == 8));
    a = image({0xdd, 0xb4, 0x24, 0x34, 0x12, 0x00, 0x00}); // fnsave 0x1234(%rsp)
    CHECK((a.operand.base == 4 && a.operand.displacement == 0x1234));
    a = image({0x67, 0x48, 0x0f, 0xae, 0x08}); // fxrstor64 (%eax)
    CHECK((a.kind == StateImage::fxrstor && a.operand.address_32 && a.operand.base == 0));
    CHECK(image({0xdb, 0x29}).kind == StateImage::fldt);             // fldt (%rcx)
    CHECK(image({0xdb, 0x79, 0x10}).kind == StateImage::fstpt);      // fstpt 0x10(%rcx)
    CHECK(image({0xdb, 0x79, 0x10}).operand.displacement == 16);
    CHECK(image({0xdb, 0x01}).kind == StateImage::none);             // fildl (%rcx)
    CHECK(image({0xd9, 0x38}).kind == StateImage::none);             // fnstcw (%rax): QEMU's access is VEX's
    CHECK(image({0x48, 0x0f, 0xae, 0x21}).kind == StateImage::none); // xsave64 (%rcx): not modelled
    CHECK(image({0x66, 0xd9, 0x30}).kind == StateImage::none);       // fnstenvs: the 16-bit image
    CHECK(image({0x0f, 0xae, 0xf0}).kind == StateImage::none);       // mfence: no memory operand
    CHECK(image({0xd9, 0xe0}).kind == StateImage::none);             // fchs
    CHECK(image({0x0f, 0xae}).kind == StateImage::none);             // cut short
    CHECK(!image({0x0f, 0xae, 0x44, 0x98}).operand.memory);          // its displacement cut short
}

TEST_CASE("x86-64: VEX's accesses of a state image, in order") {
    using Access = std::tuple<std::uint32_t, std::uint32_t, bool>;
    std::vector<Access> seen;
    const auto collect = [&](pmc_model::StateImage kind) {
        seen.clear();
        pmc_model::for_each_state_image_access(kind, [&](std::uint32_t offset, std::uint32_t size, bool store) {
            seen.emplace_back(offset, size, store);
        });
    };
    collect(pmc_model::StateImage::fxsave);
    REQUIRE(seen.size() == 18); // the x87 part, MXCSR, 16 XMM registers
    CHECK(seen[0] == Access{0u, 160u, true});
    CHECK(seen[1] == Access{24u, 8u, true});
    CHECK(seen[2] == Access{160u, 16u, true});
    CHECK(seen[17] == Access{400u, 16u, true});
    collect(pmc_model::StateImage::fxrstor);
    REQUIRE(seen.size() == 18);
    CHECK(seen[0] == Access{0u, 160u, false});
    CHECK(seen[17] == Access{400u, 16u, false});
    collect(pmc_model::StateImage::fnsave);
    CHECK(seen == std::vector<Access>{{0u, 108u, true}});
    collect(pmc_model::StateImage::frstor);
    CHECK(seen == std::vector<Access>{{0u, 108u, false}});
    collect(pmc_model::StateImage::fnstenv);
    CHECK(seen == std::vector<Access>{{0u, 28u, true}});
    collect(pmc_model::StateImage::fldenv);
    CHECK(seen == std::vector<Access>{{0u, 28u, false}});
    collect(pmc_model::StateImage::fstpt);
    CHECK(seen == std::vector<Access>{{0u, 10u, true}});
    collect(pmc_model::StateImage::fldt);
    CHECK(seen == std::vector<Access>{{0u, 10u, false}});
    collect(pmc_model::StateImage::none);
    CHECK(seen.empty());
}

TEST_CASE("x86-64: masked stores keep their pieces apart, masked loads and other VEX instructions do not") {
    CHECK(masked_store({0xc4, 0xe2, 0x75, 0x2e, 0x00}));       // vmaskmovps %ymm0, %ymm1, (%rax)
    CHECK(masked_store({0xc4, 0xe2, 0x71, 0x2f, 0x47, 0x08})); // vmaskmovpd %xmm0, %xmm1, 8(%rdi)
    CHECK(masked_store({0xc4, 0xe2, 0x75, 0x8e, 0x00}));       // vpmaskmovd %ymm0, %ymm1, (%rax)
    CHECK(masked_store({0xc4, 0xc2, 0xf5, 0x8e, 0x01}));       // vpmaskmovq %ymm0, %ymm1, (%r9)
    CHECK(!masked_store({0xc4, 0xe2, 0x75, 0x8c, 0x00}));      // vpmaskmovd (%rax), %ymm1, %ymm0: a load
    CHECK(!masked_store({0xc4, 0xe2, 0x75, 0x2c, 0x00}));      // vmaskmovps (%rax), %ymm1, %ymm0: a load
    CHECK(!masked_store({0xc4, 0xe1, 0x75, 0x2e, 0x00}));      // map 0F (vucomiss's opcode): another instruction
    CHECK(!masked_store({0xc5, 0xfc, 0x2e, 0x00}));            // two-byte VEX
    CHECK(!masked_store({0xc4, 0xe2, 0x75}));                  // cut short
}

namespace {

/// What a decoder of one access (x86_single_access, x86_vector_access) says of `bytes`: "load N", "store N" or "none".
std::string decoded_access(pmc_model::SingleAccess (*decode)(const unsigned char*, std::size_t),
                           std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    const pmc_model::SingleAccess a = decode(b.data(), b.size());
    if (a.size == 0) return "none";
    return (a.store ? "store " : "load ") + std::to_string(a.size);
}
std::string single(std::initializer_list<unsigned char> bytes) {
    return decoded_access(pmc_model::x86_single_access, bytes);
}

} // namespace

TEST_CASE("x86-64: the instructions that make one plain access get the lean callback, with its kind and size") {
    // Encodings from GNU as.
    CHECK(single({0x48, 0x8b, 0x07}) == "load 8");                         // mov (%rdi),%rax
    CHECK(single({0x89, 0x44, 0x24, 0x08}) == "store 4");                  // mov %eax,0x8(%rsp)
    CHECK(single({0x8a, 0x06}) == "load 1");                               // mov (%rsi),%al
    CHECK(single({0x88, 0x0c, 0x07}) == "store 1");                        // mov %cl,(%rdi,%rax,1)
    CHECK(single({0x66, 0x8b, 0x07}) == "load 2");                         // mov (%rdi),%ax
    CHECK(single({0xc6, 0x07, 0x01}) == "store 1");                        // movb $0x1,(%rdi)
    CHECK(single({0x48, 0xc7, 0x44, 0x24, 0x10, 1, 0, 0, 0}) == "store 8"); // movq $0x1,0x10(%rsp)
    CHECK(single({0xc7, 0x44, 0x24, 0x10, 1, 0, 0, 0}) == "store 4");      // movl $0x1,0x10(%rsp)
    CHECK(single({0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}) == "load 8"); // mov %fs:0x28,%rax
    CHECK(single({0x0f, 0xb6, 0x07}) == "load 1");                         // movzbl (%rdi),%eax
    CHECK(single({0x0f, 0xb7, 0x07}) == "load 2");                         // movzwl (%rdi),%eax
    CHECK(single({0x48, 0x0f, 0xbe, 0x4e, 0x03}) == "load 1");             // movsbq 0x3(%rsi),%rcx
    CHECK(single({0x48, 0x63, 0x07}) == "load 4");                         // movslq (%rdi),%rax
    CHECK(single({0x48, 0x03, 0x07}) == "load 8");                         // add (%rdi),%rax
    CHECK(single({0x2b, 0x4c, 0x24, 0x08}) == "load 4");                   // sub 0x8(%rsp),%ecx
    CHECK(single({0x48, 0x39, 0x07}) == "load 8");                         // cmp %rax,(%rdi)
    CHECK(single({0x80, 0x3f, 0x2f}) == "load 1");                         // cmpb $0x2f,(%rdi)
    CHECK(single({0x48, 0x83, 0x3d, 0x10, 0, 0, 0, 0}) == "load 8");       // cmpq $0x0,0x10(%rip)
    CHECK(single({0x3a, 0x17}) == "load 1");                               // cmp (%rdi),%dl
    CHECK(single({0x85, 0x07}) == "load 4");                               // test %eax,(%rdi)
    CHECK(single({0xf6, 0x07, 0x01}) == "load 1");                         // testb $0x1,(%rdi)
    CHECK(single({0x48, 0x0f, 0xaf, 0x47, 0x08}) == "load 8");             // imul 0x8(%rdi),%rax
    CHECK(single({0x6b, 0x07, 0x03}) == "load 4");                         // imul $0x3,(%rdi),%eax
    CHECK(single({0x48, 0x0f, 0x45, 0x07}) == "load 8");                   // cmovne (%rdi),%rax
    CHECK(single({0x53}) == "store 8");                                    // push %rbx
    CHECK(single({0x41, 0x54}) == "store 8");                              // push %r12
    CHECK(single({0x5d}) == "load 8");                                     // pop %rbp
    CHECK(single({0x41, 0x5f}) == "load 8");                               // pop %r15
    CHECK(single({0x6a, 0x01}) == "store 8");                              // push $0x1
    CHECK(single({0xe8, 0, 0, 0, 0}) == "store 8");                        // call rel32
    CHECK(single({0xff, 0xd0}) == "store 8");                              // call *%rax
    CHECK(single({0xc3}) == "load 8");                                     // ret
    CHECK(single({0xc2, 0x08, 0x00}) == "load 8");                         // ret $0x8
    CHECK(single({0xc9}) == "load 8");                                     // leave
    CHECK(single({0xff, 0x25, 0x10, 0, 0, 0}) == "load 8");                // jmp *0x10(%rip)
    CHECK(single({0x3e, 0xff, 0x24, 0xd0}) == "load 8");                   // notrack jmp *(%rax,%rdx,8)
    // More than one access, a read-modify-write, a wider or a vector access, none, or a prefix that changes it.
    CHECK(single({0x48, 0x01, 0x07}) == "none");                           // add %rax,(%rdi)
    CHECK(single({0xff, 0x07}) == "none");                                 // incl (%rdi)
    CHECK(single({0xf0, 0x83, 0x07, 0x01}) == "none");                     // lock addl $0x1,(%rdi)
    CHECK(single({0x48, 0x87, 0x07}) == "none");                           // xchg %rax,(%rdi)
    CHECK(single({0x48, 0xa5}) == "none");                                 // movsq
    CHECK(single({0xf3, 0xaa}) == "none");                                 // rep stos
    CHECK(single({0xff, 0x37}) == "none");                                 // push (%rdi): a load and a store
    CHECK(single({0xff, 0x10}) == "none");                                 // call *(%rax): the same
    CHECK(single({0x8f, 0x07}) == "none");                                 // pop (%rdi): the same
    CHECK(single({0xf3, 0x0f, 0x6f, 0x07}) == "none");                     // movdqu (%rdi),%xmm0
    CHECK(single({0xf2, 0x0f, 0x10, 0x07}) == "none");                     // movsd (%rdi),%xmm0
    CHECK(single({0x48, 0x89, 0xc3}) == "none");                           // mov %rax,%rbx
    CHECK(single({0x48, 0x8d, 0x47, 0x08}) == "none");                     // lea 0x8(%rdi),%rax
    CHECK(single({0x66, 0x50}) == "none");                                 // push %ax: 2 bytes, not taken
    CHECK(single({0x0f, 0xae, 0x07}) == "none");                           // fxsave (%rdi)
    CHECK(single({0xf2, 0xff, 0xe0}) == "none");                           // bnd jmp *%rax
    CHECK(single({0x67, 0x8b, 0x07}) == "none");                           // mov (%edi),%eax
    CHECK(single({0x48, 0x0f, 0xb1, 0x0f}) == "none");                     // cmpxchg %rcx,(%rdi)
    CHECK(single({0x0f, 0xba, 0x27, 0x01}) == "none");                     // btl $0x1,(%rdi)
    CHECK(single({0x48, 0x8b}) == "none");                                 // cut short
    CHECK(single({0x48}) == "none");
    // Disjoint from the kinds above: each instruction gets one callback.
    for (const auto& b : {std::vector<unsigned char>{0xf0, 0x01, 0x07}, {0x48, 0x87, 0x07},
                          {0xf0, 0x48, 0x0f, 0xb1, 0x0f}, {0x0f, 0xae, 0x07}, {0x0f, 0xa3, 0xc8}})
        CHECK(pmc_model::x86_single_access(b.data(), b.size()).size == 0);
}

namespace {

/// x86_rep_string as "movs 8 x2", "scas 1 x1" or "none".
std::string rep_string(std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    const pmc_model::RepStringInstruction r = pmc_model::x86_rep_string(b.data(), b.size());
    using pmc_model::RepString;
    const char* kind = r.kind == RepString::movs   ? "movs"
                       : r.kind == RepString::stos ? "stos"
                       : r.kind == RepString::lods ? "lods"
                       : r.kind == RepString::cmps ? "cmps"
                       : r.kind == RepString::scas ? "scas"
                                                   : nullptr;
    if (!kind) return "none";
    return std::string(kind) + " " + std::to_string(r.element_bytes) + " x" + std::to_string(r.accesses_per_iteration) +
           (r.address_32 ? " ecx" : "") + (r.repne ? " ne" : "");
}

} // namespace

TEST_CASE("x86-64: rep string instructions, their element size and accesses per iteration") {
    // Encodings from GNU as.
    CHECK(rep_string({0xf3, 0xa4}) == "movs 1 x2");       // rep movsb
    CHECK(rep_string({0xf3, 0x48, 0xa5}) == "movs 8 x2"); // rep movsq
    CHECK(rep_string({0x66, 0xf3, 0xa5}) == "movs 2 x2"); // rep movsw
    CHECK(rep_string({0xf3, 0xa5}) == "movs 4 x2");       // rep movsl
    CHECK(rep_string({0xf3, 0xaa}) == "stos 1 x1");       // rep stos %al
    CHECK(rep_string({0xf3, 0x48, 0xab}) == "stos 8 x1"); // rep stos %rax
    CHECK(rep_string({0x66, 0xf3, 0xab}) == "stos 2 x1"); // rep stos %ax
    CHECK(rep_string({0xf3, 0xab}) == "stos 4 x1");       // rep stos %eax
    CHECK(rep_string({0xf3, 0xac}) == "lods 1 x1");       // rep lods %al
    CHECK(rep_string({0xf3, 0x48, 0xad}) == "lods 8 x1"); // rep lods %rax
    CHECK(rep_string({0xf3, 0xa6}) == "cmps 1 x2");       // repz cmpsb
    CHECK(rep_string({0xf2, 0x48, 0xa7}) == "cmps 8 x2 ne"); // repnz cmpsq
    CHECK(rep_string({0xf3, 0xae}) == "scas 1 x1");       // repz scas %al
    CHECK(rep_string({0xf2, 0xae}) == "scas 1 x1 ne");     // repnz scas %al
    CHECK(rep_string({0x66, 0xf2, 0xaf}) == "scas 2 x1 ne"); // repnz scas %ax
    CHECK(rep_string({0xf2, 0xaf}) == "scas 4 x1 ne");     // repnz scas %eax
    CHECK(rep_string({0x67, 0xf3, 0xa4}) == "movs 1 x2 ecx");// rep movsb with 32-bit addresses
    CHECK(rep_string({0x64, 0xf3, 0xa4}) == "movs 1 x2"); // rep movsb %fs:(%rsi)
    CHECK(rep_string({0x48, 0xf3, 0xa5}) == "movs 4 x2"); // a REX not right before the opcode is ignored
    // Not repeated, or not a string instruction.
    CHECK(rep_string({0x48, 0xa5}) == "none"); // movsq
    CHECK(rep_string({0xaa}) == "none");       // stos %al
    CHECK(rep_string({0xf3, 0xc3}) == "none"); // repz ret
    CHECK(rep_string({0xf3, 0x90}) == "none"); // pause
    CHECK(rep_string({0xf3, 0xa8, 0x01}) == "none"); // test $1,%al after a stray prefix
    CHECK(rep_string({0xf3}) == "none");       // cut short
    // The last of F2 and F3 decides repe or repne.
    CHECK(rep_string({0xf2, 0xf3, 0xa6}) == "cmps 1 x2");
    CHECK(rep_string({0xf3, 0xf2, 0xa6}) == "cmps 1 x2 ne");
}

TEST_CASE("x86-64: VEX's execution after a rep string instruction's count reaches 0, by its last elements") {
    // VEX (and Cachegrind's Ir) runs the instruction once more to find the count 0 unless a repe/repne condition
    // ended it on that last element: repe cmps/scas when the elements differed, repne when they were equal.
    const auto after = [](std::initializer_list<unsigned char> bytes, bool last_equal) {
        const std::vector<unsigned char> b(bytes);
        return pmc_model::executes_after_count_end(pmc_model::x86_rep_string(b.data(), b.size()), last_equal);
    };
    for (const bool equal : {true, false}) {
        CHECK(after({0xf3, 0xa4}, equal));       // rep movsb: by the count alone
        CHECK(after({0xf3, 0x48, 0xab}, equal)); // rep stos %rax
        CHECK(after({0xf3, 0xac}, equal));       // rep lods %al
        CHECK(after({0xf2, 0xaa}, equal));       // F2 before stos repeats as F3
    }
    CHECK(after({0xf3, 0xa6}, true));        // repe cmpsb, last bytes equal: the condition holds
    CHECK_FALSE(after({0xf3, 0xa6}, false)); // repe cmpsb, last bytes differ: ended by it
    CHECK(after({0xf2, 0x48, 0xa7}, false)); // repne cmpsq, last quadwords differ: the condition holds
    CHECK_FALSE(after({0xf2, 0x48, 0xa7}, true));
    CHECK(after({0xf2, 0xae}, false));       // repne scasb, not found at the last byte
    CHECK_FALSE(after({0xf2, 0xae}, true));  // found there
    CHECK(after({0xf3, 0xaf}, true));        // repe scasl
    CHECK_FALSE(after({0xf3, 0xaf}, false));
}

namespace {
std::string vector_access(std::initializer_list<unsigned char> bytes) {
    return decoded_access(pmc_model::x86_vector_access, bytes);
}
} // namespace

TEST_CASE("x86-64: whole-register vector loads and stores, legacy and VEX, with their kind and size") {
    // Encodings from GNU as; the first ones are glibc's string and copy routines', the ones QEMU 7.2 reports in
    // 8-byte pieces most under sort.
    CHECK(vector_access({0xc5, 0xfd, 0x74, 0x0e}) == "load 32");             // vpcmpeqb (%rsi),%ymm0,%ymm1
    CHECK(vector_access({0xc5, 0xfe, 0x6f, 0x07}) == "load 32");             // vmovdqu (%rdi),%ymm0
    CHECK(vector_access({0xc5, 0xe9, 0x74, 0x17}) == "load 16");             // vpcmpeqb (%rdi),%xmm2,%xmm2
    CHECK(vector_access({0xc5, 0xfa, 0x6f, 0x4c, 0x16, 0xf0}) == "load 16"); // vmovdqu -0x10(%rsi,%rdx,1),%xmm1
    CHECK(vector_access({0xc5, 0xfe, 0x7f, 0x07}) == "store 32");            // vmovdqu %ymm0,(%rdi)
    CHECK(vector_access({0xc5, 0xfa, 0x7f, 0x07}) == "store 16");            // vmovdqu %xmm0,(%rdi)
    CHECK(vector_access({0xc4, 0xc1, 0x7e, 0x6f, 0x07}) == "load 32");       // vmovdqu (%r15),%ymm0 (3-byte VEX)
    CHECK(vector_access({0x0f, 0x11, 0x13}) == "store 16");                  // movups %xmm2,(%rbx)
    CHECK(vector_access({0x0f, 0x10, 0x13}) == "load 16");                   // movups (%rbx),%xmm2
    CHECK(vector_access({0x66, 0x0f, 0x29, 0x07}) == "store 16");            // movapd %xmm0,(%rdi)
    CHECK(vector_access({0xf3, 0x41, 0x0f, 0x6f, 0x5f, 0xf0}) == "load 16"); // movdqu -0x10(%r15),%xmm3
    CHECK(vector_access({0x66, 0x0f, 0x6f, 0x07}) == "load 16");             // movdqa (%rdi),%xmm0
    CHECK(vector_access({0xf3, 0x0f, 0x7f, 0x07}) == "store 16");            // movdqu %xmm0,(%rdi)
    CHECK(vector_access({0x66, 0x0f, 0x74, 0x07}) == "load 16");             // pcmpeqb (%rdi),%xmm0
    CHECK(vector_access({0x66, 0x0f, 0xda, 0x07}) == "load 16");             // pminub (%rdi),%xmm0
    CHECK(vector_access({0x66, 0x0f, 0xe7, 0x07}) == "store 16");            // movntdq %xmm0,(%rdi)
    // Not whole-register accesses of memory, or not taken: none.
    CHECK(vector_access({0xc5, 0xfd, 0x74, 0xc1}) == "none");       // vpcmpeqb %ymm1,%ymm0,%ymm0 (registers)
    CHECK(vector_access({0xf3, 0x0f, 0x10, 0x07}) == "none");       // movss (%rdi),%xmm0 (4 bytes)
    CHECK(vector_access({0xf2, 0x0f, 0x11, 0x07}) == "none");       // movsd %xmm0,(%rdi) (8 bytes)
    CHECK(vector_access({0x0f, 0x6f, 0x07}) == "none");             // movq (%rdi),%mm0 (MMX, 8 bytes)
    CHECK(vector_access({0x0f, 0x74, 0x07}) == "none");             // pcmpeqb (%rdi),%mm0 (MMX)
    CHECK(vector_access({0x66, 0x0f, 0x7e, 0x07}) == "none");       // movd %xmm0,(%rdi) (4 bytes)
    CHECK(vector_access({0x66, 0x0f, 0xd6, 0x07}) == "none");       // movq %xmm0,(%rdi) (8 bytes)
    CHECK(vector_access({0xc4, 0xe2, 0x7d, 0x78, 0x07}) == "none"); // vpbroadcastb (%rdi),%ymm0 (0F38 map)
    CHECK(vector_access({0x48, 0x8b, 0x07}) == "none");             // mov (%rdi),%rax
    CHECK(vector_access({0x48, 0x83, 0x6c, 0x24, 0x08, 0x01}) == "none"); // subq $0x1,0x8(%rsp)
    CHECK(vector_access({0x66, 0xf3, 0x0f, 0x6f, 0x07}) == "none"); // two mandatory prefixes: not taken
    CHECK(vector_access({0x67, 0x0f, 0x10, 0x07}) == "none");       // an address-size prefix: not taken
    CHECK(vector_access({0xc5, 0xfe}) == "none");                   // cut short
}
