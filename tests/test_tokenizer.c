/*
 * test_tokenizer.c - tokenizers against the reference data in
 * ../shared/models (llama.cpp's vocabulary test pairs, the encode vectors),
 * plus the properties no fixture pins down: UTF-8 repair, streaming
 * detokenization, round trips, near-linear cost on pathological input, and
 * clean errors for broken tokenizer files.
 *
 * The Hugging Face fixtures made on the GPU machine are checked by
 * test_tokenizer_hf.c. Tests that need ../shared/models skip without it.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <pthread.h>
#include <time.h>

#include "../src/core/mem.h"
#include "../src/core/status.h"
#include "../src/core/utf8.h"
#include "../src/gguf/gguf.h"
#include "../src/tokenizer/tok_internal.h"
#include "../src/tokenizer/tokenizer.h"
#include "test.h"

/* ---- helpers ---- */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len) *len = (size_t)n;
    }
    return buf;
}

static ob_tokenizer *load_gguf_tok(const char *path) {
    ob_gguf *g;
    if (ob_gguf_open(path, &g) < 0) {
        fprintf(stderr, "  cannot open %s: %s\n", path, ob_last_error());
        return NULL;
    }
    ob_tokenizer *t = NULL;
    int rc = ob_tokenizer_from_gguf(g, &t);
    ob_gguf_free(g);
    if (rc < 0) fprintf(stderr, "  tokenizer from %s: %s\n", path, ob_last_error());
    return t;
}

/* Shared tokenizers, loaded once per process (loading llama3's 9 MB
 * tokenizer.json is the slowest thing here). */
static ob_tokenizer *cached(const char *rel, bool json) {
    static struct {
        char rel[128];
        ob_tokenizer *t;
    } cache[12];
    for (size_t i = 0; i < OB_ARRAY_LEN(cache); i++)
        if (cache[i].t && !strcmp(cache[i].rel, rel)) return cache[i].t;
    const char *dir = test_models_dir();
    if (!dir) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    ob_tokenizer *t = NULL;
    if (json) {
        if (ob_tokenizer_from_json_file(path, &t) < 0) fprintf(stderr, "  %s: %s\n", path, ob_last_error());
    } else {
        t = load_gguf_tok(path);
    }
    for (size_t i = 0; t && i < OB_ARRAY_LEN(cache); i++)
        if (!cache[i].t) {
            snprintf(cache[i].rel, sizeof cache[i].rel, "%s", rel);
            cache[i].t = t;
            break;
        }
    return t;
}

static void print_ids(const char *label, const ob_token *ids, size_t n) {
    fprintf(stderr, "    %s:", label);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    if (n > 40) fprintf(stderr, " ... (%zu)", n);
    fputc('\n', stderr);
}

/* ---- llama.cpp vocabulary pairs (.inp/.out) ---- */

/* Encode every test string of <vocab>.inp and compare with <vocab>.out
 * (no BOS, special-token text not parsed, as test-tokenizer-0 runs them). */
static void check_pairs(const char *name, ob_tokenizer *t) {
    const char *dir = test_models_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/llama.cpp-vocab/ggml-vocab-%s.gguf.inp", dir, name);
    size_t inp_len, out_len;
    char *inp = slurp(path, &inp_len);
    snprintf(path, sizeof path, "%s/llama.cpp-vocab/ggml-vocab-%s.gguf.out", dir, name);
    char *outs = slurp(path, &out_len);
    CHECK(inp && outs && t);
    if (!inp || !outs || !t) {
        free(inp);
        free(outs);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int cases = 0, pass = 0;
    char *p = inp, *line = outs;
    for (;;) {
        char *end = memmem(p, inp_len - (size_t)(p - inp), sep, sizeof sep - 1);
        if (!end) break;
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = 0;
        ob_tokens got = {0};
        CHECK_OK(ob_tokenizer_encode(t, p, (size_t)(end - p), 0, &got));
        ob_tokens want = {0};
        for (char *q = line; *q;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) break;
            ob_tokens_push(&want, (ob_token)v);
            q = e;
        }
        bool ok = got.n == want.n && (got.n == 0 || memcmp(got.ids, want.ids, got.n * sizeof *got.ids) == 0);
        cases++;
        pass += ok;
        if (!ok) {
            fprintf(stderr, "  %s case %d mismatch: \"%.*s\"\n", name, cases, (int)(end - p > 80 ? 80 : end - p), p);
            print_ids("want", want.ids, want.n);
            print_ids("got ", got.ids, got.n);
        }
        ob_tokens_free(&got);
        ob_tokens_free(&want);
        p = end + sizeof sep - 1;
        line = nl + 1;
    }
    fprintf(stderr, "  %-14s %d/%d .inp/.out pairs match\n", name, pass, cases);
    CHECK(cases >= 40);
    CHECK_EQ_INT(pass, cases);
    free(inp);
    free(outs);
}

