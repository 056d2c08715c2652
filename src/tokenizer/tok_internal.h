/*
 * tok_internal.h - what the tokenizer's source files share and nobody else
 * sees: the tokenizer struct, the pipeline step descriptions, the small
 * containers (byte buffer, integer hash map, byte trie), the Unicode
 * predicates built on utf8proc and the PCRE2 wrapper.
 *
 * Layout of the module:
 *   tok_util.c      containers, hashing, Unicode predicates, UTF-8 repair
 *   tok_regex.c     PCRE2 with Oniguruma/Rust-regex compatible iteration
 *   tok_normalize.c normalizers (NFC ... BertNormalizer, precompiled charsmap)
 *   tok_pretok.c    pre-tokenizers (Split, ByteLevel, Metaspace, Digits ...)
 *   tok_pretable.c  tokenizer.ggml.pre name -> Hugging Face pipeline JSON
 *   tok_bpe.c tok_spm.c tok_wpm.c tok_unigram.c   the models
 *   tok_vocab.c     vocabulary tables, added tokens, special ids, accessors
 *   tok_encode.c    the encode pipeline;  tok_decode.c  decoders, detokenizer
 *   tok_gguf.c tok_json.c                         the two sources
 */
#ifndef OB_TOKENIZER_TOK_INTERNAL_H
#define OB_TOKENIZER_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/arena.h"
#include "tokenizer.h"

/* ------------------------------------------------------------------ */
/* Containers                                                          */

/* Growable byte buffer; zero-initialise. */
typedef struct tk_buf {
    char *p;
    size_t n, cap;
} tk_buf;

int tk_buf_reserve(tk_buf *b, size_t extra);
int tk_buf_put(tk_buf *b, const void *s, size_t n);
int tk_buf_putc(tk_buf *b, char c);
/* Append a code point as UTF-8 (cp must be a valid scalar value). */
int tk_buf_put_cp(tk_buf *b, uint32_t cp);
void tk_buf_free(tk_buf *b);

/* Open-addressing map from 64-bit keys to 64-bit values. The key
 * UINT64_MAX is reserved (marks an empty slot). Used for BPE merges
 * ((left << 32 | right) -> (rank << 32 | merged id)), trie edges and caches. */
typedef struct tk_slot {
    uint64_t key, val; /* side by side: one cache line per probe */
} tk_slot;

typedef struct tk_map {
    tk_slot *slots;
    size_t mask; /* capacity - 1; capacity is a power of two */
    size_t n;
} tk_map;

int tk_map_init(tk_map *m, size_t expected);
void tk_map_free(tk_map *m);
/* Insert or overwrite. */
int tk_map_put(tk_map *m, uint64_t key, uint64_t val);
void tk_map_clear(tk_map *m);

uint64_t tk_hash_bytes(const void *p, size_t n);

static inline uint64_t tk_hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Inline: the BPE merge loop and trie walks call this per step. */
static inline bool tk_map_get(const tk_map *m, uint64_t key, uint64_t *val) {
    if (!m->slots) return false;
    size_t j = tk_hash_u64(key) & m->mask;
    for (;;) {
        uint64_t k = m->slots[j].key;
        if (k == key) {
            *val = m->slots[j].val;
            return true;
        }
        if (k == UINT64_MAX) return false;
        j = (j + 1) & m->mask;
    }
}

/* Byte trie: node 0 is the root; value[node] is a token id or -1. Children
 * live in one hash map keyed by (node << 8 | byte), so a step is one probe. */
typedef struct tk_trie {
    int32_t *value;
    uint32_t n_nodes, cap;
    tk_map edges;
    uint32_t max_depth;
} tk_trie;

int tk_trie_init(tk_trie *tr);
void tk_trie_free(tk_trie *tr);
/* Insert key -> value (a later insert of the same key overwrites). */
int tk_trie_insert(tk_trie *tr, const char *key, size_t len, int32_t value);
/* The child of node along byte c, or -1. */
static inline int64_t tk_trie_step(const tk_trie *tr, uint32_t node, unsigned char c) {
    uint64_t v;
    if (!tk_map_get(&tr->edges, ((uint64_t)node << 8) | c, &v)) return -1;
    return (int64_t)v;
}

