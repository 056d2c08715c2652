/*
 * quant.cuh - device dequantization of every supported weight type, one
 * struct per type, all with the same shape:
 *
 *     ob_qt<T>::QK      elements per block (8 for the float types: a "block"
 *                       of F32/F16/BF16 is simply 8 consecutive elements)
 *     ob_qt<T>::BYTES   bytes per block (the struct size from blocks.h)
 *     ob_qt<T>::deq8(b, j, v)   elements 8j..8j+7 of the block at b into v
 *
 * Eight consecutive elements is the unit every kernel works in: it is 32
 * bytes of F32, 16 of F16/BF16, and for every quantized layout a run of
 * elements that shares one scale (all sub-blocks are 16 or 32 long), so a
 * chunk needs one scale lookup and one contiguous run of code bytes.
 *
 * Each deq8 follows the reference dequantizer in src/quant/quant_ref.c and
 * iq_ref.c (the specification): the same element order, the same integer
 * offsets, the same float products. nvcc may fuse a multiply and a
 * subtraction (Q4_K's d*sc*q - dmin*m) into one FMA, which differs from the
 * reference by at most one rounding of that element - far below every test
 * bound. Loads respect the block's alignment: blocks of even size are read
 * with 16-bit loads (their half fields sit at even offsets); MXFP4 (17-byte
 * blocks) byte by byte.
 */
#ifndef OB_CUDA_QUANT_CUH
#define OB_CUDA_QUANT_CUH

#include "common.cuh"

/* Dequantizers run on the device; they are host-callable too, so that
 * they can be checked against the reference without a GPU. */
#define OB_QFN static __host__ __device__ __forceinline__

extern "C" {
#include "quant/blocks.h"
}

/* Lookup tables: a 32-byte device buffer (cuda_backend.luts) filled from
 * src/quant/iq_tables.c at backend creation and passed to every kernel that
 * dequantizes (a pointer, not __constant__: the lookups are divergent, and
 * global memory through L1 serves them in one pass where constant memory
 * would serialize them). */
#define OB_LUT_IQ4NL 0  /* ob_iq4nl_values[16] */
#define OB_LUT_MXFP4 16 /* ob_mxfp4_values[16] */
#define OB_LUT_BYTES 32

OB_QFN uint32_t ld_u16(const uint8_t *p) { return *(const uint16_t *)p; }
/* Little-endian u32 at a 2-byte aligned address. */
OB_QFN uint32_t ld_u32_a2(const uint8_t *p) {
    const uint16_t *q = (const uint16_t *)p;
    return (uint32_t)q[0] | (uint32_t)q[1] << 16;
}
OB_QFN uint32_t ld_u32_a1(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
/* Byte k of the 8 bytes (lo, hi). */
OB_QFN uint32_t byte8(uint32_t lo, uint32_t hi, int k) {
    return ((k < 4 ? lo : hi) >> (8 * (k & 3))) & 0xffu;
}

template <int T> struct ob_qt;

/* ---- float types ---- */

template <> struct ob_qt<OB_TYPE_F32> {
    static constexpr int QK = 8, BYTES = 32;
    OB_QFN void deq8(const uint8_t *b, int, float *v, const int8_t *) {
        const float4 a = *(const float4 *)b, c = *(const float4 *)(b + 16);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
    }
};

template <> struct ob_qt<OB_TYPE_F16> {
    static constexpr int QK = 8, BYTES = 16;
    OB_QFN void deq8(const uint8_t *b, int, float *v, const int8_t *) {
        const uint4 u = *(const uint4 *)b;
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            v[2 * k] = ob_h2f((uint16_t)(w[k] & 0xffffu));
            v[2 * k + 1] = ob_h2f((uint16_t)(w[k] >> 16));
        }
    }
};

template <> struct ob_qt<OB_TYPE_BF16> {
    static constexpr int QK = 8, BYTES = 16;
    OB_QFN void deq8(const uint8_t *b, int, float *v, const int8_t *) {
        const uint4 u = *(const uint4 *)b;
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            v[2 * k] = ob_u2f(w[k] << 16);
            v[2 * k + 1] = ob_u2f(w[k] & 0xffff0000u);
        }
    }
};

/* ---- legacy 32-element blocks ---- */

