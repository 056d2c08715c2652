/*
 * panel_kq.h - the 16-row panel layout of the 256-element types (Q2_K...Q6_K,
 * IQ4_XS, TQ1_0, TQ2_0) and the AVX-512 helpers that read panels, shared by
 * x86/avx512.c (VNNI) and x86/amx.c (AMX tiles). Each file compiles it with
 * its own -m flags (both include the AVX-512 set).
 */
#ifndef OB_CPU_X86_PANEL_KQ_H
#define OB_CPU_X86_PANEL_KQ_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../quant/blocks.h"
#include "../../quant/iq_tables.h"
#include "../kernels.h"
#include "panel_a8.h"

#ifndef INLINE
#define INLINE static inline __attribute__((always_inline))
#endif

/* (a & mask) | c, one vpternlogd */
INLINE __m512i or_and(__m512i a, __m512i mask, __m512i c) { return _mm512_ternarylogic_epi32(a, mask, c, 0xEA); }

INLINE __m512i bcast32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

INLINE __m512 load_h16(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }



/* 2^(e - 128) for 16 E8M0 exponents (ob_e8m0_to_fp32_half, vectorized). */
INLINE __m512 e8m0_half16(const uint8_t *e) {
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)e));
    __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    __mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
}

/* ======================================================================
 * 256-element types: Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS TQ1_0 TQ2_0
 *
 * Each super-block (16 rows x 256 elements) is laid out so a gemv reads it
 * front to back as one stream: the scales of a few sub-blocks sit right
 * after those sub-blocks' codes, never in an area of their own that a
 * second pointer would trail through (measured: that alone cost Q6_K more
 * than half its single-core DRAM bandwidth). "unit" below is such a run of
 * codes plus its scales; sizes in bytes. Super-blocks whose size is not a
 * multiple of 64 are stored in pairs (kq_group) so every unit stays aligned;
 * a group starts with the d (and dmin) halves of its super-blocks.
 *
 *   Q4_K  d[16], dmin[16] halves (64, leading the super-block), the rows'
 *         12 packed scale bytes as three chunks (192: unpacked to 6-bit
 *         scales and mins in the kernel, once per 16 rows), then 4 units p
 *         (512): chunks j 0..7 of the rows' qs[32p+4j..+3] (low nibbles:
 *         sub-block 2p, high: 2p+1). Exactly the row format's size.
 *   Q5_K  as Q4_K, each unit (640) also holding qh[128]: two chunks v,
 *         byte i of row r has bit m = bit 4 of element 4(4v+m)+i of
 *         sub-block 2p and bit 4+m that of sub-block 2p+1, so shifting
 *         right by m lines both up (as the Q5_0 high bits).
 *   Q6_K  4 units (832) of 4 sub-blocks of 16: per sub-block three chunks
 *         (low nibbles of its elements 4c+i, c 0,1 in chunk 0's low/high
 *         nibbles, c 2,3 in chunk 1's; 2-bit highs of c 0..3 in bits 2c of
 *         chunk 2), then the 4 sub-blocks' scales [4][16] int8; d[16] halves.
 *   IQ4_XS 2 units (1088) of 4 sub-blocks of 32: per sub-block chunks c
 *         0..3 of the rows' qs[16s+4c..+3] (low nibbles: elements 4c+i,
 *         high: 16+4c+i), then [4][16] int8 scales ls - 32; d[16] halves.
 *   Q2_K  2 units h (640): chunks c 0..7 of the rows' qs[32h+4c..+3] (bits
 *         2k of byte i: element 128h+32k+4c+i), then the packed scale
 *         bytes (sc | mn << 4) of sub-blocks 8h..8h+7; d, dmin (64).
 *   Q3_K  hmask chunks first (512: bit k' of byte i of chunk c = bit 2 of
 *         element 32k'+4c+i; both halves use them), then 2 units h (640) as
 *         Q2_K's with int8 scales sc - 32; d[16].
 *   TQ2_0 the 16 code chunks as Q2_K's (1024); d[16].
 *   TQ1_0 13 chunks of the rows' bytes (qs[4j..], j 0..11, then qh), base-3
 *         digits decoded in the kernel (832); d[16].
 * ====================================================================== */

enum { KQ_Q4_K, KQ_Q5_K, KQ_Q6_K, KQ_IQ4_XS, KQ_Q2_K, KQ_Q3_K, KQ_TQ2_0, KQ_TQ1_0 };

/* bytes of one super-block of 16 rows, without its d (and dmin) */
INLINE size_t kq_body_bytes(int kind) {
    switch (kind) {
    case KQ_Q4_K: return 192 + 4 * 512;
    case KQ_Q5_K: return 192 + 4 * 640;
    case KQ_Q6_K: return 4 * 832;
    case KQ_IQ4_XS: return 2 * 1088;
    case KQ_Q2_K: return 2 * 640;
    case KQ_Q3_K: return 512 + 2 * 640;
    case KQ_TQ2_0: return 1024;
    default: return 832; /* TQ1_0 */
    }
}
/* d halves of 16 rows, then dmin halves for the types that have them */
INLINE size_t kq_d_bytes(int kind) { return kind == KQ_Q4_K || kind == KQ_Q5_K || kind == KQ_Q2_K ? 64 : 32; }
INLINE int kq_group(int kind) { return (kq_body_bytes(kind) + kq_d_bytes(kind)) % 64 ? 2 : 1; }
/* A group is [d of its G super-blocks][their bodies]: the d are read at the
 * end of each super-block, from lines the stream has just passed. */
