/*
 * test_chat.c - chat templates: conformance with Python's jinja2 on real
 * templates, and unit tests of the interpreter.
 *
 * Conformance: tests/data/chat/manifest.json lists every real template
 * (tests/data/chat/templates) and conversation (tests/data/chat/cases) that
 * scripts/gen_chat_fixtures.py rendered with jinja2 under transformers'
 * settings. Each pair must give the same bytes here; where Python raised,
 * we must fail too, and with raise_exception's own message when the
 * template raised on purpose.
 *
 * Unit tests pin down the rules the fixtures exercise only in passing: how
 * values print, filters, scoping, whitespace control, error messages that
 * name lines, and the limits that stop hostile templates. Expected strings
 * below were checked against jinja2 3.1.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat.h"
#include "core/mem.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len) *len = (size_t)n;
    }
    return buf;
}

static struct tm fixed_now(void) {
    struct tm t;
    int rc = ob_chat_parse_time("2026-01-15", &t);
    (void)rc;
    return t;
}

/* Render src with variables given as JSON text; returns a malloc'd string
 * or NULL (then *status holds the error). */
static char *render_opts(const char *src, const char *vars_json, const ob_chat_render_opts *opts, int *status) {
    ob_chat_template *t = NULL;
    *status = ob_chat_template_parse(src, strlen(src), &t);
    if (*status < 0) return NULL;
    json_error_t je;
    json_t *vars = json_loads(vars_json ? vars_json : "{}", 0, &je);
    if (!vars) {
        fprintf(stderr, "  bad test JSON: %s\n", je.text);
        ob_chat_template_free(t);
        *status = OB_ERR_INVALID_ARG;
        return NULL;
    }
    char *out = NULL;
    size_t n = 0;
    *status = ob_chat_template_render(t, vars, opts, &out, &n);
    json_decref(vars);
    ob_chat_template_free(t);
    if (*status < 0) return NULL;
    char *copy = malloc(n + 1);
    memcpy(copy, out, n + 1);
    ob_free(out);
    return copy;
}

static char *render(const char *src, const char *vars_json, int *status) {
    struct tm now = fixed_now();
    ob_chat_render_opts o = {0};
    o.now = &now;
    return render_opts(src, vars_json, &o, status);
}

/* Check that src renders to want (vars may be NULL). */
#define CHECK_RENDER(src, vars, want)                                                              \
    do {                                                                                           \
        int st_;                                                                                   \
        char *got_ = render((src), (vars), &st_);                                                  \
        CHECK_MSG(got_ && strcmp(got_, (want)) == 0, "template %s\n    want [%s]\n    got  [%s] %s", \
                  (src), (want), got_ ? got_ : "(error)", got_ ? "" : ob_last_error());            \
        free(got_);                                                                                \
    } while (0)

/* Check that src fails with `status` and a message containing `part`. */
#define CHECK_FAILS(src, vars, status, part)                                                       \
    do {                                                                                           \
        int st_;                                                                                   \
        char *got_ = render((src), (vars), &st_);                                                  \
        CHECK_MSG(!got_ && st_ == (status) && strstr(ob_last_error(), (part)),                     \
                  "template %s: want status %d with \"%s\", got %d \"%s\" [%s]", (src), (status),   \
                  (part), st_, ob_last_error(), got_ ? got_ : "");                                 \
        free(got_);                                                                                \
    } while (0)

/* ---------------------------------------------------------------- conformance */

static int render_case(const ob_chat_template *t, const json_t *tinfo, const json_t *conv, char **out, size_t *n) {
    const char *bos = json_string_value(json_object_get(tinfo, "bos_token"));
    const char *eos = json_string_value(json_object_get(tinfo, "eos_token"));
    json_t *ctx = NULL;
    int rc = ob_chat_context_build(conv, bos, eos, &ctx);
    if (rc < 0) return rc;
    struct tm now = fixed_now();
    ob_chat_render_opts o = {0};
    o.now = &now;
    rc = ob_chat_template_render(t, ctx, &o, out, n);
    json_decref(ctx);
    return rc;
}

