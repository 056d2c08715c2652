/*
 * dispatch.c - builds each tier's kernel table once and picks the one to
 * use: the best tier the CPU has, or the lower one OB_CPU names. A tier's
 * table starts as a copy of the tier below it and the ISA file overwrites
 * what it implements, so a missing kernel falls back to the next tier down
 * and, in the end, to the scalar reference.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/status.h"
#include "kernels.h"

static ob_cpu_kernels g_tables[3];
static int g_n_tables; /* tiers built: 1 + the highest tier index supported */
static pthread_once_t g_build_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    ob_cpu_fill_scalar(&g_tables[OB_CPU_SCALAR]);
    g_n_tables = 1;
#if defined(__x86_64__)
    ob_cpu_tier max = ob_cpu_max_tier();
    if (max >= OB_CPU_AVX2) {
        g_tables[OB_CPU_AVX2] = g_tables[OB_CPU_SCALAR];
        ob_cpu_fill_avx2(&g_tables[OB_CPU_AVX2]);
        ob_cpu_fill_iq_avx2(&g_tables[OB_CPU_AVX2]);
        g_n_tables = 2;
    }
    if (max >= OB_CPU_AVX512) {
        g_tables[OB_CPU_AVX512] = g_tables[OB_CPU_AVX2];
        ob_cpu_fill_avx512(&g_tables[OB_CPU_AVX512], ob_cpu_get_features());
        ob_cpu_fill_iq_avx512(&g_tables[OB_CPU_AVX512], ob_cpu_get_features());
        /* AMX tiles for prefill: OB_CPU_AMX=0 keeps them off (to measure what they give, and
         * for tools that do not know the instructions, such as valgrind). They read the VNNI
         * panels and hand short batches to the VNNI kernels, so only on top of those. */
        const char *amx = getenv("OB_CPU_AMX");
        if (!(amx && !strcmp(amx, "0")) && ob_cpu_get_features()->avx512vnni && ob_cpu_amx_request()) {
            ob_cpu_fill_amx(&g_tables[OB_CPU_AVX512], ob_cpu_get_features()->amx_bf16);
            g_tables[OB_CPU_AVX512].name = ob_cpu_get_features()->avx512bf16 ? "avx512-vnni-bf16-amx" : "avx512-vnni-amx";
        }
        g_n_tables = 3;
    }
#endif
}

const ob_cpu_kernels *ob_cpu_kernels_for(ob_cpu_tier tier) {
    pthread_once(&g_build_once, build_tables);
    if ((int)tier < 0 || (int)tier >= g_n_tables) return NULL;
    return &g_tables[tier];
}

static const ob_cpu_kernels *g_selected;
static pthread_once_t g_select_once = PTHREAD_ONCE_INIT;

static void select_tier(void) {
    ob_cpu_tier t;
    if (ob_cpu_tier_select(&t) < 0) {
        OB_LOGW("%s; using the best tier this CPU has", ob_last_error());
        t = ob_cpu_max_tier();
    }
    g_selected = ob_cpu_kernels_for(t);
    if (!g_selected) g_selected = ob_cpu_kernels_for(OB_CPU_SCALAR);
    OB_LOGI("cpu kernels: %s", g_selected->name);
}

const ob_cpu_kernels *ob_cpu_kernels_get(void) {
    pthread_once(&g_select_once, select_tier);
    return g_selected;
}
