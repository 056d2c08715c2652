/*
 * gguf.h - GGUF reader and writer.
 *
 * The reader maps a file (or a set of split files) and checks everything it
 * reads against the bytes that exist: string and array lengths, nesting depth,
 * tensor dimensions and their product, types, alignment, and that every
 * tensor's data lies inside its file. A bad file gives OB_ERR_FORMAT with a
 * message naming the key, tensor or byte offset; never a crash or an
 * out-of-bounds read. Versions 1 (32-bit counts), 2 and 3 are read.
 *
 * Parsed metadata (keys, strings, arrays) is copied into an arena owned by
 * the ob_gguf, NUL-terminated; tensor data stays in the mapping.
 *
 * The writer builds metadata and a tensor list in memory and writes a v3 file
 * with correct alignment. It knows nothing of models: model code decides the
 * keys.
 */
#ifndef OB_GGUF_GGUF_H
#define OB_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../quant/quant.h"

#define OB_GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define OB_GGUF_DEFAULT_ALIGNMENT 32
#define OB_GGUF_MAX_DIMS 4
#define OB_GGUF_MAX_ARRAY_DEPTH 8

/* Metadata value types, numbered as in the file. */
typedef enum ob_gguf_vtype {
    OB_GGUF_U8 = 0,
    OB_GGUF_I8 = 1,
    OB_GGUF_U16 = 2,
    OB_GGUF_I16 = 3,
    OB_GGUF_U32 = 4,
    OB_GGUF_I32 = 5,
    OB_GGUF_F32 = 6,
    OB_GGUF_BOOL = 7,
    OB_GGUF_STRING = 8,
    OB_GGUF_ARRAY = 9,
    OB_GGUF_U64 = 10,
    OB_GGUF_I64 = 11,
    OB_GGUF_F64 = 12,
    OB_GGUF_VTYPE_COUNT = 13,
} ob_gguf_vtype;

typedef struct ob_gguf_str {
    const char *s; /* NUL-terminated copy; may also contain NUL bytes inside */
    uint64_t len;
} ob_gguf_str;

typedef struct ob_gguf_value ob_gguf_value;

typedef struct ob_gguf_array {
    ob_gguf_vtype type; /* element type */
    uint64_t n;
    /* Elements, naturally aligned, in the arena:
     *   scalar types: uint8_t[n], int16_t[n], float[n], bool as uint8_t[n], ...
     *   OB_GGUF_STRING: ob_gguf_str[n]
     *   OB_GGUF_ARRAY:  ob_gguf_value[n] (each of type OB_GGUF_ARRAY) */
    const void *data;
} ob_gguf_array;

struct ob_gguf_value {
    ob_gguf_vtype type;
    union {
        uint64_t u;     /* U8, U16, U32, U64, BOOL (0/1) */
        int64_t i;      /* I8, I16, I32, I64 */
        double f;       /* F32, F64 */
        ob_gguf_str str;
        ob_gguf_array arr;
    } v;
};

typedef struct ob_gguf_kv {
    const char *key;
    ob_gguf_value value;
} ob_gguf_kv;

