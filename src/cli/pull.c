/*
 * pull.c - `1bit pull` and `1bit list`: the model store on the command line.
 *
 *   1bit pull org/repo[:file-or-quant] [--models-dir DIR] [--revision REV] [--force] [-q]
 *   1bit list [--models-dir DIR] [--json | --paths | --path NAME | --dir]
 *
 * The work is in src/store (ob_pull, ob_store_list, ob_store_resolve); this
 * file draws the progress bar and the table. Progress goes to stderr, so the
 * one line pull prints on stdout is the stored path (`make serve` and scripts
 * read it): `m=$(1bit pull org/repo:Q4_K_M) && 1bit serve -m "$m"`.
 */
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "onebit.h"

static void human(uint64_t b, char *buf, size_t size) {
    /* decimal units, as the hub shows sizes */
    if (b >= 1000000000ull) snprintf(buf, size, "%.2f GB", (double)b / 1e9);
    else if (b >= 1000000ull) snprintf(buf, size, "%.1f MB", (double)b / 1e6);
    else if (b >= 1000ull) snprintf(buf, size, "%.1f kB", (double)b / 1e3);
    else snprintf(buf, size, "%" PRIu64 " B", b);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- pull ---- */

static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

typedef struct bar {
    bool tty, quiet;
    double t0;       /* when the current file started */
    double rate;     /* smoothed bytes/s */
    double t_last;
    uint64_t b_last;
} bar;

static void eta_str(double s, char *buf, size_t size) {
    if (s < 0 || s > 99 * 3600) snprintf(buf, size, "--:--");
    else if (s >= 3600) snprintf(buf, size, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else snprintf(buf, size, "%d:%02d", (int)s / 60, (int)s % 60);
}

static int on_progress(const ob_pull_progress *p, void *user) {
    bar *b = user;
    char done[32], total[32], rate[32], eta[16];
    double t = now_s();
    switch (p->event) {
    case OB_PULL_START:
        b->t0 = b->t_last = t;
        b->b_last = p->done;
        b->rate = 0;
        if (b->quiet || !b->tty) break; /* logs get one line per file, at the end */
        human(p->total, total, sizeof total);
        if (p->count > 1) fprintf(stderr, "pulling %s:%s (part %d of %d, %s)", p->repo, p->file, p->index, p->count, total);
        else fprintf(stderr, "pulling %s:%s (%s)", p->repo, p->file, total);
        if (p->resumed) {
            human(p->resumed, done, sizeof done);
            fprintf(stderr, ", resuming after %s", done);
        }
        fputc('\n', stderr);
        break;
    case OB_PULL_PROGRESS:
        if (t > b->t_last + 0.05) {
            double inst = (double)(p->done - b->b_last) / (t - b->t_last);
            b->rate = b->rate > 0 ? 0.7 * b->rate + 0.3 * inst : inst;
            b->t_last = t;
            b->b_last = p->done;
        }
        if (!b->tty || b->quiet) break;
        human(p->done, done, sizeof done);
        human(p->total, total, sizeof total);
        human((uint64_t)b->rate, rate, sizeof rate);
        eta_str(b->rate > 0 ? (double)(p->total - p->done) / b->rate : -1, eta, sizeof eta);
        {
            double f = p->total ? (double)p->done / (double)p->total : 1.0;
            char cells[31];
            int full = (int)(f * 30);
            for (int i = 0; i < 30; i++) cells[i] = i < full ? '#' : '.';
            cells[30] = '\0';
            fprintf(stderr, "\r  [%s] %5.1f%%  %s / %s  %s/s  ETA %s\033[K", cells, 100.0 * f, done, total, rate, eta);
        }
        break;
    case OB_PULL_RETRY:
        if (b->tty && !b->quiet) fputc('\n', stderr);
        fprintf(stderr, "  %s; resuming\n", p->message ? p->message : "transfer failed");
        break;
    case OB_PULL_VERIFY:
        if (b->tty && !b->quiet) fprintf(stderr, "\r  checking %s ...\033[K", p->checksum);
        break;
    case OB_PULL_DONE: {
        double dt = t - b->t0;
        human(p->total, total, sizeof total);
        human(dt > 0 ? (uint64_t)((double)(p->total - p->resumed) / dt) : 0, rate, sizeof rate);
        const char *check = !strcmp(p->checksum, "sha256")     ? "SHA-256 ok"
                            : !strcmp(p->checksum, "git-sha1") ? "git SHA-1 ok"
                                                               : "no checksum from the hub, size ok";
        char resumed[64] = "";
        if (p->resumed) {
            human(p->resumed, done, sizeof done);
            snprintf(resumed, sizeof resumed, ", resumed after %s", done);
        }
        if (b->tty && !b->quiet) {
            fprintf(stderr, "\r\033[K  %s in %.1f s (%s/s)%s, %s\n", total, dt, rate, resumed, check);
        } else if (!b->tty) {
            /* the one line a log gets per file */
            fprintf(stderr, "pulled %s:%s", p->repo, p->file);
            if (p->count > 1) fprintf(stderr, " (part %d of %d)", p->index, p->count);
            fprintf(stderr, ": %s in %.1f s (%s/s)%s, %s\n", total, dt, rate, resumed, check);
        }
        break;
    }
    case OB_PULL_CACHED:
        if (!b->quiet) {
            human(p->total, total, sizeof total);
            fprintf(stderr, "%s:%s (%s) is already in the store\n", p->repo, p->file, total);
        }
        break;
    }
    fflush(stderr);
    return g_interrupted ? 1 : 0;
}

static void pull_usage(FILE *f) {
    fprintf(f,
            "usage: 1bit pull org/repo[:file-or-quant] [options]\n"
            "  Download a GGUF from Hugging Face into the model store; print its path.\n"
            "  org/repo:Q4_K_M     a quant, matched in the .gguf names (any case)\n"
            "  org/repo:file.gguf  a file by its path in the repo (or a unique base name)\n"
            "  org/repo            Q4_K_M when the repo has it, else its first .gguf\n"
            "  Split models (-00001-of-0000N.gguf) come with all their parts.\n"
            "options:\n"
            "  --models-dir DIR   the store (default $OB_MODELS_DIR, else $XDG_CACHE_HOME/1bit/models,\n"
            "                     else ~/.cache/1bit/models)\n"
            "  --revision REV     branch, tag or commit (default main)\n"
            "  --force            download again even when the file is stored\n"
            "  -q, --quiet        no progress bar\n"
            "environment: HF_TOKEN (gated/private repos), HF_ENDPOINT (a mirror; default\n"
            "  https://huggingface.co), HF_HUB_OFFLINE=1 (no network: only what is stored),\n"
            "  https_proxy. docs/store.md.\n");
}

int ob_cmd_pull(int argc, char **argv) {
    ob_pull_params p = ob_pull_default_params();
    const char *spec = NULL;
    bar b = {.tty = isatty(STDERR_FILENO) != 0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            pull_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--force")) p.force = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) b.quiet = true;
        else if (!strcmp(a, "--models-dir") || !strcmp(a, "--revision")) {
            if (i + 1 >= argc) return ob_cli_fail(0, "pull: %s needs a value", a);
            if (!strcmp(a, "--models-dir")) p.models_dir = argv[++i];
            else p.revision = argv[++i];
        } else if (a[0] == '-') {
            return ob_cli_fail(0, "pull: unknown option '%s' (see --help)", a);
        } else if (spec) {
            return ob_cli_fail(0, "pull: one model at a time ('%s' and '%s')", spec, a);
        } else {
            spec = a;
        }
    }
    if (!spec) {
        pull_usage(stderr);
        return 2;
    }
    p.progress = on_progress;
    p.progress_user = &b;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    char path[4096];
    int rc = ob_pull(spec, &p, path, sizeof path);
    sigaction(SIGINT, &old, NULL);
    if (b.tty) fputs("\r\033[K", stderr);
    if (rc == OB_ERR_CANCELLED) {
        fprintf(stderr, "1bit pull: interrupted; `1bit pull %s` resumes where it stopped\n", spec);
        return 130;
    }
    if (rc < 0) return ob_cli_fail(rc, "pull %s", spec);
    printf("%s\n", path);
    return 0;
}

/* ---- list ---- */

static void list_usage(FILE *f) {
    fprintf(f,
            "usage: 1bit list [--models-dir DIR] [--json | --paths | --path NAME | --dir]\n"
            "  The models in the store with their sizes; each NAME works with -m.\n"
            "  --json        machine-readable\n"
            "  --paths       only the paths of complete models, one a line (first: what `make serve` uses)\n"
            "  --path NAME   the file NAME resolves to, as -m resolves it (exit 1 when none)\n"
            "  --dir         the store directory\n");
}

static int list_json(const char *dir, const ob_stored_model *m, size_t n) {
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "dir", json_string(dir));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(m[i].name));
        json_object_set_new(o, "repo", json_string(m[i].repo));
        json_object_set_new(o, "file", json_string(m[i].file));
        json_object_set_new(o, "path", json_string(m[i].path));
        json_object_set_new(o, "size", json_integer((json_int_t)m[i].size));
        json_object_set_new(o, "parts", json_integer(m[i].n_parts));
        json_object_set_new(o, "complete", json_boolean(m[i].complete));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "models", arr);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) return ob_cli_fail(0, "list: out of memory");
    puts(s);
    free(s);
    return 0;
}

