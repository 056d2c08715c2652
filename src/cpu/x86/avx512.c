/*
 * avx512.c - the AVX-512 tier: packed-panel matmul kernels. Compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 (and
 * the AVX2 set); the VNNI kernels are installed only when the CPU reports
 * AVX512_VNNI, the BF16 ones only with AVX512_BF16. Everything else (native
 * layout dots, quantizers, attention loops) comes from the AVX2 tier.
 *
 * Panels. The CPU backend repacks a weight of nout % 16 == 0 rows at load
 * time into panels of 16 rows. Inside a panel, every block of the row
 * format becomes "chunks" of 64 bytes: 4 bytes of each of the 16 rows, in
 * row order. A 64-byte chunk is one zmm register whose 32-bit lane r holds
 * row r's next 4 codes, so
 *   - vpdpbusd(acc, chunk, broadcast(4 activation bytes)) adds 4 products to
 *     each of 16 row accumulators: 64 multiply-adds per instruction, no
 *     horizontal sums, and one broadcast activation word feeds 16 rows;
 *   - a panel is read front to back, so decode (one token) streams each
 *     weight byte once, with the hardware prefetcher seeing one sequential
 *     stream per area;
 *   - prefill keeps one panel in L1 and runs it against up to 8 tokens per
 *     call, so each chunk is unpacked once for 8 tokens.
 * Areas. A panel stores each kind of data in its own contiguous area
 * (codes, scales, high bits, ...) rather than interleaving them per block,
 * so every chunk load is 64-byte aligned. Sizes are the row format's exact
 * size except for Q4_K (+4 bytes per 256 weights) and Q5_K (+4): their
 * packed 6-bit scales and mins are expanded to bytes, which turns a dozen
 * shift-and-mask steps per super-block into one byte load per 16 rows.
 *
 * Signs. vpdpbusd multiplies unsigned by signed bytes. Activations are the
 * signed operand; weight codes must be unsigned. Nibble codes already are
 * (Q4_0's q in 0..15 stands for q - 8). Signed weights (Q8_0, IQ4_NL/XS and
 * MXFP4 table values) are stored or looked up with +128. Either way the dot
 * carries offset * sum(activations) too, and the integer accumulator of each
 * block starts at -offset * sum(a) (from the activation's precomputed sums),
 * so the correction costs nothing in the loop.
 *
 * Scales. Per 32-element block (legacy types) the int32 sums turn into
 * floats once per block: acc += float(isum) * (d_w[16 rows] * d_a). K types
 * multiply each sub-block's int32 sum by its integer scale (vpmulld) and
 * convert once per 256-element super-block; Q4_K/Q5_K mins are a 16-bit dot
 * of the mins with the activation's 32-element sums (vpdpwssd).
 *
 * Float panels: F32 and F16 store one element of each of the 16 rows per
 * k (16 lanes = 16 rows, converted with vcvtph2ps for F16), and an outer
 * product with broadcast activations accumulates 16 rows x NT tokens.
 * BF16 stores pairs (k, k+1) per lane for vdpbf16ps, which takes BF16
 * activations (rounded once per batch); without AVX512_BF16 the same layout
 * is widened to floats with shifts.
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "../../quant/iq_tables.h"
#include "../../quant/quant_ref.h"
#include "../kernels.h"
#include "split_nt.h"

#include "panel_a8.h"
#include "panel_kq.h"


INLINE void gemm_a8_body(const int kind, const int NT, int64_t n, const void *panel, const char *act, size_t as,
                         float *out, size_t os) {
    const int64_t nb = n / 32;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lut = a8_lut(kind);
    const int off = a8_offset(kind);
    __m512 acc[8];
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const ob_act_q8 *a[8];
        __m512i ia[8];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            a[t] = (const ob_act_q8 *)(const void *)(act + (size_t)t * as) + b;
            ia[t] = off ? _mm512_set1_epi32(-off * a[t]->s) : _mm512_setzero_si512();
        }
        const uint8_t *qb = a8_at(kind, panel, b, A8_CODES);
        if (kind == A8_Q8_0) {
            for (int j = 0; j < 8; j++) {
                __m512i w = _mm512_load_si512((const void *)(qb + 64 * j));
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) ia[t] = _mm512_dpbusd_epi32(ia[t], w, bcast32(a[t]->qs + 4 * j));
            }
        } else {
            const __m512i hb = a8_has_h(kind) ? _mm512_load_si512((const void *)a8_at(kind, panel, b, A8_H)) : m4;
            for (int j = 0; j < 4; j++) {
                __m512i raw = _mm512_load_si512((const void *)(qb + 64 * j));
                __m512i lo, hi;
                a8_codes(kind, raw, hb, j, lut, &lo, &hi);
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) {
                    ia[t] = _mm512_dpbusd_epi32(ia[t], lo, bcast32(a[t]->qs + 4 * j));
                    ia[t] = _mm512_dpbusd_epi32(ia[t], hi, bcast32(a[t]->qs + 16 + 4 * j));
                }
            }
        }
        const __m512 dw = kind == A8_MXFP4 ? e8m0_half16(a8_at(kind, panel, b, A8_D)) : load_h16(a8_at(kind, panel, b, A8_D));
        const __m512 mw = a8_has_m(kind) ? load_h16(a8_at(kind, panel, b, A8_M)) : dw;
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), _mm512_mul_ps(dw, _mm512_set1_ps(a[t]->d)), acc[t]);
            if (a8_has_m(kind)) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a[t]->d * (float)a[t]->s), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * os, acc[t]);
}

#define DEF_A8(name, kind)                                                                                      \
    INLINE void body_##name(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o,       \
                            size_t os) {                                                                      \
        gemm_a8_body(kind, NT, n, p, a, as, o, os);                                                           \
    }                                                                                                         \
    static void gemm_##name(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) { \
        SPLIT_NT(body_##name, n, p, act, as, nt, out, os);                                                    \
    }                                                                                                         \
    static void pack_##name(const void *rows, size_t rb, int64_t n, void *panel) { pack_a8(kind, rows, rb, n, panel); } \
    static size_t bytes_##name(int64_t n) { return a8_panel_bytes(kind, n); }

DEF_A8(q4_0, A8_Q4_0)
DEF_A8(q4_1, A8_Q4_1)
DEF_A8(q5_0, A8_Q5_0)
DEF_A8(q5_1, A8_Q5_1)
DEF_A8(q8_0, A8_Q8_0)
DEF_A8(iq4_nl, A8_IQ4_NL)
DEF_A8(mxfp4, A8_MXFP4)


static void pack_kq(int kind, const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nsb = n / OB_QK_K;
    size_t bsize;
    switch (kind) {
    case KQ_Q4_K: bsize = sizeof(ob_block_q4_K); break;
    case KQ_Q5_K: bsize = sizeof(ob_block_q5_K); break;
    case KQ_Q6_K: bsize = sizeof(ob_block_q6_K); break;
    case KQ_Q2_K: bsize = sizeof(ob_block_q2_K); break;
    case KQ_Q3_K: bsize = sizeof(ob_block_q3_K); break;
    case KQ_TQ2_0: bsize = sizeof(ob_block_tq2_0); break;
    case KQ_TQ1_0: bsize = sizeof(ob_block_tq1_0); break;
    default: bsize = sizeof(ob_block_iq4_xs); break;
    }
    for (int64_t sb = 0; sb < nsb; sb++) {
        const char *blk = (const char *)rows + (size_t)sb * bsize;
        uint8_t *B = kq_sb(kind, panel, sb), *D = kq_d(kind, panel, sb);
        switch (kind) {
        case KQ_Q4_K:
        case KQ_Q5_K: {
            /* the rows' 12 scale bytes as three chunks, then units p */
            const size_t unit = kind == KQ_Q4_K ? 512 : 640;
            const size_t off_qs = kind == KQ_Q4_K ? offsetof(ob_block_q4_K, qs) : offsetof(ob_block_q5_K, qs);
            for (int w = 0; w < 3; w++) gather_chunk(blk, rb, 4 + 4 * (size_t)w, 0, B + 64 * (size_t)w);
            for (int p = 0; p < 4; p++)
                for (int j = 0; j < 8; j++)
                    gather_chunk(blk, rb, off_qs + 32 * (size_t)p + 4 * (size_t)j, 0, B + 192 + unit * (size_t)p + 64 * (size_t)j);
            for (int r = 0; r < OB_PANEL; r++) {
                const char *x = ROW(blk, rb, r);
                memcpy(D + 2 * r, x, 2);
                memcpy(D + 32 + 2 * r, x + 2, 2);
                if (kind == KQ_Q5_K) {
                    const uint8_t *qh = ((const ob_block_q5_K *)(const void *)x)->qh;
                    for (int p = 0; p < 4; p++)
                        for (int v = 0; v < 2; v++)
                            for (int i = 0; i < 4; i++) {
                                uint8_t b = 0;
                                for (int m = 0; m < 4; m++) {
                                    const int l = 4 * (4 * v + m) + i; /* element within the sub-block */
                                    b |= (uint8_t)(((qh[l] >> (2 * p)) & 1) << m);
                                    b |= (uint8_t)(((qh[l] >> (2 * p + 1)) & 1) << (4 + m));
                                }
                                B[192 + unit * (size_t)p + 512 + 64 * (size_t)v + 4 * (size_t)r + (size_t)i] = b;
                            }
                }
            }
            break;
        }
        case KQ_Q6_K:
            for (int r = 0; r < OB_PANEL; r++) {
                const ob_block_q6_K *x = (const ob_block_q6_K *)(const void *)ROW(blk, rb, r);
                memcpy(D + 2 * r, &x->d, 2);
                /* the row's 256 codes, low 4 and high 2 bits apart */
                uint8_t lo4[256], hi2[256];
                for (int h = 0; h < 2; h++)
                    for (int k = 0; k < 4; k++)
                        for (int l = 0; l < 32; l++) {
                            const int e = 128 * h + 32 * k + l;
                            lo4[e] = (uint8_t)((x->ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f);
                            hi2[e] = (uint8_t)((x->qh[32 * h + l] >> (2 * k)) & 3);
                        }
                for (int s = 0; s < 16; s++) {
                    uint8_t *U = B + 832 * (size_t)(s / 4);
                    uint8_t *sub = U + 192 * (size_t)(s % 4) + 4 * r;
                    const uint8_t *L = lo4 + 16 * s, *Hh = hi2 + 16 * s;
                    for (int i = 0; i < 4; i++) {
                        sub[i] = (uint8_t)(L[i] | L[4 + i] << 4);
                        sub[64 + i] = (uint8_t)(L[8 + i] | L[12 + i] << 4);
                        sub[128 + i] = (uint8_t)(Hh[i] | Hh[4 + i] << 2 | Hh[8 + i] << 4 | Hh[12 + i] << 6);
                    }
                    U[768 + 16 * (s % 4) + r] = (uint8_t)x->scales[s];
                }
            }
            break;
        case KQ_IQ4_XS:
            for (int s = 0; s < 8; s++)
                for (int c = 0; c < 4; c++)
                    gather_chunk(blk, rb, offsetof(ob_block_iq4_xs, qs) + 16 * (size_t)s + 4 * (size_t)c, 0,
                                 B + 1088 * (size_t)(s / 4) + 256 * (size_t)(s % 4) + 64 * (size_t)c);
            for (int r = 0; r < OB_PANEL; r++) {
                const ob_block_iq4_xs *x = (const ob_block_iq4_xs *)(const void *)ROW(blk, rb, r);
                memcpy(D + 2 * r, &x->d, 2);
                for (int s = 0; s < 8; s++) {
                    const int ls = ((x->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((x->scales_h >> (2 * s)) & 3) << 4;
                    B[1088 * (size_t)(s / 4) + 1024 + 16 * (size_t)(s % 4) + (size_t)r] = (uint8_t)(int8_t)(ls - 32);
                }
            }
            break;
        case KQ_Q2_K:
        case KQ_Q3_K:
        case KQ_TQ2_0: {
            const size_t off_qs = kind == KQ_Q2_K ? offsetof(ob_block_q2_K, qs)
                                : kind == KQ_Q3_K ? offsetof(ob_block_q3_K, qs)
                                                  : offsetof(ob_block_tq2_0, qs);
            uint8_t *U0 = B + (kind == KQ_Q3_K ? 512 : 0);
            const size_t unit = kind == KQ_TQ2_0 ? 512 : 640;
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c++)
                    gather_chunk(blk, rb, off_qs + 32 * (size_t)h + 4 * (size_t)c, 0, U0 + unit * (size_t)h + 64 * (size_t)c);
            if (kind == KQ_Q3_K)
                for (int c = 0; c < 8; c++) gather_chunk(blk, rb, offsetof(ob_block_q3_K, hmask) + 4 * (size_t)c, 0, B + 64 * (size_t)c);
            for (int r = 0; r < OB_PANEL; r++) {
                const char *x = ROW(blk, rb, r);
                if (kind == KQ_Q2_K) {
                    const ob_block_q2_K *q2 = (const ob_block_q2_K *)(const void *)x;
                    memcpy(D + 2 * r, &q2->d, 2);
                    memcpy(D + 32 + 2 * r, &q2->dmin, 2);
                    for (int s = 0; s < 16; s++) U0[unit * (size_t)(s / 8) + 512 + 16 * (size_t)(s % 8) + (size_t)r] = q2->scales[s];
                } else if (kind == KQ_Q3_K) {
                    const ob_block_q3_K *q3 = (const ob_block_q3_K *)(const void *)x;
                    memcpy(D + 2 * r, &q3->d, 2);
                    for (int s = 0; s < 16; s++) {
                        const int lo = s < 8 ? q3->scales[s] & 0x0f : q3->scales[s - 8] >> 4;
                        const int hi = (q3->scales[8 + s % 4] >> (2 * (s / 4))) & 3;
                        U0[unit * (size_t)(s / 8) + 512 + 16 * (size_t)(s % 8) + (size_t)r] = (uint8_t)(int8_t)((lo | hi << 4) - 32);
                    }
                } else {
                    memcpy(D + 2 * r, &((const ob_block_tq2_0 *)(const void *)x)->d, 2);
                }
            }
            break;
        }
        default: /* TQ1_0 */
            for (int j = 0; j < 12; j++) gather_chunk(blk, rb, offsetof(ob_block_tq1_0, qs) + 4 * (size_t)j, 0, B + 64 * (size_t)j);
            gather_chunk(blk, rb, offsetof(ob_block_tq1_0, qh), 0, B + 64 * 12);
            for (int r = 0; r < OB_PANEL; r++) memcpy(D + 2 * r, &((const ob_block_tq1_0 *)(const void *)ROW(blk, rb, r))->d, 2);
            break;
        }
    }
}

