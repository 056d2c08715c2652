/*
 * quantize.c - whole-file quantization (quantize.h): the mixes and their
 * per-tensor recipes, fallbacks for rows that do not split into blocks,
 * overrides, importance weights, the Hadamard rotation, and the threaded
 * convert-and-write loop.
 *
 * The recipes follow the rules llama.cpp's quantizer uses for each mix, so a
 * "Q4_K_M" from here has the same types tensor for tensor as one made there:
 *   - output.weight (token_embd.weight when the output is tied to it) gets
 *     Q6_K, or Q8_0 when its rows do not split into the base type's blocks;
 *     Q5_K for the 1-2 bit IQ mixes.
 *   - attn_v gets more bits (how many depends on the mix and on GQA: with
 *     n_head / n_head_kv >= 4 the matrix is small, so it is cheap);
 *     ffn_down in the first eighth of layers, the last eighth, and every
 *     third one between ("use_more_bits") gets more bits for the _M mixes.
 *   - attn_output gets one step more for Q2_K, Q3_K_M/L, IQ3.
 * The counters (i-th attn_v, i-th ffn_down) follow file order, as there.
 */
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../core/threadpool.h"
#include "../gguf/gguf.h"
#include "hadamard.h"
#include "iq_quant.h"
#include "quant_weighted.h"
#include "quantize.h"

/* general.file_type values (llama.cpp's llama_ftype). */
enum {
    FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_Q2_K_S = 21,
    FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24, FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27,
    FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30, FT_IQ1_M = 31, FT_BF16 = 32, FT_TQ1_0 = 36,
    FT_TQ2_0 = 37, FT_MXFP4_MOE = 38,
};

static const ob_ftype_info g_ftypes[] = {
    {"F32", FT_F32, OB_TYPE_F32, false, "32 bits, no loss"},
    {"F16", FT_F16, OB_TYPE_F16, false, "16 bits"},
    {"BF16", FT_BF16, OB_TYPE_BF16, false, "16 bits, float32's range"},
    {"Q8_0", FT_Q8_0, OB_TYPE_Q8_0, false, "8.5 bpw, close to F16"},
    {"Q6_K", FT_Q6_K, OB_TYPE_Q6_K, false, "6.56 bpw"},
    {"Q5_K_M", FT_Q5_K_M, OB_TYPE_Q5_K, false, "Q5_K; Q6_K for output, half of attn_v and ffn_down"},
    {"Q5_K_S", FT_Q5_K_S, OB_TYPE_Q5_K, false, "Q5_K; Q6_K output"},
    {"Q5_1", FT_Q5_1, OB_TYPE_Q5_1, false, "6 bpw, legacy"},
    {"Q5_0", FT_Q5_0, OB_TYPE_Q5_0, false, "5.5 bpw, legacy"},
    {"Q4_K_M", FT_Q4_K_M, OB_TYPE_Q4_K, false, "Q4_K; Q6_K for output, half of attn_v and ffn_down"},
    {"Q4_K_S", FT_Q4_K_S, OB_TYPE_Q4_K, false, "Q4_K; Q5_K for early attn_v/ffn_down"},
    {"Q4_1", FT_Q4_1, OB_TYPE_Q4_1, false, "5 bpw, legacy"},
    {"Q4_0", FT_Q4_0, OB_TYPE_Q4_0, false, "4.5 bpw, legacy; --hadamard rotates it"},
    {"IQ4_NL", FT_IQ4_NL, OB_TYPE_IQ4_NL, false, "4.5 bpw, non-linear levels"},
    {"IQ4_XS", FT_IQ4_XS, OB_TYPE_IQ4_XS, false, "4.25 bpw, non-linear levels"},
    {"MXFP4_MOE", FT_MXFP4_MOE, OB_TYPE_MXFP4, false, "MXFP4 experts, Q8_0 elsewhere"},
    {"Q3_K_L", FT_Q3_K_L, OB_TYPE_Q3_K, false, "Q3_K; Q5_K attn_v/ffn_down/attn_output"},
    {"Q3_K_M", FT_Q3_K_M, OB_TYPE_Q3_K, false, "Q3_K; Q4_K/Q5_K attn_v, ffn_down, attn_output"},
    {"Q3_K_S", FT_Q3_K_S, OB_TYPE_Q3_K, false, "Q3_K everywhere but the output"},
    {"IQ3_M", FT_IQ3_M, OB_TYPE_IQ3_S, false, "IQ3_S with Q4_K attn_v/attn_output"},
    {"IQ3_S", FT_IQ3_S, OB_TYPE_IQ3_S, false, "3.44 bpw codebook"},
    {"IQ3_XS", FT_IQ3_XS, OB_TYPE_IQ3_S, false, "IQ3_S with IQ3_XXS q/k and middle FFN"},
    {"IQ3_XXS", FT_IQ3_XXS, OB_TYPE_IQ3_XXS, false, "3.06 bpw codebook"},
    {"Q2_K", FT_Q2_K, OB_TYPE_Q2_K, false, "Q2_K; Q3_K ffn_down/attn_output, Q3_K/Q4_K attn_v"},
    {"Q2_K_S", FT_Q2_K_S, OB_TYPE_Q2_K, true, "Q2_K almost everywhere (needs an imatrix)"},
    {"IQ2_M", FT_IQ2_M, OB_TYPE_IQ2_S, true, "2.7 bpw codebook (needs an imatrix)"},
    {"IQ2_S", FT_IQ2_S, OB_TYPE_IQ2_XS, true, "2.5 bpw codebook (needs an imatrix)"},
    {"IQ2_XS", FT_IQ2_XS, OB_TYPE_IQ2_XS, true, "2.31 bpw codebook (needs an imatrix)"},
    {"IQ2_XXS", FT_IQ2_XXS, OB_TYPE_IQ2_XXS, true, "2.06 bpw codebook (needs an imatrix)"},
    {"IQ1_M", FT_IQ1_M, OB_TYPE_IQ1_M, true, "1.75 bpw codebook (needs an imatrix)"},
    {"IQ1_S", FT_IQ1_S, OB_TYPE_IQ1_S, true, "1.56 bpw codebook (needs an imatrix)"},
    {"TQ2_0", FT_TQ2_0, OB_TYPE_TQ2_0, false, "2.06 bpw ternary (for ternary-trained models)"},
    {"TQ1_0", FT_TQ1_0, OB_TYPE_TQ1_0, false, "1.69 bpw ternary (for ternary-trained models)"},
};

