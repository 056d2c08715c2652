/*
 * convert.c - the HF -> GGUF converter: maps tensor names, checks shapes
 * against config.json, picks each tensor's output type, converts the data
 * and writes the file with the GGUF writer.
 *
 * Plan first, then write: every source tensor is mapped and shape-checked,
 * and the set is checked for completeness, before any byte is converted, so
 * a bad folder fails fast with the offending tensor named. Tensors whose
 * bytes do not change (same type, no permutation) are handed to the writer
 * straight from the safetensors mapping; the others are converted row by row
 * into a scratch area that lives until the file is written.
 *
 * Tensor names, keys and the q/k permutation follow llama.cpp's
 * convert_hf_to_gguf.py and gguf-py (tensor_mapping.py, constants.py).
 */
#include "convert.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../gguf/gguf.h"
#include "hf_encoder.h"
#include "hf_gptlike.h"
#include "hf_internal.h"
#include "safetensors.h"

#define SCRATCH_ALIGN 64 /* every converted tensor starts on a cache line (and a Q8_0 block) */

void ob_convert_opts_init(ob_convert_opts *opts) {
    memset(opts, 0, sizeof *opts);
    opts->outtype = OB_TYPE_F16;
}

long long ob_convert_qk_src_row(long long r, long long rows, long long n_head) {
    long long hd = rows / n_head, half = hd / 2;
    long long h = r / hd, k = r % hd;
    /* Output row k of a head is pair k/2, element k%2; HF keeps element 0 of
     * every pair in the first half of the head and element 1 in the second. */
    return h * hd + (k % 2) * half + k / 2;
}

/* Which part of the model a tensor is; orders the output like llama.cpp
 * (embeddings, then each block, then the head). */
typedef enum slot {
    S_TOKEN_EMBD,
    S_POS_EMBD,
    S_TOKEN_TYPES,       /* bert's token type embeddings */
    S_TOKEN_EMBD_NORM,   /* bloom's LayerNorm after the embeddings */
    S_TOKEN_EMBD_NORM_B,
    S_ROPE_FREQS,
    S_ROPE_FACTORS_LONG,
    S_ROPE_FACTORS_SHORT,
    S_ATTN_NORM,
    S_ATTN_NORM_B,
    S_ATTN_QKV,
    S_ATTN_QKV_B,
    S_ATTN_Q,
    S_ATTN_Q_B,
    S_ATTN_K,
    S_ATTN_K_B,
    S_ATTN_V,
    S_ATTN_V_B,
    S_ATTN_O,
    S_ATTN_O_B,
    S_ATTN_OUT_NORM,     /* bert's post-attention LayerNorm */
    S_ATTN_OUT_NORM_B,
    S_ATTN_Q_NORM,
    S_ATTN_K_NORM,
    S_MLA_Q_A,      /* DeepSeek's multi-head latent attention (hf_deepseek.c) */
    S_MLA_Q_A_NORM,
    S_MLA_Q_B,
    S_MLA_KV_A,
    S_MLA_KV_A_NORM,
    S_MLA_K_B,      /* kv_b_proj's k rows, transposed per head */
    S_MLA_V_B,      /* kv_b_proj's v rows */
    S_ATTN_POST_NORM,
    S_ATTN_SUB_NORM, /* bitnet: RMSNorm of the attention output before o_proj */
    S_FFN_NORM,
    S_FFN_NORM_B,
    S_FFN_GATE_UP,
    S_FFN_GATE,
    S_FFN_GATE_B,
    S_FFN_UP,
    S_FFN_UP_B,
    S_FFN_DOWN,
    S_FFN_DOWN_B,
    S_FFN_GATE_INP,
    S_FFN_EXP_PROBS_B, /* DeepSeek's e_score_correction_bias */
    S_FFN_GATE_EXPS,
    S_FFN_UP_EXPS,
    S_FFN_DOWN_EXPS,
    S_FFN_GATE_INP_SHEXP,
    S_FFN_GATE_SHEXP,
    S_FFN_UP_SHEXP,
    S_FFN_DOWN_SHEXP,
    S_FFN_SUB_NORM, /* bitnet: RMSNorm of act(gate) * up before down_proj */
    S_LAYER_OUT_NORM,   /* bert's post-MLP LayerNorm */
    S_LAYER_OUT_NORM_B,
    S_FFN_POST_NORM,
    S_OUTPUT_NORM,
    S_OUTPUT_NORM_B,
    S_OUTPUT,
    S_OUTPUT_B,
    S_COUNT,
} slot;

typedef enum dimkind { D_NONE, D_VOCAB, D_EMBD, D_FF, D_Q, D_KV, D_HD, D_QKV, D_FF2, D_NEXP, D_FFEXP, D_FFSH, D_ONE,
                       D_QLORA, D_KVA, D_KVLORA, D_KVB /* DeepSeek MLA */ } dimkind;

