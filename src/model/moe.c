/*
 * moe.c - mixture-of-experts decoders: qwen3moe (Qwen3-30B-A3B and family),
 * qwen2moe (Qwen1.5/2-MoE: plus a shared expert behind a sigmoid gate),
 * `llama` files with experts (Mixtral; llama.c's loader hands them here),
 * olmoe (OLMoE: q/k RMSNorm over the whole projections, top-k not
 * renormalised) and granitemoe (Granite's embedding, attention, residual
 * and logit multipliers, as granite.c, around the experts).
 *
 * Attention is llama.c's (q/k/v biases for qwen2moe, per-head q/k RMSNorm
 * for qwen3moe, NeoX RoPE for Qwen, normal RoPE with the converter's q/k
 * permutation for llama). The FFN of each layer, for h = rmsnorm(x) * ffn_norm:
 *
 *     p = softmax(h Wrouter)                      per token, over n_expert
 *     top-k experts of p (ties: the lower index), weights w = p[top-k],
 *     w /= sum(w) when expert_norm (qwen3moe, Mixtral; not qwen2moe)
 *     y = sum_k w_k * down_k(silu(gate_k h) * up_k h)
 *         (+ sigmoid(h . w_shexp_gate) * shared(h)  for qwen2moe)
 *     x += y
 *
 * Experts run grouped: for each expert, the batch rows routed to it are
 * gathered, pushed through its three matrices in one matmul each, and their
 * outputs are weighted and summed into the token rows. Only routed experts
 * are touched, so decode reads k experts per layer, not all. The routing
 * (softmax, top-k) and the weighted scatter-add run on the host over the
 * router logits and expert outputs the backend hands back: the backend
 * interface has no scatter op, and on the CPU backend these copies are
 * memcpy. A backend with the moe_ffn op (CUDA) runs routing and experts
 * itself when it has kernels for the shape (no shared expert; see
 * src/cuda/moe.cu), so a decode step never waits for the host. The expert matrices are row ranges of the stacked
 * ffn_{gate,up,down}_exps tensors ([n_embd, n_ff_exp, n_expert]), bound one
 * per expert at load time.
 */
#include <math.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "model.h"

typedef enum moe_variant { M_LLAMA, M_QWEN2MOE, M_QWEN3MOE, M_OLMOE, M_GRANITEMOE } moe_variant;

static moe_variant variant_of(const ob_model_impl *m) {
    if (strcmp(m->arch_name, "qwen2moe") == 0) return M_QWEN2MOE;
    if (strcmp(m->arch_name, "qwen3moe") == 0) return M_QWEN3MOE;
    if (strcmp(m->arch_name, "olmoe") == 0) return M_OLMOE;
    if (strcmp(m->arch_name, "granitemoe") == 0) return M_GRANITEMOE;
    return M_LLAMA;
}

/* Bind expert e's rows of the stacked tensor `blk.il.<what>` as out[e]. */
static int bind_experts(ob_model_impl *m, int il, const char *what, int64_t ne0, int64_t ne1, ob_tensor *out) {
    const ob_hparams *hp = &m->hp;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
    if (!g) return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
    if (g->n_dims != 3 || g->ne[0] != ne0 || g->ne[1] != ne1 || g->ne[2] != hp->n_expert)
        return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld]; expected [%lld, %lld, %lld]", name,
                      (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2], (long long)ne0, (long long)ne1,
                      (long long)hp->n_expert);
    for (int64_t e = 0; e < hp->n_expert; e++) OB_TRY(ob_model_tensor_rows(m, &out[e], name, e * ne1, ne1));
    return 0;
}

