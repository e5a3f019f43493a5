// SPDX-License-Identifier: MIT
// The program break under pmc emulate, as glibc's malloc and programs calling sbrk use it: grown by 4 MiB a MiB at a
// time (each MiB written), malloc's small blocks and a 100,000-byte block realloc'd to 200,000 below the break (in
// the heap the break ends, not in mappings of their own), then given back. QEMU 8.1 and later, run without -B and
// without address randomization, left the break no room (pmc/detail/emulated.hpp, guest_base). A program of its
// own: code added to pmc-emulate-target moves the addresses other cases' counts follow.
#define _DEFAULT_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char _end[]; // the end of the program's .bss (GNU ld): the break starts at or above it

static int in_heap(const void* p) {
    return (const char*)p >= _end && (const char*)p < (const char*)sbrk(0);
}

int main(void) {
    const intptr_t mib = (intptr_t)1 << 20;
    free(malloc(1)); // malloc's heap first (and stdout's buffer): nothing below may grow the break meanwhile
    printf("break: ");
    char* const start = sbrk(0);
    for (int i = 0; i < 4; ++i) {
        errno = 0;
        void* got = sbrk(mib);
        if (got == (void*)-1) {
            printf("sbrk(1 MiB) failed after %d MiB at %p: %s\n", i, (void*)start, strerror(errno));
            return 1;
        }
        memset(got, 1, (size_t)mib);
    }
    char* const grown = sbrk(0);
    sbrk(-(grown - start));
    printf("grew by %td bytes\n", grown - start);
    void* small = malloc(64);
    void* block = malloc(100000);
    const int small_in_heap = in_heap(small), block_in_heap = in_heap(block);
    void* bigger = realloc(block, 200000);
    printf("break: malloc(64) %s, malloc(100000) %s, realloc to 200000 %s\n",
           small_in_heap ? "in the heap" : "NOT in the heap", block_in_heap ? "in the heap" : "NOT in the heap",
           bigger && in_heap(bigger) ? "in the heap" : "NOT in the heap");
    free(small);
    free(bigger);
    return 0;
}
