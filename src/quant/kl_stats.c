/*
 * kl_stats.c - perplexity / KL-divergence arithmetic and the base-logits
 * file (kl_stats.h). Sums are double; per-token values float.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "kl_stats.h"

void ob_log_softmax(const float *logits, int64_t n, float *logp) {
    float mx = logits[0];
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)logits[i] - mx);
    const double lse = mx + log(s);
    for (int64_t i = 0; i < n; i++) logp[i] = (float)((double)logits[i] - lse);
}

double ob_kl_divergence(const float *logp, const float *logq, int64_t n) {
    double kl = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = exp((double)logp[i]);
        if (p > 0) kl += p * ((double)logp[i] - (double)logq[i]);
    }
    return kl > 0 ? kl : 0; /* rounding can make an identical pair slightly negative */
}

int64_t ob_argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

void ob_kl_acc_free(ob_kl_acc *a) {
    ob_free(a->kld);
    memset(a, 0, sizeof *a);
}

void ob_kl_acc_add_nll(ob_kl_acc *a, double nll) {
    a->n++;
    a->sum_nll += nll;
    a->sum_nll2 += nll * nll;
}

int ob_kl_acc_add(ob_kl_acc *a, const float *logp_base, const float *logq, int64_t n_vocab, int32_t token) {
    if (token < 0 || token >= n_vocab) return ob_err(OB_ERR_RANGE, "token %d outside the vocabulary", token);
    if (a->n == a->cap) {
        int64_t cap = a->cap ? a->cap * 2 : 1024;
        float *k = ob_realloc(a->kld, (size_t)cap * sizeof(float));
        if (!k) return ob_err(OB_ERR_OOM, "kld values");
        a->kld = k;
        a->cap = cap;
    }
    const double nll = -(double)logq[token], nllb = -(double)logp_base[token];
    a->kld[a->n] = (float)ob_kl_divergence(logp_base, logq, n_vocab);
    ob_kl_acc_add_nll(a, nll);
    a->sum_nll_base += nllb;
    a->sum_nll_base2 += nllb * nllb;
    a->sum_dnll += nll - nllb;
    a->sum_dnll2 += (nll - nllb) * (nll - nllb);
    a->same_top += ob_argmax(logp_base, n_vocab) == ob_argmax(logq, n_vocab);
    return 0;
}

/* Standard error of a mean from the sums of x and x^2 over n samples. */
static double sem(double s, double s2, int64_t n) {
    if (n < 2) return 0;
    double m = s / (double)n, v = s2 / (double)n - m * m;
    return v > 0 ? sqrt(v / (double)(n - 1)) : 0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static double quantile(const float *sorted, int64_t n, double q) {
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)pos;
    if (i + 1 >= n) return sorted[n - 1];
    double f = pos - (double)i;
    return sorted[i] * (1 - f) + sorted[i + 1] * f;
}

int ob_kl_acc_result(const ob_kl_acc *a, ob_kl_result *r) {
    memset(r, 0, sizeof *r);
    const int64_t n = a->n;
    r->n = n;
    if (n == 0) return 0;
    const double dn = (double)n;
    r->ppl = exp(a->sum_nll / dn);
    r->ppl_err = r->ppl * sem(a->sum_nll, a->sum_nll2, n);
    if (!a->kld) return 0;
    r->ppl_base = exp(a->sum_nll_base / dn);
    r->ppl_base_err = r->ppl_base * sem(a->sum_nll_base, a->sum_nll_base2, n);
    r->ln_ratio = a->sum_dnll / dn;
    r->ln_ratio_err = sem(a->sum_dnll, a->sum_dnll2, n);
    r->dppl = r->ppl - r->ppl_base;
    r->dppl_err = r->ppl * r->ln_ratio_err; /* PPL = PPL_base exp(ln_ratio): delta method */
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        s += a->kld[i];
        s2 += (double)a->kld[i] * a->kld[i];
    }
    r->kld_mean = s / dn;
    r->kld_err = sem(s, s2, n);
    float *sorted = ob_malloc((size_t)n * sizeof(float));
    if (!sorted) return ob_err(OB_ERR_OOM, "kld sort");
    memcpy(sorted, a->kld, (size_t)n * sizeof(float));
    qsort(sorted, (size_t)n, sizeof(float), cmp_float);
    r->kld_median = quantile(sorted, n, 0.5);
    r->kld_p90 = quantile(sorted, n, 0.9);
    r->kld_p99 = quantile(sorted, n, 0.99);
    r->kld_max = sorted[n - 1];
    ob_free(sorted);
    r->same_top = (double)a->same_top / dn;
    r->same_top_err = n > 1 ? sqrt(r->same_top * (1 - r->same_top) / (dn - 1)) : 0;
    return 0;
}

/* ---- base file ---- */

static const char g_magic[8] = {'1', 'B', 'I', 'T', 'K', 'L', 'D', '1'};

int ob_kl_base_create(const char *path, uint32_t n_vocab, uint32_t n_ctx, uint32_t n_chunk, uint32_t first,
                      const int32_t *tokens, ob_kl_base *b) {
    memset(b, 0, sizeof *b);
    b->f = fopen(path, "wb");
    if (!b->f) return ob_err(OB_ERR_IO, "%s: cannot create", path);
    b->n_vocab = n_vocab;
    b->n_ctx = n_ctx;
    b->n_chunk = n_chunk;
    b->first = first;
    b->row = ob_malloc((size_t)n_vocab * sizeof(uint16_t));
    uint32_t hdr[4] = {n_vocab, n_ctx, n_chunk, first};
    size_t nt = (size_t)n_chunk * n_ctx;
    if (!b->row || fwrite(g_magic, 1, 8, b->f) != 8 || fwrite(hdr, 4, 4, b->f) != 4 ||
        fwrite(tokens, 4, nt, b->f) != nt) {
        ob_kl_base_close(b);
        return ob_err(OB_ERR_IO, "%s: write failed", path);
    }
    return 0;
}

