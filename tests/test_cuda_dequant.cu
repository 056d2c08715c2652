/*
 * test_cuda_dequant.cu - the CUDA backend's dequantizers (src/cuda/quant.cuh)
 * run on the host against the reference to_float of every supported type.
 * They are __host__ __device__ functions, so this check needs nvcc but no
 * GPU: it runs in the plain `make test` wherever the plugin is built (CI
 * included) and catches a wrong nibble, scale or element order before any
 * device time is spent. Random data covers every chunk position of every
 * block; the comparison allows one float rounding per element (the device
 * may fuse a multiply and an add the reference keeps apart).
 */
#include <math.h>
#include <stdlib.h>

#include "cuda/mmvq.cuh"
#include "cuda/quant.cuh"
#include "cuda/w4.cuh"

extern "C" {
#include "quant/iq_tables.h"
#include "quant/quant_ref.h"
#include "test.h"
}

static uint64_t g_rng = 0x5eed;

static const int k_types[] = {OB_TYPE_F32,  OB_TYPE_F16,   OB_TYPE_BF16,   OB_TYPE_Q4_0,  OB_TYPE_Q4_1,  OB_TYPE_Q5_0,
                              OB_TYPE_Q5_1, OB_TYPE_Q8_0,  OB_TYPE_MXFP4,  OB_TYPE_IQ4_NL, OB_TYPE_Q2_K, OB_TYPE_Q3_K,
                              OB_TYPE_Q4_K, OB_TYPE_Q5_K,  OB_TYPE_Q6_K,   OB_TYPE_IQ4_XS, OB_TYPE_TQ1_0, OB_TYPE_TQ2_0};

static void deq_host(int type, const uint8_t *row, int64_t c, float *v, const int8_t *lut) {
    switch (type) {
#define OB_CASE(T) \
    case T: deq_chunk<T>(row, c, v, lut); break;
        OB_CUDA_FOR_EACH_TYPE(OB_CASE)
#undef OB_CASE
    default: break;
    }
}

TEST(device_dequantizers_match_the_reference) {
    int8_t lut[OB_LUT_BYTES];
    memcpy(lut + OB_LUT_IQ4NL, ob_iq4nl_values, 16);
    memcpy(lut + OB_LUT_MXFP4, ob_mxfp4_values, 16);
    const int64_t ne0 = 1024, rows = 3;
    float *x = (float *)malloc(sizeof(float) * ne0 * rows), *ref = (float *)malloc(sizeof(float) * ne0 * rows);
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const int t = k_types[ti];
        const ob_type_traits *tr = ob_type_get(t);
        CHECK(tr && tr->from_float_ref && tr->to_float);
        if (!tr || !tr->from_float_ref || !tr->to_float) continue;
        CHECK_EQ_INT(cuda_type_supported(t), 1);
        for (int64_t i = 0; i < ne0 * rows; i++) x[i] = 2.0f * test_rand_normal(&g_rng) + (i % 7 == 0 ? 0.5f : 0.0f);
        const size_t rb = ob_row_size((ob_type)t, ne0);
        uint8_t *q = (uint8_t *)malloc(rb * rows + 16);
        tr->from_float_ref(x, q, ne0 * rows);
        tr->to_float(q, ref, ne0 * rows);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < ne0 / 8; c++) {
                float v[8];
                deq_host(t, q + r * rb, c, v, lut);
                for (int k = 0; k < 8; k++) {
                    const float want = ref[r * ne0 + c * 8 + k];
                    if (!(fabsf(v[k] - want) <= 1e-6f * fabsf(want) + 1e-30f)) {
                        if (bad < 3)
                            fprintf(stderr, "  %s row %lld element %lld: %.9g, reference %.9g\n", cuda_type_name(t),
                                    (long long)r, (long long)(c * 8 + k), (double)v[k], (double)want);
                        bad++;
                    }
                }
            }
        CHECK_MSG(bad == 0, "%s: %d elements differ from the reference", cuda_type_name(t), bad);
        free(q);
    }
    free(x);
    free(ref);
}

/* The integer decode kernel's dot products (mmvq.cuh), unit by unit on the
 * host, against double sums over the reference dequantized weights and the
 * q8 activations they meet: only float rounding may differ (bound: 1e-5 of
 * the sum of |w x|, far below any real error, which moves the result by
 * whole weights). Two tokens, so the per-token activation strides are used. */
