/*
 * tok_gguf.c - a tokenizer from a GGUF file's tokenizer.ggml.* keys.
 *
 * The keys describe the vocabulary (tokens, scores, token types, merges) but
 * the pipeline only by name: tokenizer.ggml.model picks the model and, for
 * "gpt2", tokenizer.ggml.pre names the pre-tokenizer. Each is rebuilt here
 * as the steps the original Hugging Face tokenizer runs, so that GGUF and
 * tokenizer.json sources share one encoder:
 *   llama -> Prepend("▁") + Replace(" ", "▁"), SentencePiece BPE by score
 *   gpt2  -> normalizer + pre-tokenizer from tok_pretable.c, BPE by rank
 *   bert  -> BertNormalizer + BertPreTokenizer, WordPiece ("▁" marks words)
 *   t5    -> SentencePiece charsmap normalizer, Unigram
 * Control, unknown and user-defined token types become added tokens (the
 * first two special), which is how llama.cpp and Hugging Face both match
 * them in text. Arrays that disagree in length, ids out of range or a
 * corrupt charsmap are OB_ERR_FORMAT, never a crash.
 */
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../gguf/gguf.h"
#include "tok_internal.h"

#define KEY(k) "tokenizer.ggml." k

/* Integer element i of a GGUF array of any integer type. */
static bool arr_int(const ob_gguf_array *a, uint64_t i, int64_t *v) {
    switch (a->type) {
    case OB_GGUF_I8: *v = ((const int8_t *)a->data)[i]; return true;
    case OB_GGUF_U8: *v = ((const uint8_t *)a->data)[i]; return true;
    case OB_GGUF_I16: *v = ((const int16_t *)a->data)[i]; return true;
    case OB_GGUF_U16: *v = ((const uint16_t *)a->data)[i]; return true;
    case OB_GGUF_I32: *v = ((const int32_t *)a->data)[i]; return true;
    case OB_GGUF_U32: *v = ((const uint32_t *)a->data)[i]; return true;
    case OB_GGUF_I64: *v = ((const int64_t *)a->data)[i]; return true;
    case OB_GGUF_U64: *v = (int64_t)((const uint64_t *)a->data)[i]; return true;
    default: return false;
    }
}

static bool get_bool(const ob_gguf *g, const char *key, bool dflt) {
    bool v;
    if (ob_gguf_get_bool(g, key, &v) == 0) return v;
    ob_err_clear();
    return dflt;
}

static ob_token get_id(const ob_gguf *g, const ob_tokenizer *t, const char *key) {
    uint32_t v;
    if (ob_gguf_get_u32(g, key, &v) < 0) {
        ob_err_clear();
        return OB_TOKEN_NULL;
    }
    if (v == UINT32_MAX) return OB_TOKEN_NULL; /* -1 written as unsigned: "none" */
    if (v >= (uint32_t)t->n_vocab) {
        OB_LOGW("tokenizer: %s = %u is outside the vocabulary of %d; ignored", key, v, t->n_vocab);
        return OB_TOKEN_NULL;
    }
    return (ob_token)v;
}

static int add_norm(ob_tokenizer *t, tk_norm **nm) {
    tk_norm *v = ob_realloc(t->norms, (t->n_norms + 1) * sizeof *v);
    if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    t->norms = v;
    *nm = &v[t->n_norms++];
    memset(*nm, 0, sizeof **nm);
    return 0;
}

static int add_dec(ob_tokenizer *t, int kind, tk_dec **out) {
    tk_dec *v = ob_realloc(t->decs, (t->n_decs + 1) * sizeof *v);
    if (!v) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    t->decs = v;
    tk_dec *d = &v[t->n_decs++];
    memset(d, 0, sizeof *d);
    d->kind = kind;
    if (out) *out = d;
    return 0;
}

