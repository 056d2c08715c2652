/*
 * test_convert.c - `1bit convert`: the safetensors reader (valid files,
 * sharded folders, and a catalogue of malformed headers that must each fail
 * with a message naming the culprit, never an out-of-bounds read: this also
 * runs under ASan), and the converter on tiny Hugging Face folders that the
 * test writes itself (config.json + model.safetensors + tokenizer.json),
 * read back as GGUF: keys, tensor names and shapes, the q/k permutation of
 * the llama arch checked numerically against both RoPE conventions, the
 * tokenizer keys, and F16/BF16/Q8_0 output dequantizing close to the source.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/convert.h"
#include "convert/safetensors.h"
#include "core/mem.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "test.h"

/* ---------------------------------------------------------------------
 * Building safetensors images
 * --------------------------------------------------------------------- */

typedef struct st_entry {
    char name[96];
    const char *dtype; /* "F32", "F16", "BF16", "I32" ... */
    int n_dims;
    int64_t shape[4];
    const void *data;  /* raw bytes, nbytes long */
    size_t nbytes;
} st_entry;

/* Header with correct offsets (entries in order), padded to 8 bytes with
 * spaces as the reference writer does, then the data. Caller frees. */
static unsigned char *st_build(const st_entry *e, int n, size_t *size) {
    json_t *h = json_object();
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < e[i].n_dims; d++) json_array_append_new(shape, json_integer(e[i].shape[d]));
        json_object_set_new(h, e[i].name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", e[i].dtype, "shape", shape, "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + e[i].nbytes)));
        off += e[i].nbytes;
    }
    char *hs = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    size_t hl = strlen(hs), padded = (hl + 7) / 8 * 8;
    *size = 8 + padded + off;
    unsigned char *buf = malloc(*size);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, hs, hl);
    memset(buf + 8 + hl, ' ', padded - hl);
    size_t o = 8 + padded;
    for (int i = 0; i < n; i++) {
        memcpy(buf + o, e[i].data, e[i].nbytes);
        o += e[i].nbytes;
    }
    free(hs);
    return buf;
}

/* A raw image from a header string and `data_len` bytes of data. */
static unsigned char *st_raw(const char *header, size_t data_len, size_t *size) {
    size_t hl = strlen(header);
    *size = 8 + hl + data_len;
    unsigned char *buf = calloc(1, *size);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    return buf;
}

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

static int write_json(const char *path, json_t *j) {
    int rc = json_dump_file(j, path, JSON_INDENT(1));
    return rc;
}

static char *tmpdir(void) {
    static char buf[64][128];
    static int k;
    char *p = buf[k++ % 64];
    snprintf(p, 128, "/tmp/ob_test_convert_XXXXXX");
    return mkdtemp(p);
}

static void rm_rf(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static const char *pj(const char *dir, const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* ---------------------------------------------------------------------
 * Safetensors reader
 * --------------------------------------------------------------------- */

TEST(safetensors_valid_file) {
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[4] = {0x3F80, 0x4000, 0xBF80, 0x0000}; /* bf16 1, 2, -1, 0 */
    st_entry e[2] = {{"a.weight", "F32", 2, {2, 3}, a, sizeof a}, {"b.bias", "BF16", 1, {4}, b, sizeof b}};
    size_t size;
    unsigned char *img = st_build(e, 2, &size);
    ob_safetensors *st;
    CHECK_OK(ob_safetensors_open_memory(img, size, "mem", &st));
    if (st) {
        CHECK_EQ_INT(ob_safetensors_n_tensors(st), 2);
        const ob_st_tensor *t = ob_safetensors_find(st, "a.weight");
        CHECK(t != NULL);
        if (t) {
            CHECK_EQ_INT(t->dtype, OB_ST_F32);
            CHECK_EQ_INT(t->n_dims, 2);
            CHECK_EQ_INT(t->shape[0], 2);
            CHECK_EQ_INT(t->shape[1], 3);
            CHECK_EQ_INT(t->n_elements, 6);
            CHECK_EQ_INT(t->nbytes, 24);
            float x;
            memcpy(&x, t->data + 20, 4);
            CHECK(x == 6.0f);
        }
        t = ob_safetensors_find(st, "b.bias");
        CHECK(t && t->dtype == OB_ST_BF16 && t->n_elements == 4 && t->nbytes == 8);
        CHECK(ob_safetensors_find(st, "missing") == NULL);
        /* data-offset order */
        CHECK_EQ_STR(ob_safetensors_tensor_at(st, 0)->name, "a.weight");
        CHECK_EQ_STR(ob_safetensors_tensor_at(st, 1)->name, "b.bias");
        CHECK(ob_safetensors_tensor_at(st, 2) == NULL);
    }
    ob_safetensors_free(st);
    /* Also through a file and the mapping. */
    char *d = tmpdir();
    CHECK_EQ_INT(write_file(pj(d, "x.safetensors"), img, size), 0);
    CHECK_OK(ob_safetensors_open(pj(d, "x.safetensors"), &st));
    CHECK(st && ob_safetensors_find(st, "b.bias") != NULL);
    ob_safetensors_free(st);
    free(img);
    /* Empty header and scalar / zero-size tensors are legal. */
    img = st_raw("{}", 0, &size);
    CHECK_OK(ob_safetensors_open_memory(img, size, "mem", &st));
    CHECK(st && ob_safetensors_n_tensors(st) == 0);
    ob_safetensors_free(st);
    free(img);
    img = st_raw("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                 "\"z\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[4,4]}}",
                 4, &size);
    CHECK_OK(ob_safetensors_open_memory(img, size, "mem", &st));
    if (st) {
        const ob_st_tensor *t = ob_safetensors_find(st, "s");
        CHECK(t && t->n_dims == 0 && t->n_elements == 1);
        t = ob_safetensors_find(st, "z");
        CHECK(t && t->n_elements == 0 && t->nbytes == 0);
    }
    ob_safetensors_free(st);
    free(img);
    rm_rf(d);
}

/* Expect failure with `needle` in the message. */
static void expect_bad(const unsigned char *img, size_t size, const char *needle) {
    ob_safetensors *st = NULL;
    int rc = ob_safetensors_open_memory(img, size, "bad.safetensors", &st);
    CHECK_MSG(rc == OB_ERR_FORMAT, "expected a format error for '%s', got %d", needle, rc);
    CHECK(st == NULL);
    CHECK_MSG(strstr(ob_last_error(), needle) != NULL, "message '%s' lacks '%s'", ob_last_error(), needle);
    CHECK_MSG(strstr(ob_last_error(), "bad.safetensors") != NULL, "message '%s' lacks the file", ob_last_error());
    ob_safetensors_free(st);
}

static void expect_bad_header(const char *header, size_t data_len, const char *needle) {
    size_t size;
    unsigned char *img = st_raw(header, data_len, &size);
    expect_bad(img, size, needle);
    free(img);
}

TEST(safetensors_malformed_headers) {
    unsigned char tiny[5] = {0};
    expect_bad(tiny, sizeof tiny, "too short");
    /* header length past the end, and over the format's limit */
    unsigned char h1[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    expect_bad(h1, sizeof h1, "runs past the end");
    unsigned char *big = calloc(1, 8 + 4);
    uint64_t huge = 0xFFFFFFFFFFFFFFF0ull;
    memcpy(big, &huge, 8);
    expect_bad(big, 12, "runs past the end");
    free(big);
    expect_bad_header("{\"a\":", 0, "not valid JSON");
    expect_bad_header("[1,2]", 0, "not a JSON object");
    expect_bad_header("{\"a\":5}", 0, "'a'");
    expect_bad_header("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype");
    expect_bad_header("{\"a\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'F99'");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0]");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":\"x\",\"data_offsets\":[0,4]}}", 4, "'shape'");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape[0]");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                      "dimensions");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "end before");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "non-negative");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "run past the data");
    /* wrong byte count for dtype x shape */
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, "need 24 bytes");
    expect_bad_header("{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12, "need 6 bytes");
    /* element count and byte size overflow */
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
                      "overflows");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4,
                      "overflows");
    /* duplicate names would let one entry shadow another */
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                      4, "not valid JSON");
    expect_bad_header("{\"__metadata__\":[1]}", 0, "__metadata__");
    expect_bad_header("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "empty name");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]}}", 4,
                      "not valid JSON");
}

