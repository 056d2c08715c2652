/*
 * attention.cu - paged-KV attention and the K/V cache writes.
 *
 * kv_write: one launch writes a batch's K and V rows at their slots. F16 and
 * F32 convert element by element (round to nearest even, as the CPU's
 * reference conversion); Q8_0 gives each 32-element block to one warp,
 * which finds the block's absolute maximum with shuffles and then rounds
 * exactly as ob_quantize_row_q8_0_ref does, so GPU and CPU pools hold the
 * same bytes.
 *
 * attention: a block per (query token, KV head, split). The block holds the
 * G = n_head / n_head_kv query heads that share the KV head (GQA: each K/V
 * row is read once for all of them) and walks its range of positions in
 * tiles of 32: the tile's slots are looked up in the token's block table,
 * K and V rows are converted to float into shared memory (K rows padded by
 * one float so the score loop, one position per lane, is free of bank
 * conflicts), scores are scaled and soft-capped, and an online softmax keeps
 * a running maximum m, sum l and unnormalised output per head.
 *
 * Splitting over the sequence: when the batch has too few (token, KV head)
 * pairs to fill the device (decode), each token's range is cut into S
 * splits (down to one tile each) that run as separate blocks and write (m, l, acc) partials; a
 * second kernel combines them (out = sum acc_s e^(m_s - M) / sum l_s
 * e^(m_s - M)). The combine is its own launch, so no block ever waits on
 * another and no cross-block memory ordering is involved.
 *
 * The host side turns the ob_attn_token array (host pointers to each
 * sequence's block table) into one device table: per token its table
 * offset, position and window start, followed by the distinct block tables
 * (tokens of one sequence share one copy), sent with one copy through the
 * staging ring. Table entries are range-checked on the host, so a bad table
 * is an error, never a stray device read.
 */
#include <cuda_bf16.h>
#include <math.h>

#include "attention.cuh"
#include "elementwise.cuh"
#include "hopper.cuh"
#include "matmul.cuh"
#include "quant.cuh"

#define ATT_TILE 32
#define ATT_THREADS 128
#define ATT_MAX_SPLITS 64
#define ATT_INV_TILES 8 /* tiles a split covers in batch-invariant mode (256 positions) */
#define ATT_BATCH 8 /* K/V elements per thread loaded before they are stored */
#define FA_MIN_RUN 16   /* consecutive tokens of a sequence that take the tensor-core kernel */
#define FA_TILE_ROWS 64 /* query rows of its tiles (FA_BR in attention_mma.cu) */

template <int KT> static __device__ __forceinline__ float kv_elem(const uint8_t *row, int e) {
    if (KT == OB_TYPE_F32) return ((const float *)row)[e];
    if (KT == OB_TYPE_F16) return ob_h2f(((const uint16_t *)row)[e]);
    /* Q8_0: 34-byte blocks of 32; rows are even-sized, so the half is 2-aligned */
    const uint8_t *blk = row + (e / 32) * 34;
    return (float)(int8_t)blk[2 + e % 32] * ob_h2f(*(const uint16_t *)blk);
}

