/*
 * jinja_parse.c - tokens -> AST, following jinja2's grammar and precedence.
 *
 * Expression precedence, loosest first (jinja2's, which differs from
 * Python's in places: ** is left-associative, and a filter binds to the
 * unary expression it follows, so "-1|abs" is abs(-1)):
 *
 *   a if b else c  >  or  >  and  >  not  >  comparisons, in, not in
 *   >  + -  >  ~  >  * / // %  >  **  >  unary - +  >  postfix . [] ()
 *   then filters | and tests "is", applied left to right
 *
 * Statements: if/elif/else, for (with "if" filter, else, recursive), set
 * (plain, tuple unpacking, namespace attribute, block form with filters),
 * macro, call, filter, with, print, break, continue, and transformers'
 * {% generation %}. Tags that need a loader (include, import, extends,
 * block) are refused: chat templates are single strings.
 *
 * Filter and test names are looked up now. Like jinja2, an unknown one is
 * an error at parse time unless it sits inside an if statement or an
 * if-expression, where it only fails if evaluated.
 *
 * All nodes live in the template's arena. Nesting is limited
 * (OB_JJ_MAX_PARSE_DEPTH) so a hostile template cannot overflow the stack.
 */
#include <stdio.h>
#include <string.h>

#include "../core/status.h"
#include "jinja.h"

typedef struct parser {
    struct ob_chat_template *t;
    const ob_jtok *tk;
    size_t n, i;
    int depth;
    int loops;  /* enclosing for loops in the current macro/body (break/continue) */
    bool soft;  /* inside an if: unknown filters and tests fail only when run */
} parser;

typedef struct nvec {
    ob_jnode **v;
    uint32_t n, cap;
} nvec;

static const ob_jtok *cur(const parser *P) { return &P->tk[P->i]; }
static const ob_jtok *peek(const parser *P, size_t k) {
    size_t j = P->i + k;
    return &P->tk[j < P->n ? j : P->n - 1];
}
static void advance(parser *P) {
    if (P->i + 1 < P->n) P->i++;
}

static bool is_name(const ob_jtok *t, const char *name) {
    size_t k = strlen(name);
    return t->type == OB_JT_NAME && t->n == k && memcmp(t->s, name, k) == 0;
}

static bool accept_name(parser *P, const char *name) {
    if (!is_name(cur(P), name)) return false;
    advance(P);
    return true;
}

static bool accept(parser *P, int type) {
    if (cur(P)->type != type) return false;
    advance(P);
    return true;
}

/* How jinja2 describes a token in "unexpected ..." messages. */
static void describe(const ob_jtok *t, char *buf, size_t size) {
    switch (t->type) {
    case OB_JT_EOF: snprintf(buf, size, "end of template"); break;
    case OB_JT_BLOCK_END: snprintf(buf, size, "end of statement block"); break;
    case OB_JT_VAR_END: snprintf(buf, size, "end of print statement"); break;
    case OB_JT_BLOCK_BEGIN: snprintf(buf, size, "begin of statement block"); break;
    case OB_JT_VAR_BEGIN: snprintf(buf, size, "begin of print statement"); break;
    case OB_JT_DATA: snprintf(buf, size, "template data"); break;
    case OB_JT_STRING: snprintf(buf, size, "string"); break;
    case OB_JT_INT: snprintf(buf, size, "integer"); break;
    case OB_JT_FLOAT: snprintf(buf, size, "float"); break;
    default: snprintf(buf, size, "%.*s", (int)(t->n < 40 ? t->n : 40), t->s ? t->s : ""); break;
    }
}

static int fail_unexpected(parser *P, const char *expected) {
    char d[64];
    describe(cur(P), d, sizeof d);
    if (expected) return ob_jinja_syntax_error(P->t, cur(P)->pos, "expected %s, got '%s'", expected, d);
    return ob_jinja_syntax_error(P->t, cur(P)->pos, "unexpected '%s'", d);
}

static int expect(parser *P, int type, const char *what) {
    if (cur(P)->type != type) return fail_unexpected(P, what);
    advance(P);
    return 0;
}

static ob_jnode *mk(parser *P, int k, uint32_t pos) {
    ob_jnode *x = ob_arena_calloc(&P->t->arena, 1, sizeof *x);
    if (!x) {
        ob_err(OB_ERR_OOM, "chat template: out of memory");
        return NULL;
    }
    x->k = (uint8_t)k;
    x->pos = pos;
    return x;
}

static int vpush(parser *P, nvec *v, ob_jnode *x) {
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 4;
        ob_jnode **p = ob_arena_alloc(&P->t->arena, cap * sizeof *p, 0);
        if (!p) return ob_err(OB_ERR_OOM, "chat template: out of memory");
        if (v->n) memcpy(p, v->v, v->n * sizeof *p);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 0;
}

static int enter(parser *P) {
    if (++P->depth > OB_JJ_MAX_PARSE_DEPTH)
        return ob_jinja_syntax_error(P->t, cur(P)->pos, "template nested too deeply (more than %d levels)",
                                     OB_JJ_MAX_PARSE_DEPTH);
    return 0;
}

