/*
 * tok_vocab.c - the vocabulary side of a tokenizer: token storage and the
 * text -> id table, the tries of added tokens, end-of-generation ids, the
 * GPT-2 byte alphabet, the public accessors and ob_tokenizer_free.
 *
 * Token texts are stored back to back in one allocation; the lookup table is
 * open addressing over token ids (hash of the text, compared byte for byte),
 * so building a 150k vocabulary is one pass and a lookup one or two probes.
 */
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"
#include "tok_internal.h"

ob_tokenizer *tk_new(void) {
    ob_tokenizer *t = ob_calloc(1, sizeof *t);
    if (!t) {
        ob_err(OB_ERR_OOM, "tokenizer: out of memory");
        return NULL;
    }
    for (int i = 0; i < OB_SPECIAL_COUNT; i++) t->special[i] = OB_TOKEN_NULL;
    t->model.unk = OB_TOKEN_NULL;
    for (int i = 0; i < 256; i++) t->model.byte_tok[i] = OB_TOKEN_NULL;
    tk_init_bytelevel(t);
    return t;
}

int tk_vocab_alloc(ob_tokenizer *t, int32_t n, size_t strings_bytes) {
    if (n <= 0) return ob_err(OB_ERR_FORMAT, "tokenizer: empty vocabulary");
    t->tokens = ob_calloc((size_t)n, sizeof *t->tokens);
    /* + one NUL per token: texts are stored as C strings too */
    t->strings = ob_malloc(strings_bytes + (size_t)n + 1);
    if (!t->tokens || !t->strings) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (%d tokens)", n);
    t->n_vocab = n;
    t->strings_len = 0;
    return 0;
}

int tk_vocab_index(ob_tokenizer *t) {
    size_t cap = 16;
    while (cap < (size_t)t->n_vocab * 2) cap *= 2;
    ob_free(t->slots);
    t->slots = ob_calloc(cap, sizeof *t->slots);
    if (!t->slots) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (vocabulary index)");
    t->slot_mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tk_token *tk = &t->tokens[id];
        if (tk->len == 0) continue; /* empty texts cannot be looked up */
        size_t j = tk_hash_bytes(t->strings + tk->off, tk->len) & t->slot_mask;
        for (;;) {
            uint32_t s = t->slots[j];
            if (s == 0) {
                t->slots[j] = (uint32_t)id + 1;
                break;
            }
            const tk_token *o = &t->tokens[s - 1];
            if (o->len == tk->len && memcmp(t->strings + o->off, t->strings + tk->off, tk->len) == 0) {
                t->slots[j] = (uint32_t)id + 1; /* duplicate text: the later id wins, as in llama.cpp */
                break;
            }
            j = (j + 1) & t->slot_mask;
        }
    }
    return 0;
}

ob_token tk_find(const ob_tokenizer *t, const char *s, size_t n) {
    if (!t->slots || n == 0) return OB_TOKEN_NULL;
    size_t j = tk_hash_bytes(s, n) & t->slot_mask;
    for (;;) {
        uint32_t v = t->slots[j];
        if (v == 0) return OB_TOKEN_NULL;
        const tk_token *o = &t->tokens[v - 1];
        if (o->len == n && memcmp(t->strings + o->off, s, n) == 0) return (ob_token)(v - 1);
        j = (j + 1) & t->slot_mask;
    }
}

void tk_init_bytelevel(ob_tokenizer *t) {
    /* GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves,
     * the other 68 bytes take code points 256, 257, ... in byte order. */
    for (int i = 0; i < 324; i++) t->cp_to_byte[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint16_t cp = self ? (uint16_t)b : (uint16_t)(256 + n++);
        t->byte_to_cp[b] = cp;
        t->cp_to_byte[cp] = (int16_t)b;
    }
}

