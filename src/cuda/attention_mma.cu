/*
 * attention_mma.cu - prompt attention on tensor cores (flash-attention
 * style), for runs of consecutive tokens of one sequence over an F16 cache.
 *
 * The vector kernels (attention.cu) spend one warp-wide dot product per
 * (query, position) pair: a 512-token prompt of an 8B model takes ~0.5 ms a
 * layer there. Here a block takes a tile of up to 64 consecutive query
 * tokens of one run and one query head; each of its 4 warps owns 16 query
 * rows. Positions go by in tiles of 64: the tile's K and V rows (this KV
 * head's part of each row) are copied into shared memory with 16-byte
 * asynchronous copies (rows looked up through the block table, positions
 * past the tile's last query zero-filled), then per warp
 *
 *   S = Q K^T     m16n8k16 f16 products with f32 sums; Q (times the softmax
 *                 scale) lives in registers as A fragments for the whole loop
 *   mask, soft-cap, ALiBi; online softmax in registers (running max m and
 *                 sum l per row, exp2 with the log2(e) factor folded in)
 *   O += P V      P rounded to f16 straight from S's accumulators (their
 *                 layout is the A fragment's), V's fragments by ldmatrix.trans
 *
 * and at the end O / l goes to the output rows in float32. A warp skips the
 * products of a position tile none of its rows can see (the causal upper
 * triangle, or before a sliding window), but still helps load it.
 *
 * Rounding: Q (scaled) and P are rounded to f16 (11 significant bits) for
 * the products; K and V are the cache's f16 values; every sum is f32. The
 * vector kernels keep Q and P in f32, so the two paths differ by that
 * rounding (NMSE ~1e-7 on random data; tests/test_cuda.c bounds it).
 * Batch-invariant mode never comes here: a token's result would depend on
 * whether its run is long enough for this path.
 *
 * mma.sync, ldmatrix and cp.async are NVIDIA's (sm_80+); a HIP build
 * compiles stubs and the host never chooses this path there
 * (cuda_attn_mma_usable).
 */
#include <math.h>

#include "attention.cuh"
#include "cp_async.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIP_PLATFORM_AMD__)
#define OB_HAVE_HMMA 1
#endif

#define FA_BR 64      /* query rows a block (4 warps x 16) */
#define FA_BC 64      /* positions a tile */
#define FA_THREADS 128
#define FA_PAD 8      /* halves of padding a shared row: fragment loads and ldmatrix hit 32 banks */

typedef struct fa_args {
    const float *q;
    int64_t ldq;
    float *out;
    int64_t ldo;
    const uint8_t *kpool, *vpool;
    size_t row_bytes;
    int block_size, n_head, n_head_kv;
    float scale, softcap, max_bias;
    const attn_tok *toks;
    const int32_t *tables;
    const fa_tile *tiles;
} fa_args;

static __device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    return (uint32_t)ob_f2h(lo) | ((uint32_t)ob_f2h(hi) << 16);
}

static __device__ __forceinline__ void hmma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifdef OB_HAVE_HMMA
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)a, (void)b0, (void)b1;
    c[0] = c[1] = c[2] = c[3] = 0.0f;
#endif
}

