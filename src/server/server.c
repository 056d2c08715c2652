/*
 * server.c - the server's lifetime: bind the socket ourselves (so errors are
 * clear and port 0 works), hand it to libmicrohttpd in thread-per-connection
 * mode, load the model and start the engine on a background thread, and
 * shut everything down in an order that never leaves a thread waiting on
 * something already freed:
 *
 *   stopping = 1          every handler and stream notices within ~50 ms,
 *                         cancels its engine requests and returns
 *   MHD_stop_daemon       closes the listening socket and joins every
 *                         connection thread
 *   join the loader       (a load in progress finishes first)
 *   free engine, model
 *
 * Thread-per-connection keeps each handler a plain blocking loop (wait for
 * an event, write a chunk) and scales to the hundreds of concurrent streams
 * a single-box server sees; the model never runs on these threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "internal.h"

void ob_server_default_params(ob_server_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->device = "auto";
    p->engine = ob_engine_default_params();
    p->engine.n_parallel = 4;
    p->engine.queue_max = 128;
    p->max_body = (size_t)8 << 20;
    p->timeout_s = 600;
    p->pooling = -1;
    p->route_min_conf = -1.0f;
    ob_srv_defaults_init(&p->defaults);
}

/* ---------------- randomness for ids and seeds ---------------- */

uint64_t ob_srv_random_u64(void) {
    uint64_t x;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) == (ssize_t)sizeof x) return x;
    /* no entropy yet (early boot): time and a counter still differ per call */
    static atomic_ullong counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    return x;
}

void ob_srv_random_id(const char *prefix, char *out, size_t size) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    size_t n = (size_t)snprintf(out, size, "%s", prefix);
    uint64_t bits = 0;
    for (int i = 0; i < 24 && n + 1 < size; i++) {
        if (i % 8 == 0) bits = ob_srv_random_u64();
        out[n++] = alphabet[bits % 62];
        bits /= 62;
    }
    out[n < size ? n : size - 1] = '\0';
}

/* ---------------- model names ---------------- */

static bool name_in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return true;
        p = comma ? comma + 1 : NULL;
    }
    return false;
}

/* Accepted: the id we report, every alias, the file's name with or without
 * ".gguf", the path as given, and the model's general.name. */
bool ob_srv_model_name_ok(const ob_server *s, const char *name) {
    if (s->any_model || !name || !*name) return true;
    if (!strcmp(name, s->model_id) || !strcmp(name, s->model_path)) return true;
    if (s->alias && name_in_list(s->alias, name)) return true;
    const char *base = strrchr(s->model_path, '/');
    base = base ? base + 1 : s->model_path;
    size_t bl = strlen(base);
    if (!strcmp(name, base)) return true;
    if (bl > 5 && !strcmp(base + bl - 5, ".gguf") && strlen(name) == bl - 5 && !strncmp(name, base, bl - 5)) return true;
    if (s->model && !strcmp(name, ob_model_name(s->model))) return true;
    return false;
}

/* ---------------- loading ---------------- */

