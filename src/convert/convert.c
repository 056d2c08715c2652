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
    S_ROPE_FREQS,
    S_ATTN_NORM,
    S_ATTN_Q,
    S_ATTN_Q_B,
    S_ATTN_K,
    S_ATTN_K_B,
    S_ATTN_V,
    S_ATTN_V_B,
    S_ATTN_O,
    S_ATTN_O_B,
    S_ATTN_Q_NORM,
    S_ATTN_K_NORM,
    S_FFN_NORM,
    S_FFN_GATE,
    S_FFN_GATE_B,
    S_FFN_UP,
    S_FFN_UP_B,
    S_FFN_DOWN,
    S_FFN_DOWN_B,
    S_OUTPUT_NORM,
    S_OUTPUT,
    S_COUNT,
} slot;

typedef enum dimkind { D_NONE, D_VOCAB, D_EMBD, D_FF, D_Q, D_KV, D_HD } dimkind;

static const struct {
    const char *hf;   /* suffix after "model.layers.N." (per-layer) or full name */
    const char *gguf; /* "blk.%d." is prepended for per-layer slots */
    dimkind d0, d1;   /* expected shape, PyTorch order (rows, cols); D_NONE: 1-D */
} g_slots[S_COUNT] = {
    [S_TOKEN_EMBD] = {"model.embed_tokens.weight", "token_embd.weight", D_VOCAB, D_EMBD},
    [S_ROPE_FREQS] = {NULL, "rope_freqs.weight", D_NONE, D_NONE},
    [S_ATTN_NORM] = {"input_layernorm.weight", "attn_norm.weight", D_EMBD, D_NONE},
    [S_ATTN_Q] = {"self_attn.q_proj.weight", "attn_q.weight", D_Q, D_EMBD},
    [S_ATTN_Q_B] = {"self_attn.q_proj.bias", "attn_q.bias", D_Q, D_NONE},
    [S_ATTN_K] = {"self_attn.k_proj.weight", "attn_k.weight", D_KV, D_EMBD},
    [S_ATTN_K_B] = {"self_attn.k_proj.bias", "attn_k.bias", D_KV, D_NONE},
    [S_ATTN_V] = {"self_attn.v_proj.weight", "attn_v.weight", D_KV, D_EMBD},
    [S_ATTN_V_B] = {"self_attn.v_proj.bias", "attn_v.bias", D_KV, D_NONE},
    [S_ATTN_O] = {"self_attn.o_proj.weight", "attn_output.weight", D_EMBD, D_Q},
    [S_ATTN_O_B] = {"self_attn.o_proj.bias", "attn_output.bias", D_EMBD, D_NONE},
    [S_ATTN_Q_NORM] = {"self_attn.q_norm.weight", "attn_q_norm.weight", D_HD, D_NONE},
    [S_ATTN_K_NORM] = {"self_attn.k_norm.weight", "attn_k_norm.weight", D_HD, D_NONE},
    [S_FFN_NORM] = {"post_attention_layernorm.weight", "ffn_norm.weight", D_EMBD, D_NONE},
    [S_FFN_GATE] = {"mlp.gate_proj.weight", "ffn_gate.weight", D_FF, D_EMBD},
    [S_FFN_GATE_B] = {"mlp.gate_proj.bias", "ffn_gate.bias", D_FF, D_NONE},
    [S_FFN_UP] = {"mlp.up_proj.weight", "ffn_up.weight", D_FF, D_EMBD},
    [S_FFN_UP_B] = {"mlp.up_proj.bias", "ffn_up.bias", D_FF, D_NONE},
    [S_FFN_DOWN] = {"mlp.down_proj.weight", "ffn_down.weight", D_EMBD, D_FF},
    [S_FFN_DOWN_B] = {"mlp.down_proj.bias", "ffn_down.bias", D_EMBD, D_NONE},
    [S_OUTPUT_NORM] = {"model.norm.weight", "output_norm.weight", D_EMBD, D_NONE},
    [S_OUTPUT] = {"lm_head.weight", "output.weight", D_VOCAB, D_EMBD},
};

static bool slot_per_layer(slot s) { return s >= S_ATTN_NORM && s <= S_FFN_DOWN_B; }

