/*
 * http.c - the libmicrohttpd side: collect the body, check the API key,
 * route, and the response helpers every handler uses.
 *
 * libmicrohttpd calls ob_srv_on_request several times per request: once
 * with the headers (no body yet), once per piece of body, and once more with
 * nothing left, which is when the handler runs. Bodies are bounded by
 * max_body: a larger one is read and thrown away (so the client gets its 413
 * instead of a reset connection), up to a hard cap after which we answer
 * early and let the connection close. A request that will be refused anyway
 * (bad key, unknown route) never stores its body.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "internal.h"

#define DISCARD_CAP ((size_t)64 << 20) /* bytes of an oversized body we read before giving up on it */

typedef struct route {
    const char *method;
    const char *path;  /* exact, or a prefix when it ends in '/' */
    ob_srv_route_fn fn;
    bool open;         /* no API key needed */
    bool ready;        /* needs the model loaded */
} route;

static const route g_routes[] = {
    {"GET", "/health", ob_srv_health, true, false},
    {"GET", "/v1/health", ob_srv_health, true, false},
    {"GET", "/v1/models", ob_srv_models, false, false},
    {"GET", "/models", ob_srv_models, false, false},
    {"GET", "/props", ob_srv_props, false, true},
    {"GET", "/slots", ob_srv_slots, false, true},
    {"POST", "/slots/", ob_srv_slot_action, false, true},
    {"GET", "/metrics", ob_srv_metrics, false, false},
    {"POST", "/tokenize", ob_srv_tokenize, false, true},
    {"POST", "/detokenize", ob_srv_detokenize, false, true},
    {"POST", "/apply-template", ob_srv_apply_template, false, true},
    {"POST", "/v1/chat/completions", ob_srv_chat, false, true},
    {"POST", "/chat/completions", ob_srv_chat, false, true},
    {"POST", "/v1/completions", ob_srv_completion, false, true},
    {"POST", "/completions", ob_srv_completion, false, true},
    {"POST", "/completion", ob_srv_native_completion, false, true},
    {"POST", "/v1/embeddings", ob_srv_embeddings, false, true},
    {"POST", "/embeddings", ob_srv_embeddings, false, true},
    {"POST", "/embedding", ob_srv_embeddings, false, true},
    {"POST", "/v1/rerank", ob_srv_rerank, false, false},
    {"POST", "/rerank", ob_srv_rerank, false, false},
    {"POST", "/reranking", ob_srv_rerank, false, false},
    {"GET", "/", ob_srv_root, true, false},
};

/* Per-request state (libmicrohttpd's con_cls). */
typedef struct conn {
    const route *rt;       /* NULL: unknown route (or wrong method) */
    bool method_known_path;/* the path exists with another method */
    bool auth_failed;
    bool too_big;
    bool answered;         /* a response is queued already */
    ob_buf body;
    size_t discarded;
    char method[8];
    char url[128];
    double t0;
    unsigned status;
    char route[192];       /* X-1bit-Route value, or "" (ob_srv_set_route_header) */
} conn;

static _Thread_local conn *tl_conn; /* the request this connection thread is answering */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---------------- responses ---------------- */

void ob_srv_count_status(ob_server *s, unsigned status) {
    unsigned cls = status / 100;
    if (cls < 6) atomic_fetch_add(&s->http_by_class[cls], 1);
    if (tl_conn) tl_conn->status = status;
}

void ob_srv_add_headers(struct MHD_Response *r) {
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Server", "1bit");
    if (tl_conn && tl_conn->route[0]) {
        MHD_add_response_header(r, "X-1bit-Route", tl_conn->route);
        MHD_add_response_header(r, "Access-Control-Expose-Headers", "X-1bit-Route");
    }
}

void ob_srv_set_route_header(const char *value) {
    if (tl_conn) snprintf(tl_conn->route, sizeof tl_conn->route, "%s", value);
}

char *ob_srv_dumps(const json_t *v) { return json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(9)); }

enum MHD_Result ob_srv_send_text(ob_server *s, struct MHD_Connection *c, unsigned status, const char *content_type,
                                 const char *text, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    ob_srv_add_headers(r);
    MHD_add_response_header(r, "Content-Type", content_type);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    ob_srv_count_status(s, status);
    return rc;
}

