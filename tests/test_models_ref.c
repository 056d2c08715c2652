/*
 * test_models_ref.c - each architecture against Hugging Face transformers.
 *
 * tests/data/models/<case>/ holds a tiny random-initialised checkpoint made
 * by scripts/gen_model_fixtures.py with transformers (float32, eager
 * attention), its tokenizer, a 64-token prompt, transformers' logits for
 * every prompt position and its greedy continuation of 32 tokens. For each
 * case this test converts the folder with our converter (F32, F16, BF16,
 * Q8_0) into /tmp, checks the GGUF (keys, tensor names and shapes, the q/k
 * permutation, GPT-NeoX's regrouped qkv and GPT-2's transposed Conv1D weights,
 * OPT's shifted positions, CodeGen's and BLOOM's regrouped qkv against the
 * safetensors source), then runs the prompt through
 * the engine and compares:
 *
 *   F32 weights (F32 KV cache): relative error < 1e-4 at every position,
 *   where the relative error of a position is max_i |ours_i - ref_i| /
 *   max_i |ref_i| (a per-element ratio is meaningless for logits near 0);
 *   top-1 equal at every position; the greedy 32 tokens identical.
 *
 *   F16 / BF16 / Q8_0 weights (F32 KV cache, so only the weights differ):
 *   a relative error bound per type, derived from the format's rounding
 *   (see ERR_BOUND below); top-1 equal at every position whose reference
 *   margin (top-1 minus top-2 logit) exceeds twice the measured error of that
 *   position, since no smaller margin can be guaranteed; greedy tokens equal
 *   up to the first step whose margin in the F32 run is below twice the bound
 *   (after a legitimate near-tie flips, the continuations may differ).
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/convert.h"
#include "convert/safetensors.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "onebit.h"
#include "quant/quantize.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

#define N_PROMPT 64
#define N_GEN 32

/* InternLM2's tensor set (F32 file shapes): llama's, under the internlm2 name. */
#define INTERNLM2_TENSORS                                                                                        \
    "token_embd.weight:64x384 output.weight:64x384 output_norm.weight:64x1 blk.N.attn_norm.weight:64x1 "        \
    "blk.N.attn_q.weight:64x64 blk.N.attn_k.weight:64x32 blk.N.attn_v.weight:64x32 "                             \
    "blk.N.attn_output.weight:64x64 blk.N.ffn_norm.weight:64x1 blk.N.ffn_gate.weight:64x128 "                    \
    "blk.N.ffn_up.weight:64x128 blk.N.ffn_down.weight:128x64"

typedef struct ref_case {
    const char *name;
    const char *arch;     /* GGUF architecture */
    int head_dim;
    bool tied, qkv_bias, qk_norm, permuted;
    const char *rope;     /* NULL, "linear", "yarn", "llama3" */
    int sliding_window;
    /* Architectures past the Llama family: their layer count, and the
     * tensors (space-separated; "blk.N." is checked in every layer) whose
     * presence and shape [ne0 x ne1] the file must show, instead of the
     * Llama tensor set. NULL: the Llama set. */
    int n_layer;
    const char *tensors;
} ref_case;

