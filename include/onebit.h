/*
 * onebit.h - the public C API of the 1bit engine.
 *
 * This is the only header the CLI, the server and outside programs include.
 * It owns the status convention (0 ok, negative ob_status on error) and the
 * per-thread error message that says *why* a call failed. Models, contexts and
 * sampling join this header as the engine grows; everything below it (GGUF,
 * quant formats, backends) stays private to the library.
 */
#ifndef ONEBIT_H
#define ONEBIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OB_VERSION_MAJOR 0
#define OB_VERSION_MINOR 1
#define OB_VERSION_PATCH 0

/* Every fallible call returns 0 (OB_OK) or one of these negative codes. */
typedef enum ob_status {
    OB_OK = 0,
    OB_ERR_INVALID_ARG = -1, /* a caller passed something out of contract */
    OB_ERR_OOM = -2,         /* an allocation failed */
    OB_ERR_IO = -3,          /* open/read/write/mmap failed */
    OB_ERR_FORMAT = -4,      /* malformed input (file bytes, JSON, ...) */
    OB_ERR_UNSUPPORTED = -5, /* well-formed but not something we implement */
    OB_ERR_NOT_FOUND = -6,   /* a named key, tensor or file does not exist */
    OB_ERR_RANGE = -7,       /* a value is outside what it may be */
    OB_ERR_DEVICE = -8,      /* a backend (GPU) call failed */
    OB_ERR_FULL = -9,        /* a bounded resource (KV cache, queue) is full */
    OB_ERR_CANCELLED = -10,  /* the work was cancelled */
    OB_ERR_INTERNAL = -11,   /* should not happen; a bug */
} ob_status;

/* A short constant name for a status, e.g. "format error". Never NULL. */
const char *ob_status_str(int status);

/* The message of the last failure on this thread ("" if none). It names the
 * key, tensor or byte offset that was wrong. Valid until the next failing
 * call on the same thread. */
const char *ob_last_error(void);

/* "0.1.0 (commit abc1234)". */
const char *ob_version_string(void);

/* ======================================================================
 * Models and contexts
 *
 * A model is the loaded, read-only weights and vocabulary (shareable between
 * contexts). A context owns a KV cache of fixed-size pages shared by up to
 * n_seq_max sequences, the activation buffers and the CPU threads; it is not
 * thread-safe: one thread drives it.
 * ====================================================================== */

typedef struct ob_model ob_model;
typedef struct ob_context ob_context;
typedef int32_t ob_token;

typedef struct ob_model_params {
    const char *device;  /* "cpu" (default), "cuda", "cuda:N", or "auto" (the GPU when there is one) */
    int n_threads;       /* threads for load-time work; <= 0: all cores */
    /* With a GPU device: 0 (default) = the whole model on the GPU; N > 0 = only
     * the last N transformer layers there, the embeddings, the other layers,
     * the output norm and head on the CPU (partial offload, `-ngl N`; N at or
     * above the layer count = the whole model). Ignored on the CPU. */
    int n_gpu_layers;
} ob_model_params;

ob_model_params ob_model_default_params(void);
/* Load a GGUF model. Errors name the missing key or bad tensor. */
int ob_model_load(const char *path, const ob_model_params *params, ob_model **out);
void ob_model_free(ob_model *model);

const char *ob_model_arch(const ob_model *model);   /* "llama", "qwen2", ... */
const char *ob_model_name(const ob_model *model);   /* general.name or the arch */
int32_t ob_model_n_vocab(const ob_model *model);
int32_t ob_model_n_ctx_train(const ob_model *model);
int32_t ob_model_n_embd(const ob_model *model);
int32_t ob_model_n_layer(const ob_model *model);
uint64_t ob_model_n_params(const ob_model *model);
uint64_t ob_model_size_bytes(const ob_model *model);
/* "llama 5 layers, 64 embd, f32" style one-line description. */
void ob_model_desc(const ob_model *model, char *buf, size_t size);

typedef enum ob_kv_type {
    OB_KV_F16 = 0,
    OB_KV_F32 = 1,
    OB_KV_Q8_0 = 2,
} ob_kv_type;

