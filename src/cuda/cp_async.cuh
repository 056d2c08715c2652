/*
 * cp_async.cuh - asynchronous copies from global to shared memory
 * (cp.async, sm_80+): a thread starts copies of CP = 4, 8 or 16 bytes,
 * closes them into a group (cp_async_commit) and later waits until at most
 * N of its groups are still in flight (cp_async_wait<N>). The copies hold no
 * registers while in flight, which is what lets a kernel keep many bytes on
 * the way without losing occupancy. Another thread's copies are visible
 * after its wait and a barrier (__syncwarp or __syncthreads).
 *
 * Elsewhere (HIP, older GPUs) the copy is an ordinary load and store and the
 * group calls do nothing, so the kernels that use these stay correct.
 */
#ifndef OB_CUDA_CP_ASYNC_CUH
#define OB_CUDA_CP_ASYNC_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIP_PLATFORM_AMD__)
#define OB_HAVE_CP_ASYNC 1
#endif

template <int CP> static __device__ __forceinline__ void cp_async(void *dst, const void *src) {
    static_assert(CP == 4 || CP == 8 || CP == 16, "cp.async copies 4, 8 or 16 bytes");
#ifdef OB_HAVE_CP_ASYNC
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if (CP == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src));
    else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(src), "n"(CP));
#else
    if (CP == 16) *(uint4 *)dst = *(const uint4 *)src;
    else if (CP == 8) *(uint2 *)dst = *(const uint2 *)src;
    else *(uint32_t *)dst = *(const uint32_t *)src;
#endif
}

static __device__ __forceinline__ void cp_async_commit(void) {
#ifdef OB_HAVE_CP_ASYNC
    asm volatile("cp.async.commit_group;");
#endif
}

template <int N> static __device__ __forceinline__ void cp_async_wait(void) {
#ifdef OB_HAVE_CP_ASYNC
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}

#endif
