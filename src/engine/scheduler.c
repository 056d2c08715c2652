/*
 * scheduler.c - the serving engine: one thread, one context, many requests.
 *
 * Each step builds one batch under a token budget (n_batch):
 *   1. one decode token for every running request that has its prompt done;
 *   2. then chunks of prompts still being prefilled, oldest request first,
 *      so one long prompt never stalls the others' decoding.
 * After ob_decode, every request whose last token had logits samples its next
 * token and gets an OB_EVENT_TOKEN; finished requests get OB_EVENT_DONE and
 * their KV pages are freed at once.
 *
 * Admission is first come, first served into free slots (sequence ids). When
 * the KV pool is full, the most recently admitted running request is
 * preempted: its pages are freed and it goes back to the front of the queue
 * to be recomputed later (its generated tokens are kept and re-fed as part of
 * its prompt, so the client sees no difference).
 *
 * Locking: e->lock guards the queue, the slot table and the statistics;
 * each request's events have their own lock. The model and context are only
 * touched by the engine thread.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../model/model.h"
#include "onebit.h"
#include "spec.h"

typedef enum req_state { RS_WAITING, RS_PREFILL, RS_DECODE, RS_DONE } req_state;

struct ob_request {
    /* set at submit; read by the engine */
    ob_gen_params params;
    ob_token *tokens;        /* prompt followed by generated tokens [cap] */
    int32_t n_prompt, n_tokens, cap;
    atomic_int cancelled;
    atomic_int refs;         /* client + engine */
    ob_request *next;        /* queue link (engine lock) */
    /* engine-thread state */
    req_state state;
    int32_t seq;             /* slot, -1 when none */
    int32_t n_past;          /* tokens already in the KV cache */
    int32_t n_generated;
    int32_t n_cached;        /* prompt positions taken from the prefix index at first admission */
    bool reused;             /* prefix lookup done for the current admission */
    ob_sampler *sampler;
    int32_t batch_idx;       /* index of its logits row in this step's batch, -1 if none */
    int32_t n_drafted, n_draft_accepted; /* speculative decoding, this request's totals */
    double t_submit, t_start, t_first, t_end;
    int64_t id_task;         /* submission number (engine lock), for /slots */
    /* events */
    pthread_mutex_t ev_lock;
    pthread_cond_t ev_cond;
    ob_event *events;
    int32_t ev_head, ev_len, ev_cap;
    bool done_posted;
};

