/*
 * quant_ref.h - the reference (plain, scalar C) conversions between float
 * rows and each tensor type. They are the specification: SIMD and CUDA
 * kernels are tested against them, and the type table (quant.h) points at
 * them.
 *
 * Contract shared by every function here:
 *   - n is a count of elements, a multiple of the type's block size.
 *   - Block pointers must be aligned to their block struct (2 bytes; 4 for
 *     Q8_K): true of GGUF tensor data, whose alignment is a multiple of 32.
 *   - Input floats must be finite (|x| < 1e38, so block spans cannot
 *     overflow); quantizing NaN or Inf is undefined. Types with half scales
 *     only represent blocks whose scale fits a half (up to 65504 times the
 *     largest code); larger values come back as Inf/NaN, as in ggml.
 *   - Quantizers are deterministic and the dequantizers do exactly the
 *     float operations ggml's do, in the same order, so the output matches
 *     ggml bit for bit (the fixture test in test_quant checks it).
 *
 * Quantizers exist for every type except the IQ1/IQ2/IQ3 families, whose
 * codebook search lives in iq_quant.h (reached through quant_weighted.h).
 */
#ifndef OB_QUANT_QUANT_REF_H
#define OB_QUANT_QUANT_REF_H

#include <stdint.h>

#include "blocks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dequantize: blocks -> float ---- */
void ob_dequantize_row_f32(const void *src, float *dst, int64_t n);
void ob_dequantize_row_f16(const void *src, float *dst, int64_t n);
void ob_dequantize_row_bf16(const void *src, float *dst, int64_t n);
void ob_dequantize_row_f64(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q4_0(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q4_1(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q5_0(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q5_1(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q8_1(const void *src, float *dst, int64_t n);
void ob_dequantize_row_mxfp4(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q2_K(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q3_K(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q4_K(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q5_K(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q6_K(const void *src, float *dst, int64_t n);
void ob_dequantize_row_q8_K(const void *src, float *dst, int64_t n);
void ob_dequantize_row_tq1_0(const void *src, float *dst, int64_t n);
void ob_dequantize_row_tq2_0(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq2_xxs(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq2_xs(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq2_s(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq3_xxs(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq3_s(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq1_s(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq1_m(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq4_nl(const void *src, float *dst, int64_t n);
void ob_dequantize_row_iq4_xs(const void *src, float *dst, int64_t n);

/* ---- quantize: float -> blocks ---- */
void ob_quantize_row_f32_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_f16_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_bf16_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_f64_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q4_0_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q4_1_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q5_0_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q5_1_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q8_0_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q8_1_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_mxfp4_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q2_K_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q3_K_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q4_K_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q5_K_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q6_K_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_q8_K_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_tq1_0_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_tq2_0_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_iq4_nl_ref(const float *src, void *dst, int64_t n);
void ob_quantize_row_iq4_xs_ref(const float *src, void *dst, int64_t n);

/* ---- helpers shared by the reference files ---- */

/* Round to the nearest integer, ties to even, for |f| < 2^22 (what every
 * quantizer here needs); larger magnitudes give an unspecified value but no
 * undefined behaviour. Matches ggml's nearest_int bit for bit. */
int ob_nearest_int(float f);

/* E8M0 exponent byte e -> 2^(e - 128): half the MXFP4 block scale, because
 * ob_mxfp4_values are doubled. e = 0 and 1 give the subnormals 2^-128 and
 * 2^-127; e = 255 (NaN in the OCP spec) is not special-cased. */
float ob_e8m0_to_fp32_half(uint8_t e);

#ifdef __cplusplus
}
#endif

#endif
