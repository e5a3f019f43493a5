/* SPDX-License-Identifier: MIT */
/* The C API (pmc/pmc.h) from a C11 program, compiled with -std=c11 -Wall -Wextra -Wpedantic -Werror.
 *
 *     pmc-test-c-api PROFILE   checks the errors and counters, then records PROFILE: on two threads, a nested
 *                              profile through begin/end called from hook functions (enter/leave, as an
 *                              interpreter's call hook would), with instants, integers and thread names; then
 *                              an end that does not match (into a scratch profile, removed).
 *
 * Exit 0 when every check holds (ctest then runs `pmc summarize PROFILE` and checks the labels and counts), 1 with
 * a FAILED line per failed check, 77 ("SKIPPED: ...", which ctest reports as skipped) when every other check held
 * but the kernel refuses perf_event_open for the page-fault counter. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <pmc/pmc.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int skipped = 0; /* a check whose precondition this machine lacks */

static void expect(int ok, const char* what) {
    printf("%s %s\n", ok ? "ok:    " : "FAILED:", what);
    if (!ok) ++failures;
}

static int contains(const char* text, const char* part) { return text && strstr(text, part) != NULL; }

/* Scratch profiles are named after the main one (PROFILE.what): two runs at once in one directory (the shared and
 * the static build under ctest -j) never share a file. */
static const char* profile_path;
static const char* scratch(const char* what) {
    static char names[8][512];
    static int next = 0;
    char* name = names[next++ % 8];
    snprintf(name, sizeof names[0], "%s.%s", profile_path, what);
    return name;
}

/* ---- errors and NULL handles ---- */

static void check_errors(void) {
    pmc_counter* bad = pmc_counter_open("instrutions");
    expect(bad == NULL, "pmc_counter_open(\"instrutions\") fails");
    expect(contains(pmc_last_error(), "instrutions"), "... and pmc_last_error() names the event");
    printf("        pmc_last_error(): %s\n", pmc_last_error());
    expect(pmc_last_errno() == EINVAL || pmc_last_errno() == ENOENT, "... and pmc_last_errno() is EINVAL or ENOENT");

    expect(pmc_counter_open("cycles;instructions") == NULL, "pmc_counter_open(\"cycles;instructions\") fails");
    expect(pmc_counter_open(NULL) == NULL && contains(pmc_last_error(), "NULL"), "pmc_counter_open(NULL) fails, saying so");

    uint64_t v = 12345;
    expect(pmc_counter_read(NULL, &v) == EINVAL && v == 0, "pmc_counter_read(NULL) returns EINVAL and sets 0");
    expect(contains(pmc_last_error(), "NULL"), "... and says the counter is NULL");
    expect(strcmp(pmc_counter_event(NULL), "") == 0 && strcmp(pmc_counter_notes(NULL), "") == 0,
           "pmc_counter_event(NULL) and pmc_counter_notes(NULL) are \"\"");
    pmc_counter_close(NULL);

    /* A NULL profiler is an off profiler: every call is safe and records nothing. */
    expect(pmc_profiler_enabled(NULL) == 0, "pmc_profiler_enabled(NULL) is 0");
    expect(pmc_profiler_label(NULL, "x") == 0, "pmc_profiler_label(NULL, ...) is 0");
    pmc_profiler_begin(NULL, 1, 0);
    expect(pmc_profiler_end(NULL, 1) == 0, "pmc_profiler_end(NULL, ...) is 0 (off: nothing to check)");
    pmc_profiler_instant(NULL, 1, 0);
    pmc_profiler_integer(NULL, 1, 42, 0);
    pmc_profiler_thread_name(NULL, "t");
    pmc_profiler_flush(NULL);
    pmc_profiler_close(NULL);
    pmc_profiler_options_init(NULL, 0);

    pmc_profiler_options o;
    pmc_profiler_options_init(&o, sizeof o);
    expect(o.size == sizeof o && o.path == NULL && o.page_bytes == 64 * 1024 && o.flush_on_fatal_signals == 1 &&
               o.strict == 0,
           "pmc_profiler_options_init sets the size and the defaults");
    expect(pmc_profiler_open(NULL) == NULL && contains(pmc_last_error(), "path"), "pmc_profiler_open(NULL) fails, saying so");
    expect(pmc_profiler_open(&o) == NULL && contains(pmc_last_error(), "options.path"),
           "pmc_profiler_open without a path fails, saying which field");
    o.path = "/nonexistent-pmc-dir/x.pmcprof";
    o.measure_cost = 0;
    expect(pmc_profiler_open(&o) == NULL && contains(pmc_last_error(), "/nonexistent-pmc-dir/x.pmcprof"),
           "pmc_profiler_open into a missing directory fails, naming the file");
    printf("        pmc_last_error(): %s\n", pmc_last_error());
    o.path = scratch("bad-counter");
    o.counters = "wall-time,instrutions";
    expect(pmc_profiler_open(&o) == NULL && contains(pmc_last_error(), "instrutions"),
           "pmc_profiler_open with a misspelt counter fails, naming it");
    remove(scratch("bad-counter"));
}