struct ob_engine {
    ob_model *model;
    ob_context *ctx;
    ob_engine_params p;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    ob_request *q_head, *q_tail; /* waiting, FCFS */
    int32_t n_waiting;
    ob_request **slots;          /* [n_parallel] running requests */
    ob_slot_info *slot_info;     /* [n_parallel] what ob_engine_get_slots reports (lock; published after each step) */
    bool hold_admission;         /* set by a preemption, cleared when a request finishes (engine thread) */
    int32_t n_running;
    ob_engine_stats stats;
    /* batch scratch [n_batch] */
    ob_token *b_tok;
    int32_t *b_pos, *b_seq;
    int8_t *b_logits;
    float *logprob_scratch;      /* [n_vocab] */
    /* speculative decoding (NULL spec: off); per slot, this step's draft */
    ob_spec *spec;
    ob_spec_req *spec_req;       /* [2 * n_parallel]: by slot, then a packed list for ob_spec_draft */
    ob_token *spec_draft;        /* [n_parallel][spec n_max] */
    ob_token *spec_out;          /* [spec n_max + 1] verified tokens of one request */
    const float **spec_lg;       /* [spec n_max + 1] its logits rows */
    bool spec_skip;              /* the last batch with drafts did not fit the KV pool: one step without */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

ob_engine_params ob_engine_default_params(void) {
    ob_engine_params p;
    memset(&p, 0, sizeof p);
    p.n_parallel = 1;
    p.n_batch = 0; /* by device (ob_engine_create) */
    p.kv_type = OB_KV_F16;
    p.kv_block_size = 32;
    p.queue_max = 64;
    p.spec = ob_spec_default_params();
    return p;
}

ob_gen_params ob_gen_default_params(void) {
    ob_gen_params g;
    memset(&g, 0, sizeof g);
    g.sampling = ob_sampler_default_params();
    g.max_tokens = 0;
    g.top_logprobs = -1;
    return g;
}

const ob_engine_params *ob_engine_get_params(const ob_engine *e) { return &e->p; }

/* ---------------- requests and events ---------------- */

static void request_unref(ob_request *r) {
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    ob_sampler_free(r->sampler);
    ob_free(r->tokens);
    ob_free(r->events);
    pthread_mutex_destroy(&r->ev_lock);
    pthread_cond_destroy(&r->ev_cond);
    ob_free(r);
}

/* Append an event; on allocation failure the event is dropped except DONE,
 * which always has a reserved place (cap >= 1 is kept free for it). */
static void post(ob_request *r, const ob_event *ev) {
    pthread_mutex_lock(&r->ev_lock);
    if (r->done_posted) {
        pthread_mutex_unlock(&r->ev_lock);
        return;
    }
    if (r->ev_len + 1 >= r->ev_cap) {
        int32_t cap = r->ev_cap ? r->ev_cap * 2 : 16;
        ob_event *ne = ob_malloc((size_t)cap * sizeof *ne);
        if (ne) {
            for (int32_t i = 0; i < r->ev_len; i++) ne[i] = r->events[(r->ev_head + i) % r->ev_cap];
            ob_free(r->events);
            r->events = ne;
            r->ev_cap = cap;
            r->ev_head = 0;
        } else if (ev->type != OB_EVENT_DONE || r->ev_len >= r->ev_cap) {
            pthread_mutex_unlock(&r->ev_lock);
            return;
        }
    }
    r->events[(r->ev_head + r->ev_len) % r->ev_cap] = *ev;
    r->ev_len++;
    if (ev->type == OB_EVENT_DONE) r->done_posted = true;
    pthread_cond_broadcast(&r->ev_cond);
    pthread_mutex_unlock(&r->ev_lock);
}

int ob_request_wait(ob_request *r, ob_event *ev, int timeout_ms) {
    pthread_mutex_lock(&r->ev_lock);
    struct timespec until;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    while (r->ev_len == 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&r->ev_cond, &r->ev_lock);
        } else if (pthread_cond_timedwait(&r->ev_cond, &r->ev_lock, &until) != 0 && r->ev_len == 0) {
            pthread_mutex_unlock(&r->ev_lock);
            return 1;
        }
    }
    *ev = r->events[r->ev_head];
    r->ev_head = (r->ev_head + 1) % r->ev_cap;
    r->ev_len--;
    pthread_mutex_unlock(&r->ev_lock);
    return 0;
}

void ob_request_cancel(ob_request *r) { atomic_store(&r->cancelled, 1); }

void ob_request_free(ob_request *r) {
    if (!r) return;
    ob_request_cancel(r);
    request_unref(r);
}

static void post_done(ob_engine *e, ob_request *r, ob_finish finish, int status, const char *msg) {
    ob_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = OB_EVENT_DONE;
    ev.finish = finish;
    ev.status = status;
    if (msg) snprintf(ev.message, sizeof ev.message, "%s", msg);
    r->t_end = now_ms();
    ev.n_prompt = r->n_prompt;
    ev.n_cached = r->n_cached;
    ev.n_generated = r->n_generated;
    ev.t_queue_ms = (r->t_start > 0 ? r->t_start : r->t_end) - r->t_submit;
    ev.t_prompt_ms = r->t_first > 0 ? r->t_first - r->t_start : 0;
    ev.t_gen_ms = r->t_first > 0 ? r->t_end - r->t_first : 0;
    ev.n_drafted = r->n_drafted;
    ev.n_draft_accepted = r->n_draft_accepted;
    /* statistics first: a client that sees DONE sees them counted */
    pthread_mutex_lock(&e->lock);
    if (finish == OB_FINISH_ERROR) e->stats.requests_failed++;
    else if (finish == OB_FINISH_CANCELLED) e->stats.requests_cancelled++;
    else e->stats.requests_ok++;
    pthread_mutex_unlock(&e->lock);
    post(r, &ev);
}

/* ---------------- slots ---------------- */

/* Free a running request's slot and pages (engine thread). */
static void release_slot(ob_engine *e, ob_request *r) {
    if (r->seq < 0) return;
    ob_seq_remove(e->ctx, r->seq, 0);
    ob_spec_seq_clear(e->spec, r->seq);
    pthread_mutex_lock(&e->lock);
    e->slots[r->seq] = NULL;
    e->n_running--;
    pthread_mutex_unlock(&e->lock);
    r->seq = -1;
}

