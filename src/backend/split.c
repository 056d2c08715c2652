/*
 * split.c - partial offload (split.h): ops placed on the host or the
 * device backend, memory kept coherent between the two per byte range.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "split.h"

enum { HOST = 0, DEV = 1 };
enum { S_BOTH = 0, S_HOST = 1, S_DEV = 2 }; /* where the latest bytes of a range are */

typedef struct seg {
    size_t lo, hi;
    int state;
} seg;

/* One buffer handed out: the host copy (the address the callers see), the
 * device copy once one was needed, and the state of each range. */
typedef struct sbuf {
    uint8_t *host;
    void *dev;
    size_t size;
    seg *segs;
    int n_segs, cap_segs;
} sbuf;

typedef struct wrange {
    uintptr_t lo, hi;
} wrange;

/* What the model's split backend and its contexts' share. */
typedef struct split_shared {
    ob_backend *dev;
    int first_dev_layer, n_layer;
    int offload_min; /* host-weight products of this many tokens and more run on the device (0: never) */
    wrange *wr; /* the device's weights, sorted by address */
    size_t n_wr, cap_wr;
    ob_split_stats st;
} split_shared;

typedef struct split_backend {
    ob_backend base;
    ob_backend *host;
    split_shared *sh;
    bool owner;        /* the model's: frees sh and the device backend */
    sbuf **bufs;       /* sorted by host address */
    size_t n_bufs, cap_bufs;
    int cur;           /* where the last op ran: ops without a weight or a layer run there too */
    void *wstage, *bstage; /* device copies of a host weight and its bias for an offloaded product */
    size_t wstage_size, bstage_size;
    void **kv_ptr;     /* [2 * n_layer]: a KV store translated for the device */
    int kv_cap;
} split_backend;

static const ob_backend_ops split_ops;

static split_backend *sp_of(ob_backend *b) { return (split_backend *)b; }
static ob_backend *on(split_backend *s, int d) { return d == DEV ? s->sh->dev : s->host; }

/* ---- the device's weights ---- */

static bool dev_weight(const split_shared *sh, const void *p) {
    const uintptr_t a = (uintptr_t)p;
    size_t lo = 0, hi = sh->n_wr;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sh->wr[mid].hi <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo < sh->n_wr && sh->wr[lo].lo <= a && a < sh->wr[lo].hi;
}

static int add_dev_weight(split_shared *sh, const void *p, size_t n) {
    if (sh->n_wr == sh->cap_wr) {
        size_t cap = sh->cap_wr ? 2 * sh->cap_wr : 256;
        wrange *w = ob_realloc(sh->wr, cap * sizeof *w);
        if (!w) return ob_err(OB_ERR_OOM, "split: weight table");
        sh->wr = w, sh->cap_wr = cap;
    }
    const wrange r = {(uintptr_t)p, (uintptr_t)p + (n ? n : 1)};
    size_t i = sh->n_wr;
    while (i > 0 && sh->wr[i - 1].lo > r.lo) sh->wr[i] = sh->wr[i - 1], i--;
    sh->wr[i] = r;
    sh->n_wr++;
    return 0;
}

/* The layer of a "blk.<i>." tensor, or -1. */
static int layer_of(const char *name) {
    if (!name || strncmp(name, "blk.", 4)) return -1;
    char *end = NULL;
    long il = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && il >= 0 && il < 1 << 20 ? (int)il : -1;
}

/* ---- buffers and their ranges ---- */

static sbuf *find_buf(const split_backend *s, const void *p) {
    const uintptr_t a = (uintptr_t)p;
    size_t lo = 0, hi = s->n_bufs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uintptr_t)s->bufs[mid]->host + s->bufs[mid]->size <= a) lo = mid + 1;
        else hi = mid;
    }
    if (lo < s->n_bufs && (uintptr_t)s->bufs[lo]->host <= a) return s->bufs[lo];
    return NULL;
}

