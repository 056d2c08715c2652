/*
 * backend.h - the interface every device implements: tensors in the
 * device's memory and the ops a transformer forward pass needs.
 *
 * The model code (src/model) calls these ops in order, one batch of tokens at
 * a time; a backend runs each op (the CPU backend at once on its thread pool;
 * the CUDA backend will record them into a graph). Ops take tensors the
 * backend owns and return 0 or a negative ob_status.
 *
 * Shapes follow ggml: ne[0] is the contiguous dimension. A weight matrix W
 * of nout rows by nin columns has ne = {nin, nout}; activations of n tokens
 * with d features have ne = {d, n}. Activations are always F32 and
 * contiguous; weights may be any ob_type.
 *
 * The paged KV cache's storage is backend memory described by ob_kv_store:
 * per layer, K and V pools of [n_blocks * block_size] rows of kv_dim
 * elements. The engine owns block tables and reference counts; ops only see
 * slot numbers (block * block_size + offset).
 */
#ifndef OB_BACKEND_BACKEND_H
#define OB_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../quant/quant.h"

typedef struct ob_backend ob_backend;

typedef struct ob_tensor {
    ob_type type;
    int64_t ne[4];     /* elements per dimension; unused = 1 */
    size_t nb[4];      /* bytes between consecutive elements of each dimension */
    void *data;        /* device memory (host memory for the CPU backend) */
    const char *name;  /* for messages; may be NULL */
    /* Backend-private form of a weight, made by the backend's `weight` op
     * (the CPU backend's repacked matmul panels); NULL when there is none.
     * `data` keeps the file layout either way. */
    void *extra;
} ob_tensor;

/* Fill ne/nb for a contiguous tensor of `type` with n_dims dims. */
void ob_tensor_init(ob_tensor *t, ob_type type, int n_dims, const int64_t *ne, void *data);
/* Contiguous 2-D F32 activations [n rows of d]. */
void ob_tensor_f32_2d(ob_tensor *t, int64_t d, int64_t n, float *data);
int64_t ob_tensor_nelements(const ob_tensor *t);
size_t ob_tensor_nbytes(const ob_tensor *t);
/* Row i of a 2-D tensor. */
static inline void *ob_tensor_row(const ob_tensor *t, int64_t i) { return (char *)t->data + (size_t)i * t->nb[1]; }

/* RoPE variants. */
typedef enum ob_rope_mode {
    OB_ROPE_NORMAL = 0, /* rotate pairs (2i, 2i+1) - llama GGUFs (q/k rows permuted by the converter) */
    OB_ROPE_NEOX = 2,   /* rotate pairs (i, i + n_rot/2) - qwen, gpt-neox, phi */
} ob_rope_mode;

typedef enum ob_rope_scaling {
    OB_ROPE_SCALING_NONE = 0,
    OB_ROPE_SCALING_LINEAR = 1,
    OB_ROPE_SCALING_YARN = 2,
    OB_ROPE_SCALING_LLAMA3 = 3, /* per-dimension factors from the rope_freqs tensor */
} ob_rope_scaling;

typedef struct ob_rope_params {
    ob_rope_mode mode;
    int n_rot;              /* dimensions rotated per head (<= head_dim) */
    float freq_base;        /* theta */
    float freq_scale;       /* 1/factor for linear and yarn; 1 otherwise */
    int n_ctx_orig;         /* original training context (yarn) */
    float ext_factor;       /* yarn: 0 disables the ramp, 1 = full */
    float attn_factor;      /* multiplies sin/cos (yarn mscale base) */
    float beta_fast, beta_slow;
    const float *freq_factors; /* [n_rot/2] divisors of each frequency, or NULL (host memory) */
} ob_rope_params;

/* KV cache storage: one pool per layer for K and one for V. */
typedef struct ob_kv_store {
    ob_type type;        /* F32, F16 or Q8_0 */
    int n_layer;
    int64_t kv_dim;      /* n_head_kv * head_dim elements per row */
    int64_t n_slots;     /* n_blocks * block_size */
    int block_size;
    size_t row_bytes;    /* ob_row_size(type, kv_dim) */
    void **k;            /* [n_layer] -> [n_slots][row_bytes] */
    void **v;            /* [n_layer] -> [n_slots][row_bytes] */
} ob_kv_store;

