/*
 * hadamard.h - the randomized block Hadamard rotation of the "rotated Q4_0"
 * route (docs/quantization.md).
 *
 * A row is cut into blocks of 32; each block is multiplied by signs s_j
 * (+-1, a hash of the column index j and a seed) and then by the 32-point
 * Walsh-Hadamard matrix scaled by 1/sqrt(32). The transform R is orthogonal,
 * so rotating both a weight row w and an activation row x leaves every dot
 * product unchanged: (R x) . (R w) = x . w. What changes is the rounding:
 * a block with a few large values becomes a block of evenly sized ones, so
 * one shared scale fits it better.
 *
 * The quantizer rotates the input dimension of the projection matrices
 * offline and stamps the file; at run time the engine rotates the
 * activations that enter those matrices (same seed).
 */
#ifndef OB_QUANT_HADAMARD_H
#define OB_QUANT_HADAMARD_H

#include <stdbool.h>
#include <stdint.h>

#define OB_HADAMARD_KEY "onebit.rotation"           /* string: OB_HADAMARD_NAME */
#define OB_HADAMARD_SEED_KEY "onebit.rotation.seed" /* u32 */
#define OB_HADAMARD_NAME "hadamard32"
#define OB_HADAMARD_BLOCK 32
#define OB_HADAMARD_DEFAULT_SEED 0x1b17u

/* Rotate n_rows rows of n_per_row floats in place (n_per_row a multiple of 32). */
void ob_hadamard_rotate_rows(float *x, int64_t n_per_row, int64_t n_rows, uint32_t seed);
/* The signs s_j of columns 0..n-1 for seed, and the same rotation with them
 * looked up instead of hashed per element (the run-time path: a table for the
 * widest row serves every narrower one). Results are identical. */
void ob_hadamard_signs(float *s, int64_t n, uint32_t seed);
void ob_hadamard_rotate_rows_with(float *x, int64_t n_per_row, int64_t n_rows, const float *signs);
/* One block of 32 in place: v[i] *= signs[i], then the transform (what the
 * row functions do to each block; backends that rotate in parallel call it). */
void ob_hadamard_block(float *v, const float *signs);
/* The inverse (R is orthogonal: signs after the transform instead of before). */
void ob_hadamard_unrotate_rows(float *x, int64_t n_per_row, int64_t n_rows, uint32_t seed);
/* Whether a stamped file rotates this tensor: the attention and FFN
 * projections (dense and expert), when their rows split into blocks of 32. */
bool ob_hadamard_applies(const char *name, int64_t ne0);

#endif
