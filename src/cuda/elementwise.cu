/*
 * elementwise.cu - norms, RoPE and the elementwise ops (see
 * elementwise.cuh). Memory-bound and small next to the matrix products;
 * each is one launch over the batch.
 *
 * Precision notes, against the CPU reference:
 *   - norms accumulate in float32 (the CPU uses double); the difference is
 *     rounding of a sum of squares, ~1e-7 relative.
 *   - RoPE computes the angle with the same float operations in the same
 *     order as the CPU, without fused multiply-adds (__fmul_rn/__fadd_rn):
 *     at position 1e5 one rounding of the angle is ~0.008 rad, so a fused
 *     operation would be visible; sin/cos in double as the CPU does. The
 *     per-dimension frequencies and YaRN ramp are computed on the host by
 *     the CPU's formulas and sent as one small table.
 */
#include <math.h>
#include <string.h>

#include "elementwise.cuh"
#include "hopper.cuh"
#include "matmul.cuh"

/* ---- RMSNorm ---- */

/* One warp per group (group <= 1024) or one block of 1024 per group (a row of a
 * decode token: 4 elements a thread, not 16 in series). */
template <bool WARP_PER_GROUP>
__global__ void rms_norm_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, const float *__restrict__ w,
                                int64_t group, int64_t groups_per_row, int64_t total, float eps) {
    __shared__ float red[32];
    const int64_t gi = WARP_PER_GROUP ? (int64_t)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP
                                      : (int64_t)blockIdx.x;
    if (gi >= total) return; /* whole warps (or the whole block) leave together */
    const int64_t row = gi / groups_per_row, off = (gi % groups_per_row) * group;
    const float *xr = x + row * ldx + off;
    float *yr = y + row * ldy + off;
    const int t = WARP_PER_GROUP ? threadIdx.x % OB_WARP : threadIdx.x;
    const int nt = WARP_PER_GROUP ? OB_WARP : blockDim.x;
    float ss = 0.0f;
    for (int64_t i = t; i < group; i += nt) ss = fmaf(xr[i], xr[i], ss);
    ss = WARP_PER_GROUP ? warp_sum(ss) : block_sum(ss, red);
    const float s = 1.0f / sqrtf(ss / (float)group + eps);
    for (int64_t i = t; i < group; i += nt) yr[i] = w ? (xr[i] * s) * w[i] : xr[i] * s;
}

/* The decode form of a plain RMSNorm: a block of 1024 per row, the row's
 * elements kept in registers (at most ROWREG_MAX per thread), summed in the
 * same order as rms_norm_kernel<false>, so results are bit-identical to it.
 * Optionally fused with the residual add that precedes it (ADD: x = a + b is
 * written to sum, then normalized) and writing the q8 copy the next product
 * reads (mmvq.cuh: per 32 elements, scale max|y|/127, as q8_act_kernel). */
#define ROWREG_MAX 16

template <bool ADD>
__global__ void __launch_bounds__(1024)
    rms_norm_row_kernel(const float *a, int64_t lda, const float *b, int64_t ldb, float *sum, int64_t lds, float *y,
                        int64_t ldy, const float *__restrict__ w, int d, float eps, int8_t *__restrict__ qx,
                        float *__restrict__ dx) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const int t = threadIdx.x, lane = t % OB_WARP;
    float v[ROWREG_MAX];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < ROWREG_MAX; k++) {
        const int i = t + k * 1024;
        if (i < d) {
            v[k] = a[row * lda + i];
            if (ADD) {
                v[k] = v[k] + b[row * ldb + i];
                sum[row * lds + i] = v[k];
            }
            ss = fmaf(v[k], v[k], ss);
        }
    }
    ss = block_sum(ss, red);
    const float s = 1.0f / sqrtf(ss / (float)d + eps);
#pragma unroll
    for (int k = 0; k < ROWREG_MAX; k++) {
        const int i = t + k * 1024;
        if (i < d) { /* whole warps: d is a multiple of 32 */
            const float o = w ? (v[k] * s) * w[i] : v[k] * s;
            y[row * ldy + i] = o;
            if (qx) {
                const float amax = warp_max(fabsf(o));
                const float dq = amax / 127.0f, id = dq != 0.0f ? 1.0f / dq : 0.0f;
                const float q = roundf(o * id);
                qx[row * d + i] = (int8_t)q;
                const float qs = warp_sum(q);
                if (lane == 0) {
                    float *p = dx + 2 * (row * (d / 32) + i / 32);
                    p[0] = dq;
                    p[1] = dq * qs;
                }
            }
        }
    }
}

/* The same with 256 threads and 16-byte loads (rows of up to 8192 elements in
 * multiples of 128): each thread holds 4..32 elements of the row in float4s,
 * all of its loads (and the norm weights') issued at once, and a 32-element
 * q8 block is 8 neighbouring threads. Its sum runs in another order than
 * rms_norm_kernel<false>'s, so batch-invariant mode keeps the row kernel.
 * (The 1024-thread row kernel took 7 us a row in the 8B decode, ncu on the
 * H200; bench/RESULTS.md has this one's.) */
#define NORMV_T 256
#define NORMV_MAX 8

template <bool ADD, bool B16>
__global__ void __launch_bounds__(NORMV_T)
    rms_norm_vec_kernel(const float *a, int64_t lda, const float *b, int64_t ldb, float *sum, int64_t lds, float *y,
                        int64_t ldy, const float *__restrict__ w, int d, float eps, int8_t *__restrict__ qx,
                        float *__restrict__ dx) {
    ob_pdl_wait(); /* launched early in a graph (cuda_pdl_next): nothing is touched before */
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const int t = threadIdx.x, nv = d / 4;
    const float4 *a4 = (const float4 *)(a + row * lda);
    float4 v[NORMV_MAX], wv[NORMV_MAX];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NORMV_MAX; k++) {
        const int i = t + k * NORMV_T;
        if (i < nv) {
            wv[k] = w ? ((const float4 *)w)[i] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            v[k] = a4[i];
            if (ADD) {
                const float4 bb = ((const float4 *)(b + row * ldb))[i];
                v[k].x += bb.x, v[k].y += bb.y, v[k].z += bb.z, v[k].w += bb.w;
                ((float4 *)(sum + row * lds))[i] = v[k];
            }
            ss = fmaf(v[k].x, v[k].x, ss);
            ss = fmaf(v[k].y, v[k].y, ss);
            ss = fmaf(v[k].z, v[k].z, ss);
            ss = fmaf(v[k].w, v[k].w, ss);
        }
    }
    ss = block_sum(ss, red);
    const float s = 1.0f / sqrtf(ss / (float)d + eps);
