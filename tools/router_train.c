/*
 * router_train.c - trains the request router's linear model (docs/router.md).
 *
 *   router_train data/router/train.jsonl -o src/router/router_model.c \
 *                [--model data/router/model.txt] [--buckets 16384] [--folds 5] [--errors]
 *
 * Reads labelled requests (one JSON object a line: {"label": "code", "messages":
 * [...]} or {"label": ..., "text": "..."}), extracts features with the router's
 * own ob_router_features (so training and inference share one definition),
 * and fits a multinomial logistic regression over code/prose/short with
 * AdaGrad SGD, class-balanced, L2-regularised. `long` is the size gate's, so
 * requests at or past the gate are only checked for their label.
 *
 * Tuning uses k-fold cross-validation of the training file only: each L2
 * strength is scored by out-of-fold accuracy (ties by log loss); the
 * temperature is the one that minimises the out-of-fold log loss of the
 * chosen setting. The final model is trained on the whole file and written
 * as C arrays (and optionally as a text model for `1bit route --model`).
 * Everything is deterministic: fixed seeds, no threads.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/status.h"
#include "onebit.h"
#include "router/router.h"

#define NC OB_ROUTE_N_MODEL
#define EPOCHS 24

typedef struct example {
    int label;
    size_t line; /* in the training file, for --errors */
    size_t off, n; /* into the feature pool */
} example;

static ob_route_feat *g_pool;
static size_t g_pool_n, g_pool_cap;
static example *g_ex;
static size_t g_n_ex;

static void die(const char *what) {
    fprintf(stderr, "router_train: %s%s%s\n", what, ob_last_error()[0] ? ": " : "", ob_last_error());
    exit(1);
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void shuffle(size_t *a, size_t n, uint64_t *seed) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rng_next(seed) % i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static void load(const char *path, uint32_t buckets) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0, n_long = 0, n_bad = 0;
    ssize_t len;
    static ob_route_feat feats[OB_ROUTE_MAX_FEATS];
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (len <= 1) continue;
        ob_route_msg msgs[64];
        size_t nm, nf, uc;
        void *root;
        if (ob_router_parse_json(line, (size_t)len, &root, msgs, 64, &nm) < 0) {
            fprintf(stderr, "%s:%zu: %s\n", path, lineno, ob_last_error());
            exit(1);
        }
        const char *lab = json_string_value(json_object_get((json_t *)root, "label"));
        int label = lab ? ob_route_class_parse(lab) : -1;
        if (label < 0) {
            fprintf(stderr, "%s:%zu: missing or unknown \"label\"\n", path, lineno);
            exit(1);
        }
        if (ob_router_features(msgs, nm, buckets, feats, OB_ROUTE_MAX_FEATS, &nf, &uc) < 0)
            die("features");
        int gate = uc >= OB_ROUTE_LONG_CHARS;
        if (gate != (label == OB_ROUTE_LONG)) {
            fprintf(stderr, "%s:%zu: labelled %s but has %zu user characters (gate %d)\n", path,
                    lineno, lab, uc, OB_ROUTE_LONG_CHARS);
            n_bad++;
        }
        json_decref((json_t *)root);
        if (gate) {
            n_long++;
            continue;
        }
        if (label == OB_ROUTE_LONG) continue;
        if (g_pool_n + nf > g_pool_cap) {
            g_pool_cap = (g_pool_cap + nf) * 2;
            g_pool = realloc(g_pool, g_pool_cap * sizeof *g_pool);
            if (!g_pool) die("out of memory");
        }
        memcpy(g_pool + g_pool_n, feats, nf * sizeof *feats);
        g_ex = realloc(g_ex, (g_n_ex + 1) * sizeof *g_ex);
        if (!g_ex) die("out of memory");
        g_ex[g_n_ex++] = (example){label, lineno, g_pool_n, nf};
        g_pool_n += nf;
    }
    free(line);
    fclose(f);
    if (n_bad) {
        fprintf(stderr, "router_train: %zu labels disagree with the size gate\n", n_bad);
        exit(1);
    }
    size_t cnt[NC] = {0};
    for (size_t i = 0; i < g_n_ex; i++) cnt[g_ex[i].label]++;
    printf("train: %zu model examples (code %zu, prose %zu, short %zu) + %zu long by the gate\n",
           g_n_ex, cnt[0], cnt[1], cnt[2], n_long);
}

