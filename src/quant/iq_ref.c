/*
 * iq_ref.c - reference dequantization of the codebook ("IQ") formats
 * IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL and IQ4_XS,
 * and reference quantization of the two non-linear 4-bit ones, IQ4_NL and
 * IQ4_XS. The IQ1/IQ2/IQ3 quantizers (an importance-weighted codebook
 * search) are in iq_quant.c.
 *
 * Block layouts are in blocks.h, tables in iq_tables.c. As in quant_ref.c,
 * float operations are kept in ggml's order (and FMA contraction is off), so
 * the outputs match ggml's bit for bit; the fixture test holds us to that.
 *
 * Grid entries are read with ob_grid_byte (shifts, not pointer casts), and
 * multi-byte fields inside byte arrays are assembled explicitly, so there
 * are no unaligned or type-punned loads.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "iq_tables.h"
#include "quant.h"
#include "quant_ref.h"

#define GROUP_MAX_EPS 1e-15f

/* Shift of the IQ1 grid values (+-1/8), chosen per group by a flag bit. */
#define IQ1_DELTA 0.125f

static inline float half(ob_half h) { return ob_fp16_to_fp32(h); }

/* +1 or -1 for element j of a group of 8 under sign byte s. */
static inline float sign_of(uint8_t s, int j) {
    return (s & ob_iq2_sign_mask[j]) ? -1.0f : 1.0f;
}

static inline uint32_t u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* An IQ1 grid byte as the signed value it stands for (-1, 0, +1). */
static inline int iq1_value(uint64_t entry, int j) {
    const int v = ob_grid_byte(entry, j);
    return v < 128 ? v : v - 256;
}

/* ---- IQ2 ------------------------------------------------------------- */

void ob_dequantize_row_iq2_xxs(const void *src, float *dst, int64_t n) {
    const ob_block_iq2_xxs *x = (const ob_block_iq2_xxs *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int g = 0; g < OB_QK_K / 32; g++) {
            const uint16_t *q = x[b].qs + 4 * g;
            const uint32_t idx = (uint32_t)q[0] | (uint32_t)q[1] << 16;  /* 4 grid indices */
            const uint32_t meta = (uint32_t)q[2] | (uint32_t)q[3] << 16; /* 4 x 7 sign bits, 4-bit scale */
            const float db = d * (0.5f + (meta >> 28)) * 0.25f;
            for (int k = 0; k < 4; k++) {
                const uint64_t grid = ob_iq2xxs_grid[(idx >> (8 * k)) & 0xff];
                const uint8_t signs = ob_iq2_signs[(meta >> (7 * k)) & 127];
                for (int j = 0; j < 8; j++) y[32 * g + 8 * k + j] = db * ob_grid_byte(grid, j) * sign_of(signs, j);
            }
        }
    }
}

void ob_dequantize_row_iq2_xs(const void *src, float *dst, int64_t n) {
    const ob_block_iq2_xs *x = (const ob_block_iq2_xs *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int g = 0; g < OB_QK_K / 32; g++) {
            const float db[2] = {
                d * (0.5f + (x[b].scales[g] & 0x0f)) * 0.25f,
                d * (0.5f + (x[b].scales[g] >> 4)) * 0.25f,
            };
            for (int k = 0; k < 4; k++) {
                const uint16_t q = x[b].qs[4 * g + k];
                const uint64_t grid = ob_iq2xs_grid[q & 511];
                const uint8_t signs = ob_iq2_signs[q >> 9];
                for (int j = 0; j < 8; j++)
                    y[32 * g + 8 * k + j] = db[k / 2] * ob_grid_byte(grid, j) * sign_of(signs, j);
            }
        }
    }
}

