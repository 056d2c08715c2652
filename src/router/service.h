/*
 * service.h - the router as the server runs it (issue 12, docs/router.md
 * "In the server"): one object per server holding the classifier, the
 * policy, the per-conversation decision cache and the counters /metrics
 * prints.
 *
 * A decision is made once per conversation: the cache is keyed on a hash of
 * the messages up to a user message, so when turn 3 arrives with turns 1-2
 * replayed before it, the decision made at turn 1 is found under the prefix
 * and reused, and a chat keeps its route. A conversation the server has not
 * seen is classified from everything it sends. Below the confidence
 * threshold, and for a request that cannot be classified, the policy's
 * default target is used.
 *
 * Thread-safe: the HTTP threads call ob_route_service_decide concurrently;
 * the cache is under a mutex, counters are atomics.
 */
#ifndef OB_ROUTER_SERVICE_H
#define OB_ROUTER_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "router.h"

typedef struct ob_route_service ob_route_service;

typedef struct ob_route_service_params {
    bool apply;               /* --router: apply the policy and name the route in a header; false: count only */
    const char *policy_path;  /* policy file, or NULL: every class to the server's own settings */
    float min_conf;           /* --route-min-conf; < 0: the policy's min_conf, else 0 */
    ob_route_server_caps caps;/* what the server can do (the policy is checked against it) */
    int cache_entries;        /* conversations remembered (<= 0: 4096); the least recently used go first */
} ob_route_service_params;

/* Create: load the built-in classifier, load and check the policy. A policy
 * that does not parse or asks for what the server cannot do is an error
 * here (the server does not start). */
int ob_route_service_create(const ob_route_service_params *p, ob_route_service **out);
void ob_route_service_free(ob_route_service *s); /* NULL ok */

bool ob_route_service_applies(const ob_route_service *s);
const ob_route_policy *ob_route_service_policy(const ob_route_service *s);
float ob_route_service_min_conf(const ob_route_service *s);

typedef struct ob_route_decision {
    int cls;             /* an ob_route_class, or OB_ROUTE_N: the request could not be classified */
    float confidence;    /* 0 when unclassified */
    bool cached;         /* found under a prefix of this conversation */
    bool below_min_conf; /* the default target was used because confidence < min_conf */
    int target;          /* index into the policy's targets */
    double seconds;      /* time the decision took (parse, cache, classifier) */
} ob_route_decision;

/* Decide the route of a chat request given as its JSON text
 * ({"messages": [...]}, as ob_router_classify_json reads it). Never fails:
 * an unreadable request is unclassified and takes the default target.
 * Counts the decision. */
void ob_route_service_decide(ob_route_service *s, const char *json, size_t len, ob_route_decision *d);
/* Change a request's generation settings to its decision's target. */
void ob_route_service_apply(const ob_route_service *s, const ob_route_decision *d, ob_gen_params *g);
/* The X-1bit-Route header's value:
 * "code;conf=0.97;target=NAME;device=cpu;drafter=ngram:8[;cached][;below_min_conf]". */
int ob_route_service_header(const ob_route_service *s, const ob_route_decision *d, char *buf, size_t size);

/* ---- counters, for /metrics ---- */

/* Upper bounds (seconds) of the decision-time histogram's buckets; the
 * last bucket is +Inf and not listed. */
#define OB_ROUTE_LAT_BUCKETS 8
extern const double ob_route_lat_bounds[OB_ROUTE_LAT_BUCKETS];

typedef struct ob_route_stats {
    uint64_t decisions[OB_ROUTE_N + 1];           /* by class; [OB_ROUTE_N]: unclassified */
    uint64_t by_target[OB_ROUTE_MAX_TARGETS];     /* requests sent to each target (with apply) */
    uint64_t classified;                          /* classifier runs (cache misses) */
    uint64_t cache_hits;                          /* decisions reused from earlier turns */
    uint64_t below_min_conf;                      /* decisions that fell back to the default target */
    uint64_t lat_count[OB_ROUTE_LAT_BUCKETS + 1]; /* per bucket, not cumulative; last: over the largest bound */
    double lat_sum;                               /* seconds, all decisions */
} ob_route_stats;

void ob_route_service_stats(const ob_route_service *s, ob_route_stats *st);

#endif
