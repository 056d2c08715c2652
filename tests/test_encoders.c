/*
 * test_encoders.c - the encoders (bert, modern-bert) against Hugging Face
 * transformers, and /v1/embeddings on them.
 *
 * tests/data/encoders/<case>/ (scripts/gen_encoder_fixtures.py; see its
 * README) holds a tiny random-initialised BertModel / ModernBertModel, its
 * tokenizer, a 64-token prompt ([CLS] ... [SEP]), transformers'
 * last_hidden_state for every prompt position (hidden.f32) and a sentence
 * with the ids `tokenizers` gives it. For each case this test converts the
 * folder with our converter (F32, F16, Q8_0) into /tmp, checks the GGUF's
 * keys, runs the prompt through an embeddings context (F32 KV cache, so
 * only the weights differ) and compares every position's hidden state:
 *
 *   error of a position = max_i |ours_i - ref_i| / max_i |ref_i|
 *   F32 weights: < 1e-4 at every position (the bound).
 *   F16 / Q8_0 weights: the per-weight rms rounding u of the format (F16
 *   2^-11/sqrt(3) = 2.8e-4; Q8_0 about 4.8e-3, as test_models_ref.c derives
 *   them) times 25. Two to four LayerNorm-ed layers pass weight noise
 *   through with a small gain (measured worst position, OB_TEST_VERBOSE=1:
 *   F16 4.3 u bert, 5.1 u modern-bert; Q8_0 6.7 u and 9.6 u), so 25 u
 *   leaves 2.6x room, while a structural mistake (a dropped bias, a wrong
 *   window, causal attention) costs errors of order 0.1 to 1 (meta.json's
 *   self-checks: 0.22 for one changed token seen bidirectionally, 1.7 for
 *   the local window). Pooled vectors: within 2 x the same bound.
 *
 * Mean and CLS pooling of our rows (then L2-normalised, as /v1/embeddings
 * answers) against the same pooling done here on hidden.f32; our tokenizer
 * on text.txt against text_ids.txt; the encoder refuses generation and a
 * sequence split over two batches; and a server started with --embeddings
 * answers /v1/embeddings in OpenAI's shape for a string, a list of strings
 * and token ids, the ids' vector equal to the pooled reference within the
 * F32 bound, and a bad input with a 400. nomic-bert (mapped) only loads and
 * runs here: a file in llama.cpp's layout built from the bert weights.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/convert.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "onebit.h"
#include "server/server.h"
#include "test.h"

#ifndef OB_SOURCE_DIR
#define OB_SOURCE_DIR "."
#endif

#define N_PROMPT 64
#define F32_BOUND 1e-4

typedef struct enc_case {
    const char *name;   /* folder in tests/data/encoders */
    const char *arch;   /* GGUF architecture */
    int pooling;        /* the pooling_type the converter must write (1 mean, 2 cls) */
    int n_layer;
} enc_case;

static const enc_case CASES[] = {
    {"bert", "bert", 1, 2},
    {"modernbert", "modern-bert", 2, 4},
};

static bool verbose(void) {
    const char *v = getenv("OB_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

static char *case_file(const enc_case *c, const char *file) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/tests/data/encoders/%s/%s", OB_SOURCE_DIR, c->name, file);
    return p;
}

/* Whitespace-separated integers of a file into ids (at most max); the count, or -1. */
static int read_ids(const char *path, ob_token *ids, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, v;
    while (n < max && fscanf(f, "%d", &v) == 1) ids[n++] = v;
    fclose(f);
    return n;
}

/* n floats of a file (malloc'd), or NULL when the size differs. */
static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *x = malloc(n * sizeof *x);
    size_t got = x ? fread(x, sizeof *x, n, f) : 0;
    int extra = fgetc(f);
    fclose(f);
    if (got != n || extra != EOF) {
        free(x);
        return NULL;
    }
    return x;
}

static const char *type_tag(ob_type t) { return t == OB_TYPE_F32 ? "f32" : t == OB_TYPE_F16 ? "f16" : "q8_0"; }

/* The case converted to `t` in /tmp (path in a static buffer), or NULL. */
static const char *convert_case(const enc_case *c, ob_type t) {
    static char out[256];
    snprintf(out, sizeof out, "/tmp/ob_test_enc_%d_%s_%s.gguf", (int)getpid(), c->name, type_tag(t));
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = t;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/encoders/%s", OB_SOURCE_DIR, c->name);
    int rc = ob_convert_hf(dir, out, &o);
    CHECK_MSG(rc == 0, "%s %s: convert: %s", c->name, type_tag(t), ob_last_error());
    return rc == 0 ? out : NULL;
}

