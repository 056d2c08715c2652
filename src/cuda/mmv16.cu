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
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "hopper.cuh"
#include "matmul.cuh"

#define MMV16_WARPS 4

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

/* Up to three products of one input in one launch (the decode graph joins
 * q, k and v, or gate and up, as mmvq.cu does): the grid's blocks are the
 * first matrix's, then the second's, then the third's, each laid out as if
 * it were launched alone with the set's wpr. */
#define MMV16_SET_MAX 3

struct mmv16_set {
    const uint8_t *w[MMV16_SET_MAX];
    const float *bias[MMV16_SET_MAX];
    float *out[MMV16_SET_MAX];
    int nout[MMV16_SET_MAX];
    int b1, b2, wpr; /* first block of matrices 1 and 2 (the grid's end where absent); warps a row */
    const float *x;
    int64_t ldx, ldo0, ldo1, ldo2;
    size_t nb1;
    int64_t nch;
};

/* U: 16-byte loads a lane has in flight (OB_CUDA_MMV16_U: 4 or 8). GLU (cuda_op_glu fused
 * into a gate/up pair, the set's matrices 0 and 1 of equal rows): a warp takes gate row r and
 * up row r, each summed exactly as alone (the order depends on wpr alone, which the caller
 * keeps), and writes g, u and h = act(g) * u into g.y. */
template <bool BF, int NT, int U, bool GLU>
__global__ void __launch_bounds__(MMV16_WARPS * OB_WARP) mmv16_kernel(const mmv16_set s, const cuda_glu_out g) {
    constexpr int RW = GLU ? 2 : 1; /* rows a warp */
    __shared__ float red[MMV16_WARPS][RW * NT];
    /* which matrix: constant indices only, so the set stays in the parameter bank */
    const int bx = (int)blockIdx.x, m = GLU ? 0 : bx >= s.b2 ? 2 : bx >= s.b1 ? 1 : 0;
    mmv_args a;
    a.w = m == 0 ? s.w[0] : m == 1 ? s.w[1] : s.w[2];
    a.bias = m == 0 ? s.bias[0] : m == 1 ? s.bias[1] : s.bias[2];
    a.out = m == 0 ? s.out[0] : m == 1 ? s.out[1] : s.out[2];
    a.nout = m == 0 ? s.nout[0] : m == 1 ? s.nout[1] : s.nout[2];
    a.ldo = m == 0 ? s.ldo0 : m == 1 ? s.ldo1 : s.ldo2;
    a.x = s.x, a.ldx = s.ldx, a.nb1 = s.nb1, a.nch = s.nch;
    const int wpr = s.wpr, blk = bx - (m == 0 ? 0 : m == 1 ? s.b1 : s.b2);
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const int row = blk * (MMV16_WARPS / wpr) + warp / wpr, sub = warp % wpr;
    float acc[RW][NT];
#pragma unroll
    for (int j = 0; j < RW; j++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[j][t] = 0.0f;
    if (row < a.nout) {
        const uint4 *wr[RW];
        wr[0] = (const uint4 *)(a.w + (size_t)row * a.nb1);
        if (GLU) wr[RW - 1] = (const uint4 *)(s.w[1] + (size_t)row * a.nb1);
        const int64_t nv = a.nch; /* 8-element chunks = 16-byte loads */
        const int64_t step = (int64_t)OB_WARP * wpr;
        for (int64_t v0 = (int64_t)sub * OB_WARP + lane; v0 < nv; v0 += step * U) {
            uint4 r[RW][U];
#pragma unroll
            for (int j = 0; j < RW; j++)
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (v0 + u * step < nv) r[j][u] = __ldg(wr[j] + v0 + u * step);
            ob_pdl_wait(); /* weights in flight: now wait for the kernel that wrote x (at once after the first) */
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t v = v0 + u * step;
                if (v >= nv) break;
#pragma unroll
                for (int j = 0; j < RW; j++) {
                    float w[8];
                    to8<BF>(r[j][u], w);
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        const float4 *xp = (const float4 *)(a.x + t * a.ldx + v * 8);
                        const float4 p = __ldg(xp), q = __ldg(xp + 1);
                        float s = acc[j][t];
                        s = fmaf(w[0], p.x, s);
                        s = fmaf(w[1], p.y, s);
                        s = fmaf(w[2], p.z, s);
                        s = fmaf(w[3], p.w, s);
                        s = fmaf(w[4], q.x, s);
                        s = fmaf(w[5], q.y, s);
                        s = fmaf(w[6], q.z, s);
                        s = fmaf(w[7], q.w, s);
                        acc[j][t] = s;
                    }
                }
            }
        }
    }
    ob_pdl_wait(); /* lanes without chunks, before the write below */