static const ref_case CASES[] = {
    {"llama", "llama", 16, false, false, false, true, NULL, 0, 2, NULL},
    {"llama_tied", "llama", 16, true, false, false, true, NULL, 0, 2, NULL},
    {"llama_rope_linear", "llama", 16, false, false, false, true, "linear", 0, 2, NULL},
    {"llama_rope_yarn", "llama", 16, false, false, false, true, "yarn", 0, 2, NULL},
    {"llama_rope_llama3", "llama", 16, false, false, false, true, "llama3", 0, 2, NULL},
    {"mistral_swa", "llama", 16, false, false, false, true, NULL, 16, 2, NULL},
    {"qwen2", "qwen2", 16, false, true, false, false, NULL, 0, 2, NULL},
    {"qwen3", "qwen3", 32, false, false, true, false, NULL, 0, 2, NULL},
    {"qwen3_tied", "qwen3", 32, true, false, true, false, NULL, 0, 2, NULL},
    {"gemma", "gemma", 16, true, false, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output_norm.weight:64x1 blk.N.attn_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.attn_k.weight:64x32 blk.N.ffn_norm.weight:64x1 blk.N.ffn_gate.weight:64x128 blk.N.ffn_down.weight:128x64"},
    {"gemma2", "gemma2", 16, true, false, false, false, NULL, 16, 2,
     "token_embd.weight:64x384 blk.N.attn_norm.weight:64x1 blk.N.post_attention_norm.weight:64x1 "
     "blk.N.ffn_norm.weight:64x1 blk.N.post_ffw_norm.weight:64x1 blk.N.ffn_up.weight:64x128"},
    {"gemma3", "gemma3", 16, true, false, true, false, "linear", 16, 6,
     "token_embd.weight:64x384 blk.N.attn_q_norm.weight:16x1 blk.N.attn_k_norm.weight:16x1 "
     "blk.N.post_attention_norm.weight:64x1 blk.N.ffn_norm.weight:64x1 blk.N.post_ffw_norm.weight:64x1"},
    {"phi3", "phi3", 16, false, false, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 rope_factors_long.weight:8x1 rope_factors_short.weight:8x1 "
     "blk.N.attn_qkv.weight:64x128 blk.N.ffn_up.weight:64x256 blk.N.ffn_down.weight:128x64"},
    {"phi2", "phi2", 8, false, true, false, false, NULL, 0, 2,
     "output.weight:64x384 output.bias:384x1 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 "
     "blk.N.attn_q.bias:64x1 blk.N.attn_output.bias:64x1 blk.N.ffn_up.weight:64x128 blk.N.ffn_up.bias:128x1 "
     "blk.N.ffn_down.bias:64x1"},
    {"qwen3moe", "qwen3moe", 32, false, false, true, false, NULL, 0, 2,
     "blk.N.attn_q_norm.weight:32x1 blk.N.ffn_gate_inp.weight:64x8 blk.N.ffn_gate_exps.weight:64x32 "
     "blk.N.ffn_up_exps.weight:64x32 blk.N.ffn_down_exps.weight:32x64"},
    {"qwen2moe", "qwen2moe", 16, false, true, false, false, NULL, 0, 2,
     "blk.N.attn_q.bias:64x1 blk.N.ffn_gate_inp.weight:64x8 blk.N.ffn_gate_exps.weight:64x32 "
     "blk.N.ffn_down_exps.weight:32x64 blk.N.ffn_gate_inp_shexp.weight:64x1 blk.N.ffn_gate_shexp.weight:64x64 "
     "blk.N.ffn_up_shexp.weight:64x64 blk.N.ffn_down_shexp.weight:64x64"},
    {"mixtral", "llama", 16, false, false, false, true, NULL, 0, 2,
     "blk.N.ffn_gate_inp.weight:64x4 blk.N.ffn_gate_exps.weight:64x128 blk.N.ffn_up_exps.weight:64x128 "
     "blk.N.ffn_down_exps.weight:128x64"},
    /* Llama lineage (granite.c, llama.c variants) and MoE, issue 10 */
    {"granite", "granite", 16, false, false, false, true, NULL, 0, 2, NULL},
    {"olmo2", "olmo2", 16, false, false, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 output_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.attn_k.weight:64x32 blk.N.attn_q_norm.weight:64x1 blk.N.attn_k_norm.weight:32x1 "
     "blk.N.post_attention_norm.weight:64x1 blk.N.ffn_gate.weight:64x128 blk.N.ffn_down.weight:128x64 "
     "blk.N.post_ffw_norm.weight:64x1"},
    {"smollm3", "smollm3", 16, true, false, false, true, NULL, 0, 4,
     "token_embd.weight:64x384 output_norm.weight:64x1 blk.N.attn_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.attn_k.weight:64x32 blk.N.ffn_norm.weight:64x1 blk.N.ffn_gate.weight:64x128 blk.N.ffn_up.weight:64x128"},
    {"arcee", "arcee", 16, false, false, false, true, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 blk.N.attn_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.ffn_norm.weight:64x1 blk.N.ffn_up.weight:64x128 blk.N.ffn_down.weight:128x64"},
    {"ernie4_5", "ernie4_5", 16, true, false, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output_norm.weight:64x1 blk.N.attn_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.attn_k.weight:64x32 blk.N.ffn_norm.weight:64x1 blk.N.ffn_gate.weight:64x128"},
    {"seed_oss", "seed_oss", 16, false, true, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 blk.N.attn_norm.weight:64x1 blk.N.attn_q.bias:64x1 "
     "blk.N.attn_k.bias:32x1 blk.N.attn_v.bias:32x1 blk.N.post_attention_norm.weight:64x1 "
     "blk.N.ffn_gate.weight:64x128"},
    {"olmo", "olmo", 16, false, false, false, true, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 blk.N.attn_q.weight:64x64 blk.N.attn_k.weight:64x32 "
     "blk.N.ffn_gate.weight:64x128 blk.N.ffn_down.weight:128x64"},
    {"glm4", "glm4", 8, false, true, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 blk.N.attn_norm.weight:64x1 blk.N.attn_q.bias:64x1 "
     "blk.N.post_attention_norm.weight:64x1 blk.N.ffn_norm.weight:64x1 blk.N.ffn_up.weight:64x256 "
     "blk.N.ffn_down.weight:128x64 blk.N.post_ffw_norm.weight:64x1"},
    {"olmoe", "olmoe", 16, false, false, false, false, NULL, 0, 2,
     "blk.N.attn_norm.weight:64x1 blk.N.attn_q_norm.weight:64x1 blk.N.attn_k_norm.weight:32x1 "
     "blk.N.ffn_norm.weight:64x1 blk.N.ffn_gate_inp.weight:64x8 blk.N.ffn_gate_exps.weight:64x32 "
     "blk.N.ffn_up_exps.weight:64x32 blk.N.ffn_down_exps.weight:32x64"},
    {"granitemoe", "granitemoe", 16, false, false, false, true, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 blk.N.attn_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.ffn_norm.weight:64x1 blk.N.ffn_gate_inp.weight:64x4 blk.N.ffn_gate_exps.weight:64x32 "
     "blk.N.ffn_up_exps.weight:64x32 blk.N.ffn_down_exps.weight:32x64"},
    /* DeepSeek-V3 (deepseek2.c): head_dim is the rope part (qk_rope_head_dim); layer 0 dense, layer 1 MoE */
    {"deepseek_v3", "deepseek2", 8, false, false, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output.weight:64x384 blk.N.attn_norm.weight:64x1 blk.N.attn_q_a.weight:64x32 "
     "blk.N.attn_q_a_norm.weight:32x1 blk.N.attn_q_b.weight:32x96 blk.N.attn_kv_a_mqa.weight:64x40 "
     "blk.N.attn_kv_a_norm.weight:32x1 blk.N.attn_v_b.weight:32x16 blk.N.attn_output.weight:64x64 "
     "blk.N.ffn_norm.weight:64x1 blk.0.ffn_gate.weight:64x128 blk.0.ffn_down.weight:128x64 "
     "blk.1.ffn_gate_inp.weight:64x8 blk.1.exp_probs_b.bias:8x1 blk.1.ffn_gate_exps.weight:64x32 "
     "blk.1.ffn_up_exps.weight:64x32 blk.1.ffn_down_exps.weight:32x64 blk.1.ffn_gate_shexp.weight:64x32 "
     "blk.1.ffn_down_shexp.weight:32x64"},
    /* GPT lineage (gptlike.c); head_dim is the rotated part of the head, 0 for learned positions */
    {"stablelm", "stablelm", 4, false, true, false, false, NULL, 0, 2,
     "output.weight:64x384 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 blk.N.attn_q.bias:64x1 "
     "blk.N.attn_k.bias:32x1 blk.N.attn_v.weight:64x32 blk.N.ffn_norm.bias:64x1 blk.N.ffn_gate.weight:64x128 "
     "blk.N.ffn_down.weight:128x64"},
    {"gptneox", "gptneox", 4, false, true, false, false, NULL, 0, 2,
     "output.weight:64x384 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 blk.N.attn_qkv.weight:64x192 "
     "blk.N.attn_qkv.bias:192x1 blk.N.attn_output.bias:64x1 blk.N.ffn_norm.bias:64x1 "
     "blk.N.ffn_up.weight:64x128 blk.N.ffn_up.bias:128x1 blk.N.ffn_down.bias:64x1"},
    {"gpt2", "gpt2", 0, true, true, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 position_embd.weight:64x256 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 "
     "blk.N.attn_qkv.weight:64x192 blk.N.attn_qkv.bias:192x1 blk.N.attn_output.weight:64x64 "
     "blk.N.ffn_norm.bias:64x1 blk.N.ffn_up.weight:64x128 blk.N.ffn_down.weight:128x64"},
    {"starcoder2", "starcoder2", 16, true, true, false, false, NULL, 16, 2,
     "token_embd.weight:64x384 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 blk.N.attn_q.bias:64x1 "
     "blk.N.attn_k.bias:32x1 blk.N.attn_v.bias:32x1 blk.N.attn_output.bias:64x1 blk.N.ffn_norm.bias:64x1 "
     "blk.N.ffn_up.weight:64x128 blk.N.ffn_up.bias:128x1 blk.N.ffn_down.bias:64x1"},
    {"gpt_bigcode", "starcoder", 0, true, true, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 position_embd.weight:64x256 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 "
     "blk.N.attn_qkv.weight:64x96 blk.N.attn_qkv.bias:96x1 blk.N.attn_output.weight:64x64 "
     "blk.N.ffn_norm.bias:64x1 blk.N.ffn_up.weight:64x128 blk.N.ffn_down.weight:128x64"},
    {"falcon", "falcon", 16, true, false, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 blk.N.attn_qkv.weight:64x96 "
     "blk.N.attn_output.weight:64x64 blk.N.ffn_up.weight:64x128 blk.N.ffn_down.weight:128x64"},
    {"gptj", "gptj", 8, false, false, false, false, NULL, 0, 2,
     "output.weight:64x384 output.bias:384x1 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 "
     "blk.N.attn_q.weight:64x64 blk.N.attn_k.weight:64x64 blk.N.attn_output.weight:64x64 "
     "blk.N.ffn_up.weight:64x128 blk.N.ffn_up.bias:128x1 blk.N.ffn_down.bias:64x1"},
    {"cohere", "command-r", 16, true, false, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 output_norm.weight:64x1 blk.N.attn_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.attn_k.weight:64x32 blk.N.ffn_gate.weight:64x128 blk.N.ffn_up.weight:64x128 "
     "blk.N.ffn_down.weight:128x64"},
    {"nemotron", "nemotron", 8, false, false, false, false, NULL, 0, 2,
     "output.weight:64x384 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.attn_k.weight:64x32 blk.N.ffn_norm.bias:64x1 blk.N.ffn_up.weight:64x128 "
     "blk.N.ffn_down.weight:128x64"},
    /* OPT: 256 learned positions (HF's 258 rows less the offset of 2), biases everywhere, ReLU MLP, tied */
    {"opt", "opt", 0, true, true, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 position_embd.weight:64x256 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 "
     "blk.N.attn_q.weight:64x64 blk.N.attn_q.bias:64x1 blk.N.attn_k.bias:64x1 blk.N.attn_v.bias:64x1 "
     "blk.N.attn_output.bias:64x1 blk.N.ffn_norm.bias:64x1 blk.N.ffn_up.weight:64x128 blk.N.ffn_up.bias:128x1 "
     "blk.N.ffn_down.weight:128x64 blk.N.ffn_down.bias:64x1"},
    /* CodeGen, written as gptj: qkv_proj's 4 chunks of (q, v, k) regrouped to [q | k | v], rotary 8 of 16 */
    {"codegen", "gptj", 8, false, false, false, false, NULL, 0, 2,
     "output.weight:64x384 output.bias:384x1 output_norm.bias:64x1 blk.N.attn_norm.bias:64x1 "
     "blk.N.attn_qkv.weight:64x192 blk.N.attn_output.weight:64x64 blk.N.ffn_up.weight:64x128 "
     "blk.N.ffn_up.bias:128x1 blk.N.ffn_down.bias:64x1"},
    /* BLOOM: ALiBi (no position keys or tensors), embedding LayerNorm, per-head qkv regrouped, MLP 4 n_embd, tied */
    {"bloom", "bloom", 0, true, true, false, false, NULL, 0, 2,
     "token_embd.weight:64x384 token_embd_norm.weight:64x1 token_embd_norm.bias:64x1 output_norm.bias:64x1 "
     "blk.N.attn_norm.bias:64x1 blk.N.attn_qkv.weight:64x192 blk.N.attn_qkv.bias:192x1 blk.N.attn_output.bias:64x1 "
     "blk.N.ffn_norm.bias:64x1 blk.N.ffn_up.weight:64x256 blk.N.ffn_up.bias:256x1 blk.N.ffn_down.weight:256x64"},
    /* 6 heads: the second ALiBi slope series */
    {"bloom_h6", "bloom", 0, true, true, false, false, NULL, 0, 2,
     "token_embd.weight:96x384 token_embd_norm.weight:96x1 blk.N.attn_qkv.weight:96x288 blk.N.attn_qkv.bias:288x1 "
     "blk.N.attn_output.weight:96x96 blk.N.ffn_up.weight:96x384 blk.N.ffn_down.weight:384x96"},
    /* BitNet b1.58: ternary projections, sub-norms before o_proj and down_proj, relu2 gate, NeoX RoPE, untied */
    {"bitnet", "bitnet", 16, false, false, false, false, NULL, 0, 2,
     "output.weight:64x384 output_norm.weight:64x1 blk.N.attn_norm.weight:64x1 blk.N.attn_q.weight:64x64 "
     "blk.N.attn_k.weight:64x32 blk.N.attn_v.weight:64x32 blk.N.attn_sub_norm.weight:64x1 "
     "blk.N.attn_output.weight:64x64 blk.N.ffn_norm.weight:64x1 blk.N.ffn_gate.weight:64x128 "
     "blk.N.ffn_up.weight:64x128 blk.N.ffn_sub_norm.weight:128x1 blk.N.ffn_down.weight:128x64"},
    /* InternLM2 (llama.c): the llama / llama_rope_linear fixtures repacked in InternLM2's layout by
     * scripts/gen_internlm2_fixture.py; wqkv split into q/k/v (check_internlm2_split), q/k permuted */
    {"internlm2", "internlm2", 16, false, false, false, true, NULL, 0, 2, INTERNLM2_TENSORS},
    {"internlm2_rope_linear", "internlm2", 16, false, false, false, true, "linear", 0, 2, INTERNLM2_TENSORS},
};

/* What each weight type may cost. u is the rms relative rounding error of
 * one weight in the format: F16 2^-11/sqrt(3) = 2.8e-4, BF16 2^-8/sqrt(3) =
 * 2.3e-3, Q8_0 (amax/127)/sqrt(12) with amax of a block of 32 Gaussian
 * weights about 2.1 sigma: 4.8e-3. These random models amplify weight noise
 * into the per-position relative logit error by a factor A that depends on
 * the model, not the format; measured here (transformers 5.17 fixtures):
 * A <= 10.5 on the mean over positions and A <= 56 on the worst position
 * (the YaRN case under Q8_0). The bounds are 25 u (mean) and 100 u (worst),
 * leaving at least 1.8x room, while a structural mistake (a wrong
 * permutation, a dropped bias, a bad scale) costs errors of order 1.
 * F32 is the requirement: 1e-4 at every position (measured 5e-6).
 * Top-1 may differ only where the reference's margin is within the error;
 * min_top1 is the least number of the 64 positions that must agree
 * (measured worst: F16 64, BF16 60, Q8_0 58). */
typedef struct tolerance {
    double mean, max;
    int min_top1;
} tolerance;

static tolerance tol_of(ob_type t) {
    switch (t) {
    case OB_TYPE_F32: return (tolerance){1e-4, 1e-4, N_PROMPT};
    case OB_TYPE_F16: return (tolerance){25 * 2.8e-4, 100 * 2.8e-4, N_PROMPT - 4};
    case OB_TYPE_BF16: return (tolerance){25 * 2.3e-3, 100 * 2.3e-3, N_PROMPT - 8};
    case OB_TYPE_Q8_0: return (tolerance){25 * 4.8e-3, 100 * 4.8e-3, N_PROMPT - 12};
    case OB_TYPE_TQ1_0: /* exact ternary weights; see bitnet_tq for the activations' u */
    case OB_TYPE_TQ2_0: return (tolerance){25 * 6.0e-3, 100 * 6.0e-3, N_PROMPT - 12};
    default: return (tolerance){0, 0, N_PROMPT};
    }
}

typedef struct fixture {
    char dir[1024];
    int n_vocab;
    int32_t prompt[N_PROMPT];
    int32_t greedy[N_GEN];
    float *logits; /* [N_PROMPT][n_vocab] */
} fixture;

static int read_ids(const char *path, int32_t *ids, int n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int k = 0;
    long v;
    while (k < n && fscanf(f, "%ld", &v) == 1) ids[k++] = (int32_t)v;
    int extra = fscanf(f, "%ld", &v);
    fclose(f);
    return k == n && extra != 1 ? 0 : -1;
}

static bool load_fixture(const ref_case *c, fixture *fx) {
    memset(fx, 0, sizeof *fx);
    snprintf(fx->dir, sizeof fx->dir, "%s/tests/data/models/%s", OB_SOURCE_DIR, c->name);
    char p[1200];
    snprintf(p, sizeof p, "%s/meta.json", fx->dir);
    json_t *meta = json_load_file(p, 0, NULL);
    CHECK_MSG(meta != NULL, "cannot read %s", p);
    if (!meta) return false;
    fx->n_vocab = (int)json_integer_value(json_object_get(meta, "n_vocab"));
    CHECK_EQ_INT(json_integer_value(json_object_get(meta, "n_prompt")), N_PROMPT);
    CHECK_EQ_INT(json_integer_value(json_object_get(meta, "n_gen")), N_GEN);
    CHECK(json_is_true(json_object_get(meta, "greedy_equals_argmax_loop")));
    json_decref(meta);
    snprintf(p, sizeof p, "%s/prompt.txt", fx->dir);
    CHECK_MSG(read_ids(p, fx->prompt, N_PROMPT) == 0, "%s", p);
    snprintf(p, sizeof p, "%s/greedy.txt", fx->dir);
    CHECK_MSG(read_ids(p, fx->greedy, N_GEN) == 0, "%s", p);
    snprintf(p, sizeof p, "%s/logits.f32", fx->dir);
    size_t n = (size_t)N_PROMPT * (size_t)fx->n_vocab;
    fx->logits = malloc(n * sizeof(float));
    FILE *f = fopen(p, "rb");
    size_t got = f ? fread(fx->logits, sizeof(float), n + 1, f) : 0;
    if (f) fclose(f);
    CHECK_MSG(got == n, "%s: %zu floats, want %zu", p, got, n);
    return !g_test_failed && fx->n_vocab > 0;
}

/* ---- the converted file ---- */

/* Source element [row][col] of an F32 safetensors matrix with `cols` columns. */
static float st_at(const ob_st_tensor *t, int64_t row, int64_t col, int64_t cols) {
    float v;
    memcpy(&v, t->data + (size_t)(row * cols + col) * 4, 4);
    return v;
}

/* GPT lineage, F32 files: the rearranged tensors against their sources.
 * gptneox: HF's query_key_value holds per head [q | k | v] (rows
 * (3 h + j) * 16 + d); the file [all q | all k | all v] (rows j * 64 + h * 16 + d).
 * gpt2: c_attn is a Conv1D weight [64 in][192 out]; the file's row r is its column r. */
static void check_gpt_layouts(const ref_case *c, ob_gguf *g, ob_safetensors *st) {
    const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.1.attn_qkv.weight");
    int bad = 0;
    if (!strcmp(c->arch, "gptneox")) {
        const ob_st_tensor *src = ob_safetensors_find(st, "gpt_neox.layers.1.attention.query_key_value.weight");
        CHECK(t && src && src->dtype == OB_ST_F32 && t->ne[0] == 64 && t->ne[1] == 192);
        for (int j = 0; t && src && j < 3; j++)
            for (int h = 0; h < 4; h++)
                for (int d = 0; d < 16; d++)
                    bad += memcmp((const float *)t->data + (size_t)(j * 64 + h * 16 + d) * 64,
                                  src->data + (size_t)((3 * h + j) * 16 + d) * 64 * 4, 64 * 4) != 0;
    } else if (!strcmp(c->arch, "gpt2")) {
        const ob_st_tensor *src = ob_safetensors_find(st, "transformer.h.1.attn.c_attn.weight");
        CHECK(t && src && src->dtype == OB_ST_F32 && t->ne[0] == 64 && t->ne[1] == 192);
        for (int r = 0; t && src && r < 192; r++)
            for (int i = 0; i < 64; i++) bad += ((const float *)t->data)[r * 64 + i] != st_at(src, i, r, 192);
    } else {
        return;
    }
    CHECK_MSG(bad == 0, "%s: %d attn_qkv rows/elements are not where llama.cpp puts them", c->name, bad);
}

/* DeepSeek, F32 files: kv_b_proj [4 heads x (16 k_nope + 16 v) rows, 32
 * latent columns] split as llama.cpp does: attn_k_b [16, 32, 4] holds head
 * h's k rows transposed (element (h, c, d) = kv_b[h * 32 + d][c]), attn_v_b
 * [32, 16, 4] its v rows (row (h, j) = kv_b row h * 32 + 16 + j); and the
 * keys llama.cpp's MLA loader reads. */
static void check_mla_split(const ref_case *c, ob_gguf *g, ob_safetensors *st) {
    if (strcmp(c->arch, "deepseek2") != 0) return;
    const ob_gguf_tensor *kb = ob_gguf_find_tensor(g, "blk.1.attn_k_b.weight");
    const ob_gguf_tensor *vb = ob_gguf_find_tensor(g, "blk.1.attn_v_b.weight");
    const ob_st_tensor *src = ob_safetensors_find(st, "model.layers.1.self_attn.kv_b_proj.weight");
    CHECK(kb && vb && src && src->dtype == OB_ST_F32 && kb->n_dims == 3 && vb->n_dims == 3);
    if (!kb || !vb || !src) return;
    CHECK(kb->ne[0] == 16 && kb->ne[1] == 32 && kb->ne[2] == 4 && vb->ne[0] == 32 && vb->ne[1] == 16 && vb->ne[2] == 4);
    CHECK(ob_gguf_find_tensor(g, "blk.1.attn_kv_b.weight") == NULL);
    int bad = 0;
    for (int h = 0; h < 4; h++)
        for (int cc = 0; cc < 32; cc++)
            for (int d = 0; d < 16; d++) {
                bad += ((const float *)kb->data)[(h * 32 + cc) * 16 + d] != st_at(src, h * 32 + d, cc, 32);
                bad += ((const float *)vb->data)[(h * 16 + d) * 32 + cc] != st_at(src, h * 32 + 16 + d, cc, 32);
            }
    CHECK_MSG(bad == 0, "%s: %d attn_k_b/attn_v_b elements are not kv_b_proj's", c->name, bad);
    static const struct {
        const char *key;
        uint32_t want;
    } keys[] = {{"deepseek2.attention.head_count_kv", 1},       {"deepseek2.attention.q_lora_rank", 32},
                {"deepseek2.attention.kv_lora_rank", 32},       {"deepseek2.attention.key_length", 40},
                {"deepseek2.attention.value_length", 32},       {"deepseek2.attention.key_length_mla", 24},
                {"deepseek2.attention.value_length_mla", 16},   {"deepseek2.leading_dense_block_count", 1},
                {"deepseek2.expert_shared_count", 1},           {"deepseek2.expert_gating_func", 2},
                {"deepseek2.expert_group_count", 2},            {"deepseek2.expert_group_used_count", 1},
                {"deepseek2.expert_count", 8},                  {"deepseek2.expert_used_count", 2},
                {"deepseek2.expert_feed_forward_length", 32}};
    for (size_t i = 0; i < OB_ARRAY_LEN(keys); i++) {
        uint32_t v = 0;
        CHECK_MSG(ob_gguf_get_u32(g, keys[i].key, &v) == 0 && v == keys[i].want, "%s: %s = %u, want %u", c->name,
                  keys[i].key, v, keys[i].want);
    }
    float scale = 0;
    bool norm = false;
    CHECK(ob_gguf_get_f32(g, "deepseek2.expert_weights_scale", &scale) == 0 && scale == 2.5f);
    CHECK(ob_gguf_get_bool(g, "deepseek2.expert_weights_norm", &norm) == 0 && norm);
}

/* OPT, CodeGen, BLOOM, F32 files: the moved rows against their sources.
 * opt: position_embd row p is HF's row p + 2 (the offset dropped).
 * codegen: qkv_proj rows [4 chunks][q, v, k][16] (one 16-dim head per
 * chunk); the file's [all q | all k | all v], head c of part j from chunk c.
 * bloom: query_key_value rows (and bias) per head [q | k | v], as GPT-NeoX's. */
static void check_older_layouts(const ref_case *c, ob_gguf *g, ob_safetensors *st) {
    int bad = 0, checked = 0;
    if (!strcmp(c->name, "opt")) {
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "position_embd.weight");
        const ob_st_tensor *src = ob_safetensors_find(st, "model.decoder.embed_positions.weight");
        CHECK(t && src && src->dtype == OB_ST_F32 && src->shape[0] == t->ne[1] + 2 && src->shape[1] == t->ne[0]);
        for (int64_t p = 0; t && src && p < t->ne[1]; p++, checked++)
            bad += memcmp((const float *)t->data + p * t->ne[0], src->data + (size_t)(p + 2) * t->ne[0] * 4,
                          (size_t)t->ne[0] * 4) != 0;
    } else if (!strcmp(c->name, "codegen")) {
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.1.attn_qkv.weight");
        const ob_st_tensor *src = ob_safetensors_find(st, "transformer.h.1.attn.qkv_proj.weight");
        CHECK(t && src && src->dtype == OB_ST_F32 && t->ne[0] == 64 && t->ne[1] == 192);
        static const int in_chunk[3] = {0, 2, 1}; /* q, k, v sit at 0, 2, 1 of a chunk's (q, v, k) */
        for (int j = 0; t && src && j < 3; j++)
            for (int ch = 0; ch < 4; ch++)
                for (int d = 0; d < 16; d++, checked++)
                    bad += memcmp((const float *)t->data + (size_t)(j * 64 + ch * 16 + d) * 64,
                                  src->data + (size_t)(ch * 48 + in_chunk[j] * 16 + d) * 64 * 4, 64 * 4) != 0;
    } else if (!strcmp(c->arch, "bloom")) {
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.1.attn_qkv.weight");
        const ob_gguf_tensor *tb = ob_gguf_find_tensor(g, "blk.1.attn_qkv.bias");
        const ob_st_tensor *src = ob_safetensors_find(st, "transformer.h.1.self_attention.query_key_value.weight");
        const ob_st_tensor *sb = ob_safetensors_find(st, "transformer.h.1.self_attention.query_key_value.bias");
        CHECK(t && tb && src && sb && src->dtype == OB_ST_F32 && t->ne[1] == 3 * t->ne[0]);
        const int64_t E = t ? t->ne[0] : 0, hd = 16, nh = E / hd;
        for (int j = 0; t && tb && src && sb && j < 3; j++)
            for (int64_t h = 0; h < nh; h++)
                for (int64_t d = 0; d < hd; d++, checked++) {
                    const int64_t r = j * E + h * hd + d, sr = (3 * h + j) * hd + d;
                    bad += memcmp((const float *)t->data + r * E, src->data + (size_t)(sr * E) * 4, (size_t)E * 4) != 0;
                    bad += memcmp((const float *)tb->data + r, sb->data + (size_t)sr * 4, 4) != 0;
                }
    } else {
        return;
    }
    CHECK_MSG(checked > 0 && bad == 0, "%s: %d of %d moved rows are not where they belong", c->name, bad, checked);
}

/* InternLM2, F32 files: attn_q, attn_k and attn_v against the source's
 * attention.wqkv, whose rows hold per KV group g query heads g G .. g G +
 * G - 1 (G = n_head / n_head_kv), key head g, value head g, head_dim rows
 * each (modeling_internlm2.py). The file's q and k rows are also permuted
 * as Llama's: row k of a head is the head's row (k % 2) hd / 2 + k / 2. */
static void check_internlm2_split(const ref_case *c, ob_gguf *g, ob_safetensors *st) {
    if (strcmp(c->arch, "internlm2") != 0) return;
    uint32_t H = 0, KV = 0;
    CHECK_OK(ob_gguf_get_u32(g, "internlm2.attention.head_count", &H));
    CHECK_OK(ob_gguf_get_u32(g, "internlm2.attention.head_count_kv", &KV));
    const int64_t hd = c->head_dim, G = KV ? (int64_t)(H / KV) : 0;
    int bad = 0, checked = 0;
    for (int l = 0; l < c->n_layer && G > 0; l++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.attention.wqkv.weight", l);
        const ob_st_tensor *src = ob_safetensors_find(st, name);
        CHECK_MSG(src && src->dtype == OB_ST_F32 && src->shape[0] == (int64_t)(H + 2 * KV) * hd, "%s: %s", c->name,
                  name);
        static const char *const parts[3] = {"attn_q", "attn_k", "attn_v"};
        for (int part = 0; src && part < 3; part++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, parts[part]);
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, name);
            const int64_t rows = (part == 0 ? (int64_t)H : (int64_t)KV) * hd;
            CHECK_MSG(t && t->type == OB_TYPE_F32 && t->ne[1] == rows && t->ne[0] == src->shape[1], "%s: %s", c->name,
                      name);
            for (int64_t r = 0; t && r < rows; r++, checked++) {
                const int64_t head = r / hd, k = r % hd, d = part == 2 ? k : (k % 2) * (hd / 2) + k / 2;
                const int64_t group = part == 0 ? head / G : head, in_group = part == 0 ? head % G : G + part - 1;
                const int64_t sr = (group * (G + 2) + in_group) * hd + d;
                bad += memcmp((const float *)t->data + r * t->ne[0], src->data + (size_t)(sr * t->ne[0]) * 4,
                              (size_t)t->ne[0] * 4) != 0;
            }
        }
    }
    CHECK_MSG(checked > 0 && bad == 0, "%s: %d of %d q/k/v rows are not wqkv's (split per KV group, q/k permuted)",
              c->name, bad, checked);
}

