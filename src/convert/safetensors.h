/*
 * safetensors.h - bounds-checked reader for Hugging Face safetensors files,
 * alone or as the shards of one model folder.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}), then the data section; offsets count from the start
 * of the data section. Everything the header says is checked against the
 * bytes that exist before it is used: the header fits in the file, every
 * tensor's byte range lies inside the data section, and shape x dtype size
 * equals that range (with overflow checks), so a truncated or hostile file
 * gives OB_ERR_FORMAT naming the file and tensor, never an out-of-bounds read.
 *
 * Files are mapped read-only; tensor data points into the mapping and is not
 * necessarily aligned (read it with memcpy). This module only reads: the
 * conversion to GGUF lives in convert.c.
 */
#ifndef OB_CONVERT_SAFETENSORS_H
#define OB_CONVERT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* Element types safetensors names. Only F32, F16 and BF16 are converted;
 * the others are recognised so that their byte ranges can be checked and an
 * unused tensor of such a type does not stop a conversion. */
typedef enum ob_st_dtype {
    OB_ST_F32,
    OB_ST_F16,
    OB_ST_BF16,
    OB_ST_F64,
    OB_ST_I64,
    OB_ST_I32,
    OB_ST_I16,
    OB_ST_I8,
    OB_ST_U64,
    OB_ST_U32,
    OB_ST_U16,
    OB_ST_U8,
    OB_ST_BOOL,
    OB_ST_F8_E4M3,
    OB_ST_F8_E5M2,
    OB_ST_DTYPE_COUNT,
} ob_st_dtype;

/* Far more than any real tensor has; a header asking for more is rejected. */
#define OB_ST_MAX_DIMS 8
/* The format's own limit on the JSON header (100 MB). */
#define OB_ST_MAX_HEADER (100u * 1000u * 1000u)

typedef struct ob_st_tensor {
    const char *name;            /* NUL-terminated, owned by the file */
    ob_st_dtype dtype;
    int n_dims;                  /* 0 for a scalar */
    int64_t shape[OB_ST_MAX_DIMS]; /* PyTorch order: shape[n_dims-1] is contiguous */
    int64_t n_elements;
    const unsigned char *data;   /* into the mapping; unaligned; valid until the file is freed */
    size_t nbytes;
    const char *file;            /* path (or label) of the file holding it */
} ob_st_tensor;

/* ---- one file ---- */

typedef struct ob_safetensors ob_safetensors;

/* Map and validate `path`. Errors: OB_ERR_IO (open/map), OB_ERR_FORMAT (any
 * inconsistency, with the file name and tensor in the message). */
int ob_safetensors_open(const char *path, ob_safetensors **out);
/* Validate an image in memory; `data` is not copied and must outlive the
 * result. `label` names it in messages. Used by tests and fuzzers. */
int ob_safetensors_open_memory(const void *data, size_t size, const char *label, ob_safetensors **out);
void ob_safetensors_free(ob_safetensors *st);

int64_t ob_safetensors_n_tensors(const ob_safetensors *st);
/* Tensors in data-offset order. */
const ob_st_tensor *ob_safetensors_tensor_at(const ob_safetensors *st, int64_t i);
/* NULL if absent (no error message is set). */
const ob_st_tensor *ob_safetensors_find(const ob_safetensors *st, const char *name);

const char *ob_st_dtype_name(ob_st_dtype t);
size_t ob_st_dtype_size(ob_st_dtype t);

/* ---- a model folder ---- */

typedef struct ob_st_set ob_st_set;

/* Open the weights of a Hugging Face model folder: the shards listed by
 * model.safetensors.index.json when it exists (every listed tensor must be in
 * the shard the index names, and every tensor of a shard must be listed), else
 * model.safetensors, else every model*.safetensors in name order. A tensor
 * name found in two files is an error. */
int ob_st_set_open_dir(const char *dir, ob_st_set **out);
void ob_st_set_free(ob_st_set *s);
int64_t ob_st_set_n_tensors(const ob_st_set *s);
/* All tensors of all files, sorted by name. */
const ob_st_tensor *ob_st_set_tensor_at(const ob_st_set *s, int64_t i);
const ob_st_tensor *ob_st_set_find(const ob_st_set *s, const char *name);
int ob_st_set_n_files(const ob_st_set *s);

#endif