INLINE void gemm_kq_body(const int kind, const int NT, int64_t n, const void *panel, const char *act, size_t as,
                         float *out, size_t os) {
    const int64_t nsb = n / OB_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10), m30 = _mm512_set1_epi8(0x30);
    const __m512i m3 = _mm512_set1_epi8(3), m04 = _mm512_set1_epi8(4);
    uint8_t lut_b[16];
    for (int i = 0; i < 16; i++) lut_b[i] = (uint8_t)(ob_iq4nl_values[i] + 128);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)lut_b));
    __m512 acc[8];
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *B = kq_sb(kind, panel, i), *D = kq_d(kind, panel, i);
        if (NT <= 2) {
            /* Decode: a super-block's bytes (its lines) prefetched 4 KiB ahead - at least the
             * next super-block, whose panel bytes are 1.3-3.4 KiB - as this one starts. The
             * hardware prefetcher alone left the stream short of lines in flight once the
             * loop runs ahead of it (single-thread gemv from DRAM, 1bit bench --kernels on
             * the Zen 5 box: Q4_K 22 -> 43 GB/s, Q5_K 16 -> 33, Q6_K 31-34 -> 39 (its
             * earlier 576-byte in-loop prefetch replaced), IQ4_XS 31 -> 38-43; Q3_K had it
             * first: 6-7 -> 25-35). 4 KiB rather than exactly the next super-block: with two
             * threads sharing the memory, Llama-3.2-1B Q4_K_M tg64 +6% (eight alternated
             * pairs, seven up), IQ4_XS +15-20% at 16 threads on a Xeon; 8 KiB was no better
             * (bench/RESULTS.md, session 20). Prefill (more tokens) reuses each panel from
             * L2 and needs none. Prefetches never fault: past the last panel they are
             * harmless. */
            const size_t sbb = kq_body_bytes(kind) + kq_d_bytes(kind), ahead = sbb > 4096 ? sbb : 4096;
            for (size_t l = 0; l < (sbb + 63) / 64; l++) _mm_prefetch((const char *)B + ahead + 64 * l, _MM_HINT_T0);
        }
        const ob_act_q8K *a[8];
        __m512i isum[8];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            a[t] = (const ob_act_q8K *)(const void *)(act + (size_t)t * as) + i;
            isum[t] = _mm512_setzero_si512();
        }
        __m512i mnp[8]; /* mins as int16 pairs (Q4_K, Q5_K: 4 pairs; Q2_K: 8) */
        if (kind == KQ_Q4_K || kind == KQ_Q5_K) {
            /* 6-bit scales and mins from the file's 12 bytes per row (lanes
             * w0..w2 = bytes 0..3, 4..7, 8..11): the same bytes as the row
             * format, unpacked here once per 16 rows */
            const size_t unit = kind == KQ_Q4_K ? 512 : 640;
            const __m512i w0 = _mm512_load_si512((const void *)B), w1 = _mm512_load_si512((const void *)(B + 64));
            const __m512i w2 = _mm512_load_si512((const void *)(B + 128));
            __m512i mn[8];
            /* Q4_K for one or two tokens (decode): both nibbles of a chunk
             * at once (sub-blocks 2p and 2p+1), so each chunk is loaded once,
             * not once per sub-block, and each token has two independent
             * vpdpbusd chains of 8 instead of one. Integer sums: the
             * grouping does not change the result (batch invariance).
             * Single-thread gemv (1bit bench --kernels): from L2 50.5 -> 60
             * GB/s, from DRAM 35 -> 40. More tokens keep the loop below
             * (their chains are independent already, and 2 x 8 nibble
             * accumulators would not fit the registers). */
            const bool pairs = kind == KQ_Q4_K && NT <= 2;
            for (int p = 0; p < 4 && pairs; p++) {
                const uint8_t *U = B + 192 + 512 * (size_t)p;
                __m512i sc0, sc1;
                k4_scale(2 * p, w0, w1, w2, &sc0, &mn[2 * p]);
                k4_scale(2 * p + 1, w0, w1, w2, &sc1, &mn[2 * p + 1]);
                __m512i lo[2], hi[2];
#pragma GCC unroll 2
                for (int t = 0; t < NT && t < 2; t++) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    const __m512i raw = _mm512_load_si512((const void *)(U + 64 * j));
                    /* high nibbles in place (16 x code, one vpandnd instead of a
                     * shift and a mask): the chain's sum is 16 x the true one,
                     * exactly (at most 32 x 240 x 127 per lane), divided once below */
                    const __m512i wl = _mm512_and_si512(raw, m4), wh = _mm512_andnot_si512(m4, raw);
#pragma GCC unroll 2
                    for (int t = 0; t < NT && t < 2; t++) {
                        lo[t] = _mm512_dpbusd_epi32(lo[t], wl, bcast32(a[t]->qs + 64 * p + 4 * j));
                        hi[t] = _mm512_dpbusd_epi32(hi[t], wh, bcast32(a[t]->qs + 64 * p + 32 + 4 * j));
                    }
                }
#pragma GCC unroll 2
                for (int t = 0; t < NT && t < 2; t++)
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(lo[t], sc0),
                                                                         _mm512_mullo_epi32(_mm512_srai_epi32(hi[t], 4), sc1)));
            }
            for (int s = 0; s < 8 && !pairs; s++) {
                const uint8_t *U = B + 192 + unit * (size_t)(s / 2);
                const int hi_half = s % 2;
                __m512i scv;
                k4_scale(s, w0, w1, w2, &scv, &mn[s]);
                __m512i ia[8];
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) ia[t] = _mm512_setzero_si512();
                for (int j = 0; j < 8; j++) {
                    const __m512i raw = _mm512_load_si512((const void *)(U + 64 * j));
                    __m512i w;
                    if (kind == KQ_Q5_K) {
                        const __m512i hv = _mm512_load_si512((const void *)(U + 512 + 64 * (j / 4)));
                        const __m512i tj = _mm512_srli_epi16(hv, (unsigned)(j % 4));
                        w = hi_half ? or_and(_mm512_srli_epi16(raw, 4), m4, _mm512_and_si512(tj, m10))
                                    : or_and(raw, m4, _mm512_and_si512(_mm512_slli_epi16(tj, 4), m10));
                    } else {
                        w = hi_half ? _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4) : _mm512_and_si512(raw, m4);
                    }
