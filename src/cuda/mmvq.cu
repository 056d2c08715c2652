/*
 * mmvq.cu - the integer decode kernel (mmvq.cuh): Q4_0, Q8_0, Q4_K, Q5_K
 * and Q6_K weights against q8 activations, for batches of 1..8 tokens.
 *
 * One launch quantizes the batch's activations (a warp per 32 values), then
 * one launch per group of 8 tokens runs the products. Layout as mmv.cuh: a
 * block is 4 warps, wpr warps share a row (more when rows are few, so the
 * grid has enough warps in flight to cover memory latency), lanes take
 * consecutive units of the row and loop with a stride of the row's lanes;
 * partial sums meet by warp shuffle and then in shared memory.
 *
 * OB_CUDA_MMVQ=0 turns the path off (the float kernel runs instead), so the
 * two can be compared in one process.
 */
#ifndef __HIP_PLATFORM_AMD__
#include <cuda/atomic>
#endif

#include "cp_async.cuh"
#include "hopper.cuh"
#include "matmul.cuh"
#include "mmq.cuh"
#include "mmvq.cuh"

#define MMVQ_WARPS 4

__global__ void q8_act_kernel(const float *__restrict__ x, int64_t ldx, int64_t nin, int n, int8_t *__restrict__ qx,
                              float *__restrict__ dx) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    const int64_t nb = nin / 32;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP;
    if (gw >= nb * n) return;
    const int lane = threadIdx.x % OB_WARP;
    const int64_t t = gw / nb, b = gw % nb;
    const float v = x[t * ldx + b * 32 + lane];
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const float q = roundf(v * id);
    qx[t * nin + b * 32 + lane] = (int8_t)q;
    const float sum = warp_sum(q); /* small integers: exact */
    if (lane == 0) dx[2 * (t * nb + b)] = d, dx[2 * (t * nb + b) + 1] = d * sum;
}

/* A warp works on R consecutive rows (or a share of them, when wpr warps
 * split the rows' chunks): per round a lane loads U chunks of each row - all
 * weight loads issued before any is used - then, chunk by chunk, the
 * activations once for the R rows.
 *
 * One launch may run up to three products of the same input (q, k and v;
 * gate and up: mmvq_go joins them while a graph is recorded): the grid's
 * blocks are the first matrix's, then the second's, then the third's, each
 * laid out as if it were launched alone with the set's wpr. */
#define MMVQ_SET_MAX 3

struct mmvq_set {
    const uint8_t *w[MMVQ_SET_MAX];
    const float *bias[MMVQ_SET_MAX];
    float *out[MMVQ_SET_MAX];
    int64_t ldo[MMVQ_SET_MAX];
    int nout[MMVQ_SET_MAX];
    int b1, b2; /* first block of matrices 1 and 2 (the grid's end where absent) */
    int wpr;
};

/* The device-scope fence of the GLU epilogue's publish/consume pattern: acquire-release, not
 * __threadfence()'s sequentially consistent one (MEMBAR.SC, which stalls for microseconds). */
static __device__ __forceinline__ void glu_fence() {
#ifdef __HIP_PLATFORM_AMD__
    __threadfence();
#else
    cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);
#endif
}

/* The GLU epilogue; every thread of the block calls it. A warp that holds the sums of gate rows
 * row0 .. row0 + RM - 1 (acc[j]) and of the same up rows (acc[RM + j]), lane 0 having them,
 * writes g and u as the plain kernel would, then h = act(g) * u as glu_q8_kernel computes it from
 * them. With a q8 copy to make, the block then publishes its rows - all (MMVQ_WARPS / wpr) RM of
 * them lie in one 32-row group, as d (= nout) is a multiple of 32: a barrier, a release fence and
 * the rows added to the group's counter by thread 0 - and the block that completes a group
 * (acquire fence after its count) reads the group's 32 h values back from L2 with its first warp
 * and writes their q8 block for every token (q8_put_warp: glu_q8_kernel's operations), then
 * zeroes the counter for the next launch. Without the fences the reader could see stale h. */
