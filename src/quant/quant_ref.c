/*
 * quant_ref.c - reference quantize and dequantize for the legacy 32-element
 * formats (Q4_0 ... Q8_1), MXFP4, the K-quants (Q2_K ... Q8_K) and the
 * ternary TQ1_0/TQ2_0. The IQ families are in iq_ref.c, float types in
 * float_ref.c; block layouts are documented in blocks.h.
 *
 * These routines are the specification, so they favour plain loops over
 * speed. They also reproduce ggml's reference quantizers (the ones
 * llama-quantize uses when no importance matrix is given): the same
 * searches, the same float operations in the same order. Two consequences
 * for anyone editing this file:
 *   - Do not "simplify" arithmetic: (a * b) * c and a * (b * c) round
 *     differently, and the fixture test compares bytes.
 *   - No fused multiply-add: the pragma below keeps the compiler from
 *     contracting a * b + c even when built for an FMA-capable target.
 *
 * The scale searches are written once here and named for what they do;
 * each comment gives the ggml function it corresponds to, for readers
 * comparing the two.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <float.h>
#include <math.h>
#include <string.h>

#include "iq_tables.h"
#include "quant.h"
#include "quant_ref.h"

/* A group whose largest magnitude is below this is treated as all zeros. */
#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int iclamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static inline float half(ob_half h) { return ob_fp16_to_fp32(h); }

/* Adding 1.5 * 2^23 pushes the fraction out of a float's mantissa, so the
 * addition itself rounds to an integer (to nearest even, the FPU default);
 * the low 22 mantissa bits then hold that integer offset by 2^22. */
int ob_nearest_int(float f) {
    float biased = f + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &biased, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

float ob_e8m0_to_fp32_half(uint8_t e) {
    /* 2^(e - 128): exponent field e - 1 for e >= 2; below that the value is
     * a binary32 subnormal with a single mantissa bit. */
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The signed value of the element of largest magnitude (the first one on
 * ties); *amax gets its magnitude. */
static float signed_absmax(const float *x, int n, float *amax) {
    float best = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > best) {
            best = ax;
            max = x[i];
        }
    }
    *amax = best;
    return max;
}