INLINE uint8_t *kq_group_at(int kind, const void *panel, int64_t sb) {
    const int64_t G = kq_group(kind);
    return (uint8_t *)panel + (size_t)(sb / G) * (size_t)G * (kq_body_bytes(kind) + kq_d_bytes(kind));
}
INLINE uint8_t *kq_sb(int kind, const void *panel, int64_t sb) {
    const int64_t G = kq_group(kind);
    return kq_group_at(kind, panel, sb) + (size_t)G * kq_d_bytes(kind) + (size_t)(sb % G) * kq_body_bytes(kind);
}
INLINE uint8_t *kq_d(int kind, const void *panel, int64_t sb) {
    return kq_group_at(kind, panel, sb) + (size_t)(sb % kq_group(kind)) * kq_d_bytes(kind);
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block s of 16 rows, from the
 * rows' 12 packed bytes (lanes of w0..w2 = bytes 0..3, 4..7, 8..11) */
INLINE void k4_scale(int s, __m512i w0, __m512i w1, __m512i w2, __m512i *sc, __m512i *mn) {
    const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
    if (s < 4) {
        *sc = _mm512_and_si512(_mm512_srli_epi32(w0, (unsigned)(8 * s)), m63);
        *mn = _mm512_and_si512(_mm512_srli_epi32(w1, (unsigned)(8 * s)), m63);
    } else {
        const unsigned b = (unsigned)(8 * (s - 4));
        *sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, b), m15),
                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, b + 6), m3), 4));
        *mn = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, b + 4), m15),
                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, b + 6), m3), 4));
    }
}

INLINE __m512i load_u8x16(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)); }
INLINE __m512i load_i8x16(const uint8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)); }

/* the minimum term of Q4_K/Q5_K/Q2_K: 16-bit dot of the rows' mins (pairs of
 * sub-blocks in the two halves of each lane) with the activation sums */
INLINE __m512i mins_dot(const __m512i mnp[8], int npairs, const int16_t *sums) {
    __m512i ms = _mm512_setzero_si512();
    for (int q = 0; q < npairs; q++) {
        int32_t pair;
        memcpy(&pair, sums + 2 * q, 4);
        ms = _mm512_dpwssd_epi32(ms, mnp[q], _mm512_set1_epi32(pair));
    }
    return ms;
}

/* TQ1_0: base-3 digit dg (0..4) of each byte of a code chunk, as bytes 0, 1 or 2:
 * (byte * 3^dg mod 256) * 3 >> 8, i.e. as the product is below 86, below 171, or above */
INLINE __m512i tq1_digit(__m512i raw, int dg) {
    static const short pow3[5] = {1, 3, 9, 27, 81};
    const __m512i k3 = _mm512_set1_epi16(pow3[dg]);
    const __m512i lo = _mm512_and_si512(_mm512_mullo_epi16(raw, k3), _mm512_set1_epi16(0x00ff));
    const __m512i hi = _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(raw, 8), k3), 8);
    const __m512i r = _mm512_or_si512(lo, hi);
    const __mmask64 ge86 = _mm512_cmpge_epu8_mask(r, _mm512_set1_epi8(86));
    const __mmask64 ge171 = _mm512_cmpge_epu8_mask(r, _mm512_set1_epi8((char)171));
    return _mm512_add_epi8(_mm512_maskz_mov_epi8(ge86, _mm512_set1_epi8(1)), _mm512_maskz_mov_epi8(ge171, _mm512_set1_epi8(1)));
}
/* the element of byte 0 of TQ1_0 chunk j (0..12) for digit dg */
INLINE int tq1_element(int j, int dg) { return j < 8 ? 32 * dg + 4 * j : j < 12 ? 160 + 16 * dg + 4 * (j - 8) : 240 + 4 * dg; }


/* The legacy 32-element types (panel_a8.h): the codes of chunk j of a block
 * as unsigned bytes - lo: elements 4j+i, hi: 16+4j+i. hb is the block's
 * high-bit chunk (Q5_0/Q5_1), lut the +128 table of a8_lut (IQ4_NL, MXFP4). */
INLINE void a8_codes(int kind, __m512i raw, __m512i hb, int j, __m512i lut, __m512i *lo, __m512i *hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
    if (a8_has_h(kind)) {
        const __m512i tj = _mm512_srli_epi16(hb, (unsigned)j);
        *lo = or_and(raw, m4, _mm512_and_si512(_mm512_slli_epi16(tj, 4), m10));
        *hi = or_and(_mm512_srli_epi16(raw, 4), m4, _mm512_and_si512(tj, m10));
    } else {
        *lo = _mm512_and_si512(raw, m4);
        *hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
    }
    if (kind == A8_IQ4_NL || kind == A8_MXFP4) {
        *lo = _mm512_shuffle_epi8(lut, *lo);
        *hi = _mm512_shuffle_epi8(lut, *hi);
    }
}
/* IQ4_NL / MXFP4: their value table + 128 in every 128-bit lane (zero for the other kinds) */
INLINE __m512i a8_lut(int kind) {
    if (kind != A8_IQ4_NL && kind != A8_MXFP4) return _mm512_setzero_si512();
    const int8_t *v = kind == A8_IQ4_NL ? ob_iq4nl_values : ob_mxfp4_values;
    uint8_t t[16];
    for (int i = 0; i < 16; i++) t[i] = (uint8_t)(v[i] + 128);
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)t));
}

#endif
