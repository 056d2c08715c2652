/*
 * test_cli.c - the `1bit` binary end to end: exit codes, messages and output
 * of info, dump, version, serve and bad invocations.
 */
#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/mem.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "onebit.h"
#include "test.h"

#ifndef OB_CLI_PATH
#error "OB_CLI_PATH must name the 1bit binary"
#endif

/* Run `1bit ARGS`, capture stdout+stderr (up to cap bytes) and the exit code. */
static int run_cli(const char *args, char *out, size_t cap, size_t *len) {
    char cmd[4096];
    /* stderr joins stdout unless the caller redirected it */
    snprintf(cmd, sizeof cmd, "'%s' %s%s", OB_CLI_PATH, args, strstr(args, "2>") ? "" : " 2>&1");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0, k;
    while (n < cap - 1 && (k = fread(out + n, 1, cap - 1 - n, p)) > 0) n += k;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
    out[n] = '\0';
    if (len) *len = n;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char g_out[1 << 20];

TEST(usage_and_unknown_command) {
    CHECK_EQ_INT(run_cli("", g_out, sizeof g_out, NULL), 2);
    CHECK(strstr(g_out, "usage: 1bit") != NULL);
    CHECK_EQ_INT(run_cli("--help", g_out, sizeof g_out, NULL), 0);
    CHECK(strstr(g_out, "info") && strstr(g_out, "dump"));
    CHECK_EQ_INT(run_cli("frobnicate", g_out, sizeof g_out, NULL), 2);
    CHECK(strstr(g_out, "unknown command 'frobnicate'") != NULL);
    CHECK_EQ_INT(run_cli("version", g_out, sizeof g_out, NULL), 0);
    CHECK(strstr(g_out, "cpu tier:") != NULL);
    CHECK_EQ_INT(run_cli("info --bogus x", g_out, sizeof g_out, NULL), 1);
    CHECK(strstr(g_out, "unknown option '--bogus'") != NULL);
}

TEST(serve_refuses_a_missing_model) {
    CHECK_EQ_INT(run_cli("serve -m /nonexistent/x.gguf --port 0", g_out, sizeof g_out, NULL), 1);
    CHECK(strstr(g_out, "/nonexistent/x.gguf") != NULL);
}

TEST(info_on_bad_files) {
    char path[] = "/tmp/ob_cli_bad_XXXXXX";
    int fd = mkstemp(path);
    CHECK(write(fd, "GGUF\x03\0\0\0garbage", 15) == 15);
    close(fd);
    char args[512];
    snprintf(args, sizeof args, "info %s", path);
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 1);
    CHECK(strstr(g_out, path) != NULL);        /* names the file */
    CHECK(strstr(g_out, "offset") != NULL);    /* and where it broke */
    unlink(path);
    CHECK_EQ_INT(run_cli("info /nonexistent/m.gguf", g_out, sizeof g_out, NULL), 1);
    CHECK(strstr(g_out, "No such file") != NULL);
}

/* A small file of our own with a quantized tensor, for dump. */
TEST(dump_f32_and_q8_0) {
    char path[] = "/tmp/ob_cli_dump_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ob_gguf_writer *w;
    CHECK_OK(ob_gguf_writer_create(&w));
    float v[64];
    for (int i = 0; i < 64; i++) v[i] = (float)i / 8.0f - 4.0f;
    int64_t ne[2] = {32, 2};
    CHECK_OK(ob_gguf_writer_add_tensor(w, "x.weight", OB_TYPE_F32, 2, ne, v));
    const ob_type_traits *q8 = ob_type_get(OB_TYPE_Q8_0);
    uint8_t qb[68];
    int have_q8 = q8 && q8->from_float_ref && q8->to_float;
    if (have_q8) {
        q8->from_float_ref(v, qb, 64);
        CHECK_OK(ob_gguf_writer_add_tensor(w, "q.weight", OB_TYPE_Q8_0, 2, ne, qb));
    }
    CHECK_OK(ob_gguf_writer_write_file(w, path));
    ob_gguf_writer_free(w);

    char args[512];
    size_t len;
    snprintf(args, sizeof args, "dump %s x.weight", path);
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, &len), 0);
    CHECK_EQ_INT(len, sizeof v);
    CHECK(len == sizeof v && memcmp(g_out, v, sizeof v) == 0);
    snprintf(args, sizeof args, "dump %s x.weight --text", path);
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, &len), 0);
    CHECK(strncmp(g_out, "-4\n-3.875\n", 10) == 0);
    if (have_q8) {
        float ref[64];
        q8->to_float(qb, ref, 64);
        snprintf(args, sizeof args, "dump %s q.weight", path);
        CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, &len), 0);
        CHECK(len == sizeof ref && memcmp(g_out, ref, sizeof ref) == 0);
    }
    snprintf(args, sizeof args, "dump %s nope.weight", path);
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 1);
    CHECK(strstr(g_out, "no tensor named 'nope.weight'") != NULL);
    unlink(path);
}