static const struct {
    const char *hf;   /* suffix after "model.layers.N." (per-layer) or full name */
    const char *gguf; /* "blk.%d." is prepended for per-layer slots */
    dimkind d0, d1;   /* expected shape, PyTorch order (rows, cols); D_NONE: 1-D */
} g_slots[S_COUNT] = {
    [S_TOKEN_EMBD] = {"model.embed_tokens.weight", "token_embd.weight", D_VOCAB, D_EMBD},
    [S_POS_EMBD] = {NULL, "position_embd.weight", D_NONE, D_NONE}, /* GPT lineage (hf_gptlike.c) */
    [S_TOKEN_TYPES] = {NULL, "token_types.weight", D_NONE, D_NONE}, /* encoders (hf_encoder.c) */
    [S_TOKEN_EMBD_NORM] = {NULL, "token_embd_norm.weight", D_NONE, D_NONE}, /* bloom (hf_gptlike.c) */
    [S_TOKEN_EMBD_NORM_B] = {NULL, "token_embd_norm.bias", D_NONE, D_NONE},
    [S_ROPE_FREQS] = {NULL, "rope_freqs.weight", D_NONE, D_NONE},
    [S_ROPE_FACTORS_LONG] = {NULL, "rope_factors_long.weight", D_NONE, D_NONE},
    [S_ROPE_FACTORS_SHORT] = {NULL, "rope_factors_short.weight", D_NONE, D_NONE},
    [S_ATTN_NORM] = {"input_layernorm.weight", "attn_norm.weight", D_EMBD, D_NONE},
    [S_ATTN_NORM_B] = {"input_layernorm.bias", "attn_norm.bias", D_EMBD, D_NONE},
    [S_ATTN_QKV] = {"self_attn.qkv_proj.weight", "attn_qkv.weight", D_QKV, D_EMBD},
    [S_ATTN_QKV_B] = {NULL, "attn_qkv.bias", D_NONE, D_NONE}, /* GPT lineage */
    [S_ATTN_Q] = {"self_attn.q_proj.weight", "attn_q.weight", D_Q, D_EMBD},
    [S_ATTN_Q_B] = {"self_attn.q_proj.bias", "attn_q.bias", D_Q, D_NONE},
    [S_ATTN_K] = {"self_attn.k_proj.weight", "attn_k.weight", D_KV, D_EMBD},
    [S_ATTN_K_B] = {"self_attn.k_proj.bias", "attn_k.bias", D_KV, D_NONE},
    [S_ATTN_V] = {"self_attn.v_proj.weight", "attn_v.weight", D_KV, D_EMBD},
    [S_ATTN_V_B] = {"self_attn.v_proj.bias", "attn_v.bias", D_KV, D_NONE},
    [S_ATTN_O] = {"self_attn.o_proj.weight", "attn_output.weight", D_EMBD, D_Q},
    [S_ATTN_O_B] = {"self_attn.o_proj.bias", "attn_output.bias", D_EMBD, D_NONE},
    [S_ATTN_OUT_NORM] = {NULL, "attn_output_norm.weight", D_NONE, D_NONE}, /* encoders (hf_encoder.c) */
    [S_ATTN_OUT_NORM_B] = {NULL, "attn_output_norm.bias", D_NONE, D_NONE},
    [S_ATTN_Q_NORM] = {"self_attn.q_norm.weight", "attn_q_norm.weight", D_HD, D_NONE},
    [S_ATTN_K_NORM] = {"self_attn.k_norm.weight", "attn_k_norm.weight", D_HD, D_NONE},
    [S_MLA_Q_A] = {"self_attn.q_a_proj.weight", "attn_q_a.weight", D_QLORA, D_EMBD},
    [S_MLA_Q_A_NORM] = {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight", D_QLORA, D_NONE},
    [S_MLA_Q_B] = {"self_attn.q_b_proj.weight", "attn_q_b.weight", D_Q, D_QLORA},
    [S_MLA_KV_A] = {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight", D_KVA, D_EMBD},
    [S_MLA_KV_A_NORM] = {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight", D_KVLORA, D_NONE},
    [S_MLA_K_B] = {"self_attn.kv_b_proj.weight", "attn_k_b.weight", D_KVB, D_KVLORA}, /* + attn_v_b (plan_source) */
    [S_MLA_V_B] = {NULL, "attn_v_b.weight", D_NONE, D_NONE},
    [S_ATTN_POST_NORM] = {"post_attention_layernorm.weight", "post_attention_norm.weight", D_EMBD, D_NONE},
    [S_ATTN_SUB_NORM] = {"self_attn.attn_sub_norm.weight", "attn_sub_norm.weight", D_EMBD, D_NONE},
    [S_FFN_NORM] = {"post_attention_layernorm.weight", "ffn_norm.weight", D_EMBD, D_NONE},
    [S_FFN_NORM_B] = {NULL, "ffn_norm.bias", D_NONE, D_NONE}, /* GPT lineage */
    [S_FFN_GATE_UP] = {"mlp.gate_up_proj.weight", "ffn_up.weight", D_FF2, D_EMBD},
    [S_FFN_GATE] = {"mlp.gate_proj.weight", "ffn_gate.weight", D_FF, D_EMBD},
    [S_FFN_GATE_B] = {"mlp.gate_proj.bias", "ffn_gate.bias", D_FF, D_NONE},
    [S_FFN_UP] = {"mlp.up_proj.weight", "ffn_up.weight", D_FF, D_EMBD},
    [S_FFN_UP_B] = {"mlp.up_proj.bias", "ffn_up.bias", D_FF, D_NONE},
    [S_FFN_DOWN] = {"mlp.down_proj.weight", "ffn_down.weight", D_EMBD, D_FF},
    [S_FFN_DOWN_B] = {"mlp.down_proj.bias", "ffn_down.bias", D_EMBD, D_NONE},
    [S_FFN_GATE_INP] = {"mlp.gate.weight", "ffn_gate_inp.weight", D_NEXP, D_EMBD},
    [S_FFN_EXP_PROBS_B] = {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias", D_NEXP, D_NONE},
    /* experts: one source tensor per expert, stacked into [n_expert][rows][cols] (see expert_of) */
    [S_FFN_GATE_EXPS] = {"mlp.experts.N.gate_proj.weight", "ffn_gate_exps.weight", D_FFEXP, D_EMBD},
    [S_FFN_UP_EXPS] = {"mlp.experts.N.up_proj.weight", "ffn_up_exps.weight", D_FFEXP, D_EMBD},
    [S_FFN_DOWN_EXPS] = {"mlp.experts.N.down_proj.weight", "ffn_down_exps.weight", D_EMBD, D_FFEXP},
    [S_FFN_GATE_INP_SHEXP] = {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", D_ONE, D_EMBD},
    [S_FFN_GATE_SHEXP] = {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", D_FFSH, D_EMBD},
    [S_FFN_UP_SHEXP] = {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", D_FFSH, D_EMBD},
    [S_FFN_DOWN_SHEXP] = {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", D_EMBD, D_FFSH},
    [S_FFN_SUB_NORM] = {"mlp.ffn_sub_norm.weight", "ffn_sub_norm.weight", D_FF, D_NONE},
    [S_LAYER_OUT_NORM] = {NULL, "layer_output_norm.weight", D_NONE, D_NONE}, /* encoders (hf_encoder.c) */
    [S_LAYER_OUT_NORM_B] = {NULL, "layer_output_norm.bias", D_NONE, D_NONE},
    [S_FFN_POST_NORM] = {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", D_EMBD, D_NONE},
    [S_OUTPUT_NORM] = {"model.norm.weight", "output_norm.weight", D_EMBD, D_NONE},
    [S_OUTPUT_NORM_B] = {NULL, "output_norm.bias", D_EMBD, D_NONE},
    [S_OUTPUT] = {"lm_head.weight", "output.weight", D_VOCAB, D_EMBD},
    [S_OUTPUT_B] = {"lm_head.bias", "output.bias", D_VOCAB, D_NONE},
};

static bool slot_per_layer(slot s) { return s >= S_ATTN_NORM && s <= S_FFN_POST_NORM; }

/* Names that mean another slot in one architecture: Phi-2's own names, and
 * Gemma 2/3, whose post_attention_layernorm is a post-norm (the pre-FFN norm
 * is pre_feedforward_layernorm). Looked up before g_slots. */
static const struct {
    ob_hf_arch arch;
    const char *hf;
    slot s;
} g_alias[] = {
    {OB_HF_GEMMA2, "post_attention_layernorm.weight", S_ATTN_POST_NORM},
    {OB_HF_GEMMA2, "pre_feedforward_layernorm.weight", S_FFN_NORM},
    {OB_HF_GEMMA3, "post_attention_layernorm.weight", S_ATTN_POST_NORM},
    {OB_HF_GEMMA3, "pre_feedforward_layernorm.weight", S_FFN_NORM},
    {OB_HF_PHI2, "self_attn.dense.weight", S_ATTN_O},
    {OB_HF_PHI2, "self_attn.dense.bias", S_ATTN_O_B},
    {OB_HF_PHI2, "mlp.fc1.weight", S_FFN_UP},
    {OB_HF_PHI2, "mlp.fc1.bias", S_FFN_UP_B},
    {OB_HF_PHI2, "mlp.fc2.weight", S_FFN_DOWN},
    {OB_HF_PHI2, "mlp.fc2.bias", S_FFN_DOWN_B},
    {OB_HF_PHI2, "model.final_layernorm.weight", S_OUTPUT_NORM},
    {OB_HF_PHI2, "model.final_layernorm.bias", S_OUTPUT_NORM_B},
    {OB_HF_MIXTRAL, "block_sparse_moe.gate.weight", S_FFN_GATE_INP},
    /* llama.cpp's olmo2 and seed_oss have no ffn_norm: post_attention_layernorm
     * is post_attention_norm (after the attention in olmo2, before the MLP in
     * seed_oss); glm4 has both and its own names for the post-norms */
    {OB_HF_OLMO2, "post_attention_layernorm.weight", S_ATTN_POST_NORM},
    {OB_HF_SEED_OSS, "post_attention_layernorm.weight", S_ATTN_POST_NORM},
    {OB_HF_GLM4, "post_self_attn_layernorm.weight", S_ATTN_POST_NORM},
    {OB_HF_GLM4, "post_mlp_layernorm.weight", S_FFN_POST_NORM},
    {OB_HF_GRANITEMOE, "block_sparse_moe.router.layer.weight", S_FFN_GATE_INP},
    /* DeepSeek's n_shared_experts run as one MLP */
    {OB_HF_DEEPSEEK3, "mlp.shared_experts.gate_proj.weight", S_FFN_GATE_SHEXP},
    {OB_HF_DEEPSEEK3, "mlp.shared_experts.up_proj.weight", S_FFN_UP_SHEXP},
    {OB_HF_DEEPSEEK3, "mlp.shared_experts.down_proj.weight", S_FFN_DOWN_SHEXP},
    /* InternLM2's own names; wqkv holds q, k and v (plan_wqkv splits it) */
    {OB_HF_INTERNLM2, "model.tok_embeddings.weight", S_TOKEN_EMBD},
    {OB_HF_INTERNLM2, "output.weight", S_OUTPUT},
    {OB_HF_INTERNLM2, "attention_norm.weight", S_ATTN_NORM},
    {OB_HF_INTERNLM2, "attention.wqkv.weight", S_ATTN_Q},
    {OB_HF_INTERNLM2, "attention.wo.weight", S_ATTN_O},
    {OB_HF_INTERNLM2, "ffn_norm.weight", S_FFN_NORM},
    {OB_HF_INTERNLM2, "feed_forward.w1.weight", S_FFN_GATE},
    {OB_HF_INTERNLM2, "feed_forward.w3.weight", S_FFN_UP},
    {OB_HF_INTERNLM2, "feed_forward.w2.weight", S_FFN_DOWN},
};

static bool is_exps(slot s) { return s == S_FFN_GATE_EXPS || s == S_FFN_UP_EXPS || s == S_FFN_DOWN_EXPS; }

/* What a checkpoint of architecture `a` calls slot s (per-layer slots:
 * after "model.layers.N."), for messages about a missing tensor. */
static const char *hf_name(ob_hf_arch a, slot s) {
    for (size_t i = 0; i < OB_ARRAY_LEN(g_alias); i++)
        if (g_alias[i].arch == a && g_alias[i].s == s) return g_alias[i].hf;
    return g_slots[s].hf;
}

/* "mlp.experts.K.{gate,up,down}_proj.weight" (Qwen MoE) or
 * "block_sparse_moe.experts.K.w{1,3,2}.weight" (Mixtral): the slot and K, or
 * false. */
static bool expert_of(const char *rest, slot *s, long *k) {
    static const struct {
        const char *prefix, *suffix;
        slot s;
    } forms[] = {
        {"mlp.experts.", ".gate_proj.weight", S_FFN_GATE_EXPS},       {"mlp.experts.", ".up_proj.weight", S_FFN_UP_EXPS},
        {"mlp.experts.", ".down_proj.weight", S_FFN_DOWN_EXPS},       {"block_sparse_moe.experts.", ".w1.weight", S_FFN_GATE_EXPS},
        {"block_sparse_moe.experts.", ".w3.weight", S_FFN_UP_EXPS}, {"block_sparse_moe.experts.", ".w2.weight", S_FFN_DOWN_EXPS},
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(forms); i++) {
        size_t lp = strlen(forms[i].prefix);
        if (strncmp(rest, forms[i].prefix, lp) != 0 || rest[lp] < '0' || rest[lp] > '9') continue;
        char *end;
        errno = 0;
        long v = strtol(rest + lp, &end, 10);
        if (errno == 0 && !strcmp(end, forms[i].suffix)) {
            *s = forms[i].s;
            *k = v;
            return true;
        }
    }
    return false;
}

static bool is_gemma(ob_hf_arch a) { return a == OB_HF_GEMMA || a == OB_HF_GEMMA2 || a == OB_HF_GEMMA3; }

/* One output tensor. */
typedef struct planned {
    char name[64];
    slot s;
    int layer;                /* -1 for global tensors */
    const ob_st_tensor *src;  /* NULL for generated tensors */
    ob_type type;
    int n_dims;
    int64_t ne[3];            /* GGUF order: ne[0] is the row length; ne[2] = experts (1 otherwise) */
    int64_t permute_heads;    /* 0, or the head count of the llama q/k permutation */
    const ob_st_tensor **srcs; /* experts: [ne[2]] source of each expert's rows (src = srcs[0]) */
    int64_t split_rows, split_row0; /* experts from one 3-D source (granitemoe): expert e's rows are
                                      * src rows e * split_rows + split_row0 + [0, ne[1]); 0 otherwise */
    bool add_one;             /* Gemma norms: written as 1 + w */
    bool mla_k_b;             /* DeepSeek attn_k_b: head h's row c is column c of kv_b_proj rows
                               * h * split_rows + [0, ne[0]) (llama.cpp's transposed k_b) */
    ob_hf_xform xform;        /* GPT lineage: transposed or regrouped (hf_gptlike.h) */
    int64_t qkv_row0;         /* OB_HF_XF_QKV_GROUPS for one part of the fused rows (InternLM2's wqkv):
                               * output row r is row qkv_row0 + r of the regrouped [Q | K | V] */
    size_t nbytes;
    size_t scratch_off;       /* SIZE_MAX when the data does not go through scratch */
    const void *data;
} planned;

typedef struct conv {
    const ob_convert_opts *opts;
    ob_hf_config cfg;
    ob_st_set *st;
    planned *p;
    int n_p, cap_p;
    /* scratch: converted tensor data */
    unsigned char *scratch;
    size_t scratch_size;
    bool scratch_mapped;
    float *rope_freqs;
    int n_f16_fallback;
} conv;

static int64_t dim_value(const ob_hf_config *c, dimkind d) {
    switch (d) {
    case D_VOCAB: return c->n_vocab;
    case D_EMBD: return c->n_embd;
    case D_FF: return c->n_ff;
    case D_Q: return c->n_head * c->head_dim;
    case D_KV: return c->n_head_kv * c->head_dim;
    case D_HD: return c->head_dim;
    case D_QKV: return (c->n_head + 2 * c->n_head_kv) * c->head_dim;
    case D_FF2: return 2 * c->n_ff;
    case D_NEXP: return c->n_expert;
    case D_FFEXP: return c->n_ff_exp;
    case D_FFSH: return c->n_ff_shexp;
    case D_ONE: return 1;
    case D_QLORA: return c->ds.q_lora_rank;
    case D_KVA: return c->ds.kv_lora_rank + c->ds.qk_rope;
    case D_KVLORA: return c->ds.kv_lora_rank;
    case D_KVB: return c->n_head * (c->ds.qk_nope + c->ds.v_head_dim);
    default: return 0;
    }
}

static void shape_str(const ob_st_tensor *t, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->n_dims && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

/* Map a source name to (slot, layer). Returns 1 if mapped, 0 if the tensor
 * is skipped on purpose, or an error for a name we do not know. */
static int map_name(const conv *c, const char *name, slot *s, int *layer, long *expert) {
    *layer = -1;
    *expert = -1;
    for (size_t i = 0; i < OB_ARRAY_LEN(g_alias); i++)
        if (g_alias[i].arch == c->cfg.arch && !slot_per_layer(g_alias[i].s) && !strcmp(name, g_alias[i].hf)) {
            *s = g_alias[i].s;
            return 1;
        }
    for (int i = 0; i < S_COUNT; i++)
        if (!slot_per_layer((slot)i) && g_slots[i].hf && !strcmp(name, g_slots[i].hf)) {
            *s = (slot)i;
            return 1;
        }
    const char *pre = "model.layers.";
    size_t lp = strlen(pre);
    if (!strncmp(name, pre, lp)) {
        const char *p = name + lp;
        char *end;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (end != p && *end == '.' && errno == 0 && p[0] >= '0' && p[0] <= '9') {
            const char *rest = end + 1;
            if (n >= c->cfg.n_layer && c->cfg.arch == OB_HF_DEEPSEEK3) return 0; /* MTP layers, as llama.cpp */
            if (n >= c->cfg.n_layer)
                return ob_err(OB_ERR_FORMAT, "tensor '%s': layer %ld, but config.json has %lld layers", name, n,
                              (long long)c->cfg.n_layer);
            /* Cached RoPE frequencies some checkpoints carry; recomputed from hparams. */
            if (!strcmp(rest, "self_attn.rotary_emb.inv_freq")) return 0;
            if (c->cfg.n_expert > 0 && expert_of(rest, s, expert)) {
                if (*expert < 0 || *expert >= c->cfg.n_expert)
                    return ob_err(OB_ERR_FORMAT, "tensor '%s': expert %ld, but config.json has %lld experts", name,
                                  *expert, (long long)c->cfg.n_expert);
                *layer = (int)n;
                return 1;
            }
            for (size_t i = 0; i < OB_ARRAY_LEN(g_alias); i++)
                if (g_alias[i].arch == c->cfg.arch && slot_per_layer(g_alias[i].s) && !strcmp(rest, g_alias[i].hf)) {
                    *s = g_alias[i].s;
                    *layer = (int)n;
                    return 1;
                }
            for (int i = 0; i < S_COUNT; i++)
                /* post_attention_layernorm is the pre-FFN norm unless an alias says otherwise */
                if (slot_per_layer((slot)i) && i != S_ATTN_POST_NORM && !is_exps((slot)i) &&
                    (c->cfg.n_expert > 0 || i < S_FFN_GATE_INP || i > S_FFN_DOWN_SHEXP) && g_slots[i].hf &&
                    !strcmp(rest, g_slots[i].hf)) {
                    *s = (slot)i;
                    *layer = (int)n;
                    return 1;
                }
        }
    }
    return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' has no GGUF name in architecture %s (%s)", name,
                  c->cfg.gguf_arch, c->cfg.hf_arch);
}

static int add_planned(conv *c, const planned *p) {
    if (c->n_p == c->cap_p) {
        int cap = c->cap_p ? c->cap_p * 2 : 64;
        planned *np = ob_realloc(c->p, (size_t)cap * sizeof *np);
        if (!np) return ob_err(OB_ERR_OOM, "tensor plan");
        c->p = np;
        c->cap_p = cap;
    }
    c->p[c->n_p++] = *p;
    return 0;
}

/* Output type of a tensor: norms and 1-D tensors stay F32; matrices take
 * --outtype, except Q8_0 on rows that are not whole blocks. */
static ob_type pick_type(conv *c, const planned *p) {
    /* routers stay F32 as llama.cpp writes them: a rounded router picks other experts */
    if (p->n_dims < 2 || strstr(p->name, "_norm.weight") || strstr(p->name, "ffn_gate_inp")) return OB_TYPE_F32;
    ob_type t = c->opts->outtype;
    const ob_type_traits *tr = ob_type_get((int)t);
    if (tr && p->ne[0] % tr->block_size != 0) {
        OB_LOGW("%s: rows of %lld are not a multiple of %s's block of %lld; writing it as f16", p->name,
                (long long)p->ne[0], tr->name, (long long)tr->block_size);
        c->n_f16_fallback++;
        return OB_TYPE_F16;
    }
    return t;
}

/* A tensor of a GPT-lineage checkpoint: hf_gptlike.c names it and says how
 * its data is rearranged; the slot (for the file's order) is the one of
 * that GGUF name. */
static int plan_gpt(conv *c, const ob_st_tensor *t) {
    const ob_hf_config *cfg = &c->cfg;
    ob_hf_gmap g;
    int m = ob_hf_enc_is(cfg->arch) ? ob_hf_enc_map(cfg, t->name, &g) : ob_hf_gpt_map(cfg, t->name, &g);
    if (m < 0) return m;
    if (m == 0) {
        OB_LOGI("%s: skipped (not used by the GGUF model)", t->name);
        return 0;
    }
    if (cfg->tied && (!strcmp(g.gguf, "output.weight") || !strcmp(g.gguf, "output.bias"))) {
        OB_LOGI("%s: skipped (tie_word_embeddings: the output layer is token_embd.weight)", t->name);
        return 0;
    }
    if (t->dtype != OB_ST_F32 && t->dtype != OB_ST_F16 && t->dtype != OB_ST_BF16)
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' in %s has dtype %s; only F32, F16 and BF16 are converted",
                      t->name, t->file, ob_st_dtype_name(t->dtype));
    int want_dims = g.cols ? 2 : 1;
    if (t->n_dims != want_dims || t->shape[0] != g.rows || (want_dims == 2 && t->shape[1] != g.cols)) {
        char got[96];
        shape_str(t, got, sizeof got);
        return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape %s; config.json implies [%lld%s%lld]", t->name, got,
                      (long long)g.rows, g.cols ? ", " : "", (long long)g.cols);
    }
    planned p;
    memset(&p, 0, sizeof p);
    p.s = S_COUNT;
    for (int i = 0; i < S_COUNT && p.s == S_COUNT; i++)
        if (slot_per_layer((slot)i) == (g.layer >= 0) && !strcmp(g_slots[i].gguf, g.suffix)) p.s = (slot)i;
    if (p.s == S_COUNT) return ob_err(OB_ERR_INTERNAL, "%s: no slot for %s", t->name, g.suffix);
    p.layer = g.layer;
    p.src = t;
    snprintf(p.name, sizeof p.name, "%s", g.gguf);
    p.n_dims = want_dims;
    /* GGUF order: ne[0] is the row length; a transposed source's rows are its columns */
    bool tr = g.xform == OB_HF_XF_TRANSPOSE;
    p.ne[0] = want_dims == 2 ? t->shape[tr ? 0 : 1] : t->shape[0];
    p.ne[1] = want_dims == 2 ? t->shape[tr ? 1 : 0] - ob_hf_gpt_dropped_rows(g.xform) : 1;
    p.ne[2] = 1;
    p.xform = g.xform;
    p.add_one = g.xform == OB_HF_XF_ADD_ONE;
    p.type = pick_type(c, &p);
    p.scratch_off = SIZE_MAX;
    return add_planned(c, &p);
}

static const planned *find_planned(const conv *c, slot s, int layer);

/* GraniteMoE keeps a layer's experts in two 3-D tensors:
 * block_sparse_moe.input_linear [n_expert, 2 n_ff, n_embd] (each expert's
 * gate rows, then its up rows) and output_linear [n_expert, n_embd, n_ff].
 * Planned as llama.cpp splits them: ffn_gate_exps and ffn_up_exps from the
 * first, ffn_down_exps from the second. 1 when t was one of them, 0 when
 * not, or an error. */
static int plan_stacked_experts(conv *c, const ob_st_tensor *t) {
    const ob_hf_config *cfg = &c->cfg;
    int layer = -1, used = 0;
    char rest[64];
    if (sscanf(t->name, "model.layers.%d.block_sparse_moe.%63s%n", &layer, rest, &used) != 2 || t->name[used])
        return 0;
    const bool in = !strcmp(rest, "input_linear.weight");
    if (!in && strcmp(rest, "output_linear.weight") != 0) return 0;
    if (layer < 0 || layer >= cfg->n_layer)
        return ob_err(OB_ERR_FORMAT, "tensor '%s': layer %d, but config.json has %lld layers", t->name, layer,
                      (long long)cfg->n_layer);
    if (t->dtype != OB_ST_F32 && t->dtype != OB_ST_F16 && t->dtype != OB_ST_BF16)
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' has dtype %s; only F32, F16 and BF16 are converted", t->name,
                      ob_st_dtype_name(t->dtype));
    const int64_t NE = cfg->n_expert, FF = cfg->n_ff_exp, E = cfg->n_embd;
    const int64_t rows = in ? 2 * FF : E, cols = in ? E : FF;
    if (t->n_dims != 3 || t->shape[0] != NE || t->shape[1] != rows || t->shape[2] != cols)
        return ob_err(OB_ERR_FORMAT, "tensor '%s': config.json implies [%lld, %lld, %lld]", t->name, (long long)NE,
                      (long long)rows, (long long)cols);
    for (int part = 0; part < (in ? 2 : 1); part++) {
        planned p;
        memset(&p, 0, sizeof p);
        p.s = !in ? S_FFN_DOWN_EXPS : part ? S_FFN_UP_EXPS : S_FFN_GATE_EXPS;
        if (find_planned(c, p.s, layer)) return ob_err(OB_ERR_FORMAT, "tensor '%s' appears twice", t->name);
        p.layer = layer;
        p.src = t;
        snprintf(p.name, sizeof p.name, "blk.%d.%s", layer, g_slots[p.s].gguf);
        p.n_dims = 3;
        p.ne[0] = cols;
        p.ne[1] = in ? FF : E;
        p.ne[2] = NE;
        p.split_rows = rows;
        p.split_row0 = part * FF;
        p.type = pick_type(c, &p);
        p.scratch_off = SIZE_MAX;
        OB_TRY(add_planned(c, &p));
    }
    return 1;
}

/* DeepSeek's kv_b_proj [n_head * (qk_nope + v_head_dim), kv_lora_rank], per
 * head its k_nope rows then its v rows, split as llama.cpp's converter
 * does: attn_k_b [qk_nope, kv_lora_rank, n_head] (each head's k rows
 * transposed, so q_nope can be absorbed into the latent space) and
 * attn_v_b [kv_lora_rank, v_head_dim, n_head] (the v rows as they are). */
static int plan_mla_kv_b(conv *c, const ob_st_tensor *t, int layer) {
    const ob_hf_config *cfg = &c->cfg;
    for (int part = 0; part < 2; part++) {
        planned p;
        memset(&p, 0, sizeof p);
        p.s = part ? S_MLA_V_B : S_MLA_K_B;
        if (find_planned(c, p.s, layer)) return ob_err(OB_ERR_FORMAT, "tensor '%s' appears twice", t->name);
        p.layer = layer;
        p.src = t;
        snprintf(p.name, sizeof p.name, "blk.%d.%s", layer, g_slots[p.s].gguf);
        p.n_dims = 3;
        p.ne[0] = part ? cfg->ds.kv_lora_rank : cfg->ds.qk_nope;
        p.ne[1] = part ? cfg->ds.v_head_dim : cfg->ds.kv_lora_rank;
        p.ne[2] = cfg->n_head;
        p.split_rows = cfg->ds.qk_nope + cfg->ds.v_head_dim;
        p.split_row0 = part ? cfg->ds.qk_nope : 0;
        p.mla_k_b = !part;
        p.type = pick_type(c, &p);
        p.scratch_off = SIZE_MAX;
        OB_TRY(add_planned(c, &p));
    }
    return 0;
}

/* InternLM2's attention.wqkv [(n_head + 2 n_head_kv) head_dim, n_embd]
 * holds per KV group its n_head / n_head_kv query heads, then its key head,
 * then its value head (modeling_internlm2.py: rearrange '(h gs d)'), the
 * layout of Falcon's fused qkv (OB_HF_XF_QKV_GROUPS). Split as llama.cpp's
 * converter does into attn_q, attn_k and attn_v, the q and k rows permuted
 * like a Llama q_proj / k_proj (the file runs normal RoPE). */
static int plan_wqkv(conv *c, const ob_st_tensor *t, int layer) {
    const ob_hf_config *cfg = &c->cfg;
    const int64_t Q = dim_value(cfg, D_Q), KV = dim_value(cfg, D_KV);
    if (t->n_dims != 2 || t->shape[0] != Q + 2 * KV || t->shape[1] != cfg->n_embd) {
        char got[96];
        shape_str(t, got, sizeof got);
        return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape %s; config.json implies [%lld, %lld]", t->name, got,
                      (long long)(Q + 2 * KV), (long long)cfg->n_embd);
    }
    static const slot parts[3] = {S_ATTN_Q, S_ATTN_K, S_ATTN_V};
    const int64_t rows[3] = {Q, KV, KV}, row0[3] = {0, Q, Q + KV}, heads[3] = {cfg->n_head, cfg->n_head_kv, 0};
    for (int i = 0; i < 3; i++) {
        if (find_planned(c, parts[i], layer)) return ob_err(OB_ERR_FORMAT, "tensor '%s' appears twice", t->name);
        planned p;
        memset(&p, 0, sizeof p);
        p.s = parts[i];
        p.layer = layer;
        p.src = t;
        snprintf(p.name, sizeof p.name, "blk.%d.%s", layer, g_slots[p.s].gguf);
        p.n_dims = 2;
        p.ne[0] = cfg->n_embd;
        p.ne[1] = rows[i];
        p.ne[2] = 1;
        p.xform = OB_HF_XF_QKV_GROUPS;
        p.qkv_row0 = row0[i];
        p.permute_heads = heads[i];
        p.type = pick_type(c, &p);
        p.scratch_off = SIZE_MAX;
        OB_TRY(add_planned(c, &p));
    }
    return 0;
}

static int plan_source(conv *c, const ob_st_tensor *t) {
    if (ob_hf_gpt_is(c->cfg.arch) || ob_hf_enc_is(c->cfg.arch)) return plan_gpt(c, t);
    slot s = S_COUNT;
    int layer;
    long expert;
    if (c->cfg.arch == OB_HF_GRANITEMOE) {
        int st = plan_stacked_experts(c, t);
        if (st != 0) return st < 0 ? st : 0;
    }
    int m = map_name(c, t->name, &s, &layer, &expert);
    if (m < 0) return m;
    if (m == 0) {
        OB_LOGI("%s: skipped (not used by the GGUF model)", t->name);
        return 0;
    }
    const ob_hf_config *cfg = &c->cfg;
    if (s == S_OUTPUT && cfg->tied) {
        OB_LOGI("%s: skipped (tie_word_embeddings: the output layer is token_embd.weight)", t->name);
        return 0;
    }
    /* OLMo 2: the q/k norms span the whole projection, not one head */
    const bool qk_norm_whole = cfg->arch == OB_HF_OLMO2 || cfg->arch == OB_HF_OLMOE;
    if ((s == S_ATTN_Q_NORM || s == S_ATTN_K_NORM) && cfg->arch != OB_HF_QWEN3 && cfg->arch != OB_HF_GEMMA3 &&
        cfg->arch != OB_HF_QWEN3MOE && !qk_norm_whole)
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s': q/k norms are not part of architecture %s", t->name,
                      cfg->gguf_arch);
    if (t->dtype != OB_ST_F32 && t->dtype != OB_ST_F16 && t->dtype != OB_ST_BF16)
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' in %s has dtype %s; only F32, F16 and BF16 are converted",
                      t->name, t->file, ob_st_dtype_name(t->dtype));
    if (cfg->arch == OB_HF_INTERNLM2 && s == S_ATTN_Q) return plan_wqkv(c, t, layer);
    int want_dims = g_slots[s].d1 == D_NONE ? 1 : 2;
    int64_t w0 = dim_value(cfg, g_slots[s].d0), w1 = dim_value(cfg, g_slots[s].d1);
    if (qk_norm_whole && (s == S_ATTN_Q_NORM || s == S_ATTN_K_NORM))
        w0 = dim_value(cfg, s == S_ATTN_Q_NORM ? D_Q : D_KV);
    if (cfg->arch == OB_HF_DEEPSEEK3 && s == S_ATTN_O) w1 = cfg->n_head * cfg->ds.v_head_dim;
    if (cfg->arch != OB_HF_DEEPSEEK3 && (s >= S_MLA_Q_A && s <= S_MLA_V_B))
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' is not part of architecture %s", t->name, cfg->gguf_arch);
    if (cfg->arch != OB_HF_BITNET && (s == S_ATTN_SUB_NORM || s == S_FFN_SUB_NORM))
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' is not part of architecture %s", t->name, cfg->gguf_arch);
    if (t->n_dims != want_dims || t->shape[0] != w0 || (want_dims == 2 && t->shape[1] != w1)) {
        char got[96];
        shape_str(t, got, sizeof got);
        if (want_dims == 2)
            return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape %s; config.json implies [%lld, %lld]", t->name, got,
                          (long long)w0, (long long)w1);
        return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape %s; config.json implies [%lld]", t->name, got,
                      (long long)w0);
    }
    if (is_exps(s)) {
        /* one expert of a stacked tensor: planned once, filled per expert */
        planned *e = NULL;
        for (int i = 0; i < c->n_p && !e; i++)
            if (c->p[i].s == s && c->p[i].layer == layer) e = &c->p[i];
        if (!e) {
            planned p;
            memset(&p, 0, sizeof p);
            p.s = s;
            p.layer = layer;
            p.src = t;
            snprintf(p.name, sizeof p.name, "blk.%d.%s", layer, g_slots[s].gguf);
            p.n_dims = 3;
            p.ne[0] = t->shape[1];
            p.ne[1] = t->shape[0];
            p.ne[2] = cfg->n_expert;
            p.srcs = ob_calloc((size_t)cfg->n_expert, sizeof *p.srcs);
            if (!p.srcs) return ob_err(OB_ERR_OOM, "expert table");
            p.type = pick_type(c, &p);
            p.scratch_off = SIZE_MAX;
            int rc = add_planned(c, &p);
            if (rc < 0) {
                ob_free(p.srcs);
                return rc;
            }
            e = &c->p[c->n_p - 1];
        }
        if (e->srcs[expert]) return ob_err(OB_ERR_FORMAT, "tensor '%s' appears twice", t->name);
        if (t->dtype != e->src->dtype)
            return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s': experts of one layer must share a dtype", t->name);
        e->srcs[expert] = t;
        return 0;
    }
    if (s == S_MLA_K_B) return plan_mla_kv_b(c, t, layer);
    planned p;
    memset(&p, 0, sizeof p);
    p.s = s;
    p.layer = layer;
    p.src = t;
    if (layer >= 0)
        snprintf(p.name, sizeof p.name, "blk.%d.%s", layer, g_slots[s].gguf);
    else
        snprintf(p.name, sizeof p.name, "%s", g_slots[s].gguf);
    p.n_dims = want_dims;
    p.ne[0] = want_dims == 2 ? t->shape[1] : t->shape[0];
    p.ne[1] = want_dims == 2 ? t->shape[0] : 1;
    p.ne[2] = 1;
    if (s == S_FFN_GATE_INP_SHEXP) p.n_dims = 1; /* [1, n_embd] -> [n_embd], as llama.cpp writes it */
    /* llama.cpp undoes HF's rotate_half layout only for the `llama` arch;
     * Qwen models keep it and use NeoX RoPE. */
    if (cfg->arch == OB_HF_LLAMA || cfg->arch == OB_HF_MISTRAL || cfg->arch == OB_HF_MIXTRAL ||
        cfg->arch == OB_HF_GRANITE || cfg->arch == OB_HF_SMOLLM3 || cfg->arch == OB_HF_ARCEE || cfg->arch == OB_HF_OLMO ||
        cfg->arch == OB_HF_GRANITEMOE) {
        if (s == S_ATTN_Q || s == S_ATTN_Q_B) p.permute_heads = cfg->n_head;
        if (s == S_ATTN_K || s == S_ATTN_K_B) p.permute_heads = cfg->n_head_kv;
    }
    /* Gemma's RMSNorm scales by (1 + w); llama.cpp's files hold 1 + w */
    p.add_one = is_gemma(cfg->arch) && strstr(p.name, "norm.weight") != NULL;
    p.type = pick_type(c, &p);
    p.scratch_off = SIZE_MAX;
    return add_planned(c, &p);
}

/* A generated F32 vector (RoPE factors). */
static int plan_vector(conv *c, slot s, const float *data, int64_t n) {
    planned p;
    memset(&p, 0, sizeof p);
    p.s = s;
    p.layer = -1;
    snprintf(p.name, sizeof p.name, "%s", g_slots[s].gguf);
    p.type = OB_TYPE_F32;
    p.n_dims = 1;
    p.ne[0] = n;
    p.ne[1] = 1;
    p.data = data;
    p.scratch_off = SIZE_MAX;
    return add_planned(c, &p);
}

/* Phi-3 LongRoPE: the short and long per-dimension factors as tensors, as
 * llama.cpp's converter writes them. */
static int plan_longrope(conv *c) {
    const ob_hf_config *cfg = &c->cfg;
    int64_t n = cfg->n_rot / 2;
    c->rope_freqs = ob_malloc((size_t)(2 * n) * sizeof *c->rope_freqs);
    if (!c->rope_freqs) return ob_err(OB_ERR_OOM, "rope factors");
    for (int64_t i = 0; i < n; i++) {
        c->rope_freqs[i] = (float)cfg->longrope_long[i];
        c->rope_freqs[n + i] = (float)cfg->longrope_short[i];
    }
    OB_TRY(plan_vector(c, S_ROPE_FACTORS_LONG, c->rope_freqs, n));
    return plan_vector(c, S_ROPE_FACTORS_SHORT, c->rope_freqs + n, n);
}

/* Llama 3 RoPE: per-dimension divisors of the base frequencies, computed as
 * llama.cpp's converter does (float32 arithmetic), stored as rope_freqs. */
static int plan_rope_freqs(conv *c) {
    const ob_hf_config *cfg = &c->cfg;
    int64_t n = cfg->head_dim / 2;
    c->rope_freqs = ob_malloc((size_t)n * sizeof *c->rope_freqs);
    if (!c->rope_freqs) return ob_err(OB_ERR_OOM, "rope_freqs");
    const float factor = (float)cfg->rope_factor, lo = (float)cfg->llama3_low_freq_factor,
                hi = (float)cfg->llama3_high_freq_factor, old_ctx = (float)cfg->rope_orig_ctx;
    const float lo_wavelen = old_ctx / lo, hi_wavelen = old_ctx / hi;
    for (int64_t i = 0; i < n; i++) {
        float freq = 1.0f / powf((float)cfg->rope_theta, (float)(2 * i) / (float)cfg->head_dim);
        float wavelen = (float)(2.0 * M_PI) / freq;
        float f;
        if (wavelen < hi_wavelen)
            f = 1.0f;
        else if (wavelen > lo_wavelen)
            f = factor;
        else {
            float smooth = (old_ctx / wavelen - lo) / (hi - lo);
            f = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
        c->rope_freqs[i] = f;
    }
    planned p;
    memset(&p, 0, sizeof p);
    p.s = S_ROPE_FREQS;
    p.layer = -1;
    snprintf(p.name, sizeof p.name, "%s", g_slots[S_ROPE_FREQS].gguf);
    p.type = OB_TYPE_F32;
    p.n_dims = 1;
    p.ne[0] = n;
    p.ne[1] = 1;
    p.data = c->rope_freqs;
    p.scratch_off = SIZE_MAX;
    return add_planned(c, &p);
}

static int cmp_planned(const void *a, const void *b) {
    const planned *x = a, *y = b;
    /* globals before the blocks except the output norm and head, after */
    int kx = x->layer >= 0 ? 1 : (x->s >= S_OUTPUT_NORM ? 2 : 0);
    int ky = y->layer >= 0 ? 1 : (y->s >= S_OUTPUT_NORM ? 2 : 0);
    if (kx != ky) return kx - ky;
    if (x->layer != y->layer) return x->layer - y->layer;
    return (int)x->s - (int)y->s;
}

static const planned *find_planned(const conv *c, slot s, int layer) {
    for (int i = 0; i < c->n_p; i++)
        if (c->p[i].s == s && c->p[i].layer == layer) return &c->p[i];
    return NULL;
}

/* Every tensor the architecture needs is there. */
/* ob_hf_gpt_check's question: is GGUF tensor `name` planned? */
static bool has_planned_name(const void *ctx, const char *name) {
    const conv *c = ctx;
    for (int i = 0; i < c->n_p; i++)
        if (!strcmp(c->p[i].name, name)) return true;
    return false;
}

/* DeepSeek: MLA in every layer, a dense MLP in the first
 * first_k_dense_replace layers, routed (+ shared) experts after them. */
static int check_deepseek(const conv *c) {
    const ob_hf_config *cfg = &c->cfg;
    static const slot attn[] = {S_ATTN_NORM, S_MLA_KV_A, S_MLA_KV_A_NORM, S_MLA_K_B, S_MLA_V_B, S_ATTN_O, S_FFN_NORM};
    static const slot qlora[] = {S_MLA_Q_A, S_MLA_Q_A_NORM, S_MLA_Q_B}, dense[] = {S_FFN_GATE, S_FFN_UP, S_FFN_DOWN};
    static const slot moe[] = {S_FFN_GATE_INP, S_FFN_EXP_PROBS_B, S_FFN_GATE_EXPS, S_FFN_UP_EXPS, S_FFN_DOWN_EXPS};
    static const slot shared[] = {S_FFN_GATE_SHEXP, S_FFN_UP_SHEXP, S_FFN_DOWN_SHEXP};
    struct {
        const slot *s;
        size_t n;
    } sets[5] = {{attn, OB_ARRAY_LEN(attn)}, {qlora, OB_ARRAY_LEN(qlora)}, {dense, OB_ARRAY_LEN(dense)},
                 {moe, OB_ARRAY_LEN(moe)}, {shared, OB_ARRAY_LEN(shared)}};
    for (int l = 0; l < cfg->n_layer; l++) {
        const bool is_dense = l < cfg->ds.n_dense_lead;
        const bool use[5] = {true, cfg->ds.q_lora_rank > 0, is_dense, !is_dense, !is_dense && cfg->ds.n_shared > 0};
        if (cfg->ds.q_lora_rank == 0 && !find_planned(c, S_ATTN_Q, l))
            return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.self_attn.q_proj.weight' is missing", l);
        for (int k = 0; k < 5; k++)
            for (size_t i = 0; use[k] && i < sets[k].n; i++)
                if (!find_planned(c, sets[k].s[i], l))
                    return ob_err(OB_ERR_FORMAT, "layer %d: tensor %s is missing (%s)", l, g_slots[sets[k].s[i]].gguf,
                                  g_slots[sets[k].s[i]].hf ? g_slots[sets[k].s[i]].hf : "kv_b_proj");
        for (slot s = S_FFN_GATE_EXPS; s <= S_FFN_DOWN_EXPS; s++) {
            const planned *e = find_planned(c, s, l);
            if (e && is_dense) return ob_err(OB_ERR_FORMAT, "layer %d: experts in a dense layer (first_k_dense_replace)", l);
            for (int64_t k = 0; e && e->srcs && k < cfg->n_expert; k++)
                if (!e->srcs[k])
                    return ob_err(OB_ERR_FORMAT, "layer %d: expert %lld of %s is missing", l, (long long)k, g_slots[s].gguf);
        }
        if (!is_dense && find_planned(c, S_FFN_GATE, l))
            return ob_err(OB_ERR_FORMAT, "layer %d: a dense MLP after first_k_dense_replace layers", l);
    }
    return 0;
}

static int check_complete(conv *c) {
    ob_hf_config *cfg = &c->cfg;
    if (!find_planned(c, S_TOKEN_EMBD, -1))
        return ob_err(OB_ERR_FORMAT, "tensor '%s' is missing", hf_name(cfg->arch, S_TOKEN_EMBD));
    if (ob_hf_enc_is(cfg->arch)) return ob_hf_enc_check(cfg, has_planned_name, c); /* no output layer */
    /* OLMo's LayerNorms have no weights: no output_norm (as llama.cpp) */
    if (cfg->arch != OB_HF_OLMO && !find_planned(c, S_OUTPUT_NORM, -1))
        return ob_err(OB_ERR_FORMAT, "tensor 'model.norm.weight' is missing");
    if (!cfg->tied && !find_planned(c, S_OUTPUT, -1)) {
        OB_LOGW("lm_head.weight is absent although tie_word_embeddings is false: the output layer shares "
                "token_embd.weight");
        cfg->tied = true;
    }
    if (ob_hf_gpt_is(cfg->arch)) return ob_hf_gpt_check(cfg, has_planned_name, c);
    if (cfg->arch == OB_HF_DEEPSEEK3) return check_deepseek(c);
    static const slot need_llama[] = {S_ATTN_NORM, S_ATTN_Q, S_ATTN_K, S_ATTN_V, S_ATTN_O,
                                      S_FFN_NORM,  S_FFN_GATE, S_FFN_UP, S_FFN_DOWN, S_COUNT};
    static const slot need_gemma2[] = {S_ATTN_NORM,      S_ATTN_Q,   S_ATTN_K, S_ATTN_V,   S_ATTN_O,        S_ATTN_POST_NORM,
                                       S_FFN_NORM,       S_FFN_GATE, S_FFN_UP, S_FFN_DOWN, S_FFN_POST_NORM, S_COUNT};
    static const slot need_phi3[] = {S_ATTN_NORM, S_ATTN_QKV, S_ATTN_O, S_FFN_NORM, S_FFN_GATE_UP, S_FFN_DOWN, S_COUNT};
    static const slot need_phi2[] = {S_ATTN_NORM, S_ATTN_NORM_B, S_ATTN_Q,  S_ATTN_Q_B,   S_ATTN_K,     S_ATTN_K_B,
                                     S_ATTN_V,    S_ATTN_V_B,    S_ATTN_O,  S_ATTN_O_B,   S_FFN_UP,     S_FFN_UP_B,
                                     S_FFN_DOWN,  S_FFN_DOWN_B,  S_COUNT};
    static const slot need_moe[] = {S_ATTN_NORM, S_ATTN_Q,        S_ATTN_K,      S_ATTN_V,        S_ATTN_O,
                                    S_FFN_NORM,  S_FFN_GATE_INP,  S_FFN_GATE_EXPS, S_FFN_UP_EXPS, S_FFN_DOWN_EXPS,
                                    S_COUNT};
    /* the Llama-lineage variants (llama_variants.c) */
    static const slot need_olmo2[] = {S_ATTN_Q,   S_ATTN_K,   S_ATTN_V,   S_ATTN_O,        S_ATTN_Q_NORM, S_ATTN_K_NORM,
                                      S_ATTN_POST_NORM, S_FFN_GATE, S_FFN_UP, S_FFN_DOWN, S_FFN_POST_NORM, S_COUNT};
    static const slot need_arcee[] = {S_ATTN_NORM, S_ATTN_Q, S_ATTN_K, S_ATTN_V, S_ATTN_O,
                                      S_FFN_NORM,  S_FFN_UP, S_FFN_DOWN, S_COUNT};
    static const slot need_seed_oss[] = {S_ATTN_NORM, S_ATTN_Q,   S_ATTN_Q_B,       S_ATTN_K, S_ATTN_K_B, S_ATTN_V,
                                         S_ATTN_V_B,  S_ATTN_O,   S_ATTN_POST_NORM, S_FFN_GATE, S_FFN_UP, S_FFN_DOWN,
                                         S_COUNT};
    static const slot need_bitnet[] = {S_ATTN_NORM, S_ATTN_Q,   S_ATTN_K, S_ATTN_V,   S_ATTN_SUB_NORM, S_ATTN_O,
                                       S_FFN_NORM,  S_FFN_GATE, S_FFN_UP, S_FFN_SUB_NORM, S_FFN_DOWN,   S_COUNT};
    static const slot need_olmo[] = {S_ATTN_Q, S_ATTN_K, S_ATTN_V, S_ATTN_O, S_FFN_GATE, S_FFN_UP, S_FFN_DOWN, S_COUNT};
    static const slot need_glm4[] = {S_ATTN_NORM, S_ATTN_Q,   S_ATTN_Q_B,       S_ATTN_K,   S_ATTN_K_B,
                                     S_ATTN_V,    S_ATTN_V_B, S_ATTN_O,         S_ATTN_POST_NORM, S_FFN_NORM,
                                     S_FFN_GATE_UP, S_FFN_DOWN, S_FFN_POST_NORM, S_COUNT};
    const slot *need = cfg->arch == OB_HF_OLMO2      ? need_olmo2
                       : cfg->arch == OB_HF_ARCEE    ? need_arcee
                       : cfg->arch == OB_HF_SEED_OSS ? need_seed_oss
                       : cfg->arch == OB_HF_OLMO     ? need_olmo
                       : cfg->arch == OB_HF_GLM4     ? need_glm4
                       : cfg->arch == OB_HF_BITNET   ? need_bitnet
                       : cfg->arch == OB_HF_GEMMA2 || cfg->arch == OB_HF_GEMMA3 ? need_gemma2
                       : cfg->arch == OB_HF_PHI3                              ? need_phi3
                       : cfg->arch == OB_HF_PHI2                              ? need_phi2
                       : cfg->n_expert > 0                                    ? need_moe
                                                                              : need_llama;
    if (cfg->arch == OB_HF_PHI2 && !find_planned(c, S_OUTPUT_NORM_B, -1))
        return ob_err(OB_ERR_FORMAT, "tensor 'model.final_layernorm.bias' is missing");
    for (int l = 0; l < cfg->n_layer; l++) {
        for (size_t i = 0; need[i] != S_COUNT; i++)
            if (!find_planned(c, need[i], l))
                return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.%s' is missing", l, hf_name(cfg->arch, need[i]));
        for (slot s = S_FFN_GATE_EXPS; cfg->n_expert > 0 && s <= S_FFN_DOWN_EXPS; s++) {
            const planned *e = find_planned(c, s, l);
            for (int64_t k = 0; e && e->srcs && k < cfg->n_expert; k++)
                if (!e->srcs[k])
                    return ob_err(OB_ERR_FORMAT, "layer %d: expert %lld of %s is missing", l, (long long)k, g_slots[s].gguf);
        }
        if (cfg->arch == OB_HF_QWEN2MOE) {
            static const slot sh[] = {S_FFN_GATE_INP_SHEXP, S_FFN_GATE_SHEXP, S_FFN_UP_SHEXP, S_FFN_DOWN_SHEXP};
            for (size_t i = 0; i < OB_ARRAY_LEN(sh); i++)
                if (!find_planned(c, sh[i], l))
                    return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.%s' is missing (Qwen2-MoE has a shared expert)",
                                  l, g_slots[sh[i]].hf);
        }
        if (cfg->arch == OB_HF_QWEN2 || cfg->arch == OB_HF_QWEN2MOE) {
            static const slot b[] = {S_ATTN_Q_B, S_ATTN_K_B, S_ATTN_V_B};
            for (size_t i = 0; i < OB_ARRAY_LEN(b); i++)
                if (!find_planned(c, b[i], l))
                    return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.%s' is missing (Qwen2 has q/k/v biases)", l,
                                  g_slots[b[i]].hf);
        }
        if (cfg->arch == OB_HF_QWEN3 || cfg->arch == OB_HF_GEMMA3 || cfg->arch == OB_HF_QWEN3MOE ||
            cfg->arch == OB_HF_OLMOE) {
            static const slot nq[] = {S_ATTN_Q_NORM, S_ATTN_K_NORM};
            for (size_t i = 0; i < OB_ARRAY_LEN(nq); i++)
                if (!find_planned(c, nq[i], l))
                    return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.%s' is missing (%s has q/k norms)", l,
                                  g_slots[nq[i]].hf, cfg->hf_arch);
        }
    }
    return 0;
}

