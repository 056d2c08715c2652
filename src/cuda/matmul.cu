/*
 * matmul.cu - the matrix family's ops: get_rows (embedding lookup of any
 * weight type) and matmul (W^T x + bias), with the choice between the
 * decode kernel (mmv.cuh) and dequantize-then-cuBLAS for larger batches.
 * See matmul.cuh for why each path looks the way it does.
 */
#include <cuda_bf16.h>

#include "matmul.cuh"
#include "mmq.cuh"
#include "mm4.cuh"
#include "mmw.cuh"
#include "quant.cuh"

/* Rows dequantized per cuBLAS call are capped so the float scratch stays at
 * 256 MiB (a 128k-vocabulary output matrix goes through in a few slices). */
#define GEMM_SCRATCH_FLOATS ((size_t)64 << 20)

/* ---- element access for float rows whose length is not a multiple of 8 ---- */

static __device__ __forceinline__ float float_elem(int type, const uint8_t *row, int64_t k) {
    switch (type) {
    case OB_TYPE_F16: return ob_h2f(((const uint16_t *)row)[k]);
    case OB_TYPE_BF16: return ob_bf2f(((const uint16_t *)row)[k]);
    default: return ((const float *)row)[k];
    }
}

/* ---- get_rows ---- */

template <int T>
__global__ void get_rows_kernel(const uint8_t *__restrict__ table, size_t nb1, int64_t nch,
                                const int32_t *__restrict__ ids, float *__restrict__ out, int64_t ldo,
                                const int8_t *__restrict__ lut) {
    const int64_t i = blockIdx.y;
    const uint8_t *row = table + (size_t)ids[i] * nb1;
    for (int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; ch < nch; ch += (int64_t)gridDim.x * blockDim.x) {
        float v[8];
        deq_chunk<T>(row, ch, v, lut);
        float *o = out + i * ldo + ch * 8;
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = v[k];
    }
}

__global__ void get_rows_float_kernel(int type, const uint8_t *__restrict__ table, size_t nb1, int64_t ne0,
                                      const int32_t *__restrict__ ids, float *__restrict__ out, int64_t ldo) {
    const int64_t i = blockIdx.y;
    const uint8_t *row = table + (size_t)ids[i] * nb1;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < ne0; k += (int64_t)gridDim.x * blockDim.x)
        out[i * ldo + k] = float_elem(type, row, k);
}

static bool is_float_type(int t) { return t == OB_TYPE_F32 || t == OB_TYPE_F16 || t == OB_TYPE_BF16; }

static int check_type(const ob_tensor *t) {
    if (!cuda_type_supported((int)t->type))
        return ob_cuda_err(OB_ERR_UNSUPPORTED, "tensor '%s': type %s is not supported by the CUDA backend",
                           t->name ? t->name : "?", cuda_type_name(t->type));
    return 0;
}

int cuda_op_get_rows(ob_backend *b, const ob_tensor *table, const int32_t *ids, int64_t n, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    OB_TRY(check_type(table));
    if (n <= 0) return 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= table->ne[1])
            return ob_cuda_err(OB_ERR_RANGE, "token id %d is outside the vocabulary of %lld", ids[i],
                               (long long)table->ne[1]);
    if (n > 65535) return ob_cuda_err(OB_ERR_UNSUPPORTED, "get_rows: %lld rows in one call", (long long)n);
    /* the embedding lookup starts a forward pass: record a batch of up to OB_CUDA_GRAPH_MAX
     * tokens (default 64) into a graph (a graph a batch size, backend.cu keeps 64). Above 16
     * tokens only when the pass before had as many: a decode step that repeats, where its
     * captured cuBLAS calls (blas_run) pay off - not a short prompt or a batch whose size
     * comes once, which would capture each of its calls to run them once */
    const bool repeat = n == c->last_rows_n;
    c->last_rows_n = n;
    if (n <= c->graph_max && (n <= 16 || repeat)) OB_TRY(cuda_graph_begin(c));
    const void *d_ids;
    OB_TRY(cuda_stage(c, ids, (size_t)n * sizeof(int32_t), &d_ids));
    const int64_t ne0 = table->ne[0], ldo = (int64_t)(out->nb[1] / sizeof(float));
    const uint8_t *tab = (const uint8_t *)table->data;
    float *o = (float *)out->data;
    const int threads = 256;
    if (ne0 % 8 != 0) {
        if (!is_float_type((int)table->type)) return ob_cuda_err(OB_ERR_INTERNAL, "get_rows: row of %lld", (long long)ne0);
        dim3 grid(ob_div_up((size_t)ne0, threads), (unsigned)n);
        OB_TRY(cuda_launch(c, get_rows_float_kernel, grid, threads, 0, (int)table->type, tab, table->nb[1], ne0,
                                                                (const int32_t *)d_ids, o, ldo));
        return 0;
    }
    const int64_t nch = ne0 / 8;
    dim3 grid(ob_div_up((size_t)nch, threads), (unsigned)n);
    switch ((int)table->type) {
#define OB_CASE(T)                                                                                          \
    case T:                                                                                                 \
        OB_TRY(cuda_launch(c, get_rows_kernel<T>, grid, threads, 0, tab, table->nb[1], nch, (const int32_t *)d_ids, o, \
                                                            ldo, c->luts));                                  \
        break;
        OB_CUDA_FOR_EACH_TYPE(OB_CASE)
#undef OB_CASE
    default: return ob_cuda_err(OB_ERR_INTERNAL, "get_rows: type %d", (int)table->type);
    }
    return 0;
}

/* ---- dequantize rows for cuBLAS: to bf16 (tensor cores) or float32 ---- */

