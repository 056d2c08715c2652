/*
 * test_server.c - the HTTP server end to end: a real server (in-process, on
 * a free loopback port) serving stories260K, spoken to over raw sockets with
 * HTTP/1.1 written by hand, so the bytes on the wire are what is tested.
 *
 * Covered: every endpoint; both completion kinds, non-streaming and
 * streaming, against the llama2.c reference continuation; stop strings
 * across token boundaries; logprobs; n > 1 with seeds; every error class
 * (each followed by a request that must still succeed); API keys; the
 * loading state (a FIFO as the model file keeps the loader waiting); client
 * disconnects cancelling their engine requests; 100 concurrent streaming
 * clients with random disconnects; shutdown with streams open; the `1bit
 * serve` command line as a subprocess; and the pure parts (request parser,
 * stop matching, reasoning split) directly.
 *
 * Text needs the tokenizer and chat templates (src/tokenizer, src/chat).
 * Tests that need them check at run time and skip, saying so, in a build
 * where ob_tokenize or ob_chat_render still answer OB_ERR_UNSUPPORTED.
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "onebit.h"
#include "backend/split.h"
#include "server/request.h"
#include "server/server.h"
#include "server/text.h"
#include "gguf/gguf.h"
#include "test.h"

#ifndef OB_CLI_PATH
#error "OB_CLI_PATH must name the 1bit binary"
#endif

/* ---------------- the shared server ---------------- */

static ob_server *g_srv;
static int g_port;
static bool g_text, g_chat;     /* tokenizer / chat templates available */
static const char *g_model_path;
static char g_expected_64[2048]; /* "Once upon a time" + its greedy continuation (llama2.c reference) */
static int g_expected_n;         /* tokens in that continuation (60) */

