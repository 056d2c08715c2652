/*
 * complete.c - the completion endpoints over HTTP: parse, start a job, then
 * either wait for it (non-streaming) or stream it as Server-Sent Events.
 *
 * Both ways poll the engine with a short timeout (POLL_MS) so that a client
 * that goes away is noticed within that time and its engine requests are
 * cancelled at once, freeing their slots and KV pages for everyone else.
 * libmicrohttpd also reports a failed write by freeing the stream (the
 * response's free callback), which cancels the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "internal.h"

#define POLL_MS 50

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---------------- streaming ---------------- */

typedef struct stream {
    ob_server *srv;
    ob_srv_job *job;
    struct MHD_Connection *conn;
    ob_buf out;     /* SSE bytes not yet handed to libmicrohttpd */
    size_t off;
    bool ended;     /* the last event is in `out` */
} stream;

/* libmicrohttpd asks for the next bytes of the body. We block here (this is
 * the connection's own thread) until the job has something to say, checking
 * for shutdown and for a vanished client between waits. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    while (st->off >= st->out.len) {
        ob_buf_clear(&st->out);
        st->off = 0;
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (atomic_load(&st->srv->stopping)) {
            ob_srv_job_cancel(st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        ob_srv_job_poll(st->job, POLL_MS, 1);
        if (ob_srv_job_stream(st->job, &st->out, &st->ended) < 0) {
            ob_srv_job_cancel(st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (st->out.len == 0 && !ob_srv_client_alive(st->conn)) {
            atomic_fetch_add(&st->srv->client_disconnects, 1);
            ob_srv_job_cancel(st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = st->out.len - st->off;
    if (n > max) n = max;
    memcpy(buf, st->out.data + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* Called once the response is done with, however it ended. */
static void stream_free(void *cls) {
    stream *st = cls;
    if (!st->ended) atomic_fetch_add(&st->srv->client_disconnects, 1);
    ob_srv_job_free(st->job); /* cancels what is still running */
    ob_buf_free(&st->out);
    atomic_fetch_sub(&st->srv->streams_active, 1);
    ob_free(st);
}

static enum MHD_Result start_stream(ob_server *s, struct MHD_Connection *c, ob_srv_job *job) {
    stream *st = ob_calloc(1, sizeof *st);
    if (!st) {
        ob_srv_job_free(job);
        return MHD_NO;
    }
    st->srv = s;
    st->job = job;
    st->conn = c;
    atomic_fetch_add(&s->streams_active, 1);
    atomic_fetch_add(&s->streams_total, 1);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        return MHD_NO;
    }
    ob_srv_add_headers(r);
    MHD_add_response_header(r, "Content-Type", "text/event-stream; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r); /* libmicrohttpd keeps its reference; stream_free runs when it lets go */
    ob_srv_count_status(s, 200);
    return rc;
}

/* ---------------- waiting ---------------- */

static enum MHD_Result wait_and_answer(ob_server *s, struct MHD_Connection *c, ob_srv_job *job) {
    double last_check = now_ms();
    while (!ob_srv_job_finished(job)) {
        if (atomic_load(&s->stopping)) {
            ob_srv_job_free(job);
            ob_srv_error e;
            ob_srv_fail(&e, 0, 503, "unavailable_error", "shutting_down", NULL, "the server is shutting down");
            return ob_srv_send_error(s, c, &e);
        }
        ob_srv_job_poll(job, POLL_MS, 64);
        double t = now_ms();
        if (t - last_check >= POLL_MS) {
            last_check = t;
            if (!ob_srv_client_alive(c)) {
                atomic_fetch_add(&s->client_disconnects, 1);
                ob_srv_job_free(job);
                return MHD_NO; /* nobody to answer: close */
            }
        }
    }
    const ob_srv_choice *bad = ob_srv_job_failure(job);
    if (bad) {
        ob_srv_error e;
        ob_srv_fail(&e, 0, 500, "server_error", "engine_error", NULL, "generation failed: %s", bad->fail_msg);
        ob_srv_job_free(job);
        return ob_srv_send_error(s, c, &e);
    }
    json_t *body = ob_srv_job_response(job);
    ob_srv_job_free(job);
    return ob_srv_send_json(s, c, 200, body);
}

/* ---------------- the endpoints ---------------- */

static enum MHD_Result handle(ob_server *s, struct MHD_Connection *c, ob_srv_api api, const char *body, size_t len) {
    ob_srv_request req;
    ob_srv_error e;
    if (s->model && ob_model_is_encoder(s->model)) {
        ob_srv_fail(&e, OB_ERR_UNSUPPORTED, 400, "invalid_request_error", "model_not_supported", "model",
                    "'%s' is an encoder (an embedding model): it cannot generate text; use POST /v1/embeddings",
                    s->model_id);
        return ob_srv_send_error(s, c, &e);
    }
    if (ob_srv_request_parse(api, body, len, &s->defaults, &req, &e) < 0) return ob_srv_send_error(s, c, &e);
    bool streaming = req.stream;
    ob_srv_job *job = NULL;
    if (ob_srv_job_start(s, &req, &job, &e) < 0) return ob_srv_send_error(s, c, &e);
    atomic_fetch_add(&s->completions_total, 1);
    return streaming ? start_stream(s, c, job) : wait_and_answer(s, c, job);
}

enum MHD_Result ob_srv_chat(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url;
    return handle(s, c, OB_SRV_CHAT, body, len);
}

enum MHD_Result ob_srv_completion(ob_server *s, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    (void)url;
    return handle(s, c, OB_SRV_COMPLETION, body, len);
}

enum MHD_Result ob_srv_native_completion(ob_server *s, struct MHD_Connection *c, const char *url, const char *body,
                                         size_t len) {
    (void)url;
    return handle(s, c, OB_SRV_NATIVE, body, len);
}
