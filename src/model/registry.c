/*
 * registry.c - the table of architectures and the helpers every
 * architecture file uses to read keys and bind tensors.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "arch_info.h"
#include "model.h"

extern const ob_arch ob_arch_llama, ob_arch_qwen2, ob_arch_qwen3, ob_arch_gemma, ob_arch_gemma2, ob_arch_gemma3,
    ob_arch_phi2, ob_arch_phi3, ob_arch_qwen3moe, ob_arch_qwen2moe, ob_arch_granite;
/* GPT lineage (gptlike.c) */
extern const ob_arch ob_arch_stablelm, ob_arch_gptneox, ob_arch_gpt2, ob_arch_starcoder2, ob_arch_starcoder, ob_arch_falcon, ob_arch_gptj, ob_arch_command_r, ob_arch_nemotron;
/* Llama-lineage variants (llama_variants.c) */
extern const ob_arch ob_arch_olmo2, ob_arch_smollm3, ob_arch_arcee, ob_arch_ernie4_5, ob_arch_seed_oss, ob_arch_olmo,
    ob_arch_glm4, ob_arch_olmoe, ob_arch_granitemoe;
/* DeepSeek-V3 / R1 / Kimi-K2 (deepseek2.c) */
extern const ob_arch ob_arch_deepseek2;
/* OPT, BLOOM (gptlike.c), BitNet (llama_variants.c) */
extern const ob_arch ob_arch_opt, ob_arch_bloom, ob_arch_bitnet;
/* encoders (bert.c) */
extern const ob_arch ob_arch_bert, ob_arch_modern_bert, ob_arch_nomic_bert;
/* InternLM2 (llama.c) */
extern const ob_arch ob_arch_internlm2;

/* `llama` files with experts (Mixtral) are handed to moe.c by llama.c's loader. */
static const ob_arch *const g_archs[] = {&ob_arch_llama,  &ob_arch_qwen2,  &ob_arch_qwen3,    &ob_arch_gemma,
                                         &ob_arch_gemma2, &ob_arch_gemma3, &ob_arch_phi2,     &ob_arch_phi3,
                                         &ob_arch_qwen3moe, &ob_arch_qwen2moe, &ob_arch_granite,
                                         &ob_arch_stablelm, &ob_arch_gptneox, &ob_arch_gpt2, &ob_arch_starcoder2, &ob_arch_starcoder, &ob_arch_falcon, &ob_arch_gptj, &ob_arch_command_r, &ob_arch_nemotron, /* gptlike.c */
                                         &ob_arch_olmo2, &ob_arch_smollm3, &ob_arch_arcee, &ob_arch_ernie4_5,
                                         &ob_arch_seed_oss, &ob_arch_olmo, &ob_arch_glm4, &ob_arch_olmoe,
                                         &ob_arch_granitemoe, &ob_arch_deepseek2,
                                         &ob_arch_opt, &ob_arch_bloom, &ob_arch_bitnet,
                                         &ob_arch_bert, &ob_arch_modern_bert, &ob_arch_nomic_bert,
                                         &ob_arch_internlm2};

const ob_arch *ob_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof g_archs / sizeof g_archs[0]; i++)
        if (strcmp(g_archs[i]->name, name) == 0) return g_archs[i];
    return NULL;
}

/* Built on first use; every caller writes the same bytes, and the buffer
 * holds far more than the table's names (checked: a name that would not fit
 * is left out rather than written past the end). */
const char *ob_arch_list(void) {
    static char buf[1024];
    if (!buf[0]) {
        size_t n = 0;
        for (size_t i = 0; i < sizeof g_archs / sizeof g_archs[0]; i++) {
            int k = snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "", g_archs[i]->name);
            if (k < 0 || (size_t)k >= sizeof buf - n) {
                buf[n] = 0;
                break;
            }
            n += (size_t)k;
        }
    }
    return buf;
}

size_t ob_arch_count(void) {
    return sizeof g_archs / sizeof g_archs[0];
}

const ob_arch *ob_arch_at(size_t i) {
    return i < ob_arch_count() ? g_archs[i] : NULL;
}

static void key_name(const ob_model_impl *m, const char *suffix, char *buf, size_t size) {
    snprintf(buf, size, "%s.%s", m->arch_name, suffix);
}

int ob_model_key_u32(const ob_model_impl *m, const char *suffix, int64_t *out) {
    char k[128];
    uint32_t v;
    key_name(m, suffix, k, sizeof k);
    OB_TRY(ob_gguf_get_u32(m->gguf, k, &v));
    *out = v;
    return 0;
}