/* One output tensor. */
typedef struct planned {
    char name[64];
    slot s;
    int layer;                /* -1 for global tensors */
    const ob_st_tensor *src;  /* NULL for generated tensors */
    ob_type type;
    int n_dims;
    int64_t ne[2];            /* GGUF order: ne[0] is the row length */
    int64_t permute_heads;    /* 0, or the head count of the llama q/k permutation */
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
static int map_name(const conv *c, const char *name, slot *s, int *layer) {
    *layer = -1;
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
            if (n >= c->cfg.n_layer)
                return ob_err(OB_ERR_FORMAT, "tensor '%s': layer %ld, but config.json has %lld layers", name, n,
                              (long long)c->cfg.n_layer);
            /* Cached RoPE frequencies some checkpoints carry; recomputed from hparams. */
            if (!strcmp(rest, "self_attn.rotary_emb.inv_freq")) return 0;
            for (int i = 0; i < S_COUNT; i++)
                if (slot_per_layer((slot)i) && !strcmp(rest, g_slots[i].hf)) {
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
    if (p->n_dims < 2 || strstr(p->name, "_norm.weight")) return OB_TYPE_F32;
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

static int plan_source(conv *c, const ob_st_tensor *t) {
    slot s = S_COUNT;
    int layer;
    int m = map_name(c, t->name, &s, &layer);
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
    if ((s == S_ATTN_Q_NORM || s == S_ATTN_K_NORM) && cfg->arch != OB_HF_QWEN3)
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s': q/k norms are not part of architecture %s", t->name,
                      cfg->gguf_arch);
    if (t->dtype != OB_ST_F32 && t->dtype != OB_ST_F16 && t->dtype != OB_ST_BF16)
        return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s' in %s has dtype %s; only F32, F16 and BF16 are converted",
                      t->name, t->file, ob_st_dtype_name(t->dtype));
    int want_dims = g_slots[s].d1 == D_NONE ? 1 : 2;
    int64_t w0 = dim_value(cfg, g_slots[s].d0), w1 = dim_value(cfg, g_slots[s].d1);
    if (t->n_dims != want_dims || t->shape[0] != w0 || (want_dims == 2 && t->shape[1] != w1)) {
        char got[96];
        shape_str(t, got, sizeof got);
        if (want_dims == 2)
            return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape %s; config.json implies [%lld, %lld]", t->name, got,
                          (long long)w0, (long long)w1);
        return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape %s; config.json implies [%lld]", t->name, got,
                      (long long)w0);
    }
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
    /* llama.cpp undoes HF's rotate_half layout only for the `llama` arch;
     * Qwen models keep it and use NeoX RoPE. */
    if (cfg->arch == OB_HF_LLAMA || cfg->arch == OB_HF_MISTRAL) {
        if (s == S_ATTN_Q || s == S_ATTN_Q_B) p.permute_heads = cfg->n_head;
        if (s == S_ATTN_K || s == S_ATTN_K_B) p.permute_heads = cfg->n_head_kv;
    }
    p.type = pick_type(c, &p);
    p.scratch_off = SIZE_MAX;
    return add_planned(c, &p);
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
static int check_complete(conv *c) {
    ob_hf_config *cfg = &c->cfg;
    if (!find_planned(c, S_TOKEN_EMBD, -1)) return ob_err(OB_ERR_FORMAT, "tensor 'model.embed_tokens.weight' is missing");
    if (!find_planned(c, S_OUTPUT_NORM, -1)) return ob_err(OB_ERR_FORMAT, "tensor 'model.norm.weight' is missing");
    if (!cfg->tied && !find_planned(c, S_OUTPUT, -1)) {
        OB_LOGW("lm_head.weight is absent although tie_word_embeddings is false: the output layer shares "
                "token_embd.weight");
        cfg->tied = true;
    }
    static const slot need[] = {S_ATTN_NORM, S_ATTN_Q, S_ATTN_K, S_ATTN_V, S_ATTN_O,
                                S_FFN_NORM,  S_FFN_GATE, S_FFN_UP, S_FFN_DOWN};
    for (int l = 0; l < cfg->n_layer; l++) {
        for (size_t i = 0; i < OB_ARRAY_LEN(need); i++)
            if (!find_planned(c, need[i], l))
                return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.%s' is missing", l, g_slots[need[i]].hf);
        if (cfg->arch == OB_HF_QWEN2) {
            static const slot b[] = {S_ATTN_Q_B, S_ATTN_K_B, S_ATTN_V_B};
            for (size_t i = 0; i < OB_ARRAY_LEN(b); i++)
                if (!find_planned(c, b[i], l))
                    return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.%s' is missing (Qwen2 has q/k/v biases)", l,
                                  g_slots[b[i]].hf);
        }
        if (cfg->arch == OB_HF_QWEN3) {
            static const slot nq[] = {S_ATTN_Q_NORM, S_ATTN_K_NORM};
            for (size_t i = 0; i < OB_ARRAY_LEN(nq); i++)
                if (!find_planned(c, nq[i], l))
                    return ob_err(OB_ERR_FORMAT, "tensor 'model.layers.%d.%s' is missing (Qwen3 has q/k norms)", l,
                                  g_slots[nq[i]].hf);
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
        p->nbytes = ob_row_size(p->type, p->ne[0]) * (size_t)p->ne[1];
        if (!p->src) continue;
        if (!p->permute_heads && same_type(p->src->dtype, p->type)) {
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
    int64_t rows = p->n_dims == 2 ? p->ne[1] : p->ne[0];
    int64_t row_len = p->n_dims == 2 ? p->ne[0] : 1;
    size_t esz = ob_st_dtype_size(t->dtype);
    size_t out_row = ob_row_size(p->type, row_len);
    for (int64_t r = 0; r < rows; r++) {
        int64_t sr = p->permute_heads ? (int64_t)ob_convert_qk_src_row(r, rows, p->permute_heads) : r;
        const unsigned char *s = t->data + (size_t)sr * (size_t)row_len * esz;
        unsigned char *d = dst + (size_t)r * out_row;
        if (same_type(t->dtype, p->type)) {
            memcpy(d, s, out_row);
        } else {
            src_to_float(t->dtype, s, row, row_len);
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
    OB_TRY(ob_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)cfg->rms_eps));
    OB_TRY(ob_gguf_writer_set_f32(w, KEY("rope.freq_base"), (float)cfg->rope_theta));
    OB_TRY(ob_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)cfg->head_dim));
    /* llama.cpp writes these whenever config.json states head_dim; readers
     * derive them from n_embd / n_head otherwise, which is wrong for models
     * such as Qwen3 whose head_dim differs. */
    if (cfg->head_dim_given || cfg->head_dim * cfg->n_head != cfg->n_embd) {
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
        n_params += p->ne[0] * p->ne[1];
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
    ob_free(c.p);
    ob_st_set_free(c.st);
    if (rc < 0) return ob_err_wrap(rc, "converting %s", hf_dir);
    return 0;
}
