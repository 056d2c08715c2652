/*
 * service.c - the server's router: classify once per conversation, map the
 * class to a target through the policy, count and time every decision.
 *
 * The conversation cache: a request's messages are hashed in order (role,
 * then content, each with a separator), and the hash after every user
 * message is a key for the conversation up to there. A decision is stored
 * under the key of the whole request (up to its last user message); a later
 * request finds it under the longest of its own prefix keys that is stored.
 * Turn 3 of a chat replays turns 1-2, so it finds turn 1's decision. The
 * table is set-associative (4 ways, least recently used way replaced), so
 * it has a fixed size and never allocates after creation.
 *
 * Owns: the classifier instance, the policy, the cache and the counters.
 * Leaves to the server: where the header goes, logging, /metrics text.
 */
#include "service.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../core/mem.h"
#include "../core/status.h"

#define WAYS 4
#define MAX_MSGS 256 /* messages read from one request; a longer chat keys on its first 256 */

const double ob_route_lat_bounds[OB_ROUTE_LAT_BUCKETS] = {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2};

typedef struct entry {
    uint64_t key;  /* 0: empty */
    uint64_t used; /* tick of the last use */
    float conf;
    int cls;
} entry;

struct ob_route_service {
    bool apply;
    float min_conf;
    ob_route_policy policy;
    ob_route_server_caps caps;
    char device[OB_ROUTE_NAME_MAX];
    char desc[OB_ROUTE_MAX_TARGETS][96]; /* "device=...;drafter=..." per target */
    ob_router *router;

    pthread_mutex_t lock; /* guards the cache */
    entry *cache;         /* [n_sets][WAYS] */
    uint64_t n_sets, tick;

    _Atomic uint64_t decisions[OB_ROUTE_N + 1];
    _Atomic uint64_t by_target[OB_ROUTE_MAX_TARGETS];
    _Atomic uint64_t classified, cache_hits, below_min_conf;
    _Atomic uint64_t lat_count[OB_ROUTE_LAT_BUCKETS + 1];
    _Atomic uint64_t lat_ns;
};

