/*
 * format.c - the JSON a job answers with, in three dialects:
 *
 *   chat         OpenAI chat.completion / chat.completion.chunk
 *   completion   OpenAI text_completion (legacy completions)
 *   native       llama-server's /completion ({"content", "stop", ...})
 *
 * plus llama-server's `timings` object in every final response and in the
 * last chunk of each streamed choice (Lemonade reads it), and OpenAI's usage
 * with prompt_tokens_details.cached_tokens. Numbers that would be NaN or
 * infinite (a rate over zero time) are written as 0: JSON has no NaN.
 */
#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"
#include "internal.h"

#define STR2(x) #x
#define STR(x) STR2(x)
static const char FINGERPRINT[] = "fp_1bit_" STR(OB_VERSION_MAJOR) "." STR(OB_VERSION_MINOR) "." STR(OB_VERSION_PATCH);

/* ---------------- tokens for logprobs ---------------- */

json_t *ob_srv_token_text(ob_server *s, ob_token id, json_t **bytes_out) {
    char small[128], *buf = small;
    int32_t n = 0;
    int rc = ob_token_to_piece(s->model, id, small, sizeof small, true, &n);
    if (rc == OB_ERR_RANGE && n > 0 && (buf = ob_malloc((size_t)n)) != NULL)
        rc = ob_token_to_piece(s->model, id, buf, n, true, &n);
    if (rc < 0) n = 0;
    if (bytes_out) {
        *bytes_out = json_array();
        for (int32_t i = 0; i < n; i++) json_array_append_new(*bytes_out, json_integer((unsigned char)buf[i]));
    }
    /* lossy text: a byte that is not part of a valid character becomes U+FFFD */
    ob_buf t = {0};
    for (int32_t i = 0; i < n;) {
        uint32_t cp;
        int k = ob_utf8_decode(buf + i, (size_t)(n - i), &cp);
        if (k > 0) {
            ob_buf_append(&t, buf + i, (size_t)k);
            i += k;
        } else {
            ob_buf_append(&t, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
    json_t *str = json_stringn(t.data ? t.data : "", t.len);
    ob_buf_free(&t);
    if (buf != small) ob_free(buf);
    return str ? str : json_string("");
}

static json_t *lp_chat(ob_server *s, const ob_srv_lp *l) {
    json_t *bytes, *tok = ob_srv_token_text(s, l->id, &bytes), *top = json_array();
    for (int k = 0; k < l->n_top; k++) {
        json_t *tb, *tt = ob_srv_token_text(s, l->top[k].id, &tb);
        json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", tt, "logprob", (double)l->top[k].logprob, "bytes", tb));
    }
    return json_pack("{s:o, s:f, s:o, s:o}", "token", tok, "logprob", (double)l->logprob, "bytes", bytes, "top_logprobs", top);
}

static json_t *lp_native(ob_server *s, const ob_srv_lp *l) {
    json_t *bytes, *tok = ob_srv_token_text(s, l->id, &bytes), *top = json_array();
    for (int k = 0; k < l->n_top; k++) {
        json_t *tb, *tt = ob_srv_token_text(s, l->top[k].id, &tb);
        json_array_append_new(top, json_pack("{s:i, s:o, s:f, s:o}", "id", (int)l->top[k].id, "token", tt, "logprob",
                                             (double)l->top[k].logprob, "bytes", tb));
    }
    return json_pack("{s:i, s:o, s:f, s:o, s:o}", "id", (int)l->id, "token", tok, "logprob", (double)l->logprob, "bytes",
                     bytes, "top_logprobs", top);
}

/* logprobs of entries [from, to) of a choice, in the job's dialect. */
static json_t *logprobs_json(ob_srv_job *j, const ob_srv_choice *c, int from, int to, int32_t offset_base) {
    ob_server *s = j->srv;
    if (j->req.api == OB_SRV_CHAT) {
        json_t *content = json_array();
        for (int i = from; i < to; i++) json_array_append_new(content, lp_chat(s, &c->lp[i]));
        return json_pack("{s:o, s:n}", "content", content, "refusal");
    }
    if (j->req.api == OB_SRV_NATIVE) {
        json_t *arr = json_array();
        for (int i = from; i < to; i++) json_array_append_new(arr, lp_native(s, &c->lp[i]));
        return arr;
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = from; i < to; i++) {
        const ob_srv_lp *l = &c->lp[i];
        json_array_append_new(tokens, ob_srv_token_text(s, l->id, NULL));
        json_array_append_new(lps, json_real(l->logprob));
        json_t *top = json_object();
        for (int k = 0; k < l->n_top; k++) {
            json_t *tt = ob_srv_token_text(s, l->top[k].id, NULL);
            json_object_set_new(top, json_string_value(tt), json_real(l->top[k].logprob));
            json_decref(tt);
        }
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer(offset_base + l->text_offset));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops, "text_offset",
                     offs);
}

/* ---------------- usage and timings ---------------- */

static double rate(double n, double ms) { return ms > 0 ? n * 1e3 / ms : 0; }
static double per_token(double ms, double n) { return n > 0 ? ms / n : 0; }

json_t *ob_srv_timings_json(const ob_srv_choice *const *chs, int n) {
    long long prompt_n = 0, cache_n = 0, pred_n = 0, draft_n = 0, draft_ok = 0;
    double prompt_ms = 0, pred_ms = 0;
    for (int i = 0; i < n; i++) {
        const ob_event *d = &chs[i]->done;
        draft_n += d->n_drafted;
        draft_ok += d->n_draft_accepted;
        prompt_n += d->n_prompt - d->n_cached;
        cache_n += d->n_cached;
        pred_n += ob_srv_choice_completion_tokens(chs[i]);
        if (d->t_prompt_ms > prompt_ms) prompt_ms = d->t_prompt_ms;
        if (d->t_gen_ms > pred_ms) pred_ms = d->t_gen_ms;
    }
    json_t *t = json_pack("{s:I, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:I}", "prompt_n", (json_int_t)prompt_n, "prompt_ms", prompt_ms,
                     "prompt_per_token_ms", per_token(prompt_ms, (double)prompt_n), "prompt_per_second",
                     rate((double)prompt_n, prompt_ms), "predicted_n", (json_int_t)pred_n, "predicted_ms", pred_ms,
                     "predicted_per_token_ms", per_token(pred_ms, (double)pred_n), "predicted_per_second",
                     rate((double)pred_n, pred_ms), "cache_n", (json_int_t)cache_n);
    if (t && draft_n > 0) { /* speculative decoding: as llama-server, only when something was drafted */
        json_object_set_new(t, "draft_n", json_integer(draft_n));
        json_object_set_new(t, "draft_n_accepted", json_integer(draft_ok));
    }
    return t;
}

static json_t *job_timings(const ob_srv_job *j) {
    const ob_srv_choice *chs[OB_SRV_MAX_CHOICES];
    int n = j->n_ch < OB_SRV_MAX_CHOICES ? j->n_ch : OB_SRV_MAX_CHOICES;
    for (int i = 0; i < n; i++) chs[i] = &j->ch[i];
    return ob_srv_timings_json(chs, n);
}

/* The prompt is counted once per prompt however many choices answer it. */
json_t *ob_srv_usage_json(const ob_srv_job *j) {
    long long prompt = 0, completion = 0, cached = 0;
    for (int p = 0; p < j->req.n_prompts; p++) prompt += j->prompt_tokens[p];
    for (int i = 0; i < j->n_ch; i++) {
        completion += ob_srv_choice_completion_tokens(&j->ch[i]);
        if (i % j->req.n == 0) cached += j->ch[i].done.n_cached;
    }
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)prompt, "completion_tokens",
                     (json_int_t)completion, "total_tokens", (json_int_t)(prompt + completion), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)cached);
}

