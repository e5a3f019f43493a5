// SPDX-License-Identifier: MIT
// pmc-signal-target: what the signal tests run, natively and under pmc emulate, count and sample.
//
//   pmc-signal-target RESULTS READY [--read-terminal]
//
// Counts the calls of its handler for SIGINT, SIGTERM, SIGHUP and SIGQUIT, in itself and in a grandchild it forks
// (the command's second process). Once both run, it creates READY. With --read-terminal it first reads a line from
// standard input (a terminal in the test) and writes "read: LINE" to standard output. At the first signal each
// process waits 300 ms for a second one, appends "program|grandchild SIGNAL CALLS" to RESULTS, then dies of that
// signal with its default action. Without a signal it exits 3 after 60 s, so that nothing runs on.
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t calls = 0;
static volatile sig_atomic_t first = 0;

// (QEMU 7.2 starts handlers on a stack 8 bytes off the ABI's alignment.)
__attribute__((force_align_arg_pointer)) static void counted(int sig) {
    if (first == 0) first = sig;
    calls = calls + 1;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void nap(void) {
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static int run(const char* role, const char* results) {
    const double start = now();
    while (first == 0) {
        if (now() - start > 60) return 3;
        nap();
    }
    const double hit = now();
    while (now() - hit < 0.3) nap();
    char line[128];
    const int n = snprintf(line, sizeof line, "%s %d %d\n", role, (int)first, (int)calls);
    const int fd = open(results, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) != n) return 4;
        close(fd);
    }
    const int sig = first;
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 5; // (not reached)
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pmc-signal-target RESULTS READY [--read-terminal]\n");
        return 2;
    }
    const struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); // SIGQUIT's default action dumps no core here
    if (argc > 3 && strcmp(argv[3], "--read-terminal") == 0) {
        char line[256];
        if (!fgets(line, sizeof line, stdin)) {
            perror("pmc-signal-target: reading the terminal");
            return 6;
        }
        printf("read: %s", line);
        fflush(stdout);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = counted;
    sigemptyset(&sa.sa_mask);
    const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (int i = 0; i < 4; ++i) sigaction(handled[i], &sa, NULL);
    const pid_t grandchild = fork();
    if (grandchild == 0) return run("grandchild", argv[1]);
    const int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
    return run("program", argv[1]);
}