/* The options' size: a caller built against an older, shorter struct (here: without `strict`) has only its own
 * fields written and read; a size too small for any field is refused. */
static void check_options_size(void) {
    union {
        pmc_profiler_options o;
        unsigned char bytes[sizeof(pmc_profiler_options)];
    } old;
    memset(old.bytes, 0xAB, sizeof old.bytes);
    const size_t old_size = offsetof(pmc_profiler_options, strict);
    pmc_profiler_options_init(&old.o, old_size);
    int untouched = 1;
    for (size_t i = old_size; i < sizeof old.bytes; ++i) untouched &= old.bytes[i] == 0xAB;
    expect(old.o.size == old_size && old.o.measure_cost == 1 && untouched,
           "pmc_profiler_options_init with an older, smaller size writes nothing past it");
    old.o.path = scratch("old-options");
    old.o.measure_cost = 0;
    pmc_profiler* p = pmc_profiler_open(&old.o);
    expect(p != NULL, "... and pmc_profiler_open takes it (the missing field at its default)");
    pmc_profiler_close(p);
    remove(scratch("old-options"));

    pmc_profiler_options tiny;
    pmc_profiler_options_init(&tiny, sizeof tiny);
    tiny.path = scratch("tiny");
    tiny.size = sizeof(size_t);
    expect(pmc_profiler_open(&tiny) == NULL && contains(pmc_last_error(), "pmc_profiler_options_init"),
           "options whose size holds no field are refused, naming the fix");
}

/* Strict mode (PMC_PROFILE_STRICT=1): a counter that cannot be opened ends the program (SIGABRT), said on stderr,
 * instead of a silent change of unit. In a child process. */
static void check_strict(void) {
    fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
        setenv("PMC_PROFILE", scratch("strict"), 1);
        setenv("PMC_PROFILE_COUNTERS", "instrutions", 1);
        setenv("PMC_PROFILE_STRICT", "1", 1);
        pmc_profiler* p = pmc_profiler_from_env(NULL);
        pmc_profiler_close(p);
        _exit(0); /* not reached if strict mode works */
    }
    int status = 0;
    expect(child > 0 && waitpid(child, &status, 0) == child && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
           "strict mode: pmc_profiler_from_env with a misspelt counter ends the program with SIGABRT");
    remove(scratch("strict"));
}

/* ---- counters ---- */

static void check_counters(void) {
    pmc_counter* wall = pmc_counter_open("wall-time");
    expect(wall != NULL, "pmc_counter_open(\"wall-time\") opens");
    if (!wall) {
        printf("        %s\n", pmc_last_error());
        return;
    }
    expect(strcmp(pmc_counter_event(wall), "wall-time") == 0, "pmc_counter_event() is the event string");
    uint64_t a = 0, b = 0;
    expect(pmc_counter_read(wall, &a) == 0 && pmc_counter_read(wall, &b) == 0 && b >= a, "wall-time reads, and advances");
    pmc_counter_close(wall);

    pmc_counter* faults = pmc_counter_open("page-faults");
    if (!faults) {
        const int e = pmc_last_errno();
        if (e == EACCES || e == EPERM || e == ENOSYS) {
            printf("        page-faults: this machine refuses perf_event_open: %s\n", pmc_last_error());
            skipped = 1;
            return;
        }
        expect(0, "pmc_counter_open(\"page-faults\") opens");
        printf("        %s\n", pmc_last_error());
        return;
    }
    enum { pages = 64 };
    const size_t bytes = (size_t)pages * 4096u; /* above malloc's mmap threshold: fresh pages */
    uint64_t before = 0, after = 0;
    expect(pmc_counter_read(faults, &before) == 0, "page-faults reads");
    unsigned char* mem = malloc(bytes);
    volatile unsigned char* p = mem; /* every write happens */
    if (p) {
        for (size_t i = 0; i < bytes; i += 4096u) p[i] = 1;
    }
    expect(pmc_counter_read(faults, &after) == 0, "page-faults reads again");
    free(mem);
    printf("        touching %d fresh pages: %llu page faults (%s)\n", pages, (unsigned long long)(after - before),
           pmc_counter_notes(faults));
    expect(p != NULL && after - before >= pages, "page-faults counted at least one fault per page touched");
    pmc_counter_close(faults);
}

