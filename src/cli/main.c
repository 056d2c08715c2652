/*
 * main.c - `1bit`: dispatch to a subcommand. Parsing of each subcommand's
 * flags lives with the subcommand; this file only knows their names.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/cpu.h"
#include "cli.h"
#include "onebit.h"

typedef struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} subcommand;

static int cmd_version(int argc, char **argv);

static const subcommand g_cmds[] = {
    {"info", ob_cmd_info, "metadata, hparams, tokenizer and tensor table of a GGUF file"},
    {"dump", ob_cmd_dump, "write one tensor, dequantized, as float32 (or text)"},
    {"run", ob_cmd_run, "one completion on the terminal (streamed), with speed"},
    {"chat", ob_cmd_chat, "a conversation on the terminal with the model's chat template"},
    {"eval", ob_cmd_eval, "logits of every position for given ids or a prompt (for comparisons)"},
    {"convert", ob_cmd_convert, "Hugging Face folder (safetensors, config, tokenizer) -> GGUF"},
    {"tokenize", ob_cmd_tokenize, "text -> token ids (and back with --decode); --bench for MB/s"},
    {"template", ob_cmd_template, "render a conversation (JSON on stdin) with a chat template"},
    {"pull", ob_cmd_pull, "download a GGUF from Hugging Face into the model store"},
    {"list", ob_cmd_list, "the models in the store (names -m accepts) and their sizes"},
    {"models", ob_cmd_models, "architectures: verified (against what, how closely), mapped or missing"},
    {"serve", ob_cmd_serve, "OpenAI-compatible HTTP server (llama-server's flags; docs/serve.md)"},
    {"bench", ob_cmd_bench, "prompt and decode speed like llama-bench; --make-model, --membw"},
    {"route", ob_cmd_route, "classify a chat request: code, prose, short or long (docs/router.md)"},
    {"quantize", ob_cmd_quantize, "GGUF -> smaller type or mix (Q4_K_M, ...); --imatrix, --hadamard"},
    {"perplexity", ob_cmd_perplexity, "perplexity of a text, chunked as llama.cpp does"},
    {"kld", ob_cmd_kld, "KL divergence of a quantized model against saved base logits"},
    {"imatrix", ob_cmd_imatrix, "importance matrix from activations on a text (llama.cpp GGUF layout)"},
    {"version", cmd_version, "version, commit and CPU features"},
};

int ob_cli_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("1bit: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (status < 0 && ob_last_error()[0]) fprintf(stderr, ": %s", ob_last_error());
    fputc('\n', stderr);
    return 1;
}

static int cmd_version(int argc, char **argv) {
    (void)argc;
    (void)argv;
    char feats[256];
    ob_cpu_features_string(feats, sizeof feats);
    ob_cpu_tier tier;
    int rc = ob_cpu_tier_select(&tier);
    printf("1bit %s\n", ob_version_string());
    printf("cpu: %s (%d threads)\n", ob_cpu_get_features()->brand, ob_cpu_get_features()->n_cpus);
    printf("cpu features: %s\n", feats);
    if (rc < 0) return ob_cli_fail(rc, "OB_CPU");
    printf("cpu tier: %s\n", ob_cpu_tier_name(tier));
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: 1bit <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        fprintf(f, "  %-10s %s\n", g_cmds[i].name, g_cmds[i].help);
    fprintf(f, "\n'1bit <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv) {
    /* Installed as `llama-server` too (make install): that name is `1bit
     * serve`, so programs that run llama-server (Lemonade) run us. */
    const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : argv[0];
    if (base && !strcmp(base, "llama-server")) return ob_cmd_serve(argc - 1, argv + 1);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "-v")) return cmd_version(0, NULL);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(name, g_cmds[i].name)) return g_cmds[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "1bit: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