static bool setup(void) {
    if (g_srv) return true;
    const char *dir = test_models_dir();
    if (!dir) return false;
    static char path[4096];
    snprintf(path, sizeof path, "%s", test_path(dir, "stories260K/stories260K.gguf"));
    g_model_path = path;
    json_error_t jerr;
    json_t *ref = json_load_file(test_path(dir, "stories260K/stories260K.reference.json"), 0, &jerr);
    if (!ref) return false;
    json_t *c1 = json_array_get(json_object_get(ref, "cases"), 1);
    snprintf(g_expected_64, sizeof g_expected_64, "%s", json_string_value(json_object_get(c1, "expected_text")));
    g_expected_n = (int)json_array_size(json_object_get(c1, "expected_ids_after_prompt"));
    json_decref(ref);

    /* what this build can do with text */
    ob_model *m = NULL;
    if (ob_model_load(g_model_path, NULL, &m) < 0) return false;
    int32_t n = 0;
    ob_token ids[16];
    g_text = ob_tokenize(m, "Once", 4, true, true, ids, 16, &n) == 0;
    static const char ctx[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"add_generation_prompt\":true}";
    char *out = NULL;
    size_t out_len = 0;
    g_chat = g_text && ob_chat_render(m, NULL, ctx, sizeof ctx - 1, &out, &out_len) == 0;
    ob_free_string(out);
    ob_model_free(m);

    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = g_model_path;
    p.port = 0;
    p.device = "cpu";
    p.engine.n_parallel = 8;
    p.engine.n_threads = 2;
    p.engine.queue_max = 256;
    p.quiet = true;
    if (ob_server_start(&p, &g_srv) < 0) {
        fprintf(stderr, "server: %s\n", ob_last_error());
        return false;
    }
    g_port = ob_server_port(g_srv);
    return ob_server_wait_ready(g_srv, 30000) == 0;
}

#define NEED_SERVER()                                                                          \
    do {                                                                                       \
        if (!setup()) {                                                                        \
            if (!test_models_dir()) test_skip("../shared/models is absent");                   \
            else CHECK_MSG(0, "could not start the server on stories260K: %s", ob_last_error()); \
            return;                                                                            \
        }                                                                                      \
    } while (0)

#define NEED_TEXT()                                                                            \
    do {                                                                                       \
        NEED_SERVER();                                                                         \
        if (!g_text) {                                                                         \
            test_skip("this build has no tokenizer yet (ob_tokenize is unsupported)");         \
            return;                                                                            \
        }                                                                                      \
    } while (0)

#define NEED_CHAT()                                                                            \
    do {                                                                                       \
        NEED_TEXT();                                                                           \
        if (!g_chat) {                                                                         \
            test_skip("this build has no chat templates yet (ob_chat_render is unsupported)"); \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* ---------------- a small HTTP/1.1 client ---------------- */

typedef struct resp {
    int status;
    char *head;   /* status line and headers */
    char *body;   /* de-chunked, NUL-terminated */
    size_t len;
} resp;

static void resp_free(resp *r) {
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

static int connect_port(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {120, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return; /* the server may answer and close before reading everything */
        p += k;
        n -= (size_t)k;
    }
}

static int send_request(int port, const char *method, const char *path, const char *headers, const char *body,
                        size_t len) {
    int fd = connect_port(port);
    if (fd < 0) return -1;
    char head[2048];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n%s\r\n",
                      method, path, body ? len : (size_t)0, headers ? headers : "");
    send_all(fd, head, (size_t)hn);
    if (body && len) send_all(fd, body, len);
    return fd;
}

/* Read until the server closes; split head and body; undo chunking. */
static bool read_response(int fd, resp *r) {
    memset(r, 0, sizeof *r);
    size_t cap = 1 << 16, n = 0;
    char *raw = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) raw = realloc(raw, cap *= 2);
        ssize_t k = recv(fd, raw + n, cap - n - 1, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    raw[n] = '\0';
    char *sep = strstr(raw, "\r\n\r\n");
    if (!sep || sscanf(raw, "HTTP/1.%*d %d", &r->status) != 1) {
        free(raw);
        return false;
    }
    r->head = strndup(raw, (size_t)(sep - raw));
    const char *b = sep + 4;
    size_t blen = n - (size_t)(b - raw);
    r->body = malloc(blen + 1);
    if (strcasestr(r->head, "Transfer-Encoding: chunked")) {
        while (blen > 0) {
            char *end;
            unsigned long sz = strtoul(b, &end, 16);
            const char *data = strstr(b, "\r\n");
            if (!data || sz == 0) break;
            data += 2;
            if ((size_t)(data - b) + sz > blen) sz = blen - (size_t)(data - b); /* cut off: keep what came */
            memcpy(r->body + r->len, data, sz);
            r->len += sz;
            size_t used = (size_t)(data - b) + sz + 2;
            if (used > blen) break;
            b += used;
            blen -= used;
        }
    } else {
        memcpy(r->body, b, blen);
        r->len = blen;
    }
    r->body[r->len] = '\0';
    free(raw);
    return true;
}

static bool http_req(int port, const char *method, const char *path, const char *headers, const char *body, resp *r) {
    int fd = send_request(port, method, path, headers, body, body ? strlen(body) : 0);
    if (fd < 0) {
        memset(r, 0, sizeof *r);
        return false;
    }
    bool ok = read_response(fd, r);
    close(fd);
    return ok;
}

static json_t *parse(const resp *r) {
    json_error_t e;
    return json_loadb(r->body ? r->body : "", r->len, 0, &e);
}

/* POST a JSON body to the shared server; returns the parsed reply (or NULL) and the status. */
static json_t *post(const char *path, const char *body, int *status) {
    resp r;
    *status = 0;
    if (!http_req(g_port, "POST", path, NULL, body, &r)) return NULL;
    *status = r.status;
    json_t *j = parse(&r);
    resp_free(&r);
    return j;
}

static json_t *get(const char *path, int *status) {
    resp r;
    *status = 0;
    if (!http_req(g_port, "GET", path, NULL, NULL, &r)) return NULL;
    *status = r.status;
    json_t *j = parse(&r);
    resp_free(&r);
    return j;
}

static const char *jstr(json_t *o, const char *path) {
    /* "a.b.0.c": objects by key, arrays by index */
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    /* strtok_r: the streaming clients call this from 100 threads at once (strtok's hidden
     * state made hundred_concurrent_streams miss a finish_reason about once in 80 runs) */
    for (char *tok = strtok_r(buf, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_t *jget(json_t *o, const char *path) {
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    /* strtok_r: the streaming clients call this from 100 threads at once (strtok's hidden
     * state made hundred_concurrent_streams miss a finish_reason about once in 80 runs) */
    for (char *tok = strtok_r(buf, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
    return v;
}

static long long jint(json_t *o, const char *path) {
    json_t *v = jget(o, path);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -999999;
}

/* The error object of an OpenAI error reply has exactly its four fields. */
static void check_error(json_t *j, int status, int want_status, const char *want_code, const char *want_param) {
    CHECK_EQ_INT(status, want_status);
    json_t *e = json_object_get(j, "error");
    CHECK_MSG(json_is_object(e), "no error object (status %d)", status);
    if (!e) return;
    CHECK(json_is_string(json_object_get(e, "message")) && json_string_length(json_object_get(e, "message")) > 0);
    CHECK(json_is_string(json_object_get(e, "type")));
    CHECK(json_object_get(e, "param") != NULL);
    CHECK(json_object_get(e, "code") != NULL);
    if (want_code) CHECK_EQ_STR(jstr(j, "error.code"), want_code);
    if (want_param) CHECK_EQ_STR(jstr(j, "error.param"), want_param);
}

/* After an error the server must still answer normally. */
static void check_still_serving(void) {
    int st;
    json_t *j = get("/v1/models", &st);
    CHECK_EQ_INT(st, 200);
    json_decref(j);
    if (g_text) {
        j = post("/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":3,\"temperature\":0}", &st);
        CHECK_EQ_INT(st, 200);
        CHECK_EQ_STR(jstr(j, "choices.0.finish_reason"), "length");
        json_decref(j);
    }
}

/* SSE events of a body: the JSON of each `data:` line, "[DONE]" as a string. */
static json_t *sse_events(const char *body) {
    json_t *arr = json_array();
    for (const char *p = body; (p = strstr(p, "data: ")) != NULL;) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 6 && !strncmp(p, "[DONE]", 6)) json_array_append_new(arr, json_string("[DONE]"));
        else {
            json_error_t e;
            json_t *j = json_loadb(p, n, 0, &e);
            json_array_append_new(arr, j ? j : json_string("<bad json>"));
        }
        p += n;
    }
    return arr;
}

/* ---------------- pure parts ---------------- */

static int parse_req(ob_srv_api api, const char *body, ob_srv_request *r, ob_srv_error *e) {
    ob_srv_defaults d;
    ob_srv_defaults_init(&d);
    return ob_srv_request_parse(api, body, strlen(body), &d, r, e);
}

TEST(request_parser_accepts_openai_shapes) {
    ob_srv_request r;
    ob_srv_error e;
    CHECK_OK(parse_req(OB_SRV_CHAT,
                       "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
                       "\"max_completion_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"stop\":\"END\",\"seed\":42,"
                       "\"logprobs\":true,\"top_logprobs\":3,\"n\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                       "\"user\":\"u\",\"unknown_field\":{\"x\":1},\"chat_template_kwargs\":{\"enable_thinking\":false}}",
                       &r, &e));
    CHECK_EQ_STR(r.model, "m");
    CHECK_EQ_INT(r.gen.max_tokens, 7);
    CHECK_NEAR(r.gen.sampling.temperature, 0.5, 1e-6);
    CHECK_EQ_INT(r.n_stop, 1);
    CHECK_EQ_STR(r.stop[0], "END");
    CHECK(r.has_seed && r.gen.sampling.seed == 42);
    CHECK_EQ_INT(r.gen.top_logprobs, 3);
    CHECK_EQ_INT(r.n, 2);
    CHECK(r.stream && r.include_usage);
    CHECK_EQ_INT(r.n_messages, 2);
    /* content parts joined with "\n"; kwargs become template variables */
    CHECK(strstr(r.chat_context, "\"content\":\"a\\nb\"") != NULL);
    CHECK(strstr(r.chat_context, "\"enable_thinking\":false") != NULL);
    CHECK(strstr(r.chat_context, "\"add_generation_prompt\":true") != NULL);
    ob_srv_request_free(&r);

    /* the server's --chat-template-kwargs, overridden key by key by the request's */
    ob_srv_defaults d;
    ob_srv_defaults_init(&d);
    d.template_kwargs = "{\"enable_thinking\":false,\"x\":1}";
    const char *kw = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":{\"x\":2}}";
    CHECK_OK(ob_srv_request_parse(OB_SRV_CHAT, kw, strlen(kw), &d, &r, &e));
    CHECK(r.chat_context && strstr(r.chat_context, "\"enable_thinking\":false") && strstr(r.chat_context, "\"x\":2"));
    ob_srv_request_free(&r);

    CHECK_OK(parse_req(OB_SRV_COMPLETION, "{\"prompt\":[\"a\",\"b\"],\"n\":3,\"logprobs\":2,\"max_tokens\":-1}", &r, &e));
    CHECK_EQ_INT(r.n_prompts, 2);
    CHECK_EQ_INT(r.gen.top_logprobs, 2);
    CHECK_EQ_INT(r.gen.max_tokens, 0); /* -1: no limit */
    CHECK(!r.has_seed);
    ob_srv_request_free(&r);
    CHECK_OK(parse_req(OB_SRV_COMPLETION, "{\"prompt\":[1,2,3]}", &r, &e));
    CHECK_EQ_INT(r.n_prompts, 1);
    CHECK_EQ_INT(r.prompts[0].n_ids, 3);
    CHECK(r.prompts[0].text == NULL);
    ob_srv_request_free(&r);
    CHECK_OK(parse_req(OB_SRV_COMPLETION, "{\"prompt\":[[1,2],[3]],\"stop\":[\"x\",\"\",\"yy\"]}", &r, &e));
    CHECK_EQ_INT(r.n_prompts, 2);
    CHECK_EQ_INT(r.prompts[1].n_ids, 1);
    CHECK_EQ_INT(r.n_stop, 2); /* the empty stop string is dropped */
    ob_srv_request_free(&r);
    CHECK_OK(parse_req(OB_SRV_NATIVE, "{\"prompt\":\"x\",\"n_predict\":5,\"n_probs\":2,\"temperature\":null}", &r, &e));
    CHECK_EQ_INT(r.gen.max_tokens, 5);
    CHECK_EQ_INT(r.gen.top_logprobs, 2);
    CHECK_NEAR(r.gen.sampling.temperature, 0.8, 1e-6); /* null = the default */
    ob_srv_request_free(&r);
}

TEST(request_parser_names_the_bad_field) {
    static const struct {
        ob_srv_api api;
        const char *body, *param, *code;
        int http;
    } cases[] = {
        {OB_SRV_CHAT, "{\"messages\":", NULL, "invalid_json", 400},
        {OB_SRV_CHAT, "[1,2]", NULL, "invalid_json", 400},
        {OB_SRV_CHAT, "", NULL, "invalid_json", 400},
        {OB_SRV_CHAT, "{\"messages\":\"hi\"}", "messages", "invalid_type", 400},
        {OB_SRV_CHAT, "{}", "messages", "missing_field", 400},
        {OB_SRV_CHAT, "{\"messages\":[]}", "messages", "invalid_value", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role", "missing_field", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content", "invalid_type", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages[0].content[0]",
         "unsupported_content", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", "temperature",
         "invalid_type", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":1.5}", "top_p", "invalid_value", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}", "max_tokens", "invalid_type",
         400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":100}", "n", "invalid_value", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", "stream", "invalid_type", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", "stop[0]", "invalid_type", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", "top_logprobs",
         "invalid_value", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"5\":10}}", "logit_bias",
         "unsupported_parameter", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}",
         "response_format", "unsupported_parameter", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "tool_choice",
         "unsupported_parameter", 400},
        {OB_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{\"include_usage\":\"y\"}}",
         "stream_options.include_usage", "invalid_type", 400},
        {OB_SRV_COMPLETION, "{}", "prompt", "missing_field", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":5}", "prompt", "invalid_type", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":[]}", "prompt", "invalid_value", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":[1,-2]}", "prompt", "invalid_type", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":[\"a\",{}]}", "prompt[1]", "invalid_type", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":true}", "logprobs", "invalid_type", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":\"a\",\"suffix\":\"z\"}", "suffix", "unsupported_parameter", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":\"a\",\"max_tokens\":0}", "max_tokens", "invalid_value", 400},
        {OB_SRV_COMPLETION, "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"n\":16}", "prompt", "invalid_value", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ob_srv_request r;
        ob_srv_error e;
        int rc = parse_req(cases[i].api, cases[i].body, &r, &e);
        CHECK_MSG(rc < 0, "case %zu (%s) was accepted", i, cases[i].body);
        if (rc >= 0) {
            ob_srv_request_free(&r);
            continue;
        }
        CHECK_EQ_INT(e.http, cases[i].http);
        CHECK_MSG(!strcmp(e.code, cases[i].code), "case %zu: code %s, want %s (%s)", i, e.code, cases[i].code, e.message);
        CHECK_MSG(!strcmp(e.param, cases[i].param ? cases[i].param : ""), "case %zu: param '%s', want '%s'", i, e.param,
                  cases[i].param ? cases[i].param : "");
        if (cases[i].param) CHECK_MSG(strstr(e.message, cases[i].param) != NULL, "case %zu: '%s' not named", i, e.message);
        CHECK(r.model == NULL && r.prompts == NULL && r.stop == NULL); /* nothing leaks out of a failure */
    }
    /* invalid UTF-8 and NUL characters are refused as invalid JSON */
    ob_srv_request r;
    ob_srv_error e;
    CHECK(parse_req(OB_SRV_COMPLETION, "{\"prompt\":\"\xff\xfe\"}", &r, &e) < 0);
    CHECK_EQ_STR(e.code, "invalid_json");
    CHECK(parse_req(OB_SRV_COMPLETION, "{\"prompt\":\"a\\u0000b\"}", &r, &e) < 0);
    CHECK_EQ_STR(e.code, "invalid_json");
}

TEST(stop_strings_across_boundaries) {
    char *stops[] = {"girl", "ab"};
    int which = -1;
    CHECK_EQ_INT(ob_srv_stop_find("a little girl", 13, 0, stops, 2, &which), 9);
    CHECK_EQ_INT(which, 0);
    CHECK_EQ_INT(ob_srv_stop_find("xxabgirl", 8, 0, stops, 2, &which), 2); /* earliest wins */
    CHECK_EQ_INT(which, 1);
    /* the stop completed first wins, however the text was split */
    char *nested[] = {"abcd", "bc"};
    CHECK_EQ_INT(ob_srv_stop_find("xabcd", 5, 0, nested, 2, &which), 2);
    CHECK_EQ_INT(which, 1);
    char *same_end[] = {"cd", "abcd"};
    CHECK_EQ_INT(ob_srv_stop_find("xabcd", 5, 0, same_end, 2, &which), 1);
    CHECK_EQ_INT(which, 1);
    CHECK(ob_srv_stop_find("nothing", 7, 0, stops, 2, &which) == (size_t)-1);
    /* hold back exactly the longest suffix that could still become a stop */
    CHECK_EQ_INT(ob_srv_stop_holdback("a little gi", 11, stops, 2), 2);
    CHECK_EQ_INT(ob_srv_stop_holdback("a little gir", 12, stops, 2), 3);
    CHECK_EQ_INT(ob_srv_stop_holdback("xa", 2, stops, 2), 1);
    CHECK_EQ_INT(ob_srv_stop_holdback("girl!", 5, stops, 2), 0);
    CHECK_EQ_INT(ob_srv_stop_holdback("", 0, stops, 2), 0);
}

static void think_feed(const char *const *pieces, int n, bool opened, const char *want_content, const char *want_reasoning) {
    ob_srv_think t;
    ob_buf content = {0}, reasoning = {0};
    ob_srv_think_init(&t, true, opened);
    for (int i = 0; i < n; i++) CHECK_OK(ob_srv_think_push(&t, pieces[i], strlen(pieces[i]), false, &content, &reasoning));
    CHECK_OK(ob_srv_think_push(&t, "", 0, true, &content, &reasoning));
    CHECK_EQ_STR(content.data ? content.data : "", want_content);
    CHECK_EQ_STR(reasoning.data ? reasoning.data : "", want_reasoning);
    ob_srv_think_free(&t);
    ob_buf_free(&content);
    ob_buf_free(&reasoning);
}

TEST(reasoning_split) {
    const char *a[] = {"<th", "ink>\nplan ", "it</th", "ink>\n\nThe answer."};
    think_feed(a, 4, false, "The answer.", "plan it");
    const char *b[] = {"Hello <think> not at the start"};
    think_feed(b, 1, false, "Hello <think> not at the start", "");
    const char *c[] = {"\nstill thinking", "</think>", "done"};
    think_feed(c, 3, true, "done", "still thinking"); /* the prompt opened <think> */
    const char *d[] = {"<thi"};
    think_feed(d, 1, false, "<thi", ""); /* ended before the tag was complete */
    const char *e[] = {"<think>never closed"};
    think_feed(e, 1, false, "", "never closed");
    CHECK(ob_srv_prompt_opens_think("<|im_start|>assistant\n<think>\n", 30));
    CHECK(!ob_srv_prompt_opens_think("<think>x</think>", 16));
}

/* ---------------- endpoints ---------------- */

TEST(health_models_and_routes) {
    NEED_SERVER();
    int st;
    json_t *j = get("/health", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_STR(jstr(j, "status"), "ok");
    json_decref(j);
    j = get("/v1/models", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_STR(jstr(j, "object"), "list");
    CHECK_EQ_STR(jstr(j, "data.0.id"), "stories260K.gguf");
    CHECK_EQ_STR(jstr(j, "data.0.object"), "model");
    CHECK_EQ_INT(jint(j, "data.0.meta.n_vocab"), 512);
    json_decref(j);
    j = get("/models", &st);
    CHECK_EQ_INT(st, 200);
    json_decref(j);
    j = get("/no/such/thing", &st);
    check_error(j, st, 404, "not_found", NULL);
    json_decref(j);
    j = get("/v1/chat/completions", &st);
    check_error(j, st, 405, "method_not_allowed", NULL);
    json_decref(j);
    resp r;
    CHECK(http_req(g_port, "OPTIONS", "/v1/chat/completions", "Origin: http://x\r\n", NULL, &r));
    CHECK_EQ_INT(r.status, 204);
    CHECK(r.head && strcasestr(r.head, "Access-Control-Allow-Origin: *"));
    resp_free(&r);
}

TEST(props_slots_metrics) {
    NEED_SERVER();
    int st;
    json_t *j = get("/props", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(jint(j, "total_slots"), 8);
    CHECK_EQ_INT(jint(j, "default_generation_settings.n_ctx"), 2048);
    CHECK(jstr(j, "model_path") && strstr(jstr(j, "model_path"), "stories260K.gguf"));
    json_decref(j);
    j = get("/slots", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(json_array_size(j), 8);
    CHECK_EQ_INT(jint(j, "7.id"), 7);
    json_decref(j);
    j = post("/slots/0?action=erase", "", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(jint(j, "id_slot"), 0);
    json_decref(j);
    j = post("/slots/99?action=erase", "", &st);
    check_error(j, st, 400, "invalid_value", "id_slot");
    json_decref(j);
    j = post("/slots/1?action=save", "", &st);
    check_error(j, st, 501, "not_supported", "action");
    json_decref(j);
    j = post("/slots/1", "", &st);
    check_error(j, st, 400, "missing_field", "action");
    json_decref(j);

    resp r;
    CHECK(http_req(g_port, "GET", "/metrics", NULL, NULL, &r));
    CHECK_EQ_INT(r.status, 200);
    CHECK(strcasestr(r.head, "Content-Type: text/plain"));
    CHECK(strstr(r.body, "# TYPE onebit_requests_total counter"));
    CHECK(strstr(r.body, "onebit_up 1"));
    CHECK(strstr(r.body, "llamacpp:prompt_tokens_total"));
    CHECK(strstr(r.body, "onebit_slots 8"));
    double before = -1;
    const char *p = strstr(r.body, "\nonebit_prompt_tokens_total ");
    if (p) before = atof(p + strlen("\nonebit_prompt_tokens_total "));
    CHECK(before >= 0);
    resp_free(&r);
    if (!g_text) return; /* generating needs the detokenizer */
    /* a request moves the counters */
    j = post("/v1/completions", "{\"prompt\":[1,403,407,261,378],\"max_tokens\":2,\"temperature\":0}", &st);
    json_decref(j);
    CHECK(http_req(g_port, "GET", "/metrics", NULL, NULL, &r));
    p = strstr(r.body ? r.body : "", "\nonebit_prompt_tokens_total ");
    CHECK(p && atof(p + strlen("\nonebit_prompt_tokens_total ")) >= before + 5);
    resp_free(&r);
}

TEST(embeddings_are_refused_clearly) {
    NEED_SERVER();
    int st;
    /* this server was started without --embeddings */
    json_t *j = post("/v1/embeddings", "{\"input\":\"hello\",\"model\":\"x\"}", &st);
    check_error(j, st, 501, "not_supported", NULL);
    CHECK(jstr(j, "error.message") && strstr(jstr(j, "error.message"), "--embeddings"));
    json_decref(j);
    j = post("/v1/rerank", "{\"query\":\"a\",\"documents\":[\"b\"]}", &st);
    check_error(j, st, 501, "not_supported", NULL);
    json_decref(j);
    check_still_serving();
}

/* ---------------- embeddings ---------------- */

/* The final hidden states (after the output norm) of the prompt
 * [1,403,407,261,378], one row per token, from an embeddings context. */
static const ob_token EMB_PROMPT[5] = {1, 403, 407, 261, 378};

static float *hidden_states(ob_model *m) {
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    ob_context *ctx = NULL;
    if (ob_context_create(m, &cp, &ctx) < 0) return NULL;
    int E = ob_model_n_embd(m);
    float *h = calloc((size_t)5 * (size_t)E, sizeof(float));
    int32_t pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0};
    int8_t all[5] = {1, 1, 1, 1, 1};
    ob_batch b = {5, EMB_PROMPT, pos, seq, all};
    bool ok = ob_context_set_embeddings(ctx, true) == 0 && ob_decode(ctx, &b) == 0;
    for (int i = 0; ok && i < 5; i++) {
        const float *row = ob_get_embeddings(ctx, i);
        ok = row != NULL && ob_get_logits(ctx, i) == NULL;
        if (ok) memcpy(h + (size_t)i * E, row, (size_t)E * sizeof(float));
    }
    ob_context_free(ctx);
    if (!ok) free(h);
    return ok ? h : NULL;
}

/* A second path to the same numbers: stories260K's logits are its output
 * matrix (tied to token_embd) times the hidden state, so the embeddings
 * times that matrix, computed here in double, must give the logits an
 * ordinary context computes. */
TEST(embeddings_times_output_matrix_are_the_logits) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    const char *path = test_path(dir, "stories260K/stories260K.gguf");
    ob_model *m = NULL;
    CHECK_EQ_INT(ob_model_load(path, NULL, &m), 0);
    if (!m) return;
    CHECK_EQ_INT(ob_model_pooling_type(m), -1); /* this file does not say */
    const int E = ob_model_n_embd(m), V = ob_model_n_vocab(m);
    float *h = hidden_states(m);
    CHECK(h != NULL);
    ob_gguf *g = NULL;
    CHECK_EQ_INT(ob_gguf_open(path, &g), 0);
    const ob_gguf_tensor *w = g ? ob_gguf_find_tensor(g, "output.weight") : NULL;
    if (g && !w) w = ob_gguf_find_tensor(g, "token_embd.weight");
    CHECK(w && w->type == OB_TYPE_F32 && w->ne[0] == E && w->ne[1] == V);
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    ob_context *ctx = NULL;
    CHECK_EQ_INT(ob_context_create(m, &cp, &ctx), 0);
    int32_t pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0};
    int8_t all[5] = {1, 1, 1, 1, 1};
    ob_batch b = {5, EMB_PROMPT, pos, seq, all};
    CHECK_EQ_INT(ob_decode(ctx, &b), 0);
    double max_err = 0, max_abs = 0;
    for (int i = 0; h && w && ctx && i < 5; i++) {
        const float *lg = ob_get_logits(ctx, i);
        CHECK(lg != NULL);
        if (!lg) break;
        for (int v = 0; v < V; v++) {
            const float *row = (const float *)w->data + (size_t)v * E;
            double acc = 0;
            for (int d = 0; d < E; d++) acc += (double)row[d] * h[(size_t)i * E + d];
            double err = fabs(acc - lg[v]);
            if (err > max_err) max_err = err;
            if (fabs(lg[v]) > max_abs) max_abs = fabs(lg[v]);
        }
    }
    /* float32 matmul against a double dot product of 64 terms */
    CHECK_MSG(max_err < 1e-4 * (1 + max_abs), "max |W h - logits| = %g (logits up to %g)", max_err, max_abs);
    /* the switch goes back off: logits again */
    CHECK_EQ_INT(ob_context_set_embeddings(ctx, true), 0);
    CHECK_EQ_INT(ob_context_set_embeddings(ctx, false), 0);
    int32_t p5 = 5, s0 = 0;
    ob_batch b1 = {1, EMB_PROMPT, &p5, &s0, NULL};
    CHECK_EQ_INT(ob_decode(ctx, &b1), 0);
    CHECK(ob_get_logits(ctx, 0) != NULL && ob_get_embeddings(ctx, 0) == NULL);
    ob_context_free(ctx);
    ob_gguf_free(g);
    free(h);
    ob_model_free(m);
}

static ob_server *start_embd_server(int pooling, int *port) {
    const char *dir = test_models_dir();
    if (!dir) return NULL;
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = test_path(dir, "stories260K/stories260K.gguf");
    p.port = 0;
    p.device = "cpu";
    p.engine.n_parallel = 1;
    p.engine.n_threads = 1;
    p.quiet = true;
    p.embeddings = true;
    p.pooling = pooling;
    ob_server *s = NULL;
    if (ob_server_start(&p, &s) < 0) return NULL;
    if (ob_server_wait_ready(s, 30000) != 0) {
        ob_server_stop(s);
        return NULL;
    }
    *port = ob_server_port(s);
    return s;
}

static json_t *post_to(int port, const char *path, const char *body, int *status) {
    resp r;
    *status = 0;
    if (!http_req(port, "POST", path, NULL, body, &r)) return NULL;
    *status = r.status;
    json_t *j = parse(&r);
    resp_free(&r);
    return j;
}

/* data[i].embedding as floats into out[E]; false if the shape is wrong. */
static bool embedding_at(json_t *j, int i, float *out, int E) {
    json_t *v = json_object_get(json_array_get(json_object_get(j, "data"), (size_t)i), "embedding");
    if (!json_is_array(v) || (int)json_array_size(v) != E) return false;
    for (int d = 0; d < E; d++) out[d] = (float)json_number_value(json_array_get(v, (size_t)d));
    return true;
}

static double l2_diff(const float *a, const float *b, int E) {
    double s = 0;
    for (int d = 0; d < E; d++) s += ((double)a[d] - b[d]) * ((double)a[d] - b[d]);
    return sqrt(s);
}

/* Reference pooling from the engine's per-token hidden states. */
static void pool_ref(const float *h, int E, int pooling, float *out) {
    double acc[1024] = {0}, norm = 0;
    for (int i = 0; i < 5; i++) {
        if (pooling == 3 && i != 4) continue;
        if (pooling == 2 && i != 0) continue;
        for (int d = 0; d < E; d++) acc[d] += h[(size_t)i * E + d] / (pooling == 1 ? 5.0 : 1.0);
    }
    for (int d = 0; d < E; d++) norm += acc[d] * acc[d];
    for (int d = 0; d < E; d++) out[d] = (float)(acc[d] / sqrt(norm));
}

TEST(embeddings_endpoint) {
    NEED_TEXT();
    ob_model *m = NULL;
    CHECK_EQ_INT(ob_model_load(g_model_path, NULL, &m), 0);
    if (!m) return;
    const int E = ob_model_n_embd(m);
    float *h = hidden_states(m);
    ob_model_free(m);
    CHECK(h != NULL && E <= 1024);
    if (!h || E > 1024) return;
    float got[1024], ref[1024], other[1024];
    const int poolings[] = {3 /* last: the default for a file without pooling_type */, 1 /* mean */, 2 /* cls */};
    for (int k = 0; k < 3; k++) {
        int port = 0, st = 0;
        ob_server *srv = start_embd_server(k == 0 ? -1 : poolings[k], &port);
        CHECK(srv != NULL);
        if (!srv) break;
        /* token ids: the same vector the engine's hidden states pool to */
        json_t *j = post_to(port, "/v1/embeddings", "{\"input\":[1,403,407,261,378],\"model\":\"stories260K\"}", &st);
        CHECK_EQ_INT(st, 200);
        CHECK(embedding_at(j, 0, got, E));
        pool_ref(h, E, poolings[k], ref);
        CHECK_MSG(l2_diff(got, ref, E) < 1e-5, "pooling %d: |got - ref| = %g", poolings[k], l2_diff(got, ref, E));
        CHECK(jstr(j, "object") && !strcmp(jstr(j, "object"), "list"));
        CHECK(jstr(j, "data.0.object") && !strcmp(jstr(j, "data.0.object"), "embedding"));
        CHECK_EQ_INT(jint(j, "usage.prompt_tokens"), 5);
        CHECK_EQ_INT(jint(j, "usage.total_tokens"), 5);
        json_decref(j);
        if (k > 0) {
            ob_server_stop(srv);
            continue;
        }
        /* the text that tokenizes to those ids gives the same vector (BOS added as for completions) */
        j = post_to(port, "/v1/embeddings", "{\"input\":\"Once upon a time\"}", &st);
        CHECK_EQ_INT(st, 200);
        CHECK(embedding_at(j, 0, other, E) && l2_diff(got, other, E) < 1e-6);
        json_decref(j);
        /* unit norm; different inputs differ; a batch of 3 equals 3 singles */
        double n2 = 0;
        for (int d = 0; d < E; d++) n2 += (double)got[d] * got[d];
        CHECK(fabs(n2 - 1) < 1e-5);
        static const char *const texts[3] = {"Lily went to the park.", "The cat sat.", "Once upon a time"};
        float singles[3][1024];
        for (int t = 0; t < 3; t++) {
            char body[256];
            snprintf(body, sizeof body, "{\"input\":\"%s\"}", texts[t]);
            j = post_to(port, "/v1/embeddings", body, &st);
            CHECK_EQ_INT(st, 200);
            CHECK(embedding_at(j, 0, singles[t], E));
            json_decref(j);
        }
        CHECK(l2_diff(singles[0], singles[1], E) > 1e-3);
        j = post_to(port, "/v1/embeddings",
                    "{\"input\":[\"Lily went to the park.\",\"The cat sat.\",\"Once upon a time\"]}", &st);
        CHECK_EQ_INT(st, 200);
        CHECK_EQ_INT(json_array_size(json_object_get(j, "data")), 3);
        for (int t = 0; t < 3; t++) {
            CHECK(embedding_at(j, t, other, E) && l2_diff(other, singles[t], E) == 0);
            CHECK_EQ_INT(jint(json_array_get(json_object_get(j, "data"), (size_t)t), "index"), t);
        }
        json_decref(j);
        /* base64: the same floats, little-endian */
        j = post_to(port, "/v1/embeddings", "{\"input\":\"Once upon a time\",\"encoding_format\":\"base64\"}", &st);
        CHECK_EQ_INT(st, 200);
        const char *b64 = jstr(j, "data.0.embedding");
        CHECK(b64 && strlen(b64) == (size_t)(E * 4 + 2) / 3 * 4);
        if (b64 && strlen(b64) >= 8) {
            static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            unsigned char bytes[6];
            for (int q = 0; q < 2; q++) { /* two groups of 4 characters -> 6 bytes */
                unsigned x = 0;
                for (int c = 0; c < 4; c++) x = x << 6 | (unsigned)(strchr(tbl, b64[q * 4 + c]) - tbl);
                bytes[q * 3] = (unsigned char)(x >> 16);
                bytes[q * 3 + 1] = (unsigned char)(x >> 8);
                bytes[q * 3 + 2] = (unsigned char)x;
            }
            float f0;
            memcpy(&f0, bytes, 4);
            CHECK(f0 == got[0]);
        }
        json_decref(j);
        /* llama-server's /embedding */
        j = post_to(port, "/embedding", "{\"content\":\"Once upon a time\"}", &st);
        CHECK_EQ_INT(st, 200);
        json_t *v = json_array_get(json_object_get(json_array_get(j, 0), "embedding"), 0);
        CHECK(json_is_array(v) && (int)json_array_size(v) == E);
        json_decref(j);
        /* errors name the field, and the server keeps serving */
        j = post_to(port, "/v1/embeddings", "{\"model\":\"stories260K\"}", &st);
        check_error(j, st, 400, "missing_field", "input");
        json_decref(j);
        j = post_to(port, "/v1/embeddings", "{\"input\":[\"ok\", 5]}", &st);
        check_error(j, st, 400, "invalid_type", "input[1]");
        json_decref(j);
        j = post_to(port, "/v1/embeddings", "{\"input\":[1, 99999]}", &st);
        check_error(j, st, 400, "invalid_value", "input");
        json_decref(j);
        j = post_to(port, "/v1/embeddings", "{\"input\":\"\"}", &st);
        check_error(j, st, 400, "invalid_value", "input");
        json_decref(j);
        j = post_to(port, "/v1/embeddings", "{\"input\":\"a\",\"encoding_format\":\"int8\"}", &st);
        check_error(j, st, 400, "invalid_value", "encoding_format");
        json_decref(j);
        j = post_to(port, "/v1/embeddings", "{\"input\":\"a\",\"dimensions\":3}", &st);
        check_error(j, st, 400, "unsupported_parameter", "dimensions");
        json_decref(j);
        j = post_to(port, "/v1/embeddings", "{\"input\":\"a\",\"model\":\"nope\"}", &st);
        check_error(j, st, 404, "model_not_found", "model");
        json_decref(j);
        char big[12000];
        int o = snprintf(big, sizeof big, "{\"input\":[");
        for (int t = 0; t < 2100; t++) o += snprintf(big + o, sizeof big - (size_t)o, "%s1", t ? "," : "");
        snprintf(big + o, sizeof big - (size_t)o, "]}");
        j = post_to(port, "/v1/embeddings", big, &st);
        check_error(j, st, 400, "context_length_exceeded", "input");
        json_decref(j);
        j = post_to(port, "/v1/embeddings", "{\"input\":\"Once upon a time\"}", &st);
        CHECK_EQ_INT(st, 200);
        CHECK(embedding_at(j, 0, other, E) && l2_diff(got, other, E) == 0); /* same input, same vector */
        json_decref(j);
        /* completions still work on an embeddings server */
        j = post_to(port, "/v1/completions", "{\"prompt\":[1,403,407,261,378],\"max_tokens\":3,\"temperature\":0}", &st);
        CHECK_EQ_INT(st, 200);
        json_decref(j);
        ob_server_stop(srv);
    }
    free(h);
}

TEST(tokenize_detokenize) {
    NEED_TEXT();
    int st;
    json_t *j = post("/tokenize", "{\"content\":\"Once upon a time\"}", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(j, "tokens")), 4);
    CHECK_EQ_INT(jint(j, "tokens.0"), 403); /* llama2.c's ids, no BOS unless asked */
    CHECK_EQ_INT(jint(j, "tokens.3"), 378);
    json_decref(j);
    j = post("/tokenize", "{\"content\":\"Once upon a time\",\"add_special\":true,\"with_pieces\":true}", &st);
    CHECK_EQ_INT(jint(j, "tokens.0.id"), 1);
    CHECK_EQ_INT(jint(j, "tokens.1.id"), 403);
    CHECK(jstr(j, "tokens.2.piece") && strstr(jstr(j, "tokens.2.piece"), "upon"));
    json_decref(j);
    j = post("/detokenize", "{\"tokens\":[403,407,261,378]}", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_STR(jstr(j, "content"), "Once upon a time");
    json_decref(j);
    j = post("/detokenize", "{\"tokens\":[1,99999]}", &st);
    check_error(j, st, 400, "invalid_value", "tokens");
    json_decref(j);
    j = post("/tokenize", "{\"content\":5}", &st);
    check_error(j, st, 400, "invalid_type", "content");
    json_decref(j);
    check_still_serving();
}

TEST(apply_template) {
    NEED_CHAT();
    int st;
    json_t *j = post("/apply-template", "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story\"}]}", &st);
    CHECK_EQ_INT(st, 200);
    const char *prompt = jstr(j, "prompt");
    /* stories260K has no template of its own: ChatML */
    CHECK_MSG(prompt && strstr(prompt, "<|im_start|>user\nTell me a story<|im_end|>"), "prompt: %s", prompt ? prompt : "(null)");
    size_t pl = prompt ? strlen(prompt) : 0;
    CHECK(pl > 22 && !strcmp(prompt + pl - 22, "<|im_start|>assistant\n"));
    json_decref(j);
}

/* ---------------- completions ---------------- */

TEST(completion_matches_reference) {
    NEED_TEXT();
    int st;
    char body[256];
    snprintf(body, sizeof body, "{\"prompt\":\"Once upon a time\",\"max_tokens\":%d,\"temperature\":0}", g_expected_n);
    json_t *j = post("/v1/completions", body, &st);
    CHECK_EQ_INT(st, 200);
    CHECK(jstr(j, "id") && !strncmp(jstr(j, "id"), "cmpl-", 5));
    CHECK_EQ_STR(jstr(j, "object"), "text_completion");
    CHECK_EQ_STR(jstr(j, "model"), "stories260K.gguf");
    CHECK(json_is_integer(json_object_get(j, "created")));
    char full[4096];
    snprintf(full, sizeof full, "Once upon a time%s", jstr(j, "choices.0.text") ? jstr(j, "choices.0.text") : "?");
    CHECK_EQ_STR(full, g_expected_64);
    CHECK_EQ_STR(jstr(j, "choices.0.finish_reason"), "length");
    CHECK_EQ_INT(jint(j, "choices.0.index"), 0);
    CHECK(json_is_null(jget(j, "choices.0.logprobs")));
    CHECK_EQ_INT(jint(j, "usage.prompt_tokens"), 5); /* BOS + 4 */
    CHECK_EQ_INT(jint(j, "usage.completion_tokens"), g_expected_n);
    CHECK_EQ_INT(jint(j, "usage.total_tokens"), g_expected_n + 5);
    CHECK_EQ_INT(jint(j, "usage.prompt_tokens_details.cached_tokens"), 0);
    static const char *const keys[] = {"prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
                                       "predicted_ms", "predicted_per_token_ms", "predicted_per_second", "cache_n"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char path[64];
        snprintf(path, sizeof path, "timings.%s", keys[k]);
        CHECK_MSG(json_is_number(jget(j, path)), "no %s", path);
    }
    CHECK_EQ_INT(jint(j, "timings.predicted_n"), g_expected_n);
    CHECK_EQ_INT(jint(j, "timings.prompt_n"), 5);
    json_decref(j);

    /* the same with token ids, with echo, and on the llama-server /completion endpoint */
    snprintf(body, sizeof body, "{\"prompt\":[1,403,407,261,378],\"max_tokens\":%d,\"temperature\":0,\"echo\":true}",
             g_expected_n);
    j = post("/v1/completions", body, &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_STR(jstr(j, "choices.0.text"), g_expected_64); /* echo: the prompt comes first */
    json_decref(j);
    snprintf(body, sizeof body, "{\"prompt\":\"Once upon a time\",\"n_predict\":%d,\"temperature\":0}", g_expected_n);
    j = post("/completion", body, &st);
    CHECK_EQ_INT(st, 200);
    snprintf(full, sizeof full, "Once upon a time%s", jstr(j, "content") ? jstr(j, "content") : "?");
    CHECK_EQ_STR(full, g_expected_64);
    CHECK(json_is_true(json_object_get(j, "stop")));
    CHECK_EQ_STR(jstr(j, "stop_type"), "limit");
    CHECK_EQ_INT(jint(j, "tokens_predicted"), g_expected_n);
    CHECK_EQ_INT(jint(j, "tokens_evaluated"), 5);
    CHECK_EQ_INT(jint(j, "timings.predicted_n"), g_expected_n);
    json_decref(j);
}

TEST(chat_completion) {
    NEED_CHAT();
    int st;
    const char *body = "{\"model\":\"stories260K\",\"messages\":[{\"role\":\"system\",\"content\":\"You tell stories.\"},"
                       "{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":12,\"temperature\":0}";
    json_t *j = post("/v1/chat/completions", body, &st);
    CHECK_EQ_INT(st, 200);
    CHECK(jstr(j, "id") && !strncmp(jstr(j, "id"), "chatcmpl-", 9));
    CHECK_EQ_STR(jstr(j, "object"), "chat.completion");
    CHECK_EQ_STR(jstr(j, "choices.0.message.role"), "assistant");
    const char *content = jstr(j, "choices.0.message.content");
    CHECK(content && strlen(content) > 0);
    CHECK_EQ_STR(jstr(j, "choices.0.finish_reason"), "length");
    CHECK(jint(j, "usage.prompt_tokens") > 10);
    CHECK_EQ_INT(jint(j, "usage.completion_tokens"), 12);
    CHECK(json_is_object(json_object_get(j, "timings")));
    /* greedy: the same question gives the same answer */
    json_t *j2 = post("/v1/chat/completions", body, &st);
    CHECK_EQ_STR(jstr(j2, "choices.0.message.content"), content);
    json_decref(j2);
    json_decref(j);
}

TEST(streaming_completion) {
    NEED_TEXT();
    resp r;
    char body[256];
    snprintf(body, sizeof body, "{\"prompt\":\"Once upon a time\",\"max_tokens\":%d,\"temperature\":0,\"stream\":true}",
             g_expected_n);
    CHECK(http_req(g_port, "POST", "/v1/completions", NULL, body, &r));
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.head && strcasestr(r.head, "Content-Type: text/event-stream"));
    json_t *ev = sse_events(r.body ? r.body : "");
    size_t n = json_array_size(ev);
    CHECK(n >= 3);
    CHECK_EQ_STR(json_string_value(json_array_get(ev, n - 1)), "[DONE]");
    char text[4096] = "Once upon a time";
    int text_chunks = 0, finals = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *c = json_array_get(ev, i);
        CHECK_EQ_STR(jstr(c, "object"), "text_completion");
        const char *t = jstr(c, "choices.0.text");
        if (t && *t) {
            strncat(text, t, sizeof text - strlen(text) - 1);
            text_chunks++;
        }
        if (jstr(c, "choices.0.finish_reason")) {
            finals++;
            CHECK_EQ_STR(jstr(c, "choices.0.finish_reason"), "length");
            CHECK_EQ_INT(jint(c, "timings.predicted_n"), g_expected_n); /* timings in the last chunk */
            CHECK_EQ_INT(i, n - 2);
        }
    }
    CHECK_EQ_STR(text, g_expected_64);
    CHECK_EQ_INT(finals, 1);
    CHECK_EQ_INT(text_chunks, g_expected_n); /* one chunk per token */
    json_decref(ev);
    resp_free(&r);
}

/* Random sampling over the whole vocabulary picks byte-fallback tokens
 * (<0xE2> ...) that split characters: every chunk must still be valid UTF-8
 * (jansson refuses anything else), and the chunks must add up to the
 * non-streamed answer for the same seed. */
TEST(streaming_never_splits_a_character) {
    NEED_TEXT();
    int split_seen = 0;
    for (int seed = 1; seed <= 6; seed++) {
        char body[512];
        const char *base = "{\"prompt\":\"Le caf\\u00e9 \\u2603 \\ud83d\\ude00\",\"max_tokens\":48,\"temperature\":3,\"top_k\":0,"
                           "\"top_p\":1,\"min_p\":0,\"seed\":%d,\"logprobs\":1%s}";
        snprintf(body, sizeof body, base, seed, "");
        int st;
        json_t *whole = post("/v1/completions", body, &st);
        CHECK_EQ_INT(st, 200);
        snprintf(body, sizeof body, base, seed, ",\"stream\":true");
        resp r;
        CHECK(http_req(g_port, "POST", "/v1/completions", NULL, body, &r));
        json_t *ev = sse_events(r.body ? r.body : "");
        char text[8192] = "";
        for (size_t i = 0; i < json_array_size(ev); i++) {
            json_t *c = json_array_get(ev, i);
            CHECK_MSG(!json_is_string(c) || !strcmp(json_string_value(c), "[DONE]"), "seed %d: chunk %zu is not JSON", seed, i);
            const char *t = jstr(c, "choices.0.text");
            if (t) strncat(text, t, sizeof text - strlen(text) - 1);
            /* a token that is part of a character: its text is U+FFFD, its bytes exact */
            json_t *toks = jget(c, "choices.0.logprobs.tokens");
            for (size_t k = 0; k < json_array_size(toks); k++)
                split_seen += strstr(json_string_value(json_array_get(toks, k)), "\xEF\xBF\xBD") != NULL;
        }
        CHECK_MSG(!strcmp(text, jstr(whole, "choices.0.text") ? jstr(whole, "choices.0.text") : ""), "seed %d differs", seed);
        json_decref(ev);
        json_decref(whole);
        resp_free(&r);
    }
    CHECK_MSG(split_seen > 0, "no byte token was sampled: the test did not test anything");
}

TEST(streaming_chat_with_usage) {
    NEED_CHAT();
    const char *base = "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":16,\"temperature\":0";
    char body[512];
    snprintf(body, sizeof body, "%s}", base);
    int st;
    json_t *whole = post("/v1/chat/completions", body, &st);
    snprintf(body, sizeof body, "%s,\"stream\":true,\"stream_options\":{\"include_usage\":true}}", base);
    resp r;
    CHECK(http_req(g_port, "POST", "/v1/chat/completions", NULL, body, &r));
    json_t *ev = sse_events(r.body ? r.body : "");
    size_t n = json_array_size(ev);
    CHECK(n >= 4);
    /* first: the role; then content; then finish_reason; then usage; then [DONE] */
    CHECK_EQ_STR(jstr(json_array_get(ev, 0), "choices.0.delta.role"), "assistant");
    CHECK_EQ_STR(json_string_value(json_array_get(ev, n - 1)), "[DONE]");
    json_t *usage = json_array_get(ev, n - 2);
    CHECK_EQ_INT(json_array_size(json_object_get(usage, "choices")), 0);
    CHECK_EQ_INT(jint(usage, "usage.completion_tokens"), 16);
    CHECK_EQ_INT(jint(usage, "usage.prompt_tokens"), jint(whole, "usage.prompt_tokens"));
    CHECK(json_is_object(json_object_get(usage, "timings")));
    json_t *fin = json_array_get(ev, n - 3);
    CHECK_EQ_STR(jstr(fin, "choices.0.finish_reason"), "length");
    CHECK_EQ_INT(json_object_size(jget(fin, "choices.0.delta")), 0);
    CHECK(json_is_object(json_object_get(fin, "timings")));
    char text[4096] = "";
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *c = json_array_get(ev, i);
        CHECK_EQ_STR(jstr(c, "object"), "chat.completion.chunk");
        CHECK_EQ_STR(jstr(c, "id"), jstr(json_array_get(ev, 0), "id")); /* one id for the whole stream */
        const char *t = jstr(c, "choices.0.delta.content");
        if (t) strncat(text, t, sizeof text - strlen(text) - 1);
    }
    CHECK_EQ_STR(text, jstr(whole, "choices.0.message.content"));
    json_decref(ev);
    json_decref(whole);
    resp_free(&r);
}

TEST(reasoning_content_split) {
    NEED_CHAT();
    /* a template that leaves the model inside <think> (as DeepSeek-R1's do):
     * stories260K never closes it, so its whole answer is reasoning */
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = g_model_path;
    p.port = 0;
    p.device = "cpu";
    p.engine.n_threads = 2;
    p.quiet = true;
    p.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}<think>\n";
    ob_server *s = NULL;
    CHECK_OK(ob_server_start(&p, &s));
    if (!s) return;
    CHECK_OK(ob_server_wait_ready(s, 30000));
    int port = ob_server_port(s);
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":8,\"temperature\":0}";
    resp r;
    CHECK(http_req(port, "POST", "/v1/chat/completions", NULL, body, &r));
    json_t *j = parse(&r);
    const char *reasoning = jstr(j, "choices.0.message.reasoning_content");
    CHECK(reasoning && strlen(reasoning) > 0);
    CHECK_EQ_STR(jstr(j, "choices.0.message.content"), "");
    char want[1024];
    snprintf(want, sizeof want, "%s", reasoning ? reasoning : "");
    json_decref(j);
    resp_free(&r);
    /* streamed: the same text, as delta.reasoning_content */
    const char *sbody = "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":8,\"temperature\":0,"
                        "\"stream\":true}";
    CHECK(http_req(port, "POST", "/v1/chat/completions", NULL, sbody, &r));
    json_t *ev = sse_events(r.body ? r.body : "");
    char got[1024] = "";
    for (size_t i = 0; i < json_array_size(ev); i++) {
        const char *t = jstr(json_array_get(ev, i), "choices.0.delta.reasoning_content");
        if (t) strncat(got, t, sizeof got - strlen(got) - 1);
        const char *c = jstr(json_array_get(ev, i), "choices.0.delta.content");
        CHECK(!c || !*c);
    }
    CHECK_EQ_STR(got, want);
    json_decref(ev);
    resp_free(&r);
    /* reasoning_format none: it stays in content */
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":8,\"temperature\":0,"
           "\"reasoning_format\":\"none\"}";
    CHECK(http_req(port, "POST", "/v1/chat/completions", NULL, body, &r));
    j = parse(&r);
    CHECK(jstr(j, "choices.0.message.content") && strlen(jstr(j, "choices.0.message.content")) > 0);
    CHECK(jget(j, "choices.0.message.reasoning_content") == NULL);
    json_decref(j);
    resp_free(&r);
    ob_server_stop(s);
}

TEST(stop_strings_are_never_emitted) {
    NEED_TEXT();
    /* " girl" spans the tokens " g", "ir", "l"; "tle g" spans " little" and " g" */
    static const char *const stops[] = {" girl", "tle g", "Lily."};
    const char *gen = g_expected_64 + strlen("Once upon a time");
    for (size_t k = 0; k < 3; k++) {
        const char *at = strstr(gen, stops[k]);
        CHECK(at != NULL);
        int want_len = (int)(at - gen);
        char body[512];
        snprintf(body, sizeof body, "{\"prompt\":\"Once upon a time\",\"max_tokens\":64,\"temperature\":0,\"stop\":[\"zzz\",\"%s\"]}",
                 stops[k]);
        int st;
        json_t *j = post("/v1/completions", body, &st);
        CHECK_EQ_INT(st, 200);
        const char *t = jstr(j, "choices.0.text");
        CHECK_MSG(t && (int)strlen(t) == want_len && !strncmp(t, gen, (size_t)want_len), "stop '%s': got '%s'", stops[k],
                  t ? t : "(null)");
        CHECK_EQ_STR(jstr(j, "choices.0.finish_reason"), "stop");
        CHECK(jint(j, "usage.completion_tokens") < 64);
        json_decref(j);
        /* streaming: the same text, and no chunk ever shows part of the stop string */
        snprintf(body, sizeof body,
                 "{\"prompt\":\"Once upon a time\",\"max_tokens\":64,\"temperature\":0,\"stream\":true,\"stop\":\"%s\"}",
                 stops[k]);
        resp r;
        CHECK(http_req(g_port, "POST", "/v1/completions", NULL, body, &r));
        json_t *ev = sse_events(r.body ? r.body : "");
        char text[4096] = "";
        for (size_t i = 0; i + 1 < json_array_size(ev); i++) {
            const char *c = jstr(json_array_get(ev, i), "choices.0.text");
            if (c) strncat(text, c, sizeof text - strlen(text) - 1);
        }
        CHECK_MSG((int)strlen(text) == want_len && !strncmp(text, gen, (size_t)want_len), "streamed stop '%s': '%s'", stops[k],
                  text);
        CHECK_EQ_STR(jstr(json_array_get(ev, json_array_size(ev) - 2), "choices.0.finish_reason"), "stop");
        json_decref(ev);
        resp_free(&r);
    }
    /* llama-server's /completion says which word stopped it */
    int st;
    json_t *j = post("/completion", "{\"prompt\":\"Once upon a time\",\"n_predict\":64,\"temperature\":0,\"stop\":[\" girl\"]}", &st);
    CHECK_EQ_STR(jstr(j, "stop_type"), "word");
    CHECK_EQ_STR(jstr(j, "stopping_word"), " girl");
    json_decref(j);
}

TEST(logprobs_in_both_formats) {
    NEED_TEXT();
    int st;
    json_t *j = post("/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"temperature\":0,\"logprobs\":3}", &st);
    CHECK_EQ_INT(st, 200);
    json_t *lp = jget(j, "choices.0.logprobs");
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "tokens")), 8);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "token_logprobs")), 8);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "top_logprobs")), 8);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "text_offset")), 8);
    char joined[1024] = "";
    long long prev_off = -1;
    for (size_t i = 0; i < 8; i++) {
        strncat(joined, json_string_value(json_array_get(json_object_get(lp, "tokens"), i)), sizeof joined - strlen(joined) - 1);
        double l = json_real_value(json_array_get(json_object_get(lp, "token_logprobs"), i));
        CHECK(l <= 0 && l > -20);
        CHECK_EQ_INT(json_object_size(json_array_get(json_object_get(lp, "top_logprobs"), i)), 3);
        long long off = (long long)json_integer_value(json_array_get(json_object_get(lp, "text_offset"), i));
        CHECK(off > prev_off);
        prev_off = off;
    }
    CHECK_EQ_STR(joined, jstr(j, "choices.0.text"));
    json_decref(j);
    if (!g_chat) return;
    j = post("/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5,\"temperature\":0,\"logprobs\":true,"
             "\"top_logprobs\":2}",
             &st);
    CHECK_EQ_INT(st, 200);
    json_t *content = jget(j, "choices.0.logprobs.content");
    CHECK_EQ_INT(json_array_size(content), 5);
    for (size_t i = 0; i < json_array_size(content); i++) {
        json_t *e = json_array_get(content, i);
        CHECK(json_is_string(json_object_get(e, "token")));
        CHECK(json_is_array(json_object_get(e, "bytes")));
        CHECK(json_real_value(json_object_get(e, "logprob")) <= 0);
        CHECK_EQ_INT(json_array_size(json_object_get(e, "top_logprobs")), 2);
        /* greedy: the chosen token is the most likely one */
        CHECK_EQ_STR(jstr(e, "top_logprobs.0.token"), jstr(e, "token"));
    }
    json_decref(j);
}