/* Layer 0's first norm weight under the names the families give it. */
static const ob_st_tensor *first_norm_src(const ob_safetensors *st) {
    static const char *const names[] = {"model.layers.0.input_layernorm.weight",
                                        "gpt_neox.layers.0.input_layernorm.weight", "transformer.h.0.ln_1.weight",
                                        "transformer.h.0.input_layernorm.weight",
                                        "model.decoder.layers.0.self_attn_layer_norm.weight",
                                        "model.layers.0.attention_norm.weight"};
    for (size_t i = 0; i < OB_ARRAY_LEN(names); i++) {
        const ob_st_tensor *t = ob_safetensors_find(st, names[i]);
        if (t) return t;
    }
    return NULL;
}

static void check_gguf(const ref_case *c, const fixture *fx, const char *path, ob_type type) {
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open(path, &g));
    if (!g) return;
    const char *s = NULL;
    CHECK_OK(ob_gguf_get_str(g, "general.architecture", &s));
    CHECK_EQ_STR(s, c->arch);
    char k[128];
    uint32_t u = 0;
#define KEY(x) (snprintf(k, sizeof k, "%s.%s", c->arch, x), k)
    CHECK_OK(ob_gguf_get_u32(g, KEY("block_count"), &u));
    CHECK_EQ_INT(u, c->n_layer);
    if (c->head_dim == 0) { /* learned positions (gpt2, starcoder): no RoPE keys */
        CHECK(ob_gguf_get(g, KEY("rope.dimension_count")) == NULL);
    } else {
        CHECK_OK(ob_gguf_get_u32(g, KEY("rope.dimension_count"), &u));
        CHECK_EQ_INT(u, c->head_dim); /* phi2: the rotated part of the head */
    }
    /* written when config.json states head_dim (Qwen2's does not) */
    if (!c->tensors && ob_gguf_get_u32(g, KEY("attention.key_length"), &u) == 0) CHECK_EQ_INT(u, c->head_dim);
    if (!c->tensors && c->head_dim * 4 != 64) CHECK(ob_gguf_get(g, KEY("attention.key_length")) != NULL);
    CHECK_OK(ob_gguf_get_u32(g, KEY("vocab_size"), &u));
    CHECK_EQ_INT(u, fx->n_vocab);
    if (c->sliding_window) {
        CHECK_OK(ob_gguf_get_u32(g, KEY("attention.sliding_window"), &u));
        CHECK_EQ_INT(u, c->sliding_window);
    } else {
        CHECK(ob_gguf_get(g, KEY("attention.sliding_window")) == NULL);
    }
    const char *rt = NULL;
    ob_gguf_get_str(g, KEY("rope.scaling.type"), &rt);
    if (c->rope && strcmp(c->rope, "llama3") != 0)
        CHECK_EQ_STR(rt, c->rope);
    else
        CHECK(rt == NULL);