/* What one query token of the batch sees of the cache. The token at position
 * pos of its sequence attends to positions [kv_start, pos] (kv_start > 0 for
 * sliding windows); position p lives in slot block_table[p / block_size] *
 * block_size + p % block_size. Backends read pos only as the window's last
 * position (and ALiBi's query position): the encoders (src/model/bert.c)
 * pass a window past the query, pos = the last position it sees, for
 * non-causal attention. */
typedef struct ob_attn_token {
    const int32_t *block_table;
    int32_t pos;
    int32_t kv_start;
} ob_attn_token;

typedef struct ob_attn_params {
    int n_head, n_head_kv, head_dim;
    float scale;          /* usually 1/sqrt(head_dim) */
    float softcap;        /* 0 = none; else scores = softcap * tanh(scores / softcap) */
    /* ALiBi (bloom): 0 = none; else query head h adds ob_alibi_slope(n_head,
     * h, max_alibi_bias) * (key pos - query pos) to its scores (after the
     * soft-cap), the bias BLOOM adds as slope * key pos (softmax cannot tell
     * the two apart) and llama.cpp's -slope * |query pos - key pos|. */
    float max_alibi_bias;
} ob_attn_params;

/* ALiBi slope of head h of n_head for a maximum bias b (BLOOM and
 * llama.cpp: b = 8). With p = 2^floor(log2 n_head): heads h < p take
 * (2^(-b/p))^(h + 1), the rest the interleaved second series
 * (2^(-b/2p))^(2 (h - p) + 1), which covers head counts that are not
 * powers of two. */
float ob_alibi_slope(int n_head, int h, float max_bias);

typedef enum ob_act {
    OB_ACT_SILU = 0,
    OB_ACT_GELU = 1,      /* tanh approximation */
    OB_ACT_GELU_ERF = 2,
    OB_ACT_RELU2 = 3,     /* squared ReLU */
    OB_ACT_TANH = 4,      /* tanh (logit soft-capping: c * tanh(x / c)) */
    OB_ACT_RELU = 5,      /* max(x, 0) (opt) */
} ob_act;

/* A mixture-of-experts layer's expert matrices for the moe_ffn op: gate,
 * up and down of expert e are gate[e], up[e], down[e] (each [n_embd ->
 * n_ff_exp] or [n_ff_exp -> n_embd], one type per array). */
typedef struct ob_moe_params {
    int n_expert, n_used;
    bool norm;
    const ob_tensor *gate, *up, *down;
} ob_moe_params;

/* A dense decoder layer of one token in two fused pieces (the optional ops
 * layer_qkv and layer_ffn): what the model would otherwise do op by op.
 *   layer_qkv: h = rms_norm(x) * norm; q = wq h + bq, k = wk h + bk, v = wv h + bv
 *   layer_ffn: x += wo att + bo; h = rms_norm(x) * norm;
 *              x += down(act(gate h) * up h)
 * Biases may be NULL; x, att, q, k and v are single rows of F32. */
typedef struct ob_layer_qkv {
    const ob_tensor *x, *norm;
    float eps;
    const ob_tensor *wq, *wk, *wv, *bq, *bk, *bv;
    ob_tensor *q, *k, *v;
} ob_layer_qkv;

typedef struct ob_layer_ffn {
    ob_tensor *x;
    const ob_tensor *att, *wo, *bo, *norm;
    float eps;
    const ob_tensor *gate, *up, *down;
    int act; /* ob_act */
} ob_layer_ffn;