#pragma unroll
    for (int j = 0; j < RW; j++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[j][t] = warp_sum(acc[j][t]);
    if (wpr > 1) row_sum_warps<RW * NT>(red, &acc[0][0], wpr, warp, sub, lane);
    if constexpr (GLU) {
        if (row < a.nout && sub == 0 && lane == 0) {
            const float b0 = s.bias[0] ? s.bias[0][row] : 0.0f, b1 = s.bias[1] ? s.bias[1][row] : 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float gv = acc[0][t] + b0, uv = acc[RW - 1][t] + b1;
                s.out[0][t * s.ldo0 + row] = gv;
                s.out[1][t * s.ldo1 + row] = uv;
                g.y[t * g.ldy + row] = act_f((int)g.act, gv) * uv; /* after g: y may be gate's rows */
            }
        }
        return;
    }
    if (row < a.nout && sub == 0 && lane == 0) {
        const float b0 = a.bias ? a.bias[row] : 0.0f;
#pragma unroll
        for (int t = 0; t < NT; t++) a.out[t * a.ldo + row] = acc[0][t] + b0;
    }
}

/* Record the gate/up pair just recorded (c->mmvq_pend, two matrices of equal rows) again as one
 * launch of the GLU form (cuda_op_glu has checked the pair), with the pair's wpr. */
template <bool BF, int NT, int U> static int mmv16_glu_go(cuda_backend *c, const cuda_glu_out *g) {
    cuda_mmvq_pend *p = &c->mmvq_pend;
    const int wpr = p->wpr;
    const int nblk = (int)ob_div_up((size_t)p->nout[0], (size_t)(MMV16_WARPS / wpr));
    mmv16_set s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < 2; i++)
        s.w[i] = (const uint8_t *)p->w[i], s.bias[i] = p->bias[i], s.out[i] = p->out[i], s.nout[i] = p->nout[i];
    s.b1 = s.b2 = nblk, s.wpr = wpr;
    s.ldo0 = p->ldo[0], s.ldo1 = p->ldo[1];
    s.x = (const float *)p->in0, s.ldx = p->ld, s.nb1 = p->nb1, s.nch = p->nch;
    c->n_recs--; /* the pair's launch, recorded last (checked by the caller), made again */
    c->rec_used = p->rec_off;
    c->rec_pdl = c->pdl;
    /* two rows a warp: U / 2 loads of each in flight, the registers of U loads of one row */
    OB_TRY(cuda_launch(c, mmv16_kernel<BF, NT, U / 2, true>, dim3((unsigned)nblk), dim3(MMV16_WARPS * OB_WARP), 0, s,
                       *g));
    p->rec = -1;
    return 0;
}

