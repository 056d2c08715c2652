/*
 * tok_wpm.c - WordPiece (BERT) and WordLevel models.
 *
 * WordPiece splits a word greedily into the longest pieces of the
 * vocabulary, left to right; pieces after the first carry a continuation
 * prefix. If any position has no piece the whole word becomes the unknown
 * token, and so does a word longer than max_input_chars_per_word (100).
 * Hugging Face vocabularies mark continuations ("##ing"); GGUF vocabularies
 * converted by llama.cpp mark word starts instead ("▁the", "ing"), so the
 * model takes both prefixes as parameters: (first, continuation) is ("", "##")
 * for tokenizer.json and ("▁", "") for GGUF. The longest-first search is
 * quadratic in the word, which the 100-character limit bounds.
 */
#include <string.h>

#include "../core/status.h"
#include "tok_internal.h"

static ob_token lookup(tk_work *w, const char *prefix, size_t plen, const char *s, size_t n) {
    const ob_tokenizer *t = w->t;
    ob_token id;
    if (plen == 0) {
        id = tk_find(t, s, n);
    } else {
        tk_buf *b = &w->tmp;
        b->n = 0;
        if (tk_buf_put(b, prefix, plen) < 0 || tk_buf_put(b, s, n) < 0) return OB_TOKEN_NULL;
        id = tk_find(t, b->p, b->n);
    }
    return (id >= 0 && (t->tokens[id].attr & TKA_MODEL)) ? id : OB_TOKEN_NULL;
}

int tk_wpm_encode(tk_work *w, const char *s, size_t n, ob_tokens *out) {
    const ob_tokenizer *t = w->t;
    const tk_model *m = &t->model;
    if (n == 0) return 0;
    if (t->kind == OB_TOK_WORDLEVEL) {
        ob_token id = lookup(w, "", 0, s, n);
        if (id < 0) id = m->unk;
        return id >= 0 ? ob_tokens_push(out, id) : 0;
    }
    size_t chars = 0;
    for (size_t i = 0; i < n; i += (size_t)tk_u8len((unsigned char)s[i])) chars++;
    size_t mark = out->n;
    if (chars <= m->wp_max_chars) {
        size_t start = 0;
        bool bad = false;
        while (start < n) {
            size_t end = n;
            ob_token found = OB_TOKEN_NULL;
            const char *pre = start == 0 ? m->wp_first_prefix : m->cont_prefix;
            size_t plen = start == 0 ? m->wp_first_prefix_len : m->cont_prefix_len;
            /* In the GGUF form "▁x" is the word-start piece "x": it can never be
             * a continuation (Hugging Face would look up "##▁x"). */
            bool cont_marked = start > 0 && m->wp_first_prefix_len > 0 && n - start >= m->wp_first_prefix_len &&
                               memcmp(s + start, m->wp_first_prefix, m->wp_first_prefix_len) == 0;
            while (start < end && !cont_marked) {
                found = lookup(w, pre, plen, s + start, end - start);
                if (found >= 0) break;
                /* Drop the last character of the candidate. */
                do end--;
                while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80);
            }
            if (found < 0) {
                bad = true;
                break;
            }
            OB_TRY(ob_tokens_push(out, found));
            start = end;
        }
        if (!bad) return 0;
    }
    out->n = mark;
    return m->unk >= 0 ? ob_tokens_push(out, m->unk) : 0;
}
