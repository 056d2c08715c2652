/*
 * hf_internal.h - what the converter's parts share: the model's
 * hyperparameters as read from config.json, and the tokenizer writer.
 * Private to src/convert.
 */
#ifndef OB_CONVERT_HF_INTERNAL_H
#define OB_CONVERT_HF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../gguf/gguf.h"

typedef enum ob_hf_arch {
    OB_HF_LLAMA,   /* LlamaForCausalLM: q/k rows permuted, normal RoPE */
    OB_HF_MISTRAL, /* MistralForCausalLM: written as `llama`, plus sliding window */
    OB_HF_QWEN2,   /* biases on q/k/v, NeoX RoPE, no permutation */
    OB_HF_QWEN3,   /* q/k RMSNorm per head, NeoX RoPE, no permutation */
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
    const char *gguf_arch; /* "llama", "qwen2", "qwen3" */

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

    /* bos/eos ids from config.json, the fallback when the tokenizer files
     * name none; -1 when absent. */
    int64_t bos_id, eos_id, pad_id;
} ob_hf_config;

/* Read `dir`/config.json. Unsupported architectures, activations and RoPE
 * variants are OB_ERR_UNSUPPORTED; missing or ill-typed keys OB_ERR_FORMAT,
 * naming the key. */
int ob_hf_config_load(const char *dir, ob_hf_config *cfg);

/* Read `dir`/tokenizer.json (+ tokenizer_config.json, chat_template.jinja)
 * and set the tokenizer.* keys on `w`: the vocabulary padded to
 * cfg->n_vocab, token types, scores (SentencePiece-style vocabularies),
 * merges, the pre-tokenizer name, special token ids, add_bos/add_eos and
 * the chat template. */
int ob_hf_vocab_write(const char *dir, const ob_hf_config *cfg, ob_gguf_writer *w);

/* "dir/name" in a new ob_malloc'd string (NULL when out of memory). */
char *ob_hf_path(const char *dir, const char *name);

#endif
