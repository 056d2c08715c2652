/*
 * test_batch_invariance.c - the CPU backend gives a token the same logits,
 * bit for bit, whether it is decoded alone or inside a batch (speculative
 * verification, chunked prefill, other sequences in the same step). Issue 9
 * promises token-for-token equality of speculative and plain decoding; it
 * holds on the CPU only because of this (docs/performance.md, "Batch
 * invariance").
 *
 * Two levels, for every CPU tier this machine has:
 *   - matmul: every weight type with a quantizer, 9 activation rows one at a
 *     time vs all at once vs split 2+5+2, on 1 and 2 threads, packed panels
 *     and native rows;
 *   - models: stories260K (../shared, skipped when absent) and the qwen3 and
 *     mistral_swa fixtures of tests/data/models converted here (F32, F16,
 *     Q4_0 weights), F16 and Q8_0 KV caches, page sizes 32 and 48 (one that
 *     does not divide the 256-position key ranges). At ~30 and ~700 positions
 *     (past 512, where single-token decode takes the split-K attention and a
 *     5- or 9-token batch the blocked one), B = 2, 5, 9 tokens decoded one at
 *     a time on one sequence and in one batch (with a token of another
 *     sequence) on a second; and one prefill in one call vs in chunks of 97.
 *     The model contexts use 2 threads: split-K only runs with more than one.
 * The engine picks its tier once per process (OB_CPU), so each tier's model
 * checks run in a forked child with OB_CPU set.
 * Every comparison is exact (==); nothing here has a tolerance.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "convert/convert.h"
#include "core/status.h"
#include "cpu/kernels.h"
#include "onebit.h"
#include "quant/quant.h"
#include "quant/quantize.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

/* ---- matmul ---- */

/* nout 48: packed panels where the tier packs the type; 40 (not a multiple
 * of 16): native rows for every type. 41 tokens: with AMX, two tiles of 16
 * and 9 left to the VNNI kernel; nin 1280: 5 super-blocks and 40 blocks, so
 * the tile kernels' slabs (4 super-blocks, 32 blocks) end part-way. */
enum { MM_NIN = 1280, MM_NOUT = 48, MM_NOUT_NATIVE = 40, MM_N = 41 };

/* out[MM_N][nout] = w x, with the tokens handed to the backend in runs of
 * the given sizes (summing to MM_N). */
static int mm_runs(ob_backend *b, ob_tensor *w, float *x, float *out, const int *runs, int n_runs) {
    const int64_t nout = w->ne[1];
    int off = 0;
    for (int i = 0; i < n_runs; i++) {
        ob_tensor xt, ot;
        ob_tensor_f32_2d(&xt, MM_NIN, runs[i], x + (size_t)off * MM_NIN);
        ob_tensor_f32_2d(&ot, nout, runs[i], out + (size_t)off * (size_t)nout);
        if (b->ops->matmul(b, w, &xt, NULL, &ot) < 0) return -1;
        off += runs[i];
    }
    return 0;
}

static int count_diff(const float *a, const float *b, size_t n, double *maxd) {
    int nd = 0;
    *maxd = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            nd++;
            double d = fabs((double)a[i] - (double)b[i]);
            if (!(d <= *maxd)) *maxd = d;
        }
    return nd;
}

