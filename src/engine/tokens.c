/*
 * tokens.c - the token and chat-template half of the public API, on top of
 * src/tokenizer and src/chat.
 *
 * A model without tokenizer.ggml.* keys loads without a tokenizer (ids-only
 * use such as `1bit eval --ids` still works); the text calls then say so.
 * The model's chat template is parsed once, on first use, under a lock,
 * since HTTP threads render concurrently.
 */
#include <jansson.h>
#include <pthread.h>
#include <string.h>

#include "../chat/chat.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../model/model.h"
#include "../tokenizer/tokenizer.h"
#include "onebit.h"

static pthread_mutex_t g_tmpl_lock = PTHREAD_MUTEX_INITIALIZER;

int ob_model_load_tokenizer(ob_model_impl *m) {
    m->tok = NULL;
    if (!ob_gguf_get(m->gguf, "tokenizer.ggml.model")) return 0;
    return ob_tokenizer_from_gguf(m->gguf, &m->tok);
}

void ob_model_free_tokenizer(ob_model_impl *m) {
    ob_tokenizer_free(m->tok);
    m->tok = NULL;
    ob_chat_template_free(m->chat_tmpl);
    m->chat_tmpl = NULL;
}

static int need_tok(const ob_model *m) {
    if (!m->tok) return ob_err(OB_ERR_UNSUPPORTED, "model '%s' has no tokenizer (no tokenizer.ggml.* keys)", m->name);
    return 0;
}

int ob_tokenize(const ob_model *m, const char *text, size_t len, bool add_special, bool parse_special, ob_token *ids,
                int32_t n_max, int32_t *n_tokens) {
    *n_tokens = 0;
    OB_TRY(need_tok(m));
    ob_tokens t = {0};
    unsigned flags = (add_special ? OB_ENCODE_ADD_SPECIAL : 0u) | (parse_special ? OB_ENCODE_PARSE_SPECIAL : 0u);
    int rc = ob_tokenizer_encode(m->tok, text, len, flags, &t);
    if (rc < 0) return rc;
    if (t.n > INT32_MAX) {
        ob_tokens_free(&t);
        return ob_err(OB_ERR_RANGE, "text of %zu bytes gives too many tokens", len);
    }
    *n_tokens = (int32_t)t.n;
    if ((int32_t)t.n > n_max) {
        ob_tokens_free(&t);
        return OB_ERR_RANGE; /* the size is in *n_tokens; not worth a message */
    }
    if (t.n) memcpy(ids, t.ids, t.n * sizeof(ob_token));
    ob_tokens_free(&t);
    return 0;
}

int ob_token_to_piece(const ob_model *m, ob_token id, char *buf, int32_t size, bool special, int32_t *len) {
    *len = 0;
    OB_TRY(need_tok(m));
    if (!special && ob_tokenizer_is_special(m->tok, id) && ob_tokenizer_token_type(m->tok, id) == OB_TOKTYPE_CONTROL)
        return 0; /* control tokens have no text unless asked */
    int n = ob_tokenizer_token_bytes(m->tok, id, buf, size > 0 ? (size_t)size : 0);
    if (n < 0) return n;
    *len = n;
    return n > size ? OB_ERR_RANGE : 0;
}

int ob_detokenize(const ob_model *m, const ob_token *ids, int32_t n, bool skip_special, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    OB_TRY(need_tok(m));
    return ob_tokenizer_decode(m->tok, ids, n > 0 ? (size_t)n : 0, skip_special ? OB_DECODE_SKIP_SPECIAL : 0u, out, len);
}

void ob_free_string(char *s) { ob_free(s); }

struct ob_detokenizer {
    ob_detok *d;
};

