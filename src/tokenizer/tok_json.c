/*
 * tok_json.c - tokenizers from Hugging Face files: tokenizer.json (+
 * tokenizer_config.json), or the older layout vocab.json + merges.txt (+
 * tokenizer_config.json, added_tokens.json).
 *
 * JSON is parsed with jansson. Every field is type-checked: a missing or
 * mistyped field is OB_ERR_FORMAT naming it, an unknown component type is
 * OB_ERR_UNSUPPORTED naming it; nothing in the file is trusted for sizes or
 * indices (ids are range-checked, merges must name existing tokens).
 *
 * The components map one to one onto the pipeline steps in tok_internal.h;
 * Sequence components are flattened into the step lists. The same parsers
 * build the GGUF pipelines (tok_gguf.c passes them JSON from tok_pretable.c).
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"
#include "tok_internal.h"

/* ---------------- small JSON helpers ---------------- */

static const char *jstr(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool jbool(const json_t *o, const char *key, bool dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* A token name in tokenizer_config.json: "text" or {"content": "text"}. */
static const char *jtoken(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) return jstr(v, "content");
    return NULL;
}

static int dup_bytes(const char *s, size_t n, char **out, size_t *out_len) {
    *out = ob_malloc(n + 1);
    if (!*out) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    memcpy(*out, s, n);
    (*out)[n] = 0;
    if (out_len) *out_len = n;
    return 0;
}

static int dup_jstring(const json_t *v, char **out, size_t *out_len) {
    return dup_bytes(json_string_value(v), json_string_length(v), out, out_len);
}

/* The single code point of a one-character string. */
static int one_char(const json_t *v, const char *what, uint32_t *cp) {
    if (!json_is_string(v)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: %s must be a string", what);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    int l = n ? ob_utf8_decode(s, n, cp) : -1;
    if (l < 0 || (size_t)l != n) return ob_err(OB_ERR_FORMAT, "tokenizer.json: %s must be one character", what);
    return 0;
}

static int parse_behavior(const json_t *v, int dflt, int *out) {
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    static const struct {
        const char *name;
        int b;
    } names[] = {{"removed", TB_REMOVED},           {"isolated", TB_ISOLATED},        {"mergedwithprevious", TB_MERGED_PREV},
                 {"mergedwithnext", TB_MERGED_NEXT}, {"contiguous", TB_CONTIGUOUS}};
    char low[32];
    size_t n = strlen(s);
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    low[n] = 0;
    for (size_t i = 0; i < OB_ARRAY_LEN(names); i++)
        if (!strcmp(low, names[i].name)) {
            *out = names[i].b;
            return 0;
        }
    return ob_err(OB_ERR_FORMAT, "tokenizer.json: unknown split behavior '%s'", s);
}

/* A Split/Replace pattern: {"String": "..."} or {"Regex": "..."}. */
static int parse_pattern(const json_t *p, const char *where, bool *literal, const char **s, size_t *n) {
    const json_t *v;
    if (json_is_object(p) && (v = json_object_get(p, "String")) && json_is_string(v)) {
        *literal = true;
    } else if (json_is_object(p) && (v = json_object_get(p, "Regex")) && json_is_string(v)) {
        *literal = false;
    } else if (json_is_string(p)) {
        v = p; /* very old files: a bare string */
        *literal = true;
    } else {
        return ob_err(OB_ERR_FORMAT, "tokenizer.json: %s.pattern must be {\"String\"|\"Regex\": ...}", where);
    }
    *s = json_string_value(v);
    *n = json_string_length(v);
    return 0;
}

static int base64_decode(const char *s, size_t n, unsigned char **out, size_t *out_len) {
    unsigned char *o = ob_malloc(n / 4 * 3 + 3);
    if (!o) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (base64)");
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+' || c == '-') v = 62;
        else if (c == '/' || c == '_') v = 63;
        else if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
        else {
            ob_free(o);
            return ob_err(OB_ERR_FORMAT, "tokenizer.json: bad base64 character at %zu", i);
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(acc >> bits);
        }
    }
    *out = o;
    *out_len = k;
    return 0;
}

/* ---------------- normalizers ---------------- */

static int push_norm(ob_tokenizer *t, tk_norm **nm) {
    tk_norm *v = ob_realloc(t->norms, (t->n_norms + 1) * sizeof *v);
    if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    t->norms = v;
    *nm = &v[t->n_norms++];
    memset(*nm, 0, sizeof **nm);
    return 0;
}

/* Append the steps of a "normalizer" object (Sequence flattened; depth
 * bounds nesting so hostile files cannot recurse without end). */
static int parse_normalizer(ob_tokenizer *t, const json_t *j, int depth) {
    if (!j || json_is_null(j)) return 0;
    if (!json_is_object(j) || depth > 16) return ob_err(OB_ERR_FORMAT, "tokenizer.json: normalizer must be an object");
    const char *type = jstr(j, "type");
    if (!type) return ob_err(OB_ERR_FORMAT, "tokenizer.json: normalizer without \"type\"");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(j, "normalizers");
        if (!json_is_array(list)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: Sequence.normalizers must be a list");
        for (size_t i = 0; i < json_array_size(list); i++) OB_TRY(parse_normalizer(t, json_array_get(list, i), depth + 1));
        return 0;
    }
    static const struct {
        const char *name;
        int kind;
    } simple[] = {{"NFC", TN_NFC},   {"NFD", TN_NFD},           {"NFKC", TN_NFKC},
                  {"NFKD", TN_NFKD}, {"Lowercase", TN_LOWER},   {"StripAccents", TN_STRIP_ACCENTS},
                  {"Nmt", TN_NMT},   {"ByteLevel", TN_BYTELEVEL}};
    tk_norm *nm = NULL;
    for (size_t i = 0; i < OB_ARRAY_LEN(simple); i++)
        if (!strcmp(type, simple[i].name)) {
            OB_TRY(push_norm(t, &nm));
            nm->kind = simple[i].kind;
            return 0;
        }
    if (!strcmp(type, "Strip")) {
        OB_TRY(push_norm(t, &nm));
        nm->kind = TN_STRIP;
        nm->strip_left = jbool(j, "strip_left", true);
        nm->strip_right = jbool(j, "strip_right", true);
        return 0;
    }
    if (!strcmp(type, "BertNormalizer") || !strcmp(type, "Bert")) {
        OB_TRY(push_norm(t, &nm));
        nm->kind = TN_BERT;
        nm->clean_text = jbool(j, "clean_text", true);
        nm->chinese_chars = jbool(j, "handle_chinese_chars", true);
        nm->lowercase = jbool(j, "lowercase", true);
        /* strip_accents: null means "whatever lowercase is". */
        nm->strip_accents = jbool(j, "strip_accents", nm->lowercase);
        return 0;
    }
    if (!strcmp(type, "Prepend")) {
        const json_t *p = json_object_get(j, "prepend");
        if (!json_is_string(p)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: Prepend.prepend must be a string");
        OB_TRY(push_norm(t, &nm));
        nm->kind = TN_PREPEND;
        return dup_jstring(p, &nm->content, &nm->content_len);
    }
    if (!strcmp(type, "Replace")) {
        bool literal;
        const char *pat;
        size_t pn;
        OB_TRY(parse_pattern(json_object_get(j, "pattern"), "Replace", &literal, &pat, &pn));
        const json_t *c = json_object_get(j, "content");
        if (!json_is_string(c)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: Replace.content must be a string");
        OB_TRY(push_norm(t, &nm));
        nm->kind = TN_REPLACE;
        OB_TRY(dup_jstring(c, &nm->content, &nm->content_len));
        if (literal) return dup_bytes(pat, pn, &nm->pattern, &nm->pattern_len);
        return tk_regex_compile(pat, pn, false, &nm->re);
    }
    if (!strcmp(type, "Precompiled")) {
        const json_t *c = json_object_get(j, "precompiled_charsmap");
        if (json_is_null(c) || !c) return 0; /* no rules: identity */
        if (!json_is_string(c))
            return ob_err(OB_ERR_FORMAT, "tokenizer.json: Precompiled.precompiled_charsmap must be base64 text");
        unsigned char *blob = NULL;
        size_t bn = 0;
        OB_TRY(base64_decode(json_string_value(c), json_string_length(c), &blob, &bn));
        if (bn == 0) {
            ob_free(blob);
            return 0;
        }
        int rc = push_norm(t, &nm);
        if (rc == 0) {
            nm->kind = TN_PRECOMPILED;
            rc = tk_charsmap_load(&nm->cmap, blob, bn);
        }
        ob_free(blob);
        return rc;
    }
    return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: normalizer type '%s' is not supported", type);
}

int tk_json_normalizer(ob_tokenizer *t, const json_t *j) { return parse_normalizer(t, j, 0); }

/* ---------------- pre-tokenizers ---------------- */

static int push_pre(ob_tokenizer *t, tk_pre **p) {
    tk_pre *v = ob_realloc(t->pres, (t->n_pres + 1) * sizeof *v);
    if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    t->pres = v;
    *p = &v[t->n_pres++];
    memset(*p, 0, sizeof **p);
    return 0;
}

static const char GPT2_REGEX[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Rust regex's \w+|[^\w\s]+ (the Whitespace pre-tokenizer), in PCRE2 terms. */
static const char WHITESPACE_REGEX[] =
    "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]+|"
    "[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}\\p{White_Space}]+";

static int parse_prepend_scheme(const json_t *j, int *out) {
    const char *s = jstr(j, "prepend_scheme");
    *out = TK_PREPEND_ALWAYS;
    if (s) {
        if (!strcmp(s, "first")) *out = TK_PREPEND_FIRST;
        else if (!strcmp(s, "never")) *out = TK_PREPEND_NEVER;
        else if (strcmp(s, "always")) return ob_err(OB_ERR_FORMAT, "tokenizer.json: prepend_scheme '%s'", s);
    }
    const json_t *aps = json_object_get(j, "add_prefix_space");
    if (json_is_false(aps)) *out = TK_PREPEND_NEVER; /* the older field */
    return 0;
}

/* Append the steps of a "pre_tokenizer" object, like parse_normalizer. */
static int parse_pre(ob_tokenizer *t, const json_t *j, int depth) {
    if (!j || json_is_null(j)) return 0;
    if (!json_is_object(j) || depth > 16) return ob_err(OB_ERR_FORMAT, "tokenizer.json: pre_tokenizer must be an object");
    const char *type = jstr(j, "type");
    if (!type) return ob_err(OB_ERR_FORMAT, "tokenizer.json: pre_tokenizer without \"type\"");
    tk_pre *p = NULL;
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(j, "pretokenizers");
        if (!json_is_array(list))
            return ob_err(OB_ERR_FORMAT, "tokenizer.json: Sequence.pretokenizers must be a list");
        for (size_t i = 0; i < json_array_size(list); i++) OB_TRY(parse_pre(t, json_array_get(list, i), depth + 1));
        return 0;
    }
    if (!strcmp(type, "Split")) {
        bool literal;
        const char *pat;
        size_t pn;
        OB_TRY(parse_pattern(json_object_get(j, "pattern"), "Split", &literal, &pat, &pn));
        int behavior;
        OB_TRY(parse_behavior(json_object_get(j, "behavior"), TB_ISOLATED, &behavior));
        OB_TRY(push_pre(t, &p));
        p->kind = TP_SPLIT;
        p->behavior = behavior;
        p->invert = jbool(j, "invert", false);
        return tk_regex_compile(pat, pn, literal, &p->re);
    }
    if (!strcmp(type, "ByteLevel")) {
        OB_TRY(push_pre(t, &p));
        p->kind = TP_BYTELEVEL;
        p->add_prefix_space = jbool(j, "add_prefix_space", true);
        if (jbool(j, "use_regex", true)) return tk_regex_compile(GPT2_REGEX, sizeof GPT2_REGEX - 1, false, &p->re);
        return 0;
    }
    if (!strcmp(type, "Metaspace")) {
        uint32_t rep = 0x2581;
        const json_t *r = json_object_get(j, "replacement");
        if (r) OB_TRY(one_char(r, "Metaspace.replacement", &rep));
        int scheme;
        OB_TRY(parse_prepend_scheme(j, &scheme));
        OB_TRY(push_pre(t, &p));
        p->kind = TP_METASPACE;
        p->replacement = rep;
        p->prepend_scheme = scheme;
        p->split = jbool(j, "split", true);
        return 0;
    }
    if (!strcmp(type, "Whitespace")) {
        OB_TRY(push_pre(t, &p));
        p->kind = TP_WHITESPACE;
        return tk_regex_compile(WHITESPACE_REGEX, sizeof WHITESPACE_REGEX - 1, false, &p->re);
    }
    if (!strcmp(type, "WhitespaceSplit")) {
        OB_TRY(push_pre(t, &p));
        p->kind = TP_WHITESPACE_SPLIT;
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        OB_TRY(push_pre(t, &p));
        p->kind = TP_DIGITS;
        p->individual_digits = jbool(j, "individual_digits", false);
        return 0;
    }
    if (!strcmp(type, "Punctuation")) {
        int behavior;
        OB_TRY(parse_behavior(json_object_get(j, "behavior"), TB_ISOLATED, &behavior));
        OB_TRY(push_pre(t, &p));
        p->kind = TP_PUNCT;
        p->behavior = behavior;
        return 0;
    }
    if (!strcmp(type, "BertPreTokenizer")) {
        OB_TRY(push_pre(t, &p));
        p->kind = TP_BERT;
        return 0;
    }
    if (!strcmp(type, "CharDelimiterSplit")) {
        uint32_t d;
        OB_TRY(one_char(json_object_get(j, "delimiter"), "CharDelimiterSplit.delimiter", &d));
        OB_TRY(push_pre(t, &p));
        p->kind = TP_CHAR_DELIM;
        p->delimiter = d;
        return 0;
    }
    return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer type '%s' is not supported", type);
}

int tk_json_pre_tokenizer(ob_tokenizer *t, const json_t *j) { return parse_pre(t, j, 0); }

/* ---------------- decoders ---------------- */

static int push_dec(ob_tokenizer *t, tk_dec **d) {
    tk_dec *v = ob_realloc(t->decs, (t->n_decs + 1) * sizeof *v);
    if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    t->decs = v;
    *d = &v[t->n_decs++];
    memset(*d, 0, sizeof **d);
    return 0;
}

/* Append the steps of a "decoder" object, like parse_normalizer. */
static int parse_decoder(ob_tokenizer *t, const json_t *j, int depth) {
    if (!j || json_is_null(j)) return 0;
    if (!json_is_object(j) || depth > 16) return ob_err(OB_ERR_FORMAT, "tokenizer.json: decoder must be an object");
    const char *type = jstr(j, "type");
    if (!type) return ob_err(OB_ERR_FORMAT, "tokenizer.json: decoder without \"type\"");
    tk_dec *d = NULL;
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(j, "decoders");
        if (!json_is_array(list)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: Sequence.decoders must be a list");
        for (size_t i = 0; i < json_array_size(list); i++) OB_TRY(parse_decoder(t, json_array_get(list, i), depth + 1));
        return 0;
    }
    if (!strcmp(type, "ByteLevel") || !strcmp(type, "ByteFallback") || !strcmp(type, "Fuse")) {
        OB_TRY(push_dec(t, &d));
        d->kind = !strcmp(type, "ByteLevel") ? TD_BYTELEVEL : !strcmp(type, "Fuse") ? TD_FUSE : TD_BYTE_FALLBACK;
        return 0;
    }
    if (!strcmp(type, "Metaspace")) {
        uint32_t rep = 0x2581;
        const json_t *r = json_object_get(j, "replacement");
        if (r) OB_TRY(one_char(r, "Metaspace.replacement", &rep));
        int scheme;
        OB_TRY(parse_prepend_scheme(j, &scheme));
        OB_TRY(push_dec(t, &d));
        d->kind = TD_METASPACE;
        d->ch = rep;
        d->prepend_scheme = scheme;
        return 0;
    }
    if (!strcmp(type, "WordPiece")) {
        const json_t *p = json_object_get(j, "prefix");
        OB_TRY(push_dec(t, &d));
        d->kind = TD_WORDPIECE;
        d->cleanup = jbool(j, "cleanup", true);
        if (json_is_string(p)) return dup_jstring(p, &d->a, &d->a_len);
        return dup_bytes("##", 2, &d->a, &d->a_len);
    }
    if (!strcmp(type, "Replace")) {
        bool literal;
        const char *pat;
        size_t pn;
        OB_TRY(parse_pattern(json_object_get(j, "pattern"), "Replace", &literal, &pat, &pn));
        const json_t *c = json_object_get(j, "content");
        if (!json_is_string(c)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: Replace.content must be a string");
        if (!literal) return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: Replace decoder with a Regex pattern");
        OB_TRY(push_dec(t, &d));
        d->kind = TD_REPLACE;
        OB_TRY(dup_bytes(pat, pn, &d->a, &d->a_len));
        return dup_jstring(c, &d->b, &d->b_len);
    }
    if (!strcmp(type, "Strip")) {
        uint32_t ch = ' ';
        const json_t *c = json_object_get(j, "content");
        if (c) OB_TRY(one_char(c, "Strip.content", &ch));
        const json_t *st = json_object_get(j, "start"), *sp = json_object_get(j, "stop");
        OB_TRY(push_dec(t, &d));
        d->kind = TD_STRIP;
        d->ch = ch;
        d->start = json_is_integer(st) ? (int)json_integer_value(st) : 0;
        d->stop = json_is_integer(sp) ? (int)json_integer_value(sp) : 0;
        if (d->start < 0 || d->stop < 0 || d->start > 1000 || d->stop > 1000)
            return ob_err(OB_ERR_FORMAT, "tokenizer.json: Strip.start/stop out of range");
        return 0;
    }
    if (!strcmp(type, "BPEDecoder")) {
        const json_t *s = json_object_get(j, "suffix");
        OB_TRY(push_dec(t, &d));
        d->kind = TD_BPE_SUFFIX;
        if (json_is_string(s)) return dup_jstring(s, &d->a, &d->a_len);
        return dup_bytes("</w>", 4, &d->a, &d->a_len);
    }
    if (!strcmp(type, "CTC")) {
        const json_t *pad = json_object_get(j, "pad_token"), *wd = json_object_get(j, "word_delimiter_token");
        OB_TRY(push_dec(t, &d));
        d->kind = TD_CTC;
        d->cleanup = jbool(j, "cleanup", true);
        OB_TRY(json_is_string(pad) ? dup_jstring(pad, &d->a, &d->a_len) : dup_bytes("<pad>", 5, &d->a, &d->a_len));
        return json_is_string(wd) ? dup_jstring(wd, &d->b, &d->b_len) : dup_bytes("|", 1, &d->b, &d->b_len);
    }
    return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: decoder type '%s' is not supported", type);
}

int tk_json_decoder(ob_tokenizer *t, const json_t *j) { return parse_decoder(t, j, 0); }

/* ---------------- vocabulary ---------------- */

/* One token to be stored: text, id, score and attributes. */
typedef struct entry {
    const char *s;
    size_t n;
    int64_t id;
    double score;
    uint8_t type, attr;
} entry;

typedef struct entries {
    entry *v;
    size_t n, cap;
} entries;

static int add_entry(entries *e, const char *s, size_t n, int64_t id, double score, uint8_t type, uint8_t attr) {
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 1024;
        entry *v = ob_realloc(e->v, cap * sizeof *v);
        if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = (entry){s, n, id, score, type, attr};
    return 0;
}

static bool is_byte_piece(const char *s, size_t n, int *byte) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return false;
        v = v * 16 + d;
    }
    *byte = v;
    return true;
}

/* Store the entries as the tokenizer's vocabulary. Model tokens keep their
 * ids. Added tokens are then assigned ids the way Hugging Face's
 * AddedVocabulary::add_tokens does it, whatever id the file declares: a
 * token whose text is already in the vocabulary takes that token's id (and
 * gives it its flags); any other gets the next id after the model's
 * vocabulary size. */
static int store_vocab(ob_tokenizer *t, const entries *e, bool has_unigram_scores) {
    int64_t max_id = -1;
    size_t bytes = 0, n_model = 0, n_added = 0;
    for (size_t i = 0; i < e->n; i++) {
        bytes += e->v[i].n;
        if (e->v[i].attr & TKA_ADDED) {
            n_added++;
            continue;
        }
        if (e->v[i].id < 0 || e->v[i].id > INT32_MAX / 2)
            return ob_err(OB_ERR_FORMAT, "tokenizer.json: token id %lld out of range", (long long)e->v[i].id);
        if (e->v[i].id > max_id) max_id = e->v[i].id;
        n_model++;
    }
    if (max_id < 0 && n_added == 0) return ob_err(OB_ERR_FORMAT, "tokenizer.json: empty vocabulary");
    int64_t cap = max_id + 1 + (int64_t)n_added;
    OB_TRY(tk_vocab_alloc(t, (int32_t)cap, bytes + e->n)); /* + a NUL per entry */
    if (has_unigram_scores) {
        t->model.ugm_scores = ob_calloc((size_t)cap, sizeof(double));
        if (!t->model.ugm_scores) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < e->n; i++) {
        const entry *x = &e->v[i];
        if (x->attr & TKA_ADDED) continue;
        tk_token *tk = &t->tokens[x->id];
        tk->off = (uint32_t)t->strings_len;
        tk->len = (uint32_t)x->n;
        memcpy(t->strings + t->strings_len, x->s, x->n);
        t->strings[t->strings_len + x->n] = 0; /* every text is also a C string */
        t->strings_len += x->n + 1;
        tk->attr = x->attr;
        tk->type = x->type;
        tk->score = (float)x->score;
        if (t->model.ugm_scores) t->model.ugm_scores[x->id] = x->score;
    }
    t->n_vocab = (int32_t)(max_id + 1);
    OB_TRY(tk_vocab_index(t));
    int64_t next_id = (int64_t)n_model, top = max_id;
    int64_t *assigned = ob_malloc((n_added ? n_added : 1) * sizeof *assigned);
    if (!assigned) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++) {
        const entry *x = &e->v[i];
        if (!(x->attr & TKA_ADDED) || x->n == 0) continue;
        int64_t id = tk_find(t, x->s, x->n);
        for (size_t j = 0; id < 0 && j < k; j++) {
            const tk_token *o = &t->tokens[assigned[j]];
            if (o->len == x->n && memcmp(t->strings + o->off, x->s, x->n) == 0) id = assigned[j];
        }
        if (id < 0) {
            if (next_id >= cap) {
                ob_free(assigned);
                return ob_err(OB_ERR_FORMAT, "tokenizer.json: added token ids overflow");
            }
            id = next_id++;
            tk_token *tk = &t->tokens[id];
            tk->off = (uint32_t)t->strings_len;
            tk->len = (uint32_t)x->n;
            memcpy(t->strings + t->strings_len, x->s, x->n);
            t->strings[t->strings_len + x->n] = 0;
            t->strings_len += x->n + 1;
            tk->attr = 0;
            assigned[k++] = id;
        }
        tk_token *tk = &t->tokens[id];
        tk->attr = (uint8_t)(x->attr | (tk->attr & TKA_MODEL));
        tk->type = x->type;
        if (id > top) top = id;
    }
    ob_free(assigned);
    t->n_vocab = (int32_t)(top + 1);
    return tk_vocab_index(t);
}

/* "added_tokens": [{id, content, special, lstrip, rstrip, normalized,
 * single_word}] as entries (normalized defaults to !special, like HF). */
static int parse_added_tokens(const json_t *list, entries *e) {
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: added_tokens must be a list");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *a = json_array_get(list, i);
        const json_t *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
        if (!json_is_integer(id) || !json_is_string(c))
            return ob_err(OB_ERR_FORMAT, "tokenizer.json: added_tokens[%zu] needs an integer id and a content", i);
        bool special = jbool(a, "special", false);
        uint8_t attr = TKA_ADDED | (special ? TKA_SPECIAL : 0) | (jbool(a, "lstrip", false) ? TKA_LSTRIP : 0) |
                       (jbool(a, "rstrip", false) ? TKA_RSTRIP : 0) |
                       (jbool(a, "single_word", false) ? TKA_SINGLE_WORD : 0) |
                       (jbool(a, "normalized", !special) ? TKA_NORMALIZED : 0);
        OB_TRY(add_entry(e, json_string_value(c), json_string_length(c), json_integer_value(id), 0,
                         special ? OB_TOKTYPE_CONTROL : OB_TOKTYPE_USER_DEFINED, attr));
    }
    return 0;
}

