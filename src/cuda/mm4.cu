/*
 * mm4.cu - 4-bit weights (Q4_K, Q4_0, Q4_1) times a batch of tokens on bf16 tensor cores, the
 * weights read from their fragment-order copy (w4.cuh) and turned into A
 * fragments in registers: a W4A16 product. Experimental (OB_CUDA_W4=1;
 * written at the end of session 9 with no device time left, so not yet run
 * on a GPU: its test is op_matmul_mm4 in test_cuda).
 *
 * Why: at 17-64 tokens (decode of many sequences) the int8 product and the
 * bf16 in-kernel decode of mmw.cu are bound by shared-memory and L1 traffic
 * (ncu, bench/RESULTS.md, CUDA session 9), and the kept bf16 copies read 16
 * GB a step of an 8B model through cuBLAS. Here a warp's weights for a
 * 16-row x 64-element tile come in one coalesced 16-byte load a lane, their
 * (s, m) pairs in one 8-byte load per row and group, and never touch shared
 * memory: per stage a warp stores nothing and reads from shared memory only
 * the activations' B fragments (ldmatrix), which its two row tiles share.
 *
 * Tiling: a block of 4 warps owns 128 weight rows (32 a warp: two 16-row
 * tiles) and BN (32 or 64) tokens, walking the rows in 64-element stages.
 * Per stage a lane holds its 2 x 4 code words and 8 (s, m) pairs; per
 * 16-element k-tile it turns each word into the four bf16x2 registers of an
 * A fragment (value = fmaf(s, code, m) in float, rounded to bf16 - the
 * values of the kept bf16 copies and of mmw.cu), and multiplies them by the
 * block's BN tokens. The next stage's words, pairs and activations are
 * loaded into registers while the current one is multiplied; activations
 * go through a double-buffered shared tile, one barrier a stage. When the
 * grid is small the stages are split over S blocks writing partial sums,
 * added in a fixed order by mmq_reduce_kernel (same input, same bits).
 *
 * The copy (0.75 bytes a weight: codes 0.5, float (s, m) pairs 0.25) is
 * made on the device at a weight's first batch while a quarter of the
 * device's memory stays free after it, like the bf16 copies (2 bytes a
 * weight).
 */
#include "bmma.cuh"
#include "hopper.cuh"
#include "matmul.cuh"
#include "mm4.cuh"
#include "w4.cuh"

#define MM4_WARPS 4
#define MM4_BM (MM4_WARPS * 32) /* rows a block: two 16-row tiles a warp */
#define MM4_BK 64               /* elements a stage: four 16-element k-tiles */
#define MM4_LDS (MM4_BK + 8)    /* bf16 per shared activation row: 144 bytes, ldmatrix rows on 8 bank groups */

struct cuda_w4_entry {
    const void *src;
    uint32_t *codes;
    float2 *scales;
    int64_t nin, nout;
};

void cuda_w4_free(cuda_backend *c) {
    for (size_t i = 0; i < c->n_w4; i++) cudaFree(c->w4tab[i].codes), cudaFree(c->w4tab[i].scales);
    free(c->w4tab);
    c->w4tab = NULL;
    c->n_w4 = c->cap_w4 = 0;
}

/* ---- the copy, made on the device ---- */

template <int T>
__global__ void w4_codes_kernel(const uint8_t *__restrict__ w, size_t nb1, int64_t nout, int64_t nin, size_t words,
                                uint32_t *__restrict__ codes) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < words) codes[i] = w4_word<T>(w, nb1, nout, nin, i);
}

template <int T>
__global__ void w4_scales_kernel(const uint8_t *__restrict__ w, size_t nb1, int64_t nout, int64_t nin, size_t pairs,
                                 float2 *__restrict__ scales) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < pairs) scales[i] = w4_pair<T>(w, nb1, nout, nin, i);
}

/* ---- the product ---- */

/* A code 0..15 as a float without I2F: into the low mantissa of 2^23, minus 2^23 (exact). */
static __device__ __forceinline__ float u4_float(uint32_t v) { return __int_as_float((int)(0x4B000000u | v)) - 8388608.0f; }

