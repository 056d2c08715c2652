/*
 * mmw.cu - quantized weights times a batch of tokens on 16-bit tensor cores
 * (mma.sync m16n8k16 bf16, float sums), the weights turned into bf16 inside
 * the kernel: the product for decode batches of many sequences (17 tokens
 * and up, OB_CUDA_MMW_MIN) and for prompt batches when no bf16 copy of the
 * weight is kept.
 *
 * Why not the int8 product (mmq.cu) there: it multiplies integer codes, so
 * every 32-element piece's sum must be scaled in float per output - an I2F
 * and two or three FMAs per piece, row and token - and at 64 tokens those
 * outnumber the tensor-core instructions several times over (8B Q4_K_M at 64
 * sequences: 4,931 tok/s, 13 ms a step). Here the scales are applied once
 * per weight element, when the piece is turned into bf16 values in shared
 * memory, and the tensor cores then sum across pieces on their own: the
 * float work per weight is spread over every token of the tile instead of
 * repeated for each. And not the bf16 copies (matmul.cu, bf16_cached):
 * those read 2 bytes a weight where Q4_K reads 0.56, and need 16 GB of
 * device memory for an 8B model.
 *
 * Tiling: a block of 8 warps owns 128 weight rows and BN (32 or 64) tokens
 * and walks the rows in stages of 64 elements (two 32-element pieces a
 * row). Per stage every thread decodes one piece of one row (mmq_w.cuh)
 * into 32 bf16 values (value = scale x code + offset in float, rounded
 * once) in shared memory, and copies 8 or 16 activation values beside
 * them; the raw bytes of the next stage are loaded into registers before
 * the current stage is multiplied. Warps sit 4 along rows x 2 along tokens,
 * each multiplying its 32 rows by its BN / 2 tokens (ldmatrix fragments).
 * 128 rows a block: the block's activations are read once per 128 rows (at
 * 64 tokens, 64 x 2 bytes an element against 128 x 0.56 for Q4_K's
 * weights), so L2 traffic stays near the weight bytes. When the grid is
 * small the stages are split over S blocks (grid z) writing partial sums
 * that mmq_reduce_kernel adds in a fixed order (same input, same bits).
 *
 * Activations go in as bf16 (converted once per input: a product on the
 * same input just after reuses the copy), as on the cuBLAS route. The
 * tensor-core instructions are NVIDIA's (PTX, sm_80 and later); a HIP build
 * compiles the kernel without them and the host never picks it there.
 */
#include <cuda_bf16.h>

#include "bmma.cuh"
#include "hopper.cuh"
#include "matmul.cuh"
#include "mmq_w.cuh"
#include "mmw.cuh"


#define MMW_BM 128
#define MMW_BK 64             /* elements per stage: two pieces of a row */
#define MMW_LDS (MMW_BK + 8)  /* bf16 per shared row: 144 bytes, so ldmatrix's 8 rows hit 8 bank groups */
#define MMW_THREADS 256

/* The signed byte b of word w (b = 0..3) as a float, without I2F (a quarter-rate conversion
 * on these GPUs: with one per weight element it bounded the kernel): the byte, made unsigned
 * by flipping its sign bit, goes into the low mantissa of 2^23 (one PRMT), and one FADD
 * takes 2^23 + 128 off - exact. */
template <int B> static __device__ __forceinline__ float s8_float(uint32_t w) {
    return __int_as_float((int)__byte_perm(w ^ 0x80808080u, 0x4B000000u, 0x7440u + B)) - 8388736.0f;
}

/* out[t][r] (S == 1) or part[z][t][r] = the block's share of sum_k w[r][k] x[t][k];
 * grid (row blocks, token blocks, S), stages s0 .. s1 of the row for split z. Two shared
 * buffers: while the warps multiply stage s from one, they decode stage s + 1 into the other
 * (the tensor cores and the decode's ALU work overlap), and the raw bytes of stage s + 2 are
 * in flight - one barrier a stage. */
