/*
 * test_core.c - src/core: status messages, allocation failure injection,
 * arena, mmap, thread pool, CPU tier selection, UTF-8 helpers, logging.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/cpu.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/mmap.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "core/utf8.h"
#include "test.h"

TEST(status_messages) {
    ob_err_clear();
    CHECK_EQ_STR(ob_last_error(), "");
    CHECK_EQ_INT(ob_err(OB_ERR_FORMAT, "key '%s' bad at %d", "a.b", 12), OB_ERR_FORMAT);
    CHECK_EQ_STR(ob_last_error(), "key 'a.b' bad at 12");
    CHECK_EQ_INT(ob_err_wrap(OB_ERR_FORMAT, "file %s", "x.gguf"), OB_ERR_FORMAT);
    CHECK_EQ_STR(ob_last_error(), "file x.gguf: key 'a.b' bad at 12");
    CHECK_EQ_STR(ob_status_str(OB_OK), "ok");
    CHECK_EQ_STR(ob_status_str(OB_ERR_OOM), "out of memory");
    CHECK_EQ_STR(ob_status_str(12345), "unknown status");
    CHECK(strstr(ob_version_string(), "commit") != NULL);
}

static void *set_other_error(void *arg) {
    (void)arg;
    ob_err(OB_ERR_RANGE, "other thread");
    return NULL;
}

TEST(status_thread_local) {
    /* Messages set on another thread never show up here. */
    ob_err(OB_ERR_IO, "main thread");
    pthread_t t;
    pthread_create(&t, NULL, set_other_error, NULL);
    pthread_join(t, NULL);
    CHECK_EQ_STR(ob_last_error(), "main thread");
}

TEST(mem_fault_injection) {
    ob_mem_fail_after(2);
    void *a = ob_malloc(16);
    void *b = ob_malloc(16);
    void *c = ob_malloc(16);
    CHECK(a != NULL);
    CHECK(b == NULL);
    CHECK(c != NULL);
    ob_free(a);
    ob_free(c);
    ob_mem_fail_after(0);
    CHECK(ob_calloc((size_t)1 << 62, 16) == NULL); /* overflow is refused, not wrapped */
    CHECK_EQ_INT(ob_mul_size((size_t)-1, 2), (long long)(size_t)-1);
    char *s = ob_strndup("hello world", 5);
    CHECK_EQ_STR(s, "hello");
    ob_free(s);
    void *al = ob_malloc_aligned(100, 64);
    CHECK(al && ((uintptr_t)al & 63) == 0);
    ob_free_aligned(al);
}

TEST(arena_alloc_align_rewind) {
    ob_arena a;
    ob_arena_init(&a, 256, 0);
    char *p1 = ob_arena_alloc(&a, 10, 1);
    double *p2 = ob_arena_alloc(&a, sizeof(double), 8);
    void *p3 = ob_arena_alloc(&a, 100, 64);
    CHECK(p1 && p2 && p3);
    CHECK(((uintptr_t)p2 & 7) == 0);
    CHECK(((uintptr_t)p3 & 63) == 0);
    memset(p1, 1, 10);
    *p2 = 3.5;
    ob_arena_mark m = ob_arena_get_mark(&a);
    /* Larger than a chunk: goes into a chunk of its own. */
    char *big = ob_arena_alloc(&a, 10000, 16);
    CHECK(big != NULL);
    memset(big, 7, 10000);
    ob_arena_rewind(&a, m);
    CHECK(*p2 == 3.5);
    CHECK_EQ_INT(a.used, m.used);
    char *s = ob_arena_strndup(&a, "abcdef", 3);
    CHECK_EQ_STR(s, "abc");
    int *z = ob_arena_calloc(&a, 50, sizeof(int));
    int sum = 0;
    for (int i = 0; i < 50; i++) sum += z[i];
    CHECK_EQ_INT(sum, 0);
    CHECK(ob_arena_alloc(&a, 8, 3) == NULL); /* alignment not a power of two */
    ob_arena_reset(&a);
    CHECK_EQ_INT(a.used, 0);
    CHECK(ob_arena_alloc(&a, 32, 16) != NULL);
    ob_arena_free(&a);
}

