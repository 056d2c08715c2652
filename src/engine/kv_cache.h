/*
 * kv_cache.h - the paged KV cache: a pool of fixed-size blocks (pages) of
 * block_size positions each, in backend memory, with a reference count per
 * block so sequences can share a prompt prefix, and a prefix index so a new
 * sequence can pick up blocks another sequence already computed.
 *
 * The cache hands out and takes back blocks; which blocks a sequence uses (its
 * block table) is kept by the context. A block with ref > 1 is shared and is
 * copied (ob_kv_block_copy) before it is written.
 *
 * Prefix index: a full block is registered under a hash chained over every
 * token from the start of its sequence (so equal hashes mean equal prefixes),
 * and keeps its tokens to rule out collisions. When its last reference goes,
 * a registered block is not freed but parked in an LRU list: it can still be
 * found and reused, and it is evicted (least recently released first) only
 * when no free block is left.
 */
#ifndef OB_ENGINE_KV_CACHE_H
#define OB_ENGINE_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"

typedef struct ob_kv_cache {
    ob_backend *backend;
    ob_kv_store store;     /* what the backend's ops see */
    int64_t n_blocks;
    int32_t *ref;          /* [n_blocks] reference counts; 0 = free or parked */
    int32_t *free_stack;   /* [n_blocks] ids of free unregistered blocks, top at n_free-1 */
    int64_t n_free;
    /* prefix index */
    uint64_t *hash;        /* [n_blocks] chained hash of a registered block */
    bool *registered;      /* [n_blocks] */
    int32_t *tokens;       /* [n_blocks][block_size] tokens of a registered block */
    int32_t *bucket;       /* [n_buckets] first block of a hash bucket, -1 = empty */
    int32_t *bucket_next;  /* [n_blocks] next block in the same bucket */
    uint64_t bucket_mask;
    int32_t *lru_prev, *lru_next; /* [n_blocks] parked blocks, oldest at lru_head */
    int32_t lru_head, lru_tail;
    int64_t n_parked;
    uint64_t evictions;
} ob_kv_cache;

/* Allocate the pools: n_layer x 2 x n_blocks*block_size rows of kv_dim
 * elements of `type` (F32, F16 or Q8_0). */
int ob_kv_cache_init(ob_kv_cache *kv, ob_backend *b, ob_type type, int n_layer, int64_t kv_dim, int block_size,
                     int64_t n_blocks);
void ob_kv_cache_free(ob_kv_cache *kv);
/* Bytes of backend memory the pools take. */
uint64_t ob_kv_cache_bytes(const ob_kv_cache *kv);
/* Blocks an allocation can get: free plus parked (evictable) ones. */
static inline int64_t ob_kv_available(const ob_kv_cache *kv) { return kv->n_free + kv->n_parked; }

/* A block with ref = 1 (a free one, else the least recently parked one,
 * which leaves the index), or -1 when every block is in use. */
int32_t ob_kv_block_alloc(ob_kv_cache *kv);
/* Add a reference (a parked block leaves the LRU list). */
void ob_kv_block_retain(ob_kv_cache *kv, int32_t block);
/* Drop one reference; at zero the block is parked if registered, else freed. */
void ob_kv_block_release(ob_kv_cache *kv, int32_t block);
/* Copy every layer's K and V rows of block src into block dst. */
int ob_kv_block_copy(ob_kv_cache *kv, int32_t dst, int32_t src);

/* The chained hash of a block holding tokens[0..block_size) after a prefix
 * whose last block hashed to `parent` (0 for the first block). */
uint64_t ob_kv_hash(uint64_t parent, const int32_t *tokens, int block_size);
/* Register a full block under its hash (no-op when it or an identical block
 * already is). */
void ob_kv_register(ob_kv_cache *kv, int32_t block, uint64_t hash, const int32_t *tokens);
/* Remove a block from the index (before its contents change). */
void ob_kv_unregister(ob_kv_cache *kv, int32_t block);
/* A registered block with this hash and these tokens, or -1. */
int32_t ob_kv_lookup(const ob_kv_cache *kv, uint64_t hash, const int32_t *tokens);

#endif
