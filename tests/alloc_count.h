/*
 * alloc_count.h — the bytes a suite's own code holds in large blocks, for
 * tests that bound the memory a step takes: by the allocations themselves,
 * not the process's resident size, so other work and the kernel's paging do
 * not move the figure.
 *
 * A suite is counted when it is linked with the allocator's functions
 * wrapped (ALLOC_WRAP in the Makefile: malloc, calloc, realloc, free,
 * posix_memalign, aligned_alloc go through alloc_count.c's __wrap_
 * functions). Only blocks of at least AC_LARGE bytes are counted, by their
 * address and requested size: memory that a shared library allocates
 * (jansson, libc's strdup) and this code frees is unknown to the count and
 * leaves it as it is. Counting is thread-safe. A suite that calls these
 * functions must be linked with the wrap (its link fails otherwise:
 * __real_malloc is the linker's).
 */
#ifndef TESTS_ALLOC_COUNT_H
#define TESTS_ALLOC_COUNT_H

#include <stddef.h>

#define AC_LARGE ((size_t)64 << 10)

/* Bytes held now in counted blocks. */
size_t ac_current(void);

/* The most held at once since the last ac_reset_peak. */
size_t ac_peak(void);

/* Starts a new peak from what is held now. */
void ac_reset_peak(void);

#endif
