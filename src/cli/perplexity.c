/*
 * perplexity.c - `1bit perplexity -m MODEL -f TEXT [-c 512]`: perplexity of
 * a text, computed the way llama.cpp's llama-perplexity does so the numbers
 * compare: the tokenized text is cut into chunks of c tokens, each chunk is
 * evaluated from an empty context with BOS as its first token (when the
 * model uses one), and only the second half of each chunk is scored (every
 * scored token sees at least c/2 tokens of context). Prints the running
 * estimate after each chunk as [n]value and then the final estimate with
 * its standard error.
 *
 * Also holds the chunk loop `1bit kld` and `1bit imatrix` share
 * (ob_ppl_read_tokens, ob_ppl_eval_chunk; declared in cli.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../quant/kl_stats.h"
#include "cli.h"
#include "onebit.h"

int ob_ppl_read_tokens(ob_model *m, const char *path, ob_token **out, int32_t *n) {
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ob_err(OB_ERR_IO, "%s: cannot open", path);
    size_t cap = 1 << 16, len = 0;
    char *text = ob_malloc(cap);
    for (size_t k; text && (k = fread(text + len, 1, cap - len - 1, f)) > 0;) {
        len += k;
        if (len + 1 == cap) {
            char *t = ob_realloc(text, cap * 2);
            if (!t) {
                ob_free(text);
                text = NULL;
                break;
            }
            text = t;
            cap *= 2;
        }
    }
    fclose(f);
    if (!text) return ob_err(OB_ERR_OOM, "%s", path);
    text[len] = '\0';
    int32_t need = 0;
    int rc = ob_tokenize(m, text, len, true, false, NULL, 0, &need);
    if (rc == OB_ERR_RANGE || (rc == 0 && need >= 0)) {
        ob_token *ids = ob_malloc((size_t)(need > 0 ? need : 1) * sizeof(ob_token));
        rc = ids ? ob_tokenize(m, text, len, true, false, ids, need, &need) : ob_err(OB_ERR_OOM, "tokens");
        if (rc == 0) {
            *out = ids;
            *n = need;
        } else {
            ob_free(ids);
        }
    }
    ob_free(text);
    return rc;
}

ob_token ob_ppl_chunk_bos(const ob_model *m) {
    /* the tokenizer adds BOS to an empty text exactly when the vocabulary asks
     * for one (tokenizer.ggml.add_bos_token); GPT-2 style vocabularies have a
     * BOS id but do not add it, and llama-perplexity leaves their chunks alone */
    ob_token t[2];
    int32_t n = 0;
    if (ob_tokenize(m, "", 0, true, false, t, 2, &n) < 0) {
        ob_err_clear();
        return -1;
    }
    return n >= 1 && t[0] == ob_token_bos(m) ? t[0] : -1;
}

int ob_cli_parse_kv_type(const char *s, ob_kv_type *out) {
    if (!strcmp(s, "f16")) *out = OB_KV_F16;
    else if (!strcmp(s, "f32")) *out = OB_KV_F32;
    else if (!strcmp(s, "q8_0")) *out = OB_KV_Q8_0;
    else return OB_ERR_INVALID_ARG;
    return 0;
}

int ob_ppl_eval_chunk(ob_context *ctx, const ob_token *tok, int32_t n_ctx, int32_t first, int32_t n_batch,
                      ob_ppl_row_fn fn, void *user) {
    int rc = ob_seq_remove(ctx, 0, 0);
    ob_token *bt = ob_malloc((size_t)n_batch * sizeof(ob_token));
    int32_t *pos = ob_malloc((size_t)n_batch * sizeof(int32_t));
    int32_t *seq = ob_calloc((size_t)n_batch, sizeof(int32_t));
    int8_t *want = ob_malloc((size_t)n_batch);
    if (rc == 0 && (!bt || !pos || !seq || !want)) rc = ob_err(OB_ERR_OOM, "chunk batch");
    for (int32_t p0 = 0; rc == 0 && p0 < n_ctx; p0 += n_batch) {
        int32_t nb = n_ctx - p0 < n_batch ? n_ctx - p0 : n_batch;
        for (int32_t j = 0; j < nb; j++) {
            bt[j] = tok[p0 + j];
            pos[j] = p0 + j;
            want[j] = first < 0 || (p0 + j >= first && p0 + j < n_ctx - 1);
        }
        ob_batch b = {nb, bt, pos, seq, want};
        rc = ob_decode(ctx, &b);
        for (int32_t j = 0; rc == 0 && j < nb; j++)
            if (want[j]) fn(user, p0 + j, ob_get_logits(ctx, j));
    }
    ob_free(bt);
    ob_free(pos);
    ob_free(seq);
    ob_free(want);
    return rc;
}

typedef struct ppl_state {
    const ob_token *tok; /* this chunk's tokens */
    int32_t n_vocab;
    float *logp;
    ob_kl_acc acc;
} ppl_state;

