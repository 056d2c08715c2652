/*
 * toolcall.c - tool-call parsing of model answers (toolcall.h).
 *
 * JSON values are located with a small bracket scanner (strings and escapes
 * respected) and only then handed to jansson, so a call is accepted only
 * when its whole JSON parses; the scanner also tells where a call ends, which
 * jansson does not. Arguments given as an object are written back as compact
 * JSON (what OpenAI and llama-server send); arguments given as a string are
 * passed through as the model wrote them.
 */
#include "toolcall.h"

#include <jansson.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"

enum { TC_START = 0, TC_TEXT = 1, TC_CAPTURE = 2 };

static const char TAG_HERMES[] = "<tool_call>";
static const char TAG_HERMES_END[] = "</tool_call>";
static const char TAG_PYTHON[] = "<|python_tag|>";
static const char TAG_MISTRAL[] = "[TOOL_CALLS]";
static const char TAG_ARGS[] = "[ARGS]";
static const char TAG_CALL_ID[] = "[CALL_ID]";
static const char FENCE_JSON[] = "```json";

#define SLEN(s) (sizeof(s) - 1)

/* ---------------- format detection ---------------- */

ob_tc_format ob_tc_detect(const char *t) {
    if (!t) return OB_TC_GENERIC;
    if (strstr(t, TAG_HERMES)) return OB_TC_HERMES;
    if (strstr(t, TAG_MISTRAL)) return OB_TC_MISTRAL;
    /* Llama 3.x templates: header tokens plus either the ipython role or the
     * "parameters" shape they describe to the model */
    if (strstr(t, "<|start_header_id|>") && (strstr(t, "ipython") || strstr(t, TAG_PYTHON) || strstr(t, "\"parameters\"")))
        return OB_TC_LLAMA3;
    return OB_TC_GENERIC;
}

const char *ob_tc_format_name(ob_tc_format f) {
    switch (f) {
    case OB_TC_HERMES: return "hermes";
    case OB_TC_LLAMA3: return "llama3";
    case OB_TC_MISTRAL: return "mistral";
    default: return "generic";
    }
}

/* ---------------- helpers ---------------- */

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

static bool starts(const char *s, size_t n, size_t i, const char *lit, size_t ln) {
    return i <= n && n - i >= ln && memcmp(s + i, lit, ln) == 0;
}

static size_t find(const char *h, size_t hn, size_t from, const char *needle, size_t nn) {
    if (hn < nn) return (size_t)-1;
    for (size_t i = from; i + nn <= hn; i++)
        if (h[i] == needle[0] && memcmp(h + i, needle, nn) == 0) return i;
    return (size_t)-1;
}

/* Length of the JSON object or array starting at s[0] ('{' or '['), found
 * by matching brackets outside strings; 0 when it does not close. */
static size_t json_span(const char *s, size_t n) {
    if (n == 0 || (s[0] != '{' && s[0] != '[')) return 0;
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        else if (c == '{' || c == '[') {
            if (++depth > 256) return 0; /* deeper than any real call; jansson would refuse too */
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return 0;
}

static json_t *load(const char *s, size_t n) { return json_loadb(s, n, 0, NULL); }

static void call_free(ob_tc_call *c) {
    ob_free(c->id);
    ob_free(c->name);
    ob_free(c->arguments);
    memset(c, 0, sizeof *c);
}

void ob_tc_result_free(ob_tc_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n_calls; i++) call_free(&r->calls[i]);
    ob_free(r->calls);
    ob_buf_free(&r->content);
    memset(r, 0, sizeof *r);
}

static int push_call(ob_tc_result *r, ob_tc_call *c) {
    ob_tc_call *nc = ob_realloc(r->calls, (size_t)(r->n_calls + 1) * sizeof *nc);
    if (!nc) {
        call_free(c);
        return ob_err(OB_ERR_OOM, "tool calls");
    }
    r->calls = nc;
    r->calls[r->n_calls++] = *c;
    return 0;
}

static char *dup_str(const char *s, size_t n) {
    char *d = ob_strndup(s, n);
    if (!d) ob_err(OB_ERR_OOM, "tool calls");
    return d;
}

/* A function name: non-empty, no control characters (NUL included). */
static bool plain_name(const char *s, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20) return false;
    return true;
}

