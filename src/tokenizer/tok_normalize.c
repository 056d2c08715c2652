/*
 * tok_normalize.c - the normalizers of Hugging Face tokenizers (NFC, NFD,
 * NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend,
 * BertNormalizer, Nmt, ByteLevel, Precompiled) and SentencePiece's own
 * charsmap normalizer that GGUF "t5" vocabularies use.
 *
 * Each normalizer maps valid UTF-8 to valid UTF-8; a tokenizer's list runs
 * in order over one piece of text at a time (the text between added tokens),
 * exactly like Hugging Face's NormalizedString, minus offset tracking that we
 * do not need. Unicode data comes from utf8proc.
 *
 * The charsmap is SentencePiece's "precompiled_charsmap": a darts-clone
 * double array (XOR-compressed) mapping byte strings to replacement strings.
 * Two readers exist on purpose: Hugging Face's Precompiled applies the
 * SHORTEST rule that is a prefix of each grapheme cluster (falling back to
 * single characters), SentencePiece the LONGEST rule at each position; we
 * reproduce each for the source it serves. Every index read from the blob
 * is bounds-checked, so a corrupt charsmap cannot read out of bounds.
 */
#define _GNU_SOURCE /* memmem */
#include <string.h>
#include <utf8proc.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

/* ---------------- charsmap ---------------- */

int tk_charsmap_load(tk_charsmap *cm, const void *data, size_t len) {
    memset(cm, 0, sizeof *cm);
    if (len < 4) return ob_err(OB_ERR_FORMAT, "precompiled_charsmap: %zu bytes is too short", len);
    uint32_t trie_bytes;
    memcpy(&trie_bytes, data, 4);
    if (trie_bytes % 4 != 0 || (size_t)trie_bytes > len - 4)
        return ob_err(OB_ERR_FORMAT, "precompiled_charsmap: trie size %u does not fit in %zu bytes", trie_bytes,
                      len);
    cm->blob = ob_malloc(len);
    if (!cm->blob) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (charsmap)");
    memcpy(cm->blob, data, len);
    cm->trie = (const uint32_t *)((const char *)cm->blob + 4);
    cm->trie_len = trie_bytes / 4;
    cm->strings = (const char *)cm->blob + 4 + trie_bytes;
    cm->strings_len = len - 4 - trie_bytes;
    return 0;
}

static inline uint32_t cm_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* Walk the double array over s[0..n) (stopping at a NUL byte). Reports the
 * first (shortest) or the longest rule that is a prefix of s: *mlen bytes
 * matched, replacement at *rep (*rlen bytes). Returns whether a rule matched. */
static bool cm_prefix(const tk_charsmap *cm, const char *s, size_t n, bool longest, size_t *mlen, const char **rep,
                      size_t *rlen) {
    if (cm->trie_len == 0) return false;
    size_t pos = cm_offset(cm->trie[0]);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0) break;
        pos ^= c;
        if (pos >= cm->trie_len) break;
        uint32_t u = cm->trie[pos];
        if ((u & ((1u << 31) | 0xFFu)) != c) break;
        pos ^= cm_offset(u);
        if (pos >= cm->trie_len) break;
        if ((u >> 8) & 1) {
            uint32_t v = cm->trie[pos] & ((1u << 31) - 1);
            if (v >= cm->strings_len) break;
            const char *r = cm->strings + v;
            const char *z = memchr(r, 0, cm->strings_len - v);
            if (!z) break; /* unterminated: treat as no rule */
            *mlen = i + 1;
            *rep = r;
            *rlen = (size_t)(z - r);
            found = true;
            if (!longest) return true;
        }
    }
    return found;
}

/* Hugging Face Precompiled: grapheme clusters under 6 bytes are replaced
 * whole by the shortest rule that is a prefix of them; otherwise each
 * character on its own. */