/* An embeddings context on m (F32 KV, one batch of n_batch). */
static ob_context *embd_ctx(ob_model *m, int n_batch) {
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    cp.kv_type = OB_KV_F32;
    ob_context *ctx = NULL;
    if (ob_context_create(m, &cp, &ctx) < 0) return NULL;
    if (ob_context_set_embeddings(ctx, true) < 0) {
        ob_context_free(ctx);
        return NULL;
    }
    return ctx;
}

/* Hidden states of ids[n] (one sequence, one batch, every row) into out[n][E]. */
static int run_hidden(ob_context *ctx, const ob_token *ids, int n, int E, float *out) {
    int32_t pos[256], seq[256];
    int8_t want[256];
    for (int i = 0; i < n; i++) pos[i] = i, seq[i] = 0, want[i] = 1;
    ob_seq_remove(ctx, 0, 0);
    ob_batch b = {n, ids, pos, seq, want};
    OB_TRY(ob_decode(ctx, &b));
    for (int i = 0; i < n; i++) {
        const float *h = ob_get_embeddings(ctx, i);
        if (!h) return ob_err(OB_ERR_INTERNAL, "no embedding for row %d", i);
        memcpy(out + (size_t)i * E, h, (size_t)E * sizeof(float));
    }
    return 0;
}

/* Worst per-position relative error of a [n][E] against ref. */
static double worst_rel(const float *a, const float *ref, int n, int E, int *at) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double d = 0, r = 0;
        for (int k = 0; k < E; k++) {
            d = fmax(d, fabs((double)a[(size_t)i * E + k] - ref[(size_t)i * E + k]));
            r = fmax(r, fabs((double)ref[(size_t)i * E + k]));
        }
        if (d / r > worst) worst = d / r, *at = i;
    }
    return worst;
}

/* Mean (1) or CLS (2) pooling of h[n][E], L2-normalised, into out[E]. */
static void pool(const float *h, int n, int E, int pooling, float *out) {
    double acc[256] = {0}, norm = 0;
    for (int i = 0; i < (pooling == 2 ? 1 : n); i++)
        for (int k = 0; k < E; k++) acc[k] += h[(size_t)i * E + k];
    for (int k = 0; k < E; k++) norm += acc[k] * acc[k];
    for (int k = 0; k < E; k++) out[k] = (float)(acc[k] / sqrt(norm));
}

static double max_abs_diff(const float *a, const float *b, int E) {
    double d = 0;
    for (int k = 0; k < E; k++) d = fmax(d, fabs((double)a[k] - b[k]));
    return d;
}

/* ---------------- the reference comparison ---------------- */

