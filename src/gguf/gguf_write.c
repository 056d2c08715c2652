/*
 * gguf_write.c - the GGUF writer (always writes version 3).
 *
 * Metadata values are deep-copied into the writer's arena; tensor data is
 * only referenced and read when the file is written. Tensors are laid out in
 * the order added, each starting at a multiple of the alignment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "gguf.h"

typedef struct wtensor {
    const char *name;
    ob_type type;
    int n_dims;
    int64_t ne[OB_GGUF_MAX_DIMS];
    size_t nbytes;
    const void *data;
} wtensor;

struct ob_gguf_writer {
    ob_arena arena;
    ob_gguf_kv *kv;
    int64_t n_kv, cap_kv;
    wtensor *t;
    int64_t n_t, cap_t;
};

int ob_gguf_writer_create(ob_gguf_writer **out) {
    *out = NULL;
    ob_gguf_writer *w = ob_calloc(1, sizeof *w);
    if (!w) return ob_err(OB_ERR_OOM, "gguf writer");
    ob_arena_init(&w->arena, 64 * 1024, 0);
    *out = w;
    return 0;
}

void ob_gguf_writer_free(ob_gguf_writer *w) {
    if (!w) return;
    ob_arena_free(&w->arena);
    ob_free(w->kv);
    ob_free(w->t);
    ob_free(w);
}

static size_t scalar_size(int t) {
    switch (t) {
    case OB_GGUF_U8: case OB_GGUF_I8: case OB_GGUF_BOOL: return 1;
    case OB_GGUF_U16: case OB_GGUF_I16: return 2;
    case OB_GGUF_U32: case OB_GGUF_I32: case OB_GGUF_F32: return 4;
    case OB_GGUF_U64: case OB_GGUF_I64: case OB_GGUF_F64: return 8;
    default: return 0;
    }
}

static int copy_value(ob_arena *a, const ob_gguf_value *src, ob_gguf_value *dst, int depth) {
    *dst = *src;
    if (src->type >= OB_GGUF_VTYPE_COUNT) return ob_err(OB_ERR_INVALID_ARG, "value type %d", (int)src->type);
    if (src->type == OB_GGUF_STRING) {
        char *s = ob_arena_strndup(a, src->v.str.s, (size_t)src->v.str.len);
        if (!s) return ob_err(OB_ERR_OOM, "gguf writer string");
        dst->v.str.s = s;
        return 0;
    }
    if (src->type != OB_GGUF_ARRAY) return 0;
    if (depth >= OB_GGUF_MAX_ARRAY_DEPTH) return ob_err(OB_ERR_INVALID_ARG, "arrays nested too deep");
    const ob_gguf_array *sa = &src->v.arr;
    ob_gguf_array *da = &dst->v.arr;
    size_t es = scalar_size(sa->type);
    if (es) {
        size_t n = ob_mul_size((size_t)sa->n, es);
        void *d = ob_arena_alloc(a, n, 8);
        if (!d) return ob_err(OB_ERR_OOM, "gguf writer array");
        if (n) memcpy(d, sa->data, n);
        da->data = d;
        return 0;
    }
    if (sa->type == OB_GGUF_STRING) {
        ob_gguf_str *d = ob_arena_alloc(a, ob_mul_size((size_t)sa->n, sizeof *d), 8);
        if (!d) return ob_err(OB_ERR_OOM, "gguf writer array");
        const ob_gguf_str *s = sa->data;
        for (uint64_t i = 0; i < sa->n; i++) {
            d[i].len = s[i].len;
            d[i].s = ob_arena_strndup(a, s[i].s, (size_t)s[i].len);
            if (!d[i].s) return ob_err(OB_ERR_OOM, "gguf writer array");
        }
        da->data = d;
        return 0;
    }
    if (sa->type == OB_GGUF_ARRAY) {
        ob_gguf_value *d = ob_arena_alloc(a, ob_mul_size((size_t)sa->n, sizeof *d), 8);
        if (!d) return ob_err(OB_ERR_OOM, "gguf writer array");
        const ob_gguf_value *s = sa->data;
        for (uint64_t i = 0; i < sa->n; i++) OB_TRY(copy_value(a, &s[i], &d[i], depth + 1));
        da->data = d;
        return 0;
    }
    return ob_err(OB_ERR_INVALID_ARG, "array element type %d", (int)sa->type);
}

int ob_gguf_writer_set_value(ob_gguf_writer *w, const char *key, const ob_gguf_value *v) {
    if (!key || !*key) return ob_err(OB_ERR_INVALID_ARG, "empty metadata key");
    ob_gguf_value copy;
    OB_TRY(copy_value(&w->arena, v, &copy, 0));
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            w->kv[i].value = copy;
            return 0;
        }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        ob_gguf_kv *kv = ob_realloc(w->kv, (size_t)cap * sizeof *kv);
        if (!kv) return ob_err(OB_ERR_OOM, "gguf writer");
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = ob_arena_strndup(&w->arena, key, strlen(key));
    if (!k) return ob_err(OB_ERR_OOM, "gguf writer");
    w->kv[w->n_kv].key = k;
    w->kv[w->n_kv].value = copy;
    w->n_kv++;
    return 0;
}

int ob_gguf_writer_remove(ob_gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
            w->n_kv--;
            return 0;
        }
    return ob_err(OB_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
}

#define SETTER(fn, ctype, vt, field)                                              \
    int fn(ob_gguf_writer *w, const char *key, ctype x) {                         \
        ob_gguf_value v;                                                          \
        memset(&v, 0, sizeof v);                                                  \
        v.type = vt;                                                              \
        v.v.field = x;                                                            \
        return ob_gguf_writer_set_value(w, key, &v);                              \
    }
SETTER(ob_gguf_writer_set_u8, uint8_t, OB_GGUF_U8, u)
SETTER(ob_gguf_writer_set_i8, int8_t, OB_GGUF_I8, i)
SETTER(ob_gguf_writer_set_u16, uint16_t, OB_GGUF_U16, u)
SETTER(ob_gguf_writer_set_i16, int16_t, OB_GGUF_I16, i)
SETTER(ob_gguf_writer_set_u32, uint32_t, OB_GGUF_U32, u)
SETTER(ob_gguf_writer_set_i32, int32_t, OB_GGUF_I32, i)
SETTER(ob_gguf_writer_set_u64, uint64_t, OB_GGUF_U64, u)
SETTER(ob_gguf_writer_set_i64, int64_t, OB_GGUF_I64, i)
SETTER(ob_gguf_writer_set_f32, float, OB_GGUF_F32, f)
SETTER(ob_gguf_writer_set_f64, double, OB_GGUF_F64, f)
SETTER(ob_gguf_writer_set_bool, bool, OB_GGUF_BOOL, u)
#undef SETTER

int ob_gguf_writer_set_str(ob_gguf_writer *w, const char *key, const char *s) {
    ob_gguf_value v;
    memset(&v, 0, sizeof v);
    v.type = OB_GGUF_STRING;
    v.v.str.s = s;
    v.v.str.len = strlen(s);
    return ob_gguf_writer_set_value(w, key, &v);
}

int ob_gguf_writer_set_arr(ob_gguf_writer *w, const char *key, ob_gguf_vtype type, const void *data, uint64_t n) {
    if (!scalar_size(type)) return ob_err(OB_ERR_INVALID_ARG, "'%s': array of %s needs its own setter", key,
                                          ob_gguf_vtype_name(type));
    ob_gguf_value v;
    memset(&v, 0, sizeof v);
    v.type = OB_GGUF_ARRAY;
    v.v.arr.type = type;
    v.v.arr.n = n;
    v.v.arr.data = data;
    return ob_gguf_writer_set_value(w, key, &v);
}

int ob_gguf_writer_set_arr_str(ob_gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    ob_gguf_str *tmp = ob_malloc(ob_mul_size((size_t)n, sizeof *tmp));
    if (!tmp) return ob_err(OB_ERR_OOM, "gguf writer");
    for (uint64_t i = 0; i < n; i++) {
        tmp[i].s = strs[i];
        tmp[i].len = strlen(strs[i]);
    }
    ob_gguf_value v;
    memset(&v, 0, sizeof v);
    v.type = OB_GGUF_ARRAY;
    v.v.arr.type = OB_GGUF_STRING;
    v.v.arr.n = n;
    v.v.arr.data = tmp;
    int rc = ob_gguf_writer_set_value(w, key, &v);
    ob_free(tmp);
    return rc;
}

int ob_gguf_writer_add_tensor(ob_gguf_writer *w, const char *name, ob_type type, int n_dims, const int64_t *ne,
                              const void *data) {
    const ob_type_traits *tr = ob_type_get((int)type);
    if (!tr) return ob_err(OB_ERR_INVALID_ARG, "tensor '%s': unknown type %d", name, (int)type);
    if (n_dims < 1 || n_dims > OB_GGUF_MAX_DIMS)
        return ob_err(OB_ERR_INVALID_ARG, "tensor '%s': %d dimensions", name, n_dims);
    if (!name || !*name) return ob_err(OB_ERR_INVALID_ARG, "tensor with an empty name");
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return ob_err(OB_ERR_INVALID_ARG, "tensor '%s' added twice", name);
    wtensor t = {0};
    int64_t nel = 1;
    for (int d = 0; d < OB_GGUF_MAX_DIMS; d++) t.ne[d] = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || __builtin_mul_overflow(nel, ne[d], &nel))
            return ob_err(OB_ERR_INVALID_ARG, "tensor '%s': bad dimension %d", name, d);
        t.ne[d] = ne[d];
    }
    if (t.ne[0] % tr->block_size)
        return ob_err(OB_ERR_INVALID_ARG, "tensor '%s': row of %lld is not a multiple of %s's block of %lld", name,
                      (long long)t.ne[0], tr->name, (long long)tr->block_size);
    t.nbytes = (size_t)(nel / tr->block_size) * tr->type_size;
    t.type = type;
    t.n_dims = n_dims;
    t.data = data;
    t.name = ob_arena_strndup(&w->arena, name, strlen(name));
    if (!t.name) return ob_err(OB_ERR_OOM, "gguf writer");
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = ob_realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return ob_err(OB_ERR_OOM, "gguf writer");
        w->t = nt;
        w->cap_t = cap;
    }
    w->t[w->n_t++] = t;
    return 0;
}

/* ---- serialisation ---- */

