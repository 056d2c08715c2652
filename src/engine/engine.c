/*
 * engine.c - the public model/context API of include/onebit.h: loading a
 * model, contexts with a paged KV cache shared by several sequences, and
 * ob_decode, which turns a batch of (token, position, sequence) into KV
 * entries and logits.
 *
 * ob_decode checks the whole batch and reserves every KV block it needs
 * before any compute, so a batch either runs completely or changes nothing
 * (OB_ERR_FULL when the pool is short).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "../backend/split.h"
#include "../model/model.h"
#include "../quant/hadamard.h"
#include "kv_cache.h"
#include "matmul_hook.h"
#include "onebit.h"

typedef struct ob_seq {
    int32_t n_pos;     /* positions held */
    int32_t *blocks;   /* block table [cap] */
    int32_t n_blocks;
    int32_t cap;
    ob_token *tokens;  /* [n_ctx] the token at each position (for the prefix index) */
    uint64_t *hashes;  /* [n_ctx / block_size + 1] chained hash of each full block */
} ob_seq;

struct ob_context {
    ob_model *model;
    ob_context_params p;
    ob_backend *backend;   /* the CPU: the context's own (threads); a GPU: the model's */
    bool own_backend;
    ob_kv_cache kv;
    ob_seq *seqs;          /* [n_seq_max] */
    float *work;           /* backend workspace for n_batch tokens */
    size_t work_floats;
    /* per-batch host arrays, [n_batch] each */
    int32_t *slots, *out_idx, *batch_to_out, *next_pos;
    int32_t *argmax;       /* [n_batch] per output row: its argmax (-1: not found yet) */
    bool argmax_only;      /* the last batch's rows were found on the device; no logits came back */
    ob_attn_token *attn;
    /* logits: backend buffer and host copy, [n_out_cap][n_vocab] */
    float *logits_dev, *logits;
    int32_t n_out_cap, n_out;
    int32_t n_last;        /* tokens in the last successful batch */
    ob_matmul_hook *hook;  /* matmul observer / activation rotation (matmul_hook.h), or NULL */
    bool embeddings;       /* rows of `logits` hold [n_embd] hidden states (ob_context_set_embeddings) */
};

/* ---------------- model ---------------- */

ob_model_params ob_model_default_params(void) {
    ob_model_params p = {"cpu", 0, 0};
    return p;
}

int (*ob_split_device_factory)(ob_backend **out) = NULL;

/* -ngl N below the layer count: the model's backend becomes a split one (backend/split.h) with
 * the CPU for the first layers and `*dev` (taken over) for the last N. */
static int make_split(ob_model *m, int n_gpu_layers, ob_backend **dev) {
    const char *arch = NULL;
    uint32_t n_layer = 0;
    char key[96];
    OB_TRY(ob_gguf_get_str(m->gguf, "general.architecture", &arch));
    snprintf(key, sizeof key, "%s.block_count", arch);
    if (ob_gguf_get_u32(m->gguf, key, &n_layer) < 0 || n_layer == 0) {
        ob_err_clear();
        return 0; /* no layer count: the architecture's loader will say what is wrong */
    }
    if (n_gpu_layers <= 0 || (uint32_t)n_gpu_layers >= n_layer) return 0;
    ob_backend *cpu = NULL, *split = NULL;
    OB_TRY(ob_backend_cpu_create(1, &cpu));
    int rc = ob_backend_split_create(cpu, *dev, (int)n_layer - n_gpu_layers, (int)n_layer, &split);
    if (rc < 0) {
        ob_backend_free(cpu);
        return rc;
    }
    OB_LOGI("partial offload: layers %u..%u on %s, the first %u layers and the output on the CPU",
            n_layer - (uint32_t)n_gpu_layers, n_layer - 1, (*dev)->ops->name, n_layer - (uint32_t)n_gpu_layers);
    *dev = split;
    return 0;
}