int ob_kl_base_write_row(ob_kl_base *b, const float *logp) {
    float lo = logp[0], hi = logp[0];
    for (uint32_t i = 1; i < b->n_vocab; i++) {
        if (logp[i] < lo) lo = logp[i];
        if (logp[i] > hi) hi = logp[i];
    }
    float step = hi > lo ? (hi - lo) / 65535.0f : 1.0f;
    for (uint32_t i = 0; i < b->n_vocab; i++) {
        long q = lrintf((logp[i] - lo) / step);
        b->row[i] = (uint16_t)(q < 0 ? 0 : q > 65535 ? 65535 : q);
    }
    float h[2] = {lo, step};
    if (fwrite(h, 4, 2, b->f) != 2 || fwrite(b->row, 2, b->n_vocab, b->f) != b->n_vocab)
        return ob_err(OB_ERR_IO, "base file: write failed");
    return 0;
}

int ob_kl_base_open(const char *path, ob_kl_base *b) {
    memset(b, 0, sizeof *b);
    b->f = fopen(path, "rb");
    if (!b->f) return ob_err(OB_ERR_IO, "%s: cannot open", path);
    char magic[8];
    uint32_t hdr[4];
    int rc = 0;
    if (fread(magic, 1, 8, b->f) != 8 || memcmp(magic, g_magic, 8) || fread(hdr, 4, 4, b->f) != 4)
        rc = ob_err(OB_ERR_FORMAT, "%s: not a base-logits file (made by 1bit kld --save-base)", path);
    else if (hdr[0] == 0 || hdr[1] < 4 || hdr[2] == 0 || hdr[3] >= hdr[1] - 1 || hdr[0] > (1u << 24) ||
             (uint64_t)hdr[1] * hdr[2] > (1ull << 31))
        rc = ob_err(OB_ERR_FORMAT, "%s: bad header (vocab %u, ctx %u, chunks %u, first %u)", path, hdr[0], hdr[1],
                    hdr[2], hdr[3]);
    /* A header may promise up to 2^31 tokens: check a regular file holds
     * them before allocating for them (a pipe is read as it comes). */
    struct stat st;
    if (rc == 0 && fstat(fileno(b->f), &st) == 0 && S_ISREG(st.st_mode) &&
        (uint64_t)st.st_size < 24 + 4 * (uint64_t)hdr[1] * hdr[2])
        rc = ob_err(OB_ERR_FORMAT, "%s: truncated tokens (%llu bytes, the header needs %llu)", path,
                    (unsigned long long)st.st_size, (unsigned long long)(24 + 4 * (uint64_t)hdr[1] * hdr[2]));
    if (rc == 0) {
        b->n_vocab = hdr[0];
        b->n_ctx = hdr[1];
        b->n_chunk = hdr[2];
        b->first = hdr[3];
        size_t nt = (size_t)b->n_chunk * b->n_ctx;
        b->tokens = ob_malloc(nt * sizeof(int32_t));
        b->row = ob_malloc((size_t)b->n_vocab * sizeof(uint16_t));
        if (!b->tokens || !b->row) rc = ob_err(OB_ERR_OOM, "%s", path);
        else if (fread(b->tokens, 4, nt, b->f) != nt) rc = ob_err(OB_ERR_FORMAT, "%s: truncated tokens", path);
        for (size_t i = 0; rc == 0 && i < nt; i++)
            if (b->tokens[i] < 0 || (uint32_t)b->tokens[i] >= b->n_vocab)
                rc = ob_err(OB_ERR_FORMAT, "%s: token %zu is %d, outside the vocabulary of %u", path, i,
                            (int)b->tokens[i], b->n_vocab);
    }
    if (rc < 0) ob_kl_base_close(b);
    return rc;
}

int ob_kl_base_read_row(ob_kl_base *b, float *logp) {
    float h[2];
    if (fread(h, 4, 2, b->f) != 2 || fread(b->row, 2, b->n_vocab, b->f) != b->n_vocab)
        return ob_err(OB_ERR_FORMAT, "base file truncated");
    /* the writer's lo and step are finite, step >= 0: the largest code must stay finite too */
    if (!isfinite(h[0]) || !isfinite(h[1]) || !(h[1] >= 0.0f) || !isfinite(h[0] + h[1] * 65535.0f))
        return ob_err(OB_ERR_FORMAT, "base file: a row's scale (lo %g, step %g) is not finite with step >= 0",
                      (double)h[0], (double)h[1]);
    for (uint32_t i = 0; i < b->n_vocab; i++) logp[i] = h[0] + h[1] * (float)b->row[i];
    return 0;
}

int ob_kl_base_close(ob_kl_base *b) {
    int rc = 0;
    if (b->f && fclose(b->f) != 0) rc = ob_err(OB_ERR_IO, "base file: close failed");
    ob_free(b->tokens);
    ob_free(b->row);
    memset(b, 0, sizeof *b);
    return rc;
}
