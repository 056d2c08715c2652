/*
 * quantize.h - whole-file quantization: read a GGUF model, pick a type for
 * every tensor (the mix's recipe, the user's overrides), convert, and write a
 * new GGUF with the same metadata.
 *
 * A "mix" (llama.cpp calls it a file type, general.file_type) names a base
 * type plus a recipe that gives some tensors more bits: Q4_K_M is Q4_K with
 * Q6_K for the output, half the attn_v and a third of the ffn_down matrices.
 * Every plain type with a reference quantizer is also a mix of its own
 * (Q4_0, IQ4_NL, F16, ...). Tensors whose rows do not split into the chosen
 * type's blocks fall back to a type that fits (as llama.cpp does).
 *
 * Only the recipe lives here; the conversions are the reference routines of
 * quant_ref.h, the importance-weighted ones of quant_weighted.c, and the
 * Hadamard rotation of hadamard.h.
 */
#ifndef OB_QUANT_QUANTIZE_H
#define OB_QUANT_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "imatrix.h"
#include "quant.h"

/* One named mix. ftype is the general.file_type value llama.cpp writes. */
typedef struct ob_ftype_info {
    const char *name;   /* "Q4_K_M" */
    int ftype;          /* general.file_type */
    ob_type base;       /* type most matrices get */
    bool needs_imatrix; /* refuses to run without one (garbage otherwise) */
    const char *desc;
} ob_ftype_info;

/* The mix for a name (case-insensitive; "Q4_K" means Q4_K_M as in
 * llama.cpp), or NULL. */
const ob_ftype_info *ob_ftype_find(const char *name);
/* All mixes, for usage text; *n gets the count. */
const ob_ftype_info *ob_ftype_list(int *n);
/* The mix with this general.file_type, or NULL. */
const ob_ftype_info *ob_ftype_by_id(int ftype);

/* --tensor-type PATTERN=TYPE: tensors whose name matches the POSIX extended
 * regular expression (searched, not anchored) get TYPE; the last match wins. */
typedef struct ob_tensor_override {
    const char *pattern;
    ob_type type;
} ob_tensor_override;

typedef struct ob_quantize_params {
    int n_threads;                /* <= 0: all cores */
    bool leave_output;            /* keep output.weight as it is in the source */
    bool pure;                    /* no recipe: every matrix gets the base type */
    bool allow_requantize;        /* sources other than F32/F16/BF16/Q8_0 */
    bool hadamard;                /* rotate the projections' inputs (meant for Q4_0; docs/quantization.md) */
    int output_type;              /* type for output.weight, or -1: the recipe's */
    int embd_type;                /* type for token_embd.weight, or -1 */
    const ob_tensor_override *overrides; /* [n_overrides] */
    int n_overrides;
    const ob_imatrix *imatrix;    /* NULL: none */
    bool verbose;                 /* one line per tensor on stdout */
} ob_quantize_params;

void ob_quantize_params_init(ob_quantize_params *p);

typedef struct ob_quantize_stats {
    uint64_t bytes_in, bytes_out;
    int64_t n_tensors, n_quantized, n_fallback, n_imatrix; /* n_imatrix: tensors that used importance weights */
    int64_t type_count[OB_TYPE_COUNT]; /* tensors of each type in the output */
} ob_quantize_stats;

/* Quantize the GGUF at `in` to `out` with the mix `mix`. The output keeps
 * every metadata key (except split keys) and the alignment, sets
 * general.file_type and general.quantization_version, and, with
 * params->hadamard, stamps the rotation (OB_HADAMARD_KEY). Errors name the
 * tensor; a partly written file is removed. stats may be NULL. */
int ob_quantize_file(const char *in, const char *out, const ob_ftype_info *mix, const ob_quantize_params *params,
                     ob_quantize_stats *stats);

#endif
