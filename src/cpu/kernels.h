/*
 * kernels.h - the CPU's inner loops: one table of function pointers per
 * instruction-set tier, filled once and chosen once at start (dispatch.c).
 *
 * Tiers: scalar.c (plain C, the reference every other tier is tested
 * against), x86/avx2.c (AVX2 + FMA + F16C) and x86/avx512.c (AVX-512
 * F/BW/VL/DQ, with VNNI and BF16 kernels where the CPU has them). Each ISA
 * file is compiled with its own -m flags and only called when the CPU has
 * those features; OB_CPU=scalar|avx2|avx512 lowers the tier for tests.
 *
 * Matmul. A weight matrix W (nout rows of nin, any ggml type) times a batch
 * of activations X (n rows of nin floats). Integer-friendly weight types
 * multiply activations that were quantized once per batch to 8 bits
 * (ob_act_fmt below): 32-element blocks with a float scale and the block sum
 * for the legacy types, Q8_K-style super-blocks of 256 for the K/IQ4_XS/
 * ternary types. Float weights (F32, F16, BF16) multiply float activations
 * (BF16 activations for the packed BF16 kernel on CPUs with AVX512_BF16).
 *
 * Two weight layouts:
 *   - native: the GGUF rows as they are in the file mapping. Every type has a
 *     `dot` kernel: one weight row against up to OB_MM_MAX_NT activation rows,
 *     so a weight block is unpacked once per group of tokens.
 *   - packed (optional, per tier and type): at load time the CPU backend
 *     repacks a weight of nout % 16 == 0 rows into panels of 16 rows whose
 *     blocks are interleaved 4 bytes per row (see x86/avx512.c and, for
 *     AVX2's own K-quant layouts, x86/avx2.c for each type's panel layout
 *     and why). One SIMD lane then holds one row, so a dot product
 *     accumulates in lanes and needs no horizontal sums, and a broadcast
 *     activation word feeds 16 rows at once (8 on AVX2: a 32-byte half of
 *     each 64-byte chunk).
 *
 * Batch invariance (docs/performance.md). Every kernel here must give a
 * row's result with arithmetic that depends on that row alone: a token's
 * dot/gemm output the same for any nt and position in the call, a key's
 * attention score the same for any nk and M, a P.V row the same for any M
 * (keys are added in key order, so a key of weight 0 adds nothing), a
 * quantized activation row the same wherever it is converted. The CPU
 * backend builds its guarantee (a token's logits do not depend on its
 * batch) on this; tests/test_batch_invariance.c checks it per tier.
 */
#ifndef OB_CPU_KERNELS_H
#define OB_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/cpu.h"
#include "../quant/blocks.h"
#include "../quant/quant.h"

/* Activation formats a weight type's kernels consume. */
typedef enum ob_act_fmt {
    OB_ACT_F32 = 0,  /* the floats as they are */
    OB_ACT_Q8 = 1,   /* ob_act_q8 blocks of 32 */
    OB_ACT_Q8K = 2,  /* ob_act_q8K super-blocks of 256 */
    OB_ACT_BF16 = 3, /* bf16, round to nearest even */
    OB_ACT_Q4 = 4,   /* ob_act_q4 blocks of 32 (the W4A4 path; the scalar tier's dot_a4) */
    OB_ACT_Q4X = 5,  /* ob_act_q8 blocks holding ob_act_q4's codes (-8..7), scale and sum, widened
                        to bytes once per row for the SIMD kernels, which multiply bytes */
} ob_act_fmt;

/* 8-bit activations for the 32-element weight types: x[i] ~ d * qs[i],
 * d = max|x| / 127, q rounded to nearest even; s = sum of qs, which the
 * kernels use for the weights' zero points (Q4_0's -8, the +128 offset that
 * lets VNNI multiply signed weights as unsigned bytes, Q4_1's minimum). A
 * CPU-private format (never in a file), so it carries a float scale and the
 * integer sum instead of Q8_1's two halves: no rounding in either. */