static int moe_load(ob_model_impl *m) {
    ob_hparams *hp = &m->hp;
    moe_variant var = variant_of(m);
    OB_TRY(ob_model_load_common(m, "attention.layer_norm_rms_epsilon"));
    OB_TRY(ob_model_load_rope(m, var == M_LLAMA || var == M_GRANITEMOE ? OB_ROPE_NORMAL : OB_ROPE_NEOX));
    /* granitemoe's multipliers (granite.c); 1 and 1/sqrt(head_dim) elsewhere */
    hp->embd_scale = hp->resid_scale = hp->logit_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (var == M_GRANITEMOE) {
        OB_TRY(ob_model_key_f32_opt(m, "embedding_scale", &hp->embd_scale));
        OB_TRY(ob_model_key_f32_opt(m, "residual_scale", &hp->resid_scale));
        OB_TRY(ob_model_key_f32_opt(m, "attention.scale", &hp->attn_scale));
        OB_TRY(ob_model_key_f32_opt(m, "logit_scale", &hp->logit_scale));
        if (!(hp->embd_scale > 0.0f) || !(hp->resid_scale > 0.0f) || !(hp->attn_scale > 0.0f) ||
            !(hp->logit_scale > 0.0f))
            return ob_err(OB_ERR_FORMAT, "%s: embedding, residual, attention and logit scales must be > 0", m->arch_name);
    }
    OB_TRY(ob_model_key_u32_opt(m, "attention.sliding_window", &hp->sliding_window));
    OB_TRY(ob_model_key_u32(m, "expert_count", &hp->n_expert));
    OB_TRY(ob_model_key_u32(m, "expert_used_count", &hp->n_expert_used));
    if (hp->n_expert <= 0 || hp->n_expert > 4096 || hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert)
        return ob_err(OB_ERR_FORMAT, "%s: %lld experts, %lld used per token", m->arch_name, (long long)hp->n_expert,
                      (long long)hp->n_expert_used);
    hp->n_ff_exp = hp->n_ff; /* Mixtral: the experts are the FFN */
    OB_TRY(ob_model_key_u32_opt(m, "expert_feed_forward_length", &hp->n_ff_exp));
    hp->n_ff_shexp = 0;
    if (var == M_QWEN2MOE) OB_TRY(ob_model_key_u32(m, "expert_shared_feed_forward_length", &hp->n_ff_shexp));
    if (hp->n_ff_exp <= 0 || hp->n_ff_exp > ((int64_t)1 << 24) || hp->n_ff_shexp < 0 ||
        hp->n_ff_shexp > ((int64_t)1 << 24))
        return ob_err(OB_ERR_FORMAT, "%s: bad expert feed-forward length", m->arch_name);
    /* llama.cpp: qwen2moe and olmoe do not renormalise the top-k weights; qwen3moe, Mixtral, granitemoe do */
    hp->expert_norm = var != M_QWEN2MOE && var != M_OLMOE;
    char key[96];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch_name);
    bool norm;
    int rc = ob_gguf_get_bool(m->gguf, key, &norm);
    if (rc == 0)
        hp->expert_norm = norm;
    else if (rc != OB_ERR_NOT_FOUND)
        return rc;
    ob_err_clear();

    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    const int64_t FE = hp->n_ff_exp, FS = hp->n_ff_shexp, NE = hp->n_expert;
    int64_t any_vocab[2] = {E, -1};
    OB_TRY(ob_model_tensor(m, &m->tok_embd, false, 2, any_vocab, "token_embd.weight"));
    hp->n_vocab = m->tok_embd.ne[1];
    int64_t vocab_shape[2] = {E, hp->n_vocab};
    OB_TRY(ob_model_tensor(m, &m->output_norm, false, 1, &E, "output_norm.weight"));
    OB_TRY(ob_model_tensor(m, &m->output, true, 2, vocab_shape, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd;

    /* layers, then the expert tensors of every layer, in one block (freed with m->layers) */
    size_t bytes = (size_t)hp->n_layer * sizeof(ob_layer) + (size_t)(hp->n_layer * 3 * NE) * sizeof(ob_tensor);
    m->layers = ob_calloc(1, bytes);
    if (!m->layers) return ob_err(OB_ERR_OOM, "layers");
    ob_tensor *exps = (ob_tensor *)(void *)(m->layers + hp->n_layer);
    int64_t sq[2] = {E, Q}, skv[2] = {E, KV}, so[2] = {Q, E}, sr[2] = {E, NE}, ssh[2] = {E, FS}, sshd[2] = {FS, E},
            sg[2] = {E, 1};
    for (int64_t i = 0; i < hp->n_layer; i++) {
        ob_layer *L = &m->layers[i];
        int il = (int)i;
        OB_TRY(ob_model_tensor(m, &L->attn_norm, false, 1, &E, "blk.%d.attn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wq, false, 2, sq, "blk.%d.attn_q.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wk, false, 2, skv, "blk.%d.attn_k.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wv, false, 2, skv, "blk.%d.attn_v.weight", il));
        OB_TRY(ob_model_tensor(m, &L->wo, false, 2, so, "blk.%d.attn_output.weight", il));
        bool bias = var == M_QWEN2MOE, qk = var == M_QWEN3MOE || var == M_OLMOE;
        OB_TRY(ob_model_tensor(m, &L->bq, !bias, 1, &Q, "blk.%d.attn_q.bias", il));
        OB_TRY(ob_model_tensor(m, &L->bk, !bias, 1, &KV, "blk.%d.attn_k.bias", il));
        OB_TRY(ob_model_tensor(m, &L->bv, !bias, 1, &KV, "blk.%d.attn_v.bias", il));
        /* per head (qwen3moe) or over the whole projection (olmoe) */
        const int64_t qn = var == M_OLMOE ? Q : hp->head_dim, kn = var == M_OLMOE ? KV : hp->head_dim;
        OB_TRY(ob_model_tensor(m, &L->q_norm, !qk, 1, &qn, "blk.%d.attn_q_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->k_norm, !qk, 1, &kn, "blk.%d.attn_k_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_norm, false, 1, &E, "blk.%d.ffn_norm.weight", il));
        OB_TRY(ob_model_tensor(m, &L->ffn_gate_inp, false, 2, sr, "blk.%d.ffn_gate_inp.weight", il));
        L->exp_gate = exps + (i * 3 + 0) * NE;
        L->exp_up = exps + (i * 3 + 1) * NE;
        L->exp_down = exps + (i * 3 + 2) * NE;
        OB_TRY(bind_experts(m, il, "ffn_gate_exps.weight", E, FE, L->exp_gate));
        OB_TRY(bind_experts(m, il, "ffn_up_exps.weight", E, FE, L->exp_up));
        OB_TRY(bind_experts(m, il, "ffn_down_exps.weight", FE, E, L->exp_down));
        if (FS > 0) {
            OB_TRY(ob_model_tensor(m, &L->shexp_gate, false, 2, ssh, "blk.%d.ffn_gate_shexp.weight", il));
            OB_TRY(ob_model_tensor(m, &L->shexp_up, false, 2, ssh, "blk.%d.ffn_up_shexp.weight", il));
            OB_TRY(ob_model_tensor(m, &L->shexp_down, false, 2, sshd, "blk.%d.ffn_down_shexp.weight", il));
            OB_TRY(ob_model_tensor(m, &L->shexp_gate_inp, false, 2, sg, "blk.%d.ffn_gate_inp_shexp.weight", il));
        }
        const ob_tensor *small[] = {&L->attn_norm, &L->ffn_norm, &L->q_norm, &L->k_norm, &L->bq, &L->bk, &L->bv};
        OB_TRY(ob_model_check_f32(small, OB_ARRAY_LEN(small)));
    }
    if (m->output_norm.type != OB_TYPE_F32) return ob_err(OB_ERR_UNSUPPORTED, "output_norm.weight must be f32");
    return 0;
}

static int64_t ff_max(const ob_hparams *hp) { return hp->n_ff_exp > hp->n_ff_shexp ? hp->n_ff_exp : hp->n_ff_shexp; }

/* Workspace (floats) for n tokens: x, h, q, k, v, att, router logits,
 * gathered rows, gate, up, expert output. */
static size_t moe_work_size(const ob_model_impl *m, int64_t n) {
    const ob_hparams *hp = &m->hp;
    int64_t Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    return (size_t)n * (size_t)(4 * hp->n_embd + 2 * Q + 2 * KV + hp->n_expert + 1 + 2 * ff_max(hp));
}

/* Host memory of one batch's routing. */
typedef struct route {
    float *probs;   /* [n][n_expert] router logits, then probabilities */
    float *acc;     /* [n][n_embd] weighted expert outputs */
    float *y;       /* [n][n_embd] one expert's outputs, downloaded */
    int32_t *count; /* [n_expert] tokens routed to each expert */
    int32_t *start; /* [n_expert + 1] where each expert's list starts */
    int32_t *tok;   /* [n * k] token of each (expert, slot), grouped by expert */
    float *w;       /* [n * k] its weight */
    int32_t *sel;   /* [n * k] experts chosen per token */
    float *selw;    /* [n * k] their weights */
} route;

/* Softmax, top-k and (optionally) renormalisation per token, then the
 * tokens of each expert in batch order. */
static void route_tokens(const ob_hparams *hp, int64_t n, route *r) {
    const int64_t NE = hp->n_expert, K = hp->n_expert_used;
    for (int64_t t = 0; t < n; t++) {
        float *p = r->probs + t * NE;
        float mx = p[0], sum = 0.0f;
        for (int64_t e = 1; e < NE; e++) mx = p[e] > mx ? p[e] : mx;
        for (int64_t e = 0; e < NE; e++) sum += p[e] = expf(p[e] - mx);
        for (int64_t e = 0; e < NE; e++) p[e] /= sum;
        int32_t *sel = r->sel + t * K;
        float *sw = r->selw + t * K, wsum = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            int32_t best = -1;
            for (int64_t e = 0; e < NE; e++) {
                bool taken = false;
                for (int64_t j = 0; j < k; j++) taken |= sel[j] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = (int32_t)e;
            }
            sel[k] = best;
            sw[k] = p[best];
            wsum += p[best];
        }
        if (hp->expert_norm)
            for (int64_t k = 0; k < K; k++) sw[k] /= wsum;
    }
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
}

/* Tensors of the FFN scratch, sized for `rows` rows. */
typedef struct ffn_bufs {
    float *rows, *gate, *up, *y, *logit;
} ffn_bufs;

static int moe_ffn(ob_model_impl *m, ob_backend *b, const ob_layer *L, ob_tensor *h, int64_t n, const ffn_bufs *fb,
                   route *r) {
    const ob_hparams *hp = &m->hp;
    const ob_backend_ops *op = b->ops;
    const int64_t E = hp->n_embd, NE = hp->n_expert, FE = hp->n_ff_exp;
    ob_tensor lg;
    ob_tensor_f32_2d(&lg, NE, n, fb->logit);
    OB_TRY(op->matmul(b, &L->ffn_gate_inp, h, NULL, &lg));
    if (op->moe_ffn && hp->n_ff_shexp == 0) {
        /* the whole routed FFN on the device, h overwritten in place */
        const ob_moe_params mp = {(int)NE, (int)hp->n_expert_used, hp->expert_norm, L->exp_gate, L->exp_up,
                                  L->exp_down};
        int rc = op->moe_ffn(b, &mp, &lg, h, h);
        if (rc != OB_ERR_UNSUPPORTED) return rc;
        ob_err_clear(); /* a shape or type without a device kernel: route on the host */
    }
    OB_TRY(op->download(b, r->probs, fb->logit, (size_t)(n * NE) * sizeof(float)));
    route_tokens(hp, n, r);
    memset(r->acc, 0, (size_t)(n * E) * sizeof(float));
    for (int64_t e = 0; e < NE; e++) {
        const int32_t ne = r->start[e + 1] - r->start[e];
        if (ne == 0) continue;
        const int32_t *idx = r->tok + r->start[e];
        ob_tensor xe, g, u, y;
        ob_tensor_f32_2d(&xe, E, ne, fb->rows);
        ob_tensor_f32_2d(&g, FE, ne, fb->gate);
        ob_tensor_f32_2d(&u, FE, ne, fb->up);
        ob_tensor_f32_2d(&y, E, ne, fb->y);
        OB_TRY(op->gather_rows(b, h, idx, ne, &xe));
        OB_TRY(op->matmul(b, &L->exp_gate[e], &xe, NULL, &g));
        OB_TRY(op->matmul(b, &L->exp_up[e], &xe, NULL, &u));
        OB_TRY(op->glu(b, OB_ACT_SILU, &g, &u, &g));
        OB_TRY(op->matmul(b, &L->exp_down[e], &g, NULL, &y));
        OB_TRY(op->download(b, r->y, fb->y, (size_t)(ne * E) * sizeof(float)));
        const float *wt = r->w + r->start[e];
        for (int32_t i = 0; i < ne; i++) {
            float *acc = r->acc + (size_t)idx[i] * (size_t)E;
            const float *yy = r->y + (size_t)i * (size_t)E;
            for (int64_t j = 0; j < E; j++) acc[j] += wt[i] * yy[j];
        }
    }
    if (hp->n_ff_shexp > 0) {
        const int64_t FS = hp->n_ff_shexp;
        ob_tensor g, u, y, s;
        ob_tensor_f32_2d(&g, FS, n, fb->gate);
        ob_tensor_f32_2d(&u, FS, n, fb->up);
        ob_tensor_f32_2d(&y, E, n, fb->y);
        ob_tensor_f32_2d(&s, 1, n, fb->logit);
        OB_TRY(op->matmul(b, &L->shexp_gate, h, NULL, &g));
        OB_TRY(op->matmul(b, &L->shexp_up, h, NULL, &u));
        OB_TRY(op->glu(b, OB_ACT_SILU, &g, &u, &g));
        OB_TRY(op->matmul(b, &L->shexp_down, &g, NULL, &y));
        OB_TRY(op->matmul(b, &L->shexp_gate_inp, h, NULL, &s));
        OB_TRY(op->download(b, r->y, fb->y, (size_t)(n * E) * sizeof(float)));
        OB_TRY(op->download(b, r->probs, fb->logit, (size_t)n * sizeof(float)));
        for (int64_t t = 0; t < n; t++) {
            const float gate = 1.0f / (1.0f + expf(-r->probs[t]));
            float *acc = r->acc + t * E;
            const float *yy = r->y + t * E;
            for (int64_t j = 0; j < E; j++) acc[j] += gate * yy[j];
        }
    }
    return op->upload(b, h->data, r->acc, (size_t)(n * E) * sizeof(float));
}

static int moe_forward(ob_model_impl *m, const ob_forward_args *a) {
    const ob_hparams *hp = &m->hp;
    ob_backend *b = a->backend ? a->backend : m->backend;
    const ob_backend_ops *op = b->ops;
    const int64_t n = a->n_tokens, E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim,
                  NE = hp->n_expert, K = hp->n_expert_used, FM = ff_max(hp);
    if (a->work_floats < moe_work_size(m, n)) return ob_err(OB_ERR_INTERNAL, "workspace too small");

    float *w = a->work;
    ob_tensor x, h, q, k, v, att;
    ob_tensor_f32_2d(&x, E, n, w), w += n * E;
    ob_tensor_f32_2d(&h, E, n, w), w += n * E;
    ob_tensor_f32_2d(&q, Q, n, w), w += n * Q;
    ob_tensor_f32_2d(&k, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&v, KV, n, w), w += n * KV;
    ob_tensor_f32_2d(&att, Q, n, w), w += n * Q;
    ffn_bufs fb;
    fb.logit = w, w += n * (NE + 1);
    fb.rows = w, w += n * E;
    fb.gate = w, w += n * FM;
    fb.up = w, w += n * FM;
    fb.y = w;

    /* the batch's routing tables, host memory */
    route r;
    size_t nf = (size_t)(n * NE + 2 * n * E + 2 * n * K), ni = (size_t)(2 * NE + 1 + 2 * n * K);
    float *hostf = ob_malloc(nf * sizeof(float));
    int32_t *hosti = ob_malloc(ni * sizeof(int32_t));
    if (!hostf || !hosti) {
        ob_free(hostf);
        ob_free(hosti);
        return ob_err(OB_ERR_OOM, "expert routing tables");
    }
    r.probs = hostf;
    r.acc = r.probs + n * NE;
    r.y = r.acc + n * E;
    r.w = r.y + n * E;
    r.selw = r.w + n * K;
    r.count = hosti;
    r.start = r.count + NE;
    r.tok = r.start + NE + 1;
    r.sel = r.tok + n * K;

    ob_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, hp->attn_scale, 0.0f, 0.0f};
    int rc = op->get_rows(b, &m->tok_embd, a->tokens, n, &x);
    if (rc == 0 && hp->embd_scale != 1.0f) rc = op->scale(b, &x, hp->embd_scale, &x);
    for (int64_t il = 0; il < hp->n_layer && rc == 0; il++) {
        const ob_layer *L = &m->layers[il];
#define R(call)                                                                                                        \
    do {                                                                                                               \
        if (rc == 0) rc = (call);                                                                                      \
    } while (0)
        R(op->rms_norm(b, &x, &L->attn_norm, hp->norm_eps, E, &h));
        R(op->matmul(b, &L->wq, &h, L->bq.data ? &L->bq : NULL, &q));
        R(op->matmul(b, &L->wk, &h, L->bk.data ? &L->bk : NULL, &k));
        R(op->matmul(b, &L->wv, &h, L->bv.data ? &L->bv : NULL, &v));
        if (L->q_norm.data) R(op->rms_norm(b, &q, &L->q_norm, hp->norm_eps, L->q_norm.ne[0], &q));
        if (L->k_norm.data) R(op->rms_norm(b, &k, &L->k_norm, hp->norm_eps, L->k_norm.ne[0], &k));
        R(op->rope(b, &q, (int)hp->n_head, (int)hp->head_dim, a->pos, &hp->rope));
        R(op->rope(b, &k, (int)hp->n_head_kv, (int)hp->head_dim, a->pos, &hp->rope));
        R(op->kv_write(b, a->kv, (int)il, &k, &v, a->slots));
        R(op->attention(b, a->kv, (int)il, &q, a->attn, &ap, &att));
        R(op->matmul(b, &L->wo, &att, NULL, &h));
        if (hp->resid_scale != 1.0f) R(op->scale(b, &h, hp->resid_scale, &h));
        R(op->add(b, &x, &h, &x));
        R(op->rms_norm(b, &x, &L->ffn_norm, hp->norm_eps, E, &h));
        R(moe_ffn(m, b, L, &h, n, &fb, &r));
        if (hp->resid_scale != 1.0f) R(op->scale(b, &h, hp->resid_scale, &h));
        R(op->add(b, &x, &h, &x));
#undef R
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
    OB_TRY(op->matmul(b, &m->output, &xo, NULL, &lg));
    return hp->logit_scale != 1.0f ? op->scale(b, &lg, 1.0f / hp->logit_scale, &lg) : 0;
}

const ob_arch ob_arch_qwen3moe = {"qwen3moe", true, moe_load, moe_work_size, moe_forward};
const ob_arch ob_arch_qwen2moe = {"qwen2moe", true, moe_load, moe_work_size, moe_forward};
const ob_arch ob_arch_olmoe = {"olmoe", true, moe_load, moe_work_size, moe_forward};
const ob_arch ob_arch_granitemoe = {"granitemoe", true, moe_load, moe_work_size, moe_forward};
/* Not in the registry's table: llama.c's loader switches a `llama` file
 * with expert_count > 0 to this one. */
const ob_arch ob_arch_llama_moe = {"llama", true, moe_load, moe_work_size, moe_forward};
