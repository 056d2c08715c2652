/*
 * w4.cuh - 4-bit weights laid out in tensor-core fragment order, for a
 * W4A16 product (bf16 activations, weights turned into bf16 in registers).
 *
 * Why (bench/RESULTS.md, CUDA session 9): at 16-64 tokens the int8 product
 * (mmq.cu) and the bf16 in-kernel decode (mmw.cu) read 4.4 GB a step of the
 * 8B Q4_K_M but are bound by shared-memory and L1 traffic, not by DRAM: a
 * warp's weight loads touch 16 rows an instruction, and the decoded values
 * go through shared memory before ldmatrix brings them back. The kept bf16
 * copies (matmul.cu) win today by reading 16 GB through cuBLAS. Here every
 * lane's share of a 16 x 16 weight tile (the 8 elements of its mma.sync
 * m16n8k16 A fragment) is one 32-bit word of nibbles, and the words of four
 * tiles along k sit side by side: a warp loads a 16-row x 64-element stage
 * with one coalesced 16-byte load a lane (512 contiguous bytes) and turns it
 * into A fragments in registers, with no shared memory for the weights.
 * This is the layout and its host-callable reference (checked on the host by
 * tests/test_cuda_dequant.cu); the kernel that reads it is the next step
 * (docs/cuda.md, "What is left").
 *
 * Layout of an nout x nin matrix (nin a multiple of 64), R = ceil(nout / 16)
 * row tiles, Q = nin / 64 stages of four 16-element k-tiles:
 *
 *   codes   uint32 [R][Q][32 lanes][4 k-tiles]
 *   scales  float2 [R][nin / 32][16 rows]   (s, m): value = fmaf(s, q, m)
 *
 * Lane l (g = l / 4, t = l % 4) holds, as the fragment's registers a0..a3
 * do, rows g (a0, a2) and g + 8 (a1, a3) at columns 2t, 2t + 1 (a0, a1)
 * and 2t + 8, 2t + 9 (a2, a3) of the tile. Nibble e of the word (bits 4e ..
 * 4e + 3) is register a_(e % 4)'s first element for e < 4 and its second
 * for e >= 4, so (word >> 4i) & 0x000F000F puts register a_i's two codes in
 * the two 16-bit halves. Codes are 0..15; a 32-element group of a row has
 * one (s, m): Q4_K's d x sc and -dmin x m, Q4_0's d and -8 d, Q4_1's d and
 * m. Rows past nout have codes 0 and scales (0, 0).
 */
#ifndef OB_CUDA_W4_CUH
#define OB_CUDA_W4_CUH

#include "quant.cuh"

OB_QFN size_t w4_code_words(int64_t nout, int64_t nin) { return (size_t)((nout + 15) / 16) * (size_t)(nin / 64) * 128; }
OB_QFN size_t w4_scale_pairs(int64_t nout, int64_t nin) { return (size_t)((nout + 15) / 16) * (size_t)(nin / 32) * 16; }

/* Row and column inside the 16 x 16 tile of lane l's nibble e. */
OB_QFN void w4_frag_pos(int l, int e, int *r, int *k) {
    const int g = l / 4, t = l % 4, i = e % 4, hi = e / 4;
    *r = g + 8 * (i & 1);
    *k = 2 * t + hi + 8 * (i >> 1);
}

/* The inverse: the lane and nibble holding row r, column k of a tile. */
OB_QFN void w4_frag_slot(int r, int k, int *l, int *e) {
    const int i = (r >= 8) + 2 * (k >= 8), kk = k % 8;
    *l = 4 * (r % 8) + kk / 2;
    *e = i + 4 * (kk % 2);
}

/* Code (0..15) of element (row, col) and (s, m) of 32-element group gi of a row, for each
 * type the layout takes (rows nb1 bytes apart): Q4_K (d x sc, -(dmin x m)), Q4_0 (d, -8 d:
 * fmaf(d, q, -8 d) is d (q - 8) rounded once, the reference's value), Q4_1 (d, m). */
template <int T> struct w4_src;

template <> struct w4_src<OB_TYPE_Q4_K> {
    OB_QFN uint32_t code(const uint8_t *w, size_t nb1, int64_t row, int64_t col) {
        const ob_block_q4_K *x =
            (const ob_block_q4_K *)(w + (size_t)row * nb1 + (size_t)(col / 256) * sizeof(ob_block_q4_K));
        const int s = (int)(col % 256) / 32;
        return (uint32_t)(x->qs[32 * (s / 2) + (int)(col % 32)] >> (4 * (s % 2))) & 15u;
    }
    OB_QFN float2 sm(const uint8_t *w, size_t nb1, int64_t row, int64_t gi) {
        const uint8_t *b = w + (size_t)row * nb1 + (size_t)(gi / 8) * sizeof(ob_block_q4_K);
        const ob_block_q4_K *x = (const ob_block_q4_K *)b;
        const float d = ob_h2f((uint16_t)ld_u16(b)), dmin = ob_h2f((uint16_t)ld_u16(b + 2));
        int sc, mn;
        k4_scale_min(x->scales, (int)(gi % 8), &sc, &mn);
        float2 r;
        r.x = d * (float)sc;
        r.y = -(dmin * (float)mn);
        return r;
    }
};

