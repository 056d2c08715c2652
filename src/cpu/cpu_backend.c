/*
 * cpu_backend.c - the CPU backend: ob_backend_ops on host memory, each op
 * split across the persistent thread pool.
 *
 * Weights stay in the file mapping (`data`). At load (`weight`), a 2-D
 * weight whose type the kernel tier can pack (kernels.h) and whose row count
 * is a multiple of 16 is also repacked into 16-row panels (`extra`, owned by
 * this backend); matmul then runs the panel kernels. OB_CPU_REPACK=0 turns
 * repacking off (to measure what it gives).
 *
 * Matmul, in one thread-pool run:
 *   1. each thread converts its share of the activation rows into the
 *      kernels' activation format (8-bit blocks, BF16, or none for F32):
 *      once per batch, not once per weight row;
 *   2. barrier;
 *   3. threads take (row range x token range) chunks: three quarters dealt
 *      out in one contiguous run per thread, the rest from the run's atomic
 *      counter (deal_chunk). A chunk is a few panels (or rows) by up to 128 tokens: its
 *      weights stay in L1/L2 while the kernel sweeps the tokens 8 at a time
 *      (TOKENS_PER_CHUNK says why 128). One token (decode) gives
 *      about 16 chunks per thread, so a slow or preempted core does not hold
 *      up the rest.
 * For one token, step 1 has each thread convert the row itself and step 2
 * goes away. Small elementwise ops (one decode token's norm, rope, ...) run
 * on the calling thread alone: handing them to the pool costs more than
 * they do.
 * A type without a kernel (the weight types models ship in all have one,
 * the IQ1/IQ2/IQ3 codebook types since x86/iq_avx2.c) dequantizes each
 * weight row into a per-thread scratch row and takes float dots against
 * every token.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../backend/backend.h"
#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../core/threadpool.h"
#include "../quant/hadamard.h"
#include "kernels.h"

#define ROWS_PER_CHUNK 16
/* Prefill chunks: a chunk's panels are read from memory once per 128 tokens
 * (each panel then stays in L1/L2 for its 16 groups of 8 tokens). With 64,
 * each panel's first group waited for memory twice as often: one thread,
 * BF16 2048x8192 / 8192x2048 101 / 104 -> 108 / 108 GMAC/s, F16 8192x2048
 * 53 -> 55.5; the 1024-3072 wide shapes unchanged (96% of peak either way).
 * A software prefetch of the next panel instead gained nothing. */
#define TOKENS_PER_CHUNK 128

/* A weight repacked into panels by one tier's `pack`; that tier's `gemm`
 * reads it (whatever tier the backend running the matmul uses). */
typedef struct cpu_packed {
    const ob_cpu_kernels *k;
    ob_type type;
    int64_t n_panels;
    size_t panel_stride;   /* bytes, panel_bytes rounded up to 64 */
    void *data;            /* [n_panels][panel_stride], 64-byte aligned */
    struct cpu_packed *next;
} cpu_packed;

/* A run of memory the packed weights are carved from (pack_alloc). */
typedef struct cpu_slab {
    uint8_t *base;
    size_t size, used;
    struct cpu_slab *next;
} cpu_slab;

