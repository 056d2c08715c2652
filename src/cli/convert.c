/*
 * convert.c - `1bit convert HF_DIR OUT.gguf [--outtype f32|f16|bf16|q8_0]
 * [--name NAME]`: a Hugging Face model folder to GGUF. The work is in
 * src/convert; this file only parses flags and reports.
 */
#include <stdio.h>
#include <string.h>

#include "../convert/convert.h"
#include "../core/log.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: 1bit convert HF_DIR OUT.gguf [--outtype f32|f16|bf16|q8_0] [--name NAME]\n"
               "  HF_DIR holds config.json, model.safetensors (or shards with\n"
               "  model.safetensors.index.json), tokenizer.json and tokenizer_config.json.\n"
               "  Architectures: Llama (also Mistral, SmolLM, TinyLlama), Qwen2, Qwen3.\n"
               "  --outtype  type of the weight matrices (default f16); norms stay f32;\n"
               "             q8_0 keeps matrices whose rows are not a multiple of 32 in f16\n"
               "  --name     general.name (default: the folder's name)\n"
               "  -v         list every tensor as it is written\n");
}

int ob_cmd_convert(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    ob_convert_opts opts;
    ob_convert_opts_init(&opts);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--outtype")) {
            if (i + 1 >= argc) return ob_cli_fail(0, "convert: --outtype needs a value");
            const char *t = argv[++i];
            int ty = ob_type_from_name(t);
            if (ty != OB_TYPE_F32 && ty != OB_TYPE_F16 && ty != OB_TYPE_BF16 && ty != OB_TYPE_Q8_0)
                return ob_cli_fail(0, "convert: --outtype '%s' is not one of f32, f16, bf16, q8_0", t);
            opts.outtype = (ob_type)ty;
        } else if (!strcmp(a, "--name")) {
            if (i + 1 >= argc) return ob_cli_fail(0, "convert: --name needs a value");
            opts.name = argv[++i];
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            if (ob_log_get_level() < OB_LOG_INFO) ob_log_set_level(OB_LOG_INFO);
        } else if (a[0] == '-' && a[1]) {
            return ob_cli_fail(0, "convert: unknown option '%s'", a);
        } else if (!dir) {
            dir = a;
        } else if (!out) {
            out = a;
        } else {
            return ob_cli_fail(0, "convert: unexpected argument '%s'", a);
        }
    }
    if (!dir || !out) {
        usage(stderr);
        return 2;
    }
    int rc = ob_convert_hf(dir, out, &opts);
    if (rc < 0) return ob_cli_fail(rc, "convert");
    printf("wrote %s (%s)\n", out, ob_type_name(opts.outtype));
    return 0;
}
