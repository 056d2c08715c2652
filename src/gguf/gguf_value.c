/*
 * gguf_value.c - typed access to metadata values, and their text form.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/status.h"
#include "gguf.h"

const char *ob_gguf_vtype_name(int t) {
    static const char *names[OB_GGUF_VTYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};
    return t >= 0 && t < OB_GGUF_VTYPE_COUNT ? names[t] : "?";
}

static bool is_unsigned(int t) {
    return t == OB_GGUF_U8 || t == OB_GGUF_U16 || t == OB_GGUF_U32 || t == OB_GGUF_U64;
}
static bool is_signed(int t) {
    return t == OB_GGUF_I8 || t == OB_GGUF_I16 || t == OB_GGUF_I32 || t == OB_GGUF_I64;
}

static int lookup(const ob_gguf *g, const char *key, const ob_gguf_value **v) {
    *v = ob_gguf_get(g, key);
    if (!*v) return ob_err(OB_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
    return 0;
}

static int wrong_type(const char *key, const ob_gguf_value *v, const char *want) {
    return ob_err(OB_ERR_FORMAT, "metadata key '%s' has type %s, expected %s", key, ob_gguf_vtype_name(v->type), want);
}

/* Read any integer value as a signed 128-bit-safe pair: returns false when
 * the value is not an integer. */
static bool as_int(const ob_gguf_value *v, bool *neg, uint64_t *mag) {
    if (is_unsigned(v->type)) {
        *neg = false;
        *mag = v->v.u;
        return true;
    }
    if (is_signed(v->type)) {
        *neg = v->v.i < 0;
        *mag = *neg ? (uint64_t)(-(v->v.i + 1)) + 1 : (uint64_t)v->v.i;
        return true;
    }
    return false;
}

static int get_int(const ob_gguf *g, const char *key, int64_t lo, uint64_t hi, bool *neg, uint64_t *mag,
                   const char *want) {
    const ob_gguf_value *v;
    OB_TRY(lookup(g, key, &v));
    if (!as_int(v, neg, mag)) return wrong_type(key, v, want);
    if ((*neg && (lo >= 0 || *mag > (uint64_t)(-(lo + 1)) + 1)) || (!*neg && *mag > hi))
        return ob_err(OB_ERR_FORMAT, "metadata key '%s' = %s%" PRIu64 " does not fit in %s", key, *neg ? "-" : "",
                      *mag, want);
    return 0;
}

int ob_gguf_get_u32(const ob_gguf *g, const char *key, uint32_t *out) {
    bool neg = false;
    uint64_t m = 0;
    OB_TRY(get_int(g, key, 0, UINT32_MAX, &neg, &m, "u32"));
    *out = (uint32_t)m;
    return 0;
}

int ob_gguf_get_u64(const ob_gguf *g, const char *key, uint64_t *out) {
    bool neg = false;
    uint64_t m = 0;
    OB_TRY(get_int(g, key, 0, UINT64_MAX, &neg, &m, "u64"));
    *out = m;
    return 0;
}

int ob_gguf_get_i32(const ob_gguf *g, const char *key, int32_t *out) {
    bool neg = false;
    uint64_t m = 0;
    OB_TRY(get_int(g, key, INT32_MIN, INT32_MAX, &neg, &m, "i32"));
    *out = neg ? (int32_t)(-(int64_t)(m - 1) - 1) : (int32_t)m;
    return 0;
}

int ob_gguf_get_i64(const ob_gguf *g, const char *key, int64_t *out) {
    bool neg = false;
    uint64_t m = 0;
    OB_TRY(get_int(g, key, INT64_MIN, INT64_MAX, &neg, &m, "i64"));
    *out = neg ? -(int64_t)(m - 1) - 1 : (int64_t)m;
    return 0;
}

int ob_gguf_get_f32(const ob_gguf *g, const char *key, float *out) {
    const ob_gguf_value *v;
    OB_TRY(lookup(g, key, &v));
    if (v->type == OB_GGUF_F32 || v->type == OB_GGUF_F64) {
        *out = (float)v->v.f;
        return 0;
    }
    bool neg;
    uint64_t mag;
    if (as_int(v, &neg, &mag)) { /* an integer where a float is wanted: accept */
        *out = neg ? -(float)mag : (float)mag;
        return 0;
    }
    return wrong_type(key, v, "f32");
}

int ob_gguf_get_bool(const ob_gguf *g, const char *key, bool *out) {
    const ob_gguf_value *v;
    OB_TRY(lookup(g, key, &v));
    if (v->type != OB_GGUF_BOOL) return wrong_type(key, v, "bool");
    *out = v->v.u != 0;
    return 0;
}

int ob_gguf_get_str(const ob_gguf *g, const char *key, const char **out) {
    const ob_gguf_value *v;
    OB_TRY(lookup(g, key, &v));
    if (v->type != OB_GGUF_STRING) return wrong_type(key, v, "string");
    *out = v->v.str.s;
    return 0;
}

