/*
 * info.c - `1bit info FILE [--json] [--keys]`: what is inside a GGUF file.
 *
 * Reads only metadata and tensor infos (the data stays unread in the
 * mapping), so it is instant even on a 100 GB model.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../core/status.h"
#include "../gguf/gguf.h"
#include "cli.h"

static void shape_str(const ob_gguf_tensor *t, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->n_dims && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, d ? " x " : "", t->ne[d]);
}

static void human_bytes(uint64_t b, char *buf, size_t size) {
    if (b >= (1ull << 30))
        snprintf(buf, size, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, size, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= 1024)
        snprintf(buf, size, "%.2f KiB", (double)b / 1024);
    else
        snprintf(buf, size, "%" PRIu64 " B", b);
}

typedef struct totals {
    int64_t params;
    uint64_t bytes;
    int64_t count_by_type[OB_TYPE_COUNT];
    uint64_t bytes_by_type[OB_TYPE_COUNT];
} totals;

static void compute_totals(const ob_gguf *g, totals *t) {
    memset(t, 0, sizeof *t);
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *x = ob_gguf_tensor_at(g, i);
        t->params += ob_gguf_tensor_nelements(x);
        t->bytes += x->nbytes;
        t->count_by_type[x->type]++;
        t->bytes_by_type[x->type] += x->nbytes;
    }
}

/* Token string for an id from tokenizer.ggml.tokens, or NULL. */
static const char *token_text(const ob_gguf *g, uint32_t id) {
    const ob_gguf_array *a;
    if (ob_gguf_get_arr(g, "tokenizer.ggml.tokens", OB_GGUF_STRING, &a) < 0 || id >= a->n) return NULL;
    return ((const ob_gguf_str *)a->data)[id].s;
}

