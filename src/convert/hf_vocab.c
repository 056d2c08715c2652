/*
 * hf_vocab.c - tokenizer.json (+ tokenizer_config.json) -> tokenizer.* keys.
 *
 * This reads the tokenizer files only as data (vocabulary, merges, added
 * tokens, a few settings) and does not tokenize anything, so it does not
 * depend on src/tokenizer. The output follows llama.cpp's converter:
 *
 *   - byte-level BPE (GPT-2 style)         -> tokenizer.ggml.model "gpt2"
 *   - BPE with byte_fallback (SentencePiece
 *     models exported by transformers)      -> "llama", with scores
 *   - tokens in id order, padded with "[PADn]" (unused) up to the model's
 *     vocab_size so the vocabulary matches the embedding rows
 *   - token types: normal 1, unknown 2, control 3, user-defined 4, unused 5,
 *     byte 6; added tokens are control when special (or shaped like <|x|>),
 *     else user-defined
 *   - merges as "a b"; the newer [a, b] pair form is joined the same way,
 *     with a space inside a part written as U+0120 as llama.cpp does
 *   - special ids from tokenizer_config.json's *_token (looked up among the
 *     added tokens, then the vocabulary), else config.json's *_token_id
 *
 * llama.cpp names the pre-tokenizer by hashing the tokenization of a test
 * string, which needs a tokenizer; we name it from the pre-tokenizer
 * definition itself instead (the regex and the steps around it), for the
 * shapes whose llama.cpp name is unambiguous, and fall back to "default".
 *
 * SentencePiece-style vocabularies need scores (the SPM algorithm merges the
 * highest-scoring pair). tokenizer.json keeps merge ranks instead of scores,
 * so a token made by merge r scores -(r + 1); other normal tokens, which no
 * merge makes, score -1e9 so they never win a merge, and special, byte and
 * unknown tokens score 0, as in SentencePiece models.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "hf_encoder.h"
#include "hf_internal.h"

enum {
    TT_NORMAL = 1,
    TT_UNKNOWN = 2,
    TT_CONTROL = 3,
    TT_USER_DEFINED = 4,
    TT_UNUSED = 5,
    TT_BYTE = 6,
};

/* Pre-tokenizer regexes exactly as tokenizer.json files spell them. */
static const char R_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char R_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char R_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char R_TEKKEN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char R_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct vocab {
    const ob_hf_config *cfg;
    const char *tok_path;
    json_t *tok;       /* tokenizer.json */
    json_t *tcfg;      /* tokenizer_config.json or NULL */
    json_t *vocab;     /* model.vocab: token -> id */
    json_t *added;     /* added_tokens array or NULL */
    int64_t n;         /* = cfg->n_vocab */
    const char **text; /* [n] */
    int32_t *type;     /* [n] */
    float *score;      /* [n] */
    bool spm;          /* byte_fallback: tokenizer.ggml.model "llama" */
    bool wpm;          /* WordPiece: tokenizer.ggml.model "bert" */
    ob_arena arena;    /* merge strings and padding names */
} vocab;

/* Parse `dir`/`name`. A missing file is NULL with *rc = 0, unless required.
 * Files whose integers we never read take JSON_DECODE_INT_AS_REAL: some
 * tokenizer_config.json files hold numbers like 1e30 written as integers
 * (model_max_length), which jansson otherwise rejects. */
static json_t *load_json(const char *dir, const char *name, bool required, size_t flags, int *rc) {
    *rc = 0;
    char *path = ob_hf_path(dir, name);
    if (!path) {
        *rc = ob_err(OB_ERR_OOM, "path");
        return NULL;
    }
    json_t *j = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (required) *rc = ob_err(OB_ERR_NOT_FOUND, "%s: cannot open it", path);
    } else {
        json_error_t jerr;
        j = json_loadf(f, JSON_ALLOW_NUL | flags, &jerr);
        fclose(f);
        if (!j) {
            *rc = ob_err(OB_ERR_FORMAT, "%s: %s (line %d, column %d)", path, jerr.text, jerr.line, jerr.column);
        } else if (!json_is_object(j)) {
            *rc = ob_err(OB_ERR_FORMAT, "%s: not a JSON object", path);
            json_decref(j);
            j = NULL;
        }
    }
    ob_free(path);
    return j;
}

