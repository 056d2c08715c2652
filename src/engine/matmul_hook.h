/*
 * matmul_hook.h - one place where the engine can see and change what enters
 * a weight matmul, without the model code knowing:
 *   - an observer gets every matmul's input activations (1bit imatrix
 *     collects the squared activations per weight from it);
 *   - a rotated file (OB_HADAMARD_KEY, src/quant/hadamard.h) gets its
 *     activations rotated before every matmul whose weight was rotated;
 *   - act_bits 4 (ob_context_params.act_bits; the default for a rotated
 *     file) sends the projections with Q4_0 weights to the backend's
 *     matmul_a4: activations rounded to 4-bit blocks (after the rotation)
 *     and integer W4A4 kernels; other matmuls keep 8-bit activations;
 *   - OB_ACT_SIM=q4_0 (or another 32-block type) rounds the projections'
 *     inputs through that type first: a simulation of low-bit activations
 *     for measuring accuracy, not a fast path (it overrides act_bits 4).
 *
 * The hook is an ops table: a copy of the backend's own, with matmul
 * replaced. While a forward pass runs, the context points its backend's
 * `ops` at the hook (ob_matmul_hook_enter) and back afterwards (leave), so
 * every other op runs untouched on the real backend.
 *
 * Memory: the rotated copy of the input and the rotation's signs live in the
 * backend's memory (its alloc: device memory on CUDA), so rotation and W4A4
 * run on any backend with hadamard_rows (and matmul_a4); the signs are made
 * on the host once per width and uploaded once. The observer and OB_ACT_SIM
 * read and round activations on the host, so contexts on a GPU refuse those
 * two (docs/quantization.md).
 */
#ifndef OB_ENGINE_MATMUL_HOOK_H
#define OB_ENGINE_MATMUL_HOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../gguf/gguf.h"
#include "onebit.h"

typedef struct ob_matmul_hook {
    ob_backend_ops ops;          /* first member: b->ops points here while entered */
    const ob_backend_ops *inner; /* the backend's own table */
    ob_matmul_observer obs;      /* NULL: none */
    const ob_gguf *gguf;         /* the model's file: finds the expert index of a weight view */
    void *obs_user;
    ob_backend *backend;         /* whose memory scratch and signs are */
    bool rotate;                 /* rotate inputs of rotated weights */
    uint32_t seed;
    float *scratch;              /* [scratch_cap] rotated copy of the input (backend memory) */
    float *signs;                /* [signs_n] the rotation's column signs, ob_hadamard_signs (backend memory) */
    int64_t signs_n;
    size_t scratch_cap;
    int act_bits;                /* 4: Q4_0 projections go to inner->matmul_a4; else 8-bit */
    int act_sim;                 /* a type (Q4_0, Q8_0, ...) whose rounding the projections' inputs get
                                    before the matmul, to measure low-bit activations; -1: none */
    void *act_buf;               /* [act_buf_cap] one quantized row */
    size_t act_buf_cap;
    int rc;                      /* first allocation failure inside matmul */
} ob_matmul_hook;

/* A hook on backend b (not entered yet). Free it before the backend: its
 * buffers are b's memory. */
int ob_matmul_hook_create(ob_backend *b, ob_matmul_hook **out);
void ob_matmul_hook_free(ob_matmul_hook *h);
void ob_matmul_hook_enter(ob_matmul_hook *h, ob_backend *b);
void ob_matmul_hook_leave(ob_matmul_hook *h, ob_backend *b);

#endif
