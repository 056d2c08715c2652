/*
 * eval.c - `1bit eval`: run the model over exactly the given tokens and
 * write the logits of every position - the way to compare this engine with
 * any other implementation.
 *
 *   1bit eval -m MODEL --ids 1,403,407 [--logits-out FILE] [--top 5]
 *   1bit eval -m MODEL --prompt "text"   (tokenized, BOS as the model asks)
 *
 * --logits-out writes float32 [n_tokens][n_vocab], row-major, little-endian.
 * The top tokens of each position go to stdout as "pos id:logit ...".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "cli.h"
#include "onebit.h"

static int parse_ids(const char *s, ob_token **out, int32_t *n) {
    int32_t cap = 16, cnt = 0;
    ob_token *ids = ob_malloc((size_t)cap * sizeof(ob_token));
    if (!ids) return -1;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            ob_free(ids);
            return -1;
        }
        if (cnt == cap) {
            cap *= 2;
            ob_token *n2 = ob_realloc(ids, (size_t)cap * sizeof(ob_token));
            if (!n2) {
                ob_free(ids);
                return -1;
            }
            ids = n2;
        }
        ids[cnt++] = (ob_token)v;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    *out = ids;
    *n = cnt;
    return 0;
}

int ob_cmd_eval(int argc, char **argv) {
    const char *model_path = NULL, *ids_arg = NULL, *prompt = NULL, *out_path = NULL, *device = "cpu";
    int top = 5, threads = 0;
    ob_kv_type kv_type = OB_KV_F32;
    for (int i = 0; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: 1bit eval -m MODEL (--ids 1,2,3 | --prompt TEXT) [--logits-out FILE] [--top N]\n"
                   "                 [-t THREADS] [--kv-type f32|f16|q8_0] [--device cpu|cuda|cuda:N|auto]\n"
                   "  --ids         exactly these token ids (no BOS added)\n"
                   "  --prompt      tokenize the text (BOS as the model asks)\n"
                   "  --logits-out  float32 [n_tokens][n_vocab], row-major, little-endian\n"
                   "  --top         top-N tokens per position on stdout (default 5; 0 = none)\n"
                   "  --kv-type     KV cache precision (default f32 here, for comparisons)\n"
                   "  --device      where the model runs (default cpu; auto = the GPU when there is one)\n");
            return 0;
        }
        if (!v) return ob_cli_fail(0, "eval: option '%s' needs a value (or is unknown)", a);
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--ids")) ids_arg = v;
        else if (!strcmp(a, "--prompt") || !strcmp(a, "-p")) prompt = v;
        else if (!strcmp(a, "--logits-out")) out_path = v;
        else if (!strcmp(a, "--top")) top = atoi(v);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f32")) kv_type = OB_KV_F32;
            else if (!strcmp(v, "f16")) kv_type = OB_KV_F16;
            else if (!strcmp(v, "q8_0")) kv_type = OB_KV_Q8_0;
            else return ob_cli_fail(0, "eval: --kv-type must be f32, f16 or q8_0");
        } else return ob_cli_fail(0, "eval: unknown option '%s'", a);
    }
    if (!model_path || (!ids_arg == !prompt))
        return ob_cli_fail(0, "eval: need -m MODEL and exactly one of --ids or --prompt (see --help)");
    char model_file[4096]; /* -m: a path or a stored name (docs/store.md) */
    int rc = ob_model_resolve(model_path, model_file, sizeof model_file);
    if (rc < 0) return ob_cli_fail(rc, "eval");
    ob_model *m;
    ob_model_params mp = ob_model_default_params();
    mp.device = device;
    rc = ob_model_load(model_file, &mp, &m);
    if (rc < 0) return ob_cli_fail(rc, "eval");
    ob_token *ids = NULL;
    int32_t n = 0;
    int ret = 0;
    if (ids_arg) {
        if (parse_ids(ids_arg, &ids, &n) < 0 || n == 0) ret = ob_cli_fail(0, "eval: --ids wants comma-separated ids");
    } else {
        rc = ob_tokenize(m, prompt, strlen(prompt), true, false, NULL, 0, &n);
        if (rc < 0 && rc != OB_ERR_RANGE) {
            ret = ob_cli_fail(rc, "eval: tokenize");
        } else if (n == 0) {
            ret = ob_cli_fail(0, "eval: the prompt has no tokens");
        } else {
            ids = ob_malloc((size_t)n * sizeof(ob_token));
            if (!ids) ret = ob_cli_fail(OB_ERR_OOM, "eval");
            else if ((rc = ob_tokenize(m, prompt, strlen(prompt), true, false, ids, n, &n)) < 0)
                ret = ob_cli_fail(rc, "eval: tokenize");
        }
    }
    ob_context *ctx = NULL;
    if (ret == 0) {
        ob_context_params cp = ob_context_default_params();
        cp.n_ctx = n;
        cp.n_batch = n;
        cp.n_threads = threads;
        cp.kv_type = kv_type;
        rc = ob_context_create(m, &cp, &ctx);
        if (rc < 0) ret = ob_cli_fail(rc, "eval");
    }
    int32_t *pos = NULL, *seq = NULL;
    int8_t *want = NULL;
    if (ret == 0) {
        pos = ob_malloc((size_t)n * sizeof(int32_t));
        seq = ob_calloc((size_t)n, sizeof(int32_t));
        want = ob_malloc((size_t)n);
        if (!pos || !seq || !want) ret = ob_cli_fail(OB_ERR_OOM, "eval");
    }
    if (ret == 0) {
        for (int32_t i = 0; i < n; i++) pos[i] = i, want[i] = 1;
        ob_batch b = {n, ids, pos, seq, want};
        rc = ob_decode(ctx, &b);
        if (rc < 0) ret = ob_cli_fail(rc, "eval");
    }
    FILE *f = NULL;
    if (ret == 0 && out_path && !(f = fopen(out_path, "wb"))) ret = ob_cli_fail(0, "eval: cannot write %s", out_path);
    int32_t nv = ob_model_n_vocab(m);
    for (int32_t i = 0; ret == 0 && i < n; i++) {
        const float *lg = ob_get_logits(ctx, i);
        if (f && fwrite(lg, sizeof(float), (size_t)nv, f) != (size_t)nv) ret = ob_cli_fail(0, "eval: write failed");
        if (top > 0) {
            printf("%d", i);
            /* simple top-N selection */
            int32_t best[64];
            int k = top < 64 ? top : 64;
            for (int j = 0; j < k; j++) {
                int32_t bi = -1;
                for (int32_t t = 0; t < nv; t++) {
                    bool used = false;
                    for (int q = 0; q < j; q++) used |= best[q] == t;
                    if (!used && (bi < 0 || lg[t] > lg[bi])) bi = t;
                }
                best[j] = bi;
                printf(" %d:%.6f", bi, (double)lg[bi]);
            }
            printf("\n");
        }
    }
    if (f && fclose(f) != 0 && ret == 0) ret = ob_cli_fail(0, "eval: write failed");
    ob_free(pos);
    ob_free(seq);
    ob_free(want);
    ob_free(ids);
    ob_context_free(ctx);
    ob_model_free(m);
    return ret;
}
