/*
 * hf_config.c - config.json -> ob_hf_config.
 *
 * Reads the keys both transformers 4.x and 5.x write: RoPE settings come
 * from `rope_parameters` (5.x, with rope_theta inside) or `rope_scaling` +
 * `rope_theta` (4.x), like llama.cpp's converter. A `text_config` object, if
 * any, takes precedence over the top level. Defaults follow transformers'
 * classes where a key may be absent; the keys that define the tensor shapes
 * are required.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "hf_encoder.h"
#include "hf_gptlike.h"
#include "hf_internal.h"

void ob_hf_special_ids(json_t *root, ob_hf_config *cfg) {
    static const char *const ids[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    int64_t *dst[] = {&cfg->bos_id, &cfg->eos_id, &cfg->pad_id};
    for (size_t i = 0; i < OB_ARRAY_LEN(ids); i++) {
        json_t *v = json_object_get(root, ids[i]);
        double d = json_number_value(v); /* 0 for non-numbers */
        *dst[i] = json_is_number(v) && d >= 0 && d < 2147483648.0 && d == floor(d) ? (int64_t)d : -1;
    }
}

char *ob_hf_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = ob_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

typedef struct cfgsrc {
    json_t *root, *text; /* text: text_config or NULL */
    const char *path;
} cfgsrc;

/* A key from text_config first, then the top level; NULL (JSON null counts
 * as absent) when neither has it. */
static json_t *cget(const cfgsrc *c, const char *key) {
    json_t *v = c->text ? json_object_get(c->text, key) : NULL;
    if (!v || json_is_null(v)) v = json_object_get(c->root, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* An integer value: a JSON integer, or a real that is a whole number. */
static int as_int(const json_t *v, int64_t *out) {
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15) {
            *out = (int64_t)d;
            return 1;
        }
    }
    return 0;
}

static int get_int(const cfgsrc *c, const char *key, bool required, int64_t dflt, int64_t *out) {
    json_t *v = cget(c, key);
    if (!v) {
        if (required) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is missing", c->path, key);
        *out = dflt;
        return 0;
    }
    if (!as_int(v, out)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not an integer", c->path, key);
    return 0;
}

static int get_pos_int(const cfgsrc *c, const char *key, bool required, int64_t dflt, int64_t *out) {
    OB_TRY(get_int(c, key, required, dflt, out));
    if (*out <= 0 || *out > ((int64_t)1 << 31))
        return ob_err(OB_ERR_FORMAT, "%s: key '%s' = %lld is out of range", c->path, key, (long long)*out);
    return 0;
}

static int num_in(const json_t *obj, const char *key, const char *path, const char *where, bool *has, double *out) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    *has = false;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return ob_err(OB_ERR_FORMAT, "%s: %s.%s is not a number", path, where, key);
    *out = json_number_value(v);
    *has = true;
    return 0;
}