int ob_srv_pooling_parse(const char *name) {
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *ob_srv_pooling_name(int pooling) {
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    return pooling >= 0 && pooling < 5 ? names[pooling] : "unknown";
}

/* --embeddings: a context of its own (one sequence, the engine's context
 * size) so embedding requests never wait behind generation, and the pooling
 * in use: --pooling, else the model's pooling_type, else last (the
 * decoder-model convention, e.g. Qwen3-Embedding). */
static int embeddings_context(ob_server *s, ob_model *m) {
    int pool = s->pooling >= 0 ? s->pooling : ob_model_pooling_type(m);
    if (pool < 0) pool = OB_SRV_POOL_LAST;
    if (pool == OB_SRV_POOL_RANK)
        return ob_err(OB_ERR_UNSUPPORTED, "pooling 'rank' (reranking models) is not supported; use --pooling mean, cls or last");
    if (pool > OB_SRV_POOL_RANK) return ob_err(OB_ERR_UNSUPPORTED, "the model's pooling_type %d is unknown", pool);
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = s->n_ctx;
    cp.n_seq_max = 1;
    /* an encoder sees its whole input at once: one batch holds the context */
    cp.n_batch = s->n_ctx < 512 || ob_model_is_encoder(m) ? s->n_ctx : 512;
    cp.n_threads = s->engine_params.n_threads;
    cp.kv_type = s->engine_params.kv_type;
    OB_TRY(ob_context_create(m, &cp, &s->embd_ctx));
    int rc = ob_context_set_embeddings(s->embd_ctx, true);
    if (rc < 0) {
        ob_context_free(s->embd_ctx);
        s->embd_ctx = NULL;
        return rc;
    }
    s->pooling = pool;
    return 0;
}

static void *loader_main(void *arg) {
    ob_server *s = arg;
    if (s->before_load) s->before_load(s->before_load_user);
    ob_model_params mp = ob_model_default_params();
    mp.device = s->device;
    mp.n_gpu_layers = s->n_gpu_layers;
    ob_model *m = NULL;
    ob_engine *e = NULL;
    int rc = ob_model_load(s->model_path, &mp, &m);
    if (rc == 0 && ob_model_is_encoder(m) && !s->embeddings)
        rc = ob_err(OB_ERR_UNSUPPORTED, "'%s' is an encoder (an embedding model, %s): it cannot generate text; start "
                    "the server with --embeddings to serve POST /v1/embeddings", s->model_path, ob_model_arch(m));
    if (rc == 0) {
        ob_engine_params ep = s->engine_params;
        ep.spec.draft_device = s->device; /* a draft model goes where the target goes */
        /* -c is the context of each sequence (llama-server divides it among
         * slots; users trip over that, so we do not). The KV pool defaults to
         * --parallel full sequences; --kv-size sets it (kv_blocks) smaller or
         * larger, and the engine preempts when requests together need more. */
        int32_t n_ctx = ep.n_ctx > 0 ? ep.n_ctx : ob_model_n_ctx_train(m);
        if (ep.n_ctx <= 0 && n_ctx > 4096) n_ctx = 4096;
        if (n_ctx <= 0) n_ctx = 4096;
        ep.n_ctx = n_ctx;
        rc = ob_engine_create(m, &ep, &e);
        if (rc == 0) s->n_ctx = ob_engine_get_params(e)->n_ctx;
        if (rc == 0 && s->embeddings) rc = embeddings_context(s, m);
    }
    pthread_mutex_lock(&s->lock);
    if (rc == 0) {
        s->model = m;
        s->engine = e;
        s->n_vocab = ob_model_n_vocab(m);
        atomic_store(&s->state, SRV_READY);
        OB_LOGI("serve: model ready: %s (context %d, %d slots)", s->model_id, s->n_ctx, s->engine_params.n_parallel);
        if (s->embd_ctx) OB_LOGI("serve: embeddings on, pooling %s", ob_srv_pooling_name(s->pooling));
    } else {
        snprintf(s->load_error, sizeof s->load_error, "%s", ob_last_error());
        ob_engine_free(e);
        ob_model_free(m);
        atomic_store(&s->state, SRV_FAILED);
        OB_LOGE("serve: cannot load the model: %s", s->load_error);
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int ob_server_wait_ready(ob_server *s, int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms > 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    while (atomic_load(&s->state) == SRV_LOADING && timeout_ms != 0) {
        if (timeout_ms < 0) pthread_cond_wait(&s->cond, &s->lock);
        else if (pthread_cond_timedwait(&s->cond, &s->lock, &until) == ETIMEDOUT) break;
    }
    int st = atomic_load(&s->state);
    int rc = st == SRV_READY ? 0 : st == SRV_LOADING ? 1 : ob_err(OB_ERR_IO, "%s", s->load_error);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---------------- binding ---------------- */

static int bind_socket(const char *host, int port, int *fd_out, int *port_out) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    int gai = getaddrinfo(host, port_s, &hints, &res);
    if (gai != 0) return ob_err(OB_ERR_INVALID_ARG, "cannot resolve host '%s': %s", host, gai_strerror(gai));
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 512) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return ob_err(OB_ERR_IO, "cannot listen on %s:%d: %s", host, port, strerror(err));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return ob_err(OB_ERR_IO, "getsockname: %s", strerror(errno));
    }
    *port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return 0;
}

/* ---------------- start / stop ---------------- */

/* http.c */
enum MHD_Result ob_srv_on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls);
void ob_srv_on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe);

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';
    OB_LOGD("http: %s", msg);
}

static char *dup_or_null(const char *s) { return s ? ob_strdup(s) : NULL; }

