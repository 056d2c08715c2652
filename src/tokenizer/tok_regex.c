/*
 * tok_regex.c - pre-tokenizer regexes on PCRE2, behaving like the Oniguruma
 * engine Hugging Face tokenizers uses.
 *
 * Patterns in tokenizer.json are written for Oniguruma (Ruby syntax). Almost
 * all of them mean the same in PCRE2 with UTF + UCP; the differences we
 * bridge here, by rewriting the pattern before compiling it:
 *   - \w is Letter|Mark|Decimal_Number|Connector_Punctuation in Oniguruma
 *     (PCRE2 10.42's UCP \w is \p{L}\p{N}_, missing marks);
 *   - \h is a hex digit in Ruby syntax (horizontal space in PCRE2);
 *   - character classes nest as unions ("[^(\s|[.,!?])]" in BLOOM's
 *     pattern): a nested non-negated class is flattened into its parent;
 *   - ^ and $ are line anchors in Ruby syntax (PCRE2_MULTILINE).
 * Match iteration follows Oniguruma's/Rust's find_iter: an empty match right
 * after the previous match is skipped and the search moves on one character.
 *
 * JIT is used when PCRE2 has it. Matching state (match data, JIT stack) is
 * per call (tk_match) so one compiled pattern serves many threads.
 */
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

struct tk_regex {
    pcre2_code *code;
};

#define WORD_CLASS "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"

/* Rewrite an Oniguruma pattern into PCRE2 syntax (see the file comment).
 * literal: quote every character instead (Hugging Face "String" patterns). */
static int translate(const char *p, size_t n, bool literal, tk_buf *out) {
    if (literal) {
        /* \Q...\E would break on an embedded "\E"; escape character by character. */
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
                if (c == 0) {
                    OB_TRY(tk_buf_put(out, "\\x{0}", 5));
                    continue;
                }
                OB_TRY(tk_buf_putc(out, '\\'));
            }
            OB_TRY(tk_buf_putc(out, (char)c));
        }
        return 0;
    }
    int depth = 0; /* inside a character class when > 0 */
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            if (e == 'w' || e == 'W' || e == 'h' || e == 'H') {
                bool neg = e == 'W' || e == 'H';
                const char *cls = (e == 'w' || e == 'W') ? WORD_CLASS : "0-9a-fA-F";
                if (depth > 0) {
                    if (neg)
                        return ob_err(OB_ERR_UNSUPPORTED, "tokenizer regex: \\%c inside a character class", e);
                    OB_TRY(tk_buf_put(out, cls, strlen(cls)));
                } else {
                    OB_TRY(tk_buf_put(out, neg ? "[^" : "[", neg ? 2 : 1));
                    OB_TRY(tk_buf_put(out, cls, strlen(cls)));
                    OB_TRY(tk_buf_putc(out, ']'));
                }
                i++;
                continue;
            }
            OB_TRY(tk_buf_put(out, p + i, 2));
            i++;
            continue;
        }
        if (c == '[') {
            if (depth == 0) {
                OB_TRY(tk_buf_putc(out, '['));
                depth = 1;
                if (i + 1 < n && p[i + 1] == '^') {
                    OB_TRY(tk_buf_putc(out, '^'));
                    i++;
                }
                continue;
            }
            if (i + 1 < n && p[i + 1] == ':') { /* POSIX [:alpha:] stays as is */
                const char *end = memchr(p + i + 2, ']', n - i - 2);
                if (!end) return ob_err(OB_ERR_FORMAT, "tokenizer regex: unterminated POSIX class");
                OB_TRY(tk_buf_put(out, p + i, (size_t)(end - (p + i)) + 1));
                i = (size_t)(end - p);
                continue;
            }
            if (i + 1 < n && p[i + 1] == '^')
                return ob_err(OB_ERR_UNSUPPORTED, "tokenizer regex: negated nested character class");
            depth++; /* nested union: drop the bracket */
            continue;
        }
        if (c == ']' && depth > 0) {
            if (depth == 1) OB_TRY(tk_buf_putc(out, ']'));
            depth--;
            continue;
        }
        if (c == '&' && depth > 0 && i + 1 < n && p[i + 1] == '&')
            return ob_err(OB_ERR_UNSUPPORTED, "tokenizer regex: class intersection (&&)");
        OB_TRY(tk_buf_putc(out, c));
    }
    return 0;
}

