/*
 * gemma.c - Google's Gemma family: gemma, gemma2 and gemma3 (text).
 *
 * What sets them apart from llama.c's decoder, per layer of a batch x [n, n_embd]:
 *     x = embd[tokens] * sqrt(n_embd)                    (once, before layer 0)
 *     h = rmsnorm(x) * attn_norm
 *     q, k, v = h Wq, h Wk, h Wv
 *     q, k = rmsnorm_per_head(q) * q_norm, ...            (gemma3)
 *     q, k = rope_neox(q, k)                              (gemma3: local layers their own base)
 *     a = softmax(softcap(q k^T * scale) + window mask) v (gemma2: softcap; gemma2/3: window on local layers)
 *     x += post_attention_norm(a Wo)                      (gemma2/3; gemma: no post-norm)
 *     x += post_ffw_norm(gelu_tanh(h Wgate) * (h Wup)) Wdown, h = rmsnorm(x) * ffn_norm
 * then logits = softcap(rmsnorm(x) * output_norm Wout)    (gemma2: final soft-capping).
 *
 * Gemma's RMSNorm multiplies by (1 + w); the GGUF file stores 1 + w (as
 * llama.cpp's converter writes it, and ours), so the norms here are plain.
 * Local (sliding-window) layers are those with il % pattern < pattern - 1:
 * pattern 2 for gemma2 (even layers local), 6 for gemma3, or the file's
 * attention.sliding_window_pattern. The engine gives every token its whole
 * causal range (hp.sliding_window stays 0); the local layers narrow it here.
 *
 * Attention scale: the file's attention.scale if present (our converter
 * writes it from query_pre_attn_scalar when that is not head_dim), else
 * llama.cpp's rule: 1/sqrt(n_embd / n_head) for the 27B models (46 layers
 * gemma2, 62 layers gemma3), 1/sqrt(head_dim) otherwise.
 */
#include <math.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

typedef enum gemma_variant { G_GEMMA1, G_GEMMA2, G_GEMMA3 } gemma_variant;

static gemma_variant variant_of(const ob_model_impl *m) {
    if (strcmp(m->arch_name, "gemma2") == 0) return G_GEMMA2;
    if (strcmp(m->arch_name, "gemma3") == 0) return G_GEMMA3;
    return G_GEMMA1;
}

static bool layer_is_local(const ob_hparams *hp, int64_t il) {
    return hp->swa_window > 0 && hp->swa_pattern > 1 && il % hp->swa_pattern < hp->swa_pattern - 1;
}