#define NODE(var, kind, pos)                                     \
    ob_jnode *var = mk(P, (kind), (pos));                        \
    if (!var) return OB_ERR_OOM

static int parse_expression(parser *P, bool with_condexpr, ob_jnode **out);
static int parse_tuple(parser *P, int mode, const char *end_name, bool explicit_parens, ob_jnode **out);
static int parse_unary(parser *P, bool with_filter, ob_jnode **out);
static int parse_postfix(parser *P, ob_jnode **node);
static int parse_filter(parser *P, ob_jnode **node, bool start_inline);
static int subparse(parser *P, const char *const *end_names, ob_jnode **out);

/* parse_tuple modes */
enum { TUP_FULL, TUP_NO_COND, TUP_SIMPLE };

static int parse_primary(parser *P, ob_jnode **out) {
    const ob_jtok *t = cur(P);
    if (t->type == OB_JT_NAME) {
        NODE(x, OB_JK_CONST, t->pos);
        if (is_name(t, "true") || is_name(t, "True")) x->cv = ob_jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) x->cv = ob_jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) x->cv = ob_jv_none();
        else {
            x->k = OB_JK_NAME;
            x->s = t->s;
            x->n = t->n;
        }
        advance(P);
        *out = x;
        return 0;
    }
    if (t->type == OB_JT_STRING) {
        /* adjacent literals concatenate, as in Python */
        NODE(x, OB_JK_CONST, t->pos);
        size_t total = 0;
        size_t j = P->i;
        while (P->tk[j].type == OB_JT_STRING) total += P->tk[j++].n;
        if (j == P->i + 1) {
            x->cv = ob_jv_strref(t->s, t->n);
            advance(P);
        } else {
            char *s = ob_arena_alloc(&P->t->arena, total ? total : 1, 1);
            if (!s) return ob_err(OB_ERR_OOM, "chat template: out of memory");
            size_t o = 0;
            while (cur(P)->type == OB_JT_STRING) {
                if (cur(P)->n) memcpy(s + o, cur(P)->s, cur(P)->n);
                o += cur(P)->n;
                advance(P);
            }
            x->cv = ob_jv_strref(s, total);
        }
        *out = x;
        return 0;
    }
    if (t->type == OB_JT_INT || t->type == OB_JT_FLOAT) {
        NODE(x, OB_JK_CONST, t->pos);
        x->cv = t->type == OB_JT_INT ? ob_jv_int(t->i) : ob_jv_float(t->f);
        advance(P);
        *out = x;
        return 0;
    }
    if (t->type == OB_JT_LPAREN) {
        advance(P);
        OB_TRY(parse_tuple(P, TUP_FULL, NULL, true, out));
        return expect(P, OB_JT_RPAREN, "')'");
    }
    if (t->type == OB_JT_LBRACKET || t->type == OB_JT_LBRACE) {
        bool dict = t->type == OB_JT_LBRACE;
        int close = dict ? OB_JT_RBRACE : OB_JT_RBRACKET;
        NODE(x, dict ? OB_JK_DICT : OB_JK_LIST, t->pos);
        advance(P);
        nvec keys = {0}, vals = {0};
        while (cur(P)->type != close) {
            if (keys.n) {
                OB_TRY(expect(P, OB_JT_COMMA, "','"));
                if (cur(P)->type == close) break;
            }
            ob_jnode *k = NULL;
            OB_TRY(parse_expression(P, true, &k));
            OB_TRY(vpush(P, &keys, k));
            if (dict) {
                OB_TRY(expect(P, OB_JT_COLON, "':'"));
                ob_jnode *v = NULL;
                OB_TRY(parse_expression(P, true, &v));
                OB_TRY(vpush(P, &vals, v));
            }
        }
        advance(P);
        x->v = keys.v;
        x->nv = keys.n;
        x->w = vals.v;
        x->nw = vals.n;
        *out = x;
        return 0;
    }
    return fail_unexpected(P, NULL);
}

static bool tuple_end(const parser *P, const char *end_name) {
    int ty = cur(P)->type;
    if (ty == OB_JT_VAR_END || ty == OB_JT_BLOCK_END || ty == OB_JT_RPAREN) return true;
    return end_name && is_name(cur(P), end_name);
}

/* Expressions separated by commas; one without a comma is returned as is. */
static int parse_tuple(parser *P, int mode, const char *end_name, bool explicit_parens, ob_jnode **out) {
    uint32_t pos = cur(P)->pos;
    nvec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) OB_TRY(expect(P, OB_JT_COMMA, "','"));
        if (tuple_end(P, end_name)) break;
        ob_jnode *x = NULL;
        if (mode == TUP_SIMPLE) OB_TRY(parse_primary(P, &x));
        else OB_TRY(parse_expression(P, mode == TUP_FULL, &x));
        OB_TRY(vpush(P, &items, x));
        if (cur(P)->type == OB_JT_COMMA) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (items.n) {
            *out = items.v[0];
            return 0;
        }
        if (!explicit_parens) {
            char d[64];
            describe(cur(P), d, sizeof d);
            return ob_jinja_syntax_error(P->t, cur(P)->pos, "expected an expression, got '%s'", d);
        }
    }
    NODE(x, OB_JK_TUPLE, pos);
    x->v = items.v;
    x->nv = items.n;
    *out = x;
    return 0;
}

