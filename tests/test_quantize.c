/*
 * test_quantize.c - the quantization tools: `1bit quantize` (mixes and their
 * recipes, overrides, --leave-output, sources, threads, imatrix refusal),
 * `1bit perplexity`, `1bit kld`, `1bit imatrix` and the Hadamard route.
 *
 * Models: a random-weight llama written here (rows of 256 and 512, so every
 * K-quant applies; 8 layers so the recipes' layer rules show), the F32
 * transformers fixtures in tests/data/models (converted here), and
 * stories260K from ../shared/models (tests that need it skip without it).
 * Quality is measured against the unquantized model by KL divergence of
 * the next-token distributions, computed here from the logits.
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "convert/convert.h"
#include "core/mem.h"
#include "core/status.h"
#include "engine/matmul_hook.h"
#include "gguf/gguf.h"
#include "onebit.h"
#include "quant/hadamard.h"
#include "quant/imatrix.h"
#include "quant/kl_stats.h"
#include "quant/quant_ref.h"
#include "quant/quant_weighted.h"
#include "quant/quantize.h"
#include "test.h"

#ifndef OB_CLI_PATH
#error "OB_CLI_PATH must name the 1bit binary"
#endif
#ifndef OB_SOURCE_DIR
#error "OB_SOURCE_DIR must name the source tree"
#endif

static char g_dir[256];

static const char *tmp(const char *name) {
    static char buf[8][512];
    static int k;
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/ob_test_quantize_%d", (int)getpid());
        mkdir(g_dir, 0700);
    }
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s", g_dir, name);
    return b;
}

static const char *stories(void) {
    const char *d = test_models_dir();
    if (!d) return NULL;
    static char p[1024];
    snprintf(p, sizeof p, "%s/stories260K/stories260K.gguf", d);
    return access(p, R_OK) == 0 ? p : NULL;
}

static const char *story_text(void) { return OB_SOURCE_DIR "/tests/data/quantize/story.txt"; }

/* Run `1bit ARGS` (stderr joined), output into out. Returns the exit code. */
static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[10240];
    snprintf(cmd, sizeof cmd, "OB_LOG=error '%s' %s 2>&1", OB_CLI_PATH, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0, k;
    while (n < cap - 1 && (k = fread(out + n, 1, cap - 1 - n, p)) > 0) n += k;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double parse_after(const char *out, const char *label) {
    const char *p = strstr(out, label);
    return p ? atof(p + strlen(label)) : NAN;
}

/* ---------------------------------------------------------------- models */

typedef struct synth {
    int n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab;
    ob_type type;
    int outlier_cols; /* input columns of every matrix scaled up (heavy-tailed activations) */
    uint32_t alignment;
} synth;

static void *rand_matrix(uint64_t *rng, int64_t nin, int64_t nout, float sd, ob_type type, int outlier_cols) {
    float *f = ob_malloc((size_t)(nin * nout) * sizeof(float));
    for (int64_t r = 0; r < nout; r++)
        for (int64_t c = 0; c < nin; c++) f[r * nin + c] = sd * test_rand_normal(rng) * (c < outlier_cols ? 6.0f : 1.0f);
    if (type == OB_TYPE_F32) return f;
    void *q = ob_malloc(ob_row_size(type, nin) * (size_t)nout);
    for (int64_t r = 0; r < nout; r++)
        ob_type_get((int)type)->from_float_ref(f + r * nin, (char *)q + (size_t)r * ob_row_size(type, nin), nin);
    ob_free(f);
    return q;
}

/* A llama of random weights (sd 1/sqrt(fan-in)), no vocabulary. */
static int write_synth(const char *path, const synth *s) {
    uint64_t rng = 1234;
    ob_gguf_writer *w = NULL;
    OB_TRY(ob_gguf_writer_create(&w));
    const int64_t E = s->n_embd, HD = E / s->n_head, KV = HD * s->n_head_kv, F = s->n_ff, V = s->n_vocab;
    ob_gguf_writer_set_str(w, "general.architecture", "llama");
    ob_gguf_writer_set_str(w, "general.name", "synthetic");
    if (s->alignment) ob_gguf_writer_set_u32(w, "general.alignment", s->alignment);
    ob_gguf_writer_set_u32(w, "llama.context_length", 512);
    ob_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)E);
    ob_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)s->n_layer);
    ob_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)F);
    ob_gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)s->n_head);
    ob_gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)s->n_head_kv);
    ob_gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)HD);
    ob_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    ob_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    ob_gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)V);
    ob_gguf_writer_set_str(w, "test.marker", "kept");
    void **keep = ob_calloc(16 + 8 * (size_t)s->n_layer, sizeof(void *));
    int nk = 0;
    float *ones = ob_malloc((size_t)E * sizeof(float));
    for (int64_t i = 0; i < E; i++) ones[i] = 1.0f;
    keep[nk++] = ones;
    int64_t ne_ev[2] = {E, V}, ne_e[1] = {E};
    const ob_type emb_t = s->type == OB_TYPE_Q8_0 ? OB_TYPE_Q8_0 : s->type;
    int rc = 0;
    void *embd = keep[nk++] = rand_matrix(&rng, E, V, 1.0f, emb_t, 0);
    void *outw = keep[nk++] = rand_matrix(&rng, E, V, 3.0f / sqrtf((float)E), s->type, 0);
    rc = ob_gguf_writer_add_tensor(w, "token_embd.weight", emb_t, 2, ne_ev, embd);
    if (rc == 0) rc = ob_gguf_writer_add_tensor(w, "output_norm.weight", OB_TYPE_F32, 1, ne_e, ones);
    if (rc == 0) rc = ob_gguf_writer_add_tensor(w, "output.weight", s->type, 2, ne_ev, outw);
    for (int il = 0; rc == 0 && il < s->n_layer; il++) {
        char nm[96];
        int64_t sq[2] = {E, E}, skv[2] = {E, KV}, sf[2] = {E, F}, sd2[2] = {F, E};
        const float se = 1.0f / sqrtf((float)E), sf_ = 1.0f / sqrtf((float)F);
        const int oc = s->outlier_cols;
#define ADD(fmt, ne, data)                                                                       \
    do {                                                                                         \
        snprintf(nm, sizeof nm, "blk.%d." fmt, il);                                              \
        if (rc == 0) rc = ob_gguf_writer_add_tensor(w, nm, s->type, 2, ne, keep[nk++] = (data)); \
    } while (0)
        snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", il);
        rc = ob_gguf_writer_add_tensor(w, nm, OB_TYPE_F32, 1, ne_e, ones);
        ADD("attn_q.weight", sq, rand_matrix(&rng, E, E, se, s->type, oc));
        ADD("attn_k.weight", skv, rand_matrix(&rng, E, KV, se, s->type, oc));
        ADD("attn_v.weight", skv, rand_matrix(&rng, E, KV, se, s->type, oc));
        ADD("attn_output.weight", sq, rand_matrix(&rng, E, E, se, s->type, oc));
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", il);
        if (rc == 0) rc = ob_gguf_writer_add_tensor(w, nm, OB_TYPE_F32, 1, ne_e, ones);
        ADD("ffn_gate.weight", sf, rand_matrix(&rng, E, F, se, s->type, oc));
        ADD("ffn_up.weight", sf, rand_matrix(&rng, E, F, se, s->type, oc));
        ADD("ffn_down.weight", sd2, rand_matrix(&rng, F, E, sf_, s->type, oc));
#undef ADD
    }
    if (rc == 0) rc = ob_gguf_writer_write_file(w, path);
    ob_gguf_writer_free(w);
    for (int i = 0; i < nk; i++) ob_free(keep[i]);
    ob_free(keep);
    return rc;
}

static const synth g_synth = {8, 256, 512, 8, 2, 512, OB_TYPE_F32, 0, 0};

static const char *synth_path(void) {
    static int made;
    static char p[512];
    snprintf(p, sizeof p, "%s", tmp("synth-f32.gguf"));
    if (!made) {
        if (write_synth(p, &g_synth) < 0) return NULL;
        made = 1;
    }
    return p;
}

/* Logits [n][n_vocab] for a token sequence (one thread, one batch);
 * act_bits as ob_context_params (0: the file's default). */
static float *logits_of_bits(const char *path, const ob_token *tok, int n, int *n_vocab, int act_bits) {
    ob_model *m = NULL;
    ob_model_params mp = ob_model_default_params();
    mp.n_threads = 1;
    if (ob_model_load(path, &mp, &m) < 0) {
        fprintf(stderr, "  load %s: %s\n", path, ob_last_error());
        return NULL;
    }
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = n;
    cp.n_batch = n;
    cp.n_threads = 1;
    cp.act_bits = act_bits;
    ob_context *ctx = NULL;
    float *out = NULL;
    if (ob_context_create(m, &cp, &ctx) == 0) {
        int32_t *pos = ob_malloc((size_t)n * sizeof(int32_t)), *seq = ob_calloc((size_t)n, sizeof(int32_t));
        int8_t *want = ob_malloc((size_t)n);
        for (int i = 0; i < n; i++) {
            pos[i] = i;
            want[i] = 1;
        }
        ob_batch b = {n, tok, pos, seq, want};
        int V = ob_model_n_vocab(m);
        if (ob_decode(ctx, &b) == 0) {
            out = ob_malloc((size_t)n * (size_t)V * sizeof(float));
            for (int i = 0; i < n; i++) memcpy(out + (size_t)i * V, ob_get_logits(ctx, i), (size_t)V * sizeof(float));
        } else {
            fprintf(stderr, "  decode %s: %s\n", path, ob_last_error());
        }
        *n_vocab = V;
        ob_free(pos);
        ob_free(seq);
        ob_free(want);
    }
    ob_context_free(ctx);
    ob_model_free(m);
    return out;
}

static float *logits_of(const char *path, const ob_token *tok, int n, int *n_vocab) {
    return logits_of_bits(path, tok, n, n_vocab, 0);
}

/* Mean KL divergence (and top-1 agreement) of b's distributions from a's. */
static double mean_kld(const float *a, const float *b, int n, int V, double *same_top) {
    float *pa = ob_malloc((size_t)V * sizeof(float)), *pb = ob_malloc((size_t)V * sizeof(float));
    double s = 0;
    int same = 0;
    for (int i = 0; i < n; i++) {
        ob_log_softmax(a + (size_t)i * V, V, pa);
        ob_log_softmax(b + (size_t)i * V, V, pb);
        s += ob_kl_divergence(pa, pb, V);
        same += ob_argmax(pa, V) == ob_argmax(pb, V);
    }
    ob_free(pa);
    ob_free(pb);
    if (same_top) *same_top = (double)same / n;
    return s / n;
}

/* Standard error of mean_kld(a, b) - mean_kld(a, c), from the same tokens:
 * the sd of the per-token differences / sqrt(n). */
