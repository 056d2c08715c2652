/*
 * tok_pretok.c - pre-tokenizers: cut normalized text into the pieces the
 * model sees, as Hugging Face's PreTokenizedString does (Split with its five
 * delimiter behaviours, ByteLevel, Metaspace, Whitespace, WhitespaceSplit,
 * Digits, Punctuation, BertPreTokenizer, CharDelimiterSplit; a Sequence is
 * simply the list of steps in order).
 *
 * Pieces live in a double-buffered list (tk_work.pieces). Steps that only cut
 * keep pointing into the same text buffer; steps that rewrite text (ByteLevel
 * maps bytes to its printable alphabet, Metaspace turns spaces into U+2581)
 * write a new buffer. Pieces that are already tokens (added tokens) pass
 * through untouched; empty pieces are dropped, as Hugging Face drops them.
 */
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

int tk_pieces_push(tk_pieces *p, size_t off, size_t len, ob_token id, uint8_t at_start) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        tk_piece *v = ob_realloc(p->v, cap * sizeof *v);
        if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (pieces)");
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = (tk_piece){off, len, id, at_start};
    return 0;
}

/* ---- segments: a piece cut into (offset, length, is_match) runs ---- */

typedef struct seg_ctx {
    tk_pieces *segs;
    size_t base, prev;
} seg_ctx;

static int seg_cb(void *user, size_t start, size_t end) {
    seg_ctx *c = user;
    if (c->prev != start) OB_TRY(tk_pieces_push(c->segs, c->base + c->prev, start - c->prev, 0, 0));
    OB_TRY(tk_pieces_push(c->segs, c->base + start, end - start, 1, 0));
    c->prev = end;
    return 0;
}

static int segs_regex(tk_work *w, const tk_regex *re, const char *text, size_t off, size_t len) {
    seg_ctx c = {&w->segs, off, 0};
    OB_TRY(tk_regex_each(re, &w->match, text + off, len, seg_cb, &c));
    if (c.prev != len) OB_TRY(tk_pieces_push(&w->segs, off + c.prev, len - c.prev, 0, 0));
    return 0;
}

typedef bool (*char_pred)(uint32_t cp, uint32_t arg);

static bool pred_ws(uint32_t cp, uint32_t arg) {
    (void)arg;
    return tk_is_whitespace(cp);
}
static bool pred_num(uint32_t cp, uint32_t arg) {
    (void)arg;
    return tk_is_numeric(cp);
}
static bool pred_punct(uint32_t cp, uint32_t arg) {
    (void)arg;
    return tk_is_punct(cp);
}
static bool pred_eq(uint32_t cp, uint32_t arg) { return cp == arg; }

/* Every matching character is its own match segment; runs of others form
 * one gap (Hugging Face's Pattern for Fn(char) -> bool). */
static int segs_chars(tk_work *w, char_pred pred, uint32_t arg, const char *text, size_t off, size_t len) {
    size_t last = 0;
    for (size_t i = 0; i < len;) {
        int l;
        uint32_t cp = tk_cp(text + off + i, len - i, &l);
        if (pred(cp, arg)) {
            if (last < i) OB_TRY(tk_pieces_push(&w->segs, off + last, i - last, 0, 0));
            OB_TRY(tk_pieces_push(&w->segs, off + i, (size_t)l, 1, 0));
            last = i + (size_t)l;
        }
        i += (size_t)l;
    }
    if (last < len) OB_TRY(tk_pieces_push(&w->segs, off + last, len - last, 0, 0));
    return 0;
}

