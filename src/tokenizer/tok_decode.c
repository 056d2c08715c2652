/*
 * tok_decode.c - ids back to text: Hugging Face's decoders (ByteLevel,
 * Metaspace, WordPiece, Replace, ByteFallback, Fuse, Strip, BPEDecoder, CTC),
 * the streaming detokenizer and whole-sequence decode.
 *
 * Hugging Face decodes a list of token strings; almost every decoder maps
 * each token on its own, given only whether it is the first. So decoding is
 * done token by token: each token's string goes through the chain and its
 * bytes join a pending buffer, from which only complete, valid UTF-8 is
 * released. Broken sequences become U+FFFD per maximal invalid subpart (what
 * from_utf8_lossy does for ByteLevel), and a character split across tokens
 * is held until its last byte arrives. The decoders that look at the joined
 * text (Strip after Fuse, BPEDecoder's last-token rule) are applied at that
 * stream level, so ob_tokenizer_decode is simply all pushes plus the flush.
 */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

struct ob_detok {
    const ob_tokenizer *t;
    unsigned flags;
    size_t index;       /* tokens decoded so far in this sequence (skipped ones excluded) */
    tk_buf pending;     /* decoded bytes not yet released */
    tk_buf out;         /* text handed to the caller */
    tk_buf a, b;        /* one token's string through the chain */
    int strip_left;     /* leading Strip content characters still to drop */
    int strip_right;    /* trailing Strip content characters to drop at the end */
    int held;           /* trailing content characters held back (<= strip_right) */
    uint32_t strip_ch;
    bool started;       /* something other than stripped characters was released */
    bool space_pending; /* BPEDecoder: the previous token ended a word */
    ob_token last;      /* CTC: previous id */
};

void tk_dec_clear(tk_dec *d) {
    ob_free(d->a);
    ob_free(d->b);
    memset(d, 0, sizeof *d);
}

/* memmem that takes empty buffers (a NULL pointer with length 0): an empty
 * pattern is found at the start, nothing is found in an empty buffer. */
static const char *find(const char *s, size_t n, const char *pat, size_t pn) {
    if (pn == 0) return s ? s : "";
    if (n < pn) return NULL;
    return memmem(s, n, pat, pn);
}

static int replace_all(const char *s, size_t n, const char *pat, size_t pn, const char *rep, size_t rn, tk_buf *o) {
    o->n = 0;
    if (pn == 0) return tk_buf_put(o, s, n);
    size_t i = 0;
    while (i < n) {
        const char *hit = find(s + i, n - i, pat, pn);
        if (!hit) break;
        OB_TRY(tk_buf_put(o, s + i, (size_t)(hit - (s + i))));
        OB_TRY(tk_buf_put(o, rep, rn));
        i = (size_t)(hit - s) + pn;
    }
    return tk_buf_put(o, s + i, n - i);
}

/* WordPiece's cleanup: the spaces BERT decoding leaves before punctuation and
 * English contractions are removed, in Hugging Face's order; *cur ends up
 * holding the result (the buffers may swap). */