static double kld_diff_se(const float *a, const float *b, const float *c, int n, int V) {
    float *pa = ob_malloc((size_t)V * sizeof(float)), *pb = ob_malloc((size_t)V * sizeof(float));
    float *pc = ob_malloc((size_t)V * sizeof(float));
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        ob_log_softmax(a + (size_t)i * V, V, pa);
        ob_log_softmax(b + (size_t)i * V, V, pb);
        ob_log_softmax(c + (size_t)i * V, V, pc);
        double k = ob_kl_divergence(pa, pb, V) - ob_kl_divergence(pa, pc, V);
        s += k;
        s2 += k * k;
    }
    ob_free(pa);
    ob_free(pb);
    ob_free(pc);
    double m = s / n, var = s2 / n - m * m;
    return sqrt(var > 0 ? var / (n - 1) : 0);
}

static void rand_tokens(ob_token *t, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) t[i] = (ob_token)(test_rand_u64(&seed) % (uint64_t)V);
}

static int quantize(const char *in, const char *out, const char *mix, const ob_quantize_params *p) {
    ob_quantize_params d;
    if (!p) {
        ob_quantize_params_init(&d);
        d.n_threads = 1;
        p = &d;
    }
    return ob_quantize_file(in, out, ob_ftype_find(mix), p, NULL);
}

static ob_type type_of(const ob_gguf *g, const char *name) {
    const ob_gguf_tensor *t = ob_gguf_find_tensor(g, name);
    return t ? t->type : (ob_type)-1;
}

/* ----------------------------------------------------------------- tests */

TEST(mix_names) {
    CHECK(ob_ftype_find("Q4_K_M") && ob_ftype_find("Q4_K_M")->ftype == 15);
    CHECK(ob_ftype_find("q4_k") == ob_ftype_find("Q4_K_M")); /* alias, as llama-quantize */
    CHECK(ob_ftype_find("Q8_0")->base == OB_TYPE_Q8_0 && ob_ftype_find("Q8_0")->ftype == 7);
    CHECK(ob_ftype_find("Q2_K_S")->needs_imatrix && !ob_ftype_find("Q2_K")->needs_imatrix);
    CHECK(ob_ftype_find("IQ2_M")->base == OB_TYPE_IQ2_S);
    CHECK(ob_ftype_find("nonsense") == NULL);
    int n;
    const ob_ftype_info *l = ob_ftype_list(&n);
    for (int i = 0; i < n; i++) CHECK(ob_ftype_by_id(l[i].ftype) == &l[i]); /* ids unique */
}

/* The recipe, tensor by tensor, for Q4_K_M / Q2_K / Q3_K_M on 8 layers with
 * n_head / n_head_kv = 4. more(i) is llama.cpp's use_more_bits rule. */
static int more(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

TEST(recipes_per_tensor) {
    const char *src = synth_path();
    CHECK(src != NULL);
    if (!src) return;
    const char *mixes[] = {"Q4_K_M", "Q2_K", "Q3_K_M", "Q5_K_S", "Q6_K"};
    for (size_t k = 0; k < sizeof mixes / sizeof mixes[0]; k++) {
        const char *out = tmp("recipe.gguf");
        CHECK_OK(quantize(src, out, mixes[k], NULL));
        ob_gguf *g = NULL;
        CHECK_OK(ob_gguf_open(out, &g));
        if (!g) continue;
        uint32_t ft = 0;
        CHECK_OK(ob_gguf_get_u32(g, "general.file_type", &ft));
        CHECK_EQ_INT(ft, ob_ftype_find(mixes[k])->ftype);
        CHECK_EQ_INT(type_of(g, "output.weight"), OB_TYPE_Q6_K);
        CHECK_EQ_INT(type_of(g, "output_norm.weight"), OB_TYPE_F32);
        for (int il = 0; il < 8; il++) {
            char v[64], d[64], o[64], q[64];
            snprintf(v, sizeof v, "blk.%d.attn_v.weight", il);
            snprintf(d, sizeof d, "blk.%d.ffn_down.weight", il);
            snprintf(o, sizeof o, "blk.%d.attn_output.weight", il);
            snprintf(q, sizeof q, "blk.%d.attn_q.weight", il);
            ob_type ev, ed, eo, eq;
            if (!strcmp(mixes[k], "Q4_K_M")) {
                ev = more(il, 8) ? OB_TYPE_Q6_K : OB_TYPE_Q4_K;
                ed = more(il, 8) ? OB_TYPE_Q6_K : OB_TYPE_Q4_K;
                eo = eq = OB_TYPE_Q4_K;
            } else if (!strcmp(mixes[k], "Q2_K")) {
                ev = OB_TYPE_Q4_K; /* GQA 4: attn_v is small, so it gets 4 bits */
                ed = eo = OB_TYPE_Q3_K;
                eq = OB_TYPE_Q2_K;
            } else if (!strcmp(mixes[k], "Q3_K_M")) {
                ev = il < 2 ? OB_TYPE_Q5_K : OB_TYPE_Q4_K;
                ed = il < 8 / 16 ? OB_TYPE_Q5_K : OB_TYPE_Q4_K;
                eo = OB_TYPE_Q4_K;
                eq = OB_TYPE_Q3_K;
            } else if (!strcmp(mixes[k], "Q5_K_S")) {
                ev = ed = eo = eq = OB_TYPE_Q5_K;
            } else {
                ev = ed = eo = eq = OB_TYPE_Q6_K;
            }
            CHECK_MSG(type_of(g, v) == ev, "%s %s: %s", mixes[k], v, ob_type_name(type_of(g, v)));
            CHECK_MSG(type_of(g, d) == ed, "%s %s: %s", mixes[k], d, ob_type_name(type_of(g, d)));
            CHECK_MSG(type_of(g, o) == eo, "%s %s: %s", mixes[k], o, ob_type_name(type_of(g, o)));
            CHECK_MSG(type_of(g, q) == eq, "%s %s: %s", mixes[k], q, ob_type_name(type_of(g, q)));
        }
        ob_gguf_free(g);
    }
}

TEST(metadata_alignment_overrides_leave_output) {
    synth s = g_synth;
    s.n_layer = 2;
    s.alignment = 64;
    const char *src = tmp("align64.gguf"), *out = tmp("align64-q4_0.gguf");
    CHECK_OK(write_synth(src, &s));
    ob_quantize_params p;
    ob_quantize_params_init(&p);
    p.n_threads = 1;
    p.leave_output = true;
    ob_tensor_override ov[2] = {{"attn_k", OB_TYPE_Q8_0}, {"blk\\.1\\.ffn_(up|gate)", OB_TYPE_Q5_1}};
    p.overrides = ov;
    p.n_overrides = 2;
    ob_quantize_stats st;
    CHECK_OK(ob_quantize_file(src, out, ob_ftype_find("Q4_0"), &p, &st));
    ob_gguf *g = NULL, *gi = NULL;
    CHECK_OK(ob_gguf_open(out, &g));
    CHECK_OK(ob_gguf_open(src, &gi));
    if (!g || !gi) return;
    CHECK_EQ_INT(ob_gguf_alignment(g), 64);
    for (int64_t i = 0; i < ob_gguf_n_kv(gi); i++) /* every source key is kept */
        CHECK_MSG(ob_gguf_find_key(g, ob_gguf_kv_at(gi, i)->key) >= 0, "%s", ob_gguf_kv_at(gi, i)->key);
    const char *mk = NULL;
    CHECK_OK(ob_gguf_get_str(g, "test.marker", &mk));
    uint32_t ft = 0, qv = 0;
    CHECK_OK(ob_gguf_get_u32(g, "general.file_type", &ft));
    CHECK_OK(ob_gguf_get_u32(g, "general.quantization_version", &qv));
    CHECK_EQ_INT(ft, 2);
    CHECK_EQ_INT(qv, 2);
    CHECK_EQ_INT(type_of(g, "output.weight"), OB_TYPE_F32); /* --leave-output */
    CHECK_EQ_INT(type_of(g, "token_embd.weight"), OB_TYPE_Q4_0);
    CHECK_EQ_INT(type_of(g, "blk.0.attn_k.weight"), OB_TYPE_Q8_0);
    CHECK_EQ_INT(type_of(g, "blk.1.attn_k.weight"), OB_TYPE_Q8_0);
    CHECK_EQ_INT(type_of(g, "blk.0.ffn_up.weight"), OB_TYPE_Q4_0);
    CHECK_EQ_INT(type_of(g, "blk.1.ffn_up.weight"), OB_TYPE_Q5_1);
    CHECK_EQ_INT(type_of(g, "blk.1.ffn_gate.weight"), OB_TYPE_Q5_1);
    CHECK_EQ_INT(type_of(g, "blk.1.ffn_down.weight"), OB_TYPE_Q4_0);
    CHECK_EQ_INT(st.type_count[OB_TYPE_Q8_0], 2);
    /* bytes of a converted tensor are the reference quantizer's */
    const ob_gguf_tensor *ti = ob_gguf_find_tensor(gi, "blk.0.attn_q.weight"), *to = ob_gguf_find_tensor(g, "blk.0.attn_q.weight");
    if (ti && to) {
        void *want = ob_malloc(to->nbytes);
        for (int64_t r = 0; r < ti->ne[1]; r++)
            ob_type_get(OB_TYPE_Q4_0)->from_float_ref((const float *)ti->data + r * ti->ne[0],
                                                      (char *)want + (size_t)r * ob_row_size(OB_TYPE_Q4_0, ti->ne[0]),
                                                      ti->ne[0]);
        CHECK(memcmp(want, to->data, to->nbytes) == 0);
        ob_free(want);
    }
    ob_gguf_free(g);
    ob_gguf_free(gi);
    /* the output may not be the input (it is mapped while the output is written) */
    CHECK_EQ_INT(ob_quantize_file(src, src, ob_ftype_find("Q8_0"), &p, NULL), OB_ERR_INVALID_ARG);
    CHECK(access(src, R_OK) == 0);
    /* a bad pattern is an error naming it */
    ov[0].pattern = "attn_(k";
    CHECK_EQ_INT(ob_quantize_file(src, out, ob_ftype_find("Q4_0"), &p, NULL), OB_ERR_INVALID_ARG);
    CHECK(strstr(ob_last_error(), "attn_(k") != NULL);
}

TEST(imatrix_required_and_missing_quantizers) {
    const char *src = synth_path();
    if (!src) return;
    const char *out = tmp("refuse.gguf");
    const char *need[] = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "Q2_K_S"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        CHECK_EQ_INT(quantize(src, out, need[i], NULL), OB_ERR_INVALID_ARG);
        CHECK_MSG(strstr(ob_last_error(), "importance matrix") != NULL, "%s: %s", need[i], ob_last_error());
        CHECK(access(out, F_OK) != 0);
    }
    /* with an imatrix, the codebook mixes quantize (src/quant/iq_quant.c); under ASan none
     * here (kld_iq_synthetic quantizes IQ3_XXS, IQ2_XXS and IQ1_M with an imatrix there) */
    ob_imatrix *im = NULL;
    CHECK_OK(ob_imatrix_create(&im));
    ob_quantize_params p;
    ob_quantize_params_init(&p);
    p.imatrix = im;
    for (size_t i = 0; !TEST_SANITIZED && i + 1 < sizeof need / sizeof need[0]; i++)
        CHECK_MSG(ob_quantize_file(src, out, ob_ftype_find(need[i]), &p, NULL) == 0, "%s: %s", need[i],
                  ob_last_error());
    /* Q2_K_S has one: with an imatrix it runs */
    CHECK_OK(ob_quantize_file(src, out, ob_ftype_find("Q2_K_S"), &p, NULL));
    ob_imatrix_free(im);
}

