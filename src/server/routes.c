/*
 * routes.c - the endpoints that are not completions: health, models, props,
 * slots, metrics, tokenize, detokenize, apply-template, embeddings (with
 * --embeddings; reranking answers 501). Response shapes follow
 * llama-server's where it has the endpoint, so its clients (Lemonade among
 * them) read ours unchanged.
 */
#include <math.h>
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

/* llama-server's shape, from the engine's per-slot snapshot (taken after
 * its last step), plus n_prompt_tokens / n_past / n_cached, which it keeps
 * inside "prompt" handling. ?fail_on_no_slot=1 answers 503 when every slot
 * is busy, as llama-server does. */
enum MHD_Result ob_srv_slots(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url, (void)body, (void)len;
    int32_t n = 0, cap = s->engine_params.n_parallel > 0 ? s->engine_params.n_parallel : 1;
    ob_slot_info *si = ob_calloc((size_t)cap, sizeof *si);
    if (!si) {
        ob_srv_error e;
        ob_srv_fail(&e, 0, 500, "server_error", "out_of_memory", NULL, "out of memory");
        return ob_srv_send_error(s, c, &e);
    }
    ob_engine_get_slots(s->engine, si, cap, &n);
    json_t *arr = json_array();
    int idle = 0;
    for (int32_t i = 0; i < n; i++) {
        const ob_slot_info *x = &si[i];
        idle += !x->is_processing;
        int32_t remain = x->n_predict > 0 ? x->n_predict - x->n_decoded : -1;
        json_t *next = json_pack("{s:b, s:b, s:i, s:i, s:s}", "has_next_token", x->has_next_token, "has_new_line", 0,
                                 "n_remain", (int)remain, "n_decoded", (int)x->n_decoded, "stopping_word", "");
        if (next && x->next_token >= 0) json_object_set_new(next, "id", json_integer(x->next_token));
        json_array_append_new(arr, json_pack("{s:i, s:I, s:i, s:b, s:b, s:i, s:i, s:i, s:o, s:o}", "id", (int)x->id, "id_task",
                                             (json_int_t)x->id_task, "n_ctx", (int)s->n_ctx, "speculative",
                                             s->engine_params.spec.type != OB_SPEC_NONE, "is_processing", x->is_processing,
                                             "n_prompt_tokens", (int)x->n_prompt, "n_past", (int)x->n_past, "n_cached",
                                             (int)x->n_cached, "params", sampling_json(&s->defaults), "next_token", next));
    }
    ob_free(si);
    const char *fail = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
    if (fail && strcmp(fail, "0") != 0 && strcmp(fail, "false") != 0 && idle == 0) {
        json_decref(arr);
        ob_srv_error e;
        ob_srv_fail(&e, 0, 503, "unavailable_error", "no_slot_available", NULL, "no slot available");
        return ob_srv_send_error(s, c, &e);
    }
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

/* The router's counters (issue 12, docs/router.md): decisions per class,
 * requests per target (with --router), cache hits, threshold fallbacks and
 * a histogram of the time a decision takes. */
static void route_metrics(ob_server *s, ob_buf *b) {
    ob_route_stats rs;
    ob_route_service_stats(s->router, &rs);
    metric(b, "onebit_route_enabled", "gauge", "1 when --router applies the route policy.", ob_route_service_applies(s->router));
    ob_buf_printf(b, "# HELP onebit_route_decisions_total Chat requests by router class.\n"
                     "# TYPE onebit_route_decisions_total counter\n");
    for (int k = 0; k <= OB_ROUTE_N; k++)
        ob_buf_printf(b, "onebit_route_decisions_total{class=\"%s\"} %llu\n",
                      k < OB_ROUTE_N ? ob_route_class_name((ob_route_class)k) : "unclassified",
                      (unsigned long long)rs.decisions[k]);
    if (ob_route_service_applies(s->router)) {
        const ob_route_policy *pol = ob_route_service_policy(s->router);
        ob_buf_printf(b, "# HELP onebit_route_target_requests_total Chat requests by the route policy's target.\n"
                         "# TYPE onebit_route_target_requests_total counter\n");
        for (int t = 0; t < pol->n_targets; t++)
            ob_buf_printf(b, "onebit_route_target_requests_total{target=\"%s\"} %llu\n", pol->targets[t].name,
                          (unsigned long long)rs.by_target[t]);
    }
    metric(b, "onebit_route_classified_total", "counter", "Router classifier runs (conversations seen first).",
           (double)rs.classified);
    metric(b, "onebit_route_cache_hits_total", "counter", "Decisions reused from an earlier turn of the conversation.",
           (double)rs.cache_hits);
    metric(b, "onebit_route_below_min_conf_total", "counter", "Decisions under --route-min-conf (default target).",
           (double)rs.below_min_conf);
    metric(b, "onebit_route_min_conf", "gauge", "The confidence threshold in use.", ob_route_service_min_conf(s->router));
    ob_buf_printf(b, "# HELP onebit_route_decision_seconds Time a routing decision takes (parse, cache, classifier).\n"
                     "# TYPE onebit_route_decision_seconds histogram\n");
    uint64_t cum = 0;
    for (int k = 0; k <= OB_ROUTE_LAT_BUCKETS; k++) {
        cum += rs.lat_count[k];
        if (k < OB_ROUTE_LAT_BUCKETS)
            ob_buf_printf(b, "onebit_route_decision_seconds_bucket{le=\"%g\"} %llu\n", ob_route_lat_bounds[k],
                          (unsigned long long)cum);
        else
            ob_buf_printf(b, "onebit_route_decision_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    ob_buf_printf(b, "onebit_route_decision_seconds_sum %.9g\nonebit_route_decision_seconds_count %llu\n", rs.lat_sum,
                  (unsigned long long)cum);
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
    if (s->router) route_metrics(s, &b);
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

/* ---- embeddings ---- */

/* One input's tokens: text (tokenized with the model's BOS/EOS, as
 * llama-server does) or token ids as given. */
static int embd_input(ob_server *s, json_t *v, const char *param, ob_token **ids, int32_t *n, ob_srv_error *e) {
    *ids = NULL;
    *n = 0;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0)
            return ob_srv_fail(e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", param,
                               "'%s' must not be empty", param);
        OB_TRY(ob_srv_tokenize_text(s, json_string_value(v), json_string_length(v), true, true, ids, n, e));
    } else if (json_is_array(v) && json_array_size(v) > 0) {
        size_t k = json_array_size(v);
        *ids = ob_malloc(k * sizeof(ob_token));
        if (!*ids) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
        for (size_t i = 0; i < k; i++) {
            json_t *t = json_array_get(v, i);
            if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= s->n_vocab)
                return ob_srv_fail(e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", param,
                                   "'%s[%zu]' is not a token id of this model (0..%d)", param, i, (int)s->n_vocab - 1);
            (*ids)[i] = (ob_token)json_integer_value(t);
        }
        *n = (int32_t)k;
    } else {
        return ob_srv_fail(e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_type", param,
                           "'%s' must be a non-empty string or array of token ids", param);
    }
    if (*n == 0)
        return ob_srv_fail(e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", param,
                           "'%s' gives no tokens", param);
    if (*n > s->n_ctx)
        return ob_srv_fail(e, OB_ERR_RANGE, 400, "invalid_request_error", "context_length_exceeded", param,
                           "'%s' is %d tokens, %d more than the context of %d tokens allows", param, (int)*n,
                           (int)(*n - s->n_ctx), (int)s->n_ctx);
    return 0;
}

