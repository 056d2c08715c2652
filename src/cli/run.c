/*
 * run.c - `1bit run`: one completion on the terminal, streamed as it is
 * generated, with prompt and decode speed at the end (on stderr).
 *
 *   1bit run -m model.gguf -p "Once upon a time" -n 128 [--temp 0.8 ...]
 *
 * Output is UTF-8 safe: bytes of a character split across tokens are held
 * until the character is complete.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "../core/utf8.h"
#include "cli.h"
#include "onebit.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0, k;
    char *buf = ob_malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n - 1 == 0) {
            char *b2 = ob_realloc(buf, cap * 2);
            if (!b2) {
                ob_free(buf);
                buf = NULL;
                break;
            }
            buf = b2;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

static void usage(void) {
    printf("usage: 1bit run -m MODEL (-p PROMPT | -f FILE) [options]\n"
           "  -n N                 tokens to generate (default 256; -1 = until end of text or context)\n"
           "  -c N                 context size (default: the model's, at most 4096)\n"
           "  -t N                 threads (default: all cores)\n"
           "  -b N                 prompt batch size (default 512)\n"
           "  --temp T             temperature (default 0.8; 0 = greedy)\n"
           "  --top-k K            (default 40; 0 = off)\n"
           "  --top-p P            (default 0.95; 1 = off)\n"
           "  --min-p P            (default 0.05; 0 = off)\n"
           "  --repeat-penalty R   (default 1.0 = off)   --repeat-last-n N (default 64)\n"
           "  --presence-penalty X --frequency-penalty X (default 0)\n"
           "  -s, --seed S         random seed (default fixed: same seed, same output)\n"
           "  --kv-type T          f16 (default), f32 or q8_0\n"
           "  --act-bits N         4 or 8: activations of Q4_0 projections (default 4 for a --hadamard file)\n"
           "  --device D           cpu (default), cuda, cuda:N, or auto (the GPU when there is one)\n"
           "  -ngl N               with a GPU: only the last N layers there, the rest on the CPU (default all)\n"
           "  --no-bos             do not add the model's BOS token\n"
           "  --special            let the prompt contain special-token text\n"
           "  --ignore-eos         keep generating past end-of-text\n"
           "speculative decoding (docs/engine.md; the output is the same, only faster when drafts are kept):\n"
           "  --spec-type T        none (default), ngram (prompt lookup) or draft (with -md)\n"
           "  -md, --model-draft F draft model with the same vocabulary (implies --spec-type draft)\n"
           "  --spec-draft-n-max N most tokens drafted per step (default 8)\n"
           "  --spec-draft-n-min N do not verify drafts shorter than this (default 0)\n"
           "  --spec-draft-p-min P draft model: stop drafting below this confidence (default 0.75)\n"
           "  --spec-ngram-size N  ngram: longest suffix matched (default 3)\n");
}

int ob_cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *device = "cpu";
    int n_gpu_layers = 0;
    int n_predict = 256, threads = 0, n_ctx = 0, n_batch = 512;
    bool add_bos = true, special = false, ignore_eos = false;
    ob_kv_type kv_type = OB_KV_F16;
    int act_bits = 0;
    ob_sampler_params sp = ob_sampler_default_params();
    ob_spec_params spec = ob_spec_default_params();
    const char *draft_path = NULL;
    for (int i = 0; i < argc;) {
        const char *a = argv[i++];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--no-bos")) { add_bos = false; continue; }
        if (!strcmp(a, "--special")) { special = true; continue; }
        if (!strcmp(a, "--ignore-eos")) { ignore_eos = true; continue; }
        const char *v = i < argc ? argv[i++] : NULL;
        if (!v) return ob_cli_fail(0, "run: option '%s' needs a value (or is unknown; see --help)", a);
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) prompt_file = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) n_predict = atoi(v);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = atoi(v);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) n_batch = atoi(v);
        else if (!strcmp(a, "--temp")) sp.temperature = (float)atof(v);
        else if (!strcmp(a, "--top-k")) sp.top_k = atoi(v);
        else if (!strcmp(a, "--top-p")) sp.top_p = (float)atof(v);
        else if (!strcmp(a, "--min-p")) sp.min_p = (float)atof(v);
        else if (!strcmp(a, "--repeat-penalty")) sp.repeat_penalty = (float)atof(v);
        else if (!strcmp(a, "--repeat-last-n")) sp.repeat_last_n = atoi(v);
        else if (!strcmp(a, "--presence-penalty")) sp.presence_penalty = (float)atof(v);
        else if (!strcmp(a, "--frequency-penalty")) sp.frequency_penalty = (float)atof(v);
        else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) sp.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) n_gpu_layers = atoi(v);
        else if (!strcmp(a, "-md") || !strcmp(a, "--model-draft")) draft_path = v;
        else if (!strcmp(a, "--spec-draft-n-max")) spec.n_max = atoi(v);
        else if (!strcmp(a, "--spec-draft-n-min")) spec.n_min = atoi(v);
        else if (!strcmp(a, "--spec-draft-p-min")) spec.p_min = (float)atof(v);
        else if (!strcmp(a, "--spec-ngram-size")) spec.ngram_max = atoi(v);
        else if (!strcmp(a, "--spec-type")) {
            if (!strcmp(v, "none")) spec.type = OB_SPEC_NONE;
            else if (!strcmp(v, "ngram")) spec.type = OB_SPEC_NGRAM;
            else if (!strcmp(v, "draft")) spec.type = OB_SPEC_DRAFT;
            else return ob_cli_fail(0, "run: --spec-type must be none, ngram or draft");
        }
        else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16")) kv_type = OB_KV_F16;
            else if (!strcmp(v, "f32")) kv_type = OB_KV_F32;
            else if (!strcmp(v, "q8_0")) kv_type = OB_KV_Q8_0;
            else return ob_cli_fail(0, "run: --kv-type must be f16, f32 or q8_0");
        } else if (!strcmp(a, "--act-bits")) {
            act_bits = atoi(v);
            if (act_bits != 4 && act_bits != 8) return ob_cli_fail(0, "run: --act-bits must be 4 or 8");
        } else return ob_cli_fail(0, "run: unknown option '%s' (see --help)", a);
    }
    if (!model_path) return ob_cli_fail(0, "run: no model (-m MODEL.gguf)");
    if (draft_path && spec.type == OB_SPEC_NONE) spec.type = OB_SPEC_DRAFT;
    if (spec.type == OB_SPEC_DRAFT && !draft_path) return ob_cli_fail(0, "run: --spec-type draft needs -md DRAFT.gguf");
    char draft_file[4096];
    if (draft_path) {
        int drc = ob_model_resolve(draft_path, draft_file, sizeof draft_file);
        if (drc < 0) return ob_cli_fail(drc, "run: -md");
        spec.draft_path = draft_file;
        spec.draft_device = device;
    }
    /* -m takes a path or a stored name (org/repo[:quant], a file name): docs/store.md */
    char model_file[4096];
    int rrc = ob_model_resolve(model_path, model_file, sizeof model_file);
    if (rrc < 0) return ob_cli_fail(rrc, "run");
    model_path = model_file;
    char *file_text = NULL;
    if (prompt_file) {
        file_text = read_file(prompt_file);
        if (!file_text) return ob_cli_fail(0, "run: cannot read prompt file '%s'", prompt_file);
        prompt = file_text;
    }
    if (!prompt) prompt = "";

    ob_model *m = NULL;
    ob_context *ctx = NULL;
    ob_sampler *smp = NULL;
    ob_spec *sps = NULL;
    ob_token *toks = NULL, *seqbuf = NULL;
    int ret = 0, rc;
    double t_load = now_s();
    ob_model_params mp = ob_model_default_params();
    mp.device = device;
    mp.n_gpu_layers = n_gpu_layers;
    if ((rc = ob_model_load(model_path, &mp, &m)) < 0) {
        ret = ob_cli_fail(rc, "run");
        goto out;
    }
    if (ob_model_is_encoder(m)) {
        ret = ob_cli_fail(ob_err(OB_ERR_UNSUPPORTED,
                                 "'%s' is an encoder (an embedding model, %s): it cannot generate text; serve it "
                                 "with `1bit serve --embeddings` and POST /v1/embeddings",
                                 model_path, ob_model_arch(m)),
                          "run");
        goto out;
    }
    t_load = now_s() - t_load;
    ob_context_params cp = ob_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = threads;
    cp.n_batch = n_batch > 0 ? n_batch : 512;
    cp.kv_type = kv_type;
    cp.act_bits = act_bits;
    if ((rc = ob_context_create(m, &cp, &ctx)) < 0) {
        ret = ob_cli_fail(rc, "run");
        goto out;
    }
    n_ctx = ob_context_get_params(ctx)->n_ctx;
    size_t plen = strlen(prompt);
    int32_t n_prompt = 0;
    rc = ob_tokenize(m, prompt, plen, add_bos, special, NULL, 0, &n_prompt);
    if (rc < 0 && rc != OB_ERR_RANGE) {
        ret = ob_cli_fail(rc, "run: tokenize");
        goto out;
    }
    if (n_prompt >= n_ctx) {
        ret = ob_cli_fail(0, "run: the prompt is %d tokens; the context holds %d (-c)", n_prompt, n_ctx);
        goto out;
    }
    toks = ob_malloc((size_t)(n_prompt > 0 ? n_prompt : 1) * sizeof(ob_token));
    if (!toks) {
        ret = ob_cli_fail(OB_ERR_OOM, "run");
        goto out;
    }
    if (n_prompt > 0 && (rc = ob_tokenize(m, prompt, plen, add_bos, special, toks, n_prompt, &n_prompt)) < 0) {
        ret = ob_cli_fail(rc, "run: tokenize");
        goto out;
    }
    if (n_prompt == 0) {
        ob_token bos = ob_token_bos(m);
        if (bos < 0) {
            ret = ob_cli_fail(0, "run: empty prompt and the model has no BOS token");
            goto out;
        }
        toks[0] = bos;
        n_prompt = 1;
    }
    if ((rc = ob_sampler_create(&sp, ob_model_n_vocab(m), &smp)) < 0) {
        ret = ob_cli_fail(rc, "run");
        goto out;
    }
    if (spec.type != OB_SPEC_NONE && (rc = ob_spec_create(m, ctx, &spec, &sps)) < 0) {
        ret = ob_cli_fail(rc, "run: speculative decoding");
        goto out;
    }
    /* the whole sequence, for the drafters; plus room for one step's tokens */
    seqbuf = ob_malloc((size_t)(n_ctx + 66) * sizeof(ob_token));
    if (!seqbuf) {
        ret = ob_cli_fail(OB_ERR_OOM, "run");
        goto out;
    }
    memcpy(seqbuf, toks, (size_t)n_prompt * sizeof(ob_token));
    fwrite(prompt, 1, plen, stdout);
    fflush(stdout);

    /* prompt, in batches */
    double t0 = now_s();
    int32_t *pos = ob_malloc((size_t)cp.n_batch * sizeof(int32_t));
    int32_t *seq = ob_calloc((size_t)cp.n_batch, sizeof(int32_t));
    if (!pos || !seq) {
        ob_free(pos);
        ob_free(seq);
        ret = ob_cli_fail(OB_ERR_OOM, "run");
        goto out;
    }
    for (int32_t i = 0; i < n_prompt && ret == 0; i += cp.n_batch) {
        int32_t nb = n_prompt - i < cp.n_batch ? n_prompt - i : cp.n_batch;
        for (int32_t j = 0; j < nb; j++) pos[j] = i + j;
        ob_batch b = {nb, toks + i, pos, seq, NULL};
        if ((rc = ob_decode(ctx, &b)) < 0) ret = ob_cli_fail(rc, "run: prompt");
    }
    for (int32_t i = 0; i < n_prompt; i++) ob_sampler_accept(smp, toks[i]);
    double t_prompt = now_s() - t0;
    const float *logits = ob_get_logits(ctx, (n_prompt - 1) % cp.n_batch);

    /* generate */
    char pending[64];
    size_t n_pending = 0;
    int32_t n_gen = 0, n_q = 0, n_seq = n_prompt;
    int64_t n_drafted = 0, n_accepted = 0;
    ob_token queue[65]; /* tokens of one speculative step */
    double t1 = now_s();
    while (ret == 0 && (n_predict < 0 || n_gen < n_predict) && n_prompt + n_gen < n_ctx) {
        ob_token t;
        if (n_q == 0 && sps && n_gen > 0) {
            /* draft, verify in one batch, keep what the model itself would have produced */
            int32_t k = n_predict < 0 ? 64 : n_predict - n_gen - 1, d = 0;
            if ((rc = ob_spec_step(sps, 0, smp, seqbuf, n_seq, k, queue, &n_q, &d)) < 0) {
                ret = ob_cli_fail(rc, "run: decode");
                break;
            }
            n_drafted += d;
            n_accepted += n_q - 1;
            for (int32_t j = 0; j < n_q / 2; j++) { /* reversed: popped from the end */
                ob_token x = queue[j];
                queue[j] = queue[n_q - 1 - j];
                queue[n_q - 1 - j] = x;
            }
        }
        if (n_q > 0) {
            t = queue[--n_q];
        } else {
            t = ob_sampler_sample(smp, logits);
            ob_sampler_accept(smp, t);
        }
        seqbuf[n_seq++] = t;
        n_gen++;
        if (!ignore_eos && ob_token_is_eog(m, t)) break;
        char piece[256];
        int32_t k = 0;
        if (ob_token_to_piece(m, t, piece, sizeof piece, false, &k) == 0 && k > 0) {
            /* hold back an unfinished UTF-8 character */
            for (int32_t j = 0; j < k; j++) {
                if (n_pending == sizeof pending) {
                    fwrite(pending, 1, n_pending, stdout);
                    n_pending = 0;
                }
                pending[n_pending++] = piece[j];
            }
            size_t ok = ob_utf8_complete_prefix(pending, n_pending);
            fwrite(pending, 1, ok, stdout);
            memmove(pending, pending + ok, n_pending - ok);
            n_pending -= ok;
            fflush(stdout);
        }
        if (sps) continue; /* the next step decodes t with its draft */
        int32_t p = n_prompt + n_gen - 1;
        int32_t s0 = 0;
        ob_batch b = {1, &t, &p, &s0, NULL};
        if ((rc = ob_decode(ctx, &b)) < 0) {
            ret = ob_cli_fail(rc, "run: decode");
            break;
        }
        logits = ob_get_logits(ctx, 0);
    }
    fwrite(pending, 1, n_pending, stdout);
    printf("\n");
    double t_gen = now_s() - t1;
    ob_free(pos);
    ob_free(seq);
    char desc[128];
    ob_model_desc(m, desc, sizeof desc);
    fprintf(stderr, "\n1bit run: %s, load %.2f s\n", desc, t_load);
    fprintf(stderr, "prompt: %d tokens in %.3f s, %.1f tok/s\n", n_prompt, t_prompt,
            t_prompt > 0 ? n_prompt / t_prompt : 0.0);
    fprintf(stderr, "decode: %d tokens in %.3f s, %.1f tok/s\n", n_gen, t_gen, t_gen > 0 ? n_gen / t_gen : 0.0);
    if (sps)
        fprintf(stderr, "speculative: %lld drafted, %lld accepted (%.1f%%)\n", (long long)n_drafted,
                (long long)n_accepted, n_drafted > 0 ? 100.0 * (double)n_accepted / (double)n_drafted : 0.0);
out:
    ob_spec_free(sps);
    ob_free(seqbuf);
    ob_free(toks);
    ob_free(file_text);
    ob_sampler_free(smp);
    ob_context_free(ctx);
    ob_model_free(m);
    return ret;
}