static void ppl_row(void *user, int32_t i, const float *logits) {
    ppl_state *s = user;
    ob_log_softmax(logits, s->n_vocab, s->logp);
    ob_kl_acc_add_nll(&s->acc, -(double)s->logp[s->tok[i + 1]]);
}

static void usage(FILE *f) {
    fprintf(f, "usage: 1bit perplexity -m MODEL -f TEXT [-c 512] [--chunks N] [-t N] [-b N] [--kv-type f16]\n"
               "                         [--device cpu|cuda|cuda:N|auto]\n"
               "  -c N        tokens per chunk (default 512); the second half of each chunk is scored\n"
               "  --chunks N  stop after N chunks (default: all whole chunks of the text)\n"
               "  -t N        threads (default: all cores); -b N tokens per batch (default: min(c, 512))\n");
}

int ob_cmd_perplexity(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL, *device = "cpu";
    int n_ctx = 512, n_chunks_max = -1, n_threads = 0, n_batch = 0;
    ob_kv_type kv_type = OB_KV_F16;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) return ob_cli_fail(0, "perplexity: %s needs a value", a);
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) text_path = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = atoi(v);
        else if (!strcmp(a, "--chunks")) n_chunks_max = atoi(v);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) n_threads = atoi(v);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) n_batch = atoi(v);
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--kv-type")) {
            if (ob_cli_parse_kv_type(v, &kv_type) < 0)
                return ob_cli_fail(0, "perplexity: --kv-type must be f16, f32 or q8_0");
        } else return ob_cli_fail(0, "perplexity: unknown option '%s'", a);
    }
    if (!model_path || !text_path) {
        usage(stderr);
        return 2;
    }
    if (n_ctx < 4) return ob_cli_fail(0, "perplexity: -c %d is too small (at least 4)", n_ctx);
    if (n_batch <= 0) n_batch = n_ctx < 512 ? n_ctx : 512;
    char path[4096];
    int rc = ob_model_resolve(model_path, path, sizeof path);
    if (rc < 0) return ob_cli_fail(rc, "perplexity: -m %s", model_path);
    ob_model *m = NULL;
    ob_model_params mp = ob_model_default_params();
    mp.device = device;
    rc = ob_model_load(path, &mp, &m);
    if (rc < 0) return ob_cli_fail(rc, "perplexity: load %s", path);
    ob_token *tok = NULL;
    int32_t n_tok = 0;
    rc = ob_ppl_read_tokens(m, text_path, &tok, &n_tok);
    if (rc < 0) {
        ob_model_free(m);
        return ob_cli_fail(rc, "perplexity: tokenize %s", text_path);
    }
    int n_chunk = n_tok / n_ctx;
    if (n_chunks_max > 0 && n_chunk > n_chunks_max) n_chunk = n_chunks_max;
    if (n_chunk < 1) {
        ob_free(tok);
        ob_model_free(m);
        return ob_cli_fail(0, "perplexity: %s has %d tokens, fewer than one chunk of %d (lower -c)", text_path, n_tok,
                           n_ctx);
    }
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = n_threads;
    cp.kv_type = kv_type;
    ob_context *ctx = NULL;
    rc = ob_context_create(m, &cp, &ctx);
    ppl_state s = {0};
    s.n_vocab = ob_model_n_vocab(m);
    s.logp = ob_malloc((size_t)s.n_vocab * sizeof(float));
    if (rc == 0 && !s.logp) rc = ob_err(OB_ERR_OOM, "logits");
    const ob_token bos = ob_ppl_chunk_bos(m);
    if (rc == 0)
        fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring positions %d..%d of each, %s\n", n_tok,
                n_chunk, n_ctx, n_ctx / 2, n_ctx - 2, bos >= 0 ? "BOS first" : "no BOS (the vocabulary adds none)");
    for (int c = 0; rc == 0 && c < n_chunk; c++) {
        ob_token *ct = tok + (size_t)c * n_ctx;
        ob_token saved = ct[0];
        if (bos >= 0) ct[0] = bos;
        s.tok = ct;
        rc = ob_ppl_eval_chunk(ctx, ct, n_ctx, n_ctx / 2, n_batch, ppl_row, &s);
        ct[0] = saved;
        if (rc == 0) {
            printf("[%d]%.4f,", c + 1, exp(s.acc.sum_nll / (double)s.acc.n));
            fflush(stdout);
        }
    }
    if (rc == 0) {
        ob_kl_result r;
        ob_kl_acc_result(&s.acc, &r);
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    }
    ob_kl_acc_free(&s.acc);
    ob_free(s.logp);
    ob_context_free(ctx);
    ob_free(tok);
    ob_model_free(m);
    return rc < 0 ? ob_cli_fail(rc, "perplexity") : 0;
}