typedef struct ob_context_params {
    int32_t n_ctx;        /* positions per sequence (0: the model's training context, capped at 4096) */
    int32_t n_seq_max;    /* sequences that can be live at once (default 1) */
    int32_t n_batch;      /* most tokens one ob_decode call may carry (default 512) */
    int32_t n_threads;    /* CPU threads (<= 0: all cores) */
    ob_kv_type kv_type;   /* default F16 */
    int32_t kv_block_size;/* tokens per KV page (default 32) */
    int64_t kv_blocks;    /* pages in the pool (0: enough for n_seq_max full sequences) */
    int32_t act_bits;     /* activations of the Q4_0 projections: 4 (W4A4) or 8; 0: 4 for a rotated
                             (--hadamard) file, 8 otherwise. 4 needs a CPU context (a GPU one uses 8);
                             ob_context_get_params gives the value in effect (docs/quantization.md) */
} ob_context_params;

ob_context_params ob_context_default_params(void);
int ob_context_create(ob_model *model, const ob_context_params *params, ob_context **out);
void ob_context_free(ob_context *ctx);
const ob_context_params *ob_context_get_params(const ob_context *ctx);

/* A batch of tokens, any mix of sequences. For each sequence the tokens must
 * continue it in order: positions seq_len, seq_len + 1, ... (use
 * ob_seq_remove to go back). logits[i] != 0 asks for token i's logits;
 * OB_LOGITS_ARGMAX asks only for its most likely token (ob_get_argmax): when
 * every row of a batch asks for that, a GPU finds the argmax itself and the
 * logits never cross the bus (ob_get_logits then gives NULL for them). */
#define OB_LOGITS_ARGMAX 2
typedef struct ob_batch {
    int32_t n_tokens;
    const ob_token *token;   /* [n_tokens] */
    const int32_t *pos;      /* [n_tokens] */
    const int32_t *seq_id;   /* [n_tokens] */
    const int8_t *logits;    /* [n_tokens]; NULL: only the last token */
} ob_batch;

/* Run the model on a batch and append its keys/values to the sequences.
 * OB_ERR_FULL when the KV pool has no room (nothing is changed then). */
int ob_decode(ob_context *ctx, const ob_batch *batch);
/* Logits [n_vocab] of batch token i from the last ob_decode (it must have
 * asked for them); NULL otherwise. Valid until the next ob_decode. */
const float *ob_get_logits(ob_context *ctx, int32_t i);
/* The most likely token of batch token i (the lowest id among equal
 * logits, as a scan of ob_get_logits would find), for rows that asked for
 * logits or OB_LOGITS_ARGMAX; -1 otherwise. */
ob_token ob_get_argmax(ob_context *ctx, int32_t i);

/* Embeddings instead of logits: while on, each row of a later ob_decode
 * that asks for logits gets the model's final hidden state after the
 * output norm, [n_embd] floats (what embedding models pool), read with
 * ob_get_embeddings; ob_get_logits gives NULL. llama, qwen2, qwen3 and
 * the encoders (bert, modern-bert; their hidden states after the final
 * norm where the model has one) only (OB_ERR_UNSUPPORTED otherwise). */
int ob_context_set_embeddings(ob_context *ctx, bool on);

/* Make each token's logits independent of the batch it is decoded in, bit for
 * bit, for batches of up to 64 tokens and sequences of up to 16384 positions.
 * The CPU backend always is; the CUDA backend then runs one kernel and one
 * split of every product for each batch size and fixed attention splits,
 * which costs speed on batches. Speculative decoding turns it on, so its
 * output equals plain decoding's. Applies to the backend of the context's
 * model (every context of that model). */
int ob_context_set_batch_invariant(ob_context *ctx, bool on);
const float *ob_get_embeddings(ob_context *ctx, int32_t i);
/* The GGUF's <arch>.pooling_type (0 none, 1 mean, 2 cls, 3 last, 4 rank),
 * -1 when the file does not say. */
int32_t ob_model_pooling_type(const ob_model *model);
/* True for a bidirectional encoder (bert, modern-bert): an embedding model
 * that runs only with ob_context_set_embeddings on, each sequence whole in
 * one ob_decode batch from position 0; it cannot generate text. */
