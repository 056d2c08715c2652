/*
 * test_gguf.c - the GGUF reader and writer: round trips of every value type,
 * typed getters, split files, every real file in ../shared/models, and a
 * catalogue of malformed files that must each fail with a message naming the
 * culprit (and never read out of bounds: this also runs under ASan).
 */
#include <unistd.h>

#include "core/mem.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "test.h"

/* A file with one key of every type, nested arrays, and tensors of several types. */
static float g_f32_data[4 * 3];
static uint16_t g_f16_data[64];
static uint8_t g_q8_data[2 * 34];

static ob_gguf_writer *make_writer(void) {
    ob_gguf_writer *w;
    if (ob_gguf_writer_create(&w) < 0) return NULL;
    ob_gguf_writer_set_str(w, "general.architecture", "llama");
    ob_gguf_writer_set_u8(w, "t.u8", 200);
    ob_gguf_writer_set_i8(w, "t.i8", -100);
    ob_gguf_writer_set_u16(w, "t.u16", 60000);
    ob_gguf_writer_set_i16(w, "t.i16", -30000);
    ob_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    ob_gguf_writer_set_i32(w, "t.i32", -2000000000);
    ob_gguf_writer_set_u64(w, "t.u64", 0xFFFFFFFFFFFFFFF0ull);
    ob_gguf_writer_set_i64(w, "t.i64", INT64_MIN + 1);
    ob_gguf_writer_set_f32(w, "t.f32", 1.5f);
    ob_gguf_writer_set_f64(w, "t.f64", -2.25);
    ob_gguf_writer_set_bool(w, "t.bool", true);
    ob_gguf_writer_set_str(w, "t.str", "h\xC3\xA9llo \"world\"");
    int32_t ints[5] = {1, -2, 3, -4, 5};
    ob_gguf_writer_set_arr(w, "t.arr_i32", OB_GGUF_I32, ints, 5);
    float fl[3] = {0.5f, -1.0f, 3.25f};
    ob_gguf_writer_set_arr(w, "t.arr_f32", OB_GGUF_F32, fl, 3);
    const char *strs[3] = {"a", "", "ccc"};
    ob_gguf_writer_set_arr_str(w, "t.arr_str", strs, 3);
    /* [[1,2],[3]] as nested u8 arrays */
    uint8_t a1[2] = {1, 2}, a2[1] = {3};
    ob_gguf_value inner[2];
    memset(inner, 0, sizeof inner);
    inner[0].type = OB_GGUF_ARRAY;
    inner[0].v.arr = (ob_gguf_array){OB_GGUF_U8, 2, a1};
    inner[1].type = OB_GGUF_ARRAY;
    inner[1].v.arr = (ob_gguf_array){OB_GGUF_U8, 1, a2};
    ob_gguf_value outer;
    memset(&outer, 0, sizeof outer);
    outer.type = OB_GGUF_ARRAY;
    outer.v.arr = (ob_gguf_array){OB_GGUF_ARRAY, 2, inner};
    ob_gguf_writer_set_value(w, "t.nested", &outer);
    ob_gguf_writer_set_u32(w, "t.replaced", 1);
    ob_gguf_writer_set_u32(w, "t.replaced", 2);
    for (int i = 0; i < 12; i++) g_f32_data[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 64; i++) g_f16_data[i] = (uint16_t)(0x3C00 + i);
    for (int i = 0; i < 68; i++) g_q8_data[i] = (uint8_t)(i * 7);
    int64_t ne_a[2] = {4, 3}, ne_b[3] = {8, 4, 2}, ne_c[1] = {64};
    ob_gguf_writer_add_tensor(w, "a.weight", OB_TYPE_F32, 2, ne_a, g_f32_data);
    ob_gguf_writer_add_tensor(w, "b.weight", OB_TYPE_F16, 3, ne_b, g_f16_data);
    ob_gguf_writer_add_tensor(w, "c.weight", OB_TYPE_Q8_0, 1, ne_c, g_q8_data);
    return w;
}

static int make_image(void **data, size_t *size) {
    ob_gguf_writer *w = make_writer();
    if (!w) return OB_ERR_OOM;
    int rc = ob_gguf_writer_write_memory(w, data, size);
    ob_gguf_writer_free(w);
    return rc;
}

