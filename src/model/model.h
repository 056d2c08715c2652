/*
 * model.h - a loaded model: hyper-parameters read from GGUF keys, weight
 * tensors bound to a backend, and the architecture whose forward pass runs
 * them. The engine (src/engine) owns contexts, KV caches and batches; the
 * model only knows how to turn a batch of tokens into logits through backend
 * ops.
 */
#ifndef OB_MODEL_MODEL_H
#define OB_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../gguf/gguf.h"

typedef struct ob_tokenizer ob_tokenizer;
typedef struct ob_chat_template ob_chat_template;

typedef struct ob_hparams {
    int64_t n_vocab;
    int64_t n_ctx_train;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;      /* key/query dimension per head */
    int64_t head_dim_v;    /* value dimension per head */
    int64_t n_ff;
    float norm_eps;
    int64_t sliding_window; /* 0 = full attention */
    ob_rope_params rope;    /* freq_factors filled from rope_freqs.weight */
    ob_rope_scaling rope_scaling;
    /* Gemma / Phi (gemma.c, phi.c); zero where unused */
    float attn_scale;       /* 0 = 1/sqrt(head_dim) */
    float attn_softcap;     /* gemma2: scores = c * tanh(scores / c) */
    float final_softcap;    /* gemma2: logits = c * tanh(logits / c) */
    int64_t swa_window;     /* window of the local layers; the engine's sliding_window stays 0 */
    int64_t swa_pattern;    /* layer il is local when il % swa_pattern < swa_pattern - 1 */
    ob_rope_params rope_swa; /* RoPE of the local layers (gemma3: its own base, unscaled) */
    float embd_scale, resid_scale, logit_scale; /* granite's multipliers (1 elsewhere); gptlike.c
                                                 * (command-r): logits times logit_scale */
    bool parallel_residual; /* gptlike.c: attention and MLP both read the layer's input */
    /* mixture of experts (moe.c); n_expert == 0 for dense models */
    int64_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    bool expert_norm;       /* renormalise the top-k routing weights to sum 1 */
    /* DeepSeek (deepseek2.c): multi-head latent attention, grouped sigmoid routing */
    int64_t q_lora_rank;    /* 0: attn_q without the low-rank pair */
    int64_t kv_lora_rank, qk_nope, qk_rope, v_head_mla; /* head_dim = kv_lora_rank + qk_rope (the cached row) */
    int64_t n_dense_lead;   /* leading layers with a dense MLP */
    int64_t n_group, topk_group; /* experts in n_group groups; tokens choose among topk_group of them */
    float expert_scale;     /* routed expert weights times this */
} ob_hparams;

