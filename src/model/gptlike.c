/*
 * gptlike.c - the GPT lineage: LayerNorm decoders with biases, fused or
 * separate q/k/v, learned or rotary positions, sequential or parallel
 * residuals. One loader and one forward pass, configured per architecture
 * by a row of g_families:
 *
 *   stablelm    StableLM 2 / 3B-4E1T: gated SiLU MLP, partial NeoX RoPE, q/k/v biases
 *   gptneox     GPT-NeoX, Pythia: fused qkv, parallel residual with two norms, partial NeoX RoPE, erf GELU
 *   gpt2        GPT-2: learned positions, fused qkv, tanh GELU
 *   starcoder2  StarCoder2: biases everywhere, NeoX RoPE, sliding window, tanh GELU
 *   starcoder   GPTBigCode / StarCoder 1: GPT-2 with multi-query attention
 *   falcon      Falcon 7B: one norm feeding parallel attention and MLP, multi-query, erf GELU
 *   gptj        GPT-J: parallel, interleaved partial RoPE, biased output
 *   command-r   Cohere: LayerNorm without bias, parallel SwiGLU, logit_scale, interleaved RoPE
 *   nemotron    Nemotron: LayerNorm1P (the file holds 1 + w), squared-ReLU MLP, partial NeoX RoPE
 *   phi2        Phi-2: one norm, parallel attention and MLP, partial NeoX RoPE, biased output
 *   opt         OPT: GPT-2's block in nn.Linear form with separate q/k/v, ReLU MLP; learned
 *               positions whose offset of 2 the converter removed (row p is position p)
 *   bloom       BLOOM: ALiBi instead of positions, LayerNorm after the embeddings, fused qkv,
 *               tanh GELU
 * (CodeGen has no row: the converter writes it as a gptj file.)
 *
 * Per layer of a batch x [n, n_embd]:
 *     h = layernorm(x) * w (+ b)
 *     q, k, v = h Wq + bq, h Wk + bk, h Wv + bv      (or rows of the fused attn_qkv)
 *     q, k = rope over the first rope.dimension_count dims of each head (none for gpt2/starcoder)
 *     a = attention(q, k, v) Wo + bo
 *     sequential: x = x + a;  x = x + mlp(layernorm_ffn(x))
 *     parallel:   x = x + a + mlp(layernorm_ffn(x) if the layer has ffn_norm (gptneox), else h)
 *     mlp(u) = (act(u Wgate) * (u Wup)) Wdown (stablelm, command-r) or act(u Wup + bup) Wdown + bdown
 * with x = embd[tokens] (+ position_embd[pos] for gpt2/starcoder/opt; then layernorm(x) *
 * token_embd_norm (+ b) for bloom) first, attention scores + ALiBi for bloom, and
 * logits = (layernorm(x) * w (+ b)) Wout (+ bout), times logit_scale (command-r).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

typedef enum gl_pos {
    POS_LEARNED, /* position_embd.weight added to the embeddings */
    POS_ROPE,    /* rotary q and k */
    POS_ALIBI,   /* a per-head linear bias on the attention scores (max bias 8, as llama.cpp) */
} gl_pos;

/* BLOOM's ALiBi maximum bias: llama.cpp hard-codes it for the architecture, as do we. */
#define GL_ALIBI_MAX_BIAS 8.0f

typedef struct gl_family {
    const char *arch;
    gl_pos pos;
    ob_rope_mode rope_mode;
    bool gated;            /* ffn_gate: act(gate) * up */
    ob_act act;
    bool parallel;         /* default of <arch>.use_parallel_residual */
    bool parallel_key;     /* the file may say otherwise (stablelm, gptneox) */
} gl_family;

static const gl_family g_families[] = {
    {"stablelm", POS_ROPE, OB_ROPE_NEOX, true, OB_ACT_SILU, false, true},
    {"gptneox", POS_ROPE, OB_ROPE_NEOX, false, OB_ACT_GELU_ERF, true, true},
    {"gpt2", POS_LEARNED, OB_ROPE_NEOX, false, OB_ACT_GELU, false, false},
    {"starcoder2", POS_ROPE, OB_ROPE_NEOX, false, OB_ACT_GELU, false, false},
    {"starcoder", POS_LEARNED, OB_ROPE_NEOX, false, OB_ACT_GELU, false, false},
    {"falcon", POS_ROPE, OB_ROPE_NEOX, false, OB_ACT_GELU_ERF, true, false},
    {"gptj", POS_ROPE, OB_ROPE_NORMAL, false, OB_ACT_GELU, true, false},
    {"command-r", POS_ROPE, OB_ROPE_NORMAL, true, OB_ACT_SILU, true, false},
    {"nemotron", POS_ROPE, OB_ROPE_NEOX, false, OB_ACT_RELU2, false, false},
    {"phi2", POS_ROPE, OB_ROPE_NEOX, false, OB_ACT_GELU, true, false},
    {"opt", POS_LEARNED, OB_ROPE_NEOX, false, OB_ACT_RELU, false, false},
    {"bloom", POS_ALIBI, OB_ROPE_NEOX, false, OB_ACT_GELU, false, false},
};