TEST(tokenizer_llamacpp_vocab_pairs) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    static const char *const gguf_vocabs[] = {"llama-spm", "phi-3", "gpt-2", "bert-bge", "deepseek-llm"};
    for (size_t i = 0; i < OB_ARRAY_LEN(gguf_vocabs); i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "llama.cpp-vocab/ggml-vocab-%s.gguf", gguf_vocabs[i]);
        check_pairs(gguf_vocabs[i], cached(rel, false));
    }
    check_pairs("llama-bpe", cached("tokenizers/llama3/tokenizer.json", true));
    check_pairs("qwen2", cached("tokenizers/qwen2", true));
}

/* tokenizers/tokenizer-encode-vectors.json: BOS + ids for 13 prompts, from
 * sentencepiece (Llama 2 vocabulary) and llama2.c (stories260K's tok512). */
TEST(tokenizer_encode_vectors) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models not found");
        return;
    }
    json_error_t err;
    json_t *v = json_load_file(test_path(dir, "tokenizers/tokenizer-encode-vectors.json"), 0, &err);
    CHECK(v != NULL);
    if (!v) return;
    struct {
        const char *key, *column, *gguf;
    } sets[] = {{"llama2", "sentencepiece", "llama.cpp-vocab/ggml-vocab-llama-spm.gguf"},
                {"tok512", "llama2c_encode", "stories260K/stories260K.gguf"}};
    for (size_t s = 0; s < OB_ARRAY_LEN(sets); s++) {
        ob_tokenizer *t = cached(sets[s].gguf, false);
        CHECK(t != NULL);
        json_t *list = json_object_get(v, sets[s].key);
        if (!t || !json_is_array(list)) continue;
        int pass = 0, n = 0;
        for (size_t i = 0; i < json_array_size(list); i++) {
            json_t *e = json_array_get(list, i);
            const char *text = json_string_value(json_object_get(e, "text"));
            json_t *want = json_object_get(e, sets[s].column);
            ob_tokens got = {0};
            CHECK_OK(ob_tokenizer_encode(t, text, strlen(text), OB_ENCODE_ADD_SPECIAL, &got));
            bool ok = got.n == json_array_size(want);
            for (size_t k = 0; ok && k < got.n; k++) ok = got.ids[k] == json_integer_value(json_array_get(want, k));
            n++;
            pass += ok;
            if (!ok) {
                fprintf(stderr, "  %s \"%s\"\n", sets[s].key, text);
                print_ids("got ", got.ids, got.n);
            }
            ob_tokens_free(&got);
        }
        fprintf(stderr, "  %-14s %d/%d encode vectors (%s) match\n", sets[s].key, pass, n, sets[s].column);
        CHECK_EQ_INT(pass, n);
    }
    json_decref(v);
}

/* ---- properties ---- */

TEST(tokenizer_utf8_repair) {
    /* Maximal subparts, as Python's decode(errors="replace"). */
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {"\xff", 1, "\xEF\xBF\xBD"},
        {"\xc3", 1, "\xEF\xBF\xBD"},
        {"\xc3(", 2, "\xEF\xBF\xBD("},
        {"a\x80" "b", 3, "a\xEF\xBF\xBD" "b"},
        {"\xe2\x82", 2, "\xEF\xBF\xBD"},
        {"\xe2\x82(", 3, "\xEF\xBF\xBD("},
        {"\xf0\x9f\x98", 3, "\xEF\xBF\xBD"},
        {"\xed\xa0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xc0\xaf", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xf4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xe0\x80\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xf0\x9f\x98\x80\xf0", 5, "\xF0\x9F\x98\x80\xEF\xBF\xBD"},
        {"ok \xc3\xa9", 5, "ok \xc3\xa9"},
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(cases); i++) {
        tk_buf out = {0};
        bool replaced;
        CHECK_OK(tk_utf8_repair(cases[i].in, cases[i].n, &out, &replaced));
        CHECK_MSG(out.n == strlen(cases[i].out) && memcmp(out.p, cases[i].out, out.n) == 0, "case %zu", i);
        tk_buf_free(&out);
    }
}