TEST(sources_and_threads) {
    synth s = g_synth;
    s.n_layer = 2;
    const ob_type srcs[] = {OB_TYPE_F16, OB_TYPE_BF16, OB_TYPE_Q8_0};
    for (size_t i = 0; i < 3; i++) {
        s.type = srcs[i];
        const char *src = tmp("src.gguf"), *out = tmp("src-q4km.gguf");
        CHECK_OK(write_synth(src, &s));
        CHECK_OK(quantize(src, out, "Q4_K_M", NULL));
        /* the output is the reference quantizer applied to the dequantized source */
        ob_gguf *gi = NULL, *go = NULL;
        CHECK_OK(ob_gguf_open(src, &gi));
        CHECK_OK(ob_gguf_open(out, &go));
        const ob_gguf_tensor *ti = gi ? ob_gguf_find_tensor(gi, "blk.1.attn_q.weight") : NULL;
        const ob_gguf_tensor *to = go ? ob_gguf_find_tensor(go, "blk.1.attn_q.weight") : NULL;
        CHECK(ti && to && to->type == OB_TYPE_Q4_K);
        if (ti && to) {
            int64_t ne0 = ti->ne[0];
            float *row = ob_malloc((size_t)ne0 * sizeof(float));
            void *want = ob_malloc(to->nbytes);
            for (int64_t r = 0; r < ti->ne[1]; r++) {
                ob_type_get((int)ti->type)->to_float((const char *)ti->data + (size_t)r * ob_row_size(ti->type, ne0),
                                                     row, ne0);
                ob_type_get(OB_TYPE_Q4_K)->from_float_ref(row, (char *)want + (size_t)r * ob_row_size(OB_TYPE_Q4_K, ne0),
                                                          ne0);
            }
            CHECK_MSG(memcmp(want, to->data, to->nbytes) == 0, "source %s", ob_type_name((int)srcs[i]));
            ob_free(row);
            ob_free(want);
        }
        ob_gguf_free(gi);
        ob_gguf_free(go);
        ob_token tok[16];
        rand_tokens(tok, 16, s.n_vocab, 7);
        int V = 0;
        float *b = logits_of(out, tok, 16, &V);
        CHECK_MSG(b != NULL, "source %s: the output loads and runs", ob_type_name((int)srcs[i]));
        ob_free(b);
    }
    /* a K-quant source needs --allow-requantize */
    s.type = OB_TYPE_Q4_K;
    const char *src = tmp("src-q4k.gguf"), *out = tmp("requant.gguf");
    CHECK_OK(write_synth(src, &s));
    CHECK_EQ_INT(quantize(src, out, "Q8_0", NULL), OB_ERR_UNSUPPORTED);
    ob_quantize_params p;
    ob_quantize_params_init(&p);
    p.allow_requantize = true;
    CHECK_OK(ob_quantize_file(src, out, ob_ftype_find("Q8_0"), &p, NULL));
    /* threads change nothing in the bytes */
    const char *f32 = synth_path(), *o1 = tmp("t1.gguf"), *o2 = tmp("t2.gguf");
    p.allow_requantize = false;
    p.n_threads = 1;
    CHECK_OK(ob_quantize_file(f32, o1, ob_ftype_find("Q3_K_M"), &p, NULL));
    p.n_threads = 2;
    CHECK_OK(ob_quantize_file(f32, o2, ob_ftype_find("Q3_K_M"), &p, NULL));
    FILE *a = fopen(o1, "rb"), *b = fopen(o2, "rb");
    int same = a && b;
    for (int ca, cb; same;) {
        ca = fgetc(a);
        cb = fgetc(b);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (a) fclose(a);
    if (b) fclose(b);
    CHECK(same);
}

/* Every plain type and mix with a quantizer: the file loads and runs, and the
 * KL divergence from the F32 model falls as the bits grow. */
TEST(kld_ordered_by_bits_synthetic) {
    const char *src = synth_path();
    if (!src) return;
    enum { N = 64 };
    ob_token tok[N];
    rand_tokens(tok, N, g_synth.n_vocab, 99);
    int V = 0;
    float *ref = logits_of(src, tok, N, &V);
    CHECK(ref != NULL);
    if (!ref) return;
    const char *order[] = {"F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K"};
    double prev = -1;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *out = tmp("order.gguf");
        CHECK_OK(quantize(src, out, order[i], NULL));
        float *q = logits_of(out, tok, N, &V);
        CHECK(q != NULL);
        if (!q) continue;
        double k = mean_kld(ref, q, N, V, NULL);
        fprintf(stderr, "  synthetic %-7s KLD %.6f\n", order[i], k);
        CHECK_MSG(k > prev, "%s KLD %.6g not above the previous %.6g", order[i], k, prev);
        prev = k;
        ob_free(q);
    }
    /* the rest load and run with finite logits, and are not wildly off */
    const char *rest[] = {"BF16", "Q5_K_S", "Q5_1", "Q5_0", "Q4_K_S", "Q4_1", "Q4_0", "IQ4_NL", "IQ4_XS",
                          "Q3_K_L", "Q3_K_S", "TQ2_0", "TQ1_0", "MXFP4_MOE"};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
        const char *out = tmp("rest.gguf");
        CHECK_OK(quantize(src, out, rest[i], NULL));
        float *q = logits_of(out, tok, N, &V);
        CHECK_MSG(q != NULL, "%s", rest[i]);
        if (!q) continue;
        int finite = 1;
        for (size_t j = 0; j < (size_t)N * V; j++) finite &= isfinite(q[j]) != 0;
        CHECK_MSG(finite, "%s", rest[i]);
        double k = mean_kld(ref, q, N, V, NULL);
        fprintf(stderr, "  synthetic %-7s KLD %.6f\n", rest[i], k);
        ob_free(q);
    }
    ob_free(ref);
}

/* The codebook mixes on the synthetic model (an empty imatrix: every tensor
 * is searched with equal column weights). More bits, less divergence: every
 * IQ3 mix below every IQ2 mix, every IQ2 mix below every IQ1 mix, IQ3_XXS
 * no worse than Q2_K (2.6 bpw and more on attn_v/ffn_down/output). IQ1_M and
 * IQ1_S come out about equal here (2.84 vs 2.83), so they are not ordered.
 * Under ASan (TEST_SANITIZED) one mix of each family runs - IQ3_XXS, IQ2_XXS,
 * IQ1_M - and Q2_K, with the same order checks among them; the release stage
 * runs all ten. */
TEST(kld_iq_synthetic) {
    const char *src = synth_path();
    if (!src) return;
    enum { N = 64, M = 10 };
    ob_token tok[N];
    rand_tokens(tok, N, g_synth.n_vocab, 99);
    int V = 0;
    float *ref = logits_of(src, tok, N, &V);
    CHECK(ref != NULL);
    if (!ref) return;
    ob_imatrix *im = NULL;
    CHECK_OK(ob_imatrix_create(&im));
    ob_quantize_params p;
    ob_quantize_params_init(&p);
    p.n_threads = 1;
    p.imatrix = im;
    /* IQ3 mixes first (0..3), then IQ2 (4..7), IQ1 (8..9); Q2_K last */
    const char *mixes[M] = {"IQ3_M", "IQ3_S", "IQ3_XS", "IQ3_XXS", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S"};
    double k[M + 1] = {0};
    const bool light[M] = {false, false, false, true, false, false, false, true, true, false};
    for (int i = 0; i <= M; i++) {
        if (TEST_SANITIZED && i < M && !light[i]) continue;
        const char *mix = i < M ? mixes[i] : "Q2_K", *out = tmp("iq.gguf");
        CHECK_OK(quantize(src, out, mix, &p));
        float *q = logits_of(out, tok, N, &V);
        CHECK_MSG(q != NULL, "%s", mix);
        if (!q) continue;
        k[i] = mean_kld(ref, q, N, V, NULL);
        fprintf(stderr, "  synthetic %-7s KLD %.6f\n", mix, k[i]);
        CHECK_MSG(isfinite(k[i]), "%s", mix);
        ob_free(q);
    }
    for (int i = 0; i < 8; i++)
        for (int j = i < 4 ? 4 : 8; j < M; j++)
            if (!TEST_SANITIZED || (light[i] && light[j]))
                CHECK_MSG(k[i] < k[j], "%s KLD %.6g not below %s %.6g", mixes[i], k[i], mixes[j], k[j]);
    CHECK_MSG(k[3] <= k[M], "IQ3_XXS KLD %.6g above Q2_K %.6g", k[3], k[M]);
    ob_imatrix_free(im);
    ob_free(ref);
}

/* stories260K (rows of 64 and 172: the K-quants fall back to Q5_0/IQ4_NL/Q8_0). */
TEST(stories260K_types) {
    const char *src = stories();
    if (!src) {
        test_skip("../shared/models/stories260K absent");
        return;
    }
    enum { N = 96 };
    ob_token tok[N];
    rand_tokens(tok, N, 512, 5);
    tok[0] = 1;
    int V = 0;
    float *ref = logits_of(src, tok, N, &V);
    CHECK(ref != NULL);
    if (!ref) return;
    const char *order[] = {"F16", "Q8_0", "Q5_1", "Q4_0"};
    double prev = -1;
    for (size_t i = 0; i < 4; i++) {
        const char *out = tmp("stories.gguf");
        CHECK_OK(quantize(src, out, order[i], NULL));
        double same = 0;
        float *q = logits_of(out, tok, N, &V);
        if (!q) continue;
        double k = mean_kld(ref, q, N, V, &same);
        fprintf(stderr, "  stories260K %-5s KLD %.6f same top %.3f\n", order[i], k, same);
        CHECK_MSG(k > prev, "%s", order[i]);
        prev = k;
        ob_free(q);
    }
    ob_free(ref);
    /* rows of 64 and 172: the fallbacks llama.cpp uses (checked byte for byte against it) */
    const struct { const char *mix; ob_type q, down; } fb[] = {
        {"Q2_K", OB_TYPE_Q4_0, OB_TYPE_F16},   {"Q3_K_S", OB_TYPE_Q4_0, OB_TYPE_F16},
        {"Q4_K_M", OB_TYPE_Q5_0, OB_TYPE_F16}, {"Q5_K_S", OB_TYPE_Q5_1, OB_TYPE_F16},
        {"Q6_K", OB_TYPE_Q8_0, OB_TYPE_F16},   {"IQ4_XS", OB_TYPE_IQ4_NL, OB_TYPE_F16},
        {"TQ1_0", OB_TYPE_Q4_0, OB_TYPE_F16},
    };
    for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++) {
        const char *out = tmp("fallback.gguf");
        CHECK_OK(quantize(src, out, fb[i].mix, NULL));
        ob_gguf *g = NULL;
        CHECK_OK(ob_gguf_open(out, &g));
        if (!g) continue;
        CHECK_MSG(type_of(g, "blk.0.attn_q.weight") == fb[i].q, "%s", fb[i].mix);
        CHECK_MSG(type_of(g, "blk.0.ffn_down.weight") == fb[i].down, "%s", fb[i].mix);
        CHECK_MSG(type_of(g, "output.weight") == OB_TYPE_Q8_0, "%s", fb[i].mix); /* 64 % 256: Q8_0 */
        ob_gguf_free(g);
    }
}

