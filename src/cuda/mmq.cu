/*
 * mmq.cu - quantized weights times a batch of tokens on int8 tensor cores
 * (mma.sync m16n8k32 / m16n8k16, sm_80 and later): the product for batches
 * of 9 tokens and up, where the decode kernels (mmvq.cu) run out of steam.
 *
 * Why: a batch of 64 tokens through the decode kernels costs every weight
 * chunk 64 dot products on the CUDA cores and 64 reads of its activations;
 * on the 8B model a 64-token step took 60 ms in them (OB_CUDA_PROF), where
 * reading the weights once takes under 2 ms. Tensor cores do the 64 dot
 * products of a 32-element piece in a few instructions.
 *
 * The product splits into 32-element pieces that share one weight scale
 * (16 for Q6_K, whose sub-blocks are 16 long): per piece,
 *
 *     sum_i w_i x_i = dw * dx * sum_i qw_i qx_i + mw * sx
 *
 * with qw the weight's integer codes (as int8), dw its scale, mw its offset
 * term (Q4_K/Q5_K: -dmin * m; Q4_0: -8 d; else 0), and qx, dx, sx the q8
 * activations of mmvq.cuh (bytes, scale, scale times the bytes' sum). The
 * integer sum is one tensor-core product per 16 x 8 tile of (rows, tokens);
 * the scales are applied in float after it, so the result is the same sum
 * as the CPU's q8 path up to float rounding.
 *
 * Tiling: a block of 8 warps owns 32 weight rows and BN (32 or 64) tokens
 * and walks the row's 256-element steps. Per step every thread decodes one
 * 32-element piece of one row into shared memory (int8 codes and scales)
 * while the activation bytes of the step are copied beside them; then each
 * warp multiplies its 16 rows by its BN / 4 tokens. The raw bytes of the
 * next step are loaded into registers before the current step is computed,
 * so two steps are in flight. When rows are few, the 256-element steps are
 * split over S blocks (grid z) that write partial sums; a second kernel adds
 * them in a fixed order (no atomics: the same input gives the same bits).
 * (Summing them in the kernel instead - the last block of a tile to finish,
 * found by a counter, adds the tile's partials - was 19% slower on the 8B's
 * 64-token step: bench/RESULTS.md, CUDA session 8.)
 *
 * Per piece and output the float work is an I2F and two or three FMAs
 * (written out: the same operations for every token, batch-invariant
 * mode); Q4_0's codes go in as signed bytes (no offset term), Q6_K's two
 * 16-element halves are weighed by their integer scales in integers.
 *
 * Types: Q4_0, Q8_0, Q4_K, Q5_K, Q6_K with rows a multiple of 256 long;
 * others go through the dequantize-and-cuBLAS route. The tensor-core
 * instructions are NVIDIA's (PTX); a HIP build compiles the kernel without
 * them and the host never picks this path there (cuda_mmq_usable).
 */
#include "hopper.cuh"
#include "matmul.cuh"
#include "mmq.cuh"
#include "mmq_w.cuh"
#include "mmvq.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIP_PLATFORM_AMD__)
#define OB_HAVE_IMMA 1
#endif

#define MMQ_BK 256         /* elements per step */
#define MMQ_LDS (MMQ_BK + 16) /* bytes per shared row: 68 words, so fragment loads hit 32 banks */
#define MMQ_THREADS 256

/* ---- the integer products ---- */

static __device__ __forceinline__ void imma_k32(int c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                uint32_t b0, uint32_t b1) {
#ifdef OB_HAVE_IMMA
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
#else
    c[0] = c[1] = c[2] = c[3] = 0;
#endif
}

static __device__ __forceinline__ void imma_k16(int c[4], uint32_t a0, uint32_t a1, uint32_t b0) {
#ifdef OB_HAVE_IMMA
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(0), "r"(0), "r"(0), "r"(0));
#else
    c[0] = c[1] = c[2] = c[3] = 0;
#endif
}