static void check_case_type(const enc_case *c, ob_type t, const ob_token *prompt, const float *ref, int E) {
    const char *path = convert_case(c, t);
    if (!path) return;
    /* the file: llama.cpp's architecture and keys */
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open(path, &g));
    if (g) {
        const char *arch = NULL;
        uint32_t pooling = 0, blocks = 0;
        bool causal = true;
        char k[96];
        CHECK_OK(ob_gguf_get_str(g, "general.architecture", &arch));
        CHECK_EQ_STR(arch, c->arch);
        snprintf(k, sizeof k, "%s.pooling_type", c->arch);
        CHECK_OK(ob_gguf_get_u32(g, k, &pooling));
        CHECK_EQ_INT(pooling, c->pooling);
        snprintf(k, sizeof k, "%s.attention.causal", c->arch);
        CHECK_OK(ob_gguf_get_bool(g, k, &causal));
        CHECK(!causal);
        snprintf(k, sizeof k, "%s.block_count", c->arch);
        CHECK_OK(ob_gguf_get_u32(g, k, &blocks));
        CHECK_EQ_INT(blocks, c->n_layer);
        if (!strcmp(c->arch, "bert")) {
            const char *tm = NULL;
            CHECK_OK(ob_gguf_get_str(g, "tokenizer.ggml.model", &tm));
            CHECK_EQ_STR(tm, "bert");
            CHECK(ob_gguf_find_tensor(g, "token_types.weight") && ob_gguf_find_tensor(g, "blk.1.layer_output_norm.bias"));
        } else {
            uint32_t win = 0, pat = 0;
            float base_swa = 0;
            CHECK_OK(ob_gguf_get_u32(g, "modern-bert.attention.sliding_window", &win));
            CHECK_OK(ob_gguf_get_u32(g, "modern-bert.attention.sliding_window_pattern", &pat));
            CHECK_OK(ob_gguf_get_f32(g, "modern-bert.rope.freq_base_swa", &base_swa));
            CHECK(win == 16 && pat == 2 && base_swa == 10000.0f);
            CHECK(ob_gguf_find_tensor(g, "blk.0.attn_norm.weight") == NULL); /* HF's layer 0 has none */
            CHECK(ob_gguf_find_tensor(g, "blk.1.attn_norm.weight") && ob_gguf_find_tensor(g, "output_norm.weight"));
        }
        ob_gguf_free(g);
    }
    ob_model *m = NULL;
    CHECK_OK(ob_model_load(path, NULL, &m));
    if (!m) goto done;
    CHECK(ob_model_is_encoder(m));
    CHECK_EQ_INT(ob_model_pooling_type(m), c->pooling);
    CHECK_EQ_INT(ob_model_n_embd(m), E);
    ob_context *ctx = embd_ctx(m, N_PROMPT);
    CHECK_MSG(ctx != NULL, "%s: %s", c->name, ob_last_error());
    float *h = malloc((size_t)N_PROMPT * E * sizeof *h);
    if (ctx && h && run_hidden(ctx, prompt, N_PROMPT, E, h) == 0) {
        int at = -1;
        double w = worst_rel(h, ref, N_PROMPT, E, &at);
        const double u = t == OB_TYPE_F32 ? 0 : t == OB_TYPE_F16 ? 2.8e-4 : 4.8e-3;
        const double bound = t == OB_TYPE_F32 ? F32_BOUND : 25 * u;
        if (verbose())
            printf("  %s %-4s max rel err %.3g at position %d (bound %.3g%s)\n", c->name, type_tag(t), w, at, bound,
                   t == OB_TYPE_F32 ? "" : u > 0 ? ", in u" : "");
        if (verbose() && u > 0) printf("    = %.2f u\n", w / u);
        CHECK_MSG(w < bound, "%s %s: position %d relative error %g >= %g", c->name, type_tag(t), at, w, bound);
        /* pooling, as /v1/embeddings answers it */
        float ours[256], want[256];
        for (int p = 1; p <= 2; p++) {
            pool(h, N_PROMPT, E, p, ours);
            pool(ref, N_PROMPT, E, p, want);
            double d = max_abs_diff(ours, want, E);
            if (verbose()) printf("    %s pooling: max |diff| %.3g\n", p == 1 ? "mean" : "cls", d);
            CHECK_MSG(d < (t == OB_TYPE_F32 ? F32_BOUND : 2 * bound), "%s %s pooling %d: %g", c->name, type_tag(t), p, d);
        }
    } else {
        CHECK_MSG(false, "%s %s: decode failed: %s", c->name, type_tag(t), ob_last_error());
    }
    free(h);
    ob_context_free(ctx);
    ob_model_free(m);
done:
    unlink(path);
}

TEST(encoders_match_transformers) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const enc_case *c = &CASES[i];
        ob_token prompt[N_PROMPT];
        CHECK_EQ_INT(read_ids(case_file(c, "prompt.txt"), prompt, N_PROMPT), N_PROMPT);
        json_t *meta = json_load_file(case_file(c, "meta.json"), 0, NULL);
        CHECK(meta != NULL);
        const int E = (int)json_integer_value(json_object_get(meta, "n_embd"));
        CHECK_EQ_INT(json_integer_value(json_object_get(meta, "n_prompt")), N_PROMPT);
        json_decref(meta);
        CHECK(E > 0 && E <= 256);
        float *ref = E > 0 && E <= 256 ? read_f32(case_file(c, "hidden.f32"), (size_t)N_PROMPT * E) : NULL;
        CHECK_MSG(ref != NULL, "%s: hidden.f32", c->name);
        if (!ref) continue;
        const ob_type types[] = {OB_TYPE_F32, OB_TYPE_F16, OB_TYPE_Q8_0};
        for (size_t k = 0; k < 3; k++) check_case_type(c, types[k], prompt, ref, E);
        free(ref);
    }
}

/* Our tokenizer on the case's sentence gives the ids `tokenizers` gives it,
 * [CLS] and [SEP] included. */