static int copy_str(const char *s, size_t n, char **dst, size_t *len) {
    *dst = ob_malloc(n + 1);
    if (!*dst) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    memcpy(*dst, s, n);
    (*dst)[n] = 0;
    *len = n;
    return 0;
}

/* Spaces as U+2581 (and one prepended), then decoding them back: the
 * SentencePiece conventions as llama.cpp and HF's legacy Llama apply them. */
static int spm_pipeline(ob_tokenizer *t, bool add_space_prefix) {
    tk_norm *nm = NULL;
    if (add_space_prefix) {
        OB_TRY(add_norm(t, &nm));
        nm->kind = TN_PREPEND;
        OB_TRY(copy_str("\xE2\x96\x81", 3, &nm->content, &nm->content_len));
    }
    OB_TRY(add_norm(t, &nm));
    nm->kind = TN_REPLACE;
    OB_TRY(copy_str(" ", 1, &nm->pattern, &nm->pattern_len));
    OB_TRY(copy_str("\xE2\x96\x81", 3, &nm->content, &nm->content_len));
    tk_dec *d = NULL;
    OB_TRY(add_dec(t, TD_REPLACE, &d));
    OB_TRY(copy_str("\xE2\x96\x81", 3, &d->a, &d->a_len));
    OB_TRY(copy_str(" ", 1, &d->b, &d->b_len));
    OB_TRY(add_dec(t, TD_BYTE_FALLBACK, NULL));
    OB_TRY(add_dec(t, TD_FUSE, NULL));
    if (add_space_prefix) {
        OB_TRY(add_dec(t, TD_STRIP, &d));
        d->ch = ' ';
        d->start = 1;
        d->whole = true;
    }
    return 0;
}

/* Byte-level BPE: the pipeline named by tokenizer.ggml.pre and the merges,
 * turned into (left id, right id) -> (rank, merged id). Merges naming a
 * token that does not exist are skipped with a warning (the rank of the
 * others stays their line number, so the order is kept). */
static int bpe_pipeline(ob_tokenizer *t, const ob_gguf *g, const char *pre) {
    json_t *norm = NULL, *pt = NULL;
    bool ignore = false;
    const char *name = pre;
    int rc = pre ? tk_pre_spec_json(pre, &norm, &pt, &ignore) : OB_ERR_NOT_FOUND;
    if (rc == OB_ERR_NOT_FOUND) {
        OB_LOGW("tokenizer: %s pre-tokenizer '%s'; using GPT-2's", pre ? "unknown" : "no", pre ? pre : "");
        name = "gpt-2";
        rc = tk_pre_spec_json(name, &norm, &pt, &ignore);
    }
    if (rc == 0) rc = tk_json_normalizer(t, norm);
    if (rc == 0) rc = tk_json_pre_tokenizer(t, pt);
    json_decref(norm);
    json_decref(pt);
    OB_TRY(rc);
    t->model.ignore_merges = ignore;
    tk_dec *bl = NULL;
    OB_TRY(add_dec(t, TD_BYTELEVEL, &bl));
    bl->added_raw = true; /* llama.cpp copies USER_DEFINED and control pieces as they are */

    const ob_gguf_array *m;
    if (ob_gguf_get_arr(g, KEY("merges"), OB_GGUF_STRING, &m) < 0) return ob_err_wrap(OB_ERR_FORMAT, "gpt2 vocabulary");
    const ob_gguf_str *ms = m->data;
    OB_TRY(tk_map_init(&t->model.merges, m->n));
    t->model.merge_pairs = ob_malloc((m->n ? m->n : 1) * 2 * sizeof *t->model.merge_pairs);
    if (!t->model.merge_pairs) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (%llu merges)", (unsigned long long)m->n);
    tk_buf both = {0};
    size_t bad = 0, k = 0;
    for (uint64_t i = 0; i < m->n; i++) {
        const char *s = ms[i].s;
        size_t n = ms[i].len;
        const char *sp = memchr(s, ' ', n);
        ob_token a = OB_TOKEN_NULL, b = OB_TOKEN_NULL, r = OB_TOKEN_NULL;
        if (sp) {
            a = tk_find(t, s, (size_t)(sp - s));
            b = tk_find(t, sp + 1, n - (size_t)(sp - s) - 1);
            both.n = 0;
            if (tk_buf_put(&both, s, (size_t)(sp - s)) < 0 || tk_buf_put(&both, sp + 1, n - (size_t)(sp - s) - 1) < 0) {
                tk_buf_free(&both);
                return OB_ERR_OOM;
            }
            r = tk_find(t, both.p, both.n);
        }
        if (a < 0 || b < 0 || r < 0) {
            bad++;
            continue;
        }
        t->model.merge_pairs[2 * k] = (uint32_t)a;
        t->model.merge_pairs[2 * k + 1] = (uint32_t)b;
        /* Rank = position in the file, kept even when earlier lines were skipped. */
        int rc2 = tk_map_put(&t->model.merges, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, (i << 32) | (uint32_t)r);
        if (rc2 < 0) {
            tk_buf_free(&both);
            return rc2;
        }
        k++;
    }
    tk_buf_free(&both);
    t->model.n_merges = k;
    if (bad) OB_LOGW("tokenizer: %zu of %llu merges name tokens missing from the vocabulary; skipped", bad,
                     (unsigned long long)m->n);
    snprintf(t->pre_name, sizeof t->pre_name, "%s", pre ? pre : "");
    return 0;
}

