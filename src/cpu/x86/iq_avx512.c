/*
 * iq_avx512.c - AVX-512 VNNI matmul kernels for the codebook ("IQ") weight
 * types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M, on
 * ob_act_q8K activations, native rows (no packed panels). Compiled with the
 * AVX2 set plus -mavx512f/bw/vl/dq/vnni; ob_cpu_fill_iq_avx512 installs
 * them in the AVX-512 table only when the CPU reports AVX512_VNNI (without
 * it the table keeps the AVX2 kernels of iq_avx2.c). The scalar tier's
 * kernels are the reference they are tested against (tests/
 * test_cpu_kernels.c), as for every tier.
 *
 * Same arithmetic as iq_avx2.c (exact int32 sums per super-block, one
 * float multiply-add per super-block and token), on 64 weights at a time:
 *   - two groups of 32 per zmm. Their grid entries: gathers are slow on
 *     the core this was measured on (Zen 4), so the 8-byte IQ2/IQ1 entries
 *     come by eight scalar loads (vpgatherqq measured 20-30% slower), the
 *     4-byte IQ3 ones half by a ymm vpgatherdd and half by scalar loads
 *     (faster than either alone for one token; IQ3_XXS with 4 or 8 tokens
 *     takes all sixteen by loads, faster there);
 *   - the sign bits are a mask register (k = 64 sign bits, read directly
 *     for IQ2_S/IQ3_S's explicit sign bytes; for the 7-bit sign indices of
 *     IQ2_XXS/IQ2_XS/IQ3_XXS the eighth bit, the parity of the seven, is
 *     computed for a whole super-block in vector lanes instead of 32 table
 *     loads), applied to the activations with one masked subtract (0 - a
 *     where set) instead of the -1/+1 byte vector and vpsignb;
 *   - vpmaddubsw (unsigned grid bytes times signed activations, pairs into
 *     int16, at most 2 * 62 * 127 = 15748) and then vpdpwssd, which weights
 *     the pairs by the int16 scale 2 ls + 1 of their group (or half group)
 *     and adds them into the int32 accumulator: one instruction where the
 *     AVX2 kernel needs vpmaddwd and vpaddd.
 * vpdpbusd (four products into int32 in one step) does not fit: the
 * per-group scale would then need an int32 multiply per group and token,
 * and grid * scale does not fit the signed byte operand (43 * 31).
 *
 * IQ1 weights are 8 (g + delta) = 8 g +- 1 (g in -1, 0, 1), exact nonzero
 * bytes, as in iq_avx2.c: their absolute values multiply the activations
 * negated where the weight is negative (the mask is the weight's sign bit).
 *
 * NT = 1, 2, 4 or 8 activation rows per call (SPLIT_NT): a pair of groups
 * is unpacked once for NT tokens; each token's sum depends on that token
 * alone (batch invariance, kernels.h).
 */
#include <immintrin.h>
#include <string.h>

#include "../../quant/iq_tables.h"
#include "../kernels.h"
#include "split_nt.h"

#define INLINE static inline __attribute__((always_inline))

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }

INLINE uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* (a & mask) | c, one vpternlogd */
INLINE __m512i or_and(__m512i a, __m512i mask, __m512i c) { return _mm512_ternarylogic_epi32(a, mask, c, 0xEA); }

/* int16 scales: s0 for the first group of 32 (low 256 bits), s1 for the second. */
INLINE __m512i scale_pair(int s0, int s1) {
    return _mm512_inserti64x4(_mm512_set1_epi16((short)s0), _mm256_set1_epi16((short)s1), 1);
}

/* int16 scales per 16 weights from four 3-bit fields f (bits 0..11 of w): the
 * 128-bit lane m gets 2 f_m + 1 (IQ1_M: two scales per group). */
INLINE __m512i scale_quad3(uint32_t w) {
    const __m512i sh = _mm512_set_epi64(0x0009000900090009, 0x0009000900090009, 0x0006000600060006, 0x0006000600060006,
                                        0x0003000300030003, 0x0003000300030003, 0, 0);
    const __m512i v = _mm512_and_si512(_mm512_srlv_epi16(_mm512_set1_epi16((short)w), sh), _mm512_set1_epi16(7));
    return _mm512_add_epi16(_mm512_add_epi16(v, v), _mm512_set1_epi16(1));
}

/* 7-bit sign indices s in 32-bit lanes -> ob_iq2_signs[s] (s with its
 * parity as bit 7) in the low byte of each lane. */