/* Merges: ["a b", ...] or [["a", "b"], ...]; rank = position. */
static int parse_merges(ob_tokenizer *t, const json_t *list) {
    tk_model *m = &t->model;
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: model.merges must be a list");
    size_t n = json_array_size(list);
    OB_TRY(tk_map_init(&m->merges, n));
    m->merge_pairs = ob_malloc((n ? n : 1) * 2 * sizeof *m->merge_pairs);
    if (!m->merge_pairs) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (%zu merges)", n);
    tk_buf both = {0};
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_t *x = json_array_get(list, i);
        const char *a, *b;
        size_t an, bn;
        if (json_is_string(x)) {
            a = json_string_value(x);
            const char *sp = memchr(a, ' ', json_string_length(x));
            if (!sp) {
                rc = ob_err(OB_ERR_FORMAT, "tokenizer.json: merges[%zu] \"%s\" has no space", i, a);
                break;
            }
            an = (size_t)(sp - a);
            b = sp + 1;
            bn = json_string_length(x) - an - 1;
        } else if (json_is_array(x) && json_array_size(x) == 2 && json_is_string(json_array_get(x, 0)) &&
                   json_is_string(json_array_get(x, 1))) {
            a = json_string_value(json_array_get(x, 0));
            an = json_string_length(json_array_get(x, 0));
            b = json_string_value(json_array_get(x, 1));
            bn = json_string_length(json_array_get(x, 1));
        } else {
            rc = ob_err(OB_ERR_FORMAT, "tokenizer.json: merges[%zu] must be \"a b\" or [\"a\", \"b\"]", i);
            break;
        }
        ob_token ia = tk_find(t, a, an), ib = tk_find(t, b, bn);
        size_t skip = m->cont_prefix_len && bn >= m->cont_prefix_len ? m->cont_prefix_len : 0;
        both.n = 0;
        if ((rc = tk_buf_put(&both, a, an)) < 0 || (rc = tk_buf_put(&both, b + skip, bn - skip)) < 0) break;
        ob_token im = tk_find(t, both.p, both.n);
        if (ia < 0 || ib < 0 || im < 0) {
            rc = ob_err(OB_ERR_FORMAT, "tokenizer.json: merges[%zu] (%.*s %.*s) uses a token missing from the vocab",
                        i, (int)(an > 40 ? 40 : an), a, (int)(bn > 40 ? 40 : bn), b);
            break;
        }
        m->merge_pairs[2 * i] = (uint32_t)ia;
        m->merge_pairs[2 * i + 1] = (uint32_t)ib;
        rc = tk_map_put(&m->merges, ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib, ((uint64_t)i << 32) | (uint32_t)im);
    }
    tk_buf_free(&both);
    m->n_merges = rc == 0 ? n : 0;
    return rc;
}