int ob_model_load(const char *path, const ob_model_params *params, ob_model **out) {
    *out = NULL;
    ob_model_params p = params ? *params : ob_model_default_params();
    bool cuda = false;
    int device = 0;
    int dev_rc = ob_backend_parse_device(p.device, &cuda, &device);
    if (dev_rc < 0) return dev_rc;
    ob_model *m = ob_calloc(1, sizeof *m);
    if (!m) return ob_err(OB_ERR_OOM, "model");
    int rc = ob_gguf_open(path, &m->gguf);
    if (rc == 0 && (cuda || dev_rc == 1)) {
        rc = ob_backend_cuda_create(device, &m->backend);
        if (rc < 0 && dev_rc == 1) { /* "auto": no GPU is fine */
            OB_LOGI("no CUDA device (%s); using the CPU", ob_last_error());
            ob_err_clear();
            rc = 0;
        }
    } else if (rc == 0 && p.n_gpu_layers > 0 && ob_split_device_factory) {
        rc = ob_split_device_factory(&m->backend); /* tests: a second CPU backend as the "device" */
    }
    if (rc == 0 && m->backend && p.n_gpu_layers > 0) {
        rc = make_split(m, p.n_gpu_layers, &m->backend);
        if (rc < 0) {
            ob_backend_free(m->backend);
            m->backend = NULL;
        }
    }
    if (rc == 0 && !m->backend) {
        /* The loader's CPU backend only binds weights; contexts bring their own threads. */
        rc = ob_backend_cpu_create(1, &m->backend);
    }
    const char *arch = NULL;
    if (rc == 0) rc = ob_gguf_get_str(m->gguf, "general.architecture", &arch);
    if (rc == 0) {
        snprintf(m->arch_name, sizeof m->arch_name, "%s", arch);
        m->arch = ob_arch_find(arch);
        if (!m->arch)
            rc = ob_err(OB_ERR_UNSUPPORTED, "architecture '%s' is not supported yet (supported: %s)", arch, ob_arch_list());
    }
    if (rc == 0) {
        const char *name = NULL;
        if (ob_gguf_get_str(m->gguf, "general.name", &name) == 0)
            snprintf(m->name, sizeof m->name, "%s", name);
        else
            snprintf(m->name, sizeof m->name, "%s", m->arch_name);
        ob_err_clear();
        rc = m->arch->load(m);
    }
    if (rc == 0) rc = ob_model_load_tokenizer(m);
    if (rc < 0) {
        ob_err_wrap(rc, "%s", path);
        ob_model_free(m);
        return rc;
    }
    OB_LOGI("loaded %s: %s, %lld layers, %lld embd, %llu params", path, m->arch_name, (long long)m->hp.n_layer,
            (long long)m->hp.n_embd, (unsigned long long)m->n_params);
    *out = m;
    return 0;
}

void ob_model_free(ob_model *m) {
    if (!m) return;
    ob_model_free_tokenizer(m);
    ob_free(m->layers);
    ob_free(m->rope_freqs);
    ob_backend_free(m->backend);
    ob_gguf_free(m->gguf);
    ob_free(m);
}

const char *ob_model_arch(const ob_model *m) { return m->arch_name; }
const char *ob_model_name(const ob_model *m) { return m->name; }
int32_t ob_model_n_vocab(const ob_model *m) { return (int32_t)m->hp.n_vocab; }
int32_t ob_model_n_ctx_train(const ob_model *m) { return (int32_t)m->hp.n_ctx_train; }
int32_t ob_model_n_embd(const ob_model *m) { return (int32_t)m->hp.n_embd; }
int32_t ob_model_n_layer(const ob_model *m) { return (int32_t)m->hp.n_layer; }
uint64_t ob_model_n_params(const ob_model *m) { return m->n_params; }
uint64_t ob_model_size_bytes(const ob_model *m) { return m->n_bytes; }

void ob_model_desc(const ob_model *m, char *buf, size_t size) {
    double p = (double)m->n_params;
    const char *unit = p >= 1e9 ? "B" : p >= 1e6 ? "M" : "K";
    double scaled = p >= 1e9 ? p / 1e9 : p >= 1e6 ? p / 1e6 : p / 1e3;
    snprintf(buf, size, "%s %.1f%s %s", m->arch_name, scaled, unit, ob_type_name(m->layers ? m->layers[0].wq.type : 0));
}

/* ---------------- context ---------------- */

ob_context_params ob_context_default_params(void) {
    ob_context_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 0;
    p.n_seq_max = 1;
    p.n_batch = 512;
    p.n_threads = 0;
    p.kv_type = OB_KV_F16;
    p.kv_block_size = 32;
    p.kv_blocks = 0;
    return p;
}

const ob_context_params *ob_context_get_params(const ob_context *ctx) { return &ctx->p; }

/* The output rows reuse the logits buffers: n_embd <= n_vocab floats each.
 * Only llama.c's forward honours embd_only, so the check is on the arch
 * object (a llama file with experts runs another forward). */