void ob_dequantize_row_iq2_s(const void *src, float *dst, int64_t n) {
    const ob_block_iq2_s *x = (const ob_block_iq2_s *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        const uint8_t *signs = x[b].qs + OB_QK_K / 8; /* second half of qs */
        float *y = dst + b * OB_QK_K;
        for (int g = 0; g < OB_QK_K / 32; g++) {
            const float db[2] = {
                d * (0.5f + (x[b].scales[g] & 0x0f)) * 0.25f,
                d * (0.5f + (x[b].scales[g] >> 4)) * 0.25f,
            };
            for (int k = 0; k < 4; k++) {
                const int idx = x[b].qs[4 * g + k] | ((x[b].qh[g] >> (2 * k)) & 3) << 8;
                const uint64_t grid = ob_iq2s_grid[idx];
                const uint8_t s = signs[4 * g + k];
                for (int j = 0; j < 8; j++)
                    y[32 * g + 8 * k + j] = db[k / 2] * ob_grid_byte(grid, j) * sign_of(s, j);
            }
        }
    }
}

/* ---- IQ3 ------------------------------------------------------------- */

void ob_dequantize_row_iq3_xxs(const void *src, float *dst, int64_t n) {
    const ob_block_iq3_xxs *x = (const ob_block_iq3_xxs *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        const uint8_t *qs = x[b].qs;
        float *y = dst + b * OB_QK_K;
        for (int g = 0; g < OB_QK_K / 32; g++) {
            const uint32_t meta = u32le(qs + OB_QK_K / 4 + 4 * g);
            const float db = d * (0.5f + (meta >> 28)) * 0.5f;
            for (int k = 0; k < 4; k++) {
                const uint8_t signs = ob_iq2_signs[(meta >> (7 * k)) & 127];
                const uint32_t g1 = ob_iq3xxs_grid[qs[8 * g + 2 * k]];
                const uint32_t g2 = ob_iq3xxs_grid[qs[8 * g + 2 * k + 1]];
                float *o = y + 32 * g + 8 * k;
                for (int j = 0; j < 4; j++) {
                    o[j] = db * ob_grid_byte(g1, j) * sign_of(signs, j);
                    o[j + 4] = db * ob_grid_byte(g2, j) * sign_of(signs, j + 4);
                }
            }
        }
    }
}

void ob_dequantize_row_iq3_s(const void *src, float *dst, int64_t n) {
    const ob_block_iq3_s *x = (const ob_block_iq3_s *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int g = 0; g < OB_QK_K / 32; g++) {
            const int ls = (x[b].scales[g / 2] >> (4 * (g % 2))) & 0x0f;
            const float db = d * (1 + 2 * ls);
            for (int k = 0; k < 4; k++) {
                const int i1 = 8 * g + 2 * k, i2 = i1 + 1; /* grid indices of this group of 8 */
                const uint32_t g1 = ob_iq3s_grid[x[b].qs[i1] | ((x[b].qh[g] >> (2 * k)) & 1) << 8];
                const uint32_t g2 = ob_iq3s_grid[x[b].qs[i2] | ((x[b].qh[g] >> (2 * k + 1)) & 1) << 8];
                const uint8_t s = x[b].signs[4 * g + k];
                float *o = y + 32 * g + 8 * k;
                for (int j = 0; j < 4; j++) {
                    o[j] = db * ob_grid_byte(g1, j) * sign_of(s, j);
                    o[j + 4] = db * ob_grid_byte(g2, j) * sign_of(s, j + 4);
                }
            }
        }
    }
}

/* ---- IQ1 ------------------------------------------------------------- */

void ob_dequantize_row_iq1_s(const void *src, float *dst, int64_t n) {
    const ob_block_iq1_s *x = (const ob_block_iq1_s *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int g = 0; g < OB_QK_K / 32; g++) {
            const uint16_t qh = x[b].qh[g];
            const float dl = d * (2 * ((qh >> 12) & 7) + 1);
            const float delta = (qh & 0x8000) ? -IQ1_DELTA : IQ1_DELTA;
            for (int k = 0; k < 4; k++) {
                const uint64_t grid = ob_iq1s_grid[x[b].qs[4 * g + k] | ((qh >> (3 * k)) & 7) << 8];
                for (int j = 0; j < 8; j++) y[32 * g + 8 * k + j] = dl * (iq1_value(grid, j) + delta);
            }
        }
    }
}