/* Set [lo, hi) of b to `state`, merging neighbours of the same state. */
static int set_state(sbuf *b, size_t lo, size_t hi, int state) {
    if (lo >= hi) return 0;
    const int need = b->n_segs + 2;
    if (need > b->cap_segs) {
        int cap = need * 2;
        seg *n = ob_realloc(b->segs, (size_t)cap * sizeof *n);
        if (!n) return ob_err(OB_ERR_OOM, "split: range table");
        b->segs = n, b->cap_segs = cap;
    }
    seg out[3];
    int k = 0, i = 0;
    /* segments before lo stay; the one that straddles lo keeps its part before lo */
    while (i < b->n_segs && b->segs[i].hi <= lo) i++;
    const int first = i;
    if (i < b->n_segs && b->segs[i].lo < lo) out[k++] = (seg){b->segs[i].lo, lo, b->segs[i].state};
    out[k++] = (seg){lo, hi, state};
    while (i < b->n_segs && b->segs[i].hi <= hi) i++;
    if (i < b->n_segs && b->segs[i].lo < hi) out[k++] = (seg){hi, b->segs[i].hi, b->segs[i].state}, i++;
    /* replace segs[first, i) with out[0, k) */
    const int tail = b->n_segs - i;
    memmove(b->segs + first + k, b->segs + i, (size_t)tail * sizeof(seg));
    memcpy(b->segs + first, out, (size_t)k * sizeof(seg));
    b->n_segs = first + k + tail;
    /* merge equal neighbours */
    int w = 0;
    for (int r = 0; r < b->n_segs; r++) {
        if (w > 0 && b->segs[w - 1].state == b->segs[r].state && b->segs[w - 1].hi == b->segs[r].lo)
            b->segs[w - 1].hi = b->segs[r].hi;
        else
            b->segs[w++] = b->segs[r];
    }
    b->n_segs = w;
    return 0;
}

static int mirror(split_backend *s, sbuf *b) {
    if (b->dev) return 0;
    /* zero-filled like the host copy: every range still S_BOTH holds zeros on both sides */
    return s->sh->dev->ops->alloc(s->sh->dev, b->size, &b->dev);
}

/* Make [lo, hi) of b current on side d: copy the ranges whose latest bytes are on the other side. */
static int ensure(split_backend *s, sbuf *b, size_t lo, size_t hi, int d) {
    if (d == DEV) OB_TRY(mirror(s, b));
    const int stale = d == DEV ? S_HOST : S_DEV;
    ob_backend *dev = s->sh->dev;
    for (int i = 0; i < b->n_segs; i++) {
        const seg g = b->segs[i];
        if (g.hi <= lo) continue;
        if (g.lo >= hi) break;
        if (g.state != stale) continue;
        const size_t a = g.lo > lo ? g.lo : lo, e = g.hi < hi ? g.hi : hi;
        if (d == DEV) OB_TRY(dev->ops->upload(dev, (uint8_t *)b->dev + a, b->host + a, e - a));
        else OB_TRY(dev->ops->download(dev, b->host + a, (const uint8_t *)b->dev + a, e - a));
        if (d == DEV) s->sh->st.bytes_up += e - a, s->sh->st.n_up++;
        else s->sh->st.bytes_down += e - a, s->sh->st.n_down++;
        OB_TRY(set_state(b, a, e, S_BOTH));
        i = -1; /* the table changed: rescan (ranges already fixed are S_BOTH now) */
    }
    return 0;
}

/* The bytes a tensor view spans. */
static size_t extent(const ob_tensor *t) {
    size_t n = ob_row_size(t->type, t->ne[0]);
    for (int d = 1; d < 4; d++)
        if (t->ne[d] > 1) n += (size_t)(t->ne[d] - 1) * t->nb[d];
    return n;
}

static bool contiguous(const ob_tensor *t) {
    return t->nb[1] == ob_row_size(t->type, t->ne[0]) && (t->ne[2] <= 1 || t->nb[2] == t->nb[1] * (size_t)t->ne[1]) &&
           (t->ne[3] <= 1 || t->nb[3] == t->nb[2] * (size_t)t->ne[2]);
}

/* An input of an op running on d: current there, and its address there. */
static int in(split_backend *s, int d, const ob_tensor *t, ob_tensor *x) {
    *x = *t;
    sbuf *b = t->data ? find_buf(s, t->data) : NULL;
    if (!b) return 0; /* a weight, or memory that is not ours */
    const size_t off = (size_t)((uint8_t *)t->data - b->host), n = extent(t);
    if (off + n > b->size) return ob_err(OB_ERR_INTERNAL, "split: tensor %s runs past its buffer", t->name ? t->name : "?");
    OB_TRY(ensure(s, b, off, off + n, d));
    if (d == DEV) x->data = (uint8_t *)b->dev + off;
    return 0;
}