/* Encode then decode, token by token through the streaming detokenizer:
 * every chunk must be valid UTF-8 and the chunks must add up to the whole
 * decode (and, for lossless tokenizers, to the input). */
static void check_roundtrip(ob_tokenizer *t, const char *name, const char *text, size_t len, bool lossless) {
    ob_tokens ids = {0};
    CHECK_OK(ob_tokenizer_encode(t, text, len, 0, &ids));
    char *whole = NULL;
    size_t whole_len = 0;
    CHECK_OK(ob_tokenizer_decode(t, ids.ids, ids.n, 0, &whole, &whole_len));
    ob_detok *d;
    CHECK_OK(ob_detok_create(t, 0, &d));
    tk_buf acc = {0};
    for (size_t i = 0; i < ids.n; i++) {
        const char *s;
        size_t n;
        CHECK_OK(ob_detok_push(d, ids.ids[i], &s, &n));
        CHECK(ob_utf8_valid(s, n));
        tk_buf_put(&acc, s, n);
    }
    const char *s;
    size_t n;
    CHECK_OK(ob_detok_flush(d, &s, &n));
    tk_buf_put(&acc, s, n);
    CHECK_MSG(whole && acc.n == whole_len && (whole_len == 0 || memcmp(acc.p, whole, whole_len) == 0),
              "%s: stream != decode", name);
    if (lossless)
        CHECK_MSG(whole && whole_len == len && (len == 0 || memcmp(whole, text, len) == 0), "%s: decode(encode(x)) != x for \"%.*s\"",
                  name, (int)(len > 60 ? 60 : len), text);
    ob_detok_free(d);
    tk_buf_free(&acc);
    ob_free(whole);
    ob_tokens_free(&ids);
}

static const char *const k_texts[] = {
    "Hello world", " leading space", "  two leading", "trailing  ", "a\nb\r\nc\td", "",
    "emoji \xF0\x9F\xA6\x99 and \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
    "e\xCC\x81 combining", "1234567890 3.14", "def f(x):\n    return x**2\n", "\x01\x02 control",
    /* DeepSeek has added tokens for Latin-1 letters ("\xC3\xB6" is id 100003):
     * they decode as text, not as byte-level strings (a fuzzer find). */
    "Ian'str\xC3\xB6ml, \xC3\xB8 \xC3\xBA \xC3\xBF \xC3\x80",
};

TEST(tokenizer_roundtrip_streaming) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    struct {
        const char *rel;
        bool json, lossless;
    } toks[] = {
        {"llama.cpp-vocab/ggml-vocab-gpt-2.gguf", false, true},
        {"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", false, true},
        {"llama.cpp-vocab/ggml-vocab-deepseek-llm.gguf", false, true},
        {"llama.cpp-vocab/ggml-vocab-bert-bge.gguf", false, false},
        {"tokenizers/llama3/tokenizer.json", true, true},
    };
    for (size_t k = 0; k < OB_ARRAY_LEN(toks); k++) {
        ob_tokenizer *t = cached(toks[k].rel, toks[k].json);
        CHECK(t != NULL);
        if (!t) continue;
        for (size_t i = 0; i < OB_ARRAY_LEN(k_texts); i++)
            check_roundtrip(t, toks[k].rel, k_texts[i], strlen(k_texts[i]), toks[k].lossless);
    }
}

/* One tokenizer, several threads: every thread must get the ids a single
 * thread gets (all scratch state is per call). */