/* An integer |v| < 2^22 as a float, exactly, without I2F (a quarter-rate conversion on these
 * GPUs, one per output and piece here): v added to the bits of 1.5 x 2^23 is 1.5 x 2^23 + v,
 * and one FADD takes 1.5 x 2^23 off. A 32-element piece's sum of int8 products is at most
 * 32 x 128 x 127 < 2^19. (Q6_K's halves weighed by their scales can pass 2^22: I2F there.) */
static __device__ __forceinline__ float i22_float(int v) { return __int_as_float(0x4B400000 + v) - 12582912.0f; }

/* ---- the kernel ---- */

template <int BM, int BN> struct mmq_smem {
    int8_t w[BM][MMQ_LDS];
    int8_t x[BN][MMQ_LDS];
    /* scales stored piece-major (a warp's fragment reads 8 consecutive rows or 4 tokens of one
     * piece: one shared-memory wavefront) with a padded row (the decode's stores spread over banks) */
    float wd[16][BM + 1]; /* weight scale per 16 elements (Q6_K: the integer scale's bits) */
    float wm[8][BM + 1];  /* weight offset factor per 32 (Q6_K: the block's d) */
    /* activation scale and scaled sum per 32; rows of BN + 2 so a thread's two neighbouring
     * tokens are one 16-byte load */
    __align__(16) float2 xd[8][BN + 2];
};

/* out[t][r] (S == 1) or part[z][t][r] = the block's share of sum_k w[r][k] x[t][k].
 * Grid: (row blocks, token blocks, S); steps kb0 .. kb1 of the row for split z.
 * ID (the experts of an MoE layer, moe.cu): rows of activations grouped by
 * expert, expert e's at start[e] .. start[e + 1]; grid.y = experts x ty token
 * blocks, block (x, y) multiplies expert y / ty's matrix tab[y / ty] by its
 * token block y % ty (blocks past its rows return at once); S = 1. */
struct mmq_ids {
    const uint8_t *const *tab;
    const int32_t *start;
    int ty;
};