typedef struct out {
    FILE *f;
    int err;
    uint64_t pos;
} out;

static void emit(out *o, const void *p, size_t n) {
    if (o->err || n == 0) return;
    if (fwrite(p, 1, n, o->f) != n) o->err = errno ? errno : EIO;
    o->pos += n;
}
static void emit_u32(out *o, uint32_t v) { emit(o, &v, 4); }
static void emit_u64(out *o, uint64_t v) { emit(o, &v, 8); }
static void emit_str(out *o, const char *s, uint64_t len) {
    emit_u64(o, len);
    emit(o, s, (size_t)len);
}

static void emit_scalar(out *o, const ob_gguf_value *v) {
    uint8_t b[8];
    switch (v->type) {
    case OB_GGUF_U8: case OB_GGUF_BOOL: b[0] = (uint8_t)v->v.u; emit(o, b, 1); break;
    case OB_GGUF_I8: { int8_t x = (int8_t)v->v.i; emit(o, &x, 1); break; }
    case OB_GGUF_U16: { uint16_t x = (uint16_t)v->v.u; emit(o, &x, 2); break; }
    case OB_GGUF_I16: { int16_t x = (int16_t)v->v.i; emit(o, &x, 2); break; }
    case OB_GGUF_U32: { uint32_t x = (uint32_t)v->v.u; emit(o, &x, 4); break; }
    case OB_GGUF_I32: { int32_t x = (int32_t)v->v.i; emit(o, &x, 4); break; }
    case OB_GGUF_F32: { float x = (float)v->v.f; emit(o, &x, 4); break; }
    case OB_GGUF_U64: emit(o, &v->v.u, 8); break;
    case OB_GGUF_I64: emit(o, &v->v.i, 8); break;
    case OB_GGUF_F64: emit(o, &v->v.f, 8); break;
    default: break;
    }
}

