/*
 * policy.c - the route policy file: parse, check against the server, apply.
 *
 * The format is in policy.h and docs/router.md. Parsing is strict (every
 * key known, every name checked) because a policy that is silently
 * half-read sends requests to the wrong place without anyone noticing;
 * checking against the server happens once, at start, so a policy that
 * asks for a drafter or device the server does not have is a start-up
 * error rather than a quiet no-op on every request.
 */
#include "policy.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../core/status.h"

static const char *const g_drafters[] = {"none", "ngram", "draft"};

const char *ob_route_drafter_name(int drafter) {
    if (drafter == OB_ROUTE_DRAFTER_SERVER) return "server";
    return drafter >= 0 && drafter < (int)OB_ARRAY_LEN(g_drafters) ? g_drafters[drafter] : "?";
}

static void target_init(ob_route_target *t, const char *name) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->drafter = OB_ROUTE_DRAFTER_SERVER;
}

void ob_route_policy_default(ob_route_policy *p) {
    memset(p, 0, sizeof *p);
    p->n_targets = 1;
    target_init(&p->targets[0], "default");
    p->default_target = 0;
    for (int c = 0; c < OB_ROUTE_N; c++) p->class_target[c] = 0;
    p->min_conf = -1.0f;
}

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= OB_ROUTE_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  ch == '-' || ch == '.' || ch == '+' || ch == ':';
        if (!ok) return false;
    }
    return true;
}

static int find_target(const ob_route_policy *p, const char *name) {
    for (int i = 0; i < p->n_targets; i++)
        if (!strcmp(p->targets[i].name, name)) return i;
    return -1;
}

static int parse_target(const char *name, json_t *o, ob_route_target *t) {
    if (!name_ok(name))
        return ob_err(OB_ERR_FORMAT, "policy: target name '%s' must be 1-31 characters of A-Z a-z 0-9 _ - . + :", name);
    if (!json_is_object(o)) return ob_err(OB_ERR_FORMAT, "policy: targets.%s must be an object", name);
    target_init(t, name);
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (!strcmp(key, "device")) {
            const char *d = json_string_value(v);
            if (!d || !name_ok(d)) return ob_err(OB_ERR_FORMAT, "policy: targets.%s.device must be a device name", name);
            if (strcmp(d, "default") != 0) snprintf(t->device, sizeof t->device, "%s", d);
        } else if (!strcmp(key, "drafter")) {
            const char *d = json_string_value(v);
            int k = -2;
            if (d && (!strcmp(d, "server") || !strcmp(d, "default"))) k = OB_ROUTE_DRAFTER_SERVER;
            for (int i = 0; d && i < (int)OB_ARRAY_LEN(g_drafters); i++)
                if (!strcmp(d, g_drafters[i])) k = i;
            if (k == -2)
                return ob_err(OB_ERR_FORMAT, "policy: targets.%s.drafter must be \"none\", \"ngram\", \"draft\" or \"server\"",
                              name);
            t->drafter = k;
        } else if (!strcmp(key, "draft_n_max")) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 64)
                return ob_err(OB_ERR_FORMAT, "policy: targets.%s.draft_n_max must be an integer from 1 to 64", name);
            t->draft_n_max = (int32_t)json_integer_value(v);
        } else if (strcmp(key, "comment") != 0) {
            return ob_err(OB_ERR_FORMAT, "policy: targets.%s: unknown key '%s' (device, drafter, draft_n_max)", name, key);
        }
    }
    if (t->drafter == OB_SPEC_NONE && t->draft_n_max > 0)
        return ob_err(OB_ERR_FORMAT, "policy: targets.%s: draft_n_max with drafter \"none\"", name);
    return 0;
}

static int parse_root(json_t *root, ob_route_policy *p) {
    if (!json_is_object(root)) return ob_err(OB_ERR_FORMAT, "policy: the file must hold a JSON object");
    json_t *fmt = json_object_get(root, "format");
    if (fmt && (!json_is_string(fmt) || strcmp(json_string_value(fmt), "onebit-route-policy/1") != 0))
        return ob_err(OB_ERR_FORMAT, "policy: format must be \"onebit-route-policy/1\"");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        static const char *const known[] = {"format", "default", "min_conf", "targets", "classes", "measured", "comment"};
        bool ok = false;
        for (size_t i = 0; i < OB_ARRAY_LEN(known); i++) ok |= !strcmp(key, known[i]);
        if (!ok)
            return ob_err(OB_ERR_FORMAT,
                          "policy: unknown key '%s' (format, default, min_conf, targets, classes, measured, comment)", key);
    }
    memset(p, 0, sizeof *p);
    p->min_conf = -1.0f;
    json_t *targets = json_object_get(root, "targets");
    if (targets && !json_is_object(targets)) return ob_err(OB_ERR_FORMAT, "policy: targets must be an object");
    json_object_foreach(targets, key, v) {
        if (p->n_targets >= OB_ROUTE_MAX_TARGETS)
            return ob_err(OB_ERR_FORMAT, "policy: more than %d targets", OB_ROUTE_MAX_TARGETS);
        OB_TRY(parse_target(key, v, &p->targets[p->n_targets]));
        p->n_targets++;
    }
    /* the default target: named, else one called "default", else the server's settings */
    json_t *def = json_object_get(root, "default");
    if (def) {
        if (!json_is_string(def)) return ob_err(OB_ERR_FORMAT, "policy: default must name a target");
        p->default_target = find_target(p, json_string_value(def));
        if (p->default_target < 0)
            return ob_err(OB_ERR_FORMAT, "policy: default names '%s', which is not in targets", json_string_value(def));
    } else if ((p->default_target = find_target(p, "default")) < 0) {
        if (p->n_targets >= OB_ROUTE_MAX_TARGETS)
            return ob_err(OB_ERR_FORMAT, "policy: more than %d targets", OB_ROUTE_MAX_TARGETS);
        target_init(&p->targets[p->n_targets], "default");
        p->default_target = p->n_targets++;
    }
    for (int c = 0; c < OB_ROUTE_N; c++) p->class_target[c] = p->default_target;
    json_t *classes = json_object_get(root, "classes");
    if (classes && !json_is_object(classes)) return ob_err(OB_ERR_FORMAT, "policy: classes must be an object");
    json_object_foreach(classes, key, v) {
        int c = ob_route_class_parse(key);
        if (c < 0) return ob_err(OB_ERR_FORMAT, "policy: classes: unknown class '%s' (code, prose, short, long)", key);
        if (!json_is_string(v)) return ob_err(OB_ERR_FORMAT, "policy: classes.%s must name a target", key);
        int t = find_target(p, json_string_value(v));
        if (t < 0) return ob_err(OB_ERR_FORMAT, "policy: classes.%s names '%s', which is not in targets", key, json_string_value(v));
        p->class_target[c] = t;
    }
    json_t *mc = json_object_get(root, "min_conf");
    if (mc) {
        if (!json_is_number(mc) || json_number_value(mc) < 0 || json_number_value(mc) > 1)
            return ob_err(OB_ERR_FORMAT, "policy: min_conf must be a number from 0 to 1");
        p->min_conf = (float)json_number_value(mc);
    }
    return 0;
}