template <int NT, int RM>
static __device__ __forceinline__ void mmvq_glu_put(const mmvq_set &s, const cuda_glu_out &g,
                                                    const float (&acc)[2 * RM][NT], int row0, int nout, int sub,
                                                    int lane) {
    __shared__ int last;
    ob_pdl_wait(); /* every lane, before any write (lanes without chunks did not wait) */
    if (sub == 0 && lane == 0 && row0 < nout) {
#pragma unroll
        for (int j = 0; j < RM; j++) {
            const int r = row0 + j;
            const float b0 = s.bias[0] ? s.bias[0][r] : 0.0f, b1 = s.bias[1] ? s.bias[1][r] : 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float gv = acc[j][t] + b0, uv = acc[RM + j][t] + b1;
                s.out[0][t * s.ldo[0] + r] = gv;
                s.out[1][t * s.ldo[1] + r] = uv;
                g.y[t * g.ldy + r] = act_f((int)g.act, gv) * uv; /* after g: y may be gate's rows */
            }
        }
    }
    if (!g.qx) return;
    const int rows = MMVQ_WARPS / s.wpr * RM, rb = (int)blockIdx.x * rows; /* the block's rows */
    __syncthreads(); /* the block's h stores before thread 0's release */
    if (threadIdx.x == 0) {
        glu_fence();
        const bool done = atomicAdd(g.cnt + rb / 32, rows) + rows == 32;
        if (done) glu_fence(); /* acquire: the other blocks' h of the group are visible */
        last = done;
    }
    __syncthreads();
    if (!last || threadIdx.x >= OB_WARP) return;
    const int r0 = rb / 32 * 32;
#pragma unroll
    for (int t = 0; t < NT; t++) q8_put_warp(g.qx, g.dx, nout, t, r0 + lane, __ldcg(g.y + t * g.ldy + r0 + lane));
    if (lane == 0) g.cnt[rb / 32] = 0;
}

/* GLU (cuda_op_glu fused into a gate/up pair, the set's matrices 0 and 1 of equal rows): a
 * warp's R rows are R / 2 gate rows and the same up rows, each summed exactly as in the plain
 * kernel (a row's sums depend on wpr alone, which the caller keeps), and the epilogue writes g,
 * u, h = act(g) * u and h's q8 copy (mmvq_glu_put). */
template <int T, int NT, int U, int R, bool GLU>
__global__ void __launch_bounds__(MMVQ_WARPS * OB_WARP)
    mmvq_kernel(const mmvq_set s, size_t nb1, int nch, q8_act a, const cuda_glu_out g) {
    typedef ob_qdot<T> Q;
    constexpr int RM = GLU ? R / 2 : R; /* rows of one matrix a warp */
    __shared__ float red[MMVQ_WARPS][R * NT];
    /* which matrix: constant indices only, so the set stays in the parameter bank */
    const int bx = (int)blockIdx.x, m = GLU ? 0 : bx >= s.b2 ? 2 : bx >= s.b1 ? 1 : 0;
    const uint8_t *const w = m == 0 ? s.w[0] : m == 1 ? s.w[1] : s.w[2];
    const float *const bias = m == 0 ? s.bias[0] : m == 1 ? s.bias[1] : s.bias[2];
    float *const out = m == 0 ? s.out[0] : m == 1 ? s.out[1] : s.out[2];
    const int64_t ldo = m == 0 ? s.ldo[0] : m == 1 ? s.ldo[1] : s.ldo[2];
    const int nout = m == 0 ? s.nout[0] : m == 1 ? s.nout[1] : s.nout[2];
    const int blk = bx - (m == 0 ? 0 : m == 1 ? s.b1 : s.b2), wpr = s.wpr;
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row0 = (blk * (MMVQ_WARPS / wpr) + warp / wpr) * RM, sub = warp % wpr;
    float acc[R][NT];
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[j][t] = 0.0f;
    if (row0 < nout) {
        const uint8_t *wr[R];
#pragma unroll
        for (int j = 0; j < R; j++) {
            const int r = row0 + (GLU ? j % RM : j);
            wr[j] = (GLU && j >= RM ? s.w[1] : w) + (size_t)(r < nout ? r : nout - 1) * nb1;
        }
        const int step = OB_WARP * wpr;
        typename Q::raw r[U][R];
        bool first = true;
        for (int c0 = sub * OB_WARP + lane; c0 < nch; c0 += step * U) {
#pragma unroll
            for (int k = 0; k < U; k++)
                if (c0 + k * step < nch)
#pragma unroll
                    for (int j = 0; j < R; j++) Q::load(wr[j], c0 + k * step, r[k][j]);
            if (first) { /* weights in flight: now wait for the kernel that wrote the activations */
                ob_pdl_wait();
                first = false;
            }
#pragma unroll
            for (int k = 0; k < U; k++)
                if (c0 + k * step < nch)
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        typename Q::xin x;
                        Q::xload(c0 + k * step, a, t, x);
#pragma unroll
                        for (int j = 0; j < R; j++) acc[j][t] = ob_fadd(acc[j][t], Q::dot1(r[k][j], c0 + k * step, x));
                    }
        }
    }
