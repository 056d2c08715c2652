/*
 * jinja_lex.c - template text -> tokens, with jinja2's whitespace rules.
 *
 * The rules are those of jinja2's lexer under transformers' settings
 * (trim_blocks=True, lstrip_blocks=True), because a chat template's output
 * is compared byte for byte with what Python renders:
 *
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}",
 *     "-#}" strip all whitespace after it (Python's definition of whitespace,
 *     so U+00A0 and U+3000 count).
 *   - trim_blocks: one newline right after "%}" or "#}" is dropped (not
 *     after "}}", and not after "{% raw %}"); "+%}" keeps it.
 *   - lstrip_blocks: spaces and tabs between the start of a line and "{%"
 *     or "{#" are dropped; "{%+" keeps them. Never for "{{".
 *   - {% raw %}...{% endraw %} is data, with the same rules at both ends.
 *
 * Inside tags the token rules are jinja2's: Python-style numbers (with "_"
 * separators and 0x/0o/0b), identifiers, quoted strings with Python's
 * unicode-escape rules, and operators matched longest first. A tag end only
 * counts while brackets are balanced, so "{{ {'a': 1}}}" works.
 *
 * The source was normalized beforehand (see chat.c): newlines are "\n" and
 * one trailing newline is gone, as jinja2 does with keep_trailing_newline
 * off.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "jinja.h"

typedef struct lexer {
    struct ob_chat_template *t;
    const char *s;
    size_t n;
    size_t pos;
    ob_jtok *toks;
    size_t ntoks, cap;
    char bal[OB_JJ_MAX_PARSE_DEPTH]; /* closing brackets expected inside the current tag */
    int nbal;
    bool line_starting; /* the previous match ended with a newline (or nothing came yet) */
} lexer;

void ob_jinja_linecol(const char *src, size_t len, uint32_t pos, int *line, int *col) {
    int ln = 1;
    size_t start = 0;
    if (pos > len) pos = (uint32_t)len;
    for (size_t i = 0; i < pos; i++)
        if (src[i] == '\n') {
            ln++;
            start = i + 1;
        }
    *line = ln;
    *col = (int)ob_jt_count(src + start, pos - start) + 1;
}

int ob_jinja_syntax_error(const struct ob_chat_template *t, uint32_t pos, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    ob_jinja_linecol(t->src, t->len, pos, &line, &col);
    return ob_err(OB_ERR_FORMAT, "chat template syntax error at line %d, column %d: %s", line, col, msg);
}

static int push(lexer *L, int type, size_t pos, const char *s, size_t n, ob_jtok **out) {
    if (L->ntoks == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        ob_jtok *p = ob_realloc(L->toks, cap * sizeof *p);
        if (!p) return ob_err(OB_ERR_OOM, "chat template: out of memory");
        L->toks = p;
        L->cap = cap;
    }
    ob_jtok *k = &L->toks[L->ntoks++];
    memset(k, 0, sizeof *k);
    k->type = (uint8_t)type;
    k->pos = (uint32_t)pos;
    k->s = s;
    k->n = (uint32_t)n;
    if (out) *out = k;
    return 0;
}

/* Length of the Python whitespace character at s[pos], or 0. */
static size_t space_at(const lexer *L, size_t pos) {
    if (pos >= L->n) return 0;
    unsigned char c = (unsigned char)L->s[pos];
    if (c < 0x80) return ob_jt_isspace(c) ? 1 : 0;
    int len = 0;
    uint32_t cp = ob_jt_decode(L->s + pos, L->n - pos, &len);
    return ob_jt_isspace(cp) ? (size_t)len : 0;
}

static size_t skip_space(const lexer *L, size_t pos) {
    size_t k = 0;
    while ((k = space_at(L, pos)) > 0) pos += k;
    return pos;
}

/* End of s[start..end) with trailing whitespace removed (str.rstrip()). */
static size_t rstrip_end(const lexer *L, size_t start, size_t end) {
    while (end > start) {
        size_t b = end - 1;
        while (b > start && ((unsigned char)L->s[b] & 0xC0) == 0x80) b--;
        if (space_at(L, b) != end - b) break;
        end = b;
    }
    return end;
}

