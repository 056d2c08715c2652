/*
 * test_tokenizer_hf.c - our tokenizers against Hugging Face tokenizers
 * 0.23.2, sentencepiece and transformers, id for id.
 *
 * The expected ids live in tests/data/tokenizer/ (one JSON file per tokenizer), produced on the GPU
 * machine by scripts/gen_tokenizer_fixtures.py (its header describes the
 * format). Each fixture says how its tokenizer was built; this file rebuilds
 * the same tokenizer from ../shared/models:
 *   {"file": ...}    a tokenizer.json (shared, or committed next to the fixture)
 *   {"dir": ...}     the vocab.json + merges.txt layout
 *   {"recipe": ...}  a tokenizer.json made from a GGUF vocabulary, the way the
 *                    script's build step makes it (ported below)
 *   {"base": ...}    another tokenizer with its normalizer / pre_tokenizer /
 *                    decoder / added tokens replaced by the fixture's JSON
 *   {"gguf": ...}    the GGUF vocabulary itself (sentencepiece fixtures)
 * and compares, for every shared test string: ids with special-token parsing
 * (HF's default), ids without it, ids with add_special_tokens, decode (and
 * decode with skip_special_tokens), and the ids of invalid UTF-8 inputs
 * after replacement. Each fixture prints its pass counts.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <libgen.h>
#include <time.h>

#include "../src/core/mem.h"
#include "../src/core/status.h"
#include "../src/core/utf8.h"
#include "../src/gguf/gguf.h"
#include "../src/tokenizer/tok_internal.h"
#include "../src/tokenizer/tokenizer.h"
#include "test.h"

static char g_data_dir[4096];

/* "a/b" into buf; an over-long path becomes "" (and fails to open). */
static const char *join(char *buf, size_t size, const char *a, const char *b) {
    int n = snprintf(buf, size, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= size) buf[0] = 0;
    return buf;
}

static const char *data_dir(void) {
    if (!g_data_dir[0]) {
        const char *env = getenv("OB_TOKENIZER_FIXTURES");
        if (env && *env) {
            snprintf(g_data_dir, sizeof g_data_dir, "%s", env);
        } else {
            char file[4096];
            snprintf(file, sizeof file, "%s", __FILE__);
            join(g_data_dir, sizeof g_data_dir, dirname(file), "data/tokenizer");
        }
    }
    return g_data_dir;
}

static json_t *load_json(const char *dir, const char *rel) {
    char path[4096];
    join(path, sizeof path, dir, rel);
    json_error_t err;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &err);
    if (!j) fprintf(stderr, "  %s: %s (line %d)\n", path, err.text, err.line);
    return j;
}

static int open_gguf(const char *rel, ob_gguf **g) {
    const char *dir = test_models_dir();
    char path[4096];
    join(path, sizeof path, dir, rel);
    int rc = ob_gguf_open(path, g);
    if (rc < 0) fprintf(stderr, "  %s: %s\n", path, ob_last_error());
    return rc;
}

static const ob_gguf_str *gguf_strs(const ob_gguf *g, const char *key, uint64_t *n) {
    const ob_gguf_array *a;
    if (ob_gguf_get_arr(g, key, OB_GGUF_STRING, &a) < 0) return NULL;
    *n = a->n;
    return a->data;
}

static json_t *jstrn(const ob_gguf_str *s) { return json_stringn(s->s, s->len); }

static json_t *added_json(json_int_t id, const char *content, size_t len, bool special) {
    return json_pack("{s:I, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", content, len, "single_word", 0,
                     "lstrip", 0, "rstrip", 0, "normalized", !special, "special", special);
}

/* ---- recipes: the tokenizer.json files gen_tokenizer_fixtures.py builds ---- */

typedef struct spm_merge {
    float score;
    int32_t piece, left, right;
} spm_merge;

