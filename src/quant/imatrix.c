/*
 * imatrix.c - importance matrices in memory and in llama.cpp's GGUF layout
 * (see imatrix.h). Sums are kept in double while collecting, so millions of
 * tokens add without losing the small terms; files store float as
 * llama.cpp's do.
 */
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../gguf/gguf.h"
#include "imatrix.h"

int ob_imatrix_create(ob_imatrix **out) {
    *out = ob_calloc(1, sizeof(ob_imatrix));
    return *out ? 0 : ob_err(OB_ERR_OOM, "imatrix");
}

void ob_imatrix_free(ob_imatrix *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n; i++) {
        ob_free(m->e[i].name);
        ob_free(m->e[i].sum2);
        ob_free(m->e[i].counts);
    }
    for (int i = 0; i < m->n_datasets; i++) ob_free(m->datasets[i]);
    ob_free(m->datasets);
    ob_free(m->e);
    ob_free(m);
}

const ob_imatrix_entry *ob_imatrix_find(const ob_imatrix *m, const char *name) {
    for (int64_t i = 0; m && i < m->n; i++)
        if (!strcmp(m->e[i].name, name)) return &m->e[i];
    return NULL;
}

int ob_imatrix_entry_get(ob_imatrix *m, const char *name, int64_t n_per_row, int64_t n_mat, ob_imatrix_entry **out) {
    for (int64_t i = 0; i < m->n; i++) {
        ob_imatrix_entry *e = &m->e[i];
        if (strcmp(e->name, name)) continue;
        if (e->n_per_row != n_per_row || e->n_mat != n_mat)
            return ob_err(OB_ERR_FORMAT, "imatrix entry %s has %lld x %lld values, not %lld x %lld", name,
                          (long long)e->n_mat, (long long)e->n_per_row, (long long)n_mat, (long long)n_per_row);
        *out = e;
        return 0;
    }
    if (n_per_row <= 0 || n_mat <= 0) return ob_err(OB_ERR_INVALID_ARG, "imatrix entry %s: empty shape", name);
    if (m->n == m->cap) {
        int64_t cap = m->cap ? m->cap * 2 : 64;
        ob_imatrix_entry *ne = ob_realloc(m->e, (size_t)cap * sizeof *ne);
        if (!ne) return ob_err(OB_ERR_OOM, "imatrix entries");
        m->e = ne;
        m->cap = cap;
    }
    ob_imatrix_entry e = {0};
    e.name = ob_strdup(name);
    e.n_per_row = n_per_row;
    e.n_mat = n_mat;
    e.sum2 = ob_calloc((size_t)(n_per_row * n_mat), sizeof(double));
    e.counts = ob_calloc((size_t)n_mat, sizeof(double));
    if (!e.name || !e.sum2 || !e.counts) {
        ob_free(e.name);
        ob_free(e.sum2);
        ob_free(e.counts);
        return ob_err(OB_ERR_OOM, "imatrix entry %s", name);
    }
    m->e[m->n] = e;
    *out = &m->e[m->n++];
    return 0;
}

void ob_imatrix_entry_add(ob_imatrix_entry *e, int64_t mat, const float *x, int64_t n) {
    double *s = e->sum2 + mat * e->n_per_row;
    for (int64_t i = 0; i < n; i++) {
        const float *r = x + i * e->n_per_row;
        for (int64_t j = 0; j < e->n_per_row; j++) s[j] += (double)r[j] * r[j];
    }
    e->counts[mat] += (double)n;
}

int ob_imatrix_add_dataset(ob_imatrix *m, const char *name) {
    char **nd = ob_realloc(m->datasets, (size_t)(m->n_datasets + 1) * sizeof *nd);
    if (!nd) return ob_err(OB_ERR_OOM, "imatrix datasets");
    m->datasets = nd;
    if (!(nd[m->n_datasets] = ob_strdup(name))) return ob_err(OB_ERR_OOM, "imatrix datasets");
    m->n_datasets++;
    return 0;
}

bool ob_imatrix_weights(const ob_imatrix_entry *e, int64_t mat, float *w) {
    double c = e->counts[mat];
    if (!(c > 0)) return false;
    const double *s = e->sum2 + mat * e->n_per_row;
    for (int64_t j = 0; j < e->n_per_row; j++) w[j] = (float)(s[j] / c);
    return true;
}

