/*
 * phi.c - Microsoft's Phi-3 family (Phi-3, Phi-3.5, Phi-4-mini). Phi-2, a
 * LayerNorm model with parallel attention and MLP, runs in gptlike.c with
 * the other GPT-lineage decoders.
 *
 * phi3 is a llama-style decoder whose weights come fused: attn_qkv
 * [n_embd, Q + 2 KV] and ffn_up [n_embd, 2 n_ff] (gate rows first, then
 * up). The fused matrices are split into row ranges at load time
 * (ob_model_tensor_rows), so the forward pass runs the same ops as llama.c;
 * files with separate attn_q/k/v or ffn_gate load too. RoPE is NeoX-style;
 * LongRoPE (Phi-3 128k, Phi-3.5) divides each frequency by a per-dimension
 * factor from rope_factors_short.weight or rope_factors_long.weight and
 * multiplies cos/sin by rope.scaling.attn_factor. As transformers does, a
 * batch uses the long factors when its largest position is at or past
 * rope.scaling.original_context_length, the short ones otherwise.
 */
#include <math.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

/* A host copy of an F32 tensor of n elements, or NULL when absent. */
static int host_factors(ob_model_impl *m, const char *name, int64_t n, float **out) {
    *out = NULL;
    const ob_gguf_tensor *t = ob_gguf_find_tensor(m->gguf, name);
    if (!t) return 0;
    if (t->type != OB_TYPE_F32 || ob_gguf_tensor_nelements(t) != n)
        return ob_err(OB_ERR_FORMAT, "tensor '%s' must be f32 of %lld elements", name, (long long)n);
    *out = ob_malloc((size_t)n * sizeof(float));
    if (!*out) return ob_err(OB_ERR_OOM, "%s", name);
    memcpy(*out, t->data, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        if (!((*out)[i] > 0.0f))
            return ob_err(OB_ERR_FORMAT, "tensor '%s': factor %lld is not > 0", name, (long long)i);
    return 0;
}

static int phi_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    OB_TRY(ob_model_load_common(m, "attention.layer_norm_rms_epsilon"));
    OB_TRY(ob_model_load_rope(m, OB_ROPE_NEOX));
    OB_TRY(ob_model_key_u32_opt(m, "attention.sliding_window", &hp->sliding_window));

    /* Phi-3 LongRoPE: both factor sets in one block owned by m->rope_freqs
     * (freed with the model): [short | long]. hp->rope carries the short
     * set, hp->rope_swa the long one (phi3 has no local layers). */
    const int64_t half = hp->rope.n_rot / 2;
    float *sf = NULL, *lf = NULL;
    int rc = host_factors(m, "rope_factors_short.weight", half, &sf);
    if (rc == 0) rc = host_factors(m, "rope_factors_long.weight", half, &lf);
    if (rc == 0 && (sf || lf)) {
        ob_free(m->rope_freqs); /* a rope_freqs.weight the shared loader read is replaced */
        m->rope_freqs = ob_malloc((size_t)(2 * half) * sizeof(float));
        if (!m->rope_freqs) rc = ob_err(OB_ERR_OOM, "rope factors");
        for (int64_t i = 0; rc == 0 && i < half; i++) {
            m->rope_freqs[i] = sf ? sf[i] : 1.0f;
            m->rope_freqs[half + i] = lf ? lf[i] : m->rope_freqs[i];
        }
    }
    ob_free(sf);
    ob_free(lf);
    OB_TRY(rc);
    hp->rope_swa = hp->rope;
    if (m->rope_freqs) {
        float af = 1.0f;
        OB_TRY(ob_model_key_f32_opt(m, "rope.scaling.attn_factor", &af));
        int64_t orig = hp->n_ctx_train;
        OB_TRY(ob_model_key_u32_opt(m, "rope.scaling.original_context_length", &orig));
        hp->rope.attn_factor = hp->rope_swa.attn_factor = af;
        hp->rope.n_ctx_orig = hp->rope_swa.n_ctx_orig = (int)orig;
        hp->rope.freq_factors = m->rope_freqs;
        hp->rope_swa.freq_factors = m->rope_freqs + half;
        hp->rope_scaling = OB_ROPE_SCALING_LLAMA3; /* per-dimension factors */
    }

    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, F = hp->n_ff;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    OB_TRY(ob_model_tensor(m, &m->output_norm, false, 1, &E, "output_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->output_norm_b, true, 1, &E, "output_norm.bias"));
    OB_TRY(ob_model_tensor(m, &m->output, true, 2, vocab_shape, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd;
    OB_TRY(ob_model_tensor(m, &m->output_b, true, 1, &hp->n_vocab, "output.bias"));

    m->layers = ob_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ob_err(OB_ERR_OOM, "layers");
    int64_t so[2] = {Q, E}, sff[2] = {E, F}, sdown[2] = {F, E};
    for (int64_t i = 0; i < hp->n_layer; i++) {
        ob_layer *L = &m->layers[i];
        int il = (int)i;
        OB_TRY(ob_model_tensor(m, &L->attn_norm, false, 1, &E, "blk.%d.attn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->attn_norm_b, true, 1, &E, "blk.%d.attn_norm.bias", il));
        OB_TRY(ob_model_bind_qkv(m, L, il));
        OB_TRY(ob_model_tensor(m, &L->wo, false, 2, so, "blk.%d.attn_output.weight", il));
        OB_TRY(ob_model_tensor(m, &L->bo, true, 1, &E, "blk.%d.attn_output.bias", il));
        OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sdown, "blk.%d.ffn_down.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.ffn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_gate, true, 2, sff, "blk.%d.ffn_gate.weight", il));
        if (L->w_gate.data) {
            OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sff, "blk.%d.ffn_up.weight", il));
        } else { /* fused: gate rows, then up rows */
            int64_t fused[2] = {E, 2 * F};
            char name[96];
            snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il);
            const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
            if (!g) return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
            if (g->n_dims != 2 || g->ne[0] != fused[0] || g->ne[1] != fused[1])
                return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld]; expected [%lld, %lld]", name,
                              (long long)g->ne[0], (long long)g->ne[1], (long long)fused[0], (long long)fused[1]);
            OB_TRY(ob_model_tensor_rows(m, &L->w_gate, name, 0, F));
            OB_TRY(ob_model_tensor_rows(m, &L->w_up, name, F, F));
        }
        const ob_tensor *small[] = {&L->attn_norm, &L->attn_norm_b, &L->ffn_norm, &L->bq,    &L->bk,
                                    &L->bv,        &L->bo,          &L->b_up,     &L->b_down};
        OB_TRY(ob_model_check_f32(small, OB_ARRAY_LEN(small)));
    }
    const ob_tensor *heads[] = {&m->output_norm, &m->output_norm_b, &m->output_b};
    return ob_model_check_f32(heads, OB_ARRAY_LEN(heads));
}

/* Workspace (floats) for n tokens: x, h, o, q, k, v, att, gate, up. */
static size_t phi_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(3 * hp->n_embd + 2 * Q + 2 * KV + 2 * hp->n_ff);
}