TEST(arena_limit) {
    ob_arena a;
    ob_arena_init(&a, 1024, 4096);
    int n = 0;
    while (ob_arena_alloc(&a, 1000, 8) != NULL) n++;
    CHECK(n >= 3 && n <= 4);
    CHECK(a.total <= 4096 + 64);
    ob_arena_free(&a);
    /* Allocation failure inside the arena returns NULL cleanly. */
    ob_arena_init(&a, 1024, 0);
    ob_mem_fail_after(1);
    CHECK(ob_arena_alloc(&a, 10, 8) == NULL);
    CHECK(ob_arena_alloc(&a, 10, 8) != NULL);
    ob_arena_free(&a);
}

TEST(mmap_file) {
    char path[] = "/tmp/ob_test_mmap_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char msg[] = "0123456789";
    CHECK(write(fd, msg, 10) == 10);
    close(fd);
    ob_mmap m;
    CHECK_OK(ob_mmap_open(path, &m));
    CHECK_EQ_INT(m.size, 10);
    CHECK(m.data && memcmp(m.data, msg, 10) == 0);
    ob_mmap_prefetch(&m);
    ob_mmap_close(&m);
    CHECK(m.data == NULL);
    unlink(path);
    CHECK_EQ_INT(ob_mmap_open("/nonexistent/file.gguf", &m), OB_ERR_IO);
    CHECK(strstr(ob_last_error(), "/nonexistent/file.gguf") != NULL);
    CHECK_EQ_INT(ob_mmap_open("/tmp", &m), OB_ERR_IO); /* a directory */
}

typedef struct pool_job {
    int64_t n;
    atomic_llong sum;
    int64_t *out;      /* [n] */
    atomic_int phase_errors;
    atomic_int seen[64];
} pool_job;

static void pool_chunks(const ob_task_ctx *ctx, void *arg) {
    pool_job *j = arg;
    atomic_fetch_add(&j->seen[ctx->ith], 1);
    if (ctx->ith == 0) ob_threadpool_chunk_reset(ctx->pool, 0);
    ob_threadpool_barrier(ctx);
    /* Phase 1: each chunk of 7 items, taken dynamically. */
    for (;;) {
        int64_t c = ob_threadpool_next_chunk(ctx->pool);
        int64_t lo = c * 7;
        if (lo >= j->n) break;
        int64_t hi = lo + 7 < j->n ? lo + 7 : j->n;
        for (int64_t i = lo; i < hi; i++) j->out[i] = i * 2;
    }
    ob_threadpool_barrier(ctx);
    /* Phase 2 reads what every thread wrote in phase 1: the barrier must hold. */
    int64_t lo, hi, s = 0;
    ob_split_range(j->n, ctx->ith, ctx->nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        if (j->out[i] != i * 2) atomic_fetch_add(&j->phase_errors, 1);
        s += j->out[i];
    }
    atomic_fetch_add(&j->sum, s);
}

TEST(threadpool_chunks_and_barrier) {
    for (int nt = 1; nt <= 4; nt++) {
        ob_threadpool *p;
        CHECK_OK(ob_threadpool_create(nt, &p));
        CHECK_EQ_INT(ob_threadpool_n_threads(p), nt);
        pool_job j;
        memset(&j, 0, sizeof j);
        j.n = 10007;
        j.out = calloc((size_t)j.n, sizeof(int64_t));
        for (int rep = 0; rep < 200; rep++) {
            memset(j.out, 0, (size_t)j.n * sizeof(int64_t));
            atomic_store(&j.sum, 0);
            ob_threadpool_run(p, pool_chunks, &j);
            CHECK_EQ_INT(atomic_load(&j.sum), (long long)j.n * (j.n - 1));
        }
        CHECK_EQ_INT(atomic_load(&j.phase_errors), 0);
        for (int t = 0; t < nt; t++) CHECK_EQ_INT(atomic_load(&j.seen[t]), 200);
        free(j.out);
        ob_threadpool_free(p);
    }
}

