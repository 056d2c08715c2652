/*
 * hf_deepseek.c - config.json and GGUF keys of DeepseekV3ForCausalLM
 * (DeepSeek-V3, R1, Kimi-K2), written as llama.cpp's `deepseek2`.
 *
 * hf_config.c reads the keys every decoder has (hidden_size, layers,
 * heads, RoPE base, norms) and hands the rest here: the multi-head latent
 * attention ranks and head widths, the leading dense layers and the
 * routing (sigmoid scores plus a correction bias for choosing, grouped
 * top-k, renormalised weights times routed_scaling_factor, shared experts).
 * convert.c names the tensors (attn_q_a, attn_kv_a_mqa, attn_k_b, attn_v_b,
 * exp_probs_b, ffn_*_shexp, ...) and splits kv_b_proj as llama.cpp does.
 *
 * The GGUF form is llama.cpp's since its MLA support: attention.head_count_kv
 * 1, key_length kv_lora_rank + qk_rope_head_dim and value_length
 * kv_lora_rank (the compressed cache), key_length_mla / value_length_mla
 * the per-head widths of the decompressed attention.
 */
#include <stdio.h>
#include <string.h>

#include "../core/status.h"
#include "hf_internal.h"

/* An integer key, `dflt` when absent or null (transformers' default). */
static int ds_int(json_t *root, const char *path, const char *key, int64_t dflt, int64_t lo, int64_t *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
    } else {
        double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1e300;
        /* the range first: converting a double outside int64's range is undefined (found by fuzz_hfconfig) */
        if (!(d >= (double)lo && d <= (double)((int64_t)1 << 30)) || d != (double)(int64_t)d)
            return ob_err(OB_ERR_FORMAT, "%s: key '%s' must be an integer >= %lld", path, key, (long long)lo);
        *out = (int64_t)d;
    }
    return 0;
}