typedef struct ob_act_q8 {
    float d;
    int32_t s;
    int8_t qs[32];
} ob_act_q8;

/* 4-bit activations (the W4A4 path of rotated Q4_0 files, docs/
 * quantization.md): 32 signed codes q in -8..7, x[i] ~ d * q[i], two per
 * byte in Q4_0's order (byte i: element i in the low nibble, element i + 16
 * in the high one), each nibble two's complement. The rounding is the Q4_0
 * reference's (quantize_row_q4_0_ref): the value of largest magnitude m
 * maps to -8 exactly (d = m / -8, so d may be negative), the others to
 * trunc(x / d + 8.5) - 8 clamped to 7, and d is then rounded to half
 * precision. So a row of these holds exactly the values OB_ACT_SIM=q4_0
 * simulates; against the symmetric max|x|/7 this uses all 16 levels (a
 * step 7/8 as large, 23% less rounding error for the inner values) and
 * clips only opposite-sign values above 7/8 of m, by at most one step.
 * s = sum of q (Q4_0 weights' -8 offset: sum (w - 8) q = sum w q - 8 s). */
typedef struct ob_act_q4 {
    float d;
    int32_t s;
    uint8_t qs[16];
} ob_act_q4;

/* 8-bit activations for the 256-element types (K-quants, IQ4_XS, TQ*):
 * one scale per super-block, as ggml's Q8_K, because these weights combine
 * their small integer sub-block scales in integers before one float
 * multiply per super-block. bsums (16-element sums) serve the 16-element
 * sub-blocks' offsets and mins; bsum32 (32-element sums, pairs of bsums)
 * the 32-element ones, precomputed here once per token instead of once per
 * weight row. Like ob_act_q8, the scale is max|x|/127 and codes round to
 * nearest even (ggml's Q8_K uses the signed maximum, -127..127 either way). */
typedef struct ob_act_q8K {
    float d;
    int16_t bsums[16];
    int16_t bsum32[8];
    int8_t qs[256];
} ob_act_q8K;

/* Most tokens one dot/gemm kernel call handles. */
#define OB_MM_MAX_NT 8
/* Rows of a packed panel. */
#define OB_PANEL 16

/* out[t * out_stride + 0] = dot(weight row w, activation row t) for t < nt
 * (1 <= nt <= OB_MM_MAX_NT); activation rows are act_stride bytes apart, in
 * the type's ob_act_fmt. n = nin, a multiple of the weight's block size. */
typedef void (*ob_dot_fn)(int64_t n, const void *w, const void *act, size_t act_stride, int nt, float *out,
                          size_t out_stride);

/* Packed panels: out[t * out_stride + r] for the panel's 16 rows r and
 * t < nt (1 <= nt <= OB_MM_MAX_NT). */
typedef void (*ob_gemm_panel_fn)(int64_t n, const void *panel, const void *act, size_t act_stride, int nt,
                                 float *out, size_t out_stride);
/* Two packed panels at once: panel and panel + panel_stride, out[t * out_stride + r] for their
 * 32 rows r and any nt >= 1 (prefill: up to a chunk of 128 tokens). */
typedef void (*ob_gemm_pair_fn)(int64_t n, const void *panel, size_t panel_stride, const void *act,
                                size_t act_stride, int nt, float *out, size_t out_stride);
/* Bytes of one packed panel (16 rows of n elements). */
typedef size_t (*ob_panel_bytes_fn)(int64_t n);
/* Repack 16 rows (row_bytes apart, native layout) into one panel. */
typedef void (*ob_pack_fn)(const void *rows, size_t row_bytes, int64_t n, void *panel);