TEST(chat_conformance_with_jinja2) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/chat", OB_SOURCE_DIR);
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_error_t je;
    json_t *m = json_load_file(path, 0, &je);
    CHECK_MSG(m != NULL, "%s: %s", path, je.text);
    if (!m) return;
    size_t ti;
    json_t *tinfo;
    int total = 0, matched = 0, families = 0;
    json_array_foreach(json_object_get(m, "templates"), ti, tinfo) {
        const char *name = json_string_value(json_object_get(tinfo, "name"));
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(json_object_get(tinfo, "template")));
        size_t slen;
        char *src = read_text(path, &slen);
        CHECK_MSG(src != NULL, "cannot read %s", path);
        if (!src) continue;
        ob_chat_template *t = NULL;
        int rc = ob_chat_template_parse(src, slen, &t);
        CHECK_MSG(rc == 0, "%s: %s", name, ob_last_error());
        free(src);
        if (rc < 0) continue;
        int n_ok = 0, n = 0;
        size_t ci;
        json_t *c;
        json_array_foreach(json_object_get(tinfo, "cases"), ci, c) {
            const char *cname = json_string_value(json_object_get(c, "case"));
            const char *result = json_string_value(json_object_get(c, "result"));
            snprintf(path, sizeof path, "%s/cases/%s.json", dir, cname);
            json_t *conv = json_load_file(path, 0, &je);
            CHECK_MSG(conv != NULL, "%s: %s", path, je.text);
            if (!conv) continue;
            char *out = NULL;
            size_t outlen = 0;
            rc = render_case(t, tinfo, conv, &out, &outlen);
            bool ok = false;
            if (!strcmp(result, "ok")) {
                snprintf(path, sizeof path, "%s/%s", dir, json_string_value(json_object_get(c, "expected")));
                size_t elen = 0;
                char *exp = read_text(path, &elen);
                ok = rc == 0 && exp && outlen == elen && memcmp(out, exp, elen) == 0;
                if (!ok) {
                    size_t at = 0;
                    while (rc == 0 && exp && at < outlen && at < elen && out[at] == exp[at]) at++;
                    fprintf(stderr, "  MISMATCH %s / %s: %s at byte %zu\n", name, cname,
                            rc < 0 ? ob_last_error() : "output differs", at);
                    if (rc == 0 && exp)
                        fprintf(stderr, "    ours: [%.80s]\n    want: [%.80s]\n", out + (at > 20 ? at - 20 : 0),
                                exp + (at > 20 ? at - 20 : 0));
                }
                free(exp);
            } else {
                /* Python failed: so must we; a deliberate raise_exception
                 * must come back as OB_ERR_INVALID_ARG with its message. */
                const char *msg = json_string_value(json_object_get(c, "message"));
                const char *text = strstr(msg, ": ");
                ok = rc < 0;
                if (!strcmp(result, "raise"))
                    ok = rc == OB_ERR_INVALID_ARG && text && strstr(ob_last_error(), text + 2) != NULL;
                if (!ok) fprintf(stderr, "  %s / %s: Python failed (%s) but we gave %d [%s]\n", name, cname, msg, rc, ob_last_error());
            }
            n++;
            n_ok += ok;
            ob_free(out);
            json_decref(conv);
        }
        fprintf(stderr, "  %-26s %-24s %2d/%2d\n", name, json_string_value(json_object_get(tinfo, "family")), n_ok, n);
        CHECK_MSG(n_ok == n, "%s: %d of %d cases differ from jinja2", name, n - n_ok, n);
        total += n;
        matched += n_ok;
        families++;
        ob_chat_template_free(t);
    }
    fprintf(stderr, "  conformance: %d templates, %d/%d cases identical to jinja2\n", families, matched, total);
    CHECK(families >= 12);
    json_decref(m);
}

/* ---------------------------------------------------------------- printing */

TEST(chat_prints_like_python) {
    CHECK_RENDER("{{ none }} {{ true }} {{ false }} {{ 42 }} {{ -7 }}", NULL, "None True False 42 -7");
    CHECK_RENDER("{{ [1, 'a', none, true, 1.5] }}", NULL, "[1, 'a', None, True, 1.5]");
    CHECK_RENDER("{{ {'a': 1, 'b': [none], 'c': {'d': false}} }}", NULL, "{'a': 1, 'b': [None], 'c': {'d': False}}");
    CHECK_RENDER("{{ (1,) }} {{ (1, 2) }} {{ () }} {{ [] }} {{ {} }}", NULL, "(1,) (1, 2) () [] {}");
    /* repr quoting: ' unless the text has ' and no " */
    CHECK_RENDER("{{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}", NULL, "[\"it's\", 'say \"hi\"', 'both \\' \"']");
    CHECK_RENDER("{{ ['\\n\\t\\\\', '\\x01\\x7f', 'é\\u200b😀'] }}", NULL, "['\\n\\t\\\\', '\\x01\\x7f', 'é\\u200b😀']");
    /* floats are repr(): shortest round trip, exponent outside 1e-4..1e16 */
    CHECK_RENDER("{{ 1.0 }} {{ 0.1 }} {{ 0.1 + 0.2 }} {{ 1e-05 }} {{ 0.0001 }} {{ 1e16 }} {{ 1e15 }} {{ -0.0 }}", NULL,
                 "1.0 0.1 0.30000000000000004 1e-05 0.0001 1e+16 1000000000000000.0 -0.0");
    CHECK_RENDER("{{ 1.5e300 * 1e10 }} {{ 2 ** 0.5 }} {{ 1 / 3 }} {{ 7 / 2 }}", NULL,
                 "inf 1.4142135623730951 0.3333333333333333 3.5");
    CHECK_RENDER("{{ namespace(a=1) }}", NULL, "<Namespace {'a': 1}>");
    CHECK_RENDER("{{ foo }}|{{ [foo] }}|{{ foo ~ 'x' }}", NULL, "|[Undefined]|x");
    /* JSON input keeps its key order and types */
    CHECK_RENDER("{{ m }} {{ m.b }} {{ m.f }}", "{\"m\": {\"b\": [1, 2.0, null], \"a\": \"x\", \"f\": 1.25}}",
                 "{'b': [1, 2.0, None], 'a': 'x', 'f': 1.25} [1, 2.0, None] 1.25");
}