#pragma GCC unroll 8
                    for (int t = 0; t < NT; t++) ia[t] = _mm512_dpbusd_epi32(ia[t], w, bcast32(a[t]->qs + 32 * s + 4 * j));
                }
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ia[t], scv));
            }
            for (int q = 0; q < 4; q++) mnp[q] = _mm512_or_si512(mn[2 * q], _mm512_slli_epi32(mn[2 * q + 1], 16));
        } else if (kind == KQ_IQ4_XS && NT <= 2) {
            /* One or two tokens (decode): four sub-blocks side by side, low and high
             * nibbles in separate sums, so each token has eight independent vpdpbusd
             * chains of 4 instead of one chain of 8 per sub-block, whose latency bound
             * the loop below (decode slower than the AVX2 tier's). Exact integer sums:
             * the grouping changes no result. */
            for (int s0 = 0; s0 < 8; s0 += 4) {
                const uint8_t *U = B + 1088 * (size_t)(s0 / 4);
                __m512i il[2][4], ih[2][4];
#pragma GCC unroll 2
                for (int t = 0; t < NT && t < 2; t++)
                    for (int q = 0; q < 4; q++) {
                        il[t][q] = _mm512_set1_epi32(-128 * a[t]->bsum32[s0 + q]);
                        ih[t][q] = _mm512_setzero_si512();
                    }
                for (int c = 0; c < 4; c++)
#pragma GCC unroll 4
                    for (int q = 0; q < 4; q++) {
                        const __m512i raw = _mm512_load_si512((const void *)(U + 256 * (size_t)q + 64 * c));
                        const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4));
                        const __m512i hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
#pragma GCC unroll 2
                        for (int t = 0; t < NT && t < 2; t++) {
                            const int8_t *aq = a[t]->qs + 32 * (s0 + q) + 4 * c;
                            il[t][q] = _mm512_dpbusd_epi32(il[t][q], lo, bcast32(aq));
                            ih[t][q] = _mm512_dpbusd_epi32(ih[t][q], hi, bcast32(aq + 16));
                        }
                    }
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) {
                    const __m512i scv = load_i8x16(U + 1024 + 16 * (size_t)q);
#pragma GCC unroll 2
                    for (int t = 0; t < NT && t < 2; t++)
                        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(il[t][q], ih[t][q]), scv));
                }
            }
        } else if (kind == KQ_IQ4_XS) {
            for (int s = 0; s < 8; s++) {
                const uint8_t *U = B + 1088 * (size_t)(s / 4);
                const uint8_t *C = U + 256 * (size_t)(s % 4);
                const __m512i scv = load_i8x16(U + 1024 + 16 * (s % 4));
                __m512i ia[8];
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) ia[t] = _mm512_set1_epi32(-128 * a[t]->bsum32[s]);
                for (int c = 0; c < 4; c++) {
                    const __m512i raw = _mm512_load_si512((const void *)(C + 64 * c));
                    const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4));
                    const __m512i hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