int ob_cmd_list(int argc, char **argv) {
    const char *models_dir = NULL, *resolve = NULL;
    bool json = false, paths = false, only_dir = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            list_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--paths")) paths = true;
        else if (!strcmp(a, "--dir")) only_dir = true;
        else if (!strcmp(a, "--models-dir") || !strcmp(a, "--path")) {
            if (i + 1 >= argc) return ob_cli_fail(0, "list: %s needs a value", a);
            if (!strcmp(a, "--models-dir")) models_dir = argv[++i];
            else resolve = argv[++i];
        } else {
            return ob_cli_fail(0, "list: unknown argument '%s' (see --help)", a);
        }
    }
    char dir[4096];
    int rc = ob_store_dir(models_dir, dir, sizeof dir);
    if (rc < 0) return ob_cli_fail(rc, "list");
    if (only_dir) {
        printf("%s\n", dir);
        return 0;
    }
    if (resolve) {
        char path[4096];
        rc = ob_store_resolve(models_dir, resolve, path, sizeof path);
        if (rc < 0) return ob_cli_fail(rc, "list");
        printf("%s\n", path);
        return 0;
    }
    ob_stored_model *m = NULL;
    size_t n = 0;
    rc = ob_store_list(models_dir, &m, &n);
    if (rc < 0) return ob_cli_fail(rc, "list %s", dir);
    if (json) {
        rc = list_json(dir, m, n);
    } else if (paths) {
        for (size_t i = 0; i < n; i++)
            if (m[i].complete) printf("%s\n", m[i].path);
    } else if (n == 0) {
        printf("the store (%s) is empty; `1bit pull org/repo[:quant]` downloads a model\n", dir);
    } else {
        int w = 5;
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) {
            int l = (int)strlen(m[i].name);
            if (l > w) w = l;
            total += m[i].size;
        }
        if (w > 72) w = 72;
        printf("%-*s  %10s\n", w, "MODEL", "SIZE");
        for (size_t i = 0; i < n; i++) {
            char size[32], note[64] = "";
            human(m[i].size, size, sizeof size);
            if (!m[i].complete) snprintf(note, sizeof note, "  (incomplete: pulling it again finishes it)");
            else if (m[i].n_parts > 1) snprintf(note, sizeof note, "  (%d parts)", m[i].n_parts);
            printf("%-*s  %10s%s\n", w, m[i].name, size, note);
        }
        char tot[32];
        human(total, tot, sizeof tot);
        printf("%zu model%s, %s, in %s\n", n, n == 1 ? "" : "s", tot, dir);
    }
    ob_store_list_free(m, n);
    return rc < 0 ? 1 : rc;
}
