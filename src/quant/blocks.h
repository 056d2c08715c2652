/*
 * blocks.h - the block structs of every quantized tensor type, byte for byte
 * as ggml lays them out in GGUF files. This is the one definition: the CPU
 * reference code, SIMD kernels and CUDA kernels all include it (the file
 * compiles as C11 and as C++ under nvcc). Conversion routines live in
 * quant_ref.h; ids, names and the type table in quant.h.
 *
 * Conventions used in the comments below:
 *   - "half" is an IEEE binary16 stored as its 16 bits (ob_half). CUDA code
 *     may define OB_HALF_T to its own 2-byte half type before including.
 *   - Multi-byte fields are little-endian, as in the files; the reference
 *     code assumes a little-endian host (x86-64, AArch64).
 *   - Element i of a block is "x[i]"; "q" is the integer code stored for it.
 *   - Super-blocks (the K, IQ and TQ families) hold OB_QK_K = 256 elements
 *     split into sub-blocks that each carry a small integer scale, which the
 *     block's half "d" scales in turn.
 *
 * Structs hold only uint8/int8/uint16/half fields (Q8_K also a float and
 * int16), so a block's alignment is at most 4 and there is no padding: each
 * static assert pins the size that ggml's type table also gives.
 */
#ifndef OB_QUANT_BLOCKS_H
#define OB_QUANT_BLOCKS_H

#ifdef __cplusplus
#include <cstdint>
#define OB_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#include <stdint.h>
#define OB_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#ifndef OB_HALF_T
#define OB_HALF_T uint16_t
#endif
typedef OB_HALF_T ob_half;

/* Elements per block. */
#define OB_QK4_0 32
#define OB_QK4_1 32
#define OB_QK5_0 32
#define OB_QK5_1 32
#define OB_QK8_0 32
#define OB_QK8_1 32
#define OB_QK4_NL 32
#define OB_QK_MXFP4 32
#define OB_QK_K 256          /* super-block of the K, IQ and TQ types */
#define OB_K_SCALE_SIZE 12   /* bytes of packed 6-bit scales/mins in Q4_K, Q5_K */

/* ---- legacy 32-element blocks ---------------------------------------- */

/* Q4_0, 4.5 bits/weight: x[i] = d * (q[i] - 8), q in 0..15.
 * qs[j] holds q[j] in its low nibble and q[j + 16] in its high nibble. */
typedef struct ob_block_q4_0 {
    ob_half d;
    uint8_t qs[OB_QK4_0 / 2];
} ob_block_q4_0;
OB_STATIC_ASSERT(sizeof(ob_block_q4_0) == 18, "q4_0 block size");

/* Q4_1, 5 bits/weight: x[i] = d * q[i] + m, q in 0..15; nibbles as Q4_0. */
typedef struct ob_block_q4_1 {
    ob_half d;               /* step */
    ob_half m;               /* minimum (value of q = 0) */
    uint8_t qs[OB_QK4_1 / 2];
} ob_block_q4_1;
OB_STATIC_ASSERT(sizeof(ob_block_q4_1) == 20, "q4_1 block size");

/* Q5_0, 5.5 bits/weight: x[i] = d * (q[i] - 16), q in 0..31. Low 4 bits of
 * q as the Q4_0 nibbles; bit 4 of q[i] is bit i of qh (read as a
 * little-endian uint32). */
typedef struct ob_block_q5_0 {
    ob_half d;
    uint8_t qh[4];
    uint8_t qs[OB_QK5_0 / 2];
} ob_block_q5_0;
OB_STATIC_ASSERT(sizeof(ob_block_q5_0) == 22, "q5_0 block size");

/* Q5_1, 6 bits/weight: x[i] = d * q[i] + m, q in 0..31; bits as Q5_0. */
typedef struct ob_block_q5_1 {
    ob_half d;
    ob_half m;
    uint8_t qh[4];
    uint8_t qs[OB_QK5_1 / 2];
} ob_block_q5_1;
OB_STATIC_ASSERT(sizeof(ob_block_q5_1) == 24, "q5_1 block size");

/* Q8_0, 8.5 bits/weight: x[i] = d * qs[i]. */
typedef struct ob_block_q8_0 {
    ob_half d;
    int8_t qs[OB_QK8_0];
} ob_block_q8_0;
OB_STATIC_ASSERT(sizeof(ob_block_q8_0) == 34, "q8_0 block size");

/* Q8_1, 9 bits/weight: like Q8_0 plus s = d * sum(qs), which dot products
 * with Q4_1/Q5_1 need for the min term. An activation format. */
