/*
 * layer.cu - a dense layer of one token in two persistent launches
 * (ob_backend_ops.layer_qkv and layer_ffn; docs/cuda.md, OB_CUDA_LAYER).
 * Experimental and off (OB_CUDA_LAYER=1 turns it on): correct, and slower
 * than the chain of kernels it replaces (bench/RESULTS.md, CUDA session 16).
 *
 * Why it was tried: a decode step of a small model is a chain of short
 * kernels (norm, products, GLU, adds), and each pays 2.5-4 us to ramp up and
 * drain (bench/RESULTS.md, CUDA sessions 7-13). Here one launch of one
 * 1024-thread block per multiprocessor does a half layer, its phases
 * separated by grid-wide barriers instead of kernel boundaries:
 *
 *   lk_qkv_kernel   every block: h = rms_norm(x) * w as q8 in shared memory
 *                   (each block makes the same copy from the same 16 KB: no
 *                   barrier needed), then rows of q, k and v;
 *   lk_ffn_kernel   phase 1: att as q8; rows of wo, x[r] += o[r] + bo[r]
 *                   barrier
 *                   phase 2: rms_norm(x) as q8; a gate row and the same up
 *                   row a unit, h[r] = act(g) * u
 *                   barrier
 *                   phase 3: h as q8; rows of down, x[r] += d[r].
 *
 * A unit is one row (two for the gate/up pair) for one warp; its sum is the
 * integer decode kernel's (mmvq.cu with one warp a row: a lane takes chunks
 * lane, lane + 32, ... and the warp's sum is a shuffle tree), and the
 * activations are quantized as q8_act_kernel does, so a row's result equals
 * that kernel's whenever it too runs a warp a row. Each combination of
 * weight types is its own instantiation (LK_COMBOS), every product inlined.
 *
 * Why it is slower: ncu on the 8B (Qwen3-8B Q4_K_M) puts lk_ffn_kernel at
 * 57 us for ~100 MB (DRAM 39% of peak, warps stalled on L1TEX loads 43% of
 * the time): with 64 registers a thread one chunk of each row is in flight
 * a lane, and every phase change drains the memory pipe, waits at the
 * barrier and re-reads its input from L2 before the next loads go out.
 * Prefetching the next rows into L2 (prefetch.global.L2) made it slower
 * still. What would be needed: weights streamed by copy engines into rings
 * of shared memory that run ahead across the barriers.
 *
 * The barrier needs every block resident at once: the grid is the number of
 * blocks the occupancy calculator says fit on the device, and no other
 * persistent kernel may hold part of the device while a launch waits - the
 * kernel after it in a graph starts only when all of this one's blocks have;
 * a second backend on the same device could, so one backend a device runs
 * these (cuda_layer_claim), the others run op by op.
 */
#ifndef __HIP_PLATFORM_AMD__
#include <cuda/atomic>
#endif

#include "hopper.cuh"
#include "matmul.cuh"
#include "mmvq.cuh"

#define LK_T 1024                /* threads a block */
#define LK_W (LK_T / OB_WARP)    /* warps a block */

/* One weight matrix of a phase: rows of nch chunks (mmvq.cuh), nb1 bytes apart. */
struct lk_mat {
    const uint8_t *w;
    uint64_t nb1;
    const float *bias; /* [nout] or NULL */
    float *out;        /* [nout] (lk_qkv) */
    int type, nch, nout;
};

struct lk_bar {
    unsigned count, gen;
};

struct lk_qkv_args {
    const float *x, *norm;
    float eps;
    int E;
    lk_mat q, k, v;
};

struct lk_ffn_args {
    float *x;
    const float *att, *norm;
    float *h; /* [F]: act(gate) * up */
    lk_bar *bar;
    float eps;
    int E, Q, F, act;
    lk_mat o, gate, up, down;
};

/* ---- pieces ---- */

/* Wait until every block of the grid has arrived; what a block wrote before is visible to
 * every block after. A count and a generation: the last to arrive resets the count and
 * moves the generation on, so the same two words serve every barrier of every launch. */
