/*
 * spec.c - speculative decoding: drafters, verification, and the one-
 * sequence step of `1bit run` (spec.h has the rule and why it is exact).
 *
 * This file owns the draft model's context (one sequence per target
 * sequence, same ids, its own KV pool) and keeps, for each sequence, the
 * tokens that context holds, so drafting re-syncs by comparing token lists
 * instead of being told about every acceptance, rollback, preemption or
 * prefix reuse of the target. The target's KV cache is left to the caller:
 * rejected positions go with ob_seq_remove, which frees whole pages past the
 * cut and leaves the page holding the cut in place; that page is dropped
 * from the prefix index (or copied, when shared) the next time it is
 * written (engine.c seq_grow), so the index only ever maps to what the
 * pages really hold.
 */
#include <math.h>
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "spec.h"

/* llama.cpp allows vocabularies padded differently by this much */
#define SPEC_VOCAB_SLACK 128

struct ob_spec {
    ob_model *model;       /* target */
    ob_context *ctx;       /* target context (borrowed) */
    ob_spec_params p;
    int32_t n_vocab, n_ctx, n_seq, n_batch;
    /* scratch for verification */
    float *probs;          /* [n_vocab] */
    const float **lg;      /* [n_max + 1] logits rows of one sequence */
    /* batch scratch [n_batch] (target for ob_spec_step, draft model otherwise) */
    ob_token *btok;
    int32_t *bpos, *bseq;
    int8_t *blog;
    ob_token *draft;       /* [n_max] ob_spec_step's draft */
    /* draft model */
    ob_model *dmodel;
    bool own_dmodel;
    ob_context *dctx;
    int32_t dvocab;        /* ids the draft may propose: min of both vocabularies */
    ob_token *dtok;        /* [n_seq][n_ctx] tokens the draft context holds per sequence */
    int32_t *bidx;         /* [n_seq] per request: batch index of its logits row this pass, -1 none */
    bool *active;          /* [n_seq] per request: still drafting */
    int32_t *fed;          /* [n_seq] per request: tokens of the sequence in the draft context */
    int32_t *len;          /* [n_seq] draft length now allowed per sequence (ob_spec_feedback) */
};

ob_spec_params ob_spec_default_params(void) {
    ob_spec_params p;
    memset(&p, 0, sizeof p);
    p.type = OB_SPEC_NONE;
    p.n_max = 8;
    p.n_min = 0;
    p.p_min = 0.75f;
    p.ngram_max = 3;
    p.ngram_min = 1;
    return p;
}

const ob_spec_params *ob_spec_get_params(const ob_spec *sp) { return &sp->p; }

/* ---------------- vocabulary check ---------------- */

int ob_spec_check_vocab(const ob_model *t, const ob_model *d) {
    int32_t nt = ob_model_n_vocab(t), nd = ob_model_n_vocab(d);
    int32_t diff = nt > nd ? nt - nd : nd - nt;
    if (diff > SPEC_VOCAB_SLACK)
        return ob_err(OB_ERR_UNSUPPORTED, "draft model: its vocabulary has %d tokens, the target's %d (they must match)",
                      nd, nt);
    if (ob_token_bos(t) != ob_token_bos(d) || ob_token_eos(t) != ob_token_eos(d))
        return ob_err(OB_ERR_UNSUPPORTED, "draft model: the vocabularies differ: BOS/EOS are %d/%d there, %d/%d in the target", ob_token_bos(d),
                      ob_token_eos(d), ob_token_bos(t), ob_token_eos(t));
    int32_t n = nt < nd ? nt : nd;
    char a[256], b[256];
    for (int32_t i = 0; i < n; i++) {
        int32_t la = 0, lb = 0;
        int ra = ob_token_to_piece(t, i, a, sizeof a, true, &la);
        int rb = ob_token_to_piece(d, i, b, sizeof b, true, &lb);
        ob_err_clear();
        bool same = ra == rb && (ra < 0 || (la == lb && memcmp(a, b, (size_t)la) == 0));
        if (!same)
            return ob_err(OB_ERR_UNSUPPORTED, "draft model: token %d is '%.*s' there and '%.*s' in the target (the vocabularies differ)",
                          i, ra == 0 ? lb < 64 ? lb : 64 : 0, b, rb == 0 ? la < 64 ? la : 64 : 0, a);
    }
    return 0;
}