static int set_string(const json_t *v, char **dst, size_t *len) {
    if (!json_is_string(v)) return 0;
    ob_free(*dst);
    return dup_jstring(v, dst, len);
}

/* Model section: the vocabulary entries and the model parameters. */
static int parse_model(ob_tokenizer *t, const json_t *model, const json_t *added, entries *e) {
    if (!json_is_object(model)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: \"model\" must be an object");
    const char *type = jstr(model, "type");
    const json_t *vocab = json_object_get(model, "vocab");
    if (!type) {
        /* Untagged (old) files: infer from the fields. */
        type = json_object_get(model, "merges") ? "BPE"
               : json_is_array(vocab)           ? "Unigram"
               : json_object_get(model, "max_input_chars_per_word") ? "WordPiece"
                                                                    : "WordLevel";
    }
    tk_model *m = &t->model;
    bool unigram = !strcmp(type, "Unigram");
    if (!strcmp(type, "BPE")) t->kind = OB_TOK_BPE;
    else if (!strcmp(type, "WordPiece")) t->kind = OB_TOK_WPM;
    else if (!strcmp(type, "WordLevel")) t->kind = OB_TOK_WORDLEVEL;
    else if (unigram) t->kind = OB_TOK_UGM;
    else return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: model type '%s' is not supported", type);

    if (unigram) {
        if (!json_is_array(vocab)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: Unigram vocab must be a list");
        for (size_t i = 0; i < json_array_size(vocab); i++) {
            const json_t *x = json_array_get(vocab, i);
            const json_t *p = json_array_get(x, 0), *s = json_array_get(x, 1);
            if (!json_is_string(p) || !json_is_number(s))
                return ob_err(OB_ERR_FORMAT, "tokenizer.json: Unigram vocab[%zu] must be [piece, score]", i);
            OB_TRY(add_entry(e, json_string_value(p), json_string_length(p), (int64_t)i, json_number_value(s),
                             OB_TOKTYPE_NORMAL, TKA_MODEL));
        }
    } else {
        if (!json_is_object(vocab)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: model.vocab must be an object");
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)vocab, k, v) {
            if (!json_is_integer(v)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: vocab[\"%s\"] is not an integer", k);
            OB_TRY(add_entry(e, k, strlen(k), json_integer_value(v), 0, OB_TOKTYPE_NORMAL, TKA_MODEL));
        }
    }
    OB_TRY(parse_added_tokens(added, e));
    OB_TRY(store_vocab(t, e, unigram));

    m->byte_fallback = jbool(model, "byte_fallback", false);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        int b;
        if ((t->tokens[id].attr & TKA_MODEL) && is_byte_piece(tk_text(t, id), t->tokens[id].len, &b)) {
            if (m->byte_tok[b] < 0) m->byte_tok[b] = id;
            if (m->byte_fallback) t->tokens[id].type = OB_TOKTYPE_BYTE;
        }
    }
    if (!strcmp(type, "BPE")) {
        m->fuse_unk = jbool(model, "fuse_unk", false);
        m->ignore_merges = jbool(model, "ignore_merges", false);
        OB_TRY(set_string(json_object_get(model, "continuing_subword_prefix"), &m->cont_prefix, &m->cont_prefix_len));
        OB_TRY(set_string(json_object_get(model, "end_of_word_suffix"), &m->eow_suffix, &m->eow_suffix_len));
        const char *unk = jstr(model, "unk_token");
        if (unk) m->unk = tk_find(t, unk, strlen(unk));
        const json_t *drop = json_object_get(model, "dropout");
        if (json_is_number(drop) && json_number_value(drop) > 0)
            OB_LOGW("tokenizer.json: BPE dropout %g ignored (encoding is deterministic)", json_number_value(drop));
        OB_TRY(parse_merges(t, json_object_get(model, "merges")));
    } else if (t->kind == OB_TOK_WPM || t->kind == OB_TOK_WORDLEVEL) {
        const char *unk = jstr(model, "unk_token");
        if (unk) m->unk = tk_find(t, unk, strlen(unk));
        const json_t *pre = json_object_get(model, "continuing_subword_prefix");
        if (json_is_string(pre))
            OB_TRY(dup_jstring(pre, &m->cont_prefix, &m->cont_prefix_len));
        else if (t->kind == OB_TOK_WPM)
            OB_TRY(dup_bytes("##", 2, &m->cont_prefix, &m->cont_prefix_len));
        OB_TRY(dup_bytes("", 0, &m->wp_first_prefix, &m->wp_first_prefix_len));
        const json_t *mx = json_object_get(model, "max_input_chars_per_word");
        m->wp_max_chars = json_is_integer(mx) && json_integer_value(mx) > 0 ? (size_t)json_integer_value(mx) : 100;
    } else {
        const json_t *unk = json_object_get(model, "unk_id");
        if (json_is_integer(unk)) {
            json_int_t u = json_integer_value(unk);
            if (u < 0 || u >= t->n_vocab) return ob_err(OB_ERR_FORMAT, "tokenizer.json: unk_id %lld out of range", (long long)u);
            m->unk = (ob_token)u;
        }
        OB_TRY(tk_ugm_build(t, true));
    }
    if (m->unk >= 0) t->special[OB_SPECIAL_UNK] = m->unk;
    return 0;
}

