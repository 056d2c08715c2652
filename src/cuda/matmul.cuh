/*
 * matmul.cuh - the matrix family: weight-times-activation products of any
 * weight type, embedding lookup, and the decode matrix-vector kernel.
 *
 * Two paths (matmul.cu picks one per call):
 *
 *   small batches (n <= cuda_backend.mmv_max, default 64): mmv_kernel
 *   (mmv.cuh), one launch per group of up to 8 tokens. Each warp (or 2 or
 *   4 warps) owns a weight row and streams it in tiles of whole blocks with
 *   coalesced 16-byte loads into shared memory, the next tile in flight
 *   while the lanes dequantize 8-element chunks of the current one; every
 *   weight byte is read once per group of 8 tokens. Activations are read as
 *   float4 through the read-only cache (at most 8 rows, they stay in L1/L2;
 *   the weight stream is what costs). Accumulation is float32 FMA, so
 *   results match the CPU's float dot products to rounding.
 *
 *   larger batches: the weight rows are dequantized to float32 in a scratch
 *   buffer (a slice of rows at a time, at most 256 MiB) and multiplied by
 *   cuBLAS (TF32 tensor cores for quantized/F16/BF16 weights, plain FP32 for
 *   F32 weights). Prefill tuning (tensor-core kernels on the quantized
 *   blocks, no scratch round trip) comes later.
 */
#ifndef OB_CUDA_MATMUL_CUH
#define OB_CUDA_MATMUL_CUH

#include "common.cuh"

/* Bytes allocated past the end of every weight: the decode kernel's 16-byte
 * tile loads may read (never use) up to 15 bytes beyond the last row. */
#define OB_WEIGHT_PAD 64

typedef struct mmv_args {
    const uint8_t *w;   /* weight rows */
    size_t nb1;         /* bytes per weight row */
    int64_t nch;        /* chunks of 8 per row (nin / 8) */
    int nout;           /* rows */
    const float *x;     /* [n][ldx] activations, 16-byte aligned rows */
    int64_t ldx;
    const float *bias;  /* [nout] or NULL */
    float *out;         /* [n][ldo] */
    int64_t ldo;
    int n;              /* tokens, 1..8 */
    const int8_t *lut;
} mmv_args;

/* The decode kernel for weight type T (instantiated in mmv_*.cu). */
template <int T> int mmv_launch(cuda_backend *c, const mmv_args *a);
/* F16/BF16 at decode batches without the shared-memory staging (mmv16.cu):
 * rows of a multiple of 8 elements, 16-byte aligned. */
int cuda_mmv16_launch(cuda_backend *c, int type, const mmv_args *a);

/* The integer decode kernel (mmvq.cu): whether it takes this weight for a
 * batch of n tokens, and the product itself. */
/* Whether the integer decode kernels (mmvq.cu, moe.cu's expert kernels) can read w: a type of
 * ob_qdot, rows of whole blocks, rows and data aligned to the type's widest load. */
bool cuda_qdot_fits(const ob_tensor *w);
bool cuda_mmvq_usable(const cuda_backend *c, const ob_tensor *w, int64_t n);
int cuda_mmvq_matmul(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out);
/* Where the q8 copy of n rows of nin activations goes (the q8 scratch), and
 * the note that `src` now has one there, made by the current op: an op whose
 * output feeds a product (a norm, an activation) writes the copy itself and
 * the product skips its quantizing launch. */
int cuda_q8_target(cuda_backend *c, int64_t n, int64_t nin, int8_t **qx, float **dx);
void cuda_q8_made(cuda_backend *c, const void *src, int64_t n, int64_t nin);
/* The same note for a copy that lies at qx, dx instead (NULL: the q8 scratch). */
void cuda_q8_made_at(cuda_backend *c, const void *src, int64_t n, int64_t nin, const int8_t *qx, const float *dx);
/* Where a GLU fused into its gate/up product (cuda_glu_out) puts h's q8 copy for n rows of d
 * (glu_q8: the product reads its own input from the q8 scratch meanwhile), and its arrival
 * counters (zeroed when first made; a drain, which ends a recording, when either grows). */
int cuda_glu_target(cuda_backend *c, int64_t n, int64_t d, int8_t **qx, float **dx, int **cnt);
/* Run the product held back for a partner (cuda_gemm_pend), if any. */
int cuda_gemm_settle(cuda_backend *c);
/* The same for the bf16 copy the cuBLAS products on kept bf16 weight copies read: whether a
 * norm or GLU output of n tokens should be written as bf16 instead of q8 (batches of bf16_min
 * tokens and up once copies are kept), where it goes (the act16 scratch, [n][nin]), and the
 * note that `src` (rows ld floats apart) has one there, made by the current op. */
