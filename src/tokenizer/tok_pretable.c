/*
 * tok_pretable.c - what each GGUF tokenizer.ggml.pre name means.
 *
 * A GGUF "gpt2" vocabulary names its pre-tokenizer only by a string; the
 * pipeline behind each name is the one the original model's tokenizer.json
 * declares (normalizer + pre_tokenizer + ignore_merges). Regexes were taken
 * from those declarations (llama.cpp's src/llama-vocab.cpp quotes most of
 * them as "original regex from tokenizer.json"; it then adapts some for its
 * own regex engine, which we do not need: PCRE2 takes the originals).
 * Non-ASCII characters are written as \u escapes so no editor or tool can
 * normalise them: DeepSeek's letter class contains U+1F7D, U+1FD3, U+1FDB,
 * U+1FBE, U+2126 and U+212A, which NFC would turn into other characters
 * (and one range into an empty one).
 *
 * The entries are built as Hugging Face JSON and go through the same parser
 * as tokenizer.json files, so one code path serves both sources; the same
 * table lives in scripts/gen_tokenizer_fixtures.py, which produced the
 * reference ids, and tests/test_tokenizer_hf.c checks that the two agree.
 */
#include <string.h>

#include "../core/status.h"
#include "tok_internal.h"

enum step_kind {
    STEP_SPLIT,            /* Split(Regex, Isolated) */
    STEP_BYTELEVEL,        /* ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=false) */
    STEP_BYTELEVEL_NOTRIM, /* the same with trim_offsets=false (offsets only; kept to match the JSON) */
    STEP_BYTELEVEL_REGEX,  /* ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=true) */
    STEP_DIGITS,           /* Digits(individual_digits=true) */
    STEP_DIGITS_RUNS,      /* Digits(individual_digits=false) */
    STEP_PUNCT_CONTIGUOUS, /* Punctuation(Contiguous) */
};

typedef struct pre_step {
    enum step_kind kind;
    const char *regex;
} pre_step;

typedef struct pre_entry {
    const char *const *names;
    bool nfc;
    bool ignore_merges;
    bool sequence; /* the declaration is a Sequence even with one step */
    int n_steps;
    pre_step steps[8];
} pre_entry;

static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_NEWLINE[] =
    "[\r\n]";
static const char RE_DSLLM_LETTERS[] =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+";
static const char RE_DSLLM_PUNCT[] =
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
static const char RE_TRAILING_WS[] =
    "\\s+$";
static const char RE_CJK_DS[] =
    "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";
static const char RE_SPACE_LETTERS[] =
    "\\s?\\p{L}+";
static const char RE_SPACE_PUNCT[] =
    "\\s?\\p{P}+";
static const char RE_DIGITS3[] =
    "\\p{N}{1,3}";
static const char RE_CJK_KANA[] =
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
static const char RE_DS3[] =
    "[!\\\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_DIGIT_TRIPLES[] =
    "[0-9][0-9][0-9]";
static const char RE_TEKKEN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_BLOOM[] =
    " ?[^(\\s|[.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C])]+";
