/*
 * types.c - the type table. Block geometry follows ggml so that files from
 * the ecosystem load byte for byte; conversion routines are in the *_ref.c
 * files.
 */
#include <strings.h>

#include "quant.h"

static const ob_type_traits g_types[OB_TYPE_COUNT] = {
    [OB_TYPE_F32] = {"f32", 1, 4, false, 0, 0},
    [OB_TYPE_F16] = {"f16", 1, 2, false, 0, 0},
    [OB_TYPE_Q4_0] = {"q4_0", 32, 18, true, 0, 0},
    [OB_TYPE_Q4_1] = {"q4_1", 32, 20, true, 0, 0},
    [OB_TYPE_Q5_0] = {"q5_0", 32, 22, true, 0, 0},
    [OB_TYPE_Q5_1] = {"q5_1", 32, 24, true, 0, 0},
    [OB_TYPE_Q8_0] = {"q8_0", 32, 34, true, 0, 0},
    [OB_TYPE_Q8_1] = {"q8_1", 32, 36, true, 0, 0},
    [OB_TYPE_Q2_K] = {"q2_K", 256, 84, true, 0, 0},
    [OB_TYPE_Q3_K] = {"q3_K", 256, 110, true, 0, 0},
    [OB_TYPE_Q4_K] = {"q4_K", 256, 144, true, 0, 0},
    [OB_TYPE_Q5_K] = {"q5_K", 256, 176, true, 0, 0},
    [OB_TYPE_Q6_K] = {"q6_K", 256, 210, true, 0, 0},
    [OB_TYPE_Q8_K] = {"q8_K", 256, 292, true, 0, 0},
    [OB_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, true, 0, 0},
    [OB_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, true, 0, 0},
    [OB_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, true, 0, 0},
    [OB_TYPE_IQ1_S] = {"iq1_s", 256, 50, true, 0, 0},
    [OB_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, true, 0, 0},
    [OB_TYPE_IQ3_S] = {"iq3_s", 256, 110, true, 0, 0},
    [OB_TYPE_IQ2_S] = {"iq2_s", 256, 82, true, 0, 0},
    [OB_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, true, 0, 0},
    [OB_TYPE_I8] = {"i8", 1, 1, false, 0, 0},
    [OB_TYPE_I16] = {"i16", 1, 2, false, 0, 0},
    [OB_TYPE_I32] = {"i32", 1, 4, false, 0, 0},
    [OB_TYPE_I64] = {"i64", 1, 8, false, 0, 0},
    [OB_TYPE_F64] = {"f64", 1, 8, false, 0, 0},
    [OB_TYPE_IQ1_M] = {"iq1_m", 256, 56, true, 0, 0},
    [OB_TYPE_BF16] = {"bf16", 1, 2, false, 0, 0},
    [OB_TYPE_TQ1_0] = {"tq1_0", 256, 54, true, 0, 0},
    [OB_TYPE_TQ2_0] = {"tq2_0", 256, 66, true, 0, 0},
    [OB_TYPE_MXFP4] = {"mxfp4", 32, 17, true, 0, 0},
};

const ob_type_traits *ob_type_get(int type) {
    if (type < 0 || type >= OB_TYPE_COUNT || !g_types[type].name) return 0;
    return &g_types[type];
}

const char *ob_type_name(int type) {
    const ob_type_traits *t = ob_type_get(type);
    return t ? t->name : "?";
}

int ob_type_from_name(const char *name) {
    for (int i = 0; i < OB_TYPE_COUNT; i++)
        if (g_types[i].name && strcasecmp(g_types[i].name, name) == 0) return i;
    return -1;
}

size_t ob_row_size(ob_type type, int64_t ne0) {
    const ob_type_traits *t = ob_type_get(type);
    return t ? (size_t)(ne0 / t->block_size) * t->type_size : 0;
}