/* ---------------- post-processor ---------------- */

static int add_post(ob_tokenizer *t, bool prefix, ob_token id) {
    if (id < 0 || id >= t->n_vocab) return ob_err(OB_ERR_FORMAT, "tokenizer.json: post-processor id %d out of range", id);
    if (prefix) {
        if (t->n_post_prefix >= 4) return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: post-processor adds > 4 tokens");
        t->post_prefix[t->n_post_prefix++] = id;
    } else {
        if (t->n_post_suffix >= 4) return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: post-processor adds > 4 tokens");
        t->post_suffix[t->n_post_suffix++] = id;
    }
    return 0;
}

/* ["[CLS]", 101] pairs of BertProcessing / RobertaProcessing. */
static int pair_id(const ob_tokenizer *t, const json_t *p, ob_token *id) {
    const json_t *v = json_array_get(p, 1);
    if (!json_is_integer(v)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: post_processor cls/sep must be [text, id]");
    *id = (ob_token)json_integer_value(v);
    if (*id < 0 || *id >= t->n_vocab) return ob_err(OB_ERR_FORMAT, "tokenizer.json: post_processor id out of range");
    return 0;
}

/* The single-sequence template of a "post_processor": the tokens before
 * and after $A (pair templates are not used). */
static int parse_post(ob_tokenizer *t, const json_t *j, int depth) {
    if (!j || json_is_null(j)) return 0;
    if (!json_is_object(j) || depth > 8) return ob_err(OB_ERR_FORMAT, "tokenizer.json: post_processor must be an object");
    const char *type = jstr(j, "type");
    if (!type) return ob_err(OB_ERR_FORMAT, "tokenizer.json: post_processor without \"type\"");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(j, "processors");
        if (!json_is_array(list)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: Sequence.processors must be a list");
        for (size_t i = 0; i < json_array_size(list); i++) OB_TRY(parse_post(t, json_array_get(list, i), depth + 1));
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) return 0; /* offsets only */
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        ob_token cls = OB_TOKEN_NULL, sep = OB_TOKEN_NULL;
        OB_TRY(pair_id(t, json_object_get(j, "cls"), &cls));
        OB_TRY(pair_id(t, json_object_get(j, "sep"), &sep));
        OB_TRY(add_post(t, true, cls));
        return add_post(t, false, sep);
    }
    if (!strcmp(type, "TemplateProcessing")) {
        const json_t *single = json_object_get(j, "single"), *specials = json_object_get(j, "special_tokens");
        if (!json_is_array(single)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: TemplateProcessing.single must be a list");
        bool after = false;
        for (size_t i = 0; i < json_array_size(single); i++) {
            const json_t *it = json_array_get(single, i);
            if (json_object_get(it, "Sequence")) {
                after = true;
                continue;
            }
            const json_t *sp = json_object_get(it, "SpecialToken");
            const char *name = jstr(sp, "id");
            if (!name) return ob_err(OB_ERR_FORMAT, "tokenizer.json: TemplateProcessing item %zu", i);
            const json_t *ids = json_object_get(json_object_get(specials, name), "ids");
            if (!json_is_array(ids)) {
                /* Some files leave special_tokens empty: look the text up. */
                ob_token id = tk_find(t, name, strlen(name));
                if (id < 0) return ob_err(OB_ERR_FORMAT, "tokenizer.json: template token '%s' unknown", name);
                OB_TRY(add_post(t, !after, id));
                continue;
            }
            for (size_t k = 0; k < json_array_size(ids); k++) {
                const json_t *v = json_array_get(ids, k);
                if (!json_is_integer(v)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: template ids of '%s'", name);
                OB_TRY(add_post(t, !after, (ob_token)json_integer_value(v)));
            }
        }
        return 0;
    }
    return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.json: post_processor type '%s' is not supported", type);
}

/* ---------------- special tokens ---------------- */

static void role_from_text(ob_tokenizer *t, ob_special role, const char *text) {
    if (!text || t->special[role] >= 0) return;
    ob_token id = tk_find(t, text, strlen(text));
    if (id >= 0) t->special[role] = id;
}

/* Special roles: tokenizer_config.json names first, then what the
 * post-processor adds, then well-known texts. */
static void resolve_specials(ob_tokenizer *t, const json_t *config) {
    static const struct {
        const char *key;
        ob_special role;
    } keys[] = {{"bos_token", OB_SPECIAL_BOS}, {"eos_token", OB_SPECIAL_EOS},   {"unk_token", OB_SPECIAL_UNK},
                {"pad_token", OB_SPECIAL_PAD}, {"sep_token", OB_SPECIAL_SEP},   {"cls_token", OB_SPECIAL_CLS},
                {"mask_token", OB_SPECIAL_MASK}};
    if (config)
        for (size_t i = 0; i < OB_ARRAY_LEN(keys); i++) role_from_text(t, keys[i].role, jtoken(config, keys[i].key));
    /* The post-processor's template says which tokens open/close a sequence. */
    if (t->n_post_prefix > 0) {
        ob_token id = t->post_prefix[0];
        const char *s = tk_text(t, id);
        ob_special role = memmem(s, t->tokens[id].len, "CLS", 3) ? OB_SPECIAL_CLS : OB_SPECIAL_BOS;
        if (t->special[role] < 0) t->special[role] = id;
    }
    if (t->n_post_suffix > 0) {
        ob_token id = t->post_suffix[t->n_post_suffix - 1];
        ob_special role = memmem(tk_text(t, id), t->tokens[id].len, "SEP", 3) ? OB_SPECIAL_SEP : OB_SPECIAL_EOS;
        if (t->special[role] < 0) t->special[role] = id;
    }
    static const char *const bos[] = {"<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"};
    static const char *const eos[] = {"</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>"};
    for (size_t i = 0; i < OB_ARRAY_LEN(bos); i++) role_from_text(t, OB_SPECIAL_BOS, bos[i]);
    for (size_t i = 0; i < OB_ARRAY_LEN(eos); i++) role_from_text(t, OB_SPECIAL_EOS, eos[i]);
    role_from_text(t, OB_SPECIAL_CLS, "[CLS]");
    role_from_text(t, OB_SPECIAL_SEP, "[SEP]");
    role_from_text(t, OB_SPECIAL_MASK, "[MASK]");
    role_from_text(t, OB_SPECIAL_PAD, "[PAD]");
    role_from_text(t, OB_SPECIAL_PAD, "<pad>");
}

/* tokenizer_config.json may force BOS/EOS on or off (transformers rebuilds
 * the post-processor from add_bos_token/add_eos_token for such models). */
static int apply_config_flags(ob_tokenizer *t, const json_t *config) {
    const json_t *ab = json_object_get(config, "add_bos_token"), *ae = json_object_get(config, "add_eos_token");
    ob_token bos = t->special[OB_SPECIAL_BOS], eos = t->special[OB_SPECIAL_EOS];
    if (json_is_boolean(ab) && bos >= 0) {
        bool has = t->n_post_prefix > 0 && t->post_prefix[0] == bos;
        if (json_is_true(ab) && !has) {
            if (t->n_post_prefix >= 4) return ob_err(OB_ERR_UNSUPPORTED, "tokenizer: too many prefix tokens");
            memmove(t->post_prefix + 1, t->post_prefix, (size_t)t->n_post_prefix * sizeof *t->post_prefix);
            t->post_prefix[0] = bos;
            t->n_post_prefix++;
        } else if (!json_is_true(ab) && has) {
            memmove(t->post_prefix, t->post_prefix + 1, (size_t)--t->n_post_prefix * sizeof *t->post_prefix);
        }
    }
    if (json_is_boolean(ae) && eos >= 0) {
        bool has = t->n_post_suffix > 0 && t->post_suffix[t->n_post_suffix - 1] == eos;
        if (json_is_true(ae) && !has) OB_TRY(add_post(t, false, eos));
        else if (!json_is_true(ae) && has) t->n_post_suffix--;
    }
    return 0;
}

/* ---------------- whole files ---------------- */

/* Last steps shared by every JSON source: roles, BOS/EOS flags, end-of-
 * generation ids and the added-token tries (which need the normalizer). */
static int finish(ob_tokenizer *t, const json_t *config) {
    resolve_specials(t, config);
    if (config) OB_TRY(apply_config_flags(t, config));
    t->add_bos = t->n_post_prefix > 0;
    t->add_eos = t->n_post_suffix > 0;
    tk_find_eog(t);
    return tk_build_added(t);
}

/* Added tokens listed only in tokenizer_config.json (added_tokens_decoder)
 * or added_tokens.json, as entries. */
static int config_added(const json_t *config, const json_t *added_json, entries *e) {
    const json_t *dec = json_object_get(config, "added_tokens_decoder");
    if (json_is_object(dec)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)dec, k, v) {
            char *end;
            errno = 0;
            long long id = strtoll(k, &end, 10);
            const json_t *c = json_object_get(v, "content");
            if (errno || *end || !json_is_string(c))
                return ob_err(OB_ERR_FORMAT, "tokenizer_config.json: added_tokens_decoder[\"%s\"]", k);
            bool special = jbool(v, "special", false);
            uint8_t attr = TKA_ADDED | (special ? TKA_SPECIAL : 0) | (jbool(v, "lstrip", false) ? TKA_LSTRIP : 0) |
                           (jbool(v, "rstrip", false) ? TKA_RSTRIP : 0) |
                           (jbool(v, "single_word", false) ? TKA_SINGLE_WORD : 0) |
                           (jbool(v, "normalized", !special) ? TKA_NORMALIZED : 0);
            OB_TRY(add_entry(e, json_string_value(c), json_string_length(c), id, 0,
                             special ? OB_TOKTYPE_CONTROL : OB_TOKTYPE_USER_DEFINED, attr));
        }
    }
    if (json_is_object(added_json)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)added_json, k, v) {
            if (!json_is_integer(v)) return ob_err(OB_ERR_FORMAT, "added_tokens.json: \"%s\" is not an integer", k);
            bool known = false;
            for (size_t i = 0; i < e->n && !known; i++) known = (e->v[i].attr & TKA_ADDED) && e->v[i].id == json_integer_value(v);
            if (known) continue;
            OB_TRY(add_entry(e, k, strlen(k), json_integer_value(v), 0, OB_TOKTYPE_CONTROL, TKA_ADDED | TKA_SPECIAL));
        }
    }
    return 0;
}