TEST(n_choices_and_seeds) {
    NEED_TEXT();
    const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":1.5,\"top_k\":0,\"top_p\":1,"
                       "\"min_p\":0,\"n\":3,\"seed\":1234}";
    int st;
    json_t *a = post("/v1/completions", body, &st);
    CHECK_EQ_INT(st, 200);
    json_t *b = post("/v1/completions", body, &st);
    CHECK_EQ_INT(json_array_size(json_object_get(a, "choices")), 3);
    long long total = 0;
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof path, "choices.%d.index", i);
        CHECK_EQ_INT(jint(a, path), i);
        snprintf(path, sizeof path, "choices.%d.text", i);
        CHECK_EQ_STR(jstr(a, path), jstr(b, path)); /* a seed makes the whole set reproducible */
    }
    total = 3 * 24;
    /* choices differ from each other (seed, seed+1, seed+2) */
    CHECK(strcmp(jstr(a, "choices.0.text"), jstr(a, "choices.1.text")) != 0 ||
          strcmp(jstr(a, "choices.1.text"), jstr(a, "choices.2.text")) != 0);
    CHECK(jint(a, "usage.completion_tokens") <= total && jint(a, "usage.completion_tokens") >= 3);
    CHECK_EQ_INT(jint(a, "usage.prompt_tokens"), 5); /* the prompt counts once */
    /* streamed, the choices interleave by index and add up to the same texts */
    char sbody[512];
    snprintf(sbody, sizeof sbody, "%.*s,\"stream\":true}", (int)strlen(body) - 1, body);
    resp r;
    CHECK(http_req(g_port, "POST", "/v1/completions", NULL, sbody, &r));
    json_t *ev = sse_events(r.body ? r.body : "");
    char texts[3][2048] = {"", "", ""};
    int finals[3] = {0, 0, 0};
    for (size_t i = 0; i + 1 < json_array_size(ev); i++) {
        json_t *c = json_array_get(ev, i);
        long long idx = jint(c, "choices.0.index");
        CHECK(idx >= 0 && idx < 3);
        if (idx < 0 || idx >= 3) continue;
        const char *t = jstr(c, "choices.0.text");
        if (t) strncat(texts[idx], t, sizeof texts[idx] - strlen(texts[idx]) - 1);
        if (jstr(c, "choices.0.finish_reason")) finals[idx]++;
    }
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof path, "choices.%d.text", i);
        CHECK_EQ_STR(texts[i], jstr(b, path));
        CHECK_EQ_INT(finals[i], 1);
    }
    json_decref(ev);
    resp_free(&r);
    json_decref(a);
    json_decref(b);
    /* two prompts x n=2: four choices, in prompt order */
    json_t *c = post("/v1/completions", "{\"prompt\":[\"Once upon a time\",\"Lily\"],\"max_tokens\":4,\"n\":2,\"temperature\":0}", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(c, "choices")), 4);
    CHECK_EQ_STR(jstr(c, "choices.0.text"), jstr(c, "choices.1.text"));
    CHECK_EQ_STR(jstr(c, "choices.2.text"), jstr(c, "choices.3.text"));
    CHECK(strcmp(jstr(c, "choices.0.text"), jstr(c, "choices.2.text")) != 0);
    json_decref(c);
}