/* One transformer block's weights; absent optional tensors have data == NULL. */
typedef struct ob_layer {
    ob_tensor attn_norm;            /* [n_embd] */
    ob_tensor wq, wk, wv, wo;       /* [n_embd, n_head*hd], [n_embd, n_head_kv*hd] x2, [n_head*hd_v, n_embd] */
    ob_tensor bq, bk, bv, bo;       /* optional biases (qwen2: q/k/v) */
    ob_tensor q_norm, k_norm;       /* optional per-head RMSNorm weights [head_dim] (qwen3) */
    ob_tensor ffn_norm;             /* [n_embd] */
    ob_tensor w_gate, w_up, w_down; /* [n_embd, n_ff] x2, [n_ff, n_embd] */
    ob_tensor attn_norm_b;          /* [n_embd] LayerNorm bias (phi2) */
    ob_tensor post_attn_norm;       /* [n_embd] norm of the attention output (gemma2/3) */
    ob_tensor post_ffn_norm;        /* [n_embd] norm of the FFN output (gemma2/3) */
    ob_tensor b_up, b_down;         /* [n_ff], [n_embd] FFN biases (phi2) */
    ob_tensor ffn_norm_b;           /* [n_embd] pre-MLP LayerNorm bias (gptlike.c) */
    ob_tensor attn_sub_norm;        /* [n_head*hd] RMSNorm before wo (bitnet) */
    ob_tensor ffn_sub_norm;         /* [n_ff] RMSNorm before w_down (bitnet) */
    /* mixture of experts (moe.c) */
    ob_tensor ffn_gate_inp;         /* [n_embd, n_expert] router */
    ob_tensor *exp_gate, *exp_up, *exp_down; /* [n_expert] each: row ranges of the stacked
                                      * ffn_{gate,up,down}_exps ([n_embd, n_ff_exp] x2, [n_ff_exp, n_embd]);
                                      * the arrays live in the block that holds `layers` */
    ob_tensor shexp_gate, shexp_up, shexp_down; /* shared expert (qwen2moe) [n_embd, n_ff_shexp] x2, [n_ff_shexp, n_embd] */
    ob_tensor shexp_gate_inp;       /* [n_embd] the shared expert's sigmoid gate */
    /* DeepSeek MLA (deepseek2.c) */
    ob_tensor wq_a, q_a_norm, wq_b; /* [n_embd, q_lora], [q_lora], [q_lora, n_head * (nope + rope)] */
    ob_tensor wkv_a, kv_a_norm;     /* [n_embd, kv_lora + rope], [kv_lora] */
    ob_tensor *k_b, *v_b;           /* [n_head] each: head h of attn_k_b [nope, kv_lora] and attn_v_b
                                     * [kv_lora, v_head]; the arrays live in the block that holds `layers` */
    ob_tensor exp_probs_b;          /* [n_expert] bias added to the scores for choosing experts */
} ob_layer;

typedef struct ob_arch ob_arch;

typedef struct ob_model {
    const ob_arch *arch;
    char arch_name[32];
    char name[128];
    ob_gguf *gguf;          /* owns the mapping the CPU weights point into */
    ob_backend *backend;
    ob_hparams hp;
    ob_tensor tok_embd;     /* [n_embd, n_vocab] */
    ob_tensor output_norm;  /* [n_embd] */
    ob_tensor output;       /* [n_embd, n_vocab]; == tok_embd when tied */
    ob_tensor output_norm_b; /* [n_embd] LayerNorm bias (phi2), else data == NULL */
    ob_tensor output_b;     /* [n_vocab] output bias (phi2), else data == NULL */
    ob_tensor pos_embd;     /* [n_embd, n_ctx_train] learned positions (gpt2, starcoder), else data == NULL */
    ob_tensor tok_embd_norm, tok_embd_norm_b; /* [n_embd] LayerNorm after the embeddings (bloom), else data == NULL */
    ob_tensor type_embd;    /* [n_embd, n_types] token type embeddings (bert.c), else data == NULL */
    ob_layer *layers;       /* [n_layer] */
    float *rope_freqs;      /* [n_rot/2] or NULL (host copy) */
    ob_tokenizer *tok;      /* NULL when the GGUF has no vocabulary */
    ob_chat_template *chat_tmpl; /* parsed on first use (engine/tokens.c) */
    int chat_tmpl_rc;            /* its parse status, so a bad template fails the same way each time */
    char chat_tmpl_err[256];
    uint64_t n_params, n_bytes;
} ob_model_impl;

/* Everything a forward pass needs besides the model: the batch, where each
 * token's K/V goes, what each token attends to, activation buffers, and the
 * output rows. Filled by the engine. */
typedef struct ob_forward_args {
    int64_t n_tokens;
    const int32_t *tokens;        /* [n_tokens] */
    const int32_t *pos;           /* [n_tokens] */
    const int32_t *slots;         /* [n_tokens] KV slot of each token */
    const ob_attn_token *attn;    /* [n_tokens] */
    const ob_kv_store *kv;
    int64_t n_out;                /* rows of logits wanted */
    const int32_t *out_idx;       /* [n_out] batch indices */
    float *logits;                /* [n_out][n_vocab] backend memory */
    float *work;                  /* activation workspace (backend memory) */
    size_t work_floats;
    ob_backend *backend;          /* runs the ops (the context's: its threads); NULL = the model's */
    bool embd_only;               /* logits gets [n_out][n_embd] hidden states after the output norm
                                     instead of logits (llama.c only; see ob_context_set_embeddings) */
} ob_forward_args;