TEST(encoder_tokenizers_match) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const enc_case *c = &CASES[i];
        const char *path = convert_case(c, OB_TYPE_F16);
        if (!path) continue;
        ob_model *m = NULL;
        CHECK_OK(ob_model_load(path, NULL, &m));
        char text[512] = {0};
        FILE *f = fopen(case_file(c, "text.txt"), "rb");
        size_t tl = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f) fclose(f);
        while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == '\r')) text[--tl] = 0;
        ob_token want[256], got[256];
        int nw = read_ids(case_file(c, "text_ids.txt"), want, 256);
        int32_t ng = 0;
        CHECK(tl > 0 && nw > 2);
        if (m) CHECK_OK(ob_tokenize(m, text, tl, true, false, got, 256, &ng));
        CHECK_EQ_INT(ng, nw);
        for (int k = 0; k < nw && k < ng; k++) CHECK_MSG(got[k] == want[k], "%s: token %d is %d, want %d", c->name, k, got[k], want[k]);
        ob_model_free(m);
        unlink(path);
    }
}

/* An encoder gives embeddings only, and only for whole sequences. */
TEST(encoder_refuses_generation_and_split_sequences) {
    const enc_case *c = &CASES[1];
    const char *path = convert_case(c, OB_TYPE_F32);
    if (!path) return;
    ob_model *m = NULL;
    CHECK_OK(ob_model_load(path, NULL, &m));
    if (!m) return;
    ob_token prompt[N_PROMPT];
    read_ids(case_file(c, "prompt.txt"), prompt, N_PROMPT);
    int32_t pos[N_PROMPT], seq[N_PROMPT] = {0};
    for (int i = 0; i < N_PROMPT; i++) pos[i] = i;
    /* no embeddings: no logits either */
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    ob_context *ctx = NULL;
    CHECK_OK(ob_context_create(m, &cp, &ctx));
    ob_batch b = {8, prompt, pos, seq, NULL};
    if (ctx) {
        CHECK_EQ_INT(ob_decode(ctx, &b), OB_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(ob_last_error(), "encoder") != NULL, "%s", ob_last_error());
    }
    ob_context_free(ctx);
    /* a sequence continued in a second batch would see only half of itself */
    ctx = embd_ctx(m, 32);
    CHECK(ctx != NULL);
    if (ctx) {
        int8_t want[32];
        memset(want, 1, sizeof want);
        ob_batch b1 = {32, prompt, pos, seq, want};
        CHECK_OK(ob_decode(ctx, &b1));
        ob_batch b2 = {32, prompt + 32, pos + 32, seq, want};
        CHECK_EQ_INT(ob_decode(ctx, &b2), OB_ERR_INVALID_ARG);
        CHECK_MSG(strstr(ob_last_error(), "whole") != NULL, "%s", ob_last_error());
        /* attention is two-sided: the first position changes with the last token */
        float first[256], again[256];
        const int E = ob_model_n_embd(m);
        ob_seq_remove(ctx, 0, 0);
        CHECK_OK(ob_decode(ctx, &b1));
        memcpy(first, ob_get_embeddings(ctx, 0), (size_t)E * sizeof(float));
        ob_token alt[32];
        memcpy(alt, prompt, sizeof alt);
        alt[30] = alt[30] == 10 ? 11 : 10;
        ob_batch b3 = {32, alt, pos, seq, want};
        ob_seq_remove(ctx, 0, 0);
        CHECK_OK(ob_decode(ctx, &b3));
        memcpy(again, ob_get_embeddings(ctx, 0), (size_t)E * sizeof(float));
        CHECK(max_abs_diff(first, again, E) > 1e-3);
    }
    ob_context_free(ctx);
    ob_model_free(m);
    unlink(path);
}

/* A copy of a fixture folder in /tmp: config.json edited by `edit` (a
 * jansson object), the other files linked. Returns the folder (static
 * buffer) or NULL. */
static const char *fixture_copy(const enc_case *c, void (*edit)(json_t *cfg), const char *tag) {
    static char dir[256];
    snprintf(dir, sizeof dir, "/tmp/ob_test_enc_%d_%s", (int)getpid(), tag);
    if (mkdir(dir, 0755) != 0) return NULL;
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    char from[1024], to[512];
    for (size_t i = 0; i < 3; i++) {
        snprintf(from, sizeof from, "%s", case_file(c, files[i]));
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        if (symlink(from, to) != 0) return NULL;
    }
    json_t *cfg = json_load_file(case_file(c, "config.json"), 0, NULL);
    if (!cfg) return NULL;
    if (edit) edit(cfg);
    snprintf(to, sizeof to, "%s/config.json", dir);
    int rc = json_dump_file(cfg, to, 0);
    json_decref(cfg);
    return rc == 0 ? dir : NULL;
}

