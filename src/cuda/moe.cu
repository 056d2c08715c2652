/*
 * moe.cu - the routed experts of a mixture-of-experts FFN on the device
 * (ob_backend_ops.moe_ffn), so a decode step of an MoE model never waits for
 * the host: without it the model downloads the router's logits every layer,
 * routes on the host and runs each chosen expert as its own products.
 *
 * For n tokens with k experts each, P = n * k (token, slot) pairs:
 *
 *   route     a warp per token: softmax over the router logits, the k
 *             largest (ties: lower index), renormalised when asked
 *   q8(h)     the n input rows as q8 activations (mmvq.cuh)
 *   gate, up  per pair, expert sel[pair]'s matrix times its token's row:
 *             the integer decode kernel's dot products with the weight
 *             pointer looked up per pair (grid.y = pair)
 *   glu       silu(gate) * up, written as q8 rows for the down product
 *   down      per pair, as gate/up on the pair's own row
 *   sum       out[t] = sum over slots of weight * down row, in slot order
 *
 * Each pair reads its expert's bytes once: at decode (n = 1) that is the k
 * experts and nothing else, as the floor counts it. Larger batches would
 * re-read an expert once per token routed to it: past moe_pairs pairs
 * (OB_CUDA_MOE_PAIRS, default 64) the pairs are grouped by expert instead
 * (moe_grouped: one host round trip for the expert ids, then one
 * tensor-core launch per matrix over all experts). Batch-invariant mode
 * (a token's result must not depend on its batch) keeps the per-pair path
 * for every n. A shape neither path takes (past MOE_MAX_PAIRS pairs without
 * the tensor-core kernel's types) is declined: the model routes on the host.
 *
 * The expert matrices were uploaded one by one (cuda_weight), so their
 * device addresses are kept in a table per layer: built the first time a
 * layer is seen (keyed by the ob_tensor arrays, checked against the current
 * addresses every call) and read by the kernels.
 */
#include <math.h>
#include <string.h>

#include "matmul.cuh"
#include "mmq.cuh"
#include "mmvq.cuh"

#define MOE_WARPS 4
#define MOE_MAX_PAIRS 256
#define MOE_Q8_LOADS 8 /* q8 blocks a warp of moe_route_q8_kernel loads at once */
#define MOE_GU_WARPS 8 /* moe_gate_up_kernel: 4 rows of gate and up a warp */

__global__ void q8_act_kernel(const float *__restrict__ x, int64_t ldx, int64_t nin, int n, int8_t *__restrict__ qx,
                              float *__restrict__ dx);

/* Pair blockIdx.y: rows of expert sel[pair] (wtab) times activation row
 * pair / xdiv; a warp per row (wpr warps share one when rows are few), as
 * mmvq_kernel with one token and one row a warp. */
template <int T, int U>
__global__ void __launch_bounds__(MOE_WARPS * OB_WARP)
    moe_mmvq_kernel(const uint8_t *const *__restrict__ wtab, const int32_t *__restrict__ sel, size_t nb1, int nch,
                    int nout, q8_act a, int xdiv, float *__restrict__ out, int64_t ldo, int wpr) {
    typedef ob_qdot<T> Q;
    __shared__ float red[MOE_WARPS][1];
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row = blockIdx.x * (MOE_WARPS / wpr) + warp / wpr, sub = warp % wpr;
    const int pair = blockIdx.y;
    q8_act at = a;
    at.qx += (int64_t)(pair / xdiv) * a.ldq;
    at.dx += (int64_t)(pair / xdiv) * a.ldd;
    float acc = 0.0f;
    if (row < nout) {
        const uint8_t *wr = wtab[sel[pair]] + (size_t)row * nb1;
        const int step = OB_WARP * wpr;
        typename Q::raw r[U];
        for (int c0 = sub * OB_WARP + lane; c0 < nch; c0 += step * U) {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (c0 + u * step < nch) Q::load(wr, c0 + u * step, r[u]);
#pragma unroll
            for (int u = 0; u < U; u++)
                if (c0 + u * step < nch) {
                    typename Q::xin x;
                    Q::xload(c0 + u * step, at, 0, x);
                    acc = ob_fadd(acc, Q::dot1(r[u], c0 + u * step, x));
                }
        }
    }
    acc = warp_sum(acc);
    if (wpr > 1) row_sum_warps<1>(red, &acc, wpr, warp, sub, lane);
    if (sub == 0 && lane == 0 && row < nout) out[(int64_t)pair * ldo + row] = acc;
}

