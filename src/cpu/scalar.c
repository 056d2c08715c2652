/*
 * scalar.c - the reference tier: every CPU kernel in plain C.
 *
 * These are the truth the SIMD tiers are tested against (tests/
 * test_cpu_kernels.c), and the fallback for any kernel a tier leaves out.
 * They favour obviousness over speed:
 *   - activation quantizers define the CPU's 8-bit activation formats
 *     (kernels.h): scale max|x|/127, codes rounded to nearest even, so a
 *     SIMD quantizer using the default rounding mode matches them exactly;
 *   - every weight type's dot kernel dequantizes one weight block with the
 *     quant module's reference to_float and multiplies it by the dequantized
 *     activation codes, so it is exact up to float rounding for any format
 *     and needs no per-type code here.
 */
#include <math.h>
#include <string.h>

#include "../quant/quant.h"
#include "kernels.h"

/* ---- float vectors ---- */

float ob_dot_f32_scalar(const float *x, const float *y, int64_t n) {
    /* Four partial sums: no single dependence chain, and the same spirit of
     * association as the SIMD kernels. */
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
    for (; i < n; i++) s0 += x[i] * y[i];
    return (s0 + s1) + (s2 + s3);
}

static void axpy_f32(float a, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void scale_f32(float a, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

static void f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ob_fp16_to_fp32(x[i]);
}

static void f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ob_fp32_to_fp16(x[i]);
}

/* ---- activation quantizers ---- */

/* Round to nearest, ties to even: what cvtps2dq does under the default
 * MXCSR, so the SIMD quantizers give the same codes. |v| <= 127 here. */
static inline int round_even(float v) { return (int)nearbyintf(v); }

void ob_quant_q8_scalar(const float *x, ob_act_q8 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) {
            int q = round_even(x[i] * id);
            y[b].qs[i] = (int8_t)q;
            s += q;
        }
        y[b].d = d;
        y[b].s = s;
    }
}

void ob_quant_q8K_scalar(const float *x, ob_act_q8K *y, int64_t n) {
    for (int64_t b = 0; b < n / OB_QK_K; b++, x += OB_QK_K) {
        float amax = 0.0f;
        for (int i = 0; i < OB_QK_K; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int g = 0; g < OB_QK_K / 16; g++) {
            int s = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++) {
                int q = round_even(x[i] * id);
                y[b].qs[i] = (int8_t)q;
                s += q;
            }
            y[b].bsums[g] = (int16_t)s;
        }
        for (int g = 0; g < OB_QK_K / 32; g++) y[b].bsum32[g] = (int16_t)(y[b].bsums[2 * g] + y[b].bsums[2 * g + 1]);
        y[b].d = d;
    }
}

/* The Q4_0 reference's rounding (kernels.h, ob_act_q4), term for term, so
 * the codes equal quantize_row_q4_0_ref's and the scale its half. */
void ob_quant_q4_scalar(const float *x, ob_act_q4 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float best = 0.0f, max = 0.0f;
        for (int i = 0; i < 32; i++)
            if (fabsf(x[i]) > best) {
                best = fabsf(x[i]);
                max = x[i];
            }
        const float d = max / -8, id = d != 0.0f ? 1.0f / d : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < 16; i++) {
            int q0 = (int)(x[i] * id + 8.5f), q1 = (int)(x[i + 16] * id + 8.5f);
            q0 = (q0 < 15 ? q0 : 15) - 8;
            q1 = (q1 < 15 ? q1 : 15) - 8;
            s += q0 + q1;
            y[b].qs[i] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
        }
        y[b].d = ob_fp16_to_fp32(ob_fp32_to_fp16(d));
        y[b].s = s;
    }
}

