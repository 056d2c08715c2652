/*
 * deepseek2.c - DeepSeek-V3 / R1 / Kimi-K2 (llama.cpp's `deepseek2` files):
 * multi-head latent attention (MLA), a few leading dense layers, then
 * mixture-of-experts layers with grouped sigmoid routing and shared experts.
 *
 * Attention, per token (H heads, nope + rope = the query/key head width,
 * R = kv_lora_rank, v = the value head width):
 *
 *     q      = q_b(rmsnorm(q_a h)) (or q h)       per head [q_nope (nope) | q_pe (rope)]
 *     [c | k_pe] = kv_a_mqa h;  c = rmsnorm(c)     the compressed kv (R) and one shared rope key
 *     k_nope_h = k_b_h^T c,  v_h = v_b_h c         kv_b_proj's two halves (attn_k_b, attn_v_b)
 *     out_h  = softmax((q_nope_h . k_nope_h + rope(q_pe_h) . rope(k_pe)) / sqrt(nope + rope)) v_h
 *     x     += o(out_1 .. out_H)
 *
 * The GGUF form (llama.cpp since its MLA support) stores kv_b_proj split
 * into attn_k_b (each head's k rows transposed) and attn_v_b, which is the
 * "absorbed" form: q_nope_h . (k_b_h^T c) = (k_b_h q_nope_h) . c. So this
 * file runs MLA as multi-query attention over the compressed cache: one KV
 * head of width R + rope holding [c | rope(k_pe)] per token (the same row
 * as K and V), queries [k_b_h q_nope_h | rope(q_pe_h)] per head, the scale
 * of the decompressed width, and v_b_h applied to the first R columns of
 * each head's output (the last rope columns, the value's copy of k_pe,
 * are dropped). The KV cache stores R + rope floats per token and layer
 * instead of H * (nope + rope + v), and the backend's attention op is used
 * as is (its V width equals its K width).
 *
 * The per-head pieces are cut and joined with gather_rows over views of
 * the activations as rows of `u` floats, u the common divisor of the
 * widths (64 for DeepSeek-V3): the backend has no strided copy, and gather
 * keeps every step a backend op (nothing is downloaded for attention).
 *
 * FFN: layers below leading_dense_block_count run a SiLU-gated MLP. The
 * others route each token (host code, as moe.c): s = sigmoid(router h),
 * choice = s + exp_probs_b; the experts form expert_group_count groups,
 * each scored by the sum of its two best choices; the best
 * expert_group_used_count groups stay open; the top-k experts by choice
 * among them (ties: the lower index) get weights s (renormalised to sum 1
 * when expert_weights_norm), times expert_weights_scale; the shared
 * experts (one MLP of width n_ff_exp * expert_shared_count) are added
 * ungated. Closed groups count as -inf for the top-k, as in llama.cpp.
 */
#include <math.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The unit of the gathers: divides every width that is cut or joined. */
static int64_t unit_of(const ob_hparams *hp) {
    return gcd64(gcd64(hp->qk_nope, hp->qk_rope), gcd64(hp->kv_lora_rank, hp->v_head_mla));
}

/* Bind the [ne0, ne1, n] tensor `blk.il.<what>` as n row ranges of ne1 rows, out[0..n). */
static int bind_stack(ob_model_impl *m, int il, const char *what, int64_t ne0, int64_t ne1, int64_t n, ob_tensor *out) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
    if (!g) return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
    if (g->n_dims != 3 || g->ne[0] != ne0 || g->ne[1] != ne1 || g->ne[2] != n)
        return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld]; expected [%lld, %lld, %lld]", name,
                      (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2], (long long)ne0, (long long)ne1,
                      (long long)n);
    for (int64_t e = 0; e < n; e++) OB_TRY(ob_model_tensor_rows(m, &out[e], name, e * ne1, ne1));
    return 0;
}