#undef KEY
    if (c->tensors) {
        /* the listed tensors, in every layer for blk.N. names */
        char list[1024];
        snprintf(list, sizeof list, "%s", c->tensors);
        for (char *save = NULL, *tok = strtok_r(list, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            char name[96];
            long long a = 0, bb = 0;
            char *colon = strchr(tok, ':');
            CHECK(colon && sscanf(colon + 1, "%lldx%lld", &a, &bb) == 2);
            if (!colon) continue;
            *colon = 0;
            bool per_layer = !strncmp(tok, "blk.N.", 6);
            for (int l = 0; l < (per_layer ? c->n_layer : 1); l++) {
                if (per_layer)
                    snprintf(name, sizeof name, "blk.%d.%s", l, tok + 6);
                else
                    snprintf(name, sizeof name, "%s", tok);
                const ob_gguf_tensor *t = ob_gguf_find_tensor(g, name);
                CHECK_MSG(t != NULL, "%s: no %s", c->name, name);
                if (!t) continue;
                CHECK_MSG(t->ne[0] == a && t->ne[1] == bb, "%s: %s is %lld x %lld", c->name, name, (long long)t->ne[0],
                          (long long)t->ne[1]);
                ob_type wt = (t->n_dims == 1 || strstr(name, "_norm.") || strstr(name, "ffn_gate_inp")) ? OB_TYPE_F32 : type;
                CHECK_MSG(t->type == wt, "%s: %s is %s", c->name, name, ob_type_name(t->type));
            }
        }
        CHECK(c->tied == (ob_gguf_find_tensor(g, "output.weight") == NULL));
        /* Gemma's norms are stored as 1 + w (llama.cpp's convention); others as w */
        if (type == OB_TYPE_F32) {
            char p[1200];
            snprintf(p, sizeof p, "%s/model.safetensors", fx->dir);
            ob_safetensors *st = NULL;
            CHECK_OK(ob_safetensors_open(p, &st));
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.0.attn_norm.weight");
            const ob_st_tensor *src = st ? first_norm_src(st) : NULL;
            /* olmo2 has no pre-norms, olmo's LayerNorms no weights: then no attn_norm either */
            if (st && !src) CHECK_MSG(!t, "%s: attn_norm without input_layernorm", c->name);
            if (st && !src) t = NULL;
            else CHECK(t && src && src->dtype == OB_ST_F32 && t->ne[0] == src->shape[0]);
            /* Nemotron's LayerNorm1P too */
            float add = !strncmp(c->arch, "gemma", 5) || !strcmp(c->arch, "nemotron") ? 1.0f : 0.0f;
            int bad = 0;
            for (int i = 0; t && src && i < t->ne[0]; i++) {
                float w;
                memcpy(&w, src->data + 4 * i, 4);
                bad += ((const float *)t->data)[i] != w + add;
            }
            CHECK_MSG(bad == 0, "%s: %d attn_norm weights are not the source%s", c->name, bad, add ? " + 1" : "");
            if (st) check_gpt_layouts(c, g, st);
            if (st) check_mla_split(c, g, st);
            if (st) check_older_layouts(c, g, st);
            if (st) check_internlm2_split(c, g, st);
            ob_safetensors_free(st);
        }
        ob_gguf_free(g);
        return;
    }
    /* the tensor set of the case, with shapes */
    int n_want = 0;
    const int E = 64, F = 128, HD = c->head_dim, Q = 4 * HD, KV = 2 * HD;
    struct {
        const char *n;
        int64_t ne0, ne1;
    } want[40];
#define W(name, a, b) (want[n_want].n = (name), want[n_want].ne0 = (a), want[n_want].ne1 = (b), n_want++)
    W("token_embd.weight", E, fx->n_vocab);
    W("output_norm.weight", E, 1);
    if (!c->tied) W("output.weight", E, fx->n_vocab);
    if (c->rope && !strcmp(c->rope, "llama3")) W("rope_freqs.weight", HD / 2, 1);
    static char names[2][16][48];
    for (int l = 0; l < 2; l++) {
        int i = 0;
#define B(suffix, a, b) (snprintf(names[l][i], 48, "blk.%d.%s", l, suffix), W(names[l][i], a, b), i++)
        B("attn_norm.weight", E, 1);
        B("attn_q.weight", E, Q);
        B("attn_k.weight", E, KV);
        B("attn_v.weight", E, KV);
        B("attn_output.weight", Q, E);
        B("ffn_norm.weight", E, 1);
        B("ffn_gate.weight", E, F);
        B("ffn_up.weight", E, F);
        B("ffn_down.weight", F, E);
        if (c->qkv_bias) {
            B("attn_q.bias", Q, 1);
            B("attn_k.bias", KV, 1);
            B("attn_v.bias", KV, 1);
        }
        if (c->qk_norm) {
            B("attn_q_norm.weight", HD, 1);
            B("attn_k_norm.weight", HD, 1);
        }
#undef B
    }
#undef W
    CHECK_EQ_INT(ob_gguf_n_tensors(g), n_want);
    for (int i = 0; i < n_want; i++) {
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, want[i].n);
        CHECK_MSG(t != NULL, "%s: no %s", c->name, want[i].n);
        if (!t) continue;
        CHECK_MSG(t->ne[0] == want[i].ne0 && t->ne[1] == want[i].ne1, "%s: %s is %lld x %lld", c->name, want[i].n,
                  (long long)t->ne[0], (long long)t->ne[1]);
        ob_type wt = (t->n_dims == 1 || strstr(want[i].n, "_norm.")) ? OB_TYPE_F32 : type;
        CHECK_MSG(t->type == wt, "%s: %s is %s", c->name, want[i].n, ob_type_name(t->type));
    }
    /* q/k rows: permuted (llama) or untouched (qwen), against the source */
    if (type == OB_TYPE_F32) {
        char p[1200];
        snprintf(p, sizeof p, "%s/model.safetensors", fx->dir);
        ob_safetensors *st = NULL;
        CHECK_OK(ob_safetensors_open(p, &st));
        static const char *pairs[][2] = {{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
                                         {"blk.1.attn_k.weight", "model.layers.1.self_attn.k_proj.weight"}};
        for (int i = 0; st && i < 2; i++) {
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, pairs[i][0]);
            const ob_st_tensor *src = ob_safetensors_find(st, pairs[i][1]);
            CHECK(t && src && src->dtype == OB_ST_F32);
            if (!t || !src) continue;
            int bad = 0;
            for (int64_t r = 0; r < t->ne[1]; r++) {
                int64_t h = r / HD, kk = r % HD;
                int64_t sr = c->permuted ? h * HD + (kk & 1) * (HD / 2) + kk / 2 : r;
                bad += memcmp((const float *)t->data + r * t->ne[0], src->data + sr * t->ne[0] * 4,
                              (size_t)t->ne[0] * 4) != 0;
            }
            CHECK_MSG(bad == 0, "%s: %s has %d rows not where expected", c->name, pairs[i][0], bad);
        }
        ob_safetensors_free(st);
    }
    ob_gguf_free(g);
}

