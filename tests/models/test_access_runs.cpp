// SPDX-License-Identifier: MIT
// Runs of x86-64 accesses that pmc emulate --cache passes on from one QEMU call (tools/emulate/model/access_runs.hpp):
// which instructions may be members, and the runs found in byte sequences whose runs are known: prologues and
// epilogues of push and pop, stores to one struct, a load into the base that ends its run, prefixes and operands
// that keep their own calls.
#include "catch.hpp"

#include <model/access_runs.hpp>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace {

using Bytes = std::vector<unsigned char>;

pmc_model::RunAccess decode(const Bytes& b) { return pmc_model::x86_run_access(b.data(), b.size()); }

std::vector<pmc_model::AccessRun> runs_of(std::initializer_list<Bytes> block) {
    std::vector<pmc_model::RunAccess> accesses;
    for (const Bytes& b : block) accesses.push_back(decode(b));
    return pmc_model::find_access_runs(accesses);
}

/// A member as (index, offset from the last address, size, store), for comparison.
struct Member {
    std::uint32_t index;
    std::int64_t offset;
    std::uint32_t size;
    bool store;
    bool operator==(const pmc_model::RunMember& m) const {
        return index == m.index && offset == m.offset && size == m.size && store == m.store;
    }
};
bool same(const pmc_model::AccessRun& run, std::initializer_list<Member> expected) {
    if (run.members.size() != expected.size()) return false;
    std::size_t k = 0;
    for (const Member& e : expected)
        if (!(e == run.members[k++])) return false;
    return true;
}

} // namespace

TEST_CASE("access runs: push, pop, call and ret are 8-byte stack accesses that move %rsp") {
    const auto push_rbx = decode({0x53});
    CHECK(push_rbx.member);
    CHECK(push_rbx.base == 4);
    CHECK(push_rbx.displacement == -8);
    CHECK(push_rbx.base_change == -8);
    CHECK(push_rbx.size == 8);
    CHECK(push_rbx.store);
    const auto pop_r15 = decode({0x41, 0x5f});
    CHECK(pop_r15.member);
    CHECK(pop_r15.displacement == 0);
    CHECK(pop_r15.base_change == 8);
    CHECK(!pop_r15.store);
    CHECK(pop_r15.written == 15);
    CHECK(decode({0xe8, 0, 0, 0, 0}).store);       // call rel32
    CHECK(!decode({0xc3}).store);                  // ret
    CHECK(decode({0xc3}).base_change == 8);
    CHECK(decode({0x41, 0xff, 0xd3}).member);      // call *%r11
    CHECK(!decode({0xff, 0x13}).member);           // call *(%rbx): a load and a store
    CHECK(!decode({0x5c}).member);                 // pop %rsp: %rsp from memory
    CHECK(!decode({0x66, 0x53}).member);           // pushw %bx: 2 bytes
    CHECK(!decode({0xf3, 0xc3}).member);           // rep ret: a prefix
    CHECK(!decode({0xf2, 0xc3}).member);           // bnd ret
    CHECK(!decode({0x6a, 0x01}).member);           // push $1: not decoded (keeps its call)
}

TEST_CASE("access runs: mov-family accesses at disp(base) are members, other operands are not") {
    const auto store = decode({0x48, 0x89, 0x5c, 0x24, 0x08}); // mov %rbx, 0x8(%rsp)
    CHECK(store.member);
    CHECK(store.base == 4);
    CHECK(store.displacement == 8);
    CHECK(store.base_change == 0);
    CHECK(store.size == 8);
    CHECK(store.store);
    CHECK(store.written == -1);
    const auto load = decode({0x8b, 0x47, 0x10}); // mov 0x10(%rdi), %eax
    CHECK(load.member);
    CHECK(load.base == 7);
    CHECK(load.size == 4);
    CHECK(load.written == 0);
    CHECK(decode({0x66, 0x89, 0x47, 0x02}).size == 2);              // mov %ax, 0x2(%rdi)
    CHECK(decode({0x88, 0x47, 0x01}).size == 1);                    // mov %al, 0x1(%rdi)
    CHECK(decode({0x8a, 0x67, 0x01}).written == 0);                 // mov 0x1(%rdi), %ah: part of %rax
    CHECK(decode({0x40, 0x8a, 0x77, 0x01}).written == 6);           // mov 0x1(%rdi), %sil
    CHECK(decode({0x4c, 0x8b, 0x47, 0x08}).written == 8);           // mov 0x8(%rdi), %r8
    CHECK(decode({0x49, 0x8b, 0x40, 0x08}).base == 8);              // mov 0x8(%r8), %rax
    CHECK(decode({0x48, 0xc7, 0x47, 0x08, 1, 0, 0, 0}).size == 8);  // movq $1, 0x8(%rdi)
    CHECK(decode({0xc6, 0x47, 0x08, 1}).size == 1);                 // movb $1, 0x8(%rdi)
    CHECK(decode({0x0f, 0xb6, 0x47, 0x03}).size == 1);              // movzbl 0x3(%rdi), %eax
    CHECK(decode({0x48, 0x0f, 0xbf, 0x47, 0x04}).size == 2);        // movswq 0x4(%rdi), %rax
    CHECK(decode({0x48, 0x63, 0x47, 0x04}).size == 4);              // movslq 0x4(%rdi), %rax
    CHECK(decode({0x48, 0x8b, 0x87, 0x00, 0x01, 0, 0}).displacement == 256); // disp32
    CHECK(!decode({0x48, 0x8b, 0x04, 0xc7}).member);        // mov (%rdi,%rax,8), %rax: an index
    CHECK(!decode({0x48, 0x8b, 0x05, 0, 0, 0, 0}).member);  // mov 0(%rip), %rax
    CHECK(!decode({0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}).member); // mov %fs:0x28, %rax
    CHECK(!decode({0x67, 0x8b, 0x07}).member);              // mov (%edi), %eax: 32-bit address
    CHECK(!decode({0x48, 0x89, 0xc7}).member);              // mov %rax, %rdi: no memory
    CHECK(!decode({0x63, 0x47, 0x04}).member);              // movsxd without REX.W (not decoded)
    CHECK(!decode({0xc7, 0x4f, 0x08, 1, 0, 0, 0}).member);  // C7 /1: not a mov
    CHECK(!decode({0x48, 0x01, 0x47, 0x08}).member);        // add %rax, 0x8(%rdi): a read-modify-write
    CHECK(!decode({0xf0, 0x48, 0x89, 0x47, 0x08}).member);  // a LOCK prefix
    CHECK(!decode({0x48, 0x8b}).member);                    // cut short
    CHECK(!decode({0x48, 0x66, 0x89, 0x07}).member);        // REX not right before the opcode
}