int ob_gguf_get_arr(const ob_gguf *g, const char *key, int type, const ob_gguf_array **out) {
    const ob_gguf_value *v;
    OB_TRY(lookup(g, key, &v));
    if (v->type != OB_GGUF_ARRAY) return wrong_type(key, v, "array");
    if (type >= 0 && (int)v->v.arr.type != type)
        return ob_err(OB_ERR_FORMAT, "metadata key '%s' is an array of %s, expected an array of %s", key,
                      ob_gguf_vtype_name(v->v.arr.type), ob_gguf_vtype_name(type));
    *out = &v->v.arr;
    return 0;
}

/* ---- text form ---- */

typedef struct sbuf {
    char *p;
    size_t size, len;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) OB_PRINTF(2, 3);
static void put(sbuf *b, const char *fmt, ...) {
    if (b->len >= b->size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->size - b->len, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
    if (b->len >= b->size) b->len = b->size - 1;
}

static void put_str(sbuf *b, const char *s, uint64_t len, uint64_t max) {
    put(b, "\"");
    for (uint64_t i = 0; i < len && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            put(b, "\\%c", ch);
        else if (ch == '\n')
            put(b, "\\n");
        else if (ch == '\t')
            put(b, "\\t");
        else if (ch < 0x20 || ch == 0x7f)
            put(b, "\\u%04x", ch);
        else
            put(b, "%c", ch);
    }
    if (len > max) put(b, "...");
    put(b, "\"");
}

static void put_scalar(sbuf *b, int type, const void *p) {
    switch (type) {
    case OB_GGUF_U8: put(b, "%u", *(const uint8_t *)p); break;
    case OB_GGUF_I8: put(b, "%d", *(const int8_t *)p); break;
    case OB_GGUF_U16: put(b, "%u", *(const uint16_t *)p); break;
    case OB_GGUF_I16: put(b, "%d", *(const int16_t *)p); break;
    case OB_GGUF_U32: put(b, "%u", *(const uint32_t *)p); break;
    case OB_GGUF_I32: put(b, "%d", *(const int32_t *)p); break;
    case OB_GGUF_F32: put(b, "%.9g", *(const float *)p); break;
    case OB_GGUF_BOOL: put(b, "%s", *(const uint8_t *)p ? "true" : "false"); break;
    case OB_GGUF_U64: put(b, "%" PRIu64, *(const uint64_t *)p); break;
    case OB_GGUF_I64: put(b, "%" PRId64, *(const int64_t *)p); break;
    case OB_GGUF_F64: put(b, "%.17g", *(const double *)p); break;
    default: put(b, "?");
    }
}

static size_t elem_size(int t) {
    switch (t) {
    case OB_GGUF_U8: case OB_GGUF_I8: case OB_GGUF_BOOL: return 1;
    case OB_GGUF_U16: case OB_GGUF_I16: return 2;
    case OB_GGUF_U32: case OB_GGUF_I32: case OB_GGUF_F32: return 4;
    case OB_GGUF_U64: case OB_GGUF_I64: case OB_GGUF_F64: return 8;
    case OB_GGUF_STRING: return sizeof(ob_gguf_str);
    case OB_GGUF_ARRAY: return sizeof(ob_gguf_value);
    default: return 0;
    }
}

static void put_value(sbuf *b, const ob_gguf_value *v, int max_elems) {
    switch (v->type) {
    case OB_GGUF_STRING: put_str(b, v->v.str.s, v->v.str.len, 256); return;
    case OB_GGUF_ARRAY: {
        const ob_gguf_array *a = &v->v.arr;
        put(b, "[");
        uint64_t shown = a->n < (uint64_t)max_elems ? a->n : (uint64_t)max_elems;
        for (uint64_t i = 0; i < shown; i++) {
            if (i) put(b, ", ");
            const char *e = (const char *)a->data + i * elem_size(a->type);
            if (a->type == OB_GGUF_STRING) {
                const ob_gguf_str *s = (const ob_gguf_str *)(const void *)e;
                put_str(b, s->s, s->len, 64);
            } else if (a->type == OB_GGUF_ARRAY) {
                put_value(b, (const ob_gguf_value *)(const void *)e, max_elems);
            } else {
                put_scalar(b, a->type, e);
            }
        }
        if (a->n > shown) put(b, ", ... (%" PRIu64 " total)", a->n);
        put(b, "]");
        return;
    }
    case OB_GGUF_F32: put(b, "%.9g", v->v.f); return;
    case OB_GGUF_F64: put(b, "%.17g", v->v.f); return;
    case OB_GGUF_BOOL: put(b, "%s", v->v.u ? "true" : "false"); return;
    default:
        if (is_signed(v->type))
            put(b, "%" PRId64, v->v.i);
        else
            put(b, "%" PRIu64, v->v.u);
    }
}

char *ob_gguf_value_to_string(const ob_gguf_value *v, char *buf, size_t size, int max_elems) {
    sbuf b = {buf, size, 0};
    if (size == 0) return buf;
    buf[0] = '\0';
    put_value(&b, v, max_elems);
    return buf;
}