TEST(chat_arithmetic_like_python) {
    CHECK_RENDER("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }}", NULL,
                 "3 -4 2 -2 1024 0.5 64");
    CHECK_RENDER("{{ 10.5 % 3 }} {{ -10.5 % 3 }} {{ 7.0 // 2 }} {{ -7.5 // 2 }} {{ 1 + 1.0 }} {{ true + 1 }}", NULL,
                 "1.5 1.5 3.0 -4.0 2.0 2");
    CHECK_RENDER("{{ 'ab' * 3 }} {{ [0] * 2 }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'a' ~ 1 ~ none }}", NULL,
                 "ababab [0, 0] [1, 2] (1, 2) a1None");
    CHECK_RENDER("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", NULL,
                 "True True True True False");
    CHECK_RENDER("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ x in [1] }}", NULL,
                 "True True True True False");
    CHECK_RENDER("{{ none or 'd' }} {{ 0 and 1 }} {{ 'x' if true }}|{{ 'x' if false }}|{{ 1 if 0 else 2 }}", NULL,
                 "d 0 x||2");
    CHECK_RENDER("{{ -1|abs }} {{ -(2) }} {{ not 0 }}", NULL, "1 -2 True");
    CHECK_FAILS("{{ 'a' + 1 }}", NULL, OB_ERR_FORMAT, "can only concatenate str (not \"int\") to str");
    CHECK_FAILS("{{ 1 / 0 }}", NULL, OB_ERR_FORMAT, "division by zero");
    CHECK_FAILS("{{ 1 < 'a' }}", NULL, OB_ERR_FORMAT, "'<' not supported between instances of 'int' and 'str'");
    CHECK_FAILS("{{ 2 ** 64 }}", NULL, OB_ERR_RANGE, "64 bits");
}

TEST(chat_strings_and_methods) {
    CHECK_RENDER("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|", NULL,
                 "a b|a|a | a|");
    CHECK_RENDER("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }}",
                 NULL, "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c']");
    CHECK_RENDER("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'héllo'.find('l') }} {{ 'aaa'.count('a') }}",
                 NULL, "True True 2 3");
    CHECK_RENDER("{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'ß'.upper() }} {{ 'ÉA'.lower() }}", NULL,
                 "Hello World Hello SS éa");
    CHECK_RENDER("{{ 'a-b'.replace('-', '+') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ '-'.join(['x', 'y']) }}", NULL,
                 "a+b bba x-y");
    CHECK_RENDER("{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'k=v'.partition('=') }}", NULL, "['a', 'b', 'c'] ('k', '=', 'v')");
    CHECK_RENDER("{{ '{} is {:>4}'.format('x', 7) }} {{ '{name}!'.format(name='hi') }} {{ '%s=%05.1f' % ('p', 3.14159) }}",
                 NULL, "x is    7 hi! p=003.1");
    CHECK_RENDER("{{ '{:.3}|{:,}|{:08.3f}|{!r}|{}'.format(1.0, 1234567, -3.14159, 'q', [1]) }} {{ '%#x|%e|%c' % (255, 12345.678, 65) }}",
                 NULL, "1.0|1,234,567|-003.142|'q'|[1] 0xff|1.234568e+04|A");
    CHECK_FAILS("{{ '{0}{}'.format(1, 2) }}", NULL, OB_ERR_FORMAT, "cannot switch from manual");
    CHECK_RENDER("{{ 'héllo'[1] }} {{ 'héllo'[1:3] }} {{ 'héllo'[::-1] }} {{ 'abc'[-1] }} {{ 'abc'[9] }}|", NULL,
                 "é él olléh c |");
    CHECK_RENDER("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys() | list }} {{ d.items() | list }}",
                 "{\"d\": {\"a\": 1}}", "1 None 0 ['a'] [('a', 1)]");
    CHECK_FAILS("{% set l = [1] %}{{ l.append(2) }}", NULL, OB_ERR_FORMAT, "unsafe");
    CHECK_FAILS("{{ d.update({}) }}", "{\"d\": {}}", OB_ERR_FORMAT, "unsafe");
}