/* ---------------- llama-server's /completion ---------------- */

static const char *stop_type(const ob_srv_choice *c) {
    if (c->stop_hit) return "word";
    if (c->done.finish == OB_FINISH_STOP) return "eos";
    if (c->done.finish == OB_FINISH_LENGTH) return "limit";
    return "none";
}

static json_t *native_final(ob_srv_job *j, ob_srv_choice *c, const char *content, size_t len) {
    ob_server *s = j->srv;
    const ob_srv_choice *one = c;
    json_t *o = json_pack("{s:i, s:s%, s:o, s:i, s:b, s:s, s:i, s:i, s:s, s:b, s:s, s:s, s:i, s:o}", "index", c->index, "content",
                          content, len, "tokens", json_array(), "id_slot", -1, "stop", 1, "model", s->model_id,
                          "tokens_predicted", (int)ob_srv_choice_completion_tokens(c), "tokens_evaluated",
                          (int)j->prompt_tokens[c->prompt], "prompt", j->prompt_text[c->prompt], "truncated", 0, "stop_type",
                          stop_type(c), "stopping_word", c->stop_hit ? j->req.stop[c->stop_which] : "", "tokens_cached",
                          (int)c->done.n_cached, "timings", ob_srv_timings_json(&one, 1));
    if (o && j->req.gen.top_logprobs >= 0)
        json_object_set_new(o, "completion_probabilities", logprobs_json(j, c, c->lp_taken, c->lp_ready, 0));
    return o;
}