/* A float rounded to bf16 (nearest even), as the bits act16_kernel writes. */
static __device__ __forceinline__ uint16_t bf16_bits(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

typedef struct attn_args {
    const float *q;
    int64_t ldq;
    float *out;
    int64_t ldo;
    const uint8_t *kpool, *vpool;
    size_t row_bytes;
    int block_size, n_head, n_head_kv, hd;
    float scale, softcap;
    float max_bias;  /* ALiBi: 0 = none (ob_attn_params.max_alibi_bias) */
    const attn_tok *toks;
    const int32_t *tables;
    int splits;
    int split_tiles; /* tiles a split covers; 0: the token's tiles over `splits` */
    int hsplit;      /* vector kernel: blocks sharing a KV head's query heads (grid.y = n_head_kv * hsplit) */
    float *part_acc; /* [n][n_head][splits][hd] */
    float *part_ml;  /* [n][n_head][splits][2] */
    int8_t *qx;      /* not NULL: the output's q8 copy too (mmvq.cuh layout, rows of n_head * hd), */
    float *dx;       /* which the output projection then reads instead of rounding the output */
    uint16_t *xb;    /* not NULL: the output's bf16 copy instead (rows of n_head * hd), for an output
                      * projection on a kept bf16 copy of its weight (cuda_b16_wanted) */
} attn_args;

/* Positions start..end (inclusive; empty when start > end) of token tk that split sp covers:
 * split_tiles tiles each (batch-invariant mode), or the token's tiles over `splits`. Both
 * kernels cut ranges this way, so the combine sees the same partials from either. */
static __device__ __forceinline__ void split_range(const attn_args &a, const attn_tok &tk, int sp, int &start,
                                                   int &end) {
    const int len = tk.pos - tk.kv_start + 1;
    const int tiles = (len + ATT_TILE - 1) / ATT_TILE;
    const int tps = a.split_tiles > 0 ? a.split_tiles : (tiles + a.splits - 1) / a.splits;
    start = tk.kv_start + sp * tps * ATT_TILE;
    end = min(tk.pos, start + tps * ATT_TILE - 1);
}

template <int KT> __global__ void __launch_bounds__(ATT_THREADS) attention_kernel(attn_args a) {
    extern __shared__ float smem[];
    const int t = blockIdx.x, hk = blockIdx.y, sp = blockIdx.z;
    const int hd = a.hd, G = a.n_head / a.n_head_kv, tid = threadIdx.x;
    float *qs = smem;                        /* [G][hd] */
    float *ks = qs + G * hd;                 /* [TILE][hd + 1] */
    float *vs = ks + ATT_TILE * (hd + 1);    /* [TILE][hd] */
    float *sc = vs + ATT_TILE * hd;          /* [G][TILE] */
    float *acc = sc + G * ATT_TILE;          /* [G][hd] */
    float *mrow = acc + G * hd, *lrow = mrow + G, *corr = lrow + G;
    int *slot = (int *)(corr + G);           /* [TILE] */

    const attn_tok tk = a.toks[t];
    const int32_t *table = a.tables + tk.table_off;
    int start, end; /* this split's range of positions */
    split_range(a, tk, sp, start, end);

    for (int i = tid; i < G * hd; i += ATT_THREADS) {
        qs[i] = a.q[(int64_t)tk.row * a.ldq + (int64_t)hk * G * hd + i];
        acc[i] = 0.0f;
    }
    for (int g = tid; g < G; g += ATT_THREADS) mrow[g] = -INFINITY, lrow[g] = 0.0f;
    __syncthreads();

    const int warp = tid / OB_WARP, lane = tid % OB_WARP, nw = ATT_THREADS / OB_WARP;
    const size_t col0 = (size_t)hk * hd;
    for (int p0 = start; p0 <= end; p0 += ATT_TILE) {
        const int cnt = min(ATT_TILE, end - p0 + 1);
        if (tid < ATT_TILE) {
            const int p = p0 + tid;
            slot[tid] = tid < cnt ? table[p / a.block_size] * a.block_size + p % a.block_size : 0;
        }
        __syncthreads();
        /* K and V rows of the tile: ATT_BATCH elements of each per thread
         * loaded before any is stored, so a thread has 2 * ATT_BATCH
         * independent loads in flight instead of one at a time. */
        for (int i0 = tid; i0 < cnt * hd; i0 += ATT_BATCH * ATT_THREADS) {
            float kr[ATT_BATCH], vr[ATT_BATCH];
#pragma unroll
            for (int u = 0; u < ATT_BATCH; u++) {
                const int i = i0 + u * ATT_THREADS;
                if (i < cnt * hd) {
                    const int p = i / hd, d = i % hd;
                    const size_t off = (size_t)slot[p] * a.row_bytes;
                    kr[u] = kv_elem<KT>(a.kpool + off, (int)col0 + d);
                    vr[u] = kv_elem<KT>(a.vpool + off, (int)col0 + d);
                }
            }
#pragma unroll
            for (int u = 0; u < ATT_BATCH; u++) {
                const int i = i0 + u * ATT_THREADS;
                if (i < cnt * hd) {
                    const int p = i / hd, d = i % hd;
                    ks[p * (hd + 1) + d] = kr[u];
                    vs[p * hd + d] = vr[u];
                }
            }
        }
        __syncthreads();
        for (int i = tid; i < G * ATT_TILE; i += ATT_THREADS) {
            const int g = i / ATT_TILE, p = i % ATT_TILE;
            float s = -INFINITY;
            if (p < cnt) {
                const float *qg = qs + g * hd, *kp = ks + p * (hd + 1);
                float dot = 0.0f;
                for (int d = 0; d < hd; d++) dot = fmaf(qg[d], kp[d], dot);
                s = dot * a.scale;
                if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
                if (a.max_bias > 0.0f) s += attn_alibi_slope(a.n_head, hk * G + g, a.max_bias) * (float)(p0 + p - tk.pos);
            }
            sc[i] = s;
        }
        __syncthreads();
        for (int g = warp; g < G; g += nw) { /* one lane per position of the tile */
            const float s = sc[g * ATT_TILE + lane];
            const float m_old = mrow[g], m_new = fmaxf(m_old, warp_max(s));
            const float e = lane < cnt ? expf(s - m_new) : 0.0f;
            sc[g * ATT_TILE + lane] = e;
            const float sum = warp_sum(e);
            __syncwarp(); /* every lane has read mrow[g] before lane 0 rewrites it */
            if (lane == 0) {
                const float cr = expf(m_old - m_new); /* 0 on the first tile (m_old = -inf) */
                corr[g] = cr;
                lrow[g] = lrow[g] * cr + sum;
                mrow[g] = m_new;
            }
        }
        __syncthreads();
        for (int i = tid; i < G * hd; i += ATT_THREADS) {
            const int g = i / hd, d = i % hd;
            const float *pg = sc + g * ATT_TILE;
            float o = acc[i] * corr[g];
            for (int p = 0; p < cnt; p++) o = fmaf(pg[p], vs[p * hd + d], o);
            acc[i] = o;
        }
        __syncthreads();
    }

    if (!a.part_acc) {
        for (int i = tid; i < G * hd; i += ATT_THREADS) {
            const float l = lrow[i / hd];
            a.out[(int64_t)tk.row * a.ldo + (int64_t)hk * G * hd + i] = acc[i] * (l > 0.0f ? 1.0f / l : 0.0f);
        }
    } else {
        for (int i = tid; i < G * hd; i += ATT_THREADS) {
            const int g = i / hd, d = i % hd, h = hk * G + g;
            const int64_t part = ((int64_t)t * a.n_head + h) * a.splits + sp;
            a.part_acc[part * hd + d] = acc[i];
            if (d == 0) {
                a.part_ml[part * 2] = mrow[g];
                a.part_ml[part * 2 + 1] = lrow[g];
            }
        }
    }
}


/* EPL consecutive elements e0.. of a K or V row as floats. */
template <int KT, int EPL> static __device__ __forceinline__ void kv_load(const uint8_t *row, int e0, float *v) {
    if (KT == OB_TYPE_F16) {
        const uint16_t *h = (const uint16_t *)row + e0;
        if (EPL == 2) {
            const uint32_t u = *(const uint32_t *)h;
            v[0] = ob_h2f((uint16_t)(u & 0xffffu)), v[1] = ob_h2f((uint16_t)(u >> 16));
        } else if (EPL == 4) {
            const uint2 u = *(const uint2 *)h;
            v[0] = ob_h2f((uint16_t)(u.x & 0xffffu)), v[1] = ob_h2f((uint16_t)(u.x >> 16));
            v[2] = ob_h2f((uint16_t)(u.y & 0xffffu)), v[3] = ob_h2f((uint16_t)(u.y >> 16));
        } else {
            const uint4 u = *(const uint4 *)h;
            const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int i = 0; i < 4; i++) v[2 * i] = ob_h2f((uint16_t)(w[i] & 0xffffu)), v[2 * i + 1] = ob_h2f((uint16_t)(w[i] >> 16));
        }
    } else { /* Q8_0: the EPL (<= 8, dividing 32) elements sit in one 34-byte block, codes 2-byte aligned */
        const uint8_t *blk = row + (e0 / 32) * 34;
        const float d = ob_h2f(*(const uint16_t *)blk);
        const uint16_t *q = (const uint16_t *)(blk + 2 + e0 % 32);
#pragma unroll
        for (int i = 0; i < EPL / 2; i++) {
            const uint32_t u = q[i];
            v[2 * i] = d * (float)(int8_t)(u & 0xffu), v[2 * i + 1] = d * (float)(int8_t)(u >> 8);
        }
    }
}

