/*
 * llama_variants.c - decoders of the Llama lineage that differ from llama.c
 * in where the norms sit, what the MLP is or which layers rotate, each a row
 * of g_variants below rather than a file of its own:
 *
 *   olmo2     no pre-norms: x += norm(attn(x)), x += norm(mlp(x)); q/k
 *             RMSNorm over the whole q and k projections; NeoX RoPE
 *   smollm3   llama; layers il with (il + 1) % 4 == 0 skip RoPE (llama.cpp
 *             hard-codes the period; the converter refuses others)
 *   arcee     llama with an ungated squared-ReLU MLP: down(relu(up(x))^2)
 *   ernie4_5  llama layout; HF rotates interleaved pairs, so the file keeps
 *             HF's q/k rows and runs normal (pairwise) RoPE
 *   seed_oss  q/k/v biases, NeoX RoPE; llama.cpp names its pre-MLP norm
 *             post_attention_norm
 *   olmo      LayerNorm without weight or bias (eps 1e-5) for every norm
 *   glm4      sandwich norms: x += norm(attn(norm(x))), x += norm(mlp(norm(x)));
 *             q/k/v biases, gate and up fused in ffn_up (gate rows first),
 *             normal RoPE on the first half of each head
 *   bitnet    BitNet b1.58 (transformers' BitNetForCausalLM): NeoX RoPE, RMSNorm of the
 *             attention output before Wo (attn_sub_norm) and of relu(gate)^2 * up before
 *             Wdown (ffn_sub_norm); the ternary weights are ordinary tensors here (any type,
 *             TQ1_0/TQ2_0 hold them exactly)
 *
 * Tensor and key names are llama.cpp's for each architecture. Per layer,
 * for a batch of n tokens x [n, n_embd]:
 *     h = norm(x) * attn_norm                    (x itself for olmo2)
 *     q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)
 *     q, k = rmsnorm(q) * q_norm, rmsnorm(k) * k_norm     (olmo2)
 *     q, k = rope(q), rope(k)                    (unless a NoPE layer)
 *     o = attention(q, cache); o = rmsnorm(o) * attn_sub_norm (bitnet)
 *     o = o Wo (+bo); o = rmsnorm(o) * post_attn_norm (olmo2, glm4)
 *     x += o
 *     h = norm(x) * ffn_norm                     (x itself for olmo2)
 *     f = mlp(h) (bitnet: the down projection's input RMSNormed * ffn_sub_norm first)
 *     f = rmsnorm(f) * post_ffn_norm (olmo2, glm4)
 *     x += f
 * then logits = norm(x[out rows]) * output_norm Wout.
 */
#include <math.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

typedef enum mlp_kind {
    MLP_SWIGLU, /* down(silu(gate(h)) * up(h)) */
    MLP_RELU2,  /* down(relu(up(h))^2) */
    MLP_FUSED,  /* SwiGLU with gate and up in one ffn_up [n_embd, 2 n_ff], gate rows first */
    MLP_RELU2_GATED, /* down(relu(gate(h))^2 * up(h)) */
} mlp_kind;

typedef struct variant {
    const char *name;
    ob_rope_mode rope;
    bool layer_norm;          /* weightless LayerNorm (olmo) instead of RMSNorm */
    bool pre_attn_norm;       /* a norm before the attention */
    bool qk_norm_whole;       /* RMSNorm over all of q and all of k (olmo2) */
    bool qkv_bias;            /* q/k/v biases required */
    bool post_attn_norm;      /* RMSNorm of the attention output (post_attention_norm) */
    const char *ffn_norm;     /* GGUF name of the pre-MLP norm ("blk.%d.<it>.weight"); NULL: none */
    bool post_ffn_norm;       /* RMSNorm of the MLP output (post_ffw_norm) */
    mlp_kind mlp;
    int no_rope_step;         /* layers with (il + 1) % step == 0 skip RoPE; 0: all rotate */
    bool sub_norms;           /* attn_sub_norm before Wo, ffn_sub_norm before Wdown (bitnet) */
} variant;