bool ob_model_is_encoder(const ob_model *model);

/* Positions held by a sequence (its next position). */
int32_t ob_seq_len(const ob_context *ctx, int32_t seq_id);
/* Drop positions [p0, end) of a sequence (p0 = 0 clears it); frees its pages. */
int ob_seq_remove(ob_context *ctx, int32_t seq_id, int32_t p0);
/* Make dst share src's first n_pos positions (pages shared, copied on write). */
int ob_seq_copy(ob_context *ctx, int32_t src, int32_t dst, int32_t n_pos);
/* Attach to an empty sequence the longest run of whole KV pages that the
 * prefix index holds for tokens[0..n) (pages other sequences computed, or
 * that are parked after use). *n_reused gets the positions now held
 * (a multiple of the page size); decoding continues at that position. */
int ob_seq_reuse_prefix(ob_context *ctx, int32_t seq_id, const ob_token *tokens, int32_t n, int32_t *n_reused);
/* KV pages: total and in use (parked prefix pages count as free). */
void ob_kv_usage(const ob_context *ctx, int64_t *used_blocks, int64_t *total_blocks);
/* See the input of every weight matmul of later ob_decode calls: fn gets
 * the weight's name ("blk.0.attn_q.weight"), which matrix of it (the expert
 * index of a stacked [n_in, n_out, n_mat] expert tensor; 0 and n_mat 1
 * otherwise), and x[n_tokens][n_in], the activations it multiplies (valid
 * during the call). For importance matrices (1bit imatrix). CPU contexts
 * only (OB_ERR_UNSUPPORTED on a GPU); fn NULL removes it. */
typedef void (*ob_matmul_observer)(void *user, const char *weight_name, int32_t mat, int32_t n_mat, const float *x,
                                   int64_t n_in, int64_t n_tokens);
int ob_context_set_matmul_observer(ob_context *ctx, ob_matmul_observer fn, void *user);

/* ======================================================================
 * Tokens
 * ====================================================================== */

/* Encode text into ids[0..n_max). *n_tokens gets the count; when n_max is
 * too small it gets the count needed and the call returns OB_ERR_RANGE
 * (ids=NULL, n_max=0 asks for the size). add_special adds BOS/EOS as the
 * model asks; parse_special lets text like "<|im_start|>" become its special
 * token. */
int ob_tokenize(const ob_model *model, const char *text, size_t len, bool add_special, bool parse_special,
                ob_token *ids, int32_t n_max, int32_t *n_tokens);
/* The bytes a token stands for (may be part of a UTF-8 character) into
 * buf[0..size); *len gets the length (or the length needed, with
 * OB_ERR_RANGE). special: also render control tokens' text. */
int ob_token_to_piece(const ob_model *model, ob_token id, char *buf, int32_t size, bool special, int32_t *len);
/* Decode a whole sequence as Hugging Face decode() does (skip_special drops
 * control tokens). *out is NUL-terminated valid UTF-8, free with ob_free_string. */
int ob_detokenize(const ob_model *model, const ob_token *ids, int32_t n, bool skip_special, char **out, size_t *len);
void ob_free_string(char *s);

/* Streaming detokenizer: push ids one at a time; each push yields the newly
 * complete text (never a broken UTF-8 character; *text valid until the next
 * call). Concatenated pushes plus the flush equal ob_detokenize. */
typedef struct ob_detokenizer ob_detokenizer;
int ob_detokenizer_create(const ob_model *model, bool skip_special, ob_detokenizer **out);
int ob_detokenizer_push(ob_detokenizer *d, ob_token id, const char **text, size_t *len);
int ob_detokenizer_flush(ob_detokenizer *d, const char **text, size_t *len);
void ob_detokenizer_free(ob_detokenizer *d);

ob_token ob_token_bos(const ob_model *model); /* -1 if none */
ob_token ob_token_eos(const ob_model *model);
bool ob_token_is_eog(const ob_model *model, ob_token id); /* end of generation (EOS, EOT, ...) */