int ob_model_key_f32(const ob_model_impl *m, const char *suffix, float *out) {
    char k[128];
    key_name(m, suffix, k, sizeof k);
    return ob_gguf_get_f32(m->gguf, k, out);
}

int ob_model_key_u32_opt(const ob_model_impl *m, const char *suffix, int64_t *out) {
    int rc = ob_model_key_u32(m, suffix, out);
    if (rc == OB_ERR_NOT_FOUND) {
        ob_err_clear();
        return 0;
    }
    return rc;
}

int ob_model_key_f32_opt(const ob_model_impl *m, const char *suffix, float *out) {
    int rc = ob_model_key_f32(m, suffix, out);
    if (rc == OB_ERR_NOT_FOUND) {
        ob_err_clear();
        return 0;
    }
    return rc;
}

int ob_model_tensor(ob_model_impl *m, ob_tensor *t, bool optional, int n_dims, const int64_t *ne, const char *fmt,
                    ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(t, 0, sizeof *t);
    const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
    if (!g) {
        if (optional) return 0;
        return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
    }
    /* Trailing dimensions of 1 may be omitted in the file. */
    for (int d = 0; d < 4; d++) {
        int64_t want = d < n_dims ? ne[d] : 1;
        if (want >= 0 && g->ne[d] != want)
            return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld]; expected dimension %d = %lld",
                          name, (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2], (long long)g->ne[3], d,
                          (long long)want);
    }
    ob_tensor_init(t, g->type, n_dims, g->ne, NULL);
    t->name = g->name;
    OB_TRY(m->backend->ops->weight(m->backend, t, g->data));
    m->n_params += (uint64_t)ob_gguf_tensor_nelements(g);
    m->n_bytes += g->nbytes;
    return 0;
}

int ob_model_tensor_rows(ob_model_impl *m, ob_tensor *t, const char *name, int64_t r0, int64_t n_rows) {
    memset(t, 0, sizeof *t);
    const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
    if (!g) return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
    /* a 1-D tensor (a fused bias) is sliced by elements */
    /* 3-D (stacked experts): rows of all experts one after another */
    const int nd = g->n_dims == 1 ? 1 : 2;
    const int64_t total = nd == 1 ? g->ne[0] : g->ne[1] * (g->n_dims == 3 ? g->ne[2] : 1), len = nd == 1 ? 1 : g->ne[0];
    if (g->n_dims > 3 || r0 < 0 || n_rows <= 0 || r0 + n_rows > total ||
        (nd == 1 && g->type != OB_TYPE_F32 && g->type != OB_TYPE_F16))
        return ob_err(OB_ERR_FORMAT, "tensor '%s': rows [%lld, %lld) do not fit its shape or type", name,
                      (long long)r0, (long long)(r0 + n_rows));
    int64_t ne[2] = {nd == 1 ? n_rows : len, n_rows};
    size_t row = ob_row_size(g->type, len);
    ob_tensor_init(t, g->type, nd, ne, NULL);
    t->name = g->name;
    OB_TRY(m->backend->ops->weight(m->backend, t, (const char *)g->data + (size_t)r0 * row));
    m->n_params += (uint64_t)(len * n_rows);
    m->n_bytes += row * (size_t)n_rows;
    return 0;
}

/* q/k/v from attn_qkv (split by rows) or from separate tensors, each with
 * an optional bias. */