/* ---------------- tool calls ---------------- */

/* OpenAI's tool_calls array: [{"id", "type": "function", "function": {"name",
 * "arguments"}}]; streamed ones also carry "index". */
static json_t *tool_call_json(const ob_srv_choice *c, int k, bool with_index, bool with_args) {
    const ob_tc_call *t = &c->calls.calls[k];
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", t->id ? t->id : "", "type", "function", "function", "name",
                          t->name, "arguments", with_args ? t->arguments : "");
    if (o && with_index) json_object_set_new(o, "index", json_integer(k));
    return o;
}

static json_t *tool_calls_json(const ob_srv_choice *c, bool with_index) {
    json_t *arr = json_array();
    for (int k = 0; k < c->calls.n_calls; k++) json_array_append_new(arr, tool_call_json(c, k, with_index, true));
    return arr;
}

/* ---------------- whole responses ---------------- */

json_t *ob_srv_job_response(ob_srv_job *j) {
    ob_server *s = j->srv;
    if (j->req.api == OB_SRV_NATIVE) {
        if (j->n_ch == 1) return native_final(j, &j->ch[0], j->ch[0].content.data ? j->ch[0].content.data : "", j->ch[0].content.len);
        json_t *arr = json_array();
        for (int i = 0; i < j->n_ch; i++)
            json_array_append_new(arr, native_final(j, &j->ch[i], j->ch[i].content.data ? j->ch[i].content.data : "",
                                                    j->ch[i].content.len));
        return arr;
    }
    bool chat = j->req.api == OB_SRV_CHAT;
    json_t *choices = json_array();
    for (int i = 0; i < j->n_ch; i++) {
        ob_srv_choice *c = &j->ch[i];
        json_t *lp = j->req.gen.top_logprobs >= 0 ? logprobs_json(j, c, 0, c->lp_ready, 0) : json_null();
        json_t *choice;
        if (chat) {
            json_t *msg = json_pack("{s:s, s:s%}", "role", "assistant", "content", c->content.data ? c->content.data : "",
                                    c->content.len);
            if (c->reasoning.len) json_object_set_new(msg, "reasoning_content", json_stringn(c->reasoning.data, c->reasoning.len));
            if (msg && c->calls.n_calls > 0) {
                if (c->content.len == 0) json_object_set_new(msg, "content", json_null()); /* as OpenAI answers a pure call */
                json_object_set_new(msg, "tool_calls", tool_calls_json(c, false));
            }
            choice = json_pack("{s:i, s:o, s:o, s:s}", "index", c->index, "message", msg, "logprobs", lp, "finish_reason",
                               ob_srv_choice_finish_reason(c));
        } else {
            ob_buf text = {0};
            int32_t base = 0;
            if (j->req.echo) {
                ob_buf_puts(&text, j->prompt_text[c->prompt]);
                for (size_t k = 0; k < text.len; k++) base += ((unsigned char)text.data[k] & 0xC0) != 0x80;
            }
            ob_buf_append(&text, c->content.data ? c->content.data : "", c->content.len);
            if (j->req.gen.top_logprobs >= 0) {
                json_decref(lp);
                lp = logprobs_json(j, c, 0, c->lp_ready, base);
            }
            choice = json_pack("{s:i, s:s%, s:o, s:s}", "index", c->index, "text", text.data ? text.data : "", text.len,
                               "logprobs", lp, "finish_reason", ob_srv_choice_finish_reason(c));
            ob_buf_free(&text);
        }
        json_array_append_new(choices, choice);
    }
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o, s:o}", "id", j->id, "object",
                     chat ? "chat.completion" : "text_completion", "created", (json_int_t)j->created, "model", s->model_id,
                     "system_fingerprint", FINGERPRINT, "choices", choices, "usage", ob_srv_usage_json(j), "timings",
                     job_timings(j));
}