static const gl_family *family_of(const ob_model_impl *m) {
    for (size_t i = 0; i < OB_ARRAY_LEN(g_families); i++)
        if (!strcmp(g_families[i].arch, m->arch_name)) return &g_families[i];
    return NULL;
}

/* Whether the residual is parallel: the family's default or the file's
 * use_parallel_residual. */
static int parallel_of(const ob_model_impl *m, const gl_family *f, bool *out) {
    *out = f->parallel;
    if (!f->parallel_key) return 0;
    char k[96];
    snprintf(k, sizeof k, "%s.use_parallel_residual", m->arch_name);
    int rc = ob_gguf_get_bool(m->gguf, k, out);
    if (rc == OB_ERR_NOT_FOUND) {
        ob_err_clear();
        *out = f->parallel;
        return 0;
    }
    return rc;
}

static int gl_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    const gl_family *f = family_of(m);
    if (!f) return ob_err(OB_ERR_INTERNAL, "gptlike.c: no family row for %s", m->arch_name);
    bool parallel;
    OB_TRY(parallel_of(m, f, &parallel));
    hp->parallel_residual = parallel;
    OB_TRY(ob_model_load_common(m, "attention.layer_norm_epsilon"));
    if (f->pos == POS_ROPE) {
        OB_TRY(ob_model_load_rope(m, f->rope_mode));
        if (hp->rope_scaling != OB_ROPE_SCALING_NONE)
            return ob_err(OB_ERR_UNSUPPORTED, "%s: RoPE scaling is not supported for this architecture", m->arch_name);
    }
    OB_TRY(ob_model_key_u32_opt(m, "attention.sliding_window", &hp->sliding_window));
    hp->logit_scale = 1.0f;
    OB_TRY(ob_model_key_f32_opt(m, "logit_scale", &hp->logit_scale));
    if (!(hp->logit_scale > 0.0f)) return ob_err(OB_ERR_FORMAT, "%s.logit_scale must be > 0", m->arch_name);

    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, F = hp->n_ff;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    if (f->pos == POS_LEARNED) {
        int64_t pos_shape[2] = {E, -1};
        OB_TRY(ob_model_tensor(m, &m->pos_embd, false, 2, pos_shape, "position_embd.weight"));
    }
    OB_TRY(ob_model_tensor(m, &m->tok_embd_norm, f->pos != POS_ALIBI, 1, &E, "token_embd_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->tok_embd_norm_b, true, 1, &E, "token_embd_norm.bias"));
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
        /* sequential layers need the pre-MLP norm; parallel ones may have one (gptneox) */
        OB_TRY(ob_model_tensor(m, &L->ffn_norm, parallel, 1, &E, "blk.%d.ffn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_norm_b, true, 1, &E, "blk.%d.ffn_norm.bias", il));
        OB_TRY(ob_model_tensor(m, &L->w_gate, !f->gated, 2, sff, "blk.%d.ffn_gate.weight", il));
        OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sff, "blk.%d.ffn_up.weight", il));
        OB_TRY(ob_model_tensor(m, &L->b_up, true, 1, &F, "blk.%d.ffn_up.bias", il));
        OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sdown, "blk.%d.ffn_down.weight", il));
        OB_TRY(ob_model_tensor(m, &L->b_down, true, 1, &E, "blk.%d.ffn_down.bias", il));
        const ob_tensor *small[] = {&L->attn_norm, &L->attn_norm_b, &L->ffn_norm, &L->ffn_norm_b, &L->bq,
                                    &L->bk,        &L->bv,          &L->bo,       &L->b_up,       &L->b_down};
        OB_TRY(ob_model_check_f32(small, OB_ARRAY_LEN(small)));
    }
    const ob_tensor *heads[] = {&m->output_norm, &m->output_norm_b, &m->output_b, &m->tok_embd_norm,
                                &m->tok_embd_norm_b};
    return ob_model_check_f32(heads, OB_ARRAY_LEN(heads));
}

/* Workspace (floats) for n tokens: x, h, a, f, q, k, v, att, gate, up;
 * plus the position rows (learned positions). */
static size_t gl_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(4 * hp->n_embd + 2 * Q + 2 * KV + 2 * hp->n_ff);
}

static const ob_tensor *opt(const ob_tensor *t) { return t->data ? t : NULL; }

/* out = mlp(u): gated or not, biases where the layer has them. */
static int mlp(ob_backend *b, const gl_family *f, const ob_layer *L, const ob_tensor *u, ob_tensor *gate,
               ob_tensor *up, ob_tensor *out) {
    const ob_backend_ops *op = b->ops;
    OB_TRY(op->matmul(b, &L->w_up, u, opt(&L->b_up), up));
    if (f->gated) {
        OB_TRY(op->matmul(b, &L->w_gate, u, NULL, gate));
        OB_TRY(op->glu(b, f->act, gate, up, up));
    } else {
        OB_TRY(op->glu(b, f->act, up, NULL, up));
    }
    return op->matmul(b, &L->w_down, up, opt(&L->b_down), out);
}