static int ds_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    OB_TRY(ob_model_key_u32(m, "embedding_length", &hp->n_embd));
    OB_TRY(ob_model_key_u32(m, "block_count", &hp->n_layer));
    OB_TRY(ob_model_key_u32(m, "feed_forward_length", &hp->n_ff));
    OB_TRY(ob_model_key_u32(m, "attention.head_count", &hp->n_head));
    hp->n_ctx_train = 2048;
    OB_TRY(ob_model_key_u32_opt(m, "context_length", &hp->n_ctx_train));
    OB_TRY(ob_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->norm_eps));
    int64_t n_head_kv = 1, key_len = 0, val_len = 0;
    OB_TRY(ob_model_key_u32_opt(m, "attention.head_count_kv", &n_head_kv));
    hp->q_lora_rank = 0;
    OB_TRY(ob_model_key_u32_opt(m, "attention.q_lora_rank", &hp->q_lora_rank));
    OB_TRY(ob_model_key_u32(m, "attention.kv_lora_rank", &hp->kv_lora_rank));
    OB_TRY(ob_model_key_u32(m, "attention.key_length", &key_len));
    OB_TRY(ob_model_key_u32(m, "attention.value_length", &val_len));
    OB_TRY(ob_model_key_u32(m, "attention.key_length_mla", &hp->qk_nope)); /* nope + rope for now */
    OB_TRY(ob_model_key_u32(m, "attention.value_length_mla", &hp->v_head_mla));
    OB_TRY(ob_model_key_u32(m, "rope.dimension_count", &hp->qk_rope));
    const int64_t E = hp->n_embd, H = hp->n_head, R = hp->kv_lora_rank, P = hp->qk_rope;
    hp->qk_nope -= P;
    if (E <= 0 || E > ((int64_t)1 << 20) || hp->n_layer <= 0 || hp->n_layer > 4096 || H <= 0 || H > 4096 ||
        hp->n_ff <= 0 || hp->n_ff > ((int64_t)1 << 24))
        return ob_err(OB_ERR_FORMAT, "deepseek2: bad embedding_length, block_count, feed_forward_length or head_count");
    if (R <= 0 || R > 65536 || P <= 0 || P % 2 || hp->qk_nope <= 0 || hp->qk_nope > 65536 || hp->v_head_mla <= 0 ||
        hp->v_head_mla > 65536 || hp->q_lora_rank < 0 || hp->q_lora_rank > 65536)
        return ob_err(OB_ERR_FORMAT, "deepseek2: bad MLA widths (kv_lora_rank %lld, rope %lld, key_length_mla, "
                      "value_length_mla)", (long long)R, (long long)P);
    /* the compressed (MLA) form: one KV head of [c | k_pe]; the
     * decompressed form (attn_kv_b, key_length = nope + rope) is not read */
    if (n_head_kv != 1 || key_len != R + P || val_len != R)
        return ob_err(OB_ERR_UNSUPPORTED,
                      "deepseek2: only the MLA form is supported (head_count_kv 1, key_length kv_lora_rank + "
                      "rope = %lld, value_length kv_lora_rank = %lld; the file has %lld, %lld, %lld)",
                      (long long)(R + P), (long long)R, (long long)n_head_kv, (long long)key_len, (long long)val_len);
    hp->n_head_kv = 1;
    hp->head_dim = hp->head_dim_v = R + P; /* the cached row */
    OB_TRY(ob_model_load_rope(m, OB_ROPE_NORMAL));
    if (hp->rope.n_rot != P) return ob_err(OB_ERR_INTERNAL, "deepseek2: rope width");
    if (hp->rope_scaling != OB_ROPE_SCALING_NONE || hp->rope.freq_scale != 1.0f)
        return ob_err(OB_ERR_UNSUPPORTED, "deepseek2: RoPE scaling (DeepSeek's YaRN with its softmax mscale) is not "
                      "supported yet");
    hp->attn_scale = 1.0f / sqrtf((float)(hp->qk_nope + P));
    hp->sliding_window = 0;

    OB_TRY(ob_model_key_u32(m, "leading_dense_block_count", &hp->n_dense_lead));
    OB_TRY(ob_model_key_u32(m, "expert_count", &hp->n_expert));
    OB_TRY(ob_model_key_u32(m, "expert_used_count", &hp->n_expert_used));
    OB_TRY(ob_model_key_u32(m, "expert_feed_forward_length", &hp->n_ff_exp));
    int64_t n_shared = 0, gating = 0;
    OB_TRY(ob_model_key_u32_opt(m, "expert_shared_count", &n_shared));
    OB_TRY(ob_model_key_u32_opt(m, "expert_gating_func", &gating));
    hp->n_group = hp->topk_group = 1;
    OB_TRY(ob_model_key_u32_opt(m, "expert_group_count", &hp->n_group));
    OB_TRY(ob_model_key_u32_opt(m, "expert_group_used_count", &hp->topk_group));
    hp->expert_scale = 1.0f;
    OB_TRY(ob_model_key_f32_opt(m, "expert_weights_scale", &hp->expert_scale));
    char key[96];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch_name);
    bool norm = false;
    int rc = ob_gguf_get_bool(m->gguf, key, &norm);
    if (rc != 0 && rc != OB_ERR_NOT_FOUND) return rc;
    ob_err_clear();
    hp->expert_norm = norm;
    const int64_t NE = hp->n_expert;
    if (hp->n_dense_lead < 0 || hp->n_dense_lead > hp->n_layer)
        return ob_err(OB_ERR_FORMAT, "deepseek2.leading_dense_block_count %lld > block_count", (long long)hp->n_dense_lead);
    const bool any_moe = hp->n_dense_lead < hp->n_layer;
    if (any_moe && (NE <= 0 || NE > 4096 || hp->n_expert_used <= 0 || hp->n_expert_used > NE || hp->n_ff_exp <= 0 ||
                    hp->n_ff_exp > ((int64_t)1 << 24) || n_shared < 0 || n_shared > 64))
        return ob_err(OB_ERR_FORMAT, "deepseek2: %lld experts, %lld used, width %lld, %lld shared", (long long)NE,
                      (long long)hp->n_expert_used, (long long)hp->n_ff_exp, (long long)n_shared);
    /* V2 files without the key route by softmax (llama.cpp's default); only sigmoid is here */
    if (any_moe && gating != 2)
        return ob_err(OB_ERR_UNSUPPORTED, "deepseek2.expert_gating_func %lld: only sigmoid (2, DeepSeek-V3) is "
                      "supported", (long long)gating);
    if (any_moe && (hp->n_group <= 0 || NE % hp->n_group || NE / hp->n_group < 2 || hp->topk_group <= 0 ||
                    hp->topk_group > hp->n_group || hp->n_expert_used > hp->topk_group * (NE / hp->n_group)))
        return ob_err(OB_ERR_FORMAT, "deepseek2: expert_group_count %lld / expert_group_used_count %lld do not fit %lld "
                      "experts, %lld used", (long long)hp->n_group, (long long)hp->topk_group, (long long)NE,
                      (long long)hp->n_expert_used);
    if (!(hp->expert_scale > 0.0f)) return ob_err(OB_ERR_FORMAT, "deepseek2.expert_weights_scale must be > 0");
    hp->n_ff_shexp = hp->n_ff_exp * n_shared;

    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    OB_TRY(ob_model_tensor(m, &m->output_norm, false, 1, &E, "output_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->output, true, 2, vocab_shape, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd;
    if (m->output_norm.type != OB_TYPE_F32) return ob_err(OB_ERR_UNSUPPORTED, "output_norm.weight must be f32");

    /* layers, then per layer the k_b and v_b heads and the experts, in one block */
    const int64_t per_layer = 2 * H + 3 * (any_moe ? NE : 0);
    size_t bytes = (size_t)hp->n_layer * sizeof(ob_layer) + (size_t)(hp->n_layer * per_layer) * sizeof(ob_tensor);
    m->layers = ob_calloc(1, bytes);
    if (!m->layers) return ob_err(OB_ERR_OOM, "layers");
    ob_tensor *arr = (ob_tensor *)(void *)(m->layers + hp->n_layer);
    const int64_t QL = hp->q_lora_rank, QD = H * (hp->qk_nope + P), FE = hp->n_ff_exp, FS = hp->n_ff_shexp;
    int64_t sqa[2] = {E, QL}, sqb[2] = {QL, QD}, sq[2] = {E, QD}, skva[2] = {E, R + P},
            so[2] = {H * hp->v_head_mla, E}, sff[2] = {E, hp->n_ff}, sffd[2] = {hp->n_ff, E}, sr[2] = {E, NE},
            ssh[2] = {E, FS}, sshd[2] = {FS, E};
    for (int64_t i = 0; i < hp->n_layer; i++) {
        ob_layer *L = &m->layers[i];
        const int il = (int)i;
        ob_tensor *a = arr + i * per_layer;
        OB_TRY(ob_model_tensor(m, &L->attn_norm, false, 1, &E, "blk.%d.attn_norm.weight", il));
        if (QL > 0) {
            OB_TRY(ob_model_tensor(m, &L->wq_a, false, 2, sqa, "blk.%d.attn_q_a.weight", il));
            OB_TRY(ob_model_tensor(m, &L->q_a_norm, false, 1, &QL, "blk.%d.attn_q_a_norm.weight", il));
            OB_TRY(ob_model_tensor(m, &L->wq_b, false, 2, sqb, "blk.%d.attn_q_b.weight", il));
            L->wq = L->wq_b; /* unused by the forward pass; the engine's model description reads wq's type */
        } else {
            OB_TRY(ob_model_tensor(m, &L->wq, false, 2, sq, "blk.%d.attn_q.weight", il));
        }
        OB_TRY(ob_model_tensor(m, &L->wkv_a, false, 2, skva, "blk.%d.attn_kv_a_mqa.weight", il));
        OB_TRY(ob_model_tensor(m, &L->kv_a_norm, false, 1, &R, "blk.%d.attn_kv_a_norm.weight", il));
        L->k_b = a;
        L->v_b = a + H;
        OB_TRY(bind_stack(m, il, "attn_k_b.weight", hp->qk_nope, R, H, L->k_b));
        OB_TRY(bind_stack(m, il, "attn_v_b.weight", R, hp->v_head_mla, H, L->v_b));
        OB_TRY(ob_model_tensor(m, &L->wo, false, 2, so, "blk.%d.attn_output.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.ffn_norm.weight", il));
        if (i < hp->n_dense_lead) {
            OB_TRY(ob_model_tensor(m, &L->w_gate, false, 2, sff, "blk.%d.ffn_gate.weight", il));
            OB_TRY(ob_model_tensor(m, &L->w_up, false, 2, sff, "blk.%d.ffn_up.weight", il));
            OB_TRY(ob_model_tensor(m, &L->w_down, false, 2, sffd, "blk.%d.ffn_down.weight", il));
        } else {
            OB_TRY(ob_model_tensor(m, &L->ffn_gate_inp, false, 2, sr, "blk.%d.ffn_gate_inp.weight", il));
            OB_TRY(ob_model_tensor(m, &L->exp_probs_b, false, 1, &NE, "blk.%d.exp_probs_b.bias", il));
            L->exp_gate = a + 2 * H;
            L->exp_up = L->exp_gate + NE;
            L->exp_down = L->exp_up + NE;
            OB_TRY(bind_stack(m, il, "ffn_gate_exps.weight", E, FE, NE, L->exp_gate));
            OB_TRY(bind_stack(m, il, "ffn_up_exps.weight", E, FE, NE, L->exp_up));
            OB_TRY(bind_stack(m, il, "ffn_down_exps.weight", FE, E, NE, L->exp_down));
            if (FS > 0) {
                OB_TRY(ob_model_tensor(m, &L->shexp_gate, false, 2, ssh, "blk.%d.ffn_gate_shexp.weight", il));
                OB_TRY(ob_model_tensor(m, &L->shexp_up, false, 2, ssh, "blk.%d.ffn_up_shexp.weight", il));
                OB_TRY(ob_model_tensor(m, &L->shexp_down, false, 2, sshd, "blk.%d.ffn_down_shexp.weight", il));
            }
        }
        const ob_tensor *small[] = {&L->attn_norm, &L->ffn_norm, &L->q_a_norm, &L->kv_a_norm, &L->exp_probs_b};
        OB_TRY(ob_model_check_f32(small, OB_ARRAY_LEN(small)));
    }
    return 0;
}

static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Workspace floats for n tokens: x, h, q_a, q, kv_a, the compressed kv
 * split and joined, the query pieces (latent + rope, per head), the
 * joined queries, the attention output, a per-head slice, the value
 * heads and their join; the FFN reuses the query/attention area. */
static size_t ds_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, H = hp->n_head, R = hp->kv_lora_rank, P = hp->qk_rope, K = R + P;
    const int64_t QD = H * (hp->qk_nope + P), FM = max3(hp->n_ff, hp->n_ff_exp, hp->n_ff_shexp);
    const int64_t attn = hp->q_lora_rank + QD + 3 * K + 3 * H * K + (R > hp->qk_nope ? R : hp->qk_nope) +
                         2 * H * hp->v_head_mla;
    const int64_t ffn = hp->n_expert + 1 + 2 * E + 2 * FM;
    return (size_t)n * (size_t)(2 * E + (attn > ffn ? attn : ffn));
}