int tk_regex_compile(const char *pat, size_t len, bool literal, tk_regex **out) {
    *out = NULL;
    tk_buf b = {0};
    int rc = translate(pat, len, literal, &b);
    if (rc < 0) {
        tk_buf_free(&b);
        return rc;
    }
    int err;
    PCRE2_SIZE off;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)(b.p ? b.p : ""), b.n, PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE,
                                     &err, &off, NULL);
    if (!code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        rc = ob_err(OB_ERR_FORMAT, "tokenizer regex /%.*s/: %s at offset %zu", (int)(len > 200 ? 200 : len), pat,
                    (const char *)msg, (size_t)off);
        tk_buf_free(&b);
        return rc;
    }
    tk_buf_free(&b);
    /* Without JIT support (or if it fails) the interpreter still works. */
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    tk_regex *re = ob_calloc(1, sizeof *re);
    if (!re) {
        pcre2_code_free(code);
        return ob_err(OB_ERR_OOM, "tokenizer: out of memory (regex)");
    }
    re->code = code;
    *out = re;
    return 0;
}

void tk_regex_free(tk_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    ob_free(re);
}

int tk_match_init(tk_match *m) {
    memset(m, 0, sizeof *m);
    m->md = pcre2_match_data_create(1, NULL);
    m->mc = pcre2_match_context_create(NULL);
    if (!m->md || !m->mc) {
        tk_match_free(m);
        return ob_err(OB_ERR_OOM, "tokenizer: out of memory (regex match data)");
    }
    /* Inputs can be megabytes; PCRE2's defaults (10M steps, 20 MB heap)
     * are for untrusted patterns, ours are fixed and linear in practice. */
    pcre2_set_match_limit(m->mc, 0xFFFFFFFFu);
    pcre2_set_depth_limit(m->mc, 0xFFFFFFFFu);
    pcre2_set_heap_limit(m->mc, 1u << 20); /* KiB: 1 GiB */
    return 0;
}

void tk_match_free(tk_match *m) {
    if (m->md) pcre2_match_data_free(m->md);
    if (m->mc) pcre2_match_context_free(m->mc);
    if (m->jit_stack) pcre2_jit_stack_free(m->jit_stack);
    memset(m, 0, sizeof *m);
}

/* One search from `start`: 1 found (*ms, *me set), 0 none, < 0 error. */
static int search(const tk_regex *re, tk_match *m, const char *s, size_t n, size_t start, size_t *ms, size_t *me) {
    for (int attempt = 0;; attempt++) {
        int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, m->md, m->mc);
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        if (rc == PCRE2_ERROR_NOMATCH) return 0;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && attempt == 0 && !m->jit_stack) {
            /* Deep backtracking on a long input: give the JIT a stack that
             * grows up to 256 MiB and try again. */
            m->jit_stack = pcre2_jit_stack_create(64 * 1024, 256u << 20, NULL);
            if (!m->jit_stack) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (JIT stack)");
            pcre2_jit_stack_assign(m->mc, NULL, m->jit_stack);
            continue;
        }
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return ob_err(OB_ERR_RANGE, "tokenizer regex failed on a %zu-byte piece: %s", n, (const char *)msg);
    }
}

int tk_regex_each(const tk_regex *re, tk_match *m, const char *s, size_t n, tk_match_fn fn, void *user) {
    size_t pos = 0;
    size_t last_end = (size_t)-1;
    while (pos <= n) {
        size_t ms = 0, me = 0;
        int rc = search(re, m, s, n, pos, &ms, &me);
        if (rc < 0) return rc;
        if (rc == 0) break;
        if (ms == me && me == last_end) {
            /* Empty match glued to the previous one: not reported. */
            if (me >= n) break;
            pos = me + (size_t)tk_u8len((unsigned char)s[me]);
            continue;
        }
        OB_TRY(fn(user, ms, me));
        last_end = me;
        if (ms == me) {
            if (me >= n) break;
            pos = me + (size_t)tk_u8len((unsigned char)s[me]);
        } else {
            pos = me;
        }
    }
    return 0;
}

int tk_regex_match_prefix(const tk_regex *re, tk_match *m, const char *s, size_t n) {
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, 0, PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, m->md, m->mc);
    if (rc < 0) return -1;
    return (int)pcre2_get_ovector_pointer(m->md)[1];
}
