/*
 * hf_gptlike.h - the converter's knowledge of the GPT-lineage families
 * (LayerNorm decoders whose checkpoints do not use the Llama layout):
 * StableLM, GPT-NeoX, GPT-2, StarCoder2, GPTBigCode, Falcon, GPT-J, Cohere,
 * Nemotron, OPT, CodeGen, BLOOM. hf_config.c hands their config.json
 * here, convert.c asks here for each tensor's GGUF name and how its data is
 * rearranged. Private to src/convert.
 */
#ifndef OB_CONVERT_HF_GPTLIKE_H
#define OB_CONVERT_HF_GPTLIKE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../gguf/gguf.h"
#include "hf_internal.h"

/* How a tensor's data changes on the way to the GGUF file. */
typedef enum ob_hf_xform {
    OB_HF_XF_NONE = 0,
    OB_HF_XF_TRANSPOSE,  /* GPT-2's Conv1D: the source is [in, out]; GGUF rows are the out dimension */
    OB_HF_XF_QKV_GROUPS, /* fused qkv rows [n_head_kv][q of the group, k, v][head_dim] -> [Q | K | V] */
    OB_HF_XF_ADD_ONE,    /* Nemotron's LayerNorm1P: written as 1 + w, as llama.cpp does */
    OB_HF_XF_POS_OFFSET, /* OPT's positions: the first OB_HF_OPT_POS_OFFSET rows dropped, so row p is position p */
    OB_HF_XF_CODEGEN_QKV, /* CodeGen's qkv_proj rows [4 chunks][q, v, k][n_head/4 heads][head_dim] -> [Q | K | V] */
} ob_hf_xform;

/* OPT's learned positions are shifted: position p uses row p + 2 (a
 * leftover of fairseq's padding index). */
#define OB_HF_OPT_POS_OFFSET 2
/* CodeGen's qkv_proj is split into this many model-parallel chunks. */
#define OB_HF_CODEGEN_MP 4

/* One source tensor's place in the GGUF file. */
typedef struct ob_hf_gmap {
    char gguf[64];       /* full GGUF name ("blk.3.attn_qkv.weight") */
    const char *suffix;  /* the name without "blk.N." */
    int layer;           /* -1: a global tensor */
    int64_t rows, cols;  /* the shape the source must have, PyTorch order; cols 0 = 1-D */
    ob_hf_xform xform;
} ob_hf_gmap;

/* True for the architectures this file handles. */
bool ob_hf_gpt_is(ob_hf_arch a);
/* architectures[0] -> cfg->arch and cfg->gguf_arch; false when not ours. */
bool ob_hf_gpt_arch(const char *hf_arch, ob_hf_config *cfg);
/* Everything else config.json says, for an architecture ob_hf_gpt_arch
 * accepted. Errors name the key. */
int ob_hf_gpt_parse(json_t *root, const char *path, ob_hf_config *cfg);
/* 1 and *out for a tensor the GGUF file holds, 0 for one skipped on
 * purpose (cached masks and RoPE tables), OB_ERR_UNSUPPORTED for a name the
 * family does not have. */
int ob_hf_gpt_map(const ob_hf_config *cfg, const char *name, ob_hf_gmap *out);
/* Every tensor the family needs is planned: has(ctx, gguf_name). */
int ob_hf_gpt_check(const ob_hf_config *cfg, bool (*has)(const void *ctx, const char *name), const void *ctx);
/* The family's own GGUF keys (parallel residual, logit scale). */
int ob_hf_gpt_keys(const ob_hf_config *cfg, ob_gguf_writer *w);
/* OB_HF_XF_QKV_GROUPS: the source row of output row r. */
int64_t ob_hf_gpt_qkv_src_row(const ob_hf_config *cfg, int64_t r);
/* Whether `xf` moves rows (QKV_GROUPS, POS_OFFSET, CODEGEN_QKV), and the
 * source row of output row r under it (a bias's elements move like rows). */
bool ob_hf_gpt_moves_rows(ob_hf_xform xf);
int64_t ob_hf_gpt_src_row(const ob_hf_config *cfg, ob_hf_xform xf, int64_t r);
/* Source rows the GGUF tensor leaves out (OPT's position offset), else 0. */
int64_t ob_hf_gpt_dropped_rows(ob_hf_xform xf);

#endif