/* ---------------- lifetime ---------------- */

void ob_spec_free(ob_spec *sp) {
    if (!sp) return;
    ob_context_free(sp->dctx);
    if (sp->own_dmodel) ob_model_free(sp->dmodel);
    ob_free(sp->probs);
    ob_free(sp->lg);
    ob_free(sp->btok);
    ob_free(sp->bpos);
    ob_free(sp->bseq);
    ob_free(sp->blog);
    ob_free(sp->draft);
    ob_free(sp->dtok);
    ob_free(sp->bidx);
    ob_free(sp->active);
    ob_free(sp->fed);
    ob_free(sp->len);
    ob_free(sp);
}

static int open_draft(ob_spec *sp) {
    if (sp->p.draft_model) {
        sp->dmodel = sp->p.draft_model;
    } else {
        if (!sp->p.draft_path || !*sp->p.draft_path)
            return ob_err(OB_ERR_INVALID_ARG, "speculative decoding with a draft model needs one (-md FILE)");
        ob_model_params mp = ob_model_default_params();
        mp.device = sp->p.draft_device ? sp->p.draft_device : "cpu";
        int rc = ob_model_load(sp->p.draft_path, &mp, &sp->dmodel);
        if (rc < 0) return ob_err_wrap(rc, "draft model");
        sp->own_dmodel = true;
    }
    sp->p.draft_model = NULL;
    sp->p.draft_path = NULL; /* not kept: the caller's string */
    sp->p.draft_device = NULL;
    OB_TRY(ob_spec_check_vocab(sp->model, sp->dmodel));
    int32_t nd = ob_model_n_vocab(sp->dmodel);
    sp->dvocab = nd < sp->n_vocab ? nd : sp->n_vocab;
    const ob_context_params *tp = ob_context_get_params(sp->ctx);
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = tp->n_ctx;
    cp.n_seq_max = tp->n_seq_max;
    cp.n_batch = tp->n_batch;
    cp.n_threads = tp->n_threads;
    cp.kv_type = tp->kv_type;
    cp.kv_block_size = tp->kv_block_size;
    int rc = ob_context_create(sp->dmodel, &cp, &sp->dctx);
    if (rc < 0) return ob_err_wrap(rc, "draft model context");
    sp->dtok = ob_malloc(ob_mul_size((size_t)sp->n_seq, (size_t)sp->n_ctx) * sizeof(ob_token));
    if (!sp->dtok) return ob_err(OB_ERR_OOM, "draft tokens");
    return 0;
}