static int wordpiece_cleanup(tk_buf **cur, tk_buf **other) {
    static const char *const pairs[][2] = {
        {" .", "."},     {" ?", "?"},     {" !", "!"},         {" ,", ","},   {" ' ", "'"},   {" n't", "n't"},
        {" 'm", "'m"},   {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(pairs); i++) {
        if (!find((*cur)->p, (*cur)->n, pairs[i][0], strlen(pairs[i][0]))) continue;
        OB_TRY(replace_all((*cur)->p, (*cur)->n, pairs[i][0], strlen(pairs[i][0]), pairs[i][1], strlen(pairs[i][1]),
                           *other));
        tk_buf *x = *cur;
        *cur = *other;
        *other = x;
    }
    return 0;
}

/* Run one token's string through the decoder chain. index is its position
 * in the sequence. The result is left in *res (one of d->a, d->b). */
static int chain(struct ob_detok *d, ob_token id, size_t index, tk_buf **res) {
    const ob_tokenizer *t = d->t;
    tk_buf *cur = &d->a, *other = &d->b;
    cur->n = 0;
    /* Without a decoder Hugging Face joins the token strings with spaces. */
    if (t->n_decs == 0 && index > 0) OB_TRY(tk_buf_putc(cur, ' '));
    OB_TRY(tk_buf_put(cur, tk_text(t, id), t->tokens[id].len));
    for (size_t k = 0; k < t->n_decs; k++) {
        const tk_dec *dc = &t->decs[k];
        switch (dc->kind) {
        case TD_REPLACE:
            if (!find(cur->p, cur->n, dc->a, dc->a_len)) break;
            OB_TRY(replace_all(cur->p, cur->n, dc->a, dc->a_len, dc->b, dc->b_len, other));
            goto swap;
        case TD_BYTE_FALLBACK:
            if (cur->n == 6 && memcmp(cur->p, "<0x", 3) == 0 && cur->p[5] == '>') {
                unsigned v = 0;
                bool ok = true;
                for (int i = 3; i < 5; i++) {
                    char c = cur->p[i];
                    v = v * 16 + (unsigned)(c >= '0' && c <= '9'   ? c - '0'
                                            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                                   : (ok = false, 0));
                }
                if (ok) {
                    cur->p[0] = (char)v;
                    cur->n = 1;
                }
            }
            break;
        case TD_BYTELEVEL: {
            /* In a GGUF vocabulary added tokens are text, not byte-level
             * strings: DeepSeek's "ö" (id 100003) is the two bytes of U+00F6,
             * not the byte 0xF6, as llama.cpp decodes it. Hugging Face runs
             * added tokens through the decoder like any other (a tokenizer.json
             * keeps that). Otherwise every character must be in the byte
             * alphabet, else the token stays as it is. */
            if (dc->added_raw && (t->tokens[id].attr & TKA_ADDED)) break;
            other->n = 0;
            bool ok = true;
            for (size_t i = 0; i < cur->n && ok;) {
                int l;
                uint32_t cp = tk_cp(cur->p + i, cur->n - i, &l);
                if (cp < 324 && t->cp_to_byte[cp] >= 0)
                    OB_TRY(tk_buf_putc(other, (char)t->cp_to_byte[cp]));
                else
                    ok = false;
                i += (size_t)l;
            }
            if (ok) goto swap;
            break;
        }
        case TD_METASPACE: {
            char rep[4];
            tk_buf rb = {rep, 0, sizeof rep};
            tk_buf_put_cp(&rb, dc->ch);
            if (!find(cur->p, cur->n, rep, rb.n)) break;
            bool drop = index == 0 && dc->prepend_scheme != TK_PREPEND_NEVER;
            OB_TRY(replace_all(cur->p, cur->n, rep, rb.n, drop ? "" : " ", drop ? 0 : 1, other));
            goto swap;
        }
        case TD_WORDPIECE:
            if (dc->phantom) {
                /* GGUF form: "▁word" starts a word, anything else continues
                 * one; control tokens ([CLS]) count as words. */
                bool word = (cur->n >= 3 && memcmp(cur->p, "\xE2\x96\x81", 3) == 0);
                size_t skip = word ? 3 : 0;
                if (t->tokens[id].type == OB_TOKTYPE_CONTROL) word = true;
                other->n = 0;
                if (word && index != 0) OB_TRY(tk_buf_putc(other, ' '));
                OB_TRY(tk_buf_put(other, cur->p + skip, cur->n - skip));
            } else if (index != 0) {
                other->n = 0;
                if (cur->n >= dc->a_len && (dc->a_len == 0 || memcmp(cur->p, dc->a, dc->a_len) == 0)) {
                    OB_TRY(tk_buf_put(other, cur->p + dc->a_len, cur->n - dc->a_len));
                } else {
                    OB_TRY(tk_buf_putc(other, ' '));
                    OB_TRY(tk_buf_put(other, cur->p, cur->n));
                }
            } else {
                if (dc->cleanup) OB_TRY(wordpiece_cleanup(&cur, &other));
                break;
            }
            {
                tk_buf *x = cur;
                cur = other;
                other = x;
            }
            if (dc->cleanup) OB_TRY(wordpiece_cleanup(&cur, &other));
            break;
        case TD_STRIP: {
            if (dc->whole) break; /* done on the released text */
            size_t a = 0, b = cur->n;
            for (int i = 0; i < dc->start && a < b; i++) {
                int l;
                if (tk_cp(cur->p + a, b - a, &l) != dc->ch) break;
                a += (size_t)l;
            }
            for (int i = 0; i < dc->stop && b > a; i++) {
                size_t q = b - 1;
                while (q > a && ((unsigned char)cur->p[q] & 0xC0) == 0x80) q--;
                int l;
                if (tk_cp(cur->p + q, b - q, &l) != dc->ch) break;
                b = q;
            }
            other->n = 0;
            OB_TRY(tk_buf_put(other, cur->p + a, b - a));
            goto swap;
        }
        case TD_BPE_SUFFIX: {
            bool ends = dc->a_len > 0 && cur->n >= dc->a_len && memcmp(cur->p + cur->n - dc->a_len, dc->a, dc->a_len) == 0;
            OB_TRY(replace_all(cur->p, cur->n, dc->a, dc->a_len, " ", 1, other));
            if (ends) other->n--; /* the word's space comes before the next token */
            {
                tk_buf *x = cur;
                cur = other;
                other = x;
            }
            if (d->space_pending) {
                other->n = 0;
                OB_TRY(tk_buf_putc(other, ' '));
                OB_TRY(tk_buf_put(other, cur->p, cur->n));
                tk_buf *x = cur;
                cur = other;
                other = x;
            }
            d->space_pending = ends;
            break;
        }
        case TD_CTC:
            OB_TRY(replace_all(cur->p, cur->n, dc->a, dc->a_len, "", 0, other));
            {
                tk_buf *x = cur;
                cur = other;
                other = x;
            }
            if (dc->cleanup) {
                OB_TRY(wordpiece_cleanup(&cur, &other));
                OB_TRY(replace_all(cur->p, cur->n, dc->b, dc->b_len, " ", 1, other));
                tk_buf *x = cur;
                cur = other;
                other = x;
            }
            break;
        case TD_FUSE:
        default: break;
        }
        continue;
    swap : {
        tk_buf *x = cur;
        cur = other;
        other = x;
    }
    }
    *res = cur;
    return 0;
}

/* Release the complete characters of d->pending into d->out. final: the
 * stream ends, so an unfinished character becomes U+FFFD too. */
static int release(struct ob_detok *d, bool final) {
    const unsigned char *p = (const unsigned char *)d->pending.p;
    size_t n = d->pending.n, i = 0;
    while (i < n) {
        size_t len;
        bool bad_char = false;
        if (p[i] < 0x80) {
            len = 1;
        } else {
            bool trunc;
            size_t bad = tk_utf8_bad_prefix(p + i, n - i, &trunc);
            if (bad == 0) {
                len = (size_t)tk_u8len(p[i]);
            } else if (trunc && !final) {
                break; /* wait for the rest of the character */
            } else {
                len = bad;
                bad_char = true;
            }
        }
        const char *ch = bad_char ? "\xEF\xBF\xBD" : (const char *)p + i;
        size_t chn = bad_char ? 3 : len;
        if (d->strip_left > 0 && !d->started) {
            int l;
            if (tk_cp(ch, chn, &l) == d->strip_ch) {
                d->strip_left--;
                i += len;
                continue;
            }
        }
        d->started = true;
        if (d->strip_right > 0) {
            /* Hold back up to strip_right trailing content characters: they
             * are dropped if the text ends with them. */
            int l;
            bool is_strip = tk_cp(ch, chn, &l) == d->strip_ch;
            if (is_strip && d->held < d->strip_right) {
                d->held++;
                i += len;
                continue;
            }
            if (is_strip) {
                OB_TRY(tk_buf_put_cp(&d->out, d->strip_ch)); /* the oldest held one is now inner text */
                i += len;
                continue;
            }
            for (; d->held > 0; d->held--) OB_TRY(tk_buf_put_cp(&d->out, d->strip_ch));
        }
        OB_TRY(tk_buf_put(&d->out, ch, chn));
        i += len;
    }
    if (i > 0) memmove(d->pending.p, d->pending.p + i, n - i);
    d->pending.n = n - i;
    return 0;
}

void ob_detok_reset(ob_detok *d) {
    d->index = 0;
    d->pending.n = 0;
    d->out.n = 0;
    d->started = false;
    d->space_pending = false;
    d->last = OB_TOKEN_NULL;
    d->strip_left = 0;
    d->strip_right = 0;
    d->held = 0;
    if (d->flags & OB_DECODE_NO_STRIP) return;
    /* A Strip after the tokens are joined acts on the start of the text. */
    bool joined = false;
    for (size_t k = 0; k < d->t->n_decs; k++) {
        const tk_dec *dc = &d->t->decs[k];
        if (dc->kind == TD_FUSE || dc->kind == TD_BYTELEVEL) joined = true;
        if (dc->kind == TD_STRIP && (dc->whole || joined)) {
            d->strip_left = dc->start;
            d->strip_right = dc->stop;
            d->strip_ch = dc->ch;
        }
    }
}

int ob_detok_create(const ob_tokenizer *t, unsigned flags, ob_detok **out) {
    *out = NULL;
    ob_detok *d = ob_calloc(1, sizeof *d);
    if (!d) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (detokenizer)");
    d->t = t;
    d->flags = flags;
    ob_detok_reset(d);
    *out = d;
    return 0;
}

void ob_detok_free(ob_detok *d) {
    if (!d) return;
    tk_buf_free(&d->pending);
    tk_buf_free(&d->out);
    tk_buf_free(&d->a);
    tk_buf_free(&d->b);
    ob_free(d);
}

int ob_detok_push(ob_detok *d, ob_token id, const char **text, size_t *len) {
    d->out.n = 0;
    *text = "";
    *len = 0;
    const ob_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_vocab)
        return ob_err(OB_ERR_RANGE, "detokenize: token id %d outside the vocabulary of %d", id, t->n_vocab);
    if ((d->flags & OB_DECODE_SKIP_SPECIAL) && (t->tokens[id].attr & TKA_SPECIAL)) return 0;
    bool ctc = false;
    for (size_t k = 0; k < t->n_decs; k++) ctc |= t->decs[k].kind == TD_CTC;
    if (ctc && id == d->last) return 0; /* CTC collapses repeats */
    d->last = id;
    tk_buf *res;
    OB_TRY(chain(d, id, d->index, &res));
    d->index++;
    OB_TRY(tk_buf_put(&d->pending, res->p, res->n));
    OB_TRY(release(d, false));
    *text = d->out.p ? d->out.p : "";
    *len = d->out.n;
    return 0;
}

