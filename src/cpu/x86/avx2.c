/*
 * avx2.c - the AVX2 + FMA + F16C tier. Compiled with -mavx2 -mfma -mf16c
 * (see CMakeLists.txt) and only called when the CPU reports those features.
 *
 * What it owns: activation quantizers, one `dot` kernel per weight type on
 * the native (file) layout, and the attention inner loops; and panels
 * (kernels.h: 16 rows repacked at load, a SIMD lane a row) for the types
 * whose codes are small unsigned numbers, so the 16-bit saturating
 * vpmaddubsw can sum several products in int16 before one vpmaddwd: Q4_0
 * (avx512.c's layout, x86/panel_a8.h), and F16/BF16 (float outer products).
 * Signed codes (Q8_0, IQ4_NL) would need the +128 offset the VNNI panels
 * use, which overflows vpmaddubsw's int16 pairs; they keep the native dots.
 *
 * Shape of every quantized dot kernel: one weight row against NT (1, 2 or 4)
 * activation rows at once, so each weight block is loaded and unpacked once
 * and then multiplied into NT accumulators (prefill calls it with up to 8
 * tokens, split 4 + 4). The 8-bit products use vpmaddubsw (unsigned x signed
 * bytes -> pairs summed in int16) then vpmaddwd (pairs -> int32):
 *   - unsigned codes (Q4_0/Q4_1/Q5_x nibbles, K-quant codes, ternary digits)
 *     go in as they are, and the code offset (Q4_0's 8, Q6_K's 32 ...) is
 *     taken out once per block through the activation sums;
 *   - signed codes (Q8_0, IQ4 and MXFP4 table values) use the sign trick:
 *     |w| times a with w's sign, which stays inside int16 for |a| <= 127.
 * Per-block int32 sums become floats once per block (legacy types) or once
 * per 256-element super-block (K types, whose 4- to 8-bit sub-block scales
 * multiply in integers first).
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../quant/iq_tables.h"
#include "../../quant/quant_ref.h"
#include "../kernels.h"
#include "panel_a8.h"

#define INLINE static inline __attribute__((always_inline))

INLINE float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

INLINE int hsum256_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* unsigned bytes u times signed bytes s, summed in groups of 4 -> int32 x 8 */
INLINE __m256i dot_us(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }
/* same, each pair sum weighted by the int16 in `scale` (per 128-bit half) */
INLINE __m256i dot_us_scaled(__m256i u, __m256i s, __m256i scale) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale);
}

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles first, then high. */
INLINE __m256i nibbles32(const uint8_t *q) {
    __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)q);
    __m256i r = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(r, _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes, byte i = 0x10 if bit i is set, else 0. */
INLINE __m256i bits_to_0x10(uint32_t bits) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

static uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

#define ACT_Q8(act, as, t, b) ((const ob_act_q8 *)(const void *)((act) + (size_t)(t) * (as)) + (b))
#define ACT_Q8K(act, as, t, b) ((const ob_act_q8K *)(const void *)((act) + (size_t)(t) * (as)) + (b))

/* Run body(NT, ...) on the nt tokens in groups of 4, 2 and 1. */
#define SPLIT_NT(body, n, w, act, as, nt, out, os)                                         \
    do {                                                                                   \
        const char *a_ = (const char *)(act);                                              \
        float *o_ = (out);                                                                 \
        int r_ = (nt);                                                                     \
        for (; r_ >= 4; r_ -= 4, a_ += 4 * (as), o_ += 4 * (os)) body(4, n, w, a_, as, o_, os); \
        if (r_ >= 2) {                                                                     \
            body(2, n, w, a_, as, o_, os);                                                 \
            r_ -= 2, a_ += 2 * (as), o_ += 2 * (os);                                       \
        }                                                                                  \
        if (r_) body(1, n, w, a_, as, o_, os);                                             \
    } while (0)

/* ======================================================================
 * Legacy 32-element types with ob_act_q8 activations
 * ====================================================================== */

INLINE void dot_a8_body(const int kind, const int NT, int64_t n, const void *w, const char *act, size_t as,
                        float *out, size_t os) {
    const int64_t nb = n / 32;
    __m256 acc[4];
    float corr[4];
    for (int t = 0; t < 4; t++) {
        acc[t] = _mm256_setzero_ps();
        corr[t] = 0.0f;
    }
    const __m256i lut_iq4 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)ob_iq4nl_values));
    const __m256i lut_mx = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)ob_mxfp4_values));
    const int is_signed = kind == A8_Q8_0 || kind == A8_IQ4_NL || kind == A8_MXFP4;
    for (int64_t b = 0; b < nb; b++) {
        __m256i q;
        float dw, mw = 0.0f;
        switch (kind) {
        case A8_Q4_0: {
            const ob_block_q4_0 *x = (const ob_block_q4_0 *)w + b;
            q = nibbles32(x->qs);
            dw = h2f(x->d);
            break;
        }
        case A8_Q4_1: {
            const ob_block_q4_1 *x = (const ob_block_q4_1 *)w + b;
            q = nibbles32(x->qs);
            dw = h2f(x->d);
            mw = h2f(x->m);
            break;
        }
        case A8_Q5_0: {
            const ob_block_q5_0 *x = (const ob_block_q5_0 *)w + b;
            q = _mm256_or_si256(nibbles32(x->qs), bits_to_0x10(load_u32(x->qh)));
            dw = h2f(x->d);
            break;
        }
        case A8_Q5_1: {
            const ob_block_q5_1 *x = (const ob_block_q5_1 *)w + b;
            q = _mm256_or_si256(nibbles32(x->qs), bits_to_0x10(load_u32(x->qh)));
            dw = h2f(x->d);
            mw = h2f(x->m);
            break;
        }
        case A8_Q8_0: {
            const ob_block_q8_0 *x = (const ob_block_q8_0 *)w + b;
            q = _mm256_loadu_si256((const __m256i *)(const void *)x->qs);
            dw = h2f(x->d);
            break;
        }
        case A8_IQ4_NL: {
            const ob_block_iq4_nl *x = (const ob_block_iq4_nl *)w + b;
            q = _mm256_shuffle_epi8(lut_iq4, nibbles32(x->qs));
            dw = h2f(x->d);
            break;
        }
        default: {
            const ob_block_mxfp4 *x = (const ob_block_mxfp4 *)w + b;
            q = _mm256_shuffle_epi8(lut_mx, nibbles32(x->qs));
            dw = ob_e8m0_to_fp32_half(x->e);
            break;
        }
        }
        const __m256i qa = is_signed ? _mm256_sign_epi8(q, q) : q;
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8 *a = ACT_Q8(act, as, t, b);
            __m256i va = _mm256_loadu_si256((const __m256i *)(const void *)a->qs);
            __m256i p = is_signed ? dot_us(qa, _mm256_sign_epi8(va, q)) : dot_us(q, va);
            float dd = dw * a->d;
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dd), acc[t]);
            if (kind == A8_Q4_0 || kind == A8_Q5_0) corr[t] += dd * (float)a->s;
            if (kind == A8_Q4_1 || kind == A8_Q5_1) corr[t] += mw * a->d * (float)a->s;
        }
    }
    const float off = kind == A8_Q4_0 ? -8.0f : kind == A8_Q5_0 ? -16.0f : 1.0f;
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]) + off * corr[t];
}

#define DEF_A8(name, kind)                                                                                 \
    INLINE void body_##name(const int NT, int64_t n, const void *w, const char *a, size_t as, float *o,  \
                            size_t os) {                                                                 \
        dot_a8_body(kind, NT, n, w, a, as, o, os);                                                       \
    }                                                                                                    \
    static void dot_##name##_avx2(int64_t n, const void *w, const void *act, size_t as, int nt, float *out, \
                                  size_t os) {                                                           \
        SPLIT_NT(body_##name, n, w, act, as, nt, out, os);                                               \
    }

DEF_A8(q4_0, A8_Q4_0)
DEF_A8(q4_1, A8_Q4_1)
DEF_A8(q5_0, A8_Q5_0)
DEF_A8(q5_1, A8_Q5_1)
DEF_A8(q8_0, A8_Q8_0)
DEF_A8(iq4_nl, A8_IQ4_NL)
DEF_A8(mxfp4, A8_MXFP4)

/* ======================================================================
 * Panels of the 32-element types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (x86/panel_a8.h:
 * avx512.c's layout)
 *
 * A 64-byte chunk holds 4 code bytes of each of 16 rows; its two 32-byte
 * halves are rows 0-7 and 8-15, one row per 32-bit lane. For a half,
 * vpmaddubsw(codes, broadcast(4 activation bytes)) multiplies 4 elements of
 * 8 rows by the same 4 activations at once: 32 products per instruction,
 * summed in pairs, with no horizontal sum at the end. The pairs stay in
 * int16 for a whole block (8 instructions: |2 * 15 * 127| * 8 = 30480 <
 * 2^15), so a 32-element block of 8 rows costs 8 vpmaddubsw, 7 adds and one
 * vpmaddwd per token, where the native `dot` spends one vpmaddubsw and one
 * vpmaddwd per row and block. The -8 of the codes comes off the int32 sum
 * as -8 * s (the activation block's sum), then one float FMA by d_w * d_a.
 * Four tokens go half by half over the panel (their sums and accumulators
 * fit the 16 registers only for one half; the panel stays in L1 for the
 * second half); one or two tokens take both halves block by block, so a
 * decode reads each panel once from memory. The W4A4 path runs the Q4_0
 * kernel on OB_ACT_Q4X (4-bit codes as bytes).
 * ====================================================================== */

/* Software prefetch distance of the panel kernels' one- and two-token passes (decode), in
 * bytes ahead in the panel stream: the hardware prefetcher alone let one core read only ~11
 * GB/s of Q4_0 panels from DRAM (bench --kernels, Zen 3), 1024 bytes ahead ~16.5; decode of
 * Qwen3-0.6B Q4_K_M with 2 threads +25%. Prefetch never faults, so running past the last
 * panel is harmless. OB_AVX2_PREFETCH=bytes tunes it, 0 turns it off. */
static int g_pf = 1024;
/* Prefetch `lines` cache lines g_pf bytes past p. */
INLINE void prefetch_ahead(const void *p, int lines) {
    for (int l = 0; l < lines; l++) _mm_prefetch((const char *)p + g_pf + 64 * l, _MM_HINT_T0);
}
/* An empty asm that claims to change v: the compiler must compute v here, in this order, and
 * cannot reassociate a chain of int16 adds into a tree (GCC did, for the panels' per-token
 * sums: every partial product of a block stayed live, the rest spilled to the stack). */
#define KEEP(v) __asm__("" : "+x"(v))
INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The nibble types Q4_0, Q4_1, Q5_0, Q5_1 (Q5's fifth bits from the panel's qh area, see
 * panel_a8.h). 5-bit codes (<= 31) leave room for only 4 vpmaddubsw in int16, so their low
 * and high nibbles keep separate sums; the minimum of Q4_1/Q5_1 is one more FMA of m_w by
 * d_a * s. */
INLINE void gemm_a8n_half(const int kind, const int NT, const int HB, int64_t n, const void *panel, int h0,
                          const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / 32;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    const int off = a8_offset(kind), five = a8_has_h(kind);
    __m256 acc[2][4];
    for (int t = 0; t < 8; t++) acc[t / 4][t % 4] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (int hh = 0; hh < HB; hh++) {
            const int h = h0 + hh;
            const uint8_t *qb = a8_at(kind, panel, b, A8_CODES) + 32 * h;
            if (HB == 2 && hh == 0 && g_pf) {
                prefetch_ahead(a8_at(kind, panel, b, A8_CODES), 4);
                if ((b & 3) == 0) prefetch_ahead(a8_at(kind, panel, b, A8_D), 1);
            }
            const __m256i hb = five ? _mm256_load_si256((const __m256i *)(const void *)(a8_at(kind, panel, b, A8_H) + 32 * h)) : m4;
            __m256i sl[4], sh[4];
            for (int j = 0; j < 4; j++) {
                const __m256i raw = _mm256_load_si256((const __m256i *)(const void *)(qb + 64 * j));
                __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                if (five) {
                    const __m256i tj = _mm256_srli_epi16(hb, j);
                    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(tj, 4), m10));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(tj, m10));
                }
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const ob_act_q8 *a = ACT_Q8(act, as, t, b);
                    const __m256i pl = _mm256_maddubs_epi16(lo, bcast4(a->qs + 4 * j));
                    const __m256i ph = _mm256_maddubs_epi16(hi, bcast4(a->qs + 16 + 4 * j));
                    if (five) {
                        sl[t] = j ? _mm256_add_epi16(sl[t], pl) : pl;
                        sh[t] = j ? _mm256_add_epi16(sh[t], ph) : ph;
                    } else {
                        const __m256i p = _mm256_add_epi16(pl, ph);
                        sl[t] = j ? _mm256_add_epi16(sl[t], p) : p;
                    }
                    KEEP(sl[t]);
                    if (five) KEEP(sh[t]);
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(a8_at(kind, panel, b, A8_D) + 16 * h)));
            const __m256 mw = a8_has_m(kind) ? _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(a8_at(kind, panel, b, A8_M) + 16 * h))) : dw;
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const ob_act_q8 *a = ACT_Q8(act, as, t, b);
                __m256i i = _mm256_madd_epi16(sl[t], ones);
                if (five) i = _mm256_add_epi32(i, _mm256_madd_epi16(sh[t], ones));
                if (off) i = _mm256_add_epi32(i, _mm256_set1_epi32(-off * a->s));
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(dw, _mm256_set1_ps(a->d)), acc[hh][t]);
                if (a8_has_m(kind)) acc[hh][t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a->d * (float)a->s), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* Q4_0/Q4_1: 4 tokens a half-panel at a time, or 1-2 tokens with both halves block by block;
 * Q5_0/Q5_1 (two int16 sums a token): 2 tokens at a time. */