int ob_route_policy_parse(const char *json, size_t len, ob_route_policy *p) {
    if (!json || !p) return ob_err(OB_ERR_INVALID_ARG, "ob_route_policy_parse: bad arguments");
    json_error_t e;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &e);
    if (!root) return ob_err(OB_ERR_FORMAT, "policy: invalid JSON at line %d, column %d: %s", e.line, e.column, e.text);
    int rc = parse_root(root, p);
    json_decref(root);
    return rc;
}

int ob_route_policy_load(const char *path, ob_route_policy *p) {
    if (!path || !p) return ob_err(OB_ERR_INVALID_ARG, "ob_route_policy_load: bad arguments");
    json_error_t e;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (!root) {
        if (e.line <= 0) return ob_err(OB_ERR_IO, "route policy %s: %s", path, e.text);
        return ob_err(OB_ERR_FORMAT, "route policy %s: invalid JSON at line %d, column %d: %s", path, e.line, e.column,
                      e.text);
    }
    int rc = parse_root(root, p);
    json_decref(root);
    if (rc < 0) {
        char why[512]; /* ob_err writes the buffer ob_last_error reads */
        const char *msg = ob_last_error();
        snprintf(why, sizeof why, "%s", strncmp(msg, "policy: ", 8) ? msg : msg + 8);
        return ob_err(rc, "route policy %s: %s", path, why);
    }
    return 0;
}

int ob_route_policy_check(const ob_route_policy *p, const ob_route_server_caps *caps) {
    for (int i = 0; i < p->n_targets; i++) {
        const ob_route_target *t = &p->targets[i];
        const char *dev = caps->device ? caps->device : "auto";
        if (t->device[0] && strcmp(t->device, dev) != 0)
            return ob_err(OB_ERR_UNSUPPORTED,
                          "route policy: target '%s' asks for device '%s', but this server runs its model on '%s' only "
                          "(one device per server for now)",
                          t->name, t->device, dev);
        if (t->drafter > OB_SPEC_NONE && t->drafter != (int)caps->spec_type)
            return ob_err(OB_ERR_UNSUPPORTED,
                          "route policy: target '%s' drafts with %s, but the server's drafter is %s (start it with "
                          "--spec-type %s)",
                          t->name, ob_route_drafter_name(t->drafter), ob_route_drafter_name((int)caps->spec_type),
                          ob_route_drafter_name(t->drafter));
        if (t->draft_n_max > 0 && caps->spec_type == OB_SPEC_NONE)
            return ob_err(OB_ERR_UNSUPPORTED, "route policy: target '%s' sets draft_n_max, but the server does not draft",
                          t->name);
        if (t->draft_n_max > caps->spec_n_max)
            return ob_err(OB_ERR_UNSUPPORTED,
                          "route policy: target '%s' drafts up to %d tokens, more than the server's --spec-draft-n-max %d",
                          t->name, (int)t->draft_n_max, (int)caps->spec_n_max);
    }
    return 0;
}

void ob_route_target_apply(const ob_route_target *t, ob_gen_params *g) {
    if (t->drafter == OB_SPEC_NONE) g->no_speculative = true;
    if (t->draft_n_max > 0 && (g->spec_n_max <= 0 || g->spec_n_max > t->draft_n_max)) g->spec_n_max = t->draft_n_max;
}

int ob_route_target_describe(const ob_route_target *t, const ob_route_server_caps *caps, char *buf, size_t size) {
    const char *dev = t->device[0] ? t->device : caps->device ? caps->device : "auto";
    int n;
    if (t->drafter == OB_SPEC_NONE || caps->spec_type == OB_SPEC_NONE)
        n = snprintf(buf, size, "device=%s;drafter=none", dev);
    else
        n = snprintf(buf, size, "device=%s;drafter=%s:%d", dev, ob_route_drafter_name((int)caps->spec_type),
                     (int)(t->draft_n_max > 0 ? t->draft_n_max : caps->spec_n_max));
    return n >= 0 && (size_t)n < size ? 0 : ob_err(OB_ERR_RANGE, "route target description too long");
}