#pragma unroll
    for (int k = 0; k < NORMV_MAX; k++) {
        const int i = t + k * NORMV_T;
        if (i < nv) { /* whole warps: nv is a multiple of 32 */
            float4 o;
            o.x = w ? (v[k].x * s) * wv[k].x : v[k].x * s;
            o.y = w ? (v[k].y * s) * wv[k].y : v[k].y * s;
            o.z = w ? (v[k].z * s) * wv[k].z : v[k].z * s;
            o.w = w ? (v[k].w * s) * wv[k].w : v[k].w * s;
            ((float4 *)(y + row * ldy))[i] = o;
            if (B16) { /* the bf16 copy (qx is its [n][d] buffer), as the act16 conversion rounds */
                const __nv_bfloat162 lo = __floats2bfloat162_rn(o.x, o.y), hi = __floats2bfloat162_rn(o.z, o.w);
                ((uint2 *)((__nv_bfloat16 *)qx + row * d))[i] = make_uint2(*(const uint32_t *)&lo, *(const uint32_t *)&hi);
            } else if (qx) {
                float am = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
#pragma unroll
                for (int m = 1; m < 8; m <<= 1) am = fmaxf(am, __shfl_xor_sync(OB_FULL_MASK, am, m));
                const float dq = am / 127.0f, id = dq != 0.0f ? 1.0f / dq : 0.0f;
                const float q0 = roundf(o.x * id), q1 = roundf(o.y * id), q2 = roundf(o.z * id), q3 = roundf(o.w * id);
                char4 qc;
                qc.x = (signed char)q0, qc.y = (signed char)q1, qc.z = (signed char)q2, qc.w = (signed char)q3;
                ((char4 *)(qx + row * d))[i] = qc;
                float qs = (q0 + q1) + (q2 + q3); /* small integers: exact in any order */
#pragma unroll
                for (int m = 1; m < 8; m <<= 1) qs += __shfl_xor_sync(OB_FULL_MASK, qs, m);
                if ((t & 7) == 0) {
                    float *p = dx + 2 * (row * (d / 32) + i / 8);
                    p[0] = dq;
                    p[1] = dq * qs;
                }
            }
        }
    }
}

/* The row kernel takes rows of up to 16384 elements in multiples of 32
 * (hidden sizes of 1024 and below too: a warp walking a whole row of 1024,
 * as rms_norm_kernel<true> did, took 11 us a token on Qwen3-0.6B). */
static bool row_norm_ok(int64_t d) { return d <= 1024 * ROWREG_MAX && d % 32 == 0; }

int cuda_op_rms_norm(ob_backend *b, const ob_tensor *x, const ob_tensor *w, float eps, int64_t group, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    const int64_t n = x->ne[1], d = x->ne[0];
    if (group == d && row_norm_ok(d) && n <= c->mmv_max && (!w || w->type == OB_TYPE_F32)) {
        int8_t *qx;
        float *dx;
        OB_TRY(cuda_q8_target(c, n, d, &qx, &dx));
        /* the bf16 target too, before the fusion check below: growing a scratch drains, which
         * would flush the add that check finds recorded */
        void *xb = NULL;
        const bool want16 = cuda_b16_wanted(c, n);
        if (want16) OB_TRY(cuda_b16_target(c, n, d, &xb));
        const float *wd = w ? (const float *)w->data : NULL;
        const int64_t ldx = (int64_t)(x->nb[1] / 4), ldy = (int64_t)(out->nb[1] / 4);
        const cuda_pending_add *pa = &c->last_add;
        const bool fuse = c->recording && pa->op + 1 == c->n_ops && pa->rec + 1 == c->n_recs && pa->out == x->data &&
                          pa->ldo == ldx && pa->d == d && pa->n == n;
        /* the 16-byte kernel: rows of 128k elements up to 8192, every row pointer 16-byte aligned */
        const uintptr_t al = (uintptr_t)x->data | (uintptr_t)out->data | (uintptr_t)(wd ? wd : NULL) |
                             (uintptr_t)(4 * ldx) | (uintptr_t)(4 * ldy) |
                             (fuse ? (uintptr_t)pa->a | (uintptr_t)pa->b | (uintptr_t)(4 * pa->lda) | (uintptr_t)(4 * pa->ldb) : 0);
        const bool vec = c->norm_vec && !c->invariant && d % 128 == 0 && d <= 4 * NORMV_T * NORMV_MAX && al % 16 == 0;
        /* the products' input copy: q8 for the integer kernels, or bf16 for kept bf16 copies of
         * the weights (cuda_b16_wanted; the 16-byte kernel only) */
        const bool b16 = vec && want16;
        if (b16) qx = (int8_t *)xb, dx = NULL;
        cuda_pdl_next(c);
        if (fuse) {
            /* the add just recorded feeds this norm: one kernel does both */
            c->n_recs--;
            c->rec_used = pa->rec_off;
            c->last_add.op = 0;
            if (vec)
                OB_TRY(cuda_launch(c, b16 ? rms_norm_vec_kernel<true, true> : rms_norm_vec_kernel<true, false>,
                                   (unsigned)n, NORMV_T, 0, pa->a, pa->lda, pa->b, pa->ldb, (float *)x->data, ldx,
                                   (float *)out->data, ldy, wd, (int)d, eps, qx, dx));
            else
                OB_TRY(cuda_launch(c, rms_norm_row_kernel<true>, (unsigned)n, 1024, 0, pa->a, pa->lda, pa->b, pa->ldb,
                                   (float *)x->data, ldx, (float *)out->data, ldy, wd, (int)d, eps, qx, dx));
        } else if (vec) {
            OB_TRY(cuda_launch(c, b16 ? rms_norm_vec_kernel<false, true> : rms_norm_vec_kernel<false, false>,
                               (unsigned)n, NORMV_T, 0, (const float *)x->data, ldx, (const float *)NULL, (int64_t)0,
                               (float *)NULL, (int64_t)0, (float *)out->data, ldy, wd, (int)d, eps, qx, dx));
        } else {
            OB_TRY(cuda_launch(c, rms_norm_row_kernel<false>, (unsigned)n, 1024, 0, (const float *)x->data, ldx,
                               (const float *)NULL, (int64_t)0, (float *)NULL, (int64_t)0, (float *)out->data, ldy,
                               wd, (int)d, eps, qx, dx));
        }
        if (b16) cuda_b16_made(c, out->data, n, d, ldy);
        else cuda_q8_made(c, out->data, n, d);
        return 0;
    }
    if (group <= 0 || x->ne[0] % group) return ob_cuda_err(OB_ERR_INTERNAL, "rms_norm: group %lld", (long long)group);
    if (w && w->type != OB_TYPE_F32) return ob_cuda_err(OB_ERR_UNSUPPORTED, "norm weight '%s' must be f32", w->name);
    const int64_t gpr = x->ne[0] / group, total = gpr * x->ne[1];
    if (total <= 0) return 0;
    const int64_t ldx = (int64_t)(x->nb[1] / 4), ldy = (int64_t)(out->nb[1] / 4);
    const float *wd = w ? (const float *)w->data : NULL;
    /* heads (q/k norms: groups of a row) warp by warp; whole rows a block of 1024 threads, the
     * summation order of the row kernel, so a row's result does not depend on the batch size */
    if (group <= 1024 && group < x->ne[0]) {
        if (c->recording && c->qk_fuse) { /* a RoPE of the result may take this norm over (cuda_op_rope) */
            cuda_pending_gnorm *g = &c->last_gnorm[c->n_ops & 1];
            g->op = c->n_ops, g->rec = c->n_recs;
            g->x = (const float *)x->data, g->y = (float *)out->data, g->ldx = ldx, g->ldy = ldy, g->w = wd;
            g->group = group, g->heads = gpr, g->n = x->ne[1], g->eps = eps;
        }
        OB_TRY(cuda_launch(c, rms_norm_kernel<true>, ob_div_up((size_t)total, 8), 256, 0,
            (const float *)x->data, ldx, (float *)out->data, ldy, wd, group, gpr, total, eps));
    } else {
        OB_TRY(cuda_launch(c, rms_norm_kernel<false>, (unsigned)total, 1024, 0, (const float *)x->data, ldx, (float *)out->data,
                                                                        ldy, wd, group, gpr, total, eps));
    }
    return 0;
}

