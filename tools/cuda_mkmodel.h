/*
 * cuda_mkmodel.h - write a random-weight Llama-architecture GGUF of any
 * shape and weight type with the project's GGUF writer and reference
 * quantizers. Used by tools/cuda_bench.c (decode speed on real shapes) and
 * by the CUDA tests (a small file for the CLI checks). Header-only: static
 * functions, include it once per program.
 *
 * Speed does not depend on the weights' values, and the reference
 * quantizers are slow (the K-quant scale searches), so a pool of 1M
 * Gaussian values is quantized once per type and every tensor is filled by
 * repeating the pool's blocks from a tensor-specific offset. Tensors of the
 * same shape and type share one buffer in memory (the writer copies each
 * to the file); on the device they are separate allocations, so nothing is
 * shared there. Values: N(0, 1/sqrt(rows)) for matrices, 1 +- 0.1 for norm
 * weights. A minimal SentencePiece-style vocabulary (unk, bos, eos, 256
 * byte tokens, then placeholders) makes the file loadable by the tokenizer.
 */
#ifndef OB_TOOLS_CUDA_MKMODEL_H
#define OB_TOOLS_CUDA_MKMODEL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

typedef struct mk_spec {
    const char *name;
    int64_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim; /* head_dim 0: n_embd / n_head */
    int64_t n_ctx;
    float rope_base;
    ob_type wtype;     /* attention and FFN matrices */
    ob_type embd_type; /* token_embd (and the output when tied) */
    ob_type out_type;  /* output.weight when not tied */
    bool tied;
    uint64_t seed;
} mk_spec;

