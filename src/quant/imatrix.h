/*
 * imatrix.h - importance matrices: per weight matrix, the sum over tokens of
 * the squared activations entering it (one value per input column), plus how
 * many tokens were summed. Quantizers weigh each column's rounding error by
 * sum2 / count, so columns that carry large activations are kept closer.
 *
 * Files use the GGUF layout llama.cpp's llama-imatrix writes, so either
 * tool's file works with either quantizer:
 *   general.type         = "imatrix"
 *   imatrix.datasets     = [string]  names of the calibration texts
 *   imatrix.chunk_count  = u32       chunks processed
 *   imatrix.chunk_size   = u32       tokens per chunk
 *   tensor "<weight>.in_sum2"  F32 ne = {n_per_row, n_mat}  sum of x^2
 *   tensor "<weight>.counts"   F32 ne = {1, n_mat}          tokens summed
 * n_mat is 1 for a dense matrix and the expert count for stacked experts.
 *
 * This module only stores, reads and writes; collecting activations is the
 * caller's (src/cli/imatrix.c observes the engine's matmuls).
 */
#ifndef OB_QUANT_IMATRIX_H
#define OB_QUANT_IMATRIX_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ob_imatrix_entry {
    char *name;        /* weight tensor name, "blk.0.attn_q.weight" */
    int64_t n_per_row; /* input columns of the weight */
    int64_t n_mat;     /* 1, or the number of experts */
    double *sum2;      /* [n_mat][n_per_row] sum of x^2 (double while collecting) */
    double *counts;    /* [n_mat] tokens summed */
} ob_imatrix_entry;

typedef struct ob_imatrix {
    ob_imatrix_entry *e; /* [n] */
    int64_t n, cap;
    char **datasets;     /* [n_datasets] */
    int n_datasets;
    uint32_t chunk_count, chunk_size;
} ob_imatrix;

int ob_imatrix_create(ob_imatrix **out);
void ob_imatrix_free(ob_imatrix *m);

/* The entry for `name`, created zeroed when absent. OB_ERR_FORMAT when it
 * exists with another shape. The pointer is valid until the next call that
 * adds an entry. */
int ob_imatrix_entry_get(ob_imatrix *m, const char *name, int64_t n_per_row, int64_t n_mat, ob_imatrix_entry **out);
/* NULL when absent. */
const ob_imatrix_entry *ob_imatrix_find(const ob_imatrix *m, const char *name);
/* Add n rows of activations x[n][n_per_row] to matrix `mat` of an entry. */
void ob_imatrix_entry_add(ob_imatrix_entry *e, int64_t mat, const float *x, int64_t n);
int ob_imatrix_add_dataset(ob_imatrix *m, const char *name);

/* Importance weights of matrix `mat`: w[j] = sum2[j] / count. Returns false
 * (w untouched) when nothing was summed for it. */
bool ob_imatrix_weights(const ob_imatrix_entry *e, int64_t mat, float *w);

/* Write / read the GGUF layout above. Load accepts files from llama.cpp
 * (entries whose counts are all zero are kept, and give no weights). */
int ob_imatrix_save(const ob_imatrix *m, const char *path);
int ob_imatrix_load(const char *path, ob_imatrix **out);

#endif