static void finish_request(ob_engine *e, ob_request *r, ob_finish f, int status, const char *msg) {
    release_slot(e, r);
    e->hold_admission = false; /* pages came back: waiting requests may try again */
    r->state = RS_DONE;
    post_done(e, r, f, status, msg);
    request_unref(r); /* the engine's reference */
}

/* Put a running request back at the front of the queue, to be recomputed. */
static void preempt(ob_engine *e, ob_request *r) {
    release_slot(e, r);
    r->state = RS_WAITING;
    r->n_past = 0;
    r->reused = false;
    pthread_mutex_lock(&e->lock);
    r->next = e->q_head;
    e->q_head = r;
    if (!e->q_tail) e->q_tail = r;
    e->n_waiting++;
    e->stats.preemptions++;
    pthread_mutex_unlock(&e->lock);
    /* Admitting anyone now would only thrash: wait until a request finishes. */
    e->hold_admission = true;
}

/* ---------------- submit ---------------- */

int ob_engine_submit(ob_engine *e, const ob_token *prompt, int32_t n_prompt, const ob_gen_params *params,
                     ob_request **out) {
    *out = NULL;
    const ob_context_params *cp = ob_context_get_params(e->ctx);
    if (n_prompt <= 0) return ob_err(OB_ERR_INVALID_ARG, "the prompt is empty");
    if (n_prompt >= cp->n_ctx)
        return ob_err(OB_ERR_RANGE, "the prompt is %d tokens, %d more than the context of %d allows (leaving one for the answer)",
                      n_prompt, n_prompt - cp->n_ctx + 1, cp->n_ctx);
    int32_t nv = ob_model_n_vocab(e->model);
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= nv)
            return ob_err(OB_ERR_INVALID_ARG, "prompt token %d at index %d is outside the vocabulary (%d)", prompt[i], i, nv);
    ob_request *r = ob_calloc(1, sizeof *r);
    if (!r) return ob_err(OB_ERR_OOM, "request");
    r->params = params ? *params : ob_gen_default_params();
    if (r->params.top_logprobs > OB_MAX_TOP_LOGPROBS) r->params.top_logprobs = OB_MAX_TOP_LOGPROBS;
    r->cap = cp->n_ctx;
    r->tokens = ob_malloc((size_t)r->cap * sizeof(ob_token));
    pthread_mutex_init(&r->ev_lock, NULL);
    pthread_cond_init(&r->ev_cond, NULL);
    int rc = r->tokens ? ob_sampler_create(&r->params.sampling, nv, &r->sampler) : ob_err(OB_ERR_OOM, "request");
    if (rc < 0) {
        atomic_store(&r->refs, 1);
        request_unref(r);
        return rc;
    }
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof(ob_token));
    r->n_prompt = r->n_tokens = n_prompt;
    r->seq = -1;
    r->batch_idx = -1;
    r->state = RS_WAITING;
    r->t_submit = now_ms();
    atomic_store(&r->refs, 2);
    pthread_mutex_lock(&e->lock);
    if (e->n_waiting >= e->p.queue_max) {
        pthread_mutex_unlock(&e->lock);
        atomic_store(&r->refs, 1);
        request_unref(r);
        return ob_err(OB_ERR_FULL, "the request queue is full (%d waiting)", e->p.queue_max);
    }
    if (e->q_tail) e->q_tail->next = r;
    else e->q_head = r;
    e->q_tail = r;
    e->n_waiting++;
    e->stats.requests_total++;
    r->id_task = (int64_t)e->stats.requests_total;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    *out = r;
    return 0;
}

/* ---------------- the step ---------------- */

static void emit_token(ob_engine *e, ob_request *r, const float *logits, ob_token t) {
    ob_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = OB_EVENT_TOKEN;
    ev.token = t;
    int32_t k = r->params.top_logprobs;
    if (k >= 0) {
        /* log-softmax of the model's logits (before sampling adjustments, as OpenAI reports) */
        int32_t nv = ob_model_n_vocab(e->model);
        float mx = logits[0];
        for (int32_t i = 1; i < nv; i++) mx = logits[i] > mx ? logits[i] : mx;
        double z = 0;
        for (int32_t i = 0; i < nv; i++) z += exp((double)(logits[i] - mx));
        float lz = (float)log(z) + mx;
        ev.logprob = logits[t] - lz;
        for (int32_t j = 0; j < k; j++) { /* k is small: repeated selection */
            int32_t best = -1;
            for (int32_t i = 0; i < nv; i++) {
                bool used = false;
                for (int32_t q = 0; q < j && !used; q++) used = ev.top[q].id == i;
                if (!used && (best < 0 || logits[i] > logits[best])) best = i;
            }
            ev.top[j].id = best;
            ev.top[j].logprob = logits[best] - lz;
        }
        ev.n_top = k;
    }
    post(r, &ev);
}