#pragma GCC unroll 8
                    for (int t = 0; t < NT; t++) {
                        const int8_t *aq = a[t]->qs + 32 * s + 4 * c;
                        ia[t] = _mm512_dpbusd_epi32(ia[t], lo, bcast32(aq));
                        ia[t] = _mm512_dpbusd_epi32(ia[t], hi, bcast32(aq + 16));
                    }
                }
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ia[t], scv));
            }
        } else if (kind == KQ_Q6_K) {
            for (int s = 0; s < 16; s++) {
                const uint8_t *U = B + 832 * (size_t)(s / 4), *sb = U + 192 * (size_t)(s % 4);
                const __m512i n0 = _mm512_load_si512((const void *)sb), n1 = _mm512_load_si512((const void *)(sb + 64));
                const __m512i h = _mm512_load_si512((const void *)(sb + 128));
                __m512i c[4];
                c[0] = or_and(n0, m4, _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
                c[1] = or_and(_mm512_srli_epi16(n0, 4), m4, _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
                c[2] = or_and(n1, m4, _mm512_and_si512(h, m30));
                c[3] = or_and(_mm512_srli_epi16(n1, 4), m4, _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
                const __m512i scv = load_i8x16(U + 768 + 16 * (s % 4));
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) {
                    const int8_t *aq = a[t]->qs + 16 * s;
                    __m512i ia = _mm512_set1_epi32(-32 * a[t]->bsums[s]);
                    ia = _mm512_dpbusd_epi32(ia, c[0], bcast32(aq));
                    ia = _mm512_dpbusd_epi32(ia, c[1], bcast32(aq + 4));
                    ia = _mm512_dpbusd_epi32(ia, c[2], bcast32(aq + 8));
                    ia = _mm512_dpbusd_epi32(ia, c[3], bcast32(aq + 12));
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ia, scv));
                }
            }
        } else if ((kind == KQ_Q2_K || kind == KQ_Q3_K) && NT <= 2) {
            /* One or two tokens (decode): the four sub-blocks kk that share a run of 4 chunks
             * (the 2-bit fields of the same bytes) go side by side - each chunk (and hmask chunk)
             * loaded once instead of once per sub-block, and four independent vpdpbusd chains a
             * token instead of one at a time, whose 4-deep latency bound the loop below (gemv
             * from L2 22 GB/s against Q4_K's 100). Integer sums: the same result. */
            const uint8_t *U0 = B + (kind == KQ_Q3_K ? 512 : 0);
            for (int h = 0; h < 2; h++) {
                const uint8_t *U = U0 + 640 * (size_t)h;
                for (int half = 0; half < 2; half++) {
                    __m512i ia[2][4];
#pragma GCC unroll 2
                    for (int t = 0; t < NT && t < 2; t++)
                        for (int kk = 0; kk < 4; kk++)
                            ia[t][kk] = kind == KQ_Q3_K ? _mm512_set1_epi32(-4 * a[t]->bsums[8 * h + 2 * kk + half])
                                                        : _mm512_setzero_si512();
                    for (int c = 4 * half; c < 4 * half + 4; c++) {
                        const __m512i raw = _mm512_load_si512((const void *)(U + 64 * c));
                        const __m512i hv = kind == KQ_Q3_K ? _mm512_load_si512((const void *)(B + 64 * c)) : raw;
#pragma GCC unroll 4
                        for (int kk = 0; kk < 4; kk++) {
                            __m512i w = _mm512_and_si512(_mm512_srli_epi16(raw, (unsigned)(2 * kk)), m3);
                            if (kind == KQ_Q3_K) {
                                const int sh = 4 * h + kk;
                                const __m512i hb = sh >= 2 ? _mm512_srli_epi16(hv, (unsigned)(sh - 2))
                                                           : _mm512_slli_epi16(hv, (unsigned)(2 - sh));
                                w = _mm512_ternarylogic_epi32(w, hb, m04, 0xF8); /* w | (hb & 4) */
                            }
#pragma GCC unroll 2
                            for (int t = 0; t < NT && t < 2; t++)
                                ia[t][kk] = _mm512_dpbusd_epi32(
                                    ia[t][kk], w, bcast32(a[t]->qs + 16 * (8 * h + 2 * kk + half) + 4 * (c - 4 * half)));
                        }
                    }
                    for (int kk = 0; kk < 4; kk++) {
                        const uint8_t *sp = U + 512 + 16 * (size_t)(2 * kk + half);
                        const __m512i scv =
                            kind == KQ_Q2_K ? _mm512_and_si512(load_u8x16(sp), _mm512_set1_epi32(15)) : load_i8x16(sp);
#pragma GCC unroll 2
                        for (int t = 0; t < NT && t < 2; t++)
                            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ia[t][kk], scv));
                    }
                }
            }
            if (kind == KQ_Q2_K)
                for (int q = 0; q < 8; q++) {
                    const uint8_t *sp = U0 + 640 * (size_t)(q / 4) + 512 + 32 * (size_t)(q % 4);
                    mnp[q] = _mm512_or_si512(_mm512_srli_epi32(load_u8x16(sp), 4),
                                             _mm512_slli_epi32(_mm512_srli_epi32(load_u8x16(sp + 16), 4), 16));
                }
        } else if (kind == KQ_Q2_K || kind == KQ_Q3_K) {
            const uint8_t *U0 = B + (kind == KQ_Q3_K ? 512 : 0);
            for (int s = 0; s < 16; s++) {
                const int h = s / 8, kk = (s % 8) / 2, half = s % 2;
                const uint8_t *U = U0 + 640 * (size_t)h;
                const uint8_t *sp = U + 512 + 16 * (s % 8);
                const __m512i scv = kind == KQ_Q2_K ? _mm512_and_si512(load_u8x16(sp), _mm512_set1_epi32(15)) : load_i8x16(sp);
                __m512i ia[8];
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++)
                    ia[t] = kind == KQ_Q3_K ? _mm512_set1_epi32(-4 * a[t]->bsums[s]) : _mm512_setzero_si512();
                for (int c = 4 * half; c < 4 * half + 4; c++) {
                    const __m512i raw = _mm512_load_si512((const void *)(U + 64 * c));
                    __m512i w = _mm512_and_si512(_mm512_srli_epi16(raw, (unsigned)(2 * kk)), m3);
                    if (kind == KQ_Q3_K) {
                        /* bit 4h+kk of the hmask chunk becomes bit 2 of the code */
                        const __m512i hv = _mm512_load_si512((const void *)(B + 64 * c));
                        const int sh = 4 * h + kk;
                        const __m512i hb = sh >= 2 ? _mm512_srli_epi16(hv, (unsigned)(sh - 2)) : _mm512_slli_epi16(hv, (unsigned)(2 - sh));
                        w = _mm512_ternarylogic_epi32(w, hb, m04, 0xF8); /* w | (hb & 4) */
                    }
#pragma GCC unroll 8
                    for (int t = 0; t < NT; t++)
                        ia[t] = _mm512_dpbusd_epi32(ia[t], w, bcast32(a[t]->qs + 16 * s + 4 * (c - 4 * half)));
                }
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ia[t], scv));
            }
            if (kind == KQ_Q2_K)
                for (int q = 0; q < 8; q++) {
                    const uint8_t *sp = U0 + 640 * (size_t)(q / 4) + 512 + 32 * (size_t)(q % 4);
                    mnp[q] = _mm512_or_si512(_mm512_srli_epi32(load_u8x16(sp), 4),
                                             _mm512_slli_epi32(_mm512_srli_epi32(load_u8x16(sp + 16), 4), 16));
                }
        } else {
            /* TQ2_0, TQ1_0: codes are value + 1, so each sum starts at -sum(a) */
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                int tot = 0;
                for (int g = 0; g < 8; g++) tot += a[t]->bsum32[g];
                isum[t] = _mm512_set1_epi32(-tot);
            }
            if (kind == KQ_TQ2_0) {
                for (int j = 0; j < 16; j++) {
                    const int h = j / 8, c = j % 8;
                    const __m512i raw = _mm512_load_si512((const void *)(B + 64 * j));
                    for (int kk = 0; kk < 4; kk++) {
                        const __m512i w = _mm512_and_si512(_mm512_srli_epi16(raw, (unsigned)(2 * kk)), m3);
#pragma GCC unroll 8
                        for (int t = 0; t < NT; t++)
                            isum[t] = _mm512_dpbusd_epi32(isum[t], w, bcast32(a[t]->qs + 128 * h + 32 * kk + 4 * c));
                    }
                }
            } else {
                for (int j = 0; j < 13; j++) {
                    const __m512i raw = _mm512_load_si512((const void *)(B + 64 * j));
                    const int ndig = j < 12 ? 5 : 4;
                    for (int dg = 0; dg < ndig; dg++) {
                        const __m512i w = tq1_digit(raw, dg);
                        const int e = tq1_element(j, dg);
#pragma GCC unroll 8
                        for (int t = 0; t < NT; t++) isum[t] = _mm512_dpbusd_epi32(isum[t], w, bcast32(a[t]->qs + e));
                    }
                }
            }
        }
        const __m512 d = load_h16(D);
        if (kind == KQ_Q4_K || kind == KQ_Q5_K || kind == KQ_Q2_K) {
            const __m512 dmin = load_h16(D + 32);
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const __m512i ms = kind == KQ_Q2_K ? mins_dot(mnp, 8, a[t]->bsums) : mins_dot(mnp, 4, a[t]->bsum32);
                const __m512 da = _mm512_set1_ps(a[t]->d);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, da), acc[t]);
                acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmin, da), acc[t]);
            }
        } else {
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++)
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, _mm512_set1_ps(a[t]->d)), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * os, acc[t]);
}