/* Apply the rules for text that precedes a tag opener whose whitespace
 * sign is `sign` ('-', '+' or 0). lstrip applies to blocks and comments. */
static size_t strip_text(const lexer *L, size_t start, size_t end, char sign, bool lstrip_ok) {
    if (sign == '-') return rstrip_end(L, start, end);
    if (sign == '+' || !lstrip_ok) return end;
    size_t l = end; /* start of the tag's line within the text */
    while (l > start && L->s[l - 1] != '\n') l--;
    /* No newline in the text: the tag starts a line only if the previous
     * match ended one. */
    if (l == start && !L->line_starting) return end;
    if (l == end) return end; /* nothing between the newline and the tag */
    size_t p = l;
    while (p < end) {
        size_t k = space_at(L, p);
        if (!k) return end;
        p += k;
    }
    return l;
}

static int emit_data(lexer *L, size_t start, size_t end) {
    if (end <= start) return 0;
    return push(L, OB_JT_DATA, start, L->s + start, end - start, NULL);
}

static bool at(const lexer *L, size_t pos, const char *lit) {
    size_t k = strlen(lit);
    return pos + k <= L->n && memcmp(L->s + pos, lit, k) == 0;
}

/* If a tag end "%}" variant starts at pos (block or comment: c is '%' or
 * '#'), return the position after it with its whitespace rule applied;
 * else 0. */
static size_t tag_end(const lexer *L, size_t pos, char c) {
    char plain[3] = {c, '}', 0};
    if (pos < L->n && L->s[pos] == '+' && at(L, pos + 1, plain)) return pos + 3;
    if (pos < L->n && L->s[pos] == '-' && at(L, pos + 1, plain)) return skip_space(L, pos + 3);
    if (at(L, pos, plain)) {
        pos += 2;
        if (pos < L->n && L->s[pos] == '\n') pos++; /* trim_blocks */
        return pos;
    }
    return 0;
}

/* "{% raw %}" at pos: returns the position after it, or 0. */
static size_t raw_begin(const lexer *L, size_t pos) {
    size_t p = pos + 2;
    if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) p++;
    p = skip_space(L, p);
    if (!at(L, p, "raw")) return 0;
    p = skip_space(L, p + 3);
    if (at(L, p, "-%}")) return skip_space(L, p + 3);
    if (at(L, p, "%}")) return p + 2;
    return 0;
}

/* "{% endraw %}" at pos: returns the position after it and its sign. */
static size_t raw_end(const lexer *L, size_t pos, char *sign) {
    size_t p = pos + 2;
    *sign = 0;
    if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) *sign = L->s[p++];
    p = skip_space(L, p);
    if (!at(L, p, "endraw")) return 0;
    p = skip_space(L, p + 6);
    return tag_end(L, p, '%');
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* (\d+_)*\d+ at pos: end, or 0 when no digit is there. */
static size_t digit_group(const lexer *L, size_t pos) {
    if (pos >= L->n || !is_digit(L->s[pos])) return 0;
    while (pos < L->n && is_digit(L->s[pos])) pos++;
    while (pos + 1 < L->n && L->s[pos] == '_' && is_digit(L->s[pos + 1])) {
        pos++;
        while (pos < L->n && is_digit(L->s[pos])) pos++;
    }
    return pos;
}

static size_t exponent(const lexer *L, size_t pos) {
    if (pos >= L->n || (L->s[pos] != 'e' && L->s[pos] != 'E')) return 0;
    size_t p = pos + 1;
    if (p < L->n && (L->s[p] == '+' || L->s[p] == '-')) p++;
    return digit_group(L, p);
}