int ob_detok_flush(ob_detok *d, const char **text, size_t *len) {
    d->out.n = 0;
    int rc = release(d, true);
    *text = d->out.p ? d->out.p : "";
    *len = d->out.n;
    /* Ready for a new sequence; the text stays valid until the next call. */
    d->index = 0;
    d->pending.n = 0;
    d->started = false;
    d->space_pending = false;
    d->last = OB_TOKEN_NULL;
    size_t keep = d->out.n;
    ob_detok_reset(d);
    d->out.n = keep;
    return rc;
}

int ob_tokenizer_decode(const ob_tokenizer *t, const ob_token *ids, size_t n, unsigned flags, char **out,
                        size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    ob_detok *d;
    OB_TRY(ob_detok_create(t, flags, &d));
    tk_buf all = {0};
    int rc = 0;
    const char *s;
    size_t l;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = ob_detok_push(d, ids[i], &s, &l);
        if (rc == 0) rc = tk_buf_put(&all, s, l);
    }
    if (rc == 0) rc = ob_detok_flush(d, &s, &l);
    if (rc == 0) rc = tk_buf_put(&all, s, l);
    if (rc == 0) rc = tk_buf_putc(&all, '\0');
    ob_detok_free(d);
    if (rc < 0) {
        tk_buf_free(&all);
        return rc;
    }
    *out = all.p;
    if (out_len) *out_len = all.n - 1;
    return 0;
}

int ob_tokenizer_token_bytes(const ob_tokenizer *t, ob_token id, char *buf, size_t cap) {
    if (id < 0 || id >= t->n_vocab)
        return ob_err(OB_ERR_RANGE, "token id %d outside the vocabulary of %d", id, t->n_vocab);
    struct ob_detok d = {.t = t, .last = OB_TOKEN_NULL};
    tk_buf *res;
    /* Position 1: the plain meaning of a piece, without first-token rules. */
    int rc = chain(&d, id, 1, &res);
    int n = rc < 0 ? rc : (int)res->n;
    if (rc == 0 && buf && cap) memcpy(buf, res->p, res->n < cap ? res->n : cap);
    tk_buf_free(&d.a);
    tk_buf_free(&d.b);
    return n;
}
