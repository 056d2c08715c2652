/*
 * serve.c - `1bit serve`: llama-server's command line in front of
 * src/server. Every flag llama-server users (and Lemonade Server) pass is in
 * one table, with what we do about it:
 *
 *   SET     implemented
 *   WARN    accepted with a warning: ignoring it cannot change any answer
 *           (speculative decoding, GPU layer counts, UI switches, ...)
 *   REFUSE  refused with a reason: ignoring it would change answers
 *           (LoRA, RoPE overrides, grammars, embeddings mode, ...)
 *
 * An option in no row is an error, never silently misread: llama-server's
 * flags take values, so skipping an unknown one would eat the next argument.
 * docs/serve.md lists the same table for people.
 *
 * The process: block SIGINT/SIGTERM in every thread, start the server, then
 * wait for a signal (clean shutdown, exit 0) or a failed model load (exit 1).
 */
#define _GNU_SOURCE /* program_invocation_short_name */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <time.h>

#include <jansson.h>

#include "../chat/chat.h"
#include "../core/log.h"
#include "../core/mem.h"
#include "../server/server.h"
#include "cli.h"
#include "onebit.h"
#include "ob_gitstamp.h" /* OB_GIT_COMMIT, OB_BUILD_NUMBER (tools/gitstamp.cmake) */


enum { SET, WARN, REFUSE };
enum { NOVAL, VAL, OPTVAL }; /* OPTVAL: takes the next argument only if it is one of `choices` */

typedef enum opt_id {
    O_NONE,
    O_HELP, O_VERSION, O_MODEL, O_ALIAS, O_HOST, O_PORT, O_CTX, O_KV_SIZE, O_PARALLEL, O_BATCH, O_THREADS, O_NGL, O_DEVICE,
    O_API_KEY, O_API_KEY_FILE, O_TEMPLATE_FILE, O_TEMPLATE, O_TIMEOUT, O_MAX_BODY, O_QUEUE, O_ANY_MODEL, O_CTK, O_CTV,
    O_REASONING, O_REASONING_BUDGET, O_N_PREDICT, O_TEMP, O_TOP_K, O_TOP_P, O_MIN_P, O_REPEAT_PENALTY, O_REPEAT_LAST_N,
    O_PRESENCE, O_FREQUENCY, O_SEED, O_VERBOSE, O_LOG_DISABLE, O_QUIET, O_CONTEXT_SHIFT, O_KEEP, O_MODELS_DIR,
    O_HF_REPO, O_HF_FILE, O_HF_TOKEN, O_TEMPLATE_KWARGS,
    O_SPEC_TYPE, O_DRAFT_MODEL, O_DRAFT_N_MAX, O_DRAFT_N_MIN, O_DRAFT_P_MIN, O_SPEC_NGRAM,
    O_EMBEDDINGS, O_POOLING,
    O_ROUTER, O_ROUTE_POLICY, O_ROUTE_MIN_CONF,
} opt_id;

typedef struct opt {
    const char *names; /* "|"-separated */
    int arity;
    int action;
    opt_id id;
    const char *why;   /* WARN / REFUSE: the reason shown; SET: help text */
} opt;

static const char SPEC[] = "the draft model runs on the target's device, with its context size";
static const char PERF[] = "a performance setting this engine does not have; answers are unaffected";

