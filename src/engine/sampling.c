/*
 * sampling.c - turning logits into the next token.
 *
 * Order of operations (as llama.cpp's default chain, so settings mean the
 * same thing to users of both): penalties over the recent window, then
 * top-k, top-p, min-p on the softmax, temperature, and a draw from the
 * seeded generator. temperature <= 0 is greedy (argmax after penalties).
 * The RNG is xoshiro256** seeded through splitmix64: the same seed gives the
 * same tokens on every machine.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "onebit.h"

typedef struct ob_cand {
    float logit;
    int32_t id;
} ob_cand;

struct ob_sampler {
    ob_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    ob_token *hist;     /* ring of the last repeat_last_n accepted tokens */
    int32_t hist_cap, hist_len, hist_head;
    int32_t *counts;    /* [n_vocab] occurrences inside the window */
    /* scratch */
    float *logit;       /* [n_vocab] */
    ob_cand *cand;      /* [n_vocab] candidates, best first */
    float *prob;        /* [n_vocab] */
};

ob_sampler_params ob_sampler_default_params(void) {
    ob_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 0xC0FFEEull;
    return p;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 bits. */
static double next_f64(uint64_t *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

void ob_sampler_reset(ob_sampler *s) {
    uint64_t seed = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&seed);
    s->hist_len = s->hist_head = 0;
    memset(s->counts, 0, (size_t)s->n_vocab * sizeof(int32_t));
}

int ob_sampler_create(const ob_sampler_params *params, int32_t n_vocab, ob_sampler **out) {
    *out = NULL;
    if (n_vocab <= 0) return ob_err(OB_ERR_INVALID_ARG, "sampler: vocabulary of %d", n_vocab);
    ob_sampler_params p = params ? *params : ob_sampler_default_params();
    if (p.top_p <= 0.0f) p.top_p = 1.0f;
    if (p.repeat_penalty <= 0.0f) p.repeat_penalty = 1.0f;
    ob_sampler *s = ob_calloc(1, sizeof *s);
    if (!s) return ob_err(OB_ERR_OOM, "sampler");
    s->p = p;
    s->n_vocab = n_vocab;
    s->hist_cap = p.repeat_last_n < 0 ? 1 << 20 : p.repeat_last_n;
    s->hist = ob_calloc((size_t)(s->hist_cap > 0 ? s->hist_cap : 1), sizeof(ob_token));
    s->counts = ob_calloc((size_t)n_vocab, sizeof(int32_t));
    s->logit = ob_malloc((size_t)n_vocab * sizeof(float));
    s->cand = ob_malloc((size_t)n_vocab * sizeof(ob_cand));
    s->prob = ob_malloc((size_t)n_vocab * sizeof(float));
    if (!s->hist || !s->counts || !s->logit || !s->cand || !s->prob) {
        ob_sampler_free(s);
        return ob_err(OB_ERR_OOM, "sampler");
    }
    ob_sampler_reset(s);
    *out = s;
    return 0;
}

void ob_sampler_free(ob_sampler *s) {
    if (!s) return;
    ob_free(s->hist);
    ob_free(s->counts);
    ob_free(s->logit);
    ob_free(s->cand);
    ob_free(s->prob);
    ob_free(s);
}

void ob_sampler_accept(ob_sampler *s, ob_token id) {
    if (id < 0 || id >= s->n_vocab || s->hist_cap == 0) return;
    if (s->hist_len == s->hist_cap) { /* drop the oldest from the window */
        ob_token old = s->hist[s->hist_head];
        s->counts[old]--;
        s->hist_len--;
    }
    int32_t pos = (s->hist_head + s->hist_len) % s->hist_cap;
    s->hist[pos] = id;
    s->hist_len++;
    if (s->hist_len == s->hist_cap) s->hist_head = (pos + 1) % s->hist_cap;
    s->counts[id]++;
}

/* Higher logit first; ties: lower id first, so the order is deterministic. */
static int cand_before(const ob_cand *a, const ob_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *x, const void *y) {
    const ob_cand *a = x, *b = y;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

/* Keep the k best of n candidates in c[0..k), sorted: a min-heap of size k
 * (worst at the root) over one pass, O(n log k), then a sort of the k. */
static void top_k_select(ob_cand *c, int32_t n, int32_t k) {
    for (int32_t i = k / 2 - 1; i >= 0; i--) { /* heapify c[0..k) with the worst on top */
        int32_t j = i;
        for (;;) {
            int32_t l = 2 * j + 1, r = l + 1, w = j;
            if (l < k && cand_before(&c[w], &c[l])) w = l;
            if (r < k && cand_before(&c[w], &c[r])) w = r;
            if (w == j) break;
            ob_cand t = c[j];
            c[j] = c[w];
            c[w] = t;
            j = w;
        }
    }
    for (int32_t i = k; i < n; i++) {
        if (!cand_before(&c[i], &c[0])) continue;
        c[0] = c[i];
        int32_t j = 0;
        for (;;) {
            int32_t l = 2 * j + 1, r = l + 1, w = j;
            if (l < k && cand_before(&c[w], &c[l])) w = l;
            if (r < k && cand_before(&c[w], &c[r])) w = r;
            if (w == j) break;
            ob_cand t = c[j];
            c[j] = c[w];
            c[w] = t;
            j = w;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
}

/* The distribution a draw comes from: penalties, then greedy (returns the
 * argmax, *k = 0), or candidates s->cand[0..*k) with unnormalised weights
 * s->prob[0..*k) summing to *sum (returns -1). ob_sampler_sample draws from
 * it; ob_sampler_probs (speculative decoding) writes it out. */
static ob_token sampler_weights(ob_sampler *s, const float *logits, int32_t *k_out, double *sum_out) {
    const int32_t n = s->n_vocab;
    const ob_sampler_params *p = &s->p;
    float *l = s->logit;
    memcpy(l, logits, (size_t)n * sizeof(float));
    /* penalties (repetition as in CTRL: divide positive logits, multiply negative) */
    bool pen = p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    if (pen)
        for (int32_t i = 0; i < s->hist_len; i++) {
            ob_token t = s->hist[(s->hist_head + i) % s->hist_cap];
            if (s->counts[t] <= 0) continue;
            /* apply once per distinct token: mark by negating the count temporarily */
            int32_t c = s->counts[t];
            if (l[t] > 0)
                l[t] /= p->repeat_penalty;
            else
                l[t] *= p->repeat_penalty;
            l[t] -= (float)c * p->frequency_penalty + p->presence_penalty;
            s->counts[t] = -c;
        }
    if (pen)
        for (int32_t i = 0; i < s->hist_len; i++) {
            ob_token t = s->hist[(s->hist_head + i) % s->hist_cap];
            if (s->counts[t] < 0) s->counts[t] = -s->counts[t];
        }

    if (p->temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (l[i] > l[best]) best = i;
        *k_out = 0;
        *sum_out = 0;
        return best;
    }

    /* candidates sorted by logit (a top-k selection first when it cuts the work) */
    int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    for (int32_t i = 0; i < n; i++) s->cand[i].logit = l[i], s->cand[i].id = i;
    if (k < n)
        top_k_select(s->cand, n, k);
    else
        qsort(s->cand, (size_t)n, sizeof *s->cand, cand_cmp);
    /* softmax over the k candidates */
    float mx = s->cand[0].logit;
    double sum = 0;
    for (int32_t i = 0; i < k; i++) {
        s->prob[i] = expf(s->cand[i].logit - mx);
        sum += s->prob[i];
    }
    for (int32_t i = 0; i < k; i++) s->prob[i] = (float)(s->prob[i] / sum);
    /* top-p: smallest prefix with mass >= top_p */
    if (p->top_p < 1.0f) {
        double cum = 0;
        for (int32_t i = 0; i < k; i++) {
            cum += s->prob[i];
            if (cum >= p->top_p) {
                k = i + 1;
                break;
            }
        }
    }
    /* min-p: drop candidates below min_p * the best probability */
    if (p->min_p > 0.0f) {
        float cut = p->min_p * s->prob[0];
        int32_t keep = 1;
        while (keep < k && s->prob[keep] >= cut) keep++;
        k = keep;
    }
    /* temperature */
    sum = 0;
    for (int32_t i = 0; i < k; i++) {
        s->prob[i] = expf((s->cand[i].logit - mx) / p->temperature);
        sum += s->prob[i];
    }
    *k_out = k;
    *sum_out = sum;
    return -1;
}

bool ob_sampler_is_greedy(const ob_sampler *s) {
    const ob_sampler_params *p = &s->p;
    return p->temperature <= 0.0f && p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
           p->frequency_penalty == 0.0f;
}

ob_token ob_sampler_sample(ob_sampler *s, const float *logits) {
    int32_t k;
    double sum;
    ob_token greedy = sampler_weights(s, logits, &k, &sum);
    if (greedy >= 0) return greedy;
    double r = next_f64(s->rng) * sum, acc = 0;
    for (int32_t i = 0; i < k; i++) {
        acc += s->prob[i];
        if (r < acc) return s->cand[i].id;
    }
    return s->cand[k - 1].id;
}

/* ---- for speculative decoding (declared in spec.h) ---- */

/* probs[n_vocab] = the probability ob_sampler_sample(s, logits) would give
 * each token now (greedy: 1 on the argmax). Draws nothing. */
void ob_sampler_probs(ob_sampler *s, const float *logits, float *probs) {
    int32_t k;
    double sum;
    ob_token greedy = sampler_weights(s, logits, &k, &sum);
    memset(probs, 0, (size_t)s->n_vocab * sizeof(float));
    if (greedy >= 0) {
        probs[greedy] = 1.0f;
        return;
    }
    for (int32_t i = 0; i < k; i++) probs[s->cand[i].id] = (float)(s->prob[i] / sum);
}

/* A uniform number in [0, 1) from the sampler's own generator. */
double ob_sampler_uniform(ob_sampler *s) { return next_f64(s->rng); }
