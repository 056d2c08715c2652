/*
 * cuda_bench.c - random-weight models of real shapes, and their decode
 * (tg) and prompt (pp) speed through the engine, as llama-bench measures
 * them: tg = N single-token decode steps from an empty sequence (logits of
 * each step copied back to the host, as every real step does), pp = one
 * batch of N prompt tokens. Each figure is the median of --reps runs after
 * a warm-up.
 *
 *   cuda_bench gen SHAPE TYPE OUT.gguf      SHAPE: tiny | llama1b | llama8b
 *   cuda_bench bench MODEL.gguf [--device cuda] [--tg 128] [--pp 512] [--reps 3] [--bw BYTES_PER_S]
 *   cuda_bench probe                        the cost of one small op on the CUDA backend
 *
 * llama1b is Llama-3.2-1B (2048 embd, 8192 ffn, 16 layers, 32 heads, 8 KV
 * heads, 128256 tokens, tied embeddings); llama8b the 8B shape of issue 7's
 * llama.cpp baseline (4096/14336/32 layers/32 heads/8 KV heads) with a
 * 32,000-token vocabulary. TYPE applies to every matrix (token_embd too;
 * Q4_K files get a Q6_K output matrix as llama.cpp's Q4_K_M does).
 *
 * With --bw (measured device copy bandwidth, bytes/s counting read +
 * write) bench prints decode as a fraction of the bandwidth floor: the
 * bytes one token must read (every weight except the embedding table, which
 * is read one row at a time, unless it doubles as the output matrix) over
 * that bandwidth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tools/cuda_mkmodel.h"
#include "backend/backend.h"
#include "gguf/gguf.h"
#include "onebit.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int gen(const char *shape, const char *type_name, const char *out) {
    int t = ob_type_from_name(type_name);
    if (t < 0) {
        fprintf(stderr, "cuda_bench: unknown type '%s'\n", type_name);
        return 1;
    }
    mk_spec s;
    memset(&s, 0, sizeof s);
    s.wtype = s.embd_type = s.out_type = (ob_type)t;
    if (t == OB_TYPE_Q4_K) s.out_type = OB_TYPE_Q6_K;
    s.rope_base = 500000.0f;
    s.n_ctx = 8192;
    s.seed = 42;
    if (!strcmp(shape, "tiny")) {
        s.name = "tiny random llama";
        s.n_vocab = 512, s.n_embd = 256, s.n_ff = 512, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2;
    } else if (!strcmp(shape, "llama1b")) {
        s.name = "random Llama-3.2-1B shape";
        s.n_vocab = 128256, s.n_embd = 2048, s.n_ff = 8192, s.n_layer = 16, s.n_head = 32, s.n_head_kv = 8;
        s.tied = true;
    } else if (!strcmp(shape, "llama8b")) {
        s.name = "random Llama 8B shape";
        s.n_vocab = 32000, s.n_embd = 4096, s.n_ff = 14336, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 8;
    } else {
        fprintf(stderr, "cuda_bench: unknown shape '%s' (tiny, llama1b, llama8b)\n", shape);
        return 1;
    }
    double t0 = now_s();
    if (mk_model_write(&s, out) < 0) {
        fprintf(stderr, "cuda_bench: %s\n", ob_last_error());
        return 1;
    }
    fprintf(stderr, "cuda_bench: wrote %s (%s, %s) in %.1f s\n", out, s.name, type_name, now_s() - t0);
    return 0;
}

/* Bytes a decode step reads from the weights (see the file comment). */
static double bytes_per_token(const char *path) {
    ob_gguf *g = NULL;
    if (ob_gguf_open(path, &g) < 0) return 0;
    double sum = 0;
    bool tied = ob_gguf_find_tensor(g, "output.weight") == NULL;
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        if (!strcmp(t->name, "token_embd.weight") && !tied) continue;
        sum += (double)t->nbytes;
    }
    ob_gguf_free(g);
    return sum;
}

