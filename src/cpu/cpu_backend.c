/*
 * cpu_backend.c - the CPU backend: ob_backend_ops on host memory, each op
 * split across the persistent thread pool.
 *
 * Weights are used in place in the file mapping. Quantized weight rows are
 * dequantized into a per-thread scratch row and multiplied against every
 * token of the batch, so each weight byte is read once per batch. This is
 * the correct-first implementation; issue 8 replaces the inner loops with
 * quantized-dot SIMD kernels, tested against this one.
 */
#include <math.h>
#include <string.h>

#include "../backend/backend.h"
#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../core/threadpool.h"
#include "kernels.h"

#define ROWS_PER_CHUNK 16

typedef struct cpu_backend {
    ob_backend base;
    ob_threadpool *pool;
    const ob_cpu_kernels *k;
    int n_threads;
    float *scratch;          /* [n_threads][scratch_per_thread] */
    size_t scratch_per_thread; /* floats */
} cpu_backend;

static cpu_backend *cpu(ob_backend *b) { return (cpu_backend *)b; }

/* Make sure every thread has `floats` of scratch. Called before a run. */
static int ensure_scratch(cpu_backend *c, size_t floats) {
    if (floats <= c->scratch_per_thread) return 0;
    size_t per = (floats + 15) & ~(size_t)15;
    float *s = ob_malloc_aligned(ob_mul_size(per * sizeof(float), (size_t)c->n_threads), 64);
    if (!s) return ob_err(OB_ERR_OOM, "cpu scratch of %zu floats per thread", per);
    ob_free_aligned(c->scratch);
    c->scratch = s;
    c->scratch_per_thread = per;
    return 0;
}

static float *thread_scratch(cpu_backend *c, int ith) { return c->scratch + (size_t)ith * c->scratch_per_thread; }

/* Row r of any-type tensor `t` (2-D view) as floats: a pointer into t for
 * F32, else converted into buf. */
static const float *row_f32(const cpu_backend *c, const ob_tensor *t, int64_t r, float *buf) {
    const char *src = (const char *)t->data + (size_t)r * t->nb[1];
    int64_t n = t->ne[0];
    switch (t->type) {
    case OB_TYPE_F32: return (const float *)(const void *)src;
    case OB_TYPE_F16: c->k->f16_to_f32((const uint16_t *)(const void *)src, buf, n); return buf;
    default: ob_type_get((int)t->type)->to_float(src, buf, n); return buf;
    }
}

static int check_convertible(const ob_tensor *t) {
    const ob_type_traits *tr = ob_type_get((int)t->type);
    if (!tr || (!tr->to_float && t->type != OB_TYPE_F32))
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be used on the CPU", t->name ? t->name : "?",
                      ob_type_name(t->type));
    return 0;
}

/* ---- memory ---- */

static int cpu_alloc(ob_backend *b, size_t n, void **out) {
    void *p = ob_malloc_aligned(n ? n : 1, 64);
    if (!p) return ob_err(OB_ERR_OOM, "cpu buffer of %zu bytes", n);
    memset(p, 0, n);
    *out = p;
    return 0;
}

static void cpu_release(ob_backend *b, void *p) { ob_free_aligned(p); }

static int cpu_copy(ob_backend *b, void *dst, const void *src, size_t n) {
    memcpy(dst, src, n);
    return 0;
}

static int cpu_copy_d2d(ob_backend *b, void *dst, const void *src, size_t n) {
    memmove(dst, src, n);
    return 0;
}

static int cpu_weight(ob_backend *b, ob_tensor *t, const void *host) {
    t->data = (void *)host; /* used in place in the mapping */
    return 0;
}

/* ---- get_rows ---- */

typedef struct rows_task {
    cpu_backend *c;
    const ob_tensor *table;
    const int32_t *ids;
    int64_t n;
    ob_tensor *out;
} rows_task;

static void get_rows_fn(const ob_task_ctx *ctx, void *arg) {
    rows_task *t = arg;
    int64_t lo, hi;
    ob_split_range(t->n, ctx->ith, ctx->nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        float *dst = ob_tensor_row(t->out, i);
        const float *src = row_f32(t->c, t->table, t->ids[i], dst);
        if (src != dst) memcpy(dst, src, (size_t)t->table->ne[0] * sizeof(float));
    }
}

static int cpu_get_rows(ob_backend *b, const ob_tensor *table, const int32_t *ids, int64_t n, ob_tensor *out) {
    OB_TRY(check_convertible(table));
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= table->ne[1])
            return ob_err(OB_ERR_RANGE, "token id %d is outside the vocabulary of %lld", ids[i],
                          (long long)table->ne[1]);
    rows_task t = {cpu(b), table, ids, n, out};
    ob_threadpool_run(cpu(b)->pool, get_rows_fn, &t);
    return 0;
}

