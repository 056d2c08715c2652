/*
 * jinja_methods.c - methods of str, dict and list as Python has them, and
 * Python's two string formatting languages ("%s" % x and "{}".format(x)).
 *
 * Templates call Python methods directly (message.content.strip(),
 * tool.items(), "a,b".split(",")), so these follow CPython on UTF-8 text:
 * indexes and lengths count code points, whitespace is str.isspace(), and
 * the argument names and defaults are Python's. Methods that mutate a dict,
 * or a list in place in ways the immutable sandbox forbids (append, extend,
 * insert, remove, reverse, sort), are reported as unsafe; list.pop and
 * list.clear are allowed there, so they are here too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "jinja.h"

/* ---------------------------------------------------------------- shared helpers */

int ob_jb_bind(ob_jctx *c, const char *fname, const char *const *params, const ob_jargs *a, ob_jv *slots) {
    uint32_t np = 0;
    while (params && params[np]) np++;
    for (uint32_t i = 0; i < np; i++) {
        slots[i] = ob_jv_undef();
        slots[i].k = OB_JV_MISSING;
    }
    if (a->npos > np)
        return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes at most %u argument%s (%u given)", fname, np, np == 1 ? "" : "s",
                              a->npos);
    for (uint32_t i = 0; i < a->npos; i++) slots[i] = a->pos[i];
    for (uint32_t k = 0; k < a->nkw; k++) {
        uint32_t kl = 0;
        const char *kn = ob_jargs_kwname(a, k, &kl);
        uint32_t i = 0;
        while (i < np && !(strlen(params[i]) == kl && memcmp(params[i], kn, kl) == 0)) i++;
        if (i == np)
            return ob_jinja_error(c, OB_ERR_FORMAT, "%s() got an unexpected keyword argument '%.*s'", fname, (int)kl, kn);
        if (ob_jb_given(slots[i]))
            return ob_jinja_error(c, OB_ERR_FORMAT, "%s() got multiple values for argument '%.*s'", fname, (int)kl, kn);
        slots[i] = a->kw[k];
    }
    return 0;
}

int ob_jb_finish(ob_jctx *c, ob_jbuf *b, ob_jv *out) {
    int rc = ob_jv_str_from_buf(c, b, out);
    ob_jbuf_free(b);
    return rc;
}

static bool in_chars(uint32_t cp, const char *chars, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = 0;
        if (ob_jt_decode(chars + i, n - i, &k) == cp) return true;
        i += (size_t)k;
    }
    return false;
}

static bool strip_match(const char *s, size_t n, size_t pos, const char *chars, size_t nchars, int *len) {
    uint32_t cp = ob_jt_decode(s + pos, n - pos, len);
    return chars ? in_chars(cp, chars, nchars) : ob_jt_isspace(cp);
}

void ob_js_strip(const char *s, size_t n, const char *chars, size_t nchars, bool left, bool right, size_t *start,
                 size_t *end) {
    size_t a = 0, b = n;
    int k = 0;
    if (left)
        while (a < b && strip_match(s, n, a, chars, nchars, &k)) a += (size_t)k;
    if (right)
        while (b > a) {
            size_t p = b - 1;
            while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
            if (!strip_match(s, n, p, chars, nchars, &k)) break;
            b = p;
        }
    *start = a;
    *end = b;
}

void ob_js_upper(ob_jbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(s + i, n - i, &k);
        ob_jt_put_upper(b, cp);
        i += (size_t)k;
    }
}

void ob_js_lower(ob_jbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(s + i, n - i, &k);
        ob_jt_put_lower(b, cp);
        i += (size_t)k;
    }
}

void ob_js_capitalize(ob_jbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(s + i, n - i, &k);
        if (i == 0) ob_jt_put_title(b, cp);
        else ob_jt_put_lower(b, cp);
        i += (size_t)k;
    }
}

void ob_js_replace(ob_jbuf *b, const char *s, size_t n, const char *old, size_t nold, const char *rep, size_t nrep,
                   int64_t count) {
    if (count < 0) count = INT64_MAX;
    if (nold == 0) { /* Python inserts the replacement between every character */
        size_t i = 0;
        while (i <= n) {
            if (count > 0) {
                ob_jbuf_put(b, rep, nrep);
                count--;
            }
            if (i == n) break;
            int k = 0;
            ob_jt_decode(s + i, n - i, &k);
            ob_jbuf_put(b, s + i, (size_t)k);
            i += (size_t)k;
        }
        return;
    }
    size_t i = 0;
    while (count > 0 && i + nold <= n) {
        const char *p = ob_jt_find(s + i, n - i, old, nold);
        if (!p) break;
        size_t at = (size_t)(p - s);
        ob_jbuf_put(b, s + i, at - i);
        ob_jbuf_put(b, rep, nrep);
        i = at + nold;
        count--;
    }
    ob_jbuf_put(b, s + i, n - i);
}

/* Length of a line break at s[i] (\r\n counts as one), 0 if none. */
static size_t line_break(const char *s, size_t n, size_t i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\r') return (i + 1 < n && s[i + 1] == '\n') ? 2 : 1;
    if (c == '\n' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E)) return 1;
    if (c >= 0x80) {
        int k = 0;
        uint32_t cp = ob_jt_decode(s + i, n - i, &k);
        if (cp == 0x85 || cp == 0x2028 || cp == 0x2029) return (size_t)k;
    }
    return 0;
}

int ob_js_splitlines(ob_jctx *c, const char *s, size_t n, bool keepends, ob_jlist **out) {
    ob_jlist *l = ob_jlist_new(c, 0);
    if (!l) return c->status;
    size_t start = 0, i = 0;
    while (i < n) {
        size_t k = line_break(s, n, i);
        if (!k) {
            i++;
            continue;
        }
        OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + start, (keepends ? i + k : i) - start)));
        i += k;
        start = i;
    }
    if (start < n) OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + start, n - start)));
    *out = l;
    return 0;
}

/* ---------------------------------------------------------------- str methods */

#define BIND(name, ...)                                              \
    static const char *const P_[] = {__VA_ARGS__, NULL};             \
    ob_jv p[sizeof P_ / sizeof P_[0]];                               \
    OB_TRY(ob_jb_bind(c, name, P_, a, p))

#define BIND0(name)                                                   \
    if (a->npos || a->nkw) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes no arguments", name)

static int need_str(ob_jctx *c, ob_jv v, const char *fname, const char *what) {
    if (v.t == OB_JV_STR) return 0;
    if (v.t == OB_JV_UNDEF && v.k != OB_JV_MISSING) return ob_jinja_undefined_error(c, v);
    return ob_jinja_error(c, OB_ERR_FORMAT, "%s() %s must be str, not %s", fname, what, ob_jv_type_name(v));
}