#define DEF_A8N(name, kind)                                                                                       \
    INLINE void pbody_##name(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o,        \
                             size_t os) {                                                                       \
        if (NT <= 2) {                                                                                          \
            gemm_a8n_half(kind, NT, 2, n, p, 0, a, as, o, os);                                                  \
        } else if (!a8_has_h(kind)) {                                                                           \
            gemm_a8n_half(kind, NT, 1, n, p, 0, a, as, o, os);                                                  \
            gemm_a8n_half(kind, NT, 1, n, p, 1, a, as, o, os);                                                  \
        } else {                                                                                                \
            gemm_a8n_half(kind, 2, 2, n, p, 0, a, as, o, os);                                                   \
            gemm_a8n_half(kind, 2, 2, n, p, 0, a + 2 * as, as, o + 2 * os, os);                                  \
        }                                                                                                       \
    }                                                                                                           \
    static void gemm_##name##_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out,    \
                                   size_t os) {                                                                 \
        SPLIT_NT(pbody_##name, n, p, act, as, nt, out, os);                                                     \
    }                                                                                                           \
    static void pack_##name##_avx2(const void *rows, size_t rb, int64_t n, void *panel) {                       \
        pack_a8(kind, rows, rb, n, panel);                                                                      \
    }                                                                                                           \
    static size_t bytes_##name##_avx2(int64_t n) { return a8_panel_bytes(kind, n); }

DEF_A8N(q4_0, A8_Q4_0)
DEF_A8N(q4_1, A8_Q4_1)
DEF_A8N(q5_0, A8_Q5_0)
DEF_A8N(q5_1, A8_Q5_1)

/* Q8_0 panels (the same layout: codes stored + 128, flipped back here).
 * Signed codes take the sign trick per chunk: |w| once for 8 rows, the
 * broadcast activations signed by w per token; the pairs of products reach
 * 2 * 128 * 127, so every vpmaddubsw goes straight through vpmaddwd into
 * the block's int32 sum (two multiply instructions per 32 products, as the
 * native dot, but without its per-row horizontal sums and activation loads). */
INLINE void gemm_q8_0_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                           size_t as, float *out, size_t os) {
    const int64_t nb = n / 32;
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256 acc[2][4];
    for (int t = 0; t < 8; t++) acc[t / 4][t % 4] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (int hh = 0; hh < HB; hh++) {
            const int h = h0 + hh;
            const uint8_t *qb = a8_at(A8_Q8_0, panel, b, A8_CODES) + 32 * h;
            __m256i s[4];
            if (HB == 2 && hh == 0 && g_pf) {
                prefetch_ahead(a8_at(A8_Q8_0, panel, b, A8_CODES), 8);
                if ((b & 3) == 0) prefetch_ahead(a8_at(A8_Q8_0, panel, b, A8_D), 1);
            }
            for (int j = 0; j < 8; j++) {
                const __m256i w = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(const void *)(qb + 64 * j)), flip);
                const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const ob_act_q8 *a = ACT_Q8(act, as, t, b);
                    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(a->qs + 4 * j), w)), ones);
                    s[t] = j ? _mm256_add_epi32(s[t], p) : p;
                    KEEP(s[t]);
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(a8_at(A8_Q8_0, panel, b, A8_D) + 16 * h)));
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const ob_act_q8 *a = ACT_Q8(act, as, t, b);
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, _mm256_set1_ps(a->d)), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

INLINE void pbody_q8_0(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    if (NT <= 2) {
        gemm_q8_0_half(NT, 2, n, p, 0, a, as, o, os);
    } else {
        gemm_q8_0_half(NT, 1, n, p, 0, a, as, o, os);
        gemm_q8_0_half(NT, 1, n, p, 1, a, as, o, os);
    }
}
static void gemm_q8_0_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_q8_0, n, p, act, as, nt, out, os);
}
static void pack_q8_0_avx2(const void *rows, size_t rb, int64_t n, void *panel) { pack_a8(A8_Q8_0, rows, rb, n, panel); }
static size_t bytes_q8_0_avx2(int64_t n) { return a8_panel_bytes(A8_Q8_0, n); }

/* IQ4_NL and MXFP4 panels (the same layout: the file's nibbles). The codes index a table of
 * signed values, looked up by one vpshufb per nibble vector for 8 rows, then the sign trick as
 * Q8_0's. IQ4_NL's values reach 127, so every vpmaddubsw goes through vpmaddwd into int32, as
 * for Q8_0; MXFP4's (E2M1 doubled) reach 12, so a block's 8 vpmaddubsw add in int16 (pairs <=
 * 2 * 12 * 127, 8 of them 24,384 < 2^15) and one vpmaddwd ends the block, as for Q4_0. The
 * block scale: d halves, or MXFP4's exponent bytes as 2^(e - 128) (ob_e8m0_to_fp32_half's
 * values, subnormals for e < 2). */
INLINE __m256 e8m0_half8(const uint8_t *e) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)e));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
}

INLINE void gemm_a8t_half(const int kind, const int NT, const int HB, int64_t n, const void *panel, int h0,
                          const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / 32;
    const int mx = kind == A8_MXFP4;
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(const void *)(mx ? ob_mxfp4_values : ob_iq4nl_values)));
    __m256 acc[2][4];
    for (int t = 0; t < 8; t++) acc[t / 4][t % 4] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (int hh = 0; hh < HB; hh++) {
            const int h = h0 + hh;
            const uint8_t *qb = a8_at(kind, panel, b, A8_CODES) + 32 * h;
            if (HB == 2 && hh == 0 && g_pf) {
                prefetch_ahead(a8_at(kind, panel, b, A8_CODES), 4);
                if ((b & 3) == 0) prefetch_ahead(a8_at(kind, panel, b, A8_D), 1);
            }
            __m256i s[4];
            for (int j = 0; j < 4; j++) {
                const __m256i raw = _mm256_load_si256((const __m256i *)(const void *)(qb + 64 * j));
                const __m256i vl = _mm256_shuffle_epi8(lut, _mm256_and_si256(raw, m4));
                const __m256i vh = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
                const __m256i ul = _mm256_abs_epi8(vl), uh = _mm256_abs_epi8(vh);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const ob_act_q8 *a = ACT_Q8(act, as, t, b);
                    const __m256i pl = _mm256_maddubs_epi16(ul, _mm256_sign_epi8(bcast4(a->qs + 4 * j), vl));
                    const __m256i ph = _mm256_maddubs_epi16(uh, _mm256_sign_epi8(bcast4(a->qs + 16 + 4 * j), vh));
                    if (mx) {
                        const __m256i p = _mm256_add_epi16(pl, ph);
                        s[t] = j ? _mm256_add_epi16(s[t], p) : p;
                    } else {
                        const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones));
                        s[t] = j ? _mm256_add_epi32(s[t], p) : p;
                    }
                    KEEP(s[t]);
                }
            }
            const __m256 dw = mx ? e8m0_half8(a8_at(kind, panel, b, A8_D) + 8 * h)
                                 : _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(a8_at(kind, panel, b, A8_D) + 16 * h)));
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const ob_act_q8 *a = ACT_Q8(act, as, t, b);
                const __m256i i = mx ? _mm256_madd_epi16(s[t], ones) : s[t];
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(dw, _mm256_set1_ps(a->d)), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

#define DEF_A8T(name, kind)                                                                                    \
    INLINE void pbody_##name(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o,     \
                             size_t os) {                                                                    \
        if (NT <= 2) {                                                                                       \
            gemm_a8t_half(kind, NT, 2, n, p, 0, a, as, o, os);                                               \
        } else {                                                                                             \
            gemm_a8t_half(kind, NT, 1, n, p, 0, a, as, o, os);                                               \
            gemm_a8t_half(kind, NT, 1, n, p, 1, a, as, o, os);                                               \
        }                                                                                                    \
    }                                                                                                        \
    static void gemm_##name##_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, \
                                   size_t os) {                                                              \
        SPLIT_NT(pbody_##name, n, p, act, as, nt, out, os);                                                  \
    }                                                                                                        \
    static void pack_##name##_avx2(const void *rows, size_t rb, int64_t n, void *panel) {                    \
        pack_a8(kind, rows, rb, n, panel);                                                                   \
    }                                                                                                        \
    static size_t bytes_##name##_avx2(int64_t n) { return a8_panel_bytes(kind, n); }

DEF_A8T(iq4_nl, A8_IQ4_NL)
DEF_A8T(mxfp4, A8_MXFP4)

/* ======================================================================
 * Q4_0 x 4-bit activations (W4A4)
 *
 * The activations come widened (OB_ACT_Q4X: the 4-bit codes as signed
 * bytes, converted once per row). Widening the packed nibbles here instead,
 * once per weight row, measured 27% slower prompt processing (qwen3-0.6b
 * shape, pp128, 2 threads: 92 vs 126 t/s), since this loop is about as
 * long as the unpacking. The weight nibbles go in unsigned as for 8-bit
 * activations: vpmaddubsw products are at most 15 * 8 = 120. The weights'
 * -8 is folded into the block's integer sum (-8 * s, added to lane 0), so
 * each block ends as one exact int32 sum (spread over 8 lanes) times one
 * float, d_w * d_a.
 * ====================================================================== */

INLINE void dot_a4_body(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / 32;
    __m256 acc[4];
    for (int t = 0; t < 4; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const ob_block_q4_0 *x = (const ob_block_q4_0 *)w + b;
        const __m256i q = nibbles32(x->qs);
        const float dw = h2f(x->d);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8 *a = ACT_Q8(act, as, t, b);
            const __m256i va = _mm256_loadu_si256((const __m256i *)(const void *)a->qs);
            __m256i p = _mm256_add_epi32(dot_us(q, va), _mm256_setr_epi32(-8 * a->s, 0, 0, 0, 0, 0, 0, 0));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a->d), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]);
}

static void dot_q4_0_a4_avx2(int64_t n, const void *w, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(dot_a4_body, n, w, act, as, nt, out, os);
}

/* ======================================================================
 * K-quants, IQ4_XS and ternary types with ob_act_q8K activations
 * ====================================================================== */

/* Q4_K sub-block scales and mins, unpacked from the 12 packed bytes. */
static void q4k_scales(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int s = 0; s < 4; s++) {
        sc[s] = q[s] & 63;
        mn[s] = q[s + 4] & 63;
    }
    for (int s = 4; s < 8; s++) {
        sc[s] = (uint8_t)((q[s + 4] & 0x0f) | (q[s - 4] >> 6) << 4);
        mn[s] = (uint8_t)((q[s + 4] >> 4) | (q[s] >> 6) << 4);
    }
}

/* Sum over 32-element sub-blocks of mn[s] * (activation sum of s). */
static int mins_dot(const uint8_t mn[8], const int16_t *bsum32) {
    int s = 0;
    for (int j = 0; j < 8; j++) s += mn[j] * bsum32[j];
    return s;
}

/* Q4_K and Q5_K: 8 sub-blocks of 32, x = d * sc * q - dmin * mn. */
INLINE void dot_q45K_body(const int five, const int NT, int64_t n, const void *w, const char *act, size_t as,
                          float *out, size_t os) {
    const int64_t nb = n / OB_QK_K;
    __m256 acc[4];
    float corr[4];
    for (int t = 0; t < 4; t++) {
        acc[t] = _mm256_setzero_ps();
        corr[t] = 0.0f;
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *qs, *scales, *qh = NULL;
        float d, dmin;
        if (five) {
            const ob_block_q5_K *x = (const ob_block_q5_K *)w + i;
            qs = x->qs, scales = x->scales, qh = x->qh, d = h2f(x->d), dmin = h2f(x->dmin);
        } else {
            const ob_block_q4_K *x = (const ob_block_q4_K *)w + i;
            qs = x->qs, scales = x->scales, d = h2f(x->d), dmin = h2f(x->dmin);
        }
        uint8_t sc[8], mn[8];
        q4k_scales(scales, sc, mn);
        __m256i isum[4];
        for (int t = 0; t < 4; t++) isum[t] = _mm256_setzero_si256();
        const __m256i hbits = five ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * p));
            __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * p + 1), one), 4));
            }
            const __m256i s_lo = _mm256_set1_epi16(sc[2 * p]), s_hi = _mm256_set1_epi16(sc[2 * p + 1]);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const int8_t *a = ACT_Q8K(act, as, t, i)->qs + 64 * p;
                __m256i p0 = dot_us_scaled(lo, _mm256_loadu_si256((const __m256i *)(const void *)a), s_lo);
                __m256i p1 = dot_us_scaled(hi, _mm256_loadu_si256((const __m256i *)(const void *)(a + 32)), s_hi);
                isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p0, p1));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8K *a = ACT_Q8K(act, as, t, i);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * a->d), acc[t]);
            corr[t] += dmin * a->d * (float)mins_dot(mn, a->bsum32);
        }
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]) - corr[t];
}

INLINE void body_q4_K(const int NT, int64_t n, const void *w, const char *a, size_t as, float *o, size_t os) {
    dot_q45K_body(0, NT, n, w, a, as, o, os);
}
INLINE void body_q5_K(const int NT, int64_t n, const void *w, const char *a, size_t as, float *o, size_t os) {
    dot_q45K_body(1, NT, n, w, a, as, o, os);
}