INLINE __m512i sign_bytes_epi32(__m512i s) {
    __m512i t = _mm512_xor_si512(s, _mm512_srli_epi32(s, 4));
    t = _mm512_xor_si512(t, _mm512_srli_epi32(t, 2));
    t = _mm512_xor_si512(t, _mm512_srli_epi32(t, 1));
    return or_and(_mm512_slli_epi32(t, 7), _mm512_set1_epi32(0x80), s);
}

/* The meta words of a super-block's 8 groups (32-bit lane g of m; bits
 * 7k..7k+6 the sign index of the k-th 8 elements of group g) -> its 256
 * sign bits in element order, as four 64-bit masks (sb[p]: groups 2p and
 * 2p + 1). */
INLINE void signs_of_meta8(__m256i m, uint64_t sb[4]) {
    const __m512i shifts = _mm512_set_epi32(21, 14, 7, 0, 21, 14, 7, 0, 21, 14, 7, 0, 21, 14, 7, 0);
    const __m512i lo = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(4));
    const __m512i m5 = _mm512_castsi256_si512(m), x7 = _mm512_set1_epi32(127);
    const __m512i s0 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(lo, m5), shifts), x7);
    const __m512i s1 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(hi, m5), shifts), x7);
    const __m128i b0 = _mm512_cvtepi32_epi8(sign_bytes_epi32(s0)), b1 = _mm512_cvtepi32_epi8(sign_bytes_epi32(s1));
    _mm_storeu_si128((__m128i *)(void *)sb, b0);
    _mm_storeu_si128((__m128i *)(void *)(sb + 2), b1);
}

#define LOAD_A(t, p) _mm512_loadu_si512((const void *)(ACT_Q8K(act, as, t, i)->qs + 64 * (p)))


/* Groups 2p, 2p + 1 (64 weights): isum[t] += sc * pairs of grid * (a, negated where km). */
#define PAIR(grid, km, sc)                                                                                  \
    do {                                                                                                    \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {                                             \
            const __m512i a_ = _mm512_mask_sub_epi8(LOAD_A(t, p), (km), _mm512_setzero_si512(), LOAD_A(t, p)); \
            isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16((grid), a_), (sc));               \
        }                                                                                                   \
    } while (0)

/* End of a super-block: acc[t] += isum[t] * d * d_a * f. */
#define FLUSH(DW, F)                                                                                       \
    do {                                                                                                   \
        const float dw_ = (DW) * (F);                                                                      \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) acc[t] = _mm512_fmadd_ps(                     \
            _mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(dw_ * ACT_Q8K(act, as, t, i)->d), acc[t]);         \
    } while (0)

#define BODY_BEGIN                                               \
    const int64_t nb = n / OB_QK_K;                              \
    __m512 acc[8];                                               \
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();   \
    for (int64_t i = 0; i < nb; i++) {                           \
        __m512i isum[8];                                         \
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();

#define BODY_END                                                         \
    }                                                                    \
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = _mm512_reduce_add_ps(acc[t]);

/* Pick the int16 scales of a pair of groups (or four half groups) out of a
 * vector of per-group scales: 128-bit lane m of the result is word wm of v
 * repeated (wm constant once the p loop is unrolled). */
INLINE __m512i pick4(__m512i v, int w0, int w1, int w2, int w3) {
    const __m256i lo = _mm256_set_m128i(_mm_set1_epi16((short)w1), _mm_set1_epi16((short)w0));
    const __m256i hi = _mm256_set_m128i(_mm_set1_epi16((short)w3), _mm_set1_epi16((short)w2));
    return _mm512_permutexvar_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), v);
}

/* 2 f + 1 for eight 4-bit fields of w: 32-bit lane j gets field j (16-bit word 2j). */
INLINE __m512i odd_scales8(uint32_t w) {
    const __m512i sh = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 28, 24, 20, 16, 12, 8, 4, 0);
    const __m512i v = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)w), sh), _mm512_set1_epi32(15));
    return _mm512_add_epi32(_mm512_add_epi32(v, v), _mm512_set1_epi32(1));
}

/* Eight uint64 grid entries by scalar loads (faster than vpgatherqq here). */
#define GRID8(tab, i0, i1, i2, i3, i4, i5, i6, i7)                                                              \
    _mm512_set_epi64((long long)(tab)[i7], (long long)(tab)[i6], (long long)(tab)[i5], (long long)(tab)[i4],     \
                     (long long)(tab)[i3], (long long)(tab)[i2], (long long)(tab)[i1], (long long)(tab)[i0])

/* Sixteen uint32 grid entries: the first eight with a vpgatherdd (idx: their
 * 32-bit indices), the other eight by scalar loads - the mix measured faster
 * than either alone (the gather and the loads use different resources). */