#define DEF_KQ(name, kind)                                                                                      \
    INLINE void body_##name(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o,       \
                            size_t os) {                                                                      \
        gemm_kq_body(kind, NT, n, p, a, as, o, os);                                                           \
    }                                                                                                         \
    static void gemm_##name(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) { \
        SPLIT_NT(body_##name, n, p, act, as, nt, out, os);                                                    \
    }                                                                                                         \
    static void pack_##name(const void *rows, size_t rb, int64_t n, void *panel) { pack_kq(kind, rows, rb, n, panel); } \
    static size_t bytes_##name(int64_t n) {                                                                   \
        const int64_t g = kq_group(kind);                                                                     \
        return (size_t)((n / OB_QK_K + g - 1) / g * g) * (kq_body_bytes(kind) + kq_d_bytes(kind));             \
    }

DEF_KQ(q4_K, KQ_Q4_K)
DEF_KQ(q5_K, KQ_Q5_K)
DEF_KQ(q6_K, KQ_Q6_K)
DEF_KQ(iq4_xs, KQ_IQ4_XS)
DEF_KQ(q2_K, KQ_Q2_K)
DEF_KQ(q3_K, KQ_Q3_K)
DEF_KQ(tq2_0, KQ_TQ2_0)
DEF_KQ(tq1_0, KQ_TQ1_0)

/* ======================================================================
 * Float weights
 *   F32  [n][16] floats   F16 [n][16] halves   (lane = row)
 *   BF16 [n/2][16][2] bf16 (lane = row, pair k, k+1)
 * ====================================================================== */

enum { FP_F32, FP_F16 };

static void pack_fp(int kind, const void *rows, size_t rb, int64_t n, void *panel) {
    if (kind == FP_F32) {
        float *dst = panel;
        for (int r = 0; r < OB_PANEL; r++) {
            const float *x = (const float *)(const void *)ROW(rows, rb, r);
            for (int64_t k = 0; k < n; k++) dst[(size_t)k * OB_PANEL + (size_t)r] = x[k];
        }
    } else {
        uint16_t *dst = panel;
        for (int r = 0; r < OB_PANEL; r++) {
            const uint16_t *x = (const uint16_t *)(const void *)ROW(rows, rb, r);
            for (int64_t k = 0; k < n; k++) dst[(size_t)k * OB_PANEL + (size_t)r] = x[k];
        }
    }
}

INLINE __m512 fp_load(const int kind, const uint8_t *p, int64_t k) {
    return kind == FP_F32 ? _mm512_load_ps((const void *)(p + (size_t)k * 64)) : load_h16(p + (size_t)k * 32);
}

INLINE void gemm_fp_body(const int kind, const int NT, int64_t n, const void *panel, const char *act, size_t as,
                         float *out, size_t os) {
    const uint8_t *p = panel;
    const float *a[8];
    for (int t = 0; t < NT; t++) a[t] = (const float *)(const void *)(act + (size_t)t * as);
    __m512 acc[8], acc2[8];
    for (int t = 0; t < 8; t++) acc[t] = acc2[t] = _mm512_setzero_ps();
    int64_t k = 0;
    /* Two k per step and two accumulators per token (even k, odd k) for
     * every NT: a token's sum is then the same whether it is alone or one of
     * 8 (batch invariance, see docs/performance.md), and the FMA latency
     * chain does not limit a memory-bound decode. 16 accumulators for NT = 8
     * still fit the 32 registers. */
    for (; k + 2 <= n; k += 2) {
        const __m512 w0 = fp_load(kind, p, k), w1 = fp_load(kind, p, k + 1);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            acc[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(a[t][k]), acc[t]);
            acc2[t] = _mm512_fmadd_ps(w1, _mm512_set1_ps(a[t][k + 1]), acc2[t]);
        }
    }
    for (; k < n; k++) {
        const __m512 w = fp_load(kind, p, k);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[t] = _mm512_fmadd_ps(w, _mm512_set1_ps(a[t][k]), acc[t]);
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * os, _mm512_add_ps(acc[t], acc2[t]));
}

INLINE void body_f32(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    gemm_fp_body(FP_F32, NT, n, p, a, as, o, os);
}
INLINE void body_f16(const int NT, int64_t n, const void *p, const char *a, size_t as, float *o, size_t os) {
    gemm_fp_body(FP_F16, NT, n, p, a, as, o, os);
}
static void gemm_f32(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(body_f32, n, p, act, as, nt, out, os);
}
static void gemm_f16(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(body_f16, n, p, act, as, nt, out, os);
}
/* Two neighbouring panels (p and p + ps) against NT <= 6 tokens: each broadcast activation feeds
 * both panels; per element the sums of gemm_fp_body (even k in acc, odd k in acc2) exactly. */
INLINE void gemm_fp_pair_body(const int kind, const int NT, int64_t n, const void *panel, size_t ps, const char *act,
                              size_t as, float *out, size_t os) {
    const uint8_t *p = panel, *q = p + ps;
    const float *a[6];
    for (int t = 0; t < NT; t++) a[t] = (const float *)(const void *)(act + (size_t)t * as);
    __m512 acc[6], acc2[6], bcc[6], bcc2[6];
    for (int t = 0; t < 6; t++) acc[t] = acc2[t] = bcc[t] = bcc2[t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= n; k += 2) {
        const __m512 w0 = fp_load(kind, p, k), w1 = fp_load(kind, p, k + 1);
        const __m512 x0 = fp_load(kind, q, k), x1 = fp_load(kind, q, k + 1);
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            const __m512 b0 = _mm512_set1_ps(a[t][k]), b1 = _mm512_set1_ps(a[t][k + 1]);
            acc[t] = _mm512_fmadd_ps(w0, b0, acc[t]);
            bcc[t] = _mm512_fmadd_ps(x0, b0, bcc[t]);
            acc2[t] = _mm512_fmadd_ps(w1, b1, acc2[t]);
            bcc2[t] = _mm512_fmadd_ps(x1, b1, bcc2[t]);
        }
    }
    for (; k < n; k++) {
        const __m512 w = fp_load(kind, p, k), x = fp_load(kind, q, k);
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            const __m512 b = _mm512_set1_ps(a[t][k]);
            acc[t] = _mm512_fmadd_ps(w, b, acc[t]);
            bcc[t] = _mm512_fmadd_ps(x, b, bcc[t]);
        }
    }
    for (int t = 0; t < NT; t++) {
        _mm512_storeu_ps(out + (size_t)t * os, _mm512_add_ps(acc[t], acc2[t]));
        _mm512_storeu_ps(out + (size_t)t * os + OB_PANEL, _mm512_add_ps(bcc[t], bcc2[t]));
    }
}
/* nt tokens in groups of 6 through a two-panel body(NT, n, p, ps, act, as, out, os) */
#define SPLIT_NT6(body, n, p, ps, act, as, nt, out, os)                                   \
    do {                                                                                  \
        const char *a_ = (const char *)(act);                                             \
        float *o_ = (out);                                                                \
        int r_ = (nt);                                                                    \
        for (; r_ >= 6; r_ -= 6, a_ += 6 * (as), o_ += 6 * (os)) body(6, n, p, ps, a_, as, o_, os); \
        switch (r_) {                                                                     \
        case 5: body(5, n, p, ps, a_, as, o_, os); break;                                 \
        case 4: body(4, n, p, ps, a_, as, o_, os); break;                                 \
        case 3: body(3, n, p, ps, a_, as, o_, os); break;                                 \
        case 2: body(2, n, p, ps, a_, as, o_, os); break;                                 \
        case 1: body(1, n, p, ps, a_, as, o_, os); break;                                 \
        default: break;                                                                   \
        }                                                                                 \
    } while (0)
