/*
 * quantize.c - `1bit quantize [options] IN.gguf OUT.gguf TYPE`: a GGUF to a
 * smaller type or mix. The work is in src/quant/quantize.c; this file parses
 * flags, loads the imatrix and reports.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../quant/quantize.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: 1bit quantize [options] IN.gguf OUT.gguf TYPE\n"
            "       1bit quantize --hadamard [options] IN.gguf OUT.gguf [Q4_0]\n"
            "options:\n"
            "  --imatrix FILE            importance matrix (from `1bit imatrix` or llama-imatrix)\n"
            "  --tensor-type PAT=TYPE    tensors whose name matches the regex PAT get TYPE (repeatable;\n"
            "                            the last match wins), e.g. --tensor-type 'attn_v=q8_0'\n"
            "  --leave-output            keep output.weight as it is\n"
            "  --output-tensor-type T    type for output.weight\n"
            "  --token-embedding-type T  type for token_embd.weight\n"
            "  --pure                    no recipe: every matrix gets the mix's base type\n"
            "  --allow-requantize        accept sources other than F32/F16/BF16/Q8_0\n"
            "  --hadamard                rotate the attention/FFN inputs (randomized 32-point Hadamard)\n"
            "                            and quantize them to Q4_0; the engine rotates activations to match\n"
            "  -t, --threads N           threads (default: all cores)\n"
            "  -v                        one line per tensor\n"
            "types:\n");
    int n;
    const ob_ftype_info *l = ob_ftype_list(&n);
    for (int i = 0; i < n; i++) fprintf(f, "  %-10s %s\n", l[i].name, l[i].desc);
}

static int parse_type(const char *s) {
    int t = ob_type_from_name(s);
    return t >= 0 && ob_type_get(t) && ob_type_get(t)->from_float_ref ? t : -1;
}

int ob_cmd_quantize(int argc, char **argv) {
    ob_quantize_params p;
    ob_quantize_params_init(&p);
    const char *pos[3] = {0};
    int n_pos = 0;
    const char *imatrix_path = NULL;
    ob_tensor_override *ov = ob_calloc((size_t)(argc ? argc : 1), sizeof *ov);
    if (!ov) return ob_cli_fail(0, "quantize: out of memory");
    int rc = 0;
#define FAIL(...)                              \
    do {                                       \
        rc = ob_cli_fail(0, __VA_ARGS__);      \
        goto done;                             \
    } while (0)
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            goto done;
        } else if (!strcmp(a, "--leave-output")) {
            p.leave_output = true;
        } else if (!strcmp(a, "--pure")) {
            p.pure = true;
        } else if (!strcmp(a, "--allow-requantize")) {
            p.allow_requantize = true;
        } else if (!strcmp(a, "--hadamard")) {
            p.hadamard = true;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            p.verbose = true;
        } else if (!strcmp(a, "--imatrix") || !strcmp(a, "-t") || !strcmp(a, "--threads") ||
                   !strcmp(a, "--tensor-type") || !strcmp(a, "--output-tensor-type") ||
                   !strcmp(a, "--token-embedding-type")) {
            if (!v) FAIL("quantize: %s needs a value", a);
            i++;
            if (!strcmp(a, "--imatrix")) {
                imatrix_path = v;
            } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
                p.n_threads = atoi(v);
                if (p.n_threads <= 0) FAIL("quantize: %s '%s' is not a positive number", a, v);
            } else if (!strcmp(a, "--tensor-type")) {
                const char *eq = strrchr(v, '=');
                if (!eq || eq == v) FAIL("quantize: --tensor-type '%s' is not PATTERN=TYPE", v);
                int t = parse_type(eq + 1);
                if (t < 0) FAIL("quantize: --tensor-type '%s': '%s' is not a type with a quantizer", v, eq + 1);
                char *pat = ob_strndup(v, (size_t)(eq - v));
                if (!pat) FAIL("quantize: out of memory");
                ov[p.n_overrides].pattern = pat;
                ov[p.n_overrides++].type = (ob_type)t;
            } else {
                int t = parse_type(v);
                if (t < 0) FAIL("quantize: %s '%s' is not a type with a quantizer", a, v);
                if (!strcmp(a, "--output-tensor-type")) p.output_type = t;
                else p.embd_type = t;
            }
        } else if (a[0] == '-' && a[1]) {
            FAIL("quantize: unknown option '%s' (see 1bit quantize --help)", a);
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            FAIL("quantize: unexpected argument '%s'", a);
        }
    }
    if (n_pos < 2 || (n_pos < 3 && !p.hadamard)) {
        usage(stderr);
        rc = 2;
        goto done;
    }
    const char *type_name = n_pos == 3 ? pos[2] : "Q4_0";
    const ob_ftype_info *mix = ob_ftype_find(type_name);
    if (!mix) FAIL("quantize: unknown type '%s' (1bit quantize --help lists them)", type_name);
    p.overrides = ov;

    ob_imatrix *im = NULL;
    if (imatrix_path) {
        int r = ob_imatrix_load(imatrix_path, &im);
        if (r < 0) {
            rc = ob_cli_fail(r, "quantize: --imatrix %s", imatrix_path);
            goto done;
        }
        printf("imatrix: %lld entries from %s (%u chunks)\n", (long long)im->n, imatrix_path, im->chunk_count);
    }
    p.imatrix = im;
    ob_quantize_stats st;
    int r = ob_quantize_file(pos[0], pos[1], mix, &p, &st);
    ob_imatrix_free(im);
    if (r < 0) {
        rc = ob_cli_fail(r, "quantize %s -> %s (%s)", pos[0], pos[1], mix->name);
        goto done;
    }
    printf("wrote %s (%s%s): %.2f MiB -> %.2f MiB, %lld of %lld tensors converted", pos[1], mix->name,
           p.hadamard ? ", rotated" : "", st.bytes_in / 1048576.0, st.bytes_out / 1048576.0,
           (long long)st.n_quantized, (long long)st.n_tensors);
    if (st.n_fallback) printf(", %lld with a fallback type", (long long)st.n_fallback);
    if (imatrix_path) printf(", %lld with importance weights", (long long)st.n_imatrix);
    printf("\ntypes:");
    for (int t = 0; t < OB_TYPE_COUNT; t++)
        if (st.type_count[t]) printf(" %s=%lld", ob_type_name(t), (long long)st.type_count[t]);
    printf("\n");
done:
    for (int i = 0; i < p.n_overrides; i++) ob_free((char *)ov[i].pattern);
    ob_free(ov);
    return rc;
#undef FAIL
}
