// SPDX-License-Identifier: MIT
// pmc-capi-workers: three worker threads recording at once through the C API (pmc/pmc.h), sharing nothing but the
// profiler, as a server's request handlers would: the shape that made runs of a threaded program differ when the
// recorder's own cost depended on other threads (a contended lock inside an interval) or on the values recorded.
//
//   pmc-capi-workers [--plant N] [--requests N]
//
// Each worker names itself (worker-1..3), interns its labels inside its first request (all three at once: the
// label lock is contended), and records REQUESTS requests: request > job > eval, with instant and integer events.
// The work in 'eval' grows with the request's number, so its values cross varint lengths as the run goes on.
// --plant N adds exactly 2 x N instructions to every 'eval' (and nothing anywhere else). PMC_PROFILE turns the
// profiler on (pmc_profiler_from_env). Exit status 0, or 1 with the reason.
#include <pmc/pmc.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmc_profiler* prof;
static uint64_t plant;
static unsigned requests = 200;

// Exactly 2 x n instructions (n >= 1) and the same call around it for every n (as tests/support/known_loop.hpp).
__attribute__((noinline)) static void known_loop(uint64_t n) {
#if defined(__x86_64__)
    __asm__ volatile("1:\n\tdec %0\n\tjnz 1b" : "+r"(n) : : "cc");
#elif defined(__aarch64__)
    __asm__ volatile("1:\n\tsubs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
#else
#error "pmc-capi-workers needs a known instruction loop for this architecture"
#endif
}

static void* worker(void* arg) {
    const unsigned id = (unsigned)(uintptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "worker-%u", id);
    pmc_profiler_thread_name(prof, name);
    const pmc_label request = pmc_profiler_label(prof, "request");
    pmc_label job = 0, eval = 0, hit = 0, size = 0;
    for (unsigned r = 0; r < requests; ++r) {
        pmc_profiler_begin(prof, request, 0);
        if (r == 0) { // interned inside an interval, by the three workers at once
            job = pmc_profiler_label(prof, "job");
            eval = pmc_profiler_label(prof, "eval");
            hit = pmc_profiler_label(prof, "cache-hit");
            size = pmc_profiler_label(prof, "reply-size");
        }
        known_loop(100 + id);
        pmc_profiler_begin(prof, job, 0);
        known_loop(50);
        pmc_profiler_begin(prof, eval, 0);
        known_loop(1 + 64u * r + plant); // from 1-byte to 3-byte varints over the run
        if (pmc_profiler_end(prof, eval) != 0) return (void*)1;
        if (r % 7 == 0) pmc_profiler_instant(prof, hit, 0);
        if (pmc_profiler_end(prof, job) != 0) return (void*)1;
        pmc_profiler_integer(prof, size, 1000u * r, 0);
        if (pmc_profiler_end(prof, request) != 0) return (void*)1;
    }
    return NULL;
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("usage: pmc-capi-workers [--plant N] [--requests N]\n\n"
                   "Three worker threads recording request > job > eval at once through pmc's C API (PMC_PROFILE\n"
                   "turns the profiler on). --plant N adds exactly 2 x N instructions to every 'eval'.\n");
            return 0;
        }
        if (i + 1 < argc && (strcmp(argv[i], "--plant") == 0 || strcmp(argv[i], "--requests") == 0)) {
            char* end = NULL;
            const unsigned long long v = strtoull(argv[i + 1], &end, 10);
            if (!*argv[i + 1] || *end) {
                fprintf(stderr, "pmc-capi-workers: %s needs a whole number, not '%s'\n", argv[i], argv[i + 1]);
                return 1;
            }
            if (argv[i][2] == 'p') plant = v;
            else requests = (unsigned)v;
            ++i;
            continue;
        }
        fprintf(stderr, "pmc-capi-workers: unknown argument '%s'\nRun 'pmc-capi-workers --help' for usage.\n", argv[i]);
        return 1;
    }
    prof = pmc_profiler_from_env(NULL); // NULL: off (no PMC_PROFILE); every call then does nothing
    pthread_t threads[3];
    for (unsigned i = 0; i < 3; ++i)
        if (pthread_create(&threads[i], NULL, worker, (void*)(uintptr_t)(i + 1)) != 0) {
            fprintf(stderr, "pmc-capi-workers: cannot start a thread\n");
            return 1;
        }
    int failed = 0;
    for (unsigned i = 0; i < 3; ++i) {
        void* status = NULL;
        pthread_join(threads[i], &status);
        failed |= status != NULL;
    }
    pmc_profiler_close(prof);
    if (failed) fprintf(stderr, "pmc-capi-workers: an end did not match its begin: %s\n", pmc_last_error());
    return failed;
}