static const ob_tensor *opt(const ob_tensor *t) { return t->data ? t : NULL; }

static int phi_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim,
                  F = hp->n_ff;
    if (a->work_floats < phi_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");

    float *w = a->work;
    ob_tensor x, h, o, q, k, v, att, gate, up;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;
    ob_tensor_f32_2d(&o, E, n, w), w += n * E;
    ob_tensor_f32_2d(&q, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&k, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&v, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&att, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&gate, F, n, w), w += n * F;
    ob_tensor_f32_2d(&up, F, n, w);

    /* LongRoPE: the long factors once the batch reaches the original context */
    const ob_rope_params *rp = &hp->rope;
    if (hp->rope.freq_factors) {
        int32_t max_pos = 0;
        for (int64_t i = 0; i < n; i++)
            if (a->pos[i] > max_pos) max_pos = a->pos[i];
        if (max_pos >= hp->rope.n_ctx_orig) rp = &hp->rope_swa;
    }
    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, 1.0f / sqrtf((float)hp->head_dim),
                         0.0f, 0.0f};

    OB_TRY(op->get_rows(b, &m->tok_embd, a->tokens, n, &x));
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const ob_layer *L = &m->layers[il];
        OB_TRY(op->rms_norm(b, &x, &L->attn_norm, hp->norm_eps, E, &h));
        OB_TRY(op->matmul(b, &L->wq, &h, opt(&L->bq), &q));
        OB_TRY(op->matmul(b, &L->wk, &h, opt(&L->bk), &k));
        OB_TRY(op->matmul(b, &L->wv, &h, opt(&L->bv), &v));
        OB_TRY(op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, rp));
        OB_TRY(op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, rp));
        OB_TRY(op->kv_write(b, a->kv, (int)il, &k, &v, a->slots));
        OB_TRY(op->attention(b, a->kv, (int)il, &q, a->attn, &ap, &att));
        OB_TRY(op->matmul(b, &L->wo, &att, opt(&L->bo), &o));
        OB_TRY(op->add(b, &x, &o, &x));
        OB_TRY(op->rms_norm(b, &x, &L->ffn_norm, hp->norm_eps, E, &h));
        OB_TRY(op->matmul(b, &L->w_gate, &h, NULL, &gate));
        OB_TRY(op->matmul(b, &L->w_up, &h, NULL, &up));
        OB_TRY(op->glu(b, OB_ACT_SILU, &gate, &up, &gate));
        OB_TRY(op->matmul(b, &L->w_down, &gate, NULL, &h));
        OB_TRY(op->add(b, &x, &h, &x));
    }
    if (a->n_out == 0) return 0;
    ob_tensor xo, lg;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->embd_only ? a->logits : (float *)h.data);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    OB_TRY(op->rms_norm(b, &xo, &m->output_norm, hp->norm_eps, E, &xo));
    if (a->embd_only) return 0; /* embeddings: the normed hidden states */
    ob_tensor_f32_2d(&lg, hp->n_vocab, a->n_out, a->logits);
    OB_TRY(op->matmul(b, &m->output, &xo, opt(&m->output_b), &lg));
    return 0;
}

const ob_arch ob_arch_phi3 = {"phi3", true, phi_load, phi_work_size, phi_forward};