static int need_int(ob_jctx *c, ob_jv v, const char *fname, int64_t *out) {
    if (v.t == OB_JV_INT) *out = v.u.i;
    else if (v.t == OB_JV_BOOL) *out = v.u.b;
    else if (v.t == OB_JV_UNDEF && v.k != OB_JV_MISSING) return ob_jinja_undefined_error(c, v);
    else return ob_jinja_error(c, OB_ERR_FORMAT, "%s(): '%s' object cannot be interpreted as an integer", fname, ob_jv_type_name(v));
    return 0;
}

/* Byte range of the code point range [start, end) given as Python
 * optional slice arguments (negative from the end, clamped). */
static int sub_range(ob_jctx *c, ob_jv self, ob_jv vs, ob_jv ve, const char *fname, size_t *bs, size_t *be) {
    int64_t n = (int64_t)ob_jt_count(self.u.s, self.n), s = 0, e = n;
    if (ob_jb_given(vs) && vs.t != OB_JV_NONE) OB_TRY(need_int(c, vs, fname, &s));
    if (ob_jb_given(ve) && ve.t != OB_JV_NONE) OB_TRY(need_int(c, ve, fname, &e));
    if (s < 0) s = s + n < 0 ? 0 : s + n;
    if (e < 0) e = e + n < 0 ? 0 : e + n;
    if (s > n) s = n + 1; /* empty, and not found even for "" */
    if (e > n) e = n;
    if (s > n) {
        *bs = self.n + 1;
        *be = self.n;
        return 0;
    }
    *bs = ob_jt_offset(self.u.s, self.n, (size_t)s);
    *be = e < s ? *bs : ob_jt_offset(self.u.s, self.n, (size_t)e);
    return 0;
}

static int m_strip_any(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, const char *name, bool l, bool r) {
    BIND(name, "chars");
    const char *chars = NULL;
    size_t nchars = 0;
    if (ob_jb_given(p[0]) && p[0].t != OB_JV_NONE) {
        OB_TRY(need_str(c, p[0], name, "chars"));
        chars = p[0].u.s;
        nchars = p[0].n;
    }
    size_t s, e;
    ob_js_strip(self.u.s, self.n, chars, nchars, l, r, &s, &e);
    *out = ob_jv_strref(self.u.s + s, e - s);
    return 0;
}
static int m_strip(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) { return m_strip_any(c, self, a, out, "strip", true, true); }
static int m_lstrip(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) { return m_strip_any(c, self, a, out, "lstrip", true, false); }
static int m_rstrip(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) { return m_strip_any(c, self, a, out, "rstrip", false, true); }

static int m_upper(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("upper");
    ob_jbuf b = ob_jb_buf(c);
    ob_js_upper(&b, self.u.s, self.n);
    return ob_jb_finish(c, &b, out);
}

static int m_lower(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("lower");
    ob_jbuf b = ob_jb_buf(c);
    ob_js_lower(&b, self.u.s, self.n);
    return ob_jb_finish(c, &b, out);
}

static int m_casefold(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("casefold");
    ob_jbuf b = ob_jb_buf(c);
    ob_js_lower(&b, self.u.s, self.n);
    return ob_jb_finish(c, &b, out);
}

static int m_swapcase(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("swapcase");
    ob_jbuf b = ob_jb_buf(c);
    for (size_t i = 0; i < self.n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(self.u.s + i, self.n - i, &k);
        if (ob_jt_isupper(cp)) ob_jt_put_lower(&b, cp);
        else if (ob_jt_islower(cp)) ob_jt_put_upper(&b, cp);
        else ob_jbuf_put(&b, self.u.s + i, (size_t)k);
        i += (size_t)k;
    }
    return ob_jb_finish(c, &b, out);
}

static int m_capitalize(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("capitalize");
    ob_jbuf b = ob_jb_buf(c);
    ob_js_capitalize(&b, self.u.s, self.n);
    return ob_jb_finish(c, &b, out);
}

/* str.title(): a cased character after an uncased one starts a word. */
static int m_title(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("title");
    ob_jbuf b = ob_jb_buf(c);
    bool prev_cased = false;
    for (size_t i = 0; i < self.n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(self.u.s + i, self.n - i, &k);
        if (prev_cased) ob_jt_put_lower(&b, cp);
        else ob_jt_put_title(&b, cp);
        prev_cased = ob_jt_iscased(cp);
        i += (size_t)k;
    }
    return ob_jb_finish(c, &b, out);
}

static int m_affix(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool start) {
    const char *name = start ? "startswith" : "endswith";
    BIND(name, "prefix", "start", "end");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes at least 1 argument (0 given)", name);
    size_t bs, be;
    OB_TRY(sub_range(c, self, p[1], p[2], name, &bs, &be));
    const ob_jv *cands = &p[0];
    uint32_t nc = 1;
    if (p[0].t == OB_JV_LIST && p[0].k == OB_JL_TUPLE) {
        cands = p[0].u.l->v;
        nc = p[0].u.l->n;
    }
    *out = ob_jv_bool(false);
    if (bs > be) return 0;
    for (uint32_t i = 0; i < nc; i++) {
        if (cands[i].t != OB_JV_STR)
            return ob_jinja_error(c, OB_ERR_FORMAT, "%s first arg must be str or a tuple of str, not %s", name,
                                  ob_jv_type_name(cands[i]));
        size_t k = cands[i].n;
        if (k > be - bs) continue;
        const char *at = start ? self.u.s + bs : self.u.s + be - k;
        if (k == 0 || memcmp(at, cands[i].u.s, k) == 0) {
            *out = ob_jv_bool(true);
            return 0;
        }
    }
    return 0;
}
static int m_startswith(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) { return m_affix(c, self, a, out, true); }
static int m_endswith(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) { return m_affix(c, self, a, out, false); }

/* find/rfind/index/rindex/count share the search. */
static int m_search(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, const char *name, bool rev, bool raise, bool count) {
    BIND(name, "sub", "start", "end");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes at least 1 argument (0 given)", name);
    OB_TRY(need_str(c, p[0], name, "argument"));
    size_t bs, be;
    OB_TRY(sub_range(c, self, p[1], p[2], name, &bs, &be));
    const char *sub = p[0].u.s;
    size_t k = p[0].n;
    int64_t found = -1, hits = 0;
    if (bs <= be) {
        if (count) {
            if (k == 0) hits = (int64_t)ob_jt_count(self.u.s + bs, be - bs) + 1;
            else
                for (size_t i = bs; i + k <= be;) {
                    const char *q = ob_jt_find(self.u.s + i, be - i, sub, k);
                    if (!q) break;
                    hits++;
                    i = (size_t)(q - self.u.s) + k;
                }
        } else if (!rev) {
            const char *q = k ? ob_jt_find(self.u.s + bs, be - bs, sub, k) : self.u.s + bs;
            if (q) found = (int64_t)(q - self.u.s);
        } else if (k <= be - bs) {
            for (size_t i = be - k + 1; i-- > bs;)
                if (memcmp(self.u.s + i, sub, k) == 0) {
                    found = (int64_t)i;
                    break;
                }
        }
    }
    if (count) {
        *out = ob_jv_int(hits);
        return 0;
    }
    if (found < 0) {
        if (raise) return ob_jinja_error(c, OB_ERR_FORMAT, "substring not found");
        *out = ob_jv_int(-1);
        return 0;
    }
    *out = ob_jv_int((int64_t)ob_jt_count(self.u.s, (size_t)found));
    return 0;
}
static int m_find(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_search(c, s, a, o, "find", false, false, false); }
static int m_rfind(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_search(c, s, a, o, "rfind", true, false, false); }
static int m_index(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_search(c, s, a, o, "index", false, true, false); }
static int m_rindex(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_search(c, s, a, o, "rindex", true, true, false); }
static int m_count(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_search(c, s, a, o, "count", false, false, true); }

