/*
 * iq_tables.h - the lookup tables of the IQ and FP4 formats (values in
 * iq_tables.c). Format data, not tuning: they must match the ecosystem's
 * tables exactly for files to decode.
 *
 * Sizes are fixed by the formats; the OB_IQ* macros name them so callers can
 * bounds-check an index before using it.
 */
#ifndef OB_QUANT_IQ_TABLES_H
#define OB_QUANT_IQ_TABLES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OB_IQ2XXS_GRID_SIZE 256
#define OB_IQ2XS_GRID_SIZE 512
#define OB_IQ2S_GRID_SIZE 1024
#define OB_IQ3XXS_GRID_SIZE 256
#define OB_IQ3S_GRID_SIZE 512
#define OB_IQ1S_GRID_SIZE 2048

/* Sign handling shared by IQ2_* and IQ3_*: a group of 8 elements carries a
 * 7-bit sign index; ob_iq2_signs[idx] expands it to 8 sign bits (bit j set =
 * element j negative) and ob_iq2_sign_mask[j] == 1 << j tests bit j. */
extern const uint8_t ob_iq2_sign_mask[8];
extern const uint8_t ob_iq2_signs[128];

/* Codebooks: each entry is a group of 8 (IQ2, IQ1) or 4 (IQ3) values, one
 * per byte, element j in bits 8j..8j+7. IQ2/IQ3 bytes are magnitudes
 * (unsigned); IQ1 bytes are signed (0xff = -1, 0x00 = 0, 0x01 = +1). */
extern const uint64_t ob_iq2xxs_grid[OB_IQ2XXS_GRID_SIZE];
extern const uint64_t ob_iq2xs_grid[OB_IQ2XS_GRID_SIZE];
extern const uint64_t ob_iq2s_grid[OB_IQ2S_GRID_SIZE];
extern const uint32_t ob_iq3xxs_grid[OB_IQ3XXS_GRID_SIZE];
extern const uint32_t ob_iq3s_grid[OB_IQ3S_GRID_SIZE];
extern const uint64_t ob_iq1s_grid[OB_IQ1S_GRID_SIZE];

/* Levels selected by a 4-bit index. */
extern const int8_t ob_iq4nl_values[16]; /* IQ4_NL, IQ4_XS */
extern const int8_t ob_mxfp4_values[16]; /* MXFP4: E2M1 values times 2 */

/* Byte j of a packed grid entry (j < 8 for uint64 grids, j < 4 for uint32). */
static inline uint8_t ob_grid_byte(uint64_t entry, int j) {
    return (uint8_t)(entry >> (8 * j));
}

#ifdef __cplusplus
}
#endif

#endif