/* Elements 8j..8j+7 of a 32-element nibble block (Q4_0 layout): low nibbles
 * of qs[8j..] for j < 2, high nibbles of qs[8(j-2)..] for j >= 2. */
OB_QFN void nibbles8(const uint8_t *qs, int j, bool aligned2, int *q) {
    const uint8_t *p = qs + 8 * (j & 1);
    const uint32_t lo = aligned2 ? ld_u32_a2(p) : ld_u32_a1(p), hi = aligned2 ? ld_u32_a2(p + 4) : ld_u32_a1(p + 4);
    const int sh = 4 * (j >> 1);
#pragma unroll
    for (int k = 0; k < 8; k++) q[k] = (int)((byte8(lo, hi, k) >> sh) & 15u);
}

template <> struct ob_qt<OB_TYPE_Q4_0> {
    static constexpr int QK = OB_QK4_0, BYTES = sizeof(ob_block_q4_0);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const float d = ob_h2f((uint16_t)ld_u16(b));
        int q[8];
        nibbles8(b + 2, j, true, q);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (float)(q[k] - 8) * d;
    }
};

template <> struct ob_qt<OB_TYPE_Q4_1> {
    static constexpr int QK = OB_QK4_1, BYTES = sizeof(ob_block_q4_1);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const float d = ob_h2f((uint16_t)ld_u16(b)), m = ob_h2f((uint16_t)ld_u16(b + 2));
        int q[8];
        nibbles8(b + 4, j, true, q);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (float)q[k] * d + m;
    }
};

template <> struct ob_qt<OB_TYPE_Q5_0> {
    static constexpr int QK = OB_QK5_0, BYTES = sizeof(ob_block_q5_0);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const float d = ob_h2f((uint16_t)ld_u16(b));
        const uint32_t qh = ld_u32_a2(b + 2);
        int q[8];
        nibbles8(b + 6, j, true, q);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (float)((q[k] | (int)((qh >> (8 * j + k)) & 1u) << 4) - 16) * d;
    }
};

template <> struct ob_qt<OB_TYPE_Q5_1> {
    static constexpr int QK = OB_QK5_1, BYTES = sizeof(ob_block_q5_1);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const float d = ob_h2f((uint16_t)ld_u16(b)), m = ob_h2f((uint16_t)ld_u16(b + 2));
        const uint32_t qh = ld_u32_a2(b + 4);
        int q[8];
        nibbles8(b + 8, j, true, q);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (float)(q[k] | (int)((qh >> (8 * j + k)) & 1u) << 4) * d + m;
    }
};

template <> struct ob_qt<OB_TYPE_Q8_0> {
    static constexpr int QK = OB_QK8_0, BYTES = sizeof(ob_block_q8_0);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const float d = ob_h2f((uint16_t)ld_u16(b));
        const uint32_t lo = ld_u32_a2(b + 2 + 8 * j), hi = ld_u32_a2(b + 6 + 8 * j);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (float)(int8_t)byte8(lo, hi, k) * d;
    }
};

template <> struct ob_qt<OB_TYPE_MXFP4> {
    static constexpr int QK = OB_QK_MXFP4, BYTES = sizeof(ob_block_mxfp4);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        /* 2^(e - 128), as ob_e8m0_to_fp32_half: a subnormal below e = 2 */
        const uint32_t e = b[0];
        const float d = ob_u2f(e < 2 ? 0x00200000u << e : (e - 1) << 23);
        int q[8];
        nibbles8(b + 1, j, false, q);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (float)lut[OB_LUT_MXFP4 + q[k]] * d;
    }
};

template <> struct ob_qt<OB_TYPE_IQ4_NL> {
    static constexpr int QK = OB_QK4_NL, BYTES = sizeof(ob_block_iq4_nl);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const float d = ob_h2f((uint16_t)ld_u16(b));
        int q[8];
        nibbles8(b + 2, j, true, q);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = d * (float)lut[OB_LUT_IQ4NL + q[k]];
    }
};

/* ---- K-quants (256-element super-blocks) ---- */

/* Elements i0..i0+7 (i0 = 8j) of the 2-bit layout shared by Q2_K, Q3_K
 * and TQ2_0: element 128h + 32k + l is bits 2k..2k+1 of qs[32h + l]. */
