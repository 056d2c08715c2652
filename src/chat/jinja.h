/*
 * jinja.h - the inside of the chat template interpreter (src/chat only).
 *
 * A template goes through three stages, one file each:
 *
 *   jinja_lex.c    source text -> tokens, applying jinja2's whitespace rules
 *                  (trim_blocks, lstrip_blocks, "-"/"+" markers, raw blocks)
 *   jinja_parse.c  tokens -> an AST of ob_jnode, allocated in the template's
 *                  arena; filter and test names are resolved here
 *   jinja_eval.c   AST + variables -> text, under limits on output size,
 *                  memory, steps and nesting depth
 *
 * Values (jinja_value.c) model the Python objects a chat template sees:
 * None, bool, int, float, str, list/tuple, dict, namespace, callables, and
 * jinja2's Undefined. They print exactly as Python's str()/repr() print
 * them, because real templates print lists and dicts and depend on it.
 * Python string algorithms on UTF-8 (strip, split, title, case mapping...)
 * live in jinja_text.c; filters, tests, methods and globals in
 * jinja_builtins.c.
 *
 * Memory: everything a render creates is allocated from one arena that dies
 * with the render (values are immutable once built, apart from namespaces,
 * so sharing them needs no reference counts). The arena has a byte budget,
 * which is what stops a hostile template from eating the machine.
 *
 * Errors: every fallible function returns 0 or a negative ob_status and has
 * already recorded a message (ob_err) naming the template line. Statement
 * execution also returns OB_JJ_BREAK / OB_JJ_CONTINUE (positive) for loop
 * control.
 */
#ifndef OB_CHAT_JINJA_H
#define OB_CHAT_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../core/arena.h"

typedef struct ob_jctx ob_jctx;
typedef struct ob_jnode ob_jnode;
typedef struct ob_jlist ob_jlist;
typedef struct ob_jdict ob_jdict;
typedef struct ob_jfunc ob_jfunc;
typedef struct ob_jloop ob_jloop;
typedef struct ob_jbuiltin ob_jbuiltin;

/* ---------------------------------------------------------------- values */

typedef enum ob_jv_type {
    OB_JV_UNDEF = 0, /* jinja2's default Undefined: prints "", fails on use */
    OB_JV_NONE,
    OB_JV_BOOL,
    OB_JV_INT,   /* Python int, limited to int64 (overflow is an error) */
    OB_JV_FLOAT, /* Python float (double) */
    OB_JV_STR,   /* UTF-8 bytes, not NUL-terminated, immutable */
    OB_JV_LIST,  /* list or tuple (k says which) */
    OB_JV_DICT,  /* insertion-ordered, like a Python dict */
    OB_JV_NS,    /* namespace(): a dict whose attributes may be assigned */
    OB_JV_FUNC,  /* macros, builtins, bound methods, caller, loop(...) */
    OB_JV_LOOP,  /* the `loop` variable of a for loop */
} ob_jv_type;

/* ob_jv.k for lists */
enum { OB_JL_LIST = 0, OB_JL_TUPLE = 1 };
/* ob_jv.k for strings: 1 marks markupsafe's Markup (what |safe and |e
 * return): it prints the same, but repr() shows Markup('...'), and
 * Markup + str or Markup % args HTML-escapes the other side. */
enum { OB_JS_PLAIN = 0, OB_JS_MARKUP = 1 };

/* A value: 16 bytes, passed by value. Strings, lists and dicts point into
 * the render arena, the template arena or the caller's JSON. */
typedef struct ob_jv {
    uint8_t t;  /* ob_jv_type */
    uint8_t k;  /* list kind; for UNDEF the ob_jv_type of the object the lookup failed on (0: a plain name) */
    uint32_t n; /* STR: byte length; UNDEF: length of the missing name */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s; /* STR bytes; UNDEF: the missing name (NULL: an element index) */
        ob_jlist *l;
        ob_jdict *d; /* DICT, NS */
        ob_jfunc *fn;
        ob_jloop *loop;
    } u;
} ob_jv;

struct ob_jlist {
    ob_jv *v; /* [n] */
    uint32_t n, cap;
};

