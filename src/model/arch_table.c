/*
 * arch_table.c - the registry's account of every architecture (arch_info.h):
 * `1bit models` prints it and docs/models.md's table is its markdown, so the
 * two cannot disagree. tests/test_models_registry.c checks each row against
 * the code: a verified or mapped row has a loader and a missing one has
 * none, a verified row's cases exist in tests/data/models with the stated
 * transformers version and are run by test_models_ref.c (and test_cuda.c for
 * the CUDA mark).
 *
 * The measured worst F32 errors are copied from
 * `OB_TEST_VERBOSE=1 build/bin/test_models_ref` (the largest "f32 ... max"
 * over a row's cases; at 0085dab, CPU tier avx512); the bound, top-1 and
 * greedy counts are what that test requires of F32 weights at every one of
 * its 64 positions and 32 generated tokens, so a passing `make test` holds
 * them. CUDA: test_cuda.c runs every fixture folder on the GPU (the Llama
 * family against transformers at every weight type, the others F32 against
 * transformers and every type against the CPU backend; all passed on the
 * H200, 2026-11-30 session 4, docs/cuda.md; internlm2 and the encoders
 * (model_encoders_vs_cpu: hidden states against the CPU) in session 7).
 */
#include "arch_info.h"

#define TF "transformers 5.17.0"
#define F32_BOUND 1e-4
#define CPU OB_ARCH_ON_CPU
#define CUDA OB_ARCH_ON_CUDA
/* a verified row: reference, cases, F32 bound and measured worst, top-1 64/64, greedy 32/32, backends */
#define VERIFIED(ref, cases, worst, on) OB_ARCH_VERIFIED, ref, cases, F32_BOUND, worst, 64, 64, 32, 32, on
/* a verified encoder: hidden states at all 64 positions within the bound, no generation (n_gen 0) */
#define ENCODER(ref, cases, worst, on) OB_ARCH_VERIFIED, ref, cases, F32_BOUND, worst, 64, 64, 0, 0, on
#define MAPPED OB_ARCH_MAPPED, NULL, NULL, 0, 0, 0, 0, 0, 0, 0
#define MISSING OB_ARCH_MISSING, NULL, NULL, 0, 0, 0, 0, 0, 0, 0
#define NOT_RUN "no loader; scripts/gen_model_fixtures.py has a case for it, not yet run"

