/*
 * route.c - `1bit route`: what kind of request is this (the router's
 * classifier, docs/router.md).
 *
 *   1bit route --classify "write a haiku about rain"      # prose 0.97 ...
 *   echo '{"messages":[{"role":"user","content":"hi"}]}' | 1bit route --json
 *   1bit route --eval data/router/eval.jsonl              # accuracy, confusion, ECE, time
 *
 * Without a policy file every class goes to the default device, so the
 * device printed is "default"; --route-min-conf marks decisions whose
 * confidence is below the threshold (they would take the default device
 * whatever the policy says).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../router/router.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: 1bit route [--classify TEXT | --eval FILE.jsonl] [options]\n"
            "\n"
            "Classifies a chat request as code, prose, short or long (1,024 or more characters\n"
            "of user content) with a calibrated confidence. Without --classify or --eval it reads\n"
            "stdin: {\"messages\": [...]} (an OpenAI chat request) or plain text.\n"
            "\n"
            "  --classify TEXT      classify TEXT as one user message\n"
            "  --json               print {\"class\", \"confidence\", \"device\", \"ms\"}\n"
            "  --route-min-conf X   below confidence X the request takes the default device (0)\n"
            "  --eval FILE.jsonl    accuracy per class, confusion matrix, ECE and time per decision\n"
            "                       on labelled requests ({\"label\": ..., \"messages\"|\"text\": ...})\n"
            "  --errors             with --eval: list the wrong decisions\n"
            "  --repeat N           with --eval: time each decision over N calls (default 20)\n"
            "  --model FILE         a text model from tools/router_train (default: built in)\n");
}

static int read_stdin(char **out, size_t *len) {
    size_t cap = 1 << 14, n = 0;
    char *buf = ob_malloc(cap + 1);
    if (!buf) return ob_err(OB_ERR_OOM, "out of memory");
    for (;;) {
        if (n == cap) {
            char *b = ob_realloc(buf, cap * 2 + 1);
            if (!b) {
                ob_free(buf);
                return ob_err(OB_ERR_OOM, "out of memory");
            }
            buf = b;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, stdin);
        n += k;
        if (k == 0) break;
    }
    if (ferror(stdin)) {
        ob_free(buf);
        return ob_err(OB_ERR_IO, "reading stdin: %s", strerror(errno));
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void print_eval(const char *path, const ob_route_eval *ev, int repeat) {
    printf("router eval: %s, %zu requests\n\n", path, ev->n);
    printf("%-8s %6s %9s\n", "class", "n", "accuracy");
    for (int c = 0; c < OB_ROUTE_N; c++) {
        if (!ev->n_class[c]) continue;
        printf("%-8s %6zu %8.1f%%\n", ob_route_class_name((ob_route_class)c), ev->n_class[c],
               100.0 * ev->class_accuracy[c]);
    }
    printf("%-8s %6zu %8.1f%%\n\n", "all", ev->n, 100.0 * ev->accuracy);
    printf("confusion (rows: true class, columns: decided)\n%-8s", "");
    for (int c = 0; c < OB_ROUTE_N; c++) printf(" %6s", ob_route_class_name((ob_route_class)c));
    printf("\n");
    for (int a = 0; a < OB_ROUTE_N; a++) {
        printf("%-8s", ob_route_class_name((ob_route_class)a));
        for (int b = 0; b < OB_ROUTE_N; b++) printf(" %6zu", ev->confusion[a][b]);
        printf("\n");
    }
    printf("\nECE (10 bins): %.4f over all decisions, %.4f over the model's (gate left out)\n",
           ev->ece, ev->ece_model);
    printf("time per decision (1 thread, %d timed calls each): wall mean %.2f us, p50 %.2f, p99 %.2f, "
           "max %.2f; CPU mean %.2f us; with JSON parsing: wall mean %.2f us\n",
           repeat, ev->mean_us, ev->p50_us, ev->p99_us, ev->max_us, ev->mean_cpu_us, ev->mean_json_us);
}

int ob_cmd_route(int argc, char **argv) {
    const char *classify = NULL, *eval = NULL, *model = NULL;
    int json = 0, errors = 0, repeat = 20;
    double min_conf = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--classify") && more) {
            classify = argv[++i];
        } else if (!strcmp(a, "--eval") && more) {
            eval = argv[++i];
        } else if (!strcmp(a, "--model") && more) {
            model = argv[++i];
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--errors")) {
            errors = 1;
        } else if (!strcmp(a, "--repeat") && more) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 100000) return ob_cli_fail(0, "--repeat: want 1..100000");
            repeat = (int)v;
        } else if (!strcmp(a, "--route-min-conf") && more) {
            char *end;
            min_conf = strtod(argv[++i], &end);
            if (*end || !(min_conf >= 0 && min_conf <= 1))
                return ob_cli_fail(0, "--route-min-conf: want a number in [0, 1]");
        } else {
            usage(stderr);
            return 2;
        }
    }
    ob_router *r;
    int rc = ob_router_init(&r, model);
    if (rc < 0) return ob_cli_fail(rc, "loading the router model");
    if (eval) {
        ob_route_eval ev;
        rc = ob_router_eval_file(r, eval, repeat, &ev, errors ? stderr : NULL);
        ob_router_free(r);
        if (rc < 0) return ob_cli_fail(rc, "--eval");
        print_eval(eval, &ev, repeat);
        return 0;
    }
    ob_route_result res;
    double ms;
    if (classify) {
        ob_route_msg m = {"user", classify, strlen(classify)};
        double t0 = now_ms();
        rc = ob_router_classify(r, &m, 1, &res);
        ms = now_ms() - t0;
    } else {
        char *buf = NULL;
        size_t len = 0;
        rc = read_stdin(&buf, &len);
        if (rc < 0) {
            ob_router_free(r);
            return ob_cli_fail(rc, "stdin");
        }
        size_t k = 0;
        while (k < len && (buf[k] == ' ' || buf[k] == '\n' || buf[k] == '\t' || buf[k] == '\r')) k++;
        double t0 = now_ms();
        if (k < len && buf[k] == '{') {
            rc = ob_router_classify_json(r, buf, len, &res);
        } else {
            ob_route_msg m = {"user", buf, len};
            rc = ob_router_classify(r, &m, 1, &res);
        }
        ms = now_ms() - t0;
        ob_free(buf);
    }
    ob_router_free(r);
    if (rc < 0) return ob_cli_fail(rc, "classifying");
    int low = res.confidence < min_conf;
    const char *cls = ob_route_class_name(res.cls);
    if (json)
        printf("{\"class\": \"%s\", \"confidence\": %.4f, \"device\": \"default\", \"ms\": %.4f%s}\n",
               cls, res.confidence, ms, low ? ", \"below_min_conf\": true" : "");
    else
        printf("%s %.4f default %.4f ms%s\n", cls, res.confidence, ms,
               low ? " (below --route-min-conf: default device)" : "");
    return 0;
}
