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
#include "mm4.cuh"
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

static int prof_collect(cuda_backend *c); /* OB_CUDA_PROF, below */

int cuda_enter(cuda_backend *c) {
    c->n_ops++;
    OB_CU(cudaSetDevice(c->device));
    /* a product held back for a partner runs before anything else can read its output or
     * overwrite its input - unless this op is the product that may join it (cuda_op_matmul) */
    if (c->gpend.on && !c->gpend_hold) OB_TRY(cuda_gemm_settle(c));
    return 0;
}

/* ---- staging ring ---- */

static void stage_reset(cuda_backend *c) {
    c->stage_used = 0;
    c->n_cache = 0;
    c->cache_next = 0;
}

/* ---- CUDA graphs (common.cuh: the recording) ---- */

/* a graph a batch size up to 64 (OB_CUDA_GRAPH_MAX), so a server whose batch size changes
 * step to step does not rebuild them */
#define CUDA_GRAPH_SLOTS 64

typedef struct cuda_rec {
    const void *func;
    dim3 grid, block;
    unsigned smem;
    int nargs;
    size_t off, bytes;          /* argument bytes in rec_args */
    uint16_t aoff[24];          /* offset of each argument from off */
    bool pdl;                   /* may start when the kernel before it has begun (hopper.cuh) */
} cuda_rec;

/* The func of a recorded child graph (cuda_rec_child): its two arguments are the graph's id
 * (unsigned long long) and the cudaGraph_t. */
static const char k_child_func = 0;
#define REC_CHILD ((const void *)&k_child_func)

/* The graph a child record holds. */
static cudaGraph_t rec_child_graph(const cuda_rec *r, const uint8_t *args) {
    cudaGraph_t g;
    memcpy(&g, args + r->off + r->aoff[1], sizeof g);
    return g;
}

/* A graph built from a recording: a chain of one staging copy and the
 * kernels, with what it was built from, so the next recording of the same
 * kernels only updates the nodes that differ. */
typedef struct cuda_graph_slot {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t copy;       /* the staging copy */
    cudaGraphNode_t *nodes;     /* [n] kernels */
    cuda_rec *recs;
    uint8_t *args;
    size_t args_cap;
    int n;
    const uint8_t *copy_h;      /* what the staging copy sends: copy_n bytes from copy_h to copy_d */
    uint8_t *copy_d;
    size_t copy_n;
} cuda_graph_slot;

#define REC_MAX_ARGS 24

int cuda_rec_kernel(cuda_backend *c, const void *func, dim3 grid, dim3 block, size_t smem, int nargs,
                    void *const *args, const size_t *sizes, const size_t *aligns) {
    if (nargs > REC_MAX_ARGS) return ob_cuda_err(OB_ERR_INTERNAL, "graph recording: a kernel with %d arguments", nargs);
    if (c->n_recs == c->cap_recs) {
        const int cap = c->cap_recs ? 2 * c->cap_recs : 1024;
        cuda_rec *r = (cuda_rec *)realloc(c->recs, (size_t)cap * sizeof *r);
        if (!r) return ob_cuda_err(OB_ERR_OOM, "graph recording");
        c->recs = r;
        c->cap_recs = cap;
    }
    size_t need = c->rec_used + 16;
    for (int i = 0; i < nargs; i++) need += sizes[i] + aligns[i];
    if (need > c->rec_cap) {
        size_t cap = c->rec_cap ? 2 * c->rec_cap : 65536;
        while (cap < need) cap *= 2;
        uint8_t *p = (uint8_t *)realloc(c->rec_args, cap);
        if (!p) return ob_cuda_err(OB_ERR_OOM, "graph recording");
        c->rec_args = p;
        c->rec_cap = cap;
    }
    cuda_rec *r = &c->recs[c->n_recs];
    memset(r, 0, sizeof *r);
    r->func = func;
    r->grid = grid;
    r->block = block;
    r->smem = (unsigned)smem;
    r->nargs = nargs;
    r->pdl = c->rec_pdl;
    c->rec_pdl = false;
    /* a programmatic edge leaves a kernel; a kernel after a child graph gets a full one */
    if (c->n_recs > 0 && c->recs[c->n_recs - 1].func == REC_CHILD) r->pdl = false;
    r->off = (c->rec_used + 15) & ~(size_t)15;
    size_t o = 0;
    for (int i = 0; i < nargs; i++) {
        o = (o + aligns[i] - 1) & ~(aligns[i] - 1);
        r->aoff[i] = (uint16_t)o;
        memcpy(c->rec_args + r->off + o, args[i], sizes[i]);
        o += sizes[i];
    }
    r->bytes = o;
    c->rec_used = r->off + o;
    c->n_recs++;
    return 0;
}

