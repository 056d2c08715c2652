/*
 * test_quant.c - the quantization formats (src/quant): the type table, the
 * half/bfloat16 conversions, every reference quantizer against per-type
 * error bounds, golden digests of quantizer and dequantizer output (checked
 * once against ggml's own code), and every dequantizer against blocks and
 * floats that ggml wrote (../shared/models/quant-fixtures), bit for bit.
 *
 * `test_quant fixture` runs only the fixture tests; fixture_quantize prints
 * which quantizers reproduce ggml's bytes, and quant_error the measured NMSE
 * of every type (the numbers behind the bounds table).
 */
#include "core/status.h"
#include "gguf/gguf.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/quant_ref.h"
#include "test.h"

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ======================================================================
 * Type table
 * ====================================================================== */

/* Every type with a block struct: the table's geometry must be the struct's. */
TEST(type_table_geometry) {
    static const struct { int type; size_t size; int64_t block; } blocks[] = {
        {OB_TYPE_Q4_0, sizeof(ob_block_q4_0), OB_QK4_0},
        {OB_TYPE_Q4_1, sizeof(ob_block_q4_1), OB_QK4_1},
        {OB_TYPE_Q5_0, sizeof(ob_block_q5_0), OB_QK5_0},
        {OB_TYPE_Q5_1, sizeof(ob_block_q5_1), OB_QK5_1},
        {OB_TYPE_Q8_0, sizeof(ob_block_q8_0), OB_QK8_0},
        {OB_TYPE_Q8_1, sizeof(ob_block_q8_1), OB_QK8_1},
        {OB_TYPE_Q2_K, sizeof(ob_block_q2_K), OB_QK_K},
        {OB_TYPE_Q3_K, sizeof(ob_block_q3_K), OB_QK_K},
        {OB_TYPE_Q4_K, sizeof(ob_block_q4_K), OB_QK_K},
        {OB_TYPE_Q5_K, sizeof(ob_block_q5_K), OB_QK_K},
        {OB_TYPE_Q6_K, sizeof(ob_block_q6_K), OB_QK_K},
        {OB_TYPE_Q8_K, sizeof(ob_block_q8_K), OB_QK_K},
        {OB_TYPE_IQ2_XXS, sizeof(ob_block_iq2_xxs), OB_QK_K},
        {OB_TYPE_IQ2_XS, sizeof(ob_block_iq2_xs), OB_QK_K},
        {OB_TYPE_IQ2_S, sizeof(ob_block_iq2_s), OB_QK_K},
        {OB_TYPE_IQ3_XXS, sizeof(ob_block_iq3_xxs), OB_QK_K},
        {OB_TYPE_IQ3_S, sizeof(ob_block_iq3_s), OB_QK_K},
        {OB_TYPE_IQ1_S, sizeof(ob_block_iq1_s), OB_QK_K},
        {OB_TYPE_IQ1_M, sizeof(ob_block_iq1_m), OB_QK_K},
        {OB_TYPE_IQ4_NL, sizeof(ob_block_iq4_nl), OB_QK4_NL},
        {OB_TYPE_IQ4_XS, sizeof(ob_block_iq4_xs), OB_QK_K},
        {OB_TYPE_TQ1_0, sizeof(ob_block_tq1_0), OB_QK_K},
        {OB_TYPE_TQ2_0, sizeof(ob_block_tq2_0), OB_QK_K},
        {OB_TYPE_MXFP4, sizeof(ob_block_mxfp4), OB_QK_MXFP4},
    };
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        const ob_type_traits *t = ob_type_get(blocks[i].type);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ_INT(t->type_size, blocks[i].size);
        CHECK_EQ_INT(t->block_size, blocks[i].block);
        CHECK(t->is_quantized);
        CHECK_EQ_INT(ob_row_size(blocks[i].type, 4096), 4096 / blocks[i].block * blocks[i].size);
        CHECK_EQ_INT(ob_type_from_name(t->name), blocks[i].type);
    }
}

/* Which conversions exist: to_float for every float and quantized type,
 * from_float_ref for all but the IQ1/IQ2/IQ3 families; none for integers. */
TEST(type_table_functions) {
    for (int type = 0; type < OB_TYPE_COUNT; type++) {
        const ob_type_traits *t = ob_type_get(type);
        if (!t) continue;
        const int is_int = type == OB_TYPE_I8 || type == OB_TYPE_I16 || type == OB_TYPE_I32 ||
                           type == OB_TYPE_I64;
        const int needs_imatrix = type == OB_TYPE_IQ1_S || type == OB_TYPE_IQ1_M ||
                                  type == OB_TYPE_IQ2_XXS || type == OB_TYPE_IQ2_XS ||
                                  type == OB_TYPE_IQ2_S || type == OB_TYPE_IQ3_XXS ||
                                  type == OB_TYPE_IQ3_S;
        CHECK_MSG((t->to_float != NULL) == !is_int, "%s to_float", t->name);
        CHECK_MSG((t->from_float_ref != NULL) == (!is_int && !needs_imatrix), "%s from_float_ref",
                  t->name);
    }
}