int ob_model_bind_qkv(ob_model_impl *m, ob_layer *L, int il) {
    const ob_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
    const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
    if (g) {
        if (g->n_dims != 2 || g->ne[0] != E || g->ne[1] != Q + 2 * KV)
            return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld]; expected [%lld, %lld]", name,
                          (long long)g->ne[0], (long long)g->ne[1], (long long)E, (long long)(Q + 2 * KV));
        OB_TRY(ob_model_tensor_rows(m, &L->wq, name, 0, Q));
        OB_TRY(ob_model_tensor_rows(m, &L->wk, name, Q, KV));
        OB_TRY(ob_model_tensor_rows(m, &L->wv, name, Q + KV, KV));
        snprintf(name, sizeof name, "blk.%d.attn_qkv.bias", il);
        const ob_gguf_tensor *gb = ob_gguf_find_tensor(m->gguf, name);
        if (gb) {
            if (gb->n_dims != 1 || gb->ne[0] != Q + 2 * KV || gb->type != OB_TYPE_F32)
                return ob_err(OB_ERR_FORMAT, "tensor '%s' must be f32 [%lld]", name, (long long)(Q + 2 * KV));
            OB_TRY(ob_model_tensor_rows(m, &L->bq, name, 0, Q));
            OB_TRY(ob_model_tensor_rows(m, &L->bk, name, Q, KV));
            OB_TRY(ob_model_tensor_rows(m, &L->bv, name, Q + KV, KV));
        }
        return 0;
    }
    int64_t sq[2] = {E, Q}, skv[2] = {E, KV};
    OB_TRY(ob_model_tensor(m, &L->wq, false, 2, sq, "blk.%d.attn_q.weight", il));
    OB_TRY(ob_model_tensor(m, &L->wk, false, 2, skv, "blk.%d.attn_k.weight", il));
    OB_TRY(ob_model_tensor(m, &L->wv, false, 2, skv, "blk.%d.attn_v.weight", il));
    OB_TRY(ob_model_tensor(m, &L->bq, true, 1, &Q, "blk.%d.attn_q.bias", il));
    OB_TRY(ob_model_tensor(m, &L->bk, true, 1, &KV, "blk.%d.attn_k.bias", il));
    OB_TRY(ob_model_tensor(m, &L->bv, true, 1, &KV, "blk.%d.attn_v.bias", il));
    return 0;
}

int ob_model_check_f32(const ob_tensor *const *ts, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (ts[k]->data && ts[k]->type != OB_TYPE_F32)
            return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' is %s; norms and biases must be f32", ts[k]->name,
                          ob_type_name(ts[k]->type));
    return 0;
}

int ob_model_load_common(ob_model_impl *m, const char *eps_key) {
    ob_hparams *hp = &m->hp;
    OB_TRY(ob_model_key_u32(m, "embedding_length", &hp->n_embd));
    OB_TRY(ob_model_key_u32(m, "block_count", &hp->n_layer));
    OB_TRY(ob_model_key_u32(m, "feed_forward_length", &hp->n_ff));
    OB_TRY(ob_model_key_u32(m, "attention.head_count", &hp->n_head));
    hp->n_head_kv = hp->n_head;
    OB_TRY(ob_model_key_u32_opt(m, "attention.head_count_kv", &hp->n_head_kv));
    hp->n_ctx_train = 2048;
    OB_TRY(ob_model_key_u32_opt(m, "context_length", &hp->n_ctx_train));
    OB_TRY(ob_model_key_f32(m, eps_key, &hp->norm_eps));
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_ff <= 0)
        return ob_err(OB_ERR_FORMAT, "%s: embedding_length, block_count, feed_forward_length and head counts must be > 0",
                      m->arch_name);
    if (hp->n_layer > 4096 || hp->n_head > 4096 || hp->n_embd > ((int64_t)1 << 20) || hp->n_ff > ((int64_t)1 << 24))
        return ob_err(OB_ERR_FORMAT, "%s: absurd layer, head or width count", m->arch_name);
    if (hp->n_head % hp->n_head_kv)
        return ob_err(OB_ERR_FORMAT, "%s.attention.head_count %lld is not a multiple of head_count_kv %lld", m->arch_name,
                      (long long)hp->n_head, (long long)hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    OB_TRY(ob_model_key_u32_opt(m, "attention.key_length", &hp->head_dim));
    hp->head_dim_v = hp->head_dim;
    OB_TRY(ob_model_key_u32_opt(m, "attention.value_length", &hp->head_dim_v));
    if (hp->head_dim <= 0 || hp->head_dim > 4096 || hp->head_dim_v != hp->head_dim)
        return ob_err(OB_ERR_UNSUPPORTED, "%s: key length %lld and value length %lld must be equal and > 0", m->arch_name,
                      (long long)hp->head_dim, (long long)hp->head_dim_v);
    hp->sliding_window = 0;
    return 0;
}

static int rope_scaling(ob_model_impl *m, const char *type, float factor);