static __device__ __forceinline__ void store8(float *o, const float *v) {
    ((float4 *)o)[0] = make_float4(v[0], v[1], v[2], v[3]);
    ((float4 *)o)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
static __device__ __forceinline__ void store8(__nv_bfloat16 *o, const float *v) {
    __nv_bfloat162 p[4];
#pragma unroll
    for (int k = 0; k < 4; k++) p[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *(uint4 *)o = *(const uint4 *)p;
}
static __device__ __forceinline__ void store1(float *o, float v) { *o = v; }
static __device__ __forceinline__ void store1(__nv_bfloat16 *o, float v) { *o = __float2bfloat16_rn(v); }
static __device__ __forceinline__ void store1(__half *o, float v) { *o = __float2half_rn(v); }

template <int T, typename O>
__global__ void dequant_kernel(const uint8_t *__restrict__ w, size_t nb1, int64_t nch, int64_t rows,
                               O *__restrict__ dst, const int8_t *__restrict__ lut) {
    const int64_t total = rows * nch;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / nch, ch = i % nch;
        float v[8];
        deq_chunk<T>(w + (size_t)r * nb1, ch, v, lut);
        store8(dst + r * nch * 8 + ch * 8, v);
    }
}

template <typename O>
__global__ void dequant_float_kernel(int type, const uint8_t *__restrict__ w, size_t nb1, int64_t ne0, int64_t rows,
                                     O *__restrict__ dst) {
    const int64_t total = rows * ne0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        store1(dst + i, float_elem(type, w + (size_t)(i / ne0) * nb1, i % ne0));
}

/* Activations [n][ld] float -> [n][nin] bf16 or f16, for the tensor-core products. */
template <typename O>
__global__ void act16_kernel(const float *__restrict__ x, int64_t ldx, int64_t nin, int64_t n, O *__restrict__ dst) {
    const int64_t total = n * nin;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        store1(dst + i, x[(i / nin) * ldx + i % nin]);
}

static unsigned grid_for(int64_t work, int threads, const cuda_backend *c) {
    int64_t g = (work + threads - 1) / threads, cap = (int64_t)c->n_sm * 32;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

template <typename O> static int dequant_rows(cuda_backend *c, const ob_tensor *w, int64_t r0, int64_t rows, O *dst) {
    const int64_t ne0 = w->ne[0];
    const uint8_t *src = (const uint8_t *)w->data + (size_t)r0 * w->nb[1];
    const int threads = 256;
    if (ne0 % 8 != 0) {
        OB_TRY(cuda_launch(c, dequant_float_kernel<O>, grid_for(rows * ne0, threads, c), threads, 0, (int)w->type,
                           src, w->nb[1], ne0, rows, dst));
        return 0;
    }
    const int64_t nch = ne0 / 8;
    const unsigned grid = grid_for(rows * nch, threads, c);
    switch ((int)w->type) {
#define OB_CASE(T)                                                                                           \
    case T:                                                                                                  \
        OB_TRY(cuda_launch(c, dequant_kernel<T, O>, grid, threads, 0, src, w->nb[1], nch, rows, dst, c->luts)); \
        break;
        OB_CUDA_FOR_EACH_TYPE(OB_CASE)
#undef OB_CASE
    default: return ob_cuda_err(OB_ERR_INTERNAL, "dequant: type %d", (int)w->type);
    }
    return 0;
}

/* ---- bf16 copies of quantized weights for large batches ----
 *
 * A prompt batch through cuBLAS dequantizes every quantized weight to bf16
 * first: on the 8B Q4_K_M that pass writes and reads 16 GB, ~9 ms of a
 * 512-token batch's ~25 ms. When the device has the room, the copy made at a
 * weight's first large batch is kept (whole weight tensors only: w->data is
 * one of the backend's weight allocations, so it never changes) and later
 * batches multiply it directly. The room: after the copies a quarter of the
 * device's memory must stay free (the KV cache and the contexts' buffers are
 * allocated before the first batch, so what is free then is what is spare);
 * OB_CUDA_BF16_CACHE=1 drops that reserve, 0 turns the copies off. */
struct cuda_bf16_entry {
    const void *src;
    void *dst;
    int64_t nin, nout;
    int type;
    bool exchanged; /* its contents were exchanged with a partner's once (gemm_try_join) */
};

void cuda_bf16_free(cuda_backend *c) {
    for (size_t i = 0; i < c->n_bf16; i++) cudaFree(c->bf16[i].dst);
    free(c->bf16);
    c->bf16 = NULL;
    c->n_bf16 = c->cap_bf16 = 0;
}

/* The kept bf16 copy of w, or NULL (none made yet). */
static const __nv_bfloat16 *bf16_kept(const cuda_backend *c, const ob_tensor *w) {
    for (size_t i = 0; i < c->n_bf16; i++) {
        const cuda_bf16_entry *e = &c->bf16[i];
        if (e->src == w->data && e->nin == w->ne[0] && e->nout == w->ne[1] && e->type == (int)w->type)
            return (const __nv_bfloat16 *)e->dst;
    }
    return NULL;
}

/* The bf16 copy of w to multiply, made now if there is room; NULL: dequantize as usual. */
static int bf16_cached(cuda_backend *c, const ob_tensor *w, const __nv_bfloat16 **out) {
    *out = NULL;
    if (!c->bf16_mode) return 0;
    const int64_t nin = w->ne[0], nout = w->ne[1];
    if ((*out = bf16_kept(c, w)) != NULL) return 0;
    bool weight = false;
    for (size_t i = 0; i < c->n_weights && !weight; i++) weight = c->weights[i] == w->data;
    if (!weight) return 0;
    const size_t bytes = (size_t)nin * (size_t)nout * 2;
    if (c->bf16_left < 0) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) { /* no figure: no copies, the product goes on */
            cudaGetLastError();
            free_b = total_b = 0;
        }
        const size_t reserve = c->bf16_mode == 2 ? total_b / 4 : (size_t)256 << 20;
        c->bf16_left = free_b > reserve ? (long long)(free_b - reserve) : 0;
    }
    if ((long long)bytes > c->bf16_left) {
        c->bf16_short = true;
        return 0;
    }
    if (c->n_bf16 == c->cap_bf16) {
        const size_t cap = c->cap_bf16 ? 2 * c->cap_bf16 : 256;
        cuda_bf16_entry *t = (cuda_bf16_entry *)realloc(c->bf16, cap * sizeof *t);
        if (!t) return 0; /* no room for the table: dequantize as usual */
        c->bf16 = t;
        c->cap_bf16 = cap;
    }
    OB_TRY(cuda_flush(c)); /* the copy is made outside a recorded step */
    void *dst = NULL;
    if (cudaMalloc(&dst, bytes) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is not an error here: no more copies */
        c->bf16_left = 0;
        c->bf16_short = true;
        return 0;
    }
    c->bf16_left -= (long long)bytes;
    cuda_bf16_entry *e = &c->bf16[c->n_bf16++];
    e->src = w->data, e->dst = dst, e->nin = nin, e->nout = nout, e->type = (int)w->type, e->exchanged = false;
    OB_TRY(dequant_rows(c, w, 0, nout, (__nv_bfloat16 *)dst));
    *out = (const __nv_bfloat16 *)dst;
    return 0;
}

