/*
 * mmvq.cuh - integer dot products for the decode kernel: weight blocks
 * against activations quantized to 8 bits (the "q8" layout below), with
 * 4-way byte dot products (dp4a). Host-callable, so the dot products are
 * checked against the reference on a machine without a GPU
 * (tests/test_cuda_dequant.cu).
 *
 * Why: the float decode kernel (mmv.cuh) dequantizes every weight to a
 * float and does one FMA per weight, about four instructions per weight
 * with the scale lookups; on an H200 that made Q4_K decode instruction-bound
 * at 12-16% of the memory bandwidth. Here a lane turns 4 weights into one
 * 32-bit word of bytes with two or three integer ops and multiplies it by 4
 * activation bytes in one dp4a: about one instruction per weight.
 *
 * q8 activations: per token, the row of nin floats becomes nin int8 values
 * (qx) and per 32 of them a pair of floats (dx): the scale d, with
 * x[i] ~ d * qx[i], d = max|x| / 127 over the 32 and qx = round(x / d) -
 * the rounding of the CPU's Q8_0 activation blocks - and d times the sum of
 * the 32 qx, which the types with an offset (Q4_0's -8, the K-quants'
 * minimums) multiply instead of summing the activation bytes again.
 *
 * A "chunk" is what one lane does per step: 64 weights (a K-quant group, a
 * pair of Q4_0 or Q8_0 blocks; 32 of Q6_K), the code bytes that hold them and the
 * activation bytes they meet. Each type splits the work so the kernel can
 * issue the weight loads of several chunks and rows before it computes with
 * any of them (the bytes in flight are what hide memory latency), and load
 * a chunk's activations once for all the rows it works on:
 *
 *     load(row, c, r)        the chunk's weight bytes into registers r
 *     xload(c, a, t, x)      the activations chunk c meets of token t
 *     dot1(r, c, x)          the chunk's contribution for that row and token
 *
 * Blocks whose size is a multiple of 16 (Q4_K 144, Q5_K 176) are read with
 * one 16-byte load for the scales and one per 16 code bytes; consecutive
 * lanes take consecutive chunks, so a warp's loads are contiguous. Pairs
 * of Q4_0 and Q8_0 blocks (36 and 68 bytes) are read in 32-bit words; Q6_K
 * blocks (210 bytes) are only 2-byte aligned and are read in 16-bit pieces.
 */
#ifndef OB_CUDA_MMVQ_CUH
#define OB_CUDA_MMVQ_CUH

#include <math.h>

#include "quant.cuh"

OB_QFN int ob_dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a((int)a, (int)b, c);
#else
    for (int k = 0; k < 4; k++) c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
    return c;
#endif
}

/* Per-byte a - b (wrapping): 0..63 - 32 gives the signed bytes -32..31. */
OB_QFN uint32_t ob_vsub4(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __vsub4(a, b);
#else
    uint32_t r = 0;
    for (int k = 0; k < 4; k++) r |= (((a >> (8 * k)) - (b >> (8 * k))) & 0xffu) << (8 * k);
    return r;
#endif
}

/* Bytes of the 8-byte value (hi:lo) picked by the nibbles of sel, as __byte_perm. */
OB_QFN uint32_t ob_byte_perm(uint32_t lo, uint32_t hi, uint32_t sel) {
#ifdef __CUDA_ARCH__
    return __byte_perm(lo, hi, sel);
#else
    const uint64_t v = (uint64_t)hi << 32 | lo;
    uint32_t r = 0;
    for (int k = 0; k < 4; k++) r |= (uint32_t)((v >> (8 * ((sel >> (4 * k)) & 7))) & 0xffu) << (8 * k);
    return r;
#endif
}

/* Float arithmetic with no contraction: nvcc may fuse a multiply and an add
 * into an FMA differently in each instantiation of a kernel (each token
 * count) or for each accumulator, and a token's result must not depend on
 * the batch it is in (batch-invariant mode). Rounded as written. */
OB_QFN float ob_fmul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
OB_QFN float ob_fadd(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
/* a * b + c with one rounding, written out (never left to contraction). */
OB_QFN float ob_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}
OB_QFN float ob_fsub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

OB_QFN uint4 ld_u128(const uint8_t *p) { return *(const uint4 *)p; } /* 16-byte aligned */
OB_QFN int4 ld_x128(const int8_t *p) { return *(const int4 *)p; }    /* activation bytes: 16-aligned */
OB_QFN int2 ld_x64(const int8_t *p) { return *(const int2 *)p; }     /* 8-aligned */

/* Activations of NT tokens: qx[t * ldq + i]; block b = i / 32 has scale
 * dx[t * ldd + 2b] and scaled sum dx[t * ldd + 2b + 1]. ldq is a multiple
 * of 32 and ldd of 16 (K-quant rows) or 2, so the vector loads below stay
 * aligned. */
struct q8_act {
    const int8_t *qx;
    const float *dx;
    int64_t ldq, ldd;
};

/* Sum of the 16 bytes of x times the 16 nibbles/bytes in w (4 words each). */
OB_QFN int dot16(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, const int4 &x) {
    return ob_dp4a(w3, (uint32_t)x.w, ob_dp4a(w2, (uint32_t)x.z, ob_dp4a(w1, (uint32_t)x.y, ob_dp4a(w0, (uint32_t)x.x, 0))));
}

