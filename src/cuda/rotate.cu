/*
 * rotate.cu - the rotated Q4_0 route on the GPU (docs/quantization.md, "The
 * Hadamard route"): the activation rotation (ob_backend_ops.hadamard_rows)
 * and the W4A4 product (matmul_a4). In the ops table unless OB_CUDA_ROTATE=0
 * (backend.cu); test_cuda's op_hadamard_rows, op_matmul_a4,
 * op_rotation_shared_input and model_rotated_q4_0_vs_cpu test it.
 *
 * Rotation: a warp per 32-element block, a lane per element. Each lane
 * multiplies its value by its column's sign, then the five butterfly stages
 * of src/quant/hadamard.c run across lanes by shuffles (the lane whose stage
 * bit is clear keeps a + b, its partner a - b: the same two operands in the
 * same order as the CPU's loop), then the 1/sqrt(32) scale. Every element
 * goes through the same float operations as ob_hadamard_block, so the result
 * equals the CPU's bit for bit. A partial last block is copied. The signs
 * are backend memory that the engine's hook uploads once (matmul_hook.c).
 *
 * W4A4: the activations are rounded to 4 bits per 32 exactly as the CPU's
 * ob_act_q4 (src/cpu/kernels.h): the first value of largest magnitude m sets
 * d = m / -8, codes trunc(x * (1/d) + 8.5) clamped to 15, minus 8, the scale
 * then rounded to half. The product and the sum are separate roundings here
 * (__fmul_rn, __fadd_rn: nvcc would otherwise fuse them into one FMA, which
 * moves codes at the .5 boundaries), as on the CPU. The codes (-8..7) are
 * int8 bytes, so they go into a scratch of their own in the q8 kernels'
 * layout (mmvq.cuh: bytes, scale d, scaled sum d * sum q) and the existing
 * integer kernels multiply them: Q4_0's -8 offset uses the scaled sum as it
 * does for 8-bit activations. Integer products per block, float scales
 * after: the result is the CPU's W4A4 sum up to float rounding.
 *
 * Shared inputs: the engine's hook asks for a rotation before every rotated
 * product, so q, k and v (gate and up) rotate the same input in turn. A
 * rotation that repeats the one two ops earlier with only a product on its
 * output between is skipped, and the 8-bit or 4-bit copy that product made
 * is kept (cuda_op_hadamard_rows); on the 4-bit path the rotation also
 * writes the 4-bit copy in the same launch: one launch per distinct input
 * of the layer, where the plain file's 8-bit path needs one for some inputs
 * (attn_output's) and none for the rest (norms and activations write the q8
 * copy). The result is the same bits as without any of it
 * (OB_CUDA_ROT_REUSE=0; test_cuda checks both).
 */
#include "matmul.cuh"
#include "mmq.cuh"
#include "mmvq.cuh"

/* ---- 4-bit rounding of one block of 32, a lane per value ----
 * Writes the lane's code q (-8..7) to *q, and lane 0 the block's scale d
 * (half-rounded) and d * sum q to dx[0], dx[1]. The whole warp calls it. */
