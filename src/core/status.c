/*
 * status.c - per-thread error messages, status names and the abort hook.
 *
 * Messages live in a thread-local buffer so concurrent callers (HTTP
 * threads, the engine thread) never see each other's errors.
 */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OB_ERR_MSG_MAX 1024

static _Thread_local char g_msg[OB_ERR_MSG_MAX];

const char *ob_status_str(int status) {
    switch (status) {
    case OB_OK: return "ok";
    case OB_ERR_INVALID_ARG: return "invalid argument";
    case OB_ERR_OOM: return "out of memory";
    case OB_ERR_IO: return "i/o error";
    case OB_ERR_FORMAT: return "format error";
    case OB_ERR_UNSUPPORTED: return "unsupported";
    case OB_ERR_NOT_FOUND: return "not found";
    case OB_ERR_RANGE: return "out of range";
    case OB_ERR_DEVICE: return "device error";
    case OB_ERR_FULL: return "full";
    case OB_ERR_CANCELLED: return "cancelled";
    case OB_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
    }
}

const char *ob_last_error(void) { return g_msg; }

void ob_err_clear(void) { g_msg[0] = '\0'; }

int ob_err(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return status;
}

int ob_err_wrap(int status, const char *fmt, ...) {
    char old[OB_ERR_MSG_MAX];
    memcpy(old, g_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof g_msg && old[0])
        snprintf(g_msg + n, sizeof g_msg - (size_t)n, ": %s", old);
    return status;
}

static void default_abort(const char *msg) {
    fputs(msg, stderr);
    fputc('\n', stderr);
    abort();
}

static ob_abort_fn g_abort = default_abort;

void ob_set_abort_hook(ob_abort_fn fn) { g_abort = fn ? fn : default_abort; }

void ob_assert_fail(const char *expr, const char *file, int line) {
    char buf[512];
    snprintf(buf, sizeof buf, "1bit: assertion failed: %s (%s:%d)", expr, file, line);
    g_abort(buf);
    abort(); /* the hook must not return */
}
