/*
 * kv_cache.c - block pool with reference counts, prefix index and LRU
 * eviction of parked blocks.
 */
#include "kv_cache.h"

#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"

int ob_kv_cache_init(ob_kv_cache *kv, ob_backend *b, ob_type type, int n_layer, int64_t kv_dim, int block_size,
                     int64_t n_blocks) {
    memset(kv, 0, sizeof *kv);
    kv->backend = b;
    const ob_type_traits *tr = ob_type_get((int)type);
    if (type != OB_TYPE_F32 && type != OB_TYPE_F16 && type != OB_TYPE_Q8_0)
        return ob_err(OB_ERR_UNSUPPORTED, "KV cache type %s (f32, f16 or q8_0)", tr ? tr->name : "?");
    if (kv_dim % tr->block_size)
        return ob_err(OB_ERR_UNSUPPORTED, "KV cache type %s needs rows that are a multiple of %lld (this model has %lld)",
                      tr->name, (long long)tr->block_size, (long long)kv_dim);
    if (block_size <= 0 || n_blocks <= 0 || n_blocks > INT32_MAX / block_size)
        return ob_err(OB_ERR_INVALID_ARG, "KV cache of %lld blocks of %d", (long long)n_blocks, block_size);
    ob_kv_store *s = &kv->store;
    s->type = type;
    s->n_layer = n_layer;
    s->kv_dim = kv_dim;
    s->block_size = block_size;
    s->n_slots = n_blocks * block_size;
    s->row_bytes = ob_row_size(type, kv_dim);
    kv->n_blocks = n_blocks;
    uint64_t n_buckets = 16;
    while (n_buckets < (uint64_t)n_blocks * 2) n_buckets <<= 1;
    kv->bucket_mask = n_buckets - 1;
    s->k = ob_calloc((size_t)n_layer, sizeof(void *));
    s->v = ob_calloc((size_t)n_layer, sizeof(void *));
    kv->ref = ob_calloc((size_t)n_blocks, sizeof(int32_t));
    kv->free_stack = ob_calloc((size_t)n_blocks, sizeof(int32_t));
    kv->hash = ob_calloc((size_t)n_blocks, sizeof(uint64_t));
    kv->registered = ob_calloc((size_t)n_blocks, sizeof(bool));
    kv->tokens = ob_calloc(ob_mul_size((size_t)n_blocks, (size_t)block_size), sizeof(int32_t));
    kv->bucket = ob_malloc((size_t)n_buckets * sizeof(int32_t));
    kv->bucket_next = ob_calloc((size_t)n_blocks, sizeof(int32_t));
    kv->lru_prev = ob_calloc((size_t)n_blocks, sizeof(int32_t));
    kv->lru_next = ob_calloc((size_t)n_blocks, sizeof(int32_t));
    if (!s->k || !s->v || !kv->ref || !kv->free_stack || !kv->hash || !kv->registered || !kv->tokens || !kv->bucket ||
        !kv->bucket_next || !kv->lru_prev || !kv->lru_next) {
        ob_kv_cache_free(kv);
        return ob_err(OB_ERR_OOM, "KV cache tables");
    }
    for (uint64_t i = 0; i < n_buckets; i++) kv->bucket[i] = -1;
    kv->lru_head = kv->lru_tail = -1;
    size_t pool = ob_mul_size((size_t)s->n_slots, s->row_bytes);
    for (int il = 0; il < n_layer; il++) {
        int rc = b->ops->alloc(b, pool, &s->k[il]);
        if (rc == 0) rc = b->ops->alloc(b, pool, &s->v[il]);
        if (rc < 0) {
            ob_kv_cache_free(kv);
            return ob_err_wrap(rc, "KV cache (%d layers x 2 x %zu bytes)", n_layer, pool);
        }
    }
    /* Hand out low block ids first. */
    for (int64_t i = 0; i < n_blocks; i++) kv->free_stack[i] = (int32_t)(n_blocks - 1 - i);
    kv->n_free = n_blocks;
    return 0;
}

void ob_kv_cache_free(ob_kv_cache *kv) {
    ob_kv_store *s = &kv->store;
    for (int il = 0; il < s->n_layer; il++) {
        if (s->k && s->k[il]) kv->backend->ops->release(kv->backend, s->k[il]);
        if (s->v && s->v[il]) kv->backend->ops->release(kv->backend, s->v[il]);
    }
    ob_free(s->k);
    ob_free(s->v);
    ob_free(kv->ref);
    ob_free(kv->free_stack);
    ob_free(kv->hash);
    ob_free(kv->registered);
    ob_free(kv->tokens);
    ob_free(kv->bucket);
    ob_free(kv->bucket_next);
    ob_free(kv->lru_prev);
    ob_free(kv->lru_next);
    memset(kv, 0, sizeof *kv);
}