static __device__ __forceinline__ void lk_grid_sync(lk_bar *b) {
    __syncthreads();
    if (threadIdx.x == 0) {
#ifdef __HIP_PLATFORM_AMD__
        __threadfence();
        const unsigned g = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
        if (atomicAdd(&b->count, 1u) == gridDim.x - 1) {
            __atomic_store_n(&b->count, 0u, __ATOMIC_RELAXED);
            __atomic_store_n(&b->gen, g + 1, __ATOMIC_RELEASE);
        } else {
            while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == g) {
            }
        }
        __threadfence();
#else
        cuda::atomic_ref<unsigned, cuda::thread_scope_device> cnt(b->count), gen(b->gen);
        cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);
        const unsigned g = gen.load(cuda::memory_order_relaxed); /* cannot move before this block arrives */
        if (cnt.fetch_add(1u, cuda::memory_order_acq_rel) == gridDim.x - 1) {
            cnt.store(0u, cuda::memory_order_relaxed);
            gen.store(g + 1, cuda::memory_order_release);
        } else {
            while (gen.load(cuda::memory_order_acquire) == g) {
            }
        }
        cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);
#endif
    }
    __syncthreads();
}

/* A warp's 32 values of q8 block g (lane i: element 32g + i): q8_put_warp's operations. */
static __device__ __forceinline__ void lk_put(int8_t *qx, float *dx, int g, int lane, float o) {
    const float amax = warp_max(fabsf(o));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const float q = roundf(o * id);
    qx[g * OB_WARP + lane] = (int8_t)q;
    const float sum = warp_sum(q); /* small integers: exact */
    if (lane == 0) dx[2 * g] = d, dx[2 * g + 1] = d * sum;
}

#define LK_GMAX 8 /* q8 blocks a warp loads before it quantizes any (norms of rows up to 8 x 32 x 32 = 8192) */

/* The q8 copy of src[0..K) into shared memory; src was written by other blocks (read
 * through L2: L1 is not coherent between multiprocessors). Warp w takes blocks w, w + 32,
 * ..., all of its loads issued before the first is used. */
static __device__ void lk_q8(const float *src, int K, int8_t *qx, float *dx) {
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP, ng = K / OB_WARP;
    for (int g0 = warp; g0 < ng; g0 += LK_W * LK_GMAX) {
        float v[LK_GMAX];
#pragma unroll
        for (int k = 0; k < LK_GMAX; k++) {
            const int g = g0 + k * LK_W;
            v[k] = g < ng ? __ldcg(src + g * OB_WARP + lane) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < LK_GMAX; k++)
            if (g0 + k * LK_W < ng) lk_put(qx, dx, g0 + k * LK_W, lane, v[k]);
    }
    __syncthreads();
}

/* The q8 copy of rms_norm(x) * w, x[0..E), E <= 32 x 32 x LK_GMAX: the values in registers
 * (loaded at once), the sum of squares by fmaf over a thread's values and then the block,
 * the scaling as rms_norm_vec_kernel's: (x s) w. */
static __device__ void lk_norm_q8(const float *x, const float *w, float eps, int E, int8_t *qx, float *dx,
                                  float *red) {
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP, ng = E / OB_WARP;
    float v[LK_GMAX], ss = 0.0f;
#pragma unroll
    for (int k = 0; k < LK_GMAX; k++) {
        const int g = warp + k * LK_W;
        v[k] = g < ng ? __ldcg(x + g * OB_WARP + lane) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < LK_GMAX; k++) ss = fmaf(v[k], v[k], ss);
    ss = block_sum(ss, red);
    const float s = 1.0f / sqrtf(ss / (float)E + eps);
#pragma unroll
    for (int k = 0; k < LK_GMAX; k++) {
        const int g = warp + k * LK_W;
        if (g < ng) lk_put(qx, dx, g, lane, (v[k] * s) * w[g * OB_WARP + lane]);
    }
    __syncthreads();
}

/* NR rows (row pointers rw) of type T against the q8 activations a: every lane's chunks
 * lane, lane + 32, ... summed in that order, then the warp's shuffle tree; lanes hold the
 * sums. One chunk of each row in flight a lane: 1024 threads a block leave 64 registers a
 * thread (two chunks a lane spilled). */