struct ob_jdict {
    ob_jv *key; /* [n] insertion order */
    ob_jv *val; /* [n] */
    uint32_t n, cap;
    uint32_t *index; /* open-addressing hash of slots+1 (0 empty), built once n > 8 */
    uint32_t index_cap;
};

static inline ob_jv ob_jv_undef(void) { ob_jv v = {0}; return v; }
static inline ob_jv ob_jv_none(void) { ob_jv v = {0}; v.t = OB_JV_NONE; return v; }
static inline ob_jv ob_jv_bool(bool b) { ob_jv v = {0}; v.t = OB_JV_BOOL; v.u.b = b; return v; }
static inline ob_jv ob_jv_int(int64_t i) { ob_jv v = {0}; v.t = OB_JV_INT; v.u.i = i; return v; }
static inline ob_jv ob_jv_float(double f) { ob_jv v = {0}; v.t = OB_JV_FLOAT; v.u.f = f; return v; }
/* A string value that points at s (no copy): s must outlive the render. */
static inline ob_jv ob_jv_strref(const char *s, size_t n) {
    ob_jv v = {0};
    v.t = OB_JV_STR;
    v.n = (uint32_t)n;
    v.u.s = s;
    return v;
}
static inline ob_jv ob_jv_list(ob_jlist *l, int kind) {
    ob_jv v = {0};
    v.t = OB_JV_LIST;
    v.k = (uint8_t)kind;
    v.u.l = l;
    return v;
}
static inline ob_jv ob_jv_dict(ob_jdict *d) { ob_jv v = {0}; v.t = OB_JV_DICT; v.u.d = d; return v; }

/* ---------------------------------------------------------------- buffers */

/* A growable byte buffer (ob_realloc) with a hard size limit. Errors are
 * sticky: after one failed append, err holds the status and later appends
 * do nothing, so a long run of appends needs one check at the end. */
typedef struct ob_jbuf {
    char *p;
    size_t n, cap;
    size_t limit; /* 0: no limit */
    int err;      /* 0, OB_ERR_OOM or OB_ERR_RANGE (limit) */
} ob_jbuf;

