/*
 * threadpool.h - one persistent pool of worker threads.
 *
 * Threads are created once (ob_threadpool_create) and reused for every op;
 * nothing in the token loop creates a thread. ob_threadpool_run() runs one
 * task on all n threads (the caller is thread 0) and returns when all are
 * done. Inside a task, ob_threadpool_barrier() separates phases, and
 * ob_threadpool_next_chunk() hands out work items from a shared atomic
 * counter so fast threads take more chunks than slow ones.
 *
 * Workers spin briefly between tasks (cheap hand-off during a forward pass)
 * and then sleep on a condition variable so an idle server costs no CPU.
 */
#ifndef OB_CORE_THREADPOOL_H
#define OB_CORE_THREADPOOL_H

#include <stdint.h>

typedef struct ob_threadpool ob_threadpool;

typedef struct ob_task_ctx {
    ob_threadpool *pool;
    int ith; /* this thread, 0..nth-1 */
    int nth; /* threads taking part */
} ob_task_ctx;

typedef void (*ob_task_fn)(const ob_task_ctx *ctx, void *arg);

/* n_threads <= 0 means the number of online CPUs. */
int ob_threadpool_create(int n_threads, ob_threadpool **out);
void ob_threadpool_free(ob_threadpool *p);
int ob_threadpool_n_threads(const ob_threadpool *p);

/* Run fn(ctx, arg) on every thread; the caller runs ith = 0. Not reentrant:
 * one run at a time per pool. */
void ob_threadpool_run(ob_threadpool *p, ob_task_fn fn, void *arg);

/* Wait until every thread of the current run has reached this barrier. */
void ob_threadpool_barrier(const ob_task_ctx *ctx);

/* Work distribution: reset the counter (call from one thread, then barrier),
 * then each thread loops on next_chunk until it returns >= n. */
void ob_threadpool_chunk_reset(ob_threadpool *p, int64_t start);
int64_t ob_threadpool_next_chunk(ob_threadpool *p);

/* Rows [*lo, *hi) of n for thread ith of nth (static split). */
static inline void ob_split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = (n + nth - 1) / nth;
    int64_t a = per * ith, b = a + per;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

/* Number of online CPUs (at least 1). */
int ob_n_cpus(void);

#endif