#define ATT_VEC_WARPS 4 /* warps of a vector-kernel block */

/* The end of both forms of the vector kernel: the 4 warps' (m, l, acc) merged through shared
 * memory at sm ([warp][g] m, then l, then [warp][g][hd] acc), then the token's output with its
 * q8 or bf16 copy, or the split's partial. */
template <int EPL, int GT>
static __device__ __forceinline__ void vec_merge(const attn_args &a, const attn_tok &tk, int t, int sp, int G, int hb,
                                                 int warp, int lane, const float (&m)[GT], const float (&l)[GT],
                                                 const float (&acc)[GT][EPL], float *sm) {
    constexpr int HD = OB_WARP * EPL;
    float *sl = sm + ATT_VEC_WARPS * GT, *sa = sl + ATT_VEC_WARPS * GT;
#pragma unroll
    for (int g = 0; g < GT; g++) {
        if (lane == 0) sm[warp * GT + g] = m[g], sl[warp * GT + g] = l[g];
#pragma unroll
        for (int i = 0; i < EPL; i++) sa[(warp * GT + g) * HD + lane * EPL + i] = acc[g][i];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * HD; i += ATT_VEC_WARPS * OB_WARP) {
        const int g = i / HD, d = i % HD;
        float M = -INFINITY;
        for (int w = 0; w < ATT_VEC_WARPS; w++) M = fmaxf(M, sm[w * GT + g]);
        float L = 0.0f, o = 0.0f;
        if (M != -INFINITY)
            for (int w = 0; w < ATT_VEC_WARPS; w++) {
                const float f = expf(sm[w * GT + g] - M); /* 0 for a warp that saw no position */
                L += sl[w * GT + g] * f;
                o += sa[(w * GT + g) * HD + d] * f;
            }
        if (!a.part_acc) {
            const float v = L > 0.0f ? o / L : 0.0f;
            a.out[(int64_t)tk.row * a.ldo + (int64_t)(hb + g) * HD + d] = v;
            /* whole warps: G * hd and the warp's first i are multiples of 32 */
            if (a.qx) q8_put_warp(a.qx, a.dx, (int64_t)a.n_head * HD, tk.row, (int64_t)(hb + g) * HD + d, v);
            if (a.xb) a.xb[(int64_t)tk.row * a.n_head * HD + (int64_t)(hb + g) * HD + d] = bf16_bits(v);
        } else {
            const int64_t part = ((int64_t)t * a.n_head + hb + g) * a.splits + sp;
            a.part_acc[part * HD + d] = o;
            if (d == 0) a.part_ml[part * 2] = M, a.part_ml[part * 2 + 1] = L;
        }
    }
}

/* The vector kernel (head dimension 32 * EPL, at most GT query heads per KV
 * head, F16 or Q8_0 cache): a block per (token, KV head, split) as
 * attention_kernel, but each of its 4 warps walks every 4th position of the
 * range on its own: a lane holds EPL elements of each query head, reads
 * EPL elements of the position's K and V rows (one load each, a warp reads
 * a row in one coalesced piece), the scores come from a warp sum, and an
 * online softmax (running maximum m, sum l, output acc per head) stays in
 * registers - no shared memory and no barrier until the four warps merge
 * their (m, l, acc) at the end. Two positions are loaded before either is
 * used, for loads in flight. */
template <int KT, int EPL, int GT>
__global__ void __launch_bounds__(ATT_VEC_WARPS * OB_WARP) attention_vec_kernel(attn_args a) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    extern __shared__ float smem[];
    const int t = blockIdx.x, hk = blockIdx.y / a.hsplit, sp = blockIdx.z;
    const int hd = a.hd, G = a.n_head / a.n_head_kv / a.hsplit; /* this block's query heads */
    const int hb = hk * (a.n_head / a.n_head_kv) + (blockIdx.y % a.hsplit) * G; /* the first of them */
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const attn_tok tk = a.toks[t];
    const int32_t *table = a.tables + tk.table_off;
    int start, end;
    split_range(a, tk, sp, start, end);
    const int e0 = hk * hd + lane * EPL; /* this lane's elements of the K/V row */

    float q[GT][EPL], acc[GT][EPL], m[GT], l[GT], slope[GT];
#pragma unroll
    for (int g = 0; g < GT; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
        slope[g] = a.max_bias > 0.0f && g < G ? attn_alibi_slope(a.n_head, hb + g, a.max_bias) : 0.0f;
#pragma unroll
        for (int i = 0; i < EPL; i++) {
            q[g][i] = g < G ? a.q[(int64_t)tk.row * a.ldq + (int64_t)(hb + g) * hd + lane * EPL + i] : 0.0f;
            acc[g][i] = 0.0f;
        }
    }
    auto step = [&](int p, const float *kr, const float *vr) {
#pragma unroll
        for (int g = 0; g < GT; g++) {
            if (g >= G) break;
            float d = 0.0f;
#pragma unroll
            for (int i = 0; i < EPL; i++) d = fmaf(q[g][i], kr[i], d);
            float sc = warp_sum(d) * a.scale;
            if (a.softcap > 0.0f) sc = a.softcap * tanhf(sc / a.softcap);
            sc += slope[g] * (float)(p - tk.pos);
            const float mn = fmaxf(m[g], sc), cr = expf(m[g] - mn), e = expf(sc - mn);
            l[g] = l[g] * cr + e;
#pragma unroll
            for (int i = 0; i < EPL; i++) acc[g][i] = fmaf(e, vr[i], acc[g][i] * cr);
            m[g] = mn;
        }
    };
    /* The warp's positions p = start + warp + 4 j, 32 at a time: lane i looks up position j + i's
     * row in the block table (one load for 32 positions), and the rows' offsets come by shuffle,
     * so the K/V loads of U positions go out together instead of each waiting on its table
     * entry. Positions are summed in the same order as one at a time (same bits). */
    constexpr int U = GT * EPL <= 16 ? 4 : 2;
    for (int base = start + warp; base <= end; base += OB_WARP * ATT_VEC_WARPS) {
        const int pl = base + lane * ATT_VEC_WARPS;
        const unsigned long long off =
            pl <= end ? (unsigned long long)(table[pl / a.block_size] * a.block_size + pl % a.block_size) * a.row_bytes
                      : 0ull;
        const int cnt = min(OB_WARP, (end - base) / ATT_VEC_WARPS + 1);
        int j = 0;
        for (; j + U <= cnt; j += U) {
            float kk[U][EPL], vv[U][EPL];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const size_t o = (size_t)__shfl_sync(0xffffffffu, off, j + u);
                kv_load<KT, EPL>(a.kpool + o, e0, kk[u]);
                kv_load<KT, EPL>(a.vpool + o, e0, vv[u]);
            }
#pragma unroll
            for (int u = 0; u < U; u++) step(base + (j + u) * ATT_VEC_WARPS, kk[u], vv[u]);
        }
        for (; j < cnt; j++) {
            const size_t o = (size_t)__shfl_sync(0xffffffffu, off, j);
            float k0[EPL], v0[EPL];
            kv_load<KT, EPL>(a.kpool + o, e0, k0);
            kv_load<KT, EPL>(a.vpool + o, e0, v0);
            step(base + j * ATT_VEC_WARPS, k0, v0);
        }
    }

    vec_merge<EPL, GT>(a, tk, t, sp, G, hb, warp, lane, m, l, acc, smem);
}