INLINE void pair_f32(const int NT, int64_t n, const void *p, size_t ps, const char *a, size_t as, float *o, size_t os) {
    gemm_fp_pair_body(FP_F32, NT, n, p, ps, a, as, o, os);
}
INLINE void pair_f16(const int NT, int64_t n, const void *p, size_t ps, const char *a, size_t as, float *o, size_t os) {
    gemm_fp_pair_body(FP_F16, NT, n, p, ps, a, as, o, os);
}
static void gemm_f32_pair(int64_t n, const void *p, size_t ps, const void *act, size_t as, int nt, float *out,
                          size_t os) {
    SPLIT_NT6(pair_f32, n, p, ps, act, as, nt, out, os);
}
static void gemm_f16_pair(int64_t n, const void *p, size_t ps, const void *act, size_t as, int nt, float *out,
                          size_t os) {
    SPLIT_NT6(pair_f16, n, p, ps, act, as, nt, out, os);
}

static void pack_f32(const void *rows, size_t rb, int64_t n, void *panel) { pack_fp(FP_F32, rows, rb, n, panel); }
static void pack_f16(const void *rows, size_t rb, int64_t n, void *panel) { pack_fp(FP_F16, rows, rb, n, panel); }
static size_t bytes_f32(int64_t n) { return (size_t)n * OB_PANEL * 4; }
static size_t bytes_f16(int64_t n) { return (size_t)n * OB_PANEL * 2; }

static void pack_bf16(const void *rows, size_t rb, int64_t n, void *panel) {
    uint32_t *dst = panel; /* one (k, k+1) pair per 32 bits */
    for (int r = 0; r < OB_PANEL; r++) {
        const uint32_t *x = (const uint32_t *)(const void *)ROW(rows, rb, r);
        for (int64_t kp = 0; kp < n / 2; kp++) dst[(size_t)kp * OB_PANEL + (size_t)r] = x[kp];
    }
}
static size_t bytes_bf16(int64_t n) { return n % 2 ? 0 : (size_t)n * OB_PANEL * 2; }

/* vdpbf16ps against BF16 activations (pairs broadcast as 32 bits) */
INLINE void body_bf16_dp(const int NT, int64_t n, const void *panel, const char *act, size_t as, float *out,
                         size_t os) {
    const uint8_t *p = panel;
    const uint16_t *a[8];
    for (int t = 0; t < NT; t++) a[t] = (const uint16_t *)(const void *)(act + (size_t)t * as);
    __m512 acc[8], acc2[8];
    for (int t = 0; t < 8; t++) acc[t] = acc2[t] = _mm512_setzero_ps();
    int64_t kp = 0, np = n / 2;
    /* two pairs per step for every NT (the same sums alone or in a batch) */
    for (; kp + 2 <= np; kp += 2) {
        const __m512bh w0 = (__m512bh)_mm512_load_si512((const void *)(p + (size_t)kp * 64));
        const __m512bh w1 = (__m512bh)_mm512_load_si512((const void *)(p + (size_t)kp * 64 + 64));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            int32_t v0, v1;
            memcpy(&v0, a[t] + 2 * kp, 4);
            memcpy(&v1, a[t] + 2 * kp + 2, 4);
            acc[t] = _mm512_dpbf16_ps(acc[t], w0, (__m512bh)_mm512_set1_epi32(v0));
            acc2[t] = _mm512_dpbf16_ps(acc2[t], w1, (__m512bh)_mm512_set1_epi32(v1));
        }
    }
    for (; kp < np; kp++) {
        const __m512bh w = (__m512bh)_mm512_load_si512((const void *)(p + (size_t)kp * 64));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            int32_t v;
            memcpy(&v, a[t] + 2 * kp, 4);
            acc[t] = _mm512_dpbf16_ps(acc[t], w, (__m512bh)_mm512_set1_epi32(v));
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * os, _mm512_add_ps(acc[t], acc2[t]));
}
static void gemm_bf16_dp(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(body_bf16_dp, n, p, act, as, nt, out, os);
}

/* Two neighbouring panels (p and p + ps) against NT tokens: each broadcast activation pair feeds
 * both panels, so a multiply costs half the activation loads of body_bf16_dp - whose per-element
 * sums (even pairs in acc, odd pairs in acc2, added at the end) this keeps exactly. 4 NT
 * accumulators: NT <= 6 leaves the four weight vectors and the broadcasts their registers. */
INLINE void body_bf16_dp2(const int NT, int64_t n, const void *panel, size_t ps, const char *act, size_t as,
                          float *out, size_t os) {
    const uint8_t *p = panel, *q = p + ps;
    const uint16_t *a[6];
    for (int t = 0; t < NT; t++) a[t] = (const uint16_t *)(const void *)(act + (size_t)t * as);
    __m512 acc[6], acc2[6], bcc[6], bcc2[6];
    for (int t = 0; t < 6; t++) acc[t] = acc2[t] = bcc[t] = bcc2[t] = _mm512_setzero_ps();
    int64_t kp = 0, np = n / 2;
    for (; kp + 2 <= np; kp += 2) {
        const __m512bh w0 = (__m512bh)_mm512_load_si512((const void *)(p + (size_t)kp * 64));
        const __m512bh w1 = (__m512bh)_mm512_load_si512((const void *)(p + (size_t)kp * 64 + 64));
        const __m512bh x0 = (__m512bh)_mm512_load_si512((const void *)(q + (size_t)kp * 64));
        const __m512bh x1 = (__m512bh)_mm512_load_si512((const void *)(q + (size_t)kp * 64 + 64));
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            int32_t v0, v1;
            memcpy(&v0, a[t] + 2 * kp, 4);
            memcpy(&v1, a[t] + 2 * kp + 2, 4);
            const __m512bh b0 = (__m512bh)_mm512_set1_epi32(v0), b1 = (__m512bh)_mm512_set1_epi32(v1);
            acc[t] = _mm512_dpbf16_ps(acc[t], w0, b0);
            bcc[t] = _mm512_dpbf16_ps(bcc[t], x0, b0);
            acc2[t] = _mm512_dpbf16_ps(acc2[t], w1, b1);
            bcc2[t] = _mm512_dpbf16_ps(bcc2[t], x1, b1);
        }
    }
    for (; kp < np; kp++) {
        const __m512bh w = (__m512bh)_mm512_load_si512((const void *)(p + (size_t)kp * 64));
        const __m512bh x = (__m512bh)_mm512_load_si512((const void *)(q + (size_t)kp * 64));
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            int32_t v;
            memcpy(&v, a[t] + 2 * kp, 4);
            const __m512bh b = (__m512bh)_mm512_set1_epi32(v);
            acc[t] = _mm512_dpbf16_ps(acc[t], w, b);
            bcc[t] = _mm512_dpbf16_ps(bcc[t], x, b);
        }
    }
    for (int t = 0; t < NT; t++) {
        _mm512_storeu_ps(out + (size_t)t * os, _mm512_add_ps(acc[t], acc2[t]));
        _mm512_storeu_ps(out + (size_t)t * os + OB_PANEL, _mm512_add_ps(bcc[t], bcc2[t]));
    }
}
static void gemm_bf16_dp_pair(int64_t n, const void *p, size_t ps, const void *act, size_t as, int nt, float *out,
                              size_t os) {
    SPLIT_NT6(body_bf16_dp2, n, p, ps, act, as, nt, out, os);
}

/* the same panels widened to floats, against F32 activations */
INLINE void body_bf16_f32(const int NT, int64_t n, const void *panel, const char *act, size_t as, float *out,
                          size_t os) {
    const uint8_t *p = panel;
    const float *a[8];
    for (int t = 0; t < NT; t++) a[t] = (const float *)(const void *)(act + (size_t)t * as);
    __m512 acc[8], acc2[8];
    for (int t = 0; t < 8; t++) acc[t] = acc2[t] = _mm512_setzero_ps();
    const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
    for (int64_t kp = 0; kp < n / 2; kp++) {
        const __m512i w = _mm512_load_si512((const void *)(p + (size_t)kp * 64));
        const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
        const __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(w, hi_mask));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            acc[t] = _mm512_fmadd_ps(we, _mm512_set1_ps(a[t][2 * kp]), acc[t]);
            acc2[t] = _mm512_fmadd_ps(wo, _mm512_set1_ps(a[t][2 * kp + 1]), acc2[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * os, _mm512_add_ps(acc[t], acc2[t]));
}
static void gemm_bf16_f32(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) {
    SPLIT_NT(body_bf16_f32, n, p, act, as, nt, out, os);
}

/* ======================================================================
 * Attention tiles
 *
 * Scores: 2 query rows x 8 keys per step, 16 accumulators of 16 lanes over
 * the head dimension, then one transposing reduction turns the 16 vectors
 * into the 16 dot products (3 adds/shuffles per dot instead of a full
 * horizontal sum each). The last nk % 8 keys take the same path, so every
 * score has the same summation order (batch invariance). P.V: up to 4 rows x 64 output columns stay in
 * registers while the keys stream by, each V row load feeding every row.
 * Both read F32 rows or F16 rows straight from the cache (vcvtph2ps on the
 * loaded vector), so an F16 cache is never copied out to floats.
 * ====================================================================== */

/* lanes of the result: sum of v[0], v[1], ..., v[15] in order */
INLINE __m512 reduce16(const __m512 v[16]) {
    __m512 x[8], y[4];
    for (int i = 0; i < 8; i++)
        x[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
        y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x44), _mm512_shuffle_f32x4(y[0], y[1], 0xee));
    __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x44), _mm512_shuffle_f32x4(y[2], y[3], 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xdd));
}