/* The transformers fixtures: converted to F32 here, then quantized. */
TEST(fixture_models) {
    const char *cases[] = {"llama", "qwen3"};
    for (size_t c = 0; c < 2; c++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/tests/data/models/%s", OB_SOURCE_DIR, cases[c]);
        const char *f32 = tmp("fixture-f32.gguf");
        ob_convert_opts o;
        ob_convert_opts_init(&o);
        o.outtype = OB_TYPE_F32;
        CHECK_OK(ob_convert_hf(dir, f32, &o));
        enum { N = 48 };
        ob_token tok[N];
        rand_tokens(tok, N, 384, 11);
        int V = 0;
        float *ref = logits_of(f32, tok, N, &V);
        if (!ref) continue;
        const char *order[] = {"Q8_0", "Q5_0", "Q4_0"};
        double prev = -1;
        for (size_t i = 0; i < 3; i++) {
            const char *out = tmp("fixture-q.gguf");
            CHECK_OK(quantize(f32, out, order[i], NULL));
            float *q = logits_of(out, tok, N, &V);
            if (!q) continue;
            double same = 0, k = mean_kld(ref, q, N, V, &same);
            fprintf(stderr, "  %s %-5s KLD %.6f same top %.3f\n", cases[c], order[i], k, same);
            CHECK_MSG(k > prev, "%s %s", cases[c], order[i]);
            prev = k;
            ob_free(q);
        }
        ob_free(ref);
    }
}

/* `1bit perplexity` equals exp(mean NLL) computed here from the logits. */
TEST(perplexity_cli_matches_direct) {
    const char *src = stories();
    if (!src) {
        test_skip("../shared/models/stories260K absent");
        return;
    }
    static char out[1 << 16];
    char args[8192];
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c 128 --chunks 3 -t 1", src, story_text());
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    double cli = parse_after(out, "Final estimate: PPL = ");
    CHECK(strstr(out, "[1]") && strstr(out, "[3]") && strstr(out, "+/-"));

    ob_model *m = NULL;
    ob_model_params mp = ob_model_default_params();
    CHECK_OK(ob_model_load(src, &mp, &m));
    if (!m) return;
    FILE *f = fopen(story_text(), "rb");
    static char text[1 << 16];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    static ob_token all[1 << 15];
    int32_t n_all = 0;
    CHECK_OK(ob_tokenize(m, text, len, true, false, all, 1 << 15, &n_all));
    ob_model_free(m);
    double nll = 0;
    int cnt = 0;
    for (int c = 0; c < 3; c++) {
        ob_token chunk[128];
        memcpy(chunk, all + c * 128, sizeof chunk);
        chunk[0] = 1; /* BOS */
        int V = 0;
        float *lg = logits_of(src, chunk, 128, &V);
        if (!lg) return;
        float *lp = ob_malloc((size_t)V * sizeof(float));
        for (int i = 64; i < 127; i++) {
            ob_log_softmax(lg + (size_t)i * V, V, lp);
            nll -= lp[chunk[i + 1]];
            cnt++;
        }
        ob_free(lp);
        ob_free(lg);
    }
    double direct = exp(nll / cnt);
    fprintf(stderr, "  perplexity: cli %.4f direct %.6f\n", cli, direct);
    CHECK_NEAR(cli, direct, 1e-4 * direct + 5e-5);
}

/* A vocabulary that has a BOS id but does not add it (GPT-2's; the gpt2
 * fixture): llama-perplexity leaves each chunk's first token alone there,
 * and so must we (replacing it with BOS changed every chunk). The CLI's
 * perplexity equals exp(mean NLL) of the chunks as tokenized. */
TEST(perplexity_no_bos_vocab) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tests/data/models/gpt2", OB_SOURCE_DIR);
    if (access(dir, R_OK) != 0) {
        test_skip("tests/data/models/gpt2 absent");
        return;
    }
    const char *conv = tmp("gpt2-conv.gguf"), *f32 = tmp("gpt2-f32.gguf");
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_F32;
    CHECK_OK(ob_convert_hf(dir, conv, &o));
    /* the fixture's tokenizer adds BOS; the same model with add_bos_token
     * false is what GPT-2 style vocabularies look like (llama.cpp's gpt-2
     * vocab has no such flag set) */
    ob_gguf *src = NULL;
    CHECK_OK(ob_gguf_open(conv, &src));
    if (!src) return;
    ob_gguf_writer *w = NULL;
    CHECK_OK(ob_gguf_writer_create(&w));
    for (int64_t i = 0; w && i < ob_gguf_n_kv(src); i++) {
        const ob_gguf_kv *kv = ob_gguf_kv_at(src, i);
        CHECK_OK(ob_gguf_writer_set_value(w, kv->key, &kv->value));
    }
    CHECK_OK(ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false));
    for (int64_t i = 0; w && i < ob_gguf_n_tensors(src); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(src, i);
        CHECK_OK(ob_gguf_writer_add_tensor(w, t->name, t->type, (int)t->n_dims, t->ne, t->data));
    }
    CHECK_OK(ob_gguf_writer_write_file(w, f32));
    ob_gguf_writer_free(w);
    ob_gguf_free(src);
    ob_model *m = NULL;
    ob_model_params mp = ob_model_default_params();
    CHECK_OK(ob_model_load(f32, &mp, &m));
    if (!m) return;
    ob_token e[2];
    int32_t ne = -1;
    CHECK_OK(ob_tokenize(m, "", 0, true, false, e, 2, &ne));
    CHECK_EQ_INT(ne, 0); /* adds no BOS */
    const ob_token bos = ob_token_bos(m);
    CHECK(bos >= 0);
    FILE *f = fopen(story_text(), "rb");
    static char text[1 << 16];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    static ob_token all[1 << 15];
    int32_t n_all = 0;
    CHECK_OK(ob_tokenize(m, text, len, true, false, all, 1 << 15, &n_all));
    ob_model_free(m);
    enum { C = 64, NCH = 2 };
    CHECK(n_all >= C * NCH);
    if (n_all < C * NCH) return;
    double nll = 0;
    int cnt = 0;
    for (int c = 0; c < NCH; c++) {
        ob_token chunk[C];
        memcpy(chunk, all + c * C, sizeof chunk);
        CHECK(chunk[0] != bos);
        int V = 0;
        float *lg = logits_of(f32, chunk, C, &V);
        if (!lg) return;
        float *lp = ob_malloc((size_t)V * sizeof(float));
        for (int i = C / 2; i < C - 1; i++) {
            ob_log_softmax(lg + (size_t)i * V, V, lp);
            nll -= lp[chunk[i + 1]];
            cnt++;
        }
        ob_free(lp);
        ob_free(lg);
    }
    static char out[1 << 16];
    char args[8192];
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c %d --chunks %d -t 1", f32, story_text(), C, NCH);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    double cli = parse_after(out, "Final estimate: PPL = "), direct = exp(nll / cnt);
    fprintf(stderr, "  perplexity without BOS: cli %.4f direct %.6f\n", cli, direct);
    CHECK_NEAR(cli, direct, 1e-4 * direct + 5e-5);
}


TEST(kld_cli_save_and_compare) {
    const char *src = stories();
    if (!src) {
        test_skip("../shared/models/stories260K absent");
        return;
    }
    static char out[1 << 16];
    char args[8192];
    const char *base = tmp("base.bin"), *q8 = tmp("kld-q8.gguf"), *q4 = tmp("kld-q4.gguf");
    snprintf(args, sizeof args, "kld --save-base '%s' -m '%s' -f '%s' -c 128 --chunks 4 -t 1", base, src, story_text());
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    double ppl_save = parse_after(out, "PPL(base): ");
    snprintf(args, sizeof args, "quantize '%s' '%s' Q8_0 && '%s' quantize '%s' '%s' Q4_0", src, q8, OB_CLI_PATH, src, q4);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "kld --base '%s' -m '%s' -t 1", base, src);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    double k_self = parse_after(out, "Mean KLD: ");
    CHECK_NEAR(parse_after(out, "PPL(base): "), ppl_save, 1e-4 * ppl_save);
    CHECK(k_self < 1e-4); /* only the 16-bit storage of the base differs */
    CHECK(parse_after(out, "Same top token: ") == 100.0);
    snprintf(args, sizeof args, "kld --base '%s' -m '%s' -t 1", base, q8);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    double k8 = parse_after(out, "Mean KLD: ");
    CHECK(strstr(out, "Median KLD: ") && strstr(out, "99% KLD: ") && strstr(out, "Max KLD: ") &&
          strstr(out, "Delta PPL: "));
    snprintf(args, sizeof args, "kld --base '%s' -m '%s' -t 1", base, q4);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    double k4 = parse_after(out, "Mean KLD: ");
    /* --act-bits: 4-bit activations on the Q4_0 projections cost accuracy; 8 is this file's default */
    snprintf(args, sizeof args, "kld --base '%s' -m '%s' -t 1 --act-bits 4", base, q4);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    double k4a4 = parse_after(out, "Mean KLD: ");
    snprintf(args, sizeof args, "kld --base '%s' -m '%s' -t 1 --act-bits 8", base, q4);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    CHECK(parse_after(out, "Mean KLD: ") == k4);
    fprintf(stderr, "  kld cli: self %.6f q8_0 %.6f q4_0 %.6f q4_0 W4A4 %.6f\n", k_self, k8, k4, k4a4);
    CHECK(k_self < k8 && k8 < k4 && k4 < k4a4);
    snprintf(args, sizeof args, "kld --base '%s' -m '%s' --act-bits 3", base, q4);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 1);
    /* a model with another vocabulary is refused */
    synth sv = g_synth;
    sv.n_layer = 1;
    sv.n_vocab = 256;
    const char *other = tmp("vocab256.gguf");
    CHECK_OK(write_synth(other, &sv));
    snprintf(args, sizeof args, "kld --base '%s' -m '%s'", base, other);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 1);
    CHECK(strstr(out, "vocabulary") != NULL);
}