int tk_from_json_value(const json_t *root, const json_t *config, ob_tokenizer **out) {
    *out = NULL;
    if (!json_is_object(root)) return ob_err(OB_ERR_FORMAT, "tokenizer.json: top level must be an object");
    ob_tokenizer *t = tk_new();
    if (!t) return OB_ERR_OOM;
    entries e = {0};
    int rc = parse_model(t, json_object_get(root, "model"), json_object_get(root, "added_tokens"), &e);
    ob_free(e.v);
    if (rc == 0) rc = parse_normalizer(t, json_object_get(root, "normalizer"), 0);
    if (rc == 0) rc = parse_pre(t, json_object_get(root, "pre_tokenizer"), 0);
    if (rc == 0) rc = parse_decoder(t, json_object_get(root, "decoder"), 0);
    if (rc == 0) {
        /* A Strip after Fuse or ByteLevel sees the joined text: the detokenizer
         * applies it to the start of the stream instead of to each token. */
        bool joined = false;
        for (size_t i = 0; i < t->n_decs; i++) {
            if (t->decs[i].kind == TD_FUSE || t->decs[i].kind == TD_BYTELEVEL) joined = true;
            if (t->decs[i].kind == TD_STRIP && joined) t->decs[i].whole = true;
        }
    }
    if (rc == 0) rc = parse_post(t, json_object_get(root, "post_processor"), 0);
    if (rc == 0) rc = finish(t, config);
    if (rc < 0) {
        ob_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int tk_replace_pipeline(ob_tokenizer *t, const json_t *normalizer, const json_t *pre_tokenizer, int ignore_merges) {
    for (size_t i = 0; i < t->n_norms; i++) tk_norm_clear(&t->norms[i]);
    t->n_norms = 0;
    for (size_t i = 0; i < t->n_pres; i++) tk_pre_clear(&t->pres[i]);
    t->n_pres = 0;
    OB_TRY(parse_normalizer(t, normalizer, 0));
    OB_TRY(parse_pre(t, pre_tokenizer, 0));
    if (ignore_merges >= 0) t->model.ignore_merges = ignore_merges != 0;
    return tk_build_added(t);
}

/* ---------------- files ---------------- */

/* Whole file into a NUL-terminated ob_malloc buffer (2 GiB at most). */
static int read_file(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ob_err(errno == ENOENT ? OB_ERR_NOT_FOUND : OB_ERR_IO, "%s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return ob_err(OB_ERR_IO, "%s: cannot seek", path);
    }
    long n = ftell(f);
    if (n < 0 || n > (1L << 31)) {
        fclose(f);
        return ob_err(OB_ERR_IO, "%s: size %ld unsupported", path, n);
    }
    rewind(f);
    char *buf = ob_malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return ob_err(OB_ERR_OOM, "%s: out of memory (%ld bytes)", path, n);
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        ob_free(buf);
        return ob_err(OB_ERR_IO, "%s: short read", path);
    }
    buf[n] = 0;
    *data = buf;
    *len = (size_t)n;
    return 0;
}

/* jansson refuses integers beyond 64 bits, which tokenizer_config.json
 * files contain ("model_max_length": 1000000000000000019884624838656).
 * Rewrite such literals (outside strings) as reals by appending ".0"; we
 * never read those fields as integers. Returns a new buffer or NULL. */
static char *widen_big_ints(const char *s, size_t n, size_t *out_len) {
    size_t extra = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c >= '0' && c <= '9') {
            size_t j = i;
            while (j < n && s[j] >= '0' && s[j] <= '9') j++;
            if (j - i > 18 && (j >= n || (s[j] != '.' && s[j] != 'e' && s[j] != 'E'))) extra += 2;
            i = j - 1;
        }
    }
    if (extra == 0) return NULL;
    char *o = ob_malloc(n + extra + 1);
    if (!o) return NULL;
    size_t k = 0;
    in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            o[k++] = c;
            if (c == '\\' && i + 1 < n) o[k++] = s[++i];
            else if (c == '"') in_str = false;
        } else if (c >= '0' && c <= '9') {
            size_t j = i;
            while (j < n && s[j] >= '0' && s[j] <= '9') o[k++] = s[j++];
            if (j - i > 18 && (j >= n || (s[j] != '.' && s[j] != 'e' && s[j] != 'E'))) {
                o[k++] = '.';
                o[k++] = '0';
            }
            i = j - 1;
        } else {
            if (c == '"') in_str = true;
            o[k++] = c;
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

static json_t *parse_json_text(const char *text, size_t len, const char *what, int *rc);

static json_t *load_json_file(const char *path, int *rc) {
    char *data;
    size_t len;
    *rc = read_file(path, &data, &len);
    if (*rc < 0) return NULL;
    json_t *j = parse_json_text(data, len, path, rc);
    ob_free(data);
    return j;
}

/* Optional JSON file beside the tokenizer: NULL when absent, error when broken. */
static int join(char *buf, size_t size, const char *dir, const char *name) {
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size) return ob_err(OB_ERR_RANGE, "path too long: %s/%s", dir, name);
    return 0;
}