static int cmp_merge(const void *a, const void *b) {
    const spm_merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

/* SentencePiece pieces as a BPE vocabulary + merges (transformers'
 * SentencePieceExtractor): every split of a NORMAL/BYTE piece into two such
 * pieces, ordered by the merged piece's score, then by piece and part ids. */
static json_t *recipe_llama_spm(const ob_gguf *g, bool metaspace) {
    uint64_t n;
    const ob_gguf_str *toks = gguf_strs(g, "tokenizer.ggml.tokens", &n);
    const ob_gguf_array *sc, *ty;
    if (!toks || ob_gguf_get_arr(g, "tokenizer.ggml.scores", OB_GGUF_F32, &sc) < 0 ||
        ob_gguf_get_arr(g, "tokenizer.ggml.token_type", OB_GGUF_I32, &ty) < 0)
        return NULL;
    const float *scores = sc->data;
    const int32_t *types = ty->data;
    json_t *vocab = json_object(), *added = json_array();
    for (uint64_t i = 0; i < n; i++) {
        char *k = strndup(toks[i].s, toks[i].len);
        if (!json_object_get(vocab, k)) json_object_set_new(vocab, k, json_integer((json_int_t)i));
        free(k);
        if (types[i] == 2 || types[i] == 3) json_array_append_new(added, added_json((json_int_t)i, toks[i].s, toks[i].len, true));
    }
    /* Index of NORMAL and BYTE pieces (later ids win, like a Python dict). */
    tk_map idx = {0};
    tk_map_init(&idx, n);
    for (uint64_t i = 0; i < n; i++)
        if (types[i] == 1 || types[i] == 6) tk_map_put(&idx, tk_hash_bytes(toks[i].s, toks[i].len), i);
    size_t cap = 1024, cnt = 0;
    spm_merge *m = malloc(cap * sizeof *m);
    for (uint64_t i = 0; i < n; i++) {
        if (types[i] != 1 && types[i] != 6) continue;
        const char *s = toks[i].s;
        size_t len = toks[i].len;
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue; /* split at characters */
            uint64_t l, r;
            if (!tk_map_get(&idx, tk_hash_bytes(s, k), &l) || !tk_map_get(&idx, tk_hash_bytes(s + k, len - k), &r)) continue;
            if (toks[l].len != k || memcmp(toks[l].s, s, k) || toks[r].len != len - k || memcmp(toks[r].s, s + k, len - k))
                continue; /* hash collision */
            if (cnt == cap) m = realloc(m, (cap *= 2) * sizeof *m);
            m[cnt++] = (spm_merge){scores[i], (int32_t)i, (int32_t)l, (int32_t)r};
        }
    }
    qsort(m, cnt, sizeof *m, cmp_merge);
    json_t *merges = json_array();
    for (size_t i = 0; i < cnt; i++)
        json_array_append_new(merges, json_pack("[o, o]", jstrn(&toks[m[i].left]), jstrn(&toks[m[i].right])));
    free(m);
    tk_map_free(&idx);
    json_t *model = json_pack("{s:s, s:n, s:s, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout",
                              "unk_token", "<unk>", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 1,
                              "byte_fallback", 1, "ignore_merges", 0, "vocab", vocab, "merges", merges);
    json_t *post = json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[i], s:[s]}}}", "type",
                             "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0, "Sequence", "id",
                             "A", "type_id", 0, "special_tokens", "<s>", "id", "<s>", "ids", 1, "tokens", "<s>");
    json_t *root = json_pack("{s:o, s:o, s:o}", "added_tokens", added, "model", model, "post_processor", post);
    if (metaspace) {
        json_object_set_new(root, "normalizer", json_null());
        json_object_set_new(root, "pre_tokenizer", json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement",
                                                              "\xE2\x96\x81", "prepend_scheme", "first", "split", 0));
        json_object_set_new(root, "decoder",
                            json_pack("{s:s, s:[{s:s, s:s, s:s, s:b}, {s:s}, {s:s}]}", "type", "Sequence", "decoders",
                                      "type", "Metaspace", "replacement", "\xE2\x96\x81", "prepend_scheme", "first",
                                      "split", 0, "type", "ByteFallback", "type", "Fuse"));
    } else {
        json_object_set_new(root, "normalizer",
                            json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}", "type", "Sequence", "normalizers",
                                      "type", "Prepend", "prepend", "\xE2\x96\x81", "type", "Replace", "pattern",
                                      "String", " ", "content", "\xE2\x96\x81"));
        json_object_set_new(root, "pre_tokenizer", json_null());
        json_object_set_new(root, "decoder",
                            json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}", "type",
                                      "Sequence", "decoders", "type", "Replace", "pattern", "String", "\xE2\x96\x81",
                                      "content", " ", "type", "ByteFallback", "type", "Fuse", "type", "Strip",
                                      "content", " ", "start", 1, "stop", 0));
    }
    return root;
}

static json_t *recipe_gpt2(const ob_gguf *g) {
    uint64_t n, nm;
    const ob_gguf_str *toks = gguf_strs(g, "tokenizer.ggml.tokens", &n);
    const ob_gguf_str *mer = gguf_strs(g, "tokenizer.ggml.merges", &nm);
    uint32_t eot;
    if (!toks || !mer || ob_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eot) < 0) return NULL;
    json_t *vocab = json_object(), *merges = json_array();
    for (uint64_t i = 0; i < n; i++) {
        char *k = strndup(toks[i].s, toks[i].len);
        if (!json_object_get(vocab, k)) json_object_set_new(vocab, k, json_integer((json_int_t)i));
        free(k);
    }
    for (uint64_t i = 0; i < nm; i++) json_array_append_new(merges, jstrn(&mer[i]));
    return json_pack("{s:[o], s:n, s:{s:s, s:b, s:b, s:b}, s:{s:s}, s:{s:s, s:n, s:o, s:o}}", "added_tokens",
                     added_json(eot, toks[eot].s, toks[eot].len, true), "normalizer", "pre_tokenizer", "type",
                     "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1, "decoder", "type",
                     "ByteLevel", "model", "type", "BPE", "unk_token", "vocab", vocab, "merges", merges);
}