int ob_spec_create(ob_model *model, ob_context *ctx, const ob_spec_params *params, ob_spec **out) {
    *out = NULL;
    ob_spec_params p = params ? *params : ob_spec_default_params();
    if (p.type != OB_SPEC_NONE && p.type != OB_SPEC_NGRAM && p.type != OB_SPEC_DRAFT)
        return ob_err(OB_ERR_INVALID_ARG, "speculative decoding type %d", (int)p.type);
    if (p.n_max < 0 || p.n_max > 64)
        return ob_err(OB_ERR_RANGE, "draft length %d (0 to 64)", p.n_max);
    if (p.p_min < 0 || p.p_min > 1) return ob_err(OB_ERR_RANGE, "draft p_min %g (0 to 1)", (double)p.p_min);
    if (p.ngram_max <= 0) p.ngram_max = 3;
    if (p.ngram_min <= 0) p.ngram_min = 1;
    if (p.ngram_min > p.ngram_max) p.ngram_min = p.ngram_max;
    const ob_context_params *cp = ob_context_get_params(ctx);
    if (p.n_max > cp->n_batch - 1) p.n_max = cp->n_batch - 1; /* the last token and its drafts share one batch */
    ob_spec *sp = ob_calloc(1, sizeof *sp);
    if (!sp) return ob_err(OB_ERR_OOM, "speculative decoding");
    sp->model = model;
    sp->ctx = ctx;
    /* the verified batch must compute what one token at a time would: the same bits */
    if (p.type != OB_SPEC_NONE) {
        int irc = ob_context_set_batch_invariant(ctx, true);
        if (irc < 0) {
            ob_free(sp);
            return ob_err_wrap(irc, "speculative decoding");
        }
    }
    sp->p = p;
    sp->n_vocab = ob_model_n_vocab(model);
    sp->n_ctx = cp->n_ctx;
    sp->n_seq = cp->n_seq_max;
    sp->n_batch = cp->n_batch;
    int rc = 0;
    sp->probs = ob_malloc((size_t)sp->n_vocab * sizeof(float));
    sp->lg = ob_calloc((size_t)p.n_max + 1, sizeof *sp->lg);
    sp->draft = ob_calloc((size_t)p.n_max + 1, sizeof(ob_token));
    sp->btok = ob_calloc((size_t)sp->n_batch, sizeof(ob_token));
    sp->bpos = ob_calloc((size_t)sp->n_batch, sizeof(int32_t));
    sp->bseq = ob_calloc((size_t)sp->n_batch, sizeof(int32_t));
    sp->blog = ob_calloc((size_t)sp->n_batch, 1);
    sp->bidx = ob_calloc((size_t)sp->n_seq, sizeof(int32_t));
    sp->active = ob_calloc((size_t)sp->n_seq, sizeof(bool));
    sp->fed = ob_calloc((size_t)sp->n_seq, sizeof(int32_t));
    sp->len = ob_calloc((size_t)sp->n_seq, sizeof(int32_t));
    if (!sp->probs || !sp->lg || !sp->draft || !sp->btok || !sp->bpos || !sp->bseq || !sp->blog || !sp->bidx ||
        !sp->active || !sp->fed || !sp->len)
        rc = ob_err(OB_ERR_OOM, "speculative decoding");
    for (int32_t s = 0; rc == 0 && s < sp->n_seq; s++) sp->len[s] = p.n_max;
    if (rc == 0 && p.type == OB_SPEC_DRAFT) rc = open_draft(sp);
    if (rc < 0) {
        ob_spec_free(sp);
        return rc;
    }
    *out = sp;
    return 0;
}

void ob_spec_seq_clear(ob_spec *sp, int32_t seq) {
    if (!sp || seq < 0 || seq >= sp->n_seq) return;
    if (sp->dctx) ob_seq_remove(sp->dctx, seq, 0);
    sp->len[seq] = sp->p.n_max;
}

void ob_spec_feedback(ob_spec *sp, int32_t seq, int32_t n_drafted, int32_t n_accepted) {
    if (!sp || seq < 0 || seq >= sp->n_seq || n_drafted <= 0) return;
    int32_t l = sp->len[seq];
    if (n_accepted == n_drafted) l += 2; /* all kept: try longer */
    else l -= 1;
    sp->len[seq] = l < 1 ? 1 : l > sp->p.n_max ? sp->p.n_max : l;
}

/* ---------------- n-gram drafter ---------------- */