/* ======================================================================
 * Half and bfloat16
 * ====================================================================== */

/* Value of a half computed independently of the code under test. */
static double half_value(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v = exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
    return sign ? -v : v;
}

static int is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

TEST(fp16_all_values) {
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t h = (uint16_t)i;
        const float f = ob_fp16_to_fp32(h);
        if (is_half_nan(h)) {
            /* payload kept and quieted on widening; narrowing gives it back */
            const uint32_t fb = f32_bits(f);
            bad += !(isnan(f) && (fb >> 13 & 0x3ff) == ((h & 0x3ffu) | 0x200u) && (fb >> 31) == (h >> 15u));
            bad += ob_fp32_to_fp16(f) != (h | 0x200);
        } else if ((h & 0x7fff) == 0x7c00) {
            bad += !(isinf(f) && (signbit(f) != 0) == (h >> 15 != 0));
            bad += ob_fp32_to_fp16(f) != h;
        } else {
            bad += (double)f != half_value(h) || (signbit(f) != 0) != (h >> 15 != 0);
            bad += ob_fp32_to_fp16(f) != h;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(bf16_all_values) {
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t h = (uint16_t)i;
        const float f = ob_bf16_to_fp32(h);
        bad += f32_bits(f) != (uint32_t)h << 16;
        const int nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        bad += ob_fp32_to_bf16(f) != (nan ? (h | 0x40) : h);
    }
    CHECK_EQ_INT(bad, 0);
}

/* f -> half must be the nearest half, ties to the even mantissa; finite
 * values at or past 65520 (halfway to 2^16) become infinity. Checked by
 * comparing with both neighbours in exact double arithmetic. */
static int fp16_rounding_ok(float f) {
    const uint16_t h = ob_fp32_to_fp16(f);
    if (isnan(f)) return is_half_nan(h);
    const double a = fabs((double)f);
    const uint16_t mag = h & 0x7fff;
    if ((h >> 15) != (signbit(f) ? 1 : 0)) return 0;
    if (a >= 65520.0) return mag == 0x7c00;
    if (mag >= 0x7c00) return 0;
    const double v = half_value(mag);
    const double err = fabs(a - v);
    if (mag > 0 && fabs(a - half_value(mag - 1)) < err) return 0;
    if (mag < 0x7bff && fabs(a - half_value(mag + 1)) < err) return 0;
    /* on a tie the even neighbour must win */
    if (mag > 0 && fabs(a - half_value(mag - 1)) == err && (mag & 1)) return 0;
    if (mag < 0x7bff && fabs(a - half_value(mag + 1)) == err && (mag & 1)) return 0;
    return 1;
}

TEST(fp16_rounding) {
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        {0x00000000, 0x0000}, {0x80000000, 0x8000},     /* signed zeros */
        {0x3f800000, 0x3c00}, {0xbf800000, 0xbc00},     /* +-1 */
        {0x3f801000, 0x3c00}, /* 1 + 2^-11: tie, even stays 1 */
        {0x3f803000, 0x3c02}, /* 1 + 3*2^-11: tie, even rounds up */
        {0x3f801001, 0x3c01}, /* just above the tie */
        {0x477fe000, 0x7bff}, /* 65504, the largest half */
        {0x477fefff, 0x7bff}, /* just below 65520 */
        {0x477ff000, 0x7c00}, /* 65520: tie, rounds to 2^16 = Inf */
        {0x7f7fffff, 0x7c00}, {0xff7fffff, 0xfc00},     /* FLT_MAX */
        {0x7f800000, 0x7c00}, {0xff800000, 0xfc00},     /* Inf */
        {0x38800000, 0x0400}, /* 2^-14, smallest normal */
        {0x387fc000, 0x03ff}, /* 1023 * 2^-24, the largest subnormal */
        {0x387fe000, 0x0400}, /* 1023.5 * 2^-24: tie, rounds to the even 1024 */
        {0x387fe000 - 1, 0x03ff},
        {0x387fa000, 0x03fe}, /* 1022.5 * 2^-24: tie, rounds to the even 1022 */
        {0x33800000, 0x0001}, /* 2^-24, smallest subnormal */
        {0x33000000, 0x0000}, /* 2^-25: tie, rounds to 0 */
        {0x33000001, 0x0001}, /* just above it */
        {0x33c00000, 0x0002}, /* 3 * 2^-25: tie between 1 and 2, even 2 */
        {0xb3c00000, 0x8002},
        {0x00000001, 0x0000}, {0x80000001, 0x8000},     /* float subnormals */
        {0x7fc00000, 0x7e00}, {0xffc00000, 0xfe00},     /* quiet NaN */
        {0x7f800001, 0x7e00}, /* signalling NaN, payload below the kept bits: quieted */
        {0x7fa02000, 0x7f01}, /* payload kept in the top bits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint16_t got = ob_fp32_to_fp16(bits_f32(cases[i].f));
        CHECK_MSG(got == cases[i].h, "0x%08x -> 0x%04x, want 0x%04x", cases[i].f, got, cases[i].h);
    }
    /* Property check over random bit patterns (all exponents) and over
     * values dense around the half range. */
    uint64_t rng = 1;
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        bad += !fp16_rounding_ok(bits_f32((uint32_t)test_rand_u64(&rng)));
        const int e = (int)(test_rand_u64(&rng) % 48) - 30; /* 2^-30 .. 2^17 */
        bad += !fp16_rounding_ok(ldexpf(test_rand_f32(&rng), e));
    }
    CHECK_EQ_INT(bad, 0);
}