int tk_build_added(ob_tokenizer *t) {
    tk_trie_free(&t->added_raw);
    tk_trie_free(&t->added_norm);
    t->n_added_raw = t->n_added_norm = 0;
    tk_work w = {.t = t};
    tk_buf norm = {0};
    int rc = 0;
    bool need_word = false;
    for (int32_t id = 0; id < t->n_vocab && rc == 0; id++) {
        const tk_token *tk = &t->tokens[id];
        if (!(tk->attr & TKA_ADDED) || tk->len == 0) continue;
        const char *s = tk_text(t, id);
        /* A match must never cut a character in two: the pipeline after it
         * relies on valid UTF-8. */
        if (!ob_utf8_valid(s, tk->len)) continue;
        if (tk->attr & TKA_SINGLE_WORD) need_word = true;
        if ((tk->attr & TKA_NORMALIZED) && t->n_norms > 0) {
            norm.n = 0;
            if (!w.match.md && (rc = tk_match_init(&w.match)) < 0) break;
            rc = tk_normalize(&w, s, tk->len, &norm);
            if (rc < 0) break;
            if (norm.n == 0) continue;
            rc = tk_trie_insert(&t->added_norm, norm.p, norm.n, id);
            t->n_added_norm++;
        } else if (tk->attr & TKA_NORMALIZED) {
            rc = tk_trie_insert(&t->added_norm, s, tk->len, id);
            t->n_added_norm++;
        } else {
            rc = tk_trie_insert(&t->added_raw, s, tk->len, id);
            t->n_added_raw++;
        }
    }
    tk_buf_free(&norm);
    tk_work_free(&w);
    if (rc == 0 && need_word && !t->word_re) {
        static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
        rc = tk_regex_compile(word, sizeof word - 1, false, &t->word_re);
    }
    return rc;
}

void tk_find_eog(ob_tokenizer *t) {
    /* Texts that end a turn in popular chat formats; llama.cpp recognises
     * the same ones when a GGUF does not name an EOT token. */
    static const char *const eot_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "<\uFF5Cend\u2581of\u2581sentence\uFF5C>", "<end_of_utterance>",
        "<|eom_id|>", "<|return|>", "<|call|>",
    };
    ob_token found[OB_ARRAY_LEN(eot_texts) + 3];
    size_t n = 0;
    for (size_t i = 0; i < OB_ARRAY_LEN(eot_texts); i++) {
        ob_token id = tk_find(t, eot_texts[i], strlen(eot_texts[i]));
        if (id < 0) continue;
        if (t->special[OB_SPECIAL_EOT] == OB_TOKEN_NULL && i < 10) t->special[OB_SPECIAL_EOT] = id;
        if (t->special[OB_SPECIAL_EOM] == OB_TOKEN_NULL && !strcmp(eot_texts[i], "<|eom_id|>"))
            t->special[OB_SPECIAL_EOM] = id;
        found[n++] = id;
    }
    ob_token roles[3] = {t->special[OB_SPECIAL_EOS], t->special[OB_SPECIAL_EOT], t->special[OB_SPECIAL_EOM]};
    for (int i = 0; i < 3; i++)
        if (roles[i] >= 0) found[n++] = roles[i];
    ob_free(t->eog);
    t->eog = NULL;
    t->n_eog = 0;
    if (n == 0) return;
    t->eog = ob_malloc(n * sizeof *t->eog);
    if (!t->eog) return; /* is_eog then knows only the roles; not fatal */
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t k = 0; k < t->n_eog; k++) dup |= t->eog[k] == found[i];
        if (!dup) t->eog[t->n_eog++] = found[i];
    }
}

void tk_tokenizer_free_parts(ob_tokenizer *t) {
    for (size_t i = 0; i < t->n_norms; i++) tk_norm_clear(&t->norms[i]);
    ob_free(t->norms);
    t->norms = NULL;
    t->n_norms = 0;
    for (size_t i = 0; i < t->n_pres; i++) tk_pre_clear(&t->pres[i]);
    ob_free(t->pres);
    t->pres = NULL;
    t->n_pres = 0;
    for (size_t i = 0; i < t->n_decs; i++) tk_dec_clear(&t->decs[i]);
    ob_free(t->decs);
    t->decs = NULL;
    t->n_decs = 0;
}