/* ---- LayerNorm: one block per row, two passes like the CPU ---- */

__global__ void layer_norm_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, const float *__restrict__ w,
                                  const float *__restrict__ bias, int64_t d, float eps) {
    __shared__ float red[32];
    const float *xr = x + (int64_t)blockIdx.x * ldx;
    float *yr = y + (int64_t)blockIdx.x * ldy;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) s += xr[i];
    const float mean = block_sum(s, red) / (float)d;
    float v = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) v = fmaf(xr[i] - mean, xr[i] - mean, v);
    const float var = block_sum(v, red) / (float)d;
    const float sc = 1.0f / sqrtf(var + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        float o = (xr[i] - mean) * sc;
        if (w) o *= w[i];
        if (bias) o += bias[i];
        yr[i] = o;
    }
}

int cuda_op_layer_norm(ob_backend *b, const ob_tensor *x, const ob_tensor *w, const ob_tensor *bias, float eps,
                       ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    if ((w && w->type != OB_TYPE_F32) || (bias && bias->type != OB_TYPE_F32))
        return ob_cuda_err(OB_ERR_UNSUPPORTED, "layer_norm: weight and bias must be f32");
    if (x->ne[1] <= 0) return 0;
    if (x->ne[1] > INT32_MAX) return ob_cuda_err(OB_ERR_UNSUPPORTED, "layer_norm: %lld rows", (long long)x->ne[1]);
    OB_TRY(cuda_launch(c, layer_norm_kernel, (unsigned)x->ne[1], 256, 0,
        (const float *)x->data, (int64_t)(x->nb[1] / 4), (float *)out->data, (int64_t)(out->nb[1] / 4),
        w ? (const float *)w->data : NULL, bias ? (const float *)bias->data : NULL, x->ne[0], eps));
    return 0;
}

/* ---- RoPE ---- */

/* An element of a KV row into a pool row (F32 or F16, as kv_write_kernel writes it). */
static __device__ __forceinline__ void kv_put(uint8_t *row, int64_t kt, int64_t e, float v) {
    if (kt == 1) ((float *)row)[e] = v;
    else ((uint16_t *)row)[e] = ob_f2h(v);
}

/* tab[0..half) = inverse frequency of pair i (freq_factors applied),
 * tab[half..2 half) = YaRN ramp of pair i (0 without YaRN). */

__global__ void rope_kernel(float *x, int64_t ldx, int n_head, int head_dim, int half, bool neox,
                            const int32_t *__restrict__ pos, const float *__restrict__ tab, float freq_scale,
                            float mscale, bool ext, float *x2, int64_t ldx2, int n_head2, rope_kv_args kv) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    /* a thread per (pair, head): a decode token's 32 x 64 rotations run in
     * parallel, not 32 heads one after another in 64 threads. x2 (n_head2
     * heads, may be NULL): a second tensor rotated the same way - q and k in
     * one launch. kv.kt (x2 is k, half * 2 == head_dim): the rotated k and,
     * by the threads after the pairs, the v row (two elements a thread) go
     * to the KV pools too - the KV write in the same launch */
    const float p = (float)pos[blockIdx.y];
    int gi = blockIdx.x * blockDim.x + threadIdx.x;
    if (gi >= half * (n_head + n_head2)) {
        if (!kv.kt) return;
        const int j = gi - half * (n_head + n_head2);
        if (j >= half * n_head2) return; /* kv_dim / 2 pairs of v elements */
        uint8_t *dst = kv.vpool + (size_t)kv.slots[blockIdx.y] * kv.row_bytes;
        const float *vr = kv.v + (int64_t)blockIdx.y * kv.ldv;
        kv_put(dst, kv.kt, 2 * j, vr[2 * j]);
        kv_put(dst, kv.kt, 2 * j + 1, vr[2 * j + 1]);
        return;
    }
    float *row = x + (int64_t)blockIdx.y * ldx;
    uint8_t *krow = NULL;
    if (gi >= half * n_head) {
        gi -= half * n_head;
        row = x2 + (int64_t)blockIdx.y * ldx2;
        if (kv.kt) krow = kv.kpool + (size_t)kv.slots[blockIdx.y] * kv.row_bytes;
    }
    {
        const int i = gi % half, h = gi / half;
        const float theta_extrap = __fmul_rn(p, tab[i]);
        float theta = __fmul_rn(theta_extrap, freq_scale);
        if (ext) {
            const float ramp = tab[half + i];
            theta = __fadd_rn(__fmul_rn(theta, 1.0f - ramp), __fmul_rn(theta_extrap, ramp));
        }
        const float cs = __fmul_rn((float)cos((double)theta), mscale);
        const float sn = __fmul_rn((float)sin((double)theta), mscale);
        const int a = neox ? i : 2 * i, bb = neox ? i + half : 2 * i + 1;
        float *v = row + (int64_t)h * head_dim;
        const float x0 = v[a], x1 = v[bb];
        const float y0 = x0 * cs - x1 * sn, y1 = x0 * sn + x1 * cs;
        v[a] = y0;
        v[bb] = y1;
        if (krow) {
            kv_put(krow, kv.kt, (int64_t)h * head_dim + a, y0);
            kv_put(krow, kv.kt, (int64_t)h * head_dim + bb, y1);
        }
    }
}

