/*
 * route_bench.c - measures the router's candidate targets per class and
 * writes the route policy from the measurements (issue 12, docs/router.md
 * "How the policy was measured").
 *
 *   route_bench -m MODEL.gguf [--eval data/router/eval.jsonl]
 *               [--targets plain=none,ngram4=ngram:4,ngram8=ngram:8]
 *               [-n 64] [-r 3] [-t 1] [--per-class N] [--margin 0.03]
 *               [-o data/router/policy.json] [--md table.md]
 *
 * It starts the server in this process (one slot, so requests do not share
 * steps and each one's speed is its own), with the drafter the targets
 * need, and sends every labelled request of the evaluation set to
 * /v1/chat/completions once per target and repeat, greedy, with ignore_eos
 * and max_tokens n so every target generates the same tokens (speculation
 * is exact; the tool checks the answers are identical). A target is applied
 * the way the server applies it: "speculative": false for drafter none,
 * "speculative.n_max": k for a draft length. Targets are interleaved per
 * request (rotating which goes first), so drift in the machine falls on all
 * of them alike. One untimed warm-up request per target comes first.
 *
 * Effective tokens per second of (class, target): generated tokens over the
 * wall time of the requests (send to last byte: prompt and decoding), per
 * repeat; the table reports mean and sd over repeats. The policy takes, per
 * class, the fastest target when it beats the first target (the baseline)
 * by more than --margin and more than two sd of the difference; otherwise
 * the baseline, since a difference inside the noise is no reason to switch.
 * The default target (below the confidence threshold) is chosen the same
 * way over all requests.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/status.h"
#include "onebit.h"
#include "router/policy.h"
#include "router/router.h"
#include "server/server.h"

#define MAX_T 8
#define MAX_REP 16

typedef struct target {
    char name[OB_ROUTE_NAME_MAX];
    int drafter; /* OB_SPEC_NONE or OB_SPEC_NGRAM / OB_SPEC_DRAFT */
    int n_max;
} target;

typedef struct cell {
    double tokens[MAX_REP], seconds[MAX_REP];
    long long drafted, accepted, requests;
} cell;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct resp_buf {
    char *data;
    size_t len;
} resp_buf;

static size_t on_body(char *p, size_t sz, size_t n, void *user) {
    resp_buf *b = user;
    size_t k = sz * n;
    char *d = realloc(b->data, b->len + k + 1);
    if (!d) return 0;
    memcpy(d + b->len, p, k);
    b->data = d;
    b->len += k;
    d[b->len] = '\0';
    return k;
}

/* POST body to the chat endpoint; the parsed response, or NULL. */
static json_t *post_chat(CURL *c, const char *url, const char *text, double *secs) {
    resp_buf acc = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &acc);
    double t0 = now_s();
    CURLcode rc = curl_easy_perform(c);
    *secs = now_s() - t0;
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    json_t *j = NULL;
    if (rc == CURLE_OK && status == 200) {
        json_error_t e;
        j = json_loadb(acc.data ? acc.data : "", acc.len, 0, &e);
    } else {
        fprintf(stderr, "route_bench: request failed (%s, HTTP %ld): %.300s\n", curl_easy_strerror(rc), status,
                acc.data ? acc.data : "");
    }
    free(acc.data);
    return j;
}

static int parse_targets(const char *spec, target *t, int *n) {
    *n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= MAX_T) return ob_err(OB_ERR_INVALID_ARG, "at most %d targets", MAX_T);
        char *eq = strchr(tok, '=');
        if (!eq) return ob_err(OB_ERR_INVALID_ARG, "target '%s': NAME=none or NAME=ngram:K", tok);
        *eq = '\0';
        target *x = &t[*n];
        memset(x, 0, sizeof *x); /* "none" sets no draft length: it must read 0, not stack garbage */
        snprintf(x->name, sizeof x->name, "%s", tok);
        const char *v = eq + 1;
        if (!strcmp(v, "none")) {
            x->drafter = OB_SPEC_NONE;
        } else if (!strncmp(v, "ngram:", 6) && atoi(v + 6) >= 1 && atoi(v + 6) <= 64) {
            x->drafter = OB_SPEC_NGRAM;
            x->n_max = atoi(v + 6);
        } else {
            return ob_err(OB_ERR_INVALID_ARG, "target '%s': '%s' is not none or ngram:K (1..64)", tok, v);
        }
        (*n)++;
    }
    return *n > 0 ? 0 : ob_err(OB_ERR_INVALID_ARG, "no targets");
}

