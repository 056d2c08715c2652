/*
 * test_cpu_kernels.c - every CPU kernel of every tier this machine has,
 * against the scalar reference, on random data.
 *
 * Three levels, each with its own tolerance and its reason:
 *
 *  1. Activation quantizers and conversions (Q8 blocks, Q8_K super-blocks,
 *     BF16, F16): every tier must give the scalar reference's bytes exactly.
 *     The formats are ours (kernels.h) and defined so SIMD can match them
 *     (round to nearest even; the scale computed the same way).
 *
 *  2. Matmul kernels, native (`dot`) and packed (`pack` + `gemm`), for every
 *     weight type: against a double-precision sum of dequantized weights
 *     (the quant module's reference to_float) times the dequantized
 *     activations the kernel was given. Both sides use the same quantized
 *     numbers, so the only difference is float rounding: the kernels sum
 *     exact int32 block products and round once per block (or super-block)
 *     into float32 accumulators. Over at most n/32 = 64 such additions the
 *     relative error of an output is about 64 * 2^-24 at worst, so NMSE (sum
 *     of squared errors over sum of squared references, as ggml's
 *     test-backend-ops) < 1e-10 leaves a 100x margin on that worst case,
 *     while a wrong scale, offset or element order costs NMSE ~ 1e-2..1.
 *     Token counts 1..13 cover the kernels' 8/4/2/1 token groups.
 *
 *  3. The backend's matmul op (activation conversion, panel packing at
 *     `weight`, chunking, bias) against F32 math on the dequantized weights.
 *     Here activation quantization is part of the result, so the bound is
 *     per activation format: Q8 blocks of 32 have an rms rounding error of
 *     (amax/127)/sqrt(12), about 2.3e-5 of the signal variance for Gaussian
 *     blocks (amax ~ 2.1 sigma), Q8_K blocks of 256 about 4e-5 (amax ~ 2.8
 *     sigma); the bound 1e-3 leaves 25x for heavy tails. BF16 activations
 *     round to 2^-9 relative (~1e-6 NMSE; bound 1e-4); F32 activations only
 *     see summation order (bound 1e-9).
 *
 * Attention helpers and exp compare with the scalar loops at float
 * rounding (relative 1e-5; exp's polynomial is within 2e-7).
 */
#include "backend/backend.h"
#include "core/cpu.h"
#include "core/mem.h"
#include "core/status.h"
#include "cpu/kernels.h"
#include "quant/hadamard.h"
#include "quant/iq_quant.h"
#include "quant/quant.h"
#include "quant/quant_ref.h"
#include "test.h"

static const ob_type MM_TYPES[] = {
    OB_TYPE_F32,  OB_TYPE_F16,  OB_TYPE_BF16, OB_TYPE_Q4_0, OB_TYPE_Q4_1,   OB_TYPE_Q5_0,   OB_TYPE_Q5_1,
    OB_TYPE_Q8_0, OB_TYPE_Q2_K, OB_TYPE_Q3_K, OB_TYPE_Q4_K, OB_TYPE_Q5_K,   OB_TYPE_Q6_K,   OB_TYPE_IQ4_NL,
    OB_TYPE_IQ4_XS, OB_TYPE_TQ1_0, OB_TYPE_TQ2_0, OB_TYPE_MXFP4,
    /* the codebook types (weights from their search, iq_quant.h) */
    OB_TYPE_IQ2_XXS, OB_TYPE_IQ2_XS, OB_TYPE_IQ2_S, OB_TYPE_IQ3_XXS, OB_TYPE_IQ3_S, OB_TYPE_IQ1_S, OB_TYPE_IQ1_M,
};

static const char *tier_name(ob_cpu_tier t) { return ob_cpu_tier_name(t); }

/* Random activations with some large values, as real ones have. */
static void fill_act(float *x, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) {
        x[i] = test_rand_normal(rng);
        if (test_rand_u64(rng) % 64 == 0) x[i] *= 8.0f;
    }
}

/* Activation row -> floats (what the kernel multiplies). */
static void deq_act(ob_act_fmt f, const void *a, int64_t n, float *out) {
    switch (f) {
    case OB_ACT_F32: memcpy(out, a, (size_t)n * sizeof(float)); break;
    case OB_ACT_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = ob_bf16_to_fp32(((const uint16_t *)a)[i]);
        break;
    case OB_ACT_Q8:
    case OB_ACT_Q4X: {
        const ob_act_q8 *b = a;
        for (int64_t i = 0; i < n; i++) out[i] = b[i / 32].d * (float)b[i / 32].qs[i % 32];
        break;
    }
    case OB_ACT_Q8K: {
        const ob_act_q8K *b = a;
        for (int64_t i = 0; i < n; i++) out[i] = b[i / 256].d * (float)b[i / 256].qs[i % 256];
        break;
    }
    case OB_ACT_Q4: {
        const ob_act_q4 *b = a;
        for (int64_t i = 0; i < n; i++) {
            const int j = (int)(i % 32), nib = j < 16 ? b[i / 32].qs[j] & 15 : b[i / 32].qs[j - 16] >> 4;
            out[i] = b[i / 32].d * (float)((nib ^ 8) - 8);
        }
        break;
    }
    }
}

static void convert_act(const ob_cpu_kernels *k, ob_act_fmt f, const float *x, void *dst, int64_t n) {
    switch (f) {
    case OB_ACT_F32: memcpy(dst, x, (size_t)n * sizeof(float)); break;
    case OB_ACT_Q8: k->quant_q8(x, dst, n); break;
    case OB_ACT_Q8K: k->quant_q8K(x, dst, n); break;
    case OB_ACT_BF16: k->to_bf16(x, dst, n); break;
    case OB_ACT_Q4: k->quant_q4(x, dst, n); break;
    case OB_ACT_Q4X: k->quant_q4x(x, dst, n); break;
    }
}

static double nmse(const float *got, const double *ref, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        e += d * d;
        r += ref[i] * ref[i];
    }
    return r > 0 ? e / r : e;
}

/* ---- 1. quantizers ---- */

TEST(activation_quantizers_match_scalar) {
    const ob_cpu_kernels *ref = ob_cpu_kernels_for(OB_CPU_SCALAR);
    uint64_t rng = 1;
    const int64_t n = 1024 + 256;
    float *x = ob_malloc((size_t)n * sizeof(float));
    fill_act(x, n, &rng);
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f; /* an all-zero block */
    x[5] = 127.5f / 127.0f * 3.0f;                  /* near a rounding tie */
    size_t qb = ob_act_row_bytes(OB_ACT_Q8, n), kb = ob_act_row_bytes(OB_ACT_Q8K, n);
    void *q_ref = ob_malloc(qb), *q_got = ob_malloc(qb), *k_ref = ob_malloc(kb), *k_got = ob_malloc(kb);
    uint16_t *b_ref = ob_malloc((size_t)n * 2), *b_got = ob_malloc((size_t)n * 2);
    uint16_t *h_ref = ob_malloc((size_t)n * 2), *h_got = ob_malloc((size_t)n * 2);
    float *f_ref = ob_malloc((size_t)n * 4), *f_got = ob_malloc((size_t)n * 4);
    ref->quant_q8(x, q_ref, n);
    ref->quant_q8K(x, k_ref, n);
    ref->to_bf16(x, b_ref, n);
    ref->f32_to_f16(x, h_ref, n);
    ref->f16_to_f32(h_ref, f_ref, n);
    for (int t = OB_CPU_AVX2; t <= OB_CPU_AVX512; t++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)t);
        if (!k) continue;
        memset(q_got, 0x55, qb);
        memset(k_got, 0x55, kb);
        k->quant_q8(x, q_got, n);
        k->quant_q8K(x, k_got, n);
        k->to_bf16(x, b_got, n);
        k->f32_to_f16(x, h_got, n);
        k->f16_to_f32(h_ref, f_got, n);
        CHECK_MSG(memcmp(q_ref, q_got, qb) == 0, "%s: q8 blocks differ", tier_name((ob_cpu_tier)t));
        CHECK_MSG(memcmp(k_ref, k_got, kb) == 0, "%s: q8K blocks differ", tier_name((ob_cpu_tier)t));
        CHECK_MSG(memcmp(b_ref, b_got, (size_t)n * 2) == 0, "%s: bf16 differs", tier_name((ob_cpu_tier)t));
        CHECK_MSG(memcmp(h_ref, h_got, (size_t)n * 2) == 0, "%s: f16 differs", tier_name((ob_cpu_tier)t));
        CHECK_MSG(memcmp(f_ref, f_got, (size_t)n * 4) == 0, "%s: f16->f32 differs", tier_name((ob_cpu_tier)t));
    }
    /* the scalar quantizers themselves: codes within 0.5 step, sums right */
    const ob_act_q8 *qa = q_ref;
    for (int64_t b = 0; b < n / 32; b++) {
        int s = 0;
        for (int i = 0; i < 32; i++) {
            s += qa[b].qs[i];
            CHECK(fabsf(qa[b].d * qa[b].qs[i] - x[32 * b + i]) <= 0.5f * qa[b].d * 1.0001f + 1e-30f);
        }
        CHECK_EQ_INT(s, qa[b].s);
    }
    const ob_act_q8K *ka = k_ref;
    for (int64_t b = 0; b < n / 256; b++)
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += ka[b].qs[16 * g + i];
            CHECK_EQ_INT(s, ka[b].bsums[g]);
            if (g % 2) CHECK_EQ_INT(ka[b].bsum32[g / 2], ka[b].bsums[g - 1] + ka[b].bsums[g]);
        }
    ob_free(x), ob_free(q_ref), ob_free(q_got), ob_free(k_ref), ob_free(k_got);
    ob_free(b_ref), ob_free(b_got), ob_free(h_ref), ob_free(h_got), ob_free(f_ref), ob_free(f_got);
}

/* ---- 2. matmul kernels ---- */

