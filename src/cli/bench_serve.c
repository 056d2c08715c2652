/*
 * bench_serve.c - `1bit bench serve`: how well `1bit serve` serves many
 * clients at once, measured from the outside.
 *
 *   1bit bench serve -m MODEL --config "p1=-np 1" --config "p16=-np 16" \
 *                    -c 1,2,4,8,16 -p 128 -n 64 [--prefix 1000] \
 *                    [--json out.json] [--plot out.svg]
 *
 * It starts each server configuration as a child process (`1bit serve
 * --host 127.0.0.1 --port 0 -m MODEL <the config's flags>`, output to a log
 * file in /tmp, kept only on failure), waits for /health to answer 200, sends
 * one untimed warm-up request, then drives it with N concurrent streaming
 * clients (one thread and one keep-alive libcurl handle each) for a bounded
 * number of requests, and stops it with SIGTERM. Configurations run
 * interleaved - A at c=1, B at c=1, A at c=2, ... - each level on a freshly
 * started server, so drift of the machine falls on all of them alike and no
 * level inherits another's cache.
 *
 * The request mix is deterministic from --seed: request i of a level has a
 * prompt length drawn from -p, an output length drawn from -n, and with
 * probability --prefix-share starts with the shared prefix of --prefix
 * tokens (a system prompt; the same ids in every request and every level).
 * Every configuration gets the same requests at a level. Prompts are token
 * ids sent to /v1/completions (so their lengths are exact), drawn from the
 * lower third of the vocabulary past its first 256 ids (where the text
 * tokens of BPE vocabularies live); outputs are greedy with ignore_eos, so
 * each request produces exactly the tokens it asked for.
 *
 * What is measured, per configuration and concurrency level:
 *  - TTFT: from sending the request to its first token = (arrival of the
 *    final event - send time) - the server's timings.predicted_ms (first
 *    token to last). Taken this way a first token without visible text
 *    (a control token, or bytes the detokenizer holds back) still counts.
 *  - ITL: gaps between events that carry tokens. A streamed event carries
 *    one token's text; a token without text arrives with the next one, so
 *    its gap merges into that one's. With --logprobs every event says how
 *    many tokens it carries (the gap is split evenly), at the cost of a
 *    log-softmax over the vocabulary per token on the server.
 *  - effective tokens per second of a request: output tokens / (TTFT +
 *    decode time), what its user waits for.
 *  - throughput: completed requests and output tokens over the level's wall
 *    time (first send to last answer).
 * Percentiles are nearest-rank.
 *
 * Output: a markdown table on stdout, everything (per request too) with
 * --json FILE, and --plot FILE.svg: output tok/s, TTFT p50 and ITL p50
 * against concurrency, one line per configuration.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "cli.h"
#include "ob_gitstamp.h" /* OB_GIT_COMMIT, OB_BUILD_NUMBER (tools/gitstamp.cmake) */


#define BS_MAX_LIST 16
#define BS_MAX_CONFIGS 8
#define BS_MAX_ARGS 64

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---------------- options ---------------- */

typedef struct bs_config {
    char name[48];
    const char *flags;           /* as given; points into argv */
    char *argv[BS_MAX_ARGS + 1]; /* the flags split into words (owned) */
    int argc;
    const char *bin; /* --bin inside the flags, else the options' binary */
} bs_config;

typedef struct bs_opts {
    const char *model, *json_path, *plot_path;
    char bin[4096]; /* the 1bit binary the servers run (default: this one) */
    int prompt[BS_MAX_LIST], n_prompt;
    int gen[BS_MAX_LIST], n_gen;
    int conc[BS_MAX_LIST], n_conc;
    int requests;   /* per level, or per client with per_client */
    bool per_client; /* -r Nx */
    int prefix;   /* shared prefix tokens */
    double prefix_share;
    uint64_t seed;
    double timeout_s, start_timeout_s;
    bool logprobs, warmup;
    bs_config cfg[BS_MAX_CONFIGS];
    int n_cfg;
} bs_opts;

static void usage(void) {
    printf("usage: 1bit bench serve -m MODEL [options]     many streaming clients against `1bit serve`\n"
           "  --config NAME=FLAGS  a server configuration: `1bit serve` flags (repeatable; default: one, \"default=\");\n"
           "                       --bin PATH among them runs another 1bit binary for that configuration\n"
           "  -c N[,N]             concurrent clients per level (default 1,2,4,8)\n"
           "  -p N[,N]             prompt tokens, each request draws one (default 128)\n"
           "  -n N[,N]             output tokens, each request draws one (default 64)\n"
           "  -r, --requests N|Nx  requests per level, or N per client (default 4x)\n"
           "  --prefix N           a shared prefix (system prompt) of N tokens (default 0)\n"
           "  --prefix-share F     the share of requests that start with it (default 1)\n"
           "  --seed S             the request mix (default 1)\n"
           "  --logprobs           count tokens per event exactly (adds a log-softmax per token on the server)\n"
           "  --no-warmup          no untimed request before each level\n"
           "  --timeout S          per request (default 600); --start-timeout S: server start (default 300)\n"
           "  --json FILE          every number, per request too\n"
           "  --plot FILE.svg      output tok/s, TTFT p50 and ITL p50 against clients, a line per configuration\n"
           "The servers get --host 127.0.0.1 --port 0 and -m MODEL before the config's flags. See docs/serve.md.\n");
}

static int parse_list(const char *s, int *out, int max, int min_value) {
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < min_value || v > 1 << 20) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return *s ? -1 : n;
}

/* Split a config's flags into words: whitespace separates, '...' and "..."
 * quote. The words are owned by c->argv. */