typedef struct model {
    uint32_t buckets;
    float *w; /* [buckets][NC] */
    float b[NC];
} model;

static void logits(const model *m, const example *e, double *z) {
    for (int c = 0; c < NC; c++) z[c] = m->b[c];
    const ob_route_feat *f = g_pool + e->off;
    for (size_t i = 0; i < e->n; i++) {
        const float *w = m->w + (size_t)f[i].idx * NC;
        for (int c = 0; c < NC; c++) z[c] += f[i].val * w[c];
    }
}

static void softmax(const double *z, double t, double *p) {
    double mx = -HUGE_VAL, s = 0;
    for (int c = 0; c < NC; c++) mx = fmax(mx, z[c] / t);
    for (int c = 0; c < NC; c++) s += (p[c] = exp(z[c] / t - mx));
    for (int c = 0; c < NC; c++) p[c] /= s;
}

/* AdaGrad SGD on examples idx[0..n): class-balanced cross-entropy + l2 on touched rows. */
static void train(model *m, const size_t *idx_in, size_t n, double l2, uint64_t seed) {
    memset(m->w, 0, (size_t)m->buckets * NC * sizeof(float));
    memset(m->b, 0, sizeof m->b);
    float *g2 = calloc((size_t)m->buckets * NC, sizeof(float));
    double gb2[NC] = {0};
    size_t *idx = malloc(n * sizeof *idx);
    if (!g2 || !idx) die("out of memory");
    memcpy(idx, idx_in, n * sizeof *idx);
    size_t cnt[NC] = {0};
    for (size_t i = 0; i < n; i++) cnt[g_ex[idx[i]].label]++;
    double cw[NC];
    for (int c = 0; c < NC; c++) cw[c] = cnt[c] ? (double)n / (NC * (double)cnt[c]) : 0;
    const double lr = 0.5;
    for (int ep = 0; ep < EPOCHS; ep++) {
        shuffle(idx, n, &seed);
        for (size_t k = 0; k < n; k++) {
            const example *e = &g_ex[idx[k]];
            double z[NC], p[NC], g[NC];
            logits(m, e, z);
            softmax(z, 1.0, p);
            for (int c = 0; c < NC; c++) g[c] = cw[e->label] * (p[c] - (c == e->label));
            for (int c = 0; c < NC; c++) {
                gb2[c] += g[c] * g[c];
                m->b[c] -= (float)(lr * g[c] / (sqrt(gb2[c]) + 1e-8));
            }
            const ob_route_feat *f = g_pool + e->off;
            for (size_t i = 0; i < e->n; i++) {
                float *w = m->w + (size_t)f[i].idx * NC, *h = g2 + (size_t)f[i].idx * NC;
                for (int c = 0; c < NC; c++) {
                    double gr = g[c] * f[i].val + l2 * w[c];
                    h[c] += (float)(gr * gr);
                    w[c] -= (float)(lr * gr / (sqrt(h[c]) + 1e-8));
                }
            }
        }
    }
    free(g2);
    free(idx);
}

typedef struct cv_result {
    double l2, acc, nll;
    double *oof; /* [n_ex][NC] out-of-fold logits */
} cv_result;