typedef struct cpu_backend {
    ob_backend base;
    ob_threadpool *pool;
    ob_threadpool *pack_pool; /* all cores, for repacking at load when pool has one thread */
    const ob_cpu_kernels *k;
    int n_threads;
    bool repack;
    bool pairs; /* two-panel prefill kernels where the tier has them (OB_CPU_PAIR=0: off) */
    bool repack_short;       /* a weight was left in the mapping because memory was short (logged once) */
    float *scratch;          /* [n_threads][scratch_per_thread] */
    size_t scratch_per_thread; /* floats */
    void *act;               /* converted activations of the current matmul */
    size_t act_bytes;
    cpu_packed *packed;      /* weights this backend repacked (freed with it) */
    cpu_slab *slabs;         /* the memory of the packed weights (pack_alloc); the first is being carved */
    /* rope cos/sin table of the last positions seen (see cpu_rope) */
    float *rope_cs;          /* [rope_n][n_rot/2][2] */
    int32_t *rope_pos;       /* [rope_n] */
    size_t rope_cap;         /* floats in rope_cs */
    int64_t rope_pos_cap;    /* ints in rope_pos */
    int64_t rope_n;
    ob_rope_params rope_p;
    bool rope_valid;
    float *split;            /* split-K attention partials */
    size_t split_bytes;
    bool fuse_on;            /* layer_qkv/layer_ffn for one token (OB_CPU_FUSE=0: off) */
    bool attn_pf;            /* decode attention prefetches the next page (OB_CPU_ATT_PF=0: off) */
    float *fuse;             /* their rows: [n_threads][2][E] then the shared ones (fuse_prepare) */
    size_t fuse_floats;
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

static int ensure_act(cpu_backend *c, size_t bytes) {
    if (bytes <= c->act_bytes) return 0;
    size_t want = bytes + bytes / 4 + 4096;
    void *p = ob_malloc_aligned(want, 64);
    if (!p) return ob_err(OB_ERR_OOM, "cpu activation buffer of %zu bytes", want);
    ob_free_aligned(c->act);
    c->act = p;
    c->act_bytes = want;
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

/* Run fn on the pool, or on the calling thread alone when the op touches
 * fewer than SMALL_OP elements (a decode step's norms, rope, adds: waking
 * and joining the workers costs more than they do). */
#define SMALL_OP 32768
static void run_op(cpu_backend *c, ob_task_fn fn, void *arg, int64_t elements) {
    if (elements < SMALL_OP || c->n_threads == 1) {
        ob_task_ctx ctx = {c->pool, 0, 1};
        fn(&ctx, arg);
    } else {
        ob_threadpool_run(c->pool, fn, arg);
    }
}

/* ---- memory ---- */

static int cpu_alloc(ob_backend *b, size_t n, void **out) {
    /* Big buffers (the KV cache, read end to end by every decode step at
     * long context) get transparent huge pages, as packed weights do. */
    const size_t huge = (size_t)2 << 20;
    void *p = ob_malloc_aligned(n ? n : 1, n >= huge ? huge : 64);
#if defined(MADV_HUGEPAGE)
    if (p && n >= huge) madvise(p, (n + huge - 1) & ~(huge - 1), MADV_HUGEPAGE);
#endif
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

typedef struct pack_task {
    const ob_mm_kernels *mk;
    cpu_packed *p;
    const void *host;
    size_t row_bytes;
    int64_t n;
} pack_task;

static void pack_fn(const ob_task_ctx *ctx, void *arg) {
    pack_task *t = arg;
    int64_t lo, hi;
    ob_split_range(t->p->n_panels, ctx->ith, ctx->nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        char *dst = (char *)t->p->data + (size_t)i * t->p->panel_stride;
        memset(dst, 0, t->p->panel_stride);
        t->mk->pack((const char *)t->host + (size_t)i * OB_PANEL * t->row_bytes, t->row_bytes, t->n, dst);
    }
}

/* MemAvailable of /proc/meminfo in bytes (free memory plus what the kernel
 * can reclaim), or -1 where there is no such file. */
static int64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

/* Packed weights live in transparent huge pages: decode streams every byte
 * once per token, and with 4 KiB pages a TLB miss every 4 KiB costs a good
 * part of a core's bandwidth (the file mapping we would otherwise read is
 * often backed by large page-cache folios). A huge page needs a whole
 * aligned 2 MiB of one mapping, so a weight of its own allocation smaller
 * than that (a small model's q, k, v, o: 0.3-1.2 MB) or the tail of a larger
 * one stayed in 4 KiB pages - about 100 MB of Qwen3-0.6B Q4_0's ~340 MB of
 * packed weights - and its products streamed at ~38 GB/s where the output
 * product reached ~60. So weights are carved one after another, 4 KiB
 * aligned, from slabs of PACK_SLAB bytes (a weight over PACK_SLAB / 4 gets a
 * slab of its own, rounded up to 2 MiB), each aligned and marked for huge
 * pages; a slab's unused end
 * is never touched and costs address space only. */
#define PACK_SLAB ((size_t)64 << 20)

static void *pack_alloc(cpu_backend *c, size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    bytes = (bytes + 4095) & ~(size_t)4095;
    cpu_slab *s = c->slabs;
    const bool own = bytes > PACK_SLAB / 4;
    if (own || !s || s->size - s->used < bytes) {
        const size_t size = own ? (bytes + huge - 1) & ~(huge - 1) : PACK_SLAB;
        cpu_slab *n = ob_calloc(1, sizeof *n);
        if (!n) return NULL;
        n->base = ob_malloc_aligned(size, huge);
        if (!n->base) {
            ob_free(n);
            return NULL;
        }
#if defined(MADV_HUGEPAGE)
        madvise(n->base, size, MADV_HUGEPAGE);
#endif
        n->size = size;
        if (own && s) { /* behind the slab being carved, which keeps its room */
            n->next = s->next;
            s->next = n;
        } else {
            n->next = s;
            c->slabs = n;
        }
        s = n;
    }
    void *p = s->base + s->used;
    s->used += bytes;
    return p;
}

/* Repack a 2-D weight into panels when this tier has a packer for its type
 * and its rows come in 16s; otherwise, or when memory is short (the copy
 * would leave less than 2 GiB available: the mapping it duplicates must stay
 * readable too - a 30B MoE on a 23 GiB machine was killed for it), leave it
 * in the mapping only. */
static int cpu_weight(ob_backend *b, ob_tensor *t, const void *host) {
    cpu_backend *c = cpu(b);
    t->data = (void *)host; /* used in place in the mapping */
    t->extra = NULL;
    if (!c->repack || (int)t->type < 0 || t->type >= OB_TYPE_COUNT) return 0;
    const ob_mm_kernels *mk = &c->k->mm[t->type];
    if (!mk->pack || t->ne[1] % OB_PANEL || t->ne[2] != 1 || t->ne[3] != 1) return 0;
    const ob_type_traits *tr = ob_type_get((int)t->type);
    if (!tr || t->ne[0] % tr->block_size) return 0;
    size_t pb = mk->panel_bytes(t->ne[0]);
    if (pb == 0) return 0;
    cpu_packed *p = ob_calloc(1, sizeof *p);
    if (!p) return ob_err(OB_ERR_OOM, "packed weight '%s'", t->name ? t->name : "?");
    p->k = c->k;
    p->type = t->type;
    p->n_panels = t->ne[1] / OB_PANEL;
    p->panel_stride = (pb + 63) & ~(size_t)63;
    /* in huge pages (pack_alloc) */
    const size_t bytes = ob_mul_size(p->panel_stride, (size_t)p->n_panels);
    const int64_t avail = mem_available();
    if (avail >= 0 && (int64_t)bytes + ((int64_t)2 << 30) > avail) {
        if (!c->repack_short)
            OB_LOGW("memory is short (%.1f GiB available): weights from '%s' on are used in place, not repacked "
                    "(slower prompt processing; OB_CPU_REPACK=0 skips repacking from the start)",
                    (double)avail / (1 << 30), t->name ? t->name : "?");
        c->repack_short = true;
        ob_free(p);
        return 0;
    }
    p->data = pack_alloc(c, bytes);
    if (!p->data) {
        ob_free(p);
        return ob_err(OB_ERR_OOM, "packed weight '%s' (%zu bytes)", t->name ? t->name : "?",
                      p->panel_stride * (size_t)(t->ne[1] / OB_PANEL));
    }
    /* Packing is a load-time cost: spread it over every core. The model's
     * backend runs on one thread, so it keeps a pool of its own for this. */
    ob_threadpool *pool = c->pool;
    if (c->n_threads == 1 && ob_n_cpus() > 1) {
        if (!c->pack_pool && ob_threadpool_create(0, &c->pack_pool) < 0) ob_err_clear();
        if (c->pack_pool) pool = c->pack_pool;
    }
    pack_task pt = {mk, p, host, t->nb[1], t->ne[0]};
    ob_threadpool_run(pool, pack_fn, &pt);
    p->next = c->packed;
    c->packed = p;
    t->extra = p;
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
    run_op(cpu(b), get_rows_fn, &t, n * table->ne[0]);
    return 0;
}

/* ---- matmul ---- */

typedef struct mm_task {
    cpu_backend *c;
    const ob_tensor *w, *x, *bias;
    ob_tensor *out;
    const ob_mm_kernels *mk;  /* NULL: dequantize-and-dot fallback */
    ob_dot_fn dot;            /* mk's native kernel for fmt (dot or dot_a4) */
    ob_gemm_panel_fn gemm;    /* mk's panel kernel for fmt (gemm or gemm_a4) */
    ob_gemm_panel_fn tiles;   /* mk's gemm_tiles (prefill on AMX), or NULL */
    ob_gemm_pair_fn pair;     /* mk's gemm_pair (prefill, two panels a call), or NULL */
    const cpu_packed *pk;     /* NULL: native rows */
    ob_act_fmt fmt;
    const char *act;          /* activation rows in fmt (x itself for F32) */
    size_t act_stride;
    int64_t rows_per_chunk;   /* rows (a multiple of 16 for panels) */
    int64_t tok_per_chunk;
    int64_t n_row_chunks, n_tok_chunks;
    atomic_llong next;        /* the chunks dealt from a counter (deal_chunk) */
} mm_task;

static void convert_act(const ob_cpu_kernels *k, ob_act_fmt fmt, const float *x, void *dst, int64_t n) {
    switch (fmt) {
    case OB_ACT_Q8: k->quant_q8(x, dst, n); break;
    case OB_ACT_Q8K: k->quant_q8K(x, dst, n); break;
    case OB_ACT_BF16: k->to_bf16(x, dst, n); break;
    case OB_ACT_Q4: k->quant_q4(x, dst, n); break;
    case OB_ACT_Q4X: k->quant_q4x(x, dst, n); break;
    case OB_ACT_F32: break;
    }
}

/* The weight rows [*r0, *r1) of chunk ch of t */
static void chunk_rows(const mm_task *t, int64_t ch, int64_t *r0, int64_t *r1) {
    const int64_t nout = t->w->ne[1];
    *r0 = (ch / t->n_tok_chunks) * t->rows_per_chunk;
    *r1 = *r0 + t->rows_per_chunk < nout ? *r0 + t->rows_per_chunk : nout;
}

/* Rows [r0, r1) x tokens [t0, t1) of chunk ch of t: act holds the
 * activations in t->fmt (rows t->act_stride apart), buf is the thread's
 * scratch row for the dequantize-and-dot fallback. */
static void mm_chunk(const mm_task *t, const char *act, int64_t ch, float *buf) {
    cpu_backend *c = t->c;
    const int64_t nin = t->w->ne[0], n = t->x->ne[1];
    const float *bias = t->bias ? (const float *)t->bias->data : NULL;
    float *out = t->out->data;
    const size_t os = t->out->nb[1] / sizeof(float);
    int64_t r0, r1;
    chunk_rows(t, ch, &r0, &r1);
    const int64_t t0 = (ch % t->n_tok_chunks) * t->tok_per_chunk;
    const int64_t t1 = t0 + t->tok_per_chunk < n ? t0 + t->tok_per_chunk : n;
    if (t->pk) {
        for (int64_t r = r0; r < r1; r += OB_PANEL) {
            const char *panel = (const char *)t->pk->data + (size_t)(r / OB_PANEL) * t->pk->panel_stride;
            if (t->tiles && t1 - t0 > OB_MM_MAX_NT) {
                t->tiles(nin, panel, act + (size_t)t0 * t->act_stride, t->act_stride, (int)(t1 - t0),
                         out + (size_t)t0 * os + (size_t)r, os);
                continue;
            }
            if (t->pair && t1 - t0 > OB_MM_MAX_NT && r + OB_PANEL < r1) { /* this panel and the next */
                t->pair(nin, panel, t->pk->panel_stride, act + (size_t)t0 * t->act_stride, t->act_stride,
                        (int)(t1 - t0), out + (size_t)t0 * os + (size_t)r, os);
                r += OB_PANEL;
                continue;
            }
            for (int64_t i = t0; i < t1; i += OB_MM_MAX_NT) {
                int nt = (int)(t1 - i < OB_MM_MAX_NT ? t1 - i : OB_MM_MAX_NT);
                t->gemm(nin, panel, act + (size_t)i * t->act_stride, t->act_stride, nt,
                        out + (size_t)i * os + (size_t)r, os);
            }
        }
    } else if (t->mk) {
        for (int64_t r = r0; r < r1; r++) {
            const char *wrow = (const char *)t->w->data + (size_t)r * t->w->nb[1];
            for (int64_t i = t0; i < t1; i += OB_MM_MAX_NT) {
                int nt = (int)(t1 - i < OB_MM_MAX_NT ? t1 - i : OB_MM_MAX_NT);
                t->dot(nin, wrow, act + (size_t)i * t->act_stride, t->act_stride, nt,
                       out + (size_t)i * os + (size_t)r, os);
            }
        }
    } else {
        for (int64_t r = r0; r < r1; r++) {
            const float *wr = row_f32(c, t->w, r, buf);
            for (int64_t i = t0; i < t1; i++)
                out[(size_t)i * os + (size_t)r] = c->k->dot_f32(wr, ob_tensor_row(t->x, i), nin);
        }
    }
    if (bias)
        for (int64_t i = t0; i < t1; i++)
            for (int64_t r = r0; r < r1; r++) out[(size_t)i * os + (size_t)r] += bias[r];
}

/* The k-th chunk this thread takes of n_chunks: the first three quarters
 * are dealt out in contiguous runs, one per thread (no shared counter to
 * fight over, one stream per core); the last quarter comes from *next, so
 * a thread that falls behind is caught up by the others. */
static int64_t deal_chunk(const ob_task_ctx *ctx, int64_t n_chunks, int64_t k, atomic_llong *next) {
    const int64_t per = n_chunks * 3 / 4 / ctx->nth;
    return k < per ? (int64_t)ctx->ith * per + k : per * ctx->nth + atomic_fetch_add(next, 1);
}

static void matmul_fn(const ob_task_ctx *ctx, void *arg) {
    mm_task *t = arg;
    cpu_backend *c = t->c;
    const int64_t nin = t->w->ne[0], n = t->x->ne[1];

    const char *act = t->act;
    if (t->fmt != OB_ACT_F32) {
        if (n == 1) {
            /* one token: each thread converts it into its own slot, which
             * costs less than waiting for each other at a barrier */
            char *mine = (char *)c->act + (size_t)ctx->ith * t->act_stride;
            convert_act(c->k, t->fmt, ob_tensor_row(t->x, 0), mine, nin);
            act = mine;
        } else {
            int64_t lo, hi;
            ob_split_range(n, ctx->ith, ctx->nth, &lo, &hi);
            for (int64_t i = lo; i < hi; i++)
                convert_act(c->k, t->fmt, ob_tensor_row(t->x, i), (char *)c->act + (size_t)i * t->act_stride, nin);
            ob_threadpool_barrier(ctx);
        }
    }
    const int64_t n_chunks = t->n_row_chunks * t->n_tok_chunks;
    float *buf = t->mk ? NULL : thread_scratch(c, ctx->ith);
    for (int64_t k = 0;; k++) {
        const int64_t ch = deal_chunk(ctx, n_chunks, k, &t->next);
        if (ch >= n_chunks) break;
        mm_chunk(t, act, ch, buf);
    }
}

/* Fill t for out = w x (+ bias): the kernels, the activation format and
 * its row stride, the chunks. Activation rows in a format other than F32
 * are left to the caller (t->act). a4: the W4A4 path (cpu_matmul_a4):
 * Q4_0 weights only, activations quantized to ob_act_q4 and the
 * dot_a4/gemm_a4 kernels. */
static int mm_setup(cpu_backend *c, mm_task *t, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias,
                    ob_tensor *out, bool a4) {
    OB_TRY(check_convertible(w));
    if (x->ne[0] != w->ne[0] || out->ne[0] != w->ne[1] || out->ne[1] != x->ne[1])
        return ob_err(OB_ERR_INTERNAL, "matmul '%s': shapes [%lld,%lld] x [%lld,%lld] -> [%lld,%lld]",
                      w->name ? w->name : "?", (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[0],
                      (long long)x->ne[1], (long long)out->ne[0], (long long)out->ne[1]);
    const int64_t nin = w->ne[0], nout = w->ne[1], n = x->ne[1];
    memset(t, 0, sizeof *t);
    atomic_init(&t->next, 0);
    t->c = c, t->w = w, t->x = x, t->bias = bias, t->out = out;
    const cpu_packed *pk = w->extra;
    const ob_mm_kernels *mk = (int)w->type >= 0 && w->type < OB_TYPE_COUNT ? &c->k->mm[w->type] : NULL;
    if (a4) {
        if (w->type != OB_TYPE_Q4_0 || !mk->dot_a4)
            return ob_err(OB_ERR_UNSUPPORTED, "matmul '%s': no 4-bit activation kernel for %s", w->name ? w->name : "?",
                          ob_type_name(w->type));
        if (pk && pk->type == w->type && pk->k->mm[w->type].gemm_a4) {
            t->pk = pk;
            t->mk = &pk->k->mm[w->type];
            t->gemm = t->mk->gemm_a4;
            t->fmt = t->mk->packed_a4_act;
        } else {
            t->mk = mk;
            t->dot = mk->dot_a4;
            t->fmt = mk->a4_act;
        }
    } else if (pk && pk->type == w->type && pk->k->mm[w->type].gemm) {
        t->pk = pk;
        t->mk = &pk->k->mm[w->type];
        t->fmt = t->mk->packed_act;
        t->gemm = t->mk->gemm;
        t->tiles = t->mk->gemm_tiles;
        t->pair = c->pairs ? t->mk->gemm_pair : NULL;
    } else if (mk && mk->dot) {
        t->mk = mk;
        t->fmt = mk->act;
        t->dot = mk->dot;
    } else {
        OB_TRY(ensure_scratch(c, (size_t)nin));
    }
    if (t->mk && t->fmt != OB_ACT_F32) {
        t->act_stride = (ob_act_row_bytes(t->fmt, nin) + 63) & ~(size_t)63;
        if (t->act_stride == 0)
            return ob_err(OB_ERR_INTERNAL, "matmul '%s': %lld columns do not fit the activation blocks",
                          w->name ? w->name : "?", (long long)nin);
    } else {
        t->fmt = OB_ACT_F32;
        t->act = x->data;
        t->act_stride = x->nb[1];
    }
    /* Chunks: about 16 per thread for a few tokens; panels of rows by 128
     * tokens for prefill (see the file comment). */
    const int64_t unit = t->pk ? OB_PANEL : 1;
    const int64_t units = (nout + unit - 1) / unit;
    t->tok_per_chunk = n <= OB_MM_MAX_NT ? n : TOKENS_PER_CHUNK;
    t->n_tok_chunks = (n + t->tok_per_chunk - 1) / t->tok_per_chunk;
    int64_t want = (int64_t)c->n_threads * 16 / t->n_tok_chunks;
    if (want < 1) want = 1;
    int64_t upc = (units + want - 1) / want;
    int64_t min_units = t->pk ? 1 : ROWS_PER_CHUNK;
    if (n > OB_MM_MAX_NT) min_units = t->pk ? 4 : 4 * ROWS_PER_CHUNK;
    if (upc < min_units) upc = min_units;
    t->rows_per_chunk = upc * unit;
    t->n_row_chunks = (nout + t->rows_per_chunk - 1) / t->rows_per_chunk;
    return 0;
}

static int matmul_common(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out,
                         bool a4) {
    cpu_backend *c = cpu(b);
    mm_task t;
    OB_TRY(mm_setup(c, &t, w, x, bias, out, a4));
    if (t.fmt != OB_ACT_F32) {
        /* one token: a slot per thread (see matmul_fn) */
        OB_TRY(ensure_act(c, ob_mul_size(t.act_stride, (size_t)(x->ne[1] == 1 ? c->n_threads : x->ne[1]))));
        t.act = c->act;
    }
    ob_threadpool_run(c->pool, matmul_fn, &t);
    return 0;
}

static int cpu_matmul(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    return matmul_common(b, w, x, bias, out, false);
}

static int cpu_matmul_a4(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    return matmul_common(b, w, x, bias, out, true);
}

/* ---- norms ---- */

typedef struct norm_task {
    const ob_cpu_kernels *k;
    const ob_tensor *x, *w, *bias;
    float eps;
    int64_t group;
    ob_tensor *out;
} norm_task;

/* y = x / rms(x) * w over n values (w may be NULL) */
static void rms_norm_row(const ob_cpu_kernels *k, const float *x, const float *w, float eps, int64_t n, float *y) {
    const float ss = k->sum_sq(x, n);
    const float s = (float)(1.0 / sqrt((double)ss / (double)n + (double)eps));
    k->scale_mul(x, s, w, y, n);
}

static void rms_norm_fn(const ob_task_ctx *ctx, void *arg) {
    norm_task *t = arg;
    const ob_cpu_kernels *k = t->k;
    int64_t d = t->x->ne[0], groups_per_row = d / t->group;
    int64_t total = t->x->ne[1] * groups_per_row, lo, hi;
    ob_split_range(total, ctx->ith, ctx->nth, &lo, &hi);
    const float *w = t->w ? (const float *)t->w->data : NULL;
    for (int64_t gi = lo; gi < hi; gi++) {
        int64_t row = gi / groups_per_row, off = (gi % groups_per_row) * t->group;
        rms_norm_row(k, (const float *)ob_tensor_row(t->x, row) + off, w, t->eps, t->group,
                     (float *)ob_tensor_row(t->out, row) + off);
    }
}

static int cpu_rms_norm(ob_backend *b, const ob_tensor *x, const ob_tensor *w, float eps, int64_t group,
                        ob_tensor *out) {
    if (group <= 0 || x->ne[0] % group) return ob_err(OB_ERR_INTERNAL, "rms_norm: group %lld", (long long)group);
    if (w && w->type != OB_TYPE_F32) return ob_err(OB_ERR_UNSUPPORTED, "norm weight '%s' must be f32", w->name);
    norm_task t = {cpu(b)->k, x, w, NULL, eps, group, out};
    run_op(cpu(b), rms_norm_fn, &t, ob_tensor_nelements(x));
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
    norm_task t = {cpu(b)->k, x, w, bias, eps, x->ne[0], out};
    run_op(cpu(b), layer_norm_fn, &t, ob_tensor_nelements(x));
    return 0;
}

/* ---- rope ---- */

/* YaRN: which rotation dimensions are interpolated and which extrapolated. */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* The cos/sin of every (token, frequency) pair depend on the positions and
 * the rope parameters only, so the table made for Q serves K of the same
 * layer and every later layer of the batch: built when the positions or
 * parameters change, reused otherwise (the forward pass calls rope twice a
 * layer with the same positions). */
typedef struct rope_task {
    ob_tensor *x;
    int n_head, head_dim;
    const int32_t *pos;
    const ob_rope_params *p;
    float corr_lo, corr_hi;
    float *cs;   /* [n][n_rot/2][2] cos, sin (times mscale) */
    bool build;
} rope_task;

static void rope_fn(const ob_task_ctx *ctx, void *arg) {
    rope_task *t = arg;
    const ob_rope_params *p = t->p;
    int64_t lo, hi;
    /* the same split for building and applying: each thread uses its own rows */
    ob_split_range(t->x->ne[1], ctx->ith, ctx->nth, &lo, &hi);
    const int half = p->n_rot / 2;
    for (int64_t r = lo; r < hi && t->build; r++) {
        float *cs = t->cs + (size_t)r * (size_t)half * 2;
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
            cs[2 * i] = (float)cos((double)theta) * mscale;
            cs[2 * i + 1] = (float)sin((double)theta) * mscale;
        }
    }
    for (int64_t r = lo; r < hi; r++) {
        float *row = ob_tensor_row(t->x, r);
        const float *cs = t->cs + (size_t)r * (size_t)half * 2;
        for (int h = 0; h < t->n_head; h++) {
            float *v = row + (size_t)h * (size_t)t->head_dim;
            if (p->mode == OB_ROPE_NEOX)
                for (int i = 0; i < half; i++) {
                    float x0 = v[i], x1 = v[i + half];
                    v[i] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
                    v[i + half] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
                }
            else
                for (int i = 0; i < half; i++) {
                    float x0 = v[2 * i], x1 = v[2 * i + 1];
                    v[2 * i] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
                    v[2 * i + 1] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
                }
        }
    }
}

static bool rope_params_equal(const ob_rope_params *a, const ob_rope_params *b) {
    return a->n_rot == b->n_rot && a->freq_base == b->freq_base && a->freq_scale == b->freq_scale &&
           a->n_ctx_orig == b->n_ctx_orig && a->ext_factor == b->ext_factor && a->attn_factor == b->attn_factor &&
           a->beta_fast == b->beta_fast && a->beta_slow == b->beta_slow && a->freq_factors == b->freq_factors;
}

static int cpu_rope(ob_backend *b, ob_tensor *x, int n_head, int head_dim, const int32_t *pos,
                    const ob_rope_params *p) {
    cpu_backend *c = cpu(b);
    if (p->n_rot > head_dim || p->n_rot % 2) return ob_err(OB_ERR_INTERNAL, "rope: n_rot %d, head_dim %d", p->n_rot, head_dim);
    const int64_t n = x->ne[1];
    const size_t table = (size_t)n * (size_t)p->n_rot;
    bool valid = c->rope_valid && c->rope_n == n && rope_params_equal(&c->rope_p, p) &&
                 memcmp(c->rope_pos, pos, (size_t)n * sizeof(int32_t)) == 0;
    if (!valid) {
        if (table > c->rope_cap || n > c->rope_pos_cap) {
            float *cs = ob_malloc(table * sizeof(float));
            int32_t *ps = ob_malloc((size_t)n * sizeof(int32_t));
            if (!cs || !ps) {
                ob_free(cs);
                ob_free(ps);
                return ob_err(OB_ERR_OOM, "rope table");
            }
            ob_free(c->rope_cs);
            ob_free(c->rope_pos);
            c->rope_cs = cs, c->rope_pos = ps, c->rope_cap = table, c->rope_pos_cap = n;
        }
        c->rope_valid = false;
    }
    rope_task t = {x, n_head, head_dim, pos, p, 0, 0, c->rope_cs, !valid};
    if (p->ext_factor != 0.0f) {
        float lo = floorf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_fast, p->freq_base));
        float hi = ceilf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_slow, p->freq_base));
        t.corr_lo = fmaxf(0.0f, lo);
        t.corr_hi = fminf((float)p->n_rot - 1.0f, hi);
    }
    run_op(c, rope_fn, &t, ob_tensor_nelements(x));
    if (!valid) {
        memcpy(c->rope_pos, pos, (size_t)n * sizeof(int32_t));
        c->rope_p = *p;
        c->rope_n = n;
        c->rope_valid = true;
    }
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
        if (kv->type == OB_TYPE_F16) {
            cpu(b)->k->f32_to_f16(ob_tensor_row(k, i), (uint16_t *)(void *)kd, kv->kv_dim);
            cpu(b)->k->f32_to_f16(ob_tensor_row(v, i), (uint16_t *)(void *)vd, kv->kv_dim);
        } else {
            tr->from_float_ref(ob_tensor_row(k, i), kd, kv->kv_dim);
            tr->from_float_ref(ob_tensor_row(v, i), vd, kv->kv_dim);
        }
    }
    return 0;
}

