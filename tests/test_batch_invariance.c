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