static bool same_type(ob_st_dtype d, ob_type t) {
    return (d == OB_ST_F32 && t == OB_TYPE_F32) || (d == OB_ST_F16 && t == OB_TYPE_F16) ||
           (d == OB_ST_BF16 && t == OB_TYPE_BF16);
}

/* Decide where each tensor's bytes come from and size the scratch area. */
static int layout(conv *c) {
    size_t off = 0;
    for (int i = 0; i < c->n_p; i++) {
        planned *p = &c->p[i];
        p->nbytes = ob_row_size(p->type, p->ne[0]) * (size_t)p->ne[1] * (size_t)(p->ne[2] > 1 ? p->ne[2] : 1);
        if (!p->src) continue;
        if (!p->permute_heads && !p->add_one && !p->srcs && !p->split_rows && !p->xform &&
            same_type(p->src->dtype, p->type)) {
            p->data = p->src->data;
            continue;
        }
        off = (off + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
        p->scratch_off = off;
        if (off + p->nbytes < off) return ob_err(OB_ERR_RANGE, "converted tensors overflow size_t");
        off += p->nbytes;
    }
    c->scratch_size = off;
    return 0;
}

/* Scratch in memory for small models; for large ones an unlinked file next
 * to the output, mapped shared, so the page cache (not RAM) holds it. */
static int scratch_open(conv *c, const char *out_path) {
    if (!c->scratch_size) return 0;
    size_t limit = c->opts->scratch_mem_limit ? c->opts->scratch_mem_limit : (size_t)256 << 20;
    if (c->scratch_size < limit) {
        c->scratch = ob_malloc_aligned(c->scratch_size, SCRATCH_ALIGN);
        if (!c->scratch) return ob_err(OB_ERR_OOM, "%zu bytes for converted tensors", c->scratch_size);
        return 0;
    }
    size_t n = strlen(out_path);
    char *tmpl = ob_malloc(n + 16);
    if (!tmpl) return ob_err(OB_ERR_OOM, "path");
    memcpy(tmpl, out_path, n);
    memcpy(tmpl + n, ".tmp-XXXXXX", 12);
    int fd = mkstemp(tmpl);
    if (fd < 0) {
        int rc = ob_err(OB_ERR_IO, "%s: cannot create a scratch file: %s", tmpl, strerror(errno));
        ob_free(tmpl);
        return rc;
    }
    /* Unlinked at once: the mapping keeps the space, and no file is left
     * behind whatever happens next. */
    unlink(tmpl);
    int rc = 0;
    if (ftruncate(fd, (off_t)c->scratch_size) != 0) {
        rc = ob_err(OB_ERR_IO, "%s: scratch file of %zu bytes: %s", tmpl, c->scratch_size, strerror(errno));
    } else {
        void *m = mmap(NULL, c->scratch_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            rc = ob_err(OB_ERR_IO, "%s: mapping the scratch file: %s", tmpl, strerror(errno));
        else {
            c->scratch = m;
            c->scratch_mapped = true;
        }
    }
    close(fd);
    ob_free(tmpl);
    return rc;
}

static void scratch_close(conv *c) {
    if (!c->scratch) return;
    if (c->scratch_mapped)
        munmap(c->scratch, c->scratch_size);
    else
        ob_free_aligned(c->scratch);
    c->scratch = NULL;
}

/* n source elements (unaligned) to float. */
static void src_to_float(ob_st_dtype dt, const unsigned char *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (dt == OB_ST_F32) {
            memcpy(&dst[i], src + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = dt == OB_ST_F16 ? ob_fp16_to_fp32(h) : ob_bf16_to_fp32(h);
        }
    }
}

static int convert_tensor(conv *c, planned *p, float *row) {
    const ob_st_tensor *t = p->src;
    const ob_type_traits *tr = ob_type_get((int)p->type);
    if (!tr || !tr->from_float_ref)
        return ob_err(OB_ERR_INTERNAL, "%s: no reference conversion to %s", p->name, ob_type_name(p->type));
    unsigned char *dst = c->scratch + p->scratch_off;
    /* Rows in the permutation's sense: a matrix row, or one element of a
     * bias, which is permuted like the rows it adds to. */
    int64_t rows = p->n_dims >= 2 ? p->ne[1] : p->ne[0];
    int64_t row_len = p->n_dims >= 2 ? p->ne[0] : 1;
    if (p->srcs || p->split_rows) rows *= p->ne[2]; /* expert e's rows follow expert e-1's */
    size_t esz = ob_st_dtype_size(t->dtype);
    size_t out_row = ob_row_size(p->type, row_len);
    for (int64_t r = 0; r < rows; r++) {
        int64_t sr = p->permute_heads ? (int64_t)ob_convert_qk_src_row(r, rows, p->permute_heads) : r;
        if (ob_hf_gpt_moves_rows(p->xform)) sr = ob_hf_gpt_src_row(&c->cfg, p->xform, p->qkv_row0 + sr);
        const unsigned char *s = t->data + (size_t)sr * (size_t)row_len * esz;
        if (p->srcs) s = p->srcs[r / p->ne[1]]->data + (size_t)(r % p->ne[1]) * (size_t)row_len * esz;
        if (p->split_rows)
            s = t->data + (size_t)((r / p->ne[1]) * p->split_rows + p->split_row0 + r % p->ne[1]) * (size_t)row_len * esz;
        unsigned char *d = dst + (size_t)r * out_row;
        if (p->mla_k_b) { /* row r = (head h, latent column col): kv_b_proj[h * split_rows + i][col], i < row_len */
            const int64_t h = r / p->ne[1], col = r % p->ne[1], lat = p->ne[1];
            for (int64_t i = 0; i < row_len; i++)
                src_to_float(t->dtype, t->data + ((size_t)(h * p->split_rows + i) * (size_t)lat + (size_t)col) * esz,
                             &row[i], 1);
            tr->from_float_ref(row, d, row_len);
            continue;
        }
        if (p->xform == OB_HF_XF_TRANSPOSE) { /* output row r is source column r */
            for (int64_t i = 0; i < row_len; i++)
                src_to_float(t->dtype, t->data + ((size_t)i * (size_t)rows + (size_t)r) * esz, &row[i], 1);
            tr->from_float_ref(row, d, row_len);
            continue;
        }
        if (same_type(t->dtype, p->type) && !p->add_one) {
            memcpy(d, s, out_row);
        } else {
            src_to_float(t->dtype, s, row, row_len);
            if (p->add_one)
                for (int64_t i = 0; i < row_len; i++) row[i] += 1.0f;
            tr->from_float_ref(row, d, row_len);
        }
    }
    p->data = dst;
    return 0;
}

static uint32_t file_type(ob_type t) {
    switch (t) {
    case OB_TYPE_F32: return 0;   /* LLAMA_FTYPE_ALL_F32 */
    case OB_TYPE_F16: return 1;   /* MOSTLY_F16 */
    case OB_TYPE_Q8_0: return 7;  /* MOSTLY_Q8_0 */
    case OB_TYPE_BF16: return 32; /* MOSTLY_BF16 */
    default: return 0;
    }
}

static int set_hparams(conv *c, ob_gguf_writer *w, const char *name) {
    const ob_hf_config *cfg = &c->cfg;
    const char *a = cfg->gguf_arch;
    char k[128];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", a, suffix), k)
    OB_TRY(ob_gguf_writer_set_str(w, "general.architecture", a));
    OB_TRY(ob_gguf_writer_set_str(w, "general.type", "model"));
    OB_TRY(ob_gguf_writer_set_str(w, "general.name", name));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)cfg->n_vocab));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)cfg->n_layer));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)cfg->n_ctx));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)cfg->n_embd));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)cfg->n_ff));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)cfg->n_head));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)cfg->n_head_kv));
    OB_TRY(ob_gguf_writer_set_f32(w, KEY(ob_hf_gpt_is(cfg->arch) || ob_hf_enc_is(cfg->arch) || cfg->arch == OB_HF_PHI2 || cfg->arch == OB_HF_OLMO ? "attention.layer_norm_epsilon"
                                                                  : "attention.layer_norm_rms_epsilon"),
                                  (float)cfg->rms_eps));
    if (cfg->n_rot > 0) { /* 0: learned positions (gpt2, starcoder) */
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.freq_base"), (float)cfg->rope_theta));
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)cfg->n_rot));
    }
    if (ob_hf_gpt_is(cfg->arch)) OB_TRY(ob_hf_gpt_keys(cfg, w));
    if (ob_hf_enc_is(cfg->arch)) OB_TRY(ob_hf_enc_keys(cfg, w));
    if (cfg->arch == OB_HF_GEMMA2 || cfg->arch == OB_HF_GEMMA3) {
        if (cfg->attn_softcap > 0)
            OB_TRY(ob_gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), (float)cfg->attn_softcap));
        if (cfg->final_softcap > 0)
            OB_TRY(ob_gguf_writer_set_f32(w, KEY("final_logit_softcapping"), (float)cfg->final_softcap));
        /* llama.cpp takes 1/sqrt(head_dim) (or n_embd/n_head for the 27B
         * models); when the config says otherwise, say so in the file */
        if (cfg->query_pre_attn_scalar > 0 && cfg->query_pre_attn_scalar != (double)cfg->head_dim)
            OB_TRY(ob_gguf_writer_set_f32(w, KEY("attention.scale"), (float)(1.0 / sqrt(cfg->query_pre_attn_scalar))));
        if (cfg->swa_pattern != (cfg->arch == OB_HF_GEMMA2 ? 2 : 6))
            OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.sliding_window_pattern"), (uint32_t)cfg->swa_pattern));
        if (cfg->arch == OB_HF_GEMMA3 && cfg->rope_local_theta != 10000.0)
            OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), (float)cfg->rope_local_theta));
    }
    if (cfg->n_expert > 0) {
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)cfg->n_expert));
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)cfg->n_expert_used));
        if (cfg->arch != OB_HF_MIXTRAL)
            OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)cfg->n_ff_exp));
        if (cfg->n_ff_shexp > 0 && cfg->arch != OB_HF_DEEPSEEK3) /* deepseek2: expert_shared_count */
            OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)cfg->n_ff_shexp));
        /* llama.cpp hard-codes the renormalisation per architecture
         * (qwen2moe: no; qwen3moe, llama: yes); a config that differs says so */
        if (cfg->arch != OB_HF_DEEPSEEK3 && /* deepseek2: ob_hf_deepseek_keys */
            cfg->expert_norm != (cfg->arch != OB_HF_QWEN2MOE && cfg->arch != OB_HF_OLMOE)) /* olmoe: no */
            OB_TRY(ob_gguf_writer_set_bool(w, KEY("expert_weights_norm"), cfg->expert_norm));
    }
    if (cfg->arch == OB_HF_GRANITE || cfg->arch == OB_HF_GRANITEMOE) {
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("embedding_scale"), (float)cfg->granite_embd));
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("residual_scale"), (float)cfg->granite_resid));
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("attention.scale"), (float)cfg->granite_attn));
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("logit_scale"), (float)cfg->granite_logit));
    }
    if (cfg->longrope) {
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), (float)cfg->longrope_attn_factor));
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)cfg->rope_orig_ctx));
    }
    /* llama.cpp writes these whenever config.json states head_dim; readers
     * derive them from n_embd / n_head otherwise, which is wrong for models
     * such as Qwen3 whose head_dim differs. */
    if (cfg->arch == OB_HF_DEEPSEEK3) {
        OB_TRY(ob_hf_deepseek_keys(cfg, w)); /* MLA's key/value lengths, routing */
    } else if (cfg->head_dim_given || cfg->head_dim * cfg->n_head != cfg->n_embd) {
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)cfg->head_dim));
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)cfg->head_dim));
    }
    if (cfg->sliding_window > 0)
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)cfg->sliding_window));
    if (cfg->rope_scaling == OB_HF_ROPE_LINEAR || cfg->rope_scaling == OB_HF_ROPE_YARN) {
        bool yarn = cfg->rope_scaling == OB_HF_ROPE_YARN;
        OB_TRY(ob_gguf_writer_set_str(w, KEY("rope.scaling.type"), yarn ? "yarn" : "linear"));
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), (float)cfg->rope_factor));
        if (yarn) {
            OB_TRY(ob_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)cfg->rope_orig_ctx));
            if (cfg->has_yarn_ext_factor)
                OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_ext_factor"), (float)cfg->yarn_ext_factor));
            if (cfg->has_yarn_attn_factor)
                OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_attn_factor"), (float)cfg->yarn_attn_factor));
            if (cfg->has_yarn_beta_fast)
                OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), (float)cfg->yarn_beta_fast));
            if (cfg->has_yarn_beta_slow)
                OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), (float)cfg->yarn_beta_slow));
        }
    }
