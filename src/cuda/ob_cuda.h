/*
 * ob_cuda.h - the one C ABI between the CPU binary and lib1bit-cuda.so.
 *
 * The plugin is loaded with dlopen when a CUDA device is asked for, so the
 * `1bit` binary runs on machines without a GPU or driver. Every function
 * returns 0 or a negative ob_status; a failing CUDA call becomes
 * OB_ERR_DEVICE with the call text in the message buffer.
 */
#ifndef OB_CUDA_H
#define OB_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#define OB_CUDA_ABI_VERSION 6 /* 2: ob_backend_ops.argmax_rows; 3: set_batch_invariant; 4: matmul_a4; 5: hadamard_rows;
                                * 6: layer_qkv, layer_ffn */

/* ABI version of the loaded plugin; the host refuses a mismatch. */
int ob_cuda_abi_version(void);
/* Number of CUDA devices (>= 0), or a negative status with a reason in msg. */
int ob_cuda_device_count(char *msg, int msg_size);
/* Name and memory of device `dev`. */
int ob_cuda_device_info(int dev, char *name, int name_size, unsigned long long *total_mem,
                        char *msg, int msg_size);

#ifdef __cplusplus
}
#endif

#endif