void ob_dequantize_row_iq1_m(const void *src, float *dst, int64_t n) {
    const ob_block_iq1_m *x = (const ob_block_iq1_m *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        uint16_t w[4]; /* scales as little-endian words */
        for (int k = 0; k < 4; k++)
            w[k] = (uint16_t)(x[b].scales[2 * k] | x[b].scales[2 * k + 1] << 8);
        /* The block's half scale is spread over the top nibbles of w[0..3]. */
        const uint16_t dbits = (uint16_t)((w[0] >> 12) | ((w[1] >> 8) & 0x00f0) |
                                          ((w[2] >> 4) & 0x0f00) | (w[3] & 0xf000));
        const float d = half(dbits);
        float *y = dst + b * OB_QK_K;
        for (int g = 0; g < OB_QK_K / 32; g++) {
            const int shift = 6 * (g % 2);
            const float dl[2] = {
                d * (2 * ((w[g / 2] >> shift) & 7) + 1),       /* elements 0..15 of the group */
                d * (2 * ((w[g / 2] >> (shift + 3)) & 7) + 1), /* elements 16..31 */
            };
            for (int k = 0; k < 4; k++) {
                const uint8_t qh = x[b].qh[2 * g + k / 2];
                const int hbits = k % 2 ? qh >> 4 : qh; /* nibble: 3 index bits + delta flag */
                const int idx = x[b].qs[4 * g + k] | (hbits & 7) << 8;
                const float delta = (hbits & 8) ? -IQ1_DELTA : IQ1_DELTA;
                const uint64_t grid = ob_iq1s_grid[idx];
                for (int j = 0; j < 8; j++)
                    y[32 * g + 8 * k + j] = dl[k / 2] * (iq1_value(grid, j) + delta);
            }
        }
    }
}

/* ---- IQ4: 16 non-linear levels --------------------------------------- */

void ob_dequantize_row_iq4_nl(const void *src, float *dst, int64_t n) {
    const ob_block_iq4_nl *x = (const ob_block_iq4_nl *)src;
    for (int64_t b = 0; b < n / OB_QK4_NL; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK4_NL;
        for (int j = 0; j < OB_QK4_NL / 2; j++) {
            y[j] = d * ob_iq4nl_values[x[b].qs[j] & 0x0f];
            y[j + 16] = d * ob_iq4nl_values[x[b].qs[j] >> 4];
        }
    }
}

void ob_dequantize_row_iq4_xs(const void *src, float *dst, int64_t n) {
    const ob_block_iq4_xs *x = (const ob_block_iq4_xs *)src;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float d = half(x[b].d);
        float *y = dst + b * OB_QK_K;
        for (int s = 0; s < OB_QK_K / 32; s++) {
            const int ls = ((x[b].scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) |
                           ((x[b].scales_h >> (2 * s)) & 3) << 4;
            const float dl = d * (ls - 32);
            const uint8_t *q = x[b].qs + 16 * s;
            for (int j = 0; j < 16; j++) {
                y[32 * s + j] = dl * ob_iq4nl_values[q[j] & 0x0f];
                y[32 * s + j + 16] = dl * ob_iq4nl_values[q[j] >> 4];
            }
        }
    }
}

/* Index of the level nearest to v (levels ascending); on an exact tie the
 * upper level. */