static void cross_validate(uint32_t buckets, int folds, double l2, cv_result *r) {
    size_t *order = malloc(g_n_ex * sizeof *order), *tr = malloc(g_n_ex * sizeof *tr);
    r->oof = malloc(g_n_ex * NC * sizeof(double));
    model m = {buckets, malloc((size_t)buckets * NC * sizeof(float)), {0}};
    if (!order || !tr || !r->oof || !m.w) die("out of memory");
    for (size_t i = 0; i < g_n_ex; i++) order[i] = i;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    shuffle(order, g_n_ex, &seed);
    for (int k = 0; k < folds; k++) {
        size_t nt = 0;
        for (size_t i = 0; i < g_n_ex; i++)
            if ((int)(i % (size_t)folds) != k) tr[nt++] = order[i];
        train(&m, tr, nt, l2, 1234 + (uint64_t)k);
        for (size_t i = 0; i < g_n_ex; i++)
            if ((int)(i % (size_t)folds) == k) logits(&m, &g_ex[order[i]], r->oof + order[i] * NC);
    }
    size_t ok = 0;
    double nll = 0;
    for (size_t i = 0; i < g_n_ex; i++) {
        double p[NC];
        softmax(r->oof + i * NC, 1.0, p);
        int best = 0;
        for (int c = 1; c < NC; c++)
            if (p[c] > p[best]) best = c;
        ok += best == g_ex[i].label;
        nll -= log(fmax(p[g_ex[i].label], 1e-12));
    }
    r->l2 = l2;
    r->acc = (double)ok / (double)g_n_ex;
    r->nll = nll / (double)g_n_ex;
    free(order);
    free(tr);
    free(m.w);
}

/* Expected calibration error over 10 equal-width confidence bins. */
static double ece(const double *z, double t) {
    double conf_sum[10] = {0}, acc_sum[10] = {0};
    size_t cnt[10] = {0};
    for (size_t i = 0; i < g_n_ex; i++) {
        double p[NC];
        softmax(z + i * NC, t, p);
        int best = 0;
        for (int c = 1; c < NC; c++)
            if (p[c] > p[best]) best = c;
        int b = (int)(p[best] * 10);
        if (b > 9) b = 9;
        cnt[b]++;
        conf_sum[b] += p[best];
        acc_sum[b] += best == g_ex[i].label;
    }
    double e = 0;
    for (int b = 0; b < 10; b++) e += fabs(acc_sum[b] - conf_sum[b]);
    return e / (double)g_n_ex;
}

static double nll_at(const double *z, double t) {
    double s = 0;
    for (size_t i = 0; i < g_n_ex; i++) {
        double p[NC];
        softmax(z + i * NC, t, p);
        s -= log(fmax(p[g_ex[i].label], 1e-12));
    }
    return s / (double)g_n_ex;
}

static void write_c(const char *path, const model *m, double t, const char *src, double cv_acc,
                    double l2) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fprintf(f,
            "/*\n * router_model.c - GENERATED by tools/router_train from %s; do not edit.\n"
            " * Regenerate: docs/router.md (\"Training\"). buckets %u, L2 %g, %d epochs,\n"
            " * cross-validated accuracy %.4f, temperature %.4f.\n */\n",
            src, m->buckets, l2, EPOCHS, cv_acc, t);
    fprintf(f, "#include \"router.h\"\n\n");
    fprintf(f, "const uint32_t ob_router_builtin_n_buckets = %u;\n", m->buckets);
    fprintf(f, "const float ob_router_builtin_temperature = %.6gf;\n", t);
    fprintf(f, "const float ob_router_builtin_bias[OB_ROUTE_N_MODEL] = {%.6gf, %.6gf, %.6gf};\n",
            m->b[0], m->b[1], m->b[2]);
    fprintf(f, "const float ob_router_builtin_weights[%u * OB_ROUTE_N_MODEL] = {\n", m->buckets);
    for (size_t i = 0; i < (size_t)m->buckets; i++) {
        const float *w = m->w + i * NC;
        fprintf(f, "%.5g,%.5g,%.5g,%s", w[0], w[1], w[2], (i % 4 == 3) ? "\n" : "");
    }
    fprintf(f, "};\n");
    fclose(f);
}

static void write_text(const char *path, const model *m, double t) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fprintf(f, "onebit-router 1\nbuckets %u\nclasses code prose short\ntemperature %.6g\n", m->buckets, t);
    fprintf(f, "bias %.6g %.6g %.6g\n", m->b[0], m->b[1], m->b[2]);
    for (size_t i = 0; i < (size_t)m->buckets; i++)
        fprintf(f, "%.5g %.5g %.5g\n", m->w[i * NC], m->w[i * NC + 1], m->w[i * NC + 2]);
    fclose(f);
}