/* Turn one JSON object into a call: {"name", "arguments"|"parameters", "id"?}
 * or OpenAI's {"type": "function", "function": {"name", "arguments"}, "id"?}.
 * Returns 1 and appends to r, 0 when o is not a call, <0 on OOM. */
static int call_from_json(json_t *o, ob_tc_result *r) {
    if (!json_is_object(o)) return 0;
    json_t *src = o, *fn = json_object_get(o, "function");
    if (json_is_object(fn)) src = fn;
    json_t *name = json_object_get(src, "name");
    if (!json_is_string(name) || !plain_name(json_string_value(name), json_string_length(name))) return 0;
    json_t *args = json_object_get(src, "arguments");
    if (!args) args = json_object_get(src, "parameters");
    ob_tc_call c = {0};
    if (!args || json_is_null(args)) {
        c.arguments = dup_str("{}", 2);
    } else if (json_is_string(args)) {
        c.arguments = dup_str(json_string_value(args), json_string_length(args));
    } else if (json_is_object(args) || json_is_array(args)) {
        char *t = json_dumps(args, JSON_COMPACT | JSON_REAL_PRECISION(15));
        if (t) {
            c.arguments = dup_str(t, strlen(t));
            free(t);
        }
    } else {
        return 0;
    }
    c.name = dup_str(json_string_value(name), json_string_length(name));
    json_t *id = json_object_get(o, "id");
    if (json_is_string(id) && !plain_name(json_string_value(id), json_string_length(id))) id = NULL;
    if (json_is_string(id)) c.id = dup_str(json_string_value(id), json_string_length(id));
    if (!c.arguments || !c.name || (json_is_string(id) && !c.id)) {
        call_free(&c);
        return ob_err(OB_ERR_OOM, "tool calls");
    }
    OB_TRY(push_call(r, &c));
    return 1;
}

/* Calls from one JSON value: a call, an array of calls, {"tool_call": call}
 * or {"tool_calls": [calls]}. All or nothing: 1 when every element is a
 * call (appended), 0 when any is not (r unchanged), <0 on OOM. */
static int calls_from_json(json_t *v, ob_tc_result *r) {
    int before = r->n_calls, rc = 0;
    if (json_is_object(v)) {
        json_t *one = json_object_get(v, "tool_call"), *many = json_object_get(v, "tool_calls");
        if (json_is_object(one) && json_object_size(v) == 1) return calls_from_json(one, r);
        if (json_is_array(many) && json_object_size(v) == 1) return calls_from_json(many, r);
        return call_from_json(v, r);
    }
    if (!json_is_array(v) || json_array_size(v) == 0) return 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        rc = call_from_json(json_array_get(v, i), r);
        if (rc <= 0) break;
    }
    if (rc > 0) return 1;
    while (r->n_calls > before) call_free(&r->calls[--r->n_calls]);
    return rc;
}

/* Parse the JSON value at s[i] (after whitespace) as calls. On success
 * returns 1 and sets *end past the value. */
static int json_calls_at(const char *s, size_t n, size_t i, ob_tc_result *r, size_t *end) {
    i = skip_ws(s, n, i);
    size_t span = i < n ? json_span(s + i, n - i) : 0;
    if (!span) return 0;
    json_t *v = load(s + i, span);
    if (!v) return 0;
    int rc = calls_from_json(v, r);
    json_decref(v);
    if (rc > 0) *end = i + span;
    return rc;
}

/* ---------------- XML-style calls inside <tool_call> ---------------- */

static const char FN_OPEN[] = "<function=";
static const char FN_CLOSE[] = "</function>";
static const char PARAM_OPEN[] = "<parameter=";
static const char PARAM_CLOSE[] = "</parameter>";
static const char KEY_OPEN[] = "<arg_key>";
static const char KEY_CLOSE[] = "</arg_key>";
static const char VAL_OPEN[] = "<arg_value>";
static const char VAL_CLOSE[] = "</arg_value>";

/* A parameter value as the model wrote it: JSON when it parses as JSON (a
 * number, true, an object, ...), else the text as a string. Without the
 * tool's schema a string that looks like a number becomes a number; that is
 * the one guess this makes. NULL when the text is not valid UTF-8. */
static json_t *xml_value(const char *v, size_t n) {
    json_t *j = json_loadb(v, n, JSON_DECODE_ANY, NULL);
    return j ? j : json_stringn(v, n);
}