static void print_text(const ob_gguf *g, const char *path, bool keys) {
    char buf[4096], hb[32];
    totals tot;
    compute_totals(g, &tot);
    human_bytes(ob_gguf_file_size(g), hb, sizeof hb);
    printf("file:          %s\n", path);
    printf("format:        GGUF v%u, alignment %u, %d file%s, %s\n", ob_gguf_version(g), ob_gguf_alignment(g),
           ob_gguf_n_splits(g), ob_gguf_n_splits(g) > 1 ? "s" : "", hb);
    const char *arch = NULL, *name = NULL;
    ob_gguf_get_str(g, "general.architecture", &arch);
    ob_gguf_get_str(g, "general.name", &name);
    ob_err_clear();
    printf("architecture:  %s\n", arch ? arch : "(none)");
    if (name) printf("name:          %s\n", name);
    const char *ftype_keys[] = {"general.file_type", "general.quantization_version"};
    for (size_t i = 0; i < 2; i++) {
        const ob_gguf_value *v = ob_gguf_get(g, ftype_keys[i]);
        if (v) printf("%-14s %s\n", strchr(ftype_keys[i], '.') + 1, ob_gguf_value_to_string(v, buf, sizeof buf, 8));
    }

    if (arch) {
        size_t al = strlen(arch);
        printf("hparams:\n");
        for (int64_t i = 0; i < ob_gguf_n_kv(g); i++) {
            const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
            if (strncmp(kv->key, arch, al) == 0 && kv->key[al] == '.')
                printf("  %-40s %s\n", kv->key + al + 1, ob_gguf_value_to_string(&kv->value, buf, sizeof buf, 8));
        }
    }

    const char *tok_model = NULL, *pre = NULL;
    ob_gguf_get_str(g, "tokenizer.ggml.model", &tok_model);
    ob_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    ob_err_clear();
    if (tok_model) {
        const ob_gguf_array *toks = NULL, *merges = NULL;
        ob_gguf_get_arr(g, "tokenizer.ggml.tokens", OB_GGUF_STRING, &toks);
        ob_gguf_get_arr(g, "tokenizer.ggml.merges", OB_GGUF_STRING, &merges);
        ob_err_clear();
        printf("tokenizer:     %s%s%s, %" PRIu64 " tokens", tok_model, pre ? ", pre " : "", pre ? pre : "",
               toks ? toks->n : 0);
        if (merges) printf(", %" PRIu64 " merges", merges->n);
        printf("\n");
        const char *ids[] = {"bos", "eos", "eot", "unknown", "padding", "seperator", "mask"};
        for (size_t i = 0; i < OB_ARRAY_LEN(ids); i++) {
            char key[64];
            uint32_t id;
            snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", ids[i]);
            if (ob_gguf_get_u32(g, key, &id) == 0 && id != UINT32_MAX) { /* -1: "none" */
                const char *tt = token_text(g, id);
                printf("  %-12s %u", ids[i], id);
                if (tt) {
                    ob_gguf_value sv = {.type = OB_GGUF_STRING, .v.str = {tt, strlen(tt)}};
                    printf(" %s", ob_gguf_value_to_string(&sv, buf, sizeof buf, 1));
                }
                printf("\n");
            }
        }
        ob_err_clear();
        const char *tmpl = NULL;
        if (ob_gguf_get_str(g, "tokenizer.chat_template", &tmpl) == 0)
            printf("  chat template: %zu bytes\n", strlen(tmpl));
        ob_err_clear();
    }

    if (keys) {
        printf("metadata (%" PRId64 " keys):\n", ob_gguf_n_kv(g));
        for (int64_t i = 0; i < ob_gguf_n_kv(g); i++) {
            const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
            const char *tn = ob_gguf_vtype_name(kv->value.type);
            char tbuf[32];
            if (kv->value.type == OB_GGUF_ARRAY) {
                snprintf(tbuf, sizeof tbuf, "%s[%" PRIu64 "]", ob_gguf_vtype_name(kv->value.v.arr.type),
                         kv->value.v.arr.n);
                tn = tbuf;
            }
            printf("  %-44s %-14s %s\n", kv->key, tn, ob_gguf_value_to_string(&kv->value, buf, sizeof buf, 8));
        }
    }

    printf("tensors (%" PRId64 "):\n", ob_gguf_n_tensors(g));
    printf("  %-48s %-8s %-24s %12s\n", "name", "type", "shape", "bytes");
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        char shape[96];
        shape_str(t, shape, sizeof shape);
        printf("  %-48s %-8s %-24s %12zu\n", t->name, ob_type_name(t->type), shape, t->nbytes);
    }
    human_bytes(tot.bytes, hb, sizeof hb);
    printf("totals:        %" PRId64 " parameters, %s of tensor data, %.3f bits per weight\n", tot.params, hb,
           tot.params ? (double)tot.bytes * 8.0 / (double)tot.params : 0.0);
    printf("by type:      ");
    for (int ty = 0; ty < OB_TYPE_COUNT; ty++)
        if (tot.count_by_type[ty]) printf(" %s:%" PRId64, ob_type_name(ty), tot.count_by_type[ty]);
    printf("\n");
}

static json_t *value_json(const ob_gguf_value *v, int depth) {
    switch (v->type) {
    case OB_GGUF_U8: case OB_GGUF_U16: case OB_GGUF_U32: case OB_GGUF_U64:
        return v->v.u > (uint64_t)INT64_MAX ? json_real((double)v->v.u) : json_integer((json_int_t)v->v.u);
    case OB_GGUF_I8: case OB_GGUF_I16: case OB_GGUF_I32: case OB_GGUF_I64: return json_integer(v->v.i);
    case OB_GGUF_F32: case OB_GGUF_F64: return json_real(v->v.f);
    case OB_GGUF_BOOL: return json_boolean(v->v.u);
    case OB_GGUF_STRING: return json_stringn_nocheck(v->v.str.s, (size_t)v->v.str.len);
    case OB_GGUF_ARRAY: {
        const ob_gguf_array *a = &v->v.arr;
        /* Long arrays (vocabularies) are summarised unless small. */
        if (a->n > 64 || depth > 4) {
            return json_pack("{s:s, s:s, s:I}", "type", "array", "element_type", ob_gguf_vtype_name(a->type),
                             "length", (json_int_t)a->n);
        }
        json_t *arr = json_array();
        for (uint64_t i = 0; i < a->n; i++) {
            ob_gguf_value e;
            memset(&e, 0, sizeof e);
            e.type = a->type;
            const char *p = a->data;
            switch (a->type) {
            case OB_GGUF_U8: e.v.u = ((const uint8_t *)a->data)[i]; break;
            case OB_GGUF_I8: e.v.i = ((const int8_t *)a->data)[i]; break;
            case OB_GGUF_BOOL: e.v.u = ((const uint8_t *)a->data)[i]; break;
            case OB_GGUF_U16: e.v.u = ((const uint16_t *)a->data)[i]; break;
            case OB_GGUF_I16: e.v.i = ((const int16_t *)a->data)[i]; break;
            case OB_GGUF_U32: e.v.u = ((const uint32_t *)a->data)[i]; break;
            case OB_GGUF_I32: e.v.i = ((const int32_t *)a->data)[i]; break;
            case OB_GGUF_F32: e.v.f = ((const float *)a->data)[i]; break;
            case OB_GGUF_U64: e.v.u = ((const uint64_t *)a->data)[i]; break;
            case OB_GGUF_I64: e.v.i = ((const int64_t *)a->data)[i]; break;
            case OB_GGUF_F64: e.v.f = ((const double *)a->data)[i]; break;
            case OB_GGUF_STRING: e.v.str = ((const ob_gguf_str *)a->data)[i]; break;
            case OB_GGUF_ARRAY: e = ((const ob_gguf_value *)(const void *)p)[i]; break;
            default: break;
            }
            json_array_append_new(arr, value_json(&e, depth + 1));
        }
        return arr;
    }
    default: return json_null();
    }
}

