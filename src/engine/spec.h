/*
 * spec.h - speculative decoding inside the engine: the drafters (n-gram
 * prompt lookup, a draft model) and the verification rule, split so the
 * serving engine (scheduler.c) can draft for all its running sequences at
 * once, put every draft into its one shared batch, and verify each
 * sequence on its own afterwards. ob_spec_step (onebit.h) is the same for a
 * single sequence, for `1bit run` and tests.
 *
 * Exactness: every draft token x at a position is accepted with probability
 * min(1, p(x) / q(x)), and on rejection the position gets a token drawn from
 * norm(max(0, p - q)) (Leviathan et al. 2023), where p is the distribution
 * the request's own sampler draws from at that position (penalties, top-k,
 * top-p, min-p, temperature; greedy is one-hot) and q the drafter's. Both
 * drafters here are deterministic (n-gram; the draft model drafts its
 * argmax), so q is one-hot: accept with probability p(x), else draw from p
 * without x. The token after the last accepted draft is drawn with
 * ob_sampler_sample itself, so a step with no draft is a plain decode.
 */
#ifndef OB_ENGINE_SPEC_H
#define OB_ENGINE_SPEC_H

#include <stdint.h>

#include "onebit.h"

/* From sampling.c. probs[n_vocab] gets the distribution ob_sampler_sample
 * would draw from now (no draw); ob_sampler_uniform draws from the
 * sampler's generator, in [0, 1). */
void ob_sampler_probs(ob_sampler *s, const float *logits, float *probs);
double ob_sampler_uniform(ob_sampler *s);

/* Prompt lookup: find the latest earlier place where the last m tokens of
 * tokens[0..n) occurred (m from ngram_max down to ngram_min, the first m
 * with a match wins) and copy the n_max tokens that followed it into out
 * (overlapping, as LZ77: a repeating pattern is continued past the end of
 * the text). Returns how many (0: no match, else n_max). */
int32_t ob_spec_ngram_draft(const ob_token *tokens, int32_t n, int32_t ngram_min, int32_t ngram_max, int32_t n_max,
                            ob_token *out);

/* The Leviathan et al. rule for one position. p [n_vocab] is the target's
 * distribution, q [n_vocab] the drafter's (NULL: one-hot on x), x the
 * drafted token, u1 and u2 two uniform numbers in [0, 1). Returns x when
 * accepted, else a token drawn from norm(max(0, p - q)) with u2. */
ob_token ob_spec_accept(const float *p, const float *q, int32_t n_vocab, ob_token x, double u1, double u2);

/* One sequence's draft request for ob_spec_draft. */
typedef struct ob_spec_req {
    int32_t seq;            /* sequence id (the draft model keeps its own copy under the same id) */
    const ob_token *tokens; /* the whole sequence so far, the last token not yet decoded by the target */
    int32_t n_tokens;
    int32_t n_max;          /* most tokens to draft (capped by the spec's n_max) */
    ob_token *draft;        /* [n_max] out */
    int32_t n_draft;        /* out */
} ob_spec_req;

/* Draft for several sequences (a draft model runs them in shared batches).
 * A draft shorter than n_min comes back empty. */
int ob_spec_draft(ob_spec *sp, ob_spec_req *reqs, int32_t n_reqs);

/* Verify a draft of k tokens from the target's logits: logits[i] (i = 0..k)
 * are the target's logits after the sequence's last token and after each of
 * draft[0..i). Emits the accepted drafts and one token of the target's own
 * into out[0..k+1), telling smp about each (ob_sampler_accept), and returns
 * how many (1..k+1); the draft tokens accepted are that minus one. */
int32_t ob_spec_verify(ob_spec *sp, ob_sampler *smp, const float *const *logits, const ob_token *draft, int32_t k,
                       ob_token *out);

/* The spec's settings (type NONE: off; n_max already capped to the batch). */
const ob_spec_params *ob_spec_get_params(const ob_spec *sp);
/* Forget a sequence (frees the draft model's pages for it, resets its
 * draft length). */
void ob_spec_seq_clear(ob_spec *sp, int32_t seq);
/* After verifying a sequence's draft: the draft length it may use next
 * grows by 2 when every token was kept and shrinks by 1 otherwise, within
 * 1..n_max (the rule of Hugging Face's assisted generation), so text the
 * drafter guesses badly costs short drafts and text it guesses well gets
 * long ones. */
void ob_spec_feedback(ob_spec *sp, int32_t seq, int32_t n_drafted, int32_t n_accepted);

#endif