/* Back-to-back runs with a different arg each time: a thread finishing the
 * last slot of one run may claim a slot of the next, and must then see the
 * next run's task and arg (threadpool.c: run_slots). Every slot of every run
 * runs exactly once, with its own run's arg. */
typedef struct run_arg {
    int64_t id;
    atomic_llong *sums; /* [nth] */
    atomic_int *count;  /* [nth] */
} run_arg;

static void pool_tag(const ob_task_ctx *ctx, void *arg) {
    run_arg *a = arg;
    atomic_fetch_add(&a->sums[ctx->ith], a->id);
    atomic_fetch_add(&a->count[ctx->ith], 1);
}

TEST(threadpool_back_to_back_runs) {
    enum { NT = 4, RUNS = 20000 };
    ob_threadpool *p;
    CHECK_OK(ob_threadpool_create(NT, &p));
    static atomic_llong sums[NT];
    static atomic_int count[NT];
    static run_arg args[2];
    for (int64_t r = 0; r < RUNS; r++) {
        run_arg *a = &args[r % 2]; /* the previous run's arg is rewritten two runs later */
        a->id = r + 1;
        a->sums = sums;
        a->count = count;
        ob_threadpool_run(p, pool_tag, a);
    }
    for (int t = 0; t < NT; t++) {
        CHECK_EQ_INT(atomic_load(&count[t]), RUNS);
        CHECK_EQ_INT(atomic_load(&sums[t]), (long long)RUNS * (RUNS + 1) / 2);
    }
    ob_threadpool_free(p);
}

TEST(threadpool_sleep_and_wake) {
    /* Workers fall asleep between runs and must wake for the next one. */
    ob_threadpool *p;
    CHECK_OK(ob_threadpool_create(3, &p));
    pool_job j;
    memset(&j, 0, sizeof j);
    j.n = 100;
    j.out = calloc((size_t)j.n, sizeof(int64_t));
    for (int rep = 0; rep < 3; rep++) {
        usleep(20000);
        atomic_store(&j.sum, 0);
        ob_threadpool_run(p, pool_chunks, &j);
        CHECK_EQ_INT(atomic_load(&j.sum), (long long)j.n * (j.n - 1));
    }
    free(j.out);
    ob_threadpool_free(p);
    ob_threadpool_free(NULL);
}

TEST(split_range) {
    int64_t lo, hi, total = 0;
    for (int t = 0; t < 3; t++) {
        ob_split_range(10, t, 3, &lo, &hi);
        total += hi - lo;
    }
    CHECK_EQ_INT(total, 10);
    ob_split_range(2, 3, 4, &lo, &hi);
    CHECK_EQ_INT(hi - lo, 0);
}

TEST(cpu_tier_override) {
    const ob_cpu_features *f = ob_cpu_get_features();
    CHECK(f->n_cpus >= 1);
    ob_cpu_tier max = ob_cpu_max_tier(), t;
    unsetenv("OB_CPU");
    CHECK_OK(ob_cpu_tier_select(&t));
    CHECK_EQ_INT(t, max);
    setenv("OB_CPU", "scalar", 1);
    CHECK_OK(ob_cpu_tier_select(&t));
    CHECK_EQ_INT(t, OB_CPU_SCALAR);
    setenv("OB_CPU", "sse9", 1);
    CHECK_EQ_INT(ob_cpu_tier_select(&t), OB_ERR_INVALID_ARG);
    CHECK(strstr(ob_last_error(), "sse9") != NULL);
    if (max < OB_CPU_AVX512) {
        setenv("OB_CPU", "avx512", 1);
        CHECK_EQ_INT(ob_cpu_tier_select(&t), OB_ERR_UNSUPPORTED);
    }
    unsetenv("OB_CPU");
    /* The tier implies its features. */
    if (max >= OB_CPU_AVX2) CHECK(f->avx2 && f->fma && f->f16c);
    if (max >= OB_CPU_AVX512) CHECK(f->avx512f && f->avx512bw && f->avx512vl);
    CHECK_EQ_INT(ob_cpu_tier_parse("avx2"), OB_CPU_AVX2);
    CHECK_EQ_STR(ob_cpu_tier_name(OB_CPU_AVX512), "avx512");
    char buf[256];
    ob_cpu_features_string(buf, sizeof buf);
    if (f->avx2) CHECK(strstr(buf, "AVX2") != NULL);
}