static int parse_arch(const cfgsrc *c, ob_hf_config *cfg) {
    json_t *archs = json_object_get(c->root, "architectures");
    const char *a = NULL;
    if (json_is_array(archs) && json_array_size(archs) > 0 && json_is_string(json_array_get(archs, 0)))
        a = json_string_value(json_array_get(archs, 0));
    if (!a) return ob_err(OB_ERR_FORMAT, "%s: 'architectures' is missing or not a list of names", c->path);
    snprintf(cfg->hf_arch, sizeof cfg->hf_arch, "%s", a);
    if (!strcmp(a, "LlamaForCausalLM") || !strcmp(a, "LLaMAForCausalLM")) {
        cfg->arch = OB_HF_LLAMA;
        cfg->gguf_arch = "llama";
    } else if (!strcmp(a, "MistralForCausalLM")) {
        cfg->arch = OB_HF_MISTRAL;
        cfg->gguf_arch = "llama";
    } else if (!strcmp(a, "Qwen2ForCausalLM")) {
        cfg->arch = OB_HF_QWEN2;
        cfg->gguf_arch = "qwen2";
    } else if (!strcmp(a, "Qwen3ForCausalLM")) {
        cfg->arch = OB_HF_QWEN3;
        cfg->gguf_arch = "qwen3";
    } else if (!strcmp(a, "GemmaForCausalLM")) {
        cfg->arch = OB_HF_GEMMA;
        cfg->gguf_arch = "gemma";
    } else if (!strcmp(a, "Gemma2ForCausalLM")) {
        cfg->arch = OB_HF_GEMMA2;
        cfg->gguf_arch = "gemma2";
    } else if (!strcmp(a, "Gemma3ForCausalLM")) {
        cfg->arch = OB_HF_GEMMA3;
        cfg->gguf_arch = "gemma3";
    } else if (!strcmp(a, "Phi3ForCausalLM")) {
        cfg->arch = OB_HF_PHI3;
        cfg->gguf_arch = "phi3";
    } else if (!strcmp(a, "PhiForCausalLM")) {
        cfg->arch = OB_HF_PHI2;
        cfg->gguf_arch = "phi2";
    } else if (!strcmp(a, "Qwen3MoeForCausalLM")) {
        cfg->arch = OB_HF_QWEN3MOE;
        cfg->gguf_arch = "qwen3moe";
    } else if (!strcmp(a, "Qwen2MoeForCausalLM")) {
        cfg->arch = OB_HF_QWEN2MOE;
        cfg->gguf_arch = "qwen2moe";
    } else if (!strcmp(a, "MixtralForCausalLM")) {
        cfg->arch = OB_HF_MIXTRAL;
        cfg->gguf_arch = "llama";
    } else if (!strcmp(a, "GraniteForCausalLM")) {
        cfg->arch = OB_HF_GRANITE;
        cfg->gguf_arch = "granite";
    } else if (!strcmp(a, "Olmo2ForCausalLM")) {
        cfg->arch = OB_HF_OLMO2;
        cfg->gguf_arch = "olmo2";
    } else if (!strcmp(a, "SmolLM3ForCausalLM")) {
        cfg->arch = OB_HF_SMOLLM3;
        cfg->gguf_arch = "smollm3";
    } else if (!strcmp(a, "ArceeForCausalLM")) {
        cfg->arch = OB_HF_ARCEE;
        cfg->gguf_arch = "arcee";
    } else if (!strcmp(a, "Ernie4_5ForCausalLM")) {
        cfg->arch = OB_HF_ERNIE45;
        cfg->gguf_arch = "ernie4_5";
    } else if (!strcmp(a, "SeedOssForCausalLM")) {
        cfg->arch = OB_HF_SEED_OSS;
        cfg->gguf_arch = "seed_oss";
    } else if (!strcmp(a, "OlmoForCausalLM")) {
        cfg->arch = OB_HF_OLMO;
        cfg->gguf_arch = "olmo";
    } else if (!strcmp(a, "Glm4ForCausalLM")) {
        cfg->arch = OB_HF_GLM4;
        cfg->gguf_arch = "glm4";
    } else if (!strcmp(a, "OlmoeForCausalLM")) {
        cfg->arch = OB_HF_OLMOE;
        cfg->gguf_arch = "olmoe";
    } else if (!strcmp(a, "GraniteMoeForCausalLM")) {
        cfg->arch = OB_HF_GRANITEMOE;
        cfg->gguf_arch = "granitemoe";
    } else if (!strcmp(a, "BitNetForCausalLM")) {
        cfg->arch = OB_HF_BITNET;
        cfg->gguf_arch = "bitnet";
    } else if (!strcmp(a, "InternLM2ForCausalLM")) { /* remote code; Llama's math */
        cfg->arch = OB_HF_INTERNLM2;
        cfg->gguf_arch = "internlm2";
    } else if (!strcmp(a, "DeepseekV3ForCausalLM")) { /* V3, R1, Kimi-K2: hf_deepseek.c */
        cfg->arch = OB_HF_DEEPSEEK3;
        cfg->gguf_arch = "deepseek2";
    } else if (ob_hf_gpt_arch(a, cfg)) { /* GPT lineage: hf_gptlike.c */
    } else if (ob_hf_enc_arch(a, cfg)) { /* BERT, ModernBERT: hf_encoder.c */
    } else {
        return ob_err(OB_ERR_UNSUPPORTED,
                      "%s: architecture '%s' is not supported (LlamaForCausalLM, MistralForCausalLM, "
                      "Qwen2ForCausalLM, Qwen3ForCausalLM, GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                      "Phi3ForCausalLM, PhiForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, MixtralForCausalLM, "
                      "GraniteForCausalLM, Olmo2ForCausalLM, SmolLM3ForCausalLM, ArceeForCausalLM, "
                      "Ernie4_5ForCausalLM, SeedOssForCausalLM, OlmoForCausalLM, Glm4ForCausalLM, OlmoeForCausalLM, "
                      "GraniteMoeForCausalLM, DeepseekV3ForCausalLM, BitNetForCausalLM, InternLM2ForCausalLM, "
                      "BertModel, ModernBertModel are)",
                      c->path, a);
    }
    return 0;
}