template <int T, int NR>
static __device__ __forceinline__ void lk_rows(const uint8_t *const (&rw)[NR], int nch, const q8_act &a, int lane,
                                            float (&acc)[NR]) {
    typedef ob_qdot<T> Q;
#pragma unroll
    for (int j = 0; j < NR; j++) acc[j] = 0.0f;
    for (int c = lane; c < nch; c += OB_WARP) {
        typename Q::raw r[NR];
#pragma unroll
        for (int j = 0; j < NR; j++) Q::load(rw[j], c, r[j]);
        typename Q::xin x;
        Q::xload(c, a, 0, x);
#pragma unroll
        for (int j = 0; j < NR; j++) acc[j] = ob_fadd(acc[j], Q::dot1(r[j], c, x));
    }
#pragma unroll
    for (int j = 0; j < NR; j++) acc[j] = warp_sum(acc[j]);
}

/* A row of type T for the unit's warp (lk_rows with one row). */
template <int T>
static __device__ __forceinline__ float lk_row(const uint8_t *w, int nch, const q8_act &a, int lane) {
    const uint8_t *const rw[1] = {w};
    float acc[1];
    lk_rows<T, 1>(rw, nch, a, lane, acc);
    return acc[0];
}

/* Shared memory: the q8 copy of the longest input (K bytes, K / 32 pairs of floats) and 32
 * floats for block sums. */
static size_t lk_smem(int kmax) { return (size_t)kmax + (size_t)(kmax / 32) * 2 * sizeof(float) + 32 * sizeof(float); }

struct lk_smem_view {
    int8_t *qx;
    float *dx, *red;
};
static __device__ __forceinline__ lk_smem_view lk_carve(uint8_t *s, int kmax) {
    lk_smem_view v;
    v.qx = (int8_t *)s;
    v.dx = (float *)(s + kmax); /* kmax is a multiple of 256: 16-byte aligned */
    v.red = v.dx + 2 * (kmax / 32);
    return v;
}

/* ---- the kernels ---- */

/* Unit u of the q/k/v rows (q's, then k's, then v's): its matrix and row, field by field so
 * the arguments stay in the parameter bank. */
static __device__ __forceinline__ lk_mat lk_pick(const lk_qkv_args &p, int u, int *row) {
    const int r1 = p.q.nout, r2 = r1 + p.k.nout;
    const int m = u < r1 ? 0 : u < r2 ? 1 : 2;
    lk_mat o;
    o.w = m == 0 ? p.q.w : m == 1 ? p.k.w : p.v.w;
    o.nb1 = m == 0 ? p.q.nb1 : m == 1 ? p.k.nb1 : p.v.nb1;
    o.bias = m == 0 ? p.q.bias : m == 1 ? p.k.bias : p.v.bias;
    o.out = m == 0 ? p.q.out : m == 1 ? p.k.out : p.v.out;
    o.type = m == 0 ? p.q.type : m == 1 ? p.k.type : p.v.type;
    o.nch = m == 0 ? p.q.nch : m == 1 ? p.k.nch : p.v.nch;
    o.nout = m == 0 ? p.q.nout : m == 1 ? p.k.nout : p.v.nout;
    *row = u - (m == 0 ? 0 : m == 1 ? r1 : r2);
    return o;
}

/* One instantiation per combination of weight types (lk_combos): every product inlined, so
 * registers are allotted for the types at hand and nothing is spilled around calls. */