/* jinja2's float rule; returns its end or 0. */
static size_t match_float(const lexer *L, size_t pos) {
    if (pos > 0 && L->s[pos - 1] == '.') return 0;
    size_t a = digit_group(L, pos);
    if (!a) return 0;
    size_t b = (a < L->n && L->s[a] == '.') ? digit_group(L, a + 1) : 0;
    if (b) {
        size_t e = exponent(L, b);
        return e ? e : b;
    }
    return exponent(L, a);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* jinja2's integer rule: value and end (0 if none). */
static size_t match_int(lexer *L, size_t pos, int64_t *val, int *rc) {
    const char *s = L->s;
    size_t p = pos;
    int base = 10;
    *rc = 0;
    if (s[p] == '0' && p + 1 < L->n && s[p + 1] && strchr("bBoOxX", s[p + 1])) {
        char b = (char)(s[p + 1] | 0x20);
        base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        size_t q = p + 2;
        size_t last = 0;
        for (;;) {
            size_t r = q;
            if (r < L->n && s[r] == '_') r++;
            if (r >= L->n || hexval(s[r]) < 0 || hexval(s[r]) >= base) break;
            q = r + 1;
            last = q;
        }
        if (last) {
            p = last;
        } else {
            base = 10; /* "0x" without digits: just the integer 0 */
            p = pos + 1;
        }
    } else if (s[p] >= '1' && s[p] <= '9') {
        p++;
        for (;;) {
            size_t r = p;
            if (r < L->n && s[r] == '_') r++;
            if (r >= L->n || !is_digit(s[r])) break;
            p = r + 1;
        }
    } else if (s[p] == '0') {
        p++;
        for (;;) {
            size_t r = p;
            if (r < L->n && s[r] == '_') r++;
            if (r >= L->n || s[r] != '0') break;
            p = r + 1;
        }
    } else {
        return 0;
    }
    uint64_t v = 0;
    size_t i = (base == 10) ? pos : pos + 2;
    for (; i < p; i++) {
        if (s[i] == '_') continue;
        uint64_t d = (uint64_t)hexval(s[i]);
        if (v > (UINT64_MAX - d) / (uint64_t)base || v * (uint64_t)base + d > (uint64_t)INT64_MAX) {
            *rc = ob_jinja_syntax_error(L->t, (uint32_t)pos, "integer literal too large");
            return 0;
        }
        v = v * (uint64_t)base + d;
    }
    *val = (int64_t)v;
    return p;
}

static bool name_start(uint32_t cp) { return cp == '_' || (cp < 0x80 ? ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') : ob_jt_isalpha(cp)); }
static bool name_cont(uint32_t cp) { return name_start(cp) || (cp < 0x80 ? is_digit((char)cp) : ob_jt_isalnum(cp)); }

static uint32_t cp_at(const lexer *L, size_t pos, int *len) {
    unsigned char c = (unsigned char)L->s[pos];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    return ob_jt_decode(L->s + pos, L->n - pos, len);
}

/* A quoted string at pos: decode it (Python's unicode-escape rules) into
 * the template arena. Returns the end position, 0 if unterminated. */
static size_t match_string(lexer *L, size_t pos, ob_jtok *tok, int *rc) {
    const char *s = L->s;
    char q = s[pos];
    size_t p = pos + 1;
    *rc = 0;
    while (p < L->n && s[p] != q) p += (s[p] == '\\' && p + 1 < L->n) ? 2 : 1;
    if (p >= L->n) return 0;
    size_t end = p + 1;
    /* Decoding never makes the text longer, except a backslash before a
     * non-ASCII character, which becomes "\" plus an escape name of at most
     * ten bytes for a character of at least two. */
    size_t cap = (end - pos) * 6 + 1;
    char *d = ob_arena_alloc(&L->t->arena, cap, 1);
    if (!d) {
        *rc = ob_err(OB_ERR_OOM, "chat template: out of memory");
        return 0;
    }
    size_t o = 0;
    for (size_t i = pos + 1; i < p;) {
        char c = s[i];
        if (c != '\\') {
            d[o++] = c;
            i++;
            continue;
        }
        char e = s[i + 1];
        size_t epos = i;
        i += 2;
        uint32_t cp = 0;
        int nd = 0, want = 0;
        switch (e) {
        case '\n': continue;
        case '\\': d[o++] = '\\'; continue;
        case '\'': d[o++] = '\''; continue;
        case '"': d[o++] = '"'; continue;
        case 'a': d[o++] = '\a'; continue;
        case 'b': d[o++] = '\b'; continue;
        case 'f': d[o++] = '\f'; continue;
        case 'n': d[o++] = '\n'; continue;
        case 'r': d[o++] = '\r'; continue;
        case 't': d[o++] = '\t'; continue;
        case 'v': d[o++] = '\v'; continue;
        case 'x': want = 2; break;
        case 'u': want = 4; break;
        case 'U': want = 8; break;
        case 'N':
            *rc = ob_jinja_syntax_error(L->t, (uint32_t)epos, "named unicode escapes (\\N{...}) are not supported");
            return 0;
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (nd = 1; nd < 3 && i < p && s[i] >= '0' && s[i] <= '7'; nd++) cp = cp * 8 + (uint32_t)(s[i++] - '0');
                want = -1;
                break;
            }
            if ((unsigned char)e >= 0x80) {
                /* jinja2 first turns non-ASCII into \x.. escapes, so a
                 * backslash before one escapes only the backslash. */
                int len = 0;
                uint32_t u = ob_jt_decode(s + i - 1, p - (i - 1), &len);
                i += (size_t)len - 1;
                o += (size_t)snprintf(d + o, cap - o, u < 0x100 ? "\\x%02x" : u < 0x10000 ? "\\u%04x" : "\\U%08x", u);
                continue;
            }
            d[o++] = '\\';
            d[o++] = e;
            continue;
        }
        if (want > 0) {
            for (nd = 0; nd < want; nd++) {
                int h = i < p ? hexval(s[i]) : -1;
                if (h < 0) {
                    *rc = ob_jinja_syntax_error(L->t, (uint32_t)epos, "truncated \\%c escape", e);
                    return 0;
                }
                cp = cp * 16 + (uint32_t)h;
                i++;
            }
        }
        if (cp > 0x10FFFF) {
            *rc = ob_jinja_syntax_error(L->t, (uint32_t)epos, "illegal Unicode character");
            return 0;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            *rc = ob_jinja_syntax_error(L->t, (uint32_t)epos, "surrogate code point in a string escape");
            return 0;
        }
        char u8[4];
        int k = 0;
        if (cp < 0x80) u8[k++] = (char)cp;
        else if (cp < 0x800) { u8[k++] = (char)(0xC0 | (cp >> 6)); u8[k++] = (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) { u8[k++] = (char)(0xE0 | (cp >> 12)); u8[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); u8[k++] = (char)(0x80 | (cp & 0x3F)); }
        else { u8[k++] = (char)(0xF0 | (cp >> 18)); u8[k++] = (char)(0x80 | ((cp >> 12) & 0x3F)); u8[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); u8[k++] = (char)(0x80 | (cp & 0x3F)); }
        memcpy(d + o, u8, (size_t)k);
        o += (size_t)k;
    }
    tok->s = d;
    tok->n = (uint32_t)o;
    return end;
}

static const struct { const char *op; int type; } g_ops[] = {
    {"//", OB_JT_FLOORDIV}, {"**", OB_JT_POW}, {"==", OB_JT_EQ}, {"!=", OB_JT_NE},
    {">=", OB_JT_GTEQ}, {"<=", OB_JT_LTEQ},
    {"+", OB_JT_ADD}, {"-", OB_JT_SUB}, {"/", OB_JT_DIV}, {"*", OB_JT_MUL}, {"%", OB_JT_MOD},
    {"~", OB_JT_TILDE}, {"[", OB_JT_LBRACKET}, {"]", OB_JT_RBRACKET}, {"(", OB_JT_LPAREN},
    {")", OB_JT_RPAREN}, {"{", OB_JT_LBRACE}, {"}", OB_JT_RBRACE}, {">", OB_JT_GT}, {"<", OB_JT_LT},
    {"=", OB_JT_ASSIGN}, {".", OB_JT_DOT}, {":", OB_JT_COLON}, {"|", OB_JT_PIPE},
    {",", OB_JT_COMMA}, {";", OB_JT_SEMICOLON},
};

/* Tokens of one {{ }} or {% %} tag, from pos up to and including its end. */
static int lex_tag(lexer *L, bool block) {
    L->nbal = 0;
    for (;;) {
        size_t pos = L->pos;
        if (pos >= L->n) return 0; /* unterminated: the parser reports it */
        if (L->nbal == 0) {
            size_t e = 0;
            if (block) {
                e = tag_end(L, pos, '%');
            } else if (at(L, pos, "-}}")) {
                e = skip_space(L, pos + 3);
            } else if (at(L, pos, "}}")) {
                e = pos + 2;
            }
            if (e) {
                OB_TRY(push(L, block ? OB_JT_BLOCK_END : OB_JT_VAR_END, pos, NULL, 0, NULL));
                L->line_starting = L->s[e - 1] == '\n';
                L->pos = e;
                return 0;
            }
        }
        size_t sp = skip_space(L, pos);
        if (sp > pos) {
            L->pos = sp;
            continue;
        }
        ob_jtok *tok = NULL;
        size_t e = match_float(L, pos);
        if (e) {
            char buf[128];
            size_t k = 0;
            for (size_t i = pos; i < e && k + 1 < sizeof buf; i++)
                if (L->s[i] != '_') buf[k++] = L->s[i];
            buf[k] = 0;
            OB_TRY(push(L, OB_JT_FLOAT, pos, NULL, 0, &tok));
            tok->f = strtod(buf, NULL);
            L->pos = e;
            continue;
        }
        int rc = 0;
        int64_t iv = 0;
        e = match_int(L, pos, &iv, &rc);
        if (rc < 0) return rc;
        if (e) {
            OB_TRY(push(L, OB_JT_INT, pos, NULL, 0, &tok));
            tok->i = iv;
            L->pos = e;
            continue;
        }
        int len = 0;
        uint32_t cp = cp_at(L, pos, &len);
        if (name_start(cp)) {
            e = pos + (size_t)len;
            while (e < L->n) {
                uint32_t c2 = cp_at(L, e, &len);
                if (!name_cont(c2)) break;
                e += (size_t)len;
            }
            OB_TRY(push(L, OB_JT_NAME, pos, L->s + pos, e - pos, NULL));
            L->pos = e;
            continue;
        }
        if (cp == '\'' || cp == '"') {
            ob_jtok tmp = {0};
            e = match_string(L, pos, &tmp, &rc);
            if (rc < 0) return rc;
            if (e) {
                OB_TRY(push(L, OB_JT_STRING, pos, tmp.s, tmp.n, NULL));
                L->pos = e;
                continue;
            }
        }
        int type = -1;
        size_t oplen = 0;
        for (size_t i = 0; i < OB_ARRAY_LEN(g_ops); i++)
            if (at(L, pos, g_ops[i].op)) {
                type = g_ops[i].type;
                oplen = strlen(g_ops[i].op);
                break;
            }
        if (type < 0) {
            char shown[8];
            size_t k = (size_t)len < sizeof shown - 1 ? (size_t)len : sizeof shown - 1;
            memcpy(shown, L->s + pos, k);
            shown[k] = 0;
            return ob_jinja_syntax_error(L->t, (uint32_t)pos, "unexpected char '%s'", shown);
        }
        if (type == OB_JT_LBRACE || type == OB_JT_LPAREN || type == OB_JT_LBRACKET) {
            if (L->nbal >= (int)sizeof L->bal)
                return ob_jinja_syntax_error(L->t, (uint32_t)pos, "brackets nested too deeply");
            L->bal[L->nbal++] = type == OB_JT_LBRACE ? '}' : type == OB_JT_LPAREN ? ')' : ']';
        } else if (type == OB_JT_RBRACE || type == OB_JT_RPAREN || type == OB_JT_RBRACKET) {
            char c = L->s[pos];
            if (L->nbal == 0) return ob_jinja_syntax_error(L->t, (uint32_t)pos, "unexpected '%c'", c);
            char want = L->bal[--L->nbal];
            if (want != c) return ob_jinja_syntax_error(L->t, (uint32_t)pos, "unexpected '%c', expected '%c'", c, want);
        }
        OB_TRY(push(L, type, pos, L->s + pos, oplen, NULL));
        L->pos = pos + oplen;
    }
}

static int lex_all(lexer *L) {
    L->line_starting = true;
    while (L->pos < L->n) {
        size_t start = L->pos, t = start;
        /* next "{{", "{%" or "{#" */
        for (;;) {
            const char *p = memchr(L->s + t, '{', L->n - t);
            if (!p) {
                t = L->n;
                break;
            }
            t = (size_t)(p - L->s);
            if (t + 1 < L->n && (L->s[t + 1] == '{' || L->s[t + 1] == '%' || L->s[t + 1] == '#')) break;
            t++;
        }
        if (t >= L->n) {
            OB_TRY(emit_data(L, start, L->n));
            L->pos = L->n;
            break;
        }
        char kind = L->s[t + 1];
        char sign = (t + 2 < L->n && (L->s[t + 2] == '-' || L->s[t + 2] == '+')) ? L->s[t + 2] : 0;
        size_t raw = kind == '%' ? raw_begin(L, t) : 0;
        OB_TRY(emit_data(L, start, strip_text(L, start, t, sign, kind != '{')));
        if (raw) {
            bool ls = L->s[raw - 1] == '\n';
            size_t q = raw, e = 0;
            char esign = 0;
            for (;;) {
                const char *p = q < L->n ? memchr(L->s + q, '{', L->n - q) : NULL;
                if (!p) return ob_jinja_syntax_error(L->t, (uint32_t)t, "missing end of raw directive");
                q = (size_t)(p - L->s);
                if (q + 1 < L->n && L->s[q + 1] == '%' && (e = raw_end(L, q, &esign)) != 0) break;
                q++;
            }
            L->line_starting = ls;
            OB_TRY(emit_data(L, raw, strip_text(L, raw, q, esign, true)));
            L->line_starting = L->s[e - 1] == '\n';
            L->pos = e;
            continue;
        }
        size_t body = t + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            const char *p = NULL;
            size_t q = body;
            for (;;) {
                p = q < L->n ? memchr(L->s + q, '#', L->n - q) : NULL;
                if (!p) return ob_jinja_syntax_error(L->t, (uint32_t)t, "missing end of comment tag");
                q = (size_t)(p - L->s);
                if (q + 1 < L->n && L->s[q + 1] == '}') break;
                q++;
            }
            size_t e = 0;
            if (q > body && (L->s[q - 1] == '-' || L->s[q - 1] == '+'))
                e = tag_end(L, q - 1, '#');
            else
                e = tag_end(L, q, '#');
            L->line_starting = L->s[e - 1] == '\n';
            L->pos = e;
            continue;
        }
        OB_TRY(push(L, kind == '%' ? OB_JT_BLOCK_BEGIN : OB_JT_VAR_BEGIN, t, NULL, 0, NULL));
        L->pos = body;
        OB_TRY(lex_tag(L, kind == '%'));
    }
    return push(L, OB_JT_EOF, L->n, NULL, 0, NULL);
}

int ob_jinja_lex(struct ob_chat_template *t, ob_jtok **toks, size_t *ntoks) {
    lexer L;
    memset(&L, 0, sizeof L);
    L.t = t;
    L.s = t->src;
    L.n = t->len;
    int rc = lex_all(&L);
    if (rc < 0) {
        ob_free(L.toks);
        return rc;
    }
    *toks = L.toks;
    *ntoks = L.ntoks;
    return 0;
}
