/*
 * quant_weighted.c - importance-weighted quantizers (quant_weighted.h).
 *
 * Each 32-value block has one scale d and codes q_j from a level table. The
 * error minimised is sum_j w_j (x_j - d lv[q_j])^2 with
 * w_j = qw_j * sqrt(sigma2 + x_j^2): the imatrix weight times a term that
 * also favours the block's large values (sigma2 = the row's mean square, so
 * small values are not ignored). Candidate scales map the block's signed
 * extreme onto levels near the low end; for each, codes are the nearest
 * levels and d is refitted by weighted least squares; the best fit wins.
 * The K-quants do the same per sub-block (an asymmetric scale + min fit for
 * Q2_K/Q4_K/Q5_K, symmetric for Q3_K/Q6_K), then round the sub-block scales
 * to their 4/6/8-bit codes and recompute the codes with the stored scales.
 * Q4_1/Q5_1 use the asymmetric fit per block of 32 (offset of either sign);
 * IQ4_XS the level search per sub-block of 32, then 6-bit scales, each
 * also tried one code up and down against the weighted error.
 */
#include <math.h>
#include <string.h>

#include "blocks.h"
#include "iq_quant.h"
#include "iq_tables.h"
#include "quant_ref.h"
#include "quant_weighted.h"

#define QB 32

typedef struct levels {
    const int8_t *lv; /* ascending; NULL: the integers lo..hi */
    int lo, hi, n;
} levels;

static int nearest(const levels *L, float v) {
    if (!L->lv) {
        int q = ob_nearest_int(v);
        return q < L->lo ? 0 : q > L->hi ? L->hi - L->lo : q - L->lo;
    }
    const int8_t *lv = L->lv;
    if (v <= lv[0]) return 0;
    if (v >= lv[L->n - 1]) return L->n - 1;
    int lo = 0, hi = L->n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < lv[mid]) hi = mid;
        else lo = mid;
    }
    return v - lv[hi - 1] < lv[hi] - v ? hi - 1 : hi;
}

static float level(const levels *L, int i) { return L->lv ? (float)L->lv[i] : (float)(L->lo + i); }

/* Best scale for n values; codes (indices into the levels) into q. */
static float block_search(const levels *L, const float *x, const float *w, uint8_t *q, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < 1e-15f) {
        int z = nearest(L, 0.0f);
        for (int j = 0; j < n; j++) q[j] = (uint8_t)z;
        return 0.0f;
    }
    const float low = level(L, 0);
    float best_d = 0, best = -1;
    for (int t = -10; t <= 10; t++) {
        /* the extreme maps to low + t/10 of a level step (linear) or t steps of the table */
        float id = L->lv ? (low + (float)t) / max : (low + 0.1f * (float)t) / max;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < n; j++) {
            float l = level(L, nearest(L, id * x[j]));
            sumqx += w[j] * l * x[j];
            sumq2 += w[j] * l * l;
        }
        if (sumq2 > 0 && (best < 0 || sumqx * sumqx > best * sumq2)) {
            best_d = sumqx / sumq2;
            best = best_d * sumqx;
        }
    }
    float id = best_d != 0 ? 1.0f / best_d : 0.0f;
    for (int j = 0; j < n; j++) q[j] = (uint8_t)nearest(L, id * x[j]);
    return best_d;
}