void ob_quant_q4x_scalar(const float *x, ob_act_q8 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        ob_act_q4 q;
        ob_quant_q4_scalar(x + 32 * b, &q, 32);
        for (int i = 0; i < 16; i++) {
            y[b].qs[i] = (int8_t)(((q.qs[i] & 15) ^ 8) - 8);
            y[b].qs[i + 16] = (int8_t)(((q.qs[i] >> 4) ^ 8) - 8);
        }
        y[b].d = q.d;
        y[b].s = q.s;
    }
}

void ob_to_bf16_scalar(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ob_fp32_to_bf16(x[i]);
}

size_t ob_act_row_bytes(ob_act_fmt f, int64_t n) {
    switch (f) {
    case OB_ACT_F32: return (size_t)n * sizeof(float);
    case OB_ACT_Q8: return n % 32 ? 0 : (size_t)(n / 32) * sizeof(ob_act_q8);
    case OB_ACT_Q8K: return n % OB_QK_K ? 0 : (size_t)(n / OB_QK_K) * sizeof(ob_act_q8K);
    case OB_ACT_BF16: return (size_t)n * sizeof(uint16_t);
    case OB_ACT_Q4: return n % 32 ? 0 : (size_t)(n / 32) * sizeof(ob_act_q4);
    case OB_ACT_Q4X: return n % 32 ? 0 : (size_t)(n / 32) * sizeof(ob_act_q8);
    }
    return 0;
}

/* ---- matmul dots: one weight row against nt activation rows ---- */

/* Weight types whose activations are ob_act_q8: one 32-element block at a
 * time, dequantized by the reference, times d * qs. */
static void dot_q8_generic(ob_type type, int64_t n, const void *w, const void *act, size_t act_stride, int nt,
                           float *out, size_t out_stride) {
    const ob_type_traits *tr = ob_type_get((int)type);
    const int64_t bs = tr->block_size; /* 32 */
    float acc[OB_MM_MAX_NT] = {0};
    float wf[32];
    for (int64_t b = 0; b < n / bs; b++) {
        tr->to_float((const char *)w + (size_t)b * tr->type_size, wf, bs);
        for (int t = 0; t < nt; t++) {
            const ob_act_q8 *a = (const ob_act_q8 *)(const void *)((const char *)act + (size_t)t * act_stride) + b;
            float s = 0.0f;
            for (int i = 0; i < 32; i++) s += wf[i] * (float)a->qs[i];
            acc[t] += s * a->d;
        }
    }
    for (int t = 0; t < nt; t++) out[(size_t)t * out_stride] = acc[t];
}

/* Weight types whose activations are ob_act_q8K super-blocks. */
static void dot_q8K_generic(ob_type type, int64_t n, const void *w, const void *act, size_t act_stride, int nt,
                            float *out, size_t out_stride) {
    const ob_type_traits *tr = ob_type_get((int)type);
    float acc[OB_MM_MAX_NT] = {0};
    float wf[OB_QK_K];
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        tr->to_float((const char *)w + (size_t)b * tr->type_size, wf, OB_QK_K);
        for (int t = 0; t < nt; t++) {
            const ob_act_q8K *a = (const ob_act_q8K *)(const void *)((const char *)act + (size_t)t * act_stride) + b;
            float s = 0.0f;
            for (int i = 0; i < OB_QK_K; i++) s += wf[i] * (float)a->qs[i];
            acc[t] += s * a->d;
        }
    }
    for (int t = 0; t < nt; t++) out[(size_t)t * out_stride] = acc[t];
}

/* Float weights against F32 activations, converted 64 at a time. */
static void dot_float_generic(ob_type type, int64_t n, const void *w, const void *act, size_t act_stride, int nt,
                              float *out, size_t out_stride) {
    const ob_type_traits *tr = ob_type_get((int)type);
    float acc[OB_MM_MAX_NT] = {0};
    float wf[64];
    for (int64_t k0 = 0; k0 < n; k0 += 64) {
        int64_t len = n - k0 < 64 ? n - k0 : 64;
        tr->to_float((const char *)w + (size_t)k0 * tr->type_size, wf, len);
        for (int t = 0; t < nt; t++) {
            const float *a = (const float *)(const void *)((const char *)act + (size_t)t * act_stride) + k0;
            acc[t] += ob_dot_f32_scalar(wf, a, len);
        }
    }
    for (int t = 0; t < nt; t++) out[(size_t)t * out_stride] = acc[t];
}

