/*
 * amx.c - prefill on AMX tiles (AMX-TILE + AMX-INT8: Sapphire Rapids and
 * later Xeons). Compiled with the AVX-512 set plus -mamx-tile -mamx-int8;
 * installed on the AVX-512 tier only when the CPU has AMX-INT8, the OS
 * granted this process the tile state (ob_cpu_amx_request) and OB_CPU_AMX is
 * not 0. Decode keeps the VNNI panels of avx512.c.
 *
 * What a tile instruction does. tdpb[s|u][s|u]d C += A * B with A a tile of
 * 16 rows of 64 bytes (16 tokens x 64 int8 activations), B 16 rows of 64
 * bytes in the "VNNI" order (row k/4 holds, for each of 16 output columns,
 * 4 consecutive k) and C 16 x 16 int32: 16,384 multiply-adds, issued every
 * 16 cycles, 8x what vpdpbusd gives a core. A packed panel's 64-byte chunk
 * (4 bytes of each of 16 weight rows) is exactly one row of B, so the panels
 * of avx512.c are already in the order the tiles want; what a tile cannot
 * do is unpack nibbles or apply per-block scales. So per call (one panel of
 * 16 weight rows against up to 128 tokens):
 *
 *   1. unpack a slab of the panel into signed bytes in B order, once per
 *      call (it is then reused by every 16 tokens);
 *   2. per 16 tokens, run the tiles over the slab and turn each block's (or
 *      super-block's) int32 C tile into floats with exactly the arithmetic of
 *      the VNNI kernel (avx512.c), so a token's output is the same bit for bit
 *      whether it came here (prefill) or through vpdpbusd (decode, a short
 *      batch): the batch invariance the CPU backend promises.
 *   3. tokens left over (fewer than 16) go to the VNNI kernel.
 *
 * The legacy 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4)
 * have a float scale per block: one tile product of K = 32 per block, the
 * weights unpacked to their signed values (q - 8, q - 16, the table's
 * values, Q8_0's codes), so C is the block's exact sum that VNNI gets as
 * sum((w + offset) a) - offset sum(a), and acc += float(C) * (d_w * d_a).
 *
 * The K types (Q4_K, Q5_K, Q6_K, IQ4_XS) scale sub-blocks of 16 or 32 by
 * small integers and a super-block of 256 by a float. The integer scale is
 * multiplied into the weight while unpacking: w' = (code - offset) * scale,
 * at most 13 bits, split into two byte planes lo = w' & 127 (unsigned) and
 * hi = w' >> 7 (signed), so C_lo + 128 C_hi = sum(w' a), exactly VNNI's
 * integer sum of the super-block. The tiles then accumulate a whole
 * super-block (4 steps of K = 64 on each plane) before one conversion to
 * float, which is also what VNNI does: the float work is per 256 instead of
 * per 32, and the tiles, not the vector units, set the pace.
 */
#include <immintrin.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../quant/iq_tables.h"
#include "panel_a8.h"
#include "panel_kq.h"
#include "split_nt.h"

/* Tokens of one tile (the rows of A and C). */
#define TT 16
/* Legacy blocks unpacked at a time: 32 x 512 bytes (16 KiB, stays in L1). */
#define A8_SLAB 32
/* Super-blocks unpacked at a time: 4 x 8 KiB of planes. */
#define KQ_SLAB 4

/* The tile configuration (palette 1): colsb in bytes, rows. */
typedef struct tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* The legacy types' tiles: 0/1 = A (activations), 2/3 = B, 4/5 = C. */
static void config_tiles(int kbytes, int brows) {
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = c.rows[1] = TT, c.colsb[0] = c.colsb[1] = (uint16_t)kbytes;
    c.rows[2] = c.rows[3] = (uint8_t)brows, c.colsb[2] = c.colsb[3] = 64;
    c.rows[4] = c.rows[5] = TT, c.colsb[4] = c.colsb[5] = 64;
    _tile_loadconfig(&c);
}

/* The VNNI kernels, for the tokens a tile does not fill (set at fill time). */
static ob_gemm_panel_fn g_vnni[OB_TYPE_COUNT];

/* ======================================================================
 * Legacy 32-element types
 * ====================================================================== */

/* Block b's 32 signed weights of the 16 rows in B order: 8 rows of 64 bytes,
 * row j = elements 4j..4j+3 of each weight row. */