const ob_ftype_info *ob_ftype_list(int *n) {
    *n = (int)(sizeof g_ftypes / sizeof g_ftypes[0]);
    return g_ftypes;
}

const ob_ftype_info *ob_ftype_find(const char *name) {
    static const struct { const char *alias, *name; } aliases[] = {
        {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"}, {"Q3_K", "Q3_K_M"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias)) name = aliases[i].name;
    for (size_t i = 0; i < sizeof g_ftypes / sizeof g_ftypes[0]; i++)
        if (!strcasecmp(name, g_ftypes[i].name)) return &g_ftypes[i];
    return NULL;
}

const ob_ftype_info *ob_ftype_by_id(int ftype) {
    for (size_t i = 0; i < sizeof g_ftypes / sizeof g_ftypes[0]; i++)
        if (g_ftypes[i].ftype == ftype) return &g_ftypes[i];
    return NULL;
}

void ob_quantize_params_init(ob_quantize_params *p) {
    memset(p, 0, sizeof *p);
    p->output_type = -1;
    p->embd_type = -1;
}

/* ---------------------------------------------------------------- recipe */

typedef struct recipe {
    int ftype;
    char arch[64];
    int64_t n_layer, n_gqa, n_expert;
    bool has_output, has_imatrix;
    int n_attention_wv, i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
    int64_t n_fallback;
} recipe;

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* Layer of an expert tensor from its name (experts are not in layer order in some files). */
static int layer_of(const char *name, int fallback) {
    int l;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : fallback;
}

static bool is_low_iq(int ft) {
    return ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ2_S || ft == FT_IQ2_M || ft == FT_IQ1_M;
}

/* The recipe's type for one matrix (before the block-size fallback). */
static ob_type recipe_type(recipe *r, ob_type t, const char *name) {
    const int ft = r->ftype;
    const bool falcon = !strcmp(r->arch, "falcon");
    if (!strcmp(name, "output.weight") || (!r->has_output && !strcmp(name, "token_embd.weight"))) {
        if (ft == FT_MXFP4_MOE) return OB_TYPE_Q8_0;
        if (falcon) return OB_TYPE_Q8_0;
        if (is_low_iq(ft) || ft == FT_IQ3_XXS) return OB_TYPE_Q5_K;
        return t != OB_TYPE_Q8_0 ? OB_TYPE_Q6_K : t;
    }
    if (ft == FT_MXFP4_MOE) return has(name, "_exps.") ? OB_TYPE_MXFP4 : OB_TYPE_Q8_0;
    if (!strcmp(name, "token_embd.weight")) {
        if (ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ1_M) return OB_TYPE_Q2_K;
        if (ft == FT_IQ2_S || ft == FT_IQ2_M || ft == FT_IQ3_XXS) return OB_TYPE_IQ3_S;
        if (ft == FT_TQ1_0 || ft == FT_TQ2_0) return OB_TYPE_Q4_K;
        return t;
    }
    if (is_low_iq(ft)) {
        const bool s_or_m = ft == FT_IQ2_S || ft == FT_IQ2_M;
        if (has(name, "attn_v.weight")) {
            r->i_attention_wv++;
            if (r->n_gqa >= 4 || r->n_expert >= 4) return OB_TYPE_Q4_K;
            return s_or_m ? OB_TYPE_IQ3_S : OB_TYPE_Q2_K;
        }
        if (r->n_expert == 8 && has(name, "attn_k.weight")) return OB_TYPE_Q4_K;
        if (has(name, "ffn_down")) {
            if (r->i_ffn_down++ < r->n_layer / 8) return s_or_m ? OB_TYPE_IQ3_S : OB_TYPE_Q2_K;
            return t;
        }
        if (has(name, "attn_output.weight")) {
            if (r->n_expert == 8) return OB_TYPE_Q5_K;
            if (ft == FT_IQ1_S || ft == FT_IQ1_M) return OB_TYPE_IQ2_XXS;
            if (s_or_m) return OB_TYPE_IQ3_S;
        }
        return t;
    }
    if (has(name, "attn_v.weight")) {
        const int i = r->i_attention_wv++, n = r->n_attention_wv;
        if (ft == FT_Q2_K) t = r->n_gqa >= 4 ? OB_TYPE_Q4_K : OB_TYPE_Q3_K;
        else if (ft == FT_Q2_K_S && r->n_gqa >= 4) t = OB_TYPE_Q4_K;
        else if (ft == FT_IQ3_XXS)
            t = r->n_gqa >= 4 ? OB_TYPE_Q4_K : !r->has_imatrix ? OB_TYPE_IQ3_S : OB_TYPE_IQ3_XXS;
        else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && r->n_gqa >= 4) t = OB_TYPE_Q4_K;
        else if (ft == FT_IQ3_M) t = OB_TYPE_Q4_K;
        else if (ft == FT_Q3_K_M) t = i < 2 ? OB_TYPE_Q5_K : OB_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L) t = OB_TYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && r->n_gqa >= 4) t = OB_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && more_bits(i, n)) t = OB_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && i < 4) t = OB_TYPE_Q5_K;
        if (r->n_expert == 8) t = OB_TYPE_Q8_0;
        return t;
    }
    if (has(name, "attn_k.weight")) {
        if (r->n_expert == 8) return OB_TYPE_Q8_0;
        if (ft == FT_IQ3_XS) return OB_TYPE_IQ3_XXS;
        if (ft == FT_IQ3_XXS) return OB_TYPE_IQ2_S;
        return t;
    }
    if (has(name, "attn_q.weight")) {
        if (ft == FT_IQ3_XS) return OB_TYPE_IQ3_XXS;
        if (ft == FT_IQ3_XXS) return OB_TYPE_IQ2_S;
        return t;
    }
    if (has(name, "ffn_down")) {
        const int n = (int)r->n_layer, i = r->n_expert > 1 ? layer_of(name, r->i_ffn_down) : r->i_ffn_down;
        r->i_ffn_down++;
        if (ft == FT_Q2_K) return OB_TYPE_Q3_K;
        if (ft == FT_Q2_K_S) return i < n / 8 ? OB_TYPE_Q4_K : t;
        if (ft == FT_IQ3_XXS && !r->has_imatrix) return i < n / 8 ? OB_TYPE_Q4_K : OB_TYPE_Q3_K;
        if (ft == FT_Q3_K_M)
            return i < n / 16 ? OB_TYPE_Q5_K : !falcon || more_bits(i, n) ? OB_TYPE_Q4_K : OB_TYPE_Q3_K;
        if (ft == FT_IQ3_M && (i < n / 8 || (r->n_expert == 8 && more_bits(i, n)))) return OB_TYPE_Q4_K;
        if (ft == FT_Q3_K_L) return falcon ? OB_TYPE_Q4_K : OB_TYPE_Q5_K;
        if (ft == FT_Q4_K_M) {
            if (falcon) return i < n / 16 ? OB_TYPE_Q6_K : more_bits(i, n) ? OB_TYPE_Q5_K : OB_TYPE_Q4_K;
            return more_bits(i, n) ? OB_TYPE_Q6_K : t;
        }
        if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !r->has_imatrix) return OB_TYPE_Q5_K;
        if (ft == FT_Q5_K_M && more_bits(i, n)) return OB_TYPE_Q6_K;
        if (ft == FT_Q4_K_S && !falcon && i < n / 8) return OB_TYPE_Q5_K;
        /* Q4_1/Q5_1 go wrong on early ffn_down without an imatrix, so only with one. */
        if ((ft == FT_Q4_0 || ft == FT_Q5_0) && r->has_imatrix && i < n / 8)
            return ft == FT_Q4_0 ? OB_TYPE_Q4_1 : OB_TYPE_Q5_1;
        return t;
    }
    if (has(name, "attn_output.weight")) {
        if (falcon) return ft == FT_Q3_K_L ? OB_TYPE_Q4_K : t;
        if (r->n_expert == 8) {
            if (ft == FT_Q2_K || ft == FT_IQ3_XS || ft == FT_IQ3_XXS || ft == FT_Q3_K_S || ft == FT_Q3_K_M ||
                ft == FT_IQ4_NL || ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ3_S || ft == FT_IQ3_M ||
                ft == FT_IQ4_XS)
                return OB_TYPE_Q5_K;
            return t;
        }
        if (ft == FT_Q2_K) return OB_TYPE_Q3_K;
        if (ft == FT_IQ3_XXS) return OB_TYPE_IQ3_S;
        if (ft == FT_Q3_K_M || ft == FT_IQ3_M) return OB_TYPE_Q4_K;
        if (ft == FT_Q3_K_L) return OB_TYPE_Q5_K;
        return t;
    }
    if (has(name, "attn_qkv.weight")) {
        if (ft == FT_Q3_K_M || ft == FT_Q3_K_L || ft == FT_IQ3_M) return OB_TYPE_Q4_K;
        if (ft == FT_Q4_K_M) return OB_TYPE_Q5_K;
        if (ft == FT_Q5_K_M) return OB_TYPE_Q6_K;
        return t;
    }
    if (has(name, "ffn_gate") || has(name, "ffn_up")) {
        const bool gate = has(name, "ffn_gate");
        int *ctr = gate ? &r->i_ffn_gate : &r->i_ffn_up;
        const int n = (int)r->n_layer, i = r->n_expert > 1 ? layer_of(name, *ctr) : *ctr;
        (*ctr)++;
        if (ft == FT_IQ3_XS && i >= n / 8 && i < 7 * n / 8) return OB_TYPE_IQ3_XXS;
        return t;
    }
    return t;
}