static int print_json(const ob_gguf *g, const char *path) {
    totals tot;
    compute_totals(g, &tot);
    json_t *root = json_object();
    json_object_set_new(root, "file", json_string(path));
    json_object_set_new(root, "gguf_version", json_integer(ob_gguf_version(g)));
    json_object_set_new(root, "alignment", json_integer(ob_gguf_alignment(g)));
    json_object_set_new(root, "splits", json_integer(ob_gguf_n_splits(g)));
    json_object_set_new(root, "file_size", json_integer((json_int_t)ob_gguf_file_size(g)));
    const char *arch = NULL;
    ob_gguf_get_str(g, "general.architecture", &arch);
    ob_err_clear();
    json_object_set_new(root, "architecture", arch ? json_string(arch) : json_null());
    json_t *meta = json_object();
    for (int64_t i = 0; i < ob_gguf_n_kv(g); i++) {
        const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        json_object_set_new(meta, kv->key, value_json(&kv->value, 0));
    }
    json_object_set_new(root, "metadata", meta);
    json_t *tensors = json_array();
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->ne[d]));
        json_array_append_new(tensors, json_pack("{s:s, s:s, s:o, s:I, s:I}", "name", t->name, "type",
                                                 ob_type_name(t->type), "shape", shape, "offset",
                                                 (json_int_t)t->offset, "bytes", (json_int_t)t->nbytes));
    }
    json_object_set_new(root, "tensors", tensors);
    json_object_set_new(root, "totals",
                        json_pack("{s:I, s:I, s:I, s:f}", "tensors", (json_int_t)ob_gguf_n_tensors(g), "parameters",
                                  (json_int_t)tot.params, "bytes", (json_int_t)tot.bytes, "bits_per_weight",
                                  tot.params ? (double)tot.bytes * 8.0 / (double)tot.params : 0.0));
    int rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    printf("\n");
    json_decref(root);
    return rc == 0 ? 0 : ob_cli_fail(0, "could not write JSON");
}

int ob_cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool json = false, keys = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--keys"))
            keys = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: 1bit info FILE.gguf [--json] [--keys]\n"
                   "  --json  machine-readable output (long arrays summarised)\n"
                   "  --keys  list every metadata key with its type and value\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1])
            return ob_cli_fail(0, "info: unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return ob_cli_fail(0, "info: more than one file given ('%s')", argv[i]);
    }
    if (!path) return ob_cli_fail(0, "info: no file given (usage: 1bit info FILE.gguf [--json] [--keys])");
    ob_gguf *g;
    int rc = ob_gguf_open(path, &g);
    if (rc < 0) return ob_cli_fail(rc, "info");
    int ret = 0;
    if (json)
        ret = print_json(g, path);
    else
        print_text(g, path, keys);
    ob_gguf_free(g);
    return ret;
}