static int split_flags(bs_config *c, const char *s) {
    c->argc = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) break;
        if (c->argc == BS_MAX_ARGS) return ob_err(OB_ERR_INVALID_ARG, "config %s: more than %d words", c->name, BS_MAX_ARGS);
        char *w = ob_malloc(strlen(s) + 1);
        if (!w) return ob_err(OB_ERR_OOM, "config");
        size_t n = 0;
        char quote = 0;
        for (; *s && (quote || (*s != ' ' && *s != '\t')); s++) {
            if (quote && *s == quote) quote = 0;
            else if (!quote && (*s == '\'' || *s == '"')) quote = *s;
            else w[n++] = *s;
        }
        w[n] = '\0';
        c->argv[c->argc++] = w;
        if (quote) return ob_err(OB_ERR_INVALID_ARG, "config %s: unterminated quote", c->name);
    }
    c->argv[c->argc] = NULL;
    return 0;
}

static int add_config(bs_opts *o, const char *spec) {
    if (o->n_cfg == BS_MAX_CONFIGS) return ob_err(OB_ERR_INVALID_ARG, "at most %d --config", BS_MAX_CONFIGS);
    const char *eq = strchr(spec, '=');
    size_t nl = eq ? (size_t)(eq - spec) : 0;
    if (!eq || nl == 0 || nl >= sizeof o->cfg[0].name)
        return ob_err(OB_ERR_INVALID_ARG, "--config '%s': expected NAME=FLAGS with a name of 1..47 characters", spec);
    for (size_t i = 0; i < nl; i++) {
        char ch = spec[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
                  ch == '.' || ch == '+';
        if (!ok) return ob_err(OB_ERR_INVALID_ARG, "--config '%s': a name has letters, digits and - _ . + only", spec);
    }
    bs_config *c = &o->cfg[o->n_cfg++];
    memset(c, 0, sizeof *c);
    memcpy(c->name, spec, nl);
    c->flags = eq + 1;
    OB_TRY(split_flags(c, eq + 1));
    /* --bin PATH is ours, not the server's */
    for (int i = 0; i < c->argc; i++) {
        if (strcmp(c->argv[i], "--bin") != 0) continue;
        if (i + 1 >= c->argc) return ob_err(OB_ERR_INVALID_ARG, "config %s: --bin needs a path", c->name);
        c->bin = c->argv[i + 1];
        ob_free(c->argv[i]);
        memmove(&c->argv[i], &c->argv[i + 2], (size_t)(c->argc - i - 1) * sizeof c->argv[0]);
        c->argc -= 2;
        break;
    }
    return 0;
}

static void free_configs(bs_opts *o) {
    for (int k = 0; k < o->n_cfg; k++) {
        bs_config *c = &o->cfg[k];
        /* c->bin points at the word after --bin, which was kept out of argv */
        for (int i = 0; i < c->argc; i++) ob_free(c->argv[i]);
        if (c->bin) ob_free((char *)c->bin);
        c->argc = 0;
        c->bin = NULL;
    }
}

/* ---------------- the request mix ---------------- */

typedef struct bs_req {
    int n_prompt;   /* tokens, the prefix included */
    bool prefixed;  /* starts with the shared prefix */
    int max_tokens; /* asked for (ignore_eos: also what comes back) */
    uint64_t ids_seed;
} bs_req;

static int level_requests(const bs_opts *o, int conc) { return o->per_client ? o->requests * conc : o->requests; }

/* The n requests of the level with `conc` clients; identical for every configuration. */
static void make_mix(const bs_opts *o, int conc, bs_req *reqs, int n) {
    uint64_t s = o->seed ^ ((uint64_t)conc * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < n; i++) {
        uint64_t r = splitmix(&s);
        bs_req *q = &reqs[i];
        q->prefixed = o->prefix > 0 && (double)(r >> 40) / (double)(1ull << 24) < o->prefix_share;
        q->n_prompt = o->prompt[(r & 0xFFFF) % (uint64_t)o->n_prompt] + (q->prefixed ? o->prefix : 0);
        q->max_tokens = o->gen[((r >> 16) & 0xFFFF) % (uint64_t)o->n_gen];
        q->ids_seed = splitmix(&s);
    }
}

/* Token ids for prompts: the lower third of the vocabulary, past the first
 * 256 (control and byte tokens in most vocabularies). */
typedef struct bs_vocab {
    int lo, n;
} bs_vocab;

static bs_vocab vocab_range(int n_vocab) {
    bs_vocab v;
    v.lo = n_vocab / 8 < 256 ? n_vocab / 8 : 256;
    int hi = n_vocab / 3 > v.lo + 1 ? n_vocab / 3 : v.lo + 1;
    v.n = hi - v.lo;
    return v;
}

/* A growable string. */
typedef struct bs_str {
    char *p;
    size_t len, cap;
} bs_str;

static int str_put(bs_str *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *np = ob_realloc(b->p, cap);
        if (!np) return ob_err(OB_ERR_OOM, "buffer");
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static int str_printf(bs_str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int str_printf(bs_str *b, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return ob_err(OB_ERR_INTERNAL, "format");
    if ((size_t)n < sizeof small) return str_put(b, small, (size_t)n);
    char *big = ob_malloc((size_t)n + 1);
    if (!big) return ob_err(OB_ERR_OOM, "buffer");
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = str_put(b, big, (size_t)n);
    ob_free(big);
    return rc;
}

/* The JSON body of a request: its prompt as token ids. The prefix ids come
 * from the seed alone, so every prefixed request shares them. */
static int request_body(const bs_opts *o, const bs_req *q, bs_vocab v, bs_str *b) {
    b->len = 0;
    OB_TRY(str_put(b, "{\"prompt\":[", 11));
    uint64_t ps = o->seed * 0x2545F4914F6CDD1Dull + 7, rs = q->ids_seed;
    for (int i = 0; i < q->n_prompt; i++) {
        uint64_t r = (q->prefixed && i < o->prefix) ? splitmix(&ps) : splitmix(&rs);
        OB_TRY(str_printf(b, "%s%d", i ? "," : "", v.lo + (int)(r % (uint64_t)v.n)));
    }
    return str_printf(b,
                      "],\"max_tokens\":%d,\"ignore_eos\":true,\"temperature\":0,\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true}%s}",
                      q->max_tokens, o->logprobs ? ",\"logprobs\":0" : "");
}

/* ---------------- one streamed request ---------------- */

typedef struct bs_res {
    bool ok;
    char error[200];
    char finish[16];
    int prompt_tokens, cached_tokens, completion_tokens;
    double ttft_ms, decode_ms, e2e_ms, first_event_ms;
    double *itl; /* [n_itl] ms, one per token after the first */
    int n_itl, cap_itl;
} bs_res;

typedef struct bs_stream {
    bs_str buf;
    bs_res *res;
    bool logprobs, done, final_seen, have_tok, have_timings;
    double t_send, t_last_tok, t_final, predicted_ms;
} bs_stream;

static void res_fail(bs_res *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void res_fail(bs_res *r, const char *fmt, ...) {
    if (r->error[0]) return; /* the first reason is the one that matters */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
}

static void add_itl(bs_res *r, double ms) {
    if (r->n_itl == r->cap_itl) {
        int cap = r->cap_itl ? r->cap_itl * 2 : 64;
        double *n = ob_realloc(r->itl, (size_t)cap * sizeof *n);
        if (!n) {
            res_fail(r, "out of memory");
            return;
        }
        r->itl = n;
        r->cap_itl = cap;
    }
    r->itl[r->n_itl++] = ms;
}

/* k tokens arrived at time t. */
static void on_tokens(bs_stream *st, double t, int k) {
    if (!st->have_tok) {
        st->have_tok = true;
        st->res->first_event_ms = (t - st->t_send) * 1e3;
        for (int i = 1; i < k; i++) add_itl(st->res, 0); /* arrived together with the first */
    } else {
        double gap = (t - st->t_last_tok) * 1e3 / k;
        for (int i = 0; i < k; i++) add_itl(st->res, gap);
    }
    st->t_last_tok = t;
}

static void on_event(bs_stream *st, const char *data, size_t len, double t) {
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        st->done = true;
        return;
    }
    json_error_t je;
    json_t *v = json_loadb(data, len, JSON_ALLOW_NUL, &je);
    if (!v) {
        res_fail(st->res, "bad event: %s", je.text);
        return;
    }
    json_t *err = json_object_get(v, "error");
    if (err) {
        const char *m = json_string_value(json_object_get(err, "message"));
        res_fail(st->res, "server: %s", m ? m : "error");
    }
    json_t *choices = json_object_get(v, "choices");
    if (json_array_size(choices) > 0) {
        json_t *c = json_array_get(choices, 0);
        int k;
        if (st->logprobs) k = (int)json_array_size(json_object_get(json_object_get(c, "logprobs"), "tokens"));
        else k = json_string_length(json_object_get(c, "text")) > 0;
        if (k > 0) on_tokens(st, t, k);
        const char *fr = json_string_value(json_object_get(c, "finish_reason"));
        if (fr) {
            snprintf(st->res->finish, sizeof st->res->finish, "%s", fr);
            st->final_seen = true;
            st->t_final = t;
            json_t *pm = json_object_get(json_object_get(v, "timings"), "predicted_ms");
            if (json_is_number(pm)) {
                st->predicted_ms = json_number_value(pm);
                st->have_timings = true;
            }
        }
    } else {
        json_t *u = json_object_get(v, "usage");
        if (json_is_object(u)) {
            st->res->prompt_tokens = (int)json_integer_value(json_object_get(u, "prompt_tokens"));
            st->res->completion_tokens = (int)json_integer_value(json_object_get(u, "completion_tokens"));
            st->res->cached_tokens =
                (int)json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
        }
    }
    json_decref(v);
}

/* libcurl's write callback: split the stream into events ("\n\n"-ended)
 * and hand each `data:` line on, stamped with its arrival time. */
static size_t on_data(char *p, size_t size, size_t nmemb, void *user) {
    bs_stream *st = user;
    size_t n = size * nmemb;
    double t = now_s();
    if (str_put(&st->buf, p, n) < 0) return 0;
    size_t start = 0;
    for (;;) {
        char *end = strstr(st->buf.p + start, "\n\n");
        if (!end) break;
        size_t elen = (size_t)(end - (st->buf.p + start));
        const char *ev = st->buf.p + start;
        if (elen >= 5 && !memcmp(ev, "data:", 5)) {
            size_t skip = ev[5] == ' ' ? 6 : 5;
            on_event(st, ev + skip, elen - skip, t);
        }
        start += elen + 2;
    }
    memmove(st->buf.p, st->buf.p + start, st->buf.len - start + 1);
    st->buf.len -= start;
    return n;
}

static size_t discard_or_keep(char *p, size_t size, size_t nmemb, void *user) {
    if (user && str_put(user, p, size * nmemb) < 0) return 0;
    return size * nmemb;
}

/* ---------------- a level: N clients, M requests ---------------- */

typedef struct bs_level_run {
    const bs_opts *o;
    int port;
    bs_vocab vocab;
    const bs_req *reqs;
    bs_res *res;
    int n;
    atomic_int next;
    double t_first_send, t_last_end; /* guarded by mu */
    pthread_mutex_t mu;
} bs_level_run;

static void run_one(bs_level_run *L, CURL *h, struct curl_slist *hdrs, const char *url, int i, bs_str *body) {
    bs_res *r = &L->res[i];
    if (request_body(L->o, &L->reqs[i], L->vocab, body) < 0) {
        res_fail(r, "%s", ob_last_error());
        return;
    }
    bs_stream st;
    memset(&st, 0, sizeof st);
    st.res = r;
    st.logprobs = L->o->logprobs;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body->p);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body->len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(L->o->timeout_s * 1e3));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    st.t_send = now_s();
    pthread_mutex_lock(&L->mu);
    if (L->t_first_send == 0 || st.t_send < L->t_first_send) L->t_first_send = st.t_send;
    pthread_mutex_unlock(&L->mu);
    CURLcode cc = curl_easy_perform(h);
    double t_end = now_s();
    long http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    if (cc != CURLE_OK) res_fail(r, "curl: %s", curl_easy_strerror(cc));
    else if (http != 200) res_fail(r, "HTTP %ld: %.150s", http, st.buf.p ? st.buf.p : "");
    else if (!st.final_seen || !st.done) res_fail(r, "the stream ended early");
    else if (!st.have_timings) res_fail(r, "no timings in the final event");
    double t_fin = st.final_seen ? st.t_final : t_end;
    r->e2e_ms = (t_fin - st.t_send) * 1e3;
    r->decode_ms = st.predicted_ms;
    r->ttft_ms = st.have_timings ? r->e2e_ms - st.predicted_ms : r->first_event_ms;
    if (r->ttft_ms < 0) r->ttft_ms = 0; /* clocks of two processes; never seen, but never negative */
    r->ok = !r->error[0];
    ob_free(st.buf.p);
    pthread_mutex_lock(&L->mu);
    if (t_fin > L->t_last_end) L->t_last_end = t_fin;
    pthread_mutex_unlock(&L->mu);
}

static void *client_main(void *arg) {
    bs_level_run *L = arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue round trip for long prompts */
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", L->port);
    bs_str body = {0};
    for (;;) {
        int i = atomic_fetch_add(&L->next, 1);
        if (i >= L->n) break;
        if (!h || !hdrs) {
            res_fail(&L->res[i], "curl: cannot make a handle");
            continue;
        }
        run_one(L, h, hdrs, url, i, &body);
    }
    ob_free(body.p);
    curl_slist_free_all(hdrs);
    if (h) curl_easy_cleanup(h);
    return NULL;
}

/* ---------------- the server child ---------------- */

typedef struct bs_server {
    pid_t pid;
    int port;
    char log_path[64];
    int n_vocab, n_ctx;
} bs_server;

/* GET http://127.0.0.1:port/path; returns the HTTP status (0: no answer). */
static long http_get(int port, const char *path, bs_str *body) {
    CURL *h = curl_easy_init();
    if (!h) return 0;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_or_keep);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    return code;
}