/* A type whose blocks fit rows of ne0 (llama.cpp's fallback chain). */
static ob_type fit_type(ob_type t, int64_t ne0) {
    if (ne0 % ob_type_get(t)->block_size == 0) return t;
    ob_type f;
    switch (t) {
    case OB_TYPE_Q2_K:
    case OB_TYPE_Q3_K:
    case OB_TYPE_TQ1_0:
    case OB_TYPE_TQ2_0: f = OB_TYPE_Q4_0; break;
    case OB_TYPE_IQ2_XXS:
    case OB_TYPE_IQ2_XS:
    case OB_TYPE_IQ2_S:
    case OB_TYPE_IQ3_XXS:
    case OB_TYPE_IQ3_S:
    case OB_TYPE_IQ1_S:
    case OB_TYPE_IQ1_M:
    case OB_TYPE_IQ4_XS: f = OB_TYPE_IQ4_NL; break;
    case OB_TYPE_Q4_K: f = OB_TYPE_Q5_0; break;
    case OB_TYPE_Q5_K: f = OB_TYPE_Q5_1; break;
    case OB_TYPE_Q6_K: f = OB_TYPE_Q8_0; break;
    default: f = OB_TYPE_F16; break;
    }
    return ne0 % ob_type_get(f)->block_size == 0 ? f : OB_TYPE_F16;
}

