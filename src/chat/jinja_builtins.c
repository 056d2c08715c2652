/*
 * jinja_builtins.c - jinja2's filters and tests, and the globals a chat
 * template can call (range, namespace, dict, joiner, plus transformers'
 * raise_exception and strftime_now; tojson is transformers' version).
 *
 * Each follows jinja2 3.1 as transformers runs it, including its quirks:
 * sort, unique, dictsort, min and max ignore case unless told not to;
 * join and string filters turn items into str() first; default replaces
 * only Undefined unless its second argument is true; range is limited to
 * 100000 items as the sandbox limits it. Filters that return generators in
 * jinja2 (map, select, unique, batch...) return lists here: the same items,
 * only printing the bare generator differs, which templates do not do.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "../core/status.h"
#include "jinja.h"

#define BIND(name, ...)                                              \
    static const char *const P_[] = {__VA_ARGS__, NULL};             \
    ob_jv p[sizeof P_ / sizeof P_[0]];                               \
    OB_TRY(ob_jb_bind(c, name, P_, a, p))

#define NOARGS(name)                                                 \
    if (a->npos || a->nkw) return ob_jinja_error(c, OB_ERR_FORMAT, "%s() takes no arguments", name)

static ob_jv arg_or(ob_jv v, ob_jv dflt) { return ob_jb_given(v) ? v : dflt; }

static bool is_none_or_missing(ob_jv v) { return !ob_jb_given(v) || v.t == OB_JV_NONE; }

static int to_int_arg(ob_jctx *c, ob_jv v, const char *fname, int64_t *out) {
    if (v.t == OB_JV_INT) *out = v.u.i;
    else if (v.t == OB_JV_BOOL) *out = v.u.b;
    else if (v.t == OB_JV_UNDEF && v.k != OB_JV_MISSING) return ob_jinja_undefined_error(c, v);
    else return ob_jinja_error(c, OB_ERR_FORMAT, "%s: '%s' object cannot be interpreted as an integer", fname, ob_jv_type_name(v));
    return 0;
}

/* soft_str(): the value as a string (Undefined is ""). */
static int str_of(ob_jctx *c, ob_jv v, ob_jv *out) { return ob_jv_to_str(c, v, out); }

static ob_jlist *list_of(ob_jctx *c, const ob_jv *items, uint32_t n) {
    ob_jlist *l = ob_jlist_new(c, n);
    if (!l) return NULL;
    if (n) memcpy(l->v, items, n * sizeof *items);
    l->n = n;
    return l;
}

/* ---------------------------------------------------------------- attribute paths */

/* jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0
 * (item first, attribute second, like obj[key]). */
static int attr_path(ob_jctx *c, ob_jv item, ob_jv attr, ob_jv dflt, bool has_default, ob_jv *out) {
    if (attr.t == OB_JV_INT) {
        OB_TRY(ob_jinja_getitem(c, item, attr, &item));
        if (has_default && item.t == OB_JV_UNDEF) item = dflt;
        *out = item;
        return 0;
    }
    if (attr.t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "attribute must be a string or an integer");
    const char *s = attr.u.s;
    size_t n = attr.n, i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && s[j] != '.') j++;
        ob_jv key = ob_jv_strref(s + i, j - i);
        bool digits = j > i;
        int64_t iv = 0;
        for (size_t k = i; k < j; k++) {
            if (s[k] < '0' || s[k] > '9' || iv > INT64_MAX / 10 - 10) digits = false;
            else iv = iv * 10 + (s[k] - '0');
        }
        if (digits) key = ob_jv_int(iv);
        OB_TRY(ob_jinja_getitem(c, item, key, &item));
        if (has_default && item.t == OB_JV_UNDEF) item = dflt;
        if (j >= n) break;
        i = j + 1;
    }
    *out = item;
    return 0;
}

/* ignore_case: strings are compared lowercased. */
static int fold_key(ob_jctx *c, ob_jv v, bool case_sensitive, ob_jv *out) {
    if (case_sensitive || v.t != OB_JV_STR) {
        *out = v;
        return 0;
    }
    ob_jbuf b = ob_jb_buf(c);
    ob_js_lower(&b, v.u.s, v.n);
    return ob_jb_finish(c, &b, out);
}

/* Stable sort of items by keys (Python's sorted: only "<" is used). */
typedef struct keyed {
    ob_jv key, val;
} keyed;

static int sort_keyed(ob_jctx *c, keyed *v, uint32_t n, bool reverse) {
    if (n < 2) return 0;
    keyed *tmp = ob_jv_alloc(c, n * sizeof *tmp);
    if (!tmp) return c->status;
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool take_right;
                /* reverse=True keeps equal items in order, as Python does */
                if (reverse) OB_TRY(ob_jv_order(c, v[i].key, v[j].key, '<', &take_right));
                else OB_TRY(ob_jv_order(c, v[j].key, v[i].key, '<', &take_right));
                tmp[k++] = take_right ? v[j++] : v[i++];
            }
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
    }
    return 0;
}

/* ---------------------------------------------------------------- string filters */

static int f_string(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("string");
    return str_of(c, self, out);
}

static int f_safe(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("safe");
    OB_TRY(str_of(c, self, out));
    out->k = OB_JS_MARKUP;
    return 0;
}

static int f_trim(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("trim", "chars");
    ob_jv s;
    OB_TRY(str_of(c, self, &s));
    const char *chars = NULL;
    size_t nchars = 0;
    if (!is_none_or_missing(p[0])) {
        if (p[0].t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "strip arg must be None or str");
        chars = p[0].u.s;
        nchars = p[0].n;
    }
    size_t st, en;
    ob_js_strip(s.u.s, s.n, chars, nchars, true, true, &st, &en);
    *out = ob_jv_strref(s.u.s + st, en - st);
    return 0;
}

static int case_filter(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, int mode) {
    static const char *const names[] = {"upper", "lower", "capitalize"};
    NOARGS(names[mode]);
    ob_jv s;
    OB_TRY(str_of(c, self, &s));
    ob_jbuf b = ob_jb_buf(c);
    if (mode == 0) ob_js_upper(&b, s.u.s, s.n);
    else if (mode == 1) ob_js_lower(&b, s.u.s, s.n);
    else ob_js_capitalize(&b, s.u.s, s.n);
    return ob_jb_finish(c, &b, out);
}
static int f_upper(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return case_filter(c, s, a, o, 0); }
static int f_lower(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return case_filter(c, s, a, o, 1); }
static int f_capitalize(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return case_filter(c, s, a, o, 2); }

/* jinja2's title: words start after "-", whitespace, or an opening bracket. */
static bool title_sep(uint32_t cp) { return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || ob_jt_isspace(cp); }

static int f_title(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("title");
    ob_jv s;
    OB_TRY(str_of(c, self, &s));
    ob_jbuf b = ob_jb_buf(c);
    bool first = true, prev_sep = false;
    for (size_t i = 0; i < s.n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(s.u.s + i, s.n - i, &k);
        bool sep = title_sep(cp);
        if (i > 0 && sep != prev_sep) first = true; /* a new piece: separators or a word */
        if (first) ob_jt_put_upper(&b, cp);
        else ob_jt_put_lower(&b, cp);
        first = false;
        prev_sep = sep;
        i += (size_t)k;
    }
    return ob_jb_finish(c, &b, out);
}