static void print_log_tail(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, sz > 3000 ? sz - 3000 : 0, SEEK_SET);
    char buf[3001];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "--- end of %s ---\n%s\n---\n", path, buf);
}

/* SIGTERM, wait (SIGKILL after 30 s), and remove the log. failing: we are
 * already reporting an error - show the log's end instead and keep the
 * file, and leave that error in place. */
static int server_stop(bs_server *s, bool failing) {
    int status = 0;
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        double t0 = now_s();
        int ws = 0;
        while (waitpid(s->pid, &ws, WNOHANG) == 0) {
            if (now_s() - t0 > 30) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, &ws, 0);
                status = failing ? -1 : ob_err(OB_ERR_IO, "the server did not stop within 30 s of SIGTERM (killed)");
                break;
            }
            sleep_ms(10);
        }
        if (!status && !failing && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0))
            status = ob_err(OB_ERR_IO, "the server exited with status %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
        s->pid = 0;
    }
    if (s->log_path[0]) {
        if (status < 0 || failing) print_log_tail(s->log_path);
        else unlink(s->log_path);
        s->log_path[0] = '\0';
    }
    return status;
}

/* Start `bin serve --host 127.0.0.1 --port 0 [-m MODEL] FLAGS...`, read
 * its port from the log, wait for /health 200, and read n_vocab and n_ctx
 * from /v1/models. */
