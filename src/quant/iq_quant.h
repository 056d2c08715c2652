/*
 * iq_quant.h - quantizers for the codebook ("grid") IQ formats: a search
 * over the type's grid, with importance weights. Layouts in blocks.h, grids
 * in iq_tables.h, dequantizers in iq_ref.c.
 *
 * Types: IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S.
 */
#ifndef OB_QUANT_IQ_QUANT_H
#define OB_QUANT_IQ_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "quant.h"

/* Quantize one row of n values (n a multiple of 256) with importance
 * weights qw[n] (>= 0; an imatrix row). qw may be NULL: every column then
 * counts the same. Returns false, writing nothing, for a type not handled
 * here or a row length that does not split into blocks. Thread-safe: the
 * search tables are built once, on first use. */
bool ob_quantize_row_iq(ob_type type, const float *x, void *dst, int64_t n, const float *qw);
/* Whether ob_quantize_row_iq handles a type. */
bool ob_quantize_has_iq(ob_type type);

/* The plain nearest-grid-point quantizer (one scale per group from its
 * largest value, each chunk the unweighted nearest grid entry, no refit):
 * the baseline the tests hold ob_quantize_row_iq to. Not for files. */
bool ob_quantize_row_iq_simple(ob_type type, const float *x, void *dst, int64_t n);

#endif