static __device__ __forceinline__ void q4_block(float v, int lane, int8_t *q_out, float *dx) {
    /* the first element of largest magnitude (the reference's strict > in element order) */
    float a = fabsf(v);
    int at = lane;
#pragma unroll
    for (int o = OB_WARP / 2; o > 0; o >>= 1) {
        const float a2 = __shfl_xor_sync(OB_FULL_MASK, a, o);
        const int at2 = __shfl_xor_sync(OB_FULL_MASK, at, o);
        if (a2 > a || (a2 == a && at2 < at)) a = a2, at = at2;
    }
    const float m = __shfl_sync(OB_FULL_MASK, v, at);
    const float max = a > 0.0f ? m : 0.0f; /* an all-zero block: +0, as the reference's start value */
    const float d = __fdiv_rn(max, -8.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    int q = __float2int_rz(__fadd_rn(__fmul_rn(v, id), 8.5f));
    q = (q < 15 ? q : 15) - 8;
    *q_out = (int8_t)q;
    const float sum = warp_sum((float)q); /* small integers: exact */
    if (lane == 0) {
        const float dh = __half2float(__float2half_rn(d));
        dx[0] = dh;
        dx[1] = dh * sum;
    }
}

/* ---- rotation ---- */

/* qx, dx: when not NULL (rows of whole blocks), the rotated rows' 4-bit
 * copy as q4_act_kernel makes it, for the W4A4 product that follows. */
__global__ void hadamard_rows_kernel(const float *__restrict__ x, int64_t ldx, int64_t d, int64_t n,
                                     const float *__restrict__ signs, float *__restrict__ out,
                                     int8_t *__restrict__ qx, float *__restrict__ dx) {
    const int64_t nb = (d + 31) / 32;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP;
    if (gw >= nb * n) return; /* whole warps */
    const int lane = threadIdx.x % OB_WARP;
    const int64_t r = gw / nb, k = (gw % nb) * 32 + lane;
    const bool whole = (gw % nb) * 32 + 32 <= d;
    if (!whole) {
        if (k < d) out[r * d + k] = x[r * ldx + k];
        return;
    }
    float v = x[r * ldx + k] * signs[k];
#pragma unroll
    for (int len = 1; len < 32; len <<= 1) {
        const float p = __shfl_xor_sync(OB_FULL_MASK, v, len);
        v = lane & len ? __fsub_rn(p, v) : __fadd_rn(v, p);
    }
    v = __fmul_rn(v, 0.17677669529663687f); /* 1/sqrt(32), as hadamard.c */
    out[r * d + k] = v;
    if (qx) q4_block(v, lane, qx + r * d + k, dx + 2 * gw);
}

/* Where the 4-bit copy of n rows of nin activations goes: its own scratch
 * (the q8 one is rewritten by norms and activations), q8 layout. */
static int q4_target(cuda_backend *c, int64_t n, int64_t nin, int8_t **qx, float **dx) {
    const size_t qbytes = ((size_t)(n * nin) + 255) & ~(size_t)255;
    OB_TRY(cuda_scratch(c, &c->q4_scratch, &c->q4_scratch_bytes, qbytes + (size_t)(n * (nin / 32)) * 2 * sizeof(float)));
    *qx = (int8_t *)c->q4_scratch;
    *dx = (float *)((uint8_t *)c->q4_scratch + qbytes);
    return 0;
}

/* The engine's hook rotates the input of every rotated product, so q, k
 * and v (gate and up) ask for the same rotation three (two) times in a row.
 * When the op just before this one was a product that read the last
 * rotation's output, and that rotation, the op before it, had the same
 * input, output, signs and shape, nothing can have written either buffer
 * since (a product writes only its own output, never its input), so the
 * output is still this rotation: the launch is skipped, and the 8-bit or
 * 4-bit copy that product made of it stays valid for the next product
 * (their op numbers move on with it). */
int cuda_op_hadamard_rows(ob_backend *b, const ob_tensor *x, float *out, const float *signs) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c)); /* an op of its own: a q8 copy of the input made before is not this output's */
    if (x->type != OB_TYPE_F32 || x->nb[1] % sizeof(float) != 0)
        return ob_cuda_err(OB_ERR_INTERNAL, "hadamard_rows: activations must be f32 rows");
    const int64_t d = x->ne[0], n = x->ne[1], ld = (int64_t)(x->nb[1] / sizeof(float));
    if (d <= 0 || n <= 0) return 0;
    const unsigned long long op = c->n_ops;
    /* in place (or overlapping), a second rotation is not the first one's result */
    const char *xb = (const char *)x->data, *ob = (const char *)out;
    const bool apart = ob + (size_t)(n * d) * sizeof(float) <= xb || xb + (size_t)((n - 1) * ld + d) * sizeof(float) <= ob;
    if (c->rot_reuse && apart && c->rot_x == x->data && c->rot_out == out && c->rot_signs == signs && c->rot_d == d &&
        c->rot_n == n && c->rot_ld == ld && c->rot_op + 2 == op && c->rot_read_op + 1 == op) {
        c->rot_op = op;
        if (c->q8_src == out && c->q8_op + 1 == op) c->q8_op = op;
        if (c->q4_src == out && c->q4_op + 1 == op) c->q4_op = op;
        return 0;
    }
    /* W4A4 products read the rotations (the last product on one was): round to 4 bits in the same launch */
    const bool fuse = c->rot_reuse && c->rot_a4 && d % 32 == 0;
    int8_t *qx = NULL;
    float *dx = NULL;
    if (fuse) {
        c->q4_src = NULL; /* until the launch below is in */
        OB_TRY(q4_target(c, n, d, &qx, &dx));
    }
    const int64_t warps = n * ((d + 31) / 32);
    OB_TRY(cuda_launch(c, hadamard_rows_kernel, ob_div_up((size_t)warps, 8), 256, 0, (const float *)x->data, ld, d, n,
                       signs, out, qx, dx));
    c->rot_x = x->data, c->rot_out = out, c->rot_signs = signs;
    c->rot_d = d, c->rot_n = n, c->rot_ld = ld, c->rot_op = op;
    if (fuse) c->q4_src = out, c->q4_n = n, c->q4_nin = d, c->q4_op = op;
    return 0;
}

