/*
 * kv_cache.c - block pool with reference counts.
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
    s->k = ob_calloc((size_t)n_layer, sizeof(void *));
    s->v = ob_calloc((size_t)n_layer, sizeof(void *));
    kv->ref = ob_calloc((size_t)n_blocks, sizeof(int32_t));
    kv->free_stack = ob_calloc((size_t)n_blocks, sizeof(int32_t));
    if (!s->k || !s->v || !kv->ref || !kv->free_stack) {
        ob_kv_cache_free(kv);
        return ob_err(OB_ERR_OOM, "KV cache tables");
    }
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
    memset(kv, 0, sizeof *kv);
}

uint64_t ob_kv_cache_bytes(const ob_kv_cache *kv) {
    return 2ull * (uint64_t)kv->store.n_layer * (uint64_t)kv->store.n_slots * kv->store.row_bytes;
}

int32_t ob_kv_block_alloc(ob_kv_cache *kv) {
    if (kv->n_free == 0) return -1;
    int32_t b = kv->free_stack[--kv->n_free];
    OB_ASSERT(kv->ref[b] == 0);
    kv->ref[b] = 1;
    return b;
}

void ob_kv_block_retain(ob_kv_cache *kv, int32_t b) {
    OB_ASSERT(b >= 0 && b < kv->n_blocks && kv->ref[b] > 0);
    kv->ref[b]++;
}

void ob_kv_block_release(ob_kv_cache *kv, int32_t b) {
    OB_ASSERT(b >= 0 && b < kv->n_blocks && kv->ref[b] > 0);
    if (--kv->ref[b] == 0) kv->free_stack[kv->n_free++] = b;
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
