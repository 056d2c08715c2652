/*
 * tok_spm.c - SentencePiece BPE (GGUF "llama" vocabularies): merges chosen by
 * the score of the merged piece, not by a merge list.
 *
 * The text (spaces already written as U+2581 by the normalizer) starts as one
 * symbol per character. Every adjacent pair whose concatenation is a piece
 * of the vocabulary is a candidate with that piece's score; the best score
 * merges first, the leftmost on ties, as sentencepiece's bpe_model does. A
 * max-heap holds candidates; entries made stale by an earlier merge are
 * recognised by the combined length no longer matching. Symbols left at the
 * end that are not pieces become <0xXX> byte tokens (byte fallback).
 *
 * Only NORMAL and USER_DEFINED pieces can be formed by merging: control
 * pieces like "<s>" are never produced from text, as in sentencepiece.
 */
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

typedef struct spm_sym {
    int32_t prev, next;
    uint32_t off, len; /* bytes of the word; len 0 once merged away */
} spm_sym;

typedef struct spm_bigram {
    float score;
    int32_t left;
    uint32_t size; /* bytes of the merged text when queued */
} spm_bigram;

/* Heap order: higher score first, then the leftmost. */
static inline bool before(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

/* 4-ary heap (see tok_bpe.c). */
static void push(spm_bigram *h, size_t *n, spm_bigram x) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (!before(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static spm_bigram pop(spm_bigram *h, size_t *n) {
    spm_bigram top = h[0], last = h[--(*n)];
    size_t i = 0, len = *n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= len) break;
        size_t best = c, end = c + 4 < len ? c + 4 : len;
        for (size_t k = c + 1; k < end; k++)
            if (before(&h[k], &h[best])) best = k;
        if (!before(&h[best], &last)) break;
        h[i] = h[best];
        i = best;
    }
    if (len > 0) h[i] = last;
    return top;
}

static inline ob_token piece_id(const ob_tokenizer *t, const char *s, size_t n) {
    ob_token id = tk_find(t, s, n);
    if (id < 0) return OB_TOKEN_NULL;
    uint8_t ty = t->tokens[id].type;
    return (ty == OB_TOKTYPE_NORMAL || ty == OB_TOKTYPE_USER_DEFINED || ty == OB_TOKTYPE_UNDEFINED) ? id
                                                                                                   : OB_TOKEN_NULL;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (*cap >= need) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = ob_realloc(*p, c * elem);
    if (!q) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (%zu SPM symbols)", c);
    *p = q;
    *cap = c;
    return 0;
}

static int try_add(tk_work *w, const char *s, int32_t left) {
    if (left < 0) return 0;
    spm_sym *sym = w->sym;
    int32_t right = sym[left].next;
    if (right < 0) return 0;
    uint32_t size = sym[left].len + sym[right].len;
    ob_token id = piece_id(w->t, s + sym[left].off, size);
    if (id < 0) return 0;
    OB_TRY(grow(&w->heap, &w->heap_cap, w->heap_n + 1, sizeof(spm_bigram)));
    push(w->heap, &w->heap_n, (spm_bigram){w->t->tokens[id].score, left, size});
    return 0;
}

static int spm_word(tk_work *w, const char *s, size_t n, ob_tokens *out) {
    if (n >= UINT32_MAX) return ob_err(OB_ERR_RANGE, "tokenizer: a %zu-byte word is too long", n);
    const ob_tokenizer *t = w->t;
    if (n == 0) return 0;
    size_t nsym = 0;
    for (size_t i = 0; i < n;) {
        size_t l = (size_t)tk_u8len((unsigned char)s[i]);
        if (l > n - i) l = n - i;
        OB_TRY(grow(&w->sym, &w->sym_cap, nsym + 1, sizeof(spm_sym)));
        spm_sym *x = (spm_sym *)w->sym + nsym;
        x->off = (uint32_t)i;
        x->len = (uint32_t)l;
        x->prev = (int32_t)nsym - 1;
        x->next = i + l < n ? (int32_t)nsym + 1 : -1;
        nsym++;
        i += l;
    }
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < nsym; i++) OB_TRY(try_add(w, s, (int32_t)i));
    while (w->heap_n > 0) {
        spm_bigram b = pop(w->heap, &w->heap_n);
        spm_sym *sym = w->sym;
        spm_sym *l = &sym[b.left];
        if (l->len == 0 || l->next < 0) continue;
        spm_sym *r = &sym[l->next];
        if (r->len == 0 || l->len + r->len != b.size) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (l->next >= 0) sym[l->next].prev = b.left;
        OB_TRY(try_add(w, s, l->prev));
        OB_TRY(try_add(w, s, b.left));
    }
    const spm_sym *sym = w->sym;
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        ob_token id = piece_id(t, s + sym[i].off, sym[i].len);
        if (id >= 0) {
            OB_TRY(ob_tokens_push(out, id));
            continue;
        }
        /* Not a piece: one byte token per byte; without byte tokens, one
         * unknown token for the whole symbol. */
        bool all = true;
        for (uint32_t k = 0; k < sym[i].len; k++) all &= t->model.byte_tok[(unsigned char)s[sym[i].off + k]] >= 0;
        if (all) {
            for (uint32_t k = 0; k < sym[i].len; k++)
                OB_TRY(ob_tokens_push(out, t->model.byte_tok[(unsigned char)s[sym[i].off + k]]));
        } else if (t->model.unk >= 0) {
            OB_TRY(ob_tokens_push(out, t->model.unk));
        }
    }
    return 0;
}

/* Whole text in one go would be correct too, but one heap over a megabyte
 * is slow and nothing repeats. When the vocabulary allows it (spm_words),
 * the text is cut before every "▁" that follows another character: no piece
 * can span such a cut, merges on either side never interact, so the result
 * is the same, and repeated words come from the cache. */
int tk_spm_encode(tk_work *w, const char *s, size_t n, ob_tokens *out) {
    if (!w->t->model.spm_words) return spm_word(w, s, n, out);
    size_t start = 0;
    for (size_t i = 1; i <= n; i++) {
        bool cut = i == n || (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3) &&
                              !(i >= 3 && !memcmp(s + i - 3, "\xE2\x96\x81", 3)));
        if (!cut) continue;
        uint64_t h;
        int hit = tk_cache_lookup(w, s + start, i - start, out, &h);
        if (hit < 0) return hit;
        if (!hit) {
            size_t mark = out->n;
            OB_TRY(spm_word(w, s + start, i - start, out));
            OB_TRY(tk_cache_insert(w, s + start, i - start, h, out, mark));
        }
        start = i;
    }
    if (start < n) return spm_word(w, s + start, n - start, out);
    return 0;
}

/* Whether no NORMAL/USER_DEFINED piece has "▁" after a character other than
 * "▁" (true of SentencePiece vocabularies trained with split_by_whitespace). */
bool tk_spm_check_words(const ob_tokenizer *t) {
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->tokens[id].type;
        if (ty != OB_TOKTYPE_NORMAL && ty != OB_TOKTYPE_USER_DEFINED && ty != OB_TOKTYPE_UNDEFINED) continue;
        const char *s = tk_text(t, id);
        size_t n = t->tokens[id].len;
        for (size_t i = 1; i + 3 <= n; i++)
            if (!memcmp(s + i, "\xE2\x96\x81", 3) && !(i >= 3 && !memcmp(s + i - 3, "\xE2\x96\x81", 3)))
                return false;
    }
    return true;
}