/* Attention: blocked ("flash") softmax over the paged cache.
 *
 * Work unit: one KV head x a run of up to ATT_QB consecutive batch tokens of
 * one sequence (same block table, consecutive positions). Its M = tokens x
 * (n_head / n_head_kv) query rows share every K and V row they read, so
 * each cache row is converted to float once per unit and then used by all M
 * rows (GQA reuse, and prefill reuse across tokens; F16 rows, the default,
 * are read in place by F16 kernels). Keys are visited one
 * KV page at a time (the rows of a page are contiguous): the M x page
 * scores in one tiled kernel call, then per row its window's maximum, one
 * rescale of the running output when the maximum grows and exp of the page
 * in one vector call (keys outside the row's [kv_start, pos] window get
 * weight 0), then the M x page weights times the page's V rows in one tiled
 * call. Memory stays O(page) per unit whatever the context length.
 * Units are taken largest-position first from the atomic counter, so the
 * long causal rows of the prompt's end start early and the threads finish
 * together.
 *
 * Batch invariance. A query row's result must be bit for bit the same
 * whether its token is decoded alone, verified with 4 drafts, or prefilled
 * with 63 others (docs/performance.md), yet units differ in rows, pages and
 * shape (blocked vs split-K below). So the arithmetic of one (token, head)
 * depends on its own window only:
 *   - keys are cut into ranges of ATT_RANGE absolute positions ([0, 256),
 *     [256, 512), ...), and within a range into the cache's pages; each range
 *     runs the online softmax above from a fresh state (max, sum, O), and
 *     the ranges' results are merged in position order by attn_merge, in
 *     both unit shapes;
 *   - the kernels give each key's score and each row's sums independently
 *     of how many rows and keys a call holds (kernels.h), and keys outside a
 *     row's window weigh exactly 0, so the extra keys a batch's wider range
 *     brings into a page add nothing;
 *   - max, exp and sum run over the row's own window of the page.
 * The extra cost is one merge (hd multiply-adds) per row per 256 keys. */

