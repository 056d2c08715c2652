/*
 * hf_gptlike.c - config.json and tensor names of the GPT-lineage families.
 *
 * These checkpoints predate (or ignore) the Llama layout: their own config
 * keys (n_embd, n_inner, rotary_pct, layer_norm_epsilon, ...), their own
 * tensor prefixes (gpt_neox.layers.N, transformer.h.N), fused qkv matrices
 * in several orders and GPT-2's Conv1D weights stored [in, out]. This file
 * reads the config into ob_hf_config, names each tensor as llama.cpp's
 * converter does for the family (GGUF architectures stablelm, gptneox,
 * gpt2, starcoder2, starcoder, falcon, gptj, command-r, nemotron, bloom;
 * CodeGen is written as gptj; opt is ours, in llama.cpp's naming) and says
 * how its data must be rearranged; convert.c does the planning, the
 * conversion and the writing.
 *
 * The rearrangements are the ones llama.cpp's files hold: GPT-NeoX's qkv
 * (per head q, k, v) and Falcon's (per KV group the group's queries, then
 * k, v) become [all q | all k | all v]; Conv1D weights are transposed;
 * Nemotron's LayerNorm1P weights are written as 1 + w. BLOOM's per-head qkv
 * is regrouped like GPT-NeoX's; CodeGen's qkv_proj (4 model-parallel chunks
 * of q, v, k) becomes [q | k | v]; OPT's position table loses its first 2
 * rows (HF's offset), so row p is position p.
 */
#include "hf_gptlike.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/status.h"

/* ---- architectures ---- */

static const struct {
    const char *hf;
    ob_hf_arch arch;
    const char *gguf;
} g_archs[] = {
    {"StableLmForCausalLM", OB_HF_STABLELM, "stablelm"},
    {"StableLMEpochForCausalLM", OB_HF_STABLELM, "stablelm"},
    {"GPTNeoXForCausalLM", OB_HF_GPTNEOX, "gptneox"},
    {"GPT2LMHeadModel", OB_HF_GPT2, "gpt2"},
    {"Starcoder2ForCausalLM", OB_HF_STARCODER2, "starcoder2"},
    {"GPTBigCodeForCausalLM", OB_HF_BIGCODE, "starcoder"},
    {"FalconForCausalLM", OB_HF_FALCON, "falcon"},
    {"GPTJForCausalLM", OB_HF_GPTJ, "gptj"},
    {"CohereForCausalLM", OB_HF_COHERE, "command-r"},
    {"NemotronForCausalLM", OB_HF_NEMOTRON, "nemotron"},
    {"OPTForCausalLM", OB_HF_OPT, "opt"},
    {"CodeGenForCausalLM", OB_HF_CODEGEN, "gptj"}, /* a GPT-J once its qkv_proj is regrouped */
    {"BloomForCausalLM", OB_HF_BLOOM, "bloom"},
};

bool ob_hf_gpt_is(ob_hf_arch a) { return a >= OB_HF_STABLELM && a <= OB_HF_BLOOM; }

bool ob_hf_gpt_arch(const char *hf_arch, ob_hf_config *cfg) {
    for (size_t i = 0; i < OB_ARRAY_LEN(g_archs); i++)
        if (!strcmp(hf_arch, g_archs[i].hf)) {
            cfg->arch = g_archs[i].arch;
            cfg->gguf_arch = g_archs[i].gguf;
            return true;
        }
    return false;
}

/* ---- config.json ---- */