int ob_hf_deepseek_parse(json_t *root, const char *path, ob_hf_config *cfg) {
    int64_t n_expert = 0, per_tok = 0, n_ff_exp = 0;
    OB_TRY(ds_int(root, path, "q_lora_rank", 1536, 1, &cfg->ds.q_lora_rank));
    if (json_is_null(json_object_get(root, "q_lora_rank"))) cfg->ds.q_lora_rank = 0; /* V2-Lite style q_proj */
    OB_TRY(ds_int(root, path, "kv_lora_rank", 512, 1, &cfg->ds.kv_lora_rank));
    OB_TRY(ds_int(root, path, "qk_nope_head_dim", 128, 1, &cfg->ds.qk_nope));
    OB_TRY(ds_int(root, path, "qk_rope_head_dim", 64, 2, &cfg->ds.qk_rope));
    OB_TRY(ds_int(root, path, "v_head_dim", 128, 1, &cfg->ds.v_head_dim));
    OB_TRY(ds_int(root, path, "n_routed_experts", 256, 1, &n_expert));
    OB_TRY(ds_int(root, path, "num_experts_per_tok", 8, 1, &per_tok));
    OB_TRY(ds_int(root, path, "moe_intermediate_size", 2048, 1, &n_ff_exp));
    OB_TRY(ds_int(root, path, "n_shared_experts", 1, 0, &cfg->ds.n_shared));
    OB_TRY(ds_int(root, path, "first_k_dense_replace", 3, 0, &cfg->ds.n_dense_lead));
    OB_TRY(ds_int(root, path, "n_group", 8, 1, &cfg->ds.n_group));
    OB_TRY(ds_int(root, path, "topk_group", 4, 1, &cfg->ds.topk_group));
    if (cfg->ds.qk_rope % 2) return ob_err(OB_ERR_FORMAT, "%s: qk_rope_head_dim is odd; RoPE rotates pairs", path);
    if (n_expert > 4096 || per_tok > n_expert)
        return ob_err(OB_ERR_FORMAT, "%s: num_experts_per_tok %lld of n_routed_experts %lld", path, (long long)per_tok,
                      (long long)n_expert);
    /* groups are scored by their two best experts (transformers' topk(2)) */
    if (n_expert % cfg->ds.n_group || n_expert / cfg->ds.n_group < 2 || cfg->ds.topk_group > cfg->ds.n_group ||
        per_tok > cfg->ds.topk_group * (n_expert / cfg->ds.n_group))
        return ob_err(OB_ERR_FORMAT, "%s: n_group %lld / topk_group %lld do not fit %lld experts, %lld per token", path,
                      (long long)cfg->ds.n_group, (long long)cfg->ds.topk_group, (long long)n_expert,
                      (long long)per_tok);
    if (cfg->ds.n_dense_lead > cfg->n_layer)
        return ob_err(OB_ERR_FORMAT, "%s: first_k_dense_replace %lld > num_hidden_layers", path,
                      (long long)cfg->ds.n_dense_lead);
    json_t *v = json_object_get(root, "routed_scaling_factor");
    if (v && !json_is_null(v) && !json_is_number(v))
        return ob_err(OB_ERR_FORMAT, "%s: key 'routed_scaling_factor' is not a number", path);
    cfg->ds.routed_scale = v && json_is_number(v) ? json_number_value(v) : 2.5;
    if (!(cfg->ds.routed_scale > 0)) return ob_err(OB_ERR_FORMAT, "%s: routed_scaling_factor must be > 0", path);
    v = json_object_get(root, "norm_topk_prob");
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return ob_err(OB_ERR_FORMAT, "%s: key 'norm_topk_prob' is not a boolean", path);
    cfg->expert_norm = v && json_is_boolean(v) ? json_is_true(v) : true;

    /* what transformers' DeepseekV3 computes and nothing else */
    static const struct {
        const char *key, *want;
    } fixed[] = {{"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"}};
    for (size_t i = 0; i < OB_ARRAY_LEN(fixed); i++) {
        v = json_object_get(root, fixed[i].key);
        if (v && !json_is_null(v) && (!json_is_string(v) || strcmp(json_string_value(v), fixed[i].want) != 0))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: %s must be '%s' for %s", path, fixed[i].key, fixed[i].want,
                          cfg->hf_arch);
    }
    if (json_is_true(json_object_get(root, "attention_bias")))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: attention_bias true is not supported for %s", path, cfg->hf_arch);
    /* llama.cpp rotates adjacent pairs of the rope part (its normal RoPE),
     * which is transformers' rope_interleave; the other pairing would need
     * the q_b / kv_a rows permuted, which llama.cpp's files do not do */
    if (json_is_false(json_object_get(root, "rope_interleave")))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: rope_interleave false is not supported for %s", path, cfg->hf_arch);
    /* YaRN for DeepSeek also scales the softmax by mscale(mscale_all_dim)^2
     * (llama.cpp: rope.scaling.yarn_log_multiplier); not carried yet */
    if (cfg->rope_scaling != OB_HF_ROPE_NONE)
        return ob_err(OB_ERR_UNSUPPORTED, "%s: RoPE scaling is not supported for %s yet", path, cfg->hf_arch);

    cfg->n_expert = n_expert;
    cfg->n_expert_used = per_tok;
    cfg->n_ff_exp = n_ff_exp;
    cfg->n_ff_shexp = n_ff_exp * cfg->ds.n_shared; /* the shared experts run as one MLP of this width */
    cfg->head_dim = cfg->ds.qk_nope + cfg->ds.qk_rope;
    cfg->n_rot = cfg->ds.qk_rope;
    cfg->n_head_kv = 1;
    return 0;
}

int ob_hf_deepseek_keys(const ob_hf_config *cfg, ob_gguf_writer *w) {
    char k[128];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", cfg->gguf_arch, suffix), k)
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("leading_dense_block_count"), (uint32_t)cfg->ds.n_dense_lead));
    if (cfg->ds.q_lora_rank > 0)
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.q_lora_rank"), (uint32_t)cfg->ds.q_lora_rank));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.kv_lora_rank"), (uint32_t)cfg->ds.kv_lora_rank));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)(cfg->ds.kv_lora_rank + cfg->ds.qk_rope)));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)cfg->ds.kv_lora_rank));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.key_length_mla"), (uint32_t)(cfg->ds.qk_nope + cfg->ds.qk_rope)));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.value_length_mla"), (uint32_t)cfg->ds.v_head_dim));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_shared_count"), (uint32_t)cfg->ds.n_shared));
    OB_TRY(ob_gguf_writer_set_f32(w, KEY("expert_weights_scale"), (float)cfg->ds.routed_scale));
    if (cfg->expert_norm) OB_TRY(ob_gguf_writer_set_bool(w, KEY("expert_weights_norm"), true));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_gating_func"), 2)); /* llama.cpp: 1 softmax, 2 sigmoid */
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_group_count"), (uint32_t)cfg->ds.n_group));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("expert_group_used_count"), (uint32_t)cfg->ds.topk_group));
#undef KEY
    return 0;
}
