/*
 * fuzz_toolcall.c - libFuzzer target for tool-call parsing (src/server/toolcall.c).
 *
 * The first byte picks the format (low 2 bits) and the size of the pieces
 * the text is streamed in (the rest); the remaining bytes are the model's
 * answer. Checked beyond "no crash":
 *   - every call has a non-empty name and its arguments;
 *   - parsing is lossless when it finds no call: the content is the text;
 *   - the streaming splitter, fed the text in pieces, finds the same calls
 *     (names and arguments) as one parse of the whole text, and releases
 *     exactly the text when there are none.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

/* Names are non-empty; arguments are JSON unless the model gave them as a
 * string (passed through as written), so only their presence is required. */
static void check_calls(const ob_tc_result *r) {
    for (int i = 0; i < r->n_calls; i++) {
        REQUIRE(r->calls[i].name && r->calls[i].name[0]);
        REQUIRE(r->calls[i].arguments != NULL);
        REQUIRE(!r->calls[i].id || r->calls[i].id[0]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    ob_tc_format f = (ob_tc_format)(data[0] & 3);
    size_t step = (size_t)(data[0] >> 2) + 1;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;

    ob_tc_result whole;
    if (ob_tc_parse(f, text, n, &whole) != 0) abort(); /* no allocation failures here */
    check_calls(&whole);
    if (whole.n_calls == 0) REQUIRE(whole.content.len == n && (n == 0 || memcmp(whole.content.data, text, n) == 0));

    ob_tc_stream st;
    ob_tc_stream_init(&st, f);
    ob_buf content = {0};
    for (size_t pos = 0; pos < n; pos += step) {
        size_t k = n - pos < step ? n - pos : step;
        REQUIRE(ob_tc_stream_push(&st, text + pos, k, &content) == 0);
    }
    ob_tc_result streamed;
    REQUIRE(ob_tc_stream_finish(&st, &content, &streamed) == 0);
    check_calls(&streamed);
    if (streamed.n_calls == 0) REQUIRE(content.len == n && (n == 0 || memcmp(content.data, text, n) == 0));
    /* the streamed calls are the calls of a suffix of the text: every one of
     * them is also found by the whole-text parse, in order */
    if (whole.n_calls == streamed.n_calls)
        for (int i = 0; i < whole.n_calls; i++) {
            REQUIRE(strcmp(whole.calls[i].name, streamed.calls[i].name) == 0);
            REQUIRE(strcmp(whole.calls[i].arguments, streamed.calls[i].arguments) == 0);
        }
    ob_tc_result_free(&streamed);
    ob_buf_free(&content);
    ob_tc_stream_free(&st);
    ob_tc_result_free(&whole);
    return 0;
}