static int bench(int argc, char **argv) {
    const char *path = argv[0], *device = "cuda";
    int tg = 128, pp = 512, reps = 3;
    double bw = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--tg")) tg = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pp")) pp = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bw")) bw = atof(argv[i + 1]);
        else {
            fprintf(stderr, "cuda_bench: unknown option '%s'\n", argv[i]);
            return 1;
        }
    }
    if (reps < 1 || reps > 64) reps = 3;
    ob_model_params mp = ob_model_default_params();
    mp.device = device;
    ob_model *m = NULL;
    double t0 = now_s();
    if (ob_model_load(path, &mp, &m) < 0) {
        fprintf(stderr, "cuda_bench: %s\n", ob_last_error());
        return 1;
    }
    double t_load = now_s() - t0;
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = (tg > pp ? tg : pp) + 64;
    cp.n_batch = pp > 0 ? pp : 8;
    ob_context *ctx = NULL;
    if (ob_context_create(m, &cp, &ctx) < 0) {
        fprintf(stderr, "cuda_bench: %s\n", ob_last_error());
        ob_model_free(m);
        return 1;
    }
    const int32_t V = ob_model_n_vocab(m);
    double tg_runs[64], pp_runs[64];
    int rc = 0;
    /* decode: warm-up, then reps of tg single-token steps from an empty sequence */
    for (int r = -1; rc == 0 && r < reps && tg > 0; r++) {
        ob_seq_remove(ctx, 0, 0);
        int steps = r < 0 ? 8 : tg;
        double s0 = now_s();
        for (int i = 0; i < steps && rc == 0; i++) {
            ob_token tok = (ob_token)((i * 7919 + 13) % V);
            int32_t pos = i, seq = 0;
            int8_t want = 1;
            ob_batch b = {1, &tok, &pos, &seq, &want};
            rc = ob_decode(ctx, &b);
        }
        if (r >= 0) tg_runs[r] = steps / (now_s() - s0);
    }
    /* prompt: reps of one batch of pp tokens */
    int32_t *toks = pp > 0 ? malloc((size_t)pp * sizeof(int32_t) * 3) : NULL;
    for (int r = -1; rc == 0 && r < reps && pp > 0 && toks; r++) {
        int32_t *pos = toks + pp, *seq = toks + 2 * pp;
        for (int i = 0; i < pp; i++) toks[i] = (i * 104729 + 7) % V, pos[i] = i, seq[i] = 0;
        ob_seq_remove(ctx, 0, 0);
        ob_batch b = {pp, toks, pos, seq, NULL};
        double s0 = now_s();
        rc = ob_decode(ctx, &b);
        if (r >= 0) pp_runs[r] = pp / (now_s() - s0);
    }
    free(toks);
    if (rc < 0) fprintf(stderr, "cuda_bench: decode: %s\n", ob_last_error());
    if (rc == 0) {
        char desc[128];
        ob_model_desc(m, desc, sizeof desc);
        double bpt = bytes_per_token(path);
        printf("%s | %s | %.2f GB file, %.3f GB read per token | load %.1f s\n", path, desc,
               (double)ob_model_size_bytes(m) / 1e9, bpt / 1e9, t_load);
        if (tg > 0) {
            qsort(tg_runs, (size_t)reps, sizeof(double), cmp_d);
            printf("  tg%d: %.1f tok/s median (min %.1f, max %.1f, %d runs)", tg, tg_runs[reps / 2], tg_runs[0],
                   tg_runs[reps - 1], reps);
            if (bw > 0 && bpt > 0) {
                double floor_tps = bw / bpt;
                printf("; bandwidth floor %.0f tok/s at %.2f TB/s: %.1f%% of it", floor_tps, bw / 1e12,
                       100.0 * tg_runs[reps / 2] / floor_tps);
            }
            printf("\n");
        }
        if (pp > 0) {
            qsort(pp_runs, (size_t)reps, sizeof(double), cmp_d);
            printf("  pp%d: %.1f tok/s median (min %.1f, max %.1f)\n", pp, pp_runs[reps / 2], pp_runs[0],
                   pp_runs[reps - 1]);
        }
    }
    ob_context_free(ctx);
    ob_model_free(m);
    return rc < 0;
}

/* What one small op costs: the host's time to enqueue it (a few hundred
 * ops, well inside the launch queue, no waiting), the GPU's pace on a long
 * stream of them, and an op followed by a wait. Decode issues ~15 ops per
 * layer, so these bound the step time from below when kernels are short. */
static int probe(void) {
    ob_backend *b = NULL;
    if (ob_backend_cuda_create(0, &b) < 0) {
        fprintf(stderr, "cuda_bench: %s\n", ob_last_error());
        return 1;
    }
    float *buf = NULL, host[4096] = {0};
    int rc = b->ops->alloc(b, sizeof host, (void **)&buf);
    ob_tensor t;
    ob_tensor_f32_2d(&t, 4096, 1, buf);
    for (int i = 0; rc == 0 && i < 200; i++) rc = b->ops->scale(b, &t, 1.0f, &t);
    if (rc == 0) rc = b->ops->download(b, host, buf, sizeof host);
    double s0 = now_s();
    for (int i = 0; rc == 0 && i < 300; i++) rc = b->ops->scale(b, &t, 1.0f, &t);
    double enq = (now_s() - s0) / 300;
    if (rc == 0) rc = b->ops->download(b, host, buf, sizeof host);
    s0 = now_s();
    for (int i = 0; rc == 0 && i < 20000; i++) rc = b->ops->scale(b, &t, 1.0f, &t);
    if (rc == 0) rc = b->ops->download(b, host, buf, sizeof host);
    double stream = (now_s() - s0) / 20000;
    s0 = now_s();
    for (int i = 0; rc == 0 && i < 1000; i++) {
        rc = b->ops->scale(b, &t, 1.0f, &t);
        if (rc == 0) rc = b->ops->sync(b);
    }
    double rt = (now_s() - s0) / 1000;
    if (rc < 0) fprintf(stderr, "cuda_bench: %s\n", ob_last_error());
    else
        printf("op probe (scale of 4096 floats): host enqueue %.2f us/op, stream of 20000 ops %.2f us/op, "
               "op + wait %.2f us\n", enq * 1e6, stream * 1e6, rt * 1e6);
    if (buf) b->ops->release(b, buf);
    ob_backend_free(b);
    return rc < 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && !strcmp(argv[1], "gen")) return gen(argv[2], argv[3], argv[4]);
    if (argc >= 3 && !strcmp(argv[1], "bench")) return bench(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "probe")) return probe();
    fprintf(stderr, "usage: cuda_bench gen tiny|llama1b|llama8b TYPE OUT.gguf\n"
                    "       cuda_bench bench MODEL.gguf [--device cuda] [--tg 128] [--pp 512] [--reps 3] [--bw B/s]\n"
                    "       cuda_bench probe\n");
    return 2;
}
