/*
 * fuzz_imatrix.c - libFuzzer target for the importance-matrix reader
 * (src/quant/imatrix.c: `1bit quantize --imatrix FILE` reads a file from
 * llama.cpp's llama-imatrix or ours, outside input). The reader takes a
 * path, so the bytes go to a memfd read back through /proc/self/fd/N. It
 * reads only the GGUF layout (imatrix.h); llama.cpp's older .dat files are
 * not read, and the GGUF reader refuses them.
 *
 * Checked beyond "no crash":
 *   - the reader returns 0 or a negative status with a message, and *out is
 *     set only on success;
 *   - an accepted file has at least one entry; each has a name, positive
 *     sizes and both arrays, names are distinct and find() returns each;
 *     dataset names are there;
 *   - weights are given exactly for the matrices whose count is positive,
 *     and are sum2 / count;
 *   - saving what was read and reading it again gives the same entries,
 *     values, datasets and chunk numbers (floats survive the double
 *     round trip exactly).
 */
#define _GNU_SOURCE /* memfd_create */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/mem.h"
#include "core/status.h"
#include "quant/imatrix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

static int memfd_path(int *fd, const char *name, char *path, size_t n) {
    if (*fd < 0) *fd = memfd_create(name, 0);
    REQUIRE(*fd >= 0);
    REQUIRE(ftruncate(*fd, 0) == 0);
    snprintf(path, n, "/proc/self/fd/%d", *fd);
    return *fd;
}

static bool same_value(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static void check_entries(const ob_imatrix *m) {
    REQUIRE(m->n >= 1 && m->n <= m->cap && m->e);
    REQUIRE(m->n_datasets >= 0 && (m->n_datasets == 0 || m->datasets));
    for (int i = 0; i < m->n_datasets; i++) REQUIRE(m->datasets[i] != NULL);
    for (int64_t i = 0; i < m->n; i++) {
        const ob_imatrix_entry *e = &m->e[i];
        REQUIRE(e->name && e->n_per_row > 0 && e->n_mat > 0 && e->sum2 && e->counts);
        REQUIRE(ob_imatrix_find(m, e->name) == e);
        float *w = ob_malloc((size_t)e->n_per_row * sizeof(float));
        REQUIRE(w);
        for (int64_t k = 0; k < e->n_mat; k++) {
            const double c = e->counts[k];
            const bool got = ob_imatrix_weights(e, k, w);
            REQUIRE(got == (c > 0));
            for (int64_t j = 0; got && j < e->n_per_row; j++)
                REQUIRE(same_value(w[j], (float)(e->sum2[k * e->n_per_row + j] / c)));
        }
        ob_free(w);
    }
}

static void check_same(const ob_imatrix *a, const ob_imatrix *b) {
    REQUIRE(a->n == b->n && a->n_datasets == b->n_datasets);
    REQUIRE(a->chunk_count == b->chunk_count && a->chunk_size == b->chunk_size);
    for (int i = 0; i < a->n_datasets; i++) REQUIRE(strcmp(a->datasets[i], b->datasets[i]) == 0);
    for (int64_t i = 0; i < a->n; i++) {
        const ob_imatrix_entry *x = &a->e[i], *y = ob_imatrix_find(b, x->name);
        REQUIRE(y && y->n_per_row == x->n_per_row && y->n_mat == x->n_mat);
        for (int64_t j = 0; j < x->n_per_row * x->n_mat; j++) REQUIRE(same_value(x->sum2[j], y->sum2[j]));
        for (int64_t j = 0; j < x->n_mat; j++) REQUIRE(same_value(x->counts[j], y->counts[j]));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd_in = -1, fd_out = -1;
    char path[64], path2[64];
    memfd_path(&fd_in, "fuzz_imatrix_in", path, sizeof path);
    REQUIRE(size == 0 || pwrite(fd_in, data, size, 0) == (ssize_t)size);
    ob_imatrix *m = (ob_imatrix *)&fd_in;
    const int rc = ob_imatrix_load(path, &m);
    REQUIRE(rc <= 0);
    if (rc < 0) {
        REQUIRE(m == NULL && ob_last_error()[0] != '\0');
        ob_err_clear();
        return 0;
    }
    REQUIRE(m != NULL);
    check_entries(m);
    memfd_path(&fd_out, "fuzz_imatrix_out", path2, sizeof path2);
    REQUIRE(ob_imatrix_save(m, path2) == 0);
    ob_imatrix *back = NULL;
    REQUIRE(ob_imatrix_load(path2, &back) == 0);
    check_same(m, back);
    ob_imatrix_free(back);
    ob_imatrix_free(m);
    return 0;
}