typedef struct thread_job {
    ob_tokenizer *t;
    const ob_tokens *want; /* [OB_ARRAY_LEN(k_texts)] */
    int bad;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    for (int rep = 0; rep < 20; rep++)
        for (size_t i = 0; i < OB_ARRAY_LEN(k_texts); i++) {
            ob_tokens got = {0};
            if (ob_tokenizer_encode(j->t, k_texts[i], strlen(k_texts[i]), OB_ENCODE_ADD_SPECIAL, &got) < 0 ||
                got.n != j->want[i].n || (got.n && memcmp(got.ids, j->want[i].ids, got.n * sizeof *got.ids)))
                j->bad++;
            ob_tokens_free(&got);
        }
    return NULL;
}

TEST(tokenizer_threads) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    ob_tokenizer *t = cached("tokenizers/qwen2", true);
    CHECK(t != NULL);
    if (!t) return;
    ob_tokens want[OB_ARRAY_LEN(k_texts)];
    memset(want, 0, sizeof want);
    for (size_t i = 0; i < OB_ARRAY_LEN(k_texts); i++)
        CHECK_OK(ob_tokenizer_encode(t, k_texts[i], strlen(k_texts[i]), OB_ENCODE_ADD_SPECIAL, &want[i]));
    thread_job jobs[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (thread_job){t, want, 0};
        CHECK(pthread_create(&th[k], NULL, thread_main, &jobs[k]) == 0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        CHECK_EQ_INT(jobs[k].bad, 0);
    }
    for (size_t i = 0; i < OB_ARRAY_LEN(k_texts); i++) ob_tokens_free(&want[i]);
}

TEST(tokenizer_stream_holds_partial_utf8) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    /* "🦙" in Llama 2's vocabulary is four byte-fallback tokens: nothing may
     * come out before the fourth. */
    ob_tokenizer *t = cached("llama.cpp-vocab/ggml-vocab-llama-spm.gguf", false);
    CHECK(t != NULL);
    if (!t) return;
    const char *llama = "\xF0\x9F\xA6\x99";
    ob_tokens ids = {0};
    CHECK_OK(ob_tokenizer_encode(t, llama, 4, 0, &ids));
    ob_detok *d;
    CHECK_OK(ob_detok_create(t, 0, &d));
    size_t emitted = 0, bytes_tokens = 0;
    for (size_t i = 0; i < ids.n; i++) {
        const char *s;
        size_t n;
        bytes_tokens += ob_tokenizer_token_type(t, ids.ids[i]) == OB_TOKTYPE_BYTE;
        CHECK_OK(ob_detok_push(d, ids.ids[i], &s, &n));
        if (i + 1 < ids.n) CHECK_EQ_INT(n, 0);
        emitted += n;
        if (i + 1 == ids.n) CHECK(n == 4 && !memcmp(s, llama, 4));
    }
    CHECK_EQ_INT(bytes_tokens, 4);
    CHECK_EQ_INT(emitted, 4);
    /* A lone lead byte at the end of a stream becomes U+FFFD on flush. */
    ob_detok_reset(d);
    const char *s;
    size_t n;
    size_t first_byte = 0;
    while (first_byte + 1 < ids.n && ob_tokenizer_token_type(t, ids.ids[first_byte]) != OB_TOKTYPE_BYTE) first_byte++;
    CHECK_OK(ob_detok_push(d, ids.ids[first_byte], &s, &n));
    CHECK_EQ_INT(n, 0);
    CHECK_OK(ob_detok_flush(d, &s, &n));
    CHECK(n == 3 && !memcmp(s, "\xEF\xBF\xBD", 3));
    /* Token bytes: <0x0A> is a newline, "▁the" a space and "the". */
    char buf[16];
    ob_token nl = ob_tokenizer_find(t, "<0x0A>", 6), the = ob_tokenizer_find(t, "\xE2\x96\x81the", 6);
    CHECK(nl >= 0 && the >= 0);
    CHECK(ob_tokenizer_token_bytes(t, nl, buf, sizeof buf) == 1 && buf[0] == '\n');
    CHECK(ob_tokenizer_token_bytes(t, the, buf, sizeof buf) == 4 && !memcmp(buf, " the", 4));
    ob_detok_free(d);
    ob_tokens_free(&ids);
}

