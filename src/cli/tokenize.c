/*
 * tokenize.c - `1bit tokenize`: text to token ids and back, from a GGUF
 * vocabulary or a Hugging Face tokenizer.json, plus an encode-throughput
 * benchmark (--bench) used for bench/RESULTS.md.
 *
 *   echo "Hello world" | 1bit tokenize -m model.gguf            # ids on one line
 *   echo "Hello world" | 1bit tokenize --tokenizer-json dir/ --pieces
 *   echo "9906 1917"   | 1bit tokenize -m model.gguf --decode  # text
 *   1bit tokenize -m model.gguf --bench -f corpus.txt          # MB/s
 *
 * Input is read whole (stdin or -f); the trailing newline that echo adds is
 * kept, as it is part of the text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../gguf/gguf.h"
#include "../tokenizer/tokenizer.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: 1bit tokenize (-m FILE.gguf | --tokenizer-json PATH) [options] < text\n"
            "\n"
            "Reads UTF-8 text (stdin, or -f FILE) and prints its token ids on one line.\n"
            "PATH is a tokenizer.json or a directory with tokenizer.json or vocab.json + merges.txt.\n"
            "\n"
            "  --no-bos     do not add the model's BOS/EOS (or CLS/SEP) tokens\n"
            "  --special    text like <|im_start|> becomes the special token\n"
            "  --pieces     one token per line: id and the text it decodes to\n"
            "  --decode     read token ids (space/comma separated) and print the text\n"
            "  --skip-special  with --decode: leave special tokens out\n"
            "  --bench      measure encode throughput (MB/s) on the input\n"
            "  --repeat N   --bench repetitions (default 5)\n"
            "  -f FILE      read the input from FILE instead of stdin\n");
}

static int read_all(FILE *f, char **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = ob_malloc(cap);
    if (!buf) return ob_err(OB_ERR_OOM, "out of memory");
    for (;;) {
        if (n == cap) {
            char *b = ob_realloc(buf, cap * 2);
            if (!b) {
                ob_free(buf);
                return ob_err(OB_ERR_OOM, "out of memory");
            }
            buf = b;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    if (ferror(f)) {
        ob_free(buf);
        return ob_err(OB_ERR_IO, "read error: %s", strerror(errno));
    }
    *out = buf;
    *len = n;
    return 0;
}

/* Print bytes as a quoted, escaped string (valid UTF-8 shown as is). */
static void print_escaped(const char *s, size_t n) {
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c == '\'') fputs("\\'", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Encode the input `repeat` times after one warm-up run. Reports wall and
 * CPU time (the CPU time is what to compare on a shared, loaded machine). */
static int bench(const ob_tokenizer *t, const char *text, size_t len, unsigned flags, int repeat) {
    ob_tokens ids = {0};
    double best = 1e30, best_cpu = 1e30, total = 0;
    int rc = ob_tokenizer_encode(t, text, len, flags, &ids); /* warm-up (page faults, allocator) */
    size_t n_tokens = ids.n;
    for (int r = 0; rc == 0 && r < repeat; r++) {
        ids.n = 0;
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        rc = ob_tokenizer_encode(t, text, len, flags, &ids);
        double dt = clock_s(CLOCK_MONOTONIC) - t0, dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        total += dt;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    ob_tokens_free(&ids);
    if (rc < 0) return ob_cli_fail(rc, "encode");
    double mb = (double)len / 1e6;
    printf("bytes %zu  tokens %zu  repeats %d  encode %.2f MB/s (best wall %.3f s)  %.2f MB/s (mean wall)  "
           "%.2f MB/s (best CPU %.3f s)  %.0f tokens/s\n",
           len, n_tokens, repeat, mb / best, best, mb / (total / repeat), mb / best_cpu, best_cpu,
           (double)n_tokens / best_cpu);
    return 0;
}

int ob_cmd_tokenize(int argc, char **argv) {
    const char *gguf_path = NULL, *json_path = NULL, *in_path = NULL;
    bool no_bos = false, special = false, pieces = false, decode = false, skip_special = false, do_bench = false;
    int repeat = 5;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) gguf_path = argv[++i];
        else if (!strcmp(a, "--tokenizer-json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(a, "-f") && i + 1 < argc) in_path = argv[++i];
        else if (!strcmp(a, "--no-bos")) no_bos = true;
        else if (!strcmp(a, "--special")) special = true;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else if (!strcmp(a, "--decode")) decode = true;
        else if (!strcmp(a, "--skip-special")) skip_special = true;
        else if (!strcmp(a, "--bench")) do_bench = true;
        else if (!strcmp(a, "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "1bit tokenize: unknown or incomplete option '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!!gguf_path == !!json_path || repeat < 1) {
        usage(stderr);
        return 2;
    }
    ob_tokenizer *t = NULL;
    int rc;
    if (gguf_path) {
        ob_gguf *g;
        rc = ob_gguf_open(gguf_path, &g);
        if (rc < 0) return ob_cli_fail(rc, "tokenize");
        rc = ob_tokenizer_from_gguf(g, &t);
        ob_gguf_free(g);
        if (rc < 0) return ob_cli_fail(rc, "%s", gguf_path);
    } else {
        rc = ob_tokenizer_from_json_file(json_path, &t);
        if (rc < 0) return ob_cli_fail(rc, "tokenize");
    }
    FILE *in = stdin;
    if (in_path && !(in = fopen(in_path, "rb"))) {
        ob_tokenizer_free(t);
        return ob_cli_fail(OB_ERR_IO, "%s: %s", in_path, strerror(errno));
    }
    char *text = NULL;
    size_t len = 0;
    rc = read_all(in, &text, &len);
    if (in != stdin) fclose(in);
    if (rc < 0) {
        ob_tokenizer_free(t);
        return ob_cli_fail(rc, "input");
    }
    unsigned flags = (no_bos ? 0 : OB_ENCODE_ADD_SPECIAL) | (special ? OB_ENCODE_PARSE_SPECIAL : 0);
    int exit_code = 0;
    if (do_bench) {
        exit_code = bench(t, text, len, flags, repeat);
    } else if (decode) {
        ob_tokens ids = {0};
        char *p = text, *end = text + len;
        while (rc == 0 && p < end) {
            while (p < end && (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t' || *p == '\r' || *p == '[' ||
                               *p == ']'))
                p++;
            if (p >= end) break;
            char *q;
            errno = 0;
            long v = strtol(p, &q, 10);
            if (q == p || errno || v < 0 || v >= ob_tokenizer_n_vocab(t)) {
                rc = ob_err(OB_ERR_FORMAT, "bad token id at byte %td of the input", p - text);
                break;
            }
            rc = ob_tokens_push(&ids, (ob_token)v);
            p = q;
        }
        char *out = NULL;
        size_t out_len = 0;
        if (rc == 0) rc = ob_tokenizer_decode(t, ids.ids, ids.n, skip_special ? OB_DECODE_SKIP_SPECIAL : 0, &out, &out_len);
        if (rc == 0) fwrite(out, 1, out_len, stdout);
        else exit_code = ob_cli_fail(rc, "decode");
        ob_free(out);
        ob_tokens_free(&ids);
    } else {
        ob_tokens ids = {0};
        rc = ob_tokenizer_encode(t, text, len, flags, &ids);
        if (rc < 0) {
            exit_code = ob_cli_fail(rc, "encode");
        } else if (pieces) {
            char buf[256];
            for (size_t i = 0; i < ids.n; i++) {
                int n = ob_tokenizer_token_bytes(t, ids.ids[i], buf, sizeof buf);
                printf("%6d -> ", ids.ids[i]);
                print_escaped(buf, n < 0 ? 0 : (size_t)n > sizeof buf ? sizeof buf : (size_t)n);
                putchar('\n');
            }
        } else {
            for (size_t i = 0; i < ids.n; i++) printf(i ? " %d" : "%d", ids.ids[i]);
            putchar('\n');
        }
        ob_tokens_free(&ids);
    }
    ob_free(text);
    ob_tokenizer_free(t);
    return exit_code;
}