/* int16 scale vector: low 128 bits s0, high 128 bits s1 (one per 16-element
 * sub-block of a 32-byte group). */
INLINE __m256i scale_pair(int s0, int s1) { return _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0)); }

/* Q6_K: 16 sub-blocks of 16, x = d * sc * (q - 32), q = 4 low bits | 2 high. */
INLINE void body_q6_K(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / OB_QK_K;
    __m256 acc[4];
    float corr[4];
    for (int t = 0; t < 4; t++) {
        acc[t] = _mm256_setzero_ps();
        corr[t] = 0.0f;
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < nb; i++) {
        const ob_block_q6_K *x = (const ob_block_q6_K *)w + i;
        const float d = h2f(x->d);
        __m256i isum[4];
        for (int t = 0; t < 4; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(const void *)(x->ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(const void *)(x->ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(x->qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int k = 0; k < 4; k++) {
                const int s = 8 * h + 2 * k;
                const __m256i sv = scale_pair(x->scales[s], x->scales[s + 1]);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const int8_t *a = ACT_Q8K(act, as, t, i)->qs + 128 * h + 32 * k;
                    __m256i p = dot_us_scaled(q[k], _mm256_loadu_si256((const __m256i *)(const void *)a), sv);
                    isum[t] = _mm256_add_epi32(isum[t], p);
                }
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8K *a = ACT_Q8K(act, as, t, i);
            int c = 0;
            for (int s = 0; s < 16; s++) c += x->scales[s] * a->bsums[s];
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * a->d), acc[t]);
            corr[t] += d * a->d * (float)(32 * c);
        }
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]) - corr[t];
}

static int q3k_scale(const uint8_t *scales, int s) {
    const int lo = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
    const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Q3_K: 16 sub-blocks of 16, x = d * sc * (q - 4), q = 2 low bits | hmask bit. */
INLINE void body_q3_K(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / OB_QK_K;
    __m256 acc[4];
    for (int t = 0; t < 4; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++) {
        const ob_block_q3_K *x = (const ob_block_q3_K *)w + i;
        const float d = h2f(x->d);
        int sc[16];
        for (int s = 0; s < 16; s++) sc[s] = q3k_scale(x->scales, s);
        __m256i isum[4];
        for (int t = 0; t < 4; t++) isum[t] = _mm256_setzero_si256();
        const __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)x->hmask);
        for (int h = 0; h < 2; h++) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i low = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m2);
                __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one), 2);
                __m256i q = _mm256_or_si256(low, hb);
                const int s = 8 * h + 2 * k;
                const __m256i sv = scale_pair(sc[s], sc[s + 1]);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const int8_t *a = ACT_Q8K(act, as, t, i)->qs + 128 * h + 32 * k;
                    isum[t] = _mm256_add_epi32(
                        isum[t], dot_us_scaled(q, _mm256_loadu_si256((const __m256i *)(const void *)a), sv));
                }
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8K *a = ACT_Q8K(act, as, t, i);
            int c = 0;
            for (int s = 0; s < 16; s++) c += sc[s] * a->bsums[s];
            int tot = hsum256_epi32(isum[t]) - 4 * c;
            acc[t] = _mm256_add_ps(acc[t], _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, d * a->d * (float)tot));
        }
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]);
}

/* Q2_K: 16 sub-blocks of 16, x = d * sc * q - dmin * mn, q 2 bits. */
INLINE void body_q2_K(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / OB_QK_K;
    __m256 acc[4];
    float corr[4];
    for (int t = 0; t < 4; t++) {
        acc[t] = _mm256_setzero_ps();
        corr[t] = 0.0f;
    }
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < nb; i++) {
        const ob_block_q2_K *x = (const ob_block_q2_K *)w + i;
        const float d = h2f(x->d), dmin = h2f(x->dmin);
        __m256i isum[4];
        for (int t = 0; t < 4; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m2);
                const int s = 8 * h + 2 * k;
                const __m256i sv = scale_pair(x->scales[s] & 0x0f, x->scales[s + 1] & 0x0f);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const int8_t *a = ACT_Q8K(act, as, t, i)->qs + 128 * h + 32 * k;
                    isum[t] = _mm256_add_epi32(
                        isum[t], dot_us_scaled(q, _mm256_loadu_si256((const __m256i *)(const void *)a), sv));
                }
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8K *a = ACT_Q8K(act, as, t, i);
            int c = 0;
            for (int s = 0; s < 16; s++) c += (x->scales[s] >> 4) * a->bsums[s];
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * a->d), acc[t]);
            corr[t] += dmin * a->d * (float)c;
        }
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]) - corr[t];
}

/* IQ4_XS: 8 sub-blocks of 32, x = d * (ls - 32) * iq4nl_values[q]. */
INLINE void body_iq4_xs(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / OB_QK_K;
    __m256 acc[4];
    for (int t = 0; t < 4; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)ob_iq4nl_values));
    for (int64_t i = 0; i < nb; i++) {
        const ob_block_iq4_xs *x = (const ob_block_iq4_xs *)w + i;
        const float d = h2f(x->d);
        __m256i isum[4];
        for (int t = 0; t < 4; t++) isum[t] = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 32 * p));
            __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            __m256i v[2];
            v[0] = _mm256_shuffle_epi8(lut, _mm256_permute2x128_si256(lo, hi, 0x20));
            v[1] = _mm256_shuffle_epi8(lut, _mm256_permute2x128_si256(lo, hi, 0x31));
            for (int j = 0; j < 2; j++) {
                const int s = 2 * p + j;
                const int ls = ((x->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((x->scales_h >> (2 * s)) & 3) << 4;
                const __m256i sv = _mm256_set1_epi16((short)(ls - 32));
                const __m256i va = _mm256_sign_epi8(v[j], v[j]);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const int8_t *a = ACT_Q8K(act, as, t, i)->qs + 32 * s;
                    __m256i y = _mm256_loadu_si256((const __m256i *)(const void *)a);
                    isum[t] = _mm256_add_epi32(isum[t], dot_us_scaled(va, _mm256_sign_epi8(y, v[j]), sv));
                }
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * ACT_Q8K(act, as, t, i)->d), acc[t]);
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]);
}

/* TQ2_0: q = value + 1 in 0..2, two bits each; x = d * (q - 1). */
INLINE void body_tq2_0(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / OB_QK_K;
    __m256 acc[4];
    for (int t = 0; t < 4; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < nb; i++) {
        const ob_block_tq2_0 *x = (const ob_block_tq2_0 *)w + i;
        const float d = h2f(x->d);
        __m256i isum[4];
        for (int t = 0; t < 4; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m2);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const int8_t *a = ACT_Q8K(act, as, t, i)->qs + 128 * h + 32 * k;
                    isum[t] = _mm256_add_epi32(isum[t], dot_us(q, _mm256_loadu_si256((const __m256i *)(const void *)a)));
                }
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8K *a = ACT_Q8K(act, as, t, i);
            int c = 0;
            for (int s = 0; s < 16; s++) c += a->bsums[s];
            int tot = hsum256_epi32(isum[t]) - c;
            acc[t] = _mm256_add_ps(acc[t], _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, d * a->d * (float)tot));
        }
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]);
}

/* Bytes times a small constant, mod 256 (no 8-bit multiply in AVX2: the
 * low and high byte of each 16-bit lane are multiplied separately). */
INLINE __m256i mul_bytes(__m256i v, short c) {
    const __m256i k = _mm256_set1_epi16(c);
    __m256i lo = _mm256_and_si256(_mm256_mullo_epi16(v, k), _mm256_set1_epi16(0x00ff));
    __m256i hi = _mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(v, 8), k), 8);
    return _mm256_or_si256(lo, hi);
}

/* TQ1_0 digit from a byte already multiplied by 3^k: floor(3 r / 256), which
 * is 0 for r < 86, 1 for r < 171, else 2. */
INLINE __m256i tq1_digit(__m256i r) {
    __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(r, _mm256_set1_epi8(86)), r);
    __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(r, _mm256_set1_epi8((char)171)), r);
    return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(ge86, ge171));
}

/* TQ1_0: base-3 digits (value + 1) packed five per byte; element order in
 * blocks.h. Each 32-byte vector of digits below covers 32 consecutive
 * elements. */
INLINE void body_tq1_0(const int NT, int64_t n, const void *w, const char *act, size_t as, float *out, size_t os) {
    const int64_t nb = n / OB_QK_K;
    __m256 acc[4];
    for (int t = 0; t < 4; t++) acc[t] = _mm256_setzero_ps();
    static const short pow3[6] = {1, 3, 9, 27, 81, 243};
    for (int64_t i = 0; i < nb; i++) {
        const ob_block_tq1_0 *x = (const ob_block_tq1_0 *)w + i;
        const float d = h2f(x->d);
        __m256i q[8];
        /* elements 0..159: digit k of qs[0..31] is element 32k + m */
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)(const void *)x->qs);
        for (int k = 0; k < 5; k++) q[k] = tq1_digit(mul_bytes(q0, pow3[k]));
        /* elements 160..255: qs[32..47] digit k is 160 + 16k + m; qh[j]
         * digit k is 240 + 4k + j */
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(const void *)(x->qs + 32));
        const __m256i q11 = _mm256_set_m128i(q1, q1);
        q[5] = tq1_digit(_mm256_set_m128i(_mm256_extracti128_si256(mul_bytes(q11, pow3[1]), 1),
                                          _mm256_castsi256_si128(mul_bytes(q11, pow3[0]))));
        q[6] = tq1_digit(_mm256_set_m128i(_mm256_extracti128_si256(mul_bytes(q11, pow3[3]), 1),
                                          _mm256_castsi256_si128(mul_bytes(q11, pow3[2]))));
        uint32_t h = load_u32(x->qh);
        const __m128i hv = _mm_set1_epi32((int)h);
        /* bytes 4k..4k+3 of the high half: qh times 3^k */
        const __m256i hmul = _mm256_set_m128i(hv, hv);
        /* dword k of the high 128 bits comes from qh times 3^k */
        __m256i hq = _mm256_blend_epi32(mul_bytes(hmul, pow3[0]), mul_bytes(hmul, pow3[1]), 0x20);
        hq = _mm256_blend_epi32(hq, mul_bytes(hmul, pow3[2]), 0x40);
        hq = _mm256_blend_epi32(hq, mul_bytes(hmul, pow3[3]), 0x80);
        __m256i low_half = mul_bytes(q11, pow3[4]);
        q[7] = tq1_digit(_mm256_blend_epi32(hq, low_half, 0x0f));
        __m256i isum[4];
        for (int t = 0; t < 4; t++) isum[t] = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++)
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const int8_t *a = ACT_Q8K(act, as, t, i)->qs + 32 * g;
                isum[t] = _mm256_add_epi32(isum[t], dot_us(q[g], _mm256_loadu_si256((const __m256i *)(const void *)a)));
            }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const ob_act_q8K *a = ACT_Q8K(act, as, t, i);
            int c = 0;
            for (int s = 0; s < 16; s++) c += a->bsums[s];
            int tot = hsum256_epi32(isum[t]) - c;
            acc[t] = _mm256_add_ps(acc[t], _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, d * a->d * (float)tot));
        }
    }
    for (int t = 0; t < NT; t++) out[(size_t)t * os] = hsum256(acc[t]);
}

#define DEF_DOT(name)                                                                                      \
    static void dot_##name##_avx2(int64_t n, const void *w, const void *act, size_t as, int nt, float *out, \
                                  size_t os) {                                                           \
        SPLIT_NT(body_##name, n, w, act, as, nt, out, os);                                               \
    }
DEF_DOT(q2_K)
DEF_DOT(q3_K)
DEF_DOT(q4_K)
DEF_DOT(q5_K)
DEF_DOT(q6_K)
DEF_DOT(iq4_xs)
DEF_DOT(tq1_0)
DEF_DOT(tq2_0)

/* ======================================================================
 * Float weights with F32 activations
 * ====================================================================== */

enum { FW_F32, FW_F16, FW_BF16 };

INLINE __m256 load_w8(const int kind, const void *w, int64_t k) {
    switch (kind) {
    case FW_F32: return _mm256_loadu_ps((const float *)w + k);
    case FW_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)w + k)));
    default: {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)w + k)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    }
}

INLINE float load_w1(const int kind, const void *w, int64_t k) {
    switch (kind) {
    case FW_F32: return ((const float *)w)[k];
    case FW_F16: return h2f(((const uint16_t *)w)[k]);
    default: return ob_bf16_to_fp32(((const uint16_t *)w)[k]);
    }
}

INLINE void dot_float_body(const int kind, const int NT, int64_t n, const void *w, const char *act, size_t as,
                           float *out, size_t os) {
    __m256 acc0[4], acc1[4];
    for (int t = 0; t < 4; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        __m256 w0 = load_w8(kind, w, k), w1 = load_w8(kind, w, k + 8);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const float *a = (const float *)(const void *)(act + (size_t)t * as) + k;
            acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a), acc0[t]);
            acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a + 8), acc1[t]);
        }
    }
    for (int t = 0; t < NT; t++) {
        const float *a = (const float *)(const void *)(act + (size_t)t * as);
        float s = hsum256(_mm256_add_ps(acc0[t], acc1[t]));
        for (int64_t j = k; j < n; j++) s += load_w1(kind, w, j) * a[j];
        out[(size_t)t * os] = s;
    }
}