typedef struct ob_block_q8_1 {
    ob_half d;
    ob_half s;
    int8_t qs[OB_QK8_1];
} ob_block_q8_1;
OB_STATIC_ASSERT(sizeof(ob_block_q8_1) == 36, "q8_1 block size");

/* MXFP4 (OCP microscaling), 4.25 bits/weight: x[i] = 2^(e - 127) * fp4(q[i])
 * where fp4 is an E2M1 value; nibbles as Q4_0. e is E8M0: a bare exponent. */
typedef struct ob_block_mxfp4 {
    uint8_t e;
    uint8_t qs[OB_QK_MXFP4 / 2];
} ob_block_mxfp4;
OB_STATIC_ASSERT(sizeof(ob_block_mxfp4) == 17, "mxfp4 block size");

/* IQ4_NL, 4.5 bits/weight: x[i] = d * ob_iq4nl_values[q[i]]; nibbles as Q4_0. */
typedef struct ob_block_iq4_nl {
    ob_half d;
    uint8_t qs[OB_QK4_NL / 2];
} ob_block_iq4_nl;
OB_STATIC_ASSERT(sizeof(ob_block_iq4_nl) == 18, "iq4_nl block size");

/* ---- K-quants: 256-element super-blocks ------------------------------ */

/* Q2_K, 2.625 bits/weight. 16 sub-blocks of 16:
 *   x = d * sc[s] * q - dmin * mn[s],  q in 0..3,
 * scales[s] = sc[s] | mn[s] << 4 (both 4-bit). Quants: element
 * 128*h + 32*k + l (h 0..1, k 0..3, l 0..31) is bits 2k..2k+1 of
 * qs[32*h + l]; sub-block s covers elements 16*s..16*s+15. */
typedef struct ob_block_q2_K {
    uint8_t scales[OB_QK_K / 16];
    uint8_t qs[OB_QK_K / 4];
    ob_half d;               /* multiplies the 4-bit scales */
    ob_half dmin;            /* multiplies the 4-bit mins */
} ob_block_q2_K;
OB_STATIC_ASSERT(sizeof(ob_block_q2_K) == 84, "q2_K block size");

/* Q3_K, 3.4375 bits/weight. 16 sub-blocks of 16: x = d * (sc[s] - 32) * q,
 * q in -4..3. Low 2 bits of q + 4 as Q2_K's qs; bit 2 of q + 4 for element
 * 32*k + l (k 0..7) is bit k of hmask[l]. The 16 6-bit scales sc[s]: low 4
 * bits in scales[s] (s < 8, low nibble) or scales[s - 8] (high nibble);
 * high 2 bits at bits 2*(s/4) of scales[8 + s%4]. */
typedef struct ob_block_q3_K {
    uint8_t hmask[OB_QK_K / 8];
    uint8_t qs[OB_QK_K / 4];
    uint8_t scales[12];
    ob_half d;
} ob_block_q3_K;
OB_STATIC_ASSERT(sizeof(ob_block_q3_K) == 110, "q3_K block size");

/* Q4_K, 4.5 bits/weight. 8 sub-blocks of 32:
 *   x = d * sc[s] * q - dmin * mn[s],  q in 0..15.
 * scales[12] packs eight 6-bit sc and eight 6-bit mn: for s < 4,
 * sc = scales[s] & 63, mn = scales[s + 4] & 63; for s >= 4, the low 4 bits
 * are in scales[s + 4] (sc low nibble, mn high nibble) and the high 2 bits
 * in the top bits of scales[s - 4] (sc) and scales[s] (mn).
 * Quants: qs[32*p + l] holds element 64*p + l (low nibble) and
 * 64*p + 32 + l (high nibble). */
typedef struct ob_block_q4_K {
    ob_half d;
    ob_half dmin;
    uint8_t scales[OB_K_SCALE_SIZE];
    uint8_t qs[OB_QK_K / 2];
} ob_block_q4_K;
OB_STATIC_ASSERT(sizeof(ob_block_q4_K) == 144, "q4_K block size");

/* Q5_K, 5.5 bits/weight. As Q4_K with q in 0..31: bit 4 of element
 * 32*s + l is bit s of qh[l]. */
typedef struct ob_block_q5_K {
    ob_half d;
    ob_half dmin;
    uint8_t scales[OB_K_SCALE_SIZE];
    uint8_t qh[OB_QK_K / 8];
    uint8_t qs[OB_QK_K / 2];
} ob_block_q5_K;
OB_STATIC_ASSERT(sizeof(ob_block_q5_K) == 176, "q5_K block size");