extern const ob_arch ob_arch_llama, ob_arch_qwen2, ob_arch_qwen3;

int ob_context_set_embeddings(ob_context *c, bool on) {
    const ob_model *m = c->model;
    if (on && m->arch != &ob_arch_llama && m->arch != &ob_arch_qwen2 && m->arch != &ob_arch_qwen3 &&
        !ob_arch_is_encoder(m->arch))
        return ob_err(OB_ERR_UNSUPPORTED,
                      "embeddings are not implemented for architecture '%s' (llama, qwen2, qwen3, bert, modern-bert are)",
                      m->arch_name);
    if (on && m->hp.n_embd > m->hp.n_vocab)
        return ob_err(OB_ERR_UNSUPPORTED, "embeddings need n_embd (%lld) <= n_vocab (%lld)", (long long)m->hp.n_embd,
                      (long long)m->hp.n_vocab);
    c->embeddings = on;
    c->n_out = 0;
    return 0;
}

int ob_context_set_batch_invariant(ob_context *c, bool on) {
    if (!c->backend->ops->set_batch_invariant) return 0; /* the CPU backend: always invariant */
    return c->backend->ops->set_batch_invariant(c->backend, on);
}

const float *ob_get_embeddings(ob_context *c, int32_t i) {
    if (!c->embeddings || i < 0 || i >= c->n_last || c->n_out == 0) return NULL;
    int32_t o = c->batch_to_out[i];
    if (o < 0 || o >= c->n_out) return NULL;
    return c->logits + (size_t)o * (size_t)c->model->hp.n_embd;
}

bool ob_model_is_encoder(const ob_model *m) { return ob_arch_is_encoder(m->arch); }

int32_t ob_model_pooling_type(const ob_model *m) {
    int64_t v = -1;
    if (ob_model_key_u32_opt(m, "pooling_type", &v) < 0) return -1;
    return (int32_t)v;
}

static ob_type kv_ob_type(ob_kv_type t) {
    switch (t) {
    case OB_KV_F32: return OB_TYPE_F32;
    case OB_KV_Q8_0: return OB_TYPE_Q8_0;
    default: return OB_TYPE_F16;
    }
}

