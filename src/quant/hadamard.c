/*
 * hadamard.c - randomized 32-point block Walsh-Hadamard rotation (see
 * hadamard.h). The transform is the in-place butterfly; 1/sqrt(32) keeps it
 * orthogonal.
 */
#include <math.h>
#include <string.h>

#include "hadamard.h"

/* +1 or -1 for column j: a 32-bit mix of (seed, j), so no table is stored. */
static float sign_of(uint32_t seed, int64_t j) {
    uint64_t h = (uint64_t)j * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 17 | seed);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (h >> 7) & 1 ? -1.0f : 1.0f;
}

static void fwht32(float *v) {
    for (int len = 1; len < OB_HADAMARD_BLOCK; len <<= 1)
        for (int i = 0; i < OB_HADAMARD_BLOCK; i += len << 1)
            for (int j = i; j < i + len; j++) {
                float a = v[j], b = v[j + len];
                v[j] = a + b;
                v[j + len] = a - b;
            }
    const float s = 0.17677669529663687f; /* 1/sqrt(32) */
    for (int i = 0; i < OB_HADAMARD_BLOCK; i++) v[i] *= s;
}

void ob_hadamard_rotate_rows(float *x, int64_t n_per_row, int64_t n_rows, uint32_t seed) {
    for (int64_t r = 0; r < n_rows; r++) {
        float *row = x + r * n_per_row;
        for (int64_t b = 0; b + OB_HADAMARD_BLOCK <= n_per_row; b += OB_HADAMARD_BLOCK) {
            for (int i = 0; i < OB_HADAMARD_BLOCK; i++) row[b + i] *= sign_of(seed, b + i);
            fwht32(row + b);
        }
    }
}

void ob_hadamard_signs(float *s, int64_t n, uint32_t seed) {
    for (int64_t j = 0; j < n; j++) s[j] = sign_of(seed, j);
}

void ob_hadamard_block(float *v, const float *signs) {
    for (int i = 0; i < OB_HADAMARD_BLOCK; i++) v[i] *= signs[i];
    fwht32(v);
}

void ob_hadamard_rotate_rows_with(float *x, int64_t n_per_row, int64_t n_rows, const float *signs) {
    for (int64_t r = 0; r < n_rows; r++) {
        float *row = x + r * n_per_row;
        for (int64_t b = 0; b + OB_HADAMARD_BLOCK <= n_per_row; b += OB_HADAMARD_BLOCK)
            ob_hadamard_block(row + b, signs + b);
    }
}

void ob_hadamard_unrotate_rows(float *x, int64_t n_per_row, int64_t n_rows, uint32_t seed) {
    for (int64_t r = 0; r < n_rows; r++) {
        float *row = x + r * n_per_row;
        for (int64_t b = 0; b + OB_HADAMARD_BLOCK <= n_per_row; b += OB_HADAMARD_BLOCK) {
            fwht32(row + b); /* the normalized Walsh-Hadamard matrix is its own inverse */
            for (int i = 0; i < OB_HADAMARD_BLOCK; i++) row[b + i] *= sign_of(seed, b + i);
        }
    }
}

bool ob_hadamard_applies(const char *name, int64_t ne0) {
    static const char *const parts[] = {".attn_q.", ".attn_k.", ".attn_v.", ".attn_output.", ".attn_qkv.",
                                        ".ffn_gate", ".ffn_up", ".ffn_down"};
    if (ne0 % OB_HADAMARD_BLOCK != 0 || strncmp(name, "blk.", 4) != 0) return false;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(name, parts[i])) return !strstr(name, "ffn_gate_inp");
    return false;
}