int cuda_rec_child(cuda_backend *c, unsigned long long id, cudaGraph_t g) {
    void *args[] = {&id, &g};
    const size_t sizes[] = {sizeof id, sizeof g}, aligns[] = {alignof(unsigned long long), alignof(cudaGraph_t)};
    const bool pdl = c->rec_pdl;
    c->rec_pdl = false;
    OB_TRY(cuda_rec_kernel(c, REC_CHILD, dim3(1), dim3(1), 0, 2, args, sizes, aligns));
    c->rec_pdl = pdl; /* for the next kernel, which gets a full edge all the same */
    return 0;
}

int cuda_rec_rewrite_last(cuda_backend *c, const void *func, dim3 grid, int arg, const void *bytes, size_t size) {
    cuda_rec *r = c->recording && c->n_recs > 0 ? &c->recs[c->n_recs - 1] : NULL;
    if (!r || r->func != func || arg >= r->nargs ||
        r->aoff[arg] + size > (arg + 1 < r->nargs ? (size_t)r->aoff[arg + 1] : r->bytes))
        return ob_cuda_err(OB_ERR_INTERNAL, "graph recording: rewriting a launch that is not the last");
    r->grid = grid;
    memcpy(c->rec_args + r->off + r->aoff[arg], bytes, size);
    return 0;
}

int cuda_graph_begin(cuda_backend *c) {
    if (!c->graphs || c->recording) return 0;
    c->recording = true;
    c->mmvq_pend.rec = -1;
    c->n_recs = 0;
    c->rec_used = 0;
    c->rec_stage0 = c->stage_used;
    return 0;
}

static void slot_clear(cuda_graph_slot *s) {
    if (s->exec) cudaGraphExecDestroy(s->exec);
    if (s->graph) cudaGraphDestroy(s->graph);
    free(s->nodes);
    free(s->recs);
    free(s->args);
    memset(s, 0, sizeof *s);
}

/* Kernel node parameters of record r, its arguments in args. */
static cudaKernelNodeParams rec_params(const cuda_rec *r, const uint8_t *args, void **ptrs) {
    for (int i = 0; i < r->nargs; i++) ptrs[i] = (void *)(args + r->off + r->aoff[i]);
    cudaKernelNodeParams p;
    memset(&p, 0, sizeof p);
    p.func = (void *)r->func;
    p.gridDim = r->grid;
    p.blockDim = r->block;
    p.sharedMemBytes = r->smem;
    p.kernelParams = ptrs;
    return p;
}

static bool same_kernels(const cuda_graph_slot *s, const cuda_backend *c) {
    if (!s->exec || s->n != c->n_recs) return false;
    for (int i = 0; i < s->n; i++)
        if (s->recs[i].func != c->recs[i].func || s->recs[i].nargs != c->recs[i].nargs ||
            s->recs[i].pdl != c->recs[i].pdl)
            return false;
    return true;
}

static bool same_launch(const cuda_rec *a, const uint8_t *aa, const cuda_rec *b, const uint8_t *ba) {
    return a->grid.x == b->grid.x && a->grid.y == b->grid.y && a->grid.z == b->grid.z && a->block.x == b->block.x &&
           a->block.y == b->block.y && a->block.z == b->block.z && a->smem == b->smem && a->bytes == b->bytes &&
           memcmp(aa + a->off, ba + b->off, a->bytes) == 0;
}

/* Remember what slot s was built from or updated to. */
static int slot_keep(cuda_backend *c, cuda_graph_slot *s) {
    if (c->rec_used > s->args_cap) {
        uint8_t *p = (uint8_t *)realloc(s->args, c->rec_used);
        if (!p) return ob_cuda_err(OB_ERR_OOM, "graph slot");
        s->args = p;
        s->args_cap = c->rec_used;
    }
    memcpy(s->args, c->rec_args, c->rec_used);
    memcpy(s->recs, c->recs, (size_t)c->n_recs * sizeof(cuda_rec));
    return 0;
}

/* OB_CUDA_GRAPH_DUMP=1: each new graph's kernels on stderr, runs of the same kernel counted - to
 * see which launches a step makes (what was fused, what was not) with the graphs on. */
static void graph_dump(const cuda_backend *c) {
    fprintf(stderr, "CUDA graph of %d kernels:\n", c->n_recs);
    for (int i = 0, printed = 0; i < c->n_recs && printed < 64; printed++) {
        int j = i + 1;
        while (j < c->n_recs && c->recs[j].func == c->recs[i].func) j++;
        const char *nm = NULL;
        if (c->recs[i].func == REC_CHILD) nm = "(a captured cuBLAS call)";
        else if (cudaFuncGetName(&nm, c->recs[i].func) != cudaSuccess || !nm) nm = "?";
        fprintf(stderr, "  %4d  x%-3d %.100s grid %u\n", i, j - i, nm, c->recs[i].grid.x);
        i = j;
    }
}

