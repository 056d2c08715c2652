/*
 * bench.c - `1bit bench`: prompt (pp) and decode (tg) speed the way
 * llama-bench measures them, plus two helpers for measuring:
 *
 *   1bit bench -m MODEL [-p 512] [-n 128] [-d 0] [-r 5] [-t N] [-o md|csv|json|jsonl]
 *   1bit bench --make-model SHAPE --type TYPE -o OUT.gguf [--vocab VOCAB.gguf]
 *   1bit bench --membw [-t N]
 *
 * Method (llama-bench's): each test is one row. A pp test processes n_prompt
 * random tokens in batches of 512 (-b); a tg test decodes n_gen tokens one at
 * a time. Before each timed repetition the KV cache is cleared and, with
 * -d DEPTH, DEPTH random tokens are processed untimed first. One untimed
 * warm-up run (a prompt of n_prompt tokens, or one decoded token) precedes
 * the repetitions. avg_ts and stddev_ts are the mean and sample standard
 * deviation over repetitions of tokens / seconds. Lists (-p 128,512) run
 * every combination. Field names follow llama-bench (build_commit,
 * model_type, model_size, n_prompt, n_gen, n_depth, avg_ts, stddev_ts, ...)
 * so scripts that read its csv/json read ours.
 *
 * --make-model writes a GGUF of a real model's shape with random weights in
 * any type (speed does not depend on the values): all 2-D weights in TYPE
 * ("pure"), or llama.cpp's q4_K_M mix. The vocabulary (tokenizer.ggml.*) is
 * copied from a vocab-only GGUF (default: the GPT-2 one in
 * ../shared/models/llama.cpp-vocab) and padded with control tokens up to the
 * shape's vocabulary size, so text round-trips and the embedding and output
 * matrices have their real sizes. To stay fast and small in memory, each
 * weight role is quantized once from 256 random rows, tiled over its rows,
 * and shared by every layer; the writer streams the file from those
 * buffers, so a 17 GB model needs about 1 GB of memory. Mixture-of-experts
 * shapes (qwen3-30b-a3b, qwen3moe-1.7b-a0.6b, test-moe) use llama.cpp's
 * qwen3moe layout: an F32 router per layer and stacked expert tensors.
 *
 * --membw reads a 1 GiB buffer with N threads and reports the best of 10
 * passes in GB/s: the bandwidth floor decode speed is compared against.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

#include "../core/cpu.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../core/threadpool.h"
#include "../cpu/kernels.h"
#include "../gguf/gguf.h"
#include "../quant/iq_quant.h"
#include "../quant/quant.h"
#include "cli.h"
#include "onebit.h"
#include "ob_gitstamp.h" /* OB_GIT_COMMIT, OB_BUILD_NUMBER (tools/gitstamp.cmake) */


#define MAX_LIST 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(void) {
    printf("usage: 1bit bench -m MODEL [options]          prompt and decode speed (llama-bench's method)\n"
           "       1bit bench --make-model SHAPE --type TYPE -o OUT.gguf [--vocab VOCAB.gguf]\n"
           "       1bit bench --membw [-t N]               memory read bandwidth (the decode floor)\n"
           "       1bit bench --kernels [--type T,T]       matmul kernel microbenchmark (one thread)\n"
           "       1bit bench --pool [-t N]                thread pool dispatch and barrier cost\n"
           "       1bit bench serve -m MODEL [--config NAME=FLAGS]...  many streaming clients against `1bit serve`\n"
           "options (lists are comma-separated; every combination runs):\n"
           "  -m FILE[,FILE]   model(s)\n"
           "  -p N[,N]         prompt tokens (default 512; 0 = no pp test)\n"
           "  -n N[,N]         generated tokens (default 128; 0 = no tg test)\n"
           "  -d N[,N]         context depth before the test (default 0)\n"
           "  -r N             repetitions (default 5)\n"
           "  -t N[,N]         threads (default: all cores)\n"
           "  -b N             prompt batch size (default 512)\n"
           "  -np N[,N]        sequences side by side (default 1): each gets -d, -p and -n tokens, a decode\n"
           "                   step is one batch of one token per sequence; t/s counts every sequence's tokens\n"
           "  -o FMT           md (default), csv, json or jsonl\n"
           "  --kv-type T      f16 (default), f32 or q8_0\n"
           "  --act-bits N     4 or 8: activations of the Q4_0 projections (default 4 for a --hadamard file)\n"
           "  --device D       cpu (default), cuda, auto\n"
           "  -ngl N           with a GPU: only the last N layers there, the rest on the CPU (default all)\n"
           "  --no-warmup      skip the warm-up run\n"
           "  --progress       print each repetition to stderr\n"
           "make-model shapes: qwen3-0.6b llama-3.2-1b qwen3-1.7b qwen3-8b tinyllama-1.1b llama-3.1-8b\n"
           "                   mixture of experts (qwen3moe): qwen3-30b-a3b (2048 wide, 48 layers, 128 experts of\n"
           "                   768, 8 used), qwen3moe-1.7b-a0.6b (1024 wide, 24 layers, 32 experts of 512, 4 used),\n"
           "                   test-moe (tiny, GPT-2 vocabulary, for tests)\n"
           "make-model types:  any ggml type with a quantizer (q4_0, q8_0, f16, bf16, q4_K, iq4_xs, iq2_xxs, tq2_0, ...)\n"
           "                   or q4_K_M (llama.cpp's mix: q6_K output and half of attn_v/ffn_down(_exps));\n"
           "                   expert routers (ffn_gate_inp) stay f32\n");
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 1 << 24) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

/* ======================================================================
 * Random-weight models of real shapes
 * ====================================================================== */

/* A dense shape has n_expert = 0. A mixture-of-experts shape (llama.cpp's
 * qwen3moe layout) replaces each layer's FFN with a router
 * ffn_gate_inp [n_embd, n_expert] (F32) and the stacked experts
 * ffn_{gate,up}_exps [n_embd, n_ff_exp, n_expert] and
 * ffn_down_exps [n_ff_exp, n_embd, n_expert]; n_ff is then only the
 * feed_forward_length key its converter writes (the dense FFN size of the
 * HF config), which nothing reads. */
typedef struct shape {
    const char *name, *arch, *general_name;
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    float rope_base, eps;
    bool tied, qk_norm, llama3_rope, spm_vocab;
    int n_expert, n_expert_used, n_ff_exp;
} shape;