int ob_context_create(ob_model *m, const ob_context_params *params, ob_context **out) {
    *out = NULL;
    ob_context_params p = params ? *params : ob_context_default_params();
    if (p.n_ctx <= 0) p.n_ctx = m->hp.n_ctx_train < 4096 ? (int32_t)m->hp.n_ctx_train : 4096;
    if (p.n_seq_max <= 0) p.n_seq_max = 1;
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.kv_block_size <= 0) p.kv_block_size = 32;
    if (p.n_seq_max > 4096 || p.n_batch > 1 << 20 || p.n_ctx > 1 << 24)
        return ob_err(OB_ERR_INVALID_ARG, "context: n_seq_max %d, n_batch %d or n_ctx %d is too large", p.n_seq_max,
                      p.n_batch, p.n_ctx);
    int64_t blocks_per_seq = (p.n_ctx + p.kv_block_size - 1) / p.kv_block_size;
    if (p.kv_blocks <= 0) p.kv_blocks = blocks_per_seq * p.n_seq_max;

    ob_context *c = ob_calloc(1, sizeof *c);
    if (!c) return ob_err(OB_ERR_OOM, "context");
    c->model = m;
    c->p = p;
    int rc = 0;
    if (ob_backend_is_cpu(m->backend)) {
        rc = ob_backend_cpu_create(p.n_threads, &c->backend);
        c->own_backend = rc == 0;
    } else if (ob_backend_is_split(m->backend)) {
        /* partial offload: this context's CPU threads for the host layers, the model's GPU */
        ob_backend *cpu = NULL;
        rc = ob_backend_cpu_create(p.n_threads, &cpu);
        if (rc == 0) rc = ob_backend_split_clone(m->backend, cpu, &c->backend);
        if (rc < 0) ob_backend_free(cpu);
        c->own_backend = rc == 0;
    } else {
        c->backend = m->backend;
    }
    if (rc == 0)
        rc = ob_kv_cache_init(&c->kv, c->backend, kv_ob_type(p.kv_type), (int)m->hp.n_layer,
                              m->hp.n_head_kv * m->hp.head_dim, p.kv_block_size, p.kv_blocks);
    if (rc == 0) {
        c->seqs = ob_calloc((size_t)p.n_seq_max, sizeof *c->seqs);
        c->slots = ob_calloc((size_t)p.n_batch, sizeof(int32_t));
        c->out_idx = ob_calloc((size_t)p.n_batch, sizeof(int32_t));
        c->batch_to_out = ob_calloc((size_t)p.n_batch, sizeof(int32_t));
        c->next_pos = ob_calloc((size_t)p.n_seq_max, sizeof(int32_t));
        c->attn = ob_calloc((size_t)p.n_batch, sizeof(ob_attn_token));
        c->argmax = ob_calloc((size_t)p.n_batch, sizeof(int32_t));
        if (!c->seqs || !c->slots || !c->out_idx || !c->batch_to_out || !c->next_pos || !c->attn || !c->argmax)
            rc = ob_err(OB_ERR_OOM, "context tables");
        for (int32_t s = 0; rc == 0 && s < p.n_seq_max; s++) {
            c->seqs[s].tokens = ob_malloc((size_t)p.n_ctx * sizeof(ob_token));
            c->seqs[s].hashes = ob_calloc((size_t)(p.n_ctx / p.kv_block_size + 1), sizeof(uint64_t));
            if (!c->seqs[s].tokens || !c->seqs[s].hashes) rc = ob_err(OB_ERR_OOM, "context tables");
        }
    }
    if (rc == 0 && ob_gguf_get(m->gguf, OB_HADAMARD_KEY)) {
        /* a rotated (--hadamard) file: its activations must be rotated too */
        uint32_t seed = OB_HADAMARD_DEFAULT_SEED;
        const char *rot = NULL;
        if (ob_gguf_get_str(m->gguf, OB_HADAMARD_KEY, &rot) < 0 || strcmp(rot, OB_HADAMARD_NAME))
            rc = ob_err(OB_ERR_UNSUPPORTED, "%s: rotation '%s' is not one this build knows", OB_HADAMARD_KEY,
                        rot ? rot : "?");
        else if (!ob_backend_is_cpu(c->backend) && !c->backend->ops->hadamard_rows)
            rc = ob_err(OB_ERR_UNSUPPORTED, "a rotated (--hadamard) model needs activation rotation, which the %s "
                                            "backend does not have (CUDA: not with OB_CUDA_ROTATE=0); load it with "
                                            "--device cpu",
                        c->backend->ops->name);
        else if (ob_gguf_get_u32(m->gguf, OB_HADAMARD_SEED_KEY, &seed) < 0)
            rc = ob_err(OB_ERR_FORMAT, "%s is missing", OB_HADAMARD_SEED_KEY);
        if (rc == 0) rc = ob_matmul_hook_create(c->backend, &c->hook);
        if (rc == 0) {
            c->hook->rotate = true;
            c->hook->seed = seed;
        }
    }
    const char *act_sim = getenv("OB_ACT_SIM");
    if (rc == 0 && act_sim && *act_sim) {
        /* measurement knob (docs/quantization.md): round projection inputs through a 32-block type */
        int t = ob_type_from_name(act_sim);
        if (t < 0 || !ob_type_get(t)->from_float_ref || ob_type_get(t)->block_size != 32)
            rc = ob_err(OB_ERR_INVALID_ARG, "OB_ACT_SIM=%s: not a type with blocks of 32 (q4_0, q8_0, iq4_nl ...)",
                        act_sim);
        else if (!ob_backend_is_cpu(c->backend))
            rc = ob_err(OB_ERR_UNSUPPORTED, "OB_ACT_SIM works on CPU contexts only");
        if (rc == 0 && !c->hook) rc = ob_matmul_hook_create(c->backend, &c->hook);
        if (rc == 0) c->hook->act_sim = t;
    }
    if (rc == 0 && p.act_bits != 0 && p.act_bits != 4 && p.act_bits != 8)
        rc = ob_err(OB_ERR_INVALID_ARG, "act_bits %d: expected 4 or 8 (0: the file's default)", p.act_bits);
    if (rc == 0) {
        /* W4A4: the default for a rotated file (the point of rotating), asked for otherwise;
         * a backend without the path (CUDA with OB_CUDA_ROTATE=0) keeps 8-bit activations */
        int bits = p.act_bits ? p.act_bits : c->hook && c->hook->rotate ? 4 : 8;
        if (bits == 4 && !c->backend->ops->matmul_a4) {
            if (p.act_bits == 4) OB_LOGW("act_bits 4: the %s backend has no W4A4 path; using 8", c->backend->ops->name);
            bits = 8;
        }
        if (bits == 4 && !c->hook) rc = ob_matmul_hook_create(c->backend, &c->hook);
        if (rc == 0 && bits == 4) {
            c->hook->act_bits = 4;
            OB_LOGI("context: 4-bit activations for the Q4_0 projections (W4A4; --act-bits 8 for 8-bit)");
        }
        c->p.act_bits = bits;
    }
    if (rc == 0) {
        c->work_floats = m->arch->work_size(m, p.n_batch);
        rc = c->backend->ops->alloc(c->backend, c->work_floats * sizeof(float), (void **)&c->work);
    }
    if (rc < 0) {
        ob_context_free(c);
        return rc;
    }
    OB_LOGI("context: n_ctx %d x %d sequences, KV %s, %lld blocks of %d (%.1f MiB)", p.n_ctx, p.n_seq_max,
            ob_type_name(c->kv.store.type), (long long)p.kv_blocks, p.kv_block_size,
            (double)ob_kv_cache_bytes(&c->kv) / (1 << 20));
    *out = c;
    return 0;
}