/* bf16 is binary32 truncated to 16 bits, rounded to nearest even. */
static int bf16_rounding_ok(float f) {
    const uint16_t h = ob_fp32_to_bf16(f);
    const uint32_t x = f32_bits(f);
    if (isnan(f)) return (h & 0x7f80) == 0x7f80 && (h & 0x40) && (h >> 15) == (x >> 31);
    const uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u; /* neighbours (same sign) */
    const uint32_t rem = x & 0xffffu;
    const uint32_t want = rem > 0x8000u || (rem == 0x8000u && (lo & 0x10000u)) ? hi : lo;
    return h == (uint16_t)(want >> 16);
}

TEST(bf16_rounding) {
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, /* 1 + 2^-8: tie, even */
        {0x3f818000, 0x3f82}, /* 1 + 3*2^-8: tie, up to even */
        {0x3f808001, 0x3f81},
        {0x7f7fffff, 0x7f80}, /* FLT_MAX rounds up to Inf */
        {0x7f7f7fff, 0x7f7f},
        {0x7f800000, 0x7f80}, {0xff800000, 0xff80},
        {0x00008000, 0x0000}, /* subnormal tie: even 0 */
        {0x00018000, 0x0002},
        {0x80000000, 0x8000},
        {0x7f800001, 0x7fc0}, /* signalling NaN: truncated payload 0, quiet bit set */
        {0xffc00000, 0xffc0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint16_t got = ob_fp32_to_bf16(bits_f32(cases[i].f));
        CHECK_MSG(got == cases[i].h, "0x%08x -> 0x%04x, want 0x%04x", cases[i].f, got, cases[i].h);
    }
    uint64_t rng = 2;
    int bad = 0;
    for (int i = 0; i < 200000; i++) bad += !bf16_rounding_ok(bits_f32((uint32_t)test_rand_u64(&rng)));
    CHECK_EQ_INT(bad, 0);
}

/* ======================================================================
 * Quantize -> dequantize error
 * ====================================================================== */

enum { DIST_UNIFORM, DIST_NORMAL, DIST_OUTLIERS, DIST_COUNT };
static const char *const g_dist_names[DIST_COUNT] = {"uniform", "normal", "outliers"};

/* Bounds on NMSE = sum (x - y)^2 / sum x^2 over 16384 values (64 rows of
 * 256), per type and distribution (these are also the numbers in
 * docs/quant-formats.md):
 *   uniform   U[-1, 1)
 *   normal    N(0, 1)
 *   outliers  N(0, 1) with 1 value in 64 multiplied by 20 (heavy tails, the
 *             case that hurts formats with one scale per block)
 * Source for the quantized types: our measured NMSE (printed by test
 * quant_error) times 1.3, rounded up to two significant digits. The measurements are
 * deterministic (fixed seed, no threads), so the margin is not for noise:
 * it leaves room for a future quantizer that is slightly different (a
 * SIMD tier, a reordered sum) without letting a real regression through;
 * bugs in packing or scales push the error up by 10x or more. The values
 * are in line with ggml's published per-type quality: each extra bit cuts
 * NMSE about 4x. ggml's own absolute check is test quant_error_ggml. */
typedef struct quant_bound {
    int type;
    double nmse[DIST_COUNT];
} quant_bound;