/* q and k of a decode step normed per head (qwen3, gemma3: q_norm, k_norm)
 * and rotated (NEOX pairs over the whole head) in one launch instead of
 * four: a warp per (token, head), a lane holding elements lane + 32e of the
 * head. The sum of squares runs in rms_norm_kernel<true>'s order (a lane's
 * elements in turn, then the warp sum) and the rotation is rope_kernel's on
 * the normed values, so the result is the four kernels' bit for bit. rope2
 * off: k is normed only (its RoPE joins later by rewriting the launch).
 * The arguments: qk_norm_rope_args (common.cuh). */
template <int D>
__global__ void __launch_bounds__(128) qk_norm_rope_kernel(const qk_norm_rope_args a) {
    ob_pdl_wait(); /* launched early in a graph (cuda_pdl_next): nothing is touched before */
    constexpr int E = D / OB_WARP, HALF = D / 2;
    const int hg = blockIdx.x * 4 + threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP, t = blockIdx.y;
    if (hg >= a.nq + a.nk) { /* whole warps; with a KV write, the warps after k's copy v's heads */
        if (!a.kv.kt || hg >= a.nq + 2 * a.nk) return;
        const int h = hg - a.nq - a.nk;
        uint8_t *dst = a.kv.vpool + (size_t)a.kv.slots[t] * a.kv.row_bytes;
        const float *vr = a.kv.v + t * a.kv.ldv + (int64_t)h * D;
#pragma unroll
        for (int e = 0; e < E; e++) kv_put(dst, a.kv.kt, (int64_t)h * D + lane + OB_WARP * e, vr[lane + OB_WARP * e]);
        return;
    }
    const bool isk = hg >= a.nq;
    const int h = isk ? hg - a.nq : hg;
    const float *xr = (isk ? a.xk + t * a.ldxk : a.xq + t * a.ldxq) + (int64_t)h * D;
    float *yr = (isk ? a.yk + t * a.ldyk : a.yq + t * a.ldyq) + (int64_t)h * D;
    const float *w = isk ? a.wk : a.wq;
    float v[E];
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < E; e++) {
        v[e] = xr[lane + OB_WARP * e];
        ss = fmaf(v[e], v[e], ss);
    }
    ss = warp_sum(ss);
    const float s = 1.0f / sqrtf(ss / (float)D + a.eps);
#pragma unroll
    for (int e = 0; e < E; e++) v[e] = w ? (v[e] * s) * w[lane + OB_WARP * e] : v[e] * s;
    if (!isk || a.rope2) {
        const float p = (float)a.pos[t];
#pragma unroll
        for (int e = 0; e < E / 2; e++) {
            const int i = lane + OB_WARP * e; /* pair (i, i + HALF): elements e and e + E/2 of this lane */
            const float theta_extrap = __fmul_rn(p, a.tab[i]);
            float theta = __fmul_rn(theta_extrap, a.freq_scale);
            if (a.ext) {
                const float ramp = a.tab[HALF + i];
                theta = __fadd_rn(__fmul_rn(theta, 1.0f - ramp), __fmul_rn(theta_extrap, ramp));
            }
            const float cs = __fmul_rn((float)cos((double)theta), a.mscale);
            const float sn = __fmul_rn((float)sin((double)theta), a.mscale);
            const float x0 = v[e], x1 = v[e + E / 2];
            v[e] = x0 * cs - x1 * sn;
            v[e + E / 2] = x0 * sn + x1 * cs;
        }
    }
#pragma unroll
    for (int e = 0; e < E; e++) yr[lane + OB_WARP * e] = v[e];
    if (isk && a.kv.kt) {
        uint8_t *dst = a.kv.kpool + (size_t)a.kv.slots[t] * a.kv.row_bytes;
#pragma unroll
        for (int e = 0; e < E; e++) kv_put(dst, a.kv.kt, (int64_t)h * D + lane + OB_WARP * e, v[e]);
    }
}

static const void *qk_norm_rope_fn(int head_dim) {
    return head_dim == 64 ? (const void *)qk_norm_rope_kernel<64>
           : head_dim == 128 ? (const void *)qk_norm_rope_kernel<128>
                             : (const void *)qk_norm_rope_kernel<256>;
}

/* Whether n rows of a (ld lda floats apart, da long) and n rows of b share a byte. */
static bool rows_overlap(const void *a, int64_t lda, int64_t da, const void *b, int64_t ldb, int64_t db, int64_t n) {
    const uintptr_t alo = (uintptr_t)a, ahi = (uintptr_t)((const float *)a + (n - 1) * lda + da);
    const uintptr_t blo = (uintptr_t)b, bhi = (uintptr_t)((const float *)b + (n - 1) * ldb + db);
    return alo < bhi && blo < ahi;
}

/* Whether the fused q/k kernel could see one norm's output in the other's input (or both
 * outputs overlap): unfused, the q norm has read all of its input before the k norm writes,
 * and the k norm reads its input after the q norm wrote; fused, all heads run at once. Only
 * in-place norms of separate q and k buffers (every model's forward) are fused. The caller
 * has checked that q and k have the same number of rows. */
static bool qk_overlap(const cuda_pending_gnorm *q, const cuda_pending_gnorm *k) {
    const int64_t dq = q->group * q->heads, dk = k->group * k->heads, n = q->n;
    return rows_overlap(q->x, q->ldx, dq, k->x, k->ldx, dk, n) || rows_overlap(q->x, q->ldx, dq, k->y, k->ldy, dk, n) ||
           rows_overlap(q->y, q->ldy, dq, k->x, k->ldx, dk, n) || rows_overlap(q->y, q->ldy, dq, k->y, k->ldy, dk, n);
}