/* out[t][r] (S == 1) or part[z][t][r] = the block's share of sum_k w[r][k] x[t][k]; grid (row
 * blocks, token blocks, S), stages s0 .. s1 of the rows for split z. R row tiles, Q stages. */
template <int BN>
__global__ void __launch_bounds__(MM4_WARPS * OB_WARP, 2)
    mm4_kernel(const uint32_t *__restrict__ codes, const float2 *__restrict__ scales, int nout, int R, int Q,
               const __nv_bfloat16 *__restrict__ x, int64_t ldx, int n, const float *__restrict__ bias,
               float *__restrict__ out, int64_t ldo, float *__restrict__ part) {
    constexpr int THREADS = MM4_WARPS * OB_WARP, NT = BN / 8;
    constexpr int XC = BN * (MM4_BK / 8) / THREADS; /* 16-byte activation chunks a thread a stage */
    static_assert(NT % 2 == 0 && XC >= 1, "mm4 tile");
    __shared__ __align__(16) __nv_bfloat16 sx[2][BN][MM4_LDS];
    const int tid = threadIdx.x, warp = tid / OB_WARP, lane = tid % OB_WARP;
    const int g = lane / 4, t4 = lane % 4;
    const int rt0 = (int)blockIdx.x * (MM4_BM / 16) + 2 * warp; /* the warp's two row tiles */
    const int tok0 = (int)blockIdx.y * BN, G = 2 * Q;
    const int per = (Q + (int)gridDim.z - 1) / (int)gridDim.z;
    const int s0 = (int)blockIdx.z * per, s1 = min(Q, s0 + per);

    float acc[2][NT][4];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.0f;

    /* a stage's code words (tile m, k-tiles 0..3 in x, y, z, w) and (s, m) pairs [tile][group][row g, g + 8] */
    uint4 rc[2], rn[2];
    float2 sc[2][2][2], sn[2][2][2];
    int4 xv[XC];
    auto load_w = [&](int s, uint4 *c, float2 (*p)[2][2]) {
#pragma unroll
        for (int m = 0; m < 2; m++) {
            const int rt = rt0 + m;
            if (rt < R) {
                c[m] = *(const uint4 *)(codes + (((size_t)rt * (size_t)Q + (size_t)s) * 32 + (size_t)lane) * 4);
#pragma unroll
                for (int gg = 0; gg < 2; gg++)
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        p[m][gg][h] = scales[((size_t)rt * (size_t)G + (size_t)(2 * s + gg)) * 16 + (size_t)(g + 8 * h)];
            } else {
                c[m] = make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int gg = 0; gg < 2; gg++) p[m][gg][0] = p[m][gg][1] = make_float2(0.0f, 0.0f);
            }
        }
    };
    auto load_x = [&](int s) {
#pragma unroll
        for (int u = 0; u < XC; u++) {
            const int i = tid + u * THREADS, tk = i / 8, ch = i % 8;
            xv[u] = tok0 + tk < n ? *(const int4 *)(x + (int64_t)(tok0 + tk) * ldx + (int64_t)s * MM4_BK + 8 * ch)
                                  : make_int4(0, 0, 0, 0);
        }
    };
    auto put_x = [&](int b) {
#pragma unroll
        for (int u = 0; u < XC; u++) {
            const int i = tid + u * THREADS;
            *(int4 *)&sx[b][i / 8][8 * (i % 8)] = xv[u];
        }
    };
    if (s0 < s1) load_w(s0, rc, sc);
    ob_pdl_wait(); /* weights in flight; the activations are the previous kernel's output */
    if (s0 < s1) {
        load_x(s0);
        put_x(0);
        if (s0 + 1 < s1) load_w(s0 + 1, rn, sn), load_x(s0 + 1);
    }
    __syncthreads();
    for (int s = s0; s < s1; s++) {
        const int b = (s - s0) & 1;
#pragma unroll
        for (int kt = 0; kt < 4; kt++) {
            uint32_t a[2][4];
#pragma unroll
            for (int m = 0; m < 2; m++) {
                const uint32_t word = kt == 0 ? rc[m].x : kt == 1 ? rc[m].y : kt == 2 ? rc[m].z : rc[m].w;
                const float2 lo = sc[m][kt / 2][0], hi = sc[m][kt / 2][1]; /* rows g, g + 8 */
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const uint32_t pair = (word >> (4 * i)) & 0x000F000Fu;
                    const float2 p = (i & 1) ? hi : lo;
                    a[m][i] = bf16x2(fmaf(p.x, u4_float(pair & 0xFu), p.y), fmaf(p.x, u4_float(pair >> 16), p.y));
                }
            }
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                uint32_t bb[4]; /* token tiles j (bb[0], bb[1]) and j + 1 (bb[2], bb[3]) */
                ldsm_x4(bb, &sx[b][8 * j + (lane % 8) + 8 * (lane / 16)][16 * kt + 8 * ((lane / 8) % 2)]);
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    bmma(acc[m][j], a[m], bb[0], bb[1]);
                    bmma(acc[m][j + 1], a[m], bb[2], bb[3]);
                }
            }
        }
        /* the next stage's activations into the other buffer, its weights into place, the one
         * after that in flight */
        if (s + 1 < s1) {
            put_x(b ^ 1);
#pragma unroll
            for (int m = 0; m < 2; m++) {
                rc[m] = rn[m];
#pragma unroll
                for (int gg = 0; gg < 2; gg++) sc[m][gg][0] = sn[m][gg][0], sc[m][gg][1] = sn[m][gg][1];
            }
            if (s + 2 < s1) load_w(s + 2, rn, sn), load_x(s + 2);
        }
        __syncthreads();
    }

    /* results: (row (rt0 + m) * 16 + g (+ 8), token 8 j + 2 t4 (+ 1)) */
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int rr = (rt0 + m) * 16 + g + (e >= 2 ? 8 : 0);
                const int tk = tok0 + 8 * j + 2 * t4 + (e & 1);
                if (rr < nout && tk < n) mm_put(part, out, ldo, bias, (int)blockIdx.z, n, nout, tk, rr, acc[m][j][e]);
            }
}

