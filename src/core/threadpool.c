/*
 * threadpool.c - persistent pool: generation counter to start a task,
 * done counter to finish it, spinning barrier, atomic chunk counter.
 *
 * A run has n slots (ctx->ith = 0..n-1), and every thread, the caller
 * included, claims slots from a counter until none is left. Usually each
 * thread gets one; but when the machine is oversubscribed (other processes,
 * or the server's own threads, want the cores) a worker may not be running
 * when a run starts, and then the caller runs its slots too instead of
 * waiting a scheduler time slice for it: with 2 threads on a loaded 2-core
 * machine that wait made a small model's decode 10-100x slower than with
 * one thread. Slots that meet at a barrier still need as many threads as
 * slots, so a barrier waits (yielding the core) for the late thread.
 *
 * Idle workers spin briefly, then spin yielding the core, then sleep: a
 * spinning worker must not keep a core from a thread that has work.
 */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"
#include "status.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* A worker waiting for the next run: pause this many times, then yield the
 * core between checks, and sleep once SPIN_YIELD_NS have passed. */
#define SPIN_PURE 256
#define SPIN_YIELD_NS 200000

struct ob_threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    _Alignas(64) atomic_int generation; /* bumped once per run */
    atomic_int stop;
    ob_task_fn fn;
    void *arg;
    _Alignas(64) atomic_int next_slot;   /* slots of this run claimed so far */
    _Alignas(64) atomic_int n_done;      /* slots finished in this run */
    _Alignas(64) atomic_int barrier_count;
    atomic_int barrier_gen;
    _Alignas(64) atomic_llong chunk;
};

typedef struct worker_arg {
    ob_threadpool *pool;
    int ith;
} worker_arg;

int ob_n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Claim and run slots of the current run until none is left. fn and arg are
 * read after a slot is claimed: the caller publishes them before it resets
 * the slot counter, so a claimed slot always sees its own run's task. */
static void run_slots(ob_threadpool *pool) {
    for (;;) {
        const int s = atomic_fetch_add(&pool->next_slot, 1);
        if (s >= pool->n) return;
        ob_task_ctx ctx = {pool, s, pool->n};
        pool->fn(&ctx, pool->arg);
        atomic_fetch_add(&pool->n_done, 1);
    }
}

static void *worker_main(void *p) {
    worker_arg wa = *(worker_arg *)p;
    ob_free(p);
    ob_threadpool *pool = wa.pool;
    int seen = 0;
    for (;;) {
        int spins = 0;
        int64_t t0 = 0;
        while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop)) {
            if (++spins < SPIN_PURE) {
                cpu_relax();
                continue;
            }
            if (t0 == 0) t0 = now_ns();
            if (now_ns() - t0 < SPIN_YIELD_NS) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&pool->lock);
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->wake, &pool->lock);
            pthread_mutex_unlock(&pool->lock);
        }
        if (atomic_load(&pool->stop)) break;
        seen = atomic_load(&pool->generation);
        run_slots(pool);
    }
    return NULL;
}

int ob_threadpool_create(int n_threads, ob_threadpool **out) {
    *out = NULL;
    if (n_threads <= 0) n_threads = ob_n_cpus();
    if (n_threads > 1024) return ob_err(OB_ERR_RANGE, "thread count %d is too large", n_threads);
    ob_threadpool *p = ob_calloc(1, sizeof *p);
    if (!p) return ob_err(OB_ERR_OOM, "thread pool");
    p->n = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->threads = ob_calloc((size_t)n_threads, sizeof(pthread_t));
        if (!p->threads) {
            ob_threadpool_free(p);
            return ob_err(OB_ERR_OOM, "thread pool");
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = ob_malloc(sizeof *wa);
        if (!wa) {
            p->n = i; /* join the ones started */
            ob_threadpool_free(p);
            return ob_err(OB_ERR_OOM, "thread pool");
        }
        wa->pool = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            ob_free(wa);
            p->n = i;
            ob_threadpool_free(p);
            return ob_err(OB_ERR_INTERNAL, "pthread_create failed for thread %d", i);
        }
    }
    *out = p;
    return 0;
}

void ob_threadpool_free(ob_threadpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    ob_free(p->threads);
    ob_free(p);
}

int ob_threadpool_n_threads(const ob_threadpool *p) { return p->n; }

void ob_threadpool_run(ob_threadpool *p, ob_task_fn fn, void *arg) {
    if (p->n == 1) {
        ob_task_ctx ctx = {p, 0, 1};
        fn(&ctx, arg);
        return;
    }
    /* publish the task, then open its slots (see run_slots) */
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->n_done, 0);
    atomic_store(&p->barrier_count, 0);
    atomic_store(&p->next_slot, 0);
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    run_slots(p);
    int spins = 0;
    while (atomic_load(&p->n_done) < p->n) {
        if (++spins < 1000)
            cpu_relax();
        else
            sched_yield();
    }
}

void ob_threadpool_barrier(const ob_task_ctx *ctx) {
    ob_threadpool *p = ctx->pool;
    if (ctx->nth <= 1) return;
    int gen = atomic_load(&p->barrier_gen);
    if (atomic_fetch_add(&p->barrier_count, 1) == ctx->nth - 1) {
        atomic_store(&p->barrier_count, 0);
        atomic_fetch_add(&p->barrier_gen, 1);
        return;
    }
    int spins = 0;
    while (atomic_load(&p->barrier_gen) == gen) {
        if (++spins < 1000)
            cpu_relax();
        else
            sched_yield(); /* oversubscribed: let the late thread run */
    }
}

void ob_threadpool_chunk_reset(ob_threadpool *p, int64_t start) { atomic_store(&p->chunk, start); }

int64_t ob_threadpool_next_chunk(ob_threadpool *p) { return atomic_fetch_add(&p->chunk, 1); }