static json_t *jget(json_t *o, const char *key) {
    json_t *v = o ? json_object_get(o, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

/* The first of `keys` present (NULL-terminated list), and which one. */
static json_t *jfirst(json_t *o, const char *const *keys, const char **which) {
    for (size_t i = 0; keys[i]; i++) {
        json_t *v = jget(o, keys[i]);
        if (v) {
            if (which) *which = keys[i];
            return v;
        }
    }
    if (which) *which = keys[0];
    return NULL;
}

/* A positive integer under one of `keys`; dflt when absent (0: required). */
static int jint(json_t *o, const char *path, const char *const *keys, int64_t dflt, int64_t *out) {
    const char *k;
    json_t *v = jfirst(o, keys, &k);
    if (!v) {
        if (dflt <= 0) {
            char names[160];
            size_t n = 0;
            for (size_t i = 0; keys[i] && n < sizeof names; i++)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s'%s'", i ? " or " : "", keys[i]);
            return ob_err(OB_ERR_FORMAT, "%s: key %s is missing", path, names);
        }
        *out = dflt;
        return 0;
    }
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (!(d > 0) || d != floor(d) || d > (double)((int64_t)1 << 31))
        return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a positive integer", path, k);
    *out = (int64_t)d;
    return 0;
}

/* A number under one of `keys` in `o`; *has says whether it was there. */
static int jnum(json_t *o, const char *path, const char *const *keys, bool *has, double *out) {
    const char *k;
    json_t *v = jfirst(o, keys, &k);
    *has = v != NULL;
    if (!v) return 0;
    if (!json_is_number(v)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a number", path, k);
    *out = json_number_value(v);
    return 0;
}

/* A boolean key; dflt when absent. */
static int jbool(json_t *o, const char *path, const char *key, bool dflt, bool *out) {
    json_t *v = jget(o, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a boolean", path, key);
    *out = json_is_true(v);
    return 0;
}

/* A feature this converter does not write: refused by name. */
static int refuse_if(json_t *o, const char *path, const char *key, bool bad_value, const char *hf_arch) {
    bool v = !bad_value;
    OB_TRY(jbool(o, path, key, !bad_value, &v));
    if (v == bad_value)
        return ob_err(OB_ERR_UNSUPPORTED, "%s: %s=%s is not supported for %s", path, key, bad_value ? "true" : "false",
                      hf_arch);
    return 0;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

static int check_act(json_t *root, const char *path, const ob_hf_config *cfg) {
    const char *k;
    json_t *v = jfirst(root, KEYS("hidden_act", "activation_function", "activation"), &k);
    const char *want[3] = {NULL, NULL, NULL};
    switch (cfg->arch) {
    case OB_HF_STABLELM:
    case OB_HF_COHERE: want[0] = "silu"; break;
    case OB_HF_NEMOTRON: want[0] = "relu2"; break;
    case OB_HF_OPT: want[0] = "relu"; break;
    case OB_HF_GPTNEOX:
    case OB_HF_FALCON: want[0] = "gelu"; break; /* erf GELU */
    default: want[0] = "gelu_new", want[1] = "gelu_pytorch_tanh"; break; /* the tanh approximation */
    }
    if (!v) return 0; /* transformers' default is the family's */
    if (!json_is_string(v)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a string", path, k);
    for (int i = 0; want[i]; i++)
        if (!strcmp(json_string_value(v), want[i])) return 0;
    return ob_err(OB_ERR_UNSUPPORTED, "%s: %s '%s' is not supported for %s (%s%s%s)", path, k, json_string_value(v),
                  cfg->hf_arch, want[0], want[1] ? " or " : "", want[1] ? want[1] : "");
}

static int parse_rope(json_t *root, const char *path, ob_hf_config *cfg) {
    json_t *rp = jget(root, "rope_parameters");
    if (!json_is_object(rp)) rp = jget(root, "rope_scaling");
    if (rp && !json_is_object(rp)) return ob_err(OB_ERR_FORMAT, "%s: rope_scaling is not an object", path);
    json_t *type = rp ? jfirst(rp, KEYS("rope_type", "type"), NULL) : NULL;
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "default") != 0))
        return ob_err(OB_ERR_UNSUPPORTED, "%s: RoPE scaling is not supported for %s", path, cfg->hf_arch);
    cfg->rope_scaling = OB_HF_ROPE_NONE;
    if (cfg->arch == OB_HF_GPT2 || cfg->arch == OB_HF_BIGCODE || cfg->arch == OB_HF_OPT ||
        cfg->arch == OB_HF_BLOOM) { /* learned positions or ALiBi (bloom), no RoPE */
        cfg->n_rot = 0;
        cfg->rope_theta = 10000.0;
        return 0;
    }
    bool has;
    double d = 0;
    cfg->rope_theta = 10000.0;
    OB_TRY(jnum(rp, path, KEYS("rope_theta"), &has, &d));
    if (!has) OB_TRY(jnum(root, path, KEYS("rope_theta", "rotary_emb_base"), &has, &d));
    if (has) cfg->rope_theta = d;
    if (!(cfg->rope_theta > 1.0)) return ob_err(OB_ERR_FORMAT, "%s: rope_theta is not > 1", path);
    cfg->n_rot = cfg->head_dim;
    if (cfg->arch == OB_HF_GPTJ || cfg->arch == OB_HF_CODEGEN) {
        int64_t rd = cfg->head_dim;
        OB_TRY(jint(root, path, KEYS("rotary_dim"), cfg->head_dim, &rd));
        cfg->n_rot = rd;
    } else {
        double f = 1.0;
        OB_TRY(jnum(rp, path, KEYS("partial_rotary_factor"), &has, &f));
        if (!has) OB_TRY(jnum(root, path, KEYS("partial_rotary_factor", "rotary_pct", "rope_pct"), &has, &f));
        if (has && !(f > 0 && f <= 1))
            return ob_err(OB_ERR_FORMAT, "%s: partial_rotary_factor %g is not in (0, 1]", path, f);
        cfg->n_rot = (int64_t)((double)cfg->head_dim * f);
    }
    if (cfg->n_rot < 2 || cfg->n_rot > cfg->head_dim || cfg->n_rot % 2)
        return ob_err(OB_ERR_FORMAT, "%s: %lld rotated dimensions do not fit head_dim %lld", path,
                      (long long)cfg->n_rot, (long long)cfg->head_dim);
    return 0;
}

int ob_hf_gpt_parse(json_t *root, const char *path, ob_hf_config *cfg) {
    const ob_hf_arch a = cfg->arch;
    const bool gpt2ish = a == OB_HF_GPT2 || a == OB_HF_BIGCODE || a == OB_HF_GPTJ || a == OB_HF_CODEGEN;
    OB_TRY(jint(root, path, KEYS("hidden_size", "n_embd", "d_model"), 0, &cfg->n_embd));
    OB_TRY(jint(root, path, KEYS("num_hidden_layers", "n_layer"), 0, &cfg->n_layer));
    OB_TRY(jint(root, path, KEYS("num_attention_heads", "n_head"), 0, &cfg->n_head));
    OB_TRY(jint(root, path, KEYS("vocab_size"), 0, &cfg->n_vocab));
    /* BLOOM has no position limit (ALiBi); its training length was 2048 */
    OB_TRY(jint(root, path, KEYS("max_position_embeddings", "n_positions", "seq_length"),
                a == OB_HF_FALCON || a == OB_HF_BLOOM ? 2048 : 0, &cfg->n_ctx));
    /* the MLP width: n_inner / ffn_hidden_size default to 4 n_embd; BLOOM's is always 4 n_embd */
    if (a == OB_HF_BLOOM)
        cfg->n_ff = 4 * cfg->n_embd;
    else
        OB_TRY(jint(root, path, KEYS("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"),
                    gpt2ish || a == OB_HF_FALCON ? 4 * cfg->n_embd : 0, &cfg->n_ff));
    cfg->n_head_kv = cfg->n_head;
    if (a == OB_HF_STABLELM || a == OB_HF_STARCODER2 || a == OB_HF_COHERE || a == OB_HF_NEMOTRON)
        OB_TRY(jint(root, path, KEYS("num_key_value_heads"), cfg->n_head, &cfg->n_head_kv));
    if (a == OB_HF_BIGCODE || a == OB_HF_FALCON) {
        bool mq = false;
        OB_TRY(jbool(root, path, "multi_query", a == OB_HF_FALCON, &mq));
        cfg->n_head_kv = mq ? 1 : cfg->n_head;
    }
    cfg->head_dim_given = jget(root, "head_dim") != NULL;
    OB_TRY(jint(root, path, KEYS("head_dim"), cfg->n_embd / cfg->n_head, &cfg->head_dim));
    if (cfg->n_head_kv > cfg->n_head || cfg->n_head % cfg->n_head_kv)
        return ob_err(OB_ERR_FORMAT, "%s: %lld attention heads are not a multiple of %lld KV heads", path,
                      (long long)cfg->n_head, (long long)cfg->n_head_kv);
    if (!cfg->head_dim_given && cfg->head_dim * cfg->n_head != cfg->n_embd)
        return ob_err(OB_ERR_FORMAT, "%s: hidden size %lld is not a multiple of %lld heads", path,
                      (long long)cfg->n_embd, (long long)cfg->n_head);
    if (cfg->head_dim % 2) return ob_err(OB_ERR_FORMAT, "%s: head_dim %lld is odd", path, (long long)cfg->head_dim);

    bool has;
    double d = 1e-5;
    OB_TRY(jnum(root, path, KEYS("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_eps"), &has, &d));
    cfg->rms_eps = has ? d : 1e-5;
    if (!(cfg->rms_eps > 0)) return ob_err(OB_ERR_FORMAT, "%s: the LayerNorm epsilon must be > 0", path);
    OB_TRY(check_act(root, path, cfg));
    OB_TRY(parse_rope(root, path, cfg));

    /* transformers' defaults for tie_word_embeddings differ by family */
    bool tie_dflt = a == OB_HF_GPT2 || a == OB_HF_BIGCODE || a == OB_HF_FALCON || a == OB_HF_COHERE || a == OB_HF_OPT ||
                    a == OB_HF_BLOOM;
    OB_TRY(jbool(root, path, "tie_word_embeddings", tie_dflt, &cfg->tied));

    cfg->parallel_residual = a == OB_HF_GPTJ || a == OB_HF_FALCON || a == OB_HF_COHERE || a == OB_HF_CODEGEN;
    cfg->qkv_bias = a == OB_HF_GPT2 || a == OB_HF_BIGCODE || a == OB_HF_BLOOM;
    cfg->logit_scale = 1.0;
    cfg->sliding_window = 0;
    switch (a) {
    case OB_HF_STABLELM:
        OB_TRY(refuse_if(root, path, "qk_layernorm", true, cfg->hf_arch));
        OB_TRY(jbool(root, path, "use_qkv_bias", false, &cfg->qkv_bias));
        OB_TRY(jbool(root, path, "use_parallel_residual", false, &cfg->parallel_residual));
        break;
    case OB_HF_GPTNEOX:
        OB_TRY(jbool(root, path, "use_parallel_residual", true, &cfg->parallel_residual));
        OB_TRY(jbool(root, path, "attention_bias", true, &cfg->qkv_bias));
        break;
    case OB_HF_GPT2:
        OB_TRY(refuse_if(root, path, "scale_attn_by_inverse_layer_idx", true, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "add_cross_attention", true, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "scale_attn_weights", false, cfg->hf_arch));
        break;
    case OB_HF_BIGCODE:
        OB_TRY(refuse_if(root, path, "scale_attn_weights", false, cfg->hf_arch));
        break;
    case OB_HF_STARCODER2:
        OB_TRY(jbool(root, path, "use_bias", true, &cfg->qkv_bias));
        if (jget(root, "sliding_window")) OB_TRY(jint(root, path, KEYS("sliding_window"), 0, &cfg->sliding_window));
        break;
    case OB_HF_FALCON:
        OB_TRY(refuse_if(root, path, "new_decoder_architecture", true, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "alibi", true, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "parallel_attn", false, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "bias", true, cfg->hf_arch));
        break;
    case OB_HF_COHERE:
        OB_TRY(refuse_if(root, path, "use_qk_norm", true, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "attention_bias", true, cfg->hf_arch));
        cfg->logit_scale = 0.0625; /* transformers' default */
        OB_TRY(jnum(root, path, KEYS("logit_scale"), &has, &d));
        if (has) cfg->logit_scale = d;
        if (!(cfg->logit_scale > 0)) return ob_err(OB_ERR_FORMAT, "%s: logit_scale must be > 0", path);
        break;
    case OB_HF_NEMOTRON:
        OB_TRY(refuse_if(root, path, "attention_bias", true, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "mlp_bias", true, cfg->hf_arch));
        break;
    case OB_HF_OPT: {
        /* opt-350m's post-LayerNorm blocks and 512-wide embeddings (project_in/out) are not written */
        OB_TRY(refuse_if(root, path, "do_layer_norm_before", false, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "_remove_final_layer_norm", true, cfg->hf_arch));
        OB_TRY(refuse_if(root, path, "layer_norm_elementwise_affine", false, cfg->hf_arch));
        int64_t proj = cfg->n_embd;
        OB_TRY(jint(root, path, KEYS("word_embed_proj_dim"), cfg->n_embd, &proj));
        if (proj != cfg->n_embd)
            return ob_err(OB_ERR_UNSUPPORTED, "%s: word_embed_proj_dim %lld != hidden_size %lld (project_in/out) is "
                          "not supported for %s", path, (long long)proj, (long long)cfg->n_embd, cfg->hf_arch);
        OB_TRY(jbool(root, path, "enable_bias", true, &cfg->qkv_bias));
        break;
    }
    case OB_HF_BLOOM:
        OB_TRY(refuse_if(root, path, "apply_residual_connection_post_layernorm", true, cfg->hf_arch));
        break;
    case OB_HF_CODEGEN:
        if (cfg->n_head % OB_HF_CODEGEN_MP)
            return ob_err(OB_ERR_FORMAT, "%s: n_head %lld is not a multiple of CodeGen's %d model-parallel chunks",
                          path, (long long)cfg->n_head, OB_HF_CODEGEN_MP);
        break;
    default: break;
    }

    ob_hf_special_ids(root, cfg);
    return 0;
}

/* ---- tensor names ---- */

typedef enum dim { X_0, X_V, X_E, X_F, X_Q, X_KV, X_QKV, X_P, X_P2 } dim;
typedef enum need {
    N_REQ,  /* always there */
    N_OPT,  /* may be absent (lm_head of a tied model) */
    N_BIAS, /* there when cfg->qkv_bias (the family's optional biases) */
    N_SEQ,  /* there unless the residual is parallel (the pre-MLP norm) */
} need;

typedef struct tmap {
    ob_hf_arch arch;
    const char *hf;   /* the full name (global) or the part after the layer prefix */
    bool layer;
    const char *gguf; /* without "blk.N." */
    dim d0, d1;       /* source shape, PyTorch order */
    ob_hf_xform xf;
    need need;
} tmap;

#define G(a, hf, gguf, d0, d1, xf, nd) {a, hf, false, gguf, d0, d1, xf, nd}
#define L(a, hf, gguf, d0, d1, xf, nd) {a, hf, true, gguf, d0, d1, xf, nd}
#define NX OB_HF_XF_NONE
#define TR OB_HF_XF_TRANSPOSE
#define QG OB_HF_XF_QKV_GROUPS
#define P1 OB_HF_XF_ADD_ONE
#define PO OB_HF_XF_POS_OFFSET
#define CG OB_HF_XF_CODEGEN_QKV

/* llama.cpp's names (gguf-py tensor_mapping.py) for each family's tensors. */
static const tmap g_map[] = {
    /* StableLM: Llama names, LayerNorm with bias, q/k/v biases */
    G(OB_HF_STABLELM, "model.embed_tokens.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_STABLELM, "model.norm.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_STABLELM, "model.norm.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_STABLELM, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_STABLELM, "input_layernorm.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_STABLELM, "input_layernorm.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_STABLELM, "self_attn.q_proj.weight", "attn_q.weight", X_Q, X_E, NX, N_REQ),
    L(OB_HF_STABLELM, "self_attn.q_proj.bias", "attn_q.bias", X_Q, X_0, NX, N_BIAS),
    L(OB_HF_STABLELM, "self_attn.k_proj.weight", "attn_k.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_STABLELM, "self_attn.k_proj.bias", "attn_k.bias", X_KV, X_0, NX, N_BIAS),
    L(OB_HF_STABLELM, "self_attn.v_proj.weight", "attn_v.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_STABLELM, "self_attn.v_proj.bias", "attn_v.bias", X_KV, X_0, NX, N_BIAS),
    L(OB_HF_STABLELM, "self_attn.o_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_STABLELM, "post_attention_layernorm.weight", "ffn_norm.weight", X_E, X_0, NX, N_SEQ),
    L(OB_HF_STABLELM, "post_attention_layernorm.bias", "ffn_norm.bias", X_E, X_0, NX, N_SEQ),
    L(OB_HF_STABLELM, "mlp.gate_proj.weight", "ffn_gate.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_STABLELM, "mlp.up_proj.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_STABLELM, "mlp.down_proj.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),

    /* GPT-NeoX / Pythia: fused qkv per head, biases, two norms per layer */
    G(OB_HF_GPTNEOX, "gpt_neox.embed_in.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_GPTNEOX, "gpt_neox.final_layer_norm.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_GPTNEOX, "gpt_neox.final_layer_norm.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_GPTNEOX, "embed_out.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_GPTNEOX, "input_layernorm.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPTNEOX, "input_layernorm.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPTNEOX, "attention.query_key_value.weight", "attn_qkv.weight", X_QKV, X_E, QG, N_REQ),
    L(OB_HF_GPTNEOX, "attention.query_key_value.bias", "attn_qkv.bias", X_QKV, X_0, QG, N_BIAS),
    L(OB_HF_GPTNEOX, "attention.dense.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_GPTNEOX, "attention.dense.bias", "attn_output.bias", X_E, X_0, NX, N_BIAS),
    L(OB_HF_GPTNEOX, "post_attention_layernorm.weight", "ffn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPTNEOX, "post_attention_layernorm.bias", "ffn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPTNEOX, "mlp.dense_h_to_4h.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_GPTNEOX, "mlp.dense_h_to_4h.bias", "ffn_up.bias", X_F, X_0, NX, N_REQ),
    L(OB_HF_GPTNEOX, "mlp.dense_4h_to_h.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),
    L(OB_HF_GPTNEOX, "mlp.dense_4h_to_h.bias", "ffn_down.bias", X_E, X_0, NX, N_REQ),

    /* GPT-2: Conv1D weights [in, out], learned positions */
    G(OB_HF_GPT2, "transformer.wte.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_GPT2, "transformer.wpe.weight", "position_embd.weight", X_P, X_E, NX, N_REQ),
    G(OB_HF_GPT2, "transformer.ln_f.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_GPT2, "transformer.ln_f.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_GPT2, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_GPT2, "ln_1.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPT2, "ln_1.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPT2, "attn.c_attn.weight", "attn_qkv.weight", X_E, X_QKV, TR, N_REQ),
    L(OB_HF_GPT2, "attn.c_attn.bias", "attn_qkv.bias", X_QKV, X_0, NX, N_REQ),
    L(OB_HF_GPT2, "attn.c_proj.weight", "attn_output.weight", X_Q, X_E, TR, N_REQ),
    L(OB_HF_GPT2, "attn.c_proj.bias", "attn_output.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPT2, "ln_2.weight", "ffn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPT2, "ln_2.bias", "ffn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPT2, "mlp.c_fc.weight", "ffn_up.weight", X_E, X_F, TR, N_REQ),
    L(OB_HF_GPT2, "mlp.c_fc.bias", "ffn_up.bias", X_F, X_0, NX, N_REQ),
    L(OB_HF_GPT2, "mlp.c_proj.weight", "ffn_down.weight", X_F, X_E, TR, N_REQ),
    L(OB_HF_GPT2, "mlp.c_proj.bias", "ffn_down.bias", X_E, X_0, NX, N_REQ),

    /* StarCoder2: Llama names with biases, c_fc / c_proj MLP */
    G(OB_HF_STARCODER2, "model.embed_tokens.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_STARCODER2, "model.norm.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_STARCODER2, "model.norm.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_STARCODER2, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_STARCODER2, "input_layernorm.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_STARCODER2, "input_layernorm.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_STARCODER2, "self_attn.q_proj.weight", "attn_q.weight", X_Q, X_E, NX, N_REQ),
    L(OB_HF_STARCODER2, "self_attn.q_proj.bias", "attn_q.bias", X_Q, X_0, NX, N_BIAS),
    L(OB_HF_STARCODER2, "self_attn.k_proj.weight", "attn_k.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_STARCODER2, "self_attn.k_proj.bias", "attn_k.bias", X_KV, X_0, NX, N_BIAS),
    L(OB_HF_STARCODER2, "self_attn.v_proj.weight", "attn_v.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_STARCODER2, "self_attn.v_proj.bias", "attn_v.bias", X_KV, X_0, NX, N_BIAS),
    L(OB_HF_STARCODER2, "self_attn.o_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_STARCODER2, "self_attn.o_proj.bias", "attn_output.bias", X_E, X_0, NX, N_BIAS),
    L(OB_HF_STARCODER2, "post_attention_layernorm.weight", "ffn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_STARCODER2, "post_attention_layernorm.bias", "ffn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_STARCODER2, "mlp.c_fc.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_STARCODER2, "mlp.c_fc.bias", "ffn_up.bias", X_F, X_0, NX, N_BIAS),
    L(OB_HF_STARCODER2, "mlp.c_proj.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),
    L(OB_HF_STARCODER2, "mlp.c_proj.bias", "ffn_down.bias", X_E, X_0, NX, N_BIAS),

    /* GPTBigCode (StarCoder 1): GPT-2 names in nn.Linear layout, multi-query */
    G(OB_HF_BIGCODE, "transformer.wte.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_BIGCODE, "transformer.wpe.weight", "position_embd.weight", X_P, X_E, NX, N_REQ),
    G(OB_HF_BIGCODE, "transformer.ln_f.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_BIGCODE, "transformer.ln_f.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_BIGCODE, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_BIGCODE, "ln_1.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_BIGCODE, "ln_1.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_BIGCODE, "attn.c_attn.weight", "attn_qkv.weight", X_QKV, X_E, NX, N_REQ),
    L(OB_HF_BIGCODE, "attn.c_attn.bias", "attn_qkv.bias", X_QKV, X_0, NX, N_REQ),
    L(OB_HF_BIGCODE, "attn.c_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_BIGCODE, "attn.c_proj.bias", "attn_output.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_BIGCODE, "ln_2.weight", "ffn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_BIGCODE, "ln_2.bias", "ffn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_BIGCODE, "mlp.c_fc.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_BIGCODE, "mlp.c_fc.bias", "ffn_up.bias", X_F, X_0, NX, N_REQ),
    L(OB_HF_BIGCODE, "mlp.c_proj.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),
    L(OB_HF_BIGCODE, "mlp.c_proj.bias", "ffn_down.bias", X_E, X_0, NX, N_REQ),

    /* Falcon (7B layout): one norm, fused multi-query qkv, no biases */
    G(OB_HF_FALCON, "transformer.word_embeddings.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_FALCON, "transformer.ln_f.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_FALCON, "transformer.ln_f.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_FALCON, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_FALCON, "input_layernorm.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_FALCON, "input_layernorm.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_FALCON, "self_attention.query_key_value.weight", "attn_qkv.weight", X_QKV, X_E, QG, N_REQ),
    L(OB_HF_FALCON, "self_attention.dense.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_FALCON, "mlp.dense_h_to_4h.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_FALCON, "mlp.dense_4h_to_h.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),

    /* GPT-J: separate q/k/v without biases, one norm, biased lm_head */
    G(OB_HF_GPTJ, "transformer.wte.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_GPTJ, "transformer.ln_f.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_GPTJ, "transformer.ln_f.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_GPTJ, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    G(OB_HF_GPTJ, "lm_head.bias", "output.bias", X_V, X_0, NX, N_OPT),
    L(OB_HF_GPTJ, "ln_1.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPTJ, "ln_1.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_GPTJ, "attn.q_proj.weight", "attn_q.weight", X_Q, X_E, NX, N_REQ),
    L(OB_HF_GPTJ, "attn.k_proj.weight", "attn_k.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_GPTJ, "attn.v_proj.weight", "attn_v.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_GPTJ, "attn.out_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_GPTJ, "mlp.fc_in.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_GPTJ, "mlp.fc_in.bias", "ffn_up.bias", X_F, X_0, NX, N_REQ),
    L(OB_HF_GPTJ, "mlp.fc_out.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),
    L(OB_HF_GPTJ, "mlp.fc_out.bias", "ffn_down.bias", X_E, X_0, NX, N_REQ),

    /* Cohere (Command-R): one LayerNorm without bias, parallel SwiGLU */
    G(OB_HF_COHERE, "model.embed_tokens.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_COHERE, "model.norm.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_COHERE, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_COHERE, "input_layernorm.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_COHERE, "self_attn.q_proj.weight", "attn_q.weight", X_Q, X_E, NX, N_REQ),
    L(OB_HF_COHERE, "self_attn.k_proj.weight", "attn_k.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_COHERE, "self_attn.v_proj.weight", "attn_v.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_COHERE, "self_attn.o_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_COHERE, "mlp.gate_proj.weight", "ffn_gate.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_COHERE, "mlp.up_proj.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_COHERE, "mlp.down_proj.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),

    /* Nemotron: LayerNorm1P (stored 1 + w) with bias, squared-ReLU MLP without gate */
    G(OB_HF_NEMOTRON, "model.embed_tokens.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_NEMOTRON, "model.norm.weight", "output_norm.weight", X_E, X_0, P1, N_REQ),
    G(OB_HF_NEMOTRON, "model.norm.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_NEMOTRON, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_NEMOTRON, "input_layernorm.weight", "attn_norm.weight", X_E, X_0, P1, N_REQ),
    L(OB_HF_NEMOTRON, "input_layernorm.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_NEMOTRON, "self_attn.q_proj.weight", "attn_q.weight", X_Q, X_E, NX, N_REQ),
    L(OB_HF_NEMOTRON, "self_attn.k_proj.weight", "attn_k.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_NEMOTRON, "self_attn.v_proj.weight", "attn_v.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_NEMOTRON, "self_attn.o_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_NEMOTRON, "post_attention_layernorm.weight", "ffn_norm.weight", X_E, X_0, P1, N_REQ),
    L(OB_HF_NEMOTRON, "post_attention_layernorm.bias", "ffn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_NEMOTRON, "mlp.up_proj.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_NEMOTRON, "mlp.down_proj.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),

    /* OPT: learned positions whose first OB_HF_OPT_POS_OFFSET rows are dropped, biases (enable_bias) */
    G(OB_HF_OPT, "model.decoder.embed_tokens.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_OPT, "model.decoder.embed_positions.weight", "position_embd.weight", X_P2, X_E, PO, N_REQ),
    G(OB_HF_OPT, "model.decoder.final_layer_norm.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_OPT, "model.decoder.final_layer_norm.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_OPT, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_OPT, "self_attn_layer_norm.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_OPT, "self_attn_layer_norm.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_OPT, "self_attn.q_proj.weight", "attn_q.weight", X_Q, X_E, NX, N_REQ),
    L(OB_HF_OPT, "self_attn.q_proj.bias", "attn_q.bias", X_Q, X_0, NX, N_BIAS),
    L(OB_HF_OPT, "self_attn.k_proj.weight", "attn_k.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_OPT, "self_attn.k_proj.bias", "attn_k.bias", X_KV, X_0, NX, N_BIAS),
    L(OB_HF_OPT, "self_attn.v_proj.weight", "attn_v.weight", X_KV, X_E, NX, N_REQ),
    L(OB_HF_OPT, "self_attn.v_proj.bias", "attn_v.bias", X_KV, X_0, NX, N_BIAS),
    L(OB_HF_OPT, "self_attn.out_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_OPT, "self_attn.out_proj.bias", "attn_output.bias", X_E, X_0, NX, N_BIAS),
    L(OB_HF_OPT, "final_layer_norm.weight", "ffn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_OPT, "final_layer_norm.bias", "ffn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_OPT, "fc1.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_OPT, "fc1.bias", "ffn_up.bias", X_F, X_0, NX, N_BIAS),
    L(OB_HF_OPT, "fc2.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),
    L(OB_HF_OPT, "fc2.bias", "ffn_down.bias", X_E, X_0, NX, N_BIAS),

    /* CodeGen: GPT-J's block with one fused qkv_proj (regrouped to [q | k | v]), biased lm_head */
    G(OB_HF_CODEGEN, "transformer.wte.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_CODEGEN, "transformer.ln_f.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_CODEGEN, "transformer.ln_f.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_CODEGEN, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    G(OB_HF_CODEGEN, "lm_head.bias", "output.bias", X_V, X_0, NX, N_OPT),
    L(OB_HF_CODEGEN, "ln_1.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_CODEGEN, "ln_1.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_CODEGEN, "attn.qkv_proj.weight", "attn_qkv.weight", X_QKV, X_E, CG, N_REQ),
    L(OB_HF_CODEGEN, "attn.out_proj.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_CODEGEN, "mlp.fc_in.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_CODEGEN, "mlp.fc_in.bias", "ffn_up.bias", X_F, X_0, NX, N_REQ),
    L(OB_HF_CODEGEN, "mlp.fc_out.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),
    L(OB_HF_CODEGEN, "mlp.fc_out.bias", "ffn_down.bias", X_E, X_0, NX, N_REQ),

    /* BLOOM: LayerNorm after the embeddings, per-head fused qkv (regrouped like GPT-NeoX's), no positions */
    G(OB_HF_BLOOM, "transformer.word_embeddings.weight", "token_embd.weight", X_V, X_E, NX, N_REQ),
    G(OB_HF_BLOOM, "transformer.word_embeddings_layernorm.weight", "token_embd_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_BLOOM, "transformer.word_embeddings_layernorm.bias", "token_embd_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_BLOOM, "transformer.ln_f.weight", "output_norm.weight", X_E, X_0, NX, N_REQ),
    G(OB_HF_BLOOM, "transformer.ln_f.bias", "output_norm.bias", X_E, X_0, NX, N_REQ),
    G(OB_HF_BLOOM, "lm_head.weight", "output.weight", X_V, X_E, NX, N_OPT),
    L(OB_HF_BLOOM, "input_layernorm.weight", "attn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_BLOOM, "input_layernorm.bias", "attn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_BLOOM, "self_attention.query_key_value.weight", "attn_qkv.weight", X_QKV, X_E, QG, N_REQ),
    L(OB_HF_BLOOM, "self_attention.query_key_value.bias", "attn_qkv.bias", X_QKV, X_0, QG, N_REQ),
    L(OB_HF_BLOOM, "self_attention.dense.weight", "attn_output.weight", X_E, X_Q, NX, N_REQ),
    L(OB_HF_BLOOM, "self_attention.dense.bias", "attn_output.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_BLOOM, "post_attention_layernorm.weight", "ffn_norm.weight", X_E, X_0, NX, N_REQ),
    L(OB_HF_BLOOM, "post_attention_layernorm.bias", "ffn_norm.bias", X_E, X_0, NX, N_REQ),
    L(OB_HF_BLOOM, "mlp.dense_h_to_4h.weight", "ffn_up.weight", X_F, X_E, NX, N_REQ),
    L(OB_HF_BLOOM, "mlp.dense_h_to_4h.bias", "ffn_up.bias", X_F, X_0, NX, N_REQ),
    L(OB_HF_BLOOM, "mlp.dense_4h_to_h.weight", "ffn_down.weight", X_E, X_F, NX, N_REQ),
    L(OB_HF_BLOOM, "mlp.dense_4h_to_h.bias", "ffn_down.bias", X_E, X_0, NX, N_REQ),
};

static const char *layer_prefix(ob_hf_arch a) {
    switch (a) {
    case OB_HF_GPTNEOX: return "gpt_neox.layers.";
    case OB_HF_OPT: return "model.decoder.layers.";
    case OB_HF_CODEGEN:
    case OB_HF_BLOOM:
    case OB_HF_GPT2:
    case OB_HF_BIGCODE:
    case OB_HF_FALCON:
    case OB_HF_GPTJ: return "transformer.h.";
    default: return "model.layers.";
    }
}

static int64_t dim_of(const ob_hf_config *c, dim d) {
    switch (d) {
    case X_V: return c->n_vocab;
    case X_E: return c->n_embd;
    case X_F: return c->n_ff;
    case X_Q: return c->n_head * c->head_dim;
    case X_KV: return c->n_head_kv * c->head_dim;
    case X_QKV: return (c->n_head + 2 * c->n_head_kv) * c->head_dim;
    case X_P: return c->n_ctx;
    case X_P2: return c->n_ctx + OB_HF_OPT_POS_OFFSET;
    default: return 0;
    }
}

/* Buffers some checkpoints save beside the weights: causal masks and
 * cached RoPE tables, recomputed by the engine. */
static bool is_buffer(const char *rest) {
    static const char *const ends[] = {".inv_freq", "masked_bias", "attn.bias", "attention.bias", "causal_mask"};
    size_t n = strlen(rest);
    for (size_t i = 0; i < OB_ARRAY_LEN(ends); i++) {
        size_t k = strlen(ends[i]);
        if (n >= k && !strcmp(rest + n - k, ends[i]) && (n == k || rest[n - k - 1] == '.' || ends[i][0] == '.'))
            return true;
    }
    return false;
}

int ob_hf_gpt_map(const ob_hf_config *cfg, const char *name, ob_hf_gmap *out) {
    memset(out, 0, sizeof *out);
    out->layer = -1;
    const char *rest = name;
    const int split = ob_hf_layer_split(cfg, name, name, layer_prefix(cfg->arch), &out->layer, &rest);
    if (split < 0) return split;
    const bool per_layer = split == 1;
    for (size_t i = 0; i < OB_ARRAY_LEN(g_map); i++) {
        const tmap *t = &g_map[i];
        if (t->arch != cfg->arch || t->layer != per_layer || strcmp(t->hf, rest) != 0) continue;
        if (per_layer)
            snprintf(out->gguf, sizeof out->gguf, "blk.%d.%s", out->layer, t->gguf);
        else
            snprintf(out->gguf, sizeof out->gguf, "%s", t->gguf);
        out->suffix = t->gguf;
        out->rows = dim_of(cfg, t->d0);
        out->cols = dim_of(cfg, t->d1);
        out->xform = t->xf;
        return 1;
    }
    if (is_buffer(rest)) return 0;
    return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' has no GGUF name in architecture %s (%s)", name, cfg->gguf_arch,
                  cfg->hf_arch);
}

int ob_hf_gpt_check(const ob_hf_config *cfg, bool (*has)(const void *ctx, const char *name), const void *ctx) {
    for (size_t i = 0; i < OB_ARRAY_LEN(g_map); i++) {
        const tmap *t = &g_map[i];
        if (t->arch != cfg->arch || t->need == N_OPT) continue;
        if (t->need == N_BIAS && !cfg->qkv_bias) continue;
        if (t->need == N_SEQ && cfg->parallel_residual) continue;
        OB_TRY(ob_hf_need_tensor(cfg, t->layer, t->gguf, t->hf, layer_prefix(cfg->arch), has, ctx));
    }
    return 0;
}

int ob_hf_gpt_keys(const ob_hf_config *cfg, ob_gguf_writer *w) {
    char k[128];
    if (cfg->arch == OB_HF_STABLELM || cfg->arch == OB_HF_GPTNEOX) {
        snprintf(k, sizeof k, "%s.use_parallel_residual", cfg->gguf_arch);
        OB_TRY(ob_gguf_writer_set_bool(w, k, cfg->parallel_residual));
    }
    if (cfg->arch == OB_HF_COHERE) {
        snprintf(k, sizeof k, "%s.logit_scale", cfg->gguf_arch);
        OB_TRY(ob_gguf_writer_set_f32(w, k, (float)cfg->logit_scale));
    }
    return 0;
}

int64_t ob_hf_gpt_qkv_src_row(const ob_hf_config *cfg, int64_t r) {
    const int64_t hd = cfg->head_dim, g = cfg->n_head / cfg->n_head_kv, Q = cfg->n_head * hd,
                  KV = cfg->n_head_kv * hd;
    int64_t group, j;
    if (r < Q) { /* query head h: the (h % g)-th of group h / g */
        group = (r / hd) / g;
        j = (r / hd) % g;
    } else if (r < Q + KV) {
        group = (r - Q) / hd;
        j = g;
    } else {
        group = (r - Q - KV) / hd;
        j = g + 1;
    }
    return (group * (g + 2) + j) * hd + r % hd;
}

bool ob_hf_gpt_moves_rows(ob_hf_xform xf) {
    return xf == OB_HF_XF_QKV_GROUPS || xf == OB_HF_XF_POS_OFFSET || xf == OB_HF_XF_CODEGEN_QKV;
}

int64_t ob_hf_gpt_dropped_rows(ob_hf_xform xf) { return xf == OB_HF_XF_POS_OFFSET ? OB_HF_OPT_POS_OFFSET : 0; }

/* CodeGen (transformers' CodeGenAttention): the projection's 3 E outputs
 * are OB_HF_CODEGEN_MP chunks of 3 E / MP, each chunk its share of the
 * queries, then of the values, then of the keys (E / MP each); head h's
 * rows are the (h % (n_head / MP))-th of chunk h / (n_head / MP). */
static int64_t codegen_src_row(const ob_hf_config *cfg, int64_t r) {
    const int64_t E = cfg->n_head * cfg->head_dim, local = E / OB_HF_CODEGEN_MP;
    const int64_t part = r / E, i = r % E;     /* output part: 0 q, 1 k, 2 v */
    static const int64_t slot_of[3] = {0, 2, 1}; /* where q, k, v sit in a chunk */
    return (i / local) * 3 * local + slot_of[part] * local + i % local;
}

int64_t ob_hf_gpt_src_row(const ob_hf_config *cfg, ob_hf_xform xf, int64_t r) {
    switch (xf) {
    case OB_HF_XF_QKV_GROUPS: return ob_hf_gpt_qkv_src_row(cfg, r);
    case OB_HF_XF_POS_OFFSET: return r + OB_HF_OPT_POS_OFFSET;
    case OB_HF_XF_CODEGEN_QKV: return codegen_src_row(cfg, r);
    default: return r;
    }
}
