/*
 * job.c - one completions request in flight: from a validated request to
 * engine requests (one per choice), and from engine events back to text.
 *
 * Per choice, each token event goes through:
 *   streaming detokenizer  -> complete UTF-8 text for this token
 *   stop strings           -> text that cannot be part of a stop is released;
 *                             a possible stop prefix is held; a full match
 *                             ends the choice (the engine request is
 *                             cancelled and the stop text is never shown)
 *   reasoning split        -> released text goes to `content` or, inside
 *                             <think>...</think>, to `reasoning` (chat only)
 * format.c takes what was released (streaming: after every poll; otherwise
 * at the end) and builds the JSON.
 *
 * Choices of one request are independent engine requests: n > 1 gives n
 * requests with seeds seed+0, seed+1, ... (a random seed when none is given),
 * so a seeded request is reproducible and its choices still differ.
 */
#include <stdio.h>
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "internal.h"

/* ---------------- prompt preparation ---------------- */

int ob_srv_render(ob_server *s, const ob_srv_request *r, char **text, size_t *len, ob_srv_error *e) {
    *text = NULL;
    *len = 0;
    char *out = NULL;
    size_t n = 0;
    int rc = ob_chat_render(s->model, s->chat_template, r->chat_context, r->chat_context_len, &out, &n);
    if (rc < 0) {
        if (rc == OB_ERR_OOM) return ob_srv_fail(e, rc, 500, "server_error", "out_of_memory", NULL, "out of memory");
        if (rc == OB_ERR_UNSUPPORTED)
            return ob_srv_fail(e, rc, 501, "not_supported_error", "not_supported", NULL, "chat template: %s", ob_last_error());
        return ob_srv_fail(e, rc, 400, "invalid_request_error", "template_error", "messages",
                           "the chat template could not render these messages: %s", ob_last_error());
    }
    /* our own copy, so every string of a job is freed the same way */
    *text = ob_strndup(out ? out : "", n);
    ob_free_string(out);
    if (!*text) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    *len = n;
    return 0;
}