static int iq4_nearest(float v) {
    const int8_t *lv = ob_iq4nl_values;
    if (v <= lv[0]) return 0;
    if (v >= lv[15]) return 15;
    int lo = 0, hi = 15; /* lv[lo] <= v < lv[hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < lv[mid]) hi = mid;
        else lo = mid;
    }
    return v - lv[hi - 1] < lv[hi] - v ? hi - 1 : hi;
}

/* Scale for 32 elements, minimising sum x^2 * (x - d * level)^2. Start with
 * the signed extreme mapped onto the -127 end of the levels, then try 15
 * scales that map it to -127 + t (t = -7..7); each candidate's codes are
 * refitted by least squares and the best fit kept. Returns 0 for an
 * all-zero group. ggml: quantize_row_iq4_nl_impl with ntry = 7, no
 * importance weights (the path llama-quantize takes without an imatrix). */
static float iq4_scale_search(const float *x) {
    const int8_t *lv = ob_iq4nl_values;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < GROUP_MAX_EPS) return 0.0f;

    float d = -max / lv[0];
    float id = 1 / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float q = lv[iq4_nearest(id * x[j])];
        const float w = x[j] * x[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -7; t <= 7; t++) {
        id = (t + lv[0]) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float q = lv[iq4_nearest(id * x[j])];
            const float w = x[j] * x[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* Nibble-pack 32 level indices the Q4_0 way. */
static void iq4_pack(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

/* IQ4_NL: one half scale per 32; codes picked with the float scale. */
void ob_quantize_row_iq4_nl_ref(const float *src, void *dst, int64_t n) {
    ob_block_iq4_nl *y = (ob_block_iq4_nl *)dst;
    for (int64_t b = 0; b < n / OB_QK4_NL; b++) {
        const float *x = src + b * OB_QK4_NL;
        const float d = iq4_scale_search(x);
        y[b].d = ob_fp32_to_fp16(d);
        const float id = d != 0.0f ? 1 / d : 0.0f;
        uint8_t L[OB_QK4_NL];
        for (int j = 0; j < OB_QK4_NL; j++) L[j] = (uint8_t)iq4_nearest(id * x[j]);
        iq4_pack(L, y[b].qs);
    }
}

/* IQ4_XS: sub-block scales from the search above, quantized to 6 bits
 * (offset 32) against the one of largest magnitude, which maps to -32;
 * codes then picked with each stored sub-block scale. */
void ob_quantize_row_iq4_xs_ref(const float *src, void *dst, int64_t n) {
    ob_block_iq4_xs *y = (ob_block_iq4_xs *)dst;
    for (int64_t b = 0; b < n / OB_QK_K; b++) {
        const float *x = src + b * OB_QK_K;
        float scales[OB_QK_K / 32];
        float max_scale = 0.0f, amax_scale = 0.0f;
        for (int s = 0; s < OB_QK_K / 32; s++) {
            scales[s] = iq4_scale_search(x + 32 * s);
            if (fabsf(scales[s]) > amax_scale) {
                amax_scale = fabsf(scales[s]);
                max_scale = scales[s];
            }
        }

        const float d = -max_scale / 32; /* -0.0 (half 0x8000) when all zero, as in ggml */
        y[b].d = ob_fp32_to_fp16(d);
        const float id = d != 0.0f ? 1 / d : 0.0f;
        uint16_t scales_h = 0;
        memset(y[b].scales_l, 0, sizeof y[b].scales_l);
        for (int s = 0; s < OB_QK_K / 32; s++) {
            int l = ob_nearest_int(id * scales[s]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * l;
            const float idl = dl != 0.0f ? 1 / dl : 0.0f;
            uint8_t L[32];
            for (int j = 0; j < 32; j++) L[j] = (uint8_t)iq4_nearest(idl * x[32 * s + j]);
            iq4_pack(L, y[b].qs + 16 * s);
            l += 32;
            y[b].scales_l[s / 2] |= (uint8_t)((l & 0x0f) << (4 * (s % 2)));
            scales_h |= (uint16_t)((l >> 4) << (2 * s));
        }
        y[b].scales_h = scales_h;
    }
}
