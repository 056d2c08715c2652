/*
 * router.h - the request router's classifier (issue 12, docs/router.md).
 *
 * Decides what kind of conversation a chat request opens: code, prose, short
 * or long. `long` comes from a size gate (OB_ROUTE_LONG_CHARS or more
 * characters of user content) without asking the model; the other three come
 * from a multinomial logistic regression over hashed word and byte n-grams
 * plus a few structural cues, with temperature-scaled probabilities so that
 * the confidence is calibrated. The weights are trained offline by
 * tools/router_train.c (which uses the feature extractor below, so training
 * and inference can never disagree on features) and shipped as a generated C
 * array (router_model.c); a text model file of the same content can be
 * loaded instead.
 *
 * Owns: features, the model, classification. Leaves to others: the policy
 * that maps a class to a device and drafter (policy.h), and caching a
 * decision per conversation prefix for the server (service.h).
 */
#ifndef OB_ROUTER_H
#define OB_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ob_route_class {
    OB_ROUTE_CODE = 0,
    OB_ROUTE_PROSE = 1,
    OB_ROUTE_SHORT = 2,
    OB_ROUTE_LONG = 3,
    OB_ROUTE_N = 4,
} ob_route_class;

/* Classes the linear model decides (long is the size gate's). */
#define OB_ROUTE_N_MODEL 3
/* User content of this many characters (UTF-8 code points) or more is `long`. */
#define OB_ROUTE_LONG_CHARS 1024

/* One chat message; content need not be NUL-terminated. Only user content
 * counts: "system", "developer", "assistant" and "tool" messages are not read
 * for features or the gate (beyond two cues: a system message is there, an
 * assistant reply has a code fence); any other role (or NULL) counts as user. */
typedef struct ob_route_msg {
    const char *role;
    const char *content;
    size_t len;
} ob_route_msg;

/* True for a message whose content counts as the user's (the rule above). */
bool ob_route_msg_is_user(const ob_route_msg *m);

typedef struct ob_route_result {
    ob_route_class cls;
    float confidence;        /* calibrated probability of cls; 1 for the size gate */
    float prob[OB_ROUTE_N];  /* per class; prob[OB_ROUTE_LONG] is 0 or 1 */
    size_t user_chars;       /* code points of user content (what the gate saw) */
} ob_route_result;

/* One hashed feature: bucket index and value. */
typedef struct ob_route_feat {
    uint32_t idx;
    float val;
} ob_route_feat;

typedef struct ob_router ob_router;

/* ---- names ---- */
const char *ob_route_class_name(ob_route_class c); /* "code", ... ; "?" out of range */
/* Class for a name, or OB_ERR_NOT_FOUND. */
int ob_route_class_parse(const char *name);

/* ---- the model ---- */

/* Load a router. path NULL: the built-in model (router_model.c). Otherwise a
 * text model file as tools/router_train writes it (docs/router.md). */
int ob_router_init(ob_router **out, const char *path);
void ob_router_free(ob_router *r); /* NULL ok */
uint32_t ob_router_n_buckets(const ob_router *r);
float ob_router_temperature(const ob_router *r);

/* Classify a conversation from its messages. Thread-safe (the router is
 * read-only), allocation-free. The caller passes the conversation's opening
 * messages; later turns should reuse the decision. */
int ob_router_classify(const ob_router *r, const ob_route_msg *msgs, size_t n_msgs,
                       ob_route_result *res);

/* Same, from JSON text: {"messages": [{"role":..., "content": "..."}, ...]}
 * (content may also be an array of {"type":"text","text":...} parts), or
 * {"text": "..."} / {"prompt": "..."} for a single user message. */
int ob_router_classify_json(const ob_router *r, const char *json, size_t len,
                            ob_route_result *res);

/* ---- a process-wide counter of decisions ---- */

/* Classify a chat request given as the JSON text ob_router_classify_json
 * accepts, with the built-in router (created on first use, shared by all
 * threads), count the decision and log it at debug level. (The server uses
 * its own ob_route_service, service.h, which also caches per conversation
 * and applies the policy.) Never fails the request: a request it cannot classify (or a
 * failure to create the router) is counted as unclassified. Returns the
 * class, or a negative status. */
int ob_router_observe(const char *json, size_t len);
/* Decisions counted so far: counts[class] for each class, counts[OB_ROUTE_N]
 * the unclassified. Atomic reads; safe from any thread. */
void ob_router_observed(uint64_t counts[OB_ROUTE_N + 1]);

/* ---- evaluation (`1bit route --eval`, tests/test_router.c) ---- */

typedef struct ob_route_eval {
    size_t n;                                /* labelled requests read */
    size_t n_class[OB_ROUTE_N];              /* by true class */
    size_t confusion[OB_ROUTE_N][OB_ROUTE_N]; /* [true][decided] */
    double accuracy;
    double class_accuracy[OB_ROUTE_N];       /* NAN for a class with no requests */
    double ece;          /* expected calibration error, 10 bins, every decision */
    double ece_model;    /* the same over the model's decisions only (gate left out) */
    double mean_us;      /* mean wall time of one ob_router_classify call, microseconds */
    double mean_cpu_us;  /* the same in CPU time of the calling thread (not counting preemption) */
    double p50_us, p99_us, max_us; /* over requests (each its mean over repeat calls) */
    double mean_json_us; /* mean time of parsing the request JSON and classifying it */
} ob_route_eval;

/* Classify every line of a JSONL file of {"label": CLASS, "messages"|"text": ...}
 * and fill ev. Each request is classified once untimed, then timed over
 * `repeat` calls (>= 1) on the calling thread. When errors is not NULL, each wrong decision is printed there
 * (line, true class, decided class, confidence, start of the text). */
int ob_router_eval_file(const ob_router *r, const char *path, int repeat, ob_route_eval *ev,
                        void *errors /* FILE *, or NULL */);

/* ---- features (shared with the trainer) ---- */

/* Hash the conversation into at most cap features over n_buckets (a power of
 * two). Writes the count to *n_out and the user content's code points to
 * *user_chars. A bucket may appear more than once (the model sums). The
 * n-gram features share value 1/sqrt(their count), so they have unit L2 norm
 * before hashing; structural cues have value 1. Only the first
 * OB_ROUTE_LONG_CHARS code points of user text are read for n-grams; past
 * cap, features are dropped (OB_ROUTE_MAX_FEATS is always enough). */
int ob_router_features(const ob_route_msg *msgs, size_t n_msgs, uint32_t n_buckets,
                       ob_route_feat *feats, size_t cap, size_t *n_out, size_t *user_chars);
/* Enough room for any input's features. */
#define OB_ROUTE_MAX_FEATS 16384

/* Parse the JSON forms ob_router_classify_json accepts into messages that
 * point into *root (a json_t *, freed by the caller with json_decref).
 * msgs: room for cap messages; *n_out gets the count. */
int ob_router_parse_json(const char *json, size_t len, void **root, ob_route_msg *msgs,
                         size_t cap, size_t *n_out);

/* The built-in model's arrays (router_model.c, generated by tools/router_train). */
extern const uint32_t ob_router_builtin_n_buckets;
extern const float ob_router_builtin_temperature;
extern const float ob_router_builtin_bias[OB_ROUTE_N_MODEL];
extern const float ob_router_builtin_weights[]; /* [n_buckets][OB_ROUTE_N_MODEL] */

#endif
