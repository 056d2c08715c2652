/*
 * chat.h - chat templates: turning a conversation (messages, tools, flags)
 * into the exact prompt text a model was trained on.
 *
 * A model's GGUF carries its template as Jinja source
 * (tokenizer.chat_template). We run it on our own Jinja interpreter, which
 * reproduces what Python's jinja2 prints under transformers' settings byte
 * for byte on real templates (tests/test_chat.c checks this against
 * fixtures rendered by Python). What is supported and how values print is
 * described in docs/chat-templates.md.
 *
 *     ob_chat_template *t;
 *     if (ob_chat_template_parse(src, strlen(src), &t) < 0) ... ob_last_error()
 *     json_t *ctx;
 *     ob_chat_context_build(request, "<s>", "</s>", &ctx);
 *     char *text; size_t len;
 *     int rc = ob_chat_template_render(t, ctx, NULL, &text, &len);
 *     ... ob_free(text); json_decref(ctx); ob_chat_template_free(t);
 *
 * Errors name the template line: "chat template syntax error at line 3,
 * column 7: ..." (OB_ERR_FORMAT) from parsing; "chat template error at line
 * 12, column 5: ..." from rendering (OB_ERR_FORMAT for type errors and undefined
 * values, OB_ERR_INVALID_ARG when the template calls raise_exception, which
 * templates use to reject a conversation they cannot format, OB_ERR_RANGE
 * when a limit is hit).
 *
 * The HTTP server and the CLI use this; it knows nothing of either.
 */
#ifndef OB_CHAT_CHAT_H
#define OB_CHAT_CHAT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct ob_chat_template ob_chat_template;

/* ---- templates ---- */

/* Parse template source (UTF-8; need not be NUL-terminated). The result is
 * read-only: several threads may render it at once. */
int ob_chat_template_parse(const char *text, size_t len, ob_chat_template **out);
void ob_chat_template_free(ob_chat_template *t);

/* A ChatML template (<|im_start|>role\n...<|im_end|>\n) for models whose
 * GGUF has no tokenizer.chat_template. Static storage. */
const char *ob_chat_template_chatml(void);

/* ---- rendering ---- */

/* Defaults for the render limits. A template that goes past one fails with
 * OB_ERR_RANGE instead of hanging or exhausting memory. */
#define OB_CHAT_DEFAULT_MAX_OUTPUT ((size_t)32 << 20) /* bytes of output */
#define OB_CHAT_DEFAULT_MAX_MEMORY ((size_t)256 << 20) /* bytes of working memory */
#define OB_CHAT_DEFAULT_MAX_STEPS 20000000ull          /* expressions + loop iterations */
#define OB_CHAT_DEFAULT_MAX_DEPTH 500                  /* nested expressions, blocks and macro calls */

typedef struct ob_chat_render_opts {
    const struct tm *now; /* what strftime_now() sees; NULL: the current local time */
    size_t max_output;    /* 0: the default, for this and the rest */
    size_t max_memory;
    uint64_t max_steps;
    int max_depth;
} ob_chat_render_opts;

/* Render `vars` (a JSON object; every key is a top-level template
 * variable) with t. opts may be NULL. On success *out is an ob_malloc'd,
 * NUL-terminated string of *out_len bytes (the text itself may contain NUL
 * bytes if the template writes them); free it with ob_free. `vars` is only
 * read, and may be shared between threads. */
int ob_chat_template_render(const ob_chat_template *t, const json_t *vars, const ob_chat_render_opts *opts,
                            char **out, size_t *out_len);

/* ---- the variables a template sees ---- */

/* The variables transformers' apply_chat_template passes: every key of
 * `request` (messages, enable_thinking, documents, ...), plus the keys it
 * always defines when the caller did not: tools = null, documents = null,
 * add_generation_prompt = false, and bos_token / eos_token from the model
 * (skipped when NULL). "messages" must be an array. Templates test
 * `tools is not none` or `tools is defined`, so the null matters.
 * *out is a new object (json_decref it); values are shared, not copied. */
int ob_chat_context_build(const json_t *request, const char *bos_token, const char *eos_token, json_t **out);

/* Parse "YYYY-MM-DD", "YYYY-MM-DDTHH:MM" or "YYYY-MM-DDTHH:MM:SS" (a space
 * may replace the T) into *out, weekday and day of year filled in. */
int ob_chat_parse_time(const char *s, struct tm *out);

#endif
