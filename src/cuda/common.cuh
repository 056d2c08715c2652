/*
 * common.cuh - what every file of the CUDA plugin shares: the backend
 * struct, the check macros that turn a failing CUDA or cuBLAS call into an
 * OB_ERR_DEVICE status naming the call and line (STYLE section 8), the
 * staging ring that carries small host arrays (ids, positions, slots, block
 * tables) to the device, scratch buffers, and warp helpers.
 *
 * Portability: plain CUDA C++ that a HIP compiler also takes - no inline
 * PTX, warp width 32 assumed (RDNA runs wave32). Hopper-only paths, when
 * they come, live in their own guarded files.
 *
 * Ordering: every op enqueues on the backend's one stream and returns
 * without waiting. The host only waits in download/sync (and, rarely, when
 * the staging ring or a scratch buffer must grow).
 */
#ifndef OB_CUDA_COMMON_CUH
#define OB_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "backend/backend.h"
#include "onebit.h"
}

/* Set once by ob_cuda_backend_create; messages go to the host's ob_err. */
extern const ob_cuda_host *g_ob_host;

/* Record "CUDA: <call> failed at file:line: <reason>" and return OB_ERR_DEVICE. */
int ob_cuda_fail(cudaError_t e, const char *call, const char *file, int line);
int ob_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line);
/* Any other error of the plugin (bad shapes, unsupported types), printf-style. */
int ob_cuda_err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define OB_CU(call)                                                                 \
    do {                                                                            \
        cudaError_t ob_cu_e_ = (call);                                              \
        if (ob_cu_e_ != cudaSuccess) return ob_cuda_fail(ob_cu_e_, #call, __FILE__, __LINE__); \
    } while (0)

#define OB_CUBLAS(call)                                                             \
    do {                                                                            \
        cublasStatus_t ob_cb_s_ = (call);                                           \
        if (ob_cb_s_ != CUBLAS_STATUS_SUCCESS) return ob_cublas_fail(ob_cb_s_, #call, __FILE__, __LINE__); \
    } while (0)

/* Propagate a negative status (as src/core/status.h, which the plugin does not link). */
#ifndef OB_TRY
#define OB_TRY(expr)                                  \
    do {                                              \
        int ob_try_rc_ = (expr);                      \
        if (ob_try_rc_ < 0) return ob_try_rc_;        \
    } while (0)
#endif

/* After a kernel launch: a bad configuration shows up here, not at the launch. */
#define OB_LAUNCHED() OB_CU(cudaGetLastError())

typedef struct cuda_stage_entry {
    size_t off, n;
} cuda_stage_entry;

/* The last add recorded (elementwise.cu), which a norm right after may fuse with. */
typedef struct cuda_pending_add {
    unsigned long long op;      /* its op number */
    int rec;                    /* its record index */
    size_t rec_off;             /* rec_used before it */
    const float *a, *b;
    int64_t lda, ldb, ldo, d, n;
    const void *out;
} cuda_pending_add;

/* The last RoPE recorded, which a RoPE of another tensor with the same
 * positions right after may join (q and k in one launch). */
typedef struct cuda_pending_rope {
    unsigned long long op;
    int rec;
    size_t rec_off;
    float *x;
    int64_t ldx, n;
    int n_head, head_dim, half;
    bool neox, ext;
    const void *tab;
    float freq_scale, mscale;
} cuda_pending_rope;

/* A per-head RMSNorm (q_norm, k_norm) recorded while a graph is recorded:
 * the RoPE after the pair may take both over (elementwise.cu). */
typedef struct cuda_pending_gnorm {
    unsigned long long op;
    int rec;
    const float *x, *w;
    float *y;
    int64_t ldx, ldy, group, heads, n;
    float eps;
} cuda_pending_gnorm;

/* A KV-cache write joined to the RoPE kernel before it (elementwise.cu): the
 * rotated k rows and the v rows go to the pools at slots[token]; kt 0: none,
 * 1: F32 pools, 2: F16 pools (Q8_0 pools keep their own kernel). */
typedef struct rope_kv_args {
    uint8_t *kpool, *vpool;
    size_t row_bytes;
    const int32_t *slots;
    const float *v;
    int64_t ldv;
    int64_t kt; /* 64 bits: no padding, the graph compares argument bytes */
} rope_kv_args;
/* The arguments of the fused q/k norm + RoPE kernel (elementwise.cu). */
typedef struct qk_norm_rope_args {
    const float *xq, *xk;
    float *yq, *yk;
    int64_t ldxq, ldxk, ldyq, ldyk;
    const float *wq, *wk;
    int nq, nk; /* heads of q and of k */
    float eps;
    const int32_t *pos;
    const float *tab;
    float freq_scale, mscale;
    bool ext, rope2;
    rope_kv_args kv;
} qk_norm_rope_args;

/* That kernel recorded last, its k not rotated yet: the RoPE of k turns rope2 on. */
typedef struct cuda_qknr_pend {
    unsigned long long op;
    unsigned long long roped_op; /* the op that turned rope2 on (a KV write right after may join) */
    int rec;
    qk_norm_rope_args args;
    dim3 grid;
    const void *yk, *tab;
    int64_t ldyk, n;
    int nk, d;
    float freq_scale, mscale;
    bool ext;
} cuda_qknr_pend;

/* The RoPE of q and k in one launch recorded last (elementwise.cu), which
 * the KV write right after may join: its launch, to be made again. */
typedef struct cuda_pending_rope2 {
    unsigned long long op;
    int rec;
    size_t rec_off;
    dim3 grid;
    float *x, *x2;
    int64_t ldx, ldx2, n;
    int n_head, n_head2, head_dim, half;
    bool neox, ext;
    const int32_t *pos;
    const float *tab;
    float freq_scale, mscale;
} cuda_pending_rope2;
/* What a GLU right after a joined gate/up product asks of that product's launch (cuda_op_glu;
 * mmvq.cu, mmv16.cu): besides g and u, h = act(g) * u into y ([n][ldy]) and, for the integer
 * kernel, h's q8 copy for the down product (qx [n][d] codes, dx [n][d / 32] pairs of scale and
 * scaled sum: mmvq.cuh's q8_act layout, glu_q8_kernel's arithmetic), written by whichever warp
 * finishes last among the 32 rows of a q8 block: cnt [d / 32] counts the rows done, and that
 * warp puts its counter back to zero. qx NULL: y alone (the F16/BF16 kernel). */
typedef struct cuda_glu_out {
    float *y;
    int64_t ldy;
    int8_t *qx;
    float *dx;
    int *cnt;
    int64_t act; /* ob_act; 64 bits: no padding, the graph compares argument bytes */
} cuda_glu_out;

struct cuda_backend;

/* The decode product recorded last, which the next product of the same input
 * may join (mmvq.cu, mmv16.cu). */
typedef struct cuda_mmvq_pend {
    int rec, n; /* rec: its index among the recorded launches, -1: none */
    const void *func;
    const void *w[3];
    const float *bias[3];
    float *out[3];
    int64_t ldo[3];
    int nout[3];
    const void *in0, *in1; /* the input they share (q8 codes and scales; or the float rows) */
    int64_t ld;
    size_t nb1;
    int64_t nch;
    /* for the GLU fusion (cuda_op_glu): the op that recorded or joined it last, rec_used before
     * it was recorded, its warps a row, tokens and scale stride (q8: ldd), and the function that
     * records it again with the GLU fused in (NULL: this kernel has no such form) */
    unsigned long long op;
    size_t rec_off;
    int wpr, ntok;
    int64_t ldd;
    int (*glu)(struct cuda_backend *c, const cuda_glu_out *g);
} cuda_mmvq_pend;

/* A product on a kept bf16 copy held back one op (matmul.cu, cuda_gemm_settle): if the next
 * op is a product of the same input and shape (k then v, gate then up), both run as one
 * batched cuBLAS call. */
typedef struct cuda_gemm_pend {
    bool on;
    const void *a, *x; /* the weight's bf16 copy, the input's bf16 rows (act16_scratch) */
    const void *src;   /* the input's float rows they were made from */
    float *out;
    int64_t nout, nin, n, ldc, ldb;
    unsigned long long op; /* the op that made it */
} cuda_gemm_pend;

typedef struct cuda_backend {
    ob_backend base;
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    int n_sm;
    size_t smem_optin;          /* largest dynamic shared memory a block may ask for */

    /* Staging ring: pinned host memory mirrored by device memory of the same
     * size. Host arrays are copied into the ring at `used` and sent with one
     * cudaMemcpyAsync; regions are reused only after the stream has drained
     * (download/sync), so an in-flight copy never sees its source change.
     * Identical recent arrays (the positions every layer's RoPE asks for, the
     * same slots or frequency table) are sent once: `cache` remembers them. */
    uint8_t *stage_h, *stage_d;
    size_t stage_cap, stage_used;
    cuda_stage_entry cache[8];
    int n_cache, cache_next;

    /* Device scratch: dequantized weight rows for cuBLAS, attention partials. */
    void *gemm_scratch;
    size_t gemm_scratch_bytes;
    void *act16_scratch;        /* activations in bf16/f16 for the tensor-core products */
    size_t act16_scratch_bytes;
    const void *a16_src, *a16_buf; /* the input act16_scratch holds (f16 or bf16), made by op a16_op */
    int64_t a16_n, a16_nin, a16_ld;
    bool a16_f16;
    unsigned long long a16_op;
    void *mmw_x;                /* a batch's activations in bf16 for mmw.cu, made from mmw_src by op mmw_op */
    size_t mmw_x_bytes;
    const void *mmw_src, *mmw_buf;
    int64_t mmw_n, mmw_nin, mmw_ld;
    unsigned long long mmw_op;
    bool gemm16;                /* 16-bit tensor cores for batches (default); OB_CUDA_GEMM=tf32: float32 + TF32 */
    void *attn_scratch;
    size_t attn_scratch_bytes;
    void *q8_scratch;           /* activations quantized for the integer decode kernel (mmvq.cu) */
    size_t q8_scratch_bytes;
    const void *q8_src;         /* the input q8_scratch holds, made by op number q8_op (mmvq.cu) */
    int64_t q8_n, q8_nin;
    unsigned long long q8_op;
    const int8_t *q8_qx;        /* ... or, when not NULL, where that copy lies instead (a fused GLU's, glu_q8) */
    const float *q8_dx;
    /* rotate.cu: the last rotation (input, output, signs, shape, op number
     * rot_op; rot_read_op: the last product that read its output), and the
     * 4-bit copy of a product's input in q4_scratch (q8 layout, made by op
     * q4_op), so products that share an input (q, k, v; gate, up) rotate and
     * round it once; rot_a4: the last product on a rotation was a W4A4 one,
     * so the next rotation makes the 4-bit copy in the same launch.
     * OB_CUDA_ROT_REUSE=0: every product does both, separately. */
    const void *rot_x, *rot_out, *rot_signs;
    int64_t rot_d, rot_n, rot_ld;
    unsigned long long rot_op, rot_read_op;
    bool rot_reuse, rot_a4;
    void *q4_scratch;
    size_t q4_scratch_bytes;
    const void *q4_src;
    int64_t q4_n, q4_nin;
    unsigned long long q4_op;
    /* Host scratch for building the attention token table. */
    void *host_tmp;
    size_t host_tmp_bytes;

    /* moe.cu: the expert kernels' scratch and the per-layer tables of expert addresses */
    void *moe_scratch;
    size_t moe_scratch_bytes;
    struct moe_table *moe_tabs;
    int n_moe_tabs, cap_moe_tabs;
    int attn_split_sm;          /* decode attention: split positions until ~this many blocks an SM (OB_CUDA_ATTN_SPLIT) */
    bool attn_hsplit;           /* vector attention: split a KV head's query heads over blocks when blocks are few (OB_CUDA_ATTN_HSPLIT=0: off) */
    bool mmv16;                 /* F16/BF16 decode without shared-memory staging (OB_CUDA_MMV16=0: off) */
    int mmv16_u, mmv16_want;    /* its loads in flight a lane (OB_CUDA_MMV16_U 4/8), warps wanted an SM (OB_CUDA_MMV16_WANT; 0: by row size) */
    bool moe_fused;             /* decode: the fused expert kernels (OB_CUDA_MOE_FUSED=0: one launch per product) */
    int moe_pairs;              /* batches of more (token, expert) pairs group by expert (OB_CUDA_MOE_PAIRS, default 64) */
    /* Weights this backend copied in (freed with the backend). */
    void **weights;
    size_t n_weights, cap_weights;
    /* bf16 copies of quantized weights for the cuBLAS route (matmul.cu, bf16_cached): made
     * at a weight's first large batch while the device keeps a quarter of its memory free
     * after them (OB_CUDA_BF16_CACHE=0: never, 1: whenever the memory is there), so each
     * later prompt batch skips the dequantization pass; bf16_left < 0: not measured yet */
    struct cuda_bf16_entry *bf16;
    size_t n_bf16, cap_bf16;
    int bf16_mode;              /* 0 off, 1 on (no reserve), 2 auto (default) */
    bool bf16_short;            /* a copy was refused for room: some weights have none */
    int bf16_min;               /* batches this large take a bf16 copy (kept, or made now) over mmq (OB_CUDA_BF16_MIN; 0: never) */
    long long bf16_left;

    int8_t *luts;               /* OB_LUT_BYTES of IQ4_NL / MXFP4 levels (quant.cuh) */
    /* OB_CUDA_STATS=1: ops enqueued, drains, and seconds the host spent
     * waiting in drains (little waiting = the host, not the GPU, sets the
     * pace), printed when the backend is freed. */
    bool stats;
    unsigned long long n_ops, n_drains;
    cuda_gemm_pend gpend;       /* a product waiting for a partner */
    int gemm_join;              /* largest batch whose products on kept copies join in pairs (OB_CUDA_GEMM_JOIN, default 64; 0: never) */
    bool gpend_hold;            /* the op being entered may join the pending product */
    double wait_s;
    int mmv_max;                /* batches up to this go through the matrix-vector kernels */
    int mmvq_u, mmvq_r, mmvq_want; /* tuning of the integer kernel (mmvq.cu): chunks in flight, rows a warp, warps wanted per SM */
    bool mmvq;                  /* integer kernels for the types mmvq.cuh has (OB_CUDA_MMVQ=0: off) */
    /* int8 tensor-core products for batches (mmq.cu): on when the device has
     * them (sm_80+) unless OB_CUDA_MMQ=0; batches of 9..mmq_max tokens
     * (OB_CUDA_MMQ_MAX); steps split over blocks until the grid has about
     * mmq_blocks blocks per SM (OB_CUDA_MMQ_BLOCKS), or mmq_split ways when
     * OB_CUDA_MMQ_SPLIT is set; partial sums in mmq_scratch. */
    bool mmq;
    bool invariant;             /* batch-invariant mode (ob_context_set_batch_invariant, OB_CUDA_INVARIANT=1) */
    int mmq_min, mmq_max, mmq_blocks, mmq_split; /* batches of mmq_min..mmq_max tokens (OB_CUDA_MMQ_MIN, _MAX) */
    int mmq_bm;                 /* weight rows per block: 32 or 64 (OB_CUDA_MMQ_BM) */
    bool mmw;                   /* bf16 tensor cores on weights decoded in the kernel (mmw.cu; off unless OB_CUDA_MMW=1) */
    bool w4;                    /* Q4_K through fragment-order copies and mm4.cu (OB_CUDA_W4=1; experimental) */
    int w4_min, w4_max, w4_blocks; /* batches of w4_min..w4_max tokens; split to ~w4_blocks blocks an SM */
    struct cuda_w4_entry *w4tab; /* the copies made (mm4.cu) */
    size_t n_w4, cap_w4;
    bool w4_short;              /* a copy was refused for room */
    unsigned mmw_smem_set;      /* mmw kernels granted their dynamic shared memory (a bit each) */
    int mmw_min, mmw_max, mmw_blocks; /* batches of mmw_min..mmw_max tokens; split to ~mmw_blocks blocks an SM */
    void *mmq_scratch;
    size_t mmq_scratch_bytes;
    void *argmax_scratch;       /* argmax_rows' ids before they go to the host */
    size_t argmax_scratch_bytes;
    size_t attn_smem_set[3];    /* dynamic shared memory granted to attention, per KV type */
    bool attn_vec;              /* the vector attention kernel where it applies (OB_CUDA_ATTN_VEC=0: off) */
    bool attn_vt;               /* its tiled form, a lane a position for the scores (OB_CUDA_ATTN_VT=0: the per-position one) */
    int attn_vt_min;            /* ... for blocks whose range of positions is at least this long (OB_CUDA_ATTN_VT_MIN) */
    bool attn_mma;              /* prompt runs on tensor cores (attention_mma.cu; sm_80+; OB_CUDA_ATTN_MMA=0: off) */

    /* CUDA graphs (OB_CUDA_GRAPHS=0: off). A forward pass of a small batch
     * is recorded from its first op (get_rows) to the next point where the
     * host needs the stream (a download, a drain, a cuBLAS product): kernel
     * launches go into a list (cuda_launch) instead of the stream, the
     * arrays staged meanwhile are sent by one copy at the head of the graph.
     * At the end the list is compared with the graph built for the same
     * kernels last time: only the nodes whose arguments or grid changed are
     * updated (the attention's length, say), and the graph is launched -
     * one launch per step instead of hundreds, the GPU running the kernels
     * back to back. A different list of kernels builds a new graph. */
    bool graphs, recording;
    int graph_max;              /* forward passes of up to this many tokens are recorded (OB_CUDA_GRAPH_MAX, 64) */
    int64_t last_rows_n;        /* tokens of the last forward pass begun (get_rows): a pass of more than 16 is
                                 * recorded only when the one before had as many (a decode step, not a prompt) */
    size_t rec_stage0;           /* staging ring offset where the recording began */
    struct cuda_rec *recs;       /* the launches recorded so far */
    int n_recs, cap_recs;
    uint8_t *rec_args;           /* their argument bytes */
    size_t rec_used, rec_cap;
    struct cuda_graph_slot *slots;  /* CUDA_GRAPH_SLOTS graphs built earlier */
    int slot_next;
    unsigned long long n_graphs, n_node_updates, n_instantiations;
    cuda_pending_add last_add;
    /* the decode product recorded last (mmvq.cu: the next product of the same input joins its
     * launch); rec -1: none */
    cuda_mmvq_pend mmvq_pend;
    bool mmvq_fuse;             /* OB_CUDA_MMVQ_FUSE=0: every product its own launch */
    /* the GLU after a joined gate/up product computed by that product's launch (cuda_op_glu;
     * OB_CUDA_GLU_FUSE=1; off by default, measured slower); the q8 copy of h goes to glu_q8 (not
     * q8_scratch, which holds the product's input), glu_cnt holds the arrival counters (zero
     * between launches) */
    bool glu_fuse;
    void *glu_q8;
    size_t glu_q8_bytes;
    int *glu_cnt;
    size_t glu_cnt_bytes;
    unsigned long long n_glu_fused;
    /* one token's dense layer in two persistent launches (layer.cu; experimental, on with
     * OB_CUDA_LAYER=1): the grid barrier's words, the GLU output, each kernel's grid at the
     * shared memory it was sized for, and how many halves ran fused */
    bool layer_fuse;
    void *lk_bar, *lk_h;
    size_t lk_bar_bytes, lk_h_bytes, lk_grid_smem[2];
    unsigned lk_grid[2];
    unsigned long long n_layer_fused;
    bool mmvq_stream;           /* one token: weights streamed through shared memory (OB_CUDA_MMVQ_STREAM) */
    bool graph_dump;            /* OB_CUDA_GRAPH_DUMP=1: print each new graph's kernels */
    bool norm_vec;              /* decode RMSNorm with 256 threads and 16-byte loads (OB_CUDA_NORM_VEC=0: 1024 threads) */
    bool pdl;                   /* programmatic edges in front of decode products (OB_CUDA_PDL=0: off) */
    bool rec_pdl;               /* the next recorded launch gets one (cleared when recorded) */
    bool pdl_all;               /* also the small kernels of a decode step (OB_CUDA_PDL_ALL=0: the products only) */
    cuda_pending_rope last_rope;
    cuda_pending_rope2 last_rope2;
    bool kv_fuse;               /* the KV write joins the RoPE before it (OB_CUDA_KV_FUSE=0: off) */
    bool attn_q8;               /* decode attention also writes its output's q8 copy (OB_CUDA_ATTN_Q8=0: off) */
    cuda_pending_gnorm last_gnorm[2]; /* by the parity of their op number */
    cuda_qknr_pend last_qknr;
    bool qk_fuse;               /* q/k per-head norms and RoPE in one kernel (OB_CUDA_QK_FUSE=0: off) */
    /* cuBLAS in recorded steps (matmul.cu, blas_run): while a graph is recorded, a cuBLAS call
     * is captured on cap_stream into a graph of its own, kept in blas_graphs under the call's
     * exact parameters (a repeated step captures nothing), and recorded as a child-graph node
     * (cuda_rec_child). cuBLAS always runs on blas_ws (32 MiB on sm_90+, 4 MiB before), in
     * graphs and out, so it allocates nothing while captured and picks the same kernels
     * either way. OB_CUDA_GRAPH_BLAS=0, or a capture that failed: a cuBLAS call ends the
     * recording instead, as before. */
    bool graph_blas;
    cudaStream_t cap_stream;
    void *blas_ws;
    size_t blas_ws_bytes;
    struct cuda_blas_graphs *blas_graphs;
    unsigned long long n_captures, n_child_updates;
    unsigned long long n_joins, n_exchanges; /* products joined in pairs; pairs of kept copies exchanged (matmul.cu) */
    /* OB_CUDA_PROF=1: every kernel, cuBLAS product and download between a
     * pair of events (graphs off), read back at the next drain (the stream
     * is never stopped for it, so the GPU keeps its clocks), summed per
     * kernel and printed as a table when the backend is freed. The sums show
     * where a step's GPU time goes and, against the wall time, how much of
     * it is the host's. */
    bool prof;
    void **prof_ev;             /* cudaEvent_t [2 * OB_PROF_PENDING]: start and end of each pending piece */
    struct cuda_prof_pending *prof_pend; /* [OB_PROF_PENDING] what each pair timed */
    int prof_np;
    struct cuda_prof_entry *prof_tab;
    int prof_n, prof_cap;
} cuda_backend;

static inline cuda_backend *cuda_of(ob_backend *b) { return (cuda_backend *)b; }

/* Whether this backend may run the fused layers (layer.cu): one backend a device does, the
 * first to ask, until it is freed - two persistent kernels from two streams side by side could
 * each hold part of the multiprocessors and wait for ever on their grid barriers. */
bool cuda_layer_claim(cuda_backend *c);
/* Make this thread's current device the backend's (ops may come from any thread). */
int cuda_enter(cuda_backend *c);
/* A device copy of n bytes of host memory, valid until the next drain.
 * An op stages all its arrays in one call: a later call may find the ring
 * full, drain and start over, overwriting what an earlier call staged. */
int cuda_stage(cuda_backend *c, const void *host, size_t n, const void **dev);
/* Wait for the stream, then recycle the staging ring. */
int cuda_drain(cuda_backend *c);
/* Start recording the launches that follow into a graph (when graphs are on
 * and no recording is running). */
int cuda_graph_begin(cuda_backend *c);
/* End a running recording: update or build its graph and launch it; a no-op
 * otherwise. Called before anything that is not a kernel launch (host
 * waits, copies, cuBLAS). */
int cuda_flush(cuda_backend *c);
/* Replace argument `arg` (size bytes) and the grid of the last recorded launch, which must be of
 * `func` (a broken invariant otherwise). */
int cuda_rec_rewrite_last(cuda_backend *c, const void *func, dim3 grid, int arg, const void *bytes, size_t size);
/* Record a graph (a captured cuBLAS call) as one child-graph node. `id` names the graph for
 * as long as the backend lives (never reused), so a later recording of the same step sees
 * whether the node changed; g must stay valid until the recording ends (cuda_flush). */
int cuda_rec_child(cuda_backend *c, unsigned long long id, cudaGraph_t g);
/* Record one launch: its function, shape and the bytes of each argument. */
int cuda_rec_kernel(cuda_backend *c, const void *func, dim3 grid, dim3 block, size_t smem, int nargs,
                    void *const *args, const size_t *sizes, const size_t *aligns);

template <class T> struct ob_ident {
    typedef T type;
};

/* OB_CUDA_PROF: mark the start of a timed piece of work, then wait for its
 * end and add its time to `key`'s row (named by the kernel behind key, or
 * by `name` when given). */
void cuda_prof_begin(cuda_backend *c);
int cuda_prof_end(cuda_backend *c, const void *key, const char *name);
/* The next launch may start early in a graph (a programmatic edge, hopper.cuh): for kernels
 * that call ob_pdl_wait() before they touch memory. */
static inline void cuda_pdl_next(cuda_backend *c) { c->rec_pdl = c->pdl_all; }
/* Launch kernel k (or record it while a graph is being recorded). The
 * arguments convert to the kernel's parameter types first, so a recorded
 * launch keeps exactly the bytes the kernel would get. */
template <typename... P>
static inline int cuda_launch(cuda_backend *c, void (*k)(P...), dim3 grid, dim3 block, size_t smem,
                              typename ob_ident<P>::type... a) {
    if (c->recording) {
        void *args[] = {(void *)&a..., NULL};
        const size_t sizes[] = {sizeof(P)..., 0}, aligns[] = {alignof(P)..., 1};
        return cuda_rec_kernel(c, (const void *)k, grid, block, smem, (int)sizeof...(P), args, sizes, aligns);
    }
    c->rec_pdl = false;
    if (c->prof) cuda_prof_begin(c);
    k<<<grid, block, smem, c->stream>>>(a...);
    OB_CU(cudaGetLastError());
    if (c->prof) return cuda_prof_end(c, (const void *)k, NULL);
    return 0;
}
/* Grow a device scratch buffer to at least n bytes (drains first when it must move). */
int cuda_scratch(cuda_backend *c, void **buf, size_t *cap, size_t n);
/* Grow the host scratch buffer. */
int cuda_host_tmp(cuda_backend *c, size_t n, void **out);

/* ---- device helpers ---- */

#define OB_WARP 32
#define OB_FULL_MASK 0xffffffffu

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = OB_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(OB_FULL_MASK, v, o);
    return v;
}

/* A row's sums split over wpr consecutive warps of a block (sub = warp % wpr, each warp's
 * warp_sum already taken): lane 0 of every warp leaves its N values in red[warp], and lane 0
 * of the row's first warp adds the row's, in warp order from 0.0f, into v. Every thread of
 * the block calls it (a barrier). The decode kernels' one order of a split row's sums (mmv.cuh,
 * mmv16.cu, mmvq.cu, moe.cu), whatever the batch. */
template <int N>
static __device__ __forceinline__ void row_sum_warps(float (*red)[N], float *v, int wpr, int warp, int sub,
                                                     int lane) {
    if (lane == 0)
#pragma unroll
        for (int i = 0; i < N; i++) red[warp][i] = v[i];
    __syncthreads();
    if (sub == 0 && lane == 0)
#pragma unroll
        for (int i = 0; i < N; i++) {
            float s = 0.0f;
            for (int k = 0; k < wpr; k++) s += red[warp + k][i];
            v[i] = s;
        }
}

static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = OB_WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(OB_FULL_MASK, v, o));
    return v;
}
static __device__ __forceinline__ void q8_put_warp(int8_t *qx, float *dx, int64_t nin, int64_t row, int64_t col,
                                                   float o) {
    const float amax = warp_max(fabsf(o));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const float q = roundf(o * id);
    qx[row * nin + col] = (int8_t)q;
    const float sum = warp_sum(q); /* small integers: exact */
    if (threadIdx.x % OB_WARP == 0) {
        float *p = dx + 2 * (row * (nin / 32) + col / 32);
        p[0] = d;
        p[1] = d * sum;
    }
}