int main(int argc, char **argv) {
    const char *in = NULL, *out_c = NULL, *out_txt = NULL;
    uint32_t buckets = 16384;
    int folds = 5, show_errors = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out_c = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) out_txt = argv[++i];
        else if (!strcmp(argv[i], "--buckets") && i + 1 < argc) buckets = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--folds") && i + 1 < argc) folds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--errors")) show_errors = 1;
        else if (argv[i][0] != '-' && !in) in = argv[i];
        else {
            fprintf(stderr, "usage: router_train TRAIN.jsonl [-o router_model.c] [--model model.txt] "
                            "[--buckets N] [--folds K] [--errors]\n");
            return 2;
        }
    }
    if (!in || buckets == 0 || (buckets & (buckets - 1)) || folds < 2) {
        fprintf(stderr, "router_train: need TRAIN.jsonl, --buckets a power of two, --folds >= 2\n");
        return 2;
    }
    load(in, buckets);
    static const double l2s[] = {1e-6, 1e-5, 1e-4, 1e-3};
    cv_result best = {0};
    for (size_t i = 0; i < sizeof l2s / sizeof l2s[0]; i++) {
        cv_result r;
        cross_validate(buckets, folds, l2s[i], &r);
        printf("cv: l2 %-6g accuracy %.4f log loss %.4f\n", r.l2, r.acc, r.nll);
        if (!best.oof || r.acc > best.acc + 1e-9 || (fabs(r.acc - best.acc) < 1e-9 && r.nll < best.nll)) {
            free(best.oof);
            best = r;
        } else {
            free(r.oof);
        }
    }
    /* per-class out-of-fold accuracy and the confusion of the chosen setting */
    size_t conf[NC][NC] = {{0}};
    for (size_t i = 0; i < g_n_ex; i++) {
        const double *z = best.oof + i * NC;
        int b = 0;
        for (int c = 1; c < NC; c++)
            if (z[c] > z[b]) b = c;
        conf[g_ex[i].label][b]++;
    }
    if (show_errors)
        for (size_t i = 0; i < g_n_ex; i++) {
            const double *z = best.oof + i * NC;
            int b = 0;
            for (int c = 1; c < NC; c++)
                if (z[c] > z[b]) b = c;
            if (b != g_ex[i].label)
                printf("error: line %zu: %s taken for %s\n", g_ex[i].line,
                       ob_route_class_name((ob_route_class)g_ex[i].label), ob_route_class_name((ob_route_class)b));
        }
    printf("chosen l2 %g: out-of-fold confusion (rows true code/prose/short)\n", best.l2);
    for (int a = 0; a < NC; a++)
        printf("  %-6s %5zu %5zu %5zu\n", ob_route_class_name((ob_route_class)a), conf[a][0],
               conf[a][1], conf[a][2]);
    double t_best = 1, nll_best = HUGE_VAL;
    for (double t = 0.1; t <= 8.0 + 1e-9; t += 0.01) {
        double v = nll_at(best.oof, t);
        if (v < nll_best) {
            nll_best = v;
            t_best = t;
        }
    }
    printf("temperature %.2f: out-of-fold log loss %.4f -> %.4f, ECE %.4f -> %.4f\n", t_best,
           nll_at(best.oof, 1.0), nll_best, ece(best.oof, 1.0), ece(best.oof, t_best));
    model m = {buckets, malloc((size_t)buckets * NC * sizeof(float)), {0}};
    size_t *all = malloc(g_n_ex * sizeof *all);
    if (!m.w || !all) die("out of memory");
    for (size_t i = 0; i < g_n_ex; i++) all[i] = i;
    train(&m, all, g_n_ex, best.l2, 42);
    if (out_c) write_c(out_c, &m, t_best, in, best.acc, best.l2);
    if (out_txt) write_text(out_txt, &m, t_best);
    free(all);
    free(m.w);
    free(best.oof);
    free(g_pool);
    free(g_ex);
    return 0;
}