/* As cpu_backend.c's yarn_corr_dim. */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* The joined RoPE of q and k (and a KV write when kv.kt). */
static int rope2_launch(cuda_backend *c, const cuda_pending_rope2 *r2, const rope_kv_args &kv) {
    cuda_pdl_next(c);
    return cuda_launch(c, rope_kernel, r2->grid, 128, 0, r2->x, r2->ldx, r2->n_head, r2->head_dim, r2->half, r2->neox,
                       r2->pos, r2->tab, r2->freq_scale, r2->mscale, r2->ext, r2->x2, r2->ldx2, r2->n_head2, kv);
}

int cuda_op_rope(ob_backend *b, ob_tensor *x, int n_head, int head_dim, const int32_t *pos, const ob_rope_params *p) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    if (p->n_rot > head_dim || p->n_rot % 2 || p->n_rot <= 0)
        return ob_cuda_err(OB_ERR_INTERNAL, "rope: n_rot %d, head_dim %d", p->n_rot, head_dim);
    const int64_t n = x->ne[1];
    if (n <= 0) return 0;
    if (n > 65535) return ob_cuda_err(OB_ERR_UNSUPPORTED, "rope: %lld rows in one call", (long long)n);
    const int half = p->n_rot / 2;
    /* one staged array: [inv_freq | ramp] per pair, then the positions (two
     * separate stagings could be split by a ring wrap between them) */
    float *tab;
    const size_t tab_bytes = (size_t)half * 2 * sizeof(float);
    OB_TRY(cuda_host_tmp(c, tab_bytes + (size_t)n * sizeof(int32_t), (void **)&tab));
    float corr_lo = 0, corr_hi = 0, mscale = p->attn_factor;
    const bool ext = p->ext_factor != 0.0f;
    if (ext) {
        float lo = floorf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_fast, p->freq_base));
        float hi = ceilf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_slow, p->freq_base));
        corr_lo = fmaxf(0.0f, lo);
        corr_hi = fminf((float)p->n_rot - 1.0f, hi);
        mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
    }
    for (int i = 0; i < half; i++) {
        float inv_freq = 1.0f / powf(p->freq_base, (float)(2 * i) / (float)p->n_rot);
        if (p->freq_factors) inv_freq /= p->freq_factors[i];
        tab[i] = inv_freq;
        float ramp = 0.0f;
        if (ext) {
            float y = ((float)i - corr_lo) / fmaxf(0.001f, corr_hi - corr_lo);
            ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * p->ext_factor;
        }
        tab[half + i] = ramp;
    }
    memcpy((char *)tab + tab_bytes, pos, (size_t)n * sizeof(int32_t));
    const void *d_tab;
    OB_TRY(cuda_stage(c, tab, tab_bytes + (size_t)n * sizeof(int32_t), &d_tab));
    const void *d_pos = (const char *)d_tab + tab_bytes;
    const int threads = 128;
    const bool neox = p->mode == OB_ROPE_NEOX;
    const int64_t ldx = (int64_t)(x->nb[1] / 4);
    /* q normed per head, then k, then this RoPE of q: one kernel for the three (and, when the
     * RoPE of k follows, for that too: rope2 in the launch's arguments is turned on) */
    cuda_qknr_pend *qp = &c->last_qknr;
    if (c->recording && qp->op + 1 == c->n_ops && qp->rec + 1 == c->n_recs && qp->yk == x->data &&
        qp->tab == d_tab && qp->n == n && qp->nk == n_head && qp->d == head_dim && neox && 2 * half == head_dim &&
        qp->freq_scale == p->freq_scale && qp->mscale == mscale && qp->ext == ext && qp->ldyk == ldx) {
        qk_norm_rope_args ra;
        memcpy(&ra, &qp->args, sizeof ra); /* padding too: the graph compares launches byte for byte */
        ra.rope2 = true;
        qp->op = 0;
        qp->args.rope2 = true;
        qp->roped_op = c->n_ops; /* the KV write right after may join too (cuda_op_kv_write) */
        return cuda_rec_rewrite_last(c, qk_norm_rope_fn(head_dim), qp->grid, 0, &ra, sizeof ra);
    }
    const cuda_pending_gnorm *gq = &c->last_gnorm[(c->n_ops - 2) & 1], *gk = &c->last_gnorm[(c->n_ops - 1) & 1];
    if (c->recording && c->qk_fuse && neox && 2 * half == head_dim &&
        (head_dim == 64 || head_dim == 128 || head_dim == 256) && gq->op + 2 == c->n_ops && gk->op + 1 == c->n_ops &&
        gq->rec + 2 == c->n_recs && gk->rec + 1 == c->n_recs && gq->y == x->data && gq->group == head_dim &&
        gk->group == head_dim && gq->heads == n_head && gq->n == n && gk->n == n && gq->ldy == ldx &&
        gq->eps == gk->eps && !qk_overlap(gq, gk)) {
        /* the two norms were the last two launches: replace them */
        c->n_recs -= 2;
        qk_norm_rope_args ra;
        memset(&ra, 0, sizeof ra);
        ra.xq = gq->x, ra.xk = gk->x, ra.yq = gq->y, ra.yk = gk->y;
        ra.ldxq = gq->ldx, ra.ldxk = gk->ldx, ra.ldyq = gq->ldy, ra.ldyk = gk->ldy;
        ra.wq = gq->w, ra.wk = gk->w, ra.nq = (int)gq->heads, ra.nk = (int)gk->heads, ra.eps = gq->eps;
        ra.pos = (const int32_t *)d_pos, ra.tab = (const float *)d_tab, ra.freq_scale = p->freq_scale;
        ra.mscale = mscale, ra.ext = ext, ra.rope2 = false;
        const dim3 grid3((unsigned)ob_div_up((size_t)(ra.nq + ra.nk), 4), (unsigned)n);
        cuda_pdl_next(c);
        if (head_dim == 64) OB_TRY(cuda_launch(c, qk_norm_rope_kernel<64>, grid3, 128, 0, ra));
        else if (head_dim == 128) OB_TRY(cuda_launch(c, qk_norm_rope_kernel<128>, grid3, 128, 0, ra));
        else OB_TRY(cuda_launch(c, qk_norm_rope_kernel<256>, grid3, 128, 0, ra));
        qp->op = c->n_ops, qp->rec = c->n_recs - 1, qp->grid = grid3;
        memcpy(&qp->args, &ra, sizeof ra);
        qp->yk = gk->y, qp->ldyk = gk->ldy, qp->nk = ra.nk, qp->d = head_dim, qp->n = n, qp->tab = d_tab;
        qp->freq_scale = p->freq_scale, qp->mscale = mscale, qp->ext = ext;
        c->last_rope.op = 0;
        return 0;
    }
    cuda_pending_rope *pr = &c->last_rope;
    if (c->recording && pr->op + 1 == c->n_ops && pr->rec + 1 == c->n_recs && pr->tab == d_tab && pr->n == n &&
        pr->head_dim == head_dim && pr->half == half && pr->neox == neox && pr->freq_scale == p->freq_scale &&
        pr->mscale == mscale && pr->ext == ext) {
        /* the rope just recorded (q) used the same positions and table: rotate both in one launch */
        c->n_recs--;
        c->rec_used = pr->rec_off;
        cuda_pending_rope2 *r2 = &c->last_rope2;
        r2->rec = c->n_recs, r2->rec_off = c->rec_used;
        r2->grid = dim3(ob_div_up((size_t)half * (size_t)(pr->n_head + n_head), (size_t)threads), (unsigned)n);
        r2->x = pr->x, r2->ldx = pr->ldx, r2->n_head = pr->n_head, r2->head_dim = head_dim, r2->half = half;
        r2->neox = neox, r2->pos = (const int32_t *)d_pos, r2->tab = (const float *)d_tab;
        r2->freq_scale = p->freq_scale, r2->mscale = mscale, r2->ext = ext;
        r2->x2 = (float *)x->data, r2->ldx2 = ldx, r2->n_head2 = n_head, r2->n = n;
        rope_kv_args none;
        memset(&none, 0, sizeof none);
        OB_TRY(rope2_launch(c, r2, none));
        r2->op = c->n_ops; /* the KV write right after may join (cuda_op_kv_write) */
        pr->op = 0;
        return 0;
    }
    if (c->recording) {
        pr->op = c->n_ops;
        pr->rec = c->n_recs;
        pr->rec_off = c->rec_used;
        pr->x = (float *)x->data;
        pr->ldx = ldx;
        pr->n_head = n_head;
        pr->head_dim = head_dim;
        pr->half = half;
        pr->neox = neox;
        pr->tab = d_tab;
        pr->n = n;
        pr->freq_scale = p->freq_scale;
        pr->mscale = mscale;
        pr->ext = ext;
    }
    dim3 grid(ob_div_up((size_t)half * (size_t)n_head, (size_t)threads), (unsigned)n);
    cuda_pdl_next(c);
    rope_kv_args none;
    memset(&none, 0, sizeof none);
    OB_TRY(cuda_launch(c, rope_kernel, grid, threads, 0, (float *)x->data, ldx, n_head, head_dim, half, neox,
                       (const int32_t *)d_pos, (const float *)d_tab, p->freq_scale, mscale, ext, (float *)NULL,
                       (int64_t)0, 0, none));
    return 0;
}