/* An output: made current first when the op writes only part of its span (a strided view). */
static int out_prep(split_backend *s, int d, const ob_tensor *t, ob_tensor *x) {
    *x = *t;
    sbuf *b = find_buf(s, t->data);
    if (!b) return 0;
    const size_t off = (size_t)((uint8_t *)t->data - b->host), n = extent(t);
    if (off + n > b->size) return ob_err(OB_ERR_INTERNAL, "split: tensor %s runs past its buffer", t->name ? t->name : "?");
    if (d == DEV) OB_TRY(mirror(s, b));
    if (!contiguous(t)) OB_TRY(ensure(s, b, off, off + n, d));
    if (d == DEV) x->data = (uint8_t *)b->dev + off;
    return 0;
}

static int out_done(split_backend *s, int d, const ob_tensor *t) {
    s->cur = d;
    s->sh->st.ops[d]++;
    sbuf *b = find_buf(s, t->data);
    if (!b) return 0;
    const size_t off = (size_t)((uint8_t *)t->data - b->host);
    return set_state(b, off, off + extent(t), d == DEV ? S_DEV : S_HOST);
}

/* Where an op with weight w runs: with the weight; ops without one (or whose
 * tensor is an activation in our memory) where the last op ran. */
static int place(const split_backend *s, const ob_tensor *w) {
    if (!w || !w->data || find_buf(s, w->data)) return s->cur;
    return dev_weight(s->sh, w->data) ? DEV : HOST;
}

/* ---- memory ---- */

static int sp_alloc(ob_backend *bk, size_t n, void **out) {
    split_backend *s = sp_of(bk);
    sbuf *b = ob_calloc(1, sizeof *b);
    if (!b) return ob_err(OB_ERR_OOM, "split: buffer");
    b->size = n ? n : 1;
    void *p = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        ob_free(b);
        return ob_err(OB_ERR_OOM, "split: host buffer of %zu bytes", n);
    }
    b->host = p;
    int rc = set_state(b, 0, b->size, S_BOTH);
    if (rc == 0 && s->n_bufs == s->cap_bufs) {
        size_t cap = s->cap_bufs ? 2 * s->cap_bufs : 64;
        sbuf **nb = ob_realloc(s->bufs, cap * sizeof *nb);
        if (!nb) rc = ob_err(OB_ERR_OOM, "split: buffer table");
        else s->bufs = nb, s->cap_bufs = cap;
    }
    if (rc < 0) {
        munmap(b->host, b->size);
        ob_free(b->segs);
        ob_free(b);
        return rc;
    }
    size_t i = s->n_bufs;
    while (i > 0 && s->bufs[i - 1]->host > b->host) s->bufs[i] = s->bufs[i - 1], i--;
    s->bufs[i] = b;
    s->n_bufs++;
    *out = b->host;
    return 0;
}

static void free_buf(split_backend *s, sbuf *b) {
    if (b->dev) s->sh->dev->ops->release(s->sh->dev, b->dev);
    munmap(b->host, b->size);
    ob_free(b->segs);
    ob_free(b);
}

static void sp_release(ob_backend *bk, void *p) {
    split_backend *s = sp_of(bk);
    for (size_t i = 0; i < s->n_bufs; i++)
        if (s->bufs[i]->host == p) {
            free_buf(s, s->bufs[i]);
            memmove(s->bufs + i, s->bufs + i + 1, (s->n_bufs - i - 1) * sizeof *s->bufs);
            s->n_bufs--;
            return;
        }
}

static int sp_upload(ob_backend *bk, void *dst, const void *src, size_t n) {
    split_backend *s = sp_of(bk);
    sbuf *b = find_buf(s, dst);
    if (!b) return ob_err(OB_ERR_INTERNAL, "split: upload into memory that is not the backend's");
    const size_t off = (size_t)((uint8_t *)dst - b->host);
    if (off + n > b->size) return ob_err(OB_ERR_INTERNAL, "split: upload past the buffer");
    memcpy(dst, src, n);
    return set_state(b, off, off + n, S_HOST);
}

static int sp_download(ob_backend *bk, void *dst, const void *src, size_t n) {
    split_backend *s = sp_of(bk);
    sbuf *b = find_buf(s, src);
    if (!b) { /* a weight (DeepSeek's routing bias): from the side that holds it */
        ob_backend *e = dev_weight(s->sh, src) ? s->sh->dev : s->host;
        return e->ops->download(e, dst, src, n);
    }
    const size_t off = (size_t)((const uint8_t *)src - b->host);
    if (off + n > b->size) return ob_err(OB_ERR_INTERNAL, "split: download past the buffer");
    OB_TRY(ensure(s, b, off, off + n, HOST));
    memcpy(dst, src, n);
    return 0;
}

