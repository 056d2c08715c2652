/*
 * quant.h - the table of ggml tensor types: ids (as stored in GGUF files),
 * names, block geometry, and the reference (plain C) conversion routines.
 *
 * The reference routines are the specification every SIMD and GPU kernel is
 * tested against. Block layouts live in blocks.h.
 */
#ifndef OB_QUANT_QUANT_H
#define OB_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Type ids exactly as ggml numbers them (GGUF stores these). Gaps are ids
 * ggml has retired; they are rejected when read. */
typedef enum ob_type {
    OB_TYPE_F32 = 0,
    OB_TYPE_F16 = 1,
    OB_TYPE_Q4_0 = 2,
    OB_TYPE_Q4_1 = 3,
    OB_TYPE_Q5_0 = 6,
    OB_TYPE_Q5_1 = 7,
    OB_TYPE_Q8_0 = 8,
    OB_TYPE_Q8_1 = 9,
    OB_TYPE_Q2_K = 10,
    OB_TYPE_Q3_K = 11,
    OB_TYPE_Q4_K = 12,
    OB_TYPE_Q5_K = 13,
    OB_TYPE_Q6_K = 14,
    OB_TYPE_Q8_K = 15,
    OB_TYPE_IQ2_XXS = 16,
    OB_TYPE_IQ2_XS = 17,
    OB_TYPE_IQ3_XXS = 18,
    OB_TYPE_IQ1_S = 19,
    OB_TYPE_IQ4_NL = 20,
    OB_TYPE_IQ3_S = 21,
    OB_TYPE_IQ2_S = 22,
    OB_TYPE_IQ4_XS = 23,
    OB_TYPE_I8 = 24,
    OB_TYPE_I16 = 25,
    OB_TYPE_I32 = 26,
    OB_TYPE_I64 = 27,
    OB_TYPE_F64 = 28,
    OB_TYPE_IQ1_M = 29,
    OB_TYPE_BF16 = 30,
    OB_TYPE_TQ1_0 = 34,
    OB_TYPE_TQ2_0 = 35,
    OB_TYPE_MXFP4 = 39,
    OB_TYPE_COUNT = 40,
} ob_type;

/* Convert n elements (n a multiple of the block size). */
typedef void (*ob_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*ob_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct ob_type_traits {
    const char *name;        /* ggml's spelling: "f16", "q4_K", "iq2_xxs" */
    int64_t block_size;      /* elements per block */
    size_t type_size;        /* bytes per block */
    bool is_quantized;
    ob_to_float_fn to_float;          /* reference dequantize; NULL for integer types */
    ob_from_float_fn from_float_ref;  /* reference quantize; NULL where not (yet) available */
} ob_type_traits;

/* Traits of a type id, or NULL for an id that is unknown or retired. */
const ob_type_traits *ob_type_get(int type);
/* Name of a type id ("?" if unknown). */
const char *ob_type_name(int type);
/* Type id for a name (case-insensitive: "Q4_K", "q4_k", "bf16"), or -1. */
int ob_type_from_name(const char *name);
/* Bytes of a row of ne0 elements; ne0 must be a multiple of the block size. */
size_t ob_row_size(ob_type type, int64_t ne0);

/* Scalar half-precision helpers (exact IEEE conversions, round to nearest even). */
float ob_fp16_to_fp32(uint16_t h);
uint16_t ob_fp32_to_fp16(float f);
float ob_bf16_to_fp32(uint16_t h);
uint16_t ob_fp32_to_bf16(float f);

#ifdef __cplusplus
}
#endif

#endif
