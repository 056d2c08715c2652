/*
 * device.cu - device discovery for the CUDA plugin. Kernels come with the
 * CUDA backend; this file is the plugin's first entry points and proves the
 * toolchain path in CI.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "ob_cuda.h"
#include "onebit.h"

#define OB_CUDA_CHECK(call, msg, msg_size)                                                      \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            if (msg) snprintf(msg, (size_t)msg_size, "%s failed at %s:%d: %s", #call, __FILE__, \
                              __LINE__, cudaGetErrorString(e_));                                \
            return OB_ERR_DEVICE;                                                               \
        }                                                                                       \
    } while (0)

extern "C" int ob_cuda_abi_version(void) { return OB_CUDA_ABI_VERSION; }

extern "C" int ob_cuda_device_count(char *msg, int msg_size) {
    int n = 0;
    OB_CUDA_CHECK(cudaGetDeviceCount(&n), msg, msg_size);
    return n;
}

extern "C" int ob_cuda_device_info(int dev, char *name, int name_size, unsigned long long *total_mem,
                                   char *msg, int msg_size) {
    cudaDeviceProp p;
    OB_CUDA_CHECK(cudaGetDeviceProperties(&p, dev), msg, msg_size);
    snprintf(name, (size_t)name_size, "%s", p.name);
    *total_mem = (unsigned long long)p.totalGlobalMem;
    return 0;
}
