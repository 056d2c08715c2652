/*
 * kv_cache.h - the paged KV cache: a pool of fixed-size blocks (pages) of
 * block_size positions each, in backend memory, with a reference count per
 * block so sequences can share a prompt prefix.
 *
 * The cache only hands out and takes back blocks; which blocks a sequence
 * uses (its block table) is kept by the context. A block with ref > 1 is
 * shared and must be copied (ob_kv_block_copy) before it is written.
 */
#ifndef OB_ENGINE_KV_CACHE_H
#define OB_ENGINE_KV_CACHE_H

#include <stdint.h>

#include "../backend/backend.h"

typedef struct ob_kv_cache {
    ob_backend *backend;
    ob_kv_store store;     /* what the backend's ops see */
    int64_t n_blocks;
    int32_t *ref;          /* [n_blocks] reference counts; 0 = free */
    int32_t *free_stack;   /* [n_blocks] ids of free blocks, top at n_free-1 */
    int64_t n_free;
} ob_kv_cache;

/* Allocate the pools: n_layer x 2 x n_blocks*block_size rows of kv_dim
 * elements of `type` (F32, F16 or Q8_0). */
int ob_kv_cache_init(ob_kv_cache *kv, ob_backend *b, ob_type type, int n_layer, int64_t kv_dim, int block_size,
                     int64_t n_blocks);
void ob_kv_cache_free(ob_kv_cache *kv);
/* Bytes of backend memory the pools take. */
uint64_t ob_kv_cache_bytes(const ob_kv_cache *kv);

/* A free block with ref = 1, or -1 when the pool is exhausted. */
int32_t ob_kv_block_alloc(ob_kv_cache *kv);
void ob_kv_block_retain(ob_kv_cache *kv, int32_t block);
/* Drop one reference; the block is free again at zero. */
void ob_kv_block_release(ob_kv_cache *kv, int32_t block);
/* Copy every layer's K and V rows of block src into block dst. */
int ob_kv_block_copy(ob_kv_cache *kv, int32_t dst, int32_t src);

#endif
