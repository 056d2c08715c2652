/*
 * arena.c - chunked bump allocator.
 */
#include "arena.h"

#include <stdint.h>
#include <string.h>

#include "mem.h"

struct ob_arena_chunk {
    ob_arena_chunk *next;
    size_t size;  /* usable bytes after the header */
    size_t off;   /* next free byte */
    _Alignas(64) unsigned char data[];
};

void ob_arena_init(ob_arena *a, size_t chunk_size, size_t limit) {
    memset(a, 0, sizeof *a);
    a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
    a->limit = limit;
}

void ob_arena_free(ob_arena *a) {
    ob_arena_chunk *c = a->head;
    while (c) {
        ob_arena_chunk *n = c->next;
        ob_free(c);
        c = n;
    }
    a->head = NULL;
    a->total = a->used = 0;
}

void *ob_arena_alloc(ob_arena *a, size_t n, size_t align) {
    if (align == 0) align = 16;
    if (align & (align - 1)) return NULL;
    ob_arena_chunk *c = a->head;
    if (c) {
        uintptr_t base = (uintptr_t)c->data;
        size_t off = (size_t)(((base + c->off + align - 1) & ~(uintptr_t)(align - 1)) - base);
        if (off <= c->size && n <= c->size - off) {
            a->used += off - c->off + n;
            c->off = off + n;
            return c->data + off;
        }
    }
    /* New chunk big enough for n plus worst-case alignment padding. */
    if (n > SIZE_MAX / 2 - align) return NULL;
    size_t need = n + align;
    size_t size = need > a->chunk_size ? need : a->chunk_size;
    if (a->limit && (a->total > a->limit || size > a->limit - a->total)) return NULL;
    c = ob_malloc(sizeof *c + size);
    if (!c) return NULL;
    c->size = size;
    c->off = 0;
    c->next = a->head;
    a->head = c;
    a->total += size;
    uintptr_t base = (uintptr_t)c->data;
    size_t off = (size_t)(((base + align - 1) & ~(uintptr_t)(align - 1)) - base);
    c->off = off + n;
    a->used += off + n;
    return c->data + off;
}

void *ob_arena_calloc(ob_arena *a, size_t count, size_t size) {
    size_t n = ob_mul_size(count, size);
    if (n == (size_t)-1) return NULL;
    void *p = ob_arena_alloc(a, n, 0);
    if (p) memset(p, 0, n);
    return p;
}

char *ob_arena_strndup(ob_arena *a, const char *s, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *d = ob_arena_alloc(a, n + 1, 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void ob_arena_reset(ob_arena *a) {
    /* Keep only the largest chunk: allocation only ever bumps the head. */
    ob_arena_chunk *keep = NULL;
    for (ob_arena_chunk *c = a->head; c; c = c->next)
        if (!keep || c->size > keep->size) keep = c;
    ob_arena_chunk *c = a->head;
    while (c) {
        ob_arena_chunk *n = c->next;
        if (c != keep) ob_free(c);
        c = n;
    }
    a->head = keep;
    a->total = keep ? keep->size : 0;
    if (keep) {
        keep->next = NULL;
        keep->off = 0;
    }
    a->used = 0;
}

ob_arena_mark ob_arena_get_mark(const ob_arena *a) {
    ob_arena_mark m = {a->head, a->head ? a->head->off : 0, a->used};
    return m;
}

void ob_arena_rewind(ob_arena *a, ob_arena_mark m) {
    while (a->head && a->head != m.chunk) {
        ob_arena_chunk *n = a->head->next;
        a->total -= a->head->size;
        ob_free(a->head);
        a->head = n;
    }
    if (a->head) a->head->off = m.off;
    a->used = m.used;
}