typedef struct ob_mm_kernels {
    ob_act_fmt act;   /* activation format of `dot` */
    ob_dot_fn dot;    /* NULL: the type has no kernel (the backend dequantizes) */
    /* packed path (all NULL when this tier does not repack the type) */
    ob_act_fmt packed_act;
    ob_panel_bytes_fn panel_bytes;
    ob_pack_fn pack;
    ob_gemm_panel_fn gemm;
    /* tiles (AMX-INT8, x86/amx.c; NULL elsewhere): `gemm` for any nt >= 1 (prefill: up to a
     * chunk of 128 tokens), the same numbers as `gemm` bit for bit, faster from 16 tokens */
    ob_gemm_panel_fn gemm_tiles;
    /* pairs (AVX-512 F32, F16, and BF16 where its gemm is vdpbf16ps; NULL elsewhere): `gemm` on
     * two neighbouring panels, the same numbers bit for bit, each activation load feeding both
     * panels - for prefill chunks, where the one-panel kernel's activation loads bound it */
    ob_gemm_pair_fn gemm_pair;
    /* W4A4 (Q4_0 only; NULL elsewhere): the same two shapes taking 4-bit
     * activations in a4_act / packed_a4_act (OB_ACT_Q4 or OB_ACT_Q4X: the
     * same numbers); gemm_a4 reads the panels `pack` made. */
    ob_act_fmt a4_act;
    ob_dot_fn dot_a4;
    ob_act_fmt packed_a4_act;
    ob_gemm_panel_fn gemm_a4;
} ob_mm_kernels;

typedef struct ob_cpu_kernels {
    ob_cpu_tier tier;
    const char *name;  /* "avx512-vnni-bf16" etc. for logs and bench */
    /* sum x[i]*y[i] */
    float (*dot_f32)(const float *x, const float *y, int64_t n);
    /* y[i] += a * x[i] */
    void (*axpy_f32)(float a, const float *x, float *y, int64_t n);
    /* y[i] *= a */
    void (*scale_f32)(float a, float *y, int64_t n);
    /* half -> float for n values */
    void (*f16_to_f32)(const uint16_t *x, float *y, int64_t n);
    /* float -> half (round to nearest even) for n values */
    void (*f32_to_f16)(const float *x, uint16_t *y, int64_t n);

    /* activation quantizers (n a multiple of 32 / 256; any n for bf16) */
    void (*quant_q8)(const float *x, ob_act_q8 *y, int64_t n);
    void (*quant_q8K)(const float *x, ob_act_q8K *y, int64_t n);
    void (*quant_q4)(const float *x, ob_act_q4 *y, int64_t n);
    void (*quant_q4x)(const float *x, ob_act_q8 *y, int64_t n); /* the same codes, widened (OB_ACT_Q4X) */
    void (*to_bf16)(const float *x, uint16_t *y, int64_t n);

    ob_mm_kernels mm[OB_TYPE_COUNT];

    /* Attention inner loops over `n` cache rows of one KV head.
     * scores[j] = dot(q, k_j) for F32/F16 rows k_j = krows + j * kstride
     * (q is F32 of head_dim d). */
    void (*attn_scores_f32)(const float *q, const float *k, size_t kstride, int n, int d, float *scores);
    void (*attn_scores_f16)(const float *q, const uint16_t *k, size_t kstride, int n, int d, float *scores);
    /* acc[d] += sum_j w[j] * v_j */
    void (*attn_accum_f32)(const float *w, const float *v, size_t vstride, int n, int d, float *acc);
    void (*attn_accum_f16)(const float *w, const uint16_t *v, size_t vstride, int n, int d, float *acc);
    /* Tiles of the blocked attention: s[m*lds + j] = dot(q_m, k_j) for m < M
     * query rows (ldq floats apart) and j < nk F32 key rows (kstride bytes
     * apart), and o_m += sum_j p[m*ldp + j] * v_j (v rows vstride bytes
     * apart, o rows ldo floats apart). d is the head dimension. */
    void (*attn_qk)(const float *q, int M, size_t ldq, const float *k, size_t kstride, int nk, int d, float *s,
                    size_t lds);
    void (*attn_pv)(const float *p, int M, size_t ldp, const float *v, size_t vstride, int nk, int d, float *o,
                    size_t ldo);
    /* the same with F16 key/value rows (the default KV cache type) */
    void (*attn_qk_f16)(const float *q, int M, size_t ldq, const uint16_t *k, size_t kstride, int nk, int d,
                        float *s, size_t lds);
    void (*attn_pv_f16)(const float *p, int M, size_t ldp, const uint16_t *v, size_t vstride, int nk, int d,
                        float *o, size_t ldo);
    /* y[i] = exp(x[i] - m) for n values; returns their sum */
    float (*exp_sum)(const float *x, float m, float *y, int n);
    /* the largest of n >= 1 values (a softmax row's maximum) */
    float (*max_f32)(const float *x, int n);

    /* Elementwise. y[i] = silu(g[i]) * u[i] (u NULL: silu(g[i])); y may be g. */
    void (*swiglu)(const float *g, const float *u, float *y, int64_t n);
    /* sum of x[i]^2 */
    float (*sum_sq)(const float *x, int64_t n);
    /* y[i] = x[i] * s * w[i] (w NULL: x[i] * s); y may be x */
    void (*scale_mul)(const float *x, float s, const float *w, float *y, int64_t n);
} ob_cpu_kernels;

