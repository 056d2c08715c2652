/*
 * attention.cuh - the attention family: writing K/V rows into the paged
 * cache (F16, F32 or Q8_0 pools) and attention over it.
 */
#ifndef OB_CUDA_ATTENTION_CUH
#define OB_CUDA_ATTENTION_CUH

#include <limits.h>

#include "common.cuh"

/* A query token as the kernels see it: where its block table starts in the
 * packed tables, its position and window start, and its row in q and out. */
typedef struct attn_tok {
    int32_t table_off;
    int32_t pos;
    int32_t kv_start;
    int32_t row;
} attn_tok;

/* A tile of the tensor-core path: tokens t0 .. t0 + cnt - 1 of the token
 * array (consecutive positions of one sequence, at most 64), which together
 * see positions kv_lo .. kv_hi. */
typedef struct fa_tile {
    int32_t t0, cnt, kv_lo, kv_hi;
} fa_tile;

/* ALiBi slope of head h (as ob_alibi_slope in src/backend/backend.c). */
static __device__ __forceinline__ float attn_alibi_slope(int n_head, int h, float max_bias) {
    int p = 1;
    while (p * 2 <= n_head) p *= 2;
    if (h < p) return powf(2.0f, -max_bias / (float)p * (float)(h + 1));
    return powf(2.0f, -max_bias / (float)(2 * p) * (float)(2 * (h - p) + 1));
}

int cuda_op_kv_write(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *k, const ob_tensor *v,
                     const int32_t *slots);
int cuda_op_attention(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_token *toks,
                      const ob_attn_params *p, ob_tensor *out);

/* attention_mma.cu: whether the tensor-core prompt kernel takes this cache
 * (F16, head dimension 64 or 128, not batch-invariant mode, enabled), and
 * its launch over n_tiles tiles (toks, tables, tiles: device memory). */
bool cuda_attn_mma_usable(const cuda_backend *c, ob_type kv_type, int head_dim, size_t row_bytes);
int cuda_attention_mma(cuda_backend *c, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_params *p,
                       ob_tensor *out, const attn_tok *toks, const int32_t *tables, const fa_tile *tiles,
                       int n_tiles);

#endif