/* Copy within backend memory (KV blocks): on the device when the source is current there. */
static int sp_copy(ob_backend *bk, void *dst, const void *src, size_t n) {
    split_backend *s = sp_of(bk);
    sbuf *bs = find_buf(s, src), *bd = find_buf(s, dst);
    if (!bs || !bd) return ob_err(OB_ERR_INTERNAL, "split: copy of memory that is not the backend's");
    const size_t so = (size_t)((const uint8_t *)src - bs->host), dof = (size_t)((uint8_t *)dst - bd->host);
    if (so + n > bs->size || dof + n > bd->size) return ob_err(OB_ERR_INTERNAL, "split: copy past a buffer");
    int d = HOST;
    if (bs->dev) {
        d = DEV;
        for (int i = 0; i < bs->n_segs; i++)
            if (bs->segs[i].hi > so && bs->segs[i].lo < so + n && bs->segs[i].state == S_HOST) d = HOST;
    }
    OB_TRY(ensure(s, bs, so, so + n, d));
    if (d == DEV) OB_TRY(mirror(s, bd));
    ob_backend *e = on(s, d);
    if (d == DEV)
        OB_TRY(e->ops->copy(e, (uint8_t *)bd->dev + dof, (const uint8_t *)bs->dev + so, n));
    else
        OB_TRY(e->ops->copy(e, dst, src, n));
    return set_state(bd, dof, dof + n, d == DEV ? S_DEV : S_HOST);
}

static int sp_weight(ob_backend *bk, ob_tensor *t, const void *host_data) {
    split_backend *s = sp_of(bk);
    const int il = layer_of(t->name);
    if (il >= s->sh->first_dev_layer && il < s->sh->n_layer) {
        ob_backend *dev = s->sh->dev;
        OB_TRY(dev->ops->weight(dev, t, host_data));
        return add_dev_weight(s->sh, t->data, ob_tensor_nbytes(t));
    }
    return s->host->ops->weight(s->host, t, host_data);
}

/* ---- ops ---- */

static int sp_get_rows(ob_backend *bk, const ob_tensor *table, const int32_t *ids, int64_t n, ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = place(s, table);
    ob_tensor o;
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->get_rows(e, table, ids, n, &o));
    return out_done(s, d, out);
}

/* A device buffer of at least n bytes (plus the padding a device weight carries: decode
 * kernels may read a little past the last row), grown as needed. */
static int stage(split_backend *s, void **buf, size_t *size, size_t n) {
    n += 64;
    if (*buf && *size >= n) return 0;
    ob_backend *dev = s->sh->dev;
    if (*buf) dev->ops->release(dev, *buf), *buf = NULL, *size = 0;
    OB_TRY(dev->ops->alloc(dev, n, buf));
    *size = n;
    return 0;
}

/* A prompt batch's product with a host weight on the device (llama.cpp's rule, batches of 32
 * tokens and more by default: OB_SPLIT_OFFLOAD_MIN): the weight (and its bias) go up in one
 * copy each, then the device multiplies - for such batches its arithmetic outruns the CPU's
 * by far more than the copy costs. The product's output then lives on the device, as any
 * device op's (the ops after it follow the usual placement). */
static int matmul_offload(split_backend *s, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias,
                          ob_tensor *out) {
    ob_backend *dev = s->sh->dev;
    const size_t wn = ob_tensor_nbytes(w);
    OB_TRY(stage(s, &s->wstage, &s->wstage_size, wn));
    OB_TRY(dev->ops->upload(dev, s->wstage, w->data, wn));
    ob_tensor wd = *w, bd;
    wd.data = s->wstage;
    wd.extra = NULL; /* the host backend's private form (its repacked panels) is not the device's */
    const ob_tensor *bp = bias;
    s->sh->st.bytes_w += wn, s->sh->st.n_w++;
    if (bias && bias->data && !find_buf(s, bias->data) && !dev_weight(s->sh, bias->data)) {
        const size_t bn = ob_tensor_nbytes(bias);
        OB_TRY(stage(s, &s->bstage, &s->bstage_size, bn));
        OB_TRY(dev->ops->upload(dev, s->bstage, bias->data, bn));
        bd = *bias;
        bd.data = s->bstage;
        bd.extra = NULL;
        bp = &bd;
        s->sh->st.bytes_w += bn;
    }
    ob_tensor xx, o;
    OB_TRY(in(s, DEV, x, &xx));
    OB_TRY(out_prep(s, DEV, out, &o));
    OB_TRY(dev->ops->matmul(dev, &wd, &xx, bp, &o));
    return out_done(s, DEV, out);
}

