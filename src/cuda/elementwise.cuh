/*
 * elementwise.cuh - the norm / RoPE / elementwise family: RMSNorm (plain and
 * per-head groups), LayerNorm, RoPE (normal and NeoX; linear, YaRN and
 * Llama-3 frequency factors), activations with and without a gate, add with
 * single-row broadcast, scale, and row gather. Semantics are those of
 * src/cpu/cpu_backend.c, op for op.
 */
#ifndef OB_CUDA_ELEMENTWISE_CUH
#define OB_CUDA_ELEMENTWISE_CUH

#include "common.cuh"

int cuda_op_rms_norm(ob_backend *b, const ob_tensor *x, const ob_tensor *w, float eps, int64_t group, ob_tensor *out);
int cuda_op_layer_norm(ob_backend *b, const ob_tensor *x, const ob_tensor *w, const ob_tensor *bias, float eps,
                       ob_tensor *out);
int cuda_op_rope(ob_backend *b, ob_tensor *x, int n_head, int head_dim, const int32_t *pos, const ob_rope_params *p);
int cuda_op_glu(ob_backend *b, ob_act act, const ob_tensor *gate, const ob_tensor *up, ob_tensor *out);
int cuda_op_add(ob_backend *b, const ob_tensor *a, const ob_tensor *bb, ob_tensor *out);
int cuda_op_scale(ob_backend *b, const ob_tensor *x, float s, ob_tensor *out);
int cuda_op_gather_rows(ob_backend *b, const ob_tensor *x, const int32_t *idx, int64_t n, ob_tensor *out);
/* ids[r] = argmax of row r (ob_backend_ops.argmax_rows). */
int cuda_op_argmax_rows(ob_backend *b, const ob_tensor *x, int32_t *ids);

/* The KV write of k and v joined to the launch recorded just before it - the
 * RoPE of q and k, plain or fused with their norms - when that rotated this
 * k and v is not one of its inputs or outputs: 1 when joined, 0 when the
 * caller must write the rows itself. */
int cuda_rope_kv_join(cuda_backend *c, const float *k, int64_t ldk, const float *v, int64_t ldv, int64_t n,
                      int64_t kv_dim, const rope_kv_args &kv);

#endif