/* Run one input through the embeddings context and pool it into out[n_embd],
 * L2-normalised. Caller holds embd_lock. The input is decoded in chunks of
 * n_batch; only the rows the pooling needs are produced. */
static int embd_run(ob_server *s, const ob_token *ids, int32_t n, float *out, ob_srv_error *e) {
    ob_context *ctx = s->embd_ctx;
    const int32_t E = ob_model_n_embd(s->model), nb = ob_context_get_params(ctx)->n_batch;
    int32_t *pos = ob_malloc((size_t)nb * sizeof(int32_t)), *seq = ob_calloc((size_t)nb, sizeof(int32_t));
    int8_t *want = ob_malloc((size_t)nb);
    double *acc = ob_calloc((size_t)E, sizeof(double));
    int rc = pos && seq && want && acc ? 0 : OB_ERR_OOM;
    ob_seq_remove(ctx, 0, 0);
    for (int32_t start = 0; rc == 0 && start < n; start += nb) {
        int32_t k = n - start < nb ? n - start : nb;
        for (int32_t i = 0; i < k; i++) {
            pos[i] = start + i;
            int32_t p = start + i;
            want[i] = s->pooling == OB_SRV_POOL_MEAN || (s->pooling == OB_SRV_POOL_CLS && p == 0) ||
                      (s->pooling == OB_SRV_POOL_LAST && p == n - 1);
        }
        ob_batch b = {k, ids + start, pos, seq, want};
        if ((rc = ob_decode(ctx, &b)) < 0) break;
        for (int32_t i = 0; i < k; i++) {
            if (!want[i]) continue;
            const float *h = ob_get_embeddings(ctx, i);
            if (!h) {
                rc = ob_err(OB_ERR_INTERNAL, "no embedding for row %d", (int)i);
                break;
            }
            for (int32_t d = 0; d < E; d++) acc[d] += h[d];
        }
    }
    ob_seq_remove(ctx, 0, 0);
    if (rc == 0) {
        double norm = 0;
        for (int32_t d = 0; d < E; d++) norm += acc[d] * acc[d]; /* mean's 1/n cancels in the normalisation */
        norm = norm > 0 ? 1.0 / sqrt(norm) : 0;
        for (int32_t d = 0; d < E; d++) out[d] = (float)(acc[d] * norm);
    }
    ob_free(pos);
    ob_free(seq);
    ob_free(want);
    ob_free(acc);
    if (rc == OB_ERR_OOM) return ob_srv_fail(e, rc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    if (rc < 0) return ob_srv_fail(e, rc, 500, "server_error", "engine_error", NULL, "embedding failed: %s", ob_last_error());
    return 0;
}

static json_t *embd_vector(const float *v, int32_t E, bool base64) {
    if (!base64) {
        json_t *a = json_array();
        for (int32_t d = 0; d < E; d++) json_array_append_new(a, json_real(v[d]));
        return a;
    }
    /* OpenAI's base64: the float32 little-endian bytes */
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)v;
    size_t n = (size_t)E * 4, o = 0;
    char *t = ob_malloc((n + 2) / 3 * 4 + 1);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        t[o++] = tbl[x >> 18 & 63];
        t[o++] = tbl[x >> 12 & 63];
        t[o++] = i + 1 < n ? tbl[x >> 6 & 63] : '=';
        t[o++] = i + 2 < n ? tbl[x & 63] : '=';
    }
    json_t *str = json_stringn(t, o);
    ob_free(t);
    return str;
}