OB_QFN void crumbs8(const uint8_t *qs, int j, int *q) {
    const int i0 = 8 * j, h = i0 / 128, k = (i0 % 128) / 32, l0 = i0 % 32;
    const uint8_t *p = qs + 32 * h + l0;
    const uint32_t lo = ld_u32_a2(p), hi = ld_u32_a2(p + 4);
#pragma unroll
    for (int t = 0; t < 8; t++) q[t] = (int)((byte8(lo, hi, t) >> (2 * k)) & 3u);
}

template <> struct ob_qt<OB_TYPE_Q2_K> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_q2_K);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_q2_K *x = (const ob_block_q2_K *)b;
        const float d = ob_h2f((uint16_t)ld_u16((const uint8_t *)&x->d));
        const float dmin = ob_h2f((uint16_t)ld_u16((const uint8_t *)&x->dmin));
        const uint8_t sc = x->scales[j / 2]; /* sub-block of 16 = (8j) / 16 */
        const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
        int q[8];
        crumbs8(x->qs, j, q);
#pragma unroll
        for (int t = 0; t < 8; t++) v[t] = dl * (float)q[t] - ml;
    }
};

OB_QFN int q3_K_scale(const uint8_t *scales, int s) {
    const int lo = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
    const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    return lo | hi << 4;
}

template <> struct ob_qt<OB_TYPE_Q3_K> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_q3_K);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_q3_K *x = (const ob_block_q3_K *)b;
        const float d_all = ob_h2f((uint16_t)ld_u16((const uint8_t *)&x->d));
        const int i0 = 8 * j;
        const float dl = d_all * (float)(q3_K_scale(x->scales, i0 / 16) - 32);
        int q[8];
        crumbs8(x->qs, j, q);
        const uint8_t *hm = x->hmask + i0 % 32;
        const uint32_t mlo = ld_u32_a2(hm), mhi = ld_u32_a2(hm + 4);
        const int bit = i0 / 32;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            const int high = (int)((byte8(mlo, mhi, t) >> bit) & 1u);
            v[t] = dl * (float)(q[t] - (high ? 0 : 4));
        }
    }
};

/* Scale and min (6 bits each) of sub-block s of a Q4_K/Q5_K block. */
OB_QFN void k4_scale_min(const uint8_t *q, int s, int *sc, int *mn) {
    if (s < 4) {
        *sc = q[s] & 63;
        *mn = q[s + 4] & 63;
    } else {
        *sc = (q[s + 4] & 0x0f) | (q[s - 4] >> 6) << 4;
        *mn = (q[s + 4] >> 4) | (q[s] >> 6) << 4;
    }
}

template <> struct ob_qt<OB_TYPE_Q4_K> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_q4_K);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_q4_K *x = (const ob_block_q4_K *)b;
        const float d = ob_h2f((uint16_t)ld_u16(b)), dmin = ob_h2f((uint16_t)ld_u16(b + 2));
        const int s = j / 4, l0 = 8 * (j % 4);
        int sc, mn;
        k4_scale_min(x->scales, s, &sc, &mn);
        const float dl = d * (float)sc, ml = dmin * (float)mn;
        const uint8_t *p = x->qs + 32 * (s / 2) + l0;
        const uint32_t lo = ld_u32_a2(p), hi = ld_u32_a2(p + 4);
        const int sh = 4 * (s % 2);
#pragma unroll
        for (int t = 0; t < 8; t++) v[t] = dl * (float)((byte8(lo, hi, t) >> sh) & 15u) - ml;
    }
};

template <> struct ob_qt<OB_TYPE_Q5_K> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_q5_K);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_q5_K *x = (const ob_block_q5_K *)b;
        const float d = ob_h2f((uint16_t)ld_u16(b)), dmin = ob_h2f((uint16_t)ld_u16(b + 2));
        const int s = j / 4, l0 = 8 * (j % 4);
        int sc, mn;
        k4_scale_min(x->scales, s, &sc, &mn);
        const float dl = d * (float)sc, ml = dmin * (float)mn;
        const uint8_t *p = x->qs + 32 * (s / 2) + l0;
        const uint32_t lo = ld_u32_a2(p), hi = ld_u32_a2(p + 4);
        const uint32_t hlo = ld_u32_a2(x->qh + l0), hhi = ld_u32_a2(x->qh + l0 + 4);
        const int sh = 4 * (s % 2);