int cuda_rope_kv_join(cuda_backend *c, const float *k, int64_t ldk, const float *v, int64_t ldv, int64_t n,
                      int64_t kv_dim, const rope_kv_args &kv) {
    if (!c->recording || !c->kv_fuse) return 0;
    /* q and k rotated by the launch just recorded, k being this write's k */
    cuda_pending_rope2 *r2 = &c->last_rope2;
    if (r2->op + 1 == c->n_ops && r2->rec + 1 == c->n_recs && r2->x2 == k && r2->ldx2 == ldk && r2->n == n &&
        2 * r2->half == r2->head_dim && (int64_t)r2->n_head2 * r2->head_dim == kv_dim &&
        !rows_overlap(v, ldv, kv_dim, r2->x, r2->ldx, (int64_t)r2->n_head * r2->head_dim, n) &&
        !rows_overlap(v, ldv, kv_dim, k, ldk, kv_dim, n)) {
        c->n_recs--;
        c->rec_used = r2->rec_off;
        r2->op = 0;
        const int threads = 128;
        r2->grid.x = ob_div_up((size_t)r2->half * (size_t)(r2->n_head + 2 * r2->n_head2), (size_t)threads);
        OB_TRY(rope2_launch(c, r2, kv));
        return 1;
    }
    /* q and k normed and rotated by the fused kernel just recorded */
    cuda_qknr_pend *qp = &c->last_qknr;
    const qk_norm_rope_args &qa = qp->args;
    if (qp->roped_op + 1 == c->n_ops && qp->rec + 1 == c->n_recs && qa.rope2 && qa.yk == k && qa.ldyk == ldk &&
        qp->n == n && (int64_t)qa.nk * qp->d == kv_dim &&
        !rows_overlap(v, ldv, kv_dim, qa.yq, qa.ldyq, (int64_t)qa.nq * qp->d, n) &&
        !rows_overlap(v, ldv, kv_dim, qa.xq, qa.ldxq, (int64_t)qa.nq * qp->d, n) &&
        !rows_overlap(v, ldv, kv_dim, qa.xk, qa.ldxk, kv_dim, n) && !rows_overlap(v, ldv, kv_dim, k, ldk, kv_dim, n)) {
        qk_norm_rope_args ra;
        memcpy(&ra, &qa, sizeof ra);
        ra.kv = kv;
        qp->roped_op = 0;
        const dim3 grid((unsigned)ob_div_up((size_t)(ra.nq + 2 * ra.nk), 4), qp->grid.y);
        OB_TRY(cuda_rec_rewrite_last(c, qk_norm_rope_fn(qp->d), grid, 0, &ra, sizeof ra));
        return 1;
    }
    return 0;
}

/* ---- activations, add, scale ---- */

/* act_f: common.cuh */

/* ---- argmax of rows (greedy sampling without the logits crossing the bus) ---- */

#define ARGMAX_THREADS 1024

/* One block a row: each thread scans a strided share keeping the first of
 * equal maxima, then the block keeps the lowest index among equal values -
 * the index a left-to-right scan (the host samplers) finds. */