static int f_replace(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("replace", "old", "new", "count");
    if (!ob_jb_given(p[0]) || !ob_jb_given(p[1])) return ob_jinja_error(c, OB_ERR_FORMAT, "replace() needs old and new");
    ob_jv s, o, n;
    OB_TRY(str_of(c, self, &s));
    OB_TRY(str_of(c, p[0], &o));
    OB_TRY(str_of(c, p[1], &n));
    int64_t count = -1;
    if (!is_none_or_missing(p[2])) OB_TRY(to_int_arg(c, p[2], "replace", &count));
    ob_jbuf b = ob_jb_buf(c);
    ob_js_replace(&b, s.u.s, s.n, o.u.s, o.n, n.u.s, n.n, count);
    return ob_jb_finish(c, &b, out);
}

static int f_wordcount(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("wordcount");
    ob_jv s;
    OB_TRY(str_of(c, self, &s));
    int64_t words = 0;
    bool in = false;
    for (size_t i = 0; i < s.n;) {
        int k = 0;
        bool w = ob_jt_isword(ob_jt_decode(s.u.s + i, s.n - i, &k));
        if (w && !in) words++;
        in = w;
        i += (size_t)k;
    }
    *out = ob_jv_int(words);
    return 0;
}

static int f_indent(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("indent", "width", "first", "blank");
    /* jinja2 appends "\n" with +=, which only works on a string */
    if (self.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, self);
    if (self.t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "indent needs a string, not %s", ob_jv_type_name(self));
    ob_jv s = self;
    ob_jv ind;
    ob_jv width = arg_or(p[0], ob_jv_int(4));
    if (width.t == OB_JV_STR) {
        ind = width;
    } else {
        int64_t w = 0;
        OB_TRY(to_int_arg(c, width, "indent", &w));
        if (w < 0) w = 0;
        if (w > 10000) return ob_jinja_error(c, OB_ERR_RANGE, "indent width too large");
        char *sp = ob_jv_alloc(c, (size_t)w);
        if (!sp) return c->status;
        memset(sp, ' ', (size_t)w);
        ind = ob_jv_strref(sp, (size_t)w);
    }
    bool first = ob_jb_given(p[1]) && ob_jv_truthy(p[1]);
    bool blank = ob_jb_given(p[2]) && ob_jv_truthy(p[2]);
    /* jinja2 appends "\n" and splits with str.splitlines(), so other line
     * breaks (\r, \x0b, U+2028...) also become "\n" */
    ob_jbuf t = ob_jb_buf(c);
    ob_jbuf_put(&t, s.u.s, s.n);
    ob_jbuf_putc(&t, '\n');
    ob_jv withnl;
    OB_TRY(ob_jb_finish(c, &t, &withnl));
    ob_jlist *lines;
    OB_TRY(ob_js_splitlines(c, withnl.u.s, withnl.n, false, &lines));
    ob_jbuf b = ob_jb_buf(c);
    if (first) ob_jbuf_put(&b, ind.u.s, ind.n);
    for (uint32_t i = 0; i < lines->n; i++) {
        ob_jv ln = lines->v[i];
        if (i) {
            ob_jbuf_putc(&b, '\n');
            if (blank || ln.n) ob_jbuf_put(&b, ind.u.s, ind.n);
        }
        ob_jbuf_put(&b, ln.u.s, ln.n);
    }
    return ob_jb_finish(c, &b, out);
}

static int f_center(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("center", "width");
    ob_jv s;
    OB_TRY(str_of(c, self, &s));
    int64_t w = 80;
    if (ob_jb_given(p[0])) OB_TRY(to_int_arg(c, p[0], "center", &w));
    int64_t len = (int64_t)ob_jt_count(s.u.s, s.n);
    if (w <= len) {
        *out = s;
        return 0;
    }
    if (w > 100000) return ob_jinja_error(c, OB_ERR_RANGE, "center width too large");
    int64_t pad = w - len, left = pad / 2 + (pad & w & 1);
    ob_jbuf b = ob_jb_buf(c);
    for (int64_t i = 0; i < left; i++) ob_jbuf_putc(&b, ' ');
    ob_jbuf_put(&b, s.u.s, s.n);
    for (int64_t i = left; i < pad; i++) ob_jbuf_putc(&b, ' ');
    return ob_jb_finish(c, &b, out);
}

static int f_truncate(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("truncate", "length", "killwords", "end", "leeway");
    ob_jv s = self;
    int64_t length = 255, leeway = 5;
    if (ob_jb_given(p[0])) OB_TRY(to_int_arg(c, p[0], "truncate", &length));
    if (!is_none_or_missing(p[3])) OB_TRY(to_int_arg(c, p[3], "truncate", &leeway));
    ob_jv end = ob_jv_strref("...", 3);
    if (ob_jb_given(p[2])) OB_TRY(str_of(c, p[2], &end));
    /* like jinja2, anything with a length passes through when short enough;
     * only a string can be cut */
    int64_t endlen = (int64_t)ob_jt_count(end.u.s, end.n), len;
    if (s.t == OB_JV_STR) len = (int64_t)ob_jt_count(s.u.s, s.n);
    else if (s.t == OB_JV_LIST) len = s.u.l->n;
    else if (s.t == OB_JV_DICT) len = s.u.d->n;
    else if (s.t == OB_JV_UNDEF) len = 0;
    else return ob_jinja_error(c, OB_ERR_FORMAT, "object of type '%s' has no len()", ob_jv_type_name(s));
    if (length < endlen) return ob_jinja_error(c, OB_ERR_FORMAT, "expected length >= %lld, got %lld", (long long)endlen, (long long)length);
    if (len <= length + leeway) {
        *out = s;
        return 0;
    }
    if (s.t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "only a string can be truncated, not %s", ob_jv_type_name(s));
    size_t cut = ob_jt_offset(s.u.s, s.n, (size_t)(length - endlen));
    if (!(ob_jb_given(p[1]) && ob_jv_truthy(p[1]))) { /* drop the last partial word */
        size_t sp = cut;
        while (sp > 0 && s.u.s[sp - 1] != ' ') sp--;
        if (sp > 0) cut = sp - 1;
    }
    ob_jbuf b = ob_jb_buf(c);
    ob_jbuf_put(&b, s.u.s, cut);
    ob_jbuf_put(&b, end.u.s, end.n);
    return ob_jb_finish(c, &b, out);
}

/* escape: Markup passes through (no double escaping); forceescape always escapes. */
static int escape_any(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool force) {
    NOARGS(force ? "forceescape" : "escape");
    if (!force && self.t == OB_JV_STR && self.k == OB_JS_MARKUP) {
        *out = self;
        return 0;
    }
    ob_jv s;
    OB_TRY(str_of(c, self, &s));
    ob_jbuf b = ob_jb_buf(c);
    ob_jv_html_escape(&b, s.u.s, s.n);
    OB_TRY(ob_jb_finish(c, &b, out));
    out->k = OB_JS_MARKUP;
    return 0;
}
static int f_escape(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return escape_any(c, s, a, o, false); }
static int f_forceescape(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return escape_any(c, s, a, o, true); }

static int f_format(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    if (a->npos && a->nkw) return ob_jinja_error(c, OB_ERR_FORMAT, "can't handle positional and keyword arguments at the same time");
    ob_jv s;
    OB_TRY(str_of(c, self, &s));
    ob_jv arg;
    if (a->nkw) {
        ob_jdict *d = ob_jdict_new(c, a->nkw);
        if (!d) return c->status;
        for (uint32_t i = 0; i < a->nkw; i++) {
            uint32_t kl = 0;
            const char *kn = ob_jargs_kwname(a, i, &kl);
            OB_TRY(ob_jdict_set(c, d, ob_jv_strref(kn, kl), a->kw[i]));
        }
        arg = ob_jv_dict(d);
    } else {
        ob_jlist *l = list_of(c, a->pos, a->npos);
        if (!l) return c->status;
        arg = ob_jv_list(l, OB_JL_TUPLE);
    }
    return ob_jinja_percent_format(c, s, arg, out);
}

/* transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent,
 * separators=separators, sort_keys=sort_keys). */
static int f_tojson(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("tojson", "ensure_ascii", "indent", "separators", "sort_keys");
    ob_jjson_opts o;
    memset(&o, 0, sizeof o);
    o.ensure_ascii = ob_jb_given(p[0]) && ob_jv_truthy(p[0]);
    o.sort_keys = ob_jb_given(p[3]) && ob_jv_truthy(p[3]);
    char spaces[64];
    if (!is_none_or_missing(p[1])) {
        o.has_indent = true;
        if (p[1].t == OB_JV_STR) {
            o.indent = p[1].u.s;
            o.indent_len = p[1].n;
        } else {
            int64_t w = 0;
            OB_TRY(to_int_arg(c, p[1], "tojson", &w));
            if (w < 0) w = 0;
            if (w > (int64_t)sizeof spaces) return ob_jinja_error(c, OB_ERR_RANGE, "tojson indent too large");
            memset(spaces, ' ', (size_t)w);
            o.indent = spaces;
            o.indent_len = (size_t)w;
        }
    }
    if (!is_none_or_missing(p[2])) {
        ob_jv sep = p[2];
        if (sep.t != OB_JV_LIST || sep.u.l->n != 2 || sep.u.l->v[0].t != OB_JV_STR || sep.u.l->v[1].t != OB_JV_STR)
            return ob_jinja_error(c, OB_ERR_FORMAT, "tojson separators must be a pair of strings");
        o.sep_item = sep.u.l->v[0].u.s;
        o.sep_item_len = sep.u.l->v[0].n;
        o.sep_key = sep.u.l->v[1].u.s;
        o.sep_key_len = sep.u.l->v[1].n;
    }
    ob_jbuf b = ob_jb_buf(c);
    int rc = ob_jv_to_json(c, self, &o, &b);
    if (rc < 0) {
        ob_jbuf_free(&b);
        return rc;
    }
    return ob_jb_finish(c, &b, out);
}

/* ---------------------------------------------------------------- sequence filters */

static int f_length(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("length");
    switch (self.t) {
    case OB_JV_UNDEF: *out = ob_jv_int(0); return 0;
    case OB_JV_STR: *out = ob_jv_int((int64_t)ob_jt_count(self.u.s, self.n)); return 0;
    case OB_JV_LIST: *out = ob_jv_int(self.u.l->n); return 0;
    case OB_JV_DICT: *out = ob_jv_int(self.u.d->n); return 0;
    case OB_JV_LOOP: *out = ob_jv_int(self.u.loop->n); return 0;
    default: return ob_jinja_error(c, OB_ERR_FORMAT, "object of type '%s' has no len()", ob_jv_type_name(self));
    }
}

