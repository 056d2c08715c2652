/*
 * test_router.c - the request router's classifier (src/router, docs/router.md).
 *
 * The shipped model on the held-out evaluation set (data/router/eval.jsonl,
 * never used in training): overall accuracy, every class's accuracy and the
 * mean time per decision must meet issue 12's bars. Around it: the size
 * gate at exactly 1,024 code points, the streaming scorer against the
 * feature list the trainer sees, the JSON forms, text model files (good and
 * malformed), allocation failure, and `1bit route` itself.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/mem.h"
#include "core/status.h"
#include "onebit.h"
#include "router/router.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

/* issue 12: at least 96% overall, no class under 90%, under 1 ms a decision */
#define MIN_ACCURACY 0.96
#define MIN_CLASS_ACCURACY 0.90
#define MAX_MEAN_US 1000.0

static ob_router *builtin(void) {
    ob_router *r = NULL;
    CHECK_OK(ob_router_init(&r, NULL));
    return r;
}

static ob_route_result classify_text(const ob_router *r, const char *text) {
    ob_route_msg m = {"user", text, strlen(text)};
    ob_route_result res;
    memset(&res, 0xff, sizeof res);
    CHECK_OK(ob_router_classify(r, &m, 1, &res));
    return res;
}

TEST(class_names) {
    for (int c = 0; c < OB_ROUTE_N; c++)
        CHECK_EQ_INT(ob_route_class_parse(ob_route_class_name((ob_route_class)c)), c);
    CHECK_EQ_INT(ob_route_class_parse("poetry"), OB_ERR_NOT_FOUND);
    CHECK_EQ_STR(ob_route_class_name((ob_route_class)9), "?");
}

/* The gate counts code points of user content, across user messages only. */
TEST(size_gate) {
    ob_router *r = builtin();
    if (!r) return;
    static char buf[4 * OB_ROUTE_LONG_CHARS + 16];
    for (int k = 0; k < 2; k++) {
        /* k = 0: ASCII; k = 1: 'é' (two bytes, one code point) */
        for (size_t n = OB_ROUTE_LONG_CHARS - 1; n <= OB_ROUTE_LONG_CHARS; n++) {
            size_t len = 0;
            for (size_t i = 0; i < n; i++) {
                if (k == 0) {
                    buf[len++] = "abc de"[i % 6];
                } else {
                    buf[len++] = (char)0xC3;
                    buf[len++] = (char)0xA9;
                }
            }
            buf[len] = 0;
            ob_route_result res = classify_text(r, buf);
            CHECK_EQ_INT(res.user_chars, n);
            CHECK_EQ_INT(res.cls == OB_ROUTE_LONG, n >= OB_ROUTE_LONG_CHARS);
            if (n >= OB_ROUTE_LONG_CHARS) CHECK(res.confidence == 1.0f);
        }
    }
    /* two user turns add up; a long system prompt or assistant reply does not count */
    memset(buf, 'x', 600);
    buf[600] = 0;
    ob_route_msg turns[4] = {{"system", buf, 600}, {"user", buf, 600}, {"assistant", buf, 600},
                             {"user", buf, 424}};
    ob_route_result res;
    CHECK_OK(ob_router_classify(r, turns, 4, &res));
    CHECK_EQ_INT(res.user_chars, 1024);
    CHECK_EQ_INT(res.cls, OB_ROUTE_LONG);
    turns[3].len = 423;
    CHECK_OK(ob_router_classify(r, turns, 4, &res));
    CHECK_EQ_INT(res.user_chars, 1023);
    CHECK(res.cls != OB_ROUTE_LONG);
    ob_router_free(r);
}

/* The scorer that classification uses never builds the feature list; the
 * trainer sees only the list. Both must give the same probabilities. */
