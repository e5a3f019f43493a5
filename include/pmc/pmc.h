/* SPDX-License-Identifier: MIT */
/* pmc/pmc.h: pmc's C API (C11, also usable from C++), for C programs and for other languages' FFIs.
 *
 *     pmc_profiler* prof = pmc_profiler_from_env(NULL);   // PMC_PROFILE=out.pmcprof turns it on; NULL: off
 *     pmc_label parse = pmc_profiler_label(prof, "parse"); // interned once; events store its id
 *     pmc_profiler_begin(prof, parse, 0);                  // begin and end may sit in different functions
 *     ...                                                  // (hooks, callbacks), on the same thread
 *     pmc_profiler_end(prof, parse);
 *     pmc_profiler_close(prof);                            // writes what is buffered; then `pmc summarize`
 *
 *     pmc_counter* c = pmc_counter_open("page-faults");    // NULL on failure: pmc_last_error() says why
 *     uint64_t before, after;
 *     pmc_counter_read(c, &before); ...; pmc_counter_read(c, &after);
 *     pmc_counter_close(c);
 *
 * Link with pmc::c (CMake: find_package(pmc COMPONENTS c)) or `pkg-config --cflags --libs pmc-c`. The library is
 * pmc's C++ profiler and counters (pmc/profiler.hpp, pmc/counter.hpp) behind this interface: what they record and
 * how is theirs, and their docs apply (docs/profiling.md).
 *
 * Errors: a function that fails returns NULL (handles), 0 (labels) or an errno value (int results), and leaves a
 * message on the calling thread, pmc_last_error(): what failed, why, and the fix. No C++ exception ever leaves
 * this interface. Every function accepts a NULL handle: a NULL profiler is an off profiler (events cost a call and
 * a branch), a NULL counter reads as an error (EINVAL).
 *
 * Threads: a profiler may be used from any thread (each thread records into its own buffer); begin and end of
 * one interval must be on the same thread. A counter counts the thread that opened it and is read on that thread.
 */
#ifndef PMC_PMC_H
#define PMC_PMC_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define PMC_C_API __attribute__((visibility("default")))
#else
#define PMC_C_API
#endif
#if defined(__cplusplus)
#define PMC_C_NOEXCEPT noexcept /* no C++ exception leaves this interface */
#else
#define PMC_C_NOEXCEPT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ------------------------------------------------------------------------------------------------ */

/** The message of the last failure on this thread ("" if none yet): what failed, why, and the fix. Valid until
 *  the next failing pmc call on this thread. Successful calls leave it as it is. */
PMC_C_API const char* pmc_last_error(void) PMC_C_NOEXCEPT;
/** The errno-style code of the last failure on this thread (0 if none yet). */
PMC_C_API int pmc_last_errno(void) PMC_C_NOEXCEPT;
/** pmc's version, "MAJOR.MINOR.PATCH". */
PMC_C_API const char* pmc_version(void) PMC_C_NOEXCEPT;

/* ---- Counters ---------------------------------------------------------------------------------------------- */

/** An open counter (pmc::Counter): one event, counting the thread that opened it. */
typedef struct pmc_counter pmc_counter;

/** Opens `event` (an event string: "instructions:u", "page-faults", "wall-time", "r01c2", see docs/events.md) on
 *  the calling thread. NULL on failure, with the reason in pmc_last_error() (a misspelt event, a kernel that
 *  refuses perf_event_open: each says its fix). */
PMC_C_API pmc_counter* pmc_counter_open(const char* event) PMC_C_NOEXCEPT;
/** Reads the counter's running value into *value (a few instructions on the rdpmc path). 0 on success; an errno
 *  value on failure (*value is then 0), with the reason in pmc_last_error(). */
PMC_C_API int pmc_counter_read(pmc_counter* counter, uint64_t* value) PMC_C_NOEXCEPT;
/** The event string as opened ("" for NULL). Valid while the counter is open. */
PMC_C_API const char* pmc_counter_event(const pmc_counter* counter) PMC_C_NOEXCEPT;
/** How the counter is read and what it counts (its notes, "; "-separated; "" if none or NULL). Valid while the
 *  counter is open. */
PMC_C_API const char* pmc_counter_notes(const pmc_counter* counter) PMC_C_NOEXCEPT;
/** Closes the counter (NULL: nothing). */
PMC_C_API void pmc_counter_close(pmc_counter* counter) PMC_C_NOEXCEPT;

/* ---- The profiler ------------------------------------------------------------------------------------------ */

/** A profiler (pmc::Profiler): records labelled intervals, instants and integers on every thread into one file. */
typedef struct pmc_profiler pmc_profiler;

/** An interned string: a label or an argument. 0 means none. */
typedef uint32_t pmc_label;

/** How to build a profiler. Fill it with pmc_profiler_options_init(&options, sizeof options) first, then change what
 *  you need. `size` is how large the caller's struct is: fields may be added at the end in later versions, and the
 *  library reads and writes only the fields that fit in `size`, so a program (or an FFI's copy of this struct)
 *  built against an older pmc.h keeps working with a newer library. */