TEST(safetensors_truncated_at_every_length) {
    float a[8], b[3];
    for (int i = 0; i < 8; i++) a[i] = (float)i;
    for (int i = 0; i < 3; i++) b[i] = (float)-i;
    st_entry e[2] = {{"a", "F32", 2, {2, 4}, a, sizeof a}, {"b", "F32", 1, {3}, b, sizeof b}};
    size_t size;
    unsigned char *img = st_build(e, 2, &size);
    int ok = 0;
    for (size_t n = 0; n <= size; n++) {
        /* a fresh copy of exactly n bytes, so ASan sees any read past it */
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, img, n);
        ob_safetensors *st = NULL;
        int rc = ob_safetensors_open_memory(cut, n, "cut", &st);
        if (rc == 0) ok++;
        CHECK_MSG((rc == 0) == (n == size), "length %zu of %zu gave %d", n, size, rc);
        ob_safetensors_free(st);
        free(cut);
    }
    CHECK_EQ_INT(ok, 1);
    /* Random byte flips in the header: any result but a crash. */
    uint64_t rs = 7;
    for (int it = 0; it < 2000; it++) {
        unsigned char *m = malloc(size);
        memcpy(m, img, size);
        int flips = 1 + (int)(test_rand_u64(&rs) % 4);
        for (int f = 0; f < flips; f++) m[8 + test_rand_u64(&rs) % (size - 8)] = (unsigned char)test_rand_u64(&rs);
        ob_safetensors *st = NULL;
        if (ob_safetensors_open_memory(m, size, "flip", &st) == 0) {
            for (int64_t i = 0; i < ob_safetensors_n_tensors(st); i++) {
                const ob_st_tensor *t = ob_safetensors_tensor_at(st, i);
                CHECK(t->data >= m && t->data + t->nbytes <= m + size);
            }
        }
        ob_safetensors_free(st);
        free(m);
    }
    free(img);
}

TEST(safetensors_sharded_folder) {
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
    st_entry e1[1] = {{"a", "F32", 1, {4}, a, sizeof a}};
    st_entry e2[1] = {{"b", "F32", 1, {2}, b, sizeof b}};
    size_t s1, s2;
    unsigned char *i1 = st_build(e1, 1, &s1), *i2 = st_build(e2, 1, &s2);
    char *d = tmpdir();
    write_file(pj(d, "model-00001-of-00002.safetensors"), i1, s1);
    write_file(pj(d, "model-00002-of-00002.safetensors"), i2, s2);
    /* no index: every model*.safetensors */
    ob_st_set *set;
    CHECK_OK(ob_st_set_open_dir(d, &set));
    if (set) {
        CHECK_EQ_INT(ob_st_set_n_files(set), 2);
        CHECK_EQ_INT(ob_st_set_n_tensors(set), 2);
        const ob_st_tensor *t = ob_st_set_find(set, "b");
        CHECK(t && strstr(t->file, "00002") != NULL);
    }
    ob_st_set_free(set);
    /* with an index */
    json_t *idx = json_pack("{s:{s:s, s:s}}", "weight_map", "a", "model-00001-of-00002.safetensors", "b",
                            "model-00002-of-00002.safetensors");
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    CHECK_OK(ob_st_set_open_dir(d, &set));
    CHECK(set && ob_st_set_n_tensors(set) == 2 && ob_st_set_find(set, "a") != NULL);
    ob_st_set_free(set);
    /* index naming the wrong shard */
    idx = json_pack("{s:{s:s, s:s}}", "weight_map", "a", "model-00002-of-00002.safetensors", "b",
                    "model-00002-of-00002.safetensors");
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    CHECK(ob_st_set_open_dir(d, &set) == OB_ERR_FORMAT);
    CHECK(strstr(ob_last_error(), "'a'") != NULL);
    /* a shard tensor the index does not list */
    float c3[3] = {7, 8, 9};
    st_entry e3[2] = {{"a", "F32", 1, {4}, a, sizeof a}, {"c", "F32", 1, {3}, c3, sizeof c3}};
    size_t s3;
    unsigned char *i3 = st_build(e3, 2, &s3);
    write_file(pj(d, "model-00001-of-00002.safetensors"), i3, s3);
    free(i3);
    idx = json_pack("{s:{s:s, s:s}}", "weight_map", "a", "model-00001-of-00002.safetensors", "b",
                    "model-00002-of-00002.safetensors");
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    CHECK(ob_st_set_open_dir(d, &set) == OB_ERR_FORMAT);
    CHECK(strstr(ob_last_error(), "'c'") != NULL && strstr(ob_last_error(), "does not list") != NULL);
    /* a shard name that leaves the folder */
    idx = json_pack("{s:{s:s}}", "weight_map", "a", "../etc/passwd");
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    CHECK(ob_st_set_open_dir(d, &set) == OB_ERR_FORMAT);
    CHECK(strstr(ob_last_error(), "not a file name") != NULL);
    /* missing shard */
    idx = json_pack("{s:{s:s}}", "weight_map", "a", "model-00009-of-00009.safetensors");
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    CHECK(ob_st_set_open_dir(d, &set) == OB_ERR_IO);
    unlink(pj(d, "model.safetensors.index.json"));
    /* the same name in two shards */
    write_file(pj(d, "model-00002-of-00002.safetensors"), i1, s1);
    CHECK(ob_st_set_open_dir(d, &set) == OB_ERR_FORMAT);
    CHECK(strstr(ob_last_error(), "is in both") != NULL);
    /* nothing at all */
    char *e = tmpdir();
    CHECK(ob_st_set_open_dir(e, &set) == OB_ERR_NOT_FOUND);
    rm_rf(e);
    rm_rf(d);
    free(i1);
    free(i2);
}

/* ---------------------------------------------------------------------
 * Tiny Hugging Face folders
 * --------------------------------------------------------------------- */

typedef struct hf_spec {
    const char *arch;      /* "LlamaForCausalLM", ... */
    int n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim;
    bool tied, qkv_bias, qk_norm;
    const char *dtype;     /* "F32", "F16", "BF16" for every tensor */
    uint64_t seed;
} hf_spec;

/* One source tensor kept as float for comparisons (its values are exactly
 * representable in the source dtype). */
typedef struct src_tensor {
    char name[96];
    int n_dims;
    int64_t shape[2];
    float *v;
} src_tensor;

typedef struct hf_model {
    hf_spec spec;
    src_tensor t[128];
    int n;
} hf_model;

static void round_to(const char *dtype, float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (!strcmp(dtype, "F16")) v[i] = ob_fp16_to_fp32(ob_fp32_to_fp16(v[i]));
        if (!strcmp(dtype, "BF16")) v[i] = ob_bf16_to_fp32(ob_fp32_to_bf16(v[i]));
    }
}

static void add_t(hf_model *m, const char *name, int64_t d0, int64_t d1, int pattern) {
    src_tensor *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    int64_t n = d0 * (d1 ? d1 : 1);
    t->v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        /* pattern: row * 1000 + col encodes the position, exact in F16 too
         * for small shapes... not for BF16, which rounding handles below */
        t->v[i] = pattern ? (float)((i / (d1 ? d1 : 1)) * 1000 + (d1 ? i % d1 : 0)) / 1024.0f
                          : 0.5f * test_rand_normal(&m->spec.seed);
    }
    round_to(m->spec.dtype, t->v, n);
}

