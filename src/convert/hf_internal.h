/*
 * hf_internal.h - what the converter's parts share: the model's
 * hyperparameters as read from config.json, and the tokenizer writer.
 * Private to src/convert.
 */
#ifndef OB_CONVERT_HF_INTERNAL_H
#define OB_CONVERT_HF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../gguf/gguf.h"

typedef enum ob_hf_arch {
    OB_HF_LLAMA,   /* LlamaForCausalLM: q/k rows permuted, normal RoPE */
    OB_HF_MISTRAL, /* MistralForCausalLM: written as `llama`, plus sliding window */
    OB_HF_QWEN2,   /* biases on q/k/v, NeoX RoPE, no permutation */
    OB_HF_QWEN3,   /* q/k RMSNorm per head, NeoX RoPE, no permutation */
    OB_HF_GEMMA,   /* (1 + w) norms (written as 1 + w), GeGLU, NeoX RoPE */
    OB_HF_GEMMA2,  /* + post-norms, soft-capping, alternating sliding window */
    OB_HF_GEMMA3,  /* + q/k norms, local/global layers with their own RoPE bases */
    OB_HF_PHI3,    /* fused qkv and gate_up, LongRoPE */
    OB_HF_PHI2,    /* LayerNorm, biases, parallel attention + MLP, partial rotary */
    OB_HF_QWEN3MOE, /* Qwen3 attention, mixture of experts (top-k renormalised) */
    OB_HF_QWEN2MOE, /* Qwen2 attention, experts (not renormalised) + a sigmoid-gated shared expert */
    OB_HF_MIXTRAL,  /* written as `llama` with experts, like llama.cpp */
    OB_HF_GRANITE,  /* llama layout + embedding/residual/attention/logit multipliers */
    /* GPT lineage: LayerNorm decoders in their own layouts (hf_gptlike.c) */
    OB_HF_STABLELM, OB_HF_GPTNEOX, OB_HF_GPT2, OB_HF_STARCODER2, OB_HF_BIGCODE, OB_HF_FALCON, OB_HF_GPTJ,
    OB_HF_COHERE, OB_HF_NEMOTRON,
    OB_HF_OPT,     /* learned positions (offset 2, dropped at conversion), ReLU MLP */
    OB_HF_CODEGEN, /* GPT-J block; qkv_proj in 4 model-parallel chunks of (q, v, k); written as `gptj` */
    OB_HF_BLOOM,   /* ALiBi, embedding LayerNorm, per-head fused qkv */
    /* Llama lineage, run by src/model/llama_variants.c */
    OB_HF_OLMO2,    /* post-norms only, q/k RMSNorm over the whole projections, NeoX RoPE */
    OB_HF_SMOLLM3,  /* llama, no RoPE on every 4th layer */
    OB_HF_ARCEE,    /* llama, squared-ReLU MLP without gate */
    OB_HF_ERNIE45,  /* llama layout, interleaved RoPE (no permutation) */
    OB_HF_SEED_OSS, /* q/k/v biases, NeoX RoPE; pre-FFN norm written as post_attention_norm */
    OB_HF_OLMO,     /* LayerNorm without weight or bias */
    OB_HF_GLM4,     /* post-norms, fused gate_up, q/k/v biases, partial interleaved RoPE */
    OB_HF_BITNET,   /* BitNet b1.58: sub-norms before o_proj and down_proj, relu2(gate) * up, NeoX RoPE */
    OB_HF_INTERNLM2, /* llama (run by llama.c) in its own names; q/k/v fused per KV group in wqkv */
    /* mixtures of experts, run by src/model/moe.c */
    OB_HF_OLMOE,      /* q/k RMSNorm over the whole projections, NeoX RoPE, top-k not renormalised */
    OB_HF_GRANITEMOE, /* granite's multipliers; experts stacked in input_linear (gate; up) and output_linear */
    /* multi-head latent attention + grouped sigmoid routing (hf_deepseek.c, src/model/deepseek2.c) */
    OB_HF_DEEPSEEK3,  /* DeepseekV3ForCausalLM (V3, R1, Kimi-K2): written as `deepseek2` */
    /* bidirectional encoders (hf_encoder.c, src/model/bert.c) */
    OB_HF_BERT,       /* BertModel: post-LayerNorm, learned positions, token types, biases */
    OB_HF_MODERNBERT, /* ModernBertModel: pre-LayerNorm, RoPE, global/local layers, GeGLU */
} ob_hf_arch;

typedef enum ob_hf_rope_scaling {
    OB_HF_ROPE_NONE,
    OB_HF_ROPE_LINEAR,
    OB_HF_ROPE_YARN,
    OB_HF_ROPE_LLAMA3, /* written as the rope_freqs.weight tensor, not as keys */
} ob_hf_rope_scaling;