int ob_detokenizer_create(const ob_model *m, bool skip_special, ob_detokenizer **out) {
    *out = NULL;
    OB_TRY(need_tok(m));
    ob_detokenizer *d = ob_calloc(1, sizeof *d);
    if (!d) return ob_err(OB_ERR_OOM, "detokenizer");
    int rc = ob_detok_create(m->tok, skip_special ? OB_DECODE_SKIP_SPECIAL : 0u, &d->d);
    if (rc < 0) {
        ob_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int ob_detokenizer_push(ob_detokenizer *d, ob_token id, const char **text, size_t *len) {
    return ob_detok_push(d->d, id, text, len);
}

int ob_detokenizer_flush(ob_detokenizer *d, const char **text, size_t *len) { return ob_detok_flush(d->d, text, len); }

void ob_detokenizer_free(ob_detokenizer *d) {
    if (!d) return;
    ob_detok_free(d->d);
    ob_free(d);
}

static ob_token gguf_id(const ob_model *m, const char *key) {
    uint32_t id;
    if (ob_gguf_get_u32(m->gguf, key, &id) < 0 || id == UINT32_MAX) {
        ob_err_clear();
        return -1;
    }
    return (ob_token)id;
}

ob_token ob_token_bos(const ob_model *m) {
    if (m->tok) {
        ob_token t = ob_tokenizer_special(m->tok, OB_SPECIAL_BOS);
        return t == OB_TOKEN_NULL ? -1 : t;
    }
    return gguf_id(m, "tokenizer.ggml.bos_token_id");
}

ob_token ob_token_eos(const ob_model *m) {
    if (m->tok) {
        ob_token t = ob_tokenizer_special(m->tok, OB_SPECIAL_EOS);
        return t == OB_TOKEN_NULL ? -1 : t;
    }
    return gguf_id(m, "tokenizer.ggml.eos_token_id");
}

bool ob_token_is_eog(const ob_model *m, ob_token id) {
    if (m->tok) return ob_tokenizer_is_eog(m->tok, id);
    return id >= 0 && id == ob_token_eos(m);
}

/* ---- chat templates ---- */

const char *ob_model_chat_template(const ob_model *m) {
    const char *t = NULL;
    if (ob_gguf_get_str(m->gguf, "tokenizer.chat_template", &t) < 0) {
        ob_err_clear();
        return NULL;
    }
    return t;
}

/* The text of a special token, for bos_token / eos_token in templates. */
static char *special_text(const ob_model *m, ob_token id) {
    if (!m->tok || id < 0) return NULL;
    size_t len = 0;
    const char *t = ob_tokenizer_token_text(m->tok, id, &len);
    return t ? ob_strndup(t, len) : NULL;
}

int ob_chat_render(const ob_model *m, const char *template_text, const char *context_json, size_t len, char **out,
                   size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    json_error_t jerr;
    json_t *req = json_loadb(context_json, len, 0, &jerr);
    if (!req) return ob_err(OB_ERR_FORMAT, "conversation JSON, line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    if (!json_is_object(req)) {
        json_decref(req);
        return ob_err(OB_ERR_FORMAT, "conversation JSON must be an object with \"messages\"");
    }
    ob_chat_template *own = NULL;
    const ob_chat_template *t = NULL;
    int rc = 0;
    if (template_text) {
        rc = ob_chat_template_parse(template_text, strlen(template_text), &own);
        t = own;
    } else {
        /* the model's template, parsed once */
        ob_model *mm = (ob_model *)m;
        pthread_mutex_lock(&g_tmpl_lock);
        if (!mm->chat_tmpl && mm->chat_tmpl_rc == 0) {
            const char *src = ob_model_chat_template(m);
            if (!src) src = ob_chat_template_chatml();
            mm->chat_tmpl_rc = ob_chat_template_parse(src, strlen(src), &mm->chat_tmpl);
            if (mm->chat_tmpl_rc < 0)
                snprintf(mm->chat_tmpl_err, sizeof mm->chat_tmpl_err, "%s", ob_last_error());
        }
        rc = mm->chat_tmpl_rc;
        t = mm->chat_tmpl;
        pthread_mutex_unlock(&g_tmpl_lock);
        if (rc < 0) ob_err(rc, "%s", m->chat_tmpl_err);
    }
    char *bos = NULL, *eos = NULL;
    json_t *vars = NULL;
    if (rc == 0) {
        bos = special_text(m, ob_token_bos(m));
        eos = special_text(m, ob_token_eos(m));
        rc = ob_chat_context_build(req, bos, eos, &vars);
    }
    if (rc == 0) rc = ob_chat_template_render(t, vars, NULL, out, out_len);
    json_decref(vars);
    json_decref(req);
    ob_free(bos);
    ob_free(eos);
    ob_chat_template_free(own);
    return rc;
}
