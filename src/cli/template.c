/*
 * template.c - `1bit template`: render a conversation with a chat template
 * and print exactly the text the model would be given.
 *
 *   1bit template -m model.gguf < conversation.json
 *   1bit template --file tmpl.jinja --now 2026-01-15 < conversation.json
 *
 * The conversation is one JSON object; every key becomes a template
 * variable, as transformers' apply_chat_template passes extra keyword
 * arguments ({"messages": [...], "tools": [...], "add_generation_prompt":
 * true, "enable_thinking": false, ...}). tools, documents and
 * add_generation_prompt default to null/null/false, and bos_token /
 * eos_token to the model's token text. This is the tool for debugging a
 * template, and the one the conformance tests drive.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../chat/chat.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../gguf/gguf.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: 1bit template (-m FILE.gguf | --file T.jinja | --chatml) [options] < conversation.json\n"
            "\n"
            "Renders a conversation with a chat template and prints the text exactly (no newline added).\n"
            "The input is a JSON object; every key is a template variable:\n"
            "  {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, \"enable_thinking\": false}\n"
            "tools and documents default to null, add_generation_prompt to false.\n"
            "\n"
            "  -m, --model FILE   the GGUF's tokenizer.chat_template (ChatML if it has none),\n"
            "                     and its BOS/EOS token text as bos_token/eos_token\n"
            "  --file FILE        a Jinja template file (with -m, the model still gives BOS/EOS)\n"
            "  --chatml           the built-in ChatML template\n"
            "  -i, --input FILE   read the conversation from FILE instead of stdin\n"
            "  --now DATE         the time strftime_now() sees: YYYY-MM-DD[THH:MM[:SS]]\n"
            "  --bos TEXT, --eos TEXT   bos_token / eos_token when the input does not set them\n"
            "  --check            only parse the template; report errors\n");
}

static int read_file(const char *path, char **out, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return ob_err(OB_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = ob_malloc(cap + 1);
    int rc = buf ? 0 : ob_err(OB_ERR_OOM, "out of memory");
    while (rc == 0) {
        if (n == cap) {
            char *b = ob_realloc(buf, cap * 2 + 1);
            if (!b) {
                rc = ob_err(OB_ERR_OOM, "out of memory");
                break;
            }
            buf = b;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    if (rc == 0 && ferror(f)) rc = ob_err(OB_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (f != stdin) fclose(f);
    if (rc < 0) {
        ob_free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* Text of a special token named by tokenizer.ggml.<which>_token_id, or NULL. */
static const char *token_text(const ob_gguf *g, const char *id_key) {
    uint32_t id;
    const ob_gguf_array *toks;
    if (ob_gguf_get_u32(g, id_key, &id) < 0 || ob_gguf_get_arr(g, "tokenizer.ggml.tokens", OB_GGUF_STRING, &toks) < 0 ||
        id >= toks->n) {
        ob_err_clear();
        return NULL;
    }
    return ((const ob_gguf_str *)toks->data)[id].s;
}

int ob_cmd_template(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *input = "-", *now_s = NULL, *bos = NULL, *eos = NULL;
    bool chatml = false, check = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) {
            model = argv[++i];
        } else if (!strcmp(a, "--file") && has_val) {
            file = argv[++i];
        } else if ((!strcmp(a, "-i") || !strcmp(a, "--input")) && has_val) {
            input = argv[++i];
        } else if (!strcmp(a, "--now") && has_val) {
            now_s = argv[++i];
        } else if (!strcmp(a, "--bos") && has_val) {
            bos = argv[++i];
        } else if (!strcmp(a, "--eos") && has_val) {
            eos = argv[++i];
        } else if (!strcmp(a, "--chatml")) {
            chatml = true;
        } else if (!strcmp(a, "--check")) {
            check = true;
        } else {
            fprintf(stderr, "1bit template: unknown or incomplete option '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model && !file && !chatml) {
        usage(stderr);
        return 2;
    }
    struct tm now;
    if (now_s) {
        int rc = ob_chat_parse_time(now_s, &now);
        if (rc < 0) return ob_cli_fail(rc, "--now");
    }

    int status = 1;
    ob_gguf *g = NULL;
    char *tsrc = NULL, *in = NULL, *text = NULL;
    size_t tlen = 0, inlen = 0, textlen = 0;
    ob_chat_template *tmpl = NULL;
    json_t *req = NULL, *ctx = NULL;
    const char *src = NULL;
    int rc;

    if (model) {
        rc = ob_gguf_open(model, &g);
        if (rc < 0) {
            ob_cli_fail(rc, "%s", model);
            goto done;
        }
        if (!bos) bos = token_text(g, "tokenizer.ggml.bos_token_id");
        if (!eos) eos = token_text(g, "tokenizer.ggml.eos_token_id");
    }
    if (file) {
        rc = read_file(file, &tsrc, &tlen);
        if (rc < 0) {
            ob_cli_fail(rc, "template");
            goto done;
        }
        src = tsrc;
    } else if (model && !chatml) {
        if (ob_gguf_get_str(g, "tokenizer.chat_template", &src) < 0) {
            ob_err_clear();
            fprintf(stderr, "1bit template: %s has no tokenizer.chat_template; using ChatML\n", model);
            src = NULL;
        } else {
            const ob_gguf_value *v = ob_gguf_get(g, "tokenizer.chat_template");
            tlen = (size_t)v->v.str.len;
        }
    }
    if (!src) {
        src = ob_chat_template_chatml();
        tlen = strlen(src);
    }
    rc = ob_chat_template_parse(src, tlen, &tmpl);
    if (rc < 0) {
        ob_cli_fail(rc, "template");
        goto done;
    }
    if (check) {
        status = 0;
        goto done;
    }

    rc = read_file(input, &in, &inlen);
    if (rc < 0) {
        ob_cli_fail(rc, "conversation");
        goto done;
    }
    json_error_t jerr;
    req = json_loadb(in, inlen, JSON_ALLOW_NUL, &jerr);
    if (!req) {
        fprintf(stderr, "1bit template: conversation JSON, line %d column %d: %s\n", jerr.line, jerr.column, jerr.text);
        goto done;
    }
    rc = ob_chat_context_build(req, bos, eos, &ctx);
    if (rc < 0) {
        ob_cli_fail(rc, "conversation");
        goto done;
    }
    ob_chat_render_opts opts = {0};
    if (now_s) opts.now = &now;
    rc = ob_chat_template_render(tmpl, ctx, &opts, &text, &textlen);
    if (rc < 0) {
        ob_cli_fail(rc, "render");
        goto done;
    }
    if (fwrite(text, 1, textlen, stdout) != textlen || fflush(stdout) != 0) {
        fprintf(stderr, "1bit template: write error: %s\n", strerror(errno));
        goto done;
    }
    status = 0;
done:
    ob_free(text);
    json_decref(ctx);
    json_decref(req);
    ob_free(in);
    ob_chat_template_free(tmpl);
    ob_free(tsrc);
    ob_gguf_free(g);
    return status;
}
