/*
 * tokenizer.h - text <-> token ids, byte-exact with Hugging Face tokenizers.
 *
 * One ob_tokenizer object is built either from a GGUF vocabulary (the
 * `tokenizer.ggml.*` keys) or from a Hugging Face tokenizer.json (plus the
 * tokenizer_config.json beside it), or from the older "slow" layout
 * (vocab.json + merges.txt + tokenizer_config.json + added_tokens.json).
 * Both sources become the same pipeline:
 *
 *   invalid UTF-8 -> U+FFFD, added/special tokens split out, normalizer
 *   (utf8proc), pre-tokenizer (PCRE2 regexes), model (BPE by merge rank,
 *   SentencePiece BPE by score, WordPiece, Unigram, WordLevel), then the
 *   post-processor (BOS/EOS/CLS/SEP templates).
 *
 * A tokenizer is immutable after construction: any number of threads may
 * encode and decode with one object at the same time (all scratch memory is
 * per call). Failures return a negative ob_status with an ob_err() message;
 * a malformed tokenizer.json or inconsistent GGUF arrays are OB_ERR_FORMAT,
 * never a crash.
 *
 * The kinds and sources that are verified, and against what, are listed in
 * docs/tokenizers.md.
 */
#ifndef OB_TOKENIZER_TOKENIZER_H
#define OB_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onebit.h" /* ob_token, ob_status */

typedef struct ob_gguf ob_gguf;
typedef struct ob_tokenizer ob_tokenizer;

#define OB_TOKEN_NULL ((ob_token)-1)

/* The model family, as GGUF's tokenizer.ggml.model names it. */
typedef enum ob_tok_kind {
    OB_TOK_SPM = 0,       /* "llama": SentencePiece BPE, merges chosen by piece score, byte fallback */
    OB_TOK_BPE = 1,       /* "gpt2" / HF BPE: merges by rank, usually byte-level */
    OB_TOK_WPM = 2,       /* "bert" / HF WordPiece: greedy longest match */
    OB_TOK_UGM = 3,       /* "t5" / HF Unigram: Viterbi over piece log-probabilities */
    OB_TOK_WORDLEVEL = 4, /* HF WordLevel: whole words or unk */
} ob_tok_kind;

/* Token types, numbered as in GGUF's tokenizer.ggml.token_type. */
typedef enum ob_token_type {
    OB_TOKTYPE_UNDEFINED = 0,
    OB_TOKTYPE_NORMAL = 1,
    OB_TOKTYPE_UNKNOWN = 2,
    OB_TOKTYPE_CONTROL = 3,      /* special: matched in text only with OB_ENCODE_PARSE_SPECIAL */
    OB_TOKTYPE_USER_DEFINED = 4, /* added, not special: always matched in text */
    OB_TOKTYPE_UNUSED = 5,
    OB_TOKTYPE_BYTE = 6,         /* <0xXX> byte-fallback token */
} ob_token_type;

/* Special token roles. */
typedef enum ob_special {
    OB_SPECIAL_BOS = 0,
    OB_SPECIAL_EOS,
    OB_SPECIAL_EOT,
    OB_SPECIAL_EOM,
    OB_SPECIAL_UNK,
    OB_SPECIAL_PAD,
    OB_SPECIAL_SEP,
    OB_SPECIAL_CLS,
    OB_SPECIAL_MASK,
    OB_SPECIAL_FIM_PRE,
    OB_SPECIAL_FIM_SUF,
    OB_SPECIAL_FIM_MID,
    OB_SPECIAL_FIM_PAD,
    OB_SPECIAL_FIM_REP,
    OB_SPECIAL_FIM_SEP,
    OB_SPECIAL_COUNT,
} ob_special;

/* A growable array of token ids. Zero-initialise; ob_tokens_free releases. */
typedef struct ob_tokens {
    ob_token *ids;
    size_t n;
    size_t cap;
} ob_tokens;

void ob_tokens_free(ob_tokens *t);
/* Append one id, growing as needed (OB_ERR_OOM on failure). */
int ob_tokens_push(ob_tokens *t, ob_token id);

/* ---- construction ---- */

/* From the tokenizer.ggml.* keys of an open GGUF (the GGUF may be freed
 * afterwards: everything is copied). Unknown tokenizer.ggml.pre names fall
 * back to the GPT-2 pre-tokenizer with a warning, as llama.cpp does. */
int ob_tokenizer_from_gguf(const ob_gguf *g, ob_tokenizer **out);

/* From a path that is a tokenizer.json file, or a directory holding either
 * tokenizer.json or vocab.json + merges.txt. tokenizer_config.json (and
 * added_tokens.json, special_tokens_map.json) in the same directory are read
 * when present, for special tokens and add_bos/add_eos. */
int ob_tokenizer_from_json_file(const char *path, ob_tokenizer **out);

/* From tokenizer.json text in memory; config_json (tokenizer_config.json
 * text) may be NULL. */
int ob_tokenizer_from_json_string(const char *json, size_t len, const char *config_json, size_t config_len,
                                  ob_tokenizer **out);

void ob_tokenizer_free(ob_tokenizer *t);

/* ---- encoding ---- */

