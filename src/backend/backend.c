/*
 * backend.c - tensor helpers shared by every backend.
 */
#include <string.h>

#include "backend.h"

void ob_tensor_init(ob_tensor *t, ob_type type, int n_dims, const int64_t *ne, void *data) {
    const ob_type_traits *tr = ob_type_get((int)type);
    t->type = type;
    t->data = data;
    t->name = 0;
    t->extra = 0;
    for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nb[0] = tr->type_size;
    t->nb[1] = (size_t)(t->ne[0] / tr->block_size) * tr->type_size;
    t->nb[2] = t->nb[1] * (size_t)t->ne[1];
    t->nb[3] = t->nb[2] * (size_t)t->ne[2];
}

void ob_tensor_f32_2d(ob_tensor *t, int64_t d, int64_t n, float *data) {
    int64_t ne[2] = {d, n};
    ob_tensor_init(t, OB_TYPE_F32, 2, ne, data);
}

int64_t ob_tensor_nelements(const ob_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

size_t ob_tensor_nbytes(const ob_tensor *t) { return t->nb[3] * (size_t)t->ne[3]; }

void ob_backend_free(ob_backend *b) {
    if (b) b->ops->free(b);
}

bool ob_backend_is_cpu(const ob_backend *b) { return b && b->ops->name && !strcmp(b->ops->name, "cpu"); }