template <int T, int BM, int BN, bool ID>
__global__ void __launch_bounds__(MMQ_THREADS, 2)
    mmq_kernel(const uint8_t *__restrict__ w, size_t nb1, int nout, int nsteps, q8_act a, int n,
               const float *__restrict__ bias, float *__restrict__ out, int64_t ldo, float *__restrict__ part,
               mmq_ids ids) {
    typedef mmq_w<T> W;
    /* warps: WR along rows (16 rows each), WC along tokens (TW tokens, NT tiles of 8 each);
     * every thread decodes PPT pieces a step */
    constexpr int WR = BM / 16, WC = (MMQ_THREADS / OB_WARP) / WR, TW = BN / WC, NT = TW / 8, PPT = BM / 32;
    static_assert(WR * WC == MMQ_THREADS / OB_WARP && NT >= 1 && TW % 8 == 0, "mmq tile");
    __shared__ __align__(16) mmq_smem<BM, BN> s;
    const int tid = threadIdx.x, warp = tid / OB_WARP, lane = tid % OB_WARP;
    const int g = lane / 4, tig = lane % 4;
    const int row0 = blockIdx.x * BM;
    int tok0 = blockIdx.y * BN;
    if (ID) {
        const int e = blockIdx.y / ids.ty, s0 = ids.start[e];
        tok0 = (blockIdx.y % ids.ty) * BN;
        n = ids.start[e + 1] - s0;
        if (tok0 >= n) return; /* the whole block: before any barrier */
        w = ids.tab[e];
        a.qx += (int64_t)s0 * a.ldq;
        a.dx += (int64_t)s0 * a.ldd;
        out += (int64_t)s0 * ldo;
    }
    const int per = (nsteps + (int)gridDim.z - 1) / (int)gridDim.z;
    const int kb0 = (int)blockIdx.z * per, kb1 = min(nsteps, kb0 + per);

    /* this thread's pieces: piece p of rows tid / 8 + 32 u (rows past the end read the last
     * row and are never stored) */
    const int p = tid % 8;
    const uint8_t *wp[PPT];
#pragma unroll
    for (int u = 0; u < PPT; u++) wp[u] = w + (size_t)min(row0 + tid / 8 + 32 * u, nout - 1) * nb1;
    const int wr = warp % WR, wc = warp / WR; /* warp's rows wr*16.., tokens wc*TW.. */

    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

    /* the step's raw weight bytes, activation bytes and activation scales, in registers */
    constexpr int XV = BN * 16 / MMQ_THREADS, XD = BN * 8 / MMQ_THREADS;
    typename W::raw r[PPT];
    int4 xv[XV];
    float2 xdv[XD];
    auto load_x = [&](int kb) {
#pragma unroll
        for (int u = 0; u < XV; u++) {
            const int i = tid + u * MMQ_THREADS, t = i / 16, c = i % 16;
            xv[u] = tok0 + t < n ? *(const int4 *)(a.qx + (int64_t)(tok0 + t) * a.ldq + (int64_t)kb * MMQ_BK + 16 * c)
                                 : make_int4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < XD; u++) {
            const int i = tid + u * MMQ_THREADS, t = i / 8, b = i % 8;
            xdv[u] = tok0 + t < n ? *(const float2 *)(a.dx + (int64_t)(tok0 + t) * a.ldd + 2 * ((int64_t)kb * 8 + b))
                                  : make_float2(0.0f, 0.0f);
        }
    };
    if (kb0 < kb1)
#pragma unroll
        for (int u = 0; u < PPT; u++) W::load(wp[u], kb0, p, r[u]);
    ob_pdl_wait(); /* weights in flight; the activations are the previous kernel's output */
    if (kb0 < kb1) load_x(kb0);
    for (int kb = kb0; kb < kb1; kb++) {
        /* this step's pieces and activations into shared memory */
#pragma unroll
        for (int u = 0; u < PPT; u++) {
            const int lr = tid / 8 + 32 * u;
            uint32_t q[8];
            float dw[2], mw;
            W::decode(r[u], p, q, dw, mw);
            uint4 *dst = (uint4 *)&s.w[lr][32 * p];
            dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
            dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
            s.wd[2 * p][lr] = dw[0];
            s.wd[2 * p + 1][lr] = dw[1];
            s.wm[p][lr] = mw;
        }
#pragma unroll
        for (int u = 0; u < XV; u++) {
            const int i = tid + u * MMQ_THREADS;
            *(int4 *)&s.x[i / 16][16 * (i % 16)] = xv[u];
        }
#pragma unroll
        for (int u = 0; u < XD; u++) {
            const int i = tid + u * MMQ_THREADS;
            s.xd[i % 8][i / 8] = xdv[u];
        }
        __syncthreads();
        /* the next step's bytes in flight while this one is multiplied */
        if (kb + 1 < kb1) {
#pragma unroll
            for (int u = 0; u < PPT; u++) W::load(wp[u], kb + 1, p, r[u]);
            load_x(kb + 1);
        }

        const int ra = wr * 16 + g, rb = ra + 8;
        /* Per piece and output: the integer sum c times (weight scale x activation scale),
         * plus the offset term, as explicit FMAs - the same operations in the same order
         * for every token, whatever tile it sits in (batch-invariant mode). */
        if constexpr (W::SUB == 32) {
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const int k0 = 32 * q + 4 * tig;
                const uint32_t a0 = *(const uint32_t *)&s.w[ra][k0], a1 = *(const uint32_t *)&s.w[rb][k0];
                const uint32_t a2 = *(const uint32_t *)&s.w[ra][k0 + 16], a3 = *(const uint32_t *)&s.w[rb][k0 + 16];
                const float dwa = s.wd[2 * q][ra], dwb = s.wd[2 * q][rb];
                float mwa = 0.0f, mwb = 0.0f;
                if constexpr (W::MIN) mwa = s.wm[q][ra], mwb = s.wm[q][rb];
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const int tb = wc * TW + 8 * j;
                    const uint32_t b0 = *(const uint32_t *)&s.x[tb + g][k0];
                    const uint32_t b1 = *(const uint32_t *)&s.x[tb + g][k0 + 16];
                    int c[4];
                    imma_k32(c, a0, a1, a2, a3, b0, b1);
                    const float4 xx = *(const float4 *)&s.xd[q][tb + 2 * tig]; /* tokens 2 tig and 2 tig + 1 */
                    float f[4];
#pragma unroll
                    for (int e = 0; e < 4; e++) f[e] = i22_float(c[e]);
                    if constexpr (W::MIN) {
                        acc[j][0] = ob_fma(f[0], ob_fmul(dwa, xx.x), ob_fma(mwa, xx.y, acc[j][0]));
                        acc[j][1] = ob_fma(f[1], ob_fmul(dwa, xx.z), ob_fma(mwa, xx.w, acc[j][1]));
                        acc[j][2] = ob_fma(f[2], ob_fmul(dwb, xx.x), ob_fma(mwb, xx.y, acc[j][2]));
                        acc[j][3] = ob_fma(f[3], ob_fmul(dwb, xx.z), ob_fma(mwb, xx.w, acc[j][3]));
                    } else {
                        acc[j][0] = ob_fma(f[0], ob_fmul(dwa, xx.x), acc[j][0]);
                        acc[j][1] = ob_fma(f[1], ob_fmul(dwa, xx.z), acc[j][1]);
                        acc[j][2] = ob_fma(f[2], ob_fmul(dwb, xx.x), acc[j][2]);
                        acc[j][3] = ob_fma(f[3], ob_fmul(dwb, xx.z), acc[j][3]);
                    }
                }
            }
        } else {
            /* Q6_K: two 16-element halves a piece, weighed by their integer scales in
             * integers (|sum| < 2^24: exact as a float), then one float multiply-add */
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const int k0 = 32 * q + 4 * tig;
                const uint32_t a0 = *(const uint32_t *)&s.w[ra][k0], a1 = *(const uint32_t *)&s.w[rb][k0];
                const uint32_t a2 = *(const uint32_t *)&s.w[ra][k0 + 16], a3 = *(const uint32_t *)&s.w[rb][k0 + 16];
                const int sa0 = __float_as_int(s.wd[2 * q][ra]), sa1 = __float_as_int(s.wd[2 * q + 1][ra]);
                const int sb0 = __float_as_int(s.wd[2 * q][rb]), sb1 = __float_as_int(s.wd[2 * q + 1][rb]);
                const float da = s.wm[q][ra], db = s.wm[q][rb];
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const int tb = wc * TW + 8 * j;
                    const uint32_t b0 = *(const uint32_t *)&s.x[tb + g][k0];
                    const uint32_t b1 = *(const uint32_t *)&s.x[tb + g][k0 + 16];
                    int c0[4], c1[4];
                    imma_k16(c0, a0, a1, b0);
                    imma_k16(c1, a2, a3, b1);
                    const float4 xx = *(const float4 *)&s.xd[q][tb + 2 * tig];
                    acc[j][0] = ob_fma((float)(c0[0] * sa0 + c1[0] * sa1), ob_fmul(da, xx.x), acc[j][0]);
                    acc[j][1] = ob_fma((float)(c0[1] * sa0 + c1[1] * sa1), ob_fmul(da, xx.z), acc[j][1]);
                    acc[j][2] = ob_fma((float)(c0[2] * sb0 + c1[2] * sb1), ob_fmul(db, xx.x), acc[j][2]);
                    acc[j][3] = ob_fma((float)(c0[3] * sb0 + c1[3] * sb1), ob_fmul(db, xx.z), acc[j][3]);
                }
            }
        }
        __syncthreads();
    }

    /* results: (row ra or rb, token tb + 2 tig + e) */
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int rr = row0 + wr * 16 + g + (e >= 2 ? 8 : 0);
            const int t = tok0 + wc * TW + 8 * j + 2 * tig + (e & 1);
            if (rr < nout && t < n) mm_put(part, out, ldo, bias, (int)blockIdx.z, n, nout, t, rr, acc[j][e]);
        }
}

