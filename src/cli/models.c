/*
 * models.c - `1bit models`: the registry's table of architectures
 * (src/model/arch_info.h) as text, JSON (--json) or the markdown that makes
 * up the table in docs/models.md (--markdown; tests/test_models_registry.c
 * checks the doc is byte-identical to it).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/arch_info.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: 1bit models [--json | --markdown]\n\n"
               "Every architecture the registry knows: verified (logits checked against a reference in\n"
               "`make test`, with what, how closely and on which backends), mapped (loads, not yet\n"
               "checked) or missing (not loaded yet).\n\n"
               "  --json      one object per architecture\n"
               "  --markdown  the table of docs/models.md\n");
}

static const char *gguf_of(const ob_arch_info *a) {
    return a->gguf ? a->gguf : a->name;
}

static void backends_str(unsigned b, char *buf, size_t size) {
    snprintf(buf, size, "%s%s%s", b & OB_ARCH_ON_CPU ? "CPU" : "", (b & OB_ARCH_ON_CPU) && (b & OB_ARCH_ON_CUDA) ? ", " : "",
             b & OB_ARCH_ON_CUDA ? "CUDA" : "");
    if (!buf[0]) snprintf(buf, size, "-");
}

static void print_text(const ob_arch_info *rows, size_t n) {
    printf("%-11s %-9s %-10s %-22s %s\n", "arch", "status", "backends", "F32 rel err (bound)", "checked against / note");
    for (size_t i = 0; i < n; i++) {
        const ob_arch_info *a = &rows[i];
        char on[32], err[48];
        backends_str(a->backends, on, sizeof on);
        if (a->status == OB_ARCH_VERIFIED)
            snprintf(err, sizeof err, "%.3g (< %.0e)", a->f32_worst, a->f32_bound);
        else
            snprintf(err, sizeof err, "-");
        printf("%-11s %-9s %-10s %-22s %s\n", a->name, ob_arch_status_name(a->status), on, err,
               a->status == OB_ARCH_VERIFIED ? a->reference : a->note);
        if (a->gguf) printf("%-11s   (general.architecture '%s')\n", "", a->gguf);
        if (a->cases) printf("%-11s   cases: %s\n", "", a->cases);
    }
    size_t count[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) count[rows[i].status]++;
    printf("\n%zu verified, %zu mapped, %zu missing (docs/models.md says how they were checked)\n", count[0], count[1],
           count[2]);
}

static int print_json(const ob_arch_info *rows, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const ob_arch_info *a = &rows[i];
        json_t *o = json_object(), *cases = json_array(), *on = json_array();
        if (a->cases) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", a->cases);
            for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
                json_array_append_new(cases, json_string(t));
        }
        if (a->backends & OB_ARCH_ON_CPU) json_array_append_new(on, json_string("cpu"));
        if (a->backends & OB_ARCH_ON_CUDA) json_array_append_new(on, json_string("cuda"));
        json_object_set_new(o, "name", json_string(a->name));
        json_object_set_new(o, "gguf_architecture", json_string(gguf_of(a)));
        json_object_set_new(o, "covers", json_string(a->covers));
        json_object_set_new(o, "status", json_string(ob_arch_status_name(a->status)));
        json_object_set_new(o, "reference", a->reference ? json_string(a->reference) : json_null());
        json_object_set_new(o, "cases", cases);
        if (a->status == OB_ARCH_VERIFIED) {
            json_t *f = json_object();
            json_object_set_new(f, "max_rel_error_bound", json_real(a->f32_bound));
            json_object_set_new(f, "max_rel_error_measured", json_real(a->f32_worst));
            json_object_set_new(f, "top1", json_integer(a->top1));
            json_object_set_new(f, "n_prompt", json_integer(a->n_prompt));
            json_object_set_new(f, "greedy", json_integer(a->greedy));
            json_object_set_new(f, "n_gen", json_integer(a->n_gen));
            json_object_set_new(o, "f32", f);
        }
        json_object_set_new(o, "backends", on);
        json_object_set_new(o, "note", json_string(a->note));
        json_array_append_new(arr, o);
    }
    char *s = arr ? json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(3)) : NULL;
    json_decref(arr);
    if (!s) return ob_cli_fail(0, "out of memory");
    puts(s);
    free(s);
    return 0;
}

/* A table cell: `|` would end it, so it is escaped. */
static void cell(const char *s) {
    fputs("| ", stdout);
    for (; *s; s++) {
        if (*s == '|') putchar('\\');
        putchar(*s);
    }
    putchar(' ');
}

static void print_markdown(const ob_arch_info *rows, size_t n) {
    printf("| GGUF arch | covers | status | checked against | fixture cases (`tests/data/models`) "
           "| F32 max rel. error, measured (bound) | top-1 | greedy | backends | notes |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        const ob_arch_info *a = &rows[i];
        char buf[512], on[32];
        if (a->gguf)
            snprintf(buf, sizeof buf, "`%s` (`%s`)", a->name, a->gguf);
        else
            snprintf(buf, sizeof buf, "`%s`", a->name);
        cell(buf);
        cell(a->covers);
        cell(ob_arch_status_name(a->status));
        cell(a->reference ? a->reference : "-");
        buf[0] = 0;
        if (a->cases) {
            char list[512];
            size_t k = 0;
            snprintf(list, sizeof list, "%s", a->cases);
            for (char *save = NULL, *t = strtok_r(list, " ", &save); t && k < sizeof buf; t = strtok_r(NULL, " ", &save))
                k += (size_t)snprintf(buf + k, sizeof buf - k, "%s`%s`", k ? " " : "", t);
        }
        cell(buf[0] ? buf : "-");
        if (a->status == OB_ARCH_VERIFIED) {
            snprintf(buf, sizeof buf, "%.3g (< %.0e)", a->f32_worst, a->f32_bound);
            cell(buf);
            /* encoders (n_gen 0) give hidden states: no top-1, no greedy tokens */
            snprintf(buf, sizeof buf, "%d/%d", a->top1, a->n_prompt);
            cell(a->n_gen ? buf : "-");
            snprintf(buf, sizeof buf, "%d/%d", a->greedy, a->n_gen);
            cell(a->n_gen ? buf : "-");
        } else {
            cell("-");
            cell("-");
            cell("-");
        }
        backends_str(a->backends, on, sizeof on);
        cell(on);
        cell(a->note);
        puts("|");
    }
}

int ob_cmd_models(int argc, char **argv) {
    enum { TEXT, JSON, MARKDOWN } fmt = TEXT;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            fmt = JSON;
        else if (!strcmp(argv[i], "--markdown"))
            fmt = MARKDOWN;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return ob_cli_fail(0, "models: unknown option '%s'", argv[i]);
        }
    }
    size_t n = 0;
    const ob_arch_info *rows = ob_arch_infos(&n);
    if (fmt == JSON) return print_json(rows, n);
    if (fmt == MARKDOWN)
        print_markdown(rows, n);
    else
        print_text(rows, n);
    return 0;
}