/* Admit waiting requests into free slots, first come first served, while
 * the KV pool has room for the next one's tokens (all of them: a preempted
 * request comes back with its generated tokens) plus one page of headroom
 * for each request already running. */
static void admit(ob_engine *e) {
    if (e->hold_admission && e->n_running > 0) return;
    const int32_t bs = ob_context_get_params(e->ctx)->kv_block_size;
    int64_t used, total;
    ob_kv_usage(e->ctx, &used, &total);
    int64_t free_blocks = total - used - e->n_running;
    pthread_mutex_lock(&e->lock);
    while (e->q_head && e->n_running < e->p.n_parallel) {
        ob_request *r = e->q_head;
        int64_t need = (r->n_tokens + 1 + bs - 1) / bs;
        if (need > free_blocks && e->n_running > 0) break; /* wait for pages; alone it may still try */
        free_blocks -= need + 1;
        e->q_head = r->next;
        if (!e->q_head) e->q_tail = NULL;
        r->next = NULL;
        e->n_waiting--;
        int32_t s = 0;
        while (e->slots[s]) s++;
        e->slots[s] = r;
        e->n_running++;
        r->seq = s;
        r->state = RS_PREFILL;
        r->n_past = 0;
        if (r->t_start == 0) r->t_start = now_ms();
    }
    pthread_mutex_unlock(&e->lock);
}

/* ---------------- speculative decoding (spec.h) ---------------- */

/* Draft for every decoding request before the batch is built: each gets at
 * most its share of the budget left after one token per decoding request,
 * and no more than its max_tokens leaves room for (the verified step always
 * adds one token of the target's own). Drafts go to e->spec_req[slot]. */
static void spec_plan(ob_engine *e, int32_t budget) {
    const int32_t n_par = e->p.n_parallel;
    const ob_spec_params *sp = ob_spec_get_params(e->spec);
    int32_t n_dec = 0, n_req = 0;
    for (int32_t s = 0; s < n_par; s++) {
        e->spec_req[s].n_draft = 0;
        if (e->slots[s] && e->slots[s]->state == RS_DECODE) n_dec++;
    }
    bool skip = e->spec_skip;
    e->spec_skip = false;
    if (skip || n_dec == 0 || sp->type == OB_SPEC_NONE) return;
    int32_t share = (budget - n_dec) / n_dec;
    /* requests that draft are packed at the front of a scratch list for one ob_spec_draft call */
    ob_spec_req *list = e->spec_req + n_par;
    for (int32_t s = 0; s < n_par; s++) {
        ob_request *r = e->slots[s];
        if (!r || r->state != RS_DECODE || r->params.no_speculative) continue;
        int32_t k = sp->n_max < share ? sp->n_max : share;
        if (r->params.spec_n_max > 0 && r->params.spec_n_max < k) k = r->params.spec_n_max;
        if (r->params.max_tokens > 0 && r->params.max_tokens - r->n_generated - 1 < k)
            k = r->params.max_tokens - r->n_generated - 1;
        if (k <= 0) continue;
        ob_spec_req q = {s, r->tokens, r->n_tokens, k, e->spec_draft + (size_t)s * sp->n_max, 0};
        list[n_req++] = q;
    }
    if (n_req == 0) return;
    if (ob_spec_draft(e->spec, list, n_req) < 0) {
        OB_LOGW("drafting failed (%s); this step decodes without drafts", ob_last_error());
        ob_err_clear();
    }
    for (int32_t i = 0; i < n_req; i++) e->spec_req[list[i].seq] = list[i];
}

/* After the batch: verify request r's draft against the logits rows that
 * follow its last token, roll the rejected positions out of the KV cache and
 * hand out the kept tokens (stopping at end of generation or a limit). */