#pragma unroll
    for (int j = 0; j < R; j++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[j][t] = warp_sum(acc[j][t]);
    if (wpr > 1) row_sum_warps<R * NT>(red, &acc[0][0], wpr, warp, sub, lane);
    if constexpr (GLU) {
        mmvq_glu_put<NT, RM>(s, g, acc, row0, nout, sub, lane);
        return;
    }
    if (sub == 0 && lane == 0)
#pragma unroll
        for (int j = 0; j < R; j++)
            if (row0 + j < nout) {
                const float b0 = bias ? bias[row0 + j] : 0.0f;
#pragma unroll
                for (int t = 0; t < NT; t++) out[t * ldo + row0 + j] = acc[j][t] + b0;
            }
}

/* One token, the weights streamed through shared memory: per round a warp
 * takes 32 consecutive chunks of each of its R rows (a contiguous run of
 * the row: SEG bytes), copies the run into shared memory with cp.async,
 * S - 1 rounds ahead of the one it computes, and each lane then reads its
 * chunk from there exactly as mmvq_kernel reads it from global memory. The
 * copies in flight hold no registers, so a warp keeps (S - 1) R SEG bytes
 * on the way (3 x 2 x 1152 for Q4_K) at the occupancy of the register
 * kernel, whose lanes hold one chunk a row (and lose occupancy when they
 * hold more). CP (16, 8 or 4) is the largest copy that the row size nb1,
 * the weights' address and a full run are all multiples of; a row's last
 * run is then one too (Q4_0 runs are 36 m bytes: nb1 = 36 pairs a multiple
 * of 16 makes the pairs, and so m, a multiple of 4; Q8_0 alike; Q4_K/Q5_K
 * blocks are 144/176 bytes; Q6_K's 210-byte blocks give CP 8 only for rows
 * of whole runs and CP 4 for an even number of blocks; rows with an odd
 * number take mmvq_kernel). Sums and their order are mmvq_kernel's: a
 * lane's chunks in the same order, the same reductions. */
template <int T> struct mmvq_stream_shape {
    static constexpr int SEG = OB_WARP / ob_qdot<T>::CHUNKS * ob_qdot<T>::BYTES; /* a round's bytes of a row */
    static constexpr int SEGP = (SEG + 15) & ~15;
    static constexpr int S = SEG > 2048 ? 2 : 4; /* rounds in flight + 1: the block's buffers stay under 48 KB */
};

