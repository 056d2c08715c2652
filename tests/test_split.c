/*
 * test_split.c - partial offload (src/backend/split.c, `-ngl N`) without a
 * GPU: the "device" half of a split model is a second CPU backend
 * (ob_split_device_factory), with memory of its own. A copy the split
 * backend forgets, a stale range or an op placed on the wrong half gives
 * different logits, so every check is against the same file run whole on
 * the CPU, bit for bit (the same kernels run either way).
 *
 * Models: committed transformers fixtures (tests/data/models) converted to
 * F32 here - a llama, qwen3 (q/k norms), gemma2 (soft-capping, post-norms),
 * phi2 (LayerNorm with biases, parallel attention and MLP), gpt2 (learned
 * positions), bloom (ALiBi), qwen3moe (experts) and deepseek_v3 (MLA) -
 * each with its last layer on the device, and stories260K (../shared, 5
 * layers) split at every layer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/split.h"
#include "convert/convert.h"
#include "core/status.h"
#include "model/model.h"
#include "onebit.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

static int cpu_device(ob_backend **out) { return ob_backend_cpu_create(1, out); }

typedef struct run {
    float *logits;   /* [np][V] prompt logits, then [ngen][V] of the steps */
    int32_t gen[16];
    int V;
} run;

#define NGEN 8

/* Prompt in one batch (logits everywhere), then NGEN greedy steps; with a second
 * sequence that shares the prompt's first half (ob_seq_copy: its pages are copied on
 * write) stepping alongside when `fork`. */
static void (*g_after_ctx)(ob_context *ctx); /* a test's hook on the new context (layer ops, below) */
static int g_lk_layers;                      /* the model's layers, for that hook's checks */

static bool run_model(const char *path, int ngl, const int32_t *prompt, int np, bool fork, run *r,
                      ob_split_stats st[2]) {
    memset(r, 0, sizeof *r);
    ob_model_params mp = ob_model_default_params();
    mp.n_gpu_layers = ngl;
    ob_model *m = NULL;
    CHECK_OK(ob_model_load(path, &mp, &m));
    if (!m) return false;
    CHECK_MSG(ngl == 0 || ob_backend_is_split(((ob_model_impl *)m)->backend), "-ngl %d: the model is not split", ngl);
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = 128;
    cp.n_seq_max = 2;
    cp.n_batch = 128;
    cp.n_threads = 1;
    cp.kv_block_size = 16;
    ob_context *ctx = NULL;
    CHECK_OK(ob_context_create(m, &cp, &ctx));
    bool ok = ctx != NULL;
    if (ok && g_after_ctx) {
        g_lk_layers = ob_model_n_layer(m);
        g_after_ctx(ctx);
    }
    r->V = ob_model_n_vocab(m);
    const size_t V = (size_t)r->V;
    r->logits = calloc((size_t)(np + 2 * NGEN) * V, sizeof(float));
    int32_t pos[128], seq[128];
    int8_t want[128];
    for (int i = 0; i < np; i++) pos[i] = i, seq[i] = 0, want[i] = 1;
    if (ok) {
        ob_batch b = {np, prompt, pos, seq, want};
        ok = ob_decode(ctx, &b) == 0;
        CHECK_MSG(ok, "%s: prompt: %s", path, ob_last_error());
        for (int i = 0; ok && i < np; i++) memcpy(r->logits + (size_t)i * V, ob_get_logits(ctx, i), V * 4);
    }
    if (st) ob_backend_split_stats(((ob_model_impl *)m)->backend, &st[0]);
    if (ok && fork) {
        ok = ob_seq_copy(ctx, 0, 1, np / 2) == 0;
        CHECK_MSG(ok, "seq_copy: %s", ob_last_error());
    }
    const float *last = r->logits + (size_t)(np - 1) * V;
    int32_t other = prompt[np / 2];
    for (int s = 0; ok && s < NGEN; s++) {
        int best = 0;
        for (size_t i = 1; i < V; i++)
            if (last[i] > last[best]) best = (int)i;
        r->gen[s] = best;
        ob_token tk[2] = {best, other};
        int32_t p2[2] = {np + s, np / 2 + s}, sq[2] = {0, 1};
        int8_t w2[2] = {1, 1};
        ob_batch b = {fork ? 2 : 1, tk, p2, sq, w2};
        ok = ob_decode(ctx, &b) == 0;
        CHECK_MSG(ok, "%s: step %d: %s", path, s, ob_last_error());
        if (!ok) break;
        memcpy(r->logits + (size_t)(np + 2 * s) * V, ob_get_logits(ctx, 0), V * 4);
        if (fork) {
            const float *l1 = ob_get_logits(ctx, 1);
            memcpy(r->logits + (size_t)(np + 2 * s + 1) * V, l1, V * 4);
            other = 0;
            for (size_t i = 1; i < V; i++)
                if (l1[i] > l1[other]) other = (int32_t)i;
        }
        last = r->logits + (size_t)(np + 2 * s) * V;
    }
    if (st) ob_backend_split_stats(((ob_model_impl *)m)->backend, &st[1]);
    ob_context_free(ctx);
    ob_model_free(m);
    return ok;
}

