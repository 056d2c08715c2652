/*
 * float_ref.c - the float types: scalar conversions between binary32 and
 * binary16 (IEEE half) or bfloat16, and the row routines of the F32, F16,
 * BF16 and F64 entries of the type table. Quantized types are in
 * quant_ref.c and iq_ref.c.
 *
 * All conversions work on bits with integer arithmetic, so they are exact
 * and do not depend on the compiler, the FPU's rounding mode or F16C.
 *
 * NaN policy, chosen to match ggml bit for bit: every NaN keeps its sign
 * and (the top bits of) its payload and comes out quiet, except that
 * bf16 -> float is a plain 16-bit shift that keeps even a signalling NaN
 * as it is. (half -> float quiets because ggml's conversion goes through a
 * float multiply, which quiets; F16C does the same.) Narrowing rounds to
 * nearest even and overflows to infinity. So every half or bf16 value
 * survives a round trip through float except signalling NaNs, which come
 * back quieted.
 */
#include <string.h>

#include "quant.h"
#include "quant_ref.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- half (binary16): 1 sign, 5 exponent (bias 15), 10 mantissa bits ---- */

float ob_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1f) { /* Inf or NaN: maximal exponent, mantissa moved up */
        const uint32_t quiet = man ? 0x00400000u : 0; /* a NaN comes out quiet */
        return f32_from_bits(sign | 0x7f800000u | quiet | (man << 13));
    }
    if (exp != 0)    /* normal: rebias the exponent from 15 to 127 */
        return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in binary32 */
    return f32_from_bits(sign | f32_bits((float)man * 0x1p-24f));
}

uint16_t ob_fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: quiet it, keep the top 9 payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 = 0x477ff000 is halfway between the largest half (65504) and
     * 65536, and rounds (to even) up; it and everything above become Inf. */
    if (ax >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {
        /* Normal half (>= 2^-14). Round the 23-bit mantissa to 10 bits,
         * ties to even; a carry out of the mantissa correctly bumps the
         * exponent. Then rebias by (127 - 15) << 23. */
        uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    /* Subnormal half: the result is m * 2^-24 with m = round(|f| * 2^24).
     * |f| = mant * 2^(e - 150), so m = mant >> (126 - e), rounded. Anything
     * at or below 2^-25 (e < 102, or exactly 2^-25 as a tie) is zero. */
    uint32_t e = ax >> 23;
    if (e < 102) return sign;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t m = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u))) m++; /* m == 1024 is the smallest normal */
    return (uint16_t)(sign | m);
}

/* ---- bfloat16: the top 16 bits of a binary32 ---- */

float ob_bf16_to_fp32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t ob_fp32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate, set the quiet bit */
        return (uint16_t)((x >> 16) | 0x40u);
    /* Round to nearest even on the 16 dropped bits: add just under half,
     * plus one more when the kept part is odd. Overflow carries into Inf. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- rows ---- */

void ob_dequantize_row_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void ob_quantize_row_f32_ref(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void ob_dequantize_row_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = ob_fp16_to_fp32(h);
    }
}

void ob_quantize_row_f16_ref(const float *src, void *dst, int64_t n) {
    uint8_t *p = (uint8_t *)dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = ob_fp32_to_fp16(src[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

void ob_dequantize_row_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = ob_bf16_to_fp32(h);
    }
}

void ob_quantize_row_bf16_ref(const float *src, void *dst, int64_t n) {
    uint8_t *p = (uint8_t *)dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = ob_fp32_to_bf16(src[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* F64 -> F32 rounds to nearest even (the C conversion); values beyond the
 * float range become +-Inf. */
void ob_dequantize_row_f64(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    for (int64_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, p + 8 * i, 8);
        dst[i] = (float)v;
    }
}

void ob_quantize_row_f64_ref(const float *src, void *dst, int64_t n) {
    uint8_t *p = (uint8_t *)dst;
    for (int64_t i = 0; i < n; i++) {
        double v = (double)src[i];
        memcpy(p + 8 * i, &v, 8);
    }
}