static void fixture_remove(const char *dir) {
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json",
                                        "modules.json", "1_Pooling/config.json", "1_Pooling"};
    char p[512];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (unlink(p) != 0) rmdir(p);
    }
    rmdir(dir);
}

static void set_norm_bias(json_t *c) { json_object_set_new(c, "norm_bias", json_true()); }
static void set_bad_layers(json_t *c) { json_array_set_new(json_object_get(c, "layer_types"), 1, json_string("full_attention")); }
static void set_gelu_new(json_t *c) { json_object_set_new(c, "hidden_act", json_string("gelu_new")); }
static void set_relative(json_t *c) { json_object_set_new(c, "position_embedding_type", json_string("relative_key")); }
static void set_mean_pool(json_t *c) { json_object_set_new(c, "classifier_pooling", json_string("mean")); }

/* What the converter cannot write is refused by name; the pooling comes
 * from a sentence-transformers Pooling module when there is one, else from
 * the family's default or ModernBERT's classifier_pooling. */
TEST(encoder_converter_refusals_and_pooling) {
    static const struct {
        int c;
        void (*edit)(json_t *);
        const char *key;
    } bad[] = {{1, set_norm_bias, "norm_bias"}, {1, set_bad_layers, "layer_types"}, {0, set_gelu_new, "hidden_act"},
               {0, set_relative, "position_embedding_type"}};
    char out[256];
    snprintf(out, sizeof out, "/tmp/ob_test_enc_%d_refused.gguf", (int)getpid());
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *dir = fixture_copy(&CASES[bad[i].c], bad[i].edit, "refuse");
        CHECK(dir != NULL);
        if (!dir) continue;
        CHECK_EQ_INT(ob_convert_hf(dir, out, NULL), OB_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(ob_last_error(), bad[i].key) != NULL, "%s: %s", bad[i].key, ob_last_error());
        CHECK(access(out, F_OK) != 0); /* no file left behind */
        fixture_remove(dir);
    }
    /* pooling: classifier_pooling mean; a Pooling module saying cls overrides BERT's mean */
    for (int k = 0; k < 2; k++) {
        const char *dir = fixture_copy(&CASES[k == 0 ? 1 : 0], k == 0 ? set_mean_pool : NULL, "pool");
        CHECK(dir != NULL);
        if (!dir) continue;
        if (k == 1) {
            char p[512];
            snprintf(p, sizeof p, "%s/modules.json", dir);
            FILE *f = fopen(p, "w");
            if (f) {
                fputs("[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
                      "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]",
                      f);
                fclose(f);
            }
            snprintf(p, sizeof p, "%s/1_Pooling", dir);
            CHECK(mkdir(p, 0755) == 0);
            snprintf(p, sizeof p, "%s/1_Pooling/config.json", dir);
            f = fopen(p, "w");
            if (f) {
                fputs("{\"word_embedding_dimension\":64,\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":false}", f);
                fclose(f);
            }
        }
        CHECK_OK(ob_convert_hf(dir, out, NULL));
        ob_gguf *g = NULL;
        CHECK_OK(ob_gguf_open(out, &g));
        uint32_t pooling = 0;
        if (g) CHECK_OK(ob_gguf_get_u32(g, k == 0 ? "modern-bert.pooling_type" : "bert.pooling_type", &pooling));
        CHECK_EQ_INT(pooling, k == 0 ? 1 : 2);
        ob_gguf_free(g);
        unlink(out);
        fixture_remove(dir);
    }
}

/* nomic-bert is mapped, not verified (no reference): a file in llama.cpp's
 * layout, built here from the bert fixture's weights (q/k/v fused into
 * attn_qkv, ffn_gate a copy of ffn_up, no position_embd), loads and runs
 * bidirectionally, and its positions come from RoPE alone: swapping two
 * tokens changes position 0's state, which position-free attention could
 * not tell apart. */