typedef struct mm_case {
    ob_type type;
    int64_t n, rows;
    float *wf;      /* [rows][n] original floats */
    void *wq;       /* [rows] quantized rows */
    float *wd;      /* [rows][n] dequantized */
    size_t row_bytes;
} mm_case;

static int mm_case_init(mm_case *c, ob_type type, int64_t n, int64_t rows, uint64_t *rng) {
    const ob_type_traits *tr = ob_type_get((int)type);
    c->type = type, c->n = n, c->rows = rows;
    c->row_bytes = ob_row_size(type, n);
    c->wf = ob_malloc((size_t)(rows * n) * sizeof(float));
    c->wd = ob_malloc((size_t)(rows * n) * sizeof(float));
    c->wq = ob_malloc(c->row_bytes * (size_t)rows);
    if (!c->wf || !c->wd || !c->wq) return -1;
    for (int64_t i = 0; i < rows * n; i++) c->wf[i] = 0.05f * test_rand_normal(rng);
    for (int64_t r = 0; r < rows; r++) {
        if (tr->from_float_ref) tr->from_float_ref(c->wf + r * n, (char *)c->wq + (size_t)r * c->row_bytes, n);
        else if (!ob_quantize_row_iq(type, c->wf + r * n, (char *)c->wq + (size_t)r * c->row_bytes, n, NULL))
            return -1;
        tr->to_float((char *)c->wq + (size_t)r * c->row_bytes, c->wd + r * n, n);
    }
    return 0;
}

static void mm_case_free(mm_case *c) {
    ob_free(c->wf), ob_free(c->wd), ob_free(c->wq);
}

/* ref[t][r] = sum_k wd[r][k] * a[t][k] in double */
static void mm_ref(const mm_case *c, const float *a, int nt, double *ref) {
    for (int t = 0; t < nt; t++)
        for (int64_t r = 0; r < c->rows; r++) {
            double s = 0;
            for (int64_t k = 0; k < c->n; k++) s += (double)c->wd[r * c->n + k] * a[(int64_t)t * c->n + k];
            ref[(int64_t)t * c->rows + r] = s;
        }
}

static void check_kernels_for_type(ob_type type, int64_t n) {
    const int64_t rows = 32, max_nt = 13;
    uint64_t rng = 1000 + (uint64_t)type * 7 + (uint64_t)n;
    mm_case c;
    if (mm_case_init(&c, type, n, rows, &rng) < 0) {
        CHECK_MSG(0, "out of memory");
        mm_case_free(&c);
        return;
    }
    float *x = ob_malloc((size_t)(max_nt * n) * sizeof(float));
    float *xd = ob_malloc((size_t)(max_nt * n) * sizeof(float));
    double *ref = ob_malloc((size_t)(max_nt * rows) * sizeof(double));
    float *out = ob_malloc((size_t)(max_nt * rows) * sizeof(float));
    fill_act(x, max_nt * n, &rng);
    static const int nts[] = {1, 2, 3, 5, 8, 13};
    for (int ti = OB_CPU_SCALAR; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        if (!k) continue;
        const ob_mm_kernels *mk = &k->mm[type];
        for (int variant = 0; variant < 2; variant++) {
            const bool packed = variant == 1;
            if (packed ? !mk->gemm : !mk->dot) {
                CHECK_MSG(packed, "%s %s: no dot kernel", tier_name((ob_cpu_tier)ti), ob_type_name(type));
                continue;
            }
            ob_act_fmt fmt = packed ? mk->packed_act : mk->act;
            size_t as = ob_act_row_bytes(fmt, n);
            char *act = ob_malloc(as * (size_t)max_nt);
            for (int t = 0; t < max_nt; t++) {
                convert_act(k, fmt, x + t * n, act + (size_t)t * as, n);
                deq_act(fmt, act + (size_t)t * as, n, xd + t * n);
            }
            void *panels = NULL;
            size_t pstride = 0;
            if (packed) {
                pstride = (mk->panel_bytes(n) + 63) & ~(size_t)63;
                panels = ob_malloc_aligned(pstride * (size_t)(rows / OB_PANEL), 64);
                memset(panels, 0, pstride * (size_t)(rows / OB_PANEL));
                for (int64_t p = 0; p < rows / OB_PANEL; p++)
                    mk->pack((char *)c.wq + (size_t)(p * OB_PANEL) * c.row_bytes, c.row_bytes, n,
                             (char *)panels + (size_t)p * pstride);
            }
            for (size_t ni = 0; ni < sizeof nts / sizeof nts[0]; ni++) {
                const int nt = nts[ni];
                mm_ref(&c, xd, nt, ref);
                for (int i = 0; i < nt * rows; i++) out[i] = NAN;
                for (int t0 = 0; t0 < nt; t0 += OB_MM_MAX_NT) {
                    int m = nt - t0 < OB_MM_MAX_NT ? nt - t0 : OB_MM_MAX_NT;
                    if (packed)
                        for (int64_t p = 0; p < rows / OB_PANEL; p++)
                            mk->gemm(n, (char *)panels + (size_t)p * pstride, act + (size_t)t0 * as, as, m,
                                     out + t0 * rows + p * OB_PANEL, (size_t)rows);
                    else
                        for (int64_t r = 0; r < rows; r++)
                            mk->dot(n, (char *)c.wq + (size_t)r * c.row_bytes, act + (size_t)t0 * as, as, m,
                                    out + t0 * rows + r, (size_t)rows);
                }
                double e = nmse(out, ref, nt * rows);
                CHECK_MSG(e < 1e-10, "%s %s %s n=%lld nt=%d: NMSE %.3g", tier_name((ob_cpu_tier)ti),
                          packed ? "packed" : "dot", ob_type_name(type), (long long)n, nt, e);
            }
            ob_free(act);
            ob_free_aligned(panels);
        }
    }
    ob_free(x), ob_free(xd), ob_free(ref), ob_free(out);
    mm_case_free(&c);
}

TEST(matmul_kernels_against_reference) {
    for (size_t i = 0; i < sizeof MM_TYPES / sizeof MM_TYPES[0]; i++) {
        ob_type t = MM_TYPES[i];
        int64_t bs = ob_type_get((int)t)->block_size;
        if (bs == 1) {
            check_kernels_for_type(t, 200); /* tails of every vector width */
            check_kernels_for_type(t, 1024);
        } else if (bs == 32) {
            check_kernels_for_type(t, 96);
            check_kernels_for_type(t, 2048);
        } else {
            check_kernels_for_type(t, 256);
            check_kernels_for_type(t, 1536);
        }
    }
}

/* ---- the prefill kernels beside gemm (AMX tiles, two-panel pairs) ----
 *
 * A case for a kernel that must give the same tier's `gemm` bits: `rows` of random weights of
 * one type packed into panels, up to max_nt activation rows converted to the packed format
 * (and dequantized back for the float64 reference), and room for the kernel's outputs (got)
 * and gemm's, 8 tokens at a time (want). */
typedef struct packed_case {
    mm_case c;
    const ob_mm_kernels *mk;
    int64_t n, rows;
    float *x, *xd, *got, *want;
    double *ref;
    char *act;
    size_t as, pstride;
    void *panels;
} packed_case;

static bool packed_case_init(packed_case *pc, const ob_cpu_kernels *k, ob_type type, int64_t n, int64_t rows,
                             int max_nt, uint64_t seed) {
    memset(pc, 0, sizeof *pc);
    const ob_mm_kernels *mk = pc->mk = &k->mm[type];
    pc->n = n, pc->rows = rows;
    pc->x = ob_malloc((size_t)(max_nt * n) * sizeof(float));
    pc->xd = ob_malloc((size_t)(max_nt * n) * sizeof(float));
    pc->ref = ob_malloc((size_t)(max_nt * rows) * sizeof(double));
    pc->got = ob_malloc((size_t)(max_nt * rows) * sizeof(float));
    pc->want = ob_malloc((size_t)(max_nt * rows) * sizeof(float));
    pc->as = ob_act_row_bytes(mk->packed_act, n);
    pc->act = ob_malloc(pc->as * (size_t)max_nt);
    pc->pstride = (mk->panel_bytes(n) + 63) & ~(size_t)63;
    pc->panels = ob_malloc_aligned(pc->pstride * (size_t)(rows / OB_PANEL), 64);
    uint64_t rng = seed;
    if (mm_case_init(&pc->c, type, n, rows, &rng) < 0 || !pc->x || !pc->xd || !pc->ref || !pc->got || !pc->want ||
        !pc->act || !pc->panels) {
        CHECK_MSG(0, "out of memory");
        return false;
    }
    fill_act(pc->x, max_nt * n, &rng);
    for (int t = 0; t < max_nt; t++) {
        convert_act(k, mk->packed_act, pc->x + t * n, pc->act + (size_t)t * pc->as, n);
        deq_act(mk->packed_act, pc->act + (size_t)t * pc->as, n, pc->xd + t * n);
    }
    memset(pc->panels, 0, pc->pstride * (size_t)(rows / OB_PANEL));
    for (int64_t p = 0; p < rows / OB_PANEL; p++)
        mk->pack((char *)pc->c.wq + (size_t)(p * OB_PANEL) * pc->c.row_bytes, pc->c.row_bytes, n,
                 (char *)pc->panels + (size_t)p * pc->pstride);
    return true;
}

static const char *packed_panel(const packed_case *pc, int64_t p) {
    return (const char *)pc->panels + (size_t)p * pc->pstride;
}

/* Before a kernel writes got for nt tokens: the reference, and gemm's outputs in want. */
static void packed_case_start(packed_case *pc, int nt) {
    mm_ref(&pc->c, pc->xd, nt, pc->ref);
    for (int64_t i = 0; i < nt * pc->rows; i++) pc->got[i] = pc->want[i] = NAN;
    for (int64_t p = 0; p < pc->rows / OB_PANEL; p++)
        for (int t0 = 0; t0 < nt; t0 += OB_MM_MAX_NT)
            pc->mk->gemm(pc->n, packed_panel(pc, p), pc->act + (size_t)t0 * pc->as, pc->as,
                         nt - t0 < OB_MM_MAX_NT ? nt - t0 : OB_MM_MAX_NT, pc->want + t0 * pc->rows + p * OB_PANEL,
                         (size_t)pc->rows);
}

