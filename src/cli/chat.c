/*
 * chat.c - `1bit chat`: a conversation on the terminal with the model's own
 * chat template.
 *
 *   1bit chat -m model.gguf [--system "You are ..."] [--temp 0.7 ...]
 *
 * Each line read from stdin is a user turn (a line ending in '\' continues
 * on the next one); the reply streams to stdout, then a blank line. Commands:
 * /exit (or end of input), /reset (forget the conversation), /help.
 *
 * Every turn renders the whole conversation with the template (ChatML when
 * the model has none), tokenizes it as the server does (the model's BOS,
 * special tokens parsed, never two BOS), and decodes only what differs from
 * the tokens already in the KV cache: the earlier turns are not recomputed,
 * except where the template's text of a reply tokenizes differently from
 * the tokens that were sampled. So a reply equals what a fresh `1bit run` of
 * the rendered conversation would give with the same sampler state
 * (tests/test_cli.c checks this with greedy decoding).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"
#include "cli.h"
#include "onebit.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(void) {
    printf("usage: 1bit chat -m MODEL [options]     (a conversation on stdin/stdout)\n"
           "  --system TEXT        a system message first\n"
           "  --chat-template-file F   a Jinja template instead of the model's\n"
           "  -n N                 most tokens a reply (default -1: until the end of the turn)\n"
           "  -c N                 context size (default: the model's, at most 4096)\n"
           "  -t N                 threads (default: all cores)\n"
           "  --temp T, --top-k K, --top-p P, --min-p P, --repeat-penalty R, -s SEED   sampling, as `1bit run`\n"
           "  --kv-type T          f16 (default), f32 or q8_0\n"
           "  --device D, -ngl N   where the model runs, as `1bit run`\n"
           "  -v                   prompt and decode speed after each reply (stderr)\n"
           "commands: /exit (or end of input), /reset (forget the conversation), /help\n");
}

typedef struct chat {
    ob_model *m;
    ob_context *ctx;
    ob_sampler *smp;
    const char *tmpl;     /* NULL: the model's */
    int32_t n_ctx, n_batch, n_predict;
    ob_token *hist;       /* tokens in sequence 0's KV cache */
    int32_t n_hist;
    json_t *msgs;
    bool verbose;
    int32_t last;         /* batch index of the last token fed (its logits) */
} chat;

/* The conversation rendered and tokenized (allocated into *ids). */
static int render(chat *c, ob_token **ids, int32_t *n) {
    *ids = NULL;
    *n = 0;
    json_t *root = json_pack("{s:O, s:b}", "messages", c->msgs, "add_generation_prompt", 1);
    char *js = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!js) return ob_err(OB_ERR_OOM, "chat: conversation");
    char *text = NULL;
    size_t len = 0;
    int rc = ob_chat_render(c->m, c->tmpl, js, strlen(js), &text, &len);
    free(js);
    if (rc < 0) return rc;
    int32_t need = 0;
    rc = ob_tokenize(c->m, text, len, true, true, NULL, 0, &need);
    if (rc == OB_ERR_RANGE || rc == 0) {
        ob_err_clear();
        *ids = ob_malloc((size_t)(need > 0 ? need : 1) * sizeof(ob_token));
        rc = *ids ? ob_tokenize(c->m, text, len, true, true, *ids, need, n) : ob_err(OB_ERR_OOM, "chat: tokens");
    }
    ob_free_string(text);
    if (rc < 0) return rc;
    /* a template that writes the BOS text itself: keep one */
    ob_token bos = ob_token_bos(c->m);
    if (*n >= 2 && bos >= 0 && (*ids)[0] == bos && (*ids)[1] == bos) {
        memmove(*ids, *ids + 1, (size_t)(*n - 1) * sizeof(ob_token));
        (*n)--;
    }
    return 0;
}

/* Decode ids[from..n) after the cache's first `from` tokens; logits of the last. */
static int feed(chat *c, const ob_token *ids, int32_t from, int32_t n) {
    int32_t pos[512], seq[512];
    int8_t want[512];
    const int32_t step = c->n_batch < 512 ? c->n_batch : 512;
    for (int32_t i = from; i < n; i += step) {
        const int32_t nb = n - i < step ? n - i : step;
        for (int32_t j = 0; j < nb; j++) pos[j] = i + j, seq[j] = 0, want[j] = i + j == n - 1;
        ob_batch b = {nb, ids + i, pos, seq, want};
        OB_TRY(ob_decode(c->ctx, &b));
        c->last = nb - 1;
    }
    if (ids != c->hist) memcpy(c->hist + from, ids + from, (size_t)(n - from) * sizeof(ob_token));
    c->n_hist = n;
    return 0;
}