INLINE void a8_unpack(int kind, const void *panel, int64_t b, __m512i lut, uint8_t *dst) {
    const uint8_t *qb = a8_at(kind, panel, b, A8_CODES);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    if (kind == A8_Q8_0) {
        for (int j = 0; j < 8; j++)
            _mm512_store_si512((void *)(dst + 64 * j),
                               _mm512_xor_si512(_mm512_load_si512((const void *)(qb + 64 * j)), _mm512_set1_epi8((char)0x80)));
        return;
    }
    const __m512i off = _mm512_set1_epi8((char)a8_offset(kind));
    const __m512i hb = a8_has_h(kind) ? _mm512_load_si512((const void *)a8_at(kind, panel, b, A8_H)) : m4;
    for (int j = 0; j < 4; j++) {
        const __m512i raw = _mm512_load_si512((const void *)(qb + 64 * j));
        __m512i lo, hi;
        a8_codes(kind, raw, hb, j, lut, &lo, &hi);
        _mm512_store_si512((void *)(dst + 64 * j), _mm512_sub_epi8(lo, off));
        _mm512_store_si512((void *)(dst + 64 * (4 + j)), _mm512_sub_epi8(hi, off));
    }
}

/* acc[m] += the block's C tile (cb, stored) for 16 tokens: the VNNI kernel's steps */
INLINE void a8_post(const int kind, const void *panel, int64_t b, const char *at, size_t as, const int32_t *cb,
                    __m512 acc[TT]) {
    const __m512 dw = kind == A8_MXFP4 ? e8m0_half16(a8_at(kind, panel, b, A8_D)) : load_h16(a8_at(kind, panel, b, A8_D));
    const __m512 mw = a8_has_m(kind) ? load_h16(a8_at(kind, panel, b, A8_M)) : dw;
#pragma GCC unroll 16
    for (int m = 0; m < TT; m++) {
        const ob_act_q8 *a = (const ob_act_q8 *)(const void *)(at + (size_t)m * as) + b;
        const __m512i ia = _mm512_load_si512((const void *)(cb + 16 * m));
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(dw, _mm512_set1_ps(a->d)), acc[m]);
        if (a8_has_m(kind)) acc[m] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a->d * (float)a->s), acc[m]);
    }
}

/* Blocks go through the tiles two at a time into different C tiles (4 and
 * 5, with their own A and B: 0/2 and 1/3), so one block's product can run
 * while the other's is turned into floats (a tile product's latency is
 * several times its issue interval). */
INLINE void gemm_a8_tiles(const int kind, int64_t n, const void *panel, const char *act, size_t as, int nt,
                          float *out, size_t os, ob_gemm_panel_fn vnni) {
    const int64_t nb = n / 32;
    const int ntt = nt / TT * TT;
    const __m512i lut = a8_lut(kind);
    _Alignas(64) uint8_t wb[A8_SLAB * 512];
    _Alignas(64) int32_t c0[TT * 16], c1[TT * 16];
    config_tiles(32, 8);
    for (int64_t b0 = 0; b0 < nb; b0 += A8_SLAB) {
        const int64_t nbs = nb - b0 < A8_SLAB ? nb - b0 : A8_SLAB;
        for (int64_t b = 0; b < nbs; b++) a8_unpack(kind, panel, b0 + b, lut, wb + 512 * b);
        for (int t0 = 0; t0 < ntt; t0 += TT) {
            __m512 acc[TT];
#pragma GCC unroll 16
            for (int m = 0; m < TT; m++)
                acc[m] = b0 ? _mm512_loadu_ps(out + (size_t)(t0 + m) * os) : _mm512_setzero_ps();
            const char *at = act + (size_t)t0 * as;
            int64_t b = 0;
            for (; b + 1 < nbs; b += 2) {
                const ob_act_q8 *a0 = (const ob_act_q8 *)(const void *)at + b0 + b;
                _tile_loadd(0, a0->qs, (long)as);
                _tile_loadd(2, wb + 512 * b, 64);
                _tile_zero(4);
                _tile_dpbssd(4, 0, 2);
                _tile_loadd(1, a0[1].qs, (long)as);
                _tile_loadd(3, wb + 512 * (b + 1), 64);
                _tile_zero(5);
                _tile_dpbssd(5, 1, 3);
                _tile_stored(4, c0, 64);
                a8_post(kind, panel, b0 + b, at, as, c0, acc);
                _tile_stored(5, c1, 64);
                a8_post(kind, panel, b0 + b + 1, at, as, c1, acc);
            }
            if (b < nbs) {
                const ob_act_q8 *a0 = (const ob_act_q8 *)(const void *)at + b0 + b;
                _tile_loadd(0, a0->qs, (long)as);
                _tile_loadd(2, wb + 512 * b, 64);
                _tile_zero(4);
                _tile_dpbssd(4, 0, 2);
                _tile_stored(4, c0, 64);
                a8_post(kind, panel, b0 + b, at, as, c0, acc);
            }
#pragma GCC unroll 16
            for (int m = 0; m < TT; m++) _mm512_storeu_ps(out + (size_t)(t0 + m) * os, acc[m]);
        }
    }
    _tile_release();
    if (ntt < nt) vnni(n, panel, act + (size_t)ntt * as, as, nt - ntt, out + (size_t)ntt * os, os);
}

