/*
 * tok_util.c - the tokenizer's small building blocks: a byte buffer, an
 * integer hash map, a byte trie, Unicode predicates over utf8proc's tables
 * and the UTF-8 repair that turns arbitrary bytes into valid text.
 *
 * Nothing here knows about vocabularies or models. The predicates mirror the
 * Rust functions Hugging Face tokenizers calls (char::is_whitespace,
 * char::is_numeric, is_punctuation, ...) so the pipeline can reproduce it;
 * the category data itself always comes from utf8proc.
 */
#include <string.h>
#include <utf8proc.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

/* ---------------- byte buffer ---------------- */

int tk_buf_reserve(tk_buf *b, size_t extra) {
    if (b->cap - b->n >= extra) return 0;
    size_t need = b->n + extra;
    if (need < b->n) return ob_err(OB_ERR_OOM, "tokenizer: buffer size overflow");
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap * 2 > cap ? cap * 2 : need;
    char *p = ob_realloc(b->p, cap);
    if (!p) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

int tk_buf_put(tk_buf *b, const void *s, size_t n) {
    if (n == 0) return 0;
    OB_TRY(tk_buf_reserve(b, n));
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

int tk_buf_putc(tk_buf *b, char c) {
    OB_TRY(tk_buf_reserve(b, 1));
    b->p[b->n++] = c;
    return 0;
}

int tk_buf_put_cp(tk_buf *b, uint32_t cp) {
    OB_TRY(tk_buf_reserve(b, 4));
    unsigned char *o = (unsigned char *)b->p + b->n;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        b->n += 1;
    } else if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        b->n += 2;
    } else if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        b->n += 3;
    } else {
        o[0] = (unsigned char)(0xF0 | (cp >> 18));
        o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (unsigned char)(0x80 | (cp & 0x3F));
        b->n += 4;
    }
    return 0;
}

void tk_buf_free(tk_buf *b) {
    ob_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---------------- hash map ---------------- */

uint64_t tk_hash_bytes(const void *p, size_t n) {
    /* FNV-1a over 8-byte words, then a final mix: token texts are short, so a
     * simple word-at-a-time hash is fast enough and spreads well after the mix. */
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x100000001b3ull;
    return tk_hash_u64(h);
}

int tk_map_init(tk_map *m, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 + 1) cap *= 2;
    m->slots = ob_malloc(cap * sizeof *m->slots);
    if (!m->slots) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (hash map of %zu)", cap);
    for (size_t i = 0; i < cap; i++) m->slots[i].key = UINT64_MAX;
    m->mask = cap - 1;
    m->n = 0;
    return 0;
}

void tk_map_free(tk_map *m) {
    ob_free(m->slots);
    memset(m, 0, sizeof *m);
}

void tk_map_clear(tk_map *m) {
    if (m->slots)
        for (size_t i = 0; i <= m->mask; i++) m->slots[i].key = UINT64_MAX;
    m->n = 0;
}

static int map_grow(tk_map *m) {
    tk_map bigger;
    OB_TRY(tk_map_init(&bigger, (m->mask + 1)));
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key != UINT64_MAX) {
            size_t j = tk_hash_u64(m->slots[i].key) & bigger.mask;
            while (bigger.slots[j].key != UINT64_MAX) j = (j + 1) & bigger.mask;
            bigger.slots[j] = m->slots[i];
            bigger.n++;
        }
    tk_map_free(m);
    *m = bigger;
    return 0;
}

int tk_map_put(tk_map *m, uint64_t key, uint64_t val) {
    if (!m->slots) OB_TRY(tk_map_init(m, 8));
    if ((m->n + 1) * 2 > m->mask + 1) OB_TRY(map_grow(m));
    size_t j = tk_hash_u64(key) & m->mask;
    while (m->slots[j].key != UINT64_MAX && m->slots[j].key != key) j = (j + 1) & m->mask;
    if (m->slots[j].key == UINT64_MAX) {
        m->slots[j].key = key;
        m->n++;
    }
    m->slots[j].val = val;
    return 0;
}

/* ---------------- byte trie ---------------- */

int tk_trie_init(tk_trie *tr) {
    memset(tr, 0, sizeof *tr);
    tr->cap = 64;
    tr->value = ob_malloc(tr->cap * sizeof *tr->value);
    if (!tr->value) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (trie)");
    tr->value[0] = -1;
    tr->n_nodes = 1;
    return tk_map_init(&tr->edges, 64);
}

void tk_trie_free(tk_trie *tr) {
    ob_free(tr->value);
    tk_map_free(&tr->edges);
    memset(tr, 0, sizeof *tr);
}

int tk_trie_insert(tk_trie *tr, const char *key, size_t len, int32_t value) {
    if (!tr->value) OB_TRY(tk_trie_init(tr));
    uint32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        int64_t next = tk_trie_step(tr, node, (unsigned char)key[i]);
        if (next < 0) {
            if (tr->n_nodes == tr->cap) {
                if (tr->cap > UINT32_MAX / 2) return ob_err(OB_ERR_RANGE, "tokenizer: trie too large");
                int32_t *v = ob_realloc(tr->value, (size_t)tr->cap * 2 * sizeof *v);
                if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (trie)");
                tr->value = v;
                tr->cap *= 2;
            }
            next = tr->n_nodes++;
            tr->value[next] = -1;
            OB_TRY(tk_map_put(&tr->edges, ((uint64_t)node << 8) | (unsigned char)key[i], (uint64_t)next));
        }
        node = (uint32_t)next;
    }
    tr->value[node] = value;
    if (len > tr->max_depth) tr->max_depth = (uint32_t)len;
    return 0;
}

