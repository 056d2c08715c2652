/*
 * dump.c - `1bit dump FILE TENSOR [--text]`: one tensor, dequantized with the
 * reference routines, to stdout as little-endian float32 (or one number per
 * line with --text). Rows are converted one at a time, so memory stays small
 * whatever the tensor's size.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../gguf/gguf.h"
#include "cli.h"

/* Convert one row of `t` (row index r over ne1*ne2*ne3) to float. */
static int row_to_float(const ob_gguf_tensor *t, int64_t r, float *dst) {
    const ob_type_traits *tr = ob_type_get((int)t->type);
    size_t rs = ob_row_size(t->type, t->ne[0]);
    const unsigned char *src = (const unsigned char *)t->data + (size_t)r * rs;
    int64_t n = t->ne[0];
    switch (t->type) {
    case OB_TYPE_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case OB_TYPE_F64:
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + i * 8, 8);
            dst[i] = (float)d;
        }
        return 0;
    case OB_TYPE_I8:
        for (int64_t i = 0; i < n; i++) dst[i] = (float)(int8_t)src[i];
        return 0;
    case OB_TYPE_I16:
        for (int64_t i = 0; i < n; i++) {
            int16_t x;
            memcpy(&x, src + i * 2, 2);
            dst[i] = (float)x;
        }
        return 0;
    case OB_TYPE_I32:
        for (int64_t i = 0; i < n; i++) {
            int32_t x;
            memcpy(&x, src + i * 4, 4);
            dst[i] = (float)x;
        }
        return 0;
    case OB_TYPE_I64:
        for (int64_t i = 0; i < n; i++) {
            int64_t x;
            memcpy(&x, src + i * 8, 8);
            dst[i] = (float)x;
        }
        return 0;
    default:
        if (!tr || !tr->to_float)
            return ob_err(OB_ERR_UNSUPPORTED, "tensor '%s': no dequantization for type %s", t->name,
                          ob_type_name(t->type));
        tr->to_float(src, dst, n);
        return 0;
    }
}

int ob_cmd_dump(int argc, char **argv) {
    const char *path = NULL, *name = NULL;
    bool text = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--text"))
            text = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: 1bit dump FILE.gguf TENSOR [--text]\n"
                   "  writes the tensor, dequantized, to stdout: raw little-endian float32,\n"
                   "  or with --text one number per line (%%.9g, enough to round-trip)\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1])
            return ob_cli_fail(0, "dump: unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else if (!name)
            name = argv[i];
        else
            return ob_cli_fail(0, "dump: unexpected argument '%s'", argv[i]);
    }
    if (!path || !name) return ob_cli_fail(0, "dump: usage: 1bit dump FILE.gguf TENSOR [--text]");
    ob_gguf *g;
    int rc = ob_gguf_open(path, &g);
    if (rc < 0) return ob_cli_fail(rc, "dump");
    const ob_gguf_tensor *t = ob_gguf_find_tensor(g, name);
    if (!t) {
        ob_gguf_free(g);
        return ob_cli_fail(0, "dump: no tensor named '%s' in %s (see `1bit info %s`)", name, path, path);
    }
    float *row = ob_malloc((size_t)(t->ne[0] ? t->ne[0] : 1) * sizeof(float));
    if (!row) {
        ob_gguf_free(g);
        return ob_cli_fail(OB_ERR_OOM, "dump: row of %" PRId64 " floats", t->ne[0]);
    }
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    int ret = 0;
    for (int64_t r = 0; r < rows && ret == 0; r++) {
        rc = row_to_float(t, r, row);
        if (rc < 0) {
            ret = ob_cli_fail(rc, "dump");
            break;
        }
        if (text) {
            for (int64_t i = 0; i < t->ne[0]; i++) printf("%.9g\n", (double)row[i]);
        } else if (fwrite(row, sizeof(float), (size_t)t->ne[0], stdout) != (size_t)t->ne[0]) {
            ret = ob_cli_fail(0, "dump: write to stdout failed");
        }
    }
    if (fflush(stdout) != 0 && ret == 0) ret = ob_cli_fail(0, "dump: write to stdout failed");
    ob_free(row);
    ob_gguf_free(g);
    return ret;
}