/* Turn the segments of piece p into output pieces per behaviour. */
static int emit_segments(tk_work *w, const tk_piece *p, int behavior, bool invert, tk_pieces *out) {
    tk_pieces *s = &w->segs;
    if (invert)
        for (size_t i = 0; i < s->n; i++) s->v[i].id = !s->v[i].id;
    size_t first_out = out->n;
    switch (behavior) {
    case TB_ISOLATED:
        for (size_t i = 0; i < s->n; i++) OB_TRY(tk_pieces_push(out, s->v[i].off, s->v[i].len, -1, 0));
        break;
    case TB_REMOVED:
        for (size_t i = 0; i < s->n; i++)
            if (!s->v[i].id) OB_TRY(tk_pieces_push(out, s->v[i].off, s->v[i].len, -1, 0));
        break;
    case TB_CONTIGUOUS: {
        int prev = 0;
        for (size_t i = 0; i < s->n; i++) {
            int m = s->v[i].id;
            if (m == prev && out->n > first_out)
                out->v[out->n - 1].len = s->v[i].off + s->v[i].len - out->v[out->n - 1].off;
            else
                OB_TRY(tk_pieces_push(out, s->v[i].off, s->v[i].len, -1, 0));
            prev = m;
        }
        break;
    }
    case TB_MERGED_PREV: {
        int prev = 0;
        for (size_t i = 0; i < s->n; i++) {
            int m = s->v[i].id;
            if (m && !prev && out->n > first_out)
                out->v[out->n - 1].len = s->v[i].off + s->v[i].len - out->v[out->n - 1].off;
            else
                OB_TRY(tk_pieces_push(out, s->v[i].off, s->v[i].len, -1, 0));
            prev = m;
        }
        break;
    }
    case TB_MERGED_NEXT: {
        /* Walk backwards: a match glues itself to the (non-match) piece after it. */
        size_t start = out->n;
        int prev = 0;
        for (size_t k = s->n; k-- > 0;) {
            int m = s->v[k].id;
            if (m && !prev && out->n > start) {
                tk_piece *q = &out->v[out->n - 1];
                q->len = q->off + q->len - s->v[k].off;
                q->off = s->v[k].off;
            } else {
                OB_TRY(tk_pieces_push(out, s->v[k].off, s->v[k].len, -1, 0));
            }
            prev = m;
        }
        for (size_t a = start, b = out->n; a + 1 < b; a++, b--) {
            tk_piece tmp = out->v[a];
            out->v[a] = out->v[b - 1];
            out->v[b - 1] = tmp;
        }
        break;
    }
    default: return ob_err(OB_ERR_INTERNAL, "tokenizer: unknown split behaviour %d", behavior);
    }
    /* Drop empties; the first surviving piece inherits "at start". */
    size_t k = first_out;
    for (size_t i = first_out; i < out->n; i++)
        if (out->v[i].len > 0) out->v[k++] = out->v[i];
    out->n = k;
    for (size_t i = first_out; i < out->n; i++) out->v[i].at_start = p->at_start && out->v[i].off == p->off;
    return 0;
}

/* A step that only cuts: new piece list over the same text. */
static int step_split(tk_work *w, const tk_pre *pre) {
    tk_pieces *in = &w->pieces[w->pcur], *out = &w->pieces[!w->pcur];
    const char *text = w->text[w->cur].p;
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const tk_piece *p = &in->v[i];
        if (p->id >= 0) {
            OB_TRY(tk_pieces_push(out, p->off, p->len, p->id, p->at_start));
            continue;
        }
        w->segs.n = 0;
        int behavior = pre->behavior;
        bool invert = pre->invert;
        switch (pre->kind) {
        case TP_SPLIT: OB_TRY(segs_regex(w, pre->re, text, p->off, p->len)); break;
        case TP_WHITESPACE:
            OB_TRY(segs_regex(w, pre->re, text, p->off, p->len));
            behavior = TB_REMOVED;
            invert = true;
            break;
        case TP_WHITESPACE_SPLIT:
            OB_TRY(segs_chars(w, pred_ws, 0, text, p->off, p->len));
            behavior = TB_REMOVED;
            break;
        case TP_DIGITS:
            OB_TRY(segs_chars(w, pred_num, 0, text, p->off, p->len));
            behavior = pre->individual_digits ? TB_ISOLATED : TB_CONTIGUOUS;
            break;
        case TP_PUNCT: OB_TRY(segs_chars(w, pred_punct, 0, text, p->off, p->len)); break;
        case TP_CHAR_DELIM:
            OB_TRY(segs_chars(w, pred_eq, pre->delimiter, text, p->off, p->len));
            behavior = TB_REMOVED;
            break;
        default: return ob_err(OB_ERR_INTERNAL, "tokenizer: pre-tokenizer %d is not a split", pre->kind);
        }
        OB_TRY(emit_segments(w, p, behavior, invert, out));
    }
    w->pcur = !w->pcur;
    return 0;
}

/* BertPreTokenizer: whitespace removed, then punctuation isolated. */
static int step_bert(tk_work *w) {
    tk_pre ws = {.kind = TP_WHITESPACE_SPLIT};
    OB_TRY(step_split(w, &ws));
    tk_pre pu = {.kind = TP_PUNCT, .behavior = TB_ISOLATED};
    return step_split(w, &pu);
}

/* ByteLevel: optional prefix space, optional GPT-2 regex split, then every
 * byte written as its printable stand-in (so the model only sees the 256
 * characters of the byte alphabet). */
