/*
 * tokens.c - the token half of the public API (tokenize, pieces, special
 * ids), on top of src/tokenizer. Until the tokenizer module lands, models
 * load without one and these calls say so.
 */
#include "../core/mem.h"
#include "../core/status.h"
#include "../model/model.h"
#include "onebit.h"

int ob_model_load_tokenizer(ob_model_impl *m) {
    m->tok = NULL;
    return 0;
}

void ob_model_free_tokenizer(ob_model_impl *m) { m->tok = NULL; }

int ob_tokenize(const ob_model *m, const char *text, size_t len, bool add_special, bool parse_special, ob_token *ids,
                int32_t n_max, int32_t *n_tokens) {
    (void)m, (void)text, (void)len, (void)add_special, (void)parse_special, (void)ids, (void)n_max;
    *n_tokens = 0;
    return ob_err(OB_ERR_UNSUPPORTED, "this build has no tokenizer yet");
}

int ob_token_to_piece(const ob_model *m, ob_token id, char *buf, int32_t size, bool special, int32_t *len) {
    (void)m, (void)id, (void)buf, (void)size, (void)special;
    *len = 0;
    return ob_err(OB_ERR_UNSUPPORTED, "this build has no tokenizer yet");
}

ob_token ob_token_bos(const ob_model *m) {
    uint32_t id;
    if (ob_gguf_get_u32(m->gguf, "tokenizer.ggml.bos_token_id", &id) < 0) return -1;
    return (ob_token)id;
}

ob_token ob_token_eos(const ob_model *m) {
    uint32_t id;
    if (ob_gguf_get_u32(m->gguf, "tokenizer.ggml.eos_token_id", &id) < 0) return -1;
    return (ob_token)id;
}

bool ob_token_is_eog(const ob_model *m, ob_token id) { return id >= 0 && id == ob_token_eos(m); }

/* ---- placeholders until src/tokenizer and src/chat are wired in ---- */

int ob_detokenize(const ob_model *m, const ob_token *ids, int32_t n, bool skip_special, char **out, size_t *len) {
    (void)m, (void)ids, (void)n, (void)skip_special;
    *out = NULL;
    *len = 0;
    return ob_err(OB_ERR_UNSUPPORTED, "this build has no tokenizer yet");
}

void ob_free_string(char *s) { ob_free(s); }

struct ob_detokenizer {
    int unused;
};

int ob_detokenizer_create(const ob_model *m, bool skip_special, ob_detokenizer **out) {
    (void)m, (void)skip_special;
    *out = NULL;
    return ob_err(OB_ERR_UNSUPPORTED, "this build has no tokenizer yet");
}

int ob_detokenizer_push(ob_detokenizer *d, ob_token id, const char **text, size_t *len) {
    (void)d, (void)id;
    *text = "";
    *len = 0;
    return ob_err(OB_ERR_UNSUPPORTED, "this build has no tokenizer yet");
}

int ob_detokenizer_flush(ob_detokenizer *d, const char **text, size_t *len) {
    (void)d;
    *text = "";
    *len = 0;
    return 0;
}

void ob_detokenizer_free(ob_detokenizer *d) { ob_free(d); }

const char *ob_model_chat_template(const ob_model *m) {
    const char *t = NULL;
    if (ob_gguf_get_str(m->gguf, "tokenizer.chat_template", &t) < 0) {
        ob_err_clear();
        return NULL;
    }
    return t;
}

int ob_chat_render(const ob_model *m, const char *template_text, const char *context_json, size_t len, char **out,
                   size_t *out_len) {
    (void)m, (void)template_text, (void)context_json, (void)len;
    *out = NULL;
    *out_len = 0;
    return ob_err(OB_ERR_UNSUPPORTED, "this build has no chat template engine yet");
}