TEST(scorer_matches_features) {
    ob_router *r = builtin();
    if (!r) return;
    const uint32_t nb = ob_router_n_buckets(r);
    const float t = ob_router_temperature(r);
    CHECK(nb > 1 && (nb & (nb - 1)) == 0);
    CHECK(t > 0);
    static const char *texts[] = {
        "Write a Python function that merges two dicts.", "hello", "Tell me a story about a whale",
        "¿Cuánto es 3 más 4?", "日本の首都はどこですか？", "```\nint main(void) { return 0; }\n```\nwhy?",
        "", "    indented\n\tlines;\n{\n}\n"};
    static ob_route_feat feats[OB_ROUTE_MAX_FEATS];
    for (size_t i = 0; i < OB_ARRAY_LEN(texts); i++) {
        ob_route_msg m[2] = {{"system", "be brief", 8}, {"user", texts[i], strlen(texts[i])}};
        size_t n, uc;
        CHECK_OK(ob_router_features(m, 2, nb, feats, OB_ROUTE_MAX_FEATS, &n, &uc));
        CHECK(n > 0 && n < OB_ROUTE_MAX_FEATS);
        double z[OB_ROUTE_N_MODEL], mx = -HUGE_VAL, sum = 0;
        for (int c = 0; c < OB_ROUTE_N_MODEL; c++) {
            z[c] = ob_router_builtin_bias[c];
            for (size_t k = 0; k < n; k++) {
                CHECK(feats[k].idx < nb);
                z[c] += feats[k].val * ob_router_builtin_weights[(size_t)feats[k].idx * OB_ROUTE_N_MODEL + c];
            }
            z[c] /= t;
            mx = fmax(mx, z[c]);
        }
        for (int c = 0; c < OB_ROUTE_N_MODEL; c++) sum += exp(z[c] - mx);
        ob_route_result res;
        CHECK_OK(ob_router_classify(r, m, 2, &res));
        for (int c = 0; c < OB_ROUTE_N_MODEL; c++)
            CHECK_NEAR(res.prob[c], exp(z[c] - mx) / sum, 1e-5);
        CHECK_EQ_INT(uc, res.user_chars);
        CHECK_NEAR(res.prob[0] + res.prob[1] + res.prob[2], 1.0, 1e-5);
        CHECK(res.confidence == res.prob[res.cls]);
    }
    size_t n, uc;
    CHECK_EQ_INT(ob_router_features(NULL, 0, 1000, feats, 8, &n, &uc), OB_ERR_INVALID_ARG);
    ob_router_free(r);
}

TEST(json_forms) {
    ob_router *r = builtin();
    if (!r) return;
    const char *code = "Write a C function that reverses a linked list in place.";
    ob_route_result a = classify_text(r, code), b;
    char js[512];
    snprintf(js, sizeof js, "{\"messages\": [{\"role\": \"user\", \"content\": \"%s\"}]}", code);
    CHECK_OK(ob_router_classify_json(r, js, strlen(js), &b));
    CHECK_EQ_INT(b.cls, a.cls);
    CHECK(b.confidence == a.confidence);
    snprintf(js, sizeof js, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"%s\"}]}]}", code);
    CHECK_OK(ob_router_classify_json(r, js, strlen(js), &b));
    CHECK(b.confidence == a.confidence);
    snprintf(js, sizeof js, "{\"text\": \"%s\"}", code);
    CHECK_OK(ob_router_classify_json(r, js, strlen(js), &b));
    CHECK(b.confidence == a.confidence);
    CHECK_EQ_INT(ob_router_classify_json(r, "{\"messages\": [", 14, &b), OB_ERR_FORMAT);
    CHECK_EQ_INT(ob_router_classify_json(r, "{\"model\": \"x\"}", 14, &b), OB_ERR_FORMAT);
    CHECK_EQ_INT(ob_router_classify_json(r, "[1, 2]", 6, &b), OB_ERR_FORMAT);
    const char *bad = "{\"messages\": [{\"content\": \"no role\"}]}";
    CHECK_EQ_INT(ob_router_classify_json(r, bad, strlen(bad), &b), OB_ERR_FORMAT);
    const char *num = "{\"messages\": [{\"role\": \"user\", \"content\": 7}]}";
    CHECK_EQ_INT(ob_router_classify_json(r, num, strlen(num), &b), OB_ERR_FORMAT);
    ob_router_free(r);
}

