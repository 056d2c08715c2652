/*
 * bert.c - bidirectional encoders (embedding models): `bert` (BERT,
 * sentence-transformers' MiniLM/BGE/E5 style checkpoints) and `modern-bert`
 * (ModernBERT), in llama.cpp's GGUF layout. They give hidden states, not
 * logits: the engine runs them only with embeddings on
 * (ob_context_set_embeddings), and the server pools the rows
 * (/v1/embeddings). Pooling and normalisation are the caller's.
 *
 * bert, per batch of n tokens of one or more whole sequences:
 *     x = LN(token_embd[tok] + token_types[0] + position_embd[pos]) * w + b
 *     per layer:  a = attention(x Wq + bq, x Wk + bk, x Wv + bv) Wo + bo
 *                 x = LN(x + a)            (attn_output_norm, kept in L->attn_norm)
 *                 f = gelu_erf(x Wup + bup) Wdown + bdown
 *                 x = LN(x + f)            (layer_output_norm, kept in L->ffn_norm)
 *     out = x (no final norm). Token types are 0 everywhere, as llama.cpp does.
 *
 * nomic-bert (nomic-embed-text; mapped, not verified: llama.cpp's files
 * load, our converter does not write them): bert without position_embd,
 * with NeoX RoPE on q and k (rope.freq_base), q/k/v fused in attn_qkv,
 * and a gated SiLU MLP, (silu(x Wgate) * (x Wup)) Wdown, as llama.cpp's
 * graph runs it; biases only where the file has them.
 *
 * modern-bert:
 *     x = LN(token_embd[tok]) (token_embd_norm, no bias)
 *     per layer:  h = LN(x) (attn_norm; layer 0 has none: h = x)
 *                 q, k, v = rows of h Wqkv; q, k = NeoX RoPE, base rope.freq_base on
 *                 global layers, rope.freq_base_swa on local ones
 *                 x = x + attention(q, k, v) Wo
 *                 x = x + (gelu_erf(h2 Wi[:F]) * (h2 Wi[F:])) Wo_mlp,  h2 = LN(x) (ffn_norm)
 *     out = LN(x) (output_norm). Layer il is global when il % sliding_window_pattern == 0;
 *     a local layer's token at p sees |p - q| <= sliding_window / 2 (HF's local_attention / 2
 *     on each side). LayerNorms have no bias (norm_bias false), projections none either.
 *
 * Attention is non-causal: every token sees its whole sequence (or its
 * two-sided window). The attention op gives a token the cache positions
 * [kv_start, pos] of ob_attn_token; an encoder fills its own token array
 * with pos = the last position the token sees (the sequence's end, or
 * p + window / 2) and kv_start = the first, after writing the whole
 * sequence's K/V - RoPE and the cache slots use the real positions, so
 * the op needs nothing new (the CPU and CUDA backends read pos only as the
 * window's end). Hence a sequence must come whole in one batch, starting
 * at position 0; the forward pass refuses anything else.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

extern const ob_arch ob_arch_bert, ob_arch_modern_bert, ob_arch_nomic_bert;

bool ob_arch_is_encoder(const ob_arch *a) {
    return a == &ob_arch_bert || a == &ob_arch_modern_bert || a == &ob_arch_nomic_bert;
}

static bool is_modern(const ob_model_impl *m) { return m->arch == &ob_arch_modern_bert; }
static bool is_nomic(const ob_model_impl *m) { return m->arch == &ob_arch_nomic_bert; }

/* <arch>.attention.causal, when present, must be false. */
static int check_noncausal(const ob_model_impl *m) {
    char k[96];
    snprintf(k, sizeof k, "%s.attention.causal", m->arch_name);
    bool causal = false;
    int rc = ob_gguf_get_bool(m->gguf, k, &causal);
    if (rc == OB_ERR_NOT_FOUND) {
        ob_err_clear();
        return 0;
    }
    OB_TRY(rc);
    if (causal) return ob_err(OB_ERR_UNSUPPORTED, "%s is true: only bidirectional encoders are supported", k);
    return 0;
}