int32_t ob_spec_ngram_draft(const ob_token *t, int32_t n, int32_t ngram_min, int32_t ngram_max, int32_t n_max,
                            ob_token *out) {
    if (n_max <= 0) return 0;
    for (int32_t m = ngram_max; m >= ngram_min && m >= 1; m--) {
        if (m >= n) continue;
        const ob_token *suf = t + n - m;
        /* the latest earlier occurrence (start j < n - m); what followed it is
         * copied as LZ77 does, overlapping: past the end of the text the copy
         * reads its own output, so a pattern of period d = n - m - j goes on
         * repeating for the whole draft instead of stopping after d tokens */
        for (int32_t j = n - m - 1; j >= 0; j--) {
            if (t[j] != suf[0] || memcmp(t + j, suf, (size_t)m * sizeof(ob_token)) != 0) continue;
            int32_t from = j + m;
            for (int32_t k = 0; k < n_max; k++) out[k] = from + k < n ? t[from + k] : out[from + k - n];
            return n_max;
        }
    }
    return 0;
}

/* ---------------- draft model ---------------- */

/* The draft's next token for request i from its logits: its argmax among
 * ids both models share, kept when its probability is at least p_min. */
static void draft_pick(ob_spec *sp, ob_spec_req *r, int32_t i, const float *logits, int32_t n_max) {
    const int32_t nd = ob_model_n_vocab(sp->dmodel);
    int32_t best = 0;
    for (int32_t v = 1; v < sp->dvocab; v++)
        if (logits[v] > logits[best]) best = v;
    double z = 0;
    float mx = logits[best];
    for (int32_t v = 0; v < nd; v++) mx = logits[v] > mx ? logits[v] : mx;
    for (int32_t v = 0; v < nd; v++) z += exp((double)(logits[v] - mx));
    double pb = exp((double)(logits[best] - mx)) / z;
    if (pb < (double)sp->p.p_min) {
        sp->active[i] = false;
        return;
    }
    r->draft[r->n_draft++] = best;
    if (r->n_draft >= n_max || ob_token_is_eog(sp->model, best)) sp->active[i] = false;
}

static int32_t req_cap(const ob_spec *sp, const ob_spec_req *r) {
    int32_t k = r->n_max < sp->p.n_max ? r->n_max : sp->p.n_max;
    if (k > sp->len[r->seq]) k = sp->len[r->seq];
    /* the target verifies positions n_tokens-1 .. n_tokens-1+k, all below n_ctx */
    if (k > sp->n_ctx - r->n_tokens) k = sp->n_ctx - r->n_tokens;
    return k > 0 ? k : 0;
}

static int draft_decode(ob_spec *sp, int32_t nb) {
    ob_batch b = {nb, sp->btok, sp->bpos, sp->bseq, sp->blog};
    OB_TRY(ob_decode(sp->dctx, &b));
    for (int32_t j = 0; j < nb; j++) sp->dtok[(size_t)sp->bseq[j] * sp->n_ctx + sp->bpos[j]] = sp->btok[j];
    return 0;
}

