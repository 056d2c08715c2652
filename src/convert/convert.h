/*
 * convert.h - Hugging Face model folder -> GGUF.
 *
 * Reads config.json, the safetensors weights (one file or shards with an
 * index) and tokenizer.json + tokenizer_config.json, and writes a GGUF file
 * that follows llama.cpp's conventions (keys, tensor names, the row
 * permutation of q/k for the `llama` architecture, the tokenizer as GGUF
 * vocabulary), so our files and the ecosystem's are interchangeable.
 *
 * Supported: LlamaForCausalLM, MistralForCausalLM and MixtralForCausalLM
 * (-> `llama`, Mixtral with stacked expert tensors), Qwen2ForCausalLM,
 * Qwen3ForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM (-> `qwen2`,
 * `qwen3`, `qwen2moe`, `qwen3moe`), GemmaForCausalLM, Gemma2ForCausalLM,
 * Gemma3ForCausalLM (-> `gemma`, `gemma2`, `gemma3`, norms written as
 * 1 + w), Phi3ForCausalLM (-> `phi3`, LongRoPE factors as tensors) and
 * PhiForCausalLM (-> `phi2`). Source tensors may be F32, F16 or BF16.
 *
 * Weights are read through the mapping; tensors that change (type or row
 * order) are converted into a scratch area, which for large models is an
 * unlinked temporary file next to the output, mapped shared, so a 16 GB
 * conversion does not need 16 GB of RAM. Errors are statuses whose message
 * names the file, key or tensor; nothing here exits.
 */
#ifndef OB_CONVERT_CONVERT_H
#define OB_CONVERT_CONVERT_H

#include <stddef.h>

#include "../quant/quant.h"

typedef struct ob_convert_opts {
    /* Type of 2-D weight matrices: OB_TYPE_F32, F16, BF16 or Q8_0. Norms and
     * other 1-D tensors stay F32. A matrix whose rows are not a multiple of
     * 32 cannot be Q8_0 and is written as F16 (with a warning). */
    ob_type outtype;
    /* general.name; NULL takes the folder's name. */
    const char *name;
    /* Converted tensors larger than this in total go to a temporary file
     * instead of memory. 0 means 256 MiB; tests pass 1 to force the file. */
    size_t scratch_mem_limit;
} ob_convert_opts;

/* Defaults: F16 like llama.cpp's converter, name from the folder. */
void ob_convert_opts_init(ob_convert_opts *opts);

/* Convert the model in folder `hf_dir` to `out_path`. On failure no output
 * file is left behind. Returns 0 or a negative ob_status. */
int ob_convert_hf(const char *hf_dir, const char *out_path, const ob_convert_opts *opts);

/* The llama.cpp permutation of q/k projection rows for the `llama` arch:
 * within each of n_head blocks of `rows / n_head` rows, HF's layout (first
 * half of the head's dimensions, then the second half) becomes interleaved
 * pairs, so that ggml's "normal" RoPE (rotating adjacent pairs) computes what
 * HF's rotate_half RoPE computes. Returns the source row of output row r.
 * rows must be a multiple of 2 * n_head. */
long long ob_convert_qk_src_row(long long r, long long rows, long long n_head);

#endif