/* ---- running the engine ---- */

typedef struct run_out {
    float *logits;        /* [N_PROMPT + N_GEN][n_vocab]: the prompt's, then each greedy step's */
    int32_t gen[N_GEN];
    float gen_margin[N_GEN]; /* top-1 minus top-2 of the logits each token was chosen from */
} run_out;

static int argmax(const float *v, int n, float *margin) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != best && v[i] > second) second = v[i];
    if (margin) *margin = v[best] - second;
    return best;
}

static bool run_engine(const char *path, const fixture *fx, run_out *o) {
    ob_model *m = NULL;
    CHECK_OK(ob_model_load(path, NULL, &m));
    if (!m) return false;
    CHECK_EQ_INT(ob_model_n_vocab(m), fx->n_vocab);
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1; /* tiny models: thread hand-offs cost more than they save (two tests share two cores in CI) */
    cp.kv_type = OB_KV_F32;
    ob_context *ctx = NULL;
    CHECK_OK(ob_context_create(m, &cp, &ctx));
    bool ok = ctx != NULL;
    int V = fx->n_vocab;
    o->logits = malloc((size_t)(N_PROMPT + N_GEN) * (size_t)V * sizeof(float));
    int32_t pos[N_PROMPT], seq[N_PROMPT];
    int8_t want[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) pos[i] = i, seq[i] = 0, want[i] = 1;
    if (ok) {
        ob_batch b = {N_PROMPT, fx->prompt, pos, seq, want};
        CHECK_OK(ob_decode(ctx, &b));
        for (int i = 0; i < N_PROMPT && ok; i++) {
            const float *lg = ob_get_logits(ctx, i);
            CHECK(lg != NULL);
            if (!lg) ok = false;
            else memcpy(o->logits + (size_t)i * V, lg, (size_t)V * sizeof(float));
        }
    }
    /* greedy, one token at a time through the KV cache */
    const float *last = ok ? o->logits + (size_t)(N_PROMPT - 1) * V : NULL;
    for (int s = 0; s < N_GEN && ok; s++) {
        memcpy(o->logits + (size_t)(N_PROMPT + s) * V, last, (size_t)V * sizeof(float));
        o->gen[s] = argmax(last, V, &o->gen_margin[s]);
        if (s == N_GEN - 1) break;
        int32_t p = N_PROMPT + s, sq = 0;
        int8_t w = 1;
        ob_batch b = {1, &o->gen[s], &p, &sq, &w};
        int rc = ob_decode(ctx, &b);
        CHECK_OK(rc);
        last = rc == 0 ? ob_get_logits(ctx, 0) : NULL;
        if (!last) ok = false;
    }
    ob_context_free(ctx);
    ob_model_free(m);
    return ok;
}