int ob_imatrix_save(const ob_imatrix *m, const char *path) {
    ob_gguf_writer *w = NULL;
    float **bufs = ob_calloc((size_t)(2 * m->n + 1), sizeof(float *));
    int rc = bufs ? ob_gguf_writer_create(&w) : ob_err(OB_ERR_OOM, "imatrix save");
    if (rc == 0) rc = ob_gguf_writer_set_str(w, "general.type", "imatrix");
    if (rc == 0)
        rc = ob_gguf_writer_set_arr_str(w, "imatrix.datasets", (const char *const *)m->datasets,
                                        (uint64_t)m->n_datasets);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, "imatrix.chunk_count", m->chunk_count);
    if (rc == 0) rc = ob_gguf_writer_set_u32(w, "imatrix.chunk_size", m->chunk_size);
    for (int64_t i = 0; rc == 0 && i < m->n; i++) {
        const ob_imatrix_entry *e = &m->e[i];
        size_t nv = (size_t)(e->n_per_row * e->n_mat);
        float *s = bufs[2 * i] = ob_malloc(nv * sizeof(float));
        float *c = bufs[2 * i + 1] = ob_malloc((size_t)e->n_mat * sizeof(float));
        if (!s || !c) {
            rc = ob_err(OB_ERR_OOM, "imatrix save");
            break;
        }
        for (size_t j = 0; j < nv; j++) s[j] = (float)e->sum2[j];
        for (int64_t j = 0; j < e->n_mat; j++) c[j] = (float)e->counts[j];
        char name[512];
        int64_t ne_s[2] = {e->n_per_row, e->n_mat}, ne_c[2] = {1, e->n_mat};
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        rc = ob_gguf_writer_add_tensor(w, name, OB_TYPE_F32, 2, ne_s, s);
        snprintf(name, sizeof name, "%s.counts", e->name);
        if (rc == 0) rc = ob_gguf_writer_add_tensor(w, name, OB_TYPE_F32, 2, ne_c, c);
    }
    if (rc == 0) rc = ob_gguf_writer_write_file(w, path);
    ob_gguf_writer_free(w);
    for (int64_t i = 0; bufs && i < 2 * m->n; i++) ob_free(bufs[i]);
    ob_free(bufs);
    return rc;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int ob_imatrix_load(const char *path, ob_imatrix **out) {
    *out = NULL;
    ob_gguf *g = NULL;
    OB_TRY(ob_gguf_open(path, &g));
    ob_imatrix *m = NULL;
    int rc = ob_imatrix_create(&m);
    const char *type = NULL;
    if (rc == 0 && ob_gguf_get_str(g, "general.type", &type) == 0 && strcmp(type, "imatrix"))
        rc = ob_err(OB_ERR_FORMAT, "%s: general.type is '%s', not 'imatrix'", path, type);
    const ob_gguf_array *ds = NULL;
    if (rc == 0 && ob_gguf_get_arr(g, "imatrix.datasets", OB_GGUF_STRING, &ds) == 0) {
        const ob_gguf_str *s = ds->data;
        for (uint64_t i = 0; rc == 0 && i < ds->n; i++) rc = ob_imatrix_add_dataset(m, s[i].s);
    }
    if (rc == 0) (void)ob_gguf_get_u32(g, "imatrix.chunk_count", &m->chunk_count);
    if (rc == 0) (void)ob_gguf_get_u32(g, "imatrix.chunk_size", &m->chunk_size);
    if (rc == 0) ob_err_clear(); /* absent optional keys; an error above keeps its message */
    int64_t n_t = ob_gguf_n_tensors(g);
    for (int64_t i = 0; rc == 0 && i < n_t; i++) {
        const ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        if (!ends_with(t->name, ".in_sum2")) continue;
        char wname[512], cname[528];
        size_t base = strlen(t->name) - strlen(".in_sum2");
        if (base >= sizeof wname - 8) {
            rc = ob_err(OB_ERR_FORMAT, "%s: tensor name too long", path);
            break;
        }
        memcpy(wname, t->name, base);
        wname[base] = '\0';
        snprintf(cname, sizeof cname, "%s.counts", wname);
        const ob_gguf_tensor *c = ob_gguf_find_tensor(g, cname);
        if (!c) {
            rc = ob_err(OB_ERR_FORMAT, "%s: %s has no %s", path, t->name, cname);
            break;
        }
        if (t->type != OB_TYPE_F32 || c->type != OB_TYPE_F32 || t->n_dims > 2 || c->n_dims > 2 || c->ne[0] != 1 ||
            c->ne[1] != t->ne[1]) {
            rc = ob_err(OB_ERR_FORMAT, "%s: %s / %s: expected F32 [n, n_mat] and [1, n_mat]", path, t->name, cname);
            break;
        }
        ob_imatrix_entry *e = NULL;
        rc = ob_imatrix_entry_get(m, wname, t->ne[0], t->ne[1], &e);
        if (rc < 0) break;
        const float *s = t->data, *cv = c->data;
        for (int64_t j = 0; j < t->ne[0] * t->ne[1]; j++) e->sum2[j] = s[j];
        for (int64_t j = 0; j < t->ne[1]; j++) e->counts[j] = cv[j];
    }
    if (rc == 0 && m->n == 0) rc = ob_err(OB_ERR_FORMAT, "%s: no <name>.in_sum2 tensors: not an imatrix file", path);
    ob_gguf_free(g);
    if (rc < 0) {
        ob_imatrix_free(m);
        return rc;
    }
    *out = m;
    return 0;
}
