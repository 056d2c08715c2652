/*
 * cuda_loader.c - finding and loading lib1bit-cuda.so at run time, so the
 * `1bit` binary runs on machines without a GPU or driver and says clearly why
 * CUDA is unavailable when it is asked for.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/log.h"
#include "../core/status.h"
#include "backend.h"

static void host_log(int level, const char *fmt, ...) OB_PRINTF(2, 3);
static void host_log(int level, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ob_log((ob_log_level)level, "%s", buf);
}

static const ob_cuda_host g_host = {OB_CUDA_ABI_VERSION, ob_err, host_log};

int ob_backend_parse_device(const char *s, bool *cuda, int *device) {
    *cuda = false;
    *device = 0;
    if (!s || !*s || !strcmp(s, "cpu")) return 0;
    if (!strcmp(s, "auto")) return 1; /* the caller decides */
    if (!strncmp(s, "cuda", 4)) {
        *cuda = true;
        if (s[4] == '\0') return 0;
        if (s[4] == ':') {
            char *end;
            long d = strtol(s + 5, &end, 10);
            if (*end == '\0' && end != s + 5 && d >= 0 && d < 64) {
                *device = (int)d;
                return 0;
            }
        }
    }
    return ob_err(OB_ERR_INVALID_ARG, "device '%s': expected cpu, cuda, cuda:N or auto", s);
}

static void *try_open(const char *path, char *why, size_t why_size) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        size_t n = strlen(why);
        /* (the result is checked so gcc accepts that long paths may be cut) */
        if (n < why_size && snprintf(why + n, why_size - n, "\n  %s: %s", path, e ? e : "?") < 0) why[n] = '\0';
    }
    return h;
}

int ob_backend_cuda_create(int device, ob_backend **out) {
    *out = NULL;
    char why[2048] = "";
    void *h = NULL;
    const char *env = getenv("OB_CUDA_LIB");
    if (env && *env) h = try_open(env, why, sizeof why);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (!h && n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/lib1bit-cuda.so", exe);
            h = try_open(path, why, sizeof why);
            if (!h) {
                snprintf(path, sizeof path, "%s/../lib/lib1bit-cuda.so", exe);
                h = try_open(path, why, sizeof why);
            }
        }
    }
    if (!h) h = try_open("lib1bit-cuda.so", why, sizeof why);
    if (!h)
        return ob_err(OB_ERR_UNSUPPORTED,
                      "CUDA is not available: the plugin lib1bit-cuda.so could not be loaded (build with nvcc present, "
                      "or set OB_CUDA_LIB):%s",
                      why);
    ob_cuda_create_fn create = (ob_cuda_create_fn)dlsym(h, OB_CUDA_ENTRY);
    if (!create) {
        dlclose(h);
        return ob_err(OB_ERR_UNSUPPORTED, "lib1bit-cuda.so has no %s: wrong or old plugin", OB_CUDA_ENTRY);
    }
    int rc = create(&g_host, device, out);
    if (rc < 0) {
        /* keep the library loaded: its error message may point into it */
        return rc;
    }
    return 0;
}