INLINE void body_f32(const int NT, int64_t n, const void *w, const char *a, size_t as, float *o, size_t os) {
    dot_float_body(FW_F32, NT, n, w, a, as, o, os);
}
INLINE void body_f16(const int NT, int64_t n, const void *w, const char *a, size_t as, float *o, size_t os) {
    dot_float_body(FW_F16, NT, n, w, a, as, o, os);
}
INLINE void body_bf16(const int NT, int64_t n, const void *w, const char *a, size_t as, float *o, size_t os) {
    dot_float_body(FW_BF16, NT, n, w, a, as, o, os);
}
DEF_DOT(f32)
DEF_DOT(f16)
DEF_DOT(bf16)

/* ======================================================================
 * K-quant panels: Q4_K (AVX2's own layout; avx512.c keeps its own)
 *
 * A super-block of 16 rows is 2368 bytes, read front to back:
 *   d[16], dmin[16]   halves                                        64
 *   sc[8][16]         sub-block scales, sub-block major, as bytes   128
 *   mn[4][16][2]      mins of sub-blocks (2i, 2i+1) for row r       128
 *   codes[4][8][64]   unit p, chunk j: the rows' qs[32p+4j..+3]     2048
 *                     (low nibbles sub-block 2p, high 2p+1)
 * Unpacking the 6-bit scales once at load costs 4 bytes a row per 256
 * weights (2.8% more to read in decode) and takes a dozen shifts and masks
 * per row and super-block out of the loop. Per sub-block and token, 8
 * vpmaddubsw (its 8 chunks' nibbles) sum in int16 (|2 * 15 * 127| * 8 <
 * 2^15), one vpmaddwd by the rows' scales (each in
 * both 16-bit halves of the row's lane) adds them to the super-block's
 * int32 sum; the mins are 4 vpmaddwd of (mn[2i], mn[2i+1]) pairs by the
 * activation's 32-element sums. Two tokens at a time (their int16, int32
 * and float sums fill the registers), half a panel at a time.
 * ====================================================================== */

#define Q4K_SB_BYTES 2368
static void pack_q4_K_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * Q4K_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_q4_K *x = (const ob_block_q4_K *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            memcpy(S + 32 + 2 * r, &x->dmin, 2);
            uint8_t sc[8], mn[8];
            q4k_scales(x->scales, sc, mn);
            for (int j = 0; j < 8; j++) S[64 + 16 * j + r] = sc[j];
            for (int i = 0; i < 4; i++) {
                S[192 + 32 * i + 2 * r] = mn[2 * i];
                S[192 + 32 * i + 2 * r + 1] = mn[2 * i + 1];
            }
            for (int p = 0; p < 4; p++)
                for (int j = 0; j < 8; j++) memcpy(S + 320 + 512 * p + 64 * j + 4 * r, x->qs + 32 * p + 4 * j, 4);
        }
    }
}
static size_t bytes_q4_K_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * Q4K_SB_BYTES; }

/* Q5_K: Q4_K's super-block with each unit p followed by its fifth bits, 2880 bytes:
 *   d, dmin, sc, mn as Q4_K's                                           320
 *   units p 0..3 (640 each): codes[8][64] as Q4_K's, then qh[2][64]:
 *     chunk v, byte i of row r: bit m = bit 4 of element 4(4v+m)+i of
 *     sub-block 2p, bit 4+m that of sub-block 2p+1 (avx512.c's chunks),
 *     so shifting right by m = j % 4 lines up the bits chunk j needs
 * (the row format's size plus Q4_K's 4 unpacked-scale bytes a row). Codes
 * 0..31 let 4 vpmaddubsw add in int16 (4 * 2 * 31 * 127 < 2^15), so each
 * sub-block's chunks go to its scale in two vpmaddwd instead of one. */
#define Q5K_SB_BYTES 2880
static void pack_q5_K_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * Q5K_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_q5_K *x = (const ob_block_q5_K *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            memcpy(S + 32 + 2 * r, &x->dmin, 2);
            uint8_t sc[8], mn[8];
            q4k_scales(x->scales, sc, mn);
            for (int j = 0; j < 8; j++) S[64 + 16 * j + r] = sc[j];
            for (int i = 0; i < 4; i++) {
                S[192 + 32 * i + 2 * r] = mn[2 * i];
                S[192 + 32 * i + 2 * r + 1] = mn[2 * i + 1];
            }
            for (int p = 0; p < 4; p++) {
                uint8_t *U = S + 320 + 640 * p;
                for (int j = 0; j < 8; j++) memcpy(U + 64 * j + 4 * r, x->qs + 32 * p + 4 * j, 4);
                for (int v = 0; v < 2; v++)
                    for (int i = 0; i < 4; i++) {
                        uint8_t b = 0;
                        for (int m = 0; m < 4; m++) {
                            const int l = 4 * (4 * v + m) + i;
                            b |= (uint8_t)(((x->qh[l] >> (2 * p)) & 1) << m);
                            b |= (uint8_t)(((x->qh[l] >> (2 * p + 1)) & 1) << (4 + m));
                        }
                        U[512 + 64 * v + 4 * r + i] = b;
                    }
            }
        }
    }
}
static size_t bytes_q5_K_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * Q5K_SB_BYTES; }

/* 8 rows' byte scales (sub-block major) as int16 pairs (s, s) a row */
INLINE __m256i scale_pairs8(const uint8_t *p) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* Q4_K and (five) Q5_K */
INLINE void gemm_q45K_half(const int five, const int NT, const int HB, int64_t n, const void *panel, int h0,
                           const char *act, size_t as, float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const size_t sbb = five ? Q5K_SB_BYTES : Q4K_SB_BYTES, unit = five ? 640 : 512;
    const int JB = five ? 4 : 8; /* chunks summed in int16 before a vpmaddwd */
    const __m256i m4 = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10);
    __m256 acc[2][2];
    for (int t = 0; t < 4; t++) acc[t / 2][t % 2] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int hh = 0; hh < HB; hh++) {
            const int h = h0 + hh;
            const uint8_t *S = (const uint8_t *)panel + (size_t)sb * sbb;
            if (HB == 2 && hh == 0 && g_pf)
                prefetch_ahead(S, 5);
            const ob_act_q8K *a[2];
            __m256i isum[2];
            for (int t = 0; t < NT; t++) a[t] = ACT_Q8K(act, as, t, sb), isum[t] = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) {
                const uint8_t *C = S + 320 + unit * p + 32 * h;
                if (HB == 2 && hh == 0 && g_pf)
                    prefetch_ahead(C, five ? 10 : 8);
                /* Q5_K takes its scales twice a unit: loaded once, before the chunks (its gemv from
                 * L2 32 -> 39 GB/s); Q4_K loads them after the chunks (fewer registers live) */
                __m256i s0 = _mm256_setzero_si256(), s1 = s0;
                if (five) s0 = scale_pairs8(S + 64 + 16 * (2 * p) + 8 * h), s1 = scale_pairs8(S + 64 + 16 * (2 * p + 1) + 8 * h);
                __m256i sa[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, sbh[2] = {sa[0], sa[1]};
                for (int j = 0; j < 8; j++) {
                    const __m256i raw = _mm256_load_si256((const __m256i *)(const void *)(C + 64 * j));
                    __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                    if (five) {
                        const __m256i hv = _mm256_load_si256((const __m256i *)(const void *)(C + 512 + 64 * (j / 4)));
                        const __m256i tj = _mm256_srli_epi16(hv, j % 4);
                        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(tj, 4), m10));
                        hi = _mm256_or_si256(hi, _mm256_and_si256(tj, m10));
                    }
#pragma GCC unroll 2
                    for (int t = 0; t < NT; t++) {
                        const __m256i pl = _mm256_maddubs_epi16(lo, bcast4(a[t]->qs + 64 * p + 4 * j));
                        const __m256i ph = _mm256_maddubs_epi16(hi, bcast4(a[t]->qs + 64 * p + 32 + 4 * j));
                        sa[t] = j % JB ? _mm256_add_epi16(sa[t], pl) : pl;
                        sbh[t] = j % JB ? _mm256_add_epi16(sbh[t], ph) : ph;
                        KEEP(sa[t]);
                        KEEP(sbh[t]);
                    }
                    if (j % JB == JB - 1) {
                        if (!five) s0 = scale_pairs8(S + 64 + 16 * (2 * p) + 8 * h), s1 = scale_pairs8(S + 64 + 16 * (2 * p + 1) + 8 * h);
#pragma GCC unroll 2
                        for (int t = 0; t < NT; t++)
                            isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(sa[t], s0), _mm256_madd_epi16(sbh[t], s1)));
                    }
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 16 * h)));
            const __m256 dmin = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 32 + 16 * h)));
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) {
                __m256i m = _mm256_setzero_si256();
                for (int i = 0; i < 4; i++) {
                    const __m256i mv = _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)(const void *)(S + 192 + 32 * i + 16 * h)));
                    int32_t bs;
                    memcpy(&bs, a[t]->bsum32 + 2 * i, 4);
                    m = _mm256_add_epi32(m, _mm256_madd_epi16(mv, _mm256_set1_epi32(bs)));
                }
                const __m256 da = _mm256_set1_ps(a[t]->d);
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, da), acc[hh][t]);
                acc[hh][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, da), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* Q6_K: a super-block of 16 rows is 3360 bytes:
 *   d[16]              halves                                             32
 *   sc[8][16][2]       int8 scales of sub-blocks (2i, 2i+1) for row r     256
 *   codes[2][8][3][64] half n (128 elements), chunk c: the rows'
 *                      ql[64n+4c..+3], ql[64n+32+4c..+3], qh[32n+4c..+3]  3072
 * (the row format's size). Codes 0..63 (q - 32): two vpmaddubsw sum in
 * int16 (2 * 63 * 127 * 2 < 2^15), then a vpmaddwd by the sub-block's scale
 * (the pair's even or odd byte duplicated by one vpshufb); the -32 comes off
 * once per super-block as 32 * (scales . the activation's 16-element sums),
 * 8 vpmaddwd of the scale pairs. */
#define Q6K_SB_BYTES 3360
static void pack_q6_K_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * Q6K_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_q6_K *x = (const ob_block_q6_K *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            for (int i = 0; i < 8; i++) {
                S[32 + 32 * i + 2 * r] = (uint8_t)x->scales[2 * i];
                S[32 + 32 * i + 2 * r + 1] = (uint8_t)x->scales[2 * i + 1];
            }
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c++) {
                    uint8_t *C = S + 288 + 1536 * h + 192 * c + 4 * r;
                    memcpy(C, x->ql + 64 * h + 4 * c, 4);
                    memcpy(C + 64, x->ql + 64 * h + 32 + 4 * c, 4);
                    memcpy(C + 128, x->qh + 32 * h + 4 * c, 4);
                }
        }
    }
}
static size_t bytes_q6_K_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * Q6K_SB_BYTES; }

INLINE void gemm_q6_K_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                           size_t as, float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i dup_even = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4,
                                              5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i dup_odd = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6, 7,
                                             6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
    __m256 acc[2][2];
    for (int t = 0; t < 4; t++) acc[t / 2][t % 2] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int hh = 0; hh < HB; hh++) {
            const int h = h0 + hh;
            const uint8_t *S = (const uint8_t *)panel + (size_t)sb * Q6K_SB_BYTES;
            if (HB == 2 && hh == 0 && g_pf)
                prefetch_ahead(S, 5);
            const ob_act_q8K *a[2];
            __m256i isum[2];
            for (int t = 0; t < NT; t++) a[t] = ACT_Q8K(act, as, t, sb), isum[t] = _mm256_setzero_si256();
            for (int nh = 0; nh < 2; nh++)
                for (int q = 0; q < 2; q++)
                    for (int cp = 0; cp < 2; cp++) {
                        if (HB == 2 && hh == 0 && g_pf) prefetch_ahead(S + 288 + 1536 * nh + 192 * (4 * q + 2 * cp), 6);
                        /* chunks c = 4q + 2cp, +1: each triple's 4 code vectors feed sub-blocks
                         * 8nh + 2k + q (k 0..3), two chunks summed in int16 */
                        __m256i s2[2][4];
                        for (int ci = 0; ci < 2; ci++) {
                            const int c = 4 * q + 2 * cp + ci;
                            const uint8_t *C = S + 288 + 1536 * nh + 192 * c + 32 * h;
                            const __m256i A = _mm256_load_si256((const __m256i *)(const void *)C);
                            const __m256i B = _mm256_load_si256((const __m256i *)(const void *)(C + 64));
                            const __m256i H = _mm256_load_si256((const __m256i *)(const void *)(C + 128));
                            __m256i v[4];
                            v[0] = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
                            v[1] = _mm256_or_si256(_mm256_and_si256(B, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
                            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4), _mm256_and_si256(H, m30));
                            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                                                   _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
#pragma GCC unroll 2
                            for (int t = 0; t < NT; t++)
                                for (int k = 0; k < 4; k++) {
                                    const __m256i pr =
                                        _mm256_maddubs_epi16(v[k], bcast4(a[t]->qs + 128 * nh + 32 * k + 16 * q + 4 * (2 * cp + ci)));
                                    s2[t][k] = ci ? _mm256_add_epi16(s2[t][k], pr) : pr;
                                }
                        }
                        for (int k = 0; k < 4; k++) {
                            const __m256i P = _mm256_cvtepi8_epi16(
                                _mm_load_si128((const __m128i *)(const void *)(S + 32 + 32 * (4 * nh + k) + 16 * h)));
                            const __m256i sc = _mm256_shuffle_epi8(P, q ? dup_odd : dup_even);
#pragma GCC unroll 2
                            for (int t = 0; t < NT; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s2[t][k], sc));
                        }
                    }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 16 * h)));
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) {
                __m256i off = _mm256_setzero_si256();
                for (int i = 0; i < 8; i++) {
                    const __m256i P = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(const void *)(S + 32 + 32 * i + 16 * h)));
                    int32_t bs;
                    memcpy(&bs, a[t]->bsums + 2 * i, 4);
                    off = _mm256_add_epi32(off, _mm256_madd_epi16(P, _mm256_set1_epi32(bs)));
                }
                const __m256i tot = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, 5));
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, _mm256_set1_ps(a[t]->d)), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* Q2_K: a super-block of 16 rows is 1344 bytes (the row format's size):
 *   d[16], dmin[16]     halves                                             64
 *   sc[16][16]          the file's scale bytes (sc | m << 4), sub-block major 256
 *   codes[2][8][64]     half h (128 elements), chunk c: the rows'
 *                       qs[32h+4c..+3] (bits 2k of byte i: element
 *                       128h + 32k + 4c + i, sub-block 8h + 2k + c / 4)   1024
 * Codes 0..3: the 4 chunks of a sub-block sum in int16 (4 * 2 * 3 * 127),
 * then one vpmaddwd by the rows' scales; the mins are 8 vpmaddwd of (m[2i],
 * m[2i+1]) pairs by the activation's 16-element sums. Each group of 4
 * chunks is loaded once for its 4 sub-blocks (the 2-bit fields k). */