static const quant_bound g_bounds[] = {
    /*                 uniform   normal    outliers */
    /* Float types: the rounding bound itself, not a measurement. Each value
     * is off by at most half an ulp, 2^-11 (half) or 2^-8 (bf16) relative,
     * so NMSE <= 2^-22 and 2^-16. Measured: 4e-8 and 2.7e-6. */
    {OB_TYPE_F16,     {2.4e-7,  2.4e-7,  2.4e-7}},
    {OB_TYPE_BF16,    {1.6e-5,  1.6e-5,  1.6e-5}},
    {OB_TYPE_F32,     {0,       0,       0}},
    {OB_TYPE_F64,     {0,       0,       0}},
    /* Quantized types: measured x 1.3. */
    {OB_TYPE_Q4_0,    {0.0056,  0.0096,  0.030}},
    {OB_TYPE_Q4_1,    {0.0049,  0.0079,  0.017}},
    {OB_TYPE_Q5_0,    {0.0013,  0.0024,  0.010}},
    {OB_TYPE_Q5_1,    {0.0012,  0.0019,  0.0039}},
    {OB_TYPE_Q8_0,    {1.9e-5,  3.9e-5,  0.00017}},
    {OB_TYPE_Q8_1,    {1.9e-5,  3.9e-5,  0.00017}},
    {OB_TYPE_Q2_K,    {0.070,   0.12,    0.10}},
    {OB_TYPE_Q3_K,    {0.021,   0.030,   0.030}},
    {OB_TYPE_Q4_K,    {0.0040,  0.0067,  0.014}},
    {OB_TYPE_Q5_K,    {0.0010,  0.0017,  0.0037}},
    {OB_TYPE_Q6_K,    {0.00024, 0.00042, 0.0014}},
    {OB_TYPE_Q8_K,    {2.1e-5,  6.5e-5,  0.00079}},
    {OB_TYPE_IQ4_NL,  {0.0054,  0.0077,  0.020}},
    {OB_TYPE_IQ4_XS,  {0.0055,  0.0078,  0.020}},
    /* Ternary formats only represent {-1, 0, 1} * amax: on data that is not
     * ternary the error is large by design. */
    {OB_TYPE_TQ1_0,   {0.33,    0.86,    0.38}},
    {OB_TYPE_TQ2_0,   {0.33,    0.86,    0.38}},
    {OB_TYPE_MXFP4,   {0.027,   0.018,   0.041}},
};

#define ERR_ROWS 64
#define ERR_COLS 256
#define ERR_N (ERR_ROWS * ERR_COLS)

static void fill(int dist, float *x, int64_t n, uint64_t seed) {
    uint64_t rng = seed;
    for (int64_t i = 0; i < n; i++) {
        switch (dist) {
        case DIST_UNIFORM: x[i] = test_rand_f32(&rng); break;
        case DIST_NORMAL: x[i] = test_rand_normal(&rng); break;
        default:
            x[i] = test_rand_normal(&rng);
            if (test_rand_u64(&rng) % 64 == 0) x[i] *= 20.0f;
            break;
        }
    }
}

/* Quantize n floats of x with type t into q (with a canary after the row
 * bytes), dequantize into y. Returns 0 if the quantizer wrote past its
 * row size. */
static int round_trip(const ob_type_traits *t, int type, const float *x, float *y, int64_t n,
                      uint8_t *q) {
    const size_t bytes = ob_row_size((ob_type)type, n);
    memset(q + bytes, 0xa5, 64);
    t->from_float_ref(x, q, n);
    t->to_float(q, y, n);
    for (int i = 0; i < 64; i++)
        if (q[bytes + i] != 0xa5) return 0;
    return 1;
}

static double nmse(const float *x, const float *y, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - y[i];
        num += d * d;
        den += (double)x[i] * x[i];
    }
    return den > 0 ? num / den : num;
}

static int count_nonfinite(const float *y, int64_t n) {
    int c = 0;
    for (int64_t i = 0; i < n; i++) c += !isfinite(y[i]);
    return c;
}

TEST(quant_error) {
    float *x = malloc(ERR_N * sizeof(float));
    float *y = malloc(ERR_N * sizeof(float));
    uint8_t *q = malloc(ERR_N * 8 + 64);
    fprintf(stderr, "  %-8s %10s %10s %10s\n", "type", g_dist_names[0], g_dist_names[1], g_dist_names[2]);
    for (size_t b = 0; b < sizeof g_bounds / sizeof g_bounds[0]; b++) {
        const int type = g_bounds[b].type;
        const ob_type_traits *t = ob_type_get(type);
        double e[DIST_COUNT];
        for (int dist = 0; dist < DIST_COUNT; dist++) {
            fill(dist, x, ERR_N, 1000 + (uint64_t)dist);
            CHECK_MSG(round_trip(t, type, x, y, ERR_N, q), "%s wrote past its row size", t->name);
            CHECK_MSG(count_nonfinite(y, ERR_N) == 0, "%s %s: non-finite output", t->name,
                      g_dist_names[dist]);
            e[dist] = nmse(x, y, ERR_N);
            CHECK_MSG(e[dist] <= g_bounds[b].nmse[dist], "%s %s: NMSE %.3g > bound %.3g", t->name,
                      g_dist_names[dist], e[dist], g_bounds[b].nmse[dist]);
        }
        fprintf(stderr, "  %-8s %10.3g %10.3g %10.3g\n", t->name, e[0], e[1], e[2]);
    }
    free(x);
    free(y);
    free(q);
}

/* ggml's tests/test-quantize-fns.cpp check, same data and metric: x[i] =
 * 0.1 + 2 cos(i), 4096 values, error = sqrt(sum (x - y)^2) / n (not an RMSE
 * despite ggml's name for it), bounds MAX_QUANTIZATION_TOTAL_ERROR* from
 * that file: 0.002 by default, 0.0075 for 2-bit, 0.004 for 3-bit, 0.01 for
 * ternary. */