template <int T> struct ob_qdot;

/* Each type below: CHUNKS per block, the weight part (raw, load) and the
 * activation part (xin, xload: what chunk c meets of token t), and dot1,
 * the chunk's contribution for one row and one token. The kernel loads the
 * activations of a chunk once for the R rows a warp works on. */

/* Bytes 2..5 of the 8 (lo, hi): the 16-bit misalignment of Q4_0/Q8_0 codes. */
OB_QFN uint32_t mid32(uint32_t lo, uint32_t hi) {
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, 16);
#else
    return (lo >> 16) | (hi << 16);
#endif
}

/* Activations of a pair of 32-element blocks: 64 bytes, then scale and
 * scaled sum of each. */
struct pair_xin {
    int4 x[4];
    float4 ds;
};

OB_QFN void pair_xload(int c, const q8_act &a, int t, pair_xin &x) {
    const int8_t *q = a.qx + t * a.ldq + (int64_t)c * 64;
#pragma unroll
    for (int i = 0; i < 4; i++) x.x[i] = ld_x128(q + 16 * i);
    x.ds = *(const float4 *)(a.dx + t * a.ldd + 4 * (int64_t)c);
}

/* Q4_0 (18 bytes: d, 16 bytes whose low nibbles are elements 0..15 and high
 * nibbles 16..31, value q - 8). Chunk: a pair of blocks (36 bytes, 4-byte
 * aligned when rows are): nine 32-bit loads, the first block's codes
 * shifted out of the 16-bit misalignment. */
template <> struct ob_qdot<OB_TYPE_Q4_0> {
    static constexpr int QK = 64, BYTES = 36, CHUNKS = 1;
    struct raw {
        uint32_t w[9];
    };
    typedef pair_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint32_t *p = (const uint32_t *)(row + (size_t)c * BYTES);
#pragma unroll
        for (int i = 0; i < 9; i++) r.w[i] = p[i];
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { pair_xload(c, a, t, x); }
    /* the weights as dp4a operands: low/high nibbles of each block, and the scales */
    struct dec {
        uint32_t lo[2][4], hi[2][4];
        float d[2];
    };
    OB_QFN void decode(const raw &r, int, dec &w) {
        /* block 0: d = bytes 0-1, codes 2..17; block 1: d = bytes 18-19, codes 20..35 */
        const uint32_t q0[4] = {mid32(r.w[0], r.w[1]), mid32(r.w[1], r.w[2]), mid32(r.w[2], r.w[3]),
                                mid32(r.w[3], r.w[4])};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w.lo[0][i] = q0[i] & 0x0F0F0F0Fu, w.hi[0][i] = (q0[i] >> 4) & 0x0F0F0F0Fu;
            w.lo[1][i] = r.w[5 + i] & 0x0F0F0F0Fu, w.hi[1][i] = (r.w[5 + i] >> 4) & 0x0F0F0F0Fu;
        }
        w.d[0] = ob_h2f((uint16_t)(r.w[0] & 0xffffu));
        w.d[1] = ob_h2f((uint16_t)(r.w[4] >> 16));
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) {
        int s[2];
#pragma unroll
        for (int b = 0; b < 2; b++)
            s[b] = dot16(w.lo[b][0], w.lo[b][1], w.lo[b][2], w.lo[b][3], x.x[2 * b]) +
                   dot16(w.hi[b][0], w.hi[b][1], w.hi[b][2], w.hi[b][3], x.x[2 * b + 1]);
        const float t0 = ob_fsub(ob_fmul(x.ds.x, (float)s[0]), ob_fmul(8.0f, x.ds.y));
        const float t1 = ob_fsub(ob_fmul(x.ds.z, (float)s[1]), ob_fmul(8.0f, x.ds.w));
        return ob_fadd(ob_fmul(w.d[0], t0), ob_fmul(w.d[1], t1));
    }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* Q8_0 (34 bytes: d, 32 signed bytes). Chunk: a pair of blocks (68 bytes,
 * 4-byte aligned when rows are): seventeen 32-bit loads. */
template <> struct ob_qdot<OB_TYPE_Q8_0> {
    static constexpr int QK = 64, BYTES = 68, CHUNKS = 1;
    struct raw {
        uint32_t w[17];
    };
    typedef pair_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint32_t *p = (const uint32_t *)(row + (size_t)c * BYTES);
#pragma unroll
        for (int i = 0; i < 17; i++) r.w[i] = p[i];
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { pair_xload(c, a, t, x); }
    struct dec {
        uint32_t q[16];
        float d[2];
    };
    OB_QFN void decode(const raw &r, int, dec &w) {
        /* block 0: d = bytes 0-1, codes 2..33; block 1: d = bytes 34-35, codes 36..67 */
#pragma unroll
        for (int i = 0; i < 8; i++) w.q[i] = mid32(r.w[i], r.w[i + 1]), w.q[8 + i] = r.w[9 + i];
        w.d[0] = ob_h2f((uint16_t)(r.w[0] & 0xffffu));
        w.d[1] = ob_h2f((uint16_t)(r.w[8] >> 16));
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) {
        const int s0 = dot16(w.q[0], w.q[1], w.q[2], w.q[3], x.x[0]) + dot16(w.q[4], w.q[5], w.q[6], w.q[7], x.x[1]);
        const int s1 = dot16(w.q[8], w.q[9], w.q[10], w.q[11], x.x[2]) + dot16(w.q[12], w.q[13], w.q[14], w.q[15], x.x[3]);
        return ob_fadd(ob_fmul(ob_fmul(w.d[0], x.ds.x), (float)s0), ob_fmul(ob_fmul(w.d[1], x.ds.z), (float)s1));
    }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* Byte k (0..11) of a K-quant's 12 scale bytes, which sit in words y, z, w
 * of the block's first 16 bytes. */
OB_QFN uint32_t kq_sc(const uint4 &h, int k) {
    const uint32_t w = k < 4 ? h.y : k < 8 ? h.z : h.w;
    return (w >> (8 * (k & 3))) & 0xffu;
}

/* Q4_K / Q5_K sub-block s's 6-bit scale and min, as get_scale_min. */
OB_QFN void kq_scale_min(const uint4 &h, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = (int)(kq_sc(h, s) & 63);
        *min = (int)(kq_sc(h, s + 4) & 63);
    } else {
        *scale = (int)((kq_sc(h, s + 4) & 0xF) | ((kq_sc(h, s - 4) >> 6) << 4));
        *min = (int)((kq_sc(h, s + 4) >> 4) | ((kq_sc(h, s) >> 6) << 4));
    }
}