static json_t *load_optional(const char *dir, const char *name, int *rc) {
    char path[4096];
    if ((*rc = join(path, sizeof path, dir, name)) < 0) return NULL;
    struct stat st;
    *rc = 0;
    if (stat(path, &st) != 0) return NULL;
    return load_json_file(path, rc);
}

/* The "slow" layout: vocab.json + merges.txt, the pipeline chosen by the
 * tokenizer class named in tokenizer_config.json (transformers builds
 * Qwen2Tokenizer with NFC and its own split regex, GPT-2-style classes with
 * the byte-level GPT-2 regex). */
static int from_slow(const char *dir, const json_t *config, ob_tokenizer **out) {
    int rc;
    char path[4096];
    OB_TRY(join(path, sizeof path, dir, "vocab.json"));
    json_t *vocab = load_json_file(path, &rc);
    if (!vocab) return rc;
    char *merges_txt = NULL;
    size_t merges_len = 0;
    rc = join(path, sizeof path, dir, "merges.txt");
    if (rc == 0) rc = read_file(path, &merges_txt, &merges_len);
    json_t *merges = rc == 0 ? json_array() : NULL;
    for (size_t i = 0; rc == 0 && i < merges_len;) {
        size_t e = i;
        while (e < merges_len && merges_txt[e] != '\n') e++;
        size_t n = e;
        if (n > i && merges_txt[n - 1] == '\r') n--;
        if (n > i && !(i == 0 && n - i >= 8 && !memcmp(merges_txt, "#version", 8)))
            if (json_array_append_new(merges, json_stringn(merges_txt + i, n - i)) < 0)
                rc = ob_err(OB_ERR_FORMAT, "merges.txt: line at byte %zu is not UTF-8", i);
        i = e + 1;
    }
    ob_free(merges_txt);
    json_t *added_json = load_optional(dir, "added_tokens.json", &rc);
    const char *cls = config ? jstr(config, "tokenizer_class") : NULL;
    bool qwen = cls && strstr(cls, "Qwen2");
    json_t *root = NULL;
    if (rc == 0 && merges) {
        static const char QWEN2_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                       "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
        bool prefix = config && json_is_true(json_object_get(config, "add_prefix_space"));
        json_t *pre = qwen ? json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}", "type", "Sequence",
                                       "pretokenizers", "type", "Split", "pattern", "Regex", QWEN2_RE, "behavior",
                                       "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0,
                                       "trim_offsets", 0, "use_regex", 0)
                           : json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", prefix,
                                       "trim_offsets", 1, "use_regex", 1);
        root = json_pack("{s:{s:s, s:O, s:o}, s:o, s:o, s:{s:s}}", "model", "type", "BPE", "vocab", vocab, "merges",
                         merges, "normalizer", qwen ? json_pack("{s:s}", "type", "NFC") : json_null(), "pre_tokenizer",
                         pre, "decoder", "type", "ByteLevel");
        merges = NULL;
        if (!root) rc = ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    }
    json_decref(merges);
    json_decref(vocab);
    if (rc == 0) {
        entries e = {0};
        rc = config_added(config, added_json, &e);
        if (rc == 0) {
            /* Present the config's added tokens the way tokenizer.json would. */
            json_t *list = json_array();
            for (size_t i = 0; list && i < e.n; i++) {
                json_t *a = json_pack("{s:I, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)e.v[i].id, "content",
                                      e.v[i].s, e.v[i].n, "special", (e.v[i].attr & TKA_SPECIAL) != 0, "lstrip",
                                      (e.v[i].attr & TKA_LSTRIP) != 0, "rstrip", (e.v[i].attr & TKA_RSTRIP) != 0,
                                      "single_word", (e.v[i].attr & TKA_SINGLE_WORD) != 0, "normalized",
                                      (e.v[i].attr & TKA_NORMALIZED) != 0);
                if (!a || json_array_append_new(list, a) < 0) {
                    json_decref(list);
                    list = NULL;
                }
            }
            if (!list || json_object_set_new(root, "added_tokens", list) < 0) rc = ob_err(OB_ERR_OOM, "tokenizer: out of memory");
        }
        ob_free(e.v);
        if (rc == 0) rc = tk_from_json_value(root, config, out);
    }
    json_decref(root);
    json_decref(added_json);
    return rc;
}