/* After it: got against the reference, and bit for bit against gemm's. */
static void packed_case_check(const packed_case *pc, const char *tier, const char *kernel, ob_type type, int nt) {
    const double e = nmse(pc->got, pc->ref, nt * pc->rows);
    CHECK_MSG(e < 1e-10, "%s %s %s n=%lld nt=%d: NMSE %.3g", tier, kernel, ob_type_name(type), (long long)pc->n, nt, e);
    int nd = 0;
    for (int64_t i = 0; i < nt * pc->rows; i++) nd += memcmp(&pc->got[i], &pc->want[i], sizeof(float)) != 0;
    CHECK_MSG(nd == 0, "%s %s %s n=%lld nt=%d: %d of %lld outputs differ from gemm's", tier, kernel, ob_type_name(type),
              (long long)pc->n, nt, nd, (long long)(nt * pc->rows));
}

static void packed_case_free(packed_case *pc) {
    ob_free(pc->x), ob_free(pc->xd), ob_free(pc->ref), ob_free(pc->got), ob_free(pc->want), ob_free(pc->act);
    ob_free_aligned(pc->panels);
    mm_case_free(&pc->c);
}

/* ---- AMX tiles (x86/amx.c) ----
 *
 * gemm_tiles, where the CPU has AMX-INT8, against the float64 reference and,
 * bit for bit, against the same tier's VNNI gemm run 8 tokens at a time:
 * token counts 1 (all left to VNNI), 16, 17, 45 (two tiles of 16 or a pair of
 * 32 and the remainder), rows of 3 panels, K lengths that end the unpacked
 * slabs part-way (legacy: 32 blocks a slab; K types: 4 super-blocks). Skipped
 * (never passed) on a CPU without the tiles. */
static void check_tiles_for_type(const ob_cpu_kernels *k, ob_type type, int64_t n, int *n_checked) {
    if (!k->mm[type].gemm_tiles) return;
    packed_case pc;
    if (packed_case_init(&pc, k, type, n, 48, 45, 5000 + (uint64_t)type * 13 + (uint64_t)n)) {
        static const int nts[] = {1, 16, 17, 45};
        for (size_t ni = 0; ni < sizeof nts / sizeof nts[0]; ni++) {
            packed_case_start(&pc, nts[ni]);
            for (int64_t p = 0; p < pc.rows / OB_PANEL; p++)
                pc.mk->gemm_tiles(n, packed_panel(&pc, p), pc.act, pc.as, nts[ni], pc.got + p * OB_PANEL, (size_t)pc.rows);
            packed_case_check(&pc, k->name, "tiles", type, nts[ni]);
        }
        (*n_checked)++;
    }
    packed_case_free(&pc);
}

TEST(matmul_tiles_match_vnni_bit_for_bit) {
    const ob_cpu_kernels *k = ob_cpu_kernels_for(OB_CPU_AVX512);
    int n_checked = 0;
    for (size_t i = 0; k && i < sizeof MM_TYPES / sizeof MM_TYPES[0]; i++) {
        const ob_type t = MM_TYPES[i];
        const bool k_type = ob_type_get((int)t)->block_size == 256;
        check_tiles_for_type(k, t, k_type ? 256 : 96, &n_checked);
        check_tiles_for_type(k, t, k_type ? 1280 : 1056, &n_checked); /* 5 super-blocks; 33 blocks */
    }
    if (n_checked == 0) {
        test_skip("no AMX-INT8 tiles on this CPU (or OB_CPU_AMX=0)");
        return;
    }
    CHECK(n_checked >= 2 * 15); /* the fifteen tiled integer types (and BF16 with AMX-BF16), two lengths each */
}

/* ---- two-panel kernels (gemm_pair) ----
 *
 * gemm_pair, where the tier has one (AVX-512: F32, F16, and BF16 where vdpbf16ps is the gemm), bit for bit against the same tier's gemm run
 * panel by panel, 8 tokens at a time: token counts around its groups of 6 (1, 5, 6, 7, 13, 45),
 * 4 panels (two pairs), an odd K (F32/F16's one-k tail), an odd number of pairs of K (BF16's one-pair
 * tail) and a long K. Skipped
 * (never passed) on a CPU without such a kernel. */
static void check_pairs_for_type(const ob_cpu_kernels *k, ob_type type, int64_t n, int *n_checked) {
    if (!k->mm[type].gemm_pair || k->mm[type].panel_bytes(n) == 0) return; /* BF16 panels need an even K */
    packed_case pc;
    if (packed_case_init(&pc, k, type, n, 64, 45, 7000 + (uint64_t)type * 11 + (uint64_t)n)) {
        static const int nts[] = {1, 5, 6, 7, 13, 45};
        for (size_t ni = 0; ni < sizeof nts / sizeof nts[0]; ni++) {
            packed_case_start(&pc, nts[ni]);
            for (int64_t p = 0; p < pc.rows / OB_PANEL; p += 2)
                pc.mk->gemm_pair(n, packed_panel(&pc, p), pc.pstride, pc.act, pc.as, nts[ni], pc.got + p * OB_PANEL,
                                 (size_t)pc.rows);
            packed_case_check(&pc, k->name, "pair", type, nts[ni]);
        }
        (*n_checked)++;
    }
    packed_case_free(&pc);
}

TEST(matmul_pairs_match_gemm_bit_for_bit) {
    int n_checked = 0;
    for (int ti = OB_CPU_SCALAR; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        for (size_t i = 0; k && i < sizeof MM_TYPES / sizeof MM_TYPES[0]; i++) {
            check_pairs_for_type(k, MM_TYPES[i], 6, &n_checked);    /* BF16: 3 pairs of K, the one-pair tail */
            check_pairs_for_type(k, MM_TYPES[i], 7, &n_checked);    /* F32/F16: an odd K, the one-k tail */
            check_pairs_for_type(k, MM_TYPES[i], 2050, &n_checked); /* 1025 pairs */
        }
    }
    if (n_checked == 0) {
        test_skip("no two-panel kernel on this CPU (no AVX-512)");
        return;
    }
    CHECK(n_checked >= 6); /* F32 and F16 (and BF16 with AVX-512 BF16 but no AMX), three lengths each (BF16: two) */
    fprintf(stderr, "  %d (type, length) cases of gemm_pair checked against gemm\n", n_checked);
}

/* ---- the codebook (IQ) kernels on arbitrary blocks ----
 *
 * The quantizer's output (above) reaches only the grid entries, signs and
 * scales its search picks. Any bit pattern is a valid IQ block, so here the
 * blocks are random bytes (every grid index, sign pattern, scale and IQ1
 * delta occurs) with only the half scale d set to a sane value, on an odd
 * row count, 9 super-blocks, and batches of 1..17 tokens (the kernels'
 * 8/4/2/1 token groups and their tails), one token at full scale (every
 * code +-127, the largest int16 pair sums). Every tier's dot against the
 * float64 sum of the dequantized weights times the dequantized activations,
 * with level 2's bound and reason, and each token's result bit for bit the
 * one it gets alone (batch invariance). On a CPU with AVX512_VNNI the AVX-512
 * tier must have its own kernels for these types (x86/iq_avx512.c), so
 * this test cannot pass on the inherited AVX2 ones by accident. */

static const ob_type IQ_TYPES[] = {OB_TYPE_IQ2_XXS, OB_TYPE_IQ2_XS, OB_TYPE_IQ2_S, OB_TYPE_IQ3_XXS,
                                   OB_TYPE_IQ3_S,   OB_TYPE_IQ1_S,  OB_TYPE_IQ1_M};

/* Random bytes with a finite, positive half d (IQ1_M: spread over the top
 * nibbles of its four scale words). */
