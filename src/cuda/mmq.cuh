/*
 * mmq.cuh - quantized weights times batches of tokens on int8 tensor cores
 * (mmq.cu has the why and how).
 */
#ifndef OB_CUDA_MMQ_CUH
#define OB_CUDA_MMQ_CUH

#include "common.cuh"
#include "mmvq.cuh"

/* Whether the tensor-core product takes this weight for a batch of n tokens
 * (9 <= n <= mmq_max, a type it has, rows of whole 256-element steps, a
 * device with int8 tensor cores). */
bool cuda_mmq_usable(const cuda_backend *c, const ob_tensor *w, int64_t n);
/* out[t * ldo + r] = bias[r] + sum_k w[r][k] x[t][k] for n tokens whose q8
 * activations are a. */
int cuda_mmq_matmul(cuda_backend *c, const ob_tensor *w, const q8_act &a, int64_t n, const float *bias, float *out,
                    int64_t ldo);
/* The experts of an MoE layer in one launch: rows of q8 activations grouped
 * by expert (expert e's at device start[e] .. start[e + 1], at most max_rows
 * of them), each block of rows times its expert's matrix tab[e] (device
 * table of ne weights of `type`, rows of nb1 bytes), out row for row. */
bool cuda_mmq_id_usable(const cuda_backend *c, const ob_tensor *w, int ne);
int cuda_mmq_id(cuda_backend *c, int type, const uint8_t *const *tab, const int32_t *start, int ne, int max_rows,
                size_t nb1, int64_t nin, int64_t nout, const q8_act &a, float *out, int64_t ldo);

#endif
