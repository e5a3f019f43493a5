// SPDX-License-Identifier: MIT
// What pmc emulate --branches decodes a block's last instruction as (tools/emulate/model/branch_decode.hpp): x86-64 and
// AArch64 encodings, written out by hand from the architecture manuals, with the prefixes compilers emit.
#include "catch.hpp"

#include <model/branch_decode.hpp>

#include <cstdint>
#include <initializer_list>
#include <vector>

using Kind = pmc_model::BranchKind;

namespace {
Kind x86(std::initializer_list<unsigned char> bytes) {
    const std::vector<unsigned char> b(bytes);
    return pmc_model::decode_x86(b.data(), b.size());
}
} // namespace

TEST_CASE("x86-64: conditional branches, with and without prefixes") {
    CHECK(x86({0x74, 0x05}) == Kind::conditional);                         // je rel8
    CHECK(x86({0x7f, 0xfe}) == Kind::conditional);                         // jg rel8
    CHECK(x86({0x0f, 0x85, 0x10, 0x00, 0x00, 0x00}) == Kind::conditional); // jne rel32
    CHECK(x86({0x3e, 0x74, 0x05}) == Kind::conditional);                   // ds-prefixed (a "taken" hint)
    CHECK(x86({0xe3, 0x02}) == Kind::conditional);                         // jrcxz
    CHECK(x86({0x67, 0xe3, 0x02}) == Kind::conditional);                   // jecxz
    CHECK(x86({0xe2, 0xfe}) == Kind::conditional);                         // loop
    CHECK(x86({0xe0, 0xfe}) == Kind::conditional);                         // loopne
}

TEST_CASE("x86-64: direct and indirect jumps and calls, returns") {
    CHECK(x86({0xeb, 0x00}) == Kind::direct);                         // jmp rel8
    CHECK(x86({0xe9, 0x00, 0x01, 0x00, 0x00}) == Kind::direct);       // jmp rel32
    CHECK(x86({0xe8, 0x00, 0x01, 0x00, 0x00}) == Kind::direct);       // call rel32
    CHECK(x86({0xff, 0xe0}) == Kind::indirect);                       // jmp *%rax
    CHECK(x86({0x41, 0xff, 0xe3}) == Kind::indirect);                 // jmp *%r11 (REX.B)
    CHECK(x86({0x3e, 0xff, 0xe0}) == Kind::indirect);                 // notrack jmp *%rax (CET)
    CHECK(x86({0xff, 0x24, 0xc5, 0, 0, 0, 0}) == Kind::indirect);     // jmp *0(,%rax,8): a switch's table
    CHECK(x86({0xff, 0xd0}) == Kind::indirect);                       // call *%rax
    CHECK(x86({0xff, 0x15, 0, 0, 0, 0}) == Kind::indirect);           // call *0(%rip): a PLT-less call
    CHECK(x86({0xff, 0x14, 0xc6}) == Kind::indirect);                 // call *(%rsi,%rax,8)
    CHECK(x86({0xc3}) == Kind::ret);
    CHECK(x86({0xf3, 0xc3}) == Kind::ret);                            // repz ret (AMD's old idiom)
    CHECK(x86({0xf2, 0xc3}) == Kind::ret);                            // bnd ret (MPX)
    CHECK(x86({0xc2, 0x08, 0x00}) == Kind::ret);                      // ret $8
}

TEST_CASE("x86-64: what ends a block without being a branch") {
    CHECK(x86({0x0f, 0x05}) == Kind::none);             // syscall
    CHECK(x86({0xf3, 0xa4}) == Kind::none);             // rep movsb
    CHECK(x86({0xf3, 0x48, 0xab}) == Kind::none);       // rep stosq
    CHECK(x86({0xff, 0xc0}) == Kind::none);             // inc %eax (0xff /0)
    CHECK(x86({0xff, 0x30}) == Kind::none);             // push (%rax) (0xff /6)
    CHECK(x86({0x0f, 0x44, 0xc1}) == Kind::none);       // cmove %ecx, %eax: no branch
    CHECK(x86({0x90}) == Kind::none);                   // nop
    CHECK(x86({0x66, 0x66, 0x66}) == Kind::none);       // prefixes only
    CHECK(x86({0x0f}) == Kind::none);                   // cut short
}

TEST_CASE("AArch64: conditional, direct, indirect, returns") {
    using pmc_model::decode_aarch64;
    CHECK(decode_aarch64(0x54000041u) == Kind::conditional); // b.ne +8
    CHECK(decode_aarch64(0x54ffffe0u) == Kind::conditional); // b.eq -4
    CHECK(decode_aarch64(0xb4000040u) == Kind::conditional); // cbz x0, +8
    CHECK(decode_aarch64(0x35000040u) == Kind::conditional); // cbnz w0, +8
    CHECK(decode_aarch64(0x36000040u) == Kind::conditional); // tbz w0, #0, +8
    CHECK(decode_aarch64(0xb7f80040u) == Kind::conditional); // tbnz x0, #63, +8
    CHECK(decode_aarch64(0x14000002u) == Kind::direct);      // b +8
    CHECK(decode_aarch64(0x97ffffffu) == Kind::direct);      // bl -4
    CHECK(decode_aarch64(0xd61f0000u) == Kind::indirect);    // br x0
    CHECK(decode_aarch64(0xd63f0020u) == Kind::indirect);    // blr x1
    CHECK(decode_aarch64(0xd71f081fu) == Kind::indirect);    // braa x0, sp (pointer authentication)
    CHECK(decode_aarch64(0xd65f03c0u) == Kind::ret);         // ret
    CHECK(decode_aarch64(0xd65f0bffu) == Kind::ret);         // retaa
    CHECK(decode_aarch64(0xd69f03e0u) == Kind::none);        // eret (not in user mode)
    CHECK(decode_aarch64(0xd4000001u) == Kind::none);        // svc #0
    CHECK(decode_aarch64(0xd503201fu) == Kind::none);        // nop
    CHECK(decode_aarch64(0x1a800000u) == Kind::none);        // csel: no branch
}