TEST(matmul_every_type_every_tier) {
    uint64_t rng = 42;
    float *wf = malloc(sizeof(float) * MM_NIN * MM_NOUT), *x = malloc(sizeof(float) * MM_NIN * MM_N);
    float *ref = malloc(sizeof(float) * MM_NOUT * MM_N), *got = malloc(sizeof(float) * MM_NOUT * MM_N);
    void *wq = malloc(sizeof(double) * MM_NIN * MM_NOUT); /* room for the widest type (F64) */
    for (int i = 0; i < MM_NIN * MM_NOUT; i++) wf[i] = test_rand_normal(&rng) * 0.05f;
    for (int i = 0; i < MM_NIN * MM_N; i++) x[i] = test_rand_normal(&rng);
    static int one[MM_N];
    for (int i = 0; i < MM_N; i++) one[i] = 1;
    static const int all[1] = {MM_N}, split[4] = {2, 5, 2, 32};
    int n_checked = 0;
    for (int tier = OB_CPU_SCALAR; tier <= OB_CPU_AVX512; tier++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)tier);
        if (!k) continue;
        for (int nth = 1; nth <= 2; nth++) {
            ob_backend *b = NULL;
            if (ob_backend_cpu_create_with(nth, k, &b) < 0) {
                CHECK_MSG(0, "backend: %s", ob_last_error());
                continue;
            }
            for (int type = 0; type < OB_TYPE_COUNT * 2; type++) {
                const int nout = type < OB_TYPE_COUNT ? MM_NOUT : MM_NOUT_NATIVE;
                const ob_type_traits *tr = ob_type_get(type % OB_TYPE_COUNT);
                if (!tr || MM_NIN % tr->block_size) continue;
                if (type % OB_TYPE_COUNT == OB_TYPE_F32)
                    memcpy(wq, wf, sizeof(float) * MM_NIN * MM_NOUT);
                else if (tr->from_float_ref && tr->to_float)
                    tr->from_float_ref(wf, wq, MM_NIN * MM_NOUT);
                else
                    continue;
                int64_t sh[2] = {MM_NIN, nout};
                ob_tensor w;
                ob_tensor_init(&w, (ob_type)(type % OB_TYPE_COUNT), 2, sh, NULL);
                w.name = "w";
                if (b->ops->weight(b, &w, wq) < 0) {
                    CHECK_MSG(0, "weight %s: %s", tr->name, ob_last_error());
                    continue;
                }
                if (mm_runs(b, &w, x, ref, one, MM_N) < 0) {
                    /* a type this backend cannot multiply is not this test's business */
                    ob_err_clear();
                    continue;
                }
                double md;
                CHECK(mm_runs(b, &w, x, got, all, 1) == 0);
                int nd = count_diff(ref, got, (size_t)nout * MM_N, &md);
                CHECK_MSG(nd == 0, "%s %s [%d rows], %d threads: 41 at once: %d of %d outputs differ (max %.3g)", k->name,
                          tr->name, nout, nth, nd, nout * MM_N, md);
                CHECK(mm_runs(b, &w, x, got, split, 4) == 0);
                nd = count_diff(ref, got, (size_t)nout * MM_N, &md);
                CHECK_MSG(nd == 0, "%s %s [%d rows], %d threads: 2+5+2+32: %d of %d outputs differ (max %.3g)", k->name,
                          tr->name, nout, nth, nd, nout * MM_N, md);
                n_checked++;
            }
            b->ops->free(b);
        }
    }
    CHECK(n_checked >= 12); /* at least F32, F16, BF16, Q4_0, Q8_0, Q4_K, both layouts, on one tier */
    free(wf), free(x), free(ref), free(got), free(wq);
}

/* ---- one decode token's fused layer halves ---- */

/* The CPU backend's layer_qkv and layer_ffn (one token, one pool run a half)
 * against the ops they stand for, one by one, bit for bit: every tier, 1 to
 * 3 threads, type mixes as the _M files have them (v and down of another
 * type), biases, k and v of 40 rows (native rows, not panels). */
enum { FL_E = 512, FL_Q = 256, FL_KV = 40, FL_F = 768, FL_W = 13 };

typedef struct fl_case {
    ob_type main, v, down;
    bool bias;
} fl_case;

/* the weights of one layer: wq, wk, wv, wo, gate, up, down, bq, bk, bv, bo,
 * attn_norm, ffn_norm */
enum { W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN, W_BQ, W_BK, W_BV, W_BO, W_AN, W_FN };

/* w[i] random, of nin x nout (nout 1: a vector), its data in *data, which
 * the backend may keep pointing into (the CPU backend reads unpacked
 * weights in place), so it lives until the weights are done with. */