static int server_start(const bs_opts *o, const bs_config *c, bs_server *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->log_path, sizeof s->log_path, "/tmp/1bit-bench-serve-XXXXXX");
    int fd = mkstemp(s->log_path);
    if (fd < 0) {
        s->log_path[0] = '\0';
        return ob_err(OB_ERR_IO, "cannot create a log file in /tmp: %s", strerror(errno));
    }
    const char *bin = c->bin ? c->bin : o->bin;
    char *args[BS_MAX_ARGS + 12];
    int na = 0;
    args[na++] = (char *)bin;
    args[na++] = "serve";
    args[na++] = "--host";
    args[na++] = "127.0.0.1";
    args[na++] = "--port";
    args[na++] = "0";
    if (o->model) {
        args[na++] = "-m";
        args[na++] = (char *)o->model;
    }
    for (int i = 0; i < c->argc; i++) args[na++] = c->argv[i];
    args[na] = NULL;
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return ob_err(OB_ERR_IO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the bench */
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(bin, args);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    close(fd);
    s->pid = pid;
    static const char key[] = "listening on http://127.0.0.1:";
    double t0 = now_s();
    bool healthy = false;
    while (!healthy) {
        int ws;
        if (waitpid(pid, &ws, WNOHANG) == pid) {
            s->pid = 0;
            return ob_err(OB_ERR_IO, "config %s: the server exited during start (status %d); log: %s", c->name,
                          WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, s->log_path);
        }
        if (now_s() - t0 > o->start_timeout_s)
            return ob_err(OB_ERR_IO, "config %s: the server was not ready within %.0f s; log: %s", c->name,
                          o->start_timeout_s, s->log_path);
        if (s->port == 0) {
            FILE *f = fopen(s->log_path, "r");
            char line[1024];
            while (f && fgets(line, sizeof line, f)) {
                const char *p = strstr(line, key);
                if (p) s->port = atoi(p + sizeof key - 1);
            }
            if (f) fclose(f);
        }
        if (s->port > 0) {
            bs_str hb = {0};
            long code = http_get(s->port, "/health", &hb);
            healthy = code == 200;
            if (code == 500) { /* the model failed to load; the server would wait for nothing */
                int rc = ob_err(OB_ERR_IO, "config %s: the server failed to load the model: %.300s", c->name, hb.p ? hb.p : "");
                ob_free(hb.p);
                return rc;
            }
            ob_free(hb.p);
        }
        if (!healthy) sleep_ms(25);
    }
    bs_str body = {0};
    long code = http_get(s->port, "/v1/models", &body);
    json_t *v = code == 200 && body.p ? json_loads(body.p, 0, NULL) : NULL;
    ob_free(body.p);
    json_t *meta = json_object_get(json_array_get(json_object_get(v, "data"), 0), "meta");
    s->n_vocab = (int)json_integer_value(json_object_get(meta, "n_vocab"));
    s->n_ctx = (int)json_integer_value(json_object_get(meta, "n_ctx"));
    json_decref(v);
    if (s->n_vocab <= 1 || s->n_ctx <= 0)
        return ob_err(OB_ERR_IO, "config %s: /v1/models answered %ld without meta.n_vocab and meta.n_ctx", c->name, code);
    return 0;
}