TEST(quant_error_ggml) {
    enum { N = 32 * 128 };
    float *x = malloc(N * sizeof(float));
    float *y = malloc(N * sizeof(float));
    uint8_t *q = malloc(N * 8 + 64);
    for (int i = 0; i < N; i++) x[i] = 0.1f + 2 * cosf((float)i);
    for (int type = 0; type < OB_TYPE_COUNT; type++) {
        const ob_type_traits *t = ob_type_get(type);
        if (!t || !t->is_quantized || !t->from_float_ref) continue;
        const double bound = type == OB_TYPE_Q2_K ? 0.0075
                           : type == OB_TYPE_Q3_K ? 0.0040
                           : type == OB_TYPE_TQ1_0 || type == OB_TYPE_TQ2_0 ? 0.01
                           : 0.002;
        round_trip(t, type, x, y, N, q);
        double sum = 0;
        for (int i = 0; i < N; i++) sum += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        const double err = sqrt(sum) / N;
        CHECK_MSG(err < bound, "%s: %.6f >= %.4f", t->name, err, bound);
    }
    free(x);
    free(y);
    free(q);
}

/* All-zero input must come back as zeros (no NaN from 0/0 scales). Tiny
 * values (normal * 1e-6), whose block scales are subnormal halves or round
 * to zero, must stay finite, and must not come back worse than writing
 * zeros would (NMSE <= 1) - except Q4_K and Q5_K: there the sub-block
 * scale d flushes to 0 while dmin (the min, ~60x larger) survives, leaving
 * a pure offset of about 3x the signal (measured NMSE 8.9; bound 12). That
 * is the format with ggml's quantizer, whose bytes we reproduce; real
 * weights are orders of magnitude larger (see docs/quant-formats.md). */
TEST(quant_zeros_and_tiny) {
    float *x = malloc(ERR_N * sizeof(float));
    float *y = malloc(ERR_N * sizeof(float));
    uint8_t *q = malloc(ERR_N * 8 + 64);
    for (int type = 0; type < OB_TYPE_COUNT; type++) {
        const ob_type_traits *t = ob_type_get(type);
        if (!t || !t->from_float_ref) continue;
        memset(x, 0, ERR_N * sizeof(float));
        CHECK(round_trip(t, type, x, y, ERR_N, q));
        int nonzero = 0;
        for (int i = 0; i < ERR_N; i++) nonzero += y[i] != 0.0f;
        CHECK_MSG(nonzero == 0, "%s: %d non-zero outputs for zero input", t->name, nonzero);

        fill(DIST_NORMAL, x, ERR_N, 77);
        for (int i = 0; i < ERR_N; i++) x[i] *= 1e-6f;
        round_trip(t, type, x, y, ERR_N, q);
        CHECK_MSG(count_nonfinite(y, ERR_N) == 0, "%s: non-finite output for tiny input", t->name);
        const double e = nmse(x, y, ERR_N);
        const double bound = type == OB_TYPE_Q4_K || type == OB_TYPE_Q5_K ? 12.0 : 1.0;
        CHECK_MSG(e <= bound, "%s: tiny input NMSE %.3g > %.3g", t->name, e, bound);
    }
    free(x);
    free(y);
    free(q);
}

/* Q8_1's s field is d times the sum of the codes; Q8_K's bsums are the
 * 16-element code sums (dot-product kernels rely on both). */
TEST(quant_activation_sums) {
    float x[OB_QK_K];
    uint64_t rng = 5;
    for (int i = 0; i < OB_QK_K; i++) x[i] = test_rand_normal(&rng);
    ob_block_q8_1 b1[OB_QK_K / OB_QK8_1];
    ob_quantize_row_q8_1_ref(x, b1, OB_QK_K);
    for (int b = 0; b < OB_QK_K / OB_QK8_1; b++) {
        int sum = 0;
        for (int j = 0; j < OB_QK8_1; j++) sum += b1[b].qs[j];
        CHECK_NEAR(ob_fp16_to_fp32(b1[b].s), sum * ob_fp16_to_fp32(b1[b].d), fabs(sum * ob_fp16_to_fp32(b1[b].d)) * 1e-3 + 1e-6);
    }
    ob_block_q8_K bk;
    ob_quantize_row_q8_K_ref(x, &bk, OB_QK_K);
    for (int g = 0; g < OB_QK_K / 16; g++) {
        int sum = 0;
        for (int j = 0; j < 16; j++) sum += bk.qs[16 * g + j];
        CHECK_EQ_INT(bk.bsums[g], sum);
    }
}

/* ======================================================================
 * Golden digests
 * ====================================================================== */

/* Test data made without libm (test_rand_f32 is exact double arithmetic),
 * so it is the same on every platform. Rows of GOLDEN_COLS values:
 *   0  roughly normal: sum of 4 uniforms on [-1, 1)
 *   1  the same with 1 value in 64 scaled by 16
 *   2  the same scaled by 2^-4 .. 2^4 by row (row-to-row dynamic range)
 *   3  the same scaled by 2^-17 (~8e-6: subnormal half block scales)
 *   4  multiples of 0.25 in -2..1.75 (values exactly on levels: ties) */