/* ======================================================================
 * 256-element types: the integer sub-block scale multiplied into the
 * weights, w' = (code - offset) * scale, split into byte planes.
 * ====================================================================== */

/* Per unpacked super-block: lo and hi planes, each 64 B rows (4 tiles of 16)
 * of 64 bytes, then (Q4_K/Q5_K: 4, Q2_K: 8) the mins as int16 pairs for mins_dot. */
#define KQ_PLANE 4096
#define KQ_SB_BYTES (2 * KQ_PLANE + 8 * 64)

/* Store the planes of w' = c * s for one B row: c holds 64 bytes (signed when
 * sgn, else unsigned), s a scale per 32-bit lane (one weight row) as an int32
 * that fits 16 bits. The products fit 16 bits, so each is done in the 16-bit
 * lane of its byte: even bytes, then odd ones. */
INLINE void split_row(__m512i c, __m512i s, bool sgn, uint8_t *lo, uint8_t *hi) {
    const __m512i s16 = _mm512_or_si512(_mm512_and_si512(s, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(s, 16));
    const __m512i ce = sgn ? _mm512_srai_epi16(_mm512_slli_epi16(c, 8), 8) : _mm512_and_si512(c, _mm512_set1_epi16(0xff));
    const __m512i co = sgn ? _mm512_srai_epi16(c, 8) : _mm512_srli_epi16(c, 8);
    const __m512i pe = _mm512_mullo_epi16(ce, s16), po = _mm512_mullo_epi16(co, s16);
    const __m512i m7f = _mm512_set1_epi16(0x7f), mff = _mm512_set1_epi16(0xff);
    /* lo: (pe & 127) | (po & 127) << 8;  hi: (pe >> 7) & 255 | (po >> 7) << 8 */
    const __m512i l = _mm512_or_si512(_mm512_and_si512(pe, m7f), _mm512_slli_epi16(_mm512_and_si512(po, m7f), 8));
    const __m512i h = _mm512_or_si512(_mm512_and_si512(_mm512_srai_epi16(pe, 7), mff), _mm512_slli_epi16(_mm512_srai_epi16(po, 7), 8));
    _mm512_store_si512((void *)lo, l);
    _mm512_store_si512((void *)hi, h);
}

/* Unpack super-block sb of the panel into dst (KQ_SB_BYTES). B row r of the
 * planes = elements 4r..4r+3 of the super-block. */
INLINE void kq_unpack(int kind, const void *panel, int64_t sb, __m512i slut, uint8_t *dst) {
    const uint8_t *B = kq_sb(kind, panel, sb);
    uint8_t *lo = dst, *hi = dst + KQ_PLANE;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10), m30 = _mm512_set1_epi8(0x30);
    if (kind == KQ_Q4_K || kind == KQ_Q5_K) {
        const size_t unit = kind == KQ_Q4_K ? 512 : 640;
        const __m512i w0 = _mm512_load_si512((const void *)B), w1 = _mm512_load_si512((const void *)(B + 64));
        const __m512i w2 = _mm512_load_si512((const void *)(B + 128));
        __m512i sc[8], mn[8];
        for (int s = 0; s < 8; s++) k4_scale(s, w0, w1, w2, &sc[s], &mn[s]);
        for (int q = 0; q < 4; q++)
            _mm512_store_si512((void *)(dst + 2 * KQ_PLANE + 64 * q), _mm512_or_si512(mn[2 * q], _mm512_slli_epi32(mn[2 * q + 1], 16)));
        for (int p = 0; p < 4; p++) {
            const uint8_t *U = B + 192 + unit * (size_t)p;
            for (int j = 0; j < 8; j++) {
                const __m512i raw = _mm512_load_si512((const void *)(U + 64 * j));
                __m512i cl, ch;
                if (kind == KQ_Q5_K) {
                    const __m512i hv = _mm512_load_si512((const void *)(U + 512 + 64 * (j / 4)));
                    const __m512i tj = _mm512_srli_epi16(hv, (unsigned)(j % 4));
                    cl = or_and(raw, m4, _mm512_and_si512(_mm512_slli_epi16(tj, 4), m10));
                    ch = or_and(_mm512_srli_epi16(raw, 4), m4, _mm512_and_si512(tj, m10));
                } else {
                    cl = _mm512_and_si512(raw, m4);
                    ch = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
                }
                /* sub-block 2p (low nibbles) and 2p + 1 (high), elements 4j.. of each */
                const size_t r0 = 8 * (size_t)(2 * p) + (size_t)j, r1 = r0 + 8;
                split_row(cl, sc[2 * p], false, lo + 64 * r0, hi + 64 * r0);
                split_row(ch, sc[2 * p + 1], false, lo + 64 * r1, hi + 64 * r1);
            }
        }
    } else if (kind == KQ_Q6_K) {
        const __m512i m32 = _mm512_set1_epi8(32);
        for (int s = 0; s < 16; s++) {
            const uint8_t *U = B + 832 * (size_t)(s / 4), *sbp = U + 192 * (size_t)(s % 4);
            const __m512i n0 = _mm512_load_si512((const void *)sbp), n1 = _mm512_load_si512((const void *)(sbp + 64));
            const __m512i h = _mm512_load_si512((const void *)(sbp + 128));
            __m512i c[4];
            c[0] = or_and(n0, m4, _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
            c[1] = or_and(_mm512_srli_epi16(n0, 4), m4, _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
            c[2] = or_and(n1, m4, _mm512_and_si512(h, m30));
            c[3] = or_and(_mm512_srli_epi16(n1, 4), m4, _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
            const __m512i scv = load_i8x16(U + 768 + 16 * (s % 4));
            for (int q = 0; q < 4; q++) {
                const size_t r = 4 * (size_t)s + (size_t)q;
                split_row(_mm512_sub_epi8(c[q], m32), scv, true, lo + 64 * r, hi + 64 * r);
            }
        }
    } else if (kind == KQ_Q2_K || kind == KQ_Q3_K) {
        /* sub-block s (16 elements): unit h = s / 8, 2-bit field kk = (s % 8) / 2 of chunks
         * 4 (s % 2) .. + 3; Q2_K w' = code * (sc & 15) and mins sc >> 4 (as mins_dot's 8
         * pairs); Q3_K w' = (code | hmask bit << 2) - 4) * (sc - 32) */
        const uint8_t *U0 = B + (kind == KQ_Q3_K ? 512 : 0);
        const __m512i m3 = _mm512_set1_epi8(3), m04 = _mm512_set1_epi8(4);
        for (int s = 0; s < 16; s++) {
            const int h = s / 8, kk = (s % 8) / 2, half = s % 2;
            const uint8_t *U = U0 + 640 * (size_t)h;
            const uint8_t *sp = U + 512 + 16 * (s % 8);
            const __m512i scv = kind == KQ_Q2_K ? _mm512_and_si512(load_u8x16(sp), _mm512_set1_epi32(15)) : load_i8x16(sp);
            for (int j = 0; j < 4; j++) {
                const int c = 4 * half + j;
                const __m512i raw = _mm512_load_si512((const void *)(U + 64 * c));
                __m512i w = _mm512_and_si512(_mm512_srli_epi16(raw, (unsigned)(2 * kk)), m3);
                if (kind == KQ_Q3_K) {
                    const __m512i hv = _mm512_load_si512((const void *)(B + 64 * c));
                    const int sh = 4 * h + kk;
                    const __m512i hb = sh >= 2 ? _mm512_srli_epi16(hv, (unsigned)(sh - 2)) : _mm512_slli_epi16(hv, (unsigned)(2 - sh));
                    w = _mm512_sub_epi8(_mm512_ternarylogic_epi32(w, hb, m04, 0xF8), m04);
                }
                const size_t r = 32 * (size_t)h + 8 * (size_t)kk + 4 * (size_t)half + (size_t)j;
                split_row(w, scv, kind == KQ_Q3_K, lo + 64 * r, hi + 64 * r);
            }
        }
        if (kind == KQ_Q2_K)
            for (int q = 0; q < 8; q++) {
                const uint8_t *sp = U0 + 640 * (size_t)(q / 4) + 512 + 32 * (size_t)(q % 4);
                _mm512_store_si512((void *)(dst + 2 * KQ_PLANE + 64 * q),
                                   _mm512_or_si512(_mm512_srli_epi32(load_u8x16(sp), 4),
                                                   _mm512_slli_epi32(_mm512_srli_epi32(load_u8x16(sp + 16), 4), 16)));
            }
    } else if (kind == KQ_TQ2_0 || kind == KQ_TQ1_0) {
        /* codes are value + 1: w' = code - 1, no sub-block scale */
        const __m512i one = _mm512_set1_epi32(1), b1 = _mm512_set1_epi8(1);
        if (kind == KQ_TQ2_0) {
            const __m512i m3 = _mm512_set1_epi8(3);
            for (int j = 0; j < 16; j++) {
                const int h = j / 8, c = j % 8;
                const __m512i raw = _mm512_load_si512((const void *)(B + 64 * j));
                for (int kk = 0; kk < 4; kk++) {
                    const __m512i w = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, (unsigned)(2 * kk)), m3), b1);
                    const size_t r = 32 * (size_t)h + 8 * (size_t)kk + (size_t)c;
                    split_row(w, one, true, lo + 64 * r, hi + 64 * r);
                }
            }
        } else {
            for (int j = 0; j < 13; j++) {
                const __m512i raw = _mm512_load_si512((const void *)(B + 64 * j));
                const int ndig = j < 12 ? 5 : 4;
                for (int dg = 0; dg < ndig; dg++) {
                    const __m512i w = _mm512_sub_epi8(tq1_digit(raw, dg), b1);
                    const int e = tq1_element(j, dg);
                    const size_t r = (size_t)e / 4;
                    split_row(w, one, true, lo + 64 * r, hi + 64 * r);
                }
            }
        }
    } else { /* IQ4_XS */
        for (int s = 0; s < 8; s++) {
            const uint8_t *U = B + 1088 * (size_t)(s / 4);
            const uint8_t *C = U + 256 * (size_t)(s % 4);
            const __m512i scv = load_i8x16(U + 1024 + 16 * (s % 4));
            for (int c = 0; c < 4; c++) {
                const __m512i raw = _mm512_load_si512((const void *)(C + 64 * c));
                const __m512i vl = _mm512_shuffle_epi8(slut, _mm512_and_si512(raw, m4));
                const __m512i vh = _mm512_shuffle_epi8(slut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
                const size_t r0 = 8 * (size_t)s + (size_t)c, r1 = r0 + 4;
                split_row(vl, scv, true, lo + 64 * r0, hi + 64 * r0);
                split_row(vh, scv, true, lo + 64 * r1, hi + 64 * r1);
            }
        }
    }
}

/* acc (out rows of 16 tokens) += one super-block's C tiles (cl, ch, stored) */
INLINE void kq_post(const int kind, const void *panel, int64_t sb, const uint8_t *w, const char *at, size_t as,
                    const int32_t *cl, const int32_t *ch, float *out, size_t os, bool first) {
    const bool has_min = kind == KQ_Q4_K || kind == KQ_Q5_K || kind == KQ_Q2_K;
    const int npairs = kind == KQ_Q2_K ? 8 : 4;
    const uint8_t *D = kq_d(kind, panel, sb);
    const __m512 d = load_h16(D);
    const __m512 dmin = has_min ? load_h16(D + 32) : d;
    __m512i mnp[8]; /* Q4_K/Q5_K: 4 pairs, Q2_K: 8 */
    if (has_min)
        for (int q = 0; q < npairs; q++) mnp[q] = _mm512_load_si512((const void *)(w + 2 * KQ_PLANE + 64 * q));
#pragma GCC unroll 16
    for (int m = 0; m < TT; m++) {
        const ob_act_q8K *a = ACT_Q8K(at, as, m, sb);
        const __m512i isum = _mm512_add_epi32(_mm512_load_si512((const void *)(cl + 16 * m)),
                                              _mm512_slli_epi32(_mm512_load_si512((const void *)(ch + 16 * m)), 7));
        const __m512 da = _mm512_set1_ps(a->d);
        float *o = out + (size_t)m * os;
        __m512 acc = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, da), acc);
        if (has_min) {
            const __m512i ms = kind == KQ_Q2_K ? mins_dot(mnp, 8, a->bsums) : mins_dot(mnp, 4, a->bsum32);
            acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmin, da), acc);
        }
        _mm512_storeu_ps(o, acc);
    }
}