static const opt g_opts[] = {
    /* implemented */
    {"-h|--help", NOVAL, SET, O_HELP, "this help"},
    {"--version", NOVAL, SET, O_VERSION, "print `version: N (commit)` and exit"},
    {"-m|--model", VAL, SET, O_MODEL, "GGUF file, or a stored name: org/repo[:quant], a file name (docs/store.md)"},
    {"--models-dir", VAL, SET, O_MODELS_DIR, "the model store for -m and -hf (default $OB_MODELS_DIR, ~/.cache/1bit/models)"},
    {"-hf|-hfr|--hf-repo", VAL, SET, O_HF_REPO, "org/repo[:quant]: pull into the store (as `1bit pull`), then serve"},
    {"-hff|--hf-file", VAL, SET, O_HF_FILE, "with -hf: the file in the repository"},
    {"-hft|--hf-token", VAL, SET, O_HF_TOKEN, "token for gated repositories (default $HF_TOKEN)"},
    {"-a|--alias", VAL, SET, O_ALIAS, "model name(s) clients use, comma-separated (default: the file's name)"},
    {"--host", VAL, SET, O_HOST, "address to listen on (default 127.0.0.1)"},
    {"--port", VAL, SET, O_PORT, "port (default 8080; 0 = any free port)"},
    {"-c|--ctx-size", VAL, SET, O_CTX, "context size of EACH sequence in tokens (default: the model's, at most 4096)"},
    {"--kv-size", VAL, SET, O_KV_SIZE, "KV pool in tokens, shared by all slots (default: --parallel x -c)"},
    {"-np|--parallel", VAL, SET, O_PARALLEL, "requests decoded together (default 4)"},
    {"-b|--batch-size", VAL, SET, O_BATCH, "tokens per engine step (default 512 on the CPU, 2048 on a GPU)"},
    {"-t|--threads", VAL, SET, O_THREADS, "CPU threads (default: all cores)"},
    {"-ngl|--gpu-layers|--n-gpu-layers", VAL, SET, O_NGL, "layers on the GPU: 0 = CPU only, N = the last N (the rest on the CPU), all/-1 = every layer"},
    {"-dev|--device", VAL, SET, O_DEVICE, "cpu, none, auto, cuda, cuda:N or CUDAN (default auto)"},
    {"--api-key", VAL, SET, O_API_KEY, "require this key (comma-separated list for several)"},
    {"--api-key-file", VAL, SET, O_API_KEY_FILE, "file with one accepted key per line"},
    {"--chat-template-file", VAL, SET, O_TEMPLATE_FILE, "Jinja chat template to use instead of the model's"},
    {"--chat-template", VAL, SET, O_TEMPLATE, "built-in template name (only chatml) or a template's text"},
    {"--chat-template-kwargs", VAL, SET, O_TEMPLATE_KWARGS, "JSON object of template variables for every chat request"},
    {"-to|--timeout", VAL, SET, O_TIMEOUT, "seconds an idle connection is kept (default 600)"},
    {"--max-body", VAL, SET, O_MAX_BODY, "largest request body in bytes (default 8388608)"},
    {"--queue", VAL, SET, O_QUEUE, "requests that may wait for a slot before 503 (default 128)"},
    {"--any-model", NOVAL, SET, O_ANY_MODEL, "accept any \"model\" name in requests (as llama-server does)"},
    {"-ctk|--cache-type-k", VAL, SET, O_CTK, "KV cache type: f16 (default), f32 or q8_0 (K and V must match)"},
    {"-ctv|--cache-type-v", VAL, SET, O_CTV, "KV cache type for V: must equal -ctk"},
    {"--reasoning-format", VAL, SET, O_REASONING, "auto/deepseek (default): <think> text goes to reasoning_content; none: kept in content"},
    {"--reasoning-budget", VAL, SET, O_REASONING_BUDGET, "-1: unlimited thinking; 0: no thinking (enable_thinking=false)"},
    {"-n|--n-predict|--predict", VAL, SET, O_N_PREDICT, "default max tokens per answer (-1 = until end of text or context)"},
    {"--temp|--temperature", VAL, SET, O_TEMP, "default temperature (0.8)"},
    {"--top-k", VAL, SET, O_TOP_K, "default top-k (40)"},
    {"--top-p", VAL, SET, O_TOP_P, "default top-p (0.95)"},
    {"--min-p", VAL, SET, O_MIN_P, "default min-p (0.05)"},
    {"--repeat-penalty", VAL, SET, O_REPEAT_PENALTY, "default repeat penalty (1.0 = off)"},
    {"--repeat-last-n", VAL, SET, O_REPEAT_LAST_N, "default penalty window (64)"},
    {"--presence-penalty", VAL, SET, O_PRESENCE, "default presence penalty (0)"},
    {"--frequency-penalty", VAL, SET, O_FREQUENCY, "default frequency penalty (0)"},
    {"-s|--seed", VAL, SET, O_SEED, "default seed (-1 = random per request)"},
    {"-v|--verbose|--log-verbose", NOVAL, SET, O_VERBOSE, "debug logging"},
    {"--log-disable", NOVAL, SET, O_LOG_DISABLE, "errors only"},
    {"--quiet", NOVAL, SET, O_QUIET, "no per-request log lines"},
    {"--jinja", NOVAL, SET, O_NONE, "chat templates always run on the Jinja interpreter (accepted for llama-server)"},
    {"--metrics", NOVAL, SET, O_NONE, "/metrics is always on (accepted for llama-server)"},
    {"--no-context-shift", NOVAL, SET, O_NONE, "the default: generation stops at the context size"},
    {"--cont-batching|-cb", NOVAL, SET, O_NONE, "always on"},
    {"--no-ui|--no-webui", NOVAL, SET, O_NONE, "there is no web UI"},
    {"--slots", NOVAL, SET, O_NONE, "/slots is always on"},
    {"--embeddings|--embedding", NOVAL, SET, O_EMBEDDINGS, "also serve POST /v1/embeddings (llama, qwen2, qwen3, bert, modern-bert)"},
    {"--pooling", VAL, SET, O_POOLING, "embeddings pooling: mean, cls or last (default: the model's, else last)"},
    {"--router", NOVAL, SET, O_ROUTER, "route chat requests by class (code/prose/short/long) through the policy (docs/router.md)"},
    {"--route-policy", VAL, SET, O_ROUTE_POLICY, "route policy JSON: class -> target (drafter, draft length); implies --router"},
    {"--route-min-conf", VAL, SET, O_ROUTE_MIN_CONF, "below this router confidence the default target is used (default: the policy's, else 0)"},
    /* accepted with a warning: cannot change an answer */
    {"--context-shift", NOVAL, WARN, O_CONTEXT_SHIFT,
     "context shift is not implemented: an answer that reaches the context size ends with finish_reason \"length\""},
    {"--keep", VAL, WARN, O_KEEP, "only used by context shift, which is not implemented"},
    {"--no-jinja", NOVAL, WARN, O_NONE, "chat templates always run on the Jinja interpreter"},
    {"-md|--model-draft|--spec-draft-model", VAL, SET, O_DRAFT_MODEL,
     "speculative decoding with this draft model (same vocabulary; docs/engine.md)"},
    {"--spec-draft-n-max|--draft-max|--draft|--draft-n", VAL, SET, O_DRAFT_N_MAX, "most tokens drafted per step (default 8)"},
    {"--spec-draft-n-min|--draft-min|--draft-n-min", VAL, SET, O_DRAFT_N_MIN, "shorter drafts are not verified (default 0)"},
    {"--spec-draft-p-min|--draft-p-min", VAL, SET, O_DRAFT_P_MIN, "draft model: stop below this confidence (default 0.75)"},
    {"--spec-type", VAL, SET, O_SPEC_TYPE, "none, ngram (prompt lookup) or draft (with -md)"},
    {"--spec-ngram-size", VAL, SET, O_SPEC_NGRAM, "ngram: longest suffix matched (default 3)"},
    {"-ngld|--gpu-layers-draft|--n-gpu-layers-draft", VAL, WARN, O_NONE, SPEC},
    {"-devd|--device-draft", VAL, WARN, O_NONE, SPEC},
    {"-cd|--ctx-size-draft", VAL, WARN, O_NONE, SPEC},
    {"-fa|--flash-attn", OPTVAL, WARN, O_NONE, PERF},
    {"-ub|--ubatch-size", VAL, WARN, O_NONE, PERF},
    {"-tb|--threads-batch", VAL, WARN, O_NONE, PERF},
    {"--threads-http", VAL, WARN, O_NONE, "one thread serves each connection"},
    {"--mlock", NOVAL, WARN, O_NONE, PERF},
    {"--no-mmap|--mmap", NOVAL, WARN, O_NONE, "weights are always memory-mapped"},
    {"--load-mode", VAL, WARN, O_NONE, "weights are always memory-mapped"},
    {"-dio|--direct-io|-ndio|--no-direct-io", NOVAL, WARN, O_NONE, PERF},
    {"--numa", VAL, WARN, O_NONE, PERF},
    {"-sm|--split-mode", VAL, WARN, O_NONE, "one device holds the whole model"},
    {"-ts|--tensor-split", VAL, WARN, O_NONE, "one device holds the whole model"},
    {"-mg|--main-gpu", VAL, WARN, O_NONE, "use --device cuda:N"},
    {"--no-cont-batching|-nocb", NOVAL, WARN, O_NONE, "continuous batching is always on"},
    {"--no-slots|--props", NOVAL, WARN, O_NONE, "not configurable here"},
    {"--slot-save-path", VAL, WARN, O_NONE, "slot save/restore is not supported (POST /slots answers 501)"},
    {"--cache-reuse", VAL, WARN, O_NONE, PERF},
    {"-nkvo|--no-kv-offload|-kvu|--kv-unified|--no-kv-unified|--no-warmup|--warmup|--swa-full", NOVAL, WARN, O_NONE, PERF},
    {"--log-file|--log-prefix-file", VAL, WARN, O_NONE, "logs go to stderr"},
    {"--log-colors", OPTVAL, WARN, O_NONE, "logs are plain"},
    {"--log-prefix|--log-timestamps", NOVAL, WARN, O_NONE, "logs are plain"},
    {"-lv|--verbosity|--log-verbosity", VAL, WARN, O_NONE, "use -v or --log-disable"},
    {"--path", VAL, WARN, O_NONE, "there is no web UI to serve files for"},
    {"--no-mmproj|--no-mmproj-offload|--mmproj-offload|--no-mmproj-auto|--mmproj-auto", NOVAL, WARN, O_NONE,
     "no multimodal projector is loaded"},
    /* refused: ignoring them would change answers */
    {"--reranking|--rerank", NOVAL, REFUSE, O_NONE, "reranking models are not supported yet"},
    {"-mu|--model-url", VAL, REFUSE, O_NONE, "use -hf org/repo[:quant] or download the GGUF file and pass -m FILE"},
    {"--mmproj|-mm|--mmproj-url|-mmu", VAL, REFUSE, O_NONE, "multimodal projectors are not supported yet"},
    {"--lora|--lora-scaled|--control-vector|--control-vector-scaled", VAL, REFUSE, O_NONE, "adapters are not supported yet"},
    {"--rope-scaling|--rope-scale|--rope-freq-base|--rope-freq-scale|--yarn-orig-ctx|--yarn-ext-factor|"
     "--yarn-attn-factor|--yarn-beta-slow|--yarn-beta-fast", VAL, REFUSE, O_NONE,
     "RoPE overrides are not supported; the model's own RoPE settings are used"},
    {"--grammar|--grammar-file|--json-schema|-j|--json-schema-file", VAL, REFUSE, O_NONE,
     "constrained decoding is not supported yet"},
    {"--override-kv", VAL, REFUSE, O_NONE, "metadata overrides are not supported"},
    {"--api-prefix", VAL, REFUSE, O_NONE, "routes are fixed at /v1/..."},
    {"--ssl-key-file|--ssl-cert-file", VAL, REFUSE, O_NONE, "TLS is not built in; put a reverse proxy in front"},
};