/* ======================================================================
 * Chat templates
 * ====================================================================== */

/* The model's chat template (tokenizer.chat_template), or NULL. */
const char *ob_model_chat_template(const ob_model *model);
/* Render a conversation. context_json is a JSON object whose keys become
 * the template's top-level variables, as transformers' apply_chat_template
 * passes them: {"messages": [...], "tools": [...], "add_generation_prompt":
 * true, ...}; bos_token / eos_token are filled from the model when absent.
 * template_text NULL uses the model's template (ChatML when it has none).
 * *out is allocated (free with ob_free_string). Errors name the template
 * line. */
int ob_chat_render(const ob_model *model, const char *template_text, const char *context_json, size_t len,
                   char **out, size_t *out_len);

/* ======================================================================
 * Sampling
 * ====================================================================== */

typedef struct ob_sampler ob_sampler;

typedef struct ob_sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off */
    int32_t repeat_last_n;   /* window for the penalties (-1: all seen) */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    uint64_t seed;
} ob_sampler_params;

ob_sampler_params ob_sampler_default_params(void);
int ob_sampler_create(const ob_sampler_params *params, int32_t n_vocab, ob_sampler **out);
void ob_sampler_free(ob_sampler *s);
/* Pick a token from logits [n_vocab] (not modified). */
ob_token ob_sampler_sample(ob_sampler *s, const float *logits);
/* True when sampling is the plain argmax of the logits (temperature <= 0
 * and no penalty that changes them), so ob_get_argmax can stand in. */
bool ob_sampler_is_greedy(const ob_sampler *s);
/* Tell the sampler a token was added to the sequence (prompt or generated). */
void ob_sampler_accept(ob_sampler *s, ob_token id);
void ob_sampler_reset(ob_sampler *s);

/* ======================================================================
 * Serving engine
 *
 * One engine thread owns a context with n_parallel sequence slots and runs
 * every admitted request together: each step is one batch made of one
 * decode token per running request plus chunks of waiting prompts, under a
 * token budget (continuous batching, chunked prefill). Other threads submit
 * requests and read their tokens back as events; they never touch the model.
 * When the KV pool runs out, the most recently admitted request is preempted
 * and recomputed later rather than failing.
 * ====================================================================== */

typedef struct ob_engine ob_engine;
typedef struct ob_request ob_request;

/* Speculative decoding (docs/engine.md): a drafter guesses up to n_max
 * tokens, the target checks them all in one ob_decode, and every token kept
 * is one the target itself would have produced (greedy: the same tokens;
 * sampling: the same distribution, by rejection sampling). */
typedef enum ob_spec_type {
    OB_SPEC_NONE = 0,
    OB_SPEC_NGRAM = 1,  /* prompt lookup: continue the latest earlier match of the last tokens */
    OB_SPEC_DRAFT = 2,  /* a smaller model with the same vocabulary drafts greedily */
} ob_spec_type;

typedef struct ob_spec_params {
    ob_spec_type type;
    int32_t n_max;          /* most tokens drafted per step (default 8) */
    int32_t n_min;          /* a shorter draft is not verified (default 0) */
    float p_min;            /* draft model: stop when its top token's probability is below (default 0.75) */
    int32_t ngram_max;      /* ngram: longest suffix matched, tried down to ngram_min (default 3) */
    int32_t ngram_min;      /* (default 1) */
    ob_model *draft_model;  /* OB_SPEC_DRAFT: a loaded draft model (borrowed; outlives the user), or NULL: */
    const char *draft_path; /* load this GGUF (read during create) ... */
    const char *draft_device; /* ... on this device (NULL: "cpu") */
} ob_spec_params;

ob_spec_params ob_spec_default_params(void);
/* 0 when draft can draft for target: vocabulary sizes within 128 and every
 * shared id the same text, same BOS/EOS. Otherwise OB_ERR_UNSUPPORTED, the
 * message naming the first difference. */
int ob_spec_check_vocab(const ob_model *target, const ob_model *draft);

/* Drafting and verification for the sequences of one context (one thread
 * drives it, with the context). */