static void spec_emit(ob_engine *e, ob_request *r, int32_t n_ctx) {
    ob_spec_req *q = &e->spec_req[r->seq];
    int32_t k = q->n_draft;
    for (int32_t i = 0; i <= k; i++) e->spec_lg[i] = ob_get_logits(e->ctx, r->batch_idx + i);
    int32_t m = ob_spec_verify(e->spec, r->sampler, e->spec_lg, q->draft, k, e->spec_out);
    ob_spec_feedback(e->spec, r->seq, k, m - 1);
    ob_seq_remove(e->ctx, r->seq, r->n_past + m); /* the last token and the m - 1 drafts kept */
    r->n_past += m;
    r->n_drafted += k;
    r->n_draft_accepted += m - 1;
    pthread_mutex_lock(&e->lock);
    e->stats.tokens_drafted += (uint64_t)k;
    e->stats.tokens_draft_accepted += (uint64_t)(m - 1);
    pthread_mutex_unlock(&e->lock);
    for (int32_t j = 0; j < m; j++) {
        ob_token t = e->spec_out[j];
        r->tokens[r->n_tokens++] = t;
        r->n_generated++;
        pthread_mutex_lock(&e->lock);
        e->stats.tokens_generated++;
        pthread_mutex_unlock(&e->lock);
        if (!r->params.ignore_eos && ob_token_is_eog(e->model, t)) {
            finish_request(e, r, OB_FINISH_STOP, 0, NULL);
            return;
        }
        emit_token(e, r, e->spec_lg[j], t);
        if ((r->params.max_tokens > 0 && r->n_generated >= r->params.max_tokens) || r->n_tokens >= n_ctx ||
            r->n_tokens >= r->cap) {
            finish_request(e, r, OB_FINISH_LENGTH, 0, NULL);
            return;
        }
    }
}

/* What a request asks of its logits row: only the argmax (the device finds
 * it, no logits cross the bus) when it samples greedily without penalties,
 * wants no log-probabilities and no drafts are verified; else the row. */
static int8_t logits_want(const ob_engine *e, const ob_request *r) {
    return !e->spec && r->params.top_logprobs < 0 && ob_sampler_is_greedy(r->sampler) ? OB_LOGITS_ARGMAX : 1;
}