static int fl_weight(ob_backend *b, ob_tensor *t, ob_type type, int64_t nin, int64_t nout, uint64_t *rng,
                     void **data) {
    const ob_type_traits *tr = ob_type_get(type);
    float *wf = malloc(sizeof(float) * (size_t)(nin * nout));
    *data = malloc(sizeof(float) * (size_t)(nin * nout));
    for (int64_t i = 0; i < nin * nout; i++) wf[i] = test_rand_normal(rng) * 0.05f;
    if (type == OB_TYPE_F32)
        memcpy(*data, wf, sizeof(float) * (size_t)(nin * nout));
    else
        tr->from_float_ref(wf, *data, nin * nout);
    free(wf);
    int64_t sh[2] = {nin, nout};
    ob_tensor_init(t, type, nout == 1 ? 1 : 2, sh, NULL);
    t->name = tr->name;
    return b->ops->weight(b, t, *data);
}

/* One layer of case fc on backend b: the ops one by one (rows r) against
 * the two halves (rows g); q, k, v and the new x compared. Returns 1 when
 * the halves ran. */
static int fl_check(ob_backend *b, const char *tier, int nth, const fl_case *fc, uint64_t seed) {
    uint64_t rng = seed;
    ob_tensor W[FL_W];
    void *data[FL_W];
    static const int64_t dims[FL_W][2] = {{FL_E, FL_Q}, {FL_E, FL_KV}, {FL_E, FL_KV}, {FL_Q, FL_E}, {FL_E, FL_F},
                                          {FL_E, FL_F}, {FL_F, FL_E}, {FL_Q, 1},     {FL_KV, 1},   {FL_KV, 1},
                                          {FL_E, 1},    {FL_E, 1},    {FL_E, 1}};
    int rc = 0;
    for (int i = 0; i < FL_W; i++) {
        const ob_type t = i == W_V ? fc->v : i == W_DOWN ? fc->down : i >= W_BQ ? OB_TYPE_F32 : fc->main;
        rc |= fl_weight(b, &W[i], t, dims[i][0], dims[i][1], &rng, &data[i]);
    }
    float x0[FL_E], att[FL_Q], r[7][FL_F], g[4][FL_F]; /* r: x, q, k, v, o/down, gate, up and h; g: x, q, k, v */
    for (int i = 0; i < FL_E; i++) x0[i] = test_rand_normal(&rng);
    for (int i = 0; i < FL_Q; i++) att[i] = test_rand_normal(&rng);
    const ob_tensor *bq = fc->bias ? &W[W_BQ] : NULL, *bk = fc->bias ? &W[W_BK] : NULL,
                    *bv = fc->bias ? &W[W_BV] : NULL, *bo = fc->bias ? &W[W_BO] : NULL;
    const ob_backend_ops *op = b->ops;
    ob_tensor tx, th, tq, tk, tv, ta, to, tg, tu;
    memcpy(r[0], x0, sizeof x0);
    ob_tensor_f32_2d(&tx, FL_E, 1, r[0]);
    ob_tensor_f32_2d(&tq, FL_Q, 1, r[1]);
    ob_tensor_f32_2d(&tk, FL_KV, 1, r[2]);
    ob_tensor_f32_2d(&tv, FL_KV, 1, r[3]);
    ob_tensor_f32_2d(&to, FL_E, 1, r[4]);
    ob_tensor_f32_2d(&tg, FL_F, 1, r[5]);
    ob_tensor_f32_2d(&tu, FL_F, 1, r[6]);
    ob_tensor_f32_2d(&th, FL_E, 1, g[0]); /* g[0] as scratch until the halves run */
    ob_tensor_f32_2d(&ta, FL_Q, 1, att);
    if (rc == 0) {
        rc |= op->rms_norm(b, &tx, &W[W_AN], 1e-5f, FL_E, &th);
        rc |= op->matmul(b, &W[W_Q], &th, bq, &tq) | op->matmul(b, &W[W_K], &th, bk, &tk);
        rc |= op->matmul(b, &W[W_V], &th, bv, &tv);
        rc |= op->matmul(b, &W[W_O], &ta, bo, &to) | op->add(b, &tx, &to, &tx);
        rc |= op->rms_norm(b, &tx, &W[W_FN], 1e-5f, FL_E, &th);
        rc |= op->matmul(b, &W[W_GATE], &th, NULL, &tg) | op->matmul(b, &W[W_UP], &th, NULL, &tu);
        rc |= op->glu(b, OB_ACT_SILU, &tg, &tu, &tg) | op->matmul(b, &W[W_DOWN], &tg, NULL, &to);
        rc |= op->add(b, &tx, &to, &tx);
    }
    int ran = 0;
    const char *tn = ob_type_name(fc->main);
    if (rc < 0) {
        CHECK_MSG(0, "%s %s, %d threads: weights or ops: %s", tier, tn, nth, ob_last_error());
    } else {
        memcpy(g[0], x0, sizeof x0);
        ob_tensor_f32_2d(&tx, FL_E, 1, g[0]);
        ob_tensor_f32_2d(&tq, FL_Q, 1, g[1]);
        ob_tensor_f32_2d(&tk, FL_KV, 1, g[2]);
        ob_tensor_f32_2d(&tv, FL_KV, 1, g[3]);
        const ob_layer_qkv pq = {&tx, &W[W_AN], 1e-5f, &W[W_Q], &W[W_K], &W[W_V], bq, bk, bv, &tq, &tk, &tv};
        const ob_layer_ffn pf = {&tx, &ta, &W[W_O], bo, &W[W_FN], 1e-5f, &W[W_GATE], &W[W_UP], &W[W_DOWN],
                                 OB_ACT_SILU};
        const int rq = op->layer_qkv(b, &pq), rf = rq < 0 ? rq : op->layer_ffn(b, &pf);
        CHECK_MSG(rq == 0 && rf == 0, "%s %s, %d threads: the halves answered %d / %d (%s)", tier, tn, nth, rq, rf,
                  ob_last_error());
        ran = rq == 0 && rf == 0;
        static const char *names[4] = {"x", "q", "k", "v"};
        static const int lens[4] = {FL_E, FL_Q, FL_KV, FL_KV};
        for (int i = 0; ran && i < 4; i++) {
            double md;
            const int nd = count_diff(r[i], g[i], (size_t)lens[i], &md);
            CHECK_MSG(nd == 0, "%s %s/%s/%s, %d threads: the halves' %s: %d of %d differ from the ops' (max %.3g)",
                      tier, tn, ob_type_name(fc->v), ob_type_name(fc->down), nth, names[i], nd, lens[i], md);
        }
    }
    ob_err_clear();
    for (int i = 0; i < FL_W; i++) free(data[i]);
    return ran;
}