TEST(chat_filters) {
    CHECK_RENDER("{{ '  x  '|trim }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hELLO wORLD'|capitalize }}|{{ \"they're a-b\"|title }}",
                 NULL, "x|AB|ab|Hello world|They're A-B");
    CHECK_RENDER("{{ [1, 2]|length }} {{ 'héllo'|length }} {{ foo|length }} {{ {'a': 1}|count }}", NULL, "2 5 0 1");
    CHECK_RENDER("{{ [1, 2, 3]|join(', ') }} {{ [1, 2]|first }} {{ [1, 2]|last }} {{ 'abc'|list }} {{ []|first }}|", NULL,
                 "1, 2, 3 1 2 ['a', 'b', 'c'] |");
    CHECK_RENDER("{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|d('n', true) }}", NULL,
                 "d  d n");
    CHECK_RENDER("{{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(reverse=true) }} {{ ['a', 'A', 'b']|unique|list }}",
                 NULL, "['A', 'b', 'c'] ['c', 'b', 'A'] ['a', 'b']");
    CHECK_RENDER("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|items|list }} {{ [3, 1, 2]|max }} {{ [3, 1, 2]|min }}",
                 NULL, "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)] 3 1");
    CHECK_RENDER("{{ l|map(attribute='n')|list }} {{ l|selectattr('n', 'odd')|map(attribute='n')|join }} "
                 "{{ l|rejectattr('n', 'equalto', 1)|list|length }} {{ [1, 2, 3, 4]|select('even')|list }} "
                 "{{ ['a']|map('upper')|list }} {{ [0, 1, none]|select|list }}",
                 "{\"l\": [{\"n\": 1}, {\"n\": 2}, {\"n\": 3}]}", "[1, 2, 3] 13 2 [2, 4] ['A'] [1]");
    CHECK_RENDER("{{ 3.7|int }} {{ '42'|int }} {{ 'x'|int }} {{ '4.5'|float }} {{ 2.5|round }} {{ 3.5|round }} "
                 "{{ 1.25|round(1) }} {{ 2.1|round(0, 'ceil') }} {{ 3|string ~ '!' }}",
                 NULL, "3 42 0 4.5 2.0 4.0 1.2 3.0 3!");
    CHECK_RENDER("{{ [1, 2, 3]|sum }} {{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ 'a b  c'|wordcount }} {{ 'a'|replace('a', 'b') }}",
                 NULL, "6 [[1, 2], [3, 4], [5]] 3 b");
    CHECK_RENDER("{{ 'a\\nb'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ '<b>'|e }}|{{ 1|safe }}|{{ '%d-%s'|format(1, 'x') }}",
                 NULL, "a\n    b|  a\n  b|&lt;b&gt;|1|1-x");
    CHECK_RENDER("{{ d|tojson }} {{ d|tojson(indent=2) }} {{ 'é\\n'|tojson }} {{ 'é'|tojson(ensure_ascii=true) }}",
                 "{\"d\": {\"a\": [1, 2.5]}}", "{\"a\": [1, 2.5]} {\n  \"a\": [\n    1,\n    2.5\n  ]\n} \"é\\n\" \"\\u00e9\"");
    CHECK_RENDER("{{ {'b': 1, 'a': none}|tojson(separators=(',', ':'), sort_keys=true) }} {{ [[], {}]|tojson(indent=1) }}",
                 NULL, "{\"a\":null,\"b\":1} [\n [],\n {}\n]");
    CHECK_FAILS("{{ x|tojson }}", NULL, OB_ERR_FORMAT, "not JSON serializable");
    CHECK_FAILS("{{ 1|nosuchfilter }}", NULL, OB_ERR_FORMAT, "no filter named 'nosuchfilter'");
    /* like jinja2, an unknown filter inside an if only fails when it runs */
    CHECK_RENDER("{% if false %}{{ 1|nosuchfilter }}{% endif %}ok", NULL, "ok");
}