/* silu(g) * u, and its q8 copy (a warp per 32-element block: d % 32 == 0). */
__global__ void moe_glu_q8_kernel(const float *__restrict__ g, const float *__restrict__ u, int64_t d, int64_t total,
                                  int8_t *__restrict__ qx, float *__restrict__ dx) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return; /* whole warps */
    const float gv = g[i];
    const float o = gv / (1.0f + expf(-gv)) * u[i];
    const float amax = warp_max(fabsf(o));
    const float dq = amax / 127.0f, id = dq != 0.0f ? 1.0f / dq : 0.0f;
    const float q = roundf(o * id);
    qx[i] = (int8_t)q;
    const float sum = warp_sum(q);
    if (i % 32 == 0) {
        const int64_t b = i / 32;
        dx[2 * b] = dq;
        dx[2 * b + 1] = dq * sum;
    }
    (void)d;
}

/* out[t] = sum over slots q of wsel[t k + q] * y row (pos ? pos[t k + q] : t k + q). */
__global__ void moe_sum_kernel(const float *__restrict__ y, const float *__restrict__ wsel,
                               const int32_t *__restrict__ pos, int k, int64_t e, int64_t total,
                               float *__restrict__ out, int64_t ldo) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int64_t t = i / e, j = i % e;
    float s = 0.0f;
    for (int q = 0; q < k; q++) {
        const int64_t r = pos ? pos[t * k + q] : t * k + q;
        s += wsel[t * k + q] * y[r * e + j];
    }
    out[t * ldo + j] = s;
}

/* Grouped rows: q8 row g = q8 row rows[g] of the source (32 bytes and one scale pair a thread). */
__global__ void moe_gather_q8_kernel(const int8_t *__restrict__ qx, const float *__restrict__ dx,
                                     const int32_t *__restrict__ rows, int64_t nin, int64_t total,
                                     int8_t *__restrict__ qg, float *__restrict__ dg) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; /* one 32-value block */
    if (i >= total) return;
    const int64_t nb = nin / 32, g = i / nb, b = i % nb, r = rows[g];
    const int4 *src = (const int4 *)(qx + r * nin + 32 * b);
    int4 *dst = (int4 *)(qg + g * nin + 32 * b);
    dst[0] = src[0];
    dst[1] = src[1];
    *(float2 *)(dg + 2 * (g * nb + b)) = *(const float2 *)(dx + 2 * (r * nb + b));
}

/* The decode path's three launches. */

/* Block per token: warp 0 routes - softmax over the router logits (p[] in
 * shared memory: the probabilities, -1 once taken), the k largest, ties to
 * the lower index, renormalised when asked - and every warp quantizes
 * blocks of the token's input row to q8. */