__global__ void __launch_bounds__(ARGMAX_THREADS) argmax_rows_kernel(const float *__restrict__ x, int64_t ld, int64_t n,
                                                                    int32_t *__restrict__ ids) {
    __shared__ float sv[ARGMAX_THREADS / OB_WARP];
    __shared__ int si[ARGMAX_THREADS / OB_WARP];
    const float *row = x + (int64_t)blockIdx.x * ld;
    float bv = -INFINITY;
    int bi = -1;
    for (int64_t i = threadIdx.x; i < n; i += ARGMAX_THREADS) {
        const float v = row[i];
        if (bi < 0 || v > bv) bv = v, bi = (int)i;
    }
#pragma unroll
    for (int o = OB_WARP / 2; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(OB_FULL_MASK, bv, o);
        const int oi = __shfl_xor_sync(OB_FULL_MASK, bi, o);
        if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
    }
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    if (lane == 0) sv[warp] = bv, si[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ARGMAX_THREADS / OB_WARP; w++)
            if (si[w] >= 0 && (bi < 0 || sv[w] > bv || (sv[w] == bv && si[w] < bi))) bv = sv[w], bi = si[w];
        ids[blockIdx.x] = bi < 0 ? 0 : bi;
    }
}

int cuda_op_argmax_rows(ob_backend *b, const ob_tensor *x, int32_t *ids) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    const int64_t n = x->ne[0], rows = x->ne[1];
    if (rows <= 0) return 0;
    if (x->type != OB_TYPE_F32 || rows > 65535)
        return ob_cuda_err(OB_ERR_INTERNAL, "argmax_rows: %lld rows of type %d", (long long)rows, (int)x->type);
    OB_TRY(cuda_scratch(c, &c->argmax_scratch, &c->argmax_scratch_bytes, (size_t)rows * sizeof(int32_t)));
    OB_TRY(cuda_launch(c, argmax_rows_kernel, (unsigned)rows, ARGMAX_THREADS, 0, (const float *)x->data,
                       (int64_t)(x->nb[1] / sizeof(float)), n, (int32_t *)c->argmax_scratch));
    return b->ops->download(b, ids, c->argmax_scratch, (size_t)rows * sizeof(int32_t));
}

static unsigned ew_grid(int64_t total, const cuda_backend *c) {
    int64_t g = (total + 255) / 256, cap = (int64_t)c->n_sm * 16;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

__global__ void glu_kernel(int act, const float *g, int64_t ldg, const float *u, int64_t ldu, float *y, int64_t ldy,
                           int64_t d, int64_t total) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / d, k = i % d;
        const float a = act_f(act, g[r * ldg + k]);
        y[r * ldy + k] = u ? a * u[r * ldu + k] : a;
    }
}

/* glu_kernel for a decode batch, also writing the q8 copy the down product
 * reads: a thread per element, so a warp holds one 32-element q8 block. */
template <bool B16>
__global__ void glu_q8_kernel(int act, const float *g, int64_t ldg, const float *u, int64_t ldu, float *y, int64_t ldy,
                              int64_t d, int64_t total, int8_t *__restrict__ qx, float *__restrict__ dx) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return; /* whole warps: total is a multiple of 32 */
    const int64_t r = i / d, k = i % d;
    const float a = act_f(act, g[r * ldg + k]);
    const float o = u ? a * u[r * ldu + k] : a;
    y[r * ldy + k] = o;
    if (B16) { /* the bf16 copy instead (qx is its [n][d] buffer) */
        ((__nv_bfloat16 *)qx)[i] = __float2bfloat16_rn(o);
        return;
    }
    const float amax = warp_max(fabsf(o));
    const float dq = amax / 127.0f, id = dq != 0.0f ? 1.0f / dq : 0.0f;
    const float q = roundf(o * id);
    qx[i] = (int8_t)q;
    const float qs = warp_sum(q);
    if (threadIdx.x % OB_WARP == 0) dx[2 * (i / 32)] = dq, dx[2 * (i / 32) + 1] = dq * qs;
}

/* Whether rows [p, p + n ld) (each d floats) and [q, q + n ld2) may share a float. */
static bool glu_overlap(const float *p, int64_t ld, const float *q, int64_t ld2, int64_t d, int64_t n) {
    const float *pe = p + (n - 1) * ld + d, *qe = q + (n - 1) * ld2 + d;
    return p < qe && q < pe;
}

/* Whether the GLU can be computed by the gate/up product recorded just before it (while a step
 * is recorded, OB_CUDA_GLU_FUSE=1, not batch-invariant): gate and up are that joined pair's
 * two outputs (same op count moved by one, nothing recorded since, same rows, strides and
 * tokens), and the output either is gate's or up's rows or shares no float with them. */
static bool glu_fusable(const cuda_backend *c, const ob_tensor *gate, const ob_tensor *up, const ob_tensor *out) {
    const cuda_mmvq_pend *p = &c->mmvq_pend;
    if (!c->glu_fuse || !c->recording || c->invariant || !up || !p->glu || p->rec < 0 || p->rec != c->n_recs - 1 ||
        p->op + 1 != c->n_ops || p->n != 2)
        return false;
    const int64_t d = gate->ne[0], n = gate->ne[1];
    const int64_t ldg = (int64_t)(gate->nb[1] / 4), ldu = (int64_t)(up->nb[1] / 4), ldy = (int64_t)(out->nb[1] / 4);
    if (p->out[0] != gate->data || p->out[1] != up->data || p->nout[0] != d || p->nout[1] != d || p->ldo[0] != ldg ||
        p->ldo[1] != ldu || p->ntok != n || up->ne[0] != d || up->ne[1] != n || out->ne[0] != d || out->ne[1] != n)
        return false;
    const float *y = (const float *)out->data;
    if (y == gate->data) return ldy == ldg;
    if (y == up->data) return ldy == ldu;
    return !glu_overlap(y, ldy, (const float *)gate->data, ldg, d, n) &&
           !glu_overlap(y, ldy, (const float *)up->data, ldu, d, n);
}

