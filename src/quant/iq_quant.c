/*
 * iq_quant.c - importance-weighted quantizers for the codebook IQ formats
 * (iq_quant.h). Owns the search; the block layouts, grids and dequantizers
 * are in blocks.h, iq_tables.c and iq_ref.c.
 *
 * The formats: a 256-value block has one fp16 d; each sub-block (32 values,
 * 16 for IQ2_XS/IQ2_S) a 4-bit scale ls, group scale s = d (a + b ls)
 * (iq_format); each run of 8 values its signs, as a 7-bit index with an
 * implied even parity (IQ2_XXS, IQ2_XS, IQ3_XXS) or a full byte (IQ2_S,
 * IQ3_S); magnitudes come from a grid of 8-value (IQ2) or 4-value (IQ3)
 * entries, each value one of a few byte levels ({8,25,43} for IQ2,
 * {4,12,..,62} for IQ3_XXS, {1,3,..,15} for IQ3_S). The grids hold only a
 * part of all level combinations (256..1024 of 3^8 or 8^4). IQ1_S/IQ1_M
 * differ (signed grid values -1/0/+1 plus a +-1/8 shift, 3-bit scales, no
 * signs) and have their own search below, built from the same parts.
 *
 * The search minimises sum_j w_j (x_j - y_j)^2, w_j = qw_j sqrt(sigma2 +
 * x_j^2) (the imatrix weight times a term favouring the block's large values,
 * as the weighted K-quants in quant_weighted.c do).
 *   1. Signs: each run of 8 takes the signs of x; when the count of
 *      negatives is odd, the value with the least w x^2 takes the wrong sign
 *      and its target magnitude becomes -|x| (so the fit sees the true cost).
 *   2. Per sub-block, a scan over candidate scales that map the largest
 *      magnitude near the top level. For a scale, each chunk (8 or 4 values)
 *      rounds every value to its nearest level; if that combination is a grid
 *      entry it is taken, otherwise the best (weighted) of a precomputed list
 *      of the grid entries nearest to that combination. The scale is then
 *      refitted by weighted least squares; the best fit wins and is refined
 *      by alternating code choice and refit until the codes settle.
 *   3. d maps the largest group scale to ls = 15; each group's scale is
 *      rounded to its 4-bit code and its chunks are chosen again against the
 *      stored (rounded) scale.
 * The neighbour lists ("the grid entries nearest to each off-grid level
 * combination") are built once per grid on first use (pthread_once).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "blocks.h"
#include "iq_quant.h"
#include "iq_tables.h"
#include "quant_ref.h"

#define GROUP 32
#define MAX_KEYS 6561 /* 3^8: the most level combinations of any grid here */
#define MAX_DIM 8
#define N_NEIGHBOURS 24 /* grid entries kept per off-grid combination */

typedef struct codebook {
    int dim;       /* values per grid entry */
    int n_entries; /* grid size */
    int n_levels;  /* distinct magnitudes */
    float lv[8];   /* the magnitudes (grid bytes), ascending */
    float thr[8];  /* thr[l] = 0.5 (lv[l] + lv[l + 1]): a value above it rounds past level l */
    int n_keys;    /* n_levels^dim */
    float val[2048][MAX_DIM];               /* [n_entries][dim] grid as floats */
    int16_t key_index[MAX_KEYS];            /* [n_keys] grid entry of a combination, or -1 */
    uint16_t nb[MAX_KEYS][N_NEIGHBOURS];    /* [n_keys] nearest entries of an off-grid combination */
} codebook;

static uint8_t entry_byte(const codebook *cb, int e, int j, const void *grid) {
    return cb->dim == 8 ? ob_grid_byte(((const uint64_t *)grid)[e], j) : ob_grid_byte(((const uint32_t *)grid)[e], j);
}

/* Fill cb from a grid whose byte values are exactly levels[0..n_levels-1]
 * (ascending as numbers; IQ1's bytes are signed: 0xff = -1). */
