/*
 * fuzz_template.c - libFuzzer target for the chat template interpreter.
 *
 * The input is template text. It is parsed and, when it parses, rendered
 * against a fixed conversation that has something for every construct to
 * chew on (system/user/assistant/tool messages, tool calls with dict and
 * string arguments, tools, nested lists, unicode, numbers, null). Limits
 * are set low so a template that loops or recurses fails fast instead of
 * tripping libFuzzer's timeout: the point is that every input ends in a
 * result or a clean error, never a crash, leak, hang or unbounded memory.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "core/mem.h"
#include "core/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char g_conversation[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    "{\"role\": \"user\", \"content\": \"Hi \\u00e9\\u4e16 \\ud83d\\ude00 'q' \\\"d\\\"\\n\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\","
    " \"tool_calls\": [{\"id\": \"call00001\", \"type\": \"function\", \"function\": {\"name\": \"f\","
    " \"arguments\": {\"a\": 1, \"b\": [1.5, null, true]}}},"
    " {\"id\": \"call00002\", \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": \"{\\\"x\\\": 2}\"}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call00001\", \"name\": \"f\", \"content\": \"42\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"part\"}, {\"type\": \"image\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}],"
    " \"documents\": null, \"add_generation_prompt\": true, \"enable_thinking\": false,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": -3, \"f\": 0.1, \"big\": 9007199254740993}";

static json_t *g_vars;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_vars) {
        g_vars = json_loads(g_conversation, 0, NULL);
        if (!g_vars) abort();
    }
    ob_chat_template *t = NULL;
    int rc = ob_chat_template_parse((const char *)data, size, &t);
    if (rc < 0) {
        if (!ob_last_error()[0] || t) abort(); /* every failure says why, and leaves nothing behind */
        return 0;
    }
    struct tm now;
    if (ob_chat_parse_time("2026-01-15", &now) < 0) abort();
    ob_chat_render_opts o = {0};
    o.now = &now;
    o.max_steps = 200000;
    o.max_output = 1 << 20;
    o.max_memory = 64 << 20;
    char *out = NULL;
    size_t n = 0;
    rc = ob_chat_template_render(t, g_vars, &o, &out, &n);
    if (rc < 0) {
        if (!ob_last_error()[0] || out) abort();
    } else {
        if (!out || out[n] != '\0' || n > o.max_output) abort();
        ob_free(out);
    }
    ob_chat_template_free(t);
    return 0;
}
