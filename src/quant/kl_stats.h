/*
 * kl_stats.h - the numbers that say what quantization cost: perplexity and
 * the KL divergence of a model's next-token distributions from a reference
 * model's, with confidence intervals; and the compact file of reference
 * log-probabilities `1bit kld --save-base` writes.
 *
 * Pure arithmetic on logits; running models is the caller's
 * (src/cli/perplexity.c, src/cli/kld.c).
 */
#ifndef OB_QUANT_KL_STATS_H
#define OB_QUANT_KL_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* logp[i] = logits[i] - log(sum exp(logits)) (double accumulation). */
void ob_log_softmax(const float *logits, int64_t n, float *logp);
/* KL(P || Q) = sum_i p_i (log p_i - log q_i) for log-probabilities (P the reference). */
double ob_kl_divergence(const float *logp, const float *logq, int64_t n);
int64_t ob_argmax(const float *x, int64_t n);

/* Running statistics of one or two models over the scored tokens. */
typedef struct ob_kl_acc {
    int64_t n, cap;
    double sum_nll, sum_nll2;           /* the evaluated model: -log q(token) */
    double sum_nll_base, sum_nll_base2; /* the reference: -log p(token) */
    double sum_dnll, sum_dnll2;         /* nll - nll_base per token */
    int64_t same_top;
    float *kld; /* [n] per-token KL divergence (for the median and percentiles) */
} ob_kl_acc;

void ob_kl_acc_free(ob_kl_acc *a);
/* Add one token with only the evaluated model (perplexity). */
void ob_kl_acc_add_nll(ob_kl_acc *a, double nll);
/* Add one token with both distributions (log-probabilities) and the true next token. */
int ob_kl_acc_add(ob_kl_acc *a, const float *logp_base, const float *logq, int64_t n_vocab, int32_t token);

typedef struct ob_kl_result {
    int64_t n;
    double ppl, ppl_err;           /* exp(mean nll) and its standard error (delta method) */
    double ppl_base, ppl_base_err;
    double ln_ratio, ln_ratio_err; /* mean(nll - nll_base) = ln(PPL / PPL_base) */
    double dppl, dppl_err;         /* PPL - PPL_base */
    double kld_mean, kld_err, kld_median, kld_p99, kld_p90, kld_max;
    double same_top, same_top_err; /* fraction of tokens whose most likely token agrees */
} ob_kl_result;

/* Summaries; sorts a copy of the KL values (allocation failure: OB_ERR_OOM). */
int ob_kl_acc_result(const ob_kl_acc *a, ob_kl_result *r);

/* ---- the base-logits file ("1BITKLD1", docs/quantization.md) ----
 *
 *   char  magic[8]   "1BITKLD1"
 *   u32   n_vocab, n_ctx, n_chunk, first     (little-endian)
 *   i32   tokens[n_chunk * n_ctx]            the evaluated tokens, BOS already placed
 *   then per chunk, per scored position i = first .. n_ctx-2:
 *   f32   lo, step; u16 q[n_vocab]           log p = lo + step * q
 *
 * The 16-bit code spans each row's own range of log-probabilities, so the
 * rounding error is at most step/2 = range / 131070 (about 2e-4 nats for a
 * range of 25): far below the KL divergences worth measuring. */
typedef struct ob_kl_base {
    FILE *f;
    uint32_t n_vocab, n_ctx, n_chunk, first;
    int32_t *tokens; /* [n_chunk * n_ctx] */
    uint16_t *row;   /* [n_vocab] scratch */
} ob_kl_base;

int ob_kl_base_create(const char *path, uint32_t n_vocab, uint32_t n_ctx, uint32_t n_chunk, uint32_t first,
                      const int32_t *tokens, ob_kl_base *b);
/* Append one row of log-probabilities (rows in file order). */
int ob_kl_base_write_row(ob_kl_base *b, const float *logp);
int ob_kl_base_open(const char *path, ob_kl_base *b);
/* Read the next row into logp[n_vocab]. */
int ob_kl_base_read_row(ob_kl_base *b, float *logp);
/* Close (flushes a written file; returns its status). */
int ob_kl_base_close(ob_kl_base *b);

#endif