/* Q4_0 and Q4_1: block gi holds elements 32 gi.., low nibbles the first 16, high the rest. */
OB_QFN uint32_t w4_q4x_code(const uint8_t *blk, int64_t col, size_t head) {
    const int j = (int)(col % 32);
    return (uint32_t)(blk[head + (size_t)(j % 16)] >> (4 * (j / 16))) & 15u;
}

template <> struct w4_src<OB_TYPE_Q4_0> {
    OB_QFN uint32_t code(const uint8_t *w, size_t nb1, int64_t row, int64_t col) {
        return w4_q4x_code(w + (size_t)row * nb1 + (size_t)(col / 32) * sizeof(ob_block_q4_0), col, 2);
    }
    OB_QFN float2 sm(const uint8_t *w, size_t nb1, int64_t row, int64_t gi) {
        const float d = ob_h2f((uint16_t)ld_u16(w + (size_t)row * nb1 + (size_t)gi * sizeof(ob_block_q4_0)));
        float2 r;
        r.x = d;
        r.y = -8.0f * d;
        return r;
    }
};

template <> struct w4_src<OB_TYPE_Q4_1> {
    OB_QFN uint32_t code(const uint8_t *w, size_t nb1, int64_t row, int64_t col) {
        return w4_q4x_code(w + (size_t)row * nb1 + (size_t)(col / 32) * sizeof(ob_block_q4_1), col, 4);
    }
    OB_QFN float2 sm(const uint8_t *w, size_t nb1, int64_t row, int64_t gi) {
        const uint8_t *b = w + (size_t)row * nb1 + (size_t)gi * sizeof(ob_block_q4_1);
        float2 r;
        r.x = ob_h2f((uint16_t)ld_u16(b));
        r.y = ob_h2f((uint16_t)ld_u16(b + 2));
        return r;
    }
};

/* Word idx of the codes (w4_code_words of them) of a matrix of type T, nin a multiple of 64. */
template <int T> OB_QFN uint32_t w4_word(const uint8_t *w, size_t nb1, int64_t nout, int64_t nin, size_t idx) {
    const int64_t Q = nin / 64;
    const int kt = (int)(idx % 4), l = (int)((idx / 4) % 32);
    const int64_t q = (int64_t)((idx / 128) % (size_t)Q), rt = (int64_t)(idx / (128 * (size_t)Q));
    uint32_t word = 0;
    for (int e = 0; e < 8; e++) {
        int r, k;
        w4_frag_pos(l, e, &r, &k);
        const int64_t row = rt * 16 + r;
        if (row < nout) word |= w4_src<T>::code(w, nb1, row, 64 * q + 16 * kt + k) << (4 * e);
    }
    return word;
}

/* Scale pair idx (w4_scale_pairs of them): (0, 0) for the padding rows. */
template <int T> OB_QFN float2 w4_pair(const uint8_t *w, size_t nb1, int64_t nout, int64_t nin, size_t idx) {
    const int64_t G = nin / 32, rr = (int64_t)(idx % 16), gi = (int64_t)((idx / 16) % (size_t)G);
    const int64_t row = (int64_t)(idx / (16 * (size_t)G)) * 16 + rr;
    float2 r;
    r.x = r.y = 0.0f;
    if (row < nout) r = w4_src<T>::sm(w, nb1, row, gi);
    return r;
}

/* Row tile rt of a matrix of type T into the layout (the host's loop; a device kernel runs
 * w4_word and w4_pair a thread each). */
template <int T>
OB_QFN void w4_repack_tile(const uint8_t *w, size_t nb1, int64_t nout, int64_t nin, int64_t rt, uint32_t *codes,
                           float2 *scales) {
    const size_t nw = (size_t)(nin / 64) * 128, np = (size_t)(nin / 32) * 16;
    for (size_t i = (size_t)rt * nw; i < (size_t)(rt + 1) * nw; i++) codes[i] = w4_word<T>(w, nb1, nout, nin, i);
    for (size_t i = (size_t)rt * np; i < (size_t)(rt + 1) * np; i++) scales[i] = w4_pair<T>(w, nb1, nout, nin, i);
}

/* Element (r, k) as the layout gives it: fmaf(s, code, m). */
OB_QFN float w4_value(const uint32_t *codes, const float2 *scales, int64_t nin, int64_t r, int64_t k) {
    const int64_t rt = r / 16, Q = nin / 64, G = nin / 32;
    int l, e;
    w4_frag_slot((int)(r % 16), (int)(k % 16), &l, &e);
    const uint32_t word = codes[(((size_t)rt * (size_t)Q + (size_t)(k / 64)) * 32 + (size_t)l) * 4 + (size_t)((k % 64) / 16)];
    const float2 sm = scales[((size_t)rt * (size_t)G + (size_t)(k / 32)) * 16 + (size_t)(r % 16)];
    return fmaf(sm.x, (float)((word >> (4 * e)) & 15u), sm.y);
}

#endif
