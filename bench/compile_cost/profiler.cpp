// SPDX-License-Identifier: MIT
// What #include <pmc/profiler.hpp> costs a user's file: a profiler from the environment and one scope.
#include <pmc/profiler.hpp>

void profile_work(void (*work)()) {
    auto prof = pmc::Profiler::from_env();
    auto s = prof.scope(prof.label("work"));
    work();
}