static int slot_build(cuda_backend *c, cuda_graph_slot *s, size_t copy_off, size_t copy_n) {
    slot_clear(s);
    s->nodes = (cudaGraphNode_t *)calloc((size_t)c->n_recs, sizeof(cudaGraphNode_t));
    s->recs = (cuda_rec *)malloc((size_t)c->n_recs * sizeof(cuda_rec));
    if (!s->nodes || !s->recs) {
        slot_clear(s);
        return ob_cuda_err(OB_ERR_OOM, "graph of %d kernels", c->n_recs);
    }
    s->n = c->n_recs;
    int rc = 0;
    cudaError_t e = cudaGraphCreate(&s->graph, 0);
    if (e == cudaSuccess)
        e = cudaGraphAddMemcpyNode1D(&s->copy, s->graph, NULL, 0, c->stage_d + copy_off, c->stage_h + copy_off,
                                     copy_n, cudaMemcpyHostToDevice);
    cudaGraphNode_t prev = s->copy;
    void *ptrs[REC_MAX_ARGS];
    for (int i = 0; i < s->n && e == cudaSuccess; i++) {
        if (c->recs[i].func == REC_CHILD) {
            /* the captured graph is cloned into this one */
            e = cudaGraphAddChildGraphNode(&s->nodes[i], s->graph, &prev, 1, rec_child_graph(&c->recs[i], c->rec_args));
            prev = s->nodes[i];
            continue;
        }
        const cudaKernelNodeParams p = rec_params(&c->recs[i], c->rec_args, ptrs);
        if (c->recs[i].pdl && i > 0) {
            /* a programmatic edge: this kernel may start once every block of
             * the one before has begun; it waits for that kernel's end
             * itself (ob_pdl_wait) before reading what it wrote */
            /* (a union with dim3 members: no default constructor, so raw zeroed storage) */
            alignas(cudaGraphNodeParams) unsigned char npb[sizeof(cudaGraphNodeParams)];
            memset(npb, 0, sizeof npb);
            cudaGraphNodeParams &np = *(cudaGraphNodeParams *)npb;
            np.type = cudaGraphNodeTypeKernel;
            np.kernel.func = p.func;
            np.kernel.gridDim = p.gridDim;
            np.kernel.blockDim = p.blockDim;
            np.kernel.sharedMemBytes = p.sharedMemBytes;
            np.kernel.kernelParams = p.kernelParams;
            cudaGraphEdgeData ed;
            memset(&ed, 0, sizeof ed);
            ed.from_port = cudaGraphKernelNodePortLaunchCompletion;
            ed.type = cudaGraphDependencyTypeProgrammatic;
            e = cudaGraphAddNode(&s->nodes[i], s->graph, &prev, &ed, 1, &np);
        } else {
            e = cudaGraphAddKernelNode(&s->nodes[i], s->graph, &prev, 1, &p);
        }
        prev = s->nodes[i];
    }
    if (e == cudaSuccess) e = cudaGraphInstantiate(&s->exec, s->graph, 0);
    if (e != cudaSuccess) {
        rc = ob_cuda_fail(e, "building a CUDA graph (cudaGraphAdd*Node / cudaGraphInstantiate)", __FILE__, __LINE__);
        slot_clear(s);
        return rc;
    }
    s->copy_h = c->stage_h + copy_off;
    s->copy_d = c->stage_d + copy_off;
    s->copy_n = copy_n;
    c->n_instantiations++;
    if (c->graph_dump) graph_dump(c);
    return slot_keep(c, s);
}

int cuda_flush(cuda_backend *c) {
    if (!c->recording) return 0;
    c->recording = false;
    /* what was staged while recording goes in one copy at the head of the graph */
    const size_t copy_off = c->rec_stage0;
    size_t copy_n = c->stage_used - c->rec_stage0;
    if (c->n_recs == 0) {
        if (copy_n)
            OB_CU(cudaMemcpyAsync(c->stage_d + copy_off, c->stage_h + copy_off, copy_n, cudaMemcpyHostToDevice,
                                  c->stream));
        return 0;
    }
    if (copy_n == 0) copy_n = 16 < c->stage_cap - copy_off ? 16 : c->stage_cap - copy_off; /* keep the node */
    cuda_graph_slot *s = NULL;
    for (int i = 0; i < CUDA_GRAPH_SLOTS && !s; i++)
        if (same_kernels(&c->slots[i], c)) s = &c->slots[i];
    if (s) {
        /* same kernels: update what moved */
        cudaError_t e = cudaSuccess;
        if (s->copy_h != c->stage_h + copy_off || s->copy_d != c->stage_d + copy_off || s->copy_n != copy_n) {
            e = cudaGraphExecMemcpyNodeSetParams1D(s->exec, s->copy, c->stage_d + copy_off, c->stage_h + copy_off,
                                                   copy_n, cudaMemcpyHostToDevice);
            s->copy_h = c->stage_h + copy_off;
            s->copy_d = c->stage_d + copy_off;
            s->copy_n = copy_n;
        }
        void *ptrs[REC_MAX_ARGS];
        for (int i = 0; i < s->n && e == cudaSuccess; i++) {
            if (same_launch(&s->recs[i], s->args, &c->recs[i], c->rec_args)) continue;
            if (c->recs[i].func == REC_CHILD) {
                /* another captured call (other buffers, or captured again): the driver refuses a
                 * graph of another shape, and the graph is built anew below */
                e = cudaGraphExecChildGraphNodeSetParams(s->exec, s->nodes[i], rec_child_graph(&c->recs[i], c->rec_args));
                c->n_child_updates++;
                continue;
            }
            const cudaKernelNodeParams p = rec_params(&c->recs[i], c->rec_args, ptrs);
            e = cudaGraphExecKernelNodeSetParams(s->exec, s->nodes[i], &p);
            c->n_node_updates++;
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            OB_TRY(slot_build(c, s, copy_off, copy_n)); /* an update the driver refused: build anew */
        } else {
            OB_TRY(slot_keep(c, s));
        }
    } else {
        s = &c->slots[c->slot_next];
        c->slot_next = (c->slot_next + 1) % CUDA_GRAPH_SLOTS;
        OB_TRY(slot_build(c, s, copy_off, copy_n));
    }
    c->n_graphs++;
    OB_CU(cudaGraphLaunch(s->exec, c->stream));
    return 0;
}