static int gemma_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    gemma_variant var = variant_of(m);
    OB_TRY(ob_model_load_common(m, "attention.layer_norm_rms_epsilon"));
    OB_TRY(ob_model_load_rope(m, OB_ROPE_NEOX));

    hp->attn_scale = 0.0f;
    OB_TRY(ob_model_key_f32_opt(m, "attention.scale", &hp->attn_scale));
    if (hp->attn_scale == 0.0f) {
        bool big = (var == G_GEMMA2 && hp->n_layer == 46) || (var == G_GEMMA3 && hp->n_layer == 62);
        hp->attn_scale = 1.0f / sqrtf(big ? (float)(hp->n_embd / hp->n_head) : (float)hp->head_dim);
    }
    if (!(hp->attn_scale > 0.0f)) return ob_err(OB_ERR_FORMAT, "%s.attention.scale must be > 0", m->arch_name);
    hp->attn_softcap = hp->final_softcap = 0.0f;
    OB_TRY(ob_model_key_f32_opt(m, "attn_logit_softcapping", &hp->attn_softcap));
    OB_TRY(ob_model_key_f32_opt(m, "final_logit_softcapping", &hp->final_softcap));
    if (hp->attn_softcap < 0.0f || hp->final_softcap < 0.0f)
        return ob_err(OB_ERR_FORMAT, "%s: soft-capping values must be >= 0", m->arch_name);

    hp->swa_window = 0;
    hp->swa_pattern = var == G_GEMMA2 ? 2 : var == G_GEMMA3 ? 6 : 0;
    if (var != G_GEMMA1) {
        OB_TRY(ob_model_key_u32_opt(m, "attention.sliding_window", &hp->swa_window));
        OB_TRY(ob_model_key_u32_opt(m, "attention.sliding_window_pattern", &hp->swa_pattern));
        if (hp->swa_pattern < 0) return ob_err(OB_ERR_FORMAT, "%s.attention.sliding_window_pattern < 0", m->arch_name);
    }
    hp->rope_swa = hp->rope;
    if (var == G_GEMMA3) {
        /* local layers: their own base and no scaling (llama.cpp: 10000 unless the file says) */
        hp->rope_swa.freq_base = 10000.0f;
        hp->rope_swa.freq_scale = 1.0f;
        hp->rope_swa.ext_factor = 0.0f;
        hp->rope_swa.attn_factor = 1.0f;
        OB_TRY(ob_model_key_f32_opt(m, "rope.freq_base_swa", &hp->rope_swa.freq_base));
        if (!(hp->rope_swa.freq_base > 1.0f))
            return ob_err(OB_ERR_FORMAT, "%s.rope.freq_base_swa must be > 1", m->arch_name);
    }

    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    OB_TRY(ob_model_tensor(m, &m->output_norm, false, 1, &E, "output_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->output, true, 2, vocab_shape, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd; /* tied: every Gemma */

    m->layers = ob_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ob_err(OB_ERR_OOM, "layers");
    int64_t sq[2] = {E, Q}, skv[2] = {E, KV}, so[2] = {Q, E}, sff[2] = {E, F}, sdown[2] = {F, E};
    for (int64_t i = 0; i < hp->n_layer; i++) {
        ob_layer *L = &m->layers[i];
        int il = (int)i;
        bool post = var != G_GEMMA1, qk = var == G_GEMMA3;
        OB_TRY(ob_model_tensor(m, &L->attn_norm, false, 1, &E, "blk.%d.attn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wq, false, 2, sq, "blk.%d.attn_q.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wk, false, 2, skv, "blk.%d.attn_k.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wv, false, 2, skv, "blk.%d.attn_v.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wo, false, 2, so, "blk.%d.attn_output.weight", il));
        OB_TRY(ob_model_tensor(m, &L->q_norm, !qk, 1, &hp->head_dim, "blk.%d.attn_q_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->k_norm, !qk, 1, &hp->head_dim, "blk.%d.attn_k_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->post_attn_norm, !post, 1, &E, "blk.%d.post_attention_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.ffn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_gate, false, 2, sff, "blk.%d.ffn_gate.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sff, "blk.%d.ffn_up.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sdown, "blk.%d.ffn_down.weight", il));
        OB_TRY(ob_model_tensor(m, &L->post_ffn_norm, !post, 1, &E, "blk.%d.post_ffw_norm.weight", il));
        const ob_tensor *norms[] = {&L->attn_norm, &L->ffn_norm,       &L->q_norm,
                                    &L->k_norm,    &L->post_attn_norm, &L->post_ffn_norm};
        for (size_t k = 0; k < OB_ARRAY_LEN(norms); k++)
            if (norms[k]->data && norms[k]->type != OB_TYPE_F32)
                return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' is %s; norms must be f32", norms[k]->name,
                              ob_type_name(norms[k]->type));
    }
    if (m->output_norm.type != OB_TYPE_F32) return ob_err(OB_ERR_UNSUPPORTED, "output_norm.weight must be f32");
    return 0;
}

/* Workspace (floats): x, h, q, k, v, att, gate, up for n tokens. */
static size_t gemma_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(2 * hp->n_embd + 2 * Q + 2 * KV + 2 * hp->n_ff);
}

/* out = c * tanh(x / c), in place. */
static int softcap(const ob_backend_ops *op, ob_backend *b, ob_tensor *x, float c) {
    OB_TRY(op->scale(b, x, 1.0f / c, x));
    OB_TRY(op->glu(b, OB_ACT_TANH, x, NULL, x));
    return op->scale(b, x, c, x);
}

static int gemma_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim,
                  F = hp->n_ff;
    if (a->work_floats < gemma_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");

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

    /* what the local layers see: one host table per batch */
    ob_attn_token *local = NULL;
    if (hp->swa_window > 0) {
        local = ob_malloc((size_t)n * sizeof *local);
        if (!local) return ob_err(OB_ERR_OOM, "window tokens");
        ob_model_window_tokens(a->attn, n, hp->swa_window, local);
    }
    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, hp->attn_scale, hp->attn_softcap, 0.0f};

    int rc = op->get_rows(b, &m->tok_embd, a->tokens, n, &x);
    if (rc == 0) rc = op->scale(b, &x, sqrtf((float)E), &x);
    for (int64_t il = 0; il < hp->n_layer && rc == 0; il++) {
        const ob_layer *L = &m->layers[il];
        bool loc = layer_is_local(hp, il);
        const ob_rope_params *rp = loc ? &hp->rope_swa : &hp->rope;
#define R(call)                                                                                                        \
    do {                                                                                                               \
        if (rc == 0) rc = (call);                                                                                      \
    } while (0)
        R(op->rms_norm(b, &x, &L->attn_norm, hp->norm_eps, E, &h));
        R(op->matmul(b, &L->wq, &h, NULL, &q));
        R(op->matmul(b, &L->wk, &h, NULL, &k));
        R(op->matmul(b, &L->wv, &h, NULL, &v));
        if (L->q_norm.data) R(op->rms_norm(b, &q, &L->q_norm, hp->norm_eps, hp->head_dim, &q));
        if (L->k_norm.data) R(op->rms_norm(b, &k, &L->k_norm, hp->norm_eps, hp->head_dim, &k));
        R(op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, rp));
        R(op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, rp));
        R(op->kv_write(b, a->kv, (int)il, &k, &v, a->slots));
        R(op->attention(b, a->kv, (int)il, &q, loc ? local : a->attn, &ap, &att));
        R(op->matmul(b, &L->wo, &att, NULL, &h));
        if (L->post_attn_norm.data) R(op->rms_norm(b, &h, &L->post_attn_norm, hp->norm_eps, E, &h));
        R(op->add(b, &x, &h, &x));
        R(op->rms_norm(b, &x, &L->ffn_norm, hp->norm_eps, E, &h));
        R(op->matmul(b, &L->w_gate, &h, NULL, &gate));
        R(op->matmul(b, &L->w_up, &h, NULL, &up));
        R(op->glu(b, OB_ACT_GELU, &gate, &up, &gate));
        R(op->matmul(b, &L->w_down, &gate, NULL, &h));
        if (L->post_ffn_norm.data) R(op->rms_norm(b, &h, &L->post_ffn_norm, hp->norm_eps, E, &h));
        R(op->add(b, &x, &h, &x));
#undef R
    }
    ob_free(local);
    if (rc < 0 || a->n_out == 0) return rc;
    ob_tensor xo, lg;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->embd_only ? a->logits : (float *)h.data);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    OB_TRY(op->rms_norm(b, &xo, &m->output_norm, hp->norm_eps, E, &xo));
    if (a->embd_only) return 0; /* embeddings: the normed hidden states */
    ob_tensor_f32_2d(&lg, hp->n_vocab, a->n_out, a->logits);
    OB_TRY(op->matmul(b, &m->output, &xo, NULL, &lg));
    if (hp->final_softcap > 0.0f) OB_TRY(softcap(op, b, &lg, hp->final_softcap));
    return 0;
}

const ob_arch ob_arch_gemma = {"gemma", true, gemma_load, gemma_work_size, gemma_forward};
const ob_arch ob_arch_gemma2 = {"gemma2", true, gemma_load, gemma_work_size, gemma_forward};
const ob_arch ob_arch_gemma3 = {"gemma3", true, gemma_load, gemma_work_size, gemma_forward};