void ob_tokenizer_free(ob_tokenizer *t) {
    if (!t) return;
    tk_tokenizer_free_parts(t);
    ob_free(t->tokens);
    ob_free(t->strings);
    ob_free(t->slots);
    ob_free(t->eog);
    tk_trie_free(&t->added_raw);
    tk_trie_free(&t->added_norm);
    tk_regex_free(t->word_re);
    tk_map_free(&t->model.merges);
    ob_free(t->model.merge_pairs);
    ob_free(t->model.cont_prefix);
    ob_free(t->model.eow_suffix);
    ob_free(t->model.wp_first_prefix);
    tk_trie_free(&t->model.ugm_trie);
    ob_free(t->model.ugm_scores);
    ob_free(t);
}

void ob_tokens_free(ob_tokens *t) {
    if (!t) return;
    ob_free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}

int ob_tokens_push(ob_tokens *t, ob_token id) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        ob_token *ids = ob_realloc(t->ids, cap * sizeof *ids);
        if (!ids) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (%zu ids)", cap);
        t->ids = ids;
        t->cap = cap;
    }
    t->ids[t->n++] = id;
    return 0;
}

/* ---- accessors ---- */

int32_t ob_tokenizer_n_vocab(const ob_tokenizer *t) { return t->n_vocab; }
ob_tok_kind ob_tokenizer_kind(const ob_tokenizer *t) { return t->kind; }
const char *ob_tokenizer_pre_name(const ob_tokenizer *t) { return t->pre_name; }

const char *ob_tokenizer_token_text(const ob_tokenizer *t, ob_token id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = t->tokens[id].len;
    return tk_text(t, id);
}

ob_token ob_tokenizer_find(const ob_tokenizer *t, const char *text, size_t len) { return tk_find(t, text, len); }

float ob_tokenizer_token_score(const ob_tokenizer *t, ob_token id) {
    return (id >= 0 && id < t->n_vocab) ? t->tokens[id].score : 0.0f;
}

ob_token_type ob_tokenizer_token_type(const ob_tokenizer *t, ob_token id) {
    return (id >= 0 && id < t->n_vocab) ? (ob_token_type)t->tokens[id].type : OB_TOKTYPE_UNDEFINED;
}

bool ob_tokenizer_is_special(const ob_tokenizer *t, ob_token id) {
    return id >= 0 && id < t->n_vocab && (t->tokens[id].attr & TKA_SPECIAL);
}

ob_token ob_tokenizer_special(const ob_tokenizer *t, ob_special role) {
    return (role >= 0 && role < OB_SPECIAL_COUNT) ? t->special[role] : OB_TOKEN_NULL;
}

bool ob_tokenizer_is_eog(const ob_tokenizer *t, ob_token id) {
    if (id < 0) return false;
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return id == t->special[OB_SPECIAL_EOS] || id == t->special[OB_SPECIAL_EOT] || id == t->special[OB_SPECIAL_EOM];
}

bool ob_tokenizer_adds_bos(const ob_tokenizer *t) { return t->add_bos; }
bool ob_tokenizer_adds_eos(const ob_tokenizer *t) { return t->add_eos; }

size_t ob_tokenizer_n_merges(const ob_tokenizer *t) { return t->model.n_merges; }

int ob_tokenizer_merge(const ob_tokenizer *t, size_t i, ob_token *left, ob_token *right) {
    if (i >= t->model.n_merges) return ob_err(OB_ERR_RANGE, "tokenizer: merge %zu of %zu", i, t->model.n_merges);
    *left = (ob_token)t->model.merge_pairs[2 * i];
    *right = (ob_token)t->model.merge_pairs[2 * i + 1];
    return 0;
}