#define ATT_QB 64
/* Key ranges (absolute positions [r * ATT_RANGE, (r + 1) * ATT_RANGE)):
 * the unit of the softmax merge in both shapes (see above). */
#define ATT_RANGE 256
/* Split-K attention: batches whose runs have at most ATT_SPLIT_QB tokens and
 * span more than ATT_SPLIT_MIN positions give each key range its own unit. */
#define ATT_SPLIT_QB 4
#define ATT_SPLIT_MIN 512

typedef struct attn_task {
    cpu_backend *c;
    const ob_kv_store *kv;
    int il;
    const ob_tensor *q;
    const ob_attn_token *toks;
    const ob_attn_params *p;
    ob_tensor *out;
    const int32_t *group_start; /* [n_groups + 1] batch index where each run of tokens starts */
    int64_t n_groups;
    int m_max;                  /* query rows of a unit, at most */
    int64_t n_split;            /* 0, or key ranges per group, at most (split-K) */
    float *partial;             /* split-K: [n_groups][n_split][ATT_SPLIT_QB][n_head][2 + head_dim] */
} attn_task;

/* `count` consecutive cache rows (row_bytes apart), elements [off, off+hd),
 * as floats: a pointer into the cache for F32 (stride row_bytes), else
 * converted into dst (stride hd). Returns the row stride in bytes. */
static const float *kv_rows_f32(const cpu_backend *c, const ob_kv_store *kv, const char *rows, int count, int64_t off,
                                int hd, float *dst, float *tmp, size_t *stride) {
    if (kv->type == OB_TYPE_F32) {
        *stride = kv->row_bytes;
        return (const float *)(const void *)rows + off;
    }
    *stride = (size_t)hd * sizeof(float);
    for (int j = 0; j < count; j++) {
        const char *row = rows + (size_t)j * kv->row_bytes;
        float *d = dst + (size_t)j * (size_t)hd;
        if (kv->type == OB_TYPE_F16) {
            c->k->f16_to_f32((const uint16_t *)(const void *)row + off, d, hd);
        } else {
            const ob_type_traits *tr = ob_type_get((int)kv->type);
            int64_t bs = tr->block_size, b0 = off / bs, b1 = (off + hd + bs - 1) / bs;
            tr->to_float(row + (size_t)b0 * tr->type_size, tmp, (b1 - b0) * bs);
            memcpy(d, tmp + (off - b0 * bs), (size_t)hd * sizeof(float));
        }
    }
    return dst;
}

/* Per-thread attention scratch (floats, see cpu_attention for the sizes). */
typedef struct attn_scratch {
    float *Qt, *O;  /* [M][hd] scaled queries, running outputs */
    float *Kf, *Vf; /* [bs][hd] a page converted to floats (non-F16 caches) */
    float *S, *P;   /* [M][bs] scores, weights */
    float *mx, *l;  /* [M] running maximum and sum within a key range */
    float *gm, *gl; /* [M] the same over the ranges merged so far */
    float *tmp;     /* conversion room */
} attn_scratch;

static attn_scratch attn_scratch_of(cpu_backend *c, int ith, int Mmax, int hd, int bs) {
    attn_scratch a;
    a.Qt = thread_scratch(c, ith);
    a.O = a.Qt + (size_t)Mmax * hd;
    a.Kf = a.O + (size_t)Mmax * hd;
    a.Vf = a.Kf + (size_t)bs * hd;
    a.S = a.Vf + (size_t)bs * hd;
    a.P = a.S + (size_t)Mmax * bs;
    a.mx = a.P + (size_t)Mmax * bs;
    a.l = a.mx + Mmax;
    a.gm = a.l + Mmax;
    a.gl = a.gm + Mmax;
    a.tmp = a.gl + Mmax;
    return a;
}

/* Rows of a unit: KV heads hk0..hk0+nh-1, each with Mh = tokens x G query
 * rows (token t0 + j / G, head hk * G + j % G); row m = (hk - hk0) * Mh + j.
 * Load them scaled. */
