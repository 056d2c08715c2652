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
 * (qx) and one float scale per 32 (dx): x[i] ~ dx[i/32] * qx[i], with
 * dx = max|x| / 127 over the 32 and qx = round(x / dx). This is the same
 * rounding the CPU's Q8_0 activation blocks use.
 *
 * A "unit" is what one lane does per step: a fixed run of weights of one
 * block (UW of them) and the activation bytes they meet. Consecutive lanes
 * take consecutive units, so a warp's loads of a block's codes are
 * contiguous. unit(blk, p, ...) returns the unit's contribution to the dot
 * product for each of NT tokens.
 */
#ifndef OB_CUDA_MMVQ_CUH
#define OB_CUDA_MMVQ_CUH

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

OB_QFN uint32_t ld_u32_a4(const uint8_t *p) { return *(const uint32_t *)p; }
OB_QFN int ld_i32_x(const int8_t *p) { return *(const int *)p; } /* activation bytes: 4-aligned */

/* Activations of NT tokens: qx[t * ldq + i], dx[t * ldd + i / 32]. */
struct q8_act {
    const int8_t *qx;
    const float *dx;
    int64_t ldq, ldd;
};

template <int T> struct ob_qdot;

/* Q4_0: d, then 16 bytes whose low nibbles are elements 0..15 and high
 * nibbles 16..31, value q - 8. Unit: 4 code bytes = elements 4p..4p+3 and
 * 16+4p..16+4p+3. */
template <> struct ob_qdot<OB_TYPE_Q4_0> {
    static constexpr int QK = 32, BYTES = 18, UNITS = 4;
    template <int NT> OB_QFN void unit(const uint8_t *b, int p, int64_t blk, const q8_act &a, float *acc) {
        const float d = ob_h2f((uint16_t)ld_u16(b));
        const uint32_t w = ld_u32_a2(b + 2 + 4 * p);
        const uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
        for (int t = 0; t < NT; t++) {
            const int8_t *q = a.qx + t * a.ldq + blk * 32;
            const int x0 = ld_i32_x(q + 4 * p), x1 = ld_i32_x(q + 16 + 4 * p);
            const int s = ob_dp4a(lo, (uint32_t)x0, ob_dp4a(hi, (uint32_t)x1, 0));
            const int sx = ob_dp4a(0x01010101u, (uint32_t)x0, ob_dp4a(0x01010101u, (uint32_t)x1, 0));
            acc[t] += d * a.dx[t * a.ldd + blk] * (float)(s - 8 * sx);
        }
    }
};

/* Q8_0: d, then 32 signed bytes. Unit: 8 of them. */
template <> struct ob_qdot<OB_TYPE_Q8_0> {
    static constexpr int QK = 32, BYTES = 34, UNITS = 4;
    template <int NT> OB_QFN void unit(const uint8_t *b, int p, int64_t blk, const q8_act &a, float *acc) {
        const float d = ob_h2f((uint16_t)ld_u16(b));
        const uint32_t w0 = ld_u32_a2(b + 2 + 8 * p), w1 = ld_u32_a2(b + 6 + 8 * p);
        for (int t = 0; t < NT; t++) {
            const int8_t *q = a.qx + t * a.ldq + blk * 32 + 8 * p;
            const int s = ob_dp4a(w0, (uint32_t)ld_i32_x(q), ob_dp4a(w1, (uint32_t)ld_i32_x(q + 4), 0));
            acc[t] += d * a.dx[t * a.ldd + blk] * (float)s;
        }
    }
};

/* Q4_K / Q5_K sub-block scale and min (6 bits each), as get_scale_min. */
OB_QFN void kq_scale_min(const uint8_t *sc, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
        *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
}

/* Q4_K (144 bytes: d, dmin, 12 scale bytes, 128 code bytes). Group g of 64
 * elements: code bytes 32g..32g+31, low nibbles = sub-block 2g, high = 2g+1;
 * element = d * sc * q - dmin * m. Unit p (16 per block): group p/4, code
 * bytes 32g + 8(p%4) .. +8: 8 elements of each of the two sub-blocks. */