/* Host index tables of one batch's gathers (rows of u floats). */
typedef struct mla_idx {
    int32_t *kv_split; /* [n K/u]    kv_a [c | k_pe] -> [all c | all k_pe] */
    int32_t *kv_join;  /* [n K/u]    back, after the norm and RoPE */
    int32_t *q_pe;     /* [n H P/u]  q -> the rope parts, [n][H P] */
    int32_t *q_nope;   /* [H][n nope/u] head h's nope part, [n][nope] */
    int32_t *q_join;   /* [n H K/u]  [latent of all heads | rope parts] -> [n][H][R | P] */
    int32_t *att;      /* [H][n R/u] head h's first R outputs, [n][R] */
    int32_t *o_join;   /* [n H v/u]  [v of head 0 | head 1 ...] -> [n][H v] */
} mla_idx;

static size_t mla_idx_count(const ob_hparams *hp, int64_t n, int64_t u) {
    const int64_t H = hp->n_head, R = hp->kv_lora_rank, P = hp->qk_rope, K = R + P;
    return (size_t)(n * (2 * K + H * P + H * hp->qk_nope + H * K + H * R + H * hp->v_head_mla) / u);
}

static void mla_idx_fill(const ob_hparams *hp, int64_t n, int64_t u, int32_t *buf, mla_idx *x) {
    const int64_t H = hp->n_head, R = hp->kv_lora_rank / u, P = hp->qk_rope / u, K = R + P,
                  N = hp->qk_nope / u, Q = N + P, V = hp->v_head_mla / u;
    x->kv_split = buf, buf += n * K;
    x->kv_join = buf, buf += n * K;
    x->q_pe = buf, buf += n * H * P;
    x->q_nope = buf, buf += H * n * N;
    x->q_join = buf, buf += n * H * K;
    x->att = buf, buf += H * n * R;
    x->o_join = buf;
    int64_t k = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < R; j++) x->kv_split[k++] = (int32_t)(t * K + j);
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < P; j++) x->kv_split[k++] = (int32_t)(t * K + R + j);
    k = 0;
    for (int64_t t = 0; t < n; t++) {
        for (int64_t j = 0; j < R; j++) x->kv_join[k++] = (int32_t)(t * R + j);
        for (int64_t j = 0; j < P; j++) x->kv_join[k++] = (int32_t)(n * R + t * P + j);
    }
    k = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < P; j++) x->q_pe[k++] = (int32_t)((t * H + h) * Q + N + j);
    k = 0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < N; j++) x->q_nope[k++] = (int32_t)((t * H + h) * Q + j);
    k = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t j = 0; j < R; j++) x->q_join[k++] = (int32_t)((h * n + t) * R + j);
            for (int64_t j = 0; j < P; j++) x->q_join[k++] = (int32_t)(H * n * R + (t * H + h) * P + j);
        }
    k = 0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < R; j++) x->att[k++] = (int32_t)((t * H + h) * K + j);
    k = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < V; j++) x->o_join[k++] = (int32_t)((h * n + t) * V + j);
}