/* One turn: the user's text in, the reply streamed out and kept in the conversation. */
static int turn(chat *c, const char *user) {
    json_array_append_new(c->msgs, json_pack("{s:s, s:s}", "role", "user", "content", user));
    ob_token *ids = NULL;
    int32_t n = 0;
    OB_TRY(render(c, &ids, &n));
    if (n >= c->n_ctx) {
        ob_free(ids);
        json_array_remove(c->msgs, json_array_size(c->msgs) - 1);
        return ob_err(OB_ERR_RANGE, "the conversation is %d tokens; the context holds %d (-c): /reset to start over",
                      n, c->n_ctx);
    }
    /* keep the cache's common prefix; at least the last token is decoded again for its logits */
    int32_t k = 0;
    while (k < c->n_hist && k < n - 1 && c->hist[k] == ids[k]) k++;
    int rc = ob_seq_remove(c->ctx, 0, k);
    const double t0 = now_s();
    if (rc == 0) {
        c->n_hist = k;
        rc = feed(c, ids, k, n);
    }
    const int32_t n_new = n - k;
    for (int32_t i = 0; rc == 0 && i < n; i++) ob_sampler_accept(c->smp, ids[i]);
    ob_free(ids);
    if (rc < 0) {
        json_array_remove(c->msgs, json_array_size(c->msgs) - 1);
        return rc;
    }
    const double t_prompt = now_s() - t0, t1 = now_s();

    size_t cap = 256, len = 0;
    char *reply = ob_malloc(cap);
    char pending[64];
    size_t n_pending = 0;
    int32_t n_gen = 0;
    const float *logits = ob_get_logits(c->ctx, c->last);
    while (reply && rc == 0 && (c->n_predict < 0 || n_gen < c->n_predict) && c->n_hist < c->n_ctx) {
        ob_token t = ob_sampler_sample(c->smp, logits);
        ob_sampler_accept(c->smp, t);
        n_gen++;
        if (ob_token_is_eog(c->m, t)) break;
        char piece[256];
        int32_t np = 0;
        if (ob_token_to_piece(c->m, t, piece, sizeof piece, false, &np) == 0 && np > 0) {
            if (len + (size_t)np + 1 > cap) {
                char *r2 = ob_realloc(reply, 2 * (len + (size_t)np + 1));
                if (!r2) break;
                reply = r2, cap = 2 * (len + (size_t)np + 1);
            }
            memcpy(reply + len, piece, (size_t)np);
            len += (size_t)np;
            for (int32_t j = 0; j < np; j++) {
                if (n_pending == sizeof pending) fwrite(pending, 1, n_pending, stdout), n_pending = 0;
                pending[n_pending++] = piece[j];
            }
            const size_t ok = ob_utf8_complete_prefix(pending, n_pending);
            fwrite(pending, 1, ok, stdout);
            memmove(pending, pending + ok, n_pending - ok);
            n_pending -= ok;
            fflush(stdout);
        }
        if (c->n_hist + 1 >= c->n_ctx) break;
        c->hist[c->n_hist] = t;
        rc = feed(c, c->hist, c->n_hist, c->n_hist + 1);
        logits = ob_get_logits(c->ctx, c->last);
    }
    fwrite(pending, 1, n_pending, stdout);
    fputs("\n\n", stdout);
    fflush(stdout);
    if (!reply) return ob_err(OB_ERR_OOM, "chat: reply");
    reply[len] = '\0';
    json_array_append_new(c->msgs, json_pack("{s:s, s:s%}", "role", "assistant", "content", reply, len));
    ob_free(reply);
    if (c->verbose) {
        const double t_gen = now_s() - t1;
        fprintf(stderr, "[prompt: %d new tokens of %d in %.3f s; reply: %d tokens in %.3f s, %.1f tok/s]\n", n_new,
                n, t_prompt, n_gen, t_gen, t_gen > 0 ? n_gen / t_gen : 0.0);
    }
    return rc;
}

/* A line of input, a trailing '\' joining the next; NULL at the end. */
static char *read_turn(bool tty) {
    size_t cap = 256, len = 0;
    char *buf = ob_malloc(cap);
    if (!buf) return NULL;
    if (tty) fputs("> ", stdout), fflush(stdout);
    int ch;
    bool any = false;
    while ((ch = getchar()) != EOF) {
        any = true;
        if (ch == '\n') {
            if (len > 0 && buf[len - 1] == '\\') {
                buf[len - 1] = '\n';
                if (tty) fputs(". ", stdout), fflush(stdout);
                continue;
            }
            break;
        }
        if (len + 2 > cap) {
            char *b2 = ob_realloc(buf, cap * 2);
            if (!b2) {
                ob_free(buf);
                return NULL;
            }
            buf = b2, cap *= 2;
        }
        buf[len++] = (char)ch;
    }
    if (!any) {
        ob_free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? ob_malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        ob_free(b);
        b = NULL;
    }
    if (b) b[n] = '\0';
    fclose(f);
    return b;
}