/* ---- matmul ---- */

typedef struct mm_task {
    cpu_backend *c;
    const ob_tensor *w, *x, *bias;
    ob_tensor *out;
    int64_t n_chunks;
} mm_task;

static void matmul_fn(const ob_task_ctx *ctx, void *arg) {
    mm_task *t = arg;
    cpu_backend *c = t->c;
    const int64_t nin = t->w->ne[0], nout = t->w->ne[1], n = t->x->ne[1];
    float *buf = thread_scratch(c, ctx->ith);
    const float *bias = t->bias ? (const float *)t->bias->data : NULL;
    for (;;) {
        int64_t ch = ob_threadpool_next_chunk(c->pool);
        if (ch >= t->n_chunks) break;
        int64_t r0 = ch * ROWS_PER_CHUNK, r1 = r0 + ROWS_PER_CHUNK < nout ? r0 + ROWS_PER_CHUNK : nout;
        for (int64_t r = r0; r < r1; r++) {
            const float *w = row_f32(c, t->w, r, buf);
            float b0 = bias ? bias[r] : 0.0f;
            for (int64_t i = 0; i < n; i++) {
                const float *x = ob_tensor_row(t->x, i);
                ((float *)ob_tensor_row(t->out, i))[r] = c->k->dot_f32(w, x, nin) + b0;
            }
        }
    }
}