template <int T, int R, int CP>
__global__ void __launch_bounds__(MMVQ_WARPS * OB_WARP)
    mmvq_stream_kernel(const mmvq_set s, size_t nb1, int nch, q8_act a) {
    typedef ob_qdot<T> Q;
    typedef mmvq_stream_shape<T> SH;
    constexpr int S = SH::S, SEGP = SH::SEGP;
    extern __shared__ __align__(16) uint8_t mmvq_smem[];
    __shared__ float red[MMVQ_WARPS][R];
    const int bx = (int)blockIdx.x, m = bx >= s.b2 ? 2 : bx >= s.b1 ? 1 : 0;
    const uint8_t *const w = m == 0 ? s.w[0] : m == 1 ? s.w[1] : s.w[2];
    const float *const bias = m == 0 ? s.bias[0] : m == 1 ? s.bias[1] : s.bias[2];
    float *const out = m == 0 ? s.out[0] : m == 1 ? s.out[1] : s.out[2];
    const int nout = m == 0 ? s.nout[0] : m == 1 ? s.nout[1] : s.nout[2];
    const int blk = bx - (m == 0 ? 0 : m == 1 ? s.b1 : s.b2), wpr = s.wpr;
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row0 = (blk * (MMVQ_WARPS / wpr) + warp / wpr) * R, sub = warp % wpr;
    uint8_t *const buf = mmvq_smem + (size_t)warp * S * R * SEGP;
    float acc[R];
#pragma unroll
    for (int j = 0; j < R; j++) acc[j] = 0.0f;
    if (row0 < nout) {
        const uint8_t *wr[R];
#pragma unroll
        for (int j = 0; j < R; j++) wr[j] = w + (size_t)(row0 + j < nout ? row0 + j : nout - 1) * nb1;
        const int step = OB_WARP * wpr, cfirst = sub * OB_WARP;
        const int n_it = cfirst < nch ? (nch - cfirst + step - 1) / step : 0;
        auto issue = [&](int it) {
            const int c0 = cfirst + it * step, nc = nch - c0 < OB_WARP ? nch - c0 : OB_WARP;
            const int bytes = nc / Q::CHUNKS * Q::BYTES, units = bytes / CP;
            const size_t off = (size_t)(c0 / Q::CHUNKS) * Q::BYTES;
            uint8_t *const dst0 = buf + (it % S) * R * SEGP;
#pragma unroll
            for (int j = 0; j < R; j++) {
                const uint8_t *src = wr[j] + off;
                uint8_t *dst = dst0 + j * SEGP;
                for (int u = lane; u < units; u += OB_WARP) cp_async<CP>(dst + u * CP, src + u * CP);
            }
        };
#pragma unroll
        for (int it = 0; it < S - 1; it++) {
            if (it < n_it) issue(it);
            cp_async_commit();
        }
        ob_pdl_wait(); /* weights on the way: now wait for the kernel that wrote the activations */
        for (int it = 0; it < n_it; it++) {
            if (it + S - 1 < n_it) issue(it + S - 1); /* into the buffer the last round read */
            cp_async_commit();
            cp_async_wait<S - 1>(); /* this thread's copies of round `it` have landed */
            __syncwarp();           /* and the other lanes' */
            const int c = cfirst + it * step + lane;
            if (c < nch) {
                const uint8_t *seg = buf + (it % S) * R * SEGP;
                typename Q::xin x;
                Q::xload(c, a, 0, x);
#pragma unroll
                for (int j = 0; j < R; j++) {
                    typename Q::raw r;
                    Q::load(seg + j * SEGP, lane, r); /* the lane's chunk, at its offset in the run */
                    acc[j] = ob_fadd(acc[j], Q::dot1(r, c, x));
                }
            }
            __syncwarp(); /* every lane has read the buffer before the next round refills it */
        }
    }
#pragma unroll
    for (int j = 0; j < R; j++) acc[j] = warp_sum(acc[j]);
    if (wpr > 1) row_sum_warps<R>(red, acc, wpr, warp, sub, lane);
    if (sub == 0 && lane == 0)
#pragma unroll
        for (int j = 0; j < R; j++)
            if (row0 + j < nout) out[row0 + j] = acc[j] + (bias ? bias[row0 + j] : 0.0f);
}

/* Batches of 9..64 tokens in one launch: a warp per row reads each weight
 * chunk once, decodes it once, and multiplies it by every token's
 * activations; each lane keeps its partial sums of all tokens in shared
 * memory (a column per lane: no bank conflicts, no synchronisation), summed
 * over the warp at the end. The weights are read once per batch instead of
 * once per 8 tokens. */
#define MMVQ_BATCH_MAX 64

template <int T>
__global__ void __launch_bounds__(MMVQ_WARPS * OB_WARP)
    mmvq_batch_kernel(const uint8_t *__restrict__ w, size_t nb1, int nch, int nout, q8_act a, int n,
                      const float *__restrict__ bias, float *__restrict__ out, int64_t ldo) {
    typedef ob_qdot<T> Q;
    __shared__ float acc[MMVQ_WARPS][MMVQ_BATCH_MAX][OB_WARP];
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row = blockIdx.x * MMVQ_WARPS + warp;
    if (row >= nout) return; /* whole warps */
    for (int t = 0; t < n; t++) acc[warp][t][lane] = 0.0f;
    const uint8_t *wr = w + (size_t)row * nb1;
    for (int c = lane; c < nch; c += OB_WARP) {
        typename Q::raw r;
        Q::load(wr, c, r);
        typename Q::dec d;
        Q::decode(r, c, d);
        for (int t = 0; t < n; t++) {
            typename Q::xin x;
            Q::xload(c, a, t, x);
            acc[warp][t][lane] = ob_fadd(acc[warp][t][lane], Q::dotd(d, c, x));
        }
    }
    const float b0 = bias ? bias[row] : 0.0f;
    for (int t = 0; t < n; t++) {
        const float v = warp_sum(acc[warp][t][lane]);
        if (lane == 0) out[t * ldo + row] = v + b0;
    }
}

/* Record the gate/up pair just recorded (c->mmvq_pend, two matrices of equal rows) again as
 * one launch of mmvq_kernel's GLU form (cuda_op_glu has checked the pair): the pair's wpr, so
 * every row's sums keep their order, and R / 2 rows of each matrix a warp (2 rows: one of each,
 * when the plain kernel took one or two). */