#define Q2K_SB_BYTES 1344
static void pack_q2_K_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * Q2K_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_q2_K *x = (const ob_block_q2_K *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            memcpy(S + 32 + 2 * r, &x->dmin, 2);
            for (int j = 0; j < 16; j++) S[64 + 16 * j + r] = x->scales[j];
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c++) memcpy(S + 320 + 512 * h + 64 * c + 4 * r, x->qs + 32 * h + 4 * c, 4);
        }
    }
}
static size_t bytes_q2_K_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * Q2K_SB_BYTES; }

INLINE __m256i u8x8_epi32(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)); }

INLINE void gemm_q2_K_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                           size_t as, float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi32(15);
    __m256 acc[2][2];
    for (int t = 0; t < 4; t++) acc[t / 2][t % 2] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int hh = 0; hh < HB; hh++) {
            const int hr = h0 + hh;
            const uint8_t *S = (const uint8_t *)panel + (size_t)sb * Q2K_SB_BYTES;
            if (HB == 2 && hh == 0 && g_pf) prefetch_ahead(S, 5);
            const ob_act_q8K *a[2];
            __m256i isum[2];
            for (int t = 0; t < NT; t++) a[t] = ACT_Q8K(act, as, t, sb), isum[t] = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                if (HB == 2 && hh == 0 && g_pf) prefetch_ahead(S + 320 + 512 * h, 8);
                for (int g = 0; g < 2; g++) {
                    __m256i raw[4];
                    for (int j = 0; j < 4; j++)
                        raw[j] = _mm256_load_si256((const __m256i *)(const void *)(S + 320 + 512 * h + 64 * (4 * g + j) + 32 * hr));
                    for (int k = 0; k < 4; k++) {
                        const int sbk = 8 * h + 2 * k + g;
                        __m256i s16[2];
                        for (int j = 0; j < 4; j++) {
                            const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw[j], 2 * k), m3);
#pragma GCC unroll 2
                            for (int t = 0; t < NT; t++) {
                                const __m256i p = _mm256_maddubs_epi16(q, bcast4(a[t]->qs + 128 * h + 32 * k + 16 * g + 4 * j));
                                s16[t] = j ? _mm256_add_epi16(s16[t], p) : p;
                                KEEP(s16[t]);
                            }
                        }
                        __m256i sc = _mm256_and_si256(u8x8_epi32(S + 64 + 16 * sbk + 8 * hr), m15);
                        sc = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
#pragma GCC unroll 2
                        for (int t = 0; t < NT; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
                    }
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 16 * hr)));
            const __m256 dmin = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 32 + 16 * hr)));
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) {
                __m256i m = _mm256_setzero_si256();
                for (int i = 0; i < 8; i++) {
                    const __m256i lo = _mm256_srli_epi32(u8x8_epi32(S + 64 + 16 * (2 * i) + 8 * hr), 4);
                    const __m256i hi = _mm256_srli_epi32(u8x8_epi32(S + 64 + 16 * (2 * i + 1) + 8 * hr), 4);
                    int32_t bs;
                    memcpy(&bs, a[t]->bsums + 2 * i, 4);
                    m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 16)), _mm256_set1_epi32(bs)));
                }
                const __m256 da = _mm256_set1_ps(a[t]->d);
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, da), acc[hh][t]);
                acc[hh][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, da), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* IQ4_XS: a super-block of 16 rows is 2208 bytes, read front to back:
 *   d[16]              halves                                             32
 *   sc[8][16]          int8 scales ls - 32, sub-block major               128
 *   codes[8][4][64]    sub-block s, chunk c: the rows' qs[16s+4c..+3]    2048
 *                      (low nibbles elements 4c+i, high 16+4c+i)
 * (the row format's 2176 bytes plus 2 a row: the 6-bit scales unpacked at
 * load). The codes index a table of signed values (-127..113), looked up by
 * one vpshufb a nibble vector; the products take the sign trick (|w| times
 * a carrying w's sign: pairs up to 2 * 127 * 127, no room to add two in
 * int16), so every vpmaddubsw goes through a vpmaddwd - by the rows' scales,
 * each in both 16-bit halves of the row's lane - into int32, the sums exact.
 * The native dot spends, per row and 32 elements, a scale unpacked from
 * bits, a horizontal sum per token and the table lookups once per row; here
 * the lookups are shared by 8 rows and the scales are bytes. Two tokens at
 * a time, both halves super-block by super-block for decode. */
#define IQ4XS_SB_BYTES 2208
static void pack_iq4_xs_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * IQ4XS_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_iq4_xs *x = (const ob_block_iq4_xs *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            for (int j = 0; j < 8; j++) {
                const int ls = ((x->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | ((x->scales_h >> (2 * j)) & 3) << 4;
                S[32 + 16 * j + r] = (uint8_t)(int8_t)(ls - 32);
            }
            for (int j = 0; j < 8; j++)
                for (int c = 0; c < 4; c++) memcpy(S + 160 + 256 * j + 64 * c + 4 * r, x->qs + 16 * j + 4 * c, 4);
        }
    }
}
static size_t bytes_iq4_xs_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * IQ4XS_SB_BYTES; }

/* 8 rows' int8 scales as int16 pairs (s, s) a row */
INLINE __m256i scale_pairs8_signed(const uint8_t *p) {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    return _mm256_blend_epi16(v, _mm256_slli_epi32(v, 16), 0xAA);
}

INLINE void gemm_iq4_xs_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                             size_t as, float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)ob_iq4nl_values));
    __m256 acc[2][2];
    for (int t = 0; t < 4; t++) acc[t / 2][t % 2] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int hh = 0; hh < HB; hh++) {
            const int h = h0 + hh;
            const uint8_t *S = (const uint8_t *)panel + (size_t)sb * IQ4XS_SB_BYTES;
            if (HB == 2 && hh == 0 && g_pf)
                prefetch_ahead(S, 3);
            const ob_act_q8K *a[2];
            __m256i isum[2];
            for (int t = 0; t < NT; t++) a[t] = ACT_Q8K(act, as, t, sb), isum[t] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const uint8_t *C = S + 160 + 256 * j + 32 * h;
                if (HB == 2 && hh == 0 && g_pf)
                    prefetch_ahead(C, 4);
                const __m256i sc = scale_pairs8_signed(S + 32 + 16 * j + 8 * h);
                for (int c = 0; c < 4; c++) {
                    const __m256i raw = _mm256_load_si256((const __m256i *)(const void *)(C + 64 * c));
                    const __m256i vl = _mm256_shuffle_epi8(lut, _mm256_and_si256(raw, m4));
                    const __m256i vh = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
                    const __m256i ul = _mm256_sign_epi8(vl, vl), uh = _mm256_sign_epi8(vh, vh);
#pragma GCC unroll 2
                    for (int t = 0; t < NT; t++) {
                        const __m256i pl =
                            _mm256_maddubs_epi16(ul, _mm256_sign_epi8(bcast4(a[t]->qs + 32 * j + 4 * c), vl));
                        const __m256i ph =
                            _mm256_maddubs_epi16(uh, _mm256_sign_epi8(bcast4(a[t]->qs + 32 * j + 16 + 4 * c), vh));
                        isum[t] = _mm256_add_epi32(isum[t],
                                                   _mm256_add_epi32(_mm256_madd_epi16(pl, sc), _mm256_madd_epi16(ph, sc)));
                        KEEP(isum[t]);
                    }
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 16 * h)));
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++)
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(a[t]->d)),
                                             acc[hh][t]);
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* Q3_K: a super-block of 16 rows is 1824 bytes:
 *   d[16]             halves                                               32
 *   sc[16][16]        int8 scales sc - 32, sub-block major (unpacked at load) 256
 *   hm[8][64]         chunk c: the rows' hmask[4c..+3] (bit 4h + k of byte i:
 *                     bit 2 of the code of element 128h + 32k + 4c + i)      512
 *   codes[2][8][64]   as Q2_K's                                             1024
 * (the row format's 1760 plus 4 bytes a row: the 6-bit scales as bytes).
 * Codes 0..7 (the value + 4): a sub-block's 4 chunks sum in int16 (4 * 2 *
 * 7 * 127), one vpmaddwd by the signed scales; the 4 comes off once per
 * super-block as 4 * (scales . the activation's 16-element sums). */
#define Q3K_SB_BYTES 1824
static void pack_q3_K_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * Q3K_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_q3_K *x = (const ob_block_q3_K *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            for (int j = 0; j < 16; j++) S[32 + 16 * j + r] = (uint8_t)(int8_t)q3k_scale(x->scales, j);
            for (int c = 0; c < 8; c++) memcpy(S + 288 + 64 * c + 4 * r, x->hmask + 4 * c, 4);
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c++) memcpy(S + 800 + 512 * h + 64 * c + 4 * r, x->qs + 32 * h + 4 * c, 4);
        }
    }
}
static size_t bytes_q3_K_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * Q3K_SB_BYTES; }

INLINE void gemm_q3_K_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                           size_t as, float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const __m256i m3 = _mm256_set1_epi8(3), m04 = _mm256_set1_epi8(4);
    __m256 acc[2][2];
    for (int t = 0; t < 4; t++) acc[t / 2][t % 2] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int hh = 0; hh < HB; hh++) {
            const int hr = h0 + hh;
            const uint8_t *S = (const uint8_t *)panel + (size_t)sb * Q3K_SB_BYTES;
            if (HB == 2 && hh == 0 && g_pf) prefetch_ahead(S, 13);
            const ob_act_q8K *a[2];
            __m256i isum[2];
            for (int t = 0; t < NT; t++) a[t] = ACT_Q8K(act, as, t, sb), isum[t] = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                if (HB == 2 && hh == 0 && g_pf) prefetch_ahead(S + 800 + 512 * h, 8);
                for (int g = 0; g < 2; g++) {
                    __m256i raw[4];
                    for (int j = 0; j < 4; j++)
                        raw[j] = _mm256_load_si256((const __m256i *)(const void *)(S + 800 + 512 * h + 64 * (4 * g + j) + 32 * hr));
                    for (int k = 0; k < 4; k++) {
                        const int sbk = 8 * h + 2 * k + g, sh = 4 * h + k;
                        __m256i s16[2];
                        for (int j = 0; j < 4; j++) {
                            const __m256i hv = _mm256_load_si256((const __m256i *)(const void *)(S + 288 + 64 * (4 * g + j) + 32 * hr));
                            const __m256i hb = sh >= 2 ? _mm256_srli_epi16(hv, sh - 2) : _mm256_slli_epi16(hv, 2 - sh);
                            const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw[j], 2 * k), m3),
                                                              _mm256_and_si256(hb, m04));
#pragma GCC unroll 2
                            for (int t = 0; t < NT; t++) {
                                const __m256i p = _mm256_maddubs_epi16(q, bcast4(a[t]->qs + 128 * h + 32 * k + 16 * g + 4 * j));
                                s16[t] = j ? _mm256_add_epi16(s16[t], p) : p;
                                KEEP(s16[t]);
                            }
                        }
                        const __m256i sc = scale_pairs8_signed(S + 32 + 16 * sbk + 8 * hr);
#pragma GCC unroll 2
                        for (int t = 0; t < NT; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
                    }
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 16 * hr)));
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) {
                __m256i off = _mm256_setzero_si256();
                for (int i = 0; i < 8; i++) {
                    const __m256i lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(S + 32 + 16 * (2 * i) + 8 * hr)));
                    const __m256i hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(S + 32 + 16 * (2 * i + 1) + 8 * hr)));
                    int32_t bs;
                    memcpy(&bs, a[t]->bsums + 2 * i, 4);
                    off = _mm256_add_epi32(off, _mm256_madd_epi16(_mm256_blend_epi16(lo, _mm256_slli_epi32(hi, 16), 0xAA), _mm256_set1_epi32(bs)));
                }
                const __m256i tot = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, 2));
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, _mm256_set1_ps(a[t]->d)), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* TQ2_0: a super-block of 16 rows is 1056 bytes (the row format's size): d[16] halves (32),
 * then the codes as Q2_K's 2 x 8 chunks (1024). Codes 0..2 (the value + 1) make pairs of at
 * most 2 * 2 * 127, so a half's 32 vpmaddubsw (8 chunks x 4 fields) add in int16 (32 * 508 <
 * 2^15): two vpmaddwd a super-block, and the 1 comes off as the activation's whole sum. */