/* Per-position relative error: max |a - b| / max |b| over the row. */
static double row_rel_err(const float *a, const float *b, int n) {
    double e = 0, m = 0;
    for (int i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? e / m : e;
}

/* Mixture of experts under rounded weights: where the reference router has
 * a near tie between its k-th and (k+1)-th expert, the rounding can pick the
 * other one, and that position's logits then differ by O(1) (a discrete
 * switch, not an accumulation of rounding). Such positions are counted as
 * routing flips: at most MOE_MAX_FLIPS of the 64, excluded from the
 * worst-position bound and from the top-1 count; the mean bound still
 * covers every position. F32 allows none. */
#define MOE_MAX_FLIPS 4

static void compare(const ref_case *c, const fixture *fx, ob_type type, const run_out *o, const run_out *f32) {
    int V = fx->n_vocab;
    tolerance tol = tol_of(type);
    const bool moe = c->tensors && strstr(c->tensors, "_exps") && type != OB_TYPE_F32;
    double worst = 0, mean = 0, worst_abs = 0, worst_flip = 0;
    int top_ok = 0, flips = 0;
    for (int p = 0; p < N_PROMPT; p++) {
        const float *a = o->logits + (size_t)p * V, *r = fx->logits + (size_t)p * V;
        double e = row_rel_err(a, r, V);
        mean += e / N_PROMPT;
        for (int i = 0; i < V; i++) worst_abs = fmax(worst_abs, fabs((double)a[i] - r[i]));
        if (moe && e >= tol.max) {
            flips++;
            worst_flip = fmax(worst_flip, e);
            continue;
        }
        worst = fmax(worst, e);
        int ta = argmax(a, V, NULL), tr = argmax(r, V, NULL);
        top_ok += ta == tr;
        if (type == OB_TYPE_F32)
            CHECK_MSG(ta == tr, "%s f32: top-1 differs at position %d (%d vs %d)", c->name, p, ta, tr);
    }
    const char *tn = ob_type_name(type);
    CHECK_MSG(worst < tol.max, "%s %s: worst relative error %.3g >= %.3g", c->name, tn, worst, tol.max);
    CHECK_MSG(mean < tol.mean, "%s %s: mean relative error %.3g >= %.3g", c->name, tn, mean, tol.mean);
    CHECK_MSG(flips <= MOE_MAX_FLIPS, "%s %s: %d positions beyond the bound (at most %d routing flips)", c->name, tn,
              flips, MOE_MAX_FLIPS);
    CHECK_MSG(top_ok >= tol.min_top1 - flips, "%s %s: top-1 agrees at %d of %d positions (want %d)", c->name, tn,
              top_ok, N_PROMPT - flips, tol.min_top1 - flips);
    /* Greedy: identical for F32. For rounded weights identical until a near-tie: a step
     * where the F32 run's own margin is within twice the error measured on the prompt, or
     * - the two runs having read the same tokens up to there - one where this run's logits
     * are within the prompt's relative bound of the F32 run's at that very step and the
     * margin within twice their largest difference (the error a generated position
     * carries can exceed the prompt's), or for a mixture of experts a step whose logits are
     * beyond that bound - a routing flip, as on the prompt (deepseek_v3 BF16 on an AVX2 machine
     * parted at step 13, relative error 0.67 there against 0.02 on the prompt). From such a
     * step on, the continuations may part. */
    int same = 0;
    while (same < N_GEN && o->gen[same] == fx->greedy[same]) same++;
    bool tie = same < N_GEN && type != OB_TYPE_F32 && f32 && f32->gen_margin[same] < 2 * worst_abs;
    double step_rel = 0, step_abs = 0;
    if (same < N_GEN && type != OB_TYPE_F32 && f32 && f32->gen[same] == fx->greedy[same]) {
        const float *a = o->logits + (size_t)(N_PROMPT + same) * V, *r = f32->logits + (size_t)(N_PROMPT + same) * V;
        bool same_ctx = true; /* both ran the reference's tokens up to this step */
        for (int s = 0; s < same; s++) same_ctx = same_ctx && f32->gen[s] == fx->greedy[s];
        step_rel = row_rel_err(a, r, V);
        for (int i = 0; i < V; i++) step_abs = fmax(step_abs, fabs((double)a[i] - r[i]));
        if (same_ctx && step_rel < tol.max && f32->gen_margin[same] < 2 * step_abs) tie = true;
        /* a mixture of experts: a routing flip at that step (the discrete switch the prompt's
         * positions may show too, MOE_MAX_FLIPS; F32, which allows none, is held to every step) */
        if (same_ctx && moe && step_rel >= tol.max) tie = true;
    }
    CHECK_MSG(same == N_GEN || tie, "%s %s: greedy differs from step %d (%d vs %d)", c->name, tn, same,
              same < N_GEN ? o->gen[same] : -1, same < N_GEN ? fx->greedy[same] : -1);
    if (getenv("OB_TEST_VERBOSE")) {
        fprintf(stderr, "  %-18s %-5s rel err mean %.3g max %.3g (bounds %.2g, %.2g)  top-1 %d/%d  greedy %d/%d\n",
                c->name, tn, mean, worst, tol.mean, tol.max, top_ok, N_PROMPT, same, N_GEN);
        if (flips)
            fprintf(stderr, "    routing flips: %d positions (worst relative error there %.3g)\n", flips, worst_flip);
        if (same < N_GEN && f32)
            fprintf(stderr,
                    "    parted at step %d: F32 margin there %.4g; 2 x max abs error on the prompt %.4g, at the step "
                    "%.4g (relative %.3g, bound %.2g)\n",
                    same, f32->gen_margin[same], 2 * worst_abs, 2 * step_abs, step_rel, tol.max);
    }
}

/* The folder fx->dir converted to each weight type, checked and run
 * against fx's reference. */
static void run_fixture(const ref_case *c, const fixture *fx) {
    static const ob_type types[] = {OB_TYPE_F32, OB_TYPE_F16, OB_TYPE_BF16, OB_TYPE_Q8_0};
    run_out f32;
    memset(&f32, 0, sizeof f32);
    bool have_f32 = false;
    for (size_t ti = 0; ti < OB_ARRAY_LEN(types); ti++) {
        char out[256];
        snprintf(out, sizeof out, "/tmp/ob_models_ref_%d_%s_%s.gguf", (int)getpid(), c->name, ob_type_name(types[ti]));
        ob_convert_opts o;
        ob_convert_opts_init(&o);
        o.outtype = types[ti];
        int rc = ob_convert_hf(fx->dir, out, &o);
        CHECK_MSG(rc == 0, "%s: convert %s: %s", c->name, ob_type_name(types[ti]), ob_last_error());
        if (rc != 0) continue;
        check_gguf(c, fx, out, types[ti]);
        run_out r;
        memset(&r, 0, sizeof r);
        if (run_engine(out, fx, &r)) {
            compare(c, fx, types[ti], &r, have_f32 ? &f32 : NULL);
            if (types[ti] == OB_TYPE_F32) {
                f32 = r;
                have_f32 = true;
                r.logits = NULL;
            }
        }
        free(r.logits);
        unlink(out);
    }
    free(f32.logits);
}

static void run_case(const ref_case *c) {
    fixture fx;
    if (load_fixture(c, &fx)) run_fixture(c, &fx);
    free(fx.logits);
}

/* Granite with embedding and residual multipliers 1, attention multiplier
 * 1/sqrt(head_dim) and logits_scaling 2 is Llama with its logits halved: the
 * llama fixture's checkpoint under a Granite config.json must give
 * transformers' Llama logits / 2 (checks the Granite mapping, the q/k
 * permutation, the attention and logit scales; not the embedding and
 * residual multipliers, which need a Granite reference). */
static bool copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    bool ok = a && b;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

TEST(granite_as_llama) {
    fixture fx;
    if (!load_fixture(&CASES[0], &fx)) {
        free(fx.logits);
        return;
    }
    char dir[256], from[1200], to[1200], out[300];
    snprintf(dir, sizeof dir, "/tmp/ob_models_ref_%d_granite", (int)getpid());
    CHECK(mkdir(dir, 0755) == 0);
    static const char *files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < OB_ARRAY_LEN(files); i++) {
        snprintf(from, sizeof from, "%s/%s", fx.dir, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        CHECK_MSG(copy_file(from, to), "copy %s", files[i]);
    }
    snprintf(from, sizeof from, "%s/config.json", fx.dir);
    json_t *cfg = json_load_file(from, 0, NULL);
    CHECK(cfg != NULL);
    json_object_set_new(cfg, "architectures", json_pack("[s]", "GraniteForCausalLM"));
    json_object_set_new(cfg, "model_type", json_string("granite"));
    json_object_set_new(cfg, "embedding_multiplier", json_real(1.0));
    json_object_set_new(cfg, "residual_multiplier", json_real(1.0));
    json_object_set_new(cfg, "attention_multiplier", json_real(0.25)); /* 1/sqrt(16) */
    json_object_set_new(cfg, "logits_scaling", json_real(2.0));
    snprintf(to, sizeof to, "%s/config.json", dir);
    CHECK(cfg && json_dump_file(cfg, to, 0) == 0);
    json_decref(cfg);

    snprintf(out, sizeof out, "%s.gguf", dir);
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_F32;
    int rc = ob_convert_hf(dir, out, &o);
    CHECK_MSG(rc == 0, "convert: %s", ob_last_error());
    if (rc == 0) {
        ob_gguf *g = NULL;
        CHECK_OK(ob_gguf_open(out, &g));
        const char *arch = NULL;
        float f = 0;
        if (g) {
            CHECK_OK(ob_gguf_get_str(g, "general.architecture", &arch));
            CHECK_EQ_STR(arch, "granite");
            CHECK_OK(ob_gguf_get_f32(g, "granite.logit_scale", &f));
            CHECK(f == 2.0f);
            CHECK_OK(ob_gguf_get_f32(g, "granite.attention.scale", &f));
            CHECK(f == 0.25f);
            ob_gguf_free(g);
        }
        run_out r;
        memset(&r, 0, sizeof r);
        if (run_engine(out, &fx, &r)) {
            for (size_t i = 0; i < (size_t)N_PROMPT * (size_t)fx.n_vocab; i++) r.logits[i] *= 2.0f;
            const ref_case gc = {"granite_as_llama", "granite", 16, false, false, false, true, NULL, 0, 2, NULL};
            compare(&gc, &fx, OB_TYPE_F32, &r, NULL);
        }
        free(r.logits);
        unlink(out);
    }
    for (size_t i = 0; i < OB_ARRAY_LEN(files); i++) {
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        unlink(to);
    }
    snprintf(to, sizeof to, "%s/config.json", dir);
    unlink(to);
    rmdir(dir);
    free(fx.logits);
}

/* tests/data/models/<name> copied to `dir` with config.json's keys updated
 * by `changes` (stolen). */
static bool copy_case_with(const char *name, const char *dir, json_t *changes) {
    char src[1024], from[1300], to[1300];
    snprintf(src, sizeof src, "%s/tests/data/models/%s", OB_SOURCE_DIR, name);
    bool ok = mkdir(dir, 0755) == 0;
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; ok && i < OB_ARRAY_LEN(files); i++) {
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        ok = copy_file(from, to);
    }
    snprintf(from, sizeof from, "%s/config.json", src);
    json_t *cfg = ok ? json_load_file(from, 0, NULL) : NULL;
    if (cfg) json_object_update(cfg, changes);
    json_decref(changes);
    snprintf(to, sizeof to, "%s/config.json", dir);
    ok = cfg && json_dump_file(cfg, to, 0) == 0;
    json_decref(cfg);
    CHECK_MSG(ok, "cannot copy %s to %s", src, dir);
    return ok;
}

