/*
 * buf.c - the growable byte buffer of buf.h. Capacity doubles, so appending
 * one token's text at a time stays linear overall.
 */
#include "buf.h"

#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"

int ob_buf_reserve(ob_buf *b, size_t extra) {
    if (extra > ((size_t)-1) / 2 - b->len) return ob_err(OB_ERR_OOM, "buffer of %zu bytes", b->len);
    size_t need = b->len + extra + 1; /* + NUL */
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = ob_realloc(b->data, cap);
    if (!p) return ob_err(OB_ERR_OOM, "buffer of %zu bytes", cap);
    b->data = p;
    b->cap = cap;
    return 0;
}

int ob_buf_append(ob_buf *b, const char *s, size_t n) {
    OB_TRY(ob_buf_reserve(b, n));
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int ob_buf_puts(ob_buf *b, const char *s) { return ob_buf_append(b, s, strlen(s)); }

int ob_buf_printf(ob_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return ob_err(OB_ERR_INTERNAL, "format");
    OB_TRY(ob_buf_reserve(b, (size_t)n));
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void ob_buf_consume(ob_buf *b, size_t n) {
    if (n >= b->len) {
        ob_buf_clear(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void ob_buf_clear(ob_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void ob_buf_free(ob_buf *b) {
    ob_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