/* BERT: BertNormalizer + BertPreTokenizer + WordPiece over llama.cpp's
 * "▁word" / "piece" vocabulary form. */
static int wpm_pipeline(ob_tokenizer *t, const ob_gguf *g) {
    tk_norm *nm = NULL;
    OB_TRY(add_norm(t, &nm));
    nm->kind = TN_BERT;
    nm->clean_text = true;
    nm->chinese_chars = true;
    nm->lowercase = get_bool(g, KEY("normalizer.lowercase"), true);
    nm->strip_accents = get_bool(g, KEY("normalizer.strip_accents"), nm->lowercase);
    tk_pre *p = ob_calloc(1, sizeof *p);
    if (!p) return ob_err(OB_ERR_OOM, "tokenizer: out of memory");
    p->kind = TP_BERT;
    t->pres = p;
    t->n_pres = 1;
    tk_model *m = &t->model;
    OB_TRY(copy_str("\xE2\x96\x81", 3, &m->wp_first_prefix, &m->wp_first_prefix_len));
    OB_TRY(copy_str("", 0, &m->cont_prefix, &m->cont_prefix_len));
    m->wp_max_chars = 100;
    tk_dec *d = NULL;
    OB_TRY(add_dec(t, TD_WORDPIECE, &d));
    d->phantom = true;
    d->cleanup = true;
    return 0;
}

/* T5-style Unigram: sentencepiece's normalizer (charsmap + whitespace
 * rules) feeding Viterbi; no pre-tokenizer, as sentencepiece has none. */
static int ugm_pipeline(ob_tokenizer *t, const ob_gguf *g, bool add_space_prefix) {
    tk_norm *nm = NULL;
    OB_TRY(add_norm(t, &nm));
    nm->kind = TN_SPM_CHARSMAP;
    nm->add_space_prefix = add_space_prefix;
    nm->remove_extra_ws = get_bool(g, KEY("remove_extra_whitespaces"), false);
    nm->escape_ws = true;
    nm->ws_suffix = false;
    const ob_gguf_array *cm;
    if (ob_gguf_get_arr(g, KEY("precompiled_charsmap"), -1, &cm) == 0) {
        if (cm->type != OB_GGUF_U8 && cm->type != OB_GGUF_I8)
            return ob_err(OB_ERR_FORMAT, "tokenizer.ggml.precompiled_charsmap must be a byte array");
        if (cm->n > 0) OB_TRY(tk_charsmap_load(&nm->cmap, cm->data, cm->n));
    } else {
        ob_err_clear();
    }
    tk_dec *d = NULL;
    OB_TRY(add_dec(t, TD_METASPACE, &d));
    d->ch = 0x2581;
    d->prepend_scheme = add_space_prefix ? TK_PREPEND_ALWAYS : TK_PREPEND_NEVER;
    OB_TRY(add_dec(t, TD_BYTE_FALLBACK, NULL));
    OB_TRY(add_dec(t, TD_FUSE, NULL));
    return tk_ugm_build(t, false);
}