static json_t *recipe_bert(const ob_gguf *g) {
    uint64_t n;
    const ob_gguf_str *toks = gguf_strs(g, "tokenizer.ggml.tokens", &n);
    const ob_gguf_array *ty;
    uint32_t cls, sep;
    if (!toks || ob_gguf_get_arr(g, "tokenizer.ggml.token_type", OB_GGUF_I32, &ty) < 0 ||
        ob_gguf_get_u32(g, "tokenizer.ggml.cls_token_id", &cls) < 0 ||
        ob_gguf_get_u32(g, "tokenizer.ggml.seperator_token_id", &sep) < 0)
        return NULL;
    const int32_t *types = ty->data;
    json_t *vocab = json_object(), *added = json_array();
    for (uint64_t i = 0; i < n; i++) {
        const char *s = toks[i].s;
        size_t len = toks[i].len;
        char buf[512];
        /* Undo llama.cpp's phantom space: "▁the" -> "the", "ing" -> "##ing". */
        if (types[i] == 3 || (len >= 2 && s[0] == '[' && s[len - 1] == ']'))
            snprintf(buf, sizeof buf, "%.*s", (int)len, s);
        else if (len >= 3 && !memcmp(s, "\xE2\x96\x81", 3))
            snprintf(buf, sizeof buf, "%.*s", (int)len - 3, s + 3);
        else
            snprintf(buf, sizeof buf, "##%.*s", (int)len, s);
        if (buf[0] && !json_object_get(vocab, buf)) json_object_set_new(vocab, buf, json_integer((json_int_t)i));
        if (types[i] == 3) json_array_append_new(added, added_json((json_int_t)i, s, len, true));
    }
    return json_pack("{s:o, s:{s:s, s:b, s:b, s:n, s:b}, s:{s:s}, s:{s:s, s:[s, I], s:[s, I]}, s:{s:s, s:s, s:b},"
                     " s:{s:s, s:s, s:s, s:i, s:o}}",
                     "added_tokens", added, "normalizer", "type", "BertNormalizer", "clean_text", 1,
                     "handle_chinese_chars", 1, "strip_accents", "lowercase", 1, "pre_tokenizer", "type",
                     "BertPreTokenizer", "post_processor", "type", "BertProcessing", "sep", "[SEP]", (json_int_t)sep,
                     "cls", "[CLS]", (json_int_t)cls, "decoder", "type", "WordPiece", "prefix", "##", "cleanup", 1,
                     "model", "type", "WordPiece", "unk_token", "[UNK]", "continuing_subword_prefix", "##",
                     "max_input_chars_per_word", 100, "vocab", vocab);
}

/* tokenizer.json of a base: shared file or recipe (cached, built once). */
static json_t *base_json(const char *name) {
    static struct {
        char name[64];
        json_t *j;
    } cache[8];
    for (size_t i = 0; i < OB_ARRAY_LEN(cache); i++)
        if (cache[i].j && !strcmp(cache[i].name, name)) return cache[i].j;
    json_t *j = NULL;
    if (!strcmp(name, "llama3")) {
        j = load_json(test_models_dir(), "tokenizers/llama3/tokenizer.json");
    } else {
        const char *gguf = !strncmp(name, "llama-spm", 9) ? "llama.cpp-vocab/ggml-vocab-llama-spm.gguf"
                           : !strcmp(name, "gpt2-hf")    ? "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"
                                                         : "llama.cpp-vocab/ggml-vocab-bert-bge.gguf";
        ob_gguf *g;
        if (open_gguf(gguf, &g) < 0) return NULL;
        if (!strcmp(name, "llama-spm-hf-legacy")) j = recipe_llama_spm(g, false);
        else if (!strcmp(name, "llama-spm-hf-metaspace")) j = recipe_llama_spm(g, true);
        else if (!strcmp(name, "gpt2-hf")) j = recipe_gpt2(g);
        else if (!strcmp(name, "bert-bge-hf")) j = recipe_bert(g);
        ob_gguf_free(g);
    }
    for (size_t i = 0; j && i < OB_ARRAY_LEN(cache); i++)
        if (!cache[i].j) {
            snprintf(cache[i].name, sizeof cache[i].name, "%s", name);
            cache[i].j = j;
            break;
        }
    return j;
}

/* A GGUF "t5" vocabulary made from a Unigram tokenizer.json and the
 * sentencepiece model flags the fixture records. */