/* Whether a tensor is a weight matrix to convert at all (norms, biases,
 * position embeddings and expert routers stay as they are). */
static bool is_matrix(const ob_gguf_tensor *t, const ob_quantize_params *p) {
    const char *n = t->name;
    size_t len = strlen(n);
    if (len < 6 || strcmp(n + len - 6, "weight")) return false;
    if (t->n_dims < 2) return false;
    if (has(n, "_norm.weight") || has(n, "ffn_gate_inp.weight") || has(n, "ssm_conv1d.weight") ||
        has(n, "attn_rel_b.weight") || has(n, ".position_embd.") || !strcmp(n, "position_embd.weight") ||
        !strcmp(n, "token_types.weight"))
        return false;
    if (p->leave_output && !strcmp(n, "output.weight")) return false;
    return true;
}

static bool needs_imatrix(ob_type t, const char *name, int ftype) {
    if (t == OB_TYPE_IQ2_XXS || t == OB_TYPE_IQ2_XS || t == OB_TYPE_IQ2_S || t == OB_TYPE_IQ1_S) return true;
    if (t == OB_TYPE_IQ1_M) return strcmp(name, "token_embd.weight") && strcmp(name, "output.weight");
    return t == OB_TYPE_Q2_K && ftype == FT_Q2_K_S && strcmp(name, "token_embd.weight");
}

/* ----------------------------------------------------------------- work */

typedef struct job {
    const ob_gguf_tensor *src;
    ob_type type;
    bool rotate;
    const ob_imatrix_entry *im;
    void *data;  /* output bytes (owned) or NULL when the source bytes are kept */
    size_t nbytes;
} job;