static int bert_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    const bool modern = is_modern(m), nomic = is_nomic(m);
    OB_TRY(ob_model_load_common(m, "attention.layer_norm_epsilon"));
    OB_TRY(check_noncausal(m));
    if (hp->n_head_kv != hp->n_head)
        return ob_err(OB_ERR_UNSUPPORTED, "%s: head_count_kv %lld != head_count %lld", m->arch_name,
                      (long long)hp->n_head_kv, (long long)hp->n_head);
    if (modern || nomic) {
        OB_TRY(ob_model_load_rope(m, OB_ROPE_NEOX));
        if (hp->rope_scaling != OB_ROPE_SCALING_NONE)
            return ob_err(OB_ERR_UNSUPPORTED, "%s: RoPE scaling is not supported", m->arch_name);
    }
    if (modern) {
        OB_TRY(ob_model_key_u32(m, "attention.sliding_window", &hp->swa_window));
        hp->swa_pattern = 3; /* ModernBERT's global_attn_every_n_layers default */
        OB_TRY(ob_model_key_u32_opt(m, "attention.sliding_window_pattern", &hp->swa_pattern));
        if (hp->swa_window < 0 || hp->swa_pattern <= 0)
            return ob_err(OB_ERR_FORMAT, "%s.attention.sliding_window %lld / sliding_window_pattern %lld", m->arch_name,
                          (long long)hp->swa_window, (long long)hp->swa_pattern);
        hp->rope_swa = hp->rope;
        hp->rope_swa.freq_base = 10000.0f; /* ModernBERT's local_rope_theta default */
        OB_TRY(ob_model_key_f32_opt(m, "rope.freq_base_swa", &hp->rope_swa.freq_base));
        if (!(hp->rope_swa.freq_base > 1.0f)) return ob_err(OB_ERR_FORMAT, "%s.rope.freq_base_swa must be > 1", m->arch_name);
    }
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, F = hp->n_ff;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    OB_TRY(ob_model_tensor(m, &m->tok_embd_norm, false, 1, &E, "token_embd_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->tok_embd_norm_b, true, 1, &E, "token_embd_norm.bias"));
    if (!modern) {
        int64_t pos_shape[2] = {E, -1}, types_shape[2] = {E, -1};
        OB_TRY(ob_model_tensor(m, &m->pos_embd, nomic, 2, pos_shape, "position_embd.weight"));
        OB_TRY(ob_model_tensor(m, &m->type_embd, true, 2, types_shape, "token_types.weight"));
    } else {
        OB_TRY(ob_model_tensor(m, &m->output_norm, false, 1, &E, "output_norm.weight"));
        OB_TRY(ob_model_tensor(m, &m->output_norm_b, true, 1, &E, "output_norm.bias"));
    }
    m->layers = ob_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ob_err(OB_ERR_OOM, "layers");
    int64_t so[2] = {Q, E}, sup[2] = {E, F}, sdown[2] = {F, E};
    for (int64_t i = 0; i < hp->n_layer; i++) {
        ob_layer *L = &m->layers[i];
        const int il = (int)i;
        OB_TRY(ob_model_bind_qkv(m, L, il));
        OB_TRY(ob_model_tensor(m, &L->wo, false, 2, so, "blk.%d.attn_output.weight", il));
        OB_TRY(ob_model_tensor(m, &L->bo, true, 1, &E, "blk.%d.attn_output.bias", il));
        OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sdown, "blk.%d.ffn_down.weight", il));
        OB_TRY(ob_model_tensor(m, &L->b_down, true, 1, &E, "blk.%d.ffn_down.bias", il));
        if (!modern) {
            /* post-norms: after attention (attn_output_norm) and after the MLP (layer_output_norm) */
            OB_TRY(ob_model_tensor(m, &L->attn_norm, false, 1, &E, "blk.%d.attn_output_norm.weight", il));
            OB_TRY(ob_model_tensor(m, &L->attn_norm_b, true, 1, &E, "blk.%d.attn_output_norm.bias", il));
            OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.layer_output_norm.weight", il));
            OB_TRY(ob_model_tensor(m, &L->ffn_norm_b, true, 1, &E, "blk.%d.layer_output_norm.bias", il));
            OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sup, "blk.%d.ffn_up.weight", il));
            OB_TRY(ob_model_tensor(m, &L->b_up, true, 1, &F, "blk.%d.ffn_up.bias", il));
            OB_TRY(ob_model_tensor(m, &L->w_gate, !nomic, 2, sup, "blk.%d.ffn_gate.weight", il)); /* nomic: SwiGLU */
        } else {
            /* pre-norms; HF's layer 0 has none (Identity) */
            OB_TRY(ob_model_tensor(m, &L->attn_norm, true, 1, &E, "blk.%d.attn_norm.weight", il));
            OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.ffn_norm.weight", il));
            /* GeGLU: ffn_up [n_embd, 2 n_ff], the activated half first (HF's Wi chunk order) */
            char name[96];
            snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il);
            const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
            if (!g) return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
            if (g->n_dims != 2 || g->ne[0] != E || g->ne[1] != 2 * F)
                return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld]; expected [%lld, %lld]", name,
                              (long long)g->ne[0], (long long)g->ne[1], (long long)E, (long long)(2 * F));
            OB_TRY(ob_model_tensor_rows(m, &L->w_gate, name, 0, F));
            OB_TRY(ob_model_tensor_rows(m, &L->w_up, name, F, F));
        }
        const ob_tensor *small[] = {&L->attn_norm, &L->attn_norm_b, &L->ffn_norm, &L->ffn_norm_b, &L->bq,
                                    &L->bk,        &L->bv,          &L->bo,       &L->b_up,       &L->b_down};
        OB_TRY(ob_model_check_f32(small, OB_ARRAY_LEN(small)));
    }
    const ob_tensor *heads[] = {&m->tok_embd_norm, &m->tok_embd_norm_b, &m->output_norm, &m->output_norm_b};
    return ob_model_check_f32(heads, OB_ARRAY_LEN(heads));
}