static bool name_is(const char *names, const char *a) {
    size_t n = strlen(a);
    for (const char *p = names; p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, a, n) == 0) return true;
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

static const opt *find_opt(const char *a) {
    for (size_t i = 0; i < sizeof g_opts / sizeof g_opts[0]; i++)
        if (name_is(g_opts[i].names, a)) return &g_opts[i];
    return NULL;
}

static void usage(void) {
    printf("usage: 1bit serve -m MODEL.gguf [options]   (llama-server's flags)\n\nimplemented:\n");
    for (size_t i = 0; i < sizeof g_opts / sizeof g_opts[0]; i++) {
        const opt *o = &g_opts[i];
        if (o->action != SET) continue;
        char names[96];
        snprintf(names, sizeof names, "%s%s", o->names, o->arity == VAL ? " X" : "");
        for (char *p = names; *p; p++)
            if (*p == '|') *p = ',';
        printf("  %-34s %s\n", names, o->why);
    }
    printf("\naccepted with a warning (cannot change answers):\n ");
    for (size_t i = 0; i < sizeof g_opts / sizeof g_opts[0]; i++)
        if (g_opts[i].action == WARN) printf(" %s", g_opts[i].names);
    printf("\n\nrefused (they would change answers):\n ");
    for (size_t i = 0; i < sizeof g_opts / sizeof g_opts[0]; i++)
        if (g_opts[i].action == REFUSE) printf(" %s", g_opts[i].names);
    printf("\n\nEndpoints, request fields and every flag: docs/serve.md\n");
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return ob_cli_fail(0, "serve: %s needs an integer between %ld and %ld, got '%s'", flag, lo, hi, v);
    *out = x;
    return 0;
}