typedef struct task {
    const ob_gguf_tensor *src;
    float *f32;          /* [rows][ne0] */
    void *out;
    ob_type type;
    int64_t ne0, rows, rows_per_mat;
    const ob_imatrix_entry *im;
    float *weights;      /* [n_threads][ne0] scratch */
    bool rotate;
    uint32_t seed;
    int phase;           /* 0 dequantize, 1 quantize */
    int64_t chunk_rows;
} task;

static void task_fn(const ob_task_ctx *ctx, void *arg) {
    task *t = arg;
    const ob_type_traits *src_tr = ob_type_get((int)t->src->type);
    const ob_type_traits *dst_tr = ob_type_get((int)t->type);
    size_t src_row = ob_row_size(t->src->type, t->ne0), dst_row = ob_row_size(t->type, t->ne0);
    int64_t n_chunks = (t->rows + t->chunk_rows - 1) / t->chunk_rows;
    float *w = t->weights + (size_t)ctx->ith * (size_t)t->ne0;
    for (;;) {
        int64_t c = ob_threadpool_next_chunk(ctx->pool);
        if (c >= n_chunks) break;
        int64_t r0 = c * t->chunk_rows, r1 = r0 + t->chunk_rows < t->rows ? r0 + t->chunk_rows : t->rows;
        if (t->phase == 0) {
            for (int64_t r = r0; r < r1; r++)
                src_tr->to_float((const char *)t->src->data + (size_t)r * src_row, t->f32 + r * t->ne0, t->ne0);
            if (t->rotate) ob_hadamard_rotate_rows(t->f32 + r0 * t->ne0, t->ne0, r1 - r0, t->seed);
            continue;
        }
        for (int64_t r = r0; r < r1; r++) {
            const float *x = t->f32 + r * t->ne0;
            void *dst = (char *)t->out + (size_t)r * dst_row;
            bool done = false;
            if (t->im && ob_imatrix_weights(t->im, t->rows_per_mat ? r / t->rows_per_mat : 0, w)) {
                if (t->rotate) {
                    /* Rotation mixes columns; the per-column importance of the rotated input is
                     * not the rotated importance, so use its block average (exact for the
                     * block's total energy). */
                    for (int64_t b = 0; b + OB_HADAMARD_BLOCK <= t->ne0; b += OB_HADAMARD_BLOCK) {
                        float s = 0;
                        for (int i = 0; i < OB_HADAMARD_BLOCK; i++) s += w[b + i];
                        for (int i = 0; i < OB_HADAMARD_BLOCK; i++) w[b + i] = s / OB_HADAMARD_BLOCK;
                    }
                }
                done = ob_quantize_row_weighted(t->type, x, dst, t->ne0, w);
            }
            /* the IQ codebook types have no table quantizer; without an imatrix row they
             * search with equal column weights */
            if (!done && !ob_quantize_row_iq(t->type, x, dst, t->ne0, NULL)) dst_tr->from_float_ref(x, dst, t->ne0);
        }
    }
}

static int convert_tensor(ob_threadpool *pool, job *j, float **f32, size_t *f32_cap, float *weights, uint32_t seed) {
    const ob_gguf_tensor *s = j->src;
    int64_t ne0 = s->ne[0], nel = ob_gguf_tensor_nelements(s), rows = nel / ne0;
    size_t need = (size_t)nel;
    if (*f32_cap < need) {
        ob_free(*f32);
        *f32 = ob_malloc(need * sizeof(float));
        if (!*f32) {
            *f32_cap = 0;
            return ob_err(OB_ERR_OOM, "%s: %lld floats", s->name, (long long)nel);
        }
        *f32_cap = need;
    }
    j->nbytes = ob_row_size(j->type, ne0) * (size_t)rows;
    j->data = ob_malloc(j->nbytes ? j->nbytes : 1);
    if (!j->data) return ob_err(OB_ERR_OOM, "%s: %zu bytes", s->name, j->nbytes);
    task t = {0};
    t.src = s;
    t.f32 = *f32;
    t.out = j->data;
    t.type = j->type;
    t.ne0 = ne0;
    t.rows = rows;
    t.rows_per_mat = s->ne[1];
    t.im = j->im;
    t.weights = weights;
    t.rotate = j->rotate;
    t.seed = seed;
    /* about 32k values per chunk: enough to amortize the hand-off, small enough to balance */
    t.chunk_rows = ne0 >= 32768 ? 1 : 32768 / ne0;
    for (t.phase = 0; t.phase < 2; t.phase++) {
        ob_threadpool_chunk_reset(pool, 0);
        ob_threadpool_run(pool, task_fn, &t);
    }
    return 0;
}

static bool source_ok(ob_type t, bool allow) {
    if (t == OB_TYPE_F32 || t == OB_TYPE_F16 || t == OB_TYPE_BF16 || t == OB_TYPE_Q8_0) return true;
    return allow && ob_type_get((int)t)->to_float != NULL;
}

