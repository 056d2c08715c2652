/*
 * log.c - the logger. The level is read from OB_LOG once, lazily; a
 * process-wide mutex keeps lines from different threads whole.
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_level = -1; /* -1: not read from the environment yet */
static ob_log_fn g_fn;
static void *g_user;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

int ob_log_parse_level(const char *s) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (!s) return -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) return i;
    if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0') return s[0] - '0';
    return -1;
}

ob_log_level ob_log_get_level(void) {
    if (g_level < 0) {
        int l = ob_log_parse_level(getenv("OB_LOG"));
        g_level = l < 0 ? OB_LOG_WARN : l;
    }
    return (ob_log_level)g_level;
}

void ob_log_set_level(ob_log_level level) { g_level = (int)level; }

void ob_log_set_callback(ob_log_fn fn, void *user) {
    pthread_mutex_lock(&g_lock);
    g_fn = fn;
    g_user = user;
    pthread_mutex_unlock(&g_lock);
}

void ob_log(ob_log_level level, const char *fmt, ...) {
    if ((int)level > (int)ob_log_get_level()) return;
    static const char *tags[] = {"error", "warn", "info", "debug"};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_lock);
    if (g_fn)
        g_fn(level, buf, g_user);
    else
        fprintf(stderr, "1bit %s: %s\n", tags[level], buf);
    pthread_mutex_unlock(&g_lock);
}
