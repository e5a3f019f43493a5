// SPDX-License-Identifier: MIT
// Writes the profile fuzz target's seeds (tests/fuzz/corpus-profile): synthetic profiles in the real format
// (tests/support/profile_builder.hpp), whole, cut, with a page gone, and one written by the profiler itself.
// Usage: pmc-fuzz-profile-seeds DIR   (run again when the format changes; the seeds are checked in)
#include "profile_builder.hpp"

#include <pmc/profiler.hpp>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: pmc-fuzz-profile-seeds DIR\n");
        return 1;
    }
    const std::string dir = argv[1];
    auto put = [&](const std::string& name, const std::vector<unsigned char>& b) {
        std::FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
        if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
            std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
            std::exit(1);
        }
    };
    pmc_test::ProfileBuilder b({pmc_test::exact_counter(), pmc_test::time_counter()});
    b.page_records = 3;
    for (std::uint32_t i = 0; i < 2; ++i) {
        auto& t = b.thread(i);
        t.scope("main", 2, [&] {
            t.scope("parse", 3, [&] { t.scope("lex", 1); });
            t.scope("parse", 3);
            t.instant("hit");
            t.integer("size", 1234567);
            t.scope("recurse", 1, [&] { t.scope("recurse", 1, [&] { t.scope("recurse", 1); }); });
        });
    }
    const auto whole = b.bytes();
    put("whole-two-threads", whole);
    put("cut-half", std::vector<unsigned char>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2)));
    b.end_record = false;
    put("killed-no-end", b.bytes());
    pmc_test::ProfileBuilder one;
    one.thread(0).scope("only", 7);
    put("one-scope", one.bytes());
    const std::string real = dir + "/real-profiler";
    {
        pmc::ProfilerOptions o{real, {"wall-time"}};
        o.measure_cost = false;
        pmc::Profiler prof{o};
        const auto a = prof.label("a"), c = prof.label("c");
        prof.begin(a);
        for (int i = 0; i < 20; ++i) auto s = prof.scope(c, a);
        prof.end(c); // a nesting error
        prof.end(a);
    }
    // Own-work marks (integer records under the header's tag 12) inside scopes: page writes, flushes, a label.
    const std::string marks = dir + "/real-own-work";
    {
        pmc::ProfilerOptions o{marks, {"wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096;
        pmc::Profiler prof{o};
        const auto outer = prof.label("outer"), inner = prof.label("inner");
        auto s = prof.scope(outer);
        for (int i = 0; i < 400; ++i) {
            auto t = prof.scope(inner);
            if (i % 100 == 0) prof.flush();
        }
        (void)prof.label("late");
    }
    // Many strings packed into strings pages (the writer before that gave each string its own page: the checked-in
    // real-profiler and real-own-work were written so), interned while a second thread records.
    const std::string packed = dir + "/real-packed-strings";
    {
        pmc::ProfilerOptions o{packed, {"wall-time"}};
        o.measure_cost = false;
        o.page_bytes = 4096;
        pmc::Profiler prof{o};
        std::vector<pmc::Label> labels;
        for (int i = 0; i < 300; ++i) labels.push_back(prof.label("fn_" + std::to_string(i)));
        std::thread other([&] {
            for (int i = 0; i < 600; ++i) auto s = prof.scope(labels[static_cast<std::size_t>(i % 300)]);
        });
        for (int i = 0; i < 300; ++i) {
            auto s = prof.scope(labels[static_cast<std::size_t>(i)], prof.label("arg " + std::to_string(i % 7)));
        }
        other.join();
    }
    pmc_test::ProfileBuilder em; // the emulator's field (tag 13)
    em.emulator = "QEMU 10.0.2, plugin API 2";
    em.thread(0).scope("only", 7);
    put("emulated-one-scope", em.bytes());
    return 0;
}