/* The device interface. Every op is required unless marked optional. */
typedef struct ob_backend_ops {
    const char *name;
    void (*free)(ob_backend *b);

    /* memory */
    int (*alloc)(ob_backend *b, size_t nbytes, void **out);  /* zero-filled */
    void (*release)(ob_backend *b, void *p);
    int (*upload)(ob_backend *b, void *dst, const void *src, size_t n);
    int (*download)(ob_backend *b, void *dst, const void *src, size_t n);
    /* device-to-device copy (KV blocks on copy-on-write) */
    int (*copy)(ob_backend *b, void *dst, const void *src, size_t n);
    /* Tensors of the model file: the CPU backend points into the mapping;
     * a GPU backend copies. */
    int (*weight)(ob_backend *b, ob_tensor *t, const void *host_data);

    /* ops; `out` may alias `x` where noted */
    int (*get_rows)(ob_backend *b, const ob_tensor *table, const int32_t *ids, int64_t n, ob_tensor *out);
    /* out[n][nout] = x[n][nin] * W^T  (+ bias[nout] if bias) */
    int (*matmul)(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out);
    /* RMSNorm over groups of `group` elements of each row (group = row length
     * for a plain norm, head_dim for per-head q/k norms); weight [group] or NULL. out may alias x. */
    int (*rms_norm)(ob_backend *b, const ob_tensor *x, const ob_tensor *weight, float eps, int64_t group,
                    ob_tensor *out);
    int (*layer_norm)(ob_backend *b, const ob_tensor *x, const ob_tensor *weight, const ob_tensor *bias, float eps,
                      ob_tensor *out);
    /* In place on x [n][n_head * head_dim]; pos[n] host memory. */
    int (*rope)(ob_backend *b, ob_tensor *x, int n_head, int head_dim, const int32_t *pos, const ob_rope_params *p);
    /* Write k/v rows [n][kv_dim] into layer il's pools at slots[n] (host memory). */
    int (*kv_write)(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *k, const ob_tensor *v,
                    const int32_t *slots);
    /* out[n][n_head*head_dim] = softmax(q k^T * scale + mask) v over the cache. */
    int (*attention)(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_token *toks,
                     const ob_attn_params *p, ob_tensor *out);
    /* out = act(gate) * up (gated) or act(x) when up == NULL. out may alias gate. */
    int (*glu)(ob_backend *b, ob_act act, const ob_tensor *gate, const ob_tensor *up, ob_tensor *out);
    /* out = a + b (same shape, or b a single row broadcast). out may alias a. */
    int (*add)(ob_backend *b, const ob_tensor *a, const ob_tensor *bb, ob_tensor *out);
    /* out = x * s. out may alias x. */
    int (*scale)(ob_backend *b, const ob_tensor *x, float s, ob_tensor *out);
    /* Copy rows idx[n] of x into out (gather). */
    int (*gather_rows)(ob_backend *b, const ob_tensor *x, const int32_t *idx, int64_t n, ob_tensor *out);
    /* Make sure all queued work has finished (optional; NULL = synchronous). */
    int (*sync)(ob_backend *b);
    /* ids[r] (host memory) = the index of the largest of row r's x->ne[0]
     * values, the lowest index among equals, for the x->ne[1] rows of x
     * (optional: NULL = the engine scans downloaded rows). */
    int (*argmax_rows)(ob_backend *b, const ob_tensor *x, int32_t *ids);
    /* Make every op's result for a token independent of the batch around it
     * (ob_context_set_batch_invariant; optional: NULL = always invariant). */
    int (*set_batch_invariant)(ob_backend *b, bool on);
    /* matmul with x rounded to 4-bit blocks of 32 (W4A4, the rotated Q4_0
     * route of docs/quantization.md; optional: NULL = no such path): the
     * rounding is the CPU's ob_act_q4 (src/cpu/kernels.h) on every backend,
     * same codes and scales, then integer products per block. The CPU and
     * CUDA (unless OB_CUDA_ROTATE=0, docs/cuda.md) have it for Q4_0 weights and
     * answer OB_ERR_UNSUPPORTED for others (CUDA also for rows not a
     * multiple of 64 long); the engine then uses matmul. Last in the table:
     * the CUDA table is initialized by position. */
    int (*matmul_a4)(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out);
    /* out[r] (backend memory, rows of x->ne[0] floats, packed) = row r of x
     * with every whole block of 32 rotated by ob_hadamard_block with signs[]
     * (backend memory, x->ne[0] or more) of its columns, a partial last block
     * copied; the result equals ob_hadamard_rotate_rows_with's (the CUDA
     * kernel does the same float operations). Optional: NULL = the engine
     * does it on one thread, host memory only, so a backend whose memory is
     * not the host's must have it to run rotated files (CUDA: unless
     * OB_CUDA_ROTATE=0). Last in the table:
     * the CUDA table is initialized by position. */
    int (*hadamard_rows)(ob_backend *b, const ob_tensor *x, float *out, const float *signs);
    /* The routed experts of one mixture-of-experts FFN on the device (no
     * host round trip; optional: NULL, or OB_ERR_UNSUPPORTED for a shape or
     * type it has no kernel for = the model routes on the host). For each
     * row t of h: p = softmax(logits row t) over n_expert, the n_used
     * largest (ties: lower index), weights p (renormalised to sum 1 when
     * p->norm), out[t] = sum over them of w * down_e(silu(gate_e h[t]) *
     * up_e h[t]), in slot order; out may alias h. Last in the table
     * (position-initialized). */
    int (*moe_ffn)(ob_backend *b, const struct ob_moe_params *p, const ob_tensor *logits, const ob_tensor *h,
                   ob_tensor *out);
    /* The two halves of a dense layer for one token (ob_layer_qkv, ob_layer_ffn), each in as
     * few launches as the backend can (CUDA, experimental and off unless OB_CUDA_LAYER=1: one
     * persistent kernel each, src/cuda/layer.cu). Optional: NULL, or OB_ERR_UNSUPPORTED with no error set for a shape, type or
     * state it has no kernel for = the model runs the ops one by one. The results may differ
     * from the ops' in rounding only. Last in the table (position-initialized). */
    int (*layer_qkv)(ob_backend *b, const ob_layer_qkv *p);
    int (*layer_ffn)(ob_backend *b, const ob_layer_ffn *p);
} ob_backend_ops;