static int matmul_common(ob_backend *bk, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out,
                         bool a4) {
    split_backend *s = sp_of(bk);
    const int d = place(s, w);
    if (d == HOST && !a4 && s->sh->offload_min > 0 && x->ne[1] >= s->sh->offload_min && w->data &&
        !find_buf(s, w->data) && !dev_weight(s->sh, w->data))
        return matmul_offload(s, w, x, bias, out);
    ob_backend *e = on(s, d);
    if (a4 && !e->ops->matmul_a4) return ob_err(OB_ERR_UNSUPPORTED, "split: no 4-bit activation path on %s", e->ops->name);
    ob_tensor xx, o;
    OB_TRY(in(s, d, x, &xx));
    OB_TRY(out_prep(s, d, out, &o));
    OB_TRY(a4 ? e->ops->matmul_a4(e, w, &xx, bias, &o) : e->ops->matmul(e, w, &xx, bias, &o));
    return out_done(s, d, out);
}

static int sp_matmul(ob_backend *bk, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    return matmul_common(bk, w, x, bias, out, false);
}

static int sp_matmul_a4(ob_backend *bk, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    return matmul_common(bk, w, x, bias, out, true);
}

static int sp_rms_norm(ob_backend *bk, const ob_tensor *x, const ob_tensor *weight, float eps, int64_t group,
                       ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = place(s, weight);
    ob_tensor xx, o;
    OB_TRY(in(s, d, x, &xx));
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->rms_norm(e, &xx, weight, eps, group, &o));
    return out_done(s, d, out);
}

static int sp_layer_norm(ob_backend *bk, const ob_tensor *x, const ob_tensor *weight, const ob_tensor *bias, float eps,
                         ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = place(s, weight ? weight : bias);
    ob_tensor xx, o;
    OB_TRY(in(s, d, x, &xx));
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->layer_norm(e, &xx, weight, bias, eps, &o));
    return out_done(s, d, out);
}

static int sp_rope(ob_backend *bk, ob_tensor *x, int n_head, int head_dim, const int32_t *pos, const ob_rope_params *p) {
    split_backend *s = sp_of(bk);
    const int d = s->cur;
    ob_tensor xx;
    OB_TRY(in(s, d, x, &xx));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->rope(e, &xx, n_head, head_dim, pos, p));
    return out_done(s, d, x);
}

/* Layer il's pools current where the layer runs, in a store whose pointers are that side's. */
static int kv_for(split_backend *s, const ob_kv_store *kv, int il, ob_kv_store *t, int *d) {
    *d = il >= s->sh->first_dev_layer ? DEV : HOST;
    *t = *kv;
    if (il < 0 || il >= kv->n_layer) return ob_err(OB_ERR_INTERNAL, "split: layer %d of %d", il, kv->n_layer);
    if (kv->n_layer > s->kv_cap) {
        void **p = ob_realloc(s->kv_ptr, (size_t)kv->n_layer * 2 * sizeof *p);
        if (!p) return ob_err(OB_ERR_OOM, "split: KV table");
        s->kv_ptr = p, s->kv_cap = kv->n_layer;
    }
    void **k = s->kv_ptr, **v = s->kv_ptr + kv->n_layer;
    memcpy(k, kv->k, (size_t)kv->n_layer * sizeof *k);
    memcpy(v, kv->v, (size_t)kv->n_layer * sizeof *v);
    const size_t bytes = (size_t)kv->n_slots * kv->row_bytes;
    for (int w = 0; w < 2; w++) {
        void **slot = w ? &v[il] : &k[il];
        sbuf *b = find_buf(s, *slot);
        if (!b) continue;
        const size_t off = (size_t)((uint8_t *)*slot - b->host);
        if (off + bytes > b->size) return ob_err(OB_ERR_INTERNAL, "split: KV pool past its buffer");
        OB_TRY(ensure(s, b, off, off + bytes, *d));
        if (*d == DEV) *slot = (uint8_t *)b->dev + off;
    }
    t->k = k, t->v = v;
    return 0;
}

