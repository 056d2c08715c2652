/*
 * toolcall.h - turning a model's answer into OpenAI tool calls, as pure
 * functions: text in, {content, calls} out. No model, no socket, no global
 * state, so the unit tests and the fuzz target call exactly what job.c calls.
 *
 * Models announce a tool call in the shape their chat template taught them.
 * Which shape to expect is read from the template text (as llama.cpp's chat
 * parser does); every format also accepts the generic JSON shapes, so a
 * model that answers in plain JSON is understood whatever its template says:
 *
 *   OB_TC_HERMES   Hermes 2 Pro, Qwen2.5, Qwen3, QwQ:
 *                    text <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call> ...
 *                  and inside the same tag the XML styles of Qwen3-Coder / Qwen3.5
 *                    <function=f>\n<parameter=k>\nvalue\n</parameter>\n</function>
 *                  and GLM-4.5 / 4.6
 *                    f\n<arg_key>k</arg_key>\n<arg_value>value</arg_value>
 *                  (a value that parses as JSON is that JSON, else a string)
 *   OB_TC_LLAMA3   Llama 3.1 / 3.2 / 3.3:
 *                    {"name": "f", "parameters": {...}}     (optionally after <|python_tag|>,
 *                    several separated by ';')
 *   OB_TC_MISTRAL  Mistral Nemo / Small / v0.3:
 *                    [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "abc123def"}]
 *                    and the newer  [TOOL_CALLS]f[ARGS]{...}
 *   OB_TC_GENERIC  any template: the tags above wherever they appear, else an
 *                    answer that is only JSON (optionally in a ```json fence):
 *                    {"name", "arguments"|"parameters"}, an array of those,
 *                    {"tool_call": {...}}, {"tool_calls": [...]}, or OpenAI's own
 *                    {"type": "function", "function": {"name", "arguments"}}.
 *
 * Marker tokens that are control tokens ([TOOL_CALLS], <|python_tag|>) are
 * dropped by the detokenizer, so every marker is optional where the JSON
 * after it is unambiguous. A call whose JSON does not parse stays in the
 * content as the model wrote it: nothing the model said is ever lost.
 */
#ifndef OB_SERVER_TOOLCALL_H
#define OB_SERVER_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

typedef enum ob_tc_format {
    OB_TC_GENERIC = 0,
    OB_TC_HERMES = 1,
    OB_TC_LLAMA3 = 2,
    OB_TC_MISTRAL = 3,
} ob_tc_format;

/* The format a chat template teaches (NULL or unknown: OB_TC_GENERIC). */
ob_tc_format ob_tc_detect(const char *template_text);
const char *ob_tc_format_name(ob_tc_format f); /* "generic", "hermes", "llama3", "mistral" */

typedef struct ob_tc_call {
    char *id;        /* the model's own call id (Mistral), or NULL: the caller makes one */
    char *name;      /* function name, non-empty */
    char *arguments; /* a JSON text: compact JSON of the model's object, or the model's string as given */
} ob_tc_call;

typedef struct ob_tc_result {
    ob_buf content;     /* text outside the calls (trimmed when there are calls); the whole text when none */
    ob_tc_call *calls;  /* [n_calls], strings from ob_malloc */
    int n_calls;
} ob_tc_result;

/* Parse a whole answer. Returns 0 (with or without calls) or OB_ERR_OOM.
 * *out is overwritten; free it with ob_tc_result_free even on failure. */
int ob_tc_parse(ob_tc_format f, const char *text, size_t len, ob_tc_result *out);
void ob_tc_result_free(ob_tc_result *r);

/* Streaming: answer text arrives in pieces. Text that cannot belong to a
 * call is released to `content` at once; from the first sign of a call (a
 * tag, or an answer that opens with '{', '[' or ```json) the rest is held
 * and parsed at the end. Trailing whitespace before a possible tag is held
 * too, so content never ends in the newline that preceded a call. Pieces
 * may split anywhere, even inside a character: only ASCII bytes are tested. */
typedef struct ob_tc_stream {
    ob_tc_format fmt;
    int state;       /* TC_START, TC_TEXT, TC_CAPTURE (toolcall.c) */
    bool emitted;    /* some content was released */
    ob_buf hold;     /* bytes not released yet */
} ob_tc_stream;

void ob_tc_stream_init(ob_tc_stream *s, ob_tc_format f);
int ob_tc_stream_push(ob_tc_stream *s, const char *text, size_t len, ob_buf *content);
/* No more text: parse what was held. Appends the remaining content to
 * `content` and fills *calls (empty when none). */
int ob_tc_stream_finish(ob_tc_stream *s, ob_buf *content, ob_tc_result *calls);
void ob_tc_stream_free(ob_tc_stream *s);

#endif
