/*
 * request.c - request bodies -> ob_srv_request (see request.h for the
 * contract). Field names and meanings follow OpenAI's chat and legacy
 * completions APIs plus the llama-server extensions clients send
 * (n_predict, top_k, min_p, repeat_penalty, ignore_eos, n_probs,
 * chat_template_kwargs, reasoning_format). A null value counts as absent,
 * as OpenAI's own SDKs send nulls for unset options.
 */
#include "request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"

int ob_srv_fail(ob_srv_error *e, int status, int http, const char *type, const char *code, const char *param,
                const char *fmt, ...) {
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return status;
}

#define INVALID "invalid_request_error"

/* A 400 naming the field. */
#define BAD(e, code, param, ...) ob_srv_fail((e), OB_ERR_INVALID_ARG, 400, INVALID, (code), (param), __VA_ARGS__)

void ob_srv_defaults_init(ob_srv_defaults *d) {
    memset(d, 0, sizeof *d);
    d->sampling = ob_sampler_default_params();
    d->max_tokens = -1;
    d->reasoning = 1;
}

/* ---------------- typed field access ----------------
 * Each returns 1 when the field is present (and *out is set), 0 when it is
 * absent or null, and a negative status (err filled) when it has the wrong
 * type or is out of range. */

static json_t *field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

static int get_number(ob_srv_error *e, json_t *o, const char *k, double lo, double hi, double *out) {
    json_t *v = field(o, k);
    if (!v) return 0;
    if (!json_is_number(v)) return BAD(e, "invalid_type", k, "'%s' must be a number", k);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return BAD(e, "invalid_value", k, "'%s' must be between %g and %g (got %g)", k, lo, hi, x);
    *out = x;
    return 1;
}

static int get_int(ob_srv_error *e, json_t *o, const char *k, long long lo, long long hi, long long *out) {
    json_t *v = field(o, k);
    if (!v) return 0;
    long long x;
    if (json_is_integer(v)) {
        x = (long long)json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15) {
        x = (long long)json_real_value(v); /* 100.0 is a fine integer */
    } else {
        return BAD(e, "invalid_type", k, "'%s' must be an integer", k);
    }
    if (x < lo || x > hi) return BAD(e, "invalid_value", k, "'%s' must be between %lld and %lld (got %lld)", k, lo, hi, x);
    *out = x;
    return 1;
}

