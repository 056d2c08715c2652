/*
 * hf_encoder.h - the converter's knowledge of the bidirectional encoders
 * (embedding models): BertModel -> `bert` and ModernBertModel ->
 * `modern-bert`, in llama.cpp's layout. hf_config.c hands their
 * config.json here, convert.c asks here for each tensor's GGUF name (the
 * same ob_hf_gmap form as the GPT lineage, hf_gptlike.h) and for the
 * family's keys. Private to src/convert.
 */
#ifndef OB_CONVERT_HF_ENCODER_H
#define OB_CONVERT_HF_ENCODER_H

#include <jansson.h>
#include <stdbool.h>

#include "../gguf/gguf.h"
#include "hf_gptlike.h"
#include "hf_internal.h"

/* GGUF pooling_type values (llama.cpp's enum llama_pooling_type). */
enum { OB_HF_POOL_NONE = 0, OB_HF_POOL_MEAN = 1, OB_HF_POOL_CLS = 2, OB_HF_POOL_LAST = 3 };

/* True for OB_HF_BERT and OB_HF_MODERNBERT. */
bool ob_hf_enc_is(ob_hf_arch a);
/* architectures[0] -> cfg->arch and cfg->gguf_arch; false when not ours. */
bool ob_hf_enc_arch(const char *hf_arch, ob_hf_config *cfg);
/* config.json (root; `path` names it) into cfg, and the pooling: a
 * sentence-transformers Pooling module beside it (modules.json) if any,
 * else mean for BERT (what sentence-transformers does) and ModernBERT's
 * classifier_pooling (cls by default). Errors name the key. */
int ob_hf_enc_parse(json_t *root, const char *path, ob_hf_config *cfg);
/* 1 and *out for a tensor the GGUF file holds, 0 for one skipped on purpose
 * (pooler, MLM and classifier heads, position_ids), OB_ERR_UNSUPPORTED for
 * a name the family does not have. */
int ob_hf_enc_map(const ob_hf_config *cfg, const char *name, ob_hf_gmap *out);
/* Every tensor the family needs is planned: has(ctx, gguf_name). */
int ob_hf_enc_check(const ob_hf_config *cfg, bool (*has)(const void *ctx, const char *name), const void *ctx);
/* The family's GGUF keys: attention.causal false, pooling_type, the token
 * type count (bert), the local layers' pattern and RoPE base (modern-bert). */
int ob_hf_enc_keys(const ob_hf_config *cfg, ob_gguf_writer *w);

#endif