TEST(tokenizer_special_tokens) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    ob_tokenizer *t = cached("tokenizers/qwen2", true);
    CHECK(t != NULL);
    if (!t) return;
    const char *chat = "<|im_start|>user\nHi<|im_end|>";
    ob_tokens a = {0}, b = {0};
    CHECK_OK(ob_tokenizer_encode(t, chat, strlen(chat), OB_ENCODE_PARSE_SPECIAL, &a));
    CHECK_OK(ob_tokenizer_encode(t, chat, strlen(chat), 0, &b));
    ob_token start = ob_tokenizer_find(t, "<|im_start|>", 12), end = ob_tokenizer_find(t, "<|im_end|>", 10);
    CHECK(a.n >= 2 && a.ids[0] == start && a.ids[a.n - 1] == end);
    bool any = false;
    for (size_t i = 0; i < b.n; i++) any |= b.ids[i] == start || b.ids[i] == end;
    CHECK(!any); /* without PARSE_SPECIAL the markers are plain text */
    CHECK(ob_tokenizer_is_eog(t, end));
    CHECK(ob_tokenizer_special(t, OB_SPECIAL_EOS) == end);
    char *txt;
    size_t n;
    CHECK_OK(ob_tokenizer_decode(t, a.ids, a.n, OB_DECODE_SKIP_SPECIAL, &txt, &n));
    CHECK_EQ_STR(txt, "user\nHi");
    ob_free(txt);
    ob_tokens_free(&a);
    ob_tokens_free(&b);

    ob_tokenizer *spm = cached("llama.cpp-vocab/ggml-vocab-llama-spm.gguf", false);
    CHECK(spm != NULL);
    if (!spm) return;
    ob_tokens c = {0};
    CHECK_OK(ob_tokenizer_encode(spm, "Hi", 2, OB_ENCODE_ADD_SPECIAL, &c));
    CHECK(c.n >= 2 && c.ids[0] == 1 && ob_tokenizer_special(spm, OB_SPECIAL_BOS) == 1);
    CHECK(ob_tokenizer_adds_bos(spm) && !ob_tokenizer_adds_eos(spm));
    CHECK(ob_tokenizer_is_eog(spm, 2) && !ob_tokenizer_is_eog(spm, 1));
    CHECK(ob_tokenizer_kind(spm) == OB_TOK_SPM && ob_tokenizer_n_vocab(spm) == 32000);
    CHECK(ob_tokenizer_special(spm, OB_SPECIAL_UNK) == 0 && ob_tokenizer_is_special(spm, 1));
    ob_tokens_free(&c);

    /* The merge list keeps GGUF order (for writing a vocabulary back). */
    ob_tokenizer *gpt2 = cached("llama.cpp-vocab/ggml-vocab-gpt-2.gguf", false);
    CHECK(gpt2 != NULL);
    if (gpt2) {
        CHECK_EQ_INT(ob_tokenizer_n_merges(gpt2), 50000);
        ob_token l, r;
        CHECK_OK(ob_tokenizer_merge(gpt2, 0, &l, &r));
        size_t ln, rn;
        const char *ls = ob_tokenizer_token_text(gpt2, l, &ln), *rs = ob_tokenizer_token_text(gpt2, r, &rn);
        CHECK(ln == 2 && !memcmp(ls, "\xC4\xA0", 2) && rn == 1 && rs[0] == 't'); /* "Ġ t" */
        CHECK(ob_tokenizer_merge(gpt2, 50000, &l, &r) < 0);
        CHECK(!strcmp(ob_tokenizer_pre_name(gpt2), "gpt-2") && ob_tokenizer_kind(gpt2) == OB_TOK_BPE);
    }
}

/* CPU time of this process: steadier than wall time on a shared CI box. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The fastest of 3 encodes: a pause of the test's thread (another test on the same cores, a
 * virtual machine's stolen time) lengthens one run, not all three. */
static double time_encode(ob_tokenizer *t, const char *s, size_t n, size_t *n_ids) {
    double best = INFINITY;
    for (int r = 0; r < 3; r++) {
        ob_tokens ids = {0};
        double t0 = now_s();
        CHECK_OK(ob_tokenizer_encode(t, s, n, 0, &ids));
        double dt = now_s() - t0;
        *n_ids = ids.n;
        ob_tokens_free(&ids);
        if (dt < best) best = dt;
    }
    return best;
}

