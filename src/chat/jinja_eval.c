/*
 * jinja_eval.c - runs a parsed template: expressions, statements, scopes.
 *
 * Semantics are jinja2's as transformers configures it (sandboxed,
 * immutable, default Undefined), checked against Python on real templates:
 *
 *   - Scopes: a for loop starts every iteration in a fresh scope whose
 *     parent is the scope around the loop, so {% set %} inside a loop does
 *     not survive the iteration (templates use namespace() for that); if
 *     blocks share their scope; macros, call blocks, set blocks and filter
 *     blocks get their own. Macros see the scope they were defined in, at
 *     the time they are called.
 *   - Undefined: a missing name, key or attribute is Undefined. It prints
 *     as "", is false, iterates as empty and has length 0, but an attribute
 *     of it, a call, arithmetic or an ordering comparison on it is an
 *     error naming what was missing, as jinja2 raises UndefinedError.
 *   - obj.name tries the attribute (methods such as dict.items) before the
 *     key; obj[key] tries the key first.
 *   - Methods that mutate (list.append, dict.update) are refused as the
 *     immutable sandbox refuses them.
 *
 * Limits keep a hostile template from hanging or crashing the process: a
 * step budget (every expression and loop iteration counts), a recursion
 * depth (expressions, statements and macro calls together), an output size
 * and the arena's memory budget. Hitting one is an OB_ERR_RANGE error.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "jinja.h"

/* ---------------------------------------------------------------- errors and limits */

int ob_jinja_error(ob_jctx *c, int status, const char *fmt, ...) {
    if (c->status) return c->status;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = 1, col = 1;
    if (c->at) ob_jinja_linecol(c->t->src, c->t->len, c->at->pos, &line, &col);
    ob_err(status, "chat template error at line %d, column %d: %s", line, col, msg);
    c->status = status;
    return status;
}

static const char *obj_name(int type) {
    switch (type) {
    case OB_JV_NONE: return "None";
    case OB_JV_BOOL: return "bool object";
    case OB_JV_INT: return "int object";
    case OB_JV_FLOAT: return "float object";
    case OB_JV_STR: return "str object";
    case OB_JV_LIST: return "list object";
    case OB_JV_DICT: return "dict object";
    case OB_JV_NS: return "Namespace object";
    case OB_JV_LOOP: return "LoopContext object";
    default: return "object";
    }
}

int ob_jinja_undefined_error(ob_jctx *c, ob_jv u) {
    if (u.k == 0 && u.u.s) return ob_jinja_error(c, OB_ERR_FORMAT, "'%.*s' is undefined", (int)u.n, u.u.s);
    if (u.k && u.u.s)
        return ob_jinja_error(c, OB_ERR_FORMAT, "'%s' has no attribute '%.*s'", obj_name(u.k), (int)u.n, u.u.s);
    if (u.k) return ob_jinja_error(c, OB_ERR_FORMAT, "'%s' has no such element", obj_name(u.k));
    return ob_jinja_error(c, OB_ERR_FORMAT, "undefined value used");
}

int ob_jinja_step(ob_jctx *c) {
    if (++c->steps > c->max_steps)
        return ob_jinja_error(c, OB_ERR_RANGE, "the template ran more than %llu steps (a loop that does not end?)",
                              (unsigned long long)c->max_steps);
    return 0;
}

static int enter(ob_jctx *c) {
    if (++c->depth > c->max_depth)
        return ob_jinja_error(c, OB_ERR_RANGE, "the template recursed more than %d levels deep", c->max_depth);
    return ob_jinja_step(c);
}

static ob_jv undef_attr(int objtype, const char *name, size_t n) {
    ob_jv v = ob_jv_undef();
    v.k = (uint8_t)objtype;
    v.u.s = name;
    v.n = (uint32_t)n;
    return v;
}

static bool name_is(const char *s, size_t n, const char *lit) {
    size_t k = strlen(lit);
    return n == k && memcmp(s, lit, k) == 0;
}

/* ---------------------------------------------------------------- scopes */

