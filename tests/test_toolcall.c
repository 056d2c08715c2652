/*
 * test_toolcall.c - tool-call parsing (src/server/toolcall.c) over the
 * answer shapes real models produce, the format each real chat template in
 * tests/data/chat/templates selects, and the streaming splitter checked
 * against whole-text parses for every way of cutting the text.
 *
 * The answers below are written the way the model families emit them (the
 * tags, spacing and key names of Qwen2.5/Qwen3/Hermes, Llama 3.1/3.2,
 * Mistral Nemo/Small and the newer Mistral [ARGS] form); control-token
 * markers appear both present and absent because the server's detokenizer
 * drops control tokens.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "server/internal.h"
#include "server/toolcall.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

/* Two JSON texts are the same value. */
static bool same_json(const char *a, const char *b) {
    json_t *x = json_loads(a, 0, NULL), *y = json_loads(b, 0, NULL);
    bool eq = x && y && json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return eq;
}

static void stream_check(ob_tc_format f, const char *text, const char *want_content, int want_calls);

typedef struct want_call {
    const char *name, *args, *id; /* args as JSON text; id NULL: none expected */
} want_call;

static void check_result(const char *what, const ob_tc_result *r, const char *content, const want_call *calls, int n) {
    const char *got = r->content.data ? r->content.data : "";
    CHECK_MSG(strcmp(got, content) == 0, "%s: content '%s', want '%s'", what, got, content);
    CHECK_MSG(r->n_calls == n, "%s: %d calls, want %d", what, r->n_calls, n);
    for (int i = 0; i < n && i < r->n_calls; i++) {
        CHECK_MSG(strcmp(r->calls[i].name, calls[i].name) == 0, "%s: call %d name '%s'", what, i, r->calls[i].name);
        CHECK_MSG(same_json(r->calls[i].arguments, calls[i].args), "%s: call %d arguments '%s'", what, i,
                  r->calls[i].arguments);
        if (calls[i].id) CHECK_MSG(r->calls[i].id && strcmp(r->calls[i].id, calls[i].id) == 0, "%s: call %d id", what, i);
        else CHECK_MSG(r->calls[i].id == NULL, "%s: call %d has an id", what, i);
    }
}

static void expect(ob_tc_format f, const char *text, const char *content, const want_call *calls, int n) {
    ob_tc_result r;
    CHECK_EQ_INT(ob_tc_parse(f, text, strlen(text), &r), 0);
    check_result(text, &r, content, calls, n);
    ob_tc_result_free(&r);
}

TEST(detect_from_real_templates) {
    static const struct {
        const char *file;
        ob_tc_format want;
    } cases[] = {
        {"qwen2.5-instruct.jinja", OB_TC_HERMES},      {"qwen3.jinja", OB_TC_HERMES},
        {"qwq-32b.jinja", OB_TC_HERMES},               {"hermes-3-tool-use.jinja", OB_TC_HERMES},
        {"llama-3.1-instruct.jinja", OB_TC_LLAMA3},    {"llama-3.2-instruct.jinja", OB_TC_LLAMA3},
        {"mistral-nemo.jinja", OB_TC_MISTRAL},         {"mistral-small-3.2.jinja", OB_TC_MISTRAL},
        {"devstral-small.jinja", OB_TC_MISTRAL},       {"llama-3-instruct.jinja", OB_TC_GENERIC},
        {"gemma-3.jinja", OB_TC_GENERIC},              {"phi-3.jinja", OB_TC_GENERIC},
        {"deepseek-r1-distill-qwen.jinja", OB_TC_GENERIC}, {"qwen3-coder.jinja", OB_TC_HERMES},
        {"qwen3.5.jinja", OB_TC_HERMES},               {"glm-4.5.jinja", OB_TC_HERMES},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/chat/templates/%s", OB_SOURCE_DIR, cases[i].file);
        char *t = read_text(path);
        CHECK_MSG(t != NULL, "%s missing", path);
        if (!t) continue;
        ob_tc_format got = ob_tc_detect(t);
        CHECK_MSG(got == cases[i].want, "%s: %s, want %s", cases[i].file, ob_tc_format_name(got),
                  ob_tc_format_name(cases[i].want));
        free(t);
    }
    CHECK(ob_tc_detect(NULL) == OB_TC_GENERIC);
}