TEST(nomic_bert_loads_and_runs) {
    const char *src = convert_case(&CASES[0], OB_TYPE_F32);
    if (!src) return;
    char gpath[256], npath[256];
    snprintf(gpath, sizeof gpath, "%s", src);
    snprintf(npath, sizeof npath, "/tmp/ob_test_enc_%d_nomic.gguf", (int)getpid());
    ob_gguf *g = NULL;
    ob_gguf_writer *w = NULL;
    CHECK_OK(ob_gguf_open(gpath, &g));
    CHECK_OK(ob_gguf_writer_create(&w));
    float *qkv[2] = {NULL, NULL};
    if (!g || !w) goto out;
    const char *A = "nomic-bert";
    char k[96];
#define NK(s) (snprintf(k, sizeof k, "%s.%s", A, s), k)
    CHECK_OK(ob_gguf_writer_set_str(w, "general.architecture", A));
    CHECK_OK(ob_gguf_writer_set_u32(w, NK("block_count"), 2));
    CHECK_OK(ob_gguf_writer_set_u32(w, NK("context_length"), 256));
    CHECK_OK(ob_gguf_writer_set_u32(w, NK("embedding_length"), 64));
    CHECK_OK(ob_gguf_writer_set_u32(w, NK("feed_forward_length"), 128));
    CHECK_OK(ob_gguf_writer_set_u32(w, NK("attention.head_count"), 4));
    CHECK_OK(ob_gguf_writer_set_f32(w, NK("attention.layer_norm_epsilon"), 1e-12f));
    CHECK_OK(ob_gguf_writer_set_f32(w, NK("rope.freq_base"), 1000.0f));
    CHECK_OK(ob_gguf_writer_set_bool(w, NK("attention.causal"), false));
    CHECK_OK(ob_gguf_writer_set_u32(w, NK("pooling_type"), 1));
#undef NK
    static const char *const globals[] = {"token_embd.weight", "token_types.weight", "token_embd_norm.weight",
                                          "token_embd_norm.bias"};
    for (size_t i = 0; i < 4; i++) {
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, globals[i]);
        CHECK(t != NULL);
        if (t) CHECK_OK(ob_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
    }
    static const char *const per[] = {"attn_output.weight", "attn_output.bias", "attn_output_norm.weight",
                                      "attn_output_norm.bias", "ffn_up.weight", "ffn_down.weight",
                                      "layer_output_norm.weight", "layer_output_norm.bias"};
    for (int l = 0; l < 2; l++) {
        char name[96];
        for (size_t i = 0; i < sizeof per / sizeof per[0]; i++) {
            snprintf(name, sizeof name, "blk.%d.%s", l, per[i]);
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, name);
            CHECK(t != NULL);
            if (!t) continue;
            CHECK_OK(ob_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
            if (!strcmp(per[i], "ffn_up.weight")) {
                snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", l);
                CHECK_OK(ob_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
            }
        }
        qkv[l] = malloc(3 * 64 * 64 * sizeof(float));
        static const char *const parts[] = {"attn_q", "attn_k", "attn_v"};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, parts[p]);
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, name);
            CHECK(t && t->type == OB_TYPE_F32 && t->ne[0] == 64 && t->ne[1] == 64);
            if (t && qkv[l]) memcpy(qkv[l] + p * 64 * 64, t->data, 64 * 64 * sizeof(float));
        }
        const int64_t ne[2] = {64, 192};
        snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", l);
        if (qkv[l]) CHECK_OK(ob_gguf_writer_add_tensor(w, name, OB_TYPE_F32, 2, ne, qkv[l]));
    }
    CHECK_OK(ob_gguf_writer_write_file(w, npath));
    ob_model *m = NULL;
    CHECK_OK(ob_model_load(npath, NULL, &m));
    if (!m) goto out;
    CHECK(ob_model_is_encoder(m));
    ob_context *ctx = embd_ctx(m, N_PROMPT);
    CHECK(ctx != NULL);
    ob_token ids[16], swapped[16], changed_last[16];
    for (int i = 0; i < 16; i++) ids[i] = 5 + 7 * i;
    memcpy(swapped, ids, sizeof ids);
    swapped[5] = ids[9], swapped[9] = ids[5];
    memcpy(changed_last, ids, sizeof ids);
    changed_last[15] = 200;
    float h0[16 * 64], h1[16 * 64], h2[16 * 64];
    if (ctx && run_hidden(ctx, ids, 16, 64, h0) == 0 && run_hidden(ctx, swapped, 16, 64, h1) == 0 &&
        run_hidden(ctx, changed_last, 16, 64, h2) == 0) {
        bool finite = true;
        for (int i = 0; i < 16 * 64; i++) finite &= isfinite(h0[i]) != 0;
        CHECK(finite);
        CHECK(max_abs_diff(h0, h1, 64) > 1e-3); /* RoPE: order matters at position 0 */
        CHECK(max_abs_diff(h0, h2, 64) > 1e-3); /* bidirectional: position 0 sees the last token */
        CHECK(max_abs_diff(h0 + 15 * 64, h1 + 15 * 64, 64) > 1e-3);
    } else {
        CHECK_MSG(false, "nomic-bert: %s", ob_last_error());
    }
    ob_context_free(ctx);
    ob_model_free(m);
