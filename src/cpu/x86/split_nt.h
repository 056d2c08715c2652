/*
 * split_nt.h - what the x86 kernel files that take up to 8 activation rows a
 * call share (avx512.c, iq_avx2.c, iq_avx512.c; avx2.c takes up to 4 and
 * keeps its own): the token loop and the Q8_K activation row address.
 */
#ifndef OB_CPU_X86_SPLIT_NT_H
#define OB_CPU_X86_SPLIT_NT_H

/* Row b of token t's Q8_K activations (act: bytes, as: bytes a token). */
#define ACT_Q8K(act, as, t, b) ((const ob_act_q8K *)(const void *)((act) + (size_t)(t) * (as)) + (b))

/* Run body(NT, ...) on the nt tokens in groups of 8, 4, 2 and 1. */
#define SPLIT_NT(body, n, w, act, as, nt, out, os)                                              \
    do {                                                                                        \
        const char *a_ = (const char *)(act);                                                   \
        float *o_ = (out);                                                                      \
        int r_ = (nt);                                                                          \
        for (; r_ >= 8; r_ -= 8, a_ += 8 * (as), o_ += 8 * (os)) body(8, n, w, a_, as, o_, os); \
        if (r_ >= 4) {                                                                          \
            body(4, n, w, a_, as, o_, os);                                                      \
            r_ -= 4, a_ += 4 * (as), o_ += 4 * (os);                                            \
        }                                                                                       \
        if (r_ >= 2) {                                                                          \
            body(2, n, w, a_, as, o_, os);                                                      \
            r_ -= 2, a_ += 2 * (as), o_ += 2 * (os);                                            \
        }                                                                                       \
        if (r_) body(1, n, w, a_, as, o_, os);                                                  \
    } while (0)

#endif