static int read_hparams(const ob_gguf *g, recipe *r) {
    const char *arch = "llama";
    if (ob_gguf_get_str(g, "general.architecture", &arch) < 0) ob_err_clear();
    snprintf(r->arch, sizeof r->arch, "%s", arch);
    char key[128];
    uint32_t v;
    snprintf(key, sizeof key, "%s.block_count", r->arch);
    r->n_layer = ob_gguf_get_u32(g, key, &v) == 0 ? v : 0;
    uint32_t nh = 0, nkv = 0;
    snprintf(key, sizeof key, "%s.attention.head_count", r->arch);
    if (ob_gguf_get_u32(g, key, &nh) < 0) nh = 0;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", r->arch);
    if (ob_gguf_get_u32(g, key, &nkv) < 0) nkv = nh;
    r->n_gqa = nh && nkv ? nh / nkv : 1;
    snprintf(key, sizeof key, "%s.expert_count", r->arch);
    r->n_expert = ob_gguf_get_u32(g, key, &v) == 0 ? v : 0;
    ob_err_clear();
    return 0;
}

static int apply_overrides(const ob_quantize_params *p, regex_t *re, const char *name, ob_type *t) {
    for (int k = 0; k < p->n_overrides; k++)
        if (regexec(&re[k], name, 0, NULL, 0) == 0) *t = p->overrides[k].type;
    return 0;
}