/* ---------------- errors ---------------- */

TEST(errors_and_recovery) {
    NEED_SERVER();
    int st;
    json_t *j;
    j = post("/v1/chat/completions", "{\"messages\": [", &st);
    check_error(j, st, 400, "invalid_json", NULL);
    json_decref(j);
    check_still_serving();
    j = post("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", &st);
    check_error(j, st, 400, "invalid_type", "temperature");
    CHECK(strstr(jstr(j, "error.message"), "temperature") != NULL);
    json_decref(j);
    check_still_serving();
    j = post("/v1/completions", "{\"prompt\":\"\xff\xfe\"}", &st);
    check_error(j, st, 400, "invalid_json", NULL);
    json_decref(j);
    check_still_serving();
    /* unknown model */
    j = post("/v1/completions", "{\"model\":\"gpt-9\",\"prompt\":[1,2,3]}", &st);
    check_error(j, st, 404, "model_not_found", "model");
    CHECK(strstr(jstr(j, "error.message"), "gpt-9") != NULL);
    json_decref(j);
    check_still_serving();
    /* names the server accepts for its model */
    j = post("/v1/completions", "{\"model\":\"stories260K\",\"prompt\":[1,403],\"max_tokens\":1}", &st);
    CHECK_EQ_INT(st, g_text ? 200 : 501);
    json_decref(j);
    /* a prompt longer than the context, by how much (2100 ids against 2048) */
    char *big = malloc(16 * 2100 + 64);
    size_t n = (size_t)sprintf(big, "{\"prompt\":[1");
    for (int i = 1; i < 2100; i++) n += (size_t)sprintf(big + n, ",%d", 300);
    sprintf(big + n, "],\"max_tokens\":4}");
    j = post("/v1/completions", big, &st);
    check_error(j, st, 400, "context_length_exceeded", "prompt");
    CHECK_MSG(jstr(j, "error.message") && strstr(jstr(j, "error.message"), "2100 tokens, 53 more than the context of 2048"),
              "%s", jstr(j, "error.message"));
    json_decref(j);
    free(big);
    check_still_serving();
    /* 10 MB body against the 8 MiB limit */
    size_t len = 10u << 20;
    char *huge = malloc(len + 1);
    memset(huge, 'a', len);
    memcpy(huge, "{\"prompt\":\"", 11);
    memcpy(huge + len - 2, "\"}", 2);
    huge[len] = '\0';
    j = post("/v1/completions", huge, &st);
    check_error(j, st, 413, "request_too_large", NULL);
    json_decref(j);
    free(huge);
    check_still_serving();
    /* a token id outside the vocabulary */
    j = post("/v1/completions", "{\"prompt\":[1,70000]}", &st);
    check_error(j, st, 400, "invalid_value", "prompt");
    json_decref(j);
    check_still_serving();
}