/* Two tiles of 16 tokens at a time against each pair of B planes: four C
 * tiles (4, 5: tokens 0..15 lo/hi; 6, 7: 16..31), so four independent
 * chains of tile products and each B tile loaded once per 32 tokens. The
 * float accumulators live in the output rows (a super-block's products
 * are 65,536 multiply-adds per 16 tokens: one load and store each is
 * nothing). */
INLINE void gemm_kq_tiles(const int kind, int64_t n, const void *panel, const char *act, size_t as, int nt,
                          float *out, size_t os, ob_gemm_panel_fn vnni) {
    const int64_t nsb = n / OB_QK_K;
    const int ntt = nt / TT * TT;
    const __m512i slut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)ob_iq4nl_values));
    _Alignas(64) uint8_t wb[KQ_SLAB * KQ_SB_BYTES];
    _Alignas(64) int32_t cl0[TT * 16], ch0[TT * 16], cl1[TT * 16], ch1[TT * 16];
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.rows[i] = TT, c.colsb[i] = 64;
    _tile_loadconfig(&c);
    for (int64_t s0 = 0; s0 < nsb; s0 += KQ_SLAB) {
        const int64_t nss = nsb - s0 < KQ_SLAB ? nsb - s0 : KQ_SLAB;
        for (int64_t s = 0; s < nss; s++) kq_unpack(kind, panel, s0 + s, slut, wb + KQ_SB_BYTES * s);
        for (int t0 = 0; t0 < ntt; t0 += 2 * TT) {
            const bool two = t0 + 2 * TT <= ntt;
            const char *at = act + (size_t)t0 * as;
            for (int64_t s = 0; s < nss; s++) {
                const uint8_t *w = wb + KQ_SB_BYTES * s;
                const int8_t *aq = ACT_Q8K(at, as, 0, s0 + s)->qs;
                _tile_zero(4);
                _tile_zero(5);
                if (two) {
                    _tile_zero(6);
                    _tile_zero(7);
                }
                for (int g = 0; g < 4; g++) {
                    _tile_loadd(0, aq + 64 * g, (long)as);
                    _tile_loadd(2, w + 1024 * g, 64);
                    _tile_loadd(3, w + KQ_PLANE + 1024 * g, 64);
                    _tile_dpbsud(4, 0, 2);
                    _tile_dpbssd(5, 0, 3);
                    if (two) {
                        _tile_loadd(1, aq + (size_t)TT * as + 64 * g, (long)as);
                        _tile_dpbsud(6, 1, 2);
                        _tile_dpbssd(7, 1, 3);
                    }
                }
                _tile_stored(4, cl0, 64);
                _tile_stored(5, ch0, 64);
                kq_post(kind, panel, s0 + s, w, at, as, cl0, ch0, out + (size_t)t0 * os, os, s0 + s == 0);
                if (two) {
                    _tile_stored(6, cl1, 64);
                    _tile_stored(7, ch1, 64);
                    kq_post(kind, panel, s0 + s, w, at + (size_t)TT * as, as, cl1, ch1, out + (size_t)(t0 + TT) * os,
                            os, s0 + s == 0);
                }
            }
            if (!two) t0 -= TT; /* one tile done: step 16, not 32 */
        }
    }
    _tile_release();
    if (ntt < nt) vnni(n, panel, act + (size_t)ntt * as, as, nt - ntt, out + (size_t)ntt * os, os);
}