/* Q4_0 weights x 4-bit activations: the integer sum of (w - 8) * q per
 * block, then one float multiply by the product of the two scales. */
static inline int sext4(int v) { return (v ^ 8) - 8; }

static void dot_q4_0_a4_scalar(int64_t n, const void *w, const void *act, size_t act_stride, int nt, float *out,
                               size_t out_stride) {
    const ob_block_q4_0 *x = w;
    float acc[OB_MM_MAX_NT] = {0};
    for (int64_t b = 0; b < n / 32; b++) {
        const float dw = ob_fp16_to_fp32(x[b].d);
        for (int t = 0; t < nt; t++) {
            const ob_act_q4 *a = (const ob_act_q4 *)(const void *)((const char *)act + (size_t)t * act_stride) + b;
            int32_t isum = 0;
            for (int i = 0; i < 16; i++) {
                isum += ((x[b].qs[i] & 15) - 8) * sext4(a->qs[i] & 15);
                isum += ((x[b].qs[i] >> 4) - 8) * sext4(a->qs[i] >> 4);
            }
            acc[t] += (dw * a->d) * (float)isum;
        }
    }
    for (int t = 0; t < nt; t++) out[(size_t)t * out_stride] = acc[t];
}

#define DOT_Q8(name, T)                                                                                       \
    static void dot_##name##_scalar(int64_t n, const void *w, const void *a, size_t as, int nt, float *o,   \
                                    size_t os) {                                                            \
        dot_q8_generic(T, n, w, a, as, nt, o, os);                                                          \
    }
#define DOT_Q8K(name, T)                                                                                      \
    static void dot_##name##_scalar(int64_t n, const void *w, const void *a, size_t as, int nt, float *o,   \
                                    size_t os) {                                                            \
        dot_q8K_generic(T, n, w, a, as, nt, o, os);                                                         \
    }
#define DOT_FLOAT(name, T)                                                                                    \
    static void dot_##name##_scalar(int64_t n, const void *w, const void *a, size_t as, int nt, float *o,   \
                                    size_t os) {                                                            \
        dot_float_generic(T, n, w, a, as, nt, o, os);                                                       \
    }

DOT_Q8(q4_0, OB_TYPE_Q4_0)
DOT_Q8(q4_1, OB_TYPE_Q4_1)
DOT_Q8(q5_0, OB_TYPE_Q5_0)
DOT_Q8(q5_1, OB_TYPE_Q5_1)
DOT_Q8(q8_0, OB_TYPE_Q8_0)
DOT_Q8(iq4_nl, OB_TYPE_IQ4_NL)
DOT_Q8(mxfp4, OB_TYPE_MXFP4)
DOT_Q8K(q2_K, OB_TYPE_Q2_K)
DOT_Q8K(q3_K, OB_TYPE_Q3_K)
DOT_Q8K(q4_K, OB_TYPE_Q4_K)
DOT_Q8K(q5_K, OB_TYPE_Q5_K)
DOT_Q8K(q6_K, OB_TYPE_Q6_K)
DOT_Q8K(iq4_xs, OB_TYPE_IQ4_XS)
/* the codebook types: their reference dequantizer times the Q8_K codes (the
 * truth the integer kernels of x86/iq_avx2.c are tested against) */
