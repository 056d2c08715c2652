/*
 * jinja_value.c - the values a template computes with, and how they print.
 *
 * Printing follows Python exactly because templates print Python objects:
 * {{ [1, 'a', None] }} must give "[1, 'a', None]", a dict prints as
 * {'k': 'v'}, True/False/None are capitalised, floats use repr() ("1.0",
 * "1e-05"). tojson is Python's json.dumps with the arguments transformers
 * passes (ensure_ascii off, so non-ASCII text stays as it is).
 *
 * Containers are allocated in the render arena and never freed one by one.
 * Dicts keep insertion order and get a hash index once they grow past a
 * handful of keys, so a large JSON object does not make lookups quadratic.
 * Deeply nested data (or a namespace that contains itself) stops at
 * MAX_NEST with an error rather than recursing without bound.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "jinja.h"

#define MAX_NEST 256

/* ---------------------------------------------------------------- buffers */

static bool jbuf_reserve(ob_jbuf *b, size_t add) {
    if (b->err) return false;
    if (b->limit && (add > b->limit || b->n > b->limit - add)) {
        b->err = OB_ERR_RANGE;
        return false;
    }
    if (b->n + add <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + add) cap = cap > SIZE_MAX / 2 ? b->n + add : cap * 2;
    char *p = ob_realloc(b->p, cap);
    if (!p) {
        b->err = OB_ERR_OOM;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void ob_jbuf_put(ob_jbuf *b, const char *s, size_t n) {
    if (!n || !jbuf_reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void ob_jbuf_putc(ob_jbuf *b, char c) {
    if (!jbuf_reserve(b, 1)) return;
    b->p[b->n++] = c;
}

void ob_jbuf_puts(ob_jbuf *b, const char *s) { ob_jbuf_put(b, s, strlen(s)); }

void ob_jbuf_printf(ob_jbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) {
        ob_jbuf_put(b, tmp, (size_t)k);
        return;
    }
    if (!jbuf_reserve(b, (size_t)k + 1)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

void ob_jbuf_put_cp(ob_jbuf *b, uint32_t cp) {
    char u[4];
    int k = 0;
    if (cp < 0x80) { u[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
    else if (cp < 0x10000) { u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); k = 3; }
    else { u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); k = 4; }
    ob_jbuf_put(b, u, (size_t)k);
}

void ob_jbuf_free(ob_jbuf *b) {
    ob_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---------------------------------------------------------------- allocation */

void *ob_jv_alloc(ob_jctx *c, size_t n) {
    void *p = ob_arena_alloc(&c->arena, n ? n : 1, 8);
    if (p) return p;
    if (c->mem_limit && c->arena.total + n + 4096 > c->mem_limit)
        ob_jinja_error(c, OB_ERR_RANGE, "the template used more than %zu MiB of memory", c->mem_limit >> 20);
    else
        ob_jinja_error(c, OB_ERR_OOM, "out of memory");
    return NULL;
}

ob_jv ob_jv_str_copy(ob_jctx *c, const char *s, size_t n, int *rc) {
    *rc = 0;
    if (n > UINT32_MAX) {
        *rc = ob_jinja_error(c, OB_ERR_RANGE, "string too long");
        return ob_jv_undef();
    }
    char *d = ob_jv_alloc(c, n);
    if (!d) {
        *rc = c->status;
        return ob_jv_undef();
    }
    if (n) memcpy(d, s, n);
    return ob_jv_strref(d, n);
}

int ob_jv_str_from_buf(ob_jctx *c, const ob_jbuf *b, ob_jv *out) {
    if (b->err == OB_ERR_RANGE) return ob_jinja_error(c, OB_ERR_RANGE, "string too long");
    if (b->err) return ob_jinja_error(c, OB_ERR_OOM, "out of memory");
    int rc = 0;
    *out = ob_jv_str_copy(c, b->p ? b->p : "", b->n, &rc);
    return rc;
}

ob_jlist *ob_jlist_new(ob_jctx *c, uint32_t cap) {
    ob_jlist *l = ob_jv_alloc(c, sizeof *l);
    if (!l) return NULL;
    l->n = 0;
    l->cap = cap;
    l->v = NULL;
    if (cap) {
        l->v = ob_jv_alloc(c, (size_t)cap * sizeof(ob_jv));
        if (!l->v) return NULL;
    }
    return l;
}

int ob_jlist_push(ob_jctx *c, ob_jlist *l, ob_jv v) {
    if (l->n == l->cap) {
        if (l->cap >= UINT32_MAX / 2) return ob_jinja_error(c, OB_ERR_RANGE, "list too long");
        uint32_t cap = l->cap ? l->cap * 2 : 4;
        ob_jv *p = ob_jv_alloc(c, (size_t)cap * sizeof *p);
        if (!p) return c->status;
        if (l->n) memcpy(p, l->v, l->n * sizeof *p);
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return 0;
}

ob_jdict *ob_jdict_new(ob_jctx *c, uint32_t cap) {
    ob_jdict *d = ob_jv_alloc(c, sizeof *d);
    if (!d) return NULL;
    memset(d, 0, sizeof *d);
    if (cap) {
        d->key = ob_jv_alloc(c, (size_t)cap * sizeof(ob_jv));
        d->val = ob_jv_alloc(c, (size_t)cap * sizeof(ob_jv));
        if (!d->key || !d->val) return NULL;
        d->cap = cap;
    }
    return d;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Equal keys must hash alike: 1, 1.0 and True are one key in Python. */
static uint64_t hash_key(ob_jv k) {
    switch (k.t) {
    case OB_JV_STR: return hash_bytes(k.u.s, k.n);
    case OB_JV_BOOL: return k.u.b ? 1 : 0;
    case OB_JV_INT: return (uint64_t)k.u.i * 0x9E3779B97F4A7C15ull;
    case OB_JV_FLOAT:
        if (k.u.f == floor(k.u.f) && fabs(k.u.f) < 9.2e18) return (uint64_t)(int64_t)k.u.f * 0x9E3779B97F4A7C15ull;
        {
            uint64_t bits;
            memcpy(&bits, &k.u.f, sizeof bits);
            return bits * 0x9E3779B97F4A7C15ull;
        }
    default: return (uint64_t)k.t * 31;
    }
}

static void index_insert(ob_jdict *d, uint32_t slot) {
    uint32_t mask = d->index_cap - 1;
    uint32_t h = (uint32_t)(hash_key(d->key[slot]) >> 7) & mask;
    while (d->index[h]) h = (h + 1) & mask;
    d->index[h] = slot + 1;
}

/* The index lives in the arena of whoever grows the dict; dicts built
 * from JSON or literals are built once, so rebuilding on growth is rare. */
static int index_build(ob_jctx *c, ob_jdict *d) {
    uint32_t cap = 16;
    while (cap < d->cap * 2) cap *= 2;
    uint32_t *idx = ob_jv_alloc(c, (size_t)cap * sizeof *idx);
    if (!idx) return c->status;
    memset(idx, 0, (size_t)cap * sizeof *idx);
    d->index = idx;
    d->index_cap = cap;
    for (uint32_t i = 0; i < d->n; i++) index_insert(d, i);
    return 0;
}

static int64_t find_slot(const ob_jdict *d, ob_jv key) {
    if (d->index) {
        uint32_t mask = d->index_cap - 1;
        uint32_t h = (uint32_t)(hash_key(key) >> 7) & mask;
        while (d->index[h]) {
            uint32_t s = d->index[h] - 1;
            if (ob_jv_eq(d->key[s], key)) return s;
            h = (h + 1) & mask;
        }
        return -1;
    }
    for (uint32_t i = 0; i < d->n; i++)
        if (ob_jv_eq(d->key[i], key)) return i;
    return -1;
}

ob_jv *ob_jdict_get(const ob_jdict *d, ob_jv key) {
    int64_t s = find_slot(d, key);
    return s < 0 ? NULL : &d->val[s];
}

ob_jv *ob_jdict_get_str(const ob_jdict *d, const char *s, size_t n) { return ob_jdict_get(d, ob_jv_strref(s, n)); }

int ob_jdict_set(ob_jctx *c, ob_jdict *d, ob_jv key, ob_jv val) {
    if (key.t == OB_JV_LIST || key.t == OB_JV_DICT || key.t == OB_JV_NS || key.t == OB_JV_UNDEF) {
        if (key.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, key);
        if (!(key.t == OB_JV_LIST && key.k == OB_JL_TUPLE))
            return ob_jinja_error(c, OB_ERR_FORMAT, "unhashable type: '%s'", ob_jv_type_name(key));
    }
    int64_t s = find_slot(d, key);
    if (s >= 0) {
        d->val[s] = val;
        return 0;
    }
    if (d->n == d->cap) {
        if (d->cap >= UINT32_MAX / 4) return ob_jinja_error(c, OB_ERR_RANGE, "dict too large");
        uint32_t cap = d->cap ? d->cap * 2 : 4;
        ob_jv *k = ob_jv_alloc(c, (size_t)cap * sizeof *k);
        ob_jv *v = k ? ob_jv_alloc(c, (size_t)cap * sizeof *v) : NULL;
        if (!v) return c->status;
        if (d->n) {
            memcpy(k, d->key, d->n * sizeof *k);
            memcpy(v, d->val, d->n * sizeof *v);
        }
        d->key = k;
        d->val = v;
        d->cap = cap;
        d->index = NULL;
    }
    d->key[d->n] = key;
    d->val[d->n] = val;
    d->n++;
    if (d->index) index_insert(d, d->n - 1);
    else if (d->n > 8) OB_TRY(index_build(c, d));
    return 0;
}

void ob_jv_html_escape(ob_jbuf *b, const char *s, size_t n) {
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e;
        switch (s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        default: continue;
        }
        ob_jbuf_put(b, s + run, i - run);
        ob_jbuf_puts(b, e);
        run = i + 1;
    }
    ob_jbuf_put(b, s + run, n - run);
}

/* ---------------------------------------------------------------- semantics */

bool ob_jv_truthy(ob_jv v) {
    switch (v.t) {
    case OB_JV_UNDEF: case OB_JV_NONE: return false;
    case OB_JV_BOOL: return v.u.b;
    case OB_JV_INT: return v.u.i != 0;
    case OB_JV_FLOAT: return v.u.f != 0;
    case OB_JV_STR: return v.n != 0;
    case OB_JV_LIST: return v.u.l->n != 0;
    case OB_JV_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

static bool is_num(ob_jv v) { return v.t == OB_JV_BOOL || v.t == OB_JV_INT || v.t == OB_JV_FLOAT; }
static double num_f(ob_jv v) { return v.t == OB_JV_FLOAT ? v.u.f : v.t == OB_JV_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t num_i(ob_jv v) { return v.t == OB_JV_INT ? v.u.i : (int64_t)v.u.b; }

static bool eq_depth(ob_jv a, ob_jv b, int depth) {
    if (depth > MAX_NEST) return false;
    if (is_num(a) && is_num(b)) {
        if (a.t != OB_JV_FLOAT && b.t != OB_JV_FLOAT) return num_i(a) == num_i(b);
        return num_f(a) == num_f(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case OB_JV_UNDEF: case OB_JV_NONE: return true;
    case OB_JV_STR: return a.n == b.n && (a.n == 0 || memcmp(a.u.s, b.u.s, a.n) == 0);
    case OB_JV_LIST:
        if (a.k != b.k || a.u.l->n != b.u.l->n) return false;
        if (a.u.l == b.u.l) return true;
        for (uint32_t i = 0; i < a.u.l->n; i++)
            if (!eq_depth(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case OB_JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        if (a.u.d == b.u.d) return true;
        for (uint32_t i = 0; i < a.u.d->n; i++) {
            const ob_jv *o = ob_jdict_get(b.u.d, a.u.d->key[i]);
            if (!o || !eq_depth(a.u.d->val[i], *o, depth + 1)) return false;
        }
        return true;
    case OB_JV_NS: return a.u.d == b.u.d;
    case OB_JV_FUNC: return a.u.fn == b.u.fn;
    case OB_JV_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

bool ob_jv_eq(ob_jv a, ob_jv b) { return eq_depth(a, b, 0); }

const char *ob_jv_type_name(ob_jv v) {
    switch (v.t) {
    case OB_JV_UNDEF: return "Undefined";
    case OB_JV_NONE: return "NoneType";
    case OB_JV_BOOL: return "bool";
    case OB_JV_INT: return "int";
    case OB_JV_FLOAT: return "float";
    case OB_JV_STR: return v.k == OB_JS_MARKUP ? "Markup" : "str";
    case OB_JV_LIST: return v.k == OB_JL_TUPLE ? "tuple" : "list";
    case OB_JV_DICT: return "dict";
    case OB_JV_NS: return "Namespace";
    case OB_JV_FUNC: return v.u.fn->kind == OB_JF_MACRO ? "Macro" : "function";
    case OB_JV_LOOP: return "LoopContext";
    default: return "object";
    }
}

/* <0, 0, >0 like a three-way compare; *ok false when the types do not order. */
static int cmp3(ob_jctx *c, ob_jv a, ob_jv b, int op, int *res, int depth) {
    static const char *const names[] = {['<'] = "<", ['l'] = "<=", ['>'] = ">", ['g'] = ">="};
    if (a.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, a);
    if (b.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, b);
    if (depth > MAX_NEST) return ob_jinja_error(c, OB_ERR_RANGE, "values nested too deeply to compare");
    if (is_num(a) && is_num(b)) {
        if (a.t != OB_JV_FLOAT && b.t != OB_JV_FLOAT) {
            int64_t x = num_i(a), y = num_i(b);
            *res = x < y ? -1 : x > y;
        } else {
            double x = num_f(a), y = num_f(b);
            *res = x < y ? -1 : x > y ? 1 : (x == y ? 0 : 2); /* 2: unordered (nan) */
        }
        return 0;
    }
    if (a.t == OB_JV_STR && b.t == OB_JV_STR) {
        size_t m = a.n < b.n ? a.n : b.n;
        int r = m ? memcmp(a.u.s, b.u.s, m) : 0;
        *res = r ? (r < 0 ? -1 : 1) : (a.n < b.n ? -1 : a.n > b.n);
        return 0;
    }
    if (a.t == OB_JV_LIST && b.t == OB_JV_LIST && a.k == b.k) {
        uint32_t m = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (uint32_t i = 0; i < m; i++) {
            if (eq_depth(a.u.l->v[i], b.u.l->v[i], depth + 1)) continue;
            return cmp3(c, a.u.l->v[i], b.u.l->v[i], op, res, depth + 1);
        }
        *res = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
        return 0;
    }
    return ob_jinja_error(c, OB_ERR_FORMAT, "'%s' not supported between instances of '%s' and '%s'", names[op],
                          ob_jv_type_name(a), ob_jv_type_name(b));
}

int ob_jv_order(ob_jctx *c, ob_jv a, ob_jv b, int op, bool *out) {
    int r = 0;
    OB_TRY(cmp3(c, a, b, op, &r, 0));
    if (r == 2) {
        *out = false;
        return 0;
    }
    switch (op) {
    case '<': *out = r < 0; break;
    case 'l': *out = r <= 0; break;
    case '>': *out = r > 0; break;
    default: *out = r >= 0; break;
    }
    return 0;
}

/* ---------------------------------------------------------------- printing */

static void write_repr_d(ob_jbuf *b, ob_jv v, int depth);

static void write_str_d(ob_jbuf *b, ob_jv v, int depth) {
    switch (v.t) {
    case OB_JV_UNDEF: return;
    case OB_JV_STR: ob_jbuf_put(b, v.u.s, v.n); return;
    default: write_repr_d(b, v, depth); return;
    }
}

static void write_repr_d(ob_jbuf *b, ob_jv v, int depth) {
    if (depth > MAX_NEST) {
        if (!b->err) b->err = OB_ERR_RANGE;
        return;
    }
    switch (v.t) {
    case OB_JV_UNDEF: ob_jbuf_puts(b, "Undefined"); return;
    case OB_JV_NONE: ob_jbuf_puts(b, "None"); return;
    case OB_JV_BOOL: ob_jbuf_puts(b, v.u.b ? "True" : "False"); return;
    case OB_JV_INT: ob_jbuf_printf(b, "%lld", (long long)v.u.i); return;
    case OB_JV_FLOAT: ob_jt_float_repr(b, v.u.f); return;
    case OB_JV_STR:
        if (v.k == OB_JS_MARKUP) ob_jbuf_puts(b, "Markup(");
        ob_jt_repr(b, v.u.s, v.n);
        if (v.k == OB_JS_MARKUP) ob_jbuf_putc(b, ')');
        return;
    case OB_JV_LIST: {
        bool tup = v.k == OB_JL_TUPLE;
        ob_jbuf_putc(b, tup ? '(' : '[');
        for (uint32_t i = 0; i < v.u.l->n && !b->err; i++) {
            if (i) ob_jbuf_puts(b, ", ");
            write_repr_d(b, v.u.l->v[i], depth + 1);
        }
        if (tup && v.u.l->n == 1) ob_jbuf_putc(b, ',');
        ob_jbuf_putc(b, tup ? ')' : ']');
        return;
    }
    case OB_JV_DICT:
    case OB_JV_NS: {
        if (v.t == OB_JV_NS) ob_jbuf_puts(b, "<Namespace ");
        ob_jbuf_putc(b, '{');
        for (uint32_t i = 0; i < v.u.d->n && !b->err; i++) {
            if (i) ob_jbuf_puts(b, ", ");
            write_repr_d(b, v.u.d->key[i], depth + 1);
            ob_jbuf_puts(b, ": ");
            write_repr_d(b, v.u.d->val[i], depth + 1);
        }
        ob_jbuf_putc(b, '}');
        if (v.t == OB_JV_NS) ob_jbuf_putc(b, '>');
        return;
    }
    case OB_JV_FUNC: {
        const ob_jfunc *f = v.u.fn;
        if (f->kind == OB_JF_MACRO) ob_jbuf_printf(b, "<Macro '%.*s'>", (int)f->nlen, f->name);
        else if (f->kind == OB_JF_CALLER) ob_jbuf_puts(b, "<Macro 'caller'>");
        else ob_jbuf_printf(b, "<built-in function %.*s>", (int)f->nlen, f->name ? f->name : "");
        return;
    }
    case OB_JV_LOOP: ob_jbuf_printf(b, "<LoopContext %u/%u>", v.u.loop->i + 1, v.u.loop->n); return;
    default: return;
    }
}

void ob_jv_write_str(ob_jbuf *b, ob_jv v) { write_str_d(b, v, 0); }
void ob_jv_write_repr(ob_jbuf *b, ob_jv v) { write_repr_d(b, v, 0); }

int ob_jv_to_str(ob_jctx *c, ob_jv v, ob_jv *out) {
    if (v.t == OB_JV_STR) {
        *out = v;
        return 0;
    }
    if (v.t == OB_JV_UNDEF) {
        *out = ob_jv_strref("", 0);
        return 0;
    }
    ob_jbuf b = {0};
    b.limit = c->out.limit;
    ob_jv_write_str(&b, v);
    int rc = b.err == OB_ERR_RANGE ? ob_jinja_error(c, OB_ERR_RANGE, "value too large or nested too deeply to print")
                                   : ob_jv_str_from_buf(c, &b, out);
    ob_jbuf_free(&b);
    return rc;
}

/* ---------------------------------------------------------------- JSON out */

static void json_str(ob_jbuf *b, const char *s, size_t n, bool ascii) {
    ob_jbuf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        int len = 1;
        const char *esc = NULL;
        char tmp[16];
        if (ch < 0x80) {
            switch (ch) {
            case '"': esc = "\\\""; break;
            case '\\': esc = "\\\\"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            default:
                if (ch < 0x20) {
                    snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                    esc = tmp;
                }
            }
        } else {
            uint32_t cp = ob_jt_decode(s + i, n - i, &len);
            if (ascii) {
                if (cp >= 0x10000) {
                    uint32_t v = cp - 0x10000;
                    snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                } else {
                    snprintf(tmp, sizeof tmp, "\\u%04x", cp);
                }
                esc = tmp;
            }
        }
        if (esc) {
            ob_jbuf_put(b, s + run, i - run);
            ob_jbuf_puts(b, esc);
            run = i + (size_t)len;
        }
        i += (size_t)len;
    }
    ob_jbuf_put(b, s + run, n - run);
    ob_jbuf_putc(b, '"');
}

static void json_newline(ob_jbuf *b, const ob_jjson_opts *o, int level) {
    ob_jbuf_putc(b, '\n');
    for (int i = 0; i < level; i++) ob_jbuf_put(b, o->indent, o->indent_len);
}

static int json_float(ob_jbuf *b, double f) {
    if (isnan(f)) ob_jbuf_puts(b, "NaN");
    else if (isinf(f)) ob_jbuf_puts(b, f < 0 ? "-Infinity" : "Infinity");
    else ob_jt_float_repr(b, f);
    return 0;
}

/* A dict key as json.dumps writes it (non-string keys are converted). */
static int json_key(ob_jctx *c, ob_jbuf *b, ob_jv k, bool ascii) {
    switch (k.t) {
    case OB_JV_STR: json_str(b, k.u.s, k.n, ascii); return 0;
    case OB_JV_INT: ob_jbuf_printf(b, "\"%lld\"", (long long)k.u.i); return 0;
    case OB_JV_BOOL: ob_jbuf_puts(b, k.u.b ? "\"true\"" : "\"false\""); return 0;
    case OB_JV_NONE: ob_jbuf_puts(b, "\"null\""); return 0;
    case OB_JV_FLOAT:
        ob_jbuf_putc(b, '"');
        json_float(b, k.u.f);
        ob_jbuf_putc(b, '"');
        return 0;
    default:
        return ob_jinja_error(c, OB_ERR_FORMAT, "keys must be str, int, float, bool or None, not %s", ob_jv_type_name(k));
    }
}

static int to_json_d(ob_jctx *c, ob_jv v, const ob_jjson_opts *o, ob_jbuf *b, int level) {
    if (level > MAX_NEST) return ob_jinja_error(c, OB_ERR_RANGE, "value nested too deeply for tojson");
    if (b->err) return 0;
    const char *isep = o->sep_item ? o->sep_item : (o->has_indent ? "," : ", ");
    size_t isep_len = o->sep_item ? o->sep_item_len : strlen(isep);
    const char *ksep = o->sep_key ? o->sep_key : ": ";
    size_t ksep_len = o->sep_key ? o->sep_key_len : 2;
    switch (v.t) {
    case OB_JV_NONE: ob_jbuf_puts(b, "null"); return 0;
    case OB_JV_BOOL: ob_jbuf_puts(b, v.u.b ? "true" : "false"); return 0;
    case OB_JV_INT: ob_jbuf_printf(b, "%lld", (long long)v.u.i); return 0;
    case OB_JV_FLOAT: return json_float(b, v.u.f);
    case OB_JV_STR: json_str(b, v.u.s, v.n, o->ensure_ascii); return 0;
    case OB_JV_LIST: {
        const ob_jlist *l = v.u.l;
        if (!l->n) {
            ob_jbuf_puts(b, "[]");
            return 0;
        }
        ob_jbuf_putc(b, '[');
        for (uint32_t i = 0; i < l->n; i++) {
            if (i) ob_jbuf_put(b, isep, isep_len);
            if (o->has_indent) json_newline(b, o, level + 1);
            OB_TRY(to_json_d(c, l->v[i], o, b, level + 1));
        }
        if (o->has_indent) json_newline(b, o, level);
        ob_jbuf_putc(b, ']');
        return 0;
    }
    case OB_JV_DICT: {
        const ob_jdict *d = v.u.d;
        if (!d->n) {
            ob_jbuf_puts(b, "{}");
            return 0;
        }
        uint32_t *order = ob_jv_alloc(c, (size_t)d->n * sizeof *order);
        if (!order) return c->status;
        for (uint32_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort_keys) {
            /* insertion sort keeps it simple; dicts in templates are small */
            for (uint32_t i = 1; i < d->n; i++) {
                uint32_t x = order[i];
                uint32_t j = i;
                while (j > 0) {
                    bool lt;
                    OB_TRY(ob_jv_order(c, d->key[x], d->key[order[j - 1]], '<', &lt));
                    if (!lt) break;
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        ob_jbuf_putc(b, '{');
        for (uint32_t i = 0; i < d->n; i++) {
            if (i) ob_jbuf_put(b, isep, isep_len);
            if (o->has_indent) json_newline(b, o, level + 1);
            OB_TRY(json_key(c, b, d->key[order[i]], o->ensure_ascii));
            ob_jbuf_put(b, ksep, ksep_len);
            OB_TRY(to_json_d(c, d->val[order[i]], o, b, level + 1));
        }
        if (o->has_indent) json_newline(b, o, level);
        ob_jbuf_putc(b, '}');
        return 0;
    }
    default:
        return ob_jinja_error(c, OB_ERR_FORMAT, "Object of type %s is not JSON serializable", ob_jv_type_name(v));
    }
}

int ob_jv_to_json(ob_jctx *c, ob_jv v, const ob_jjson_opts *o, ob_jbuf *b) { return to_json_d(c, v, o, b, 0); }

/* ---------------------------------------------------------------- JSON in */

static int from_json_d(ob_jctx *c, const json_t *j, ob_jv *out, int depth) {
    if (depth > MAX_NEST) return ob_jinja_error(c, OB_ERR_RANGE, "input JSON nested more than %d levels", MAX_NEST);
    switch (json_typeof(j)) {
    case JSON_NULL: *out = ob_jv_none(); return 0;
    case JSON_TRUE: *out = ob_jv_bool(true); return 0;
    case JSON_FALSE: *out = ob_jv_bool(false); return 0;
    case JSON_INTEGER: *out = ob_jv_int((int64_t)json_integer_value(j)); return 0;
    case JSON_REAL: *out = ob_jv_float(json_real_value(j)); return 0;
    case JSON_STRING: {
        size_t n = json_string_length(j);
        if (n > UINT32_MAX) return ob_jinja_error(c, OB_ERR_RANGE, "input string too long");
        *out = ob_jv_strref(json_string_value(j), n);
        return 0;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        if (n > UINT32_MAX / 2) return ob_jinja_error(c, OB_ERR_RANGE, "input array too long");
        ob_jlist *l = ob_jlist_new(c, (uint32_t)n);
        if (!l) return c->status;
        for (size_t i = 0; i < n; i++) OB_TRY(from_json_d(c, json_array_get(j, i), &l->v[i], depth + 1));
        l->n = (uint32_t)n;
        *out = ob_jv_list(l, OB_JL_LIST);
        return 0;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(j);
        if (n > UINT32_MAX / 4) return ob_jinja_error(c, OB_ERR_RANGE, "input object too large");
        ob_jdict *d = ob_jdict_new(c, (uint32_t)n);
        if (!d) return c->status;
        /* jansson keeps keys unique and in insertion order, as Python's
         * json.loads does, so the slots can be filled directly. */
        for (void *it = json_object_iter((json_t *)j); it; it = json_object_iter_next((json_t *)j, it)) {
            ob_jv v;
            OB_TRY(from_json_d(c, json_object_iter_value(it), &v, depth + 1));
            d->key[d->n] = ob_jv_strref(json_object_iter_key(it), json_object_iter_key_len(it));
            d->val[d->n] = v;
            d->n++;
        }
        if (d->n > 8) OB_TRY(index_build(c, d));
        *out = ob_jv_dict(d);
        return 0;
    }
    default:
        return ob_jinja_error(c, OB_ERR_FORMAT, "unsupported JSON value");
    }
}

int ob_jv_from_json(ob_jctx *c, const json_t *j, ob_jv *out) { return from_json_d(c, j, out, 0); }