static void remove_case_copy(const char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    char p[1300];
    for (size_t i = 0; i < OB_ARRAY_LEN(files); i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* InternLM2.5's dynamic NTK scaling raises the RoPE base only past
 * max_position_embeddings (256 here); below it transformers computes plain
 * RoPE, so the file carries no scaling and the internlm2 reference holds. */
TEST(internlm2_rope_dynamic) {
    const ref_case *c = NULL;
    for (size_t i = 0; i < OB_ARRAY_LEN(CASES); i++)
        if (!strcmp(CASES[i].name, "internlm2")) c = &CASES[i];
    fixture fx;
    if (!c || !load_fixture(c, &fx)) {
        CHECK(c != NULL);
        if (c) free(fx.logits);
        return;
    }
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/ob_models_ref_%d_internlm2_dynamic", (int)getpid());
    json_t *dyn = json_pack("{s:{s:s, s:f}}", "rope_scaling", "type", "dynamic", "factor", 2.0);
    if (copy_case_with("internlm2", dir, dyn)) {
        ref_case dc = *c;
        dc.name = "internlm2_rope_dynamic";
        snprintf(fx.dir, sizeof fx.dir, "%s", dir);
        run_fixture(&dc, &fx);
    }
    remove_case_copy(dir);
    free(fx.logits);
}

/* What llama.cpp's internlm2 cannot carry is refused, naming the key. */
TEST(internlm2_refusals) {
    static const struct {
        const char *changes, *says;
        int rc;
    } bad[] = {
        {"{\"bias\": true}", "bias", OB_ERR_UNSUPPORTED},
        {"{\"tie_word_embeddings\": true}", "tie_word_embeddings", OB_ERR_UNSUPPORTED},
        {"{\"head_dim\": 32}", "head_dim", OB_ERR_FORMAT},
        {"{\"hidden_act\": \"gelu\"}", "hidden_act", OB_ERR_UNSUPPORTED},
        {"{\"rope_scaling\": {\"type\": \"ntk\", \"factor\": 2.0}}", "ntk", OB_ERR_UNSUPPORTED},
        {"{\"num_key_value_heads\": 3}", "num_key_value_heads", OB_ERR_FORMAT},
        /* 1 KV head: wqkv would have 96 rows; the file's has 128 */
        {"{\"num_key_value_heads\": 1}", "attention.wqkv.weight", OB_ERR_FORMAT},
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(bad); i++) {
        char dir[256], out[300];
        snprintf(dir, sizeof dir, "/tmp/ob_models_ref_%d_internlm2_refuse%zu", (int)getpid(), i);
        if (copy_case_with("internlm2", dir, json_loads(bad[i].changes, 0, NULL))) {
            snprintf(out, sizeof out, "%s.gguf", dir);
            int rc = ob_convert_hf(dir, out, NULL);
            CHECK_MSG(rc == bad[i].rc, "internlm2 with %s: rc %d, want %d (%s)", bad[i].changes, rc, bad[i].rc,
                      ob_last_error());
            CHECK_MSG(strstr(ob_last_error(), bad[i].says) != NULL, "internlm2 with %s: '%s' does not say '%s'",
                      bad[i].changes, ob_last_error(), bad[i].says);
            unlink(out);
        }
        remove_case_copy(dir);
    }
}

/* What the GGUF forms cannot carry is refused, naming the key: the fixture
 * of `case_name` with config.json's keys changed as `changes` says (an
 * object, stolen) must not convert: OB_ERR_UNSUPPORTED, naming `key`. */
static void expect_refused(const char *case_name, json_t *changes, const char *key) {
    char src[1024], dir[256], from[1300], to[1300], out[300];
    snprintf(src, sizeof src, "%s/tests/data/models/%s", OB_SOURCE_DIR, case_name);
    snprintf(dir, sizeof dir, "/tmp/ob_models_ref_%d_refused_%s", (int)getpid(), case_name);
    CHECK(mkdir(dir, 0755) == 0);
    static const char *files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < OB_ARRAY_LEN(files); i++) {
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        CHECK_MSG(copy_file(from, to), "copy %s", from);
    }
    snprintf(from, sizeof from, "%s/config.json", src);
    json_t *cfg = json_load_file(from, 0, NULL);
    CHECK(cfg != NULL);
    if (cfg) json_object_update(cfg, changes);
    json_decref(changes);
    snprintf(to, sizeof to, "%s/config.json", dir);
    CHECK(cfg && json_dump_file(cfg, to, 0) == 0);
    json_decref(cfg);
    snprintf(out, sizeof out, "%s.gguf", dir);
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_F32;
    int rc = ob_convert_hf(dir, out, &o);
    CHECK_MSG(rc == OB_ERR_UNSUPPORTED, "%s with %s changed: rc %d (%s)", case_name, key, rc, ob_last_error());
    CHECK_MSG(strstr(ob_last_error(), key) != NULL, "message does not name %s: %s", key, ob_last_error());
    unlink(out);
    for (size_t i = 0; i < OB_ARRAY_LEN(files); i++) {
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        unlink(to);
    }
    snprintf(to, sizeof to, "%s/config.json", dir);
    unlink(to);
    rmdir(dir);
}

TEST(llama_variants_refuse_what_gguf_cannot_carry) {
    /* NoPE on layer 2, not 3; then the period 2 that transformers derives the list from when it is null */
    expect_refused("smollm3", json_pack("{s:[iiii]}", "no_rope_layers", 1, 1, 0, 1), "no_rope_layers");
    expect_refused("smollm3", json_pack("{s:n, s:i}", "no_rope_layers", "no_rope_layer_interval", 2),
                   "no_rope_layer_interval");
    expect_refused("olmo", json_pack("{s:f}", "clip_qkv", 8.0), "clip_qkv");
    expect_refused("olmoe", json_pack("{s:f}", "clip_qkv", 8.0), "clip_qkv");
    expect_refused("arcee", json_pack("{s:b}", "mlp_bias", 1), "mlp_bias");
    expect_refused("ernie4_5", json_pack("{s:b}", "use_bias", 1), "use_bias");
    expect_refused("bitnet", json_pack("{s:{s:s}}", "quantization_config", "quant_method", "bitnet"),
                   "quantization_config");
    expect_refused("bitnet", json_pack("{s:b}", "attention_bias", 1), "attention_bias");
    expect_refused("bitnet", json_pack("{s:s}", "hidden_act", "silu"), "hidden_act");
}

/* The case called `name` (cases added later are found by name, not index). */
static void run_named(const char *name) {
    for (size_t i = 0; i < OB_ARRAY_LEN(CASES); i++)
        if (!strcmp(CASES[i].name, name)) {
            run_case(&CASES[i]);
            return;
        }
    CHECK_MSG(false, "no case %s", name);
}

TEST(llama) { run_case(&CASES[0]); }
TEST(llama_tied) { run_case(&CASES[1]); }
TEST(llama_rope_linear) { run_case(&CASES[2]); }
TEST(llama_rope_yarn) { run_case(&CASES[3]); }
TEST(llama_rope_llama3) { run_case(&CASES[4]); }
TEST(mistral_swa) { run_case(&CASES[5]); }
TEST(qwen2) { run_case(&CASES[6]); }
TEST(qwen3) { run_case(&CASES[7]); }
TEST(qwen3_tied) { run_case(&CASES[8]); }
TEST(gemma) { run_case(&CASES[9]); }
TEST(gemma2) { run_case(&CASES[10]); }
TEST(gemma3) { run_case(&CASES[11]); }
TEST(phi3) { run_case(&CASES[12]); }
TEST(phi2) { run_case(&CASES[13]); }
TEST(qwen3moe) { run_case(&CASES[14]); }
TEST(qwen2moe) { run_case(&CASES[15]); }
TEST(mixtral) { run_case(&CASES[16]); }
TEST(granite) { run_named("granite"); }
TEST(olmo2) { run_named("olmo2"); }
TEST(smollm3) { run_named("smollm3"); }
TEST(arcee) { run_named("arcee"); }
TEST(ernie4_5) { run_named("ernie4_5"); }
TEST(seed_oss) { run_named("seed_oss"); }
TEST(olmo) { run_named("olmo"); }
TEST(glm4) { run_named("glm4"); }
TEST(olmoe) { run_named("olmoe"); }
TEST(granitemoe) { run_named("granitemoe"); }
TEST(internlm2) { run_named("internlm2"); }
TEST(internlm2_rope_linear) { run_named("internlm2_rope_linear"); }

/* GPT-lineage configs the converter does not write refuse with the key named. */
TEST(gptlike_refusals) {
    static const struct {
        const char *fixture, *key, *value; /* value NULL: the key removed */
        int rc;
        const char *says;
    } bad[] = {
        {"falcon", "alibi", "true", OB_ERR_UNSUPPORTED, "alibi"},
        {"falcon", "new_decoder_architecture", "true", OB_ERR_UNSUPPORTED, "new_decoder_architecture"},
        {"stablelm", "qk_layernorm", "true", OB_ERR_UNSUPPORTED, "qk_layernorm"},
        {"cohere", "use_qk_norm", "true", OB_ERR_UNSUPPORTED, "use_qk_norm"},
        {"gpt2", "scale_attn_by_inverse_layer_idx", "true", OB_ERR_UNSUPPORTED, "scale_attn_by_inverse_layer_idx"},
        {"nemotron", "hidden_act", "\"gelu\"", OB_ERR_UNSUPPORTED, "hidden_act"},
        {"gptneox", "rope_parameters", "{\"rope_type\": \"linear\", \"factor\": 2.0}", OB_ERR_UNSUPPORTED, "RoPE"},
        {"gpt2", "n_embd", NULL, OB_ERR_FORMAT, "n_embd"},
        {"gptj", "rotary_dim", "17", OB_ERR_FORMAT, "rotated dimensions"},
        {"opt", "do_layer_norm_before", "false", OB_ERR_UNSUPPORTED, "do_layer_norm_before"},
        {"opt", "word_embed_proj_dim", "32", OB_ERR_UNSUPPORTED, "word_embed_proj_dim"},
        {"opt", "activation_function", "\"gelu\"", OB_ERR_UNSUPPORTED, "activation_function"},
        {"bloom", "apply_residual_connection_post_layernorm", "true", OB_ERR_UNSUPPORTED,
         "apply_residual_connection_post_layernorm"},
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(bad); i++) {
        char dir[256], p[1200], out[300];
        snprintf(dir, sizeof dir, "/tmp/ob_models_ref_%d_refuse%zu", (int)getpid(), i);
        CHECK(mkdir(dir, 0755) == 0);
        snprintf(p, sizeof p, "%s/tests/data/models/%s/config.json", OB_SOURCE_DIR, bad[i].fixture);
        json_t *cfg = json_load_file(p, 0, NULL);
        CHECK_MSG(cfg != NULL, "%s", p);
        if (!cfg) continue;
        if (bad[i].value)
            json_object_set_new(cfg, bad[i].key, json_loads(bad[i].value, JSON_DECODE_ANY, NULL));
        else
            json_object_del(cfg, bad[i].key);
        snprintf(p, sizeof p, "%s/config.json", dir);
        CHECK(json_dump_file(cfg, p, 0) == 0);
        json_decref(cfg);
        snprintf(out, sizeof out, "%s.gguf", dir);
        int rc = ob_convert_hf(dir, out, NULL);
        CHECK_MSG(rc == bad[i].rc, "%s with %s: rc %d, want %d (%s)", bad[i].fixture, bad[i].key, rc, bad[i].rc,
                  ob_last_error());
        CHECK_MSG(strstr(ob_last_error(), bad[i].says) != NULL, "%s with %s: '%s' does not say '%s'", bad[i].fixture,
                  bad[i].key, ob_last_error(), bad[i].says);
        unlink(p);
        unlink(out);
        rmdir(dir);
    }
}

/* GPT lineage (gptlike.c) */
TEST(deepseek_v3) { run_named("deepseek_v3"); }
/* What the deepseek2 form (or our loader) cannot carry: another rope pairing,
 * softmax routing, YaRN with its softmax mscale. */
TEST(deepseek_refusals) {
    expect_refused("deepseek_v3", json_pack("{s:b}", "rope_interleave", 0), "rope_interleave");
    expect_refused("deepseek_v3", json_pack("{s:s}", "scoring_func", "softmax"), "scoring_func");
    expect_refused("deepseek_v3",
                   json_pack("{s:{s:s, s:f, s:f, s:i}}", "rope_parameters", "rope_type", "yarn", "rope_theta", 10000.0,
                             "factor", 4.0, "original_max_position_embeddings", 64),
                   "RoPE scaling");
}
TEST(stablelm) { run_named("stablelm"); }
TEST(gptneox) { run_named("gptneox"); }
TEST(gpt2) { run_named("gpt2"); }
TEST(starcoder2) { run_named("starcoder2"); }
TEST(gpt_bigcode) { run_named("gpt_bigcode"); }
TEST(falcon) { run_named("falcon"); }
TEST(gptj) { run_named("gptj"); }
TEST(cohere) { run_named("cohere"); }
TEST(nemotron) { run_named("nemotron"); }
/* OPT, CodeGen, BLOOM (gptlike.c; CodeGen as gptj) and BitNet (llama_variants.c) */
TEST(opt) { run_named("opt"); }
TEST(codegen) { run_named("codegen"); }
TEST(bloom) { run_named("bloom"); }
TEST(bloom_h6) { run_named("bloom_h6"); }
TEST(bitnet) { run_named("bitnet"); }

/* BitNet through `1bit quantize` TQ1_0 / TQ2_0. Both formats pack blocks of
 * 256 weights, and the fixture's rows are 64 (hidden) and 128 (MLP) long, so
 * quantizing its file as it is gives every projection the fallback type
 * (Q4_0), which is not exact for ternary weights. The test therefore widens
 * the converted F32 file into an exactly equivalent model whose rows are
 * whole blocks: hidden 64 -> 256, MLP 128 -> 512, 4 -> 16 heads and 2 -> 8
 * KV heads (head_dim 16 and the GQA grouping kept), every added row, column,
 * head and norm weight zero. Zero heads attend to zero values and add
 * nothing; every RMSNorm then averages over 4x as many elements, of which
 * the added are zero, so its weights are halved and the epsilon quartered
 * (both exact in binary): rms over 4n with eps / 4 is half the rms over n
 * with eps. The widened F32 file must give transformers' logits within the
 * F32 bound. Its TQ1_0 and TQ2_0 files (token_embd and output kept F32) must
 * hold the projections bit-exactly: each tensor is TQ and dequantizes to the
 * F32 weights (ternary times the tensor's fp16-exact scale: the block scale
 * is that scale). What still differs is the activations: a TQ matmul rounds
 * its input to 8 bits per block of 256 (Q8_K, step amax / 127), an rms
 * relative error u = (amax / rms) / (127 sqrt 12) of the block's nonzero
 * values; for 64 to 128 Gaussian-like values amax / rms is about 2.6, so u
 * is about 6e-3, just above Q8_0 weights' 4.8e-3, and the bounds are the
 * same multiples (25 u mean, 100 u worst position) as for the weight formats
 * (tol_of). */
static float *widen(const float *src, int64_t ne0, int64_t ne1, int64_t to0, int64_t to1, float scale) {
    float *d = calloc((size_t)(to0 * to1), sizeof(float));
    for (int64_t r = 0; d && r < ne1; r++)
        for (int64_t i = 0; i < ne0; i++) d[r * to0 + i] = src[r * ne0 + i] * scale;
    return d;
}

static bool widen_bitnet(const char *in, const char *out) {
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open(in, &g));
    if (!g) return false;
    ob_gguf_writer *w = NULL;
    CHECK_OK(ob_gguf_writer_create(&w));
    bool ok = w != NULL;
    for (int64_t i = 0; ok && i < ob_gguf_n_kv(g); i++) {
        const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        ok = ob_gguf_writer_set_value(w, kv->key, &kv->value) == 0;
    }
    float eps = 0;
    CHECK_OK(ob_gguf_get_f32(g, "bitnet.attention.layer_norm_rms_epsilon", &eps));
    ok = ok && ob_gguf_writer_set_u32(w, "bitnet.embedding_length", 256) == 0 &&
         ob_gguf_writer_set_u32(w, "bitnet.feed_forward_length", 512) == 0 &&
         ob_gguf_writer_set_u32(w, "bitnet.attention.head_count", 16) == 0 &&
         ob_gguf_writer_set_u32(w, "bitnet.attention.head_count_kv", 8) == 0 &&
         ob_gguf_writer_set_f32(w, "bitnet.attention.layer_norm_rms_epsilon", eps / 4) == 0;
    float *bufs[64];
    int nb = 0;
    for (int64_t i = 0; ok && i < ob_gguf_n_tensors(g) && nb < 64; i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        CHECK_MSG(t->type == OB_TYPE_F32, "%s is not F32", t->name);
        const bool norm = strstr(t->name, "_norm.") != NULL;
        /* the widened size of each dimension: 64 -> 256 (hidden, q), 32 -> 128 (k, v), 128 -> 512 (MLP) */
        int64_t to[2];
        for (int d = 0; d < 2; d++) to[d] = t->ne[d] == 384 || t->ne[d] == 1 ? t->ne[d] : 4 * t->ne[d];
        float *d = bufs[nb++] = widen(t->data, t->ne[0], t->ne[1], to[0], to[1], norm ? 0.5f : 1.0f);
        ok = d && ob_gguf_writer_add_tensor(w, t->name, OB_TYPE_F32, t->n_dims, to, d) == 0;
    }
    ok = ok && ob_gguf_writer_write_file(w, out) == 0;
    CHECK_MSG(ok, "widening %s: %s", in, ob_last_error());
    ob_gguf_writer_free(w);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    ob_gguf_free(g);
    return ok;
}