enum MHD_Result ob_srv_send_json(ob_server *s, struct MHD_Connection *c, unsigned status, json_t *body) {
    char *text = body ? ob_srv_dumps(body) : NULL;
    json_decref(body);
    if (!text) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                                  "\"code\":\"out_of_memory\"}}";
        return ob_srv_send_text(s, c, 500, "application/json; charset=utf-8", oom, sizeof oom - 1);
    }
    enum MHD_Result rc = ob_srv_send_text(s, c, status, "application/json; charset=utf-8", text, strlen(text));
    free(text);
    return rc;
}

char *ob_srv_error_json(const ob_srv_error *e) {
    json_t *err = json_pack("{s:s, s:s, s:o, s:s}", "message", e->message, "type", e->type ? e->type : "server_error",
                            "param", e->param[0] ? json_string(e->param) : json_null(), "code",
                            e->code ? e->code : "internal_error");
    json_t *o = err ? json_pack("{s:o}", "error", err) : NULL;
    char *text = o ? ob_srv_dumps(o) : NULL;
    json_decref(o);
    return text;
}

enum MHD_Result ob_srv_send_error(ob_server *s, struct MHD_Connection *c, const ob_srv_error *e) {
    char *text = ob_srv_error_json(e);
    if (!text) return MHD_NO;
    if (!s->quiet && e->http >= 500) OB_LOGW("serve: %d %s", e->http, e->message);
    enum MHD_Result rc = ob_srv_send_text(s, c, (unsigned)e->http, "application/json; charset=utf-8", text, strlen(text));
    free(text);
    return rc;
}

bool ob_srv_client_alive(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return true; /* the next pipelined request, or junk: still connected */
    if (n == 0) return false; /* orderly close */
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* ---------------- API keys ---------------- */

/* Compare in time that depends only on the lengths, never on where the
 * first difference is, so a key cannot be guessed byte by byte. */
static bool key_equal(const char *a, size_t an, const char *b, size_t bn) {
    unsigned char diff = (unsigned char)(an != bn);
    size_t n = an > bn ? an : bn;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < an ? (unsigned char)a[i] : 0, y = i < bn ? (unsigned char)b[i] : 0;
        diff |= (unsigned char)(x ^ y);
    }
    return diff == 0;
}

static bool authorized(ob_server *s, struct MHD_Connection *c) {
    if (s->n_api_keys == 0) return true;
    const char *key = NULL;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        key = h + 7;
        while (*key == ' ') key++;
    }
    if (!key) key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    if (!key) return false;
    size_t kn = strlen(key);
    bool ok = false;
    for (int i = 0; i < s->n_api_keys; i++) ok |= key_equal(key, kn, s->api_keys[i], strlen(s->api_keys[i]));
    return ok;
}

/* ---------------- routing ---------------- */

static void find_route(const char *method, const char *url, conn *cn) {
    char path[sizeof cn->url];
    snprintf(path, sizeof path, "%s", url);
    size_t n = strlen(path);
    if (n > 1 && path[n - 1] == '/') path[--n] = '\0'; /* "/v1/models/" is "/v1/models" */
    const char *m = !strcmp(method, "HEAD") ? "GET" : method;
    for (size_t i = 0; i < OB_ARRAY_LEN(g_routes); i++) {
        const route *rt = &g_routes[i];
        size_t pl = strlen(rt->path);
        bool prefix = pl > 1 && rt->path[pl - 1] == '/';
        bool match = prefix ? strncmp(path, rt->path, pl) == 0 && path[pl] : strcmp(path, rt->path) == 0;
        if (!match) continue;
        if (!strcmp(m, rt->method)) {
            cn->rt = rt;
            return;
        }
        cn->method_known_path = true;
    }
}