TEST(info_reads_every_shared_model) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "find '%s' -name '*.gguf' | sort", dir);
    FILE *p = popen(cmd, "r");
    char line[4096];
    int n = 0;
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        char args[4200];
        snprintf(args, sizeof args, "info '%s'", line);
        int rc = run_cli(args, g_out, sizeof g_out, NULL);
        CHECK_MSG(rc == 0, "%s: %s", line, g_out);
        CHECK(strstr(g_out, "tensors (") != NULL);
        snprintf(args, sizeof args, "info --json '%s'", line);
        CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
        CHECK(strstr(g_out, "\"gguf_version\"") != NULL);
        n++;
    }
    if (p) pclose(p);
    CHECK(n >= 10);
    /* The summary of the real model is right. */
    snprintf(cmd, sizeof cmd, "info '%s'", test_path(dir, "stories260K/stories260K.gguf"));
    CHECK_EQ_INT(run_cli(cmd, g_out, sizeof g_out, NULL), 0);
    CHECK(strstr(g_out, "architecture:  llama") != NULL);
    CHECK(strstr(g_out, "head_count_kv") != NULL);
    CHECK(strstr(g_out, "tokenizer:     llama, 512 tokens") != NULL);
    CHECK(strstr(g_out, "bos          1 \"<s>\"") != NULL);
    CHECK(strstr(g_out, "tensors (48)") != NULL);
    CHECK(strstr(g_out, "token_embd.weight") != NULL);
}

TEST(run_tells_the_story) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    /* greedy, 60 tokens: the llama2.c reference text (stories260K.reference.json) */
    char args[4200];
    snprintf(args, sizeof args, "run -m '%s' -p 'Once upon a time' -n 60 --temp 0 -t 2 2>/dev/null",
             test_path(dir, "stories260K/stories260K.gguf"));
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
    const char *want = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
                       "One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily\n";
    CHECK_EQ_STR(g_out, want);
    /* the speed report goes to stderr */
    snprintf(args, sizeof args, "run -m '%s' -p 'Once' -n 4 --temp 0 2>&1 >/dev/null",
             test_path(dir, "stories260K/stories260K.gguf"));
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
    CHECK(strstr(g_out, "decode: 4 tokens") != NULL);
    CHECK(strstr(g_out, "tok/s") != NULL);
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(text, 1, strlen(text), f) == strlen(text);
    return fclose(f) == 0 && ok;
}

/* `1bit chat`: each reply (greedy) equals a fresh `1bit run` of the conversation rendered by
 * `1bit template` - so the KV cache kept between turns and the re-rendered history agree;
 * /reset starts over (the first reply again); a too-long turn is an error for that turn only. */
