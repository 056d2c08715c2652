/*
 * router.c - the request classifier: features, model loading, decisions.
 *
 * Features (docs/router.md has the why): the user messages, ASCII-lowercased,
 * whitespace runs folded to one space (or one newline), give
 *   - word unigrams and bigrams (a word: a run of [a-z0-9_] or non-ASCII
 *     bytes; every other visible byte is a one-byte token, so `{`, `;`, `=`,
 *     `$` count as words),
 *   - byte 3-grams and 4-grams (language-independent; CJK has no spaces),
 *   - the first token of each line and of the text,
 * all hashed (FNV-1a with a namespace byte, then a finalizer) into n_buckets
 * and sharing value 1/sqrt(count); plus structural cues with value 1: size
 * bins, line count, code fences, symbol density, digit share, a trailing
 * question mark, indentation, non-ASCII share, turn counts.
 *
 * Scoring never materialises the feature list: a sink either accumulates the
 * three class scores (classification) or appends features (the trainer), so
 * classification is allocation-free and walks the text once.
 */
#include "router.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"

struct ob_router {
    uint32_t n_buckets;
    float temperature;
    float bias[OB_ROUTE_N_MODEL];
    const float *w; /* [n_buckets][OB_ROUTE_N_MODEL]; the built-in array or owned */
    float *owned;   /* NULL for the built-in model */
};

static const char *const g_names[OB_ROUTE_N] = {"code", "prose", "short", "long"};

const char *ob_route_class_name(ob_route_class c) {
    return (unsigned)c < OB_ROUTE_N ? g_names[c] : "?";
}

int ob_route_class_parse(const char *name) {
    for (int i = 0; i < OB_ROUTE_N; i++)
        if (name && !strcmp(name, g_names[i])) return i;
    return ob_err(OB_ERR_NOT_FOUND, "unknown route class '%s'", name ? name : "(null)");
}

/* ---- hashing ---- */

