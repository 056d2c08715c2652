/*
 * test_cuda_cpu.c - asking for the GPU where there is none. Runs in the
 * plain `make test` on machines without a GPU (CI): `1bit eval --device
 * cuda` must fail with exit code 1 and a message that says why CUDA is
 * unavailable (no plugin, no driver, no device), and the same binary must
 * still work with --device cpu and with --device auto (which falls back to
 * the CPU). On a machine where CUDA works the failure check is skipped.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/cuda_mkmodel.h"
#include "test.h"

#ifndef OB_CLI_PATH
#error "OB_CLI_PATH must name the 1bit binary"
#endif

static char g_out[1 << 16];

static int run_cli(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", OB_CLI_PATH, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0, k;
    while (n < sizeof g_out - 1 && (k = fread(g_out + n, 1, sizeof g_out - 1 - n, p)) > 0) n += k;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
    g_out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(eval_device_cuda_without_gpu) {
    char path[] = "/tmp/ob_cuda_cpu_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    mk_spec s;
    memset(&s, 0, sizeof s);
    s.name = "tiny";
    s.n_vocab = 300, s.n_embd = 64, s.n_ff = 128, s.n_layer = 1, s.n_head = 4, s.n_head_kv = 2, s.n_ctx = 64;
    s.wtype = s.embd_type = s.out_type = OB_TYPE_F32;
    s.seed = 7;
    CHECK_OK(mk_model_write(&s, path));
    char args[512];

    /* the CPU works, and auto falls back to it */
    snprintf(args, sizeof args, "eval -m %s --ids 1,5,9 --top 1 --device cpu", path);
    CHECK_EQ_INT(run_cli(args), 0);
    CHECK_MSG(strstr(g_out, "2 ") != NULL, "%s", g_out);
    snprintf(args, sizeof args, "eval -m %s --ids 1,5,9 --top 1 --device auto", path);
    CHECK_EQ_INT(run_cli(args), 0);

    snprintf(args, sizeof args, "eval -m %s --ids 1,5,9 --top 1 --device cuda", path);
    int rc = run_cli(args);
    if (rc == 0) {
        test_skip("a CUDA device is present here");
    } else {
        CHECK_EQ_INT(rc, 1);
        CHECK_MSG(strstr(g_out, "CUDA is not available") != NULL, "message: %s", g_out);
        /* and it says which part is missing */
        CHECK_MSG(strstr(g_out, "lib1bit-cuda.so") || strstr(g_out, "driver") || strstr(g_out, "device"),
                  "message: %s", g_out);
    }
    snprintf(args, sizeof args, "eval -m %s --ids 1 --device cuda:x", path);
    CHECK_EQ_INT(run_cli(args), 1);
    CHECK(strstr(g_out, "expected cpu, cuda, cuda:N or auto") != NULL);
    unlink(path);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