DOT_Q8K(iq2_xxs, OB_TYPE_IQ2_XXS)
DOT_Q8K(iq2_xs, OB_TYPE_IQ2_XS)
DOT_Q8K(iq2_s, OB_TYPE_IQ2_S)
DOT_Q8K(iq3_xxs, OB_TYPE_IQ3_XXS)
DOT_Q8K(iq3_s, OB_TYPE_IQ3_S)
DOT_Q8K(iq1_s, OB_TYPE_IQ1_S)
DOT_Q8K(iq1_m, OB_TYPE_IQ1_M)
DOT_Q8K(tq1_0, OB_TYPE_TQ1_0)
DOT_Q8K(tq2_0, OB_TYPE_TQ2_0)
DOT_FLOAT(f32, OB_TYPE_F32)
DOT_FLOAT(f16, OB_TYPE_F16)
DOT_FLOAT(bf16, OB_TYPE_BF16)

/* ---- attention ---- */

static void attn_scores_f32(const float *q, const float *k, size_t kstride, int n, int d, float *scores) {
    for (int j = 0; j < n; j++) scores[j] = ob_dot_f32_scalar(q, (const float *)(const void *)((const char *)k + (size_t)j * kstride), d);
}

static void attn_scores_f16(const float *q, const uint16_t *k, size_t kstride, int n, int d, float *scores) {
    for (int j = 0; j < n; j++) {
        const uint16_t *kr = (const uint16_t *)(const void *)((const char *)k + (size_t)j * kstride);
        float s = 0.0f;
        for (int i = 0; i < d; i++) s += q[i] * ob_fp16_to_fp32(kr[i]);
        scores[j] = s;
    }
}

static void attn_accum_f32(const float *w, const float *v, size_t vstride, int n, int d, float *acc) {
    for (int j = 0; j < n; j++) axpy_f32(w[j], (const float *)(const void *)((const char *)v + (size_t)j * vstride), acc, d);
}

static void attn_accum_f16(const float *w, const uint16_t *v, size_t vstride, int n, int d, float *acc) {
    for (int j = 0; j < n; j++) {
        const uint16_t *vr = (const uint16_t *)(const void *)((const char *)v + (size_t)j * vstride);
        for (int i = 0; i < d; i++) acc[i] += w[j] * ob_fp16_to_fp32(vr[i]);
    }
}

static void attn_qk(const float *q, int M, size_t ldq, const float *k, size_t kstride, int nk, int d, float *s,
                    size_t lds) {
    for (int m = 0; m < M; m++) attn_scores_f32(q + (size_t)m * ldq, k, kstride, nk, d, s + (size_t)m * lds);
}

static void attn_pv(const float *p, int M, size_t ldp, const float *v, size_t vstride, int nk, int d, float *o,
                    size_t ldo) {
    for (int m = 0; m < M; m++) attn_accum_f32(p + (size_t)m * ldp, v, vstride, nk, d, o + (size_t)m * ldo);
}

static void attn_qk_f16(const float *q, int M, size_t ldq, const uint16_t *k, size_t kstride, int nk, int d,
                        float *s, size_t lds) {
    for (int m = 0; m < M; m++) attn_scores_f16(q + (size_t)m * ldq, k, kstride, nk, d, s + (size_t)m * lds);
}

static void attn_pv_f16(const float *p, int M, size_t ldp, const uint16_t *v, size_t vstride, int nk, int d, float *o,
                        size_t ldo) {
    for (int m = 0; m < M; m++) attn_accum_f16(p + (size_t)m * ldp, v, vstride, nk, d, o + (size_t)m * ldo);
}

static float max_f32(const float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static float exp_sum(const float *x, float m, float *y, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - m);
        s += y[i];
    }
    return s;
}

static void swiglu(const float *g, const float *u, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float s = g[i] / (1.0f + expf(-g[i]));
        y[i] = u ? s * u[i] : s;
    }
}

static float sum_sq(const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return (float)s;
}

static void scale_mul(const float *x, float s, const float *w, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = w ? (x[i] * s) * w[i] : x[i] * s;
}

