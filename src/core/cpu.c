/*
 * cpu.c - x86 CPUID/XGETBV probe. On other architectures every flag is false
 * and the scalar tier is used.
 */
#include "cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "threadpool.h"

static ob_cpu_features g_feat;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void) {
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void probe(void) {
    unsigned int a, b, c, d;
    ob_cpu_features *f = &g_feat;
    f->n_cpus = ob_n_cpus();
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    f->sse3 = c & (1u << 0);
    f->ssse3 = c & (1u << 9);
    f->fma = c & (1u << 12);
    bool osxsave = c & (1u << 27);
    bool avx_hw = c & (1u << 28);
    f->f16c = c & (1u << 29);
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm_os = (xcr0 & 0x6) == 0x6;            /* XMM and YMM state */
    bool zmm_os = (xcr0 & 0xe6) == 0xe6;          /* plus opmask, ZMM_Hi256, Hi16_ZMM */
    f->avx = avx_hw && ymm_os;
    if (!f->avx) f->fma = f->f16c = false;
    unsigned int max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = f->avx && (b & (1u << 5));
        f->bmi2 = b & (1u << 8);
        if (zmm_os) {
            f->avx512f = b & (1u << 16);
            f->avx512dq = b & (1u << 17);
            f->avx512bw = b & (1u << 30);
            f->avx512vl = b & (1u << 31);
            f->avx512vnni = c & (1u << 11);
        }
        /* AMX-TILE (EDX 24) and AMX-INT8 (EDX 25), with XTILECFG and XTILEDATA in XCR0 */
        f->amx_int8 = (d & (1u << 24)) && (d & (1u << 25)) && (xcr0 & 0x60000) == 0x60000;
        f->amx_bf16 = f->amx_int8 && (d & (1u << 22));
        __cpuid_count(7, 1, a, b, c, d);
        f->avx_vnni = f->avx && (a & (1u << 4));
        f->avx512bf16 = zmm_os && (a & (1u << 5));
    }
    unsigned int ext = __get_cpuid_max(0x80000000, NULL);
    if (ext >= 0x80000004) {
        unsigned int *w = (unsigned int *)f->brand;
        for (unsigned int i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &w[i * 4], &w[i * 4 + 1], &w[i * 4 + 2], &w[i * 4 + 3]);
        f->brand[48] = '\0';
    }
}
#else
static void probe(void) { g_feat.n_cpus = ob_n_cpus(); }
#endif

const ob_cpu_features *ob_cpu_get_features(void) {
    pthread_once(&g_once, probe);
    return &g_feat;
}

ob_cpu_tier ob_cpu_max_tier(void) {
    const ob_cpu_features *f = ob_cpu_get_features();
    if (f->avx2 && f->fma && f->f16c) {
        if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq) return OB_CPU_AVX512;
        return OB_CPU_AVX2;
    }
    return OB_CPU_SCALAR;
}

const char *ob_cpu_tier_name(ob_cpu_tier t) {
    switch (t) {
    case OB_CPU_SCALAR: return "scalar";
    case OB_CPU_AVX2: return "avx2";
    case OB_CPU_AVX512: return "avx512";
    }
    return "?";
}

int ob_cpu_tier_parse(const char *s) {
    if (!s) return -1;
    if (strcmp(s, "scalar") == 0) return OB_CPU_SCALAR;
    if (strcmp(s, "avx2") == 0) return OB_CPU_AVX2;
    if (strcmp(s, "avx512") == 0) return OB_CPU_AVX512;
    return -1;
}

int ob_cpu_tier_select(ob_cpu_tier *out) {
    ob_cpu_tier max = ob_cpu_max_tier();
    *out = max;
    const char *env = getenv("OB_CPU");
    if (!env || !*env) return 0;
    int t = ob_cpu_tier_parse(env);
    if (t < 0) return ob_err(OB_ERR_INVALID_ARG, "OB_CPU=%s: expected scalar, avx2 or avx512", env);
    if (t > (int)max)
        return ob_err(OB_ERR_UNSUPPORTED, "OB_CPU=%s: this CPU supports at most %s", env, ob_cpu_tier_name(max));
    *out = (ob_cpu_tier)t;
    return 0;
}

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
static bool g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;
static void amx_request(void) {
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18): without it the
     * first tile load of a thread faults (SIGILL) */
    g_amx_ok = ob_cpu_get_features()->amx_int8 && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
bool ob_cpu_amx_request(void) {
    pthread_once(&g_amx_once, amx_request);
    return g_amx_ok;
}
#else
bool ob_cpu_amx_request(void) { return false; }
#endif

void ob_cpu_features_string(char *buf, int size) {
    const ob_cpu_features *f = ob_cpu_get_features();
    struct { bool on; const char *name; } flags[] = {
        {f->sse3, "SSE3"}, {f->ssse3, "SSSE3"}, {f->avx, "AVX"}, {f->f16c, "F16C"},
        {f->fma, "FMA"}, {f->avx2, "AVX2"}, {f->bmi2, "BMI2"}, {f->avx_vnni, "AVX_VNNI"},
        {f->avx512f, "AVX512F"}, {f->avx512bw, "AVX512BW"}, {f->avx512vl, "AVX512VL"},
        {f->avx512dq, "AVX512DQ"}, {f->avx512vnni, "AVX512_VNNI"}, {f->avx512bf16, "AVX512_BF16"},
        {f->amx_int8, "AMX_INT8"}, {f->amx_bf16, "AMX_BF16"},
    };
    int n = 0;
    if (size > 0) buf[0] = '\0';
    for (size_t i = 0; i < OB_ARRAY_LEN(flags); i++) {
        if (!flags[i].on) continue;
        int w = snprintf(buf + n, (size_t)(size - n), "%s%s", n ? " " : "", flags[i].name);
        if (w < 0 || w >= size - n) break;
        n += w;
    }
}