TEST(roundtrip_all_value_types) {
    void *img;
    size_t size;
    CHECK_OK(make_image(&img, &size));
    ob_gguf *g;
    CHECK_OK(ob_gguf_open_memory(img, size, &g));
    if (!g) return;
    CHECK_EQ_INT(ob_gguf_version(g), 3);
    CHECK_EQ_INT(ob_gguf_alignment(g), 32);
    CHECK_EQ_INT(ob_gguf_n_kv(g), 18);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool b;
    const char *s;
    CHECK_OK(ob_gguf_get_u32(g, "t.u8", &u32));
    CHECK_EQ_INT(u32, 200);
    CHECK_OK(ob_gguf_get_i32(g, "t.i8", &i32));
    CHECK_EQ_INT(i32, -100);
    CHECK_OK(ob_gguf_get_u32(g, "t.u16", &u32));
    CHECK_EQ_INT(u32, 60000);
    CHECK_OK(ob_gguf_get_i32(g, "t.i16", &i32));
    CHECK_EQ_INT(i32, -30000);
    CHECK_OK(ob_gguf_get_u32(g, "t.u32", &u32));
    CHECK_EQ_INT(u32, 4000000000u);
    CHECK_OK(ob_gguf_get_i32(g, "t.i32", &i32));
    CHECK_EQ_INT(i32, -2000000000);
    CHECK_OK(ob_gguf_get_u64(g, "t.u64", &u64));
    CHECK(u64 == 0xFFFFFFFFFFFFFFF0ull);
    CHECK_OK(ob_gguf_get_i64(g, "t.i64", &i64));
    CHECK(i64 == INT64_MIN + 1);
    CHECK_OK(ob_gguf_get_f32(g, "t.f32", &f));
    CHECK(f == 1.5f);
    CHECK_OK(ob_gguf_get_f32(g, "t.f64", &f));
    CHECK(f == -2.25f);
    CHECK_OK(ob_gguf_get_bool(g, "t.bool", &b));
    CHECK(b);
    CHECK_OK(ob_gguf_get_str(g, "t.str", &s));
    CHECK_EQ_STR(s, "h\xC3\xA9llo \"world\"");
    CHECK_OK(ob_gguf_get_u32(g, "t.replaced", &u32));
    CHECK_EQ_INT(u32, 2);
    const ob_gguf_array *a;
    CHECK_OK(ob_gguf_get_arr(g, "t.arr_i32", OB_GGUF_I32, &a));
    CHECK(a->n == 5 && ((const int32_t *)a->data)[3] == -4);
    CHECK_OK(ob_gguf_get_arr(g, "t.arr_f32", OB_GGUF_F32, &a));
    CHECK(a->n == 3 && ((const float *)a->data)[2] == 3.25f);
    CHECK_OK(ob_gguf_get_arr(g, "t.arr_str", OB_GGUF_STRING, &a));
    CHECK(a->n == 3);
    if (a->n == 3) {
        const ob_gguf_str *st = a->data;
        CHECK_EQ_STR(st[0].s, "a");
        CHECK_EQ_INT(st[1].len, 0);
        CHECK_EQ_STR(st[2].s, "ccc");
    }
    CHECK_OK(ob_gguf_get_arr(g, "t.nested", OB_GGUF_ARRAY, &a));
    if (a && a->n == 2) {
        const ob_gguf_value *in = a->data;
        CHECK(in[0].v.arr.n == 2 && ((const uint8_t *)in[0].v.arr.data)[1] == 2);
        CHECK(in[1].v.arr.n == 1 && ((const uint8_t *)in[1].v.arr.data)[0] == 3);
    }
    char buf[256];
    CHECK_EQ_STR(ob_gguf_value_to_string(ob_gguf_get(g, "t.nested"), buf, sizeof buf, 8), "[[1, 2], [3]]");
    CHECK_EQ_STR(ob_gguf_value_to_string(ob_gguf_get(g, "t.arr_str"), buf, sizeof buf, 2),
                 "[\"a\", \"\", ... (3 total)]");

    /* Tensors: shapes, sizes, alignment of data, contents. */
    CHECK_EQ_INT(ob_gguf_n_tensors(g), 3);
    const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "b.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->type, OB_TYPE_F16);
        CHECK_EQ_INT(t->n_dims, 3);
        CHECK(t->ne[0] == 8 && t->ne[1] == 4 && t->ne[2] == 2 && t->ne[3] == 1);
        CHECK_EQ_INT(t->nbytes, 128);
        CHECK(memcmp(t->data, g_f16_data, 128) == 0);
        CHECK_EQ_INT(ob_gguf_tensor_nelements(t), 64);
    }
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *x = ob_gguf_tensor_at(g, i);
        CHECK(((const char *)x->data - (const char *)img) % 32 == 0);
    }
    t = ob_gguf_find_tensor(g, "c.weight");
    CHECK(t && t->nbytes == 68 && memcmp(t->data, g_q8_data, 68) == 0);
    CHECK(ob_gguf_find_tensor(g, "missing") == NULL);
    ob_gguf_free(g);
    ob_free(img);
}