/* Add key=value to args; false when either is unusable (not UTF-8, empty key). */
static bool xml_arg(json_t *args, const char *k, size_t kn, const char *v, size_t vn) {
    if (kn == 0 || !ob_utf8_valid(k, kn)) return false;
    json_t *val = xml_value(v, vn);
    return val && json_object_setn_new(args, k, kn, val) == 0;
}

/* The body of a <tool_call> in one of the XML styles, starting at s[i]:
 *   Qwen3-Coder, Qwen3.5:  <function=NAME> (<parameter=K>\nVALUE\n</parameter>)* </function>
 *   GLM-4.5/4.6:           NAME (<arg_key>K</arg_key> <arg_value>V</arg_value>)*
 * Returns 1 with the call added and *end after it, 0 when it is neither. */
static int xml_call_at(const char *s, size_t n, size_t i, ob_tc_result *r, size_t *end) {
    i = skip_ws(s, n, i);
    json_t *args = json_object();
    const char *name = NULL;
    size_t name_len = 0;
    bool ok = args != NULL;
    if (ok && starts(s, n, i, FN_OPEN, SLEN(FN_OPEN))) {
        size_t a = i + SLEN(FN_OPEN), b = a;
        while (b < n && s[b] != '>' && s[b] != '\n') b++;
        ok = b < n && s[b] == '>' && b > a;
        name = s + a, name_len = b - a;
        i = b + 1;
        while (ok) {
            i = skip_ws(s, n, i);
            if (starts(s, n, i, FN_CLOSE, SLEN(FN_CLOSE))) {
                i += SLEN(FN_CLOSE);
                break;
            }
            if (!starts(s, n, i, PARAM_OPEN, SLEN(PARAM_OPEN))) {
                ok = false;
                break;
            }
            size_t ka = i + SLEN(PARAM_OPEN), kb = ka;
            while (kb < n && s[kb] != '>' && s[kb] != '\n') kb++;
            size_t va = kb + 1;
            size_t vb = kb < n && s[kb] == '>' ? find(s, n, va, PARAM_CLOSE, SLEN(PARAM_CLOSE)) : (size_t)-1;
            if (vb == (size_t)-1) {
                ok = false;
                break;
            }
            i = vb + SLEN(PARAM_CLOSE);
            if (va < vb && s[va] == '\n') va++; /* the template's newlines around the value */
            if (vb > va && s[vb - 1] == '\n') vb--;
            ok = xml_arg(args, s + ka, kb - ka, s + va, vb - va);
        }
    } else if (ok) {
        size_t a = i, b = i;
        while (b < n && s[b] != '<' && s[b] != '\n' && s[b] != '{' && s[b] != '[') b++;
        size_t be = b;
        while (be > a && is_ws(s[be - 1])) be--;
        ok = be > a;
        for (size_t k = a; ok && k < be; k++) ok = !is_ws(s[k]) && s[k] != '"';
        name = s + a, name_len = be - a;
        i = b;
        size_t after_name = i;
        while (ok) {
            size_t j = skip_ws(s, n, i);
            if (!starts(s, n, j, KEY_OPEN, SLEN(KEY_OPEN))) break;
            size_t ka = j + SLEN(KEY_OPEN), kb = find(s, n, ka, KEY_CLOSE, SLEN(KEY_CLOSE));
            if (kb == (size_t)-1) {
                ok = false;
                break;
            }
            size_t va = skip_ws(s, n, kb + SLEN(KEY_CLOSE));
            if (!starts(s, n, va, VAL_OPEN, SLEN(VAL_OPEN))) {
                ok = false;
                break;
            }
            va += SLEN(VAL_OPEN);
            size_t vb = find(s, n, va, VAL_CLOSE, SLEN(VAL_CLOSE));
            if (vb == (size_t)-1) {
                ok = false;
                break;
            }
            i = vb + SLEN(VAL_CLOSE);
            ok = xml_arg(args, s + ka, kb - ka, s + va, vb - va);
        }
        /* a bare name is a GLM call only when the tag closes right after it */
        if (ok && i == after_name && !starts(s, n, skip_ws(s, n, i), TAG_HERMES_END, SLEN(TAG_HERMES_END))) ok = false;
    }
    int rc = 0;
    if (ok && name_len > 0 && ob_utf8_valid(name, name_len)) {
        json_t *o = json_pack("{s:s%, s:O}", "name", name, name_len, "arguments", args);
        rc = o ? call_from_json(o, r) : ob_err(OB_ERR_OOM, "tool calls");
        json_decref(o);
        if (rc > 0) *end = i;
    }
    json_decref(args);
    return rc;
}