/* ---- host side ---- */

bool cuda_mm4_usable(const cuda_backend *c, const ob_tensor *w, int64_t n) {
    const bool type = (w->type == OB_TYPE_Q4_K && w->ne[0] % 256 == 0) ||
                      ((w->type == OB_TYPE_Q4_0 || w->type == OB_TYPE_Q4_1) && w->ne[0] % 64 == 0);
    return c->w4 && !c->invariant && n >= c->w4_min && n <= c->w4_max && type && w->nb[1] % 2 == 0 &&
           (uintptr_t)w->data % 2 == 0;
}

/* The fragment-order copy of w, made now if it is a model weight and there is room; NULL if not. */
static int w4_copy(cuda_backend *c, const ob_tensor *w, const cuda_w4_entry **out) {
    *out = NULL;
    const int64_t nin = w->ne[0], nout = w->ne[1];
    for (size_t i = 0; i < c->n_w4; i++)
        if (c->w4tab[i].src == w->data && c->w4tab[i].nin == nin && c->w4tab[i].nout == nout) {
            *out = &c->w4tab[i];
            return 0;
        }
    if (c->w4_short) return 0;
    bool weight = false;
    for (size_t i = 0; i < c->n_weights && !weight; i++) weight = c->weights[i] == w->data;
    if (!weight) return 0;
    const size_t words = w4_code_words(nout, nin), pairs = w4_scale_pairs(nout, nin);
    const size_t bytes = words * sizeof(uint32_t) + pairs * sizeof(float2);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        free_b = total_b = 0;
    }
    if (free_b < bytes + total_b / 4) { /* a quarter of the device stays free, as for the bf16 copies */
        c->w4_short = true;
        return 0;
    }
    if (c->n_w4 == c->cap_w4) {
        const size_t cap = c->cap_w4 ? 2 * c->cap_w4 : 256;
        cuda_w4_entry *t = (cuda_w4_entry *)realloc(c->w4tab, cap * sizeof *t);
        if (!t) return 0;
        c->w4tab = t;
        c->cap_w4 = cap;
    }
    uint32_t *codes = NULL;
    float2 *scales = NULL;
    if (cudaMalloc(&codes, words * sizeof(uint32_t)) != cudaSuccess ||
        cudaMalloc(&scales, pairs * sizeof(float2)) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is not an error here: no more copies */
        if (codes) cudaFree(codes);
        c->w4_short = true;
        return 0;
    }
    cuda_w4_entry *e = &c->w4tab[c->n_w4++];
    e->src = w->data, e->codes = codes, e->scales = scales, e->nin = nin, e->nout = nout;
    const uint8_t *wd = (const uint8_t *)w->data;
    switch ((int)w->type) {
#define OB_W4(T)                                                                                                      \
    case T:                                                                                                           \
        OB_TRY(cuda_launch(c, w4_codes_kernel<T>, (unsigned)ob_div_up(words, 256), 256, 0, wd, w->nb[1], nout, nin,   \
                           words, codes));                                                                            \
        OB_TRY(cuda_launch(c, w4_scales_kernel<T>, (unsigned)ob_div_up(pairs, 256), 256, 0, wd, w->nb[1], nout, nin,  \
                           pairs, scales));                                                                           \
        break;
        OB_W4(OB_TYPE_Q4_K) OB_W4(OB_TYPE_Q4_0) OB_W4(OB_TYPE_Q4_1)
#undef OB_W4
    default: return ob_cuda_err(OB_ERR_INTERNAL, "w4: type %d", (int)w->type);
    }
    *out = e;
    return 0;
}