/* Workspace (floats) for n tokens: x, h, a [E]; q, att [Q]; k, v [KV];
 * gate, up [F]; one token-type row [E]. */
static size_t bert_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    const int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(3 * hp->n_embd + 2 * Q + 2 * KV + 2 * hp->n_ff) + (size_t)hp->n_embd;
}

static const ob_tensor *opt(const ob_tensor *t) { return t->data ? t : NULL; }

/* What each token sees: full[i] its whole sequence, local[i] (when not
 * NULL) the two-sided window of `half` positions. A sequence is a run of
 * tokens with one block table; it must start at position 0 and hold
 * consecutive positions (the engine checks that positions continue), and
 * may not appear twice in the batch. */
static int encoder_windows(const ob_model_impl *m, const ob_forward_args *a, int64_t half, ob_attn_token *full,
                           ob_attn_token *local) {
    const int64_t n = a->n_tokens;
    for (int64_t s = 0; s < n;) {
        int64_t e = s + 1;
        while (e < n && a->attn[e].block_table == a->attn[s].block_table) e++;
        if (a->attn[s].pos != 0)
            return ob_err(OB_ERR_INVALID_ARG,
                          "%s is an encoder: a sequence must come whole in one batch from position 0 (batch index %lld "
                          "continues one at position %d)",
                          m->arch_name, (long long)s, a->attn[s].pos);
        for (int64_t j = 0; j < s; j++)
            if (a->attn[j].block_table == a->attn[s].block_table)
                return ob_err(OB_ERR_INVALID_ARG, "%s is an encoder: a sequence's tokens must be consecutive in the batch",
                              m->arch_name);
        const int32_t last = a->attn[e - 1].pos;
        for (int64_t i = s; i < e; i++) {
            const int32_t p = a->attn[i].pos;
            full[i] = a->attn[i];
            full[i].kv_start = 0;
            full[i].pos = last; /* the window's end, not the query's position (see the top) */
            if (local) {
                local[i] = full[i];
                local[i].kv_start = p - half > 0 ? (int32_t)(p - half) : 0;
                local[i].pos = p + half < last ? (int32_t)(p + half) : last;
            }
        }
        s = e;
    }
    return 0;
}

