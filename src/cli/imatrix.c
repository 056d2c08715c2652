/*
 * imatrix.c - `1bit imatrix -m MODEL -f TEXT [-o imatrix.gguf]`: run the
 * model over a calibration text in chunks (as perplexity does) and sum, for
 * every weight matrix, the squares of the activations that enter it. The
 * result is written in llama.cpp's GGUF imatrix layout
 * (src/quant/imatrix.h), so `1bit quantize --imatrix` and llama-quantize
 * both read it. The activations come from the engine's matmul observer
 * (ob_context_set_matmul_observer), per expert for stacked expert tensors;
 * the output matrix is skipped unless --process-output, as llama-imatrix
 * does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../quant/imatrix.h"
#include "../quant/kl_stats.h"
#include "cli.h"
#include "onebit.h"

typedef struct im_state {
    ob_imatrix *im;
    bool process_output;
    int rc;
    const ob_token *tok;
    int32_t first, n_ctx; /* scored positions: [first, n_ctx - 1) */
    int32_t n_vocab;
    float *logp;
    ob_kl_acc acc;
} im_state;

static void observe(void *user, const char *name, int32_t mat, int32_t n_mat, const float *x, int64_t n_in,
                    int64_t n) {
    im_state *s = user;
    if (s->rc < 0) return;
    if (!s->process_output && !strcmp(name, "output.weight")) return;
    if (!strcmp(name, "token_embd.weight") && !s->process_output) return; /* tied output */
    ob_imatrix_entry *e = NULL;
    s->rc = ob_imatrix_entry_get(s->im, name, n_in, n_mat, &e);
    if (s->rc == 0) ob_imatrix_entry_add(e, mat, x, n);
}

static void score(void *user, int32_t i, const float *logits) {
    im_state *s = user;
    if (i < s->first || i >= s->n_ctx - 1) return; /* --process-output asks for every row's logits */
    ob_log_softmax(logits, s->n_vocab, s->logp);
    ob_kl_acc_add_nll(&s->acc, -(double)s->logp[s->tok[i + 1]]);
}

static void usage(FILE *f) {
    fprintf(f, "usage: 1bit imatrix -m MODEL -f TEXT [-o imatrix.gguf] [-c 512] [--chunks N] [-t N]\n"
               "                    [--process-output] [--kv-type f16]\n"
               "  Sums the squared activations entering every weight matrix over the text\n"
               "  (chunks of c tokens) and writes them in llama.cpp's GGUF imatrix layout.\n");
}

int ob_cmd_imatrix(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL, *out = "imatrix.gguf";
    int n_ctx = 512, n_chunks_max = -1, n_threads = 0;
    ob_kv_type kv_type = OB_KV_F16;
    im_state s = {0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--process-output")) {
            s.process_output = true;
            continue;
        }
        if (!v) return ob_cli_fail(0, "imatrix: %s needs a value", a);
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) text_path = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = atoi(v);
        else if (!strcmp(a, "--chunks")) n_chunks_max = atoi(v);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) n_threads = atoi(v);
        else if (!strcmp(a, "--kv-type")) {
            if (ob_cli_parse_kv_type(v, &kv_type) < 0)
                return ob_cli_fail(0, "imatrix: --kv-type must be f16, f32 or q8_0");
        } else return ob_cli_fail(0, "imatrix: unknown option '%s'", a);
    }
    if (!model_path || !text_path) {
        usage(stderr);
        return 2;
    }
    if (n_ctx < 4) return ob_cli_fail(0, "imatrix: -c %d is too small (at least 4)", n_ctx);
    char path[4096];
    int rc = ob_model_resolve(model_path, path, sizeof path);
    if (rc < 0) return ob_cli_fail(rc, "imatrix: -m %s", model_path);
    ob_model *m = NULL;
    ob_model_params mp = ob_model_default_params();
    rc = ob_model_load(path, &mp, &m);
    if (rc < 0) return ob_cli_fail(rc, "imatrix: load %s", path);
    ob_token *tok = NULL;
    int32_t n_tok = 0, n_chunk = 0;
    rc = ob_ppl_read_tokens(m, text_path, &tok, &n_tok);
    if (rc == 0) {
        n_chunk = n_tok / n_ctx;
        if (n_chunks_max > 0 && n_chunk > n_chunks_max) n_chunk = n_chunks_max;
        if (n_chunk < 1)
            rc = ob_err(OB_ERR_RANGE, "%s has %d tokens, fewer than one chunk of %d (lower -c)", text_path, n_tok,
                        n_ctx);
    }
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx < 512 ? n_ctx : 512;
    cp.n_threads = n_threads;
    cp.kv_type = kv_type;
    ob_context *ctx = NULL;
    if (rc == 0) rc = ob_context_create(m, &cp, &ctx);
    if (rc == 0) rc = ob_imatrix_create(&s.im);
    if (rc == 0) rc = ob_context_set_matmul_observer(ctx, observe, &s);
    s.n_vocab = ob_model_n_vocab(m);
    s.logp = ob_malloc((size_t)s.n_vocab * sizeof(float));
    if (rc == 0 && !s.logp) rc = ob_err(OB_ERR_OOM, "logits");
    const ob_token bos = ob_ppl_chunk_bos(m);
    s.first = n_ctx / 2;
    s.n_ctx = n_ctx;
    for (int32_t c = 0; rc == 0 && c < n_chunk; c++) {
        ob_token *ct = tok + (size_t)c * n_ctx;
        if (bos >= 0) ct[0] = bos;
        s.tok = ct;
        rc = ob_ppl_eval_chunk(ctx, ct, n_ctx, s.process_output ? -1 : n_ctx / 2, cp.n_batch, score, &s);
        if (rc == 0) rc = s.rc;
        if (rc == 0) {
            printf("[%d]%.4f,", c + 1, exp(s.acc.sum_nll / (double)s.acc.n));
            fflush(stdout);
        }
    }
    if (rc == 0) {
        const char *base = strrchr(text_path, '/');
        rc = ob_imatrix_add_dataset(s.im, base ? base + 1 : text_path);
        s.im->chunk_count = (uint32_t)n_chunk;
        s.im->chunk_size = (uint32_t)n_ctx;
    }
    if (rc == 0) rc = ob_imatrix_save(s.im, out);
    if (rc == 0)
        printf("\nwrote %s: %lld matrices, %d chunks of %d tokens\n", out, (long long)s.im->n, n_chunk, n_ctx);
    ob_kl_acc_free(&s.acc);
    ob_free(s.logp);
    ob_imatrix_free(s.im);
    ob_context_free(ctx);
    ob_free(tok);
    ob_model_free(m);
    return rc < 0 ? ob_cli_fail(rc, "imatrix") : 0;
}