/* Append text with its ends trimmed, separated from earlier content by a newline. */
static int add_content(ob_tc_result *r, const char *s, size_t n) {
    while (n > 0 && is_ws(s[0])) s++, n--;
    while (n > 0 && is_ws(s[n - 1])) n--;
    if (n == 0) return 0;
    if (r->content.len) OB_TRY(ob_buf_append(&r->content, "\n", 1));
    return ob_buf_append(&r->content, s, n);
}

/* ---------------- the formats ---------------- */

/* The whole answer is JSON calls (optionally fenced): 1 with calls added. */
static int parse_json_only(const char *s, size_t n, ob_tc_result *r) {
    size_t i = skip_ws(s, n, 0), end = 0;
    bool fenced = false;
    if (starts(s, n, i, FENCE_JSON, SLEN(FENCE_JSON))) {
        fenced = true;
        i += SLEN(FENCE_JSON);
    }
    int before = r->n_calls, rc = 0;
    for (;;) {
        rc = json_calls_at(s, n, i, r, &end);
        if (rc <= 0) break;
        /* Llama 3 separates several calls with ';' */
        i = skip_ws(s, n, end);
        if (i < n && s[i] == ';') i++;
        i = skip_ws(s, n, i);
        if (i >= n || (s[i] != '{' && s[i] != '[')) break;
    }
    if (rc < 0) return rc;
    if (r->n_calls == before) return 0;
    if (fenced && starts(s, n, i, "```", 3)) i = skip_ws(s, n, i + 3);
    if (i < n) { /* text after the JSON: not a pure call answer */
        while (r->n_calls > before) call_free(&r->calls[--r->n_calls]);
        return 0;
    }
    return 1;
}

/* <tool_call>JSON</tool_call>, any number, text around them is content. */
static int parse_hermes(const char *s, size_t n, ob_tc_result *r) {
    size_t pos = 0;
    ob_buf text = {0};
    int rc = 0;
    for (;;) {
        size_t p = find(s, n, pos, TAG_HERMES, SLEN(TAG_HERMES));
        if (p == (size_t)-1) break;
        size_t end = 0, q = p + SLEN(TAG_HERMES);
        int before = r->n_calls, got = json_calls_at(s, n, q, r, &end);
        if (got == 0) got = xml_call_at(s, n, q, r, &end);
        if (got < 0) {
            rc = got;
            break;
        }
        if (got > 0) {
            end = skip_ws(s, n, end);
            if (starts(s, n, end, TAG_HERMES_END, SLEN(TAG_HERMES_END))) end += SLEN(TAG_HERMES_END);
            else if (end < n) got = 0; /* text after the JSON inside the tag: keep it all as content */
            while (!got && r->n_calls > before) call_free(&r->calls[--r->n_calls]);
        }
        if (got > 0) {
            if ((rc = ob_buf_append(&text, s + pos, p - pos)) < 0) break;
            if ((rc = add_content(r, text.data ? text.data : "", text.len)) < 0) break;
            ob_buf_clear(&text);
            pos = end;
        } else {
            if ((rc = ob_buf_append(&text, s + pos, q - pos)) < 0) break;
            pos = q;
        }
    }
    if (rc == 0) rc = ob_buf_append(&text, s + pos, n - pos);
    if (rc == 0) rc = add_content(r, text.data ? text.data : "", text.len);
    ob_buf_free(&text);
    return rc;
}