static void iq_random_row(ob_type type, void *row, int64_t n, uint64_t *rng) {
    const size_t bb = ob_type_get((int)type)->type_size;
    uint8_t *p = row;
    for (int64_t b = 0; b < n / 256; b++, p += bb) {
        for (size_t j = 0; j < bb; j++) p[j] = (uint8_t)test_rand_u64(rng);
        const uint16_t d = (uint16_t)(0x1c00 | (test_rand_u64(rng) & 0x3ff)); /* 2^-8 .. 2^-7 */
        if (type == OB_TYPE_IQ1_M) {
            uint8_t *sc = p + offsetof(ob_block_iq1_m, scales);
            for (int k = 0; k < 4; k++) sc[2 * k + 1] = (uint8_t)((sc[2 * k + 1] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
        } else {
            memcpy(p, &d, 2);
        }
    }
}

TEST(iq_kernels_on_random_blocks) {
    const int64_t n = 9 * 256, rows = 37;
    enum { MAX_NT = 17 };
    const ob_cpu_features *f = ob_cpu_get_features();
    const ob_cpu_kernels *k2 = ob_cpu_kernels_for(OB_CPU_AVX2), *k5 = ob_cpu_kernels_for(OB_CPU_AVX512);
    float *x = ob_malloc((size_t)(MAX_NT * n) * sizeof(float)), *xd = ob_malloc((size_t)(MAX_NT * n) * sizeof(float));
    float *wd = ob_malloc((size_t)(rows * n) * sizeof(float)), *out = ob_malloc((size_t)(MAX_NT * rows) * sizeof(float));
    double *ref = ob_malloc((size_t)(MAX_NT * rows) * sizeof(double));
    const size_t as = ob_act_row_bytes(OB_ACT_Q8K, n);
    char *act = ob_malloc(as * MAX_NT);
    uint64_t rng = 2024;
    fill_act(x, MAX_NT * n, &rng);
    for (int64_t i = 0; i < n; i++) x[3 * n + i] = (i * 7919) % 3 ? 1.5f : -1.5f; /* token 3: codes +-127 */
    for (size_t ti = 0; ti < sizeof IQ_TYPES / sizeof IQ_TYPES[0]; ti++) {
        const ob_type type = IQ_TYPES[ti];
        const size_t rb = ob_row_size(type, n);
        uint8_t *wq = ob_malloc(rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) {
            iq_random_row(type, wq + (size_t)r * rb, n, &rng);
            ob_type_get((int)type)->to_float(wq + (size_t)r * rb, wd + r * n, n);
        }
        if (f->avx512vnni && k2 && k5)
            CHECK_MSG(k5->mm[type].dot != k2->mm[type].dot, "avx512 tier runs the AVX2 %s kernel",
                      ob_type_name(type));
        for (int tier = OB_CPU_SCALAR; tier <= OB_CPU_AVX512; tier++) {
            const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)tier);
            if (!k) continue;
            const ob_mm_kernels *mk = &k->mm[type];
            CHECK_MSG(mk->dot && mk->act == OB_ACT_Q8K, "%s %s: no Q8_K dot", tier_name((ob_cpu_tier)tier),
                      ob_type_name(type));
            if (!mk->dot || mk->act != OB_ACT_Q8K) continue;
            for (int t = 0; t < MAX_NT; t++) {
                k->quant_q8K(x + t * n, (ob_act_q8K *)(void *)(act + (size_t)t * as), n);
                deq_act(OB_ACT_Q8K, act + (size_t)t * as, n, xd + t * n);
            }
            for (int nt = 1; nt <= MAX_NT; nt++) {
                for (int t = 0; t < nt; t++)
                    for (int64_t r = 0; r < rows; r++) {
                        double sum = 0;
                        for (int64_t j = 0; j < n; j++) sum += (double)wd[r * n + j] * xd[(int64_t)t * n + j];
                        ref[(int64_t)t * rows + r] = sum;
                    }
                for (int i = 0; i < nt * rows; i++) out[i] = NAN;
                for (int t0 = 0; t0 < nt; t0 += OB_MM_MAX_NT) {
                    const int m = nt - t0 < OB_MM_MAX_NT ? nt - t0 : OB_MM_MAX_NT;
                    for (int64_t r = 0; r < rows; r++)
                        mk->dot(n, wq + (size_t)r * rb, act + (size_t)t0 * as, as, m, out + t0 * rows + r,
                                (size_t)rows);
                }
                const double e = nmse(out, ref, nt * rows);
                CHECK_MSG(e < 1e-10, "%s %s random blocks nt=%d: NMSE %.3g", tier_name((ob_cpu_tier)tier),
                          ob_type_name(type), nt, e);
                /* batch invariance (kernels.h): each token as it came out alone */
                if (nt == 1) continue;
                int same = 1;
                for (int t = 0; t < nt; t++)
                    for (int64_t r = 0; r < rows; r++) {
                        float one;
                        mk->dot(n, wq + (size_t)r * rb, act + (size_t)t * as, as, 1, &one, 1);
                        same &= memcmp(&one, &out[t * rows + r], sizeof one) == 0;
                    }
                CHECK_MSG(same, "%s %s random blocks nt=%d: a token's result depends on its batch",
                          tier_name((ob_cpu_tier)tier), ob_type_name(type), nt);
            }
        }
        ob_free(wq);
    }
    ob_free(x), ob_free(xd), ob_free(wd), ob_free(out), ob_free(ref), ob_free(act);
}

/* ---- W4A4: 4-bit activations x Q4_0 weights ----
 *
 * The quantizers (packed nibbles, and the same codes widened to bytes for
 * the VNNI panels): every tier gives the scalar bytes, and the values
 * d * q are exactly the Q4_0 reference's round trip (dequantize(quantize
 * _row_q4_0_ref(x))), the numbers OB_ACT_SIM=q4_0 simulates. The kernels
 * (dot_a4 on native rows, gemm_a4 on packed panels) against the float64
 * sum of the dequantized weights times those values: exact int32 block
 * sums, one float rounding per block, so the 1e-10 NMSE bound of level 2
 * holds for the same reason; and against the scalar tier's dot_a4 (the
 * reference kernel) with the same bound. */

TEST(w4a4_quantizer_and_kernels) {
    const ob_cpu_kernels *ref = ob_cpu_kernels_for(OB_CPU_SCALAR);
    uint64_t rng = 44;
    const int64_t n = 2048, rows = 32;
    enum { MAX_NT = 13 };
    float *x = ob_malloc((size_t)(MAX_NT * n) * sizeof(float)), *xd = ob_malloc((size_t)(MAX_NT * n) * sizeof(float));
    float *rt = ob_malloc((size_t)n * sizeof(float));
    fill_act(x, MAX_NT * n, &rng);
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f;   /* an all-zero block */
    for (int i = 0; i < 32; i++) x[128 + i] = -1.0f; /* ties: the first of equal magnitudes sets the sign */
    x[140] = 1.0f;
    const size_t as = ob_act_row_bytes(OB_ACT_Q4, n);
    CHECK_EQ_INT((long long)as, (long long)(n / 32 * 24));
    const size_t asx = ob_act_row_bytes(OB_ACT_Q4X, n);
    char *a_ref = ob_malloc(as * MAX_NT), *a_got = ob_malloc(asx * MAX_NT), *x_ref = ob_malloc(asx * MAX_NT);
    float *xw = ob_malloc((size_t)n * sizeof(float));
    void *q4 = ob_malloc(ob_row_size(OB_TYPE_Q4_0, n));
    for (int t = 0; t < MAX_NT; t++) {
        ref->quant_q4(x + t * n, (ob_act_q4 *)(void *)(a_ref + (size_t)t * as), n);
        ref->quant_q4x(x + t * n, (ob_act_q8 *)(void *)(x_ref + (size_t)t * asx), n);
    }
    for (int t = 0; t < MAX_NT; t++) {
        deq_act(OB_ACT_Q4, a_ref + (size_t)t * as, n, xd + t * n);
        deq_act(OB_ACT_Q4X, x_ref + (size_t)t * asx, n, xw);
        CHECK_MSG(memcmp(xw, xd + t * n, (size_t)n * sizeof(float)) == 0, "row %d: widened codes differ", t);
        ob_quantize_row_q4_0_ref(x + t * n, q4, n);
        ob_dequantize_row_q4_0(q4, rt, n);
        CHECK_MSG(memcmp(rt, xd + t * n, (size_t)n * sizeof(float)) == 0, "row %d: not Q4_0's round trip", t);
        const ob_act_q4 *b = (const ob_act_q4 *)(const void *)(a_ref + (size_t)t * as);
        for (int64_t k = 0; k < n / 32; k++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += ((b[k].qs[i] & 15) ^ 8) - 8 + ((b[k].qs[i] >> 4) ^ 8) - 8;
            CHECK_EQ_INT(s, b[k].s);
        }
    }
    mm_case c;
    CHECK(mm_case_init(&c, OB_TYPE_Q4_0, n, rows, &rng) == 0);
    double *r64 = ob_malloc((size_t)(MAX_NT * rows) * sizeof(double));
    float *out = ob_malloc((size_t)(MAX_NT * rows) * sizeof(float)), *o_ref = ob_malloc((size_t)(MAX_NT * rows) * sizeof(float));
    static const int nts[] = {1, 2, 3, 5, 8, 13};
    int n_packed = 0;
    for (int ti = OB_CPU_SCALAR; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        if (!k) continue;
        memset(a_got, 0x55, asx * MAX_NT);
        for (int t = 0; t < MAX_NT; t++) k->quant_q4(x + t * n, (ob_act_q4 *)(void *)(a_got + (size_t)t * as), n);
        CHECK_MSG(memcmp(a_ref, a_got, as * MAX_NT) == 0, "%s: q4 activation blocks differ", tier_name((ob_cpu_tier)ti));
        memset(a_got, 0x55, asx * MAX_NT);
        for (int t = 0; t < MAX_NT; t++) k->quant_q4x(x + t * n, (ob_act_q8 *)(void *)(a_got + (size_t)t * asx), n);
        CHECK_MSG(memcmp(x_ref, a_got, asx * MAX_NT) == 0, "%s: widened q4 blocks differ", tier_name((ob_cpu_tier)ti));
        const ob_mm_kernels *mk = &k->mm[OB_TYPE_Q4_0];
        CHECK_MSG(mk->dot_a4 != NULL, "%s: no dot_a4", tier_name((ob_cpu_tier)ti));
        for (int variant = 0; variant < 2; variant++) {
            const bool packed = variant == 1;
            if (packed ? !mk->gemm_a4 : !mk->dot_a4) continue;
            n_packed += packed;
            const ob_act_fmt fmt = packed ? mk->packed_a4_act : mk->a4_act;
            CHECK(fmt == OB_ACT_Q4 || fmt == OB_ACT_Q4X);
            const size_t gs = ob_act_row_bytes(fmt, n);
            for (int t = 0; t < MAX_NT; t++) convert_act(k, fmt, x + t * n, a_got + (size_t)t * gs, n);
            void *panels = NULL;
            size_t pstride = 0;
            if (packed) {
                pstride = (mk->panel_bytes(n) + 63) & ~(size_t)63;
                panels = ob_malloc_aligned(pstride * (size_t)(rows / OB_PANEL), 64);
                memset(panels, 0, pstride * (size_t)(rows / OB_PANEL));
                for (int64_t p = 0; p < rows / OB_PANEL; p++)
                    mk->pack((char *)c.wq + (size_t)(p * OB_PANEL) * c.row_bytes, c.row_bytes, n,
                             (char *)panels + (size_t)p * pstride);
            }
            for (size_t ni = 0; ni < sizeof nts / sizeof nts[0]; ni++) {
                const int nt = nts[ni];
                mm_ref(&c, xd, nt, r64);
                for (int i = 0; i < nt * rows; i++) out[i] = NAN;
                for (int t0 = 0; t0 < nt; t0 += OB_MM_MAX_NT) {
                    int m = nt - t0 < OB_MM_MAX_NT ? nt - t0 : OB_MM_MAX_NT;
                    for (int64_t r = 0; r < rows; r++)
                        ref->mm[OB_TYPE_Q4_0].dot_a4(n, (char *)c.wq + (size_t)r * c.row_bytes, a_ref + (size_t)t0 * as,
                                                     as, m, o_ref + t0 * rows + r, (size_t)rows);
                    if (packed)
                        for (int64_t p = 0; p < rows / OB_PANEL; p++)
                            mk->gemm_a4(n, (char *)panels + (size_t)p * pstride, a_got + (size_t)t0 * gs, gs, m,
                                        out + t0 * rows + p * OB_PANEL, (size_t)rows);
                    else
                        for (int64_t r = 0; r < rows; r++)
                            mk->dot_a4(n, (char *)c.wq + (size_t)r * c.row_bytes, a_got + (size_t)t0 * gs, gs, m,
                                       out + t0 * rows + r, (size_t)rows);
                }
                double e = nmse(out, r64, nt * rows), e_ref = nmse(o_ref, r64, nt * rows);
                double *o64 = ob_malloc((size_t)(nt * rows) * sizeof(double));
                for (int i = 0; i < nt * rows; i++) o64[i] = o_ref[i];
                double e_vs_scalar = nmse(out, o64, nt * rows);
                ob_free(o64);
                CHECK_MSG(e < 1e-10 && e_ref < 1e-10 && e_vs_scalar < 1e-10,
                          "%s %s q4_0 x a4 nt=%d: NMSE %.3g vs float64, %.3g vs the scalar kernel",
                          tier_name((ob_cpu_tier)ti), packed ? "packed" : "dot", nt, e, e_vs_scalar);
            }
            ob_free_aligned(panels);
        }
    }
    fprintf(stderr, "  w4a4: %d packed kernel(s) checked\n", n_packed);
    ob_free(x), ob_free(xd), ob_free(rt), ob_free(a_ref), ob_free(a_got), ob_free(x_ref), ob_free(xw), ob_free(q4);
    ob_free(r64), ob_free(out), ob_free(o_ref);
    mm_case_free(&c);
}