static void attn_rows_load(const attn_task *t, attn_scratch *a, int32_t t0, int Mh, int hk0, int nh) {
    const ob_attn_params *p = t->p;
    const int hd = p->head_dim, G = p->n_head / p->n_head_kv;
    for (int m = 0; m < Mh * nh; m++) {
        const int hk = hk0 + m / Mh, j = m % Mh;
        const float *q = (const float *)ob_tensor_row(t->q, t0 + j / G) + (size_t)(hk * G + j % G) * hd;
        for (int i = 0; i < hd; i++) a->Qt[(size_t)m * hd + i] = q[i] * p->scale;
    }
}

/* Reset the running state of M rows before a key range. */
static void attn_rows_reset(attn_scratch *a, int M, int hd) {
    memset(a->O, 0, (size_t)M * (size_t)hd * sizeof(float));
    for (int m = 0; m < M; m++) {
        a->mx[m] = -INFINITY;
        a->l[m] = 0.0f;
    }
}

/* Fold one key range's (max m, sum l, unnormalized output o[hd]) into a
 * row's merged (*gm, *gl, go[hd]); ranges come in position order. The one
 * merge formula both unit shapes use (batch invariance): the first range
 * with keys is copied, a later one rescales whichever side has the smaller
 * maximum. *gm = -inf marks "no keys yet" (go is then not read). */
static void attn_merge(const ob_cpu_kernels *k, int hd, float *gm, float *gl, float *go, float m, float l,
                       const float *o) {
    if (m == -INFINITY) return; /* no key of the row's window in this range */
    if (*gm == -INFINITY) {
        *gm = m, *gl = l;
        memcpy(go, o, (size_t)hd * sizeof(float));
        return;
    }
    if (m > *gm) {
        const float corr = expf(*gm - m);
        k->scale_f32(corr, go, hd);
        *gl *= corr;
        *gm = m;
    }
    const float w = expf(m - *gm);
    *gl += w * l;
    k->axpy_f32(w, o, go, hd);
}

/* Normalize a merged row into its output (0 when it saw no key). */
static void attn_finish(float gm, float gl, float *o, int hd) {
    if (gm == -INFINITY || !(gl > 0.0f)) {
        memset(o, 0, (size_t)hd * sizeof(float));
        return;
    }
    const float inv = 1.0f / gl;
    for (int i = 0; i < hd; i++) o[i] *= inv;
}

/* Rows of a unit run the tiles in blocks of ATT_ROWS (>= the AVX-512 F16
 * tiles' convert-once threshold), each block against the keys [0, n) of
 * the page that its tokens can see: a prompt's diagonal pages (the tokens
 * of the unit's own positions) take about half the work. The keys a block
 * leaves out weigh 0 for all its rows, and a key's score does not depend
 * on how many keys a call holds, so the results are those of the whole page
 * (batch invariance; a decode token alone never visits later keys either). */
#define ATT_ROWS 16

/* Keys [0, n) of the page starting at `pos` (count keys) that rows
 * [m0, m1) can see: n = the largest of their tokens' pos - pos + 1, within
 * [0, count]; with `all`, the smallest (whether every row needs the page). */
static int attn_rows_keys(const attn_task *t, int32_t t0, int G, int m0, int m1, int32_t pos, int count, bool all) {
    int n = all ? count : 0;
    for (int m = m0; m < m1; m++) {
        const int32_t e = t->toks[t0 + m / G].pos - pos + 1;
        const int v = e < 0 ? 0 : e > count ? count : (int)e;
        n = all ? (v < n ? v : n) : (v > n ? v : n);
    }
    return n;
}

/* Decode over a long context reads each head's slice of a page - 32 rows of
 * hd * 2 bytes, a KV row apart - at about a third of the memory bandwidth:
 * the strided rows defeat the hardware prefetchers, so each key's first load
 * waits on memory. Up to ATT_PF_MAXM query rows over a whole F16 page therefore run the
 * kernels ATT_PF_STEP keys at a time, and each step first asks for the same
 * keys' rows of the next page (this head's slice; into L2), a page ahead of
 * their use. A key's score and the order of a row's sums do not depend on
 * how the keys are cut into calls (kernels.h), so the results are the same
 * bits. Qwen3-0.6B Q4_0, 2 threads, tg32: +20% at depth 2048, +4-20% at 4096
 * (bench/RESULTS.md, session 20). OB_CPU_ATT_PF=0 turns it off. */
#define ATT_PF_STEP 8
#define ATT_PF_MAXM 16

static void attn_pf_rows(const char *row, size_t stride, int n, size_t bytes) {
    for (int j = 0; j < n; j++, row += stride)
        for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
}

/* Scores (pv false: x = Q rows, y = S) or P.V (x = P, y = O) over the nk keys
 * of `rows` in steps, prefetching the first cn rows of `next` (same stride). */
static void attn_f16_steps(const ob_cpu_kernels *k, bool pv, const float *x, int M, size_t ldx, const char *rows,
                           size_t stride, int nk, int hd, float *y, size_t ldy, const char *next, int cn) {
    for (int j = 0; j < nk; j += ATT_PF_STEP) {
        const int jb = nk - j < ATT_PF_STEP ? nk - j : ATT_PF_STEP;
        if (j < cn) attn_pf_rows(next + (size_t)j * stride, stride, cn - j < jb ? cn - j : jb, (size_t)hd * 2);
        const uint16_t *r = (const uint16_t *)(const void *)(rows + (size_t)j * stride);
        if (pv) k->attn_pv_f16(x + j, M, ldx, r, stride, jb, hd, y, ldy);
        else k->attn_qk_f16(x, M, ldx, r, stride, jb, hd, y + j, ldy);
    }
}

/* Attend the rows of KV heads hk0..hk0+nh-1 over cache positions [lo, hi]
 * of the tokens' sequence, a page at a time and, within a page, one head
 * after another: the page's rows stay in L1/L2 while every head reads its
 * slice of them (see above). */
static void attn_range(const attn_task *t, attn_scratch *a, int32_t t0, int Mh, int hk0, int nh, int32_t lo, int32_t hi,
                       int32_t pf_hi) {
    cpu_backend *c = t->c;
    const ob_cpu_kernels *k = c->k;
    const ob_attn_params *p = t->p;
    const ob_kv_store *kv = t->kv;
    const int hd = p->head_dim, G = p->n_head / p->n_head_kv, bs = kv->block_size;
    const ob_attn_token *first = &t->toks[t0];
    const char *kbase = kv->k[t->il], *vbase = kv->v[t->il];
    const bool f16 = kv->type == OB_TYPE_F16;
    for (int32_t pos = lo; pos <= hi;) {
        const int32_t off0 = pos % bs;
        const int count = (int)(bs - off0 < hi - pos + 1 ? bs - off0 : hi - pos + 1);
        const int64_t slot = (int64_t)first->block_table[pos / bs] * bs + off0;
        const char *krow = kbase + (size_t)slot * kv->row_bytes, *vrow = vbase + (size_t)slot * kv->row_bytes;
        /* the next page's rows, fetched ATT_PF_STEP keys at a time while this page's are used */
        const char *kn = NULL, *vn = NULL;
        int cn = 0;
        if (f16 && c->attn_pf && Mh <= ATT_PF_MAXM && pos + count <= pf_hi) {
            const int32_t np = pos + count;
            const int64_t ns = (int64_t)first->block_table[np / bs] * bs;
            kn = kbase + (size_t)ns * kv->row_bytes, vn = vbase + (size_t)ns * kv->row_bytes;
            cn = pf_hi - np + 1 < bs ? (int)(pf_hi - np + 1) : bs;
        }
        for (int hh = 0; hh < nh; hh++) {
            const int hk = hk0 + hh;
            float *Qt = a->Qt + (size_t)hh * Mh * hd, *O = a->O + (size_t)hh * Mh * hd;
            float *S = a->S + (size_t)hh * Mh * bs, *P = a->P + (size_t)hh * Mh * bs;
            float *mx = a->mx + hh * Mh, *l = a->l + hh * Mh;
            /* F16 rows are read in place; other types are converted to
             * floats once for the head's rows */
            size_t ks = kv->row_bytes, vs = kv->row_bytes;
            const float *kr = NULL, *vr = NULL;
            if (!f16) {
                kr = kv_rows_f32(c, kv, krow, count, (int64_t)hk * hd, hd, a->Kf, a->tmp, &ks);
                vr = kv_rows_f32(c, kv, vrow, count, (int64_t)hk * hd, hd, a->Vf, a->tmp, &vs);
            }
            const uint16_t *kh = (const uint16_t *)(const void *)krow + (size_t)hk * hd;
            const uint16_t *vh = (const uint16_t *)(const void *)vrow + (size_t)hk * hd;
            /* scores of every row against the page (a block of rows against
             * the keys its tokens can see, see attn_rows_keys), then each
             * row's window: keys outside [kv_start, pos] get weight 0 */
            const bool whole = attn_rows_keys(t, t0, G, 0, Mh, pos, count, true) == count;
            for (int m0 = 0; m0 < Mh; m0 += ATT_ROWS) {
                const int mb = whole ? Mh : (Mh - m0 < ATT_ROWS ? Mh - m0 : ATT_ROWS);
                const int nk = whole ? count : attn_rows_keys(t, t0, G, m0, m0 + mb, pos, count, false);
                if (nk > 0 && f16 && kn && whole) {
                    attn_f16_steps(k, false, Qt, Mh, (size_t)hd, (const char *)kh, ks, nk, hd, S, (size_t)bs,
                                   kn + (size_t)hk * hd * 2, cn);
                } else if (nk > 0 && f16)
                    k->attn_qk_f16(Qt + (size_t)m0 * hd, mb, (size_t)hd, kh, ks, nk, hd, S + (size_t)m0 * bs, (size_t)bs);
                else if (nk > 0)
                    k->attn_qk(Qt + (size_t)m0 * hd, mb, (size_t)hd, kr, ks, nk, hd, S + (size_t)m0 * bs, (size_t)bs);
                if (whole) break;
            }
            for (int m = 0; m < Mh; m++) {
                const ob_attn_token *tok = &t->toks[t0 + m / G];
                float *srow = S + (size_t)m * bs, *prow = P + (size_t)m * bs;
                int32_t s0 = tok->kv_start > pos ? tok->kv_start : pos;
                int32_t e = tok->pos < pos + count - 1 ? tok->pos : pos + count - 1;
                if (s0 > e) {
                    memset(prow, 0, (size_t)count * sizeof(float));
                    continue;
                }
                const int j0 = s0 - pos, j1 = e - pos + 1;
                if (p->softcap > 0.0f)
                    for (int j = j0; j < j1; j++) srow[j] = p->softcap * tanhf(srow[j] / p->softcap);
                if (p->max_alibi_bias > 0.0f) { /* query head hk * G + m % G; key j at position pos + j */
                    const float slope = ob_alibi_slope(p->n_head, hk * G + m % G, p->max_alibi_bias);
                    for (int j = j0; j < j1; j++) srow[j] += slope * (float)(pos + j - tok->pos);
                }
                const float bmax = k->max_f32(srow + j0, j1 - j0);
                float *o = O + (size_t)m * hd;
                if (bmax > mx[m]) {
                    /* a new maximum: rescale what was summed under the old one */
                    float corr = mx[m] == -INFINITY ? 0.0f : expf(mx[m] - bmax);
                    if (corr != 1.0f) k->scale_f32(corr, o, hd);
                    l[m] *= corr;
                    mx[m] = bmax;
                }
                if (j0 > 0) memset(prow, 0, (size_t)j0 * sizeof(float));
                if (j1 < count) memset(prow + j1, 0, (size_t)(count - j1) * sizeof(float));
                l[m] += k->exp_sum(srow + j0, mx[m], prow + j0, j1 - j0);
            }
            for (int m0 = 0; m0 < Mh; m0 += ATT_ROWS) {
                const int mb = whole ? Mh : (Mh - m0 < ATT_ROWS ? Mh - m0 : ATT_ROWS);
                const int nk = whole ? count : attn_rows_keys(t, t0, G, m0, m0 + mb, pos, count, false);
                if (nk > 0 && f16 && kn && whole) {
                    attn_f16_steps(k, true, P, Mh, (size_t)bs, (const char *)vh, vs, nk, hd, O, (size_t)hd,
                                   vn + (size_t)hk * hd * 2, cn);
                } else if (nk > 0 && f16)
                    k->attn_pv_f16(P + (size_t)m0 * bs, mb, (size_t)bs, vh, vs, nk, hd, O + (size_t)m0 * hd, (size_t)hd);
                else if (nk > 0)
                    k->attn_pv(P + (size_t)m0 * bs, mb, (size_t)bs, vr, vs, nk, hd, O + (size_t)m0 * hd, (size_t)hd);
                if (whole) break;
            }
        }
        pos += count;
    }
}