static int m_replace(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("replace", "old", "new", "count");
    if (!ob_jb_given(p[0]) || !ob_jb_given(p[1]))
        return ob_jinja_error(c, OB_ERR_FORMAT, "replace() takes at least 2 arguments");
    OB_TRY(need_str(c, p[0], "replace", "argument 1"));
    OB_TRY(need_str(c, p[1], "replace", "argument 2"));
    int64_t count = -1;
    if (ob_jb_given(p[2])) OB_TRY(need_int(c, p[2], "replace", &count));
    ob_jbuf b = ob_jb_buf(c);
    ob_js_replace(&b, self.u.s, self.n, p[0].u.s, p[0].n, p[1].u.s, p[1].n, count);
    return ob_jb_finish(c, &b, out);
}

static int m_split_any(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool rev) {
    const char *name = rev ? "rsplit" : "split";
    BIND(name, "sep", "maxsplit");
    int64_t maxsplit = -1;
    if (ob_jb_given(p[1])) OB_TRY(need_int(c, p[1], name, &maxsplit));
    if (maxsplit < 0) maxsplit = INT64_MAX;
    ob_jlist *l = ob_jlist_new(c, 0);
    if (!l) return c->status;
    const char *s = self.u.s;
    size_t n = self.n;
    if (!ob_jb_given(p[0]) || p[0].t == OB_JV_NONE) {
        /* runs of whitespace separate; empty pieces never appear */
        ob_jv *parts = NULL;
        if (!rev) {
            size_t i = 0;
            int k = 0;
            for (;;) {
                while (i < n && strip_match(s, n, i, NULL, 0, &k)) i += (size_t)k;
                if (i >= n) break;
                if (maxsplit == 0) {
                    size_t e, st;
                    ob_js_strip(s + i, n - i, NULL, 0, false, true, &st, &e);
                    OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + i, e)));
                    break;
                }
                size_t j = i;
                while (j < n && !strip_match(s, n, j, NULL, 0, &k)) j += (size_t)k;
                OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + i, j - i)));
                maxsplit--;
                i = j;
            }
        } else {
            size_t e = n;
            for (;;) {
                size_t st, en;
                ob_js_strip(s, e, NULL, 0, false, true, &st, &en);
                e = en;
                if (e == 0) break;
                if (maxsplit == 0) {
                    ob_js_strip(s, e, NULL, 0, true, false, &st, &en);
                    OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + st, e - st)));
                    break;
                }
                size_t j = e;
                int k = 0;
                while (j > 0) {
                    size_t q = j - 1;
                    while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
                    if (strip_match(s, n, q, NULL, 0, &k)) break;
                    j = q;
                }
                OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + j, e - j)));
                maxsplit--;
                e = j;
            }
            (void)parts;
        }
    } else {
        OB_TRY(need_str(c, p[0], name, "sep"));
        const char *sep = p[0].u.s;
        size_t k = p[0].n;
        if (k == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "empty separator");
        if (!rev) {
            size_t i = 0;
            while (maxsplit > 0) {
                const char *q = i + k <= n ? ob_jt_find(s + i, n - i, sep, k) : NULL;
                if (!q) break;
                size_t at = (size_t)(q - s);
                OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + i, at - i)));
                i = at + k;
                maxsplit--;
            }
            OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + i, n - i)));
        } else {
            size_t e = n;
            while (maxsplit > 0 && e >= k) {
                size_t j = e - k + 1, at = SIZE_MAX;
                while (j-- > 0)
                    if (memcmp(s + j, sep, k) == 0) {
                        at = j;
                        break;
                    }
                if (at == SIZE_MAX) break;
                OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s + at + k, e - at - k)));
                e = at;
                maxsplit--;
            }
            OB_TRY(ob_jlist_push(c, l, ob_jv_strref(s, e)));
        }
    }
    if (rev) /* collected right to left */
        for (uint32_t i = 0, j = l->n ? l->n - 1 : 0; i < j; i++, j--) {
            ob_jv t = l->v[i];
            l->v[i] = l->v[j];
            l->v[j] = t;
        }
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}
static int m_split(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_split_any(c, s, a, o, false); }
static int m_rsplit(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_split_any(c, s, a, o, true); }

static int m_splitlines(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("splitlines", "keepends");
    ob_jlist *l;
    OB_TRY(ob_js_splitlines(c, self.u.s, self.n, ob_jb_given(p[0]) && ob_jv_truthy(p[0]), &l));
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int m_join(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("join", "iterable");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "join() takes exactly one argument (0 given)");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    if (p[0].t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, p[0]);
    OB_TRY(ob_jinja_iterate(c, p[0], &items, &n));
    ob_jbuf b = ob_jb_buf(c);
    for (uint32_t i = 0; i < n; i++) {
        if (items[i].t != OB_JV_STR) {
            ob_jbuf_free(&b);
            return ob_jinja_error(c, OB_ERR_FORMAT, "sequence item %u: expected str instance, %s found", i,
                                  ob_jv_type_name(items[i]));
        }
        if (i) ob_jbuf_put(&b, self.u.s, self.n);
        ob_jbuf_put(&b, items[i].u.s, items[i].n);
    }
    return ob_jb_finish(c, &b, out);
}