/* out[t][r] = bias[r] + sum over z of part[z][t][r], z in order. */
__global__ void mmq_reduce_kernel(const float *__restrict__ part, int S, int n, int nout,
                                  const float *__restrict__ bias, float *__restrict__ out, int64_t ldo) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n * nout) return;
    const int t = (int)(i / nout), r = (int)(i % nout);
    float v = 0.0f;
    for (int z = 0; z < S; z++) v += part[(size_t)z * (size_t)n * (size_t)nout + (size_t)i];
    out[(int64_t)t * ldo + r] = v + (bias ? bias[r] : 0.0f);
}

/* ---- host side ---- */

bool cuda_mmq_usable(const cuda_backend *c, const ob_tensor *w, int64_t n) {
    if (!c->mmq || w->ne[0] % MMQ_BK != 0) return false;
    /* batch-invariant mode: every batch size through this kernel (a token's sums do not depend
     * on the tile it sits in: exact integer products, then float sums in step and piece order) */
    if (!c->invariant && (n < c->mmq_min || n > c->mmq_max)) return false;
    return mmq_w_loadable(w);
}

template <int T, int BM, int BN>
static int mmq_launch(cuda_backend *c, const ob_tensor *w, const q8_act &a, int n, const float *bias, float *out,
                      int64_t ldo) {
    const int64_t nin = w->ne[0], nout = w->ne[1];
    const int nsteps = (int)(nin / MMQ_BK);
    const unsigned gx = (unsigned)ob_div_up((size_t)nout, BM), gy = (unsigned)ob_div_up((size_t)n, BN);
    /* split the steps until the grid has about mmq_blocks blocks per SM (two steps a split at least) */
    int S = c->mmq_split;
    if (S <= 0) {
        /* batch-invariant mode: the split must not depend on the number of token blocks */
        const int64_t want = (int64_t)c->n_sm * c->mmq_blocks, have = (int64_t)gx * (c->invariant ? 1 : gy);
        S = have >= want ? 1 : (int)((want + have - 1) / have);
        if (S > nsteps / 2) S = nsteps / 2;
        if (S < 1) S = 1;
    }
    if (S > nsteps) S = nsteps;
    float *part = NULL;
    if (S > 1) {
        OB_TRY(cuda_scratch(c, &c->mmq_scratch, &c->mmq_scratch_bytes, (size_t)S * (size_t)n * (size_t)nout * sizeof(float)));
        part = (float *)c->mmq_scratch;
    }
    const dim3 grid(gx, gy, (unsigned)S);
    c->rec_pdl = c->pdl;
    const mmq_ids none = {NULL, NULL, 1};
    OB_TRY(cuda_launch(c, mmq_kernel<T, BM, BN, false>, grid, MMQ_THREADS, 0, (const uint8_t *)w->data, w->nb[1],
                       (int)nout, nsteps, a, n, S > 1 ? NULL : bias, out, ldo, part, none));
    if (S > 1) {
        const int64_t total = (int64_t)n * nout;
        OB_TRY(cuda_launch(c, mmq_reduce_kernel, (unsigned)ob_div_up((size_t)total, 256), 256, 0, (const float *)part, S,
                           n, (int)nout, bias, out, ldo));
    }
    return 0;
}