/* ---------------- Unicode predicates ---------------- */

bool tk_is_whitespace(uint32_t cp) {
    if ((cp >= 9 && cp <= 13) || cp == 0x20 || cp == 0x85) return true;
    if (cp < 0x80) return false;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

bool tk_is_numeric(uint32_t cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool tk_is_punct(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool tk_is_other(uint32_t cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
           c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN;
}

bool tk_is_mn(uint32_t cp) { return utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_MN; }

bool tk_is_mark(uint32_t cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

bool tk_is_bert_chinese(uint32_t cp) {
    /* The CJK blocks of BERT's original _is_chinese_char (the 0x2B920 start,
     * not 0x2B820, is what Hugging Face ships). */
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
           (cp >= 0x2B920 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

int tk_lower_cp(tk_buf *out, uint32_t cp) {
    /* utf8proc gives the simple case mapping; the only unconditional full
     * lowercase mapping that differs (SpecialCasing.txt) is U+0130. */
    if (cp == 0x130) {
        OB_TRY(tk_buf_putc(out, 'i'));
        return tk_buf_put_cp(out, 0x307);
    }
    return tk_buf_put_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
}

int tk_unicode_normalize(const char *s, size_t n, int form, tk_buf *out) {
    if (n == 0) return 0;
    utf8proc_option_t opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    if (form == TK_NF_NFKC || form == TK_NF_NFKD) opt |= UTF8PROC_COMPAT;
    /* Decomposition can grow the text; ask utf8proc for the size first. */
    utf8proc_int32_t stack[256];
    utf8proc_int32_t *buf = stack;
    utf8proc_ssize_t cap = 256;
    utf8proc_ssize_t m = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, buf, cap, opt);
    if (m < 0) return ob_err(OB_ERR_INTERNAL, "tokenizer: utf8proc: %s", utf8proc_errmsg(m));
    if (m > cap) {
        buf = ob_malloc((size_t)m * sizeof *buf);
        if (!buf) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (normalization)");
        cap = m;
        m = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, buf, cap, opt);
        if (m < 0 || m > cap) {
            ob_free(buf);
            return ob_err(OB_ERR_INTERNAL, "tokenizer: utf8proc decompose failed");
        }
    }
    if (form == TK_NF_NFC || form == TK_NF_NFKC) {
        m = utf8proc_normalize_utf32(buf, m, opt | UTF8PROC_COMPOSE);
        if (m < 0) {
            if (buf != stack) ob_free(buf);
            return ob_err(OB_ERR_INTERNAL, "tokenizer: utf8proc: %s", utf8proc_errmsg(m));
        }
    }
    int rc = tk_buf_reserve(out, (size_t)m * 4);
    for (utf8proc_ssize_t i = 0; rc == 0 && i < m; i++) rc = tk_buf_put_cp(out, (uint32_t)buf[i]);
    if (buf != stack) ob_free(buf);
    return rc;
}

/* ---------------- UTF-8 repair ---------------- */

size_t tk_utf8_bad_prefix(const unsigned char *s, size_t n, bool *truncated) {
    /* Well-formed sequences per Unicode Table 3-7. The second byte's range
     * depends on the lead byte; later bytes are 80..BF. A sequence that stops
     * early (end of input) is "truncated": valid so far. */
    *truncated = false;
    unsigned char c = s[0];
    if (c < 0x80) return 0;
    int len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 1; /* 80..C1, F5..FF never start a character */
    size_t i = 1;
    for (; i < (size_t)len; i++) {
        if (i >= n) {
            *truncated = true;
            return i;
        }
        unsigned char b = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) return i; /* the maximal subpart ends before b */
    }
    return 0;
}

int tk_utf8_repair(const char *s, size_t n, tk_buf *out, bool *replaced) {
    const unsigned char *u = (const unsigned char *)s;
    *replaced = false;
    OB_TRY(tk_buf_reserve(out, n + 3));
    size_t i = 0;
    while (i < n) {
        /* Fast path over ASCII runs. */
        size_t j = i;
        while (j < n && u[j] < 0x80) j++;
        OB_TRY(tk_buf_put(out, s + i, j - i));
        i = j;
        if (i >= n) break;
        bool trunc;
        size_t bad = tk_utf8_bad_prefix(u + i, n - i, &trunc);
        if (bad == 0) {
            int len = tk_u8len(u[i]);
            OB_TRY(tk_buf_put(out, s + i, (size_t)len));
            i += (size_t)len;
        } else {
            OB_TRY(tk_buf_put(out, "\xEF\xBF\xBD", 3));
            *replaced = true;
            i += bad;
        }
    }
    return 0;
}