static int m_partition_any(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool rev) {
    const char *name = rev ? "rpartition" : "partition";
    BIND(name, "sep");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes exactly one argument (0 given)", name);
    OB_TRY(need_str(c, p[0], name, "sep"));
    if (!p[0].n) return ob_jinja_error(c, OB_ERR_FORMAT, "empty separator");
    const char *s = self.u.s;
    size_t n = self.n, k = p[0].n, at = SIZE_MAX;
    if (!rev) {
        const char *q = k <= n ? ob_jt_find(s, n, p[0].u.s, k) : NULL;
        if (q) at = (size_t)(q - s);
    } else if (k <= n) {
        for (size_t j = n - k + 1; j-- > 0;)
            if (memcmp(s + j, p[0].u.s, k) == 0) {
                at = j;
                break;
            }
    }
    ob_jlist *l = ob_jlist_new(c, 3);
    if (!l) return c->status;
    ob_jv empty = ob_jv_strref("", 0);
    if (at == SIZE_MAX) {
        l->v[0] = rev ? empty : self;
        l->v[1] = empty;
        l->v[2] = rev ? self : empty;
    } else {
        l->v[0] = ob_jv_strref(s, at);
        l->v[1] = p[0];
        l->v[2] = ob_jv_strref(s + at + k, n - at - k);
    }
    l->n = 3;
    *out = ob_jv_list(l, OB_JL_TUPLE);
    return 0;
}
static int m_partition(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_partition_any(c, s, a, o, false); }
static int m_rpartition(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_partition_any(c, s, a, o, true); }

static int m_affix_remove(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool prefix) {
    const char *name = prefix ? "removeprefix" : "removesuffix";
    BIND(name, "affix");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes exactly one argument (0 given)", name);
    OB_TRY(need_str(c, p[0], name, "argument"));
    size_t k = p[0].n;
    *out = self;
    if (k && k <= self.n) {
        if (prefix && memcmp(self.u.s, p[0].u.s, k) == 0) *out = ob_jv_strref(self.u.s + k, self.n - k);
        if (!prefix && memcmp(self.u.s + self.n - k, p[0].u.s, k) == 0) *out = ob_jv_strref(self.u.s, self.n - k);
    }
    return 0;
}
static int m_removeprefix(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_affix_remove(c, s, a, o, true); }
static int m_removesuffix(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_affix_remove(c, s, a, o, false); }

/* center / ljust / rjust / zfill */
static int m_pad(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, int mode) {
    static const char *const names[] = {"center", "ljust", "rjust", "zfill"};
    const char *name = names[mode];
    BIND(name, "width", "fillchar");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes at least 1 argument (0 given)", name);
    int64_t width = 0;
    OB_TRY(need_int(c, p[0], name, &width));
    const char *fill = " ";
    size_t nfill = 1;
    if (mode == 3 && ob_jb_given(p[1])) return ob_jinja_error(c, OB_ERR_FORMAT, "zfill() takes exactly one argument");
    if (ob_jb_given(p[1])) {
        OB_TRY(need_str(c, p[1], name, "fillchar"));
        if (ob_jt_count(p[1].u.s, p[1].n) != 1)
            return ob_jinja_error(c, OB_ERR_FORMAT, "The fill character must be exactly one character long");
        fill = p[1].u.s;
        nfill = p[1].n;
    }
    int64_t len = (int64_t)ob_jt_count(self.u.s, self.n);
    if (width <= len) {
        *out = self;
        return 0;
    }
    if (width > (int64_t)(c->out.limit ? c->out.limit : ((size_t)1 << 30)))
        return ob_jinja_error(c, OB_ERR_RANGE, "%s() width too large", name);
    int64_t pad = width - len, left = 0;
    if (mode == 0) left = pad / 2 + (pad & width & 1);
    else if (mode == 2 || mode == 3) left = pad;
    ob_jbuf b = ob_jb_buf(c);
    size_t body = 0;
    if (mode == 3) {
        fill = "0";
        if (self.n && (self.u.s[0] == '+' || self.u.s[0] == '-')) {
            ob_jbuf_putc(&b, self.u.s[0]);
            body = 1;
        }
    }
    for (int64_t i = 0; i < left; i++) ob_jbuf_put(&b, fill, nfill);
    ob_jbuf_put(&b, self.u.s + body, self.n - body);
    for (int64_t i = left; i < pad; i++) ob_jbuf_put(&b, fill, nfill);
    return ob_jb_finish(c, &b, out);
}
static int m_center(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_pad(c, s, a, o, 0); }
static int m_ljust(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_pad(c, s, a, o, 1); }
static int m_rjust(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_pad(c, s, a, o, 2); }
static int m_zfill(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_pad(c, s, a, o, 3); }

/* is*(): false for "", else every character must pass. */
static int m_is(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, const char *name, bool (*pred)(uint32_t)) {
    BIND0(name);
    bool ok = self.n > 0;
    for (size_t i = 0; ok && i < self.n;) {
        int k = 0;
        ok = pred(ob_jt_decode(self.u.s + i, self.n - i, &k));
        i += (size_t)k;
    }
    *out = ob_jv_bool(ok);
    return 0;
}
static int m_isalpha(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_is(c, s, a, o, "isalpha", ob_jt_isalpha); }
static int m_isdigit(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_is(c, s, a, o, "isdigit", ob_jt_isdigit); }
static int m_isalnum(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_is(c, s, a, o, "isalnum", ob_jt_isalnum); }
static int m_isspace(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_is(c, s, a, o, "isspace", ob_jt_isspace); }

/* isupper/islower: at least one cased character and none of the other case. */
static int m_iscase(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool upper) {
    BIND0(upper ? "isupper" : "islower");
    bool cased = false, ok = true;
    for (size_t i = 0; i < self.n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(self.u.s + i, self.n - i, &k);
        if (upper ? ob_jt_islower(cp) : ob_jt_isupper(cp)) ok = false;
        if (ob_jt_iscased(cp) && (upper ? ob_jt_isupper(cp) : ob_jt_islower(cp))) cased = true;
        if (ob_jt_iscased(cp) && !ob_jt_isupper(cp) && !ob_jt_islower(cp)) ok = false; /* titlecase */
        i += (size_t)k;
    }
    *out = ob_jv_bool(ok && cased);
    return 0;
}
static int m_isupper(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_iscase(c, s, a, o, true); }
static int m_islower(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return m_iscase(c, s, a, o, false); }

static int m_format(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out);

static const ob_jbuiltin g_str_methods[] = {
    {"capitalize", m_capitalize}, {"casefold", m_casefold}, {"center", m_center}, {"count", m_count},
    {"endswith", m_endswith}, {"find", m_find}, {"format", m_format}, {"index", m_index},
    {"isalnum", m_isalnum}, {"isalpha", m_isalpha}, {"isdecimal", m_isdigit}, {"isdigit", m_isdigit},
    {"islower", m_islower}, {"isnumeric", m_isdigit}, {"isspace", m_isspace}, {"isupper", m_isupper},
    {"join", m_join}, {"ljust", m_ljust}, {"lower", m_lower}, {"lstrip", m_lstrip},
    {"partition", m_partition}, {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix},
    {"replace", m_replace}, {"rfind", m_rfind}, {"rindex", m_rindex}, {"rjust", m_rjust},
    {"rpartition", m_rpartition}, {"rsplit", m_rsplit}, {"rstrip", m_rstrip}, {"split", m_split},
    {"splitlines", m_splitlines}, {"startswith", m_startswith}, {"strip", m_strip}, {"swapcase", m_swapcase},
    {"title", m_title}, {"upper", m_upper}, {"zfill", m_zfill},
};