TEST(chat_tests) {
    CHECK_RENDER("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} "
                 "{{ true is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ {} is mapping }} {{ [] is iterable }} "
                 "{{ 'a' is sequence }} {{ true is boolean }} {{ 1 is true }} {{ false is false }}",
                 NULL, "False True True True True True True True True True True True False True");
    CHECK_RENDER("{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 2 is eq 2 }} {{ 2 is ne 2 }} {{ 'a' is in 'cat' }} "
                 "{{ 'ab' is lower }} {{ range is callable }} {{ 2 is gt(1) }} {{ x is not defined }}",
                 NULL, "True True True True False True True True True True");
}

TEST(chat_loops_and_scopes) {
    CHECK_RENDER("{% for x in [5, 6, 7] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}"
                 "{{ loop.length }}|{% endfor %}",
                 NULL, "103TrueFalse3|212FalseFalse3|321FalseTrue3|");
    CHECK_RENDER("{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}", NULL,
                 "<1>2;1<2>3;2<3>;");
    CHECK_RENDER("{% for x in [] %}a{% else %}empty{% endfor %} {% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}/{{ loop.length }} {% endfor %}",
                 NULL, "empty 1/2 2/2 ");
    CHECK_RENDER("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}",
                 NULL, "02");
    CHECK_RENDER("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}{% for c in 'ab' %}{{ c }}{% endfor %}",
                 NULL, "a=1 b=2 ab");
    CHECK_RENDER("{% for i in range(3) %}{{ loop.cycle('x', 'y') }}{% endfor %} {% for x in foo %}never{% endfor %}", NULL,
                 "xyx ");
    /* a set inside a loop does not survive the iteration; namespace does */
    CHECK_RENDER("{% set n = 0 %}{% for i in range(3) %}{% set n = n + 1 %}{{ n }}{% endfor %}{{ n }}", NULL, "1110");
    CHECK_RENDER("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", NULL,
                 "3");
    CHECK_RENDER("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", NULL, "12(1, 2)");
    CHECK_RENDER("{% for x in [[1, [2]], [3, []]] recursive %}{{ x[0] if x[0] is number else x }}"
                 "{% if x[1] %}({{ loop(x[1:]) }}){% endif %}{% endfor %}",
                 NULL, "1(2)3");
    CHECK_RENDER("{% for i in [{'n': 'a', 'c': [{'n': 'b', 'c': []}]}, {'n': 'd', 'c': []}] recursive %}"
                 "{{ loop.depth }}{{ i.n }}{% if i.c %}[{{ loop(i.c) }}]{% endif %}{% endfor %}",
                 NULL, "1a[2b]1d");
    CHECK_RENDER("{% with a = 1 %}{{ a }}{% endwith %}{{ a }}|{% print 1, 2 %}", NULL, "1|12");
    CHECK_FAILS("{% for a, b in [1] %}{% endfor %}", NULL, OB_ERR_FORMAT, "cannot unpack non-iterable int object");
    CHECK_FAILS("{% for x in none %}{% endfor %}", NULL, OB_ERR_FORMAT, "'NoneType' object is not iterable");
}

TEST(chat_macros_calls_blocks) {
    CHECK_RENDER("{% macro f(a, b=a+1) %}{{ a }}-{{ b }}{% endmacro %}{{ f(1) }} {{ f(1, 5) }} {{ f(b=0, a=2) }}", NULL,
                 "1-2 1-5 2-0");
    CHECK_RENDER("{% macro f(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, k=3) }}", NULL, "(2,){'k': 3}");
    CHECK_RENDER("{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", NULL, "3210");
    CHECK_RENDER("{% macro m() %}{{ y }}{% endmacro %}{% set y = 5 %}{{ m() }}", NULL, "5");
    CHECK_RENDER("{% macro box(x) %}[{{ caller(x) }}]{% endmacro %}{% call(v) box(7) %}got {{ v }}{% endcall %}", NULL,
                 "[got 7]");
    CHECK_RENDER("{% set t %}a{{ 1 }}{% endset %}{{ t }}|{% set u | upper %}q{% endset %}{{ u }}|{% filter upper %}x{{ 'y' }}{% endfilter %}",
                 NULL, "a1|Q|XY");
    CHECK_RENDER("{% generation %}kept{% endgeneration %}", NULL, "kept");
    CHECK_RENDER("{% set j = joiner('+') %}{% for i in range(3) %}{{ j() }}{{ i }}{% endfor %} {{ dict(a=1) }}", NULL,
                 "0+1+2 {'a': 1}");
    CHECK_FAILS("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", NULL, OB_ERR_FORMAT, "takes not more than 1 argument");
    CHECK_FAILS("{% macro f(a) %}{% endmacro %}{{ f(b=2) }}", NULL, OB_ERR_FORMAT, "no keyword argument 'b'");
}