static ob_tokenizer *unigram_gguf(const json_t *hf, const json_t *model) {
    json_t *vocab = json_object_get(json_object_get(hf, "model"), "vocab");
    json_t *types = json_object_get(model, "types");
    size_t n = json_array_size(vocab);
    if (!n || json_array_size(types) != n) return NULL;
    const char **toks = malloc(n * sizeof *toks);
    float *scores = malloc(n * sizeof *scores);
    int32_t *ty = malloc(n * sizeof *ty);
    for (size_t i = 0; i < n; i++) {
        toks[i] = json_string_value(json_array_get(json_array_get(vocab, i), 0));
        scores[i] = (float)json_number_value(json_array_get(json_array_get(vocab, i), 1));
        ty[i] = (int32_t)json_integer_value(json_array_get(types, i));
    }
    ob_gguf_writer *w;
    ob_gguf_writer_create(&w);
    ob_gguf_writer_set_str(w, "tokenizer.ggml.model", "t5");
    ob_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, n);
    ob_gguf_writer_set_arr(w, "tokenizer.ggml.scores", OB_GGUF_F32, scores, n);
    ob_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", OB_GGUF_I32, ty, n);
    ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", json_is_true(json_object_get(model, "add_dummy_prefix")));
    ob_gguf_writer_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces",
                            json_is_true(json_object_get(model, "remove_extra_whitespaces")));
    for (size_t i = 0; i < n; i++)
        if (ty[i] == 2) ob_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)i);
    /* The charsmap, from the Precompiled normalizer's base64. */
    json_t *norms = json_object_get(json_object_get(hf, "normalizer"), "normalizers");
    for (size_t i = 0; i < json_array_size(norms); i++) {
        json_t *nm = json_array_get(norms, i);
        const char *b64 = json_string_value(json_object_get(nm, "precompiled_charsmap"));
        if (!b64) continue;
        size_t len = strlen(b64), k = 0;
        unsigned char *blob = malloc(len);
        uint32_t acc = 0;
        int bits = 0;
        for (size_t c = 0; c < len; c++) {
            const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            const char *p = strchr(al, b64[c]);
            if (!p || !b64[c]) continue;
            acc = (acc << 6) | (uint32_t)(p - al);
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                blob[k++] = (unsigned char)(acc >> bits);
            }
        }
        ob_gguf_writer_set_arr(w, "tokenizer.ggml.precompiled_charsmap", OB_GGUF_U8, blob, k);
        free(blob);
    }
    void *data;
    size_t size;
    ob_tokenizer *t = NULL;
    if (ob_gguf_writer_write_memory(w, &data, &size) == 0) {
        ob_gguf *g;
        if (ob_gguf_open_memory(data, size, &g) == 0) {
            if (ob_tokenizer_from_gguf(g, &t) < 0) fprintf(stderr, "  unigram gguf: %s\n", ob_last_error());
            ob_gguf_free(g);
        }
        ob_free(data);
    }
    ob_gguf_writer_free(w);
    free(toks);
    free(scores);
    free(ty);
    return t;
}

/* One tokenizer per base, reused by the fixtures that only swap its
 * normalizer / pre-tokenizer (building llama3's 128k vocabulary and 280k
 * merges takes longer than checking a fixture). */
static ob_tokenizer *base_tokenizer(const char *name) {
    static struct {
        char name[64];
        ob_tokenizer *t;
    } cache[4];
    for (size_t i = 0; i < OB_ARRAY_LEN(cache); i++)
        if (cache[i].t && !strcmp(cache[i].name, name)) return cache[i].t;
    json_t *j = base_json(name);
    ob_tokenizer *t = NULL;
    if (!j || tk_from_json_value(j, NULL, &t) < 0) return NULL;
    for (size_t i = 0; i < OB_ARRAY_LEN(cache); i++)
        if (!cache[i].t) {
            snprintf(cache[i].name, sizeof cache[i].name, "%s", name);
            cache[i].t = t;
            return t;
        }
    return t; /* (leaks if the cache is full; it is not) */
}

/* Build the tokenizer a fixture describes. *spm is set for fixtures whose
 * reference is sentencepiece (no special-token parsing, no HF decode);
 * *owned tells whether the caller frees it. */
