/*
 * mmv16.cu - the decode matrix-vector kernel for F16 and BF16 weights, 1..8
 * tokens (ob_cuda matmul for those types at decode batches).
 *
 * mmv.cuh's kernel stages every tile of weights through shared memory so
 * that one kernel serves every block layout; for 16-bit weights, whose
 * elements need no block decoding, that round trip and its warp barriers
 * kept the 8B BF16 decode at about half of the memory bandwidth (143 tok/s
 * against llama.cpp's 202 on the H200). Here each lane loads 8 weights (16
 * bytes) straight into registers, U loads in flight before any is used, and
 * multiplies them by the tokens' activations (float4 loads, cached). A row
 * is dealt to its wpr warps in runs of 32 x 16 bytes; wpr comes from the row
 * count only, and each token's sums run in the same order whatever the
 * number of tokens, so results do not depend on the batch (batch-invariant
 * mode takes this kernel too).
 *
 * Needs rows of a multiple of 8 elements starting on 16-byte boundaries
 * (the caller checks); OB_CUDA_MMV16=0 keeps mmv.cuh's kernel. In a graph
 * the kernel may start before the one before it ends (hopper.cuh): its first
 * weight loads are issued before it waits for that kernel.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "hopper.cuh"
#include "matmul.cuh"

#define MMV16_WARPS 4
#define MMV16_U 4

template <bool BF> static __device__ __forceinline__ void to8(const uint4 &r, float *w) {
    const uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (BF) {
            w[2 * i] = __uint_as_float(u[i] << 16);
            w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
        } else {
            const float2 f = __half22float2(*(const __half2 *)&u[i]);
            w[2 * i] = f.x;
            w[2 * i + 1] = f.y;
        }
    }
}

template <bool BF, int NT>
__global__ void __launch_bounds__(MMV16_WARPS * OB_WARP) mmv16_kernel(mmv_args a, int wpr) {
    __shared__ float red[MMV16_WARPS][NT];
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row = blockIdx.x * (MMV16_WARPS / wpr) + warp / wpr, sub = warp % wpr;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (row < a.nout) {
        const uint4 *wr = (const uint4 *)(a.w + (size_t)row * a.nb1);
        const int64_t nv = a.nch; /* 8-element chunks = 16-byte loads */
        const int64_t step = (int64_t)OB_WARP * wpr;
        for (int64_t v0 = (int64_t)sub * OB_WARP + lane; v0 < nv; v0 += step * MMV16_U) {
            uint4 r[MMV16_U];
#pragma unroll
            for (int u = 0; u < MMV16_U; u++)
                if (v0 + u * step < nv) r[u] = __ldg(wr + v0 + u * step);
            ob_pdl_wait(); /* weights in flight: now wait for the kernel that wrote x (at once after the first) */
#pragma unroll
            for (int u = 0; u < MMV16_U; u++) {
                const int64_t v = v0 + u * step;
                if (v >= nv) break;
                float w[8];
                to8<BF>(r[u], w);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const float4 *xp = (const float4 *)(a.x + t * a.ldx + v * 8);
                    const float4 p = __ldg(xp), q = __ldg(xp + 1);
                    float s = acc[t];
                    s = fmaf(w[0], p.x, s);
                    s = fmaf(w[1], p.y, s);
                    s = fmaf(w[2], p.z, s);
                    s = fmaf(w[3], p.w, s);
                    s = fmaf(w[4], q.x, s);
                    s = fmaf(w[5], q.y, s);
                    s = fmaf(w[6], q.z, s);
                    s = fmaf(w[7], q.w, s);
                    acc[t] = s;
                }
            }
        }
    }
    ob_pdl_wait(); /* lanes without chunks, before the write below */
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
    if (row < a.nout && sub == 0 && lane == 0) {
        const float b0 = a.bias ? a.bias[row] : 0.0f;
#pragma unroll
        for (int t = 0; t < NT; t++) a.out[t * a.ldo + row] = acc[t] + b0;
    }
}

template <bool BF> static int mmv16_launch_t(cuda_backend *c, const mmv_args *a) {
    const int64_t want = (int64_t)c->n_sm * 32;
    int wpr = a->nout >= want ? 1 : 2 * (int64_t)a->nout >= want ? 2 : 4;
    while (wpr > 1 && a->nch < (int64_t)OB_WARP * wpr) wpr /= 2;
    const unsigned grid = ob_div_up((size_t)a->nout, (size_t)(MMV16_WARPS / wpr));
    const dim3 block(MMV16_WARPS * OB_WARP);
    c->rec_pdl = c->pdl; /* may start early in a graph: the weight loads do not wait (hopper.cuh) */
    switch (a->n) {
#define OB_N(N) \
    case N: return cuda_launch(c, mmv16_kernel<BF, N>, grid, block, 0, *a, wpr);
        OB_N(1) OB_N(2) OB_N(3) OB_N(4) OB_N(5) OB_N(6) OB_N(7) OB_N(8)
#undef OB_N
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmv16: %d tokens (1..8)", a->n);
    }
}

int cuda_mmv16_launch(cuda_backend *c, int type, const mmv_args *a) {
    return type == OB_TYPE_BF16 ? mmv16_launch_t<true>(c, a) : mmv16_launch_t<false>(c, a);
}