int ob_server_start(const ob_server_params *p, ob_server **out) {
    *out = NULL;
    if (!p->model_path || !*p->model_path) return ob_err(OB_ERR_INVALID_ARG, "no model (-m MODEL.gguf)");
    if (access(p->model_path, R_OK) != 0)
        return ob_err(OB_ERR_IO, "cannot read the model '%s': %s", p->model_path, strerror(errno));
    ob_server *s = ob_calloc(1, sizeof *s);
    if (!s) return ob_err(OB_ERR_OOM, "server");
    s->listen_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_mutex_init(&s->embd_lock, NULL);
    s->embeddings = p->embeddings;
    s->pooling = p->pooling;
    s->model_path = ob_strdup(p->model_path);
    s->host = ob_strdup(p->host ? p->host : "127.0.0.1");
    s->alias = p->alias && *p->alias ? ob_strdup(p->alias) : NULL;
    s->chat_template = dup_or_null(p->chat_template);
    s->device = ob_strdup(p->device ? p->device : "auto");
    s->n_gpu_layers = p->n_gpu_layers;
    s->any_model = p->any_model;
    s->quiet = p->quiet;
    s->max_body = p->max_body ? p->max_body : (size_t)8 << 20;
    s->timeout_s = p->timeout_s > 0 ? p->timeout_s : 600;
    s->engine_params = p->engine;
    if (s->engine_params.n_parallel <= 0) s->engine_params.n_parallel = 1;
    s->defaults = p->defaults;
    s->defaults.template_kwargs = NULL;
    s->before_load = p->before_load;
    s->before_load_user = p->before_load_user;
    s->t_start = time(NULL);
    int rc = s->model_path && s->host && s->device ? 0 : ob_err(OB_ERR_OOM, "server");
    if (rc == 0 && p->defaults.template_kwargs) {
        json_error_t jerr;
        json_t *kw = json_loads(p->defaults.template_kwargs, 0, &jerr);
        if (!json_is_object(kw))
            rc = ob_err(OB_ERR_INVALID_ARG, "chat template kwargs must be a JSON object: %s",
                        kw ? "got another JSON value" : jerr.text);
        json_decref(kw);
        if (rc == 0 && !(s->template_kwargs = ob_strdup(p->defaults.template_kwargs))) rc = ob_err(OB_ERR_OOM, "server");
        s->defaults.template_kwargs = s->template_kwargs;
    }
    if (rc == 0 && p->n_api_keys > 0) {
        s->api_keys = ob_calloc((size_t)p->n_api_keys, sizeof(char *));
        if (!s->api_keys) rc = ob_err(OB_ERR_OOM, "server");
        for (int i = 0; rc == 0 && i < p->n_api_keys; i++) {
            if (!(s->api_keys[i] = ob_strdup(p->api_keys[i]))) rc = ob_err(OB_ERR_OOM, "server");
            s->n_api_keys = i + 1;
        }
    }
    /* the id clients see: the alias's first name, else the file's name */
    if (rc == 0) {
        if (s->alias) {
            const char *comma = strchr(s->alias, ',');
            int n = comma ? (int)(comma - s->alias) : (int)strlen(s->alias);
            snprintf(s->model_id, sizeof s->model_id, "%.*s", n, s->alias);
        } else {
            const char *base = strrchr(s->model_path, '/');
            snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : s->model_path);
        }
    }
    if (rc == 0) { /* issue 12: every chat request is classified; --router also applies the policy */
        ob_route_service_params rp = {.apply = p->router, .policy_path = p->route_policy, .min_conf = p->route_min_conf};
        rp.caps.device = s->device;
        rp.caps.spec_type = s->engine_params.spec.type;
        rp.caps.spec_n_max = s->engine_params.spec.n_max;
        rc = ob_route_service_create(&rp, &s->router);
    }
    if (rc == 0) rc = bind_socket(s->host, p->port, &s->listen_fd, &s->port);
    if (rc == 0) {
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                         MHD_USE_ITC | MHD_USE_ERROR_LOG;
        s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, ob_srv_on_request, s,
                                  MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
                                  MHD_OPTION_NOTIFY_COMPLETED, ob_srv_on_completed, s,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout_s,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)4096,
                                  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                                  MHD_OPTION_END);
        if (!s->mhd) rc = ob_err(OB_ERR_IO, "cannot start the HTTP server on %s:%d", s->host, s->port);
        else s->listen_fd = -1; /* owned by libmicrohttpd now */
    }
    if (rc == 0) {
        if (pthread_create(&s->loader, NULL, loader_main, s) != 0) rc = ob_err(OB_ERR_INTERNAL, "cannot start the loader thread");
        else s->loader_started = true;
    }
    if (rc < 0) {
        ob_server_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}

int ob_server_port(const ob_server *s) { return s->port; }

void ob_server_stop(ob_server *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    if (s->mhd) MHD_stop_daemon(s->mhd); /* joins every connection thread */
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->loader_started) pthread_join(s->loader, NULL);
    ob_engine_free(s->engine); /* requests still queued end cancelled */
    ob_context_free(s->embd_ctx);
    pthread_mutex_destroy(&s->embd_lock);
    ob_model_free(s->model);
    ob_route_service_free(s->router);
    for (int i = 0; i < s->n_api_keys; i++) ob_free(s->api_keys[i]);
    ob_free(s->api_keys);
    ob_free(s->model_path);
    ob_free(s->host);
    ob_free(s->alias);
    ob_free(s->chat_template);
    ob_free(s->device);
    ob_free(s->template_kwargs);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    ob_free(s);
}