/* (args, name=value, *args, **kwargs) into x->v, x->w, x->c, x->d. */
static int parse_call_args(parser *P, ob_jnode *x) {
    OB_TRY(expect(P, OB_JT_LPAREN, "'('"));
    nvec args = {0}, kws = {0};
    bool need_comma = false;
    while (cur(P)->type != OB_JT_RPAREN) {
        if (need_comma) {
            OB_TRY(expect(P, OB_JT_COMMA, "','"));
            if (cur(P)->type == OB_JT_RPAREN) break;
        }
        uint32_t pos = cur(P)->pos;
        if (cur(P)->type == OB_JT_MUL) {
            if (x->c || x->d) return ob_jinja_syntax_error(P->t, pos, "invalid syntax for function call expression");
            advance(P);
            OB_TRY(parse_expression(P, true, &x->c));
        } else if (cur(P)->type == OB_JT_POW) {
            if (x->d) return ob_jinja_syntax_error(P->t, pos, "invalid syntax for function call expression");
            advance(P);
            OB_TRY(parse_expression(P, true, &x->d));
        } else if (cur(P)->type == OB_JT_NAME && peek(P, 1)->type == OB_JT_ASSIGN) {
            if (x->d) return ob_jinja_syntax_error(P->t, pos, "invalid syntax for function call expression");
            NODE(kw, OB_JK_KW, pos);
            kw->s = cur(P)->s;
            kw->n = cur(P)->n;
            advance(P);
            advance(P);
            OB_TRY(parse_expression(P, true, &kw->a));
            OB_TRY(vpush(P, &kws, kw));
        } else {
            if (x->c || x->d || kws.n)
                return ob_jinja_syntax_error(P->t, pos, "invalid syntax for function call expression");
            ob_jnode *a = NULL;
            OB_TRY(parse_expression(P, true, &a));
            OB_TRY(vpush(P, &args, a));
        }
        need_comma = true;
    }
    advance(P);
    x->v = args.v;
    x->nv = args.n;
    x->w = kws.v;
    x->nw = kws.n;
    return 0;
}

/* One subscript: an expression or a slice a:b:c. */
static int parse_subscribed(parser *P, ob_jnode **out) {
    uint32_t pos = cur(P)->pos;
    ob_jnode *args[3] = {NULL, NULL, NULL};
    if (cur(P)->type == OB_JT_COLON) {
        advance(P);
    } else {
        OB_TRY(parse_expression(P, true, &args[0]));
        if (cur(P)->type != OB_JT_COLON) {
            *out = args[0];
            return 0;
        }
        advance(P);
    }
    int ty = cur(P)->type;
    if (ty != OB_JT_COLON && ty != OB_JT_RBRACKET && ty != OB_JT_COMMA) OB_TRY(parse_expression(P, true, &args[1]));
    if (cur(P)->type == OB_JT_COLON) {
        advance(P);
        ty = cur(P)->type;
        if (ty != OB_JT_RBRACKET && ty != OB_JT_COMMA) OB_TRY(parse_expression(P, true, &args[2]));
    }
    NODE(x, OB_JK_SLICE, pos);
    x->a = args[0];
    x->b = args[1];
    x->c = args[2];
    *out = x;
    return 0;
}

static int parse_subscript(parser *P, ob_jnode **node) {
    const ob_jtok *t = cur(P);
    uint32_t pos = t->pos;
    advance(P);
    if (t->type == OB_JT_DOT) {
        const ob_jtok *a = cur(P);
        if (a->type == OB_JT_NAME) {
            NODE(x, OB_JK_ATTR, pos);
            x->a = *node;
            x->s = a->s;
            x->n = a->n;
            advance(P);
            *node = x;
            return 0;
        }
        if (a->type != OB_JT_INT) return ob_jinja_syntax_error(P->t, a->pos, "expected name or number");
        NODE(k, OB_JK_CONST, a->pos);
        k->cv = ob_jv_int(a->i);
        advance(P);
        NODE(x, OB_JK_ITEM, pos);
        x->a = *node;
        x->b = k;
        *node = x;
        return 0;
    }
    /* "[" */
    nvec args = {0};
    while (cur(P)->type != OB_JT_RBRACKET) {
        if (args.n) OB_TRY(expect(P, OB_JT_COMMA, "','"));
        ob_jnode *a = NULL;
        OB_TRY(parse_subscribed(P, &a));
        OB_TRY(vpush(P, &args, a));
    }
    advance(P);
    NODE(x, OB_JK_ITEM, pos);
    x->a = *node;
    if (args.n == 1) {
        x->b = args.v[0];
    } else {
        NODE(tup, OB_JK_TUPLE, pos);
        tup->v = args.v;
        tup->nv = args.n;
        x->b = tup;
    }
    *node = x;
    return 0;
}

static int parse_call(parser *P, ob_jnode **node) {
    NODE(x, OB_JK_CALL, (*node)->pos); /* errors point at what is called */
    x->a = *node;
    OB_TRY(parse_call_args(P, x));
    *node = x;
    return 0;
}