static void codebook_build(codebook *cb, const void *grid, int n_entries, int dim, const uint8_t *levels,
                           int n_levels) {
    const bool sgn = levels[0] > levels[n_levels - 1];
#define LV(b) (sgn ? (float)(int8_t)(b) : (float)(b))
    cb->dim = dim;
    cb->n_entries = n_entries;
    cb->n_levels = n_levels;
    cb->n_keys = 1;
    for (int j = 0; j < dim; j++) cb->n_keys *= n_levels;
    for (int l = 0; l < n_levels; l++) cb->lv[l] = LV(levels[l]);
    for (int l = 0; l + 1 < n_levels; l++) cb->thr[l] = 0.5f * (cb->lv[l] + cb->lv[l + 1]);
    for (int k = 0; k < cb->n_keys; k++) cb->key_index[k] = -1;
    for (int e = 0; e < n_entries; e++) {
        int key = 0, mul = 1;
        for (int j = 0; j < dim; j++) {
            const uint8_t b = entry_byte(cb, e, j, grid);
            int l = 0;
            while (l < n_levels - 1 && levels[l] != b) l++;
            cb->val[e][j] = LV(b);
            key += l * mul;
            mul *= n_levels;
        }
        cb->key_index[key] = (int16_t)e;
    }
    /* For each off-grid combination, the N_NEIGHBOURS entries nearest to it
     * (squared distance in byte units), kept sorted by an insertion pass. */
    for (int k = 0; k < cb->n_keys; k++) {
        if (cb->key_index[k] >= 0) continue;
        float p[MAX_DIM];
        for (int j = 0, r = k; j < dim; j++, r /= n_levels) p[j] = LV(levels[r % n_levels]);
        float best_d[N_NEIGHBOURS];
        int cnt = 0;
        for (int e = 0; e < n_entries; e++) {
            float dist = 0;
            for (int j = 0; j < dim; j++) dist += (p[j] - cb->val[e][j]) * (p[j] - cb->val[e][j]);
            if (cnt == N_NEIGHBOURS && dist >= best_d[cnt - 1]) continue;
            int i = cnt < N_NEIGHBOURS ? cnt++ : cnt - 1;
            while (i > 0 && best_d[i - 1] > dist) {
                best_d[i] = best_d[i - 1];
                cb->nb[k][i] = cb->nb[k][i - 1];
                i--;
            }
            best_d[i] = dist;
            cb->nb[k][i] = (uint16_t)e;
        }
    }
}

#undef LV

static codebook g_iq2xxs, g_iq2xs, g_iq2s, g_iq3xxs, g_iq3s, g_iq1s;
static pthread_once_t g_once[6] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                   PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
static const uint8_t g_iq2_levels[3] = {8, 25, 43};
static const uint8_t g_iq3xxs_levels[8] = {4, 12, 20, 28, 36, 44, 52, 62};
static const uint8_t g_iq3s_levels[8] = {1, 3, 5, 7, 9, 11, 13, 15};
static const uint8_t g_iq1_levels[3] = {0xff, 0x00, 0x01}; /* -1, 0, +1 */

static void build_iq2xxs(void) { codebook_build(&g_iq2xxs, ob_iq2xxs_grid, OB_IQ2XXS_GRID_SIZE, 8, g_iq2_levels, 3); }
static void build_iq2xs(void) { codebook_build(&g_iq2xs, ob_iq2xs_grid, OB_IQ2XS_GRID_SIZE, 8, g_iq2_levels, 3); }
static void build_iq2s(void) { codebook_build(&g_iq2s, ob_iq2s_grid, OB_IQ2S_GRID_SIZE, 8, g_iq2_levels, 3); }
static void build_iq3xxs(void) {
    codebook_build(&g_iq3xxs, ob_iq3xxs_grid, OB_IQ3XXS_GRID_SIZE, 4, g_iq3xxs_levels, 8);
}
static void build_iq3s(void) { codebook_build(&g_iq3s, ob_iq3s_grid, OB_IQ3S_GRID_SIZE, 4, g_iq3s_levels, 8); }
static void build_iq1s(void) { codebook_build(&g_iq1s, ob_iq1s_grid, OB_IQ1S_GRID_SIZE, 8, g_iq1_levels, 3); }

/* What differs between the formats: the grid, the sub-block that shares a
 * 4-bit scale ls (group scale s = d (a + b ls)), and whether signs come as a
 * 7-bit index with implied parity or as a full byte. */
typedef struct iq_format {
    ob_type type;
    codebook *cb;
    pthread_once_t *once;
    void (*build)(void);
    int sub;     /* values per scale: 32 or 16 */
    bool parity; /* 7-bit sign index (even count of negatives) */
    float a, b;  /* s = d (a + b ls) */
    int n_tries; /* candidate scales: 2 n_tries + 1 */
} iq_format;