/* ------------------------------------------------------------------ */
/* Unicode helpers (utf8proc)                                          */

/* Decode one code point of valid UTF-8 (the pipeline only sees valid text). */
static inline uint32_t tk_cp(const char *s, size_t n, int *len) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) {
        *len = 1;
        return u[0];
    }
    if (u[0] < 0xE0) {
        *len = 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if (u[0] < 0xF0 || n < 4) {
        *len = 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
           (u[3] & 0x3F);
}

/* Length of the UTF-8 character starting with byte c (1 for stray bytes). */
static inline int tk_u8len(unsigned char c) {
    return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

bool tk_is_whitespace(uint32_t cp);   /* Unicode White_Space (Rust char::is_whitespace) */
bool tk_is_numeric(uint32_t cp);      /* Nd, Nl, No (Rust char::is_numeric) */
bool tk_is_punct(uint32_t cp);        /* ASCII punctuation or a P* category */
bool tk_is_other(uint32_t cp);        /* C* categories (Cc Cf Cs Co Cn) */
bool tk_is_mn(uint32_t cp);           /* nonspacing mark */
bool tk_is_mark(uint32_t cp);         /* Mn, Mc, Me */
bool tk_is_bert_chinese(uint32_t cp); /* the CJK blocks BERT pads with spaces */
/* Append the full lowercase mapping of cp (Rust char::to_lowercase). */
int tk_lower_cp(tk_buf *out, uint32_t cp);

/* Unicode normalization of valid UTF-8 s[0..n) into out (appended). */
enum { TK_NF_NFC, TK_NF_NFD, TK_NF_NFKC, TK_NF_NFKD };
int tk_unicode_normalize(const char *s, size_t n, int form, tk_buf *out);

/* Copy s[0..n) into out replacing every maximal invalid UTF-8 subsequence
 * by U+FFFD (Unicode's "substitution of maximal subparts", which Python's
 * decode(errors="replace") and Rust's from_utf8_lossy implement). Returns
 * whether anything was replaced. */
int tk_utf8_repair(const char *s, size_t n, tk_buf *out, bool *replaced);
/* Length of the maximal invalid subpart at s (>= 1), or 0 if a valid
 * character starts there; *need reports a valid-but-truncated prefix
 * (bytes a streaming decoder should hold rather than replace). */
size_t tk_utf8_bad_prefix(const unsigned char *s, size_t n, bool *truncated);

/* ------------------------------------------------------------------ */
/* Regex (PCRE2, Oniguruma flavour)                                     */

typedef struct tk_regex tk_regex;

/* Compile a pattern as Hugging Face would: Oniguruma (Ruby syntax) for
 * "Regex" patterns, a literal string when literal is true. */
int tk_regex_compile(const char *pat, size_t len, bool literal, tk_regex **out);
void tk_regex_free(tk_regex *re);

/* Per-call matching state (match data, match context, lazily a JIT stack). */
typedef struct tk_match {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *jit_stack;
} tk_match;

int tk_match_init(tk_match *m);
void tk_match_free(tk_match *m);

/* Iterate non-overlapping matches in s[0..n) the way Oniguruma's and Rust's
 * find_iter do (an empty match right after the previous match is skipped,
 * and the search then moves on one character). For each match calls
 * fn(user, start, end). Returns 0 or a negative status. */
typedef int (*tk_match_fn)(void *user, size_t start, size_t end);
int tk_regex_each(const tk_regex *re, tk_match *m, const char *s, size_t n, tk_match_fn fn, void *user);
/* Length of an anchored match at the start of s[0..n), or -1. */
int tk_regex_match_prefix(const tk_regex *re, tk_match *m, const char *s, size_t n);

/* ------------------------------------------------------------------ */
/* Pipeline steps                                                      */

enum tk_norm_kind {
    TN_NFC,
    TN_NFD,
    TN_NFKC,
    TN_NFKD,
    TN_LOWER,
    TN_STRIP,
    TN_STRIP_ACCENTS,
    TN_REPLACE,
    TN_PREPEND,
    TN_BERT,
    TN_PRECOMPILED, /* HF Precompiled: per grapheme, shortest charsmap rule */
    TN_NMT,
    TN_BYTELEVEL,
    TN_SPM_CHARSMAP, /* SentencePiece/llama.cpp UGM normalizer: longest rule + whitespace options */
};

typedef struct tk_charsmap {
    const uint32_t *trie; /* XOR-compressed double array */
    size_t trie_len;      /* entries */
    const char *strings;  /* NUL-terminated replacement strings */
    size_t strings_len;
    void *blob;           /* owned copy of the whole charsmap */
} tk_charsmap;

typedef struct tk_norm {
    int kind;
    bool strip_left, strip_right;                               /* Strip */
    bool clean_text, chinese_chars, strip_accents, lowercase;    /* BertNormalizer */
    tk_regex *re;                                               /* Replace (regex pattern) */
    char *pattern;                                              /* Replace (literal pattern) */
    size_t pattern_len;
    char *content;                                              /* Replace content / Prepend text */
    size_t content_len;
    tk_charsmap cmap;                                           /* Precompiled / SPM */
    bool add_space_prefix, remove_extra_ws, escape_ws, ws_suffix; /* SPM charsmap whitespace rules */
} tk_norm;

enum tk_behavior { TB_REMOVED, TB_ISOLATED, TB_MERGED_PREV, TB_MERGED_NEXT, TB_CONTIGUOUS };

enum tk_pre_kind {
    TP_SPLIT,
    TP_BYTELEVEL,
    TP_METASPACE,
    TP_WHITESPACE,
    TP_WHITESPACE_SPLIT,
    TP_DIGITS,
    TP_PUNCT,
    TP_BERT,
    TP_CHAR_DELIM,
};

enum tk_prepend { TK_PREPEND_ALWAYS, TK_PREPEND_FIRST, TK_PREPEND_NEVER };

typedef struct tk_pre {
    int kind;
    int behavior;
    bool invert;
    tk_regex *re;               /* Split, Whitespace, ByteLevel(use_regex) */
    bool add_prefix_space;      /* ByteLevel */
    uint32_t replacement;       /* Metaspace */
    int prepend_scheme;         /* Metaspace */
    bool split;                 /* Metaspace */
    bool individual_digits;     /* Digits */
    uint32_t delimiter;         /* CharDelimiterSplit */
} tk_pre;

enum tk_dec_kind {
    TD_BYTELEVEL,
    TD_METASPACE,
    TD_WORDPIECE,
    TD_REPLACE,
    TD_BYTE_FALLBACK,
    TD_FUSE,
    TD_STRIP,
    TD_BPE_SUFFIX,
    TD_CTC,
};

typedef struct tk_dec {
    int kind;
    char *a; /* Replace pattern (literal), WordPiece prefix, BPEDecoder suffix, CTC pad token */
    size_t a_len;
    char *b; /* Replace content, CTC word delimiter */
    size_t b_len;
    uint32_t ch;        /* Metaspace replacement, Strip content */
    int prepend_scheme; /* Metaspace */
    bool cleanup;       /* WordPiece, CTC */
    bool phantom;       /* WordPiece over GGUF "▁word" pieces instead of "##piece" */
    bool whole;         /* Strip: applies to the joined text (after Fuse/ByteLevel) */
    bool added_raw;     /* ByteLevel: added tokens are text, not byte strings (GGUF, as llama.cpp) */
    int start, stop;    /* Strip */
} tk_dec;

/* ------------------------------------------------------------------ */
/* The tokenizer                                                        */

enum {
    TKA_SPECIAL = 1,     /* a special added token (skipped unless PARSE_SPECIAL) */
    TKA_LSTRIP = 2,
    TKA_RSTRIP = 4,
    TKA_SINGLE_WORD = 8,
    TKA_NORMALIZED = 16, /* matched on normalized text */
    TKA_ADDED = 32,      /* matched in text before the model runs */
    TKA_MODEL = 64,      /* part of the model's own vocabulary */
};

typedef struct tk_token {
    uint32_t off, len; /* text in t->strings */
    float score;
    uint8_t type;      /* ob_token_type */
    uint8_t attr;      /* TKA_* */
} tk_token;

typedef struct tk_model {
    int kind;                 /* ob_tok_kind */
    ob_token unk;             /* OB_TOKEN_NULL if none */
    /* BPE */
    tk_map merges;            /* (left << 32 | right) -> (rank << 32 | merged) */
    uint32_t *merge_pairs;    /* [n_merges][2] left, right in rank order */
    size_t n_merges;
    bool fuse_unk, byte_fallback, ignore_merges;
    char *cont_prefix;        /* BPE continuing_subword_prefix; WordPiece "##" */
    size_t cont_prefix_len;
    char *eow_suffix;         /* BPE end_of_word_suffix */
    size_t eow_suffix_len;
    ob_token byte_tok[256];   /* <0xXX> tokens, OB_TOKEN_NULL when absent */
    bool spm_words;           /* no piece has "▁" after another character: text can be cut before
                               * each word-initial "▁" without changing the result */
    bool byte_level_chars;    /* GGUF gpt2: unmergeable leftovers fall back to byte-level chars */
    /* WordPiece */
    char *wp_first_prefix;    /* "▁" for GGUF BERT vocabularies, "" for Hugging Face */
    size_t wp_first_prefix_len;
    size_t wp_max_chars;
    /* Unigram */
    tk_trie ugm_trie;
    double *ugm_scores;       /* [n_vocab] piece log-probabilities at full precision */
    double ugm_unk_score;
    bool ugm_user_zero;       /* user-defined pieces score 0 (llama.cpp/sentencepiece) */
} tk_model;

struct ob_tokenizer {
    ob_tok_kind kind;
    char pre_name[64];
    int32_t n_vocab;
    tk_token *tokens;      /* [n_vocab] */
    char *strings;         /* all token texts, back to back */
    size_t strings_len;
    uint32_t *slots;       /* text -> id + 1 (0 = empty); open addressing over tokens */
    size_t slot_mask;

    ob_token special[OB_SPECIAL_COUNT];
    ob_token *eog;
    size_t n_eog;

    tk_trie added_raw;     /* added tokens matched on the raw text */
    tk_trie added_norm;    /* added tokens matched on normalized text */
    size_t n_added_raw, n_added_norm;
    tk_regex *word_re;     /* one Rust-regex \w character, for single_word added tokens */

    tk_norm *norms;
    size_t n_norms;
    tk_pre *pres;
    size_t n_pres;
    tk_model model;
    tk_dec *decs;
    size_t n_decs;

    ob_token post_prefix[4], post_suffix[4]; /* single-sequence template around $A */
    int n_post_prefix, n_post_suffix;
    bool add_bos, add_eos;

    uint16_t byte_to_cp[256]; /* GPT-2 byte-level alphabet */
    int16_t cp_to_byte[324];  /* inverse for code points < 324, else -1 */
};

/* tok_vocab.c */
int tk_vocab_alloc(ob_tokenizer *t, int32_t n, size_t strings_bytes);
/* Build the text -> id table (later ids win on duplicate texts). */
int tk_vocab_index(ob_tokenizer *t);
static inline const char *tk_text(const ob_tokenizer *t, ob_token id) { return t->strings + t->tokens[id].off; }
ob_token tk_find(const ob_tokenizer *t, const char *s, size_t n);
/* Register added tokens (attr TKA_ADDED set) in the matching tries; call
 * after the normalizer is known (normalized tokens are matched in their
 * normalized form). */
int tk_build_added(ob_tokenizer *t);
void tk_init_bytelevel(ob_tokenizer *t);
void tk_find_eog(ob_tokenizer *t);
void tk_tokenizer_free_parts(ob_tokenizer *t);
ob_tokenizer *tk_new(void);

/* tok_normalize.c */
typedef struct tk_work tk_work;
/* Run the tokenizer's normalizers over s[0..n) and append the result to out
 * (out must not be one of w's scratch buffers). */
int tk_normalize(tk_work *w, const char *s, size_t n, tk_buf *out);
int tk_charsmap_load(tk_charsmap *cm, const void *data, size_t len);
void tk_norm_clear(tk_norm *nm);

/* tok_pretok.c: pieces of text flowing through the pipeline. */
typedef struct tk_piece {
    size_t off, len;  /* into the current text buffer */
    ob_token id;      /* >= 0: already a token (added token); text ignored */
    uint8_t at_start; /* begins at offset 0 of the original input */
} tk_piece;

typedef struct tk_pieces {
    tk_piece *v;
    size_t n, cap;
} tk_pieces;

int tk_pieces_push(tk_pieces *p, size_t off, size_t len, ob_token id, uint8_t at_start);

struct tk_work {
    const ob_tokenizer *t;
    tk_buf text[2];   /* double-buffered text of the pieces */
    int cur;
    tk_pieces pieces[2];
    int pcur;
    tk_pieces segs;   /* split segments of one piece (id = 1 for a match) */
    tk_buf tmp, tmp2;
    tk_match match;
    /* model scratch */
    void *sym;        /* symbols of the word being merged */
    size_t sym_cap;
    void *heap;
    size_t heap_cap, heap_n;
    tk_map cache;     /* word hash -> index into cache_ent */
    struct tk_cache_ent *cache_ent;
    size_t cache_n, cache_cap;
    double *ugm_score;
    int32_t *ugm_prev, *ugm_id;
    size_t ugm_cap;
};

int tk_pretokenize(tk_work *w);
void tk_pre_clear(tk_pre *p);

/* Per-call cache of words already encoded (the ids are copied from their
 * first occurrence in out). lookup: 1 hit (ids appended), 0 miss, < 0 error;
 * *hash is then passed to insert along with where the word's ids start. */
int tk_cache_lookup(tk_work *w, const char *s, size_t n, ob_tokens *out, uint64_t *hash);
int tk_cache_insert(tk_work *w, const char *s, size_t n, uint64_t hash, const ob_tokens *out, size_t start);

/* Models: encode one piece of (normalized, pre-tokenized) text. */
int tk_bpe_encode(tk_work *w, const char *s, size_t n, ob_tokens *out);
int tk_spm_encode(tk_work *w, const char *s, size_t n, ob_tokens *out);
bool tk_spm_check_words(const ob_tokenizer *t);
int tk_wpm_encode(tk_work *w, const char *s, size_t n, ob_tokens *out);
int tk_ugm_encode(tk_work *w, const char *s, size_t n, ob_tokens *out);
/* hf: every model piece is a candidate and the unknown score is the minimum
 * over all pieces (tokenizers); otherwise NORMAL/USER_DEFINED/UNUSED pieces
 * and the minimum over NORMAL ones, user pieces scoring 0 (llama.cpp). */
int tk_ugm_build(ob_tokenizer *t, bool hf);
void tk_work_free(tk_work *w);

/* tok_decode.c */
void tk_dec_clear(tk_dec *d);

/* tok_pretable.c: the pipeline a tokenizer.ggml.pre name stands for, as the
 * model's tokenizer.json declares it. Builds new JSON values (caller
 * json_decref's them; *normalizer may be NULL = none). OB_ERR_NOT_FOUND for
 * names not in the table. */
int tk_pre_spec_json(const char *name, json_t **normalizer, json_t **pre_tokenizer, bool *ignore_merges);
/* The table's entries, for tests: entry i's NULL-terminated name list, or
 * NULL past the end. */
const char *const *tk_pre_spec_names(size_t i);

/* tok_json.c: parse pipeline pieces from Hugging Face JSON. */
int tk_json_normalizer(ob_tokenizer *t, const json_t *j);
int tk_json_pre_tokenizer(ob_tokenizer *t, const json_t *j);
int tk_json_decoder(ob_tokenizer *t, const json_t *j);
/* Build from parsed tokenizer.json and (optional) tokenizer_config.json. */
int tk_from_json_value(const json_t *root, const json_t *config, ob_tokenizer **out);
/* Test hook: replace the normalizer and pre-tokenizer of a tokenizer built
 * from JSON (both JSON, NULL meaning none) and set ignore_merges; used to
 * run the pre-tokenizer fixtures over one loaded vocabulary. */
int tk_replace_pipeline(ob_tokenizer *t, const json_t *normalizer, const json_t *pre_tokenizer, int ignore_merges);

#endif