template <int TQ, int TK, int TV>
__global__ void __launch_bounds__(LK_T, 1) lk_qkv_kernel(const lk_qkv_args p, int kmax) {
    extern __shared__ __align__(16) uint8_t lk_s[];
    const lk_smem_view sv = lk_carve(lk_s, kmax);
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int gw = (int)blockIdx.x * LK_W + warp, nw = (int)gridDim.x * LK_W;
    const int rows = p.q.nout + p.k.nout + p.v.nout;
    ob_pdl_wait(); /* x is the kernel before's */
    lk_norm_q8(p.x, p.norm, p.eps, p.E, sv.qx, sv.dx, sv.red);
    q8_act a;
    a.qx = sv.qx, a.dx = sv.dx, a.ldq = p.E, a.ldd = 2 * (p.E / 32);
    for (int u = gw; u < rows; u += nw) {
        int r;
        const lk_mat m = lk_pick(p, u, &r);
        const uint8_t *const w = m.w + (uint64_t)r * m.nb1;
        const int mi = u < p.q.nout ? 0 : u < p.q.nout + p.k.nout ? 1 : 2;
        const float acc = mi == 0 ? lk_row<TQ>(w, m.nch, a, lane)
                          : mi == 1 ? lk_row<TK>(w, m.nch, a, lane)
                                    : lk_row<TV>(w, m.nch, a, lane);
        if (lane == 0) m.out[r] = acc + (m.bias ? m.bias[r] : 0.0f);
    }
}

template <int TO, int TG, int TD>
__global__ void __launch_bounds__(LK_T, 1) lk_ffn_kernel(const lk_ffn_args p, int kmax) {
    extern __shared__ __align__(16) uint8_t lk_s[];
    const lk_smem_view sv = lk_carve(lk_s, kmax);
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int gw = (int)blockIdx.x * LK_W + warp, nw = (int)gridDim.x * LK_W;
    q8_act a;

    /* phase 1: x += wo att + bo (a row's x is read and written by the one warp that owns
     * row r in phases 1 and 3: the same mapping) */
    ob_pdl_wait(); /* att and x are the kernels' before */
    lk_q8(p.att, p.Q, sv.qx, sv.dx);
    a.qx = sv.qx, a.dx = sv.dx, a.ldq = p.Q, a.ldd = 2 * (p.Q / 32);
    for (int u = gw; u < p.E; u += nw) {
        const float acc = lk_row<TO>(p.o.w + (uint64_t)u * p.o.nb1, p.o.nch, a, lane);
        if (lane == 0) p.x[u] = __ldcg(p.x + u) + (acc + (p.o.bias ? p.o.bias[u] : 0.0f));
    }

    /* phase 2: h = act(gate n) * up n, n = rms_norm(x) * norm */
    lk_grid_sync(p.bar);
    lk_norm_q8(p.x, p.norm, p.eps, p.E, sv.qx, sv.dx, sv.red);
    a.ldq = p.E, a.ldd = 2 * (p.E / 32);
    for (int u = gw; u < p.F; u += nw) {
        const uint8_t *const rw[2] = {p.gate.w + (uint64_t)u * p.gate.nb1, p.up.w + (uint64_t)u * p.up.nb1};
        float acc[2];
        lk_rows<TG, 2>(rw, p.gate.nch, a, lane, acc);
        if (lane == 0) p.h[u] = act_f(p.act, acc[0]) * acc[1];
    }

    /* phase 3: x += down h */
    lk_grid_sync(p.bar);
    lk_q8(p.h, p.F, sv.qx, sv.dx);
    a.ldq = p.F, a.ldd = 2 * (p.F / 32);
    for (int u = gw; u < p.E; u += nw) {
        const float acc = lk_row<TD>(p.down.w + (uint64_t)u * p.down.nb1, p.down.nch, a, lane);
        if (lane == 0) p.x[u] = __ldcg(p.x + u) + acc;
    }
}

/* ---- the ops ---- */

/* The combinations of weight types instantiated (q, k, v; o, gate/up, down): the mixes of
 * llama.cpp's common files - Q4_K_M and Q5_K_M (Q6_K in half of attn_v and ffn_down), Q4_0,
 * Q8_0, Q6_K. Anything else runs op by op. */
#define LK_COMBOS(X)                                                                                                  \
    X(OB_TYPE_Q4_K, OB_TYPE_Q4_K, OB_TYPE_Q4_K)                                                                       \
    X(OB_TYPE_Q4_K, OB_TYPE_Q4_K, OB_TYPE_Q6_K)                                                                       \
    X(OB_TYPE_Q5_K, OB_TYPE_Q5_K, OB_TYPE_Q5_K)                                                                       \
    X(OB_TYPE_Q5_K, OB_TYPE_Q5_K, OB_TYPE_Q6_K)                                                                       \
    X(OB_TYPE_Q6_K, OB_TYPE_Q6_K, OB_TYPE_Q6_K)                                                                       \
    X(OB_TYPE_Q4_0, OB_TYPE_Q4_0, OB_TYPE_Q4_0)                                                                       \
    X(OB_TYPE_Q8_0, OB_TYPE_Q8_0, OB_TYPE_Q8_0)