int cuda_mmq_matmul(cuda_backend *c, const ob_tensor *w, const q8_act &a0, int64_t n, const float *bias, float *out,
                    int64_t ldo) {
    /* token blocks of 64 (32 when the batch is that small) */
    for (int64_t t0 = 0; t0 < n; t0 += 65535 * 64) {
        const int nt = (int)(n - t0 < 65535 * 64 ? n - t0 : 65535 * 64);
        q8_act a = a0;
        a.qx += t0 * a.ldq;
        a.dx += t0 * a.ldd;
        float *o = out + t0 * ldo;
        switch ((int)w->type) {
#define OB_MB(T, BM)                                                                  \
    if (nt <= 32) OB_TRY((mmq_launch<T, BM, 32>(c, w, a, nt, bias, o, ldo)));         \
    else OB_TRY((mmq_launch<T, BM, 64>(c, w, a, nt, bias, o, ldo)));
#define OB_M(T)                                                                       \
    case T:                                                                           \
        if (c->mmq_bm >= 64) { OB_MB(T, 64) }                                         \
        else { OB_MB(T, 32) }                                                         \
        break;
            OB_M(OB_TYPE_Q4_K) OB_M(OB_TYPE_Q5_K) OB_M(OB_TYPE_Q6_K) OB_M(OB_TYPE_Q4_0) OB_M(OB_TYPE_Q8_0)
#undef OB_M
#undef OB_MB
        default: return ob_cuda_err(OB_ERR_INTERNAL, "mmq: type %d", (int)w->type);
        }
    }
    return 0;
}