/* ---------------------------------------------------------------- dict and list methods */

static int d_get(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("get", "key", "default");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "get expected at least 1 argument, got 0");
    if ((p[0].t == OB_JV_LIST && p[0].k != OB_JL_TUPLE) || p[0].t == OB_JV_DICT || p[0].t == OB_JV_NS)
        return ob_jinja_error(c, OB_ERR_FORMAT, "unhashable type: '%s'", ob_jv_type_name(p[0]));
    ob_jv *v = ob_jdict_get(self.u.d, p[0]);
    *out = v ? *v : ob_jb_given(p[1]) ? p[1] : ob_jv_none();
    return 0;
}

static int d_view(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, int which) {
    BIND0(which == 0 ? "items" : which == 1 ? "keys" : "values");
    const ob_jdict *d = self.u.d;
    ob_jlist *l = ob_jlist_new(c, d->n);
    if (!l) return c->status;
    for (uint32_t i = 0; i < d->n; i++) {
        if (which == 1) l->v[i] = d->key[i];
        else if (which == 2) l->v[i] = d->val[i];
        else {
            ob_jlist *pair = ob_jlist_new(c, 2);
            if (!pair) return c->status;
            pair->v[0] = d->key[i];
            pair->v[1] = d->val[i];
            pair->n = 2;
            l->v[i] = ob_jv_list(pair, OB_JL_TUPLE);
        }
    }
    l->n = d->n;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}
static int d_items(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return d_view(c, s, a, o, 0); }
static int d_keys(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return d_view(c, s, a, o, 1); }
static int d_values(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return d_view(c, s, a, o, 2); }

static int d_copy(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("copy");
    const ob_jdict *d = self.u.d;
    ob_jdict *n = ob_jdict_new(c, d->n);
    if (!n) return c->status;
    for (uint32_t i = 0; i < d->n; i++) OB_TRY(ob_jdict_set(c, n, d->key[i], d->val[i]));
    *out = ob_jv_dict(n);
    return 0;
}

static const ob_jbuiltin g_dict_methods[] = {
    {"copy", d_copy}, {"get", d_get}, {"items", d_items}, {"keys", d_keys}, {"values", d_values},
};
static const char *const g_dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};

static int l_index_count(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool count) {
    const char *name = count ? "count" : "index";
    BIND(name, "value");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes exactly one argument (0 given)", name);
    int64_t hits = 0;
    for (uint32_t i = 0; i < self.u.l->n; i++)
        if (ob_jv_eq(self.u.l->v[i], p[0])) {
            if (!count) {
                *out = ob_jv_int(i);
                return 0;
            }
            hits++;
        }
    if (!count) return ob_jinja_error(c, OB_ERR_FORMAT, "value is not in list");
    *out = ob_jv_int(hits);
    return 0;
}
static int l_index(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return l_index_count(c, s, a, o, false); }
static int l_count(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return l_index_count(c, s, a, o, true); }

static int l_copy(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("copy");
    ob_jlist *l = ob_jlist_new(c, self.u.l->n);
    if (!l) return c->status;
    if (self.u.l->n) memcpy(l->v, self.u.l->v, self.u.l->n * sizeof(ob_jv));
    l->n = self.u.l->n;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

/* list.pop mutates in place: every holder of the list sees it, as in Python. */
static int l_pop(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("pop", "index");
    ob_jlist *l = self.u.l;
    int64_t i = -1;
    if (ob_jb_given(p[0])) OB_TRY(need_int(c, p[0], "pop", &i));
    if (!l->n) return ob_jinja_error(c, OB_ERR_FORMAT, "pop from empty list");
    if (i < 0) i += l->n;
    if (i < 0 || i >= (int64_t)l->n) return ob_jinja_error(c, OB_ERR_FORMAT, "pop index out of range");
    *out = l->v[i];
    memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof(ob_jv));
    l->n--;
    return 0;
}

static int l_clear(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND0("clear");
    self.u.l->n = 0;
    *out = ob_jv_none();
    return 0;
}

static const ob_jbuiltin g_list_methods[] = {
    {"clear", l_clear}, {"copy", l_copy}, {"count", l_count}, {"index", l_index}, {"pop", l_pop},
};
static const ob_jbuiltin g_tuple_methods[] = {{"count", l_count}, {"index", l_index}};
static const char *const g_list_unsafe[] = {"append", "extend", "insert", "remove", "reverse", "sort", NULL};

static const ob_jbuiltin *find_in(const ob_jbuiltin *t, size_t n, const char *s, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && memcmp(t[i].name, s, len) == 0) return &t[i];
    return NULL;
}

static bool listed(const char *const *names, const char *s, size_t len) {
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return true;
    return false;
}

