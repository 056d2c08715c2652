/*
 * test_scheduler.c - the serving engine on stories260K: concurrent requests
 * produce exactly what each would alone (greedy), preemption under a small
 * KV pool is invisible to clients, cancellation frees pages, the queue is
 * bounded, and impossible prompts are refused with the numbers.
 */
#include <jansson.h>
#include <pthread.h>

#include <unistd.h>

#include "convert/convert.h"
#include "core/status.h"
#include "onebit.h"
#include "test.h"

static ob_model *g_model;
static ob_token g_expected[200]; /* greedy continuation of BOS (llama2.c reference) */

static bool setup(void) {
    if (g_model) return true;
    const char *dir = test_models_dir();
    if (!dir) return false;
    json_error_t err;
    json_t *ref = json_load_file(test_path(dir, "stories260K/stories260K.reference.json"), 0, &err);
    if (!ref) return false;
    json_t *ids = json_object_get(json_array_get(json_object_get(ref, "cases"), 0), "expected_ids");
    for (int i = 0; i < 200; i++) g_expected[i] = (ob_token)json_integer_value(json_array_get(ids, (size_t)i));
    json_decref(ref);
    return ob_model_load(test_path(dir, "stories260K/stories260K.gguf"), NULL, &g_model) == 0;
}

#define NEED_MODEL()                                                   \
    do {                                                               \
        if (!setup()) {                                                \
            if (!test_models_dir())                                    \
                test_skip("../shared/models is absent");               \
            else                                                       \
                CHECK_MSG(0, "could not load stories260K: %s", ob_last_error()); \
            return;                                                    \
        }                                                              \
    } while (0)

static ob_gen_params greedy(int max_tokens) {
    ob_gen_params g = ob_gen_default_params();
    g.sampling.temperature = 0;
    g.max_tokens = max_tokens;
    return g;
}

/* Collect a request's tokens until DONE. */
static int drain(ob_request *r, ob_token *out, int cap, ob_event *done) {
    int n = 0;
    memset(done, 0, sizeof *done);
    ob_event ev;
    for (;;) {
        if (ob_request_wait(r, &ev, 20000) != 0) return -1; /* timed out */
        if (ev.type == OB_EVENT_TOKEN) {
            if (n < cap) out[n] = ev.token;
            n++;
        } else {
            *done = ev;
            return n;
        }
    }
}

static ob_engine *new_engine(int n_par, int n_ctx, int n_batch, int64_t kv_blocks, int block) {
    ob_engine_params p = ob_engine_default_params();
    p.n_parallel = n_par;
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.kv_blocks = kv_blocks;
    p.kv_block_size = block;
    p.n_threads = 1; /* tiny model: threads only add hand-offs (see test_engine.c) */
    p.queue_max = 8;
    ob_engine *e = NULL;
    if (ob_engine_create(g_model, &p, &e) < 0) fprintf(stderr, "engine: %s\n", ob_last_error());
    return e;
}

TEST(single_request_is_the_reference) {
    NEED_MODEL();
    ob_engine *e = new_engine(1, 256, 64, 0, 16);
    ob_token bos = 1, out[100];
    ob_request *r;
    ob_gen_params g = greedy(100);
    CHECK_OK(ob_engine_submit(e, &bos, 1, &g, &r));
    ob_event done;
    int n = drain(r, out, 100, &done);
    CHECK_EQ_INT(n, 100);
    CHECK_EQ_INT(done.finish, OB_FINISH_LENGTH);
    CHECK_EQ_INT(done.n_generated, 100);
    CHECK_EQ_INT(done.n_prompt, 1);
    CHECK(memcmp(out, g_expected, sizeof out) == 0);
    ob_request_free(r);
    ob_engine_free(e);
}

TEST(concurrent_requests_match_alone) {
    NEED_MODEL();
    /* 4 slots, 6 requests with different prompts (prefixes of the reference
     * story), a small step budget so prefill is chunked across steps */
    ob_engine *e = new_engine(4, 256, 8, 0, 16);
    enum { R = 6 };
    ob_request *r[R];
    int plen[R] = {1, 3, 9, 17, 30, 5};
    for (int i = 0; i < R; i++) {
        ob_token prompt[64];
        prompt[0] = 1;
        for (int k = 1; k < plen[i]; k++) prompt[k] = g_expected[k - 1];
        ob_gen_params g = greedy(40);
        CHECK_OK(ob_engine_submit(e, prompt, plen[i], &g, &r[i]));
    }
    for (int i = 0; i < R; i++) {
        ob_token out[64];
        ob_event done;
        int n = drain(r[i], out, 64, &done);
        CHECK_EQ_INT(n, 40);
        /* continuing the reference story from where the prompt stops */
        CHECK_MSG(memcmp(out, g_expected + plen[i] - 1, 40 * sizeof(ob_token)) == 0, "request %d diverged", i);
        ob_request_free(r[i]);
    }
    ob_engine_stats st;
    ob_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.requests_ok, R);
    CHECK_EQ_INT(st.running, 0);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    ob_engine_free(e);
}