/* A counter counts the thread that opened it: a read from another thread is an error with its reason. */
static void* read_elsewhere(void* counter) {
    uint64_t v = 1;
    const int rc = pmc_counter_read((pmc_counter*)counter, &v);
    expect(rc == EPERM && v == 0 && contains(pmc_last_error(), "thread"),
           "reading a counter on another thread than its opener's returns EPERM, saying why");
    printf("        pmc_last_error(): %.120s...\n", pmc_last_error());
    return NULL;
}

static void check_other_thread(void) {
    pmc_counter* faults = pmc_counter_open("page-faults");
    if (!faults) return; /* said by check_counters */
    pthread_t t;
    if (pthread_create(&t, NULL, read_elsewhere, faults) == 0) pthread_join(t, NULL);
    uint64_t v = 0;
    expect(pmc_counter_read(faults, &v) == 0, "... and the opener's own reads still work");
    pmc_counter_close(faults);
}

/* pmc_profiler_from_env: PMC_PROFILE unset, set, and naming a file that cannot be created. */
static void check_from_env(const char* path) {
    unsetenv("PMC_PROFILE");
    expect(pmc_profiler_from_env(NULL) == NULL, "pmc_profiler_from_env without PMC_PROFILE is NULL (off)");
    setenv("PMC_PROFILE", "/nonexistent-pmc-dir/env.pmcprof", 1);
    expect(pmc_profiler_from_env(NULL) == NULL,
           "pmc_profiler_from_env with a file that cannot be created is NULL (off; said on stderr)");
    setenv("PMC_PROFILE", path, 1);
    setenv("PMC_PROFILE_COUNTERS", "wall-time", 1);
    pmc_profiler_options defaults;
    pmc_profiler_options_init(&defaults, sizeof defaults);
    defaults.measure_cost = 0;
    pmc_profiler* p = pmc_profiler_from_env(&defaults);
    expect(p != NULL && pmc_profiler_enabled(p) == 1, "pmc_profiler_from_env with PMC_PROFILE is on");
    const pmc_label l = pmc_profiler_label(p, "from-env");
    pmc_profiler_begin(p, l, 0);
    expect(pmc_profiler_end(p, l) == 0, "... and records");
    pmc_profiler_close(p);
    unsetenv("PMC_PROFILE");
    unsetenv("PMC_PROFILE_COUNTERS");
    FILE* f = fopen(path, "rb");
    expect(f != NULL, "... into the file PMC_PROFILE names");
    if (f) fclose(f);
    remove(path);
}

/* ---- the profiler: hooks that begin in one function and end in another ---- */

static pmc_profiler* prof;
static pmc_label l_run, l_parse, l_typecheck, l_infer, l_codegen, l_cache_hit, l_ir_bytes;

static void on_enter(pmc_label label, pmc_label arg) { pmc_profiler_begin(prof, label, arg); }
static int on_leave(pmc_label label) { return pmc_profiler_end(prof, label); }

enum { functions_per_thread = 50, infers_per_function = 3 };

static void* worker(void* arg) {
    const int index = *(const int*)arg;
    char name[32];
    snprintf(name, sizeof name, "c worker %d", index);
    pmc_profiler_thread_name(prof, name);
    int bad = 0;
    on_enter(l_run, 0);
    for (int f = 0; f < functions_per_thread; ++f) {
        char fn[32];
        snprintf(fn, sizeof fn, "fn_%d_%d", index, f);
        const pmc_label arg_fn = pmc_profiler_label(prof, fn);
        on_enter(l_parse, arg_fn);
        bad |= on_leave(l_parse);
        on_enter(l_typecheck, arg_fn);
        for (int i = 0; i < infers_per_function; ++i) {
            on_enter(l_infer, arg_fn);
            if (i > 0) pmc_profiler_instant(prof, l_cache_hit, arg_fn);
            bad |= on_leave(l_infer);
        }
        bad |= on_leave(l_typecheck);
        on_enter(l_codegen, arg_fn);
        pmc_profiler_integer(prof, l_ir_bytes, (uint64_t)(100 + f), arg_fn);
        bad |= on_leave(l_codegen);
    }
    bad |= on_leave(l_run);
    return bad ? (void*)1 : NULL;
}

