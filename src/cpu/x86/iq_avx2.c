/*
 * iq_avx2.c - AVX2 matmul kernels for the codebook ("IQ") weight types
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M, on ob_act_q8K
 * activations. Compiled with -mavx2 -mfma -mf16c like avx2.c; the
 * dispatcher adds them to the AVX2 table (and so to the AVX-512 one, which
 * starts as a copy of it) through ob_cpu_fill_iq_avx2. The scalar tier's
 * kernels for these types (scalar.c) are the reference they are tested
 * against (tests/test_cpu_kernels.c).
 *
 * The same method as ggml's integer IQ dots: per group of 32 weights, the
 * grid entries the block indexes are looked up and set into one vector of
 * 32 unsigned bytes (the grid magnitudes: at most 43 for IQ2, 62 for
 * IQ3_XXS, 15 for IQ3_S), the group's sign bits become a vector of -1/+1
 * bytes applied to the activations (vpsignb), vpmaddubsw multiplies and adds
 * pairs into int16 (at most 2 * 62 * 127 = 15748, no saturation), and
 * vpmaddwd weights the pairs by the group's odd integer scale 2 ls + 1 into
 * int32. A super-block's int32 sum (at most 256 * 31 * 62 * 127, 6.2e7)
 * becomes a float once, times d_w * d_a and the format's constant factor
 * (IQ2: 1/8, IQ3_XXS: 1/4, IQ3_S: 1).
 *
 * IQ1_S/IQ1_M weights are d * (2 ls + 1) * (g + delta) with g in {-1, 0, 1}
 * and delta = +-1/8: the byte 8 g +- 1 (never 0, |.| <= 9) is an exact
 * integer weight, multiplied with the sign trick (|w| times a with w's
 * sign) and scaled by 1/8 at the end, so the shift needs no separate
 * activation sums.
 *
 * Each kernel takes NT = 1, 2, 4 or 8 activation rows per call (SPLIT_NT, as
 * in avx2.c): a group's weights are unpacked once and multiplied into NT
 * accumulators. A row's result depends on that row alone (batch
 * invariance, kernels.h).
 */
#include <immintrin.h>
#include <string.h>

#include "../../quant/iq_tables.h"
#include "../kernels.h"
#include "split_nt.h"

#define INLINE static inline __attribute__((always_inline))

INLINE float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }

INLINE uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 32 sign bits (bit i set: element i negative) -> bytes -1 / +1. */
INLINE __m256i signs32(uint32_t bits) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
    return _mm256_or_si256(v, _mm256_set1_epi8(1));
}

/* Four 7-bit sign indices (bits 0..27 of meta) -> 32 sign bits. */
INLINE uint32_t signs_of_meta(uint32_t meta) {
    return (uint32_t)ob_iq2_signs[meta & 127] | (uint32_t)ob_iq2_signs[(meta >> 7) & 127] << 8 |
           (uint32_t)ob_iq2_signs[(meta >> 14) & 127] << 16 | (uint32_t)ob_iq2_signs[(meta >> 21) & 127] << 24;
}

/* int16 scale vector: s0 for elements 0..15 of a group, s1 for 16..31. */
INLINE __m256i scale_pair(int s0, int s1) {
    return _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
}

/* Four uint64 grid entries -> one vector (entry k in bytes 8k..8k+7). */
INLINE __m256i grid4(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3) {
    return _mm256_set_epi64x((long long)g3, (long long)g2, (long long)g1, (long long)g0);
}

#define LOAD_A(act, as, t, i, g) \
    _mm256_loadu_si256((const __m256i *)(const void *)(ACT_Q8K(act, as, t, i)->qs + 32 * (g)))


/* One group of 32: isum[t] += sum over pairs of scale * (grid * (a * sign)). */
#define GROUP_UNSIGNED(grid, sg, sc)                                                                      \
    do {                                                                                                  \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {                                           \
            const __m256i p_ = _mm256_maddubs_epi16((grid), _mm256_sign_epi8(LOAD_A(act, as, t, i, g), (sg))); \
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p_, (sc)));                           \
        }                                                                                                 \
    } while (0)

/* End of a super-block: acc[t] += isum[t] * d * d_a * f. */
#define FLUSH(DW, F)                                                                                       \
    do {                                                                                                   \
        const float dw_ = (DW) * (F);                                                                      \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) acc[t] = _mm256_fmadd_ps(                     \
            _mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(dw_ * ACT_Q8K(act, as, t, i)->d), acc[t]);         \
    } while (0)

#define BODY_BEGIN                                               \
    const int64_t nb = n / OB_QK_K;                              \
    __m256 acc[8];                                               \
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();   \
    for (int64_t i = 0; i < nb; i++) {                           \
        __m256i isum[8];                                         \
        for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();

#define BODY_END                                                         \
    }                                                                    \
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]);

