/*
 * test_cli.c - the `1bit` binary end to end: exit codes, messages and output
 * of info, dump, version, serve and bad invocations.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "core/mem.h"
#include "core/status.h"
#include "gguf/gguf.h"
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

int main(int argc, char **argv) { return test_main(argc, argv); }