typedef void (*lk_qkv_fn)(const lk_qkv_args, int);
typedef void (*lk_ffn_fn)(const lk_ffn_args, int);

static lk_qkv_fn lk_qkv_pick(int a, int b, int c) {
#define OB_X(A, B, C)                                                                                                 \
    if (a == A && b == B && c == C) return lk_qkv_kernel<A, B, C>;
    LK_COMBOS(OB_X)
#undef OB_X
    return NULL;
}
static lk_ffn_fn lk_ffn_pick(int a, int b, int c) {
#define OB_X(A, B, C)                                                                                                 \
    if (a == A && b == B && c == C) return lk_ffn_kernel<A, B, C>;
    LK_COMBOS(OB_X)
#undef OB_X
    return NULL;
}

/* Whether the fused layers may run at all on this backend now. */
static bool lk_on(cuda_backend *c) { return c->layer_fuse && !c->invariant && cuda_layer_claim(c); }

static bool lk_row1(const ob_tensor *t, int64_t d) {
    return t && t->type == OB_TYPE_F32 && t->ne[0] == d && t->ne[1] == 1 && t->data;
}

static bool lk_weight(const cuda_backend *c, const ob_tensor *w, int64_t nin) {
    return w && w->ne[0] == nin && w->ne[1] <= (1 << 30) && cuda_mmvq_usable(c, w, 1);
}

static lk_mat lk_of(const ob_tensor *w, const ob_tensor *bias, float *out) {
    lk_mat m;
    m.w = (const uint8_t *)w->data;
    m.nb1 = (uint64_t)w->nb[1];
    m.bias = bias ? (const float *)bias->data : NULL;
    m.out = out;
    m.type = (int)w->type;
    m.nch = ob_qdot_row_chunks(m.type, w->ne[0]);
    m.nout = (int)w->ne[1];
    return m;
}

static bool lk_bias_ok(const ob_tensor *b, int64_t n) { return !b || (b->type == OB_TYPE_F32 && b->ne[0] == n); }

/* The grid (blocks that fit at once) and shared memory of a fused-layer kernel, the barrier
 * words on first use. */
static int lk_prepare(cuda_backend *c, int ki, const void *k, int kmax, unsigned *grid, size_t *smem) {
    *smem = lk_smem(kmax);
    if (*smem > 48 * 1024) return OB_ERR_UNSUPPORTED; /* an input of more than ~38,000 */
    if (c->lk_grid_smem[ki] != *smem) { /* every instantiation: 1024 threads, <= 64 registers */
        int per_sm = 0;
        OB_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, LK_T, *smem));
        c->lk_grid[ki] = per_sm > 0 ? (unsigned)(per_sm * c->n_sm) : 0;
        c->lk_grid_smem[ki] = *smem;
    }
    if (!c->lk_grid[ki]) return OB_ERR_UNSUPPORTED;
    *grid = c->lk_grid[ki];
    if (!c->lk_bar) {
        OB_TRY(cuda_scratch(c, &c->lk_bar, &c->lk_bar_bytes, sizeof(lk_bar))); /* drains: not recording now */
        OB_CU(cudaMemsetAsync(c->lk_bar, 0, c->lk_bar_bytes, c->stream));
    }
    return 0;
}