/* IQ2_XXS: x = d * (2 ls + 1) / 8 * grid * sign, one ls per group. */
INLINE void body_iq2_xxs(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq2_xxs *x = (const ob_block_iq2_xxs *)w + i;
    for (int g = 0; g < 8; g++) {
        const uint16_t *q = x->qs + 4 * g;
        const uint32_t idx = (uint32_t)q[0] | (uint32_t)q[1] << 16, meta = (uint32_t)q[2] | (uint32_t)q[3] << 16;
        const __m256i grid = grid4(ob_iq2xxs_grid[idx & 255], ob_iq2xxs_grid[(idx >> 8) & 255],
                                   ob_iq2xxs_grid[(idx >> 16) & 255], ob_iq2xxs_grid[idx >> 24]);
        const __m256i sg = signs32(signs_of_meta(meta));
        const __m256i sc = _mm256_set1_epi16((short)(2 * (meta >> 28) + 1));
        GROUP_UNSIGNED(grid, sg, sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ2_XS: 9-bit grid index and 7-bit sign index per 8; two 4-bit scales per group. */
INLINE void body_iq2_xs(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq2_xs *x = (const ob_block_iq2_xs *)w + i;
    for (int g = 0; g < 8; g++) {
        const uint16_t *q = x->qs + 4 * g;
        const __m256i grid = grid4(ob_iq2xs_grid[q[0] & 511], ob_iq2xs_grid[q[1] & 511], ob_iq2xs_grid[q[2] & 511],
                                   ob_iq2xs_grid[q[3] & 511]);
        const uint32_t sb = (uint32_t)ob_iq2_signs[q[0] >> 9] | (uint32_t)ob_iq2_signs[q[1] >> 9] << 8 |
                            (uint32_t)ob_iq2_signs[q[2] >> 9] << 16 | (uint32_t)ob_iq2_signs[q[3] >> 9] << 24;
        const __m256i sg = signs32(sb);
        const __m256i sc = scale_pair(2 * (x->scales[g] & 15) + 1, 2 * (x->scales[g] >> 4) + 1);
        GROUP_UNSIGNED(grid, sg, sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ2_S: 10-bit grid index (qs + 2 bits of qh), explicit sign bytes. */
INLINE void body_iq2_s(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq2_s *x = (const ob_block_iq2_s *)w + i;
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 4 * g;
        const int h = x->qh[g];
        const __m256i grid = grid4(ob_iq2s_grid[q[0] | (h & 3) << 8], ob_iq2s_grid[q[1] | ((h >> 2) & 3) << 8],
                                   ob_iq2s_grid[q[2] | ((h >> 4) & 3) << 8], ob_iq2s_grid[q[3] | ((h >> 6) & 3) << 8]);
        const __m256i sg = signs32(load_u32(x->qs + OB_QK_K / 8 + 4 * g));
        const __m256i sc = scale_pair(2 * (x->scales[g] & 15) + 1, 2 * (x->scales[g] >> 4) + 1);
        GROUP_UNSIGNED(grid, sg, sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ3_XXS: 8 grid entries of 4 per group, signs and scale in a 32-bit word:
 * x = d * (2 ls + 1) / 4 * grid * sign. */
INLINE void body_iq3_xxs(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq3_xxs *x = (const ob_block_iq3_xxs *)w + i;
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 8 * g;
        const __m256i grid = _mm256_set_epi32(
            (int)ob_iq3xxs_grid[q[7]], (int)ob_iq3xxs_grid[q[6]], (int)ob_iq3xxs_grid[q[5]], (int)ob_iq3xxs_grid[q[4]],
            (int)ob_iq3xxs_grid[q[3]], (int)ob_iq3xxs_grid[q[2]], (int)ob_iq3xxs_grid[q[1]], (int)ob_iq3xxs_grid[q[0]]);
        const uint32_t meta = load_u32(x->qs + OB_QK_K / 4 + 4 * g);
        const __m256i sg = signs32(signs_of_meta(meta));
        const __m256i sc = _mm256_set1_epi16((short)(2 * (meta >> 28) + 1));
        GROUP_UNSIGNED(grid, sg, sc);
    }
    FLUSH(h2f(x->d), 0.25f);
    BODY_END
}

/* IQ3_S: 9-bit grid indices (qs + 1 bit of qh), explicit sign bytes,
 * x = d * (2 ls + 1) * grid * sign. */
INLINE void body_iq3_s(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq3_s *x = (const ob_block_iq3_s *)w + i;
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 8 * g;
        const int h = x->qh[g];
#define G3(j) (int)ob_iq3s_grid[q[j] | ((h >> (j)) & 1) << 8]
        const __m256i grid = _mm256_set_epi32(G3(7), G3(6), G3(5), G3(4), G3(3), G3(2), G3(1), G3(0));
#undef G3
        const __m256i sg = signs32(load_u32(x->signs + 4 * g));
        const int ls = (x->scales[g / 2] >> (4 * (g % 2))) & 15;
        const __m256i sc = _mm256_set1_epi16((short)(2 * ls + 1));
        GROUP_UNSIGNED(grid, sg, sc);
    }
    FLUSH(h2f(x->d), 1.0f);
    BODY_END
}

/* One IQ1 group: w = 8 * grid + delta bytes (delta +-1 per byte), times a by
 * the sign trick, pairs scaled by sc. */
#define GROUP_IQ1(grid, delta, sc)                                                                   \
    do {                                                                                             \
        const __m256i w8_ = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), (grid)), (delta)); \
        const __m256i aw_ = _mm256_sign_epi8(w8_, w8_);                                              \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {                                      \
            const __m256i p_ = _mm256_maddubs_epi16(aw_, _mm256_sign_epi8(LOAD_A(act, as, t, i, g), w8_)); \
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p_, (sc)));                       \
        }                                                                                            \
    } while (0)

#define DELTA8(neg) ((neg) ? (long long)-1 : (long long)0x0101010101010101ll)

/* IQ1_S: x = d * (2 ls + 1) * (grid + delta), one ls and delta per group. */
INLINE void body_iq1_s(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq1_s *x = (const ob_block_iq1_s *)w + i;
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 4 * g;
        const int h = x->qh[g];
        const __m256i grid = grid4(ob_iq1s_grid[q[0] | (h & 7) << 8], ob_iq1s_grid[q[1] | ((h >> 3) & 7) << 8],
                                   ob_iq1s_grid[q[2] | ((h >> 6) & 7) << 8], ob_iq1s_grid[q[3] | ((h >> 9) & 7) << 8]);
        const __m256i delta = _mm256_set1_epi64x(DELTA8(h & 0x8000));
        const __m256i sc = _mm256_set1_epi16((short)(2 * ((h >> 12) & 7) + 1));
        GROUP_IQ1(grid, delta, sc);
    }
    FLUSH(h2f(x->d), 0.125f);
    BODY_END
}