/* ---- 4-bit activations ---- */

/* One warp per block of 32: codes q (-8..7) as bytes at qx[t * nin + i],
 * dx[2 (t nb + b)] = d (half-rounded), dx[.. + 1] = d * sum q. */
__global__ void q4_act_kernel(const float *__restrict__ x, int64_t ldx, int64_t nin, int n, int8_t *__restrict__ qx,
                              float *__restrict__ dx) {
    const int64_t nb = nin / 32;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP;
    if (gw >= nb * n) return;
    const int lane = threadIdx.x % OB_WARP;
    const int64_t t = gw / nb, b = gw % nb;
    q4_block(x[t * ldx + b * 32 + lane], lane, qx + t * nin + b * 32 + lane, dx + 2 * (t * nb + b));
}

int cuda_op_matmul_a4(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    const char *name = w->name ? w->name : "?";
    if (w->type != OB_TYPE_Q4_0)
        return ob_cuda_err(OB_ERR_UNSUPPORTED, "matmul '%s': no 4-bit activation kernel for %s", name,
                           cuda_type_name(w->type));
    if (x->type != OB_TYPE_F32 || out->type != OB_TYPE_F32 || x->ne[0] != w->ne[0] || out->ne[0] != w->ne[1] ||
        out->ne[1] != x->ne[1])
        return ob_cuda_err(OB_ERR_INTERNAL, "matmul '%s': shapes [%lld,%lld] x [%lld,%lld] -> [%lld,%lld]", name,
                           (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[0], (long long)x->ne[1],
                           (long long)out->ne[0], (long long)out->ne[1]);
    if (bias && (bias->type != OB_TYPE_F32 || bias->ne[0] != w->ne[1]))
        return ob_cuda_err(OB_ERR_INTERNAL, "matmul '%s': bias must be f32 [%lld]", name, (long long)w->ne[1]);
    const int64_t nin = w->ne[0], nout = w->ne[1], n = x->ne[1];
    /* the integer kernels read Q4_0 in pairs of blocks, 4-byte words (cuda_mmvq_usable) */
    if (nin % 64 != 0 || w->nb[1] % 4 != 0 || (uintptr_t)w->data % 4 != 0 || x->nb[1] % sizeof(float) != 0)
        return ob_cuda_err(OB_ERR_UNSUPPORTED, "matmul '%s': no 4-bit activation kernel for rows of %lld", name,
                           (long long)nin);
    if (n <= 0 || nout <= 0) return 0;
    if (nout > INT32_MAX) return ob_cuda_err(OB_ERR_UNSUPPORTED, "matmul: %lld rows", (long long)nout);
    if (x->data == c->rot_out) c->rot_read_op = c->n_ops, c->rot_a4 = true;
    /* the 4-bit copy: made once for products that share an input, as the 8-bit one (mmvq.cu),
     * or by the rotation just before (above) */
    int8_t *qx;
    float *dx;
    OB_TRY(q4_target(c, n, nin, &qx, &dx));
    const bool same = c->rot_reuse && c->q4_src == x->data && c->q4_n == n && c->q4_nin == nin &&
                      c->q4_op + 1 == c->n_ops;
    if (!same) {
        c->q4_src = NULL; /* until the launch below is in */
        OB_TRY(cuda_launch(c, q4_act_kernel, ob_div_up((size_t)(n * (nin / 32)), 8), 256, 0, (const float *)x->data,
                           (int64_t)(x->nb[1] / sizeof(float)), nin, (int)n, qx, dx));
    }
    c->q4_src = x->data, c->q4_n = n, c->q4_nin = nin, c->q4_op = c->n_ops;
    /* no float path computes this product: the tensor-core kernel takes every batch of 9 and
     * more it can (not only mmq_min..mmq_max), the decode kernels the rest */
    const bool mmq = cuda_mmq_usable(c, w, n) || (n > 8 && cuda_mmq_usable(c, w, c->mmq_max));
    return cuda_q8_products(c, w, qx, dx, n, mmq, bias ? (const float *)bias->data : NULL, (float *)out->data,
                            (int64_t)(out->nb[1] / sizeof(float)));
}
