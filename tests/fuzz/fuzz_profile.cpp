// SPDX-License-Identifier: MIT
// libFuzzer target for the profile readers: every input is a whole .pmcprof file, read by pmc::parse_profile (in
// memory) and by pmc::ProfileReader (from a memfd, through /proc/self/fd), whose nesting walk and event stream are
// then run over it.
//
// Invariants (a violation is reported on stderr and then __builtin_trap()s, which libFuzzer records as a crash):
//   both readers accept or refuse the same inputs, with the same problems in the same words and the same bytes lost;
//   bytes read plus bytes lost never exceed the input; the stream gives as many events as parse_profile kept; the
//   walk's self values add up to its outermost totals (modulo 2^64); a profile with no problem has an end record.
//
// Built two ways (tests/fuzz/CMakeLists.txt): with -fsanitize=fuzzer for scripts/fuzz --target profile, and with
// replay_main.cpp for the corpus replay that runs in every build (ctest -R fuzz-profile-corpus-replay).
#include <pmc/profile_format.hpp>
#include <pmc/profile_reader.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace {

[[noreturn]] void violated(const char* what) {
    std::fprintf(stderr, "pmc fuzz_profile: invariant violated: %s\n", what);
    __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto p = pmc::parse_profile(data, size);
    const int fd = ::memfd_create("pmc-fuzz-profile", MFD_CLOEXEC);
    if (fd < 0) return 0;
    for (std::size_t at = 0; at < size;) {
        const ssize_t n = ::write(fd, data + at, size - at);
        if (n <= 0) {
            ::close(fd);
            return 0;
        }
        at += static_cast<std::size_t>(n);
    }
    auto r = pmc::ProfileReader::open("/proc/self/fd/" + std::to_string(fd));
    ::close(fd); // the reader has its own descriptor
    if (p.ok() != r.ok()) violated("one reader accepted what the other refused");
    if (!p) return 0;
    const pmc::Profile& a = *p;
    const pmc::Profile& b = r->profile();
    if (a.problems != b.problems) violated("the readers' problems differ");
    if (a.bytes_lost != b.bytes_lost || a.bytes_read != b.bytes_read) violated("the readers' byte counts differ");
    if (a.bytes_read + a.bytes_lost > size) violated("more bytes read and lost than the input has");
    if (a.problems.empty() && !a.has_end) violated("no problem said, but no end record");
    std::uint64_t kept = 0;
    for (const auto& t : a.threads) kept += t.records.size() + t.own_work.size(); // (the stream has both)
    std::uint64_t streamed = 0;
    if (r->for_each_event([&](const pmc::ProfileEvent&) { ++streamed; })) violated("the stream failed on a memfd");
    if (streamed != kept) violated("the stream and parse_profile kept different records");
    std::uint64_t self = 0, outer = 0;
    if (r->walk(
            [&](const pmc::NestedInterval& s) {
                self += static_cast<std::uint64_t>(s.self());
                if (s.parent == pmc::no_parent) outer += s.total();
            },
            [](const pmc::NestedMark&) {}))
        violated("the walk failed on a memfd");
    if (self != outer) violated("self values do not add up to the outermost totals");
    return 0;
}