/* The backend's matmul_a4 (activation conversion, packing, chunks, bias)
 * against float64 on the dequantized weights times the Q4_0 round trip of
 * the activations: the same numbers the kernels multiply, so the 1e-10
 * bound of the kernels applies; a weight other than Q4_0 is refused. */
/* The backend's parallel Hadamard rotation (hadamard_rows: copy + rotate, work split over
 * (row, block) pairs) gives the serial function's bits: rows with a partial last block, a
 * strided input, one row and many (past the size that wakes the second thread). */
TEST(backend_hadamard_rows) {
    uint64_t rng = 33;
    ob_backend *b = NULL;
    CHECK(ob_backend_cpu_create(2, &b) == 0);
    if (!b) return;
    CHECK(b->ops->hadamard_rows != NULL);
    static const int64_t shapes[][2] = {{4096, 1}, {4096, 40}, {100, 3}, {1000, 70}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t d = shapes[k][0], n = shapes[k][1], ld = d + 5; /* strided rows */
        float *x = ob_malloc((size_t)(ld * n) * sizeof(float)), *sg = ob_malloc((size_t)d * sizeof(float));
        float *got = ob_malloc((size_t)(d * n) * sizeof(float)), *want = ob_malloc((size_t)(d * n) * sizeof(float));
        for (int64_t i = 0; i < ld * n; i++) x[i] = test_rand_normal(&rng);
        ob_hadamard_signs(sg, d, 9);
        for (int64_t r = 0; r < n; r++) memcpy(want + r * d, x + r * ld, (size_t)d * sizeof(float));
        ob_hadamard_rotate_rows_with(want, d, n, sg);
        ob_tensor t;
        memset(&t, 0, sizeof t);
        t.type = OB_TYPE_F32;
        t.ne[0] = d, t.ne[1] = n, t.ne[2] = t.ne[3] = 1;
        t.nb[0] = sizeof(float), t.nb[1] = (size_t)ld * sizeof(float);
        t.nb[2] = t.nb[3] = t.nb[1] * (size_t)n;
        t.data = x;
        CHECK(b->ops->hadamard_rows(b, &t, got, sg) == 0);
        CHECK_MSG(memcmp(got, want, (size_t)(d * n) * sizeof(float)) == 0, "hadamard_rows %lld x %lld differs",
                  (long long)d, (long long)n);
        ob_free(x), ob_free(sg), ob_free(got), ob_free(want);
    }
    ob_backend_free(b);
}

TEST(backend_matmul_a4_every_tier) {
    uint64_t rng = 91;
    static const int ns[] = {1, 7, 70};
    for (int ti = OB_CPU_SCALAR; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        if (!k) continue;
        ob_backend *b = NULL;
        CHECK(ob_backend_cpu_create_with(2, k, &b) == 0);
        if (!b) continue;
        CHECK(b->ops->matmul_a4 != NULL);
        for (int pk = 0; pk < 2; pk++) {
            const int64_t nin = 320, nout = pk ? 48 : 40; /* 40: not a multiple of 16, native rows */
            mm_case c;
            if (mm_case_init(&c, OB_TYPE_Q4_0, nin, nout, &rng) < 0) {
                mm_case_free(&c);
                continue;
            }
            ob_tensor w, x, bias, out;
            int64_t ne[2] = {nin, nout};
            ob_tensor_init(&w, OB_TYPE_Q4_0, 2, ne, NULL);
            CHECK(b->ops->weight(b, &w, c.wq) == 0);
            float *bv = ob_malloc((size_t)nout * sizeof(float));
            for (int64_t r = 0; r < nout; r++) bv[r] = test_rand_f32(&rng);
            int64_t bne = nout;
            ob_tensor_init(&bias, OB_TYPE_F32, 1, &bne, bv);
            void *q4 = ob_malloc(ob_row_size(OB_TYPE_Q4_0, nin));
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                int n = ns[j];
                float *xv = ob_malloc((size_t)(n * nin) * sizeof(float)), *xr = ob_malloc((size_t)(n * nin) * sizeof(float));
                float *ov = ob_malloc((size_t)(n * nout) * sizeof(float));
                double *ref = ob_malloc((size_t)(n * nout) * sizeof(double));
                fill_act(xv, n * nin, &rng);
                for (int t = 0; t < n; t++) {
                    ob_quantize_row_q4_0_ref(xv + t * nin, q4, nin);
                    ob_dequantize_row_q4_0(q4, xr + t * nin, nin);
                }
                ob_tensor_f32_2d(&x, nin, n, xv);
                ob_tensor_f32_2d(&out, nout, n, ov);
                CHECK(b->ops->matmul_a4(b, &w, &x, &bias, &out) == 0);
                mm_ref(&c, xr, n, ref);
                for (int t = 0; t < n; t++)
                    for (int64_t r = 0; r < nout; r++) ref[t * nout + r] += bv[r];
                double e = nmse(ov, ref, n * nout);
                CHECK_MSG(e < 1e-10, "%s q4_0 a4%s n=%d: NMSE %.3g", tier_name((ob_cpu_tier)ti),
                          w.extra ? " packed" : "", n, e);
                ob_free(xv), ob_free(xr), ob_free(ov), ob_free(ref);
            }
            ob_free(q4);
            ob_free(bv);
            mm_case_free(&c);
        }
        /* other weight types have no 4-bit path */
        mm_case c;
        if (mm_case_init(&c, OB_TYPE_Q8_0, 64, 16, &rng) == 0) {
            ob_tensor w, x, out;
            int64_t ne[2] = {64, 16};
            float xv[64] = {0}, ov[16];
            ob_tensor_init(&w, OB_TYPE_Q8_0, 2, ne, NULL);
            CHECK(b->ops->weight(b, &w, c.wq) == 0);
            ob_tensor_f32_2d(&x, 64, 1, xv);
            ob_tensor_f32_2d(&out, 16, 1, ov);
            CHECK_EQ_INT(b->ops->matmul_a4(b, &w, &x, NULL, &out), OB_ERR_UNSUPPORTED);
            ob_err_clear();
        }
        mm_case_free(&c);
        ob_backend_free(b);
    }
}

/* ---- 3. the backend op ---- */

static double act_bound(ob_act_fmt f) {
    switch (f) {
    case OB_ACT_Q8:
    case OB_ACT_Q8K: return 1e-3;
    case OB_ACT_BF16: return 1e-4;
    default: return 1e-9;
    }
}

