/*
 * status.h - error reporting inside the library.
 *
 * Convention: 0 ok, negative ob_status on failure (see include/onebit.h).
 * A failing function records a human message with ob_err() and returns the
 * code, so one line both explains and propagates:
 *
 *     if (off + 8 > size)
 *         return ob_err(OB_ERR_FORMAT, "key '%s': value runs past end of file", k);
 *
 * Broken invariants (our own bugs) use OB_ASSERT, which prints the expression
 * and calls an abort hook that the host may replace (tests do).
 */
#ifndef OB_CORE_STATUS_H
#define OB_CORE_STATUS_H

#include "onebit.h"

#if defined(__GNUC__)
#define OB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define OB_NORETURN __attribute__((noreturn))
#define OB_LIKELY(x) __builtin_expect(!!(x), 1)
#define OB_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define OB_PRINTF(f, a)
#define OB_NORETURN
#define OB_LIKELY(x) (x)
#define OB_UNLIKELY(x) (x)
#endif

/* Record a formatted message for ob_last_error() and return `status`. */
int ob_err(int status, const char *fmt, ...) OB_PRINTF(2, 3);

/* Prefix the current message with context: "loading x.gguf: <old message>".
 * Returns `status` unchanged so it can be used in a return statement. */
int ob_err_wrap(int status, const char *fmt, ...) OB_PRINTF(2, 3);

/* Forget the last message on this thread. */
void ob_err_clear(void);

/* Broken invariants. The hook must not return; the default prints and aborts. */
typedef void (*ob_abort_fn)(const char *msg);
void ob_set_abort_hook(ob_abort_fn fn);
OB_NORETURN void ob_assert_fail(const char *expr, const char *file, int line);

#define OB_ASSERT(x) \
    do { if (OB_UNLIKELY(!(x))) ob_assert_fail(#x, __FILE__, __LINE__); } while (0)

/* Propagate a negative status. */
#define OB_TRY(expr) \
    do { int ob_try_rc_ = (expr); if (ob_try_rc_ < 0) return ob_try_rc_; } while (0)

#define OB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