static void mean_sd(const cell *c, int reps, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int r = 0; r < reps; r++) {
        double v = c->seconds[r] > 0 ? c->tokens[r] / c->seconds[r] : 0;
        s += v;
        s2 += v * v;
    }
    *mean = s / reps;
    *sd = reps > 1 ? sqrt(fmax(0, (s2 - s * s / reps) / (reps - 1))) : 0;
}

/* The target a class gets: the fastest, if it beats the baseline (target 0)
 * by more than the margin and two sd of the difference; else the baseline. */
static int choose(const cell *row, int nt, int reps, double margin) {
    double m0, s0;
    mean_sd(&row[0], reps, &m0, &s0);
    int best = 0;
    double bm = m0;
    for (int t = 1; t < nt; t++) {
        double m, s;
        mean_sd(&row[t], reps, &m, &s);
        if (m > bm && m > m0 * (1 + margin) && m - m0 > 2 * sqrt(s * s + s0 * s0)) best = t, bm = m;
    }
    return best;
}

static void usage(void) {
    fprintf(stderr, "usage: route_bench -m MODEL.gguf [--eval FILE.jsonl] [--targets NAME=none|ngram:K,...] [-n TOKENS]\n"
                    "                   [-r REPEATS] [-t THREADS] [--per-class N] [--margin F] [-o POLICY.json] [--md FILE]\n");
}

