/*
 * chat.c - the public side of chat templates (chat.h): loading a template,
 * running a render with its limits, building the variables the way
 * transformers does, and the ChatML fallback.
 *
 * Loading normalizes the source exactly as jinja2's lexer does before it
 * tokenizes: "\r\n" and "\r" become "\n", and one trailing newline is
 * dropped (keep_trailing_newline is off in transformers). Template files
 * usually end with a newline that the GGUF copy of the same template lacks;
 * both render the same.
 */
#include "chat.h"

#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"
#include "jinja.h"

static const char g_chatml[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}\n"
    "{%- if message['content'] is string -%}\n"
    "{{- message['content'] -}}\n"
    "{%- elif message['content'] is iterable -%}\n"
    "{%- for part in message['content'] if part is mapping and part['type'] == 'text' -%}\n"
    "{{- part['text'] -}}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

const char *ob_chat_template_chatml(void) { return g_chatml; }

void ob_chat_template_free(ob_chat_template *t) {
    if (!t) return;
    ob_arena_free(&t->arena);
    ob_free(t);
}

/* Offset of the first byte that is not valid UTF-8, or len. */
static size_t utf8_bad_offset(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = ob_utf8_decode(s + i, len - i, &cp);
        if (k < 0) return i;
        i += (size_t)k;
    }
    return len;
}

