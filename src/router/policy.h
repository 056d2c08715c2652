/*
 * policy.h - what the server does with a router decision (issue 12,
 * docs/router.md "Policy").
 *
 * A policy names targets and maps each class to one. A target is a set of
 * per-request settings the server can vary today: the drafter (off, or the
 * server's own drafter with a shorter draft) and the device (only the one
 * the server runs on, until several are loaded at once). The file is JSON:
 *
 *     {"format": "onebit-route-policy/1",
 *      "default": "plain",
 *      "min_conf": 0.6,
 *      "targets": {"plain":  {"drafter": "none"},
 *                  "ngram4": {"drafter": "ngram", "draft_n_max": 4}},
 *      "classes": {"code": "ngram4", "prose": "plain"},
 *      "measured": {...}}
 *
 * Owns: parsing and checking the file, turning a target into generation
 * settings and into the text of the X-1bit-Route header. Leaves to others:
 * deciding the class (router.h) and when to apply the policy (service.h).
 */
#ifndef OB_ROUTER_POLICY_H
#define OB_ROUTER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onebit.h"
#include "router.h"

#define OB_ROUTE_MAX_TARGETS 16
#define OB_ROUTE_NAME_MAX 32

/* drafter of a target: the server's own setting, or one of ob_spec_type */
#define OB_ROUTE_DRAFTER_SERVER (-1)

typedef struct ob_route_target {
    char name[OB_ROUTE_NAME_MAX];   /* [A-Za-z0-9_.+-], 1..31 bytes */
    char device[OB_ROUTE_NAME_MAX]; /* "": the server's device */
    int drafter;                    /* OB_ROUTE_DRAFTER_SERVER or an ob_spec_type */
    int32_t draft_n_max;            /* > 0: at most this many drafted tokens a step; 0: the server's */
} ob_route_target;

typedef struct ob_route_policy {
    int n_targets;
    ob_route_target targets[OB_ROUTE_MAX_TARGETS];
    int class_target[OB_ROUTE_N]; /* index into targets, per class */
    int default_target;           /* below the confidence threshold, unclassified, unlisted classes */
    float min_conf;               /* < 0: the file does not set it */
} ob_route_policy;

/* The policy with no file: one target "default" (the server's settings)
 * for every class. */
void ob_route_policy_default(ob_route_policy *p);
/* Parse policy JSON. Unknown keys (except "measured" and "comment", which
 * are kept for people) are errors, so a misspelt key never goes unnoticed.
 * OB_ERR_FORMAT with a message naming the key on bad input. */
int ob_route_policy_parse(const char *json, size_t len, ob_route_policy *p);
/* Read and parse a policy file (the error names the file). */
int ob_route_policy_load(const char *path, ob_route_policy *p);

/* The server a policy runs on: what its targets may ask for. */
typedef struct ob_route_server_caps {
    const char *device;     /* the server's device ("cpu", "auto", "cuda:0") */
    ob_spec_type spec_type; /* its drafter (OB_SPEC_NONE: none) */
    int32_t spec_n_max;     /* its longest draft */
} ob_route_server_caps;

/* OB_ERR_UNSUPPORTED, naming the target, when a target asks for what the
 * server cannot do: another device, a drafter the server was not started
 * with, or a draft longer than the server's. */
int ob_route_policy_check(const ob_route_policy *p, const ob_route_server_caps *caps);

/* Change generation settings as target t says. It only ever takes
 * speculation away or shortens drafts, never adds them back: a request that
 * turned drafting off itself keeps it off. */
void ob_route_target_apply(const ob_route_target *t, ob_gen_params *g);

/* "device=cpu;drafter=ngram:8" for target t on that server. */
int ob_route_target_describe(const ob_route_target *t, const ob_route_server_caps *caps, char *buf, size_t size);

/* "none", "ngram", "draft"; "server" for OB_ROUTE_DRAFTER_SERVER. */
const char *ob_route_drafter_name(int drafter);

#endif