static int parse_float(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi))
        return ob_cli_fail(0, "serve: %s needs a number between %g and %g, got '%s'", flag, lo, hi, v);
    *out = x;
    return 0;
}

static char *read_text_file(const char *path, size_t *len_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = ob_malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (cap - n - 1 == 0) {
            char *b2 = ob_realloc(buf, cap * 2);
            if (!b2) {
                ob_free(buf);
                buf = NULL;
                break;
            }
            buf = b2;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len_out) *len_out = n;
    return buf;
}

/* llama-server device names (CUDA0, none) -> ob_model_params.device. */
static const char *map_device(const char *v, char *buf, size_t size) {
    char first[48];
    snprintf(first, sizeof first, "%s", v);
    char *comma = strchr(first, ',');
    if (comma) {
        *comma = '\0';
        fprintf(stderr, "1bit serve: warning: --device %s: one device holds the whole model; using %s\n", v, first);
    }
    if (!strcmp(first, "none") || !strcasecmp(first, "cpu")) return "cpu";
    if (!strcmp(first, "auto") || !strcmp(first, "cuda") || !strncmp(first, "cuda:", 5)) {
        snprintf(buf, size, "%s", first);
        return buf;
    }
    if (!strncasecmp(first, "cuda", 4)) {
        snprintf(buf, size, "cuda:%s", first + 4);
        return buf;
    }
    fprintf(stderr, "1bit serve: warning: --device %s: only CUDA devices are supported; using auto\n", first);
    return "auto";
}

