/*
 * tok_unigram.c - Unigram language-model tokenization (T5, ALBERT, XLM-R,
 * GGUF "t5" vocabularies): the segmentation with the highest total piece
 * log-probability, found by Viterbi over the text.
 *
 * best[i] holds the best score of a segmentation of the first i bytes and the
 * last piece of it. From each character boundary, a byte trie of the pieces
 * enumerates every piece that starts there (one trie step per byte). A
 * character no piece covers is the unknown piece with a penalty of 10 below
 * the lowest score, as sentencepiece and Hugging Face do; consecutive unknown
 * pieces fuse into one, which byte fallback then spells as <0xXX> tokens.
 * Ties keep the first candidate found (the shorter piece), like both
 * references. Cost: O(n * longest piece) steps, linear in the text.
 */
#include <float.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

#define UNK_PENALTY 10.0

int tk_ugm_build(ob_tokenizer *t, bool hf) {
    tk_model *m = &t->model;
    tk_trie_free(&m->ugm_trie);
    OB_TRY(tk_trie_init(&m->ugm_trie));
    double min_score = DBL_MAX;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tk_token *tk = &t->tokens[id];
        if (!(tk->attr & TKA_MODEL) || tk->len == 0) continue;
        bool use = hf || tk->type == OB_TOKTYPE_NORMAL || tk->type == OB_TOKTYPE_USER_DEFINED ||
                   tk->type == OB_TOKTYPE_UNUSED || tk->type == OB_TOKTYPE_UNDEFINED;
        if (!use) continue;
        OB_TRY(tk_trie_insert(&m->ugm_trie, tk_text(t, id), tk->len, id));
        double sc = m->ugm_scores ? m->ugm_scores[id] : tk->score;
        if ((hf || tk->type == OB_TOKTYPE_NORMAL || tk->type == OB_TOKTYPE_UNDEFINED) && sc < min_score)
            min_score = sc;
    }
    if (min_score == DBL_MAX) min_score = 0;
    m->ugm_unk_score = min_score - UNK_PENALTY;
    m->ugm_user_zero = !hf;
    return 0;
}

static int grow(tk_work *w, size_t need) {
    if (w->ugm_cap >= need) return 0;
    size_t c = w->ugm_cap ? w->ugm_cap : 256;
    while (c < need) c *= 2;
    double *sc = ob_realloc(w->ugm_score, c * sizeof *sc);
    if (sc) w->ugm_score = sc;
    int32_t *pv = ob_realloc(w->ugm_prev, c * sizeof *pv);
    if (pv) w->ugm_prev = pv;
    int32_t *id = ob_realloc(w->ugm_id, c * sizeof *id);
    if (id) w->ugm_id = id;
    if (!sc || !pv || !id) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (Viterbi of %zu bytes)", need);
    w->ugm_cap = c;
    return 0;
}

/* Emit one piece s[a..b) chosen by Viterbi. Unknown pieces (already fused)
 * become byte tokens when every byte has one, else the unknown token. */
static int emit(tk_work *w, const char *s, size_t a, size_t b, ob_token id, ob_tokens *out) {
    const tk_model *m = &w->t->model;
    if (id != m->unk || id < 0) return id >= 0 ? ob_tokens_push(out, id) : 0;
    if (m->byte_fallback) {
        bool all = true;
        for (size_t k = a; k < b; k++) all &= m->byte_tok[(unsigned char)s[k]] >= 0;
        if (all) {
            for (size_t k = a; k < b; k++) OB_TRY(ob_tokens_push(out, m->byte_tok[(unsigned char)s[k]]));
            return 0;
        }
    }
    return ob_tokens_push(out, id);
}

int tk_ugm_encode(tk_work *w, const char *s, size_t n, ob_tokens *out) {
    const ob_tokenizer *t = w->t;
    const tk_model *m = &t->model;
    if (n == 0) return 0;
    if (n >= INT32_MAX) return ob_err(OB_ERR_RANGE, "tokenizer: %zu-byte piece is too long for Unigram", n);
    OB_TRY(grow(w, n + 1));
    double *best = w->ugm_score;
    int32_t *prev = w->ugm_prev, *bid = w->ugm_id;
    for (size_t i = 0; i <= n; i++) prev[i] = -1;
    best[0] = 0;
    for (size_t start = 0; start < n;) {
        size_t mblen = (size_t)tk_u8len((unsigned char)s[start]);
        if (mblen > n - start) mblen = n - start;
        double here = best[start];
        bool single = false;
        uint32_t node = 0;
        for (size_t k = start; k < n; k++) {
            int64_t nx = tk_trie_step(&m->ugm_trie, node, (unsigned char)s[k]);
            if (nx < 0) break;
            node = (uint32_t)nx;
            int32_t id = m->ugm_trie.value[node];
            if (id < 0) continue;
            size_t end = k + 1;
            double sc = m->ugm_scores ? m->ugm_scores[id] : t->tokens[id].score;
            if (m->ugm_user_zero && t->tokens[id].type == OB_TOKTYPE_USER_DEFINED) sc = 0;
            double cand = here + sc;
            if (prev[end] < 0 || cand > best[end]) {
                best[end] = cand;
                prev[end] = (int32_t)start;
                bid[end] = id;
            }
            if (end - start == mblen) single = true;
        }
        if (!single) {
            size_t end = start + mblen;
            double cand = here + m->ugm_unk_score;
            if (prev[end] < 0 || cand > best[end]) {
                best[end] = cand;
                prev[end] = (int32_t)start;
                bid[end] = m->unk >= 0 ? m->unk : INT32_MIN;
            }
        }
        start += mblen;
    }
    /* The best path, read backwards from the end, then emitted in order
     * with runs of unknown pieces fused. */
    size_t count = 0;
    for (int32_t end = (int32_t)n; end > 0; end = prev[end]) {
        if (prev[end] < 0) return ob_err(OB_ERR_INTERNAL, "tokenizer: Viterbi left position %d unreached", end);
        count++;
    }
    int32_t *ends = ob_malloc(count * sizeof *ends);
    if (!ends) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (Viterbi path)");
    size_t k = count;
    for (int32_t end = (int32_t)n; end > 0; end = prev[end]) ends[--k] = end;
    int rc = 0;
    for (k = 0; k < count && rc == 0;) {
        int32_t b = ends[k++];
        size_t a = (size_t)prev[b];
        ob_token id = bid[b] == INT32_MIN ? OB_TOKEN_NULL : bid[b];
        if (id == m->unk && id >= 0)
            while (k < count && bid[ends[k]] == m->unk) b = ends[k++];
        rc = emit(w, s, a, (size_t)b, id, out);
    }
    ob_free(ends);
    return rc;
}