ob_backend *ob_context_backend(ob_context *c) { return c->backend; }

void ob_context_free(ob_context *c) {
    if (!c) return;
    if (c->seqs)
        for (int32_t s = 0; s < c->p.n_seq_max; s++) {
            for (int32_t i = 0; i < c->seqs[s].n_blocks; i++) ob_kv_block_release(&c->kv, c->seqs[s].blocks[i]);
            ob_free(c->seqs[s].blocks);
            ob_free(c->seqs[s].tokens);
            ob_free(c->seqs[s].hashes);
        }
    ob_matmul_hook_free(c->hook); /* its buffers are the backend's memory */
    if (c->backend) {
        ob_kv_cache_free(&c->kv);
        if (c->work) c->backend->ops->release(c->backend, c->work);
        if (c->logits_dev) c->backend->ops->release(c->backend, c->logits_dev);
    }
    ob_free(c->logits);
    ob_free(c->seqs);
    ob_free(c->slots);
    ob_free(c->out_idx);
    ob_free(c->batch_to_out);
    ob_free(c->argmax);
    ob_free(c->next_pos);
    ob_free(c->attn);
    if (c->own_backend) ob_backend_free(c->backend);
    ob_free(c);
}

int ob_context_set_matmul_observer(ob_context *c, ob_matmul_observer fn, void *user) {
    if (!ob_backend_is_cpu(c->backend))
        return ob_err(OB_ERR_UNSUPPORTED, "matmul observers need a CPU context (activations in host memory)");
    if (!c->hook) OB_TRY(ob_matmul_hook_create(c->backend, &c->hook));
    c->hook->obs = fn;
    c->hook->obs_user = user;
    c->hook->gguf = c->model->gguf;
    return 0;
}

/* ---------------- sequences ---------------- */

static int seq_reserve_table(ob_seq *s, int32_t n) {
    if (n <= s->cap) return 0;
    int32_t cap = s->cap ? s->cap : 8;
    while (cap < n) cap *= 2;
    int32_t *b = ob_realloc(s->blocks, (size_t)cap * sizeof(int32_t));
    if (!b) return ob_err(OB_ERR_OOM, "block table");
    s->blocks = b;
    s->cap = cap;
    return 0;
}

static int check_seq(const ob_context *c, int32_t s) {
    if (s < 0 || s >= c->p.n_seq_max)
        return ob_err(OB_ERR_INVALID_ARG, "sequence id %d is outside 0..%d", s, c->p.n_seq_max - 1);
    return 0;
}

int32_t ob_seq_len(const ob_context *c, int32_t s) {
    if (check_seq(c, s) < 0) return 0;
    return c->seqs[s].n_pos;
}

static void seq_truncate(ob_context *c, ob_seq *s, int32_t p0) {
    if (p0 < 0) p0 = 0;
    if (p0 < s->n_pos) s->n_pos = p0;
    int32_t keep = (p0 + c->p.kv_block_size - 1) / c->p.kv_block_size;
    while (s->n_blocks > keep) ob_kv_block_release(&c->kv, s->blocks[--s->n_blocks]);
}

int ob_seq_remove(ob_context *c, int32_t seq, int32_t p0) {
    OB_TRY(check_seq(c, seq));
    seq_truncate(c, &c->seqs[seq], p0);
    return 0;
}