int ob_model_load_rope(ob_model_impl *m, ob_rope_mode mode) {
    ob_hparams *hp = &m->hp;
    ob_rope_params *r = &hp->rope;
    memset(r, 0, sizeof *r);
    r->mode = mode;
    int64_t n_rot = hp->head_dim;
    OB_TRY(ob_model_key_u32_opt(m, "rope.dimension_count", &n_rot));
    if (n_rot <= 0 || n_rot > hp->head_dim || n_rot % 2)
        return ob_err(OB_ERR_FORMAT, "%s.rope.dimension_count = %lld does not fit head dimension %lld", m->arch_name,
                      (long long)n_rot, (long long)hp->head_dim);
    r->n_rot = (int)n_rot;
    r->freq_base = 10000.0f;
    OB_TRY(ob_model_key_f32_opt(m, "rope.freq_base", &r->freq_base));
    if (!(r->freq_base > 1.0f)) return ob_err(OB_ERR_FORMAT, "%s.rope.freq_base must be > 1", m->arch_name);
    r->freq_scale = 1.0f;
    r->attn_factor = 1.0f;
    r->beta_fast = 32.0f;
    r->beta_slow = 1.0f;
    r->n_ctx_orig = (int)hp->n_ctx_train;
    hp->rope_scaling = OB_ROPE_SCALING_NONE;
    char key[96];
    const char *type = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch_name);
    int rc = ob_gguf_get_str(m->gguf, key, &type);
    if (rc < 0 && rc != OB_ERR_NOT_FOUND) return rc;
    ob_err_clear();
    float factor = 0.0f;
    OB_TRY(ob_model_key_f32_opt(m, "rope.scaling.factor", &factor));
    if (factor == 0.0f) { /* older files: rope.scale_linear */
        float lin = 0.0f;
        OB_TRY(ob_model_key_f32_opt(m, "rope.scale_linear", &lin));
        if (lin > 0.0f && lin != 1.0f) {
            factor = lin;
            if (!type) type = "linear";
        }
    }
    if (type && strcmp(type, "none") != 0) OB_TRY(rope_scaling(m, type, factor));
    ob_err_clear();
    /* Llama 3: per-dimension frequency divisors in a tensor. */
    const ob_gguf_tensor *ff = ob_gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (ff) {
        if (ff->type != OB_TYPE_F32 || ob_gguf_tensor_nelements(ff) != n_rot / 2)
            return ob_err(OB_ERR_FORMAT, "tensor 'rope_freqs.weight' must be f32 of %lld elements", (long long)(n_rot / 2));
        m->rope_freqs = ob_malloc((size_t)(n_rot / 2) * sizeof(float));
        if (!m->rope_freqs) return ob_err(OB_ERR_OOM, "rope_freqs");
        memcpy(m->rope_freqs, ff->data, (size_t)(n_rot / 2) * sizeof(float));
        r->freq_factors = m->rope_freqs;
        if (hp->rope_scaling == OB_ROPE_SCALING_NONE) hp->rope_scaling = OB_ROPE_SCALING_LLAMA3;
    }
    return 0;
}

/* rope.scaling.type TYPE with factor FACTOR (type is neither NULL nor "none"). */
static int rope_scaling(ob_model_impl *m, const char *type, float factor) {
    ob_hparams *hp = &m->hp;
    ob_rope_params *r = &hp->rope;
    if (!(factor > 0.0f))
        return ob_err(OB_ERR_FORMAT, "%s.rope.scaling.type is '%s' but %s.rope.scaling.factor is missing or <= 0",
                      m->arch_name, type, m->arch_name);
    int64_t orig = 0;
    OB_TRY(ob_model_key_u32_opt(m, "rope.scaling.original_context_length", &orig));
    if (orig > 0) r->n_ctx_orig = (int)orig;
    if (strcmp(type, "linear") == 0) {
        hp->rope_scaling = OB_ROPE_SCALING_LINEAR;
        r->freq_scale = 1.0f / factor;
    } else if (strcmp(type, "yarn") == 0) {
        hp->rope_scaling = OB_ROPE_SCALING_YARN;
        r->freq_scale = 1.0f / factor;
        r->ext_factor = 1.0f;
        OB_TRY(ob_model_key_f32_opt(m, "rope.scaling.yarn_ext_factor", &r->ext_factor));
        OB_TRY(ob_model_key_f32_opt(m, "rope.scaling.attn_factor", &r->attn_factor));
        OB_TRY(ob_model_key_f32_opt(m, "rope.scaling.yarn_beta_fast", &r->beta_fast));
        OB_TRY(ob_model_key_f32_opt(m, "rope.scaling.yarn_beta_slow", &r->beta_slow));
    } else {
        return ob_err(OB_ERR_UNSUPPORTED, "%s.rope.scaling.type '%s' is not supported (none, linear, yarn)",
                      m->arch_name, type);
    }
    return 0;
}

void ob_model_window_tokens(const ob_attn_token *in, int64_t n, int64_t window, ob_attn_token *out) {
    for (int64_t i = 0; i < n; i++) {
        out[i] = in[i];
        int64_t s = (int64_t)in[i].pos - window + 1;
        if (window > 0 && s > out[i].kv_start) out[i].kv_start = (int32_t)s;
    }
}