TEST(preemption_is_invisible) {
    NEED_MODEL();
    /* 3 slots but KV for about 1.5 long sequences: requests must be preempted and recomputed */
    ob_engine *e = new_engine(3, 128, 32, 12, 8); /* 96 positions in the pool */
    enum { R = 3 };
    ob_request *r[R];
    for (int i = 0; i < R; i++) {
        ob_token bos = 1;
        ob_gen_params g = greedy(60);
        CHECK_OK(ob_engine_submit(e, &bos, 1, &g, &r[i]));
    }
    for (int i = 0; i < R; i++) {
        ob_token out[64];
        ob_event done;
        int n = drain(r[i], out, 64, &done);
        CHECK_EQ_INT(n, 60);
        CHECK_EQ_INT(done.finish, OB_FINISH_LENGTH);
        CHECK_MSG(memcmp(out, g_expected, 60 * sizeof(ob_token)) == 0, "request %d diverged", i);
        ob_request_free(r[i]);
    }
    ob_engine_stats st;
    ob_engine_get_stats(e, &st);
    CHECK(st.preemptions > 0);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    ob_engine_free(e);
}

TEST(cancel_frees_pages) {
    NEED_MODEL();
    ob_engine *e = new_engine(2, 512, 64, 0, 16);
    ob_token bos = 1;
    ob_request *r;
    ob_gen_params g = greedy(0); /* until the context is full */
    g.ignore_eos = true;
    CHECK_OK(ob_engine_submit(e, &bos, 1, &g, &r));
    ob_event ev;
    CHECK_EQ_INT(ob_request_wait(r, &ev, 20000), 0); /* it is running */
    CHECK_EQ_INT(ev.type, OB_EVENT_TOKEN);
    ob_request_cancel(r);
    for (;;) {
        CHECK_EQ_INT(ob_request_wait(r, &ev, 20000), 0);
        if (ev.type == OB_EVENT_DONE) break;
    }
    CHECK_EQ_INT(ev.finish, OB_FINISH_CANCELLED);
    ob_request_free(r);
    ob_engine_stats st;
    ob_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_EQ_INT(st.requests_cancelled, 1);
    /* freeing a request that is still queued or running is safe */
    CHECK_OK(ob_engine_submit(e, &bos, 1, &g, &r));
    ob_request_free(r);
    ob_engine_free(e);
}

TEST(limits_and_errors) {
    NEED_MODEL();
    ob_engine *e = new_engine(1, 32, 16, 0, 16);
    static ob_token long_prompt[40];
    for (int i = 0; i < 40; i++) long_prompt[i] = 1;
    ob_request *r = NULL;
    ob_gen_params g = greedy(4);
    CHECK_EQ_INT(ob_engine_submit(e, long_prompt, 40, &g, &r), OB_ERR_RANGE);
    CHECK(strstr(ob_last_error(), "40 tokens, 9 more") != NULL);
    long_prompt[3] = 100000;
    CHECK_EQ_INT(ob_engine_submit(e, long_prompt, 5, &g, &r), OB_ERR_INVALID_ARG);
    CHECK_EQ_INT(ob_engine_submit(e, long_prompt, 0, &g, &r), OB_ERR_INVALID_ARG);
    /* context end: a request that runs into n_ctx finishes with "length" */
    ob_token bos = 1;
    g = greedy(0);
    g.ignore_eos = true;
    CHECK_OK(ob_engine_submit(e, &bos, 1, &g, &r));
    ob_token out[64];
    ob_event done;
    int n = drain(r, out, 64, &done);
    CHECK_EQ_INT(n, 31);
    CHECK_EQ_INT(done.finish, OB_FINISH_LENGTH);
    ob_request_free(r);
    /* a full queue refuses at once */
    ob_request *q[12];
    int accepted = 0, full = 0;
    g = greedy(200);
    g.ignore_eos = true;
    for (int i = 0; i < 12; i++) {
        int rc = ob_engine_submit(e, &bos, 1, &g, &q[i]);
        if (rc == 0) accepted++;
        else if (rc == OB_ERR_FULL) full++, q[i] = NULL;
    }
    CHECK(full >= 3);          /* 1 running + 8 waiting at most */
    CHECK(accepted <= 9);
    for (int i = 0; i < 12; i++) ob_request_free(q[i]);
    ob_engine_free(e);         /* with requests still queued: they end cancelled */
}

