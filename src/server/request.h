/*
 * request.h - parsing and validation of API request bodies, as pure
 * functions: bytes in, a validated ob_srv_request (or an OpenAI-style error)
 * out. No model, no socket, no global state, so the fuzz target and the unit
 * tests call exactly what the HTTP handlers call.
 *
 * What is checked here: JSON syntax (jansson also rejects invalid UTF-8 and
 * NUL characters), the type of every field we know (a wrong type is a 400
 * that names the field), ranges, the shape of `messages` and `prompt`, and
 * fields that we know but cannot honour (logit_bias, grammar, json_schema
 * response formats, ...), which are refused rather than silently ignored
 * because ignoring them would change the answer. Unknown fields are ignored,
 * as OpenAI and llama-server do.
 *
 * What is left to the handler (it needs the model): rendering the chat
 * template, tokenizing, the context-length check and vocabulary range of
 * token-id prompts.
 */
#ifndef OB_SERVER_REQUEST_H
#define OB_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onebit.h"

/* Which API a body is for: it decides the required fields and the types of
 * fields that differ between them (logprobs is a bool in chat and an integer
 * in completions). */
typedef enum ob_srv_api {
    OB_SRV_CHAT = 0,        /* POST /v1/chat/completions */
    OB_SRV_COMPLETION = 1,  /* POST /v1/completions (OpenAI legacy completions) */
    OB_SRV_NATIVE = 2,      /* POST /completion (llama-server's own shape) */
    OB_SRV_TEMPLATE = 3,    /* POST /apply-template (messages only, no sampling) */
    OB_SRV_API_COUNT = 4,
} ob_srv_api;

/* Limits a request may not exceed (documented in docs/serve.md). */
#define OB_SRV_MAX_CHOICES 64   /* prompts x n */
#define OB_SRV_MAX_N 16
#define OB_SRV_MAX_STOP 16
#define OB_SRV_MAX_STOP_LEN 256 /* bytes per stop string (the hold-back search is quadratic in it) */

/* An HTTP error in OpenAI's shape:
 *   {"error": {"message": message, "type": type, "param": param|null, "code": code}} */
typedef struct ob_srv_error {
    int http;          /* 400, 401, 404, 413, 500, 501, 503 */
    const char *type;  /* "invalid_request_error", "authentication_error", ... (static) */
    const char *code;  /* "invalid_type", "context_length_exceeded", ... (static) */
    char param[96];    /* the offending field ("messages[2].content"), "" for none */
    char message[512];
} ob_srv_error;

/* Fill an error; returns `status` so a parser can `return ob_srv_fail(...)`. */
int ob_srv_fail(ob_srv_error *e, int status, int http, const char *type, const char *code, const char *param,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* Server-side defaults that a request may override (from serve flags). */
typedef struct ob_srv_defaults {
    ob_sampler_params sampling;
    bool fixed_seed;    /* sampling.seed is the default seed (--seed); else each request gets a random one */
    int32_t max_tokens; /* <= 0: until end of generation or the context is full */
    int reasoning;      /* 0: leave <think> in the content, 1: split it into reasoning_content */
    const char *template_kwargs; /* JSON object text: template variables for every chat request
                                    (--chat-template-kwargs); a request's own keys win. NULL: none */
} ob_srv_defaults;

void ob_srv_defaults_init(ob_srv_defaults *d);

/* One prompt of a completions request: text, or token ids as given. */
typedef struct ob_srv_prompt {
    char *text;        /* NUL-terminated, or NULL when ids are given */
    size_t len;
    ob_token *ids;     /* [n_ids] when the client sent token ids */
    int32_t n_ids;
} ob_srv_prompt;

typedef struct ob_srv_request {
    ob_srv_api api;
    char *model;               /* as sent, or NULL */
    /* completions: one or more prompts (each gets n choices) */
    ob_srv_prompt *prompts;    /* [n_prompts] */
    int n_prompts;
    /* chat and apply-template: the template context, a JSON object text
     * {"messages": [...], "add_generation_prompt": true, "tools": [...], <chat_template_kwargs>} */
    char *chat_context;
    size_t chat_context_len;
    int n_messages;
    /* generation */
    ob_gen_params gen;         /* sampling, max_tokens, ignore_eos, top_logprobs (-1: none) */
    bool has_seed;             /* false: the handler picks a random seed */
    int n;                     /* choices per prompt */
    bool stream, include_usage;
    bool echo;                 /* completions: the prompt text is prepended to each choice */
    int reasoning;             /* 0/1, from the request or the server default */
    bool tools;                /* chat with tools (tool_choice not "none"): parse the answer for tool calls */
    bool parallel_tool_calls;  /* false: keep only the first call */
    char **stop;               /* [n_stop] non-empty stop strings */
    int n_stop;
} ob_srv_request;

/* Parse and validate one body. Returns 0 with *out filled (free it with
 * ob_srv_request_free), or a negative status with *err filled and *out
 * empty. Never reads past body[len-1]; body need not be NUL-terminated. */
int ob_srv_request_parse(ob_srv_api api, const char *body, size_t len, const ob_srv_defaults *defaults,
                         ob_srv_request *out, ob_srv_error *err);
void ob_srv_request_free(ob_srv_request *r);

#endif