#define TQ2_SB_BYTES 1056
static void pack_tq2_0_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * TQ2_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_tq2_0 *x = (const ob_block_tq2_0 *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c++) memcpy(S + 32 + 512 * h + 64 * c + 4 * r, x->qs + 32 * h + 4 * c, 4);
        }
    }
}
static size_t bytes_tq2_0_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * TQ2_SB_BYTES; }

INLINE void gemm_tq2_0_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                            size_t as, float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256 acc[2][2];
    for (int t = 0; t < 4; t++) acc[t / 2][t % 2] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int hh = 0; hh < HB; hh++) {
            const int hr = h0 + hh;
            const uint8_t *S = (const uint8_t *)panel + (size_t)sb * TQ2_SB_BYTES;
            const ob_act_q8K *a[2];
            __m256i isum[2];
            for (int t = 0; t < NT; t++) a[t] = ACT_Q8K(act, as, t, sb), isum[t] = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                if (HB == 2 && hh == 0 && g_pf) prefetch_ahead(S + 512 * h, 8);
                __m256i s16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
                for (int c = 0; c < 8; c++) {
                    const __m256i raw = _mm256_load_si256((const __m256i *)(const void *)(S + 32 + 512 * h + 64 * c + 32 * hr));
                    for (int k = 0; k < 4; k++) {
                        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * k), m3);
#pragma GCC unroll 2
                        for (int t = 0; t < NT; t++) {
                            s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(q, bcast4(a[t]->qs + 128 * h + 32 * k + 4 * c)));
                            KEEP(s16[t]);
                        }
                    }
                }
#pragma GCC unroll 2
                for (int t = 0; t < NT; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], ones));
            }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 16 * hr)));
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) {
                int tot = 0;
                for (int g = 0; g < 8; g++) tot += a[t]->bsum32[g];
                const __m256i v = _mm256_sub_epi32(isum[t], _mm256_set1_epi32(tot));
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(d, _mm256_set1_ps(a[t]->d)), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* TQ1_0: a super-block of 16 rows is 864 bytes (the row format's size): d[16] halves (32), then
 * 13 chunks of the rows' bytes (qs[4j..+3], j 0..11, then qh; avx512.c's chunks). A byte holds
 * base-3 digits (value + 1), digit n = floor(3 r_n / 256) with r_0 the byte and r_(n+1) = 3 r_n
 * mod 256: in byte arithmetic r + r + r, whose two carries (r >= 128; 2r mod 256 + r past 255)
 * count the digit - seven byte operations give both, where the native dot spends two 16-bit
 * multiplies and the compares on each digit. Digits 0..2 make pairs of at most 508, so a half's
 * products add in int16 (two sums of at most 34 terms), and the 1 comes off as the activation's
 * whole sum. Element of byte i of chunk j, digit n: 32n + 4j + i (j < 8), 160 + 16n + 4(j - 8) +
 * i (j < 12), 240 + 4n + i (qh). */
#define TQ1_SB_BYTES 864
static void pack_tq1_0_avx2(const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint8_t *S = (uint8_t *)panel + (size_t)sb * TQ1_SB_BYTES;
        for (int r = 0; r < OB_PANEL; r++) {
            const ob_block_tq1_0 *x = (const ob_block_tq1_0 *)(const void *)((const char *)rows + (size_t)r * rb) + sb;
            memcpy(S + 2 * r, &x->d, 2);
            for (int j = 0; j < 12; j++) memcpy(S + 32 + 64 * j + 4 * r, x->qs + 4 * j, 4);
            memcpy(S + 32 + 64 * 12 + 4 * r, x->qh, 4);
        }
    }
}
static size_t bytes_tq1_0_avx2(int64_t n) { return (size_t)(n / OB_QK_K) * TQ1_SB_BYTES; }

INLINE void gemm_tq1_0_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                            size_t as, float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const __m256i zero = _mm256_setzero_si256(), one8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
    __m256 acc[2][2];
    for (int t = 0; t < 4; t++) acc[t / 2][t % 2] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int hh = 0; hh < HB; hh++) {
            const int hr = h0 + hh;
            const uint8_t *S = (const uint8_t *)panel + (size_t)sb * TQ1_SB_BYTES;
            if (HB == 2 && hh == 0 && g_pf) prefetch_ahead(S, 14);
            const ob_act_q8K *a[2];
            __m256i s16[2][2];
            for (int t = 0; t < NT; t++) a[t] = ACT_Q8K(act, as, t, sb), s16[t][0] = s16[t][1] = zero;
            /* unrolled whole: s16's index must be a constant, or the sums live on the stack */
#pragma GCC unroll 13
            for (int j = 0; j < 13; j++) {
                __m256i r = _mm256_load_si256((const __m256i *)(const void *)(S + 32 + 64 * j + 32 * hr));
                const int nd = j < 12 ? 5 : 4, part = j >= 6;
#pragma GCC unroll 5
                for (int dg = 0; dg < nd; dg++) {
                    const __m256i c1 = _mm256_cmpgt_epi8(zero, r); /* r >= 128: -1 */
                    const __m256i s1 = _mm256_add_epi8(r, r);
                    const __m256i r3 = _mm256_add_epi8(s1, r);
                    const __m256i nc2 = _mm256_cmpeq_epi8(_mm256_max_epu8(r3, s1), r3); /* no second carry: -1 */
                    const __m256i w = _mm256_sub_epi8(_mm256_add_epi8(one8, nc2), c1);
                    r = r3;
                    const int e = j < 8 ? 32 * dg + 4 * j : j < 12 ? 160 + 16 * dg + 4 * (j - 8) : 240 + 4 * dg;
#pragma GCC unroll 2
                    for (int t = 0; t < NT; t++) {
                        s16[t][part] = _mm256_add_epi16(s16[t][part], _mm256_maddubs_epi16(w, bcast4(a[t]->qs + e)));
                        KEEP(s16[t][part]);
                    }
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(S + 16 * hr)));
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++) {
                int tot = 0;
                for (int g = 0; g < 8; g++) tot += a[t]->bsum32[g];
                const __m256i v = _mm256_sub_epi32(_mm256_add_epi32(_mm256_madd_epi16(s16[t][0], ones), _mm256_madd_epi16(s16[t][1], ones)),
                                                   _mm256_set1_epi32(tot));
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(d, _mm256_set1_ps(a[t]->d)), acc[hh][t]);
            }
        }
    }
    for (int hh = 0; hh < HB; hh++)
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(out + (size_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

/* tokens two at a time (the avx2 SPLIT_NT hands out up to 4) */
#define KQ_PAIRS(half, NT, n, p, a, as, o, os)                                      \
    do {                                                                            \
        if ((NT) >= 2) half(2, 2, n, p, 0, a, as, o, os);                           \
        else half(1, 2, n, p, 0, a, as, o, os);                                     \
        if ((NT) == 4) half(2, 2, n, p, 0, (a) + 2 * (as), as, (o) + 2 * (os), os); \
    } while (0)

INLINE void gemm_q4_K_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                           size_t as, float *out, size_t os) {
    gemm_q45K_half(0, NT, HB, n, panel, h0, act, as, out, os);
}
INLINE void gemm_q5_K_half(const int NT, const int HB, int64_t n, const void *panel, int h0, const char *act,
                           size_t as, float *out, size_t os) {
    gemm_q45K_half(1, NT, HB, n, panel, h0, act, as, out, os);
}
INLINE void pbody_q4_K(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_q4_K_half, NT, n, p, a, as, o, os);
}
INLINE void pbody_q5_K(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_q5_K_half, NT, n, p, a, as, o, os);
}
static void gemm_q5_K_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_q5_K, n, p, act, as, nt, out, os);
}
static void gemm_q4_K_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_q4_K, n, p, act, as, nt, out, os);
}
INLINE void pbody_q6_K(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_q6_K_half, NT, n, p, a, as, o, os);
}
static void gemm_q6_K_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_q6_K, n, p, act, as, nt, out, os);
}
INLINE void pbody_q2_K(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_q2_K_half, NT, n, p, a, as, o, os);
}
static void gemm_q2_K_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_q2_K, n, p, act, as, nt, out, os);
}
INLINE void pbody_q3_K(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_q3_K_half, NT, n, p, a, as, o, os);
}
static void gemm_q3_K_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_q3_K, n, p, act, as, nt, out, os);
}
INLINE void pbody_tq2_0(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_tq2_0_half, NT, n, p, a, as, o, os);
}
static void gemm_tq2_0_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_tq2_0, n, p, act, as, nt, out, os);
}
INLINE void pbody_tq1_0(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_tq1_0_half, NT, n, p, a, as, o, os);
}
static void gemm_tq1_0_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_tq1_0, n, p, act, as, nt, out, os);
}
INLINE void pbody_iq4_xs(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    KQ_PAIRS(gemm_iq4_xs_half, NT, n, p, a, as, o, os);
}
static void gemm_iq4_xs_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_iq4_xs, n, p, act, as, nt, out, os);
}

/* Packed F16 and BF16 panels (prefill and decode of 16-bit weights whose row count is a
 * multiple of 16): 16 rows a panel, one element of each row per k ([n][16] halves, avx512.c's
 * F16 layout; BF16 the same, widened by a shift), and an outer product with broadcast
 * activations: per k two 8-row vectors of weights times up to 4 tokens, 8 FMAs for 2 weight
 * loads and 4 broadcasts. The `dot` above does 8 FMAs for 10 loads (each token's 16 floats
 * loaded per weight row), so it is bound by loads: F16 pp512 of Qwen3-0.6B ran at half of
 * llama.cpp's on an AVX2-only machine (bench/RESULTS.md, session 10). One accumulator per
 * token and 8 rows, keys added in k order: a token's sums do not depend on nt (batch
 * invariance); the decode (nt = 1) keeps two independent FMA chains, enough for its stream. */
static void pack_h16(const void *rows, size_t rb, int64_t n, void *panel) {
    uint16_t *dst = panel;
    for (int r = 0; r < OB_PANEL; r++) {
        const uint16_t *x = (const uint16_t *)(const void *)((const char *)rows + (size_t)r * rb);
        for (int64_t k = 0; k < n; k++) dst[(size_t)k * OB_PANEL + (size_t)r] = x[k];
    }
}
static size_t bytes_h16(int64_t n) { return (size_t)n * OB_PANEL * 2; }

INLINE void gemm_h16_body(const int kind, const int NT, int64_t n, const void *panel, const char *act, size_t as,
                          float *out, size_t os) {
    const uint16_t *p = panel;
    const float *a[4];
    for (int t = 0; t < NT; t++) a[t] = (const float *)(const void *)(act + (size_t)t * as);
    __m256 lo[4], hi[4];
    for (int t = 0; t < 4; t++) lo[t] = hi[t] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; k++) {
        /* decode: a line (two k) per two iterations, 2 x g_pf bytes ahead (this stream runs
         * faster than the integer panels': Qwen3-0.6B F16 tg64 with 2 threads 18.5-20 tok/s
         * without, 22-24 at 1024 bytes, 22-27 at 2048, 21-23 at 4096) */
        if (NT <= 2 && g_pf && (k & 1) == 0) prefetch_ahead(p + k * OB_PANEL + g_pf, 1);
        const __m256 wl = load_w8(kind, p, k * OB_PANEL), wh = load_w8(kind, p, k * OB_PANEL + 8);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const __m256 x = _mm256_broadcast_ss(a[t] + k);
            lo[t] = _mm256_fmadd_ps(wl, x, lo[t]);
            hi[t] = _mm256_fmadd_ps(wh, x, hi[t]);
        }
    }
    for (int t = 0; t < NT; t++) {
        _mm256_storeu_ps(out + (size_t)t * os, lo[t]);
        _mm256_storeu_ps(out + (size_t)t * os + 8, hi[t]);
    }
}
INLINE void pbody_f16(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    gemm_h16_body(FW_F16, NT, n, p, a, as, o, os);
}
INLINE void pbody_bf16(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    gemm_h16_body(FW_BF16, NT, n, p, a, as, o, os);
}
static void gemm_f16_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_f16, n, p, act, as, nt, out, os);
}
static void gemm_bf16_avx2(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(pbody_bf16, n, p, act, as, nt, out, os);
}

/* ======================================================================
 * Vectors, activation quantizers
 * ====================================================================== */

static float dot_f32(const float *x, const float *y, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

static void axpy_f32(float a, const float *x, float *y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void scale_f32(float a, float *y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

static void f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

static void f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = ob_fp32_to_fp16(x[i]);
}

INLINE __m256 abs256(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

INLINE float hmax256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Quantize 32 floats with inverse scale id into 32 int8 (round to nearest
 * even: cvtps2dq under the default MXCSR, as the scalar reference). */
INLINE __m256i quant32(const float *x, __m256 id) {
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
    __m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
    __m256i p = _mm256_packs_epi16(p01, p23);
    /* packs interleave 128-bit lanes: put the dwords back in order */
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

INLINE float absmax(const float *x, int n) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, abs256(_mm256_loadu_ps(x + i)));
    return hmax256(m);
}

static void quant_q8(const float *x, ob_act_q8 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float d = absmax(x, 32) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256i q = quant32(x, _mm256_set1_ps(id));
        _mm256_storeu_si256((__m256i *)(void *)y[b].qs, q);
        y[b].d = d;
        y[b].s = hsum256_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1)));
    }
}