int cuda_drain(cuda_backend *c) {
    OB_TRY(cuda_flush(c));
    const double t0 = c->stats ? now_s() : 0.0;
    OB_CU(cudaStreamSynchronize(c->stream));
    if (c->stats) c->wait_s += now_s() - t0, c->n_drains++;
    if (c->prof) OB_TRY(prof_collect(c));
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
    if (!c->recording) /* else the graph's head copy sends it */
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
    OB_TRY(cuda_flush(c));
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
    /* a held-back product's failure (cuda_enter settles it) is its own error: the memory is
     * released all the same */
    if (cuda_enter(c) < 0) log_msg(1, "CUDA: a held-back product failed before a release");
    if (cuda_drain(c) < 0 || cudaFree(p) != cudaSuccess) log_msg(1, "CUDA: release failed");
}

static int cuda_upload(ob_backend *b, void *dst, const void *src, size_t n) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    OB_TRY(cuda_flush(c)); /* a copy from pageable memory cannot be captured */
    OB_CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream));
    return 0;
}

static int cuda_download(ob_backend *b, void *dst, const void *src, size_t n) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    /* a copy into pageable memory returns only once the stream has reached
     * it: that wait counts as waiting for the GPU too */
    OB_TRY(cuda_flush(c));
    const double t0 = c->stats ? now_s() : 0.0;
    if (c->prof) cuda_prof_begin(c);
    OB_CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream));
    if (c->prof) OB_TRY(cuda_prof_end(c, "download", "download (device to host)"));
    if (c->stats) c->wait_s += now_s() - t0;
    return cuda_drain(c);
}

static int cuda_copy(ob_backend *b, void *dst, const void *src, size_t n) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    OB_TRY(cuda_flush(c));
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

/* ---- OB_CUDA_PROF ---- */

#define OB_PROF_PENDING 1024

typedef struct cuda_prof_entry {
    const void *key;
    const char *name;
    unsigned long long count;
    double ms;
} cuda_prof_entry;

typedef struct cuda_prof_pending {
    const void *key;
    const char *name;
} cuda_prof_pending;

static void prof_add(cuda_backend *c, const void *key, const char *name, float ms) {
    int i = 0;
    while (i < c->prof_n && c->prof_tab[i].key != key) i++;
    if (i == c->prof_n) {
        if (c->prof_n == c->prof_cap) {
            const int cap = c->prof_cap ? 2 * c->prof_cap : 64;
            cuda_prof_entry *t = (cuda_prof_entry *)realloc(c->prof_tab, (size_t)cap * sizeof *t);
            if (!t) return; /* a row lost is not an error of the op */
            c->prof_tab = t, c->prof_cap = cap;
        }
        const char *nm = name;
        if (!nm && cudaFuncGetName(&nm, key) != cudaSuccess) nm = "?";
        c->prof_tab[c->prof_n++] = cuda_prof_entry{key, nm, 0, 0.0};
    }
    c->prof_tab[i].count++;
    c->prof_tab[i].ms += ms;
}

/* Wait for the pending pieces' end events and add their times. */
static int prof_collect(cuda_backend *c) {
    if (c->prof_np == 0) return 0;
    OB_CU(cudaEventSynchronize((cudaEvent_t)c->prof_ev[2 * c->prof_np - 1]));
    for (int i = 0; i < c->prof_np; i++) {
        float ms = 0;
        OB_CU(cudaEventElapsedTime(&ms, (cudaEvent_t)c->prof_ev[2 * i], (cudaEvent_t)c->prof_ev[2 * i + 1]));
        prof_add(c, c->prof_pend[i].key, c->prof_pend[i].name, ms);
    }
    c->prof_np = 0;
    return 0;
}