/* IQ1_M: a delta per 8, a 3-bit scale per 16, d spread over the scales' top nibbles. */
INLINE void body_iq1_m(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    BODY_BEGIN
    const ob_block_iq1_m *x = (const ob_block_iq1_m *)w + i;
    uint16_t sw[4];
    for (int k = 0; k < 4; k++) sw[k] = (uint16_t)(x->scales[2 * k] | x->scales[2 * k + 1] << 8);
    const uint16_t dbits =
        (uint16_t)((sw[0] >> 12) | ((sw[1] >> 8) & 0x00f0) | ((sw[2] >> 4) & 0x0f00) | (sw[3] & 0xf000));
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 4 * g;
        /* per run of 8: 3 index bits and the delta flag (bit 3 of each nibble) */
        const uint32_t h0 = x->qh[2 * g], h1 = x->qh[2 * g + 1];
        const __m256i grid = grid4(ob_iq1s_grid[q[0] | (h0 & 7) << 8], ob_iq1s_grid[q[1] | ((h0 >> 4) & 7) << 8],
                                   ob_iq1s_grid[q[2] | (h1 & 7) << 8], ob_iq1s_grid[q[3] | ((h1 >> 4) & 7) << 8]);
        /* the four flags -> 0xff in byte k where set -> -1/+1 for each run of 8 */
        const uint32_t flags = ((h0 >> 3) & 1) | ((h0 >> 7) & 1) << 8 | ((h1 >> 3) & 1) << 16 | ((h1 >> 7) & 1) << 24;
        const __m256i delta = signs32(flags * 0xffu);
        const int shift = 6 * (g % 2);
        const __m256i sc = scale_pair(2 * ((sw[g / 2] >> shift) & 7) + 1, 2 * ((sw[g / 2] >> (shift + 3)) & 7) + 1);
        GROUP_IQ1(grid, delta, sc);
    }
    FLUSH(h2f(dbits), 0.125f);
    BODY_END
}

#define DEF_DOT(name)                                                                                           \
    static void dot_##name##_avx2(int64_t n, const void *w, const void *act, size_t as, int nt, float *out,     \
                                  size_t os) {                                                                \
        SPLIT_NT(body_##name, n, w, act, as, nt, out, os);                                                    \
    }
DEF_DOT(iq2_xxs)
DEF_DOT(iq2_xs)
DEF_DOT(iq2_s)
DEF_DOT(iq3_xxs)
DEF_DOT(iq3_s)
DEF_DOT(iq1_s)
DEF_DOT(iq1_m)

void ob_cpu_fill_iq_avx2(ob_cpu_kernels *k) {
#define SET(T, name) k->mm[T] = (ob_mm_kernels){.act = OB_ACT_Q8K, .dot = dot_##name##_avx2}
    SET(OB_TYPE_IQ2_XXS, iq2_xxs);
    SET(OB_TYPE_IQ2_XS, iq2_xs);
    SET(OB_TYPE_IQ2_S, iq2_s);
    SET(OB_TYPE_IQ3_XXS, iq3_xxs);
    SET(OB_TYPE_IQ3_S, iq3_s);
    SET(OB_TYPE_IQ1_S, iq1_s);
    SET(OB_TYPE_IQ1_M, iq1_m);
#undef SET
}