TEST(thousand_messages) {
    NEED_CHAT();
    /* renders to far more than the 2048-token context: refused, with the numbers */
    size_t cap = 1000 * 64 + 64, n = 0;
    char *body = malloc(cap);
    n += (size_t)sprintf(body, "{\"messages\":[");
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(body + n, "%s{\"role\":\"%s\",\"content\":\"message number %d\"}", i ? "," : "",
                             i % 2 ? "assistant" : "user", i);
    sprintf(body + n, "]}");
    int st;
    json_t *j = post("/v1/chat/completions", body, &st);
    check_error(j, st, 400, "context_length_exceeded", "messages");
    CHECK(jstr(j, "error.message") && strstr(jstr(j, "error.message"), "more than the context of 2048"));
    json_decref(j);
    free(body);
    check_still_serving();
}

TEST(api_keys) {
    NEED_SERVER();
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = g_model_path;
    p.port = 0;
    p.device = "cpu";
    p.engine.n_threads = 2;
    p.quiet = true;
    const char *keys[] = {"sekret-one", "sekret-two"};
    p.api_keys = keys;
    p.n_api_keys = 2;
    ob_server *s = NULL;
    CHECK_OK(ob_server_start(&p, &s));
    if (!s) return;
    CHECK_OK(ob_server_wait_ready(s, 30000));
    int port = ob_server_port(s);
    resp r;
    CHECK(http_req(port, "GET", "/health", NULL, NULL, &r)); /* open */
    CHECK_EQ_INT(r.status, 200);
    resp_free(&r);
    CHECK(http_req(port, "GET", "/v1/models", NULL, NULL, &r));
    CHECK_EQ_INT(r.status, 401);
    CHECK(r.head && strcasestr(r.head, "WWW-Authenticate: Bearer"));
    json_t *j = parse(&r);
    check_error(j, r.status, 401, "invalid_api_key", NULL);
    CHECK_EQ_STR(jstr(j, "error.type"), "authentication_error");
    json_decref(j);
    resp_free(&r);
    CHECK(http_req(port, "POST", "/v1/completions", "Authorization: Bearer sekret-on\r\n", "{\"prompt\":[1]}", &r));
    CHECK_EQ_INT(r.status, 401);
    resp_free(&r);
    CHECK(http_req(port, "POST", "/v1/completions", "Authorization: Bearer sekret-one1\r\n", "{\"prompt\":[1]}", &r));
    CHECK_EQ_INT(r.status, 401);
    resp_free(&r);
    CHECK(http_req(port, "GET", "/v1/models", "Authorization: Bearer sekret-two\r\n", NULL, &r));
    CHECK_EQ_INT(r.status, 200);
    resp_free(&r);
    CHECK(http_req(port, "GET", "/v1/models", "X-Api-Key: sekret-one\r\n", NULL, &r));
    CHECK_EQ_INT(r.status, 200);
    resp_free(&r);
    /* a refused request's body is never parsed: a bad one still gets 401 */
    CHECK(http_req(port, "POST", "/v1/chat/completions", NULL, "{not json", &r));
    CHECK_EQ_INT(r.status, 401);
    resp_free(&r);
    ob_server_stop(s);
}

