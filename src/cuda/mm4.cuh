/*
 * mm4.cuh - Q4_K weights times batches of tokens on bf16 tensor cores from
 * the fragment-order layout of w4.cuh (mm4.cu has the why and how).
 */
#ifndef OB_CUDA_MM4_CUH
#define OB_CUDA_MM4_CUH

#include "common.cuh"

/* Whether the product takes this weight for a batch of n tokens (OB_CUDA_W4=1, w4_min <= n <=
 * w4_max, not batch-invariant mode, Q4_K with rows of whole 256-element blocks, an NVIDIA
 * device with bf16 tensor cores). */
bool cuda_mm4_usable(const cuda_backend *c, const ob_tensor *w, int64_t n);
/* out = x * w^T (+ bias) through the weight's fragment-order copy, made now if there is room;
 * *done false (nothing launched) when there is none. */
int cuda_mm4_matmul(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out,
                    bool *done);
void cuda_w4_free(cuda_backend *c);

#endif