static int parse_postfix(parser *P, ob_jnode **node) {
    int depth = P->depth;
    for (;;) {
        int ty = cur(P)->type;
        if (ty != OB_JT_DOT && ty != OB_JT_LBRACKET && ty != OB_JT_LPAREN) break;
        OB_TRY(enter(P)); /* each link nests the tree one level deeper */
        if (ty == OB_JT_LPAREN) OB_TRY(parse_call(P, node));
        else OB_TRY(parse_subscript(P, node));
    }
    P->depth = depth;
    return 0;
}

/* A dotted filter or test name; dots are kept in the name. */
static int parse_dotted_name(parser *P, const char **s, uint32_t *n) {
    if (cur(P)->type != OB_JT_NAME) return fail_unexpected(P, "name");
    const char *start = cur(P)->s;
    const char *end = start + cur(P)->n;
    advance(P);
    while (cur(P)->type == OB_JT_DOT && peek(P, 1)->type == OB_JT_NAME) {
        advance(P);
        end = cur(P)->s + cur(P)->n;
        advance(P);
    }
    *s = start;
    *n = (uint32_t)(end - start);
    return 0;
}

static int resolve(parser *P, ob_jnode *x, bool test) {
    x->fn = test ? ob_jinja_find_test(x->s, x->n) : ob_jinja_find_filter(x->s, x->n);
    if (!x->fn && !P->soft)
        return ob_jinja_syntax_error(P->t, x->pos, "no %s named '%.*s'", test ? "test" : "filter", (int)x->n, x->s);
    return 0;
}

static int parse_filter(parser *P, ob_jnode **node, bool start_inline) {
    int depth = P->depth;
    while (cur(P)->type == OB_JT_PIPE || start_inline) {
        OB_TRY(enter(P));
        if (!start_inline) advance(P);
        start_inline = false;
        NODE(x, OB_JK_FILTER, cur(P)->pos);
        OB_TRY(parse_dotted_name(P, &x->s, &x->n));
        OB_TRY(resolve(P, x, false));
        if (cur(P)->type == OB_JT_LPAREN) OB_TRY(parse_call_args(P, x));
        if (x->c || x->d) return ob_jinja_syntax_error(P->t, x->pos, "*args and **kwargs are not supported in filter calls");
        x->a = *node;
        *node = x;
    }
    P->depth = depth;
    return 0;
}

static int parse_test(parser *P, ob_jnode **node) {
    uint32_t pos = cur(P)->pos;
    advance(P); /* "is" */
    bool negated = accept_name(P, "not");
    NODE(x, OB_JK_TEST, pos);
    OB_TRY(parse_dotted_name(P, &x->s, &x->n));
    OB_TRY(resolve(P, x, true));
    x->a = *node;
    int ty = cur(P)->type;
    if (ty == OB_JT_LPAREN) {
        OB_TRY(parse_call_args(P, x));
        if (x->c || x->d) return ob_jinja_syntax_error(P->t, pos, "*args and **kwargs are not supported in tests");
    } else if ((ty == OB_JT_NAME || ty == OB_JT_STRING || ty == OB_JT_INT || ty == OB_JT_FLOAT ||
                ty == OB_JT_LBRACKET || ty == OB_JT_LBRACE) &&
               !is_name(cur(P), "else") && !is_name(cur(P), "or") && !is_name(cur(P), "and")) {
        if (is_name(cur(P), "is")) return ob_jinja_syntax_error(P->t, cur(P)->pos, "You cannot chain multiple tests with is");
        ob_jnode *arg = NULL;
        OB_TRY(parse_primary(P, &arg));
        OB_TRY(parse_postfix(P, &arg));
        ob_jnode **v = ob_arena_alloc(&P->t->arena, sizeof *v, 0);
        if (!v) return ob_err(OB_ERR_OOM, "chat template: out of memory");
        v[0] = arg;
        x->v = v;
        x->nv = 1;
    }
    if (negated) {
        NODE(nx, OB_JK_NOT, pos);
        nx->a = x;
        x = nx;
    }
    *node = x;
    return 0;
}

static int parse_filter_expr(parser *P, ob_jnode **node) {
    int depth = P->depth;
    for (;;) {
        int ty = cur(P)->type;
        bool is = is_name(cur(P), "is");
        if (ty != OB_JT_PIPE && ty != OB_JT_LPAREN && !is) break;
        OB_TRY(enter(P));
        if (ty == OB_JT_PIPE) OB_TRY(parse_filter(P, node, false));
        else if (is) OB_TRY(parse_test(P, node));
        else OB_TRY(parse_call(P, node));
    }
    P->depth = depth;
    return 0;
}

static int parse_unary(parser *P, bool with_filter, ob_jnode **out) {
    OB_TRY(enter(P));
    const ob_jtok *t = cur(P);
    ob_jnode *node = NULL;
    if (t->type == OB_JT_SUB || t->type == OB_JT_ADD) {
        NODE(x, t->type == OB_JT_SUB ? OB_JK_NEG : OB_JK_POS, t->pos);
        advance(P);
        OB_TRY(parse_unary(P, false, &x->a));
        node = x;
    } else {
        OB_TRY(parse_primary(P, &node));
    }
    OB_TRY(parse_postfix(P, &node));
    if (with_filter) OB_TRY(parse_filter_expr(P, &node));
    P->depth--;
    *out = node;
    return 0;
}