/* IQ3's finer levels get a wider scan of scales (+-10% of the top level). */
static const iq_format g_formats[] = {
    {OB_TYPE_IQ2_XXS, &g_iq2xxs, &g_once[0], build_iq2xxs, 32, true, 0.125f, 0.25f, 9},
    {OB_TYPE_IQ2_XS, &g_iq2xs, &g_once[1], build_iq2xs, 16, true, 0.125f, 0.25f, 9},
    {OB_TYPE_IQ2_S, &g_iq2s, &g_once[2], build_iq2s, 16, false, 0.125f, 0.25f, 9},
    {OB_TYPE_IQ3_XXS, &g_iq3xxs, &g_once[3], build_iq3xxs, 32, true, 0.25f, 0.5f, 15},
    {OB_TYPE_IQ3_S, &g_iq3s, &g_once[4], build_iq3s, 32, false, 1.0f, 2.0f, 15},
    /* IQ1: signed grid values plus a shift of +-1/8; 3-bit ls, s = d (1 + 2 ls) */
    {OB_TYPE_IQ1_S, &g_iq1s, &g_once[5], build_iq1s, 32, false, 1.0f, 2.0f, 11},
    {OB_TYPE_IQ1_M, &g_iq1s, &g_once[5], build_iq1s, 16, false, 1.0f, 2.0f, 11},
};

static const iq_format *format_of(ob_type type) {
    for (size_t i = 0; i < sizeof g_formats / sizeof g_formats[0]; i++)
        if (g_formats[i].type == type) return &g_formats[i];
    return NULL;
}

/* The search's part of chunk_best, for the two shapes there are (IQ2/IQ1:
 * 8 values of 3 levels; IQ3: 4 of 8) so that the loops unroll: the level of
 * each value (the count of thresholds below it - the thresholds increase,
 * so this is the first level whose upper threshold it does not pass,
 * without a data-dependent branch per level), then the combination's grid
 * entry, or the best of its neighbours by weighted error. */
static inline __attribute__((always_inline)) int chunk_nearest(const codebook *cb, const float *u, const float *w,
                                                               const int dim, const int n_levels) {
    int key = 0, mul = 1;
    for (int j = 0; j < dim; j++) {
        int l = 0;
        for (int k = 0; k < n_levels - 1; k++) l += u[j] > cb->thr[k];
        key += l * mul;
        mul *= n_levels;
    }
    if (cb->key_index[key] >= 0) return cb->key_index[key];
    const uint16_t *nb = cb->nb[key];
    float errs[N_NEIGHBOURS];
#if defined(__SSE2__)
    /* four neighbours per vector: their rows transposed so lane i holds
     * neighbour i's value j; each lane computes the scalar loop's
     * err = ((0 + w0 d0 d0) + w1 d1 d1) + ... with the same roundings, in
     * the same order (no fused multiply-add), so the result is identical */
    for (int i = 0; i < N_NEIGHBOURS; i += 4) {
        __m128 err = _mm_setzero_ps();
        for (int h = 0; h < dim; h += 4) {
            __m128 v0 = _mm_loadu_ps(cb->val[nb[i]] + h), v1 = _mm_loadu_ps(cb->val[nb[i + 1]] + h);
            __m128 v2 = _mm_loadu_ps(cb->val[nb[i + 2]] + h), v3 = _mm_loadu_ps(cb->val[nb[i + 3]] + h);
            _MM_TRANSPOSE4_PS(v0, v1, v2, v3);
            const __m128 vj[4] = {v0, v1, v2, v3};
            for (int j = 0; j < 4; j++) {
                const __m128 d = _mm_sub_ps(_mm_set1_ps(u[h + j]), vj[j]);
                err = _mm_add_ps(err, _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(w[h + j]), d), d));
            }
        }
        _mm_storeu_ps(errs + i, err);
    }
    /* The first neighbour of least error, as the scalar scan below picks it,
     * without its hard-to-predict branch per neighbour: the minimum, then the
     * first error equal to it (+-0 compare equal, as they do in the scan).
     * NaN errors would make the vector minimum depend on lane order: then
     * (and for no finite error at all) the scan decides. */
    __m128 m = _mm_loadu_ps(errs), nan = _mm_cmpunord_ps(m, m);
    for (int i = 4; i < N_NEIGHBOURS; i += 4) {
        const __m128 e = _mm_loadu_ps(errs + i);
        m = _mm_min_ps(m, e);
        nan = _mm_or_ps(nan, _mm_cmpunord_ps(e, e));
    }
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    if (!_mm_movemask_ps(nan) && _mm_cvtss_f32(m) < INFINITY)
        for (int i = 0; i < N_NEIGHBOURS; i += 4) {
            const int hit = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(errs + i), m));
            if (hit) return nb[i + __builtin_ctz((unsigned)hit)];
        }
