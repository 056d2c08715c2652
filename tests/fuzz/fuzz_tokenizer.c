/*
 * fuzz_tokenizer.c - libFuzzer target for the tokenizers.
 *
 * The first input byte picks what the rest is:
 *   'J'  a tokenizer.json: it must load or fail with a message; if it
 *        loads, a few fixed strings are encoded and decoded through it;
 *   'G'  a GGUF image: the same for its tokenizer.ggml.* keys;
 *   else text for one of the preloaded tokenizers (byte % count), with
 *        flags from the next byte: encode, check every id is in range,
 *        decode whole and token by token (each streamed chunk valid UTF-8,
 *        chunks == whole decode), and for lossless tokenizers
 *        decode(encode(x)) == x when x is valid UTF-8.
 * Tokenizers are loaded once in LLVMFuzzerInitialize from ../shared/models
 * (OB_SHARED_MODELS overrides) and tests/data/tokenizer; a small byte-level
 * BPE built from JSON in this file is always there, so the target is useful
 * without the shared data too.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mem.h"
#include "core/status.h"
#include "core/utf8.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_tok {
    const char *name;
    ob_tokenizer *t;
    bool lossless;   /* decode(encode(x)) == x for valid UTF-8 x */
    bool spm_prefix; /* lossless only without special tokens (a prefix space follows them) */
} fuzz_tok;

static fuzz_tok g_toks[8];
static int g_n;

/* A byte-level BPE: the 256 byte characters, a few merges, two added tokens. */
static const char *tiny_json(void) {
    static char buf[16384];
    size_t n = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{\"added_tokens\": [{\"id\": 262, \"content\": \"<|end|>\", "
                                                   "\"special\": true}, {\"id\": 263, \"content\": \" <x> \", "
                                                   "\"special\": false, \"lstrip\": true, \"rstrip\": true}],"
                                                   "\"normalizer\": {\"type\": \"NFC\"},"
                                                   "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                                                   "false, \"use_regex\": true},"
                                                   "\"decoder\": {\"type\": \"ByteLevel\"},"
                                                   "\"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int b = 0; b < 256; b++) {
        /* GPT-2's byte alphabet, written as JSON \u escapes. */
        bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        static int next = 256;
        int cp = self ? b : next++;
        if (cp == '"' || cp == '\\')
            n += (size_t)snprintf(buf + n, sizeof buf - n, "\"\\%c\": %d, ", cp, b);
        else
            n += (size_t)snprintf(buf + n, sizeof buf - n, "\"\\u%04x\": %d, ", cp, b);
    }
    n += (size_t)snprintf(buf + n, sizeof buf - n,
                          "\"he\": 256, \"ll\": 257, \"hell\": 258, \"\\u0120t\": 259, \"\\u0120th\": 260, "
                          "\"hello\": 261}, \"merges\": [\"h e\", \"l l\", \"he ll\", \"\\u0120 t\", \"\\u0120t h\", "
                          "\"hell o\"]}}");
    return buf;
}

static void add(const char *name, ob_tokenizer *t, bool lossless, bool spm_prefix) {
    if (!t || g_n >= (int)(sizeof g_toks / sizeof g_toks[0])) return;
    g_toks[g_n++] = (fuzz_tok){name, t, lossless, spm_prefix};
}