static int get_bool(ob_srv_error *e, json_t *o, const char *k, bool *out) {
    json_t *v = field(o, k);
    if (!v) return 0;
    if (!json_is_boolean(v)) return BAD(e, "invalid_type", k, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return 1;
}

static int get_string(ob_srv_error *e, json_t *o, const char *k, const char **out) {
    json_t *v = field(o, k);
    if (!v) return 0;
    if (!json_is_string(v)) return BAD(e, "invalid_type", k, "'%s' must be a string", k);
    *out = json_string_value(v);
    return 1;
}

static int check_type(ob_srv_error *e, json_t *o, const char *k, int (*is)(const json_t *), const char *what) {
    json_t *v = field(o, k);
    if (v && !is(v)) return BAD(e, "invalid_type", k, "'%s' must be %s", k, what);
    return 0;
}

static int is_string(const json_t *v) { return json_is_string(v); }
static int is_bool(const json_t *v) { return json_is_boolean(v); }

/* Fields we know but cannot honour. Refused (400 unsupported_parameter)
 * when set to anything other than their neutral value, because ignoring
 * them would silently change the answer. */
static int refuse_unsupported(ob_srv_error *e, json_t *o) {
    json_t *v;
#define UNSUPPORTED(k, why) BAD(e, "unsupported_parameter", k, "'%s' is not supported by this server yet%s", k, why)
    if ((v = field(o, "logit_bias")) && !(json_is_object(v) && json_object_size(v) == 0))
        return json_is_object(v) ? UNSUPPORTED("logit_bias", "") : BAD(e, "invalid_type", "logit_bias", "'logit_bias' must be an object");
    if ((v = field(o, "grammar")) && !(json_is_string(v) && json_string_length(v) == 0))
        return UNSUPPORTED("grammar", " (constrained decoding comes later)");
    if (field(o, "json_schema")) return UNSUPPORTED("json_schema", " (constrained decoding comes later)");
    if ((v = field(o, "response_format"))) {
        if (!json_is_object(v)) return BAD(e, "invalid_type", "response_format", "'response_format' must be an object");
        json_t *t = json_object_get(v, "type");
        if (!json_is_string(t)) return BAD(e, "invalid_type", "response_format.type", "'response_format.type' must be a string");
        if (strcmp(json_string_value(t), "text") != 0)
            return BAD(e, "unsupported_parameter", "response_format",
                       "response_format '%s' is not supported by this server yet (only 'text'; constrained decoding comes later)",
                       json_string_value(t));
    }
    double x = 0;
    int rc;
    if ((rc = get_number(e, o, "mirostat", 0, 2, &x)) < 0) return rc;
    if (rc && x != 0) return UNSUPPORTED("mirostat", "");
    if ((rc = get_number(e, o, "typical_p", 0, 1, &x)) < 0) return rc;
    if (rc && x != 1) return UNSUPPORTED("typical_p", "");
    if ((rc = get_number(e, o, "dry_multiplier", -1e9, 1e9, &x)) < 0) return rc;
    if (rc && x > 0) return UNSUPPORTED("dry_multiplier", "");
    if ((rc = get_number(e, o, "xtc_probability", -1e9, 1e9, &x)) < 0) return rc;
    if (rc && x > 0) return UNSUPPORTED("xtc_probability", "");
    if ((rc = get_number(e, o, "dynatemp_range", -1e9, 1e9, &x)) < 0) return rc;
    if (rc && x > 0) return UNSUPPORTED("dynatemp_range", "");
    if ((rc = get_number(e, o, "top_n_sigma", -1e9, 1e9, &x)) < 0) return rc;
    if (rc && x > 0) return UNSUPPORTED("top_n_sigma", "");
#undef UNSUPPORTED
    return 0;
}

/* ---------------- sampling and generation fields ---------------- */

static int parse_generation(ob_srv_error *e, json_t *o, ob_srv_api api, const ob_srv_defaults *d, ob_srv_request *r) {
    int rc;
    double x = 0;
    long long i = 0;
    bool b = false;
    ob_sampler_params *s = &r->gen.sampling;
    *s = d->sampling;
    r->has_seed = d->fixed_seed;
    if ((rc = get_number(e, o, "temperature", 0, 1e6, &x)) < 0) return rc;
    if (rc) s->temperature = (float)x;
    if ((rc = get_number(e, o, "top_p", 0, 1, &x)) < 0) return rc;
    /* the sampler reads top_p <= 0 as "off"; OpenAI's 0 means "only the most likely token" */
    if (rc) s->top_p = x > 0 ? (float)x : 1e-9f;
    if ((rc = get_int(e, o, "top_k", -1, 1 << 30, &i)) < 0) return rc;
    if (rc) s->top_k = (int32_t)i;
    if ((rc = get_number(e, o, "min_p", 0, 1, &x)) < 0) return rc;
    if (rc) s->min_p = (float)x;
    if ((rc = get_number(e, o, "presence_penalty", -2, 2, &x)) < 0) return rc;
    if (rc) s->presence_penalty = (float)x;
    if ((rc = get_number(e, o, "frequency_penalty", -2, 2, &x)) < 0) return rc;
    if (rc) s->frequency_penalty = (float)x;
    static const char *const rep_names[] = {"repetition_penalty", "repeat_penalty"};
    for (int k = 0; k < 2; k++) {
        if ((rc = get_number(e, o, rep_names[k], 0, 100, &x)) < 0) return rc;
        if (rc && x <= 0) return BAD(e, "invalid_value", rep_names[k], "'%s' must be greater than 0", rep_names[k]);
        if (rc) s->repeat_penalty = (float)x;
    }
    if ((rc = get_int(e, o, "repeat_last_n", -1, 1 << 30, &i)) < 0) return rc;
    if (rc) s->repeat_last_n = (int32_t)i;
    json_t *seed = field(o, "seed");
    if (seed) {
        if (!json_is_integer(seed)) return BAD(e, "invalid_type", "seed", "'seed' must be an integer");
        long long sv = (long long)json_integer_value(seed);
        if (sv != -1) { /* -1 is llama-server's "random" */
            s->seed = (uint64_t)sv;
            r->has_seed = true;
        }
    }

    /* how many tokens: OpenAI's names and llama-server's n_predict; -1 = no limit */
    r->gen.max_tokens = d->max_tokens > 0 ? d->max_tokens : 0;
    static const char *const max_names[] = {"n_predict", "max_tokens", "max_completion_tokens"};
    for (int k = 0; k < 3; k++) {
        if ((rc = get_int(e, o, max_names[k], -1, 1 << 30, &i)) < 0) return rc;
        if (rc && i == 0) return BAD(e, "invalid_value", max_names[k], "'%s' must be at least 1 (or -1 for no limit)", max_names[k]);
        if (rc) r->gen.max_tokens = i < 0 ? 0 : (int32_t)i;
    }
    if ((rc = get_bool(e, o, "ignore_eos", &b)) < 0) return rc;
    if (rc) r->gen.ignore_eos = b;
    /* speculative decoding (when the server drafts): "speculative": false or a draft length of 0 turns it off */
    if ((rc = get_bool(e, o, "speculative", &b)) < 0) return rc;
    if (rc) r->gen.no_speculative = !b;
    static const char *const spec_n_names[] = {"speculative.n_max", "n_draft"};
    for (int k = 0; k < 2; k++) {
        if ((rc = get_int(e, o, spec_n_names[k], 0, 64, &i)) < 0) return rc;
        if (rc && i == 0) r->gen.no_speculative = true;
        if (rc && i > 0) r->gen.spec_n_max = (int32_t)i;
    }

    /* logprobs: a bool (+ top_logprobs) in chat, an integer in completions, n_probs natively */
    r->gen.top_logprobs = -1;
    if (api == OB_SRV_CHAT) {
        bool lp = false;
        if ((rc = get_bool(e, o, "logprobs", &lp)) < 0) return rc;
        long long top = 0;
        int has_top = get_int(e, o, "top_logprobs", 0, OB_MAX_TOP_LOGPROBS, &top);
        if (has_top < 0) return has_top;
        if (has_top && !lp)
            return BAD(e, "invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs' to be true");
        if (lp) r->gen.top_logprobs = (int32_t)top;
    } else if (api == OB_SRV_COMPLETION) {
        if ((rc = get_int(e, o, "logprobs", 0, OB_MAX_TOP_LOGPROBS, &i)) < 0) return rc;
        if (rc) r->gen.top_logprobs = (int32_t)i;
    }
    if (api == OB_SRV_NATIVE || api == OB_SRV_COMPLETION) {
        if ((rc = get_int(e, o, "n_probs", 0, OB_MAX_TOP_LOGPROBS, &i)) < 0) return rc;
        if (rc && i > 0) r->gen.top_logprobs = (int32_t)i;
    }

    r->n = 1;
    if (api != OB_SRV_NATIVE) {
        if ((rc = get_int(e, o, "n", 1, OB_SRV_MAX_N, &i)) < 0) return rc;
        if (rc) r->n = (int)i;
    }

    if ((rc = get_bool(e, o, "stream", &b)) < 0) return rc;
    if (rc) r->stream = b;
    json_t *so = field(o, "stream_options");
    if (so) {
        if (!json_is_object(so)) return BAD(e, "invalid_type", "stream_options", "'stream_options' must be an object");
        json_t *iu = field(so, "include_usage");
        if (iu && !json_is_boolean(iu))
            return BAD(e, "invalid_type", "stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        r->include_usage = iu && json_is_true(iu);
    }

    /* stop: a string or a list of strings, matched across token boundaries */
    json_t *stop = field(o, "stop");
    if (stop) {
        size_t n = json_is_string(stop) ? 1 : json_is_array(stop) ? json_array_size(stop) : (size_t)-1;
        if (n == (size_t)-1) return BAD(e, "invalid_type", "stop", "'stop' must be a string or an array of strings");
        if (n > OB_SRV_MAX_STOP) return BAD(e, "invalid_value", "stop", "'stop' has %zu strings; at most %d are allowed", n, OB_SRV_MAX_STOP);
        r->stop = ob_calloc(n ? n : 1, sizeof(char *));
        if (!r->stop) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
        for (size_t k = 0; k < n; k++) {
            json_t *sv = json_is_string(stop) ? stop : json_array_get(stop, k);
            char param[32];
            snprintf(param, sizeof param, "stop[%zu]", k);
            if (!json_is_string(sv)) return BAD(e, "invalid_type", param, "'%s' must be a string", param);
            size_t len = json_string_length(sv);
            if (len > OB_SRV_MAX_STOP_LEN)
                return BAD(e, "invalid_value", param, "'%s' is %zu bytes; at most %d are allowed", param, len, OB_SRV_MAX_STOP_LEN);
            if (len == 0) continue; /* an empty stop string would end every answer at once */
            r->stop[r->n_stop] = ob_strndup(json_string_value(sv), len);
            if (!r->stop[r->n_stop]) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
            r->n_stop++;
        }
    }

    const char *str = NULL;
    if ((rc = get_string(e, o, "model", &str)) < 0) return rc;
    if (rc && !(r->model = ob_strdup(str))) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    if ((rc = check_type(e, o, "user", is_string, "a string")) < 0) return rc;
    if ((rc = check_type(e, o, "cache_prompt", is_bool, "a boolean")) < 0) return rc;
    return refuse_unsupported(e, o);
}

/* ---------------- chat messages ---------------- */

/* An assistant message's tool_calls as templates want them: OpenAI sends
 * function.arguments as a JSON string, while templates (Qwen2.5, Llama 3.1,
 * Hermes) write `arguments | tojson` and expect the object, so a string that
 * holds a JSON object becomes that object (llama-server does the same). */
static json_t *tool_calls_for_template(json_t *calls) {
    json_t *out = json_deep_copy(calls);
    size_t i;
    json_t *c;
    json_array_foreach(out, i, c) {
        json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
        json_t *args = json_is_object(fn) ? json_object_get(fn, "arguments") : NULL;
        if (!json_is_string(args)) continue;
        json_t *v = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
        if (json_is_object(v)) json_object_set(fn, "arguments", v);
        json_decref(v);
    }
    return out;
}

/* Validate messages[] and rebuild it for the template: content-part arrays
 * become one string (text parts joined with "\n", as llama-server does for
 * text-only models), everything else of a message passes through as sent. */
static int normalize_messages(ob_srv_error *e, json_t *msgs, json_t **out) {
    *out = NULL;
    if (!msgs) return BAD(e, "missing_field", "messages", "'messages' is required");
    if (!json_is_array(msgs)) return BAD(e, "invalid_type", "messages", "'messages' must be an array");
    if (json_array_size(msgs) == 0) return BAD(e, "invalid_value", "messages", "'messages' must not be empty");
    json_t *arr = json_array();
    if (!arr) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    size_t i;
    json_t *m;
    char param[96];
    json_array_foreach(msgs, i, m) {
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) goto bad_type_obj;
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role) || json_string_length(role) == 0) {
            snprintf(param, sizeof param, "messages[%zu].role", i);
            json_decref(arr);
            return role ? BAD(e, "invalid_type", param, "'%s' must be a non-empty string", param)
                        : BAD(e, "missing_field", param, "'%s' is required", param);
        }
        json_t *nm = json_object();
        const char *key;
        json_t *val;
        json_object_foreach(m, key, val) {
            if (strcmp(key, "content") != 0) {
                if (!strcmp(key, "tool_calls") && json_is_array(val)) json_object_set_new(nm, key, tool_calls_for_template(val));
                else json_object_set(nm, key, val);
                continue;
            }
            if (json_is_string(val) || json_is_null(val)) {
                json_object_set(nm, key, val);
                continue;
            }
            snprintf(param, sizeof param, "messages[%zu].content", i);
            if (!json_is_array(val)) {
                json_decref(nm);
                json_decref(arr);
                return BAD(e, "invalid_type", param, "'%s' must be a string, an array of content parts or null", param);
            }
            /* join the text parts */
            size_t total = 0, j;
            json_t *part;
            json_array_foreach(val, j, part) {
                snprintf(param, sizeof param, "messages[%zu].content[%zu]", i, j);
                json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
                if (!json_is_string(type)) {
                    json_decref(nm);
                    json_decref(arr);
                    return BAD(e, "invalid_type", param, "'%s' must be an object with a string 'type'", param);
                }
                if (strcmp(json_string_value(type), "text") != 0) {
                    json_decref(nm);
                    json_decref(arr);
                    return BAD(e, "unsupported_content", param,
                               "'%s' is of type '%s'; this server accepts only text content parts", param,
                               json_string_value(type));
                }
                json_t *text = json_object_get(part, "text");
                if (!json_is_string(text)) {
                    json_decref(nm);
                    json_decref(arr);
                    return BAD(e, "invalid_type", param, "'%s.text' must be a string", param);
                }
                total += json_string_length(text) + 1;
            }
            char *joined = ob_malloc(total + 1), *p = joined;
            if (!joined) {
                json_decref(nm);
                json_decref(arr);
                return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
            }
            json_array_foreach(val, j, part) {
                json_t *text = json_object_get(part, "text");
                if (p != joined) *p++ = '\n';
                memcpy(p, json_string_value(text), json_string_length(text));
                p += json_string_length(text);
            }
            json_object_set_new(nm, key, json_stringn_nocheck(joined, (size_t)(p - joined)));
            ob_free(joined);
        }
        if (json_array_append_new(arr, nm) < 0) {
            json_decref(arr);
            return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
        }
        continue;
    bad_type_obj:
        json_decref(arr);
        return BAD(e, "invalid_type", param, "'%s' must be an object", param);
    }
    *out = arr;
    return 0;
}