/* Tokens that llama.cpp gives strip flags by model name, since GGUF has no
 * per-token lstrip/rstrip (Phi-3's chat tokens swallow the newline after
 * them; Jina's <mask> the space before it). */
static void strip_fixups(ob_tokenizer *t, const ob_gguf *g, const char *pre) {
    const char *name = NULL;
    if (ob_gguf_get_str(g, "general.name", &name) < 0) ob_err_clear();
    bool phi3 = name && (strstr(name, "phi-3") || strstr(name, "Phi-3") || strstr(name, "phi3") || strstr(name, "Phi3"));
    if (phi3) {
        for (int32_t id = 0; id < t->n_vocab; id++)
            if (t->tokens[id].attr & TKA_ADDED) t->tokens[id].attr |= TKA_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < OB_ARRAY_LEN(keep); i++) {
            ob_token id = tk_find(t, keep[i], strlen(keep[i]));
            if (id >= 0) t->tokens[id].attr &= (uint8_t)~TKA_RSTRIP;
        }
        ob_token eos = tk_find(t, "</s>", 4);
        if (eos >= 0) t->tokens[eos].attr |= TKA_RSTRIP;
    }
    if (pre && (!strcmp(pre, "jina-v2-de") || !strcmp(pre, "jina-v2-es") || !strcmp(pre, "jina-v2-code"))) {
        ob_token id = tk_find(t, "<mask>", 6);
        if (id >= 0) t->tokens[id].attr |= TKA_LSTRIP;
    }
}

/* Read tokens/scores/types (checking the arrays agree), the special ids,
 * then build the model's pipeline and post-processor. */