/* ---- the experts of an MoE layer (moe.cu) ---- */

bool cuda_mmq_id_usable(const cuda_backend *c, const ob_tensor *w, int ne) {
    if (!c->mmq || w[0].ne[0] % MMQ_BK != 0) return false;
    const int t = (int)w[0].type;
    if (t != OB_TYPE_Q4_K && t != OB_TYPE_Q5_K && t != OB_TYPE_Q6_K && t != OB_TYPE_Q4_0 && t != OB_TYPE_Q8_0)
        return false;
    const size_t align = t == OB_TYPE_Q4_K || t == OB_TYPE_Q5_K ? 16 : 2;
    for (int e = 0; e < ne; e++)
        if ((int)w[e].type != t || w[e].nb[1] != w[0].nb[1] || w[e].nb[1] % align || (uintptr_t)w[e].data % align)
            return false;
    return true;
}

template <int T, int BM, int BN>
static int mmq_id_launch(cuda_backend *c, const uint8_t *const *tab, const int32_t *start, int ne, int max_rows,
                         size_t nb1, int64_t nin, int64_t nout, const q8_act &a, float *out, int64_t ldo) {
    const mmq_ids ids = {tab, start, (int)ob_div_up((size_t)max_rows, BN)};
    const dim3 grid(ob_div_up((size_t)nout, BM), (unsigned)(ne * ids.ty), 1);
    c->rec_pdl = c->pdl;
    return cuda_launch(c, mmq_kernel<T, BM, BN, true>, grid, MMQ_THREADS, 0, (const uint8_t *)NULL, nb1, (int)nout,
                       (int)(nin / MMQ_BK), a, 0, (const float *)NULL, out, ldo, (float *)NULL, ids);
}

int cuda_mmq_id(cuda_backend *c, int type, const uint8_t *const *tab, const int32_t *start, int ne, int max_rows,
                size_t nb1, int64_t nin, int64_t nout, const q8_act &a, float *out, int64_t ldo) {
    if (max_rows <= 0) return 0;
    if ((int64_t)ne * ob_div_up((size_t)max_rows, 32) > 65535)
        return ob_cuda_err(OB_ERR_INTERNAL, "mmq: %d experts x %d rows", ne, max_rows);
    switch (type) {
#define OB_MI(T)                                                                                                      \
    case T:                                                                                                           \
        if (max_rows <= 32) return mmq_id_launch<T, 64, 32>(c, tab, start, ne, max_rows, nb1, nin, nout, a, out, ldo); \
        return mmq_id_launch<T, 64, 64>(c, tab, start, ne, max_rows, nb1, nin, nout, a, out, ldo);
        OB_MI(OB_TYPE_Q4_K) OB_MI(OB_TYPE_Q5_K) OB_MI(OB_TYPE_Q6_K) OB_MI(OB_TYPE_Q4_0) OB_MI(OB_TYPE_Q8_0)
#undef OB_MI
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmq: type %d", type);
    }
}