static const char *write_tmp(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/test_router_%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

/* A text model with the built-in weights behaves exactly like the built-in;
 * malformed files are refused with a reason. */
TEST(text_model) {
    ob_router *r = builtin();
    if (!r) return;
    uint32_t nb = ob_router_n_buckets(r);
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_router_model_%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "onebit-router 1\nbuckets %u\nclasses code prose short\ntemperature %.9g\nbias %.9g %.9g %.9g\n",
            nb, ob_router_builtin_temperature, ob_router_builtin_bias[0], ob_router_builtin_bias[1],
            ob_router_builtin_bias[2]);
    for (size_t i = 0; i < (size_t)nb * OB_ROUTE_N_MODEL; i++)
        fprintf(f, "%.9g\n", ob_router_builtin_weights[i]);
    fclose(f);
    ob_router *t = NULL;
    CHECK_OK(ob_router_init(&t, path));
    if (t) {
        const char *texts[] = {"Write a poem about the sea", "what is 6 times 7", "fix my SQL: SELEC * FROM x"};
        for (size_t i = 0; i < OB_ARRAY_LEN(texts); i++) {
            ob_route_result a = classify_text(r, texts[i]), b = classify_text(t, texts[i]);
            CHECK_EQ_INT(a.cls, b.cls);
            CHECK(a.confidence == b.confidence);
        }
    }
    ob_router_free(t);
    remove(path);

    static const char *bad[] = {
        "not a model\n",
        "onebit-router 1\nbuckets 3\n",
        "onebit-router 1\nbuckets 2\nclasses prose code short\n",
        "onebit-router 1\nbuckets 2\nclasses code prose short\ntemperature -1\n",
        "onebit-router 1\nbuckets 2\nclasses code prose short\ntemperature 1\nbias 0 0 0\n1 2 3\n4 5\n",
        "onebit-router 1\nbuckets 2\nclasses code prose short\ntemperature 1\nbias 0 0 0\n1 2 3\n4 5 nan\n",
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(bad); i++) {
        const char *p = write_tmp(bad[i]);
        ob_router *x = (ob_router *)1;
        CHECK_EQ_INT(ob_router_init(&x, p), OB_ERR_FORMAT);
        CHECK(x == NULL);
        remove(p);
    }
    const char *p = write_tmp("onebit-router 1\nbuckets 2\nclasses code prose short\ntemperature 2\n"
                              "bias 0 0 0\n1 0 0\n1 0 0\n");
    ob_router *x = NULL;
    CHECK_OK(ob_router_init(&x, p));
    if (x) {
        /* every bucket favours code by 1 per unit of feature value: code wins */
        ob_route_result res = classify_text(x, "anything at all");
        CHECK_EQ_INT(res.cls, OB_ROUTE_CODE);
        CHECK(res.confidence > 1.0f / 3 && res.confidence < 1.0f);
    }
    ob_router_free(x);
    remove(p);
    ob_router *y = (ob_router *)1;
    CHECK_EQ_INT(ob_router_init(&y, "/nonexistent/router.txt"), OB_ERR_IO);
    ob_router_free(r);
}

TEST(alloc_failure) {
    ob_router *r = (ob_router *)1;
    ob_mem_fail_after(1);
    CHECK_EQ_INT(ob_router_init(&r, NULL), OB_ERR_OOM);
    ob_mem_fail_after(0);
    CHECK(r == NULL);
}

/* The most work one decision can take: 1,023 code points just under the
 * gate, as ASCII code and as CJK (three bytes each, so the most n-grams). */