template <int T, int BN>
__global__ void __launch_bounds__(MMW_THREADS, 2)
    mmw_kernel(const uint8_t *__restrict__ w, size_t nb1, int nout, int nstages, const __nv_bfloat16 *__restrict__ x,
               int64_t ldx, int n, const float *__restrict__ bias, float *__restrict__ out, int64_t ldo,
               float *__restrict__ part) {
    typedef mmq_w<T> W;
    constexpr int TW = BN / 2, NT = TW / 8; /* tokens a warp, 8-token tiles a warp */
    constexpr int XC = BN * (MMW_BK / 8) / MMW_THREADS; /* 16-byte activation chunks a thread a stage */
    static_assert(NT % 2 == 0 && XC >= 1, "mmw tile");
    extern __shared__ __align__(16) uint8_t mmw_smem[];
    typedef __nv_bfloat16 row_t[MMW_LDS];
    row_t *sw = (row_t *)mmw_smem;          /* [2][MMW_BM] */
    row_t *sx = sw + 2 * MMW_BM;            /* [2][BN] */
    const int tid = threadIdx.x, warp = tid / OB_WARP, lane = tid % OB_WARP;
    const int g = lane / 4, tig = lane % 4;
    const int row0 = blockIdx.x * MMW_BM, tok0 = blockIdx.y * BN;
    const int per = (nstages + (int)gridDim.z - 1) / (int)gridDim.z;
    const int s0 = (int)blockIdx.z * per, s1 = min(nstages, s0 + per);

    /* this thread's piece: row tid / 2 (rows past the end read the last row and are never
     * stored), the stage's first or second piece */
    const int lr = tid / 2, half = tid % 2;
    const uint8_t *wp = w + (size_t)min(row0 + lr, nout - 1) * nb1;
    const int wr = warp % 4, wc = warp / 4; /* warp's rows wr * 32.., tokens wc * TW.. */

    float acc[2][NT][4];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.0f;

    typename W::raw r;
    int4 xv[XC];
    auto load_w = [&](int s) { W::load(wp, s / 4, (s % 4) * 2 + half, r); };
    auto load_x = [&](int s) {
#pragma unroll
        for (int u = 0; u < XC; u++) {
            const int i = tid + u * MMW_THREADS, t = i / 8, ch = i % 8;
            xv[u] = tok0 + t < n ? *(const int4 *)(x + (int64_t)(tok0 + t) * ldx + (int64_t)s * MMW_BK + 8 * ch)
                                 : make_int4(0, 0, 0, 0);
        }
    };
    /* stage s's piece as bf16 values (scale x code + offset as one float FMA, then rounded to
     * bf16) and its
     * activations into buffer b */
    auto put = [&](int s, int b) {
        const int p = (s % 4) * 2 + half;
        uint32_t q[8];
        float dw[2], mw;
        W::decode(r, p, q, dw, mw);
        float sc0, sc1, off;
        if constexpr (W::SUB == 16) { /* Q6_K: the halves' integer scales times the block's d */
            sc0 = mw * (float)__float_as_int(dw[0]);
            sc1 = mw * (float)__float_as_int(dw[1]);
            off = 0.0f;
        } else {
            sc0 = sc1 = dw[0];
            off = mw;
        }
        uint32_t h[16];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float sc = i < 4 ? sc0 : sc1;
            h[2 * i] = bf16x2(fmaf(sc, s8_float<0>(q[i]), off), fmaf(sc, s8_float<1>(q[i]), off));
            h[2 * i + 1] = bf16x2(fmaf(sc, s8_float<2>(q[i]), off), fmaf(sc, s8_float<3>(q[i]), off));
        }
        uint4 *dst = (uint4 *)&sw[b * MMW_BM + lr][32 * half];
        dst[0] = make_uint4(h[0], h[1], h[2], h[3]);
        dst[1] = make_uint4(h[4], h[5], h[6], h[7]);
        dst[2] = make_uint4(h[8], h[9], h[10], h[11]);
        dst[3] = make_uint4(h[12], h[13], h[14], h[15]);
#pragma unroll
        for (int u = 0; u < XC; u++) {
            const int i = tid + u * MMW_THREADS;
            *(int4 *)&sx[b * BN + i / 8][8 * (i % 8)] = xv[u];
        }
    };
    if (s0 < s1) load_w(s0);
    ob_pdl_wait(); /* weights in flight; the activations are the previous kernel's output */
    if (s0 < s1) {
        load_x(s0);
        put(s0, 0);
        if (s0 + 1 < s1) load_w(s0 + 1), load_x(s0 + 1);
    }
    __syncthreads();
    for (int s = s0; s < s1; s++) {
        const int b = (s - s0) & 1;
#pragma unroll
        for (int kk = 0; kk < MMW_BK; kk += 16) {
            uint32_t a[2][4];
#pragma unroll
            for (int m = 0; m < 2; m++)
                ldsm_x4(a[m], &sw[b * MMW_BM + wr * 32 + m * 16 + (lane % 8) + 8 * ((lane / 8) % 2)][kk + 8 * (lane / 16)]);
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                uint32_t bb[4]; /* tiles j (bb[0], bb[1]) and j + 1 (bb[2], bb[3]) */
                ldsm_x4(bb, &sx[b * BN + wc * TW + 8 * j + (lane % 8) + 8 * (lane / 16)][kk + 8 * ((lane / 8) % 2)]);
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    bmma(acc[m][j], a[m], bb[0], bb[1]);
                    bmma(acc[m][j + 1], a[m], bb[2], bb[3]);
                }
            }
        }
        /* the next stage into the other buffer, the one after that in flight */
        if (s + 1 < s1) {
            put(s + 1, b ^ 1);
            if (s + 2 < s1) load_w(s + 2), load_x(s + 2);
        }
        __syncthreads();
    }

    /* results: (row wr * 32 + 16 m + g (+ 8), token wc * TW + 8 j + 2 tig (+ 1)) */
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int rr = row0 + wr * 32 + 16 * m + g + (e >= 2 ? 8 : 0);
                const int t = tok0 + wc * TW + 8 * j + 2 * tig + (e & 1);
                if (rr < nout && t < n) mm_put(part, out, ldo, bias, (int)blockIdx.z, n, nout, t, rr, acc[m][j][e]);
            }
}

