/*
 * mem.c - allocation wrappers with fault injection.
 */
#include "mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long g_fail_at;  /* 0: off; else fail when count reaches it */
static atomic_long g_count;

void ob_mem_fail_after(long n) {
    atomic_store(&g_fail_at, n > 0 ? atomic_load(&g_count) + n : 0);
}

long ob_mem_alloc_count(void) { return atomic_load(&g_count); }

static int should_fail(void) {
    long c = atomic_fetch_add(&g_count, 1) + 1;
    long f = atomic_load(&g_fail_at);
    return f != 0 && c == f;
}

void *ob_malloc(size_t n) {
    if (should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *ob_calloc(size_t count, size_t size) {
    if (ob_mul_size(count, size) == (size_t)-1) return NULL;
    if (should_fail()) return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *ob_realloc(void *p, size_t n) {
    if (should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void ob_free(void *p) { free(p); }

char *ob_strndup(const char *s, size_t n) {
    char *d = ob_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *ob_strdup(const char *s) { return ob_strndup(s, strlen(s)); }

void *ob_malloc_aligned(size_t n, size_t align) {
    if (should_fail()) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : 1) != 0) return NULL;
    return p;
}

void ob_free_aligned(void *p) { free(p); }
