/*
 * split.h - partial offload: one backend made of two, the host (CPU) and a
 * device (the GPU), with the model's layers divided between them (`-ngl N`:
 * the last N transformer layers on the device, everything else - the token
 * embeddings, the first layers, the output norm and head - on the host, as
 * llama.cpp places them).
 *
 * The model code does not know: it calls ops on the split backend, which
 * runs each op where its weight lives (matmul, norms with a weight,
 * get_rows, moe_ffn), where its layer's KV pools live (kv_write,
 * attention), or where the previous op ran (rope, glu, add, ...).
 *
 * Memory the split backend hands out (activations, KV pools, logits) has
 * a host copy (an anonymous mapping: pages that are never touched cost
 * nothing) and, from its first use there, a device copy of the same size.
 * Which copy holds the latest bytes is tracked per byte range; before an op
 * runs its inputs are brought up to date where it runs (an upload or a
 * download of just the stale ranges), after it its outputs are marked as
 * living there. So a forward pass moves the residual stream across once
 * at each boundary between host and device layers, and the KV pools of a
 * layer stay where its layer runs.
 *
 * Weights: the model's load binds each tensor through the split backend's
 * `weight` op, which passes "blk.<i>." tensors of device layers to the
 * device backend and the rest to the host's; the device's weight ranges are
 * remembered to place ops.
 *
 * Prompt batches: a product with a host weight and at least
 * OB_SPLIT_OFFLOAD_MIN tokens (default 32; 0: never) runs on the device,
 * the weight sent up for it (stats: bytes_w), as llama.cpp does with large
 * batches; single tokens and small batches stay with their weights.
 */
#ifndef OB_BACKEND_SPLIT_H
#define OB_BACKEND_SPLIT_H

#include "backend.h"

/* Layers first_dev_layer .. n_layer - 1 on `dev`, the rest on `host`. The
 * split backend owns both and frees them with itself. */
int ob_backend_split_create(ob_backend *host, ob_backend *dev, int first_dev_layer, int n_layer, ob_backend **out);
/* A second split backend for a context: the same device backend and weight
 * placement as `model` (a split backend, which must outlive it), its own
 * host backend `host` (owned: the context's threads). */
int ob_backend_split_clone(ob_backend *model, ob_backend *host, ob_backend **out);
bool ob_backend_is_split(const ob_backend *b);
/* The first device layer of a split backend. */
int ob_backend_split_first_dev_layer(const ob_backend *b);

/* What crossed between the halves so far (the model's backend and its
 * contexts' together): bytes and copies each way, ops run on each side. */
typedef struct ob_split_stats {
    uint64_t bytes_up, bytes_down, n_up, n_down;
    uint64_t ops[2]; /* [0] host, [1] device */
    uint64_t bytes_w, n_w; /* host weights sent up for products run on the device (offloaded batches) */
} ob_split_stats;
void ob_backend_split_stats(const ob_backend *b, ob_split_stats *st);

/* Tests only (defined in src/engine/engine.c): when set, ob_model_load on
 * the CPU device with n_gpu_layers > 0 builds a split model whose "device"
 * half comes from this factory (a second CPU backend), so the placement and
 * the copies between the halves are checked on machines without a GPU. */
extern int (*ob_split_device_factory)(ob_backend **out);

#endif