/* A warp's 32 consecutive values o (lane i: column col, col - lane a multiple
 * of 32) of row `row` into the q8 layout of mmvq.cuh (rows of nin bytes,
 * nin / 32 pairs of floats): the operations of q8_act_kernel, so the copy is
 * the one the product would make itself. Every lane of the warp calls it. */
static __device__ __forceinline__ void q8_put_warp(int8_t *qx, float *dx, int64_t nin, int64_t row, int64_t col,
                                                   float o);
/* The activations of the glu op (ob_act); elementwise.cu's kernels and the products that fuse the
 * GLU (mmvq.cu, mmv16.cu) share this one definition, so both give the same bits. */
static __device__ __forceinline__ float act_f(int act, float x) {
    switch (act) {
    case OB_ACT_SILU: return x / (1.0f + expf(-x));
    case OB_ACT_GELU: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case OB_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case OB_ACT_RELU2: return x > 0 ? x * x : 0.0f;
    case OB_ACT_TANH: return tanhf(x);
    case OB_ACT_RELU: return x > 0 ? x : 0.0f;
    }
    return x;
}

/* Sum over a block of blockDim.x threads (a multiple of 32, at most 1024);
 * every thread gets the result. `red` holds 32 floats of shared memory. */
static __device__ __forceinline__ float block_sum(float v, float *red) {
    const int lane = threadIdx.x % OB_WARP, warp = threadIdx.x / OB_WARP, nw = blockDim.x / OB_WARP;
    v = warp_sum(v);
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    return warp_sum(v);
}

/* Bits to float; host-callable too, so the dequantizers can be checked on a machine without a GPU. */
static __host__ __device__ __forceinline__ float ob_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}
static __host__ __device__ __forceinline__ float ob_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
static __host__ __device__ __forceinline__ float ob_bf2f(uint16_t h) { return ob_u2f((uint32_t)h << 16); }
static __device__ __forceinline__ uint16_t ob_f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }

static inline unsigned ob_div_up(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

#endif