static void attn_group_range(const attn_task *t, int64_t g, int32_t *lo, int32_t *hi) {
    const int32_t t0 = t->group_start[g], t1 = t->group_start[g + 1];
    *lo = t->toks[t0].kv_start;
    *hi = t->toks[t1 - 1].pos;
    for (int32_t ti = t0; ti < t1; ti++)
        if (t->toks[ti].kv_start < *lo) *lo = t->toks[ti].kv_start;
}

static void attention_fn(const ob_task_ctx *ctx, void *arg) {
    attn_task *t = arg;
    cpu_backend *c = t->c;
    const ob_attn_params *p = t->p;
    const int hd = p->head_dim, G = p->n_head / p->n_head_kv, nkv = p->n_head_kv;
    attn_scratch a = attn_scratch_of(c, ctx->ith, t->m_max, hd, t->kv->block_size);
    if (t->n_split == 0) {
        const int64_t n_units = t->n_groups * nkv;
        for (;;) {
            int64_t u = ob_threadpool_next_chunk(c->pool);
            if (u >= n_units) break;
            const int64_t g = t->n_groups - 1 - u / nkv;
            const int hk = (int)(u % nkv);
            const int32_t t0 = t->group_start[g];
            const int M = (t->group_start[g + 1] - t0) * G;
            int32_t lo, hi;
            attn_group_range(t, g, &lo, &hi);
            attn_rows_load(t, &a, t0, M, hk, 1);
            for (int m = 0; m < M; m++) a.gm[m] = -INFINITY, a.gl[m] = 0.0f;
            /* key range by key range, merged straight into the output rows */
            for (int32_t r0 = lo - lo % ATT_RANGE; r0 <= hi; r0 += ATT_RANGE) {
                const int32_t a0 = lo > r0 ? lo : r0, a1 = hi < r0 + ATT_RANGE - 1 ? hi : r0 + ATT_RANGE - 1;
                attn_rows_reset(&a, M, hd);
                attn_range(t, &a, t0, M, hk, 1, a0, a1, hi);
                for (int m = 0; m < M; m++) {
                    float *o = (float *)ob_tensor_row(t->out, t0 + m / G) + (size_t)(hk * G + m % G) * hd;
                    attn_merge(c->k, hd, &a.gm[m], &a.gl[m], o, a.mx[m], a.l[m], a.O + (size_t)m * hd);
                }
            }
            for (int m = 0; m < M; m++)
                attn_finish(a.gm[m], a.gl[m], (float *)ob_tensor_row(t->out, t0 + m / G) + (size_t)(hk * G + m % G) * hd,
                            hd);
        }
        return;
    }
    /* Split-K (few tokens, long context): unit = (group, key range) with
     * every KV head, page by page, so each page is read once, whole, while
     * it is in cache, instead of one head's slice per unit. Each unit leaves
     * per row its unnormalized output, maximum and sum; sp counts the
     * group's absolute key ranges from the one holding lo. */
    const int64_t n_units = t->n_groups * t->n_split;
    for (;;) {
        int64_t u = ob_threadpool_next_chunk(c->pool);
        if (u >= n_units) break;
        const int64_t g = u / t->n_split, sp = u % t->n_split;
        const int32_t t0 = t->group_start[g];
        const int M = (t->group_start[g + 1] - t0) * G;
        int32_t lo, hi;
        attn_group_range(t, g, &lo, &hi);
        const int32_t r0 = lo - lo % ATT_RANGE + (int32_t)sp * ATT_RANGE;
        const int32_t a0 = lo > r0 ? lo : r0, a1 = hi < r0 + ATT_RANGE - 1 ? hi : r0 + ATT_RANGE - 1;
        attn_rows_reset(&a, M * nkv, hd);
        if (a0 <= a1) {
            attn_rows_load(t, &a, t0, M, 0, nkv);
            attn_range(t, &a, t0, M, 0, nkv, a0, a1, a1);
        }
        for (int m = 0; m < M * nkv; m++) {
            const int hk = m / M, j = m % M;
            /* partial[(g * n_split + sp)][token][head] = {max, sum, O[hd]} */
            const int64_t row = (g * t->n_split + sp) * (int64_t)ATT_SPLIT_QB * p->n_head + (int64_t)(j / G) * p->n_head +
                                hk * G + j % G;
            float *dst = t->partial + row * (hd + 2);
            dst[0] = a.mx[m];
            dst[1] = a.l[m];
            memcpy(dst + 2, a.O + (size_t)m * hd, (size_t)hd * sizeof(float));
        }
    }
    ob_threadpool_barrier(ctx);
    /* merge the ranges of each (token, head), in position order */
    const int64_t n = t->q->ne[1];
    int64_t lo_r, hi_r;
    ob_split_range(n * p->n_head, ctx->ith, ctx->nth, &lo_r, &hi_r);
    for (int64_t r = lo_r; r < hi_r; r++) {
        const int64_t ti = r / p->n_head, h = r % p->n_head;
        int64_t g = 0;
        while (t->group_start[g + 1] <= ti) g++;
        const int64_t tl = ti - t->group_start[g];
        float *o = (float *)ob_tensor_row(t->out, ti) + (size_t)h * hd;
        float gm = -INFINITY, gl = 0.0f;
        for (int64_t sp = 0; sp < t->n_split; sp++) {
            const float *src = t->partial + ((g * t->n_split + sp) * ATT_SPLIT_QB * p->n_head + tl * p->n_head + h) * (hd + 2);
            attn_merge(c->k, hd, &gm, &gl, o, src[0], src[1], src + 2);
        }
        attn_finish(gm, gl, o, hd);
    }
}