TEST(utf8) {
    uint32_t cp;
    CHECK_EQ_INT(ob_utf8_decode("A", 1, &cp), 1);
    CHECK_EQ_INT(cp, 'A');
    CHECK_EQ_INT(ob_utf8_decode("\xC3\xA9", 2, &cp), 2);
    CHECK_EQ_INT(cp, 0xE9);
    CHECK_EQ_INT(ob_utf8_decode("\xF0\x9F\x98\x80", 4, &cp), 4);
    CHECK_EQ_INT(cp, 0x1F600);
    CHECK_EQ_INT(ob_utf8_decode("\xC0\x80", 2, &cp), -1);         /* overlong */
    CHECK_EQ_INT(ob_utf8_decode("\xED\xA0\x80", 3, &cp), -1);     /* surrogate */
    CHECK_EQ_INT(ob_utf8_decode("\xF4\x90\x80\x80", 4, &cp), -1); /* > U+10FFFF */
    CHECK_EQ_INT(ob_utf8_decode("\xE2\x82", 2, &cp), -1);         /* truncated */
    CHECK_EQ_INT(ob_utf8_decode("\x80", 1, &cp), -1);
    char out[4];
    for (uint32_t c = 0; c <= 0x10FFFF; c += 7) {
        int n = ob_utf8_encode(c, out);
        if (c >= 0xD800 && c <= 0xDFFF) {
            CHECK_EQ_INT(n, 0);
            continue;
        }
        uint32_t back = 0;
        if (ob_utf8_decode(out, (size_t)n, &back) != n || back != c) {
            CHECK_MSG(0, "round trip of U+%04X", c);
            break;
        }
    }
    CHECK(ob_utf8_valid("h\xC3\xA9llo", 6));
    CHECK(!ob_utf8_valid("h\xC3llo", 5));
    /* The streamer holds back an unfinished character only. */
    CHECK_EQ_INT(ob_utf8_complete_prefix("ab\xF0\x9F\x98", 5), 2);
    CHECK_EQ_INT(ob_utf8_complete_prefix("ab\xF0\x9F\x98\x80", 6), 6);
    CHECK_EQ_INT(ob_utf8_complete_prefix("ab\xC3", 3), 2);
    CHECK_EQ_INT(ob_utf8_complete_prefix("abc", 3), 3);
    CHECK_EQ_INT(ob_utf8_complete_prefix("", 0), 0);
}

static int g_log_calls;
static void log_cb(ob_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == OB_LOG_WARN && strcmp(msg, "warned 7") == 0) g_log_calls++;
}

TEST(log_levels) {
    CHECK_EQ_INT(ob_log_parse_level("debug"), OB_LOG_DEBUG);
    CHECK_EQ_INT(ob_log_parse_level("2"), OB_LOG_INFO);
    CHECK_EQ_INT(ob_log_parse_level("loud"), -1);
    ob_log_level old = ob_log_get_level();
    ob_log_set_callback(log_cb, NULL);
    ob_log_set_level(OB_LOG_WARN);
    OB_LOGW("warned %d", 7);
    OB_LOGI("not shown %d", 8);
    ob_log_set_level(OB_LOG_ERROR);
    OB_LOGW("warned %d", 7); /* filtered */
    CHECK_EQ_INT(g_log_calls, 1);
    ob_log_set_callback(NULL, NULL);
    ob_log_set_level(old);
}

static void throwing_abort(const char *msg) {
    (void)msg;
    _exit(42);
}

TEST(assert_hook) {
    /* The hook replaces abort(): run in a child so this process survives. */
    pid_t pid = fork();
    if (pid == 0) {
        ob_set_abort_hook(throwing_abort);
        OB_ASSERT(1 + 1 == 3);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