static int parse_pow(parser *P, ob_jnode **out) {
    int depth = P->depth;
    OB_TRY(parse_unary(P, true, out));
    while (cur(P)->type == OB_JT_POW) {
        OB_TRY(enter(P));
        NODE(x, OB_JK_BIN, cur(P)->pos);
        x->op = 'P';
        advance(P);
        x->a = *out;
        OB_TRY(parse_unary(P, true, &x->b));
        *out = x;
    }
    P->depth = depth;
    return 0;
}

static int parse_math2(parser *P, ob_jnode **out) {
    int depth = P->depth;
    OB_TRY(parse_pow(P, out));
    for (;;) {
        int ty = cur(P)->type;
        char op = ty == OB_JT_MUL ? '*' : ty == OB_JT_DIV ? '/' : ty == OB_JT_FLOORDIV ? 'F' : ty == OB_JT_MOD ? '%' : 0;
        if (!op) break;
        OB_TRY(enter(P));
        NODE(x, OB_JK_BIN, cur(P)->pos);
        x->op = (uint8_t)op;
        advance(P);
        x->a = *out;
        OB_TRY(parse_pow(P, &x->b));
        *out = x;
    }
    P->depth = depth;
    return 0;
}

static int parse_concat(parser *P, ob_jnode **out) {
    uint32_t pos = cur(P)->pos;
    ob_jnode *first = NULL;
    OB_TRY(parse_math2(P, &first));
    if (cur(P)->type != OB_JT_TILDE) {
        *out = first;
        return 0;
    }
    nvec args = {0};
    OB_TRY(vpush(P, &args, first));
    while (accept(P, OB_JT_TILDE)) {
        ob_jnode *x = NULL;
        OB_TRY(parse_math2(P, &x));
        OB_TRY(vpush(P, &args, x));
    }
    NODE(x, OB_JK_CONCAT, pos);
    x->v = args.v;
    x->nv = args.n;
    *out = x;
    return 0;
}

static int parse_math1(parser *P, ob_jnode **out) {
    int depth = P->depth;
    OB_TRY(parse_concat(P, out));
    for (;;) {
        int ty = cur(P)->type;
        if (ty != OB_JT_ADD && ty != OB_JT_SUB) break;
        OB_TRY(enter(P));
        NODE(x, OB_JK_BIN, cur(P)->pos);
        x->op = ty == OB_JT_ADD ? '+' : '-';
        advance(P);
        x->a = *out;
        OB_TRY(parse_concat(P, &x->b));
        *out = x;
    }
    P->depth = depth;
    return 0;
}

static int parse_compare(parser *P, ob_jnode **out) {
    uint32_t pos = cur(P)->pos;
    ob_jnode *first = NULL;
    OB_TRY(parse_math1(P, &first));
    nvec ops = {0};
    for (;;) {
        int ty = cur(P)->type;
        char op = ty == OB_JT_EQ ? '=' : ty == OB_JT_NE ? '!' : ty == OB_JT_LT ? '<' : ty == OB_JT_LTEQ ? 'l'
                : ty == OB_JT_GT ? '>' : ty == OB_JT_GTEQ ? 'g' : 0;
        uint32_t opos = cur(P)->pos;
        if (op) {
            advance(P);
        } else if (is_name(cur(P), "in")) {
            op = 'i';
            advance(P);
        } else if (is_name(cur(P), "not") && is_name(peek(P, 1), "in")) {
            op = 'n';
            advance(P);
            advance(P);
        } else {
            break;
        }
        NODE(o, OB_JK_OPERAND, opos);
        o->op = (uint8_t)op;
        OB_TRY(parse_math1(P, &o->a));
        OB_TRY(vpush(P, &ops, o));
    }
    if (!ops.n) {
        *out = first;
        return 0;
    }
    NODE(x, OB_JK_CMP, pos);
    x->a = first;
    x->v = ops.v;
    x->nv = ops.n;
    *out = x;
    return 0;
}

static int parse_not(parser *P, ob_jnode **out) {
    if (is_name(cur(P), "not")) {
        OB_TRY(enter(P));
        NODE(x, OB_JK_NOT, cur(P)->pos);
        advance(P);
        OB_TRY(parse_not(P, &x->a));
        P->depth--;
        *out = x;
        return 0;
    }
    return parse_compare(P, out);
}

static int parse_and(parser *P, ob_jnode **out) {
    int depth = P->depth;
    OB_TRY(parse_not(P, out));
    while (is_name(cur(P), "and")) {
        OB_TRY(enter(P));
        NODE(x, OB_JK_AND, cur(P)->pos);
        advance(P);
        x->a = *out;
        OB_TRY(parse_not(P, &x->b));
        *out = x;
    }
    P->depth = depth;
    return 0;
}

