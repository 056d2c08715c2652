/*
 * hf_encoder.c - config.json and tensor names of the bidirectional
 * encoders: BertModel (and BertForMaskedLM & co., whose `bert.` prefix is
 * dropped) -> GGUF `bert`, ModernBertModel (`model.` prefix dropped) ->
 * `modern-bert`, named as llama.cpp's converter names them. Heads an
 * embedding model does not use (the pooler, MLM and classifier heads) are
 * skipped, as llama.cpp skips them. convert.c does the planning, the
 * conversion and the writing (the same path as hf_gptlike.c's families).
 *
 * What is refused by name: BERT with a hidden_act other than erf "gelu",
 * relative position embeddings or is_decoder; ModernBERT with biases
 * (attention_bias, mlp_bias, norm_bias), another activation, or
 * layer_types that are not "global every global_attn_every_n_layers-th
 * layer from layer 0" (the only pattern llama.cpp's file can say).
 */
#include "hf_encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"

bool ob_hf_enc_is(ob_hf_arch a) { return a == OB_HF_BERT || a == OB_HF_MODERNBERT; }

bool ob_hf_enc_arch(const char *hf_arch, ob_hf_config *cfg) {
    static const struct {
        const char *hf;
        ob_hf_arch arch;
        const char *gguf;
    } archs[] = {
        {"BertModel", OB_HF_BERT, "bert"},
        {"BertForMaskedLM", OB_HF_BERT, "bert"},
        {"ModernBertModel", OB_HF_MODERNBERT, "modern-bert"},
        {"ModernBertForMaskedLM", OB_HF_MODERNBERT, "modern-bert"},
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(archs); i++)
        if (!strcmp(hf_arch, archs[i].hf)) {
            cfg->arch = archs[i].arch;
            cfg->gguf_arch = archs[i].gguf;
            return true;
        }
    return false;
}

/* ---- config.json ---- */