TEST(shared_prefix_is_reused_and_changes_nothing) {
    NEED_MODEL();
    ob_engine *e = new_engine(2, 256, 64, 0, 16);
    ob_token prompt[50];
    prompt[0] = 1;
    for (int k = 1; k < 50; k++) prompt[k] = g_expected[k - 1];
    ob_token out1[32], out2[32];
    ob_event d1, d2;
    ob_request *r;
    ob_gen_params g = greedy(20);
    CHECK_OK(ob_engine_submit(e, prompt, 50, &g, &r));
    CHECK_EQ_INT(drain(r, out1, 32, &d1), 20);
    ob_request_free(r);
    CHECK_EQ_INT(d1.n_cached, 0);
    /* same prompt again: the 3 full pages (48 positions) come from the index */
    CHECK_OK(ob_engine_submit(e, prompt, 50, &g, &r));
    CHECK_EQ_INT(drain(r, out2, 32, &d2), 20);
    ob_request_free(r);
    CHECK_EQ_INT(d2.n_cached, 48);
    CHECK(memcmp(out1, out2, 20 * sizeof(ob_token)) == 0);
    CHECK(memcmp(out1, g_expected + 49, 20 * sizeof(ob_token)) == 0);
    ob_engine_stats st;
    ob_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.tokens_cached, 48);
    ob_engine_free(e);
}

TEST(no_page_leaks_after_many_mixed_requests) {
    NEED_MODEL();
    ob_engine *e = new_engine(4, 128, 32, 24, 8); /* tight pool: preemption and eviction happen */
    uint64_t rng = 12345;
    enum { R = 400 };
    ob_request *live[8] = {0};
    int done = 0, submitted = 0;
    while (done < R) {
        for (int i = 0; i < 8 && submitted < R; i++) {
            if (live[i]) continue;
            ob_token prompt[40];
            int n = 1 + (int)(test_rand_u64(&rng) % 39);
            prompt[0] = 1;
            for (int k = 1; k < n; k++) prompt[k] = g_expected[k - 1]; /* shared prefixes */
            ob_gen_params g = ob_gen_default_params();
            g.sampling.seed = test_rand_u64(&rng);
            g.max_tokens = 1 + (int)(test_rand_u64(&rng) % 12);
            if (ob_engine_submit(e, prompt, n, &g, &live[i]) == 0) submitted++;
            else live[i] = NULL;
        }
        for (int i = 0; i < 8; i++) {
            if (!live[i]) continue;
            ob_event ev;
            if (test_rand_u64(&rng) % 7 == 0) ob_request_cancel(live[i]);
            if (ob_request_wait(live[i], &ev, 20000) != 0) {
                CHECK_MSG(0, "request timed out");
                return;
            }
            if (ev.type == OB_EVENT_DONE) {
                ob_request_free(live[i]);
                live[i] = NULL;
                done++;
            }
        }
    }
    ob_engine_stats st;
    ob_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_EQ_INT(st.running, 0);
    CHECK_EQ_INT(st.requests_ok + st.requests_cancelled + st.requests_failed, R);
    CHECK_EQ_INT(st.requests_failed, 0);
    ob_engine_free(e);
}

TEST(logprobs_are_log_softmax) {
    NEED_MODEL();
    ob_engine *e = new_engine(1, 64, 16, 0, 16);
    ob_token bos = 1;
    ob_request *r;
    ob_gen_params g = greedy(3);
    g.top_logprobs = 3;
    CHECK_OK(ob_engine_submit(e, &bos, 1, &g, &r));
    ob_event ev;
    CHECK_EQ_INT(ob_request_wait(r, &ev, 20000), 0);
    CHECK_EQ_INT(ev.type, OB_EVENT_TOKEN);
    CHECK_EQ_INT(ev.n_top, 3);
    CHECK_EQ_INT(ev.top[0].id, ev.token); /* greedy picks the most likely */
    CHECK_NEAR(ev.top[0].logprob, ev.logprob, 1e-6);
    CHECK(ev.logprob < 0 && ev.logprob > -1.0f);
    CHECK(ev.top[1].logprob <= ev.top[0].logprob && ev.top[2].logprob <= ev.top[1].logprob);
    /* reference logits at pos 0: 17.0235 vs 15.4062 -> p(top) ~ 0.8 */
    CHECK_NEAR(ev.top[1].logprob - ev.top[0].logprob, 15.4062 - 17.0235, 1e-3);
    ob_request_free(r);
    ob_engine_free(e);
}

/* ---- invariance on every verified architecture (transformers fixtures) ---- */

static int read_ids(const char *path, ob_token *out, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, v;
    while (n < cap && fscanf(f, "%d", &v) == 1) out[n++] = v;
    fclose(f);
    return n;
}

/* Run `copies` identical requests of the prompt through an engine; all
 * outputs must equal `want`. */