/* ---------------- statistics ---------------- */

typedef struct bs_level {
    int cfg, conc, n_req, completed, failed;
    double wall_s, req_per_s, out_tok_per_s;
    double ttft[3], ttft_mean, itl[3], itl_mean, eff[3], eff_mean; /* p50, p90, p99 */
    long long prompt_tokens, cached_tokens, out_tokens;
    bs_req *reqs;
    bs_res *res;
} bs_level;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentiles 50, 90, 99 and the mean of v[n] (sorted in place). */
static void percentiles(double *v, int n, double out[3], double *mean) {
    static const double ps[3] = {50, 90, 99};
    out[0] = out[1] = out[2] = 0;
    *mean = 0;
    if (n <= 0) return;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    *mean = sum / n;
    for (int k = 0; k < 3; k++) {
        int idx = (int)ceil(ps[k] / 100.0 * n) - 1;
        out[k] = v[idx < 0 ? 0 : idx >= n ? n - 1 : idx];
    }
}

static int summarize(bs_level *L, double wall_s) {
    L->wall_s = wall_s;
    int n = L->n_req, n_itl = 0;
    for (int i = 0; i < n; i++) n_itl += L->res[i].ok ? L->res[i].n_itl : 0;
    double *ttft = ob_calloc((size_t)n + 1, sizeof *ttft), *eff = ob_calloc((size_t)n + 1, sizeof *eff);
    double *itl = ob_calloc((size_t)n_itl + 1, sizeof *itl);
    if (!ttft || !eff || !itl) {
        ob_free(ttft), ob_free(eff), ob_free(itl);
        return ob_err(OB_ERR_OOM, "statistics");
    }
    int k = 0, m = 0;
    for (int i = 0; i < n; i++) {
        const bs_res *r = &L->res[i];
        if (!r->ok) {
            L->failed++;
            continue;
        }
        L->prompt_tokens += r->prompt_tokens;
        L->cached_tokens += r->cached_tokens;
        L->out_tokens += r->completion_tokens;
        ttft[k] = r->ttft_ms;
        eff[k] = r->e2e_ms > 0 ? r->completion_tokens / (r->e2e_ms * 1e-3) : 0;
        k++;
        for (int j = 0; j < r->n_itl; j++) itl[m++] = r->itl[j];
    }
    L->completed = k;
    L->req_per_s = wall_s > 0 ? k / wall_s : 0;
    L->out_tok_per_s = wall_s > 0 ? (double)L->out_tokens / wall_s : 0;
    percentiles(ttft, k, L->ttft, &L->ttft_mean);
    percentiles(itl, m, L->itl, &L->itl_mean);
    percentiles(eff, k, L->eff, &L->eff_mean);
    ob_free(ttft), ob_free(eff), ob_free(itl);
    return 0;
}

/* One level of one configuration on a fresh server. */
static int run_level(const bs_opts *o, int cfg, int conc, bs_level *L) {
    memset(L, 0, sizeof *L);
    L->cfg = cfg;
    L->conc = conc;
    L->n_req = level_requests(o, conc);
    L->reqs = ob_calloc((size_t)L->n_req, sizeof *L->reqs);
    L->res = ob_calloc((size_t)L->n_req, sizeof *L->res);
    if (!L->reqs || !L->res) return ob_err(OB_ERR_OOM, "requests");
    make_mix(o, conc, L->reqs, L->n_req);
    const bs_config *c = &o->cfg[cfg];
    bs_server s;
    int rc = server_start(o, c, &s);
    if (rc < 0) {
        server_stop(&s, true);
        return rc;
    }
    int longest = 0;
    for (int i = 0; i < L->n_req; i++)
        if (L->reqs[i].n_prompt + L->reqs[i].max_tokens > longest) longest = L->reqs[i].n_prompt + L->reqs[i].max_tokens;
    if (longest > s.n_ctx) {
        server_stop(&s, false);
        return ob_err(OB_ERR_INVALID_ARG, "config %s: a request needs %d positions, more than the server's context of %d (-c)",
                      c->name, longest, s.n_ctx);
    }
    bs_level_run R;
    memset(&R, 0, sizeof R);
    R.o = o;
    R.port = s.port;
    R.vocab = vocab_range(s.n_vocab);
    pthread_mutex_init(&R.mu, NULL);
    if (o->warmup) {
        /* the shared prefix (if any) plus a few tokens: pages the weights in and caches the prefix,
         * as a server that has been up for a while would have it */
        bs_req w = {.n_prompt = o->prefix + 8, .prefixed = o->prefix > 0, .max_tokens = 4, .ids_seed = o->seed ^ 0xABCDEFull};
        bs_res wr;
        memset(&wr, 0, sizeof wr);
        R.reqs = &w, R.res = &wr, R.n = 1;
        client_main(&R);
        ob_free(wr.itl);
        if (!wr.ok) {
            server_stop(&s, true);
            pthread_mutex_destroy(&R.mu);
            return ob_err(OB_ERR_IO, "config %s: the warm-up request failed: %s", c->name, wr.error);
        }
    }
    R.reqs = L->reqs, R.res = L->res, R.n = L->n_req;
    atomic_store(&R.next, 0);
    R.t_first_send = R.t_last_end = 0;
    pthread_t th[256];
    int nt = conc < 256 ? conc : 256, started = 0;
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, client_main, &R) != 0) break;
    if (started == 0) client_main(&R);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&R.mu);
    rc = server_stop(&s, false);
    OB_TRY(rc);
    return summarize(L, R.t_last_end > R.t_first_send ? R.t_last_end - R.t_first_send : 0);
}