typedef struct ob_gguf_tensor {
    const char *name;
    ob_type type;
    int n_dims;
    int64_t ne[OB_GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint64_t offset;              /* from the start of its file's data section */
    size_t nbytes;
    const void *data;             /* into the mapping; valid until ob_gguf_free */
    int split;                    /* index of the file that holds it (0 unless split) */
} ob_gguf_tensor;

typedef struct ob_gguf ob_gguf;

/* ---- reading ---- */

/* Open and validate a GGUF file. A name like "m-00001-of-00003.gguf" (or a
 * file whose split.count > 1) loads every part as one model: metadata from
 * the first part, tensors from all. */
int ob_gguf_open(const char *path, ob_gguf **out);
/* Parse a GGUF image in memory (no copy: `data` must outlive the result).
 * Used by the fuzzer and tests; split keys are not followed. */
int ob_gguf_open_memory(const void *data, size_t size, ob_gguf **out);
void ob_gguf_free(ob_gguf *g);

uint32_t ob_gguf_version(const ob_gguf *g);
uint32_t ob_gguf_alignment(const ob_gguf *g);
int ob_gguf_n_splits(const ob_gguf *g);
/* Total bytes of all mapped files. */
uint64_t ob_gguf_file_size(const ob_gguf *g);

int64_t ob_gguf_n_kv(const ob_gguf *g);
const ob_gguf_kv *ob_gguf_kv_at(const ob_gguf *g, int64_t i);
/* Index of a key, or -1. */
int64_t ob_gguf_find_key(const ob_gguf *g, const char *key);
const ob_gguf_value *ob_gguf_get(const ob_gguf *g, const char *key);

/* Typed getters. Return 0, OB_ERR_NOT_FOUND when the key is absent, or
 * OB_ERR_FORMAT when its type does not convert (integers convert between
 * widths when the value fits; F32/F64 convert to float/double). The message
 * names the key. */
int ob_gguf_get_u32(const ob_gguf *g, const char *key, uint32_t *out);
int ob_gguf_get_i32(const ob_gguf *g, const char *key, int32_t *out);
int ob_gguf_get_u64(const ob_gguf *g, const char *key, uint64_t *out);
int ob_gguf_get_i64(const ob_gguf *g, const char *key, int64_t *out);
int ob_gguf_get_f32(const ob_gguf *g, const char *key, float *out);
int ob_gguf_get_bool(const ob_gguf *g, const char *key, bool *out);
int ob_gguf_get_str(const ob_gguf *g, const char *key, const char **out);
/* Array of the given element type (any element type if type < 0). */
int ob_gguf_get_arr(const ob_gguf *g, const char *key, int type, const ob_gguf_array **out);

int64_t ob_gguf_n_tensors(const ob_gguf *g);
const ob_gguf_tensor *ob_gguf_tensor_at(const ob_gguf *g, int64_t i);
/* NULL if absent (no error message is set). */
const ob_gguf_tensor *ob_gguf_find_tensor(const ob_gguf *g, const char *name);
/* Elements in a tensor. */
int64_t ob_gguf_tensor_nelements(const ob_gguf_tensor *t);

const char *ob_gguf_vtype_name(int vtype);
/* Write a value as text (strings quoted, arrays abbreviated after max_elems)
 * into buf; returns buf. */
char *ob_gguf_value_to_string(const ob_gguf_value *v, char *buf, size_t size, int max_elems);

/* ---- writing ---- */

typedef struct ob_gguf_writer ob_gguf_writer;

int ob_gguf_writer_create(ob_gguf_writer **out);
void ob_gguf_writer_free(ob_gguf_writer *w);

/* Setting a key again replaces its value. Strings and arrays are copied. */
int ob_gguf_writer_set_u8(ob_gguf_writer *w, const char *key, uint8_t v);
int ob_gguf_writer_set_i8(ob_gguf_writer *w, const char *key, int8_t v);
int ob_gguf_writer_set_u16(ob_gguf_writer *w, const char *key, uint16_t v);
int ob_gguf_writer_set_i16(ob_gguf_writer *w, const char *key, int16_t v);
int ob_gguf_writer_set_u32(ob_gguf_writer *w, const char *key, uint32_t v);
int ob_gguf_writer_set_i32(ob_gguf_writer *w, const char *key, int32_t v);
int ob_gguf_writer_set_u64(ob_gguf_writer *w, const char *key, uint64_t v);
int ob_gguf_writer_set_i64(ob_gguf_writer *w, const char *key, int64_t v);
int ob_gguf_writer_set_f32(ob_gguf_writer *w, const char *key, float v);
int ob_gguf_writer_set_f64(ob_gguf_writer *w, const char *key, double v);
int ob_gguf_writer_set_bool(ob_gguf_writer *w, const char *key, bool v);
int ob_gguf_writer_set_str(ob_gguf_writer *w, const char *key, const char *s);
/* Array of scalars: `data` holds n elements of `type` in native layout. */
int ob_gguf_writer_set_arr(ob_gguf_writer *w, const char *key, ob_gguf_vtype type, const void *data, uint64_t n);
int ob_gguf_writer_set_arr_str(ob_gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Any value, deep-copied (used to copy metadata from a reader). */
int ob_gguf_writer_set_value(ob_gguf_writer *w, const char *key, const ob_gguf_value *v);
int ob_gguf_writer_remove(ob_gguf_writer *w, const char *key);

/* Add a tensor. `data` (ob_row_size(type, ne[0]) * rows bytes) is NOT copied:
 * it must stay valid until the file is written. */
int ob_gguf_writer_add_tensor(ob_gguf_writer *w, const char *name, ob_type type, int n_dims,
                              const int64_t *ne, const void *data);

/* Write the file (v3). Alignment comes from general.alignment if set. */
int ob_gguf_writer_write_file(ob_gguf_writer *w, const char *path);
int ob_gguf_writer_write_stream(ob_gguf_writer *w, FILE *f);
/* Write into a new buffer (free with ob_free). */
int ob_gguf_writer_write_memory(ob_gguf_writer *w, void **data, size_t *size);

#endif