const ob_jbuiltin *ob_jinja_find_method(ob_jv self, const char *name, size_t n, bool *unsafe) {
    *unsafe = false;
    switch (self.t) {
    case OB_JV_STR: return find_in(g_str_methods, OB_ARRAY_LEN(g_str_methods), name, n);
    case OB_JV_DICT:
        if (listed(g_dict_unsafe, name, n)) *unsafe = true;
        return find_in(g_dict_methods, OB_ARRAY_LEN(g_dict_methods), name, n);
    case OB_JV_LIST:
        if (self.k == OB_JL_TUPLE) return find_in(g_tuple_methods, OB_ARRAY_LEN(g_tuple_methods), name, n);
        if (listed(g_list_unsafe, name, n)) *unsafe = true;
        return find_in(g_list_methods, OB_ARRAY_LEN(g_list_methods), name, n);
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- "%" formatting */

static int num_for(ob_jctx *c, ob_jv v, char conv, bool want_int, double *f, int64_t *i, bool *is_float) {
    *is_float = false;
    if (v.t == OB_JV_INT || v.t == OB_JV_BOOL) {
        *i = v.t == OB_JV_INT ? v.u.i : v.u.b;
        *f = (double)*i;
        return 0;
    }
    if (v.t == OB_JV_FLOAT && !want_int) {
        *f = v.u.f;
        *is_float = true;
        if (isfinite(v.u.f) && fabs(v.u.f) < 9.2e18) *i = (int64_t)v.u.f;
        else if (conv == 'd' || conv == 'i' || conv == 'u')
            return ob_jinja_error(c, OB_ERR_FORMAT, "cannot convert float %s to integer", isnan(v.u.f) ? "NaN" : "infinity");
        return 0;
    }
    if (v.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, v);
    if (want_int) return ob_jinja_error(c, OB_ERR_FORMAT, "%%%c format: an integer is required, not %s", conv, ob_jv_type_name(v));
    return ob_jinja_error(c, OB_ERR_FORMAT, "%%%c format: a real number is required, not %s", conv, ob_jv_type_name(v));
}

/* Pad text to width (code points); left-justify with '-'. */
static void put_padded(ob_jbuf *b, const char *s, size_t n, int64_t width, bool left, char fill) {
    int64_t len = (int64_t)ob_jt_count(s, n);
    if (!left)
        for (int64_t i = len; i < width; i++) ob_jbuf_putc(b, fill);
    ob_jbuf_put(b, s, n);
    if (left)
        for (int64_t i = len; i < width; i++) ob_jbuf_putc(b, ' ');
}

int ob_jinja_percent_format(ob_jctx *c, ob_jv fmt, ob_jv arg, ob_jv *out) {
    const ob_jv *args = &arg;
    uint32_t nargs = 1, next = 0;
    const ob_jdict *map = NULL;
    if (arg.t == OB_JV_LIST && arg.k == OB_JL_TUPLE) {
        args = arg.u.l->v;
        nargs = arg.u.l->n;
    } else if (arg.t == OB_JV_DICT) {
        map = arg.u.d;
    }
    const char *s = fmt.u.s;
    size_t n = fmt.n;
    bool markup = fmt.k == OB_JS_MARKUP;
    ob_jbuf b = ob_jb_buf(c);
    int rc = 0;
    bool used_map = false;
    for (size_t i = 0; i < n && rc == 0;) {
        if (s[i] != '%') {
            const char *q = memchr(s + i, '%', n - i);
            size_t e = q ? (size_t)(q - s) : n;
            ob_jbuf_put(&b, s + i, e - i);
            i = e;
            continue;
        }
        i++;
        ob_jv v;
        bool have_v = false;
        if (i < n && s[i] == '(') {
            size_t st = ++i;
            int depth = 1;
            while (i < n && depth) {
                if (s[i] == '(') depth++;
                else if (s[i] == ')') depth--;
                i++;
            }
            if (depth) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "incomplete format key"); break; }
            if (!map) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "format requires a mapping"); break; }
            ob_jv *pv = ob_jdict_get_str(map, s + st, i - 1 - st);
            if (!pv) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "KeyError: '%.*s'", (int)(i - 1 - st), s + st); break; }
            v = *pv;
            have_v = true;
            used_map = true;
        }
        bool left = false, plus = false, space = false, alt = false, zero = false;
        for (; i < n && strchr("-+ #0", s[i]) && s[i]; i++) {
            if (s[i] == '-') left = true;
            else if (s[i] == '+') plus = true;
            else if (s[i] == ' ') space = true;
            else if (s[i] == '#') alt = true;
            else zero = true;
        }
        int64_t width = 0, prec = -1;
        if (i < n && s[i] == '*') {
            i++;
            if (next >= nargs || map) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "* wants int"); break; }
            ob_jv w = args[next++];
            if (w.t != OB_JV_INT) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "* wants int"); break; }
            width = w.u.i;
            if (width < 0) { left = true; width = -width; }
        } else {
            while (i < n && s[i] >= '0' && s[i] <= '9' && width < 100000) width = width * 10 + (s[i++] - '0');
        }
        if (i < n && s[i] == '.') {
            i++;
            prec = 0;
            if (i < n && s[i] == '*') {
                i++;
                if (next >= nargs || map || args[next].t != OB_JV_INT) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "* wants int"); break; }
                prec = args[next++].u.i;
                if (prec < 0) prec = 0;
            } else {
                while (i < n && s[i] >= '0' && s[i] <= '9' && prec < 100000) prec = prec * 10 + (s[i++] - '0');
            }
        }
        while (i < n && (s[i] == 'h' || s[i] == 'l' || s[i] == 'L')) i++;
        if (i >= n) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "incomplete format"); break; }
        char conv = s[i++];
        if (width > 1000000 || prec > 1000000) { rc = ob_jinja_error(c, OB_ERR_RANGE, "format width too large"); break; }
        if (conv == '%') {
            ob_jbuf_putc(&b, '%');
            continue;
        }
        if (!have_v) {
            if (map) v = arg; /* "%s" % {'a': 1} formats the dict itself */
            else if (next >= nargs) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "not enough arguments for format string"); break; }
            else v = args[next++];
        }
        if (conv == 's' || conv == 'r' || conv == 'a') {
            ob_jbuf t = ob_jb_buf(c);
            if (conv == 's') ob_jv_write_str(&t, v);
            else ob_jv_write_repr(&t, v);
            if (markup && !(conv == 's' && v.t == OB_JV_STR && v.k == OB_JS_MARKUP)) {
                ob_jbuf e = ob_jb_buf(c);
                ob_jv_html_escape(&e, t.p ? t.p : "", t.n);
                ob_jbuf_free(&t);
                t = e;
            }
            size_t len = t.n;
            if (prec >= 0) len = ob_jt_offset(t.p ? t.p : "", t.n, (size_t)prec);
            put_padded(&b, t.p ? t.p : "", len, width, left, ' ');
            ob_jbuf_free(&t);
            continue;
        }
        if (conv == 'c') {
            char u[8];
            ob_jbuf t = {0};
            if (v.t == OB_JV_INT && v.u.i >= 0 && v.u.i <= 0x10FFFF) ob_jbuf_put_cp(&t, (uint32_t)v.u.i);
            else if (v.t == OB_JV_STR && ob_jt_count(v.u.s, v.n) == 1) ob_jbuf_put(&t, v.u.s, v.n);
            else { rc = ob_jinja_error(c, OB_ERR_FORMAT, "%%c requires int or char"); break; }
            if (t.n) memcpy(u, t.p, t.n);
            put_padded(&b, u, t.n, width, left, ' ');
            ob_jbuf_free(&t);
            continue;
        }
        bool want_int = conv == 'x' || conv == 'X' || conv == 'o';
        if (conv == 0 || !strchr("diuxXoeEfFgG", conv)) { /* strchr finds the terminator too */
            rc = ob_jinja_error(c, OB_ERR_FORMAT, "unsupported format character '%c' (0x%x)", conv, (unsigned char)conv);
            break;
        }
        double f = 0;
        int64_t iv = 0;
        bool is_float;
        rc = num_for(c, v, conv, want_int, &f, &iv, &is_float);
        if (rc) break;
        char spec[32], num[400];
        size_t k = 0;
        spec[k++] = '%';
        if (plus) spec[k++] = '+';
        else if (space) spec[k++] = ' ';
        if (alt && conv != 'o') spec[k++] = '#';
        if (conv == 'd' || conv == 'i' || conv == 'u' || want_int) {
            if (prec >= 0) k += (size_t)snprintf(spec + k, sizeof spec - k, ".%d", (int)(prec > 300 ? 300 : prec));
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = (conv == 'i' || conv == 'u') ? 'd' : conv;
            spec[k] = 0;
            if (conv == 'o' && alt) { /* Python writes 0o17, C writes 017 */
                char body[64];
                snprintf(body, sizeof body, "%llo", (unsigned long long)(iv < 0 ? -(uint64_t)iv : (uint64_t)iv));
                snprintf(num, sizeof num, "%s0o%s", iv < 0 ? "-" : plus ? "+" : space ? " " : "", body);
            } else if (want_int && iv < 0) { /* Python prints -ff, C would print the two's complement */
                char spec2[16], body[64];
                snprintf(spec2, sizeof spec2, "%%%sll%c", alt ? "#" : "", conv);
                snprintf(body, sizeof body, spec2, (unsigned long long)(-(uint64_t)iv));
                snprintf(num, sizeof num, "-%s", body);
            } else {
                snprintf(num, sizeof num, spec, (long long)iv);
            }
        } else {
            if (prec >= 0) k += (size_t)snprintf(spec + k, sizeof spec - k, ".%d", (int)(prec > 300 ? 300 : prec));
            spec[k++] = conv;
            spec[k] = 0;
            snprintf(num, sizeof num, spec, f);
        }
        size_t len = strlen(num);
        if (zero && !left && (int64_t)len < width) {
            size_t signlen = (num[0] == '-' || num[0] == '+' || num[0] == ' ') ? 1 : 0;
            if (len > signlen + 1 && num[signlen] == '0' && (num[signlen + 1] == 'x' || num[signlen + 1] == 'X' || num[signlen + 1] == 'o'))
                signlen += 2;
            ob_jbuf_put(&b, num, signlen);
            for (int64_t j = (int64_t)len; j < width; j++) ob_jbuf_putc(&b, '0');
            ob_jbuf_put(&b, num + signlen, len - signlen);
        } else {
            put_padded(&b, num, len, width, left, ' ');
        }
    }
    /* Leftover arguments are an error, unless the argument is a mapping
     * (CPython treats anything subscriptable but a tuple or str as one). */
    bool mapping_like = map || (arg.t == OB_JV_LIST && arg.k != OB_JL_TUPLE);
    if (rc == 0 && !mapping_like && next < nargs)
        rc = ob_jinja_error(c, OB_ERR_FORMAT, "not all arguments converted during string formatting");
    (void)used_map;
    if (rc) {
        ob_jbuf_free(&b);
        return rc;
    }
    OB_TRY(ob_jb_finish(c, &b, out));
    if (markup) out->k = OB_JS_MARKUP;
    return 0;
}