static const variant g_variants[] = {
    {"olmo2", OB_ROPE_NEOX, false, false, true, false, true, NULL, true, MLP_SWIGLU, 0, false},
    {"smollm3", OB_ROPE_NORMAL, false, true, false, false, false, "ffn_norm", false, MLP_SWIGLU, 4, false},
    {"arcee", OB_ROPE_NORMAL, false, true, false, false, false, "ffn_norm", false, MLP_RELU2, 0, false},
    {"ernie4_5", OB_ROPE_NORMAL, false, true, false, false, false, "ffn_norm", false, MLP_SWIGLU, 0, false},
    {"seed_oss", OB_ROPE_NEOX, false, true, false, true, false, "post_attention_norm", false, MLP_SWIGLU, 0, false},
    {"olmo", OB_ROPE_NORMAL, true, true, false, false, false, "ffn_norm", false, MLP_SWIGLU, 0, false},
    {"glm4", OB_ROPE_NORMAL, false, true, false, true, true, "ffn_norm", true, MLP_FUSED, 0, false},
    {"bitnet", OB_ROPE_NEOX, false, true, false, false, false, "ffn_norm", false, MLP_RELU2_GATED, 0, true},
};

static const variant *variant_of(const ob_model_impl *m) {
    for (size_t i = 0; i < OB_ARRAY_LEN(g_variants); i++)
        if (!strcmp(g_variants[i].name, m->arch_name)) return &g_variants[i];
    return NULL;
}

/* A norm tensor: f32 when present (the norm ops read f32 weights). */
static int norm_tensor(ob_model_impl *m, ob_tensor *t, bool optional, int64_t n, const char *name) {
    OB_TRY(ob_model_tensor(m, t, optional, 1, &n, "%s", name));
    const ob_tensor *ts[] = {t};
    return ob_model_check_f32(ts, 1);
}

static int variant_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    const variant *v = variant_of(m);
    if (!v) return ob_err(OB_ERR_INTERNAL, "%s: no variant", m->arch_name);
    OB_TRY(ob_model_load_common(m, v->layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"));
    OB_TRY(ob_model_load_rope(m, v->rope));

    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    OB_TRY(norm_tensor(m, &m->output_norm, v->layer_norm, E, "output_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->output, true, 2, vocab_shape, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */

    m->layers = ob_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ob_err(OB_ERR_OOM, "layers");
    int64_t sq[2] = {E, Q}, skv[2] = {E, KV}, so[2] = {Q, E}, sff[2] = {E, F}, sdown[2] = {F, E};
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    for (int64_t i = 0; i < hp->n_layer; i++) {
        ob_layer *L = &m->layers[i];
        int il = (int)i;
        /* olmo's LayerNorms have no weights; olmo2 has no pre-norms */
        if (v->pre_attn_norm && !v->layer_norm) OB_TRY(norm_tensor(m, &L->attn_norm, false, E, NAME("attn_norm.weight")));
        OB_TRY(ob_model_tensor(m, &L->wq, false, 2, sq, "blk.%d.attn_q.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wk, false, 2, skv, "blk.%d.attn_k.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wv, false, 2, skv, "blk.%d.attn_v.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wo, false, 2, so, "blk.%d.attn_output.weight", il));
        OB_TRY(norm_tensor(m, &L->bq, !v->qkv_bias, Q, NAME("attn_q.bias")));
        OB_TRY(norm_tensor(m, &L->bk, !v->qkv_bias, KV, NAME("attn_k.bias")));
        OB_TRY(norm_tensor(m, &L->bv, !v->qkv_bias, KV, NAME("attn_v.bias")));
        OB_TRY(norm_tensor(m, &L->bo, true, E, NAME("attn_output.bias")));
        if (v->qk_norm_whole) {
            OB_TRY(norm_tensor(m, &L->q_norm, false, Q, NAME("attn_q_norm.weight")));
            OB_TRY(norm_tensor(m, &L->k_norm, false, KV, NAME("attn_k_norm.weight")));
        }
        if (v->post_attn_norm) OB_TRY(norm_tensor(m, &L->post_attn_norm, false, E, NAME("post_attention_norm.weight")));
        if (v->sub_norms) {
            OB_TRY(norm_tensor(m, &L->attn_sub_norm, false, Q, NAME("attn_sub_norm.weight")));
            OB_TRY(norm_tensor(m, &L->ffn_sub_norm, false, F, NAME("ffn_sub_norm.weight")));
        }
        if (v->ffn_norm && !v->layer_norm) {
            char suffix[64];
            snprintf(suffix, sizeof suffix, "%s.weight", v->ffn_norm);
            OB_TRY(norm_tensor(m, &L->ffn_norm, false, E, NAME(suffix)));
        }
        if (v->post_ffn_norm) OB_TRY(norm_tensor(m, &L->post_ffn_norm, false, E, NAME("post_ffw_norm.weight")));
        if (v->mlp == MLP_FUSED) {
            const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, NAME("ffn_up.weight"));
            if (!g) return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
            if (g->n_dims != 2 || g->ne[0] != E || g->ne[1] != 2 * F)
                return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld]; expected [%lld, %lld]", name,
                              (long long)g->ne[0], (long long)g->ne[1], (long long)E, (long long)(2 * F));
            OB_TRY(ob_model_tensor_rows(m, &L->w_gate, name, 0, F));
            OB_TRY(ob_model_tensor_rows(m, &L->w_up, NAME("ffn_up.weight"), F, F));
        } else {
            if (v->mlp == MLP_SWIGLU || v->mlp == MLP_RELU2_GATED)
                OB_TRY(ob_model_tensor(m, &L->w_gate, false, 2, sff, "blk.%d.ffn_gate.weight", il));
            OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sff, "blk.%d.ffn_up.weight", il));
        }
        OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sdown, "blk.%d.ffn_down.weight", il));
    }
