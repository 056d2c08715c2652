/*
 * kernels.h - the CPU's inner loops, one table of function pointers filled
 * once from the CPU tier (scalar.c is the reference; x86/avx2.c and later
 * x86/avx512.c are compiled with their own -m flags and only called when the
 * CPU has those features).
 */
#ifndef OB_CPU_KERNELS_H
#define OB_CPU_KERNELS_H

#include <stdint.h>

#include "../core/cpu.h"

typedef struct ob_cpu_kernels {
    ob_cpu_tier tier;
    /* sum x[i]*y[i] */
    float (*dot_f32)(const float *x, const float *y, int64_t n);
    /* y[i] += a * x[i] */
    void (*axpy_f32)(float a, const float *x, float *y, int64_t n);
    /* y[i] *= a */
    void (*scale_f32)(float a, float *y, int64_t n);
    /* half -> float for n values */
    void (*f16_to_f32)(const uint16_t *x, float *y, int64_t n);
} ob_cpu_kernels;

/* The kernels for the selected tier (OB_CPU or the best the CPU has). */
const ob_cpu_kernels *ob_cpu_kernels_get(void);
/* Kernels of one tier (for tests comparing tiers); NULL if not compiled/supported. */
const ob_cpu_kernels *ob_cpu_kernels_for(ob_cpu_tier tier);

/* scalar reference */
float ob_dot_f32_scalar(const float *x, const float *y, int64_t n);
void ob_axpy_f32_scalar(float a, const float *x, float *y, int64_t n);
void ob_scale_f32_scalar(float a, float *y, int64_t n);
void ob_f16_to_f32_scalar(const uint16_t *x, float *y, int64_t n);

#if defined(__x86_64__)
float ob_dot_f32_avx2(const float *x, const float *y, int64_t n);
void ob_axpy_f32_avx2(float a, const float *x, float *y, int64_t n);
void ob_scale_f32_avx2(float a, float *y, int64_t n);
void ob_f16_to_f32_avx2(const uint16_t *x, float *y, int64_t n);
#endif

#endif
