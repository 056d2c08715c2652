/*
 * gguf_read.c - the GGUF reader.
 *
 * Parsing goes through a cursor that checks the remaining bytes before every
 * read, so nothing in the file is trusted: a length or count that points past
 * the end is an error naming the byte offset and the key or tensor being read.
 * Metadata is copied into the ob_gguf's arena; tensor data stays mapped.
 *
 * Split models: "name-00001-of-00003.gguf" opens every part; the first part's
 * metadata describes the model and each part's tensors are appended.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/mem.h"
#include "../core/mmap.h"
#include "../core/status.h"
#include "gguf.h"

#define MAX_SPLITS 256

typedef struct gguf_file {
    ob_mmap map;          /* empty when parsing caller-owned memory */
    const uint8_t *data;  /* the file image */
    size_t size;
} gguf_file;

struct ob_gguf {
    ob_arena arena;       /* keys, strings, arrays, tensor infos */
    uint32_t version;
    uint32_t alignment;
    int n_files;
    gguf_file files[MAX_SPLITS];
    int64_t n_kv;
    ob_gguf_kv *kv;
    int64_t n_tensors;
    ob_gguf_tensor *tensors;
    /* open-addressing hash of tensor names -> index+1 (0 = empty) */
    int64_t *tensor_hash;
    uint64_t tensor_hash_cap;
};

typedef struct cursor {
    const uint8_t *p;
    size_t size;
    size_t off;
    uint32_t version;
    ob_arena *arena;
    const char *what;     /* current key or tensor name, for messages */
} cursor;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* ---- cursor reads: each checks bounds first ---- */

static int need(cursor *c, size_t n, const char *field) {
    if (n > c->size - c->off)
        return ob_err(OB_ERR_FORMAT, "%s%s%s: %s needs %zu bytes at offset %zu but the file ends at %zu",
                      c->what ? "'" : "", c->what ? c->what : "", c->what ? "'" : "(header)", field, n,
                      c->off, c->size);
    return 0;
}

static int rd_bytes(cursor *c, void *dst, size_t n, const char *field) {
    OB_TRY(need(c, n, field));
    memcpy(dst, c->p + c->off, n);
    c->off += n;
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v, const char *field) { return rd_bytes(c, v, 4, field); }
static int rd_u64(cursor *c, uint64_t *v, const char *field) { return rd_bytes(c, v, 8, field); }

/* Counts and lengths are u32 in v1 and u64 from v2 on. */
static int rd_count(cursor *c, uint64_t *v, const char *field) {
    if (c->version == 1) {
        uint32_t x;
        OB_TRY(rd_u32(c, &x, field));
        *v = x;
        return 0;
    }
    return rd_u64(c, v, field);
}

static int rd_string(cursor *c, ob_gguf_str *out, const char *field) {
    uint64_t len;
    size_t at = c->off;
    OB_TRY(rd_count(c, &len, field));
    if (len > c->size - c->off)
        return ob_err(OB_ERR_FORMAT, "%s%s%s: %s at offset %zu has length %" PRIu64 " but only %zu bytes remain",
                      c->what ? "'" : "", c->what ? c->what : "", c->what ? "'" : "(header)", field, at, len,
                      c->size - c->off);
    char *s = ob_arena_strndup(c->arena, (const char *)c->p + c->off, (size_t)len);
    if (!s) return ob_err(OB_ERR_OOM, "string of %" PRIu64 " bytes", len);
    c->off += (size_t)len;
    out->s = s;
    out->len = len;
    return 0;
}

static size_t vtype_size(int t) {
    switch (t) {
    case OB_GGUF_U8: case OB_GGUF_I8: case OB_GGUF_BOOL: return 1;
    case OB_GGUF_U16: case OB_GGUF_I16: return 2;
    case OB_GGUF_U32: case OB_GGUF_I32: case OB_GGUF_F32: return 4;
    case OB_GGUF_U64: case OB_GGUF_I64: case OB_GGUF_F64: return 8;
    default: return 0;
    }
}

static int rd_value(cursor *c, int type, ob_gguf_value *v, int depth);