/* What a K-quant group (64 elements = two 32-element activation blocks)
 * meets: the 64 activation bytes, then scale and scaled sum of each block. */
struct kq_xin {
    int4 x[4];
    float4 dd;
};

OB_QFN void kq_xload(int c, const q8_act &a, int t, kq_xin &x) {
    const int64_t xb = (int64_t)(c >> 2) * 8 + 2 * (c & 3);
    const int8_t *q = a.qx + t * a.ldq + xb * 32;
#pragma unroll
    for (int i = 0; i < 4; i++) x.x[i] = ld_x128(q + 16 * i);
    x.dd = *(const float4 *)(a.dx + t * a.ldd + 2 * xb);
}

/* Q4_K and Q5_K chunks decoded: the 32 elements of sub-blocks 2g and 2g+1
 * (group g = chunk c % 4) as dp4a operands, and each sub-block's d * scale
 * and dmin * min; element = d sc q - dmin m, so a sub-block contributes
 * d sc (dx sum qx q) - dmin m (dx sum qx). */
struct kq_dec {
    uint32_t lo[8], hi[8];
    float ds0, dm0, ds1, dm1;
};

OB_QFN void kq_scales(const uint4 &h, int c, kq_dec &w) {
    const int g = c & 3;
    const float d = ob_h2f((uint16_t)(h.x & 0xffffu)), dmin = ob_h2f((uint16_t)(h.x >> 16));
    int sc0, m0, sc1, m1;
    kq_scale_min(h, 2 * g, &sc0, &m0);
    kq_scale_min(h, 2 * g + 1, &sc1, &m1);
    w.ds0 = d * (float)sc0, w.dm0 = dmin * (float)m0, w.ds1 = d * (float)sc1, w.dm1 = dmin * (float)m1;
}

OB_QFN float kq_dotd(const kq_dec &w, const kq_xin &x) {
    const int s0 = dot16(w.lo[0], w.lo[1], w.lo[2], w.lo[3], x.x[0]) + dot16(w.lo[4], w.lo[5], w.lo[6], w.lo[7], x.x[1]);
    const int s1 = dot16(w.hi[0], w.hi[1], w.hi[2], w.hi[3], x.x[2]) + dot16(w.hi[4], w.hi[5], w.hi[6], w.hi[7], x.x[3]);
    const float a = ob_fsub(ob_fmul(w.ds0, ob_fmul(x.dd.x, (float)s0)), ob_fmul(w.dm0, x.dd.y));
    const float b = ob_fsub(ob_fmul(w.ds1, ob_fmul(x.dd.z, (float)s1)), ob_fmul(w.dm1, x.dd.w));
    return ob_fadd(a, b);
}

/* Q4_K (144 bytes: d, dmin, 12 scale bytes, 128 code bytes). Group g of 64
 * elements: code bytes 32g..32g+31, low nibbles = sub-block 2g, high = 2g+1.
 * Chunk c (4 per block): group c % 4, its 32 code bytes in two 16-byte loads. */