/* Parse JSON text, tolerating integers wider than 64 bits (see widen_big_ints). */
static json_t *parse_json_text(const char *text, size_t len, const char *what, int *rc) {
    size_t wlen;
    char *wide = widen_big_ints(text, len, &wlen);
    json_error_t err;
    json_t *j = json_loadb(wide ? wide : text, wide ? wlen : len, JSON_ALLOW_NUL, &err);
    ob_free(wide);
    *rc = j ? 0 : ob_err(OB_ERR_FORMAT, "%s: %s at line %d column %d", what, err.text, err.line, err.column);
    return j;
}

int ob_tokenizer_from_json_string(const char *json, size_t len, const char *config_json, size_t config_len,
                                  ob_tokenizer **out) {
    *out = NULL;
    int rc;
    json_t *root = parse_json_text(json, len, "tokenizer.json", &rc);
    if (!root) return rc;
    json_t *config = NULL;
    if (config_json && !(config = parse_json_text(config_json, config_len, "tokenizer_config.json", &rc))) {
        json_decref(root);
        return rc;
    }
    rc = tk_from_json_value(root, config, out);
    json_decref(root);
    json_decref(config);
    return rc;
}

int ob_tokenizer_from_json_file(const char *path, ob_tokenizer **out) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return ob_err(OB_ERR_NOT_FOUND, "%s: %s", path, strerror(errno));
    char dir[4096], file[4096];
    if (strlen(path) >= sizeof dir - 32) return ob_err(OB_ERR_RANGE, "path too long: %s", path);
    if (S_ISDIR(st.st_mode)) {
        strcpy(dir, path);
        OB_TRY(join(file, sizeof file, path, "tokenizer.json"));
    } else {
        strcpy(file, path);
        strcpy(dir, path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else strcpy(dir, ".");
    }
    bool isdir = S_ISDIR(st.st_mode);
    int rc;
    json_t *config = load_optional(dir, "tokenizer_config.json", &rc);
    if (rc < 0) return rc;
    if (isdir && (stat(file, &st) != 0 || !S_ISREG(st.st_mode))) {
        rc = from_slow(dir, config, out);
        json_decref(config);
        return rc < 0 ? ob_err_wrap(rc, "%s", path) : 0;
    }
    json_t *root = load_json_file(file, &rc);
    if (root) rc = tk_from_json_value(root, config, out);
    json_decref(root);
    json_decref(config);
    return rc < 0 ? ob_err_wrap(rc, "%s", file) : 0;
}