int ob_cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *device = "cpu", *system = NULL, *tmpl_file = NULL;
    int n_gpu_layers = 0, threads = 0, n_ctx = 0, n_predict = -1;
    bool verbose = false;
    ob_kv_type kv_type = OB_KV_F16;
    ob_sampler_params sp = ob_sampler_default_params();
    for (int i = 0; i < argc;) {
        const char *a = argv[i++];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
            continue;
        }
        const char *v = i < argc ? argv[i++] : NULL;
        if (!v) return ob_cli_fail(0, "chat: option '%s' needs a value (or is unknown; see --help)", a);
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--system") || !strcmp(a, "-sys")) system = v;
        else if (!strcmp(a, "--chat-template-file")) tmpl_file = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) n_predict = atoi(v);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = atoi(v);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--temp")) sp.temperature = (float)atof(v);
        else if (!strcmp(a, "--top-k")) sp.top_k = atoi(v);
        else if (!strcmp(a, "--top-p")) sp.top_p = (float)atof(v);
        else if (!strcmp(a, "--min-p")) sp.min_p = (float)atof(v);
        else if (!strcmp(a, "--repeat-penalty")) sp.repeat_penalty = (float)atof(v);
        else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) sp.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) n_gpu_layers = atoi(v);
        else if (!strcmp(a, "--kv-type")) {
            if (ob_cli_parse_kv_type(v, &kv_type) < 0) return ob_cli_fail(0, "chat: --kv-type must be f16, f32 or q8_0");
        } else return ob_cli_fail(0, "chat: unknown option '%s' (see --help)", a);
    }
    if (!model_path) return ob_cli_fail(0, "chat: no model (-m MODEL.gguf)");
    char model_file[4096];
    int rc = ob_model_resolve(model_path, model_file, sizeof model_file);
    if (rc < 0) return ob_cli_fail(rc, "chat");

    chat c;
    memset(&c, 0, sizeof c);
    c.verbose = verbose;
    c.n_predict = n_predict;
    int ret = 0;
    char *tmpl = NULL;
    if (tmpl_file && !(tmpl = slurp(tmpl_file))) return ob_cli_fail(0, "chat: cannot read '%s'", tmpl_file);
    c.tmpl = tmpl;
    ob_model_params mp = ob_model_default_params();
    mp.device = device;
    mp.n_gpu_layers = n_gpu_layers;
    if ((rc = ob_model_load(model_file, &mp, &c.m)) < 0) {
        ret = ob_cli_fail(rc, "chat");
        goto out;
    }
    if (ob_model_is_encoder(c.m)) {
        ret = ob_cli_fail(0, "chat: '%s' is an encoder (an embedding model): it cannot generate text", model_path);
        goto out;
    }
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = threads;
    cp.kv_type = kv_type;
    if ((rc = ob_context_create(c.m, &cp, &c.ctx)) < 0 || (rc = ob_sampler_create(&sp, ob_model_n_vocab(c.m), &c.smp)) < 0) {
        ret = ob_cli_fail(rc, "chat");
        goto out;
    }
    c.n_ctx = ob_context_get_params(c.ctx)->n_ctx;
    c.n_batch = ob_context_get_params(c.ctx)->n_batch;
    c.hist = ob_malloc((size_t)c.n_ctx * sizeof(ob_token));
    c.msgs = json_array();
    if (!c.hist || !c.msgs) {
        ret = ob_cli_fail(OB_ERR_OOM, "chat");
        goto out;
    }
    if (system) json_array_append_new(c.msgs, json_pack("{s:s, s:s}", "role", "system", "content", system));
    const bool tty = isatty(0) && isatty(1);
    if (tty) fprintf(stderr, "1bit chat: %s - /exit to quit, /reset to start over, a line ending in \\ continues\n",
                     ob_model_name(c.m));
    char *line;
    while ((line = read_turn(tty)) != NULL) {
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) {
            ob_free(line);
            break;
        }
        if (!strcmp(line, "/help")) {
            fputs("/exit: quit   /reset: forget the conversation   a line ending in \\ continues on the next\n", stdout);
        } else if (!strcmp(line, "/reset")) {
            while (json_array_size(c.msgs) > (system ? 1u : 0u)) json_array_remove(c.msgs, json_array_size(c.msgs) - 1);
            ob_sampler_reset(c.smp);
            if ((rc = ob_seq_remove(c.ctx, 0, 0)) < 0) {
                ret = ob_cli_fail(rc, "chat");
                ob_free(line);
                break;
            }
            c.n_hist = 0;
        } else if (*line) {
            rc = turn(&c, line);
            if (rc == OB_ERR_RANGE) {
                fprintf(stderr, "1bit chat: %s\n", ob_last_error());
            } else if (rc < 0) {
                ret = ob_cli_fail(rc, "chat");
                ob_free(line);
                break;
            }
        }
        ob_free(line);
    }
out:
    json_decref(c.msgs);
    ob_free(c.hist);
    ob_free(tmpl);
    ob_sampler_free(c.smp);
    ob_context_free(c.ctx);
    ob_model_free(c.m);
    return ret;
}
