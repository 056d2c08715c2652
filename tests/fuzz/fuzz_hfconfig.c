/*
 * fuzz_hfconfig.c - libFuzzer target for the Hugging Face config.json parser
 * (src/convert/hf_config.c and the family parsers it calls: `1bit convert`
 * reads that file from a checkpoint the user downloaded, so it is outside
 * input).
 *
 * The bytes are the file's text. Checked beyond "no crash": the parser
 * returns 0 or a negative status with a message, and a config it accepts
 * names its GGUF architecture and has positive layer, width and head counts
 * (the converter sizes tensors from them).
 */
#include <stdint.h>
#include <stdlib.h>

#include "convert/hf_internal.h"
#include "core/status.h"
#include "onebit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ob_hf_config cfg;
    /* a folder that does not exist: no modules.json beside it */
    const int rc = ob_hf_config_parse((const char *)data, size, "/nonexistent-ob-fuzz/config.json", &cfg);
    REQUIRE(rc <= 0);
    if (rc < 0) {
        REQUIRE(ob_last_error()[0] != '\0');
    } else {
        REQUIRE(cfg.gguf_arch && cfg.gguf_arch[0]);
        REQUIRE(cfg.n_layer > 0 && cfg.n_embd > 0 && cfg.n_head > 0);
    }
    ob_err_clear();
    return 0;
}