static ob_tokenizer *build(const json_t *fx, bool *spm, bool *owned) {
    const json_t *b = json_object_get(fx, "build");
    const char *file = json_string_value(json_object_get(b, "file"));
    const char *dir = json_string_value(json_object_get(b, "dir"));
    const char *recipe = json_string_value(json_object_get(b, "recipe"));
    const char *base = json_string_value(json_object_get(b, "base"));
    const char *gguf = json_string_value(json_object_get(b, "gguf"));
    const char *name = json_string_value(json_object_get(fx, "name"));
    *spm = strstr(name, "sentencepiece") != NULL;
    *owned = true;
    ob_tokenizer *t = NULL;
    if (base && !json_object_get(b, "added_tokens") && !json_object_get(b, "decoder")) {
        t = base_tokenizer(base);
        *owned = false;
        json_t *ign = json_object_get(b, "ignore_merges");
        if (t && tk_replace_pipeline(t, json_object_get(b, "normalizer"), json_object_get(b, "pre_tokenizer"),
                                     json_is_boolean(ign) ? json_is_true(ign) : -1) < 0) {
            fprintf(stderr, "  build %s: %s\n", name, ob_last_error());
            return NULL;
        }
        return t;
    }
    int rc = 0;
    char path[4096];
    if (*spm && file) {
        json_t *hf = load_json(data_dir(), file);
        if (hf) t = unigram_gguf(hf, json_object_get(fx, "model"));
        json_decref(hf);
        return t;
    }
    if (*spm && gguf) {
        ob_gguf *g;
        if (open_gguf(gguf, &g) < 0) return NULL;
        rc = ob_tokenizer_from_gguf(g, &t);
        ob_gguf_free(g);
    } else if (file && !strcmp(file, "llama3/tokenizer.json")) {
        /* The same file the "llama3" base is: share one load (the file path,
         * with tokenizer_config.json, is covered by test_tokenizer.c). */
        *owned = false;
        return base_tokenizer("llama3");
    } else if (file) {
        join(path, sizeof path, data_dir(), file);
        rc = ob_tokenizer_from_json_file(path, &t);
    } else if (dir) {
        { char rel[512]; snprintf(rel, sizeof rel, "tokenizers/%s", dir); join(path, sizeof path, test_models_dir(), rel); }
        rc = ob_tokenizer_from_json_file(path, &t);
    } else if (recipe || base) {
        json_t *j = base_json(recipe ? recipe : base);
        if (!j) return NULL;
        json_t *copy = json_copy(j); /* shallow: replaced members only */
        static const char *const keys[] = {"normalizer", "pre_tokenizer", "decoder"};
        for (size_t i = 0; base && i < OB_ARRAY_LEN(keys); i++) {
            json_t *v = json_object_get(b, keys[i]);
            if (v) json_object_set(copy, keys[i], v);
        }
        json_t *extra = json_object_get(b, "added_tokens");
        if (base && extra) {
            json_t *list = json_copy(json_object_get(j, "added_tokens"));
            json_array_extend(list, extra);
            json_object_set_new(copy, "added_tokens", list);
        }
        json_t *ign = json_object_get(b, "ignore_merges");
        if (base && json_is_boolean(ign)) {
            json_t *model = json_copy(json_object_get(j, "model"));
            json_object_set(model, "ignore_merges", ign);
            json_object_set_new(copy, "model", model);
        }
        rc = tk_from_json_value(copy, NULL, &t);
        json_decref(copy);
    }
    if (rc < 0 || !t) fprintf(stderr, "  build %s: %s\n", name, ob_last_error());
    return t;
}

static bool ids_equal(const ob_tokens *got, const json_t *want) {
    if (got->n != json_array_size(want)) return false;
    for (size_t k = 0; k < got->n; k++)
        if (got->ids[k] != json_integer_value(json_array_get(want, k))) return false;
    return true;
}

typedef struct tally {
    int pass, n;
} tally;