/* RoPE: rope_parameters (transformers 5) or rope_scaling (4.x). */
static int parse_rope(const cfgsrc *c, ob_hf_config *cfg) {
    json_t *rp = cget(c, "rope_parameters");
    if (!json_is_object(rp)) rp = cget(c, "rope_scaling");
    if (rp && !json_is_object(rp)) return ob_err(OB_ERR_FORMAT, "%s: rope_scaling is not an object", c->path);
    const char *where = rp == cget(c, "rope_parameters") ? "rope_parameters" : "rope_scaling";
    /* Per-layer-type parameters (Gemma-style): the full-attention set applies;
     * the sliding set gives the local layers' base. */
    json_t *full = rp ? json_object_get(rp, "full_attention") : NULL;
    json_t *local = rp ? json_object_get(rp, "sliding_attention") : NULL;
    if (json_is_object(full)) rp = full;
    bool has_local;
    double dl = 0;
    cfg->rope_local_theta = 10000.0;
    OB_TRY(num_in(json_is_object(local) ? local : NULL, "rope_theta", c->path, "sliding_attention", &has_local, &dl));
    if (has_local) {
        cfg->rope_local_theta = dl;
    } else {
        json_t *v = cget(c, "rope_local_base_freq");
        if (json_is_number(v)) cfg->rope_local_theta = json_number_value(v);
    }
    if (!(cfg->rope_local_theta > 1.0)) return ob_err(OB_ERR_FORMAT, "%s: local rope_theta is not > 1", c->path);

    bool has;
    double d;
    cfg->rope_theta = 10000.0;
    OB_TRY(num_in(rp, "rope_theta", c->path, where, &has, &d));
    if (has) {
        cfg->rope_theta = d;
    } else {
        json_t *v = cget(c, "rope_theta");
        if (v && !json_is_number(v)) return ob_err(OB_ERR_FORMAT, "%s: key 'rope_theta' is not a number", c->path);
        if (v) cfg->rope_theta = json_number_value(v);
    }
    if (!(cfg->rope_theta > 1.0)) return ob_err(OB_ERR_FORMAT, "%s: rope_theta %g is not > 1", c->path, cfg->rope_theta);

    cfg->rope_scaling = OB_HF_ROPE_NONE;
    cfg->n_rot = cfg->head_dim;
    json_t *pf = rp ? json_object_get(rp, "partial_rotary_factor") : NULL;
    if (!json_is_number(pf)) pf = cget(c, "partial_rotary_factor");
    if (json_is_number(pf) && json_number_value(pf) != 1.0) {
        double f = json_number_value(pf);
        if (cfg->arch != OB_HF_PHI2 && cfg->arch != OB_HF_PHI3 && cfg->arch != OB_HF_GLM4)
            return ob_err(OB_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported for %s", c->path, f,
                          cfg->hf_arch);
        cfg->n_rot = f > 0 && f < 1 ? (int64_t)((double)cfg->head_dim * f) : 0;
        if (cfg->n_rot < 2 || cfg->n_rot % 2)
            return ob_err(OB_ERR_FORMAT, "%s: partial_rotary_factor %g gives %lld rotated dimensions", c->path, f,
                          (long long)cfg->n_rot);
    }
    if (!rp) return 0;
    json_t *jt = json_object_get(rp, "rope_type");
    if (!json_is_string(jt)) jt = json_object_get(rp, "type");
    if (!jt || json_is_null(jt)) return 0;
    if (!json_is_string(jt)) return ob_err(OB_ERR_FORMAT, "%s: %s.rope_type is not a string", c->path, where);
    const char *type = json_string_value(jt);
    if (!strcmp(type, "default")) return 0;

    bool has_factor;
    double factor = 0;
    OB_TRY(num_in(rp, "factor", c->path, where, &has_factor, &factor));
    int64_t orig = 0;
    json_t *jo = json_object_get(rp, "original_max_position_embeddings");
    if (!jo || json_is_null(jo)) jo = cget(c, "original_max_position_embeddings");
    if (jo && !as_int(jo, &orig))
        return ob_err(OB_ERR_FORMAT, "%s: original_max_position_embeddings is not an integer", c->path);

    if (!strcmp(type, "linear")) {
        if (!has_factor || !(factor > 0))
            return ob_err(OB_ERR_FORMAT, "%s: linear RoPE scaling needs %s.factor > 0", c->path, where);
        cfg->rope_scaling = OB_HF_ROPE_LINEAR;
        cfg->rope_factor = factor;
    } else if (!strcmp(type, "yarn")) {
        if (!has_factor || !(factor > 0))
            return ob_err(OB_ERR_FORMAT, "%s: YaRN RoPE scaling needs %s.factor > 0", c->path, where);
        if (!jo || orig <= 0)
            return ob_err(OB_ERR_FORMAT, "%s: YaRN RoPE scaling needs original_max_position_embeddings", c->path);
        json_t *tr = json_object_get(rp, "truncate");
        if (json_is_false(tr))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: YaRN with truncate=false is not supported", c->path);
        cfg->rope_scaling = OB_HF_ROPE_YARN;
        cfg->rope_factor = factor;
        cfg->rope_orig_ctx = orig;
        /* As llama.cpp: the optional parameters are written only when given. */
        OB_TRY(num_in(rp, "extrapolation_factor", c->path, where, &cfg->has_yarn_ext_factor, &cfg->yarn_ext_factor));
        OB_TRY(num_in(rp, "attention_factor", c->path, where, &cfg->has_yarn_attn_factor, &cfg->yarn_attn_factor));
        if (!cfg->has_yarn_attn_factor)
            OB_TRY(num_in(rp, "attn_factor", c->path, where, &cfg->has_yarn_attn_factor, &cfg->yarn_attn_factor));
        OB_TRY(num_in(rp, "beta_fast", c->path, where, &cfg->has_yarn_beta_fast, &cfg->yarn_beta_fast));
        OB_TRY(num_in(rp, "beta_slow", c->path, where, &cfg->has_yarn_beta_slow, &cfg->yarn_beta_slow));
        if (json_object_get(rp, "mscale") && !cfg->has_yarn_attn_factor)
            OB_LOGW("%s: YaRN mscale/mscale_all_dim are not carried into the GGUF file", c->path);
    } else if ((!strcmp(type, "longrope") || !strcmp(type, "su")) && cfg->arch == OB_HF_PHI3) { /* "su": early Phi-3 */
        json_t *sf = json_object_get(rp, "short_factor"), *lf = json_object_get(rp, "long_factor");
        size_t half = (size_t)(cfg->n_rot / 2);
        if (!json_is_array(sf) || !json_is_array(lf) || json_array_size(sf) != half || json_array_size(lf) != half ||
            half > OB_ARRAY_LEN(cfg->longrope_short))
            return ob_err(OB_ERR_FORMAT, "%s: LongRoPE needs short_factor and long_factor of %zu numbers", c->path, half);
        for (size_t i = 0; i < half; i++) {
            json_t *a = json_array_get(sf, i), *b = json_array_get(lf, i);
            if (!json_is_number(a) || !json_is_number(b) || !(json_number_value(a) > 0) || !(json_number_value(b) > 0))
                return ob_err(OB_ERR_FORMAT, "%s: LongRoPE factor %zu is not a number > 0", c->path, i);
            cfg->longrope_short[i] = json_number_value(a);
            cfg->longrope_long[i] = json_number_value(b);
        }
        if (!jo || orig <= 0)
            return ob_err(OB_ERR_FORMAT, "%s: LongRoPE needs original_max_position_embeddings", c->path);
        cfg->longrope = true;
        cfg->rope_orig_ctx = orig;
        /* transformers: factor = max positions / original; cos and sin times
         * sqrt(1 + ln(factor) / ln(original)) unless attention_factor is given */
        double f = has_factor ? factor : (double)cfg->n_ctx / (double)orig;
        bool has_af;
        double af = 1.0;
        OB_TRY(num_in(rp, "attention_factor", c->path, where, &has_af, &af));
        if (!has_af) af = f > 1.0 ? sqrt(1.0 + log(f) / log((double)orig)) : 1.0;
        cfg->longrope_attn_factor = af;
    } else if (!strcmp(type, "dynamic") && cfg->arch == OB_HF_INTERNLM2) {
        /* InternLM2's dynamic NTK raises the RoPE base only once a sequence is
         * longer than max_position_embeddings; up to there it is plain RoPE,
         * which is what llama.cpp's internlm2 runs (it has no key for it) */
        OB_LOGW("%s: dynamic NTK RoPE scaling is written as plain RoPE: exact up to max_position_embeddings "
                "(%lld tokens), past which transformers raises the base and this model does not",
                c->path, (long long)cfg->n_ctx);
    } else if (!strcmp(type, "llama3")) {
        cfg->rope_scaling = OB_HF_ROPE_LLAMA3;
        cfg->rope_factor = has_factor ? factor : 8.0;
        bool h;
        cfg->llama3_low_freq_factor = 1.0;
        cfg->llama3_high_freq_factor = 4.0;
        OB_TRY(num_in(rp, "low_freq_factor", c->path, where, &h, &d));
        if (h) cfg->llama3_low_freq_factor = d;
        OB_TRY(num_in(rp, "high_freq_factor", c->path, where, &h, &d));
        if (h) cfg->llama3_high_freq_factor = d;
        /* transformers reads it from the RoPE parameters; 8192 is Llama 3's. */
        cfg->rope_orig_ctx = jo ? orig : 8192;
        if (!(cfg->rope_factor > 0) || cfg->rope_orig_ctx <= 0 ||
            !(cfg->llama3_high_freq_factor > cfg->llama3_low_freq_factor) || !(cfg->llama3_low_freq_factor > 0))
            return ob_err(OB_ERR_FORMAT, "%s: inconsistent llama3 RoPE parameters", c->path);
    } else {
        return ob_err(OB_ERR_UNSUPPORTED, "%s: RoPE scaling '%s' is not supported (linear, yarn, llama3 are)",
                      c->path, type);
    }
    return 0;
}