out:
    free(qkv[0]);
    free(qkv[1]);
    ob_gguf_writer_free(w);
    ob_gguf_free(g);
    unlink(gpath);
    unlink(npath);
}

/* ---------------- /v1/embeddings ---------------- */

/* POST body to 127.0.0.1:port/path; the status and the parsed reply. */
static json_t *post(int port, const char *path, const char *body, int *status) {
    *status = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return NULL;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return NULL;
    }
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      path, strlen(body));
    bool ok = send(fd, head, (size_t)hn, 0) == hn && send(fd, body, strlen(body), 0) == (ssize_t)strlen(body);
    size_t cap = 1 << 20, n = 0;
    char *raw = malloc(cap);
    ssize_t k;
    while (ok && raw && n + 1 < cap && (k = recv(fd, raw + n, cap - n - 1, 0)) > 0) n += (size_t)k;
    close(fd);
    json_t *j = NULL;
    if (raw) {
        raw[n] = 0;
        char *sep = strstr(raw, "\r\n\r\n");
        if (sep && sscanf(raw, "HTTP/1.%*d %d", status) == 1 && !strstr(raw, "chunked"))
            j = json_loads(sep + 4, 0, NULL);
    }
    free(raw);
    return j;
}

/* data[i].embedding into out[E]; false when the shape is not OpenAI's. */
static bool embedding_at(json_t *j, int i, float *out, int E) {
    json_t *d = json_array_get(json_object_get(j, "data"), (size_t)i);
    json_t *v = json_object_get(d, "embedding");
    if (!json_is_array(v) || (int)json_array_size(v) != E) return false;
    if (!json_is_string(json_object_get(d, "object")) || strcmp(json_string_value(json_object_get(d, "object")), "embedding"))
        return false;
    if (json_integer_value(json_object_get(d, "index")) != i) return false;
    for (int k = 0; k < E; k++) out[k] = (float)json_number_value(json_array_get(v, (size_t)k));
    return true;
}