static int cpu_matmul(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    cpu_backend *c = cpu(b);
    OB_TRY(check_convertible(w));
    if (x->ne[0] != w->ne[0] || out->ne[0] != w->ne[1] || out->ne[1] != x->ne[1])
        return ob_err(OB_ERR_INTERNAL, "matmul '%s': shapes [%lld,%lld] x [%lld,%lld] -> [%lld,%lld]",
                      w->name ? w->name : "?", (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[0],
                      (long long)x->ne[1], (long long)out->ne[0], (long long)out->ne[1]);
    OB_TRY(ensure_scratch(c, (size_t)w->ne[0]));
    mm_task t = {c, w, x, bias, out, (w->ne[1] + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK};
    /* Reset the counter before the run: all threads start taking chunks at once. */
    ob_threadpool_chunk_reset(c->pool, 0);
    ob_threadpool_run(c->pool, matmul_fn, &t);
    return 0;
}

/* ---- norms ---- */

typedef struct norm_task {
    const ob_tensor *x, *w, *bias;
    float eps;
    int64_t group;
    ob_tensor *out;
} norm_task;

static void rms_norm_fn(const ob_task_ctx *ctx, void *arg) {
    norm_task *t = arg;
    int64_t d = t->x->ne[0], groups_per_row = d / t->group;
    int64_t total = t->x->ne[1] * groups_per_row, lo, hi;
    ob_split_range(total, ctx->ith, ctx->nth, &lo, &hi);
    const float *w = t->w ? (const float *)t->w->data : NULL;
    for (int64_t gi = lo; gi < hi; gi++) {
        int64_t row = gi / groups_per_row, off = (gi % groups_per_row) * t->group;
        const float *x = (const float *)ob_tensor_row(t->x, row) + off;
        float *y = (float *)ob_tensor_row(t->out, row) + off;
        double ss = 0;
        for (int64_t i = 0; i < t->group; i++) ss += (double)x[i] * x[i];
        float s = (float)(1.0 / sqrt(ss / (double)t->group + (double)t->eps));
        for (int64_t i = 0; i < t->group; i++) y[i] = w ? (x[i] * s) * w[i] : x[i] * s;
    }
}

static int cpu_rms_norm(ob_backend *b, const ob_tensor *x, const ob_tensor *w, float eps, int64_t group,
                        ob_tensor *out) {
    if (group <= 0 || x->ne[0] % group) return ob_err(OB_ERR_INTERNAL, "rms_norm: group %lld", (long long)group);
    if (w && w->type != OB_TYPE_F32) return ob_err(OB_ERR_UNSUPPORTED, "norm weight '%s' must be f32", w->name);
    norm_task t = {x, w, NULL, eps, group, out};
    ob_threadpool_run(cpu(b)->pool, rms_norm_fn, &t);
    return 0;
}

static void layer_norm_fn(const ob_task_ctx *ctx, void *arg) {
    norm_task *t = arg;
    int64_t d = t->x->ne[0], lo, hi;
    ob_split_range(t->x->ne[1], ctx->ith, ctx->nth, &lo, &hi);
    const float *w = t->w ? (const float *)t->w->data : NULL;
    const float *bias = t->bias ? (const float *)t->bias->data : NULL;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = ob_tensor_row(t->x, r);
        float *y = ob_tensor_row(t->out, r);
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++) mean += x[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
        var /= (double)d;
        float s = (float)(1.0 / sqrt(var + (double)t->eps));
        for (int64_t i = 0; i < d; i++) {
            float v = (float)(x[i] - mean) * s;
            if (w) v *= w[i];
            if (bias) v += bias[i];
            y[i] = v;
        }
    }
}

static int cpu_layer_norm(ob_backend *b, const ob_tensor *x, const ob_tensor *w, const ob_tensor *bias, float eps,
                          ob_tensor *out) {
    norm_task t = {x, w, bias, eps, x->ne[0], out};
    ob_threadpool_run(cpu(b)->pool, layer_norm_fn, &t);
    return 0;
}

/* ---- rope ---- */

/* YaRN: which rotation dimensions are interpolated and which extrapolated. */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

typedef struct rope_task {
    ob_tensor *x;
    int n_head, head_dim;
    const int32_t *pos;
    const ob_rope_params *p;
    float corr_lo, corr_hi;
} rope_task;

static void rope_fn(const ob_task_ctx *ctx, void *arg) {
    rope_task *t = arg;
    const ob_rope_params *p = t->p;
    int64_t lo, hi;
    ob_split_range(t->x->ne[1], ctx->ith, ctx->nth, &lo, &hi);
    const int half = p->n_rot / 2;
    for (int64_t r = lo; r < hi; r++) {
        float *row = ob_tensor_row(t->x, r);
        float pos = (float)t->pos[r];
        for (int i = 0; i < half; i++) {
            /* inv_freq = base^(-2i/n_rot), as float like the reference implementations. */
            float inv_freq = 1.0f / powf(p->freq_base, (float)(2 * i) / (float)p->n_rot);
            if (p->freq_factors) inv_freq /= p->freq_factors[i];
            float theta_extrap = pos * inv_freq;
            float theta = theta_extrap * p->freq_scale, mscale = p->attn_factor;
            if (p->ext_factor != 0.0f) {
                float y = ((float)i - t->corr_lo) / fmaxf(0.001f, t->corr_hi - t->corr_lo);
                float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * p->ext_factor;
                theta = theta * (1.0f - ramp) + theta_extrap * ramp;
                mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
            }
            float cs = (float)cos((double)theta) * mscale, sn = (float)sin((double)theta) * mscale;
            for (int h = 0; h < t->n_head; h++) {
                float *v = row + (size_t)h * (size_t)t->head_dim;
                int a = p->mode == OB_ROPE_NEOX ? i : 2 * i;
                int bb = p->mode == OB_ROPE_NEOX ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[bb];
                v[a] = x0 * cs - x1 * sn;
                v[bb] = x0 * sn + x1 * cs;
            }
        }
    }
}

static int cpu_rope(ob_backend *b, ob_tensor *x, int n_head, int head_dim, const int32_t *pos,
                    const ob_rope_params *p) {
    if (p->n_rot > head_dim || p->n_rot % 2) return ob_err(OB_ERR_INTERNAL, "rope: n_rot %d, head_dim %d", p->n_rot, head_dim);
    rope_task t = {x, n_head, head_dim, pos, p, 0, 0};
    if (p->ext_factor != 0.0f) {
        float lo = floorf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_fast, p->freq_base));
        float hi = ceilf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_slow, p->freq_base));
        t.corr_lo = fmaxf(0.0f, lo);
        t.corr_hi = fminf((float)p->n_rot - 1.0f, hi);
    }
    ob_threadpool_run(cpu(b)->pool, rope_fn, &t);
    return 0;
}

/* ---- KV cache ---- */

static int cpu_kv_write(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *k, const ob_tensor *v,
                        const int32_t *slots) {
    const ob_type_traits *tr = ob_type_get((int)kv->type);
    for (int64_t i = 0; i < k->ne[1]; i++) {
        if (slots[i] < 0 || slots[i] >= kv->n_slots) return ob_err(OB_ERR_INTERNAL, "kv slot %d", slots[i]);
        char *kd = (char *)kv->k[il] + (size_t)slots[i] * kv->row_bytes;
        char *vd = (char *)kv->v[il] + (size_t)slots[i] * kv->row_bytes;
        tr->from_float_ref(ob_tensor_row(k, i), kd, kv->kv_dim);
        tr->from_float_ref(ob_tensor_row(v, i), vd, kv->kv_dim);
    }
    return 0;
}