/* Build the template context: messages, add_generation_prompt, tools and
 * the client's chat_template_kwargs (which may override the others, as in
 * llama-server). */
static int parse_chat(ob_srv_error *e, json_t *o, ob_srv_api api, const ob_srv_defaults *d, ob_srv_request *r) {
    json_t *msgs = NULL;
    int rc = normalize_messages(e, field(o, "messages"), &msgs);
    if (rc < 0) return rc;
    r->n_messages = (int)json_array_size(msgs);
    json_t *ctx = json_object();
    json_object_set_new(ctx, "messages", msgs);
    json_object_set_new(ctx, "add_generation_prompt", json_true());
    json_t *tools = field(o, "tools");
    if (tools) {
        if (!json_is_array(tools)) {
            json_decref(ctx);
            return BAD(e, "invalid_type", "tools", "'tools' must be an array");
        }
        if (json_array_size(tools) > 0) json_object_set(ctx, "tools", tools);
    }
    json_t *tc = field(o, "tool_choice");
    if (tc && api == OB_SRV_CHAT) {
        const char *s = json_is_string(tc) ? json_string_value(tc) : NULL;
        if (!json_is_string(tc) && !json_is_object(tc)) {
            json_decref(ctx);
            return BAD(e, "invalid_type", "tool_choice", "'tool_choice' must be a string or an object");
        }
        if (!s || (strcmp(s, "none") != 0 && strcmp(s, "auto") != 0)) {
            json_decref(ctx);
            return BAD(e, "unsupported_parameter", "tool_choice",
                       "'tool_choice' can be \"auto\" or \"none\" here; forcing a tool call is not supported yet");
        }
    }
    /* the answer is parsed for calls when tools were offered and not switched off */
    r->tools = api == OB_SRV_CHAT && json_is_array(tools) && json_array_size(tools) > 0 &&
               !(json_is_string(tc) && !strcmp(json_string_value(tc), "none"));
    r->parallel_tool_calls = true;
    if ((rc = get_bool(e, o, "parallel_tool_calls", &r->parallel_tool_calls)) < 0) {
        json_decref(ctx);
        return rc;
    }
    if (d->template_kwargs) { /* the server's, before the request's own */
        json_error_t jerr;
        json_t *dkw = json_loads(d->template_kwargs, 0, &jerr);
        if (json_is_object(dkw)) json_object_update(ctx, dkw);
        json_decref(dkw);
    }
    json_t *kw = field(o, "chat_template_kwargs");
    if (kw) {
        if (!json_is_object(kw)) {
            json_decref(ctx);
            return BAD(e, "invalid_type", "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        }
        json_object_update(ctx, kw);
    }
    char *text = json_dumps(ctx, JSON_COMPACT);
    json_decref(ctx);
    if (!text) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    r->chat_context_len = strlen(text);
    r->chat_context = ob_strndup(text, r->chat_context_len);
    free(text); /* jansson's allocator */
    if (!r->chat_context) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");

    const char *rf = "";
    if ((rc = get_string(e, o, "reasoning_format", &rf)) < 0) return rc;
    if (rc) {
        if (!strcmp(rf, "none")) r->reasoning = 0;
        else if (!strcmp(rf, "auto") || !strcmp(rf, "deepseek") || !strcmp(rf, "deepseek-legacy")) r->reasoning = 1;
        else return BAD(e, "invalid_value", "reasoning_format", "'reasoning_format' must be none, auto or deepseek");
    }
    return 0;
}

/* ---------------- completion prompts ---------------- */

static int ids_from_array(ob_srv_error *e, json_t *a, const char *param, ob_srv_prompt *p) {
    size_t n = json_array_size(a);
    if (n == 0) return BAD(e, "invalid_value", param, "'%s' must not be empty", param);
    if (n > (1u << 24)) return BAD(e, "invalid_value", param, "'%s' has too many tokens", param);
    p->ids = ob_malloc(n * sizeof(ob_token));
    if (!p->ids) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    for (size_t k = 0; k < n; k++) {
        json_t *v = json_array_get(a, k);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return BAD(e, "invalid_type", param, "'%s' must hold token ids (non-negative integers); element %zu is not one",
                       param, k);
        p->ids[k] = (ob_token)json_integer_value(v);
    }
    p->n_ids = (int32_t)n;
    return 0;
}

static int parse_prompts(ob_srv_error *e, json_t *o, ob_srv_request *r) {
    json_t *p = field(o, "prompt");
    if (!p) return BAD(e, "missing_field", "prompt", "'prompt' is required");
    const char *shape = "'prompt' must be a string, an array of strings, an array of token ids or an array of token-id arrays";
    size_t n;
    if (json_is_string(p)) n = 1;
    else if (!json_is_array(p)) return BAD(e, "invalid_type", "prompt", "%s", shape);
    else if ((n = json_array_size(p)) == 0) return BAD(e, "invalid_value", "prompt", "'prompt' must not be empty");
    else if (json_is_integer(json_array_get(p, 0))) n = 1; /* one prompt of token ids */
    if (n * (size_t)r->n > OB_SRV_MAX_CHOICES)
        return BAD(e, "invalid_value", "prompt", "%zu prompts x n=%d is more than the %d choices one request may ask for", n, r->n,
                   OB_SRV_MAX_CHOICES);
    r->prompts = ob_calloc(n, sizeof *r->prompts);
    if (!r->prompts) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    r->n_prompts = (int)n;
    if (json_is_string(p)) {
        r->prompts[0].len = json_string_length(p);
        r->prompts[0].text = ob_strndup(json_string_value(p), r->prompts[0].len);
        return r->prompts[0].text ? 0 : ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    }
    if (json_is_integer(json_array_get(p, 0))) return ids_from_array(e, p, "prompt", &r->prompts[0]);
    for (size_t k = 0; k < n; k++) {
        json_t *v = json_array_get(p, k);
        char param[32];
        snprintf(param, sizeof param, "prompt[%zu]", k);
        if (json_is_string(v)) {
            r->prompts[k].len = json_string_length(v);
            r->prompts[k].text = ob_strndup(json_string_value(v), r->prompts[k].len);
            if (!r->prompts[k].text) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
        } else if (json_is_array(v)) {
            int rc = ids_from_array(e, v, param, &r->prompts[k]);
            if (rc < 0) return rc;
        } else {
            return BAD(e, "invalid_type", param, "'%s' must be a string or an array of token ids", param);
        }
    }
    return 0;
}

/* ---------------- entry point ---------------- */

int ob_srv_request_parse(ob_srv_api api, const char *body, size_t len, const ob_srv_defaults *d, ob_srv_request *r,
                         ob_srv_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->api = api;
    r->n = 1;
    r->reasoning = d->reasoning;
    if ((unsigned)api >= OB_SRV_API_COUNT)
        return ob_srv_fail(e, OB_ERR_INVALID_ARG, 500, "server_error", "internal_error", NULL, "unknown API %d", (int)api);
    if (len == 0) return BAD(e, "invalid_json", NULL, "the request body is empty; a JSON object was expected");
    json_error_t jerr;
    json_t *o = json_loadb(body, len, 0, &jerr);
    if (!o) {
        /* jansson names the problem, including invalid UTF-8 and NUL characters */
        return ob_srv_fail(e, OB_ERR_FORMAT, 400, INVALID, "invalid_json", NULL, "invalid JSON at line %d, column %d: %s",
                           jerr.line, jerr.column, jerr.text);
    }
    int rc = 0;
    if (!json_is_object(o)) {
        rc = BAD(e, "invalid_json", NULL, "the request body must be a JSON object");
    } else if (api == OB_SRV_TEMPLATE) {
        rc = parse_chat(e, o, api, d, r);
    } else {
        rc = parse_generation(e, o, api, d, r);
        if (rc >= 0 && api == OB_SRV_CHAT) rc = parse_chat(e, o, api, d, r);
        if (rc >= 0 && api != OB_SRV_CHAT) rc = parse_prompts(e, o, r);
        if (rc >= 0 && api == OB_SRV_COMPLETION) {
            bool echo = false;
            long long best_of = 0;
            const char *suffix = NULL;
            if ((rc = get_bool(e, o, "echo", &echo)) > 0) r->echo = echo;
            if (rc >= 0 && (rc = get_int(e, o, "best_of", 1, OB_SRV_MAX_N, &best_of)) > 0 && best_of != r->n)
                rc = BAD(e, "unsupported_parameter", "best_of", "'best_of' other than n is not supported");
            if (rc >= 0 && (rc = get_string(e, o, "suffix", &suffix)) > 0 && suffix[0])
                rc = BAD(e, "unsupported_parameter", "suffix", "'suffix' (insertion) is not supported");
            if (rc > 0) rc = 0;
        }
    }
    json_decref(o);
    if (rc < 0) {
        ob_srv_request_free(r);
        r->api = api;
        return rc;
    }
    return 0;
}

void ob_srv_request_free(ob_srv_request *r) {
    if (!r) return;
    ob_free(r->model);
    for (int i = 0; i < r->n_prompts; i++) {
        ob_free(r->prompts[i].text);
        ob_free(r->prompts[i].ids);
    }
    ob_free(r->prompts);
    ob_free(r->chat_context);
    for (int i = 0; i < r->n_stop; i++) ob_free(r->stop[i]);
    ob_free(r->stop);
    memset(r, 0, sizeof *r);
}