static int f_list(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("list");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    ob_jlist *l = list_of(c, items, n);
    if (!l) return c->status;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_first(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("first");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    *out = n ? items[0] : ob_jv_undef();
    return 0;
}

static int f_last(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("last");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    *out = n ? items[n - 1] : ob_jv_undef();
    return 0;
}

static int f_reverse(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("reverse");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    if (self.t == OB_JV_STR) {
        ob_jbuf b = ob_jb_buf(c);
        for (uint32_t i = n; i-- > 0;) ob_jbuf_put(&b, items[i].u.s, items[i].n);
        return ob_jb_finish(c, &b, out);
    }
    ob_jlist *l = ob_jlist_new(c, n);
    if (!l) return c->status;
    for (uint32_t i = 0; i < n; i++) l->v[i] = items[n - 1 - i];
    l->n = n;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_join(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("join", "d", "attribute");
    ob_jv sep = ob_jv_strref("", 0);
    if (ob_jb_given(p[0])) OB_TRY(str_of(c, p[0], &sep));
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    ob_jbuf b = ob_jb_buf(c);
    for (uint32_t i = 0; i < n; i++) {
        ob_jv v = items[i];
        if (!is_none_or_missing(p[1])) {
            int rc = attr_path(c, v, p[1], ob_jv_none(), false, &v);
            if (rc < 0) {
                ob_jbuf_free(&b);
                return rc;
            }
        }
        if (i) ob_jbuf_put(&b, sep.u.s, sep.n);
        ob_jv_write_str(&b, v);
    }
    return ob_jb_finish(c, &b, out);
}

static int f_default(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("default", "default_value", "boolean");
    ob_jv dflt = arg_or(p[0], ob_jv_strref("", 0));
    bool boolean = ob_jb_given(p[1]) && ob_jv_truthy(p[1]);
    *out = (self.t == OB_JV_UNDEF || (boolean && !ob_jv_truthy(self))) ? dflt : self;
    return 0;
}

static int f_items(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("items");
    ob_jlist *l;
    if (self.t == OB_JV_UNDEF) {
        l = ob_jlist_new(c, 0);
    } else if (self.t != OB_JV_DICT) {
        return ob_jinja_error(c, OB_ERR_FORMAT, "Can only get item pairs from a mapping.");
    } else {
        l = ob_jlist_new(c, self.u.d->n);
        if (!l) return c->status;
        for (uint32_t i = 0; i < self.u.d->n; i++) {
            ob_jlist *pair = ob_jlist_new(c, 2);
            if (!pair) return c->status;
            pair->v[0] = self.u.d->key[i];
            pair->v[1] = self.u.d->val[i];
            pair->n = 2;
            l->v[i] = ob_jv_list(pair, OB_JL_TUPLE);
        }
        l->n = self.u.d->n;
    }
    if (!l) return c->status;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_dictsort(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("dictsort", "case_sensitive", "by", "reverse");
    if (self.t != OB_JV_DICT) return ob_jinja_error(c, OB_ERR_FORMAT, "dictsort needs a mapping, not %s", ob_jv_type_name(self));
    bool cs = ob_jb_given(p[0]) && ob_jv_truthy(p[0]);
    int pos = 0;
    if (ob_jb_given(p[1])) {
        if (p[1].t == OB_JV_STR && p[1].n == 5 && !memcmp(p[1].u.s, "value", 5)) pos = 1;
        else if (!(p[1].t == OB_JV_STR && p[1].n == 3 && !memcmp(p[1].u.s, "key", 3)))
            return ob_jinja_error(c, OB_ERR_FORMAT, "You can only sort by either \"key\" or \"value\"");
    }
    const ob_jdict *d = self.u.d;
    keyed *kv = ob_jv_alloc(c, (d->n ? d->n : 1) * sizeof *kv);
    if (!kv) return c->status;
    for (uint32_t i = 0; i < d->n; i++) {
        ob_jlist *pair = ob_jlist_new(c, 2);
        if (!pair) return c->status;
        pair->v[0] = d->key[i];
        pair->v[1] = d->val[i];
        pair->n = 2;
        kv[i].val = ob_jv_list(pair, OB_JL_TUPLE);
        OB_TRY(fold_key(c, pos ? d->val[i] : d->key[i], cs, &kv[i].key));
    }
    OB_TRY(sort_keyed(c, kv, d->n, ob_jb_given(p[2]) && ob_jv_truthy(p[2])));
    ob_jlist *l = ob_jlist_new(c, d->n);
    if (!l) return c->status;
    for (uint32_t i = 0; i < d->n; i++) l->v[i] = kv[i].val;
    l->n = d->n;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_sort(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("sort", "reverse", "case_sensitive", "attribute");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    bool cs = ob_jb_given(p[1]) && ob_jv_truthy(p[1]);
    keyed *kv = ob_jv_alloc(c, (n ? n : 1) * sizeof *kv);
    if (!kv) return c->status;
    for (uint32_t i = 0; i < n; i++) {
        ob_jv k = items[i];
        if (!is_none_or_missing(p[2])) {
            if (p[2].t == OB_JV_STR && memchr(p[2].u.s, ',', p[2].n))
                return ob_jinja_error(c, OB_ERR_UNSUPPORTED, "sorting by several attributes is not supported");
            OB_TRY(attr_path(c, k, p[2], ob_jv_none(), false, &k));
        }
        OB_TRY(fold_key(c, k, cs, &kv[i].key));
        kv[i].val = items[i];
    }
    OB_TRY(sort_keyed(c, kv, n, ob_jb_given(p[0]) && ob_jv_truthy(p[0])));
    ob_jlist *l = ob_jlist_new(c, n);
    if (!l) return c->status;
    for (uint32_t i = 0; i < n; i++) l->v[i] = kv[i].val;
    l->n = n;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_unique(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("unique", "case_sensitive", "attribute");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    bool cs = ob_jb_given(p[0]) && ob_jv_truthy(p[0]);
    ob_jdict *seen = ob_jdict_new(c, 0);
    ob_jlist *l = ob_jlist_new(c, 0);
    if (!seen || !l) return c->status;
    for (uint32_t i = 0; i < n; i++) {
        ob_jv k = items[i];
        if (!is_none_or_missing(p[1])) OB_TRY(attr_path(c, k, p[1], ob_jv_none(), false, &k));
        OB_TRY(fold_key(c, k, cs, &k));
        if (k.t == OB_JV_LIST && k.k != OB_JL_TUPLE) return ob_jinja_error(c, OB_ERR_FORMAT, "unhashable type: 'list'");
        if (ob_jdict_get(seen, k)) continue;
        OB_TRY(ob_jdict_set(c, seen, k, ob_jv_none()));
        OB_TRY(ob_jlist_push(c, l, items[i]));
    }
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int min_max(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool max) {
    const char *name = max ? "max" : "min";
    BIND(name, "case_sensitive", "attribute");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    if (!n) {
        *out = ob_jv_undef();
        return 0;
    }
    bool cs = ob_jb_given(p[0]) && ob_jv_truthy(p[0]);
    ob_jv best = items[0], bestk = items[0];
    for (uint32_t i = 0; i < n; i++) {
        ob_jv k = items[i];
        if (!is_none_or_missing(p[1])) OB_TRY(attr_path(c, k, p[1], ob_jv_none(), false, &k));
        OB_TRY(fold_key(c, k, cs, &k));
        if (i == 0) {
            bestk = k;
            continue;
        }
        bool better;
        OB_TRY(ob_jv_order(c, k, bestk, max ? '>' : '<', &better));
        if (better) {
            best = items[i];
            bestk = k;
        }
    }
    *out = best;
    return 0;
}
static int f_min(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return min_max(c, s, a, o, false); }
static int f_max(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return min_max(c, s, a, o, true); }

static int arith_add(ob_jctx *c, ob_jv x, ob_jv y, ob_jv *out);

static int f_sum(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("sum", "attribute", "start");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    ob_jv acc = arg_or(p[1], ob_jv_int(0));
    for (uint32_t i = 0; i < n; i++) {
        ob_jv v = items[i];
        if (!is_none_or_missing(p[0])) OB_TRY(attr_path(c, v, p[0], ob_jv_none(), false, &v));
        OB_TRY(arith_add(c, acc, v, &acc));
    }
    *out = acc;
    return 0;
}

static int f_batch(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("batch", "linecount", "fill_with");
    int64_t count = 0;
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "batch() needs a line count");
    OB_TRY(to_int_arg(c, p[0], "batch", &count));
    if (count <= 0) return ob_jinja_error(c, OB_ERR_FORMAT, "batch() line count must be positive");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    ob_jlist *l = ob_jlist_new(c, 0);
    if (!l) return c->status;
    for (uint32_t i = 0; i < n; i += (uint32_t)(count < n ? count : n)) {
        uint32_t take = (uint32_t)((int64_t)(n - i) < count ? (int64_t)(n - i) : count);
        bool fill = take < count && !is_none_or_missing(p[1]);
        if (fill && count > 100000) return ob_jinja_error(c, OB_ERR_RANGE, "batch() line count too large");
        ob_jlist *row = list_of(c, items + i, take);
        if (!row) return c->status;
        while (fill && row->n < count) OB_TRY(ob_jlist_push(c, row, p[1]));
        OB_TRY(ob_jlist_push(c, l, ob_jv_list(row, OB_JL_LIST)));
    }
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_slice(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("slice", "slices", "fill_with");
    int64_t slices = 0;
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "slice() needs a count");
    OB_TRY(to_int_arg(c, p[0], "slice", &slices));
    if (slices <= 0 || slices > 100000) return ob_jinja_error(c, OB_ERR_FORMAT, "slice() count out of range");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    int64_t per = n / slices, extra = n % slices, offset = 0;
    ob_jlist *l = ob_jlist_new(c, (uint32_t)slices);
    if (!l) return c->status;
    for (int64_t i = 0; i < slices; i++) {
        int64_t start = offset + i * per;
        if (i < extra) offset++;
        int64_t end = offset + (i + 1) * per;
        ob_jlist *row = list_of(c, items + start, (uint32_t)(end - start));
        if (!row) return c->status;
        if (!is_none_or_missing(p[1]) && i >= extra && extra) OB_TRY(ob_jlist_push(c, row, p[1]));
        l->v[l->n++] = ob_jv_list(row, OB_JL_LIST);
    }
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_groupby(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("groupby", "attribute", "default", "case_sensitive");
    if (!ob_jb_given(p[0])) return ob_jinja_error(c, OB_ERR_FORMAT, "groupby() needs an attribute");
    const ob_jv *items = NULL;
    uint32_t n = 0;
    OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    bool cs = ob_jb_given(p[2]) && ob_jv_truthy(p[2]);
    bool has_default = !is_none_or_missing(p[1]);
    keyed *kv = ob_jv_alloc(c, (n ? n : 1) * sizeof *kv);
    if (!kv) return c->status;
    for (uint32_t i = 0; i < n; i++) {
        ob_jv k;
        OB_TRY(attr_path(c, items[i], p[0], p[1], has_default, &k));
        OB_TRY(fold_key(c, k, cs, &kv[i].key));
        kv[i].val = items[i];
    }
    OB_TRY(sort_keyed(c, kv, n, false));
    ob_jlist *l = ob_jlist_new(c, 0);
    if (!l) return c->status;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        ob_jlist *group = ob_jlist_new(c, 0);
        if (!group) return c->status;
        while (j < n && ob_jv_eq(kv[j].key, kv[i].key)) OB_TRY(ob_jlist_push(c, group, kv[j++].val));
        ob_jv key;
        OB_TRY(attr_path(c, kv[i].val, p[0], p[1], has_default, &key)); /* the real key, not the folded one */
        ob_jlist *pair = ob_jlist_new(c, 2);
        if (!pair) return c->status;
        pair->v[0] = key;
        pair->v[1] = ob_jv_list(group, OB_JL_LIST);
        pair->n = 2;
        OB_TRY(ob_jlist_push(c, l, ob_jv_list(pair, OB_JL_TUPLE)));
        i = j;
    }
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

static int f_attr(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("attr", "name");
    if (!ob_jb_given(p[0]) || p[0].t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "attr() needs an attribute name");
    if (self.t == OB_JV_DICT) { /* only real attributes (methods), never keys */
        bool unsafe;
        if (!ob_jinja_find_method(self, p[0].u.s, p[0].n, &unsafe) && !unsafe) {
            *out = ob_jv_undef();
            return 0;
        }
    }
    return ob_jinja_getattr(c, self, p[0].u.s, p[0].n, out);
}

/* map(attribute='x', default=...) or map('filter', args...) */
static int f_map(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    const ob_jv *items = NULL;
    uint32_t n = 0;
    if (ob_jv_truthy(self)) OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    ob_jlist *l = ob_jlist_new(c, n);
    if (!l) return c->status;
    if (!a->npos) {
        ob_jv attr = ob_jv_undef(), dflt = ob_jv_none();
        bool has_attr = false;
        for (uint32_t k = 0; k < a->nkw; k++) {
            uint32_t kl = 0;
            const char *kn = ob_jargs_kwname(a, k, &kl);
            if (kl == 9 && !memcmp(kn, "attribute", 9)) { attr = a->kw[k]; has_attr = true; }
            else if (kl == 7 && !memcmp(kn, "default", 7)) dflt = a->kw[k];
            else return ob_jinja_error(c, OB_ERR_FORMAT, "Unexpected keyword argument '%.*s'", (int)kl, kn);
        }
        if (!has_attr) return ob_jinja_error(c, OB_ERR_FORMAT, "map requires a filter argument");
        for (uint32_t i = 0; i < n; i++) OB_TRY(attr_path(c, items[i], attr, dflt, dflt.t != OB_JV_NONE, &l->v[i]));
    } else {
        if (a->pos[0].t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "map requires a filter name");
        ob_jargs rest = *a;
        rest.pos++;
        rest.npos--;
        for (uint32_t i = 0; i < n; i++)
            OB_TRY(ob_jinja_apply_named(c, false, a->pos[0].u.s, a->pos[0].n, items[i], &rest, &l->v[i]));
    }
    l->n = n;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

/* select / reject / selectattr / rejectattr */
static int select_any(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out, bool keep, bool by_attr) {
    const ob_jv *items = NULL;
    uint32_t n = 0;
    if (ob_jv_truthy(self)) OB_TRY(ob_jinja_iterate(c, self, &items, &n));
    ob_jlist *l = ob_jlist_new(c, 0);
    if (!l) return c->status;
    uint32_t off = by_attr ? 1 : 0;
    if (by_attr && a->npos < 1) return ob_jinja_error(c, OB_ERR_FORMAT, "Missing parameter for attribute name");
    bool has_test = a->npos > off;
    if (has_test && a->pos[off].t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "test name must be a string");
    ob_jargs rest = *a;
    rest.pos += off + (has_test ? 1 : 0);
    rest.npos -= off + (has_test ? 1 : 0);
    for (uint32_t i = 0; i < n; i++) {
        ob_jv v = items[i], r;
        if (by_attr) OB_TRY(attr_path(c, v, a->pos[0], ob_jv_none(), false, &v));
        if (has_test) OB_TRY(ob_jinja_apply_named(c, true, a->pos[off].u.s, a->pos[off].n, v, &rest, &r));
        else r = v;
        if (ob_jv_truthy(r) == keep) OB_TRY(ob_jlist_push(c, l, items[i]));
    }
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}
static int f_select(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return select_any(c, s, a, o, true, false); }
static int f_reject(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return select_any(c, s, a, o, false, false); }
static int f_selectattr(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return select_any(c, s, a, o, true, true); }
static int f_rejectattr(ob_jctx *c, ob_jv s, const ob_jargs *a, ob_jv *o) { return select_any(c, s, a, o, false, true); }

/* ---------------------------------------------------------------- number filters */

/* Parse a Python int() literal: optional sign, digits with "_" between. */
static bool parse_int_text(const char *s, size_t n, int base, int64_t *out) {
    size_t st, en;
    ob_js_strip(s, n, NULL, 0, true, true, &st, &en);
    size_t i = st;
    bool neg = false;
    if (i < en && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (base == 16 && i + 1 < en && s[i] == '0' && (s[i + 1] | 0x20) == 'x') i += 2;
    else if (base == 8 && i + 1 < en && s[i] == '0' && (s[i + 1] | 0x20) == 'o') i += 2;
    else if (base == 2 && i + 1 < en && s[i] == '0' && (s[i + 1] | 0x20) == 'b') i += 2;
    if (i >= en) return false;
    uint64_t v = 0;
    bool prev_digit = false;
    for (; i < en; i++) {
        char ch = s[i];
        if (ch == '_' && prev_digit && i + 1 < en) {
            prev_digit = false;
            continue;
        }
        int d = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z' ? (ch | 0x20) - 'a' + 10 : 99;
        if (d >= base) return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
        if (v > (uint64_t)INT64_MAX + neg) return false;
        prev_digit = true;
    }
    if (!prev_digit) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Python float(): decimal text, "inf", "nan", with surrounding whitespace. */
static bool parse_float_text(const char *s, size_t n, double *out) {
    size_t st, en;
    ob_js_strip(s, n, NULL, 0, true, true, &st, &en);
    if (en == st || en - st > 400) return false;
    char buf[410];
    size_t k = 0;
    for (size_t i = st; i < en; i++) {
        if (s[i] == '_') {
            if (i == st || i + 1 >= en || !(s[i - 1] >= '0' && s[i - 1] <= '9') || !(s[i + 1] >= '0' && s[i + 1] <= '9')) return false;
            continue;
        }
        if ((unsigned char)s[i] >= 0x80) return false;
        buf[k++] = s[i];
    }
    buf[k] = 0;
    const char *b = buf;
    if (*b == '+' || *b == '-') b++;
    if ((b[0] | 0x20) == 'x' || ((b[0] == '0') && (b[1] | 0x20) == 'x')) return false; /* no hex floats in Python */
    char *end;
    double v = strtod(buf, &end);
    if (*end) return false;
    *out = v;
    return true;
}

static int f_int(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("int", "default", "base");
    ob_jv dflt = arg_or(p[0], ob_jv_int(0));
    int64_t base = 10;
    if (ob_jb_given(p[1])) OB_TRY(to_int_arg(c, p[1], "int", &base));
    if (base < 2 || base > 36) return ob_jinja_error(c, OB_ERR_FORMAT, "int() base must be >= 2 and <= 36");
    int64_t iv = 0;
    double f = 0;
    switch (self.t) {
    case OB_JV_INT: *out = self; return 0;
    case OB_JV_BOOL: *out = ob_jv_int(self.u.b); return 0;
    case OB_JV_FLOAT:
        f = self.u.f;
        break;
    case OB_JV_STR:
        if (parse_int_text(self.u.s, self.n, (int)base, &iv)) { *out = ob_jv_int(iv); return 0; }
        if (!parse_float_text(self.u.s, self.n, &f)) { *out = dflt; return 0; }
        break;
    case OB_JV_UNDEF: return ob_jinja_undefined_error(c, self);
    default: *out = dflt; return 0;
    }
    /* a float: NaN gives the default (int() raises ValueError, which jinja2
     * catches); infinity and values past 64 bits are errors (Python would
     * raise OverflowError, or make a big integer we cannot hold) */
    if (isnan(f)) *out = dflt;
    else if (!(fabs(f) < 9.2e18)) return ob_jinja_error(c, OB_ERR_RANGE, "int(): %g does not fit in 64 bits", f);
    else *out = ob_jv_int((int64_t)f);
    return 0;
}

static int f_float(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("float", "default");
    ob_jv dflt = arg_or(p[0], ob_jv_float(0.0));
    double f = 0;
    switch (self.t) {
    case OB_JV_INT: *out = ob_jv_float((double)self.u.i); return 0;
    case OB_JV_BOOL: *out = ob_jv_float(self.u.b); return 0;
    case OB_JV_FLOAT: *out = self; return 0;
    case OB_JV_STR: *out = parse_float_text(self.u.s, self.n, &f) ? ob_jv_float(f) : dflt; return 0;
    case OB_JV_UNDEF: return ob_jinja_undefined_error(c, self);
    default: *out = dflt; return 0;
    }
}

static int f_abs(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    NOARGS("abs");
    if (self.t == OB_JV_INT) {
        if (self.u.i == INT64_MIN) return ob_jinja_error(c, OB_ERR_RANGE, "integer result does not fit in 64 bits");
        *out = ob_jv_int(self.u.i < 0 ? -self.u.i : self.u.i);
    } else if (self.t == OB_JV_BOOL) {
        *out = ob_jv_int(self.u.b);
    } else if (self.t == OB_JV_FLOAT) {
        *out = ob_jv_float(fabs(self.u.f));
    } else if (self.t == OB_JV_UNDEF) {
        return ob_jinja_undefined_error(c, self);
    } else {
        return ob_jinja_error(c, OB_ERR_FORMAT, "bad operand type for abs(): '%s'", ob_jv_type_name(self));
    }
    return 0;
}

/* round(): Python's round() rounds half to even on the exact binary value;
 * printf's correctly rounded "%.*f" does the same. */
static int f_round(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    BIND("round", "precision", "method");
    int64_t prec = 0;
    if (ob_jb_given(p[0])) OB_TRY(to_int_arg(c, p[0], "round", &prec));
    int method = 0; /* common, ceil, floor */
    if (ob_jb_given(p[1])) {
        ob_jv m = p[1];
        if (m.t == OB_JV_STR && m.n == 4 && !memcmp(m.u.s, "ceil", 4)) method = 1;
        else if (m.t == OB_JV_STR && m.n == 5 && !memcmp(m.u.s, "floor", 5)) method = 2;
        else if (!(m.t == OB_JV_STR && m.n == 6 && !memcmp(m.u.s, "common", 6)))
            return ob_jinja_error(c, OB_ERR_FORMAT, "method must be common, ceil or floor");
    }
    if (self.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, self);
    if (self.t != OB_JV_INT && self.t != OB_JV_BOOL && self.t != OB_JV_FLOAT)
        return ob_jinja_error(c, OB_ERR_FORMAT, "type %s doesn't define __round__ method", ob_jv_type_name(self));
    if (method == 0 && self.t != OB_JV_FLOAT && prec >= 0) {
        *out = self.t == OB_JV_BOOL ? ob_jv_int(self.u.b) : self;
        return 0;
    }
    double x = self.t == OB_JV_FLOAT ? self.u.f : (double)(self.t == OB_JV_INT ? self.u.i : self.u.b);
    if (prec > 300) prec = 300;
    if (prec < -300) prec = -300;
    double r = 0;
    if (method == 0) {
        if (!isfinite(x)) r = x;
        else if (prec == 0) r = nearbyint(x);
        else if (prec > 0) {
            char buf[700];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            r = strtod(buf, NULL);
        } else {
            double m = pow(10.0, (double)-prec);
            r = nearbyint(x / m) * m;
        }
    } else {
        double m = pow(10.0, (double)prec);
        r = (method == 1 ? ceil(x * m) : floor(x * m)) / m;
    }
    *out = ob_jv_float(r);
    return 0;
}

/* ---------------------------------------------------------------- tests */

static int one_arg(ob_jctx *c, const ob_jargs *a, const char *name, ob_jv *v) {
    if (a->npos != 1 || a->nkw) return ob_jinja_error(c, OB_ERR_FORMAT, "test '%s' takes exactly one argument", name);
    *v = a->pos[0];
    return 0;
}

#define SIMPLE_TEST(fname, tname, expr)                                      \
    static int fname(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out) {  \
        NOARGS(tname);                                                       \
        *out = ob_jv_bool(expr);                                             \
        return 0;                                                            \
    }

SIMPLE_TEST(t_defined, "defined", v.t != OB_JV_UNDEF)
SIMPLE_TEST(t_undefined, "undefined", v.t == OB_JV_UNDEF)
SIMPLE_TEST(t_none, "none", v.t == OB_JV_NONE)
SIMPLE_TEST(t_boolean, "boolean", v.t == OB_JV_BOOL)
SIMPLE_TEST(t_true, "true", v.t == OB_JV_BOOL && v.u.b)
SIMPLE_TEST(t_false, "false", v.t == OB_JV_BOOL && !v.u.b)
SIMPLE_TEST(t_integer, "integer", v.t == OB_JV_INT)
SIMPLE_TEST(t_float, "float", v.t == OB_JV_FLOAT)
SIMPLE_TEST(t_number, "number", v.t == OB_JV_INT || v.t == OB_JV_FLOAT || v.t == OB_JV_BOOL)
SIMPLE_TEST(t_string, "string", v.t == OB_JV_STR)
SIMPLE_TEST(t_mapping, "mapping", v.t == OB_JV_DICT)
SIMPLE_TEST(t_iterable, "iterable", v.t == OB_JV_STR || v.t == OB_JV_LIST || v.t == OB_JV_DICT || v.t == OB_JV_UNDEF)
SIMPLE_TEST(t_sequence, "sequence", v.t == OB_JV_STR || v.t == OB_JV_LIST || v.t == OB_JV_DICT || v.t == OB_JV_UNDEF)
SIMPLE_TEST(t_callable, "callable", v.t == OB_JV_FUNC)
SIMPLE_TEST(t_escaped, "escaped", v.t == OB_JV_STR && v.k == OB_JS_MARKUP)

static int parity(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out, bool odd) {
    NOARGS(odd ? "odd" : "even");
    ob_jv r;
    if (v.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, v);
    if (v.t == OB_JV_INT || v.t == OB_JV_BOOL) {
        int64_t i = v.t == OB_JV_INT ? v.u.i : v.u.b;
        r = ob_jv_bool(((i % 2) != 0) == odd);
    } else if (v.t == OB_JV_FLOAT) {
        double m = fmod(v.u.f, 2.0);
        if (m < 0) m += 2.0;
        r = ob_jv_bool(odd ? m == 1.0 : m == 0.0); /* value % 2 == 1 / == 0 */
    } else {
        return ob_jinja_error(c, OB_ERR_FORMAT, "unsupported operand type(s) for %%: '%s' and 'int'", ob_jv_type_name(v));
    }
    *out = r;
    return 0;
}
static int t_odd(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return parity(c, v, a, o, true); }
static int t_even(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return parity(c, v, a, o, false); }

static int t_divisibleby(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out) {
    ob_jv d = ob_jv_undef();
    OB_TRY(one_arg(c, a, "divisibleby", &d));
    if (v.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, v);
    bool vi = v.t == OB_JV_INT || v.t == OB_JV_BOOL, di = d.t == OB_JV_INT || d.t == OB_JV_BOOL;
    if (vi && di) {
        int64_t x = v.t == OB_JV_INT ? v.u.i : v.u.b, y = d.t == OB_JV_INT ? d.u.i : d.u.b;
        if (y == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "integer division or modulo by zero");
        *out = ob_jv_bool(y == -1 || x % y == 0);
        return 0;
    }
    double x = v.t == OB_JV_FLOAT ? v.u.f : vi ? (double)(v.t == OB_JV_INT ? v.u.i : v.u.b) : NAN;
    double y = d.t == OB_JV_FLOAT ? d.u.f : di ? (double)(d.t == OB_JV_INT ? d.u.i : d.u.b) : NAN;
    if (isnan(x) || isnan(y)) return ob_jinja_error(c, OB_ERR_FORMAT, "unsupported operand type(s) for %%");
    if (y == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "float modulo");
    *out = ob_jv_bool(fmod(x, y) == 0);
    return 0;
}

static int cmp_test(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out, int op) {
    ob_jv o = ob_jv_undef();
    OB_TRY(one_arg(c, a, "comparison", &o));
    bool r;
    if (op == '=') r = ob_jv_eq(v, o);
    else if (op == '!') r = !ob_jv_eq(v, o);
    else OB_TRY(ob_jv_order(c, v, o, op, &r));
    *out = ob_jv_bool(r);
    return 0;
}
static int t_eq(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return cmp_test(c, v, a, o, '='); }
static int t_ne(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return cmp_test(c, v, a, o, '!'); }
static int t_lt(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return cmp_test(c, v, a, o, '<'); }
static int t_le(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return cmp_test(c, v, a, o, 'l'); }
static int t_gt(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return cmp_test(c, v, a, o, '>'); }
static int t_ge(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return cmp_test(c, v, a, o, 'g'); }

static int t_in(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out) {
    ob_jv seq = ob_jv_undef();
    OB_TRY(one_arg(c, a, "in", &seq));
    const ob_jv *items = NULL;
    uint32_t n = 0;
    if (seq.t == OB_JV_STR) {
        if (v.t != OB_JV_STR)
            return ob_jinja_error(c, OB_ERR_FORMAT, "'in <string>' requires string as left operand, not %s", ob_jv_type_name(v));
        *out = ob_jv_bool(v.n == 0 || (v.n <= seq.n && ob_jt_find(seq.u.s, seq.n, v.u.s, v.n) != NULL));
        return 0;
    }
    if (seq.t == OB_JV_DICT) {
        *out = ob_jv_bool(ob_jdict_get(seq.u.d, v) != NULL);
        return 0;
    }
    OB_TRY(ob_jinja_iterate(c, seq, &items, &n));
    for (uint32_t i = 0; i < n; i++)
        if (ob_jv_eq(items[i], v)) {
            *out = ob_jv_bool(true);
            return 0;
        }
    *out = ob_jv_bool(false);
    return 0;
}

static int t_sameas(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out) {
    ob_jv o = ob_jv_undef();
    OB_TRY(one_arg(c, a, "sameas", &o));
    bool same = v.t == o.t;
    if (same) switch (v.t) {
        case OB_JV_BOOL: same = v.u.b == o.u.b; break;
        case OB_JV_INT: same = v.u.i == o.u.i; break;
        case OB_JV_FLOAT: same = false; break; /* two float objects are not the same object */
        case OB_JV_STR: same = v.u.s == o.u.s && v.n == o.n; break;
        case OB_JV_LIST: same = v.u.l == o.u.l; break;
        case OB_JV_DICT: case OB_JV_NS: same = v.u.d == o.u.d; break;
        case OB_JV_FUNC: same = v.u.fn == o.u.fn; break;
        default: break;
        }
    *out = ob_jv_bool(same);
    return 0;
}

static int t_case(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out, bool upper) {
    NOARGS(upper ? "upper" : "lower");
    ob_jv s;
    OB_TRY(str_of(c, v, &s));
    bool cased = false, ok = true;
    for (size_t i = 0; i < s.n;) {
        int k = 0;
        uint32_t cp = ob_jt_decode(s.u.s + i, s.n - i, &k);
        if (upper ? ob_jt_islower(cp) : ob_jt_isupper(cp)) ok = false;
        if (upper ? ob_jt_isupper(cp) : ob_jt_islower(cp)) cased = true;
        i += (size_t)k;
    }
    *out = ob_jv_bool(ok && cased);
    return 0;
}
static int t_lower(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return t_case(c, v, a, o, false); }
static int t_upper(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *o) { return t_case(c, v, a, o, true); }

static int t_filter(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out) {
    NOARGS("filter");
    *out = ob_jv_bool(v.t == OB_JV_STR && ob_jinja_find_filter(v.u.s, v.n) != NULL);
    return 0;
}

static int t_test(ob_jctx *c, ob_jv v, const ob_jargs *a, ob_jv *out) {
    NOARGS("test");
    *out = ob_jv_bool(v.t == OB_JV_STR && ob_jinja_find_test(v.u.s, v.n) != NULL);
    return 0;
}

/* ---------------------------------------------------------------- globals */

static int g_range(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    (void)self;
    if (a->nkw) return ob_jinja_error(c, OB_ERR_FORMAT, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3) return ob_jinja_error(c, OB_ERR_FORMAT, "range expected 1 to 3 arguments, got %u", a->npos);
    int64_t v[3] = {0, 0, 1};
    for (uint32_t i = 0; i < a->npos; i++) OB_TRY(to_int_arg(c, a->pos[i], "range", &v[i]));
    int64_t start = a->npos == 1 ? 0 : v[0], stop = a->npos == 1 ? v[0] : v[1], step = a->npos == 3 ? v[2] : 1;
    if (step == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "range() arg 3 must not be zero");
    double count = 0;
    if (step > 0 && start < stop) count = ceil(((double)stop - (double)start) / (double)step);
    if (step < 0 && start > stop) count = ceil(((double)start - (double)stop) / (double)-step);
    if (count > 100000) /* the sandbox's MAX_RANGE */
        return ob_jinja_error(c, OB_ERR_RANGE, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    ob_jlist *l = ob_jlist_new(c, (uint32_t)count);
    if (!l) return c->status;
    for (uint32_t i = 0; i < (uint32_t)count; i++) l->v[i] = ob_jv_int(start + (int64_t)i * step);
    l->n = (uint32_t)count;
    *out = ob_jv_list(l, OB_JL_LIST);
    return 0;
}

/* dict(mapping or pairs, **kwargs), the base of namespace() too */
static int build_dict(ob_jctx *c, const ob_jargs *a, const char *name, ob_jdict **out) {
    if (a->npos > 1) return ob_jinja_error(c, OB_ERR_FORMAT, "%s expected at most 1 argument, got %u", name, a->npos);
    ob_jdict *d = ob_jdict_new(c, a->nkw);
    if (!d) return c->status;
    if (a->npos) {
        ob_jv src = a->pos[0];
        if (src.t == OB_JV_DICT || src.t == OB_JV_NS) {
            for (uint32_t i = 0; i < src.u.d->n; i++) OB_TRY(ob_jdict_set(c, d, src.u.d->key[i], src.u.d->val[i]));
        } else {
            const ob_jv *items = NULL;
            uint32_t n = 0;
            OB_TRY(ob_jinja_iterate(c, src, &items, &n));
            for (uint32_t i = 0; i < n; i++) {
                if (items[i].t != OB_JV_LIST || items[i].u.l->n != 2)
                    return ob_jinja_error(c, OB_ERR_FORMAT, "dictionary update sequence element #%u has the wrong length", i);
                OB_TRY(ob_jdict_set(c, d, items[i].u.l->v[0], items[i].u.l->v[1]));
            }
        }
    }
    for (uint32_t k = 0; k < a->nkw; k++) {
        uint32_t kl = 0;
        const char *kn = ob_jargs_kwname(a, k, &kl);
        OB_TRY(ob_jdict_set(c, d, ob_jv_strref(kn, kl), a->kw[k]));
    }
    *out = d;
    return 0;
}

static int g_dict(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    (void)self;
    ob_jdict *d;
    OB_TRY(build_dict(c, a, "dict", &d));
    *out = ob_jv_dict(d);
    return 0;
}

static int g_namespace(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    (void)self;
    ob_jdict *d;
    OB_TRY(build_dict(c, a, "namespace", &d));
    *out = ob_jv_dict(d);
    out->t = OB_JV_NS;
    return 0;
}

static int g_raise_exception(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    (void)self;
    (void)out;
    ob_jv msg = a->npos ? a->pos[0] : ob_jv_strref("", 0);
    ob_jbuf b = ob_jb_buf(c);
    ob_jv_write_str(&b, msg);
    ob_jbuf_putc(&b, 0);
    int rc = ob_jinja_error(c, OB_ERR_INVALID_ARG, "raise_exception: %s", b.err ? "(message too long)" : b.p);
    ob_jbuf_free(&b);
    return rc;
}

/* datetime.now().strftime(fmt): C strftime for each directive; the ones
 * Python handles itself on a naive datetime (%f, %z, %Z) are done here. */
static int g_strftime_now(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    (void)self;
    if (a->npos != 1 || a->nkw || a->pos[0].t != OB_JV_STR)
        return ob_jinja_error(c, OB_ERR_FORMAT, "strftime_now() takes one format string");
    struct tm tm;
    long usec = 0;
    if (c->now_fixed) {
        tm = c->now;
    } else {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        time_t t = tv.tv_sec;
        localtime_r(&t, &tm);
        usec = (long)tv.tv_usec;
    }
    ob_jv f = a->pos[0];
    ob_jbuf b = ob_jb_buf(c);
    for (size_t i = 0; i < f.n; i++) {
        if (f.u.s[i] != '%' || i + 1 >= f.n) {
            ob_jbuf_putc(&b, f.u.s[i]);
            continue;
        }
        char d = f.u.s[++i];
        if (d == 'f') {
            ob_jbuf_printf(&b, "%06ld", usec);
        } else if (d == 'z' || d == 'Z') {
            /* naive datetime: empty */
        } else if (d == '%') {
            ob_jbuf_putc(&b, '%');
        } else {
            char spec[4] = {'%', d, 0, 0}, tmp[128];
            size_t k = 0;
            if ((d == '-' || d == 'E' || d == 'O' || d == '#' || d == '_' || d == '0' || d == '^') && i + 1 < f.n) {
                spec[2] = f.u.s[++i]; /* glibc flags and modifiers */
            }
            k = strftime(tmp, sizeof tmp, spec, &tm);
            ob_jbuf_put(&b, tmp, k);
        }
    }
    return ob_jb_finish(c, &b, out);
}

static int g_joiner(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    (void)self;
    static const char *const P_[] = {"sep", NULL};
    ob_jv p[2];
    OB_TRY(ob_jb_bind(c, "joiner", P_, a, p));
    ob_jfunc *fn = ob_jv_alloc(c, sizeof *fn);
    if (!fn) return c->status;
    memset(fn, 0, sizeof *fn);
    fn->kind = OB_JF_JOINER;
    fn->name = "joiner";
    fn->nlen = 6;
    if (ob_jb_given(p[0])) OB_TRY(str_of(c, p[0], &fn->self));
    else fn->self = ob_jv_strref(", ", 2);
    *out = ob_jv_undef();
    out->t = OB_JV_FUNC;
    out->u.fn = fn;
    return 0;
}

/* ---------------------------------------------------------------- tables */

static const ob_jbuiltin g_filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape}, {"first", f_first}, {"float", f_float}, {"forceescape", f_forceescape}, {"format", f_format},
    {"groupby", f_groupby}, {"indent", f_indent}, {"int", f_int}, {"items", f_items}, {"join", f_join},
    {"last", f_last}, {"length", f_length}, {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max},
    {"min", f_min}, {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", f_select},
    {"selectattr", f_selectattr}, {"slice", f_slice}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum},
    {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", f_truncate}, {"unique", f_unique},
    {"upper", f_upper}, {"wordcount", f_wordcount},
};

static const ob_jbuiltin g_tests[] = {
    {"!=", t_ne}, {"<", t_lt}, {"<=", t_le}, {"==", t_eq}, {">", t_gt}, {">=", t_ge},
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
    {"eq", t_eq}, {"equalto", t_eq}, {"escaped", t_escaped}, {"even", t_even}, {"false", t_false},
    {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {"greaterthan", t_gt}, {"gt", t_gt}, {"in", t_in},
    {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le}, {"lessthan", t_lt}, {"lower", t_lower},
    {"lt", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"none", t_none}, {"number", t_number}, {"odd", t_odd},
    {"sameas", t_sameas}, {"sequence", t_sequence}, {"string", t_string}, {"test", t_test}, {"true", t_true},
    {"undefined", t_undefined}, {"upper", t_upper},
};

static const ob_jbuiltin g_globals[] = {
    {"dict", g_dict}, {"joiner", g_joiner}, {"namespace", g_namespace}, {"raise_exception", g_raise_exception},
    {"range", g_range}, {"strftime_now", g_strftime_now},
};

static const ob_jbuiltin *find(const ob_jbuiltin *t, size_t n, const char *name, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && memcmp(t[i].name, name, len) == 0) return &t[i];
    return NULL;
}

const ob_jbuiltin *ob_jinja_find_filter(const char *name, size_t n) { return find(g_filters, OB_ARRAY_LEN(g_filters), name, n); }
const ob_jbuiltin *ob_jinja_find_test(const char *name, size_t n) { return find(g_tests, OB_ARRAY_LEN(g_tests), name, n); }
const ob_jbuiltin *ob_jinja_find_global(const char *name, size_t n) { return find(g_globals, OB_ARRAY_LEN(g_globals), name, n); }

int ob_jinja_apply_named(ob_jctx *c, bool test, const char *name, size_t n, ob_jv self, const ob_jargs *a, ob_jv *out) {
    const ob_jbuiltin *b = test ? ob_jinja_find_test(name, n) : ob_jinja_find_filter(name, n);
    if (!b) return ob_jinja_error(c, OB_ERR_FORMAT, "no %s named '%.*s'", test ? "test" : "filter", (int)n, name);
    return b->fn(c, self, a, out);
}

/* sum() adds with Python's +; reuse the operator through a tiny template-free path. */
static int arith_add(ob_jctx *c, ob_jv x, ob_jv y, ob_jv *out) {
    if (x.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, x);
    if (y.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, y);
    bool xi = x.t == OB_JV_INT || x.t == OB_JV_BOOL, yi = y.t == OB_JV_INT || y.t == OB_JV_BOOL;
    if (xi && yi) {
        int64_t r = 0;
        if (__builtin_add_overflow(x.t == OB_JV_INT ? x.u.i : x.u.b, y.t == OB_JV_INT ? y.u.i : y.u.b, &r))
            return ob_jinja_error(c, OB_ERR_RANGE, "integer result does not fit in 64 bits");
        *out = ob_jv_int(r);
        return 0;
    }
    if ((xi || x.t == OB_JV_FLOAT) && (yi || y.t == OB_JV_FLOAT)) {
        double a = x.t == OB_JV_FLOAT ? x.u.f : (double)(x.t == OB_JV_INT ? x.u.i : x.u.b);
        double b = y.t == OB_JV_FLOAT ? y.u.f : (double)(y.t == OB_JV_INT ? y.u.i : y.u.b);
        *out = ob_jv_float(a + b);
        return 0;
    }
    if (x.t == OB_JV_LIST && y.t == OB_JV_LIST && x.k == y.k) {
        ob_jlist *l = list_of(c, x.u.l->v, x.u.l->n);
        if (!l) return c->status;
        for (uint32_t i = 0; i < y.u.l->n; i++) OB_TRY(ob_jlist_push(c, l, y.u.l->v[i]));
        *out = ob_jv_list(l, x.k);
        return 0;
    }
    return ob_jinja_error(c, OB_ERR_FORMAT, "unsupported operand type(s) for +: '%s' and '%s'", ob_jv_type_name(x),
                          ob_jv_type_name(y));
}