/* The Llama-lineage variants (src/model/llama_variants.c): refuse the
 * options their GGUF form cannot carry rather than write a model that
 * computes something else. */
static int parse_llama_variant(const cfgsrc *c, ob_hf_config *cfg) {
    if (cfg->arch == OB_HF_SMOLLM3) {
        /* llama.cpp skips RoPE on layers il with (il + 1) % 4 == 0 and has no key for another period */
        int64_t step = 4;
        OB_TRY(get_pos_int(c, "no_rope_layer_interval", false, 4, &step));
        json_t *nr = cget(c, "no_rope_layers");
        if (nr && (!json_is_array(nr) || (int64_t)json_array_size(nr) < cfg->n_layer))
            return ob_err(OB_ERR_FORMAT, "%s: no_rope_layers must list every layer", c->path);
        for (int64_t i = 0; i < cfg->n_layer; i++) {
            int64_t use = (i + 1) % step != 0;
            if (nr && !as_int(json_array_get(nr, (size_t)i), &use))
                return ob_err(OB_ERR_FORMAT, "%s: no_rope_layers[%lld] is not an integer", c->path, (long long)i);
            if (use != ((i + 1) % 4 != 0))
                return ob_err(OB_ERR_UNSUPPORTED,
                              "%s: %s: only RoPE skipped on every 4th layer is supported (layer %lld differs)", c->path,
                              nr ? "no_rope_layers" : "no_rope_layer_interval", (long long)i);
        }
        if (json_is_true(cget(c, "use_sliding_window")))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: use_sliding_window=true is not supported for %s", c->path,
                          cfg->hf_arch);
    }
    if ((cfg->arch == OB_HF_OLMO || cfg->arch == OB_HF_OLMO2 || cfg->arch == OB_HF_OLMOE) && cget(c, "clip_qkv"))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: clip_qkv is not supported for %s", c->path, cfg->hf_arch);
    /* BitNet: transformers runs plain nn.Linear layers unless quantization_config
     * asks for BitLinear (ternarised weights and 8-bit activations on the fly,
     * or packed weights), which a GGUF of the weights as they are cannot say */
    if (cfg->arch == OB_HF_BITNET && cget(c, "quantization_config"))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: quantization_config is not supported for %s (convert the unpacked "
                      "weights of a checkpoint without it)", c->path, cfg->hf_arch);
    if (cfg->arch == OB_HF_BITNET && json_is_true(cget(c, "attention_bias")))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: attention_bias=true is not supported for %s", c->path, cfg->hf_arch);
    if (cfg->arch == OB_HF_INTERNLM2) {
        /* `bias` puts biases on wqkv and wo: llama.cpp's internlm2 has no
         * tensors for them (no released model sets it; when the key is absent
         * the checkpoint decides: a bias tensor has no GGUF name). llama.cpp
         * requires output.weight, so no tied embeddings; modeling_internlm2.py
         * always takes head_dim = hidden_size / num_attention_heads. */
        json_t *b = cget(c, "bias");
        if (b && !json_is_boolean(b)) return ob_err(OB_ERR_FORMAT, "%s: key 'bias' is not a boolean", c->path);
        if (json_is_true(b))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: bias=true (biases on wqkv and wo) is not supported for %s", c->path,
                          cfg->hf_arch);
        if (cfg->tied)
            return ob_err(OB_ERR_UNSUPPORTED, "%s: tie_word_embeddings=true is not supported for %s (llama.cpp's "
                          "internlm2 needs output.weight)", c->path, cfg->hf_arch);
        if (cfg->head_dim * cfg->n_head != cfg->n_embd)
            return ob_err(OB_ERR_FORMAT, "%s: head_dim %lld is not hidden_size / num_attention_heads for %s", c->path,
                          (long long)cfg->head_dim, cfg->hf_arch);
    }
    static const ob_hf_arch variants[] = {OB_HF_OLMO2, OB_HF_SMOLLM3, OB_HF_ARCEE, OB_HF_ERNIE45,
                                          OB_HF_SEED_OSS, OB_HF_OLMO, OB_HF_GLM4, OB_HF_BITNET};
    bool variant = false;
    for (size_t i = 0; i < OB_ARRAY_LEN(variants); i++) variant |= cfg->arch == variants[i];
    static const char *const no_bias[] = {"mlp_bias", "use_bias"};
    for (size_t i = 0; variant && i < OB_ARRAY_LEN(no_bias); i++)
        if (json_is_true(cget(c, no_bias[i])))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: %s=true is not supported for %s", c->path, no_bias[i], cfg->hf_arch);
    return 0;
}