TEST(getter_errors_name_the_key) {
    void *img;
    size_t size;
    CHECK_OK(make_image(&img, &size));
    ob_gguf *g;
    CHECK_OK(ob_gguf_open_memory(img, size, &g));
    uint32_t u32;
    int32_t i32;
    bool b;
    const char *s;
    const ob_gguf_array *a;
    CHECK_EQ_INT(ob_gguf_get_u32(g, "nope.key", &u32), OB_ERR_NOT_FOUND);
    CHECK(strstr(ob_last_error(), "nope.key") != NULL);
    CHECK_EQ_INT(ob_gguf_get_u32(g, "t.i8", &u32), OB_ERR_FORMAT); /* negative into unsigned */
    CHECK(strstr(ob_last_error(), "t.i8") != NULL);
    CHECK_EQ_INT(ob_gguf_get_i32(g, "t.u32", &i32), OB_ERR_FORMAT); /* 4e9 does not fit */
    CHECK_EQ_INT(ob_gguf_get_u32(g, "t.u64", &u32), OB_ERR_FORMAT);
    CHECK_EQ_INT(ob_gguf_get_bool(g, "t.u8", &b), OB_ERR_FORMAT);
    CHECK_EQ_INT(ob_gguf_get_str(g, "t.f32", &s), OB_ERR_FORMAT);
    CHECK(strstr(ob_last_error(), "t.f32") && strstr(ob_last_error(), "f32"));
    CHECK_EQ_INT(ob_gguf_get_arr(g, "t.arr_i32", OB_GGUF_F32, &a), OB_ERR_FORMAT);
    CHECK_EQ_INT(ob_gguf_get_arr(g, "t.str", -1, &a), OB_ERR_FORMAT);
    ob_gguf_free(g);
    ob_free(img);
}