/* 4-bit activations (kernels.h, ob_act_q4), the scalar reference's
 * arithmetic step for step: the first value of largest magnitude sets
 * d = m / -8, codes are trunc(x * (1/d) + 8.5) clamped to 15 (then - 8).
 * The empty asm keeps the product a rounded float: with -mfma and GNU C's
 * default -ffp-contract=fast the compiler could otherwise fuse it with the
 * add and round once, which moves codes at the .5 boundaries. Returns the
 * 32 offset codes u = q + 8 in element order; *d gets the (half-rounded)
 * scale, *s the sum of q. */
INLINE __m256i codes_q4(const float *x, float *d_out, int32_t *s_out) {
    const float amax = absmax(x, 32);
    float max = 0.0f;
    if (amax > 0.0f) {
        const __m256 va = _mm256_set1_ps(amax);
        uint32_t hit = 0;
        for (int g = 0; g < 4; g++)
            hit |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(abs256(_mm256_loadu_ps(x + 8 * g)), va, _CMP_EQ_OQ))
                   << (8 * g);
        max = x[__builtin_ctz(hit)];
    }
    const float d = max / -8, id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id), half8 = _mm256_set1_ps(8.5f);
    const __m256i top = _mm256_set1_epi32(15);
    __m256i c[4];
    for (int g = 0; g < 4; g++) {
        __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * g), vid);
        __asm__("" : "+x"(p));
        c[g] = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(p, half8)), top);
    }
    __m256i u = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    u = _mm256_permutevar8x32_epi32(u, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    *s_out = hsum256_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_set1_epi8(1)), _mm256_set1_epi16(1))) - 8 * 32;
    *d_out = ob_fp16_to_fp32(ob_fp32_to_fp16(d));
    return u;
}

static void quant_q4(const float *x, ob_act_q4 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        const __m256i nib = _mm256_xor_si256(codes_q4(x, &y[b].d, &y[b].s), _mm256_set1_epi8(8)); /* (u - 8) mod 16 */
        const __m128i packed = _mm_or_si128(_mm256_castsi256_si128(nib), _mm_slli_epi16(_mm256_extracti128_si256(nib, 1), 4));
        _mm_storeu_si128((__m128i *)(void *)y[b].qs, packed);
    }
}

static void quant_q4x(const float *x, ob_act_q8 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        const __m256i q = _mm256_sub_epi8(codes_q4(x, &y[b].d, &y[b].s), _mm256_set1_epi8(8));
        _mm256_storeu_si256((__m256i *)(void *)y[b].qs, q);
    }
}

static void quant_q8K(const float *x, ob_act_q8K *y, int64_t n) {
    for (int64_t b = 0; b < n / OB_QK_K; b++, x += OB_QK_K) {
        float d = absmax(x, OB_QK_K) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        for (int g = 0; g < 8; g++) {
            __m256i q = quant32(x + 32 * g, vid);
            _mm256_storeu_si256((__m256i *)(void *)(y[b].qs + 32 * g), q);
            /* sums of each 16 bytes: bytes -> pairs (int16) -> quads (int32) */
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm_shuffle_epi32(_mm256_castsi256_si128(s), 0x4e));
            __m128i hh = _mm_add_epi32(_mm256_extracti128_si256(s, 1),
                                       _mm_shuffle_epi32(_mm256_extracti128_si256(s, 1), 0x4e));
            y[b].bsums[2 * g] = (int16_t)(_mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 1));
            y[b].bsums[2 * g + 1] = (int16_t)(_mm_cvtsi128_si32(hh) + _mm_extract_epi32(hh, 1));
            y[b].bsum32[g] = (int16_t)(y[b].bsums[2 * g] + y[b].bsums[2 * g + 1]);
        }
        y[b].d = d;
    }
}

static void to_bf16(const float *x, uint16_t *y, int64_t n) {
    /* round to nearest even on the top 16 bits; NaN stays NaN (quiet bit set) */
    int64_t i = 0;
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(x + i);
        __m256i u = _mm256_castps_si256(f);
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
        r = _mm256_srli_epi32(r, 16);
        __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(void *)(y + i), p);
    }
    for (; i < n; i++) y[i] = ob_fp32_to_bf16(x[i]);
}

/* ======================================================================
 * Attention inner loops
 * ====================================================================== */

/* Four keys at a time, so each q vector load feeds four rows. */
static void attn_scores_f32(const float *q, const float *k, size_t kstride, int n, int d, float *scores) {
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = (const float *)(const void *)((const char *)k + (size_t)j * kstride);
        const float *k1 = (const float *)(const void *)((const char *)k0 + kstride);
        const float *k2 = (const float *)(const void *)((const char *)k1 + kstride);
        const float *k3 = (const float *)(const void *)((const char *)k2 + kstride);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        int i = 0;
        for (; i + 8 <= d; i += 8) {
            __m256 qv = _mm256_loadu_ps(q + i);
            s0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + i), s0);
            s1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + i), s1);
            s2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + i), s2);
            s3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + i), s3);
        }
        float r0 = hsum256(s0), r1 = hsum256(s1), r2 = hsum256(s2), r3 = hsum256(s3);
        for (; i < d; i++) {
            r0 += q[i] * k0[i];
            r1 += q[i] * k1[i];
            r2 += q[i] * k2[i];
            r3 += q[i] * k3[i];
        }
        scores[j] = r0, scores[j + 1] = r1, scores[j + 2] = r2, scores[j + 3] = r3;
    }
    /* the last n % 4 keys with the same sums as above (one accumulator,
     * hsum256, then the d % 8 tail), not dot_f32's four accumulators: a
     * key's score must not depend on how many keys the call holds (batch
     * invariance, docs/performance.md) */
    for (; j < n; j++) {
        const float *kr = (const float *)(const void *)((const char *)k + (size_t)j * kstride);
        __m256 s = _mm256_setzero_ps();
        int i = 0;
        for (; i + 8 <= d; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kr + i), s);
        float r = hsum256(s);
        for (; i < d; i++) r += q[i] * kr[i];
        scores[j] = r;
    }
}

static void attn_scores_f16(const float *q, const uint16_t *k, size_t kstride, int n, int d, float *scores) {
    int j = 0;
    /* four rows at a time: q stays in registers across them */
    for (; j + 4 <= n; j += 4) {
        const uint16_t *k0 = (const uint16_t *)(const void *)((const char *)k + (size_t)j * kstride);
        const uint16_t *k1 = (const uint16_t *)(const void *)((const char *)k0 + kstride);
        const uint16_t *k2 = (const uint16_t *)(const void *)((const char *)k1 + kstride);
        const uint16_t *k3 = (const uint16_t *)(const void *)((const char *)k2 + kstride);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        int i = 0;
        for (; i + 8 <= d; i += 8) {
            __m256 qv = _mm256_loadu_ps(q + i);
            s0 = _mm256_fmadd_ps(qv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(k0 + i))), s0);
            s1 = _mm256_fmadd_ps(qv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(k1 + i))), s1);
            s2 = _mm256_fmadd_ps(qv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(k2 + i))), s2);
            s3 = _mm256_fmadd_ps(qv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(k3 + i))), s3);
        }
        float r0 = hsum256(s0), r1 = hsum256(s1), r2 = hsum256(s2), r3 = hsum256(s3);
        for (; i < d; i++) {
            r0 += q[i] * _cvtsh_ss(k0[i]);
            r1 += q[i] * _cvtsh_ss(k1[i]);
            r2 += q[i] * _cvtsh_ss(k2[i]);
            r3 += q[i] * _cvtsh_ss(k3[i]);
        }
        scores[j] = r0, scores[j + 1] = r1, scores[j + 2] = r2, scores[j + 3] = r3;
    }
    for (; j < n; j++) {
        const uint16_t *kr = (const uint16_t *)(const void *)((const char *)k + (size_t)j * kstride);
        __m256 s = _mm256_setzero_ps();
        int i = 0;
        for (; i + 8 <= d; i += 8)
            s = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(kr + i))), s);
        float r = hsum256(s);
        for (; i < d; i++) r += q[i] * _cvtsh_ss(kr[i]);
        scores[j] = r;
    }
}

/* 32 output columns stay in registers while the n rows stream by. */
static void attn_accum_f32(const float *w, const float *v, size_t vstride, int n, int d, float *acc) {
    int i = 0;
    for (; i + 32 <= d; i += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + i), a1 = _mm256_loadu_ps(acc + i + 8);
        __m256 a2 = _mm256_loadu_ps(acc + i + 16), a3 = _mm256_loadu_ps(acc + i + 24);
        for (int j = 0; j < n; j++) {
            const float *vr = (const float *)(const void *)((const char *)v + (size_t)j * vstride) + i;
            __m256 wj = _mm256_set1_ps(w[j]);
            a0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vr), a0);
            a1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vr + 8), a1);
            a2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vr + 16), a2);
            a3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vr + 24), a3);
        }
        _mm256_storeu_ps(acc + i, a0);
        _mm256_storeu_ps(acc + i + 8, a1);
        _mm256_storeu_ps(acc + i + 16, a2);
        _mm256_storeu_ps(acc + i + 24, a3);
    }
    for (; i + 8 <= d; i += 8) {
        __m256 a0 = _mm256_loadu_ps(acc + i);
        for (int j = 0; j < n; j++)
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(w[j]),
                                 _mm256_loadu_ps((const float *)(const void *)((const char *)v + (size_t)j * vstride) + i), a0);
        _mm256_storeu_ps(acc + i, a0);
    }
    for (; i < d; i++)
        for (int j = 0; j < n; j++) acc[i] += w[j] * ((const float *)(const void *)((const char *)v + (size_t)j * vstride))[i];
}

static void attn_accum_f16(const float *w, const uint16_t *v, size_t vstride, int n, int d, float *acc) {
    int i = 0;
    /* 16 output columns stay in registers while all n rows stream by */
    for (; i + 16 <= d; i += 16) {
        __m256 a0 = _mm256_loadu_ps(acc + i), a1 = _mm256_loadu_ps(acc + i + 8);
        for (int j = 0; j < n; j++) {
            const uint16_t *vr = (const uint16_t *)(const void *)((const char *)v + (size_t)j * vstride) + i;
            __m256 wj = _mm256_set1_ps(w[j]);
            a0 = _mm256_fmadd_ps(wj, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)vr)), a0);
            a1 = _mm256_fmadd_ps(wj, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(vr + 8))), a1);
        }
        _mm256_storeu_ps(acc + i, a0);
        _mm256_storeu_ps(acc + i + 8, a1);
    }
    for (; i < d; i++)
        for (int j = 0; j < n; j++) {
            const uint16_t *vr = (const uint16_t *)(const void *)((const char *)v + (size_t)j * vstride);
            acc[i] += w[j] * _cvtsh_ss(vr[i]);
        }
}

static void attn_qk(const float *q, int M, size_t ldq, const float *k, size_t kstride, int nk, int d, float *s,
                    size_t lds) {
    for (int m = 0; m < M; m++) attn_scores_f32(q + (size_t)m * ldq, k, kstride, nk, d, s + (size_t)m * lds);
}

static void attn_pv(const float *p, int M, size_t ldp, const float *v, size_t vstride, int nk, int d, float *o,
                    size_t ldo) {
    for (int m = 0; m < M; m++) attn_accum_f32(p + (size_t)m * ldp, v, vstride, nk, d, o + (size_t)m * ldo);
}

/* Prompt tiles of F16 keys and values (M = a run of tokens x the GQA group): the rows are
 * converted to floats once per ATT_CONV keys (vcvtph2ps is exact) and multiplied as register
 * tiles - scores 2 query rows x 4 keys, P.V 4 rows x 16 columns - instead of converting every
 * key and value row once per query row (attn_scores_f16 / attn_accum_f16, which a profile of
 * a Qwen3-0.6B Q4_0 pp512 on a Zen 3 put at ~20% of the pass). Each score and each output
 * element takes the operations of the per-row loops in the same order (8-lane FMAs over the
 * head, the same hsum256; FMAs over the keys in key order, partial sums through o between
 * blocks), so the bits are theirs whatever M is (batch invariance). Few rows (decode), head
 * dimensions that are not a multiple of 16, or above 256, keep the per-row loops. */
#define ATT_CONV 32
#define ATT_CONV_MIN_M 8
#define ATT_CONV_MAX_D 256

static void f16_rows_to_f32(const uint16_t *x, size_t xstride, int n, int d, float *y) {
    for (int j = 0; j < n; j++) {
        const uint16_t *r = (const uint16_t *)(const void *)((const char *)x + (size_t)j * xstride);
        for (int i = 0; i < d; i += 8)
            _mm256_storeu_ps(y + (size_t)j * (size_t)d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + i))));
    }
}