__global__ void moe_route_q8_kernel(const float *__restrict__ logits, int64_t ldl, int ne, int k, int norm,
                                    int32_t *__restrict__ sel, float *__restrict__ wsel, const float *__restrict__ h,
                                    int64_t ldh, int64_t E, int8_t *__restrict__ qh, float *__restrict__ dh) {
    extern __shared__ float p[];
    const int t = blockIdx.x, warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP,
              nq = blockDim.x / OB_WARP - 1;
    if (warp > 0) { /* q8: warp w takes blocks w - 1, w - 1 + nq, ..., all its loads issued first */
        const int64_t nb = E / 32;
        for (int64_t b0 = warp - 1; b0 < nb; b0 += (int64_t)nq * MOE_Q8_LOADS) {
            float v[MOE_Q8_LOADS];
#pragma unroll
            for (int i = 0; i < MOE_Q8_LOADS; i++) {
                const int64_t b = b0 + (int64_t)i * nq;
                v[i] = b < nb ? h[t * ldh + 32 * b + lane] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < MOE_Q8_LOADS; i++) {
                const int64_t b = b0 + (int64_t)i * nq;
                if (b >= nb) break; /* the same for the whole warp */
                const float amax = warp_max(fabsf(v[i]));
                const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                const float q = roundf(v[i] * id);
                qh[t * E + 32 * b + lane] = (int8_t)q;
                const float sum = warp_sum(q);
                if (lane == 0) dh[2 * (t * nb + b)] = d, dh[2 * (t * nb + b) + 1] = d * sum;
            }
        }
        return;
    }
    const float *l = logits + (int64_t)t * ldl;
    float mx = -INFINITY;
    for (int e = lane; e < ne; e += OB_WARP) mx = fmaxf(mx, l[e]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int e = lane; e < ne; e += OB_WARP) {
        const float v = expf(l[e] - mx);
        p[e] = v;
        s += v;
    }
    s = warp_sum(s);
    for (int e = lane; e < ne; e += OB_WARP) p[e] = p[e] / s;
    __syncwarp();
    float wsum = 0.0f;
    for (int j = 0; j < k; j++) {
        float bv = -1.0f;
        int bi = ne;
        for (int e = lane; e < ne; e += OB_WARP)
            if (p[e] > bv) bv = p[e], bi = e;
#pragma unroll
        for (int o = OB_WARP / 2; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(OB_FULL_MASK, bv, o);
            const int oi = __shfl_xor_sync(OB_FULL_MASK, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
        }
        wsum += bv;
        __syncwarp();
        if (lane == 0) {
            sel[t * k + j] = bi;
            wsel[t * k + j] = bv;
            p[bi] = -1.0f;
        }
        __syncwarp();
    }
    if (norm && lane < k) wsel[t * k + lane] = wsel[t * k + lane] / wsum;
}

/* Block (32 rows f0.., pair): gate and up rows of expert sel[pair] times the
 * token's q8 row (a warp per 4 rows of each, the 8 rows' loads issued
 * together), then silu(gate) * up of the 32 rows as one q8 block of the down
 * product's input. */
template <int T>
__global__ void __launch_bounds__(MOE_GU_WARPS * OB_WARP)
    moe_gate_up_kernel(const uint8_t *const *__restrict__ tg, const uint8_t *const *__restrict__ tu,
                       const int32_t *__restrict__ sel, size_t nb1, int nch, int F, q8_act a, int k,
                       int8_t *__restrict__ qa, float *__restrict__ da) {
    typedef ob_qdot<T> Q;
    __shared__ float gv[2][32];
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int pair = blockIdx.y, f0 = blockIdx.x * 32, e = sel[pair];
    q8_act at = a;
    at.qx += (int64_t)(pair / k) * a.ldq;
    at.dx += (int64_t)(pair / k) * a.ldd;
    const uint8_t *bg = tg[e] + (size_t)(f0 + 4 * warp) * nb1, *bu = tu[e] + (size_t)(f0 + 4 * warp) * nb1;
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; j++) acc[j] = 0.0f;
    for (int c = lane; c < nch; c += OB_WARP) {
        typename Q::raw r[8];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            Q::load(bg + (size_t)j * nb1, c, r[j]);
            Q::load(bu + (size_t)j * nb1, c, r[4 + j]);
        }
        typename Q::xin x;
        Q::xload(c, at, 0, x);
#pragma unroll
        for (int j = 0; j < 8; j++) acc[j] = ob_fadd(acc[j], Q::dot1(r[j], c, x));
    }
#pragma unroll
    for (int j = 0; j < 8; j++) acc[j] = warp_sum(acc[j]);
    if (lane == 0)
#pragma unroll
        for (int j = 0; j < 4; j++) gv[0][4 * warp + j] = acc[j], gv[1][4 * warp + j] = acc[4 + j];
    __syncthreads();
    if (warp != 0) return;
    const float g = gv[0][lane];
    const float o = g / (1.0f + expf(-g)) * gv[1][lane];
    const float amax = warp_max(fabsf(o));
    const float dq = amax / 127.0f, id = dq != 0.0f ? 1.0f / dq : 0.0f;
    const float q = roundf(o * id);
    qa[(int64_t)pair * F + f0 + lane] = (int8_t)q;
    const float sum = warp_sum(q);
    if (lane == 0) {
        const int64_t b = (int64_t)pair * (F / 32) + f0 / 32;
        da[2 * b] = dq;
        da[2 * b + 1] = dq * sum;
    }
}