static ob_tokenizer *from_gguf(const char *dir, const char *rel) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path) return NULL;
    ob_gguf *g;
    if (ob_gguf_open(path, &g) < 0) return NULL;
    ob_tokenizer *t = NULL;
    ob_tokenizer_from_gguf(g, &t);
    ob_gguf_free(g);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    ob_tokenizer *t = NULL;
    const char *js = tiny_json();
    if (ob_tokenizer_from_json_string(js, strlen(js), NULL, 0, &t) < 0) {
        fprintf(stderr, "fuzz_tokenizer: built-in tokenizer: %s\n", ob_last_error());
        abort();
    }
    add("tiny-bpe", t, false, false); /* NFC: lossless only for NFC input */
    char src[4096], dir[4096], data[4096];
    snprintf(src, sizeof src, "%s", __FILE__);
    char *tests_fuzz = dirname(src);
    snprintf(data, sizeof data, "%s/../data/tokenizer/unigram-nfkc-tokenizer.json", tests_fuzz);
    const char *env = getenv("OB_SHARED_MODELS");
    if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else snprintf(dir, sizeof dir, "%s/../../../shared/models", tests_fuzz);
    struct stat st;
    if (stat(dir, &st) == 0) {
        add("gpt-2", from_gguf(dir, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"), true, false);
        add("llama-spm", from_gguf(dir, "llama.cpp-vocab/ggml-vocab-llama-spm.gguf"), true, true);
        add("bert-bge", from_gguf(dir, "llama.cpp-vocab/ggml-vocab-bert-bge.gguf"), false, false);
        add("deepseek-llm", from_gguf(dir, "llama.cpp-vocab/ggml-vocab-deepseek-llm.gguf"), true, false);
        add("phi-3", from_gguf(dir, "llama.cpp-vocab/ggml-vocab-phi-3.gguf"), true, true);
    } else {
        fprintf(stderr, "fuzz_tokenizer: %s not found; only the built-in tokenizer is used\n", dir);
    }
    t = NULL;
    if (ob_tokenizer_from_json_file(data, &t) == 0) add("unigram-nfkc", t, false, false);
    fprintf(stderr, "fuzz_tokenizer: %d tokenizers\n", g_n);
    return 0;
}

static bool contains(const uint8_t *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

static void exercise(const fuzz_tok *ft, const char *text, size_t len, unsigned flags) {
    const ob_tokenizer *t = ft->t;
    ob_tokens ids = {0};
    if (ob_tokenizer_encode(t, text, len, flags, &ids) < 0) abort(); /* any bytes must encode */
    int32_t nv = ob_tokenizer_n_vocab(t);
    for (size_t i = 0; i < ids.n; i++)
        if (ids.ids[i] < 0 || ids.ids[i] >= nv) abort();
    char *whole = NULL;
    size_t whole_len = 0;
    if (ob_tokenizer_decode(t, ids.ids, ids.n, 0, &whole, &whole_len) < 0) abort();
    if (!ob_utf8_valid(whole, whole_len) || strlen(whole) > whole_len) abort();
    ob_detok *d;
    if (ob_detok_create(t, 0, &d) < 0) abort();
    size_t at = 0;
    for (size_t i = 0; i <= ids.n; i++) {
        const char *s;
        size_t n;
        int rc = i < ids.n ? ob_detok_push(d, ids.ids[i], &s, &n) : ob_detok_flush(d, &s, &n);
        if (rc < 0 || !ob_utf8_valid(s, n)) abort();
        if (at + n > whole_len || memcmp(whole + at, s, n) != 0) abort(); /* stream == whole */
        at += n;
    }
    if (at != whole_len) abort();
    ob_detok_free(d);
    /* SentencePiece-style tokenizers put a "▁" before the text after every
     * added token (as llama.cpp and HF's legacy Llama do), which decodes to
     * a space: those inputs do not round-trip by design. */
    bool added = false;
    for (size_t i = 0; i < ids.n; i++) {
        ob_token_type ty = ob_tokenizer_token_type(t, ids.ids[i]);
        added |= ty == OB_TOKTYPE_CONTROL || ty == OB_TOKTYPE_USER_DEFINED || ty == OB_TOKTYPE_UNKNOWN;
    }
    if (ft->lossless && !(flags & OB_ENCODE_ADD_SPECIAL) && ob_utf8_valid(text, len) && !(ft->spm_prefix && added) &&
        !(ft->spm_prefix && contains((const uint8_t *)text, len, "\xE2\x96\x81"))) {
        if (whole_len != len || memcmp(whole, text, len) != 0) {
            fprintf(stderr, "fuzz_tokenizer: %s does not round-trip (%zu -> %zu bytes)\n", ft->name, len, whole_len);
            abort();
        }
    }
    /* Skipping special tokens must also give valid text. */
    ob_free(whole);
    if (ob_tokenizer_decode(t, ids.ids, ids.n, OB_DECODE_SKIP_SPECIAL, &whole, &whole_len) < 0) abort();
    if (!ob_utf8_valid(whole, whole_len)) abort();
    ob_free(whole);
    ob_tokens_free(&ids);
}

static void probe(ob_tokenizer *t) {
    static const char *const samples[] = {"Hello world", "", "  \t\n", "\xF0\x9F\xA6\x99 x", "\xff\xfe", "a<|end|>b"};
    fuzz_tok ft = {"loaded", t, false, false};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        exercise(&ft, samples[i], strlen(samples[i]), OB_ENCODE_ADD_SPECIAL | OB_ENCODE_PARSE_SPECIAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] == 'J') {
        ob_tokenizer *t = NULL;
        if (ob_tokenizer_from_json_string((const char *)data + 1, size - 1, NULL, 0, &t) < 0) {
            if (!ob_last_error()[0] || t) abort();
            return 0;
        }
        probe(t);
        ob_tokenizer_free(t);
        return 0;
    }
    if (data[0] == 'G') {
        ob_gguf *g = NULL;
        if (ob_gguf_open_memory(data + 1, size - 1, &g) < 0) return 0;
        ob_tokenizer *t = NULL;
        if (ob_tokenizer_from_gguf(g, &t) == 0) probe(t);
        else if (!ob_last_error()[0] || t) abort();
        ob_tokenizer_free(t);
        ob_gguf_free(g);
        return 0;
    }
    if (size < 2 || g_n == 0) return 0;
    const fuzz_tok *ft = &g_toks[data[0] % g_n];
    unsigned flags = data[1] & (OB_ENCODE_ADD_SPECIAL | OB_ENCODE_PARSE_SPECIAL);
    exercise(ft, (const char *)data + 2, size - 2, flags);
    return 0;
}
