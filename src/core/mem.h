/*
 * mem.h - every allocation of the library goes through these, so tests can
 * make the N-th allocation fail and check that the failure becomes a clean
 * OB_ERR_OOM rather than a crash.
 */
#ifndef OB_CORE_MEM_H
#define OB_CORE_MEM_H

#include <stddef.h>

void *ob_malloc(size_t n);
void *ob_calloc(size_t count, size_t size); /* overflow-checked */
void *ob_realloc(void *p, size_t n);
void ob_free(void *p);
char *ob_strdup(const char *s);
char *ob_strndup(const char *s, size_t n);
/* Aligned allocation (align a power of two >= sizeof(void*)); free with ob_free_aligned. */
void *ob_malloc_aligned(size_t n, size_t align);
void ob_free_aligned(void *p);

/* Fault injection for tests: the n-th allocation from now fails (n >= 1);
 * 0 turns it off. Counts per process, not per thread. */
void ob_mem_fail_after(long n);
/* Number of allocations made so far (for test loops over every failure point). */
long ob_mem_alloc_count(void);

/* a * b, or SIZE_MAX when it overflows (callers treat SIZE_MAX as "too big"). */
static inline size_t ob_mul_size(size_t a, size_t b) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return (size_t)-1;
    return r;
}

#endif