/* Q6_K, 6.5625 bits/weight. 16 sub-blocks of 16: x = d * scales[s] * (q - 32),
 * q in 0..63. In each half h (128 elements), element 128*h + 32*k + l
 * (k 0..3) has its low 4 bits in ql[64*h + l + 32*(k & 1)] (low nibble for
 * k < 2, high nibble for k >= 2) and its high 2 bits at bits 2k..2k+1 of
 * qh[32*h + l]. */
typedef struct ob_block_q6_K {
    uint8_t ql[OB_QK_K / 2];
    uint8_t qh[OB_QK_K / 4];
    int8_t scales[OB_QK_K / 16];
    ob_half d;
} ob_block_q6_K;
OB_STATIC_ASSERT(sizeof(ob_block_q6_K) == 210, "q6_K block size");

/* Q8_K, 9.125 bits/weight: x[i] = d * qs[i]; bsums[g] = sum of qs over
 * elements 16*g..16*g+15. The activation format K-quant dot products use;
 * its scale is a full float. */
typedef struct ob_block_q8_K {
    float d;
    int8_t qs[OB_QK_K];
    int16_t bsums[OB_QK_K / 16];
} ob_block_q8_K;
OB_STATIC_ASSERT(sizeof(ob_block_q8_K) == 292, "q8_K block size");

/* ---- IQ: codebook ("grid") quants; tables in iq_tables.h -------------- */

/* IQ2_XXS, 2.0625 bits/weight. 8 groups of 32; group g is qs[4g..4g+3] read
 * as two little-endian uint32 a, b: byte k of a (k 0..3) indexes
 * ob_iq2xxs_grid for elements 8k..8k+7; bits 7k..7k+6 of b are their sign
 * index; b >> 28 is the group scale ls: x = d * (0.5 + ls) / 4 * grid * sign. */
typedef struct ob_block_iq2_xxs {
    ob_half d;
    uint16_t qs[OB_QK_K / 8];
} ob_block_iq2_xxs;
OB_STATIC_ASSERT(sizeof(ob_block_iq2_xxs) == 66, "iq2_xxs block size");

/* IQ2_XS, 2.3125 bits/weight. qs[4g + k]: low 9 bits index ob_iq2xs_grid for
 * elements 32g + 8k .. +7, high 7 bits their sign index. scales[g]: 4-bit
 * scale of k 0..1 (low nibble) and k 2..3 (high nibble);
 * x = d * (0.5 + ls) / 4 * grid * sign. */
typedef struct ob_block_iq2_xs {
    ob_half d;
    uint16_t qs[OB_QK_K / 8];
    uint8_t scales[OB_QK_K / 32];
} ob_block_iq2_xs;
OB_STATIC_ASSERT(sizeof(ob_block_iq2_xs) == 74, "iq2_xs block size");

/* IQ2_S, 2.5625 bits/weight. qs[0..31]: low 8 bits of a 10-bit
 * ob_iq2s_grid index per group of 8 (qs[4g + k] for elements 32g + 8k ..);
 * bits 2k..2k+1 of qh[g] are its top 2 bits. qs[32..63]: one explicit sign
 * byte per group of 8 (bit j = element j negative). scales as IQ2_XS. */
typedef struct ob_block_iq2_s {
    ob_half d;
    uint8_t qs[OB_QK_K / 4];
    uint8_t qh[OB_QK_K / 32];
    uint8_t scales[OB_QK_K / 32];
} ob_block_iq2_s;
OB_STATIC_ASSERT(sizeof(ob_block_iq2_s) == 82, "iq2_s block size");

/* IQ3_XXS, 3.0625 bits/weight. qs[0..63]: one ob_iq3xxs_grid index per 4
 * elements. qs[64..95]: per group g of 32, a little-endian uint32 whose bits
 * 7k..7k+6 are the sign index of elements 8k..8k+7 and whose top 4 bits ls
 * give x = d * (0.5 + ls) / 2 * grid * sign. */
typedef struct ob_block_iq3_xxs {
    ob_half d;
    uint8_t qs[3 * OB_QK_K / 8];
} ob_block_iq3_xxs;
OB_STATIC_ASSERT(sizeof(ob_block_iq3_xxs) == 98, "iq3_xxs block size");

/* IQ3_S, 3.4375 bits/weight. qs: low 8 bits of a 9-bit ob_iq3s_grid index
 * per 4 elements; bit k of qh[g] is bit 8 of index 8g + k. signs: one
 * explicit sign byte per 8 elements. scales: a 4-bit ls per group of 32
 * (two per byte, low nibble first): x = d * (1 + 2 ls) * grid * sign. */