int cuda_op_glu(ob_backend *b, ob_act act, const ob_tensor *gate, const ob_tensor *up, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    const int64_t d = gate->ne[0], total = d * gate->ne[1];
    if (total <= 0) return 0;
    if (d % 32 == 0 && up && c->glu_fuse && c->graphs && !c->recording && !c->invariant) {
        /* the fused GLU's buffers, made outside a recording (a prompt's GLU, say): made by a
         * step's first GLU, they would drain and end that step's recording */
        int8_t *qx;
        float *dx;
        int *cnt;
        OB_TRY(cuda_glu_target(c, 1, d, &qx, &dx, &cnt));
    }
    if (d % 32 == 0 && gate->ne[1] <= c->mmv_max) {
        /* the down product's input copy: q8 for the integer kernels, or bf16 for a kept bf16
         * copy of the weight (cuda_b16_wanted) */
        const bool b16 = cuda_b16_wanted(c, gate->ne[1]) && out->nb[1] == (size_t)d * 4;
        if (!b16 && glu_fusable(c, gate, up, out)) {
            /* the gate/up product computes h (and, the integer kernel, its q8 copy) itself */
            cuda_glu_out g;
            memset(&g, 0, sizeof g);
            const bool q8 = c->mmvq_pend.in1 != NULL; /* the integer kernel (mmv16.cu: float rows alone) */
            if (q8) OB_TRY(cuda_glu_target(c, gate->ne[1], d, &g.qx, &g.dx, &g.cnt));
            if (glu_fusable(c, gate, up, out)) { /* still: a target that grew drained, ending the recording */
                g.y = (float *)out->data, g.ldy = (int64_t)(out->nb[1] / 4), g.act = (int64_t)act;
                OB_TRY(c->mmvq_pend.glu(c, &g));
                if (q8) cuda_q8_made_at(c, out->data, gate->ne[1], d, g.qx, g.dx);
                c->n_glu_fused++;
                return 0;
            }
        }
        int8_t *qx;
        float *dx = NULL;
        if (b16) OB_TRY(cuda_b16_target(c, gate->ne[1], d, (void **)&qx));
        else OB_TRY(cuda_q8_target(c, gate->ne[1], d, &qx, &dx));
        cuda_pdl_next(c);
        OB_TRY(cuda_launch(c, b16 ? glu_q8_kernel<true> : glu_q8_kernel<false>, ob_div_up((size_t)total, 256), 256, 0,
                           (int)act, (const float *)gate->data, (int64_t)(gate->nb[1] / 4),
                           up ? (const float *)up->data : (const float *)NULL, up ? (int64_t)(up->nb[1] / 4) : 0,
                           (float *)out->data, (int64_t)(out->nb[1] / 4), d, total, qx, dx));
        if (b16) cuda_b16_made(c, out->data, gate->ne[1], d, d);
        else cuda_q8_made(c, out->data, gate->ne[1], d);
        return 0;
    }
    OB_TRY(cuda_launch(c, glu_kernel, ew_grid(total, c), 256, 0,
        (int)act, (const float *)gate->data, (int64_t)(gate->nb[1] / 4), up ? (const float *)up->data : NULL,
        up ? (int64_t)(up->nb[1] / 4) : 0, (float *)out->data, (int64_t)(out->nb[1] / 4), d, total));
    return 0;
}

__global__ void add_kernel(const float *a, int64_t lda, const float *b, int64_t ldb, float *y, int64_t ldy, int64_t d,
                           int64_t total) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / d, k = i % d;
        y[r * ldy + k] = a[r * lda + k] + b[r * ldb + k];
    }
}

int cuda_op_add(ob_backend *b, const ob_tensor *a, const ob_tensor *bb, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    if (bb->ne[0] != a->ne[0] || (bb->ne[1] != a->ne[1] && bb->ne[1] != 1))
        return ob_cuda_err(OB_ERR_INTERNAL, "add: shapes differ");
    const int64_t d = a->ne[0], total = d * a->ne[1];
    if (total <= 0) return 0;
    const int64_t ldb = bb->ne[1] == 1 && a->ne[1] != 1 ? 0 : (int64_t)(bb->nb[1] / 4); /* broadcast row */
    if (c->recording) { /* a norm of the sum right after may take this add over (cuda_op_rms_norm) */
        cuda_pending_add *pa = &c->last_add;
        pa->op = c->n_ops;
        pa->rec = c->n_recs;
        pa->rec_off = c->rec_used;
        pa->a = (const float *)a->data;
        pa->lda = (int64_t)(a->nb[1] / 4);
        pa->b = (const float *)bb->data;
        pa->ldb = ldb;
        pa->out = out->data;
        pa->ldo = (int64_t)(out->nb[1] / 4);
        pa->d = d;
        pa->n = a->ne[1];
    }
    cuda_pdl_next(c);
    OB_TRY(cuda_launch(c, add_kernel, ew_grid(total, c), 256, 0, (const float *)a->data, (int64_t)(a->nb[1] / 4),
                                                         (const float *)bb->data, ldb, (float *)out->data,
                                                         (int64_t)(out->nb[1] / 4), d, total));
    return 0;
}

__global__ void scale_kernel(const float *x, int64_t ldx, float s, float *y, int64_t ldy, int64_t d, int64_t total) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / d, k = i % d;
        y[r * ldy + k] = x[r * ldx + k] * s;
    }
}

int cuda_op_scale(ob_backend *b, const ob_tensor *x, float s, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    const int64_t d = x->ne[0], total = d * x->ne[1];
    if (total <= 0) return 0;
    OB_TRY(cuda_launch(c, scale_kernel, ew_grid(total, c), 256, 0, (const float *)x->data, (int64_t)(x->nb[1] / 4), s,
                                                           (float *)out->data, (int64_t)(out->nb[1] / 4), d, total));
    return 0;
}

/* ---- gather ---- */

__global__ void gather_kernel(const float *x, int64_t ldx, const int32_t *__restrict__ idx, float *y, int64_t ldy,
                              int64_t d) {
    const float *src = x + (int64_t)idx[blockIdx.y] * ldx;
    float *dst = y + (int64_t)blockIdx.y * ldy;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d; k += (int64_t)gridDim.x * blockDim.x)
        dst[k] = src[k];
}

int cuda_op_gather_rows(ob_backend *b, const ob_tensor *x, const int32_t *idx, int64_t n, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    if (n <= 0) return 0;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= x->ne[1]) return ob_cuda_err(OB_ERR_INTERNAL, "gather row %d", idx[i]);
    if (n > 65535) return ob_cuda_err(OB_ERR_UNSUPPORTED, "gather_rows: %lld rows in one call", (long long)n);
    const void *d_idx;
    OB_TRY(cuda_stage(c, idx, (size_t)n * sizeof(int32_t), &d_idx));
    const int64_t d = x->ne[0];
    dim3 grid(ob_div_up((size_t)d, 256), (unsigned)n);
    OB_TRY(cuda_launch(c, gather_kernel, grid, 256, 0, (const float *)x->data, (int64_t)(x->nb[1] / 4),
                                               (const int32_t *)d_idx, (float *)out->data, (int64_t)(out->nb[1] / 4),
                                               d));
    return 0;
}