static void fill_pattern(char *buf, size_t n, int kind) {
    if (kind == 0) {
        memset(buf, 'a', n); /* one character, one word: worst case for naive merging */
    } else {
        /* No spaces: a long run of mixed letters and digits (one regex word). */
        uint64_t st = 42;
        for (size_t i = 0; i < n; i++) buf[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"[test_rand_u64(&st) % 36];
    }
}


/* 1 MiB of one repeated character and 1 MiB without any space, through each
 * model family. Each input is also encoded at 1/8 of the size: linear (or
 * n log n) cost grows about 8x, quadratic cost would grow 64x. Under ASan
 * (roughly 5x slower) only the three core models run, to keep CI fast. */
TEST(tokenizer_linear_time) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    struct {
        const char *rel;
        bool json;
        int kinds;    /* bit 0: one character, bit 1: no spaces */
        bool in_asan; /* also under sanitizers */
    } toks[] = {
        {"llama.cpp-vocab/ggml-vocab-gpt-2.gguf", false, 3, true},
        {"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", false, 3, true},
        {"llama.cpp-vocab/ggml-vocab-bert-bge.gguf", false, 3, true},
        {"llama.cpp-vocab/ggml-vocab-deepseek-llm.gguf", false, 2, false},
        {"tokenizers/llama3/tokenizer.json", true, 2, false},
        {"tokenizers/qwen2", true, 1, false},
    };
    size_t big = 1u << 20, small = big / 8;
    char *buf = malloc(big);
    for (size_t k = 0; k < OB_ARRAY_LEN(toks); k++) {
        if (TEST_SANITIZED && !toks[k].in_asan) continue;
        ob_tokenizer *t = cached(toks[k].rel, toks[k].json);
        CHECK(t != NULL);
        if (!t) continue;
        for (int kind = 0; kind < 2; kind++) {
            if (!(toks[k].kinds & (1 << kind))) continue;
            fill_pattern(buf, big, kind);
            size_t n1, n2;
            double t1 = time_encode(t, buf, small, &n1);
            double t2 = time_encode(t, buf, big, &n2);
            fprintf(stderr, "  %-45s %s: 128 KiB %.3f s, 1 MiB %.3f s (%zu tokens)\n", toks[k].rel,
                    kind ? "no spaces" : "one char ", t1, t2, n2);
            CHECK_MSG(t2 < 16 * t1 + 0.05, "%s grows superlinearly (%.3f s -> %.3f s)", toks[k].rel, t1, t2);
            CHECK(t2 < 30.0);
            CHECK(n2 > 0);
        }
    }
    free(buf);
}

/* ---- small hand-made tokenizers (no shared data needed) ---- */

static ob_tokenizer *from_json(const char *js) {
    ob_tokenizer *t = NULL;
    if (ob_tokenizer_from_json_string(js, strlen(js), NULL, 0, &t) < 0) fprintf(stderr, "  %s\n", ob_last_error());
    return t;
}

static bool enc_is(ob_tokenizer *t, const char *text, const ob_token *want, size_t n) {
    ob_tokens got = {0};
    bool ok = ob_tokenizer_encode(t, text, strlen(text), 0, &got) == 0 && got.n == n &&
              (n == 0 || memcmp(got.ids, want, n * sizeof *want) == 0);
    if (!ok) print_ids(text, got.ids, got.n);
    ob_tokens_free(&got);
    return ok;
}

static bool dec_is(ob_tokenizer *t, const ob_token *ids, size_t n, const char *want) {
    char *s = NULL;
    size_t len;
    bool ok = ob_tokenizer_decode(t, ids, n, 0, &s, &len) == 0 && !strcmp(s, want);
    if (!ok) fprintf(stderr, "  decode: \"%s\" (want \"%s\")\n", s ? s : "(null)", want);
    ob_free(s);
    return ok;
}

