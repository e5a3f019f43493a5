// SPDX-License-Identifier: MIT
// Lua 5.4 seeds its string hashes (lstate.c, luai_makeseed) and math.random from time(NULL), and randomizes its
// sort's pivots (ltablib.c) with clock() and time(): table traversal order, and so the instructions a run takes,
// change every second. With --repeatable (the default), pmc-example-lua's own time() and clock() answer a fixed
// value; the statically linked Lua calls these rather than the C library's, so every run of a script does the
// same work. (The C library's declarations, matched here: glibc declares both noexcept in C++.)
#include <ctime>

extern "C" {
extern int pmc_example_lua_repeatable; // lua_host.cpp: set from the command line

time_t time(time_t* out) noexcept {
    timespec now{};
    if (pmc_example_lua_repeatable) now.tv_sec = 1700000000; // 2023-11-14
    else clock_gettime(CLOCK_REALTIME, &now);
    if (out) *out = now.tv_sec;
    return now.tv_sec;
}

clock_t clock() noexcept {
    timespec used{};
    if (!pmc_example_lua_repeatable) clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
    return static_cast<clock_t>(used.tv_sec * CLOCKS_PER_SEC + used.tv_nsec / (1000000000L / CLOCKS_PER_SEC));
}
}
