/*
 * backend.c - tensor helpers shared by every backend.
 */
#include <math.h>
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

/* Both backends have every feature listed so far (the CUDA plugin's
 * attention and glu learned ALiBi and ReLU with them); a backend that lacks
 * a later one answers false here. */
bool ob_backend_has(const ob_backend *b, ob_backend_feature f) {
    switch (f) {
    case OB_FEATURE_ALIBI:
    case OB_FEATURE_ACT_RELU: return b != NULL;
    }
    return false;
}

float ob_alibi_slope(int n_head, int h, float max_bias) {
    int p = 1;
    while (p * 2 <= n_head) p *= 2;
    if (h < p) return powf(2.0f, -max_bias / (float)p * (float)(h + 1));
    return powf(2.0f, -max_bias / (float)(2 * p) * (float)(2 * (h - p) + 1));
}
