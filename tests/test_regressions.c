/*
 * test_regressions.c - every input that once broke a parser of outside
 * input (tests/fuzz/corpus/<target>/regress_* and the named corpus entries
 * below), replayed by the normal test build too, not only by the clang fuzz
 * job: each is refused with a message, or accepted with the values the
 * parser promises.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hf_internal.h"
#include "core/mem.h"
#include "core/status.h"
#include "quant/imatrix.h"
#include "quant/kl_stats.h"
#include "router/router.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

static const char *corpus(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fuzz/corpus/%s", OB_SOURCE_DIR, rel);
    return buf;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[len] = '\0', *n = (size_t)len;
    return b;
}

/* A kld base file: open, then every row; some step must refuse it, with a message. */
static void kl_base_refused(const char *name) {
    ob_kl_base b;
    memset(&b, 0, sizeof b);
    ob_err_clear();
    int rc = ob_kl_base_open(corpus(name), &b);
    if (rc == 0) {
        float *row = calloc(b.n_vocab ? b.n_vocab : 1, sizeof(float));
        const uint64_t rows = (uint64_t)b.n_chunk * (uint64_t)(b.n_ctx > b.first + 1 ? b.n_ctx - 1 - b.first : 0);
        for (uint64_t r = 0; rc == 0 && r < rows; r++) {
            rc = ob_kl_base_read_row(&b, row);
            for (uint32_t i = 0; rc == 0 && i < b.n_vocab; i++) CHECK_MSG(isfinite(row[i]), "%s: row %llu", name, (unsigned long long)r);
        }
        free(row);
        ob_kl_base_close(&b);
    }
    CHECK_MSG(rc < 0, "%s was accepted", name);
    CHECK_MSG(ob_last_error()[0] != '\0', "%s: refused without a message", name);
}

TEST(kld_base_files) {
    kl_base_refused("klbase/regress_huge_header.bin");    /* 2^31 tokens promised by 24 bytes */
    kl_base_refused("klbase/regress_nonfinite_row.bin");  /* a NaN/inf scale */
    kl_base_refused("klbase/regress_token_range.bin");    /* tokens outside [0, n_vocab) */
    /* and a good one reads to its end */
    ob_kl_base b;
    memset(&b, 0, sizeof b);
    CHECK_OK(ob_kl_base_open(corpus("klbase/small.bin"), &b));
    if (b.f) ob_kl_base_close(&b);
}

TEST(imatrix_files) {
    ob_imatrix *m = NULL;
    ob_err_clear();
    CHECK(ob_imatrix_load(corpus("imatrix/regress_type_message.gguf"), &m) < 0);
    CHECK_MSG(ob_last_error()[0] != '\0', "refused without a message");
    ob_imatrix_free(m);
    m = NULL;
    CHECK_OK(ob_imatrix_load(corpus("imatrix/dense.gguf"), &m));
    ob_imatrix_free(m);
}

TEST(router_model_files) {
    ob_router *r = NULL;
    ob_err_clear();
    CHECK_EQ_INT(ob_router_init(&r, corpus("router/regress_model_nan_bias.txt")), OB_ERR_FORMAT);
    CHECK_MSG(ob_last_error()[0] != '\0', "refused without a message");
    ob_router_free(r);
}

/* config.json numbers too large for their integer: no conversion out of range (UBSan in the
 * sanitizer build), the ids left unset or the file refused. */
TEST(hf_config_huge_numbers) {
    static const char *const files[] = {"hfconfig/bert_huge_ids.json", "hfconfig/phi2_huge_rotary.json",
                                        "hfconfig/deepseek_huge_int.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t n = 0;
        char *text = slurp(corpus(files[i]), &n);
        CHECK_MSG(text != NULL, "cannot read %s", files[i]);
        if (!text) continue;
        ob_hf_config cfg;
        memset(&cfg, 0, sizeof cfg);
        int rc = ob_hf_config_parse(text, n, corpus(files[i]), &cfg);
        if (rc == 0) {
            CHECK_MSG(cfg.bos_id >= -1 && cfg.bos_id < ((int64_t)1 << 31), "%s: bos %lld", files[i], (long long)cfg.bos_id);
            if (strstr(files[i], "bert_huge_ids")) CHECK_MSG(cfg.bos_id == -1 && cfg.pad_id == -1, "%s: ids kept", files[i]);
        } else {
            CHECK_MSG(ob_last_error()[0] != '\0', "%s: refused without a message", files[i]);
        }
        free(text);
    }
}

int main(int argc, char **argv) { return test_main(argc, argv); }