static void emit_value(out *o, const ob_gguf_value *v) {
    if (v->type == OB_GGUF_STRING) {
        emit_str(o, v->v.str.s, v->v.str.len);
    } else if (v->type == OB_GGUF_ARRAY) {
        const ob_gguf_array *a = &v->v.arr;
        emit_u32(o, (uint32_t)a->type);
        emit_u64(o, a->n);
        size_t es = scalar_size(a->type);
        if (es) {
            emit(o, a->data, (size_t)a->n * es);
        } else if (a->type == OB_GGUF_STRING) {
            const ob_gguf_str *s = a->data;
            for (uint64_t i = 0; i < a->n; i++) emit_str(o, s[i].s, s[i].len);
        } else {
            const ob_gguf_value *e = a->data;
            for (uint64_t i = 0; i < a->n; i++) emit_value(o, &e[i]);
        }
    } else {
        emit_scalar(o, v);
    }
}

static void pad_to(out *o, uint64_t align) {
    static const uint8_t zeros[256];
    uint64_t rem = o->pos % align;
    if (!rem) return;
    uint64_t n = align - rem;
    while (n) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        emit(o, zeros, k);
        n -= k;
    }
}

int ob_gguf_writer_write_stream(ob_gguf_writer *w, FILE *f) {
    uint32_t align = OB_GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            const ob_gguf_value *v = &w->kv[i].value;
            if (v->type != OB_GGUF_U32 || v->v.u == 0 || (v->v.u & (v->v.u - 1)))
                return ob_err(OB_ERR_INVALID_ARG, "general.alignment must be a u32 power of two");
            align = (uint32_t)v->v.u;
        }
    out o = {f, 0, 0};
    emit_u32(&o, OB_GGUF_MAGIC);
    emit_u32(&o, 3);
    emit_u64(&o, (uint64_t)w->n_t);
    emit_u64(&o, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        emit_str(&o, w->kv[i].key, strlen(w->kv[i].key));
        emit_u32(&o, (uint32_t)w->kv[i].value.type);
        emit_value(&o, &w->kv[i].value);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        emit_str(&o, t->name, strlen(t->name));
        emit_u32(&o, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) emit_u64(&o, (uint64_t)t->ne[d]);
        emit_u32(&o, (uint32_t)t->type);
        emit_u64(&o, off);
        off += (t->nbytes + align - 1) / align * align;
    }
    pad_to(&o, align);
    for (int64_t i = 0; i < w->n_t; i++) {
        emit(&o, w->t[i].data, w->t[i].nbytes);
        pad_to(&o, align); /* as ggml does: every tensor, the last too */
    }
    if (o.err) return ob_err(OB_ERR_IO, "writing GGUF: %s", strerror(o.err));
    return 0;
}

int ob_gguf_writer_write_file(ob_gguf_writer *w, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return ob_err(OB_ERR_IO, "%s: %s", path, strerror(errno));
    int rc = ob_gguf_writer_write_stream(w, f);
    if (fclose(f) != 0 && rc == 0) rc = ob_err(OB_ERR_IO, "%s: %s", path, strerror(errno));
    if (rc < 0) {
        remove(path);
        return ob_err_wrap(rc, "%s", path);
    }
    return 0;
}

int ob_gguf_writer_write_memory(ob_gguf_writer *w, void **data, size_t *size) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return ob_err(OB_ERR_OOM, "open_memstream");
    int rc = ob_gguf_writer_write_stream(w, f);
    fclose(f);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    /* Hand back memory owned by ob_malloc so callers free it with ob_free. */
    void *copy = ob_malloc(len ? len : 1);
    if (!copy) {
        free(buf);
        return ob_err(OB_ERR_OOM, "gguf image of %zu bytes", len);
    }
    memcpy(copy, buf, len);
    free(buf);
    *data = copy;
    *size = len;
    return 0;
}
