/*
 * tok_encode.c - ob_tokenizer_encode: the whole pipeline for one input.
 *
 *   1. bytes -> valid UTF-8 (maximal invalid subparts become U+FFFD)
 *   2. added tokens that match raw text are cut out (leftmost-longest, with
 *      single_word / lstrip / rstrip; special ones only with PARSE_SPECIAL)
 *   3. each remaining piece is normalized on its own
 *   4. added tokens that match normalized text are cut out
 *   5. pre-tokenizers cut pieces further (tok_pretok.c)
 *   6. the model turns each piece into ids
 *   7. the post-processor adds BOS/EOS (or CLS/SEP) with ADD_SPECIAL
 * This is Hugging Face's TokenizerImpl::encode for one sequence; GGUF
 * vocabularies are expressed in the same steps at load time.
 */
#include <string.h>

#include "../core/status.h"
#include "tok_internal.h"

/* Rust regex \w for the character at s (single_word added tokens). */
static bool is_word_char(tk_work *w, const char *s, size_t n) {
    if (!w->t->word_re) return false;
    int l;
    tk_cp(s, n, &l);
    return tk_regex_match_prefix(w->t->word_re, &w->match, s, (size_t)l) > 0;
}

static size_t prev_char(const char *s, size_t i) {
    do i--;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80);
    return i;
}

/* Cut the non-token pieces of the current list at added-token matches. */
static int split_added(tk_work *w, const tk_trie *trie, bool parse_special) {
    const ob_tokenizer *t = w->t;
    tk_pieces *in = &w->pieces[w->pcur], *out = &w->pieces[!w->pcur];
    const char *text = w->text[w->cur].p;
    out->n = 0;
    for (size_t pi = 0; pi < in->n; pi++) {
        const tk_piece *p = &in->v[pi];
        if (p->id >= 0) {
            OB_TRY(tk_pieces_push(out, p->off, p->len, p->id, p->at_start));
            continue;
        }
        const char *s = text + p->off;
        size_t n = p->len;
        size_t done = 0; /* start_offset: end of the last accepted match */
        size_t pos = 0;  /* where the next search starts */
        while (pos < n) {
            /* Leftmost-longest: the first position with a match, its longest match. */
            size_t ms = 0, me = 0;
            int32_t mid = -1;
            for (size_t i = pos; i < n && mid < 0; i++) {
                uint32_t node = 0;
                for (size_t k = i; k < n; k++) {
                    int64_t nx = tk_trie_step(trie, node, (unsigned char)s[k]);
                    if (nx < 0) break;
                    node = (uint32_t)nx;
                    if (trie->value[node] >= 0) {
                        mid = trie->value[node];
                        ms = i;
                        me = k + 1;
                    }
                }
            }
            if (mid < 0) break;
            pos = me;
            const tk_token *tk = &t->tokens[mid];
            if ((tk->attr & TKA_SPECIAL) && !parse_special) continue;
            size_t start = ms, stop = me;
            if (tk->attr & TKA_SINGLE_WORD) {
                bool start_ok = ms == 0 || !is_word_char(w, s + prev_char(s, ms), n - prev_char(s, ms));
                bool stop_ok = me == n || !is_word_char(w, s + me, n - me);
                if (!start_ok || !stop_ok) continue;
            }
            if (tk->attr & TKA_LSTRIP) {
                size_t ns = start;
                while (ns > 0) {
                    size_t pc = prev_char(s, ns);
                    int l;
                    if (!tk_is_whitespace(tk_cp(s + pc, n - pc, &l))) break;
                    ns = pc;
                }
                start = ns > done ? ns : done;
            }
            if (tk->attr & TKA_RSTRIP) {
                while (stop < n) {
                    int l;
                    if (!tk_is_whitespace(tk_cp(s + stop, n - stop, &l))) break;
                    stop += (size_t)l;
                }
            }
            if (done < start) OB_TRY(tk_pieces_push(out, p->off + done, start - done, -1, p->at_start && done == 0));
            OB_TRY(tk_pieces_push(out, p->off + start, stop - start, mid, 0));
            done = stop;
        }
        if (done < n) OB_TRY(tk_pieces_push(out, p->off + done, n - done, -1, p->at_start && done == 0));
    }
    w->pcur = !w->pcur;
    return 0;
}