template <> struct ob_qdot<OB_TYPE_Q4_K> {
    static constexpr int QK = 256, BYTES = 144, CHUNKS = 4;
    struct raw {
        uint4 h, q0, q1;
    };
    typedef kq_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint8_t *b = row + (size_t)(c >> 2) * BYTES;
        r.h = ld_u128(b);
        r.q0 = ld_u128(b + 16 + 32 * (c & 3));
        r.q1 = ld_u128(b + 32 + 32 * (c & 3));
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { kq_xload(c, a, t, x); }
    typedef kq_dec dec;
    OB_QFN void decode(const raw &r, int c, dec &w) {
        const uint32_t q[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
#pragma unroll
        for (int i = 0; i < 8; i++) w.lo[i] = q[i] & 0x0F0F0F0Fu, w.hi[i] = (q[i] >> 4) & 0x0F0F0F0Fu;
        kq_scales(r.h, c, w);
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) { return kq_dotd(w, x); }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* Q5_K (176 bytes: d, dmin, 12 scale bytes, 32 high-bit bytes, 128 code
 * bytes): as Q4_K, plus bit 2g (low nibbles) or 2g+1 (high nibbles) of
 * high-bit byte l adds 16 to element l of the group's sub-blocks. */
template <> struct ob_qdot<OB_TYPE_Q5_K> {
    static constexpr int QK = 256, BYTES = 176, CHUNKS = 4;
    struct raw {
        uint4 h, e0, e1, q0, q1;
    };
    typedef kq_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint8_t *b = row + (size_t)(c >> 2) * BYTES;
        r.h = ld_u128(b);
        r.e0 = ld_u128(b + 16);
        r.e1 = ld_u128(b + 32);
        r.q0 = ld_u128(b + 48 + 32 * (c & 3));
        r.q1 = ld_u128(b + 64 + 32 * (c & 3));
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { kq_xload(c, a, t, x); }
    typedef kq_dec dec;
    OB_QFN void decode(const raw &r, int c, dec &w) {
        const int g = c & 3;
        const uint32_t q[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
        const uint32_t e[8] = {r.e0.x, r.e0.y, r.e0.z, r.e0.w, r.e1.x, r.e1.y, r.e1.z, r.e1.w};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            w.lo[i] = (q[i] & 0x0F0F0F0Fu) | (((e[i] >> (2 * g)) & 0x01010101u) << 4);
            w.hi[i] = ((q[i] >> 4) & 0x0F0F0F0Fu) | (((e[i] >> (2 * g + 1)) & 0x01010101u) << 4);
        }
        kq_scales(r.h, c, w);
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) { return kq_dotd(w, x); }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* Q6_K (210 bytes: 128 low-nibble bytes ql, 64 high-bit bytes qh, 16 signed
 * scales, d). Half h (128 elements): for l < 32, elements l, l+32, l+64,
 * l+96 take ql[64h+l] low, ql[64h+32+l] low, ql[64h+l] high,
 * ql[64h+32+l] high, with bits 0-1, 2-3, 4-5, 6-7 of qh[32h+l] on top, minus
 * 32; scale of element e of the block: scales[e / 16]. Chunk c (8 per
 * block): half c/4, l = 8(c%4) .. +8: 32 elements, 8 from each quarter k of
 * the half, which use scale 8h + 2k + (l >= 16). */
template <> struct ob_qdot<OB_TYPE_Q6_K> {
    static constexpr int QK = 256, BYTES = 210, CHUNKS = 8;
    struct raw {
        uint32_t a[2], b[2], e[2], sc, d; /* sc: the four scales as bytes */
    };
    struct xin {
        int2 x[4];
        float dx[4];
    };
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint8_t *b = row + (size_t)(c >> 3) * BYTES;
        const int h = (c & 7) >> 2, l = 8 * (c & 3);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            r.a[i] = ld_u32_a2(b + 64 * h + l + 4 * i);
            r.b[i] = ld_u32_a2(b + 64 * h + 32 + l + 4 * i);
            r.e[i] = ld_u32_a2(b + 128 + 32 * h + l + 4 * i);
        }
        /* scales 8h + 2k + (l >= 16), k = 0..3: byte (l >= 16) of each 16-bit
         * pair of scale bytes 8h .. 8h+7 */
        const uint32_t s01 = ld_u32_a2(b + 192 + 8 * h), s23 = ld_u32_a2(b + 196 + 8 * h);
        r.sc = ob_byte_perm(s01, s23, l >= 16 ? 0x7531u : 0x6420u);
        r.d = ld_u16(b + 208);
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) {
        const int h = (c & 7) >> 2, l = 8 * (c & 3);
        const int64_t xb = (int64_t)(c >> 3) * 8 + 4 * h; /* element 128h + 32k + l is in activation block xb + k */
        const int8_t *q = a.qx + t * a.ldq + xb * 32 + l;
#pragma unroll
        for (int k = 0; k < 4; k++) x.x[k] = ld_x64(q + 32 * k);
        const float4 d01 = *(const float4 *)(a.dx + t * a.ldd + 2 * xb);
        const float4 d23 = *(const float4 *)(a.dx + t * a.ldd + 2 * xb + 4);
        x.dx[0] = d01.x, x.dx[1] = d01.z, x.dx[2] = d23.x, x.dx[3] = d23.z;
    }
    struct dec {
        uint32_t w[4][2];
        float ds[4]; /* d * scale of each quarter */
    };
    OB_QFN void decode(const raw &r, int, dec &w) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const uint32_t qa = r.a[i], qb = r.b[i], e = r.e[i];
            w.w[0][i] = ob_vsub4((qa & 0x0F0F0F0Fu) | ((e << 4) & 0x30303030u), 0x20202020u);
            w.w[1][i] = ob_vsub4((qb & 0x0F0F0F0Fu) | ((e << 2) & 0x30303030u), 0x20202020u);
            w.w[2][i] = ob_vsub4(((qa >> 4) & 0x0F0F0F0Fu) | (e & 0x30303030u), 0x20202020u);
            w.w[3][i] = ob_vsub4(((qb >> 4) & 0x0F0F0F0Fu) | ((e >> 2) & 0x30303030u), 0x20202020u);
        }
        const float d = ob_h2f((uint16_t)r.d);
#pragma unroll
        for (int k = 0; k < 4; k++) w.ds[k] = d * (float)(int8_t)(r.sc >> (8 * k));
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; k++)
            s = ob_fadd(s, ob_fmul(ob_fmul(x.dx[k], w.ds[k]),
                                   (float)ob_dp4a(w.w[k][1], (uint32_t)x.x[k].y, ob_dp4a(w.w[k][0], (uint32_t)x.x[k].x, 0))));
        return s;
    }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* IQ4_NL and MXFP4: 4-bit codes that index a table of 16 signed bytes (ob_iq4nl_values and
 * ob_mxfp4_values - the E2M1 values doubled - packed 4 to a word little-end first;
 * test_cuda_dequant checks these words against the tables). */