/* dst[t][k] = bf16(x[t][k]) for n rows of nin (x rows ldx floats apart), 8 a thread. */
__global__ void mmw_act_kernel(const float *__restrict__ x, int64_t ldx, int64_t nin, int64_t n,
                               __nv_bfloat16 *__restrict__ dst) {
    ob_pdl_wait();
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n * nin) return;
    const int64_t t = i / nin, k = i % nin;
    const float4 a = *(const float4 *)(x + t * ldx + k), b = *(const float4 *)(x + t * ldx + k + 4);
    *(uint4 *)(dst + i) = make_uint4(bf16x2(a.x, a.y), bf16x2(a.z, a.w), bf16x2(b.x, b.y), bf16x2(b.z, b.w));
}

/* ---- host side ---- */

bool cuda_mmw_usable(const cuda_backend *c, const ob_tensor *w, int64_t n) {
    if (!c->mmw || c->invariant || n < c->mmw_min || n > c->mmw_max || w->ne[0] % 256 != 0) return false;
    return mmq_w_loadable(w);
}

static constexpr int mmw_type_index(int t) {
    return t == OB_TYPE_Q4_K ? 0 : t == OB_TYPE_Q5_K ? 1 : t == OB_TYPE_Q6_K ? 2 : t == OB_TYPE_Q4_0 ? 3 : 4;
}

