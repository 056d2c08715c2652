/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors reader
 * (src/convert/safetensors.c: the header of a checkpoint `1bit convert`
 * reads, outside input).
 *
 * The bytes are the whole file. Checked beyond "no crash": a file the
 * reader accepts lists tensors whose byte ranges lie inside the file, whose
 * element counts match their shapes, and each of which find() returns by
 * name; a rejected one sets a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert/safetensors.h"
#include "core/status.h"
#include "onebit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ob_safetensors *st = NULL;
    const int rc = ob_safetensors_open_memory(data, size, "fuzz.safetensors", &st);
    REQUIRE(rc <= 0);
    if (rc < 0) {
        REQUIRE(st == NULL && ob_last_error()[0] != '\0');
        ob_err_clear();
        return 0;
    }
    const int64_t n = ob_safetensors_n_tensors(st);
    REQUIRE(n >= 0);
    for (int64_t i = 0; i < n; i++) {
        const ob_st_tensor *t = ob_safetensors_tensor_at(st, i);
        REQUIRE(t && t->name && (int)t->dtype >= 0 && t->dtype < OB_ST_DTYPE_COUNT);
        REQUIRE(t->n_dims >= 0 && t->n_dims <= OB_ST_MAX_DIMS);
        int64_t ne = 1;
        for (int d = 0; d < t->n_dims; d++) {
            REQUIRE(t->shape[d] >= 0);
            ne *= t->shape[d];
        }
        REQUIRE(ne == t->n_elements);
        REQUIRE(t->nbytes == 0 || (t->data >= data && t->data + t->nbytes <= data + size));
        REQUIRE(ob_safetensors_find(st, t->name) != NULL);
    }
    ob_safetensors_free(st);
    return 0;
}