typedef struct ob_block_iq3_s {
    ob_half d;
    uint8_t qs[OB_QK_K / 4];
    uint8_t qh[OB_QK_K / 32];
    uint8_t signs[OB_QK_K / 8];
    uint8_t scales[OB_QK_K / 64];
} ob_block_iq3_s;
OB_STATIC_ASSERT(sizeof(ob_block_iq3_s) == 110, "iq3_s block size");

/* IQ1_S, 1.5625 bits/weight. Per group g of 32: qh[g] bits 3k..3k+2 are the
 * top 3 bits (qs[4g + k] the low 8) of an 11-bit ob_iq1s_grid index for
 * elements 8k..8k+7; bits 12..14 are ls; bit 15 picks the shift delta:
 * x = d * (2 ls + 1) * (grid + delta), delta = -0.125 if set, else +0.125. */
typedef struct ob_block_iq1_s {
    ob_half d;
    uint8_t qs[OB_QK_K / 8];
    uint16_t qh[OB_QK_K / 32];
} ob_block_iq1_s;
OB_STATIC_ASSERT(sizeof(ob_block_iq1_s) == 50, "iq1_s block size");

/* IQ1_M, 1.75 bits/weight; no separate d. qs as IQ1_S. qh[2g + h] (h 0..1)
 * holds for two groups of 8 (k = 2h, 2h+1) the top 3 index bits (bits 0..2
 * and 4..6) and the delta sign (bits 3 and 7). scales, read as four
 * little-endian uint16 w[0..3]: 3-bit scales, four per word (bits 0..2,
 * 3..5, 6..8, 9..11; two per group of 32, for its halves); the top 4 bits of
 * w[0..3] together form the half d (w[0] lowest).
 * x = d * (2 ls + 1) * (grid + delta). */
typedef struct ob_block_iq1_m {
    uint8_t qs[OB_QK_K / 8];
    uint8_t qh[OB_QK_K / 16];
    uint8_t scales[OB_QK_K / 32];
} ob_block_iq1_m;
OB_STATIC_ASSERT(sizeof(ob_block_iq1_m) == 56, "iq1_m block size");

/* IQ4_XS, 4.25 bits/weight. 8 sub-blocks of 32 with 6-bit scales
 * ls = (4 bits of scales_l, low nibble first) | (2 bits of scales_h) << 4:
 * x = d * (ls - 32) * ob_iq4nl_values[q]; nibbles per sub-block as Q4_0. */
typedef struct ob_block_iq4_xs {
    ob_half d;
    uint16_t scales_h;
    uint8_t scales_l[OB_QK_K / 64];
    uint8_t qs[OB_QK_K / 2];
} ob_block_iq4_xs;
OB_STATIC_ASSERT(sizeof(ob_block_iq4_xs) == 136, "iq4_xs block size");

/* ---- ternary (BitNet b1.58 / TriLM): values in {-1, 0, +1} * d --------- */

/* TQ1_0, 1.6875 bits/weight: five trits per byte (3^5 = 243 <= 256) stored
 * as a base-3 fraction: byte = ceil(t * 256 / 243) where t is the 5-digit
 * base-3 number (first element the most significant digit); digit n comes
 * back as ((byte * 3^n) mod 256) * 3 >> 8. Digits are value + 1.
 * qs[0..31]: byte m has elements m + 32n (n 0..4) of the first 160;
 * qs[32..47]: byte m has elements 160 + m + 16n;
 * qh[0..3]: four trits each (a fifth, zero, digit pads): elements
 * 240 + j + 4n (n 0..3). */
typedef struct ob_block_tq1_0 {
    uint8_t qs[(OB_QK_K - 4 * OB_QK_K / 64) / 5];
    uint8_t qh[OB_QK_K / 64];
    ob_half d;
} ob_block_tq1_0;
OB_STATIC_ASSERT(sizeof(ob_block_tq1_0) == 54, "tq1_0 block size");

/* TQ2_0, 2.0625 bits/weight: 2 bits per element (value + 1, in 0..2);
 * element 128*h + 32*n + m is bits 2n..2n+1 of qs[32*h + m]. */
typedef struct ob_block_tq2_0 {
    uint8_t qs[OB_QK_K / 4];
    ob_half d;
} ob_block_tq2_0;
OB_STATIC_ASSERT(sizeof(ob_block_tq2_0) == 66, "tq2_0 block size");

#endif