struct ob_backend {
    const ob_backend_ops *ops;
};

/* The CPU backend with its own thread pool (n_threads <= 0: all cores). */
int ob_backend_cpu_create(int n_threads, ob_backend **out);
void ob_backend_free(ob_backend *b);
/* True for the CPU backend (weights in host memory, ops synchronous). */
bool ob_backend_is_cpu(const ob_backend *b);

/* Op features added after a backend was written: a model that needs one
 * asks first, so a backend without it fails with a message instead of
 * silently computing something else. The CPU backend has all of them. */
typedef enum ob_backend_feature {
    OB_FEATURE_ALIBI,    /* attention honours ob_attn_params.max_alibi_bias */
    OB_FEATURE_ACT_RELU, /* glu knows OB_ACT_RELU */
} ob_backend_feature;
bool ob_backend_has(const ob_backend *b, ob_backend_feature f);

/* ---- the CUDA plugin (lib1bit-cuda.so), loaded at run time ----
 *
 * The plugin exports one C function, OB_CUDA_ENTRY, that fills an
 * ob_backend whose ops live in the plugin. What the plugin needs from the
 * host (error messages, logging) comes in ob_cuda_host, so the plugin does
 * not link against the binary that loads it. */
#define OB_CUDA_ABI_VERSION 7 /* 2: ob_backend_ops.argmax_rows; 3: set_batch_invariant; 4: matmul_a4; 5: hadamard_rows; 6: moe_ffn; 7: hadamard_rows into backend memory */
#define OB_CUDA_ENTRY "ob_cuda_backend_create"

typedef struct ob_cuda_host {
    int abi_version;                                             /* OB_CUDA_ABI_VERSION */
    int (*err)(int status, const char *fmt, ...);                /* ob_err */
    void (*log)(int level, const char *fmt, ...);                /* ob_log */
} ob_cuda_host;

/* device: CUDA device index. Returns 0 or a negative ob_status (message set via host->err). */
typedef int (*ob_cuda_create_fn)(const ob_cuda_host *host, int device, ob_backend **out);

/* Load the plugin and create a backend on `device`. Looks for the library in
 * $OB_CUDA_LIB, next to the executable, in ../lib beside it, then the
 * loader's search path. A missing library, driver or device is an
 * OB_ERR_UNSUPPORTED / OB_ERR_DEVICE with a message that says which. */
int ob_backend_cuda_create(int device, ob_backend **out);
/* Parse "cpu", "cuda", "cuda:N", "auto" into (is_cuda, device index). */
int ob_backend_parse_device(const char *s, bool *cuda, int *device);

#endif
