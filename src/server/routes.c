/*
 * routes.c - the endpoints that are not completions: health, models, props,
 * slots, metrics, tokenize, detokenize, apply-template, and the embeddings
 * family (refused with 501 until embeddings exist). Response shapes follow
 * llama-server's where it has the endpoint, so its clients (Lemonade among
 * them) read ours unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"
#include "internal.h"

/* ---------------- health, models, root ---------------- */

enum MHD_Result ob_srv_health(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url, (void)body, (void)len;
    int st = atomic_load(&s->state);
    if (st == SRV_READY) return ob_srv_send_json(s, c, 200, json_pack("{s:s}", "status", "ok"));
    if (st == SRV_LOADING) return ob_srv_send_json(s, c, 503, json_pack("{s:s}", "status", "loading"));
    return ob_srv_send_json(s, c, 500, json_pack("{s:s, s:s}", "status", "error", "error", s->load_error));
}

enum MHD_Result ob_srv_models(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url, (void)body, (void)len;
    json_t *m = json_pack("{s:s, s:s, s:I, s:s}", "id", s->model_id, "object", "model", "created", (json_int_t)s->t_start,
                          "owned_by", "1bit");
    if (m && atomic_load(&s->state) == SRV_READY) {
        json_object_set_new(m, "meta",
                            json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I}", "name", ob_model_name(s->model), "arch",
                                      ob_model_arch(s->model), "n_vocab", (int)s->n_vocab, "n_ctx_train",
                                      (int)ob_model_n_ctx_train(s->model), "n_ctx", (int)s->n_ctx, "n_embd",
                                      (int)ob_model_n_embd(s->model), "n_params", (json_int_t)ob_model_n_params(s->model),
                                      "size", (json_int_t)ob_model_size_bytes(s->model)));
    }
    json_t *data = json_array();
    json_array_append_new(data, m);
    return ob_srv_send_json(s, c, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

enum MHD_Result ob_srv_root(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url, (void)body, (void)len;
    char text[512];
    int n = snprintf(text, sizeof text,
                     "1bit serve %s\nOpenAI-compatible API: /v1/chat/completions, /v1/completions, /v1/models\n"
                     "Model: %s\nThis server has no web UI; see docs/serve.md.\n",
                     ob_version_string(), s->model_id);
    return ob_srv_send_text(s, c, 200, "text/plain; charset=utf-8", text, (size_t)n);
}

/* ---------------- props and slots ---------------- */

static json_t *sampling_json(const ob_srv_defaults *d) {
    const ob_sampler_params *p = &d->sampling;
    return json_pack("{s:f, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:i}", "temperature", (double)p->temperature, "top_k",
                     (int)p->top_k, "top_p", (double)p->top_p, "min_p", (double)p->min_p, "repeat_penalty",
                     (double)p->repeat_penalty, "repeat_last_n", (int)p->repeat_last_n, "presence_penalty",
                     (double)p->presence_penalty, "frequency_penalty", (double)p->frequency_penalty, "n_predict",
                     d->max_tokens > 0 ? (int)d->max_tokens : -1);
}

static json_t *special_text(ob_server *s, ob_token id) {
    char buf[256];
    int32_t n = 0;
    if (id < 0 || ob_token_to_piece(s->model, id, buf, sizeof buf, true, &n) < 0 || !ob_utf8_valid(buf, (size_t)n))
        return json_string("");
    return json_stringn(buf, (size_t)n);
}

enum MHD_Result ob_srv_props(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url, (void)body, (void)len;
    const char *tmpl = s->chat_template ? s->chat_template : ob_model_chat_template(s->model);
    json_t *gen = json_pack("{s:i, s:o}", "n_ctx", (int)s->n_ctx, "params", sampling_json(&s->defaults));
    char build[128];
    snprintf(build, sizeof build, "1bit %s", ob_version_string());
    json_t *o = json_pack("{s:o, s:i, s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:{s:b, s:b}, s:b}", "default_generation_settings",
                          gen, "total_slots", (int)s->engine_params.n_parallel, "model_path", s->model_path, "model_alias",
                          s->model_id, "chat_template", tmpl ? tmpl : "", "chat_template_source",
                          s->chat_template ? "file" : tmpl ? "model" : "builtin chatml", "bos_token",
                          special_text(s, ob_token_bos(s->model)), "eos_token", special_text(s, ob_token_eos(s->model)),
                          "build_info", build, "modalities", "vision", 0, "audio", 0, "is_sleeping", 0);
    return ob_srv_send_json(s, c, 200, o);
}

/* The engine assigns sequences to slots internally and reports only how
 * many are busy; the first `running` slots are shown as processing. */
enum MHD_Result ob_srv_slots(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url, (void)body, (void)len;
    ob_engine_stats st;
    ob_engine_get_stats(s->engine, &st);
    json_t *arr = json_array();
    for (int i = 0; i < s->engine_params.n_parallel; i++)
        json_array_append_new(arr, json_pack("{s:i, s:i, s:b, s:b, s:o}", "id", i, "n_ctx", (int)s->n_ctx, "speculative", 0,
                                             "is_processing", i < st.running, "params", sampling_json(&s->defaults)));
    return ob_srv_send_json(s, c, 200, arr);
}

enum MHD_Result ob_srv_slot_action(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)body, (void)len;
    ob_srv_error e;
    const char *p = url + strlen("/slots/");
    char *end;
    long id = strtol(p, &end, 10);
    if (end == p || (*end && strcmp(end, "/") != 0) || id < 0 || id >= s->engine_params.n_parallel) {
        ob_srv_fail(&e, 0, 400, "invalid_request_error", "invalid_value", "id_slot", "no slot '%s' (slots are 0..%d)", p,
                    s->engine_params.n_parallel - 1);
        return ob_srv_send_error(s, c, &e);
    }
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    if (!action) {
        ob_srv_fail(&e, 0, 400, "invalid_request_error", "missing_field", "action", "'action' is required (?action=erase)");
        return ob_srv_send_error(s, c, &e);
    }
    if (!strcmp(action, "erase")) {
        /* Finished requests give their KV pages back at once, so an idle
         * slot holds nothing to erase; a busy one keeps its request. */
        return ob_srv_send_json(s, c, 200, json_pack("{s:i, s:i}", "id_slot", (int)id, "n_erased", 0));
    }
    if (!strcmp(action, "save") || !strcmp(action, "restore")) {
        ob_srv_fail(&e, 0, 501, "not_supported_error", "not_supported", "action", "slot %s is not supported by this server",
                    action);
        return ob_srv_send_error(s, c, &e);
    }
    ob_srv_fail(&e, 0, 400, "invalid_request_error", "invalid_value", "action", "unknown slot action '%s' (erase, save, restore)",
                action);
    return ob_srv_send_error(s, c, &e);
}

