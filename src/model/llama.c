/*
 * llama.c - the Llama family: llama (Llama 2/3, Mistral, SmolLM, TinyLlama),
 * qwen2 (biases on q/k/v, NeoX RoPE), qwen3 (per-head q/k RMSNorm, NeoX
 * RoPE) and internlm2 (InternLM2 / 2.5: Llama's graph under its own
 * architecture name; the converter splits its fused wqkv into q/k/v as
 * llama.cpp does). One loader and one forward pass; the differences are
 * optional tensors and the RoPE mode.
 *
 * Per layer, for a batch of n tokens x [n, n_embd]:
 *     h = rmsnorm(x) * attn_norm
 *     q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)
 *     q, k = rmsnorm_per_head(q) * q_norm, ... (qwen3)
 *     q, k = rope(q, pos), rope(k, pos)
 *     cache[slots] = k, v
 *     x += attention(q, cache) Wo
 *     x += (silu(rmsnorm(x) * ffn_norm Wgate) * (... Wup)) Wdown
 * then logits = rmsnorm(x[out rows]) * output_norm Wout.
 */
#include <math.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

typedef enum llama_variant { V_LLAMA, V_QWEN2, V_QWEN3 } llama_variant;

static llama_variant variant_of(const ob_model_impl *m) {
    if (strcmp(m->arch_name, "qwen2") == 0) return V_QWEN2;
    if (strcmp(m->arch_name, "qwen3") == 0) return V_QWEN3;
    return V_LLAMA;
}

static int load_rope(ob_model_impl *m) {
    return ob_model_load_rope(m, variant_of(m) == V_LLAMA ? OB_ROPE_NORMAL : OB_ROPE_NEOX);
}

static int llama_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    llama_variant var = variant_of(m);
    /* Mixtral: a llama with experts runs in moe.c */
    int64_t n_expert = 0;
    OB_TRY(ob_model_key_u32_opt(m, "expert_count", &n_expert));
    if (n_expert > 0 && var == V_LLAMA && strcmp(m->arch_name, "llama") == 0) {
        extern const ob_arch ob_arch_llama_moe;
        m->arch = &ob_arch_llama_moe;
        return m->arch->load(m);
    }
    OB_TRY(ob_model_key_u32(m, "embedding_length", &hp->n_embd));
    OB_TRY(ob_model_key_u32(m, "block_count", &hp->n_layer));
    OB_TRY(ob_model_key_u32(m, "feed_forward_length", &hp->n_ff));
    OB_TRY(ob_model_key_u32(m, "attention.head_count", &hp->n_head));
    hp->n_head_kv = hp->n_head;
    OB_TRY(ob_model_key_u32_opt(m, "attention.head_count_kv", &hp->n_head_kv));
    hp->n_ctx_train = 2048;
    OB_TRY(ob_model_key_u32_opt(m, "context_length", &hp->n_ctx_train));
    OB_TRY(ob_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->norm_eps));
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_ff <= 0)
        return ob_err(OB_ERR_FORMAT, "%s: embedding_length, block_count, feed_forward_length and head counts must be > 0",
                      m->arch_name);
    if (hp->n_layer > 4096 || hp->n_head > 4096) return ob_err(OB_ERR_FORMAT, "%s: absurd layer or head count", m->arch_name);
    if (hp->n_head % hp->n_head_kv)
        return ob_err(OB_ERR_FORMAT, "%s.attention.head_count %lld is not a multiple of head_count_kv %lld", m->arch_name,
                      (long long)hp->n_head, (long long)hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    OB_TRY(ob_model_key_u32_opt(m, "attention.key_length", &hp->head_dim));
    hp->head_dim_v = hp->head_dim;
    OB_TRY(ob_model_key_u32_opt(m, "attention.value_length", &hp->head_dim_v));
    if (hp->head_dim <= 0 || hp->head_dim_v != hp->head_dim)
        return ob_err(OB_ERR_UNSUPPORTED, "%s: key length %lld and value length %lld must be equal and > 0", m->arch_name,
                      (long long)hp->head_dim, (long long)hp->head_dim_v);
    hp->sliding_window = 0;
    OB_TRY(ob_model_key_u32_opt(m, "attention.sliding_window", &hp->sliding_window));
    OB_TRY(load_rope(m));

    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    OB_TRY(ob_model_tensor(m, &m->output_norm, false, 1, &E, "output_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->output, true, 2, vocab_shape, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */

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
        bool need_bias = var == V_QWEN2;
        OB_TRY(ob_model_tensor(m, &L->bq, !need_bias, 1, &Q, "blk.%d.attn_q.bias", il));
        OB_TRY(ob_model_tensor(m, &L->bk, !need_bias, 1, &KV, "blk.%d.attn_k.bias", il));
        OB_TRY(ob_model_tensor(m, &L->bv, !need_bias, 1, &KV, "blk.%d.attn_v.bias", il));
        OB_TRY(ob_model_tensor(m, &L->bo, true, 1, &E, "blk.%d.attn_output.bias", il));
        bool need_qk_norm = var == V_QWEN3;
        OB_TRY(ob_model_tensor(m, &L->q_norm, !need_qk_norm, 1, &hp->head_dim, "blk.%d.attn_q_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->k_norm, !need_qk_norm, 1, &hp->head_dim, "blk.%d.attn_k_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.ffn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_gate, false, 2, sff, "blk.%d.ffn_gate.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sff, "blk.%d.ffn_up.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sdown, "blk.%d.ffn_down.weight", il));
        const ob_tensor *norms[] = {&L->attn_norm, &L->ffn_norm, &L->q_norm, &L->k_norm, &L->bq, &L->bk, &L->bv, &L->bo};
        OB_TRY(ob_model_check_f32(norms, OB_ARRAY_LEN(norms)));
    }
    if (m->output_norm.type != OB_TYPE_F32) return ob_err(OB_ERR_UNSUPPORTED, "output_norm.weight must be f32");
    return 0;
}

/* Workspace layout for n tokens (floats): x, h, q, k, v, att, gate, up. */
static size_t llama_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(2 * hp->n_embd + 2 * Q + 2 * KV + 2 * hp->n_ff);
}