/* The importance-weighted quantizers spend their error where the weights
 * are small: weighted error below the reference quantizer's, plain error
 * still comparable. */
TEST(weighted_quantizers) {
    const ob_type types[] = {OB_TYPE_Q4_0, OB_TYPE_Q5_0, OB_TYPE_IQ4_NL, OB_TYPE_Q4_1, OB_TYPE_Q5_1,
                             OB_TYPE_IQ4_XS, OB_TYPE_Q2_K, OB_TYPE_Q3_K, OB_TYPE_Q4_K, OB_TYPE_Q5_K,
                             OB_TYPE_Q6_K};
    enum { N = 4096 };
    static float x[N], qw[N], y[N];
    static uint8_t q[N * 2];
    uint64_t rng = 42;
    for (int i = 0; i < N; i++) {
        x[i] = test_rand_normal(&rng) * (i % 97 == 0 ? 8.0f : 1.0f);
        qw[i] = expf(2 * test_rand_normal(&rng)); /* log-normal importance, as real imatrices */
    }
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const ob_type_traits *tr = ob_type_get((int)types[k]);
        CHECK(ob_quantize_has_weighted(types[k]));
        double ew[2] = {0}, e[2] = {0}, sx = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 0) tr->from_float_ref(x, q, N);
            else CHECK(ob_quantize_row_weighted(types[k], x, q, N, qw));
            tr->to_float(q, y, N);
            for (int i = 0; i < N; i++) {
                double d = (double)x[i] - y[i];
                ew[pass] += qw[i] * d * d;
                e[pass] += d * d;
                if (pass == 0) sx += (double)x[i] * x[i];
            }
        }
        fprintf(stderr, "  %-7s weighted err: ref %.5g weighted %.5g; NMSE ref %.5g weighted %.5g\n", tr->name,
                ew[0], ew[1], e[0] / sx, e[1] / sx);
        CHECK_MSG(ew[1] < ew[0], "%s", tr->name);
        CHECK_MSG(e[1] / sx < 3 * e[0] / sx, "%s", tr->name); /* not a broken packing (those are 10x off) */
    }
    CHECK(!ob_quantize_row_weighted(OB_TYPE_Q8_0, x, q, N, qw));
    /* an imatrix of zeros (dead columns) still gives a usable row */
    static float zw[N];
    const ob_type zt[] = {OB_TYPE_Q4_1, OB_TYPE_Q5_1, OB_TYPE_IQ4_XS};
    for (size_t k = 0; k < sizeof zt / sizeof zt[0]; k++) {
        CHECK(ob_quantize_row_weighted(zt[k], x, q, N, zw));
        ob_type_get((int)zt[k])->to_float(q, y, N);
        double e = 0, sx = 0;
        for (int i = 0; i < N; i++) {
            e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            sx += (double)x[i] * x[i];
        }
        CHECK_MSG(e < 0.1 * sx, "%s with zero importance: NMSE %.3g", ob_type_name((int)zt[k]), e / sx);
    }
}

TEST(imatrix_file_roundtrip) {
    ob_imatrix *m = NULL;
    CHECK_OK(ob_imatrix_create(&m));
    ob_imatrix_entry *e = NULL;
    uint64_t rng = 3;
    float x[3 * 64];
    for (int i = 0; i < 3 * 64; i++) x[i] = test_rand_f32(&rng);
    CHECK_OK(ob_imatrix_entry_get(m, "blk.0.attn_q.weight", 64, 1, &e));
    ob_imatrix_entry_add(e, 0, x, 3);
    CHECK_OK(ob_imatrix_entry_get(m, "blk.0.ffn_down_exps.weight", 32, 4, &e));
    ob_imatrix_entry_add(e, 2, x, 2);
    CHECK_EQ_INT(ob_imatrix_entry_get(m, "blk.0.attn_q.weight", 32, 1, &e), OB_ERR_FORMAT);
    CHECK_OK(ob_imatrix_add_dataset(m, "story.txt"));
    m->chunk_count = 5;
    m->chunk_size = 128;
    const char *path = tmp("im.gguf");
    CHECK_OK(ob_imatrix_save(m, path));
    /* the layout llama.cpp reads */
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open(path, &g));
    if (g) {
        const char *t = NULL;
        uint32_t cc = 0;
        CHECK_OK(ob_gguf_get_str(g, "general.type", &t));
        CHECK_EQ_STR(t, "imatrix");
        CHECK_OK(ob_gguf_get_u32(g, "imatrix.chunk_count", &cc));
        CHECK_EQ_INT(cc, 5);
        const ob_gguf_array *ds = NULL;
        CHECK_OK(ob_gguf_get_arr(g, "imatrix.datasets", OB_GGUF_STRING, &ds));
        const ob_gguf_tensor *s = ob_gguf_find_tensor(g, "blk.0.ffn_down_exps.weight.in_sum2");
        const ob_gguf_tensor *c = ob_gguf_find_tensor(g, "blk.0.ffn_down_exps.weight.counts");
        CHECK(s && c && s->type == OB_TYPE_F32 && s->ne[0] == 32 && s->ne[1] == 4 && c->ne[0] == 1 && c->ne[1] == 4);
        if (c) CHECK(((const float *)c->data)[2] == 2.0f && ((const float *)c->data)[0] == 0.0f);
        ob_gguf_free(g);
    }
    ob_imatrix *r = NULL;
    CHECK_OK(ob_imatrix_load(path, &r));
    if (r) {
        CHECK_EQ_INT(r->n, 2);
        CHECK_EQ_INT(r->chunk_size, 128);
        CHECK(r->n_datasets == 1 && !strcmp(r->datasets[0], "story.txt"));
        const ob_imatrix_entry *a = ob_imatrix_find(m, "blk.0.attn_q.weight"), *b = ob_imatrix_find(r, "blk.0.attn_q.weight");
        CHECK(a && b);
        float wa[64], wb[64];
        if (a && b) {
            CHECK(ob_imatrix_weights(a, 0, wa) && ob_imatrix_weights(b, 0, wb));
            for (int j = 0; j < 64; j++) CHECK_NEAR(wa[j], wb[j], 1e-6 * wa[j]);
            double want = ((double)x[5] * x[5] + (double)x[69] * x[69] + (double)x[133] * x[133]) / 3;
            CHECK_NEAR(wb[5], want, 1e-6);
        }
        const ob_imatrix_entry *ex = ob_imatrix_find(r, "blk.0.ffn_down_exps.weight");
        CHECK(ex && !ob_imatrix_weights(ex, 0, wa) && ob_imatrix_weights(ex, 2, wa));
        ob_imatrix_free(r);
    }
    ob_imatrix_free(m);
    /* not an imatrix */
    CHECK_EQ_INT(ob_imatrix_load(synth_path(), &r), OB_ERR_FORMAT);
}

/* An imatrix written the way llama-imatrix writes it, by our GGUF writer and
 * not by ob_imatrix_save: general.type = "imatrix", imatrix.datasets /
 * chunk_count / chunk_size, and per weight, in sorted name order,
 * "<name>.in_sum2" F32 [n_in, 1] (sum of x^2 over the tokens, in float) and
 * "<name>.counts" F32 [1, 1] (the tokens). The quantizer must read it as
 * in_sum2 / counts: the same bytes as an in-memory imatrix of those means,
 * different bytes from no imatrix, and a lower importance-weighted error. */
static float im_mean(int64_t tensor, int64_t j) {
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(tensor + 1) + (uint64_t)j * 0xbf58476d1ce4e5b9ull;
    return expf(1.5f * test_rand_normal(&s)); /* log-normal, as real activations' mean squares are */
}