template <> struct ob_qdot<OB_TYPE_Q4_K> {
    static constexpr int QK = 256, BYTES = 144, UNITS = 16;
    template <int NT> OB_QFN void unit(const uint8_t *b, int p, int64_t blk, const q8_act &a, float *acc) {
        const int g = p / 4, j = p % 4;
        const float d = ob_h2f((uint16_t)ld_u16(b)), dmin = ob_h2f((uint16_t)ld_u16(b + 2));
        int sc0, m0, sc1, m1;
        kq_scale_min(b + 4, 2 * g, &sc0, &m0);
        kq_scale_min(b + 4, 2 * g + 1, &sc1, &m1);
        const uint8_t *qs = b + 16 + 32 * g + 8 * j;
        const uint32_t c0 = ld_u32_a4(qs), c1 = ld_u32_a4(qs + 4);
        const uint32_t l0 = c0 & 0x0F0F0F0Fu, l1 = c1 & 0x0F0F0F0Fu;
        const uint32_t h0 = (c0 >> 4) & 0x0F0F0F0Fu, h1 = (c1 >> 4) & 0x0F0F0F0Fu;
        const float ds0 = d * (float)sc0, dm0 = dmin * (float)m0, ds1 = d * (float)sc1, dm1 = dmin * (float)m1;
        for (int t = 0; t < NT; t++) {
            const int64_t xb = blk * 8 + 2 * g; /* 32-element activation blocks of the two sub-blocks */
            const int8_t *q0 = a.qx + t * a.ldq + xb * 32 + 8 * j, *q1 = q0 + 32;
            const uint32_t x00 = (uint32_t)ld_i32_x(q0), x01 = (uint32_t)ld_i32_x(q0 + 4);
            const uint32_t x10 = (uint32_t)ld_i32_x(q1), x11 = (uint32_t)ld_i32_x(q1 + 4);
            const int s0 = ob_dp4a(l0, x00, ob_dp4a(l1, x01, 0)), s1 = ob_dp4a(h0, x10, ob_dp4a(h1, x11, 0));
            const int z0 = ob_dp4a(0x01010101u, x00, ob_dp4a(0x01010101u, x01, 0));
            const int z1 = ob_dp4a(0x01010101u, x10, ob_dp4a(0x01010101u, x11, 0));
            const float *dx = a.dx + t * a.ldd + xb;
            acc[t] += dx[0] * (ds0 * (float)s0 - dm0 * (float)z0) + dx[1] * (ds1 * (float)s1 - dm1 * (float)z1);
        }
    }
};

/* Q5_K (176 bytes: d, dmin, 12 scale bytes, 32 high-bit bytes, 128 code
 * bytes): as Q4_K, plus bit 2g (low nibbles) or 2g+1 (high nibbles) of
 * high-bit byte l adds 16 to element l of the group's sub-blocks. */
template <> struct ob_qdot<OB_TYPE_Q5_K> {
    static constexpr int QK = 256, BYTES = 176, UNITS = 16;
    template <int NT> OB_QFN void unit(const uint8_t *b, int p, int64_t blk, const q8_act &a, float *acc) {
        const int g = p / 4, j = p % 4;
        const float d = ob_h2f((uint16_t)ld_u16(b)), dmin = ob_h2f((uint16_t)ld_u16(b + 2));
        int sc0, m0, sc1, m1;
        kq_scale_min(b + 4, 2 * g, &sc0, &m0);
        kq_scale_min(b + 4, 2 * g + 1, &sc1, &m1);
        const uint8_t *qs = b + 48 + 32 * g + 8 * j, *qh = b + 16 + 8 * j;
        const uint32_t c0 = ld_u32_a4(qs), c1 = ld_u32_a4(qs + 4);
        const uint32_t e0 = ld_u32_a4(qh), e1 = ld_u32_a4(qh + 4);
        const uint32_t l0 = (c0 & 0x0F0F0F0Fu) | (((e0 >> (2 * g)) & 0x01010101u) << 4);
        const uint32_t l1 = (c1 & 0x0F0F0F0Fu) | (((e1 >> (2 * g)) & 0x01010101u) << 4);
        const uint32_t h0 = ((c0 >> 4) & 0x0F0F0F0Fu) | (((e0 >> (2 * g + 1)) & 0x01010101u) << 4);
        const uint32_t h1 = ((c1 >> 4) & 0x0F0F0F0Fu) | (((e1 >> (2 * g + 1)) & 0x01010101u) << 4);
        const float ds0 = d * (float)sc0, dm0 = dmin * (float)m0, ds1 = d * (float)sc1, dm1 = dmin * (float)m1;
        for (int t = 0; t < NT; t++) {
            const int64_t xb = blk * 8 + 2 * g;
            const int8_t *q0 = a.qx + t * a.ldq + xb * 32 + 8 * j, *q1 = q0 + 32;
            const uint32_t x00 = (uint32_t)ld_i32_x(q0), x01 = (uint32_t)ld_i32_x(q0 + 4);
            const uint32_t x10 = (uint32_t)ld_i32_x(q1), x11 = (uint32_t)ld_i32_x(q1 + 4);
            const int s0 = ob_dp4a(l0, x00, ob_dp4a(l1, x01, 0)), s1 = ob_dp4a(h0, x10, ob_dp4a(h1, x11, 0));
            const int z0 = ob_dp4a(0x01010101u, x00, ob_dp4a(0x01010101u, x01, 0));
            const int z1 = ob_dp4a(0x01010101u, x10, ob_dp4a(0x01010101u, x11, 0));
            const float *dx = a.dx + t * a.ldd + xb;
            acc[t] += dx[0] * (ds0 * (float)s0 - dm0 * (float)z0) + dx[1] * (ds1 * (float)s1 - dm1 * (float)z1);
        }
    }
};