/* The tiled vector kernel (the default for decode; OB_CUDA_ATTN_VT=0 goes back to the one
 * above): the same grid, shapes and merge, but each warp takes 32 consecutive positions at a
 * time with a lane per position for the scores, so a (position, head) costs about a dozen
 * instructions instead of a warp-wide sum and two exponentials each:
 *
 *   1. scores: lane j reads position j's K row in 8-element pieces and sums it against the
 *      block's query heads (in shared memory, read as broadcasts);
 *   2. softmax over the tile: one warp max and one warp sum a head for 32 positions;
 *   3. output: lane i owns EPL elements of every head and walks the 32 positions' V rows (a
 *      coalesced row a position), the probabilities read back from a per-warp shared row.
 *
 * Why (bench/RESULTS.md, CUDA session 10): at 64 sequences of an 8B model the per-position
 * kernel spent 47 us a layer where its K/V reads take ~9 us at bandwidth: ~60 instructions a
 * (position, head), so the attention was bound by instruction issue. Warps take whole tiles,
 * so a short range leaves some idle; the grid's splits are cut as for the other kernels. */
template <int KT, int EPL, int GT>
__global__ void __launch_bounds__(ATT_VEC_WARPS * OB_WARP) attention_vt_kernel(attn_args a) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    extern __shared__ float smem[];
    constexpr int HD = OB_WARP * EPL;
    const int t = blockIdx.x, hk = blockIdx.y / a.hsplit, sp = blockIdx.z;
    const int G = a.n_head / a.n_head_kv / a.hsplit; /* this block's query heads */
    const int hb = hk * (a.n_head / a.n_head_kv) + (blockIdx.y % a.hsplit) * G;
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP;
    const attn_tok tk = a.toks[t];
    const int32_t *table = a.tables + tk.table_off;
    int start, end;
    split_range(a, tk, sp, start, end);
    /* shared: the query heads [HD / 4][GT] float4 (element d of head g at [d / 4][g]), the
     * warps' probabilities [warp][32][GT], then the merge area */
    float4 *qs = (float4 *)smem;
    float *pw = smem + GT * HD + warp * OB_WARP * GT;
    for (int i = threadIdx.x; i < GT * HD; i += ATT_VEC_WARPS * OB_WARP) {
        const int g = i / HD, d = i % HD;
        ((float *)qs)[(d / 4) * 4 * GT + g * 4 + d % 4] =
            g < G ? a.q[(int64_t)tk.row * a.ldq + (int64_t)(hb + g) * HD + d] : 0.0f;
    }
    float acc[GT][EPL], m[GT], l[GT], slope[GT];
#pragma unroll
    for (int g = 0; g < GT; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
        slope[g] = a.max_bias > 0.0f && g < G ? attn_alibi_slope(a.n_head, hb + g, a.max_bias) : 0.0f;
#pragma unroll
        for (int i = 0; i < EPL; i++) acc[g][i] = 0.0f;
    }
    __syncthreads();
    const int k0 = hk * HD, e0 = hk * HD + lane * EPL;
    for (int base = start + warp * OB_WARP; base <= end; base += OB_WARP * ATT_VEC_WARPS) {
        const int p = base + lane;
        const bool live = p <= end;
        const size_t off =
            live ? (size_t)(table[p / a.block_size] * a.block_size + p % a.block_size) * a.row_bytes : (size_t)0;
        /* 1. this lane's position against every head */
        float s[GT];
#pragma unroll
        for (int g = 0; g < GT; g++) s[g] = 0.0f;
        if (live) {
            const uint8_t *krow = a.kpool + off;
#pragma unroll 4
            for (int c = 0; c < HD / 8; c++) {
                float k8[8];
                kv_load<KT, 8>(krow, k0 + 8 * c, k8);
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int g = 0; g < GT; g++) {
                        /* elements 8c + 4h .. + 3 of head g */
                        const float4 q4 = qs[(2 * c + h) * GT + g];
                        s[g] = fmaf(q4.x, k8[4 * h], s[g]);
                        s[g] = fmaf(q4.y, k8[4 * h + 1], s[g]);
                        s[g] = fmaf(q4.z, k8[4 * h + 2], s[g]);
                        s[g] = fmaf(q4.w, k8[4 * h + 3], s[g]);
                    }
            }
        }
        /* 2. the tile's softmax step, a head at a time */
        float pr[GT];
#pragma unroll
        for (int g = 0; g < GT; g++) {
            float sc = s[g] * a.scale;
            if (a.softcap > 0.0f) sc = a.softcap * tanhf(sc / a.softcap);
            sc += slope[g] * (float)(p - tk.pos);
            sc = live ? sc : -INFINITY;
            const float mn = fmaxf(m[g], warp_max(sc)); /* finite: lane 0's position is live */
            const float cr = expf(m[g] - mn);
            pr[g] = live ? expf(sc - mn) : 0.0f;
            l[g] = l[g] * cr + warp_sum(pr[g]);
            m[g] = mn;
#pragma unroll
            for (int i = 0; i < EPL; i++) acc[g][i] *= cr;
        }
        __syncwarp();