/* Logits of the split run equal the whole-CPU run's, bit for bit. */
static void compare(const char *what, const run *a, const run *b, int np, bool fork) {
    const size_t rows = (size_t)np + (size_t)(fork ? 2 : 1) * NGEN;
    size_t bad = 0, first = 0;
    for (size_t r = 0; r < rows; r++) {
        if (!fork && r >= (size_t)np && (r - (size_t)np) % 2) continue; /* the unused second-sequence rows */
        if (memcmp(a->logits + r * (size_t)a->V, b->logits + r * (size_t)a->V, (size_t)a->V * 4)) {
            if (!bad) first = r;
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %zu logit rows differ from the CPU's (first: row %zu)", what, bad, first);
    CHECK_MSG(memcmp(a->gen, b->gen, sizeof a->gen) == 0, "%s: greedy tokens differ", what);
}

static bool read_prompt(const char *dir, int32_t *ids, int *n) {
    char p[4400];
    snprintf(p, sizeof p, "%s/prompt.txt", dir);
    FILE *f = fopen(p, "r");
    if (!f) return false;
    *n = 0;
    while (*n < 64 && fscanf(f, "%d", &ids[*n]) == 1) (*n)++;
    fclose(f);
    return *n > 0;
}

/* Fixture `name` (tests/data/models) converted to an F32 GGUF at out, a /tmp name with `tag`,
 * and its prompt (up to 64 ids) in prompt / np; false when either step fails (reported). */
static bool fixture_f32(const char *name, const char *tag, char out[256], int32_t prompt[64], int *np) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tests/data/models/%s", OB_SOURCE_DIR, name);
    snprintf(out, 256, "/tmp/ob_test_split_%d_%s_%s.gguf", (int)getpid(), tag, name);
    *np = 0;
    CHECK_MSG(read_prompt(dir, prompt, np), "%s: no prompt.txt", dir);
    if (!*np) return false;
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_F32;
    const int rc = ob_convert_hf(dir, out, &o);
    CHECK_MSG(rc == 0, "%s: convert: %s", name, ob_last_error());
    return rc == 0;
}

static void check_fixture(const char *name) {
    char out[256];
    int32_t prompt[64];
    int np = 0;
    if (!fixture_f32(name, "fx", out, prompt, &np)) return;
    for (int fork = 0; fork < 2; fork++) {
        run cpu = {0}, split = {0};
        ob_split_stats st[2];
        bool ok = run_model(out, 0, prompt, np, fork, &cpu, NULL) && run_model(out, 1, prompt, np, fork, &split, st);
        if (ok) {
            char what[128];
            snprintf(what, sizeof what, "%s, last layer on the device%s", name, fork ? ", two sequences" : "");
            compare(what, &split, &cpu, np, fork);
            CHECK_MSG(st[1].ops[0] > 0 && st[1].ops[1] > 0, "%s: ops host %llu device %llu", what,
                      (unsigned long long)st[1].ops[0], (unsigned long long)st[1].ops[1]);
            CHECK_MSG(st[1].n_up > 0 && st[1].n_down > 0, "%s: nothing crossed", what);
        }
        free(cpu.logits);
        free(split.logits);
    }
    unlink(out);
}

/* Placement and coherence, each op with its weight: the prompt's host products stay on the
 * host (OB_SPLIT_OFFLOAD_MIN=0), so every product runs the same CPU kernel on the same packed
 * weights as the whole-CPU run (split_prompt_products_offloaded covers the offload). */
TEST(split_fixtures_equal_cpu) {
    ob_split_device_factory = cpu_device;
    setenv("OB_SPLIT_OFFLOAD_MIN", "0", 1);
    static const char *const names[] = {"llama", "qwen3", "gemma2", "phi2", "gpt2", "bloom", "qwen3moe", "deepseek_v3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_fixture(names[i]);
    unsetenv("OB_SPLIT_OFFLOAD_MIN");
    ob_split_device_factory = NULL;
}

/* The engine's step budget when none is given: 512 tokens on the CPU, 2048 when the model
 * runs on a device (each step's prompt tokens pay for one bf16 copy of every quantized
 * weight there, docs/cuda.md); a budget given is kept. The split backend stands in for
 * the device. */
TEST(split_engine_step_budget_by_device) {
    char out[256];
    int32_t prompt[64];
    int np = 0;
    if (!fixture_f32("llama", "budget", out, prompt, &np)) return;
    ob_split_device_factory = cpu_device;
    for (int ngl = 0; ngl <= 1; ngl++)
        for (int given = 0; given <= 1; given++) {
            ob_model_params mp = ob_model_default_params();
            mp.n_gpu_layers = ngl;
            ob_model *m = NULL;
            CHECK_OK(ob_model_load(out, &mp, &m));
            if (!m) continue;
            ob_engine_params ep = ob_engine_default_params();
            ep.n_ctx = 64;
            ep.n_threads = 1;
            if (given) ep.n_batch = 100;
            ob_engine *e = NULL;
            CHECK_OK(ob_engine_create(m, &ep, &e));
            if (e) {
                const int32_t want = given ? 100 : ngl ? 2048 : 512;
                CHECK_MSG(ob_engine_get_params(e)->n_batch == want, "-ngl %d, n_batch %s: %d, want %d", ngl,
                          given ? "100" : "default", ob_engine_get_params(e)->n_batch, want);
                ob_engine_free(e);
            }
            ob_model_free(m);
        }
    ob_split_device_factory = NULL;
    unlink(out);
}

/* What crosses per decode step: the residual stream up once (into the first device layer)
 * and the output rows down once (into the host's output norm); the KV pools stay put. The
 * prompt's host products stay on the host here (OB_SPLIT_OFFLOAD_MIN=0; the next test has
 * them offloaded). */
TEST(split_traffic_per_step) {
    ob_split_device_factory = cpu_device;
    setenv("OB_SPLIT_OFFLOAD_MIN", "0", 1);
    char out[256];
    int32_t prompt[64];
    int np = 0;
    const bool have = fixture_f32("llama", "traffic", out, prompt, &np);
    run r = {0};
    ob_split_stats st[2];
    if (have && run_model(out, 1, prompt, np, false, &r, st)) {
        const uint64_t E = 64, step = E * sizeof(float); /* the fixture's hidden size */
        CHECK_MSG(st[0].bytes_up == (uint64_t)np * step, "prompt: %llu bytes up, want %llu",
                  (unsigned long long)st[0].bytes_up, (unsigned long long)((uint64_t)np * step));
        CHECK_MSG(st[0].bytes_down == (uint64_t)np * step, "prompt: %llu bytes down, want %llu",
                  (unsigned long long)st[0].bytes_down, (unsigned long long)((uint64_t)np * step));
        CHECK_MSG(st[1].bytes_up - st[0].bytes_up == NGEN * step && st[1].n_up - st[0].n_up == NGEN,
                  "steps: %llu bytes in %llu copies up, want %llu in %d", (unsigned long long)(st[1].bytes_up - st[0].bytes_up),
                  (unsigned long long)(st[1].n_up - st[0].n_up), (unsigned long long)(NGEN * step), NGEN);
        CHECK_MSG(st[1].bytes_down - st[0].bytes_down == NGEN * step && st[1].n_down - st[0].n_down == NGEN,
                  "steps: %llu bytes in %llu copies down, want %llu in %d",
                  (unsigned long long)(st[1].bytes_down - st[0].bytes_down),
                  (unsigned long long)(st[1].n_down - st[0].n_down), (unsigned long long)(NGEN * step), NGEN);
    }
    free(r.logits);
    unlink(out);
    ob_split_device_factory = NULL;
    unsetenv("OB_SPLIT_OFFLOAD_MIN");
}

/* stories260K (5 layers): every split point, prompt and steps equal to the CPU's. */
/* A prompt batch of 32 tokens or more (OB_SPLIT_OFFLOAD_MIN, default 32) multiplies the host
 * layers' weights on the device: each such product sends its weight up once (bytes_w: every
 * host product of the 64-token prompt - the host layers' seven each and the output head -
 * and nothing else), the logits stay the CPU's bit for bit, and the decode steps (1 token)
 * send no weights. Off (0) or above the batch (65): no weight crosses. The device multiplies
 * the bytes sent (the host's repacked panels are the host's own form), so every backend here
 * runs with OB_CPU_REPACK=0 and the whole-CPU run uses the same kernels on the same layout;
 * llama (the byte count) and phi2 (biases on the products: they go up too). */
static uint64_t host_weight_bytes(const char *path, int *n_products) {
    ob_model_params mp = ob_model_default_params();
    ob_model *m = NULL;
    CHECK_OK(ob_model_load(path, &mp, &m));
    if (!m) return 0;
    const ob_model_impl *mi = (const ob_model_impl *)m;
    uint64_t n = ob_tensor_nbytes(&mi->output);
    *n_products = 1;
    for (int64_t il = 0; il + 1 < mi->hp.n_layer; il++) { /* -ngl 1: every layer but the last */
        const ob_layer *L = &mi->layers[il];
        const ob_tensor *w[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) n += ob_tensor_nbytes(w[k]), (*n_products)++;
    }
    ob_model_free(m);
    return n;
}

static void check_offload(const char *name) {
    char out[256];
    int32_t prompt[64];
    int np = 0;
    if (!fixture_f32(name, "offload", out, prompt, &np)) return;
    CHECK_MSG(np >= 32, "the %s fixture's prompt has %d tokens; this test needs 32 or more", name, np);
    int n_products = 0;
    const bool count = strcmp(name, "llama") == 0; /* its products have no biases */
    const uint64_t want = count ? host_weight_bytes(out, &n_products) : 0;
    run cpu = {0};
    if (run_model(out, 0, prompt, np, false, &cpu, NULL)) {
        ob_split_device_factory = cpu_device;
        static const char *const mins[] = {NULL, "0", "65"};
        for (int k = 0; k < 3; k++) {
            if (mins[k]) setenv("OB_SPLIT_OFFLOAD_MIN", mins[k], 1);
            else unsetenv("OB_SPLIT_OFFLOAD_MIN");
            run split = {0};
            ob_split_stats st[2];
            if (run_model(out, 1, prompt, np, false, &split, st)) {
                char what[96];
                snprintf(what, sizeof what, "%s, last layer on the device, OB_SPLIT_OFFLOAD_MIN %s", name,
                         mins[k] ? mins[k] : "unset");
                compare(what, &split, &cpu, np, false);
                const uint64_t w0 = k == 0 ? want : 0;
                if (!count) CHECK_MSG((st[0].bytes_w > 0) == (k == 0), "%s: %llu weight bytes", what,
                                      (unsigned long long)st[0].bytes_w);
                else CHECK_MSG(st[0].bytes_w == w0 && st[0].n_w == (uint64_t)(k == 0 ? n_products : 0),
                          "%s: prompt sent %llu weight bytes in %llu products, want %llu in %d", what,
                          (unsigned long long)st[0].bytes_w, (unsigned long long)st[0].n_w, (unsigned long long)w0,
                          k == 0 ? n_products : 0);
                CHECK_MSG(st[1].bytes_w == st[0].bytes_w, "%s: decode steps sent %llu weight bytes", what,
                          (unsigned long long)(st[1].bytes_w - st[0].bytes_w));
            }
            free(split.logits);
        }
        unsetenv("OB_SPLIT_OFFLOAD_MIN");
        ob_split_device_factory = NULL;
    }
    free(cpu.logits);
    unlink(out);
}

TEST(split_prompt_products_offloaded) {
    setenv("OB_CPU_REPACK", "0", 1);
    check_offload("llama");
    check_offload("phi2");
    unsetenv("OB_CPU_REPACK");
}

TEST(split_every_layer_stories260K) {
    const char *d = test_models_dir();
    if (!d) {
        test_skip("../shared/models is absent");
        return;
    }
    ob_split_device_factory = cpu_device;
    setenv("OB_SPLIT_OFFLOAD_MIN", "0", 1); /* as split_fixtures_equal_cpu */
    const char *path = test_path(d, "stories260K/stories260K.gguf");
    int32_t prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = 1 + (i * 37) % 500;
    run cpu = {0};
    if (run_model(path, 0, prompt, 40, true, &cpu, NULL)) {
        for (int ngl = 1; ngl <= 4; ngl++) {
            run split = {0};
            if (run_model(path, ngl, prompt, 40, true, &split, NULL)) {
                char what[64];
                snprintf(what, sizeof what, "stories260K -ngl %d", ngl);
                compare(what, &split, &cpu, 40, true);
            }
            free(split.logits);
        }
    }
    free(cpu.logits);
    /* -ngl at or above the layer count is the whole model on the device: not split */
    ob_model_params mp = ob_model_default_params();
    mp.n_gpu_layers = 5;
    ob_model *m = NULL;
    CHECK_OK(ob_model_load(path, &mp, &m));
    if (m) CHECK(!ob_backend_is_split(((ob_model_impl *)m)->backend));
    ob_model_free(m);
    unsetenv("OB_SPLIT_OFFLOAD_MIN");
    ob_split_device_factory = NULL;
}

int main(int argc, char **argv) { return test_main(argc, argv); }

/* ---- the optional layer ops (ob_backend_ops.layer_qkv / layer_ffn) ----
 *
 * The llama-family forward hands a single token's layer to these ops when the backend has
 * them (the CUDA backend's experimental persistent kernels, src/cuda/layer.cu) and runs the
 * ops one by one when they are NULL or answer OB_ERR_UNSUPPORTED. Here the CPU backend gets
 * both ops, written as the same CPU ops in the documented order (ob_layer_qkv, ob_layer_ffn in
 * backend.h): the logits must keep their bits, so every argument the forward passes (norms,
 * eps, biases, the act) reaches its place; and declining must change nothing either. */
static const ob_backend_ops *g_lk_inner;
static ob_backend_ops g_lk_ops;
static int g_lq_calls, g_lf_calls;
static bool g_lk_decline;

static int t_layer_qkv(ob_backend *b, const ob_layer_qkv *p) {
    g_lq_calls++;
    if (g_lk_decline) return OB_ERR_UNSUPPORTED;
    const ob_backend_ops *op = g_lk_inner;
    const int64_t E = p->x->ne[0];
    float *hb = malloc((size_t)E * sizeof(float));
    ob_tensor h;
    ob_tensor_f32_2d(&h, E, 1, hb);
    int rc = op->rms_norm(b, p->x, p->norm, p->eps, E, &h);
    if (rc == 0) rc = op->matmul(b, p->wq, &h, p->bq, p->q);
    if (rc == 0) rc = op->matmul(b, p->wk, &h, p->bk, p->k);
    if (rc == 0) rc = op->matmul(b, p->wv, &h, p->bv, p->v);
    free(hb);
    return rc;
}

static int t_layer_ffn(ob_backend *b, const ob_layer_ffn *p) {
    g_lf_calls++;
    if (g_lk_decline) return OB_ERR_UNSUPPORTED;
    const ob_backend_ops *op = g_lk_inner;
    const int64_t E = p->x->ne[0], F = p->gate->ne[1];
    float *buf = malloc((size_t)(2 * E + 2 * F) * sizeof(float));
    ob_tensor t, h, g, u;
    ob_tensor_f32_2d(&t, E, 1, buf);
    ob_tensor_f32_2d(&h, E, 1, buf + E);
    ob_tensor_f32_2d(&g, F, 1, buf + 2 * E);
    ob_tensor_f32_2d(&u, F, 1, buf + 2 * E + F);
    int rc = op->matmul(b, p->wo, p->att, p->bo, &t);
    if (rc == 0) rc = op->add(b, p->x, &t, p->x);
    if (rc == 0) rc = op->rms_norm(b, p->x, p->norm, p->eps, E, &h);
    if (rc == 0) rc = op->matmul(b, p->gate, &h, NULL, &g);
    if (rc == 0) rc = op->matmul(b, p->up, &h, NULL, &u);
    if (rc == 0) rc = op->glu(b, (ob_act)p->act, &g, &u, &g);
    if (rc == 0) rc = op->matmul(b, p->down, &g, NULL, &t);
    if (rc == 0) rc = op->add(b, p->x, &t, p->x);
    free(buf);
    return rc;
}

static void give_layer_ops(ob_context *ctx) {
    ob_backend *b = ob_context_backend(ctx);
    g_lk_inner = b->ops;
    g_lk_ops = *b->ops;
    g_lk_ops.layer_qkv = t_layer_qkv;
    g_lk_ops.layer_ffn = t_layer_ffn;
    b->ops = &g_lk_ops; /* the context frees its backend through the same free op */
}

TEST(layer_ops_equal_the_ops_one_by_one) {
    /* llama: plain; qwen2: q/k/v biases; qwen3: per-head q/k norms after layer_qkv */
    static const char *const names[] = {"llama", "qwen2", "qwen3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char out[256];
        int32_t prompt[64];
        int np = 0;
        if (!fixture_f32(names[i], "lk", out, prompt, &np)) continue;
        run plain = {0}, fused = {0}, declined = {0};
        int calls[2][2] = {{0, 0}, {0, 0}};
        bool ok = run_model(out, 0, prompt, np, false, &plain, NULL);
        g_after_ctx = give_layer_ops;
        for (int d = 0; d < 2 && ok; d++) {
            g_lk_decline = d == 1;
            g_lq_calls = g_lf_calls = 0;
            ok = run_model(out, 0, prompt, np, false, d ? &declined : &fused, NULL);
            calls[d][0] = g_lq_calls, calls[d][1] = g_lf_calls;
        }
        g_after_ctx = NULL;
        g_lk_decline = false;
        if (ok) {
            char what[128];
            snprintf(what, sizeof what, "%s, layer ops composed of the CPU's", names[i]);
            compare(what, &fused, &plain, np, false);
            snprintf(what, sizeof what, "%s, layer ops declined", names[i]);
            compare(what, &declined, &plain, np, false);
            /* the prompt is one batch of np tokens (never asked), then NGEN steps of one token,
             * each asking both ops once a layer */
            for (int d = 0; d < 2; d++)
                CHECK_MSG(calls[d][0] == NGEN * g_lk_layers && calls[d][1] == NGEN * g_lk_layers,
                          "%s: layer_qkv asked %d times, layer_ffn %d (want %d steps x %d layers)", names[i],
                          calls[d][0], calls[d][1], NGEN, g_lk_layers);
        }
        free(plain.logits), free(fused.logits), free(declined.logits);
        unlink(out);
    }
}
