/* SPDX-License-Identifier: MIT */
/* A C program as a user of pmc's C API writes it: a counter, and a short profile (argv[1]) with a nested interval.
 * Built by tests/consumer against an install, through find_package(pmc COMPONENTS c) and through pkg-config.
 * Exit 0 when every check holds, 1 otherwise (each failed check printed). */
#include <pmc/pmc.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int ok, const char* what) {
    printf("%s %s\n", ok ? "ok:    " : "FAILED:", what);
    if (!ok) ++failures;
}

int main(int argc, char** argv) {
    printf("pmc %s C consumer\n", pmc_version());
    expect(pmc_counter_open("instrutions") == NULL && strstr(pmc_last_error(), "instrutions") != NULL,
           "a misspelt event fails, and pmc_last_error() names it");
    pmc_counter* wall = pmc_counter_open("wall-time");
    uint64_t a = 0, b = 0;
    expect(wall != NULL && pmc_counter_read(wall, &a) == 0 && pmc_counter_read(wall, &b) == 0 && b >= a,
           "a wall-time counter opens and reads");
    pmc_counter_close(wall);

    pmc_profiler_options o;
    pmc_profiler_options_init(&o, sizeof o);
    o.path = argc > 1 ? argv[1] : "c-consumer.pmcprof";
    o.measure_cost = 0;
    pmc_profiler* prof = pmc_profiler_open(&o);
    expect(prof != NULL, "a profiler opens");
    if (!prof) printf("        %s\n", pmc_last_error());
    const pmc_label outer = pmc_profiler_label(prof, "outer"), inner = pmc_profiler_label(prof, "inner");
    pmc_profiler_begin(prof, outer, 0);
    pmc_profiler_begin(prof, inner, 0);
    expect(pmc_profiler_end(prof, inner) == 0 && pmc_profiler_end(prof, outer) == 0, "begin/end nest");
    pmc_profiler_close(prof);
    if (failures) {
        printf("consumer: SOME CHECKS FAILED\n");
        return 1;
    }
    printf("consumer: all checks passed\n");
    return 0;
}