template <int T> static void check_qdot(void) {
    const int64_t nin = 1024, rows = 3;
    const ob_type_traits *tr = ob_type_get(T);
    CHECK(tr && tr->from_float_ref && tr->to_float);
    if (!tr || !tr->from_float_ref || !tr->to_float) return;
    const size_t rb = ob_row_size((ob_type)T, nin);
    float *wf = (float *)malloc(sizeof(float) * nin * rows), *wd = (float *)malloc(sizeof(float) * nin * rows);
    float *x = (float *)malloc(sizeof(float) * nin * 2), *dx = (float *)malloc(sizeof(float) * nin / 32 * 4);
    int8_t *qx = (int8_t *)malloc((size_t)nin * 2);
    uint8_t *q = (uint8_t *)malloc(rb * rows + 16);
    for (int64_t i = 0; i < nin * rows; i++) wf[i] = test_rand_normal(&g_rng) + (i % 5 == 0 ? 0.7f : 0.0f);
    for (int64_t i = 0; i < nin * 2; i++) x[i] = 3.0f * test_rand_normal(&g_rng);
    tr->from_float_ref(wf, q, nin * rows);
    tr->to_float(q, wd, nin * rows);
    ob_q8_act_ref(x, nin, qx, dx);
    ob_q8_act_ref(x + nin, nin, qx + nin, dx + nin / 16);
    q8_act a;
    a.qx = qx;
    a.dx = dx;
    a.ldq = nin;
    a.ldd = nin / 16;
    for (int64_t r = 0; r < rows; r++) {
        float got[2];
        ob_qdot_row<T, 2>(q + r * rb, nin, a, got);
        for (int t = 0; t < 2; t++) {
            double want = 0, mag = 0;
            for (int64_t i = 0; i < nin; i++) {
                const double p = (double)wd[r * nin + i] * dx[t * (nin / 16) + 2 * (i / 32)] * qx[t * nin + i];
                want += p;
                mag += fabs(p);
            }
            CHECK_MSG(fabs(got[t] - want) <= 1e-5 * mag, "%s row %lld token %d: %.9g, reference %.9g (|sum| %.3g)",
                      cuda_type_name(T), (long long)r, t, (double)got[t], want, mag);
        }
    }
    /* and the activation quantizer: |x - dx qx| <= dx / 2 */
    int bad = 0;
    for (int64_t i = 0; i < nin; i++)
        if (!(fabsf(x[i] - dx[2 * (i / 32)] * qx[i]) <= 0.5001f * dx[2 * (i / 32)])) bad++;
    /* the second float of each block: scale times the sum of its 32 values */
    for (int64_t b = 0; b < nin / 32; b++) {
        int sum = 0;
        for (int i = 0; i < 32; i++) sum += qx[b * 32 + i];
        if (dx[2 * b + 1] != dx[2 * b] * (float)sum) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    free(wf), free(wd), free(x), free(dx), free(qx), free(q);
}

TEST(integer_dot_products_match_the_reference) {
    check_qdot<OB_TYPE_Q4_0>();
    check_qdot<OB_TYPE_Q8_0>();
    check_qdot<OB_TYPE_Q4_K>();
    check_qdot<OB_TYPE_Q5_K>();
    check_qdot<OB_TYPE_Q6_K>();
    check_qdot<OB_TYPE_IQ4_NL>();
    check_qdot<OB_TYPE_MXFP4>();
    check_qdot<OB_TYPE_IQ4_XS>();
    check_qdot<OB_TYPE_TQ2_0>();
    check_qdot<OB_TYPE_TQ1_0>();
}

/* The table types' constants in mmvq.cuh are the GGUF tables, and its E8M0 scale is the
 * reference's for every exponent byte; ob_table16 (its host form) looks every nibble up. */
TEST(integer_dot_tables_match_the_reference) {
    const uint32_t iq[4] = OB_TAB_IQ4NL, mx[4] = OB_TAB_MXFP4;
    for (int i = 0; i < 16; i++) {
        CHECK_EQ_INT((int8_t)(iq[i / 4] >> (8 * (i % 4))), ob_iq4nl_values[i]);
        CHECK_EQ_INT((int8_t)(mx[i / 4] >> (8 * (i % 4))), ob_mxfp4_values[i]);
    }
    int bad = 0;
    for (int e = 0; e < 256; e++) {
        const float a = ob_e8m0_half((uint32_t)e), b = ob_e8m0_to_fp32_half((uint8_t)e);
        if (memcmp(&a, &b, sizeof a) != 0) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    for (uint32_t q = 0; q < 256; q++) {
        const uint32_t word = q * 0x01010101u ^ 0x00f0ff00u; /* four bytes, all nibble values seen */
        uint32_t lo, hi;
        ob_table16(word, iq, lo, hi);
        for (int i = 0; i < 4; i++) {
            const uint32_t byte = (word >> (8 * i)) & 0xffu;
            CHECK_EQ_INT((int8_t)(lo >> (8 * i)), ob_iq4nl_values[byte & 15]);
            CHECK_EQ_INT((int8_t)(hi >> (8 * i)), ob_iq4nl_values[byte >> 4]);
        }
    }
}

/* The fragment-order 4-bit layout (w4.cuh): the lane/nibble map is a bijection onto the 16 x 16
 * tile whose pairs are the A fragment's (same row, columns c and c + 1); Q4_K, Q4_0 and Q4_1
 * matrices with a partial last row tile, repacked, give every element as the reference
 * dequantizes it (one float rounding apart: the layout's value is one FMA), and 0 in the
 * padding rows. */
TEST(w4_layout_matches_the_reference) {
    int seen[16][16] = {{0}}, bad = 0;
    for (int l = 0; l < 32; l++)
        for (int e = 0; e < 8; e++) {
            int r, k, l2, e2;
            w4_frag_pos(l, e, &r, &k);
            w4_frag_slot(r, k, &l2, &e2);
            seen[r][k]++;
            bad += l2 != l || e2 != e;
            if (e < 4) { /* register a_e's second element: nibble e + 4, same row, next column */
                int r2, k2;
                w4_frag_pos(l, e + 4, &r2, &k2);
                bad += r2 != r || k2 != k + 1 || k % 2 != 0;
            }
        }
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) bad += seen[r][k] != 1;
    CHECK_EQ_INT(bad, 0);

    static const struct { int type; int64_t nin; } cases[] = {{OB_TYPE_Q4_K, 512}, {OB_TYPE_Q4_0, 192}, {OB_TYPE_Q4_1, 320}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int t = cases[ci].type;
        const int64_t nout = 40, nin = cases[ci].nin, rt = (nout + 15) / 16;
        const ob_type_traits *tr = ob_type_get(t);
        const size_t rb = ob_row_size((ob_type)t, nin);
        float *x = (float *)malloc(sizeof(float) * nout * nin), *ref = (float *)malloc(sizeof(float) * nout * nin);
        uint8_t *q = (uint8_t *)malloc(rb * nout);
        for (int64_t i = 0; i < nout * nin; i++) x[i] = 2.0f * test_rand_normal(&g_rng) + (i % 11 == 0 ? 0.8f : 0.0f);
        tr->from_float_ref(x, q, nout * nin);
        tr->to_float(q, ref, nout * nin);
        uint32_t *codes = (uint32_t *)malloc(sizeof(uint32_t) * w4_code_words(nout, nin));
        float2 *scales = (float2 *)malloc(sizeof(float2) * w4_scale_pairs(nout, nin));
        CHECK_EQ_INT((int)w4_code_words(nout, nin), (int)(rt * 16 * nin / 8));
        for (int64_t r = 0; r < rt; r++) {
            if (t == OB_TYPE_Q4_K) w4_repack_tile<OB_TYPE_Q4_K>(q, rb, nout, nin, r, codes, scales);
            else if (t == OB_TYPE_Q4_0) w4_repack_tile<OB_TYPE_Q4_0>(q, rb, nout, nin, r, codes, scales);
            else w4_repack_tile<OB_TYPE_Q4_1>(q, rb, nout, nin, r, codes, scales);
        }
        bad = 0;
        for (int64_t r = 0; r < rt * 16; r++)
            for (int64_t k = 0; k < nin; k++) {
                const float got = w4_value(codes, scales, nin, r, k), want = r < nout ? ref[r * nin + k] : 0.0f;
                if (!(fabsf(got - want) <= 1e-6f * fabsf(want) + 1e-6f)) {
                    if (bad < 3)
                        fprintf(stderr, "  w4 %s row %lld column %lld: %.9g, reference %.9g\n", cuda_type_name(t),
                                (long long)r, (long long)k, (double)got, (double)want);
                    bad++;
                }
            }
        CHECK_MSG(bad == 0, "w4 %s: %d elements differ from the reference", cuda_type_name(t), bad);
        free(x), free(ref), free(q), free(codes), free(scales);
    }
}

int main(int argc, char **argv) { return test_main(argc, argv); }