/* Q6_K (210 bytes: 128 low-nibble bytes ql, 64 high-bit bytes qh, 16 signed
 * scales, d). Half h (128 elements): for l < 32, elements l, l+32, l+64,
 * l+96 take ql[64h+l] low, ql[64h+32+l] low, ql[64h+l] high,
 * ql[64h+32+l] high, with bits 0-1, 2-3, 4-5, 6-7 of qh[32h+l] on top, minus
 * 32; scale of element e of the block: scales[e / 16]. Unit p (16 per
 * block): half p/8, l = 4(p%8) .. +4: 16 elements. Blocks are only 2-byte
 * aligned (210 bytes), so 32-bit loads are two 16-bit ones. */
template <> struct ob_qdot<OB_TYPE_Q6_K> {
    static constexpr int QK = 256, BYTES = 210, UNITS = 16;
    template <int NT> OB_QFN void unit(const uint8_t *b, int p, int64_t blk, const q8_act &a, float *acc) {
        const int h = p / 8, l = 4 * (p % 8);
        const float d = ob_h2f((uint16_t)ld_u16(b + 208));
        const uint32_t qa = ld_u32_a2(b + 64 * h + l), qb = ld_u32_a2(b + 64 * h + 32 + l);
        const uint32_t e = ld_u32_a2(b + 128 + 32 * h + l);
        uint32_t w[4];
        w[0] = ob_vsub4((qa & 0x0F0F0F0Fu) | ((e << 4) & 0x30303030u), 0x20202020u);
        w[1] = ob_vsub4((qb & 0x0F0F0F0Fu) | ((e << 2) & 0x30303030u), 0x20202020u);
        w[2] = ob_vsub4(((qa >> 4) & 0x0F0F0F0Fu) | (e & 0x30303030u), 0x20202020u);
        w[3] = ob_vsub4(((qb >> 4) & 0x0F0F0F0Fu) | ((e >> 2) & 0x30303030u), 0x20202020u);
        const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + l / 16;
        float ds[4];
        for (int k = 0; k < 4; k++) ds[k] = d * (float)sc[2 * k];
        for (int t = 0; t < NT; t++) {
            const int64_t xb = blk * 8 + 4 * h; /* element 128h + 32k + l is in activation block xb + k */
            const int8_t *q = a.qx + t * a.ldq + xb * 32 + l;
            const float *dx = a.dx + t * a.ldd + xb;
            float s = 0.0f;
            for (int k = 0; k < 4; k++) s += dx[k] * ds[k] * (float)ob_dp4a(w[k], (uint32_t)ld_i32_x(q + 32 * k), 0);
            acc[t] += s;
        }
    }
};

/* Whether the integer kernel handles type T. */
OB_QFN bool ob_qdot_has(int type) {
    return type == OB_TYPE_Q4_0 || type == OB_TYPE_Q8_0 || type == OB_TYPE_Q4_K || type == OB_TYPE_Q5_K ||
           type == OB_TYPE_Q6_K;
}

/* One weight row against NT tokens' q8 activations: the reference loop
 * (every unit in order), used by the host test; the kernel deals the same
 * units out to lanes. */
template <int T, int NT> OB_QFN void ob_qdot_row(const uint8_t *row, int64_t nin, const q8_act &a, float *acc) {
    typedef ob_qdot<T> Q;
    const int64_t nb = nin / Q::QK;
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int64_t blk = 0; blk < nb; blk++)
        for (int p = 0; p < Q::UNITS; p++) Q::template unit<NT>(row + (size_t)blk * Q::BYTES, p, blk, a, acc);
}

/* Host version of the activation quantizer (the kernel does the same per 32). */
static inline void ob_q8_act_ref(const float *x, int64_t n, int8_t *qx, float *dx) {
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int i = 0; i < 32; i++) qx[b * 32 + i] = (int8_t)roundf(x[b * 32 + i] * id);
        dx[b] = d;
    }
}

#endif
