/*
 * bmma.cuh - the bf16 tensor-core pieces mmw.cu and mm4.cu share: ldmatrix
 * of four 8x8 tiles, mma.sync m16n8k16 (bf16 in, float sums), a float pair
 * rounded to bf16x2. NVIDIA's instructions (PTX, sm_80 and later); a HIP
 * build compiles them as no-ops and the host never picks their kernels.
 */
#ifndef OB_CUDA_BMMA_CUH
#define OB_CUDA_BMMA_CUH

#include <cuda_bf16.h>

#include "common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIP_PLATFORM_AMD__)
#define OB_HAVE_BMMA 1
#endif

static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
#ifdef OB_HAVE_BMMA
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    (void)p;
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

static __device__ __forceinline__ void bmma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifdef OB_HAVE_BMMA
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1;
#endif
}

static __device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *(const uint32_t *)&h;
}

#endif