TEST(worst_case_time) {
    ob_router *r = builtin();
    if (!r) return;
    static char buf[4 * OB_ROUTE_LONG_CHARS];
    for (int k = 0; k < 2; k++) {
        size_t len = 0;
        for (int i = 0; i < OB_ROUTE_LONG_CHARS - 1; i++) {
            if (k == 0) {
                buf[len++] = "int x = f(a, b); // note\n"[i % 25];
            } else {
                memcpy(buf + len, "\xe4\xbd\xa0", 3); /* U+4F60 */
                len += 3;
            }
        }
        ob_route_msg m = {"user", buf, len};
        ob_route_result res;
        CHECK_OK(ob_router_classify(r, &m, 1, &res));
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        for (int i = 0; i < 200; i++) ob_router_classify(r, &m, 1, &res);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        double us = ((double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3) / 200;
        CHECK_EQ_INT(res.user_chars, OB_ROUTE_LONG_CHARS - 1);
        CHECK_MSG(us < MAX_MEAN_US, "%s: %.1f us", k ? "CJK" : "ASCII", us);
        fprintf(stderr, "  worst case (%s, %zu bytes): %.1f us CPU a decision\n", k ? "CJK" : "ASCII", len, us);
    }
    ob_router_free(r);
}

/* The server's hook: decisions counted per class, failures as unclassified. */
TEST(observe_counts) {
    uint64_t before[OB_ROUTE_N + 1], after[OB_ROUTE_N + 1];
    ob_router_observed(before);
    const char *code = "{\"messages\": [{\"role\": \"user\", \"content\": \"Write a Rust function that sorts a vector.\"}], "
                       "\"add_generation_prompt\": true}";
    const char *hi = "{\"messages\": [{\"role\": \"user\", \"content\": \"thanks, bye!\"}]}";
    CHECK_EQ_INT(ob_router_observe(code, strlen(code)), OB_ROUTE_CODE);
    CHECK_EQ_INT(ob_router_observe(code, strlen(code)), OB_ROUTE_CODE);
    CHECK_EQ_INT(ob_router_observe(hi, strlen(hi)), OB_ROUTE_SHORT);
    CHECK_EQ_INT(ob_router_observe("{oops", 5), OB_ERR_FORMAT);
    ob_router_observed(after);
    CHECK_EQ_INT(after[OB_ROUTE_CODE] - before[OB_ROUTE_CODE], 2);
    CHECK_EQ_INT(after[OB_ROUTE_SHORT] - before[OB_ROUTE_SHORT], 1);
    CHECK_EQ_INT(after[OB_ROUTE_PROSE] - before[OB_ROUTE_PROSE], 0);
    CHECK_EQ_INT(after[OB_ROUTE_N] - before[OB_ROUTE_N], 1);
}

/* The bar: the held-out set, the shipped model. */
TEST(eval_set) {
    ob_router *r = builtin();
    if (!r) return;
    char path[512];
    snprintf(path, sizeof path, "%s/data/router/eval.jsonl", OB_SOURCE_DIR);
    ob_route_eval ev;
    CHECK_OK(ob_router_eval_file(r, path, 5, &ev, stderr));
    ob_router_free(r);
    CHECK(ev.n >= 300);
    CHECK_MSG(ev.accuracy >= MIN_ACCURACY, "accuracy %.4f", ev.accuracy);
    for (int c = 0; c < OB_ROUTE_N; c++) {
        CHECK_MSG(ev.n_class[c] >= 15, "%s: %zu requests", ob_route_class_name((ob_route_class)c), ev.n_class[c]);
        CHECK_MSG(ev.class_accuracy[c] >= MIN_CLASS_ACCURACY, "%s: %.4f",
                  ob_route_class_name((ob_route_class)c), ev.class_accuracy[c]);
    }
    CHECK_MSG(ev.mean_us < MAX_MEAN_US, "mean %.1f us", ev.mean_us);
    CHECK_MSG(ev.mean_cpu_us < MAX_MEAN_US, "mean CPU %.1f us", ev.mean_cpu_us);
    CHECK(ev.ece >= 0 && ev.ece < 0.1);
    fprintf(stderr, "  eval: %zu requests, accuracy %.4f (code %.3f prose %.3f short %.3f long %.3f), "
                    "ECE %.4f, %.1f us a decision (%.1f us CPU)\n",
            ev.n, ev.accuracy, ev.class_accuracy[0], ev.class_accuracy[1], ev.class_accuracy[2],
            ev.class_accuracy[3], ev.ece, ev.mean_us, ev.mean_cpu_us);
}

#ifdef OB_CLI_PATH
/* `1bit route`: --classify with --json, JSON on stdin, --eval's table. */
TEST(cli) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s route --json --classify 'write a haiku about rain' 2>&1", OB_CLI_PATH);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK_EQ_INT(pclose(p), 0);
    CHECK_MSG(strstr(out, "{\"class\": \"prose\", \"confidence\": ") == out, "%s", out);
    CHECK(strstr(out, "\"device\": \"default\"") && strstr(out, "\"ms\": "));

    snprintf(cmd, sizeof cmd,
             "echo '{\"messages\": [{\"role\": \"user\", \"content\": \"what is 12 times 12?\"}]}' | "
             "%s route --route-min-conf 1 2>&1", OB_CLI_PATH);
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    CHECK(p && pclose(p) == 0);
    CHECK_MSG(!strncmp(out, "short ", 6) && strstr(out, "below --route-min-conf"), "%s", out);

    snprintf(cmd, sizeof cmd, "%s route --eval %s/data/router/eval.jsonl --repeat 1 2>&1", OB_CLI_PATH,
             OB_SOURCE_DIR);
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    CHECK(p && pclose(p) == 0);
    CHECK_MSG(strstr(out, "confusion") && strstr(out, "ECE") && strstr(out, "prose"), "%s", out);

    snprintf(cmd, sizeof cmd, "%s route --eval /nonexistent.jsonl 2>&1", OB_CLI_PATH);
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    CHECK(p && pclose(p) != 0);
}
#endif

int main(int argc, char **argv) { return test_main(argc, argv); }
