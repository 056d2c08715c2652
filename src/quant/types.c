/*
 * types.c - the type table. Block geometry follows ggml so that files from
 * the ecosystem load byte for byte; conversion routines are in the *_ref.c
 * files (declared in quant_ref.h). Integer types have no conversions;
 * IQ1/IQ2/IQ3 have no reference quantizer here: their codebook search
 * (iq_quant.c) takes an importance matrix and is reached through
 * ob_quantize_row_weighted.
 */
#include <strings.h>

#include "blocks.h"
#include "quant.h"
#include "quant_ref.h"

static const ob_type_traits g_types[OB_TYPE_COUNT] = {
    [OB_TYPE_F32] = {"f32", 1, 4, false,
        ob_dequantize_row_f32, ob_quantize_row_f32_ref},
    [OB_TYPE_F16] = {"f16", 1, 2, false,
        ob_dequantize_row_f16, ob_quantize_row_f16_ref},
    [OB_TYPE_Q4_0] = {"q4_0", OB_QK4_0, sizeof(ob_block_q4_0), true,
        ob_dequantize_row_q4_0, ob_quantize_row_q4_0_ref},
    [OB_TYPE_Q4_1] = {"q4_1", OB_QK4_1, sizeof(ob_block_q4_1), true,
        ob_dequantize_row_q4_1, ob_quantize_row_q4_1_ref},
    [OB_TYPE_Q5_0] = {"q5_0", OB_QK5_0, sizeof(ob_block_q5_0), true,
        ob_dequantize_row_q5_0, ob_quantize_row_q5_0_ref},
    [OB_TYPE_Q5_1] = {"q5_1", OB_QK5_1, sizeof(ob_block_q5_1), true,
        ob_dequantize_row_q5_1, ob_quantize_row_q5_1_ref},
    [OB_TYPE_Q8_0] = {"q8_0", OB_QK8_0, sizeof(ob_block_q8_0), true,
        ob_dequantize_row_q8_0, ob_quantize_row_q8_0_ref},
    [OB_TYPE_Q8_1] = {"q8_1", OB_QK8_1, sizeof(ob_block_q8_1), true,
        ob_dequantize_row_q8_1, ob_quantize_row_q8_1_ref},
    [OB_TYPE_Q2_K] = {"q2_K", OB_QK_K, sizeof(ob_block_q2_K), true,
        ob_dequantize_row_q2_K, ob_quantize_row_q2_K_ref},
    [OB_TYPE_Q3_K] = {"q3_K", OB_QK_K, sizeof(ob_block_q3_K), true,
        ob_dequantize_row_q3_K, ob_quantize_row_q3_K_ref},
    [OB_TYPE_Q4_K] = {"q4_K", OB_QK_K, sizeof(ob_block_q4_K), true,
        ob_dequantize_row_q4_K, ob_quantize_row_q4_K_ref},
    [OB_TYPE_Q5_K] = {"q5_K", OB_QK_K, sizeof(ob_block_q5_K), true,
        ob_dequantize_row_q5_K, ob_quantize_row_q5_K_ref},
    [OB_TYPE_Q6_K] = {"q6_K", OB_QK_K, sizeof(ob_block_q6_K), true,
        ob_dequantize_row_q6_K, ob_quantize_row_q6_K_ref},
    [OB_TYPE_Q8_K] = {"q8_K", OB_QK_K, sizeof(ob_block_q8_K), true,
        ob_dequantize_row_q8_K, ob_quantize_row_q8_K_ref},
    [OB_TYPE_IQ2_XXS] = {"iq2_xxs", OB_QK_K, sizeof(ob_block_iq2_xxs), true,
        ob_dequantize_row_iq2_xxs, 0},
    [OB_TYPE_IQ2_XS] = {"iq2_xs", OB_QK_K, sizeof(ob_block_iq2_xs), true,
        ob_dequantize_row_iq2_xs, 0},
    [OB_TYPE_IQ3_XXS] = {"iq3_xxs", OB_QK_K, sizeof(ob_block_iq3_xxs), true,
        ob_dequantize_row_iq3_xxs, 0},
    [OB_TYPE_IQ1_S] = {"iq1_s", OB_QK_K, sizeof(ob_block_iq1_s), true,
        ob_dequantize_row_iq1_s, 0},
    [OB_TYPE_IQ4_NL] = {"iq4_nl", OB_QK4_NL, sizeof(ob_block_iq4_nl), true,
        ob_dequantize_row_iq4_nl, ob_quantize_row_iq4_nl_ref},
    [OB_TYPE_IQ3_S] = {"iq3_s", OB_QK_K, sizeof(ob_block_iq3_s), true,
        ob_dequantize_row_iq3_s, 0},
    [OB_TYPE_IQ2_S] = {"iq2_s", OB_QK_K, sizeof(ob_block_iq2_s), true,
        ob_dequantize_row_iq2_s, 0},
    [OB_TYPE_IQ4_XS] = {"iq4_xs", OB_QK_K, sizeof(ob_block_iq4_xs), true,
        ob_dequantize_row_iq4_xs, ob_quantize_row_iq4_xs_ref},
    [OB_TYPE_I8] = {"i8", 1, 1, false,
        0, 0},
    [OB_TYPE_I16] = {"i16", 1, 2, false,
        0, 0},
    [OB_TYPE_I32] = {"i32", 1, 4, false,
        0, 0},
    [OB_TYPE_I64] = {"i64", 1, 8, false,
        0, 0},
    [OB_TYPE_F64] = {"f64", 1, 8, false,
        ob_dequantize_row_f64, ob_quantize_row_f64_ref},
    [OB_TYPE_IQ1_M] = {"iq1_m", OB_QK_K, sizeof(ob_block_iq1_m), true,
        ob_dequantize_row_iq1_m, 0},
    [OB_TYPE_BF16] = {"bf16", 1, 2, false,
        ob_dequantize_row_bf16, ob_quantize_row_bf16_ref},
    [OB_TYPE_TQ1_0] = {"tq1_0", OB_QK_K, sizeof(ob_block_tq1_0), true,
        ob_dequantize_row_tq1_0, ob_quantize_row_tq1_0_ref},
    [OB_TYPE_TQ2_0] = {"tq2_0", OB_QK_K, sizeof(ob_block_tq2_0), true,
        ob_dequantize_row_tq2_0, ob_quantize_row_tq2_0_ref},
    [OB_TYPE_MXFP4] = {"mxfp4", OB_QK_MXFP4, sizeof(ob_block_mxfp4), true,
        ob_dequantize_row_mxfp4, ob_quantize_row_mxfp4_ref},
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