void ob_jbuf_put(ob_jbuf *b, const char *s, size_t n);
void ob_jbuf_putc(ob_jbuf *b, char c);
void ob_jbuf_puts(ob_jbuf *b, const char *s);
void ob_jbuf_printf(ob_jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ob_jbuf_put_cp(ob_jbuf *b, uint32_t cp); /* one code point as UTF-8 */
void ob_jbuf_free(ob_jbuf *b);

/* ---------------------------------------------------------------- text (jinja_text.c) */

/* Decode one code point at s[0..n) (n >= 1); the input is valid UTF-8. */
uint32_t ob_jt_decode(const char *s, size_t n, int *len);
/* Python's str.isspace() for one code point. */
bool ob_jt_isspace(uint32_t cp);
/* Python's str.isprintable() for one code point (decides repr escapes). */
bool ob_jt_isprintable(uint32_t cp);
bool ob_jt_isalpha(uint32_t cp);
bool ob_jt_isalnum(uint32_t cp);
bool ob_jt_isdigit(uint32_t cp);
bool ob_jt_isupper(uint32_t cp);
bool ob_jt_islower(uint32_t cp);
bool ob_jt_iscased(uint32_t cp);
/* Word characters of Python's re \w (wordcount). */
bool ob_jt_isword(uint32_t cp);
/* Append the upper/lower/title case of cp (may be several code points:
 * Python uses full case mappings, e.g. upper('ß') == 'SS'). */
void ob_jt_put_upper(ob_jbuf *b, uint32_t cp);
void ob_jt_put_lower(ob_jbuf *b, uint32_t cp);
void ob_jt_put_title(ob_jbuf *b, uint32_t cp);
/* First occurrence of needle (k > 0 bytes) in hay[0..n), or NULL. */
const char *ob_jt_find(const char *hay, size_t n, const char *needle, size_t k);
/* Code points in s[0..n). */
size_t ob_jt_count(const char *s, size_t n);
/* Byte offset of code point index i (clamped to n). */
size_t ob_jt_offset(const char *s, size_t n, size_t i);
/* Python repr() of a str: quote choice and escapes as CPython does them. */
void ob_jt_repr(ob_jbuf *b, const char *s, size_t n);
/* Python repr() of a float ("1.0", "0.1", "1e-05", "inf", "nan"). */
void ob_jt_float_repr(ob_jbuf *b, double f);

/* ---------------------------------------------------------------- values (jinja_value.c) */

/* Arena allocation for the render; NULL after recording OB_ERR_RANGE (the
 * render's memory budget) or OB_ERR_OOM in the context. */
void *ob_jv_alloc(ob_jctx *c, size_t n);
ob_jv ob_jv_str_copy(ob_jctx *c, const char *s, size_t n, int *rc);
/* A string value holding the bytes of b (copied into the arena). */
int ob_jv_str_from_buf(ob_jctx *c, const ob_jbuf *b, ob_jv *out);

ob_jlist *ob_jlist_new(ob_jctx *c, uint32_t cap);
int ob_jlist_push(ob_jctx *c, ob_jlist *l, ob_jv v);
ob_jdict *ob_jdict_new(ob_jctx *c, uint32_t cap);
/* Insert or replace (keeps the first insertion's position, as Python does). */
int ob_jdict_set(ob_jctx *c, ob_jdict *d, ob_jv key, ob_jv val);
/* Lookup; NULL if absent. The returned pointer is valid until the next set. */
ob_jv *ob_jdict_get(const ob_jdict *d, ob_jv key);
ob_jv *ob_jdict_get_str(const ob_jdict *d, const char *s, size_t n);

bool ob_jv_truthy(ob_jv v);
/* Python ==. */
bool ob_jv_eq(ob_jv a, ob_jv b);
/* Python <, <=, >, >= (op is '<', 'l' (<=), '>', 'g' (>=)); TypeError for
 * types that do not order. */
int ob_jv_order(ob_jctx *c, ob_jv a, ob_jv b, int op, bool *out);
/* HTML-escape s into b as markupsafe.escape does (& < > " '). */
void ob_jv_html_escape(ob_jbuf *b, const char *s, size_t n);
/* Python's type name ("int", "str", "NoneType", "dict"...). */
const char *ob_jv_type_name(ob_jv v);

/* Append str(v) (what {{ v }} prints) / repr(v). Undefined prints "". */
void ob_jv_write_str(ob_jbuf *b, ob_jv v);
void ob_jv_write_repr(ob_jbuf *b, ob_jv v);
/* str(v) as a value (strings are returned as they are). */
int ob_jv_to_str(ob_jctx *c, ob_jv v, ob_jv *out);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as
 * transformers' tojson filter calls it. indent: NULL for none, else the
 * indent unit; sep_item/sep_key NULL for the defaults. */
typedef struct ob_jjson_opts {
    bool ensure_ascii;
    bool sort_keys;
    const char *indent; size_t indent_len; bool has_indent;
    const char *sep_item; size_t sep_item_len;
    const char *sep_key; size_t sep_key_len;
} ob_jjson_opts;
int ob_jv_to_json(ob_jctx *c, ob_jv v, const ob_jjson_opts *o, ob_jbuf *b);

/* jansson -> value (strings point into the json_t, which must outlive the render). */
struct json_t;
int ob_jv_from_json(ob_jctx *c, const struct json_t *j, ob_jv *out);

/* ---------------------------------------------------------------- AST (jinja_parse.c) */

typedef enum ob_jk {
    /* expressions */
    OB_JK_CONST,   /* cv */
    OB_JK_NAME,    /* s */
    OB_JK_ATTR,    /* a.s */
    OB_JK_ITEM,    /* a[b] */
    OB_JK_SLICE,   /* a:b:c inside [], each may be NULL */
    OB_JK_CALL,    /* a(v..., w (KW)..., *c, **d) */
    OB_JK_KW,      /* s=a, a keyword argument */
    OB_JK_FILTER,  /* a|s(v..., w...); a NULL in filter-block chains */
    OB_JK_TEST,    /* a is s(v..., w...) */
    OB_JK_NOT,     /* not a */
    OB_JK_NEG,     /* -a */
    OB_JK_POS,     /* +a */
    OB_JK_BIN,     /* a op b; op one of + - * / F(//) % P(**) */
    OB_JK_AND,
    OB_JK_OR,
    OB_JK_CMP,     /* a (v: OPERAND nodes) */
    OB_JK_OPERAND, /* op a: op one of = ! < l > g i(in) n(not in) */
    OB_JK_CONCAT,  /* v joined with ~ */
    OB_JK_COND,    /* a if b else c (c may be NULL) */
    OB_JK_LIST,    /* [v...] */
    OB_JK_TUPLE,   /* (v...) */
    OB_JK_DICT,    /* {v: w...} */
    OB_JK_NSREF,   /* a.s as an assignment target (a is a NAME) */
    /* statements */
    OB_JK_BODY,    /* v: statements */
    OB_JK_DATA,    /* s: template text */
    OB_JK_PRINT,   /* v: expressions to print */
    OB_JK_IF,      /* if a: b else c (c: BODY, or IF for elif, or NULL) */
    OB_JK_FOR,     /* for a in b [if e]: c else d; flags & 1: recursive */
    OB_JK_SET,     /* a = b */
    OB_JK_SETBLOCK,/* a = c rendered, through filter chain b (may be NULL) */
    OB_JK_MACRO,   /* macro s(v = w...): c; flags: body reads varargs 1, kwargs 2, caller 4 */
    OB_JK_CALLBLOCK, /* call(v = w...) a: c; flags as MACRO */
    OB_JK_FILTERBLOCK, /* filter b: c */
    OB_JK_WITH,    /* with v = w...: c */
    OB_JK_SCOPE,   /* c in its own scope ({% generation %}) */
    OB_JK_BREAK,
    OB_JK_CONTINUE,
} ob_jk;

struct ob_jnode {
    uint8_t k;     /* ob_jk */
    uint8_t op;
    uint8_t flags;
    uint32_t pos;  /* byte offset into the template's normalized source */
    const char *s; /* names, attribute, filter/test name, DATA text */
    uint32_t n;    /* length of s */
    ob_jv cv;      /* CONST value (strings point into the template arena) */
    ob_jnode *a, *b, *c, *d, *e;
    ob_jnode **v; uint32_t nv; /* items, positional args, params, statements */
    ob_jnode **w; uint32_t nw; /* keyword args, defaults (NULL = none), dict values */
    const ob_jbuiltin *fn;     /* FILTER/TEST: resolved builtin, NULL if unknown */
};

/* The parsed template (defined here; chat.h keeps it opaque). */
struct ob_chat_template {
    ob_arena arena;   /* nodes, names, decoded strings, the source */
    const char *src;  /* normalized source: \r\n and \r turned into \n, one trailing \n dropped */
    size_t len;
    ob_jnode *root;   /* BODY */
};

/* Tokens (jinja_lex.c). Token text points into the normalized source;
 * decoded string literals into the template arena. */
typedef enum ob_jtok_type {
    OB_JT_EOF = 0, OB_JT_DATA, OB_JT_VAR_BEGIN, OB_JT_VAR_END, OB_JT_BLOCK_BEGIN, OB_JT_BLOCK_END,
    OB_JT_NAME, OB_JT_STRING, OB_JT_INT, OB_JT_FLOAT,
    OB_JT_ADD, OB_JT_SUB, OB_JT_DIV, OB_JT_FLOORDIV, OB_JT_MUL, OB_JT_MOD, OB_JT_POW, OB_JT_TILDE,
    OB_JT_LBRACKET, OB_JT_RBRACKET, OB_JT_LPAREN, OB_JT_RPAREN, OB_JT_LBRACE, OB_JT_RBRACE,
    OB_JT_EQ, OB_JT_NE, OB_JT_GT, OB_JT_GTEQ, OB_JT_LT, OB_JT_LTEQ, OB_JT_ASSIGN, OB_JT_DOT,
    OB_JT_COLON, OB_JT_PIPE, OB_JT_COMMA, OB_JT_SEMICOLON,
} ob_jtok_type;

typedef struct ob_jtok {
    uint8_t type;
    uint32_t pos;   /* offset of the token in the source */
    const char *s;  /* DATA/NAME text, STRING decoded value */
    uint32_t n;
    int64_t i;      /* INT */
    double f;       /* FLOAT */
} ob_jtok;

/* Tokenize t->src into *toks (ob_malloc'd, ends with EOF). Errors are
 * syntax errors naming line and column. */
int ob_jinja_lex(struct ob_chat_template *t, ob_jtok **toks, size_t *ntoks);
/* Parse tokens into t->root. */
int ob_jinja_parse(struct ob_chat_template *t, const ob_jtok *toks, size_t ntoks);
/* Line and column (1-based, column in code points) of a source offset. */
void ob_jinja_linecol(const char *src, size_t len, uint32_t pos, int *line, int *col);
/* Record a syntax error at pos; returns OB_ERR_FORMAT. */
int ob_jinja_syntax_error(const struct ob_chat_template *t, uint32_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Limits on what a template may build, so a bad one fails instead of hanging. */
#define OB_JJ_MAX_PARSE_DEPTH 200  /* nested expressions and blocks */

/* ---------------------------------------------------------------- interpreter (jinja_eval.c) */

enum { OB_JJ_BREAK = 1, OB_JJ_CONTINUE = 2 };

/* A call's arguments after evaluation: positional values, then keyword
 * names (not NUL-terminated) with their values. */
typedef struct ob_jargs {
    const ob_jv *pos; uint32_t npos;
    const char *const *kwname; const uint32_t *kwlen; /* [nkw] */
    const ob_jv *kw; uint32_t nkw;
} ob_jargs;

/* Name of keyword argument i. */
static inline const char *ob_jargs_kwname(const ob_jargs *a, uint32_t i, uint32_t *len) {
    *len = a->kwlen[i];
    return a->kwname[i];
}

/* Builtin callable. `self` is the filter input, the tested value, or a
 * method's receiver (Undefined for globals). Each binds its own arguments. */
typedef int (*ob_jbuiltin_fn)(ob_jctx *c, ob_jv self, const ob_jargs *a, ob_jv *out);

struct ob_jbuiltin {
    const char *name;
    ob_jbuiltin_fn fn;
};

typedef enum ob_jfunc_kind {
    OB_JF_BUILTIN, /* a global (range, namespace, ...) or a bound method (self set) */
    OB_JF_MACRO,
    OB_JF_CALLER,  /* the body of a {% call %} block */
    OB_JF_JOINER,  /* a joiner(): "" on the first call, its separator (self) after */
    OB_JF_UNSAFE,  /* a method the immutable sandbox forbids (append, pop, update...) */
} ob_jfunc_kind;

typedef struct ob_jframe ob_jframe;

struct ob_jfunc {
    uint8_t kind;
    const ob_jbuiltin *b; /* BUILTIN */
    ob_jv self;           /* BUILTIN: bound method receiver; JOINER: separator; UNSAFE: receiver */
    const ob_jnode *node; /* MACRO / CALLBLOCK / FOR */
    ob_jframe *scope;     /* where the macro or call block was defined */
    const char *name; uint32_t nlen; /* for messages */
    uint32_t state;       /* JOINER: calls so far */
};

struct ob_jloop {
    const ob_jv *items; /* [n] after the loop filter */
    uint32_t n, i;
    int depth;          /* 1 for the outermost of a recursive loop */
    const ob_jnode *node;
    ob_jframe *outer;   /* the frame the loop runs in */
    ob_jv last_changed; bool has_changed;
};

struct ob_jframe {
    ob_jframe *parent;
    struct ob_jvar { const char *s; uint32_t n; ob_jv v; } *vars;
    uint32_t n, cap;
};

struct ob_jctx {
    const struct ob_chat_template *t;
    ob_arena arena;          /* every value of this render */
    size_t mem_limit;
    ob_jbuf out;             /* output; captures use its tail */
    ob_jframe *root;         /* top-level frame */
    const ob_jdict *vars;    /* the render's variables */
    const ob_jnode *at;      /* node being evaluated (error lines) */
    const ob_jv *filter_in;  /* input of a filter-block chain */
    uint64_t steps, max_steps;
    int depth, max_depth;
    bool now_fixed;
    struct tm now;           /* strftime_now's time when now_fixed */
    int status;              /* first error recorded */
};

/* Render t with `vars` into c->out. */
int ob_jinja_render(ob_jctx *c);
/* Call any callable value (macros, builtins, caller...) with evaluated args. */
int ob_jinja_call(ob_jctx *c, ob_jv fn, const ob_jargs *a, ob_jv *out);
/* Apply a filter or test by name at run time (map("upper"), select("odd")). */
int ob_jinja_apply_named(ob_jctx *c, bool test, const char *name, size_t n, ob_jv self,
                         const ob_jargs *a, ob_jv *out);
/* obj.name and obj[key] with jinja2's rules (attribute then item, or the reverse). */
int ob_jinja_getattr(ob_jctx *c, ob_jv obj, const char *name, size_t n, ob_jv *out);
int ob_jinja_getitem(ob_jctx *c, ob_jv obj, ob_jv key, ob_jv *out);
/* The items of an iterable (list, tuple, str, dict keys; Undefined is empty).
 * *items is never NULL, even when *n is 0. */
int ob_jinja_iterate(ob_jctx *c, ob_jv v, const ob_jv **items, uint32_t *n);

/* Record a runtime error at the current node; returns status. */
int ob_jinja_error(ob_jctx *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The error for using an Undefined ("'x' is undefined"...). */
int ob_jinja_undefined_error(ob_jctx *c, ob_jv u);
/* Count one unit of work; fails when the step budget is spent. */
int ob_jinja_step(ob_jctx *c);

/* ---------------------------------------------------------------- builtins (jinja_builtins.c) */

const ob_jbuiltin *ob_jinja_find_filter(const char *name, size_t n);
const ob_jbuiltin *ob_jinja_find_test(const char *name, size_t n);
const ob_jbuiltin *ob_jinja_find_global(const char *name, size_t n);
/* Bound method of a str / dict / list receiver, or NULL if it has none by
 * that name. *unsafe is set for methods the sandbox refuses (mutators). */
const ob_jbuiltin *ob_jinja_find_method(ob_jv self, const char *name, size_t n, bool *unsafe);
/* Python's `fmt % arg` for strings (arg: a tuple, a dict, or one value).
 * A Markup format escapes the text of %s/%r arguments and gives Markup. */
int ob_jinja_percent_format(ob_jctx *c, ob_jv fmt, ob_jv arg, ob_jv *out);

/* Shared by jinja_builtins.c and jinja_methods.c. */
#define OB_JV_MISSING 0xFF /* ob_jv.k of an Undefined that marks "argument not given" */
static inline bool ob_jb_given(ob_jv v) { return !(v.t == OB_JV_UNDEF && v.k == OB_JV_MISSING); }
/* Bind a call's arguments to parameter names (NULL-terminated): slots[i]
 * gets the i-th parameter, or a "not given" marker. Errors name fname. */
int ob_jb_bind(ob_jctx *c, const char *fname, const char *const *params, const ob_jargs *a, ob_jv *slots);
/* Turn a buffer into a string value and free the buffer. */
int ob_jb_finish(ob_jctx *c, ob_jbuf *b, ob_jv *out);
/* A scratch buffer limited like the output. */
static inline ob_jbuf ob_jb_buf(const ob_jctx *c) { ob_jbuf b = {0}; b.limit = c->out.limit; return b; }
/* Python str methods used by filters too. chars NULL strips whitespace. */
void ob_js_strip(const char *s, size_t n, const char *chars, size_t nchars, bool left, bool right, size_t *start, size_t *end);
void ob_js_upper(ob_jbuf *b, const char *s, size_t n);
void ob_js_lower(ob_jbuf *b, const char *s, size_t n);
void ob_js_capitalize(ob_jbuf *b, const char *s, size_t n);
/* str.replace(old, new, count); count < 0: all. */
void ob_js_replace(ob_jbuf *b, const char *s, size_t n, const char *old, size_t nold, const char *rep, size_t nrep, int64_t count);
/* str.splitlines(): the lines, without their ends. */
int ob_js_splitlines(ob_jctx *c, const char *s, size_t n, bool keepends, ob_jlist **out);

#endif