#undef KEY
    OB_TRY(ob_gguf_writer_set_u32(w, "general.file_type", file_type(c->opts->outtype)));
    OB_TRY(ob_gguf_writer_set_u32(w, "general.quantization_version", 2));
    return 0;
}

/* general.name: the option, else the folder's last component. */
static void model_name(const char *dir, const char *opt, char *buf, size_t size) {
    if (opt && *opt) {
        snprintf(buf, size, "%s", opt);
        return;
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    size_t len = n - b;
    if (len == 0 || (len == 1 && dir[b] == '.')) {
        snprintf(buf, size, "model");
        return;
    }
    snprintf(buf, size, "%.*s", (int)len, dir + b);
}

static int run(conv *c, const char *dir, const char *out_path) {
    OB_TRY(ob_hf_config_load(dir, &c->cfg));
    OB_TRY(ob_st_set_open_dir(dir, &c->st));
    for (int64_t i = 0; i < ob_st_set_n_tensors(c->st); i++) OB_TRY(plan_source(c, ob_st_set_tensor_at(c->st, i)));
    OB_TRY(check_complete(c));
    if (c->cfg.rope_scaling == OB_HF_ROPE_LLAMA3) OB_TRY(plan_rope_freqs(c));
    if (c->cfg.longrope) OB_TRY(plan_longrope(c));
    qsort(c->p, (size_t)c->n_p, sizeof *c->p, cmp_planned);
    OB_TRY(layout(c));

    ob_gguf_writer *w;
    OB_TRY(ob_gguf_writer_create(&w));
    char name[256];
    model_name(dir, c->opts->name, name, sizeof name);
    int rc = set_hparams(c, w, name);
    if (rc == 0) rc = ob_hf_vocab_write(dir, &c->cfg, w);
    if (rc == 0) rc = scratch_open(c, out_path);
    float *row = NULL;
    if (rc == 0) {
        int64_t max_row = 1;
        for (int i = 0; i < c->n_p; i++)
            if (c->p[i].ne[0] > max_row) max_row = c->p[i].ne[0];
        row = ob_malloc((size_t)max_row * sizeof *row);
        if (!row) rc = ob_err(OB_ERR_OOM, "row buffer");
    }
    int64_t n_params = 0;
    for (int i = 0; i < c->n_p && rc == 0; i++) {
        planned *p = &c->p[i];
        if (p->scratch_off != SIZE_MAX) rc = convert_tensor(c, p, row);
        if (rc == 0) rc = ob_gguf_writer_add_tensor(w, p->name, p->type, p->n_dims, p->ne, p->data);
        n_params += p->ne[0] * p->ne[1] * (p->ne[2] > 1 ? p->ne[2] : 1);
        OB_LOGI("%-28s %-5s -> %-5s [%lld, %lld]%s", p->name, p->src ? ob_st_dtype_name(p->src->dtype) : "-",
                ob_type_name(p->type), (long long)p->ne[0], (long long)p->ne[1],
                p->permute_heads ? " (q/k rows permuted)" : "");
    }
    if (rc == 0) rc = ob_gguf_writer_write_file(w, out_path);
    if (rc == 0)
        OB_LOGI("wrote %s: %s, %d tensors, %lld parameters, %s%s", out_path, c->cfg.gguf_arch, c->n_p,
                (long long)n_params, ob_type_name(c->opts->outtype),
                c->n_f16_fallback ? " (some matrices f16: rows not a multiple of the block)" : "");
    ob_free(row);
    ob_gguf_writer_free(w);
    return rc;
}

int ob_convert_hf(const char *hf_dir, const char *out_path, const ob_convert_opts *opts) {
    ob_convert_opts dflt;
    if (!opts) {
        ob_convert_opts_init(&dflt);
        opts = &dflt;
    }
    if (opts->outtype != OB_TYPE_F32 && opts->outtype != OB_TYPE_F16 && opts->outtype != OB_TYPE_BF16 &&
        opts->outtype != OB_TYPE_Q8_0)
        return ob_err(OB_ERR_INVALID_ARG, "output type %s is not one of f32, f16, bf16, q8_0",
                      ob_type_name(opts->outtype));
    conv c;
    memset(&c, 0, sizeof c);
    c.opts = opts;
    int rc = run(&c, hf_dir, out_path);
    scratch_close(&c);
    ob_free(c.rope_freqs);
    for (int i = 0; i < c.n_p; i++) ob_free(c.p[i].srcs);
    ob_free(c.p);
    ob_st_set_free(c.st);
    if (rc < 0) return ob_err_wrap(rc, "converting %s", hf_dir);
    return 0;
}