/* Keys: comma-separated on the command line, one per line in a file. */
static int add_keys(const char *list, char sep, char ***keys, int *n) {
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, sep);
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (len) {
            char **nk = ob_realloc(*keys, (size_t)(*n + 1) * sizeof(char *));
            if (!nk) return ob_cli_fail(OB_ERR_OOM, "serve");
            *keys = nk;
            if (!((*keys)[(*n)] = ob_strndup(p, len))) return ob_cli_fail(OB_ERR_OOM, "serve");
            (*n)++;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

int ob_cmd_serve(int argc, char **argv) {
    ob_server_params p;
    ob_server_default_params(&p);
    char **keys = NULL;
    int n_keys = 0, ret = 0;
    char *template_text = NULL;
    char device_buf[64];
    const char *device = NULL, *ctk = NULL, *ctv = NULL;
    const char *models_dir = NULL, *hf_repo = NULL, *hf_file = NULL, *hf_token = NULL, *template_kwargs = NULL;
    bool no_thinking = false;
    char *kwargs_buf = NULL;
    char model_file[4096], hf_spec[1024];
    long ngl = -1, kv_size = 0;
    bool log_set = false;

    for (int i = 0; i < argc && ret == 0; i++) {
        char flag[64];
        const char *a = argv[i], *v = NULL;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof flag) { /* --flag=value */
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - a), a);
            a = flag;
            v = eq + 1;
        }
        const opt *o = find_opt(a);
        if (!o) {
            ret = ob_cli_fail(0, "serve: unknown option '%s' (see `1bit serve --help`; if llama-server has it, please report it)", a);
            break;
        }
        if (o->arity == NOVAL && v) {
            ret = ob_cli_fail(0, "serve: %s takes no value", a);
            break;
        }
        if (o->arity == VAL && !v) {
            if (i + 1 >= argc) {
                ret = ob_cli_fail(0, "serve: %s needs a value", a);
                break;
            }
            v = argv[++i];
        }
        if (o->arity == OPTVAL && !v && i + 1 < argc &&
            (!strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off") || !strcmp(argv[i + 1], "auto") ||
             !strcmp(argv[i + 1], "always") || !strcmp(argv[i + 1], "never")))
            v = argv[++i];
        if (o->action == REFUSE) {
            ret = ob_cli_fail(0, "serve: %s is not supported: %s", a, o->why);
            break;
        }
        if (o->action == WARN) {
            if (o->id != O_KEEP || strcmp(v, "0") != 0) fprintf(stderr, "1bit serve: warning: %s ignored: %s\n", a, o->why);
            continue;
        }
        long x = 0;
        double d = 0;
        switch (o->id) {
        case O_HELP: usage(); goto out;
        case O_VERSION:
            printf("version: %d (%s)\nbuilt with %s for %s\n", OB_BUILD_NUMBER, OB_GIT_COMMIT,
#ifdef __clang__
                   "clang " __clang_version__,
#else
                   "gcc " __VERSION__,
#endif
#if defined(__x86_64__)
                   "x86_64-linux-gnu"
#elif defined(__aarch64__)
                   "aarch64-linux-gnu"
#else
                   "linux"
#endif
            );
            goto out;
        case O_MODEL: p.model_path = v; break;
        case O_MODELS_DIR: models_dir = v; break;
        case O_HF_REPO: hf_repo = v; break;
        case O_HF_FILE: hf_file = v; break;
        case O_HF_TOKEN: hf_token = v; break;
        case O_ALIAS: p.alias = v; break;
        case O_HOST: p.host = v; break;
        case O_PORT: if ((ret = parse_int(a, v, 0, 65535, &x)) == 0) p.port = (int)x; break;
        case O_CTX: if ((ret = parse_int(a, v, 0, 1 << 24, &x)) == 0) p.engine.n_ctx = (int32_t)x; break;
        case O_KV_SIZE:
            if ((ret = parse_int(a, v, 0, 1 << 30, &x)) == 0) kv_size = x;
            break;
        case O_PARALLEL:
            if ((ret = parse_int(a, v, -1, 1024, &x)) == 0) p.engine.n_parallel = x <= 0 ? 4 : (int32_t)x; /* -1: auto */
            break;
        case O_BATCH: if ((ret = parse_int(a, v, 1, 1 << 20, &x)) == 0) p.engine.n_batch = (int32_t)x; break;
        case O_THREADS: if ((ret = parse_int(a, v, -1, 4096, &x)) == 0) p.engine.n_threads = (int32_t)x; break;
        case O_NGL:
            if (!strcmp(v, "all") || !strcmp(v, "auto")) ngl = 999;
            else if ((ret = parse_int(a, v, -1, 1 << 20, &x)) == 0) ngl = x < 0 ? 999 : x;
            break;
        case O_DEVICE: device = map_device(v, device_buf, sizeof device_buf); break;
        case O_API_KEY: ret = add_keys(v, ',', &keys, &n_keys); break;
        case O_API_KEY_FILE: {
            char *text = read_text_file(v, NULL);
            if (!text) {
                ret = ob_cli_fail(0, "serve: cannot read --api-key-file '%s': %s", v, strerror(errno));
                break;
            }
            int before = n_keys;
            ret = add_keys(text, '\n', &keys, &n_keys);
            ob_free(text);
            if (ret == 0 && n_keys == before) ret = ob_cli_fail(0, "serve: --api-key-file '%s' holds no key", v);
            break;
        }
        case O_TEMPLATE_FILE:
            ob_free(template_text);
            if (!(template_text = read_text_file(v, NULL)))
                ret = ob_cli_fail(0, "serve: cannot read --chat-template-file '%s': %s", v, strerror(errno));
            break;
        case O_TEMPLATE:
            ob_free(template_text);
            if (!strcmp(v, "chatml")) template_text = ob_strdup(ob_chat_template_chatml());
            else if (strstr(v, "{%") || strstr(v, "{{")) template_text = ob_strdup(v);
            else ret = ob_cli_fail(0, "serve: --chat-template %s: the only built-in template is chatml (or pass a template's text, or --chat-template-file)", v);
            break;
        case O_TIMEOUT: if ((ret = parse_int(a, v, 1, 1 << 24, &x)) == 0) p.timeout_s = (int)x; break;
        case O_MAX_BODY: if ((ret = parse_int(a, v, 1024, (long)1 << 40, &x)) == 0) p.max_body = (size_t)x; break;
        case O_QUEUE: if ((ret = parse_int(a, v, 1, 1 << 20, &x)) == 0) p.engine.queue_max = (int32_t)x; break;
        case O_ANY_MODEL: p.any_model = true; break;
        case O_CTK: ctk = v; break;
        case O_CTV: ctv = v; break;
        case O_REASONING:
            if (!strcmp(v, "none")) p.defaults.reasoning = 0;
            else if (!strcmp(v, "auto") || !strcmp(v, "deepseek") || !strcmp(v, "deepseek-legacy")) p.defaults.reasoning = 1;
            else ret = ob_cli_fail(0, "serve: --reasoning-format must be none, auto or deepseek");
            break;
        case O_REASONING_BUDGET:
            /* llama-server turns thinking off through the template, as we do; a budget in between
             * would need the engine to cut the thinking short, which it cannot yet */
            if (!strcmp(v, "0")) no_thinking = true;
            else if (strcmp(v, "-1") != 0)
                ret = ob_cli_fail(0, "serve: --reasoning-budget %s: only -1 (unlimited) and 0 (no thinking) are supported", v);
            break;
        case O_TEMPLATE_KWARGS: template_kwargs = v; break;
        case O_N_PREDICT: if ((ret = parse_int(a, v, -2, 1 << 30, &x)) == 0) p.defaults.max_tokens = x > 0 ? (int32_t)x : -1; break;
        case O_TEMP: if ((ret = parse_float(a, v, 0, 1e6, &d)) == 0) p.defaults.sampling.temperature = (float)d; break;
        case O_TOP_K: if ((ret = parse_int(a, v, -1, 1 << 30, &x)) == 0) p.defaults.sampling.top_k = (int32_t)x; break;
        case O_TOP_P: if ((ret = parse_float(a, v, 0, 1, &d)) == 0) p.defaults.sampling.top_p = (float)d; break;
        case O_MIN_P: if ((ret = parse_float(a, v, 0, 1, &d)) == 0) p.defaults.sampling.min_p = (float)d; break;
        case O_REPEAT_PENALTY: if ((ret = parse_float(a, v, 0, 100, &d)) == 0) p.defaults.sampling.repeat_penalty = (float)d; break;
        case O_REPEAT_LAST_N: if ((ret = parse_int(a, v, -1, 1 << 30, &x)) == 0) p.defaults.sampling.repeat_last_n = (int32_t)x; break;
        case O_PRESENCE: if ((ret = parse_float(a, v, -2, 2, &d)) == 0) p.defaults.sampling.presence_penalty = (float)d; break;
        case O_FREQUENCY: if ((ret = parse_float(a, v, -2, 2, &d)) == 0) p.defaults.sampling.frequency_penalty = (float)d; break;
        case O_SEED:
            if ((ret = parse_int(a, v, -1, 0x7fffffffL, &x)) == 0 && x >= 0) {
                /* a fixed seed for every request that does not bring its own */
                fprintf(stderr, "1bit serve: warning: --seed %ld: requests without a seed get this one (and differ per choice)\n", x);
                p.defaults.sampling.seed = (uint64_t)x;
                p.defaults.fixed_seed = true;
            }
            break;
        case O_VERBOSE: ob_log_set_level(OB_LOG_DEBUG), log_set = true; break;
        case O_LOG_DISABLE: ob_log_set_level(OB_LOG_ERROR), log_set = true; break;
        case O_QUIET: p.quiet = true; break;
        case O_DRAFT_MODEL: p.engine.spec.draft_path = v; break;
        case O_DRAFT_N_MAX: if ((ret = parse_int(a, v, 0, 64, &x)) == 0) p.engine.spec.n_max = (int32_t)x; break;
        case O_DRAFT_N_MIN: if ((ret = parse_int(a, v, 0, 64, &x)) == 0) p.engine.spec.n_min = (int32_t)x; break;
        case O_DRAFT_P_MIN: if ((ret = parse_float(a, v, 0, 1, &d)) == 0) p.engine.spec.p_min = (float)d; break;
        case O_SPEC_NGRAM: if ((ret = parse_int(a, v, 1, 64, &x)) == 0) p.engine.spec.ngram_max = (int32_t)x; break;
        case O_EMBEDDINGS: p.embeddings = true; break;
        case O_ROUTER: p.router = true; break;
        case O_ROUTE_POLICY: p.route_policy = v, p.router = true; break;
        case O_ROUTE_MIN_CONF: if ((ret = parse_float(a, v, 0, 1, &d)) == 0) p.route_min_conf = (float)d; break;
        case O_POOLING:
            if ((p.pooling = ob_srv_pooling_parse(v)) < 0 || p.pooling == OB_SRV_POOL_RANK)
                ret = ob_cli_fail(0, "serve: --pooling must be none, mean, cls or last");
            break;
        case O_SPEC_TYPE:
            if (!strcmp(v, "none")) p.engine.spec.type = OB_SPEC_NONE;
            else if (!strcmp(v, "ngram") || !strcmp(v, "ngram-simple")) p.engine.spec.type = OB_SPEC_NGRAM;
            else if (!strcmp(v, "draft")) p.engine.spec.type = OB_SPEC_DRAFT;
            else ret = ob_cli_fail(0, "serve: --spec-type must be none, ngram or draft");
            break;
        default: break;
        }
    }
    if (ret) goto out;
    if (template_text) { /* a template that does not parse fails now, with its line, not on every request */
        ob_chat_template *t = NULL;
        int trc = ob_chat_template_parse(template_text, strlen(template_text), &t);
        ob_chat_template_free(t);
        if (trc < 0) {
            ret = ob_cli_fail(trc, "serve: the chat template");
            goto out;
        }
    }
    if (hf_file && !hf_repo) {
        ret = ob_cli_fail(0, "serve: --hf-file needs -hf org/repo");
        goto out;
    }
    if (hf_repo && p.model_path) {
        ret = ob_cli_fail(0, "serve: give -m or -hf, not both");
        goto out;
    }
    if (hf_repo) { /* llama-server's -hf: download into the store (or find it there), then serve it */
        if (hf_file && strchr(hf_repo, ':')) {
            ret = ob_cli_fail(0, "serve: -hf %s already names a file or quant; drop --hf-file", hf_repo);
            goto out;
        }
        snprintf(hf_spec, sizeof hf_spec, "%s%s%s", hf_repo, hf_file ? ":" : "", hf_file ? hf_file : "");
        ob_pull_params pp = ob_pull_default_params();
        pp.models_dir = models_dir;
        pp.token = hf_token;
        fprintf(stderr, "1bit serve: pulling %s into the model store\n", hf_spec);
        int prc = ob_pull(hf_spec, &pp, model_file, sizeof model_file);
        if (prc < 0) {
            ret = ob_cli_fail(prc, "serve: -hf %s", hf_spec);
            goto out;
        }
        p.model_path = model_file;
        if (!p.alias) p.alias = hf_spec; /* clients name it the way it was asked for */
    } else if (p.model_path) { /* a path, or a name in the store */
        int rrc = ob_store_resolve(models_dir, p.model_path, model_file, sizeof model_file);
        if (rrc < 0) {
            ret = ob_cli_fail(rrc, "serve");
            goto out;
        }
        if (strcmp(model_file, p.model_path) != 0 && !p.alias) p.alias = p.model_path;
        p.model_path = model_file;
    }
    if (!p.model_path) {
        ret = ob_cli_fail(0, "serve: no model: pass -m MODEL.gguf (a path or a stored name) or -hf org/repo[:quant]");
        goto out;
    }
    if (p.engine.spec.draft_path) { /* -md: speculative decoding with a draft model */
        static char draft_file[4096];
        int drc = ob_store_resolve(models_dir, p.engine.spec.draft_path, draft_file, sizeof draft_file);
        if (drc < 0) {
            ret = ob_cli_fail(drc, "serve: -md");
            goto out;
        }
        p.engine.spec.draft_path = draft_file;
        if (p.engine.spec.type == OB_SPEC_NONE) p.engine.spec.type = OB_SPEC_DRAFT;
    }
    if (p.engine.spec.type == OB_SPEC_DRAFT && !p.engine.spec.draft_path) {
        ret = ob_cli_fail(0, "serve: --spec-type draft needs -md DRAFT.gguf");
        goto out;
    }
    if (ctk || ctv) {
        const char *t = ctk ? ctk : ctv;
        if (ctk && ctv && strcmp(ctk, ctv) != 0) {
            ret = ob_cli_fail(0, "serve: -ctk %s and -ctv %s differ; the KV cache has one type for both", ctk, ctv);
            goto out;
        }
        if (!strcmp(t, "f16")) p.engine.kv_type = OB_KV_F16;
        else if (!strcmp(t, "f32")) p.engine.kv_type = OB_KV_F32;
        else if (!strcmp(t, "q8_0")) p.engine.kv_type = OB_KV_Q8_0;
        else {
            ret = ob_cli_fail(0, "serve: KV cache type '%s' is not supported (f16, f32, q8_0)", t);
            goto out;
        }
    }
    if (kv_size > 0) { /* the pool in tokens, rounded up to whole pages */
        int32_t bs = p.engine.kv_block_size > 0 ? p.engine.kv_block_size : 32;
        p.engine.kv_blocks = (kv_size + bs - 1) / bs;
    }
    if (device) p.device = device;
    else if (ngl == 0) p.device = "cpu";
    if (ngl > 0 && ngl < 999) p.n_gpu_layers = (int)ngl; /* the last ngl layers on the GPU, the rest on the CPU */
    /* Run under the name llama-server (make install's link), answer like it:
     * any "model" in a request is this model. Lemonade sends its own names. */
    if (!strcmp(program_invocation_short_name, "llama-server")) p.any_model = true;
    /* llama-server reads a key from the environment too */
    if (n_keys == 0 && getenv("LLAMA_API_KEY") && *getenv("LLAMA_API_KEY") &&
        (ret = add_keys(getenv("LLAMA_API_KEY"), ',', &keys, &n_keys)) != 0)
        goto out;
    if (no_thinking) { /* --reasoning-budget 0: enable_thinking=false unless the kwargs say otherwise */
        json_error_t jerr;
        json_t *kw = template_kwargs ? json_loads(template_kwargs, 0, &jerr) : json_object();
        if (!json_is_object(kw)) {
            json_decref(kw);
            ret = ob_cli_fail(0, "serve: --chat-template-kwargs must be a JSON object");
            goto out;
        }
        if (!json_object_get(kw, "enable_thinking")) json_object_set_new(kw, "enable_thinking", json_false());
        kwargs_buf = json_dumps(kw, JSON_COMPACT);
        json_decref(kw);
        template_kwargs = kwargs_buf;
    }
    p.defaults.template_kwargs = template_kwargs;
    p.chat_template = template_text;
    p.api_keys = (const char *const *)keys;
    p.n_api_keys = n_keys;
    if (!log_set && !getenv("OB_LOG")) ob_log_set_level(OB_LOG_INFO); /* a server logs its requests by default */

    /* Signals: blocked here, before any thread exists, so every thread
     * inherits the mask and only sigtimedwait below receives them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    ob_server *srv = NULL;
    int rc = ob_server_start(&p, &srv);
    if (rc < 0) {
        ret = ob_cli_fail(rc, "serve");
        goto out;
    }
    const char *host = p.host ? p.host : "127.0.0.1";
    bool v6 = strchr(host, ':') != NULL;
    fprintf(stderr, "1bit serve: listening on http://%s%s%s:%d (loading %s)\n", v6 ? "[" : "", host, v6 ? "]" : "",
            ob_server_port(srv), p.model_path);
    fflush(stderr);
    bool ready = false;
    for (;;) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            fprintf(stderr, "1bit serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
            break;
        }
        if (!ready) {
            rc = ob_server_wait_ready(srv, 0);
            if (rc < 0) {
                ret = ob_cli_fail(rc, "serve: cannot load the model");
                break;
            }
            if (rc == 0) {
                ready = true;
                fprintf(stderr, "1bit serve: model ready\n");
                fflush(stderr);
            }
        }
    }
    ob_server_stop(srv);
out:
    for (int i = 0; i < n_keys; i++) ob_free(keys[i]);
    ob_free(keys);
    ob_free(template_text);
    free(kwargs_buf); /* jansson's */
    return ret;
}