static const char RE_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_SEED_CODER[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_DEFAULT_PUNCT[] =
    "[\\p{P}\\$\\+<=>\\^~\\|]+";
static const char RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_DIGIT_RUNS[] =
    "\\p{N}+";

static const char *const N0[] = {"gpt-2", "phi-2", "gpt2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "roberta-bpe", NULL};
static const char *const N1[] = {"mpt", "olmo", NULL};
static const char *const N2[] = {"starcoder", "refact", "smollm", "codeshell", NULL};
static const char *const N3[] = {"command-r", NULL};
static const char *const N4[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", NULL};
static const char *const N5[] = {"dbrx", "smaug-bpe", "chatglm4", "glm4", "chatglm-bpe", NULL};
static const char *const N6[] = {"qwen2", "deepseek-r1-qwen", "megrez", NULL};
static const char *const N7[] = {"deepseek-llm", NULL};
static const char *const N8[] = {"deepseek-coder", NULL};
static const char *const N9[] = {"deepseek-v3", NULL};
static const char *const N10[] = {"falcon", NULL};
static const char *const N11[] = {"tekken", NULL};
static const char *const N12[] = {"bloom", "poro-chat", "gpt3-finnish", NULL};
static const char *const N13[] = {"gpt-4o", "llama4", NULL};
static const char *const N14[] = {"seed-coder", NULL};
static const char *const N15[] = {"default", NULL};

static const pre_entry TABLE[] = {
    {N0, false, false, false, 1, {{STEP_BYTELEVEL_REGEX, NULL}}},
    {N1, true, false, false, 1, {{STEP_BYTELEVEL_REGEX, NULL}}},
    {N2, false, false, true, 2, {{STEP_DIGITS, NULL}, {STEP_BYTELEVEL_REGEX, NULL}}},
    {N3, true, false, true, 2, {{STEP_DIGITS, NULL}, {STEP_BYTELEVEL_REGEX, NULL}}},
    {N4, false, true, true, 2, {{STEP_SPLIT, RE_LLAMA3}, {STEP_BYTELEVEL, NULL}}},
    {N5, false, false, true, 2, {{STEP_SPLIT, RE_LLAMA3}, {STEP_BYTELEVEL, NULL}}},
    {N6, true, false, true, 2, {{STEP_SPLIT, RE_QWEN2}, {STEP_BYTELEVEL_NOTRIM, NULL}}},
    {N7, false, false, true, 7, {{STEP_SPLIT, RE_NEWLINE}, {STEP_SPLIT, RE_DSLLM_LETTERS}, {STEP_SPLIT, RE_DSLLM_PUNCT}, {STEP_SPLIT, RE_TRAILING_WS}, {STEP_SPLIT, RE_CJK_DS}, {STEP_DIGITS, NULL}, {STEP_BYTELEVEL, NULL}}},
    {N8, false, false, true, 6, {{STEP_SPLIT, RE_NEWLINE}, {STEP_SPLIT, RE_SPACE_LETTERS}, {STEP_SPLIT, RE_SPACE_PUNCT}, {STEP_SPLIT, RE_CJK_DS}, {STEP_DIGITS, NULL}, {STEP_BYTELEVEL, NULL}}},
    {N9, false, false, true, 4, {{STEP_SPLIT, RE_DIGITS3}, {STEP_SPLIT, RE_CJK_KANA}, {STEP_SPLIT, RE_DS3}, {STEP_BYTELEVEL, NULL}}},
    {N10, false, false, true, 4, {{STEP_PUNCT_CONTIGUOUS, NULL}, {STEP_BYTELEVEL_REGEX, NULL}, {STEP_DIGITS_RUNS, NULL}, {STEP_SPLIT, RE_DIGIT_TRIPLES}}},
    {N11, false, true, true, 2, {{STEP_SPLIT, RE_TEKKEN}, {STEP_BYTELEVEL, NULL}}},
    {N12, false, false, true, 2, {{STEP_SPLIT, RE_BLOOM}, {STEP_BYTELEVEL, NULL}}},
    {N13, false, false, true, 2, {{STEP_SPLIT, RE_O200K}, {STEP_BYTELEVEL, NULL}}},
    {N14, false, false, true, 2, {{STEP_SPLIT, RE_SEED_CODER}, {STEP_BYTELEVEL, NULL}}},
    {N15, false, false, true, 5, {{STEP_SPLIT, RE_DEFAULT_PUNCT}, {STEP_SPLIT, RE_GPT2}, {STEP_SPLIT, RE_DIGIT_RUNS}, {STEP_SPLIT, RE_DIGIT_TRIPLES}, {STEP_BYTELEVEL, NULL}}},
};

static json_t *step_json(const pre_step *s) {
    switch (s->kind) {
    case STEP_SPLIT:
        return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", s->regex, "behavior",
                         "Isolated", "invert", 0);
    case STEP_BYTELEVEL:
    case STEP_BYTELEVEL_NOTRIM:
    case STEP_BYTELEVEL_REGEX:
        return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets",
                         s->kind != STEP_BYTELEVEL_NOTRIM, "use_regex", s->kind == STEP_BYTELEVEL_REGEX);
    case STEP_DIGITS:
    case STEP_DIGITS_RUNS:
        return json_pack("{s:s, s:b}", "type", "Digits", "individual_digits", s->kind == STEP_DIGITS);
    case STEP_PUNCT_CONTIGUOUS: return json_pack("{s:s, s:s}", "type", "Punctuation", "behavior", "Contiguous");
    }
    return NULL;
}

int tk_pre_spec_json(const char *name, json_t **normalizer, json_t **pre_tokenizer, bool *ignore_merges) {
    *normalizer = *pre_tokenizer = NULL;
    for (size_t i = 0; i < OB_ARRAY_LEN(TABLE); i++) {
        const pre_entry *e = &TABLE[i];
        bool hit = false;
        for (const char *const *n = e->names; *n && !hit; n++) hit = !strcmp(*n, name);
        if (!hit) continue;
        json_t *pre;
        if (!e->sequence) {
            pre = step_json(&e->steps[0]);
        } else {
            json_t *list = json_array();
            for (int k = 0; list && k < e->n_steps; k++)
                if (json_array_append_new(list, step_json(&e->steps[k])) < 0) {
                    json_decref(list);
                    list = NULL;
                }
            pre = list ? json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", list) : NULL;
        }
        json_t *norm = e->nfc ? json_pack("{s:s}", "type", "NFC") : NULL;
        if (!pre || (e->nfc && !norm)) {
            json_decref(pre);
            json_decref(norm);
            return ob_err(OB_ERR_OOM, "tokenizer: out of memory (pre-tokenizer %s)", name);
        }
        *normalizer = norm;
        *pre_tokenizer = pre;
        *ignore_merges = e->ignore_merges;
        return 0;
    }
    return OB_ERR_NOT_FOUND;
}

const char *const *tk_pre_spec_names(size_t i) { return i < OB_ARRAY_LEN(TABLE) ? TABLE[i].names : NULL; }