#define DEF_A8_TILES(name, type, kind)                                                                         \
    static void tiles_##name(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) { \
        gemm_a8_tiles(kind, n, p, (const char *)act, as, nt, out, os, g_vnni[type]);                          \
    }
#define DEF_KQ_TILES(name, type, kind)                                                                         \
    static void tiles_##name(int64_t n, const void *p, const void *act, size_t as, int nt, float *out, size_t os) { \
        gemm_kq_tiles(kind, n, p, (const char *)act, as, nt, out, os, g_vnni[type]);                          \
    }

DEF_A8_TILES(q4_0, OB_TYPE_Q4_0, A8_Q4_0)
DEF_A8_TILES(q4_1, OB_TYPE_Q4_1, A8_Q4_1)
DEF_A8_TILES(q5_0, OB_TYPE_Q5_0, A8_Q5_0)
DEF_A8_TILES(q5_1, OB_TYPE_Q5_1, A8_Q5_1)
DEF_A8_TILES(q8_0, OB_TYPE_Q8_0, A8_Q8_0)
DEF_A8_TILES(iq4_nl, OB_TYPE_IQ4_NL, A8_IQ4_NL)
DEF_A8_TILES(mxfp4, OB_TYPE_MXFP4, A8_MXFP4)
DEF_KQ_TILES(q4_K, OB_TYPE_Q4_K, KQ_Q4_K)
DEF_KQ_TILES(q5_K, OB_TYPE_Q5_K, KQ_Q5_K)
DEF_KQ_TILES(q6_K, OB_TYPE_Q6_K, KQ_Q6_K)
DEF_KQ_TILES(iq4_xs, OB_TYPE_IQ4_XS, KQ_IQ4_XS)
DEF_KQ_TILES(q2_K, OB_TYPE_Q2_K, KQ_Q2_K)
DEF_KQ_TILES(q3_K, OB_TYPE_Q3_K, KQ_Q3_K)
DEF_KQ_TILES(tq2_0, OB_TYPE_TQ2_0, KQ_TQ2_0)
DEF_KQ_TILES(tq1_0, OB_TYPE_TQ1_0, KQ_TQ1_0)