TEST(bitnet_tq) {
    const ref_case *c = NULL;
    for (size_t i = 0; i < OB_ARRAY_LEN(CASES); i++)
        if (!strcmp(CASES[i].name, "bitnet")) c = &CASES[i];
    fixture fx;
    if (!c || !load_fixture(c, &fx)) {
        CHECK(c != NULL);
        free(fx.logits);
        return;
    }
    char f32[256], wide[256], tq[256];
    snprintf(f32, sizeof f32, "/tmp/ob_models_ref_%d_bitnet_tq_f32.gguf", (int)getpid());
    snprintf(wide, sizeof wide, "/tmp/ob_models_ref_%d_bitnet_tq_wide.gguf", (int)getpid());
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_F32;
    CHECK_OK(ob_convert_hf(fx.dir, f32, &o));
    run_out ref;
    memset(&ref, 0, sizeof ref);
    if (widen_bitnet(f32, wide) && run_engine(wide, &fx, &ref)) compare(c, &fx, OB_TYPE_F32, &ref, NULL);
    static const char *const mixes[] = {"TQ1_0", "TQ2_0"};
    for (size_t mi = 0; ref.logits && mi < OB_ARRAY_LEN(mixes); mi++) {
        const ob_ftype_info *mix = ob_ftype_find(mixes[mi]);
        CHECK(mix != NULL);
        if (!mix) continue;
        snprintf(tq, sizeof tq, "/tmp/ob_models_ref_%d_bitnet_%s.gguf", (int)getpid(), mixes[mi]);
        ob_quantize_params qp;
        ob_quantize_params_init(&qp);
        qp.n_threads = 1;
        qp.embd_type = OB_TYPE_F32;
        qp.output_type = OB_TYPE_F32;
        ob_quantize_stats st;
        CHECK_OK(ob_quantize_file(wide, tq, mix, &qp, &st));
        CHECK_EQ_INT(st.n_fallback, 0);
        /* every projection is TQ and decodes to the F32 weights exactly */
        ob_gguf *gq = NULL, *gw = NULL;
        CHECK_OK(ob_gguf_open(tq, &gq));
        CHECK_OK(ob_gguf_open(wide, &gw));
        int n_proj = 0, bad = 0;
        for (int64_t i = 0; gq && gw && i < ob_gguf_n_tensors(gq); i++) {
            const ob_gguf_tensor *t = ob_gguf_tensor_at(gq, i), *src = ob_gguf_find_tensor(gw, t->name);
            if (!strncmp(t->name, "blk.", 4) && !strstr(t->name, "_norm.")) {
                n_proj++;
                CHECK_MSG(t->type == mix->base, "%s is %s, want %s", t->name, ob_type_name(t->type),
                          ob_type_name(mix->base));
                if (t->type != mix->base || !src) continue;
                const int64_t n = ob_gguf_tensor_nelements(t);
                float *dq = malloc((size_t)n * sizeof(float));
                ob_type_get((int)t->type)->to_float(t->data, dq, n);
                const float *sw = src->data;
                int64_t off = 0; /* == rather than memcmp: torch's round gives -0.0, the blocks +0.0 */
                for (int64_t k = 0; k < n; k++) off += dq[k] != sw[k];
                bad += off != 0;
                free(dq);
            }
        }
        CHECK_EQ_INT(n_proj, 2 * 7);
        CHECK_MSG(bad == 0, "%s: %d projections do not decode to their F32 weights", mixes[mi], bad);
        ob_gguf_free(gq);
        ob_gguf_free(gw);
        run_out r;
        memset(&r, 0, sizeof r);
        if (run_engine(tq, &fx, &r)) compare(c, &fx, mix->base, &r, &ref);
        free(r.logits);
        unlink(tq);
    }
    free(ref.logits);
    free(fx.logits);
    unlink(f32);
    unlink(wide);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