static int cpu_attention(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_token *toks,
                         const ob_attn_params *p, ob_tensor *out) {
    cpu_backend *c = cpu(b);
    if (p->n_head % p->n_head_kv) return ob_err(OB_ERR_INTERNAL, "attention: %d heads, %d kv heads", p->n_head, p->n_head_kv);
    const int64_t n = q->ne[1];
    const int hd = p->head_dim, G = p->n_head / p->n_head_kv, bs = kv->block_size;
    /* runs of consecutive positions of one sequence, at most ATT_QB tokens;
     * equal positions continue a run too: an encoder's tokens that all see
     * up to the sequence's end (src/model/bert.c) share their keys (a
     * decoder's batch never repeats a position of a sequence) */
    OB_TRY(ensure_act(c, (size_t)(n + 1) * sizeof(int32_t)));
    int32_t *gs = c->act;
    int64_t ng = 0, max_run = 0;
    int32_t max_span = 0;
    for (int64_t i = 0; i < n; i++) {
        bool cont = i > 0 && toks[i].block_table == toks[i - 1].block_table &&
                    (toks[i].pos == toks[i - 1].pos + 1 || toks[i].pos == toks[i - 1].pos) && i - gs[ng - 1] < ATT_QB;
        if (!cont) gs[ng++] = (int32_t)i;
        if (i - gs[ng - 1] + 1 > max_run) max_run = i - gs[ng - 1] + 1;
        if (toks[i].pos - toks[i].kv_start + 1 > max_span) max_span = toks[i].pos - toks[i].kv_start + 1;
    }
    gs[ng] = (int32_t)n;
    attn_task t;
    memset(&t, 0, sizeof t);
    t.c = c, t.kv = kv, t.il = il, t.q = q, t.toks = toks, t.p = p, t.out = out, t.group_start = gs, t.n_groups = ng;
    t.m_max = ATT_QB * G;
    if (max_run <= ATT_SPLIT_QB && max_span > ATT_SPLIT_MIN && c->n_threads > 1) {
        /* few tokens against a long context: split the keys (see attention_fn) */
        for (int64_t g = 0; g < ng; g++) {
            int32_t lo, hi;
            attn_group_range(&t, g, &lo, &hi);
            const int64_t nr = hi / ATT_RANGE - lo / ATT_RANGE + 1;
            if (nr > t.n_split) t.n_split = nr;
        }
        t.m_max = ATT_SPLIT_QB * p->n_head;
        if (c->split_bytes < (size_t)(ng * t.n_split * ATT_SPLIT_QB * p->n_head * (hd + 2)) * sizeof(float)) {
            size_t want = (size_t)(ng * t.n_split * ATT_SPLIT_QB * p->n_head * (hd + 2)) * sizeof(float);
            float *sp = ob_malloc_aligned(want, 64);
            if (!sp) return ob_err(OB_ERR_OOM, "attention partials");
            ob_free_aligned(c->split);
            c->split = sp;
            c->split_bytes = want;
        }
        t.partial = c->split;
    }
    /* Qt, O [m_max][hd]; Kf, Vf [bs][hd]; S, P [m_max][bs]; mx, l, gm, gl [m_max]; conversion room for a row's blocks */
    size_t Mmax = (size_t)t.m_max;
    size_t need = 2 * Mmax * (size_t)hd + 2 * (size_t)bs * (size_t)hd + 2 * Mmax * (size_t)bs + 4 * Mmax + (size_t)hd +
                  2 * 256 + 64;
    OB_TRY(ensure_scratch(c, need));
    ob_threadpool_chunk_reset(c->pool, 0);
    ob_threadpool_run(c->pool, attention_fn, &t);
    return 0;
}

/* ---- elementwise ---- */

typedef struct ew_task {
    const ob_cpu_kernels *k;
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
    case OB_ACT_TANH: return tanhf(x);
    case OB_ACT_RELU: return x > 0 ? x : 0.0f;
    }
    return x;
}

/* y = act(g) * u over n values (u NULL: act(g)); elementwise, so a run of
 * rows gives the bits the whole row would (the SIMD kernels' vectors start
 * at multiples of 8 from the row's start either way) */
static void glu_row(const ob_cpu_kernels *k, ob_act act, const float *g, const float *u, float *y, int64_t n) {
    if (act == OB_ACT_SILU)
        k->swiglu(g, u, y, n);
    else
        for (int64_t i = 0; i < n; i++) y[i] = u ? act_f(act, g[i]) * u[i] : act_f(act, g[i]);
}

static void glu_fn(const ob_task_ctx *ctx, void *arg) {
    ew_task *t = arg;
    int64_t lo, hi, d = t->a->ne[0];
    ob_split_range(t->a->ne[1], ctx->ith, ctx->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *g = ob_tensor_row(t->a, r);
        const float *u = t->b ? (const float *)ob_tensor_row(t->b, r) : NULL;
        glu_row(t->k, t->act, g, u, ob_tensor_row(t->out, r), d);
    }
}

static int cpu_glu(ob_backend *b, ob_act act, const ob_tensor *gate, const ob_tensor *up, ob_tensor *out) {
    ew_task t = {cpu(b)->k, act, gate, up, out, 0};
    run_op(cpu(b), glu_fn, &t, ob_tensor_nelements(gate));
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
    ew_task t = {cpu(b)->k, 0, a, bb, out, 0};
    run_op(cpu(b), add_fn, &t, ob_tensor_nelements(a));
    return 0;
}

/* ---- one decode token's layer halves (the optional layer_qkv, layer_ffn) ----
 *
 * Op by op, a decode token costs ~7 pool runs a layer - one a product, each
 * waking the workers, starting every thread's memory streams anew and
 * waiting for the slowest thread at its end - and the norms, adds and GLU
 * run on the calling thread while the others wait. Here each half of the
 * layer is one run: every thread computes the one-row norm and residual
 * add itself, q, k and v (o; gate and up; down) share one space of chunks,
 * and the GLU is applied to each gate/up chunk's rows as they are made.
 * Barriers separate the ffn half's three steps (o, gate/up, down). The
 * results have the ops' bits: the same kernels on the same rows in the same
 * order (test_cpu_backend's fused_layer_halves_match_the_ops checks it).
 * OB_CPU_FUSE=0 answers unsupported, so the model runs the ops. */

#define FUSE_MM 4 /* products of a half: q, k, v; or o, gate, up, down */

typedef struct fuse_task {
    cpu_backend *c;
    const ob_layer_qkv *qkv;
    const ob_layer_ffn *ffn;
    mm_task mm[FUSE_MM];
    int n_mm;
    size_t slot;                /* bytes of one converted activation row (the largest of mm[]) */
    float *o, *gate, *up, *hg, *d; /* ffn: shared rows, [E] [F] [F] [F] [E] */
    atomic_llong next[3];       /* the dealt chunks of each step */
} fuse_task;

/* The thread's own two rows of E floats (x + o, its norm) */
static float *fuse_own(const fuse_task *f, int ith, int64_t e) {
    return f->c->fuse + (size_t)ith * 2 * (size_t)((e + 15) & ~(int64_t)15);
}

/* Convert the row x into the activation format of mm[0..n) (each format
 * once) in this thread's slots; act[j] is mm[j]'s. */
static void fuse_convert(const fuse_task *f, const ob_task_ctx *ctx, const mm_task *mm, int n, const float *x,
                         const char **act) {
    for (int j = 0; j < n; j++) {
        if (mm[j].fmt == OB_ACT_F32) {
            act[j] = (const char *)x;
            continue;
        }
        int i = 0;
        while (i < j && mm[i].fmt != mm[j].fmt) i++;
        if (i < j) {
            act[j] = act[i];
            continue;
        }
        char *dst = (char *)f->c->act + ((size_t)ctx->ith * FUSE_MM + (size_t)j) * f->slot;
        convert_act(f->c->k, mm[j].fmt, x, dst, mm[j].w->ne[0]);
        act[j] = dst;
    }
}

/* This thread's chunks of the products mm[0..n), one space of chunks */
static void fuse_products(const fuse_task *f, const ob_task_ctx *ctx, const mm_task *mm, int n, const char **act,
                          atomic_llong *next) {
    int64_t total = 0;
    for (int j = 0; j < n; j++) total += mm[j].n_row_chunks;
    float *buf = thread_scratch(f->c, ctx->ith);
    for (int64_t k = 0;; k++) {
        int64_t ch = deal_chunk(ctx, total, k, next);
        if (ch >= total) break;
        int j = 0;
        while (ch >= mm[j].n_row_chunks) ch -= mm[j].n_row_chunks, j++;
        mm_chunk(&mm[j], act[j], ch, buf);
    }
}

static void qkv_fn(const ob_task_ctx *ctx, void *arg) {
    fuse_task *f = arg;
    const ob_layer_qkv *p = f->qkv;
    const int64_t e = p->x->ne[0];
    float *h = fuse_own(f, ctx->ith, e);
    rms_norm_row(f->c->k, p->x->data, p->norm ? p->norm->data : NULL, p->eps, e, h);
    const char *act[FUSE_MM];
    fuse_convert(f, ctx, f->mm, 3, h, act);
    fuse_products(f, ctx, f->mm, 3, act, &f->next[0]);
}