typedef struct pmc_profiler_options {
    size_t size;                    /**< sizeof the caller's struct: set by pmc_profiler_options_init */
    const char* path;               /**< the profile file (created or truncated; "%p": the process id); required by
                                         pmc_profiler_open */
    const char* counters;           /**< comma-separated event strings, the primary first; NULL or "": wall-time */
    size_t page_bytes;              /**< per thread: memory held and what a SIGKILL can lose (default 64 KiB) */
    size_t preallocate_bytes;       /**< file blocks reserved ahead in chunks of this size; 0: off (default 8 MiB) */
    int flush_on_fatal_signals;     /**< nonzero: write what is buffered on SIGSEGV, SIGTERM... (default 1) */
    int measure_cost;               /**< nonzero: measure what one interval adds to its parent (default 1) */
    int strict;                     /**< nonzero: pmc_profiler_from_env replaces nothing (see there; default 0) */
} pmc_profiler_options;

/** Sets every field of the caller's struct of `size` bytes (sizeof it) to its default, path NULL, and `size`. */
PMC_C_API void pmc_profiler_options_init(pmc_profiler_options* options, size_t size) PMC_C_NOEXCEPT;

/** PMC_PROFILE=PATH turns profiling on (PMC_PROFILE_COUNTERS chooses the counters), as pmc::Profiler::from_env:
 *  NULL when it is off. Nothing here stops the program: a counter that cannot be opened is replaced by wall-time,
 *  a file that cannot be created leaves the profiler off, each said on stderr. `defaults` may be NULL.
 *  Strict mode (PMC_PROFILE_STRICT=1, or defaults->strict), for CI: nothing is replaced or turned off; a failure is
 *  said on stderr and ends the program with SIGABRT, as the uncaught pmc::error does in C++, so that the job's exit
 *  status shows it. A program that handles the failure itself uses pmc_profiler_open, which never ends it. */
PMC_C_API pmc_profiler* pmc_profiler_from_env(const pmc_profiler_options* defaults) PMC_C_NOEXCEPT;
/** A profiler writing to options->path with exactly the counters asked for. NULL on failure (a counter that cannot
 *  be opened, a file that cannot be created or that another live process is writing), with the reason in
 *  pmc_last_error(). */
PMC_C_API pmc_profiler* pmc_profiler_open(const pmc_profiler_options* options) PMC_C_NOEXCEPT;
/** Writes every thread's buffered events and closes the file (NULL: nothing). Call it after the threads that
 *  record have finished recording. */
PMC_C_API void pmc_profiler_close(pmc_profiler* profiler) PMC_C_NOEXCEPT;
/** 1 if `profiler` records (non-NULL and on), else 0. */
PMC_C_API int pmc_profiler_enabled(const pmc_profiler* profiler) PMC_C_NOEXCEPT;

/** Interns a NUL-terminated name (a lock and a lookup: once per name, not per event). 0 when off, or on failure
 *  (too many labels), with the reason in pmc_last_error(). */
PMC_C_API pmc_label pmc_profiler_label(pmc_profiler* profiler, const char* name) PMC_C_NOEXCEPT;
/** The same for `length` bytes at `name` (need not be NUL-terminated). */
PMC_C_API pmc_label pmc_profiler_label_n(pmc_profiler* profiler, const char* name, size_t length) PMC_C_NOEXCEPT;

/** Begins an interval labelled `label` (with an optional argument, 0 for none) on this thread. */
PMC_C_API void pmc_profiler_begin(pmc_profiler* profiler, pmc_label label, pmc_label arg) PMC_C_NOEXCEPT;
/** Ends this thread's innermost open interval, which must be labelled `label`. 0 on success; EINVAL if the
 *  innermost open interval has another label or none is open: nothing is ended, the profile records the mismatch as
 *  a nesting error (the tools report it, exit status 2), and pmc_last_error() names both labels. A NULL profiler:
 *  0, nothing checked. */
PMC_C_API int pmc_profiler_end(pmc_profiler* profiler, pmc_label label) PMC_C_NOEXCEPT;
/** Intervals open on this thread (0 when off or before the thread's first event). Taken where an error path will
 *  return to (a setjmp, Lua's pcall), and given to pmc_profiler_end_to there. */
PMC_C_API uint32_t pmc_profiler_depth(pmc_profiler* profiler) PMC_C_NOEXCEPT;
/** Ends every interval open on this thread above `depth`, innermost first, at one reading now: what the ends an
 *  error path skipped (a longjmp past the return hooks) would have recorded. Nothing when the depth is not above. */
PMC_C_API void pmc_profiler_end_to(pmc_profiler* profiler, uint32_t depth) PMC_C_NOEXCEPT;

/** An instant event: the primary counter's reading now. */
PMC_C_API void pmc_profiler_instant(pmc_profiler* profiler, pmc_label label, pmc_label arg) PMC_C_NOEXCEPT;
/** An integer event (a size, a count): `value` with the primary counter's reading now. */
PMC_C_API void pmc_profiler_integer(pmc_profiler* profiler, pmc_label label, uint64_t value, pmc_label arg) PMC_C_NOEXCEPT;
/** Names the calling thread in the profile. */
PMC_C_API void pmc_profiler_thread_name(pmc_profiler* profiler, const char* name) PMC_C_NOEXCEPT;
/** Writes this thread's buffered events now (a system call). */
PMC_C_API void pmc_profiler_flush(pmc_profiler* profiler) PMC_C_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PMC_PMC_H */