TEST(chat_whitespace_control) {
    /* trim_blocks drops the newline after a block tag; lstrip_blocks the
     * indentation before it; {{ }} keeps both */
    CHECK_RENDER("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n", NULL, "  x\n  y");
    CHECK_RENDER("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    CHECK_RENDER("a {{- ' x ' -}} b\n{{ 'c' }}", NULL, "a x b\nc");
    CHECK_RENDER("\t{%+ if true %}k{% endif +%}\nz", NULL, "\tk\nz");
    CHECK_RENDER("  {# comment #}\nx {#- gone #} y", NULL, "x y");
    CHECK_RENDER("{% raw %}{{ not parsed }}{% endraw %}|{% raw -%}  r  {%- endraw %}", NULL, "{{ not parsed }}|r");
    /* newlines are normalized and one trailing newline is dropped */
    CHECK_RENDER("a\r\nb\rc\n", NULL, "a\nb\nc");
    CHECK_RENDER("{{ 'a' }}\n\n", NULL, "a\n");
    /* Python whitespace, not just ASCII, is stripped by "-" */
    CHECK_RENDER("x\xc2\xa0\xe3\x80\x80{%- if true %}y{% endif %}", NULL, "xy");
}

TEST(chat_strftime_now) {
    CHECK_RENDER("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %B %-d %j %H:%M') }}|{{ strftime_now('%Y-%m-%d%z%Z%%') }}",
                 NULL, "15 Jan 2026|Thursday January 15 015 00:00|2026-01-15%");
    struct tm t;
    CHECK_OK(ob_chat_parse_time("2024-02-29T13:05:09", &t));
    CHECK_EQ_INT(t.tm_wday, 4); /* a Thursday */
    CHECK_EQ_INT(t.tm_yday, 59);
    CHECK(ob_chat_parse_time("2023-02-29", &t) < 0);
    CHECK(ob_chat_parse_time("2026-01-15x", &t) < 0);
    /* without a fixed time it is the current one: just check the shape */
    ob_chat_render_opts o = {0};
    int st;
    char *s = render_opts("{{ strftime_now('%Y') }}", NULL, &o, &st);
    CHECK(s && strlen(s) == 4 && s[0] == '2');
    free(s);
}

/* ---------------------------------------------------------------- errors and limits */

TEST(chat_errors_name_lines) {
    CHECK_FAILS("line 1\n{% if %}", NULL, OB_ERR_FORMAT, "syntax error at line 2, column 7");
    CHECK_FAILS("{{ 1 +\n}}", NULL, OB_ERR_FORMAT, "line 2");
    CHECK_FAILS("a\nb\n{% for x in y %}", NULL, OB_ERR_FORMAT, "line 3");
    CHECK_FAILS("{% endfor %}", NULL, OB_ERR_FORMAT, "unknown tag 'endfor'");
    CHECK_FAILS("{% include 'x' %}", NULL, OB_ERR_FORMAT, "not supported");
    CHECK_FAILS("{{ 'unterminated }}", NULL, OB_ERR_FORMAT, "unexpected char");
    CHECK_FAILS("{{ (1 }}", NULL, OB_ERR_FORMAT, "line 1");
    CHECK_FAILS("{% break %}", NULL, OB_ERR_FORMAT, "outside of a loop");
    CHECK_FAILS("{# open", NULL, OB_ERR_FORMAT, "missing end of comment");
    CHECK_FAILS("ok\n\n  {{ foo.bar }}", NULL, OB_ERR_FORMAT, "error at line 3, column 9: 'foo' is undefined");
    CHECK_FAILS("{{ d.x.y }}", "{\"d\": {}}", OB_ERR_FORMAT, "'dict object' has no attribute 'x'");
    CHECK_FAILS("\n{{ raise_exception('Conversation roles must alternate') }}", NULL, OB_ERR_INVALID_ARG,
                "line 2, column 4: raise_exception: Conversation roles must alternate");
    const char bad_utf8[] = "ok\n\xff";
    ob_chat_template *t = NULL;
    CHECK(ob_chat_template_parse(bad_utf8, sizeof bad_utf8 - 1, &t) == OB_ERR_FORMAT);
    CHECK(strstr(ob_last_error(), "line 2") && strstr(ob_last_error(), "UTF-8"));
}

TEST(chat_limits_stop_hostile_templates) {
    ob_chat_render_opts o = {0};
    int st;
    o.max_steps = 100000;
    char *s = render_opts("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &o, &st);
    CHECK(!s && st == OB_ERR_RANGE && strstr(ob_last_error(), "steps"));
    free(s);
    o.max_steps = 0;
    o.max_output = 1 << 20;
    s = render_opts("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", NULL, &o, &st);
    CHECK(!s && st == OB_ERR_RANGE && strstr(ob_last_error(), "output"));
    free(s);
    o.max_output = 0;
    o.max_memory = 8 << 20;
    s = render_opts("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", NULL, &o,
                    &st);
    CHECK(!s && st == OB_ERR_RANGE);
    free(s);
    o.max_memory = 0;
    s = render_opts("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, &o, &st);
    CHECK(!s && st == OB_ERR_RANGE && strstr(ob_last_error(), "levels deep"));
    free(s);
    CHECK_FAILS("{{ range(1000000)|length }}", NULL, OB_ERR_RANGE, "MAX_RANGE");
    CHECK_FAILS("{{ 'x' * 10000000000 }}", NULL, OB_ERR_RANGE, "too large");
    /* parse-time nesting */
    char deep[4000];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    CHECK_FAILS(deep, NULL, OB_ERR_FORMAT, "nested too deeply");
    k = 0;
    for (int i = 0; i < 300; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{%% if 1 %%}");
    CHECK_FAILS(deep, NULL, OB_ERR_FORMAT, "nested too deeply");
    /* a namespace that contains itself prints with an error, not a crash */
    CHECK_FAILS("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", NULL, OB_ERR_RANGE, "");
}

/* Every allocation may fail; each failure must come back as an error,
 * never a crash or (under ASan) a leak. */
TEST(chat_out_of_memory_is_clean) {
    const char *src = "{% macro m(x) %}<{{ x|upper }}>{% endmacro %}{% set ns = namespace(a=[]) %}"
                      "{% for msg in messages %}{{ m(msg.content) }}{{ msg|tojson }}{% set ns.a = ns.a + [loop.index] %}"
                      "{% endfor %}{{ ns.a }}{{ messages|map(attribute='role')|join(',') }}";
    const char *vars = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}]}";
    int st;
    char *want = render(src, vars, &st);
    CHECK(want != NULL);
    int failures = 0, successes = 0;
    for (long n = 1; n < 400; n++) {
        ob_mem_fail_after(n);
        char *got = render(src, vars, &st);
        ob_mem_fail_after(0);
        if (got) {
            CHECK(want && strcmp(got, want) == 0);
            successes++;
        } else {
            failures++;
        }
        free(got);
        if (successes > 3) break;
    }
    CHECK(failures >= 3);
    free(want);
}

static void *render_thread(void *arg) {
    const ob_chat_template *t = arg;
    json_t *vars = json_loads("{\"messages\": [{\"role\": \"user\", \"content\": \"héllo\"}], \"add_generation_prompt\": true}", 0, NULL);
    for (int i = 0; i < 200; i++) {
        char *out = NULL;
        size_t n = 0;
        if (ob_chat_template_render(t, vars, NULL, &out, &n) < 0 ||
            strcmp(out, "<|im_start|>user\nhéllo<|im_end|>\n<|im_start|>assistant\n") != 0) {
            ob_free(out);
            json_decref(vars);
            return (void *)1;
        }
        ob_free(out);
    }
    json_decref(vars);
    return NULL;
}

/* A parsed template is read-only: server threads render it concurrently. */
TEST(chat_template_is_shareable_between_threads) {
    ob_chat_template *t = NULL;
    CHECK_OK(ob_chat_template_parse(ob_chat_template_chatml(), strlen(ob_chat_template_chatml()), &t));
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, render_thread, t);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK(r == NULL);
    }
    ob_chat_template_free(t);
}