static void make_model(hf_model *m, const hf_spec *s) {
    memset(m, 0, sizeof *m);
    m->spec = *s;
    int q = s->n_head * s->head_dim, kv = s->n_head_kv * s->head_dim;
    add_t(m, "model.embed_tokens.weight", s->n_vocab, s->n_embd, 0);
    char b[128];
    for (int l = 0; l < s->n_layer; l++) {
#define L(x) (snprintf(b, sizeof b, "model.layers.%d.%s", l, x), b)
        add_t(m, L("input_layernorm.weight"), s->n_embd, 0, 0);
        add_t(m, L("self_attn.q_proj.weight"), q, s->n_embd, l == 0);
        add_t(m, L("self_attn.k_proj.weight"), kv, s->n_embd, l == 0);
        add_t(m, L("self_attn.v_proj.weight"), kv, s->n_embd, 0);
        add_t(m, L("self_attn.o_proj.weight"), s->n_embd, q, 0);
        if (s->qkv_bias) {
            add_t(m, L("self_attn.q_proj.bias"), q, 0, 0);
            add_t(m, L("self_attn.k_proj.bias"), kv, 0, 0);
            add_t(m, L("self_attn.v_proj.bias"), kv, 0, 0);
        }
        if (s->qk_norm) {
            add_t(m, L("self_attn.q_norm.weight"), s->head_dim, 0, 0);
            add_t(m, L("self_attn.k_norm.weight"), s->head_dim, 0, 0);
        }
        add_t(m, L("post_attention_layernorm.weight"), s->n_embd, 0, 0);
        add_t(m, L("mlp.gate_proj.weight"), s->n_ff, s->n_embd, 0);
        add_t(m, L("mlp.up_proj.weight"), s->n_ff, s->n_embd, 0);
        add_t(m, L("mlp.down_proj.weight"), s->n_embd, s->n_ff, 0);
#undef L
    }
    add_t(m, "model.norm.weight", s->n_embd, 0, 0);
    if (!s->tied) add_t(m, "lm_head.weight", s->n_vocab, s->n_embd, 0);
}

static void free_model(hf_model *m) {
    for (int i = 0; i < m->n; i++) free(m->t[i].v);
    m->n = 0;
}

static const src_tensor *src_find(const hf_model *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return &m->t[i];
    return NULL;
}

/* Encode tensors [from, to) in the spec's dtype into a safetensors file. */
static void write_weights_range(const hf_model *m, const char *path, int from, int to) {
    st_entry *e = calloc((size_t)(to - from), sizeof *e);
    void **bufs = calloc((size_t)(to - from), sizeof *bufs);
    const char *dt = m->spec.dtype;
    size_t es = !strcmp(dt, "F32") ? 4 : 2;
    for (int i = from; i < to; i++) {
        const src_tensor *t = &m->t[i];
        int64_t n = t->shape[0] * (t->n_dims == 2 ? t->shape[1] : 1);
        unsigned char *buf = malloc((size_t)n * es);
        for (int64_t k = 0; k < n; k++) {
            if (es == 4) {
                memcpy(buf + 4 * k, &t->v[k], 4);
            } else {
                uint16_t h = !strcmp(dt, "F16") ? ob_fp32_to_fp16(t->v[k]) : ob_fp32_to_bf16(t->v[k]);
                memcpy(buf + 2 * k, &h, 2);
            }
        }
        st_entry *x = &e[i - from];
        snprintf(x->name, sizeof x->name, "%s", t->name);
        x->dtype = dt;
        x->n_dims = t->n_dims;
        x->shape[0] = t->shape[0];
        x->shape[1] = t->shape[1];
        x->data = buf;
        x->nbytes = (size_t)n * es;
        bufs[i - from] = buf;
    }
    size_t size;
    unsigned char *img = st_build(e, to - from, &size);
    write_file(path, img, size);
    free(img);
    for (int i = 0; i < to - from; i++) free(bufs[i]);
    free(bufs);
    free(e);
}

static json_t *make_config(const hf_spec *s) {
    json_t *c = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:s, s:i, s:i}",
                          "architectures", s->arch, "model_type", "llama", "vocab_size", s->n_vocab, "hidden_size",
                          s->n_embd, "intermediate_size", s->n_ff, "num_hidden_layers", s->n_layer,
                          "num_attention_heads", s->n_head, "num_key_value_heads", s->n_head_kv, "head_dim",
                          s->head_dim, "max_position_embeddings", 256, "rms_norm_eps", 1e-5, "rope_theta", 10000.0,
                          "tie_word_embeddings", s->tied, "hidden_act", "silu", "bos_token_id", 1, "eos_token_id", 2);
    return c;
}

/* A small byte-level BPE tokenizer: base tokens, merges in the [a, b] pair
 * form (one part holding a space), added specials, and two ids left for
 * [PAD] padding. Returns the number of ids it names. */
static int write_tokenizer(const char *dir, int n_vocab, bool string_merges, bool spm) {
    json_t *vocab = json_object();
    int id = 0;
    if (spm) {
        json_object_set_new(vocab, "<unk>", json_integer(id++));
        json_object_set_new(vocab, "<s>", json_integer(id++));
        json_object_set_new(vocab, "</s>", json_integer(id++));
        for (int b = 0; b < 4; b++) {
            char t[8];
            snprintf(t, sizeof t, "<0x%02X>", b);
            json_object_set_new(vocab, t, json_integer(id++));
        }
    }
    const char *base[] = {"a", "b", "c", "d", "\xc4\xa0", "ab", "abc", "cd", "\xc4\xa0\x61", "b c"};
    for (size_t i = 0; i < OB_ARRAY_LEN(base); i++) json_object_set_new(vocab, base[i], json_integer(id++));
    int n_named = n_vocab - 2; /* two ids stay unnamed: [PAD] */
    int n_added = spm ? 0 : 3;
    while (id < n_named - n_added) {
        char t[16];
        snprintf(t, sizeof t, "x%d", id);
        json_object_set_new(vocab, t, json_integer(id++));
    }
    json_t *merges = string_merges ? json_pack("[s,s,s]", "a b", "ab c", "c d")
                                   : json_pack("[[s,s],[s,s],[s,s],[s,s]]", "a", "b", "ab", "c", "c", "d", "\xc4\xa0",
                                               "b c");
    json_t *added = json_array();
    if (!spm) {
        json_array_append_new(added, json_pack("{s:i,s:s,s:b}", "id", id, "content", "<|bos|>", "special", 1));
        json_array_append_new(added, json_pack("{s:i,s:s,s:b}", "id", id + 1, "content", "<|eos|>", "special", 1));
        json_array_append_new(added, json_pack("{s:i,s:s,s:b}", "id", id + 2, "content", "<tool>", "special", 0));
    } else {
        json_array_append_new(added, json_pack("{s:i,s:s,s:b}", "id", 1, "content", "<s>", "special", 1));
        json_array_append_new(added, json_pack("{s:i,s:s,s:b}", "id", 2, "content", "</s>", "special", 1));
    }
    json_t *model = json_pack("{s:s, s:o, s:o, s:b, s:b}", "type", "BPE", "vocab", vocab, "merges", merges,
                              "byte_fallback", spm, "ignore_merges", 0);
    if (spm) json_object_set_new(model, "unk_token", json_string("<unk>"));
    json_t *pre = spm ? json_null()
                      : json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                                  "use_regex", 1);
    json_t *dec = json_pack("{s:s}", "type", spm ? "Sequence" : "ByteLevel");
    json_t *tok = json_pack("{s:s, s:o, s:o, s:o, s:o}", "version", "1.0", "added_tokens", added, "pre_tokenizer", pre,
                            "decoder", dec, "model", model);
    write_json(pj(dir, "tokenizer.json"), tok);
    json_decref(tok);
    json_t *tc = spm ? json_pack("{s:s, s:s, s:s, s:b, s:b}", "bos_token", "<s>", "eos_token", "</s>", "unk_token",
                                 "<unk>", "add_bos_token", 1, "add_eos_token", 0)
                     : json_pack("{s:s, s:{s:s}, s:s, s:b, s:s}", "bos_token", "<|bos|>", "eos_token", "content",
                                 "<|eos|>", "chat_template", "{{ messages[0]['content'] }}", "add_bos_token", 1,
                                 "tokenizer_class", "PreTrainedTokenizerFast");
    write_json(pj(dir, "tokenizer_config.json"), tc);
    json_decref(tc);
    return n_named;
}

/* Write a full folder for spec into a new temp dir. */
static char *write_folder(hf_model *m, const hf_spec *s, json_t *extra_config) {
    make_model(m, s);
    char *d = tmpdir();
    json_t *c = make_config(s);
    if (extra_config) json_object_update(c, extra_config);
    write_json(pj(d, "config.json"), c);
    json_decref(c);
    write_weights_range(m, pj(d, "model.safetensors"), 0, m->n);
    write_tokenizer(d, s->n_vocab, false, false);
    return d;
}

static const hf_spec LLAMA = {"LlamaForCausalLM", 48, 64, 96, 2, 4, 2, 16, false, false, false, "F32", 11};