static uint64_t mk_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float mk_normal(uint64_t *s) {
    double u1 = ((double)(mk_rand(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(mk_rand(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#define MK_POOL (1 << 20) /* elements, a multiple of every block size */

typedef struct mk_buf {
    ob_type type;
    int64_t ne0, ne1;
    void *data;
} mk_buf;

typedef struct mk_state {
    mk_spec s;
    uint64_t rng;
    void *pool[OB_TYPE_COUNT]; /* quantized pool per type */
    mk_buf bufs[16];
    int n_bufs;
} mk_state;

/* A buffer of `type` [ne0 x ne1] filled from the type's quantized pool. */
static void *mk_matrix(mk_state *st, ob_type type, int64_t ne0, int64_t ne1) {
    for (int i = 0; i < st->n_bufs; i++)
        if (st->bufs[i].type == type && st->bufs[i].ne0 == ne0 && st->bufs[i].ne1 == ne1) return st->bufs[i].data;
    if (st->n_bufs == (int)(sizeof st->bufs / sizeof st->bufs[0])) return NULL;
    const ob_type_traits *tr = ob_type_get((int)type);
    if (!tr || !tr->from_float_ref || ne0 % tr->block_size) return NULL;
    if (!st->pool[type]) {
        float *f = malloc((size_t)MK_POOL * sizeof(float));
        st->pool[type] = malloc(ob_row_size(type, MK_POOL));
        if (!f || !st->pool[type]) {
            free(f);
            return NULL;
        }
        for (int64_t i = 0; i < MK_POOL; i++) f[i] = mk_normal(&st->rng);
        tr->from_float_ref(f, st->pool[type], MK_POOL);
        free(f);
    }
    const size_t bsz = tr->type_size;
    const int64_t pool_blocks = MK_POOL / tr->block_size, blocks = ne0 / tr->block_size * ne1;
    uint8_t *d = malloc((size_t)blocks * bsz);
    if (!d) return NULL;
    const int64_t off = (int64_t)(mk_rand(&st->rng) % (uint64_t)pool_blocks);
    for (int64_t b = 0; b < blocks;) {
        int64_t src = (b + off) % pool_blocks, run = pool_blocks - src;
        if (run > blocks - b) run = blocks - b;
        memcpy(d + (size_t)b * bsz, (const uint8_t *)st->pool[type] + (size_t)src * bsz, (size_t)run * bsz);
        b += run;
    }
    /* Float types: scale to N(0, 1/sqrt(ne0)) so activations stay O(1). Quantized blocks carry
     * their own scale factors; their values only matter for the tests, which use float types. */
    if (type == OB_TYPE_F32) {
        float *p = (float *)d, sc = 1.0f / sqrtf((float)ne0);
        for (int64_t i = 0; i < ne0 * ne1; i++) p[i] *= sc;
    }
    mk_buf *nb = &st->bufs[st->n_bufs++];
    nb->type = type;
    nb->ne0 = ne0;
    nb->ne1 = ne1;
    nb->data = d;
    return d;
}

static int mk_add(ob_gguf_writer *w, mk_state *st, const char *name, ob_type type, int64_t ne0, int64_t ne1) {
    void *d = mk_matrix(st, type, ne0, ne1);
    if (!d) return ob_err(OB_ERR_OOM, "mkmodel: tensor %s (%s %lld x %lld)", name, ob_type_name(type),
                          (long long)ne0, (long long)ne1);
    int64_t ne[2] = {ne0, ne1};
    return ob_gguf_writer_add_tensor(w, name, type, ne1 == 1 ? 1 : 2, ne, d);
}

/* Write the model to `path`. Returns 0 or a negative ob_status. */
static int mk_model_write(const mk_spec *spec, const char *path) {
    mk_state *st = calloc(1, sizeof *st);
    if (!st) return ob_err(OB_ERR_OOM, "mkmodel");
    st->s = *spec;
    st->rng = spec->seed ? spec->seed : 1;
    const mk_spec *s = &st->s;
    const int64_t hd = s->head_dim ? s->head_dim : s->n_embd / s->n_head;
    const int64_t E = s->n_embd, Q = s->n_head * hd, KV = s->n_head_kv * hd, F = s->n_ff;
    ob_gguf_writer *w = NULL;
    int rc = ob_gguf_writer_create(&w);
    char **toks = NULL;
    float *scores = NULL, *norm = NULL;
    int32_t *types = NULL;
    if (rc == 0) {
        rc = ob_gguf_writer_set_str(w, "general.architecture", "llama");
        if (rc == 0) rc = ob_gguf_writer_set_str(w, "general.name", s->name ? s->name : "random llama");
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.context_length", (uint32_t)s->n_ctx);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)E);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)s->n_layer);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)F);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)s->n_head);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)s->n_head_kv);
        if (rc == 0 && s->head_dim) rc = ob_gguf_writer_set_u32(w, "llama.attention.key_length", (uint32_t)hd);
        if (rc == 0 && s->head_dim) rc = ob_gguf_writer_set_u32(w, "llama.attention.value_length", (uint32_t)hd);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)hd);
        if (rc == 0) rc = ob_gguf_writer_set_f32(w, "llama.rope.freq_base", s->rope_base > 0 ? s->rope_base : 10000.0f);
        if (rc == 0) rc = ob_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)s->n_vocab);
    }
    /* vocabulary */
    if (rc == 0) {
        toks = calloc((size_t)s->n_vocab, sizeof *toks);
        scores = calloc((size_t)s->n_vocab, sizeof *scores);
        types = calloc((size_t)s->n_vocab, sizeof *types);
        if (!toks || !scores || !types) rc = ob_err(OB_ERR_OOM, "mkmodel vocabulary");
        for (int64_t i = 0; rc == 0 && i < s->n_vocab; i++) {
            char b[32];
            if (i == 0) snprintf(b, sizeof b, "<unk>"), types[i] = 2;
            else if (i == 1) snprintf(b, sizeof b, "<s>"), types[i] = 3;
            else if (i == 2) snprintf(b, sizeof b, "</s>"), types[i] = 3;
            else if (i < 3 + 256) snprintf(b, sizeof b, "<0x%02X>", (unsigned)(i - 3)), types[i] = 6;
            else snprintf(b, sizeof b, "\xe2\x96\x81t%lld", (long long)i), types[i] = 1;
            scores[i] = -(float)i;
            toks[i] = strdup(b);
            if (!toks[i]) rc = ob_err(OB_ERR_OOM, "mkmodel vocabulary");
        }
        if (rc == 0) rc = ob_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
        if (rc == 0) rc = ob_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)s->n_vocab);
        if (rc == 0) rc = ob_gguf_writer_set_arr(w, "tokenizer.ggml.scores", OB_GGUF_F32, scores, (uint64_t)s->n_vocab);
        if (rc == 0) rc = ob_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", OB_GGUF_I32, types, (uint64_t)s->n_vocab);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    }
    /* tensors */
    norm = malloc((size_t)(E > F ? E : F) * sizeof(float));
    if (rc == 0 && !norm) rc = ob_err(OB_ERR_OOM, "mkmodel");
    for (int64_t i = 0; rc == 0 && i < (E > F ? E : F); i++) norm[i] = 1.0f + 0.1f * mk_normal(&st->rng);
    int64_t ne1[1] = {E};
    if (rc == 0) rc = mk_add(w, st, "token_embd.weight", s->embd_type, E, s->n_vocab);
    if (rc == 0) rc = ob_gguf_writer_add_tensor(w, "output_norm.weight", OB_TYPE_F32, 1, ne1, norm);
    if (rc == 0 && !s->tied) rc = mk_add(w, st, "output.weight", s->out_type, E, s->n_vocab);
    char name[96];
    for (int64_t l = 0; rc == 0 && l < s->n_layer; l++) {
#define MK_T(suffix, type, a, b) \
    (snprintf(name, sizeof name, "blk.%lld." suffix, (long long)l), mk_add(w, st, name, type, a, b))
        rc = (snprintf(name, sizeof name, "blk.%lld.attn_norm.weight", (long long)l),
              ob_gguf_writer_add_tensor(w, name, OB_TYPE_F32, 1, ne1, norm));
        if (rc == 0) rc = MK_T("attn_q.weight", s->wtype, E, Q);
        if (rc == 0) rc = MK_T("attn_k.weight", s->wtype, E, KV);
        if (rc == 0) rc = MK_T("attn_v.weight", s->wtype, E, KV);
        if (rc == 0) rc = MK_T("attn_output.weight", s->wtype, Q, E);
        if (rc == 0)
            rc = (snprintf(name, sizeof name, "blk.%lld.ffn_norm.weight", (long long)l),
                  ob_gguf_writer_add_tensor(w, name, OB_TYPE_F32, 1, ne1, norm));
        if (rc == 0) rc = MK_T("ffn_gate.weight", s->wtype, E, F);
        if (rc == 0) rc = MK_T("ffn_up.weight", s->wtype, E, F);
        if (rc == 0) rc = MK_T("ffn_down.weight", s->wtype, F, E);
#undef MK_T
    }
    if (rc == 0) rc = ob_gguf_writer_write_file(w, path);
    ob_gguf_writer_free(w);
    for (int64_t i = 0; toks && i < s->n_vocab; i++) free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    free(norm);
    for (int i = 0; i < OB_TYPE_COUNT; i++) free(st->pool[i]);
    for (int i = 0; i < st->n_bufs; i++) free(st->bufs[i].data);
    free(st);
    return rc;
}

#endif
