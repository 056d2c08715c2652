/*
 * cpu.h - what the processor can do, probed once.
 *
 * The CPU backend picks its kernel tier from ob_cpu_tier(): the best the
 * processor supports, or the tier named by OB_CPU=scalar|avx2|avx512 (an
 * override can only lower the tier; asking for more than the CPU has is an
 * error the caller reports).
 */
#ifndef OB_CORE_CPU_H
#define OB_CORE_CPU_H

#include <stdbool.h>

typedef struct ob_cpu_features {
    bool sse3, ssse3, avx, f16c, fma, avx2, bmi2;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx_vnni;
    bool amx_int8; /* AMX-TILE + AMX-INT8 with the OS saving tile state (XCR0 bits 17, 18); the
                      process still has to ask for the tile data (ob_cpu_amx_request) */
    bool amx_bf16; /* AMX-BF16 on top of that */
    int n_cpus;
    char brand[64];
} ob_cpu_features;

typedef enum ob_cpu_tier {
    OB_CPU_SCALAR = 0,
    OB_CPU_AVX2 = 1,   /* AVX2 + FMA + F16C */
    OB_CPU_AVX512 = 2, /* AVX-512 F/BW/VL/DQ on top of the AVX2 set */
} ob_cpu_tier;

/* Probed once (thread-safe); never NULL. */
const ob_cpu_features *ob_cpu_get_features(void);
/* Highest tier the hardware supports. */
ob_cpu_tier ob_cpu_max_tier(void);
/* The tier to use: OB_CPU if set, else ob_cpu_max_tier(). Writes the tier to
 * *out. Returns OB_ERR_INVALID_ARG for an unknown OB_CPU value and
 * OB_ERR_UNSUPPORTED when OB_CPU asks for more than the CPU has. */
int ob_cpu_tier_select(ob_cpu_tier *out);
const char *ob_cpu_tier_name(ob_cpu_tier t);
/* Parse "scalar", "avx2", "avx512"; -1 if unknown. */
int ob_cpu_tier_parse(const char *s);
/* Ask the kernel for permission to use AMX tile data in this process (Linux
 * arch_prctl ARCH_REQ_XCOMP_PERM; once, thread-safe). True when the CPU has
 * AMX-INT8 and the request was granted. */
bool ob_cpu_amx_request(void);
/* "AVX2 FMA F16C AVX512F ..." for logs and `1bit info`. */
void ob_cpu_features_string(char *buf, int size);

#endif
