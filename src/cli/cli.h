/*
 * cli.h - the subcommands of the one `1bit` binary. Each takes the arguments
 * after its name and returns a process exit code.
 */
#ifndef OB_CLI_H
#define OB_CLI_H

int ob_cmd_info(int argc, char **argv);
int ob_cmd_dump(int argc, char **argv);
int ob_cmd_serve(int argc, char **argv);
int ob_cmd_tokenize(int argc, char **argv);
int ob_cmd_convert(int argc, char **argv);
int ob_cmd_eval(int argc, char **argv);
int ob_cmd_run(int argc, char **argv);
int ob_cmd_chat(int argc, char **argv);
int ob_cmd_bench(int argc, char **argv);
int ob_cmd_bench_serve(int argc, char **argv); /* `1bit bench serve` */
int ob_cmd_template(int argc, char **argv);
int ob_cmd_pull(int argc, char **argv);
int ob_cmd_list(int argc, char **argv);
int ob_cmd_models(int argc, char **argv); /* the registry's architecture table */
int ob_cmd_route(int argc, char **argv);
int ob_cmd_quantize(int argc, char **argv);
int ob_cmd_perplexity(int argc, char **argv);
int ob_cmd_kld(int argc, char **argv);
int ob_cmd_imatrix(int argc, char **argv);

/* The chunk loop perplexity, kld and imatrix share (src/cli/perplexity.c).
 * read_tokens: a text file tokenized with BOS as the model asks (free with
 * ob_free). eval_chunk: run tok[0..n_ctx) from an empty sequence 0 in
 * batches of n_batch and call fn for every position i in [first, n_ctx-1)
 * with its logits (which predict tok[i+1]); first < 0 asks for the logits of
 * every position, the last included (fn sees i in [0, n_ctx)), so the output
 * matrix sees all n_ctx rows as in llama-imatrix.
 * chunk_bos: the token each chunk starts with (replacing its first token),
 * the BOS when the vocabulary adds one, else -1 (the chunk is left as is).
 * parse_kv_type: "f16" | "f32" | "q8_0" (--kv-type), OB_ERR_INVALID_ARG otherwise. */
#include "onebit.h"
typedef void (*ob_ppl_row_fn)(void *user, int32_t i, const float *logits);
int ob_ppl_read_tokens(ob_model *m, const char *path, ob_token **out, int32_t *n);
int ob_ppl_eval_chunk(ob_context *ctx, const ob_token *tok, int32_t n_ctx, int32_t first, int32_t n_batch,
                      ob_ppl_row_fn fn, void *user);
ob_token ob_ppl_chunk_bos(const ob_model *m);
int ob_cli_parse_kv_type(const char *s, ob_kv_type *out);

/* Print "1bit: <message>" (with ob_last_error() appended when status < 0)
 * to stderr and return exit code 1. */
int ob_cli_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