static int step_bytelevel(tk_work *w, const tk_pre *pre) {
    const ob_tokenizer *t = w->t;
    if (pre->add_prefix_space) {
        /* Prefix a space to every piece that does not start with one. */
        tk_pieces *in = &w->pieces[w->pcur], *out = &w->pieces[!w->pcur];
        tk_buf *src = &w->text[w->cur], *dst = &w->text[!w->cur];
        dst->n = 0;
        out->n = 0;
        for (size_t i = 0; i < in->n; i++) {
            const tk_piece *p = &in->v[i];
            if (p->id >= 0) {
                OB_TRY(tk_pieces_push(out, 0, 0, p->id, p->at_start));
                continue;
            }
            size_t off = dst->n;
            if (src->p[p->off] != ' ') OB_TRY(tk_buf_putc(dst, ' '));
            OB_TRY(tk_buf_put(dst, src->p + p->off, p->len));
            OB_TRY(tk_pieces_push(out, off, dst->n - off, -1, p->at_start));
        }
        w->cur = !w->cur;
        w->pcur = !w->pcur;
    }
    if (pre->re) {
        tk_pre sp = {.kind = TP_SPLIT, .re = pre->re, .behavior = TB_ISOLATED};
        OB_TRY(step_split(w, &sp));
    }
    tk_pieces *ps = &w->pieces[w->pcur];
    tk_buf *src = &w->text[w->cur], *dst = &w->text[!w->cur];
    dst->n = 0;
    for (size_t i = 0; i < ps->n; i++) {
        tk_piece *p = &ps->v[i];
        if (p->id >= 0) continue;
        size_t off = dst->n;
        OB_TRY(tk_buf_reserve(dst, p->len * 2));
        for (size_t k = 0; k < p->len; k++) {
            uint16_t cp = t->byte_to_cp[(unsigned char)src->p[p->off + k]];
            if (cp < 0x80) {
                dst->p[dst->n++] = (char)cp;
            } else {
                dst->p[dst->n++] = (char)(0xC0 | (cp >> 6));
                dst->p[dst->n++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        p->off = off;
        p->len = dst->n - off;
    }
    w->cur = !w->cur;
    return 0;
}

/* Metaspace: spaces become the replacement character, a replacement is
 * prepended per the scheme, and (split) each replacement starts a piece. */
static int step_metaspace(tk_work *w, const tk_pre *pre) {
    tk_pieces *ps = &w->pieces[w->pcur];
    tk_buf *src = &w->text[w->cur], *dst = &w->text[!w->cur];
    char rep[4];
    size_t rep_len;
    {
        tk_buf tmp = {rep, 0, sizeof rep};
        tk_buf_put_cp(&tmp, pre->replacement);
        rep_len = tmp.n;
    }
    dst->n = 0;
    for (size_t i = 0; i < ps->n; i++) {
        tk_piece *p = &ps->v[i];
        if (p->id >= 0) continue;
        size_t off = dst->n;
        const char *s = src->p + p->off;
        /* After the space replacement the piece starts with the replacement
         * exactly when it started with a space or with the replacement. */
        bool starts_rep = s[0] == ' ' || (p->len >= rep_len && memcmp(s, rep, rep_len) == 0);
        bool prepend = pre->prepend_scheme == TK_PREPEND_ALWAYS ||
                       (pre->prepend_scheme == TK_PREPEND_FIRST && p->at_start);
        if (prepend && !starts_rep) OB_TRY(tk_buf_put(dst, rep, rep_len));
        for (size_t k = 0; k < p->len; k++) {
            if (s[k] == ' ')
                OB_TRY(tk_buf_put(dst, rep, rep_len));
            else
                OB_TRY(tk_buf_putc(dst, s[k]));
        }
        p->off = off;
        p->len = dst->n - off;
    }
    w->cur = !w->cur;
    if (!pre->split) return 0;
    tk_pieces *in = &w->pieces[w->pcur], *out = &w->pieces[!w->pcur];
    const char *text = w->text[w->cur].p;
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const tk_piece *p = &in->v[i];
        if (p->id >= 0) {
            OB_TRY(tk_pieces_push(out, p->off, p->len, p->id, p->at_start));
            continue;
        }
        w->segs.n = 0;
        OB_TRY(segs_chars(w, pred_eq, pre->replacement, text, p->off, p->len));
        OB_TRY(emit_segments(w, p, TB_MERGED_NEXT, false, out));
    }
    w->pcur = !w->pcur;
    return 0;
}

int tk_pretokenize(tk_work *w) {
    const ob_tokenizer *t = w->t;
    for (size_t i = 0; i < t->n_pres; i++) {
        const tk_pre *pre = &t->pres[i];
        switch (pre->kind) {
        case TP_BYTELEVEL: OB_TRY(step_bytelevel(w, pre)); break;
        case TP_METASPACE: OB_TRY(step_metaspace(w, pre)); break;
        case TP_BERT: OB_TRY(step_bert(w)); break;
        default: OB_TRY(step_split(w, pre)); break;
        }
    }
    return 0;
}

void tk_pre_clear(tk_pre *p) {
    tk_regex_free(p->re);
    memset(p, 0, sizeof *p);
}