#define GRID16(tab, idx, e8, e9, e10, e11, e12, e13, e14, e15)                                           \
    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_i32gather_epi32((const int *)(tab), (idx), 4)),      \
                       _mm256_set_epi32((int)(tab)[e15], (int)(tab)[e14], (int)(tab)[e13], (int)(tab)[e12], \
                                        (int)(tab)[e11], (int)(tab)[e10], (int)(tab)[e9], (int)(tab)[e8]), 1)

/* IQ2_XXS: x = d * (2 ls + 1) / 8 * grid * sign; per group 4 grid bytes, then
 * a word of four 7-bit sign indices and ls in its top 4 bits. */
INLINE void body_iq2_xxs(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const __m512i meta_of = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 15, 13, 11, 9, 7, 5, 3, 1);
    BODY_BEGIN
    const ob_block_iq2_xxs *x = (const ob_block_iq2_xxs *)w + i;
    const __m512i q = _mm512_loadu_si512((const void *)x->qs);
    uint64_t sb[4];
    signs_of_meta8(_mm512_castsi512_si256(_mm512_permutexvar_epi32(meta_of, q)), sb);
    /* 2 ls + 1 in the low word of each meta dword (dword 2g + 1 = word 4g + 2) */
    const __m512i scw = _mm512_srli_epi32(q, 28);
    const __m512i sc8 = _mm512_add_epi32(_mm512_add_epi32(scw, scw), _mm512_set1_epi32(1));
    const uint8_t *qb = (const uint8_t *)x->qs;
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        const uint8_t *g = qb + 16 * p;
        const __m512i grid = GRID8(ob_iq2xxs_grid, g[0], g[1], g[2], g[3], g[8], g[9], g[10], g[11]);
        const __m512i sc = pick4(sc8, 8 * p + 2, 8 * p + 2, 8 * p + 6, 8 * p + 6);
        PAIR(grid, _cvtu64_mask64(sb[p]), sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ2_XS: 9-bit grid index and 7-bit sign index per 8; two 4-bit scales per group. */
INLINE void body_iq2_xs(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq2_xs *x = (const ob_block_iq2_xs *)w + i;
    const __m512i q = _mm512_loadu_si512((const void *)x->qs);
    /* the sign indices (top 7 bits of each word) -> sign bytes, in element order */
    const __m512i s = _mm512_srli_epi16(q, 9);
    __m512i par = _mm512_xor_si512(s, _mm512_srli_epi16(s, 4));
    par = _mm512_xor_si512(par, _mm512_srli_epi16(par, 2));
    par = _mm512_xor_si512(par, _mm512_srli_epi16(par, 1));
    const __m256i sg = _mm512_cvtepi16_epi8(or_and(_mm512_slli_epi16(par, 7), _mm512_set1_epi16(0x80), s));
    uint64_t sb[4];
    _mm256_storeu_si256((__m256i *)(void *)sb, sg);
    const __m512i sc16 = odd_scales8(load_u32(x->scales)), sc16h = odd_scales8(load_u32(x->scales + 4));
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        const uint16_t *g = x->qs + 8 * p;
        const __m512i grid = GRID8(ob_iq2xs_grid, g[0] & 511, g[1] & 511, g[2] & 511, g[3] & 511, g[4] & 511,
                                   g[5] & 511, g[6] & 511, g[7] & 511);
        /* groups 2p, 2p + 1: scales[2p] and scales[2p + 1], low nibble first;
         * odd_scales8 takes nibbles of a 32-bit word: nibble 2k, 2k + 1 of byte k */
        const __m512i sc = p < 2 ? pick4(sc16, 8 * p, 8 * p + 2, 8 * p + 4, 8 * p + 6)
                                 : pick4(sc16h, 8 * (p - 2), 8 * (p - 2) + 2, 8 * (p - 2) + 4, 8 * (p - 2) + 6);
        PAIR(grid, _cvtu64_mask64(sb[p]), sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ2_S: 10-bit grid index (qs + 2 bits of qh), explicit sign bytes. */
INLINE void body_iq2_s(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq2_s *x = (const ob_block_iq2_s *)w + i;
    const __m512i sc16 = odd_scales8(load_u32(x->scales)), sc16h = odd_scales8(load_u32(x->scales + 4));
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        const uint8_t *g = x->qs + 8 * p;
        const int h0 = x->qh[2 * p], h1 = x->qh[2 * p + 1];
        const __m512i grid = GRID8(ob_iq2s_grid, g[0] | (h0 & 3) << 8, g[1] | (h0 & 12) << 6, g[2] | (h0 & 48) << 4,
                                   g[3] | (h0 & 192) << 2, g[4] | (h1 & 3) << 8, g[5] | (h1 & 12) << 6,
                                   g[6] | (h1 & 48) << 4, g[7] | (h1 & 192) << 2);
        const __m512i sc = p < 2 ? pick4(sc16, 8 * p, 8 * p + 2, 8 * p + 4, 8 * p + 6)
                                 : pick4(sc16h, 8 * (p - 2), 8 * (p - 2) + 2, 8 * (p - 2) + 4, 8 * (p - 2) + 6);
        PAIR(grid, _cvtu64_mask64(load_u64(x->qs + OB_QK_K / 8 + 8 * p)), sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ3_XXS: 8 grid entries of 4 per group, signs and scale in a 32-bit word:
 * x = d * (2 ls + 1) / 4 * grid * sign. */
INLINE void body_iq3_xxs(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq3_xxs *x = (const ob_block_iq3_xxs *)w + i;
    const __m256i meta = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + OB_QK_K / 4));
    uint64_t sb[4];
    signs_of_meta8(meta, sb);
    const __m512i scw = _mm512_srli_epi32(_mm512_castsi256_si512(meta), 28);
    const __m512i sc8 = _mm512_add_epi32(_mm512_add_epi32(scw, scw), _mm512_set1_epi32(1));
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        const uint8_t *g = x->qs + 16 * p;
        /* one token: the gather + loads mix; four or eight: all sixteen by
         * scalar loads, which measured faster there (the same entries either way) */
        __m512i grid;
        if (NT >= 4) {
#define T(j) (int)ob_iq3xxs_grid[g[j]]
            grid = _mm512_set_epi32(T(15), T(14), T(13), T(12), T(11), T(10), T(9), T(8), T(7), T(6), T(5), T(4), T(3),
                                    T(2), T(1), T(0));
#undef T
        } else {
            const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)g));
            grid = GRID16(ob_iq3xxs_grid, idx, g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
        }
        const __m512i sc = pick4(sc8, 4 * p, 4 * p, 4 * p + 2, 4 * p + 2);
        PAIR(grid, _cvtu64_mask64(sb[p]), sc);
    }
    FLUSH(h2f(x->d), 0.25f);
    BODY_END
}