static void free_level(bs_level *L) {
    for (int i = 0; L->res && i < L->n_req; i++) ob_free(L->res[i].itl);
    ob_free(L->res);
    ob_free(L->reqs);
    L->res = NULL;
    L->reqs = NULL;
}

/* ---------------- output ---------------- */

static void print_list(FILE *f, const int *v, int n) {
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", v[i]);
}

static void print_table(const bs_opts *o, const bs_level *lv, int n) {
    printf("model: %s, build: %s\n", o->model ? o->model : "(in the configs)", OB_GIT_COMMIT);
    printf("mix: prompt ");
    print_list(stdout, o->prompt, o->n_prompt);
    printf(" tokens, output ");
    print_list(stdout, o->gen, o->n_gen);
    printf(" tokens (ignore_eos, greedy)");
    if (o->prefix) printf(", shared prefix %d tokens on %.0f%% of requests", o->prefix, o->prefix_share * 100);
    printf(", seed %llu\n\n", (unsigned long long)o->seed);
    printf("| config | clients | requests | req/s | output tok/s | TTFT p50 / p90 / p99 (ms) | ITL p50 / p90 / p99 (ms) "
           "| tok/s per request p50 | cached / prompt tokens |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int ci = 0; ci < o->n_cfg; ci++)
        for (int i = 0; i < n; i++) {
            const bs_level *L = &lv[i];
            if (L->cfg != ci) continue;
            printf("| %s | %d | %d%s | %.2f | %.1f | %.0f / %.0f / %.0f | %.1f / %.1f / %.1f | %.1f | %lld / %lld |\n",
                   o->cfg[ci].name, L->conc, L->completed, L->failed ? " (failed some)" : "", L->req_per_s, L->out_tok_per_s,
                   L->ttft[0], L->ttft[1], L->ttft[2], L->itl[0], L->itl[1], L->itl[2], L->eff[0], L->cached_tokens,
                   L->prompt_tokens);
        }
    printf("\nconfigs:");
    for (int ci = 0; ci < o->n_cfg; ci++) printf(" %s=\"%s\"", o->cfg[ci].name, o->cfg[ci].flags);
    printf("\n");
}

static json_t *pct_json(const double p[3], double mean) {
    return json_pack("{s:f, s:f, s:f, s:f}", "p50", p[0], "p90", p[1], "p99", p[2], "mean", mean);
}

static json_t *int_list(const int *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static int write_json(const bs_opts *o, const bs_level *lv, int n, const char *path) {
    json_t *configs = json_array(), *results = json_array();
    for (int ci = 0; ci < o->n_cfg; ci++)
        json_array_append_new(configs, json_pack("{s:s, s:s, s:s}", "name", o->cfg[ci].name, "flags", o->cfg[ci].flags,
                                                 "bin", o->cfg[ci].bin ? o->cfg[ci].bin : o->bin));
    for (int i = 0; i < n; i++) {
        const bs_level *L = &lv[i];
        json_t *reqs = json_array();
        for (int k = 0; k < L->n_req; k++) {
            const bs_res *r = &L->res[k];
            json_t *q = json_pack("{s:b, s:i, s:b, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:s}", "ok", r->ok,
                                  "prompt_tokens_sent", L->reqs[k].n_prompt, "prefixed", L->reqs[k].prefixed,
                                  "max_tokens", L->reqs[k].max_tokens, "prompt_tokens", r->prompt_tokens, "cached_tokens",
                                  r->cached_tokens, "completion_tokens", r->completion_tokens, "ttft_ms", r->ttft_ms,
                                  "decode_ms", r->decode_ms, "e2e_ms", r->e2e_ms, "first_event_ms", r->first_event_ms,
                                  "finish_reason", r->finish);
            if (q && r->error[0]) json_object_set_new(q, "error", json_string(r->error));
            json_array_append_new(reqs, q);
        }
        json_t *res = json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:I, s:I, s:I}", "config", o->cfg[L->cfg].name,
                                "concurrency", L->conc, "requests", L->n_req, "completed", L->completed, "failed", L->failed,
                                "wall_s", L->wall_s, "req_per_s", L->req_per_s, "output_tok_per_s", L->out_tok_per_s,
                                "prompt_tokens", (json_int_t)L->prompt_tokens, "cached_tokens", (json_int_t)L->cached_tokens,
                                "output_tokens", (json_int_t)L->out_tokens);
        if (res) {
            json_object_set_new(res, "ttft_ms", pct_json(L->ttft, L->ttft_mean));
            json_object_set_new(res, "itl_ms", pct_json(L->itl, L->itl_mean));
            json_object_set_new(res, "eff_tok_per_s", pct_json(L->eff, L->eff_mean));
            json_object_set_new(res, "requests_detail", reqs);
        } else {
            json_decref(reqs);
        }
        json_array_append_new(results, res);
    }
    json_t *mix = json_pack("{s:o, s:o, s:o, s:i, s:f, s:I, s:i, s:b, s:b}", "prompt_tokens", int_list(o->prompt, o->n_prompt),
                            "output_tokens", int_list(o->gen, o->n_gen), "concurrency", int_list(o->conc, o->n_conc),
                            "prefix_tokens", o->prefix, "prefix_share", o->prefix_share, "seed", (json_int_t)o->seed,
                            "requests", o->requests, "requests_per_client", o->per_client, "logprobs", o->logprobs);
    json_t *root = json_pack("{s:s, s:s?, s:o, s:o, s:o}", "build_commit", OB_GIT_COMMIT, "model", o->model, "mix", mix,
                             "configs", configs, "results", results);
    if (!root) return ob_err(OB_ERR_OOM, "json");
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
    json_decref(root);
    return rc == 0 ? 0 : ob_err(OB_ERR_IO, "cannot write %s", path);
}

