/*
 * log.h - leveled logging to stderr (or a host callback).
 *
 * The level comes from OB_LOG=error|warn|info|debug (default warn) or
 * ob_log_set_level(). Logging is for people; failures still travel as
 * statuses with ob_err() messages.
 */
#ifndef OB_CORE_LOG_H
#define OB_CORE_LOG_H

#include "status.h"

typedef enum ob_log_level {
    OB_LOG_ERROR = 0,
    OB_LOG_WARN = 1,
    OB_LOG_INFO = 2,
    OB_LOG_DEBUG = 3,
} ob_log_level;

typedef void (*ob_log_fn)(ob_log_level level, const char *msg, void *user);

void ob_log_set_level(ob_log_level level);
ob_log_level ob_log_get_level(void);
/* Parse "error", "warn", "info", "debug" (or 0-3); returns -1 if unknown. */
int ob_log_parse_level(const char *s);
/* Send messages to fn instead of stderr (NULL restores stderr). */
void ob_log_set_callback(ob_log_fn fn, void *user);

void ob_log(ob_log_level level, const char *fmt, ...) OB_PRINTF(2, 3);

#define OB_LOGE(...) ob_log(OB_LOG_ERROR, __VA_ARGS__)
#define OB_LOGW(...) ob_log(OB_LOG_WARN, __VA_ARGS__)
#define OB_LOGI(...) ob_log(OB_LOG_INFO, __VA_ARGS__)
#define OB_LOGD(...) ob_log(OB_LOG_DEBUG, __VA_ARGS__)

#endif