static int parse(const cfgsrc *c, ob_hf_config *cfg) {
    OB_TRY(parse_arch(c, cfg));
    if (ob_hf_gpt_is(cfg->arch)) return ob_hf_gpt_parse(c->root, c->path, cfg);
    if (ob_hf_enc_is(cfg->arch)) return ob_hf_enc_parse(c->root, c->path, cfg);
    OB_TRY(get_pos_int(c, "hidden_size", true, 0, &cfg->n_embd));
    OB_TRY(get_pos_int(c, "intermediate_size", true, 0, &cfg->n_ff));
    OB_TRY(get_pos_int(c, "num_hidden_layers", true, 0, &cfg->n_layer));
    OB_TRY(get_pos_int(c, "num_attention_heads", true, 0, &cfg->n_head));
    OB_TRY(get_pos_int(c, "vocab_size", true, 0, &cfg->n_vocab));
    OB_TRY(get_pos_int(c, "max_position_embeddings", true, 0, &cfg->n_ctx));
    OB_TRY(get_pos_int(c, "num_key_value_heads", false, cfg->n_head, &cfg->n_head_kv));
    cfg->head_dim_given = cget(c, "head_dim") != NULL;
    OB_TRY(get_pos_int(c, "head_dim", false, cfg->n_embd / cfg->n_head, &cfg->head_dim));
    if (cfg->n_head % cfg->n_head_kv)
        return ob_err(OB_ERR_FORMAT, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                      c->path, (long long)cfg->n_head, (long long)cfg->n_head_kv);
    if (cfg->head_dim % 2)
        return ob_err(OB_ERR_FORMAT, "%s: head_dim %lld is odd; RoPE rotates pairs", c->path,
                      (long long)cfg->head_dim);

    const bool gemma = cfg->arch == OB_HF_GEMMA || cfg->arch == OB_HF_GEMMA2 || cfg->arch == OB_HF_GEMMA3;
    if (gemma) {
        /* transformers uses hidden_activation (tanh GELU); hidden_act is legacy */
        json_t *act = cget(c, "hidden_activation");
        if (act && (!json_is_string(act) || (strcmp(json_string_value(act), "gelu_pytorch_tanh") != 0 &&
                                             strcmp(json_string_value(act), "gelu_tanh") != 0)))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: hidden_activation must be 'gelu_pytorch_tanh' for %s", c->path,
                          cfg->hf_arch);
    } else {
        const char *want = cfg->arch == OB_HF_PHI2                                 ? "gelu_new"
                           : cfg->arch == OB_HF_ARCEE || cfg->arch == OB_HF_BITNET ? "relu2"
                                                                                   : "silu";
        json_t *act = cget(c, "hidden_act");
        if (act && (!json_is_string(act) || strcmp(json_string_value(act), want) != 0))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: hidden_act must be '%s' for %s", c->path, want, cfg->hf_arch);
    }

    const char *eps_key = cfg->arch == OB_HF_PHI2 ? "layer_norm_eps" : "rms_norm_eps";
    json_t *eps = cget(c, eps_key);
    if (eps && !json_is_number(eps)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a number", c->path, eps_key);
    cfg->rms_eps = eps ? json_number_value(eps) : cfg->arch == OB_HF_PHI2 ? 1e-5 : 1e-6; /* transformers' defaults */
    if (!(cfg->rms_eps > 0)) return ob_err(OB_ERR_FORMAT, "%s: %s must be > 0", c->path, eps_key);
    if (cfg->arch == OB_HF_OLMO) cfg->rms_eps = 1e-5; /* transformers' OlmoLayerNorm: fixed, no config key */

    if (cfg->arch == OB_HF_GEMMA2 || cfg->arch == OB_HF_GEMMA3) {
        json_t *ac = cget(c, "attn_logit_softcapping"), *fc = cget(c, "final_logit_softcapping");
        if ((ac && !json_is_number(ac)) || (fc && !json_is_number(fc)))
            return ob_err(OB_ERR_FORMAT, "%s: attn/final_logit_softcapping must be numbers or null", c->path);
        cfg->attn_softcap = ac ? json_number_value(ac) : 0;
        cfg->final_softcap = fc ? json_number_value(fc) : 0;
        json_t *qs = cget(c, "query_pre_attn_scalar");
        if (qs && (!json_is_number(qs) || !(json_number_value(qs) > 0)))
            return ob_err(OB_ERR_FORMAT, "%s: query_pre_attn_scalar must be a number > 0", c->path);
        cfg->query_pre_attn_scalar = qs ? json_number_value(qs) : 0;
        if (cfg->attn_softcap < 0 || cfg->final_softcap < 0)
            return ob_err(OB_ERR_FORMAT, "%s: soft-capping values must be >= 0", c->path);
    }

    json_t *tie = cget(c, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie))
        return ob_err(OB_ERR_FORMAT, "%s: key 'tie_word_embeddings' is not a boolean", c->path);
    cfg->tied = tie ? json_is_true(tie) : false;

    cfg->sliding_window = 0;
    if (cfg->arch == OB_HF_GEMMA2 || cfg->arch == OB_HF_GEMMA3) {
        OB_TRY(get_int(c, "sliding_window", false, 0, &cfg->sliding_window));
        if (cfg->sliding_window < 0) return ob_err(OB_ERR_FORMAT, "%s: sliding_window must be positive", c->path);
        /* which layers are local: layer_types when given, else the model's
         * fixed pattern; written as a period (llama.cpp's form) */
        int64_t pattern = cfg->arch == OB_HF_GEMMA2 ? 2 : 6;
        OB_TRY(get_int(c, "sliding_window_pattern", false, pattern, &pattern));
        json_t *lt = cget(c, "layer_types");
        if (json_is_array(lt)) {
            if ((int64_t)json_array_size(lt) != cfg->n_layer)
                return ob_err(OB_ERR_FORMAT, "%s: layer_types has %zu entries for %lld layers", c->path,
                              json_array_size(lt), (long long)cfg->n_layer);
            int64_t found = 0;
            for (int64_t p = 1; p <= cfg->n_layer + 1 && !found; p++) {
                bool ok = true;
                for (int64_t i = 0; i < cfg->n_layer && ok; i++) {
                    const char *t = json_string_value(json_array_get(lt, (size_t)i));
                    bool local = p > 1 && i % p < p - 1;
                    ok = t && !strcmp(t, local ? "sliding_attention" : "full_attention");
                }
                if (ok) found = p;
            }
            if (!found)
                return ob_err(OB_ERR_UNSUPPORTED, "%s: layer_types is not a periodic local/global pattern", c->path);
            /* a pattern longer than the model looks the same as the default one */
            if (found <= cfg->n_layer || pattern <= cfg->n_layer) pattern = found;
        }
        cfg->swa_pattern = pattern;
    } else if (cfg->arch == OB_HF_PHI3) {
        OB_TRY(get_int(c, "sliding_window", false, 0, &cfg->sliding_window));
        if (cfg->sliding_window < 0) return ob_err(OB_ERR_FORMAT, "%s: sliding_window must be positive", c->path);
    } else if (cfg->arch == OB_HF_MISTRAL || cfg->arch == OB_HF_MIXTRAL) {
        OB_TRY(get_int(c, "sliding_window", false, 0, &cfg->sliding_window));
        if (cfg->sliding_window < 0)
            return ob_err(OB_ERR_FORMAT, "%s: sliding_window must be positive", c->path);
    } else if (cfg->arch == OB_HF_QWEN2 || cfg->arch == OB_HF_QWEN3 || cfg->arch == OB_HF_QWEN3MOE ||
               cfg->arch == OB_HF_QWEN2MOE) {
        /* Qwen's per-layer sliding window (layers >= max_window_layers) has no
         * llama.cpp form; refuse rather than write a model that computes
         * something else. */
        json_t *use = cget(c, "use_sliding_window");
        if (json_is_true(use))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: use_sliding_window=true is not supported for %s", c->path,
                          cfg->hf_arch);
    }

    OB_TRY(parse_rope(c, cfg));

    if (cfg->arch == OB_HF_QWEN3MOE || cfg->arch == OB_HF_QWEN2MOE || cfg->arch == OB_HF_MIXTRAL ||
        cfg->arch == OB_HF_OLMOE || cfg->arch == OB_HF_GRANITEMOE) {
        bool mix = cfg->arch == OB_HF_MIXTRAL;
        /* intermediate_size is each expert's width (no moe_intermediate_size) */
        bool ff_is_exp = mix || cfg->arch == OB_HF_OLMOE || cfg->arch == OB_HF_GRANITEMOE;
        /* transformers 5 writes num_local_experts for Qwen3-MoE too */
        const char *ek = cget(c, "num_local_experts") ? "num_local_experts" : "num_experts";
        OB_TRY(get_pos_int(c, ek, true, 0, &cfg->n_expert));
        OB_TRY(get_pos_int(c, "num_experts_per_tok", true, 0, &cfg->n_expert_used));
        if (cfg->n_expert_used > cfg->n_expert || cfg->n_expert > 4096)
            return ob_err(OB_ERR_FORMAT, "%s: %lld experts per token of %lld", c->path, (long long)cfg->n_expert_used,
                          (long long)cfg->n_expert);
        if (ff_is_exp)
            cfg->n_ff_exp = cfg->n_ff;
        else
            OB_TRY(get_pos_int(c, "moe_intermediate_size", true, 0, &cfg->n_ff_exp));
        if (cfg->arch == OB_HF_QWEN2MOE)
            OB_TRY(get_pos_int(c, "shared_expert_intermediate_size", true, 0, &cfg->n_ff_shexp));
        /* Mixtral renormalises always; Qwen as norm_topk_prob says (Qwen3-MoE's default true, Qwen2-MoE's false) */
        /* GraniteMoE: softmax over the top-k logits, the same as renormalising; OLMoE as norm_topk_prob (default false) */
        cfg->expert_norm = mix || cfg->arch == OB_HF_QWEN3MOE || cfg->arch == OB_HF_GRANITEMOE;
        json_t *nt = cget(c, "norm_topk_prob");
        if (!mix && nt) {
            if (!json_is_boolean(nt)) return ob_err(OB_ERR_FORMAT, "%s: norm_topk_prob is not a boolean", c->path);
            cfg->expert_norm = json_is_true(nt);
        }
        if (!mix) {
            /* every layer sparse: dense layers in between have no GGUF form here */
            int64_t step = 1;
            OB_TRY(get_int(c, "decoder_sparse_step", false, 1, &step));
            json_t *mlp_only = cget(c, "mlp_only_layers");
            if (step != 1 || (json_is_array(mlp_only) && json_array_size(mlp_only) > 0))
                return ob_err(OB_ERR_UNSUPPORTED, "%s: dense layers among the MoE layers (decoder_sparse_step, "
                              "mlp_only_layers) are not supported", c->path);
        }
    }

    if (cfg->arch == OB_HF_GRANITE || cfg->arch == OB_HF_GRANITEMOE) {
        static const char *const keys[] = {"embedding_multiplier", "residual_multiplier", "attention_multiplier",
                                           "logits_scaling"};
        double *dst[] = {&cfg->granite_embd, &cfg->granite_resid, &cfg->granite_attn, &cfg->granite_logit};
        for (size_t i = 0; i < OB_ARRAY_LEN(keys); i++) {
            json_t *v = cget(c, keys[i]);
            if (v && !json_is_number(v)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a number", c->path, keys[i]);
            *dst[i] = v ? json_number_value(v) : 1.0; /* transformers' defaults */
            if (!(*dst[i] > 0)) return ob_err(OB_ERR_FORMAT, "%s: %s must be > 0", c->path, keys[i]);
        }
        json_t *ab = cget(c, "attention_bias"), *mb = cget(c, "mlp_bias");
        if (json_is_true(ab) || json_is_true(mb))
            return ob_err(OB_ERR_UNSUPPORTED, "%s: Granite with attention_bias or mlp_bias is not supported", c->path);
    }

    OB_TRY(parse_llama_variant(c, cfg));
    if (cfg->arch == OB_HF_DEEPSEEK3) OB_TRY(ob_hf_deepseek_parse(c->root, c->path, cfg));

    cfg->bos_id = cfg->eos_id = cfg->pad_id = -1;
    int64_t v;
    json_t *j;
    if ((j = cget(c, "bos_token_id")) && as_int(j, &v) && v >= 0) cfg->bos_id = v;
    if ((j = cget(c, "eos_token_id")) && as_int(j, &v) && v >= 0) cfg->eos_id = v;
    if ((j = cget(c, "pad_token_id")) && as_int(j, &v) && v >= 0) cfg->pad_id = v;
    return 0;
}