static int parse_or(parser *P, ob_jnode **out) {
    int depth = P->depth;
    OB_TRY(parse_and(P, out));
    while (is_name(cur(P), "or")) {
        OB_TRY(enter(P));
        NODE(x, OB_JK_OR, cur(P)->pos);
        advance(P);
        x->a = *out;
        OB_TRY(parse_and(P, &x->b));
        *out = x;
    }
    P->depth = depth;
    return 0;
}

static int parse_condexpr(parser *P, ob_jnode **out) {
    int depth = P->depth;
    OB_TRY(parse_or(P, out));
    while (is_name(cur(P), "if")) {
        OB_TRY(enter(P));
        bool soft = P->soft;
        P->soft = true;
        NODE(x, OB_JK_COND, cur(P)->pos);
        advance(P);
        x->a = *out;
        OB_TRY(parse_or(P, &x->b));
        if (accept_name(P, "else")) OB_TRY(parse_condexpr(P, &x->c));
        P->soft = soft;
        *out = x;
    }
    P->depth = depth;
    return 0;
}

static int parse_expression(parser *P, bool with_condexpr, ob_jnode **out) {
    OB_TRY(enter(P));
    int rc = with_condexpr ? parse_condexpr(P, out) : parse_or(P, out);
    P->depth--;
    return rc;
}

/* ---------------------------------------------------------------- statements */

/* Skip an optional ":", expect "%}", then parse until one of end_names;
 * with drop, also consume that end name. */
static int parse_body(parser *P, const char *const *end_names, bool drop, ob_jnode **out) {
    accept(P, OB_JT_COLON);
    OB_TRY(expect(P, OB_JT_BLOCK_END, "end of statement block"));
    OB_TRY(subparse(P, end_names, out));
    if (cur(P)->type == OB_JT_EOF) {
        char want[128];
        size_t o = 0;
        for (int i = 0; end_names[i] && o < sizeof want; i++)
            o += (size_t)snprintf(want + o, sizeof want - o, "%s'%s'", i ? " or " : "", end_names[i]);
        return ob_jinja_syntax_error(P->t, cur(P)->pos, "unexpected end of template, expected %s", want);
    }
    if (drop) advance(P);
    return 0;
}

/* An assignment target: a name, names separated by commas, or ns.attr. */
static int parse_target(parser *P, bool with_ns, const char *end_name, ob_jnode **out) {
    if (with_ns && cur(P)->type == OB_JT_NAME && peek(P, 1)->type == OB_JT_DOT) {
        NODE(ns, OB_JK_NAME, cur(P)->pos);
        ns->s = cur(P)->s;
        ns->n = cur(P)->n;
        advance(P);
        advance(P);
        if (cur(P)->type != OB_JT_NAME) return fail_unexpected(P, "name");
        NODE(x, OB_JK_NSREF, ns->pos);
        x->a = ns;
        x->s = cur(P)->s;
        x->n = cur(P)->n;
        advance(P);
        *out = x;
        return 0;
    }
    ob_jnode *x = NULL;
    OB_TRY(parse_tuple(P, TUP_SIMPLE, end_name, false, &x));
    if (x->k == OB_JK_NAME) {
        *out = x;
        return 0;
    }
    if (x->k == OB_JK_TUPLE) {
        for (uint32_t i = 0; i < x->nv; i++)
            if (x->v[i]->k != OB_JK_NAME) return ob_jinja_syntax_error(P->t, x->v[i]->pos, "can't assign to this expression");
        *out = x;
        return 0;
    }
    return ob_jinja_syntax_error(P->t, x->pos, "can't assign to this expression");
}

static int parse_name_target(parser *P, ob_jnode **out) {
    if (cur(P)->type != OB_JT_NAME) return fail_unexpected(P, "name");
    NODE(x, OB_JK_NAME, cur(P)->pos);
    x->s = cur(P)->s;
    x->n = cur(P)->n;
    advance(P);
    *out = x;
    return 0;
}

/* (a, b=default, ...) of a macro or call block: v names, w defaults. */
static int parse_signature(parser *P, ob_jnode *x) {
    OB_TRY(expect(P, OB_JT_LPAREN, "'('"));
    nvec names = {0}, defs = {0};
    bool any_default = false;
    while (cur(P)->type != OB_JT_RPAREN) {
        if (names.n) OB_TRY(expect(P, OB_JT_COMMA, "','"));
        ob_jnode *name = NULL;
        OB_TRY(parse_name_target(P, &name));
        ob_jnode *def = NULL;
        if (accept(P, OB_JT_ASSIGN)) {
            OB_TRY(parse_expression(P, true, &def));
            any_default = true;
        } else if (any_default) {
            return ob_jinja_syntax_error(P->t, name->pos, "non-default argument follows default argument");
        }
        OB_TRY(vpush(P, &names, name));
        OB_TRY(vpush(P, &defs, def));
    }
    advance(P);
    x->v = names.v;
    x->nv = names.n;
    x->w = defs.v;
    x->nw = defs.n;
    return 0;
}