static void report_ids(const char *fx, const char *what, const char *text, size_t len, const json_t *want,
                       const ob_tokens *got, tally *t) {
    t->n++;
    if (ids_equal(got, want)) {
        t->pass++;
        return;
    }
    if (t->n - t->pass > 3) return; /* the first few are enough to debug */
    fprintf(stderr, "  %s %s mismatch on \"", fx, what);
    for (size_t i = 0; i < len && i < 70; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fprintf(stderr, "\"\n    want:");
    for (size_t i = 0; i < json_array_size(want) && i < 40; i++) fprintf(stderr, " %lld", json_integer_value(json_array_get(want, i)));
    fprintf(stderr, "\n    got: ");
    for (size_t i = 0; i < got->n && i < 40; i++) fprintf(stderr, " %d", got->ids[i]);
    fputc('\n', stderr);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check_fixture(const char *fname, const json_t *strings) {
    double t_start = now_s();
    json_t *fx = load_json(data_dir(), fname);
    CHECK(fx != NULL);
    if (!fx) return;
    const char *name = json_string_value(json_object_get(fx, "name"));
    bool spm, owned;
    ob_tokenizer *t = build(fx, &spm, &owned);
    CHECK_MSG(t != NULL, "%s: no tokenizer", name);
    if (!t) {
        json_decref(fx);
        return;
    }
    const json_t *texts = json_object_get(strings, "texts"), *inv = json_object_get(strings, "invalid_hex");
    const json_t *ids = json_object_get(fx, "ids"), *split = json_object_get(fx, "ids_split_special");
    const json_t *add = json_object_get(fx, "ids_add_special"), *dd = json_object_get(fx, "decode_diff");
    const json_t *dsk = json_object_get(fx, "decode_skip_special_diff"), *bad = json_object_get(fx, "invalid");
    tally t_ids = {0}, t_split = {0}, t_add = {0}, t_dec = {0}, t_skip = {0}, t_inv = {0};
    /* sentencepiece and Hugging Face differ in two places, and for those we
     * follow Hugging Face (the project's reference): user-defined pieces
     * (HF and llama.cpp cut them out of the text first, so no "▁" precedes
     * them; sentencepiece matches them after adding its dummy prefix), and
     * the text of unknown pieces (HF: the token's text "<unk>",
     * sentencepiece: " ⁇ "). Such strings are checked against the HF
     * fixture of the same model instead. */
    json_t *hf_alt = NULL;
    int spm_via_hf = 0;
    if (spm && json_object_get(json_object_get(fx, "build"), "file")) {
        char alt[256];
        snprintf(alt, sizeof alt, "%s", fname);
        char *dash = strstr(alt, "-sentencepiece");
        if (dash) strcpy(dash, ".json");
        hf_alt = load_json(data_dir(), alt);
    }
    unsigned parse = spm ? 0 : OB_ENCODE_PARSE_SPECIAL;
    for (size_t i = 0; i < json_array_size(texts); i++) {
        const json_t *tx = json_array_get(texts, i);
        const char *s = json_string_value(tx);
        size_t len = json_string_length(tx);
        char key[32];
        snprintf(key, sizeof key, "%zu", i);
        ob_tokens got = {0};
        CHECK_OK(ob_tokenizer_encode(t, s, len, parse, &got));
        const json_t *want_ids = json_array_get(ids, i);
        bool diverges = false;
        if (hf_alt) {
            /* User-defined pieces in the text, or unknown pieces in the ids? */
            for (size_t k = 0; k < got.n && !diverges; k++) {
                ob_token_type ty = ob_tokenizer_token_type(t, got.ids[k]);
                diverges = ty == OB_TOKTYPE_USER_DEFINED || ty == OB_TOKTYPE_UNKNOWN;
            }
            for (size_t k = 0; k < json_array_size(want_ids) && !diverges; k++) {
                ob_token_type ty = ob_tokenizer_token_type(t, (ob_token)json_integer_value(json_array_get(want_ids, k)));
                diverges = ty == OB_TOKTYPE_USER_DEFINED || ty == OB_TOKTYPE_UNKNOWN;
            }
            if (diverges) {
                want_ids = json_array_get(json_object_get(hf_alt, "ids"), i);
                spm_via_hf++;
            }
        }
        report_ids(name, diverges ? "ids (vs HF)" : "ids", s, len, want_ids, &got, &t_ids);
        if (!spm && split) {
            ob_tokens g2 = {0};
            CHECK_OK(ob_tokenizer_encode(t, s, len, 0, &g2));
            const json_t *w = json_object_get(split, key);
            report_ids(name, "ids (specials as text)", s, len, w ? w : json_array_get(ids, i), &g2, &t_split);
            ob_tokens_free(&g2);
        }
        if (!spm) {
            const json_t *w;
            if ((w = json_object_get(add, key))) {
                ob_tokens g3 = {0};
                CHECK_OK(ob_tokenizer_encode(t, s, len, parse | OB_ENCODE_ADD_SPECIAL, &g3));
                report_ids(name, "ids (add_special)", s, len, w, &g3, &t_add);
                ob_tokens_free(&g3);
            }
        }
        /* Decode the reference ids (so a decode check does not depend on encode). */
        size_t n = json_array_size(want_ids);
        ob_token *v = malloc((n ? n : 1) * sizeof *v);
        for (size_t k = 0; k < n; k++) v[k] = (ob_token)json_integer_value(json_array_get(want_ids, k));
        for (int skip = 0; skip < (spm || !dsk ? 1 : 2); skip++) {
            const json_t *w = json_object_get(diverges ? json_object_get(hf_alt, "decode_diff") : dd, key);
            const char *want = w ? json_string_value(w) : s;
            size_t want_len = w ? json_string_length(w) : len;
            if (skip && (w = json_object_get(dsk, key))) {
                want = json_string_value(w);
                want_len = json_string_length(w);
            }
            char *text = NULL;
            size_t text_len = 0;
            CHECK_OK(ob_tokenizer_decode(t, v, n, skip ? OB_DECODE_SKIP_SPECIAL : 0, &text, &text_len));
            tally *ta = skip ? &t_skip : &t_dec;
            ta->n++;
            bool ok = text && text_len == want_len && memcmp(text, want, want_len) == 0;
            ta->pass += ok;
            if (!ok && ta->n - ta->pass <= 3)
                fprintf(stderr, "  %s decode%s mismatch on #%zu: want \"%.*s\" got \"%.*s\"\n", name,
                        skip ? " (skip special)" : "", i, (int)(want_len > 60 ? 60 : want_len), want,
                        (int)(text_len > 60 ? 60 : text_len), text ? text : "");
            ob_free(text);
        }
        free(v);
        ob_tokens_free(&got);
    }
    for (size_t i = 0; i < json_array_size(inv); i++) {
        const char *hex = json_string_value(json_array_get(inv, i));
        size_t n = strlen(hex) / 2;
        char *bytes = malloc(n + 1);
        for (size_t k = 0; k < n; k++) {
            unsigned v;
            sscanf(hex + 2 * k, "%2x", &v);
            bytes[k] = (char)v;
        }
        ob_tokens got = {0};
        CHECK_OK(ob_tokenizer_encode(t, bytes, n, parse, &got));
        report_ids(name, "invalid UTF-8", bytes, n, json_array_get(bad, i), &got, &t_inv);
        ob_tokens_free(&got);
        free(bytes);
    }
    fprintf(stderr, "  %-28s [%.2fs] ids %d/%d", name, now_s() - t_start, t_ids.pass, t_ids.n);
    if (!spm) fprintf(stderr, ", specials-as-text %d/%d, add_special %d/%d", t_split.pass, t_split.n, t_add.pass, t_add.n);
    fprintf(stderr, ", decode %d/%d", t_dec.pass, t_dec.n);
    if (!spm) fprintf(stderr, ", decode(skip) %d/%d", t_skip.pass, t_skip.n);
    fprintf(stderr, ", invalid-utf8 %d/%d", t_inv.pass, t_inv.n);
    if (spm_via_hf) fprintf(stderr, " (%d strings vs HF: user-defined/unknown pieces)", spm_via_hf);
    fputc('\n', stderr);
    json_decref(hf_alt);
    CHECK_MSG(t_ids.n > 0 && t_ids.pass == t_ids.n, "%s ids", name);
    CHECK_MSG(t_split.pass == t_split.n && t_add.pass == t_add.n, "%s special handling", name);
    CHECK_MSG(t_dec.pass == t_dec.n && t_skip.pass == t_skip.n, "%s decode", name);
    CHECK_MSG(t_inv.pass == t_inv.n, "%s invalid UTF-8", name);
    if (owned) ob_tokenizer_free(t);
    json_decref(fx);
}

static const char *const k_fixtures[] = {
    "llama3.json", "qwen2-transformers.json", "llama-spm-sentencepiece.json", "llama-spm-hf-legacy.json",
    "llama-spm-hf-metaspace.json", "gpt2-hf.json", "bert-bge-hf.json",
    "pre-gpt-2.json", "pre-mpt.json", "pre-starcoder.json", "pre-command-r.json", "pre-llama3.json", "pre-dbrx.json",
    "pre-qwen2.json", "pre-deepseek-llm.json", "pre-deepseek-coder.json", "pre-deepseek-v3.json", "pre-falcon.json",
    "pre-tekken.json", "pre-bloom.json", "pre-gpt-4o.json", "pre-seed-coder.json", "pre-default.json",
    "ks-norm1.json", "ks-norm2.json", "ks-split.json", "ks-split2.json", "ks-added.json", "ks-wp-cased.json",
    "ks-wp-nfkd.json", "ks-metaspace-always.json", "ks-metaspace-never.json",
    "unigram-nfkc.json", "unigram-nfkc-sentencepiece.json", "unigram-bytefallback.json",
    "unigram-bytefallback-sentencepiece.json",
};

static bool have_fixture(const char *f) {
    char path[4096];
    join(path, sizeof path, data_dir(), f);
    FILE *fp = fopen(path, "rb");
    if (fp) fclose(fp);
    return fp != NULL;
}

TEST(tokenizer_hf_fixtures) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    json_t *strings = load_json(data_dir(), "strings.json");
    CHECK(strings != NULL);
    if (!strings) return;
    const char *only = getenv("OB_TOKENIZER_FIXTURE"); /* run one fixture while debugging */
    for (size_t i = 0; i < OB_ARRAY_LEN(k_fixtures); i++) {
        if (only && !strstr(k_fixtures[i], only)) continue;
        if (!have_fixture(k_fixtures[i])) {
            fprintf(stderr, "  %-28s (fixture not generated)\n", k_fixtures[i]);
            continue;
        }
        check_fixture(k_fixtures[i], strings);
    }
    json_decref(strings);
}

/* The GGUF path against the Hugging Face fixtures of the same vocabulary:
 * gpt2-hf and bert-bge-hf are tokenizer.json files made from these GGUFs,
 * so the GGUF tokenizer must give the same ids (and, for GPT-2, the same
 * text back). */
TEST(tokenizer_hf_gguf_same_ids) {
    if (!test_models_dir()) {
        test_skip("../shared/models not found");
        return;
    }
    json_t *strings = load_json(data_dir(), "strings.json");
    const json_t *texts = json_object_get(strings, "texts");
    static const struct {
        const char *fixture, *gguf;
        bool decode;
    } pairs[] = {{"gpt2-hf.json", "llama.cpp-vocab/ggml-vocab-gpt-2.gguf", true},
                 {"bert-bge-hf.json", "llama.cpp-vocab/ggml-vocab-bert-bge.gguf", true}};
    for (size_t p = 0; p < OB_ARRAY_LEN(pairs); p++) {
        json_t *fx = load_json(data_dir(), pairs[p].fixture);
        ob_gguf *g;
        ob_tokenizer *t = NULL;
        if (fx && open_gguf(pairs[p].gguf, &g) == 0) {
            CHECK_OK(ob_tokenizer_from_gguf(g, &t));
            ob_gguf_free(g);
        }
        CHECK(t != NULL);
        if (!t) {
            json_decref(fx);
            continue;
        }
        tally ids = {0}, dec = {0};
        const json_t *want = json_object_get(fx, "ids"), *dd = json_object_get(fx, "decode_diff");
        for (size_t i = 0; i < json_array_size(texts); i++) {
            const json_t *tx = json_array_get(texts, i);
            ob_tokens got = {0};
            CHECK_OK(ob_tokenizer_encode(t, json_string_value(tx), json_string_length(tx), OB_ENCODE_PARSE_SPECIAL, &got));
            report_ids(pairs[p].gguf, "ids", json_string_value(tx), json_string_length(tx), json_array_get(want, i), &got,
                       &ids);
            char key[32], *text = NULL;
            size_t len = 0;
            snprintf(key, sizeof key, "%zu", i);
            const json_t *w = json_object_get(dd, key);
            const char *exp = w ? json_string_value(w) : json_string_value(tx);
            size_t exp_len = w ? json_string_length(w) : json_string_length(tx);
            CHECK_OK(ob_tokenizer_decode(t, got.ids, got.n, 0, &text, &len));
            dec.n++;
            bool ok = text && len == exp_len && memcmp(text, exp, len) == 0;
            dec.pass += ok;
            if (!ok && dec.n - dec.pass <= 3)
                fprintf(stderr, "  %s decode #%zu: want \"%.*s\" got \"%.*s\"\n", pairs[p].gguf, i,
                        (int)(exp_len > 60 ? 60 : exp_len), exp, (int)(len > 60 ? 60 : len), text ? text : "");
            ob_free(text);
            ob_tokens_free(&got);
        }
        fprintf(stderr, "  %-42s vs %s: ids %d/%d, decode %d/%d\n", pairs[p].gguf, pairs[p].fixture, ids.pass, ids.n,
                dec.pass, dec.n);
        CHECK_EQ_INT(ids.pass, ids.n);
        if (pairs[p].decode) CHECK_EQ_INT(dec.pass, dec.n);
        ob_tokenizer_free(t);
        json_decref(fx);
    }
    json_decref(strings);
}

/* The GGUF pre-tokenizer table (tok_pretable.c) must declare exactly what
 * the fixtures were generated with, name by name. */
TEST(tokenizer_hf_pre_table) {
    int checked = 0;
    for (size_t i = 0; i < OB_ARRAY_LEN(k_fixtures); i++) {
        if (strncmp(k_fixtures[i], "pre-", 4) || !have_fixture(k_fixtures[i])) continue;
        json_t *fx = load_json(data_dir(), k_fixtures[i]);
        json_t *b = json_object_get(fx, "build"), *names = json_object_get(b, "pre_names");
        for (size_t k = 0; k < json_array_size(names); k++) {
            const char *name = json_string_value(json_array_get(names, k));
            json_t *norm = NULL, *pre = NULL;
            bool ign = false;
            int rc = tk_pre_spec_json(name, &norm, &pre, &ign);
            CHECK_MSG(rc == 0, "pre '%s' not in the table", name);
            json_t *fnorm = json_object_get(b, "normalizer");
            bool norm_ok = (json_is_null(fnorm) || !fnorm) ? norm == NULL : json_equal(norm, fnorm);
            CHECK_MSG(norm_ok, "pre '%s': normalizer differs from the fixture", name);
            CHECK_MSG(json_equal(pre, json_object_get(b, "pre_tokenizer")), "pre '%s': pre_tokenizer differs", name);
            CHECK_MSG(ign == json_is_true(json_object_get(b, "ignore_merges")), "pre '%s': ignore_merges differs", name);
            json_decref(norm);
            json_decref(pre);
            checked++;
        }
        json_decref(fx);
    }
    fprintf(stderr, "  %d tokenizer.ggml.pre names match their fixture declarations\n", checked);
    CHECK(checked > 0);
    /* And every table entry has a fixture. */
    for (size_t i = 0; tk_pre_spec_names(i); i++) {
        char f[128];
        snprintf(f, sizeof f, "pre-%s.json", tk_pre_spec_names(i)[0]);
        if (!have_fixture(f)) fprintf(stderr, "  table entry '%s' has no fixture yet\n", tk_pre_spec_names(i)[0]);
    }
}

int main(int argc, char **argv) { return test_main(argc, argv); }