static const ob_arch_info g_rows[] = {
    {"llama", NULL, "Llama 2, Llama 3.x (rope_freqs), Mistral (sliding window), SmolLM, TinyLlama",
     VERIFIED(TF "; float64 reference (stories260K)",
              "llama llama_tied llama_rope_linear llama_rope_yarn llama_rope_llama3 mistral_swa", 5.51e-6, CPU | CUDA),
     "plain, tied, linear/YaRN/Llama-3 RoPE scaling, Mistral with a 16-token window under the 64-token prompt; "
     "stories260K (trained weights) within 1e-4 of a float64 reference, greedy 200 tokens equal to llama2.c "
     "(test_engine)"},
    {"qwen2", NULL, "Qwen2, Qwen2.5 (q/k/v biases, NeoX RoPE)", VERIFIED(TF, "qwen2", 4.59e-6, CPU | CUDA),
     "q/k/v biases"},
    {"qwen3", NULL, "Qwen3 dense (per-head q/k RMSNorm, NeoX RoPE, head_dim != n_embd/n_head)",
     VERIFIED(TF, "qwen3 qwen3_tied", 2.38e-6, CPU | CUDA), "separate and tied embeddings, head_dim 32"},
    {"gemma", NULL, "Gemma 1 ((1 + w) RMSNorm, embeddings times sqrt(n_embd), GeGLU, tied)",
     VERIFIED(TF, "gemma", 7.15e-6, CPU | CUDA), "tanh GELU, NeoX RoPE"},
    {"gemma2", NULL, "Gemma 2 (post-norms, attention and final soft-capping, sliding window on alternate layers)",
     VERIFIED(TF, "gemma2", 3.82e-6, CPU | CUDA), "window 16 under a 64-token prompt, caps 2 and 4, query_pre_attn_scalar 24"},
    {"gemma3", NULL, "Gemma 3 text (q/k norms, 5 local : 1 global layers, local RoPE base)",
     VERIFIED(TF, "gemma3", 6.92e-6, CPU | CUDA), "6 layers, window 16, global base 1e6 with linear factor 2"},
    {"phi2", NULL, "Phi-2 (LayerNorm with bias, parallel attention + MLP, partial rotary, biased output)",
     VERIFIED(TF, "phi2", 1.05e-6, CPU | CUDA), "partial rotary 0.5 (8 of 16 dims), tanh GELU"},
    {"phi3", NULL, "Phi-3 / 3.5 / Phi-4-mini (fused qkv and gate+up, LongRoPE)", VERIFIED(TF, "phi3", 3.84e-6, CPU | CUDA),
     "distinct short/long LongRoPE factors, original context 128 of 256"},
    {"qwen3moe", NULL, "Qwen3-MoE (Qwen3-30B-A3B family): softmax then top-k, renormalised",
     VERIFIED(TF, "qwen3moe", 1.26e-6, CPU | CUDA), "8 experts of width 32, top-2"},
    {"qwen2moe", NULL, "Qwen1.5/Qwen2-MoE: top-k not renormalised, shared expert behind a sigmoid gate",
     VERIFIED(TF, "qwen2moe", 3.06e-6, CPU | CUDA), "8 experts, top-2, shared expert 64"},
    {"mixtral", "llama", "Mixtral: `llama` with `expert_count` (as llama.cpp writes it), run by moe.c",
     VERIFIED(TF, "mixtral", 2.86e-6, CPU | CUDA), "4 experts of width 128, top-2"},
    {"granite", NULL, "IBM Granite 3.x dense: Llama layout with embedding, residual, attention and logit multipliers",
     VERIFIED(TF, "granite", 1.18e-6, CPU | CUDA),
     "embedding 3, residual 0.5, attention 0.1, logits scaling 2; also the llama fixture under a Granite "
     "config.json (test_models_ref: granite_as_llama)"},
    {"olmo2", NULL, "OLMo 2: norms after attention and MLP only, q/k RMSNorm over the whole projections, NeoX RoPE",
     VERIFIED(TF, "olmo2", 1.22e-6, CPU | CUDA), "run by llama_variants.c"},
    {"smollm3", NULL, "SmolLM3: Llama with RoPE skipped on every 4th layer (NoPE), tied",
     VERIFIED(TF, "smollm3", 4.10e-6, CPU | CUDA), "4 layers, layer 3 without RoPE"},
    {"arcee", NULL, "Arcee (AFM): Llama with an ungated squared-ReLU MLP (up, down)",
     VERIFIED(TF, "arcee", 1.73e-6, CPU | CUDA), "relu2"},
    {"ernie4_5", NULL, "ERNIE 4.5 dense: Llama layout with interleaved RoPE pairs (q/k rows kept as in HF)",
     VERIFIED(TF, "ernie4_5", 1.92e-6, CPU | CUDA), "tied; use_bias false"},
    {"seed_oss", NULL, "Seed-OSS: Llama with q/k/v biases, NeoX RoPE",
     VERIFIED(TF, "seed_oss", 2.86e-6, CPU | CUDA), "pre-MLP norm is llama.cpp's post_attention_norm"},
    {"olmo", NULL, "OLMo (1): LayerNorm without weight or bias, eps 1e-5", VERIFIED(TF, "olmo", 1.98e-6, CPU | CUDA),
     "clip_qkv null (a set clip_qkv is refused by the converter)"},
    {"glm4", NULL, "GLM-4 (0414): sandwich post-norms, fused gate_up, q/k/v biases, interleaved partial RoPE",
     VERIFIED(TF, "glm4", 2.41e-6, CPU | CUDA), "partial rotary 0.5 (8 of 16 dims)"},
    {"olmoe", NULL, "OLMoE: softmax then top-k, not renormalised; q/k RMSNorm over the whole projections",
     VERIFIED(TF, "olmoe", 1.74e-6, CPU | CUDA), "8 experts of width 32, top-2; run by moe.c"},
    {"granitemoe", NULL, "IBM Granite 3.x MoE: Granite's four multipliers around top-k experts (renormalised)",
     VERIFIED(TF, "granitemoe", 1.03e-6, CPU | CUDA),
     "4 experts of width 32, top-2; input_linear split into gate and up experts, as llama.cpp"},
    {"deepseek2", NULL,
     "DeepSeek-V3 / R1 / Kimi-K2 (multi-head latent attention over a compressed cache, leading dense layers, "
     "grouped sigmoid routing with a correction bias, shared experts)",
     VERIFIED(TF, "deepseek_v3", 1.31e-5, CPU | CUDA),
     "MLA in llama.cpp's absorbed form (attn_k_b / attn_v_b), 8 experts of width 32 in 2 groups, top-2, scale 2.5, "
     "1 shared; run by deepseek2.c. Not yet: YaRN (DeepSeek's mscale), DeepSeek-V2 softmax routing, CUDA"},
    {"bitnet", NULL,
     "BitNet b1.58 (transformers' BitNetForCausalLM: Llama layout, RMSNorm before o_proj and before down_proj, "
     "relu2(gate) * up, ternary weights)",
     VERIFIED(TF, "bitnet", 1.44e-6, CPU | CUDA),
     "NeoX RoPE, 2 KV heads, untied; also TQ1_0/TQ2_0 (bitnet_tq: weights exact, 8-bit activations, worst 0.048); "
     "run by llama_variants.c; quantization_config (BitLinear) refused"},
    {"internlm2", NULL,
     "InternLM2 / InternLM2.5 (remote-code InternLM2ForCausalLM with Llama's math; q/k/v fused per KV group in "
     "attention.wqkv)",
     VERIFIED(TF " LlamaForCausalLM; weights repacked in InternLM2's layout", "internlm2 internlm2_rope_linear",
              3.39e-6, CPU | CUDA),
     "reference: transformers' Llama logits of the llama / llama_rope_linear fixtures, their weights repacked in "
     "InternLM2's names and wqkv layout (scripts/gen_internlm2_fixture.py; a pure-Python pass written from "
     "modeling_internlm2.py on the repacked files gives the same logits within 2.6e-6); wqkv split into "
     "attn_q/k/v with Llama's q/k permutation as llama.cpp; linear RoPE scaling, dynamic NTK as plain RoPE below "
     "max_position_embeddings (internlm2_rope_dynamic); bias and tied embeddings refused; run by llama.c"},
    /* GPT lineage (gptlike.c) */
    {"stablelm", NULL, "StableLM 2 / 3B-4E1T (LayerNorm with bias, gated SiLU MLP, partial NeoX rotary, q/k/v biases)",
     VERIFIED(TF, "stablelm", 2.87e-6, CPU | CUDA), "partial rotary 0.25 (4 of 16 dims), 2 KV heads, sequential residual"},
    {"gptneox", NULL, "GPT-NeoX, Pythia (fused per-head qkv, parallel residual with two norms, partial NeoX rotary)",
     VERIFIED(TF, "gptneox", 1.04e-6, CPU | CUDA),
     "partial rotary 0.25 (4 of 16 dims), erf GELU; qkv regrouped to [q | k | v] as llama.cpp writes it"},
    {"gpt2", NULL, "GPT-2 (learned positions, LayerNorm, fused c_attn, Conv1D weights stored [in, out])",
     VERIFIED(TF, "gpt2", 1.38e-6, CPU | CUDA), "Conv1D weights transposed by the converter, tied, tanh GELU"},
    {"starcoder2", NULL,
     "StarCoder2 (LayerNorm with bias, biases everywhere, NeoX RoPE, sliding window, c_fc/c_proj MLP)",
     VERIFIED(TF, "starcoder2", 1.46e-6, CPU | CUDA), "window 16 under the 64-token prompt, 2 KV heads, tanh GELU, tied"},
    {"starcoder", NULL, "GPTBigCode: StarCoder 1, SantaCoder (GPT-2 layout in nn.Linear form, multi-query attention)",
     VERIFIED(TF, "gpt_bigcode", 1.29e-6, CPU | CUDA), "one KV head (multi_query), learned positions, tanh GELU, tied"},
    {"falcon", NULL,
     "Falcon 7B layout (one LayerNorm feeding parallel attention and MLP, multi-query fused qkv, no biases)",
     VERIFIED(TF, "falcon", 9.03e-7, CPU | CUDA),
     "1 KV head, NeoX RoPE, erf GELU, tied; new_decoder_architecture (40B/180B), ALiBi and biases are refused"},
    {"gptj", NULL, "GPT-J (one LayerNorm, parallel attention + MLP, interleaved partial rotary, biased output)",
     VERIFIED(TF, "gptj", 1.11e-6, CPU | CUDA), "rotary_dim 8 of 16 (pairs 2i, 2i+1), gelu_new, lm_head bias"},
    {"command-r", NULL,
     "Cohere Command-R (LayerNorm without bias, parallel attention + SwiGLU, interleaved RoPE, logit_scale)",
     VERIFIED(TF, "cohere", 1.19e-6, CPU | CUDA), "logit_scale 0.25, 2 KV heads, tied; use_qk_norm (Command-R+) is refused"},
    {"nemotron", NULL,
     "Nemotron (LayerNorm1P with bias, stored as 1 + w; squared-ReLU MLP without gate; partial NeoX rotary)",
     VERIFIED(TF, "nemotron", 3.35e-6, CPU | CUDA), "partial rotary 0.5 (8 of 16 dims), head_dim given, 2 KV heads"},
    {"opt", NULL, "OPT (pre-LayerNorm, learned positions with HF's offset of 2 dropped by the converter, ReLU MLP)",
     VERIFIED(TF, "opt", 1.92e-6, CPU | CUDA),
     "biases everywhere, tied; opt-350m's post-LayerNorm and word_embed_proj_dim != hidden_size are refused"},
    {"codegen", "gptj", "CodeGen (GPT-J's block; qkv_proj in 4 model-parallel chunks of q, v, k)",
     VERIFIED(TF, "codegen", 1.25e-6, CPU | CUDA),
     "written as `gptj` with qkv_proj regrouped to attn_qkv [q | k | v]; rotary_dim 8 of 16, gelu_new, lm_head bias"},
    {"bloom", NULL, "BLOOM (ALiBi instead of positions, LayerNorm after the embeddings, per-head fused qkv)",
     VERIFIED(TF, "bloom bloom_h6", 1.86e-6, CPU | CUDA),
     "4 and 6 heads (6: the second ALiBi slope series), max bias 8 as llama.cpp; qkv regrouped to [q | k | v], "
     "tanh GELU, tied; apply_residual_connection_post_layernorm is refused"},
    /* (end of the GPT lineage) */
    /* encoders (bert.c): embeddings only (/v1/embeddings), fixtures in tests/data/encoders, run by
     * test_encoders.c; last_hidden_state compared at every position, no logits or generation */
    {"bert", NULL,
     "BERT encoders for embeddings (BertModel: post-LayerNorm, learned positions, token types, biases; "
     "sentence-transformers MiniLM/BGE/E5 style)",
     ENCODER(TF, "bert", 9.86e-7, CPU | CUDA),
     "hidden states of 64 positions vs last_hidden_state; WordPiece tokenizer as llama.cpp's bert vocab; "
     "mean pooling by default (or the sentence-transformers Pooling module); fixtures in tests/data/encoders"},
    {"modern-bert", NULL,
     "ModernBERT (pre-LayerNorm without biases, RoPE with a local base, global layers among two-sided "
     "sliding-window ones, GeGLU, final norm)",
     ENCODER(TF, "modernbert", 1.22e-6, CPU | CUDA),
     "4 layers, global every 2nd, window 16 (|i - j| <= 8), bases 160000 / 10000; byte-level BPE; CLS pooling "
     "by default (classifier_pooling); fixtures in tests/data/encoders"},
    {"nomic-bert", NULL, "nomic-embed-text v1/v1.5 (BERT with NeoX RoPE instead of positions, fused qkv, SwiGLU)",
     MAPPED,
     "bert.c loads llama.cpp's files (token_types, attn_qkv, ffn_gate/up/down, post-norms) and runs llama.cpp's "
     "graph; no converter (NomicBertModel is remote code), no reference; nomic-bert-moe not loaded"},
};

const ob_arch_info *ob_arch_infos(size_t *n) {
    *n = sizeof g_rows / sizeof g_rows[0];
    return g_rows;
}

const char *ob_arch_status_name(ob_arch_status s) {
    switch (s) {
    case OB_ARCH_VERIFIED: return "verified";
    case OB_ARCH_MAPPED: return "mapped";
    case OB_ARCH_MISSING: return "missing";
    }
    return "?";
}