static void run_copies(ob_model *m, const ob_token *prompt, int np, const ob_token *want, int ngen, int n_par,
                       int n_batch, int64_t kv_blocks, int copies, const char *what, const char *name) {
    ob_engine_params p = ob_engine_default_params();
    p.n_parallel = n_par;
    p.n_ctx = 128;
    p.n_batch = n_batch;
    p.kv_blocks = kv_blocks;
    p.kv_block_size = 8;
    p.n_threads = 1; /* tiny model: threads only add hand-offs (see test_engine.c) */
    p.kv_type = OB_KV_F32;
    p.queue_max = 64;
    ob_engine *e = NULL;
    CHECK_OK(ob_engine_create(m, &p, &e));
    if (!e) return;
    ob_request *r[16];
    for (int round = 0; round < 2; round++) { /* the second round finds the prompt in the prefix index */
        for (int i = 0; i < copies; i++) {
            ob_gen_params g = greedy(ngen);
            g.ignore_eos = true;
            CHECK_OK(ob_engine_submit(e, prompt, np, &g, &r[i]));
        }
        for (int i = 0; i < copies; i++) {
            ob_token out[64];
            ob_event done;
            int n = drain(r[i], out, 64, &done);
            CHECK_MSG(n == ngen && memcmp(out, want, (size_t)ngen * sizeof(ob_token)) == 0,
                      "%s %s round %d copy %d: %d tokens, differs", name, what, round, i, n);
            if (round == 1) CHECK_MSG(done.n_cached > 0, "%s %s: no prefix reuse in round 2", name, what);
            ob_request_free(r[i]);
        }
    }
    ob_engine_stats st;
    ob_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    ob_engine_free(e);
}

TEST(invariance_on_every_verified_architecture) {
    static const char *cases[] = {"llama", "llama_tied", "llama_rope_linear", "llama_rope_yarn", "llama_rope_llama3",
                                  "mistral_swa", "qwen2", "qwen3", "qwen3_tied"};
    char dir[4096], out[256];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(dir, sizeof dir, "%s/tests/data/models/%s", OB_SOURCE_DIR, cases[c]);
        snprintf(out, sizeof out, "/tmp/ob_sched_%d_%s.gguf", (int)getpid(), cases[c]);
        ob_convert_opts o;
        ob_convert_opts_init(&o);
        o.outtype = OB_TYPE_F32;
        CHECK_OK(ob_convert_hf(dir, out, &o));
        ob_model *m = NULL;
        CHECK_OK(ob_model_load(out, NULL, &m));
        unlink(out);
        if (!m) continue;
        ob_token prompt[64], ref[32];
        char path[4200];
        snprintf(path, sizeof path, "%s/prompt.txt", dir);
        int np = read_ids(path, prompt, 64);
        snprintf(path, sizeof path, "%s/greedy.txt", dir);
        int ng = read_ids(path, ref, 32);
        CHECK(np == 64 && ng == 32);
        /* a 40-token prompt leaves room in the 128-position context */
        np = 40;
        ob_token alone[16];
        /* alone, whole prompt in one step */
        ob_engine_params p = ob_engine_default_params();
        p.n_ctx = 128;
        p.kv_type = OB_KV_F32;
        p.n_threads = 1; /* tiny model: threads only add hand-offs (see test_engine.c) */
        ob_engine *e = NULL;
        CHECK_OK(ob_engine_create(m, &p, &e));
        ob_request *r;
        ob_gen_params g = greedy(16);
        g.ignore_eos = true;
        CHECK_OK(ob_engine_submit(e, prompt, np, &g, &r));
        ob_event done;
        CHECK_EQ_INT(drain(r, alone, 16, &done), 16);
        ob_request_free(r);
        ob_engine_free(e);
        /* with 7 others and chunked prefill (budget 8 per step), twice (prefix cache) */
        run_copies(m, prompt, np, alone, 16, 8, 16, 0, 8, "8 in a batch, chunked", cases[c]);
        /* with a pool too small for everyone: preemptions */
        run_copies(m, prompt, np, alone, 16, 4, 64, 16, 4, "preempted", cases[c]);
        /* the full 64-token prompt gives transformers' greedy continuation */
        p.n_ctx = 128;
        CHECK_OK(ob_engine_create(m, &p, &e));
        g = greedy(32);
        g.ignore_eos = true;
        ob_token full[32];
        CHECK_OK(ob_engine_submit(e, prompt, 64, &g, &r));
        read_ids(path, ref, 32);
        CHECK_EQ_INT(drain(r, full, 32, &done), 32);
        CHECK_MSG(memcmp(full, ref, sizeof full) == 0, "%s: engine greedy differs from transformers", cases[c]);
        ob_request_free(r);
        ob_engine_free(e);
        ob_model_free(m);
    }
}

int main(int argc, char **argv) {
    int rc = test_main(argc, argv);
    ob_model_free(g_model);
    return rc;
}