#else
    for (int i = 0; i < N_NEIGHBOURS; i++) {
        float err = 0;
        for (int j = 0; j < dim; j++) err += w[j] * (u[j] - cb->val[nb[i]][j]) * (u[j] - cb->val[nb[i]][j]);
        errs[i] = err;
    }
#endif
    int best = 0;
    float best_err = INFINITY;
    for (int i = 0; i < N_NEIGHBOURS; i++)
        if (errs[i] < best_err) {
            best_err = errs[i];
            best = nb[i];
        }
    return best;
}

/* Best grid entry for the chunk targets u[dim] (already divided by the
 * scale). simple: the plain nearest-grid-point quantizer the tests compare
 * against (the whole grid searched, unweighted). */
static int chunk_best(const codebook *cb, const float *u, const float *w, bool simple) {
    const int dim = cb->dim;
    int best = 0;
    float best_err = INFINITY;
    if (simple) {
        for (int e = 0; e < cb->n_entries; e++) {
            float err = 0;
            for (int j = 0; j < dim; j++) err += (u[j] - cb->val[e][j]) * (u[j] - cb->val[e][j]);
            if (err < best_err) {
                best_err = err;
                best = e;
            }
        }
        return best;
    }
    return dim == 8 ? chunk_nearest(cb, u, w, 8, 3) : chunk_nearest(cb, u, w, 4, 8);
}

/* Codes for the n targets t at inverse scale id; returns the weighted
 * sums sum w g t and sum w g^2 of the chosen entries g. */