/* Elements [off, off+len) of a cache row as floats (pointer into the row for
 * F32, else converted into buf). For block types the covering blocks are
 * converted into buf2 first. */
static const float *kv_part(const cpu_backend *c, const ob_kv_store *kv, const void *row, int64_t off, int64_t len,
                            float *buf) {
    switch (kv->type) {
    case OB_TYPE_F32: return (const float *)row + off;
    case OB_TYPE_F16: c->k->f16_to_f32((const uint16_t *)row + off, buf, len); return buf;
    default: {
        const ob_type_traits *tr = ob_type_get((int)kv->type);
        int64_t bs = tr->block_size, b0 = off / bs, b1 = (off + len + bs - 1) / bs;
        float *tmp = buf + len; /* scratch after the output */
        tr->to_float((const char *)row + (size_t)b0 * tr->type_size, tmp, (b1 - b0) * bs);
        return tmp + (off - b0 * bs);
    }
    }
}

typedef struct attn_task {
    cpu_backend *c;
    const ob_kv_store *kv;
    int il;
    const ob_tensor *q;
    const ob_attn_token *toks;
    const ob_attn_params *p;
    ob_tensor *out;
} attn_task;

static void attention_fn(const ob_task_ctx *ctx, void *arg) {
    attn_task *t = arg;
    const ob_attn_params *p = t->p;
    const ob_kv_store *kv = t->kv;
    const int hd = p->head_dim, group = p->n_head / p->n_head_kv;
    int64_t total = t->q->ne[1] * p->n_head, lo, hi;
    ob_split_range(total, ctx->ith, ctx->nth, &lo, &hi);
    float *scr = thread_scratch(t->c, ctx->ith);
    float *acc = scr, *kbuf = scr + hd, *vbuf = kbuf + 2 * hd + 64;
    const int bs = kv->block_size;
    for (int64_t job = lo; job < hi; job++) {
        int64_t ti = job / p->n_head;
        int h = (int)(job % p->n_head), hk = h / group;
        const ob_attn_token *tok = &t->toks[ti];
        const float *q = (const float *)ob_tensor_row(t->q, ti) + (size_t)h * hd;
        float m = -INFINITY, l = 0.0f;
        memset(acc, 0, (size_t)hd * sizeof(float));
        for (int32_t pos = tok->kv_start; pos <= tok->pos; pos++) {
            int64_t slot = (int64_t)tok->block_table[pos / bs] * bs + pos % bs;
            const char *krow = (const char *)kv->k[t->il] + (size_t)slot * kv->row_bytes;
            const char *vrow = (const char *)kv->v[t->il] + (size_t)slot * kv->row_bytes;
            const float *k = kv_part(t->c, kv, krow, (int64_t)hk * hd, hd, kbuf);
            float s = t->c->k->dot_f32(q, k, hd) * p->scale;
            if (p->softcap > 0.0f) s = p->softcap * tanhf(s / p->softcap);
            /* Online softmax: rescale what we have when a new maximum appears. */
            if (s > m) {
                float corr = expf(m - s);
                t->c->k->scale_f32(corr, acc, hd);
                l *= corr;
                m = s;
            }
            float w = expf(s - m);
            l += w;
            const float *v = kv_part(t->c, kv, vrow, (int64_t)hk * hd, hd, vbuf);
            t->c->k->axpy_f32(w, v, acc, hd);
        }
        float *o = (float *)ob_tensor_row(t->out, ti) + (size_t)h * hd;
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int i = 0; i < hd; i++) o[i] = acc[i] * inv;
    }
}

static int cpu_attention(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_token *toks,
                         const ob_attn_params *p, ob_tensor *out) {
    cpu_backend *c = cpu(b);
    if (p->n_head % p->n_head_kv) return ob_err(OB_ERR_INTERNAL, "attention: %d heads, %d kv heads", p->n_head, p->n_head_kv);
    /* acc[hd] + k part (hd, plus up to 2 blocks of conversion room) + v part (same). */
    size_t need = (size_t)p->head_dim * 5 + 2 * 256 + 128;
    OB_TRY(ensure_scratch(c, need));
    attn_task t = {c, kv, il, q, toks, p, out};
    ob_threadpool_run(c->pool, attention_fn, &t);
    return 0;
}

/* ---- elementwise ---- */

typedef struct ew_task {
    ob_act act;
    const ob_tensor *a, *b;
    ob_tensor *out;
    float s;
} ew_task;