#define OB_TAB_IQ4NL {0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u}
#define OB_TAB_MXFP4 {0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu}

/* The 8 nibbles of q (byte i: low nibble element i, high nibble element i + 16 of a block,
 * as Q4_0) looked up in the table t: lo gets the 4 low nibbles' bytes, hi the high ones'. On
 * the device three byte permutes per 4 nibbles: the entry among t[0..1] and among t[2..3] by
 * the nibble's low 3 bits, then one or the other by its bit 3. */
OB_QFN void ob_table16(uint32_t q, const uint32_t (&t)[4], uint32_t &lo, uint32_t &hi) {
#ifdef __CUDA_ARCH__
    uint32_t v[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint32_t s = q >> (16 * h);
        const uint32_t a = __byte_perm(t[0], t[1], s & 0x7777u), b = __byte_perm(t[2], t[3], s & 0x7777u);
        v[h] = __byte_perm(a, b, 0x3210u | ((s & 0x8888u) >> 1));
    }
    lo = __byte_perm(v[0], v[1], 0x6420u);
    hi = __byte_perm(v[0], v[1], 0x7531u);
#else
    lo = hi = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t byte = (q >> (8 * i)) & 0xffu, nl = byte & 15u, nh = byte >> 4;
        lo |= ((t[nl / 4] >> (8 * (nl % 4))) & 0xffu) << (8 * i);
        hi |= ((t[nh / 4] >> (8 * (nh % 4))) & 0xffu) << (8 * i);
    }
#endif
}

/* Bits n..n+31 of the 64-bit (hi:lo), 0 < n < 32. */
OB_QFN uint32_t ob_shr64(uint32_t lo, uint32_t hi, int n) {
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, n);
#else
    return (lo >> n) | (hi << (32 - n));
#endif
}

