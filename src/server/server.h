/*
 * server.h - the OpenAI-compatible HTTP server behind `1bit serve`.
 *
 *     ob_server_params p;
 *     ob_server_default_params(&p);
 *     p.model_path = "model.gguf";
 *     p.port = 0;                       // any free port
 *     ob_server *s;
 *     if (ob_server_start(&p, &s) == 0) {
 *         printf("port %d\n", ob_server_port(s));
 *         ob_server_wait_ready(s, -1);  // the model loads in the background
 *         ...
 *         ob_server_stop(s);
 *     }
 *
 * ob_server_start binds the socket and starts answering at once (/health says
 * "loading" with 503 until the model is ready), then loads the model and
 * starts the engine on a background thread. Everything the server serves and
 * every flag of `1bit serve` is described in docs/serve.md.
 */
#ifndef OB_SERVER_SERVER_H
#define OB_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "onebit.h"
#include "request.h"

typedef struct ob_server ob_server;

typedef struct ob_server_params {
    const char *model_path;      /* GGUF file (required) */
    const char *host;            /* address to bind (default "127.0.0.1") */
    int port;                    /* default 8080; 0 = any free port (see ob_server_port) */
    const char *alias;           /* model id clients see; NULL: the file's name.
                                    A comma-separated list gives several accepted names. */
    bool any_model;              /* accept any "model" in requests (llama-server's behaviour) */
    const char *device;          /* ob_model_params.device: "cpu", "cuda", "cuda:N", "auto" */
    int n_gpu_layers;            /* ob_model_params.n_gpu_layers (-ngl N): 0 = all on the GPU */
    ob_engine_params engine;     /* slots, context, batch, threads, KV, queue */
    const char *const *api_keys; /* [n_api_keys] accepted keys (copied); none: no auth */
    int n_api_keys;
    const char *chat_template;   /* template text overriding the model's (copied), or NULL */
    size_t max_body;             /* largest request body in bytes (default 8 MiB) */
    int timeout_s;               /* idle connection timeout (default 600) */
    ob_srv_defaults defaults;    /* sampling defaults, max tokens, reasoning split */
    bool quiet;                  /* no request log lines */
    bool embeddings;             /* serve /v1/embeddings (a second context, one request at a time) */
    int pooling;                 /* OB_SRV_POOL_*; -1: the model's <arch>.pooling_type, else last */
    bool router;                 /* --router: route chat requests by the policy, X-1bit-Route header (docs/router.md) */
    const char *route_policy;    /* --route-policy FILE, or NULL: every class keeps the server's settings */
    float route_min_conf;        /* --route-min-conf; < 0: the policy's min_conf, else 0 */
    /* Called on the loader thread just before the model loads, or NULL.
     * Tests use it to hold the server in its "loading" state. */
    void (*before_load)(void *user);
    void *before_load_user;
} ob_server_params;

/* Pooling of per-token hidden states into one embedding (GGUF pooling_type values). */
enum { OB_SRV_POOL_NONE = 0, OB_SRV_POOL_MEAN = 1, OB_SRV_POOL_CLS = 2, OB_SRV_POOL_LAST = 3, OB_SRV_POOL_RANK = 4 };
/* "none", "mean", "cls", "last", "rank" -> OB_SRV_POOL_*, or -1. */
int ob_srv_pooling_parse(const char *name);
const char *ob_srv_pooling_name(int pooling);

void ob_server_default_params(ob_server_params *p);

/* Bind, start serving and start loading the model. Errors (bad host, port
 * in use, missing model path) come back here; a model that fails to load is
 * reported by ob_server_wait_ready. */
int ob_server_start(const ob_server_params *p, ob_server **out);
/* The bound port (the chosen one when params.port was 0). */
int ob_server_port(const ob_server *s);
/* Wait until the model is loaded: 0 ready, 1 still loading after timeout_ms
 * (-1 waits forever), or the load's negative status, with its message in
 * ob_last_error() on the calling thread. */
int ob_server_wait_ready(ob_server *s, int timeout_ms);
/* Stop accepting, end every request and stream (they finish cancelled),
 * join all threads, free the engine and the model, free s. NULL is fine. */
void ob_server_stop(ob_server *s);

#endif