template <int T, int NT, int U, int R>
static int mmvq_glu_go(cuda_backend *c, const cuda_glu_out *g) {
    constexpr int RM = R >= 4 ? R / 2 : 1;
    cuda_mmvq_pend *p = &c->mmvq_pend;
    mmvq_set s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < 2; i++) {
        s.w[i] = (const uint8_t *)p->w[i], s.bias[i] = p->bias[i], s.out[i] = p->out[i], s.ldo[i] = p->ldo[i];
        s.nout[i] = p->nout[i];
    }
    const int wpr = p->wpr;
    const int nblk = (int)ob_div_up((size_t)((p->nout[0] + RM - 1) / RM), (size_t)(MMVQ_WARPS / wpr));
    s.b1 = s.b2 = nblk, s.wpr = wpr;
    q8_act a;
    a.qx = (const int8_t *)p->in0;
    a.dx = (const float *)p->in1;
    a.ldq = p->ld;
    a.ldd = p->ldd;
    c->n_recs--; /* the pair's launch, recorded last (checked by the caller), made again */
    c->rec_used = p->rec_off;
    c->rec_pdl = c->pdl;
    OB_TRY(cuda_launch(c, mmvq_kernel<T, NT, U, 2 * RM, true>, dim3((unsigned)nblk), dim3(MMVQ_WARPS * OB_WARP), 0, s,
                       p->nb1, (int)p->nch, a, *g));
    p->rec = -1;
    return 0;
}

/* Launch (or record) one product; while a graph is recorded, a product of
 * the same input right after another one of the same kernel joins its
 * launch instead (OB_CUDA_MMVQ_FUSE=0: never). Batch-invariant mode never
 * joins: a joined set may split rows over warps differently. */
template <int T, int NT, int U, int R, int CP>
static int mmvq_go(cuda_backend *c, const ob_tensor *w, int64_t nin, int64_t nout, const q8_act &a,
                   const float *bias, float *out, int64_t ldo) {
    /* CP > 0: the streaming kernel (one token), copying CP bytes at a time */
    const void *fn;
    if constexpr (CP != 0) fn = (const void *)mmvq_stream_kernel<T, R, CP>;
    else fn = (const void *)mmvq_kernel<T, NT, U, R, false>;
    const size_t nb1 = w->nb[1];
    const int nch = (int)(nin / ob_qdot<T>::QK * ob_qdot<T>::CHUNKS);
    cuda_mmvq_pend *p = &c->mmvq_pend;
    const bool join = c->recording && c->mmvq_fuse && !c->invariant && p->rec >= 0 && p->rec == c->n_recs - 1 &&
                      p->func == fn && p->n < MMVQ_SET_MAX && p->in0 == a.qx && p->in1 == a.dx && p->ld == a.ldq &&
                      p->nb1 == nb1 && p->nch == nch;
    if (!join) p->n = 0;
    const int k = p->n++;
    p->w[k] = w->data, p->bias[k] = bias, p->out[k] = out, p->ldo[k] = ldo, p->nout[k] = (int)nout;
    /* enough warps in flight: wpr warps share a row (group of R rows) when the groups are few */
    int64_t groups = 0;
    for (int i = 0; i < p->n; i++) groups += (p->nout[i] + R - 1) / R;
    const int64_t want = (int64_t)c->n_sm * c->mmvq_want;
    /* batch-invariant mode: the split of a row over warps (and so the order of its sums) must
     * not depend on the batch; R does not change a row's order, so it is chosen from the rows */
    const int64_t wgroups = c->invariant ? nout : groups;
    int wpr = wgroups >= want ? 1 : 2 * wgroups >= want ? 2 : 4;
    while (wpr > 1 && nch < OB_WARP * wpr) wpr /= 2;
    mmvq_set s;
    memset(&s, 0, sizeof s);
    int nblk = 0, first[MMVQ_SET_MAX + 1];
    for (int i = 0; i < p->n; i++) {
        first[i] = nblk;
        nblk += (int)ob_div_up((size_t)((p->nout[i] + R - 1) / R), (size_t)(MMVQ_WARPS / wpr));
        s.w[i] = (const uint8_t *)p->w[i], s.bias[i] = p->bias[i], s.out[i] = p->out[i], s.ldo[i] = p->ldo[i];
        s.nout[i] = p->nout[i];
    }
    for (int i = p->n; i <= MMVQ_SET_MAX; i++) first[i] = nblk;
    s.b1 = first[1], s.b2 = first[2], s.wpr = wpr;
    const dim3 grid((unsigned)nblk), block(MMVQ_WARPS * OB_WARP);
    p->op = c->n_ops, p->wpr = wpr; /* what the GLU after a gate/up pair needs (mmvq_glu_go) */
    if (join) return cuda_rec_rewrite_last(c, fn, grid, 0, &s, sizeof s);
    c->rec_pdl = c->pdl; /* the recorded launch may start early (hopper.cuh) */
    const size_t rec_off = c->rec_used;
    if constexpr (CP != 0) {
        typedef mmvq_stream_shape<T> SH;
        const size_t smem = (size_t)MMVQ_WARPS * SH::S * R * SH::SEGP;
        OB_TRY(cuda_launch(c, mmvq_stream_kernel<T, R, CP>, grid, block, smem, s, nb1, nch, a));
    } else {
        cuda_glu_out g;
        memset(&g, 0, sizeof g);
        OB_TRY(cuda_launch(c, mmvq_kernel<T, NT, U, R, false>, grid, block, 0, s, nb1, nch, a, g));
    }
    if (c->recording) {
        p->rec = c->n_recs - 1, p->func = fn, p->in0 = a.qx, p->in1 = a.dx, p->ld = a.ldq, p->nb1 = nb1, p->nch = nch;
        p->rec_off = rec_off, p->ntok = NT, p->ldd = a.ldd;
        p->glu = CP == 0 ? mmvq_glu_go<T, NT, U, R> : NULL;
    } else {
        p->rec = -1;
    }
    return 0;
}