TEST(chat_turns_equal_fresh_runs) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    const char *model = test_path(dir, "stories260K/stories260K.gguf");
    char in[64], conv[64], prompt[64], args[3800];
    snprintf(in, sizeof in, "/tmp/ob_cli_chat_in_%d", (int)getpid());
    snprintf(conv, sizeof conv, "/tmp/ob_cli_chat_conv_%d.json", (int)getpid());
    snprintf(prompt, sizeof prompt, "/tmp/ob_cli_chat_prompt_%d", (int)getpid());
    /* the output is each reply then a blank line; a reply may hold blank lines itself, so the
     * replies are told apart by running one, two and four turns */
    static const char *const inputs[] = {"Once upon a time\n", "Once upon a time\nThe dog ran to the\\\npark\n",
                                         "Once upon a time\nThe dog ran to the\\\npark\n/reset\nOnce upon a time\n"};
    static char outs[3][4096];
    for (int i = 0; i < 3; i++) {
        CHECK(write_text(in, inputs[i]));
        snprintf(args, sizeof args, "chat -m '%s' --temp 0 -n 16 -t 1 < %s 2>/dev/null", model, in);
        CHECK_EQ_INT(run_cli(args, outs[i], sizeof outs[i], NULL), 0);
    }
    char r[2][512];
    const size_t l0 = strlen(outs[0]), l1 = strlen(outs[1]);
    CHECK(l0 > 2 && l1 > l0 + 2 && !strncmp(outs[1], outs[0], l0) && !strcmp(outs[0] + l0 - 2, "\n\n"));
    if (l0 <= 2 || l1 <= l0 + 2) return;
    snprintf(r[0], sizeof r[0], "%.*s", (int)(l0 - 2), outs[0]);
    snprintf(r[1], sizeof r[1], "%.*s", (int)(l1 - l0 - 2), outs[1] + l0);
    /* after /reset: the first reply again */
    char again[8192];
    snprintf(again, sizeof again, "%s%s", outs[1], outs[0]);
    CHECK_EQ_STR(outs[2], again);
    /* turn 2 from scratch: render [user, assistant, user] and run it */
    json_t *c = json_pack("{s:[{s:s,s:s},{s:s,s:s},{s:s,s:s}], s:b}", "messages", "role", "user", "content",
                          "Once upon a time", "role", "assistant", "content", r[0], "role", "user", "content",
                          "The dog ran to the\npark", "add_generation_prompt", 1);
    CHECK(c && json_dump_file(c, conv, JSON_COMPACT) == 0);
    json_decref(c);
    snprintf(args, sizeof args, "template -m '%s' -i %s > %s 2>/dev/null", model, conv, prompt);
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
    static char text[1 << 16];
    FILE *f = fopen(prompt, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = '\0';
    CHECK(n > 0);
    snprintf(args, sizeof args, "run -m '%s' -f %s --special --temp 0 -n 16 -t 1 2>/dev/null", model, prompt);
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
    CHECK_MSG(strncmp(g_out, text, n) == 0, "run does not echo the rendered prompt");
    char want[600];
    snprintf(want, sizeof want, "%s\n", r[1]);
    CHECK_EQ_STR(g_out + n, want);
    /* a turn longer than the context: an error for that turn; the next one is answered */
    static char big[20000];
    size_t k = 0;
    for (int i = 0; i < 600; i++) k += (size_t)snprintf(big + k, sizeof big - k, "dog ");
    snprintf(big + k, sizeof big - k, "\nOnce upon a time\n");
    CHECK(write_text(in, big));
    snprintf(args, sizeof args, "chat -m '%s' --temp 0 -n 16 -c 256 -t 1 < %s", model, in);
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
    CHECK_MSG(strstr(g_out, "the context holds 256") != NULL, "no context message in: %.300s", g_out);
    CHECK_MSG(strstr(g_out, r[0]) != NULL, "the turn after the error was not answered: %.300s", g_out);
    unlink(in);
    unlink(conv);
    unlink(prompt);
}

/* `1bit bench -np N`: N sequences side by side; the JSON row says so and counts every
 * sequence's tokens; a bad count is refused. */
TEST(bench_parallel_sequences) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    char args[4200];
    snprintf(args, sizeof args, "bench -m '%s' -p 0 -n 8 -d 4 -np 1,3 -r 1 -t 2 -o jsonl 2>/dev/null",
             test_path(dir, "stories260K/stories260K.gguf"));
    CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
    const char *one = strstr(g_out, "\"n_parallel\": 1"), *three = strstr(g_out, "\"n_parallel\": 3");
    CHECK_MSG(one && three, "bench -np 1,3: %s", g_out);
    CHECK(strstr(g_out, "\"n_gen\": 8") != NULL);
    snprintf(args, sizeof args, "bench -m '%s' -np 0 -r 1", test_path(dir, "stories260K/stories260K.gguf"));
    CHECK(run_cli(args, g_out, sizeof g_out, NULL) != 0);
    CHECK(strstr(g_out, "-np") != NULL);
}