TEST(fused_layer_halves_match_the_ops) {
    static const fl_case cases[] = {
        {OB_TYPE_F32, OB_TYPE_F32, OB_TYPE_F32, true},     {OB_TYPE_F16, OB_TYPE_F16, OB_TYPE_F16, false},
        {OB_TYPE_BF16, OB_TYPE_BF16, OB_TYPE_BF16, false}, {OB_TYPE_Q4_0, OB_TYPE_Q4_0, OB_TYPE_Q8_0, true},
        {OB_TYPE_Q4_K, OB_TYPE_Q6_K, OB_TYPE_Q6_K, false}, {OB_TYPE_Q5_K, OB_TYPE_Q8_0, OB_TYPE_Q4_K, true},
        {OB_TYPE_IQ4_XS, OB_TYPE_IQ4_NL, OB_TYPE_Q5_0, false},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    int n_ran = 0;
    for (int tier = OB_CPU_SCALAR; tier <= OB_CPU_AVX512; tier++) {
        const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)tier);
        if (!k) continue;
        for (int nth = 1; nth <= 3; nth++) {
            ob_backend *b = NULL;
            if (ob_backend_cpu_create_with(nth, k, &b) < 0) {
                CHECK_MSG(0, "backend: %s", ob_last_error());
                continue;
            }
            for (int i = 0; i < nc; i++) n_ran += fl_check(b, k->name, nth, &cases[i], 7 + (uint64_t)i);
            /* two tokens: unsupported, the model runs the ops */
            float two[2 * FL_E];
            ob_tensor t2;
            ob_tensor_f32_2d(&t2, FL_E, 2, two);
            const ob_layer_qkv p2 = {&t2, NULL, 1e-5f, NULL, NULL, NULL, NULL, NULL, NULL, &t2, &t2, &t2};
            CHECK(b->ops->layer_qkv(b, &p2) == OB_ERR_UNSUPPORTED);
            b->ops->free(b);
        }
    }
    CHECK(n_ran >= nc * 3); /* every case on 1-3 threads of the scalar tier at least */
    /* OB_CPU_FUSE=0: unsupported too (a tier named: ob_cpu_kernels_get() would fix this
     * process's tier before the model checks' children set OB_CPU) */
    setenv("OB_CPU_FUSE", "0", 1);
    ob_backend *b = NULL;
    if (ob_backend_cpu_create_with(2, ob_cpu_kernels_for(OB_CPU_SCALAR), &b) == 0) {
        float one[FL_E];
        ob_tensor t1;
        ob_tensor_f32_2d(&t1, FL_E, 1, one);
        const ob_layer_qkv p1 = {&t1, NULL, 1e-5f, NULL, NULL, NULL, NULL, NULL, NULL, &t1, &t1, &t1};
        CHECK(b->ops->layer_qkv(b, &p1) == OB_ERR_UNSUPPORTED);
        b->ops->free(b);
    }
    unsetenv("OB_CPU_FUSE");
}