static const shape g_shapes[] = {
    {"qwen3-0.6b", "qwen3", "Qwen3-0.6B", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1e6f, 1e-6f, true, true, false, false, 0, 0, 0},
    {"qwen3-1.7b", "qwen3", "Qwen3-1.7B", 2048, 28, 16, 8, 128, 6144, 151936, 40960, 1e6f, 1e-6f, true, true, false, false, 0, 0, 0},
    {"qwen3-8b", "qwen3", "Qwen3-8B", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1e6f, 1e-6f, false, true, false, false, 0, 0, 0},
    {"llama-3.2-1b", "llama", "Llama-3.2-1B", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 5e5f, 1e-5f, true, false, true, false, 0, 0, 0},
    {"tinyllama-1.1b", "llama", "TinyLlama-1.1B", 2048, 22, 32, 4, 64, 5632, 32000, 2048, 1e4f, 1e-5f, false, false, false, true, 0, 0, 0},
    {"llama-3.1-8b", "llama", "Llama-3.1-8B", 4096, 32, 32, 8, 128, 14336, 128256, 131072, 5e5f, 1e-5f, false, false, true, false, 0, 0, 0},
    /* mixture of experts (qwen3moe). qwen3-30b-a3b is Qwen3-30B-A3B's config: 30.5B parameters, 3.3B active.
     * qwen3moe-1.7b-a0.6b is no released model: Qwen3's attention (head_dim 128, q/k norm, untied output)
     * at qwen3-0.6b's width and 24 layers, with 32 experts of 512, 4 routed per token - small enough to
     * decode on two CPU cores. test-moe is for tests (GPT-2 vocabulary, rows of 256 so K types fit). */
    {"qwen3-30b-a3b", "qwen3moe", "Qwen3-30B-A3B", 2048, 48, 32, 4, 128, 6144, 151936, 40960, 1e6f, 1e-6f, false, true, false, false, 128, 8, 768},
    {"qwen3moe-1.7b-a0.6b", "qwen3moe", "Qwen3MoE-1.7B-A0.6B", 1024, 24, 16, 8, 128, 3072, 151936, 40960, 1e6f, 1e-6f, false, true, false, false, 32, 4, 512},
    {"test-moe", "qwen3moe", "test-moe", 256, 2, 4, 2, 64, 512, 50304, 2048, 1e6f, 1e-6f, false, true, false, false, 4, 2, 256},
};

/* llama.cpp's file types (general.file_type) and their names in model_type. */
typedef struct ftype_name {
    int id;
    const char *name;
    ob_type type;
} ftype_name;

static const ftype_name g_ftypes[] = {
    {0, "all F32", OB_TYPE_F32},        {1, "F16", OB_TYPE_F16},          {2, "Q4_0", OB_TYPE_Q4_0},
    {3, "Q4_1", OB_TYPE_Q4_1},          {7, "Q8_0", OB_TYPE_Q8_0},        {8, "Q5_0", OB_TYPE_Q5_0},
    {9, "Q5_1", OB_TYPE_Q5_1},          {10, "Q2_K - Medium", OB_TYPE_Q2_K}, {12, "Q3_K - Medium", OB_TYPE_Q3_K},
    {15, "Q4_K - Medium", OB_TYPE_Q4_K}, {17, "Q5_K - Medium", OB_TYPE_Q5_K}, {18, "Q6_K", OB_TYPE_Q6_K},
    {25, "IQ4_NL - 4.5 bpw", OB_TYPE_IQ4_NL}, {30, "IQ4_XS - 4.25 bpw", OB_TYPE_IQ4_XS}, {32, "BF16", OB_TYPE_BF16},
    {36, "TQ1_0 - 1.69 bpw ternary", OB_TYPE_TQ1_0}, {37, "TQ2_0 - 2.06 bpw ternary", OB_TYPE_TQ2_0},
    {38, "MXFP4 MoE", OB_TYPE_MXFP4},
};

static int ftype_of_type(ob_type t, bool q4km) {
    if (q4km) return 15;
    for (size_t i = 0; i < sizeof g_ftypes / sizeof g_ftypes[0]; i++)
        if (g_ftypes[i].type == t && g_ftypes[i].id != 15 && g_ftypes[i].id != 10 && g_ftypes[i].id != 12 &&
            g_ftypes[i].id != 17)
            return g_ftypes[i].id;
    /* pure K types: llama.cpp has no "pure Q4_K" file type; name the mix */
    switch (t) {
    case OB_TYPE_Q2_K: return 10;
    case OB_TYPE_Q3_K: return 12;
    case OB_TYPE_Q4_K: return 15;
    case OB_TYPE_Q5_K: return 17;
    default: return -1;
    }
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float rand_normal(void) {
    /* xorshift64* + Box-Muller */
    double u[2];
    for (int i = 0; i < 2; i++) {
        g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
        u[i] = (double)((g_rng * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
    }
    return (float)(sqrt(-2.0 * log(u[0] + 1e-300)) * cos(6.283185307179586 * u[1]));
}

/* A weight role's data: quantized once, tiled to all rows. */
typedef struct blob {
    void *data;
    struct blob *next;
} blob;

static blob *g_blobs;

static void *keep(void *p) {
    if (!p) return NULL;
    blob *b = ob_malloc(sizeof *b);
    if (!b) {
        ob_free(p);
        return NULL;
    }
    b->data = p;
    b->next = g_blobs;
    g_blobs = b;
    return p;
}

static void free_blobs(void) {
    while (g_blobs) {
        blob *b = g_blobs;
        g_blobs = b->next;
        ob_free(b->data);
        ob_free(b);
    }
}

/* rows x n random weights (std `scale`) in `type`. */
static void *random_matrix(ob_type type, int64_t n, int64_t rows, float scale) {
    const ob_type_traits *tr = ob_type_get((int)type);
    size_t rb = ob_row_size(type, n);
    char *data = ob_malloc(ob_mul_size(rb, (size_t)rows));
    int64_t uniq = rows < 256 ? rows : 256;
    float *tmp = ob_malloc((size_t)n * sizeof(float));
    if (!data || !tmp) {
        ob_free(data);
        ob_free(tmp);
        return NULL;
    }
    for (int64_t r = 0; r < uniq; r++) {
        for (int64_t i = 0; i < n; i++) tmp[i] = scale * rand_normal();
        /* the IQ1/IQ2/IQ3 codebook types have no table quantizer: their search, unweighted */
        if (tr->from_float_ref) tr->from_float_ref(tmp, data + (size_t)r * rb, n);
        else ob_quantize_row_iq(type, tmp, data + (size_t)r * rb, n, NULL);
    }
    for (int64_t r = uniq; r < rows; r++) memcpy(data + (size_t)r * rb, data + (size_t)(r % uniq) * rb, rb);
    ob_free(tmp);
    return keep(data);
}

static void *ones(int64_t n) {
    float *v = ob_malloc((size_t)n * sizeof(float));
    if (v)
        for (int64_t i = 0; i < n; i++) v[i] = 1.0f;
    return keep(v);
}

/* llama.cpp's use_more_bits: which layers q4_K_M gives q6_K. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* Copy tokenizer.ggml.* from the vocab file, padding per-token arrays to n_vocab. */
static int copy_vocab(ob_gguf_writer *w, const ob_gguf *v, int n_vocab) {
    const ob_gguf_array *tokens = NULL;
    int rc = ob_gguf_get_arr(v, "tokenizer.ggml.tokens", OB_GGUF_STRING, &tokens);
    if (rc < 0) return rc;
    const int64_t n0 = (int64_t)tokens->n;
    if (n0 > n_vocab) return ob_err(OB_ERR_RANGE, "the vocabulary has %lld tokens, more than the shape's %d", (long long)n0, n_vocab);
    for (int64_t i = 0; i < ob_gguf_n_kv(v); i++) {
        const ob_gguf_kv *kv = ob_gguf_kv_at(v, i);
        if (strncmp(kv->key, "tokenizer.ggml.", 15) != 0) continue;
        const ob_gguf_value *val = &kv->value;
        if (val->type != OB_GGUF_ARRAY || (int64_t)val->v.arr.n != n0 || n0 == n_vocab) {
            OB_TRY(ob_gguf_writer_set_value(w, kv->key, val));
            continue;
        }
        const ob_gguf_array *a = &val->v.arr;
        if (a->type == OB_GGUF_STRING) {
            const char **strs = ob_calloc((size_t)n_vocab, sizeof(char *));
            char *names = ob_malloc((size_t)(n_vocab - n0) * 32);
            if (!strs || !names) {
                ob_free(strs);
                ob_free(names);
                return ob_err(OB_ERR_OOM, "vocabulary");
            }
            const ob_gguf_str *s = a->data;
            for (int64_t j = 0; j < n0; j++) strs[j] = s[j].s;
            for (int64_t j = n0; j < n_vocab; j++) {
                char *nm = names + (size_t)(j - n0) * 32;
                snprintf(nm, 32, "[PAD%lld]", (long long)j);
                strs[j] = nm;
            }
            rc = ob_gguf_writer_set_arr_str(w, kv->key, strs, (uint64_t)n_vocab);
            ob_free(strs);
            ob_free(names);
            OB_TRY(rc);
        } else if (a->type == OB_GGUF_I32 || a->type == OB_GGUF_F32) {
            /* token types (padding: 3 = control) or scores (padding: 0) */
            uint32_t *vals = ob_calloc((size_t)n_vocab, 4);
            if (!vals) return ob_err(OB_ERR_OOM, "vocabulary");
            memcpy(vals, a->data, (size_t)n0 * 4);
            if (a->type == OB_GGUF_I32)
                for (int64_t j = n0; j < n_vocab; j++) vals[j] = 3;
            rc = ob_gguf_writer_set_arr(w, kv->key, a->type, vals, (uint64_t)n_vocab);
            ob_free(vals);
            OB_TRY(rc);
        } else {
            return ob_err(OB_ERR_UNSUPPORTED, "cannot pad vocabulary array %s", kv->key);
        }
    }
    return 0;
}

static int make_model(const char *shape_name, const char *type_name, const char *out, const char *vocab_path) {
    const shape *sh = NULL;
    for (size_t i = 0; i < sizeof g_shapes / sizeof g_shapes[0]; i++)
        if (!strcmp(g_shapes[i].name, shape_name)) sh = &g_shapes[i];
    if (!sh) return ob_cli_fail(0, "unknown shape '%s' (see --help)", shape_name);
    const bool q4km = !strcasecmp(type_name, "q4_K_M");
    int ti = q4km ? OB_TYPE_Q4_K : ob_type_from_name(type_name);
    if (ti < 0 || (!ob_type_get(ti)->from_float_ref && !ob_quantize_has_iq((ob_type)ti)))
        return ob_cli_fail(0, "type '%s' has no quantizer (see --help)", type_name);
    const ob_type type = (ob_type)ti;
    char vbuf[4096];
    if (!vocab_path) {
        const char *dir = getenv("OB_SHARED_MODELS");
        snprintf(vbuf, sizeof vbuf, "%s/llama.cpp-vocab/%s", dir ? dir : "../shared/models",
                 sh->spm_vocab ? "ggml-vocab-llama-spm.gguf" : "ggml-vocab-gpt-2.gguf");
        vocab_path = vbuf;
    }
    ob_gguf *voc = NULL;
    ob_gguf_writer *w = NULL;
    int rc = ob_gguf_open(vocab_path, &voc);
    if (rc < 0) return ob_cli_fail(rc, "vocabulary %s", vocab_path);
    rc = ob_gguf_writer_create(&w);
    const int64_t E = sh->n_embd, Q = (int64_t)sh->n_head * sh->head_dim, KV = (int64_t)sh->n_head_kv * sh->head_dim,
                  F = sh->n_ff, V = sh->n_vocab, L = sh->n_layer, NE = sh->n_expert, FE = sh->n_ff_exp;
    const bool moe = NE > 0;
    /* llama.cpp's q4_K_M gives an 8-expert model (Mixtral) q8_0 attn_k/attn_v and q5_K attn_output */
    const bool mix8 = q4km && NE == 8;
    const float sd = 0.02f;
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, sh->arch), key)
    if (rc == 0) rc = ob_gguf_writer_set_str(w, "general.architecture", sh->arch);
    if (rc == 0) {
        char name[128];
        snprintf(name, sizeof name, "%s random %s", sh->general_name, q4km ? "Q4_K_M" : ob_type_name(type));
        rc = ob_gguf_writer_set_str(w, "general.name", name);
    }
    if (rc == 0 && ftype_of_type(type, q4km) >= 0)
        rc = ob_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype_of_type(type, q4km));
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)sh->n_ctx);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)E);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)L);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)F);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)sh->n_head);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->n_head_kv);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)sh->head_dim);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)sh->head_dim);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)sh->head_dim);
    if (rc == 0) rc = ob_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh->eps);
    if (rc == 0) rc = ob_gguf_writer_set_f32(w, KEY("rope.freq_base"), sh->rope_base);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)V);
    if (rc == 0 && moe) rc = ob_gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)NE);
    if (rc == 0 && moe) rc = ob_gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)sh->n_expert_used);
    if (rc == 0 && moe) rc = ob_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)FE);