static int cpu_device(ob_backend **out) { return ob_backend_cpu_create(1, out); }

/* `serve -ngl N` (ob_server_params.n_gpu_layers): a split model (a second CPU backend stands in
 * for the GPU, tests/test_split.c) answers greedy requests exactly as the
 * whole-CPU server does. */
TEST(partial_offload_serves_like_the_cpu) {
    NEED_TEXT();
    ob_split_device_factory = cpu_device;
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = g_model_path;
    p.port = 0;
    p.device = "cpu";
    p.n_gpu_layers = 2;
    p.engine.n_parallel = 2;
    p.engine.n_threads = 2;
    p.quiet = true;
    ob_server *s = NULL;
    CHECK_OK(ob_server_start(&p, &s));
    if (s) {
        CHECK_OK(ob_server_wait_ready(s, 30000));
        static const char *const bodies[] = {
            "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":0}",
            "{\"prompt\":\"The little dog\",\"max_tokens\":24,\"temperature\":0,\"seed\":7}"};
        for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
            resp a, b;
            CHECK(http_req(g_port, "POST", "/v1/completions", NULL, bodies[i], &a));
            CHECK(http_req(ob_server_port(s), "POST", "/v1/completions", NULL, bodies[i], &b));
            json_t *ja = parse(&a), *jb = parse(&b);
            CHECK_EQ_INT(b.status, 200);
            const char *ta = jstr(ja, "choices.0.text"), *tb = jstr(jb, "choices.0.text");
            CHECK_MSG(ta && tb && *ta && !strcmp(ta, tb), "split server: '%s' vs the CPU's '%s'", tb ? tb : "(none)",
                      ta ? ta : "(none)");
            json_decref(ja);
            json_decref(jb);
            resp_free(&a);
            resp_free(&b);
        }
        ob_server_stop(s);
    }
    ob_split_device_factory = NULL;
}

typedef struct gate {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool open;
} gate;