/* [TOOL_CALLS] then a JSON array, or name[ARGS]{...} repeated. */
static int parse_mistral_after(const char *s, size_t n, size_t i, ob_tc_result *r, size_t *end) {
    i = skip_ws(s, n, i);
    if (i < n && (s[i] == '[' || s[i] == '{')) return json_calls_at(s, n, i, r, end);
    int before = r->n_calls;
    while (i < n) {
        size_t a = find(s, n, i, TAG_ARGS, SLEN(TAG_ARGS));
        if (a == (size_t)-1) break;
        size_t name_end = a, c = find(s, a, i, TAG_CALL_ID, SLEN(TAG_CALL_ID));
        if (c != (size_t)-1) name_end = c;
        size_t ns = skip_ws(s, name_end, i), ne = name_end;
        while (ne > ns && is_ws(s[ne - 1])) ne--;
        bool name_ok = ne > ns;
        for (size_t k = ns; k < ne; k++)
            if (s[k] == '[' || s[k] == '{' || s[k] == '"' || is_ws(s[k])) name_ok = false;
        if (name_ok && !ob_utf8_valid(s + ns, ne - ns)) name_ok = false; /* JSON strings are UTF-8 */
        size_t q = skip_ws(s, n, a + SLEN(TAG_ARGS));
        size_t span = q < n ? json_span(s + q, n - q) : 0;
        json_t *args = (name_ok && span) ? load(s + q, span) : NULL;
        if (!json_is_object(args)) {
            json_decref(args);
            break;
        }
        json_t *o = json_pack("{s:s%, s:o}", "name", s + ns, ne - ns, "arguments", args);
        int rc = o ? call_from_json(o, r) : ob_err(OB_ERR_OOM, "tool calls");
        json_decref(o);
        if (rc < 0) return rc;
        if (rc == 0) break;
        i = q + span;
        *end = i;
        i = skip_ws(s, n, i);
        if (starts(s, n, i, TAG_MISTRAL, SLEN(TAG_MISTRAL))) i += SLEN(TAG_MISTRAL);
    }
    return r->n_calls > before;
}

/* A marker followed by calls (Mistral, Llama 3's python tag): content before
 * the marker, calls after it. 1 when found. */
static int parse_marker(const char *s, size_t n, const char *tag, size_t tn, ob_tc_result *r) {
    size_t p = find(s, n, 0, tag, tn);
    if (p == (size_t)-1) return 0;
    int before = r->n_calls;
    size_t end = 0;
    int rc = tag == TAG_MISTRAL ? parse_mistral_after(s, n, p + tn, r, &end) : 0;
    if (tag != TAG_MISTRAL) {
        ob_tc_result tmp = {0};
        rc = parse_json_only(s + p + tn, n - p - tn, &tmp);
        if (rc > 0) {
            for (int k = 0; k < tmp.n_calls && rc > 0; k++) {
                if (push_call(r, &tmp.calls[k]) < 0) rc = OB_ERR_OOM; /* push_call freed the call */
                memset(&tmp.calls[k], 0, sizeof tmp.calls[k]);
            }
            end = n;
        }
        ob_tc_result_free(&tmp);
    }
    if (rc <= 0) {
        while (r->n_calls > before) call_free(&r->calls[--r->n_calls]);
        return rc;
    }
    OB_TRY(add_content(r, s, p));
    OB_TRY(add_content(r, s + end, n - end));
    return 1;
}

int ob_tc_parse(ob_tc_format f, const char *text, size_t len, ob_tc_result *out) {
    memset(out, 0, sizeof *out);
    const char *s = text ? text : "";
    int rc = 0;
    bool hermes = find(s, len, 0, TAG_HERMES, SLEN(TAG_HERMES)) != (size_t)-1;
    if (hermes && (f == OB_TC_HERMES || f == OB_TC_GENERIC)) {
        OB_TRY(parse_hermes(s, len, out));
        if (out->n_calls > 0) return 0;
        ob_buf_clear(&out->content);
    }
    if (f == OB_TC_MISTRAL || f == OB_TC_GENERIC) {
        if ((rc = parse_marker(s, len, TAG_MISTRAL, SLEN(TAG_MISTRAL), out)) != 0) return rc < 0 ? rc : 0;
    }
    if (f == OB_TC_LLAMA3 || f == OB_TC_GENERIC) {
        if ((rc = parse_marker(s, len, TAG_PYTHON, SLEN(TAG_PYTHON), out)) != 0) return rc < 0 ? rc : 0;
    }
    /* generic fallback for every format: the answer is nothing but calls */
    if ((rc = parse_json_only(s, len, out)) != 0) return rc < 0 ? rc : 0;
    /* Mistral without its (control-token) marker: name[ARGS]{...} */
    if (f == OB_TC_MISTRAL) {
        size_t end = 0;
        if ((rc = parse_mistral_after(s, len, 0, out, &end)) < 0) return rc;
        if (rc > 0 && skip_ws(s, len, end) == len) return 0;
        while (out->n_calls > 0) call_free(&out->calls[--out->n_calls]);
    }
    return ob_buf_append(&out->content, s, len);
}