/* scores of R (1, 2) query rows against B (1, 4) keys of kb (floats, d apart) */
INLINE void qk_tile(const int R, const int B, const float *q, size_t ldq, const float *kb, int d, float *s, size_t lds) {
    __m256 acc[2][4];
    for (int r = 0; r < R; r++)
        for (int b = 0; b < B; b++) acc[r][b] = _mm256_setzero_ps();
    for (int i = 0; i < d; i += 8) {
        __m256 kv[4];
        for (int b = 0; b < B; b++) kv[b] = _mm256_loadu_ps(kb + (size_t)b * (size_t)d + i);
        for (int r = 0; r < R; r++) {
            const __m256 qv = _mm256_loadu_ps(q + (size_t)r * ldq + i);
            for (int b = 0; b < B; b++) acc[r][b] = _mm256_fmadd_ps(qv, kv[b], acc[r][b]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int b = 0; b < B; b++) s[(size_t)r * lds + b] = hsum256(acc[r][b]);
}

static void attn_qk_f16(const float *q, int M, size_t ldq, const uint16_t *k, size_t kstride, int nk, int d,
                        float *s, size_t lds) {
    if (M < ATT_CONV_MIN_M || d % 16 || d > ATT_CONV_MAX_D) {
        for (int m = 0; m < M; m++) attn_scores_f16(q + (size_t)m * ldq, k, kstride, nk, d, s + (size_t)m * lds);
        return;
    }
    float buf[ATT_CONV * ATT_CONV_MAX_D] __attribute__((aligned(32)));
    for (int j0 = 0; j0 < nk; j0 += ATT_CONV) {
        const int nb = nk - j0 < ATT_CONV ? nk - j0 : ATT_CONV;
        f16_rows_to_f32((const uint16_t *)(const void *)((const char *)k + (size_t)j0 * kstride), kstride, nb, d, buf);
        int m = 0;
        for (; m + 2 <= M; m += 2) {
            int j = 0;
            for (; j + 4 <= nb; j += 4) qk_tile(2, 4, q + (size_t)m * ldq, ldq, buf + (size_t)j * d, d, s + (size_t)m * lds + j0 + j, lds);
            for (; j < nb; j++) qk_tile(2, 1, q + (size_t)m * ldq, ldq, buf + (size_t)j * d, d, s + (size_t)m * lds + j0 + j, lds);
        }
        for (; m < M; m++) {
            int j = 0;
            for (; j + 4 <= nb; j += 4) qk_tile(1, 4, q + (size_t)m * ldq, ldq, buf + (size_t)j * d, d, s + (size_t)m * lds + j0 + j, lds);
            for (; j < nb; j++) qk_tile(1, 1, q + (size_t)m * ldq, ldq, buf + (size_t)j * d, d, s + (size_t)m * lds + j0 + j, lds);
        }
    }
}

/* o rows r < R (4, 2, 1), columns i..i+15, += the nk keys of vb (floats, d apart) */
INLINE void pv_tile(const int R, const float *p, size_t ldp, const float *vb, int nk, int d, int i, float *o, size_t ldo) {
    __m256 acc[4][2];
    for (int r = 0; r < R; r++) {
        acc[r][0] = _mm256_loadu_ps(o + (size_t)r * ldo + i);
        acc[r][1] = _mm256_loadu_ps(o + (size_t)r * ldo + i + 8);
    }
    for (int j = 0; j < nk; j++) {
        const __m256 v0 = _mm256_loadu_ps(vb + (size_t)j * (size_t)d + i), v1 = _mm256_loadu_ps(vb + (size_t)j * (size_t)d + i + 8);
        for (int r = 0; r < R; r++) {
            const __m256 w = _mm256_set1_ps(p[(size_t)r * ldp + (size_t)j]);
            acc[r][0] = _mm256_fmadd_ps(w, v0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(w, v1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(o + (size_t)r * ldo + i, acc[r][0]);
        _mm256_storeu_ps(o + (size_t)r * ldo + i + 8, acc[r][1]);
    }
}

static void attn_pv_f16(const float *p, int M, size_t ldp, const uint16_t *v, size_t vstride, int nk, int d, float *o,
                        size_t ldo) {
    if (M < ATT_CONV_MIN_M || d % 16 || d > ATT_CONV_MAX_D) {
        for (int m = 0; m < M; m++) attn_accum_f16(p + (size_t)m * ldp, v, vstride, nk, d, o + (size_t)m * ldo);
        return;
    }
    float buf[ATT_CONV * ATT_CONV_MAX_D] __attribute__((aligned(32)));
    for (int j0 = 0; j0 < nk; j0 += ATT_CONV) {
        const int nb = nk - j0 < ATT_CONV ? nk - j0 : ATT_CONV;
        f16_rows_to_f32((const uint16_t *)(const void *)((const char *)v + (size_t)j0 * vstride), vstride, nb, d, buf);
        int m = 0;
        for (; m + 4 <= M; m += 4)
            for (int i = 0; i < d; i += 16) pv_tile(4, p + (size_t)m * ldp + j0, ldp, buf, nb, d, i, o + (size_t)m * ldo, ldo);
        for (; m + 2 <= M; m += 2)
            for (int i = 0; i < d; i += 16) pv_tile(2, p + (size_t)m * ldp + j0, ldp, buf, nb, d, i, o + (size_t)m * ldo, ldo);
        for (; m < M; m++)
            for (int i = 0; i < d; i += 16) pv_tile(1, p + (size_t)m * ldp + j0, ldp, buf, nb, d, i, o + (size_t)m * ldo, ldo);
    }
}

/* exp(x) for x <= 0 (softmax arguments): x = n ln2 + r with n an integer
 * and |r| <= ln2/2 (Cody-Waite: ln2 in a short high part and a low
 * correction, so r is nearly exact even for x near -87), then e^r by its
 * degree-7 Taylor polynomial (truncation below (ln2/2)^8/8! = 5e-9) and 2^n
 * added to the exponent bits. About 1 ulp over the range. Arguments below
 * -87 flush to 0 (exp(-87) is near FLT_MIN); above 88 they saturate at
 * exp(88) (SiLU only needs "huge" there). */
INLINE __m256 exp256(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.0f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    __m256 res = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
    return _mm256_andnot_ps(under, res);
}

static float max_f32(const float *x, int n) {
    float r = x[0];
    int i = 0;
    if (n >= 8) {
        __m256 v = _mm256_loadu_ps(x);
        for (i = 8; i + 8 <= n; i += 8) v = _mm256_max_ps(_mm256_loadu_ps(x + i), v);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
        r = _mm_cvtss_f32(h);
    }
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

static float exp_sum(const float *x, float m, float *y, int n) {
    __m256 s = _mm256_setzero_ps(), vm = _mm256_set1_ps(m);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(y + i, e);
        s = _mm256_add_ps(s, e);
    }
    float r = hsum256(s);
    for (; i < n; i++) {
        y[i] = expf(x[i] - m);
        r += y[i];
    }
    return r;
}

static void swiglu(const float *g, const float *u, float *y, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_xor_ps(x, neg))));
        if (u) s = _mm256_mul_ps(s, _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(y + i, s);
    }
    for (; i < n; i++) {
        float s = g[i] / (1.0f + expf(-g[i]));
        y[i] = u ? s * u[i] : s;
    }
}

static float sum_sq(const float *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
    }
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += x[i] * x[i];
    return s;
}

static void scale_mul(const float *x, float s, const float *w, float *y, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) y[i] = w ? (x[i] * s) * w[i] : x[i] * s;
}

void ob_cpu_fill_avx2(ob_cpu_kernels *k) {
    k->tier = OB_CPU_AVX2;
    if (getenv("OB_AVX2_PREFETCH")) g_pf = atoi(getenv("OB_AVX2_PREFETCH"));
    k->name = "avx2";
    k->dot_f32 = dot_f32;
    k->axpy_f32 = axpy_f32;
    k->scale_f32 = scale_f32;
    k->f16_to_f32 = f16_to_f32;
    k->f32_to_f16 = f32_to_f16;
    k->quant_q8 = quant_q8;
    k->quant_q8K = quant_q8K;
    k->quant_q4 = quant_q4;
    k->quant_q4x = quant_q4x;
    k->to_bf16 = to_bf16;
    k->attn_scores_f32 = attn_scores_f32;
    k->attn_scores_f16 = attn_scores_f16;
    k->attn_accum_f32 = attn_accum_f32;
    k->attn_accum_f16 = attn_accum_f16;
    k->exp_sum = exp_sum;
    k->max_f32 = max_f32;
    k->attn_qk = attn_qk;
    k->attn_pv = attn_pv;
    k->attn_qk_f16 = attn_qk_f16;
    k->attn_pv_f16 = attn_pv_f16;
    k->swiglu = swiglu;
    k->sum_sq = sum_sq;
    k->scale_mul = scale_mul;
#define SET(T, name) k->mm[T].dot = dot_##name##_avx2
    SET(OB_TYPE_Q4_0, q4_0);
    SET(OB_TYPE_Q4_1, q4_1);
    SET(OB_TYPE_Q5_0, q5_0);
    SET(OB_TYPE_Q5_1, q5_1);
    SET(OB_TYPE_Q8_0, q8_0);
    SET(OB_TYPE_IQ4_NL, iq4_nl);
    SET(OB_TYPE_MXFP4, mxfp4);
    SET(OB_TYPE_Q2_K, q2_K);
    SET(OB_TYPE_Q3_K, q3_K);
    SET(OB_TYPE_Q4_K, q4_K);
    SET(OB_TYPE_Q5_K, q5_K);
    SET(OB_TYPE_Q6_K, q6_K);
    SET(OB_TYPE_IQ4_XS, iq4_xs);
    SET(OB_TYPE_TQ1_0, tq1_0);
    SET(OB_TYPE_TQ2_0, tq2_0);
    SET(OB_TYPE_F32, f32);
    SET(OB_TYPE_F16, f16);
    SET(OB_TYPE_BF16, bf16);
#undef SET
    k->mm[OB_TYPE_Q4_0].a4_act = OB_ACT_Q4X;
    k->mm[OB_TYPE_Q4_0].dot_a4 = dot_q4_0_a4_avx2;
#define PACK(T, name) \
    k->mm[T].packed_act = OB_ACT_Q8, k->mm[T].panel_bytes = bytes_##name##_avx2, k->mm[T].pack = pack_##name##_avx2, \
    k->mm[T].gemm = gemm_##name##_avx2
    PACK(OB_TYPE_Q4_0, q4_0);
    PACK(OB_TYPE_Q4_1, q4_1);
    PACK(OB_TYPE_Q5_0, q5_0);
    PACK(OB_TYPE_Q5_1, q5_1);
    PACK(OB_TYPE_Q8_0, q8_0);
    PACK(OB_TYPE_IQ4_NL, iq4_nl);
    PACK(OB_TYPE_MXFP4, mxfp4);
#undef PACK
    k->mm[OB_TYPE_Q4_0].packed_a4_act = OB_ACT_Q4X;
    k->mm[OB_TYPE_Q4_0].gemm_a4 = gemm_q4_0_avx2;
    k->mm[OB_TYPE_Q4_K].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_Q4_K].panel_bytes = bytes_q4_K_avx2;
    k->mm[OB_TYPE_Q4_K].pack = pack_q4_K_avx2;
    k->mm[OB_TYPE_Q4_K].gemm = gemm_q4_K_avx2;
    k->mm[OB_TYPE_Q5_K].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_Q5_K].panel_bytes = bytes_q5_K_avx2;
    k->mm[OB_TYPE_Q5_K].pack = pack_q5_K_avx2;
    k->mm[OB_TYPE_Q5_K].gemm = gemm_q5_K_avx2;
    k->mm[OB_TYPE_Q6_K].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_Q6_K].panel_bytes = bytes_q6_K_avx2;
    k->mm[OB_TYPE_Q6_K].pack = pack_q6_K_avx2;
    k->mm[OB_TYPE_Q6_K].gemm = gemm_q6_K_avx2;
    k->mm[OB_TYPE_Q2_K].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_Q2_K].panel_bytes = bytes_q2_K_avx2;
    k->mm[OB_TYPE_Q2_K].pack = pack_q2_K_avx2;
    k->mm[OB_TYPE_Q2_K].gemm = gemm_q2_K_avx2;
    k->mm[OB_TYPE_Q3_K].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_Q3_K].panel_bytes = bytes_q3_K_avx2;
    k->mm[OB_TYPE_Q3_K].pack = pack_q3_K_avx2;
    k->mm[OB_TYPE_Q3_K].gemm = gemm_q3_K_avx2;
    k->mm[OB_TYPE_TQ2_0].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_TQ2_0].panel_bytes = bytes_tq2_0_avx2;
    k->mm[OB_TYPE_TQ2_0].pack = pack_tq2_0_avx2;
    k->mm[OB_TYPE_TQ2_0].gemm = gemm_tq2_0_avx2;
    k->mm[OB_TYPE_TQ1_0].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_TQ1_0].panel_bytes = bytes_tq1_0_avx2;
    k->mm[OB_TYPE_TQ1_0].pack = pack_tq1_0_avx2;
    k->mm[OB_TYPE_TQ1_0].gemm = gemm_tq1_0_avx2;
    k->mm[OB_TYPE_IQ4_XS].packed_act = OB_ACT_Q8K;
    k->mm[OB_TYPE_IQ4_XS].panel_bytes = bytes_iq4_xs_avx2;
    k->mm[OB_TYPE_IQ4_XS].pack = pack_iq4_xs_avx2;
    k->mm[OB_TYPE_IQ4_XS].gemm = gemm_iq4_xs_avx2;
    /* 16-bit weights repacked into panels (above); the integer types stay native here */
    k->mm[OB_TYPE_F16].packed_act = OB_ACT_F32;
    k->mm[OB_TYPE_F16].panel_bytes = bytes_h16;
    k->mm[OB_TYPE_F16].pack = pack_h16;
    k->mm[OB_TYPE_F16].gemm = gemm_f16_avx2;
    k->mm[OB_TYPE_BF16].packed_act = OB_ACT_F32;
    k->mm[OB_TYPE_BF16].panel_bytes = bytes_h16;
    k->mm[OB_TYPE_BF16].pack = pack_h16;
    k->mm[OB_TYPE_BF16].gemm = gemm_bf16_avx2;
}