static int rd_array(cursor *c, ob_gguf_array *a, int depth) {
    uint32_t et;
    size_t at = c->off;
    OB_TRY(rd_u32(c, &et, "array element type"));
    if (et >= OB_GGUF_VTYPE_COUNT)
        return ob_err(OB_ERR_FORMAT, "'%s': unknown array element type %u at offset %zu", c->what, et, at);
    if (et == OB_GGUF_ARRAY && depth + 1 >= OB_GGUF_MAX_ARRAY_DEPTH)
        return ob_err(OB_ERR_FORMAT, "'%s': arrays nested deeper than %d at offset %zu", c->what,
                      OB_GGUF_MAX_ARRAY_DEPTH, at);
    uint64_t n;
    at = c->off;
    OB_TRY(rd_count(c, &n, "array length"));
    a->type = (ob_gguf_vtype)et;
    a->n = n;
    size_t remain = c->size - c->off;
    size_t es = vtype_size((int)et);
    if (es) {
        if (n > remain / es)
            return ob_err(OB_ERR_FORMAT, "'%s': array of %" PRIu64 " %s at offset %zu needs more than the %zu bytes left",
                          c->what, n, ob_gguf_vtype_name((int)et), at, remain);
        void *d = ob_arena_alloc(c->arena, (size_t)n * es, 8);
        if (!d && n) return ob_err(OB_ERR_OOM, "'%s': array of %" PRIu64 " elements", c->what, n);
        if (n) memcpy(d, c->p + c->off, (size_t)n * es);
        if (et == OB_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (((uint8_t *)d)[i] > 1)
                    return ob_err(OB_ERR_FORMAT, "'%s': bool element %" PRIu64 " has value %u", c->what, i,
                                  ((uint8_t *)d)[i]);
        c->off += (size_t)n * es;
        a->data = d;
        return 0;
    }
    /* Strings need at least their length field, nested arrays type + count. */
    size_t min_elem = et == OB_GGUF_STRING ? (c->version == 1 ? 4 : 8) : (c->version == 1 ? 8 : 12);
    if (n > remain / min_elem)
        return ob_err(OB_ERR_FORMAT, "'%s': array of %" PRIu64 " %s at offset %zu cannot fit in the %zu bytes left",
                      c->what, n, ob_gguf_vtype_name((int)et), at, remain);
    if (et == OB_GGUF_STRING) {
        ob_gguf_str *s = ob_arena_alloc(c->arena, (size_t)n * sizeof *s, 8);
        if (!s && n) return ob_err(OB_ERR_OOM, "'%s': array of %" PRIu64 " strings", c->what, n);
        for (uint64_t i = 0; i < n; i++) OB_TRY(rd_string(c, &s[i], "array string"));
        a->data = s;
        return 0;
    }
    ob_gguf_value *vals = ob_arena_alloc(c->arena, (size_t)n * sizeof *vals, 8);
    if (!vals && n) return ob_err(OB_ERR_OOM, "'%s': nested array", c->what);
    for (uint64_t i = 0; i < n; i++) OB_TRY(rd_value(c, OB_GGUF_ARRAY, &vals[i], depth + 1));
    a->data = vals;
    return 0;
}

static int rd_value(cursor *c, int type, ob_gguf_value *v, int depth) {
    uint8_t b[8];
    memset(v, 0, sizeof *v);
    v->type = (ob_gguf_vtype)type;
    size_t at = c->off;
    switch (type) {
    case OB_GGUF_U8: OB_TRY(rd_bytes(c, b, 1, "u8")); v->v.u = b[0]; return 0;
    case OB_GGUF_I8: OB_TRY(rd_bytes(c, b, 1, "i8")); v->v.i = (int8_t)b[0]; return 0;
    case OB_GGUF_BOOL:
        OB_TRY(rd_bytes(c, b, 1, "bool"));
        if (b[0] > 1) return ob_err(OB_ERR_FORMAT, "'%s': bool at offset %zu has value %u", c->what, at, b[0]);
        v->v.u = b[0];
        return 0;
    case OB_GGUF_U16: { uint16_t x; OB_TRY(rd_bytes(c, &x, 2, "u16")); v->v.u = x; return 0; }
    case OB_GGUF_I16: { int16_t x; OB_TRY(rd_bytes(c, &x, 2, "i16")); v->v.i = x; return 0; }
    case OB_GGUF_U32: { uint32_t x; OB_TRY(rd_bytes(c, &x, 4, "u32")); v->v.u = x; return 0; }
    case OB_GGUF_I32: { int32_t x; OB_TRY(rd_bytes(c, &x, 4, "i32")); v->v.i = x; return 0; }
    case OB_GGUF_F32: { float x; OB_TRY(rd_bytes(c, &x, 4, "f32")); v->v.f = x; return 0; }
    case OB_GGUF_U64: { uint64_t x; OB_TRY(rd_bytes(c, &x, 8, "u64")); v->v.u = x; return 0; }
    case OB_GGUF_I64: { int64_t x; OB_TRY(rd_bytes(c, &x, 8, "i64")); v->v.i = x; return 0; }
    case OB_GGUF_F64: { double x; OB_TRY(rd_bytes(c, &x, 8, "f64")); v->v.f = x; return 0; }
    case OB_GGUF_STRING: return rd_string(c, &v->v.str, "string value");
    case OB_GGUF_ARRAY: return rd_array(c, &v->v.arr, depth);
    default:
        return ob_err(OB_ERR_FORMAT, "'%s': unknown value type %d at offset %zu", c->what, type, at);
    }
}

/* ---- tensor name hash ---- */

static int64_t hash_find(const ob_gguf *g, const char *name) {
    if (!g->tensor_hash_cap) return -1;
    uint64_t mask = g->tensor_hash_cap - 1;
    for (uint64_t h = hash_str(name) & mask;; h = (h + 1) & mask) {
        int64_t e = g->tensor_hash[h];
        if (e == 0) return -1;
        if (strcmp(g->tensors[e - 1].name, name) == 0) return e - 1;
    }
}

static int hash_build(ob_gguf *g) {
    uint64_t cap = 16;
    while (cap < (uint64_t)g->n_tensors * 2) cap <<= 1;
    g->tensor_hash = ob_arena_calloc(&g->arena, cap, sizeof(int64_t));
    if (!g->tensor_hash) return ob_err(OB_ERR_OOM, "tensor index");
    g->tensor_hash_cap = cap;
    uint64_t mask = cap - 1;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        uint64_t h = hash_str(name) & mask;
        for (;; h = (h + 1) & mask) {
            int64_t e = g->tensor_hash[h];
            if (e == 0) break;
            if (strcmp(g->tensors[e - 1].name, name) == 0)
                return ob_err(OB_ERR_FORMAT, "tensor '%s' appears twice (entries %" PRId64 " and %" PRId64 ")",
                              name, e - 1, i);
        }
        g->tensor_hash[h] = i + 1;
    }
    return 0;
}