#pragma unroll
        for (int g = 0; g < GT; g++) pw[lane * GT + g] = pr[g];
        __syncwarp();
        /* 3. the 32 positions' V rows into this lane's elements */
        const int cnt = min(OB_WARP, end - base + 1);
        constexpr int U = 8;
        int j = 0;
        for (; j + U <= cnt; j += U) {
            float vv[U][EPL];
#pragma unroll
            for (int u = 0; u < U; u++)
                kv_load<KT, EPL>(a.vpool + (size_t)__shfl_sync(0xffffffffu, (unsigned long long)off, j + u), e0, vv[u]);
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int g = 0; g < GT; g++) {
                    const float pg = pw[(j + u) * GT + g];
#pragma unroll
                    for (int i = 0; i < EPL; i++) acc[g][i] = fmaf(pg, vv[u][i], acc[g][i]);
                }
        }
        for (; j < cnt; j++) {
            float v0[EPL];
            kv_load<KT, EPL>(a.vpool + (size_t)__shfl_sync(0xffffffffu, (unsigned long long)off, j), e0, v0);
#pragma unroll
            for (int g = 0; g < GT; g++) {
                const float pg = pw[j * GT + g];
#pragma unroll
                for (int i = 0; i < EPL; i++) acc[g][i] = fmaf(pg, v0[i], acc[g][i]);
            }
        }
    }

    vec_merge<EPL, GT>(a, tk, t, sp, G, hb, warp, lane, m, l, acc, smem + GT * HD + ATT_VEC_WARPS * OB_WARP * GT);
}

/* One block per (token, head): merge the splits' partials. */
__global__ void attention_combine_kernel(const float *__restrict__ part_acc, const float *__restrict__ part_ml,
                                         const attn_tok *__restrict__ toks, int splits, int n_head, int hd,
                                         float *out, int64_t ldo, int8_t *__restrict__ qx, float *__restrict__ dx,
                                         uint16_t *__restrict__ xb) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    const int t = blockIdx.x / n_head, h = blockIdx.x % n_head;
    const int64_t base = ((int64_t)t * n_head + h) * splits;
    float M = -INFINITY;
    for (int s = 0; s < splits; s++) M = fmaxf(M, part_ml[(base + s) * 2]);
    float L = 0.0f;
    for (int s = 0; s < splits; s++) L += part_ml[(base + s) * 2 + 1] * expf(part_ml[(base + s) * 2] - M);
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < splits; s++) {
            const float m = part_ml[(base + s) * 2];
            if (m == -INFINITY) continue; /* an empty split */
            o += part_acc[(base + s) * hd + d] * expf(m - M);
        }
        out[(int64_t)toks[t].row * ldo + (int64_t)h * hd + d] = o * inv;
        /* whole warps: hd and the block are multiples of 32 when qx is set */
        if (qx) q8_put_warp(qx, dx, (int64_t)n_head * hd, toks[t].row, (int64_t)h * hd + d, o * inv);
        if (xb) xb[(int64_t)toks[t].row * n_head * hd + (int64_t)h * hd + d] = bf16_bits(o * inv);
    }
}

static int kv_type_index(ob_type t) { return t == OB_TYPE_F32 ? 0 : t == OB_TYPE_F16 ? 1 : t == OB_TYPE_Q8_0 ? 2 : -1; }