static void wait_at_gate(void *p) {
    gate *g = p;
    pthread_mutex_lock(&g->m);
    while (!g->open) pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

TEST(loading_then_failed_model) {
    NEED_SERVER();
    /* the loader waits at a gate, so the loading state is observable; the
     * file then fails to parse */
    char path[256];
    snprintf(path, sizeof path, "/tmp/ob_test_server_%d.gguf", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs("not a gguf file", f);
    fclose(f);
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = path;
    p.port = 0;
    p.device = "cpu";
    p.quiet = true;
    p.before_load = wait_at_gate;
    p.before_load_user = &g;
    ob_server *s = NULL;
    CHECK_OK(ob_server_start(&p, &s));
    if (!s) {
        unlink(path);
        return;
    }
    int port = ob_server_port(s);
    CHECK_EQ_INT(ob_server_wait_ready(s, 0), 1);
    resp r;
    CHECK(http_req(port, "GET", "/health", NULL, NULL, &r));
    CHECK_EQ_INT(r.status, 503);
    json_t *j = parse(&r);
    CHECK_EQ_STR(jstr(j, "status"), "loading");
    json_decref(j);
    resp_free(&r);
    CHECK(http_req(port, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r));
    j = parse(&r);
    check_error(j, r.status, 503, "model_loading", NULL);
    json_decref(j);
    resp_free(&r);
    CHECK(http_req(port, "GET", "/v1/models", NULL, NULL, &r)); /* the id is known before the model is */
    CHECK_EQ_INT(r.status, 200);
    resp_free(&r);
    pthread_mutex_lock(&g.m);
    g.open = true;
    pthread_cond_signal(&g.c);
    pthread_mutex_unlock(&g.m);
    CHECK(ob_server_wait_ready(s, 10000) < 0);
    CHECK(strstr(ob_last_error(), path) != NULL); /* the message names the file */
    CHECK(http_req(port, "GET", "/health", NULL, NULL, &r));
    CHECK_EQ_INT(r.status, 500);
    j = parse(&r);
    CHECK_EQ_STR(jstr(j, "status"), "error");
    json_decref(j);
    resp_free(&r);
    CHECK(http_req(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"x\"}", &r));
    j = parse(&r);
    check_error(j, r.status, 500, "model_load_failed", NULL);
    json_decref(j);
    resp_free(&r);
    ob_server_stop(s);
    unlink(path);
}

/* ---------------- disconnects and load ---------------- */

/* Engine counters read through /metrics. */
static double metric_value(const char *name) {
    resp r;
    double v = -1;
    if (http_req(g_port, "GET", "/metrics", NULL, NULL, &r)) {
        char key[128];
        snprintf(key, sizeof key, "\n%s ", name);
        const char *p = strstr(r.body, key);
        if (p) v = atof(p + strlen(key));
    }
    resp_free(&r);
    return v;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Read from a streaming response until `want` bytes of body arrived (or EOF). */
static size_t read_some(int fd, char *buf, size_t cap, size_t want) {
    size_t n = 0;
    while (n < want && n + 1 < cap) {
        ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    return n;
}

TEST(disconnect_cancels_generation) {
    NEED_TEXT();
    const char *cancelled_key = "onebit_requests_total{result=\"cancelled\"}";
    double disconnects0 = metric_value("onebit_client_disconnects_total");
    double cancelled0 = metric_value(cancelled_key);
    /* a stream that would run to the end of the context */
    const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":-1,\"ignore_eos\":true,\"stream\":true}";
    int fd = send_request(g_port, "POST", "/v1/completions", NULL, body, strlen(body));
    CHECK(fd >= 0);
    char buf[8192];
    size_t n = read_some(fd, buf, sizeof buf, 600); /* headers and a few chunks: it is generating */
    CHECK(n > 0 && strstr(buf, "data: "));
    close(fd);
    /* non-streaming too: the client leaves while its answer is being generated */
    body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":-1,\"ignore_eos\":true}";
    fd = send_request(g_port, "POST", "/v1/completions", NULL, body, strlen(body));
    struct timespec ts = {0, 2 * 1000 * 1000};
    double t0 = now_s();
    while (metric_value("onebit_requests_running") < 1 && now_s() - t0 < 10) nanosleep(&ts, NULL);
    close(fd);
    t0 = now_s();
    bool idle = false;
    while (now_s() - t0 < 10 && !idle) {
        idle = metric_value("onebit_requests_running") == 0 &&
               metric_value("onebit_client_disconnects_total") >= disconnects0 + 2;
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(idle, "still running %.0f, disconnects %.0f -> %.0f", metric_value("onebit_requests_running"), disconnects0,
              metric_value("onebit_client_disconnects_total"));
    /* the engine cancelled both (neither ran to the end of the context) and freed their pages */
    CHECK(metric_value(cancelled_key) >= cancelled0 + 2);
    CHECK_EQ_INT(metric_value("onebit_kv_blocks_used"), 0);
    check_still_serving();
}

/* /slots shows a running request as it goes, and the slot idle after it. */
TEST(slots_show_running_requests) {
    NEED_TEXT();
    const char *body = "{\"prompt\":[1,403,407,261,378],\"max_tokens\":-1,\"ignore_eos\":true,\"stream\":true}";
    int fd = send_request(g_port, "POST", "/v1/completions", NULL, body, strlen(body));
    CHECK(fd >= 0);
    char buf[8192];
    CHECK(read_some(fd, buf, sizeof buf, 600) > 0); /* it is generating */
    int st;
    json_t *j = get("/slots", &st);
    CHECK_EQ_INT(st, 200);
    json_t *busy = NULL;
    size_t i;
    json_t *sl;
    json_array_foreach(j, i, sl) {
        CHECK_EQ_INT(jint(sl, "id"), (long long)i);
        CHECK_EQ_INT(jint(sl, "n_ctx"), 2048);
        CHECK(json_is_object(json_object_get(sl, "next_token")));
        if (json_is_true(json_object_get(sl, "is_processing"))) busy = sl;
        else CHECK_EQ_INT(jint(sl, "id_task"), -1);
    }
    CHECK(busy != NULL);
    if (busy) {
        CHECK(jint(busy, "id_task") > 0);
        CHECK_EQ_INT(jint(busy, "n_prompt_tokens"), 5);
        CHECK(jint(busy, "next_token.n_decoded") > 0);
        CHECK(json_is_true(jget(busy, "next_token.has_next_token")));
        CHECK_EQ_INT(jint(busy, "next_token.n_remain"), -1);
        CHECK(jint(busy, "n_past") >= 5);
    }
    json_decref(j);
    /* every slot busy is not the case: fail_on_no_slot still answers 200 */
    j = get("/slots?fail_on_no_slot=1", &st);
    CHECK_EQ_INT(st, 200);
    json_decref(j);
    close(fd);
    /* once it is cancelled, every slot is idle again */
    struct timespec ts = {0, 5 * 1000 * 1000};
    double t0 = now_s();
    bool idle = false;
    while (!idle && now_s() - t0 < 10) {
        j = get("/slots", &st);
        idle = true;
        json_array_foreach(j, i, sl) idle &= !json_is_true(json_object_get(sl, "is_processing"));
        json_decref(j);
        if (!idle) nanosleep(&ts, NULL);
    }
    CHECK(idle);
}

/* Tools reach the template and a plain-text answer stays plain: no
 * tool_calls, finish_reason as usual, streamed text equal to the answer. */
TEST(tools_with_a_text_answer) {
    NEED_CHAT();
    const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
                        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]";
    char body[1024];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":24,\"temperature\":0,%s}",
             tools);
    int st;
    json_t *j = post("/v1/chat/completions", body, &st);
    CHECK_EQ_INT(st, 200);
    const char *content = jstr(j, "choices.0.message.content");
    CHECK(content != NULL);
    CHECK(jget(j, "choices.0.message.tool_calls") == NULL);
    const char *fr = jstr(j, "choices.0.finish_reason");
    CHECK(fr && (!strcmp(fr, "stop") || !strcmp(fr, "length")));
    char want[4096];
    snprintf(want, sizeof want, "%s", content ? content : "");
    json_decref(j);
    /* the same, streamed */
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":24,\"temperature\":0,"
             "\"stream\":true,%s}",
             tools);
    resp r;
    CHECK(http_req(g_port, "POST", "/v1/chat/completions", NULL, body, &r));
    json_t *evs = sse_events(r.body ? r.body : "");
    char got[4096] = "";
    size_t i;
    json_t *ev;
    json_array_foreach(evs, i, ev) {
        const char *d = jstr(ev, "choices.0.delta.content");
        if (d && strlen(got) + strlen(d) < sizeof got) strcat(got, d);
        CHECK(jget(ev, "choices.0.delta.tool_calls") == NULL);
    }
    CHECK_MSG(strcmp(got, want) == 0, "streamed '%s' vs '%s'", got, want);
    json_decref(evs);
    resp_free(&r);
    /* tool_choice "none" and assistant tool_calls with string arguments are accepted */
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,"
             "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
             "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\","
             "\"content\":\"sunny\"}],\"max_tokens\":4,\"tool_choice\":\"none\",%s}",
             tools);
    j = post("/v1/chat/completions", body, &st);
    CHECK_EQ_INT(st, 200);
    json_decref(j);
    j = post("/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"parallel_tool_calls\":\"yes\"}", &st);
    check_error(j, st, 400, "invalid_type", "parallel_tool_calls");
    json_decref(j);
}

typedef struct client_arg {
    int id;
    int disconnect_after; /* bytes of body to read before leaving; 0 = read to the end */
    bool ok;              /* survived and saw [DONE] and one finish_reason */
    bool left;
    int status, n_events, finals; /* what the client saw, for the failure message */
    char last[64], before[208];
} client_arg;

static void *stream_client(void *p) {
    client_arg *a = p;
    char body[256];
    snprintf(body, sizeof body,
             "{\"prompt\":\"Once upon a time\",\"max_tokens\":%d,\"temperature\":0.9,\"seed\":%d,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}",
             8 + a->id % 17, a->id);
    int fd = send_request(g_port, "POST", "/v1/completions", NULL, body, strlen(body));
    a->status = -1;
    if (fd < 0) return NULL;
    a->status = -2;
    if (a->disconnect_after > 0) {
        char buf[4096];
        read_some(fd, buf, sizeof buf, (size_t)a->disconnect_after);
        close(fd);
        a->left = true;
        return NULL;
    }
    resp r;
    if (read_response(fd, &r)) a->status = r.status;
    if (a->status == 200) {
        json_t *ev = sse_events(r.body);
        size_t n = json_array_size(ev);
        int finals = 0;
        for (size_t i = 0; i < n; i++)
            if (jstr(json_array_get(ev, i), "choices.0.finish_reason")) finals++;
        a->n_events = (int)n;
        a->finals = finals;
        snprintf(a->last, sizeof a->last, "%.60s", n ? (json_string_value(json_array_get(ev, n - 1)) ? json_string_value(json_array_get(ev, n - 1)) : "(object)") : "");
        /* the event before the usage chunk: the final chunk, or an error's message */
        if (n >= 3) {
            char *d = json_dumps(json_object_get(json_array_get(ev, n - 3), "choices"), JSON_COMPACT);
            if (d) snprintf(a->before, sizeof a->before, "%.200s", d);
            free(d);
        }
        a->ok = n >= 3 && !strcmp(json_string_value(json_array_get(ev, n - 1)) ? json_string_value(json_array_get(ev, n - 1)) : "",
                                  "[DONE]") &&
                finals == 1;
        json_decref(ev);
    }
    resp_free(&r);
    close(fd);
    return NULL;
}

TEST(hundred_concurrent_streams) {
    NEED_TEXT();
    enum { N = 100 };
    pthread_t th[N];
    client_arg args[N];
    uint64_t rng = 42;
    for (int i = 0; i < N; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].id = i;
        args[i].disconnect_after = test_rand_u64(&rng) % 3 == 0 ? 200 + (int)(test_rand_u64(&rng) % 600) : 0;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < N; i++) CHECK(pthread_create(&th[i], &attr, stream_client, &args[i]) == 0);
    pthread_attr_destroy(&attr);
    int ok = 0, left = 0, survivors = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (args[i].disconnect_after) left++;
        else {
            survivors++;
            ok += args[i].ok;
            CHECK_MSG(args[i].ok, "client %d did not end with [DONE] (HTTP %d, %d events, %d finish_reasons, last '%s', "
                      "final event %s)", i, args[i].status, args[i].n_events, args[i].finals, args[i].last, args[i].before);
        }
    }
    CHECK_EQ_INT(ok, survivors);
    CHECK(left > 10 && survivors > 50);
    /* everything drains: no request left running, no KV page held */
    double t0 = now_s();
    while (now_s() - t0 < 10 && (metric_value("onebit_requests_running") != 0 || metric_value("onebit_kv_blocks_used") != 0)) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(metric_value("onebit_requests_running"), 0);
    CHECK_EQ_INT(metric_value("onebit_kv_blocks_used"), 0);
    CHECK_EQ_INT(metric_value("onebit_streams_active"), 0);
    check_still_serving();
}

TEST(queue_full_is_503) {
    NEED_TEXT();
    /* one slot, room for one waiting request: a third one is refused at once */
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = g_model_path;
    p.port = 0;
    p.device = "cpu";
    p.engine.n_threads = 2;
    p.engine.n_parallel = 1;
    p.engine.n_ctx = 4096;
    p.engine.queue_max = 1;
    p.quiet = true;
    ob_server *s = NULL;
    CHECK_OK(ob_server_start(&p, &s));
    if (!s) return;
    CHECK_OK(ob_server_wait_ready(s, 30000));
    int port = ob_server_port(s);
    const char *longer = "{\"prompt\":\"Once upon a time\",\"max_tokens\":-1,\"ignore_eos\":true,\"stream\":true}";
    int running = send_request(port, "POST", "/v1/completions", NULL, longer, strlen(longer));
    char buf[4096];
    read_some(running, buf, sizeof buf, 400); /* it is in the slot and generating */
    int waiting = send_request(port, "POST", "/v1/completions", NULL, longer, strlen(longer));
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL); /* it is queued */
    resp r;
    CHECK(http_req(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"Lily\",\"max_tokens\":2}", &r));
    json_t *j = parse(&r);
    check_error(j, r.status, 503, "server_busy", NULL);
    json_decref(j);
    resp_free(&r);
    close(running);
    close(waiting);
    /* the slot frees when they are gone, and requests are served again */
    double t0 = now_s();
    int st = 0;
    while (now_s() - t0 < 10 && st != 200) {
        CHECK(http_req(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"Lily\",\"max_tokens\":2}", &r));
        st = r.status;
        resp_free(&r);
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(st, 200);
    ob_server_stop(s);
}