bool cuda_b16_wanted(const cuda_backend *c, int64_t n);
int cuda_b16_target(cuda_backend *c, int64_t n, int64_t nin, void **xb);
void cuda_b16_made(cuda_backend *c, const void *src, int64_t n, int64_t nin, int64_t ld);
/* out[t][r] = bias[r] + sum over z of part[z][t][r], z in order (mmq.cu): the split tensor-core
 * products' (mmq, mmw, mm4) and the F32 tile product's partials added. */
__global__ void mmq_reduce_kernel(const float *__restrict__ part, int S, int n, int nout,
                                  const float *__restrict__ bias, float *__restrict__ out, int64_t ldo);

/* The tensor-core products' result for (token t, row r) of n x nout: its split z's partial
 * part[z][t][r] when the stages are split (mmq_reduce_kernel adds them and the bias), else
 * out[t][r] = v + bias[r]. The caller skips rows and tokens past the end. */
static __device__ __forceinline__ void mm_put(float *part, float *out, int64_t ldo, const float *bias, int z, int n,
                                              int nout, int t, int r, float v) {
    if (part)
        part[((size_t)z * (size_t)n + (size_t)t) * (size_t)nout + (size_t)r] = v;
    else
        out[(int64_t)t * ldo + r] = v + (bias ? bias[r] : 0.0f);
}

/* Splits of `stages` for a grid of `have` blocks until it has about `want`: at least min_per
 * stages a split, none empty. */
static inline int mm_splits(int64_t want, int64_t have, int stages, int min_per) {
    int S = have >= want ? 1 : (int)((want + have - 1) / have);
    if (S > stages / min_per) S = stages / min_per;
    if (S < 1) S = 1;
    const int per = (stages + S - 1) / S;
    return (stages + per - 1) / per;
}

/* x (float, rows x->nb[1] apart) as f16 or bf16 [n][nin] in the act16 scratch: made now, or
 * the copy the op just before made from the same input (matmul.cu). */
int cuda_act16(cuda_backend *c, const ob_tensor *x, bool f16, const void **out);
/* The integer products on activations already in q8 form (qx [n][nin]
 * bytes, dx [n][nin / 32] pairs of scale and scaled sum: mmvq.cuh's q8_act
 * layout): the tensor-core kernel when `mmq` (the caller asked
 * cuda_mmq_usable), else the batch kernel for 9..64 tokens, else the decode
 * kernel 8 tokens at a time (any n; the shape checks of cuda_mmvq_usable
 * must hold). out[t * ldo + r] = bias[r] + the product. */
int cuda_q8_products(cuda_backend *c, const ob_tensor *w, const int8_t *qx, const float *dx, int64_t n, bool mmq,
                     const float *bias, float *out, int64_t ldo);
/* rotate.cu: the rotated Q4_0 route (ob_backend_ops.hadamard_rows, matmul_a4). */
int cuda_op_hadamard_rows(ob_backend *b, const ob_tensor *x, float *out, const float *signs);
int cuda_op_matmul_a4(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out);

int cuda_op_get_rows(ob_backend *b, const ob_tensor *table, const int32_t *ids, int64_t n, ob_tensor *out);
/* moe.cu: the routed experts of an MoE FFN (ob_backend_ops.moe_ffn), and freeing its tables. */
/* layer.cu: one token's dense layer halves (ob_backend_ops.layer_qkv, layer_ffn) */
int cuda_op_layer_qkv(ob_backend *b, const ob_layer_qkv *p);
int cuda_op_layer_ffn(ob_backend *b, const ob_layer_ffn *p);
int cuda_op_moe_ffn(ob_backend *b, const ob_moe_params *p, const ob_tensor *logits, const ob_tensor *h,
                    ob_tensor *out);
void cuda_moe_free(cuda_backend *c);
int cuda_op_matmul(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out);

/* Free the bf16 weight copies (matmul.cu; backend teardown). */
void cuda_bf16_free(cuda_backend *c);
/* cuBLAS's own workspace and the table of captured calls (matmul.cu): made when the backend is
 * created (after its handle and stream), freed at teardown (before the handle). */
int cuda_blas_init(cuda_backend *c);
void cuda_blas_free(cuda_backend *c);

#endif
