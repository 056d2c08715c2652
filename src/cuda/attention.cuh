/*
 * attention.cuh - the attention family: writing K/V rows into the paged
 * cache (F16, F32 or Q8_0 pools) and attention over it.
 */
#ifndef OB_CUDA_ATTENTION_CUH
#define OB_CUDA_ATTENTION_CUH

#include "common.cuh"

int cuda_op_kv_write(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *k, const ob_tensor *v,
                     const int32_t *slots);
int cuda_op_attention(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_token *toks,
                      const ob_attn_params *p, ob_tensor *out);

#endif