int cuda_op_attention(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_token *toks,
                      const ob_attn_params *p, ob_tensor *out) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    if (p->n_head_kv <= 0 || p->n_head % p->n_head_kv)
        return ob_cuda_err(OB_ERR_INTERNAL, "attention: %d heads, %d kv heads", p->n_head, p->n_head_kv);
    const int kti = kv_type_index(kv->type);
    if (kti < 0) return ob_cuda_err(OB_ERR_UNSUPPORTED, "attention: KV type %s", cuda_type_name(kv->type));
    if ((int64_t)p->n_head_kv * p->head_dim != kv->kv_dim)
        return ob_cuda_err(OB_ERR_INTERNAL, "attention: %d kv heads x %d != kv_dim %lld", p->n_head_kv, p->head_dim,
                           (long long)kv->kv_dim);
    const int64_t n = q->ne[1];
    if (n <= 0) return 0;
    if (n > 65535) return ob_cuda_err(OB_ERR_UNSUPPORTED, "attention: %lld tokens in one call", (long long)n);
    const int bs = kv->block_size;
    const int64_t n_blocks = kv->n_slots / bs;

    /* 1. the distinct block tables and how much of each the batch reads */
    typedef struct {
        const int32_t *ptr;
        int32_t need, off;
    } utab;
    size_t head_bytes = (size_t)n * (sizeof(attn_tok) + sizeof(utab) + 2 * sizeof(int32_t));
    uint8_t *tmp;
    OB_TRY(cuda_host_tmp(c, head_bytes, (void **)&tmp));
    utab *u = (utab *)(tmp + (size_t)n * sizeof(attn_tok));
    int nu = 0, last = -1;
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const ob_attn_token *tk = &toks[i];
        if (tk->kv_start < 0 || tk->pos < tk->kv_start || (int64_t)tk->pos >= kv->n_slots)
            return ob_cuda_err(OB_ERR_INTERNAL, "attention: token %lld at position %d, window start %d", (long long)i,
                               tk->pos, tk->kv_start);
        int k = last >= 0 && u[last].ptr == tk->block_table ? last : -1;
        for (int j = 0; k < 0 && j < nu; j++)
            if (u[j].ptr == tk->block_table) k = j;
        if (k < 0) {
            k = nu++;
            u[k].ptr = tk->block_table;
            u[k].need = 0;
        }
        last = k;
        if (tk->pos / bs + 1 > u[k].need) u[k].need = tk->pos / bs + 1;
    }
    for (int j = 0; j < nu; j++) u[j].off = (int32_t)total, total += u[j].need;

    /* 1b. runs of FA_MIN_RUN or more consecutive positions of one sequence go to the tensor-core
     * kernel (attention_mma.cu) in tiles of up to 64; the rest (decode tokens, short runs) to the
     * kernels below. The token array is ordered rest first (0 .. n_rest - 1), then the runs. */
    int32_t *order = (int32_t *)(tmp + (size_t)n * (sizeof(attn_tok) + sizeof(utab)));
    int32_t *in_run = order + n;
    int64_t n_rest = n;
    int n_tiles = 0;
    if (n >= FA_MIN_RUN && cuda_attn_mma_usable(c, kv->type, p->head_dim, kv->row_bytes)) {
        for (int64_t i = 0; i < n;) {
            int64_t j = i + 1;
            while (j < n && toks[j].block_table == toks[i].block_table && toks[j].pos == toks[j - 1].pos + 1) j++;
            const int32_t mark = j - i >= FA_MIN_RUN;
            for (int64_t k = i; k < j; k++) in_run[k] = mark;
            if (mark) n_tiles += (int)((j - i + FA_TILE_ROWS - 1) / FA_TILE_ROWS);
            i = j;
        }
        int64_t r = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t i = 0; i < n; i++)
                if (in_run[i] == pass) order[r++] = (int32_t)i;
        n_rest = 0;
        for (int64_t i = 0; i < n; i++) n_rest += !in_run[i];
    } else {
        for (int64_t i = 0; i < n; i++) order[i] = (int32_t)i;
    }

    /* 2. pack tokens + tables + tiles into one buffer (after the scratch `u` lives) */
    const size_t tab_bytes = (size_t)total * sizeof(int32_t);
    const size_t pack_bytes = (size_t)n * sizeof(attn_tok) + tab_bytes + (size_t)n_tiles * sizeof(fa_tile);
    uint8_t *tmp2;
    OB_TRY(cuda_host_tmp(c, head_bytes + pack_bytes, (void **)&tmp2));
    u = (utab *)(tmp2 + (size_t)n * sizeof(attn_tok)); /* the buffer may have moved */
    order = (int32_t *)(tmp2 + (size_t)n * (sizeof(attn_tok) + sizeof(utab)));
    attn_tok *ht = (attn_tok *)(tmp2 + head_bytes);
    int32_t *htab = (int32_t *)(ht + n);
    fa_tile *htile = (fa_tile *)((uint8_t *)htab + tab_bytes);
    int max_len = 0;
    last = -1;
    for (int64_t r = 0; r < n; r++) {
        const int64_t i = order[r];
        int k = last >= 0 && u[last].ptr == toks[i].block_table ? last : -1;
        for (int j = 0; k < 0 && j < nu; j++)
            if (u[j].ptr == toks[i].block_table) k = j;
        last = k;
        ht[r].table_off = u[k].off;
        ht[r].pos = toks[i].pos;
        ht[r].kv_start = toks[i].kv_start;
        ht[r].row = (int32_t)i;
        if (r < n_rest && toks[i].pos - toks[i].kv_start + 1 > max_len) max_len = toks[i].pos - toks[i].kv_start + 1;
    }
    int64_t nt = 0;
    for (int64_t r = n_rest; r < n;) {
        /* the runs, in batch order: cut where the sequence or the positions break, or at 64 rows */
        int64_t e = r + 1;
        while (e < n && e - r < FA_TILE_ROWS && ht[e].row == ht[e - 1].row + 1 && ht[e].pos == ht[e - 1].pos + 1 &&
               toks[ht[e].row].block_table == toks[ht[e - 1].row].block_table)
            e++;
        if (nt == n_tiles) return ob_cuda_err(OB_ERR_INTERNAL, "attention: more tiles than runs");
        fa_tile *f = &htile[nt++];
        f->t0 = (int32_t)r, f->cnt = (int32_t)(e - r), f->kv_lo = INT_MAX, f->kv_hi = -1;
        for (int64_t k = r; k < e; k++) {
            if (ht[k].kv_start < f->kv_lo) f->kv_lo = ht[k].kv_start;
            if (ht[k].pos > f->kv_hi) f->kv_hi = ht[k].pos;
        }
        r = e;
    }
    for (int j = 0; j < nu; j++)
        for (int32_t e = 0; e < u[j].need; e++) {
            const int32_t blk = u[j].ptr[e];
            if (blk < 0 || blk >= n_blocks)
                return ob_cuda_err(OB_ERR_INTERNAL, "attention: block table entry %d is %d (pool of %lld)", e, blk,
                                   (long long)n_blocks);
            htab[u[j].off + e] = blk;
        }
    const void *dev;
    OB_TRY(cuda_stage(c, ht, pack_bytes, &dev));
    const attn_tok *dtoks = (const attn_tok *)dev;
    const int32_t *dtabs = (const int32_t *)((const uint8_t *)dev + (size_t)n * sizeof(attn_tok));
    if (n_tiles > 0)
        OB_TRY(cuda_attention_mma(c, kv, il, q, p, out, dtoks, dtabs,
                                  (const fa_tile *)((const uint8_t *)dtabs + tab_bytes), n_tiles));
    if (n_rest == 0) return 0;

    /* 3. splits, scratch, shared memory */
    const int G = p->n_head / p->n_head_kv, hd = p->head_dim;
    const int64_t pairs = n_rest * p->n_head_kv;
    const int tiles = (max_len + ATT_TILE - 1) / ATT_TILE;
    int splits = 1, split_tiles = 0;
    if (c->invariant) {
        /* batch invariance: a token's range is cut into splits of ATT_INV_TILES tiles whatever
         * else is in the batch, and always goes through the partials and the combine (blocks
         * past a token's own splits find an empty range and write an empty partial) */
        split_tiles = ATT_INV_TILES;
        while ((tiles + split_tiles - 1) / split_tiles > ATT_MAX_SPLITS) split_tiles *= 2; /* > 16384 positions */
        splits = (tiles + split_tiles - 1) / split_tiles;
        if (splits < 1) splits = 1;
    } else if (pairs < (int64_t)c->attn_split_sm * c->n_sm && tiles > 1) {
        int64_t want = ((int64_t)c->attn_split_sm * c->n_sm + pairs - 1) / pairs, cap = tiles;
        if (want > cap) want = cap;
        if (want > ATT_MAX_SPLITS) want = ATT_MAX_SPLITS;
        splits = (int)(want < 1 ? 1 : want);
    }
    attn_args a;
    a.q = (const float *)q->data;
    a.ldq = (int64_t)(q->nb[1] / 4);
    a.out = (float *)out->data;
    a.ldo = (int64_t)(out->nb[1] / 4);
    a.kpool = (const uint8_t *)kv->k[il];
    a.vpool = (const uint8_t *)kv->v[il];
    a.row_bytes = kv->row_bytes;
    a.block_size = bs;
    a.n_head = p->n_head;
    a.n_head_kv = p->n_head_kv;
    a.hd = hd;
    a.scale = p->scale;
    a.softcap = p->softcap;
    a.toks = dtoks;
    a.tables = dtabs;
    a.splits = splits;
    a.split_tiles = split_tiles;
    a.part_acc = a.part_ml = NULL;
    a.qx = NULL;
    a.dx = NULL;
    a.xb = NULL;
    if (splits > 1 || c->invariant) {
        const size_t parts = (size_t)n_rest * (size_t)p->n_head * (size_t)splits;
        OB_TRY(cuda_scratch(c, &c->attn_scratch, &c->attn_scratch_bytes, parts * ((size_t)hd + 2) * sizeof(float)));
        a.part_acc = (float *)c->attn_scratch;
        a.part_ml = a.part_acc + parts * (size_t)hd;
    }
    const size_t smem = sizeof(float) * ((size_t)G * hd * 2 + (size_t)ATT_TILE * (hd + 1) + (size_t)ATT_TILE * hd +
                                         (size_t)G * ATT_TILE + 3 * (size_t)G + ATT_TILE);
    if (smem > c->smem_optin)
        return ob_cuda_err(OB_ERR_UNSUPPORTED, "attention: %d query heads per KV head of dimension %d need %zu bytes of "
                           "shared memory (the device has %zu)", G, hd, smem, c->smem_optin);
    dim3 grid((unsigned)n_rest, (unsigned)p->n_head_kv, (unsigned)splits);
    a.max_bias = p->max_alibi_bias;
    a.hsplit = 1;
    /* the vector kernel: F16/Q8_0 cache, head dimension 64/128/256, up to 8 query heads per KV head */
    const int epl = hd / OB_WARP;
    const bool vec = c->attn_vec && kti != 0 && hd % OB_WARP == 0 && (epl == 2 || epl == 4 || epl == 8) && G <= 8;
    /* its tiled form where a block's range is long enough to keep its warps busy: a warp takes
     * 32 positions at a time, so a range of one tile (a single short sequence) leaves three
     * warps idle, where the per-position form spreads it over all four (OB_CUDA_ATTN_VT_MIN) */
    const int per_split = (splits > 0 ? (tiles + splits - 1) / splits : tiles) * ATT_TILE;
    const bool vt = c->attn_vt && (split_tiles > 0 ? split_tiles * ATT_TILE : per_split) >= c->attn_vt_min;
    /* a decode batch (every token here, none in the tensor-core tiles): the output's q8 copy
     * for the output projection is written by whichever kernel writes the output (the vector
     * kernel or the combine), so the product does not round it in a launch of its own */
    /* ... or its bf16 copy, when the products of this batch size run on kept bf16 copies of the
     * weights (cuda_b16_wanted), for the same reason: one conversion launch fewer a layer */
    if (c->attn_q8 && n_tiles == 0 && hd % OB_WARP == 0 && (vec || a.part_acc) &&
        out->ne[0] == (int64_t)p->n_head * hd) {
        if (cuda_b16_wanted(c, n)) {
            void *xb;
            OB_TRY(cuda_b16_target(c, n, out->ne[0], &xb));
            a.xb = (uint16_t *)xb;
        } else if (n <= c->mmv_max) {
            OB_TRY(cuda_q8_target(c, n, out->ne[0], &a.qx, &a.dx));
        }
    }
    if (vec) {
        /* few blocks (decode of one or a few sequences at short context: 4 KV heads make 4
         * blocks): the query heads of a KV head go to separate blocks, which read the same K/V
         * rows (from L2) but each sum fewer heads a position. Not in batch-invariant mode,
         * where the grid must not depend on the batch (it would not change a head's sums, but
         * the rule stays simple). */
        int hs = 1;
        const int64_t blocks = n_rest * (int64_t)p->n_head_kv * splits;
        while (!c->invariant && c->attn_hsplit && G % (2 * hs) == 0 && blocks * 2 * hs <= 2 * (int64_t)c->n_sm) hs *= 2;
        a.hsplit = hs;
        grid.y = (unsigned)(p->n_head_kv * hs);
        const int Gb = G / hs;
        const int GT = Gb <= 1 ? 1 : Gb <= 2 ? 2 : Gb <= 4 ? 4 : 8;
        const size_t vsmem = sizeof(float) * ((size_t)2 * ATT_VEC_WARPS * GT + (size_t)ATT_VEC_WARPS * GT * hd);
        /* the tiled kernel's shared memory: query heads, probabilities, then the same merge area */
        const size_t tsmem = vsmem + sizeof(float) * ((size_t)GT * hd + (size_t)ATT_VEC_WARPS * OB_WARP * GT);
#define OB_VEC(KT, E, GTV) \
    if (kti == (KT == OB_TYPE_F16 ? 1 : 2) && epl == E && GT == GTV) { \
        cuda_pdl_next(c); \
        if (vt) \
            OB_TRY(cuda_launch(c, attention_vt_kernel<KT, E, GTV>, grid, ATT_VEC_WARPS * OB_WARP, tsmem, a)); \
        else \
            OB_TRY(cuda_launch(c, attention_vec_kernel<KT, E, GTV>, grid, ATT_VEC_WARPS * OB_WARP, vsmem, a)); \
    }
#define OB_VEC_G(KT, E) OB_VEC(KT, E, 1) OB_VEC(KT, E, 2) OB_VEC(KT, E, 4) OB_VEC(KT, E, 8)
        OB_VEC_G(OB_TYPE_F16, 2) OB_VEC_G(OB_TYPE_F16, 4) OB_VEC_G(OB_TYPE_F16, 8)
        OB_VEC_G(OB_TYPE_Q8_0, 2) OB_VEC_G(OB_TYPE_Q8_0, 4) OB_VEC_G(OB_TYPE_Q8_0, 8)
#undef OB_VEC_G
#undef OB_VEC
    } else {
    switch (kti) {
#define OB_ATT_LAUNCH(KT)                                                                                 \
    if (smem > 48 * 1024 && smem > c->attn_smem_set[kti]) {                                              \
        OB_CU(cudaFuncSetAttribute(attention_kernel<KT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)); \
        c->attn_smem_set[kti] = smem;                                                                     \
    }                                                                                                     \
    OB_TRY(cuda_launch(c, attention_kernel<KT>, grid, ATT_THREADS, smem, a));
    case 0: OB_ATT_LAUNCH(OB_TYPE_F32) break;
    case 1: OB_ATT_LAUNCH(OB_TYPE_F16) break;
    default: OB_ATT_LAUNCH(OB_TYPE_Q8_0) break;
#undef OB_ATT_LAUNCH
    }
    }
    if (a.part_acc) {
        const int threads = hd < 128 ? ((hd + 31) / 32) * 32 : 128;
        cuda_pdl_next(c);
        OB_TRY(cuda_launch(c, attention_combine_kernel, (unsigned)(n_rest * p->n_head), threads, 0,
            a.part_acc, a.part_ml, a.toks, splits, p->n_head, hd, a.out, a.ldo, a.qx, a.dx, a.xb));
    }
    if (a.qx) cuda_q8_made(c, out->data, n, out->ne[0]);
    if (a.xb) cuda_b16_made(c, out->data, n, out->ne[0], a.ldo);
    return 0;
}