static void ffn_fn(const ob_task_ctx *ctx, void *arg) {
    fuse_task *f = arg;
    const ob_layer_ffn *p = f->ffn;
    const ob_cpu_kernels *k = f->c->k;
    const int64_t e = p->x->ne[0];
    float *x = p->x->data, *xs = fuse_own(f, ctx->ith, e), *h = xs + ((e + 15) & ~(int64_t)15);
    const char *act[FUSE_MM];
    /* o = wo att + bo */
    fuse_convert(f, ctx, &f->mm[0], 1, p->att->data, act);
    fuse_products(f, ctx, &f->mm[0], 1, act, &f->next[0]);
    ob_threadpool_barrier(ctx);
    /* x + o and its norm (every thread), gate and up, the GLU of each chunk's rows */
    for (int64_t i = 0; i < e; i++) xs[i] = x[i] + f->o[i];
    rms_norm_row(k, xs, p->norm ? p->norm->data : NULL, p->eps, e, h);
    fuse_convert(f, ctx, &f->mm[1], 2, h, act);
    const mm_task *g = &f->mm[1], *u = &f->mm[2];
    float *buf = thread_scratch(f->c, ctx->ith);
    for (int64_t kk = 0;; kk++) {
        const int64_t ch = deal_chunk(ctx, g->n_row_chunks, kk, &f->next[1]);
        if (ch >= g->n_row_chunks) break;
        mm_chunk(g, act[0], ch, buf);
        mm_chunk(u, act[1], ch, buf);
        int64_t r0, r1;
        chunk_rows(g, ch, &r0, &r1);
        glu_row(k, (ob_act)p->act, f->gate + r0, f->up + r0, f->hg + r0, r1 - r0);
    }
    ob_threadpool_barrier(ctx);
    /* x = (x + o) + down(h) */
    const mm_task *dn = &f->mm[3];
    fuse_convert(f, ctx, dn, 1, f->hg, act);
    for (int64_t kk = 0;; kk++) {
        const int64_t ch = deal_chunk(ctx, dn->n_row_chunks, kk, &f->next[2]);
        if (ch >= dn->n_row_chunks) break;
        mm_chunk(dn, act[0], ch, buf);
        int64_t r0, r1;
        chunk_rows(dn, ch, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) x[r] = xs[r] + f->d[r];
    }
}

/* The rows of the fused halves: each thread's two, then the shared ones */
static int fuse_rows(cpu_backend *c, fuse_task *f, int64_t e, int64_t ff) {
    const size_t er = (size_t)((e + 15) & ~(int64_t)15), fr = (size_t)((ff + 15) & ~(int64_t)15);
    const size_t need = 2 * er * (size_t)c->n_threads + 2 * er + 3 * fr;
    if (need > c->fuse_floats) {
        float *p = ob_malloc_aligned(need * sizeof(float), 64);
        if (!p) return ob_err(OB_ERR_OOM, "cpu fused layer rows of %zu floats", need);
        ob_free_aligned(c->fuse);
        c->fuse = p;
        c->fuse_floats = need;
    }
    float *sh = c->fuse + 2 * er * (size_t)c->n_threads;
    f->o = sh, f->d = sh + er, f->gate = sh + 2 * er, f->up = f->gate + fr, f->hg = f->up + fr;
    for (int i = 0; i < 3; i++) atomic_init(&f->next[i], 0);
    return 0;
}

/* The slots of the converted rows (FUSE_MM a thread, each of the largest
 * row); unsupported for a product without a kernel (the dequantize-and-dot
 * fallback reads its input from t->x). */
static int fuse_slots(cpu_backend *c, fuse_task *f) {
    f->slot = 0;
    for (int j = 0; j < f->n_mm; j++) {
        if (!f->mm[j].mk) return OB_ERR_UNSUPPORTED;
        if (f->mm[j].fmt != OB_ACT_F32 && f->mm[j].act_stride > f->slot) f->slot = f->mm[j].act_stride;
    }
    if (f->slot) OB_TRY(ensure_act(c, ob_mul_size(f->slot, (size_t)c->n_threads * FUSE_MM)));
    return 0;
}

static bool fuse_norm_ok(const ob_tensor *norm) { return !norm || norm->type == OB_TYPE_F32; }

static int cpu_layer_qkv(ob_backend *b, const ob_layer_qkv *p) {
    cpu_backend *c = cpu(b);
    if (!c->fuse_on || p->x->ne[1] != 1 || !fuse_norm_ok(p->norm)) return OB_ERR_UNSUPPORTED;
    fuse_task f;
    memset(&f, 0, sizeof f);
    f.c = c, f.qkv = p, f.n_mm = 3;
    OB_TRY(mm_setup(c, &f.mm[0], p->wq, p->x, p->bq, p->q, false));
    OB_TRY(mm_setup(c, &f.mm[1], p->wk, p->x, p->bk, p->k, false));
    OB_TRY(mm_setup(c, &f.mm[2], p->wv, p->x, p->bv, p->v, false));
    OB_TRY(fuse_slots(c, &f));
    OB_TRY(fuse_rows(c, &f, p->x->ne[0], 0));
    ob_threadpool_run(c->pool, qkv_fn, &f);
    return 0;
}

static int cpu_layer_ffn(ob_backend *b, const ob_layer_ffn *p) {
    cpu_backend *c = cpu(b);
    if (!c->fuse_on || p->x->ne[1] != 1 || !fuse_norm_ok(p->norm) || p->gate->ne[1] != p->up->ne[1])
        return OB_ERR_UNSUPPORTED;
    const int64_t e = p->x->ne[0], ff = p->gate->ne[1];
    fuse_task f;
    memset(&f, 0, sizeof f);
    f.c = c, f.ffn = p, f.n_mm = 4;
    OB_TRY(fuse_rows(c, &f, e, ff)); /* the shared rows, for the products' tensors */
    ob_tensor o, gate, up, hg, d;
    ob_tensor_f32_2d(&o, e, 1, f.o);
    ob_tensor_f32_2d(&gate, ff, 1, f.gate);
    ob_tensor_f32_2d(&up, ff, 1, f.up);
    ob_tensor_f32_2d(&hg, ff, 1, f.hg);
    ob_tensor_f32_2d(&d, e, 1, f.d);
    OB_TRY(mm_setup(c, &f.mm[0], p->wo, p->att, p->bo, &o, false));
    OB_TRY(mm_setup(c, &f.mm[1], p->gate, p->x, NULL, &gate, false));
    OB_TRY(mm_setup(c, &f.mm[2], p->up, p->x, NULL, &up, false));
    OB_TRY(mm_setup(c, &f.mm[3], p->down, &hg, NULL, &d, false));
    if (f.mm[1].rows_per_chunk != f.mm[2].rows_per_chunk) return OB_ERR_UNSUPPORTED; /* gate and up chunk alike */
    OB_TRY(fuse_slots(c, &f));
    ob_threadpool_run(c->pool, ffn_fn, &f);
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

/* ---- the Hadamard rotation of activations (rotated files) ---- */

typedef struct had_task {
    const ob_tensor *x;
    float *out;
    const float *signs;
} had_task;

/* Work items are (row, block) pairs, so a single decode row spreads over the threads too. */
static void hadamard_fn(const ob_task_ctx *ctx, void *arg) {
    const had_task *t = arg;
    const int64_t d = t->x->ne[0], nb = (d + OB_HADAMARD_BLOCK - 1) / OB_HADAMARD_BLOCK;
    int64_t lo, hi;
    ob_split_range(nb * t->x->ne[1], ctx->ith, ctx->nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        const int64_t r = i / nb, b = (i % nb) * OB_HADAMARD_BLOCK;
        const int64_t len = d - b < OB_HADAMARD_BLOCK ? d - b : OB_HADAMARD_BLOCK;
        float *o = t->out + r * d + b;
        memcpy(o, (const float *)ob_tensor_row(t->x, r) + b, (size_t)len * sizeof(float));
        if (len == OB_HADAMARD_BLOCK) ob_hadamard_block(o, t->signs + b);
    }
}

static int cpu_hadamard_rows(ob_backend *b, const ob_tensor *x, float *out, const float *signs) {
    if (x->type != OB_TYPE_F32) return ob_err(OB_ERR_INTERNAL, "hadamard_rows: activations must be f32");
    had_task t = {x, out, signs};
    run_op(cpu(b), hadamard_fn, &t, ob_tensor_nelements(x));
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
    ob_threadpool_free(c->pack_pool);
    ob_free_aligned(c->scratch);
    ob_free_aligned(c->act);
    ob_free(c->rope_cs);
    ob_free(c->rope_pos);
    ob_free_aligned(c->split);
    ob_free_aligned(c->fuse);
    while (c->packed) {
        cpu_packed *p = c->packed;
        c->packed = p->next;
        ob_free(p);
    }
    while (c->slabs) {
        cpu_slab *s = c->slabs;
        c->slabs = s->next;
        ob_free_aligned(s->base);
        ob_free(s);
    }
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
    .matmul_a4 = cpu_matmul_a4,
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
    .hadamard_rows = cpu_hadamard_rows,
    .layer_qkv = cpu_layer_qkv,
    .layer_ffn = cpu_layer_ffn,
};

int ob_backend_cpu_create_with(int n_threads, const ob_cpu_kernels *k, ob_backend **out) {
    *out = NULL;
    cpu_backend *c = ob_calloc(1, sizeof *c);
    if (!c) return ob_err(OB_ERR_OOM, "cpu backend");
    c->base.ops = &g_cpu_ops;
    c->k = k;
    const char *rp = getenv("OB_CPU_REPACK");
    c->repack = !(rp && strcmp(rp, "0") == 0);
    const char *pr = getenv("OB_CPU_PAIR");
    c->pairs = !(pr && strcmp(pr, "0") == 0);
    const char *fu = getenv("OB_CPU_FUSE");
    c->fuse_on = !(fu && strcmp(fu, "0") == 0);
    const char *ap = getenv("OB_CPU_ATT_PF");
    c->attn_pf = !(ap && strcmp(ap, "0") == 0);
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

int ob_backend_cpu_create(int n_threads, ob_backend **out) {
    return ob_backend_cpu_create_with(n_threads, ob_cpu_kernels_get(), out);
}