/* ---------------- streaming ---------------- */

static int sse(ob_buf *out, json_t *v) {
    if (!v) return ob_err(OB_ERR_OOM, "chunk");
    char *text = ob_srv_dumps(v);
    json_decref(v);
    if (!text) return ob_err(OB_ERR_OOM, "chunk");
    int rc = ob_buf_printf(out, "data: %s\n\n", text);
    free(text);
    return rc;
}

/* A chunk's envelope with one choice in it. */
static json_t *chunk(ob_srv_job *j, json_t *choice) {
    bool chat = j->req.api == OB_SRV_CHAT;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", j->id, "object",
                          chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)j->created, "model",
                          j->srv->model_id, "system_fingerprint", FINGERPRINT, "choices", choice);
    if (o && j->req.include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

static int stream_choice(ob_srv_job *j, ob_srv_choice *c, ob_buf *out) {
    const bool chat = j->req.api == OB_SRV_CHAT, native = j->req.api == OB_SRV_NATIVE, want_lp = j->req.gen.top_logprobs >= 0;
    if (!c->role_sent) {
        c->role_sent = true;
        if (chat) {
            json_t *delta = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
            OB_TRY(sse(out, chunk(j, json_pack("{s:i, s:o, s:n, s:n}", "index", c->index, "delta", delta, "logprobs",
                                               "finish_reason"))));
        } else if (j->req.echo && !native) {
            const char *pt = j->prompt_text[c->prompt];
            OB_TRY(sse(out, chunk(j, json_pack("{s:i, s:s, s:n, s:n}", "index", c->index, "text", pt, "logprobs",
                                               "finish_reason"))));
        }
    }
    bool has_lp = want_lp && c->lp_ready > c->lp_taken;
    if (c->content.len || c->reasoning.len || has_lp) {
        json_t *lp = has_lp ? logprobs_json(j, c, c->lp_taken, c->lp_ready, 0) : json_null();
        json_t *v;
        if (native) {
            v = json_pack("{s:i, s:s%, s:b, s:i, s:o}", "index", c->index, "content", c->content.data ? c->content.data : "",
                          c->content.len, "stop", 0, "id_slot", -1, "tokens", json_array());
            if (v && has_lp) json_object_set(v, "completion_probabilities", lp);
            json_decref(lp);
        } else if (chat) {
            json_t *delta = json_object();
            if (c->reasoning.len) json_object_set_new(delta, "reasoning_content", json_stringn(c->reasoning.data, c->reasoning.len));
            if (c->content.len) json_object_set_new(delta, "content", json_stringn(c->content.data, c->content.len));
            v = chunk(j, json_pack("{s:i, s:o, s:o, s:n}", "index", c->index, "delta", delta, "logprobs", lp, "finish_reason"));
        } else {
            v = chunk(j, json_pack("{s:i, s:s%, s:o, s:n}", "index", c->index, "text", c->content.data ? c->content.data : "",
                                   c->content.len, "logprobs", lp, "finish_reason"));
        }
        ob_buf_clear(&c->content);
        ob_buf_clear(&c->reasoning);
        c->lp_taken = c->lp_ready;
        OB_TRY(sse(out, v));
    }
    if (!c->finished || c->final_sent) return 0;
    if (chat && !c->failed && !c->calls_sent) {
        /* as llama-server streams them: per call, a chunk that opens it (index,
         * id, type, name, empty arguments), then one with its arguments */
        c->calls_sent = true;
        for (int k = 0; k < c->calls.n_calls; k++) {
            json_t *open = json_pack("{s:[o]}", "tool_calls", tool_call_json(c, k, true, false));
            OB_TRY(sse(out, chunk(j, json_pack("{s:i, s:o, s:n, s:n}", "index", c->index, "delta", open, "logprobs",
                                               "finish_reason"))));
            json_t *args = json_pack("{s:[{s:i, s:{s:s}}]}", "tool_calls", "index", k, "function", "arguments",
                                     c->calls.calls[k].arguments);
            OB_TRY(sse(out, chunk(j, json_pack("{s:i, s:o, s:n, s:n}", "index", c->index, "delta", args, "logprobs",
                                               "finish_reason"))));
        }
    }
    c->final_sent = true;
    if (c->failed) {
        ob_srv_error e;
        ob_srv_fail(&e, 0, 500, "server_error", "engine_error", NULL, "%s", c->fail_msg);
        char *text = ob_srv_error_json(&e);
        if (!text) return ob_err(OB_ERR_OOM, "chunk");
        int rc = ob_buf_printf(out, "data: %s\n\n", text);
        free(text);
        return rc;
    }
    const ob_srv_choice *one = c;
    if (native) return sse(out, native_final(j, c, "", 0));
    json_t *v;
    if (chat)
        v = chunk(j, json_pack("{s:i, s:{}, s:n, s:s}", "index", c->index, "delta", "logprobs", "finish_reason",
                               ob_srv_choice_finish_reason(c)));
    else
        v = chunk(j, json_pack("{s:i, s:s, s:n, s:s}", "index", c->index, "text", "", "logprobs", "finish_reason",
                               ob_srv_choice_finish_reason(c)));
    if (v) json_object_set_new(v, "timings", ob_srv_timings_json(&one, 1));
    return sse(out, v);
}

int ob_srv_job_stream(ob_srv_job *j, ob_buf *out, bool *ended) {
    *ended = j->done_sent;
    if (j->done_sent) return 0;
    bool all_final = true;
    for (int i = 0; i < j->n_ch; i++) {
        OB_TRY(stream_choice(j, &j->ch[i], out));
        all_final &= j->ch[i].final_sent;
    }
    if (!all_final) return 0;
    if (j->req.api != OB_SRV_NATIVE) {
        if (j->req.include_usage && !j->usage_sent) {
            bool chat = j->req.api == OB_SRV_CHAT;
            json_t *v = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[], s:o, s:o}", "id", j->id, "object",
                                  chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)j->created,
                                  "model", j->srv->model_id, "system_fingerprint", FINGERPRINT, "choices", "usage",
                                  ob_srv_usage_json(j), "timings", job_timings(j));
            OB_TRY(sse(out, v));
            j->usage_sent = true;
        }
        OB_TRY(ob_buf_puts(out, "data: [DONE]\n\n"));
    }
    j->done_sent = true;
    *ended = true;
    return 0;
}