static int kv_written(split_backend *s, const ob_kv_store *kv, int il, int d) {
    const size_t bytes = (size_t)kv->n_slots * kv->row_bytes;
    for (int w = 0; w < 2; w++) {
        void *p = w ? kv->v[il] : kv->k[il];
        sbuf *b = find_buf(s, p);
        if (!b) continue;
        const size_t off = (size_t)((uint8_t *)p - b->host);
        OB_TRY(set_state(b, off, off + bytes, d == DEV ? S_DEV : S_HOST));
    }
    s->cur = d;
    s->sh->st.ops[d]++;
    return 0;
}

static int sp_kv_write(ob_backend *bk, const ob_kv_store *kv, int il, const ob_tensor *k, const ob_tensor *v,
                       const int32_t *slots) {
    split_backend *s = sp_of(bk);
    ob_kv_store t;
    int d;
    OB_TRY(kv_for(s, kv, il, &t, &d));
    ob_tensor kk, vv;
    OB_TRY(in(s, d, k, &kk));
    OB_TRY(in(s, d, v, &vv));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->kv_write(e, &t, il, &kk, &vv, slots));
    return kv_written(s, kv, il, d);
}

static int sp_attention(ob_backend *bk, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_token *toks,
                        const ob_attn_params *p, ob_tensor *out) {
    split_backend *s = sp_of(bk);
    ob_kv_store t;
    int d;
    OB_TRY(kv_for(s, kv, il, &t, &d));
    ob_tensor qq, o;
    OB_TRY(in(s, d, q, &qq));
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->attention(e, &t, il, &qq, toks, p, &o));
    return out_done(s, d, out);
}

static int sp_glu(ob_backend *bk, ob_act act, const ob_tensor *gate, const ob_tensor *up, ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = s->cur;
    ob_tensor g, u, o;
    OB_TRY(in(s, d, gate, &g));
    if (up) OB_TRY(in(s, d, up, &u));
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->glu(e, act, &g, up ? &u : NULL, &o));
    return out_done(s, d, out);
}

static int sp_add(ob_backend *bk, const ob_tensor *a, const ob_tensor *bb, ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = place(s, bb); /* a bias row added to activations runs with the bias */
    ob_tensor x, y, o;
    OB_TRY(in(s, d, a, &x));
    OB_TRY(in(s, d, bb, &y));
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->add(e, &x, &y, &o));
    return out_done(s, d, out);
}

static int sp_scale(ob_backend *bk, const ob_tensor *x, float f, ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = s->cur;
    ob_tensor xx, o;
    OB_TRY(in(s, d, x, &xx));
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->scale(e, &xx, f, &o));
    return out_done(s, d, out);
}

static int sp_gather_rows(ob_backend *bk, const ob_tensor *x, const int32_t *idx, int64_t n, ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = s->cur;
    ob_tensor xx, o;
    OB_TRY(in(s, d, x, &xx));
    OB_TRY(out_prep(s, d, out, &o));
    ob_backend *e = on(s, d);
    OB_TRY(e->ops->gather_rows(e, &xx, idx, n, &o));
    return out_done(s, d, out);
}

static int sp_sync(ob_backend *bk) {
    split_backend *s = sp_of(bk);
    if (s->sh->dev->ops->sync) OB_TRY(s->sh->dev->ops->sync(s->sh->dev));
    if (s->host->ops->sync) OB_TRY(s->host->ops->sync(s->host));
    return 0;
}

static int sp_set_batch_invariant(ob_backend *bk, bool on_) {
    split_backend *s = sp_of(bk);
    ob_backend *dev = s->sh->dev, *host = s->host;
    if (dev->ops->set_batch_invariant) OB_TRY(dev->ops->set_batch_invariant(dev, on_));
    if (host->ops->set_batch_invariant) OB_TRY(host->ops->set_batch_invariant(host, on_));
    return 0;
}

static int sp_moe_ffn(ob_backend *bk, const ob_moe_params *p, const ob_tensor *logits, const ob_tensor *h,
                      ob_tensor *out) {
    split_backend *s = sp_of(bk);
    const int d = place(s, p->n_expert > 0 ? &p->gate[0] : NULL);
    ob_backend *e = on(s, d);
    if (!e->ops->moe_ffn) return OB_ERR_UNSUPPORTED; /* the model routes on the host (backend.h) */
    ob_tensor lg, hh, o;
    OB_TRY(in(s, d, logits, &lg));
    OB_TRY(in(s, d, h, &hh));
    OB_TRY(out_prep(s, d, out, &o));
    OB_TRY(e->ops->moe_ffn(e, p, &lg, &hh, &o));
    return out_done(s, d, out);
}