/* A round axis maximum: 1, 2 or 5 times a power of ten, at least v. */
static double nice_max(double v) {
    if (!(v > 0)) return 1;
    double p = pow(10, floor(log10(v)));
    static const double m[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (m[i] * p >= v) return m[i] * p;
    return 10 * p;
}

/* Three panels - output tok/s, TTFT p50, ITL p50 against the number of
 * clients (evenly spaced) - with a line and dots per configuration and a
 * shared legend. Hand-written SVG 1.1. */
static int write_svg(const bs_opts *o, const bs_level *lv, int n, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return ob_err(OB_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    static const char *const titles[3] = {"output tokens/s (all clients)", "TTFT p50 (ms)", "inter-token latency p50 (ms)"};
    const int W = 330, H = 300, ML = 56, MR = 14, MT = 34, MB = 44, legend_h = 22 + 18 * ((o->n_cfg + 3) / 4);
    const int total_w = 3 * W, total_h = H + legend_h;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n",
            total_w, total_h, total_w, total_h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    for (int panel = 0; panel < 3; panel++) {
        double ymax = 0;
        for (int i = 0; i < n; i++) {
            double y = panel == 0 ? lv[i].out_tok_per_s : panel == 1 ? lv[i].ttft[0] : lv[i].itl[0];
            if (y > ymax) ymax = y;
        }
        ymax = nice_max(ymax * 1.05);
        const int x0 = panel * W + ML, x1 = (panel + 1) * W - MR, y0 = H - MB, y1 = MT;
        fprintf(f, "<g>\n<text x=\"%d\" y=\"20\" text-anchor=\"middle\" font-size=\"13\">%s</text>\n", (x0 + x1) / 2,
                titles[panel]);
        for (int t = 0; t <= 5; t++) {
            double yv = ymax * t / 5, py = y0 - (y0 - y1) * (double)t / 5;
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", x0, py, x1, py);
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 4, py + 4, yv);
        }
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x1, y0);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0, y1);
        for (int li = 0; li < o->n_conc; li++) {
            double px = o->n_conc > 1 ? x0 + 12 + (x1 - x0 - 24) * (double)li / (o->n_conc - 1) : (x0 + x1) / 2.0;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n", px, y0, px, y0 + 4);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", px, y0 + 16, o->conc[li]);
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">concurrent clients</text>\n", (x0 + x1) / 2, y0 + 34);
        for (int ci = 0; ci < o->n_cfg; ci++) {
            const char *col = colors[ci % 8];
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
            for (int li = 0; li < o->n_conc; li++)
                for (int i = 0; i < n; i++) {
                    if (lv[i].cfg != ci || lv[i].conc != o->conc[li]) continue;
                    double y = panel == 0 ? lv[i].out_tok_per_s : panel == 1 ? lv[i].ttft[0] : lv[i].itl[0];
                    double px = o->n_conc > 1 ? x0 + 12 + (x1 - x0 - 24) * (double)li / (o->n_conc - 1) : (x0 + x1) / 2.0;
                    fprintf(f, "%.1f,%.1f ", px, y0 - (y0 - y1) * y / ymax);
                }
            fprintf(f, "\"/>\n");
            for (int li = 0; li < o->n_conc; li++)
                for (int i = 0; i < n; i++) {
                    if (lv[i].cfg != ci || lv[i].conc != o->conc[li]) continue;
                    double y = panel == 0 ? lv[i].out_tok_per_s : panel == 1 ? lv[i].ttft[0] : lv[i].itl[0];
                    double px = o->n_conc > 1 ? x0 + 12 + (x1 - x0 - 24) * (double)li / (o->n_conc - 1) : (x0 + x1) / 2.0;
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px, y0 - (y0 - y1) * y / ymax, col);
                }
        }
        fprintf(f, "</g>\n");
    }
    /* legend: config names are letters, digits and - _ . + (checked), so no escaping */
    fprintf(f, "<g>\n");
    for (int ci = 0; ci < o->n_cfg; ci++) {
        int lx = ML + (ci % 4) * 230, ly = H + 8 + 18 * (ci / 4);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n", lx, ly, lx + 24, ly,
                colors[ci % 8]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 30, ly + 4, o->cfg[ci].name);
    }
    fprintf(f, "</g>\n</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return ob_err(OB_ERR_IO, "cannot write %s", path);
    return 0;
}

/* ---------------- the command ---------------- */