static enum MHD_Result dispatch(ob_server *s, struct MHD_Connection *c, const char *url, conn *cn) {
    ob_srv_error e;
    memset(&e, 0, sizeof e);
    if (!strcmp(cn->method, "OPTIONS")) { /* CORS preflight */
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        ob_srv_add_headers(r);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Content-Type, Authorization, X-Api-Key");
        enum MHD_Result rc = MHD_queue_response(c, 204, r);
        MHD_destroy_response(r);
        ob_srv_count_status(s, 204);
        return rc;
    }
    if (!cn->rt) {
        if (cn->method_known_path)
            ob_srv_fail(&e, 0, 405, "invalid_request_error", "method_not_allowed", NULL, "%s is not allowed on %s", cn->method,
                        url);
        else
            ob_srv_fail(&e, 0, 404, "not_found_error", "not_found", NULL, "no such endpoint: %s %s", cn->method, url);
        return ob_srv_send_error(s, c, &e);
    }
    if (cn->auth_failed) {
        ob_srv_fail(&e, 0, 401, "authentication_error", "invalid_api_key", NULL,
                    "invalid or missing API key (send it as 'Authorization: Bearer KEY')");
        return ob_srv_send_error(s, c, &e);
    }
    if (cn->too_big) {
        ob_srv_fail(&e, 0, 413, "invalid_request_error", "request_too_large", NULL,
                    "the request body is larger than the server's limit of %zu bytes (--max-body)", s->max_body);
        return ob_srv_send_error(s, c, &e);
    }
    if (cn->rt->ready) {
        int st = atomic_load(&s->state);
        if (st != SRV_READY) {
            if (st == SRV_LOADING)
                ob_srv_fail(&e, 0, 503, "unavailable_error", "model_loading", NULL, "the model is still loading");
            else
                ob_srv_fail(&e, 0, 500, "server_error", "model_load_failed", NULL, "the model failed to load: %s", s->load_error);
            return ob_srv_send_error(s, c, &e);
        }
    }
    if (atomic_load(&s->stopping)) {
        ob_srv_fail(&e, 0, 503, "unavailable_error", "shutting_down", NULL, "the server is shutting down");
        return ob_srv_send_error(s, c, &e);
    }
    return cn->rt->fn(s, c, url, cn->body.data ? cn->body.data : "", cn->body.len);
}

enum MHD_Result ob_srv_on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)version;
    ob_server *s = cls;
    conn *cn = *con_cls;
    if (!cn) { /* headers only: decide what to do with the body */
        cn = ob_calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        *con_cls = cn;
        cn->t0 = now_ms();
        snprintf(cn->method, sizeof cn->method, "%s", method);
        snprintf(cn->url, sizeof cn->url, "%s", url);
        find_route(method, url, cn);
        if (cn->rt && !cn->rt->open && strcmp(method, "OPTIONS") != 0) cn->auth_failed = !authorized(s, c);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->max_body) cn->too_big = true;
        return MHD_YES;
    }
    tl_conn = cn;
    if (cn->answered) { /* answered early; swallow whatever still arrives */
        *upload_data_size = 0;
        tl_conn = NULL;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        bool keep = cn->rt && !cn->auth_failed && !cn->too_big;
        if (keep && cn->body.len + n > s->max_body) {
            cn->too_big = true;
            cn->discarded += cn->body.len;
            ob_buf_free(&cn->body);
            keep = false;
        }
        if (keep) {
            if (ob_buf_append(&cn->body, upload_data, n) < 0) return MHD_NO;
            return MHD_YES;
        }
        cn->discarded += n;
        if (cn->discarded > DISCARD_CAP && cn->discarded > s->max_body) {
            /* answer now; libmicrohttpd closes the connection after it */
            cn->answered = true;
            enum MHD_Result rc = dispatch(s, c, url, cn);
            tl_conn = NULL;
            return rc;
        }
        return MHD_YES;
    }
    enum MHD_Result rc = dispatch(s, c, url, cn);
    tl_conn = NULL;
    return rc;
}

void ob_srv_on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c;
    ob_server *s = cls;
    conn *cn = *con_cls;
    if (!cn) return;
    if (!s->quiet)
        OB_LOGI("serve: %s %s %u %.1f ms%s", cn->method, cn->url, cn->status, now_ms() - cn->t0,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    ob_buf_free(&cn->body);
    ob_free(cn);
    *con_cls = NULL;
}