static int draft_model(ob_spec *sp, ob_spec_req *reqs, int32_t n) {
    /* 1. sync each sequence: keep the longest prefix the draft context holds, feed the rest */
    for (int32_t i = 0; i < n; i++) {
        ob_spec_req *r = &reqs[i];
        sp->active[i] = req_cap(sp, r) > 0 && r->n_tokens > 0;
        if (!sp->active[i]) continue;
        int32_t held = ob_seq_len(sp->dctx, r->seq), c = 0;
        const ob_token *have = sp->dtok + (size_t)r->seq * sp->n_ctx;
        while (c < held && c < r->n_tokens && have[c] == r->tokens[c]) c++;
        if (c >= r->n_tokens) c = r->n_tokens - 1; /* its logits are needed: decode the last one again */
        OB_TRY(ob_seq_remove(sp->dctx, r->seq, c));
        sp->fed[i] = c;
    }
    for (;;) {
        int32_t nb = 0;
        for (int32_t i = 0; i < n; i++) sp->bidx[i] = -1;
        for (int32_t i = 0; i < n && nb < sp->n_batch; i++) {
            ob_spec_req *r = &reqs[i];
            if (!sp->active[i] || sp->fed[i] >= r->n_tokens) continue;
            while (sp->fed[i] < r->n_tokens && nb < sp->n_batch) {
                sp->btok[nb] = r->tokens[sp->fed[i]];
                sp->bpos[nb] = sp->fed[i];
                sp->bseq[nb] = r->seq;
                sp->blog[nb] = 0;
                nb++;
                sp->fed[i]++;
            }
            if (sp->fed[i] == r->n_tokens) {
                sp->blog[nb - 1] = 1;
                sp->bidx[i] = nb - 1;
            }
        }
        if (nb == 0) break;
        OB_TRY(draft_decode(sp, nb));
        for (int32_t i = 0; i < n; i++)
            if (sp->active[i] && sp->bidx[i] >= 0)
                draft_pick(sp, &reqs[i], i, ob_get_logits(sp->dctx, sp->bidx[i]), req_cap(sp, &reqs[i]));
    }
    /* 2. draft: feed each sequence's newest draft token, one position per pass, all sequences together */
    for (;;) {
        int32_t nb = 0;
        for (int32_t i = 0; i < n; i++) {
            ob_spec_req *r = &reqs[i];
            sp->bidx[i] = -1;
            if (!sp->active[i]) continue;
            sp->btok[nb] = r->draft[r->n_draft - 1];
            sp->bpos[nb] = r->n_tokens + r->n_draft - 1;
            sp->bseq[nb] = r->seq;
            sp->blog[nb] = 1;
            sp->bidx[i] = nb++;
        }
        if (nb == 0) break;
        OB_TRY(draft_decode(sp, nb));
        for (int32_t i = 0; i < n; i++)
            if (sp->bidx[i] >= 0)
                draft_pick(sp, &reqs[i], i, ob_get_logits(sp->dctx, sp->bidx[i]), req_cap(sp, &reqs[i]));
    }
    return 0;
}

int ob_spec_draft(ob_spec *sp, ob_spec_req *reqs, int32_t n) {
    if (n > sp->n_seq) return ob_err(OB_ERR_INVALID_ARG, "%d draft requests for %d sequences", n, sp->n_seq);
    for (int32_t i = 0; i < n; i++) {
        reqs[i].n_draft = 0;
        if (reqs[i].seq < 0 || reqs[i].seq >= sp->n_seq)
            return ob_err(OB_ERR_INVALID_ARG, "draft request for sequence %d of %d", reqs[i].seq, sp->n_seq);
    }
    int rc = 0;
    if (sp->p.type == OB_SPEC_NGRAM) {
        for (int32_t i = 0; i < n; i++)
            reqs[i].n_draft = ob_spec_ngram_draft(reqs[i].tokens, reqs[i].n_tokens, sp->p.ngram_min, sp->p.ngram_max,
                                                  req_cap(sp, &reqs[i]), reqs[i].draft);
    } else if (sp->p.type == OB_SPEC_DRAFT) {
        rc = draft_model(sp, reqs, n);
        if (rc < 0) /* what was fed is unknown now: start the draft context over */
            for (int32_t i = 0; i < n; i++) {
                ob_seq_remove(sp->dctx, reqs[i].seq, 0);
                reqs[i].n_draft = 0;
            }
    }
    for (int32_t i = 0; i < n; i++)
        if (reqs[i].n_draft < sp->p.n_min) reqs[i].n_draft = 0;
    return rc;
}

/* ---------------- verification ---------------- */

ob_token ob_spec_accept(const float *p, const float *q, int32_t n_vocab, ob_token x, double u1, double u2) {
    double px = p[x], qx = q ? q[x] : 1.0;
    /* accept with probability min(1, p(x)/q(x)) */
    if (qx <= 0 ? px > 0 : u1 * qx < px) return x;
    /* residual: norm(max(0, p - q)) */
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        double w = (double)p[i] - (q ? (double)q[i] : i == x ? 1.0 : 0.0);
        if (w > 0) sum += w;
    }
    if (sum <= 0) { /* p == q up to rounding: any draw from p will do */
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab; i++)
            if (p[i] > p[best]) best = i;
        return best;
    }
    double r = u2 * sum, acc = 0;
    int32_t last = -1;
    for (int32_t i = 0; i < n_vocab; i++) {
        double w = (double)p[i] - (q ? (double)q[i] : i == x ? 1.0 : 0.0);
        if (w <= 0) continue;
        acc += w;
        last = i;
        if (r < acc) return i;
    }
    return last;
}