TEST(imatrix_llama_layout_used) {
    const char *src = synth_path();
    if (!src) return;
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open(src, &g));
    if (!g) return;
    enum { MAXT = 64 };
    const char *names[MAXT];
    int64_t n_in[MAXT];
    int nt = 0;
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        if (t->n_dims == 2 && !strncmp(t->name, "blk.", 4) && nt < MAXT) {
            names[nt] = t->name;
            n_in[nt++] = t->ne[0];
        }
    }
    CHECK_EQ_INT(nt, 8 * 7);
    /* llama.cpp stores the names sorted (std::sort) */
    for (int a = 1; a < nt; a++)
        for (int b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
            const char *tn = names[b];
            names[b] = names[b - 1];
            names[b - 1] = tn;
            int64_t tk = n_in[b];
            n_in[b] = n_in[b - 1];
            n_in[b - 1] = tk;
        }
    ob_gguf_writer *w = NULL;
    CHECK_OK(ob_gguf_writer_create(&w));
    const char *ds[] = {"calibration.txt"};
    CHECK_OK(ob_gguf_writer_set_str(w, "general.type", "imatrix"));
    CHECK_OK(ob_gguf_writer_set_arr_str(w, "imatrix.datasets", ds, 1));
    CHECK_OK(ob_gguf_writer_set_u32(w, "imatrix.chunk_count", 3));
    CHECK_OK(ob_gguf_writer_set_u32(w, "imatrix.chunk_size", 512));
    ob_imatrix *mem = NULL; /* the same means, counts 1 */
    CHECK_OK(ob_imatrix_create(&mem));
    float *bufs[2 * MAXT] = {0};
    const float count = 1536.0f; /* 3 chunks of 512 tokens */
    for (int i = 0; i < nt && mem; i++) {
        float *s = bufs[2 * i] = ob_malloc((size_t)n_in[i] * sizeof(float));
        float *c = bufs[2 * i + 1] = ob_malloc(sizeof(float));
        ob_imatrix_entry *e = NULL;
        CHECK_OK(ob_imatrix_entry_get(mem, names[i], n_in[i], 1, &e));
        for (int64_t j = 0; j < n_in[i]; j++) {
            s[j] = im_mean(i, j) * count;
            if (e) e->sum2[j] = (double)s[j] / (double)count; /* what the loader's sum2 / counts gives */
        }
        c[0] = count;
        if (e) e->counts[0] = 1;
        char nm[256];
        int64_t ne_s[2] = {n_in[i], 1}, ne_c[2] = {1, 1};
        snprintf(nm, sizeof nm, "%s.in_sum2", names[i]);
        CHECK_OK(ob_gguf_writer_add_tensor(w, nm, OB_TYPE_F32, 2, ne_s, s));
        snprintf(nm, sizeof nm, "%s.counts", names[i]);
        CHECK_OK(ob_gguf_writer_add_tensor(w, nm, OB_TYPE_F32, 2, ne_c, c));
    }
    const char *imf = tmp("llama-layout-imatrix.gguf");
    CHECK_OK(ob_gguf_writer_write_file(w, imf));
    ob_gguf_writer_free(w);
    for (int i = 0; i < 2 * nt; i++) ob_free(bufs[i]);

    ob_imatrix *im = NULL;
    CHECK_OK(ob_imatrix_load(imf, &im));
    if (!im || !mem) {
        ob_imatrix_free(im);
        ob_imatrix_free(mem);
        ob_gguf_free(g);
        return;
    }
    CHECK_EQ_INT(im->n, nt);
    CHECK(im->chunk_count == 3 && im->chunk_size == 512 && im->n_datasets == 1 &&
          !strcmp(im->datasets[0], "calibration.txt"));
    float wv[512];
    const ob_imatrix_entry *e0 = ob_imatrix_find(im, "blk.3.ffn_down.weight");
    CHECK(e0 && e0->n_per_row == 512 && ob_imatrix_weights(e0, 0, wv));
    for (int i = 0; e0 && i < nt; i++) /* the weights are in_sum2 / counts */
        if (!strcmp(names[i], e0->name))
            for (int64_t j = 0; j < 512; j++) CHECK_NEAR(wv[j], im_mean(i, j), 1e-6 * im_mean(i, j));

    /* quantize: with the file, with the in-memory means, without */
    /* under ASan Q4_0, Q4_1 and IQ4_XS (kld_iq_synthetic takes the codebook quantizers there) */
    const char *mixes[] = {"Q4_0", "IQ3_XXS", "Q4_1", "Q5_1", "IQ4_XS"};
    for (size_t k = 0; k < sizeof mixes / sizeof mixes[0]; k += TEST_SANITIZED ? 2 : 1) {
        const char *o_file = tmp("im-file.gguf"), *o_mem = tmp("im-mem.gguf"), *o_none = tmp("im-none.gguf");
        ob_quantize_params p;
        ob_quantize_params_init(&p);
        p.n_threads = 1;
        p.pure = true;
        ob_quantize_stats st = {0};
        p.imatrix = im;
        CHECK_OK(ob_quantize_file(src, o_file, ob_ftype_find(mixes[k]), &p, &st));
        CHECK_MSG(st.n_imatrix == nt, "%s: %lld tensors used weights, want %d", mixes[k], (long long)st.n_imatrix, nt);
        p.imatrix = mem;
        CHECK_OK(ob_quantize_file(src, o_mem, ob_ftype_find(mixes[k]), &p, NULL));
        p.imatrix = NULL;
        CHECK_OK(ob_quantize_file(src, o_none, ob_ftype_find(mixes[k]), &p, NULL));
        ob_gguf *gf = NULL, *gm = NULL, *gn = NULL;
        CHECK_OK(ob_gguf_open(o_file, &gf));
        CHECK_OK(ob_gguf_open(o_mem, &gm));
        CHECK_OK(ob_gguf_open(o_none, &gn));
        if (!gf || !gm || !gn) {
            ob_gguf_free(gf);
            ob_gguf_free(gm);
            ob_gguf_free(gn);
            continue;
        }
        int same_mem = 0, same_none = 0, ref_none = 0, n_ref = 0;
        double err_im = 0, err_none = 0; /* sum over tensors of sum_j imatrix_j (x - q)^2 */
        for (int i = 0; i < nt; i++) {
            const ob_gguf_tensor *tf = ob_gguf_find_tensor(gf, names[i]), *tm = ob_gguf_find_tensor(gm, names[i]),
                                 *tn = ob_gguf_find_tensor(gn, names[i]), *tx = ob_gguf_find_tensor(g, names[i]);
            if (!tf || !tm || !tn || !tx) {
                CHECK_MSG(0, "%s missing", names[i]);
                continue;
            }
            same_mem += tf->nbytes == tm->nbytes && !memcmp(tf->data, tm->data, tf->nbytes);
            same_none += tf->nbytes == tn->nbytes && !memcmp(tf->data, tn->data, tf->nbytes);
            const int64_t n = tx->ne[0], rows = tx->ne[1];
            /* without an imatrix a type with a reference quantizer keeps the reference's bytes */
            const ob_type_traits *trn = ob_type_get((int)tn->type);
            if (trn->from_float_ref) {
                const size_t rb = ob_row_size(tn->type, n);
                uint8_t *want = ob_malloc(rb);
                int same = want != NULL;
                for (int64_t r = 0; want && same && r < rows; r++) {
                    trn->from_float_ref((const float *)tx->data + r * n, want, n);
                    same = !memcmp(want, (const char *)tn->data + (size_t)r * rb, rb);
                }
                ob_free(want);
                n_ref++;
                ref_none += same;
            }
            float *yf = ob_malloc((size_t)n * sizeof(float)), *yn = ob_malloc((size_t)n * sizeof(float));
            const ob_type_traits *tr = ob_type_get((int)tf->type);
            for (int64_t r = 0; yf && yn && r < rows; r++) {
                const float *x = (const float *)tx->data + r * n;
                tr->to_float((const char *)tf->data + (size_t)r * ob_row_size(tf->type, n), yf, n);
                tr->to_float((const char *)tn->data + (size_t)r * ob_row_size(tn->type, n), yn, n);
                for (int64_t j = 0; j < n; j++) {
                    double q = im_mean(i, j);
                    err_im += q * (x[j] - yf[j]) * (x[j] - yf[j]);
                    err_none += q * (x[j] - yn[j]) * (x[j] - yn[j]);
                }
            }
            ob_free(yf);
            ob_free(yn);
        }
        CHECK_MSG(same_mem == nt, "%s: %d of %d tensors equal to the in-memory imatrix's", mixes[k], same_mem, nt);
        CHECK_MSG(ref_none == n_ref, "%s: %d of %d tensors without an imatrix equal to the reference quantizer's",
                  mixes[k], ref_none, n_ref);
        {   /* the weighted file loads and runs */
            ob_token tok[8];
            rand_tokens(tok, 8, g_synth.n_vocab, 11);
            int V = 0;
            float *lg = logits_of(o_file, tok, 8, &V);
            CHECK_MSG(lg != NULL, "%s: the file made with the imatrix runs", mixes[k]);
            for (int64_t j = 0; lg && j < 8 * (int64_t)V; j++)
                if (!isfinite(lg[j])) {
                    CHECK_MSG(0, "%s: logit %lld not finite", mixes[k], (long long)j);
                    break;
                }
            ob_free(lg);
        }
        CHECK_MSG(same_none == 0, "%s: %d tensors unchanged by the imatrix", mixes[k], same_none);
        CHECK_MSG(err_im < 0.9 * err_none, "%s: weighted error %.4g with the file, %.4g without", mixes[k], err_im,
                  err_none);
        printf("  %s: importance-weighted error %.4g with the llama-layout imatrix, %.4g without\n", mixes[k],
               err_im, err_none);
        ob_gguf_free(gf);
        ob_gguf_free(gm);
        ob_gguf_free(gn);
    }
    ob_imatrix_free(im);
    ob_imatrix_free(mem);
    ob_gguf_free(g);
}

/* `1bit imatrix` on stories260K: the file loads, q/k/v (same input) agree,
 * counts are the tokens run, and quantizing with it works. */
TEST(imatrix_cli) {
    const char *src = stories();
    if (!src) {
        test_skip("../shared/models/stories260K absent");
        return;
    }
    static char out[1 << 16];
    char args[8192];
    const char *im = tmp("stories-imatrix.gguf");
    snprintf(args, sizeof args, "imatrix -m '%s' -f '%s' -c 128 --chunks 4 -o '%s' -t 1", src, story_text(), im);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    ob_imatrix *m = NULL;
    CHECK_OK(ob_imatrix_load(im, &m));
    if (!m) return;
    CHECK_EQ_INT(m->chunk_count, 4);
    CHECK_EQ_INT(m->n, 5 * 7); /* 7 matrices per layer; the output is skipped */
    CHECK(ob_imatrix_find(m, "output.weight") == NULL);
    const ob_imatrix_entry *q = ob_imatrix_find(m, "blk.2.attn_q.weight"), *k = ob_imatrix_find(m, "blk.2.attn_k.weight"),
                           *d = ob_imatrix_find(m, "blk.2.ffn_down.weight");
    CHECK(q && k && d);
    if (q && k && d) {
        CHECK_EQ_INT(q->n_per_row, 64);
        CHECK_EQ_INT(d->n_per_row, 172);
        CHECK(q->counts[0] == 4 * 128);
        for (int j = 0; j < 64; j++) CHECK_NEAR(q->sum2[j], k->sum2[j], 1e-9 * q->sum2[j]);
        double s = 0;
        for (int j = 0; j < 64; j++) s += q->sum2[j];
        CHECK(s > 0);
    }
    ob_imatrix_free(m);
    const char *q4 = tmp("stories-im-q4_0.gguf");
    snprintf(args, sizeof args, "quantize --imatrix '%s' '%s' '%s' Q4_0", im, src, q4);
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    CHECK(strstr(out, "with importance weights") != NULL);
}

typedef struct obs_state {
    ob_imatrix *im;
    int rc;
} obs_state;

static void observe(void *user, const char *name, int32_t mat, int32_t n_mat, const float *x, int64_t n_in, int64_t n) {
    obs_state *s = user;
    ob_imatrix_entry *e = NULL;
    if (s->rc == 0) s->rc = ob_imatrix_entry_get(s->im, name, n_in, n_mat, &e);
    if (s->rc == 0) ob_imatrix_entry_add(e, mat, x, n);
}

/* Mixture of experts (the qwen3moe fixture: 8 experts, 2 per token): the
 * observer sees each expert as its own matrix, so the imatrix has one row
 * per expert and the counts add up to tokens x experts used; quantizing
 * with it works; the rotation is exact for experts too. */