/* Four 8x8 b16 matrices, transposed: lane L names row L % 8 of matrix L / 8. */
static __device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const uint16_t *p) {
#ifdef OB_HAVE_HMMA
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
#else
    (void)p;
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/* Rows key0 .. key0 + FA_BC - 1 of one pool (this head's D halves of each)
 * into sh[FA_BC][D + FA_PAD]; rows past `last` are zero-filled. */
template <int D>
static __device__ __forceinline__ void fa_load(uint16_t *sh, const uint8_t *pool, const fa_args &a,
                                               const int32_t *table, int hk, int key0, int last) {
    constexpr int CH = D * 2 / 16; /* 16-byte chunks a row */
    for (int i = threadIdx.x; i < FA_BC * CH; i += FA_THREADS) {
        const int r = i / CH, ch = i % CH, p = key0 + r;
        uint16_t *dst = sh + r * (D + FA_PAD) + ch * 8;
        if (p <= last) {
            const size_t slot = (size_t)table[p / a.block_size] * a.block_size + p % a.block_size;
            cp_async<16>(dst, pool + slot * a.row_bytes + (size_t)hk * D * 2 + ch * 16);
        } else {
            *(uint4 *)dst = make_uint4(0, 0, 0, 0);
        }
    }
}

template <int D> __global__ void __launch_bounds__(FA_THREADS) attention_mma_kernel(fa_args a) {
    extern __shared__ __align__(16) uint16_t fa_smem[];
    uint16_t *Ks = fa_smem, *Vs = fa_smem + FA_BC * (D + FA_PAD);
    const fa_tile tile = a.tiles[blockIdx.x];
    const int h = blockIdx.y, hk = h / (a.n_head / a.n_head_kv);
    const int warp = threadIdx.x / OB_WARP, lane = threadIdx.x % OB_WARP, g = lane / 4, tq = lane % 4;
    const int32_t *table = a.tables + a.toks[tile.t0].table_off;
    const float LOG2E = 1.4426950408889634f;
    const float slope = a.max_bias > 0.0f ? attn_alibi_slope(a.n_head, h, a.max_bias) : 0.0f;

    /* this thread's two rows: r = 16 warp + g and r + 8 */
    int pos[2], kst[2], row[2];
    int wmin = INT_MAX, wmax = -1;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = warp * 16 + g + 8 * i;
        if (r < tile.cnt) {
            const attn_tok tk = a.toks[tile.t0 + r];
            pos[i] = tk.pos, kst[i] = tk.kv_start, row[i] = tk.row;
        } else {
            pos[i] = -1, kst[i] = INT_MAX, row[i] = -1; /* sees nothing, writes nothing */
        }
    }
    /* the warp's reach: the union of its rows' windows */
    {
        int lo = min(kst[0], kst[1]), hi = max(pos[0], pos[1]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            lo = min(lo, __shfl_xor_sync(OB_FULL_MASK, lo, o));
            hi = max(hi, __shfl_xor_sync(OB_FULL_MASK, hi, o));
        }
        wmin = lo, wmax = hi;
    }

    /* Q fragments, scaled: k-step kk covers dimensions 16 kk .. 16 kk + 15 */
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float *qr = row[i] >= 0 ? a.q + (int64_t)row[i] * a.ldq + (int64_t)h * D : NULL;
            const int d0 = kk * 16 + 2 * tq;
            float x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
            if (qr) x0 = qr[d0] * a.scale, x1 = qr[d0 + 1] * a.scale, x2 = qr[d0 + 8] * a.scale, x3 = qr[d0 + 9] * a.scale;
            qf[kk][i] = pack_h2(x0, x1);     /* rows g / g + 8, columns 2 tq, 2 tq + 1 */
            qf[kk][2 + i] = pack_h2(x2, x3); /* the same rows, columns + 8 */
        }
    }

    float o[D / 8][4];
#pragma unroll
    for (int nt = 0; nt < D / 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int key0 = tile.kv_lo; key0 <= tile.kv_hi; key0 += FA_BC) {
        __syncthreads(); /* the previous tile's readers are done */
        fa_load<D>(Ks, a.kpool, a, table, hk, key0, tile.kv_hi);
        cp_async_commit();
        fa_load<D>(Vs, a.vpool, a, table, hk, key0, tile.kv_hi);
        cp_async_commit();
        cp_async_wait<1>(); /* K has landed (this thread's part) */
        __syncthreads();
        const bool active = key0 <= wmax && key0 + FA_BC - 1 >= wmin;

        float s[FA_BC / 8][4];
        if (active) {
#pragma unroll
            for (int j = 0; j < FA_BC / 8; j++) {
                s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
                const uint16_t *kr = Ks + (j * 8 + g) * (D + FA_PAD) + 2 * tq;
#pragma unroll
                for (int kk = 0; kk < D / 16; kk++) {
                    const uint32_t b0 = *(const uint32_t *)(kr + kk * 16);
                    const uint32_t b1 = *(const uint32_t *)(kr + kk * 16 + 8);
                    hmma(s[j], qf[kk], b0, b1);
                }
            }
            /* mask, soft-cap, ALiBi; the tile's row maxima */
            float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int j = 0; j < FA_BC / 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = e / 2, p = key0 + j * 8 + 2 * tq + (e & 1);
                    float v = s[j][e];
                    if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
                    v += slope * (float)(p - pos[i]);
                    v = p >= kst[i] && p <= pos[i] ? v * LOG2E : -INFINITY;
                    s[j][e] = v;
                    tmax[i] = fmaxf(tmax[i], v);
                }
#pragma unroll
            for (int i = 0; i < 2; i++) {
                tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(OB_FULL_MASK, tmax[i], 1));
                tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(OB_FULL_MASK, tmax[i], 2));
                const float mn = fmaxf(m[i], tmax[i]);
                const float base = mn == -INFINITY ? 0.0f : mn; /* no position seen yet: all p are 0 */
                const float cr = exp2f(m[i] - base);
                m[i] = mn;
                l[i] *= cr;