/* ======================================================================
 * BF16 on AMX-BF16 (tdpbf16ps): the packed BF16 panel (pairs k, k+1 of the
 * 16 rows in each 64-byte chunk) is already B's layout, and the BF16
 * activation rows are A's, so nothing is unpacked. Its float sums do not
 * match vdpbf16ps's bit for bit (measured: 4,672 of 5,120 outputs differ
 * in the last bits), so where the CPU has AMX-BF16 this kernel replaces the
 * VNNI-era BF16 gemm for every token count, decode included: a token's
 * result then still depends on its own row alone. K = 32 a step into four C
 * tiles in turn (four chains), added in a fixed order at the end; rows of
 * A and C = the tokens of the tile (1..16). n not a multiple of 32 keeps
 * the vdpbf16ps kernel for the whole matrix.
 * ====================================================================== */

static void gemm_bf16_amx(int64_t n, const void *panel, const void *act, size_t as, int nt, float *out, size_t os) {
    if (n % 32) {
        g_vnni[OB_TYPE_BF16](n, panel, act, as, nt, out, os);
        return;
    }
    const int64_t ng = n / 32;
    const uint8_t *p = panel;
    _Alignas(64) float cb[4][TT * 16];
    int rows = 0;
    for (int t0 = 0; t0 < nt; t0 += TT) {
        const int m = nt - t0 < TT ? nt - t0 : TT;
        if (m != rows) {
            tilecfg c;
            memset(&c, 0, sizeof c);
            c.palette = 1;
            for (int i = 0; i < 8; i++) c.colsb[i] = 64;
            c.rows[0] = c.rows[1] = (uint8_t)m;
            c.rows[2] = c.rows[3] = 16;
            for (int i = 4; i < 8; i++) c.rows[i] = (uint8_t)m;
            _tile_loadconfig(&c);
            rows = m;
        }
        const char *a = (const char *)act + (size_t)t0 * as;
        _tile_zero(4);
        _tile_zero(5);
        _tile_zero(6);
        _tile_zero(7);
        int64_t g = 0;
        for (; g + 4 <= ng; g += 4) {
            _tile_loadd(0, a + 64 * g, (long)as);
            _tile_loadd(2, p + 1024 * g, 64);
            _tile_dpbf16ps(4, 0, 2);
            _tile_loadd(1, a + 64 * (g + 1), (long)as);
            _tile_loadd(3, p + 1024 * (g + 1), 64);
            _tile_dpbf16ps(5, 1, 3);
            _tile_loadd(0, a + 64 * (g + 2), (long)as);
            _tile_loadd(2, p + 1024 * (g + 2), 64);
            _tile_dpbf16ps(6, 0, 2);
            _tile_loadd(1, a + 64 * (g + 3), (long)as);
            _tile_loadd(3, p + 1024 * (g + 3), 64);
            _tile_dpbf16ps(7, 1, 3);
        }
        /* the last 1..3 steps go to chains 4, 5, 6 as they would in a longer row */
        if (g < ng) {
            _tile_loadd(0, a + 64 * g, (long)as);
            _tile_loadd(2, p + 1024 * g, 64);
            _tile_dpbf16ps(4, 0, 2);
        }
        if (g + 1 < ng) {
            _tile_loadd(1, a + 64 * (g + 1), (long)as);
            _tile_loadd(3, p + 1024 * (g + 1), 64);
            _tile_dpbf16ps(5, 1, 3);
        }
        if (g + 2 < ng) {
            _tile_loadd(0, a + 64 * (g + 2), (long)as);
            _tile_loadd(2, p + 1024 * (g + 2), 64);
            _tile_dpbf16ps(6, 0, 2);
        }
        _tile_stored(4, cb[0], 64);
        _tile_stored(5, cb[1], 64);
        _tile_stored(6, cb[2], 64);
        _tile_stored(7, cb[3], 64);
        for (int i = 0; i < m; i++) {
            const __m512 s01 = _mm512_add_ps(_mm512_load_ps(cb[0] + 16 * i), _mm512_load_ps(cb[1] + 16 * i));
            const __m512 s23 = _mm512_add_ps(_mm512_load_ps(cb[2] + 16 * i), _mm512_load_ps(cb[3] + 16 * i));
            _mm512_storeu_ps(out + (size_t)(t0 + i) * os, _mm512_add_ps(s01, s23));
        }
    }
    _tile_release();
}