int ob_seq_copy(ob_context *c, int32_t src, int32_t dst, int32_t n_pos) {
    OB_TRY(check_seq(c, src));
    OB_TRY(check_seq(c, dst));
    if (src == dst) return 0;
    ob_seq *s = &c->seqs[src], *d = &c->seqs[dst];
    if (n_pos < 0 || n_pos > s->n_pos) n_pos = s->n_pos;
    seq_truncate(c, d, 0);
    int32_t nb = (n_pos + c->p.kv_block_size - 1) / c->p.kv_block_size;
    OB_TRY(seq_reserve_table(d, nb));
    for (int32_t i = 0; i < nb; i++) {
        ob_kv_block_retain(&c->kv, s->blocks[i]);
        d->blocks[i] = s->blocks[i];
    }
    d->n_blocks = nb;
    d->n_pos = n_pos;
    memcpy(d->tokens, s->tokens, (size_t)n_pos * sizeof(ob_token));
    memcpy(d->hashes, s->hashes, (size_t)(n_pos / c->p.kv_block_size) * sizeof(uint64_t));
    return 0;
}

int ob_seq_reuse_prefix(ob_context *c, int32_t seq, const ob_token *tokens, int32_t n, int32_t *n_reused) {
    *n_reused = 0;
    OB_TRY(check_seq(c, seq));
    ob_seq *s = &c->seqs[seq];
    if (s->n_pos != 0) return ob_err(OB_ERR_INVALID_ARG, "prefix reuse needs an empty sequence (%d holds %d)", seq, s->n_pos);
    const int32_t bs = c->p.kv_block_size;
    if (n > c->p.n_ctx) n = c->p.n_ctx;
    int32_t full = n / bs;
    OB_TRY(seq_reserve_table(s, full > 0 ? full : 1));
    uint64_t parent = 0;
    int32_t k = 0;
    for (; k < full; k++) {
        uint64_t h = ob_kv_hash(parent, tokens + (size_t)k * bs, bs);
        int32_t b = ob_kv_lookup(&c->kv, h, tokens + (size_t)k * bs);
        if (b < 0) break;
        ob_kv_block_retain(&c->kv, b);
        s->blocks[k] = b;
        s->hashes[k] = h;
        parent = h;
    }
    s->n_blocks = k;
    s->n_pos = k * bs;
    memcpy(s->tokens, tokens, (size_t)s->n_pos * sizeof(ob_token));
    *n_reused = s->n_pos;
    return 0;
}

void ob_kv_usage(const ob_context *c, int64_t *used, int64_t *total) {
    if (used) *used = c->kv.n_blocks - ob_kv_available(&c->kv);
    if (total) *total = c->kv.n_blocks;
}

/* ---------------- decode ---------------- */

/* Blocks sequence s must get so it can hold positions up to new_len-1,
 * counting a copy of a shared block that will be written. */
static int32_t blocks_needed(const ob_context *c, const ob_seq *s, int32_t new_len) {
    const int32_t bs = c->p.kv_block_size;
    int32_t need = (new_len + bs - 1) / bs - s->n_blocks;
    if (need < 0) need = 0;
    /* The block holding position n_pos is written; if it exists and is shared, copy it. */
    int32_t first = s->n_pos / bs;
    if (new_len > s->n_pos && first < s->n_blocks && c->kv.ref[s->blocks[first]] > 1) need++;
    return need;
}

static int seq_grow(ob_context *c, ob_seq *s, int32_t new_len) {
    const int32_t bs = c->p.kv_block_size;
    int32_t first = s->n_pos / bs;
    /* A block this sequence alone holds is written in place: if the prefix
     * index knows it, its contents are about to change, so forget it. */
    if (new_len > s->n_pos && first < s->n_blocks && c->kv.ref[s->blocks[first]] == 1)
        ob_kv_unregister(&c->kv, s->blocks[first]);
    if (new_len > s->n_pos && first < s->n_blocks && c->kv.ref[s->blocks[first]] > 1) {
        int32_t nb = ob_kv_block_alloc(&c->kv);
        OB_ASSERT(nb >= 0); /* reserved by the caller */
        OB_TRY(ob_kv_block_copy(&c->kv, nb, s->blocks[first]));
        ob_kv_block_release(&c->kv, s->blocks[first]);
        s->blocks[first] = nb;
    }
    int32_t want = (new_len + bs - 1) / bs;
    OB_TRY(seq_reserve_table(s, want));
    while (s->n_blocks < want) {
        int32_t nb = ob_kv_block_alloc(&c->kv);
        OB_ASSERT(nb >= 0);
        s->blocks[s->n_blocks++] = nb;
    }
    return 0;
}