/* One step; returns false when there was nothing to do. */
static bool step(ob_engine *e) {
    admit(e);
    const int32_t n_par = e->p.n_parallel, budget = ob_context_get_params(e->ctx)->n_batch;
    /* cancellations first: they free pages for everyone else */
    for (int32_t s = 0; s < n_par; s++) {
        ob_request *r = e->slots[s];
        if (r && atomic_load(&r->cancelled)) finish_request(e, r, OB_FINISH_CANCELLED, 0, NULL);
    }
    /* newly admitted: take what the prefix index already holds (all but the
     * last token, whose logits we need) */
    for (int32_t s = 0; s < n_par; s++) {
        ob_request *r = e->slots[s];
        if (!r || r->state != RS_PREFILL || r->reused) continue;
        int32_t got = 0;
        if (ob_seq_reuse_prefix(e->ctx, r->seq, r->tokens, r->n_tokens - 1, &got) < 0) got = 0;
        r->n_past = got;
        r->reused = true;
        if (r->n_generated == 0) {
            r->n_cached = got;
            pthread_mutex_lock(&e->lock);
            e->stats.tokens_cached += (uint64_t)got;
            pthread_mutex_unlock(&e->lock);
        }
    }
    int32_t n = 0, n_drafts = 0;
    bool any = false;
    if (e->spec) spec_plan(e, budget);
    for (int32_t s = 0; s < n_par; s++) {
        ob_request *r = e->slots[s];
        if (!r) continue;
        r->batch_idx = -1;
        any = true;
        if (r->state == RS_DECODE && n < budget) {
            e->b_tok[n] = r->tokens[r->n_tokens - 1];
            e->b_pos[n] = r->n_past;
            e->b_seq[n] = s;
            e->b_logits[n] = logits_want(e, r);
            r->batch_idx = n++;
            for (int32_t i = 0; e->spec && i < e->spec_req[s].n_draft; i++) { /* its draft, right after it */
                e->b_tok[n] = e->spec_req[s].draft[i];
                e->b_pos[n] = r->n_past + 1 + i;
                e->b_seq[n] = s;
                e->b_logits[n] = 1;
                n++;
                n_drafts++;
            }
        }
    }
    int32_t n_decode = n;
    /* prefill chunks, oldest first (lowest start time) */
    for (;;) {
        ob_request *pick = NULL;
        for (int32_t s = 0; s < n_par; s++) {
            ob_request *r = e->slots[s];
            if (r && r->state == RS_PREFILL && r->batch_idx < 0 && (!pick || r->t_start < pick->t_start)) pick = r;
        }
        if (!pick || n >= budget) break;
        /* the prompt plus any tokens generated before a preemption, all but the last */
        int32_t todo = pick->n_tokens - pick->n_past;
        int32_t chunk = todo < budget - n ? todo : budget - n;
        for (int32_t i = 0; i < chunk; i++) {
            e->b_tok[n] = pick->tokens[pick->n_past + i];
            e->b_pos[n] = pick->n_past + i;
            e->b_seq[n] = pick->seq;
            e->b_logits[n] = 0;
            n++;
        }
        if (chunk == todo) {
            e->b_logits[n - 1] = logits_want(e, pick);
            pick->batch_idx = n - 1;
        } else {
            pick->batch_idx = -2; /* partly fed this step; no logits yet */
        }
        pick->n_past += chunk;
    }
    if (!any) return false;
    if (n == 0) return true;

    ob_batch b = {n, e->b_tok, e->b_pos, e->b_seq, e->b_logits};
    double t0 = now_ms();
    int rc = ob_decode(e->ctx, &b);
    if (rc == OB_ERR_FULL && n_drafts > 0) {
        /* drafts made it too big: undo this step's prefill progress and try again without drafts */
        for (int32_t s = 0; s < n_par; s++)
            if (e->slots[s] && e->slots[s]->state == RS_PREFILL) e->slots[s]->n_past = ob_seq_len(e->ctx, s);
        e->spec_skip = true;
        return true;
    }
    if (rc == OB_ERR_FULL) {
        /* undo this step's prefill progress, preempt the newest request, try again next step */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ob_last_error());
        ob_request *newest = NULL;
        int32_t n_active = 0;
        for (int32_t s = 0; s < n_par; s++) {
            ob_request *r = e->slots[s];
            if (!r) continue;
            n_active++;
            if (r->state == RS_PREFILL) r->n_past = ob_seq_len(e->ctx, r->seq);
            if (!newest || r->t_start > newest->t_start) newest = r;
        }
        if (n_active <= 1 || !newest) {
            if (newest) finish_request(e, newest, OB_FINISH_ERROR, OB_ERR_FULL, msg);
        } else {
            preempt(e, newest);
        }
        return true;
    }
    if (rc < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ob_last_error());
        OB_LOGE("decode failed: %s", msg);
        for (int32_t s = 0; s < n_par; s++)
            if (e->slots[s]) finish_request(e, e->slots[s], OB_FINISH_ERROR, rc, msg);
        return true;
    }
    double dt = (now_ms() - t0) / 1e3;
    pthread_mutex_lock(&e->lock);
    e->stats.steps++;
    e->stats.tokens_prompt += (uint64_t)(n - n_decode);
    if (n > n_decode) e->stats.seconds_prompt += dt * (double)(n - n_decode) / n;
    if (n_decode) e->stats.seconds_generate += dt * (double)n_decode / n;
    pthread_mutex_unlock(&e->lock);

    const int32_t n_ctx = ob_context_get_params(e->ctx)->n_ctx;
    for (int32_t s = 0; s < n_par; s++) {
        ob_request *r = e->slots[s];
        if (!r || r->batch_idx < 0) continue;
        if (r->state == RS_DECODE && e->spec) {
            spec_emit(e, r, n_ctx);
            continue;
        }
        if (r->state == RS_DECODE) r->n_past++;
        const float *logits = ob_get_logits(e->ctx, r->batch_idx);
        if (r->state == RS_PREFILL) {
            if (r->t_first == 0) r->t_first = now_ms();
            /* the prompt (and tokens regenerated after a preemption) is now in the cache */
            if (r->n_generated == 0)
                for (int32_t i = 0; i < r->n_prompt; i++) ob_sampler_accept(r->sampler, r->tokens[i]);
            r->state = RS_DECODE;
        }
        /* a row that asked only for its argmax has no logits (NULL); emit_token reads them only for
         * log-probabilities, which such a request did not ask for */
        ob_token t = e->b_logits[r->batch_idx] == OB_LOGITS_ARGMAX ? ob_get_argmax(e->ctx, r->batch_idx)
                                                                   : ob_sampler_sample(r->sampler, logits);
        if (t < 0) { /* cannot happen: the row was asked for */
            finish_request(e, r, OB_FINISH_ERROR, OB_ERR_INTERNAL, "no argmax for the request's row");
            continue;
        }
        ob_sampler_accept(r->sampler, t);
        r->tokens[r->n_tokens++] = t;
        r->n_generated++;
        pthread_mutex_lock(&e->lock);
        e->stats.tokens_generated++;
        pthread_mutex_unlock(&e->lock);
        bool eog = !r->params.ignore_eos && ob_token_is_eog(e->model, t);
        if (!eog) emit_token(e, r, logits, t);
        if (eog)
            finish_request(e, r, OB_FINISH_STOP, 0, NULL);
        else if ((r->params.max_tokens > 0 && r->n_generated >= r->params.max_tokens) || r->n_tokens >= n_ctx ||
                 r->n_tokens >= r->cap)
            finish_request(e, r, OB_FINISH_LENGTH, 0, NULL);
    }
    return true;
}

