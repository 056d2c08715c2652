/*
 * panel_a8.h - the 16-row panel layout of the legacy 32-element types (Q4_0
 * Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4) and its packer, shared by the tiers that
 * repack them: x86/avx512.c (VNNI: vpdpbusd on whole 64-byte chunks) and
 * x86/avx2.c (vpmaddubsw on each chunk's two 8-row halves). Plain C, so each
 * file compiles it with its own -m flags; see avx512.c for why the panels
 * look like this.
 */
#ifndef OB_CPU_X86_PANEL_A8_H
#define OB_CPU_X86_PANEL_A8_H

#include <stdint.h>
#include <string.h>

#include "../../quant/blocks.h"
#include "../kernels.h"

/* Row r of a native-layout matrix. */
#define ROW(rows, rb, r) ((const char *)(rows) + (size_t)(r) * (rb))

/* Copy 4 bytes of each of the 16 rows (at byte offset `off` of each row's
 * block) into one 64-byte chunk, xor-ing each byte with `flip`. */
static inline void gather_chunk(const char *rows, size_t row_bytes, size_t off, uint8_t flip, uint8_t *dst) {
    for (int r = 0; r < OB_PANEL; r++)
        for (int i = 0; i < 4; i++) dst[4 * r + i] = (uint8_t)(rows[(size_t)r * row_bytes + off + (size_t)i] ^ flip);
}

/* ======================================================================
 * Legacy 32-element types: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4
 *
 * Panel layout, per group of 4 consecutive 32-element blocks (see a8_at):
 *   codes   [4][QB]    nibble types: 4 chunks, chunk j row r = the row's
 *                      qs[4j..4j+3] (low nibbles elements 4j+i, high
 *                      nibbles 16+4j+i): exactly the file's bytes, moved.
 *                      Q8_0: 8 chunks, chunk j = qs[4j..4j+3] + 128.
 *   d       [4][32]    the 16 rows' half scales (MXFP4: [4][16] exponents)
 *   m       [4][32]    Q4_1/Q5_1 half minimums
 *   qh      [4][64]    Q5_0/Q5_1 fifth bits: byte i of row r has bit j =
 *                      bit 4 of element 4j+i and bit 4+j = bit 4 of element
 *                      16+4j+i, so shifting right by j lines up both bits
 *                      chunk j needs.
 * ====================================================================== */

enum { A8_Q4_0, A8_Q4_1, A8_Q5_0, A8_Q5_1, A8_Q8_0, A8_IQ4_NL, A8_MXFP4 };

static inline int a8_qbytes(int kind) { return kind == A8_Q8_0 ? 512 : 256; }
static inline int a8_dbytes(int kind) { return kind == A8_MXFP4 ? 16 : 32; }
static inline int a8_has_m(int kind) { return kind == A8_Q4_1 || kind == A8_Q5_1; }
static inline int a8_has_h(int kind) { return kind == A8_Q5_0 || kind == A8_Q5_1; }
static inline size_t a8_block_bytes(int kind) {
    return (size_t)(a8_qbytes(kind) + a8_dbytes(kind) + (a8_has_m(kind) ? 32 : 0) + (a8_has_h(kind) ? 64 : 0));
}
/* Blocks are stored in groups of 4: [codes x4][d x4][m x4][qh x4], so one
 * sequential stream carries everything and every area stays 64-byte
 * aligned (4 x 16 bytes of MXFP4 exponents fill a line). */
enum { A8_CODES, A8_D, A8_M, A8_H };
static inline uint8_t *a8_at(int kind, const void *panel, int64_t b, int part) {
    const size_t qb = (size_t)a8_qbytes(kind), db = (size_t)a8_dbytes(kind), mb = a8_has_m(kind) ? 32 : 0;
    uint8_t *g = (uint8_t *)panel + (size_t)(b >> 2) * 4 * a8_block_bytes(kind);
    const size_t i = (size_t)(b & 3);
    switch (part) {
    case A8_CODES: return g + i * qb;
    case A8_D: return g + 4 * qb + i * db;
    case A8_M: return g + 4 * (qb + db) + i * 32;
    default: return g + 4 * (qb + db + mb) + i * 64;
    }
}
/* What the 8-bit accumulator of a block starts at, per activation sum. */
static inline int a8_offset(int kind) {
    switch (kind) {
    case A8_Q4_0: return 8;
    case A8_Q5_0: return 16;
    case A8_Q4_1:
    case A8_Q5_1: return 0;
    default: return 128;
    }
}

/* Bytes of one panel of n-element rows. */
static inline size_t a8_panel_bytes(int kind, int64_t n) { return (size_t)((n / 32 + 3) / 4) * 4 * a8_block_bytes(kind); }

static inline void pack_a8(int kind, const void *rows, size_t rb, int64_t n, void *panel) {
    const int64_t nb = n / 32;
    /* byte offsets of the fields inside one row block */
    size_t bsize, off_d, off_m = 0, off_qh = 0, off_qs;
    switch (kind) {
    case A8_Q4_0: bsize = sizeof(ob_block_q4_0), off_d = 0, off_qs = 2; break;
    case A8_Q4_1: bsize = sizeof(ob_block_q4_1), off_d = 0, off_m = 2, off_qs = 4; break;
    case A8_Q5_0: bsize = sizeof(ob_block_q5_0), off_d = 0, off_qh = 2, off_qs = 6; break;
    case A8_Q5_1: bsize = sizeof(ob_block_q5_1), off_d = 0, off_m = 2, off_qh = 4, off_qs = 8; break;
    case A8_Q8_0: bsize = sizeof(ob_block_q8_0), off_d = 0, off_qs = 2; break;
    case A8_IQ4_NL: bsize = sizeof(ob_block_iq4_nl), off_d = 0, off_qs = 2; break;
    default: bsize = sizeof(ob_block_mxfp4), off_d = 0, off_qs = 1; break;
    }
    const int nchunks = a8_qbytes(kind) / 64;
    for (int64_t b = 0; b < nb; b++) {
        const char *blk = (const char *)rows + (size_t)b * bsize;
        for (int j = 0; j < nchunks; j++)
            gather_chunk(blk, rb, off_qs + 4 * (size_t)j, kind == A8_Q8_0 ? 0x80 : 0,
                         a8_at(kind, panel, b, A8_CODES) + 64 * (size_t)j);
        for (int r = 0; r < OB_PANEL; r++) {
            const char *x = ROW(blk, rb, r);
            if (kind == A8_MXFP4)
                a8_at(kind, panel, b, A8_D)[r] = (uint8_t)x[off_d];
            else
                memcpy(a8_at(kind, panel, b, A8_D) + 2 * (size_t)r, x + off_d, 2);
            if (a8_has_m(kind)) memcpy(a8_at(kind, panel, b, A8_M) + 2 * (size_t)r, x + off_m, 2);
            if (a8_has_h(kind)) {
                uint32_t qh;
                memcpy(&qh, x + off_qh, 4);
                uint8_t *hb = a8_at(kind, panel, b, A8_H) + 4 * (size_t)r;
                for (int i = 0; i < 4; i++) {
                    uint8_t v = 0;
                    for (int j = 0; j < 4; j++) {
                        v |= (uint8_t)(((qh >> (4 * j + i)) & 1u) << j);
                        v |= (uint8_t)(((qh >> (16 + 4 * j + i)) & 1u) << (4 + j));
                    }
                    hb[i] = v;
                }
            }
        }
    }
}

#endif