/* Tensor as float via the reference dequantizers. */
static float *gguf_floats(const ob_gguf_tensor *t) {
    int64_t n = ob_gguf_tensor_nelements(t);
    float *v = malloc((size_t)n * sizeof(float));
    const ob_type_traits *tr = ob_type_get((int)t->type);
    if (tr && tr->to_float) tr->to_float(t->data, v, n);
    return v;
}

static uint32_t key_u32(const ob_gguf *g, const char *k) {
    uint32_t v = 0xFFFFFFFFu;
    CHECK_MSG(ob_gguf_get_u32(g, k, &v) == 0, "key %s", k);
    return v;
}

static float key_f32(const ob_gguf *g, const char *k) {
    float v = NAN;
    CHECK_MSG(ob_gguf_get_f32(g, k, &v) == 0, "key %s", k);
    return v;
}

static const char *key_str(const ob_gguf *g, const char *k) {
    const char *v = NULL;
    CHECK_MSG(ob_gguf_get_str(g, k, &v) == 0, "key %s", k);
    return v;
}

static ob_gguf *convert_open(const char *dir, ob_type outtype, const char *out) {
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = outtype;
    CHECK_OK(ob_convert_hf(dir, out, &o));
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open(out, &g));
    return g;
}

/* Source row of output row r, written independently of the converter:
 * HF keeps each head's pairs split in halves, ggml interleaves them. */
static int64_t expect_src_row(int64_t r, int64_t head_dim) {
    int64_t h = r / head_dim, k = r % head_dim, half = head_dim / 2;
    return h * head_dim + (k & 1 ? half + k / 2 : k / 2);
}