/* Little-endian uint32 in 4 bytes (the qh fields of Q5_0/Q5_1). */
static uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32le(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* ======================================================================
 * Legacy formats: one scale (and maybe a min) per 32 elements.
 * ====================================================================== */

/* Q4_0: d = max / -8, where max is the signed value of largest magnitude,
 * so that value lands exactly on code 0 (-8 * d) and the other side gets
 * codes up to 15 (+7 * d). Codes: truncate(x / d + 8.5), i.e. round half up. */
void ob_quantize_row_q4_0_ref(const float *src, void *dst, int64_t n) {
    ob_block_q4_0 *y = (ob_block_q4_0 *)dst;
    for (int64_t b = 0; b < n / OB_QK4_0; b++) {
        const float *x = src + b * OB_QK4_0;
        float amax;
        const float max = signed_absmax(x, OB_QK4_0, &amax);
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);
        for (int j = 0; j < OB_QK4_0 / 2; j++) {
            const int q0 = imin(15, (int)(x[j] * id + 8.5f));
            const int q1 = imin(15, (int)(x[j + 16] * id + 8.5f));
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void ob_dequantize_row_q4_0(const void *src, float *dst, int64_t n) {
    const ob_block_q4_0 *x = (const ob_block_q4_0 *)src;
    for (int64_t b = 0; b < n / OB_QK4_0; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK4_0;
        for (int j = 0; j < OB_QK4_0 / 2; j++) {
            y[j] = ((x[b].qs[j] & 0x0f) - 8) * d;
            y[j + 16] = ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

/* Q4_1: min and max of the block span codes 0..15 exactly; codes are
 * round-half-up of (x - min) / d. The float min (not its half) is used to
 * pick codes, as ggml does. */
void ob_quantize_row_q4_1_ref(const float *src, void *dst, int64_t n) {
    ob_block_q4_1 *y = (ob_block_q4_1 *)dst;
    for (int64_t b = 0; b < n / OB_QK4_1; b++) {
        const float *x = src + b * OB_QK4_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < OB_QK4_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);
        y[b].m = ob_fp32_to_fp16(min);
        for (int j = 0; j < OB_QK4_1 / 2; j++) {
            const int q0 = imin(15, (int)((x[j] - min) * id + 0.5f));
            const int q1 = imin(15, (int)((x[j + 16] - min) * id + 0.5f));
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void ob_dequantize_row_q4_1(const void *src, float *dst, int64_t n) {
    const ob_block_q4_1 *x = (const ob_block_q4_1 *)src;
    for (int64_t b = 0; b < n / OB_QK4_1; b++) {
        const float d = half(x[b].d);
        const float m = half(x[b].m);
        float *y = dst + b * OB_QK4_1;
        for (int j = 0; j < OB_QK4_1 / 2; j++) {
            y[j] = (x[b].qs[j] & 0x0f) * d + m;
            y[j + 16] = (x[b].qs[j] >> 4) * d + m;
        }
    }
}

/* Q5_0: as Q4_0 with 32 levels: d = max / -16, codes 0..31. */
void ob_quantize_row_q5_0_ref(const float *src, void *dst, int64_t n) {
    ob_block_q5_0 *y = (ob_block_q5_0 *)dst;
    for (int64_t b = 0; b < n / OB_QK5_0; b++) {
        const float *x = src + b * OB_QK5_0;
        float amax;
        const float max = signed_absmax(x, OB_QK5_0, &amax);
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < OB_QK5_0 / 2; j++) {
            const int q0 = imin(31, (int)(x[j] * id + 16.5f));
            const int q1 = imin(31, (int)(x[j + 16] * id + 16.5f));
            y[b].qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_u32le(y[b].qh, qh);
    }
}

void ob_dequantize_row_q5_0(const void *src, float *dst, int64_t n) {
    const ob_block_q5_0 *x = (const ob_block_q5_0 *)src;
    for (int64_t b = 0; b < n / OB_QK5_0; b++) {
        const float d = half(x[b].d);
        const uint32_t qh = load_u32le(x[b].qh);
        float *y = dst + b * OB_QK5_0;
        for (int j = 0; j < OB_QK5_0 / 2; j++) {
            const int q0 = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int q1 = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (q0 - 16) * d;
            y[j + 16] = (q1 - 16) * d;
        }
    }
}

/* Q5_1: as Q4_1 with codes 0..31. */
void ob_quantize_row_q5_1_ref(const float *src, void *dst, int64_t n) {
    ob_block_q5_1 *y = (ob_block_q5_1 *)dst;
    for (int64_t b = 0; b < n / OB_QK5_1; b++) {
        const float *x = src + b * OB_QK5_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < OB_QK5_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);
        y[b].m = ob_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < OB_QK5_1 / 2; j++) {
            const int q0 = imin(31, (int)((x[j] - min) * id + 0.5f));
            const int q1 = imin(31, (int)((x[j + 16] - min) * id + 0.5f));
            y[b].qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_u32le(y[b].qh, qh);
    }
}

void ob_dequantize_row_q5_1(const void *src, float *dst, int64_t n) {
    const ob_block_q5_1 *x = (const ob_block_q5_1 *)src;
    for (int64_t b = 0; b < n / OB_QK5_1; b++) {
        const float d = half(x[b].d);
        const float m = half(x[b].m);
        const uint32_t qh = load_u32le(x[b].qh);
        float *y = dst + b * OB_QK5_1;
        for (int j = 0; j < OB_QK5_1 / 2; j++) {
            const int q0 = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int q1 = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = q0 * d + m;
            y[j + 16] = q1 * d + m;
        }
    }
}

/* Q8_0: d = amax / 127, codes round(x / d) (half away from zero). */
void ob_quantize_row_q8_0_ref(const float *src, void *dst, int64_t n) {
    ob_block_q8_0 *y = (ob_block_q8_0 *)dst;
    for (int64_t b = 0; b < n / OB_QK8_0; b++) {
        const float *x = src + b * OB_QK8_0;
        float amax;
        signed_absmax(x, OB_QK8_0, &amax);
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);
        for (int j = 0; j < OB_QK8_0; j++) y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void ob_dequantize_row_q8_0(const void *src, float *dst, int64_t n) {
    const ob_block_q8_0 *x = (const ob_block_q8_0 *)src;
    for (int64_t b = 0; b < n / OB_QK8_0; b++) {
        const float d = half(x[b].d);
        for (int j = 0; j < OB_QK8_0; j++) dst[b * OB_QK8_0 + j] = x[b].qs[j] * d;
    }
}

/* Q8_1: Q8_0 plus s = d * (sum of the codes), computed from the float d. */
void ob_quantize_row_q8_1_ref(const float *src, void *dst, int64_t n) {
    ob_block_q8_1 *y = (ob_block_q8_1 *)dst;
    for (int64_t b = 0; b < n / OB_QK8_1; b++) {
        const float *x = src + b * OB_QK8_1;
        float amax;
        signed_absmax(x, OB_QK8_1, &amax);
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < OB_QK8_1; j++) {
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[b].qs[j];
        }
        y[b].s = ob_fp32_to_fp16(sum * d);
    }
}

void ob_dequantize_row_q8_1(const void *src, float *dst, int64_t n) {
    const ob_block_q8_1 *x = (const ob_block_q8_1 *)src;
    for (int64_t b = 0; b < n / OB_QK8_1; b++) {
        const float d = half(x[b].d);
        for (int j = 0; j < OB_QK8_1; j++) dst[b * OB_QK8_1 + j] = x[b].qs[j] * d;
    }
}

/* ======================================================================
 * MXFP4: E2M1 values with a shared power-of-two scale.
 * ====================================================================== */

/* Index of the doubled E2M1 level closest to x at scale d (the first on
 * ties, so +0 wins over -0). */
static int mxfp4_nearest(float x, float d) {
    int best = 0;
    float best_err = fabsf(ob_mxfp4_values[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(ob_mxfp4_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* The exponent puts amax in [4, 8) times 2^(e - 127), i.e. in [8, 16) in
 * units of the halved scale; the largest level, 12 (= 2 * 6.0), covers all
 * but the top of that range, which is clipped to +-12. The exponent is
 * clamped to 0..254 (255 is NaN in E8M0) so extreme inputs stay defined;
 * in range it is ggml's value. */
void ob_quantize_row_mxfp4_ref(const float *src, void *dst, int64_t n) {
    ob_block_mxfp4 *y = (ob_block_mxfp4 *)dst;
    for (int64_t b = 0; b < n / OB_QK_MXFP4; b++) {
        const float *x = src + b * OB_QK_MXFP4;
        float amax;
        signed_absmax(x, OB_QK_MXFP4, &amax);
        int e = 0;
        if (amax > 0.0f) e = iclamp((int)floorf(log2f(amax)) - 2 + 127, 0, 254);
        const float d = ob_e8m0_to_fp32_half((uint8_t)e);
        y[b].e = (uint8_t)e;
        for (int j = 0; j < OB_QK_MXFP4 / 2; j++) {
            const int q0 = mxfp4_nearest(x[j], d);
            const int q1 = mxfp4_nearest(x[j + 16], d);
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void ob_dequantize_row_mxfp4(const void *src, float *dst, int64_t n) {
    const ob_block_mxfp4 *x = (const ob_block_mxfp4 *)src;
    for (int64_t b = 0; b < n / OB_QK_MXFP4; b++) {
        const float d = ob_e8m0_to_fp32_half(x[b].e);
        float *y = dst + b * OB_QK_MXFP4;
        for (int j = 0; j < OB_QK_MXFP4 / 2; j++) {
            y[j] = ob_mxfp4_values[x[b].qs[j] & 0x0f] * d;
            y[j + 16] = ob_mxfp4_values[x[b].qs[j] >> 4] * d;
        }
    }
}

/* ======================================================================
 * Scale searches shared by the K-quants.
 * ====================================================================== */

/* Symmetric codes l in [-nmax, nmax - 1] (stored as l + nmax) with one
 * scale, chosen to minimise sum w * (x - scale * l)^2 with w = x^2 when
 * `weights` is NULL. Starts from the scale that maps the signed extreme to
 * -nmax, then tries 18 nearby scales (nmax +- 0.1 .. 0.9); for each candidate
 * the best scale for its codes is sumlx / suml2, and the candidate wins when
 * it explains more of the weighted energy (sumlx^2 / suml2). Returns the
 * scale (0 for an all-zero group). ggml: make_qx_quants, rmse_type 1. */
static float search_symmetric(int n, int nmax, const float *x, int8_t *L, const float *weights) {
    float amax;
    const float max = signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = iclamp(ob_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = weights ? weights[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = iclamp(ob_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = weights ? weights[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + iclamp(ob_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric codes as search_symmetric (weights x^2), refined differently:
 * start from the extreme-to--nmax scale, then up to 5 sweeps of coordinate
 * descent, each element moved to the code that is best given all the
 * others, kept when the weighted fit improves. Codes stored as l + nmax.
 * Returns the least-squares scale. ggml: make_q3_quants with do_rmse. */
static float search_symmetric_iterative(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n); /* note: code 0, not nmax; scale 0 makes it moot */
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = iclamp(ob_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i]; /* sums without element i */
            if (slx > 0.0f) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int new_l = iclamp(ob_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    /* better when slx^2 / sl2 > sumlx^2 / suml2 */
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric codes l in [0, nmax] with x ~ scale * l - min_out (min_out >= 0,
 * i.e. the offset never goes above 0). Minimises sum w * |err| (use_mad) or
 * sum w * err^2. Candidates: the min/max span, then nstep + 1 spans with
 * nmax replaced by nmax + rmin + rdelta * is; for each, codes are rounded and
 * scale and offset re-fitted by weighted least squares. Laux is scratch of
 * n codes. Returns the scale; *min_out gets the (positive) offset.
 * ggml: make_qkx2_quants. */
static float search_scale_min(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *min_out, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *min_out = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = ob_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)iclamp(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *min_out = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = iclamp(ob_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        /* Weighted least squares for x ~ a * l + m (2x2 normal equations). */
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) { /* offset may not be positive: refit the scale alone */
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *min_out = -min;
    return scale;
}

/* ======================================================================
 * K-quants.
 * ====================================================================== */

/* Pack 2-bit codes L[256] as Q2_K/Q3_K's qs: element 128h + 32k + l goes to
 * bits 2k of qs[32h + l]. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *g = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(g[0] | g[32] << 2 | g[64] << 4 | g[96] << 6);
        }
}

/* Q2_K: per sub-block of 16, an asymmetric fit with 4 levels minimising
 * |x|-weighted absolute error; the 16 scales and 16 mins are then quantized
 * to 4 bits against their maxima, and codes recomputed with the stored
 * (rounded) scale and min. */
void ob_quantize_row_q2_K_ref(const float *src, void *dst, int64_t n) {
    ob_block_q2_K *y = (ob_block_q2_K *)dst;
    uint8_t L[OB_QK_K], Laux[16];
    float weights[16], mins[OB_QK_K / 16], scales[OB_QK_K / 16];

    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K;
        float max_scale = 0.0f, max_min = 0.0f; /* both >= 0 by construction */
        for (int s = 0; s < OB_QK_K / 16; s++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * s + l]);
            scales[s] = search_scale_min(16, 3, x + 16 * s, weights, L + 16 * s, &mins[s], Laux,
                                         -0.5f, 0.1f, 15, 1);
            if (scales[s] > max_scale) max_scale = scales[s];
            if (mins[s] > max_min) max_min = mins[s];
        }

        if (max_scale > 0.0f) {
            const float iscale = 15.0f / max_scale;
            for (int s = 0; s < OB_QK_K / 16; s++)
                y[b].scales[s] = (uint8_t)ob_nearest_int(iscale * scales[s]);
            y[b].d = ob_fp32_to_fp16(max_scale / 15.0f);
        } else {
            memset(y[b].scales, 0, sizeof y[b].scales);
            y[b].d = ob_fp32_to_fp16(0.0f);
        }
        if (max_min > 0.0f) {
            const float inv_min = 15.0f / max_min;
            for (int s = 0; s < OB_QK_K / 16; s++)
                y[b].scales[s] |= (uint8_t)((unsigned)ob_nearest_int(inv_min * mins[s]) << 4);
            y[b].dmin = ob_fp32_to_fp16(max_min / 15.0f);
        } else {
            y[b].dmin = ob_fp32_to_fp16(0.0f);
        }

        for (int s = 0; s < OB_QK_K / 16; s++) {
            const float d = half(y[b].d) * (y[b].scales[s] & 0x0f);
            if (d == 0.0f) continue; /* keep the codes of the search */
            const float dm = half(y[b].dmin) * (y[b].scales[s] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = (uint8_t)iclamp(ob_nearest_int((x[16 * s + l] + dm) / d), 0, 3);
        }
        pack_2bit(L, y[b].qs);
    }
}

void ob_dequantize_row_q2_K(const void *src, float *dst, int64_t n) {
    const ob_block_q2_K *x = (const ob_block_q2_K *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        const float dmin = half(x[b].dmin);
        float *y = dst + b * OB_QK_K;
        for (int i = 0; i < OB_QK_K; i++) {
            const int h = i / 128, k = (i % 128) / 32, l = i % 32;
            const int q = (x[b].qs[32 * h + l] >> (2 * k)) & 3;
            const uint8_t sc = x[b].scales[i / 16];
            const float dl = d * (sc & 0x0f);
            const float ml = dmin * (sc >> 4);
            y[i] = dl * q - ml;
        }
    }
}

/* The 6-bit scale of sub-block s of a Q3_K block, before the -32 offset. */
static int q3_K_scale(const uint8_t *scales, int s) {
    const int lo = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
    const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    return lo | hi << 4;
}

/* Q3_K: per sub-block of 16, symmetric 8-level codes by coordinate descent;
 * the 16 signed scales are quantized to 6 bits (offset 32) against the one
 * of largest magnitude, and codes recomputed with the stored scales. */
void ob_quantize_row_q3_K_ref(const float *src, void *dst, int64_t n) {
    ob_block_q3_K *y = (ob_block_q3_K *)dst;
    int8_t L[OB_QK_K];
    float scales[OB_QK_K / 16];

    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K;
        float max_scale = 0.0f, amax = 0.0f;
        for (int s = 0; s < OB_QK_K / 16; s++) {
            scales[s] = search_symmetric_iterative(16, 4, x + 16 * s, L + 16 * s);
            if (fabsf(scales[s]) > amax) {
                amax = fabsf(scales[s]);
                max_scale = scales[s];
            }
        }

        memset(y[b].scales, 0, sizeof y[b].scales);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int s = 0; s < OB_QK_K / 16; s++) {
                const int l = iclamp(ob_nearest_int(iscale * scales[s]), -32, 31) + 32;
                if (s < 8)
                    y[b].scales[s] = (uint8_t)(l & 0x0f);
                else
                    y[b].scales[s - 8] |= (uint8_t)((l & 0x0f) << 4);
                y[b].scales[8 + s % 4] |= (uint8_t)((l >> 4) << (2 * (s / 4)));
            }
            y[b].d = ob_fp32_to_fp16(1 / iscale);
        } else {
            y[b].d = ob_fp32_to_fp16(0.0f);
        }

        for (int s = 0; s < OB_QK_K / 16; s++) {
            const float d = half(y[b].d) * (float)(q3_K_scale(y[b].scales, s) - 32);
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = (int8_t)(iclamp(ob_nearest_int(x[16 * s + l] / d), -4, 3) + 4);
        }

        /* Codes are 0..7 now: bit 2 to hmask, bits 0..1 to qs. */
        uint8_t low[OB_QK_K];
        memset(y[b].hmask, 0, sizeof y[b].hmask);
        for (int i = 0; i < OB_QK_K; i++) {
            if (L[i] > 3) y[b].hmask[i % 32] |= (uint8_t)(1u << (i / 32));
            low[i] = (uint8_t)(L[i] & 3);
        }
        pack_2bit(low, y[b].qs);
    }
}

void ob_dequantize_row_q3_K(const void *src, float *dst, int64_t n) {
    const ob_block_q3_K *x = (const ob_block_q3_K *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d_all = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int i = 0; i < OB_QK_K; i++) {
            const int h = i / 128, k = (i % 128) / 32, l = i % 32;
            const int low = (x[b].qs[32 * h + l] >> (2 * k)) & 3;
            const int high = (x[b].hmask[i % 32] >> (i / 32)) & 1;
            const float dl = d_all * (q3_K_scale(x[b].scales, i / 16) - 32);
            y[i] = dl * (low - (high ? 0 : 4));
        }
    }
}

/* Scale and min (6 bits each) of sub-block s of a Q4_K/Q5_K block. */
static void k4_scale_min(const uint8_t *q, int s, uint8_t *sc, uint8_t *mn) {
    if (s < 4) {
        *sc = q[s] & 63;
        *mn = q[s + 4] & 63;
    } else {
        *sc = (uint8_t)((q[s + 4] & 0x0f) | (q[s - 4] >> 6) << 4);
        *mn = (uint8_t)((q[s + 4] >> 4) | (q[s] >> 6) << 4);
    }
}

/* Shared first half of Q4_K and Q5_K: per sub-block of 32, an asymmetric
 * fit weighted by (rms of the sub-block + |x|); scales and mins quantized to
 * 6 bits against their maxima and packed; then codes recomputed with the
 * stored values. Fills d, dmin, scales and L[256] (codes 0..nmax). */
static void quantize_k4_scales(const float *x, int nmax, float rmin, int nstep, ob_half *d_out,
                               ob_half *dmin_out, uint8_t *packed, uint8_t *L) {
    uint8_t Laux[32];
    float weights[32], mins[OB_QK_K / 32], scales[OB_QK_K / 32];
    float max_scale = 0.0f, max_min = 0.0f;

    for (int s = 0; s < OB_QK_K / 32; s++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * s + l] * x[32 * s + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * s + l]);
        scales[s] = search_scale_min(32, nmax, x + 32 * s, weights, L + 32 * s, &mins[s], Laux,
                                     rmin, 0.1f, nstep, 0);
        if (scales[s] > max_scale) max_scale = scales[s];
        if (mins[s] > max_min) max_min = mins[s];
    }

    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int s = 0; s < OB_QK_K / 32; s++) {
        /* Truncation to a byte first, as ggml stores it; only then the
         * clamp (a negative scale would wrap high and clamp to 63). */
        const uint8_t ls = (uint8_t)imin(63, (uint8_t)ob_nearest_int(inv_scale * scales[s]));
        const uint8_t lm = (uint8_t)imin(63, (uint8_t)ob_nearest_int(inv_min * mins[s]));
        if (s < 4) {
            packed[s] = ls;
            packed[s + 4] = lm;
        } else {
            packed[s + 4] = (uint8_t)((ls & 0x0f) | (lm & 0x0f) << 4);
            packed[s - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[s] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = ob_fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = ob_fp32_to_fp16(max_min / 63.0f);

    for (int s = 0; s < OB_QK_K / 32; s++) {
        uint8_t sc, mn;
        k4_scale_min(packed, s, &sc, &mn);
        const float d = half(*d_out) * sc;
        if (d == 0.0f) continue;
        const float dm = half(*dmin_out) * mn;
        for (int l = 0; l < 32; l++)
            L[32 * s + l] = (uint8_t)iclamp(ob_nearest_int((x[32 * s + l] + dm) / d), 0, nmax);
    }
}

void ob_quantize_row_q4_K_ref(const float *src, void *dst, int64_t n) {
    ob_block_q4_K *y = (ob_block_q4_K *)dst;
    uint8_t L[OB_QK_K];
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        quantize_k4_scales(src + b * OB_QK_K, 15, -1.0f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
        for (int p = 0; p < OB_QK_K / 64; p++)
            for (int l = 0; l < 32; l++)
                y[b].qs[32 * p + l] = (uint8_t)(L[64 * p + l] | L[64 * p + 32 + l] << 4);
    }
}

void ob_dequantize_row_q4_K(const void *src, float *dst, int64_t n) {
    const ob_block_q4_K *x = (const ob_block_q4_K *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        const float dmin = half(x[b].dmin);
        float *y = dst + b * OB_QK_K;
        for (int s = 0; s < OB_QK_K / 32; s++) {
            uint8_t sc, mn;
            k4_scale_min(x[b].scales, s, &sc, &mn);
            const float dl = d * sc;
            const float ml = dmin * mn;
            const uint8_t *q = x[b].qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            for (int l = 0; l < 32; l++) y[32 * s + l] = dl * ((q[l] >> shift) & 0x0f) - ml;
        }
    }
}

void ob_quantize_row_q5_K_ref(const float *src, void *dst, int64_t n) {
    ob_block_q5_K *y = (ob_block_q5_K *)dst;
    uint8_t L[OB_QK_K];
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        quantize_k4_scales(src + b * OB_QK_K, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int p = 0; p < OB_QK_K / 64; p++)
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * p + l], hi = L[64 * p + 32 + l];
                y[b].qs[32 * p + l] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
                y[b].qh[l] |= (uint8_t)((lo >> 4) << (2 * p) | (hi >> 4) << (2 * p + 1));
            }
    }
}

void ob_dequantize_row_q5_K(const void *src, float *dst, int64_t n) {
    const ob_block_q5_K *x = (const ob_block_q5_K *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        const float dmin = half(x[b].dmin);
        float *y = dst + b * OB_QK_K;
        for (int s = 0; s < OB_QK_K / 32; s++) {
            uint8_t sc, mn;
            k4_scale_min(x[b].scales, s, &sc, &mn);
            const float dl = d * sc;
            const float ml = dmin * mn;
            const uint8_t *q = x[b].qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            for (int l = 0; l < 32; l++) {
                const int q5 = ((q[l] >> shift) & 0x0f) + (((x[b].qh[l] >> s) & 1) ? 16 : 0);
                y[32 * s + l] = dl * q5 - ml;
            }
        }
    }
}

/* Q6_K: per sub-block of 16, symmetric 64-level codes by the scale search;
 * the 16 signed scales quantized to int8 against the one of largest
 * magnitude (mapped to -128), codes recomputed with the stored scales. */
void ob_quantize_row_q6_K_ref(const float *src, void *dst, int64_t n) {
    ob_block_q6_K *y = (ob_block_q6_K *)dst;
    int8_t L[OB_QK_K];
    float scales[OB_QK_K / 16];

    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K;
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int s = 0; s < OB_QK_K / 16; s++) {
            scales[s] = search_symmetric(16, 32, x + 16 * s, L + 16 * s, NULL);
            if (fabsf(scales[s]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[s]);
                max_scale = scales[s];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }

        const float iscale = -128.0f / max_scale;
        y[b].d = ob_fp32_to_fp16(1 / iscale);
        for (int s = 0; s < OB_QK_K / 16; s++)
            y[b].scales[s] = (int8_t)imin(127, ob_nearest_int(iscale * scales[s]));

        for (int s = 0; s < OB_QK_K / 16; s++) {
            const float d = half(y[b].d) * y[b].scales[s];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = (int8_t)(iclamp(ob_nearest_int(x[16 * s + l] / d), -32, 31) + 32);
        }

        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *g = L + 128 * h + l; /* g[32k] is element 128h + 32k + l */
                y[b].ql[64 * h + l] = (uint8_t)((g[0] & 0x0f) | (g[64] & 0x0f) << 4);
                y[b].ql[64 * h + 32 + l] = (uint8_t)((g[32] & 0x0f) | (g[96] & 0x0f) << 4);
                y[b].qh[32 * h + l] =
                    (uint8_t)(g[0] >> 4 | (g[32] >> 4) << 2 | (g[64] >> 4) << 4 | (g[96] >> 4) << 6);
            }
    }
}

void ob_dequantize_row_q6_K(const void *src, float *dst, int64_t n) {
    const ob_block_q6_K *x = (const ob_block_q6_K *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int i = 0; i < OB_QK_K; i++) {
            const int h = i / 128, k = (i % 128) / 32, l = i % 32;
            const int low = (x[b].ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
            const int high = (x[b].qh[32 * h + l] >> (2 * k)) & 3;
            const int q = (low | high << 4) - 32;
            y[i] = d * x[b].scales[i / 16] * q;
        }
    }
}

/* Q8_K: d = max / -127 for the signed extreme (the code range stays
 * symmetric, -127..127), plus the 16-element code sums. */
void ob_quantize_row_q8_K_ref(const float *src, void *dst, int64_t n) {
    ob_block_q8_K *y = (ob_block_q8_K *)dst;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K;
        float amax;
        const float max = signed_absmax(x, OB_QK_K, &amax);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int i = 0; i < OB_QK_K; i++) y[b].qs[i] = (int8_t)imin(127, ob_nearest_int(iscale * x[i]));
        for (int g = 0; g < OB_QK_K / 16; g++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += y[b].qs[16 * g + i];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

void ob_dequantize_row_q8_K(const void *src, float *dst, int64_t n) {
    const ob_block_q8_K *x = (const ob_block_q8_K *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++)
        for (int i = 0; i < OB_QK_K; i++) dst[b * OB_QK_K + i] = x[b].d * x[b].qs[i];
}

/* ======================================================================
 * Ternary: d = amax, codes round(x / d) in {-1, 0, 1} stored as 0..2.
 * ====================================================================== */

/* Trit (0..2) of x at inverse scale id. */
static int trit(float x, float id) {
    return (int)lroundf(x * id) + 1;
}

/* Five (or four, then a 0 pad) base-3 digits -> the byte that stores them:
 * ceil(t * 256 / 243), so that digit n can be read back with integer
 * multiplies (see blocks.h). */
static uint8_t tq1_pack(int t) {
    return (uint8_t)((t * 256 + 242) / 243);
}

void ob_quantize_row_tq1_0_ref(const float *src, void *dst, int64_t n) {
    ob_block_tq1_0 *y = (ob_block_tq1_0 *)dst;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K;
        float amax;
        signed_absmax(x, OB_QK_K, &amax);
        const float d = amax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);

        for (int m = 0; m < 32; m++) { /* elements 0..159 */
            int t = 0;
            for (int k = 0; k < 5; k++) t = t * 3 + trit(x[m + 32 * k], id);
            y[b].qs[m] = tq1_pack(t);
        }
        for (int m = 0; m < 16; m++) { /* elements 160..239 */
            int t = 0;
            for (int k = 0; k < 5; k++) t = t * 3 + trit(x[160 + m + 16 * k], id);
            y[b].qs[32 + m] = tq1_pack(t);
        }
        for (int j = 0; j < 4; j++) { /* elements 240..255 */
            int t = 0;
            for (int k = 0; k < 4; k++) t = t * 3 + trit(x[240 + j + 4 * k], id);
            y[b].qh[j] = tq1_pack(t * 3);
        }
    }
}

/* Digit k (0 = most significant) of a TQ1_0 byte, as 0..2. */
static int tq1_digit(uint8_t byte, int k) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t shifted = (uint8_t)(byte * pow3[k]); /* mod 256 drops the digits above */
    return (shifted * 3) >> 8;
}

void ob_dequantize_row_tq1_0(const void *src, float *dst, int64_t n) {
    const ob_block_tq1_0 *x = (const ob_block_tq1_0 *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int k = 0; k < 5; k++)
            for (int m = 0; m < 32; m++) y[32 * k + m] = (float)(tq1_digit(x[b].qs[m], k) - 1) * d;
        for (int k = 0; k < 5; k++)
            for (int m = 0; m < 16; m++)
                y[160 + 16 * k + m] = (float)(tq1_digit(x[b].qs[32 + m], k) - 1) * d;
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 4; j++) y[240 + 4 * k + j] = (float)(tq1_digit(x[b].qh[j], k) - 1) * d;
    }
}

void ob_quantize_row_tq2_0_ref(const float *src, void *dst, int64_t n) {
    ob_block_tq2_0 *y = (ob_block_tq2_0 *)dst;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K;
        float amax;
        signed_absmax(x, OB_QK_K, &amax);
        const float d = amax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ob_fp32_to_fp16(d);
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 32; m++) {
                int q = 0;
                for (int k = 0; k < 4; k++) q |= (trit(x[128 * h + 32 * k + m], id) & 3) << (2 * k);
                y[b].qs[32 * h + m] = (uint8_t)q;
            }
    }
}

void ob_dequantize_row_tq2_0(const void *src, float *dst, int64_t n) {
    const ob_block_tq2_0 *x = (const ob_block_tq2_0 *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int i = 0; i < OB_QK_K; i++) {
            const int h = i / 128, k = (i % 128) / 32, m = i % 32;
            const int q = (x[b].qs[32 * h + m] >> (2 * k)) & 3;
            y[i] = (float)(q - 1) * d;
        }
    }
}