/* ---- models ---- */

enum { N_CTX = 1024, SHORT_POS = 30, LONG_POS = 700, CHUNK = 97 };

typedef struct model_case {
    const char *label;
    const char *path;
    ob_kv_type kv;
    int block;
} model_case;

static int g_fail; /* mismatches in the current child */

/* Decode n tokens of sequence `seq` from position pos0 in one call; logits
 * for every token when all, else for the last only. */
static int decode_run(ob_context *c, int32_t seq, const ob_token *toks, int32_t pos0, int n, bool all) {
    int32_t pos[LONG_POS], sid[LONG_POS];
    int8_t lg[LONG_POS];
    for (int i = 0; i < n; i++) pos[i] = pos0 + i, sid[i] = seq, lg[i] = (int8_t)(all || i == n - 1);
    ob_batch b = {n, toks, pos, sid, lg};
    int rc = ob_decode(c, &b);
    if (rc < 0) CHECK_MSG(0, "decode: %s", ob_last_error());
    return rc;
}

static void compare(const char *what, const model_case *mc, const float *a, const float *b, int n) {
    double md;
    int nd = count_diff(a, b, (size_t)n, &md);
    if (nd) {
        fprintf(stderr, "  FAIL %s: %s: %d of %d logits differ (max %.3g)\n", mc->label, what, nd, n, md);
        g_fail = 1;
    }
}

/* Sequences 0 and 1 hold the same tokens; sequence 0 is decoded one token
 * at a time, sequence 1 in batches (with a token of sequence 2 alongside). */
