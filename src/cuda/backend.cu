/*
 * backend.cu - the plugin's entry point (ob_cuda_backend_create, the one
 * symbol the loader looks up) and the CUDA backend's memory half: device
 * buffers, uploads and downloads, weights, the staging ring for host arrays,
 * scratch buffers and the ops table that points into the op families
 * (matmul.cu, attention.cu, elementwise.cu).
 *
 * Errors: every CUDA/cuBLAS call goes through OB_CU/OB_CUBLAS (common.cuh),
 * which report through the host's ob_err and return OB_ERR_DEVICE; the
 * plugin never exits or aborts. A failed call fails that op only; after a
 * sticky device error (an illegal address, say) every later call reports it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.cuh"
#include "common.cuh"
#include "elementwise.cuh"
#include "matmul.cuh"
#include "quant.cuh"

extern "C" {
#include "quant/iq_tables.h"
}

const ob_cuda_host *g_ob_host;

#define STAGE_INITIAL (4u << 20) /* bytes of the staging ring; grows on demand */
#define MMV_MAX_DEFAULT 64

int ob_cuda_err(int status, const char *fmt, ...) {
    char buf[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return g_ob_host ? g_ob_host->err(status, "%s", buf) : status;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int ob_cuda_fail(cudaError_t e, const char *call, const char *file, int line) {
    return ob_cuda_err(OB_ERR_DEVICE, "CUDA: %s failed at %s:%d: %s (%s)", call, base_name(file), line,
                       cudaGetErrorString(e), cudaGetErrorName(e));
}

int ob_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line) {
    return ob_cuda_err(OB_ERR_DEVICE, "cuBLAS: %s failed at %s:%d: %s", call, base_name(file), line,
                       cublasGetStatusString(s));
}

static void log_msg(int level, const char *msg) {
    if (g_ob_host && g_ob_host->log) g_ob_host->log(level, "%s", msg);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cuda_enter(cuda_backend *c) {
    c->n_ops++;
    OB_CU(cudaSetDevice(c->device));
    return 0;
}

/* ---- staging ring ---- */

static void stage_reset(cuda_backend *c) {
    c->stage_used = 0;
    c->n_cache = 0;
    c->cache_next = 0;
}

int cuda_drain(cuda_backend *c) {
    const double t0 = c->stats ? now_s() : 0.0;
    OB_CU(cudaStreamSynchronize(c->stream));
    if (c->stats) c->wait_s += now_s() - t0, c->n_drains++;
    stage_reset(c);
    return 0;
}

static int stage_alloc(cuda_backend *c, size_t cap) {
    if (c->stage_h) cudaFreeHost(c->stage_h);
    if (c->stage_d) cudaFree(c->stage_d);
    c->stage_h = c->stage_d = NULL;
    c->stage_cap = 0;
    OB_CU(cudaMallocHost((void **)&c->stage_h, cap));
    OB_CU(cudaMalloc((void **)&c->stage_d, cap));
    c->stage_cap = cap;
    stage_reset(c);
    return 0;
}

int cuda_stage(cuda_backend *c, const void *host, size_t n, const void **dev) {
    /* an identical array sent since the last drain is reused */
    for (int i = 0; i < c->n_cache; i++) {
        const cuda_stage_entry *e = &c->cache[i];
        if (e->n == n && memcmp(c->stage_h + e->off, host, n) == 0) {
            *dev = c->stage_d + e->off;
            return 0;
        }
    }
    const size_t need = (n + 15) & ~(size_t)15;
    if (c->stage_used + need > c->stage_cap) {
        OB_TRY(cuda_drain(c)); /* every earlier copy has landed: the ring is free again */
        if (need > c->stage_cap) {
            size_t cap = c->stage_cap * 2;
            while (cap < need) cap *= 2;
            OB_TRY(stage_alloc(c, cap));
        }
    }
    const size_t off = c->stage_used;
    memcpy(c->stage_h + off, host, n);
    OB_CU(cudaMemcpyAsync(c->stage_d + off, c->stage_h + off, n, cudaMemcpyHostToDevice, c->stream));
    c->stage_used += need;
    cuda_stage_entry *e = &c->cache[c->cache_next];
    e->off = off;
    e->n = n;
    c->cache_next = (c->cache_next + 1) % (int)(sizeof c->cache / sizeof c->cache[0]);
    if (c->n_cache < (int)(sizeof c->cache / sizeof c->cache[0])) c->n_cache++;
    *dev = c->stage_d + off;
    return 0;
}

int cuda_scratch(cuda_backend *c, void **buf, size_t *cap, size_t n) {
    if (n <= *cap) return 0;
    OB_TRY(cuda_drain(c)); /* the old buffer may still be in use by queued work */
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    size_t want = n + n / 4;
    OB_CU(cudaMalloc(buf, want));
    *cap = want;
    return 0;
}

int cuda_host_tmp(cuda_backend *c, size_t n, void **out) {
    if (n > c->host_tmp_bytes) {
        size_t want = n + n / 2 + 4096;
        void *p = realloc(c->host_tmp, want);
        if (!p) return ob_cuda_err(OB_ERR_OOM, "CUDA backend host scratch of %zu bytes", want);
        c->host_tmp = p;
        c->host_tmp_bytes = want;
    }
    *out = c->host_tmp;
    return 0;
}

/* ---- memory ops ---- */

static int cuda_alloc(ob_backend *b, size_t n, void **out) {
    cuda_backend *c = cuda_of(b);
    *out = NULL;
    OB_TRY(cuda_enter(c));
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n ? n : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return ob_cuda_err(OB_ERR_OOM, "CUDA: cannot allocate %.1f MiB on device %d (%.1f MiB free of %.1f): %s",
                           (double)n / (1 << 20), c->device, (double)free_b / (1 << 20), (double)total_b / (1 << 20),
                           cudaGetErrorString(e));
    }
    e = cudaMemsetAsync(p, 0, n, c->stream);
    if (e != cudaSuccess) {
        cudaFree(p);
        return ob_cuda_fail(e, "cudaMemsetAsync(p, 0, n, c->stream)", __FILE__, __LINE__);
    }
    *out = p;
    return 0;
}

static void cuda_release(ob_backend *b, void *p) {
    cuda_backend *c = cuda_of(b);
    if (!p) return;
    if (cuda_enter(c) < 0 || cuda_drain(c) < 0 || cudaFree(p) != cudaSuccess) log_msg(1, "CUDA: release failed");
}

static int cuda_upload(ob_backend *b, void *dst, const void *src, size_t n) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    OB_CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream));
    return 0;
}