#pragma unroll
        for (int t = 0; t < 8; t++) {
            const int q5 = (int)((byte8(lo, hi, t) >> sh) & 15u) + (((byte8(hlo, hhi, t) >> s) & 1u) ? 16 : 0);
            v[t] = dl * (float)q5 - ml;
        }
    }
};

template <> struct ob_qt<OB_TYPE_Q6_K> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_q6_K);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_q6_K *x = (const ob_block_q6_K *)b;
        const float d = ob_h2f((uint16_t)ld_u16((const uint8_t *)&x->d));
        const int i0 = 8 * j, h = i0 / 128, k = (i0 % 128) / 32, l0 = i0 % 32;
        const float ds = d * (float)x->scales[i0 / 16];
        const uint8_t *pl = x->ql + 64 * h + 32 * (k & 1) + l0, *ph = x->qh + 32 * h + l0;
        const uint32_t llo = ld_u32_a2(pl), lhi = ld_u32_a2(pl + 4), hlo = ld_u32_a2(ph), hhi = ld_u32_a2(ph + 4);
        const int sl = 4 * (k >> 1), sh = 2 * k;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            const int low = (int)((byte8(llo, lhi, t) >> sl) & 15u), high = (int)((byte8(hlo, hhi, t) >> sh) & 3u);
            v[t] = ds * (float)((low | high << 4) - 32);
        }
    }
};

template <> struct ob_qt<OB_TYPE_IQ4_XS> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_iq4_xs);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_iq4_xs *x = (const ob_block_iq4_xs *)b;
        const float d = ob_h2f((uint16_t)ld_u16(b));
        const uint32_t scales_h = ld_u16(b + 2);
        const int s = j / 4, jj = j % 4; /* sub-block of 32, chunk within it */
        const int ls = ((x->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | (int)((scales_h >> (2 * s)) & 3u) << 4;
        const float dl = d * (float)(ls - 32);
        int q[8];
        nibbles8(x->qs + 16 * s, jj, true, q);
#pragma unroll
        for (int t = 0; t < 8; t++) v[t] = dl * (float)lut[OB_LUT_IQ4NL + q[t]];
    }
};

/* ---- ternary ---- */

/* Digit k (0 = most significant) of a TQ1_0 byte, as 0..2. */
OB_QFN int tq1_digit(uint32_t byte, int k) {
    const uint32_t pow3 = k == 0 ? 1 : k == 1 ? 3 : k == 2 ? 9 : k == 3 ? 27 : 81;
    return (int)((((byte * pow3) & 0xffu) * 3u) >> 8);
}

template <> struct ob_qt<OB_TYPE_TQ1_0> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_tq1_0);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_tq1_0 *x = (const ob_block_tq1_0 *)b;
        const float d = ob_h2f((uint16_t)ld_u16((const uint8_t *)&x->d));
        const int i0 = 8 * j;
        if (i0 < 160) { /* y[32k + m] = digit k of qs[m] */
            const int k = i0 / 32, m0 = i0 % 32;
            const uint32_t lo = ld_u32_a2(x->qs + m0), hi = ld_u32_a2(x->qs + m0 + 4);
#pragma unroll
            for (int t = 0; t < 8; t++) v[t] = (float)(tq1_digit(byte8(lo, hi, t), k) - 1) * d;
        } else if (i0 < 240) { /* y[160 + 16k + m] = digit k of qs[32 + m] */
            const int k = (i0 - 160) / 16, m0 = (i0 - 160) % 16;
            const uint32_t lo = ld_u32_a2(x->qs + 32 + m0), hi = ld_u32_a2(x->qs + 36 + m0);
#pragma unroll
            for (int t = 0; t < 8; t++) v[t] = (float)(tq1_digit(byte8(lo, hi, t), k) - 1) * d;
        } else { /* y[240 + 4k + jj] = digit k of qh[jj] */
            const uint32_t qh = ld_u32_a2(x->qh);
#pragma unroll
            for (int t = 0; t < 8; t++) {
                const int e = i0 - 240 + t;
                v[t] = (float)(tq1_digit((qh >> (8 * (e % 4))) & 0xffu, e / 4) - 1) * d;
            }
        }
    }
};