/* ---- one file ---- */

/* Parse one file image. For the first part (is_first) the metadata is kept;
 * tensors are appended to *tensors (grown in the arena). */
static int parse_file(ob_gguf *g, int file_idx, bool is_first, ob_gguf_tensor **tensors, int64_t *n_tensors,
                      int64_t *cap_tensors) {
    const gguf_file *f = &g->files[file_idx];
    cursor c = {f->data, f->size, 0, 0, &g->arena, NULL};
    uint32_t magic, version;
    if (f->size < 8 || !f->data)
        return ob_err(OB_ERR_FORMAT, "file is %zu bytes: too small for a GGUF header", f->size);
    OB_TRY(rd_u32(&c, &magic, "magic"));
    if (magic != OB_GGUF_MAGIC) {
        const uint8_t *m = f->data;
        return ob_err(OB_ERR_FORMAT, "not a GGUF file: magic bytes are %02x %02x %02x %02x, expected 'GGUF'", m[0],
                      m[1], m[2], m[3]);
    }
    OB_TRY(rd_u32(&c, &version, "version"));
    if (version < 1 || version > 3)
        return ob_err(OB_ERR_UNSUPPORTED, "GGUF version %u is not supported (1, 2 and 3 are)", version);
    c.version = version;
    uint64_t n_t, n_kv;
    OB_TRY(rd_count(&c, &n_t, "tensor count"));
    OB_TRY(rd_count(&c, &n_kv, "metadata count"));
    /* Each kv needs at least key length + type; each tensor at least name length + dims + type + offset. */
    if (n_kv > (f->size - c.off) / 8)
        return ob_err(OB_ERR_FORMAT, "metadata count %" PRIu64 " cannot fit in a file of %zu bytes", n_kv, f->size);
    if (n_t > (f->size - c.off) / 16)
        return ob_err(OB_ERR_FORMAT, "tensor count %" PRIu64 " cannot fit in a file of %zu bytes", n_t, f->size);

    ob_gguf_kv *kv = NULL;
    if (is_first) {
        g->version = version;
        kv = ob_arena_calloc(&g->arena, n_kv ? (size_t)n_kv : 1, sizeof *kv);
        if (!kv) return ob_err(OB_ERR_OOM, "metadata table");
        g->kv = kv;
    }
    uint32_t alignment = OB_GGUF_DEFAULT_ALIGNMENT;
    ob_arena_mark mark = ob_arena_get_mark(&g->arena);
    for (uint64_t i = 0; i < n_kv; i++) {
        ob_gguf_str key;
        c.what = NULL;
        size_t at = c.off;
        OB_TRY(rd_string(&c, &key, "key"));
        if (key.len == 0 || strlen(key.s) != key.len)
            return ob_err(OB_ERR_FORMAT, "metadata entry %" PRIu64 " at offset %zu has an empty or NUL-containing key", i, at);
        c.what = key.s;
        uint32_t type;
        at = c.off;
        OB_TRY(rd_u32(&c, &type, "value type"));
        if (type >= OB_GGUF_VTYPE_COUNT)
            return ob_err(OB_ERR_FORMAT, "'%s': unknown value type %u at offset %zu", key.s, type, at);
        ob_gguf_value v;
        OB_TRY(rd_value(&c, (int)type, &v, 0));
        if (strcmp(key.s, "general.alignment") == 0) {
            if (type != OB_GGUF_U32)
                return ob_err(OB_ERR_FORMAT, "'general.alignment' has type %s, expected u32", ob_gguf_vtype_name((int)type));
            if (v.v.u == 0 || (v.v.u & (v.v.u - 1)))
                return ob_err(OB_ERR_FORMAT, "'general.alignment' is %" PRIu64 ": not a power of two", v.v.u);
            alignment = (uint32_t)v.v.u;
        }
        if (is_first) {
            for (uint64_t j = 0; j < i; j++)
                if (strcmp(kv[j].key, key.s) == 0)
                    return ob_err(OB_ERR_FORMAT, "metadata key '%s' appears twice", key.s);
            kv[i].key = key.s;
            kv[i].value = v;
        }
    }
    if (is_first) {
        g->n_kv = (int64_t)n_kv;
        g->alignment = alignment;
    } else {
        ob_arena_rewind(&g->arena, mark); /* later parts' metadata is not kept */
    }

    /* Tensor infos. */
    if ((uint64_t)*n_tensors + n_t > (uint64_t)*cap_tensors) {
        int64_t cap = *n_tensors + (int64_t)n_t + 64;
        ob_gguf_tensor *nt = ob_arena_alloc(&g->arena, (size_t)cap * sizeof *nt, 8);
        if (!nt) return ob_err(OB_ERR_OOM, "tensor table");
        if (*n_tensors) memcpy(nt, *tensors, (size_t)*n_tensors * sizeof *nt);
        *tensors = nt;
        *cap_tensors = cap;
    }
    int64_t first = *n_tensors;
    for (uint64_t i = 0; i < n_t; i++) {
        ob_gguf_tensor *t = &(*tensors)[first + (int64_t)i];
        memset(t, 0, sizeof *t);
        ob_gguf_str name;
        c.what = NULL;
        size_t at = c.off;
        OB_TRY(rd_string(&c, &name, "tensor name"));
        if (name.len == 0 || strlen(name.s) != name.len)
            return ob_err(OB_ERR_FORMAT, "tensor %" PRIu64 " at offset %zu has an empty or NUL-containing name", i, at);
        c.what = name.s;
        t->name = name.s;
        uint32_t nd;
        at = c.off;
        OB_TRY(rd_u32(&c, &nd, "dimension count"));
        if (nd < 1 || nd > OB_GGUF_MAX_DIMS)
            return ob_err(OB_ERR_FORMAT, "tensor '%s': %u dimensions at offset %zu (1 to %d allowed)", name.s, nd, at,
                          OB_GGUF_MAX_DIMS);
        t->n_dims = (int)nd;
        int64_t nel = 1;
        for (int d = 0; d < OB_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t ne;
            at = c.off;
            OB_TRY(rd_count(&c, &ne, "dimension"));
            if (ne > (uint64_t)INT64_MAX)
                return ob_err(OB_ERR_FORMAT, "tensor '%s': dimension %u is %" PRIu64 " (offset %zu)", name.s, d, ne, at);
            t->ne[d] = (int64_t)ne;
            if (__builtin_mul_overflow(nel, (int64_t)ne, &nel))
                return ob_err(OB_ERR_FORMAT, "tensor '%s': element count overflows (dimension %u = %" PRIu64 ")", name.s, d, ne);
        }
        uint32_t type;
        at = c.off;
        OB_TRY(rd_u32(&c, &type, "tensor type"));
        const ob_type_traits *tr = ob_type_get((int)type);
        if (!tr)
            return ob_err(OB_ERR_FORMAT, "tensor '%s': unknown or retired type id %u (offset %zu)", name.s, type, at);
        t->type = (ob_type)type;
        if (t->ne[0] % tr->block_size != 0)
            return ob_err(OB_ERR_FORMAT, "tensor '%s': row length %" PRId64 " is not a multiple of %s's block size %" PRId64,
                          name.s, t->ne[0], tr->name, tr->block_size);
        uint64_t blocks = (uint64_t)nel / (uint64_t)tr->block_size;
        uint64_t nbytes;
        if (__builtin_mul_overflow(blocks, (uint64_t)tr->type_size, &nbytes) || nbytes > SIZE_MAX)
            return ob_err(OB_ERR_FORMAT, "tensor '%s': byte size overflows", name.s);
        t->nbytes = (size_t)nbytes;
        OB_TRY(rd_u64(&c, &t->offset, "tensor data offset"));
        if (t->offset % alignment != 0)
            return ob_err(OB_ERR_FORMAT, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %u",
                          name.s, t->offset, alignment);
        t->split = file_idx;
    }
    c.what = NULL;
    /* Data section starts at the next multiple of the alignment. */
    uint64_t data_start = ((uint64_t)c.off + alignment - 1) / alignment * alignment;
    for (uint64_t i = 0; i < n_t; i++) {
        ob_gguf_tensor *t = &(*tensors)[first + (int64_t)i];
        uint64_t end;
        if (data_start > f->size || t->offset > f->size - data_start ||
            __builtin_add_overflow(data_start + t->offset, (uint64_t)t->nbytes, &end) || end > f->size)
            return ob_err(OB_ERR_FORMAT,
                          "tensor '%s': data [%" PRIu64 ", +%zu) at file offset %" PRIu64 " lies outside the file (%zu bytes)",
                          t->name, t->offset, t->nbytes, data_start + t->offset, f->size);
        /* Kernels read block fields in place (halves, floats, int64s): the data
         * must sit on the natural alignment of its type, even when the file
         * declares a tiny general.alignment. */
        const ob_type_traits *tr = ob_type_get((int)t->type);
        uint64_t need = tr->type_size & (~tr->type_size + 1); /* largest power of two dividing it */
        if (need > 8) need = 8;
        if ((data_start + t->offset) % need != 0)
            return ob_err(OB_ERR_FORMAT, "tensor '%s': data at file offset %" PRIu64 " is not aligned to the %" PRIu64
                          " bytes type %s needs", t->name, data_start + t->offset, need, tr->name);
        t->data = f->data + data_start + t->offset;
    }
    *n_tensors = first + (int64_t)n_t;
    return 0;
}