/* The parse of a loaded (or failed: root NULL, jerr says why) config.json. */
static int config_from_json(json_t *root, const json_error_t *jerr, const char *path, ob_hf_config *cfg) {
    int rc;
    if (!root) {
        rc = ob_err(jerr->line < 0 ? OB_ERR_IO : OB_ERR_FORMAT, "%s: %s", path, jerr->text);
    } else if (!json_is_object(root)) {
        rc = ob_err(OB_ERR_FORMAT, "%s: not a JSON object", path);
    } else {
        cfgsrc c = {root, json_object_get(root, "text_config"), path};
        if (c.text && !json_is_object(c.text)) c.text = NULL;
        rc = parse(&c, cfg);
    }
    json_decref(root);
    return rc;
}

int ob_hf_config_parse(const char *text, size_t n, const char *path, ob_hf_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    json_error_t jerr;
    json_t *root = json_loadb(text, n, JSON_DECODE_INT_AS_REAL, &jerr);
    return config_from_json(root, &jerr, path, cfg);
}

int ob_hf_config_load(const char *dir, ob_hf_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char *path = ob_hf_path(dir, "config.json");
    if (!path) return ob_err(OB_ERR_OOM, "path");
    json_error_t jerr;
    /* Integers as reals (as_int takes whole reals back): a huge integer
     * somewhere in the file must not stop the parse. */
    json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
    int rc = config_from_json(root, &jerr, path, cfg);
    ob_free(path);
    return rc;
}

