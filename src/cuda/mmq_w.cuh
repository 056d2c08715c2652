/*
 * mmq_w.cuh - the weight pieces the tensor-core products read: a piece is 32
 * elements of a row that share one scale (Q6_K: two 16-element halves).
 * load() issues a piece's global reads, decode() turns the raw bytes into
 * int8 codes (element order), the scale(s) and the offset factor. mmq.cu
 * multiplies the codes on int8 tensor cores; mmw.cu turns them into bf16
 * values for 16-bit tensor cores.
 */
#ifndef OB_CUDA_MMQ_W_CUH
#define OB_CUDA_MMQ_W_CUH

#include "common.cuh"
#include "mmvq.cuh" /* ob_vsub4 */
#include "quant.cuh"

/* ---- weight pieces: raw bytes (load) and their int8 codes and scales (decode) ----
 *
 * piece p (0..7) of step kb of a row: elements 256 kb + 32 p .. + 31. load()
 * issues the global reads only; decode() turns them into 8 words of int8
 * codes (element order), the piece's scale(s) dw and its offset factor mw. */
template <int T> struct mmq_w;

/* Whether w is of a type mmq_w has, with rows and data aligned as its loads need (16 bytes for
 * Q4_K/Q5_K's uint4 loads, 2 for the others). */
static inline bool mmq_w_loadable(const ob_tensor *w) {
    switch ((int)w->type) {
    case OB_TYPE_Q4_K:
    case OB_TYPE_Q5_K:
        return w->nb[1] % 16 == 0 && (uintptr_t)w->data % 16 == 0;
    case OB_TYPE_Q6_K:
    case OB_TYPE_Q4_0:
    case OB_TYPE_Q8_0:
        return w->nb[1] % 2 == 0 && (uintptr_t)w->data % 2 == 0;
    default:
        return false;
    }
}

/* k4_scale_min (quant.cuh) on the 12 scale bytes held in three words, with
 * a run-time sub-block index that stays in registers. */
static __device__ __forceinline__ void k4_scale_min_words(uint32_t w0, uint32_t w1, uint32_t w2, int p, int &sc,
                                                          int &mn) {
    const uint64_t lo = (uint64_t)w1 << 32 | w0; /* bytes 0..7 */
    if (p < 4) {
        sc = (int)(lo >> (8 * p)) & 63;
        mn = (int)(lo >> (8 * (p + 4))) & 63;
    } else {
        const int b4 = (int)(w2 >> (8 * (p - 4))) & 0xff; /* byte p + 4 */
        sc = (b4 & 0x0f) | (((int)(lo >> (8 * (p - 4))) & 0xff) >> 6) << 4;
        mn = (b4 >> 4) | (((int)(lo >> (8 * p)) & 0xff) >> 6) << 4;
    }
}

template <> struct mmq_w<OB_TYPE_Q4_K> {
    static constexpr int SUB = 32;
    static constexpr bool MIN = true;
    struct raw {
        uint4 head, c0, c1; /* d, dmin, 12 scale bytes; the 32 code bytes of the piece's pair */
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int kb, int p, raw &r) {
        const uint8_t *b = row + (size_t)kb * 144;
        r.head = *(const uint4 *)b;
        r.c0 = *(const uint4 *)(b + 16 + 32 * (p / 2));
        r.c1 = *(const uint4 *)(b + 32 + 32 * (p / 2));
    }
    static __device__ __forceinline__ void decode(const raw &r, int p, uint32_t q[8], float dw[2], float &mw) {
        const uint32_t w[8] = {r.c0.x, r.c0.y, r.c0.z, r.c0.w, r.c1.x, r.c1.y, r.c1.z, r.c1.w};
        const int sh = 4 * (p & 1);
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = (w[i] >> sh) & 0x0F0F0F0Fu;
        int sc, mn;
        k4_scale_min_words(r.head.y, r.head.z, r.head.w, p, sc, mn);
        const float d = ob_h2f((uint16_t)(r.head.x & 0xffffu)), dmin = ob_h2f((uint16_t)(r.head.x >> 16));
        dw[0] = dw[1] = d * (float)sc;
        mw = -dmin * (float)mn;
    }
};

template <> struct mmq_w<OB_TYPE_Q5_K> {
    static constexpr int SUB = 32;
    static constexpr bool MIN = true;
    struct raw {
        uint4 head, h0, h1, c0, c1; /* d, dmin, scales; the 32 high-bit bytes; the pair's 32 code bytes */
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int kb, int p, raw &r) {
        const uint8_t *b = row + (size_t)kb * 176;
        r.head = *(const uint4 *)b;
        r.h0 = *(const uint4 *)(b + 16);
        r.h1 = *(const uint4 *)(b + 32);
        r.c0 = *(const uint4 *)(b + 48 + 32 * (p / 2));
        r.c1 = *(const uint4 *)(b + 64 + 32 * (p / 2));
    }
    static __device__ __forceinline__ void decode(const raw &r, int p, uint32_t q[8], float dw[2], float &mw) {
        const uint32_t w[8] = {r.c0.x, r.c0.y, r.c0.z, r.c0.w, r.c1.x, r.c1.y, r.c1.z, r.c1.w};
        const uint32_t h[8] = {r.h0.x, r.h0.y, r.h0.z, r.h0.w, r.h1.x, r.h1.y, r.h1.z, r.h1.w};
        const int sh = 4 * (p & 1);
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = ((w[i] >> sh) & 0x0F0F0F0Fu) | (((h[i] >> p) & 0x01010101u) << 4);
        int sc, mn;
        k4_scale_min_words(r.head.y, r.head.z, r.head.w, p, sc, mn);
        const float d = ob_h2f((uint16_t)(r.head.x & 0xffffu)), dmin = ob_h2f((uint16_t)(r.head.x >> 16));
        dw[0] = dw[1] = d * (float)sc;
        mw = -dmin * (float)mn;
    }
};

