/*
 * buf.h - a growable byte buffer for the server (response bodies, SSE
 * chunks, text held back while streaming). Memory comes from ob_malloc so
 * allocation-failure tests reach it; a failed append leaves the buffer as it
 * was and returns OB_ERR_OOM. Contents are always NUL-terminated so the data
 * can be handed to C string functions.
 */
#ifndef OB_SERVER_BUF_H
#define OB_SERVER_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ob_buf {
    char *data; /* [cap]; NULL until the first append */
    size_t len, cap;
} ob_buf;

int ob_buf_reserve(ob_buf *b, size_t extra);
int ob_buf_append(ob_buf *b, const char *s, size_t n);
int ob_buf_puts(ob_buf *b, const char *s);
int ob_buf_printf(ob_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes (n <= len), moving the rest to the front. */
void ob_buf_consume(ob_buf *b, size_t n);
void ob_buf_clear(ob_buf *b);
void ob_buf_free(ob_buf *b);

#endif
