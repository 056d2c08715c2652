/*
 * fuzz_router.c - libFuzzer target for the request router's parsers of
 * outside input (src/router: docs/router.md). Every input goes through all
 * of them, since a route policy and a chat request body are both JSON:
 *   - ob_route_policy_parse (the --route-policy file);
 *   - ob_router_parse_json, ob_router_classify_json and ob_router_observe
 *     (a chat request body: {"messages": [...]}, {"text": ...}, {"prompt": ...});
 *   - ob_route_class_parse (a class name, from a policy or an eval label);
 *   - ob_router_init on a text model file, for inputs that start like one
 *     ("onebit-router"), written to a memfd.
 *
 * Checked beyond "no crash":
 *   - every call returns 0 (or a class) or a negative status with a message;
 *   - an accepted policy has 1..OB_ROUTE_MAX_TARGETS targets with valid,
 *     distinct names, default and per-class targets in range, drafters and
 *     draft lengths in range (no draft length with drafter "none"), min_conf
 *     unset or in [0, 1]; every target describes itself, and applying it
 *     never turns drafting back on nor lengthens a draft;
 *   - parsed messages are at most cap, each with a role and NUL-terminated
 *     content of the stated length, and parsing again with a smaller cap
 *     gives a prefix of the same messages; a refusal leaves no root;
 *   - a classification has a class in range, probabilities in [0, 1] that
 *     sum to 1, confidence = prob[cls], `long` exactly when the user text
 *     reaches OB_ROUTE_LONG_CHARS, and the same result as classifying the
 *     parsed messages directly; the features of those messages stay within
 *     the bucket count and have finite positive values;
 *   - ob_router_observe counts every call exactly once, under the class it
 *     returns (or as unclassified).
 */
#define _GNU_SOURCE /* memfd_create */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/status.h"
#include "onebit.h"
#include "router/policy.h"
#include "router/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

#define MSG_CAP 64

static ob_router *g_router; /* the built-in model, made once */

static bool name_ok(const char *s, size_t max) {
    size_t n = strnlen(s, max);
    if (n == 0 || n >= max) return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.+:", s[i])) return false;
    return true;
}

static void check_policy(const uint8_t *data, size_t size) {
    ob_route_policy p;
    memset(&p, 0xA5, sizeof p); /* a parse that succeeds must set every field it reports */
    const int rc = ob_route_policy_parse((const char *)data, size, &p);
    REQUIRE(rc <= 0);
    if (rc < 0) {
        REQUIRE(ob_last_error()[0] != '\0');
        ob_err_clear();
        return;
    }
    REQUIRE(p.n_targets >= 1 && p.n_targets <= OB_ROUTE_MAX_TARGETS);
    REQUIRE(p.default_target >= 0 && p.default_target < p.n_targets);
    for (int c = 0; c < OB_ROUTE_N; c++) REQUIRE(p.class_target[c] >= 0 && p.class_target[c] < p.n_targets);
    REQUIRE(p.min_conf == -1.0f || (p.min_conf >= 0.0f && p.min_conf <= 1.0f));
    static const ob_route_server_caps caps[] = {
        {"cpu", OB_SPEC_NONE, 0}, {"auto", OB_SPEC_NGRAM, 16}, {NULL, OB_SPEC_DRAFT, 64}};
    for (int i = 0; i < p.n_targets; i++) {
        const ob_route_target *t = &p.targets[i];
        REQUIRE(name_ok(t->name, sizeof t->name));
        REQUIRE(t->device[0] == '\0' || name_ok(t->device, sizeof t->device));
        REQUIRE(t->drafter >= OB_ROUTE_DRAFTER_SERVER && t->drafter <= OB_SPEC_DRAFT);
        REQUIRE(strcmp(ob_route_drafter_name(t->drafter), "?") != 0);
        REQUIRE(t->draft_n_max >= 0 && t->draft_n_max <= 64);
        REQUIRE(!(t->drafter == OB_SPEC_NONE && t->draft_n_max > 0));
        for (int j = 0; j < i; j++) REQUIRE(strcmp(p.targets[j].name, t->name) != 0);
        for (size_t k = 0; k < OB_ARRAY_LEN(caps); k++) {
            char buf[128];
            REQUIRE(ob_route_target_describe(t, &caps[k], buf, sizeof buf) == 0);
            REQUIRE(strncmp(buf, "device=", 7) == 0);
            const int crc = ob_route_policy_check(&p, &caps[k]);
            REQUIRE(crc == 0 || (crc == OB_ERR_UNSUPPORTED && ob_last_error()[0] != '\0'));
            ob_err_clear();
        }
        /* applying a target only takes drafting away */
        ob_gen_params g = {0};
        g.no_speculative = (i & 1) != 0;
        g.spec_n_max = (int32_t)(i * 5);
        const ob_gen_params before = g;
        ob_route_target_apply(t, &g);
        REQUIRE(g.no_speculative || !before.no_speculative);
        REQUIRE(before.spec_n_max == 0 || (g.spec_n_max > 0 && g.spec_n_max <= before.spec_n_max));
    }
}