/* A string-valued JSON string without embedded NULs, or NULL. */
static const char *plain_str(const json_t *v) {
    if (!json_is_string(v)) return NULL;
    const char *s = json_string_value(v);
    return strlen(s) == json_string_length(v) ? s : NULL;
}

/* Tokens such as <|im_start|> are control tokens even when a tokenizer
 * forgets to mark them special (llama.cpp's does_token_look_special). */
static bool looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    /* fullwidth bars: <｜ ... ｜> */
    if (n >= 8 && !strncmp(t, "<\xef\xbd\x9c", 4) && !strcmp(t + n - 4, "\xef\xbd\x9c>")) return true;
    if (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>') return true;
    return false;
}

static bool is_byte_token(const char *t) {
    /* <0xXX> */
    if (strlen(t) != 6 || strncmp(t, "<0x", 3) != 0 || t[5] != '>') return false;
    for (int i = 3; i < 5; i++) {
        char c = t[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

static int64_t id_of(const json_t *v, int64_t n) {
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    return x >= 0 && x < n ? (int64_t)x : -2;
}

/* Fill text/type from model.vocab and added_tokens. */
static int fill_tokens(vocab *V) {
    const char *key;
    json_t *val;
    json_object_foreach(V->vocab, key, val) {
        int64_t id = id_of(val, V->n);
        if (id == -1) return ob_err(OB_ERR_FORMAT, "%s: token '%s' has a non-integer id", V->tok_path, key);
        if (id < 0)
            return ob_err(OB_ERR_FORMAT, "%s: token '%s' has id %lld, outside the model's vocab_size %lld",
                          V->tok_path, key, (long long)json_integer_value(val), (long long)V->n);
        if (strlen(key) == 0) return ob_err(OB_ERR_FORMAT, "%s: empty token string (id %lld)", V->tok_path, (long long)id);
        if (V->text[id])
            return ob_err(OB_ERR_FORMAT, "%s: tokens '%s' and '%s' share id %lld", V->tok_path, V->text[id], key,
                          (long long)id);
        V->text[id] = key;
        V->type[id] = TT_NORMAL;
    }
    size_t i;
    json_t *a;
    json_array_foreach(V->added, i, a) {
        const char *content = plain_str(json_object_get(a, "content"));
        int64_t id = id_of(json_object_get(a, "id"), V->n);
        if (!content || !*content || id < 0)
            return ob_err(OB_ERR_FORMAT, "%s: added_tokens[%zu] needs a non-empty 'content' and an id below %lld",
                          V->tok_path, i, (long long)V->n);
        if (V->text[id] && strcmp(V->text[id], content) != 0)
            OB_LOGD("%s: added token '%s' replaces '%s' at id %lld", V->tok_path, content, V->text[id], (long long)id);
        V->text[id] = content;
        V->type[id] = (json_is_true(json_object_get(a, "special")) || looks_special(content)) ? TT_CONTROL
                                                                                             : TT_USER_DEFINED;
    }
    /* SentencePiece-style vocabularies mark byte and unknown tokens. */
    if (V->spm) {
        const char *unk = plain_str(json_object_get(json_object_get(V->tok, "model"), "unk_token"));
        for (int64_t id = 0; id < V->n; id++) {
            if (!V->text[id] || V->type[id] != TT_NORMAL) continue;
            if (is_byte_token(V->text[id]))
                V->type[id] = TT_BYTE;
            else if (unk && !strcmp(V->text[id], unk))
                V->type[id] = TT_UNKNOWN;
        }
    }
    /* Ids nothing names: the model's embedding has rows the tokenizer never
     * produces (vocab_size rounded up). */
    int64_t n_pad = 0;
    for (int64_t id = 0; id < V->n; id++) {
        if (V->text[id]) continue;
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%lld]", (long long)id);
        V->text[id] = ob_arena_strndup(&V->arena, buf, strlen(buf));
        if (!V->text[id]) return ob_err(OB_ERR_OOM, "vocabulary");
        V->type[id] = TT_UNUSED;
        n_pad++;
    }
    if (n_pad) OB_LOGI("vocabulary: %lld ids without a token are written as unused [PADn]", (long long)n_pad);
    return 0;
}

/* Merge strings; `scores` (SPM) gets -(rank + 1) for each merge's product. */
static int merges(vocab *V, ob_gguf_writer *w) {
    json_t *m = json_object_get(json_object_get(V->tok, "model"), "merges");
    if (!m || json_is_null(m)) return 0;
    if (!json_is_array(m)) return ob_err(OB_ERR_FORMAT, "%s: model.merges is not a list", V->tok_path);
    size_t n = json_array_size(m);
    if (n == 0) return 0;
    const char **strs = ob_malloc(ob_mul_size(n, sizeof *strs));
    if (!strs) return ob_err(OB_ERR_OOM, "%zu merges", n);
    int rc = 0;
    size_t i;
    json_t *e;
    char *prod = NULL;
    size_t prod_cap = 0;
    json_array_foreach(m, i, e) {
        const char *a = NULL, *b = NULL, *s = NULL;
        size_t la = 0, lb = 0;
        if (json_is_string(e)) {
            s = plain_str(e);
            const char *sp = s ? strchr(s, ' ') : NULL;
            if (!sp || sp == s || !sp[1]) {
                rc = ob_err(OB_ERR_FORMAT, "%s: merges[%zu] is not \"a b\"", V->tok_path, i);
                break;
            }
            a = s;
            la = (size_t)(sp - s);
            b = sp + 1;
            lb = strlen(b);
            strs[i] = s;
        } else if (json_is_array(e) && json_array_size(e) == 2 && plain_str(json_array_get(e, 0)) &&
                   plain_str(json_array_get(e, 1))) {
            a = json_string_value(json_array_get(e, 0));
            b = json_string_value(json_array_get(e, 1));
            la = strlen(a);
            lb = strlen(b);
            if (!la || !lb) {
                rc = ob_err(OB_ERR_FORMAT, "%s: merges[%zu] has an empty part", V->tok_path, i);
                break;
            }
            /* Each space inside a part grows by one byte as U+0120. */
            size_t spaces = 0;
            for (size_t k = 0; k < la; k++) spaces += a[k] == ' ';
            for (size_t k = 0; k < lb; k++) spaces += b[k] == ' ';
            char *out = ob_arena_alloc(&V->arena, la + lb + spaces + 2, 1);
            if (!out) {
                rc = ob_err(OB_ERR_OOM, "merges");
                break;
            }
            size_t o = 0;
            for (int part = 0; part < 2; part++) {
                const char *p = part ? b : a;
                size_t lp = part ? lb : la;
                for (size_t k = 0; k < lp; k++) {
                    if (p[k] == ' ') {
                        out[o++] = (char)0xC4;
                        out[o++] = (char)0xA0;
                    } else {
                        out[o++] = p[k];
                    }
                }
                if (!part) out[o++] = ' ';
            }
            out[o] = '\0';
            strs[i] = out;
        } else {
            rc = ob_err(OB_ERR_FORMAT, "%s: merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", V->tok_path, i);
            break;
        }
        if (V->spm) {
            if (la + lb + 1 > prod_cap) {
                size_t cap = (la + lb + 1) * 2;
                char *np = ob_realloc(prod, cap);
                if (!np) {
                    rc = ob_err(OB_ERR_OOM, "merges");
                    break;
                }
                prod = np;
                prod_cap = cap;
            }
            memcpy(prod, a, la);
            memcpy(prod + la, b, lb);
            prod[la + lb] = '\0';
            int64_t id = id_of(json_object_get(V->vocab, prod), V->n);
            if (id >= 0 && V->type[id] == TT_NORMAL && V->score[id] == -1e9f) V->score[id] = -(float)(i + 1);
        }
    }
    if (rc == 0) rc = ob_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", strs, n);
    ob_free(prod);
    ob_free(strs);
    return rc;
}

/* The llama.cpp name of the pre-tokenizer, from its definition. */
static const char *pre_name(const vocab *V) {
    if (V->spm) return "default";
    const json_t *pt = json_object_get(V->tok, "pre_tokenizer");
    const json_t *norm = json_object_get(V->tok, "normalizer");
    const char *ntype = plain_str(json_object_get(norm, "type"));
    bool nfc = ntype && !strcmp(ntype, "NFC");
    const json_t *steps = pt;
    size_t n_steps = 1;
    const char *ptype = plain_str(json_object_get(pt, "type"));
    if (ptype && !strcmp(ptype, "Sequence")) {
        steps = json_object_get(pt, "pretokenizers");
        n_steps = json_array_size(steps);
    }
    const char *regex = NULL;
    int n_split = 0, n_other = 0;
    bool bytelevel = false, bl_regex = false, digits1 = false;
    for (size_t i = 0; i < n_steps; i++) {
        const json_t *s = steps == pt ? pt : json_array_get(steps, i);
        const char *t = plain_str(json_object_get(s, "type"));
        if (!t) continue;
        if (!strcmp(t, "Split")) {
            n_split++;
            regex = plain_str(json_object_get(json_object_get(s, "pattern"), "Regex"));
        } else if (!strcmp(t, "ByteLevel")) {
            bytelevel = true;
            const json_t *ur = json_object_get(s, "use_regex");
            bl_regex = !ur || json_is_true(ur);
        } else if (!strcmp(t, "Digits") && json_is_true(json_object_get(s, "individual_digits"))) {
            digits1 = true;
        } else {
            n_other++;
        }
    }
    if (!bytelevel || n_other) return "default";
    bool ignore_merges = json_is_true(json_object_get(json_object_get(V->tok, "model"), "ignore_merges"));
    if (n_split == 0 && bl_regex) {
        if (digits1) return nfc ? "command-r" : "smollm";
        return nfc ? "mpt" : "gpt-2";
    }
    if (n_split == 1 && regex && !bl_regex && !digits1) {
        if (!strcmp(regex, R_LLAMA3)) return ignore_merges ? "llama-bpe" : "smaug-bpe";
        if (!strcmp(regex, R_QWEN2)) return "qwen2";
        if (!strcmp(regex, R_GPT2)) return "gpt-2";
        if (!strcmp(regex, R_TEKKEN)) return "tekken";
        if (!strcmp(regex, R_O200K)) return "gpt-4o";
    }
    return "default";
}

/* Content of tokenizer_config.json's `key`: a string or {"content": ...}. */
static const char *tcfg_token(const vocab *V, const char *key) {
    if (!V->tcfg) return NULL;
    const json_t *e = json_object_get(V->tcfg, key);
    if (json_is_object(e)) e = json_object_get(e, "content");
    return plain_str(e);
}

static int64_t lookup_id(const vocab *V, const char *content) {
    size_t i;
    json_t *a;
    json_array_foreach(V->added, i, a) {
        const char *c = plain_str(json_object_get(a, "content"));
        if (c && !strcmp(c, content)) return id_of(json_object_get(a, "id"), V->n);
    }
    return id_of(json_object_get(V->vocab, content), V->n);
}

/* add_bos/add_eos from a TemplateProcessing post-processor: a special token
 * first (last) in the single-sequence template that is the bos (eos). */
static void template_flags(const vocab *V, const char *bos, const char *eos, int *add_bos, int *add_eos) {
    const json_t *pp = json_object_get(V->tok, "post_processor");
    const json_t *list = pp;
    size_t n = 1;
    const char *t = plain_str(json_object_get(pp, "type"));
    if (t && !strcmp(t, "Sequence")) {
        list = json_object_get(pp, "processors");
        n = json_array_size(list);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *p = list == pp ? pp : json_array_get(list, i);
        const char *pt = plain_str(json_object_get(p, "type"));
        if (!pt || strcmp(pt, "TemplateProcessing") != 0) continue;
        const json_t *single = json_object_get(p, "single");
        size_t ns = json_array_size(single);
        if (ns < 2) continue;
        const char *first = plain_str(json_object_get(json_object_get(json_array_get(single, 0), "SpecialToken"), "id"));
        const char *last =
            plain_str(json_object_get(json_object_get(json_array_get(single, ns - 1), "SpecialToken"), "id"));
        *add_bos = first && bos && !strcmp(first, bos);
        *add_eos = last && eos && !strcmp(last, eos);
    }
}

static int chat_template(vocab *V, const char *dir, ob_gguf_writer *w) {
    const json_t *ct = V->tcfg ? json_object_get(V->tcfg, "chat_template") : NULL;
    if (json_is_string(ct)) {
        const char *s = plain_str(ct);
        if (!s) return ob_err(OB_ERR_FORMAT, "tokenizer_config.json: chat_template contains a NUL byte");
        return ob_gguf_writer_set_str(w, "tokenizer.chat_template", s);
    }
    if (json_is_array(ct)) {
        /* [{"name", "template"}]: "default" is the template; others are
         * written as tokenizer.chat_template.<name>, as llama.cpp does. */
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            const char *name = plain_str(json_object_get(e, "name")), *tpl = plain_str(json_object_get(e, "template"));
            if (!name || !tpl) return ob_err(OB_ERR_FORMAT, "tokenizer_config.json: chat_template[%zu] needs name and template", i);
            char key[256];
            if (!strcmp(name, "default"))
                snprintf(key, sizeof key, "tokenizer.chat_template");
            else
                snprintf(key, sizeof key, "tokenizer.chat_template.%s", name);
            OB_TRY(ob_gguf_writer_set_str(w, key, tpl));
        }
        return 0;
    }
    /* transformers 4.4x+ may keep the template in its own file. */
    char *path = ob_hf_path(dir, "chat_template.jinja");
    if (!path) return ob_err(OB_ERR_OOM, "path");
    FILE *f = fopen(path, "rb");
    ob_free(path);
    if (f) {
        char *buf = NULL;
        size_t len = 0, cap = 0;
        int rc = 0;
        for (;;) {
            if (len + 4096 + 1 > cap) {
                cap = (len + 4096 + 1) * 2;
                char *nb = ob_realloc(buf, cap);
                if (!nb) {
                    rc = ob_err(OB_ERR_OOM, "chat template");
                    break;
                }
                buf = nb;
            }
            size_t got = fread(buf + len, 1, 4096, f);
            len += got;
            if (got < 4096) break;
        }
        fclose(f);
        if (rc == 0) {
            buf[len] = '\0';
            if (strlen(buf) != len) rc = ob_err(OB_ERR_FORMAT, "chat_template.jinja contains a NUL byte");
            else rc = ob_gguf_writer_set_str(w, "tokenizer.chat_template", buf);
        }
        ob_free(buf);
        return rc;
    }
    int rc;
    json_t *cj = load_json(dir, "chat_template.json", false, JSON_DECODE_INT_AS_REAL, &rc);
    if (rc < 0) return rc;
    if (cj) {
        const char *s = plain_str(json_object_get(cj, "chat_template"));
        if (s) rc = ob_gguf_writer_set_str(w, "tokenizer.chat_template", s);
        json_decref(cj);
    }
    return rc;
}

static int specials(vocab *V, ob_gguf_writer *w) {
    static const struct {
        const char *typ, *key;
    } kinds[] = {
        {"bos", "tokenizer.ggml.bos_token_id"},      {"eos", "tokenizer.ggml.eos_token_id"},
        {"unk", "tokenizer.ggml.unknown_token_id"},  {"sep", "tokenizer.ggml.seperator_token_id"},
        {"pad", "tokenizer.ggml.padding_token_id"},  {"mask", "tokenizer.ggml.mask_token_id"},
        {"cls", "tokenizer.ggml.cls_token_id"},
    };
    const char *names[OB_ARRAY_LEN(kinds)];
    for (size_t k = 0; k < OB_ARRAY_LEN(kinds); k++) {
        char key[32];
        snprintf(key, sizeof key, "%s_token", kinds[k].typ);
        names[k] = tcfg_token(V, key);
        int64_t id = names[k] ? lookup_id(V, names[k]) : -1;
        if (id < 0 && !strcmp(kinds[k].typ, "unk")) {
            const char *u = plain_str(json_object_get(json_object_get(V->tok, "model"), "unk_token"));
            if (u) id = lookup_id(V, u);
        }
        if (id < 0) {
            int64_t c = !strcmp(kinds[k].typ, "bos")   ? V->cfg->bos_id
                        : !strcmp(kinds[k].typ, "eos") ? V->cfg->eos_id
                        : !strcmp(kinds[k].typ, "pad") ? V->cfg->pad_id
                                                       : -1;
            if (c >= 0 && c < V->n) id = c;
        }
        if (id >= 0) OB_TRY(ob_gguf_writer_set_u32(w, kinds[k].key, (uint32_t)id));
    }
    /* encoders name CLS and SEP, not BOS and EOS: those stand for them in the
     * post-processor check below ([CLS] $A [SEP] adds both) */
    if (ob_hf_enc_is(V->cfg->arch)) {
        if (!names[0]) names[0] = names[6];
        if (!names[1]) names[1] = names[3];
    }
    int add_bos = -1, add_eos = -1;
    template_flags(V, names[0], names[1], &add_bos, &add_eos);
    if (V->tcfg) {
        const json_t *b = json_object_get(V->tcfg, "add_bos_token"), *e = json_object_get(V->tcfg, "add_eos_token");
        if (json_is_boolean(b)) add_bos = json_is_true(b);
        if (json_is_boolean(e)) add_eos = json_is_true(e);
        const json_t *ps = json_object_get(V->tcfg, "add_prefix_space");
        if (json_is_boolean(ps)) OB_TRY(ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", json_is_true(ps)));
    }
    if (add_bos >= 0) OB_TRY(ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos));
    if (add_eos >= 0) OB_TRY(ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos));
    return 0;
}

