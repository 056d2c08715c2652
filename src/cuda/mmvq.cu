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
#include "matmul.cuh"
#include "mmvq.cuh"

#define MMVQ_WARPS 4

__global__ void q8_act_kernel(const float *__restrict__ x, int64_t ldx, int64_t nin, int n, int8_t *__restrict__ qx,
                              float *__restrict__ dx) {
    const int64_t nb = nin / 32;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP;
    if (gw >= nb * n) return;
    const int lane = threadIdx.x % OB_WARP;
    const int64_t t = gw / nb, b = gw % nb;
    const float v = x[t * ldx + b * 32 + lane];
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    qx[t * nin + b * 32 + lane] = (int8_t)roundf(v * id);
    if (lane == 0) dx[t * nb + b] = d;
}

/* U chunks per lane per round: their weight loads are all issued before
 * any of them is used, so a lane keeps U * 16-32 bytes in flight. */
template <int T, int NT, int U>
__global__ void __launch_bounds__(MMVQ_WARPS * OB_WARP)
    mmvq_kernel(const uint8_t *__restrict__ w, size_t nb1, int nch, int nout, q8_act a,
                const float *__restrict__ bias, float *__restrict__ out, int64_t ldo, int wpr) {
    typedef ob_qdot<T> Q;
    __shared__ float red[MMVQ_WARPS][NT];
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row = blockIdx.x * (MMVQ_WARPS / wpr) + warp / wpr, sub = warp % wpr;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (row < nout) {
        const uint8_t *wr = w + (size_t)row * nb1;
        const int step = OB_WARP * wpr;
        for (int c0 = sub * OB_WARP + lane; c0 < nch; c0 += step * U) {
            typename Q::raw r[U];
#pragma unroll
            for (int k = 0; k < U; k++)
                if (c0 + k * step < nch) Q::load(wr, c0 + k * step, r[k]);
#pragma unroll
            for (int k = 0; k < U; k++)
                if (c0 + k * step < nch) Q::template dot<NT>(r[k], c0 + k * step, a, acc);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = warp_sum(acc[t]);
    if (wpr > 1) {
        if (lane == 0)
#pragma unroll
            for (int t = 0; t < NT; t++) red[warp][t] = acc[t];
        __syncthreads();
        if (sub == 0 && lane == 0)
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float s = 0.0f;
                for (int k = 0; k < wpr; k++) s += red[warp + k][t];
                acc[t] = s;
            }
    }
    if (row < nout && sub == 0 && lane == 0) {
        const float b0 = bias ? bias[row] : 0.0f;
#pragma unroll
        for (int t = 0; t < NT; t++) out[t * ldo + row] = acc[t] + b0;
    }
}

template <int T>
static int mmvq_launch(cuda_backend *c, const ob_tensor *w, int64_t nin, int64_t nout, const q8_act &a, int n,
                       const float *bias, float *out, int64_t ldo) {
    const int64_t want = (int64_t)c->n_sm * c->mmvq_want;
    int wpr = nout >= want ? 1 : 2 * nout >= want ? 2 : 4;
    const int64_t nblocks = nin / ob_qdot<T>::QK;
    const int nch = (int)(nblocks * ob_qdot<T>::CHUNKS);
    while (wpr > 1 && nch < OB_WARP * wpr) wpr /= 2;
    const unsigned grid = ob_div_up((size_t)nout, (size_t)(MMVQ_WARPS / wpr));
    const dim3 block(MMVQ_WARPS * OB_WARP);
    const uint8_t *wd = (const uint8_t *)w->data;
    const size_t nb1 = w->nb[1];
    const int no = (int)nout;
    if (n == 1) { /* chunks in flight per lane: 2 measured best on an H200 (OB_CUDA_MMVQ_U = 2, 4 or 8) */
        if (c->mmvq_u >= 8)
            OB_TRY(cuda_launch(c, mmvq_kernel<T, 1, 8>, grid, block, 0, wd, nb1, nch, no, a, bias, out, ldo, wpr));
        else if (c->mmvq_u >= 4)
            OB_TRY(cuda_launch(c, mmvq_kernel<T, 1, 4>, grid, block, 0, wd, nb1, nch, no, a, bias, out, ldo, wpr));
        else
            OB_TRY(cuda_launch(c, mmvq_kernel<T, 1, 2>, grid, block, 0, wd, nb1, nch, no, a, bias, out, ldo, wpr));
        return 0;
    }
    switch (n) {
#define OB_N(N)                                                                                                  \
    case N:                                                                                                      \
        OB_TRY(cuda_launch(c, mmvq_kernel<T, N, (N <= 2 ? 4 : 2)>, grid, block, 0, wd, nb1, nch, no, a, bias, out, \
                           ldo, wpr));                                                                           \
        break;
        OB_N(1) OB_N(2) OB_N(3) OB_N(4) OB_N(5) OB_N(6) OB_N(7) OB_N(8)
#undef OB_N
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmvq: %d tokens (1..8)", n);
    }
    return 0;
}

bool cuda_mmvq_usable(const cuda_backend *c, const ob_tensor *w, int64_t n) {
    if (!c->mmvq || n > c->mmv_max || !ob_qdot_has((int)w->type)) return false;
    const int64_t qk = w->type == OB_TYPE_Q4_0 || w->type == OB_TYPE_Q8_0 ? 32 : 256;
    /* Q4_K and Q5_K are read in 16-byte pieces, the others in 2-byte ones */
    const size_t align = w->type == OB_TYPE_Q4_K || w->type == OB_TYPE_Q5_K ? 16 : 2;
    return w->ne[0] % qk == 0 && w->nb[1] % align == 0 && ((uintptr_t)w->data % align) == 0;
}

int cuda_q8_target(cuda_backend *c, int64_t n, int64_t nin, int8_t **qx, float **dx) {
    const size_t qbytes = ((size_t)(n * nin) + 255) & ~(size_t)255;
    OB_TRY(cuda_scratch(c, &c->q8_scratch, &c->q8_scratch_bytes, qbytes + (size_t)(n * (nin / 32)) * sizeof(float)));
    *qx = (int8_t *)c->q8_scratch;
    *dx = (float *)((uint8_t *)c->q8_scratch + qbytes);
    return 0;
}

void cuda_q8_made(cuda_backend *c, const void *src, int64_t n, int64_t nin) {
    c->q8_src = src;
    c->q8_n = n;
    c->q8_nin = nin;
    c->q8_op = c->n_ops;
}

int cuda_mmvq_matmul(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    const int64_t nin = w->ne[0], nout = w->ne[1], n = x->ne[1];
    const int64_t nb = nin / 32;
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
        OB_TRY(cuda_launch(c, q8_act_kernel, ob_div_up((size_t)warps, 8), 256, 0, 
            (const float *)x->data, (int64_t)(x->nb[1] / sizeof(float)), nin, (int)n, qx, dx));
    }
    cuda_q8_made(c, x->data, n, nin);
    const int64_t ldo = (int64_t)(out->nb[1] / sizeof(float));
    const float *bd = bias ? (const float *)bias->data : NULL;
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        q8_act a;
        a.qx = qx + t0 * nin;
        a.dx = dx + t0 * nb;
        a.ldq = nin;
        a.ldd = nb;
        const int nt = (int)(n - t0 < 8 ? n - t0 : 8);
        float *o = (float *)out->data + t0 * ldo;
        switch ((int)w->type) {
        case OB_TYPE_Q4_0: OB_TRY(mmvq_launch<OB_TYPE_Q4_0>(c, w, nin, nout, a, nt, bd, o, ldo)); break;
        case OB_TYPE_Q8_0: OB_TRY(mmvq_launch<OB_TYPE_Q8_0>(c, w, nin, nout, a, nt, bd, o, ldo)); break;
        case OB_TYPE_Q4_K: OB_TRY(mmvq_launch<OB_TYPE_Q4_K>(c, w, nin, nout, a, nt, bd, o, ldo)); break;
        case OB_TYPE_Q5_K: OB_TRY(mmvq_launch<OB_TYPE_Q5_K>(c, w, nin, nout, a, nt, bd, o, ldo)); break;
        case OB_TYPE_Q6_K: OB_TRY(mmvq_launch<OB_TYPE_Q6_K>(c, w, nin, nout, a, nt, bd, o, ldo)); break;
        default: return ob_cuda_err(OB_ERR_INTERNAL, "mmvq: type %d", (int)w->type);
        }
    }
    return 0;
}