typedef struct ob_spec ob_spec;
int ob_spec_create(ob_model *model, ob_context *ctx, const ob_spec_params *params, ob_spec **out); /* ctx: of model */
void ob_spec_free(ob_spec *sp);
/* One decode step of sequence seq with speculation. tokens[0..n) is the
 * whole sequence; its first n-1 positions are in the KV cache and the last
 * is not. Drafts up to n_max tokens (0: none, a plain decode), verifies
 * them in one ob_decode, samples with smp (which sees every emitted token
 * through ob_sampler_accept) and rolls the rejected positions back out of
 * the cache. out[0..*n_out) gets the accepted drafts plus one token of the
 * target's own (so 1 <= *n_out <= n_max + 1; out needs n_max + 1 places);
 * afterwards the cache holds n - 1 + *n_out positions, the last emitted
 * token not yet in it. *n_drafted (may be NULL) gets the draft's length. */
int ob_spec_step(ob_spec *sp, int32_t seq, ob_sampler *smp, const ob_token *tokens, int32_t n, int32_t n_max,
                 ob_token *out, int32_t *n_out, int32_t *n_drafted);

typedef struct ob_engine_params {
    int32_t n_parallel;  /* sequences decoding together (default 1) */
    int32_t n_ctx;       /* positions per sequence (0: model's, at most 4096) */
    int32_t n_batch;     /* token budget of one step (0, the default: 512 on the CPU, 2048 when the
                          * model runs on a GPU, where each step's prompt tokens pay for turning
                          * every quantized weight into bf16 once) */
    int32_t n_threads;   /* CPU threads (<= 0: all cores) */
    ob_kv_type kv_type;
    int64_t kv_blocks;   /* KV pages (0: n_parallel full sequences) */
    int32_t kv_block_size;
    int32_t queue_max;   /* waiting requests before submit says OB_ERR_FULL (default 64) */
    ob_spec_params spec; /* speculative decoding for every running request (type NONE: off) */
} ob_engine_params;

ob_engine_params ob_engine_default_params(void);

typedef struct ob_gen_params {
    ob_sampler_params sampling;
    int32_t max_tokens;     /* <= 0: until end of generation or the context is full */
    bool ignore_eos;
    int32_t top_logprobs;   /* -1: no logprobs; 0..20: the chosen token's logprob and this many alternatives */
    bool no_speculative;    /* do not draft for this request (engine speculation stays on for others) */
    int32_t spec_n_max;     /* > 0: draft at most this many tokens per step (capped by the engine's); 0: the engine's */
} ob_gen_params;

ob_gen_params ob_gen_default_params(void);

typedef enum ob_finish {
    OB_FINISH_NONE = 0,
    OB_FINISH_STOP = 1,      /* end-of-generation token (or the caller's stop) */
    OB_FINISH_LENGTH = 2,    /* max_tokens or the context size */
    OB_FINISH_CANCELLED = 3,
    OB_FINISH_ERROR = 4,
} ob_finish;

#define OB_MAX_TOP_LOGPROBS 20

typedef struct ob_token_logprob {
    ob_token id;
    float logprob;
} ob_token_logprob;

typedef enum ob_event_type {
    OB_EVENT_TOKEN = 1,
    OB_EVENT_DONE = 2,
} ob_event_type;

typedef struct ob_event {
    ob_event_type type;
    /* OB_EVENT_TOKEN */
    ob_token token;
    float logprob;                  /* when top_logprobs >= 0 */
    int32_t n_top;
    ob_token_logprob top[OB_MAX_TOP_LOGPROBS];
    /* OB_EVENT_DONE */
    ob_finish finish;
    int status;                     /* OB_FINISH_ERROR: the ob_status */
    char message[256];              /* OB_FINISH_ERROR: why */
    int32_t n_prompt, n_cached, n_generated;
    double t_queue_ms, t_prompt_ms, t_gen_ms;
    int32_t n_drafted, n_draft_accepted; /* speculative decoding: tokens drafted / kept */
} ob_event;

/* Start the engine thread. */
int ob_engine_create(ob_model *model, const ob_engine_params *params, ob_engine **out);
/* Stop it: running requests end with OB_FINISH_CANCELLED. */
void ob_engine_free(ob_engine *e);
const ob_engine_params *ob_engine_get_params(const ob_engine *e);