#undef KEY
    if (rc == 0) rc = copy_vocab(w, voc, sh->n_vocab);

    /* weights */
    const ob_type out_type = q4km ? OB_TYPE_Q6_K : type;
    const ob_type embd_type = sh->tied ? out_type : type;
    /* kt/vt/ot: attn_k, attn_v (outside q4_K_M's more-bits layers) and attn_output types */
    const ob_type kt = mix8 ? OB_TYPE_Q8_0 : type, vt = kt, ot = mix8 ? OB_TYPE_Q5_K : type;
    /* Dense: gate/up [E, F], down [F, E]. MoE: the same roles stacked over
     * experts ([E, FE, NE], [FE, E, NE]), plus the F32 router [E, NE]. Each
     * buffer is made once and shared by every layer, so a 17 GB q4_K_M
     * qwen3-30b-a3b needs about 1 GB of memory: the writer streams the file
     * from these buffers. */
    const int64_t FF = moe ? FE : F, XR = moe ? NE : 1;
    void *embd = NULL, *outw = NULL, *wq = NULL, *wk = NULL, *wv = NULL, *wv6 = NULL, *wo = NULL, *wg = NULL,
         *wu = NULL, *wd = NULL, *wd6 = NULL, *router = NULL, *nrm_e = NULL, *nrm_h = NULL, *ff = NULL;
    if (rc == 0) {
        embd = random_matrix(embd_type, E, V, sd);
        outw = sh->tied ? embd : random_matrix(out_type, E, V, sd);
        wq = random_matrix(type, E, Q, sd);
        wk = random_matrix(kt, E, KV, sd);
        wv = random_matrix(vt, E, KV, sd);
        wv6 = q4km && !mix8 ? random_matrix(OB_TYPE_Q6_K, E, KV, sd) : wv;
        wo = random_matrix(ot, Q, E, sd);
        wg = random_matrix(type, E, FF * XR, sd);
        wu = random_matrix(type, E, FF * XR, sd);
        wd = random_matrix(type, FF, E * XR, sd);
        wd6 = q4km ? random_matrix(OB_TYPE_Q6_K, FF, E * XR, sd) : wd;
        /* router: F32 in every file type (llama.cpp never quantizes ffn_gate_inp) */
        router = moe ? random_matrix(OB_TYPE_F32, E, NE, sd) : NULL;
        nrm_e = ones(E);
        nrm_h = ones(sh->head_dim);
        if (!embd || !outw || !wq || !wk || !wv || !wv6 || !wo || !wg || !wu || !wd || !wd6 || (moe && !router) ||
            !nrm_e || !nrm_h)
            rc = ob_err(OB_ERR_OOM, "random weights");
    }
    if (rc == 0 && sh->llama3_rope) {
        /* Llama 3.x frequency divisors (factor 32, low 1, high 4, original 8192), as its converter writes them */
        int half = sh->head_dim / 2;
        float *f = keep(ob_malloc((size_t)half * sizeof(float)));
        if (!f) rc = ob_err(OB_ERR_OOM, "rope_freqs");
        for (int i = 0; rc == 0 && i < half; i++) {
            double freq = 1.0 / pow(sh->rope_base, 2.0 * i / sh->head_dim), wavelen = 2 * M_PI / freq;
            double lo_wl = 8192.0 / 1.0, hi_wl = 8192.0 / 4.0;
            if (wavelen < hi_wl)
                f[i] = 1.0f;
            else if (wavelen > lo_wl)
                f[i] = 32.0f;
            else {
                double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
                f[i] = (float)(1.0 / ((1 - smooth) / 32.0 + smooth));
            }
        }
        ff = f;
        int64_t ne = half;
        if (rc == 0) rc = ob_gguf_writer_add_tensor(w, "rope_freqs.weight", OB_TYPE_F32, 1, &ne, ff);
    }
    int64_t ne_embd[2] = {E, V}, ne_e[1] = {E}, ne_h[1] = {sh->head_dim};
    if (rc == 0) rc = ob_gguf_writer_add_tensor(w, "token_embd.weight", embd_type, 2, ne_embd, embd);
    if (rc == 0) rc = ob_gguf_writer_add_tensor(w, "output_norm.weight", OB_TYPE_F32, 1, ne_e, nrm_e);
    if (rc == 0 && !sh->tied) rc = ob_gguf_writer_add_tensor(w, "output.weight", out_type, 2, ne_embd, outw);
    for (int il = 0; rc == 0 && il < L; il++) {
        char nm[96];
        int64_t sq[2] = {E, Q}, skv[2] = {E, KV}, so[2] = {Q, E}, sf[3] = {E, FF, NE}, sd2[3] = {FF, E, NE},
                sr[2] = {E, NE};
        bool six = q4km && more_bits(il, (int)L);
#define ADD(fmt, t, nd, ne, data)                                               \
    do {                                                                        \
        snprintf(nm, sizeof nm, "blk.%d." fmt, il);                             \
        if (rc == 0) rc = ob_gguf_writer_add_tensor(w, nm, t, nd, ne, data);    \
    } while (0)
        ADD("attn_norm.weight", OB_TYPE_F32, 1, ne_e, nrm_e);
        ADD("attn_q.weight", type, 2, sq, wq);
        ADD("attn_k.weight", kt, 2, skv, wk);
        ADD("attn_v.weight", six && !mix8 ? OB_TYPE_Q6_K : vt, 2, skv, six && !mix8 ? wv6 : wv);
        ADD("attn_output.weight", ot, 2, so, wo);
        if (sh->qk_norm) {
            ADD("attn_q_norm.weight", OB_TYPE_F32, 1, ne_h, nrm_h);
            ADD("attn_k_norm.weight", OB_TYPE_F32, 1, ne_h, nrm_h);
        }
        ADD("ffn_norm.weight", OB_TYPE_F32, 1, ne_e, nrm_e);
        if (moe) {
            /* llama.cpp's q4_K_M treats ffn_down_exps as ffn_down: q6_K on the more-bits layers */
            ADD("ffn_gate_inp.weight", OB_TYPE_F32, 2, sr, router);
            ADD("ffn_gate_exps.weight", type, 3, sf, wg);
            ADD("ffn_up_exps.weight", type, 3, sf, wu);
            ADD("ffn_down_exps.weight", six ? OB_TYPE_Q6_K : type, 3, sd2, six ? wd6 : wd);
        } else {
            ADD("ffn_gate.weight", type, 2, sf, wg);
            ADD("ffn_up.weight", type, 2, sf, wu);
            ADD("ffn_down.weight", six ? OB_TYPE_Q6_K : type, 2, sd2, six ? wd6 : wd);
        }
#undef ADD
    }
    if (rc == 0) rc = ob_gguf_writer_write_file(w, out);
    ob_gguf_writer_free(w);
    ob_gguf_free(voc);
    free_blobs();
    if (rc < 0) return ob_cli_fail(rc, "make-model %s", out);
    fprintf(stderr, "wrote %s: %s shape, %s weights\n", out, sh->name, q4km ? "q4_K_M" : ob_type_name(type));
    return 0;
}

