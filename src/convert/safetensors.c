/*
 * safetensors.c - parse and validate safetensors headers; open the shards of
 * a model folder as one set of tensors.
 *
 * The JSON header is parsed with jansson (duplicate keys rejected, so a name
 * cannot silently shadow another). Every number taken from it is checked
 * before use; the only memory read from the data section is through the
 * ranges validated here.
 */
#include "safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/arena.h"
#include "../core/mem.h"
#include "../core/mmap.h"
#include "../core/status.h"

struct ob_safetensors {
    ob_mmap map;          /* empty when opened from memory */
    char *label;          /* path or caller's label, for messages */
    ob_arena arena;       /* tensor names */
    ob_st_tensor *t;      /* [n] in data-offset order */
    const ob_st_tensor **by_name; /* [n] sorted by name, for lookups */
    int64_t n;
};

static const struct {
    const char *name;
    size_t size;
} g_dtypes[OB_ST_DTYPE_COUNT] = {
    [OB_ST_F32] = {"F32", 4},        [OB_ST_F16] = {"F16", 2},     [OB_ST_BF16] = {"BF16", 2},
    [OB_ST_F64] = {"F64", 8},        [OB_ST_I64] = {"I64", 8},     [OB_ST_I32] = {"I32", 4},
    [OB_ST_I16] = {"I16", 2},        [OB_ST_I8] = {"I8", 1},       [OB_ST_U64] = {"U64", 8},
    [OB_ST_U32] = {"U32", 4},        [OB_ST_U16] = {"U16", 2},     [OB_ST_U8] = {"U8", 1},
    [OB_ST_BOOL] = {"BOOL", 1},      [OB_ST_F8_E4M3] = {"F8_E4M3", 1},
    [OB_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *ob_st_dtype_name(ob_st_dtype t) {
    return (unsigned)t < OB_ST_DTYPE_COUNT ? g_dtypes[t].name : "?";
}

size_t ob_st_dtype_size(ob_st_dtype t) {
    return (unsigned)t < OB_ST_DTYPE_COUNT ? g_dtypes[t].size : 0;
}

static int dtype_from_name(const char *s) {
    for (int i = 0; i < OB_ST_DTYPE_COUNT; i++)
        if (strcmp(g_dtypes[i].name, s) == 0) return i;
    return -1;
}

static uint64_t read_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int cmp_by_name(const void *a, const void *b) {
    const ob_st_tensor *x = *(const ob_st_tensor *const *)a, *y = *(const ob_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_by_offset(const void *a, const void *b) {
    const ob_st_tensor *x = a, *y = b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* A non-negative JSON integer, or -1. */
static int64_t json_nonneg(const json_t *v) {
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    return x < 0 ? -1 : (int64_t)x;
}

/* Fill `t` from one header entry. `base`/`dsize` are the data section. */
static int parse_entry(ob_safetensors *st, const char *name, json_t *e, const unsigned char *base, size_t dsize,
                       ob_st_tensor *t) {
    const char *L = st->label;
    if (!*name) return ob_err(OB_ERR_FORMAT, "%s: a tensor has an empty name", L);
    if (!json_is_object(e)) return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", L, name);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd)) return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': 'dtype' missing or not a string", L, name);
    int dt = dtype_from_name(json_string_value(jd));
    if (dt < 0)
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", L, name, json_string_value(jd));
    if (!json_is_array(js)) return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': 'shape' missing or not an array", L, name);
    size_t nd = json_array_size(js);
    if (nd > OB_ST_MAX_DIMS)
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': %zu dimensions (at most %d)", L, name, nd, OB_ST_MAX_DIMS);
    int64_t nel = 1;
    for (size_t d = 0; d < nd; d++) {
        int64_t x = json_nonneg(json_array_get(js, d));
        if (x < 0)
            return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer", L, name, d);
        if (__builtin_mul_overflow(nel, x, &nel))
            return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': element count overflows", L, name);
        t->shape[d] = x;
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': 'data_offsets' must be [begin, end]", L, name);
    int64_t b = json_nonneg(json_array_get(jo, 0)), en = json_nonneg(json_array_get(jo, 1));
    if (b < 0 || en < 0)
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", L, name);
    if (b > en)
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] end before they begin", L, name,
                      (long long)b, (long long)en);
    if ((uint64_t)en > (uint64_t)dsize)
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] run past the data section (%zu bytes)",
                      L, name, (long long)b, (long long)en, dsize);
    int64_t nbytes;
    if (__builtin_mul_overflow(nel, (int64_t)g_dtypes[dt].size, &nbytes))
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': byte size overflows", L, name);
    if (nbytes != en - b)
        return ob_err(OB_ERR_FORMAT, "%s: tensor '%s': %lld elements of %s need %lld bytes but data_offsets span %lld",
                      L, name, (long long)nel, g_dtypes[dt].name, (long long)nbytes, (long long)(en - b));
    t->name = ob_arena_strndup(&st->arena, name, strlen(name));
    if (!t->name) return ob_err(OB_ERR_OOM, "%s: tensor names", L);
    t->dtype = (ob_st_dtype)dt;
    t->n_dims = (int)nd;
    t->n_elements = nel;
    t->data = base + b;
    t->nbytes = (size_t)nbytes;
    t->file = st->label;
    return 0;
}

static int parse(ob_safetensors *st, const unsigned char *data, size_t size) {
    const char *L = st->label;
    if (size < 8) return ob_err(OB_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors header", L, size);
    uint64_t hlen = read_le64(data);
    if (hlen > size - 8)
        return ob_err(OB_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)", L,
                      (unsigned long long)hlen, size);
    if (hlen > OB_ST_MAX_HEADER)
        return ob_err(OB_ERR_FORMAT, "%s: header length %llu is over the format's limit of %u", L,
                      (unsigned long long)hlen, OB_ST_MAX_HEADER);
    if (hlen < 2) return ob_err(OB_ERR_FORMAT, "%s: header length %llu is too short", L, (unsigned long long)hlen);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ob_err(OB_ERR_FORMAT, "%s: header is not valid JSON: %s (line %d, column %d)", L, jerr.text,
                      jerr.line, jerr.column);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = ob_err(OB_ERR_FORMAT, "%s: header is not a JSON object", L);
        goto done;
    }
    const unsigned char *base = data + 8 + hlen;
    size_t dsize = size - 8 - (size_t)hlen;
    size_t n = json_object_size(root);
    st->t = ob_calloc(n ? n : 1, sizeof *st->t);
    st->by_name = ob_calloc(n ? n : 1, sizeof *st->by_name);
    if (!st->t || !st->by_name) {
        rc = ob_err(OB_ERR_OOM, "%s: %zu tensor entries", L, n);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                rc = ob_err(OB_ERR_FORMAT, "%s: __metadata__ is not an object", L);
                goto done;
            }
            continue;
        }
        rc = parse_entry(st, key, val, base, dsize, &st->t[st->n]);
        if (rc < 0) goto done;
        st->n++;
    }
    qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_by_offset);
    for (int64_t i = 0; i < st->n; i++) st->by_name[i] = &st->t[i];
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_by_name);
done:
    json_decref(root);
    return rc;
}