TEST(rewrite_is_identical) {
    /* read -> copy every key and tensor into a writer -> write: same bytes. */
    void *img;
    size_t size;
    CHECK_OK(make_image(&img, &size));
    ob_gguf *g;
    CHECK_OK(ob_gguf_open_memory(img, size, &g));
    ob_gguf_writer *w;
    CHECK_OK(ob_gguf_writer_create(&w));
    for (int64_t i = 0; i < ob_gguf_n_kv(g); i++) {
        const ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        CHECK_OK(ob_gguf_writer_set_value(w, kv->key, &kv->value));
    }
    for (int64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        CHECK_OK(ob_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
    }
    void *img2;
    size_t size2;
    CHECK_OK(ob_gguf_writer_write_memory(w, &img2, &size2));
    CHECK_EQ_INT(size2, size);
    CHECK(size2 == size && memcmp(img, img2, size) == 0);
    ob_free(img2);
    ob_gguf_writer_free(w);
    ob_gguf_free(g);
    ob_free(img);
}

TEST(writer_rejects_bad_input) {
    ob_gguf_writer *w;
    CHECK_OK(ob_gguf_writer_create(&w));
    int64_t ne[2] = {33, 2};
    uint8_t buf[256] = {0};
    CHECK_EQ_INT(ob_gguf_writer_add_tensor(w, "x", OB_TYPE_Q4_0, 2, ne, buf), OB_ERR_INVALID_ARG);
    CHECK(strstr(ob_last_error(), "'x'") != NULL);
    ne[0] = 32;
    CHECK_OK(ob_gguf_writer_add_tensor(w, "x", OB_TYPE_Q4_0, 2, ne, buf));
    CHECK_EQ_INT(ob_gguf_writer_add_tensor(w, "x", OB_TYPE_Q4_0, 2, ne, buf), OB_ERR_INVALID_ARG);
    CHECK_EQ_INT(ob_gguf_writer_add_tensor(w, "y", (ob_type)4, 2, ne, buf), OB_ERR_INVALID_ARG);
    CHECK_EQ_INT(ob_gguf_writer_add_tensor(w, "y", OB_TYPE_F32, 5, ne, buf), OB_ERR_INVALID_ARG);
    CHECK_EQ_INT(ob_gguf_writer_set_u32(w, "", 1), OB_ERR_INVALID_ARG);
    CHECK_EQ_INT(ob_gguf_writer_remove(w, "absent"), OB_ERR_NOT_FOUND);
    ob_gguf_writer_set_u32(w, "general.alignment", 48);
    void *img;
    size_t size;
    CHECK_EQ_INT(ob_gguf_writer_write_memory(w, &img, &size), OB_ERR_INVALID_ARG);
    ob_gguf_writer_free(w);
    ob_gguf_writer_free(NULL);
}

TEST(custom_alignment) {
    ob_gguf_writer *w;
    CHECK_OK(ob_gguf_writer_create(&w));
    CHECK_OK(ob_gguf_writer_set_u32(w, "general.alignment", 256));
    float d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne[1] = {8};
    CHECK_OK(ob_gguf_writer_add_tensor(w, "t0", OB_TYPE_F32, 1, ne, d));
    CHECK_OK(ob_gguf_writer_add_tensor(w, "t1", OB_TYPE_F32, 1, ne, d));
    void *img;
    size_t size;
    CHECK_OK(ob_gguf_writer_write_memory(w, &img, &size));
    ob_gguf *g;
    CHECK_OK(ob_gguf_open_memory(img, size, &g));
    if (g) {
        CHECK_EQ_INT(ob_gguf_alignment(g), 256);
        const ob_gguf_tensor *t1 = ob_gguf_find_tensor(g, "t1");
        CHECK(t1 && t1->offset == 256);
        CHECK(t1 && ((const char *)t1->data - (const char *)img) % 256 == 0);
        CHECK(t1 && memcmp(t1->data, d, 32) == 0);
        ob_gguf_free(g);
    }
    ob_free(img);
    ob_gguf_writer_free(w);
}

TEST(file_write_and_open) {
    char path[] = "/tmp/ob_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ob_gguf_writer *w = make_writer();
    CHECK_OK(ob_gguf_writer_write_file(w, path));
    ob_gguf_writer_free(w);
    ob_gguf *g;
    CHECK_OK(ob_gguf_open(path, &g));
    if (g) {
        CHECK_EQ_INT(ob_gguf_n_splits(g), 1);
        CHECK_EQ_INT(ob_gguf_n_tensors(g), 3);
        ob_gguf_free(g);
    }
    unlink(path);
    CHECK_EQ_INT(ob_gguf_open("/nonexistent.gguf", &g), OB_ERR_IO);
    CHECK(g == NULL);
}

TEST(split_files_load_as_one) {
    char dir[] = "/tmp/ob_test_split_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    static float data[3][16];
    char paths[3][256];
    for (int part = 0; part < 3; part++) {
        ob_gguf_writer *w;
        CHECK_OK(ob_gguf_writer_create(&w));
        CHECK_OK(ob_gguf_writer_set_u16(w, "split.no", (uint16_t)part));
        CHECK_OK(ob_gguf_writer_set_u16(w, "split.count", 3));
        CHECK_OK(ob_gguf_writer_set_i32(w, "split.tensors.count", 6));
        if (part == 0) CHECK_OK(ob_gguf_writer_set_str(w, "general.architecture", "llama"));
        for (int k = 0; k < 2; k++) {
            char name[32];
            snprintf(name, sizeof name, "blk.%d.w", part * 2 + k);
            for (int i = 0; i < 16; i++) data[part][i] = (float)(part * 100 + i);
            int64_t ne[1] = {8};
            CHECK_OK(ob_gguf_writer_add_tensor(w, name, OB_TYPE_F32, 1, ne, &data[part][k * 8]));
        }
        snprintf(paths[part], sizeof paths[part], "%s/model-%05d-of-00003.gguf", dir, part + 1);
        CHECK_OK(ob_gguf_writer_write_file(w, paths[part]));
        ob_gguf_writer_free(w);
    }
    ob_gguf *g;
    CHECK_OK(ob_gguf_open(paths[0], &g));
    if (g) {
        CHECK_EQ_INT(ob_gguf_n_splits(g), 3);
        CHECK_EQ_INT(ob_gguf_n_tensors(g), 6);
        const ob_gguf_tensor *t = ob_gguf_find_tensor(g, "blk.5.w");
        CHECK(t && t->split == 2 && ((const float *)t->data)[0] == 208.0f);
        const char *arch;
        CHECK_OK(ob_gguf_get_str(g, "general.architecture", &arch));
        ob_gguf_free(g);
    }
    /* A missing part is an error that names it. */
    unlink(paths[2]);
    CHECK_EQ_INT(ob_gguf_open(paths[0], &g), OB_ERR_IO);
    CHECK(strstr(ob_last_error(), "split part 3 of 3") != NULL);
    unlink(paths[0]);
    unlink(paths[1]);
    rmdir(dir);
}

/* ---- malformed input ---- */

TEST(every_truncation_fails_cleanly) {
    void *img;
    size_t size;
    CHECK_OK(make_image(&img, &size));
    /* The file is complete once the last tensor's bytes are there (the tail
     * padding after it is optional); every shorter prefix must fail. */
    ob_gguf *full;
    CHECK_OK(ob_gguf_open_memory(img, size, &full));
    size_t end = 0;
    for (int64_t i = 0; full && i < ob_gguf_n_tensors(full); i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(full, i);
        size_t e = (size_t)((const char *)t->data - (const char *)img) + t->nbytes;
        if (e > end) end = e;
    }
    ob_gguf_free(full);
    CHECK(end > 0 && end <= size);
    int bad = 0;
    for (size_t n = 0; n < end; n++) {
        /* Copy into an exact-size buffer so ASan catches any overread. */
        void *cut = malloc(n ? n : 1);
        memcpy(cut, img, n);
        ob_gguf *g = NULL;
        int rc = ob_gguf_open_memory(cut, n, &g);
        if (rc != OB_ERR_FORMAT || g != NULL || ob_last_error()[0] == '\0') bad++;
        ob_gguf_free(g);
        free(cut);
    }
    CHECK_EQ_INT(bad, 0);
    ob_free(img);
}

/* Build a raw file image with a cursor, to craft corrupt fields. */
typedef struct raw {
    uint8_t b[4096];
    size_t n;
} raw;
static void r_u32(raw *r, uint32_t v) { memcpy(r->b + r->n, &v, 4); r->n += 4; }
static void r_u64(raw *r, uint64_t v) { memcpy(r->b + r->n, &v, 8); r->n += 8; }
static void r_str(raw *r, const char *s) { r_u64(r, strlen(s)); memcpy(r->b + r->n, s, strlen(s)); r->n += strlen(s); }
static void r_hdr(raw *r, uint64_t n_t, uint64_t n_kv) {
    r->n = 0;
    r_u32(r, OB_GGUF_MAGIC);
    r_u32(r, 3);
    r_u64(r, n_t);
    r_u64(r, n_kv);
}
static void r_pad(raw *r, size_t align) { while (r->n % align) r->b[r->n++] = 0; }

static void expect_bad(raw *r, int code, const char *needle) {
    ob_gguf *g = NULL;
    void *copy = malloc(r->n);
    memcpy(copy, r->b, r->n);
    int rc = ob_gguf_open_memory(copy, r->n, &g);
    CHECK_MSG(rc == code, "expected %d got %d (%s)", code, rc, ob_last_error());
    CHECK_MSG(strstr(ob_last_error(), needle) != NULL, "message '%s' lacks '%s'", ob_last_error(), needle);
    CHECK(g == NULL);
    ob_gguf_free(g);
    free(copy);
}

TEST(malformed_headers) {
    raw r;
    r.n = 0;
    r_u32(&r, 0x46554748);
    r_u32(&r, 3);
    expect_bad(&r, OB_ERR_FORMAT, "not a GGUF file");
    r.n = 0;
    r_u32(&r, OB_GGUF_MAGIC);
    r_u32(&r, 9);
    r_u64(&r, 0);
    r_u64(&r, 0);
    expect_bad(&r, OB_ERR_UNSUPPORTED, "version 9");
    r_hdr(&r, 0, 1ull << 60);
    expect_bad(&r, OB_ERR_FORMAT, "metadata count");
    r_hdr(&r, 1ull << 60, 0);
    expect_bad(&r, OB_ERR_FORMAT, "tensor count");
}

TEST(malformed_metadata) {
    raw r;
    /* string length far past the end */
    r_hdr(&r, 0, 1);
    r_str(&r, "general.name");
    r_u32(&r, OB_GGUF_STRING);
    r_u64(&r, 1ull << 40);
    expect_bad(&r, OB_ERR_FORMAT, "general.name");
    /* unknown value type */
    r_hdr(&r, 0, 1);
    r_str(&r, "x.key");
    r_u32(&r, 13);
    expect_bad(&r, OB_ERR_FORMAT, "unknown value type 13");
    /* array count larger than the file */
    r_hdr(&r, 0, 1);
    r_str(&r, "tokenizer.ggml.scores");
    r_u32(&r, OB_GGUF_ARRAY);
    r_u32(&r, OB_GGUF_F32);
    r_u64(&r, 1ull << 62);
    expect_bad(&r, OB_ERR_FORMAT, "tokenizer.ggml.scores");
    /* an array of strings whose count cannot fit */
    r_hdr(&r, 0, 1);
    r_str(&r, "tokenizer.ggml.tokens");
    r_u32(&r, OB_GGUF_ARRAY);
    r_u32(&r, OB_GGUF_STRING);
    r_u64(&r, 1000000);
    expect_bad(&r, OB_ERR_FORMAT, "tokenizer.ggml.tokens");
    /* nesting too deep */
    r_hdr(&r, 0, 1);
    r_str(&r, "deep");
    r_u32(&r, OB_GGUF_ARRAY);
    for (int i = 0; i < 20; i++) {
        r_u32(&r, OB_GGUF_ARRAY);
        r_u64(&r, 1);
    }
    expect_bad(&r, OB_ERR_FORMAT, "nested deeper");
    /* bad bool */
    r_hdr(&r, 0, 1);
    r_str(&r, "flag");
    r_u32(&r, OB_GGUF_BOOL);
    r.b[r.n++] = 7;
    expect_bad(&r, OB_ERR_FORMAT, "flag");
    /* duplicate key */
    r_hdr(&r, 0, 2);
    for (int i = 0; i < 2; i++) {
        r_str(&r, "dup.key");
        r_u32(&r, OB_GGUF_U32);
        r_u32(&r, 5);
    }
    expect_bad(&r, OB_ERR_FORMAT, "'dup.key' appears twice");
    /* empty key */
    r_hdr(&r, 0, 1);
    r_str(&r, "");
    r_u32(&r, OB_GGUF_U32);
    r_u32(&r, 5);
    expect_bad(&r, OB_ERR_FORMAT, "empty");
    /* alignment not a power of two, and of the wrong type */
    r_hdr(&r, 0, 1);
    r_str(&r, "general.alignment");
    r_u32(&r, OB_GGUF_U32);
    r_u32(&r, 48);
    expect_bad(&r, OB_ERR_FORMAT, "general.alignment");
    r_hdr(&r, 0, 1);
    r_str(&r, "general.alignment");
    r_u32(&r, OB_GGUF_U64);
    r_u64(&r, 32);
    expect_bad(&r, OB_ERR_FORMAT, "general.alignment");
}

/* One tensor info with the given fields, then its data. */
static void one_tensor(raw *r, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off,
                       size_t data_bytes) {
    r_hdr(r, 1, 0);
    r_str(r, name);
    r_u32(r, nd);
    for (uint32_t d = 0; d < nd; d++) r_u64(r, ne[d]);
    r_u32(r, type);
    r_u64(r, off);
    r_pad(r, 32);
    memset(r->b + r->n, 0, data_bytes);
    r->n += data_bytes;
}

TEST(malformed_tensors) {
    raw r;
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    one_tensor(&r, "ok.weight", 2, ne, OB_TYPE_F32, 0, 256);
    ob_gguf *g = NULL;
    CHECK_OK(ob_gguf_open_memory(r.b, r.n, &g)); /* the well-formed base case */
    ob_gguf_free(g);
    one_tensor(&r, "short.weight", 2, ne, OB_TYPE_F32, 0, 255);
    expect_bad(&r, OB_ERR_FORMAT, "'short.weight'");
    one_tensor(&r, "far.weight", 2, ne, OB_TYPE_F32, 1ull << 50, 256);
    expect_bad(&r, OB_ERR_FORMAT, "'far.weight'");
    one_tensor(&r, "unaligned.weight", 2, ne, OB_TYPE_F32, 4, 300);
    expect_bad(&r, OB_ERR_FORMAT, "alignment");
    one_tensor(&r, "type.weight", 2, ne, 4 /* retired Q4_2 */, 0, 256);
    expect_bad(&r, OB_ERR_FORMAT, "type id 4");
    one_tensor(&r, "type2.weight", 2, ne, 1000, 0, 256);
    expect_bad(&r, OB_ERR_FORMAT, "type id 1000");
    one_tensor(&r, "dims.weight", 5, ne, OB_TYPE_F32, 0, 256);
    expect_bad(&r, OB_ERR_FORMAT, "5 dimensions");
    one_tensor(&r, "dims0.weight", 0, ne, OB_TYPE_F32, 0, 256);
    expect_bad(&r, OB_ERR_FORMAT, "0 dimensions");
    uint64_t huge[4] = {1ull << 40, 1ull << 40, 1, 1};
    one_tensor(&r, "overflow.weight", 2, huge, OB_TYPE_F32, 0, 64);
    expect_bad(&r, OB_ERR_FORMAT, "overflow");
    uint64_t neg[2] = {(uint64_t)-5, 1};
    one_tensor(&r, "neg.weight", 2, neg, OB_TYPE_F32, 0, 64);
    expect_bad(&r, OB_ERR_FORMAT, "neg.weight");
    uint64_t odd[2] = {33, 1};
    one_tensor(&r, "block.weight", 2, odd, OB_TYPE_Q4_0, 0, 64);
    expect_bad(&r, OB_ERR_FORMAT, "block size");
    /* big but "valid" product whose bytes overflow size_t */
    uint64_t big[4] = {1ull << 32, 1ull << 31, 1, 1};
    one_tensor(&r, "bytes.weight", 2, big, OB_TYPE_F32, 0, 64);
    expect_bad(&r, OB_ERR_FORMAT, "bytes.weight");
    /* alignment 1 is legal, but an f32 tensor at an odd offset is not */
    r_hdr(&r, 1, 1);
    r_str(&r, "general.alignment");
    r_u32(&r, OB_GGUF_U32);
    r_u32(&r, 1);
    r_str(&r, "odd.weight");
    r_u32(&r, 1);
    r_u64(&r, 8);
    r_u32(&r, OB_TYPE_F32);
    r_u64(&r, (r.n + 12) % 4 == 0 ? 1 : 0); /* lands the data on an odd address */
    memset(r.b + r.n, 0, 64);
    r.n += 64;
    expect_bad(&r, OB_ERR_FORMAT, "aligned to the 4 bytes");
    /* duplicate tensor names */
    r_hdr(&r, 2, 0);
    for (int i = 0; i < 2; i++) {
        r_str(&r, "twice.weight");
        r_u32(&r, 1);
        r_u64(&r, 8);
        r_u32(&r, OB_TYPE_F32);
        r_u64(&r, (uint64_t)i * 32);
    }
    r_pad(&r, 32);
    memset(r.b + r.n, 0, 64);
    r.n += 64;
    expect_bad(&r, OB_ERR_FORMAT, "'twice.weight' appears twice");
}

TEST(allocation_failures_are_clean) {
    /* Every allocation the reader and writer make can fail: each must turn
     * into OB_ERR_OOM with nothing leaked (LeakSanitizer checks in the ASan build). */
    void *img;
    size_t size;
    CHECK_OK(make_image(&img, &size));
    int ok_at = -1;
    for (int n = 1; n < 200; n++) {
        ob_gguf *g = NULL;
        ob_mem_fail_after(n);
        int rc = ob_gguf_open_memory(img, size, &g);
        ob_mem_fail_after(0);
        if (rc == 0) {
            ok_at = n;
            ob_gguf_free(g);
            break;
        }
        CHECK_MSG(rc == OB_ERR_OOM, "fail_after %d gave %d (%s)", n, rc, ob_last_error());
    }
    CHECK(ok_at > 1);
    for (int n = 1; n < 400; n++) {
        ob_mem_fail_after(n);
        ob_gguf_writer *w = make_writer(); /* setters may fail midway; that is fine */
        void *out = NULL;
        size_t osz = 0;
        int rc = w ? ob_gguf_writer_write_memory(w, &out, &osz) : OB_ERR_OOM;
        ob_mem_fail_after(0);
        ob_gguf_writer_free(w);
        ob_free(out);
        if (rc == 0 && osz == size) break;
    }
    ob_free(img);
}

/* ---- real files ---- */

static const char *g_real_files[] = {
    "stories260K/stories260K.gguf",
    "stories260K/legacy-gguf-v1/tinyllamas-stories-260k-f32.gguf",
    "llama.cpp-vocab/ggml-vocab-llama-spm.gguf",
    "llama.cpp-vocab/ggml-vocab-phi-3.gguf",
    "llama.cpp-vocab/ggml-vocab-gpt-2.gguf",
    "llama.cpp-vocab/ggml-vocab-bert-bge.gguf",
    "llama.cpp-vocab/ggml-vocab-deepseek-llm.gguf",
    "llama.cpp-vocab/ggml-vocab-gpt-neox.gguf",
    "llama.cpp-vocab/ggml-vocab-baichuan.gguf",
    "quant-fixtures/quant-fixtures.gguf",
};

TEST(every_shared_model_opens) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    for (size_t i = 0; i < sizeof g_real_files / sizeof g_real_files[0]; i++) {
        ob_gguf *g = NULL;
        int rc = ob_gguf_open(test_path(dir, g_real_files[i]), &g);
        CHECK_MSG(rc == 0, "%s: %s", g_real_files[i], ob_last_error());
        if (!g) continue;
        CHECK(ob_gguf_n_kv(g) > 0);
        const char *arch;
        CHECK_OK(ob_gguf_get_str(g, "general.architecture", &arch));
        ob_gguf_free(g);
    }
}