/* Q6_K (210 bytes, 2-byte aligned): ql[128], qh[64], scales[16], d. Piece p:
 * h = p / 4, k = p % 4; low nibble from ql[64 h + 32 (k & 1) + l] >> 4 (k >> 1),
 * two high bits from qh[32 h + l] >> 2 k; the code minus 32 is the signed
 * value. Two 16-element sub-blocks with integer scales: decode gives the
 * two scales as integers (their bits in dw[0], dw[1]) and the block's d in
 * mw; the kernel weighs the two halves' integer sums by them in integers. */
template <> struct mmq_w<OB_TYPE_Q6_K> {
    static constexpr int SUB = 16;
    static constexpr bool MIN = false;
    struct raw {
        uint32_t l[8], h[8];
        uint32_t sc; /* scales[2p], scales[2p + 1] */
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int kb, int p, raw &r) {
        const uint8_t *b = row + (size_t)kb * 210;
        const int h = p / 4, k = p % 4;
        const uint16_t *pl = (const uint16_t *)(b + 64 * h + 32 * (k & 1)), *ph = (const uint16_t *)(b + 128 + 32 * h);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            r.l[i] = (uint32_t)pl[2 * i] | (uint32_t)pl[2 * i + 1] << 16;
            r.h[i] = (uint32_t)ph[2 * i] | (uint32_t)ph[2 * i + 1] << 16;
        }
        r.sc = *(const uint16_t *)(b + 192 + 2 * p);
        r.d = *(const uint16_t *)(b + 208);
    }
    static __device__ __forceinline__ void decode(const raw &r, int p, uint32_t q[8], float dw[2], float &mw) {
        const int k = p % 4, sl = 4 * (k >> 1), sh = 2 * k;
#pragma unroll
        for (int i = 0; i < 8; i++)
            q[i] = ob_vsub4(((r.l[i] >> sl) & 0x0F0F0F0Fu) | (((r.h[i] >> sh) & 0x03030303u) << 4), 0x20202020u);
        dw[0] = __int_as_float((int)(int8_t)(r.sc & 0xffu));
        dw[1] = __int_as_float((int)(int8_t)(r.sc >> 8));
        mw = ob_h2f((uint16_t)r.d);
    }
};

/* Q4_0 (18 bytes, 2-byte aligned): the piece is block 8 kb + p; low nibbles
 * are elements 0..15, high nibbles 16..31, value q - 8 (the codes go to the
 * tensor cores as the signed bytes q - 8, so there is no offset term). */
template <> struct mmq_w<OB_TYPE_Q4_0> {
    static constexpr int SUB = 32;
    static constexpr bool MIN = false;
    struct raw {
        uint32_t c[4];
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int kb, int p, raw &r) {
        const uint16_t *b = (const uint16_t *)(row + (size_t)(8 * kb + p) * 18);
        r.d = b[0];
#pragma unroll
        for (int i = 0; i < 4; i++) r.c[i] = (uint32_t)b[1 + 2 * i] | (uint32_t)b[2 + 2 * i] << 16;
    }
    static __device__ __forceinline__ void decode(const raw &r, int, uint32_t q[8], float dw[2], float &mw) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            q[i] = ob_vsub4(r.c[i] & 0x0F0F0F0Fu, 0x08080808u), q[4 + i] = ob_vsub4((r.c[i] >> 4) & 0x0F0F0F0Fu, 0x08080808u);
        const float d = ob_h2f((uint16_t)r.d);
        dw[0] = dw[1] = d;
        mw = 0.0f;
    }
};

/* Q8_0 (34 bytes, 2-byte aligned): block 8 kb + p, 32 signed bytes. */
template <> struct mmq_w<OB_TYPE_Q8_0> {
    static constexpr int SUB = 32;
    static constexpr bool MIN = false;
    struct raw {
        uint32_t c[8];
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int kb, int p, raw &r) {
        const uint16_t *b = (const uint16_t *)(row + (size_t)(8 * kb + p) * 34);
        r.d = b[0];
#pragma unroll
        for (int i = 0; i < 8; i++) r.c[i] = (uint32_t)b[1 + 2 * i] | (uint32_t)b[2 + 2 * i] << 16;
    }
    static __device__ __forceinline__ void decode(const raw &r, int, uint32_t q[8], float dw[2], float &mw) {
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = r.c[i];
        dw[0] = dw[1] = ob_h2f((uint16_t)r.d);
        mw = 0.0f;
    }
};

#endif