static int cuda_download(ob_backend *b, void *dst, const void *src, size_t n) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    /* a copy into pageable memory returns only once the stream has reached
     * it: that wait counts as waiting for the GPU too */
    const double t0 = c->stats ? now_s() : 0.0;
    OB_CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream));
    if (c->stats) c->wait_s += now_s() - t0;
    return cuda_drain(c);
}

static int cuda_copy(ob_backend *b, void *dst, const void *src, size_t n) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    OB_CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, c->stream));
    return 0;
}

static int cuda_weight(ob_backend *b, ob_tensor *t, const void *host) {
    cuda_backend *c = cuda_of(b);
    if (!cuda_type_supported((int)t->type))
        return ob_cuda_err(OB_ERR_UNSUPPORTED, "tensor '%s' is %s, which the CUDA backend does not support yet",
                           t->name ? t->name : "?", cuda_type_name(t->type));
    if (c->n_weights == c->cap_weights) {
        size_t cap = c->cap_weights ? c->cap_weights * 2 : 256;
        void **w = (void **)realloc(c->weights, cap * sizeof(void *));
        if (!w) return ob_cuda_err(OB_ERR_OOM, "CUDA weight table");
        c->weights = w;
        c->cap_weights = cap;
    }
    const size_t n = (t->nb[3] * (size_t)t->ne[3]);
    void *p;
    OB_TRY(cuda_alloc(b, n + OB_WEIGHT_PAD, &p)); /* zeroed padding: see matmul.cuh */
    c->weights[c->n_weights++] = p;
    OB_CU(cudaMemcpyAsync(p, host, n, cudaMemcpyHostToDevice, c->stream));
    t->data = p;
    return 0;
}

static int cuda_sync_op(ob_backend *b) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    return cuda_drain(c);
}

static void cuda_free_backend(ob_backend *b) {
    cuda_backend *c = cuda_of(b);
    if (!c) return;
    if (c->stats) {
        char msg[256];
        snprintf(msg, sizeof msg, "CUDA stats: %llu ops, %llu drains, %.3f s waiting for the GPU in drains", c->n_ops,
                 c->n_drains, c->wait_s);
        log_msg(1, msg);
    }
    cudaSetDevice(c->device);
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (size_t i = 0; i < c->n_weights; i++) cudaFree(c->weights[i]);
    free(c->weights);
    if (c->gemm_scratch) cudaFree(c->gemm_scratch);
    if (c->q8_scratch) cudaFree(c->q8_scratch);
    if (c->attn_scratch) cudaFree(c->attn_scratch);
    if (c->luts) cudaFree(c->luts);
    if (c->stage_h) cudaFreeHost(c->stage_h);
    if (c->stage_d) cudaFree(c->stage_d);
    if (c->cublas) cublasDestroy(c->cublas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c->host_tmp);
    free(c);
}