/* The E8M0 exponent byte as 2^(e - 128): half the MXFP4 block scale, as ob_e8m0_to_fp32_half. */
OB_QFN float ob_e8m0_half(uint32_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The dot product of a pair of table-coded 32-element blocks: the decoded words (lo/hi as
 * Q4_0's), the blocks' scales. No offset: the table values are signed. */
struct tab_dec {
    uint32_t lo[2][4], hi[2][4];
    float d[2];
};
OB_QFN float tab_dotd(const tab_dec &w, const pair_xin &x) {
    int s[2];
#pragma unroll
    for (int b = 0; b < 2; b++)
        s[b] = dot16(w.lo[b][0], w.lo[b][1], w.lo[b][2], w.lo[b][3], x.x[2 * b]) +
               dot16(w.hi[b][0], w.hi[b][1], w.hi[b][2], w.hi[b][3], x.x[2 * b + 1]);
    return ob_fadd(ob_fmul(w.d[0], ob_fmul(x.ds.x, (float)s[0])), ob_fmul(w.d[1], ob_fmul(x.ds.z, (float)s[1])));
}

/* IQ4_NL (18 bytes: d, 16 code bytes, as Q4_0). Chunk: a pair of blocks read as Q4_0's. */
template <> struct ob_qdot<OB_TYPE_IQ4_NL> {
    static constexpr int QK = 64, BYTES = 36, CHUNKS = 1;
    typedef ob_qdot<OB_TYPE_Q4_0>::raw raw;
    typedef pair_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) { ob_qdot<OB_TYPE_Q4_0>::load(row, c, r); }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { pair_xload(c, a, t, x); }
    typedef tab_dec dec;
    OB_QFN void decode(const raw &r, int, dec &w) {
        const uint32_t tab[4] = OB_TAB_IQ4NL;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            ob_table16(mid32(r.w[i], r.w[i + 1]), tab, w.lo[0][i], w.hi[0][i]);
            ob_table16(r.w[5 + i], tab, w.lo[1][i], w.hi[1][i]);
        }
        w.d[0] = ob_h2f((uint16_t)(r.w[0] & 0xffffu));
        w.d[1] = ob_h2f((uint16_t)(r.w[4] >> 16));
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) { return tab_dotd(w, x); }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* MXFP4 (17 bytes: the exponent byte, 16 code bytes as Q4_0's). Chunk: a pair of blocks, 34
 * bytes, only 2-byte aligned: seventeen 16-bit loads, the code words of block 0 shifted out of
 * their 1-byte offset and block 1's out of their 2-byte one. */
template <> struct ob_qdot<OB_TYPE_MXFP4> {
    static constexpr int QK = 64, BYTES = 34, CHUNKS = 1;
    struct raw {
        uint16_t h[17];
    };
    typedef pair_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint16_t *p = (const uint16_t *)(row + (size_t)c * BYTES);
#pragma unroll
        for (int i = 0; i < 17; i++) r.h[i] = p[i];
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { pair_xload(c, a, t, x); }
    typedef tab_dec dec;
    OB_QFN void decode(const raw &r, int, dec &w) {
        const uint32_t tab[4] = OB_TAB_MXFP4;
        uint32_t W[9];
#pragma unroll
        for (int k = 0; k < 8; k++) W[k] = (uint32_t)r.h[2 * k] | (uint32_t)r.h[2 * k + 1] << 16;
        W[8] = r.h[16];
        /* block 0: e = byte 0, codes 1..16; block 1: e = byte 17, codes 18..33 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            ob_table16(ob_shr64(W[i], W[i + 1], 8), tab, w.lo[0][i], w.hi[0][i]);
            ob_table16(ob_shr64(W[4 + i], W[5 + i], 16), tab, w.lo[1][i], w.hi[1][i]);
        }
        w.d[0] = ob_e8m0_half(W[0] & 0xffu);
        w.d[1] = ob_e8m0_half((W[4] >> 8) & 0xffu);
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) { return tab_dotd(w, x); }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* IQ4_XS (136 bytes: d, scales_h, scales_l[4], 128 code bytes; 8 sub-blocks of 32 whose 16
 * code bytes hold elements 0..15 in the low nibbles and 16..31 in the high ones, values
 * d (ls - 32) iq4nl[q]). Chunk c (4 per block): sub-blocks 2g and 2g + 1 (g = c % 4), their 32
 * code bytes contiguous at 8 + 32g, and the 8-byte header; blocks are 8-byte aligned, so five
 * 8-byte loads. ls of sub-block s: 4 bits of scales_l[s / 2] (low nibble first), 2 bits of
 * scales_h at 2s. */
template <> struct ob_qdot<OB_TYPE_IQ4_XS> {
    static constexpr int QK = 256, BYTES = 136, CHUNKS = 4;
    struct raw {
        uint2 h, q[4];
    };
    typedef kq_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint8_t *b = row + (size_t)(c >> 2) * BYTES;
        r.h = *(const uint2 *)b;
#pragma unroll
        for (int i = 0; i < 4; i++) r.q[i] = *(const uint2 *)(b + 8 + 32 * (c & 3) + 8 * i);
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { kq_xload(c, a, t, x); }
    struct dec {
        uint32_t lo[8], hi[8];
        float ds0, ds1;
    };
    OB_QFN void decode(const raw &r, int c, dec &w) {
        const uint32_t tab[4] = OB_TAB_IQ4NL;
        const uint32_t q[8] = {r.q[0].x, r.q[0].y, r.q[1].x, r.q[1].y, r.q[2].x, r.q[2].y, r.q[3].x, r.q[3].y};
#pragma unroll
        for (int i = 0; i < 8; i++) ob_table16(q[i], tab, w.lo[i], w.hi[i]);
        const int g = c & 3;
        const float d = ob_h2f((uint16_t)(r.h.x & 0xffffu));
        const uint32_t sh = r.h.x >> 16, sl = (r.h.y >> (8 * g)) & 0xffu;
        const int ls0 = (int)((sl & 15u) | ((sh >> (4 * g)) & 3u) << 4);
        const int ls1 = (int)((sl >> 4) | ((sh >> (4 * g + 2)) & 3u) << 4);
        w.ds0 = d * (float)(ls0 - 32), w.ds1 = d * (float)(ls1 - 32);
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) {
        const int s0 = dot16(w.lo[0], w.lo[1], w.lo[2], w.lo[3], x.x[0]) + dot16(w.hi[0], w.hi[1], w.hi[2], w.hi[3], x.x[1]);
        const int s1 = dot16(w.lo[4], w.lo[5], w.lo[6], w.lo[7], x.x[2]) + dot16(w.hi[4], w.hi[5], w.hi[6], w.hi[7], x.x[3]);
        return ob_fadd(ob_fmul(w.ds0, ob_fmul(x.dd.x, (float)s0)), ob_fmul(w.ds1, ob_fmul(x.dd.z, (float)s1)));
    }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* TQ2_0 (66 bytes: 64 code bytes, d; 2-byte aligned): element 128h + 32n + m is bits 2n of
 * qs[32h + m], value d (q - 1). Chunk c (4 per block): h = c % 4 / 2 and the fields n = 2p, 2p + 1
 * (p = c % 2) of the half's 32 code bytes - the two 32-element activation blocks 4h + 2p and
 * 4h + 2p + 1, as a K-quant group's - in sixteen 16-bit loads; the 1 comes off through the
 * blocks' scaled sums. */
template <> struct ob_qdot<OB_TYPE_TQ2_0> {
    static constexpr int QK = 256, BYTES = 66, CHUNKS = 4;
    struct raw {
        uint16_t q[16];
        uint16_t d;
    };
    typedef kq_xin xin;
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint8_t *b = row + (size_t)(c >> 2) * BYTES;
        const uint16_t *p = (const uint16_t *)(b + 32 * ((c & 3) >> 1));
#pragma unroll
        for (int i = 0; i < 16; i++) r.q[i] = p[i];
        r.d = *(const uint16_t *)(b + 64);
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) { kq_xload(c, a, t, x); }
    struct dec {
        uint32_t lo[8], hi[8];
        float d;
    };
    OB_QFN void decode(const raw &r, int c, dec &w) {
        const int sh = 4 * (c & 1);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint32_t v = (uint32_t)r.q[2 * k] | (uint32_t)r.q[2 * k + 1] << 16;
            w.lo[k] = (v >> sh) & 0x03030303u, w.hi[k] = (v >> (sh + 2)) & 0x03030303u;
        }
        w.d = ob_h2f(r.d);
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) {
        const int s0 = dot16(w.lo[0], w.lo[1], w.lo[2], w.lo[3], x.x[0]) + dot16(w.lo[4], w.lo[5], w.lo[6], w.lo[7], x.x[1]);
        const int s1 = dot16(w.hi[0], w.hi[1], w.hi[2], w.hi[3], x.x[2]) + dot16(w.hi[4], w.hi[5], w.hi[6], w.hi[7], x.x[3]);
        const float a = ob_fsub(ob_fmul(x.dd.x, (float)s0), x.dd.y), b = ob_fsub(ob_fmul(x.dd.z, (float)s1), x.dd.w);
        return ob_fmul(w.d, ob_fadd(a, b));
    }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* The base-3 digits of four TQ1_0 code bytes (w, byte i = code i), digits k .. k + m - 1: a code
 * byte r times 3 holds its next digit in bits 8-9 and the rest of the byte (r * 3 mod 256) below,
 * so two 16-bit lanes a word (bytes 0 and 2, bytes 1 and 3) step with one multiply and one mask,
 * and one byte permute gathers the four digits as the bytes of out[k]. Digits k < k0 are
 * stepped over (the byte times 3^k0 first). */
template <int K0, int M> OB_QFN void tq1_digits(uint32_t w, uint32_t *out) {
    uint32_t lo = w & 0x00FF00FFu, hi = (w >> 8) & 0x00FF00FFu;
    const uint32_t p = K0 == 0 ? 1u : K0 == 1 ? 3u : K0 == 2 ? 9u : K0 == 3 ? 27u : 81u;
    if (K0 > 0) lo = (lo * p) & 0x00FF00FFu, hi = (hi * p) & 0x00FF00FFu;
#pragma unroll
    for (int k = 0; k < M; k++) {
        const uint32_t tl = lo * 3u, th = hi * 3u;
        out[k] = ob_byte_perm(tl, th, 0x7351u);
        lo = tl & 0x00FF00FFu, hi = th & 0x00FF00FFu;
    }
}

/* TQ1_0 (54 bytes: 48 code bytes qs, 4 code bytes qh, d; 2-byte aligned): each byte holds five
 * (qh: four) base-3 digits, most significant first, value d (digit - 1); digit k of qs[m] is
 * element 32k + m (m < 32), of qs[32 + m] element 160 + 16k + m (m < 16), of qh[j] element
 * 240 + 4k + j. Chunk c (4 per block, k = c % 4): qs[8k .. 8k + 7] (40 elements of activation
 * blocks 0-4), qs[32 + 4k .. + 3] (20 of blocks 5-7) and qh[k] (4 of block 7), in eight 16-bit
 * loads. The chunk meets all eight activation blocks of the super-block, so the 1 comes off
 * through their scaled sums in chunk 0 alone. */
template <> struct ob_qdot<OB_TYPE_TQ1_0> {
    static constexpr int QK = 256, BYTES = 54, CHUNKS = 4;
    struct raw {
        uint16_t a[4], b[2], h, d;
    };
    struct xin {
        int2 a[5];   /* elements 32k + 8c' .. + 7 (c' = c % 4), k = 0..4 */
        int b[5];    /* elements 160 + 16k + 4c' .. + 3 */
        uint32_t h;  /* elements 240 + 4k + c', k = 0..3, a byte each */
        float dx[8]; /* the scales of the super-block's eight activation blocks */
        float sum;   /* chunk 0: the sum of their scaled sums; 0 otherwise */
    };
    OB_QFN void load(const uint8_t *row, int c, raw &r) {
        const uint8_t *b = row + (size_t)(c >> 2) * BYTES;
        const int k = c & 3;
        const uint16_t *pa = (const uint16_t *)(b + 8 * k), *pb = (const uint16_t *)(b + 32 + 4 * k);
#pragma unroll
        for (int i = 0; i < 4; i++) r.a[i] = pa[i];
        r.b[0] = pb[0], r.b[1] = pb[1];
        r.h = *(const uint16_t *)(b + 48 + 2 * (k >> 1));
        r.d = *(const uint16_t *)(b + 52);
    }
    OB_QFN void xload(int c, const q8_act &a, int t, xin &x) {
        const int k = c & 3;
        const int8_t *q = a.qx + t * a.ldq + (int64_t)(c >> 2) * 256;
#pragma unroll
        for (int n = 0; n < 5; n++) {
            x.a[n] = ld_x64(q + 32 * n + 8 * k);
            x.b[n] = *(const int *)(q + 160 + 16 * n + 4 * k);
        }
        const int4 e = ld_x128(q + 240);
        const uint32_t s = (uint32_t)(k | (k + 4) << 4); /* byte k of each of two words */
        const uint32_t xy = ob_byte_perm((uint32_t)e.x, (uint32_t)e.y, s), zw = ob_byte_perm((uint32_t)e.z, (uint32_t)e.w, s);
        x.h = ob_byte_perm(xy, zw, 0x5410u);
        const float *d = a.dx + t * a.ldd + 16 * (int64_t)(c >> 2);
        float s8 = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float4 v = *(const float4 *)(d + 4 * i);
            x.dx[2 * i] = v.x, x.dx[2 * i + 1] = v.z;
            s8 = ob_fadd(s8, ob_fadd(v.y, v.w));
        }
        x.sum = k == 0 ? s8 : 0.0f;
    }
    struct dec {
        uint32_t a[2][5], b[5], h;
        float d;
    };
    OB_QFN void decode(const raw &r, int c, dec &w) {
        tq1_digits<0, 5>((uint32_t)r.a[0] | (uint32_t)r.a[1] << 16, w.a[0]);
        tq1_digits<0, 5>((uint32_t)r.a[2] | (uint32_t)r.a[3] << 16, w.a[1]);
        tq1_digits<0, 5>((uint32_t)r.b[0] | (uint32_t)r.b[1] << 16, w.b);
        /* qh[k]'s four digits: the byte in the four byte lanes, stepped 0, 1, 2, 3 times */
        const uint32_t q = (r.h >> (8 * (c & 1))) & 0xffu;
        const uint32_t l02 = (q * 0x00090001u) & 0x00FF00FFu, l13 = (q * 0x001B0003u) & 0x00FF00FFu;
        w.h = ob_byte_perm(l02 * 3u, l13 * 3u, 0x7351u);
        w.d = ob_h2f(r.d);
    }
    OB_QFN float dotd(const dec &w, int, const xin &x) {
        int s[8];
#pragma unroll
        for (int n = 0; n < 5; n++)
            s[n] = ob_dp4a(w.a[1][n], (uint32_t)x.a[n].y, ob_dp4a(w.a[0][n], (uint32_t)x.a[n].x, 0));
        s[5] = ob_dp4a(w.b[1], (uint32_t)x.b[1], ob_dp4a(w.b[0], (uint32_t)x.b[0], 0));
        s[6] = ob_dp4a(w.b[3], (uint32_t)x.b[3], ob_dp4a(w.b[2], (uint32_t)x.b[2], 0));
        s[7] = ob_dp4a(w.h, x.h, ob_dp4a(w.b[4], (uint32_t)x.b[4], 0));
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) acc = ob_fadd(acc, ob_fmul(x.dx[i], (float)s[i]));
        return ob_fmul(w.d, ob_fsub(acc, x.sum));
    }
    OB_QFN float dot1(const raw &r, int c, const xin &x) {
        dec w;
        decode(r, c, w);
        return dotd(w, c, x);
    }
};

/* Whether the integer kernel handles type T. */
OB_QFN bool ob_qdot_has(int type) {
    return type == OB_TYPE_Q4_0 || type == OB_TYPE_Q8_0 || type == OB_TYPE_Q4_K || type == OB_TYPE_Q5_K ||
           type == OB_TYPE_Q6_K || type == OB_TYPE_IQ4_NL || type == OB_TYPE_MXFP4 || type == OB_TYPE_IQ4_XS ||
           type == OB_TYPE_TQ2_0 || type == OB_TYPE_TQ1_0;
}

/* Chunks in a row of nin elements of an integer-kernel type, by the type's number: nin / QK *
 * CHUNKS of its ob_qdot. Types without ob_qdot read as Q6_K: callers check ob_qdot_has first. */
OB_QFN int ob_qdot_row_chunks(int t, int64_t nin) {
#define OB_C(T) \
    case T: return (int)(nin / ob_qdot<T>::QK * ob_qdot<T>::CHUNKS);
    switch (t) {
        OB_C(OB_TYPE_Q4_0) OB_C(OB_TYPE_Q8_0) OB_C(OB_TYPE_Q4_K) OB_C(OB_TYPE_Q5_K) OB_C(OB_TYPE_IQ4_NL)
        OB_C(OB_TYPE_MXFP4) OB_C(OB_TYPE_IQ4_XS) OB_C(OB_TYPE_TQ2_0) OB_C(OB_TYPE_TQ1_0)
    default: return (int)(nin / ob_qdot<OB_TYPE_Q6_K>::QK * ob_qdot<OB_TYPE_Q6_K>::CHUNKS);
    }
#undef OB_C
}

/* One weight row against NT tokens' q8 activations: the reference loop
 * (every chunk in order), used by the host test; the kernel deals the same
 * chunks out to lanes. */
template <int T, int NT> OB_QFN void ob_qdot_row(const uint8_t *row, int64_t nin, const q8_act &a, float *acc) {
    typedef ob_qdot<T> Q;
    const int nc = (int)(nin / Q::QK) * Q::CHUNKS;
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int c = 0; c < nc; c++) {
        typename Q::raw r;
        Q::load(row, c, r);
        for (int t = 0; t < NT; t++) {
            typename Q::xin x;
            Q::xload(c, a, t, x);
            acc[t] = ob_fadd(acc[t], Q::dot1(r, c, x));
        }
    }
}

/* Host version of the activation quantizer (the kernels do the same per
 * 32): dx gets 2 floats per block, the scale and the scale times the sum. */
static inline void ob_q8_act_ref(const float *x, int64_t n, int8_t *qx, float *dx) {
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) sum += qx[b * 32 + i] = (int8_t)roundf(x[b * 32 + i] * id);
        dx[2 * b] = d;
        dx[2 * b + 1] = d * (float)sum;
    }
}

#endif