static int norm_precompiled(const tk_charsmap *cm, const char *s, size_t n, tk_buf *out) {
    size_t i = 0;
    while (i < n) {
        /* One extended grapheme cluster: s[i..j). */
        int l;
        uint32_t c1 = tk_cp(s + i, n - i, &l);
        size_t j = i + (size_t)l;
        utf8proc_int32_t state = 0;
        while (j < n) {
            uint32_t c2 = tk_cp(s + j, n - j, &l);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)c1, (utf8proc_int32_t)c2, &state)) break;
            c1 = c2;
            j += (size_t)l;
        }
        size_t m = 0, rl = 0;
        const char *r = NULL;
        if (j - i < 6 && cm_prefix(cm, s + i, j - i, false, &m, &r, &rl)) {
            OB_TRY(tk_buf_put(out, r, rl));
        } else {
            for (size_t k = i; k < j; k += (size_t)l) {
                l = tk_u8len((unsigned char)s[k]);
                if (cm_prefix(cm, s + k, (size_t)l, false, &m, &r, &rl))
                    OB_TRY(tk_buf_put(out, r, rl));
                else
                    OB_TRY(tk_buf_put(out, s + k, (size_t)l));
            }
        }
        i = j;
    }
    return 0;
}

/* SentencePiece's normalizer as llama.cpp's UGM tokenizer runs it: longest
 * charsmap rule at each position, then the whitespace options: collapse runs
 * (remove_extra_whitespaces), a leading space (add_dummy_prefix) or a
 * trailing one (treat_whitespace_as_suffix), spaces written as U+2581 when
 * escape_whitespaces. */
static int norm_spm(const tk_norm *nm, const char *s, size_t n, tk_buf *out) {
    const char *space = nm->escape_ws ? "\xE2\x96\x81" : " ";
    size_t space_len = nm->escape_ws ? 3 : 1;
    bool prepend = !nm->ws_suffix && nm->add_space_prefix;
    bool append = nm->ws_suffix && nm->add_space_prefix;
    bool merge = nm->remove_extra_ws;
    bool prepended = false, in_word = false;
    size_t i = 0;
    while (i < n) {
        const char *r = NULL;
        size_t m = 0, rl = 0; /* set by cm_prefix or below (newer gcc cannot tell) */
        if (!cm_prefix(&nm->cmap, s + i, n - i, true, &m, &r, &rl)) {
            m = (size_t)tk_u8len((unsigned char)s[i]);
            if (m > n - i) m = n - i;
            r = s + i;
            rl = m;
        }
        for (size_t k = 0; k < rl; k++) {
            char c = r[k];
            if (c != ' ') {
                if (!in_word) {
                    in_word = true;
                    if ((prepend && !prepended) || merge) {
                        OB_TRY(tk_buf_put(out, space, space_len));
                        prepended = true;
                    }
                }
                OB_TRY(tk_buf_putc(out, c));
            } else {
                in_word = false;
                if (!merge) OB_TRY(tk_buf_put(out, space, space_len));
            }
        }
        i += m;
    }
    if (append) OB_TRY(tk_buf_put(out, space, space_len));
    return 0;
}

/* ---------------- the simple normalizers ---------------- */

static int norm_lower(const char *s, size_t n, tk_buf *out) {
    OB_TRY(tk_buf_reserve(out, n));
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            out->p[out->n++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            i++;
            continue;
        }
        int l;
        uint32_t cp = tk_cp(s + i, n - i, &l);
        OB_TRY(tk_lower_cp(out, cp));
        i += (size_t)l;
    }
    return 0;
}