/* Normalize every text piece into the other buffer. */
static int normalize_pieces(tk_work *w) {
    if (w->t->n_norms == 0) return 0;
    tk_pieces *ps = &w->pieces[w->pcur];
    tk_buf *src = &w->text[w->cur], *dst = &w->text[!w->cur];
    dst->n = 0;
    size_t k = 0;
    for (size_t i = 0; i < ps->n; i++) {
        tk_piece p = ps->v[i];
        if (p.id < 0) {
            size_t off = dst->n;
            OB_TRY(tk_normalize(w, src->p + p.off, p.len, dst));
            p.off = off;
            p.len = dst->n - off;
            if (p.len == 0) continue; /* normalized away */
        }
        ps->v[k++] = p;
    }
    ps->n = k;
    w->cur = !w->cur;
    return 0;
}

/* Append the ids of every piece: added tokens as they are, text through the model. */
static int run_model(tk_work *w, ob_tokens *out) {
    const ob_tokenizer *t = w->t;
    const tk_pieces *ps = &w->pieces[w->pcur];
    const char *text = w->text[w->cur].p;
    for (size_t i = 0; i < ps->n; i++) {
        const tk_piece *p = &ps->v[i];
        if (p->id >= 0) {
            OB_TRY(ob_tokens_push(out, p->id));
            continue;
        }
        switch (t->kind) {
        case OB_TOK_BPE: OB_TRY(tk_bpe_encode(w, text + p->off, p->len, out)); break;
        case OB_TOK_SPM: OB_TRY(tk_spm_encode(w, text + p->off, p->len, out)); break;
        case OB_TOK_WPM:
        case OB_TOK_WORDLEVEL: OB_TRY(tk_wpm_encode(w, text + p->off, p->len, out)); break;
        case OB_TOK_UGM: OB_TRY(tk_ugm_encode(w, text + p->off, p->len, out)); break;
        default: return ob_err(OB_ERR_INTERNAL, "tokenizer: unknown model kind %d", t->kind);
        }
    }
    return 0;
}

/* The pipeline of the file comment, appending to out. */
static int encode(tk_work *w, const char *text, size_t len, unsigned flags, ob_tokens *out) {
    const ob_tokenizer *t = w->t;
    bool replaced;
    OB_TRY(tk_match_init(&w->match));
    OB_TRY(tk_utf8_repair(text, len, &w->text[0], &replaced));
    w->cur = 0;
    w->pcur = 0;
    if (flags & OB_ENCODE_ADD_SPECIAL)
        for (int i = 0; i < t->n_post_prefix; i++) OB_TRY(ob_tokens_push(out, t->post_prefix[i]));
    if (w->text[0].n > 0) {
        OB_TRY(tk_pieces_push(&w->pieces[0], 0, w->text[0].n, -1, 1));
        bool parse_special = (flags & OB_ENCODE_PARSE_SPECIAL) != 0;
        if (t->n_added_raw) OB_TRY(split_added(w, &t->added_raw, parse_special));
        OB_TRY(normalize_pieces(w));
        if (t->n_added_norm) OB_TRY(split_added(w, &t->added_norm, parse_special));
        OB_TRY(tk_pretokenize(w));
        OB_TRY(run_model(w, out));
    }
    if (flags & OB_ENCODE_ADD_SPECIAL)
        for (int i = 0; i < t->n_post_suffix; i++) OB_TRY(ob_tokens_push(out, t->post_suffix[i]));
    return 0;
}

int ob_tokenizer_encode(const ob_tokenizer *t, const char *text, size_t len, unsigned flags, ob_tokens *out) {
    if (!t || !out || (!text && len)) return ob_err(OB_ERR_INVALID_ARG, "ob_tokenizer_encode: NULL argument");
    /* Offsets inside the models are 32-bit; 1 GiB of text is far beyond any prompt. */
    if (len > (1u << 30)) return ob_err(OB_ERR_RANGE, "ob_tokenizer_encode: %zu bytes is more than 1 GiB", len);
    size_t before = out->n;
    tk_work w = {.t = t};
    int rc = encode(&w, text ? text : "", len, flags, out);
    tk_work_free(&w);
    if (rc < 0) out->n = before;
    return rc;
}