TEST(convert_llama_f32_keys_names_shapes) {
    hf_model m;
    char *d = write_folder(&m, &LLAMA, NULL);
    const char *out = pj(d, "out.gguf");
    ob_gguf *g = convert_open(d, OB_TYPE_F32, out);
    if (g) {
        CHECK_EQ_STR(key_str(g, "general.architecture"), "llama");
        CHECK_EQ_STR(key_str(g, "general.name"), strrchr(d, '/') + 1);
        CHECK_EQ_INT(key_u32(g, "general.file_type"), 0);
        CHECK_EQ_INT(key_u32(g, "llama.block_count"), 2);
        CHECK_EQ_INT(key_u32(g, "llama.context_length"), 256);
        CHECK_EQ_INT(key_u32(g, "llama.embedding_length"), 64);
        CHECK_EQ_INT(key_u32(g, "llama.feed_forward_length"), 96);
        CHECK_EQ_INT(key_u32(g, "llama.attention.head_count"), 4);
        CHECK_EQ_INT(key_u32(g, "llama.attention.head_count_kv"), 2);
        CHECK_EQ_INT(key_u32(g, "llama.rope.dimension_count"), 16);
        CHECK_EQ_INT(key_u32(g, "llama.vocab_size"), 48);
        CHECK_NEAR(key_f32(g, "llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
        CHECK_NEAR(key_f32(g, "llama.rope.freq_base"), 10000.0, 0);
        /* config.json states head_dim, so llama.cpp writes key/value length */
        CHECK_EQ_INT(key_u32(g, "llama.attention.key_length"), 16);
        CHECK(ob_gguf_get(g, "llama.rope.scaling.type") == NULL);
        CHECK(ob_gguf_get(g, "llama.attention.sliding_window") == NULL);
        CHECK(ob_gguf_find_tensor(g, "rope_freqs.weight") == NULL);
        /* every tensor, named and shaped as llama.cpp does, all F32 here */
        static const struct {
            const char *name;
            int64_t ne0, ne1;
        } want[] = {
            {"token_embd.weight", 64, 48},      {"output_norm.weight", 64, 1},     {"output.weight", 64, 48},
            {"blk.0.attn_norm.weight", 64, 1},  {"blk.0.attn_q.weight", 64, 64},   {"blk.0.attn_k.weight", 64, 32},
            {"blk.0.attn_v.weight", 64, 32},    {"blk.0.attn_output.weight", 64, 64}, {"blk.0.ffn_norm.weight", 64, 1},
            {"blk.0.ffn_gate.weight", 64, 96},  {"blk.0.ffn_up.weight", 64, 96},   {"blk.0.ffn_down.weight", 96, 64},
            {"blk.1.attn_q.weight", 64, 64},    {"blk.1.ffn_down.weight", 96, 64},
        };
        for (size_t i = 0; i < OB_ARRAY_LEN(want); i++) {
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, want[i].name);
            CHECK_MSG(t != NULL, "missing %s", want[i].name);
            if (!t) continue;
            CHECK_EQ_INT(t->type, OB_TYPE_F32);
            CHECK_EQ_INT(t->ne[0], want[i].ne0);
            CHECK_EQ_INT(t->ne[1], want[i].ne1);
        }
        CHECK_EQ_INT(ob_gguf_n_tensors(g), 3 + 2 * 9);
        /* unpermuted tensors are bit-identical */
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.1.attn_v.weight");
        const src_tensor *s = src_find(&m, "model.layers.1.self_attn.v_proj.weight");
        CHECK(t && s && memcmp(t->data, s->v, t->nbytes) == 0);
        /* q and k: rows permuted within each head (q: 4 heads, k: 2) */
        const char *qk[2][2] = {{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
                                {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"}};
        for (int w = 0; w < 2; w++) {
            t = ob_gguf_find_tensor(g, qk[w][0]);
            s = src_find(&m, qk[w][1]);
            if (!t || !s) continue;
            const float *x = t->data;
            int bad = 0;
            for (int64_t r = 0; r < t->ne[1]; r++) {
                int64_t sr = expect_src_row(r, 16);
                CHECK_EQ_INT(ob_convert_qk_src_row(r, t->ne[1], t->ne[1] / 16), sr);
                bad += memcmp(x + r * 64, s->v + sr * 64, 64 * sizeof(float)) != 0;
            }
            CHECK_EQ_INT(bad, 0);
            /* the pattern encodes the source row: row r of the output holds
             * source row expect_src_row(r) */
            CHECK_NEAR(x[1 * 64] * 1024.0f, (float)(expect_src_row(1, 16) * 1000), 0);
        }
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);
}

/* Apply RoPE at position pos to vector x of n_head heads of hd dims.
 * neox: HF's rotate_half (dim i pairs with i + hd/2); else ggml's normal
 * mode (dim 2i pairs with 2i+1). Both rotate pair i by pos * theta^(-2i/hd). */
static void rope(float *x, int n_head, int hd, int pos, bool neox) {
    for (int h = 0; h < n_head; h++) {
        float *v = x + h * hd;
        for (int i = 0; i < hd / 2; i++) {
            double ang = pos * pow(10000.0, -2.0 * i / hd);
            int a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
            double x0 = v[a], x1 = v[b];
            v[a] = (float)(x0 * cos(ang) - x1 * sin(ang));
            v[b] = (float)(x0 * sin(ang) + x1 * cos(ang));
        }
    }
}

static void matvec(const float *w, const float *x, float *y, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int c = 0; c < cols; c++) s += (double)w[r * cols + c] * x[c];
        y[r] = (float)s;
    }
}

/* What the permutation is for: attention scores q.k computed by HF (rotate_half
 * RoPE on the original weights) equal those computed the ggml way (normal
 * RoPE on the converted weights), head by head, at every position. */
TEST(convert_llama_permutation_matches_rope_conventions) {
    hf_spec s = LLAMA;
    s.seed = 99;
    hf_model m;
    char *d = write_folder(&m, &s, NULL);
    ob_gguf *g = convert_open(d, OB_TYPE_F32, pj(d, "out.gguf"));
    if (g) {
        const int E = 64, HD = 16, NH = 4, NKV = 2;
        const ob_gguf_tensor *gq = ob_gguf_find_tensor(g, "blk.1.attn_q.weight");
        const ob_gguf_tensor *gk = ob_gguf_find_tensor(g, "blk.1.attn_k.weight");
        const src_tensor *hq = src_find(&m, "model.layers.1.self_attn.q_proj.weight");
        const src_tensor *hk = src_find(&m, "model.layers.1.self_attn.k_proj.weight");
        uint64_t rs = 5;
        float x[64], y[64], q_hf[64], k_hf[32], q_gg[64], k_gg[32];
        double max_err = 0;
        for (int trial = 0; trial < 8 && gq && gk && hq && hk; trial++) {
            for (int i = 0; i < E; i++) x[i] = test_rand_normal(&rs), y[i] = test_rand_normal(&rs);
            int pq = trial * 7 + 1, pk = trial * 3;
            matvec(hq->v, x, q_hf, NH * HD, E);
            matvec(hk->v, y, k_hf, NKV * HD, E);
            matvec(gq->data, x, q_gg, NH * HD, E);
            matvec(gk->data, y, k_gg, NKV * HD, E);
            rope(q_hf, NH, HD, pq, true);
            rope(k_hf, NKV, HD, pk, true);
            rope(q_gg, NH, HD, pq, false);
            rope(k_gg, NKV, HD, pk, false);
            for (int h = 0; h < NH; h++) {
                int hk_ = h / (NH / NKV);
                double s_hf = 0, s_gg = 0;
                for (int i = 0; i < HD; i++) {
                    s_hf += (double)q_hf[h * HD + i] * k_hf[hk_ * HD + i];
                    s_gg += (double)q_gg[h * HD + i] * k_gg[hk_ * HD + i];
                }
                double e = fabs(s_hf - s_gg) / (1 + fabs(s_hf));
                if (e > max_err) max_err = e;
            }
        }
        CHECK_MSG(max_err < 1e-5, "q.k differs between conventions by %g", max_err);
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);
}

TEST(convert_llama_tokenizer_keys) {
    hf_model m;
    char *d = write_folder(&m, &LLAMA, NULL);
    ob_gguf *g = convert_open(d, OB_TYPE_F32, pj(d, "out.gguf"));
    if (g) {
        CHECK_EQ_STR(key_str(g, "tokenizer.ggml.model"), "gpt2");
        CHECK_EQ_STR(key_str(g, "tokenizer.ggml.pre"), "gpt-2");
        const ob_gguf_array *toks = NULL, *types = NULL, *merges = NULL;
        CHECK_OK(ob_gguf_get_arr(g, "tokenizer.ggml.tokens", OB_GGUF_STRING, &toks));
        CHECK_OK(ob_gguf_get_arr(g, "tokenizer.ggml.token_type", OB_GGUF_I32, &types));
        CHECK_OK(ob_gguf_get_arr(g, "tokenizer.ggml.merges", OB_GGUF_STRING, &merges));
        CHECK(ob_gguf_get(g, "tokenizer.ggml.scores") == NULL);
        if (toks && types && merges) {
            CHECK_EQ_INT(toks->n, 48);
            CHECK_EQ_INT(types->n, 48);
            const ob_gguf_str *ts = toks->data;
            const int32_t *ty = types->data;
            CHECK_EQ_STR(ts[0].s, "a");
            CHECK_EQ_STR(ts[5].s, "ab");
            CHECK_EQ_INT(ty[0], 1);
            /* added: specials are control, "<tool>" user-defined */
            CHECK_EQ_STR(ts[43].s, "<|bos|>");
            CHECK_EQ_INT(ty[43], 3);
            CHECK_EQ_STR(ts[44].s, "<|eos|>");
            CHECK_EQ_INT(ty[44], 3);
            CHECK_EQ_STR(ts[45].s, "<tool>");
            CHECK_EQ_INT(ty[45], 4);
            /* ids the tokenizer does not name: padding, unused */
            CHECK_EQ_STR(ts[46].s, "[PAD46]");
            CHECK_EQ_INT(ty[46], 5);
            CHECK_EQ_INT(ty[47], 5);
            const ob_gguf_str *ms = merges->data;
            CHECK_EQ_INT(merges->n, 4);
            CHECK_EQ_STR(ms[0].s, "a b");
            CHECK_EQ_STR(ms[1].s, "ab c");
            /* a space inside a part of the pair form becomes U+0120 */
            CHECK_EQ_STR(ms[3].s, "\xc4\xa0 b\xc4\xa0" "c");
        }
        CHECK_EQ_INT(key_u32(g, "tokenizer.ggml.bos_token_id"), 43);
        CHECK_EQ_INT(key_u32(g, "tokenizer.ggml.eos_token_id"), 44);
        bool b = false;
        CHECK_OK(ob_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b));
        CHECK(b);
        CHECK(ob_gguf_get(g, "tokenizer.ggml.add_eos_token") == NULL);
        CHECK_EQ_STR(key_str(g, "tokenizer.chat_template"), "{{ messages[0]['content'] }}");
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);
}

TEST(convert_tokenizer_string_merges_spm_and_pre_names) {
    hf_spec s = LLAMA;
    hf_model m;
    char *d = write_folder(&m, &s, NULL);
    /* SentencePiece-style (byte_fallback) with string merges */
    write_tokenizer(d, s.n_vocab, true, true);
    ob_gguf *g = convert_open(d, OB_TYPE_F32, pj(d, "spm.gguf"));
    if (g) {
        CHECK_EQ_STR(key_str(g, "tokenizer.ggml.model"), "llama");
        CHECK_EQ_STR(key_str(g, "tokenizer.ggml.pre"), "default");
        const ob_gguf_array *toks = NULL, *types = NULL, *scores = NULL;
        CHECK_OK(ob_gguf_get_arr(g, "tokenizer.ggml.tokens", OB_GGUF_STRING, &toks));
        CHECK_OK(ob_gguf_get_arr(g, "tokenizer.ggml.token_type", OB_GGUF_I32, &types));
        CHECK_OK(ob_gguf_get_arr(g, "tokenizer.ggml.scores", OB_GGUF_F32, &scores));
        if (toks && types && scores) {
            const int32_t *ty = types->data;
            const float *sc = scores->data;
            CHECK_EQ_INT(ty[0], 2); /* <unk> */
            CHECK_EQ_INT(ty[1], 3); /* <s> */
            CHECK_EQ_INT(ty[2], 3);
            CHECK_EQ_INT(ty[3], 6); /* <0x00> */
            CHECK_EQ_INT(ty[6], 6);
            CHECK_EQ_INT(ty[7], 1); /* "a" */
            /* merges "a b" (rank 0) -> "ab" id 12, "ab c" -> "abc" id 13, "c d" -> "cd" id 14 */
            CHECK_NEAR(sc[12], -1.0, 0);
            CHECK_NEAR(sc[13], -2.0, 0);
            CHECK_NEAR(sc[14], -3.0, 0);
            CHECK(sc[7] < -1e8f);   /* no merge makes "a" */
            CHECK_NEAR(sc[0], 0, 0); /* unk, control, byte: 0 */
            CHECK_NEAR(sc[3], 0, 0);
        }
        CHECK_EQ_INT(key_u32(g, "tokenizer.ggml.unknown_token_id"), 0);
        CHECK_EQ_INT(key_u32(g, "tokenizer.ggml.bos_token_id"), 1);
        CHECK_EQ_INT(key_u32(g, "tokenizer.ggml.eos_token_id"), 2);
        ob_gguf_free(g);
    }
    /* pre-tokenizer names from the definition */
    static const struct {
        const char *pre_json, *want;
        bool ignore_merges;
    } cases[] = {
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
         "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":"
         "\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
         "\"use_regex\":false}]}",
         "llama-bpe", true},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
         "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":"
         "\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
         "\"use_regex\":false}]}",
         "qwen2", false},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
         "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}]}",
         "smollm", false},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x+\"},"
         "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
         "default", false},
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(cases); i++) {
        write_tokenizer(d, s.n_vocab, true, false);
        json_t *tok = json_load_file(pj(d, "tokenizer.json"), 0, NULL);
        json_t *pre = json_loads(cases[i].pre_json, 0, NULL);
        CHECK_MSG(pre != NULL, "case %zu json", i);
        json_object_set_new(tok, "pre_tokenizer", pre);
        json_object_set_new(json_object_get(tok, "model"), "ignore_merges", json_boolean(cases[i].ignore_merges));
        write_json(pj(d, "tokenizer.json"), tok);
        json_decref(tok);
        g = convert_open(d, OB_TYPE_F32, pj(d, "pre.gguf"));
        if (g) {
            CHECK_EQ_STR(key_str(g, "tokenizer.ggml.pre"), cases[i].want);
            const ob_gguf_array *merges = NULL;
            CHECK_OK(ob_gguf_get_arr(g, "tokenizer.ggml.merges", OB_GGUF_STRING, &merges));
            CHECK(merges && merges->n == 3 && !strcmp(((const ob_gguf_str *)merges->data)[2].s, "c d"));
            ob_gguf_free(g);
        }
    }
    free_model(&m);
    rm_rf(d);
}