static int load(ob_tokenizer *t, const ob_gguf *g) {
    const char *model;
    OB_TRY(ob_gguf_get_str(g, KEY("model"), &model));
    const ob_gguf_array *toks, *scores = NULL, *types = NULL;
    OB_TRY(ob_gguf_get_arr(g, KEY("tokens"), OB_GGUF_STRING, &toks));
    if (toks->n == 0 || toks->n > INT32_MAX - 1) return ob_err(OB_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens", (unsigned long long)toks->n);
    if (ob_gguf_get_arr(g, KEY("scores"), -1, &scores) < 0) {
        ob_err_clear();
        scores = NULL;
    } else if ((scores->type != OB_GGUF_F32 && scores->type != OB_GGUF_F64) || scores->n != toks->n) {
        return ob_err(OB_ERR_FORMAT, "tokenizer.ggml.scores: %llu values for %llu tokens (or not floats)",
                      (unsigned long long)scores->n, (unsigned long long)toks->n);
    }
    if (ob_gguf_get_arr(g, KEY("token_type"), -1, &types) < 0) {
        ob_err_clear();
        types = NULL;
    } else if (types->n != toks->n) {
        return ob_err(OB_ERR_FORMAT, "tokenizer.ggml.token_type: %llu values for %llu tokens",
                      (unsigned long long)types->n, (unsigned long long)toks->n);
    }
    const ob_gguf_str *ts = toks->data;
    size_t bytes = 0;
    for (uint64_t i = 0; i < toks->n; i++) bytes += ts[i].len;
    OB_TRY(tk_vocab_alloc(t, (int32_t)toks->n, bytes));
    for (uint64_t i = 0; i < toks->n; i++) {
        tk_token *tk = &t->tokens[i];
        tk->off = (uint32_t)t->strings_len;
        tk->len = (uint32_t)ts[i].len;
        memcpy(t->strings + t->strings_len, ts[i].s, ts[i].len);
        t->strings[t->strings_len + ts[i].len] = 0; /* every text is also a C string */
        t->strings_len += ts[i].len + 1;
        if (scores)
            tk->score = scores->type == OB_GGUF_F32 ? ((const float *)scores->data)[i]
                                                    : (float)((const double *)scores->data)[i];
        int64_t ty = OB_TOKTYPE_NORMAL;
        if (types && !arr_int(types, i, &ty))
            return ob_err(OB_ERR_FORMAT, "tokenizer.ggml.token_type must hold integers");
        if (ty < 0 || ty > OB_TOKTYPE_BYTE) ty = OB_TOKTYPE_UNDEFINED;
        tk->type = (uint8_t)ty;
        tk->attr = TKA_MODEL;
        if (ty == OB_TOKTYPE_CONTROL || ty == OB_TOKTYPE_UNKNOWN) tk->attr |= TKA_ADDED | TKA_SPECIAL;
        if (ty == OB_TOKTYPE_USER_DEFINED) tk->attr |= TKA_ADDED;
        if (ty == OB_TOKTYPE_BYTE && tk->len == 6 && !memcmp(ts[i].s, "<0x", 3) && ts[i].s[5] == '>') {
            unsigned v = 0;
            bool ok = true;
            for (int k = 3; k < 5; k++) {
                char c = ts[i].s[k];
                int dgt = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
                if (dgt < 0) ok = false;
                v = v * 16 + (unsigned)(dgt < 0 ? 0 : dgt);
            }
            if (ok && t->model.byte_tok[v] < 0) t->model.byte_tok[v] = (ob_token)i;
        }
    }
    OB_TRY(tk_vocab_index(t));

    static const struct {
        const char *key;
        ob_special role;
    } roles[] = {{KEY("bos_token_id"), OB_SPECIAL_BOS},      {KEY("eos_token_id"), OB_SPECIAL_EOS},
                 {KEY("eot_token_id"), OB_SPECIAL_EOT},      {KEY("eom_token_id"), OB_SPECIAL_EOM},
                 {KEY("unknown_token_id"), OB_SPECIAL_UNK},  {KEY("seperator_token_id"), OB_SPECIAL_SEP},
                 {KEY("padding_token_id"), OB_SPECIAL_PAD},  {KEY("cls_token_id"), OB_SPECIAL_CLS},
                 {KEY("mask_token_id"), OB_SPECIAL_MASK},    {KEY("fim_pre_token_id"), OB_SPECIAL_FIM_PRE},
                 {KEY("fim_suf_token_id"), OB_SPECIAL_FIM_SUF}, {KEY("fim_mid_token_id"), OB_SPECIAL_FIM_MID},
                 {KEY("fim_pad_token_id"), OB_SPECIAL_FIM_PAD}, {KEY("fim_rep_token_id"), OB_SPECIAL_FIM_REP},
                 {KEY("fim_sep_token_id"), OB_SPECIAL_FIM_SEP}, {KEY("prefix_token_id"), OB_SPECIAL_FIM_PRE},
                 {KEY("suffix_token_id"), OB_SPECIAL_FIM_SUF},  {KEY("middle_token_id"), OB_SPECIAL_FIM_MID}};
    for (size_t i = 0; i < OB_ARRAY_LEN(roles); i++) {
        ob_token id = get_id(g, t, roles[i].key);
        if (id >= 0) t->special[roles[i].role] = id;
    }
    if (t->special[OB_SPECIAL_UNK] < 0)
        for (int32_t id = 0; id < t->n_vocab && t->special[OB_SPECIAL_UNK] < 0; id++)
            if (t->tokens[id].type == OB_TOKTYPE_UNKNOWN) t->special[OB_SPECIAL_UNK] = id;
    t->model.unk = t->special[OB_SPECIAL_UNK];

    const char *pre = NULL;
    if (ob_gguf_get_str(g, KEY("pre"), &pre) < 0) {
        ob_err_clear();
        pre = NULL;
    }
    bool add_bos = false, add_eos = false, add_sep = false;
    bool space_prefix = get_bool(g, KEY("add_space_prefix"), true);
    if (!strcmp(model, "llama")) {
        t->kind = OB_TOK_SPM;
        OB_TRY(spm_pipeline(t, space_prefix));
        t->model.spm_words = tk_spm_check_words(t);
        add_bos = true;
    } else if (!strcmp(model, "gpt2")) {
        t->kind = OB_TOK_BPE;
        OB_TRY(bpe_pipeline(t, g, pre));
        add_bos = pre && (!strcmp(pre, "llama3") || !strcmp(pre, "llama-v3") || !strcmp(pre, "llama-bpe") ||
                          !strcmp(pre, "falcon3") || !strcmp(pre, "tekken") || !strcmp(pre, "chameleon"));
    } else if (!strcmp(model, "bert")) {
        t->kind = OB_TOK_WPM;
        OB_TRY(wpm_pipeline(t, g));
        add_bos = add_sep = true;
    } else if (!strcmp(model, "t5")) {
        t->kind = OB_TOK_UGM;
        OB_TRY(ugm_pipeline(t, g, space_prefix));
        add_eos = true;
    } else {
        return ob_err(OB_ERR_UNSUPPORTED, "tokenizer.ggml.model '%s' is not supported (llama, gpt2, bert, t5 are)",
                      model);
    }
    if (t->kind != OB_TOK_BPE) snprintf(t->pre_name, sizeof t->pre_name, "%s", pre ? pre : "");
    add_bos = get_bool(g, KEY("add_bos_token"), add_bos);
    add_eos = get_bool(g, KEY("add_eos_token"), add_eos);
    add_sep = get_bool(g, KEY("add_sep_token"), add_sep);
    if (t->kind == OB_TOK_WPM) {
        /* [CLS] A [SEP]: BERT vocabularies name CLS/SEP, older ones BOS/EOS. */
        ob_token cls = t->special[OB_SPECIAL_CLS] >= 0 ? t->special[OB_SPECIAL_CLS] : t->special[OB_SPECIAL_BOS];
        ob_token sep = t->special[OB_SPECIAL_SEP] >= 0 ? t->special[OB_SPECIAL_SEP] : t->special[OB_SPECIAL_EOS];
        if (add_bos && cls >= 0) t->post_prefix[t->n_post_prefix++] = cls;
        if (add_sep && sep >= 0) t->post_suffix[t->n_post_suffix++] = sep;
    } else {
        if (add_bos && t->special[OB_SPECIAL_BOS] >= 0) t->post_prefix[t->n_post_prefix++] = t->special[OB_SPECIAL_BOS];
        if (add_eos && t->special[OB_SPECIAL_EOS] >= 0) t->post_suffix[t->n_post_suffix++] = t->special[OB_SPECIAL_EOS];
    }
    t->add_bos = t->n_post_prefix > 0;
    t->add_eos = t->n_post_suffix > 0;
    strip_fixups(t, g, pre);
    tk_find_eog(t);
    return tk_build_added(t);
}

int ob_tokenizer_from_gguf(const ob_gguf *g, ob_tokenizer **out) {
    *out = NULL;
    if (!g) return ob_err(OB_ERR_INVALID_ARG, "ob_tokenizer_from_gguf: NULL file");
    ob_tokenizer *t = tk_new();
    if (!t) return OB_ERR_OOM;
    int rc = load(t, g);
    if (rc < 0) {
        ob_tokenizer_free(t);
        return ob_err_wrap(rc, "GGUF tokenizer");
    }
    *out = t;
    return 0;
}