static int gguf_new(ob_gguf **out) {
    ob_gguf *g = ob_calloc(1, sizeof *g);
    if (!g) return ob_err(OB_ERR_OOM, "gguf");
    ob_arena_init(&g->arena, 256 * 1024, 0);
    *out = g;
    return 0;
}

static int finish(ob_gguf *g, ob_gguf_tensor *tensors, int64_t n) {
    g->tensors = tensors;
    g->n_tensors = n;
    return hash_build(g);
}

int ob_gguf_open_memory(const void *data, size_t size, ob_gguf **out) {
    *out = NULL;
    ob_gguf *g = NULL;
    OB_TRY(gguf_new(&g));
    g->n_files = 1;
    g->files[0].data = data;
    g->files[0].size = size;
    ob_gguf_tensor *t = NULL;
    int64_t n = 0, cap = 0;
    int rc = parse_file(g, 0, true, &t, &n, &cap);
    if (rc == 0) rc = finish(g, t, n);
    if (rc < 0) {
        ob_gguf_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* Recognise "<prefix>-NNNNN-of-MMMMM.gguf"; fill prefix length and count. */
static bool split_name(const char *path, size_t *prefix_len, int *count) {
    size_t len = strlen(path);
    const char *suffix = "-00001-of-";
    size_t sl = strlen(suffix);
    /* -00001-of-NNNNN.gguf is 20 characters */
    if (len < 20 || strcmp(path + len - 5, ".gguf") != 0) return false;
    const char *s = path + len - 20;
    if (strncmp(s, suffix, sl) != 0) return false;
    int n = 0;
    for (int i = 0; i < 5; i++) {
        char ch = s[sl + (size_t)i];
        if (ch < '0' || ch > '9') return false;
        n = n * 10 + (ch - '0');
    }
    if (n < 1) return false;
    *prefix_len = len - 20;
    *count = n;
    return true;
}

int ob_gguf_open(const char *path, ob_gguf **out) {
    *out = NULL;
    ob_gguf *g = NULL;
    OB_TRY(gguf_new(&g));
    ob_gguf_tensor *tensors = NULL;
    int64_t n = 0, cap = 0;
    int rc = ob_mmap_open(path, &g->files[0].map);
    if (rc == 0) {
        g->n_files = 1;
        g->files[0].data = g->files[0].map.data;
        g->files[0].size = g->files[0].map.size;
        rc = parse_file(g, 0, true, &tensors, &n, &cap);
        if (rc < 0) ob_err_wrap(rc, "%s", path);
    }
    size_t prefix_len = 0;
    int count = 1;
    bool by_name = rc == 0 && split_name(path, &prefix_len, &count);
    if (rc == 0) {
        uint32_t key_count;
        if (ob_gguf_get_u32(g, "split.count", &key_count) == 0 && key_count > 1) {
            if (!by_name) {
                rc = ob_err(OB_ERR_FORMAT, "%s: split.count is %u but the name is not '<name>-00001-of-%05u.gguf'",
                            path, key_count, key_count);
            } else if ((int)key_count != count) {
                rc = ob_err(OB_ERR_FORMAT, "%s: split.count is %u but the name says %d parts", path, key_count, count);
            }
        }
        if (rc == 0) ob_err_clear(); /* a missing split.count is normal */
    }
    if (rc == 0 && by_name && count > MAX_SPLITS)
        rc = ob_err(OB_ERR_UNSUPPORTED, "%s: %d split parts (at most %d)", path, count, MAX_SPLITS);
    for (int i = 1; rc == 0 && by_name && i < count; i++) {
        char part[4096];
        if (prefix_len + 21 > sizeof part) {
            rc = ob_err(OB_ERR_RANGE, "path too long");
            break;
        }
        snprintf(part, sizeof part, "%.*s-%05d-of-%05d.gguf", (int)prefix_len, path, i + 1, count);
        rc = ob_mmap_open(part, &g->files[i].map);
        if (rc < 0) {
            ob_err_wrap(rc, "split part %d of %d", i + 1, count);
            break;
        }
        g->n_files = i + 1;
        g->files[i].data = g->files[i].map.data;
        g->files[i].size = g->files[i].map.size;
        rc = parse_file(g, i, false, &tensors, &n, &cap);
        if (rc < 0) ob_err_wrap(rc, "%s", part);
    }
    if (rc == 0) rc = finish(g, tensors, n);
    if (rc < 0) {
        ob_gguf_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void ob_gguf_free(ob_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_files; i++) ob_mmap_close(&g->files[i].map);
    ob_arena_free(&g->arena);
    ob_free(g);
}

/* ---- accessors ---- */

uint32_t ob_gguf_version(const ob_gguf *g) { return g->version; }
uint32_t ob_gguf_alignment(const ob_gguf *g) { return g->alignment; }
int ob_gguf_n_splits(const ob_gguf *g) { return g->n_files; }

uint64_t ob_gguf_file_size(const ob_gguf *g) {
    uint64_t s = 0;
    for (int i = 0; i < g->n_files; i++) s += g->files[i].size;
    return s;
}

int64_t ob_gguf_n_kv(const ob_gguf *g) { return g->n_kv; }

const ob_gguf_kv *ob_gguf_kv_at(const ob_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

int64_t ob_gguf_find_key(const ob_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return i;
    return -1;
}

const ob_gguf_value *ob_gguf_get(const ob_gguf *g, const char *key) {
    int64_t i = ob_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i].value;
}

int64_t ob_gguf_n_tensors(const ob_gguf *g) { return g->n_tensors; }

const ob_gguf_tensor *ob_gguf_tensor_at(const ob_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const ob_gguf_tensor *ob_gguf_find_tensor(const ob_gguf *g, const char *name) {
    int64_t i = hash_find(g, name);
    return i < 0 ? NULL : &g->tensors[i];
}

int64_t ob_gguf_tensor_nelements(const ob_gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}