TEST(stories260K_v1_equals_v3) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models is absent");
        return;
    }
    ob_gguf *v3 = NULL, *v1 = NULL;
    CHECK_OK(ob_gguf_open(test_path(dir, "stories260K/stories260K.gguf"), &v3));
    CHECK_OK(ob_gguf_open(test_path(dir, "stories260K/legacy-gguf-v1/tinyllamas-stories-260k-f32.gguf"), &v1));
    if (!v1 || !v3) goto out;
    CHECK_EQ_INT(ob_gguf_version(v1), 1);
    CHECK_EQ_INT(ob_gguf_version(v3), 3);
    uint32_t n_embd, n_head_kv;
    CHECK_OK(ob_gguf_get_u32(v3, "llama.embedding_length", &n_embd));
    CHECK_EQ_INT(n_embd, 64);
    CHECK_OK(ob_gguf_get_u32(v3, "llama.attention.head_count_kv", &n_head_kv));
    CHECK_EQ_INT(n_head_kv, 4);
    /* Every tensor of the v1 file has the same bytes in the v3 file (as the MANIFEST says). */
    int compared = 0;
    for (int64_t i = 0; i < ob_gguf_n_tensors(v1); i++) {
        const ob_gguf_tensor *a = ob_gguf_tensor_at(v1, i);
        const ob_gguf_tensor *b = ob_gguf_find_tensor(v3, a->name);
        CHECK_MSG(b != NULL, "%s missing in v3", a->name);
        if (!b) continue;
        CHECK(a->nbytes == b->nbytes && a->type == b->type);
        CHECK_MSG(a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0, "%s differs", a->name);
        compared++;
    }
    CHECK_EQ_INT(compared, 48);
    const ob_gguf_array *t1, *t3;
    CHECK_OK(ob_gguf_get_arr(v1, "tokenizer.ggml.tokens", OB_GGUF_STRING, &t1));
    CHECK_OK(ob_gguf_get_arr(v3, "tokenizer.ggml.tokens", OB_GGUF_STRING, &t3));
    CHECK(t1->n == 512 && t3->n == 512);
    for (uint64_t i = 0; i < 512 && t1->n == 512 && t3->n == 512; i++)
        CHECK(strcmp(((const ob_gguf_str *)t1->data)[i].s, ((const ob_gguf_str *)t3->data)[i].s) == 0);
out:
    ob_gguf_free(v1);
    ob_gguf_free(v3);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