void ob_cpu_fill_scalar(ob_cpu_kernels *k) {
    memset(k, 0, sizeof *k);
    k->tier = OB_CPU_SCALAR;
    k->name = "scalar";
    k->dot_f32 = ob_dot_f32_scalar;
    k->axpy_f32 = axpy_f32;
    k->scale_f32 = scale_f32;
    k->f16_to_f32 = f16_to_f32;
    k->f32_to_f16 = f32_to_f16;
    k->quant_q8 = ob_quant_q8_scalar;
    k->quant_q8K = ob_quant_q8K_scalar;
    k->quant_q4 = ob_quant_q4_scalar;
    k->quant_q4x = ob_quant_q4x_scalar;
    k->to_bf16 = ob_to_bf16_scalar;
    k->attn_scores_f32 = attn_scores_f32;
    k->attn_scores_f16 = attn_scores_f16;
    k->attn_accum_f32 = attn_accum_f32;
    k->attn_accum_f16 = attn_accum_f16;
    k->exp_sum = exp_sum;
    k->max_f32 = max_f32;
    k->attn_qk = attn_qk;
    k->attn_pv = attn_pv;
    k->attn_qk_f16 = attn_qk_f16;
    k->attn_pv_f16 = attn_pv_f16;
    k->swiglu = swiglu;
    k->sum_sq = sum_sq;
    k->scale_mul = scale_mul;
#define SET(T, name, fmt) k->mm[T] = (ob_mm_kernels){.act = fmt, .dot = dot_##name##_scalar}
    SET(OB_TYPE_Q4_0, q4_0, OB_ACT_Q8);
    SET(OB_TYPE_Q4_1, q4_1, OB_ACT_Q8);
    SET(OB_TYPE_Q5_0, q5_0, OB_ACT_Q8);
    SET(OB_TYPE_Q5_1, q5_1, OB_ACT_Q8);
    SET(OB_TYPE_Q8_0, q8_0, OB_ACT_Q8);
    SET(OB_TYPE_IQ4_NL, iq4_nl, OB_ACT_Q8);
    SET(OB_TYPE_MXFP4, mxfp4, OB_ACT_Q8);
    SET(OB_TYPE_Q2_K, q2_K, OB_ACT_Q8K);
    SET(OB_TYPE_Q3_K, q3_K, OB_ACT_Q8K);
    SET(OB_TYPE_Q4_K, q4_K, OB_ACT_Q8K);
    SET(OB_TYPE_Q5_K, q5_K, OB_ACT_Q8K);
    SET(OB_TYPE_Q6_K, q6_K, OB_ACT_Q8K);
    SET(OB_TYPE_IQ4_XS, iq4_xs, OB_ACT_Q8K);
    SET(OB_TYPE_IQ2_XXS, iq2_xxs, OB_ACT_Q8K);
    SET(OB_TYPE_IQ2_XS, iq2_xs, OB_ACT_Q8K);
    SET(OB_TYPE_IQ2_S, iq2_s, OB_ACT_Q8K);
    SET(OB_TYPE_IQ3_XXS, iq3_xxs, OB_ACT_Q8K);
    SET(OB_TYPE_IQ3_S, iq3_s, OB_ACT_Q8K);
    SET(OB_TYPE_IQ1_S, iq1_s, OB_ACT_Q8K);
    SET(OB_TYPE_IQ1_M, iq1_m, OB_ACT_Q8K);
    SET(OB_TYPE_TQ1_0, tq1_0, OB_ACT_Q8K);
    SET(OB_TYPE_TQ2_0, tq2_0, OB_ACT_Q8K);
    SET(OB_TYPE_F32, f32, OB_ACT_F32);
    SET(OB_TYPE_F16, f16, OB_ACT_F32);
    SET(OB_TYPE_BF16, bf16, OB_ACT_F32);
#undef SET
    k->mm[OB_TYPE_Q4_0].a4_act = OB_ACT_Q4;
    k->mm[OB_TYPE_Q4_0].dot_a4 = dot_q4_0_a4_scalar;
}