int cuda_op_layer_qkv(ob_backend *b, const ob_layer_qkv *p) {
    cuda_backend *c = cuda_of(b);
    if (!lk_on(c)) return OB_ERR_UNSUPPORTED;
    const int64_t E = p->x->ne[0];
    if (!lk_row1(p->x, E) || E % 256 || E > LK_W * OB_WARP * LK_GMAX || !p->norm || p->norm->type != OB_TYPE_F32 || p->norm->ne[0] != E)
        return OB_ERR_UNSUPPORTED;
    const ob_tensor *w[3] = {p->wq, p->wk, p->wv}, *bs[3] = {p->bq, p->bk, p->bv};
    ob_tensor *o[3] = {p->q, p->k, p->v};
    for (int i = 0; i < 3; i++)
        if (!lk_weight(c, w[i], E) || !lk_row1(o[i], w[i]->ne[1]) || !lk_bias_ok(bs[i], w[i]->ne[1]))
            return OB_ERR_UNSUPPORTED;
    const lk_qkv_fn k = lk_qkv_pick((int)p->wq->type, (int)p->wk->type, (int)p->wv->type);
    if (!k) return OB_ERR_UNSUPPORTED;
    OB_TRY(cuda_enter(c));
    unsigned grid;
    size_t smem;
    int rc = lk_prepare(c, 0, (const void *)k, (int)E, &grid, &smem);
    if (rc) return rc;
    lk_qkv_args a;
    a.x = (const float *)p->x->data;
    a.norm = (const float *)p->norm->data;
    a.eps = p->eps;
    a.E = (int)E;
    a.q = lk_of(p->wq, p->bq, (float *)p->q->data);
    a.k = lk_of(p->wk, p->bk, (float *)p->k->data);
    a.v = lk_of(p->wv, p->bv, (float *)p->v->data);
    cuda_pdl_next(c);
    OB_TRY(cuda_launch(c, k, grid, LK_T, smem, a, (int)E));
    c->n_layer_fused++;
    return 0;
}

int cuda_op_layer_ffn(ob_backend *b, const ob_layer_ffn *p) {
    cuda_backend *c = cuda_of(b);
    if (!lk_on(c)) return OB_ERR_UNSUPPORTED;
    const int64_t E = p->x->ne[0], Q = p->att->ne[0];
    if (!p->gate || !p->up || !p->down) return OB_ERR_UNSUPPORTED;
    const int64_t F = p->gate->ne[1];
    if (!lk_row1(p->x, E) || !lk_row1(p->att, Q) || E % 256 || E > LK_W * OB_WARP * LK_GMAX || Q % 256 || F % 256 || !p->norm ||
        p->norm->type != OB_TYPE_F32 || p->norm->ne[0] != E)
        return OB_ERR_UNSUPPORTED;
    if (!lk_weight(c, p->wo, Q) || p->wo->ne[1] != E || !lk_bias_ok(p->bo, E) || !lk_weight(c, p->gate, E) ||
        !lk_weight(c, p->up, E) || p->up->ne[1] != F || p->up->type != p->gate->type || !lk_weight(c, p->down, F) ||
        p->down->ne[1] != E)
        return OB_ERR_UNSUPPORTED;
    const lk_ffn_fn k = lk_ffn_pick((int)p->wo->type, (int)p->gate->type, (int)p->down->type);
    if (!k) return OB_ERR_UNSUPPORTED;
    OB_TRY(cuda_enter(c));
    const int64_t kmax = E > Q ? (E > F ? E : F) : (Q > F ? Q : F);
    unsigned grid;
    size_t smem;
    int rc = lk_prepare(c, 1, (const void *)k, (int)kmax, &grid, &smem);
    if (rc) return rc;
    OB_TRY(cuda_scratch(c, &c->lk_h, &c->lk_h_bytes, (size_t)F * sizeof(float))); /* drains once */
    lk_ffn_args a;
    a.x = (float *)p->x->data;
    a.att = (const float *)p->att->data;
    a.norm = (const float *)p->norm->data;
    a.h = (float *)c->lk_h;
    a.bar = (lk_bar *)c->lk_bar;
    a.eps = p->eps;
    a.E = (int)E, a.Q = (int)Q, a.F = (int)F, a.act = p->act;
    a.o = lk_of(p->wo, p->bo, NULL);
    a.gate = lk_of(p->gate, NULL, NULL);
    a.up = lk_of(p->up, NULL, NULL);
    a.down = lk_of(p->down, NULL, NULL);
    cuda_pdl_next(c);
    OB_TRY(cuda_launch(c, k, grid, LK_T, smem, a, (int)kmax));
    c->n_layer_fused++;
    return 0;
}