TEST(backend_matmul_every_tier) {
    uint64_t rng = 77;
    static const int ns[] = {1, 7, 70};
    for (int ti = OB_CPU_SCALAR; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        if (!k) continue;
        ob_backend *b = NULL;
        CHECK(ob_backend_cpu_create_with(2, k, &b) == 0);
        if (!b) continue;
        for (size_t i = 0; i < sizeof MM_TYPES / sizeof MM_TYPES[0]; i++) {
            ob_type type = MM_TYPES[i];
            int64_t nin = ob_type_get((int)type)->block_size == 256 ? 512 : 320;
            int64_t nout = 48 + (ti == OB_CPU_AVX512 && i % 3 == 0 ? 8 : 0); /* some not a multiple of 16 */
            mm_case c;
            if (mm_case_init(&c, type, nin, nout, &rng) < 0) {
                mm_case_free(&c);
                continue;
            }
            ob_tensor w, x, bias, out;
            int64_t ne[2] = {nin, nout};
            ob_tensor_init(&w, type, 2, ne, NULL);
            CHECK(b->ops->weight(b, &w, c.wq) == 0);
            const bool packed = w.extra != NULL;
            float *bv = ob_malloc((size_t)nout * sizeof(float));
            for (int64_t r = 0; r < nout; r++) bv[r] = test_rand_f32(&rng);
            int64_t bne = nout;
            ob_tensor_init(&bias, OB_TYPE_F32, 1, &bne, bv);
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                int n = ns[j];
                float *xv = ob_malloc((size_t)(n * nin) * sizeof(float));
                float *ov = ob_malloc((size_t)(n * nout) * sizeof(float));
                double *ref = ob_malloc((size_t)(n * nout) * sizeof(double));
                fill_act(xv, n * nin, &rng);
                ob_tensor_f32_2d(&x, nin, n, xv);
                ob_tensor_f32_2d(&out, nout, n, ov);
                CHECK(b->ops->matmul(b, &w, &x, &bias, &out) == 0);
                mm_ref(&c, xv, n, ref);
                for (int t = 0; t < n; t++)
                    for (int64_t r = 0; r < nout; r++) ref[t * nout + r] += bv[r];
                const ob_mm_kernels *mk = &k->mm[type];
                ob_act_fmt fmt = packed ? mk->packed_act : mk->dot ? mk->act : OB_ACT_F32;
                double e = nmse(ov, ref, n * nout), bound = act_bound(fmt);
                CHECK_MSG(e < bound, "%s %s%s n=%d: NMSE %.3g >= %.1g", tier_name((ob_cpu_tier)ti), ob_type_name(type),
                          packed ? " packed" : "", n, e, bound);
                ob_free(xv), ob_free(ov), ob_free(ref);
            }
            ob_free(bv);
            mm_case_free(&c);
        }
        ob_backend_free(b);
    }
}

/* Packed weights are carved one after another from huge-page slabs (cpu_backend.c, pack_alloc):
 * sixty 1.1 MB weights fill one 64 MB slab and start a second, and a 17 MB weight between them
 * takes a slab of its own while the small ones go on carving theirs. Every weight is loaded
 * before any is used, so a piece handed out twice or past a slab's end shows as a wrong product
 * (each weight's rows are the base rows rotated by a different amount). */
TEST(backend_packed_weights_in_slabs) {
    uint64_t rng = 4242;
    const int64_t nin = 1024, base_rows = 1024, nw = 60, big_at = 10, big_rows = 16384;
    mm_case c;
    CHECK(mm_case_init(&c, OB_TYPE_Q8_0, nin, base_rows, &rng) == 0);
    ob_backend *b = NULL;
    CHECK(ob_backend_cpu_create(2, &b) == 0);
    float *xv = ob_malloc((size_t)nin * sizeof(float));
    double *ref = ob_malloc((size_t)base_rows * sizeof(double));
    void **src = ob_calloc((size_t)nw, sizeof(void *));
    ob_tensor *w = ob_calloc((size_t)nw, sizeof(ob_tensor));
    if (b && xv && ref && src && w) {
        fill_act(xv, nin, &rng);
        mm_ref(&c, xv, 1, ref);
        int packed = 0;
        for (int64_t i = 0; i < nw; i++) {
            const int64_t rows = i == big_at ? big_rows : base_rows;
            src[i] = ob_malloc(c.row_bytes * (size_t)rows);
            CHECK(src[i] != NULL);
            if (!src[i]) break;
            for (int64_t r = 0; r < rows; r++)
                memcpy((char *)src[i] + (size_t)r * c.row_bytes,
                       (const char *)c.wq + (size_t)((r + 16 * i) % base_rows) * c.row_bytes, c.row_bytes);
            int64_t ne[2] = {nin, rows};
            ob_tensor_init(&w[i], OB_TYPE_Q8_0, 2, ne, NULL);
            CHECK(b->ops->weight(b, &w[i], src[i]) == 0);
            packed += w[i].extra != NULL;
        }
        /* the AVX2 and AVX-512 tiers pack Q8_0; the scalar tier has no panels */
        if (ob_cpu_kernels_get()->tier >= OB_CPU_AVX2) CHECK_EQ_INT(packed, nw);
        float *ov = ob_malloc((size_t)big_rows * sizeof(float));
        for (int64_t i = 0; ov && i < nw && src[i]; i++) {
            const int64_t rows = w[i].ne[1];
            ob_tensor x, out;
            ob_tensor_f32_2d(&x, nin, 1, xv);
            ob_tensor_f32_2d(&out, rows, 1, ov);
            CHECK(b->ops->matmul(b, &w[i], &x, NULL, &out) == 0);
            double e = 0, r2 = 0;
            for (int64_t r = 0; r < rows; r++) {
                const double want = ref[(r + 16 * i) % base_rows], d = ov[r] - want;
                e += d * d, r2 += want * want;
            }
            CHECK_MSG(e / r2 < 1e-3, "weight %lld (%lld rows): NMSE %.3g", (long long)i, (long long)rows, e / r2);
        }
        ob_free(ov);
    }
    ob_backend_free(b);
    for (int64_t i = 0; src && i < nw; i++) ob_free(src[i]);
    ob_free(src), ob_free(w), ob_free(xv), ob_free(ref);
    mm_case_free(&c);
}

/* ---- attention helpers ---- */

static float rel_err(const float *a, const float *b, int n) {
    float e = 0, m = 0;
    for (int i = 0; i < n; i++) {
        e = fmaxf(e, fabsf(a[i] - b[i]));
        m = fmaxf(m, fabsf(b[i]));
    }
    return m > 0 ? e / m : e;
}

TEST(attention_helpers_match_scalar) {
    const ob_cpu_kernels *ref = ob_cpu_kernels_for(OB_CPU_SCALAR);
    uint64_t rng = 5;
    enum { NR = 37, D = 72 };
    static float q[D], kf[NR][D + 8], w[NR], s_ref[NR], s_got[NR], acc_ref[D], acc_got[D];
    static uint16_t kh[NR][D + 8];
    for (int i = 0; i < D; i++) q[i] = test_rand_normal(&rng);
    for (int j = 0; j < NR; j++) {
        w[j] = test_rand_f32(&rng);
        for (int i = 0; i < D; i++) {
            kf[j][i] = test_rand_normal(&rng);
            kh[j][i] = ob_fp32_to_fp16(kf[j][i]);
        }
    }
    for (int ti = OB_CPU_AVX2; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        if (!k) continue;
        ref->attn_scores_f32(q, kf[0], sizeof kf[0], NR, D, s_ref);
        k->attn_scores_f32(q, kf[0], sizeof kf[0], NR, D, s_got);
        CHECK(rel_err(s_got, s_ref, NR) < 1e-5f);
        ref->attn_scores_f16(q, kh[0], sizeof kh[0], NR, D, s_ref);
        k->attn_scores_f16(q, kh[0], sizeof kh[0], NR, D, s_got);
        CHECK(rel_err(s_got, s_ref, NR) < 1e-5f);
        for (int i = 0; i < D; i++) acc_ref[i] = acc_got[i] = (float)i;
        ref->attn_accum_f32(w, kf[0], sizeof kf[0], NR, D, acc_ref);
        k->attn_accum_f32(w, kf[0], sizeof kf[0], NR, D, acc_got);
        CHECK(rel_err(acc_got, acc_ref, D) < 1e-5f);
        for (int i = 0; i < D; i++) acc_ref[i] = acc_got[i] = (float)i;
        ref->attn_accum_f16(w, kh[0], sizeof kh[0], NR, D, acc_ref);
        k->attn_accum_f16(w, kh[0], sizeof kh[0], NR, D, acc_got);
        CHECK(rel_err(acc_got, acc_ref, D) < 1e-5f);
        float x[NR], y_ref[NR], y_got[NR];
        for (int j = 0; j < NR; j++) x[j] = j == 3 ? -INFINITY : -20.0f * test_rand_f32(&rng) - 20.0f;
        float sr = ref->exp_sum(x, 1.5f, y_ref, NR), sg = k->exp_sum(x, 1.5f, y_got, NR);
        CHECK(fabsf(sg - sr) <= 1e-6f * sr);
        for (int j = 0; j < NR; j++) CHECK(fabsf(y_got[j] - y_ref[j]) <= 1e-6f * y_ref[j] + 1e-37f);
        /* a row's maximum: exact, at every length (tails of every size), wherever the largest lies */
        for (int n = 1; n <= NR; n++) {
            for (int j = 0; j < n; j++) x[j] = test_rand_f32(&rng) * 8.0f - 4.0f;
            const int jm = n * 13 / 17 % n; /* the largest's place moves over the row, tails included */
            x[(jm + 1) % n] = -INFINITY;
            x[jm] = 4.5f + (float)n;
            CHECK_MSG(k->max_f32(x, n) == ref->max_f32(x, n) && ref->max_f32(x, n) == 4.5f + (float)n, "max_f32 n %d", n);
        }
    }
}