int ob_hf_need_tensor(const ob_hf_config *cfg, bool layer, const char *gguf, const char *hf, const char *prefix,
                      bool (*has)(const void *ctx, const char *name), const void *ctx) {
    char name[96];
    for (int64_t l = 0; l < (layer ? cfg->n_layer : 1); l++) {
        if (layer)
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, gguf);
        else
            snprintf(name, sizeof name, "%s", gguf);
        if (!has(ctx, name)) {
            if (layer)
                return ob_err(OB_ERR_FORMAT, "tensor '%s%lld.%s' is missing (%s)", prefix, (long long)l, hf, cfg->hf_arch);
            return ob_err(OB_ERR_FORMAT, "tensor '%s' is missing (%s)", hf, cfg->hf_arch);
        }
    }
    return 0;
}

int ob_hf_layer_split(const ob_hf_config *cfg, const char *name, const char *text, const char *pre, int *layer,
                      const char **rest) {
    const size_t lp = strlen(pre);
    if (strncmp(text, pre, lp) != 0 || text[lp] < '0' || text[lp] > '9') return 0;
    char *end;
    const long l = strtol(text + lp, &end, 10);
    if (*end != '.' || l < 0)
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' has no GGUF name in architecture %s (%s)", name, cfg->gguf_arch,
                      cfg->hf_arch);
    if (l >= cfg->n_layer)
        return ob_err(OB_ERR_FORMAT, "tensor '%s': layer %ld, but config.json has %lld layers", name, l,
                      (long long)cfg->n_layer);
    *layer = (int)l;
    *rest = end + 1;
    return 1;
}
