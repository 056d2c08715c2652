/*
 * quant_weighted.h - quantizers that take importance weights (an imatrix
 * row: the mean squared activation of each column), so the rounding error
 * is spent where activations are small. Same block layouts as the
 * reference quantizers; only the choice of scale and codes differs.
 */
#ifndef OB_QUANT_QUANT_WEIGHTED_H
#define OB_QUANT_QUANT_WEIGHTED_H

#include <stdbool.h>
#include <stdint.h>

#include "quant.h"

/* Quantize one row of n values with importance weights qw[n] (>= 0).
 * Returns false, writing nothing, for a type without a weighted quantizer
 * (the caller then uses the reference one). Types: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and the codebook types of iq_quant.h. */
bool ob_quantize_row_weighted(ob_type type, const float *x, void *dst, int64_t n, const float *qw);
/* Whether ob_quantize_row_weighted handles a type. */
bool ob_quantize_has_weighted(ob_type type);

#endif