/* ---- kv_write ---- */

template <int KT>
__global__ void kv_write_kernel(const float *__restrict__ k, int64_t ldk, const float *__restrict__ v, int64_t ldv,
                                uint8_t *kpool, uint8_t *vpool, size_t row_bytes, const int32_t *__restrict__ slots,
                                int64_t kv_dim) {
    ob_pdl_wait(); /* launched early in a graph (pdl_next): nothing is read or written before */
    const int64_t i = blockIdx.y;
    const float *src = blockIdx.z == 0 ? k + i * ldk : v + i * ldv;
    uint8_t *dst = (blockIdx.z == 0 ? kpool : vpool) + (size_t)slots[i] * row_bytes;
    if (KT == OB_TYPE_Q8_0) {
        /* one warp per 32-element block */
        const int64_t blk = (int64_t)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP;
        const int lane = threadIdx.x % OB_WARP;
        if (blk >= kv_dim / 32) return;
        const float x = src[blk * 32 + lane];
        const float amax = warp_max(fabsf(x));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t *b = dst + blk * 34;
        b[2 + lane] = (uint8_t)(int8_t)roundf(x * id);
        if (lane == 0) *(uint16_t *)b = ob_f2h(d);
    } else {
        for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < kv_dim; e += (int64_t)gridDim.x * blockDim.x) {
            if (KT == OB_TYPE_F32) ((float *)dst)[e] = src[e];
            else ((uint16_t *)dst)[e] = ob_f2h(src[e]);
        }
    }
}