/* IQ3_S: 9-bit grid indices (qs + 1 bit of qh), explicit sign bytes,
 * x = d * (2 ls + 1) * grid * sign. */
INLINE void body_iq3_s(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const __m256i b8 = _mm256_set1_epi32(256);
    BODY_BEGIN
    const ob_block_iq3_s *x = (const ob_block_iq3_s *)w + i;
    const __m512i sc8 = odd_scales8(load_u32(x->scales));
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        const uint8_t *g = x->qs + 16 * p;
        const int h0 = x->qh[2 * p], h1 = x->qh[2 * p + 1];
        __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)g));
        idx = _mm256_mask_or_epi32(idx, _cvtu32_mask8((unsigned)h0), idx, b8);
#define G3(j) (g[8 + (j)] | ((h1 >> (j)) & 1) << 8)
        const __m512i grid = GRID16(ob_iq3s_grid, idx, G3(0), G3(1), G3(2), G3(3), G3(4), G3(5), G3(6), G3(7));
#undef G3
        const __m512i sc = pick4(sc8, 4 * p, 4 * p, 4 * p + 2, 4 * p + 2);
        PAIR(grid, _cvtu64_mask64(load_u64(x->signs + 8 * p)), sc);
    }
    FLUSH(h2f(x->d), 1.0f);
    BODY_END
}

/* IQ1: grid bytes g in {-1, 0, 1} -> w = 8 g + delta (delta +-1 bytes), never
 * 0; |w| multiplies a negated where w < 0. */
#define PAIR_IQ1(grid, delta, sc)                                                                          \
    do {                                                                                                   \
        const __m512i w8_ = _mm512_add_epi8(                                                               \
            _mm512_and_si512(_mm512_slli_epi16((grid), 3), _mm512_set1_epi8((char)0xf8)), (delta));       \
        const __m512i aw_ = _mm512_abs_epi8(w8_);                                                          \
        PAIR(aw_, _mm512_movepi8_mask(w8_), (sc));                                                         \
    } while (0)

#define DELTA_POS 0x0101010101010101ll