static const char *const END_FOR[] = {"endfor", "else", NULL};
static const char *const END_FOR_ONLY[] = {"endfor", NULL};
static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_IF_ONLY[] = {"endif", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_CALL[] = {"endcall", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_WITH[] = {"endwith", NULL};
static const char *const END_GENERATION[] = {"endgeneration", NULL};

/* Parse a body in a new scope, as jinja2 does for loops, macros and blocks:
 * unknown filters there fail at parse time again, and break/continue only
 * see loops inside it. */
static int parse_inner(parser *P, const char *const *end_names, bool drop, int loops, ob_jnode **out) {
    bool soft = P->soft;
    int saved_loops = P->loops;
    P->soft = false;
    P->loops = loops;
    int rc = parse_body(P, end_names, drop, out);
    P->soft = soft;
    P->loops = saved_loops;
    return rc;
}

/* Which of varargs, kwargs and caller a macro body reads (flags 1, 2, 4).
 * Like jinja2, a macro accepts extra positional or keyword arguments, or a
 * caller, only when its body refers to these names. Nested macros are
 * their own business. */
static uint8_t special_names(const ob_jnode *x) {
    if (!x) return 0;
    uint8_t f = 0;
    if (x->k == OB_JK_NAME) {
        if (x->n == 7 && !memcmp(x->s, "varargs", 7)) f |= 1;
        if (x->n == 6 && !memcmp(x->s, "kwargs", 6)) f |= 2;
        if (x->n == 6 && !memcmp(x->s, "caller", 6)) f |= 4;
        return f;
    }
    if (x->k == OB_JK_MACRO) return 0;
    f |= special_names(x->a) | special_names(x->b) | special_names(x->c) | special_names(x->d) | special_names(x->e);
    for (uint32_t i = 0; i < x->nv; i++) f |= special_names(x->v[i]);
    for (uint32_t i = 0; i < x->nw; i++) f |= special_names(x->w[i]);
    return f;
}

static int parse_statement(parser *P, ob_jnode **out) {
    const ob_jtok *t = cur(P);
    uint32_t pos = t->pos;
    if (t->type != OB_JT_NAME) return ob_jinja_syntax_error(P->t, pos, "tag name expected");
    OB_TRY(enter(P));
    if (accept_name(P, "for")) {
        NODE(x, OB_JK_FOR, pos);
        OB_TRY(parse_target(P, false, "in", &x->a));
        if (!accept_name(P, "in")) return fail_unexpected(P, "'in'");
        OB_TRY(parse_tuple(P, TUP_NO_COND, "recursive", false, &x->b));
        if (accept_name(P, "if")) OB_TRY(parse_expression(P, true, &x->e));
        if (accept_name(P, "recursive")) x->flags |= 1;
        OB_TRY(parse_inner(P, END_FOR, false, P->loops + 1, &x->c));
        if (is_name(cur(P), "else")) {
            advance(P);
            OB_TRY(parse_inner(P, END_FOR_ONLY, true, P->loops, &x->d));
        } else {
            advance(P);
        }
        *out = x;
    } else if (accept_name(P, "if")) {
        bool soft = P->soft;
        P->soft = true;
        NODE(x, OB_JK_IF, pos);
        ob_jnode *node = x;
        for (;;) {
            OB_TRY(parse_tuple(P, TUP_NO_COND, NULL, false, &node->a));
            OB_TRY(parse_body(P, END_IF, false, &node->b));
            if (accept_name(P, "elif")) {
                NODE(elif, OB_JK_IF, cur(P)->pos);
                node->c = elif;
                node = elif;
                continue;
            }
            if (accept_name(P, "else")) OB_TRY(parse_body(P, END_IF_ONLY, true, &node->c));
            else advance(P);
            break;
        }
        P->soft = soft;
        *out = x;
    } else if (accept_name(P, "set")) {
        ob_jnode *target = NULL;
        OB_TRY(parse_target(P, true, NULL, &target));
        if (accept(P, OB_JT_ASSIGN)) {
            NODE(x, OB_JK_SET, pos);
            x->a = target;
            OB_TRY(parse_tuple(P, TUP_FULL, NULL, false, &x->b));
            *out = x;
        } else {
            NODE(x, OB_JK_SETBLOCK, pos);
            x->a = target;
            OB_TRY(parse_filter(P, &x->b, false));
            OB_TRY(parse_inner(P, END_SET, true, 0, &x->c));
            *out = x;
        }
    } else if (accept_name(P, "macro")) {
        NODE(x, OB_JK_MACRO, pos);
        ob_jnode *name = NULL;
        OB_TRY(parse_name_target(P, &name));
        x->s = name->s;
        x->n = name->n;
        OB_TRY(parse_signature(P, x));
        OB_TRY(parse_inner(P, END_MACRO, true, 0, &x->c));
        x->flags = special_names(x->c);
        for (uint32_t i = 0; i < x->nw; i++) x->flags |= special_names(x->w[i]);
        *out = x;
    } else if (accept_name(P, "call")) {
        NODE(x, OB_JK_CALLBLOCK, pos);
        if (cur(P)->type == OB_JT_LPAREN) OB_TRY(parse_signature(P, x));
        OB_TRY(parse_expression(P, true, &x->a));
        if (x->a->k != OB_JK_CALL) return ob_jinja_syntax_error(P->t, pos, "expected call");
        OB_TRY(parse_inner(P, END_CALL, true, 0, &x->c));
        x->flags = special_names(x->c);
        *out = x;
    } else if (accept_name(P, "filter")) {
        NODE(x, OB_JK_FILTERBLOCK, pos);
        OB_TRY(parse_filter(P, &x->b, true));
        OB_TRY(parse_inner(P, END_FILTER, true, 0, &x->c));
        *out = x;
    } else if (accept_name(P, "with")) {
        NODE(x, OB_JK_WITH, pos);
        nvec names = {0}, vals = {0};
        while (cur(P)->type != OB_JT_BLOCK_END) {
            if (names.n) OB_TRY(expect(P, OB_JT_COMMA, "','"));
            ob_jnode *name = NULL, *val = NULL;
            OB_TRY(parse_target(P, false, NULL, &name));
            OB_TRY(expect(P, OB_JT_ASSIGN, "'='"));
            OB_TRY(parse_expression(P, true, &val));
            OB_TRY(vpush(P, &names, name));
            OB_TRY(vpush(P, &vals, val));
        }
        x->v = names.v;
        x->nv = names.n;
        x->w = vals.v;
        x->nw = vals.n;
        OB_TRY(parse_inner(P, END_WITH, true, P->loops, &x->c));
        *out = x;
    } else if (accept_name(P, "print")) {
        NODE(x, OB_JK_PRINT, pos);
        nvec items = {0};
        while (cur(P)->type != OB_JT_BLOCK_END) {
            if (items.n) OB_TRY(expect(P, OB_JT_COMMA, "','"));
            ob_jnode *e = NULL;
            OB_TRY(parse_expression(P, true, &e));
            OB_TRY(vpush(P, &items, e));
        }
        x->v = items.v;
        x->nv = items.n;
        *out = x;
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        bool brk = is_name(t, "break");
        if (P->loops == 0)
            return ob_jinja_syntax_error(P->t, pos, "'%s' outside of a loop", brk ? "break" : "continue");
        advance(P);
        NODE(x, brk ? OB_JK_BREAK : OB_JK_CONTINUE, pos);
        *out = x;
    } else if (accept_name(P, "generation")) {
        NODE(x, OB_JK_SCOPE, pos);
        OB_TRY(parse_inner(P, END_GENERATION, true, 0, &x->c));
        *out = x;
    } else {
        static const char *const unsupported[] = {"include", "import", "from", "extends", "block", "autoescape", "do", NULL};
        for (int i = 0; unsupported[i]; i++)
            if (is_name(t, unsupported[i]))
                return ob_jinja_syntax_error(P->t, pos, "the '%s' tag is not supported in chat templates", unsupported[i]);
        return ob_jinja_syntax_error(P->t, pos, "encountered unknown tag '%.*s'", (int)(t->n < 60 ? t->n : 60), t->s);
    }
    P->depth--;
    return 0;
}

static bool is_end_name(const ob_jtok *t, const char *const *names) {
    if (!names) return false;
    for (int i = 0; names[i]; i++)
        if (is_name(t, names[i])) return true;
    return false;
}

static int subparse(parser *P, const char *const *end_names, ob_jnode **out) {
    NODE(body, OB_JK_BODY, cur(P)->pos);
    nvec stmts = {0};
    for (;;) {
        const ob_jtok *t = cur(P);
        if (t->type == OB_JT_EOF) break;
        if (t->type == OB_JT_DATA) {
            NODE(x, OB_JK_DATA, t->pos);
            x->s = t->s;
            x->n = t->n;
            OB_TRY(vpush(P, &stmts, x));
            advance(P);
        } else if (t->type == OB_JT_VAR_BEGIN) {
            advance(P);
            NODE(x, OB_JK_PRINT, cur(P)->pos);
            ob_jnode *e = NULL;
            OB_TRY(parse_tuple(P, TUP_FULL, NULL, false, &e));
            OB_TRY(expect(P, OB_JT_VAR_END, "end of print statement"));
            ob_jnode **v = ob_arena_alloc(&P->t->arena, sizeof *v, 0);
            if (!v) return ob_err(OB_ERR_OOM, "chat template: out of memory");
            v[0] = e;
            x->v = v;
            x->nv = 1;
            OB_TRY(vpush(P, &stmts, x));
        } else if (t->type == OB_JT_BLOCK_BEGIN) {
            advance(P);
            if (is_end_name(cur(P), end_names)) break;
            ob_jnode *x = NULL;
            OB_TRY(parse_statement(P, &x));
            OB_TRY(expect(P, OB_JT_BLOCK_END, "end of statement block"));
            OB_TRY(vpush(P, &stmts, x));
        } else {
            return fail_unexpected(P, NULL);
        }
    }
    body->v = stmts.v;
    body->nv = stmts.n;
    *out = body;
    return 0;
}

int ob_jinja_parse(struct ob_chat_template *t, const ob_jtok *toks, size_t ntoks) {
    parser P;
    memset(&P, 0, sizeof P);
    P.t = t;
    P.tk = toks;
    P.n = ntoks;
    OB_TRY(subparse(&P, NULL, &t->root));
    if (cur(&P)->type != OB_JT_EOF) return fail_unexpected(&P, NULL);
    return 0;
}