#define GOLDEN_DISTS 5
#define GOLDEN_ROWS 32
#define GOLDEN_COLS 512

static float golden_value(uint64_t *rng, int dist, int row) {
    if (dist == 4) return (float)((int)(test_rand_u64(rng) % 16) - 8) * 0.25f;
    float v = 0.0f;
    for (int k = 0; k < 4; k++) v += test_rand_f32(rng);
    switch (dist) {
    case 1: return test_rand_u64(rng) % 64 == 0 ? v * 16.0f : v;
    case 2: return v * (float)(1 << (row % 9)) * 0.0625f;
    case 3: return v * 0x1p-17f;
    default: return v;
    }
}

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* FNV-1a 64 of the bytes each reference quantizer writes for the data
 * above (all five sets, row by row). The values were checked against
 * ggml's own quantizers (ggml-org/ggml @ d99724f2, ggml_quantize_chunk
 * without an importance matrix; quantize_row_q8_1_ref, quantize_row_q8_K_ref)
 * fed the same data: every byte agreed. So this pins byte compatibility
 * for every quantizable type, beyond the fixture file's 8-64 blocks per
 * type, and notably for IQ4_NL/IQ4_XS, whose fixtures used an imatrix. */
static const struct { int type; uint64_t digest; } g_golden[] = {
    {OB_TYPE_F16, 0x7cf816dec3f9af00ull},
    {OB_TYPE_Q4_0, 0x077b7157d3954930ull},
    {OB_TYPE_Q4_1, 0x5ae54a122646ccbdull},
    {OB_TYPE_Q5_0, 0xe4f47673755cd6b4ull},
    {OB_TYPE_Q5_1, 0xd4e048ce8a74a41eull},
    {OB_TYPE_Q8_0, 0x87250feee15caabcull},
    {OB_TYPE_Q8_1, 0xd7fc2c0133ec6c89ull},
    {OB_TYPE_Q2_K, 0xfb4626002218fbfeull},
    {OB_TYPE_Q3_K, 0xb078ab7bc8a62decull},
    {OB_TYPE_Q4_K, 0xd0e885ed62c39eaeull},
    {OB_TYPE_Q5_K, 0x492cf47280b607c7ull},
    {OB_TYPE_Q6_K, 0x50b843b4fc75b88aull},
    {OB_TYPE_Q8_K, 0xf74789d1a4dd6ee4ull},
    {OB_TYPE_IQ4_NL, 0x835e790e7df7384cull},
    {OB_TYPE_IQ4_XS, 0x172711a378aa5182ull},
    {OB_TYPE_BF16, 0xa09728379414f490ull},
    {OB_TYPE_TQ1_0, 0xf6b40ebaad4e7dbdull},
    {OB_TYPE_TQ2_0, 0x3f908bc569b180f5ull},
    {OB_TYPE_MXFP4, 0x1140ee8f1edf1bd2ull},
};

TEST(quant_golden_digest) {
    const size_t max_row = GOLDEN_COLS * 8;
    float *x = malloc(GOLDEN_COLS * sizeof(float));
    uint8_t *q = malloc(max_row);
    for (int type = 0; type < OB_TYPE_COUNT; type++) {
        const ob_type_traits *t = ob_type_get(type);
        if (!t || !t->from_float_ref || type == OB_TYPE_F32 || type == OB_TYPE_F64) continue;
        const size_t rs = ob_row_size((ob_type)type, GOLDEN_COLS);
        uint64_t h = 1469598103934665603ull;
        for (int dist = 0; dist < GOLDEN_DISTS; dist++) {
            uint64_t rng = 4242 + (uint64_t)dist;
            for (int row = 0; row < GOLDEN_ROWS; row++) {
                for (int i = 0; i < GOLDEN_COLS; i++) x[i] = golden_value(&rng, dist, row);
                t->from_float_ref(x, q, GOLDEN_COLS);
                h = fnv1a(h, q, rs);
            }
        }
        int found = 0;
        for (size_t k = 0; k < sizeof g_golden / sizeof g_golden[0]; k++)
            if (g_golden[k].type == type) {
                found = 1;
                CHECK_MSG(g_golden[k].digest == h, "%s: digest 0x%016llx, want 0x%016llx", t->name,
                          (unsigned long long)h, (unsigned long long)g_golden[k].digest);
            }
        if (!found) fprintf(stderr, "  %s: no golden digest (0x%016llx)\n", t->name, (unsigned long long)h);
        CHECK_MSG(found, "%s: no golden digest", t->name);
    }
    free(x);
    free(q);
}

/* The same idea for dequantization: random bytes as blocks (every grid
 * entry, sign pattern and scale code gets hit; halves include Inf and
 * NaN), 1024 super-blocks' worth per type, digest of the output floats
 * with every NaN counted as one canonical NaN (which NaN an operation
 * returns is the hardware's business). Checked against ggml's to_float
 * (dequantize_row_q8_K for Q8_K) on the same bytes: identical. Q8_1 has
 * no ggml dequantizer; its digest is ours. */