TEST(tokenizer_models_small) {
    /* Unigram: consecutive unknown characters fuse, then byte fallback spells
     * them when every byte has a token, else the whole run is <unk>. */
    ob_tokenizer *t = from_json("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"byte_fallback\": true, "
                                "\"vocab\": [[\"<unk>\", 0.0], [\"a\", -1.0], [\"<0xC3>\", -5.0], [\"<0xA9>\", -5.0], "
                                "[\"<0xE2>\", -5.0], [\"ab\", -1.5], [\"b\", -3.0]]}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(enc_is(t, "a\xC3\xA9\xC3\xA9", (ob_token[]){1, 2, 3, 2, 3}, 5));
        CHECK(enc_is(t, "a\xE2\x98\x83", (ob_token[]){1, 0}, 2));
        CHECK(enc_is(t, "abab", (ob_token[]){5, 5}, 2)); /* -3.0 beats a + b at -4.0 */
        ob_tokenizer_free(t);
    }
    /* WordLevel without a decoder: Hugging Face joins tokens with spaces. */
    t = from_json("{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"[UNK]\": 0, \"hello\": 1, \"world\": 2}, "
                  "\"unk_token\": \"[UNK]\"}, \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(enc_is(t, " hello  there world", (ob_token[]){1, 0, 2}, 3));
        CHECK(dec_is(t, (ob_token[]){1, 2, 0}, 3, "hello world [UNK]"));
        ob_tokenizer_free(t);
    }
    /* BPE with a continuing-subword prefix and an end-of-word suffix, and the
     * BPEDecoder that turns the suffix into spaces between words. */
    t = from_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"##b</w>\": 1, \"ab</w>\": 2, \"[UNK]\": 3}, "
                  "\"merges\": [\"a ##b</w>\"], \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\", "
                  "\"end_of_word_suffix\": \"</w>\"}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}, "
                  "\"decoder\": {\"type\": \"BPEDecoder\", \"suffix\": \"</w>\"}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(enc_is(t, "ab ab", (ob_token[]){2, 2}, 2));
        CHECK(enc_is(t, "ba", (ob_token[]){3, 3}, 2));
        CHECK(dec_is(t, (ob_token[]){2, 2}, 2, "ab ab"));
        CHECK(dec_is(t, (ob_token[]){0, 1}, 2, "a##b"));
        ob_tokenizer_free(t);
    }
    /* CharDelimiterSplit removes the delimiter; empty pieces vanish. */
    t = from_json("{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"[UNK]\": 0, \"a\": 1, \"b\": 2}, "
                  "\"unk_token\": \"[UNK]\"}, \"pre_tokenizer\": {\"type\": \"CharDelimiterSplit\", \"delimiter\": \"-\"}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(enc_is(t, "a-b--a-", (ob_token[]){1, 2, 1}, 3));
        CHECK(enc_is(t, "a b", (ob_token[]){0}, 1));
        ob_tokenizer_free(t);
    }
    /* Strip after Fuse: start and stop act on the joined text, also when it
     * is streamed (trailing spaces are held back until they are not last). */
    t = from_json("{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"[UNK]\": 0, \"a\": 1, \" \": 2}, "
                  "\"unk_token\": \"[UNK]\"}, \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, "
                  "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 2}]}}");
    CHECK(t != NULL);
    if (t) {
        CHECK(dec_is(t, (ob_token[]){2, 2, 1, 2, 2, 2}, 6, " a "));
        CHECK(dec_is(t, (ob_token[]){2, 1, 2, 1, 2}, 5, "a a"));
        CHECK(dec_is(t, (ob_token[]){2}, 1, ""));
        ob_tokenizer_free(t);
    }
}

/* ---- broken input ---- */

TEST(tokenizer_bad_json) {
    static const char *const bad[] = {
        "",
        "{",
        "[]",
        "{\"model\": 5}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": [], \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]], \"unk_id\": 0}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]], \"unk_id\": 5}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, \"normalizer\": {\"type\": \"Nope\"}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"Split\"}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"Split\", "
        "\"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\", \"invert\": false}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": \"x\"}]}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, \"normalizer\": {\"type\": \"Precompiled\", "
        "\"precompiled_charsmap\": \"AAAA\"}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, \"post_processor\": {\"type\": "
        "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"[X]\"}}]}}",
    };
    for (size_t i = 0; i < OB_ARRAY_LEN(bad); i++) {
        ob_tokenizer *t = NULL;
        int rc = ob_tokenizer_from_json_string(bad[i], strlen(bad[i]), NULL, 0, &t);
        CHECK_MSG(rc < 0 && t == NULL, "bad json %zu accepted", i);
        CHECK_MSG(ob_last_error()[0] != 0, "bad json %zu: no message", i);
        ob_tokenizer_free(t);
    }
    /* A minimal valid one works, and odd bytes go through it safely. */
    const char *ok = "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"[UNK]\": 0, \"hi\": 1}, \"unk_token\": "
                     "\"[UNK]\"}, \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"}}";
    ob_tokenizer *t = NULL;
    CHECK_OK(ob_tokenizer_from_json_string(ok, strlen(ok), NULL, 0, &t));
    if (t) {
        ob_tokens ids = {0};
        CHECK_OK(ob_tokenizer_encode(t, "hi \xff there", 10, OB_ENCODE_ADD_SPECIAL, &ids));
        CHECK(ids.n == 3 && ids.ids[0] == 1 && ids.ids[1] == 0 && ids.ids[2] == 0);
        ob_tokens_free(&ids);
        ob_tokenizer_free(t);
    }
}