static int engine_error(int rc, const char *param, ob_srv_error *e) {
    if (rc == OB_ERR_FULL)
        return ob_srv_fail(e, rc, 503, "unavailable_error", "server_busy", NULL, "the server is busy (%s); try again later",
                           ob_last_error());
    if (rc == OB_ERR_RANGE)
        return ob_srv_fail(e, rc, 400, "invalid_request_error", "context_length_exceeded", param, "%s", ob_last_error());
    if (rc == OB_ERR_INVALID_ARG)
        return ob_srv_fail(e, rc, 400, "invalid_request_error", "invalid_value", param, "%s", ob_last_error());
    if (rc == OB_ERR_OOM) return ob_srv_fail(e, rc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    return ob_srv_fail(e, rc, 500, "server_error", "engine_error", NULL, "%s", ob_last_error());
}

/* Tokens of prompt p (allocated), checked against the vocabulary and the
 * context. Text gets the model's BOS as llama-server adds it; a rendered
 * chat template that already starts with BOS text does not get a second. */
static int prompt_tokens(ob_srv_job *j, int p, ob_token **ids, int32_t *n, ob_srv_error *e) {
    ob_server *s = j->srv;
    ob_srv_prompt *pr = &j->req.prompts[p];
    const char *param = j->req.api == OB_SRV_CHAT ? "messages" : "prompt";
    *ids = NULL;
    *n = 0;
    if (pr->text) {
        OB_TRY(ob_srv_tokenize_text(s, pr->text, pr->len, true, true, ids, n, e));
        ob_token bos = ob_token_bos(s->model);
        if (*n >= 2 && bos >= 0 && (*ids)[0] == bos && (*ids)[1] == bos) {
            memmove(*ids, *ids + 1, (size_t)(*n - 1) * sizeof(ob_token));
            (*n)--;
        }
        if (*n == 0) {
            if (bos < 0) return ob_srv_fail(e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", param,
                                            "the prompt is empty and the model has no BOS token to start from");
            (*ids)[0] = bos;
            *n = 1;
        }
    } else {
        for (int32_t i = 0; i < pr->n_ids; i++)
            if (pr->ids[i] >= s->n_vocab)
                return ob_srv_fail(e, OB_ERR_INVALID_ARG, 400, "invalid_request_error", "invalid_value", param,
                                   "prompt token %d at index %d is not a token of this model (vocabulary of %d)",
                                   (int)pr->ids[i], (int)i, (int)s->n_vocab);
        *ids = ob_malloc((size_t)pr->n_ids * sizeof(ob_token));
        if (!*ids) return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
        memcpy(*ids, pr->ids, (size_t)pr->n_ids * sizeof(ob_token));
        *n = pr->n_ids;
    }
    if (*n >= s->n_ctx)
        return ob_srv_fail(e, OB_ERR_RANGE, 400, "invalid_request_error", "context_length_exceeded", param,
                           "the prompt is %d tokens, %d more than the context of %d tokens allows (one position must be left "
                           "for the answer; the server was started with -c %d)",
                           (int)*n, (int)(*n - s->n_ctx + 1), (int)s->n_ctx, (int)s->n_ctx);
    return 0;
}

/* The prompt as text, for echo and /completion's "prompt". */
static int prompt_text(ob_srv_job *j, int p, const ob_token *ids, int32_t n, ob_srv_error *e) {
    ob_srv_prompt *pr = &j->req.prompts[p];
    if (pr->text) {
        j->prompt_text[p] = ob_strndup(pr->text, pr->len);
    } else {
        char *t = NULL;
        size_t tl = 0;
        int rc = ob_detokenize(j->srv->model, ids, n, true, &t, &tl); /* as text: no <s> */
        if (rc < 0) {
            ob_srv_token_error(rc, "detokenize the prompt", e);
            return rc;
        }
        j->prompt_text[p] = ob_strndup(t, tl);
        ob_free_string(t);
    }
    return j->prompt_text[p] ? 0 : ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
}

/* Issue 12 (docs/router.md): decide the chat request's class, once per
 * conversation; with --router, name the route in the X-1bit-Route header,
 * log it, and remember it so every choice is submitted with its target's
 * settings. Never fails the request. */
static void route(ob_srv_job *j) {
    ob_server *s = j->srv;
    if (!s->router) return;
    ob_route_service_decide(s->router, j->req.chat_context, j->req.chat_context_len, &j->route);
    char hdr[192];
    if (ob_route_service_header(s->router, &j->route, hdr, sizeof hdr) < 0) hdr[0] = '\0';
    if (!ob_route_service_applies(s->router)) {
        OB_LOGD("route: %s (%.1f us; not applied without --router)", hdr, j->route.seconds * 1e6);
        return;
    }
    j->routed = true;
    ob_srv_set_route_header(hdr);
    if (!s->quiet) OB_LOGI("route: %s (%.1f us)", hdr, j->route.seconds * 1e6);
}

int ob_srv_job_start(ob_server *s, ob_srv_request *req, ob_srv_job **out, ob_srv_error *e) {
    *out = NULL;
    ob_srv_job *j = ob_calloc(1, sizeof *j);
    if (!j) {
        ob_srv_request_free(req);
        return ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    }
    j->srv = s;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->created = (long long)time(NULL);
    ob_srv_random_id(j->req.api == OB_SRV_CHAT ? "chatcmpl-" : "cmpl-", j->id, sizeof j->id);
    int rc = 0;
    if (!ob_srv_model_name_ok(s, j->req.model))
        rc = ob_srv_fail(e, OB_ERR_NOT_FOUND, 404, "invalid_request_error", "model_not_found", "model",
                         "the model '%s' does not exist here; this server serves '%s'", j->req.model, s->model_id);

    if (rc == 0 && j->req.api == OB_SRV_CHAT) route(j);
    if (rc == 0 && j->req.api == OB_SRV_CHAT) {
        char *text = NULL;
        size_t tl = 0;
        rc = ob_srv_render(s, &j->req, &text, &tl, e);
        if (rc == 0) {
            j->req.prompts = ob_calloc(1, sizeof *j->req.prompts);
            if (!j->req.prompts) {
                ob_free(text);
                rc = ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
            } else {
                j->req.n_prompts = 1;
                j->req.prompts[0].text = text;
                j->req.prompts[0].len = tl;
                j->think_opened = j->req.reasoning && ob_srv_prompt_opens_think(text, tl);
                j->tc_format = ob_tc_detect(s->chat_template ? s->chat_template : ob_model_chat_template(s->model));
            }
        }
    }

    const int np = j->req.n_prompts;
    ob_token **ids = NULL;
    int32_t *nids = NULL;
    if (rc == 0) {
        ids = ob_calloc((size_t)np, sizeof *ids);
        nids = ob_calloc((size_t)np, sizeof *nids);
        j->prompt_tokens = ob_calloc((size_t)np, sizeof *j->prompt_tokens);
        j->prompt_text = ob_calloc((size_t)np, sizeof *j->prompt_text);
        if (!ids || !nids || !j->prompt_tokens || !j->prompt_text)
            rc = ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
    }
    for (int p = 0; rc == 0 && p < np; p++) {
        rc = prompt_tokens(j, p, &ids[p], &nids[p], e);
        j->prompt_tokens[p] = nids[p];
        if (rc == 0 && (j->req.echo || j->req.api == OB_SRV_NATIVE)) rc = prompt_text(j, p, ids[p], nids[p], e);
    }

    if (rc == 0) {
        j->n_ch = np * j->req.n;
        j->ch = ob_calloc((size_t)j->n_ch, sizeof *j->ch);
        if (!j->ch) {
            j->n_ch = 0;
            rc = ob_srv_fail(e, OB_ERR_OOM, 500, "server_error", "out_of_memory", NULL, "out of memory");
        }
    }
    uint64_t seed = j->req.has_seed ? j->req.gen.sampling.seed : ob_srv_random_u64();
    bool split = j->req.api == OB_SRV_CHAT && j->req.reasoning;
    for (int i = 0; rc == 0 && i < j->n_ch; i++) {
        ob_srv_choice *c = &j->ch[i];
        c->index = i;
        c->prompt = i / j->req.n;
        ob_srv_think_init(&c->think, split, j->think_opened);
        c->tools = j->req.tools;
        ob_tc_stream_init(&c->tc, j->tc_format);
        ob_gen_params g = j->req.gen;
        g.sampling.seed = seed + (uint64_t)i;
        if (j->routed) ob_route_service_apply(s->router, &j->route, &g);
        if ((rc = ob_detokenizer_create(s->model, true, &c->detok)) < 0) {
            ob_srv_token_error(rc, "detokenizer", e);
            break;
        }
        if ((rc = ob_engine_submit(s->engine, ids[c->prompt], nids[c->prompt], &g, &c->req)) < 0) {
            engine_error(rc, j->req.api == OB_SRV_CHAT ? "messages" : "prompt", e);
            break;
        }
    }
    for (int p = 0; ids && p < np; p++) ob_free(ids[p]);
    ob_free(ids);
    ob_free(nids);
    if (rc < 0) {
        ob_srv_job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

/* ---------------- events -> text ---------------- */

static int32_t count_cp(const char *s, size_t n) {
    int32_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static void fail_choice(ob_srv_choice *c, const char *what) {
    if (c->failed) return;
    c->failed = true;
    snprintf(c->fail_msg, sizeof c->fail_msg, "%s: %s", what, ob_last_error());
    ob_request_cancel(c->req);
}

/* Answer text from the reasoning splitter on to the tool-call splitter,
 * which releases what cannot be part of a call into content. */
static void feed_tools(ob_srv_choice *c) {
    if (!c->tools || c->answer.len == 0) return;
    if (ob_tc_stream_push(&c->tc, c->answer.data, c->answer.len, &c->content) < 0) fail_choice(c, "tool calls");
    ob_buf_clear(&c->answer);
}

/* Move the first k pending bytes to the released text. */
static void release(ob_srv_choice *c, size_t k) {
    if (k == 0) return;
    if (ob_srv_think_push(&c->think, c->pending.data, k, false, c->tools ? &c->answer : &c->content, &c->reasoning) < 0)
        fail_choice(c, "text");
    feed_tools(c);
    c->released += k;
    ob_buf_consume(&c->pending, k);
}

/* Release what can no longer be part of a stop string; end the choice at a
 * full match. final: no more text will come for this choice. */
static void process(ob_srv_job *j, ob_srv_choice *c, bool final) {
    if (c->stop_hit) return;
    const char *t = c->pending.data ? c->pending.data : "";
    size_t n = c->pending.len;
    if (j->req.n_stop > 0) {
        int which = 0;
        size_t p = ob_srv_stop_find(t, n, 0, j->req.stop, j->req.n_stop, &which);
        if (p != (size_t)-1) {
            release(c, p);
            ob_buf_clear(&c->pending);
            c->stop_hit = true;
            c->stop_which = which;
            /* a token whose text starts before the stop string is part of the answer */
            while (c->lp_ready < c->n_lp && c->lp[c->lp_ready].start < c->released) c->lp_ready++;
            ob_request_cancel(c->req);
            return;
        }
    }
    size_t keep = final ? 0 : ob_srv_stop_holdback(t, n, j->req.stop, j->req.n_stop);
    release(c, n - keep);
    while (c->lp_ready < c->n_lp && c->lp[c->lp_ready].end <= c->released) c->lp_ready++;
}

static void add_text(ob_srv_choice *c, const char *piece, size_t len) {
    c->gen_bytes += len;
    c->gen_cp += count_cp(piece, len);
    if (ob_buf_append(&c->pending, piece, len) < 0) fail_choice(c, "text");
}

static void on_token(ob_srv_job *j, ob_srv_choice *c, const ob_event *ev) {
    if (c->stop_hit || c->failed) return; /* cancelled; the engine may still send a token or two */
    c->n_tokens++;
    const char *piece = "";
    size_t len = 0;
    if (ob_detokenizer_push(c->detok, ev->token, &piece, &len) < 0) {
        fail_choice(c, "detokenizer");
        return;
    }
    if (j->req.gen.top_logprobs >= 0) {
        if (c->n_lp == c->cap_lp) {
            int cap = c->cap_lp ? c->cap_lp * 2 : 32;
            ob_srv_lp *nl = ob_realloc(c->lp, (size_t)cap * sizeof *nl);
            if (!nl) {
                fail_choice(c, "logprobs");
                return;
            }
            c->lp = nl;
            c->cap_lp = cap;
        }
        ob_srv_lp *l = &c->lp[c->n_lp++];
        l->id = ev->token;
        l->logprob = ev->logprob;
        l->n_top = ev->n_top < OB_MAX_TOP_LOGPROBS ? ev->n_top : OB_MAX_TOP_LOGPROBS;
        memcpy(l->top, ev->top, (size_t)l->n_top * sizeof l->top[0]);
        l->start = c->gen_bytes;
        l->end = c->gen_bytes + len;
        l->text_offset = c->gen_cp;
    }
    add_text(c, piece, len);
    process(j, c, false);
}

/* The answer is complete: parse the held text for calls and give each call
 * an id (call_ + 24 random characters) unless the model wrote its own. */
static void finish_tools(ob_srv_job *j, ob_srv_choice *c) {
    feed_tools(c);
    if (ob_tc_stream_finish(&c->tc, &c->content, &c->calls) < 0) {
        fail_choice(c, "tool calls");
        return;
    }
    ob_buf_free(&c->calls.content);
    if (!j->req.parallel_tool_calls) /* keep the first call only */
        while (c->calls.n_calls > 1) {
            ob_tc_call *x = &c->calls.calls[--c->calls.n_calls];
            ob_free(x->id);
            ob_free(x->name);
            ob_free(x->arguments);
        }
    for (int k = 0; k < c->calls.n_calls; k++) {
        if (c->calls.calls[k].id) continue;
        char id[40];
        ob_srv_random_id("call_", id, sizeof id);
        if (!(c->calls.calls[k].id = ob_strdup(id))) fail_choice(c, "tool calls");
    }
}

static void on_done(ob_srv_job *j, ob_srv_choice *c, const ob_event *ev) {
    c->done = *ev;
    c->finished = true;
    if (ev->finish == OB_FINISH_ERROR && !c->failed) {
        c->failed = true;
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s", ev->message[0] ? ev->message : ob_status_str(ev->status));
    }
    if (!c->stop_hit && !c->failed) {
        const char *rest = "";
        size_t len = 0;
        if (ob_detokenizer_flush(c->detok, &rest, &len) == 0 && len) add_text(c, rest, len);
        process(j, c, true);
        c->lp_ready = c->n_lp;
    }
    if (ob_srv_think_push(&c->think, "", 0, true, c->tools ? &c->answer : &c->content, &c->reasoning) < 0)
        fail_choice(c, "text");
    if (c->tools) finish_tools(j, c);
}

int ob_srv_job_poll(ob_srv_job *j, int timeout_ms, int max_per_choice) {
    int progressed = 0, first_open = -1;
    ob_event ev;
    for (int i = 0; i < j->n_ch; i++) {
        ob_srv_choice *c = &j->ch[i];
        if (c->finished) continue;
        if (first_open < 0) first_open = i;
        for (int k = 0; k < max_per_choice && !c->finished; k++) {
            if (ob_request_wait(c->req, &ev, 0) != 0) break;
            if (ev.type == OB_EVENT_TOKEN) on_token(j, c, &ev);
            else on_done(j, c, &ev);
            progressed = 1;
        }
    }
    if (!progressed && first_open >= 0 && timeout_ms > 0) {
        ob_srv_choice *c = &j->ch[first_open];
        if (ob_request_wait(c->req, &ev, timeout_ms) == 0) {
            if (ev.type == OB_EVENT_TOKEN) on_token(j, c, &ev);
            else on_done(j, c, &ev);
            progressed = 1;
        }
    }
    return progressed;
}

bool ob_srv_job_finished(const ob_srv_job *j) {
    for (int i = 0; i < j->n_ch; i++)
        if (!j->ch[i].finished) return false;
    return true;
}

const ob_srv_choice *ob_srv_job_failure(const ob_srv_job *j) {
    for (int i = 0; i < j->n_ch; i++)
        if (j->ch[i].failed) return &j->ch[i];
    return NULL;
}

void ob_srv_job_cancel(ob_srv_job *j) {
    for (int i = 0; i < j->n_ch; i++)
        if (j->ch[i].req) ob_request_cancel(j->ch[i].req);
}

int32_t ob_srv_choice_completion_tokens(const ob_srv_choice *c) {
    if (c->stop_hit || !c->finished) return c->n_tokens;
    return c->done.n_generated > c->n_tokens ? c->done.n_generated : c->n_tokens;
}

const char *ob_srv_choice_finish_reason(const ob_srv_choice *c) {
    if (c->calls.n_calls > 0 && !c->failed) return "tool_calls";
    if (c->stop_hit) return "stop";
    switch (c->done.finish) {
    case OB_FINISH_LENGTH: return "length";
    case OB_FINISH_ERROR: return "error";
    default: return "stop";
    }
}

void ob_srv_job_free(ob_srv_job *j) {
    if (!j) return;
    for (int i = 0; i < j->n_ch; i++) {
        ob_srv_choice *c = &j->ch[i];
        ob_request_free(c->req); /* cancels it if still running */
        ob_detokenizer_free(c->detok);
        ob_buf_free(&c->pending);
        ob_buf_free(&c->content);
        ob_buf_free(&c->reasoning);
        ob_srv_think_free(&c->think);
        ob_tc_stream_free(&c->tc);
        ob_buf_free(&c->answer);
        ob_tc_result_free(&c->calls);
        ob_free(c->lp);
    }
    ob_free(j->ch);
    for (int p = 0; j->prompt_text && p < j->req.n_prompts; p++) ob_free(j->prompt_text[p]);
    ob_free(j->prompt_text);
    ob_free(j->prompt_tokens);
    ob_srv_request_free(&j->req);
    ob_free(j);
}
