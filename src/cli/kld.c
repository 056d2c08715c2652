/*
 * kld.c - `1bit kld`: how far a quantized model's next-token distributions
 * are from the reference model's, in two steps so the reference runs once:
 *
 *   1bit kld --save-base base.bin -m REF.gguf -f TEXT [-c 512]
 *   1bit kld --base base.bin -m QUANT.gguf
 *
 * The first evaluates the reference over the text in perplexity's chunks
 * and stores the tokens and, for every scored position, the reference's
 * log-probabilities in 16 bits (format in src/quant/kl_stats.h and
 * docs/quantization.md). The second runs the other model on the same tokens and
 * reports mean/median/p90/p99/max KL divergence, the same-top-token rate,
 * both perplexities and their difference, with standard errors.
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

typedef struct kld_state {
    const ob_token *tok;
    int32_t n_vocab;
    float *logp, *logq;
    ob_kl_base *base;
    bool saving;
    ob_kl_acc acc;
    int rc;
} kld_state;

static void kld_row(void *user, int32_t i, const float *logits) {
    kld_state *s = user;
    if (s->rc < 0) return;
    if (s->saving) {
        ob_log_softmax(logits, s->n_vocab, s->logp);
        ob_kl_acc_add_nll(&s->acc, -(double)s->logp[s->tok[i + 1]]);
        s->rc = ob_kl_base_write_row(s->base, s->logp);
        return;
    }
    ob_log_softmax(logits, s->n_vocab, s->logq);
    s->rc = ob_kl_base_read_row(s->base, s->logp);
    if (s->rc == 0) s->rc = ob_kl_acc_add(&s->acc, s->logp, s->logq, s->n_vocab, s->tok[i + 1]);
}

static void usage(FILE *f) {
    fprintf(f, "usage: 1bit kld --save-base BASE.bin -m REF.gguf -f TEXT [-c 512] [--chunks N] [-t N] [--device D]\n"
               "       1bit kld --base BASE.bin -m QUANT.gguf [-t N] [--act-bits 4|8] [--device D]\n"
               "  The first run stores the reference's log-probabilities (16 bits each) for the\n"
               "  second half of every chunk of c tokens; the second compares another model on\n"
               "  the same tokens: KL divergence, same top token, perplexity difference.\n"
               "  --act-bits 4|8: activations of the Q4_0 projections (default 4 for a rotated\n"
               "  --hadamard file, 8 otherwise; docs/quantization.md).\n"
               "  --device cpu|cuda|cuda:N|auto: where the model runs (default cpu).\n");
}

int ob_cmd_kld(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL, *save = NULL, *base_path = NULL, *device = "cpu";
    int n_ctx = 512, n_chunks_max = -1, n_threads = 0, act_bits = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) return ob_cli_fail(0, "kld: %s needs a value", a);
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) text_path = v;
        else if (!strcmp(a, "--save-base")) save = v;
        else if (!strcmp(a, "--base")) base_path = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = atoi(v);
        else if (!strcmp(a, "--chunks")) n_chunks_max = atoi(v);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) n_threads = atoi(v);
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--act-bits")) {
            act_bits = atoi(v);
            if (act_bits != 4 && act_bits != 8) return ob_cli_fail(0, "kld: --act-bits %s: expected 4 or 8", v);
        } else return ob_cli_fail(0, "kld: unknown option '%s'", a);
    }
    if (!model_path || (!save == !base_path) || (save && !text_path)) {
        usage(stderr);
        return 2;
    }
    if (n_ctx < 4) return ob_cli_fail(0, "kld: -c %d is too small (at least 4)", n_ctx);
    char path[4096];
    int rc = ob_model_resolve(model_path, path, sizeof path);
    if (rc < 0) return ob_cli_fail(rc, "kld: -m %s", model_path);
    ob_model *m = NULL;
    ob_model_params mp = ob_model_default_params();
    mp.device = device;
    rc = ob_model_load(path, &mp, &m);
    if (rc < 0) return ob_cli_fail(rc, "kld: load %s", path);

    kld_state s = {0};
    s.n_vocab = ob_model_n_vocab(m);
    s.saving = save != NULL;
    ob_kl_base base = {0};
    s.base = &base;
    ob_token *tok = NULL;
    int32_t n_tok = 0, n_chunk = 0;
    if (save) {
        rc = ob_ppl_read_tokens(m, text_path, &tok, &n_tok);
        if (rc == 0) {
            n_chunk = n_tok / n_ctx;
            if (n_chunks_max > 0 && n_chunk > n_chunks_max) n_chunk = n_chunks_max;
            if (n_chunk < 1)
                rc = ob_err(OB_ERR_RANGE, "%s has %d tokens, fewer than one chunk of %d (lower -c)", text_path,
                            n_tok, n_ctx);
        }
        const ob_token bos = ob_ppl_chunk_bos(m);
        for (int32_t c = 0; rc == 0 && bos >= 0 && c < n_chunk; c++) tok[(size_t)c * n_ctx] = bos;
        if (rc == 0)
            rc = ob_kl_base_create(save, (uint32_t)s.n_vocab, (uint32_t)n_ctx, (uint32_t)n_chunk,
                                   (uint32_t)(n_ctx / 2), tok, &base);
    } else {
        rc = ob_kl_base_open(base_path, &base);
        if (rc == 0 && base.n_vocab != (uint32_t)s.n_vocab)
            rc = ob_err(OB_ERR_FORMAT, "%s holds a vocabulary of %u; %s has %d", base_path, base.n_vocab, path,
                        s.n_vocab);
        if (rc == 0) {
            n_ctx = (int)base.n_ctx;
            n_chunk = (int32_t)base.n_chunk;
            if (n_chunks_max > 0 && n_chunk > n_chunks_max) n_chunk = n_chunks_max;
        }
    }
    const ob_token *all = save ? tok : base.tokens;
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx < 512 ? n_ctx : 512;
    cp.n_threads = n_threads;
    cp.act_bits = act_bits;
    ob_context *ctx = NULL;
    if (rc == 0) rc = ob_context_create(m, &cp, &ctx);
    s.logp = ob_malloc((size_t)s.n_vocab * sizeof(float));
    s.logq = ob_malloc((size_t)s.n_vocab * sizeof(float));
    if (rc == 0 && (!s.logp || !s.logq)) rc = ob_err(OB_ERR_OOM, "logits");
    if (rc == 0) fprintf(stderr, "kld: %d chunks of %d tokens\n", n_chunk, n_ctx);
    for (int32_t c = 0; rc == 0 && c < n_chunk; c++) {
        s.tok = all + (size_t)c * n_ctx;
        rc = ob_ppl_eval_chunk(ctx, s.tok, n_ctx, n_ctx / 2, cp.n_batch, kld_row, &s);
        if (rc == 0) rc = s.rc;
        if (rc == 0 && !save) {
            ob_kl_result r;
            ob_kl_acc_result(&s.acc, &r);
            fprintf(stderr, "[%d] kld %.6f ppl %.4f\n", c + 1, r.kld_mean, r.ppl);
        }
    }
    ob_kl_result r;
    if (rc == 0) rc = ob_kl_acc_result(&s.acc, &r);
    if (rc == 0 && save) {
        printf("saved %s: %d chunks of %d, %lld scored tokens\n", save, n_chunk, n_ctx, (long long)r.n);
        printf("PPL(base): %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    } else if (rc == 0) {
        printf("tokens scored: %lld (%d chunks of %d)\n", (long long)r.n, n_chunk, n_ctx);
        printf("PPL(base): %.4f +/- %.5f\n", r.ppl_base, r.ppl_base_err);
        printf("PPL(model): %.4f +/- %.5f\n", r.ppl, r.ppl_err);
        printf("ln(PPL(model)/PPL(base)): %.6f +/- %.6f\n", r.ln_ratio, r.ln_ratio_err);
        printf("Delta PPL: %.6f +/- %.6f\n", r.dppl, r.dppl_err);
        printf("Mean KLD: %.6f +/- %.6f\n", r.kld_mean, r.kld_err);
        printf("Median KLD: %.6f\n", r.kld_median);
        printf("90%% KLD: %.6f\n", r.kld_p90);
        printf("99%% KLD: %.6f\n", r.kld_p99);
        printf("Max KLD: %.6f\n", r.kld_max);
        printf("Same top token: %.3f +/- %.3f %%\n", 100 * r.same_top, 100 * r.same_top_err);
    }
    int crc = ob_kl_base_close(&base);
    if (rc == 0) rc = crc;
    ob_kl_acc_free(&s.acc);
    ob_free(s.logp);
    ob_free(s.logq);
    ob_context_free(ctx);
    ob_free(tok);
    ob_model_free(m);
    return rc < 0 ? ob_cli_fail(rc, "kld") : 0;
}