static void check_model(const model_case *mc) {
    const int failed_before = g_fail;
    g_fail = 0;
    ob_model *m = NULL;
    if (ob_model_load(mc->path, NULL, &m) < 0) {
        fprintf(stderr, "  FAIL %s: load: %s\n", mc->label, ob_last_error());
        g_fail = 1;
        return;
    }
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = N_CTX, cp.n_seq_max = 3, cp.n_batch = N_CTX, cp.n_threads = 2, cp.kv_type = mc->kv;
    cp.kv_block_size = mc->block;
    ob_context *c = NULL;
    if (ob_context_create(m, &cp, &c) < 0) {
        fprintf(stderr, "  FAIL %s: context: %s\n", mc->label, ob_last_error());
        g_fail = 1;
        ob_model_free(m);
        return;
    }
    const int nv = ob_model_n_vocab(m);
    enum { N_TOK = N_CTX };
    ob_token *toks = malloc(sizeof(ob_token) * N_TOK), *other = malloc(sizeof(ob_token) * N_TOK);
    uint64_t rng = 7;
    for (int i = 0; i < N_TOK; i++) {
        toks[i] = (ob_token)(3 + test_rand_u64(&rng) % (uint64_t)(nv - 3));
        other[i] = (ob_token)(3 + test_rand_u64(&rng) % (uint64_t)(nv - 3));
    }
    float *one = malloc(sizeof(float) * (size_t)nv * 9), *bat = malloc(sizeof(float) * (size_t)nv * 9);
    int32_t len = 0, len2 = 0; /* sequences 0 and 1; sequence 2 */
    char what[96];
    for (int phase = 0; phase < 2 && !g_fail; phase++) {
        /* prefill up to the phase's position: sequence 0 in one call,
         * sequence 1 in chunks; the last logits must agree */
        const int32_t target = phase == 0 ? SHORT_POS : LONG_POS;
        const int n = target - len;
        if (decode_run(c, 0, toks + len, len, n, false) < 0) break;
        memcpy(one, ob_get_logits(c, n - 1), sizeof(float) * (size_t)nv);
        int cn = 0;
        for (int32_t p = len; p < target; p += cn) {
            cn = target - p < CHUNK ? target - p : CHUNK;
            if (decode_run(c, 1, toks + p, p, cn, false) < 0) goto done;
        }
        snprintf(what, sizeof what, "prefill to %d, one call vs chunks of %d", target, CHUNK);
        compare(what, mc, one, ob_get_logits(c, cn - 1), nv);
        len = target;
        if (decode_run(c, 2, other + len2, len2, 4, false) < 0) break;
        len2 += 4;
        static const int sizes[3] = {2, 5, 9};
        for (int si = 0; si < 3; si++) {
            const int B = sizes[si];
            for (int i = 0; i < B; i++) {
                if (decode_run(c, 0, toks + len + i, len + i, 1, true) < 0) goto done;
                memcpy(one + (size_t)i * nv, ob_get_logits(c, 0), sizeof(float) * (size_t)nv);
            }
            /* sequence 1's B tokens plus one token of sequence 2 */
            ob_token bt[10];
            int32_t pos[10], sid[10];
            int8_t lg[10];
            for (int i = 0; i < B; i++) bt[i] = toks[len + i], pos[i] = len + i, sid[i] = 1, lg[i] = 1;
            bt[B] = other[len2], pos[B] = len2, sid[B] = 2, lg[B] = 1;
            ob_batch b = {B + 1, bt, pos, sid, lg};
            if (ob_decode(c, &b) < 0) {
                CHECK_MSG(0, "decode: %s", ob_last_error());
                goto done;
            }
            for (int i = 0; i < B; i++) memcpy(bat + (size_t)i * nv, ob_get_logits(c, i), sizeof(float) * (size_t)nv);
            snprintf(what, sizeof what, "%d tokens from position %d, one at a time vs one batch", B, len);
            compare(what, mc, one, bat, nv * B);
            len += B;
            len2 += 1;
        }
    }
done:
    free(toks), free(other), free(one), free(bat);
    ob_context_free(c);
    ob_model_free(m);
    g_fail |= failed_before;
}