/* Copy the slots' state for ob_engine_get_slots (engine thread; the request
 * fields are the engine thread's own, so readers never touch them). */
static void publish_slots(ob_engine *e) {
    pthread_mutex_lock(&e->lock);
    for (int32_t s = 0; s < e->p.n_parallel; s++) {
        const ob_request *r = e->slots[s];
        ob_slot_info *si = &e->slot_info[s];
        memset(si, 0, sizeof *si);
        si->id = s;
        si->id_task = -1;
        si->n_predict = -1;
        si->next_token = -1;
        if (!r) continue;
        si->is_processing = true;
        si->id_task = r->id_task;
        si->n_prompt = r->n_prompt;
        si->n_past = r->n_past;
        si->n_cached = r->n_cached;
        si->n_decoded = r->n_generated;
        si->n_predict = r->params.max_tokens > 0 ? r->params.max_tokens : -1;
        si->has_next_token = r->state != RS_DONE;
        si->next_token = r->n_generated > 0 ? r->tokens[r->n_tokens - 1] : -1;
    }
    pthread_mutex_unlock(&e->lock);
}

void ob_engine_get_slots(ob_engine *e, ob_slot_info *out, int32_t n_max, int32_t *n) {
    pthread_mutex_lock(&e->lock);
    int32_t k = e->p.n_parallel < n_max ? e->p.n_parallel : n_max;
    for (int32_t s = 0; s < k; s++) out[s] = e->slot_info[s];
    pthread_mutex_unlock(&e->lock);
    *n = k > 0 ? k : 0;
}

static void *engine_main(void *arg) {
    ob_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (!e->stop && e->n_waiting == 0 && e->n_running == 0) pthread_cond_wait(&e->wake, &e->lock);
        bool stop = e->stop;
        pthread_mutex_unlock(&e->lock);
        if (stop) break;
        step(e);
        publish_slots(e);
    }
    return NULL;
}

/* ---------------- lifetime ---------------- */

