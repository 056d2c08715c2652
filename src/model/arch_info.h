/*
 * arch_info.h - what the registry says about each architecture: whether it
 * is verified against a reference, only mapped (loads, not yet checked), or
 * missing (the issue lists it; no loader yet), and for verified ones what it
 * was checked against, within which tolerance, on which backends.
 *
 * The table (src/model/arch_table.c) is the one source of `1bit models` and
 * of the table in docs/models.md; tests/test_models_registry.c holds it to
 * the loaders (ob_arch_find), the fixtures in tests/data/models and the
 * tests that compare them.
 */
#ifndef OB_MODEL_ARCH_INFO_H
#define OB_MODEL_ARCH_INFO_H

#include <stddef.h>

typedef enum ob_arch_status {
    OB_ARCH_VERIFIED, /* logits compared with a reference in a test `make test` runs */
    OB_ARCH_MAPPED,   /* a loader exists; no reference comparison yet */
    OB_ARCH_MISSING,  /* listed by issue 10, no loader */
} ob_arch_status;

/* Backends a verification ran on (bit set). */
enum { OB_ARCH_ON_CPU = 1u << 0, OB_ARCH_ON_CUDA = 1u << 1 };

typedef struct ob_arch_info {
    const char *name;      /* row name; the GGUF general.architecture unless `gguf` says otherwise */
    const char *gguf;      /* general.architecture the row loads from (NULL: name) */
    const char *covers;    /* model families and the features that set them apart */
    ob_arch_status status;
    const char *reference; /* what it was compared with ("transformers 5.17.0"); NULL if not verified */
    const char *cases;     /* space-separated case names in tests/data/models; NULL if none */
    /* F32 weights against the reference, over all cases: the bound the test
     * enforces on the per-position relative error (max |diff| / max |ref|)
     * and the worst measured (OB_TEST_VERBOSE=1 test_models_ref), 0 if not
     * verified; top-1 agreements and greedy tokens equal, of n_prompt and
     * n_gen. */
    double f32_bound, f32_worst;
    int top1, n_prompt, greedy, n_gen;
    unsigned backends;     /* OB_ARCH_ON_*; 0 if not verified */
    const char *note;      /* how it was verified, or what is missing */
} ob_arch_info;

/* The rows, verified first, then mapped, then missing; *n gets their count. */
const ob_arch_info *ob_arch_infos(size_t *n);
/* "verified", "mapped", "missing". */
const char *ob_arch_status_name(ob_arch_status s);

/* The loaders themselves (registry.c), for holding the table to them:
 * ob_arch_at(i) for i < ob_arch_count(), NULL past the end. */
typedef struct ob_arch ob_arch;
size_t ob_arch_count(void);
const ob_arch *ob_arch_at(size_t i);

#endif