/* Queue a request (the prompt is copied). OB_ERR_FULL when the queue is at
 * queue_max; OB_ERR_RANGE when the prompt cannot fit the context (the
 * message says by how much). */
int ob_engine_submit(ob_engine *e, const ob_token *prompt, int32_t n_prompt, const ob_gen_params *params,
                     ob_request **out);
/* Next event of a request, waiting up to timeout_ms (-1: forever). Returns
 * 0 with *ev filled, or 1 when the wait timed out.
 * After an OB_EVENT_DONE there are no more events. */
int ob_request_wait(ob_request *r, ob_event *ev, int timeout_ms);
/* Ask the engine to stop this request (its pages are freed at the next step). */
void ob_request_cancel(ob_request *r);
/* Cancel if needed and release the caller's handle (any thread). */
void ob_request_free(ob_request *r);

typedef struct ob_engine_stats {
    uint64_t requests_total, requests_ok, requests_failed, requests_cancelled;
    uint64_t tokens_prompt, tokens_cached, tokens_generated;
    double seconds_prompt, seconds_generate; /* engine time spent in steps with prefill / decode work */
    int32_t waiting, running, n_parallel;
    int64_t kv_blocks_used, kv_blocks_total;
    uint64_t steps, preemptions;
    uint64_t tokens_drafted, tokens_draft_accepted;
} ob_engine_stats;

void ob_engine_get_stats(ob_engine *e, ob_engine_stats *out);

/* One slot (sequence) as of the end of the engine's last step, for
 * llama-server's GET /slots. */
typedef struct ob_slot_info {
    int32_t id;
    bool is_processing;   /* a request holds the slot */
    int64_t id_task;      /* that request's number (1-based, in submission order); -1 when idle */
    int32_t n_prompt;     /* its prompt tokens */
    int32_t n_past;       /* positions it has in the KV cache */
    int32_t n_cached;     /* prompt positions reused from the prefix cache */
    int32_t n_decoded;    /* tokens generated so far */
    int32_t n_predict;    /* its max_tokens, -1 when unbounded */
    bool has_next_token;  /* still generating */
    ob_token next_token;  /* the last token generated (-1: none yet) */
} ob_slot_info;

/* Copy up to n_max slots (n_parallel of them) into out; *n gets the count.
 * Thread-safe: a snapshot the engine thread publishes after every step. */
void ob_engine_get_slots(ob_engine *e, ob_slot_info *out, int32_t n_max, int32_t *n);

/* ======================================================================
 * Model store
 *
 * Models pulled from Hugging Face live in one directory, laid out as
 * <org>/<repo>/<path in the repo>, so `-m` can name a model the way it was
 * pulled. The store is $OB_MODELS_DIR, else $XDG_CACHE_HOME/1bit/models,
 * else ~/.cache/1bit/models; every call takes a directory that overrides it
 * (NULL: that default). Nothing here loads a model. docs/store.md.
 * ====================================================================== */

/* The store directory (dir when non-empty, else the default above) into
 * out[0..size). It need not exist. */
int ob_store_dir(const char *dir, char *out, size_t size);

/* Turn a -m argument into a file path, in this order:
 *   an existing file                 -> itself, unchanged;
 *   org/repo[:file-or-quant]         -> the stored file the picking rule of
 *                                       ob_pull chooses among that repo's
 *                                       stored GGUFs (org/repo alone: Q4_K_M,
 *                                       else the first);
 *   org/repo/path.gguf               -> that path inside the store;
 *   a file name (with or without     -> the one stored file with that name.
 *   .gguf)
 * A split model resolves to its first part. When nothing matches the error
 * says what the store holds. ob_model_resolve uses the default store. */
int ob_model_resolve(const char *name_or_path, char *out, size_t size);
int ob_store_resolve(const char *dir, const char *name_or_path, char *out, size_t size);

