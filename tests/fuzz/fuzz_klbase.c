/*
 * fuzz_klbase.c - libFuzzer target for the base-logits file reader
 * (src/quant/kl_stats.c: `1bit kld --base FILE` reads what an earlier
 * `--save-base` run wrote, possibly on another machine: outside input).
 * The reader takes a path, so the bytes go to a memfd read back through
 * /proc/self/fd/N; then every row the header promises is read.
 *
 * Checked beyond "no crash":
 *   - open returns 0 or a negative status with a message, and leaves the
 *     struct empty (no file, no buffers) when it fails;
 *   - an accepted header is in range (a vocabulary, at least 4 positions, a
 *     first scored position before the last, tokens inside the vocabulary)
 *     and the file holds all its tokens;
 *   - rows read until the first failure, which is OB_ERR_FORMAT with a
 *     message; a row that reads holds finite log-probabilities (a row
 *     whose scale is not finite, or overflows, is refused).
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
#include "quant/kl_stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    if (fd < 0) fd = memfd_create("fuzz_klbase", 0);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 0) == 0);
    REQUIRE(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

    ob_kl_base b;
    const int rc = ob_kl_base_open(path, &b);
    REQUIRE(rc <= 0);
    if (rc < 0) {
        REQUIRE(ob_last_error()[0] != '\0');
        REQUIRE(b.f == NULL && b.tokens == NULL && b.row == NULL);
        ob_err_clear();
        return 0;
    }
    REQUIRE(b.f && b.tokens && b.row);
    REQUIRE(b.n_vocab > 0 && b.n_ctx >= 4 && b.n_chunk > 0 && b.first < b.n_ctx - 1);
    const uint64_t nt = (uint64_t)b.n_chunk * b.n_ctx;
    REQUIRE(24 + 4 * nt <= size);
    for (uint64_t i = 0; i < nt; i++) REQUIRE(b.tokens[i] >= 0 && (uint32_t)b.tokens[i] < b.n_vocab);

    float *logp = ob_malloc((size_t)b.n_vocab * sizeof(float));
    REQUIRE(logp);
    const uint64_t rows = (uint64_t)b.n_chunk * (b.n_ctx - 1 - b.first);
    for (uint64_t r = 0; r < rows; r++) {
        const int rr = ob_kl_base_read_row(&b, logp);
        if (rr < 0) {
            REQUIRE(rr == OB_ERR_FORMAT && ob_last_error()[0] != '\0');
            ob_err_clear();
            break;
        }
        for (uint32_t i = 0; i < b.n_vocab; i++) REQUIRE(isfinite(logp[i]));
    }
    ob_free(logp);
    REQUIRE(ob_kl_base_close(&b) == 0);
    REQUIRE(b.f == NULL && b.tokens == NULL && b.row == NULL);
    return 0;
}