__global__ void add_bias_kernel(float *__restrict__ out, int64_t ldo, int64_t nout, int64_t n,
                                const float *__restrict__ bias) {
    const int64_t total = n * nout;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        out[(i / nout) * ldo + i % nout] += bias[i % nout];
}

bool cuda_b16_wanted(const cuda_backend *c, int64_t n) {
    /* once copies are kept and none was refused for room (else the products without one take
     * the int8 kernels, which want the q8 copy): bf16 copies for cuBLAS, or the fragment-order
     * copies of mm4.cu */
    if (c->invariant) return false;
    const bool b16 = c->gemm16 && c->bf16_mode && c->bf16_min > 0 && n >= c->bf16_min && c->n_bf16 > 0 && !c->bf16_short;
    const bool w4 = c->w4 && n >= c->w4_min && n <= c->w4_max && c->n_w4 > 0 && !c->w4_short;
    return b16 || w4;
}

int cuda_b16_target(cuda_backend *c, int64_t n, int64_t nin, void **xb) {
    OB_TRY(cuda_scratch(c, &c->act16_scratch, &c->act16_scratch_bytes, (size_t)(n * nin) * 2));
    *xb = c->act16_scratch;
    return 0;
}

void cuda_b16_made(cuda_backend *c, const void *src, int64_t n, int64_t nin, int64_t ld) {
    c->a16_src = src, c->a16_n = n, c->a16_nin = nin, c->a16_ld = ld, c->a16_f16 = false;
    c->a16_op = c->n_ops, c->a16_buf = c->act16_scratch;
}

int cuda_act16(cuda_backend *c, const ob_tensor *x, bool f16, const void **out) {
    const int64_t nin = x->ne[0], n = x->ne[1], ldb = (int64_t)(x->nb[1] / sizeof(float));
    OB_TRY(cuda_scratch(c, &c->act16_scratch, &c->act16_scratch_bytes, (size_t)(n * nin) * 2));
    /* the input's 16-bit copy is reused when the op just before made it from the same input
     * in the same type (q, k and v; gate and up; a norm or GLU that wrote it): nothing ran in
     * between (the op count moved by one), so input and copy still agree */
    const bool same = c->a16_src == x->data && c->a16_n == n && c->a16_nin == nin && c->a16_ld == ldb &&
                      c->a16_f16 == f16 && c->a16_op + 1 == c->n_ops && c->a16_buf == c->act16_scratch;
    if (!same && f16)
        OB_TRY(cuda_launch(c, act16_kernel<__half>, grid_for(n * nin, 256, c), 256, 0, (const float *)x->data, ldb,
                           nin, n, (__half *)c->act16_scratch));
    else if (!same)
        OB_TRY(cuda_launch(c, act16_kernel<__nv_bfloat16>, grid_for(n * nin, 256, c), 256, 0, (const float *)x->data,
                           ldb, nin, n, (__nv_bfloat16 *)c->act16_scratch));
    cuda_b16_made(c, x->data, n, nin, ldb);
    c->a16_f16 = f16;
    *out = c->act16_scratch;
    return 0;
}

/* ---- cuBLAS calls, in recorded steps and out ----
 *
 * Every product through cuBLAS is described by a blas_call and run by blas_run. Outside a
 * recording it goes on the stream. While a step is recorded (common.cuh, cuda_graph_begin) it
 * is captured on a stream of its own into a graph, which the recorder adds as a child-graph
 * node: the step stays one graph launch (8B at 64 sequences: 6 calls a layer, 192 a step, each
 * of which would end the recording: 5,039 / 9,353 -> 5,385 / 9,912 tok/s at 32 / 64, session
 * 11). The captured graphs are kept under the call's exact parameters, so a
 * step that repeats (the same batch size on the same buffers) captures nothing and its graph
 * is launched as built; a call with other buffers captures anew and the step's graph updates
 * that node (backend.cu, cuda_flush). cuBLAS runs on a workspace of the backend's own in and
 * out of captures: it then allocates nothing while captured (a graph with memory nodes cannot
 * be a child) and chooses its kernels from the same workspace size either way, so the bits
 * are the same with graphs on and off. */

/* One product C = op(A) B with op(A) = A^T, column-major, alpha 1, beta 0, float C: all of
 * its parameters - what blas_issue runs and the key of its captured graph (64-bit fields
 * only: no padding, so keys compare as bytes). */
typedef struct blas_call {
    int64_t batched;             /* 0: cublasGemmEx; 1: cublasGemmStridedBatchedEx of `batch` */
    int64_t m, n, k, lda, ldb, ldc, batch, sa, sb, sc;
    int64_t at, bt, compute;     /* cudaDataType of A and B, cublasComputeType_t */
    const void *a, *b;
    void *out;
} blas_call;