/* Every allocation of building and using a tokenizer may fail: the result
 * is a clean OB_ERR_OOM (ASan checks nothing leaks or dangles). */
TEST(tokenizer_alloc_failures) {
    const char *js = "{\"added_tokens\": [{\"id\": 5, \"content\": \"<s>\", \"special\": true}],"
                     "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKC\"}, {\"type\": \"Lowercase\"}]},"
                     "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true},"
                     "\"decoder\": {\"type\": \"ByteLevel\"},"
                     "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}, "
                     "{\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [5]}}},"
                     "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3, \"\\u0120ab\": 4},"
                     "\"merges\": [\"a b\", \"\\u0120 ab\"]}}";
    int ok = 0, failed = 0;
    for (long n = 1; n < 400; n++) {
        ob_mem_fail_after(n);
        ob_tokenizer *t = NULL;
        int rc = ob_tokenizer_from_json_string(js, strlen(js), NULL, 0, &t);
        ob_tokens ids = {0};
        char *text = NULL;
        size_t len;
        if (rc == 0) rc = ob_tokenizer_encode(t, "ab AB <s>ab", 11, OB_ENCODE_ADD_SPECIAL | OB_ENCODE_PARSE_SPECIAL, &ids);
        if (rc == 0) rc = ob_tokenizer_decode(t, ids.ids, ids.n, 0, &text, &len);
        ob_mem_fail_after(0);
        if (rc == 0) {
            CHECK_EQ_STR(text, "<s> ab ab <s> ab"); /* prefix spaces from ByteLevel */
            ok++;
        } else {
            CHECK_MSG(rc == OB_ERR_OOM, "n=%ld: rc %d (%s)", n, rc, ob_last_error());
            failed++;
        }
        ob_free(text);
        ob_tokens_free(&ids);
        ob_tokenizer_free(t);
        if (ok > 5) break; /* past the last allocation */
    }
    CHECK(failed > 10 && ok > 0);
}

TEST(tokenizer_bad_gguf) {
    /* Arrays that disagree in length, ids out of range, unknown models. */
    const char *tokens[] = {"<unk>", "a", "b"};
    float scores[] = {0, -1, -2};
    int32_t types[] = {2, 1, 1};
    for (int variant = 0; variant < 4; variant++) {
        ob_gguf_writer *w;
        CHECK_OK(ob_gguf_writer_create(&w));
        ob_gguf_writer_set_str(w, "tokenizer.ggml.model", variant == 3 ? "rwkv-ish" : "llama");
        ob_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, variant == 2 ? 0 : 3);
        ob_gguf_writer_set_arr(w, "tokenizer.ggml.scores", OB_GGUF_F32, scores, variant == 0 ? 2 : 3);
        ob_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", OB_GGUF_I32, types, variant == 1 ? 2 : 3);
        void *data;
        size_t size;
        CHECK_OK(ob_gguf_writer_write_memory(w, &data, &size));
        ob_gguf_writer_free(w);
        ob_gguf *g;
        CHECK_OK(ob_gguf_open_memory(data, size, &g));
        ob_tokenizer *t = NULL;
        int rc = ob_tokenizer_from_gguf(g, &t);
        CHECK_MSG(rc < 0 && !t, "variant %d accepted", variant);
        ob_tokenizer_free(t);
        ob_gguf_free(g);
        ob_free(data);
    }
}

int main(int argc, char **argv) { return test_main(argc, argv); }
