/*
 * jinja_text.c - Python's text rules on UTF-8: character classes, case
 * mapping, str repr() and float repr().
 *
 * Chat templates run string methods (strip, split, upper, title...) and
 * print lists of strings; to give the bytes Python gives, these follow
 * CPython's definitions: str.isspace() for whitespace, str.isprintable()
 * for what repr() escapes, full case mappings for upper() (so 'ß' becomes
 * 'SS'), and the shortest round-tripping digits for float repr().
 * Character data comes from utf8proc; its Unicode version can differ from
 * the Python that made the fixtures for characters assigned in between.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "jinja.h"

uint32_t ob_jt_decode(const char *s, size_t n, int *len) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[0];
    int k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if ((size_t)k > n) k = 1; /* cannot happen on valid input; stay in bounds */
    if (k == 1) {
        *len = 1;
        return c;
    }
    uint32_t cp = c & (k == 2 ? 0x1F : k == 3 ? 0x0F : 0x07);
    for (int i = 1; i < k; i++) cp = (cp << 6) | (u[i] & 0x3F);
    *len = k;
    return cp;
}

bool ob_jt_isspace(uint32_t c) {
    if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static utf8proc_category_t cat(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c); }

bool ob_jt_isprintable(uint32_t c) {
    if (c < 0x80) return c >= 0x20 && c < 0x7F;
    switch (cat(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return false;
    default:
        return true;
    }
}

bool ob_jt_isalpha(uint32_t c) {
    if (c < 0x80) return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    utf8proc_category_t k = cat(c);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}

bool ob_jt_isdigit(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return cat(c) == UTF8PROC_CATEGORY_ND;
}

bool ob_jt_isalnum(uint32_t c) {
    if (c < 0x80) return ob_jt_isalpha(c) || ob_jt_isdigit(c);
    utf8proc_category_t k = cat(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

bool ob_jt_isupper(uint32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z';
    return cat(c) == UTF8PROC_CATEGORY_LU;
}

bool ob_jt_islower(uint32_t c) {
    if (c < 0x80) return c >= 'a' && c <= 'z';
    return cat(c) == UTF8PROC_CATEGORY_LL;
}

bool ob_jt_iscased(uint32_t c) {
    if (c < 0x80) return ob_jt_isalpha(c);
    utf8proc_category_t k = cat(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

bool ob_jt_isword(uint32_t c) {
    if (c == '_') return true;
    if (c < 0x80) return ob_jt_isalnum(c);
    utf8proc_category_t k = cat(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO) || k == UTF8PROC_CATEGORY_MN ||
           k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_PC;
}

/* The unconditional multi-character mappings of Unicode's SpecialCasing
 * that real text meets (German sharp s, Latin ligatures, dotted capital I).
 * utf8proc has only the one-to-one mappings. */
typedef struct special_case {
    uint32_t cp;
    const char *lower, *title, *upper; /* UTF-8; NULL: the simple mapping */
} special_case;

static const special_case g_special[] = {
    {0x00DF, NULL, "Ss", "SS"},
    {0x0130, "i\xCC\x87", NULL, NULL},
    {0x0149, NULL, "\xCA\xBCN", "\xCA\xBCN"},
    {0xFB00, NULL, "Ff", "FF"},
    {0xFB01, NULL, "Fi", "FI"},
    {0xFB02, NULL, "Fl", "FL"},
    {0xFB03, NULL, "Ffi", "FFI"},
    {0xFB04, NULL, "Ffl", "FFL"},
    {0xFB05, NULL, "St", "ST"},
    {0xFB06, NULL, "St", "ST"},
};

static const special_case *special(uint32_t c) {
    if (c < 0xDF) return NULL;
    for (size_t i = 0; i < sizeof g_special / sizeof g_special[0]; i++)
        if (g_special[i].cp == c) return &g_special[i];
    return NULL;
}

void ob_jt_put_upper(ob_jbuf *b, uint32_t c) {
    if (c < 0x80) {
        ob_jbuf_putc(b, (char)(c >= 'a' && c <= 'z' ? c - 32 : c));
        return;
    }
    const special_case *s = special(c);
    if (s && s->upper) ob_jbuf_puts(b, s->upper);
    else ob_jbuf_put_cp(b, (uint32_t)utf8proc_toupper((utf8proc_int32_t)c));
}

void ob_jt_put_lower(ob_jbuf *b, uint32_t c) {
    if (c < 0x80) {
        ob_jbuf_putc(b, (char)(c >= 'A' && c <= 'Z' ? c + 32 : c));
        return;
    }
    const special_case *s = special(c);
    if (s && s->lower) ob_jbuf_puts(b, s->lower);
    else ob_jbuf_put_cp(b, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
}

void ob_jt_put_title(ob_jbuf *b, uint32_t c) {
    if (c < 0x80) {
        ob_jt_put_upper(b, c);
        return;
    }
    const special_case *s = special(c);
    if (s && s->title) ob_jbuf_puts(b, s->title);
    else ob_jbuf_put_cp(b, (uint32_t)utf8proc_totitle((utf8proc_int32_t)c));
}

const char *ob_jt_find(const char *hay, size_t n, const char *needle, size_t k) {
    if (k == 0) return hay;
    for (size_t i = 0; k <= n - i && i < n;) {
        const char *p = memchr(hay + i, needle[0], n - i - k + 1);
        if (!p) return NULL;
        if (memcmp(p, needle, k) == 0) return p;
        i = (size_t)(p - hay) + 1;
    }
    return NULL;
}

size_t ob_jt_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t ob_jt_offset(const char *s, size_t n, size_t idx) {
    size_t i = 0;
    while (i < n && idx > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        idx--;
    }
    return i;
}

void ob_jt_repr(ob_jbuf *b, const char *s, size_t n) {
    /* CPython: single quotes unless the text has ' and no " */
    bool sq = false, dq = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'') sq = true;
        else if (s[i] == '"') dq = true;
    }
    char q = (sq && !dq) ? '"' : '\'';
    ob_jbuf_putc(b, q);
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int len = 1;
        uint32_t cp = c < 0x80 ? c : ob_jt_decode(s + i, n - i, &len);
        const char *esc = NULL;
        char tmp[12];
        if (cp == (uint32_t)q || cp == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)cp;
            tmp[2] = 0;
            esc = tmp;
        } else if (cp == '\n') {
            esc = "\\n";
        } else if (cp == '\r') {
            esc = "\\r";
        } else if (cp == '\t') {
            esc = "\\t";
        } else if (!ob_jt_isprintable(cp)) {
            snprintf(tmp, sizeof tmp, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
            esc = tmp;
        }
        if (esc) {
            ob_jbuf_put(b, s + run, i - run);
            ob_jbuf_puts(b, esc);
            run = i + (size_t)len;
        }
        i += (size_t)len;
    }
    ob_jbuf_put(b, s + run, n - run);
    ob_jbuf_putc(b, q);
}

void ob_jt_float_repr(ob_jbuf *b, double f) {
    if (isnan(f)) {
        ob_jbuf_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        ob_jbuf_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        ob_jbuf_puts(b, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* Shortest digits that read back as the same double (what CPython's
     * repr gives); %e rounds correctly, so the first precision that round
     * trips gives the nearest such string. */
    char buf[40];
    for (int p = 0; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p, f);
        if (strtod(buf, NULL) == f) break;
    }
    const char *s = buf;
    if (*s == '-') {
        ob_jbuf_putc(b, '-');
        s++;
    }
    char digits[24];
    int nd = 0;
    const char *e = strchr(s, 'e');
    for (const char *p = s; p < e; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int decpt = atoi(e + 1) + 1; /* position of the decimal point after the first digit */
    if (decpt > 16 || decpt < -3) {
        ob_jbuf_putc(b, digits[0]);
        if (nd > 1) {
            ob_jbuf_putc(b, '.');
            ob_jbuf_put(b, digits + 1, (size_t)nd - 1);
        }
        int x = decpt - 1;
        ob_jbuf_printf(b, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
    } else if (decpt <= 0) {
        ob_jbuf_puts(b, "0.");
        for (int i = 0; i < -decpt; i++) ob_jbuf_putc(b, '0');
        ob_jbuf_put(b, digits, (size_t)nd);
    } else if (decpt >= nd) {
        ob_jbuf_put(b, digits, (size_t)nd);
        for (int i = nd; i < decpt; i++) ob_jbuf_putc(b, '0');
        ob_jbuf_puts(b, ".0");
    } else {
        ob_jbuf_put(b, digits, (size_t)decpt);
        ob_jbuf_putc(b, '.');
        ob_jbuf_put(b, digits + decpt, (size_t)(nd - decpt));
    }
}