static json_t *jget(json_t *o, const char *key) {
    json_t *v = o ? json_object_get(o, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

/* A positive integer; dflt when absent (0: required). */
static int jint(json_t *o, const char *path, const char *key, int64_t dflt, int64_t *out) {
    json_t *v = jget(o, key);
    if (!v) {
        if (dflt <= 0) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is missing", path, key);
        *out = dflt;
        return 0;
    }
    double d = json_is_number(v) ? json_number_value(v) : -1;
    if (!(d > 0) || d != floor(d) || d > (double)((int64_t)1 << 31))
        return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a positive integer", path, key);
    *out = (int64_t)d;
    return 0;
}

/* A positive number; dflt when absent. */
static int jnum(json_t *o, const char *path, const char *key, double dflt, double *out) {
    json_t *v = jget(o, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0))
        return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a positive number", path, key);
    *out = json_number_value(v);
    return 0;
}

/* A string key must be absent or one of the allowed values (NULL-terminated). */
static int jstr_in(json_t *o, const char *path, const char *key, const char *const *allowed, const char *hf_arch) {
    json_t *v = jget(o, key);
    if (!v) return 0;
    if (!json_is_string(v)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a string", path, key);
    for (size_t i = 0; allowed[i]; i++)
        if (!strcmp(json_string_value(v), allowed[i])) return 0;
    return ob_err(OB_ERR_UNSUPPORTED, "%s: %s '%s' is not supported for %s (%s is)", path, key, json_string_value(v),
                  hf_arch, allowed[0]);
}

/* A boolean key that must not be true. */
static int refuse_true(json_t *o, const char *path, const char *key, const char *hf_arch) {
    json_t *v = jget(o, key);
    if (v && !json_is_boolean(v)) return ob_err(OB_ERR_FORMAT, "%s: key '%s' is not a boolean", path, key);
    if (json_is_true(v)) return ob_err(OB_ERR_UNSUPPORTED, "%s: %s=true is not supported for %s", path, key, hf_arch);
    return 0;
}

/* A sentence-transformers Pooling module beside config.json: its
 * pooling_mode_* as a GGUF pooling type in *out; *out unchanged when there
 * is none. */
static int st_pooling(const char *cfg_path, int *out) {
    size_t n = strlen(cfg_path), b = n;
    while (b > 0 && cfg_path[b - 1] != '/') b--;
    char dir[1024];
    if (b >= sizeof dir) return 0;
    memcpy(dir, cfg_path, b);
    dir[b] = 0;
    char p[1400];
    snprintf(p, sizeof p, "%smodules.json", dir);
    json_t *mods = json_load_file(p, 0, NULL);
    if (!mods) return 0;
    int rc = 0;
    size_t i;
    json_t *m;
    json_array_foreach(mods, i, m) {
        json_t *type = json_object_get(m, "type"), *sub = json_object_get(m, "path");
        if (!json_is_string(type) || !json_is_string(sub) || !strstr(json_string_value(type), "Pooling")) continue;
        snprintf(p, sizeof p, "%s%s/config.json", dir, json_string_value(sub));
        json_t *pc = json_load_file(p, 0, NULL);
        if (!pc) {
            rc = ob_err(OB_ERR_FORMAT, "%s: cannot read the Pooling module's config", p);
            break;
        }
        if (json_is_true(json_object_get(pc, "pooling_mode_cls_token"))) *out = OB_HF_POOL_CLS;
        else if (json_is_true(json_object_get(pc, "pooling_mode_mean_tokens"))) *out = OB_HF_POOL_MEAN;
        else if (json_is_true(json_object_get(pc, "pooling_mode_lasttoken"))) *out = OB_HF_POOL_LAST;
        else rc = ob_err(OB_ERR_UNSUPPORTED, "%s: a pooling mode other than cls, mean or last token", p);
        json_decref(pc);
        break;
    }
    json_decref(mods);
    return rc;
}

static int parse_bert(json_t *root, const char *path, ob_hf_config *cfg) {
    static const char *const gelu[] = {"gelu", NULL}, *const absolute[] = {"absolute", NULL};
    OB_TRY(jstr_in(root, path, "hidden_act", gelu, cfg->hf_arch));
    OB_TRY(jstr_in(root, path, "position_embedding_type", absolute, cfg->hf_arch));
    OB_TRY(refuse_true(root, path, "is_decoder", cfg->hf_arch));
    OB_TRY(refuse_true(root, path, "add_cross_attention", cfg->hf_arch));
    OB_TRY(jint(root, path, "type_vocab_size", 2, &cfg->enc.n_types));
    OB_TRY(jnum(root, path, "layer_norm_eps", 1e-12, &cfg->rms_eps));
    cfg->enc.pooling = OB_HF_POOL_MEAN; /* sentence-transformers' default for BERT checkpoints */
    return 0;
}

/* ModernBERT: RoPE bases from rope_parameters (transformers 5:
 * full_attention / sliding_attention) or global_rope_theta /
 * local_rope_theta (4.x), with ModernBERT's defaults. */
static int parse_modernbert(json_t *root, const char *path, ob_hf_config *cfg) {
    static const char *const gelu[] = {"gelu", NULL};
    OB_TRY(jstr_in(root, path, "hidden_activation", gelu, cfg->hf_arch));
    OB_TRY(refuse_true(root, path, "attention_bias", cfg->hf_arch));
    OB_TRY(refuse_true(root, path, "mlp_bias", cfg->hf_arch));
    OB_TRY(refuse_true(root, path, "norm_bias", cfg->hf_arch));
    OB_TRY(jnum(root, path, "norm_eps", 1e-5, &cfg->rms_eps));
    OB_TRY(jint(root, path, "local_attention", 128, &cfg->sliding_window));
    OB_TRY(jint(root, path, "global_attn_every_n_layers", 3, &cfg->swa_pattern));
    json_t *lt = jget(root, "layer_types");
    if (lt) {
        if (!json_is_array(lt) || (int64_t)json_array_size(lt) != cfg->n_layer)
            return ob_err(OB_ERR_FORMAT, "%s: layer_types must list %lld layers", path, (long long)cfg->n_layer);
        for (int64_t i = 0; i < cfg->n_layer; i++) {
            const char *t = json_string_value(json_array_get(lt, (size_t)i));
            const char *want = i % cfg->swa_pattern == 0 ? "full_attention" : "sliding_attention";
            if (!t || strcmp(t, want) != 0)
                return ob_err(OB_ERR_UNSUPPORTED,
                              "%s: layer_types[%lld] is '%s'; only a global layer every global_attn_every_n_layers "
                              "(%lld) from layer 0 is supported (%s expected)",
                              path, (long long)i, t ? t : "?", (long long)cfg->swa_pattern, want);
        }
    }
    cfg->rope_theta = 160000.0;
    cfg->rope_local_theta = 10000.0;
    json_t *rp = jget(root, "rope_parameters");
    if (json_is_object(rp)) {
        json_t *full = json_object_get(rp, "full_attention"), *local = json_object_get(rp, "sliding_attention");
        const json_t *parts[2] = {full, local};
        double *dst[2] = {&cfg->rope_theta, &cfg->rope_local_theta};
        for (int i = 0; i < 2; i++) {
            if (!json_is_object(parts[i])) continue;
            static const char *const dflt[] = {"default", NULL};
            OB_TRY(jstr_in((json_t *)parts[i], path, "rope_type", dflt, cfg->hf_arch));
            OB_TRY(jnum((json_t *)parts[i], path, "rope_theta", *dst[i], dst[i]));
        }
    } else {
        OB_TRY(jnum(root, path, "global_rope_theta", cfg->rope_theta, &cfg->rope_theta));
        OB_TRY(jnum(root, path, "local_rope_theta", cfg->rope_local_theta, &cfg->rope_local_theta));
    }
    cfg->n_rot = cfg->head_dim;
    cfg->enc.pooling = OB_HF_POOL_CLS;
    json_t *cp = jget(root, "classifier_pooling");
    if (cp) {
        static const char *const pools[] = {"cls", "mean", NULL};
        OB_TRY(jstr_in(root, path, "classifier_pooling", pools, cfg->hf_arch));
        if (!strcmp(json_string_value(cp), "mean")) cfg->enc.pooling = OB_HF_POOL_MEAN;
    }
    return 0;
}

int ob_hf_enc_parse(json_t *root, const char *path, ob_hf_config *cfg) {
    OB_TRY(jint(root, path, "hidden_size", 0, &cfg->n_embd));
    OB_TRY(jint(root, path, "intermediate_size", 0, &cfg->n_ff));
    OB_TRY(jint(root, path, "num_hidden_layers", 0, &cfg->n_layer));
    OB_TRY(jint(root, path, "num_attention_heads", 0, &cfg->n_head));
    OB_TRY(jint(root, path, "vocab_size", 0, &cfg->n_vocab));
    OB_TRY(jint(root, path, "max_position_embeddings", 0, &cfg->n_ctx));
    if (cfg->n_embd % cfg->n_head)
        return ob_err(OB_ERR_FORMAT, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld", path,
                      (long long)cfg->n_embd, (long long)cfg->n_head);
    cfg->n_head_kv = cfg->n_head;
    cfg->head_dim = cfg->n_embd / cfg->n_head;
    cfg->tied = true; /* no output layer: an encoder ends at its hidden states */
    OB_TRY(cfg->arch == OB_HF_BERT ? parse_bert(root, path, cfg) : parse_modernbert(root, path, cfg));
    OB_TRY(st_pooling(path, &cfg->enc.pooling));
    ob_hf_special_ids(root, cfg);
    return 0;
}

/* ---- tensor names ---- */

typedef enum dim { X_0, X_V, X_E, X_F, X_F2, X_QKV, X_P, X_T } dim;

typedef struct tmap {
    ob_hf_arch arch;
    const char *hf;   /* the full name (global) or the part after the layer prefix */
    bool layer;
    const char *gguf; /* without "blk.N." */
    dim d0, d1;       /* source shape, PyTorch order; X_0: 1-D */
    bool optional;
} tmap;

#define G(a, hf, gguf, d0, d1, o) {a, hf, false, gguf, d0, d1, o}
#define L(a, hf, gguf, d0, d1, o) {a, hf, true, gguf, d0, d1, o}

/* llama.cpp's names (gguf-py tensor_mapping.py) for the two families. */
static const tmap g_map[] = {
    G(OB_HF_BERT, "embeddings.word_embeddings.weight", "token_embd.weight", X_V, X_E, false),
    G(OB_HF_BERT, "embeddings.position_embeddings.weight", "position_embd.weight", X_P, X_E, false),
    G(OB_HF_BERT, "embeddings.token_type_embeddings.weight", "token_types.weight", X_T, X_E, true),
    G(OB_HF_BERT, "embeddings.LayerNorm.weight", "token_embd_norm.weight", X_E, X_0, false),
    G(OB_HF_BERT, "embeddings.LayerNorm.bias", "token_embd_norm.bias", X_E, X_0, false),
    L(OB_HF_BERT, "attention.self.query.weight", "attn_q.weight", X_E, X_E, false),
    L(OB_HF_BERT, "attention.self.query.bias", "attn_q.bias", X_E, X_0, false),
    L(OB_HF_BERT, "attention.self.key.weight", "attn_k.weight", X_E, X_E, false),
    L(OB_HF_BERT, "attention.self.key.bias", "attn_k.bias", X_E, X_0, false),
    L(OB_HF_BERT, "attention.self.value.weight", "attn_v.weight", X_E, X_E, false),
    L(OB_HF_BERT, "attention.self.value.bias", "attn_v.bias", X_E, X_0, false),
    L(OB_HF_BERT, "attention.output.dense.weight", "attn_output.weight", X_E, X_E, false),
    L(OB_HF_BERT, "attention.output.dense.bias", "attn_output.bias", X_E, X_0, false),
    L(OB_HF_BERT, "attention.output.LayerNorm.weight", "attn_output_norm.weight", X_E, X_0, false),
    L(OB_HF_BERT, "attention.output.LayerNorm.bias", "attn_output_norm.bias", X_E, X_0, false),
    L(OB_HF_BERT, "intermediate.dense.weight", "ffn_up.weight", X_F, X_E, false),
    L(OB_HF_BERT, "intermediate.dense.bias", "ffn_up.bias", X_F, X_0, false),
    L(OB_HF_BERT, "output.dense.weight", "ffn_down.weight", X_E, X_F, false),
    L(OB_HF_BERT, "output.dense.bias", "ffn_down.bias", X_E, X_0, false),
    L(OB_HF_BERT, "output.LayerNorm.weight", "layer_output_norm.weight", X_E, X_0, false),
    L(OB_HF_BERT, "output.LayerNorm.bias", "layer_output_norm.bias", X_E, X_0, false),

    G(OB_HF_MODERNBERT, "embeddings.tok_embeddings.weight", "token_embd.weight", X_V, X_E, false),
    G(OB_HF_MODERNBERT, "embeddings.norm.weight", "token_embd_norm.weight", X_E, X_0, false),
    G(OB_HF_MODERNBERT, "final_norm.weight", "output_norm.weight", X_E, X_0, false),
    L(OB_HF_MODERNBERT, "attn_norm.weight", "attn_norm.weight", X_E, X_0, true), /* layer 0 has none */
    L(OB_HF_MODERNBERT, "attn.Wqkv.weight", "attn_qkv.weight", X_QKV, X_E, false),
    L(OB_HF_MODERNBERT, "attn.Wo.weight", "attn_output.weight", X_E, X_E, false),
    L(OB_HF_MODERNBERT, "mlp_norm.weight", "ffn_norm.weight", X_E, X_0, false),
    L(OB_HF_MODERNBERT, "mlp.Wi.weight", "ffn_up.weight", X_F2, X_E, false),
    L(OB_HF_MODERNBERT, "mlp.Wo.weight", "ffn_down.weight", X_E, X_F, false),
};

static int64_t dim_of(const ob_hf_config *c, dim d) {
    switch (d) {
    case X_V: return c->n_vocab;
    case X_E: return c->n_embd;
    case X_F: return c->n_ff;
    case X_F2: return 2 * c->n_ff;
    case X_QKV: return 3 * c->n_embd;
    case X_P: return c->n_ctx;
    case X_T: return c->enc.n_types;
    default: return 0;
    }
}

static const char *layer_prefix(ob_hf_arch a) { return a == OB_HF_BERT ? "encoder.layer." : "layers."; }

/* Parts of a checkpoint an embedding model does not use. */
static bool skipped(const char *name) {
    static const char *const pre[] = {"pooler.", "cls.", "head.", "decoder.", "classifier.", "dense."};
    for (size_t i = 0; i < OB_ARRAY_LEN(pre); i++)
        if (!strncmp(name, pre[i], strlen(pre[i]))) return true;
    return !strcmp(name, "embeddings.position_ids");
}

int ob_hf_enc_map(const ob_hf_config *cfg, const char *name, ob_hf_gmap *out) {
    memset(out, 0, sizeof *out);
    out->layer = -1;
    const char *rest = name;
    if (cfg->arch == OB_HF_BERT && !strncmp(rest, "bert.", 5)) rest += 5;
    if (cfg->arch == OB_HF_MODERNBERT && !strncmp(rest, "model.", 6)) rest += 6;
    /* old checkpoints call LayerNorm's weight/bias gamma/beta */
    char norm[256];
    size_t n = strlen(rest);
    if (n < sizeof norm - 8 && n > 6 && !strcmp(rest + n - 6, ".gamma")) {
        snprintf(norm, sizeof norm, "%.*s.weight", (int)(n - 6), rest);
        rest = norm;
    } else if (n < sizeof norm - 8 && n > 5 && !strcmp(rest + n - 5, ".beta")) {
        snprintf(norm, sizeof norm, "%.*s.bias", (int)(n - 5), rest);
        rest = norm;
    }
    if (skipped(rest)) return 0;
    const int split = ob_hf_layer_split(cfg, name, rest, layer_prefix(cfg->arch), &out->layer, &rest);
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
        out->xform = OB_HF_XF_NONE;
        return 1;
    }
    return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' has no GGUF name in architecture %s (%s)", name, cfg->gguf_arch,
                  cfg->hf_arch);
}

int ob_hf_enc_check(const ob_hf_config *cfg, bool (*has)(const void *ctx, const char *name), const void *ctx) {
    for (size_t i = 0; i < OB_ARRAY_LEN(g_map); i++) {
        const tmap *t = &g_map[i];
        if (t->arch != cfg->arch || t->optional) continue;
        OB_TRY(ob_hf_need_tensor(cfg, t->layer, t->gguf, t->hf, layer_prefix(cfg->arch), has, ctx));
    }
    return 0;
}

int ob_hf_enc_keys(const ob_hf_config *cfg, ob_gguf_writer *w) {
    char k[128];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", cfg->gguf_arch, suffix), k)
    OB_TRY(ob_gguf_writer_set_bool(w, KEY("attention.causal"), false));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("pooling_type"), (uint32_t)cfg->enc.pooling));
    if (cfg->arch == OB_HF_BERT)
        OB_TRY(ob_gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)cfg->enc.n_types));
    if (cfg->arch == OB_HF_MODERNBERT) {
        OB_TRY(ob_gguf_writer_set_u32(w, KEY("attention.sliding_window_pattern"), (uint32_t)cfg->swa_pattern));
        OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), (float)cfg->rope_local_theta));
    }
#undef KEY
    return 0;
}