/* WordPiece in llama.cpp's "bert" form: a word-initial piece is written
 * "\u2581piece", a continuation "##piece" as "piece"; control tokens stay
 * as they are. BertNormalizer's lowercase and strip_accents go to
 * tokenizer.ggml.normalizer.* where they differ from the default (our
 * tokenizer's keys; llama.cpp always lowercases). */
static int wpm_phantom(vocab *V, ob_gguf_writer *w) {
    const char *cont = plain_str(json_object_get(json_object_get(V->tok, "model"), "continuing_subword_prefix"));
    if (!cont) cont = "##";
    const size_t cl = strlen(cont);
    for (int64_t id = 0; id < V->n; id++) {
        if (V->type[id] == TT_CONTROL || V->type[id] == TT_UNUSED) continue;
        const char *t = V->text[id];
        char *nt;
        if (cl && !strncmp(t, cont, cl) && t[cl]) {
            nt = ob_arena_strndup(&V->arena, t + cl, strlen(t + cl));
        } else {
            size_t n = strlen(t);
            nt = ob_arena_alloc(&V->arena, n + 4, 1);
            if (nt) {
                memcpy(nt, "\xE2\x96\x81", 3);
                memcpy(nt + 3, t, n + 1);
            }
        }
        if (!nt) return ob_err(OB_ERR_OOM, "vocabulary");
        V->text[id] = nt;
    }
    const json_t *norm = json_object_get(V->tok, "normalizer");
    const char *nt = plain_str(json_object_get(norm, "type"));
    if (nt && !strcmp(nt, "BertNormalizer")) {
        /* strip_accents null follows lowercase (BertNormalizer's rule and our tokenizer's default) */
        const bool lower = !json_is_false(json_object_get(norm, "lowercase"));
        const json_t *sa = json_object_get(norm, "strip_accents");
        if (!lower) OB_TRY(ob_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", false));
        if (json_is_boolean(sa) && json_is_true(sa) != lower)
            OB_TRY(ob_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.strip_accents", json_is_true(sa)));
    }
    return 0;
}

static int write_vocab(vocab *V, const char *dir, ob_gguf_writer *w) {
    const json_t *model = json_object_get(V->tok, "model");
    if (!json_is_object(model)) return ob_err(OB_ERR_FORMAT, "%s: 'model' is missing", V->tok_path);
    const char *mtype = plain_str(json_object_get(model, "type"));
    if (mtype && strcmp(mtype, "BPE") != 0 && strcmp(mtype, "WordPiece") != 0)
        return ob_err(OB_ERR_UNSUPPORTED, "%s: tokenizer model '%s' is not supported (BPE, WordPiece are)", V->tok_path,
                      mtype);
    V->wpm = mtype && !strcmp(mtype, "WordPiece");
    V->vocab = json_object_get(model, "vocab");
    if (!json_is_object(V->vocab)) return ob_err(OB_ERR_FORMAT, "%s: model.vocab is not an object", V->tok_path);
    V->added = json_object_get(V->tok, "added_tokens");
    if (V->added && !json_is_array(V->added) && !json_is_null(V->added))
        return ob_err(OB_ERR_FORMAT, "%s: added_tokens is not a list", V->tok_path);
    if (!json_is_array(V->added)) V->added = NULL;
    V->spm = json_is_true(json_object_get(model, "byte_fallback"));
    if (!V->spm && !V->wpm) {
        /* Byte-level BPE: the bytes are mapped to printable characters. */
        const char *dt = plain_str(json_object_get(json_object_get(V->tok, "decoder"), "type"));
        bool bl = dt && !strcmp(dt, "ByteLevel");
        const json_t *pt = json_object_get(V->tok, "pre_tokenizer");
        const char *pty = plain_str(json_object_get(pt, "type"));
        if (pty && !strcmp(pty, "ByteLevel")) bl = true;
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(pt, "pretokenizers"), i, s) {
            const char *st = plain_str(json_object_get(s, "type"));
            if (st && !strcmp(st, "ByteLevel")) bl = true;
        }
        if (!bl)
            return ob_err(OB_ERR_UNSUPPORTED, "%s: BPE without byte-level encoding or byte_fallback is not supported",
                          V->tok_path);
    }
    V->n = V->cfg->n_vocab;
    V->text = ob_calloc((size_t)V->n, sizeof *V->text);
    V->type = ob_calloc((size_t)V->n, sizeof *V->type);
    V->score = ob_calloc((size_t)V->n, sizeof *V->score);
    if (!V->text || !V->type || !V->score) return ob_err(OB_ERR_OOM, "vocabulary of %lld tokens", (long long)V->n);
    OB_TRY(fill_tokens(V));
    for (int64_t id = 0; id < V->n; id++) V->score[id] = V->type[id] == TT_NORMAL ? -1e9f : 0.0f;
    if (V->wpm) OB_TRY(wpm_phantom(V, w));

    OB_TRY(ob_gguf_writer_set_str(w, "tokenizer.ggml.model", V->spm ? "llama" : V->wpm ? "bert" : "gpt2"));
    const char *pre = V->wpm ? "default" : pre_name(V);
    if (!V->spm && !V->wpm && !strcmp(pre, "default"))
        OB_LOGW("%s: pre-tokenizer not recognised; tokenizer.ggml.pre is \"default\"", V->tok_path);
    OB_TRY(ob_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre));
    OB_TRY(ob_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", V->text, (uint64_t)V->n));
    if (!V->wpm) OB_TRY(merges(V, w)); /* before scores: merges set them */
    if (V->spm) OB_TRY(ob_gguf_writer_set_arr(w, "tokenizer.ggml.scores", OB_GGUF_F32, V->score, (uint64_t)V->n));
    OB_TRY(ob_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", OB_GGUF_I32, V->type, (uint64_t)V->n));
    OB_TRY(specials(V, w));
    OB_TRY(chat_template(V, dir, w));
    return 0;
}

int ob_hf_vocab_write(const char *dir, const ob_hf_config *cfg, ob_gguf_writer *w) {
    vocab V;
    memset(&V, 0, sizeof V);
    V.cfg = cfg;
    ob_arena_init(&V.arena, 64 * 1024, 0);
    int rc;
    char *tok_path = ob_hf_path(dir, "tokenizer.json");
    if (!tok_path) return ob_err(OB_ERR_OOM, "path");
    V.tok_path = tok_path;
    V.tok = load_json(dir, "tokenizer.json", true, 0, &rc);
    if (rc == 0) V.tcfg = load_json(dir, "tokenizer_config.json", false, JSON_DECODE_INT_AS_REAL, &rc);
    if (rc == 0) rc = write_vocab(&V, dir, w);
    json_decref(V.tok);
    json_decref(V.tcfg);
    ob_free(tok_path);
    ob_free(V.text);
    ob_free(V.type);
    ob_free(V.score);
    ob_arena_free(&V.arena);
    return rc;
}