/* ---------------------------------------------------------------- str.format */

/* format(value, spec) for the common cases of Python's mini-language:
 * [[fill]align][sign][#][0][width][,_][.precision][type]. */
static int format_spec(ob_jctx *c, ob_jbuf *b, ob_jv v, const char *sp, size_t n) {
    if (n == 0) {
        ob_jv_write_str(b, v);
        return 0;
    }
    size_t i = 0;
    char fill[8] = " ", align = 0, sign = '-', type = 0, group = 0;
    size_t nfill = 1;
    bool alt = false, zero = false;
    int64_t width = -1, prec = -1;
    int k0 = 0;
    if (n >= 2) {
        ob_jt_decode(sp, n, &k0);
        if ((size_t)k0 < n && strchr("<>=^", sp[k0]) && sp[k0]) {
            memcpy(fill, sp, (size_t)k0);
            nfill = (size_t)k0;
            align = sp[k0];
            i = (size_t)k0 + 1;
        }
    }
    if (!align && i < n && strchr("<>=^", sp[i]) && sp[i]) align = sp[i++];
    if (i < n && (sp[i] == '+' || sp[i] == '-' || sp[i] == ' ')) sign = sp[i++];
    if (i < n && sp[i] == '#') { alt = true; i++; }
    if (i < n && sp[i] == '0') { zero = true; i++; }
    while (i < n && sp[i] >= '0' && sp[i] <= '9') { width = (width < 0 ? 0 : width) * 10 + (sp[i++] - '0'); if (width > 100000) break; }
    if (i < n && (sp[i] == ',' || sp[i] == '_')) group = sp[i++];
    if (i < n && sp[i] == '.') {
        i++;
        prec = 0;
        while (i < n && sp[i] >= '0' && sp[i] <= '9') { prec = prec * 10 + (sp[i++] - '0'); if (prec > 1000) break; }
    }
    if (i < n) type = sp[i++];
    if (i != n || width > 100000 || prec > 1000) return ob_jinja_error(c, OB_ERR_FORMAT, "Invalid format specifier");
    ob_jbuf t = ob_jb_buf(c);
    bool numeric = false;
    if (v.t == OB_JV_STR && (type == 0 || type == 's')) {
        size_t len = v.n;
        if (prec >= 0) len = ob_jt_offset(v.u.s, v.n, (size_t)prec);
        ob_jbuf_put(&t, v.u.s, len);
        if (!align) align = '<';
    } else if ((v.t == OB_JV_INT || v.t == OB_JV_BOOL) && (type == 0 || strchr("dbxXoc", type))) {
        numeric = true;
        int64_t iv = v.t == OB_JV_INT ? v.u.i : v.u.b;
        if (v.t == OB_JV_BOOL && type == 0) {
            ob_jbuf_puts(&t, v.u.b ? "True" : "False");
            numeric = false;
        } else {
            uint64_t m = iv < 0 ? -(uint64_t)iv : (uint64_t)iv;
            char digits[80];
            int nd = 0;
            int base = type == 'b' ? 2 : (type == 'x' || type == 'X') ? 16 : type == 'o' ? 8 : 10;
            do {
                int d = (int)(m % (uint64_t)base);
                digits[nd++] = (char)(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10);
                m /= (uint64_t)base;
            } while (m);
            if (iv < 0) ob_jbuf_putc(&t, '-');
            else if (sign == '+' || sign == ' ') ob_jbuf_putc(&t, sign);
            if (alt && base != 10) ob_jbuf_puts(&t, base == 2 ? "0b" : base == 8 ? "0o" : type == 'X' ? "0X" : "0x");
            for (int j = nd - 1; j >= 0; j--) {
                ob_jbuf_putc(&t, digits[j]);
                if (group && base == 10 && j && j % 3 == 0) ob_jbuf_putc(&t, group);
            }
        }
    } else if ((v.t == OB_JV_INT || v.t == OB_JV_BOOL || v.t == OB_JV_FLOAT) && (type == 0 || strchr("eEfFgG%", type))) {
        numeric = true;
        double f = v.t == OB_JV_FLOAT ? v.u.f : (double)(v.t == OB_JV_INT ? v.u.i : v.u.b);
        if (type == 0 && prec < 0) {
            if (f >= 0 && (sign == '+' || sign == ' ')) ob_jbuf_putc(&t, sign);
            ob_jt_float_repr(&t, f);
        } else {
            char spec[16], num[400];
            char ty = type == 0 ? 'g' : type == '%' ? 'f' : type;
            if (type == '%') f *= 100;
            snprintf(spec, sizeof spec, "%%%s%s.%d%c", sign == '+' ? "+" : sign == ' ' ? " " : "", alt ? "#" : "",
                     (int)(prec < 0 ? 6 : prec), ty);
            snprintf(num, sizeof num, spec, f);
            ob_jbuf_puts(&t, num);
            if (type == '%') ob_jbuf_putc(&t, '%');
            /* no type: like 'g', but fixed-point output keeps a digit after the point */
            if (type == 0 && isfinite(f) && !strpbrk(num, ".e")) ob_jbuf_puts(&t, ".0");
        }
    } else {
        ob_jbuf_free(&t);
        return ob_jinja_error(c, OB_ERR_FORMAT, "Unknown format code '%c' for object of type '%s'", type ? type : '?',
                              ob_jv_type_name(v));
    }
    if (!align) align = (numeric && zero) ? '=' : numeric ? '>' : '<';
    if (zero && !(nfill == 1 && fill[0] != ' ')) {
        fill[0] = '0';
        nfill = 1;
    }
    const char *tp = t.p ? t.p : "";
    int64_t len = (int64_t)ob_jt_count(tp, t.n), pad = width > len ? width - len : 0;
    int64_t lp = align == '<' ? 0 : align == '^' ? pad / 2 : pad;
    size_t signlen = 0;
    if (align == '=' && t.n && (tp[0] == '-' || tp[0] == '+' || tp[0] == ' ')) signlen = 1;
    ob_jbuf_put(b, tp, signlen);
    for (int64_t j = 0; j < lp; j++) ob_jbuf_put(b, fill, nfill);
    ob_jbuf_put(b, tp + signlen, t.n - signlen);
    for (int64_t j = lp; j < pad; j++) ob_jbuf_put(b, fill, nfill);
    ob_jbuf_free(&t);
    return 0;
}