static ob_safetensors *alloc_st(const char *label) {
    ob_safetensors *st = ob_calloc(1, sizeof *st);
    if (!st) return NULL;
    ob_arena_init(&st->arena, 16 * 1024, 0);
    st->label = ob_strdup(label);
    if (!st->label) {
        ob_free(st);
        return NULL;
    }
    return st;
}

int ob_safetensors_open_memory(const void *data, size_t size, const char *label, ob_safetensors **out) {
    *out = NULL;
    ob_safetensors *st = alloc_st(label ? label : "(memory)");
    if (!st) return ob_err(OB_ERR_OOM, "safetensors");
    int rc = parse(st, data, size);
    if (rc < 0) {
        ob_safetensors_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

int ob_safetensors_open(const char *path, ob_safetensors **out) {
    *out = NULL;
    ob_safetensors *st = alloc_st(path);
    if (!st) return ob_err(OB_ERR_OOM, "safetensors");
    int rc = ob_mmap_open(path, &st->map);
    if (rc == 0) rc = parse(st, st->map.data, st->map.size);
    if (rc < 0) {
        ob_safetensors_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

void ob_safetensors_free(ob_safetensors *st) {
    if (!st) return;
    ob_mmap_close(&st->map);
    ob_arena_free(&st->arena);
    ob_free(st->t);
    ob_free(st->by_name);
    ob_free(st->label);
    ob_free(st);
}

int64_t ob_safetensors_n_tensors(const ob_safetensors *st) { return st->n; }

const ob_st_tensor *ob_safetensors_tensor_at(const ob_safetensors *st, int64_t i) {
    return i >= 0 && i < st->n ? &st->t[i] : NULL;
}

static const ob_st_tensor *find_sorted(const ob_st_tensor *const *v, int64_t n, const char *name) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid]->name, name);
        if (c == 0) return v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const ob_st_tensor *ob_safetensors_find(const ob_safetensors *st, const char *name) {
    return find_sorted(st->by_name, st->n, name);
}

/* ---- a model folder ---- */

struct ob_st_set {
    ob_safetensors **files;
    int n_files;
    const ob_st_tensor **all; /* [n] sorted by name */
    int64_t n;
};

void ob_st_set_free(ob_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) ob_safetensors_free(s->files[i]);
    ob_free(s->files);
    ob_free(s->all);
    ob_free(s);
}

int64_t ob_st_set_n_tensors(const ob_st_set *s) { return s->n; }
int ob_st_set_n_files(const ob_st_set *s) { return s->n_files; }

const ob_st_tensor *ob_st_set_tensor_at(const ob_st_set *s, int64_t i) {
    return i >= 0 && i < s->n ? s->all[i] : NULL;
}

const ob_st_tensor *ob_st_set_find(const ob_st_set *s, const char *name) {
    return find_sorted(s->all, s->n, name);
}

static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = ob_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int add_file(ob_st_set *s, const char *dir, const char *name) {
    char *p = join_path(dir, name);
    if (!p) return ob_err(OB_ERR_OOM, "path");
    ob_safetensors **nf = ob_realloc(s->files, (size_t)(s->n_files + 1) * sizeof *nf);
    if (!nf) {
        ob_free(p);
        return ob_err(OB_ERR_OOM, "safetensors file list");
    }
    s->files = nf;
    ob_safetensors *st;
    int rc = ob_safetensors_open(p, &st);
    ob_free(p);
    if (rc < 0) return rc;
    s->files[s->n_files++] = st;
    return 0;
}

/* Merge every file's tensors into one sorted list; a name in two files is an error. */
static int build_index(ob_st_set *s) {
    int64_t total = 0;
    for (int i = 0; i < s->n_files; i++) total += s->files[i]->n;
    s->all = ob_calloc(total ? (size_t)total : 1, sizeof *s->all);
    if (!s->all) return ob_err(OB_ERR_OOM, "tensor index of %lld entries", (long long)total);
    for (int i = 0; i < s->n_files; i++)
        for (int64_t j = 0; j < s->files[i]->n; j++) s->all[s->n++] = &s->files[i]->t[j];
    qsort(s->all, (size_t)s->n, sizeof *s->all, cmp_by_name);
    for (int64_t i = 1; i < s->n; i++)
        if (strcmp(s->all[i - 1]->name, s->all[i]->name) == 0)
            return ob_err(OB_ERR_FORMAT, "tensor '%s' is in both %s and %s", s->all[i]->name, s->all[i - 1]->file,
                          s->all[i]->file);
    return 0;
}

/* A shard name from the index must name a file inside the folder. */
static int shard_name_ok(const char *f) {
    return *f && !strchr(f, '/') && strcmp(f, ".") != 0 && strcmp(f, "..") != 0;
}

static int open_from_index(ob_st_set *s, const char *dir, const char *index_path) {
    json_error_t jerr;
    /* total_size and the like are never read: integers as reals, so none is too big */
    json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
    if (!root)
        return ob_err(OB_ERR_FORMAT, "%s: %s (line %d, column %d)", index_path, jerr.text, jerr.line, jerr.column);
    int rc = 0;
    json_t *wm = json_object_get(root, "weight_map");
    const char *key;
    json_t *val;
    if (!json_is_object(wm)) {
        rc = ob_err(OB_ERR_FORMAT, "%s: 'weight_map' missing or not an object", index_path);
        goto done;
    }
    /* Open each distinct shard once, in the order first named. */
    json_object_foreach(wm, key, val) {
        if (!json_is_string(val) || !shard_name_ok(json_string_value(val))) {
            rc = ob_err(OB_ERR_FORMAT, "%s: weight_map['%s'] is not a file name in the folder", index_path, key);
            goto done;
        }
        const char *f = json_string_value(val);
        int seen = 0;
        for (int i = 0; i < s->n_files && !seen; i++) {
            const char *lab = s->files[i]->label, *slash = strrchr(lab, '/');
            seen = strcmp(slash ? slash + 1 : lab, f) == 0;
        }
        if (!seen && (rc = add_file(s, dir, f)) < 0) goto done;
    }
    if ((rc = build_index(s)) < 0) goto done;
    json_object_foreach(wm, key, val) {
        const char *f = json_string_value(val);
        const ob_st_tensor *t = ob_st_set_find(s, key);
        const char *slash = t ? strrchr(t->file, '/') : NULL;
        if (!t || strcmp(slash ? slash + 1 : t->file, f) != 0) {
            rc = ob_err(OB_ERR_FORMAT, "%s: tensor '%s' is listed in %s, which does not hold it", index_path, key, f);
            goto done;
        }
    }
    if ((size_t)s->n != json_object_size(wm)) {
        for (int64_t i = 0; i < s->n; i++)
            if (!json_object_get(wm, s->all[i]->name)) {
                rc = ob_err(OB_ERR_FORMAT, "%s holds tensor '%s', which %s does not list", s->all[i]->file,
                            s->all[i]->name, index_path);
                goto done;
            }
    }
done:
    json_decref(root);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every model*.safetensors in the folder, in name order (shards without an index). */
static int open_by_glob(ob_st_set *s, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return ob_err(OB_ERR_IO, "%s: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 17 || strncmp(e->d_name, "model", 5) != 0 || strcmp(e->d_name + len - 12, ".safetensors") != 0)
            continue;
        char **nn = ob_realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = ob_strdup(e->d_name))) {
            if (nn) names = nn;
            rc = ob_err(OB_ERR_OOM, "file list");
            break;
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = ob_err(OB_ERR_NOT_FOUND, "%s: no model.safetensors, model.safetensors.index.json or model*.safetensors",
                    dir);
    if (rc == 0) {
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        for (int i = 0; i < n && rc == 0; i++) rc = add_file(s, dir, names[i]);
    }
    for (int i = 0; i < n; i++) ob_free(names[i]);
    ob_free(names);
    if (rc == 0) rc = build_index(s);
    return rc;
}

int ob_st_set_open_dir(const char *dir, ob_st_set **out) {
    *out = NULL;
    ob_st_set *s = ob_calloc(1, sizeof *s);
    if (!s) return ob_err(OB_ERR_OOM, "safetensors set");
    int rc;
    char *index = join_path(dir, "model.safetensors.index.json");
    char *single = join_path(dir, "model.safetensors");
    if (!index || !single)
        rc = ob_err(OB_ERR_OOM, "path");
    else if (is_file(index))
        rc = open_from_index(s, dir, index);
    else if (is_file(single)) {
        rc = add_file(s, dir, "model.safetensors");
        if (rc == 0) rc = build_index(s);
    } else
        rc = open_by_glob(s, dir);
    ob_free(index);
    ob_free(single);
    if (rc < 0) {
        ob_st_set_free(s);
        return rc;
    }
    *out = s;
    return 0;
}