static const struct { int type; uint64_t digest; } g_golden_deq[] = {
    {OB_TYPE_F16, 0xd4548c2451632a58ull},
    {OB_TYPE_BF16, 0xc82fae858938a1c8ull},
    {OB_TYPE_Q4_0, 0xc6f795ab517e0cefull},
    {OB_TYPE_Q4_1, 0x01aa5d909f17cec0ull},
    {OB_TYPE_Q5_0, 0x88f81f5c513ae9a3ull},
    {OB_TYPE_Q5_1, 0x9ed7303460e0114aull},
    {OB_TYPE_Q8_0, 0xf2aa89761226df87ull},
    {OB_TYPE_Q8_1, 0x7c1669552e2ce829ull},
    {OB_TYPE_Q2_K, 0xd3ffd64aadeaf2beull},
    {OB_TYPE_Q3_K, 0xeb82b910cf59b098ull},
    {OB_TYPE_Q4_K, 0x3180243c33c90ce1ull},
    {OB_TYPE_Q5_K, 0x37acdb3655584431ull},
    {OB_TYPE_Q6_K, 0x5efbd9b3223678c3ull},
    {OB_TYPE_Q8_K, 0xc5832292f6f9a68aull},
    {OB_TYPE_IQ2_XXS, 0xaa44ed06045a19c2ull},
    {OB_TYPE_IQ2_XS, 0x0f7258351c94e837ull},
    {OB_TYPE_IQ2_S, 0x484e831d75930c55ull},
    {OB_TYPE_IQ3_XXS, 0x4192d87ee24cb534ull},
    {OB_TYPE_IQ3_S, 0x6b352d48e0f91a84ull},
    {OB_TYPE_IQ1_S, 0x876fe535cb289a2dull},
    {OB_TYPE_IQ1_M, 0xe2d3db76349c8185ull},
    {OB_TYPE_IQ4_NL, 0xa7b132007ead1879ull},
    {OB_TYPE_IQ4_XS, 0xf341a5d0a8884136ull},
    {OB_TYPE_TQ1_0, 0xff3508dddbff8115ull},
    {OB_TYPE_TQ2_0, 0xc66fcc70aa10526full},
    {OB_TYPE_MXFP4, 0x3f8c47eedfebe2edull},
};

TEST(dequant_golden_digest) {
    enum { N = OB_QK_K * 1024 };
    float *y = malloc(N * sizeof(float));
    uint8_t *q = malloc(N * 8);
    for (int type = 0; type < OB_TYPE_COUNT; type++) {
        const ob_type_traits *t = ob_type_get(type);
        if (!t || !t->to_float || type == OB_TYPE_F32 || type == OB_TYPE_F64) continue;
        const size_t bytes = ob_row_size((ob_type)type, N);
        uint64_t rng = 99 + (uint64_t)type;
        for (size_t i = 0; i < bytes; i++) q[i] = (uint8_t)test_rand_u64(&rng);
        t->to_float(q, y, N);
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < N; i++) {
            const uint32_t u = isnan(y[i]) ? 0x7fc00000u : f32_bits(y[i]);
            h = fnv1a(h, (const uint8_t *)&u, 4);
        }
        int found = 0;
        for (size_t k = 0; k < sizeof g_golden_deq / sizeof g_golden_deq[0]; k++)
            if (g_golden_deq[k].type == type) {
                found = 1;
                CHECK_MSG(g_golden_deq[k].digest == h, "%s: digest 0x%016llx, want 0x%016llx",
                          t->name, (unsigned long long)h, (unsigned long long)g_golden_deq[k].digest);
            }
        if (!found) fprintf(stderr, "  %s: no golden digest (0x%016llx)\n", t->name, (unsigned long long)h);
        CHECK_MSG(found, "%s: no golden digest", t->name);
    }
    free(y);
    free(q);
}

/* ======================================================================
 * Fixtures written by ggml
 * ====================================================================== */

static const char *const g_fixture_types[] = {
    "f16",   "bf16",   "q4_0",    "q4_1",   "q5_0",  "q5_1",    "q8_0",  "q2_K",
    "q3_K",  "q4_K",   "q5_K",    "q6_K",   "iq1_s", "iq1_m",   "iq2_xxs", "iq2_xs",
    "iq2_s", "iq3_xxs", "iq3_s",  "iq4_nl", "iq4_xs", "tq1_0",  "tq2_0", "mxfp4",
};
#define N_FIXTURE_TYPES (int)(sizeof g_fixture_types / sizeof g_fixture_types[0])

/* Types whose reference quantizer writes exactly ggml's bytes for the
 * fixture inputs. Asserted, so a change that alters the bytes is caught;
 * the others are printed. */
