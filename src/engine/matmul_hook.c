/*
 * matmul_hook.c - the matmul observer / activation rotation hook
 * (matmul_hook.h). The rotation and the W4A4 product are the backend's ops
 * (hadamard_rows, matmul_a4) on buffers of the backend's memory, so this
 * file never touches activations itself except on the host-only paths
 * (observer, OB_ACT_SIM, a backend without hadamard_rows).
 */
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../quant/hadamard.h"
#include "matmul_hook.h"

/* The W4A4 product; a backend that turns this weight down gets the 8-bit one. */
static int matmul_a4(ob_matmul_hook *h, ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias,
                     ob_tensor *out) {
    int rc = h->inner->matmul_a4(b, w, x, bias, out);
    if (rc != OB_ERR_UNSUPPORTED) return rc;
    ob_err_clear();
    return h->inner->matmul(b, w, x, bias, out);
}

static int hook_matmul(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    ob_matmul_hook *h = (ob_matmul_hook *)(void *)b->ops;
    const int64_t nin = x->ne[0], n = x->ne[1];
    if (h->obs && w->name && x->type == OB_TYPE_F32) {
        /* an expert is a view into its stacked tensor: its offset says which */
        int32_t mat = 0, n_mat = 1;
        const ob_gguf_tensor *t = h->gguf ? ob_gguf_find_tensor(h->gguf, w->name) : NULL;
        if (t && t->n_dims == 3 && t->ne[2] > 1 && w->data >= t->data) {
            size_t per = t->nbytes / (size_t)t->ne[2];
            size_t off = (size_t)((const char *)w->data - (const char *)t->data);
            if (off < t->nbytes) {
                mat = (int32_t)(off / per);
                n_mat = (int32_t)t->ne[2];
            }
        }
        h->obs(h->obs_user, w->name, mat, n_mat, (const float *)x->data, nin, n);
    }
    const bool proj = w->name && x->type == OB_TYPE_F32 && ob_hadamard_applies(w->name, w->ne[0]);
    const bool rot = h->rotate && proj;
    const bool sim = h->act_sim >= 0 && proj;
    const bool a4 = h->act_bits == 4 && !sim && proj && w->type == OB_TYPE_Q4_0 && h->inner->matmul_a4;
    if (!rot && !sim) return a4 ? matmul_a4(h, b, w, x, bias, out) : h->inner->matmul(b, w, x, bias, out);
    size_t need = (size_t)(nin * n);
    if (need > h->scratch_cap) {
        /* backend memory (the engine sizes nothing per token: this grows to the widest batch once) */
        void *s = NULL;
        const int rc = h->inner->alloc(b, need * sizeof(float), &s);
        if (rc < 0) return h->rc = rc;
        if (h->scratch) h->inner->release(b, h->scratch);
        h->scratch = s;
        h->scratch_cap = need;
    }
    if (rot && nin > h->signs_n) {
        /* made on the host, uploaded once per width: a table for the widest row serves every narrower one */
        float *sg = ob_malloc((size_t)nin * sizeof(float));
        void *dev = NULL;
        if (!sg) return h->rc = ob_err(OB_ERR_OOM, "rotation signs");
        ob_hadamard_signs(sg, nin, h->seed);
        int rc = h->inner->alloc(b, (size_t)nin * sizeof(float), &dev);
        if (rc == 0) rc = h->inner->upload(b, dev, sg, (size_t)nin * sizeof(float));
        ob_free(sg);
        if (rc < 0) {
            if (dev) h->inner->release(b, dev);
            return h->rc = rc;
        }
        if (h->signs) h->inner->release(b, h->signs);
        h->signs = dev;
        h->signs_n = nin;
    }
    if (rot && h->inner->hadamard_rows) {
        /* the backend copies and rotates (all CPU threads; a GPU kernel) */
        const int rc = h->inner->hadamard_rows(b, x, h->scratch, h->signs);
        if (rc < 0) return h->rc = rc;
    } else {
        /* host memory: the engine takes this path on the CPU only (a backend without
         * hadamard_rows is refused rotated files; OB_ACT_SIM is CPU-only) */
        for (int64_t i = 0; i < n; i++) memcpy(h->scratch + i * nin, ob_tensor_row(x, i), (size_t)nin * sizeof(float));
        if (rot) ob_hadamard_rotate_rows_with(h->scratch, nin, n, h->signs);
    }
    if (sim) {
        const ob_type_traits *tr = ob_type_get(h->act_sim);
        size_t rb = ob_row_size((ob_type)h->act_sim, nin);
        if (rb > h->act_buf_cap) {
            void *q = ob_malloc(rb);
            if (!q) return h->rc = ob_err(OB_ERR_OOM, "activation rounding");
            ob_free(h->act_buf);
            h->act_buf = q;
            h->act_buf_cap = rb;
        }
        for (int64_t i = 0; i < n; i++) {
            tr->from_float_ref(h->scratch + i * nin, h->act_buf, nin);
            tr->to_float(h->act_buf, h->scratch + i * nin, nin);
        }
    }
    ob_tensor xr;
    ob_tensor_f32_2d(&xr, nin, n, h->scratch);
    return a4 ? matmul_a4(h, b, w, &xr, bias, out) : h->inner->matmul(b, w, &xr, bias, out);
}

int ob_matmul_hook_create(ob_backend *b, ob_matmul_hook **out) {
    ob_matmul_hook *h = ob_calloc(1, sizeof *h);
    if (!h) return ob_err(OB_ERR_OOM, "matmul hook");
    h->backend = b;
    h->inner = b->ops;
    h->ops = *b->ops;
    h->ops.matmul = hook_matmul;
    /* a device's fused experts (CUDA's moe_ffn) would multiply the expert matrices without the
     * hook: MoE layers route on the host instead, each expert a matmul the hook sees */
    h->ops.moe_ffn = NULL;
    h->ops.layer_qkv = NULL; /* the hook must see every product */
    h->ops.layer_ffn = NULL;
    h->act_sim = -1;
    h->act_bits = 8;
    *out = h;
    return 0;
}

void ob_matmul_hook_free(ob_matmul_hook *h) {
    if (!h) return;
    if (h->scratch) h->inner->release(h->backend, h->scratch);
    if (h->signs) h->inner->release(h->backend, h->signs);
    ob_free(h->act_buf);
    ob_free(h);
}

void ob_matmul_hook_enter(ob_matmul_hook *h, ob_backend *b) { b->ops = &h->ops; }

void ob_matmul_hook_leave(ob_matmul_hook *h, ob_backend *b) { b->ops = h->inner; }
