/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader.
 *
 * Any bytes go into ob_gguf_open_memory. A file that parses is then walked
 * completely (every value printed, every tensor's first and last byte read,
 * which ASan checks lie inside the input) and written back with the writer;
 * the rewritten image must parse again with the same keys and tensors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/status.h"
#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ob_gguf *g = NULL;
    if (ob_gguf_open_memory(data, size, &g) < 0) {
        if (!ob_last_error()[0]) abort(); /* every failure must say why */
        return 0;
    }
    char buf[512];
    /* A legal but huge general.alignment would make the rewrite below pad
     * with gigabytes of zeros; reading such a file is what matters here. */
    if (ob_gguf_alignment(g) > 65536) {
        ob_gguf_free(g);
        return 0;
    }
    ob_gguf_writer *w = NULL;
    if (ob_gguf_writer_create(&w) < 0) abort();
    for (int64_t i = 0; i < ob_gguf_n_kv(g); i++) {
        const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        ob_gguf_value_to_string(&kv->value, buf, sizeof buf, 16);
        if (ob_gguf_writer_set_value(w, kv->key, &kv->value) < 0) abort();
    }
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        if (t->nbytes) g_sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        if (ob_gguf_find_tensor(g, t->name) != t) abort();
        if (ob_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) < 0) abort();
    }
    void *img = NULL;
    size_t n = 0;
    int rc = ob_gguf_writer_write_memory(w, &img, &n);
    if (rc == 0) {
        ob_gguf *g2 = NULL;
        if (ob_gguf_open_memory(img, n, &g2) < 0) abort();
        if (ob_gguf_n_kv(g2) != ob_gguf_n_kv(g) || ob_gguf_n_tensors(g2) != ob_gguf_n_tensors(g)) abort();
        ob_gguf_free(g2);
        ob_free(img);
    } else if (rc != OB_ERR_INVALID_ARG) {
        abort();
    }
    ob_gguf_writer_free(w);
    ob_gguf_free(g);
    return 0;
}