INLINE __m512 load_d(const float *p, int i, int d) {
    if (i + 16 <= d) return _mm512_loadu_ps(p + i);
    return _mm512_maskz_loadu_ps((__mmask16)((1u << (d - i)) - 1), p + i);
}

/* 16 elements of a key/value row from column i (F32 or F16 rows). */
INLINE __m512 load_kv(const int half, const void *row, int i, int d) {
    if (!half) return load_d((const float *)row, i, d);
    const uint16_t *h = (const uint16_t *)row + i;
    if (i + 16 <= d) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)h));
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << (d - i)) - 1), h));
}

INLINE void qk_body(const int half, const float *q, int M, size_t ldq, const void *k, size_t kstride, int nk, int d,
                    float *s, size_t lds) {
    for (int m = 0; m < M; m += 2) {
        const int two = m + 1 < M;
        const float *q0 = q + (size_t)m * ldq, *q1 = two ? q0 + ldq : q0;
        int j = 0;
        for (; j + 8 <= nk; j += 8) {
            __m512 acc[16];
            for (int a = 0; a < 16; a++) acc[a] = _mm512_setzero_ps();
            const char *kr = (const char *)k + (size_t)j * kstride;
            for (int i = 0; i < d; i += 16) {
                const __m512 a0 = load_d(q0, i, d), a1 = load_d(q1, i, d);
#pragma GCC unroll 8
                for (int b = 0; b < 8; b++) {
                    const __m512 kv = load_kv(half, kr + (size_t)b * kstride, i, d);
                    acc[b] = _mm512_fmadd_ps(a0, kv, acc[b]);
                    acc[8 + b] = _mm512_fmadd_ps(a1, kv, acc[8 + b]);
                }
            }
            const __m512 r = reduce16(acc);
            _mm256_storeu_ps(s + (size_t)m * lds + j, _mm512_castps512_ps256(r));
            if (two) _mm256_storeu_ps(s + (size_t)(m + 1) * lds + j, _mm512_extractf32x8_ps(r, 1));
        }
        if (j < nk) {
            /* The last nk % 8 keys take the same 8-key path, so a key's score
             * does not depend on how many keys the call holds (batch
             * invariance): the missing keys' lanes re-read key j (never a row
             * past nk) and are not stored. reduce16 sums every lane with the
             * same tree, and a lane depends on its own accumulator only. */
            const int nb = nk - j;
            const char *kr[8];
            for (int b = 0; b < 8; b++) kr[b] = (const char *)k + (size_t)(j + (b < nb ? b : 0)) * kstride;
            __m512 acc[16];
            for (int a = 0; a < 16; a++) acc[a] = _mm512_setzero_ps();
            for (int i = 0; i < d; i += 16) {
                const __m512 a0 = load_d(q0, i, d), a1 = load_d(q1, i, d);
#pragma GCC unroll 8
                for (int b = 0; b < 8; b++) {
                    const __m512 kv = load_kv(half, kr[b], i, d);
                    acc[b] = _mm512_fmadd_ps(a0, kv, acc[b]);
                    acc[8 + b] = _mm512_fmadd_ps(a1, kv, acc[8 + b]);
                }
            }
            const __m512 r = reduce16(acc);
            const __mmask8 keep = (__mmask8)((1u << nb) - 1);
            _mm256_mask_storeu_ps(s + (size_t)m * lds + j, keep, _mm512_castps512_ps256(r));
            if (two) _mm256_mask_storeu_ps(s + (size_t)(m + 1) * lds + j, keep, _mm512_extractf32x8_ps(r, 1));
        }
    }
}

static void attn_qk_512(const float *q, int M, size_t ldq, const float *k, size_t kstride, int nk, int d, float *s,
                        size_t lds) {
    qk_body(0, q, M, ldq, k, kstride, nk, d, s, lds);
}
/* F16 rows for many query rows at once (a prompt's tiles: M = 64 tokens x
 * the GQA group) are converted to floats once per ATT_CONV keys and run
 * through the F32 tile, instead of once per pair of rows (scores) or group
 * of 4 rows (P.V) inside it. One thread, M = 128, 256 keys, d = 128: scores
 * 40.7 -> 46.7 GMAC/s, P.V 53.7 -> 54.6 (FP32 peak 58). vcvtph2ps is exact and the
 * F32 tile is the same code, and a key's score and a row's sums do not
 * depend on how the keys are grouped into calls, so the results are bit for
 * bit those of the in-place tile (batch invariance). Few rows (decode) keep
 * reading the cache in place. */
#define ATT_CONV 32
#define ATT_CONV_MIN_M 8
#define ATT_CONV_MAX_D 256

static void f16_rows_to_f32(const uint16_t *x, size_t xstride, int n, int d, float *y) {
    for (int j = 0; j < n; j++) {
        const uint16_t *r = (const uint16_t *)(const void *)((const char *)x + (size_t)j * xstride);
        float *o = y + (size_t)j * (size_t)d;
        int i = 0;
        for (; i + 16 <= d; i += 16) _mm512_storeu_ps(o + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(r + i))));
        if (i < d) {
            const __mmask16 m = (__mmask16)((1u << (d - i)) - 1);
            _mm512_mask_storeu_ps(o + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, r + i)));
        }
    }
}

static void attn_qk_f16_512(const float *q, int M, size_t ldq, const uint16_t *k, size_t kstride, int nk, int d,
                            float *s, size_t lds) {
    if (M < ATT_CONV_MIN_M || d > ATT_CONV_MAX_D) {
        qk_body(1, q, M, ldq, k, kstride, nk, d, s, lds);
        return;
    }
    float buf[ATT_CONV * ATT_CONV_MAX_D] __attribute__((aligned(64)));
    for (int j = 0; j < nk; j += ATT_CONV) {
        const int nb = nk - j < ATT_CONV ? nk - j : ATT_CONV;
        f16_rows_to_f32((const uint16_t *)(const void *)((const char *)k + (size_t)j * kstride), kstride, nb, d, buf);
        qk_body(0, q, M, ldq, buf, (size_t)d * sizeof(float), nb, d, s + j, lds);
    }
}

/* R rows x NV*16 columns starting at column i. R and NV are constants at
 * every call, so the R*NV accumulators stay in registers. */
INLINE void pv_tile(const int half, const int R, const int NV, const float *p, size_t ldp, float *o, size_t ldo,
                    const void *v, size_t vstride, int nk, int i, int d) {
    __m512 acc[4][4];
    const __mmask16 tail = i + 16 * NV <= d ? (__mmask16)0xffff : (__mmask16)((1u << ((d - i) % 16)) - 1);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++)
            acc[r][c] = _mm512_maskz_loadu_ps(c == NV - 1 ? tail : (__mmask16)0xffff, o + (size_t)r * ldo + i + 16 * c);
    for (int j = 0; j < nk; j++) {
        const char *vr = (const char *)v + (size_t)j * vstride;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++) vv[c] = load_kv(half, vr, i + 16 * c, d);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 wr = _mm512_set1_ps(p[(size_t)r * ldp + (size_t)j]);
#pragma GCC unroll 4
            for (int c = 0; c < NV; c++) acc[r][c] = _mm512_fmadd_ps(wr, vv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++)
            _mm512_mask_storeu_ps(o + (size_t)r * ldo + i + 16 * c, c == NV - 1 ? tail : (__mmask16)0xffff, acc[r][c]);
}

