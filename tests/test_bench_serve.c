/*
 * test_bench_serve.c - `1bit bench serve` end to end, as a user runs it:
 * two tiny server configurations of stories260K at 1 and 2 concurrent
 * clients, then the JSON, the table and the SVG it wrote are checked. The
 * numbers themselves are the machine's; what is checked is that they are
 * consistent: every request completed with exactly the tokens it asked for,
 * percentiles are ordered, times are positive, requests that start with the
 * shared prefix found it in the cache (the warm-up put it there), the
 * levels ran interleaved, and the plot is a well-formed SVG with one line per
 * configuration in each of its three panels. Bad command lines fail with a
 * message and no table.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#ifndef OB_CLI_PATH
#error OB_CLI_PATH must name the 1bit binary
#endif

/* Run `sh -c cmd`, stdout into out (cap bytes), stderr into err; the exit code. */
static int run_sh(const char *cmd, char *out, size_t cap, char *err, size_t ecap) {
    char errpath[64], full[4096];
    snprintf(errpath, sizeof errpath, "/tmp/ob_test_bench_serve_err_%d", (int)getpid());
    snprintf(full, sizeof full, "%s 2>%s", cmd, errpath);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    FILE *e = fopen(errpath, "r");
    size_t m = e ? fread(err, 1, ecap - 1, e) : 0;
    err[m] = '\0';
    if (e) fclose(e);
    unlink(errpath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* p50 <= p90 <= p99, all positive (min_p50 > 0) or non-negative. */
static void check_pct(json_t *res, const char *k, bool positive) {
    json_t *p = json_object_get(res, k);
    CHECK_MSG(json_is_object(p), "%s missing", k);
    double a = num(p, "p50"), b = num(p, "p90"), c = num(p, "p99");
    CHECK_MSG(a <= b && b <= c, "%s: %g %g %g", k, a, b, c);
    if (positive) CHECK_MSG(a > 0, "%s p50 = %g", k, a);
    else CHECK_MSG(a >= 0, "%s p50 = %g", k, a);
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

TEST(two_configs_two_levels) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    char model[1024];
    snprintf(model, sizeof model, "%s", test_path(dir, "stories260K/stories260K.gguf"));
    if (access(model, R_OK) != 0) {
        test_skip("stories260K.gguf is absent");
        return;
    }
    char json_path[64], svg_path[64], cmd[4096];
    snprintf(json_path, sizeof json_path, "/tmp/ob_test_bench_serve_%d.json", (int)getpid());
    snprintf(svg_path, sizeof svg_path, "/tmp/ob_test_bench_serve_%d.svg", (int)getpid());
    const int prefix = 64, requests = 4;
    snprintf(cmd, sizeof cmd,
             "OB_LOG=error %s bench serve -m %s --config 'np1=-np 1 -t 1 -c 256' --config 'np2=-np 2 -t 1 -c 256 --quiet' "
             "-c 1,2 -r %d -p 8,20 -n 5,9 --prefix %d --prefix-share 0.5 --seed 1 --json %s --plot %s",
             OB_CLI_PATH, model, requests, prefix, json_path, svg_path);
    static char out[65536], err[65536];
    int rc = run_sh(cmd, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0, "exit %d; stderr:\n%s", rc, err);

    /* the table: one row per configuration and level */
    CHECK(strstr(out, "| config | clients |") != NULL);
    CHECK(strstr(out, "| np1 | 1 | 4 |") != NULL);
    CHECK(strstr(out, "| np1 | 2 | 4 |") != NULL);
    CHECK(strstr(out, "| np2 | 1 | 4 |") != NULL);
    CHECK(strstr(out, "| np2 | 2 | 4 |") != NULL);

    json_error_t je;
    json_t *root = json_load_file(json_path, 0, &je);
    CHECK_MSG(root != NULL, "%s: %s", json_path, je.text);
    if (!root) return;
    json_t *results = json_object_get(root, "results");
    CHECK_EQ_INT(json_array_size(results), 4);
    /* interleaved: np1 c=1, np2 c=1, np1 c=2, np2 c=2 */
    static const char *const want_cfg[4] = {"np1", "np2", "np1", "np2"};
    static const int want_conc[4] = {1, 1, 2, 2};
    int n_prefixed = 0, n_plain = 0;
    for (size_t i = 0; i < json_array_size(results) && i < 4; i++) {
        json_t *r = json_array_get(results, i);
        CHECK_EQ_STR(json_string_value(json_object_get(r, "config")), want_cfg[i]);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "concurrency")), want_conc[i]);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "requests")), requests);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "completed")), requests);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "failed")), 0);
        CHECK(num(r, "wall_s") > 0);
        CHECK(num(r, "req_per_s") > 0);
        CHECK(num(r, "output_tok_per_s") > 0);
        check_pct(r, "ttft_ms", true);
        check_pct(r, "itl_ms", false);
        check_pct(r, "eff_tok_per_s", true);
        json_t *reqs = json_object_get(r, "requests_detail");
        CHECK_EQ_INT(json_array_size(reqs), requests);
        long long out_tokens = 0;
        for (size_t k = 0; k < json_array_size(reqs); k++) {
            json_t *q = json_array_get(reqs, k);
            CHECK_MSG(json_is_true(json_object_get(q, "ok")), "request %zu: %s", k,
                      json_string_value(json_object_get(q, "error")) ? json_string_value(json_object_get(q, "error")) : "");
            long long asked = json_integer_value(json_object_get(q, "max_tokens"));
            long long got = json_integer_value(json_object_get(q, "completion_tokens"));
            CHECK_MSG(got == asked, "request %zu: %lld tokens, asked %lld", k, got, asked);
            CHECK(asked == 5 || asked == 9);
            out_tokens += got;
            long long sent = json_integer_value(json_object_get(q, "prompt_tokens_sent"));
            CHECK_EQ_INT(json_integer_value(json_object_get(q, "prompt_tokens")), sent);
            CHECK_EQ_STR(json_string_value(json_object_get(q, "finish_reason")), "length");
            double ttft = num(q, "ttft_ms"), dec = num(q, "decode_ms"), e2e = num(q, "e2e_ms");
            CHECK_MSG(ttft > 0 && dec > 0 && e2e >= ttft && e2e >= dec, "ttft %g decode %g e2e %g", ttft, dec, e2e);
            bool prefixed = json_is_true(json_object_get(q, "prefixed"));
            long long cached = json_integer_value(json_object_get(q, "cached_tokens"));
            if (prefixed) {
                n_prefixed++;
                CHECK_EQ_INT(sent - prefix == 8 || sent - prefix == 20, 1);
                /* the warm-up request put the prefix's full pages in the cache */
                CHECK_MSG(cached >= 32 && cached <= prefix, "prefixed request %zu: %lld cached", k, cached);
            } else {
                n_plain++;
                CHECK(sent == 8 || sent == 20);
            }
        }
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "output_tokens")), out_tokens);
    }
    /* --prefix-share 0.5, seed 1: both kinds occur (4 of the 8 distinct requests start with the prefix) */
    CHECK_MSG(n_prefixed > 0 && n_plain > 0, "%d prefixed, %d plain", n_prefixed, n_plain);
    /* the same requests for both configurations at a level */
    for (int lvl = 0; lvl < 2; lvl++) {
        json_t *a = json_object_get(json_array_get(results, (size_t)lvl * 2), "requests_detail");
        json_t *b = json_object_get(json_array_get(results, (size_t)lvl * 2 + 1), "requests_detail");
        for (size_t k = 0; k < json_array_size(a); k++) {
            json_t *qa = json_array_get(a, k), *qb = json_array_get(b, k);
            CHECK_EQ_INT(json_integer_value(json_object_get(qa, "prompt_tokens_sent")),
                         json_integer_value(json_object_get(qb, "prompt_tokens_sent")));
            CHECK_EQ_INT(json_integer_value(json_object_get(qa, "max_tokens")),
                         json_integer_value(json_object_get(qb, "max_tokens")));
        }
    }
    json_decref(root);

    FILE *f = fopen(svg_path, "r");
    CHECK_MSG(f != NULL, "%s was not written", svg_path);
    static char svg[262144];
    size_t n = f ? fread(svg, 1, sizeof svg - 1, f) : 0;
    svg[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(svg, "<svg") != NULL);
    const char *end = strstr(svg, "</svg>");
    CHECK(end != NULL && count(svg, "</svg>") == 1);
    for (const char *p = end ? end + 6 : svg + n; *p; p++) CHECK(*p == '\n'); /* nothing after the root */
    CHECK_EQ_INT(count(svg, "<polyline"), 6); /* 3 panels x 2 configurations */
    CHECK_EQ_INT(count(svg, "<g>"), count(svg, "</g>"));
    CHECK(strstr(svg, ">np1</text>") != NULL && strstr(svg, ">np2</text>") != NULL);
    unlink(json_path);
    unlink(svg_path);
}

TEST(bad_command_lines_fail_clearly) {
    static char out[8192], err[8192];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s bench serve -m x.gguf --config noequals", OB_CLI_PATH);
    CHECK_EQ_INT(run_sh(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK(strstr(err, "NAME=FLAGS") != NULL);
    CHECK(out[0] == '\0');
    snprintf(cmd, sizeof cmd, "%s bench serve -m x.gguf -c 0", OB_CLI_PATH);
    CHECK_EQ_INT(run_sh(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK(strstr(err, "-c 0") != NULL);
    snprintf(cmd, sizeof cmd, "%s bench serve --config 'a=-np 2'", OB_CLI_PATH);
    CHECK_EQ_INT(run_sh(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK(strstr(err, "no model") != NULL);
    /* a server that cannot start: the error names the config and shows the server's log */
    snprintf(cmd, sizeof cmd, "%s bench serve -m /nonexistent/model.gguf --config 'broken=-np 1' -c 1 -r 1",
             OB_CLI_PATH);
    CHECK_EQ_INT(run_sh(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "config broken") != NULL, "%s", err);
    CHECK_MSG(strstr(err, "/nonexistent/model.gguf") != NULL, "%s", err);
    CHECK(strstr(out, "| config |") == NULL);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
