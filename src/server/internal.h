/*
 * internal.h - what the files of src/server share and nobody else sees: the
 * server object, the HTTP response helpers and the generation job.
 *
 *   server.c   lifetime: bind, start libmicrohttpd, load the model on a
 *              background thread, shut down
 *   http.c     the libmicrohttpd callback: body, auth, routing, responses
 *   routes.c   the small endpoints (health, models, props, slots, metrics,
 *              tokenize, detokenize, apply-template) and embeddings, which run
 *              on embd_ctx under embd_lock, not on the engine
 *   complete.c /v1/chat/completions, /v1/completions, /completion: waiting
 *              (non-streaming) and Server-Sent Events (streaming)
 *   job.c      one request's choices: prompt -> engine requests -> text,
 *              stop strings, reasoning split, logprobs, usage, timings
 *   format.c   the JSON shapes of responses and stream chunks
 *   request.c  pure body parsing (request.h); text.c pure text logic (text.h);
 *              toolcall.c tool calls from the answer text (toolcall.h)
 *
 * Threads: libmicrohttpd runs one thread per connection; those threads parse,
 * tokenize, submit to the engine and wait for events. The engine thread is
 * the only one that runs the model. The server object is read-only after
 * start except the atomics and what `lock` guards.
 */
#ifndef OB_SERVER_INTERNAL_H
#define OB_SERVER_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "../router/service.h"
#include "buf.h"
#include "onebit.h"
#include "request.h"
#include "server.h"
#include "text.h"
#include "toolcall.h"

enum { SRV_LOADING = 0, SRV_READY = 1, SRV_FAILED = -1 };

struct ob_server {
    /* configuration, owned copies of ob_server_params */
    char *model_path, *host, *alias, *chat_template, *device;
    int n_gpu_layers;
    char *template_kwargs;        /* defaults.template_kwargs points here */
    char **api_keys; /* [n_api_keys] */
    int n_api_keys;
    bool any_model, quiet;
    size_t max_body;
    int timeout_s;
    ob_engine_params engine_params;
    ob_srv_defaults defaults;
    void (*before_load)(void *user);
    void *before_load_user;

    /* runtime */
    int listen_fd, port;
    struct MHD_Daemon *mhd;
    pthread_t loader;
    bool loader_started;
    pthread_mutex_t lock;         /* guards load_error and the wait for readiness */
    pthread_cond_t cond;
    atomic_int state;             /* SRV_LOADING -> SRV_READY | SRV_FAILED */
    atomic_int stopping;          /* set at shutdown: waits end, streams close */
    char load_error[512];
    ob_model *model;              /* valid once state is SRV_READY */
    ob_engine *engine;
    bool embeddings;              /* --embeddings: embd_ctx exists once ready */
    int pooling;                  /* requested (-1: the model's), then the one in use once ready */
    ob_context *embd_ctx;         /* one sequence, embeddings on; used under embd_lock */
    ob_route_service *router;     /* classifies chat requests; with --router also routes them (docs/router.md) */
    pthread_mutex_t embd_lock;
    char model_id[256];           /* the name /v1/models reports */
    int32_t n_ctx, n_vocab;
    time_t t_start;

    /* counters for /metrics (the engine keeps its own) */
    atomic_ullong http_by_class[6]; /* [status / 100] */
    atomic_ullong completions_total, streams_total, client_disconnects;
    atomic_int streams_active;
};

/* ---- http.c: responses (each adds CORS and Server headers and counts the status) ---- */
enum MHD_Result ob_srv_send_json(ob_server *s, struct MHD_Connection *c, unsigned status, json_t *body /* stolen */);
enum MHD_Result ob_srv_send_error(ob_server *s, struct MHD_Connection *c, const ob_srv_error *e);
enum MHD_Result ob_srv_send_text(ob_server *s, struct MHD_Connection *c, unsigned status, const char *content_type,
                                 const char *text, size_t len);
void ob_srv_add_headers(struct MHD_Response *r);
/* Every response to the request this thread is answering carries
 * `X-1bit-Route: value` (--router; copied, truncated to 191 bytes). */
void ob_srv_set_route_header(const char *value);
void ob_srv_count_status(ob_server *s, unsigned status);
/* JSON text of an error in OpenAI's shape (allocated by jansson: free()). */
char *ob_srv_error_json(const ob_srv_error *e);
/* False once the client has closed its connection (or reset it). */
bool ob_srv_client_alive(struct MHD_Connection *c);
/* Compact JSON text of v (jansson-allocated: free()); floats with 9 digits. */
char *ob_srv_dumps(const json_t *v);

/* ---- routes.c ---- */
typedef enum MHD_Result (*ob_srv_route_fn)(ob_server *s, struct MHD_Connection *c, const char *url, const char *body,
                                           size_t len);