static int bert_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const bool modern = is_modern(m), nomic = is_nomic(m);
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim,
                  F = hp->n_ff;
    if (!a->embd_only && a->n_out > 0)
        return ob_err(OB_ERR_UNSUPPORTED,
                      "%s is an encoder (an embedding model): it gives embeddings, not logits; text generation is not "
                      "possible (serve it with --embeddings)",
                      m->arch_name);
    if (a->work_floats < bert_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");
    if (m->pos_embd.data)
        for (int64_t i = 0; i < n; i++)
            if (a->pos[i] < 0 || a->pos[i] >= m->pos_embd.ne[1])
                return ob_err(OB_ERR_RANGE, "%s: position %d is past the %lld learned positions", m->arch_name, a->pos[i],
                              (long long)m->pos_embd.ne[1]);

    float *w = a->work;
    ob_tensor x, h, at, q, k, v, att, gate, up, trow;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;
    ob_tensor_f32_2d(&at, E, n, w), w += n * E;
    ob_tensor_f32_2d(&q, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&k, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&v, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&att, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&gate, F, n, w), w += n * F;
    ob_tensor_f32_2d(&up, F, n, w), w += n * F;
    ob_tensor_f32_2d(&trow, E, 1, w);
    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, 1.0f / sqrtf((float)hp->head_dim),
                         0.0f, 0.0f};

    ob_attn_token *full = ob_malloc((size_t)n * (modern ? 2 : 1) * sizeof *full);
    if (!full) return ob_err(OB_ERR_OOM, "attention windows");
    ob_attn_token *local = modern ? full + n : NULL;
    int rc = encoder_windows(m, a, hp->swa_window / 2, full, local);

    if (rc == 0) rc = op->get_rows(b, &m->tok_embd, a->tokens, n, &x);
    if (rc == 0 && !modern) {
        if (m->pos_embd.data) rc = op->get_rows(b, &m->pos_embd, a->pos, n, &h);
        if (rc == 0 && m->pos_embd.data) rc = op->add(b, &x, &h, &x);
        if (rc == 0 && m->type_embd.data) { /* token type 0 everywhere (one sentence) */
            const int32_t type0 = 0;
            rc = op->get_rows(b, &m->type_embd, &type0, 1, &trow);
            if (rc == 0) rc = op->add(b, &x, &trow, &x);
        }
    }
    if (rc == 0) rc = op->layer_norm(b, &x, &m->tok_embd_norm, opt(&m->tok_embd_norm_b), hp->norm_eps, &x);
    for (int64_t il = 0; il < hp->n_layer && rc == 0; il++) {
        const ob_layer *L = &m->layers[il];
        const bool is_local = modern && il % hp->swa_pattern != 0;
        const ob_tensor *in = &x;
        if (modern && L->attn_norm.data) {
            rc = op->layer_norm(b, &x, &L->attn_norm, opt(&L->attn_norm_b), hp->norm_eps, &h);
            in = &h;
        }
        if (rc == 0) rc = op->matmul(b, &L->wq, in, opt(&L->bq), &q);
        if (rc == 0) rc = op->matmul(b, &L->wk, in, opt(&L->bk), &k);
        if (rc == 0) rc = op->matmul(b, &L->wv, in, opt(&L->bv), &v);
        if (rc == 0 && (modern || nomic)) {
            const ob_rope_params *rp = is_local ? &hp->rope_swa : &hp->rope;
            rc = op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, rp);
            if (rc == 0) rc = op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, rp);
        }
        if (rc == 0) rc = op->kv_write(b, a->kv, (int)il, &k, &v, a->slots);
        if (rc == 0) rc = op->attention(b, a->kv, (int)il, &q, is_local ? local : full, &ap, &att);
        if (rc == 0) rc = op->matmul(b, &L->wo, &att, opt(&L->bo), &at);
        if (rc == 0) rc = op->add(b, &x, &at, &x);
        if (rc < 0) break;
        if (!modern) {
            rc = op->layer_norm(b, &x, &L->attn_norm, opt(&L->attn_norm_b), hp->norm_eps, &x);
            if (rc == 0) rc = op->matmul(b, &L->w_up, &x, opt(&L->b_up), &up);
            if (rc == 0 && L->w_gate.data) { /* nomic-bert */
                rc = op->matmul(b, &L->w_gate, &x, NULL, &gate);
                if (rc == 0) rc = op->glu(b, OB_ACT_SILU, &gate, &up, &up);
            } else if (rc == 0) {
                rc = op->glu(b, OB_ACT_GELU_ERF, &up, NULL, &up);
            }
            if (rc == 0) rc = op->matmul(b, &L->w_down, &up, opt(&L->b_down), &at);
            if (rc == 0) rc = op->add(b, &x, &at, &x);
            if (rc == 0) rc = op->layer_norm(b, &x, &L->ffn_norm, opt(&L->ffn_norm_b), hp->norm_eps, &x);
        } else {
            rc = op->layer_norm(b, &x, &L->ffn_norm, opt(&L->ffn_norm_b), hp->norm_eps, &h);
            if (rc == 0) rc = op->matmul(b, &L->w_gate, &h, NULL, &gate);
            if (rc == 0) rc = op->matmul(b, &L->w_up, &h, NULL, &up);
            if (rc == 0) rc = op->glu(b, OB_ACT_GELU_ERF, &gate, &up, &up);
            if (rc == 0) rc = op->matmul(b, &L->w_down, &up, opt(&L->b_down), &at);
            if (rc == 0) rc = op->add(b, &x, &at, &x);
        }
    }
    ob_free(full);
    OB_TRY(rc);
    if (a->n_out == 0) return 0;
    ob_tensor xo;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->logits);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    if (m->output_norm.data) OB_TRY(op->layer_norm(b, &xo, &m->output_norm, opt(&m->output_norm_b), hp->norm_eps, &xo));
    return 0;
}

const ob_arch ob_arch_bert = {"bert", true, bert_load, bert_work_size, bert_forward};
const ob_arch ob_arch_modern_bert = {"modern-bert", true, bert_load, bert_work_size, bert_forward};
const ob_arch ob_arch_nomic_bert = {"nomic-bert", false, bert_load, bert_work_size, bert_forward};