template <bool BF, int U> static int mmv16_launch_t(cuda_backend *c, const mmv_args *a) {
    const void *fn = NULL;
    int (*glu)(struct cuda_backend *, const cuda_glu_out *) = NULL;
    switch (a->n) {
#define OB_N(N) \
    case N: fn = (const void *)mmv16_kernel<BF, N, U, false>, glu = mmv16_glu_go<BF, N, U>; break;
        OB_N(1) OB_N(2) OB_N(3) OB_N(4) OB_N(5) OB_N(6) OB_N(7) OB_N(8)
#undef OB_N
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmv16: %d tokens (1..8)", a->n);
    }
    /* a product of the input the product recorded just before read, with the same kernel and
     * row size, joins that launch (not in batch-invariant mode: wpr comes from the joined rows) */
    cuda_mmvq_pend *p = &c->mmvq_pend;
    const bool join = c->recording && c->mmvq_fuse && !c->invariant && p->rec >= 0 && p->rec == c->n_recs - 1 &&
                      p->func == fn && p->n < MMV16_SET_MAX && p->in0 == a->x && p->ld == a->ldx &&
                      p->nb1 == a->nb1 && p->nch == a->nch;
    if (!join) p->n = 0;
    const int k = p->n++;
    p->w[k] = a->w, p->bias[k] = a->bias, p->out[k] = a->out, p->ldo[k] = a->ldo, p->nout[k] = a->nout;
    int64_t rows = 0;
    for (int i = 0; i < p->n; i++) rows += p->nout[i];
    /* warps wanted an SM: 32, or 256 for rows of 8 KiB and more (4096-wide 16-bit models: the
     * 8B's products ran 7% faster with a row over two or four warps; the 1B and 0.6B rows of 4 and
     * 2 KiB ran 5-8% slower, bench/RESULTS.md, CUDA session 8); OB_CUDA_MMV16_WANT sets it */
    const int64_t per_sm = c->mmv16_want > 0 ? c->mmv16_want : a->nb1 >= 8192 ? 256 : 32;
    const int64_t want = (int64_t)c->n_sm * per_sm;
    int wpr = rows >= want ? 1 : 2 * rows >= want ? 2 : 4;
    while (wpr > 1 && a->nch < (int64_t)OB_WARP * wpr) wpr /= 2;
    mmv16_set s;
    memset(&s, 0, sizeof s);
    int nblk = 0, first[MMV16_SET_MAX + 1];
    for (int i = 0; i < p->n; i++) {
        first[i] = nblk;
        nblk += (int)ob_div_up((size_t)p->nout[i], (size_t)(MMV16_WARPS / wpr));
        s.w[i] = (const uint8_t *)p->w[i], s.bias[i] = p->bias[i], s.out[i] = p->out[i], s.nout[i] = p->nout[i];
    }
    for (int i = p->n; i <= MMV16_SET_MAX; i++) first[i] = nblk;
    s.b1 = first[1], s.b2 = first[2], s.wpr = wpr;
    s.ldo0 = p->ldo[0], s.ldo1 = p->n > 1 ? p->ldo[1] : 0, s.ldo2 = p->n > 2 ? p->ldo[2] : 0;
    s.x = a->x, s.ldx = a->ldx, s.nb1 = a->nb1, s.nch = a->nch;
    const dim3 grid((unsigned)nblk), block(MMV16_WARPS * OB_WARP);
    p->op = c->n_ops, p->wpr = wpr; /* what the GLU after a gate/up pair needs (mmv16_glu_go) */
    if (join) return cuda_rec_rewrite_last(c, fn, grid, 0, &s, sizeof s);
    c->rec_pdl = c->pdl; /* may start early in a graph: the weight loads do not wait (hopper.cuh) */
    const size_t rec_off = c->rec_used;
    cuda_glu_out g;
    memset(&g, 0, sizeof g);
    switch (a->n) {
#define OB_N(N) \
    case N: OB_TRY(cuda_launch(c, mmv16_kernel<BF, N, U, false>, grid, block, 0, s, g)); break;
        OB_N(1) OB_N(2) OB_N(3) OB_N(4) OB_N(5) OB_N(6) OB_N(7) OB_N(8)
#undef OB_N
    }
    if (c->recording) {
        p->rec = c->n_recs - 1, p->func = fn, p->in0 = a->x, p->in1 = NULL, p->ld = a->ldx, p->nb1 = a->nb1;
        p->nch = a->nch;
        p->rec_off = rec_off, p->ntok = a->n, p->ldd = 0, p->glu = glu;
    } else {
        p->rec = -1;
    }
    return 0;
}

int cuda_mmv16_launch(cuda_backend *c, int type, const mmv_args *a) {
    if (c->mmv16_u >= 8) return type == OB_TYPE_BF16 ? mmv16_launch_t<true, 8>(c, a) : mmv16_launch_t<false, 8>(c, a);
    return type == OB_TYPE_BF16 ? mmv16_launch_t<true, 4>(c, a) : mmv16_launch_t<false, 4>(c, a);
}