template <int T, int BN>
static int mmw_launch(cuda_backend *c, const ob_tensor *w, const __nv_bfloat16 *xb, int n, const float *bias,
                      float *out, int64_t ldo) {
    const int64_t nin = w->ne[0], nout = w->ne[1];
    const int nstages = (int)(nin / MMW_BK);
    const unsigned gx = (unsigned)ob_div_up((size_t)nout, MMW_BM), gy = (unsigned)ob_div_up((size_t)n, BN);
    /* split the stages until the grid has about mmw_blocks blocks an SM (four stages a split at least) */
    const int S = mm_splits((int64_t)c->n_sm * c->mmw_blocks, (int64_t)gx * gy, nstages, 4);
    float *part = NULL;
    if (S > 1) {
        OB_TRY(cuda_scratch(c, &c->mmq_scratch, &c->mmq_scratch_bytes, (size_t)S * (size_t)n * (size_t)nout * sizeof(float)));
        part = (float *)c->mmq_scratch;
    }
    const size_t smem = (size_t)2 * (MMW_BM + BN) * MMW_LDS * sizeof(__nv_bfloat16);
    const unsigned bit = 1u << (2 * mmw_type_index(T) + (BN == 64));
    if (!(c->mmw_smem_set & bit)) { /* over the 48 KiB default: asked for once per kernel */
        OB_CU(cudaFuncSetAttribute(mmw_kernel<T, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        c->mmw_smem_set |= bit;
    }
    c->rec_pdl = c->pdl;
    OB_TRY(cuda_launch(c, mmw_kernel<T, BN>, dim3(gx, gy, (unsigned)S), MMW_THREADS, smem, (const uint8_t *)w->data,
                       w->nb[1], (int)nout, nstages, xb, (int64_t)nin, n, S > 1 ? NULL : bias, out, ldo, part));
    if (S > 1) {
        const int64_t total = (int64_t)n * nout;
        OB_TRY(cuda_launch(c, mmq_reduce_kernel, (unsigned)ob_div_up((size_t)total, 256), 256, 0, (const float *)part, S,
                           n, (int)nout, bias, out, ldo));
    }
    return 0;
}

int cuda_mmw_matmul(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    const int64_t nin = w->ne[0], n = x->ne[1];
    const int64_t ldx = (int64_t)(x->nb[1] / sizeof(float));
    if (n > 65535LL * 32 || nin % 8 || ldx % 4 || (uintptr_t)x->data % 16)
        return ob_cuda_err(OB_ERR_INTERNAL, "mmw: %lld tokens, rows of %lld floats %lld apart", (long long)n,
                           (long long)nin, (long long)ldx);
    /* the input as bf16, reused when the op just before converted the same input (q, k and v;
     * gate and up): nothing ran in between (the op count moved by one) */
    OB_TRY(cuda_scratch(c, &c->mmw_x, &c->mmw_x_bytes, (size_t)(n * nin) * 2));
    const bool same = c->mmw_src == x->data && c->mmw_n == n && c->mmw_nin == nin && c->mmw_ld == ldx &&
                      c->mmw_op + 1 == c->n_ops && c->mmw_buf == c->mmw_x;
    if (!same) {
        cuda_pdl_next(c);
        OB_TRY(cuda_launch(c, mmw_act_kernel, (unsigned)ob_div_up((size_t)(n * nin / 8), 256), 256, 0,
                           (const float *)x->data, ldx, nin, n, (__nv_bfloat16 *)c->mmw_x));
    }
    c->mmw_src = x->data, c->mmw_n = n, c->mmw_nin = nin, c->mmw_ld = ldx, c->mmw_op = c->n_ops, c->mmw_buf = c->mmw_x;
    const __nv_bfloat16 *xb = (const __nv_bfloat16 *)c->mmw_x;
    const float *bd = bias ? (const float *)bias->data : NULL;
    float *o = (float *)out->data;
    const int64_t ldo = (int64_t)(out->nb[1] / sizeof(float));
    const int nt = (int)n;
    switch ((int)w->type) {
#define OB_M(T)                                                                \
    case T:                                                                    \
        if (nt <= 32) OB_TRY((mmw_launch<T, 32>(c, w, xb, nt, bd, o, ldo)));   \
        else OB_TRY((mmw_launch<T, 64>(c, w, xb, nt, bd, o, ldo)));            \
        break;
        OB_M(OB_TYPE_Q4_K) OB_M(OB_TYPE_Q5_K) OB_M(OB_TYPE_Q6_K) OB_M(OB_TYPE_Q4_0) OB_M(OB_TYPE_Q8_0)
#undef OB_M
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmw: type %d", (int)w->type);
    }
    return 0;
}