/* ---------------- streaming ---------------- */

void ob_tc_stream_init(ob_tc_stream *s, ob_tc_format f) {
    memset(s, 0, sizeof *s);
    s->fmt = f;
    s->state = TC_START;
}

void ob_tc_stream_free(ob_tc_stream *s) { ob_buf_free(&s->hold); }

/* The tags a format can start a call with anywhere in the text. */
static int tags_of(ob_tc_format f, const char **tags, size_t *lens) {
    int k = 0;
    if (f == OB_TC_HERMES || f == OB_TC_GENERIC) tags[k] = TAG_HERMES, lens[k++] = SLEN(TAG_HERMES);
    if (f == OB_TC_MISTRAL || f == OB_TC_GENERIC) tags[k] = TAG_MISTRAL, lens[k++] = SLEN(TAG_MISTRAL);
    if (f == OB_TC_LLAMA3 || f == OB_TC_GENERIC) tags[k] = TAG_PYTHON, lens[k++] = SLEN(TAG_PYTHON);
    return k;
}

static int release(ob_tc_stream *s, size_t k, ob_buf *content) {
    if (k == 0) return 0;
    OB_TRY(ob_buf_append(content, s->hold.data, k));
    ob_buf_consume(&s->hold, k);
    s->emitted = true;
    return 0;
}

int ob_tc_stream_push(ob_tc_stream *s, const char *text, size_t len, ob_buf *content) {
    OB_TRY(ob_buf_append(&s->hold, text, len));
    const char *tags[3];
    size_t lens[3];
    int nt = tags_of(s->fmt, tags, lens);
    for (;;) {
        const char *h = s->hold.data ? s->hold.data : "";
        size_t n = s->hold.len;
        if (s->state == TC_CAPTURE) return 0;
        if (s->state == TC_START) {
            size_t i = skip_ws(h, n, 0);
            if (i == n) return 0; /* only whitespace so far */
            if (h[i] == '{' || h[i] == '[' || starts(h, n, i, FENCE_JSON, SLEN(FENCE_JSON))) {
                s->state = TC_CAPTURE;
                return 0;
            }
            if (n - i < SLEN(FENCE_JSON) && memcmp(h + i, FENCE_JSON, n - i) == 0) return 0; /* may become ```json */
            s->state = TC_TEXT;
            continue;
        }
        /* TC_TEXT: release up to the first tag, keeping a possible tag start and trailing whitespace */
        size_t first = (size_t)-1;
        for (int t = 0; t < nt; t++) {
            size_t p = find(h, n, 0, tags[t], lens[t]);
            if (p < first) first = p;
        }
        size_t end = n;
        if (first != (size_t)-1) {
            end = first;
        } else {
            for (int t = 0; t < nt; t++) {
                size_t kmax = lens[t] - 1 < n ? lens[t] - 1 : n;
                for (size_t k = kmax; k > 0; k--)
                    if (memcmp(h + n - k, tags[t], k) == 0) {
                        if (n - k < end) end = n - k;
                        break;
                    }
            }
        }
        while (end > 0 && is_ws(h[end - 1])) end--;
        OB_TRY(release(s, end, content));
        if (first != (size_t)-1) s->state = TC_CAPTURE;
        return 0;
    }
}

int ob_tc_stream_finish(ob_tc_stream *s, ob_buf *content, ob_tc_result *calls) {
    memset(calls, 0, sizeof *calls);
    if (s->state != TC_CAPTURE) return release(s, s->hold.len, content);
    OB_TRY(ob_tc_parse(s->fmt, s->hold.data, s->hold.len, calls));
    if (calls->n_calls == 0) {
        ob_buf_clear(&calls->content);
        return release(s, s->hold.len, content);
    }
    if (calls->content.len) {
        if (s->emitted) OB_TRY(ob_buf_append(content, "\n", 1));
        OB_TRY(ob_buf_append(content, calls->content.data, calls->content.len));
    }
    ob_buf_clear(&calls->content);
    ob_buf_clear(&s->hold);
    return 0;
}
