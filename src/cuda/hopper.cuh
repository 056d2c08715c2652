/*
 * hopper.cuh - what only Hopper (sm_90) and later do, behind guards so the
 * rest of the plugin builds for older GPUs and for HIP.
 *
 * Programmatic dependent launch: in a CUDA graph, a kernel node may start
 * once every block of the kernel before it has begun (a programmatic edge
 * from its launch-completion port) instead of once that kernel has ended.
 * The decode product uses the head start to issue its weight loads - which
 * depend on nothing earlier in the step - and then waits, with
 * ob_pdl_wait(), until the kernel before it has finished and its writes are
 * visible, before it reads the activations. Launched without such an edge
 * (or on other devices) ob_pdl_wait() returns at once.
 */
#ifndef OB_CUDA_HOPPER_CUH
#define OB_CUDA_HOPPER_CUH

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIP_PLATFORM_AMD__)
#define OB_HAVE_PDL 1
#endif

static __device__ __forceinline__ void ob_pdl_wait(void) {
#ifdef OB_HAVE_PDL
    cudaGridDependencySynchronize();
#endif
}

#endif