static void check_server_case(const enc_case *c) {
    const char *path = convert_case(c, OB_TYPE_F32);
    if (!path) return;
    char gguf[256];
    snprintf(gguf, sizeof gguf, "%s", path);
    json_t *meta = json_load_file(case_file(c, "meta.json"), 0, NULL);
    const int E = (int)json_integer_value(json_object_get(meta, "n_embd"));
    json_decref(meta);
    float *ref = read_f32(case_file(c, "hidden.f32"), (size_t)N_PROMPT * E);
    ob_token prompt[N_PROMPT], tids[256];
    read_ids(case_file(c, "prompt.txt"), prompt, N_PROMPT);
    const int nt = read_ids(case_file(c, "text_ids.txt"), tids, 256);
    CHECK(ref != NULL && nt > 2);

    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = gguf;
    p.port = 0;
    p.device = "cpu";
    p.engine.n_parallel = 1;
    p.engine.n_threads = 1;
    p.engine.n_ctx = 128;
    p.engine.kv_type = OB_KV_F32; /* only the weights differ from the reference: F32 */
    p.quiet = true;
    p.embeddings = true;
    p.pooling = -1; /* the file's pooling_type */
    ob_server *s = NULL;
    CHECK_OK(ob_server_start(&p, &s));
    if (!s || !ref) goto out;
    CHECK_EQ_INT(ob_server_wait_ready(s, 30000), 0);
    const int port = ob_server_port(s);
    int st = 0;
    /* token ids: the prompt, pooled as the file says */
    char body[4096];
    size_t bl = (size_t)snprintf(body, sizeof body, "{\"input\":[");
    for (int i = 0; i < N_PROMPT; i++) bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s%d", i ? "," : "", prompt[i]);
    snprintf(body + bl, sizeof body - bl, "]}");
    json_t *j = post(port, "/v1/embeddings", body, &st);
    CHECK_EQ_INT(st, 200);
    float got[256], want[256], other[256];
    CHECK(embedding_at(j, 0, got, E));
    pool(ref, N_PROMPT, E, c->pooling, want);
    double rel = max_abs_diff(got, want, E), mx = 0;
    for (int k = 0; k < E; k++) mx = fmax(mx, fabs((double)want[k]));
    if (verbose()) printf("  %s /v1/embeddings (ids): max rel diff %.3g from the pooled reference\n", c->name, rel / mx);
    CHECK_MSG(rel / mx < F32_BOUND, "%s: /v1/embeddings differs from the pooled reference by %g", c->name, rel / mx);
    CHECK(json_is_string(json_object_get(j, "object")) && !strcmp(json_string_value(json_object_get(j, "object")), "list"));
    CHECK(json_is_string(json_object_get(j, "model")));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), N_PROMPT);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), N_PROMPT);
    json_decref(j);
    /* a string: tokenized with [CLS]/[SEP] like `tokenizers`, the same vector as its ids */
    char text[512] = {0};
    FILE *f = fopen(case_file(c, "text.txt"), "rb");
    size_t tl = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == '\r')) text[--tl] = 0;
    json_t *req = json_pack("{s:s}", "input", text);
    char *rs = json_dumps(req, 0);
    j = post(port, "/v1/embeddings", rs, &st);
    free(rs);
    json_decref(req);
    CHECK_EQ_INT(st, 200);
    CHECK(embedding_at(j, 0, other, E));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), nt);
    json_decref(j);
    bl = (size_t)snprintf(body, sizeof body, "{\"input\":[");
    for (int i = 0; i < nt; i++) bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s%d", i ? "," : "", tids[i]);
    snprintf(body + bl, sizeof body - bl, "]}");
    j = post(port, "/v1/embeddings", body, &st);
    CHECK_EQ_INT(st, 200);
    CHECK(embedding_at(j, 0, got, E) && max_abs_diff(got, other, E) == 0);
    double n2 = 0;
    for (int k = 0; k < E; k++) n2 += (double)got[k] * got[k];
    CHECK(fabs(n2 - 1) < 1e-5); /* L2-normalised */
    json_decref(j);
    /* a list of strings: each as it is alone, in order */
    req = json_pack("{s:[s,s]}", "input", "hello world", text);
    rs = json_dumps(req, 0);
    j = post(port, "/v1/embeddings", rs, &st);
    free(rs);
    json_decref(req);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(j, "data")), 2);
    CHECK(embedding_at(j, 1, got, E) && max_abs_diff(got, other, E) == 0);
    CHECK(embedding_at(j, 0, got, E) && max_abs_diff(got, other, E) > 1e-3);
    json_decref(j);
    /* bad inputs: 400 naming the field; generation is refused */
    static const char *const bad[] = {"{\"input\":\"\"}", "{\"input\":[1, 99999]}", "{\"input\":[\"ok\", 5]}", "{}",
                                      "{\"input\":{\"a\":1}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = post(port, "/v1/embeddings", bad[i], &st);
        CHECK_MSG(st == 400, "%s: %s gave %d", c->name, bad[i], st);
        CHECK(json_is_object(json_object_get(j, "error")));
        json_decref(j);
    }
    j = post(port, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &st);
    CHECK_EQ_INT(st, 400);
    json_t *msg = json_object_get(json_object_get(j, "error"), "message");
    CHECK(json_is_string(msg) && strstr(json_string_value(msg), "encoder"));
    json_decref(j);
out:
    ob_server_stop(s);
    free(ref);
    unlink(gguf);
}

TEST(embeddings_endpoint_on_encoders) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) check_server_case(&CASES[i]);
}

/* Without --embeddings an encoder does not load into a server: it could
 * answer nothing. */
TEST(server_without_embeddings_refuses_an_encoder) {
    const char *path = convert_case(&CASES[0], OB_TYPE_F16);
    if (!path) return;
    char gguf[256];
    snprintf(gguf, sizeof gguf, "%s", path);
    ob_server_params p;
    ob_server_default_params(&p);
    p.model_path = gguf;
    p.port = 0;
    p.engine.n_parallel = 1;
    p.engine.n_threads = 1;
    p.quiet = true;
    ob_server *s = NULL;
    if (ob_server_start(&p, &s) == 0) {
        CHECK(ob_server_wait_ready(s, 30000) != 0);
        ob_server_stop(s);
    }
    unlink(gguf);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