TEST(convert_tied_and_qwen2_qwen3) {
    /* tied llama: no output.weight, lm_head absent */
    hf_spec s = LLAMA;
    s.tied = true;
    hf_model m;
    char *d = write_folder(&m, &s, NULL);
    ob_gguf *g = convert_open(d, OB_TYPE_F32, pj(d, "out.gguf"));
    if (g) {
        CHECK(ob_gguf_find_tensor(g, "output.weight") == NULL);
        CHECK(ob_gguf_find_tensor(g, "token_embd.weight") != NULL);
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);

    /* qwen2: q/k/v biases, no permutation */
    s = LLAMA;
    s.arch = "Qwen2ForCausalLM";
    s.qkv_bias = true;
    d = write_folder(&m, &s, NULL);
    g = convert_open(d, OB_TYPE_F32, pj(d, "out.gguf"));
    if (g) {
        CHECK_EQ_STR(key_str(g, "general.architecture"), "qwen2");
        CHECK_EQ_INT(key_u32(g, "qwen2.block_count"), 2);
        static const char *pairs[][2] = {
            {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
            {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"},
            {"blk.0.attn_q.bias", "model.layers.0.self_attn.q_proj.bias"},
            {"blk.1.attn_k.bias", "model.layers.1.self_attn.k_proj.bias"},
            {"blk.1.attn_v.bias", "model.layers.1.self_attn.v_proj.bias"},
        };
        for (size_t i = 0; i < OB_ARRAY_LEN(pairs); i++) {
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, pairs[i][0]);
            const src_tensor *st = src_find(&m, pairs[i][1]);
            CHECK_MSG(t && st && t->type == OB_TYPE_F32 && memcmp(t->data, st->v, t->nbytes) == 0, "%s",
                      pairs[i][0]);
        }
        const ob_gguf_tensor *b = ob_gguf_find_tensor(g, "blk.0.attn_q.bias");
        CHECK(b && b->n_dims == 1 && b->ne[0] == 64);
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);

    /* qwen3: q/k norms, head_dim 32 != 64 / 4, tied */
    s = LLAMA;
    s.arch = "Qwen3ForCausalLM";
    s.qk_norm = true;
    s.head_dim = 32;
    s.tied = true;
    d = write_folder(&m, &s, NULL);
    g = convert_open(d, OB_TYPE_F16, pj(d, "out.gguf"));
    if (g) {
        CHECK_EQ_STR(key_str(g, "general.architecture"), "qwen3");
        CHECK_EQ_INT(key_u32(g, "qwen3.attention.key_length"), 32);
        CHECK_EQ_INT(key_u32(g, "qwen3.attention.value_length"), 32);
        CHECK_EQ_INT(key_u32(g, "qwen3.rope.dimension_count"), 32);
        CHECK_EQ_INT(key_u32(g, "general.file_type"), 1);
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.1.attn_q_norm.weight");
        CHECK(t && t->type == OB_TYPE_F32 && t->ne[0] == 32);
        t = ob_gguf_find_tensor(g, "blk.1.attn_k_norm.weight");
        CHECK(t && t->type == OB_TYPE_F32 && t->ne[0] == 32);
        t = ob_gguf_find_tensor(g, "blk.0.attn_q.weight");
        CHECK(t && t->type == OB_TYPE_F16 && t->ne[0] == 64 && t->ne[1] == 128);
        t = ob_gguf_find_tensor(g, "blk.0.attn_output.weight");
        CHECK(t && t->ne[0] == 128 && t->ne[1] == 64);
        t = ob_gguf_find_tensor(g, "blk.0.attn_norm.weight");
        CHECK(t && t->type == OB_TYPE_F32);
        CHECK(ob_gguf_find_tensor(g, "output.weight") == NULL);
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);
}

/* Max |a - b| over a tensor, and the max |b|. */
static void diff_stats(const float *a, const float *b, int64_t n, double *max_abs, double *max_ref) {
    *max_abs = *max_ref = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > *max_abs) *max_abs = e;
        if (fabs(b[i]) > *max_ref) *max_ref = fabs(b[i]);
    }
}

/* F16, BF16 and Q8_0 output dequantizes close to the source: within half an
 * ulp of the target format (F16: 2^-11 relative, BF16: 2^-8), and for Q8_0
 * within half a quantization step of each 32-block (amax / 254) plus the
 * F16 rounding of the block scale. */
TEST(convert_outtypes_dequantize_close) {
    hf_spec s = LLAMA;
    s.n_ff = 80; /* ffn_down rows of 80 are not Q8_0 blocks: that matrix stays F16 */
    hf_model m;
    char *d = write_folder(&m, &s, NULL);
    static const ob_type types[] = {OB_TYPE_F16, OB_TYPE_BF16, OB_TYPE_Q8_0};
    for (size_t ti = 0; ti < OB_ARRAY_LEN(types); ti++) {
        ob_gguf *g = convert_open(d, types[ti], pj(d, "q.gguf"));
        if (!g) continue;
        CHECK_EQ_INT(key_u32(g, "general.file_type"), types[ti] == OB_TYPE_F16 ? 1 : types[ti] == OB_TYPE_BF16 ? 32 : 7);
        for (int i = 0; i < m.n; i++) {
            const src_tensor *st = &m.t[i];
            /* GGUF name from the source name */
            char gname[96];
            int layer;
            char rest[96];
            if (sscanf(st->name, "model.layers.%d.%95s", &layer, rest) == 2) {
                static const char *map[][2] = {
                    {"input_layernorm.weight", "attn_norm.weight"},   {"self_attn.q_proj.weight", "attn_q.weight"},
                    {"self_attn.k_proj.weight", "attn_k.weight"},     {"self_attn.v_proj.weight", "attn_v.weight"},
                    {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
                    {"mlp.gate_proj.weight", "ffn_gate.weight"},      {"mlp.up_proj.weight", "ffn_up.weight"},
                    {"mlp.down_proj.weight", "ffn_down.weight"},
                };
                gname[0] = 0;
                for (size_t k = 0; k < OB_ARRAY_LEN(map); k++)
                    if (!strcmp(rest, map[k][0])) snprintf(gname, sizeof gname, "blk.%d.%s", layer, map[k][1]);
            } else {
                snprintf(gname, sizeof gname, "%s",
                         !strcmp(st->name, "model.embed_tokens.weight") ? "token_embd.weight"
                         : !strcmp(st->name, "model.norm.weight")       ? "output_norm.weight"
                                                                         : "output.weight");
            }
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, gname);
            CHECK_MSG(t != NULL, "missing %s", gname);
            if (!t) continue;
            bool is_q = strstr(gname, "attn_q.") || strstr(gname, "attn_k.");
            ob_type want = st->n_dims == 1 ? OB_TYPE_F32 : types[ti];
            if (want == OB_TYPE_Q8_0 && strstr(gname, "ffn_down")) want = OB_TYPE_F16;
            CHECK_MSG(t->type == want, "%s is %s", gname, ob_type_name(t->type));
            float *v = gguf_floats(t);
            int64_t n = ob_gguf_tensor_nelements(t);
            /* undo the q/k permutation for the comparison */
            float *ref = malloc((size_t)n * sizeof(float));
            int64_t cols = t->ne[0];
            for (int64_t r = 0; r < t->ne[1]; r++) {
                int64_t sr = is_q ? expect_src_row(r, 16) : r;
                memcpy(ref + r * cols, st->v + sr * cols, (size_t)cols * sizeof(float));
            }
            if (t->type == OB_TYPE_Q8_0) {
                int bad = 0;
                for (int64_t b = 0; b < n / 32; b++) {
                    double amax = 0, emax = 0;
                    for (int k = 0; k < 32; k++) {
                        amax = fmax(amax, fabs(ref[b * 32 + k]));
                        emax = fmax(emax, fabs((double)v[b * 32 + k] - ref[b * 32 + k]));
                    }
                    /* half a step, plus the scale's F16 rounding over 127 steps */
                    if (emax > amax / 254.0 + amax * 1e-3 + 1e-7) bad++;
                }
                CHECK_MSG(bad == 0, "%s: %d Q8_0 blocks out of bound", gname, bad);
            } else {
                double rel = t->type == OB_TYPE_F32 ? 0 : t->type == OB_TYPE_F16 ? 1.0 / 2048 : 1.0 / 256;
                int bad = 0;
                for (int64_t k = 0; k < n; k++)
                    if (fabs((double)v[k] - ref[k]) > rel * fabs(ref[k]) + 1e-7) bad++;
                CHECK_MSG(bad == 0, "%s (%s): %d values out of bound", gname, ob_type_name(t->type), bad);
            }
            double ma, mr;
            diff_stats(v, ref, n, &ma, &mr);
            CHECK_MSG(ma <= mr * 0.01, "%s: max error %g of %g", gname, ma, mr);
            free(ref);
            free(v);
        }
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);
}