static int parse_args(int argc, char **argv, bs_opts *o, bool *help) {
    for (int i = 0; i < argc;) {
        const char *a = argv[i++];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            *help = true;
            return 0;
        }
        if (!strcmp(a, "--logprobs")) {
            o->logprobs = true;
            continue;
        }
        if (!strcmp(a, "--no-warmup")) {
            o->warmup = false;
            continue;
        }
        if (i >= argc) return ob_err(OB_ERR_INVALID_ARG, "%s needs a value", a);
        const char *v = argv[i++];
        char *end = NULL;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--config")) OB_TRY(add_config(o, v));
        else if (!strcmp(a, "-c")) {
            if ((o->n_conc = parse_list(v, o->conc, BS_MAX_LIST, 1)) <= 0)
                return ob_err(OB_ERR_INVALID_ARG, "-c %s: expected a list of client counts >= 1", v);
            for (int k = 0; k < o->n_conc; k++)
                if (o->conc[k] > 256) return ob_err(OB_ERR_INVALID_ARG, "-c %s: at most 256 clients", v);
        } else if (!strcmp(a, "-p")) {
            if ((o->n_prompt = parse_list(v, o->prompt, BS_MAX_LIST, 1)) <= 0)
                return ob_err(OB_ERR_INVALID_ARG, "-p %s: expected a list of prompt lengths >= 1", v);
        } else if (!strcmp(a, "-n")) {
            if ((o->n_gen = parse_list(v, o->gen, BS_MAX_LIST, 1)) <= 0)
                return ob_err(OB_ERR_INVALID_ARG, "-n %s: expected a list of output lengths >= 1", v);
        } else if (!strcmp(a, "-r") || !strcmp(a, "--requests")) {
            long x = strtol(v, &end, 10);
            o->per_client = *end == 'x';
            if (*(end + o->per_client) || x < 1 || x > 100000)
                return ob_err(OB_ERR_INVALID_ARG, "%s %s: expected 1..100000, or Nx for N per client", a, v);
            o->requests = (int)x;
        } else if (!strcmp(a, "--prefix")) {
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > 1 << 20) return ob_err(OB_ERR_INVALID_ARG, "--prefix %s: expected a token count", v);
            o->prefix = (int)x;
        } else if (!strcmp(a, "--prefix-share")) {
            double x = strtod(v, &end);
            if (*end || !(x >= 0 && x <= 1)) return ob_err(OB_ERR_INVALID_ARG, "--prefix-share %s: expected 0..1", v);
            o->prefix_share = x;
        } else if (!strcmp(a, "--seed")) {
            o->seed = strtoull(v, &end, 10);
            if (*end) return ob_err(OB_ERR_INVALID_ARG, "--seed %s: expected an integer", v);
        } else if (!strcmp(a, "--timeout") || !strcmp(a, "--start-timeout")) {
            double x = strtod(v, &end);
            if (*end || !(x > 0)) return ob_err(OB_ERR_INVALID_ARG, "%s %s: expected seconds > 0", a, v);
            *(!strcmp(a, "--timeout") ? &o->timeout_s : &o->start_timeout_s) = x;
        } else if (!strcmp(a, "--json")) o->json_path = v;
        else if (!strcmp(a, "--plot")) o->plot_path = v;
        else if (!strcmp(a, "--bin")) snprintf(o->bin, sizeof o->bin, "%s", v);
        else return ob_err(OB_ERR_INVALID_ARG, "unknown option %s (see 1bit bench serve --help)", a);
    }
    return 0;
}

int ob_cmd_bench_serve(int argc, char **argv) {
    bs_opts o;
    memset(&o, 0, sizeof o);
    o.prompt[0] = 128, o.n_prompt = 1, o.gen[0] = 64, o.n_gen = 1;
    o.conc[0] = 1, o.conc[1] = 2, o.conc[2] = 4, o.conc[3] = 8, o.n_conc = 4;
    o.requests = 4, o.per_client = true, o.prefix_share = 1, o.seed = 1;
    o.timeout_s = 600, o.start_timeout_s = 300, o.warmup = true;
    bool help = false;
    int rc = parse_args(argc, argv, &o, &help);
    if (help) {
        usage();
        free_configs(&o);
        return 0;
    }
    if (rc < 0) {
        free_configs(&o);
        return ob_cli_fail(rc, "bench serve");
    }
    if (!o.bin[0]) {
        ssize_t n = readlink("/proc/self/exe", o.bin, sizeof o.bin - 1);
        if (n <= 0) {
            free_configs(&o);
            return ob_cli_fail(0, "bench serve: cannot find this binary (/proc/self/exe); pass --bin PATH");
        }
        o.bin[n] = '\0';
    }
    if (o.n_cfg == 0) add_config(&o, "default=");
    if (!o.model) {
        bool all = true;
        for (int ci = 0; ci < o.n_cfg; ci++) {
            bool has = false;
            for (int k = 0; k < o.cfg[ci].argc; k++)
                has |= !strcmp(o.cfg[ci].argv[k], "-m") || !strcmp(o.cfg[ci].argv[k], "--model") ||
                       !strcmp(o.cfg[ci].argv[k], "-hf") || !strncmp(o.cfg[ci].argv[k], "--model=", 8);
            all &= has;
        }
        if (!all) {
            free_configs(&o);
            return ob_cli_fail(0, "bench serve: no model (-m MODEL, or -m in every --config)");
        }
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free_configs(&o);
        return ob_cli_fail(0, "bench serve: curl_global_init failed");
    }
    signal(SIGPIPE, SIG_IGN);
    int n_lv = o.n_conc * o.n_cfg, done = 0;
    bs_level *lv = ob_calloc((size_t)n_lv, sizeof *lv);
    int status = lv ? 0 : ob_cli_fail(OB_ERR_OOM, "bench serve");
    /* interleaved: every configuration at one level before the next level */
    for (int li = 0; li < o.n_conc && !status; li++)
        for (int ci = 0; ci < o.n_cfg && !status; ci++) {
            bs_level *L = &lv[done];
            double t0 = now_s();
            rc = run_level(&o, ci, o.conc[li], L);
            done++;
            if (rc < 0) {
                status = ob_cli_fail(rc, "bench serve");
                break;
            }
            fprintf(stderr,
                    "bench serve: %s c=%d: %d/%d requests, %.1f output tok/s, TTFT p50 %.0f ms, ITL p50 %.1f ms (%.1f s)\n",
                    o.cfg[ci].name, L->conc, L->completed, L->n_req, L->out_tok_per_s, L->ttft[0], L->itl[0], now_s() - t0);
            for (int k = 0; k < L->n_req; k++)
                if (!L->res[k].ok) {
                    fprintf(stderr, "bench serve: %s c=%d request %d failed: %s\n", o.cfg[ci].name, L->conc, k, L->res[k].error);
                    break;
                }
        }
    if (!status) {
        print_table(&o, lv, done);
        if (o.json_path && (rc = write_json(&o, lv, done, o.json_path)) < 0) status = ob_cli_fail(rc, "bench serve");
        if (!status && o.plot_path && (rc = write_svg(&o, lv, done, o.plot_path)) < 0) status = ob_cli_fail(rc, "bench serve");
        for (int i = 0; i < done && !status; i++)
            if (lv[i].failed) status = ob_cli_fail(0, "bench serve: %d requests failed (see above)", lv[i].failed);
    }
    for (int i = 0; lv && i < done; i++) free_level(&lv[i]);
    ob_free(lv);
    free_configs(&o);
    curl_global_cleanup();
    return status;
}