static void sp_free(ob_backend *bk) {
    split_backend *s = sp_of(bk);
    if (s->wstage) s->sh->dev->ops->release(s->sh->dev, s->wstage);
    if (s->bstage) s->sh->dev->ops->release(s->sh->dev, s->bstage);
    for (size_t i = 0; i < s->n_bufs; i++) free_buf(s, s->bufs[i]);
    ob_free(s->bufs);
    ob_free(s->kv_ptr);
    ob_backend_free(s->host);
    if (s->owner) {
        ob_backend_free(s->sh->dev);
        ob_free(s->sh->wr);
        ob_free(s->sh);
    }
    ob_free(s);
}

static const ob_backend_ops split_ops = {
    .name = "split",
    .free = sp_free,
    .alloc = sp_alloc,
    .release = sp_release,
    .upload = sp_upload,
    .download = sp_download,
    .copy = sp_copy,
    .weight = sp_weight,
    .get_rows = sp_get_rows,
    .matmul = sp_matmul,
    .rms_norm = sp_rms_norm,
    .layer_norm = sp_layer_norm,
    .rope = sp_rope,
    .kv_write = sp_kv_write,
    .attention = sp_attention,
    .glu = sp_glu,
    .add = sp_add,
    .scale = sp_scale,
    .gather_rows = sp_gather_rows,
    .sync = sp_sync,
    .argmax_rows = NULL,   /* the logits are the host's: the engine scans them */
    .set_batch_invariant = sp_set_batch_invariant,
    .matmul_a4 = sp_matmul_a4,
    .hadamard_rows = NULL, /* rotated files are refused on a split model */
    .moe_ffn = sp_moe_ffn,
    .layer_qkv = NULL, /* a layer's ops run op by op, each where its weight is */
    .layer_ffn = NULL,
};

static int make(ob_backend *host, split_shared *sh, bool owner, ob_backend **out) {
    split_backend *s = ob_calloc(1, sizeof *s);
    if (!s) return ob_err(OB_ERR_OOM, "split backend");
    s->base.ops = &split_ops;
    s->host = host;
    s->sh = sh;
    s->owner = owner;
    s->cur = HOST;
    *out = &s->base;
    return 0;
}

int ob_backend_split_create(ob_backend *host, ob_backend *dev, int first_dev_layer, int n_layer, ob_backend **out) {
    *out = NULL;
    if (first_dev_layer < 0 || first_dev_layer > n_layer)
        return ob_err(OB_ERR_INVALID_ARG, "split: first device layer %d of %d", first_dev_layer, n_layer);
    split_shared *sh = ob_calloc(1, sizeof *sh);
    if (!sh) return ob_err(OB_ERR_OOM, "split backend");
    sh->dev = dev;
    sh->first_dev_layer = first_dev_layer;
    sh->n_layer = n_layer;
    {
        const char *e = getenv("OB_SPLIT_OFFLOAD_MIN"); /* unset or empty: 32, as llama.cpp */
        sh->offload_min = e && *e ? atoi(e) : 32;
        if (sh->offload_min < 0) sh->offload_min = 0;
    }
    int rc = make(host, sh, true, out);
    if (rc < 0) ob_free(sh);
    return rc;
}

int ob_backend_split_clone(ob_backend *model, ob_backend *host, ob_backend **out) {
    *out = NULL;
    if (!ob_backend_is_split(model)) return ob_err(OB_ERR_INTERNAL, "split: clone of a backend that is not split");
    return make(host, sp_of(model)->sh, false, out);
}

bool ob_backend_is_split(const ob_backend *b) { return b && b->ops == &split_ops; }

int ob_backend_split_first_dev_layer(const ob_backend *b) {
    return ob_backend_is_split(b) ? ((const split_backend *)b)->sh->first_dev_layer : -1;
}

void ob_backend_split_stats(const ob_backend *b, ob_split_stats *st) {
    memset(st, 0, sizeof *st);
    if (ob_backend_is_split(b)) *st = ((const split_backend *)b)->sh->st;
}
