/*
 * text.c - stop strings and reasoning tags over streamed text (text.h).
 *
 * The buffers searched here are short: a streamer releases everything but a
 * possible stop prefix after each token, so what is held is at most the
 * longest stop string plus one token's text. Plain loops are enough.
 */
#include "text.h"

#include <string.h>

#include "../core/status.h"

enum { THINK_WAIT_OPEN = 0, THINK_REASONING = 1, THINK_CONTENT = 2 };

static const char OPEN_TAG[] = "<think>";
static const char CLOSE_TAG[] = "</think>";
#define OPEN_LEN (sizeof OPEN_TAG - 1)
#define CLOSE_LEN (sizeof CLOSE_TAG - 1)

static size_t find(const char *h, size_t hn, size_t from, const char *needle, size_t nn) {
    if (nn == 0 || hn < nn) return (size_t)-1;
    for (size_t i = from; i + nn <= hn; i++)
        if (h[i] == needle[0] && memcmp(h + i, needle, nn) == 0) return i;
    return (size_t)-1;
}

/* Longest k < nn with text ending in needle[0..k). */
static size_t partial_suffix(const char *text, size_t len, const char *needle, size_t nn) {
    size_t kmax = nn - 1 < len ? nn - 1 : len;
    for (size_t k = kmax; k > 0; k--)
        if (memcmp(text + len - k, needle, k) == 0) return k;
    return 0;
}

/* The match that ends first wins (then the one that starts first): that is
 * the stop a reader going byte by byte would see complete first, so the
 * answer does not depend on how the text was split into tokens. */
size_t ob_srv_stop_find(const char *text, size_t len, size_t from, char *const *stops, int n_stops, int *which) {
    size_t best = (size_t)-1, best_end = (size_t)-1;
    for (int i = 0; i < n_stops; i++) {
        size_t n = strlen(stops[i]);
        size_t p = find(text, len, from, stops[i], n);
        if (p == (size_t)-1) continue;
        if (p + n < best_end || (p + n == best_end && p < best)) {
            best = p;
            best_end = p + n;
            *which = i;
        }
    }
    return best;
}

size_t ob_srv_stop_holdback(const char *text, size_t len, char *const *stops, int n_stops) {
    size_t hold = 0;
    for (int i = 0; i < n_stops; i++) {
        size_t k = partial_suffix(text, len, stops[i], strlen(stops[i]));
        if (k > hold) hold = k;
    }
    return hold;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool ob_srv_prompt_opens_think(const char *text, size_t len) {
    while (len > 0 && is_space(text[len - 1])) len--;
    return len >= OPEN_LEN && memcmp(text + len - OPEN_LEN, OPEN_TAG, OPEN_LEN) == 0;
}

void ob_srv_think_init(ob_srv_think *t, bool enabled, bool prompt_opened) {
    memset(t, 0, sizeof *t);
    t->state = !enabled ? THINK_CONTENT : prompt_opened ? THINK_REASONING : THINK_WAIT_OPEN;
    t->trim = prompt_opened;
}

/* Append s to out, dropping leading whitespace while t->trim is set. */
static int emit(ob_srv_think *t, const char *s, size_t n, ob_buf *out) {
    if (t->trim) {
        while (n > 0 && is_space(*s)) s++, n--;
        if (n == 0) return 0;
        t->trim = false;
    }
    return ob_buf_append(out, s, n);
}

int ob_srv_think_push(ob_srv_think *t, const char *s, size_t n, bool final, ob_buf *content, ob_buf *reasoning) {
    if (t->state == THINK_CONTENT && t->hold.len == 0) return emit(t, s, n, content);
    OB_TRY(ob_buf_append(&t->hold, s, n));
    for (;;) {
        const char *h = t->hold.data ? t->hold.data : "";
        size_t hn = t->hold.len;
        if (t->state == THINK_WAIT_OPEN) {
            size_t ws = 0;
            while (ws < hn && is_space(h[ws])) ws++;
            size_t rest = hn - ws, cmp = rest < OPEN_LEN ? rest : OPEN_LEN;
            if (memcmp(h + ws, OPEN_TAG, cmp) == 0) {
                if (rest >= OPEN_LEN) { /* opened: what follows is reasoning */
                    ob_buf_consume(&t->hold, ws + OPEN_LEN);
                    t->state = THINK_REASONING;
                    t->trim = true;
                    continue;
                }
                if (!final) return 0; /* could still become "<think>" */
            }
            t->state = THINK_CONTENT;
            continue;
        }
        if (t->state == THINK_REASONING) {
            size_t p = find(h, hn, 0, CLOSE_TAG, CLOSE_LEN);
            if (p != (size_t)-1) {
                OB_TRY(emit(t, h, p, reasoning));
                ob_buf_consume(&t->hold, p + CLOSE_LEN);
                t->state = THINK_CONTENT;
                t->trim = true;
                continue;
            }
            size_t keep = final ? 0 : partial_suffix(h, hn, CLOSE_TAG, CLOSE_LEN);
            OB_TRY(emit(t, h, hn - keep, reasoning));
            ob_buf_consume(&t->hold, hn - keep);
            return 0;
        }
        /* content: everything held is answer text */
        int rc = emit(t, h, hn, content);
        ob_buf_clear(&t->hold);
        return rc;
    }
}

void ob_srv_think_free(ob_srv_think *t) { ob_buf_free(&t->hold); }