INLINE void pv_rows(const int half, const int R, const float *p, size_t ldp, float *o, size_t ldo, const void *v,
                    size_t vstride, int nk, int d) {
    int i = 0;
    for (; i + 64 <= d; i += 64) pv_tile(half, R, 4, p, ldp, o, ldo, v, vstride, nk, i, d);
    switch ((d - i + 15) / 16) {
    case 3: pv_tile(half, R, 3, p, ldp, o, ldo, v, vstride, nk, i, d); break;
    case 2: pv_tile(half, R, 2, p, ldp, o, ldo, v, vstride, nk, i, d); break;
    case 1: pv_tile(half, R, 1, p, ldp, o, ldo, v, vstride, nk, i, d); break;
    default: break;
    }
}

/* Rows in groups of 4, then 2, then 1: each V row load feeds every row of
 * the group. */
INLINE void pv_body(const int half, const float *p, int M, size_t ldp, const void *v, size_t vstride, int nk, int d,
                    float *o, size_t ldo) {
    int m = 0;
    for (; m + 4 <= M; m += 4) pv_rows(half, 4, p + (size_t)m * ldp, ldp, o + (size_t)m * ldo, ldo, v, vstride, nk, d);
    if (m + 2 <= M) {
        pv_rows(half, 2, p + (size_t)m * ldp, ldp, o + (size_t)m * ldo, ldo, v, vstride, nk, d);
        m += 2;
    }
    if (m < M) pv_rows(half, 1, p + (size_t)m * ldp, ldp, o + (size_t)m * ldo, ldo, v, vstride, nk, d);
}

static void attn_pv_512(const float *p, int M, size_t ldp, const float *v, size_t vstride, int nk, int d, float *o,
                        size_t ldo) {
    pv_body(0, p, M, ldp, v, vstride, nk, d, o, ldo);
}
/* The same for P.V (see attn_qk_f16_512): each output element still adds
 * the keys in key order, the partial sums going through o between blocks of
 * keys, exactly. */
static void attn_pv_f16_512(const float *p, int M, size_t ldp, const uint16_t *v, size_t vstride, int nk, int d,
                            float *o, size_t ldo) {
    if (M < ATT_CONV_MIN_M || d > ATT_CONV_MAX_D) {
        pv_body(1, p, M, ldp, v, vstride, nk, d, o, ldo);
        return;
    }
    float buf[ATT_CONV * ATT_CONV_MAX_D] __attribute__((aligned(64)));
    for (int j = 0; j < nk; j += ATT_CONV) {
        const int nb = nk - j < ATT_CONV ? nk - j : ATT_CONV;
        f16_rows_to_f32((const uint16_t *)(const void *)((const char *)v + (size_t)j * vstride), vstride, nb, d, buf);
        pv_body(0, p + j, M, ldp, buf, (size_t)d * sizeof(float), nb, d, o, ldo);
    }
}

/* ====================================================================== */

/* exp(x) for softmax arguments: avx2.c's exp256 on 16 lanes (the same
 * operations per element, so each value has exp256's bits). */
INLINE __m512 exp512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.0f);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
    return _mm512_maskz_mov_ps((__mmask16)~under, _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e)));
}

/* The largest of n >= 1 values, 16 lanes at a time (the tail lanes repeat x[0]). */
static float max_f32_512(const float *x, int n) {
    __m512 v = _mm512_set1_ps(x[0]);
    int i = 0;
    for (; i + 16 <= n; i += 16) v = _mm512_max_ps(_mm512_loadu_ps(x + i), v);
    if (i < n) v = _mm512_max_ps(_mm512_mask_loadu_ps(v, (__mmask16)((1u << (n - i)) - 1), x + i), v);
    return _mm512_reduce_max_ps(v);
}

/* y = exp(x - m) and their sum, 16 at a time (the tail under a mask). */
static float exp_sum_512(const float *x, float m, float *y, int n) {
    __m512 s = _mm512_setzero_ps();
    const __m512 vm = _mm512_set1_ps(m);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(y + i, e);
        s = _mm512_add_ps(s, e);
    }
    if (i < n) {
        const __mmask16 t = (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = _mm512_maskz_mov_ps(t, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + i), vm)));
        _mm512_mask_storeu_ps(y + i, t, e);
        s = _mm512_add_ps(s, e);
    }
    return _mm512_reduce_add_ps(s);
}

static void f16_to_f32_512(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(x + i))));
        _mm512_storeu_ps(y + i + 16, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(x + i + 16))));
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
    }
}

static void to_bf16(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512((void *)(y + i), (__m512i)v);
    }
    for (; i < n; i++) y[i] = ob_fp32_to_bf16(x[i]);
}

void ob_cpu_fill_avx512(ob_cpu_kernels *k, const ob_cpu_features *f) {
    k->tier = OB_CPU_AVX512;
    k->name = "avx512";
    const int vnni = f->avx512vnni, bf16 = f->avx512bf16;
    k->attn_qk = attn_qk_512;
    k->attn_pv = attn_pv_512;
    k->attn_qk_f16 = attn_qk_f16_512;
    k->attn_pv_f16 = attn_pv_f16_512;
    k->f16_to_f32 = f16_to_f32_512;
    k->exp_sum = exp_sum_512;
    k->max_f32 = max_f32_512;
#define PACK(T, name, fmt) \
    k->mm[T].packed_act = fmt, k->mm[T].panel_bytes = bytes_##name, k->mm[T].pack = pack_##name, k->mm[T].gemm = gemm_##name
    if (vnni) {
        k->name = bf16 ? "avx512-vnni-bf16" : "avx512-vnni";
        PACK(OB_TYPE_Q4_0, q4_0, OB_ACT_Q8);
        /* W4A4 on the panels: vpdpbusd multiplies bytes, so the 4-bit codes
         * are widened once per row (OB_ACT_Q4X, not once per panel) and the
         * 8-bit kernel runs on them unchanged: -8 * s starts each block's
         * exact int32 sum of (w - 8) q, one float multiply by d_w * d_a. */
        k->mm[OB_TYPE_Q4_0].gemm_a4 = gemm_q4_0;
        k->mm[OB_TYPE_Q4_0].packed_a4_act = OB_ACT_Q4X;
        PACK(OB_TYPE_Q4_1, q4_1, OB_ACT_Q8);
        PACK(OB_TYPE_Q5_0, q5_0, OB_ACT_Q8);
        PACK(OB_TYPE_Q5_1, q5_1, OB_ACT_Q8);
        PACK(OB_TYPE_Q8_0, q8_0, OB_ACT_Q8);
        PACK(OB_TYPE_IQ4_NL, iq4_nl, OB_ACT_Q8);
        PACK(OB_TYPE_MXFP4, mxfp4, OB_ACT_Q8);
        PACK(OB_TYPE_Q4_K, q4_K, OB_ACT_Q8K);
        PACK(OB_TYPE_Q5_K, q5_K, OB_ACT_Q8K);
        PACK(OB_TYPE_Q6_K, q6_K, OB_ACT_Q8K);
        PACK(OB_TYPE_IQ4_XS, iq4_xs, OB_ACT_Q8K);
        PACK(OB_TYPE_Q2_K, q2_K, OB_ACT_Q8K);
        PACK(OB_TYPE_Q3_K, q3_K, OB_ACT_Q8K);
        PACK(OB_TYPE_TQ2_0, tq2_0, OB_ACT_Q8K);
        PACK(OB_TYPE_TQ1_0, tq1_0, OB_ACT_Q8K);
    }
    PACK(OB_TYPE_F32, f32, OB_ACT_F32);
    PACK(OB_TYPE_F16, f16, OB_ACT_F32);
    k->mm[OB_TYPE_F32].gemm_pair = gemm_f32_pair;
    k->mm[OB_TYPE_F16].gemm_pair = gemm_f16_pair;
    k->mm[OB_TYPE_BF16].panel_bytes = bytes_bf16;
    k->mm[OB_TYPE_BF16].pack = pack_bf16;
    if (bf16) {
        k->mm[OB_TYPE_BF16].packed_act = OB_ACT_BF16;
        k->mm[OB_TYPE_BF16].gemm = gemm_bf16_dp;
        k->mm[OB_TYPE_BF16].gemm_pair = gemm_bf16_dp_pair;
        k->to_bf16 = to_bf16;
    } else {
        k->mm[OB_TYPE_BF16].packed_act = OB_ACT_F32;
        k->mm[OB_TYPE_BF16].gemm = gemm_bf16_f32;
    }
#undef PACK
}
