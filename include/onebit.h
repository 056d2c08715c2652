/*
 * onebit.h - the public C API of the 1bit engine.
 *
 * This is the only header the CLI, the server and outside programs include.
 * It owns the status convention (0 ok, negative ob_status on error) and the
 * per-thread error message that says *why* a call failed. Models, contexts and
 * sampling join this header as the engine grows; everything below it (GGUF,
 * quant formats, backends) stays private to the library.
 */
#ifndef ONEBIT_H
#define ONEBIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OB_VERSION_MAJOR 0
#define OB_VERSION_MINOR 1
#define OB_VERSION_PATCH 0

/* Every fallible call returns 0 (OB_OK) or one of these negative codes. */
typedef enum ob_status {
    OB_OK = 0,
    OB_ERR_INVALID_ARG = -1, /* a caller passed something out of contract */
    OB_ERR_OOM = -2,         /* an allocation failed */
    OB_ERR_IO = -3,          /* open/read/write/mmap failed */
    OB_ERR_FORMAT = -4,      /* malformed input (file bytes, JSON, ...) */
    OB_ERR_UNSUPPORTED = -5, /* well-formed but not something we implement */
    OB_ERR_NOT_FOUND = -6,   /* a named key, tensor or file does not exist */
    OB_ERR_RANGE = -7,       /* a value is outside what it may be */
    OB_ERR_DEVICE = -8,      /* a backend (GPU) call failed */
    OB_ERR_FULL = -9,        /* a bounded resource (KV cache, queue) is full */
    OB_ERR_CANCELLED = -10,  /* the work was cancelled */
    OB_ERR_INTERNAL = -11,   /* should not happen; a bug */
} ob_status;

/* A short constant name for a status, e.g. "format error". Never NULL. */
const char *ob_status_str(int status);

/* The message of the last failure on this thread ("" if none). It names the
 * key, tensor or byte offset that was wrong. Valid until the next failing
 * call on the same thread. */
const char *ob_last_error(void);

/* "0.1.0 (commit abc1234)". */
const char *ob_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* ONEBIT_H */