void cuda_prof_begin(cuda_backend *c) {
    if (c->prof_np == OB_PROF_PENDING && prof_collect(c) < 0) c->prof_np = 0;
    cudaEventRecord((cudaEvent_t)c->prof_ev[2 * c->prof_np], c->stream);
}

int cuda_prof_end(cuda_backend *c, const void *key, const char *name) {
    OB_CU(cudaEventRecord((cudaEvent_t)c->prof_ev[2 * c->prof_np + 1], c->stream));
    c->prof_pend[c->prof_np].key = key;
    c->prof_pend[c->prof_np].name = name;
    c->prof_np++;
    return 0;
}

static int prof_cmp(const void *x, const void *y) {
    const double a = ((const cuda_prof_entry *)x)->ms, b = ((const cuda_prof_entry *)y)->ms;
    return a < b ? 1 : a > b ? -1 : 0;
}

static void prof_print(cuda_backend *c) {
    cudaStreamSynchronize(c->stream);
    prof_collect(c);
    qsort(c->prof_tab, (size_t)c->prof_n, sizeof *c->prof_tab, prof_cmp);
    double total = 0;
    for (int i = 0; i < c->prof_n; i++) total += c->prof_tab[i].ms;
    fprintf(stderr, "CUDA profile (OB_CUDA_PROF): %.3f ms of GPU work in %d kinds\n", total, c->prof_n);
    fprintf(stderr, "  %10s %6s %10s %10s  %s\n", "ms", "%", "calls", "us/call", "kernel");
    for (int i = 0; i < c->prof_n; i++) {
        const cuda_prof_entry *e = &c->prof_tab[i];
        fprintf(stderr, "  %10.3f %6.2f %10llu %10.2f  %.150s\n", e->ms, total > 0 ? 100.0 * e->ms / total : 0.0,
                e->count, 1e3 * e->ms / (double)e->count, e->name);
    }
}

static int cuda_set_batch_invariant(ob_backend *b, bool on) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c)); /* settles a held-back product */
    c->invariant = on;
    return 0;
}

/* The backend of this process that runs the fused layers on each device (cuda_layer_claim). */
#define LK_DEVICES 64
static cuda_backend *g_lk_owner[LK_DEVICES];

bool cuda_layer_claim(cuda_backend *c) {
    if (c->device < 0 || c->device >= LK_DEVICES) return false;
    cuda_backend *none = NULL;
    return __atomic_load_n(&g_lk_owner[c->device], __ATOMIC_ACQUIRE) == c ||
           __atomic_compare_exchange_n(&g_lk_owner[c->device], &none, c, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static void cuda_free_backend(ob_backend *b) {
    cuda_backend *c = cuda_of(b);
    if (!c) return;
    if (c->device >= 0 && c->device < LK_DEVICES) { /* gives the fused layers up, if it had them */
        cuda_backend *me = c;
        __atomic_compare_exchange_n(&g_lk_owner[c->device], &me, (cuda_backend *)NULL, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
    }
    /* a product still held back (cuda_gemm_pend) is dropped: nothing can read its output now */
    if (c->prof) prof_print(c);
    free(c->prof_tab);
    free(c->prof_pend);
    if (c->prof_ev)
        for (int i = 0; i < 2 * OB_PROF_PENDING; i++)
            if (c->prof_ev[i]) cudaEventDestroy((cudaEvent_t)c->prof_ev[i]);
    free(c->prof_ev);
    if (c->stats) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "CUDA stats: %llu ops, %llu drains, %.3f s waiting for the GPU in drains; %llu graphs launched, "
                 "%llu built, %llu kernel nodes updated; %llu cuBLAS calls captured, %llu captured nodes updated; "
                 "%llu products joined, %llu pairs of copies exchanged; %llu layer halves fused; %llu GLUs fused "
                 "into their products",
                 c->n_ops, c->n_drains, c->wait_s, c->n_graphs, c->n_instantiations, c->n_node_updates, c->n_captures,
                 c->n_child_updates, c->n_joins, c->n_exchanges, c->n_layer_fused, c->n_glu_fused);
        log_msg(1, msg);
    }
    cudaSetDevice(c->device);
    if (c->recording) cuda_flush(c);
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->slots)
        for (int i = 0; i < CUDA_GRAPH_SLOTS; i++) slot_clear(&c->slots[i]);
    free(c->slots);
    free(c->recs);
    free(c->rec_args);
    cuda_blas_free(c); /* the captured calls; the workspace after the handle, below */
    for (size_t i = 0; i < c->n_weights; i++) cudaFree(c->weights[i]);
    cuda_bf16_free(c);
    cuda_w4_free(c);
    free(c->weights);
    if (c->gemm_scratch) cudaFree(c->gemm_scratch);
    if (c->act16_scratch) cudaFree(c->act16_scratch);
    if (c->mmw_x) cudaFree(c->mmw_x);
    if (c->q8_scratch) cudaFree(c->q8_scratch);
    if (c->glu_q8) cudaFree(c->glu_q8);
    if (c->glu_cnt) cudaFree(c->glu_cnt);
    if (c->lk_bar) cudaFree(c->lk_bar);
    if (c->lk_h) cudaFree(c->lk_h);
    if (c->q4_scratch) cudaFree(c->q4_scratch);
    if (c->mmq_scratch) cudaFree(c->mmq_scratch);
    if (c->moe_scratch) cudaFree(c->moe_scratch);
    cuda_moe_free(c);
    if (c->argmax_scratch) cudaFree(c->argmax_scratch);
    if (c->attn_scratch) cudaFree(c->attn_scratch);
    if (c->luts) cudaFree(c->luts);
    if (c->stage_h) cudaFreeHost(c->stage_h);
    if (c->stage_d) cudaFree(c->stage_d);
    if (c->cublas) cublasDestroy(c->cublas);
    if (c->blas_ws) cudaFree(c->blas_ws);
    if (c->cap_stream) cudaStreamDestroy(c->cap_stream);
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
    /* .argmax_rows = */ cuda_op_argmax_rows,
    /* .set_batch_invariant = */ cuda_set_batch_invariant,
    /* .matmul_a4 = */ NULL,     /* OB_CUDA_ROTATE=1: g_cuda_ops_rot below */
    /* .hadamard_rows = */ NULL, /* OB_CUDA_ROTATE=1: g_cuda_ops_rot below */
    /* .moe_ffn = */ cuda_op_moe_ffn,
    /* .layer_qkv = */ cuda_op_layer_qkv,
    /* .layer_ffn = */ cuda_op_layer_ffn,
};