static inline float act_f(ob_act act, float x) {
    switch (act) {
    case OB_ACT_SILU: return x / (1.0f + expf(-x));
    case OB_ACT_GELU: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case OB_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case OB_ACT_RELU2: return x > 0 ? x * x : 0.0f;
    }
    return x;
}

static void glu_fn(const ob_task_ctx *ctx, void *arg) {
    ew_task *t = arg;
    int64_t lo, hi, d = t->a->ne[0];
    ob_split_range(t->a->ne[1], ctx->ith, ctx->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *g = ob_tensor_row(t->a, r);
        const float *u = t->b ? (const float *)ob_tensor_row(t->b, r) : NULL;
        float *y = ob_tensor_row(t->out, r);
        for (int64_t i = 0; i < d; i++) y[i] = u ? act_f(t->act, g[i]) * u[i] : act_f(t->act, g[i]);
    }
}

static int cpu_glu(ob_backend *b, ob_act act, const ob_tensor *gate, const ob_tensor *up, ob_tensor *out) {
    ew_task t = {act, gate, up, out, 0};
    ob_threadpool_run(cpu(b)->pool, glu_fn, &t);
    return 0;
}

static void add_fn(const ob_task_ctx *ctx, void *arg) {
    ew_task *t = arg;
    int64_t lo, hi, d = t->a->ne[0];
    bool bcast = t->b->ne[1] == 1;
    ob_split_range(t->a->ne[1], ctx->ith, ctx->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *x = ob_tensor_row(t->a, r);
        const float *y = ob_tensor_row(t->b, bcast ? 0 : r);
        float *o = ob_tensor_row(t->out, r);
        for (int64_t i = 0; i < d; i++) o[i] = x[i] + y[i];
    }
}

static int cpu_add(ob_backend *b, const ob_tensor *a, const ob_tensor *bb, ob_tensor *out) {
    if (bb->ne[0] != a->ne[0] || (bb->ne[1] != a->ne[1] && bb->ne[1] != 1))
        return ob_err(OB_ERR_INTERNAL, "add: shapes differ");
    ew_task t = {0, a, bb, out, 0};
    ob_threadpool_run(cpu(b)->pool, add_fn, &t);
    return 0;
}

static int cpu_scale(ob_backend *b, const ob_tensor *x, float s, ob_tensor *out) {
    for (int64_t r = 0; r < x->ne[1]; r++) {
        const float *a = ob_tensor_row(x, r);
        float *o = ob_tensor_row(out, r);
        for (int64_t i = 0; i < x->ne[0]; i++) o[i] = a[i] * s;
    }
    return 0;
}

static int cpu_gather_rows(ob_backend *b, const ob_tensor *x, const int32_t *idx, int64_t n, ob_tensor *out) {
    for (int64_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= x->ne[1]) return ob_err(OB_ERR_INTERNAL, "gather row %d", idx[i]);
        memmove(ob_tensor_row(out, i), ob_tensor_row(x, idx[i]), (size_t)x->ne[0] * sizeof(float));
    }
    return 0;
}

static void cpu_free(ob_backend *b) {
    cpu_backend *c = cpu(b);
    ob_threadpool_free(c->pool);
    ob_free_aligned(c->scratch);
    ob_free(c);
}

static const ob_backend_ops g_cpu_ops = {
    .name = "cpu",
    .free = cpu_free,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy_d2d,
    .weight = cpu_weight,
    .get_rows = cpu_get_rows,
    .matmul = cpu_matmul,
    .rms_norm = cpu_rms_norm,
    .layer_norm = cpu_layer_norm,
    .rope = cpu_rope,
    .kv_write = cpu_kv_write,
    .attention = cpu_attention,
    .glu = cpu_glu,
    .add = cpu_add,
    .scale = cpu_scale,
    .gather_rows = cpu_gather_rows,
    .sync = NULL,
};

int ob_backend_cpu_create(int n_threads, ob_backend **out) {
    *out = NULL;
    cpu_backend *c = ob_calloc(1, sizeof *c);
    if (!c) return ob_err(OB_ERR_OOM, "cpu backend");
    c->base.ops = &g_cpu_ops;
    c->k = ob_cpu_kernels_get();
    int rc = ob_threadpool_create(n_threads, &c->pool);
    if (rc < 0) {
        ob_free(c);
        return rc;
    }
    c->n_threads = ob_threadpool_n_threads(c->pool);
    rc = ensure_scratch(c, 4096);
    if (rc < 0) {
        cpu_free(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}
