/*
 * mmv.cuh - the decode matrix-vector kernel, a template over the weight
 * type and the number of tokens (1..8). Included by the mmv_*.cu files, each
 * of which instantiates a few types so that nvcc builds them in parallel.
 *
 * Layout: a block is 4 warps. With wpr warps per row (1, 2 or 4, chosen so
 * the grid holds enough warps to keep the memory system busy when rows are
 * few), a block covers 4 / wpr rows, and a row's tiles are dealt
 * round-robin to its warps.
 *
 * A tile is a run of whole blocks of the row (2048 elements of quantized
 * types, 1024 of F16/BF16, 512 of F32: 0.4 to 4 KiB). The warp reads it
 * with 16-byte loads, all issued at once and coalesced (the tile's start is
 * rounded down to 16 bytes and the offset remembered, so any block size and
 * row length works), parks it in its slice of shared memory, and the lanes
 * then dequantize 8-element chunks from there with the same ob_qt<T>::deq8
 * as everywhere else. The next tile's loads are issued before the current
 * one is used, so a warp always has a tile in flight while it computes.
 * Loads may run up to 15 bytes past the end of the matrix: weight
 * allocations carry OB_WEIGHT_PAD bytes of padding (backend.cu).
 *
 * Accumulation is float32 FMA per token; partial sums meet by warp shuffle,
 * then across the row's warps in shared memory.
 */
#ifndef OB_CUDA_MMV_CUH
#define OB_CUDA_MMV_CUH

#include "matmul.cuh"
#include "quant.cuh"

#define MMV_WARPS 4

template <int T> struct mmv_tile {
    static constexpr int QK = ob_qt<T>::QK, BYTES = ob_qt<T>::BYTES;
    static constexpr int ELEMS = QK == 8 ? (BYTES == 32 ? 512 : 1024) : 2048; /* elements per tile */
    static constexpr int BLOCKS = ELEMS / QK;
    static constexpr int TBYTES = BLOCKS * BYTES;
    static constexpr int NV = TBYTES / 16 + 2;        /* 16-byte loads, with room for a misaligned start */
    static constexpr int PER_LANE = (NV + OB_WARP - 1) / OB_WARP;
};

template <int T, int NT>
__global__ void __launch_bounds__(MMV_WARPS * OB_WARP) mmv_kernel(mmv_args a, int wpr) {
    typedef mmv_tile<T> TL;
    __shared__ __align__(16) uint4 buf[MMV_WARPS][TL::NV];
    __shared__ float red[MMV_WARPS][NT];
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int rows_per_block = MMV_WARPS / wpr;
    const int row = blockIdx.x * rows_per_block + warp / wpr;
    const int sub = warp % wpr;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;

    if (row < a.nout) {
        const uint8_t *wr = a.w + (size_t)row * a.nb1;
        const int64_t nblocks = a.nch * 8 / TL::QK, ntiles = (nblocks + TL::BLOCKS - 1) / TL::BLOCKS;
        uint4 r[TL::PER_LANE];
        int64_t tile = sub;
        /* the tile's bytes: [start, start + len), loaded from start rounded down to 16 */
        const uint8_t *as = NULL;
        int pad = 0, nv = 0;
        auto issue = [&](int64_t tl) {
            const int64_t b0 = tl * TL::BLOCKS;
            const int nb = (int)(nblocks - b0 < TL::BLOCKS ? nblocks - b0 : TL::BLOCKS);
            const uint8_t *st = wr + (size_t)b0 * TL::BYTES;
            as = (const uint8_t *)((uintptr_t)st & ~(uintptr_t)15);
            pad = (int)(st - as);
            nv = (pad + nb * TL::BYTES + 15) / 16;
#pragma unroll
            for (int k = 0; k < TL::PER_LANE; k++) {
                const int idx = lane + k * OB_WARP;
                if (idx < nv) r[k] = __ldg((const uint4 *)as + idx);
            }
        };
        if (tile < ntiles) issue(tile);
        uint8_t *mine = (uint8_t *)buf[warp];
        for (; tile < ntiles; tile += wpr) {
            const int cur_pad = pad;
            const int64_t nb_cur = nblocks - tile * TL::BLOCKS < TL::BLOCKS ? nblocks - tile * TL::BLOCKS : TL::BLOCKS;
            __syncwarp(); /* every lane is done reading the previous tile */
#pragma unroll
            for (int k = 0; k < TL::PER_LANE; k++) {
                const int idx = lane + k * OB_WARP;
                if (idx < nv) buf[warp][idx] = r[k];
            }
            __syncwarp();
            if (tile + wpr < ntiles) issue(tile + wpr); /* in flight while this tile is used */
            const int nct = (int)(nb_cur * TL::QK / 8);
            const uint8_t *tb = mine + cur_pad;
            const float *__restrict__ x = a.x + tile * TL::ELEMS;
#pragma unroll 2
            for (int c = lane; c < nct; c += OB_WARP) {
                float w[8];
                deq_chunk<T>(tb, c, w, a.lut);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const float4 *xp = (const float4 *)(x + t * a.ldx + c * 8);
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
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = warp_sum(acc[t]);
    if (wpr > 1) row_sum_warps<NT>(red, acc, wpr, warp, sub, lane);
    if (row < a.nout && sub == 0 && lane == 0) {
        const float b0 = a.bias ? a.bias[row] : 0.0f;
#pragma unroll
        for (int t = 0; t < NT; t++) a.out[t * a.ldo + row] = acc[t] + b0;
    }
}

template <int T> int mmv_launch(cuda_backend *c, const mmv_args *a) {
    /* Enough warps in the grid to cover the memory latency: aim for half the
     * device's warp slots before splitting rows across warps; never give a
     * row more lanes than it has chunks. */
    const int64_t want = (int64_t)c->n_sm * 32;
    int wpr = a->nout >= want ? 1 : 2 * (int64_t)a->nout >= want ? 2 : 4;
    const int64_t ntiles = (a->nch * 8 + mmv_tile<T>::ELEMS - 1) / mmv_tile<T>::ELEMS;
    while (wpr > 1 && ntiles < wpr) wpr /= 2; /* a warp per tile at most */
    const unsigned grid = ob_div_up((size_t)a->nout, (size_t)(MMV_WARPS / wpr));
    const dim3 block(MMV_WARPS * OB_WARP);
    switch (a->n) {
    case 1: OB_TRY(cuda_launch(c, mmv_kernel<T, 1>, grid, block, 0, *a, wpr)); break;
    case 2: OB_TRY(cuda_launch(c, mmv_kernel<T, 2>, grid, block, 0, *a, wpr)); break;
    case 3: OB_TRY(cuda_launch(c, mmv_kernel<T, 3>, grid, block, 0, *a, wpr)); break;
    case 4: OB_TRY(cuda_launch(c, mmv_kernel<T, 4>, grid, block, 0, *a, wpr)); break;
    case 5: OB_TRY(cuda_launch(c, mmv_kernel<T, 5>, grid, block, 0, *a, wpr)); break;
    case 6: OB_TRY(cuda_launch(c, mmv_kernel<T, 6>, grid, block, 0, *a, wpr)); break;
    case 7: OB_TRY(cuda_launch(c, mmv_kernel<T, 7>, grid, block, 0, *a, wpr)); break;
    case 8: OB_TRY(cuda_launch(c, mmv_kernel<T, 8>, grid, block, 0, *a, wpr)); break;
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmv: %d tokens (1..8)", a->n);
    }
    return 0;
}

#define OB_MMV_INSTANTIATE(T) template int mmv_launch<T>(cuda_backend * c, const mmv_args *a);

#endif
