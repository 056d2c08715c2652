/*
 * mmw.cuh - quantized weights times batches of tokens on 16-bit tensor cores,
 * the weights turned into bf16 inside the kernel (mmw.cu has the why and how).
 */
#ifndef OB_CUDA_MMW_CUH
#define OB_CUDA_MMW_CUH

#include "common.cuh"

/* Whether the product takes this weight for a batch of n tokens (mmw_min <=
 * n <= mmw_max, not batch-invariant mode, a type it has - Q4_0, Q8_0, Q4_K,
 * Q5_K, Q6_K - with rows of whole 256-element blocks, an NVIDIA device with
 * bf16 tensor cores). */
bool cuda_mmw_usable(const cuda_backend *c, const ob_tensor *w, int64_t n);
/* out = x * w^T (+ bias): x float [n][nin] (rows x->nb[1] apart), out float. */
int cuda_mmw_matmul(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out);

#endif