int ob_chat_template_parse(const char *text, size_t len, ob_chat_template **out) {
    *out = NULL;
    if (!text && len) return ob_err(OB_ERR_INVALID_ARG, "chat template: no text");
    if (len > UINT32_MAX / 2) return ob_err(OB_ERR_RANGE, "chat template too large (%zu bytes)", len);
    ob_chat_template *t = ob_calloc(1, sizeof *t);
    if (!t) return ob_err(OB_ERR_OOM, "chat template: out of memory");
    ob_arena_init(&t->arena, 0, 0);
    char *src = ob_arena_alloc(&t->arena, len + 1, 1);
    if (!src) {
        ob_chat_template_free(t);
        return ob_err(OB_ERR_OOM, "chat template: out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else {
            src[n++] = text[i];
        }
    }
    if (n && src[n - 1] == '\n') n--;
    src[n] = '\0';
    t->src = src;
    t->len = n;
    size_t bad = utf8_bad_offset(src, n);
    if (bad < n) {
        int rc = ob_jinja_syntax_error(t, (uint32_t)bad, "invalid UTF-8");
        ob_chat_template_free(t);
        return rc;
    }
    ob_jtok *toks = NULL;
    size_t ntoks = 0;
    int rc = ob_jinja_lex(t, &toks, &ntoks);
    if (rc == 0) rc = ob_jinja_parse(t, toks, ntoks);
    ob_free(toks);
    if (rc < 0) {
        ob_chat_template_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int ob_chat_template_render(const ob_chat_template *t, const json_t *vars, const ob_chat_render_opts *opts,
                            char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t) return ob_err(OB_ERR_INVALID_ARG, "chat template: no template");
    if (vars && !json_is_object(vars)) return ob_err(OB_ERR_INVALID_ARG, "chat template: variables must be a JSON object");
    ob_chat_render_opts o = {0};
    if (opts) o = *opts;
    ob_jctx c;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.mem_limit = o.max_memory ? o.max_memory : OB_CHAT_DEFAULT_MAX_MEMORY;
    ob_arena_init(&c.arena, 64 * 1024, c.mem_limit);
    c.out.limit = o.max_output ? o.max_output : OB_CHAT_DEFAULT_MAX_OUTPUT;
    c.max_steps = o.max_steps ? o.max_steps : OB_CHAT_DEFAULT_MAX_STEPS;
    c.max_depth = o.max_depth > 0 ? o.max_depth : OB_CHAT_DEFAULT_MAX_DEPTH;
    if (o.now) {
        c.now_fixed = true;
        c.now = *o.now;
    }
    int rc = 0;
    if (vars) {
        ob_jv v;
        rc = ob_jv_from_json(&c, vars, &v);
        if (rc == 0) c.vars = v.u.d;
    }
    if (rc == 0) rc = ob_jinja_render(&c);
    if (rc == 0) {
        ob_jbuf_putc(&c.out, '\0'); /* NUL-terminate; not counted */
        if (c.out.err) rc = ob_jinja_error(&c, c.out.err, c.out.err == OB_ERR_OOM ? "out of memory" : "output too large");
    }
    ob_arena_free(&c.arena);
    if (rc < 0) {
        ob_jbuf_free(&c.out);
        return rc;
    }
    *out = c.out.p;
    if (out_len) *out_len = c.out.n - 1;
    return 0;
}

int ob_chat_context_build(const json_t *request, const char *bos_token, const char *eos_token, json_t **out) {
    *out = NULL;
    if (!json_is_object(request)) return ob_err(OB_ERR_INVALID_ARG, "chat: the conversation must be a JSON object");
    const json_t *msgs = json_object_get(request, "messages");
    if (!msgs) return ob_err(OB_ERR_INVALID_ARG, "chat: the conversation has no \"messages\"");
    if (!json_is_array(msgs)) return ob_err(OB_ERR_INVALID_ARG, "chat: \"messages\" must be an array");
    json_t *ctx = json_object();
    if (!ctx) return ob_err(OB_ERR_OOM, "chat: out of memory");
    int bad = json_object_update(ctx, (json_t *)request);
    if (!bad && !json_object_get(ctx, "tools")) bad |= json_object_set_new(ctx, "tools", json_null());
    if (!bad && !json_object_get(ctx, "documents")) bad |= json_object_set_new(ctx, "documents", json_null());
    if (!bad && !json_object_get(ctx, "add_generation_prompt"))
        bad |= json_object_set_new(ctx, "add_generation_prompt", json_false());
    if (!bad && bos_token && !json_object_get(ctx, "bos_token"))
        bad |= json_object_set_new(ctx, "bos_token", json_string(bos_token));
    if (!bad && eos_token && !json_object_get(ctx, "eos_token"))
        bad |= json_object_set_new(ctx, "eos_token", json_string(eos_token));
    if (bad) {
        json_decref(ctx);
        return ob_err(OB_ERR_OOM, "chat: out of memory");
    }
    *out = ctx;
    return 0;
}

static int days_in_month(int y, int m) {
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : d[m - 1];
}

int ob_chat_parse_time(const char *s, struct tm *out) {
    int y, mo, d, h = 0, mi = 0, se = 0, used = 0;
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3) goto bad;
    if (s[used] == 'T' || s[used] == ' ') {
        int more = 0;
        if (sscanf(s + used + 1, "%2d:%2d%n", &h, &mi, &more) != 2) goto bad;
        used += 1 + more;
        if (s[used] == ':') {
            if (sscanf(s + used + 1, "%2d%n", &se, &more) != 1) goto bad;
            used += 1 + more;
        }
    }
    if (s[used] != '\0') goto bad;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59 || h < 0 ||
        mi < 0 || se < 0)
        goto bad;
    memset(out, 0, sizeof *out);
    out->tm_year = y - 1900;
    out->tm_mon = mo - 1;
    out->tm_mday = d;
    out->tm_hour = h;
    out->tm_min = mi;
    out->tm_sec = se;
    /* weekday and day of year, for %a %A %j %U %W (proleptic Gregorian) */
    int yday = d - 1;
    for (int m = 1; m < mo; m++) yday += days_in_month(y, m);
    out->tm_yday = yday;
    long yy = y - 1;
    long days = yy * 365 + yy / 4 - yy / 100 + yy / 400 + yday; /* days since 0001-01-01, a Monday */
    out->tm_wday = (int)((days + 1) % 7);
    return 0;
bad:
    return ob_err(OB_ERR_INVALID_ARG, "'%s' is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS])", s);
}