template <> struct ob_qt<OB_TYPE_TQ2_0> {
    static constexpr int QK = OB_QK_K, BYTES = sizeof(ob_block_tq2_0);
    OB_QFN void deq8(const uint8_t *b, int j, float *v, const int8_t *lut) {
        const ob_block_tq2_0 *x = (const ob_block_tq2_0 *)b;
        const float d = ob_h2f((uint16_t)ld_u16((const uint8_t *)&x->d));
        int q[8];
        crumbs8(x->qs, j, q);
#pragma unroll
        for (int t = 0; t < 8; t++) v[t] = (float)(q[t] - 1) * d;
    }
};

/* Chunk c (8 elements) of a row that starts at `row`. */
template <int T>
OB_QFN void deq_chunk(const uint8_t *row, int64_t c, float *v, const int8_t *lut) {
    constexpr int CPB = ob_qt<T>::QK / 8;
    ob_qt<T>::deq8(row + (size_t)(c / CPB) * ob_qt<T>::BYTES, (int)(c % CPB), v, lut);
}

/* Every type the CUDA backend reads as weights; X(type) per entry. */
#define OB_CUDA_FOR_EACH_TYPE(X)                                                                 \
    X(OB_TYPE_F32) X(OB_TYPE_F16) X(OB_TYPE_BF16) X(OB_TYPE_Q4_0) X(OB_TYPE_Q4_1) X(OB_TYPE_Q5_0) \
    X(OB_TYPE_Q5_1) X(OB_TYPE_Q8_0) X(OB_TYPE_MXFP4) X(OB_TYPE_IQ4_NL) X(OB_TYPE_Q2_K)            \
    X(OB_TYPE_Q3_K) X(OB_TYPE_Q4_K) X(OB_TYPE_Q5_K) X(OB_TYPE_Q6_K) X(OB_TYPE_IQ4_XS)             \
    X(OB_TYPE_TQ1_0) X(OB_TYPE_TQ2_0)

/* The plugin links nothing of the host library, so it names types itself. */
static inline const char *cuda_type_name(int t) {
    switch (t) {
    case OB_TYPE_F32: return "f32";
    case OB_TYPE_F16: return "f16";
    case OB_TYPE_BF16: return "bf16";
    case OB_TYPE_Q4_0: return "q4_0";
    case OB_TYPE_Q4_1: return "q4_1";
    case OB_TYPE_Q5_0: return "q5_0";
    case OB_TYPE_Q5_1: return "q5_1";
    case OB_TYPE_Q8_0: return "q8_0";
    case OB_TYPE_MXFP4: return "mxfp4";
    case OB_TYPE_IQ4_NL: return "iq4_nl";
    case OB_TYPE_Q2_K: return "q2_K";
    case OB_TYPE_Q3_K: return "q3_K";
    case OB_TYPE_Q4_K: return "q4_K";
    case OB_TYPE_Q5_K: return "q5_K";
    case OB_TYPE_Q6_K: return "q6_K";
    case OB_TYPE_IQ4_XS: return "iq4_xs";
    case OB_TYPE_TQ1_0: return "tq1_0";
    case OB_TYPE_TQ2_0: return "tq2_0";
    case OB_TYPE_Q8_1: return "q8_1";
    case OB_TYPE_Q8_K: return "q8_K";
    case OB_TYPE_IQ2_XXS: return "iq2_xxs";
    case OB_TYPE_IQ2_XS: return "iq2_xs";
    case OB_TYPE_IQ2_S: return "iq2_s";
    case OB_TYPE_IQ3_XXS: return "iq3_xxs";
    case OB_TYPE_IQ3_S: return "iq3_s";
    case OB_TYPE_IQ1_S: return "iq1_s";
    case OB_TYPE_IQ1_M: return "iq1_m";
    case OB_TYPE_F64: return "f64";
    default: return "an integer or unknown type";
    }
}

static inline bool cuda_type_supported(int t) {
    switch (t) {
#define OB_CASE(T) case T:
        OB_CUDA_FOR_EACH_TYPE(OB_CASE)
#undef OB_CASE
        return true;
    default: return false;
    }
}

#endif