template <int T>
static int mmvq_launch(cuda_backend *c, const ob_tensor *w, int64_t nin, int64_t nout, const q8_act &a, int n,
                       const float *bias, float *out, int64_t ldo) {
    /* One token: R rows a warp (OB_CUDA_MMVQ_R = 1, 2 or 4) and U chunks in
     * flight (OB_CUDA_MMVQ_U = 1 or 2); more tokens: a row a warp. */
    const int R = n == 1 ? c->mmvq_r : 1;
    const int U = n == 1 ? c->mmvq_u : n <= 2 ? 2 : 1;
#define OB_L(NT, U_, R_) OB_TRY((mmvq_go<T, NT, U_, R_, 0>(c, w, nin, nout, a, bias, out, ldo)))
#define OB_S(R_, CP_) OB_TRY((mmvq_go<T, 1, 1, R_, CP_>(c, w, nin, nout, a, bias, out, ldo)))
    if (n == 1 && c->mmvq_stream && R <= 2) {
        /* the largest copy the rows' starts and runs are aligned to */
        const uintptr_t al = (uintptr_t)w->data | (uintptr_t)w->nb[1] | (uintptr_t)mmvq_stream_shape<T>::SEG |
                             (uintptr_t)(nin / ob_qdot<T>::QK * ob_qdot<T>::BYTES); /* a row's bytes (nb1 may pad) */
        const int cp = al % 16 == 0 ? 16 : al % 8 == 0 ? 8 : al % 4 == 0 ? 4 : 0;
        if (cp) {
            if (R == 2) {
                if (cp == 16) OB_S(2, 16);
                else if (cp == 8) OB_S(2, 8);
                else OB_S(2, 4);
            } else {
                if (cp == 16) OB_S(1, 16);
                else if (cp == 8) OB_S(1, 8);
                else OB_S(1, 4);
            }
            return 0;
        }
    }
    if (n == 1) {
        if (R >= 4) OB_L(1, 1, 4);
        else if (R == 2 && U >= 2) OB_L(1, 2, 2);
        else if (R == 2) OB_L(1, 1, 2);
        else if (U >= 2) OB_L(1, 2, 1);
        else OB_L(1, 1, 1);
        return 0;
    }
    switch (n) {
    case 2: OB_L(2, 2, 1); break;
    case 3: OB_L(3, 1, 1); break;
    case 4: OB_L(4, 1, 1); break;
    case 5: OB_L(5, 1, 1); break;
    case 6: OB_L(6, 1, 1); break;
    case 7: OB_L(7, 1, 1); break;
    case 8: OB_L(8, 1, 1); break;
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmvq: %d tokens (1..8)", n);
    }
#undef OB_L
#undef OB_S
    return 0;
}