TEST(moe_imatrix_and_rotation) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tests/data/models/qwen3moe", OB_SOURCE_DIR);
    if (access(dir, R_OK) != 0) {
        test_skip("tests/data/models/qwen3moe absent");
        return;
    }
    const char *f32 = tmp("moe-f32.gguf"), *rot = tmp("moe-rot.gguf"), *q4 = tmp("moe-q4.gguf");
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_F32;
    CHECK_OK(ob_convert_hf(dir, f32, &o));
    enum { N = 40 };
    ob_token tok[N];
    rand_tokens(tok, N, 384, 21);
    ob_model *m = NULL;
    ob_model_params mp = ob_model_default_params();
    CHECK_OK(ob_model_load(f32, &mp, &m));
    if (!m) return;
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = N;
    cp.n_batch = N;
    cp.n_threads = 1;
    ob_context *ctx = NULL;
    CHECK_OK(ob_context_create(m, &cp, &ctx));
    obs_state st = {0};
    CHECK_OK(ob_imatrix_create(&st.im));
    if (ctx && st.im) {
        CHECK_OK(ob_context_set_matmul_observer(ctx, observe, &st));
        int32_t pos[N], seq[N] = {0};
        for (int i = 0; i < N; i++) pos[i] = i;
        ob_batch b = {N, tok, pos, seq, NULL};
        CHECK_OK(ob_decode(ctx, &b));
        CHECK_OK(st.rc);
        const ob_imatrix_entry *e = ob_imatrix_find(st.im, "blk.1.ffn_gate_exps.weight");
        const ob_imatrix_entry *q = ob_imatrix_find(st.im, "blk.1.attn_q.weight");
        CHECK(e && q);
        if (e && q) {
            CHECK_EQ_INT(e->n_mat, 8);
            CHECK_EQ_INT(e->n_per_row, 64);
            double total = 0;
            for (int k = 0; k < 8; k++) total += e->counts[k];
            CHECK_EQ_INT((long long)total, N * 2); /* each token goes to 2 experts */
            CHECK_EQ_INT((long long)q->counts[0], N);
        }
        const char *imp = tmp("moe-im.gguf");
        CHECK_OK(ob_imatrix_save(st.im, imp));
        ob_imatrix *im = NULL;
        CHECK_OK(ob_imatrix_load(imp, &im));
        ob_quantize_params p;
        ob_quantize_params_init(&p);
        p.n_threads = 1;
        p.imatrix = im;
        ob_quantize_stats qs;
        CHECK_OK(ob_quantize_file(f32, q4, ob_ftype_find("Q4_0"), &p, &qs));
        CHECK(qs.n_imatrix > 0);
        ob_imatrix_free(im);
        p.imatrix = NULL;
        p.hadamard = true;
        CHECK_OK(ob_quantize_file(f32, rot, ob_ftype_find("F32"), &p, NULL));
    }
    ob_imatrix_free(st.im);
    ob_context_free(ctx);
    ob_model_free(m);
    int V = 0;
    float *a = logits_of(f32, tok, N, &V), *r = logits_of(rot, tok, N, &V);
    CHECK(a && r);
    if (a && r) CHECK(mean_kld(a, r, N, V, NULL) < 1e-6);
    ob_free(a);
    ob_free(r);
}

TEST(hadamard_rotation_is_orthogonal) {
    uint64_t rng = 17;
    enum { N = 96 };
    float x[N], w[N], xr[N], wr[N];
    for (int i = 0; i < N; i++) {
        x[i] = test_rand_normal(&rng) * (i == 7 ? 30.0f : 1.0f);
        w[i] = test_rand_normal(&rng);
    }
    memcpy(xr, x, sizeof x);
    memcpy(wr, w, sizeof w);
    ob_hadamard_rotate_rows(xr, N, 1, 5);
    ob_hadamard_rotate_rows(wr, N, 1, 5);
    double d0 = 0, d1 = 0, m0 = 0, m1 = 0;
    for (int i = 0; i < N; i++) {
        d0 += (double)x[i] * w[i];
        d1 += (double)xr[i] * wr[i];
    }
    for (int i = 0; i < 32; i++) {
        m0 = fmax(m0, fabs(x[i]));
        m1 = fmax(m1, fabs(xr[i]));
    }
    CHECK_NEAR(d0, d1, 1e-4 * (fabs(d0) + 1));
    CHECK(m1 < m0 / 2); /* the outlier's energy is spread over its block */
    ob_hadamard_unrotate_rows(xr, N, 1, 5);
    for (int i = 0; i < N; i++) CHECK_NEAR(xr[i], x[i], 1e-5 * (fabs(x[i]) + 1));
    /* the run-time form (a sign table for the widest row) gives the same bits, narrower rows too */
    float sg[N], a[N], b[N];
    ob_hadamard_signs(sg, N, 5);
    for (int n = 32; n <= N; n += 32) {
        memcpy(a, w, sizeof w);
        memcpy(b, w, sizeof w);
        ob_hadamard_rotate_rows(a, n, 1, 5);
        ob_hadamard_rotate_rows_with(b, n, 1, sg);
        CHECK(memcmp(a, b, (size_t)n * sizeof(float)) == 0);
    }
    CHECK(ob_hadamard_applies("blk.3.ffn_down.weight", 256));
    CHECK(!ob_hadamard_applies("blk.3.ffn_down.weight", 172));
    CHECK(!ob_hadamard_applies("output.weight", 256));
    CHECK(!ob_hadamard_applies("blk.0.ffn_gate_inp.weight", 256));
}

/* The exact path: rotate the weights, keep them F32; the stamped file's
 * logits equal the source's within float rounding. Without the stamp the
 * same weights give other logits (so the stamp is what rotates). */
TEST(hadamard_exact_path_and_stamp) {
    synth s = g_synth;
    s.n_layer = 2;
    s.outlier_cols = 3;
    const char *src = tmp("had-src.gguf"), *rot = tmp("had-f32.gguf"), *q4 = tmp("had-q4.gguf"),
               *plain = tmp("had-plain-q4.gguf"), *unst = tmp("had-unstamped.gguf");
    CHECK_OK(write_synth(src, &s));
    ob_quantize_params p;
    ob_quantize_params_init(&p);
    p.n_threads = 1;
    p.hadamard = true;
    CHECK_OK(ob_quantize_file(src, rot, ob_ftype_find("F32"), &p, NULL));
    CHECK_OK(ob_quantize_file(src, q4, ob_ftype_find("Q4_0"), &p, NULL));
    p.hadamard = false;
    CHECK_OK(ob_quantize_file(src, plain, ob_ftype_find("Q4_0"), &p, NULL));
    /* a rotated file is not requantized without --hadamard */
    CHECK_EQ_INT(ob_quantize_file(rot, unst, ob_ftype_find("Q8_0"), &p, NULL), OB_ERR_UNSUPPORTED);
    enum { N = 32 };
    ob_token tok[N];
    rand_tokens(tok, N, s.n_vocab, 3);
    int V = 0;
    float *a = logits_of(src, tok, N, &V), *b = logits_of(rot, tok, N, &V);
    CHECK(a && b);
    if (a && b) {
        double md = 0, mx = 0;
        for (size_t i = 0; i < (size_t)N * V; i++) {
            md = fmax(md, fabs((double)a[i] - b[i]));
            mx = fmax(mx, fabs((double)a[i]));
        }
        fprintf(stderr, "  rotated F32: max |dlogit| %.3g of max |logit| %.3g\n", md, mx);
        CHECK(md < 1e-3 * mx);
    }
    /* the stamp: key present; every Q4_0 tensor is a rotated projection */
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open(q4, &g));
    if (g) {
        const char *r = NULL;
        CHECK_OK(ob_gguf_get_str(g, OB_HADAMARD_KEY, &r));
        CHECK_EQ_STR(r, OB_HADAMARD_NAME);
        int n_q4 = 0;
        for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
            const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
            if (t->type != OB_TYPE_Q4_0) continue;
            n_q4++;
            CHECK_MSG(ob_hadamard_applies(t->name, t->ne[0]), "%s", t->name);
        }
        CHECK_EQ_INT(n_q4, 2 * 7);
        CHECK(type_of(g, "token_embd.weight") != OB_TYPE_Q4_0);
        /* the same file without its stamp: weights stay rotated, activations do not */
        ob_gguf_writer *w = NULL;
        CHECK_OK(ob_gguf_writer_create(&w));
        for (int64_t i = 0; i < ob_gguf_n_kv(g); i++) {
            const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
            if (strncmp(kv->key, "onebit.rotation", 15)) ob_gguf_writer_set_value(w, kv->key, &kv->value);
        }
        for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
            const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
            ob_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
        }
        CHECK_OK(ob_gguf_writer_write_file(w, unst));
        ob_gguf_writer_free(w);
        ob_gguf_free(g);
    }
    /* OB_ACT_SIM rounds the projections' inputs (a measurement knob): logits move, a
     * type without 32-blocks is refused */
    setenv("OB_ACT_SIM", "q4_0", 1);
    float *sim = logits_of(src, tok, N, &V);
    setenv("OB_ACT_SIM", "q4_K", 1);
    ob_model *sm = NULL;
    ob_model_params smp = ob_model_default_params();
    CHECK_OK(ob_model_load(src, &smp, &sm));
    ob_context *sctx = NULL;
    if (sm) CHECK_EQ_INT(ob_context_create(sm, NULL, &sctx), OB_ERR_INVALID_ARG);
    ob_context_free(sctx);
    ob_model_free(sm);
    unsetenv("OB_ACT_SIM");
    CHECK(sim != NULL);
    if (a && sim) CHECK(mean_kld(a, sim, N, V, NULL) > 1e-6);
    ob_free(sim);
    /* 8-bit activations here (a rotated file defaults to 4): this compares the weights */
    float *c = logits_of_bits(q4, tok, N, &V, 8), *d = logits_of(plain, tok, N, &V), *e = logits_of(unst, tok, N, &V);
    CHECK(c && d && e);
    if (a && c && d && e) {
        double k_rot = mean_kld(a, c, N, V, NULL), k_plain = mean_kld(a, d, N, V, NULL),
               k_unst = mean_kld(a, e, N, V, NULL);
        fprintf(stderr, "  Q4_0 KLD: rotated %.6f plain %.6f rotated-unstamped %.6f\n", k_rot, k_plain, k_unst);
        CHECK(k_unst > 10 * k_rot); /* an unstamped file is never rotated: garbage here */
        /* with a few large input columns (as real activations have) the rotation helps 4-bit weights */
        CHECK(k_rot < k_plain);
    }
    ob_free(a);
    ob_free(b);
    ob_free(c);
    ob_free(d);
    ob_free(e);
}

/* The W4A4 path (docs/quantization.md) at one matmul, through the hook as
 * a stamped file runs it (rotation, then 4-bit activations), against
 * OB_ACT_SIM=q4_0's arithmetic (rotation, Q4_0 round trip, 8-bit matmul).
 * Both use the same 4-bit values v (the kernel tests show the codes are the
 * Q4_0 reference's); the simulation then rounds v again to 8 bits, to the
 * nearest multiple of d8 = max|v| / 127 per block, while W4A4 multiplies v
 * exactly. So for every output |W4A4 - sim| <= sum over blocks of
 * d8 / 2 * sum |w| (that second rounding) plus float rounding, which we
 * bound by 1e-5 of sum |w v|; W4A4 against float64 on v is float rounding
 * alone. */