void ob_cpu_fill_amx(ob_cpu_kernels *k, bool bf16) {
#define TILES(T, name)                                       \
    if (k->mm[T].gemm) {                                     \
        g_vnni[T] = k->mm[T].gemm;                           \
        k->mm[T].gemm_tiles = tiles_##name;                  \
    }
    TILES(OB_TYPE_Q4_0, q4_0)
    TILES(OB_TYPE_Q4_1, q4_1)
    TILES(OB_TYPE_Q5_0, q5_0)
    TILES(OB_TYPE_Q5_1, q5_1)
    TILES(OB_TYPE_Q8_0, q8_0)
    TILES(OB_TYPE_IQ4_NL, iq4_nl)
    TILES(OB_TYPE_MXFP4, mxfp4)
    TILES(OB_TYPE_Q4_K, q4_K)
    TILES(OB_TYPE_Q5_K, q5_K)
    TILES(OB_TYPE_Q6_K, q6_K)
    TILES(OB_TYPE_IQ4_XS, iq4_xs)
    TILES(OB_TYPE_Q2_K, q2_K)
    TILES(OB_TYPE_Q3_K, q3_K)
    TILES(OB_TYPE_TQ2_0, tq2_0)
    TILES(OB_TYPE_TQ1_0, tq1_0)
#undef TILES
    if (bf16 && k->mm[OB_TYPE_BF16].gemm && k->mm[OB_TYPE_BF16].packed_act == OB_ACT_BF16) {
        g_vnni[OB_TYPE_BF16] = k->mm[OB_TYPE_BF16].gemm;
        k->mm[OB_TYPE_BF16].gemm = gemm_bf16_amx;
        k->mm[OB_TYPE_BF16].gemm_tiles = gemm_bf16_amx;
        k->mm[OB_TYPE_BF16].gemm_pair = NULL; /* its numbers are the VNNI gemm's, not the tiles' */
    }
}
