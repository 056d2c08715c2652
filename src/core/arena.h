/*
 * arena.h - bump allocator for objects that share one lifetime (parsed
 * metadata of a file, one step's activations).
 *
 * Memory comes in chunks from ob_malloc; allocations are never freed one by
 * one, only all at once (ob_arena_reset / ob_arena_free) or back to a mark.
 * With a non-zero `limit` the arena refuses to grow past it, which is how a
 * worst-case reserve pass sizes activation memory once.
 */
#ifndef OB_CORE_ARENA_H
#define OB_CORE_ARENA_H

#include <stddef.h>

typedef struct ob_arena_chunk ob_arena_chunk;

typedef struct ob_arena {
    ob_arena_chunk *head;   /* newest chunk first */
    size_t chunk_size;      /* default size of a new chunk */
    size_t limit;           /* 0 = unbounded; else max total bytes of chunks */
    size_t total;           /* bytes in all chunks */
    size_t used;            /* bytes handed out (including alignment padding) */
} ob_arena;

typedef struct ob_arena_mark {
    ob_arena_chunk *chunk;
    size_t off;
    size_t used;
} ob_arena_mark;

/* chunk_size 0 picks 64 KiB. */
void ob_arena_init(ob_arena *a, size_t chunk_size, size_t limit);
void ob_arena_free(ob_arena *a);
/* NULL when out of memory or over the limit; `align` a power of two (0 = 16). */
void *ob_arena_alloc(ob_arena *a, size_t n, size_t align);
void *ob_arena_calloc(ob_arena *a, size_t count, size_t size);
char *ob_arena_strndup(ob_arena *a, const char *s, size_t n);
/* Keep the chunks, forget every allocation. */
void ob_arena_reset(ob_arena *a);
ob_arena_mark ob_arena_get_mark(const ob_arena *a);
/* Free everything allocated after the mark (later chunks are released). */
void ob_arena_rewind(ob_arena *a, ob_arena_mark m);

#endif