/* Source F16 and BF16 weights: F32 output is exact, same-type output is a
 * byte copy (or a row shuffle for q/k), cross conversion rounds once. */
TEST(convert_half_sources) {
    static const char *dts[] = {"F16", "BF16"};
    for (int di = 0; di < 2; di++) {
        hf_spec s = LLAMA;
        s.dtype = dts[di];
        hf_model m;
        char *d = write_folder(&m, &s, NULL);
        static const ob_type outs[] = {OB_TYPE_F32, OB_TYPE_F16, OB_TYPE_BF16};
        for (int oi = 0; oi < 3; oi++) {
            ob_gguf *g = convert_open(d, outs[oi], pj(d, "h.gguf"));
            if (!g) continue;
            const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.0.attn_k.weight");
            const src_tensor *st = src_find(&m, "model.layers.0.self_attn.k_proj.weight");
            if (t && st) {
                float *v = gguf_floats(t);
                int bad = 0;
                for (int64_t r = 0; r < t->ne[1]; r++)
                    for (int64_t c = 0; c < t->ne[0]; c++) {
                        float want = st->v[expect_src_row(r, 16) * t->ne[0] + c];
                        bool same = (outs[oi] == OB_TYPE_F32) || (outs[oi] == OB_TYPE_F16 && di == 0) ||
                                    (outs[oi] == OB_TYPE_BF16 && di == 1);
                        float got = v[r * t->ne[0] + c];
                        if (same ? got != want : fabsf(got - want) > fabsf(want) / 128 + 1e-6f) bad++;
                    }
                CHECK_MSG(bad == 0, "%s -> %s: %d values", dts[di], ob_type_name(outs[oi]), bad);
                free(v);
            }
            /* norms are F32 whatever the source */
            t = ob_gguf_find_tensor(g, "output_norm.weight");
            CHECK(t && t->type == OB_TYPE_F32);
            ob_gguf_free(g);
        }
        free_model(&m);
        rm_rf(d);
    }
}

TEST(convert_rope_scaling_and_sliding_window) {
    /* linear, transformers 4.x form */
    hf_model m;
    json_t *x = json_pack("{s:{s:s, s:f}}", "rope_scaling", "type", "linear", "factor", 2.0);
    char *d = write_folder(&m, &LLAMA, x);
    json_decref(x);
    ob_gguf *g = convert_open(d, OB_TYPE_F32, pj(d, "o.gguf"));
    if (g) {
        CHECK_EQ_STR(key_str(g, "llama.rope.scaling.type"), "linear");
        CHECK_NEAR(key_f32(g, "llama.rope.scaling.factor"), 2.0, 0);
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);

    /* yarn, transformers 5 form (theta inside rope_parameters) */
    x = json_pack("{s:{s:s, s:f, s:i, s:f, s:f}}", "rope_parameters", "rope_type", "yarn", "factor", 4.0,
                  "original_max_position_embeddings", 64, "rope_theta", 50000.0, "beta_fast", 16.0);
    d = write_folder(&m, &LLAMA, x);
    json_decref(x);
    g = convert_open(d, OB_TYPE_F32, pj(d, "o.gguf"));
    if (g) {
        CHECK_EQ_STR(key_str(g, "llama.rope.scaling.type"), "yarn");
        CHECK_NEAR(key_f32(g, "llama.rope.scaling.factor"), 4.0, 0);
        CHECK_EQ_INT(key_u32(g, "llama.rope.scaling.original_context_length"), 64);
        CHECK_NEAR(key_f32(g, "llama.rope.freq_base"), 50000.0, 0);
        CHECK_NEAR(key_f32(g, "llama.rope.scaling.yarn_beta_fast"), 16.0, 0);
        CHECK(ob_gguf_get(g, "llama.rope.scaling.yarn_beta_slow") == NULL);
        CHECK(ob_gguf_get(g, "llama.rope.scaling.yarn_attn_factor") == NULL);
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);

    /* llama3: rope_freqs.weight, computed independently here in double */
    x = json_pack("{s:{s:s, s:f, s:f, s:f, s:i, s:f}}", "rope_parameters", "rope_type", "llama3", "factor", 8.0,
                  "low_freq_factor", 1.0, "high_freq_factor", 4.0, "original_max_position_embeddings", 64,
                  "rope_theta", 10000.0);
    d = write_folder(&m, &LLAMA, x);
    json_decref(x);
    g = convert_open(d, OB_TYPE_Q8_0, pj(d, "o.gguf"));
    if (g) {
        CHECK(ob_gguf_get(g, "llama.rope.scaling.type") == NULL);
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "rope_freqs.weight");
        CHECK(t && t->type == OB_TYPE_F32 && t->n_dims == 1 && t->ne[0] == 8);
        if (t) {
            const float *f = t->data;
            int n_one = 0, n_factor = 0, n_mid = 0;
            for (int i = 0; i < 8; i++) {
                double freq = pow(10000.0, -2.0 * i / 16), wl = 2 * M_PI / freq, want;
                if (wl < 64.0 / 4)
                    want = 1, n_one++;
                else if (wl > 64.0 / 1)
                    want = 8, n_factor++;
                else {
                    double sm = (64.0 / wl - 1) / (4 - 1);
                    want = 1 / ((1 - sm) / 8 + sm);
                    n_mid++;
                }
                CHECK_NEAR(f[i], want, 1e-5 * want);
            }
            /* this geometry exercises all three branches */
            CHECK(n_one > 0 && n_factor > 0 && n_mid > 0);
        }
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);

    /* mistral: sliding window, llama arch, permuted */
    hf_spec s = LLAMA;
    s.arch = "MistralForCausalLM";
    x = json_pack("{s:i}", "sliding_window", 16);
    d = write_folder(&m, &s, x);
    json_decref(x);
    g = convert_open(d, OB_TYPE_F32, pj(d, "o.gguf"));
    if (g) {
        CHECK_EQ_STR(key_str(g, "general.architecture"), "llama");
        CHECK_EQ_INT(key_u32(g, "llama.attention.sliding_window"), 16);
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.0.attn_q.weight");
        const src_tensor *st = src_find(&m, "model.layers.0.self_attn.q_proj.weight");
        CHECK(t && st && memcmp((const float *)t->data + 64, st->v + expect_src_row(1, 16) * 64, 256) == 0);
        ob_gguf_free(g);
    }
    free_model(&m);
    rm_rf(d);
}

/* The same model from two index-listed shards, with the scratch area forced
 * into a temporary file, gives a byte-identical GGUF. */