/* ---------------- metrics ---------------- */

static void metric(ob_buf *b, const char *name, const char *type, const char *help, double v) {
    ob_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* Prometheus text format. Always on (llama-server needs --metrics; we
 * accept that flag and ignore it). The llamacpp: names are llama-server's,
 * for dashboards built on it. */
enum MHD_Result ob_srv_metrics(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url, (void)body, (void)len;
    ob_engine_stats st;
    memset(&st, 0, sizeof st);
    if (atomic_load(&s->state) == SRV_READY) ob_engine_get_stats(s->engine, &st);
    ob_buf b = {0};
    double kv_ratio = st.kv_blocks_total > 0 ? (double)st.kv_blocks_used / (double)st.kv_blocks_total : 0;
    double pp = st.seconds_prompt > 0 ? (double)st.tokens_prompt / st.seconds_prompt : 0;
    double tg = st.seconds_generate > 0 ? (double)st.tokens_generated / st.seconds_generate : 0;
    metric(&b, "onebit_up", "gauge", "1 when the model is loaded and serving", atomic_load(&s->state) == SRV_READY);
    ob_buf_printf(&b, "# HELP onebit_requests_total Engine requests by how they ended.\n# TYPE onebit_requests_total counter\n");
    ob_buf_printf(&b, "onebit_requests_total{result=\"ok\"} %llu\n", (unsigned long long)st.requests_ok);
    ob_buf_printf(&b, "onebit_requests_total{result=\"failed\"} %llu\n", (unsigned long long)st.requests_failed);
    ob_buf_printf(&b, "onebit_requests_total{result=\"cancelled\"} %llu\n", (unsigned long long)st.requests_cancelled);
    ob_buf_printf(&b, "# HELP onebit_http_responses_total HTTP responses by status class.\n# TYPE onebit_http_responses_total counter\n");
    for (int k = 1; k < 6; k++)
        ob_buf_printf(&b, "onebit_http_responses_total{class=\"%dxx\"} %llu\n", k,
                      (unsigned long long)atomic_load(&s->http_by_class[k]));
    metric(&b, "onebit_completions_total", "counter", "Completion and chat requests accepted.",
           (double)atomic_load(&s->completions_total));
    metric(&b, "onebit_streams_total", "counter", "Streaming responses started.", (double)atomic_load(&s->streams_total));
    metric(&b, "onebit_streams_active", "gauge", "Streaming responses in progress.", (double)atomic_load(&s->streams_active));
    metric(&b, "onebit_client_disconnects_total", "counter", "Requests cancelled because the client went away.",
           (double)atomic_load(&s->client_disconnects));
    metric(&b, "onebit_prompt_tokens_total", "counter", "Prompt tokens processed.", (double)st.tokens_prompt);
    metric(&b, "onebit_cached_tokens_total", "counter", "Prompt tokens reused from the KV cache.", (double)st.tokens_cached);
    metric(&b, "onebit_generated_tokens_total", "counter", "Tokens generated.", (double)st.tokens_generated);
    metric(&b, "onebit_prompt_seconds_total", "counter", "Engine time spent on prompt processing.", st.seconds_prompt);
    metric(&b, "onebit_generate_seconds_total", "counter", "Engine time spent generating.", st.seconds_generate);
    metric(&b, "onebit_prompt_tokens_per_second", "gauge", "Average prompt processing rate.", pp);
    metric(&b, "onebit_generate_tokens_per_second", "gauge", "Average generation rate.", tg);
    metric(&b, "onebit_requests_waiting", "gauge", "Requests queued for a slot.", st.waiting);
    metric(&b, "onebit_requests_running", "gauge", "Requests in slots.", st.running);
    metric(&b, "onebit_slots", "gauge", "Slots (requests decoded together).", s->engine_params.n_parallel);
    metric(&b, "onebit_kv_blocks_used", "gauge", "KV cache pages in use.", (double)st.kv_blocks_used);
    metric(&b, "onebit_kv_blocks_total", "gauge", "KV cache pages.", (double)st.kv_blocks_total);
    metric(&b, "onebit_kv_usage_ratio", "gauge", "KV cache pages in use / total.", kv_ratio);
    metric(&b, "onebit_steps_total", "counter", "Engine steps (batches).", (double)st.steps);
    metric(&b, "onebit_preemptions_total", "counter", "Requests preempted for KV space and recomputed.", (double)st.preemptions);
    metric(&b, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", (double)st.tokens_prompt);
    metric(&b, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", (double)st.tokens_generated);
    metric(&b, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", pp);
    metric(&b, "llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", tg);
    metric(&b, "llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", kv_ratio);
    metric(&b, "llamacpp:requests_processing", "gauge", "Number of requests processing.", st.running);
    metric(&b, "llamacpp:requests_deferred", "gauge", "Number of requests deferred.", st.waiting);
    enum MHD_Result rc;
    if (!b.data) {
        ob_srv_error e;
        ob_srv_fail(&e, 0, 500, "server_error", "out_of_memory", NULL, "out of memory");
        rc = ob_srv_send_error(s, c, &e);
    } else {
        rc = ob_srv_send_text(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    }
    ob_buf_free(&b);
    return rc;
}

/* ---------------- tokenize / detokenize ---------------- */

/* Parse a small JSON body for the tokenizer endpoints. */
static json_t *load_object(const char *body, size_t len, ob_srv_error *e) {
    json_error_t jerr;
    json_t *o = len ? json_loadb(body, len, 0, &jerr) : NULL;
    if (!o) {
        if (!len) ob_srv_fail(e, OB_ERR_FORMAT, 400, "invalid_request_error", "invalid_json", NULL, "the request body is empty");
        else
            ob_srv_fail(e, OB_ERR_FORMAT, 400, "invalid_request_error", "invalid_json", NULL,
                        "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        ob_srv_fail(e, OB_ERR_FORMAT, 400, "invalid_request_error", "invalid_json", NULL, "the request body must be a JSON object");
        return NULL;
    }
    return o;
}

static bool opt_bool(json_t *o, const char *k, bool def, ob_srv_error *e, bool *ok) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return def;
    if (!json_is_boolean(v)) {
        ob_srv_fail(e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_type", k, "'%s' must be a boolean", k);
        *ok = false;
        return def;
    }
    return json_is_true(v);
}

void ob_srv_token_error(int rc, const char *what, ob_srv_error *e) {
    if (rc == OB_ERR_UNSUPPORTED)
        ob_srv_fail(e, rc, 501, "not_supported_error", "not_supported", NULL, "%s: %s", what, ob_last_error());
    else if (rc == OB_ERR_OOM)
        ob_srv_fail(e, rc, 500, "server_error", "out_of_memory", NULL, "%s: out of memory", what);
    else
        ob_srv_fail(e, rc, 400, "invalid_request_error", "invalid_value", NULL, "%s: %s", what, ob_last_error());
}

int ob_srv_tokenize_text(ob_server *s, const char *text, size_t len, bool add_special, bool parse_special, ob_token **ids,
                         int32_t *n, ob_srv_error *e) {
    *ids = NULL;
    *n = 0;
    int32_t need = 0;
    int rc = ob_tokenize(s->model, text, len, add_special, parse_special, NULL, 0, &need);
    if (rc < 0 && rc != OB_ERR_RANGE) {
        ob_srv_token_error(rc, "tokenize", e);
        return rc;
    }
    *ids = ob_malloc((size_t)(need > 0 ? need : 1) * sizeof(ob_token));
    if (!*ids) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    if (need > 0 && (rc = ob_tokenize(s->model, text, len, add_special, parse_special, *ids, need, n)) < 0) {
        ob_free(*ids);
        *ids = NULL;
        ob_srv_token_error(rc, "tokenize", e);
        return rc;
    }
    *n = need;
    return 0;
}

enum MHD_Result ob_srv_tokenize(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url;
    ob_srv_error e;
    json_t *o = load_object(body, len, &e);
    if (!o) return ob_srv_send_error(s, c, &e);
    json_t *content = json_object_get(o, "content");
    bool ok = true;
    bool add_special = opt_bool(o, "add_special", false, &e, &ok);
    bool parse_special = ok ? opt_bool(o, "parse_special", true, &e, &ok) : true;
    bool with_pieces = ok ? opt_bool(o, "with_pieces", false, &e, &ok) : false;
    if (ok && !json_is_string(content)) {
        ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", content ? "invalid_type" : "missing_field", "content",
                    content ? "'content' must be a string" : "'content' is required");
        ok = false;
    }
    ob_token *ids = NULL;
    int32_t n = 0;
    if (ok && ob_srv_tokenize_text(s, json_string_value(content), json_string_length(content), add_special, parse_special,
                                   &ids, &n, &e) < 0)
        ok = false;
    json_decref(o);
    if (!ok) return ob_srv_send_error(s, c, &e);
    json_t *arr = json_array();
    for (int32_t i = 0; i < n; i++) {
        if (!with_pieces) {
            json_array_append_new(arr, json_integer(ids[i]));
            continue;
        }
        char buf[256];
        int32_t pn = 0;
        json_t *piece;
        if (ob_token_to_piece(s->model, ids[i], buf, sizeof buf, true, &pn) < 0) piece = json_string("");
        else if (ob_utf8_valid(buf, (size_t)pn)) piece = json_stringn(buf, (size_t)pn);
        else { /* part of a character: the bytes, as llama-server gives them */
            piece = json_array();
            for (int32_t k = 0; k < pn; k++) json_array_append_new(piece, json_integer((unsigned char)buf[k]));
        }
        json_array_append_new(arr, json_pack("{s:i, s:o}", "id", (int)ids[i], "piece", piece));
    }
    ob_free(ids);
    return ob_srv_send_json(s, c, 200, json_pack("{s:o}", "tokens", arr));
}

enum MHD_Result ob_srv_detokenize(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url;
    ob_srv_error e;
    json_t *o = load_object(body, len, &e);
    if (!o) return ob_srv_send_error(s, c, &e);
    json_t *toks = json_object_get(o, "tokens");
    if (!json_is_array(toks)) {
        ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", toks ? "invalid_type" : "missing_field", "tokens",
                    toks ? "'tokens' must be an array of token ids" : "'tokens' is required");
        json_decref(o);
        return ob_srv_send_error(s, c, &e);
    }
    size_t n = json_array_size(toks);
    ob_token *ids = ob_malloc((n ? n : 1) * sizeof(ob_token));
    bool ok = ids != NULL;
    if (!ok) ob_srv_fail(&e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    for (size_t i = 0; ok && i < n; i++) {
        json_t *v = json_array_get(toks, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= s->n_vocab) {
            ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", "tokens",
                        "'tokens[%zu]' is not a token id of this model (0..%d)", i, (int)s->n_vocab - 1);
            ok = false;
        } else {
            ids[i] = (ob_token)json_integer_value(v);
        }
    }
    json_decref(o);
    char *text = NULL;
    size_t tl = 0;
    int rc;
    if (ok && (rc = ob_detokenize(s->model, ids, (int32_t)n, false, &text, &tl)) < 0) {
        ob_srv_token_error(rc, "detokenize", &e);
        ok = false;
    }
    ob_free(ids);
    if (!ok) return ob_srv_send_error(s, c, &e);
    json_t *out = json_pack("{s:s%}", "content", text ? text : "", text ? tl : (size_t)0);
    ob_free_string(text);
    return ob_srv_send_json(s, c, 200, out);
}

/* ---------------- templates and embeddings ---------------- */

enum MHD_Result ob_srv_apply_template(ob_server *s, struct MHD_Connection *c, const char *url, const char *body,
                                      size_t len) {
    (void)url;
    ob_srv_request r;
    ob_srv_error e;
    if (ob_srv_request_parse(OB_SRV_TEMPLATE, body, len, &s->defaults, &r, &e) < 0) return ob_srv_send_error(s, c, &e);
    char *text = NULL;
    size_t tl = 0;
    int rc = ob_srv_render(s, &r, &text, &tl, &e);
    ob_srv_request_free(&r);
    if (rc < 0) return ob_srv_send_error(s, c, &e);
    json_t *out = json_pack("{s:s%}", "prompt", text, tl);
    ob_free_string(text);
    return ob_srv_send_json(s, c, 200, out);
}

enum MHD_Result ob_srv_embeddings(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)body, (void)len;
    ob_srv_error e;
    ob_srv_fail(&e, 0, 501, "not_supported_error", "not_supported", NULL,
                "%s is not supported by this server yet: it serves text generation only (embeddings and reranking come "
                "with a later release)",
                url);
    return ob_srv_send_error(s, c, &e);
}