typedef struct ob_hf_config {
    ob_hf_arch arch;
    char hf_arch[96];      /* architectures[0] as written */
    const char *gguf_arch; /* "llama", "qwen2", "qwen3", "gemma", "phi3", "qwen3moe", ... */

    int64_t n_vocab, n_ctx, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim;
    bool head_dim_given;   /* config.json has head_dim (llama.cpp then writes key/value_length) */
    double rms_eps;
    double rope_theta;
    bool tied;             /* tie_word_embeddings */
    int64_t sliding_window; /* 0: none */

    ob_hf_rope_scaling rope_scaling;
    double rope_factor;
    int64_t rope_orig_ctx; /* yarn, llama3 */
    bool has_yarn_attn_factor, has_yarn_beta_fast, has_yarn_beta_slow, has_yarn_ext_factor;
    double yarn_attn_factor, yarn_beta_fast, yarn_beta_slow, yarn_ext_factor;
    double llama3_low_freq_factor, llama3_high_freq_factor;

    int64_t n_rot;          /* rotated dimensions per head (partial_rotary_factor * head_dim) */
    double attn_softcap, final_softcap;   /* gemma2; 0 = none */
    double query_pre_attn_scalar;         /* gemma2/3; 0 = head_dim */
    int64_t swa_pattern;    /* gemma2/3: layer i is local when i % pattern < pattern - 1 */
    double rope_local_theta; /* gemma3: RoPE base of the local layers */
    /* phi3 LongRoPE: per-dimension factors [n_rot/2] and the cos/sin scale */
    bool longrope;
    double longrope_short[512], longrope_long[512];
    double longrope_attn_factor;

    /* mixture of experts; n_expert == 0 for dense models */
    int64_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    bool expert_norm;       /* renormalise the top-k weights to sum 1 */

    /* granite: embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling */
    double granite_embd, granite_resid, granite_attn, granite_logit;

    /* GPT lineage (hf_gptlike.c) */
    bool parallel_residual; /* attention and MLP both read the layer's input */
    bool qkv_bias;          /* q/k/v (or fused qkv) biases */
    double logit_scale;     /* cohere: logits times this */

    /* DeepSeek (hf_deepseek.c): head_dim is qk_nope + qk_rope, n_rot qk_rope,
     * n_head_kv 1 (llama.cpp's MQA form of MLA); n_ff_shexp = n_ff_exp * n_shared */
    struct {
        int64_t q_lora_rank;     /* 0: q_proj without the low-rank pair */
        int64_t kv_lora_rank, qk_nope, qk_rope, v_head_dim;
        int64_t n_dense_lead;    /* first_k_dense_replace */
        int64_t n_shared;        /* n_shared_experts */
        int64_t n_group, topk_group;
        double routed_scale;     /* routed_scaling_factor */
    } ds;

    /* encoders (hf_encoder.c) */
    struct {
        int pooling;      /* GGUF pooling_type (1 mean, 2 cls, 3 last) */
        int64_t n_types;  /* BERT's type_vocab_size */
    } enc;

    /* bos/eos ids from config.json, the fallback when the tokenizer files
     * name none; -1 when absent. */
    int64_t bos_id, eos_id, pad_id;
} ob_hf_config;

/* Read `dir`/config.json. Unsupported architectures, activations and RoPE
 * variants are OB_ERR_UNSUPPORTED; missing or ill-typed keys OB_ERR_FORMAT,
 * naming the key. */
int ob_hf_config_load(const char *dir, ob_hf_config *cfg);
/* A per-layer tensor name `text` = "<pre><layer>.<rest>" (pre: the family's
 * layer prefix): 1 with *layer and *rest set, 0 when `text` does not start
 * with pre and a digit, or a negative status (naming `name`, the tensor as
 * the checkpoint calls it) for a malformed or out-of-range layer number. */
int ob_hf_layer_split(const ob_hf_config *cfg, const char *name, const char *text, const char *pre, int *layer,
                      const char **rest);
/* A tensor the converted file needs: the GGUF tensor `gguf` (for every layer
 * "blk.<i>." + gguf when `layer`) must be one `has` reports; otherwise
 * OB_ERR_FORMAT naming the checkpoint's tensor (`hf`, after `prefix` + the
 * layer number when per layer). */
int ob_hf_need_tensor(const ob_hf_config *cfg, bool layer, const char *gguf, const char *hf, const char *prefix,
                      bool (*has)(const void *ctx, const char *name), const void *ctx);
/* The same from config.json's text in memory (the fuzz target); `path`
 * names it in messages, and its folder is where the encoders look for
 * sentence-transformers' modules.json. */
int ob_hf_config_parse(const char *text, size_t n, const char *path, ob_hf_config *cfg);

/* Read `dir`/tokenizer.json (+ tokenizer_config.json, chat_template.jinja)
 * and set the tokenizer.* keys on `w`: the vocabulary padded to
 * cfg->n_vocab, token types, scores (SentencePiece-style vocabularies),
 * merges, the pre-tokenizer name, special token ids, add_bos/add_eos and
 * the chat template. */
int ob_hf_vocab_write(const char *dir, const ob_hf_config *cfg, ob_gguf_writer *w);

/* DeepSeek (hf_deepseek.c): the family's config keys after the common
 * ones (root: config.json; errors name the key), and its GGUF keys. */
int ob_hf_deepseek_parse(json_t *root, const char *path, ob_hf_config *cfg);
int ob_hf_deepseek_keys(const ob_hf_config *cfg, ob_gguf_writer *w);

/* bos/eos/pad ids from config.json's root into cfg: each a whole number in
 * [0, 2^31) (integer or real), else left at -1. */
void ob_hf_special_ids(json_t *root, ob_hf_config *cfg);

/* "dir/name" in a new ob_malloc'd string (NULL when out of memory). */
char *ob_hf_path(const char *dir, const char *name);

#endif