#define OB_ENCODE_ADD_SPECIAL 1u   /* apply the post-processor: BOS/EOS (or CLS/SEP) per the model */
#define OB_ENCODE_PARSE_SPECIAL 2u /* text like "<|im_start|>" becomes the special token; without the
                                    * flag special tokens are ordinary text (added non-special tokens
                                    * are always matched, as in Hugging Face) */

/* Encode text[0..len) (any bytes: invalid UTF-8 becomes U+FFFD per maximal
 * invalid subsequence, as Python's decode("utf-8", "replace") does) and
 * append the ids to *out. Time and memory are linear in len (BPE merges use
 * a heap per word). Inputs over 1 GiB are refused (OB_ERR_RANGE). Returns 0
 * or a negative status; on failure *out keeps what it held before the call. */
int ob_tokenizer_encode(const ob_tokenizer *t, const char *text, size_t len, unsigned flags, ob_tokens *out);

/* ---- decoding ---- */

#define OB_DECODE_SKIP_SPECIAL 1u /* drop control/special tokens (Hugging Face skip_special_tokens) */
#define OB_DECODE_NO_STRIP 2u     /* keep the leading space SentencePiece-style decoders remove */

/* The bytes one token stands for, without any leading-space rule: byte-level
 * pieces mapped back to bytes, "▁" to space, <0x0A> to the byte 0x0A,
 * WordPiece "##" removed. Writes at most cap bytes to buf and returns the
 * full length (like snprintf, no NUL added), or a negative status for an id
 * out of range. The result may be part of a UTF-8 character. */
int ob_tokenizer_token_bytes(const ob_tokenizer *t, ob_token id, char *buf, size_t cap);

/* Decode a whole sequence the way Hugging Face decode() does (with
 * skip_special_tokens per flags). *out is NUL-terminated valid UTF-8 (broken
 * byte sequences become U+FFFD), allocated with ob_malloc; free with ob_free. */
int ob_tokenizer_decode(const ob_tokenizer *t, const ob_token *ids, size_t n, unsigned flags, char **out,
                        size_t *out_len);

/* Streaming detokenizer: feed ids one at a time and get text that is always
 * complete, valid UTF-8; bytes of a character split across tokens are held
 * until the character is complete. Concatenating every push and the final
 * flush gives exactly ob_tokenizer_decode of the whole sequence. */
typedef struct ob_detok ob_detok;

int ob_detok_create(const ob_tokenizer *t, unsigned flags, ob_detok **out);
void ob_detok_free(ob_detok *d);
/* Add one token. *text / *len receive the newly complete text (possibly
 * empty); the pointer is valid until the next call on d. */
int ob_detok_push(ob_detok *d, ob_token id, const char **text, size_t *len);
/* End of stream: bytes still held (an unfinished character) come out as
 * U+FFFD. The detokenizer is then ready for a new sequence. */
int ob_detok_flush(ob_detok *d, const char **text, size_t *len);
/* Forget everything; the next token is the first of a sequence. */
void ob_detok_reset(ob_detok *d);

/* ---- vocabulary ---- */

/* Number of token ids (the largest id + 1, added tokens included). */
int32_t ob_tokenizer_n_vocab(const ob_tokenizer *t);
ob_tok_kind ob_tokenizer_kind(const ob_tokenizer *t);
/* The pre-tokenizer name (tokenizer.ggml.pre, or "" for tokenizer.json). */
const char *ob_tokenizer_pre_name(const ob_tokenizer *t);
/* The vocabulary text of a token (e.g. "Ġhello", "▁the", "<0x0A>", "##ing"),
 * NUL-terminated (it may also contain NUL bytes: *len is exact); NULL if id is
 * out of range. Points into the tokenizer; valid until ob_tokenizer_free. */
const char *ob_tokenizer_token_text(const ob_tokenizer *t, ob_token id, size_t *len);
/* The id whose vocabulary text is exactly text[0..len), or OB_TOKEN_NULL. */
ob_token ob_tokenizer_find(const ob_tokenizer *t, const char *text, size_t len);
float ob_tokenizer_token_score(const ob_tokenizer *t, ob_token id);
ob_token_type ob_tokenizer_token_type(const ob_tokenizer *t, ob_token id);
/* True for control and other special tokens (Hugging Face "special"). */
bool ob_tokenizer_is_special(const ob_tokenizer *t, ob_token id);
/* The id of a special role, or OB_TOKEN_NULL when the model has none. */
ob_token ob_tokenizer_special(const ob_tokenizer *t, ob_special role);
/* End of generation: EOS, EOT, EOM and the end-of-turn tokens llama.cpp
 * recognises by text (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, ...). */
bool ob_tokenizer_is_eog(const ob_tokenizer *t, ob_token id);
/* Whether OB_ENCODE_ADD_SPECIAL adds a BOS / an EOS for this model. */
bool ob_tokenizer_adds_bos(const ob_tokenizer *t);
bool ob_tokenizer_adds_eos(const ob_tokenizer *t);

/* BPE merges (for writing a GGUF vocabulary): count, and the i-th merge in
 * rank order as two vocabulary texts. Zero merges for other kinds. */
size_t ob_tokenizer_n_merges(const ob_tokenizer *t);
int ob_tokenizer_merge(const ob_tokenizer *t, size_t i, ob_token *left, ob_token *right);

#endif