/* POST /v1/embeddings, /embeddings (OpenAI's shape) and /embedding
 * (llama-server's: [{"index", "embedding": [[...]]}], "content" accepted
 * for "input"). Inputs run one after another on the embeddings context. */
enum MHD_Result ob_srv_embeddings(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    ob_srv_error e;
    if (!s->embd_ctx) {
        ob_srv_fail(&e, 0, 501, "not_supported_error", "not_supported", NULL,
                    "this server does not serve embeddings: start it with --embeddings");
        return ob_srv_send_error(s, c, &e);
    }
    const bool native = !strcmp(url, "/embedding");
    json_t *o = load_object(body, len, &e);
    if (!o) return ob_srv_send_error(s, c, &e);
    json_t *input = json_object_get(o, "input");
    const char *param = "input";
    if (!input && native) input = json_object_get(o, "content"), param = "content";
    json_t *model = json_object_get(o, "model"), *fmt = json_object_get(o, "encoding_format"), *dims = json_object_get(o, "dimensions");
    const int32_t E = ob_model_n_embd(s->model);
    bool ok = true, base64 = false;
    if (!input) {
        ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "missing_field", param, "'%s' is required", param);
        ok = false;
    } else if (model && !json_is_null(model) && (!json_is_string(model) || !ob_srv_model_name_ok(s, json_string_value(model)))) {
        if (!json_is_string(model))
            ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_type", "model", "'model' must be a string");
        else
            ob_srv_fail(&e, OB_ERR_NOT_FOUND, 404, "invalid_request_error", "model_not_found", "model",
                        "the model '%s' does not exist here; this server serves '%s'", json_string_value(model), s->model_id);
        ok = false;
    } else if (fmt && !json_is_null(fmt) &&
               (!json_is_string(fmt) || (strcmp(json_string_value(fmt), "float") && strcmp(json_string_value(fmt), "base64")))) {
        ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", "encoding_format",
                    "'encoding_format' must be \"float\" or \"base64\"");
        ok = false;
    } else if (dims && !json_is_null(dims) && (!json_is_integer(dims) || json_integer_value(dims) != E)) {
        ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "unsupported_parameter", "dimensions",
                    "'dimensions' can only be this model's embedding size, %d", (int)E);
        ok = false;
    } else if (s->pooling == OB_SRV_POOL_NONE) {
        ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", "pooling",
                    "the server runs with --pooling none, which gives one vector per token; OpenAI embeddings need a "
                    "pooled vector (start with --pooling mean, cls or last)");
        ok = false;
    }
    if (ok) base64 = json_is_string(fmt) && !strcmp(json_string_value(fmt), "base64") && !native;
    /* one input or several: a string, ids, or an array of those */
    json_t *items = NULL;
    bool many = false;
    if (ok) {
        many = json_is_array(input) && json_array_size(input) > 0 &&
                    (json_is_string(json_array_get(input, 0)) || json_is_array(json_array_get(input, 0)));
        items = many ? json_incref(input) : json_pack("[O]", input);
        if (json_array_size(items) > 2048) {
            ob_srv_fail(&e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", param,
                        "'%s' has %zu inputs; at most 2048 per request", param, json_array_size(items));
            ok = false;
        }
    }
    float *vec = ok ? ob_malloc((size_t)E * sizeof(float)) : NULL;
    if (ok && !vec) {
        ob_srv_fail(&e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
        ok = false;
    }
    json_t *data = json_array();
    long long n_tokens = 0;
    for (size_t i = 0; ok && i < json_array_size(items); i++) {
        char p[64];
        if (many) snprintf(p, sizeof p, "%s[%zu]", param, i);
        else snprintf(p, sizeof p, "%s", param);
        ob_token *ids = NULL;
        int32_t n = 0;
        int rc = embd_input(s, json_array_get(items, i), p, &ids, &n, &e);
        if (rc == 0) {
            pthread_mutex_lock(&s->embd_lock);
            rc = embd_run(s, ids, n, vec, &e);
            pthread_mutex_unlock(&s->embd_lock);
        }
        ob_free(ids);
        if (rc < 0) {
            ok = false;
            break;
        }
        n_tokens += n;
        json_t *v = embd_vector(vec, E, base64);
        if (native) json_array_append_new(data, json_pack("{s:i, s:[o]}", "index", (int)i, "embedding", v));
        else json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index", (int)i, "embedding", v));
    }
    ob_free(vec);
    json_decref(items);
    json_decref(o);
    if (!ok) {
        json_decref(data);
        return ob_srv_send_error(s, c, &e);
    }
    if (native) return ob_srv_send_json(s, c, 200, data);
    return ob_srv_send_json(s, c, 200,
                            json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model", s->model_id,
                                      "usage", "prompt_tokens", (json_int_t)n_tokens, "total_tokens", (json_int_t)n_tokens));
}

enum MHD_Result ob_srv_rerank(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)body, (void)len;
    ob_srv_error e;
    ob_srv_fail(&e, 0, 501, "not_supported_error", "not_supported", NULL,
                "%s is not supported by this server: reranking models are not implemented", url);
    return ob_srv_send_error(s, c, &e);
}