int main(int argc, char **argv) {
    const char *model = NULL, *eval = "data/router/eval.jsonl", *tspec = "plain=none,ngram4=ngram:4,ngram8=ngram:8";
    const char *out_path = NULL, *md_path = NULL;
    int n_tok = 64, reps = 3, threads = 1, per_class = 0;
    double margin = 0.03;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool has = v != NULL;
        if (!strcmp(a, "-m") && has) model = v, i++;
        else if (!strcmp(a, "--eval") && has) eval = v, i++;
        else if (!strcmp(a, "--targets") && has) tspec = v, i++;
        else if (!strcmp(a, "-n") && has) n_tok = atoi(v), i++;
        else if (!strcmp(a, "-r") && has) reps = atoi(v), i++;
        else if (!strcmp(a, "-t") && has) threads = atoi(v), i++;
        else if (!strcmp(a, "--per-class") && has) per_class = atoi(v), i++;
        else if (!strcmp(a, "--margin") && has) margin = atof(v), i++;
        else if (!strcmp(a, "-o") && has) out_path = v, i++;
        else if (!strcmp(a, "--md") && has) md_path = v, i++;
        else {
            usage();
            return 2;
        }
    }
    target tg[MAX_T];
    int nt = 0;
    if (!model || n_tok < 1 || reps < 1 || reps > MAX_REP || parse_targets(tspec, tg, &nt) < 0) {
        if (ob_last_error()[0]) fprintf(stderr, "route_bench: %s\n", ob_last_error());
        usage();
        return 2;
    }
    int n_max = 0;
    for (int t = 0; t < nt; t++) n_max = tg[t].n_max > n_max ? tg[t].n_max : n_max;

    /* the labelled requests, by class */
    FILE *f = fopen(eval, "r");
    if (!f) {
        fprintf(stderr, "route_bench: cannot read %s\n", eval);
        return 1;
    }
    json_t *by_class[OB_ROUTE_N];
    for (int c = 0; c < OB_ROUTE_N; c++) by_class[c] = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        json_error_t e;
        json_t *o = json_loadb(line, (size_t)len, 0, &e);
        int c = o ? ob_route_class_parse(json_string_value(json_object_get(o, "label"))) : -1;
        json_t *msgs = json_object_get(o, "messages");
        if (c >= 0 && !msgs && json_is_string(json_object_get(o, "text")))
            msgs = json_pack("[{s:s, s:O}]", "role", "user", "content", json_object_get(o, "text"));
        else
            json_incref(msgs);
        if (c >= 0 && msgs && (per_class <= 0 || json_array_size(by_class[c]) < (size_t)per_class))
            json_array_append(by_class[c], msgs);
        json_decref(msgs);
        json_decref(o);
    }
    free(line);
    fclose(f);

    ob_log_set_level(OB_LOG_ERROR);
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = model;
    p.port = 0;
    p.device = "cpu";
    p.quiet = true;
    p.engine.n_parallel = 1;
    p.engine.n_threads = threads;
    p.engine.spec.type = n_max > 0 ? OB_SPEC_NGRAM : OB_SPEC_NONE;
    if (n_max > 0) p.engine.spec.n_max = n_max;
    ob_server *srv = NULL;
    if (ob_server_start(&p, &srv) < 0 || ob_server_wait_ready(srv, 60000) != 0) {
        fprintf(stderr, "route_bench: the server did not start: %s\n", ob_last_error());
        ob_server_stop(srv);
        return 1;
    }
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", ob_server_port(srv));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);

    static cell cells[OB_ROUTE_N][MAX_T];
    int failed = 0, mismatched = 0;
    double t_start = now_s();
    for (int warm = 0; warm < nt && !failed; warm++) { /* untimed: caches, page faults */
        json_t *first = json_array_get(by_class[OB_ROUTE_SHORT], 0);
        if (!first) break;
        json_t *req = json_pack("{s:O, s:i, s:f, s:b}", "messages", first, "max_tokens", n_tok, "temperature", 0.0,
                                "ignore_eos", 1);
        char *body = json_dumps(req, JSON_COMPACT);
        double s;
        json_t *r = post_chat(c, url, body, &s);
        failed |= !r;
        json_decref(r);
        free(body);
        json_decref(req);
    }
    for (int rep = 0; rep < reps && !failed; rep++) {
        for (int cls = 0; cls < OB_ROUTE_N && !failed; cls++) {
            size_t i;
            json_t *msgs;
            json_array_foreach(by_class[cls], i, msgs) {
                char *answer0 = NULL;
                for (int k = 0; k < nt && !failed; k++) {
                    int t = (int)((k + i + (size_t)rep) % (size_t)nt); /* rotate who goes first */
                    json_t *req = json_pack("{s:O, s:i, s:f, s:b}", "messages", msgs, "max_tokens", n_tok, "temperature",
                                            0.0, "ignore_eos", 1);
                    /* the seed makes the request's own sampler state the same for every target */
                    json_object_set_new(req, "seed", json_integer(1));
                    if (tg[t].drafter == OB_SPEC_NONE) json_object_set_new(req, "speculative", json_false());
                    else json_object_set_new(req, "speculative.n_max", json_integer(tg[t].n_max));
                    char *body = json_dumps(req, JSON_COMPACT);
                    double secs;
                    json_t *r = post_chat(c, url, body, &secs);
                    free(body);
                    json_decref(req);
                    if (!r) {
                        failed = 1;
                        break;
                    }
                    cell *ce = &cells[cls][t];
                    json_t *usage = json_object_get(r, "usage"), *tim = json_object_get(r, "timings");
                    ce->tokens[rep] += (double)json_integer_value(json_object_get(usage, "completion_tokens"));
                    ce->seconds[rep] += secs;
                    ce->drafted += json_integer_value(json_object_get(tim, "draft_n"));
                    ce->accepted += json_integer_value(json_object_get(tim, "draft_n_accepted"));
                    ce->requests++;
                    const char *ans = json_string_value(
                        json_object_get(json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message"), "content"));
                    if (!answer0) answer0 = strdup(ans ? ans : "");
                    else if (strcmp(answer0, ans ? ans : "") != 0 && ++mismatched <= 8) {
                        size_t at = 0;
                        while (answer0[at] && ans && answer0[at] == ans[at]) at++;
                        fprintf(stderr, "route_bench: %s request %zu: target %s answered differently from byte %zu:\n"
                                        "  %.60s\n  %.60s\n",
                                ob_route_class_name((ob_route_class)cls), i, tg[t].name, at, answer0 + at,
                                ans ? ans + at : "");
                    }
                    json_decref(r);
                }
                free(answer0);
            }
        }
        fprintf(stderr, "route_bench: repeat %d/%d done (%.0f s)\n", rep + 1, reps, now_s() - t_start);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    ob_server_stop(srv);
    if (failed) return 1;

    /* the table */
    static cell all[MAX_T];
    for (int t = 0; t < nt; t++)
        for (int cls = 0; cls < OB_ROUTE_N; cls++) {
            for (int r = 0; r < reps; r++) {
                all[t].tokens[r] += cells[cls][t].tokens[r];
                all[t].seconds[r] += cells[cls][t].seconds[r];
            }
            all[t].drafted += cells[cls][t].drafted;
            all[t].accepted += cells[cls][t].accepted;
            all[t].requests += cells[cls][t].requests;
        }
    int choice[OB_ROUTE_N], def = choose(all, nt, reps, margin);
    for (int cls = 0; cls < OB_ROUTE_N; cls++) choice[cls] = choose(cells[cls], nt, reps, margin);

    FILE *md = md_path ? fopen(md_path, "w") : stdout;
    if (!md) md = stdout;
    fprintf(md, "| class | target | requests | tok/s (mean ± sd over %d repeats) | vs %s | drafted | accepted | chosen |\n",
            reps, tg[0].name);
    fprintf(md, "|---|---|---:|---:|---:|---:|---:|:---:|\n");
    json_t *rows = json_array();
    for (int cls = 0; cls <= OB_ROUTE_N; cls++) {
        const cell *row = cls < OB_ROUTE_N ? cells[cls] : all;
        const char *cname = cls < OB_ROUTE_N ? ob_route_class_name((ob_route_class)cls) : "all";
        double m0, s0;
        mean_sd(&row[0], reps, &m0, &s0);
        for (int t = 0; t < nt; t++) {
            double m, s;
            mean_sd(&row[t], reps, &m, &s);
            bool chosen = t == (cls < OB_ROUTE_N ? choice[cls] : def);
            double acc = row[t].drafted ? (double)row[t].accepted / (double)row[t].drafted : 0;
            fprintf(md, "| %s | %s | %lld | %.0f ± %.0f | %+.1f%% | %lld | %.0f%% | %s |\n", cname, tg[t].name,
                    row[t].requests / reps, m, s, m0 > 0 ? 100 * (m / m0 - 1) : 0, row[t].drafted / reps, 100 * acc,
                    chosen ? (cls < OB_ROUTE_N ? "✓" : "default") : "");
            json_array_append_new(rows, json_pack("{s:s, s:s, s:I, s:f, s:f, s:I, s:I}", "class", cname, "target",
                                                  tg[t].name, "requests", (json_int_t)(row[t].requests / reps), "tok_s",
                                                  round(m * 10) / 10, "sd", round(s * 10) / 10, "drafted",
                                                  (json_int_t)(row[t].drafted / reps), "accepted",
                                                  (json_int_t)(row[t].accepted / reps)));
        }
    }
    if (md != stdout) fclose(md);
    if (mismatched) fprintf(stderr, "route_bench: warning: %d answers differed between targets\n", mismatched);

    if (out_path) {
        json_t *targets = json_object(), *classes = json_object();
        for (int t = 0; t < nt; t++) {
            json_t *o = json_pack("{s:s}", "drafter", tg[t].drafter == OB_SPEC_NONE ? "none" : "ngram");
            if (tg[t].n_max) json_object_set_new(o, "draft_n_max", json_integer(tg[t].n_max));
            json_object_set_new(targets, tg[t].name, o);
        }
        for (int cls = 0; cls < OB_ROUTE_N; cls++)
            json_object_set_new(classes, ob_route_class_name((ob_route_class)cls), json_string(tg[choice[cls]].name));
        char cmd[1024] = "route_bench";
        for (int i = 1; i < argc; i++) {
            size_t l = strlen(cmd);
            snprintf(cmd + l, sizeof cmd - l, " %s", argv[i]);
        }
        const char *base = strrchr(model, '/');
        json_t *pol = json_pack(
            "{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:s, s:i, s:o}}", "format",
            "onebit-route-policy/1", "comment",
            "written by tools/route_bench from measurements (docs/router.md); serve it with --spec-type ngram "
            "--route-policy",
            "default", tg[def].name, "targets", targets, "classes", classes, "measured", "model", base ? base + 1 : model,
            "build", ob_version_string(), "command", cmd, "threads", threads, "max_tokens", n_tok, "repeats", reps, "margin",
            margin, "metric", "generated tokens / wall time of the request (prompt + decoding), one request at a time",
            "answers_differing", mismatched, "rows", rows);
        if (!pol || json_dump_file(pol, out_path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)) != 0) {
            fprintf(stderr, "route_bench: cannot write %s\n", out_path);
            json_decref(pol);
            return 1;
        }
        json_decref(pol);
        /* what we wrote must load as a policy */
        ob_route_policy check;
        if (ob_route_policy_load(out_path, &check) < 0) {
            fprintf(stderr, "route_bench: %s\n", ob_last_error());
            return 1;
        }
        fprintf(stderr, "route_bench: wrote %s\n", out_path);
    } else {
        json_decref(rows);
    }
    for (int cls = 0; cls < OB_ROUTE_N; cls++) json_decref(by_class[cls]);
    return 0;
}