static blas_call blas_gemm(int64_t m, int64_t n, int64_t k, const void *a, cudaDataType at, int64_t lda,
                           const void *b, cudaDataType bt, int64_t ldb, void *out, int64_t ldc,
                           cublasComputeType_t compute) {
    blas_call g;
    memset(&g, 0, sizeof g);
    g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc, g.batch = 1;
    g.at = at, g.bt = bt, g.compute = compute;
    g.a = a, g.b = b, g.out = out;
    return g;
}

static cublasStatus_t blas_issue(cuda_backend *c, const blas_call *g) {
    const float one = 1.0f, zero = 0.0f;
    if (g->batched)
        return cublasGemmStridedBatchedEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->m, (int)g->n, (int)g->k, &one,
                                          g->a, (cudaDataType)g->at, (int)g->lda, g->sa, g->b, (cudaDataType)g->bt,
                                          (int)g->ldb, g->sb, &zero, g->out, CUDA_R_32F, (int)g->ldc, g->sc,
                                          (int)g->batch, (cublasComputeType_t)g->compute, CUBLAS_GEMM_DEFAULT);
    return cublasGemmEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->m, (int)g->n, (int)g->k, &one, g->a,
                        (cudaDataType)g->at, (int)g->lda, g->b, (cudaDataType)g->bt, (int)g->ldb, &zero, g->out,
                        CUDA_R_32F, (int)g->ldc, (cublasComputeType_t)g->compute, CUBLAS_GEMM_DEFAULT);
}

/* The captured calls: a hash table of at most BLAS_GRAPHS graphs (8B: 192 calls a batch size
 * and set of buffers; each a graph of one or two kernel nodes, little host memory). */
#define BLAS_GRAPHS 4096
#define BLAS_BUCKETS 8192
typedef struct blas_graph {
    blas_call key;
    cudaGraph_t graph;
    unsigned long long id; /* never reused: a recorded step compares ids, not handles */
    int next;              /* the next entry of its bucket, -1: none */
} blas_graph;
struct cuda_blas_graphs {
    blas_graph e[BLAS_GRAPHS];
    int head[BLAS_BUCKETS];
    int n;
    unsigned long long next_id;
};

static void blas_clear(cuda_blas_graphs *t) {
    for (int i = 0; i < t->n; i++) cudaGraphDestroy(t->e[i].graph);
    t->n = 0;
    for (int i = 0; i < BLAS_BUCKETS; i++) t->head[i] = -1;
}

void cuda_blas_free(cuda_backend *c) {
    if (!c->blas_graphs) return;
    blas_clear(c->blas_graphs);
    free(c->blas_graphs);
    c->blas_graphs = NULL;
}

int cuda_blas_init(cuda_backend *c) {
    /* cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before */
    int major = 0;
    OB_CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device));
    c->blas_ws_bytes = (size_t)(major >= 9 ? 32 : 4) << 20;
    OB_CU(cudaMalloc(&c->blas_ws, c->blas_ws_bytes));
    OB_CUBLAS(cublasSetWorkspace(c->cublas, c->blas_ws, c->blas_ws_bytes));
    return 0;
}