/* IQ1_S: x = d * (2 ls + 1) * (grid + delta), one ls and delta per group. */
INLINE void body_iq1_s(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq1_s *x = (const ob_block_iq1_s *)w + i;
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        const uint8_t *g = x->qs + 8 * p;
        const int h0 = x->qh[2 * p], h1 = x->qh[2 * p + 1];
        const __m512i grid =
            GRID8(ob_iq1s_grid, g[0] | (h0 & 7) << 8, g[1] | ((h0 >> 3) & 7) << 8, g[2] | ((h0 >> 6) & 7) << 8,
                  g[3] | ((h0 >> 9) & 7) << 8, g[4] | (h1 & 7) << 8, g[5] | ((h1 >> 3) & 7) << 8,
                  g[6] | ((h1 >> 6) & 7) << 8, g[7] | ((h1 >> 9) & 7) << 8);
        const __mmask8 kd = _cvtu32_mask8((h0 & 0x8000 ? 0x0fu : 0u) | (h1 & 0x8000 ? 0xf0u : 0u));
        const __m512i delta = _mm512_mask_blend_epi64(kd, _mm512_set1_epi64(DELTA_POS), _mm512_set1_epi64(-1));
        const __m512i sc = scale_pair(2 * ((h0 >> 12) & 7) + 1, 2 * ((h1 >> 12) & 7) + 1);
        PAIR_IQ1(grid, delta, sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ1_M: a delta per 8, a 3-bit scale per 16, d spread over the scales' top nibbles. */
INLINE void body_iq1_m(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const __m512i dsh = _mm512_set_epi64(31, 27, 23, 19, 15, 11, 7, 3);
    BODY_BEGIN
    const ob_block_iq1_m *x = (const ob_block_iq1_m *)w + i;
    uint16_t sw[4];
    memcpy(sw, x->scales, sizeof sw);
    const uint16_t dbits =
        (uint16_t)((sw[0] >> 12) | ((sw[1] >> 8) & 0x00f0) | ((sw[2] >> 4) & 0x0f00) | (sw[3] & 0xf000));
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        const uint8_t *g = x->qs + 8 * p;
        /* nibble j of hw: 3 index bits and the delta flag of the j-th 8 of the pair */
        const uint32_t hw = load_u32(x->qh + 4 * p);
        const __m512i grid =
            GRID8(ob_iq1s_grid, g[0] | (hw & 7) << 8, g[1] | ((hw >> 4) & 7) << 8, g[2] | ((hw >> 8) & 7) << 8,
                  g[3] | ((hw >> 12) & 7) << 8, g[4] | ((hw >> 16) & 7) << 8, g[5] | ((hw >> 20) & 7) << 8,
                  g[6] | ((hw >> 24) & 7) << 8, g[7] | ((hw >> 28) & 7) << 8);
        const __mmask8 kd = _mm512_test_epi64_mask(_mm512_srlv_epi64(_mm512_set1_epi64((long long)hw), dsh),
                                                   _mm512_set1_epi64(1));
        const __m512i delta = _mm512_mask_blend_epi64(kd, _mm512_set1_epi64(DELTA_POS), _mm512_set1_epi64(-1));
        PAIR_IQ1(grid, delta, scale_quad3(sw[p]));
    }
    FLUSH(h2f(dbits), 0.125f);
    BODY_END
}

#define DEF_DOT(name)                                                                                           \
    static void dot_##name##_avx512(int64_t n, const void *w, const void *act, size_t as, int nt, float *out,   \
                                    size_t os) {                                                              \
        SPLIT_NT(body_##name, n, w, act, as, nt, out, os);                                                    \
    }
DEF_DOT(iq2_xxs)
DEF_DOT(iq2_xs)
DEF_DOT(iq2_s)
DEF_DOT(iq3_xxs)
DEF_DOT(iq3_s)
DEF_DOT(iq1_s)
DEF_DOT(iq1_m)

void ob_cpu_fill_iq_avx512(ob_cpu_kernels *k, const ob_cpu_features *f) {
    if (!f->avx512vnni) return;
#define SET(T, name) k->mm[T] = (ob_mm_kernels){.act = OB_ACT_Q8K, .dot = dot_##name##_avx512}
    SET(OB_TYPE_IQ2_XXS, iq2_xxs);
    SET(OB_TYPE_IQ2_XS, iq2_xs);
    SET(OB_TYPE_IQ2_S, iq2_s);
    SET(OB_TYPE_IQ3_XXS, iq3_xxs);
    SET(OB_TYPE_IQ3_S, iq3_s);
    SET(OB_TYPE_IQ1_S, iq1_s);
    SET(OB_TYPE_IQ1_M, iq1_m);
#undef SET
}
