/*
 * scalar.c - reference kernels in plain C, and the tier dispatch.
 */
#include <pthread.h>

#include "../core/log.h"
#include "../quant/quant.h"
#include "kernels.h"

float ob_dot_f32_scalar(const float *x, const float *y, int64_t n) {
    /* Four partial sums: the same association the SIMD kernels use in spirit,
     * and no dependence chain on a single accumulator. */
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
    for (; i < n; i++) s0 += x[i] * y[i];
    return (s0 + s1) + (s2 + s3);
}

void ob_axpy_f32_scalar(float a, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

void ob_scale_f32_scalar(float a, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

void ob_f16_to_f32_scalar(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ob_fp16_to_fp32(x[i]);
}

static const ob_cpu_kernels g_scalar = {OB_CPU_SCALAR, ob_dot_f32_scalar, ob_axpy_f32_scalar, ob_scale_f32_scalar,
                                        ob_f16_to_f32_scalar};
#if defined(__x86_64__)
static const ob_cpu_kernels g_avx2 = {OB_CPU_AVX2, ob_dot_f32_avx2, ob_axpy_f32_avx2, ob_scale_f32_avx2,
                                      ob_f16_to_f32_avx2};
#endif

const ob_cpu_kernels *ob_cpu_kernels_for(ob_cpu_tier tier) {
    if ((int)tier > (int)ob_cpu_max_tier()) return NULL;
    switch (tier) {
    case OB_CPU_SCALAR: return &g_scalar;
#if defined(__x86_64__)
    case OB_CPU_AVX2:
    case OB_CPU_AVX512: return &g_avx2; /* no AVX-512 specific kernels yet */
#endif
    default: return &g_scalar;
    }
}

static const ob_cpu_kernels *g_selected;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void select_tier(void) {
    ob_cpu_tier t;
    if (ob_cpu_tier_select(&t) < 0) {
        OB_LOGW("%s; using the best tier this CPU has", ob_last_error());
        t = ob_cpu_max_tier();
    }
    g_selected = ob_cpu_kernels_for(t);
    OB_LOGI("cpu kernels: %s", ob_cpu_tier_name(g_selected->tier));
}

const ob_cpu_kernels *ob_cpu_kernels_get(void) {
    pthread_once(&g_once, select_tier);
    return g_selected;
}
