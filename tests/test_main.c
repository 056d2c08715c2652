/*
 * test_main.c - the harness behind test.h.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#define MAX_TESTS 512

test_case g_tests[MAX_TESTS];
int g_n_tests;
int g_test_failed;
int g_test_skip_all;
char g_test_skip_reason[256];
static int g_cur_skipped;

void test_register(const char *name, test_fn fn) {
    if (g_n_tests >= MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        exit(2);
    }
    g_tests[g_n_tests].name = name;
    g_tests[g_n_tests].fn = fn;
    g_n_tests++;
}

void test_skip(const char *reason) {
    g_cur_skipped = 1;
    snprintf(g_test_skip_reason, sizeof g_test_skip_reason, "%s", reason);
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *test_models_dir(void) {
    static char buf[4096];
    const char *env = getenv("OB_SHARED_MODELS");
    if (env && *env) return is_dir(env) ? env : NULL;
#ifdef OB_SOURCE_DIR
    snprintf(buf, sizeof buf, "%s/../shared/models", OB_SOURCE_DIR);
    if (is_dir(buf)) return buf;
#endif
    return NULL;
}

const char *test_path(const char *dir, const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, rel);
    return buf;
}

uint64_t test_rand_u64(uint64_t *s) {
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float test_rand_f32(uint64_t *s) { return (float)((double)(test_rand_u64(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

float test_rand_normal(uint64_t *s) {
    double u1 = ((double)(test_rand_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(test_rand_u64(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

int test_main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < g_n_tests; i++) {
        if (filter && !strstr(g_tests[i].name, filter)) continue;
        g_test_failed = 0;
        g_cur_skipped = 0;
        g_tests[i].fn();
        if (g_test_failed) {
            failed++;
            fprintf(stderr, "[FAIL] %s\n", g_tests[i].name);
        } else if (g_cur_skipped) {
            skipped++;
            fprintf(stderr, "[SKIP] %s: %s\n", g_tests[i].name, g_test_skip_reason);
        } else {
            passed++;
            fprintf(stderr, "[ ok ] %s\n", g_tests[i].name);
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed) return 1;
    if (skipped && !passed) return TEST_SKIP_CODE;
    return 0;
}