bool cuda_qdot_fits(const ob_tensor *w) {
    const int t = (int)w->type;
    if (!ob_qdot_has(t)) return false;
    const int64_t qk = t == OB_TYPE_Q4_0 || t == OB_TYPE_Q8_0 || t == OB_TYPE_IQ4_NL || t == OB_TYPE_MXFP4 ? 64 : 256;
    /* Q4_K and Q5_K are read in 16-byte pieces, IQ4_XS in 8-byte ones, Q4_0, Q8_0 and IQ4_NL block pairs in
     * 4-byte ones, Q6_K, MXFP4, TQ2_0 and TQ1_0 in 2-byte ones */
    const size_t align = t == OB_TYPE_Q4_K || t == OB_TYPE_Q5_K ? 16
                         : t == OB_TYPE_IQ4_XS                  ? 8
                         : t == OB_TYPE_Q6_K || t == OB_TYPE_MXFP4 || t == OB_TYPE_TQ2_0 || t == OB_TYPE_TQ1_0
                             ? 2
                             : 4;
    return w->ne[0] % qk == 0 && w->nb[1] % align == 0 && ((uintptr_t)w->data % align) == 0;
}

bool cuda_mmvq_usable(const cuda_backend *c, const ob_tensor *w, int64_t n) {
    if (!c->mmvq || n > c->mmv_max || !ob_qdot_has((int)w->type)) return false;
    /* the table types take the decode kernel alone (up to 8 tokens): no tensor-core product
     * or bf16 copy for them, and the batch kernel was not measured against mmv.cuh's */
    const bool tab = w->type == OB_TYPE_IQ4_NL || w->type == OB_TYPE_MXFP4 || w->type == OB_TYPE_IQ4_XS ||
                     w->type == OB_TYPE_TQ2_0 || w->type == OB_TYPE_TQ1_0;
    if (tab && (n > 8 || c->invariant)) return false;
    return cuda_qdot_fits(w);
}

int cuda_q8_target(cuda_backend *c, int64_t n, int64_t nin, int8_t **qx, float **dx) {
    const size_t qbytes = ((size_t)(n * nin) + 255) & ~(size_t)255;
    OB_TRY(cuda_scratch(c, &c->q8_scratch, &c->q8_scratch_bytes, qbytes + (size_t)(n * (nin / 32)) * 2 * sizeof(float)));
    *qx = (int8_t *)c->q8_scratch;
    *dx = (float *)((uint8_t *)c->q8_scratch + qbytes);
    return 0;
}

void cuda_q8_made_at(cuda_backend *c, const void *src, int64_t n, int64_t nin, const int8_t *qx, const float *dx) {
    c->q8_src = src;
    c->q8_n = n;
    c->q8_nin = nin;
    c->q8_op = c->n_ops;
    c->q8_qx = qx;
    c->q8_dx = dx;
}

void cuda_q8_made(cuda_backend *c, const void *src, int64_t n, int64_t nin) { cuda_q8_made_at(c, src, n, nin, NULL, NULL); }

int cuda_glu_target(cuda_backend *c, int64_t n, int64_t d, int8_t **qx, float **dx, int **cnt) {
    const size_t cbytes = (size_t)(d / 32) * sizeof(int);
    if (cbytes > c->glu_cnt_bytes) {
        OB_TRY(cuda_scratch(c, (void **)&c->glu_cnt, &c->glu_cnt_bytes, cbytes)); /* drains: not recording now */
        OB_CU(cudaMemsetAsync(c->glu_cnt, 0, c->glu_cnt_bytes, c->stream));
    }
    /* room for 8 tokens, the most a fused product has, so a later step of more does not drain */
    const int64_t nr = n > 8 ? n : 8, qroom = ((nr * d) + 255) & ~(int64_t)255;
    OB_TRY(cuda_scratch(c, &c->glu_q8, &c->glu_q8_bytes, (size_t)qroom + (size_t)(nr * (d / 32)) * 2 * sizeof(float)));
    const size_t qbytes = ((size_t)(n * d) + 255) & ~(size_t)255;
    *qx = (int8_t *)c->glu_q8;
    *dx = (float *)((uint8_t *)c->glu_q8 + qbytes);
    *cnt = c->glu_cnt;
    return 0;
}