/* ---------------------------------------------------------------- context and ChatML */

TEST(chat_context_like_apply_chat_template) {
    json_t *req = json_loads("{\"messages\": [], \"enable_thinking\": false}", 0, NULL);
    json_t *ctx = NULL;
    CHECK_OK(ob_chat_context_build(req, "<s>", NULL, &ctx));
    CHECK(json_is_null(json_object_get(ctx, "tools")));
    CHECK(json_is_null(json_object_get(ctx, "documents")));
    CHECK(json_is_false(json_object_get(ctx, "add_generation_prompt")));
    CHECK(json_is_false(json_object_get(ctx, "enable_thinking")));
    CHECK_EQ_STR(json_string_value(json_object_get(ctx, "bos_token")), "<s>");
    CHECK(json_object_get(ctx, "eos_token") == NULL);
    /* tools is defined (null), so templates can tell "no tools" apart */
    ob_chat_template *t = NULL;
    const char *src = "{{ tools is defined }} {{ tools is none }} {{ documents }} {{ enable_thinking }}";
    CHECK_OK(ob_chat_template_parse(src, strlen(src), &t));
    char *out = NULL;
    size_t n;
    CHECK_OK(ob_chat_template_render(t, ctx, NULL, &out, &n));
    CHECK_EQ_STR(out, "True True None False");
    ob_free(out);
    ob_chat_template_free(t);
    json_decref(ctx);
    json_decref(req);
    req = json_loads("{\"messages\": 3}", 0, NULL);
    CHECK(ob_chat_context_build(req, NULL, NULL, &ctx) == OB_ERR_INVALID_ARG);
    json_decref(req);
}