TEST(convert_shards_and_file_scratch_identical) {
    hf_model m;
    char *d = write_folder(&m, &LLAMA, NULL);
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_Q8_0;
    CHECK_OK(ob_convert_hf(d, pj(d, "a.gguf"), &o));
    /* re-shard: first half / second half */
    unlink(pj(d, "model.safetensors"));
    int half = m.n / 2;
    write_weights_range(&m, pj(d, "model-00001-of-00002.safetensors"), 0, half);
    write_weights_range(&m, pj(d, "model-00002-of-00002.safetensors"), half, m.n);
    json_t *wm = json_object();
    for (int i = 0; i < m.n; i++)
        json_object_set_new(wm, m.t[i].name,
                            json_string(i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors"));
    json_t *idx = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 0, "weight_map", wm);
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    o.scratch_mem_limit = 1;
    CHECK_OK(ob_convert_hf(d, pj(d, "b.gguf"), &o));
    FILE *fa = fopen(pj(d, "a.gguf"), "rb"), *fb = fopen(pj(d, "b.gguf"), "rb");
    CHECK(fa && fb);
    if (fa && fb) {
        int same = 1, ca, cb;
        do {
            ca = fgetc(fa);
            cb = fgetc(fb);
            if (ca != cb) same = 0;
        } while (ca != EOF && cb != EOF && same);
        CHECK(same);
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    /* no scratch file left behind */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp-", d);
    CHECK(system(cmd) != 0);
    free_model(&m);
    rm_rf(d);
}

/* Bad folders fail with a message naming the file, key or tensor, and leave
 * no output file. */
static void expect_convert_fail(const char *d, int want_rc, const char *needle) {
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    int rc = ob_convert_hf(d, pj(d, "bad.gguf"), &o);
    CHECK_MSG(rc == want_rc, "expected %d for '%s', got %d (%s)", want_rc, needle, rc, ob_last_error());
    CHECK_MSG(strstr(ob_last_error(), needle) != NULL, "message '%s' lacks '%s'", ob_last_error(), needle);
    CHECK(access(pj(d, "bad.gguf"), F_OK) != 0);
}

static void rewrite_config(const char *d, const hf_spec *s, const char *key, json_t *val) {
    json_t *c = make_config(s);
    if (val)
        json_object_set_new(c, key, val);
    else
        json_object_del(c, key);
    write_json(pj(d, "config.json"), c);
    json_decref(c);
}

TEST(convert_errors_name_the_culprit) {
    hf_model m;
    hf_spec s = LLAMA;
    char *d = write_folder(&m, &s, NULL);
    rewrite_config(d, &s, "architectures", json_pack("[s]", "GPT2LMHeadModel"));
    expect_convert_fail(d, OB_ERR_UNSUPPORTED, "GPT2LMHeadModel");
    rewrite_config(d, &s, "hidden_size", NULL);
    expect_convert_fail(d, OB_ERR_FORMAT, "'hidden_size'");
    rewrite_config(d, &s, "hidden_size", json_string("64"));
    expect_convert_fail(d, OB_ERR_FORMAT, "'hidden_size'");
    rewrite_config(d, &s, "rope_scaling", json_pack("{s:s,s:f}", "rope_type", "dynamic", "factor", 2.0));
    expect_convert_fail(d, OB_ERR_UNSUPPORTED, "dynamic");
    rewrite_config(d, &s, "rope_scaling", json_pack("{s:s,s:f}", "rope_type", "yarn", "factor", 2.0));
    expect_convert_fail(d, OB_ERR_FORMAT, "original_max_position_embeddings");
    rewrite_config(d, &s, "hidden_act", json_string("gelu"));
    expect_convert_fail(d, OB_ERR_UNSUPPORTED, "hidden_act");
    /* shapes disagree with config.json */
    rewrite_config(d, &s, "intermediate_size", json_integer(64));
    expect_convert_fail(d, OB_ERR_FORMAT, "model.layers.0.mlp.down_proj.weight");
    rewrite_config(d, &s, "num_hidden_layers", json_integer(1));
    expect_convert_fail(d, OB_ERR_FORMAT, "model.layers.1.");
    rewrite_config(d, &s, "num_hidden_layers", json_integer(3));
    expect_convert_fail(d, OB_ERR_FORMAT, "model.layers.2.input_layernorm.weight' is missing");
    rewrite_config(d, &s, "vocab_size", json_integer(40));
    expect_convert_fail(d, OB_ERR_FORMAT, "config.json implies [40, 64]");
    rewrite_config(d, &s, "num_key_value_heads", json_integer(3));
    expect_convert_fail(d, OB_ERR_FORMAT, "num_key_value_heads");
    rewrite_config(d, &s, "tie_word_embeddings", json_false());
    /* a qwen3 config on llama weights: q_norm is missing */
    rewrite_config(d, &s, "architectures", json_pack("[s]", "Qwen3ForCausalLM"));
    expect_convert_fail(d, OB_ERR_FORMAT, "q_norm.weight' is missing");
    rewrite_config(d, &s, "architectures", json_pack("[s]", "Qwen2ForCausalLM"));
    expect_convert_fail(d, OB_ERR_FORMAT, "q_proj.bias' is missing");
    rewrite_config(d, &s, "tie_word_embeddings", json_false());
    /* vocab larger than the tokenizer's ids: fine; smaller: the tokenizer error names the token */
    unlink(pj(d, "tokenizer.json"));
    expect_convert_fail(d, OB_ERR_NOT_FOUND, "tokenizer.json");
    write_tokenizer(d, 60, false, false); /* ids up to 57 > vocab 48 */
    expect_convert_fail(d, OB_ERR_FORMAT, "outside the model's vocab_size 48");
    write_tokenizer(d, s.n_vocab, false, false);

    /* a tensor we have no name for, and an unsupported dtype */
    int32_t ibuf[4] = {0};
    st_entry extra = {"model.layers.0.mlp.weird.weight", "F32", 1, {4}, ibuf, sizeof ibuf};
    size_t size;
    unsigned char *img = st_build(&extra, 1, &size);
    write_file(pj(d, "model-extra.safetensors"), img, size);
    free(img);
    /* model.safetensors exists, so the extra file is not read: write an index naming both */
    json_t *wm = json_object();
    for (int i = 0; i < m.n; i++) json_object_set_new(wm, m.t[i].name, json_string("model.safetensors"));
    json_object_set_new(wm, extra.name, json_string("model-extra.safetensors"));
    json_t *idx = json_pack("{s:o}", "weight_map", wm);
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    expect_convert_fail(d, OB_ERR_UNSUPPORTED, "model.layers.0.mlp.weird.weight");
    st_entry extra2 = {"model.layers.0.mlp.up_proj.bias", "I32", 1, {4}, ibuf, sizeof ibuf};
    img = st_build(&extra2, 1, &size);
    write_file(pj(d, "model-extra.safetensors"), img, size);
    free(img);
    wm = json_object();
    for (int i = 0; i < m.n; i++) json_object_set_new(wm, m.t[i].name, json_string("model.safetensors"));
    json_object_set_new(wm, extra2.name, json_string("model-extra.safetensors"));
    idx = json_pack("{s:o}", "weight_map", wm);
    write_json(pj(d, "model.safetensors.index.json"), idx);
    json_decref(idx);
    expect_convert_fail(d, OB_ERR_UNSUPPORTED, "dtype I32");
    unlink(pj(d, "model.safetensors.index.json"));
    /* a truncated weights file */
    CHECK(truncate(pj(d, "model.safetensors"), 200) == 0);
    expect_convert_fail(d, OB_ERR_FORMAT, "model.safetensors");
    unlink(pj(d, "config.json"));
    expect_convert_fail(d, OB_ERR_IO, "config.json");
    /* bad outtype */
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_Q4_0;
    CHECK(ob_convert_hf(d, pj(d, "bad.gguf"), &o) == OB_ERR_INVALID_ARG);
    free_model(&m);
    rm_rf(d);
}

/* Every allocation failure becomes a clean OB_ERR_OOM (no crash, no leak
 * under ASan, no output file). */
TEST(convert_allocation_failures) {
    hf_spec s = LLAMA;
    s.n_layer = 1;
    hf_model m;
    char *d = write_folder(&m, &s, NULL);
    ob_convert_opts o;
    ob_convert_opts_init(&o);
    o.outtype = OB_TYPE_Q8_0;
    int n_fail = 0, ok_at = -1;
    for (long k = 1; k < 5000; k++) {
        ob_mem_fail_after(k);
        int rc = ob_convert_hf(d, pj(d, "oom.gguf"), &o);
        ob_mem_fail_after(0);
        if (rc == 0) {
            ok_at = (int)k;
            break;
        }
        n_fail++;
        CHECK_MSG(rc == OB_ERR_OOM, "failure point %ld gave %d (%s)", k, rc, ob_last_error());
        CHECK(access(pj(d, "oom.gguf"), F_OK) != 0);
    }
    CHECK(ok_at > 0);
    CHECK(n_fail > 10);
    if (getenv("OB_TEST_VERBOSE")) fprintf(stderr, "  %d allocation failure points, success at %d\n", n_fail, ok_at);
    free_model(&m);
    rm_rf(d);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