static int llama_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim,
                  KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    if (a->work_floats < llama_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");

    float *w = a->work;
    ob_tensor x, h, q, k, v, att, gate, up, o;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;
    ob_tensor_f32_2d(&q, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&k, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&v, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&att, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&gate, F, n, w), w += n * F;
    ob_tensor_f32_2d(&up, F, n, w);

    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, 1.0f / sqrtf((float)hp->head_dim), 0.0f, 0.0f};

    OB_TRY(op->get_rows(b, &m->tok_embd, a->tokens, n, &x));
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const ob_layer *L = &m->layers[il];
        int rc = OB_ERR_UNSUPPORTED;
        if (n == 1 && op->layer_qkv) { /* one token: the backend may fuse the layer's halves */
            const ob_layer_qkv p = {&x, &L->attn_norm, hp->norm_eps, &L->wq, &L->wk, &L->wv,
                                    L->bq.data ? &L->bq : NULL, L->bk.data ? &L->bk : NULL,
                                    L->bv.data ? &L->bv : NULL, &q, &k, &v};
            rc = op->layer_qkv(b, &p);
            if (rc != OB_ERR_UNSUPPORTED) OB_TRY(rc);
        }
        if (rc == OB_ERR_UNSUPPORTED) {
            OB_TRY(op->rms_norm(b, &x, &L->attn_norm, hp->norm_eps, E, &h));
            OB_TRY(op->matmul(b, &L->wq, &h, L->bq.data ? &L->bq : NULL, &q));
            OB_TRY(op->matmul(b, &L->wk, &h, L->bk.data ? &L->bk : NULL, &k));
            OB_TRY(op->matmul(b, &L->wv, &h, L->bv.data ? &L->bv : NULL, &v));
        }
        if (L->q_norm.data) OB_TRY(op->rms_norm(b, &q, &L->q_norm, hp->norm_eps, hp->head_dim, &q));
        if (L->k_norm.data) OB_TRY(op->rms_norm(b, &k, &L->k_norm, hp->norm_eps, hp->head_dim, &k));
        OB_TRY(op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, &hp->rope));
        OB_TRY(op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, &hp->rope));
        OB_TRY(op->kv_write(b, a->kv, (int)il, &k, &v, a->slots));
        OB_TRY(op->attention(b, a->kv, (int)il, &q, a->attn, &ap, &att));
        rc = OB_ERR_UNSUPPORTED;
        if (n == 1 && op->layer_ffn) {
            const ob_layer_ffn p = {&x, &att, &L->wo, L->bo.data ? &L->bo : NULL, &L->ffn_norm, hp->norm_eps,
                                    &L->w_gate, &L->w_up, &L->w_down, OB_ACT_SILU};
            rc = op->layer_ffn(b, &p);
            if (rc != OB_ERR_UNSUPPORTED) OB_TRY(rc);
        }
        if (rc == OB_ERR_UNSUPPORTED) {
            OB_TRY(op->matmul(b, &L->wo, &att, L->bo.data ? &L->bo : NULL, &h));
            OB_TRY(op->add(b, &x, &h, &x));
            OB_TRY(op->rms_norm(b, &x, &L->ffn_norm, hp->norm_eps, E, &h));
            OB_TRY(op->matmul(b, &L->w_gate, &h, NULL, &gate));
            OB_TRY(op->matmul(b, &L->w_up, &h, NULL, &up));
            OB_TRY(op->glu(b, OB_ACT_SILU, &gate, &up, &gate));
            OB_TRY(op->matmul(b, &L->w_down, &gate, NULL, &h));
            OB_TRY(op->add(b, &x, &h, &x));
        }
    }
    if (a->n_out == 0) return 0;
    /* Only the rows that want logits go through the final norm and output. */
    ob_tensor xo, lg;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->embd_only ? a->logits : (float *)h.data);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    OB_TRY(op->rms_norm(b, &xo, &m->output_norm, hp->norm_eps, E, &xo));
    if (a->embd_only) return 0; /* embeddings: the normed hidden states are the output */
    ob_tensor_f32_2d(&lg, hp->n_vocab, a->n_out, a->logits);
    OB_TRY(op->matmul(b, &m->output, &xo, NULL, &lg));
    (void)o;
    return 0;
}

const ob_arch ob_arch_llama = {"llama", true, llama_load, llama_work_size, llama_forward};
const ob_arch ob_arch_qwen2 = {"qwen2", true, llama_load, llama_work_size, llama_forward};
const ob_arch ob_arch_qwen3 = {"qwen3", true, llama_load, llama_work_size, llama_forward};
const ob_arch ob_arch_internlm2 = {"internlm2", true, llama_load, llama_work_size, llama_forward};