template <int BN>
static int mm4_launch(cuda_backend *c, const cuda_w4_entry *e, const __nv_bfloat16 *xb, int n, const float *bias,
                      float *out, int64_t ldo) {
    const int64_t nin = e->nin, nout = e->nout;
    const int R = (int)((nout + 15) / 16), Q = (int)(nin / MM4_BK);
    const unsigned gx = (unsigned)ob_div_up((size_t)nout, MM4_BM), gy = (unsigned)ob_div_up((size_t)n, BN);
    /* split the stages until the grid has about w4_blocks blocks an SM (four stages a split at least) */
    const int S = mm_splits((int64_t)c->n_sm * c->w4_blocks, (int64_t)gx * gy, Q, 4);
    float *part = NULL;
    if (S > 1) {
        OB_TRY(cuda_scratch(c, &c->mmq_scratch, &c->mmq_scratch_bytes, (size_t)S * (size_t)n * (size_t)nout * sizeof(float)));
        part = (float *)c->mmq_scratch;
    }
    c->rec_pdl = c->pdl;
    OB_TRY(cuda_launch(c, mm4_kernel<BN>, dim3(gx, gy, (unsigned)S), MM4_WARPS * OB_WARP, 0,
                       (const uint32_t *)e->codes, (const float2 *)e->scales, (int)nout, R, Q, xb, (int64_t)nin, n,
                       S > 1 ? (const float *)NULL : bias, out, ldo, part));
    if (S > 1)
        OB_TRY(cuda_launch(c, mmq_reduce_kernel, (unsigned)ob_div_up((size_t)n * (size_t)nout, 256), 256, 0,
                           (const float *)part, S, n, (int)nout, bias, out, ldo));
    return 0;
}

int cuda_mm4_matmul(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out,
                    bool *done) {
    *done = false;
    const int64_t n = x->ne[1];
    if (n > 65535LL * 32) return 0;
    const cuda_w4_entry *e = NULL;
    bool have = false;
    for (size_t i = 0; i < c->n_w4 && !have; i++) have = c->w4tab[i].src == w->data;
    if (!have) OB_TRY(cuda_flush(c)); /* a copy is made outside a recorded step */
    OB_TRY(w4_copy(c, w, &e));
    if (!e) return 0;
    const void *xa;
    OB_TRY(cuda_act16(c, x, false, &xa));
    const float *bd = bias ? (const float *)bias->data : NULL;
    float *o = (float *)out->data;
    const int64_t ldo = (int64_t)(out->nb[1] / sizeof(float));
    if (n <= 32) OB_TRY(mm4_launch<32>(c, e, (const __nv_bfloat16 *)xa, (int)n, bd, o, ldo));
    else OB_TRY(mm4_launch<64>(c, e, (const __nv_bfloat16 *)xa, (int)n, bd, o, ldo));
    *done = true;
    return 0;
}