/* Warp per (output row, token): the k slots' chunks dealt out to the lanes
 * together, each chunk's dot product times its slot's weight, summed. */
template <int T>
__global__ void __launch_bounds__(MOE_WARPS * OB_WARP)
    moe_down_sum_kernel(const uint8_t *const *__restrict__ tab, const int32_t *__restrict__ sel,
                        const float *__restrict__ wsel, size_t nb1, int nch, int E, q8_act a, int k,
                        float *__restrict__ out, int64_t ldo) {
    typedef ob_qdot<T> Q;
    constexpr int U = 4;
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row = blockIdx.x * MOE_WARPS + warp, t = blockIdx.y;
    if (row >= E) return; /* whole warps; no barrier below */
    const int total = k * nch;
    float acc = 0.0f;
    for (int i0 = lane; i0 < total; i0 += OB_WARP * U) {
        typename Q::raw r[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = i0 + u * OB_WARP;
            if (i < total) Q::load(tab[sel[t * k + i / nch]] + (size_t)row * nb1, i % nch, r[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = i0 + u * OB_WARP;
            if (i < total) {
                const int slot = t * k + i / nch, c = i % nch;
                q8_act at = a;
                at.qx += (int64_t)slot * a.ldq;
                at.dx += (int64_t)slot * a.ldd;
                typename Q::xin x;
                Q::xload(c, at, 0, x);
                acc = ob_fadd(acc, ob_fmul(wsel[slot], Q::dot1(r[u], c, x)));
            }
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) out[(int64_t)t * ldo + row] = acc;
}

/* ---- expert address tables ---- */

typedef struct moe_table {
    const ob_tensor *key;     /* the layer's gate array */
    int n_expert;
    const void **host;        /* [3][n_expert] addresses as last uploaded */
    const uint8_t **dev;      /* the same on the device */
} moe_table;

static int moe_tables(cuda_backend *c, const ob_moe_params *p, const uint8_t *const **out) {
    const int ne = p->n_expert;
    moe_table *tab = NULL;
    for (int i = 0; i < c->n_moe_tabs; i++)
        if (c->moe_tabs[i].key == p->gate && c->moe_tabs[i].n_expert == ne) tab = &c->moe_tabs[i];
    if (!tab) {
        if (c->n_moe_tabs == c->cap_moe_tabs) {
            const int cap = c->cap_moe_tabs ? 2 * c->cap_moe_tabs : 64;
            moe_table *m = (moe_table *)realloc(c->moe_tabs, (size_t)cap * sizeof *m);
            if (!m) return ob_cuda_err(OB_ERR_OOM, "CUDA expert tables");
            c->moe_tabs = m;
            c->cap_moe_tabs = cap;
        }
        tab = &c->moe_tabs[c->n_moe_tabs];
        memset(tab, 0, sizeof *tab);
        tab->host = (const void **)calloc((size_t)(3 * ne), sizeof(void *));
        if (!tab->host) return ob_cuda_err(OB_ERR_OOM, "CUDA expert table");
        if (cudaMalloc((void **)&tab->dev, (size_t)(3 * ne) * sizeof(void *)) != cudaSuccess) {
            free(tab->host);
            return ob_cuda_err(OB_ERR_OOM, "CUDA expert table of %d experts", ne);
        }
        tab->key = p->gate;
        tab->n_expert = ne;
        c->n_moe_tabs++;
    }
    bool same = true;
    for (int e = 0; e < ne && same; e++)
        same = tab->host[e] == p->gate[e].data && tab->host[ne + e] == p->up[e].data &&
               tab->host[2 * ne + e] == p->down[e].data;
    if (!same) {
        for (int e = 0; e < ne; e++) {
            tab->host[e] = p->gate[e].data;
            tab->host[ne + e] = p->up[e].data;
            tab->host[2 * ne + e] = p->down[e].data;
        }
        /* synchronous: done before any kernel recorded after this reads it */
        OB_CU(cudaMemcpy(tab->dev, tab->host, (size_t)(3 * ne) * sizeof(void *), cudaMemcpyHostToDevice));
    }
    *out = tab->dev;
    return 0;
}

void cuda_moe_free(cuda_backend *c) {
    for (int i = 0; i < c->n_moe_tabs; i++) {
        free(c->moe_tabs[i].host);
        cudaFree(c->moe_tabs[i].dev);
    }
    free(c->moe_tabs);
    c->moe_tabs = NULL;
    c->n_moe_tabs = c->cap_moe_tabs = 0;
}

/* Weights the kernels read: a type with integer dot products, rows whole
 * blocks, aligned as mmvq.cu reads them, every expert of an array alike. */
static bool moe_usable(const ob_tensor *w, int ne, int64_t nin, int64_t nout) {
    for (int e = 0; e < ne; e++) /* a type, shape or alignment the expert kernels cannot read: none of them */
        if (w[e].type != w[0].type || w[e].ne[0] != nin || w[e].ne[1] != nout || w[e].nb[1] != w[0].nb[1] ||
            !cuda_qdot_fits(&w[e]))
            return false;
    return true;
}

template <int T>
static int moe_launch_t(cuda_backend *c, const uint8_t *const *wtab, const int32_t *sel, size_t nb1, int64_t nin,
                        int64_t nout, const q8_act &a, int xdiv, int pairs, float *out, int64_t ldo) {
    const int nch = (int)(nin / ob_qdot<T>::QK * ob_qdot<T>::CHUNKS);
    /* as mmvq_launch: enough warps in flight, the split of a row chosen from the rows alone in
     * batch-invariant mode */
    const int64_t want = (int64_t)c->n_sm * c->mmvq_want, rows = c->invariant ? nout : nout * pairs;
    int wpr = rows >= want ? 1 : 2 * rows >= want ? 2 : 4;
    while (wpr > 1 && nch < OB_WARP * wpr) wpr /= 2;
    const dim3 grid(ob_div_up((size_t)nout, (size_t)(MOE_WARPS / wpr)), (unsigned)pairs);
    const int no = (int)nout;
    if (c->mmvq_u >= 2)
        return cuda_launch(c, moe_mmvq_kernel<T, 2>, grid, MOE_WARPS * OB_WARP, 0, wtab, sel, nb1, nch, no, a, xdiv,
                           out, ldo, wpr);
    return cuda_launch(c, moe_mmvq_kernel<T, 1>, grid, MOE_WARPS * OB_WARP, 0, wtab, sel, nb1, nch, no, a, xdiv, out,
                       ldo, wpr);
}

static int moe_launch(cuda_backend *c, int type, const uint8_t *const *wtab, const int32_t *sel, size_t nb1,
                      int64_t nin, int64_t nout, const q8_act &a, int xdiv, int pairs, float *out, int64_t ldo) {
    switch (type) {
    case OB_TYPE_Q4_0: return moe_launch_t<OB_TYPE_Q4_0>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_Q8_0: return moe_launch_t<OB_TYPE_Q8_0>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_Q4_K: return moe_launch_t<OB_TYPE_Q4_K>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_Q5_K: return moe_launch_t<OB_TYPE_Q5_K>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_Q6_K: return moe_launch_t<OB_TYPE_Q6_K>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_IQ4_NL: return moe_launch_t<OB_TYPE_IQ4_NL>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_MXFP4: return moe_launch_t<OB_TYPE_MXFP4>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_IQ4_XS: return moe_launch_t<OB_TYPE_IQ4_XS>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_TQ2_0: return moe_launch_t<OB_TYPE_TQ2_0>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    case OB_TYPE_TQ1_0: return moe_launch_t<OB_TYPE_TQ1_0>(c, wtab, sel, nb1, nin, nout, a, xdiv, pairs, out, ldo);
    default: return ob_cuda_err(OB_ERR_INTERNAL, "moe: type %d", type);
    }
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Large batches: the routing comes back to the host (one download of
 * n * k expert ids), which groups the pairs by expert; the activations are
 * gathered in that order and each of the three products is one launch of
 * the tensor-core kernel over every expert (mmq.cu, ID mode); the sum reads
 * each token's rows through `pos`. */
static int moe_grouped(cuda_backend *c, const ob_moe_params *p, const uint8_t *const *tab, const int32_t *sel,
                       const float *wsel, const int8_t *qh, const float *dh, int64_t n, int64_t E, int64_t F,
                       uint8_t *s, size_t o_qg, size_t o_dg, size_t o_g, size_t o_u, size_t o_y, size_t o_qa,
                       size_t o_da, float *out, int64_t ldo) {
    const int ne = p->n_expert, k = p->n_used;
    const int64_t pairs = n * k;
    /* host: ids, counts and starts, then (staged in one piece) starts, rows and positions */
    const size_t nids = (size_t)pairs, nstage = (size_t)(ne + 1) + 2 * (size_t)pairs;
    void *tmp;
    OB_TRY(cuda_host_tmp(c, (nids + nstage + (size_t)ne) * sizeof(int32_t), &tmp));
    int32_t *ids = (int32_t *)tmp, *st = ids + nids, *rows = st + ne + 1, *pos = rows + pairs, *fill = pos + pairs;
    OB_TRY(cuda_flush(c));
    OB_CU(cudaMemcpyAsync(ids, sel, nids * sizeof(int32_t), cudaMemcpyDeviceToHost, c->stream));
    OB_TRY(cuda_drain(c));
    memset(fill, 0, (size_t)ne * sizeof(int32_t));
    for (int64_t i = 0; i < pairs; i++) {
        if (ids[i] < 0 || ids[i] >= ne) return ob_cuda_err(OB_ERR_INTERNAL, "moe: expert id %d", ids[i]);
        fill[ids[i]]++;
    }
    int max_rows = 0;
    st[0] = 0;
    for (int e = 0; e < ne; e++) {
        st[e + 1] = st[e] + fill[e];
        if (fill[e] > max_rows) max_rows = fill[e];
        fill[e] = 0;
    }
    for (int64_t i = 0; i < pairs; i++) { /* pairs of an expert in token order */
        const int e = ids[i], g = st[e] + fill[e]++;
        rows[g] = (int32_t)(i / k);
        pos[i] = g;
    }
    const void *dev;
    OB_TRY(cuda_stage(c, st, nstage * sizeof(int32_t), &dev));
    const int32_t *st_d = (const int32_t *)dev, *rows_d = st_d + ne + 1, *pos_d = rows_d + pairs;

    int8_t *qg = (int8_t *)(s + o_qg), *qa = (int8_t *)(s + o_qa);
    float *dg = (float *)(s + o_dg), *da = (float *)(s + o_da), *g = (float *)(s + o_g), *u = (float *)(s + o_u),
          *y = (float *)(s + o_y);
    const int64_t blocks = pairs * (E / 32);
    OB_TRY(cuda_launch(c, moe_gather_q8_kernel, ob_div_up((size_t)blocks, 256), 256, 0, qh, dh, rows_d, E, blocks,
                       qg, dg));
    q8_act ag;
    ag.qx = qg;
    ag.dx = dg;
    ag.ldq = E;
    ag.ldd = 2 * (E / 32);
    OB_TRY(cuda_mmq_id(c, (int)p->gate[0].type, tab, st_d, ne, max_rows, p->gate[0].nb[1], E, F, ag, g, F));
    OB_TRY(cuda_mmq_id(c, (int)p->up[0].type, tab + ne, st_d, ne, max_rows, p->up[0].nb[1], E, F, ag, u, F));
    OB_TRY(cuda_launch(c, moe_glu_q8_kernel, ob_div_up((size_t)(pairs * F), 256), 256, 0, (const float *)g,
                       (const float *)u, F, pairs * F, qa, da));
    q8_act aa;
    aa.qx = qa;
    aa.dx = da;
    aa.ldq = F;
    aa.ldd = 2 * (F / 32);
    OB_TRY(cuda_mmq_id(c, (int)p->down[0].type, tab + 2 * ne, st_d, ne, max_rows, p->down[0].nb[1], F, E, aa, y, E));
    return cuda_launch(c, moe_sum_kernel, ob_div_up((size_t)(n * E), 256), 256, 0, (const float *)y, wsel, pos_d, k, E,
                       n * E, out, ldo);
}

int cuda_op_moe_ffn(ob_backend *b, const ob_moe_params *p, const ob_tensor *logits, const ob_tensor *h,
                    ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    const int ne = p->n_expert, k = p->n_used;
    const int64_t n = h->ne[1], E = h->ne[0], F = p->gate[0].ne[1];
    const int64_t pairs = n * k;
    if (ne <= 0 || k <= 0 || k > ne || k > OB_WARP || n <= 0)
        return ob_cuda_err(OB_ERR_INTERNAL, "moe_ffn: %d experts, %d used, %lld tokens", ne, k, (long long)n);
    if (E % 32 || F % 32 || !c->mmvq || (size_t)ne * sizeof(float) > 48 * 1024 || pairs > 65535 * 32)
        return OB_ERR_UNSUPPORTED;
    const bool grouped = !c->invariant && pairs > c->moe_pairs && cuda_mmq_id_usable(c, p->gate, ne) &&
                         cuda_mmq_id_usable(c, p->up, ne) && cuda_mmq_id_usable(c, p->down, ne) &&
                         p->gate[0].ne[0] == E && p->down[0].ne[0] == F && p->down[0].ne[1] == E;
    const bool per_pair = (pairs <= MOE_MAX_PAIRS || c->invariant) && pairs <= 65535 &&
                          moe_usable(p->gate, ne, E, F) && moe_usable(p->up, ne, E, F) &&
                          moe_usable(p->down, ne, F, E);
    if (!grouped && !per_pair) return OB_ERR_UNSUPPORTED;
    const uint8_t *const *tab;
    OB_TRY(moe_tables(c, p, &tab));

    /* scratch: sel, w | gate, up [pairs][F] | y [pairs][E] | q8 of h | q8 of the activations | grouped q8 of h */
    const size_t o_w = align256((size_t)pairs * 4), o_g = o_w + align256((size_t)pairs * 4),
                 o_u = o_g + align256((size_t)(pairs * F) * 4), o_y = o_u + align256((size_t)(pairs * F) * 4),
                 o_qh = o_y + align256((size_t)(pairs * E) * 4), o_dh = o_qh + align256((size_t)(n * E)),
                 o_qa = o_dh + align256((size_t)(n * (E / 32)) * 8), o_da = o_qa + align256((size_t)(pairs * F)),
                 o_qg = o_da + align256((size_t)(pairs * (F / 32)) * 8),
                 o_dg = o_qg + (grouped ? align256((size_t)(pairs * E)) : 0),
                 total = o_dg + (grouped ? align256((size_t)(pairs * (E / 32)) * 8) : 0);
    OB_TRY(cuda_scratch(c, &c->moe_scratch, &c->moe_scratch_bytes, total));
    uint8_t *s = (uint8_t *)c->moe_scratch;
    int32_t *sel = (int32_t *)s;
    float *wsel = (float *)(s + o_w), *g = (float *)(s + o_g), *u = (float *)(s + o_u), *y = (float *)(s + o_y);
    int8_t *qh = (int8_t *)(s + o_qh), *qa = (int8_t *)(s + o_qa);
    float *dh = (float *)(s + o_dh), *da = (float *)(s + o_da);

    /* one routing warp and enough q8 warps to load the row at once (31 at most) */
    const int64_t nq = (E / 32 + MOE_Q8_LOADS - 1) / MOE_Q8_LOADS;
    const unsigned rq = (unsigned)(OB_WARP * (1 + (nq < 31 ? nq : 31)));
    OB_TRY(cuda_launch(c, moe_route_q8_kernel, (unsigned)n, rq, (size_t)ne * sizeof(float),
                       (const float *)logits->data, (int64_t)(logits->nb[1] / 4), ne, k, (int)p->norm, sel, wsel,
                       (const float *)h->data, (int64_t)(h->nb[1] / 4), E, qh, dh));
    if (grouped)
        return moe_grouped(c, p, tab, sel, wsel, qh, dh, n, E, F, s, o_qg, o_dg, o_g, o_u, o_y, o_qa, o_da,
                           (float *)out->data, (int64_t)(out->nb[1] / 4));
    q8_act ah;
    ah.qx = qh;
    ah.dx = dh;
    ah.ldq = E;
    ah.ldd = 2 * (E / 32);
    if (p->gate[0].type == p->up[0].type && p->gate[0].nb[1] == p->up[0].nb[1] && c->moe_fused) {
        /* decode: gate, up and silu in one launch, down and the weighted sum in another */
        q8_act aa;
        aa.qx = qa;
        aa.dx = da;
        aa.ldq = F;
        aa.ldd = 2 * (F / 32);
        const dim3 g1((unsigned)(F / 32), (unsigned)pairs), g2(ob_div_up((size_t)E, MOE_WARPS), (unsigned)n);
        const int nchg = ob_qdot_row_chunks((int)p->gate[0].type, E);
        const int nchd = ob_qdot_row_chunks((int)p->down[0].type, F);
        const size_t nbg = p->gate[0].nb[1], nbd = p->down[0].nb[1];
        float *o = (float *)out->data;
        const int64_t ldo = (int64_t)(out->nb[1] / 4);
        const int Ei = (int)E, Fi = (int)F;
        switch ((int)p->gate[0].type) {
#define OB_GU(T)                                                                                                      \
    case T:                                                                                                           \
        OB_TRY(cuda_launch(c, moe_gate_up_kernel<T>, g1, MOE_GU_WARPS * OB_WARP, 0, tab, tab + ne, (const int32_t *)sel, \
                           nbg, nchg, Fi, ah, k, qa, da));                                                            \
        break;
            OB_GU(OB_TYPE_Q4_0) OB_GU(OB_TYPE_Q8_0) OB_GU(OB_TYPE_Q4_K) OB_GU(OB_TYPE_Q5_K) OB_GU(OB_TYPE_Q6_K)
            OB_GU(OB_TYPE_IQ4_NL) OB_GU(OB_TYPE_MXFP4) OB_GU(OB_TYPE_IQ4_XS) OB_GU(OB_TYPE_TQ2_0) OB_GU(OB_TYPE_TQ1_0)
#undef OB_GU
        default: return ob_cuda_err(OB_ERR_INTERNAL, "moe: type %d", (int)p->gate[0].type);
        }
        switch ((int)p->down[0].type) {
#define OB_DS(T)                                                                                                      \
    case T:                                                                                                           \
        OB_TRY(cuda_launch(c, moe_down_sum_kernel<T>, g2, MOE_WARPS * OB_WARP, 0, tab + 2 * ne, (const int32_t *)sel,  \
                           (const float *)wsel, nbd, nchd, Ei, aa, k, o, ldo));                                       \
        break;
            OB_DS(OB_TYPE_Q4_0) OB_DS(OB_TYPE_Q8_0) OB_DS(OB_TYPE_Q4_K) OB_DS(OB_TYPE_Q5_K) OB_DS(OB_TYPE_Q6_K)
            OB_DS(OB_TYPE_IQ4_NL) OB_DS(OB_TYPE_MXFP4) OB_DS(OB_TYPE_IQ4_XS) OB_DS(OB_TYPE_TQ2_0) OB_DS(OB_TYPE_TQ1_0)
#undef OB_DS
        default: return ob_cuda_err(OB_ERR_INTERNAL, "moe: type %d", (int)p->down[0].type);
        }
        return 0;
    }
    OB_TRY(moe_launch(c, (int)p->gate[0].type, tab, sel, p->gate[0].nb[1], E, F, ah, k, (int)pairs, g, F));
    OB_TRY(moe_launch(c, (int)p->up[0].type, tab + ne, sel, p->up[0].nb[1], E, F, ah, k, (int)pairs, u, F));
    OB_TRY(cuda_launch(c, moe_glu_q8_kernel, ob_div_up((size_t)(pairs * F), 256), 256, 0, (const float *)g,
                       (const float *)u, F, pairs * F, qa, da));
    q8_act aa;
    aa.qx = qa;
    aa.dx = da;
    aa.ldq = F;
    aa.ldd = 2 * (F / 32);
    OB_TRY(moe_launch(c, (int)p->down[0].type, tab + 2 * ne, sel, p->down[0].nb[1], F, E, aa, 1, (int)pairs, y, E));
    OB_TRY(cuda_launch(c, moe_sum_kernel, ob_div_up((size_t)(n * E), 256), 256, 0, (const float *)y,
                       (const float *)wsel, (const int32_t *)NULL, k, E, n * E, (float *)out->data,
                       (int64_t)(out->nb[1] / 4)));
    return 0;
}