int cuda_mmvq_matmul(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    const int64_t nin = w->ne[0], nb = nin / 32, n = x->ne[1];
    int8_t *qx;
    float *dx;
    OB_TRY(cuda_q8_target(c, n, nin, &qx, &dx));
    /* The input's q8 copy is reused when the op just before made it: a
     * norm or activation that wrote it (elementwise.cu), or a product on
     * the same input (q, k and v; gate and up). Nothing else ran in between
     * (the op count moved by one), so input and copy still agree. */
    const bool same = c->q8_src == x->data && c->q8_n == n && c->q8_nin == nin && c->q8_op + 1 == c->n_ops;
    if (!same) {
        const int64_t warps = n * nb;
        cuda_pdl_next(c);
        OB_TRY(cuda_launch(c, q8_act_kernel, ob_div_up((size_t)warps, 8), 256, 0,
            (const float *)x->data, (int64_t)(x->nb[1] / sizeof(float)), nin, (int)n, qx, dx));
        cuda_q8_made(c, x->data, n, nin);
    } else {
        if (c->q8_qx) qx = (int8_t *)c->q8_qx, dx = (float *)c->q8_dx; /* a fused GLU's copy (glu_q8) */
        cuda_q8_made_at(c, x->data, n, nin, c->q8_qx, c->q8_dx);
    }
    return cuda_q8_products(c, w, qx, dx, n, cuda_mmq_usable(c, w, n), bias ? (const float *)bias->data : NULL,
                            (float *)out->data, (int64_t)(out->nb[1] / sizeof(float)));
}

int cuda_q8_products(cuda_backend *c, const ob_tensor *w, const int8_t *qx, const float *dx, int64_t n, bool mmq,
                     const float *bd, float *o, int64_t ldo) {
    const int64_t nin = w->ne[0], nout = w->ne[1];
    const int64_t nb = nin / 32;
    if (mmq) {
        q8_act a;
        a.qx = qx;
        a.dx = dx;
        a.ldq = nin;
        a.ldd = 2 * nb;
        return cuda_mmq_matmul(c, w, a, n, bd, o, ldo);
    }
    if (n > 8 && n <= MMVQ_BATCH_MAX && !c->invariant) {
        q8_act a;
        a.qx = qx;
        a.dx = dx;
        a.ldq = nin;
        a.ldd = 2 * nb;
        const unsigned grid = ob_div_up((size_t)nout, MMVQ_WARPS);
        const int no = (int)nout, nt = (int)n;
        const uint8_t *wd = (const uint8_t *)w->data;
        switch ((int)w->type) {
#define OB_B(T)                                                                                                       \
    case T: {                                                                                                         \
        const int nch = (int)(nin / ob_qdot<T>::QK * ob_qdot<T>::CHUNKS);                                            \
        OB_TRY(cuda_launch(c, mmvq_batch_kernel<T>, grid, MMVQ_WARPS * OB_WARP, 0, wd, w->nb[1], nch, no, a, nt, bd, o, \
                           ldo));                                                                                     \
        break;                                                                                                        \
    }
            OB_B(OB_TYPE_Q4_0) OB_B(OB_TYPE_Q8_0) OB_B(OB_TYPE_Q4_K) OB_B(OB_TYPE_Q5_K) OB_B(OB_TYPE_Q6_K)
#undef OB_B
        default: return ob_cuda_err(OB_ERR_INTERNAL, "mmvq: type %d", (int)w->type);
        }
        return 0;
    }
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        q8_act a;
        a.qx = qx + t0 * nin;
        a.dx = dx + t0 * 2 * nb;
        a.ldq = nin;
        a.ldd = 2 * nb;
        const int nt = (int)(n - t0 < 8 ? n - t0 : 8);
        float *ot = o + t0 * ldo;
        switch ((int)w->type) {
        case OB_TYPE_Q4_0: OB_TRY(mmvq_launch<OB_TYPE_Q4_0>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_Q8_0: OB_TRY(mmvq_launch<OB_TYPE_Q8_0>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_Q4_K: OB_TRY(mmvq_launch<OB_TYPE_Q4_K>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_Q5_K: OB_TRY(mmvq_launch<OB_TYPE_Q5_K>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_Q6_K: OB_TRY(mmvq_launch<OB_TYPE_Q6_K>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_IQ4_NL: OB_TRY(mmvq_launch<OB_TYPE_IQ4_NL>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_MXFP4: OB_TRY(mmvq_launch<OB_TYPE_MXFP4>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_IQ4_XS: OB_TRY(mmvq_launch<OB_TYPE_IQ4_XS>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_TQ2_0: OB_TRY(mmvq_launch<OB_TYPE_TQ2_0>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        case OB_TYPE_TQ1_0: OB_TRY(mmvq_launch<OB_TYPE_TQ1_0>(c, w, nin, nout, a, nt, bd, ot, ldo)); break;
        default: return ob_cuda_err(OB_ERR_INTERNAL, "mmvq: type %d", (int)w->type);
        }
    }
    return 0;
}