int cuda_op_kv_write(ob_backend *b, const ob_kv_store *kv, int il, const ob_tensor *k, const ob_tensor *v,
                     const int32_t *slots) {
    cuda_backend *c = cuda_of(b);
    OB_TRY(cuda_enter(c));
    const int kti = kv_type_index(kv->type);
    if (kti < 0) return ob_cuda_err(OB_ERR_UNSUPPORTED, "kv_write: KV type %s", cuda_type_name(kv->type));
    const int64_t n = k->ne[1];
    if (n <= 0) return 0;
    if (n > 65535) return ob_cuda_err(OB_ERR_UNSUPPORTED, "kv_write: %lld rows in one call", (long long)n);
    if (k->ne[0] != kv->kv_dim || v->ne[0] != kv->kv_dim || v->ne[1] != n)
        return ob_cuda_err(OB_ERR_INTERNAL, "kv_write: rows of %lld / %lld for kv_dim %lld", (long long)k->ne[0],
                           (long long)v->ne[0], (long long)kv->kv_dim);
    for (int64_t i = 0; i < n; i++)
        if (slots[i] < 0 || slots[i] >= kv->n_slots) return ob_cuda_err(OB_ERR_INTERNAL, "kv slot %d", slots[i]);
    const void *d_slots;
    OB_TRY(cuda_stage(c, slots, (size_t)n * sizeof(int32_t), &d_slots));
    const int64_t ldk = (int64_t)(k->nb[1] / 4), ldv = (int64_t)(v->nb[1] / 4);
    uint8_t *kp = (uint8_t *)kv->k[il], *vp = (uint8_t *)kv->v[il];
    const int32_t *ds = (const int32_t *)d_slots;
    if (kti != 2) { /* F32/F16 pools: the RoPE launch just before may write the rows (elementwise.cu) */
        const rope_kv_args rk = {kp, vp, kv->row_bytes, ds, (const float *)v->data, ldv, kti == 0 ? 1 : 2};
        const int joined = cuda_rope_kv_join(c, (const float *)k->data, ldk, (const float *)v->data, ldv, n, kv->kv_dim, rk);
        OB_TRY(joined);
        if (joined) return 0;
    }
    if (kti == 2) {
        const dim3 grid(ob_div_up((size_t)(kv->kv_dim / 32), 8), (unsigned)n, 2);
        cuda_pdl_next(c);
        OB_TRY(cuda_launch(c, kv_write_kernel<OB_TYPE_Q8_0>, grid, 256, 0, (const float *)k->data, ldk, (const float *)v->data,
                                                                   ldv, kp, vp, kv->row_bytes, ds, kv->kv_dim));
    } else {
        const dim3 grid(ob_div_up((size_t)kv->kv_dim, 256), (unsigned)n, 2);
        cuda_pdl_next(c);
        if (kti == 0)
            OB_TRY(cuda_launch(c, kv_write_kernel<OB_TYPE_F32>, grid, 256, 0, (const float *)k->data, ldk,
                                                                      (const float *)v->data, ldv, kp, vp,
                                                                      kv->row_bytes, ds, kv->kv_dim));
        else
            OB_TRY(cuda_launch(c, kv_write_kernel<OB_TYPE_F16>, grid, 256, 0, (const float *)k->data, ldk,
                                                                      (const float *)v->data, ldv, kp, vp,
                                                                      kv->row_bytes, ds, kv->kv_dim));
    }
    return 0;
}