TEST_CASE("access runs: a prologue's pushes are one run, offsets from the last push") {
    // push %rbp; push %r15; push %r14; push %rbx: at rsp-8, -16, -24, -32
    const auto runs = runs_of({{0x55}, {0x41, 0x57}, {0x41, 0x56}, {0x53}});
    REQUIRE(runs.size() == 1);
    CHECK(same(runs[0], {{0, 24, 8, true}, {1, 16, 8, true}, {2, 8, 8, true}, {3, 0, 8, true}}));
}

TEST_CASE("access runs: an epilogue's pops and ret are one run") {
    // pop %rbx; pop %rbp; pop %r12; ret: at rsp, +8, +16, +24
    const auto runs = runs_of({{0x5b}, {0x5d}, {0x41, 0x5c}, {0xc3}});
    REQUIRE(runs.size() == 1);
    CHECK(same(runs[0], {{0, -24, 8, false}, {1, -16, 8, false}, {2, -8, 8, false}, {3, 0, 8, false}}));
}

TEST_CASE("access runs: stores through %rsp after pushes follow the pushes' moves of %rsp") {
    // push %rbx; mov %rax, 0x8(%rsp); mov %ecx, 0x10(%rsp); call: at rsp-8, rsp-8+8, rsp-8+16, rsp-16
    const auto runs = runs_of({{0x53}, {0x48, 0x89, 0x44, 0x24, 0x08}, {0x89, 0x4c, 0x24, 0x10}, {0xe8, 0, 0, 0, 0}});
    REQUIRE(runs.size() == 1);
    CHECK(same(runs[0], {{0, 8, 8, true}, {1, 16, 8, true}, {2, 24, 4, true}, {3, 0, 8, true}}));
}

TEST_CASE("access runs: loads from one struct are a run until one loads into the base") {
    // mov 0x8(%rdi), %rax; mov 0x10(%rdi), %ecx; mov 0x18(%rdi), %rdi; mov 0x20(%rdi), %rdx; mov 0x28(%rdi), %rsi
    const auto runs = runs_of({{0x48, 0x8b, 0x47, 0x08},
                               {0x8b, 0x4f, 0x10},
                               {0x48, 0x8b, 0x7f, 0x18},
                               {0x48, 0x8b, 0x57, 0x20},
                               {0x48, 0x8b, 0x77, 0x28}});
    REQUIRE(runs.size() == 2);
    CHECK(same(runs[0], {{0, -16, 8, false}, {1, -8, 4, false}, {2, 0, 8, false}})); // the load into %rdi ends it
    CHECK(same(runs[1], {{3, -8, 8, false}, {4, 0, 8, false}}));                    // a new %rdi
}

TEST_CASE("access runs: another base, a non-member or a lone member ends a run, and single members are none") {
    // push %rbx; mov %rax, 0x8(%rdi); mov %rcx, 0x10(%rdi); xor %eax, %eax; push %rbp; push %r12; add %rax,(%rdi)
    const auto runs = runs_of({{0x53},
                               {0x48, 0x89, 0x47, 0x08},
                               {0x48, 0x89, 0x4f, 0x10},
                               {0x31, 0xc0},
                               {0x55},
                               {0x41, 0x54},
                               {0x48, 0x01, 0x07}});
    REQUIRE(runs.size() == 2);
    CHECK(same(runs[0], {{1, -8, 8, true}, {2, 0, 8, true}}));
    CHECK(same(runs[1], {{4, 8, 8, true}, {5, 0, 8, true}}));
    CHECK(runs_of({{0x53}, {0x31, 0xc0}, {0x55}}).empty());
    CHECK(runs_of({}).empty());
}

TEST_CASE("access runs: a long sequence is cut into runs of at most max_run_members") {
    std::vector<pmc_model::RunAccess> pushes(pmc_model::max_run_members * 2 + 1, decode({0x50}));
    const auto runs = pmc_model::find_access_runs(pushes);
    REQUIRE(runs.size() == 2); // 16, 16, then one alone: no run
    CHECK(runs[0].members.size() == pmc_model::max_run_members);
    CHECK(runs[1].members.front().index == pmc_model::max_run_members);
    CHECK(runs[1].members.front().offset == 8 * static_cast<std::int64_t>(pmc_model::max_run_members - 1));
}