static uint64_t blas_hash(const blas_call *g) {
    const uint8_t *p = (const uint8_t *)g;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *g; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* g captured into *out on the capture stream; *out NULL when it could not be captured (then
 * no call is captured from here on: each ends the recording it comes in). */
static int blas_capture(cuda_backend *c, const blas_call *g, cudaGraph_t *out) {
    *out = NULL;
    /* cublasSetStream puts the default workspace back: ours again after each */
    OB_CUBLAS(cublasSetStream(c->cublas, c->cap_stream));
    OB_CUBLAS(cublasSetWorkspace(c->cublas, c->blas_ws, c->blas_ws_bytes));
    cudaGraph_t graph = NULL;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    /* thread-local: another thread's CUDA calls (another backend) do not break the capture */
    cudaError_t e = cudaStreamBeginCapture(c->cap_stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) {
        st = blas_issue(c, g);
        e = cudaStreamEndCapture(c->cap_stream, &graph);
    }
    cublasStatus_t back = cublasSetStream(c->cublas, c->stream);
    if (back == CUBLAS_STATUS_SUCCESS) back = cublasSetWorkspace(c->cublas, c->blas_ws, c->blas_ws_bytes);
    if (back != CUBLAS_STATUS_SUCCESS) {
        if (graph) cudaGraphDestroy(graph);
        return ob_cublas_fail(back, "cublasSetStream / cublasSetWorkspace after a capture", __FILE__, __LINE__);
    }
    /* a child graph may hold kernels, memsets and copies only: not the memory nodes cuBLAS
     * would add if it allocated (a step with one could not be built, and its work would be lost) */
    size_t n_nodes = 0;
    if (e == cudaSuccess && st == CUBLAS_STATUS_SUCCESS && graph) e = cudaGraphGetNodes(graph, NULL, &n_nodes);
    if (e == cudaSuccess && st == CUBLAS_STATUS_SUCCESS && graph && n_nodes > 0) {
        cudaGraphNode_t nodes[16];
        if (n_nodes > 16) e = cudaErrorNotSupported;
        if (e == cudaSuccess) e = cudaGraphGetNodes(graph, nodes, &n_nodes);
        for (size_t i = 0; i < n_nodes && e == cudaSuccess; i++) {
            cudaGraphNodeType t;
            e = cudaGraphNodeGetType(nodes[i], &t);
            if (e == cudaSuccess && t != cudaGraphNodeTypeKernel && t != cudaGraphNodeTypeMemset &&
                t != cudaGraphNodeTypeMemcpy && t != cudaGraphNodeTypeEmpty)
                e = cudaErrorNotSupported;
        }
    }
    if (e != cudaSuccess || st != CUBLAS_STATUS_SUCCESS || !graph) {
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        c->graph_blas = false;
        if (g_ob_host && g_ob_host->log)
            g_ob_host->log(1, "CUDA: a cuBLAS call could not be captured into a graph (%s; %s): cuBLAS calls run "
                              "outside graphs from here on",
                           cudaGetErrorString(e), cublasGetStatusString(st));
        return 0;
    }
    *out = graph;
    return 0;
}

/* Run one cuBLAS product: while a step is recorded, its captured graph as a node of the step
 * (captured now if this call was never seen); else, or when it cannot be captured, on the
 * stream after the recording so far. Timed under OB_CUDA_PROF (graphs are off then). */
static int blas_run(cuda_backend *c, const blas_call *g) {
    if (c->recording && c->graph_blas) {
        cuda_blas_graphs *t = c->blas_graphs;
        if (!t) {
            t = (cuda_blas_graphs *)malloc(sizeof *t);
            if (!t) return ob_cuda_err(OB_ERR_OOM, "the table of captured cuBLAS calls");
            t->n = 0;
            t->next_id = 0;
            blas_clear(t);
            c->blas_graphs = t;
        }
        const size_t h = (size_t)(blas_hash(g) & (BLAS_BUCKETS - 1));
        int i = t->head[h];
        while (i >= 0 && memcmp(&t->e[i].key, g, sizeof *g) != 0) i = t->e[i].next;
        if (i < 0 && t->n == BLAS_GRAPHS) {
            /* full (a server that met very many batch sizes or buffers): this recording's
             * records point into the table, so it ends here; the next step captures again */
            OB_TRY(cuda_flush(c));
            blas_clear(t);
        } else if (i < 0) {
            cudaGraph_t graph = NULL;
            OB_TRY(blas_capture(c, g, &graph));
            if (graph) {
                i = t->n++;
                blas_graph *e = &t->e[i];
                e->key = *g, e->graph = graph, e->id = ++t->next_id, e->next = t->head[h];
                t->head[h] = i;
                c->n_captures++;
            }
        }
        if (i >= 0 && c->recording) return cuda_rec_child(c, t->e[i].id, t->e[i].graph);
    }
    OB_TRY(cuda_flush(c)); /* the launches recorded so far run first */
    if (c->prof) cuda_prof_begin(c);
    const cublasStatus_t st = blas_issue(c, g);
    if (st != CUBLAS_STATUS_SUCCESS)
        return ob_cuda_err(OB_ERR_DEVICE, "cuBLAS: %s (%lld x %lld x %lld, %lld at once) failed: %s",
                           g->batched ? "cublasGemmStridedBatchedEx" : "cublasGemmEx", (long long)g->m,
                           (long long)g->n, (long long)g->k, (long long)g->batch, cublasGetStatusString(st));
    if (c->prof) OB_TRY(cuda_prof_end(c, "cublasGemmEx", "cublasGemmEx (16-bit or float tensor cores)"));
    return 0;
}

/* out[n][nout] = x[n][nin] * W^T through cuBLAS: column-major, W is an
 * nin x nout matrix (lda = its row length), so C = op(A)^T B with A = W. */
/* F32 weights with few rows (an MoE router: 128 rows of 2048) against a
 * batch: cuBLAS's FP32 GEMM took 731 us for 128 x 512 x 2048 on the H200
 * (0.4 TFLOPS: a handful of blocks), a third of a Qwen3-30B-A3B prefill.
 * Here: 64 rows x 64 tokens a block (4 x 4 a thread, FP32 FMAs), the K
 * range split so the grid fills the GPU, partials summed in split order by
 * mmq_reduce_kernel. */
#define SG_BM 64
#define SG_BN 64
#define SG_BK 32
#define SG_MAX_ROWS 1024

__global__ void __launch_bounds__(256)
    sgemm_kernel(const float *__restrict__ w, int64_t ldw, const float *__restrict__ x, int64_t ldx, int nout, int n,
                 int nin, int kper, const float *__restrict__ bias, float *__restrict__ out, int64_t ldo,
                 float *__restrict__ part) {
    __shared__ float ws[SG_BK][SG_BM + 1], xs[SG_BK][SG_BN + 1];
    const int tid = threadIdx.x, tr = tid % 16, tt = tid / 16;
    const int r0 = blockIdx.x * SG_BM, t0 = blockIdx.y * SG_BN;
    const int k0 = blockIdx.z * kper, k1 = min(nin, k0 + kper);
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int kk = k0; kk < k1; kk += SG_BK) {
#pragma unroll
        for (int i = 0; i < SG_BM * SG_BK / 256; i++) {
            const int idx = tid + 256 * i, rr = idx / SG_BK, k = idx % SG_BK;
            ws[k][rr] = r0 + rr < nout && kk + k < k1 ? w[(int64_t)(r0 + rr) * ldw + kk + k] : 0.0f;
            xs[k][rr] = t0 + rr < n && kk + k < k1 ? x[(int64_t)(t0 + rr) * ldx + kk + k] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < SG_BK; k++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = ws[k][tr + 16 * i], b[i] = xs[k][tt + 16 * i];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int r = r0 + tr + 16 * i, t = t0 + tt + 16 * j;
            if (r >= nout || t >= n) continue;
            if (part)
                part[((size_t)blockIdx.z * (size_t)n + (size_t)t) * (size_t)nout + (size_t)r] = acc[i][j];
            else
                out[(int64_t)t * ldo + r] = acc[i][j] + (bias ? bias[r] : 0.0f);
        }
}

static int matmul_sgemm(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias,
                        ob_tensor *out) {
    const int64_t nin = w->ne[0], nout = w->ne[1], n = x->ne[1];
    const unsigned gx = ob_div_up((size_t)nout, SG_BM), gy = ob_div_up((size_t)n, SG_BN);
    /* splits of whole 32-column steps, at least 4 of them a split, until about 2 blocks an SM */
    const int64_t steps = (nin + SG_BK - 1) / SG_BK, want = 2 * (int64_t)c->n_sm, have = (int64_t)gx * gy;
    int64_t S = have >= want ? 1 : (want + have - 1) / have;
    if (S > steps / 4) S = steps / 4;
    if (S < 1) S = 1;
    const int kper = (int)(((steps + S - 1) / S) * SG_BK);
    S = (nin + kper - 1) / kper;
    float *part = NULL;
    if (S > 1) {
        OB_TRY(cuda_scratch(c, &c->mmq_scratch, &c->mmq_scratch_bytes, (size_t)S * (size_t)(n * nout) * sizeof(float)));
        part = (float *)c->mmq_scratch;
    }
    const float *bd = bias ? (const float *)bias->data : NULL;
    float *o = (float *)out->data;
    const int64_t ldo = (int64_t)(out->nb[1] / 4);
    OB_TRY(cuda_launch(c, sgemm_kernel, dim3(gx, gy, (unsigned)S), 256, 0, (const float *)w->data,
                       (int64_t)(w->nb[1] / 4), (const float *)x->data, (int64_t)(x->nb[1] / 4), (int)nout, (int)n,
                       (int)nin, kper, S > 1 ? (const float *)NULL : bd, o, ldo, part));
    if (S > 1)
        OB_TRY(cuda_launch(c, mmq_reduce_kernel, ob_div_up((size_t)(n * nout), 256), 256, 0, (const float *)part,
                           (int)S, (int)n, (int)nout, bd, o, ldo));
    return 0;
}

static int matmul_gemm(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias,
                       ob_tensor *out) {
    const int64_t nin = w->ne[0], nout = w->ne[1], n = x->ne[1];
    const int64_t ldb = (int64_t)(x->nb[1] / sizeof(float)), ldc = (int64_t)(out->nb[1] / sizeof(float));
    if (nin > INT32_MAX || nout > INT32_MAX || n > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX)
        return ob_cuda_err(OB_ERR_UNSUPPORTED, "matmul '%s': too large for one cuBLAS call", w->name ? w->name : "?");
    if (w->type == OB_TYPE_F32 && nout <= SG_MAX_ROWS && w->nb[1] % sizeof(float) == 0 && n <= 65535 * SG_BN)
        return matmul_sgemm(c, w, x, bias, out);
    if (w->type == OB_TYPE_F32 && w->nb[1] % sizeof(float) == 0) {
        /* F32 weights: plain FP32 (no TF32), the most exact path */
        const blas_call g = blas_gemm(nout, n, nin, w->data, CUDA_R_32F, (int64_t)(w->nb[1] / sizeof(float)), x->data,
                                      CUDA_R_32F, ldb, out->data, ldc, CUBLAS_COMPUTE_32F);
        OB_TRY(blas_run(c, &g));
    } else if (c->gemm16) {
        /* 16-bit tensor cores with float32 accumulation: F16 weights as they
         * are against f16 activations; BF16 weights as they are, and every
         * quantized type dequantized to bf16 (a slice of rows at a time),
         * against bf16 activations (bf16: the activations' range is safe) */
        const bool f16 = w->type == OB_TYPE_F16;
        const bool direct = (f16 || w->type == OB_TYPE_BF16) && w->nb[1] % 2 == 0 && ((uintptr_t)w->data % 2) == 0;
        const cudaDataType dt = f16 ? CUDA_R_16F : CUDA_R_16BF;
        const __nv_bfloat16 *kept = NULL; /* quantized weights: their kept bf16 copy, if any */
        if (!direct) OB_TRY(bf16_cached(c, w, &kept));
        const void *xa;
        OB_TRY(cuda_act16(c, x, f16, &xa));
        if (direct) {
            const blas_call g = blas_gemm(nout, n, nin, w->data, dt, (int64_t)(w->nb[1] / 2), xa, dt, nin, out->data,
                                          ldc, CUBLAS_COMPUTE_32F);
            OB_TRY(blas_run(c, &g));
        } else if (kept && n <= c->gemm_join && !bias && !c->invariant) {
            /* decode batches only: pp512 with prompt products joined measured 27.6k +- 2.9k
             * against 29.3k +- 0.03k (session 10) */
            /* held back: the next op may be its partner (cuda_gemm_settle) */
            cuda_gemm_pend *p = &c->gpend;
            p->on = true, p->a = kept, p->x = xa, p->src = x->data, p->out = (float *)out->data;
            p->nout = nout, p->nin = nin, p->n = n, p->ldc = ldc, p->ldb = ldb, p->op = c->n_ops;
        } else if (kept) {
            const blas_call g = blas_gemm(nout, n, nin, kept, CUDA_R_16BF, nin, xa, CUDA_R_16BF, nin, out->data, ldc,
                                          CUBLAS_COMPUTE_32F);
            OB_TRY(blas_run(c, &g));
        } else {
            int64_t rpc = (int64_t)(2 * GEMM_SCRATCH_FLOATS / (size_t)nin);
            if (rpc < 1) rpc = 1;
            if (rpc > nout) rpc = nout;
            OB_TRY(cuda_scratch(c, &c->gemm_scratch, &c->gemm_scratch_bytes, (size_t)rpc * (size_t)nin * 2));
            __nv_bfloat16 *scr = (__nv_bfloat16 *)c->gemm_scratch;
            for (int64_t r0 = 0; r0 < nout; r0 += rpc) {
                const int64_t rows = nout - r0 < rpc ? nout - r0 : rpc;
                OB_TRY(dequant_rows(c, w, r0, rows, scr));
                const blas_call g = blas_gemm(rows, n, nin, scr, CUDA_R_16BF, nin, xa, CUDA_R_16BF, nin,
                                              (float *)out->data + r0, ldc, CUBLAS_COMPUTE_32F);
                OB_TRY(blas_run(c, &g));
            }
        }
    } else {
        /* OB_CUDA_GEMM=tf32: float32 dequantization and TF32 tensor cores */
        int64_t rpc = (int64_t)(GEMM_SCRATCH_FLOATS / (size_t)nin);
        if (rpc < 1) rpc = 1;
        if (rpc > nout) rpc = nout;
        OB_TRY(cuda_scratch(c, &c->gemm_scratch, &c->gemm_scratch_bytes, (size_t)rpc * (size_t)nin * sizeof(float)));
        float *scr = (float *)c->gemm_scratch;
        for (int64_t r0 = 0; r0 < nout; r0 += rpc) {
            const int64_t rows = nout - r0 < rpc ? nout - r0 : rpc;
            OB_TRY(dequant_rows(c, w, r0, rows, scr));
            const blas_call g = blas_gemm(rows, n, nin, scr, CUDA_R_32F, nin, x->data, CUDA_R_32F, ldb,
                                          (float *)out->data + r0, ldc, CUBLAS_COMPUTE_32F_FAST_TF32);
            OB_TRY(blas_run(c, &g));
        }
    }
    if (bias) {
        OB_TRY(cuda_launch(c, add_bias_kernel, grid_for(n * nout, 256, c), 256, 0, (float *)out->data, ldc, nout, n,
                                                                           (const float *)bias->data));
    }
    return 0;
}

/* Products on kept bf16 copies, two at a time: a product is held back one op
 * (matmul_gemm); when the next op is a product of the same input, shape and output stride
 * with a kept copy too (k then v, gate then up), both run as one strided batched call - one
 * launch, and for small matrices one grid in place of two split-K grids and their reduce
 * kernels (8B at 64 sequences: k and v 10.7 + 10.4 us as single calls). Anything else that
 * enters the backend first runs the held product alone (cuda_enter). */
int cuda_gemm_settle(cuda_backend *c) {
    cuda_gemm_pend *p = &c->gpend;
    if (!p->on) return 0;
    p->on = false;
    const blas_call g = blas_gemm(p->nout, p->n, p->nin, p->a, CUDA_R_16BF, p->nin, p->x, CUDA_R_16BF, p->nin, p->out,
                                  p->ldc, CUBLAS_COMPUTE_32F);
    return blas_run(c, &g);
}

/* Exchange n 16-bit values of a and b. */
__global__ void exchange16_kernel(uint16_t *__restrict__ a, uint16_t *__restrict__ b, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint16_t t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

static cuda_bf16_entry *bf16_entry_at(cuda_backend *c, const void *dst) {
    for (size_t i = 0; i < c->n_bf16; i++)
        if (c->bf16[i].dst == dst) return &c->bf16[i];
    return NULL;
}

/* w x joined with the held-back product when it can be; *joined says whether it was. */
static int gemm_try_join(cuda_backend *c, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias,
                         ob_tensor *out, bool *joined) {
    *joined = false;
    cuda_gemm_pend *p = &c->gpend;
    const int64_t ldb = (int64_t)(x->nb[1] / sizeof(float)), ldc = (int64_t)(out->nb[1] / sizeof(float));
    if (!p->on || bias || c->invariant || p->op + 1 != c->n_ops || p->src != x->data || p->n != x->ne[1] ||
        p->ldb != ldb || p->nin != w->ne[0] || p->nout != w->ne[1] || p->ldc != ldc || out->data == p->out ||
        w->type == OB_TYPE_F16 || w->type == OB_TYPE_BF16 || w->type == OB_TYPE_F32)
        return 0;
    const __nv_bfloat16 *kept = bf16_kept(c, w);
    if (!kept) return 0;
    /* a strided batch: the pair in address order, weights and outputs alike */
    const uint8_t *a0 = (const uint8_t *)p->a, *a1 = (const uint8_t *)kept;
    const uint8_t *c0 = (const uint8_t *)p->out, *c1 = (const uint8_t *)out->data;
    if ((a1 > a0) != (c1 > c0)) {
        /* The copies lie in the other order than the outputs (each copy is a cudaMalloc of its
         * own: on the 8B gate's and up's came out descending while their outputs ascend). Once
         * per pair: run the held product, then exchange the two copies' contents and entries,
         * so the pair joins from the next step on. Outside any recorded step; a product
         * recorded earlier reads the copy of its entry when its step is recorded again. */
        cuda_bf16_entry *e0 = bf16_entry_at(c, p->a), *e1 = bf16_entry_at(c, kept);
        const char *off = getenv("OB_CUDA_GEMM_EXCHANGE"); /* =0: off (read here: a mismatch is rare) */
        if ((off && atoi(off) == 0) || !e0 || !e1 || e0 == e1 || e0->exchanged || e1->exchanged || e0->nin != e1->nin || e0->nout != e1->nout)
            return 0;
        OB_TRY(cuda_gemm_settle(c));
        OB_TRY(cuda_flush(c));
        const size_t n16 = (size_t)e0->nin * (size_t)e0->nout;
        OB_TRY(cuda_launch(c, exchange16_kernel, grid_for((int64_t)n16, 256, c), 256, 0, (uint16_t *)e0->dst,
                           (uint16_t *)e1->dst, n16));
        void *t = e0->dst;
        e0->dst = e1->dst, e1->dst = t;
        e0->exchanged = e1->exchanged = true;
        c->n_exchanges++;
        return 0;
    }
    if (a1 < a0) {
        const uint8_t *t = a0;
        a0 = a1, a1 = t;
        t = c0, c0 = c1, c1 = t;
    }
    const long long sa = (long long)((a1 - a0) / 2), sc = (long long)((c1 - c0) / (long long)sizeof(float));
    if ((a1 - a0) % 2 || (c1 - c0) % (long long)sizeof(float) || sc < p->n * ldc) return 0; /* outputs overlap */
    p->on = false;
    blas_call g = blas_gemm(p->nout, p->n, p->nin, a0, CUDA_R_16BF, p->nin, p->x, CUDA_R_16BF, p->nin, (void *)c0, ldc,
                            CUBLAS_COMPUTE_32F);
    g.batched = 1, g.batch = 2, g.sa = sa, g.sb = 0, g.sc = sc;
    OB_TRY(blas_run(c, &g));
    cuda_b16_made(c, x->data, p->n, p->nin, ldb); /* the input's bf16 copy stays valid for a third product */
    *joined = true;
    c->n_joins++;
    return 0;
}

static int mmv_dispatch(cuda_backend *c, int type, const mmv_args *a) {
    if ((type == OB_TYPE_F16 || type == OB_TYPE_BF16) && c->mmv16 && a->nb1 % 16 == 0 &&
        (uintptr_t)a->w % 16 == 0)
        return cuda_mmv16_launch(c, type, a);
    switch (type) {
#define OB_CASE(T) \
    case T: return mmv_launch<T>(c, a);
        OB_CUDA_FOR_EACH_TYPE(OB_CASE)
#undef OB_CASE
    default: return ob_cuda_err(OB_ERR_INTERNAL, "mmv: type %d", type);
    }
}

int cuda_op_matmul(ob_backend *b, const ob_tensor *w, const ob_tensor *x, const ob_tensor *bias, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    c->gpend_hold = true; /* a held-back product waits until this one has looked at it */
    const int rc = cuda_enter(c);
    c->gpend_hold = false;
    OB_TRY(rc);
    if (x->data == c->rot_out) c->rot_read_op = c->n_ops, c->rot_a4 = false; /* reads the last rotation (rotate.cu) */
    OB_TRY(check_type(w));
    if (x->type != OB_TYPE_F32 || out->type != OB_TYPE_F32 || x->ne[0] != w->ne[0] || out->ne[0] != w->ne[1] ||
        out->ne[1] != x->ne[1])
        return ob_cuda_err(OB_ERR_INTERNAL, "matmul '%s': shapes [%lld,%lld] x [%lld,%lld] -> [%lld,%lld]",
                           w->name ? w->name : "?", (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[0],
                           (long long)x->ne[1], (long long)out->ne[0], (long long)out->ne[1]);
    if (bias && (bias->type != OB_TYPE_F32 || bias->ne[0] != w->ne[1]))
        return ob_cuda_err(OB_ERR_INTERNAL, "matmul '%s': bias must be f32 [%lld]", w->name ? w->name : "?",
                           (long long)w->ne[1]);
    const int64_t nin = w->ne[0], nout = w->ne[1], n = x->ne[1];
    if (n <= 0 || nout <= 0) return 0;
    if (nout > INT32_MAX) return ob_cuda_err(OB_ERR_UNSUPPORTED, "matmul: %lld rows", (long long)nout);
    if (c->gpend.on) {
        bool joined = false;
        OB_TRY(gemm_try_join(c, w, x, bias, out, &joined));
        if (joined) return 0;
        OB_TRY(cuda_gemm_settle(c)); /* before anything here can rewrite its input */
    }
    /* Q4_K weights through their fragment-order copy (mm4.cu, experimental: OB_CUDA_W4=1) */
    if (cuda_mm4_usable(c, w, n) && x->type == OB_TYPE_F32) {
        bool done = false;
        OB_TRY(cuda_mm4_matmul(c, w, x, bias, out, &done));
        if (done) return 0;
    }
    /* Quantized weights decoded to bf16 inside a tensor-core kernel (mmw.cu) for decode batches
     * of many sequences and mid-sized prompt batches */
    if (cuda_mmw_usable(c, w, n) && x->type == OB_TYPE_F32 && x->nb[1] % 16 == 0 && (uintptr_t)x->data % 16 == 0)
        return cuda_mmw_matmul(c, w, x, bias, out);
    /* Batches of bf16_min tokens and more (OB_CUDA_BF16_MIN, default 17) multiply a bf16 copy
     * of a quantized weight through cuBLAS instead of the int8 tensor-core product - a read of
     * the copy bound by memory against a product bound by its per-piece float work: 8B Q4_K_M
     * at 64 sequences 4,931 -> 7,290 tok/s. The copy is made here at the weight's first such
     * batch while the memory is there (bf16_cached); without one, the int8 product. */
    if (c->gemm16 && c->bf16_min > 0 && n >= c->bf16_min && !c->invariant && w->nb[1] % 2 == 0 && w->type != OB_TYPE_F16 &&
        w->type != OB_TYPE_BF16 && w->type != OB_TYPE_F32) {
        const __nv_bfloat16 *kept = bf16_kept(c, w);
        const long long bytes = (long long)(w->ne[0] * w->ne[1] * 2);
        if (!kept && c->bf16_mode && (c->bf16_left < 0 || bytes <= c->bf16_left) && cuda_mmq_usable(c, w, n)) {
            OB_TRY(cuda_flush(c)); /* the copy is made outside a recorded step */
            OB_TRY(bf16_cached(c, w, &kept));
        }
        if (kept) return matmul_gemm(c, w, x, bias, out);
    }
    if (cuda_mmvq_usable(c, w, n) || cuda_mmq_usable(c, w, n)) return cuda_mmvq_matmul(c, w, x, bias, out);
    /* The matrix-vector kernel reads activations as float4: rows must be 16-byte aligned. */
    const bool aligned = ((uintptr_t)x->data % 16) == 0 && x->nb[1] % 16 == 0;
    /* batch-invariant mode: every batch through the matrix-vector kernel, 8 tokens at a time
     * (its sums per row do not depend on the batch; cuBLAS's do) */
    const bool use_mmv = nin % 8 == 0 && aligned &&
                         (c->invariant || (n <= c->mmv_max && !(w->type == OB_TYPE_F32 && n > 8)));
    if (!use_mmv) return matmul_gemm(c, w, x, bias, out);
    const int64_t ldx = (int64_t)(x->nb[1] / sizeof(float)), ldo = (int64_t)(out->nb[1] / sizeof(float));
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        mmv_args a;
        a.w = (const uint8_t *)w->data;
        a.nb1 = w->nb[1];
        a.nch = nin / 8;
        a.nout = (int)nout;
        a.x = (const float *)x->data + t0 * ldx;
        a.ldx = ldx;
        a.bias = bias ? (const float *)bias->data : NULL;
        a.out = (float *)out->data + t0 * ldo;
        a.ldo = ldo;
        a.n = (int)(n - t0 < 8 ? n - t0 : 8);
        a.lut = c->luts;
        OB_TRY(mmv_dispatch(c, (int)w->type, &a));
    }
    return 0;
}