/* A view of `n_rows` rows of u floats at p. */
static ob_tensor rows_of(float *p, int64_t n_rows, int64_t u) {
    ob_tensor t;
    ob_tensor_f32_2d(&t, u, n_rows, p);
    return t;
}

/* Host memory of one batch's routing. */
typedef struct route {
    float *scores;  /* [n][n_expert] router logits, then sigmoid scores */
    float *bias;    /* [n_expert] exp_probs_b */
    float *acc;     /* [n][n_embd] weighted expert outputs */
    float *y;       /* [n][n_embd] one expert's outputs, downloaded */
    float *w;       /* [n * k] weight of each (expert, slot), grouped by expert */
    float *selw;    /* [n * k] weights per token */
    float *gscore;  /* [n_group] */
    int32_t *count; /* [n_expert] */
    int32_t *start; /* [n_expert + 1] */
    int32_t *tok;   /* [n * k] token of each (expert, slot) */
    int32_t *sel;   /* [n * k] experts per token */
    uint8_t *open;  /* [n_group] groups a token may choose from */
} route;

/* The grouped top-k of one token; see the file comment. Returns nothing:
 * sel/selw get k experts and weights. */
static void route_one(const ob_hparams *hp, const float *s, const float *bias, float *gscore, uint8_t *open,
                      int32_t *sel, float *selw) {
    const int64_t NE = hp->n_expert, G = hp->n_group, per = NE / G, K = hp->n_expert_used;
    for (int64_t g = 0; g < G; g++) {
        float b1 = -INFINITY, b2 = -INFINITY;
        for (int64_t e = g * per; e < (g + 1) * per; e++) {
            const float c = s[e] + bias[e];
            if (c > b1) b2 = b1, b1 = c;
            else if (c > b2) b2 = c;
        }
        gscore[g] = b1 + b2;
        open[g] = 0;
    }
    for (int64_t k = 0; k < hp->topk_group; k++) {
        int64_t best = -1;
        for (int64_t g = 0; g < G; g++)
            if (!open[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
        open[best] = 1;
    }
    float wsum = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (int64_t e = 0; e < NE; e++) {
            if (!open[e / per]) continue;
            bool taken = false;
            for (int64_t j = 0; j < k; j++) taken |= sel[j] == e;
            if (!taken && (best < 0 || s[e] + bias[e] > s[best] + bias[best])) best = (int32_t)e;
        }
        sel[k] = best;
        selw[k] = s[best];
        wsum += s[best];
    }
    for (int64_t k = 0; k < K; k++) selw[k] = (hp->expert_norm ? selw[k] / wsum : selw[k]) * hp->expert_scale;
}

/* The MoE FFN of layer L on h [n][E] (replaced by its output). fb: device
 * scratch of n (n_expert + 1) + 2 n E + 2 n FM floats. */
static int ds_moe(ob_model_impl *m, ob_backend *b, const ob_layer *L, ob_tensor *h, int64_t n, float *fb, route *r) {
    const ob_hparams *hp = &m->hp;
    const ob_backend_ops *op = b->ops;
    const int64_t E = hp->n_embd, NE = hp->n_expert, K = hp->n_expert_used, FE = hp->n_ff_exp,
                  FM = max3(hp->n_ff, hp->n_ff_exp, hp->n_ff_shexp);
    float *logit = fb, *rows = logit + n * (NE + 1), *gate = rows + n * E, *up = gate + n * FM, *yd = up + n * FM;
    ob_tensor lg;
    ob_tensor_f32_2d(&lg, NE, n, logit);
    OB_TRY(op->matmul(b, &L->ffn_gate_inp, h, NULL, &lg));
    OB_TRY(op->download(b, r->scores, logit, (size_t)(n * NE) * sizeof(float)));
    OB_TRY(op->download(b, r->bias, L->exp_probs_b.data, (size_t)NE * sizeof(float)));
    for (int64_t i = 0; i < n * NE; i++) r->scores[i] = 1.0f / (1.0f + expf(-r->scores[i]));
    for (int64_t t = 0; t < n; t++)
        route_one(hp, r->scores + t * NE, r->bias, r->gscore, r->open, r->sel + t * K, r->selw + t * K);
    memset(r->count, 0, (size_t)NE * sizeof *r->count);
    for (int64_t i = 0; i < n * K; i++) r->count[r->sel[i]]++;
    r->start[0] = 0;
    for (int64_t e = 0; e < NE; e++) r->start[e + 1] = r->start[e] + r->count[e];
    memset(r->count, 0, (size_t)NE * sizeof *r->count);
    for (int64_t i = 0; i < n * K; i++) {
        int32_t e = r->sel[i], at = r->start[e] + r->count[e]++;
        r->tok[at] = (int32_t)(i / K);
        r->w[at] = r->selw[i];
    }
    memset(r->acc, 0, (size_t)(n * E) * sizeof(float));
    for (int64_t e = 0; e < NE; e++) {
        const int32_t ne = r->start[e + 1] - r->start[e];
        if (ne == 0) continue;
        const int32_t *idx = r->tok + r->start[e];
        ob_tensor xe, g, u, y;
        ob_tensor_f32_2d(&xe, E, ne, rows);
        ob_tensor_f32_2d(&g, FE, ne, gate);
        ob_tensor_f32_2d(&u, FE, ne, up);
        ob_tensor_f32_2d(&y, E, ne, yd);
        OB_TRY(op->gather_rows(b, h, idx, ne, &xe));
        OB_TRY(op->matmul(b, &L->exp_gate[e], &xe, NULL, &g));
        OB_TRY(op->matmul(b, &L->exp_up[e], &xe, NULL, &u));
        OB_TRY(op->glu(b, OB_ACT_SILU, &g, &u, &g));
        OB_TRY(op->matmul(b, &L->exp_down[e], &g, NULL, &y));
        OB_TRY(op->download(b, r->y, yd, (size_t)(ne * E) * sizeof(float)));
        const float *wt = r->w + r->start[e];
        for (int32_t i = 0; i < ne; i++) {
            float *acc = r->acc + (size_t)idx[i] * (size_t)E;
            const float *yy = r->y + (size_t)i * (size_t)E;
            for (int64_t j = 0; j < E; j++) acc[j] += wt[i] * yy[j];
        }
    }
    if (hp->n_ff_shexp > 0) { /* shared experts, ungated */
        const int64_t FS = hp->n_ff_shexp;
        ob_tensor g, u, y;
        ob_tensor_f32_2d(&g, FS, n, gate);
        ob_tensor_f32_2d(&u, FS, n, up);
        ob_tensor_f32_2d(&y, E, n, yd);
        OB_TRY(op->matmul(b, &L->shexp_gate, h, NULL, &g));
        OB_TRY(op->matmul(b, &L->shexp_up, h, NULL, &u));
        OB_TRY(op->glu(b, OB_ACT_SILU, &g, &u, &g));
        OB_TRY(op->matmul(b, &L->shexp_down, &g, NULL, &y));
        OB_TRY(op->download(b, r->y, yd, (size_t)(n * E) * sizeof(float)));
        for (int64_t i = 0; i < n * E; i++) r->acc[i] += r->y[i];
    }
    return op->upload(b, h->data, r->acc, (size_t)(n * E) * sizeof(float));
}

/* Multi-head latent attention of layer il on h [n][E]; output in `out` [n][E]. */
static int ds_attention(ob_model_impl *m, ob_backend *b, const ob_forward_args *a, int il, const ob_tensor *h,
                        const mla_idx *ix, int64_t u, float *w, ob_tensor *out) {
    const ob_hparams *hp = &m->hp;
    const ob_backend_ops *op = b->ops;
    const ob_layer *L = &m->layers[il];
    const int64_t n = a->n_tokens, H = hp->n_head, R = hp->kv_lora_rank, P = hp->qk_rope, K = R + P,
                  NO = hp->qk_nope, QD = H * (NO + P), QL = hp->q_lora_rank, V = hp->v_head_mla;
    float *qa = w, *q = qa + n * QL, *kva = q + n * QD, *kvs = kva + n * K, *kf = kvs + n * K, *qparts = kf + n * K,
          *qf = qparts + n * H * K, *att = qf + n * H * K, *slice = att + n * H * K,
          *vh = slice + n * (R > NO ? R : NO), *o = vh + n * H * V;
    ob_tensor tq, tkva, t1, t2;
    ob_tensor_f32_2d(&tq, QD, n, q);
    if (QL > 0) {
        ob_tensor tqa;
        ob_tensor_f32_2d(&tqa, QL, n, qa);
        OB_TRY(op->matmul(b, &L->wq_a, h, NULL, &tqa));
        OB_TRY(op->rms_norm(b, &tqa, &L->q_a_norm, hp->norm_eps, QL, &tqa));
        OB_TRY(op->matmul(b, &L->wq_b, &tqa, NULL, &tq));
    } else {
        OB_TRY(op->matmul(b, &L->wq, h, NULL, &tq));
    }
    /* the cached row: [rmsnorm(c) | rope(k_pe)] */
    ob_tensor_f32_2d(&tkva, K, n, kva);
    OB_TRY(op->matmul(b, &L->wkv_a, h, NULL, &tkva));
    t1 = rows_of(kva, n * K / u, u);
    t2 = rows_of(kvs, n * K / u, u);
    OB_TRY(op->gather_rows(b, &t1, ix->kv_split, n * K / u, &t2));
    ob_tensor c, kpe;
    ob_tensor_f32_2d(&c, R, n, kvs);
    ob_tensor_f32_2d(&kpe, P, n, kvs + n * R);
    OB_TRY(op->rms_norm(b, &c, &L->kv_a_norm, hp->norm_eps, R, &c));
    OB_TRY(op->rope(b, &kpe, 1, (int)P, a->pos, &hp->rope));
    t1 = rows_of(kf, n * K / u, u);
    OB_TRY(op->gather_rows(b, &t2, ix->kv_join, n * K / u, &t1));
    ob_tensor tk;
    ob_tensor_f32_2d(&tk, K, n, kf);
    OB_TRY(op->kv_write(b, a->kv, il, &tk, &tk, a->slots));

    /* queries: [k_b_h q_nope_h | rope(q_pe_h)] per head */
    t1 = rows_of(q, n * QD / u, u);
    float *lat = qparts, *qpe = qparts + H * n * R;
    t2 = rows_of(qpe, n * H * P / u, u);
    OB_TRY(op->gather_rows(b, &t1, ix->q_pe, n * H * P / u, &t2));
    ob_tensor tpe;
    ob_tensor_f32_2d(&tpe, H * P, n, qpe);
    OB_TRY(op->rope(b, &tpe, (int)H, (int)P, a->pos, &hp->rope));
    for (int64_t hh = 0; hh < H; hh++) {
        ob_tensor xs, ys;
        t2 = rows_of(slice, n * NO / u, u);
        OB_TRY(op->gather_rows(b, &t1, ix->q_nope + hh * n * NO / u, n * NO / u, &t2));
        ob_tensor_f32_2d(&xs, NO, n, slice);
        ob_tensor_f32_2d(&ys, R, n, lat + hh * n * R);
        OB_TRY(op->matmul(b, &L->k_b[hh], &xs, NULL, &ys));
    }
    t1 = rows_of(qparts, n * H * K / u, u);
    t2 = rows_of(qf, n * H * K / u, u);
    OB_TRY(op->gather_rows(b, &t1, ix->q_join, n * H * K / u, &t2));
    ob_tensor tqf, tatt;
    ob_tensor_f32_2d(&tqf, H * K, n, qf);
    ob_tensor_f32_2d(&tatt, H * K, n, att);
    ob_attn_params ap = {(int)H, 1, (int)K, hp->attn_scale, 0.0f, 0.0f};
    OB_TRY(op->attention(b, a->kv, il, &tqf, a->attn, &ap, &tatt));

    /* values: v_b_h over the first R outputs of each head */
    t1 = rows_of(att, n * H * K / u, u);
    for (int64_t hh = 0; hh < H; hh++) {
        ob_tensor xs, ys;
        t2 = rows_of(slice, n * R / u, u);
        OB_TRY(op->gather_rows(b, &t1, ix->att + hh * n * R / u, n * R / u, &t2));
        ob_tensor_f32_2d(&xs, R, n, slice);
        ob_tensor_f32_2d(&ys, V, n, vh + hh * n * V);
        OB_TRY(op->matmul(b, &L->v_b[hh], &xs, NULL, &ys));
    }
    t1 = rows_of(vh, n * H * V / u, u);
    t2 = rows_of(o, n * H * V / u, u);
    OB_TRY(op->gather_rows(b, &t1, ix->o_join, n * H * V / u, &t2));
    ob_tensor to;
    ob_tensor_f32_2d(&to, H * V, n, o);
    return op->matmul(b, &L->wo, &to, NULL, out);
}

static int ds_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const int64_t n = a->n_tokens, E = hp->n_embd, NE = hp->n_expert, K = hp->n_expert_used, u = unit_of(hp);
    if (a->work_floats < ds_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");
    float *w = a->work;
    ob_tensor x, h;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;

    /* host tables: gather indices, routing */
    size_t n_idx = mla_idx_count(hp, n, u);
    size_t nf = (size_t)(n * NE + NE + 2 * n * E + 2 * n * K + hp->n_group);
    size_t ni = n_idx + (size_t)(2 * NE + 1 + 2 * n * K) + (size_t)(hp->n_group + 3) / 4;
    float *hostf = ob_malloc(nf * sizeof(float));
    int32_t *hosti = ob_malloc(ni * sizeof(int32_t));
    if (!hostf || !hosti) {
        ob_free(hostf);
        ob_free(hosti);
        return ob_err(OB_ERR_OOM, "deepseek2 index and routing tables");
    }
    mla_idx ix;
    mla_idx_fill(hp, n, u, hosti, &ix);
    route r;
    r.scores = hostf;
    r.bias = r.scores + n * NE;
    r.acc = r.bias + NE;
    r.y = r.acc + n * E;
    r.w = r.y + n * E;
    r.selw = r.w + n * K;
    r.gscore = r.selw + n * K;
    r.count = hosti + n_idx;
    r.start = r.count + NE;
    r.tok = r.start + NE + 1;
    r.sel = r.tok + n * K;
    r.open = (uint8_t *)(void *)(r.sel + n * K);

    int rc = op->get_rows(b, &m->tok_embd, a->tokens, n, &x);
    for (int64_t il = 0; il < hp->n_layer && rc == 0; il++) {
        const ob_layer *L = &m->layers[il];
#define R_(call)                                                                                                       \
    do {                                                                                                               \
        if (rc == 0) rc = (call);                                                                                      \
    } while (0)
        R_(op->rms_norm(b, &x, &L->attn_norm, hp->norm_eps, E, &h));
        R_(ds_attention(m, b, a, (int)il, &h, &ix, u, w, &h));
        R_(op->add(b, &x, &h, &x));
        R_(op->rms_norm(b, &x, &L->ffn_norm, hp->norm_eps, E, &h));
        if (il < hp->n_dense_lead) {
            ob_tensor g, up;
            ob_tensor_f32_2d(&g, hp->n_ff, n, w);
            ob_tensor_f32_2d(&up, hp->n_ff, n, w + n * hp->n_ff);
            R_(op->matmul(b, &L->w_gate, &h, NULL, &g));
            R_(op->matmul(b, &L->w_up, &h, NULL, &up));
            R_(op->glu(b, OB_ACT_SILU, &g, &up, &g));
            R_(op->matmul(b, &L->w_down, &g, NULL, &h));
        } else {
            R_(ds_moe(m, b, L, &h, n, w, &r));
        }
        R_(op->add(b, &x, &h, &x));
#undef R_
    }
    ob_free(hostf);
    ob_free(hosti);
    if (rc < 0 || a->n_out == 0) return rc;
    ob_tensor xo, lg;
    ob_tensor_f32_2d(&xo, E, a->n_out, a->embd_only ? a->logits : (float *)h.data);
    OB_TRY(op->gather_rows(b, &x, a->out_idx, a->n_out, &xo));
    OB_TRY(op->rms_norm(b, &xo, &m->output_norm, hp->norm_eps, E, &xo));
    if (a->embd_only) return 0; /* embeddings: the normed hidden states */
    ob_tensor_f32_2d(&lg, hp->n_vocab, a->n_out, a->logits);
    return op->matmul(b, &m->output, &xo, NULL, &lg);
}

const ob_arch ob_arch_deepseek2 = {"deepseek2", true, ds_load, ds_work_size, ds_forward};