#undef NAME
    return 0;
}

/* Workspace layout for n tokens (floats): x, h, q, k, v, att, gate, up. */
static size_t variant_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(2 * hp->n_embd + 2 * Q + 2 * KV + 2 * hp->n_ff);
}

/* The variant's norm of the rows of x over their whole length: RMSNorm times
 * w, or (olmo) LayerNorm without weight or bias. */
static int norm(ob_backend *b, const variant *v, const ob_hparams *hp, const ob_tensor *x, const ob_tensor *w,
                ob_tensor *out) {
    if (v->layer_norm) return b->ops->layer_norm(b, x, NULL, NULL, hp->norm_eps, out);
    return b->ops->rms_norm(b, x, w, hp->norm_eps, x->ne[0], out);
}

static int variant_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    const variant *v = variant_of(m);
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim,
                  KV = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    if (!v) return ob_err(OB_ERR_INTERNAL, "%s: no variant", m->arch_name);
    if (a->work_floats < variant_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");

    float *w = a->work;
    ob_tensor x, h, q, k, vv, att, gate, up;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;
    ob_tensor_f32_2d(&q, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&k, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&vv, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&att, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&gate, F, n, w), w += n * F;
    ob_tensor_f32_2d(&up, F, n, w);

    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, 1.0f / sqrtf((float)hp->head_dim), 0.0f, 0.0f};

    OB_TRY(op->get_rows(b, &m->tok_embd, a->tokens, n, &x));
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const ob_layer *L = &m->layers[il];
        const ob_tensor *in = &x;
        if (v->pre_attn_norm) {
            OB_TRY(norm(b, v, hp, &x, &L->attn_norm, &h));
            in = &h;
        }
        OB_TRY(op->matmul(b, &L->wq, in, L->bq.data ? &L->bq : NULL, &q));
        OB_TRY(op->matmul(b, &L->wk, in, L->bk.data ? &L->bk : NULL, &k));
        OB_TRY(op->matmul(b, &L->wv, in, L->bv.data ? &L->bv : NULL, &vv));
        if (v->qk_norm_whole) {
            OB_TRY(op->rms_norm(b, &q, &L->q_norm, hp->norm_eps, Q, &q));
            OB_TRY(op->rms_norm(b, &k, &L->k_norm, hp->norm_eps, KV, &k));
        }
        if (!v->no_rope_step || (il + 1) % v->no_rope_step != 0) {
            OB_TRY(op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, &hp->rope));
            OB_TRY(op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, &hp->rope));
        }
        OB_TRY(op->kv_write(b, a->kv, (int)il, &k, &vv, a->slots));
        OB_TRY(op->attention(b, a->kv, (int)il, &q, a->attn, &ap, &att));
        if (v->sub_norms) OB_TRY(op->rms_norm(b, &att, &L->attn_sub_norm, hp->norm_eps, Q, &att));
        OB_TRY(op->matmul(b, &L->wo, &att, L->bo.data ? &L->bo : NULL, &h));
        if (v->post_attn_norm) OB_TRY(op->rms_norm(b, &h, &L->post_attn_norm, hp->norm_eps, E, &h));
        OB_TRY(op->add(b, &x, &h, &x));

        in = &x;
        if (v->ffn_norm) {
            OB_TRY(norm(b, v, hp, &x, &L->ffn_norm, &h));
            in = &h;
        }
        if (v->mlp == MLP_RELU2) {
            OB_TRY(op->matmul(b, &L->w_up, in, NULL, &up));
            OB_TRY(op->glu(b, OB_ACT_RELU2, &up, NULL, &up));
            OB_TRY(op->matmul(b, &L->w_down, &up, NULL, &h));
        } else {
            OB_TRY(op->matmul(b, &L->w_gate, in, NULL, &gate));
            OB_TRY(op->matmul(b, &L->w_up, in, NULL, &up));
            OB_TRY(op->glu(b, v->mlp == MLP_RELU2_GATED ? OB_ACT_RELU2 : OB_ACT_SILU, &gate, &up, &gate));
            if (v->sub_norms) OB_TRY(op->rms_norm(b, &gate, &L->ffn_sub_norm, hp->norm_eps, F, &gate));
            OB_TRY(op->matmul(b, &L->w_down, &gate, NULL, &h));
        }
        if (v->post_ffn_norm) OB_TRY(op->rms_norm(b, &h, &L->post_ffn_norm, hp->norm_eps, E, &h));
        OB_TRY(op->add(b, &x, &h, &x));
    }
    if (a->n_out == 0) return 0;
    /* Only the rows that want logits go through the final norm and output. */
    ob_tensor xo, lg;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->embd_only ? a->logits : (float *)h.data);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    OB_TRY(norm(b, v, hp, &xo, &m->output_norm, &xo));
    if (a->embd_only) return 0; /* embeddings: the normed hidden states are the output */
    ob_tensor_f32_2d(&lg, hp->n_vocab, a->n_out, a->logits);
    return op->matmul(b, &m->output, &xo, NULL, &lg);
}

/* verified: each against its transformers fixture in tests/data/models (test_models_ref) */
const ob_arch ob_arch_olmo2 = {"olmo2", true, variant_load, variant_work_size, variant_forward};
const ob_arch ob_arch_smollm3 = {"smollm3", true, variant_load, variant_work_size, variant_forward};
const ob_arch ob_arch_arcee = {"arcee", true, variant_load, variant_work_size, variant_forward};
const ob_arch ob_arch_ernie4_5 = {"ernie4_5", true, variant_load, variant_work_size, variant_forward};
const ob_arch ob_arch_seed_oss = {"seed_oss", true, variant_load, variant_work_size, variant_forward};
const ob_arch ob_arch_olmo = {"olmo", true, variant_load, variant_work_size, variant_forward};
const ob_arch ob_arch_glm4 = {"glm4", true, variant_load, variant_work_size, variant_forward};
const ob_arch ob_arch_bitnet = {"bitnet", true, variant_load, variant_work_size, variant_forward};