/* Convert a fixture folder to a GGUF of `type` in /tmp; 0 or -1. */
static int convert_fixture(const char *name, ob_type type, char *out, size_t size) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tests/data/models/%s", OB_SOURCE_DIR, name);
    snprintf(out, size, "/tmp/ob_binv_%d_%s_%s.gguf", (int)getpid(), name, ob_type_name(type));
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = type;
    if (ob_convert_hf(dir, out, &o) < 0) {
        CHECK_MSG(0, "convert %s: %s", name, ob_last_error());
        return -1;
    }
    return 0;
}

TEST(models_single_vs_batched_every_tier) {
    enum { MAXC = 16 };
    static char paths[5][600];
    model_case cases[MAXC];
    int nc = 0;
    const ob_kv_type kvs[2] = {OB_KV_F16, OB_KV_Q8_0};
    const char *kvn[2] = {"f16 kv", "q8_0 kv"};
    static char labels[MAXC][96];
#define ADD(path_, name_, kvi_, block_)                                                                           \
    do {                                                                                                           \
        snprintf(labels[nc], sizeof labels[nc], "%s, %s, pages of %d", name_, kvn[kvi_], block_);                  \
        cases[nc] = (model_case){labels[nc], path_, kvs[kvi_], block_};                                            \
        nc++;                                                                                                      \
    } while (0)
    /* the fixtures: qwen3 in F32, F16 and Q4_0 (quantized from the F32), and
     * mistral_swa (a sliding window: the batch's tokens have different
     * windows) */
    if (convert_fixture("qwen3", OB_TYPE_F32, paths[0], sizeof paths[0]) < 0) return;
    if (convert_fixture("qwen3", OB_TYPE_F16, paths[1], sizeof paths[1]) < 0) return;
    if (convert_fixture("mistral_swa", OB_TYPE_F32, paths[2], sizeof paths[2]) < 0) return;
    snprintf(paths[3], sizeof paths[3], "/tmp/ob_binv_%d_qwen3_q4_0.gguf", (int)getpid());
    ob_quantize_params qp;
    ob_quantize_params_init(&qp);
    qp.n_threads = 1;
    qp.pure = true;
    if (ob_quantize_file(paths[0], paths[3], ob_ftype_find("Q4_0"), &qp, NULL) < 0) {
        CHECK_MSG(0, "quantize: %s", ob_last_error());
        return;
    }
    for (int kvi = 0; kvi < 2; kvi++) {
        ADD(paths[0], "qwen3 f32", kvi, 32);
        ADD(paths[1], "qwen3 f16", kvi, 48);
        ADD(paths[3], "qwen3 q4_0", kvi, 32);
        ADD(paths[2], "mistral_swa f32", kvi, 48);
    }
    const char *models = test_models_dir();
    if (models) {
        snprintf(paths[4], sizeof paths[4], "%s", test_path(models, "stories260K/stories260K.gguf"));
        for (int kvi = 0; kvi < 2; kvi++) ADD(paths[4], "stories260K", kvi, 32);
    }
#undef ADD
    for (int tier = OB_CPU_SCALAR; tier <= OB_CPU_AVX512; tier++) {
        if (!ob_cpu_kernels_for((ob_cpu_tier)tier)) continue;
        fflush(stdout), fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("OB_CPU", ob_cpu_tier_name((ob_cpu_tier)tier), 1);
            if (ob_cpu_kernels_get()->tier != (ob_cpu_tier)tier) {
                fprintf(stderr, "  FAIL the engine did not take OB_CPU=%s\n", ob_cpu_tier_name((ob_cpu_tier)tier));
                g_fail = 1;
            }
            for (int i = 0; i < nc; i++) check_model(&cases[i]);
            fflush(stderr);
            _exit(g_fail || g_test_failed ? 1 : 0);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tier %s: single and batched logits differ (see above)",
                  ob_cpu_tier_name((ob_cpu_tier)tier));
    }
    for (int i = 0; i < 4; i++) unlink(paths[i]);
    if (!models) test_skip("../shared/models absent: stories260K not checked (the fixtures were)");
}

int main(int argc, char **argv) { return test_main(argc, argv); }