uint64_t ob_kv_cache_bytes(const ob_kv_cache *kv) {
    return 2ull * (uint64_t)kv->store.n_layer * (uint64_t)kv->store.n_slots * kv->store.row_bytes;
}

/* ---- LRU of parked blocks ---- */

static void lru_remove(ob_kv_cache *kv, int32_t b) {
    int32_t p = kv->lru_prev[b], n = kv->lru_next[b];
    if (p >= 0) kv->lru_next[p] = n;
    else kv->lru_head = n;
    if (n >= 0) kv->lru_prev[n] = p;
    else kv->lru_tail = p;
    kv->n_parked--;
}

static void lru_push(ob_kv_cache *kv, int32_t b) {
    kv->lru_prev[b] = kv->lru_tail;
    kv->lru_next[b] = -1;
    if (kv->lru_tail >= 0) kv->lru_next[kv->lru_tail] = b;
    else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_parked++;
}

/* ---- prefix index ---- */

uint64_t ob_kv_hash(uint64_t parent, const int32_t *tokens, int block_size) {
    /* FNV-1a over the parent hash and the tokens, then a final mix; 0 is
     * reserved for "no parent". */
    uint64_t h = 1469598103934665603ull ^ parent;
    for (int i = 0; i < block_size; i++) {
        uint32_t t = (uint32_t)tokens[i];
        for (int k = 0; k < 4; k++) h = (h ^ ((t >> (8 * k)) & 0xFF)) * 1099511628211ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h ? h : 1;
}

int32_t ob_kv_lookup(const ob_kv_cache *kv, uint64_t hash, const int32_t *tokens) {
    const int bs = kv->store.block_size;
    for (int32_t b = kv->bucket[hash & kv->bucket_mask]; b >= 0; b = kv->bucket_next[b])
        if (kv->hash[b] == hash && memcmp(kv->tokens + (size_t)b * bs, tokens, (size_t)bs * sizeof(int32_t)) == 0)
            return b;
    return -1;
}

void ob_kv_register(ob_kv_cache *kv, int32_t b, uint64_t hash, const int32_t *tokens) {
    if (kv->registered[b] || ob_kv_lookup(kv, hash, tokens) >= 0) return;
    const int bs = kv->store.block_size;
    memcpy(kv->tokens + (size_t)b * bs, tokens, (size_t)bs * sizeof(int32_t));
    kv->hash[b] = hash;
    kv->registered[b] = true;
    uint64_t i = hash & kv->bucket_mask;
    kv->bucket_next[b] = kv->bucket[i];
    kv->bucket[i] = b;
}

void ob_kv_unregister(ob_kv_cache *kv, int32_t b) {
    if (!kv->registered[b]) return;
    int32_t *link = &kv->bucket[kv->hash[b] & kv->bucket_mask];
    while (*link != b) {
        OB_ASSERT(*link >= 0);
        link = &kv->bucket_next[*link];
    }
    *link = kv->bucket_next[b];
    kv->registered[b] = false;
}

/* ---- blocks ---- */

int32_t ob_kv_block_alloc(ob_kv_cache *kv) {
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_stack[--kv->n_free];
    } else if (kv->lru_head >= 0) {
        b = kv->lru_head; /* evict the least recently parked block */
        lru_remove(kv, b);
        ob_kv_unregister(kv, b);
        kv->evictions++;
    } else {
        return -1;
    }
    OB_ASSERT(kv->ref[b] == 0);
    kv->ref[b] = 1;
    return b;
}

void ob_kv_block_retain(ob_kv_cache *kv, int32_t b) {
    OB_ASSERT(b >= 0 && b < kv->n_blocks);
    if (kv->ref[b] == 0) {
        OB_ASSERT(kv->registered[b]); /* only parked blocks are found with no reference */
        lru_remove(kv, b);
    }
    kv->ref[b]++;
}

void ob_kv_block_release(ob_kv_cache *kv, int32_t b) {
    OB_ASSERT(b >= 0 && b < kv->n_blocks && kv->ref[b] > 0);
    if (--kv->ref[b] > 0) return;
    if (kv->registered[b])
        lru_push(kv, b);
    else
        kv->free_stack[kv->n_free++] = b;
}

int ob_kv_block_copy(ob_kv_cache *kv, int32_t dst, int32_t src) {
    const ob_kv_store *s = &kv->store;
    size_t bytes = (size_t)s->block_size * s->row_bytes;
    for (int il = 0; il < s->n_layer; il++) {
        OB_TRY(kv->backend->ops->copy(kv->backend, (char *)s->k[il] + (size_t)dst * bytes,
                                      (char *)s->k[il] + (size_t)src * bytes, bytes));
        OB_TRY(kv->backend->ops->copy(kv->backend, (char *)s->v[il] + (size_t)dst * bytes,
                                      (char *)s->v[il] + (size_t)src * bytes, bytes));
    }
    return 0;
}