static int norm_strip(const char *s, size_t n, bool left, bool right, tk_buf *out) {
    size_t a = 0, b = n;
    while (left && a < b) {
        int l;
        uint32_t cp = tk_cp(s + a, b - a, &l);
        if (!tk_is_whitespace(cp)) break;
        a += (size_t)l;
    }
    while (right && b > a) {
        size_t k = b - 1;
        while (k > a && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        int l;
        uint32_t cp = tk_cp(s + k, b - k, &l);
        if (!tk_is_whitespace(cp)) break;
        b = k;
    }
    return tk_buf_put(out, s + a, b - a);
}

/* Keep characters for which keep(cp) holds (mode 0: not a mark; 1: not Mn). */
static int norm_filter_marks(const char *s, size_t n, bool mn_only, tk_buf *out) {
    for (size_t i = 0; i < n;) {
        int l;
        uint32_t cp = tk_cp(s + i, n - i, &l);
        if (!(cp >= 0x300 && (mn_only ? tk_is_mn(cp) : tk_is_mark(cp)))) OB_TRY(tk_buf_put(out, s + i, (size_t)l));
        i += (size_t)l;
    }
    return 0;
}

typedef struct replace_ctx {
    const char *s;
    size_t prev;
    const tk_norm *nm;
    tk_buf *out;
} replace_ctx;

static int replace_cb(void *user, size_t start, size_t end) {
    replace_ctx *c = user;
    OB_TRY(tk_buf_put(c->out, c->s + c->prev, start - c->prev));
    OB_TRY(tk_buf_put(c->out, c->nm->content, c->nm->content_len));
    c->prev = end;
    return 0;
}

static int norm_replace(tk_work *w, const tk_norm *nm, const char *s, size_t n, tk_buf *out) {
    if (nm->pattern) {
        if (nm->pattern_len == 0) return tk_buf_put(out, s, n);
        size_t i = 0;
        while (i < n) {
            const char *hit = memmem(s + i, n - i, nm->pattern, nm->pattern_len);
            if (!hit) break;
            OB_TRY(tk_buf_put(out, s + i, (size_t)(hit - (s + i))));
            OB_TRY(tk_buf_put(out, nm->content, nm->content_len));
            i = (size_t)(hit - s) + nm->pattern_len;
        }
        return tk_buf_put(out, s + i, n - i);
    }
    replace_ctx c = {s, 0, nm, out};
    OB_TRY(tk_regex_each(nm->re, &w->match, s, n, replace_cb, &c));
    return tk_buf_put(out, s + c.prev, n - c.prev);
}

static bool bert_space(uint32_t cp) { return cp == '\t' || cp == '\n' || cp == '\r' || tk_is_whitespace(cp); }

static int norm_bert_clean(const char *s, size_t n, bool chinese, tk_buf *out) {
    for (size_t i = 0; i < n;) {
        int l;
        uint32_t cp = tk_cp(s + i, n - i, &l);
        i += (size_t)l;
        bool control = cp != '\t' && cp != '\n' && cp != '\r' && tk_is_other(cp);
        if (cp == 0 || cp == 0xFFFD || control) continue;
        if (bert_space(cp)) {
            OB_TRY(tk_buf_putc(out, ' '));
        } else if (chinese && tk_is_bert_chinese(cp)) {
            OB_TRY(tk_buf_putc(out, ' '));
            OB_TRY(tk_buf_put_cp(out, cp));
            OB_TRY(tk_buf_putc(out, ' '));
        } else {
            OB_TRY(tk_buf_put(out, s + i - (size_t)l, (size_t)l));
        }
    }
    return 0;
}

static int norm_chinese(const char *s, size_t n, tk_buf *out) {
    for (size_t i = 0; i < n;) {
        int l;
        uint32_t cp = tk_cp(s + i, n - i, &l);
        if (tk_is_bert_chinese(cp)) {
            OB_TRY(tk_buf_putc(out, ' '));
            OB_TRY(tk_buf_put(out, s + i, (size_t)l));
            OB_TRY(tk_buf_putc(out, ' '));
        } else {
            OB_TRY(tk_buf_put(out, s + i, (size_t)l));
        }
        i += (size_t)l;
    }
    return 0;
}

static int norm_nmt(const char *s, size_t n, tk_buf *out) {
    for (size_t i = 0; i < n;) {
        int l;
        uint32_t cp = tk_cp(s + i, n - i, &l);
        i += (size_t)l;
        if ((cp >= 1 && cp <= 8) || cp == 0xB || (cp >= 0xE && cp <= 0x1F) || cp == 0x7F || cp == 0x8F ||
            cp == 0x9F)
            continue;
        if (cp == 9 || cp == 0xA || cp == 0xC || cp == 0xD || cp == 0x1680 || (cp >= 0x200B && cp <= 0x200F) ||
            cp == 0x2028 || cp == 0x2029 || cp == 0x2581 || cp == 0xFEFF || cp == 0xFFFD)
            OB_TRY(tk_buf_putc(out, ' '));
        else
            OB_TRY(tk_buf_put(out, s + i - (size_t)l, (size_t)l));
    }
    return 0;
}

static int norm_bytelevel(const ob_tokenizer *t, const char *s, size_t n, tk_buf *out) {
    for (size_t i = 0; i < n; i++) OB_TRY(tk_buf_put_cp(out, t->byte_to_cp[(unsigned char)s[i]]));
    return 0;
}

/* Run one step; the result replaces *dst (cleared first). */
static int run_step(tk_work *w, const tk_norm *nm, const char *s, size_t n, tk_buf *dst) {
    dst->n = 0;
    switch (nm->kind) {
    case TN_NFC: return tk_unicode_normalize(s, n, TK_NF_NFC, dst);
    case TN_NFD: return tk_unicode_normalize(s, n, TK_NF_NFD, dst);
    case TN_NFKC: return tk_unicode_normalize(s, n, TK_NF_NFKC, dst);
    case TN_NFKD: return tk_unicode_normalize(s, n, TK_NF_NFKD, dst);
    case TN_LOWER: return norm_lower(s, n, dst);
    case TN_STRIP: return norm_strip(s, n, nm->strip_left, nm->strip_right, dst);
    case TN_STRIP_ACCENTS: return norm_filter_marks(s, n, false, dst);
    case TN_REPLACE: return norm_replace(w, nm, s, n, dst);
    case TN_PREPEND:
        if (n == 0) return 0;
        OB_TRY(tk_buf_put(dst, nm->content, nm->content_len));
        return tk_buf_put(dst, s, n);
    case TN_NMT: return norm_nmt(s, n, dst);
    case TN_BYTELEVEL: return norm_bytelevel(w->t, s, n, dst);
    case TN_PRECOMPILED: return norm_precompiled(&nm->cmap, s, n, dst);
    case TN_SPM_CHARSMAP: return norm_spm(nm, s, n, dst);
    default: return ob_err(OB_ERR_INTERNAL, "tokenizer: unknown normalizer %d", nm->kind);
    }
}

/* BertNormalizer is four steps in a fixed order; run them through the two
 * scratch buffers. */
static int run_bert(tk_work *w, const tk_norm *nm, const char *s, size_t n, tk_buf *dst) {
    tk_buf *a = dst, *b = &w->tmp2;
    const char *cur = s;
    size_t cur_n = n;
    tk_buf *next = a;
    int stage = 0;
#define BERT_STAGE(call)                           \
    do {                                           \
        next->n = 0;                               \
        OB_TRY(call);                              \
        cur = next->p;                             \
        cur_n = next->n;                           \
        next = next == a ? b : a;                  \
        stage++;                                   \
    } while (0)
    if (nm->clean_text)
        BERT_STAGE(norm_bert_clean(cur, cur_n, false, next));
    if (nm->chinese_chars) BERT_STAGE(norm_chinese(cur, cur_n, next));
    if (nm->strip_accents) {
        BERT_STAGE(tk_unicode_normalize(cur, cur_n, TK_NF_NFD, next));
        BERT_STAGE(norm_filter_marks(cur, cur_n, true, next));
    }
    if (nm->lowercase) BERT_STAGE(norm_lower(cur, cur_n, next));
#undef BERT_STAGE
    if (stage == 0) {
        dst->n = 0;
        return tk_buf_put(dst, s, n);
    }
    if (cur != dst->p || cur_n != dst->n) {
        /* The last stage wrote into tmp2: copy back into dst. */
        dst->n = 0;
        OB_TRY(tk_buf_put(dst, cur, cur_n));
    }
    return 0;
}

int tk_normalize(tk_work *w, const char *s, size_t n, tk_buf *out) {
    const ob_tokenizer *t = w->t;
    if (t->n_norms == 0 || n == 0) return tk_buf_put(out, s, n);
    const char *cur = s;
    size_t cur_n = n;
    for (size_t i = 0; i < t->n_norms; i++) {
        const tk_norm *nm = &t->norms[i];
        tk_buf *dst = (cur == w->tmp.p && w->tmp.p) ? &w->tmp2 : &w->tmp;
        if (nm->kind == TN_BERT) {
            /* run_bert uses tmp2 as its own scratch: make dst tmp. */
            if (dst == &w->tmp2) {
                tk_buf swap = w->tmp;
                w->tmp = w->tmp2;
                w->tmp2 = swap;
                dst = &w->tmp;
                /* cur pointed into the old tmp, now tmp2: still valid. */
            }
            OB_TRY(run_bert(w, nm, cur, cur_n, dst));
        } else {
            OB_TRY(run_step(w, nm, cur, cur_n, dst));
        }
        cur = dst->p;
        cur_n = dst->n;
        if (cur_n == 0) break;
    }
    return tk_buf_put(out, cur, cur_n);
}

void tk_norm_clear(tk_norm *nm) {
    tk_regex_free(nm->re);
    ob_free(nm->pattern);
    ob_free(nm->content);
    ob_free(nm->cmap.blob);
    memset(nm, 0, sizeof *nm);
}