/* The kernels for the selected tier (OB_CPU or the best the CPU has). */
const ob_cpu_kernels *ob_cpu_kernels_get(void);
/* Kernels of one tier (for tests comparing tiers); NULL if the CPU lacks it. */
const ob_cpu_kernels *ob_cpu_kernels_for(ob_cpu_tier tier);

/* Bytes of one activation row of n elements in a format (0 if n does not
 * fit the format's block). */
size_t ob_act_row_bytes(ob_act_fmt f, int64_t n);

/* Each tier fills its table: scalar first, then the ISA files overwrite what
 * they implement (so a missing kernel falls back to the tier below). */
void ob_cpu_fill_scalar(ob_cpu_kernels *k);
#if defined(__x86_64__)
void ob_cpu_fill_avx2(ob_cpu_kernels *k);
/* x86/iq_avx2.c: the IQ1/IQ2/IQ3 codebook types on the AVX2 tier (after ob_cpu_fill_avx2) */
void ob_cpu_fill_iq_avx2(ob_cpu_kernels *k);
void ob_cpu_fill_avx512(ob_cpu_kernels *k, const ob_cpu_features *f);
/* x86/iq_avx512.c: the same types on the AVX-512 tier with VNNI (after ob_cpu_fill_avx512; a CPU
 * without AVX512_VNNI keeps the AVX2 ones) */
void ob_cpu_fill_iq_avx512(ob_cpu_kernels *k, const ob_cpu_features *f);
/* x86/amx.c: gemm_tiles for the packed integer types that have a VNNI gemm (after the AVX-512
 * fills; only when ob_cpu_amx_request() granted the tile state); with bf16 (AMX-BF16) also the
 * BF16 panels' gemm itself, for every token count */
void ob_cpu_fill_amx(ob_cpu_kernels *k, bool bf16);
#endif

/* The scalar reference pieces other tiers reuse for tails and fallbacks. */
float ob_dot_f32_scalar(const float *x, const float *y, int64_t n);
void ob_quant_q8_scalar(const float *x, ob_act_q8 *y, int64_t n);
void ob_quant_q8K_scalar(const float *x, ob_act_q8K *y, int64_t n);
void ob_quant_q4_scalar(const float *x, ob_act_q4 *y, int64_t n);
void ob_quant_q4x_scalar(const float *x, ob_act_q8 *y, int64_t n);
void ob_to_bf16_scalar(const float *x, uint16_t *y, int64_t n);

/* CPU backend with an explicit kernel table (tests compare tiers in one
 * process); ob_backend_cpu_create uses ob_cpu_kernels_get(). */
struct ob_backend;
int ob_backend_cpu_create_with(int n_threads, const ob_cpu_kernels *k, struct ob_backend **out);

#endif