int ob_quantize_file(const char *in, const char *out, const ob_ftype_info *mix, const ob_quantize_params *params,
                     ob_quantize_stats *stats) {
    ob_quantize_params defaults;
    if (!params) {
        ob_quantize_params_init(&defaults);
        params = &defaults;
    }
    const ob_quantize_params *p = params;
    if (!mix) return ob_err(OB_ERR_INVALID_ARG, "quantize: no type given");
    if (mix->needs_imatrix && !p->imatrix)
        return ob_err(OB_ERR_INVALID_ARG,
                      "%s needs an importance matrix (--imatrix FILE, made by `1bit imatrix`): at this few bits "
                      "quantizing without one gives garbage",
                      mix->name);
    ob_quantize_stats st;
    memset(&st, 0, sizeof st);

    regex_t *re = NULL;
    if (p->n_overrides > 0) {
        re = ob_calloc((size_t)p->n_overrides, sizeof(regex_t));
        if (!re) return ob_err(OB_ERR_OOM, "overrides");
    }
    int n_re = 0, rc = 0;
    for (; n_re < p->n_overrides; n_re++) {
        int e = regcomp(&re[n_re], p->overrides[n_re].pattern, REG_EXTENDED | REG_NOSUB);
        if (e) {
            char msg[128];
            regerror(e, &re[n_re], msg, sizeof msg);
            rc = ob_err(OB_ERR_INVALID_ARG, "--tensor-type pattern '%s': %s", p->overrides[n_re].pattern, msg);
            break;
        }
    }

    struct stat si, so;
    if (rc == 0 && stat(in, &si) == 0 && stat(out, &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        rc = ob_err(OB_ERR_INVALID_ARG, "%s: the output would overwrite the input it is read from", out);
    ob_gguf *g = NULL;
    if (rc == 0) rc = ob_gguf_open(in, &g);
    recipe r;
    memset(&r, 0, sizeof r);
    r.ftype = mix->ftype;
    r.has_imatrix = p->imatrix != NULL;
    if (rc == 0) rc = read_hparams(g, &r);
    /* Requantizing a rotated file would rotate twice (--hadamard) or drop the stamp while the
     * weights stay rotated; both give garbage. */
    if (rc == 0 && ob_gguf_get(g, OB_HADAMARD_KEY))
        rc = ob_err(OB_ERR_UNSUPPORTED, "%s is a rotated (--hadamard) file; quantize from the unrotated source", in);

    int64_t n_t = g ? ob_gguf_n_tensors(g) : 0;
    job *jobs = rc == 0 ? ob_calloc((size_t)(n_t ? n_t : 1), sizeof(job)) : NULL;
    if (rc == 0 && !jobs) rc = ob_err(OB_ERR_OOM, "quantize jobs");
    for (int64_t i = 0; rc == 0 && i < n_t; i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        if (has(t->name, "attn_v.weight") || has(t->name, "attn_qkv.weight") || has(t->name, "attn_kv_b.weight"))
            r.n_attention_wv++;
        else if (!strcmp(t->name, "output.weight"))
            r.has_output = true;
    }
    if (rc == 0 && r.n_layer == 0) r.n_layer = r.n_attention_wv;

    /* plan every tensor first: all refusals happen before any work */
    int64_t max_ne0 = 0, max_nel = 0;
    for (int64_t i = 0; rc == 0 && i < n_t; i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        job *j = &jobs[i];
        j->src = t;
        j->type = t->type;
        if (is_matrix(t, p)) {
            ob_type nt = mix->base;
            if (!p->pure && ob_type_get((int)nt)->is_quantized) {
                int64_t before = r.n_fallback;
                nt = recipe_type(&r, nt, t->name);
                ob_type fitted = fit_type(nt, t->ne[0]);
                if (fitted != nt) r.n_fallback++;
                nt = fitted;
                if (r.n_fallback == before) apply_overrides(p, re, t->name, &nt);
            } else {
                apply_overrides(p, re, t->name, &nt);
            }
            if (p->embd_type >= 0 && !strcmp(t->name, "token_embd.weight")) nt = (ob_type)p->embd_type;
            if (p->output_type >= 0 && !strcmp(t->name, "output.weight")) nt = (ob_type)p->output_type;
            if (p->hadamard) {
                /* Every projection whose rows split into blocks of 32 is rotated, whatever its
                 * type (the engine rotates the inputs of exactly these). A Q4_0 matrix that is
                 * not one of them gets Q8_0, so every Q4_0 matrix of a stamped file is rotated. */
                j->rotate = ob_hadamard_applies(t->name, t->ne[0]);
                if (nt == OB_TYPE_Q4_0 && !j->rotate) nt = fit_type(OB_TYPE_Q8_0, t->ne[0]);
            }
            j->type = nt;
        }
        const ob_type_traits *tr = ob_type_get((int)j->type);
        if (j->type == t->type && !j->rotate) {
            st.type_count[j->type]++;
            continue; /* kept as it is */
        }
        if (t->ne[0] % tr->block_size)
            rc = ob_err(OB_ERR_INVALID_ARG, "%s: rows of %lld do not split into %s blocks of %lld", t->name,
                        (long long)t->ne[0], tr->name, (long long)tr->block_size);
        else if (!source_ok(t->type, p->allow_requantize))
            rc = ob_err(OB_ERR_UNSUPPORTED,
                        "%s is %s: sources must be F32, F16, BF16 or Q8_0 (--allow-requantize for others)",
                        t->name, ob_type_name((int)t->type));
        else if (!ob_type_get((int)t->type)->to_float)
            rc = ob_err(OB_ERR_UNSUPPORTED, "%s: type %s cannot be converted to float", t->name,
                        ob_type_name((int)t->type));
        else if (!tr->from_float_ref && !ob_quantize_has_iq(j->type))
            rc = ob_err(OB_ERR_UNSUPPORTED,
                        "%s: no quantizer for %s; "
                        "pick another type or --tensor-type '%s=q4_K'",
                        t->name, tr->name, t->name);
        else if (needs_imatrix(j->type, t->name, r.ftype) && !p->imatrix)
            rc = ob_err(OB_ERR_INVALID_ARG, "%s: %s needs an importance matrix (--imatrix FILE)", t->name, tr->name);
        if (rc < 0) break;
        if (p->imatrix) {
            const ob_imatrix_entry *e = ob_imatrix_find(p->imatrix, t->name);
            int64_t n_mat = t->n_dims > 2 ? t->ne[2] : 1;
            if (e && (e->n_per_row != t->ne[0] || e->n_mat != n_mat)) {
                if (strcmp(t->name, "token_embd.weight")) {
                    rc = ob_err(OB_ERR_FORMAT, "imatrix entry %s has %lld x %lld values; the tensor needs %lld x %lld",
                                t->name, (long long)e->n_mat, (long long)e->n_per_row, (long long)n_mat,
                                (long long)t->ne[0]);
                    break;
                }
                e = NULL;
            }
            for (int64_t k = 0; e && k < e->n_per_row * e->n_mat; k++)
                if (!isfinite(e->sum2[k])) {
                    rc = ob_err(OB_ERR_FORMAT, "imatrix entry %s holds a non-finite value", t->name);
                    break;
                }
            j->im = e;
            if (e) st.n_imatrix++;
            else OB_LOGI("quantize: no importance weights for %s", t->name);
        }
        if (rc < 0) break;
        st.n_quantized++;
        st.type_count[j->type]++;
        if (t->ne[0] > max_ne0) max_ne0 = t->ne[0];
        if (ob_gguf_tensor_nelements(t) > max_nel) max_nel = ob_gguf_tensor_nelements(t);
    }
    if (rc == 0 && p->imatrix && st.n_imatrix < st.n_quantized)
        OB_LOGW("quantize: the imatrix has no entry for %lld of the %lld converted tensors (-v / OB_LOG=info "
                "names them)", (long long)(st.n_quantized - st.n_imatrix), (long long)st.n_quantized);
    st.n_tensors = n_t;
    st.n_fallback = r.n_fallback;
    if (rc == 0 && r.n_fallback > 0)
        OB_LOGW("quantize: %lld tensor(s) have rows that do not split into their type's blocks; they got a "
                "fallback type", (long long)r.n_fallback);

    ob_threadpool *pool = NULL;
    float *f32 = NULL, *weights = NULL;
    size_t f32_cap = 0;
    int nth = p->n_threads > 0 ? p->n_threads : ob_n_cpus();
    if (rc == 0) rc = ob_threadpool_create(nth, &pool);
    if (rc == 0) {
        weights = ob_malloc((size_t)nth * (size_t)(max_ne0 ? max_ne0 : 1) * sizeof(float));
        if (!weights) rc = ob_err(OB_ERR_OOM, "quantize scratch");
    }
    uint32_t seed = OB_HADAMARD_DEFAULT_SEED;
    for (int64_t i = 0; rc == 0 && i < n_t; i++) {
        job *j = &jobs[i];
        const ob_gguf_tensor *t = j->src;
        st.bytes_in += t->nbytes;
        if (j->type == t->type && !j->rotate) {
            st.bytes_out += t->nbytes;
            if (p->verbose)
                printf("[%4lld/%4lld] %-36s %-8s kept (%.3f MiB)\n", (long long)i + 1, (long long)n_t, t->name,
                       ob_type_name((int)t->type), t->nbytes / 1048576.0);
            continue;
        }
        rc = convert_tensor(pool, j, &f32, &f32_cap, weights, seed);
        if (rc < 0) {
            ob_err_wrap(rc, "%s", t->name);
            break;
        }
        st.bytes_out += j->nbytes;
        if (p->verbose)
            printf("[%4lld/%4lld] %-36s %-8s -> %-8s%s%s %.3f -> %.3f MiB\n", (long long)i + 1, (long long)n_t, t->name,
                   ob_type_name((int)t->type), ob_type_name((int)j->type), j->rotate ? " rotated" : "",
                   j->im ? " imatrix" : "", t->nbytes / 1048576.0, j->nbytes / 1048576.0);
    }
    ob_free(f32);
    ob_free(weights);
    ob_threadpool_free(pool);

    ob_gguf_writer *w = NULL;
    if (rc == 0) rc = ob_gguf_writer_create(&w);
    for (int64_t i = 0; rc == 0 && i < ob_gguf_n_kv(g); i++) {
        const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        if (!strcmp(kv->key, "split.no") || !strcmp(kv->key, "split.count") ||
            !strcmp(kv->key, "split.tensors.count"))
            continue;
        rc = ob_gguf_writer_set_value(w, kv->key, &kv->value);
    }
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, "general.file_type", (uint32_t)mix->ftype);
    if (rc == 0 && p->hadamard) {
        rc = ob_gguf_writer_set_str(w, OB_HADAMARD_KEY, OB_HADAMARD_NAME);
        if (rc == 0) rc = ob_gguf_writer_set_u32(w, OB_HADAMARD_SEED_KEY, seed);
    }
    if (rc == 0 && p->imatrix) {
        rc = ob_gguf_writer_set_i32(w, "quantize.imatrix.entries_count", (int32_t)p->imatrix->n);
        if (rc == 0) rc = ob_gguf_writer_set_i32(w, "quantize.imatrix.chunks_count", (int32_t)p->imatrix->chunk_count);
        if (rc == 0 && p->imatrix->n_datasets > 0)
            rc = ob_gguf_writer_set_str(w, "quantize.imatrix.dataset", p->imatrix->datasets[0]);
    }
    for (int64_t i = 0; rc == 0 && i < n_t; i++) {
        job *j = &jobs[i];
        rc = ob_gguf_writer_add_tensor(w, j->src->name, j->type, j->src->n_dims, j->src->ne,
                                       j->data ? j->data : j->src->data);
    }
    if (rc == 0) {
        rc = ob_gguf_writer_write_file(w, out);
        if (rc < 0) unlink(out);
    }
    ob_gguf_writer_free(w);
    for (int64_t i = 0; jobs && i < n_t; i++) ob_free(jobs[i].data);
    ob_free(jobs);
    ob_gguf_free(g);
    for (int k = 0; k < n_re; k++) regfree(&re[k]);
    ob_free(re);

    /* A stamped file must hold only rotated Q4_0 matrices: check what was written. */
    if (rc == 0 && p->hadamard) {
        ob_gguf *o = NULL;
        rc = ob_gguf_open(out, &o);
        for (int64_t i = 0; rc == 0 && i < ob_gguf_n_tensors(o); i++) {
            const ob_gguf_tensor *t = ob_gguf_tensor_at(o, i);
            if (t->type == OB_TYPE_Q4_0 && !ob_hadamard_applies(t->name, t->ne[0]))
                rc = ob_err(OB_ERR_INTERNAL, "%s: Q4_0 but not rotated; file removed", t->name);
        }
        ob_gguf_free(o);
        if (rc < 0) unlink(out);
    }
    if (stats) *stats = st;
    return rc;
}