TEST(hermes_qwen_shapes) {
    want_call weather = {"get_current_temperature", "{\"location\": \"San Francisco, CA, USA\", \"unit\": \"celsius\"}", NULL};
    /* Qwen2.5: the answer is only the call, on lines of its own */
    expect(OB_TC_HERMES,
           "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", "
           "\"unit\": \"celsius\"}}\n</tool_call>",
           "", &weather, 1);
    /* text before, two calls (parallel), as Qwen2.5 and Hermes 3 write them */
    want_call two[] = {weather, {"get_temperature_date", "{\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}", NULL}};
    expect(OB_TC_HERMES,
           "Let me check both.\n<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San "
           "Francisco, CA, USA\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", "
           "\"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}}\n</tool_call>",
           "Let me check both.", two, 2);
    /* Qwen3 after the reasoning split: leading blank lines, nested and non-ASCII arguments */
    want_call nested = {"search", "{\"query\": \"café \\\"crème\\\" {x}\", \"filters\": {\"lang\": [\"fr\", \"en\"], \"n\": 3}}", NULL};
    expect(OB_TC_HERMES,
           "\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"café \\\"crème\\\" {x}\", \"filters\": "
           "{\"lang\": [\"fr\", \"en\"], \"n\": 3}}}\n</tool_call>",
           "", &nested, 1);
    /* no arguments at all, and a call the model did not close (stopped at </tool_call>'s EOS) */
    want_call noargs = {"get_time", "{}", NULL};
    expect(OB_TC_HERMES, "<tool_call>\n{\"name\": \"get_time\"}\n", "", &noargs, 1);
    /* the generic format finds Hermes tags too */
    expect(OB_TC_GENERIC, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>", "", &noargs, 1);
}

/* The XML styles inside <tool_call>, as Qwen3-Coder / Qwen3.5 and GLM-4.5
 * templates show them to the model. */
TEST(xml_shapes_in_tool_call_tags) {
    want_call w = {"get_weather", "{\"city\": \"Paris\", \"days\": 3, \"note\": \"two\\nlines\"}", NULL};
    expect(OB_TC_HERMES,
           "I'll check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
           "</parameter>\n<parameter=note>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>",
           "I'll check.", &w, 1);
    want_call g = {"get_weather", "{\"city\": \"Paris\", \"days\": 3}", NULL};
    expect(OB_TC_HERMES,
           "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
           "<arg_value>3</arg_value>\n</tool_call>",
           "", &g, 1);
    want_call none = {"get_time", "{}", NULL};
    expect(OB_TC_HERMES, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", "", &none, 1);
    expect(OB_TC_GENERIC, "<tool_call>get_time</tool_call>", "", &none, 1);
    /* an object value stays an object */
    want_call obj = {"f", "{\"opts\": {\"a\": [1, 2]}}", NULL};
    expect(OB_TC_HERMES, "<tool_call>\n<function=f>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>", "",
           &obj, 1);
    /* unfinished or malformed: content */
    static const char *const bad[] = {
        "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n",
        "<tool_call>two words</tool_call>",
        "<tool_call>f\n<arg_key>k</arg_key> junk</tool_call>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect(OB_TC_HERMES, bad[i], bad[i], NULL, 0);
    stream_check(OB_TC_HERMES, "Let me see.\n<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>",
                 "Let me see.", 1);
}

TEST(llama3_shapes) {
    want_call w = {"get_weather", "{\"city\": \"Paris\", \"days\": 2}", NULL};
    /* Llama 3.1 / 3.3 custom tools: the JSON alone */
    expect(OB_TC_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}", "", &w, 1);
    /* Llama 3.2: with "type": "function" */
    expect(OB_TC_LLAMA3, "{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}",
           "", &w, 1);
    /* after <|python_tag|> (when the detokenizer keeps it) */
    expect(OB_TC_LLAMA3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}", "", &w,
           1);
    /* several, separated by ';' */
    want_call two[] = {w, {"get_time", "{\"tz\": \"CET\"}", NULL}};
    expect(OB_TC_LLAMA3,
           "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}; {\"name\": \"get_time\", "
           "\"parameters\": {\"tz\": \"CET\"}}",
           "", two, 2);
    /* arguments given as a string are passed through as written */
    want_call s = {"get_weather", "{\"city\":\"Paris\",\"days\":2}", NULL};
    expect(OB_TC_LLAMA3, "{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":2}\"}", "", &s, 1);
}

TEST(mistral_shapes) {
    want_call w = {"get_current_weather", "{\"location\": \"Paris, France\", \"format\": \"celsius\"}", "a1B2c3D4e"};
    const char *body = "[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, France\", \"format\": "
                       "\"celsius\"}, \"id\": \"a1B2c3D4e\"}]";
    char with_tag[512];
    snprintf(with_tag, sizeof with_tag, "[TOOL_CALLS]%s", body);
    expect(OB_TC_MISTRAL, with_tag, "", &w, 1);
    expect(OB_TC_MISTRAL, body, "", &w, 1); /* the control token dropped */
    expect(OB_TC_GENERIC, with_tag, "", &w, 1);
    /* Mistral Small 3.2 / Devstral: name[ARGS]{...}, several */
    want_call two[] = {{"get_weather", "{\"city\": \"Paris\"}", NULL}, {"get_time", "{\"tz\": \"CET\"}", NULL}};
    expect(OB_TC_MISTRAL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": \"CET\"}", "",
           two, 2);
    expect(OB_TC_MISTRAL, "get_weather[ARGS]{\"city\": \"Paris\"}get_time[ARGS]{\"tz\": \"CET\"}", "", two, 2);
}

TEST(generic_json_shapes) {
    want_call w = {"lookup", "{\"id\": 7}", NULL};
    expect(OB_TC_GENERIC, "{\"name\": \"lookup\", \"arguments\": {\"id\": 7}}", "", &w, 1);
    expect(OB_TC_GENERIC, "{\"tool_call\": {\"name\": \"lookup\", \"arguments\": {\"id\": 7}}}", "", &w, 1);
    expect(OB_TC_GENERIC, "{\"tool_calls\": [{\"name\": \"lookup\", \"arguments\": {\"id\": 7}}]}", "", &w, 1);
    expect(OB_TC_GENERIC, "```json\n{\"name\": \"lookup\", \"arguments\": {\"id\": 7}}\n```\n", "", &w, 1);
    expect(OB_TC_GENERIC, "[{\"type\": \"function\", \"function\": {\"name\": \"lookup\", \"arguments\": \"{\\\"id\\\": 7}\"}}]", "",
           &w, 1);
    /* a Hermes-template model that forgot its tags is still understood */
    expect(OB_TC_HERMES, "{\"name\": \"lookup\", \"arguments\": {\"id\": 7}}", "", &w, 1);
}

TEST(text_that_is_not_a_call_stays_content) {
    static const char *const texts[] = {
        "The weather in Paris is sunny.",
        "",
        "{\"answer\": 42}",                                   /* JSON, but no name */
        "{\"name\": \"lookup\", \"arguments\": {\"id\": 7}} and more text", /* JSON followed by prose */
        "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"id\": \n</tool_call>", /* broken JSON */
        "<tool_call>not json</tool_call>",
        "[TOOL_CALLS]",
        "[1, 2, 3]",
        "{\"name\": 5, \"arguments\": {}}",
        "<|python_tag|>brave_search.call(query=\"x\")",
        "```python\nprint(1)\n```",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int f = OB_TC_GENERIC; f <= OB_TC_MISTRAL; f++) expect((ob_tc_format)f, texts[i], texts[i], NULL, 0);
    /* one good call and one broken one: the good one is a call, the broken text stays */
    want_call w = {"a", "{}", NULL};
    expect(OB_TC_HERMES, "<tool_call>{\"name\": \"a\"}</tool_call>\n<tool_call>{\"name\": </tool_call>", "<tool_call>{\"name\": </tool_call>",
           &w, 1);
}

/* Feed text in pieces cut by a pattern; the released content plus the final
 * parse must equal what a whole-text run gives, and nothing released may
 * come from inside a call. */
static void stream_check(ob_tc_format f, const char *text, const char *want_content, int want_calls) {
    size_t n = strlen(text);
    for (size_t step = 1; step <= 4; step++) {
        for (size_t first = 0; first < (n < 40 ? n : 40); first++) {
            ob_tc_stream st;
            ob_tc_stream_init(&st, f);
            ob_buf content = {0};
            size_t pos = 0;
            int rc = 0;
            if (first) rc |= ob_tc_stream_push(&st, text, first, &content), pos = first;
            while (pos < n) {
                size_t k = n - pos < step ? n - pos : step;
                rc |= ob_tc_stream_push(&st, text + pos, k, &content);
                pos += k;
            }
            ob_tc_result calls;
            rc |= ob_tc_stream_finish(&st, &content, &calls);
            CHECK_EQ_INT(rc, 0);
            const char *got = content.data ? content.data : "";
            CHECK_MSG(strcmp(got, want_content) == 0, "step %zu first %zu: content '%s', want '%s'", step, first, got,
                      want_content);
            CHECK_EQ_INT(calls.n_calls, want_calls);
            ob_tc_result_free(&calls);
            ob_buf_free(&content);
            ob_tc_stream_free(&st);
            if (g_test_failed) return;
        }
    }
}

TEST(streaming_matches_whole_text) {
    stream_check(OB_TC_HERMES, "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>", "Sure.", 1);
    stream_check(OB_TC_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\nDone.", "Done.", 1);
    stream_check(OB_TC_HERMES, "Plain answer with a < sign and <tool no call.\n", "Plain answer with a < sign and <tool no call.\n", 0);
    stream_check(OB_TC_LLAMA3, "  {\"name\": \"f\", \"parameters\": {\"x\": [1, 2]}}", "", 1);
    stream_check(OB_TC_GENERIC, "{\"answer\": 42}", "{\"answer\": 42}", 0);
    stream_check(OB_TC_MISTRAL, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"abcdefghi\"}]", "", 1);
    stream_check(OB_TC_GENERIC, "``` not json", "``` not json", 0);
    stream_check(OB_TC_GENERIC, "```json\n{\"name\": \"f\"}\n```", "", 1);
    stream_check(OB_TC_GENERIC, "Text then <tool_call>{\"name\": \"f\"}</tool_call> and <|python_tag|>", "Text then\nand <|python_tag|>", 1);
}

/* Content that cannot start a call is released at once, before the end. */
TEST(streaming_releases_plain_text_early) {
    ob_tc_stream st;
    ob_tc_stream_init(&st, OB_TC_HERMES);
    ob_buf content = {0};
    CHECK_EQ_INT(ob_tc_stream_push(&st, "Hello there, ", 13, &content), 0);
    CHECK(content.len == 12 && memcmp(content.data, "Hello there,", 12) == 0); /* the trailing space waits */
    CHECK_EQ_INT(ob_tc_stream_push(&st, "friend <tool", 12, &content), 0);
    CHECK(content.len == 19 && memcmp(content.data, "Hello there, friend", 19) == 0);
    CHECK_EQ_INT(ob_tc_stream_push(&st, "_call>{\"name\": \"g\"}", 19, &content), 0);
    CHECK_EQ_INT(content.len, 19);
    ob_tc_result calls;
    CHECK_EQ_INT(ob_tc_stream_finish(&st, &content, &calls), 0);
    CHECK_EQ_INT(calls.n_calls, 1);
    CHECK(calls.n_calls == 1 && strcmp(calls.calls[0].name, "g") == 0);
    CHECK(content.len == 19);
    ob_tc_result_free(&calls);
    ob_buf_free(&content);
    ob_tc_stream_free(&st);
}

TEST(allocation_failures_are_clean) {
    const char *text = "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>"
                       "<tool_call>{\"name\": \"g\", \"id\": \"q\"}</tool_call>";
    for (long k = 1; k < 200; k++) {
        ob_tc_result r;
        ob_mem_fail_after(k);
        int rc = ob_tc_parse(OB_TC_HERMES, text, strlen(text), &r);
        ob_mem_fail_after(0);
        CHECK(rc == 0 || rc == -2);
        if (rc == 0) CHECK(r.n_calls == 2 || r.n_calls == 0);
        ob_tc_result_free(&r);
    }
}

/* ---------------- the response shapes (format.c) ---------------- */

/* A finished one-choice chat job whose answer was `text`, run through the
 * splitter exactly as job.c does, with ids given as job.c gives them. */
static ob_srv_job *fake_job(ob_server *srv, const char *text, bool stream) {
    ob_srv_job *j = calloc(1, sizeof *j);
    j->srv = srv;
    j->req.api = OB_SRV_CHAT;
    j->req.n = 1;
    j->req.n_prompts = 1;
    j->req.stream = stream;
    j->req.gen.top_logprobs = -1;
    j->prompt_tokens = calloc(1, sizeof *j->prompt_tokens);
    j->prompt_tokens[0] = 5;
    snprintf(j->id, sizeof j->id, "chatcmpl-test");
    j->n_ch = 1;
    j->ch = calloc(1, sizeof *j->ch);
    ob_srv_choice *c = &j->ch[0];
    c->tools = true;
    c->finished = true;
    c->done.finish = OB_FINISH_STOP;
    c->n_tokens = 9;
    ob_tc_stream_init(&c->tc, OB_TC_HERMES);
    CHECK_EQ_INT(ob_tc_stream_push(&c->tc, text, strlen(text), &c->content), 0);
    CHECK_EQ_INT(ob_tc_stream_finish(&c->tc, &c->content, &c->calls), 0);
    for (int k = 0; k < c->calls.n_calls; k++)
        if (!c->calls.calls[k].id) {
            char id[32];
            snprintf(id, sizeof id, "call_%d", k);
            c->calls.calls[k].id = ob_strdup(id);
        }
    return j;
}

static void fake_free(ob_srv_job *j) {
    ob_srv_choice *c = &j->ch[0];
    ob_tc_stream_free(&c->tc);
    ob_tc_result_free(&c->calls);
    ob_buf_free(&c->content);
    ob_buf_free(&c->reasoning);
    free(j->ch);
    free(j->prompt_tokens);
    free(j);
}

static const char *TWO_CALLS = "I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                               "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

TEST(chat_response_has_tool_calls) {
    ob_server srv;
    memset(&srv, 0, sizeof srv);
    snprintf(srv.model_id, sizeof srv.model_id, "m");
    ob_srv_job *j = fake_job(&srv, TWO_CALLS, false);
    json_t *r = ob_srv_job_response(j);
    json_t *ch = json_array_get(json_object_get(r, "choices"), 0);
    json_t *msg = json_object_get(ch, "message");
    CHECK(strcmp(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls") == 0);
    CHECK(strcmp(json_string_value(json_object_get(msg, "content")), "I will look.") == 0);
    json_t *calls = json_object_get(msg, "tool_calls");
    CHECK_EQ_INT(json_array_size(calls), 2);
    json_t *c0 = json_array_get(calls, 0), *f0 = json_object_get(c0, "function");
    CHECK(strcmp(json_string_value(json_object_get(c0, "id")), "call_0") == 0);
    CHECK(strcmp(json_string_value(json_object_get(c0, "type")), "function") == 0);
    CHECK(strcmp(json_string_value(json_object_get(f0, "name")), "get_weather") == 0);
    CHECK(same_json(json_string_value(json_object_get(f0, "arguments")), "{\"city\": \"Paris\"}"));
    CHECK(json_object_get(c0, "index") == NULL); /* index is for stream deltas only */
    json_decref(r);
    fake_free(j);

    /* a pure call: content is null, as OpenAI sends it */
    j = fake_job(&srv, "<tool_call>{\"name\": \"get_time\"}</tool_call>", false);
    r = ob_srv_job_response(j);
    msg = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message");
    CHECK(json_is_null(json_object_get(msg, "content")));
    CHECK_EQ_INT(json_array_size(json_object_get(msg, "tool_calls")), 1);
    json_decref(r);
    fake_free(j);

    /* no call: no tool_calls key, finish_reason stop, text untouched */
    j = fake_job(&srv, "Just text.", false);
    r = ob_srv_job_response(j);
    ch = json_array_get(json_object_get(r, "choices"), 0);
    msg = json_object_get(ch, "message");
    CHECK(json_object_get(msg, "tool_calls") == NULL);
    CHECK(strcmp(json_string_value(json_object_get(msg, "content")), "Just text.") == 0);
    CHECK(strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop") == 0);
    json_decref(r);
    fake_free(j);
}

TEST(chat_stream_has_tool_call_deltas) {
    ob_server srv;
    memset(&srv, 0, sizeof srv);
    snprintf(srv.model_id, sizeof srv.model_id, "m");
    ob_srv_job *j = fake_job(&srv, TWO_CALLS, true);
    ob_buf out = {0};
    bool ended = false;
    CHECK_EQ_INT(ob_srv_job_stream(j, &out, &ended), 0);
    CHECK(ended);
    /* rebuild what a client accumulates from the deltas */
    char content[256] = "", names[2][64] = {"", ""}, args[2][256] = {"", ""}, ids[2][64] = {"", ""}, finish[32] = "";
    int n_events = 0;
    bool done = false;
    for (char *line = strtok(out.data, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: ", 6) != 0) continue;
        if (!strcmp(line + 6, "[DONE]")) {
            done = true;
            continue;
        }
        json_t *ev = json_loads(line + 6, 0, NULL);
        CHECK(ev != NULL);
        n_events++;
        json_t *ch = json_array_get(json_object_get(ev, "choices"), 0), *d = json_object_get(ch, "delta");
        if (json_is_string(json_object_get(ch, "finish_reason")))
            snprintf(finish, sizeof finish, "%s", json_string_value(json_object_get(ch, "finish_reason")));
        if (json_is_string(json_object_get(d, "content"))) strcat(content, json_string_value(json_object_get(d, "content")));
        size_t i;
        json_t *tc;
        json_array_foreach(json_object_get(d, "tool_calls"), i, tc) {
            int k = (int)json_integer_value(json_object_get(tc, "index"));
            CHECK(k == 0 || k == 1);
            if (k < 0 || k > 1) continue;
            json_t *f = json_object_get(tc, "function");
            if (json_is_string(json_object_get(tc, "id"))) {
                CHECK(ids[k][0] == 0); /* the id comes once, with the name */
                snprintf(ids[k], sizeof ids[k], "%s", json_string_value(json_object_get(tc, "id")));
                CHECK(strcmp(json_string_value(json_object_get(tc, "type")), "function") == 0);
                snprintf(names[k], sizeof names[k], "%s", json_string_value(json_object_get(f, "name")));
            }
            if (json_is_string(json_object_get(f, "arguments"))) strcat(args[k], json_string_value(json_object_get(f, "arguments")));
        }
        json_decref(ev);
    }
    CHECK(done);
    CHECK(n_events >= 6); /* role, content, 2 x (open, arguments), final */
    CHECK(strcmp(content, "I will look.") == 0);
    CHECK(strcmp(names[0], "get_weather") == 0 && strcmp(names[1], "get_time") == 0);
    CHECK(strcmp(ids[0], "call_0") == 0 && strcmp(ids[1], "call_1") == 0);
    CHECK(same_json(args[0], "{\"city\": \"Paris\"}") && same_json(args[1], "{}"));
    CHECK(strcmp(finish, "tool_calls") == 0);
    ob_buf_free(&out);
    fake_free(j);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