static uint32_t fnv(uint32_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static uint32_t fmix(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static uint32_t hash_ns(char ns, const char *p, size_t n) {
    uint32_t h = 2166136261u;
    h = fnv(h, (const unsigned char *)&ns, 1);
    return fmix(fnv(h, (const unsigned char *)p, n));
}

/* ---- the sink: accumulate scores or collect features ---- */

typedef struct sink {
    uint32_t mask;
    const float *w; /* scoring: weights, else NULL */
    double ng[OB_ROUTE_N_MODEL], st[OB_ROUTE_N_MODEL];
    size_t n_ng;
    ob_route_feat *out; /* collecting: output, else NULL */
    size_t cap, n;
} sink;

/* structural: value 1; otherwise an n-gram whose value is fixed at the end. */
static void emit(sink *s, uint32_t h, int structural) {
    uint32_t idx = h & s->mask;
    if (!structural) s->n_ng++;
    if (s->w) {
        const float *w = s->w + (size_t)idx * OB_ROUTE_N_MODEL;
        double *acc = structural ? s->st : s->ng;
        for (int c = 0; c < OB_ROUTE_N_MODEL; c++) acc[c] += w[c];
    } else if (s->n < s->cap) {
        s->out[s->n].idx = idx;
        s->out[s->n].val = structural ? 1.0f : -1.0f; /* n-gram marker, scaled later */
        s->n++;
    }
}

static void emit_str(sink *s, char ns, const char *p, size_t n, int structural) {
    emit(s, hash_ns(ns, p, n), structural);
}

static void emit_cue(sink *s, const char *name, int bin) {
    char b[48];
    int k = snprintf(b, sizeof b, "%s:%d", name, bin);
    emit_str(s, 's', b, (size_t)k, 1);
}

/* Bin of x on a log2 scale starting at `first` (0 below it). */
static int log2_bin(size_t x, size_t first, int max_bin) {
    int b = 0;
    for (size_t t = first; x >= t && b < max_bin; t *= 2) b++;
    return b;
}

static int ratio_bin(size_t num, size_t den) {
    if (num == 0 || den == 0) return 0;
    double r = (double)num / (double)den;
    return r < 0.02 ? 1 : r < 0.05 ? 2 : r < 0.1 ? 3 : r < 0.2 ? 4 : r < 0.4 ? 5 : 6;
}

static int is_user_role(const char *role) {
    return !role || !(strcmp(role, "system") == 0 || strcmp(role, "assistant") == 0 ||
                      strcmp(role, "developer") == 0 || strcmp(role, "tool") == 0);
}

bool ob_route_msg_is_user(const ob_route_msg *m) { return is_user_role(m->role) != 0; }

static size_t utf8_count(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

static int is_word_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

/* Longest prefix of a word kept as a word feature: a CJK sentence is one
 * "word" to this tokenizer, and its byte n-grams already describe it. */
#define MAX_WORD 32
/* Bytes of normalised user text kept: OB_ROUTE_LONG_CHARS code points. */
#define TEXT_CAP (4 * OB_ROUTE_LONG_CHARS + 8)

/* Walk the conversation, emitting every feature into s. */
static void extract(const ob_route_msg *msgs, size_t n_msgs, sink *s, size_t *user_chars) {
    char text[TEXT_CAP];
    size_t tn = 0, cps = 0, total_cps = 0;
    /* raw-text cues, counted over the kept user text */
    size_t n_lines = 0, n_indent = 0, n_sym = 0, n_digit = 0, n_visible = 0, n_nonascii = 0;
    size_t n_fence = 0, n_tick = 0, n_semi_eol = 0, n_user = 0, n_asst = 0, n_sys = 0;
    int asst_fence = 0, ends_q = 0;

    for (size_t m = 0; m < n_msgs; m++) {
        const char *p = msgs[m].content;
        size_t n = p ? msgs[m].len : 0;
        if (!is_user_role(msgs[m].role)) {
            if (msgs[m].role && !strcmp(msgs[m].role, "assistant")) {
                n_asst++;
                for (size_t i = 0; i + 2 < n; i++)
                    if (p[i] == '`' && p[i + 1] == '`' && p[i + 2] == '`') asst_fence = 1;
            } else {
                n_sys++;
            }
            continue;
        }
        n_user++;
        total_cps += utf8_count(p, n);
        if (tn > 0 && tn < TEXT_CAP) text[tn++] = '\n';
        int at_line_start = 1, line_ws = 0, in_ws = 0, ws_nl = 0;
        char last_visible = 0;
        n_lines++;
        for (size_t i = 0; i < n && cps < OB_ROUTE_LONG_CHARS; i++) {
            unsigned char c = (unsigned char)p[i];
            if ((c & 0xC0) != 0x80) cps++;
            if (c == '\n') {
                n_lines++;
                if (last_visible == ';' || last_visible == '{') n_semi_eol++;
                at_line_start = 1;
                line_ws = 0;
            } else if (at_line_start && (c == ' ' || c == '\t')) {
                line_ws += c == '\t' ? 4 : 1;
            }
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
                if (c == '\n') ws_nl = 1;
                in_ws = 1;
                continue;
            }
            if (at_line_start && line_ws >= 2) n_indent++; /* an indented line */
            at_line_start = 0;
            last_visible = (char)c;
            n_visible++;
            if (c >= 0x80) n_nonascii++;
            else if (c >= '0' && c <= '9') n_digit++;
            else if (strchr("{}[]();=<>|&$\\*+%#:^~", c)) n_sym++;
            if (c == '`') {
                n_tick++;
                if (i + 2 < n && p[i + 1] == '`' && p[i + 2] == '`') n_fence++;
            }
            if (in_ws && tn > 0 && tn + 1 < TEXT_CAP) text[tn++] = ws_nl ? '\n' : ' ';
            in_ws = ws_nl = 0;
            if (tn + 1 < TEXT_CAP) text[tn++] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : (char)c;
        }
        if (last_visible == '?' || (n >= 3 && (unsigned char)p[n - 3] == 0xEF &&
                                    (unsigned char)p[n - 2] == 0xBC &&
                                    (unsigned char)p[n - 1] == 0x9F)) /* U+FF1F */
            ends_q = 1;
        if (last_visible == ';' || last_visible == '{') n_semi_eol++;
    }
    *user_chars = total_cps;

    /* tokens: words and one-byte symbols, with bigrams and line starts */
    size_t prev_off = 0, prev_len = 0;
    int have_prev = 0, line_start = 1, first = 1;
    size_t n_words = 0;
    for (size_t i = 0; i < tn;) {
        unsigned char c = (unsigned char)text[i];
        if (c == ' ' || c == '\n') {
            if (c == '\n') line_start = 1;
            i++;
            continue;
        }
        size_t j = i + 1;
        if (is_word_byte(c))
            while (j < tn && is_word_byte((unsigned char)text[j])) j++;
        size_t len = j - i;
        size_t wl = len > MAX_WORD ? MAX_WORD : len;
        emit_str(s, 'w', text + i, wl, 0);
        if (is_word_byte(c)) n_words++;
        if (have_prev) {
            char b[2 * MAX_WORD + 1];
            memcpy(b, text + prev_off, prev_len);
            b[prev_len] = ' ';
            memcpy(b + prev_len + 1, text + i, wl);
            emit_str(s, 'b', b, prev_len + 1 + wl, 0);
        }
        if (line_start) emit_str(s, 'l', text + i, wl, 0);
        if (first) emit_str(s, 'f', text + i, wl, 0);
        line_start = first = 0;
        prev_off = i;
        prev_len = wl;
        have_prev = 1;
        i = j;
    }
    /* byte n-grams */
    for (size_t i = 0; i + 3 <= tn; i++) {
        emit_str(s, '3', text + i, 3, 0);
        if (i + 4 <= tn) emit_str(s, '4', text + i, 4, 0);
    }

    /* structural cues */
    int len_bin = log2_bin(total_cps, 8, 8);
    emit_cue(s, "len", len_bin);
    emit_cue(s, "words", log2_bin(n_words, 2, 8));
    emit_cue(s, "lines", log2_bin(n_lines, 2, 5));
    emit_cue(s, "fence", n_fence > 0);
    emit_cue(s, "tick", n_tick > 0);
    emit_cue(s, "sym", ratio_bin(n_sym, n_visible));
    emit_cue(s, "digit", ratio_bin(n_digit, n_visible));
    emit_cue(s, "nonascii", ratio_bin(n_nonascii, n_visible));
    emit_cue(s, "indent", log2_bin(n_indent, 1, 4));
    emit_cue(s, "semieol", log2_bin(n_semi_eol, 1, 4));
    emit_cue(s, "q", ends_q);
    emit_cue(s, "qlen", ends_q * 16 + len_bin);
    emit_cue(s, "user", n_user > 2 ? 2 : (int)n_user);
    emit_cue(s, "asst", n_asst > 0 ? 1 + asst_fence : 0);
    emit_cue(s, "sys", n_sys > 0);
    emit_cue(s, "bias", 0);
}

int ob_router_features(const ob_route_msg *msgs, size_t n_msgs, uint32_t n_buckets,
                       ob_route_feat *feats, size_t cap, size_t *n_out, size_t *user_chars) {
    if ((!msgs && n_msgs) || !feats || !n_out || !user_chars || n_buckets == 0 ||
        (n_buckets & (n_buckets - 1)))
        return ob_err(OB_ERR_INVALID_ARG, "ob_router_features: bad arguments");
    sink s = {.mask = n_buckets - 1, .out = feats, .cap = cap};
    extract(msgs, n_msgs, &s, user_chars);
    float v = s.n_ng ? (float)(1.0 / sqrt((double)s.n_ng)) : 0.0f;
    for (size_t i = 0; i < s.n; i++)
        if (feats[i].val < 0) feats[i].val = v;
    *n_out = s.n;
    return 0;
}

/* ---- the model ---- */

static int load_text_model(ob_router *r, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return ob_err(OB_ERR_IO, "%s: %s", path, strerror(errno));
    int rc = 0;
    char magic[32] = {0};
    unsigned buckets = 0;
    if (fscanf(f, "%31s %*d", magic) != 1 || strcmp(magic, "onebit-router")) {
        rc = ob_err(OB_ERR_FORMAT, "%s: not a router model (no 'onebit-router' header)", path);
        goto done;
    }
    if (fscanf(f, " buckets %u", &buckets) != 1 || buckets == 0 || (buckets & (buckets - 1)) ||
        buckets > (1u << 24)) {
        rc = ob_err(OB_ERR_FORMAT, "%s: 'buckets' missing or not a power of two <= 2^24", path);
        goto done;
    }
    char cls[3][16];
    if (fscanf(f, " classes %15s %15s %15s", cls[0], cls[1], cls[2]) != 3 ||
        strcmp(cls[0], "code") || strcmp(cls[1], "prose") || strcmp(cls[2], "short")) {
        rc = ob_err(OB_ERR_FORMAT, "%s: 'classes' must be 'code prose short'", path);
        goto done;
    }
    if (fscanf(f, " temperature %f", &r->temperature) != 1 || !(r->temperature > 0.0f) ||
        !isfinite(r->temperature)) {
        rc = ob_err(OB_ERR_FORMAT, "%s: 'temperature' missing or not positive", path);
        goto done;
    }
    if (fscanf(f, " bias %f %f %f", &r->bias[0], &r->bias[1], &r->bias[2]) != 3 || !isfinite(r->bias[0]) ||
        !isfinite(r->bias[1]) || !isfinite(r->bias[2])) {
        rc = ob_err(OB_ERR_FORMAT, "%s: 'bias' needs three finite numbers", path);
        goto done;
    }
    r->n_buckets = buckets;
    r->owned = ob_malloc((size_t)buckets * OB_ROUTE_N_MODEL * sizeof(float));
    if (!r->owned) {
        rc = ob_err(OB_ERR_OOM, "router model: out of memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)buckets * OB_ROUTE_N_MODEL; i++) {
        if (fscanf(f, "%f", &r->owned[i]) != 1 || !isfinite(r->owned[i])) {
            rc = ob_err(OB_ERR_FORMAT, "%s: weight %zu of %zu missing or not finite", path, i,
                        (size_t)buckets * OB_ROUTE_N_MODEL);
            goto done;
        }
    }
    r->w = r->owned;
done:
    fclose(f);
    return rc;
}

int ob_router_init(ob_router **out, const char *path) {
    if (!out) return ob_err(OB_ERR_INVALID_ARG, "ob_router_init: out is NULL");
    *out = NULL;
    ob_router *r = ob_calloc(1, sizeof *r);
    if (!r) return ob_err(OB_ERR_OOM, "router: out of memory");
    if (!path) {
        r->n_buckets = ob_router_builtin_n_buckets;
        r->temperature = ob_router_builtin_temperature;
        memcpy(r->bias, ob_router_builtin_bias, sizeof r->bias);
        r->w = ob_router_builtin_weights;
    } else {
        int rc = load_text_model(r, path);
        if (rc < 0) {
            ob_router_free(r);
            return rc;
        }
    }
    *out = r;
    return 0;
}

void ob_router_free(ob_router *r) {
    if (!r) return;
    ob_free(r->owned);
    ob_free(r);
}

uint32_t ob_router_n_buckets(const ob_router *r) { return r ? r->n_buckets : 0; }
float ob_router_temperature(const ob_router *r) { return r ? r->temperature : 0.0f; }

int ob_router_classify(const ob_router *r, const ob_route_msg *msgs, size_t n_msgs,
                       ob_route_result *res) {
    if (!r || !res || (!msgs && n_msgs))
        return ob_err(OB_ERR_INVALID_ARG, "ob_router_classify: bad arguments");
    memset(res, 0, sizeof *res);
    /* the size gate first: a long document needs no features */
    for (size_t m = 0; m < n_msgs; m++)
        if (is_user_role(msgs[m].role) && msgs[m].content)
            res->user_chars += utf8_count(msgs[m].content, msgs[m].len);
    sink s = {.mask = r->n_buckets - 1, .w = r->w};
    if (res->user_chars < OB_ROUTE_LONG_CHARS) extract(msgs, n_msgs, &s, &res->user_chars);
    if (res->user_chars >= OB_ROUTE_LONG_CHARS) {
        res->cls = OB_ROUTE_LONG;
        res->confidence = 1.0f;
        res->prob[OB_ROUTE_LONG] = 1.0f;
        return 0;
    }
    double v = s.n_ng ? 1.0 / sqrt((double)s.n_ng) : 0.0, z[OB_ROUTE_N_MODEL], mx = -HUGE_VAL;
    for (int c = 0; c < OB_ROUTE_N_MODEL; c++) {
        z[c] = (r->bias[c] + s.st[c] + v * s.ng[c]) / r->temperature;
        if (z[c] > mx) mx = z[c];
    }
    double sum = 0;
    for (int c = 0; c < OB_ROUTE_N_MODEL; c++) sum += (z[c] = exp(z[c] - mx));
    int best = 0;
    for (int c = 0; c < OB_ROUTE_N_MODEL; c++) {
        res->prob[c] = (float)(z[c] / sum);
        if (res->prob[c] > res->prob[best]) best = c;
    }
    res->cls = (ob_route_class)best;
    res->confidence = res->prob[best];
    return 0;
}

/* ---- JSON input ---- */

/* Messages past cap are left out: the decision is the opening messages'. */
static int add_msg(ob_route_msg *msgs, size_t cap, size_t *n, const char *role, json_t *text) {
    if (*n >= cap) return 0;
    msgs[*n].role = role;
    msgs[*n].content = json_string_value(text);
    msgs[*n].len = json_string_length(text);
    (*n)++;
    return 0;
}

int ob_router_parse_json(const char *json, size_t len, void **root_out, ob_route_msg *msgs,
                         size_t cap, size_t *n_out) {
    if (!json || !root_out || !msgs || !n_out)
        return ob_err(OB_ERR_INVALID_ARG, "ob_router_parse_json: bad arguments");
    *root_out = NULL;
    *n_out = 0;
    json_error_t e;
    json_t *root = json_loadb(json, len, 0, &e);
    if (!root) return ob_err(OB_ERR_FORMAT, "JSON: %s (line %d)", e.text, e.line);
    int rc = 0;
    size_t n = 0;
    json_t *m = json_is_object(root) ? json_object_get(root, "messages") : NULL;
    json_t *t = NULL;
    if (json_is_object(root) && !m) {
        t = json_object_get(root, "text");
        if (!t) t = json_object_get(root, "prompt");
    }
    if (json_is_array(m)) {
        size_t i;
        json_t *msg;
        json_array_foreach(m, i, msg) {
            json_t *role = json_object_get(msg, "role"), *content = json_object_get(msg, "content");
            if (!json_is_object(msg) || !json_is_string(role)) {
                rc = ob_err(OB_ERR_FORMAT, "messages[%zu]: needs a string 'role'", i);
                break;
            }
            if (json_is_string(content)) {
                rc = add_msg(msgs, cap, &n, json_string_value(role), content);
            } else if (json_is_array(content)) {
                size_t k;
                json_t *part;
                json_array_foreach(content, k, part) {
                    json_t *pt = json_object_get(part, "text");
                    if (json_is_string(pt)) rc = add_msg(msgs, cap, &n, json_string_value(role), pt);
                    if (rc < 0) break;
                }
            } else if (content && !json_is_null(content)) {
                rc = ob_err(OB_ERR_FORMAT, "messages[%zu].content: not a string or parts", i);
            }
            if (rc < 0) break;
        }
    } else if (json_is_string(t)) {
        rc = add_msg(msgs, cap, &n, "user", t);
    } else {
        rc = ob_err(OB_ERR_FORMAT, "JSON: expected {\"messages\": [...]} or {\"text\": \"...\"}");
    }
    if (rc < 0) {
        json_decref(root);
        return rc;
    }
    *root_out = root;
    *n_out = n;
    return 0;
}

int ob_router_classify_json(const ob_router *r, const char *json, size_t len,
                            ob_route_result *res) {
    ob_route_msg msgs[64];
    size_t n;
    void *root;
    OB_TRY(ob_router_parse_json(json, len, &root, msgs, OB_ARRAY_LEN(msgs), &n));
    int rc = ob_router_classify(r, msgs, n, res);
    json_decref((json_t *)root);
    return rc;
}

/* ---- the server's hook ---- */

static pthread_once_t g_shared_once = PTHREAD_ONCE_INIT;
static ob_router *g_shared;     /* the built-in router, for ob_router_observe; never freed */
static int g_shared_rc;
static _Atomic uint64_t g_observed[OB_ROUTE_N + 1];

static void shared_init(void) { g_shared_rc = ob_router_init(&g_shared, NULL); }

int ob_router_observe(const char *json, size_t len) {
    pthread_once(&g_shared_once, shared_init);
    int rc = g_shared_rc;
    ob_route_result res;
    if (rc == 0) rc = json ? ob_router_classify_json(g_shared, json, len, &res)
                           : ob_err(OB_ERR_INVALID_ARG, "ob_router_observe: json is NULL");
    if (rc < 0) {
        atomic_fetch_add(&g_observed[OB_ROUTE_N], 1);
        OB_LOGD("router: request not classified: %s", ob_last_error());
        return rc;
    }
    atomic_fetch_add(&g_observed[res.cls], 1);
    OB_LOGD("router: %s %.3f (%zu user characters)", g_names[res.cls], res.confidence, res.user_chars);
    return (int)res.cls;
}

void ob_router_observed(uint64_t counts[OB_ROUTE_N + 1]) {
    for (int c = 0; c <= OB_ROUTE_N; c++) counts[c] = atomic_load(&g_observed[c]);
}

/* ---- evaluation ---- */

static double clock_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double now_us(void) { return clock_us(CLOCK_MONOTONIC); }

/* Expected calibration error: |accuracy - confidence| per 10 equal-width
 * confidence bins, weighted by the bin's share of decisions. */
static double ece_of(const size_t *cnt, const double *conf, const double *ok, size_t n) {
    double e = 0;
    for (int b = 0; b < 10; b++)
        if (cnt[b]) e += fabs(ok[b] - conf[b]);
    return n ? e / (double)n : 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int ob_router_eval_file(const ob_router *r, const char *path, int repeat, ob_route_eval *ev,
                        void *errors) {
    if (!r || !path || !ev || repeat < 1)
        return ob_err(OB_ERR_INVALID_ARG, "ob_router_eval_file: bad arguments");
    memset(ev, 0, sizeof *ev);
    FILE *f = fopen(path, "r");
    if (!f) return ob_err(OB_ERR_IO, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, lineno = 0, n_model = 0;
    ssize_t len;
    int rc = 0;
    size_t cnt[10] = {0}, cnt_m[10] = {0};
    double conf[10] = {0}, ok[10] = {0}, conf_m[10] = {0}, ok_m[10] = {0};
    double total_us = 0, total_json_us = 0, total_cpu_us = 0;
    double *times = NULL; /* [n] mean microseconds per request, for the percentiles */
    size_t n_times_cap = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (len <= 1) continue;
        ob_route_msg msgs[64];
        size_t nm;
        void *root;
        rc = ob_router_parse_json(line, (size_t)len, &root, msgs, OB_ARRAY_LEN(msgs), &nm);
        if (rc < 0) {
            ob_err_wrap(rc, "%s:%zu", path, lineno);
            break;
        }
        const char *lab = json_string_value(json_object_get((json_t *)root, "label"));
        int truth = lab ? ob_route_class_parse(lab) : OB_ERR_NOT_FOUND;
        if (truth < 0) {
            json_decref((json_t *)root);
            rc = ob_err(OB_ERR_FORMAT, "%s:%zu: missing or unknown \"label\"", path, lineno);
            break;
        }
        ob_route_result res;
        rc = ob_router_classify(r, msgs, nm, &res); /* warm-up: caches, not the first touch */
        double c0 = clock_us(CLOCK_THREAD_CPUTIME_ID), t0 = now_us();
        for (int k = 0; k < repeat && rc == 0; k++) rc = ob_router_classify(r, msgs, nm, &res);
        double us = (now_us() - t0) / repeat;
        total_cpu_us += (clock_us(CLOCK_THREAD_CPUTIME_ID) - c0) / repeat;
        t0 = now_us();
        for (int k = 0; k < repeat && rc == 0; k++) {
            ob_route_result rj;
            rc = ob_router_classify_json(r, line, (size_t)len, &rj);
        }
        total_json_us += (now_us() - t0) / repeat;
        if (rc < 0) {
            json_decref((json_t *)root);
            break;
        }
        total_us += us;
        if (us > ev->max_us) ev->max_us = us;
        if (ev->n == n_times_cap) {
            size_t nc = n_times_cap ? 2 * n_times_cap : 256;
            double *t = ob_realloc(times, nc * sizeof *t);
            if (!t) {
                json_decref((json_t *)root);
                rc = ob_err(OB_ERR_OOM, "router eval: out of memory");
                break;
            }
            times = t;
            n_times_cap = nc;
        }
        times[ev->n] = us;
        ev->n++;
        ev->n_class[truth]++;
        ev->confusion[truth][res.cls]++;
        int right = (int)res.cls == truth;
        int b = (int)(res.confidence * 10);
        b = b < 0 ? 0 : b > 9 ? 9 : b;
        cnt[b]++;
        conf[b] += res.confidence;
        ok[b] += right;
        if (res.cls != OB_ROUTE_LONG && truth != OB_ROUTE_LONG) {
            n_model++;
            cnt_m[b]++;
            conf_m[b] += res.confidence;
            ok_m[b] += right;
        }
        if (!right && errors) {
            const char *text = NULL;
            for (size_t i = 0; i < nm; i++)
                if (is_user_role(msgs[i].role)) text = msgs[i].content;
            fprintf((FILE *)errors, "%s:%zu: %s decided %s (%.3f): ", path, lineno,
                    g_names[truth], g_names[res.cls], res.confidence);
            for (size_t i = 0; text && text[i] && i < 100; i++)
                fputc(text[i] == '\n' ? ' ' : text[i], (FILE *)errors);
            fputc('\n', (FILE *)errors);
        }
        json_decref((json_t *)root);
    }
    free(line);
    fclose(f);
    if (rc == 0 && ev->n == 0) rc = ob_err(OB_ERR_FORMAT, "%s: no labelled requests", path);
    if (rc < 0) {
        ob_free(times);
        return rc;
    }
    qsort(times, ev->n, sizeof *times, cmp_double);
    ev->p50_us = times[ev->n / 2];
    ev->p99_us = times[(size_t)((double)(ev->n - 1) * 0.99)];
    ob_free(times);
    size_t right = 0;
    for (int c = 0; c < OB_ROUTE_N; c++) {
        right += ev->confusion[c][c];
        ev->class_accuracy[c] =
            ev->n_class[c] ? (double)ev->confusion[c][c] / (double)ev->n_class[c] : NAN;
    }
    ev->accuracy = (double)right / (double)ev->n;
    ev->ece = ece_of(cnt, conf, ok, ev->n);
    ev->ece_model = ece_of(cnt_m, conf_m, ok_m, n_model);
    ev->mean_us = total_us / (double)ev->n;
    ev->mean_cpu_us = total_cpu_us / (double)ev->n;
    ev->mean_json_us = total_json_us / (double)ev->n;
    return 0;
}