static int gl_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const gl_family *f = family_of(m);
    if (!f) return ob_err(OB_ERR_INTERNAL, "gptlike.c: no family row for %s", m->arch_name);
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim,
                  F = hp->n_ff;
    if (a->work_floats < gl_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");

    float *w = a->work;
    ob_tensor x, h, at, fo, q, k, v, att, gate, up;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;
    ob_tensor_f32_2d(&at, E, n, w), w += n * E;
    ob_tensor_f32_2d(&fo, E, n, w), w += n * E;
    ob_tensor_f32_2d(&q, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&k, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&v, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&att, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&gate, F, n, w), w += n * F;
    ob_tensor_f32_2d(&up, F, n, w);
    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, 1.0f / sqrtf((float)hp->head_dim),
                         0.0f, f->pos == POS_ALIBI ? GL_ALIBI_MAX_BIAS : 0.0f};
    if (f->pos == POS_ALIBI && !ob_backend_has(b, OB_FEATURE_ALIBI))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: the %s backend's attention has no ALiBi", m->arch_name, op->name);
    if (f->act == OB_ACT_RELU && !ob_backend_has(b, OB_FEATURE_ACT_RELU))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: the %s backend has no ReLU activation", m->arch_name, op->name);

    OB_TRY(op->get_rows(b, &m->tok_embd, a->tokens, n, &x));
    if (m->pos_embd.data) {
        for (int64_t i = 0; i < n; i++)
            if (a->pos[i] < 0 || a->pos[i] >= m->pos_embd.ne[1])
                return ob_err(OB_ERR_RANGE, "%s: position %d is past the %lld learned positions", m->arch_name,
                              a->pos[i], (long long)m->pos_embd.ne[1]);
        OB_TRY(op->get_rows(b, &m->pos_embd, a->pos, n, &h));
        OB_TRY(op->add(b, &x, &h, &x));
    }
    if (m->tok_embd_norm.data)
        OB_TRY(op->layer_norm(b, &x, &m->tok_embd_norm, opt(&m->tok_embd_norm_b), hp->norm_eps, &x));
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const ob_layer *L = &m->layers[il];
        OB_TRY(op->layer_norm(b, &x, &L->attn_norm, opt(&L->attn_norm_b), hp->norm_eps, &h));
        OB_TRY(op->matmul(b, &L->wq, &h, opt(&L->bq), &q));
        OB_TRY(op->matmul(b, &L->wk, &h, opt(&L->bk), &k));
        OB_TRY(op->matmul(b, &L->wv, &h, opt(&L->bv), &v));
        if (f->pos == POS_ROPE) {
            OB_TRY(op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, &hp->rope));
            OB_TRY(op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, &hp->rope));
        }
        OB_TRY(op->kv_write(b, a->kv, (int)il, &k, &v, a->slots));
        OB_TRY(op->attention(b, a->kv, (int)il, &q, a->attn, &ap, &att));
        OB_TRY(op->matmul(b, &L->wo, &att, opt(&L->bo), &at));
        if (L->ffn_norm.data) {
            /* sequential: the MLP reads x after the attention; parallel (gptneox): x before it */
            bool seq = !hp->parallel_residual;
            if (seq) OB_TRY(op->add(b, &x, &at, &x));
            OB_TRY(op->layer_norm(b, &x, &L->ffn_norm, opt(&L->ffn_norm_b), hp->norm_eps, &h));
            OB_TRY(mlp(b, f, L, &h, &gate, &up, &fo));
            if (!seq) OB_TRY(op->add(b, &x, &at, &x));
        } else { /* parallel with one norm: the MLP reads h too */
            OB_TRY(mlp(b, f, L, &h, &gate, &up, &fo));
            OB_TRY(op->add(b, &x, &at, &x));
        }
        OB_TRY(op->add(b, &x, &fo, &x));
    }
    if (a->n_out == 0) return 0;
    ob_tensor xo, lg;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->embd_only ? a->logits : (float *)h.data);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    OB_TRY(op->layer_norm(b, &xo, &m->output_norm, opt(&m->output_norm_b), hp->norm_eps, &xo));
    if (a->embd_only) return 0; /* embeddings: the normed hidden states */
    ob_tensor_f32_2d(&lg, hp->n_vocab, a->n_out, a->logits);
    OB_TRY(op->matmul(b, &m->output, &xo, opt(&m->output_b), &lg));
    if (hp->logit_scale != 1.0f) OB_TRY(op->scale(b, &lg, hp->logit_scale, &lg));
    return 0;
}

const ob_arch ob_arch_stablelm = {"stablelm", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_gptneox = {"gptneox", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_gpt2 = {"gpt2", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_starcoder2 = {"starcoder2", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_starcoder = {"starcoder", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_falcon = {"falcon", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_gptj = {"gptj", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_command_r = {"command-r", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_nemotron = {"nemotron", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_phi2 = {"phi2", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_opt = {"opt", true, gl_load, gl_work_size, gl_forward};
const ob_arch ob_arch_bloom = {"bloom", true, gl_load, gl_work_size, gl_forward};