static void check_class_name(const uint8_t *data, size_t size) {
    char name[64];
    size_t n = size < sizeof name - 1 ? size : sizeof name - 1;
    memcpy(name, data, n);
    name[n] = '\0';
    const int c = ob_route_class_parse(name);
    if (c < 0) {
        REQUIRE(c == OB_ERR_NOT_FOUND && ob_last_error()[0] != '\0');
        for (int k = 0; k < OB_ROUTE_N; k++) REQUIRE(strcmp(name, ob_route_class_name((ob_route_class)k)) != 0);
        ob_err_clear();
    } else {
        REQUIRE(c < OB_ROUTE_N && strcmp(name, ob_route_class_name((ob_route_class)c)) == 0);
    }
}

static void check_msgs(const ob_route_msg *m, size_t n) {
    for (size_t i = 0; i < n; i++) {
        REQUIRE(m[i].role != NULL && m[i].content != NULL);
        REQUIRE(m[i].content[m[i].len] == '\0' && memchr(m[i].content, 0, m[i].len) == NULL);
    }
}

static size_t utf8_chars(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

static void check_result(const ob_route_result *r, const ob_route_msg *m, size_t n) {
    REQUIRE((int)r->cls >= 0 && r->cls < OB_ROUTE_N);
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        if (ob_route_msg_is_user(&m[i])) chars += utf8_chars(m[i].content, m[i].len);
    REQUIRE(r->user_chars == chars);
    if (r->cls == OB_ROUTE_LONG) {
        REQUIRE(chars >= OB_ROUTE_LONG_CHARS && r->confidence == 1.0f && r->prob[OB_ROUTE_LONG] == 1.0f);
        return;
    }
    REQUIRE(chars < OB_ROUTE_LONG_CHARS && r->prob[OB_ROUTE_LONG] == 0.0f);
    double sum = 0;
    for (int c = 0; c < OB_ROUTE_N_MODEL; c++) {
        REQUIRE(isfinite(r->prob[c]) && r->prob[c] >= 0.0f && r->prob[c] <= 1.0f);
        REQUIRE(r->prob[c] <= r->prob[r->cls]);
        sum += r->prob[c];
    }
    REQUIRE(fabs(sum - 1.0) < 1e-4);
    REQUIRE(r->confidence == r->prob[r->cls]);
}

static void check_request(const uint8_t *data, size_t size) {
    const char *json = (const char *)data;
    ob_route_msg msgs[MSG_CAP];
    size_t n = 99;
    void *root = (void *)&n;
    const int rc = ob_router_parse_json(json, size, &root, msgs, MSG_CAP, &n);
    ob_route_result res;
    const int crc = ob_router_classify_json(g_router, json, size, &res);
    if (rc < 0) {
        REQUIRE(root == NULL && n == 0 && ob_last_error()[0] != '\0');
        REQUIRE(crc == rc);
        ob_err_clear();
        return;
    }
    REQUIRE(root != NULL && n <= MSG_CAP);
    check_msgs(msgs, n);
    /* a smaller cap keeps the opening messages */
    ob_route_msg few[3];
    size_t nf = 0;
    void *root2 = NULL;
    REQUIRE(ob_router_parse_json(json, size, &root2, few, 3, &nf) == 0);
    REQUIRE(nf == (n < 3 ? n : 3));
    for (size_t i = 0; i < nf; i++) {
        REQUIRE(strcmp(few[i].role, msgs[i].role) == 0 && few[i].len == msgs[i].len);
        REQUIRE(memcmp(few[i].content, msgs[i].content, few[i].len) == 0);
    }
    json_decref((json_t *)root2);
    /* classify_json is parse + classify */
    REQUIRE(crc == 0);
    check_result(&res, msgs, n);
    ob_route_result direct;
    REQUIRE(ob_router_classify(g_router, msgs, n, &direct) == 0);
    REQUIRE(memcmp(&direct, &res, sizeof res) == 0);
    /* the trainer's view of the same messages */
    static ob_route_feat feats[OB_ROUTE_MAX_FEATS];
    size_t nfeat = 0, chars = 0;
    const uint32_t nb = ob_router_n_buckets(g_router);
    REQUIRE(ob_router_features(msgs, n, nb, feats, OB_ROUTE_MAX_FEATS, &nfeat, &chars) == 0);
    REQUIRE(nfeat <= OB_ROUTE_MAX_FEATS && chars == res.user_chars);
    for (size_t i = 0; i < nfeat; i++) REQUIRE(feats[i].idx < nb && isfinite(feats[i].val) && feats[i].val > 0);
    json_decref((json_t *)root);
}

static void check_observe(const uint8_t *data, size_t size) {
    uint64_t before[OB_ROUTE_N + 1], after[OB_ROUTE_N + 1];
    ob_router_observed(before);
    const int c = ob_router_observe((const char *)data, size);
    ob_router_observed(after);
    REQUIRE(c < OB_ROUTE_N);
    const int slot = c < 0 ? OB_ROUTE_N : c;
    for (int k = 0; k <= OB_ROUTE_N; k++) REQUIRE(after[k] == before[k] + (k == slot));
    ob_err_clear();
}

/* A router model file: the loader reads a path, so the bytes go to a memfd. */
static void check_model_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    if (fd < 0) fd = memfd_create("fuzz_router_model", 0);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 0) == 0);
    REQUIRE(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ob_router *r = NULL;
    const int rc = ob_router_init(&r, path);
    REQUIRE(rc <= 0);
    if (rc < 0) {
        REQUIRE(r == NULL && ob_last_error()[0] != '\0');
        ob_err_clear();
        return;
    }
    const uint32_t nb = ob_router_n_buckets(r);
    REQUIRE(nb > 0 && (nb & (nb - 1)) == 0);
    REQUIRE(ob_router_temperature(r) > 0.0f && isfinite(ob_router_temperature(r)));
    ob_route_msg m = {"user", "fn main() { println!(\"hi\"); }", 30};
    ob_route_result res;
    REQUIRE(ob_router_classify(r, &m, 1, &res) == 0);
    REQUIRE((int)res.cls >= 0 && res.cls < OB_ROUTE_N);
    REQUIRE(isfinite(res.confidence));
    ob_router_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_router) REQUIRE(ob_router_init(&g_router, NULL) == 0);
    check_policy(data, size);
    check_class_name(data, size);
    check_request(data, size);
    check_observe(data, size);
    static const char magic[] = "onebit-router";
    if (size >= sizeof magic - 1 && memcmp(data, magic, sizeof magic - 1) == 0) check_model_file(data, size);
    return 0;
}