int ob_route_service_create(const ob_route_service_params *p, ob_route_service **out) {
    if (!p || !out) return ob_err(OB_ERR_INVALID_ARG, "ob_route_service_create: bad arguments");
    *out = NULL;
    ob_route_service *s = ob_calloc(1, sizeof *s);
    if (!s) return ob_err(OB_ERR_OOM, "router");
    pthread_mutex_init(&s->lock, NULL);
    s->apply = p->apply;
    s->caps = p->caps;
    snprintf(s->device, sizeof s->device, "%s", p->caps.device ? p->caps.device : "auto");
    s->caps.device = s->device;
    int rc = 0;
    if (p->policy_path) rc = ob_route_policy_load(p->policy_path, &s->policy);
    else ob_route_policy_default(&s->policy);
    if (rc == 0) rc = ob_route_policy_check(&s->policy, &s->caps);
    s->min_conf = p->min_conf >= 0 ? p->min_conf : s->policy.min_conf >= 0 ? s->policy.min_conf : 0.0f;
    for (int t = 0; rc == 0 && t < s->policy.n_targets; t++)
        rc = ob_route_target_describe(&s->policy.targets[t], &s->caps, s->desc[t], sizeof s->desc[t]);
    if (rc == 0) rc = ob_router_init(&s->router, NULL);
    if (rc == 0) {
        uint64_t n = p->cache_entries > 0 ? (uint64_t)p->cache_entries : 4096;
        s->n_sets = 1;
        while (s->n_sets * WAYS < n) s->n_sets *= 2;
        s->cache = ob_calloc(s->n_sets * WAYS, sizeof *s->cache);
        if (!s->cache) rc = ob_err(OB_ERR_OOM, "router cache");
    }
    if (rc < 0) {
        ob_route_service_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ob_route_service_free(ob_route_service *s) {
    if (!s) return;
    ob_router_free(s->router);
    ob_free(s->cache);
    pthread_mutex_destroy(&s->lock);
    ob_free(s);
}

bool ob_route_service_applies(const ob_route_service *s) { return s && s->apply; }
const ob_route_policy *ob_route_service_policy(const ob_route_service *s) { return &s->policy; }
float ob_route_service_min_conf(const ob_route_service *s) { return s->min_conf; }

/* ---- the conversation cache ---- */

static uint64_t fnv64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t finish(uint64_t h) { /* spread the bits for the set index; never 0 (empty) */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h ? h : 1;
}

/* Keys of the conversation at each user message: keys[i] for the prefix
 * that ends at the i-th user message. Returns how many. */
static size_t prefix_keys(const ob_route_msg *m, size_t n, uint64_t *keys) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t k = 0;
    static const char rs = 0x1e, us = 0x1f;
    for (size_t i = 0; i < n; i++) {
        const char *role = m[i].role ? m[i].role : "";
        h = fnv64(h, role, strlen(role));
        h = fnv64(h, &us, 1);
        if (m[i].content) h = fnv64(h, m[i].content, m[i].len);
        h = fnv64(h, &rs, 1);
        if (ob_route_msg_is_user(&m[i])) keys[k++] = finish(h);
    }
    return k;
}

static entry *lookup(ob_route_service *s, uint64_t key) {
    entry *set = &s->cache[(key & (s->n_sets - 1)) * WAYS];
    for (int w = 0; w < WAYS; w++)
        if (set[w].key == key) return &set[w];
    return NULL;
}

static void store(ob_route_service *s, uint64_t key, int cls, float conf) {
    entry *e = lookup(s, key);
    if (!e) {
        entry *set = &s->cache[(key & (s->n_sets - 1)) * WAYS];
        e = &set[0];
        for (int w = 1; w < WAYS; w++)
            if (set[w].used < e->used) e = &set[w];
    }
    e->key = key;
    e->cls = cls;
    e->conf = conf;
    e->used = ++s->tick;
}

/* ---- decisions ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ob_route_service_decide(ob_route_service *s, const char *json, size_t len, ob_route_decision *d) {
    double t0 = now_s();
    memset(d, 0, sizeof *d);
    d->cls = OB_ROUTE_N;
    ob_route_msg msgs[MAX_MSGS];
    uint64_t keys[MAX_MSGS];
    size_t n = 0, nk = 0;
    void *root = NULL;
    if (json && ob_router_parse_json(json, len, &root, msgs, MAX_MSGS, &n) == 0) nk = prefix_keys(msgs, n, keys);
    if (nk > 0) {
        pthread_mutex_lock(&s->lock);
        for (size_t k = nk; k-- > 0;) {
            entry *e = lookup(s, keys[k]);
            if (!e) continue;
            d->cls = e->cls;
            d->confidence = e->conf;
            d->cached = true;
            e->used = ++s->tick;
            if (k + 1 < nk) store(s, keys[nk - 1], d->cls, d->confidence); /* the next turn finds it sooner */
            break;
        }
        pthread_mutex_unlock(&s->lock);
        if (!d->cached) {
            ob_route_result res;
            if (ob_router_classify(s->router, msgs, n, &res) == 0) {
                d->cls = (int)res.cls;
                d->confidence = res.confidence;
                atomic_fetch_add(&s->classified, 1);
                pthread_mutex_lock(&s->lock);
                store(s, keys[nk - 1], d->cls, d->confidence);
                pthread_mutex_unlock(&s->lock);
            }
        }
    }
    json_decref((json_t *)root);

    d->target = s->policy.default_target;
    if (d->cls < OB_ROUTE_N) {
        d->below_min_conf = d->confidence < s->min_conf;
        if (!d->below_min_conf) d->target = s->policy.class_target[d->cls];
    }
    d->seconds = now_s() - t0;

    atomic_fetch_add(&s->decisions[d->cls], 1);
    if (d->cached) atomic_fetch_add(&s->cache_hits, 1);
    if (d->below_min_conf) atomic_fetch_add(&s->below_min_conf, 1);
    if (s->apply) atomic_fetch_add(&s->by_target[d->target], 1);
    int b = 0;
    while (b < OB_ROUTE_LAT_BUCKETS && d->seconds > ob_route_lat_bounds[b]) b++;
    atomic_fetch_add(&s->lat_count[b], 1);
    atomic_fetch_add(&s->lat_ns, (uint64_t)(d->seconds * 1e9 + 0.5));
}

void ob_route_service_apply(const ob_route_service *s, const ob_route_decision *d, ob_gen_params *g) {
    if (s->apply && d->target >= 0 && d->target < s->policy.n_targets) ob_route_target_apply(&s->policy.targets[d->target], g);
}

int ob_route_service_header(const ob_route_service *s, const ob_route_decision *d, char *buf, size_t size) {
    int t = d->target >= 0 && d->target < s->policy.n_targets ? d->target : s->policy.default_target;
    int n;
    if (d->cls < OB_ROUTE_N)
        n = snprintf(buf, size, "%s;conf=%.3f;target=%s;%s%s%s", ob_route_class_name((ob_route_class)d->cls),
                     (double)d->confidence, s->policy.targets[t].name, s->desc[t], d->cached ? ";cached" : "",
                     d->below_min_conf ? ";below_min_conf" : "");
    else
        n = snprintf(buf, size, "unclassified;target=%s;%s", s->policy.targets[t].name, s->desc[t]);
    return n >= 0 && (size_t)n < size ? 0 : ob_err(OB_ERR_RANGE, "route header too long");
}

void ob_route_service_stats(const ob_route_service *s, ob_route_stats *st) {
    memset(st, 0, sizeof *st);
    for (int c = 0; c <= OB_ROUTE_N; c++) st->decisions[c] = atomic_load(&s->decisions[c]);
    for (int t = 0; t < OB_ROUTE_MAX_TARGETS; t++) st->by_target[t] = atomic_load(&s->by_target[t]);
    st->classified = atomic_load(&s->classified);
    st->cache_hits = atomic_load(&s->cache_hits);
    st->below_min_conf = atomic_load(&s->below_min_conf);
    for (int b = 0; b <= OB_ROUTE_LAT_BUCKETS; b++) st->lat_count[b] = atomic_load(&s->lat_count[b]);
    st->lat_sum = (double)atomic_load(&s->lat_ns) * 1e-9;
}