int32_t ob_spec_verify(ob_spec *sp, ob_sampler *smp, const float *const *logits, const ob_token *draft, int32_t k,
                       ob_token *out) {
    int32_t n_out = 0;
    for (int32_t i = 0; i < k; i++) {
        ob_sampler_probs(smp, logits[i], sp->probs);
        double u1 = ob_sampler_uniform(smp), u2 = ob_sampler_uniform(smp);
        ob_token t = ob_spec_accept(sp->probs, NULL, sp->n_vocab, draft[i], u1, u2);
        ob_sampler_accept(smp, t);
        out[n_out++] = t;
        if (t != draft[i]) return n_out;
    }
    /* every draft kept: the next token is the target's own, an ordinary draw */
    ob_token t = ob_sampler_sample(smp, logits[k]);
    ob_sampler_accept(smp, t);
    out[n_out++] = t;
    return n_out;
}

/* ---------------- one sequence ---------------- */

int ob_spec_step(ob_spec *sp, int32_t seq, ob_sampler *smp, const ob_token *tokens, int32_t n, int32_t n_max,
                 ob_token *out, int32_t *n_out, int32_t *n_drafted) {
    *n_out = 0;
    if (n_drafted) *n_drafted = 0;
    if (n <= 0 || seq < 0 || seq >= sp->n_seq) return ob_err(OB_ERR_INVALID_ARG, "speculative step: sequence %d of %d tokens", seq, n);
    if (ob_seq_len(sp->ctx, seq) != n - 1)
        return ob_err(OB_ERR_INVALID_ARG, "speculative step: sequence %d holds %d positions, not %d", seq,
                      ob_seq_len(sp->ctx, seq), n - 1);
    int32_t k = 0;
    if (sp->p.type != OB_SPEC_NONE && n_max > 0) {
        ob_spec_req r = {seq, tokens, n, n_max, sp->draft, 0};
        if (ob_spec_draft(sp, &r, 1) < 0) {
            OB_LOGW("drafting failed (%s); decoding without a draft", ob_last_error());
            ob_err_clear();
        }
        k = r.n_draft;
    }
    int rc;
    for (;;) {
        sp->btok[0] = tokens[n - 1];
        sp->bpos[0] = n - 1;
        sp->bseq[0] = seq;
        sp->blog[0] = 1;
        for (int32_t i = 0; i < k; i++) {
            sp->btok[1 + i] = sp->draft[i];
            sp->bpos[1 + i] = n + i;
            sp->bseq[1 + i] = seq;
            sp->blog[1 + i] = 1;
        }
        ob_batch b = {k + 1, sp->btok, sp->bpos, sp->bseq, sp->blog};
        rc = ob_decode(sp->ctx, &b);
        if (rc == OB_ERR_FULL && k > 0) { /* no room for the draft: decode the one token */
            k = 0;
            continue;
        }
        break;
    }
    OB_TRY(rc);
    for (int32_t i = 0; i <= k; i++) sp->lg[i] = ob_get_logits(sp->ctx, i);
    int32_t m = ob_spec_verify(sp, smp, sp->lg, sp->draft, k, out);
    ob_spec_feedback(sp, seq, k, m - 1);
    /* keep the last token and the accepted drafts; the new last token is not in the cache */
    OB_TRY(ob_seq_remove(sp->ctx, seq, n + m - 1));
    *n_out = m;
    if (n_drafted) *n_drafted = k;
    return 0;
}