/* The rotated Q4_0 route (rotate.cu: hadamard_rows, matmul_a4); OB_CUDA_ROTATE=0
 * leaves it out of the table: the engine then refuses rotated files on CUDA and
 * keeps 8-bit activations. */
static ob_backend_ops rot_ops(void) {
    ob_backend_ops o = g_cuda_ops;
    o.matmul_a4 = cuda_op_matmul_a4; /* Q4_0 only */
    o.hadamard_rows = cuda_op_hadamard_rows;
    return o;
}
static const ob_backend_ops g_cuda_ops_rot = rot_ops();

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
    OB_CU(cudaStreamCreateWithFlags(&c->cap_stream, cudaStreamNonBlocking));
    OB_TRY(cuda_blas_init(c));
    int8_t luts[OB_LUT_BYTES];
    memcpy(luts + OB_LUT_IQ4NL, ob_iq4nl_values, 16);
    memcpy(luts + OB_LUT_MXFP4, ob_mxfp4_values, 16);
    OB_CU(cudaMalloc((void **)&c->luts, OB_LUT_BYTES));
    OB_CU(cudaMemcpy(c->luts, luts, OB_LUT_BYTES, cudaMemcpyHostToDevice));
    OB_TRY(stage_alloc(c, STAGE_INITIAL));
    c->mmv_max = MMV_MAX_DEFAULT;
    c->moe_pairs = getenv("OB_CUDA_MOE_PAIRS") ? atoi(getenv("OB_CUDA_MOE_PAIRS")) : 64;
    c->moe_fused = !(getenv("OB_CUDA_MOE_FUSED") && atoi(getenv("OB_CUDA_MOE_FUSED")) == 0);
    c->mmv16 = !(getenv("OB_CUDA_MMV16") && atoi(getenv("OB_CUDA_MMV16")) == 0);
    c->mmv16_u = getenv("OB_CUDA_MMV16_U") ? atoi(getenv("OB_CUDA_MMV16_U")) : 4;
    c->mmv16_want = getenv("OB_CUDA_MMV16_WANT") ? atoi(getenv("OB_CUDA_MMV16_WANT")) : 0; /* 0: by row size (mmv16.cu) */
    if (c->mmv16_want < 0) c->mmv16_want = 0;
    c->attn_hsplit = !(getenv("OB_CUDA_ATTN_HSPLIT") && atoi(getenv("OB_CUDA_ATTN_HSPLIT")) == 0);
    c->stats = getenv("OB_CUDA_STATS") && atoi(getenv("OB_CUDA_STATS")) > 0;
    c->mmvq = !(getenv("OB_CUDA_MMVQ") && atoi(getenv("OB_CUDA_MMVQ")) == 0);
    c->rot_reuse = !(getenv("OB_CUDA_ROT_REUSE") && atoi(getenv("OB_CUDA_ROT_REUSE")) == 0);
    c->mmvq_u = getenv("OB_CUDA_MMVQ_U") ? atoi(getenv("OB_CUDA_MMVQ_U")) : 1;
    c->mmvq_r = getenv("OB_CUDA_MMVQ_R") ? atoi(getenv("OB_CUDA_MMVQ_R")) : 2;
    c->mmvq_want = getenv("OB_CUDA_MMVQ_WANT") ? atoi(getenv("OB_CUDA_MMVQ_WANT")) : 32;
    c->mmvq_fuse = !(getenv("OB_CUDA_MMVQ_FUSE") && atoi(getenv("OB_CUDA_MMVQ_FUSE")) == 0);
    c->mmvq_pend.rec = -1;
    /* off by default: measured slower (8B Q4_K_M tg128 -4%, TinyLlama -4%, Qwen3-8B BF16 level;
     * bench/RESULTS.md, CUDA session 12) */
    c->glu_fuse = getenv("OB_CUDA_GLU_FUSE") && atoi(getenv("OB_CUDA_GLU_FUSE")) == 1;
    /* off by default: measured slower (8B Q4_K_M tg128 336 -> 304, TinyLlama 1,067 -> 915; bench/RESULTS.md,
     * CUDA session 16) */
    c->layer_fuse = getenv("OB_CUDA_LAYER") && atoi(getenv("OB_CUDA_LAYER")) == 1;
    c->mmvq_stream = getenv("OB_CUDA_MMVQ_STREAM") && atoi(getenv("OB_CUDA_MMVQ_STREAM")) == 1;
    c->graph_dump = getenv("OB_CUDA_GRAPH_DUMP") && atoi(getenv("OB_CUDA_GRAPH_DUMP")) == 1;
    c->norm_vec = !(getenv("OB_CUDA_NORM_VEC") && atoi(getenv("OB_CUDA_NORM_VEC")) == 0);
    c->qk_fuse = !(getenv("OB_CUDA_QK_FUSE") && atoi(getenv("OB_CUDA_QK_FUSE")) == 0);
    c->kv_fuse = !(getenv("OB_CUDA_KV_FUSE") && atoi(getenv("OB_CUDA_KV_FUSE")) == 0);
    c->attn_q8 = !(getenv("OB_CUDA_ATTN_Q8") && atoi(getenv("OB_CUDA_ATTN_Q8")) == 0);
    {
        const char *e = getenv("OB_CUDA_BF16_CACHE"); /* unset or empty: auto */
        c->bf16_mode = e && *e ? (atoi(e) ? 1 : 0) : 2;
    }
    c->bf16_left = -1;
    /* measured (bench/RESULTS.md, CUDA session 9): 8B Q4_K_M at 32 / 64 sequences 3,409 / 4,931
     * tok/s through mmq, 4,054 / 7,290 through the kept copies at 17; 16 sequences level */
    c->bf16_min = getenv("OB_CUDA_BF16_MIN") ? atoi(getenv("OB_CUDA_BF16_MIN")) : 17;
    c->attn_split_sm = getenv("OB_CUDA_ATTN_SPLIT") ? atoi(getenv("OB_CUDA_ATTN_SPLIT")) : 2;
    if (c->attn_split_sm < 1) c->attn_split_sm = 2;
    if (c->mmvq_want < 1) c->mmvq_want = 32;
    {
        int major = 0;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device);
        c->mmq = major >= 8 && !(getenv("OB_CUDA_MMQ") && atoi(getenv("OB_CUDA_MMQ")) == 0);
        /* prompt attention on tensor cores (OB_CUDA_ATTN_MMA=0: the vector kernels) */
        c->attn_mma = major >= 8 && !(getenv("OB_CUDA_ATTN_MMA") && atoi(getenv("OB_CUDA_ATTN_MMA")) == 0);