/* llama.cpp's use_more_bits: the layers its q4_K_M gives q6_K ffn_down(_exps) and attn_v. */
static int more_bits_layer(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* Greedy continuation of a prompt on a fresh context: n_gen tokens into out.
 * Every logit must be finite and the logits of a step not all equal. */
static void moe_greedy(ob_model *m, const ob_token *prompt, int n_prompt, ob_token *out, int n_gen) {
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    ob_context *c = NULL;
    CHECK_OK(ob_context_create(m, &cp, &c));
    if (!c) return;
    const int32_t nv = ob_model_n_vocab(m);
    ob_token toks[64];
    int32_t pos[64], seq[64] = {0};
    int8_t want[64] = {0};
    for (int i = 0; i < n_prompt; i++) toks[i] = prompt[i], pos[i] = i;
    int n = n_prompt, at = 0;
    for (int step = 0; step < n_gen; step++) {
        memset(want, 0, sizeof want);
        want[n - 1] = 1; /* the last token's logits */
        ob_batch b = {n, toks, pos, seq, want};
        CHECK_OK(ob_decode(c, &b));
        const float *lg = ob_get_logits(c, n - 1);
        CHECK(lg != NULL);
        if (!lg) break;
        int finite = 1, best = 0;
        float lo = lg[0], hi = lg[0];
        for (int32_t j = 0; j < nv; j++) {
            finite &= isfinite(lg[j]) != 0;
            lo = lg[j] < lo ? lg[j] : lo;
            if (lg[j] > hi) hi = lg[j], best = j;
        }
        CHECK_MSG(finite, "step %d: a logit is not finite", step);
        CHECK_MSG(hi > lo, "step %d: every logit is %g", step, (double)lo);
        out[step] = best;
        at += n;
        toks[0] = best, pos[0] = at, n = 1;
    }
    ob_context_free(c);
}

/* `1bit bench --make-model test-moe`: llama.cpp's qwen3moe layout (keys,
 * stacked expert tensors, F32 routers), the q4_K_M mix on the expert
 * tensors, and a file our loader takes and decodes. */
TEST(make_model_moe) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent (the GPT-2 vocabulary)");
        return;
    }
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s", test_path(dir, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"));
    const char *types[] = {"q4_K_M", "q8_0"};
    for (int ti = 0; ti < 2; ti++) {
        const int q4km = ti == 0;
        char path[] = "/tmp/ob_cli_moe_XXXXXX";
        int fd = mkstemp(path);
        close(fd);
        char args[8400];
        snprintf(args, sizeof args, "bench --make-model test-moe --type %s -o %s --vocab '%s'", types[ti], path, vocab);
        CHECK_EQ_INT(run_cli(args, g_out, sizeof g_out, NULL), 0);
        CHECK(strstr(g_out, "wrote") != NULL);

        ob_gguf *g = NULL;
        CHECK_OK(ob_gguf_open(path, &g));
        if (!g) {
            unlink(path);
            continue;
        }
        const char *arch = NULL;
        uint32_t E = 0, L = 0, NE = 0, K = 0, FE = 0, V = 0;
        CHECK_OK(ob_gguf_get_str(g, "general.architecture", &arch));
        CHECK(arch && strcmp(arch, "qwen3moe") == 0);
        CHECK_OK(ob_gguf_get_u32(g, "qwen3moe.embedding_length", &E));
        CHECK_OK(ob_gguf_get_u32(g, "qwen3moe.block_count", &L));
        CHECK_OK(ob_gguf_get_u32(g, "qwen3moe.expert_count", &NE));
        CHECK_OK(ob_gguf_get_u32(g, "qwen3moe.expert_used_count", &K));
        CHECK_OK(ob_gguf_get_u32(g, "qwen3moe.expert_feed_forward_length", &FE));
        CHECK_OK(ob_gguf_get_u32(g, "qwen3moe.vocab_size", &V));
        CHECK(NE > 1 && K > 0 && K < NE && FE > 0 && L >= 2);
        const ob_type base = q4km ? OB_TYPE_Q4_K : OB_TYPE_Q8_0;
        int n_q6 = 0, n_base_down = 0;
        for (uint32_t il = 0; il < L; il++) {
            char nm[96];
            const ob_gguf_tensor *t;
            snprintf(nm, sizeof nm, "blk.%u.ffn_gate_inp.weight", il);
            CHECK_MSG((t = ob_gguf_find_tensor(g, nm)) != NULL, "%s", nm);
            if (t) CHECK(t->type == OB_TYPE_F32 && t->n_dims == 2 && t->ne[0] == E && t->ne[1] == NE);
            const char *gu[] = {"ffn_gate_exps", "ffn_up_exps"};
            for (int j = 0; j < 2; j++) {
                snprintf(nm, sizeof nm, "blk.%u.%s.weight", il, gu[j]);
                CHECK_MSG((t = ob_gguf_find_tensor(g, nm)) != NULL, "%s", nm);
                if (t)
                    CHECK_MSG(t->type == base && t->n_dims == 3 && t->ne[0] == E && t->ne[1] == FE && t->ne[2] == NE,
                              "%s: type %d, [%lld, %lld, %lld]", nm, (int)t->type, (long long)t->ne[0],
                              (long long)t->ne[1], (long long)t->ne[2]);
            }
            const int six = q4km && more_bits_layer((int)il, (int)L);
            snprintf(nm, sizeof nm, "blk.%u.ffn_down_exps.weight", il);
            CHECK_MSG((t = ob_gguf_find_tensor(g, nm)) != NULL, "%s", nm);
            if (t) {
                CHECK_MSG(t->type == (six ? OB_TYPE_Q6_K : base), "%s: type %d", nm, (int)t->type);
                CHECK(t->n_dims == 3 && t->ne[0] == FE && t->ne[1] == E && t->ne[2] == NE);
                n_q6 += t->type == OB_TYPE_Q6_K;
                n_base_down += t->type == base;
            }
            snprintf(nm, sizeof nm, "blk.%u.attn_v.weight", il);
            CHECK((t = ob_gguf_find_tensor(g, nm)) != NULL && t->type == (six ? OB_TYPE_Q6_K : base));
            snprintf(nm, sizeof nm, "blk.%u.attn_q_norm.weight", il);
            CHECK((t = ob_gguf_find_tensor(g, nm)) != NULL && t->type == OB_TYPE_F32);
            snprintf(nm, sizeof nm, "blk.%u.ffn_gate.weight", il);
            CHECK(ob_gguf_find_tensor(g, nm) == NULL); /* no dense FFN */
        }
        /* the mix is exercised: both kinds of expert down-projection occur */
        if (q4km) CHECK(n_q6 > 0 && n_base_down > 0);
        const ob_gguf_tensor *out = ob_gguf_find_tensor(g, "output.weight");
        CHECK(out != NULL && out->type == (q4km ? OB_TYPE_Q6_K : OB_TYPE_Q8_0) && out->ne[1] == V);
        ob_gguf_free(g);

        ob_model_params mp = ob_model_default_params();
        mp.n_threads = 2;
        ob_model *m = NULL;
        CHECK_OK(ob_model_load(path, &mp, &m));
        if (m) {
            CHECK_EQ_STR(ob_model_arch(m), "qwen3moe");
            CHECK_EQ_INT(ob_model_n_vocab(m), V);
            ob_token prompt[16], gen1[4], gen2[4];
            int32_t np = 0;
            CHECK_OK(ob_tokenize(m, "Once upon a time", 16, false, false, prompt, 16, &np));
            CHECK(np > 1);
            if (np > 1) {
                moe_greedy(m, prompt, np, gen1, 4);
                moe_greedy(m, prompt, np, gen2, 4); /* the routing is deterministic */
                CHECK(memcmp(gen1, gen2, sizeof gen1) == 0);
            }
            ob_model_free(m);
        }
        unlink(path);
    }
}

int main(int argc, char **argv) { return test_main(argc, argv); }