typedef struct ob_stored_model {
    char *name;        /* "org/repo:file" (what -m accepts), or "file" for a loose file */
    char *repo;        /* "org/repo", or "" for a file copied into the store's top */
    char *file;        /* path inside the repo; part 1 for a split model */
    char *path;        /* on disk (the .part file for an unfinished download) */
    uint64_t size;     /* bytes on disk, all parts together */
    int32_t n_parts;   /* parts present (1 unless split) */
    bool complete;     /* false: an unfinished download or a split set missing parts */
} ob_stored_model;

/* Every GGUF in the store, sorted by repo then file. *out is allocated (NULL
 * when empty); free it with ob_store_list_free. A missing store is empty. */
int ob_store_list(const char *dir, ob_stored_model **out, size_t *n);
void ob_store_list_free(ob_stored_model *models, size_t n);

/* What ob_pull reports while it works. */
typedef enum ob_pull_event {
    OB_PULL_START = 0,    /* a file begins (resumed > 0: a partial download was found) */
    OB_PULL_PROGRESS = 1, /* more bytes are on disk (at most every 100 ms) */
    OB_PULL_RETRY = 2,    /* the transfer failed (message says why); it resumes from done */
    OB_PULL_VERIFY = 3,   /* every byte is on disk; the checksum is being checked */
    OB_PULL_DONE = 4,     /* the file is in the store, checked */
    OB_PULL_CACHED = 5,   /* the file was already in the store; nothing was downloaded */
} ob_pull_event;

typedef struct ob_pull_progress {
    ob_pull_event event;
    const char *repo;     /* "org/repo" */
    const char *file;     /* path inside the repo */
    const char *path;     /* where it goes on disk */
    int32_t index, count; /* this is file index (1-based) of count (parts of a split model) */
    uint64_t done, total; /* bytes of this file on disk / its size on the hub */
    uint64_t resumed;     /* bytes already on disk when this file started */
    const char *checksum; /* how the file is checked: "sha256", "git-sha1" or "none" */
    const char *message;  /* OB_PULL_RETRY: the error */
} ob_pull_progress;

/* Return nonzero to cancel the pull (it fails with OB_ERR_CANCELLED and the
 * partial download stays, to be resumed by the next pull). */
typedef int (*ob_pull_progress_fn)(const ob_pull_progress *p, void *user);

typedef struct ob_pull_params {
    const char *models_dir;  /* NULL: the default store */
    const char *endpoint;    /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;       /* NULL: $HF_TOKEN, else the huggingface-cli token file; "" : none */
    const char *revision;    /* NULL: "main" */
    int32_t retries;         /* attempts after failures that moved no bytes (default 4); a
                                dropped transfer that made progress always resumes */
    int32_t connect_timeout_s; /* default 30 */
    int32_t stall_timeout_s;   /* give up on a transfer that moves nothing this long (default 60) */
    bool force;              /* download again even when the file is already stored */
    ob_pull_progress_fn progress;
    void *progress_user;
} ob_pull_params;

ob_pull_params ob_pull_default_params(void);

/* Download a GGUF from a Hugging Face hub into the store.
 *
 * spec is "org/repo[:file-or-quant]": an explicit file (its path in the repo,
 * or a base name that is unique there), or a quant name such as Q4_K_M
 * matched case-insensitively as a token of the .gguf names (several matches:
 * the shortest name), or nothing: Q4_K_M when present, else the first .gguf
 * in name order. mmproj side files are picked only when named. A split model
 * (-00001-of-0000N.gguf) brings all its parts.
 *
 * Each file is listed by GET {endpoint}/api/models/{repo}/tree/{revision},
 * fetched from {endpoint}/{repo}/resolve/{revision}/{path} (redirects
 * followed) into <file>.part, resumed with a Range request when a .part is
 * there, checked against the hub's size and SHA-256 (lfs.oid; git's SHA-1 for
 * small non-LFS files), and only then renamed into place. A checksum mismatch
 * deletes the .part. out_path (may be NULL) gets the stored path (part 1 for
 * a split model). Thread-safe; two pulls of one file at once: the second
 * fails (the .part is locked). */
int ob_pull(const char *spec, const ob_pull_params *params, char *out_path, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* ONEBIT_H */