#pragma unroll
                for (int nt = 0; nt < D / 8; nt++) o[nt][2 * i] *= cr, o[nt][2 * i + 1] *= cr;
#pragma unroll
                for (int j = 0; j < FA_BC / 8; j++) {
                    const float p0 = exp2f(s[j][2 * i] - base), p1 = exp2f(s[j][2 * i + 1] - base);
                    s[j][2 * i] = p0, s[j][2 * i + 1] = p1;
                    l[i] += p0 + p1;
                }
            }
        }
        cp_async_wait<0>();
        __syncthreads();
        if (active) {
#pragma unroll
            for (int kk = 0; kk < FA_BC / 16; kk++) {
                const uint32_t pa[4] = {pack_h2(s[2 * kk][0], s[2 * kk][1]), pack_h2(s[2 * kk][2], s[2 * kk][3]),
                                        pack_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                        pack_h2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
                /* matrices: (keys +0, dims +0), (keys +8, dims +0), (keys +0, dims +8), (keys +8, dims +8) */
                const int mi = lane / 8, key = kk * 16 + (mi & 1) * 8 + lane % 8;
#pragma unroll
                for (int nt = 0; nt < D / 8; nt += 2) {
                    uint32_t vb[4];
                    ldsm_x4_trans(vb, Vs + key * (D + FA_PAD) + nt * 8 + (mi >> 1) * 8);
                    hmma(o[nt], pa, vb[0], vb[1]);
                    hmma(o[nt + 1], pa, vb[2], vb[3]);
                }
            }
        }
    }

    /* the row sums are spread over the quad's lanes */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(OB_FULL_MASK, l[i], 1);
        l[i] += __shfl_xor_sync(OB_FULL_MASK, l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (row[i] < 0) continue;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        float *orow = a.out + (int64_t)row[i] * a.ldo + (int64_t)h * D + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < D / 8; nt++)
            *(float2 *)(orow + nt * 8) = make_float2(o[nt][2 * i] * inv, o[nt][2 * i + 1] * inv);
    }
}

bool cuda_attn_mma_usable(const cuda_backend *c, ob_type kv_type, int head_dim, size_t row_bytes) {
    return c->attn_mma && !c->invariant && kv_type == OB_TYPE_F16 && (head_dim == 64 || head_dim == 128) &&
           row_bytes % 16 == 0;
}

int cuda_attention_mma(cuda_backend *c, const ob_kv_store *kv, int il, const ob_tensor *q, const ob_attn_params *p,
                       ob_tensor *out, const attn_tok *toks, const int32_t *tables, const fa_tile *tiles,
                       int n_tiles) {
    fa_args a;
    a.q = (const float *)q->data;
    a.ldq = (int64_t)(q->nb[1] / 4);
    a.out = (float *)out->data;
    a.ldo = (int64_t)(out->nb[1] / 4);
    a.kpool = (const uint8_t *)kv->k[il];
    a.vpool = (const uint8_t *)kv->v[il];
    a.row_bytes = kv->row_bytes;
    a.block_size = kv->block_size;
    a.n_head = p->n_head;
    a.n_head_kv = p->n_head_kv;
    a.scale = p->scale;
    a.softcap = p->softcap;
    a.max_bias = p->max_alibi_bias;
    a.toks = toks;
    a.tables = tables;
    a.tiles = tiles;
    const dim3 grid((unsigned)n_tiles, (unsigned)p->n_head);
    if (p->head_dim == 64)
        return cuda_launch(c, attention_mma_kernel<64>, grid, FA_THREADS, 2 * FA_BC * (64 + FA_PAD) * 2, a);
    return cuda_launch(c, attention_mma_kernel<128>, grid, FA_THREADS, 2 * FA_BC * (128 + FA_PAD) * 2, a);
}