static void group_assign(const codebook *cb, const float *t, const float *w, int n, float id, bool simple,
                         uint16_t *codes, float *sumqx, float *sumq2) {
    float sx = 0, s2 = 0, u[MAX_DIM];
    for (int c = 0; c < n / cb->dim; c++) {
        const float *tc = t + c * cb->dim, *wc = w + c * cb->dim;
        for (int j = 0; j < cb->dim; j++) u[j] = id * tc[j];
        const int e = chunk_best(cb, u, wc, simple);
        codes[c] = (uint16_t)e;
        for (int j = 0; j < cb->dim; j++) {
            sx += wc[j] * cb->val[e][j] * tc[j];
            s2 += wc[j] * cb->val[e][j] * cb->val[e][j];
        }
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* Group scale (>= 0) and codes for the n targets t (magnitudes, signed
 * where a parity flip made the sign wrong) with weights w. */
static float group_search(const codebook *cb, const float *t, const float *w, int n, int n_tries, bool simple,
                          uint16_t *codes) {
    const size_t n_codes = (size_t)(n / cb->dim);
    float amax = 0;
    for (int j = 0; j < n; j++)
        if (t[j] > amax) amax = t[j];
    memset(codes, 0, n_codes * sizeof *codes);
    if (amax < 1e-30f) return 0.0f;
    const float top = cb->lv[cb->n_levels - 1], unit = cb->lv[0];
    float sx, s2;
    if (simple) {
        group_assign(cb, t, w, n, top / amax, true, codes, &sx, &s2);
        return amax / top;
    }
    uint16_t trial[GROUP];
    float best_scale = 0, best_score = 0;
    for (int is = -n_tries; is <= n_tries; is++) {
        const float id = (top + 0.1f * (float)is * unit) / amax;
        group_assign(cb, t, w, n, id, false, trial, &sx, &s2);
        if (s2 > 0 && sx > 0 && sx * sx > best_score * s2) {
            best_scale = sx / s2;
            best_score = sx * best_scale;
            memcpy(codes, trial, n_codes * sizeof *codes);
        }
    }
    for (int it = 0; it < 5 && best_scale > 0; it++) {
        group_assign(cb, t, w, n, 1.0f / best_scale, false, trial, &sx, &s2);
        if (!(s2 > 0 && sx > 0 && sx * sx > best_score * s2)) break;
        const bool same = !memcmp(codes, trial, n_codes * sizeof *codes);
        best_scale = sx / s2;
        best_score = sx * best_scale;
        memcpy(codes, trial, n_codes * sizeof *codes);
        if (same) break;
    }
    return best_scale;
}

/* One 256-value block: fills d, ls[256 / f->sub], signs[32] (bit j = value
 * 8i + j stored negative; with parity, bit 7 is implied by bits 0..6) and
 * codes[256 / dim] (grid entry of each chunk, in order). */
static void block_quantize(const iq_format *f, const float *x, const float *qw, float sigma2, bool simple,
                           uint16_t *d_out, uint8_t *ls, uint8_t *signs, uint16_t *codes) {
    const codebook *cb = f->cb;
    const int n_sub = OB_QK_K / f->sub, per_sub = f->sub / cb->dim;
    float t[OB_QK_K], w[OB_QK_K], scale[OB_QK_K / 16];
    for (int j = 0; j < OB_QK_K; j++) {
        w[j] = (qw ? qw[j] : 1.0f) * sqrtf(sigma2 + x[j] * x[j]);
        t[j] = fabsf(x[j]);
    }
    for (int g = 0; g < OB_QK_K / GROUP; g++) {
        float wsum = 0;
        for (int j = 0; j < GROUP; j++) wsum += w[GROUP * g + j];
        if (!(wsum > 0)) /* no importance at all here: weigh by magnitude alone */
            for (int j = GROUP * g; j < GROUP * (g + 1); j++) w[j] = sqrtf(sigma2 + x[j] * x[j]);
    }
    for (int i = 0; i < OB_QK_K / 8; i++) {
        const int o8 = 8 * i;
        int mask = 0, n_neg = 0;
        for (int j = 0; j < 8; j++)
            if (x[o8 + j] < 0) {
                mask |= 1 << j;
                n_neg++;
            }
        if (f->parity && (n_neg & 1)) {
            int jmin = 0;
            float emin = INFINITY;
            for (int j = 0; j < 8; j++) {
                const float e = w[o8 + j] * x[o8 + j] * x[o8 + j];
                if (e < emin) {
                    emin = e;
                    jmin = j;
                }
            }
            mask ^= 1 << jmin;
            t[o8 + jmin] = -t[o8 + jmin];
        }
        signs[i] = (uint8_t)mask;
    }
    for (int g = 0; g < n_sub; g++)
        scale[g] = group_search(cb, t + f->sub * g, w + f->sub * g, f->sub, f->n_tries, simple, codes + per_sub * g);
    float max_s = 0;
    for (int g = 0; g < n_sub; g++)
        if (scale[g] > max_s) max_s = scale[g];
    *d_out = ob_fp32_to_fp16(max_s / (f->a + 15.0f * f->b));
    const float d = ob_fp16_to_fp32(*d_out);
    for (int g = 0; g < n_sub; g++) {
        if (!(d > 0)) {
            ls[g] = 0;
            memset(codes + per_sub * g, 0, (size_t)per_sub * sizeof *codes);
            continue;
        }
        int l = ob_nearest_int((scale[g] / d - f->a) / f->b);
        l = l < 0 ? 0 : l > 15 ? 15 : l;
        ls[g] = (uint8_t)l;
        if (simple || scale[g] == 0) continue;
        /* the codes again, against the scale as stored */
        float sx, s2;
        group_assign(cb, t + f->sub * g, w + f->sub * g, f->sub, 1.0f / (d * (f->a + f->b * (float)l)), false,
                     codes + per_sub * g, &sx, &s2);
    }
}

/* ---- IQ1: signed grid values (-1, 0, +1) plus a shift of +-1/8 ---- */

#define IQ1_DELTA 0.125f

/* Codes and shift flags (neg[c] = 1: shift -1/8) for the n values x at
 * inverse scale id. mode 0 / 1: every chunk takes shift +1/8 / -1/8 (IQ1_S,
 * one flag per group); mode 2: each chunk its better shift (IQ1_M). */
static void iq1_assign(const codebook *cb, const float *x, const float *w, int n, float id, int mode, bool simple,
                       uint16_t *codes, uint8_t *neg, float *sumqx, float *sumq2) {
    float sx = 0, s2 = 0, u[8];
    const int m0 = mode == 2 ? 0 : mode, m1 = mode == 2 ? 1 : mode;
    for (int c = 0; c < n / 8; c++) {
        const float *xc = x + 8 * c, *wc = w + 8 * c;
        int best_e = 0, best_m = m0;
        float best_err = INFINITY;
        for (int m = m0; m <= m1; m++) {
            const float dl = m ? -IQ1_DELTA : IQ1_DELTA;
            for (int j = 0; j < 8; j++) u[j] = id * xc[j] - dl;
            const int e = chunk_best(cb, u, wc, simple);
            float err = 0;
            for (int j = 0; j < 8; j++) err += wc[j] * (u[j] - cb->val[e][j]) * (u[j] - cb->val[e][j]);
            if (err < best_err) {
                best_err = err;
                best_e = e;
                best_m = m;
            }
        }
        codes[c] = (uint16_t)best_e;
        neg[c] = (uint8_t)best_m;
        const float dl = best_m ? -IQ1_DELTA : IQ1_DELTA;
        for (int j = 0; j < 8; j++) {
            const float q = cb->val[best_e][j] + dl;
            sx += wc[j] * q * xc[j];
            s2 += wc[j] * q * q;
        }
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* Scale (>= 0), codes, shift flags and the shift mode used, for n values.
 * Ternary-like levels fit best with the largest value well above the top
 * level (a gaussian's optimum maps it to about 2), so the candidate scales
 * put it between 0.8 and 0.8 + 0.2 n_tries levels. */
static float iq1_search(const codebook *cb, const float *x, const float *w, int n, bool per_chunk, int n_tries,
                        bool simple, uint16_t *codes, uint8_t *neg, int *mode_out) {
    float amax = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    memset(codes, 0, (size_t)(n / 8) * sizeof *codes);
    memset(neg, 0, (size_t)(n / 8));
    *mode_out = per_chunk ? 2 : 0;
    if (amax < 1e-30f) return 0.0f;
    float sx, s2;
    if (simple) {
        iq1_assign(cb, x, w, n, (1 + IQ1_DELTA) / amax, *mode_out, true, codes, neg, &sx, &s2);
        return amax / (1 + IQ1_DELTA);
    }
    uint16_t tc[GROUP / 8];
    uint8_t tn[GROUP / 8];
    float best_scale = 0, best_score = 0;
    int best_mode = *mode_out;
    for (int mode = per_chunk ? 2 : 0; mode <= (per_chunk ? 2 : 1); mode++)
        for (int is = 0; is <= 2 * n_tries; is++) {
            const float id = (0.8f + 0.1f * (float)is) / amax;
            iq1_assign(cb, x, w, n, id, mode, false, tc, tn, &sx, &s2);
            if (s2 > 0 && sx > 0 && sx * sx > best_score * s2) {
                best_scale = sx / s2;
                best_score = sx * best_scale;
                best_mode = mode;
                memcpy(codes, tc, (size_t)(n / 8) * sizeof *codes);
                memcpy(neg, tn, (size_t)(n / 8));
            }
        }
    for (int it = 0; it < 5 && best_scale > 0; it++) {
        iq1_assign(cb, x, w, n, 1.0f / best_scale, best_mode, false, tc, tn, &sx, &s2);
        if (!(s2 > 0 && sx > 0 && sx * sx > best_score * s2)) break;
        const bool same = !memcmp(codes, tc, (size_t)(n / 8) * sizeof *codes) && !memcmp(neg, tn, (size_t)(n / 8));
        best_scale = sx / s2;
        best_score = sx * best_scale;
        memcpy(codes, tc, (size_t)(n / 8) * sizeof *codes);
        memcpy(neg, tn, (size_t)(n / 8));
        if (same) break;
    }
    *mode_out = best_mode;
    return best_scale;
}

/* One IQ1 block: d, 3-bit ls per sub-block, codes[32] and neg[32] per run of 8. */
static void iq1_block_quantize(const iq_format *f, const float *x, const float *qw, float sigma2, bool simple,
                               uint16_t *d_out, uint8_t *ls, uint8_t *neg, uint16_t *codes) {
    const codebook *cb = f->cb;
    const int n_sub = OB_QK_K / f->sub, per_sub = f->sub / 8;
    float w[OB_QK_K], scale[OB_QK_K / 16];
    int mode[OB_QK_K / 16];
    for (int j = 0; j < OB_QK_K; j++) w[j] = (qw ? qw[j] : 1.0f) * sqrtf(sigma2 + x[j] * x[j]);
    for (int g = 0; g < OB_QK_K / GROUP; g++) {
        float wsum = 0;
        for (int j = 0; j < GROUP; j++) wsum += w[GROUP * g + j];
        if (!(wsum > 0))
            for (int j = GROUP * g; j < GROUP * (g + 1); j++) w[j] = sqrtf(sigma2 + x[j] * x[j]);
    }
    for (int g = 0; g < n_sub; g++)
        scale[g] = iq1_search(cb, x + f->sub * g, w + f->sub * g, f->sub, f->type == OB_TYPE_IQ1_M, f->n_tries, simple,
                              codes + per_sub * g, neg + per_sub * g, &mode[g]);
    float max_s = 0;
    for (int g = 0; g < n_sub; g++)
        if (scale[g] > max_s) max_s = scale[g];
    *d_out = ob_fp32_to_fp16(max_s / (f->a + 7.0f * f->b));
    const float d = ob_fp16_to_fp32(*d_out);
    for (int g = 0; g < n_sub; g++) {
        if (!(d > 0)) {
            ls[g] = 0;
            continue;
        }
        int l = ob_nearest_int((scale[g] / d - f->a) / f->b);
        l = l < 0 ? 0 : l > 7 ? 7 : l;
        ls[g] = (uint8_t)l;
        if (simple || scale[g] == 0) continue;
        float sx, s2;
        iq1_assign(cb, x + f->sub * g, w + f->sub * g, f->sub, 1.0f / (d * (f->a + f->b * (float)l)), mode[g], false,
                   codes + per_sub * g, neg + per_sub * g, &sx, &s2);
    }
}

static void iq1_pack(ob_type type, void *dst, uint16_t d, const uint8_t *ls, const uint8_t *neg,
                     const uint16_t *codes) {
    if (type == OB_TYPE_IQ1_S) {
        ob_block_iq1_s *y = dst;
        y->d = d;
        for (int g = 0; g < 8; g++) {
            uint16_t h = (uint16_t)(ls[g] << 12 | neg[4 * g] << 15);
            for (int k = 0; k < 4; k++) {
                y->qs[4 * g + k] = (uint8_t)codes[4 * g + k];
                h |= (uint16_t)((codes[4 * g + k] >> 8) << (3 * k));
            }
            y->qh[g] = h;
        }
        return;
    }
    ob_block_iq1_m *y = dst;
    uint16_t w[4] = {0, 0, 0, 0};
    for (int i = 0; i < 32; i++) {
        y->qs[i] = (uint8_t)codes[i];
        const int nib = (codes[i] >> 8) | neg[i] << 3;
        if (i % 2 == 0) y->qh[i / 2] = (uint8_t)nib;
        else y->qh[i / 2] |= (uint8_t)(nib << 4);
    }
    for (int s = 0; s < 16; s++) w[s / 4] |= (uint16_t)(ls[s] << (3 * (s % 4)));
    for (int i = 0; i < 4; i++) {
        w[i] |= (uint16_t)(((d >> (4 * i)) & 15) << 12);
        y->scales[2 * i] = (uint8_t)w[i];
        y->scales[2 * i + 1] = (uint8_t)(w[i] >> 8);
    }
}

static float row_sigma2(const float *x, int64_t n) {
    double s2 = 0;
    for (int64_t j = 0; j < n; j++) s2 += (double)x[j] * x[j];
    return (float)(2.0 * s2 / (double)n);
}

/* Pack one block's fields into the type's layout (blocks.h). */
static void block_pack(ob_type type, void *dst, uint16_t d, const uint8_t *ls, const uint8_t *signs,
                       const uint16_t *codes) {
    if (type == OB_TYPE_IQ2_XXS) {
        ob_block_iq2_xxs *y = dst;
        y->d = d;
        for (int g = 0; g < 8; g++) {
            uint32_t idx = 0, meta = (uint32_t)ls[g] << 28;
            for (int k = 0; k < 4; k++) {
                idx |= (uint32_t)codes[4 * g + k] << (8 * k);
                meta |= (uint32_t)(signs[4 * g + k] & 127) << (7 * k);
            }
            y->qs[4 * g] = (uint16_t)idx;
            y->qs[4 * g + 1] = (uint16_t)(idx >> 16);
            y->qs[4 * g + 2] = (uint16_t)meta;
            y->qs[4 * g + 3] = (uint16_t)(meta >> 16);
        }
    } else if (type == OB_TYPE_IQ2_XS) {
        ob_block_iq2_xs *y = dst;
        y->d = d;
        for (int i = 0; i < 32; i++) y->qs[i] = (uint16_t)(codes[i] | (signs[i] & 127) << 9);
        for (int g = 0; g < 8; g++) y->scales[g] = (uint8_t)(ls[2 * g] | ls[2 * g + 1] << 4);
    } else if (type == OB_TYPE_IQ2_S) {
        ob_block_iq2_s *y = dst;
        y->d = d;
        memset(y->qh, 0, sizeof y->qh);
        for (int i = 0; i < 32; i++) {
            y->qs[i] = (uint8_t)codes[i];
            y->qh[i / 4] |= (uint8_t)((codes[i] >> 8) << (2 * (i % 4)));
            y->qs[32 + i] = signs[i];
        }
        for (int g = 0; g < 8; g++) y->scales[g] = (uint8_t)(ls[2 * g] | ls[2 * g + 1] << 4);
    } else if (type == OB_TYPE_IQ3_XXS) {
        ob_block_iq3_xxs *y = dst;
        y->d = d;
        for (int g = 0; g < 8; g++) {
            uint32_t meta = (uint32_t)ls[g] << 28;
            for (int k = 0; k < 4; k++) meta |= (uint32_t)(signs[4 * g + k] & 127) << (7 * k);
            for (int c = 0; c < 8; c++) y->qs[8 * g + c] = (uint8_t)codes[8 * g + c];
            for (int i = 0; i < 4; i++) y->qs[OB_QK_K / 4 + 4 * g + i] = (uint8_t)(meta >> (8 * i));
        }
    } else { /* IQ3_S */
        ob_block_iq3_s *y = dst;
        y->d = d;
        memset(y->qh, 0, sizeof y->qh);
        for (int i = 0; i < 64; i++) {
            y->qs[i] = (uint8_t)codes[i];
            y->qh[i / 8] |= (uint8_t)((codes[i] >> 8) << (i % 8));
        }
        memcpy(y->signs, signs, sizeof y->signs);
        for (int g = 0; g < 4; g++) y->scales[g] = (uint8_t)(ls[2 * g] | ls[2 * g + 1] << 4);
    }
}

static bool row_quantize(ob_type type, const float *x, void *dst, int64_t n, const float *qw, bool simple) {
    const iq_format *f = format_of(type);
    if (!f || n % OB_QK_K) return false;
    pthread_once(f->once, f->build);
    const float sigma2 = row_sigma2(x, n);
    const size_t bsz = ob_type_get((int)type)->type_size;
    uint8_t ls[OB_QK_K / 16], signs[OB_QK_K / 8];
    uint16_t codes[OB_QK_K / 4], d;
    const bool iq1 = type == OB_TYPE_IQ1_S || type == OB_TYPE_IQ1_M;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *qb = qw ? qw + b * OB_QK_K : NULL;
        void *y = (char *)dst + (size_t)b * bsz;
        if (iq1) { /* signs[] holds the shift flags here */
            iq1_block_quantize(f, x + b * OB_QK_K, qb, sigma2, simple, &d, ls, signs, codes);
            iq1_pack(type, y, d, ls, signs, codes);
        } else {
            block_quantize(f, x + b * OB_QK_K, qb, sigma2, simple, &d, ls, signs, codes);
            block_pack(type, y, d, ls, signs, codes);
        }
    }
    return true;
}

bool ob_quantize_has_iq(ob_type type) { return format_of(type) != NULL; }

bool ob_quantize_row_iq(ob_type type, const float *x, void *dst, int64_t n, const float *qw) {
    return row_quantize(type, x, dst, n, qw, false);
}

bool ob_quantize_row_iq_simple(ob_type type, const float *x, void *dst, int64_t n) {
    return row_quantize(type, x, dst, n, NULL, true);
}