static ob_jframe *frame_new(ob_jctx *c, ob_jframe *parent) {
    ob_jframe *f = ob_jv_alloc(c, sizeof *f);
    if (!f) return NULL;
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static ob_jv *frame_local(ob_jframe *f, const char *s, size_t n) {
    for (uint32_t i = f->n; i-- > 0;)
        if (f->vars[i].n == n && memcmp(f->vars[i].s, s, n) == 0) return &f->vars[i].v;
    return NULL;
}

static int frame_set(ob_jctx *c, ob_jframe *f, const char *s, size_t n, ob_jv v) {
    ob_jv *slot = frame_local(f, s, n);
    if (slot) {
        *slot = v;
        return 0;
    }
    if (f->n == f->cap) {
        uint32_t cap = f->cap ? f->cap * 2 : 8;
        struct ob_jvar *p = ob_jv_alloc(c, (size_t)cap * sizeof *p);
        if (!p) return c->status;
        if (f->n) memcpy(p, f->vars, f->n * sizeof *p);
        f->vars = p;
        f->cap = cap;
    }
    f->vars[f->n].s = s;
    f->vars[f->n].n = (uint32_t)n;
    f->vars[f->n].v = v;
    f->n++;
    return 0;
}

static ob_jv func_value(ob_jfunc *fn) {
    ob_jv v = ob_jv_undef();
    v.t = OB_JV_FUNC;
    v.u.fn = fn;
    return v;
}

static ob_jfunc *func_new(ob_jctx *c, int kind) {
    ob_jfunc *fn = ob_jv_alloc(c, sizeof *fn);
    if (!fn) return NULL;
    memset(fn, 0, sizeof *fn);
    fn->kind = (uint8_t)kind;
    return fn;
}

/* Name lookup: local scopes, then the render's variables, then globals. */
static int lookup(ob_jctx *c, ob_jframe *f, const char *s, size_t n, ob_jv *out) {
    for (; f; f = f->parent) {
        ob_jv *v = frame_local(f, s, n);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    if (c->vars) {
        ob_jv *v = ob_jdict_get_str(c->vars, s, n);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    const ob_jbuiltin *b = ob_jinja_find_global(s, n);
    if (b) {
        ob_jfunc *fn = func_new(c, OB_JF_BUILTIN);
        if (!fn) return c->status;
        fn->b = b;
        fn->name = b->name;
        fn->nlen = (uint32_t)strlen(b->name);
        *out = func_value(fn);
        return 0;
    }
    *out = undef_attr(0, s, n);
    return 0;
}

/* ---------------------------------------------------------------- output */

static int out_check(ob_jctx *c) {
    if (!c->out.err) return 0;
    if (c->out.err == OB_ERR_RANGE)
        return ob_jinja_error(c, OB_ERR_RANGE, "the output grew past %zu bytes", c->out.limit);
    return ob_jinja_error(c, OB_ERR_OOM, "out of memory");
}

static int out_value(ob_jctx *c, ob_jv v) {
    if (v.t == OB_JV_STR) ob_jbuf_put(&c->out, v.u.s, v.n);
    else ob_jv_write_str(&c->out, v);
    return out_check(c);
}

/* Text written since `mark`, taken out of the output as a string value. */
static int capture_end(ob_jctx *c, size_t mark, ob_jv *out) {
    OB_TRY(out_check(c));
    int rc = 0;
    *out = ob_jv_str_copy(c, c->out.p ? c->out.p + mark : "", c->out.n - mark, &rc);
    c->out.n = mark;
    return rc;
}

/* ---------------------------------------------------------------- attribute and item access */

static int loop_attr(ob_jctx *c, ob_jloop *l, const char *s, size_t n, ob_jv *out);

int ob_jinja_getattr(ob_jctx *c, ob_jv obj, const char *s, size_t n, ob_jv *out) {
    if (obj.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, obj);
    if (n && s[0] == '_') { /* the sandbox hides private attributes */
        *out = undef_attr(obj.t, s, n);
        return 0;
    }
    if (obj.t == OB_JV_LOOP) return loop_attr(c, obj.u.loop, s, n, out);
    if (obj.t == OB_JV_NS) {
        ob_jv *v = ob_jdict_get_str(obj.u.d, s, n);
        *out = v ? *v : undef_attr(obj.t, s, n);
        return 0;
    }
    bool unsafe = false;
    const ob_jbuiltin *m = ob_jinja_find_method(obj, s, n, &unsafe);
    if (m || unsafe) {
        ob_jfunc *fn = func_new(c, unsafe ? OB_JF_UNSAFE : OB_JF_BUILTIN);
        if (!fn) return c->status;
        fn->b = m;
        fn->self = obj;
        fn->name = s;
        fn->nlen = (uint32_t)n;
        *out = func_value(fn);
        return 0;
    }
    if (obj.t == OB_JV_DICT) {
        ob_jv *v = ob_jdict_get_str(obj.u.d, s, n);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    *out = undef_attr(obj.t, s, n);
    return 0;
}

/* Python's index rules: negative counts from the end; out of range -> -1. */
static int64_t norm_index(int64_t i, uint32_t n) {
    if (i < 0) i += n;
    return (i < 0 || i >= (int64_t)n) ? -1 : i;
}

static bool as_index(ob_jv k, int64_t *i) {
    if (k.t == OB_JV_INT) *i = k.u.i;
    else if (k.t == OB_JV_BOOL) *i = k.u.b;
    else return false;
    return true;
}

int ob_jinja_getitem(ob_jctx *c, ob_jv obj, ob_jv key, ob_jv *out) {
    if (obj.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, obj);
    if (key.t == OB_JV_UNDEF && obj.t == OB_JV_DICT) return ob_jinja_undefined_error(c, key);
    int64_t i = 0;
    switch (obj.t) {
    case OB_JV_DICT:
    case OB_JV_NS: {
        if ((key.t == OB_JV_LIST && key.k != OB_JL_TUPLE) || key.t == OB_JV_DICT || key.t == OB_JV_NS)
            break; /* unhashable: a TypeError, which jinja2 turns into Undefined */
        ob_jv *v = ob_jdict_get(obj.u.d, key);
        if (v) {
            *out = *v;
            return 0;
        }
        break;
    }
    case OB_JV_LIST:
        if (as_index(key, &i)) {
            i = norm_index(i, obj.u.l->n);
            if (i >= 0) {
                *out = obj.u.l->v[i];
                return 0;
            }
        }
        break;
    case OB_JV_STR:
        if (as_index(key, &i)) {
            size_t len = ob_jt_count(obj.u.s, obj.n);
            if (len > UINT32_MAX) break;
            i = norm_index(i, (uint32_t)len);
            if (i >= 0) {
                size_t a = ob_jt_offset(obj.u.s, obj.n, (size_t)i);
                int k = 0;
                ob_jt_decode(obj.u.s + a, obj.n - a, &k);
                *out = ob_jv_strref(obj.u.s + a, (size_t)k);
                return 0;
            }
        }
        break;
    case OB_JV_LOOP:
        break;
    default:
        break;
    }
    if (key.t == OB_JV_STR) return ob_jinja_getattr(c, obj, key.u.s, key.n, out);
    *out = undef_attr(obj.t, NULL, 0);
    return 0;
}

/* Python slice indices for a sequence of length n. */
static int slice_indices(ob_jctx *c, ob_jv *parts, int64_t n, int64_t *start, int64_t *stop, int64_t *step, bool *ok) {
    *ok = true;
    int64_t v[3];
    bool given[3];
    for (int k = 0; k < 3; k++) {
        given[k] = parts[k].t != OB_JV_NONE && parts[k].t != OB_JV_UNDEF;
        if (given[k] && !as_index(parts[k], &v[k])) {
            *ok = false; /* a TypeError, which jinja2 turns into Undefined */
            return 0;
        }
    }
    *step = given[2] ? v[2] : 1;
    if (*step == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "slice step cannot be zero");
    int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? n - 1 : n;
    if (!given[0]) *start = *step < 0 ? hi : lo;
    else {
        *start = v[0];
        if (*start < 0) {
            *start += n;
            if (*start < lo) *start = lo;
        } else if (*start > hi) *start = hi;
    }
    if (!given[1]) *stop = *step < 0 ? lo : hi;
    else {
        *stop = v[1];
        if (*stop < 0) {
            *stop += n;
            if (*stop < lo) *stop = lo;
        } else if (*stop > hi) *stop = hi;
    }
    return 0;
}

static int do_slice(ob_jctx *c, ob_jv obj, ob_jv *parts, ob_jv *out) {
    if (obj.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, obj);
    if (obj.t != OB_JV_LIST && obj.t != OB_JV_STR) {
        *out = undef_attr(obj.t, NULL, 0);
        return 0;
    }
    bool is_str = obj.t == OB_JV_STR;
    size_t *offs = NULL; /* code point starts of a string, plus its end */
    int64_t n = 0;
    if (is_str) {
        n = (int64_t)ob_jt_count(obj.u.s, obj.n);
        offs = ob_malloc(((size_t)n + 1) * sizeof *offs);
        if (!offs) return ob_jinja_error(c, OB_ERR_OOM, "out of memory");
        size_t k = 0;
        for (size_t i = 0; i < obj.n; i++)
            if (((unsigned char)obj.u.s[i] & 0xC0) != 0x80) offs[k++] = i;
        offs[k] = obj.n;
    } else {
        n = obj.u.l->n;
    }
    int64_t start, stop, step;
    bool ok;
    int rc = slice_indices(c, parts, n, &start, &stop, &step, &ok);
    if (rc < 0 || !ok) {
        ob_free(offs);
        if (rc == 0) *out = undef_attr(obj.t, NULL, 0);
        return rc;
    }
    int64_t count = 0;
    if (step > 0 && start < stop) count = (stop - start + step - 1) / step;
    else if (step < 0 && start > stop) count = (start - stop - step - 1) / (-step);
    if (is_str) {
        if (step == 1) {
            *out = ob_jv_strref(obj.u.s + offs[start], count ? offs[stop] - offs[start] : 0);
        } else {
            ob_jbuf b = {0};
            for (int64_t j = 0, i = start; j < count; j++, i += step) ob_jbuf_put(&b, obj.u.s + offs[i], offs[i + 1] - offs[i]);
            rc = ob_jv_str_from_buf(c, &b, out);
            ob_jbuf_free(&b);
        }
        ob_free(offs);
        return rc;
    }
    ob_jlist *l = ob_jlist_new(c, (uint32_t)count);
    if (!l) return c->status;
    for (int64_t j = 0, i = start; j < count; j++, i += step) l->v[j] = obj.u.l->v[i];
    l->n = (uint32_t)count;
    *out = ob_jv_list(l, obj.k);
    return 0;
}

/* ---------------------------------------------------------------- iteration */

/* What empty sequences iterate over: never NULL, so callers may do
 * pointer arithmetic on an empty result. */
static const ob_jv g_no_items[1];

int ob_jinja_iterate(ob_jctx *c, ob_jv v, const ob_jv **items, uint32_t *n) {
    switch (v.t) {
    case OB_JV_UNDEF:
        *items = g_no_items;
        *n = 0;
        return 0;
    case OB_JV_LIST:
        *items = v.u.l->n ? v.u.l->v : g_no_items;
        *n = v.u.l->n;
        return 0;
    case OB_JV_DICT:
        *items = v.u.d->n ? v.u.d->key : g_no_items;
        *n = v.u.d->n;
        return 0;
    case OB_JV_STR: {
        size_t len = ob_jt_count(v.u.s, v.n);
        ob_jv *out = ob_jv_alloc(c, (len ? len : 1) * sizeof *out);
        if (!out) return c->status;
        size_t k = 0;
        for (size_t i = 0; i < v.n;) {
            int w = 0;
            ob_jt_decode(v.u.s + i, v.n - i, &w);
            out[k++] = ob_jv_strref(v.u.s + i, (size_t)w);
            i += (size_t)w;
        }
        *items = out;
        *n = (uint32_t)k;
        return 0;
    }
    default:
        return ob_jinja_error(c, OB_ERR_FORMAT, "'%s' object is not iterable", ob_jv_type_name(v));
    }
}

/* ---------------------------------------------------------------- operators */

static bool is_num(ob_jv v) { return v.t == OB_JV_BOOL || v.t == OB_JV_INT || v.t == OB_JV_FLOAT; }
static bool is_intlike(ob_jv v) { return v.t == OB_JV_BOOL || v.t == OB_JV_INT; }
static int64_t as_i(ob_jv v) { return v.t == OB_JV_INT ? v.u.i : (int64_t)v.u.b; }
static double as_f(ob_jv v) { return v.t == OB_JV_FLOAT ? v.u.f : (double)as_i(v); }

static int type_error2(ob_jctx *c, const char *op, ob_jv a, ob_jv b) {
    return ob_jinja_error(c, OB_ERR_FORMAT, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                          ob_jv_type_name(a), ob_jv_type_name(b));
}

static int overflow(ob_jctx *c) {
    return ob_jinja_error(c, OB_ERR_RANGE, "integer result does not fit in 64 bits");
}

static int repeat(ob_jctx *c, ob_jv seq, int64_t times, ob_jv *out) {
    if (times < 0) times = 0;
    if (seq.t == OB_JV_STR) {
        if (times && seq.n && (uint64_t)times > (uint64_t)(c->mem_limit / seq.n))
            return ob_jinja_error(c, OB_ERR_RANGE, "string repetition too large");
        size_t total = (size_t)times * seq.n;
        char *d = ob_jv_alloc(c, total);
        if (!d) return c->status;
        for (int64_t i = 0; i < times; i++) memcpy(d + (size_t)i * seq.n, seq.u.s, seq.n);
        if (total > UINT32_MAX) return ob_jinja_error(c, OB_ERR_RANGE, "string too long");
        *out = ob_jv_strref(d, total);
        return 0;
    }
    uint32_t n = seq.u.l->n;
    if (times && n && (uint64_t)times * n > UINT32_MAX / 2) return ob_jinja_error(c, OB_ERR_RANGE, "list repetition too large");
    uint32_t total = (uint32_t)((uint64_t)times * n);
    ob_jlist *l = ob_jlist_new(c, total);
    if (!l) return c->status;
    for (uint32_t i = 0; i < total; i++) l->v[i] = seq.u.l->v[i % n];
    l->n = total;
    *out = ob_jv_list(l, seq.k);
    return 0;
}

static int arith(ob_jctx *c, int op, ob_jv a, ob_jv b, ob_jv *out) {
    if (a.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, a);
    if (b.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, b);
    static const char *const opname[] = {['+'] = "+", ['-'] = "-", ['*'] = "*", ['/'] = "/", ['F'] = "//", ['%'] = "%", ['P'] = "** or pow()"};
    if (op == '+') {
        if (a.t == OB_JV_STR && a.k == OB_JS_MARKUP && b.t == OB_JV_STR) {
            /* Markup + str escapes the str (markupsafe); str + Markup does not */
            ob_jbuf buf = {0};
            buf.limit = c->out.limit;
            ob_jbuf_put(&buf, a.u.s, a.n);
            if (b.k == OB_JS_MARKUP) ob_jbuf_put(&buf, b.u.s, b.n);
            else ob_jv_html_escape(&buf, b.u.s, b.n);
            int rc = ob_jv_str_from_buf(c, &buf, out);
            ob_jbuf_free(&buf);
            out->k = OB_JS_MARKUP;
            return rc;
        }
        if (a.t == OB_JV_STR || b.t == OB_JV_STR) {
            if (a.t != b.t) {
                if (a.t == OB_JV_STR)
                    return ob_jinja_error(c, OB_ERR_FORMAT, "can only concatenate str (not \"%s\") to str", ob_jv_type_name(b));
                return type_error2(c, "+", a, b);
            }
            if ((size_t)a.n + b.n > UINT32_MAX) return ob_jinja_error(c, OB_ERR_RANGE, "string too long");
            char *d = ob_jv_alloc(c, (size_t)a.n + b.n);
            if (!d) return c->status;
            if (a.n) memcpy(d, a.u.s, a.n);
            if (b.n) memcpy(d + a.n, b.u.s, b.n);
            *out = ob_jv_strref(d, (size_t)a.n + b.n);
            return 0;
        }
        if (a.t == OB_JV_LIST && b.t == OB_JV_LIST) {
            if (a.k != b.k)
                return ob_jinja_error(c, OB_ERR_FORMAT, "can only concatenate %s (not \"%s\") to %s", ob_jv_type_name(a),
                                      ob_jv_type_name(b), ob_jv_type_name(a));
            uint64_t total = (uint64_t)a.u.l->n + b.u.l->n;
            if (total > UINT32_MAX / 2) return ob_jinja_error(c, OB_ERR_RANGE, "list too long");
            ob_jlist *l = ob_jlist_new(c, (uint32_t)total);
            if (!l) return c->status;
            if (a.u.l->n) memcpy(l->v, a.u.l->v, a.u.l->n * sizeof(ob_jv));
            if (b.u.l->n) memcpy(l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(ob_jv));
            l->n = (uint32_t)total;
            *out = ob_jv_list(l, a.k);
            return 0;
        }
        if (a.t == OB_JV_LIST)
            return ob_jinja_error(c, OB_ERR_FORMAT, "can only concatenate %s (not \"%s\") to %s", ob_jv_type_name(a),
                                  ob_jv_type_name(b), ob_jv_type_name(a));
    }
    if (op == '*') {
        ob_jv seq = a, times = b;
        if (!((a.t == OB_JV_STR || a.t == OB_JV_LIST) && is_intlike(b))) {
            seq = b;
            times = a;
        }
        if ((seq.t == OB_JV_STR || seq.t == OB_JV_LIST) && is_intlike(times)) {
            OB_TRY(repeat(c, seq, as_i(times), out));
            if (seq.t == OB_JV_STR) out->k = seq.k;
            return 0;
        }
    }
    if (op == '%' && a.t == OB_JV_STR) return ob_jinja_percent_format(c, a, b, out);
    if (!is_num(a) || !is_num(b)) return type_error2(c, opname[op], a, b);
    if (op == '/') {
        double y = as_f(b);
        if (y == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "division by zero");
        *out = ob_jv_float(as_f(a) / y);
        return 0;
    }
    bool ints = is_intlike(a) && is_intlike(b);
    if (ints) {
        int64_t x = as_i(a), y = as_i(b), r;
        switch (op) {
        case '+': if (__builtin_add_overflow(x, y, &r)) return overflow(c); break;
        case '-': if (__builtin_sub_overflow(x, y, &r)) return overflow(c); break;
        case '*': if (__builtin_mul_overflow(x, y, &r)) return overflow(c); break;
        case 'F':
        case '%':
            if (y == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return overflow(c);
            r = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) r--; /* floor, as Python */
            if (op == '%') r = x - r * y;
            break;
        default: /* 'P' */
            if (y < 0) {
                if (x == 0) return ob_jinja_error(c, OB_ERR_FORMAT, "0.0 cannot be raised to a negative power");
                *out = ob_jv_float(pow((double)x, (double)y));
                return 0;
            }
            r = 1;
            for (int64_t base = x, e = y; e > 0; e >>= 1) {
                if ((e & 1) && __builtin_mul_overflow(r, base, &r)) return overflow(c);
                if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow(c);
            }
            break;
        }
        *out = ob_jv_int(r);
        return 0;
    }
    double x = as_f(a), y = as_f(b), r;
    switch (op) {
    case '+': r = x + y; break;
    case '-': r = x - y; break;
    case '*': r = x * y; break;
    case 'F':
    case '%': {
        /* CPython's float divmod, so signs and rounding match */
        if (y == 0) return ob_jinja_error(c, OB_ERR_FORMAT, op == 'F' ? "float floor division by zero" : "float modulo");
        double mod = fmod(x, y), div = (x - mod) / y;
        if (mod != 0) {
            if ((y < 0) != (mod < 0)) {
                mod += y;
                div -= 1.0;
            }
        } else {
            mod = copysign(0.0, y);
        }
        double fd = 0;
        if (div != 0) {
            fd = floor(div);
            if (div - fd > 0.5) fd += 1.0;
        } else {
            fd = copysign(0.0, x / y);
        }
        r = op == 'F' ? fd : mod;
        break;
    }
    default:
        if (x == 0 && y < 0) return ob_jinja_error(c, OB_ERR_FORMAT, "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y)) return ob_jinja_error(c, OB_ERR_UNSUPPORTED, "complex results are not supported");
        r = pow(x, y);
        break;
    }
    *out = ob_jv_float(r);
    return 0;
}

/* Python's `a in b`. */
static int contains(ob_jctx *c, ob_jv a, ob_jv b, bool *out) {
    switch (b.t) {
    case OB_JV_UNDEF: *out = false; return 0;
    case OB_JV_STR:
        if (a.t != OB_JV_STR) {
            if (a.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, a);
            return ob_jinja_error(c, OB_ERR_FORMAT, "'in <string>' requires string as left operand, not %s", ob_jv_type_name(a));
        }
        if (a.n == 0) *out = true;
        else if (a.n > b.n) *out = false;
        else *out = ob_jt_find(b.u.s, b.n, a.u.s, a.n) != NULL;
        return 0;
    case OB_JV_LIST:
        for (uint32_t i = 0; i < b.u.l->n; i++)
            if (ob_jv_eq(b.u.l->v[i], a)) {
                *out = true;
                return 0;
            }
        *out = false;
        return 0;
    case OB_JV_DICT:
        if ((a.t == OB_JV_LIST && a.k != OB_JL_TUPLE) || a.t == OB_JV_DICT || a.t == OB_JV_NS)
            return ob_jinja_error(c, OB_ERR_FORMAT, "unhashable type: '%s'", ob_jv_type_name(a));
        *out = ob_jdict_get(b.u.d, a) != NULL;
        return 0;
    default:
        return ob_jinja_error(c, OB_ERR_FORMAT, "argument of type '%s' is not iterable", ob_jv_type_name(b));
    }
}

/* ---------------------------------------------------------------- calls */

static int eval(ob_jctx *c, ob_jframe *f, const ob_jnode *x, ob_jv *out);
static int exec_body(ob_jctx *c, ob_jframe *f, const ob_jnode *body);
static int exec_for(ob_jctx *c, ob_jframe *f, const ob_jnode *x, ob_jv iterable, int depth);

/* Evaluated arguments of a call node. Small calls use the caller's stack
 * arrays; larger ones the arena. */
typedef struct argbuf {
    ob_jv pos_small[8], kw_small[8];
    const char *kwname_small[8];
    uint32_t kwlen_small[8];
    ob_jargs a;
} argbuf;

static int eval_args(ob_jctx *c, ob_jframe *f, const ob_jnode *x, argbuf *ab, const ob_jv *extra_kw,
                     const char *extra_name) {
    const ob_jv *dyn = NULL;
    uint32_t ndyn = 0;
    ob_jv dynv;
    if (x->c) {
        OB_TRY(eval(c, f, x->c, &dynv));
        OB_TRY(ob_jinja_iterate(c, dynv, &dyn, &ndyn));
    }
    ob_jv kwd;
    const ob_jdict *dkw = NULL;
    if (x->d) {
        OB_TRY(eval(c, f, x->d, &kwd));
        if (kwd.t != OB_JV_DICT) return ob_jinja_error(c, OB_ERR_FORMAT, "argument after ** must be a mapping, not %s", ob_jv_type_name(kwd));
        dkw = kwd.u.d;
    }
    uint32_t npos = x->nv + ndyn;
    uint32_t nkw = x->nw + (dkw ? dkw->n : 0) + (extra_kw ? 1 : 0);
    ob_jv *pos = npos <= 8 ? ab->pos_small : ob_jv_alloc(c, npos * sizeof *pos);
    ob_jv *kw = nkw <= 8 ? ab->kw_small : ob_jv_alloc(c, nkw * sizeof *kw);
    const char **kwname = nkw <= 8 ? ab->kwname_small : ob_jv_alloc(c, nkw * sizeof *kwname);
    uint32_t *kwlen = nkw <= 8 ? ab->kwlen_small : ob_jv_alloc(c, nkw * sizeof *kwlen);
    if (!pos || !kw || !kwname || !kwlen) return c->status;
    for (uint32_t i = 0; i < x->nv; i++) OB_TRY(eval(c, f, x->v[i], &pos[i]));
    for (uint32_t i = 0; i < ndyn; i++) pos[x->nv + i] = dyn[i];
    uint32_t k = 0;
    for (uint32_t i = 0; i < x->nw; i++, k++) {
        OB_TRY(eval(c, f, x->w[i]->a, &kw[k]));
        kwname[k] = x->w[i]->s;
        kwlen[k] = x->w[i]->n;
    }
    for (uint32_t i = 0; dkw && i < dkw->n; i++, k++) {
        if (dkw->key[i].t != OB_JV_STR) return ob_jinja_error(c, OB_ERR_FORMAT, "keywords must be strings");
        kw[k] = dkw->val[i];
        kwname[k] = dkw->key[i].u.s;
        kwlen[k] = dkw->key[i].n;
    }
    if (extra_kw) {
        kw[k] = *extra_kw;
        kwname[k] = extra_name;
        kwlen[k] = (uint32_t)strlen(extra_name);
        k++;
    }
    c->at = x;
    ab->a.pos = pos;
    ab->a.npos = npos;
    ab->a.kwname = kwname;
    ab->a.kwlen = kwlen;
    ab->a.kw = kw;
    ab->a.nkw = k;
    return 0;
}

/* Bind a macro's (or call block's) parameters in frame m, as jinja2's
 * Macro does: positional, then keywords, then defaults evaluated in the
 * new scope; extra arguments go to varargs/kwargs when the body uses them. */
static int bind_params(ob_jctx *c, ob_jframe *m, const ob_jnode *def, const char *name, size_t nlen, const ob_jargs *a) {
    uint32_t np = def->nv;
    bool *bound = NULL;
    bool small[16] = {false};
    if (np <= 16) bound = small;
    else {
        bound = ob_jv_alloc(c, np);
        if (!bound) return c->status;
        memset(bound, 0, np);
    }
    if (a->npos > np && !(def->flags & 1))
        return ob_jinja_error(c, OB_ERR_FORMAT, "macro '%.*s' takes not more than %u argument(s)", (int)nlen, name, np);
    for (uint32_t i = 0; i < a->npos && i < np; i++) {
        OB_TRY(frame_set(c, m, def->v[i]->s, def->v[i]->n, a->pos[i]));
        bound[i] = true;
    }
    ob_jdict *kwargs = ob_jdict_new(c, 0);
    if (!kwargs) return c->status;
    ob_jv caller = ob_jv_undef();
    bool has_caller = false;
    for (uint32_t k = 0; k < a->nkw; k++) {
        uint32_t kl = 0;
        const char *kn = ob_jargs_kwname(a, k, &kl);
        uint32_t i = 0;
        while (i < np && !(def->v[i]->n == kl && memcmp(def->v[i]->s, kn, kl) == 0)) i++;
        if (i < np) {
            if (bound[i])
                return ob_jinja_error(c, OB_ERR_FORMAT, "macro '%.*s' got multiple values for argument '%.*s'", (int)nlen, name, (int)kl, kn);
            OB_TRY(frame_set(c, m, def->v[i]->s, def->v[i]->n, a->kw[k]));
            bound[i] = true;
        } else if (name_is(kn, kl, "caller") && (def->flags & 4)) {
            caller = a->kw[k];
            has_caller = true;
        } else if (def->flags & 2) {
            OB_TRY(ob_jdict_set(c, kwargs, ob_jv_strref(kn, kl), a->kw[k]));
        } else {
            return ob_jinja_error(c, OB_ERR_FORMAT, "macro '%.*s' takes no keyword argument '%.*s'", (int)nlen, name, (int)kl, kn);
        }
    }
    for (uint32_t i = 0; i < np; i++) {
        if (bound[i]) continue;
        ob_jv v;
        if (def->w[i]) OB_TRY(eval(c, m, def->w[i], &v));
        else v = undef_attr(0, def->v[i]->s, def->v[i]->n);
        OB_TRY(frame_set(c, m, def->v[i]->s, def->v[i]->n, v));
    }
    if (def->flags & 1) {
        uint32_t extra = a->npos > np ? a->npos - np : 0;
        ob_jlist *va = ob_jlist_new(c, extra);
        if (!va) return c->status;
        for (uint32_t i = 0; i < extra; i++) va->v[i] = a->pos[np + i];
        va->n = extra;
        OB_TRY(frame_set(c, m, "varargs", 7, ob_jv_list(va, OB_JL_TUPLE)));
    }
    if (def->flags & 2) OB_TRY(frame_set(c, m, "kwargs", 6, ob_jv_dict(kwargs)));
    if (has_caller) OB_TRY(frame_set(c, m, "caller", 6, caller));
    return 0;
}

/* Run a macro or call-block body with bound arguments; the output is the result. */
static int call_body(ob_jctx *c, const ob_jfunc *fn, const ob_jargs *a, ob_jv *out) {
    OB_TRY(enter(c));
    const ob_jnode *def = fn->node;
    ob_jframe *m = frame_new(c, fn->scope);
    if (!m) return c->status;
    const ob_jnode *saved = c->at;
    c->at = def;
    OB_TRY(bind_params(c, m, def, fn->name, fn->nlen, a));
    size_t mark = c->out.n;
    int rc = exec_body(c, m, def->c);
    if (rc < 0) return rc;
    OB_TRY(capture_end(c, mark, out));
    c->at = saved;
    c->depth--;
    return 0;
}

/* loop(items) in a recursive for: the loop body again, one level deeper,
 * its output as the result. */
static int call_loop(ob_jctx *c, ob_jloop *l, const ob_jargs *a, ob_jv *out) {
    if (!(l->node->flags & 1)) return ob_jinja_error(c, OB_ERR_FORMAT, "'LoopContext' object is not callable");
    if (a->npos != 1 || a->nkw)
        return ob_jinja_error(c, OB_ERR_FORMAT, "loop() takes exactly one argument (the items to recurse into)");
    OB_TRY(enter(c));
    size_t mark = c->out.n;
    int rc = exec_for(c, l->outer, l->node, a->pos[0], l->depth + 1);
    if (rc < 0) return rc;
    OB_TRY(capture_end(c, mark, out));
    c->depth--;
    return 0;
}

int ob_jinja_call(ob_jctx *c, ob_jv callee, const ob_jargs *a, ob_jv *out) {
    if (callee.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, callee);
    if (callee.t == OB_JV_LOOP) return call_loop(c, callee.u.loop, a, out);
    if (callee.t != OB_JV_FUNC) return ob_jinja_error(c, OB_ERR_FORMAT, "'%s' object is not callable", ob_jv_type_name(callee));
    ob_jfunc *fn = callee.u.fn;
    switch (fn->kind) {
    case OB_JF_BUILTIN:
        return fn->b->fn(c, fn->self, a, out);
    case OB_JF_MACRO:
    case OB_JF_CALLER:
        return call_body(c, fn, a, out);
    case OB_JF_JOINER: /* a joiner: "" the first time, the separator after */
        *out = fn->state++ ? fn->self : ob_jv_strref("", 0);
        return 0;
    case OB_JF_UNSAFE:
        return ob_jinja_error(c, OB_ERR_FORMAT, "access to attribute '%.*s' of '%s' object is unsafe.", (int)fn->nlen,
                              fn->name, ob_jv_type_name(fn->self));
    default:
        return ob_jinja_error(c, OB_ERR_INTERNAL, "bad callable");
    }
}

/* ---------------------------------------------------------------- the loop variable */

static int loop_cycle(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    if (!a->npos) return ob_jinja_error(c, OB_ERR_FORMAT, "no items for cycling given");
    *out = a->pos[self.u.loop->i % a->npos];
    return 0;
}

static int loop_changed(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out) {
    ob_jloop *l = self.u.loop;
    ob_jlist *vals = ob_jlist_new(c, a->npos);
    if (!vals) return c->status;
    for (uint32_t i = 0; i < a->npos; i++) vals->v[i] = a->pos[i];
    vals->n = a->npos;
    ob_jv v = ob_jv_list(vals, OB_JL_LIST);
    bool changed = !l->has_changed || !ob_jv_eq(l->last_changed, v);
    l->last_changed = v;
    l->has_changed = true;
    *out = ob_jv_bool(changed);
    return 0;
}

static const ob_jbuiltin g_loop_cycle = {"cycle", loop_cycle};
static const ob_jbuiltin g_loop_changed = {"changed", loop_changed};

static int loop_attr(ob_jctx *c, ob_jloop *l, const char *s, size_t n, ob_jv *out) {
    int64_t i = l->i, len = l->n;
    if (name_is(s, n, "index")) *out = ob_jv_int(i + 1);
    else if (name_is(s, n, "index0")) *out = ob_jv_int(i);
    else if (name_is(s, n, "revindex")) *out = ob_jv_int(len - i);
    else if (name_is(s, n, "revindex0")) *out = ob_jv_int(len - i - 1);
    else if (name_is(s, n, "first")) *out = ob_jv_bool(i == 0);
    else if (name_is(s, n, "last")) *out = ob_jv_bool(i == len - 1);
    else if (name_is(s, n, "length")) *out = ob_jv_int(len);
    else if (name_is(s, n, "depth")) *out = ob_jv_int(l->depth);
    else if (name_is(s, n, "depth0")) *out = ob_jv_int(l->depth - 1);
    else if (name_is(s, n, "previtem")) *out = i > 0 ? l->items[i - 1] : undef_attr(OB_JV_LOOP, s, n);
    else if (name_is(s, n, "nextitem")) *out = i + 1 < len ? l->items[i + 1] : undef_attr(OB_JV_LOOP, s, n);
    else if (name_is(s, n, "cycle") || name_is(s, n, "changed")) {
        ob_jfunc *fn = func_new(c, OB_JF_BUILTIN);
        if (!fn) return c->status;
        fn->b = name_is(s, n, "cycle") ? &g_loop_cycle : &g_loop_changed;
        fn->self.t = OB_JV_LOOP;
        fn->self.u.loop = l;
        fn->name = fn->b->name;
        fn->nlen = (uint32_t)n;
        *out = func_value(fn);
    } else {
        *out = undef_attr(OB_JV_LOOP, s, n);
    }
    return 0;
}

/* ---------------------------------------------------------------- expressions */

static int eval_filter(ob_jctx *c, ob_jframe *f, const ob_jnode *x, ob_jv *out) {
    ob_jv in;
    if (x->a) OB_TRY(eval(c, f, x->a, &in));
    else in = *c->filter_in;
    if (!x->fn) return ob_jinja_error(c, OB_ERR_FORMAT, "no %s named '%.*s'", x->k == OB_JK_TEST ? "test" : "filter", (int)x->n, x->s);
    argbuf ab;
    OB_TRY(eval_args(c, f, x, &ab, NULL, NULL));
    return x->fn->fn(c, in, &ab.a, out);
}

static int eval_call(ob_jctx *c, ob_jframe *f, const ob_jnode *x, const ob_jv *caller, ob_jv *out) {
    ob_jv callee;
    OB_TRY(eval(c, f, x->a, &callee));
    argbuf ab;
    OB_TRY(eval_args(c, f, x, &ab, caller, "caller"));
    return ob_jinja_call(c, callee, &ab.a, out);
}

static int eval_inner(ob_jctx *c, ob_jframe *f, const ob_jnode *x, ob_jv *out) {
    ob_jv a, b;
    switch (x->k) {
    case OB_JK_CONST:
        *out = x->cv;
        return 0;
    case OB_JK_NAME:
        return lookup(c, f, x->s, x->n, out);
    case OB_JK_ATTR:
        OB_TRY(eval(c, f, x->a, &a));
        c->at = x;
        return ob_jinja_getattr(c, a, x->s, x->n, out);
    case OB_JK_ITEM:
        OB_TRY(eval(c, f, x->a, &a));
        if (x->b->k == OB_JK_SLICE) {
            ob_jv parts[3] = {ob_jv_none(), ob_jv_none(), ob_jv_none()};
            const ob_jnode *sl = x->b;
            if (sl->a) OB_TRY(eval(c, f, sl->a, &parts[0]));
            if (sl->b) OB_TRY(eval(c, f, sl->b, &parts[1]));
            if (sl->c) OB_TRY(eval(c, f, sl->c, &parts[2]));
            c->at = x;
            return do_slice(c, a, parts, out);
        }
        OB_TRY(eval(c, f, x->b, &b));
        c->at = x;
        return ob_jinja_getitem(c, a, b, out);
    case OB_JK_CALL:
        return eval_call(c, f, x, NULL, out);
    case OB_JK_FILTER:
    case OB_JK_TEST:
        return eval_filter(c, f, x, out);
    case OB_JK_NOT:
        OB_TRY(eval(c, f, x->a, &a));
        *out = ob_jv_bool(!ob_jv_truthy(a));
        return 0;
    case OB_JK_NEG:
    case OB_JK_POS:
        OB_TRY(eval(c, f, x->a, &a));
        c->at = x;
        if (a.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, a);
        if (!is_num(a))
            return ob_jinja_error(c, OB_ERR_FORMAT, "bad operand type for unary %c: '%s'", x->k == OB_JK_NEG ? '-' : '+',
                                  ob_jv_type_name(a));
        if (x->k == OB_JK_POS) *out = a.t == OB_JV_BOOL ? ob_jv_int(a.u.b) : a;
        else if (a.t == OB_JV_FLOAT) *out = ob_jv_float(-a.u.f);
        else if (as_i(a) == INT64_MIN) return overflow(c);
        else *out = ob_jv_int(-as_i(a));
        return 0;
    case OB_JK_BIN:
        OB_TRY(eval(c, f, x->a, &a));
        OB_TRY(eval(c, f, x->b, &b));
        c->at = x;
        return arith(c, x->op, a, b, out);
    case OB_JK_AND:
    case OB_JK_OR:
        OB_TRY(eval(c, f, x->a, &a));
        if (ob_jv_truthy(a) == (x->k == OB_JK_OR)) {
            *out = a;
            return 0;
        }
        return eval(c, f, x->b, out);
    case OB_JK_CMP: {
        OB_TRY(eval(c, f, x->a, &a));
        for (uint32_t i = 0; i < x->nv; i++) {
            const ob_jnode *o = x->v[i];
            OB_TRY(eval(c, f, o->a, &b));
            c->at = o;
            bool r;
            switch (o->op) {
            case '=': r = ob_jv_eq(a, b); break;
            case '!': r = !ob_jv_eq(a, b); break;
            case 'i': OB_TRY(contains(c, a, b, &r)); break;
            case 'n': OB_TRY(contains(c, a, b, &r)); r = !r; break;
            default: OB_TRY(ob_jv_order(c, a, b, o->op, &r)); break;
            }
            if (!r) {
                *out = ob_jv_bool(false);
                return 0;
            }
            a = b;
        }
        *out = ob_jv_bool(true);
        return 0;
    }
    case OB_JK_CONCAT: {
        ob_jbuf buf = {0};
        buf.limit = c->out.limit;
        for (uint32_t i = 0; i < x->nv; i++) {
            int rc = eval(c, f, x->v[i], &a);
            if (rc < 0) {
                ob_jbuf_free(&buf);
                return rc;
            }
            ob_jv_write_str(&buf, a);
        }
        int rc = ob_jv_str_from_buf(c, &buf, out);
        ob_jbuf_free(&buf);
        return rc;
    }
    case OB_JK_COND:
        OB_TRY(eval(c, f, x->b, &a));
        if (ob_jv_truthy(a)) return eval(c, f, x->a, out);
        if (x->c) return eval(c, f, x->c, out);
        *out = ob_jv_undef();
        return 0;
    case OB_JK_LIST:
    case OB_JK_TUPLE: {
        ob_jlist *l = ob_jlist_new(c, x->nv);
        if (!l) return c->status;
        for (uint32_t i = 0; i < x->nv; i++) OB_TRY(eval(c, f, x->v[i], &l->v[i]));
        l->n = x->nv;
        *out = ob_jv_list(l, x->k == OB_JK_TUPLE ? OB_JL_TUPLE : OB_JL_LIST);
        return 0;
    }
    case OB_JK_DICT: {
        ob_jdict *d = ob_jdict_new(c, x->nv);
        if (!d) return c->status;
        for (uint32_t i = 0; i < x->nv; i++) {
            OB_TRY(eval(c, f, x->v[i], &a));
            OB_TRY(eval(c, f, x->w[i], &b));
            c->at = x->v[i];
            OB_TRY(ob_jdict_set(c, d, a, b));
        }
        *out = ob_jv_dict(d);
        return 0;
    }
    default:
        return ob_jinja_error(c, OB_ERR_INTERNAL, "cannot evaluate node kind %d", x->k);
    }
}

static int eval(ob_jctx *c, ob_jframe *f, const ob_jnode *x, ob_jv *out) {
    c->at = x;
    OB_TRY(enter(c));
    int rc = eval_inner(c, f, x, out);
    c->depth--;
    return rc;
}

/* ---------------------------------------------------------------- statements */

/* Assign v to a target: a name, or names unpacking a sequence. */
static int assign(ob_jctx *c, ob_jframe *f, const ob_jnode *target, ob_jv v) {
    if (target->k == OB_JK_NAME) return frame_set(c, f, target->s, target->n, v);
    const ob_jv *items = NULL;
    uint32_t n = 0;
    if (v.t != OB_JV_LIST && v.t != OB_JV_STR && v.t != OB_JV_DICT) {
        if (v.t == OB_JV_UNDEF) return ob_jinja_undefined_error(c, v);
        return ob_jinja_error(c, OB_ERR_FORMAT, "cannot unpack non-iterable %s object", ob_jv_type_name(v));
    }
    OB_TRY(ob_jinja_iterate(c, v, &items, &n));
    if (n > target->nv)
        return ob_jinja_error(c, OB_ERR_FORMAT, "too many values to unpack (expected %u)", target->nv);
    if (n < target->nv)
        return ob_jinja_error(c, OB_ERR_FORMAT, "not enough values to unpack (expected %u, got %u)", target->nv, n);
    for (uint32_t i = 0; i < n; i++) OB_TRY(frame_set(c, f, target->v[i]->s, target->v[i]->n, items[i]));
    return 0;
}

/* Run a filter chain (innermost operand NULL) on `input`. */
static int apply_chain(ob_jctx *c, ob_jframe *f, const ob_jnode *chain, ob_jv input, ob_jv *out) {
    const ob_jv *saved = c->filter_in;
    c->filter_in = &input;
    int rc = eval(c, f, chain, out);
    c->filter_in = saved;
    return rc;
}

static int exec_for(ob_jctx *c, ob_jframe *f, const ob_jnode *x, ob_jv iterable, int depth) {
    const ob_jv *items = NULL;
    uint32_t n = 0;
    c->at = x;
    OB_TRY(ob_jinja_iterate(c, iterable, &items, &n));
    if (x->e) { /* {% for a in b if cond %}: filter first, so loop.length counts what is left */
        ob_jv *kept = ob_jv_alloc(c, (n ? n : 1) * sizeof *kept);
        ob_jframe *tf = frame_new(c, f);
        if (!kept || !tf) return c->status;
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            tf->n = 0;
            OB_TRY(ob_jinja_step(c));
            OB_TRY(assign(c, tf, x->a, items[i]));
            ob_jv t;
            OB_TRY(eval(c, tf, x->e, &t));
            if (ob_jv_truthy(t)) kept[k++] = items[i];
        }
        items = kept;
        n = k;
    }
    if (n == 0) {
        if (!x->d) return 0;
        ob_jframe *ef = frame_new(c, f);
        if (!ef) return c->status;
        return exec_body(c, ef, x->d);
    }
    ob_jloop *l = ob_jv_alloc(c, sizeof *l);
    ob_jframe *it = frame_new(c, f);
    if (!l || !it) return c->status;
    memset(l, 0, sizeof *l);
    l->items = items;
    l->n = n;
    l->depth = depth;
    l->node = x;
    l->outer = f;
    ob_jv lv = ob_jv_undef();
    lv.t = OB_JV_LOOP; /* in a recursive loop it is also callable: loop(children) */
    lv.u.loop = l;
    for (uint32_t i = 0; i < n; i++) {
        OB_TRY(ob_jinja_step(c));
        l->i = i;
        it->n = 0; /* every iteration starts from a fresh scope */
        c->at = x;
        OB_TRY(assign(c, it, x->a, items[i]));
        OB_TRY(frame_set(c, it, "loop", 4, lv));
        int rc = exec_body(c, it, x->c);
        if (rc < 0) return rc;
        if (rc == OB_JJ_BREAK) break;
    }
    return 0;
}

static int exec_stmt(ob_jctx *c, ob_jframe *f, const ob_jnode *x);

static int exec_body(ob_jctx *c, ob_jframe *f, const ob_jnode *body) {
    for (uint32_t i = 0; i < body->nv; i++) {
        int rc = exec_stmt(c, f, body->v[i]);
        if (rc != 0) return rc;
    }
    return 0;
}

static int exec_inner(ob_jctx *c, ob_jframe *f, const ob_jnode *x) {
    ob_jv v;
    switch (x->k) {
    case OB_JK_DATA:
        ob_jbuf_put(&c->out, x->s, x->n);
        return out_check(c);
    case OB_JK_PRINT:
        for (uint32_t i = 0; i < x->nv; i++) {
            OB_TRY(eval(c, f, x->v[i], &v));
            OB_TRY(out_value(c, v));
        }
        return 0;
    case OB_JK_BODY:
        return exec_body(c, f, x);
    case OB_JK_IF:
        while (x && x->k == OB_JK_IF) {
            OB_TRY(eval(c, f, x->a, &v));
            if (ob_jv_truthy(v)) return exec_body(c, f, x->b);
            x = x->c;
        }
        return x ? exec_body(c, f, x) : 0;
    case OB_JK_FOR:
        OB_TRY(eval(c, f, x->b, &v));
        return exec_for(c, f, x, v, 1);
    case OB_JK_SET:
        OB_TRY(eval(c, f, x->b, &v));
        c->at = x;
        if (x->a->k == OB_JK_NSREF) {
            ob_jv ns;
            OB_TRY(lookup(c, f, x->a->a->s, x->a->a->n, &ns));
            if (ns.t != OB_JV_NS) return ob_jinja_error(c, OB_ERR_FORMAT, "cannot assign attribute on non-namespace object");
            return ob_jdict_set(c, ns.u.d, ob_jv_strref(x->a->s, x->a->n), v);
        }
        return assign(c, f, x->a, v);
    case OB_JK_SETBLOCK: {
        ob_jframe *bf = frame_new(c, f);
        if (!bf) return c->status;
        size_t mark = c->out.n;
        int rc = exec_body(c, bf, x->c);
        if (rc < 0) return rc;
        OB_TRY(capture_end(c, mark, &v));
        if (x->b) OB_TRY(apply_chain(c, f, x->b, v, &v));
        c->at = x;
        if (x->a->k == OB_JK_NSREF) {
            ob_jv ns;
            OB_TRY(lookup(c, f, x->a->a->s, x->a->a->n, &ns));
            if (ns.t != OB_JV_NS) return ob_jinja_error(c, OB_ERR_FORMAT, "cannot assign attribute on non-namespace object");
            return ob_jdict_set(c, ns.u.d, ob_jv_strref(x->a->s, x->a->n), v);
        }
        return assign(c, f, x->a, v);
    }
    case OB_JK_MACRO: {
        ob_jfunc *fn = func_new(c, OB_JF_MACRO);
        if (!fn) return c->status;
        fn->node = x;
        fn->scope = f;
        fn->name = x->s;
        fn->nlen = x->n;
        return frame_set(c, f, x->s, x->n, func_value(fn));
    }
    case OB_JK_CALLBLOCK: {
        ob_jfunc *fn = func_new(c, OB_JF_CALLER);
        if (!fn) return c->status;
        fn->node = x;
        fn->scope = f;
        fn->name = "caller";
        fn->nlen = 6;
        ob_jv caller = func_value(fn);
        OB_TRY(eval_call(c, f, x->a, &caller, &v));
        return out_value(c, v);
    }
    case OB_JK_FILTERBLOCK: {
        ob_jframe *bf = frame_new(c, f);
        if (!bf) return c->status;
        size_t mark = c->out.n;
        int rc = exec_body(c, bf, x->c);
        if (rc < 0) return rc;
        OB_TRY(capture_end(c, mark, &v));
        OB_TRY(apply_chain(c, f, x->b, v, &v));
        return out_value(c, v);
    }
    case OB_JK_WITH: {
        ob_jframe *wf = frame_new(c, f);
        if (!wf) return c->status;
        for (uint32_t i = 0; i < x->nv; i++) {
            OB_TRY(eval(c, f, x->w[i], &v));
            OB_TRY(assign(c, wf, x->v[i], v));
        }
        return exec_body(c, wf, x->c);
    }
    case OB_JK_SCOPE: {
        ob_jframe *sf = frame_new(c, f);
        if (!sf) return c->status;
        return exec_body(c, sf, x->c);
    }
    case OB_JK_BREAK:
        return OB_JJ_BREAK;
    case OB_JK_CONTINUE:
        return OB_JJ_CONTINUE;
    default:
        return ob_jinja_error(c, OB_ERR_INTERNAL, "cannot execute node kind %d", x->k);
    }
}

static int exec_stmt(ob_jctx *c, ob_jframe *f, const ob_jnode *x) {
    c->at = x;
    OB_TRY(enter(c));
    int rc = exec_inner(c, f, x);
    c->depth--;
    return rc;
}

int ob_jinja_render(ob_jctx *c) {
    c->root = frame_new(c, NULL);
    if (!c->root) return c->status;
    int rc = exec_body(c, c->root, c->t->root);
    return rc < 0 ? rc : 0;
}