TEST(hadamard_w4a4_matmul) {
    enum { NIN = 256, NOUT = 48, NT = 5 };
    uint64_t rng = 17;
    float *wf = ob_malloc(sizeof(float) * NIN * NOUT), *wd = ob_malloc(sizeof(float) * NIN * NOUT);
    float *x = ob_malloc(sizeof(float) * NIN * NT), *v = ob_malloc(sizeof(float) * NIN * NT);
    float *o4 = ob_malloc(sizeof(float) * NOUT * NT), *os = ob_malloc(sizeof(float) * NOUT * NT);
    const size_t rb = ob_row_size(OB_TYPE_Q4_0, NIN);
    char *wq = ob_malloc(rb * NOUT), *q = ob_malloc(rb);
    for (int i = 0; i < NIN * NOUT; i++) wf[i] = 0.05f * test_rand_normal(&rng) * (i % NIN < 3 ? 6.0f : 1.0f);
    for (int r = 0; r < NOUT; r++) {
        ob_quantize_row_q4_0_ref(wf + r * NIN, wq + (size_t)r * rb, NIN);
        ob_dequantize_row_q4_0(wq + (size_t)r * rb, wd + r * NIN, NIN);
    }
    for (int i = 0; i < NIN * NT; i++) x[i] = test_rand_normal(&rng) * (i % NIN < 3 ? 8.0f : 1.0f);
    /* v: rotated, then Q4_0's round trip (what both paths multiply first) */
    memcpy(v, x, sizeof(float) * NIN * NT);
    ob_hadamard_rotate_rows(v, NIN, NT, 99);
    for (int t = 0; t < NT; t++) {
        ob_quantize_row_q4_0_ref(v + t * NIN, q, NIN);
        ob_dequantize_row_q4_0(q, v + t * NIN, NIN);
    }
    ob_backend *b = NULL;
    CHECK_OK(ob_backend_cpu_create(2, &b));
    ob_matmul_hook *h4 = NULL, *hs = NULL;
    if (b) {
        CHECK_OK(ob_matmul_hook_create(b, &h4));
        CHECK_OK(ob_matmul_hook_create(b, &hs));
    }
    if (b && h4 && hs) {
        h4->rotate = hs->rotate = true;
        h4->seed = hs->seed = 99;
        h4->act_bits = 4;
        hs->act_sim = OB_TYPE_Q4_0;
        ob_tensor w, xt, ot;
        int64_t ne[2] = {NIN, NOUT};
        ob_tensor_init(&w, OB_TYPE_Q4_0, 2, ne, NULL);
        w.name = "blk.0.ffn_up.weight";
        CHECK_OK(b->ops->weight(b, &w, wq));
        ob_tensor_f32_2d(&xt, NIN, NT, x);
        ob_matmul_hook *hooks[2] = {h4, hs};
        float *outs[2] = {o4, os};
        for (int k = 0; k < 2; k++) {
            ob_tensor_f32_2d(&ot, NOUT, NT, outs[k]);
            ob_matmul_hook_enter(hooks[k], b);
            CHECK_OK(b->ops->matmul(b, &w, &xt, NULL, &ot));
            ob_matmul_hook_leave(hooks[k], b);
        }
        double worst = 0, worst_exact = 0, seen = 0;
        for (int t = 0; t < NT; t++)
            for (int r = 0; r < NOUT; r++) {
                double exact = 0, mag = 0, second = 0;
                for (int blk = 0; blk < NIN / 32; blk++) {
                    double vmax = 0, wsum = 0;
                    for (int i = blk * 32; i < blk * 32 + 32; i++) {
                        vmax = fmax(vmax, fabs((double)v[t * NIN + i]));
                        wsum += fabs((double)wd[r * NIN + i]);
                        exact += (double)wd[r * NIN + i] * v[t * NIN + i];
                        mag += fabs((double)wd[r * NIN + i] * v[t * NIN + i]);
                    }
                    second += vmax / 127.0 / 2.0 * wsum;
                }
                const double d4 = fabs(o4[t * NOUT + r] - exact), ds = fabs((double)o4[t * NOUT + r] - os[t * NOUT + r]);
                worst_exact = fmax(worst_exact, d4 / (1e-5 * mag));
                worst = fmax(worst, ds / (second + 1e-5 * mag));
                seen = fmax(seen, ds);
            }
        fprintf(stderr, "  one matmul: |W4A4 - float64 on v| <= %.3g of its bound, |W4A4 - sim| <= %.3g of its bound "
                        "(max %.3g)\n", worst_exact, worst, seen);
        CHECK(worst_exact <= 1.0);
        CHECK(worst <= 1.0);
        CHECK(seen > 0); /* the simulation's second rounding is real */
    }
    ob_matmul_hook_free(h4);
    ob_matmul_hook_free(hs);
    ob_backend_free(b);
    ob_free(wf), ob_free(wd), ob_free(x), ob_free(v), ob_free(o4), ob_free(os), ob_free(wq), ob_free(q);
}

/* The W4A4 path through a whole model: a rotated Q4_0 file runs its Q4_0
 * projections with 4-bit activations by default; a plain one when asked.
 * Logits of W4A4 and OB_ACT_SIM=q4_0 do not agree closely here, although
 * one matmul does (above): every layer rounds its inputs to 4 bits again,
 * and a difference of a fraction of a step moves some values across a
 * rounding boundary, where it becomes a whole step. So at the model level
 * the two are two draws of the same 4-bit noise (the simulation's extra
 * rounding adds about 1/16 to its rms): their mean KLDs from F32 must agree
 * within 3 standard errors of their difference (paired over the N tokens). */
TEST(hadamard_w4a4) {
    synth s = g_synth;
    s.n_layer = 2;
    s.outlier_cols = 3;
    const char *src = tmp("w4-src.gguf"), *q4 = tmp("w4-rot-q4.gguf"), *plain = tmp("w4-plain-q4.gguf");
    CHECK_OK(write_synth(src, &s));
    ob_quantize_params p;
    ob_quantize_params_init(&p);
    p.n_threads = 1;
    p.hadamard = true;
    CHECK_OK(ob_quantize_file(src, q4, ob_ftype_find("Q4_0"), &p, NULL));
    p.hadamard = false;
    CHECK_OK(ob_quantize_file(src, plain, ob_ftype_find("Q4_0"), &p, NULL));
    /* which bits a context uses */
    static const struct {
        int ask, want;
    } cases[] = {{0, 4}, {8, 8}, {4, 4}, {0, 8}, {4, 4}}; /* 3 on the rotated file, 2 on the plain one */
    for (int i = 0; i < 5; i++) {
        ob_model *m = NULL;
        ob_model_params mp = ob_model_default_params();
        CHECK_OK(ob_model_load(i < 3 ? q4 : plain, &mp, &m));
        if (!m) continue;
        ob_context_params cp = ob_context_default_params();
        cp.n_ctx = 16;
        cp.n_threads = 1;
        cp.act_bits = cases[i].ask;
        ob_context *ctx = NULL;
        CHECK_OK(ob_context_create(m, &cp, &ctx));
        if (ctx) CHECK_EQ_INT(ob_context_get_params(ctx)->act_bits, cases[i].want);
        ob_context_free(ctx);
        ctx = NULL;
        cp.act_bits = 5;
        CHECK_EQ_INT(ob_context_create(m, &cp, &ctx), OB_ERR_INVALID_ARG);
        ob_model_free(m);
    }
    enum { N = 32 };
    ob_token tok[N];
    rand_tokens(tok, N, s.n_vocab, 5);
    int V = 0;
    float *ref = logits_of(src, tok, N, &V);
    float *w4 = logits_of(q4, tok, N, &V), *w4x = logits_of_bits(q4, tok, N, &V, 4), *a8 = logits_of_bits(q4, tok, N, &V, 8);
    setenv("OB_ACT_SIM", "q4_0", 1);
    float *sim = logits_of(q4, tok, N, &V), *psim = logits_of(plain, tok, N, &V);
    unsetenv("OB_ACT_SIM");
    float *pw4 = logits_of_bits(plain, tok, N, &V, 4), *pa8 = logits_of(plain, tok, N, &V);
    CHECK(ref && w4 && w4x && a8 && sim && psim && pw4 && pa8);
    if (ref && w4 && w4x && a8 && sim && psim && pw4 && pa8) {
        const size_t NV = (size_t)N * V;
        CHECK(memcmp(w4, w4x, NV * sizeof(float)) == 0); /* the default for a rotated file is 4 */
        double k_w4 = mean_kld(ref, w4, N, V, NULL), k_sim = mean_kld(ref, sim, N, V, NULL),
               k_a8 = mean_kld(ref, a8, N, V, NULL), k_pw4 = mean_kld(ref, pw4, N, V, NULL),
               k_psim = mean_kld(ref, psim, N, V, NULL), k_pa8 = mean_kld(ref, pa8, N, V, NULL);
        fprintf(stderr, "  KLD vs F32: rotated W4A4 %.5f (sim %.5f, A8 %.5f), plain W4A4 %.5f (sim %.5f, A8 %.5f)\n",
                k_w4, k_sim, k_a8, k_pw4, k_psim, k_pa8);
        const double se = kld_diff_se(ref, w4, sim, N, V), pse = kld_diff_se(ref, pw4, psim, N, V);
        fprintf(stderr, "  |W4A4 - sim|: rotated %.4f (3 se %.4f), plain %.4f (3 se %.4f)\n", fabs(k_w4 - k_sim), 3 * se,
                fabs(k_pw4 - k_psim), 3 * pse);
        CHECK(fabs(k_w4 - k_sim) <= 3 * se);
        CHECK(fabs(k_pw4 - k_psim) <= 3 * pse);
        CHECK(k_w4 > k_a8);   /* 4-bit activations cost accuracy */
        CHECK(k_w4 < k_pw4);  /* and the rotation pays most where activations are 4-bit */
    }
    ob_free(ref), ob_free(w4), ob_free(w4x), ob_free(a8), ob_free(sim), ob_free(psim), ob_free(pw4), ob_free(pa8);
}

TEST(cli_usage_and_errors) {
    static char out[1 << 16];
    char args[8192];
    CHECK_EQ_INT(run_cli("quantize --help", out, sizeof out), 0);
    CHECK(strstr(out, "Q4_K_M") && strstr(out, "--imatrix") && strstr(out, "--tensor-type"));
    CHECK_EQ_INT(run_cli("quantize a.gguf", out, sizeof out), 2);
    snprintf(args, sizeof args, "quantize '%s' '%s' Q9_9", synth_path(), tmp("x.gguf"));
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 1);
    CHECK(strstr(out, "unknown type") != NULL);
    snprintf(args, sizeof args, "quantize '%s' '%s' IQ1_S", synth_path(), tmp("x.gguf"));
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 1);
    CHECK(strstr(out, "importance matrix") != NULL);
    snprintf(args, sizeof args, "quantize --tensor-type 'attn_v=q8_0' --leave-output -t 2 '%s' '%s' Q4_K_M",
             synth_path(), tmp("x.gguf"));
    CHECK_EQ_INT(run_cli(args, out, sizeof out), 0);
    CHECK(strstr(out, "wrote") != NULL);
    CHECK_EQ_INT(run_cli("perplexity -m /nonexistent.gguf -f /dev/null", out, sizeof out), 1);
    CHECK_EQ_INT(run_cli("kld -m x.gguf", out, sizeof out), 2);
    CHECK_EQ_INT(run_cli("imatrix --help", out, sizeof out), 0);
}

int main(int argc, char **argv) {
    int rc = test_main(argc, argv);
    if (g_dir[0]) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    }
    return rc;
}