static int m_format(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    const char *s = self.u.s;
    size_t n = self.n;
    ob_jbuf b = ob_jb_buf(c);
    uint32_t auto_idx = 0;
    int numbering = 0; /* 1 automatic "{}", 2 manual "{0}": Python refuses to mix them */
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        char ch = s[i];
        if (ch == '}') {
            if (i + 1 < n && s[i + 1] == '}') {
                ob_jbuf_putc(&b, '}');
                i += 2;
                continue;
            }
            rc = ob_jinja_error(c, OB_ERR_FORMAT, "Single '}' encountered in format string");
            break;
        }
        if (ch != '{') {
            ob_jbuf_putc(&b, ch);
            i++;
            continue;
        }
        if (i + 1 < n && s[i + 1] == '{') {
            ob_jbuf_putc(&b, '{');
            i += 2;
            continue;
        }
        size_t st = ++i;
        int depth = 1;
        while (i < n && depth) {
            if (s[i] == '{') depth++;
            else if (s[i] == '}') depth--;
            if (depth) i++;
        }
        if (i >= n) {
            rc = ob_jinja_error(c, OB_ERR_FORMAT, "expected '}' before end of string");
            break;
        }
        size_t en = i++; /* field is s[st..en) */
        size_t fe = st;
        while (fe < en && s[fe] != '.' && s[fe] != '[' && s[fe] != '!' && s[fe] != ':') fe++;
        ob_jv v;
        int mode = fe == st ? 1 : (s[st] >= '0' && s[st] <= '9') ? 2 : 0;
        if (mode && numbering && mode != numbering) {
            rc = ob_jinja_error(c, OB_ERR_FORMAT, "cannot switch from %s field specification to %s field numbering",
                                numbering == 1 ? "automatic" : "manual", mode == 1 ? "automatic" : "manual");
            break;
        }
        if (mode) numbering = mode;
        if (fe == st) {
            if (auto_idx >= a->npos) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "Replacement index %u out of range for positional args tuple", auto_idx); break; }
            v = a->pos[auto_idx++];
        } else if (s[st] >= '0' && s[st] <= '9') {
            uint64_t idx = 0;
            for (size_t j = st; j < fe; j++) idx = idx * 10 + (uint64_t)(s[j] - '0');
            if (idx >= a->npos) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "Replacement index %llu out of range for positional args tuple", (unsigned long long)idx); break; }
            v = a->pos[idx];
        } else {
            uint32_t k = 0;
            for (; k < a->nkw; k++) {
                uint32_t kl = 0;
                const char *kn = ob_jargs_kwname(a, k, &kl);
                if (kl == fe - st && memcmp(kn, s + st, kl) == 0) break;
            }
            if (k == a->nkw) { rc = ob_jinja_error(c, OB_ERR_FORMAT, "KeyError: '%.*s'", (int)(fe - st), s + st); break; }
            v = a->kw[k];
        }
        size_t j = fe;
        while (rc == 0 && j < en && (s[j] == '.' || s[j] == '[')) {
            if (s[j] == '.') {
                size_t a0 = ++j;
                while (j < en && s[j] != '.' && s[j] != '[' && s[j] != '!' && s[j] != ':') j++;
                rc = ob_jinja_getattr(c, v, s + a0, j - a0, &v);
            } else {
                size_t a0 = ++j;
                while (j < en && s[j] != ']') j++;
                ob_jv key = ob_jv_strref(s + a0, j - a0);
                bool digits = j > a0;
                int64_t iv = 0;
                for (size_t q = a0; q < j; q++) {
                    if (s[q] < '0' || s[q] > '9') digits = false;
                    else iv = iv * 10 + (s[q] - '0');
                }
                if (digits) key = ob_jv_int(iv);
                j++;
                rc = ob_jinja_getitem(c, v, key, &v);
            }
        }
        if (rc) break;
        char conv = 0;
        if (j < en && s[j] == '!') {
            conv = j + 1 < en ? s[j + 1] : 0;
            j += 2;
        }
        const char *spec = "";
        size_t nspec = 0;
        if (j < en && s[j] == ':') {
            spec = s + j + 1;
            nspec = en - j - 1;
        }
        if (conv == 'r' || conv == 'a' || conv == 's') {
            ob_jbuf t = ob_jb_buf(c);
            if (conv == 's') ob_jv_write_str(&t, v);
            else ob_jv_write_repr(&t, v);
            rc = ob_jb_finish(c, &t, &v);
            if (rc) break;
        }
        rc = format_spec(c, &b, v, spec, nspec);
    }
    if (rc) {
        ob_jbuf_free(&b);
        return rc;
    }
    return ob_jb_finish(c, &b, out);
}