TEST(attention_tiles_match_scalar) {
    const ob_cpu_kernels *ref = ob_cpu_kernels_for(OB_CPU_SCALAR);
    uint64_t rng = 11;
    /* M >= 8 with more than 32 keys: the AVX-512 F16 tiles' convert-once path (blocks of 32 keys) */
    static const int dims[][3] = {{1, 1, 16}, {2, 8, 64}, {3, 13, 72}, {7, 32, 128}, {5, 9, 40}, {8, 45, 72}, {13, 70, 128}};
    enum { MAXM = 16, MAXN = 80, MAXD = 128 };
    static float q[MAXM][MAXD], kk[MAXN][MAXD + 4], s_ref[MAXM][MAXN], s_got[MAXM][MAXN];
    static float o_ref[MAXM][MAXD], o_got[MAXM][MAXD];
    for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++) {
        const int M = dims[c][0], nk = dims[c][1], d = dims[c][2];
        for (int m = 0; m < MAXM; m++)
            for (int i = 0; i < MAXD; i++) q[m][i] = test_rand_normal(&rng);
        for (int j = 0; j < MAXN; j++)
            for (int i = 0; i < MAXD + 4; i++) kk[j][i] = test_rand_normal(&rng);
        for (int ti = OB_CPU_AVX2; ti <= OB_CPU_AVX512; ti++) {
            const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
            if (!k) continue;
            memset(s_got, 0, sizeof s_got);
            ref->attn_qk(q[0], M, MAXD, kk[0], sizeof kk[0], nk, d, s_ref[0], MAXN);
            k->attn_qk(q[0], M, MAXD, kk[0], sizeof kk[0], nk, d, s_got[0], MAXN);
            for (int m = 0; m < M; m++)
                CHECK_MSG(rel_err(s_got[m], s_ref[m], nk) < 1e-5f, "%s qk M=%d nk=%d d=%d", tier_name((ob_cpu_tier)ti), M, nk, d);
            for (int m = 0; m < MAXM; m++)
                for (int i = 0; i < MAXD; i++) o_ref[m][i] = o_got[m][i] = 0.5f * (float)i;
            ref->attn_pv(s_ref[0], M, MAXN, kk[0], sizeof kk[0], nk, d, o_ref[0], MAXD);
            k->attn_pv(s_ref[0], M, MAXN, kk[0], sizeof kk[0], nk, d, o_got[0], MAXD);
            for (int m = 0; m < MAXM; m++) /* rows >= M and columns >= d untouched */
                CHECK_MSG(rel_err(o_got[m], o_ref[m], MAXD) < 1e-5f, "%s pv M=%d nk=%d d=%d", tier_name((ob_cpu_tier)ti), M, nk, d);
            /* F16 rows: the same against the scalar F16 loops */
            static uint16_t kh[MAXN][MAXD + 4];
            for (int j = 0; j < MAXN; j++)
                for (int i = 0; i < MAXD + 4; i++) kh[j][i] = ob_fp32_to_fp16(kk[j][i]);
            ref->attn_qk_f16(q[0], M, MAXD, kh[0], sizeof kh[0], nk, d, s_ref[0], MAXN);
            k->attn_qk_f16(q[0], M, MAXD, kh[0], sizeof kh[0], nk, d, s_got[0], MAXN);
            for (int m = 0; m < M; m++)
                CHECK_MSG(rel_err(s_got[m], s_ref[m], nk) < 1e-5f, "%s qk f16 M=%d nk=%d d=%d", tier_name((ob_cpu_tier)ti), M, nk, d);
            for (int m = 0; m < MAXM; m++)
                for (int i = 0; i < MAXD; i++) o_ref[m][i] = o_got[m][i] = 0.5f * (float)i;
            ref->attn_pv_f16(s_ref[0], M, MAXN, kh[0], sizeof kh[0], nk, d, o_ref[0], MAXD);
            k->attn_pv_f16(s_ref[0], M, MAXN, kh[0], sizeof kh[0], nk, d, o_got[0], MAXD);
            for (int m = 0; m < MAXM; m++)
                CHECK_MSG(rel_err(o_got[m], o_ref[m], MAXD) < 1e-5f, "%s pv f16 M=%d nk=%d d=%d", tier_name((ob_cpu_tier)ti), M, nk, d);
            /* batch invariance: the rows of one call bit for bit those of the
             * same rows taken two at a time (a decode step's shape), the
             * F16 tiles as the F32 ones on the converted rows */
            static float s_pair[MAXM][MAXN], o_pair[MAXM][MAXD], kf[MAXN][MAXD + 4];
            memset(s_pair, 0, sizeof s_pair);
            for (int m = 0; m < M; m += 2)
                k->attn_qk_f16(q[m], M - m < 2 ? 1 : 2, MAXD, kh[0], sizeof kh[0], nk, d, s_pair[m], MAXN);
            for (int m = 0; m < M; m++)
                CHECK_MSG(!memcmp(s_pair[m], s_got[m], (size_t)nk * sizeof(float)), "%s qk f16 rows M=%d nk=%d d=%d",
                          tier_name((ob_cpu_tier)ti), M, nk, d);
            for (int j = 0; j < MAXN; j++)
                for (int i = 0; i < MAXD + 4; i++) kf[j][i] = ob_fp16_to_fp32(kh[j][i]);
            k->attn_qk(q[0], M, MAXD, kf[0], sizeof kf[0], nk, d, s_pair[0], MAXN);
            for (int m = 0; m < M; m++)
                CHECK_MSG(!memcmp(s_pair[m], s_got[m], (size_t)nk * sizeof(float)), "%s qk f16 = f32 M=%d nk=%d d=%d",
                          tier_name((ob_cpu_tier)ti), M, nk, d);
            for (int m = 0; m < MAXM; m++)
                for (int i = 0; i < MAXD; i++) o_pair[m][i] = 0.5f * (float)i;
            for (int m = 0; m < M; m += 2)
                k->attn_pv_f16(s_ref[m], M - m < 2 ? 1 : 2, MAXN, kh[0], sizeof kh[0], nk, d, o_pair[m], MAXD);
            for (int m = 0; m < M; m++)
                CHECK_MSG(!memcmp(o_pair[m], o_got[m], (size_t)d * sizeof(float)), "%s pv f16 rows M=%d nk=%d d=%d",
                          tier_name((ob_cpu_tier)ti), M, nk, d);
        }
    }
}

/* The attention op against a double-precision softmax, on a paged cache
 * with shuffled pages: prefill runs (blocked path) and single tokens at
 * 1500 positions (split-K path with two threads), GQA, a sliding window,
 * F32/F16/Q8_0 caches. Bound: relative 2e-5 of the output's magnitude for
 * F32/F16 rows (float accumulation over 1500 keys); the Q8_0 rows are
 * dequantized exactly in the reference, so the same bound applies. */
TEST(attention_op_long_context) {
    enum { NH = 8, NKV = 2, HD = 64, BS = 32, NPOS = 1500, NB = (NPOS + BS - 1) / BS + 4 };
    const int kv_dim = NKV * HD;
    uint64_t rng = 21;
    static const ob_type kv_types[] = {OB_TYPE_F32, OB_TYPE_F16, OB_TYPE_Q8_0};
    for (size_t kt = 0; kt < 3; kt++) {
        const ob_type type = kv_types[kt];
        const ob_type_traits *tr = ob_type_get((int)type);
        const size_t rb = ob_row_size(type, kv_dim);
        char *kpool = ob_calloc(NB * BS, rb), *vpool = ob_calloc(NB * BS, rb);
        float *kf = ob_malloc((size_t)NPOS * kv_dim * sizeof(float)), *vf = ob_malloc((size_t)NPOS * kv_dim * sizeof(float));
        int32_t table[NB];
        for (int i = 0; i < NB; i++) table[i] = (i * 7 + 3) % NB; /* a permutation: pages out of order */
        float row[NH * HD];
        for (int pos = 0; pos < NPOS; pos++) {
            const int64_t slot = (int64_t)table[pos / BS] * BS + pos % BS;
            for (int i = 0; i < kv_dim; i++) row[i] = test_rand_normal(&rng);
            tr->from_float_ref(row, kpool + (size_t)slot * rb, kv_dim);
            tr->to_float(kpool + (size_t)slot * rb, kf + (size_t)pos * kv_dim, kv_dim);
            for (int i = 0; i < kv_dim; i++) row[i] = test_rand_normal(&rng);
            tr->from_float_ref(row, vpool + (size_t)slot * rb, kv_dim);
            tr->to_float(vpool + (size_t)slot * rb, vf + (size_t)pos * kv_dim, kv_dim);
        }
        void *kl[1] = {kpool}, *vl[1] = {vpool};
        ob_kv_store kv = {type, 1, kv_dim, NB * BS, BS, rb, kl, vl};
        ob_attn_params ap = {NH, NKV, HD, 0.125f, 0.0f, 0.0f};
        /* cases: (first pos, tokens, window) */
        static const int cases[][3] = {{NPOS - 1, 1, 0}, {NPOS - 3, 3, 0}, {NPOS - 1, 1, 700}, {NPOS - 70, 70, 0}, {900, 1, 0},
                                       {300, 1, 0}, {301, 4, 0}};
        for (int ti = OB_CPU_AVX2; ti <= OB_CPU_AVX512; ti++) {
            const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
            if (!k) continue;
            ob_backend *b = NULL;
            CHECK(ob_backend_cpu_create_with(2, k, &b) == 0);
            if (!b) continue;
            /* and one without the next page's prefetch (OB_CPU_ATT_PF=0), for the same bits */
            ob_backend *b0 = NULL;
            setenv("OB_CPU_ATT_PF", "0", 1);
            CHECK(ob_backend_cpu_create_with(2, k, &b0) == 0);
            unsetenv("OB_CPU_ATT_PF");
            if (!b0) {
                ob_backend_free(b);
                continue;
            }
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
                const int p0 = cases[ci][0], n = cases[ci][1], win = cases[ci][2];
                float *qv = ob_malloc((size_t)n * NH * HD * sizeof(float)), *ov = ob_malloc((size_t)n * NH * HD * sizeof(float));
                ob_attn_token *toks = ob_malloc((size_t)n * sizeof(ob_attn_token));
                for (int i = 0; i < n * NH * HD; i++) qv[i] = test_rand_normal(&rng);
                for (int i = 0; i < n; i++) {
                    toks[i].block_table = table;
                    toks[i].pos = p0 + i;
                    toks[i].kv_start = win && p0 + i - win + 1 > 0 ? p0 + i - win + 1 : 0;
                }
                ob_tensor q, o;
                ob_tensor_f32_2d(&q, NH * HD, n, qv);
                ob_tensor_f32_2d(&o, NH * HD, n, ov);
                CHECK(b->ops->attention(b, &kv, 0, &q, toks, &ap, &o) == 0);
                {
                    float *ov0 = ob_malloc((size_t)n * NH * HD * sizeof(float));
                    ob_tensor o0;
                    ob_tensor_f32_2d(&o0, NH * HD, n, ov0);
                    CHECK(b0->ops->attention(b0, &kv, 0, &q, toks, &ap, &o0) == 0);
                    CHECK_MSG(memcmp(ov0, ov, (size_t)n * NH * HD * sizeof(float)) == 0,
                              "%s kv %s pos %d n %d window %d: the prefetching walk changed the bits",
                              tier_name((ob_cpu_tier)ti), ob_type_name(type), p0, n, win);
                    ob_free(ov0);
                }
                double worst = 0, mag = 0;
                static double sc[NPOS], ref[HD];
                for (int i = 0; i < n; i++)
                    for (int h = 0; h < NH; h++) {
                        const int hk = h / (NH / NKV);
                        const float *qq = qv + ((size_t)i * NH + h) * HD;
                        double m = -1e300, sum = 0;
                        for (int pos = toks[i].kv_start; pos <= toks[i].pos; pos++) {
                            double d = 0;
                            for (int e = 0; e < HD; e++) d += (double)qq[e] * kf[(size_t)pos * kv_dim + hk * HD + e];
                            sc[pos] = d * ap.scale;
                            if (sc[pos] > m) m = sc[pos];
                        }
                        memset(ref, 0, sizeof ref);
                        for (int pos = toks[i].kv_start; pos <= toks[i].pos; pos++) {
                            double w = exp(sc[pos] - m);
                            sum += w;
                            for (int e = 0; e < HD; e++) ref[e] += w * vf[(size_t)pos * kv_dim + hk * HD + e];
                        }
                        for (int e = 0; e < HD; e++) {
                            double r = ref[e] / sum, d = fabs(r - ov[((size_t)i * NH + h) * HD + e]);
                            if (d > worst) worst = d;
                            if (fabs(r) > mag) mag = fabs(r);
                        }
                    }
                CHECK_MSG(worst <= 2e-5 * mag, "%s kv %s pos %d n %d window %d: max error %.3g of %.3g",
                          tier_name((ob_cpu_tier)ti), ob_type_name(type), p0, n, win, worst, mag);
                ob_free(qv), ob_free(ov), ob_free(toks);
            }
            ob_backend_free(b);
            ob_backend_free(b0);
        }
        ob_free(kpool), ob_free(vpool), ob_free(kf), ob_free(vf);
    }
}