static void record(const char* path) {
    pmc_profiler_options o;
    pmc_profiler_options_init(&o, sizeof o);
    o.path = path;
    o.counters = "wall-time";
    prof = pmc_profiler_open(&o);
    expect(prof != NULL && pmc_profiler_enabled(prof) == 1, "pmc_profiler_open writes the profile");
    if (!prof) {
        printf("        %s\n", pmc_last_error());
        return;
    }
    l_run = pmc_profiler_label(prof, "run");
    l_parse = pmc_profiler_label(prof, "parse");
    l_typecheck = pmc_profiler_label(prof, "typecheck");
    l_infer = pmc_profiler_label(prof, "infer");
    l_codegen = pmc_profiler_label(prof, "codegen");
    l_cache_hit = pmc_profiler_label(prof, "cache-hit");
    l_ir_bytes = pmc_profiler_label_n(prof, "ir-bytes and more", 8);
    expect(l_run != 0 && l_ir_bytes != 0 && l_run != l_parse, "labels are interned (nonzero, distinct)");
    expect(pmc_profiler_label(prof, "parse") == l_parse, "interning a name twice gives the same label");
    expect(pmc_profiler_label_n(prof, "ir-bytes", 8) == l_ir_bytes, "pmc_profiler_label_n takes the given length");

    pthread_t threads[2];
    int index[2] = {0, 1};
    for (int t = 0; t < 2; ++t)
        if (pthread_create(&threads[t], NULL, worker, &index[t]) != 0) expect(0, "pthread_create");
    for (int t = 0; t < 2; ++t) {
        void* result = NULL;
        pthread_join(threads[t], &result);
        expect(result == NULL, "every begin on a worker thread was ended by a matching end");
    }
    pmc_profiler_flush(prof);
    pmc_profiler_close(prof);
    prof = NULL;
}

/* Nesting is checked: an end that does not match the innermost open interval is refused and said (into a profile
 * of its own: the mismatch is recorded in it as a nesting error, which the tools report). */
static void check_nesting(const char* path) {
    pmc_profiler_options o;
    pmc_profiler_options_init(&o, sizeof o);
    o.path = path;
    o.measure_cost = 0;
    prof = pmc_profiler_open(&o);
    expect(prof != NULL, "a second profiler opens");
    if (!prof) return;
    l_parse = pmc_profiler_label(prof, "parse");
    l_codegen = pmc_profiler_label(prof, "codegen");
    pmc_profiler_begin(prof, l_parse, 0);
    expect(pmc_profiler_end(prof, l_codegen) == EINVAL, "ending 'codegen' while 'parse' is open returns EINVAL");
    expect(contains(pmc_last_error(), "codegen") && contains(pmc_last_error(), "parse"),
           "... and pmc_last_error() names both labels");
    printf("        pmc_last_error(): %s\n", pmc_last_error());
    expect(pmc_profiler_end(prof, l_parse) == 0, "... and the right end still ends it");
    expect(pmc_profiler_end(prof, l_parse) == EINVAL && contains(pmc_last_error(), "no interval is open"),
           "an end with nothing open returns EINVAL, saying so");
    pmc_profiler_close(prof);
    prof = NULL;
    remove(path);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: pmc-test-c-api PROFILE\n");
        return 2;
    }
    profile_path = argv[1];
    printf("pmc %s through pmc/pmc.h\n", pmc_version());
    check_errors();
    check_options_size();
    check_strict();
    check_counters();
    check_other_thread();
    check_from_env(scratch("env"));
    record(argv[1]);
    check_nesting(scratch("nesting"));
    if (failures) {
        printf("c api: %d CHECKS FAILED\n", failures);
        return 1;
    }
    if (skipped) {
        printf("SKIPPED: every other check passed, but this machine refuses perf_event_open for page-faults\n");
        return 77;
    }
    printf("c api: all checks passed; profile written to %s\n", argv[1]);
    return 0;
}