int ob_engine_create(ob_model *m, const ob_engine_params *params, ob_engine **out) {
    *out = NULL;
    ob_engine_params p = params ? *params : ob_engine_default_params();
    if (p.n_parallel <= 0) p.n_parallel = 1;
    /* A GPU's prompt batches dequantize every weight to bf16 for the tensor cores once a
     * step: 2048 tokens a step make that 4x rarer than 512 (8B Q4_K_M on the H200: pp2048
     * 19,060 -> 25,882 tok/s, 64 clients 3,130 -> 3,358 output tok/s, bench/RESULTS.md,
     * CUDA session 8); the CPU gains nothing from more than 512. */
    if (p.n_batch <= 0) p.n_batch = ob_backend_is_cpu(m->backend) ? 512 : 2048;
    if (p.queue_max <= 0) p.queue_max = 64;
    if (p.n_batch < p.n_parallel) p.n_batch = p.n_parallel; /* every running request decodes each step */
    ob_engine *e = ob_calloc(1, sizeof *e);
    if (!e) return ob_err(OB_ERR_OOM, "engine");
    e->model = m;
    e->p = p;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = p.n_ctx;
    cp.n_seq_max = p.n_parallel;
    cp.n_batch = p.n_batch;
    cp.n_threads = p.n_threads;
    cp.kv_type = p.kv_type;
    cp.kv_blocks = p.kv_blocks;
    cp.kv_block_size = p.kv_block_size;
    int rc = ob_context_create(m, &cp, &e->ctx);
    if (rc == 0) {
        e->p.n_ctx = ob_context_get_params(e->ctx)->n_ctx;
        e->slots = ob_calloc((size_t)p.n_parallel, sizeof *e->slots);
        e->slot_info = ob_calloc((size_t)p.n_parallel, sizeof *e->slot_info);
        for (int32_t s = 0; e->slot_info && s < p.n_parallel; s++)
            e->slot_info[s] = (ob_slot_info){.id = s, .id_task = -1, .n_predict = -1, .next_token = -1};
        e->b_tok = ob_calloc((size_t)p.n_batch, sizeof(ob_token));
        e->b_pos = ob_calloc((size_t)p.n_batch, sizeof(int32_t));
        e->b_seq = ob_calloc((size_t)p.n_batch, sizeof(int32_t));
        e->b_logits = ob_calloc((size_t)p.n_batch, 1);
        if (!e->slots || !e->slot_info || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_logits) rc = ob_err(OB_ERR_OOM, "engine");
    }
    if (rc == 0 && p.spec.type != OB_SPEC_NONE && p.spec.n_max > 0) {
        rc = ob_spec_create(m, e->ctx, &p.spec, &e->spec);
        if (rc == 0) {
            int32_t k = ob_spec_get_params(e->spec)->n_max;
            e->spec_req = ob_calloc((size_t)p.n_parallel * 2, sizeof *e->spec_req);
            e->spec_draft = ob_calloc((size_t)p.n_parallel * (size_t)(k > 0 ? k : 1), sizeof(ob_token));
            e->spec_out = ob_calloc((size_t)k + 1, sizeof(ob_token));
            e->spec_lg = ob_calloc((size_t)k + 1, sizeof *e->spec_lg);
            if (!e->spec_req || !e->spec_draft || !e->spec_out || !e->spec_lg) rc = ob_err(OB_ERR_OOM, "engine");
        }
    }
    e->p.spec.draft_model = NULL; /* borrowed pointers are not kept */
    e->p.spec.draft_path = e->p.spec.draft_device = NULL;
    if (rc == 0) {
        if (pthread_create(&e->thread, NULL, engine_main, e) != 0)
            rc = ob_err(OB_ERR_INTERNAL, "cannot start the engine thread");
        else
            e->thread_started = true;
    }
    if (rc < 0) {
        ob_engine_free(e);
        return rc;
    }
    e->stats.n_parallel = p.n_parallel;
    *out = e;
    return 0;
}

void ob_engine_free(ob_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stop = true;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->thread, NULL);
    }
    /* whatever is left ends as cancelled */
    if (e->slots)
        for (int32_t s = 0; s < e->p.n_parallel; s++)
            if (e->slots[s]) finish_request(e, e->slots[s], OB_FINISH_CANCELLED, 0, NULL);
    while (e->q_head) {
        ob_request *r = e->q_head;
        e->q_head = r->next;
        e->n_waiting--;
        r->state = RS_DONE;
        post_done(e, r, OB_FINISH_CANCELLED, 0, NULL);
        request_unref(r);
    }
    ob_spec_free(e->spec);
    ob_free(e->spec_req);
    ob_free(e->spec_draft);
    ob_free(e->spec_out);
    ob_free(e->spec_lg);
    ob_context_free(e->ctx);
    ob_free(e->slots);
    ob_free(e->slot_info);
    ob_free(e->b_tok);
    ob_free(e->b_pos);
    ob_free(e->b_seq);
    ob_free(e->b_logits);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->wake);
    ob_free(e);
}

void ob_engine_get_stats(ob_engine *e, ob_engine_stats *out) {
    pthread_mutex_lock(&e->lock);
    *out = e->stats;
    out->waiting = e->n_waiting;
    out->running = e->n_running;
    pthread_mutex_unlock(&e->lock);
    /* KV usage is read without the engine lock: two integers, a snapshot is fine */
    ob_kv_usage(e->ctx, &out->kv_blocks_used, &out->kv_blocks_total);
}
