/*
 * registry.c - the table of architectures and the helpers every
 * architecture file uses to read keys and bind tensors.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/status.h"
#include "model.h"

extern const ob_arch ob_arch_llama, ob_arch_qwen2, ob_arch_qwen3;

static const ob_arch *const g_archs[] = {&ob_arch_llama, &ob_arch_qwen2, &ob_arch_qwen3};

const ob_arch *ob_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof g_archs / sizeof g_archs[0]; i++)
        if (strcmp(g_archs[i]->name, name) == 0) return g_archs[i];
    return NULL;
}

const char *ob_arch_list(void) {
    static char buf[256];
    if (!buf[0]) {
        size_t n = 0;
        for (size_t i = 0; i < sizeof g_archs / sizeof g_archs[0]; i++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "", g_archs[i]->name);
    }
    return buf;
}

static void key_name(const ob_model_impl *m, const char *suffix, char *buf, size_t size) {
    snprintf(buf, size, "%s.%s", m->arch_name, suffix);
}

int ob_model_key_u32(const ob_model_impl *m, const char *suffix, int64_t *out) {
    char k[128];
    uint32_t v;
    key_name(m, suffix, k, sizeof k);
    OB_TRY(ob_gguf_get_u32(m->gguf, k, &v));
    *out = v;
    return 0;
}

int ob_model_key_f32(const ob_model_impl *m, const char *suffix, float *out) {
    char k[128];
    key_name(m, suffix, k, sizeof k);
    return ob_gguf_get_f32(m->gguf, k, out);
}

int ob_model_key_u32_opt(const ob_model_impl *m, const char *suffix, int64_t *out) {
    int rc = ob_model_key_u32(m, suffix, out);
    if (rc == OB_ERR_NOT_FOUND) {
        ob_err_clear();
        return 0;
    }
    return rc;
}

int ob_model_key_f32_opt(const ob_model_impl *m, const char *suffix, float *out) {
    int rc = ob_model_key_f32(m, suffix, out);
    if (rc == OB_ERR_NOT_FOUND) {
        ob_err_clear();
        return 0;
    }
    return rc;
}

int ob_model_tensor(ob_model_impl *m, ob_tensor *t, bool optional, int n_dims, const int64_t *ne, const char *fmt,
                    ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(t, 0, sizeof *t);
    const ob_gguf_tensor *g = ob_gguf_find_tensor(m->gguf, name);
    if (!g) {
        if (optional) return 0;
        return ob_err(OB_ERR_NOT_FOUND, "tensor '%s' is missing", name);
    }
    /* Trailing dimensions of 1 may be omitted in the file. */
    for (int d = 0; d < 4; d++) {
        int64_t want = d < n_dims ? ne[d] : 1;
        if (want >= 0 && g->ne[d] != want)
            return ob_err(OB_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld]; expected dimension %d = %lld",
                          name, (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2], (long long)g->ne[3], d,
                          (long long)want);
    }
    ob_tensor_init(t, g->type, n_dims, g->ne, NULL);
    t->name = g->name;
    OB_TRY(m->backend->ops->weight(m->backend, t, g->data));
    m->n_params += (uint64_t)ob_gguf_tensor_nelements(g);
    m->n_bytes += g->nbytes;
    return 0;
}