struct ob_arch {
    const char *name;
    bool verified;           /* checked against a reference implementation */
    /* Read hparams and bind tensors; messages name the missing key/tensor. */
    int (*load)(ob_model_impl *m);
    /* Floats of workspace a batch of n tokens needs. */
    size_t (*work_size)(const ob_model_impl *m, int64_t n_tokens);
    int (*forward)(ob_model_impl *m, const ob_forward_args *a);
};

/* The architecture for a GGUF general.architecture, or NULL. */
const ob_arch *ob_arch_find(const char *name);
/* Comma-separated list of supported architectures, for messages. */
const char *ob_arch_list(void);
/* Bidirectional encoders (bert.c): embeddings only, each sequence whole in one batch. */
bool ob_arch_is_encoder(const ob_arch *a);

/* Build m->tok from the GGUF vocabulary (src/engine/tokens.c). */
int ob_model_load_tokenizer(ob_model_impl *m);
void ob_model_free_tokenizer(ob_model_impl *m);

/* ---- helpers for architecture files ---- */

/* Required u32/f32 key "<arch>.<suffix>". */
int ob_model_key_u32(const ob_model_impl *m, const char *suffix, int64_t *out);
int ob_model_key_f32(const ob_model_impl *m, const char *suffix, float *out);
/* Optional: leaves *out unchanged when absent (wrong type is still an error). */
int ob_model_key_u32_opt(const ob_model_impl *m, const char *suffix, int64_t *out);
int ob_model_key_f32_opt(const ob_model_impl *m, const char *suffix, float *out);
/* Bind tensor `name` (printf-style) with the expected shape (ne of n_dims;
 * -1 = any). Missing: OB_ERR_NOT_FOUND unless optional (then t->data = NULL, 0). */
int ob_model_tensor(ob_model_impl *m, ob_tensor *t, bool optional, int n_dims, const int64_t *ne, const char *fmt,
                    ...) __attribute__((format(printf, 6, 7)));
/* Rows [r0, r0 + n_rows) of the 2-D tensor `name` [ne0, total_rows] as a
 * tensor of its own (a fused qkv or gate_up weight split at load time). The
 * caller checks the whole tensor's shape; n_params counts each slice. */
int ob_model_tensor_rows(ob_model_impl *m, ob_tensor *t, const char *name, int64_t r0, int64_t n_rows);
/* q/k/v of layer il from a fused attn_qkv (split by rows, with its bias if
 * any) or from separate attn_q/k/v tensors with optional biases. */
int ob_model_bind_qkv(ob_model_impl *m, ob_layer *L, int il);
/* Norms and biases are read as f32 by the ops: OB_ERR_UNSUPPORTED naming the
 * first present tensor of ts[n] that is not. */
int ob_model_check_f32(const ob_tensor *const *ts, size_t n);
/* The shared hyper-parameters (embedding, layers, heads, key length,
 * context) every decoder reads the same way; `eps_key` names the norm
 * epsilon ("attention.layer_norm_rms_epsilon" or "attention.layer_norm_epsilon"). */
int ob_model_load_common(ob_model_impl *m, const char *eps_key);
/* RoPE keys (rope.dimension_count, freq_base, scaling) into hp->rope with
 * the given mode; rope_freqs.weight (Llama 3) is read by llama.c itself. */
int ob_model_load_rope(ob_model_impl *m, ob_rope_mode mode);
/* Sliding-window attention for some layers: copy the engine's tokens into
 * `out` (host memory, n entries), each seeing no further back than
 * pos - window + 1. */
void ob_model_window_tokens(const ob_attn_token *in, int64_t n, int64_t window, ob_attn_token *out);

/* The backend a context's forward passes run on (engine.c): the CPU context's own, or the
 * model's device backend. Tests wrap its ops (tests/test_split.c, the layer ops). */
ob_backend *ob_context_backend(ob_context *c);

#endif