#ifdef __HIP_PLATFORM_AMD__
        c->mmq = c->attn_mma = false; /* the tensor-core instructions are NVIDIA's */
#endif
        c->mmq_max = getenv("OB_CUDA_MMQ_MAX") ? atoi(getenv("OB_CUDA_MMQ_MAX")) : 64;
        c->mmq_min = getenv("OB_CUDA_MMQ_MIN") ? atoi(getenv("OB_CUDA_MMQ_MIN")) : 6; /* measured: 4 tokens faster in mmvq, 6 in mmq */
        if (c->mmq_min < 2) c->mmq_min = 2;
        c->mmq_blocks = getenv("OB_CUDA_MMQ_BLOCKS") ? atoi(getenv("OB_CUDA_MMQ_BLOCKS")) : 4;
        c->mmq_split = getenv("OB_CUDA_MMQ_SPLIT") ? atoi(getenv("OB_CUDA_MMQ_SPLIT")) : 0;
        if (c->mmq_blocks < 1) c->mmq_blocks = 4;
        c->mmq_bm = getenv("OB_CUDA_MMQ_BM") ? atoi(getenv("OB_CUDA_MMQ_BM")) : 64;
        /* bf16 tensor cores on weights decoded in the kernel (mmw.cu) for batches of
         * OB_CUDA_MMW_MIN..OB_CUDA_MMW_MAX tokens: off unless OB_CUDA_MMW=1 (measured slower
         * than the int8 product and the kept bf16 copies: its shared-memory and L1 traffic
         * bounds it, bench/RESULTS.md, CUDA session 9) */
        c->mmw = c->mmq && getenv("OB_CUDA_MMW") && atoi(getenv("OB_CUDA_MMW")) == 1;
        c->mmw_min = getenv("OB_CUDA_MMW_MIN") ? atoi(getenv("OB_CUDA_MMW_MIN")) : 17;
        c->mmw_max = getenv("OB_CUDA_MMW_MAX") ? atoi(getenv("OB_CUDA_MMW_MAX")) : 256;
        c->mmw_blocks = getenv("OB_CUDA_MMW_BLOCKS") ? atoi(getenv("OB_CUDA_MMW_BLOCKS")) : 2;
        if (c->mmw_min < 1) c->mmw_min = 1;
        /* Q4_K weights through fragment-order copies (mm4.cu, w4.cuh): off unless OB_CUDA_W4=1 */
        c->w4 = c->mmq && getenv("OB_CUDA_W4") && atoi(getenv("OB_CUDA_W4")) == 1;
        c->w4_min = getenv("OB_CUDA_W4_MIN") ? atoi(getenv("OB_CUDA_W4_MIN")) : 17;
        c->w4_max = getenv("OB_CUDA_W4_MAX") ? atoi(getenv("OB_CUDA_W4_MAX")) : 256;
        c->w4_blocks = getenv("OB_CUDA_W4_BLOCKS") ? atoi(getenv("OB_CUDA_W4_BLOCKS")) : 1;
        if (c->w4_min < 1) c->w4_min = 1;
        if (c->w4_blocks < 1) c->w4_blocks = 1;
        if (c->mmw_blocks < 1) c->mmw_blocks = 2;
    }
    c->invariant = getenv("OB_CUDA_INVARIANT") && atoi(getenv("OB_CUDA_INVARIANT")) > 0;
    c->attn_vec = !(getenv("OB_CUDA_ATTN_VEC") && atoi(getenv("OB_CUDA_ATTN_VEC")) == 0);
    c->attn_vt = !(getenv("OB_CUDA_ATTN_VT") && atoi(getenv("OB_CUDA_ATTN_VT")) == 0);
    c->attn_vt_min = getenv("OB_CUDA_ATTN_VT_MIN") ? atoi(getenv("OB_CUDA_ATTN_VT_MIN")) : 64;
    c->gemm_join = getenv("OB_CUDA_GEMM_JOIN") ? atoi(getenv("OB_CUDA_GEMM_JOIN")) : 64;
    c->gemm16 = !(getenv("OB_CUDA_GEMM") && strcmp(getenv("OB_CUDA_GEMM"), "tf32") == 0);
    {
        int dev_major = 0;
        cudaDeviceGetAttribute(&dev_major, cudaDevAttrComputeCapabilityMajor, c->device);
        c->pdl = dev_major >= 9 && !(getenv("OB_CUDA_PDL") && atoi(getenv("OB_CUDA_PDL")) == 0);
        c->pdl_all = c->pdl && !(getenv("OB_CUDA_PDL_ALL") && atoi(getenv("OB_CUDA_PDL_ALL")) == 0);
    }
    c->graphs = !(getenv("OB_CUDA_GRAPHS") && atoi(getenv("OB_CUDA_GRAPHS")) == 0);
    /* up to 64 tokens: a whole decode step in one graph, the cuBLAS products of 17+ tokens as
     * captured child graphs (graph_blas); 16 sequences 1,861 -> 2,071 tok/s (session 9) */
    c->graph_max = getenv("OB_CUDA_GRAPH_MAX") ? atoi(getenv("OB_CUDA_GRAPH_MAX")) : 64;
    c->graph_blas = !(getenv("OB_CUDA_GRAPH_BLAS") && atoi(getenv("OB_CUDA_GRAPH_BLAS")) == 0);
    c->prof = getenv("OB_CUDA_PROF") && atoi(getenv("OB_CUDA_PROF")) > 0;
    if (c->prof) {
        c->graphs = false; /* each launch timed on its own */
        c->prof_ev = (void **)calloc(2 * OB_PROF_PENDING, sizeof(void *));
        c->prof_pend = (cuda_prof_pending *)calloc(OB_PROF_PENDING, sizeof(cuda_prof_pending));
        if (!c->prof_ev || !c->prof_pend) return ob_cuda_err(OB_ERR_OOM, "OB_CUDA_PROF");
        for (int i = 0; i < 2 * OB_PROF_PENDING; i++) OB_CU(cudaEventCreate((cudaEvent_t *)&c->prof_ev[i]));
    }
    c->slots = (cuda_graph_slot *)calloc(CUDA_GRAPH_SLOTS, sizeof(cuda_graph_slot));
    if (!c->slots) return ob_cuda_err(OB_ERR_OOM, "CUDA backend");
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
    const char *rot = getenv("OB_CUDA_ROTATE");
    c->base.ops = rot && atoi(rot) == 0 ? &g_cuda_ops : &g_cuda_ops_rot;
    c->device = device;
    int rc = backend_init(c);
    if (rc < 0) {
        cuda_free_backend(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}