/* ======================================================================
 * Memory bandwidth floor
 * ====================================================================== */

typedef struct bw_task {
    const float *buf;
    int64_t n; /* floats */
    float sink[64];
} bw_task;

/* Each thread sums the squares of its half with the best kernel tier: a
 * plain vector read, so the loads, not the arithmetic, set the pace. */
static void bw_fn(const ob_task_ctx *ctx, void *arg) {
    bw_task *t = arg;
    int64_t lo, hi;
    ob_split_range(t->n / 16, ctx->ith, ctx->nth, &lo, &hi);
    t->sink[ctx->ith % 64] += ob_cpu_kernels_get()->sum_sq(t->buf + lo * 16, (hi - lo) * 16);
}

static int membw(int threads) {
    const size_t bytes = (size_t)1 << 30;
    float *buf = ob_malloc_aligned(bytes, (size_t)2 << 20);
    ob_threadpool *pool = NULL;
    int rc = buf ? ob_threadpool_create(threads, &pool) : ob_err(OB_ERR_OOM, "1 GiB buffer");
    if (rc < 0) {
        ob_free_aligned(buf);
        return ob_cli_fail(rc, "membw");
    }
    madvise(buf, bytes, MADV_HUGEPAGE); /* as the backend's weights */
    for (size_t i = 0; i < bytes / sizeof(float); i++) buf[i] = (float)(i & 1023);
    bw_task t;
    memset(&t, 0, sizeof t);
    t.buf = buf;
    t.n = (int64_t)(bytes / sizeof(float));
    double best = 0;
    for (int rep = 0; rep < 10; rep++) {
        double t0 = now_s();
        ob_threadpool_run(pool, bw_fn, &t);
        double gbs = (double)bytes / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    printf("membw: %d threads, 1 GiB read, best of 10: %.1f GB/s\n", ob_threadpool_n_threads(pool), best);
    ob_threadpool_free(pool);
    ob_free_aligned(buf);
    return 0;
}

/* ======================================================================
 * Kernel microbenchmark: one thread, minimum over repetitions (robust on a
 * busy machine: interference only ever adds time).
 * ====================================================================== */

/* layout 0: native rows (dot), 1: packed panels (gemm, 8 tokens a call),
 * 2: packed panels on tiles (gemm_tiles, all nt tokens a call) */
/* Best time of `rows` rows against nt tokens. Token groups of OB_MM_MAX_NT outside the rows
 * (the L2 columns: the weights stay in L2 and each group's activations in L1), or, with
 * row_outer, each panel (or row) against every group before the next one, as the matmul
 * driver does within a prefill chunk (cpu_backend.c matmul_fn). */
static double kernel_time(const ob_mm_kernels *mk, int layout, const void *w, size_t row_bytes, const void *panels,
                          size_t pstride, int64_t n, int64_t rows, const char *act, size_t as, int nt, float *out,
                          double budget_s, bool row_outer) {
    const bool packed = layout > 0;
    double best = 1e30, start = now_s();
    for (int rep = 0; rep < 1000 && (rep < 3 || now_s() - start < budget_s); rep++) {
        double t0 = now_s();
        if (row_outer && layout != 2) {
            for (int64_t r = 0; r < rows; r += packed ? OB_PANEL : 1)
                for (int t0k = 0; t0k < nt; t0k += OB_MM_MAX_NT) {
                    int m = nt - t0k < OB_MM_MAX_NT ? nt - t0k : OB_MM_MAX_NT;
                    float *o = out + (size_t)t0k * (size_t)rows + (size_t)r;
                    if (packed)
                        mk->gemm(n, (const char *)panels + (size_t)(r / OB_PANEL) * pstride, act + (size_t)t0k * as,
                                 as, m, o, (size_t)rows);
                    else
                        mk->dot(n, (const char *)w + (size_t)r * row_bytes, act + (size_t)t0k * as, as, m, o,
                                (size_t)rows);
                }
            double dt = now_s() - t0;
            if (dt < best) best = dt;
            continue;
        }
        if (layout == 2) {
            for (int64_t p = 0; p < rows / OB_PANEL; p++)
                mk->gemm_tiles(n, (const char *)panels + (size_t)p * pstride, act, as, nt,
                               out + (size_t)p * OB_PANEL, (size_t)rows);
            double dt = now_s() - t0;
            if (dt < best) best = dt;
            continue;
        }
        for (int t0k = 0; t0k < nt; t0k += OB_MM_MAX_NT) {
            int m = nt - t0k < OB_MM_MAX_NT ? nt - t0k : OB_MM_MAX_NT;
            if (packed)
                for (int64_t p = 0; p < rows / OB_PANEL; p++)
                    mk->gemm(n, (const char *)panels + (size_t)p * pstride, act + (size_t)t0k * as, as, m,
                             out + (size_t)t0k * (size_t)rows + (size_t)p * OB_PANEL, (size_t)rows);
            else
                for (int64_t r = 0; r < rows; r++)
                    mk->dot(n, (const char *)w + (size_t)r * row_bytes, act + (size_t)t0k * as, as, m,
                            out + (size_t)t0k * (size_t)rows + (size_t)r, (size_t)rows);
        }
        double dt = now_s() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static int kernel_bench(const char *types_arg) {
    static const ob_type types[] = {OB_TYPE_Q4_0, OB_TYPE_Q4_1, OB_TYPE_Q5_0, OB_TYPE_Q5_1, OB_TYPE_Q8_0,
                                    OB_TYPE_IQ4_NL, OB_TYPE_MXFP4, OB_TYPE_Q2_K, OB_TYPE_Q3_K, OB_TYPE_Q4_K,
                                    OB_TYPE_Q5_K, OB_TYPE_Q6_K, OB_TYPE_IQ4_XS, OB_TYPE_TQ1_0, OB_TYPE_TQ2_0,
                                    OB_TYPE_IQ2_XXS, OB_TYPE_IQ2_XS, OB_TYPE_IQ2_S, OB_TYPE_IQ3_XXS, OB_TYPE_IQ3_S,
                                    OB_TYPE_IQ1_S, OB_TYPE_IQ1_M, OB_TYPE_F32, OB_TYPE_F16, OB_TYPE_BF16};
    const int64_t n = 2048;
    const int NT = 128; /* a prefill chunk (cpu_backend.c's TOKENS_PER_CHUNK) */
    printf("kernel microbenchmark, 1 thread, n = %lld, best time over repetitions\n", (long long)n);
    printf("  gemv: 1 token, weights in L2 (~%d KiB) and in DRAM (~128 MiB): GB/s of weights\n", 384);
    printf("  gemm: %d tokens, weights in L2: GMAC/s; gemm big: the same over ~32 MiB of weights, each panel\n"
           "  against all %d tokens before the next (the matmul driver's order within a prefill chunk)\n", NT, NT);
    printf("| type    | tier        | layout | gemv L2 GB/s | gemv DRAM GB/s | gemm GMAC/s | gemm big GMAC/s |\n");
    printf("| ------- | ----------- | ------ | -----------: | -------------: | ----------: | --------------: |\n");
    float *x = ob_malloc((size_t)(NT * n) * sizeof(float));
    float *out = ob_malloc((size_t)NT * 65536 * sizeof(float));
    if (!x || !out) return ob_cli_fail(OB_ERR_OOM, "kernel bench");
    for (int64_t i = 0; i < NT * n; i++) x[i] = rand_normal();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        ob_type type = types[ti];
        if (types_arg && !strstr(types_arg, ob_type_name(type))) continue;
        size_t rb = ob_row_size(type, n);
        int64_t rows_l2 = ((int64_t)(384 << 10) / (int64_t)rb) & ~(int64_t)15;
        int64_t rows_dram = ((int64_t)(128 << 20) / (int64_t)rb) & ~(int64_t)15;
        if (rows_dram > 65536) rows_dram = 65536;
        int64_t rows_big = ((int64_t)(32 << 20) / (int64_t)rb) & ~(int64_t)15;
        if (rows_big > rows_dram) rows_big = rows_dram;
        void *w = random_matrix(type, n, rows_dram, 0.02f);
        if (!w) return ob_cli_fail(OB_ERR_OOM, "kernel bench");
        for (int tier = OB_CPU_AVX2; tier <= OB_CPU_AVX512; tier++) {
            const ob_cpu_kernels *k = ob_cpu_kernels_for((ob_cpu_tier)tier);
            if (!k) continue;
            for (int layout = 0; layout < 3; layout++) {
                const int packed = layout > 0;
                const ob_mm_kernels *mk = &k->mm[type];
                if (layout == 2 ? !mk->gemm_tiles : packed ? !mk->gemm : !mk->dot) continue;
                if (!packed && tier == OB_CPU_AVX512 && k->mm[type].dot == ob_cpu_kernels_for(OB_CPU_AVX2)->mm[type].dot)
                    continue; /* same kernel as the avx2 row */
                ob_act_fmt fmt = packed ? mk->packed_act : mk->act;
                size_t as = ob_act_row_bytes(fmt, n);
                char *act = ob_malloc(as * NT);
                for (int t = 0; t < NT; t++) {
                    char *dst = act + (size_t)t * as;
                    switch (fmt) {
                    case OB_ACT_F32: memcpy(dst, x + t * n, (size_t)n * 4); break;
                    case OB_ACT_Q8: k->quant_q8(x + t * n, (void *)dst, n); break;
                    case OB_ACT_Q8K: k->quant_q8K(x + t * n, (void *)dst, n); break;
                    case OB_ACT_BF16: k->to_bf16(x + t * n, (void *)dst, n); break;
                    case OB_ACT_Q4: k->quant_q4(x + t * n, (void *)dst, n); break;
                    case OB_ACT_Q4X: k->quant_q4x(x + t * n, (void *)dst, n); break;
                    }
                }
                void *panels = NULL;
                size_t pstride = 0;
                if (packed) {
                    pstride = (mk->panel_bytes(n) + 63) & ~(size_t)63;
                    /* as the backend allocates them: 2 MiB aligned, huge pages */
                    panels = ob_malloc_aligned(pstride * (size_t)(rows_dram / OB_PANEL), (size_t)2 << 20);
                    if (!panels) return ob_cli_fail(OB_ERR_OOM, "kernel bench");
                    madvise(panels, pstride * (size_t)(rows_dram / OB_PANEL), MADV_HUGEPAGE);
                    memset(panels, 0, pstride * (size_t)(rows_dram / OB_PANEL));
                    for (int64_t p = 0; p < rows_dram / OB_PANEL; p++)
                        mk->pack((const char *)w + (size_t)(p * OB_PANEL) * rb, rb, n, (char *)panels + (size_t)p * pstride);
                }
                double t_l2 = kernel_time(mk, layout, w, rb, panels, pstride, n, rows_l2, act, as, 1, out, 0.3, false);
                double t_dram =
                    kernel_time(mk, layout, w, rb, panels, pstride, n, rows_dram, act, as, 1, out, 1.0, false);
                double t_mm = kernel_time(mk, layout, w, rb, panels, pstride, n, rows_l2, act, as, NT, out, 0.5, false);
                double t_big = layout == 2 ? 0 /* the tiles take whole chunks: no such row */
                                           : kernel_time(mk, layout, w, rb, panels, pstride, n, rows_big, act, as, NT,
                                                         out, 0.5, true);
                char big[32] = "-";
                if (t_big > 0) snprintf(big, sizeof big, "%.1f", (double)(n * rows_big * NT) / t_big / 1e9);
                printf("| %-7s | %-11s | %-6s | %12.1f | %14.1f | %11.1f | %15s |\n", ob_type_name(type), k->name,
                       layout == 2 ? "tiles" : packed ? "packed" : "native", (double)rb * (double)rows_l2 / t_l2 / 1e9,
                       (double)rb * (double)rows_dram / t_dram / 1e9, (double)(n * rows_l2 * NT) / t_mm / 1e9, big);
                fflush(stdout);
                ob_free(act);
                ob_free_aligned(panels);
            }
        }
        free_blobs();
    }
    ob_free(x);
    ob_free(out);
    return 0;
}

/* ======================================================================
 * Thread pool: what one op dispatch and one barrier cost
 * ====================================================================== */

typedef struct pool_task {
    int barriers;
} pool_task;

static void pool_fn(const ob_task_ctx *ctx, void *arg) {
    pool_task *t = arg;
    for (int i = 0; i < t->barriers; i++) ob_threadpool_barrier(ctx);
}

static int pool_bench(int threads) {
    ob_threadpool *pool = NULL;
    int rc = ob_threadpool_create(threads, &pool);
    if (rc < 0) return ob_cli_fail(rc, "thread pool");
    const int N = 20000;
    double best_run = 1e30, best_bar = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        pool_task t = {0};
        double t0 = now_s();
        for (int i = 0; i < N; i++) ob_threadpool_run(pool, pool_fn, &t);
        double run = (now_s() - t0) / N;
        t.barriers = 100;
        t0 = now_s();
        for (int i = 0; i < N / 100; i++) ob_threadpool_run(pool, pool_fn, &t);
        double bar = ((now_s() - t0) / (N / 100) - run) / 100;
        if (run < best_run) best_run = run;
        if (bar < best_bar) best_bar = bar;
    }
    printf("thread pool, %d threads: one run (dispatch + join) %.2f us, one barrier %.2f us (best of 5)\n",
           ob_threadpool_n_threads(pool), best_run * 1e6, best_bar * 1e6);
    ob_threadpool_free(pool);
    return 0;
}

/* ======================================================================
 * The benchmark
 * ====================================================================== */

typedef struct bench_opts {
    const char *models[MAX_LIST];
    int n_models;
    int p[MAX_LIST], n_p, g[MAX_LIST], n_g, d[MAX_LIST], n_d, t[MAX_LIST], n_t, np[MAX_LIST], n_np;
    int reps, n_batch;
    const char *fmt, *device;
    int ngl;
    ob_kv_type kv;
    int act_bits; /* 0: the file's default */
    bool warmup, progress;
} bench_opts;

typedef struct result {
    const char *model;
    char model_type[160];
    uint64_t model_size, n_params;
    int n_prompt, n_gen, n_depth, n_threads, n_batch;
    int n_parallel;       /* sequences decoded side by side (-np; 1 = llama-bench's test) */
    int n_gpu_layers;     /* as llama-bench reports it: 0 on the CPU, 99 for all */
    const char *type_kv;
    const char *backends; /* llama-bench's column: "CPU", "CUDA" (or "auto": the library chose) */
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    char test_time[32];
    double samples_ts[64];
    int n_samples;
} result;

static uint64_t g_tok_rng = 1;
static ob_token rand_token(int32_t n_vocab) {
    g_tok_rng = g_tok_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (ob_token)((g_tok_rng >> 33) % (uint64_t)n_vocab);
}

/* Process n random tokens at positions [pos0, pos0+n) of each of sequences
 * 0..n_seq-1, packed into batches of up to n_batch tokens. */
static int feed_prompt(ob_context *ctx, int32_t n_vocab, int n_seq, int pos0, int n, int n_batch) {
    ob_token tok[4096];
    int32_t pos[4096], seq[4096];
    if (n_batch > 4096) n_batch = 4096;
    const int64_t total = (int64_t)n_seq * n;
    for (int64_t done = 0; done < total;) {
        int m = total - done < n_batch ? (int)(total - done) : n_batch;
        for (int i = 0; i < m; i++) {
            tok[i] = rand_token(n_vocab);
            pos[i] = pos0 + (int)((done + i) % n);
            seq[i] = (int32_t)((done + i) / n);
        }
        ob_batch b = {m, tok, pos, seq, NULL};
        int rc = ob_decode(ctx, &b);
        if (rc < 0) return rc;
        done += m;
    }
    return 0;
}

/* n decode steps; each step is one batch of one token for every sequence. */
static int gen_tokens(ob_context *ctx, int32_t n_vocab, int n_seq, int pos0, int n) {
    ob_token tok[4096];
    int32_t pos[4096], seq[4096];
    if (n_seq > 4096) return ob_err(OB_ERR_RANGE, "at most 4096 parallel sequences");
    for (int s = 0; s < n_seq; s++) tok[s] = rand_token(n_vocab), seq[s] = s;
    for (int i = 0; i < n; i++) {
        for (int s = 0; s < n_seq; s++) pos[s] = pos0 + i;
        ob_batch b = {n_seq, tok, pos, seq, NULL};
        int rc = ob_decode(ctx, &b);
        if (rc < 0) return rc;
        for (int s = 0; s < n_seq; s++) tok[s] = rand_token(n_vocab); /* llama-bench does not sample either */
    }
    return 0;
}

/* "qwen3 0.6B Q4_0" from the file's arch, parameter count and file type. */
static void describe(const char *path, const ob_model *m, char *buf, size_t size) {
    double p = (double)ob_model_n_params(m);
    char sz[32];
    if (p >= 1e9)
        snprintf(sz, sizeof sz, "%.1fB", p / 1e9);
    else
        snprintf(sz, sizeof sz, "%.0fM", p / 1e6);
    const char *ft = NULL;
    ob_gguf *g = NULL;
    if (ob_gguf_open(path, &g) == 0) {
        uint32_t id;
        if (ob_gguf_get_u32(g, "general.file_type", &id) == 0)
            for (size_t i = 0; i < sizeof g_ftypes / sizeof g_ftypes[0]; i++)
                if (g_ftypes[i].id == (int)id) ft = g_ftypes[i].name;
        ob_gguf_free(g);
    }
    ob_err_clear();
    char desc[128];
    ob_model_desc(m, desc, sizeof desc);
    if (ft)
        snprintf(buf, size, "%s %s %s", ob_model_arch(m), sz, ft);
    else
        snprintf(buf, size, "%s", desc);
}

static int run_test(const bench_opts *o, ob_model *m, const char *path, int n_prompt, int n_gen, int depth, int threads,
                    int n_par, result *r) {
    memset(r, 0, sizeof *r);
    r->model = path;
    describe(path, m, r->model_type, sizeof r->model_type);
    r->model_size = ob_model_size_bytes(m);
    r->n_params = ob_model_n_params(m);
    r->n_prompt = n_prompt, r->n_gen = n_gen, r->n_depth = depth, r->n_threads = threads, r->n_batch = o->n_batch;
    r->n_parallel = n_par;
    r->type_kv = o->kv == OB_KV_F32 ? "f32" : o->kv == OB_KV_Q8_0 ? "q8_0" : "f16";
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(r->test_time, sizeof r->test_time, "%Y-%m-%dT%H:%M:%SZ", &tmv);

    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = depth + n_prompt + n_gen + 1;
    cp.n_seq_max = n_par;
    cp.n_batch = o->n_batch > n_par ? o->n_batch : n_par;
    cp.n_threads = threads;
    cp.kv_type = o->kv;
    cp.act_bits = o->act_bits;
    ob_context *ctx = NULL;
    int rc = ob_context_create(m, &cp, &ctx);
    if (rc < 0) return rc;
    const int32_t nv = ob_model_n_vocab(m);
    if (o->warmup) {
        if (n_prompt > 0) rc = feed_prompt(ctx, nv, n_par, 0, n_prompt, o->n_batch);
        if (rc == 0 && n_gen > 0) rc = gen_tokens(ctx, nv, n_par, 0, 1);
        for (int s = 0; s < n_par; s++) ob_seq_remove(ctx, s, 0);
    }
    double sum = 0, sum2 = 0, sum_ns = 0, sum2_ns = 0;
    for (int rep = 0; rc == 0 && rep < o->reps; rep++) {
        for (int s = 0; s < n_par; s++) ob_seq_remove(ctx, s, 0);
        if (depth > 0) rc = feed_prompt(ctx, nv, n_par, 0, depth, o->n_batch);
        if (rc < 0) break;
        double t0 = now_s();
        if (n_prompt > 0) rc = feed_prompt(ctx, nv, n_par, depth, n_prompt, o->n_batch);
        if (rc == 0 && n_gen > 0) rc = gen_tokens(ctx, nv, n_par, depth + n_prompt, n_gen);
        double dt = now_s() - t0;
        if (rc < 0) break;
        double ts = (double)n_par * (n_prompt + n_gen) / dt; /* all sequences' tokens */
        if (r->n_samples < 64) r->samples_ts[r->n_samples++] = ts;
        sum += ts, sum2 += ts * ts, sum_ns += dt * 1e9, sum2_ns += dt * dt * 1e18;
        if (o->progress) fprintf(stderr, "  rep %d: %.2f t/s\n", rep, ts);
    }
    ob_context_free(ctx);
    if (rc < 0) return rc;
    int n = o->reps;
    r->avg_ts = sum / n;
    r->avg_ns = sum_ns / n;
    r->stddev_ts = n > 1 ? sqrt(fmax(0.0, (sum2 - sum * sum / n) / (n - 1))) : 0.0;
    r->stddev_ns = n > 1 ? sqrt(fmax(0.0, (sum2_ns - sum_ns * sum_ns / n) / (n - 1))) : 0.0;
    return 0;
}

static void test_name(const result *r, char *buf, size_t size) {
    int n;
    if (r->n_prompt > 0 && r->n_gen == 0)
        n = snprintf(buf, size, "pp%d", r->n_prompt);
    else if (r->n_gen > 0 && r->n_prompt == 0)
        n = snprintf(buf, size, "tg%d", r->n_gen);
    else
        n = snprintf(buf, size, "pp%d+tg%d", r->n_prompt, r->n_gen);
    if (r->n_parallel > 1 && n > 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, " x%d", r->n_parallel);
    if (r->n_depth > 0 && n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, " @ d%d", r->n_depth);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static const char *cpu_brand(void) {
    const char *b = ob_cpu_get_features()->brand;
    while (*b == ' ') b++;
    return b;
}

/* llama-bench's fields, in its order, as (name, value) printers. */
static void print_fields_json(FILE *f, const result *r, const char *sep) {
    const ob_cpu_kernels *k = ob_cpu_kernels_get();
    fprintf(f, "\"build_commit\": ");
    json_str(f, OB_GIT_COMMIT);
    fprintf(f, ",%s\"build_number\": %d,%s\"cpu_info\": ", sep, OB_BUILD_NUMBER, sep);
    json_str(f, cpu_brand());
    fprintf(f, ",%s\"gpu_info\": \"\",%s\"backends\": \"%s\",%s\"cpu_kernels\": ", sep, sep, r->backends, sep);
    json_str(f, k->name);
    fprintf(f, ",%s\"model_filename\": ", sep);
    json_str(f, r->model);
    fprintf(f, ",%s\"model_type\": ", sep);
    json_str(f, r->model_type);
    fprintf(f,
            ",%s\"model_size\": %llu,%s\"model_n_params\": %llu,%s\"n_batch\": %d,%s\"n_ubatch\": %d,%s"
            "\"n_threads\": %d,%s\"type_k\": \"%s\",%s\"type_v\": \"%s\",%s\"n_gpu_layers\": %d,%s"
            "\"flash_attn\": true,%s\"use_mmap\": true,%s\"n_prompt\": %d,%s\"n_gen\": %d,%s\"n_depth\": %d,%s"
            "\"test_time\": \"%s\",%s\"avg_ns\": %.0f,%s\"stddev_ns\": %.0f,%s\"avg_ts\": %.6f,%s\"stddev_ts\": %.6f,%s"
            "\"n_parallel\": %d,%s\"samples_ts\": [",
            sep, (unsigned long long)r->model_size, sep, (unsigned long long)r->n_params, sep, r->n_batch, sep,
            r->n_batch, sep, r->n_threads, sep, r->type_kv, sep, r->type_kv, sep, r->n_gpu_layers, sep, sep, sep, r->n_prompt, sep,
            r->n_gen, sep, r->n_depth, sep, r->test_time, sep, r->avg_ns, sep, r->stddev_ns, sep, r->avg_ts, sep,
            r->stddev_ts, sep, r->n_parallel, sep);
    for (int i = 0; i < r->n_samples; i++) fprintf(f, "%s%.6f", i ? ", " : "", r->samples_ts[i]);
    fprintf(f, "]");
}

static void print_csv_header(FILE *f) {
    fprintf(f, "build_commit,build_number,cpu_info,gpu_info,backends,cpu_kernels,model_filename,model_type,model_size,"
               "model_n_params,n_batch,n_ubatch,n_threads,type_k,type_v,n_gpu_layers,flash_attn,use_mmap,n_prompt,"
               "n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts\n");
}

static void print_csv(FILE *f, const result *r) {
    fprintf(f, "\"%s\",%d,\"%s\",\"\",\"%s\",\"%s\",\"%s\",\"%s\",%llu,%llu,%d,%d,%d,\"%s\",\"%s\",%d,1,1,%d,%d,%d,\"%s\","
               "%.0f,%.0f,%.6f,%.6f\n",
            OB_GIT_COMMIT, OB_BUILD_NUMBER, cpu_brand(), r->backends, ob_cpu_kernels_get()->name, r->model, r->model_type,
            (unsigned long long)r->model_size, (unsigned long long)r->n_params, r->n_batch, r->n_batch, r->n_threads,
            r->type_kv, r->type_kv, r->n_gpu_layers, r->n_prompt, r->n_gen, r->n_depth, r->test_time, r->avg_ns, r->stddev_ns,
            r->avg_ts, r->stddev_ts);
}

static void print_md_header(FILE *f) {
    fprintf(f, "| model                          |       size |     params | backend    | threads |            test |                  t/s |\n");
    fprintf(f, "| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: | -------------------: |\n");
}

static void print_md(FILE *f, const result *r) {
    char test[48], size[32], params[32], ts[48];
    test_name(r, test, sizeof test);
    snprintf(size, sizeof size, "%.2f GiB", (double)r->model_size / (1 << 30));
    double p = (double)r->n_params;
    snprintf(params, sizeof params, p >= 1e9 ? "%.2f B" : "%.2f M", p >= 1e9 ? p / 1e9 : p / 1e6);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
    fprintf(f, "| %-30s | %10s | %10s | %-10s | %7d | %15s | %20s |\n", r->model_type, size, params, r->backends, r->n_threads,
            test, ts);
}

int ob_cmd_bench(int argc, char **argv) {
    if (argc > 0 && !strcmp(argv[0], "serve")) return ob_cmd_bench_serve(argc - 1, argv + 1); /* bench_serve.c */
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.reps = 5, o.n_batch = 512, o.fmt = "md", o.device = "cpu", o.kv = OB_KV_F16, o.warmup = true;
    o.p[0] = 512, o.n_p = 1, o.g[0] = 128, o.n_g = 1, o.d[0] = 0, o.n_d = 1, o.t[0] = ob_n_cpus(), o.n_t = 1;
    o.np[0] = 1, o.n_np = 1;
    const char *make = NULL, *type = NULL, *out = NULL, *vocab = NULL;
    bool bw = false, kernels = false, pool = false;
    for (int i = 0; i < argc;) {
        const char *a = argv[i++];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--membw")) {
            bw = true;
            continue;
        }
        if (!strcmp(a, "--kernels")) {
            kernels = true;
            continue;
        }
        if (!strcmp(a, "--pool")) {
            pool = true;
            continue;
        }
        if (!strcmp(a, "--no-warmup")) {
            o.warmup = false;
            continue;
        }
        if (!strcmp(a, "--progress")) {
            o.progress = true;
            continue;
        }
        if (i >= argc) return ob_cli_fail(0, "%s needs a value", a);
        const char *v = argv[i++];
        int *list = NULL, *count = NULL;
        if (!strcmp(a, "-m")) {
            char *save = NULL;
            for (char *tok = strtok_r(argv[i - 1], ",", &save); tok && o.n_models < MAX_LIST; tok = strtok_r(NULL, ",", &save))
                o.models[o.n_models++] = tok;
        } else if (!strcmp(a, "-p")) list = o.p, count = &o.n_p;
        else if (!strcmp(a, "-n")) list = o.g, count = &o.n_g;
        else if (!strcmp(a, "-d")) list = o.d, count = &o.n_d;
        else if (!strcmp(a, "-t")) list = o.t, count = &o.n_t;
        else if (!strcmp(a, "-np")) list = o.np, count = &o.n_np;
        else if (!strcmp(a, "-r")) o.reps = atoi(v);
        else if (!strcmp(a, "-b")) o.n_batch = atoi(v);
        else if (!strcmp(a, "-o")) {
            o.fmt = v;
            out = v;
        } else if (!strcmp(a, "--device")) o.device = v;
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) o.ngl = atoi(v);
        else if (!strcmp(a, "--make-model")) make = v;
        else if (!strcmp(a, "--type")) type = v;
        else if (!strcmp(a, "--vocab")) vocab = v;
        else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16")) o.kv = OB_KV_F16;
            else if (!strcmp(v, "f32")) o.kv = OB_KV_F32;
            else if (!strcmp(v, "q8_0")) o.kv = OB_KV_Q8_0;
            else return ob_cli_fail(0, "--kv-type %s: expected f16, f32 or q8_0", v);
        } else if (!strcmp(a, "--act-bits")) {
            o.act_bits = atoi(v);
            if (o.act_bits != 4 && o.act_bits != 8) return ob_cli_fail(0, "--act-bits %s: expected 4 or 8", v);
        } else
            return ob_cli_fail(0, "unknown option %s (see 1bit bench --help)", a);
        if (list && (*count = parse_list(v, list, MAX_LIST)) <= 0) return ob_cli_fail(0, "%s %s: expected a list of numbers", a, v);
    }
    if (make) {
        if (!type || !out) return ob_cli_fail(0, "--make-model needs --type and -o OUT.gguf");
        return make_model(make, type, out, vocab);
    }
    if (bw) return membw(o.t[0]);
    if (kernels) return kernel_bench(type);
    if (pool) return pool_bench(o.t[0]);
    if (o.n_models == 0) return ob_cli_fail(0, "no model (-m FILE)");
    if (o.reps < 1 || o.reps > 64 || o.n_batch < 1) return ob_cli_fail(0, "-r must be 1..64 and -b positive");
    for (int i = 0; i < o.n_np; i++)
        if (o.np[i] < 1 || o.np[i] > 4096) return ob_cli_fail(0, "-np %d: expected 1..4096 sequences", o.np[i]);
    const bool md = !strcmp(o.fmt, "md"), csv = !strcmp(o.fmt, "csv"), json = !strcmp(o.fmt, "json"),
               jsonl = !strcmp(o.fmt, "jsonl");
    if (!md && !csv && !json && !jsonl) return ob_cli_fail(0, "-o %s: expected md, csv, json or jsonl", o.fmt);
    if (md) print_md_header(stdout);
    if (csv) print_csv_header(stdout);
    if (json) printf("[\n");
    bool first = true;
    int status = 0;
    for (int mi = 0; mi < o.n_models && !status; mi++) {
        ob_model_params mp = ob_model_default_params();
        mp.device = o.device;
        mp.n_gpu_layers = o.ngl;
        ob_model *m = NULL;
        int rc = ob_model_load(o.models[mi], &mp, &m);
        if (rc < 0) {
            status = ob_cli_fail(rc, "loading %s", o.models[mi]);
            break;
        }
        /* llama-bench's order: for each thread count and depth, the pp tests then the tg tests */
        for (int ti = 0; ti < o.n_t && !status; ti++)
            for (int pi = 0; pi < o.n_np && !status; pi++)
            for (int di = 0; di < o.n_d && !status; di++)
                for (int kind = 0; kind < 2 && !status; kind++) {
                    int cnt = kind == 0 ? o.n_p : o.n_g;
                    for (int li = 0; li < cnt && !status; li++) {
                        int np = kind == 0 ? o.p[li] : 0, ng = kind == 1 ? o.g[li] : 0;
                        if (np == 0 && ng == 0) continue;
                        result r;
                        rc = run_test(&o, m, o.models[mi], np, ng, o.d[di], o.t[ti], o.np[pi], &r);
                        r.backends = !strncmp(o.device, "cuda", 4) ? "CUDA" : !strcmp(o.device, "auto") ? "auto" : "CPU";
                        r.n_gpu_layers = !strcmp(r.backends, "CPU") ? 0 : o.ngl > 0 ? o.ngl : 99;
                        if (rc < 0) {
                            status = ob_cli_fail(rc, "bench %s", o.models[mi]);
                            break;
                        }
                        if (md) print_md(stdout, &r);
                        if (csv) print_csv(stdout, &r);
                        if (json || jsonl) {
                            if (json) printf("%s  {\n    ", first ? "" : ",\n");
                            else printf("{");
                            print_fields_json(stdout, &r, json ? "\n    " : " ");
                            printf(json ? "\n  }" : "}\n");
                        }
                        first = false;
                        fflush(stdout);
                    }
                }
        ob_model_free(m);
    }
    if (json) printf("\n]\n");
    if (md && !status) printf("\nbuild: %s, cpu kernels: %s\n", OB_GIT_COMMIT, ob_cpu_kernels_get()->name);
    return status;
}