TEST(chat_chatml_default) {
    const char *vars = "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
                       "[{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"image\"}, {\"type\": \"text\", \"text\": \"b\"}]}],"
                       " \"add_generation_prompt\": true}";
    CHECK_RENDER(ob_chat_template_chatml(), vars,
                 "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n");
}

/* ---------------------------------------------------------------- the CLI */

#ifdef OB_CLI_PATH
static int run_cli(const char *args, const char *input_json, char **out) {
    char in_path[] = "/tmp/ob_chat_in_XXXXXX", out_path[] = "/tmp/ob_chat_out_XXXXXX";
    int fi = mkstemp(in_path), fo = mkstemp(out_path);
    if (fi < 0 || fo < 0) return -1;
    FILE *f = fdopen(fi, "w");
    fputs(input_json, f);
    fclose(f);
    close(fo);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' template %s < '%s' > '%s' 2>/dev/null", OB_CLI_PATH, args, in_path, out_path);
    int rc = system(cmd);
    *out = read_text(out_path, NULL);
    unlink(in_path);
    unlink(out_path);
    return rc;
}

TEST(chat_cli_template_command) {
    char tpath[1200], cpath[1200], epath[1200];
    snprintf(tpath, sizeof tpath, "%s/tests/data/chat/templates/qwen3.jinja", OB_SOURCE_DIR);
    snprintf(cpath, sizeof cpath, "%s/tests/data/chat/cases/tool_calls.json", OB_SOURCE_DIR);
    snprintf(epath, sizeof epath, "%s/tests/data/chat/expected/qwen3/tool_calls.txt", OB_SOURCE_DIR);
    char *conv = read_text(cpath, NULL), *want = read_text(epath, NULL), *got = NULL;
    CHECK(conv && want);
    if (!conv || !want) return;
    char args[1400];
    snprintf(args, sizeof args, "--file '%s' --now 2026-01-15", tpath);
    CHECK_EQ_INT(run_cli(args, conv, &got), 0);
    CHECK(got && strcmp(got, want) == 0);
    free(got);
    free(want);
    free(conv);

    /* -m: the template and the BOS/EOS text come from the GGUF */
    char gguf[] = "/tmp/ob_chat_model_XXXXXX";
    int fd = mkstemp(gguf);
    close(fd);
    ob_gguf_writer *w = NULL;
    CHECK_OK(ob_gguf_writer_create(&w));
    snprintf(tpath, sizeof tpath, "%s/tests/data/chat/templates/llama-2-chat.jinja", OB_SOURCE_DIR);
    char *tsrc = read_text(tpath, NULL);
    const char *toks[] = {"<unk>", "<s>", "</s>"};
    CHECK_OK(ob_gguf_writer_set_str(w, "tokenizer.chat_template", tsrc ? tsrc : ""));
    CHECK_OK(ob_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3));
    CHECK_OK(ob_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
    CHECK_OK(ob_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2));
    CHECK_OK(ob_gguf_writer_write_file(w, gguf));
    ob_gguf_writer_free(w);
    free(tsrc);
    snprintf(cpath, sizeof cpath, "%s/tests/data/chat/cases/multi_turn.json", OB_SOURCE_DIR);
    snprintf(epath, sizeof epath, "%s/tests/data/chat/expected/llama-2-chat/multi_turn.txt", OB_SOURCE_DIR);
    conv = read_text(cpath, NULL);
    want = read_text(epath, NULL);
    snprintf(args, sizeof args, "-m '%s'", gguf);
    CHECK_EQ_INT(run_cli(args, conv ? conv : "{}", &got), 0);
    CHECK(got && want && strcmp(got, want) == 0);
    free(got);
    free(want);
    free(conv);
    /* a template error is exit status 1 */
    CHECK(run_cli("--chatml", "{\"messages\": 1}", &got) != 0);
    free(got);
    unlink(gguf);
}
#endif

int main(int argc, char **argv) { return test_main(argc, argv); }
