/*
 * test.h - the tiny test harness every test binary uses.
 *
 *     TEST(gguf_roundtrip) { CHECK(x == 1); CHECK_EQ_INT(a, b); }
 *     int main(int argc, char **argv) { return test_main(argc, argv); }
 *
 * Tests register themselves (constructor attribute), run in file order, and a
 * failing CHECK fails the current test but keeps going. test_skip() marks a
 * whole binary skipped (exit 77, which ctest reports as "Skipped", never
 * "Passed") - used when ../shared/models is absent.
 * An argument filters tests by substring.
 */
#ifndef OB_TEST_H
#define OB_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_SKIP_CODE 77

/* 1 in a build with AddressSanitizer (the `make test-asan` stage, ~5x slower):
 * the few heavy tests run a smaller workload there - the same code paths, fewer
 * repetitions - and their full size in the release stage. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif

typedef void (*test_fn)(void);
typedef struct test_case {
    const char *name;
    test_fn fn;
} test_case;

extern test_case g_tests[];
extern int g_n_tests;
extern int g_test_failed;      /* current test failed */
extern int g_test_skip_all;    /* set by test_skip */
extern char g_test_skip_reason[256];

void test_register(const char *name, test_fn fn);
int test_main(int argc, char **argv);
/* Mark the current test (and binary, if nothing else ran) as skipped. */
void test_skip(const char *reason);
/* Path of ../shared/models (OB_SHARED_MODELS overrides), or NULL if absent. */
const char *test_models_dir(void);
/* Join dir and a relative path into a static buffer (one at a time). */
const char *test_path(const char *dir, const char *rel);
/* Deterministic random numbers for tests. */
uint64_t test_rand_u64(uint64_t *state);
float test_rand_f32(uint64_t *state); /* uniform in [-1, 1) */
float test_rand_normal(uint64_t *state);

#define TEST(name)                                                               \
    static void test_##name(void);                                               \
    __attribute__((constructor)) static void test_reg_##name(void) {             \
        test_register(#name, test_##name);                                       \
    }                                                                            \
    static void test_##name(void)

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            g_test_failed = 1;                                                                   \
        }                                                                                        \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                     \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
            g_test_failed = 1;                                                                   \
        }                                                                                        \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                       \
    do {                                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                                      \
        if (a_ != b_) {                                                                          \
            fprintf(stderr, "  FAIL %s:%d: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a,   \
                    #b, a_, b_);                                                                 \
            g_test_failed = 1;                                                                   \
        }                                                                                        \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                       \
    do {                                                                                         \
        const char *a_ = (a), *b_ = (b);                                                         \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                 \
            fprintf(stderr, "  FAIL %s:%d: %s == %s (\"%s\" vs \"%s\")\n", __FILE__, __LINE__,   \
                    #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                             \
            g_test_failed = 1;                                                                   \
        }                                                                                        \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                    \
    do {                                                                                         \
        double a_ = (double)(a), b_ = (double)(b);                                               \
        if (!(fabs(a_ - b_) <= (tol))) {                                                         \
            fprintf(stderr, "  FAIL %s:%d: |%s - %s| <= %g (%.9g vs %.9g)\n", __FILE__,          \
                    __LINE__, #a, #b, (double)(tol), a_, b_);                                    \
            g_test_failed = 1;                                                                   \
        }                                                                                        \
    } while (0)

/* A status-returning call expected to succeed; prints ob_last_error on failure. */
#define CHECK_OK(call)                                                                           \
    do {                                                                                         \
        int rc_ = (call);                                                                        \
        if (rc_ != 0) {                                                                          \
            fprintf(stderr, "  FAIL %s:%d: %s -> %d (%s)\n", __FILE__, __LINE__, #call, rc_,     \
                    ob_last_error());                                                            \
            g_test_failed = 1;                                                                   \
        }                                                                                        \
    } while (0)

#endif