/* ALiBi (bloom) in the attention op: 6 heads, not a power of two, so the
 * second slope series is used too. The reference builds the slopes the way
 * transformers' build_alibi_tensor does (closest power of two, then the odd
 * powers of the finer base) and adds slope * key position, which softmax
 * cannot tell from the op's slope * (key - query position). Prefill runs of
 * 1 to 70 tokens (blocked path) and single tokens 700 keys deep (split-K,
 * two threads); same bound as above. */
TEST(attention_op_alibi) {
    enum { NH = 6, NKV = 2, HD = 16, BS = 16, NPOS = 720, NB = NPOS / BS + 2 };
    const int kv_dim = NKV * HD;
    uint64_t rng = 23;
    double slope[NH];
    {
        int p2 = 1;
        while (p2 * 2 <= NH) p2 *= 2;
        const double base = pow(2.0, -pow(2.0, -(log2((double)p2) - 3))), extra = pow(2.0, -pow(2.0, -(log2(2.0 * p2) - 3)));
        for (int h = 0; h < p2; h++) slope[h] = pow(base, h + 1);
        for (int h = p2; h < NH; h++) slope[h] = pow(extra, 2 * (h - p2) + 1);
    }
    for (int h = 0; h < NH; h++)
        CHECK_MSG(fabs(ob_alibi_slope(NH, h, 8.0f) - slope[h]) <= 1e-7 * slope[h], "slope %d: %g, want %g", h,
                  ob_alibi_slope(NH, h, 8.0f), slope[h]);
    float *kf = ob_malloc((size_t)NPOS * kv_dim * sizeof(float)), *vf = ob_malloc((size_t)NPOS * kv_dim * sizeof(float));
    int32_t table[NB];
    for (int i = 0; i < NB; i++) table[i] = (i * 5 + 1) % NB;
    float *kpool = ob_calloc((size_t)NB * BS * kv_dim, sizeof(float)), *vpool = ob_calloc((size_t)NB * BS * kv_dim, sizeof(float));
    for (int pos = 0; pos < NPOS; pos++) {
        const int64_t slot = (int64_t)table[pos / BS] * BS + pos % BS;
        for (int i = 0; i < kv_dim; i++) {
            kf[(size_t)pos * kv_dim + i] = kpool[slot * kv_dim + i] = test_rand_normal(&rng);
            vf[(size_t)pos * kv_dim + i] = vpool[slot * kv_dim + i] = test_rand_normal(&rng);
        }
    }
    void *kl[1] = {kpool}, *vl[1] = {vpool};
    ob_kv_store kv = {OB_TYPE_F32, 1, kv_dim, NB * BS, BS, (size_t)kv_dim * sizeof(float), kl, vl};
    ob_attn_params ap = {NH, NKV, HD, 0.25f, 0.0f, 8.0f};
    static const int cases[][2] = {{0, 1}, {0, 70}, {100, 37}, {NPOS - 1, 1}, {NPOS - 3, 3}};
    for (int ti = OB_CPU_SCALAR; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        if (!k) continue;
        ob_backend *b = NULL;
        CHECK(ob_backend_cpu_create_with(2, k, &b) == 0);
        if (!b) continue;
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const int p0 = cases[ci][0], n = cases[ci][1];
            float *qv = ob_malloc((size_t)n * NH * HD * sizeof(float)), *ov = ob_malloc((size_t)n * NH * HD * sizeof(float));
            ob_attn_token *toks = ob_malloc((size_t)n * sizeof(ob_attn_token));
            for (int i = 0; i < n * NH * HD; i++) qv[i] = test_rand_normal(&rng);
            for (int i = 0; i < n; i++) toks[i] = (ob_attn_token){table, p0 + i, 0};
            ob_tensor q, o;
            ob_tensor_f32_2d(&q, NH * HD, n, qv);
            ob_tensor_f32_2d(&o, NH * HD, n, ov);
            CHECK(b->ops->attention(b, &kv, 0, &q, toks, &ap, &o) == 0);
            double worst = 0, mag = 0;
            static double sc[NPOS], ref[HD];
            for (int i = 0; i < n; i++)
                for (int h = 0; h < NH; h++) {
                    const int hk = h / (NH / NKV);
                    const float *qq = qv + ((size_t)i * NH + h) * HD;
                    double m = -1e300, sum = 0;
                    for (int pos = 0; pos <= toks[i].pos; pos++) {
                        double d = 0;
                        for (int e = 0; e < HD; e++) d += (double)qq[e] * kf[(size_t)pos * kv_dim + hk * HD + e];
                        sc[pos] = d * ap.scale + slope[h] * pos;
                        if (sc[pos] > m) m = sc[pos];
                    }
                    memset(ref, 0, sizeof ref);
                    for (int pos = 0; pos <= toks[i].pos; pos++) {
                        double w = exp(sc[pos] - m);
                        sum += w;
                        for (int e = 0; e < HD; e++) ref[e] += w * vf[(size_t)pos * kv_dim + hk * HD + e];
                    }
                    for (int e = 0; e < HD; e++) {
                        double r = ref[e] / sum, d = fabs(r - ov[((size_t)i * NH + h) * HD + e]);
                        if (d > worst) worst = d;
                        if (fabs(r) > mag) mag = fabs(r);
                    }
                }
            CHECK_MSG(worst <= 2e-5 * mag, "%s alibi pos %d n %d: max error %.3g of %.3g", tier_name((ob_cpu_tier)ti),
                      p0, n, worst, mag);
            ob_free(qv), ob_free(ov), ob_free(toks);
        }
        ob_backend_free(b);
    }
    ob_free(kpool), ob_free(vpool), ob_free(kf), ob_free(vf);
}

TEST(elementwise_match_scalar) {
    const ob_cpu_kernels *ref = ob_cpu_kernels_for(OB_CPU_SCALAR);
    uint64_t rng = 9;
    enum { N = 301 };
    static float g[N], u[N], w[N], y_ref[N], y_got[N];
    for (int i = 0; i < N; i++) {
        g[i] = 12.0f * test_rand_f32(&rng);
        u[i] = test_rand_normal(&rng);
        w[i] = test_rand_normal(&rng);
    }
    g[0] = -100.0f, g[1] = 100.0f; /* exp saturation on both sides */
    for (int ti = OB_CPU_AVX2; ti <= OB_CPU_AVX512; ti++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)ti);
        if (!k) continue;
        ref->swiglu(g, u, y_ref, N);
        k->swiglu(g, u, y_got, N);
        for (int i = 0; i < N; i++) CHECK(fabsf(y_got[i] - y_ref[i]) <= 1e-6f * fabsf(y_ref[i]) + 1e-30f);
        ref->swiglu(g, NULL, y_ref, N);
        k->swiglu(g, NULL, y_got, N);
        for (int i = 0; i < N; i++) CHECK(fabsf(y_got[i] - y_ref[i]) <= 1e-6f * fabsf(y_ref[i]) + 1e-30f);
        /* float sums of 301 squares vs the reference's double: 1e-6 relative */
        float sr = ref->sum_sq(u, N), sg = k->sum_sq(u, N);
        CHECK(fabsf(sg - sr) <= 1e-6f * sr);
        ref->scale_mul(u, 0.7f, w, y_ref, N);
        k->scale_mul(u, 0.7f, w, y_got, N);
        CHECK(memcmp(y_ref, y_got, sizeof y_ref) == 0);
        ref->scale_mul(u, 0.7f, NULL, y_ref, N);
        k->scale_mul(u, 0.7f, NULL, y_got, N);
        CHECK(memcmp(y_ref, y_got, sizeof y_ref) == 0);
    }
}

int main(int argc, char **argv) { return test_main(argc, argv); }
