/*
 * fuzz_request.c - libFuzzer target for the server's request parser and the
 * text logic that runs on what it accepts.
 *
 * The first byte picks the API (chat, completions, /completion,
 * apply-template); the rest is the request body, exactly as the HTTP
 * handler passes it to ob_srv_request_parse. Checked beyond "no crash":
 *   - a refusal always carries an HTTP status, a type, a code and a message;
 *   - an accepted request is internally consistent (prompts or a template
 *     context, n within limits, stop strings non-empty and bounded);
 *   - streaming the body's bytes through the stop-string hold-back in
 *     arbitrary pieces releases exactly the text before the first stop
 *     match, as one search over the whole text finds it;
 *   - the reasoning splitter leaves text without '<' untouched.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "server/buf.h"
#include "server/request.h"
#include "server/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

/* Release text piece by piece as a streamer does; stop at a full match. */
static void check_stops(char *const *stops, int n_stops, const char *text, size_t len, const uint8_t *cuts, size_t n_cuts) {
    int which = -1;
    size_t first = ob_srv_stop_find(text, len, 0, stops, n_stops, &which);
    size_t want = first == (size_t)-1 ? len : first;
    ob_buf pending = {0}, released = {0};
    size_t pos = 0, c = 0;
    bool stopped = false;
    while (pos < len && !stopped) {
        size_t step = 1 + (n_cuts ? cuts[c++ % n_cuts] % 7 : 3);
        if (step > len - pos) step = len - pos;
        if (ob_buf_append(&pending, text + pos, step) < 0) break;
        pos += step;
        size_t p = ob_srv_stop_find(pending.data, pending.len, 0, stops, n_stops, &which);
        if (p != (size_t)-1) {
            ob_buf_append(&released, pending.data, p);
            stopped = true;
            break;
        }
        size_t keep = ob_srv_stop_holdback(pending.data, pending.len, stops, n_stops);
        ob_buf_append(&released, pending.data, pending.len - keep);
        ob_buf_consume(&pending, pending.len - keep);
    }
    if (!stopped) ob_buf_append(&released, pending.data ? pending.data : "", pending.len);
    REQUIRE(released.len == want);
    REQUIRE(want == 0 || memcmp(released.data, text, want) == 0);
    ob_buf_free(&pending);
    ob_buf_free(&released);
}

static void check_think(const char *text, size_t len, const uint8_t *cuts, size_t n_cuts) {
    ob_srv_think t;
    ob_buf content = {0}, reasoning = {0};
    ob_srv_think_init(&t, true, n_cuts && (cuts[0] & 1));
    size_t pos = 0, c = 0;
    while (pos < len) {
        size_t step = 1 + (n_cuts ? cuts[c++ % n_cuts] % 5 : 2);
        if (step > len - pos) step = len - pos;
        ob_srv_think_push(&t, text + pos, step, false, &content, &reasoning);
        pos += step;
    }
    ob_srv_think_push(&t, "", 0, true, &content, &reasoning);
    REQUIRE(content.len + reasoning.len <= len);
    if (!memchr(text, '<', len) && !(n_cuts && (cuts[0] & 1))) {
        REQUIRE(content.len == len && reasoning.len == 0);
        REQUIRE(len == 0 || memcmp(content.data, text, len) == 0);
    }
    ob_srv_think_free(&t);
    ob_buf_free(&content);
    ob_buf_free(&reasoning);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    ob_srv_api api = (ob_srv_api)(data[0] % OB_SRV_API_COUNT);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    ob_srv_defaults d;
    ob_srv_defaults_init(&d);
    ob_srv_request r;
    ob_srv_error e;
    if (ob_srv_request_parse(api, body, len, &d, &r, &e) < 0) {
        REQUIRE(e.http >= 400 && e.http < 600 && e.type && e.code && e.message[0]);
        REQUIRE(r.prompts == NULL && r.stop == NULL && r.model == NULL && r.chat_context == NULL);
    } else {
        if (api == OB_SRV_CHAT || api == OB_SRV_TEMPLATE) REQUIRE(r.chat_context && r.n_messages > 0);
        else REQUIRE(r.n_prompts > 0 && r.n_prompts * r.n <= OB_SRV_MAX_CHOICES);
        for (int i = 0; i < r.n_prompts; i++) REQUIRE(r.prompts[i].text || r.prompts[i].n_ids > 0);
        REQUIRE(r.n >= 1 && r.n <= OB_SRV_MAX_N && r.n_stop <= OB_SRV_MAX_STOP);
        for (int i = 0; i < r.n_stop; i++) REQUIRE(r.stop[i][0] && strlen(r.stop[i]) <= OB_SRV_MAX_STOP_LEN);
        if (r.n_stop) check_stops(r.stop, r.n_stop, body, len, data, size < 16 ? size : 16);
        ob_srv_request_free(&r);
    }
    check_think(body, len, data, size < 8 ? size : 8);
    return 0;
}