enum MHD_Result ob_srv_health(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_models(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_props(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_slots(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_slot_action(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_metrics(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_tokenize(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_detokenize(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_apply_template(ob_server *s, struct MHD_Connection *c, const char *url, const char *body,
                                      size_t len);
enum MHD_Result ob_srv_embeddings(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_rerank(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_root(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);

/* Tokenize text into a new array (ob_free); errors mapped to HTTP. */
int ob_srv_tokenize_text(ob_server *s, const char *text, size_t len, bool add_special, bool parse_special, ob_token **ids,
                         int32_t *n, ob_srv_error *e);
/* Fill e for a failed tokenizer call: 501 when the build has none, else 400/500. */
void ob_srv_token_error(int rc, const char *what, ob_srv_error *e);

/* ---- complete.c ---- */
enum MHD_Result ob_srv_chat(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_completion(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
enum MHD_Result ob_srv_native_completion(ob_server *s, struct MHD_Connection *c, const char *url, const char *body,
                                         size_t len);

/* ---- job.c: one completions request in flight ---- */

/* Render a chat/apply-template request's context with the chat template
 * into *text (ob_free). */
int ob_srv_render(ob_server *s, const ob_srv_request *r, char **text, size_t *len, ob_srv_error *e);

typedef struct ob_srv_lp {
    ob_token id;
    float logprob;
    int32_t n_top;
    ob_token_logprob top[OB_MAX_TOP_LOGPROBS];
    size_t start, end;   /* byte range of its text in the generated text */
    int32_t text_offset; /* code points before it in the generated text */
} ob_srv_lp;

typedef struct ob_srv_choice {
    int index, prompt;          /* choice index in the response, prompt it answers */
    ob_request *req;
    ob_detokenizer *detok;
    ob_buf pending;             /* generated text not yet released (possible stop prefix) */
    size_t released;            /* bytes of generated text released so far */
    size_t gen_bytes;           /* bytes of generated text decoded so far */
    int32_t gen_cp;             /* code points of generated text decoded so far */
    ob_srv_think think;
    ob_buf content, reasoning;  /* released text not yet taken by the formatter */
    bool tools;                 /* the answer goes through the tool-call splitter (request had tools) */
    ob_tc_stream tc;
    ob_buf answer;              /* reasoning splitter output not yet given to the tool-call splitter */
    ob_tc_result calls;         /* tool calls, known once the choice is finished; ids filled in */
    bool calls_sent;            /* streaming bookkeeping (format.c) */
    ob_srv_lp *lp;              /* [n_lp] when logprobs were asked for */
    int n_lp, cap_lp, lp_ready, lp_taken;
    int n_tokens;               /* token events before any stop match */
    bool stop_hit;              /* one of the stop strings ended it */
    int stop_which;
    bool finished;              /* DONE seen (or failed before submit) */
    bool final_sent, role_sent; /* streaming bookkeeping (format.c) */
    bool failed;                /* a detokenizer/engine error */
    char fail_msg[256];
    ob_event done;              /* the DONE event */
} ob_srv_choice;

typedef struct ob_srv_job {
    ob_server *srv;
    ob_srv_request req;
    char id[64];
    long long created;
    ob_srv_choice *ch;          /* [n_ch] */
    int n_ch;
    int32_t *prompt_tokens;     /* [req.n_prompts] tokens of each prompt */
    char **prompt_text;         /* [req.n_prompts] prompt as text (echo, /completion "prompt") */
    bool think_opened;          /* the rendered chat prompt ended inside <think> */
    ob_tc_format tc_format;     /* tool-call format the chat template teaches */
    bool usage_sent, done_sent; /* streaming bookkeeping */
    bool routed;                /* --router: choices take route's target settings */
    ob_route_decision route;    /* the router's decision (chat requests) */
} ob_srv_job;

/* Validate the model name, render and tokenize the prompts, and submit one
 * engine request per choice. Takes ownership of *req (it is emptied) on
 * success and on failure. Returns 0 or a status with *err set. */
int ob_srv_job_start(ob_server *s, ob_srv_request *req, ob_srv_job **out, ob_srv_error *err);
/* Handle the events that are ready (at most max_per_choice per choice),
 * waiting up to timeout_ms when none is. Returns 1 if anything happened. */
int ob_srv_job_poll(ob_srv_job *j, int timeout_ms, int max_per_choice);
bool ob_srv_job_finished(const ob_srv_job *j);
/* The first failed choice (engine or detokenizer error), or NULL. */
const ob_srv_choice *ob_srv_job_failure(const ob_srv_job *j);
void ob_srv_job_cancel(ob_srv_job *j);
void ob_srv_job_free(ob_srv_job *j);
/* Tokens a choice generated (what usage counts). */
int32_t ob_srv_choice_completion_tokens(const ob_srv_choice *c);
const char *ob_srv_choice_finish_reason(const ob_srv_choice *c);

/* ---- format.c: the JSON of responses ---- */
json_t *ob_srv_job_response(ob_srv_job *j);
/* Append the SSE events for everything new since the last call; sets *ended
 * once the stream's last event has been appended. */
int ob_srv_job_stream(ob_srv_job *j, ob_buf *out, bool *ended);
json_t *ob_srv_usage_json(const ob_srv_job *j);
json_t *ob_srv_timings_json(const ob_srv_choice *const *chs, int n);
/* A token's text for logprobs: lossy UTF-8 (U+FFFD for a partial character)
 * and its exact bytes. */
json_t *ob_srv_token_text(ob_server *s, ob_token id, json_t **bytes_out);

/* ---- server.c ---- */
bool ob_srv_model_name_ok(const ob_server *s, const char *name);
void ob_srv_random_id(const char *prefix, char *out, size_t size);
uint64_t ob_srv_random_u64(void);

#endif