static const char *const g_bytes_exact[] = {
    "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
    "tq1_0", "tq2_0", "mxfp4",
};
/* Not here: iq4_nl and iq4_xs. The fixtures quantized every IQ type with a
 * (synthetic, unrecorded) importance matrix, which changes the weights of
 * the scale search; our reference quantizer is the no-imatrix one. Without
 * an imatrix it does match ggml byte for byte: test quant_golden_digest
 * pins that. */

static int expected_exact(const char *name) {
    for (size_t i = 0; i < sizeof g_bytes_exact / sizeof g_bytes_exact[0]; i++)
        if (strcmp(g_bytes_exact[i], name) == 0) return 1;
    return 0;
}

static ob_gguf *open_fixtures(void) {
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("../shared/models not found");
        return NULL;
    }
    ob_gguf *g = NULL;
    const int rc = ob_gguf_open(test_path(dir, "quant-fixtures/quant-fixtures.gguf"), &g);
    if (rc < 0) {
        fprintf(stderr, "  cannot open fixtures: %s\n", ob_last_error());
        CHECK(rc == 0);
        return NULL;
    }
    return g;
}

static const ob_gguf_tensor *fixture(ob_gguf *g, const char *type, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", type, what);
    const ob_gguf_tensor *t = ob_gguf_find_tensor(g, name);
    CHECK_MSG(t != NULL, "fixture tensor %s missing", name);
    return t;
}

TEST(fixture_dequantize) {
    ob_gguf *g = open_fixtures();
    if (!g) return;
    for (int k = 0; k < N_FIXTURE_TYPES; k++) {
        const char *name = g_fixture_types[k];
        const int type = ob_type_from_name(name);
        const ob_gguf_tensor *tq = fixture(g, name, "q"), *td = fixture(g, name, "deq");
        if (!tq || !td) continue;
        const int64_t n = ob_gguf_tensor_nelements(tq);
        CHECK_EQ_INT(tq->type, type);
        CHECK_EQ_INT(td->type, OB_TYPE_F32);
        CHECK_EQ_INT(ob_gguf_tensor_nelements(td), n);
        CHECK_EQ_INT(tq->nbytes, ob_row_size((ob_type)type, tq->ne[0]) * (size_t)(n / tq->ne[0]));
        if ((int)tq->type != type || ob_gguf_tensor_nelements(td) != n) continue;

        float *y = malloc((size_t)n * sizeof(float));
        ob_type_get(type)->to_float(tq->data, y, n);
        const float *want = (const float *)td->data;
        int64_t diff = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (f32_bits(y[i]) != f32_bits(want[i])) {
                if (first < 0) first = i;
                diff++;
            }
        CHECK_MSG(diff == 0, "%s: %lld of %lld values differ from ggml (first at %lld: %.9g vs %.9g)",
                  name, (long long)diff, (long long)n, (long long)first,
                  first >= 0 ? y[first] : 0.0, first >= 0 ? want[first] : 0.0);
        CHECK(memcmp(y, td->data, (size_t)n * sizeof(float)) == 0);
        free(y);
    }
    ob_gguf_free(g);
}

TEST(fixture_quantize) {
    ob_gguf *g = open_fixtures();
    if (!g) return;
    fprintf(stderr, "  %-8s %s\n", "type", "our quantizer vs ggml's bytes (fixture .src -> .q)");
    for (int k = 0; k < N_FIXTURE_TYPES; k++) {
        const char *name = g_fixture_types[k];
        const int type = ob_type_from_name(name);
        const ob_type_traits *t = ob_type_get(type);
        const ob_gguf_tensor *ts = fixture(g, name, "src"), *tq = fixture(g, name, "q");
        if (!ts || !tq || !t) continue;
        if (!t->from_float_ref) {
            fprintf(stderr, "  %-8s no reference quantizer (needs an importance matrix)\n", name);
            continue;
        }
        const int64_t n = ob_gguf_tensor_nelements(ts);
        const int64_t rows = n / ts->ne[0];
        const size_t row_bytes = ob_row_size((ob_type)type, ts->ne[0]);
        const size_t bytes = row_bytes * (size_t)rows;
        CHECK_EQ_INT(tq->nbytes, bytes);
        if (tq->nbytes != bytes) continue;
        uint8_t *q = malloc(bytes);
        for (int64_t r = 0; r < rows; r++)
            t->from_float_ref((const float *)ts->data + r * ts->ne[0], q + r * row_bytes, ts->ne[0]);
        const size_t bsz = t->type_size;
        int64_t diff_blocks = 0;
        for (size_t off = 0; off < bytes; off += bsz)
            diff_blocks += memcmp(q + off, (const uint8_t *)tq->data + off, bsz) != 0;
        const int64_t n_blocks = (int64_t)(bytes / bsz);
        fprintf(stderr, "  %-8s %s (%lld of %lld blocks differ)\n", name,
                diff_blocks ? "differs" : "byte-exact", (long long)diff_blocks, (long long)n_blocks);
        if (expected_exact(name))
            CHECK_MSG(diff_blocks == 0, "%s: quantizer no longer reproduces ggml's bytes", name);
        free(q);
    }
    ob_gguf_free(g);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