static const ob_backend_ops g_cuda_ops = {
    /* .name = */ "cuda",
    /* .free = */ cuda_free_backend,
    /* .alloc = */ cuda_alloc,
    /* .release = */ cuda_release,
    /* .upload = */ cuda_upload,
    /* .download = */ cuda_download,
    /* .copy = */ cuda_copy,
    /* .weight = */ cuda_weight,
    /* .get_rows = */ cuda_op_get_rows,
    /* .matmul = */ cuda_op_matmul,
    /* .rms_norm = */ cuda_op_rms_norm,
    /* .layer_norm = */ cuda_op_layer_norm,
    /* .rope = */ cuda_op_rope,
    /* .kv_write = */ cuda_op_kv_write,
    /* .attention = */ cuda_op_attention,
    /* .glu = */ cuda_op_glu,
    /* .add = */ cuda_op_add,
    /* .scale = */ cuda_op_scale,
    /* .gather_rows = */ cuda_op_gather_rows,
    /* .sync = */ cuda_sync_op,
};

/* Why there is no usable device, in words a user can act on. */
static int no_device(cudaError_t e, int count, int device) {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    if (e == cudaErrorInsufficientDriver)
        return ob_cuda_err(OB_ERR_DEVICE,
                           "CUDA is not available: no NVIDIA driver was found, or it is older than the CUDA %d.%d "
                           "runtime of lib1bit-cuda.so (%s)",
                           rt / 1000, rt % 1000 / 10, cudaGetErrorString(e));
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0))
        return ob_cuda_err(OB_ERR_DEVICE, "CUDA is not available: the driver reports no CUDA device (%s)",
                           e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    if (e != cudaSuccess)
        return ob_cuda_err(OB_ERR_DEVICE, "CUDA is not available: cudaGetDeviceCount failed: %s (%s)",
                           cudaGetErrorString(e), cudaGetErrorName(e));
    return ob_cuda_err(OB_ERR_DEVICE, "CUDA is not available: device cuda:%d does not exist (%d CUDA device%s)", device,
                       count, count == 1 ? "" : "s");
}

static int backend_init(cuda_backend *c) {
    OB_CU(cudaSetDevice(c->device));
    cudaDeviceProp prop;
    OB_CU(cudaGetDeviceProperties(&prop, c->device));
    c->n_sm = prop.multiProcessorCount;
    c->smem_optin = prop.sharedMemPerBlockOptin;
    OB_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    OB_CUBLAS(cublasCreate(&c->cublas));
    OB_CUBLAS(cublasSetStream(c->cublas, c->stream));
    int8_t luts[OB_LUT_BYTES];
    memcpy(luts + OB_LUT_IQ4NL, ob_iq4nl_values, 16);
    memcpy(luts + OB_LUT_MXFP4, ob_mxfp4_values, 16);
    OB_CU(cudaMalloc((void **)&c->luts, OB_LUT_BYTES));
    OB_CU(cudaMemcpy(c->luts, luts, OB_LUT_BYTES, cudaMemcpyHostToDevice));
    OB_TRY(stage_alloc(c, STAGE_INITIAL));
    c->mmv_max = MMV_MAX_DEFAULT;
    c->stats = getenv("OB_CUDA_STATS") && atoi(getenv("OB_CUDA_STATS")) > 0;
    c->mmvq = !(getenv("OB_CUDA_MMVQ") && atoi(getenv("OB_CUDA_MMVQ")) == 0);
    const char *env = getenv("OB_CUDA_MMV_MAX");
    if (env && *env) c->mmv_max = atoi(env);
    char msg[512];
    snprintf(msg, sizeof msg, "CUDA device %d: %s, sm_%d%d, %d SMs, %.1f GiB", c->device, prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30));
    log_msg(2, msg);
    return 0;
}

extern "C" __attribute__((visibility("default"))) int ob_cuda_backend_create(const ob_cuda_host *host, int device,
                                                                            ob_backend **out) {
    if (!out) return OB_ERR_INVALID_ARG;
    *out = NULL;
    if (!host) return OB_ERR_INVALID_ARG;
    if (host->abi_version != OB_CUDA_ABI_VERSION)
        return host->err(OB_ERR_UNSUPPORTED,
                         "lib1bit-cuda.so speaks plugin ABI %d but this 1bit binary speaks %d: build them together",
                         OB_CUDA_ABI_VERSION, host->abi_version);
    g_ob_host = host;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0 || device < 0 || device >= count) {
        cudaGetLastError();
        return no_device(e, count, device);
    }
    cuda_backend *c = (cuda_backend *)calloc(1, sizeof *c);
    if (!c) return ob_cuda_err(OB_ERR_OOM, "CUDA backend");
    c->base.ops = &g_cuda_ops;
    c->device = device;
    int rc = backend_init(c);
    if (rc < 0) {
        cuda_free_backend(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}