TEST(shutdown_with_open_streams) {
    NEED_TEXT();
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = g_model_path;
    p.port = 0;
    p.device = "cpu";
    p.engine.n_threads = 2;
    p.engine.n_parallel = 2;
    p.quiet = true;
    ob_server *s = NULL;
    CHECK_OK(ob_server_start(&p, &s));
    if (!s) return;
    CHECK_OK(ob_server_wait_ready(s, 30000));
    int port = ob_server_port(s);
    const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":-1,\"ignore_eos\":true,\"stream\":true}";
    int fds[4];
    for (int i = 0; i < 4; i++) fds[i] = send_request(port, "POST", "/v1/completions", NULL, body, strlen(body));
    char buf[2048];
    read_some(fds[0], buf, sizeof buf, 300);
    double t0 = now_s();
    ob_server_stop(s); /* two streams generating, two queued */
    CHECK_MSG(now_s() - t0 < 5, "shutdown took %.1f s", now_s() - t0);
    for (int i = 0; i < 4; i++) {
        resp r;
        read_response(fds[i], &r); /* the connection ends (EOF), whatever came before */
        resp_free(&r);
        close(fds[i]);
    }
}

/* ---------------- the command line ---------------- */

static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", OB_CLI_PATH, args);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(cli_flags) {
    char out[16384];
    CHECK_EQ_INT(run_cli("serve --version", out, sizeof out), 0);
    int build = -1;
    char commit[64] = "";
    CHECK_MSG(sscanf(out, "version: %d (%63[^)])", &build, commit) == 2 && build >= 0 && commit[0], "%s", out);
    CHECK_EQ_INT(run_cli("serve --help", out, sizeof out), 0);
    CHECK(strstr(out, "--ctx-size") && strstr(out, "--api-key-file") && strstr(out, "--spec-draft-n-max"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf --reranking", out, sizeof out), 1);
    CHECK(strstr(out, "--reranking is not supported"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf --embeddings --pooling rank", out, sizeof out), 1);
    CHECK(strstr(out, "--pooling must be"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf --lora a.gguf", out, sizeof out), 1);
    CHECK_EQ_INT(run_cli("serve -m x.gguf --hf-repo org/repo", out, sizeof out), 1);
    CHECK(strstr(out, "not both"));
    CHECK_EQ_INT(run_cli("serve --hf-file model.gguf", out, sizeof out), 1);
    CHECK(strstr(out, "--hf-file needs -hf"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf --model-url http://example.com/x.gguf", out, sizeof out), 1);
    CHECK_EQ_INT(run_cli("serve -m x.gguf --frobnicate 3", out, sizeof out), 1);
    CHECK(strstr(out, "unknown option '--frobnicate'"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf -c lots", out, sizeof out), 1);
    CHECK(strstr(out, "-c needs an integer"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf -ctk f16 -ctv q8_0", out, sizeof out), 1);
    CHECK_EQ_INT(run_cli("serve", out, sizeof out), 1);
    CHECK(strstr(out, "no model"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf --api-key-file /nonexistent/keys", out, sizeof out), 1);
    CHECK(strstr(out, "cannot read --api-key-file"));
    CHECK_EQ_INT(run_cli("serve -m x.gguf --reasoning-budget 100", out, sizeof out), 1);
    CHECK_EQ_INT(run_cli("serve -m x.gguf --chat-template '{% if %}'", out, sizeof out), 1);
    CHECK_MSG(strstr(out, "line 1"), "%s", out); /* a broken template is refused at start, naming its line */
    CHECK_EQ_INT(run_cli("serve -m x.gguf --port=notaport", out, sizeof out), 1);
    CHECK(strstr(out, "--port needs an integer"));
    CHECK_EQ_INT(run_cli("serve -m /nonexistent/model.gguf --port 0", out, sizeof out), 1);
    CHECK(strstr(out, "/nonexistent/model.gguf")); /* the error names what was asked for */
}

/* Start `exe serve-args...` (exe may be a link named llama-server) and wait
 * for "model ready" on its stderr. Returns the port (0 on failure); *log
 * collects stderr up to then. */
static int start_cli(const char *exe, char *const *args, pid_t *pid, char *log, size_t cap) {
    int pipefd[2];
    log[0] = '\0';
    if (pipe(pipefd) != 0) return 0;
    *pid = fork();
    if (*pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        execv(exe, args);
        _exit(127);
    }
    close(pipefd[1]);
    FILE *err = fdopen(pipefd[0], "r");
    char line[1024];
    int port = 0;
    bool ready = false;
    double t0 = now_s();
    while (!ready && now_s() - t0 < 30 && fgets(line, sizeof line, err)) {
        strncat(log, line, cap - strlen(log) - 1);
        const char *p = strstr(line, "listening on http://127.0.0.1:");
        if (p) port = atoi(p + strlen("listening on http://127.0.0.1:"));
        if (strstr(line, "model ready")) ready = true;
    }
    fclose(err); /* the server's later writes to stderr fail quietly */
    return ready ? port : 0;
}

static int stop_cli(pid_t pid) {
    kill(pid, SIGTERM);
    int status = -1;
    double t0 = now_s();
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now_s() - t0 > 10) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(cli_serves_and_shuts_down_on_sigterm) {
    NEED_SERVER();
    char *args[] = {"1bit", "serve", "-m", (char *)g_model_path, "--port", "0", "-t", "1", "-np", "2",
                    /* flags Lemonade passes: accepted */
                    "--ctx-size", "512", "--jinja", "--metrics", "--context-shift", "--keep", "16", "--reasoning-format", "auto",
                    "--no-ui", "-fa", "on", "--spec-draft-n-max", "3", NULL};
    pid_t pid;
    char log[8192];
    int port = start_cli(OB_CLI_PATH, args, &pid, log, sizeof log);
    CHECK_MSG(port > 0, "%s", log);
    CHECK(strstr(log, "--context-shift ignored") != NULL);
    resp r;
    CHECK(port > 0 && http_req(port, "GET", "/health", NULL, NULL, &r));
    CHECK_EQ_INT(r.status, 200);
    resp_free(&r);
    CHECK(http_req(port, "GET", "/props", NULL, NULL, &r));
    json_t *j = parse(&r);
    CHECK_EQ_INT(jint(j, "default_generation_settings.n_ctx"), 512);
    CHECK_EQ_INT(jint(j, "total_slots"), 2);
    json_decref(j);
    resp_free(&r);
    /* `1bit serve` checks model names */
    CHECK(http_req(port, "POST", "/v1/completions", NULL, "{\"model\":\"Qwen3-0.6B-GGUF\",\"prompt\":[1,403],\"max_tokens\":1}", &r));
    CHECK_EQ_INT(r.status, 404);
    resp_free(&r);
    CHECK_EQ_INT(stop_cli(pid), 0);
}

/* Every llama-server flag the issue lists (and Lemonade passes), at once,
 * through the llama-server name: the server starts, serves chat with the key
 * and embeddings, and warns about the flags it only accepts. */
TEST(cli_accepts_every_lemonade_flag) {
    NEED_CHAT();
    char dir[128], link[192], tmpl[192];
    snprintf(dir, sizeof dir, "/tmp/ob_test_server_lem_%d", (int)getpid());
    snprintf(link, sizeof link, "%s/llama-server", dir);
    snprintf(tmpl, sizeof tmpl, "%s/chatml.jinja", dir);
    mkdir(dir, 0700);
    unlink(link);
    CHECK(symlink(OB_CLI_PATH, link) == 0);
    FILE *f = fopen(tmpl, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
              f);
        fclose(f);
    }
    char *args[] = {"llama-server", "-m", (char *)g_model_path, "--host", "127.0.0.1", "--port", "0", "--ctx-size", "512",
                    "-np", "2", "-ngl", "0", "--device", "none", "-t", "1", "--jinja", "--metrics", "--embeddings",
                    "--pooling", "mean", "-md", (char *)g_model_path, "--spec-draft-n-max", "4", "--spec-draft-p-min", "0.5",
                    "--context-shift", "--keep", "16", "--reasoning-format", "auto", "--no-ui", "--no-webui", "-fa", "on",
                    "--api-key", "sk-lemon", "--chat-template-file", tmpl, "--no-mmproj-offload", NULL};
    pid_t pid;
    char log[8192];
    int port = start_cli(link, args, &pid, log, sizeof log);
    CHECK_MSG(port > 0, "%s", log);
    CHECK(strstr(log, "--context-shift ignored") != NULL);
    resp r;
    CHECK(port > 0 && http_req(port, "GET", "/health", NULL, NULL, &r));
    CHECK_EQ_INT(r.status, 200);
    resp_free(&r);
    const char *auth = "Authorization: Bearer sk-lemon\r\n";
    CHECK(http_req(port, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r));
    CHECK_EQ_INT(r.status, 401); /* the key is required */
    resp_free(&r);
    CHECK(http_req(port, "POST", "/v1/chat/completions", auth,
                   "{\"model\":\"any\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}", &r));
    CHECK_EQ_INT(r.status, 200);
    json_t *j = parse(&r);
    CHECK(jget(j, "timings.predicted_n") != NULL);
    json_decref(j);
    resp_free(&r);
    CHECK(http_req(port, "POST", "/v1/embeddings", auth, "{\"input\":\"Once upon a time\"}", &r));
    CHECK_EQ_INT(r.status, 200);
    j = parse(&r);
    CHECK(json_is_array(jget(j, "data.0.embedding")));
    json_decref(j);
    resp_free(&r);
    CHECK(http_req(port, "GET", "/props", auth, NULL, &r));
    j = parse(&r);
    CHECK(jstr(j, "chat_template_source") && !strcmp(jstr(j, "chat_template_source"), "file"));
    CHECK_EQ_INT(jint(j, "default_generation_settings.n_ctx"), 512);
    json_decref(j);
    resp_free(&r);
    CHECK_EQ_INT(stop_cli(pid), 0);
    unlink(tmpl);
    unlink(link);
    rmdir(dir);
}

TEST(cli_as_llama_server_accepts_any_model_name) {
    NEED_SERVER();
    /* make install links llama-server to 1bit; Lemonade sends its own model names */
    char dir[128], link[192];
    snprintf(dir, sizeof dir, "/tmp/ob_test_server_bin_%d", (int)getpid());
    snprintf(link, sizeof link, "%s/llama-server", dir);
    mkdir(dir, 0700);
    unlink(link);
    CHECK(symlink(OB_CLI_PATH, link) == 0);
    char *args[] = {"llama-server", "-m", (char *)g_model_path, "--port", "0", "-t", "1", "-c", "256", NULL};
    pid_t pid;
    char log[8192];
    int port = start_cli(link, args, &pid, log, sizeof log);
    CHECK_MSG(port > 0, "%s", log);
    resp r;
    CHECK(port > 0 && http_req(port, "POST", "/v1/completions", NULL,
                                "{\"model\":\"Qwen3-0.6B-GGUF\",\"prompt\":[1,403],\"max_tokens\":1}", &r));
    CHECK_EQ_INT(r.status, g_text ? 200 : 501); /* not 404 */
    resp_free(&r);
    CHECK_EQ_INT(stop_cli(pid), 0);
    unlink(link);
    rmdir(dir);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int rc = test_main(argc, argv);
    ob_server_stop(g_srv);
    return rc;
}