static int ensure_logits(ob_context *c, int32_t n_out) {
    if (n_out <= c->n_out_cap) return 0;
    size_t bytes = ob_mul_size((size_t)n_out, (size_t)c->model->hp.n_vocab * sizeof(float));
    float *dev = NULL, *host = ob_malloc(bytes);
    int rc = host ? c->backend->ops->alloc(c->backend, bytes, (void **)&dev) : ob_err(OB_ERR_OOM, "logits");
    if (rc < 0) {
        ob_free(host);
        return rc;
    }
    if (c->logits_dev) c->backend->ops->release(c->backend, c->logits_dev);
    ob_free(c->logits);
    c->logits_dev = dev;
    c->logits = host;
    c->n_out_cap = n_out;
    return 0;
}

int ob_decode(ob_context *c, const ob_batch *batch) {
    ob_model *m = c->model;
    const int32_t n = batch->n_tokens;
    c->n_out = 0;
    c->n_last = 0;
    if (n <= 0 || n > c->p.n_batch)
        return ob_err(OB_ERR_INVALID_ARG, "batch of %d tokens (1 to n_batch = %d allowed)", n, c->p.n_batch);
    if (!batch->token || !batch->pos || !batch->seq_id) return ob_err(OB_ERR_INVALID_ARG, "batch arrays missing");
    if (ob_arch_is_encoder(m->arch) && !c->embeddings)
        return ob_err(OB_ERR_UNSUPPORTED,
                      "'%s' is an encoder (an embedding model): it gives embeddings, not text; turn embeddings on "
                      "(ob_context_set_embeddings, `1bit serve --embeddings`)",
                      m->arch_name);

    /* 1. validate: known tokens, known sequences, positions continuing each sequence */
    for (int32_t s = 0; s < c->p.n_seq_max; s++) c->next_pos[s] = c->seqs[s].n_pos;
    for (int32_t i = 0; i < n; i++) {
        int32_t s = batch->seq_id[i];
        OB_TRY(check_seq(c, s));
        if (batch->token[i] < 0 || batch->token[i] >= m->hp.n_vocab)
            return ob_err(OB_ERR_INVALID_ARG, "token %d at batch index %d is outside the vocabulary (%lld)",
                          batch->token[i], i, (long long)m->hp.n_vocab);
        if (batch->pos[i] != c->next_pos[s])
            return ob_err(OB_ERR_INVALID_ARG, "batch index %d: sequence %d continues at position %d, not %d", i, s,
                          c->next_pos[s], batch->pos[i]);
        if (batch->pos[i] >= c->p.n_ctx)
            return ob_err(OB_ERR_FULL, "sequence %d reached the context size (%d positions)", s, c->p.n_ctx);
        c->next_pos[s]++;
    }
    /* 2. reserve KV blocks for everything, or fail without changing anything */
    int64_t need = 0;
    for (int32_t s = 0; s < c->p.n_seq_max; s++)
        if (c->next_pos[s] > c->seqs[s].n_pos) need += blocks_needed(c, &c->seqs[s], c->next_pos[s]);
    if (need > ob_kv_available(&c->kv))
        return ob_err(OB_ERR_FULL, "KV cache full: the batch needs %lld more blocks, %lld are free", (long long)need,
                      (long long)ob_kv_available(&c->kv));
    int32_t n_out = 0;
    bool only_argmax = batch->logits != NULL && !c->embeddings && c->backend->ops->argmax_rows != NULL;
    for (int32_t i = 0; i < n; i++) {
        bool want = batch->logits ? batch->logits[i] != 0 : i == n - 1;
        c->batch_to_out[i] = want ? n_out : -1;
        if (want) c->out_idx[n_out++] = i;
        if (want && (!batch->logits || batch->logits[i] != OB_LOGITS_ARGMAX)) only_argmax = false;
    }
    c->argmax_only = false;
    OB_TRY(ensure_logits(c, n_out > 0 ? n_out : 1));
    int rc = 0;
    for (int32_t s = 0; s < c->p.n_seq_max && rc == 0; s++)
        if (c->next_pos[s] > c->seqs[s].n_pos) rc = seq_grow(c, &c->seqs[s], c->next_pos[s]);

    /* 3. where each token's K/V goes and what it attends to */
    const int32_t bs = c->p.kv_block_size;
    const int32_t win = (int32_t)m->hp.sliding_window;
    for (int32_t i = 0; i < n && rc == 0; i++) {
        const ob_seq *s = &c->seqs[batch->seq_id[i]];
        int32_t p = batch->pos[i];
        c->slots[i] = s->blocks[p / bs] * bs + p % bs;
        c->attn[i].block_table = s->blocks;
        c->attn[i].pos = p;
        c->attn[i].kv_start = win > 0 && p - win + 1 > 0 ? p - win + 1 : 0;
    }

    /* 4. run */
    if (rc == 0) {
        ob_forward_args a = {n,     batch->token, batch->pos,    c->slots, c->attn,        &c->kv.store,
                             n_out, c->out_idx,   c->logits_dev, c->work,  c->work_floats, c->backend, c->embeddings};
        if (c->hook) ob_matmul_hook_enter(c->hook, c->backend);
        rc = m->arch->forward(m, &a);
        if (c->hook) {
            ob_matmul_hook_leave(c->hook, c->backend);
            if (rc == 0 && c->hook->rc < 0) rc = c->hook->rc;
            c->hook->rc = 0;
        }
    }
    for (int32_t o = 0; o < n_out; o++) c->argmax[o] = -1;
    if (rc == 0 && n_out > 0 && only_argmax) {
        /* every row wants only its argmax: found where the logits are; n_out ids come back */
        ob_tensor lg;
        ob_tensor_f32_2d(&lg, m->hp.n_vocab, n_out, c->logits_dev);
        rc = c->backend->ops->argmax_rows(c->backend, &lg, c->argmax);
        c->argmax_only = rc == 0;
    } else if (rc == 0 && n_out > 0) {
        rc = c->backend->ops->download(c->backend, c->logits, c->logits_dev,
                                       (size_t)n_out * (size_t)(c->embeddings ? m->hp.n_embd : m->hp.n_vocab) * sizeof(float));
    }
    if (rc < 0) {
        /* Undo: the sequences keep their old lengths; new blocks are returned. */
        for (int32_t s = 0; s < c->p.n_seq_max; s++) seq_truncate(c, &c->seqs[s], c->seqs[s].n_pos);
        return rc;
    }
    for (int32_t i = 0; i < n; i++) c->seqs[batch->seq_id[i]].tokens[batch->pos[i]] = batch->token[i];
    for (int32_t s = 0; s < c->p.n_seq_max; s++) {
        ob_seq *q = &c->seqs[s];
        /* register every block this batch completed, chaining the hashes */
        for (int32_t k = q->n_pos / bs; k < c->next_pos[s] / bs; k++) {
            uint64_t parent = k > 0 ? q->hashes[k - 1] : 0;
            q->hashes[k] = ob_kv_hash(parent, q->tokens + (size_t)k * bs, bs);
            ob_kv_register(&c->kv, q->blocks[k], q->hashes[k], q->tokens + (size_t)k * bs);
        }
        q->n_pos = c->next_pos[s];
    }
    c->n_out = n_out;
    c->n_last = n;
    return 0;
}

ob_token ob_get_argmax(ob_context *c, int32_t i) {
    if (c->embeddings || i < 0 || i >= c->n_last || c->n_out == 0) return -1;
    int32_t o = c->batch_to_out[i];
    if (o < 0 || o >= c->n_out) return -1;
    if (c->argmax[o] < 0) { /* scan the downloaded row once (first of equals, as the samplers do) */
        const float *l = c->logits + (size_t)o * (size_t)c->model->hp.n_vocab;
        int32_t best = 0;
        for (int32_t k = 1; k < (int32_t)c->model->hp.n_vocab; k++)
            if (l[k] > l[best]) best = k;
        c->argmax[o] = best;
    }
    return c->argmax[o];
}

const float *ob_get_logits(ob_context *c, int32_t i) {
    if (c->embeddings || c->argmax_only) return NULL;
    if (i < 0 || i >= c->n_last || c->n_out == 0) return NULL;
    int32_t o = c->batch_to_out[i];
    if (o < 0 || o >= c->n_out) return NULL;
    return c->logits + (size_t)o * (size_t)c->model->hp.n_vocab;
}
