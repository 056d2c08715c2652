/*
 * granite.c - IBM Granite (3.x dense): a Llama decoder with four
 * multipliers, read from granite.embedding_scale, granite.residual_scale,
 * granite.attention.scale and granite.logit_scale as llama.cpp writes them:
 *
 *     x = embd[tokens] * embedding_scale
 *     x += residual_scale * attention(rmsnorm(x))     (scores times attention.scale, not 1/sqrt(d))
 *     x += residual_scale * ffn(rmsnorm(x))
 *     logits = (rmsnorm(x) Wout) / logit_scale
 *
 * q/k rows are permuted for normal RoPE, as for `llama`.
 */
#include <math.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

static int granite_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    OB_TRY(ob_model_load_common(m, "attention.layer_norm_rms_epsilon"));
    OB_TRY(ob_model_load_rope(m, OB_ROPE_NORMAL));
    hp->embd_scale = hp->resid_scale = hp->logit_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    OB_TRY(ob_model_key_f32_opt(m, "embedding_scale", &hp->embd_scale));
    OB_TRY(ob_model_key_f32_opt(m, "residual_scale", &hp->resid_scale));
    OB_TRY(ob_model_key_f32_opt(m, "attention.scale", &hp->attn_scale));
    OB_TRY(ob_model_key_f32_opt(m, "logit_scale", &hp->logit_scale));
    if (!(hp->embd_scale > 0.0f) || !(hp->resid_scale > 0.0f) || !(hp->attn_scale > 0.0f) || !(hp->logit_scale > 0.0f))
        return ob_err(OB_ERR_FORMAT, "%s: embedding, residual, attention and logit scales must be > 0", m->arch_name);

    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    OB_TRY(ob_model_tensor(m, &m->output_norm, false, 1, &E, "output_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->output, true, 2, vocab_shape, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd;
    m->layers = ob_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ob_err(OB_ERR_OOM, "layers");
    int64_t sq[2] = {E, Q}, skv[2] = {E, KV}, so[2] = {Q, E}, sff[2] = {E, F}, sdown[2] = {F, E};
    for (int64_t i = 0; i < hp->n_layer; i++) {
        ob_layer *L = &m->layers[i];
        int il = (int)i;
        OB_TRY(ob_model_tensor(m, &L->attn_norm, false, 1, &E, "blk.%d.attn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wq, false, 2, sq, "blk.%d.attn_q.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wk, false, 2, skv, "blk.%d.attn_k.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wv, false, 2, skv, "blk.%d.attn_v.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wo, false, 2, so, "blk.%d.attn_output.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.ffn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_gate, false, 2, sff, "blk.%d.ffn_gate.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sff, "blk.%d.ffn_up.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sdown, "blk.%d.ffn_down.weight", il));
        if (L->attn_norm.type != OB_TYPE_F32 || L->ffn_norm.type != OB_TYPE_F32)
            return ob_err(OB_ERR_UNSUPPORTED, "layer %d: norms must be f32", il);
    }
    if (m->output_norm.type != OB_TYPE_F32) return ob_err(OB_ERR_UNSUPPORTED, "output_norm.weight must be f32");
    return 0;
}

/* Workspace (floats): x, h, q, k, v, att, gate, up for n tokens. */
static size_t granite_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(2 * hp->n_embd + 2 * Q + 2 * KV + 2 * hp->n_ff);
}

static int granite_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim,
                  F = hp->n_ff;
    if (a->work_floats < granite_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");
    float *w = a->work;
    ob_tensor x, h, q, k, v, att, gate, up;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;
    ob_tensor_f32_2d(&q, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&k, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&v, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&att, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&gate, F, n, w), w += n * F;
    ob_tensor_f32_2d(&up, F, n, w);
    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, hp->attn_scale, 0.0f, 0.0f};

    OB_TRY(op->get_rows(b, &m->tok_embd, a->tokens, n, &x));
    if (hp->embd_scale != 1.0f) OB_TRY(op->scale(b, &x, hp->embd_scale, &x));
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const ob_layer *L = &m->layers[il];
        OB_TRY(op->rms_norm(b, &x, &L->attn_norm, hp->norm_eps, E, &h));
        OB_TRY(op->matmul(b, &L->wq, &h, NULL, &q));
        OB_TRY(op->matmul(b, &L->wk, &h, NULL, &k));
        OB_TRY(op->matmul(b, &L->wv, &h, NULL, &v));
        OB_TRY(op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, &hp->rope));
        OB_TRY(op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, &hp->rope));
        OB_TRY(op->kv_write(b, a->kv, (int)il, &k, &v, a->slots));
        OB_TRY(op->attention(b, a->kv, (int)il, &q, a->attn, &ap, &att));
        OB_TRY(op->matmul(b, &L->wo, &att, NULL, &h));
        if (hp->resid_scale != 1.0f) OB_TRY(op->scale(b, &h, hp->resid_scale, &h));
        OB_TRY(op->add(b, &x, &h, &x));
        OB_TRY(op->rms_norm(b, &x, &L->ffn_norm, hp->norm_eps, E, &h));
        OB_TRY(op->matmul(b, &L->w_gate, &h, NULL, &gate));
        OB_TRY(op->matmul(b, &L->w_up, &h, NULL, &up));
        OB_TRY(op->glu(b, OB_ACT_SILU, &gate, &up, &gate));
        OB_TRY(op->matmul(b, &L->w_down, &gate, NULL, &h));
        if (hp->resid_scale != 1.0f) OB_TRY(op->scale(b, &h, hp->resid_scale, &h));
        OB_TRY(op->add(b, &x, &h, &x));
    }
    if (a->n_out == 0) return 0;
    ob_tensor xo, lg;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->embd_only ? a->logits : (float *)h.data);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    OB_TRY(op->rms_norm(b, &xo, &m->output_norm, hp->norm_eps, E, &xo));
    if (a->embd_only) return 0; /* embeddings: the normed hidden states */
    ob_tensor_f32_2d(&lg, hp->n_vocab, a->n_out, a->logits);
    OB_TRY(op->matmul(b, &m->output, &xo, NULL, &lg));
    if (hp->logit_scale != 1.0f) OB_TRY(op->scale(b, &lg, 1.0f / hp->logit_scale, &lg));
    return 0;
}

/* Verified: tests/data/models/granite (test_models_ref: granite). */
const ob_arch ob_arch_granite = {"granite", true, granite_load, granite_work_size, granite_forward};