static void block_weights(const float *x, const float *qw, float sigma2, float *w, int n) {
    for (int j = 0; j < n; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* ---- K-quants ---- */

/* Asymmetric fit of n values: x ~ a q - m, q in 0..nmax, a >= 0, m >= 0
 * (the block minimum, clamped to <= 0, maps near q = 0); with free_min the
 * offset may take either sign (Q4_1/Q5_1 store it as a signed half), so a
 * block of only positive values keeps all its codes. Candidate steps
 * spread the range over nmax +- 1 codes; each is refitted by weighted least
 * squares. Returns a; *m gets the min. */
static float asym_fit(const float *x, const float *w, int n, int nmax, bool free_min, float *m) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    if (lo > 0 && !free_min) lo = 0;
    *m = -lo;
    if (hi <= lo) return 0.0f;
    float best_a = (hi - lo) / (float)nmax, best_c = lo, best = -1;
    for (int t = -10; t <= 10; t++) {
        const float is = ((float)nmax + 0.1f * (float)t) / (hi - lo);
        double sw = 0, swq = 0, swq2 = 0, swx = 0, swqx = 0;
        for (int j = 0; j < n; j++) {
            int q = ob_nearest_int(is * (x[j] - lo));
            q = q < 0 ? 0 : q > nmax ? nmax : q;
            sw += w[j];
            swq += w[j] * q;
            swq2 += w[j] * (double)q * q;
            swx += w[j] * x[j];
            swqx += w[j] * q * x[j];
        }
        double D = sw * swq2 - swq * swq, a, c;
        if (D <= 0) continue;
        a = (sw * swqx - swq * swx) / D;
        c = (swq2 * swx - swq * swqx) / D;
        if (c > 0 && !free_min) { /* the min must be <= 0: fit the scale alone */
            c = 0;
            a = swq2 > 0 ? swqx / swq2 : 0;
        }
        if (a <= 0) continue;
        double err = 0;
        for (int j = 0; j < n; j++) {
            int q = ob_nearest_int((float)((x[j] - c) / a));
            q = q < 0 ? 0 : q > nmax ? nmax : q;
            double e = a * q + c - x[j];
            err += w[j] * e * e;
        }
        if (best < 0 || err < best) {
            best = err;
            best_a = (float)a;
            best_c = (float)c;
        }
    }
    *m = -best_c;
    return best_a;
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. Fills d, dmin,
 * the packed scales and codes L[256] (0..nmax). */
static void k4_weighted(const float *x, const float *qw, int nmax, ob_half *d_out, ob_half *dmin_out,
                        uint8_t *packed, uint8_t *L) {
    double s2 = 0;
    for (int j = 0; j < OB_QK_K; j++) s2 += (double)x[j] * x[j];
    const float sigma2 = (float)(2 * s2 / OB_QK_K);
    float a[8], m[8], w[32], max_a = 0, max_m = 0;
    for (int s = 0; s < 8; s++) {
        block_weights(x + 32 * s, qw + 32 * s, sigma2, w, 32);
        a[s] = asym_fit(x + 32 * s, w, 32, nmax, false, &m[s]);
        if (a[s] > max_a) max_a = a[s];
        if (m[s] > max_m) max_m = m[s];
    }
    const float d = max_a / 63, dmin = max_m / 63;
    uint8_t ls[8], lm[8];
    for (int s = 0; s < 8; s++) {
        int q = d > 0 ? ob_nearest_int(a[s] / d) : 0, r = dmin > 0 ? ob_nearest_int(m[s] / dmin) : 0;
        ls[s] = (uint8_t)(q < 0 ? 0 : q > 63 ? 63 : q);
        lm[s] = (uint8_t)(r < 0 ? 0 : r > 63 ? 63 : r);
    }
    for (int s = 0; s < 8; s++) {
        if (s < 4) {
            packed[s] = ls[s];
            packed[s + 4] = lm[s];
        } else {
            packed[s + 4] = (uint8_t)((ls[s] & 15) | (lm[s] & 15) << 4);
            packed[s - 4] |= (uint8_t)((ls[s] >> 4) << 6);
            packed[s] |= (uint8_t)((lm[s] >> 4) << 6);
        }
    }
    *d_out = ob_fp32_to_fp16(d);
    *dmin_out = ob_fp32_to_fp16(dmin);
    const float dh = ob_fp16_to_fp32(*d_out), mh = ob_fp16_to_fp32(*dmin_out);
    for (int s = 0; s < 8; s++) {
        const float dl = dh * ls[s], ml = mh * lm[s];
        for (int j = 0; j < 32; j++) {
            int q = dl > 0 ? ob_nearest_int((x[32 * s + j] + ml) / dl) : 0;
            L[32 * s + j] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}

static void q6_K_weighted(const float *x, const float *qw, ob_block_q6_K *y) {
    double s2 = 0;
    for (int j = 0; j < OB_QK_K; j++) s2 += (double)x[j] * x[j];
    const float sigma2 = (float)(s2 / OB_QK_K);
    const levels L6 = {NULL, -32, 31, 64};
    float sc[16], w[16], max_abs = 0, max_sc = 0;
    uint8_t q[16];
    for (int s = 0; s < 16; s++) {
        block_weights(x + 16 * s, qw + 16 * s, sigma2, w, 16);
        sc[s] = block_search(&L6, x + 16 * s, w, q, 16);
        if (fabsf(sc[s]) > max_abs) {
            max_abs = fabsf(sc[s]);
            max_sc = sc[s];
        }
    }
    memset(y, 0, sizeof *y);
    if (max_abs == 0) {
        for (int i = 0; i < OB_QK_K; i++) {
            const int h = i / 128, k = (i % 128) / 32, l = i % 32;
            y->ql[64 * h + 32 * (k & 1) + l] |= (uint8_t)(0 << (4 * (k >> 1)));
            y->qh[32 * h + l] |= (uint8_t)(2 << (2 * k)); /* code 32 = value 0 */
        }
        return;
    }
    const float iscale = -128.0f / max_sc;
    y->d = ob_fp32_to_fp16(1 / iscale);
    const float d = ob_fp16_to_fp32(y->d);
    for (int s = 0; s < 16; s++) {
        int l = ob_nearest_int(iscale * sc[s]);
        y->scales[s] = (int8_t)(l < -128 ? -128 : l > 127 ? 127 : l);
    }
    for (int i = 0; i < OB_QK_K; i++) {
        const float dl = d * y->scales[i / 16];
        int c = dl != 0 ? ob_nearest_int(x[i] / dl) : 0;
        c = (c < -32 ? -32 : c > 31 ? 31 : c) + 32;
        const int h = i / 128, k = (i % 128) / 32, l = i % 32;
        y->ql[64 * h + 32 * (k & 1) + l] |= (uint8_t)((c & 15) << (4 * (k >> 1)));
        y->qh[32 * h + l] |= (uint8_t)((c >> 4) << (2 * k));
    }
}

/* Q2_K/Q3_K's 2-bit planes: element 128h + 32k + l goes to bits 2k of qs[32h + l]. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *g = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(g[0] | g[32] << 2 | g[64] << 4 | g[96] << 6);
        }
}

/* Q2_K: 16 sub-blocks of 16, asymmetric 2-bit codes, 4-bit scales and mins. */
static void q2_K_weighted(const float *x, const float *qw, ob_block_q2_K *y) {
    double s2 = 0;
    for (int j = 0; j < OB_QK_K; j++) s2 += (double)x[j] * x[j];
    const float sigma2 = (float)(s2 / OB_QK_K);
    float a[16], m[16], w[16], max_a = 0, max_m = 0;
    for (int s = 0; s < 16; s++) {
        block_weights(x + 16 * s, qw + 16 * s, sigma2, w, 16);
        a[s] = asym_fit(x + 16 * s, w, 16, 3, false, &m[s]);
        if (a[s] > max_a) max_a = a[s];
        if (m[s] > max_m) max_m = m[s];
    }
    y->d = ob_fp32_to_fp16(max_a / 15);
    y->dmin = ob_fp32_to_fp16(max_m / 15);
    const float d = ob_fp16_to_fp32(y->d), dmin = ob_fp16_to_fp32(y->dmin);
    uint8_t L[OB_QK_K];
    for (int s = 0; s < 16; s++) {
        int sc = max_a > 0 ? ob_nearest_int(15 * a[s] / max_a) : 0, mn = max_m > 0 ? ob_nearest_int(15 * m[s] / max_m) : 0;
        sc = sc < 0 ? 0 : sc > 15 ? 15 : sc;
        mn = mn < 0 ? 0 : mn > 15 ? 15 : mn;
        y->scales[s] = (uint8_t)(sc | mn << 4);
        const float dl = d * sc, ml = dmin * mn;
        for (int j = 0; j < 16; j++) {
            int q = dl > 0 ? ob_nearest_int((x[16 * s + j] + ml) / dl) : 0;
            L[16 * s + j] = (uint8_t)(q < 0 ? 0 : q > 3 ? 3 : q);
        }
    }
    pack_2bit(L, y->qs);
}

/* Q3_K: 16 sub-blocks of 16, symmetric codes -4..3, 6-bit signed scales. */
static void q3_K_weighted(const float *x, const float *qw, ob_block_q3_K *y) {
    double s2 = 0;
    for (int j = 0; j < OB_QK_K; j++) s2 += (double)x[j] * x[j];
    const float sigma2 = (float)(2 * s2 / OB_QK_K);
    const levels L3 = {NULL, -4, 3, 8};
    float sc[16], w[16], max_abs = 0, max_sc = 0;
    uint8_t q[16];
    for (int s = 0; s < 16; s++) {
        block_weights(x + 16 * s, qw + 16 * s, sigma2, w, 16);
        sc[s] = block_search(&L3, x + 16 * s, w, q, 16);
        if (fabsf(sc[s]) > max_abs) {
            max_abs = fabsf(sc[s]);
            max_sc = sc[s];
        }
    }
    memset(y, 0, sizeof *y);
    int ls[16] = {0};
    if (max_abs > 0) {
        const float iscale = -32.0f / max_sc;
        for (int s = 0; s < 16; s++) {
            int l = ob_nearest_int(iscale * sc[s]);
            l = (l < -32 ? -32 : l > 31 ? 31 : l) + 32;
            ls[s] = l - 32;
            if (s < 8) y->scales[s] = (uint8_t)(l & 15);
            else y->scales[s - 8] |= (uint8_t)((l & 15) << 4);
            y->scales[8 + s % 4] |= (uint8_t)((l >> 4) << (2 * (s / 4)));
        }
        y->d = ob_fp32_to_fp16(1 / iscale);
    }
    const float d = ob_fp16_to_fp32(y->d);
    uint8_t low[OB_QK_K];
    for (int i = 0; i < OB_QK_K; i++) {
        const float dl = d * (float)ls[i / 16];
        int c = dl != 0 ? ob_nearest_int(x[i] / dl) : 0;
        c = (c < -4 ? -4 : c > 3 ? 3 : c) + 4;
        if (c > 3) y->hmask[i % 32] |= (uint8_t)(1u << (i / 32));
        low[i] = (uint8_t)(c & 3);
    }
    pack_2bit(low, y->qs);
}

/* ---- Q4_1 / Q5_1: x ~ d q + m per 32, codes 0..nmax ---- */

/* One block: the weighted asymmetric fit, then d and m rounded to half and
 * the codes chosen again against the stored values. */
static void q_1_weighted(const float *x, const float *w, int nmax, ob_half *d_out, ob_half *m_out, uint8_t *q) {
    float mneg;
    const float a = asym_fit(x, w, QB, nmax, true, &mneg);
    *d_out = ob_fp32_to_fp16(a);
    *m_out = ob_fp32_to_fp16(-mneg);
    const float d = ob_fp16_to_fp32(*d_out), m = ob_fp16_to_fp32(*m_out);
    for (int j = 0; j < QB; j++) {
        int c = d > 0 ? ob_nearest_int((x[j] - m) / d) : 0;
        q[j] = (uint8_t)(c < 0 ? 0 : c > nmax ? nmax : c);
    }
}

/* ---- IQ4_XS: 8 sub-blocks of 32 on the IQ4_NL levels, 6-bit scales ---- */

static void iq4_xs_weighted(const float *x, const float *qw, ob_block_iq4_xs *y) {
    double s2 = 0;
    for (int j = 0; j < OB_QK_K; j++) s2 += (double)x[j] * x[j];
    const float sigma2 = (float)(2 * s2 / OB_QK_K);
    const levels L4 = {ob_iq4nl_values, 0, 0, 16};
    float sc[8], w[OB_QK_K], max_abs = 0, max_sc = 0;
    uint8_t q[32];
    for (int s = 0; s < 8; s++) {
        block_weights(x + 32 * s, qw + 32 * s, sigma2, w + 32 * s, 32);
        float wsum = 0;
        for (int j = 0; j < 32; j++) wsum += w[32 * s + j];
        if (!(wsum > 0)) /* no importance at all here: weigh by magnitude alone */
            for (int j = 32 * s; j < 32 * s + 32; j++) w[j] = sqrtf(sigma2 + x[j] * x[j]);
        sc[s] = block_search(&L4, x + 32 * s, w + 32 * s, q, 32);
        if (fabsf(sc[s]) > max_abs) {
            max_abs = fabsf(sc[s]);
            max_sc = sc[s];
        }
    }
    memset(y, 0, sizeof *y);
    /* the sub-block scale of largest magnitude maps to ls - 32 = -32 (as the reference) */
    const float d = -max_sc / 32;
    y->d = ob_fp32_to_fp16(d);
    const float dh = ob_fp16_to_fp32(y->d), id = d != 0 ? 1 / d : 0;
    for (int s = 0; s < 8; s++) {
        int l = ob_nearest_int(id * sc[s]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        /* the codes against the stored scale: nearest level, then the
         * neighbouring scale codes are tried in the weighted error */
        const float *xs = x + 32 * s, *ws = w + 32 * s;
        float best = -1;
        int best_l = l;
        for (int dl = -1; dl <= 1; dl++) {
            const int lt = l + dl;
            if (lt < -32 || lt > 31) continue;
            const float sd = dh * (float)lt, isd = sd != 0 ? 1 / sd : 0;
            float err = 0;
            for (int j = 0; j < 32; j++) {
                const float e = xs[j] - sd * (float)ob_iq4nl_values[nearest(&L4, isd * xs[j])];
                err += ws[j] * e * e;
            }
            if (best < 0 || err < best) {
                best = err;
                best_l = lt;
            }
        }
        const float sd = dh * (float)best_l, isd = sd != 0 ? 1 / sd : 0;
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)nearest(&L4, isd * xs[j]);
        for (int j = 0; j < 16; j++) y->qs[16 * s + j] = (uint8_t)(q[j] | q[j + 16] << 4);
        const int lc = best_l + 32;
        y->scales_l[s / 2] |= (uint8_t)((lc & 15) << (4 * (s % 2)));
        y->scales_h |= (uint16_t)((lc >> 4) << (2 * s));
    }
}

bool ob_quantize_has_weighted(ob_type type) {
    return type == OB_TYPE_Q4_0 || type == OB_TYPE_Q5_0 || type == OB_TYPE_IQ4_NL || type == OB_TYPE_Q4_1 ||
           type == OB_TYPE_Q5_1 || type == OB_TYPE_IQ4_XS || type == OB_TYPE_Q2_K ||
           type == OB_TYPE_Q3_K || type == OB_TYPE_Q4_K || type == OB_TYPE_Q5_K || type == OB_TYPE_Q6_K ||
           ob_quantize_has_iq(type);
}

static void k_row(ob_type type, const float *src, void *dst, int64_t n, const float *qw) {
    uint8_t L[OB_QK_K];
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K, *w = qw + b * OB_QK_K;
        if (type == OB_TYPE_Q6_K) {
            q6_K_weighted(x, w, (ob_block_q6_K *)dst + b);
        } else if (type == OB_TYPE_Q3_K) {
            q3_K_weighted(x, w, (ob_block_q3_K *)dst + b);
        } else if (type == OB_TYPE_Q2_K) {
            q2_K_weighted(x, w, (ob_block_q2_K *)dst + b);
        } else if (type == OB_TYPE_Q4_K) {
            ob_block_q4_K *y = (ob_block_q4_K *)dst + b;
            memset(y->scales, 0, sizeof y->scales);
            k4_weighted(x, w, 15, &y->d, &y->dmin, y->scales, L);
            for (int s = 0; s < 8; s++)
                for (int l = 0; l < 32; l++)
                    y->qs[32 * (s / 2) + l] = (uint8_t)((s % 2 ? y->qs[32 * (s / 2) + l] & 15 : 0) |
                                                        L[32 * s + l] << (4 * (s % 2)));
        } else {
            ob_block_q5_K *y = (ob_block_q5_K *)dst + b;
            memset(y->scales, 0, sizeof y->scales);
            memset(y->qh, 0, sizeof y->qh);
            k4_weighted(x, w, 31, &y->d, &y->dmin, y->scales, L);
            for (int s = 0; s < 8; s++)
                for (int l = 0; l < 32; l++) {
                    const int q = L[32 * s + l];
                    y->qs[32 * (s / 2) + l] = (uint8_t)((s % 2 ? y->qs[32 * (s / 2) + l] & 15 : 0) |
                                                        (q & 15) << (4 * (s % 2)));
                    y->qh[l] |= (uint8_t)((q >> 4) << s);
                }
        }
    }
}

bool ob_quantize_row_weighted(ob_type type, const float *src, void *dst, int64_t n, const float *qw) {
    if (!ob_quantize_has_weighted(type)) return false;
    if (ob_quantize_has_iq(type)) return ob_quantize_row_iq(type, src, dst, n, qw);
    if (type == OB_TYPE_Q2_K || type == OB_TYPE_Q3_K || type == OB_TYPE_Q4_K || type == OB_TYPE_Q5_K ||
        type == OB_TYPE_Q6_K) {
        if (n % OB_QK_K) return false;
        k_row(type, src, dst, n, qw);
        return true;
    }
    if (type == OB_TYPE_IQ4_XS) {
        if (n % OB_QK_K) return false;
        for (int64_t b = 0; b < n / OB_QK_K; b++)
            iq4_xs_weighted(src + b * OB_QK_K, qw + b * OB_QK_K, (ob_block_iq4_xs *)dst + b);
        return true;
    }
    if (n % QB) return false;
    levels L = {0};
    if (type == OB_TYPE_Q4_0) L = (levels){NULL, -8, 7, 16};
    else if (type == OB_TYPE_Q5_0) L = (levels){NULL, -16, 15, 32};
    else L = (levels){ob_iq4nl_values, 0, 0, 16};
    double s2 = 0;
    for (int64_t j = 0; j < n; j++) s2 += (double)src[j] * src[j];
    const float sigma2 = (float)(s2 / (double)n);
    float w[QB];
    uint8_t q[QB];
    for (int64_t b = 0; b < n / QB; b++) {
        const float *x = src + b * QB;
        block_weights(x, qw + b * QB, sigma2, w, QB);
        if (type == OB_TYPE_Q4_1) {
            ob_block_q4_1 *y = (ob_block_q4_1 *)dst + b;
            q_1_weighted(x, w, 15, &y->d, &y->m, q);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
            continue;
        }
        if (type == OB_TYPE_Q5_1) {
            ob_block_q5_1 *y = (ob_block_q5_1 *)dst + b;
            q_1_weighted(x, w, 31, &y->d, &y->m, q);
            uint32_t qh = 0;
            for (int j = 0; j < 16; j++) {
                y->qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
                qh |= (uint32_t)(q[j] >> 4) << j;
                qh |= (uint32_t)(q[j + 16] >> 4) << (j + 16);
            }
            for (int k = 0; k < 4; k++) y->qh[k] = (uint8_t)(qh >> (8 * k));
            continue;
        }
        float d = block_search(&L, x, w, q, QB);
        if (type == OB_TYPE_Q4_0) {
            ob_block_q4_0 *y = (ob_block_q4_0 *)dst + b;
            y->d = ob_fp32_to_fp16(d);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
        } else if (type == OB_TYPE_Q5_0) {
            ob_block_q5_0 *y = (ob_block_q5_0 *)dst + b;
            y->d = ob_fp32_to_fp16(d);
            uint32_t qh = 0;
            for (int j = 0; j < 16; j++) {
                y->qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
                qh |= (uint32_t)(q[j] >> 4) << j;
                qh |= (uint32_t)(q[j + 16] >> 4) << (j + 16);
            }
            for (int k = 0; k < 4; k++) y->qh[k] = (uint8_t)(qh >> (8 * k));
        } else {
            ob_block_iq4_nl *y = (ob_block_iq4_nl *)dst + b;
            y->d = ob_fp32_to_fp16(d);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
        }
    }
    return true;
}
