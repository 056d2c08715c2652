/*
 * pull.c - `ob_pull`: fetch a GGUF from a Hugging Face hub into the store.
 *
 * Speaks the two hub endpoints huggingface_hub itself uses, over libcurl:
 *
 *   GET {endpoint}/api/models/{org}/{repo}/tree/{revision}?recursive=true
 *       a JSON array of {"type":"file","path","size","oid","lfs":{"oid",
 *       "size"}}; long listings continue at the URL of a `Link: <...>;
 *       rel="next"` header;
 *   GET {endpoint}/{org}/{repo}/resolve/{revision}/{path}
 *       the bytes, usually after a 302 to a CDN; Range requests resume.
 *
 * A file is written to <file>.part (flock'ed, so two pulls of one file do not
 * interleave), hashed as it arrives (re-reading what a previous run left),
 * checked against the listing's size and SHA-256 and only then renamed into
 * place, so a file under its final name is always complete and verified.
 *
 * Errors say which of the usual things went wrong: no network (curl's words
 * plus what to do), a repository or file that is not there, a gated model
 * without HF_TOKEN, a corrupt download. Which file of a repository is wanted
 * is decided by ob_store_pick (store.c), shared with `-m` resolution.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/log.h"
#include "../core/mem.h"
#include "../core/status.h"
#include "hub.h"
#include "store.h"

#define HF_DEFAULT_ENDPOINT "https://huggingface.co"
#define API_BODY_MAX ((size_t)64 << 20) /* one listing page is ~300 KB; anything near this is wrong */
#define ERR_BODY_MAX 2048
#define MAX_PAGES 500                   /* 1000 entries a page on the hub */
#define PROGRESS_EVERY_NS 100000000LL   /* progress callbacks at most every 100 ms */
#define HASH_CHUNK ((size_t)1 << 20)
#define URL_MAX 8192

/* ---- libcurl, once per process ---- */

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;
static void curl_init_once(void) { g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); }

ob_pull_params ob_pull_default_params(void) {
    ob_pull_params p;
    memset(&p, 0, sizeof p);
    p.retries = 4;
    p.connect_timeout_s = 30;
    p.stall_timeout_s = 60;
    return p;
}

/* ---- one pull ---- */

typedef ob_hub_file hub_file; /* hub.h */

typedef struct hub {
    const ob_pull_params *p;
    char endpoint[1024];     /* no trailing '/' */
    char repo[256];
    const char *revision;
    char rev_enc[512];
    char root[OB_STORE_PATH_MAX];
    bool have_token;
    struct curl_slist *headers; /* Authorization, when there is a token */
    char ua[128];
    hub_file *files;
    size_t n_files, cap_files;
} hub;

/* What the header callback saw of the last response (redirects reset it). */
typedef struct resp {
    long status;
    char content_range[128];
    char err_code[64];       /* X-Error-Code: RepoNotFound, GatedRepo, EntryNotFound, ... */
    char err_msg[256];       /* X-Error-Message */
    char link_next[URL_MAX]; /* Link: <...>; rel="next" */
    char *body;              /* API responses and error bodies */
    size_t len, cap, max;
    bool too_big, oom;
} resp;

static void resp_reset_headers(resp *r) {
    r->status = 0;
    r->content_range[0] = r->err_code[0] = r->err_msg[0] = r->link_next[0] = '\0';
}

static void resp_free(resp *r) {
    ob_free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

static void copy_trim(char *dst, size_t size, const char *src, size_t n) {
    while (n && isspace((unsigned char)*src)) src++, n--;
    while (n && isspace((unsigned char)src[n - 1])) n--;
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Link: <url1>; rel="next", <url2>; rel="last" -> url1 */
void ob_hub_parse_link(const char *v, size_t n, char *out, size_t size) {
    const char *end = v + n;
    while (v < end) {
        const char *lt = memchr(v, '<', (size_t)(end - v));
        if (!lt) return;
        const char *gt = memchr(lt, '>', (size_t)(end - lt));
        if (!gt) return;
        const char *next = memchr(gt, '<', (size_t)(end - gt));
        const char *pe = next ? next : end;
        bool is_next = false;
        /* the header is not NUL-terminated: compare within [gt, pe) only */
        for (const char *q = gt; q + 8 <= pe; q++)
            if ((q + 10 <= pe && strncasecmp(q, "rel=\"next\"", 10) == 0) || strncasecmp(q, "rel=next", 8) == 0)
                is_next = true;
        if (is_next) {
            copy_trim(out, size, lt + 1, (size_t)(gt - lt - 1));
            return;
        }
        v = pe;
    }
}

static size_t header_cb(char *buf, size_t size, size_t nitems, void *ud) {
    resp *r = ud;
    size_t n = size * nitems;
    if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        resp_reset_headers(r);
        const char *sp = memchr(buf, ' ', n);
        if (sp) r->status = strtol(sp + 1, NULL, 10);
        return n;
    }
    const char *colon = memchr(buf, ':', n);
    if (!colon) return n;
    size_t kl = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vl = n - kl - 1;
#define IS(name) (kl == sizeof(name) - 1 && strncasecmp(buf, name, kl) == 0)
    if (IS("content-range")) copy_trim(r->content_range, sizeof r->content_range, v, vl);
    else if (IS("x-error-code")) copy_trim(r->err_code, sizeof r->err_code, v, vl);
    else if (IS("x-error-message")) copy_trim(r->err_msg, sizeof r->err_msg, v, vl);
    else if (IS("link")) ob_hub_parse_link(v, vl, r->link_next, sizeof r->link_next);
#undef IS
    return n;
}

static size_t body_append(resp *r, const char *p, size_t n) {
    if (r->len + n > r->max) {
        r->too_big = true;
        n = r->len < r->max ? r->max - r->len : 0;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1) cap *= 2;
        char *b = ob_realloc(r->body, cap);
        if (!b) {
            r->oom = true;
            return 0;
        }
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, p, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

static size_t api_write_cb(char *p, size_t size, size_t nmemb, void *ud) {
    resp *r = ud;
    size_t n = size * nmemb;
    if (body_append(r, p, n) != n) return 0; /* too big or out of memory: abort the transfer */
    return n;
}

/* Percent-encode s (RFC 3986 unreserved bytes kept; '/' kept when
 * keep_slash, since repository paths keep their folders). */
static int url_escape(const char *s, bool keep_slash, char *out, size_t size) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~' || (keep_slash && *p == '/');
        if (o + 4 > size) return ob_err(OB_ERR_RANGE, "URL too long");
        if (plain) out[o++] = (char)*p;
        else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

/* Options every request shares. errbuf: CURL_ERROR_SIZE bytes. */
static void common_opts(hub *h, CURL *c, resp *r, char *errbuf) {
    curl_easy_setopt(c, CURLOPT_USERAGENT, h->ua);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)h->p->connect_timeout_s);
    /* a stalled transfer (less than 1 byte/s for this long) fails and is resumed */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)h->p->stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM: callers may be threaded */
    /* The token goes in a custom header; libcurl drops custom Authorization
     * headers when a redirect leaves the host (CURLOPT_UNRESTRICTED_AUTH is
     * off), so the hub's signed CDN URLs never see it. */
    if (h->headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    errbuf[0] = '\0';
}

static const char *curl_why(CURLcode cc, const char *errbuf) { return errbuf[0] ? errbuf : curl_easy_strerror(cc); }

/* Did the request fail before any server answered (no network, DNS, a
 * host that does not answer)? Those fail fast on the listing: retrying an
 * unreachable hub only delays the message that says so. */
static bool connect_failure(CURLcode cc) {
    return cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY || cc == CURLE_COULDNT_CONNECT ||
           cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_SSL_CONNECT_ERROR;
}

/* The failure of a request that never got an HTTP answer. */
static int net_error(hub *h, CURLcode cc, const char *errbuf, const char *url) {
    if (connect_failure(cc))
        return ob_err(OB_ERR_IO,
                      "cannot reach %s: %s (is the network reachable? set HF_ENDPOINT to use a mirror, or copy the "
                      "GGUF into %s/%s/ by hand)",
                      h->endpoint, curl_why(cc, errbuf), h->root, h->repo);
    return ob_err(OB_ERR_IO, "GET %s: %s", url, curl_why(cc, errbuf));
}

/* Is this curl failure worth another attempt? */
static bool transient(CURLcode cc) {
    return cc == CURLE_PARTIAL_FILE || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
           cc == CURLE_GOT_NOTHING || cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_HTTP2 ||
           cc == CURLE_HTTP2_STREAM || cc == CURLE_COULDNT_CONNECT || cc == CURLE_SSL_CONNECT_ERROR;
}

/* An HTTP error answer from the hub, as a sentence. file: NULL for the
 * listing. Returns the status to give back. */
static int hub_error(hub *h, const resp *r, const char *file) {
    char extra[320] = "";
    if (r->err_msg[0]) snprintf(extra, sizeof extra, " (hub: %s)", r->err_msg);
    else if (r->body && r->len) {
        json_error_t je;
        json_t *j = json_loadb(r->body, r->len, 0, &je);
        const char *m = j ? json_string_value(json_object_get(j, "error")) : NULL;
        if (m) snprintf(extra, sizeof extra, " (hub: %.280s)", m);
        json_decref(j);
    }
    const char *what = file ? file : "";
    const char *sep = file ? ":" : "";
    switch (r->status) {
    case 401:
        if (!h->have_token)
            return ob_err(OB_ERR_NOT_FOUND,
                          "%s%s%s: not found at %s, or private or gated (HTTP 401)%s: check the name, or set HF_TOKEN "
                          "to a token that may read it",
                          h->repo, sep, what, h->endpoint, extra);
        return ob_err(OB_ERR_NOT_FOUND,
                      "%s%s%s: the hub at %s refused HF_TOKEN, or the repository does not exist (HTTP 401)%s",
                      h->repo, sep, what, h->endpoint, extra);
    case 403:
        return ob_err(OB_ERR_NOT_FOUND,
                      "%s%s%s: access denied (HTTP 403)%s; a gated model needs its license accepted at %s/%s by the "
                      "account of HF_TOKEN",
                      h->repo, sep, what, extra, h->endpoint, h->repo);
    case 404:
        if (strcmp(r->err_code, "RevisionNotFound") == 0)
            return ob_err(OB_ERR_NOT_FOUND, "%s: revision '%s' not found (HTTP 404)%s", h->repo, h->revision, extra);
        if (file || strcmp(r->err_code, "EntryNotFound") == 0)
            return ob_err(OB_ERR_NOT_FOUND, "%s: file '%s' not found at revision '%s' (HTTP 404)%s", h->repo, what,
                          h->revision, extra);
        return ob_err(OB_ERR_NOT_FOUND, "%s: repository not found at %s (HTTP 404)%s", h->repo, h->endpoint, extra);
    case 429:
        return ob_err(OB_ERR_IO, "%s: rate limited by %s (HTTP 429)%s; wait a while, or set HF_TOKEN", h->repo,
                      h->endpoint, extra);
    default:
        return ob_err(OB_ERR_IO, "%s%s%s: HTTP %ld from %s%s", h->repo, sep, what, r->status, h->endpoint, extra);
    }
}

static void sleep_backoff(int attempt) {
    int s = attempt < 3 ? 1 << attempt : 8;
    struct timespec ts = {s, 0};
    nanosleep(&ts, NULL);
}

/* ---- the listing ---- */

static int add_file(const char *repo, json_t *e, hub_file **files, size_t *n, size_t *cap_files) {
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *path = json_string_value(json_object_get(e, "path"));
    if (!path || (type && strcmp(type, "file") != 0)) return 0;
    if (ob_store_check_rel_path(path) < 0) {
        OB_LOGW("pull: %s: skipping a listed file with an unsafe path: %s", repo, ob_last_error());
        ob_err_clear();
        return 0;
    }
    if (*n == *cap_files) {
        size_t cap = *cap_files ? *cap_files * 2 : 64;
        hub_file *f = ob_realloc(*files, ob_mul_size(cap, sizeof *f));
        if (!f) return ob_err(OB_ERR_OOM, "pull: out of memory");
        *files = f;
        *cap_files = cap;
    }
    hub_file *f = &(*files)[*n];
    memset(f, 0, sizeof *f);
    json_t *lfs = json_object_get(e, "lfs");
    json_t *size = json_object_get(lfs ? lfs : e, "size");
    if (!json_is_integer(size)) size = json_object_get(e, "size");
    f->size = json_is_integer(size) && json_integer_value(size) >= 0 ? (uint64_t)json_integer_value(size) : 0;
    const char *sha = lfs ? json_string_value(json_object_get(lfs, "oid")) : NULL;
    if (!sha && lfs) sha = json_string_value(json_object_get(lfs, "sha256"));
    if (sha && strlen(sha) == 64) {
        for (int i = 0; i < 64; i++) f->sha256[i] = (char)tolower((unsigned char)sha[i]);
    }
    const char *oid = json_string_value(json_object_get(e, "oid"));
    if (!lfs && oid && strlen(oid) == 40) {
        for (int i = 0; i < 40; i++) f->gitsha1[i] = (char)tolower((unsigned char)oid[i]);
    }
    f->path = ob_strdup(path);
    if (!f->path) return ob_err(OB_ERR_OOM, "pull: out of memory");
    (*n)++;
    return 0;
}

int ob_hub_parse_listing(const char *body, size_t len, const char *repo, const char *url, ob_hub_file **files,
                         size_t *n, size_t *cap) {
    json_error_t je;
    json_t *j = json_loadb(body ? body : "", body ? len : 0, 0, &je);
    if (!json_is_array(j)) {
        json_decref(j);
        return ob_err(OB_ERR_FORMAT, "%s: the listing from %s is not a JSON array (%s)", repo, url,
                      j ? "other JSON" : je.text);
    }
    int rc = 0;
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) {
        if ((rc = add_file(repo, e, files, n, cap)) < 0) break;
    }
    json_decref(j);
    return rc;
}

void ob_hub_files_free(ob_hub_file *files, size_t n) {
    for (size_t i = 0; files && i < n; i++) ob_free(files[i].path);
    ob_free(files);
}

/* GET url into r->body, retrying 5xx and dropped connections. */
static int api_get(hub *h, const char *url, resp *r) {
    char errbuf[CURL_ERROR_SIZE];
    for (int attempt = 0;; attempt++) {
        CURL *c = curl_easy_init();
        if (!c) return ob_err(OB_ERR_OOM, "curl_easy_init failed");
        resp_free(r);
        resp_reset_headers(r);
        r->too_big = r->oom = false;
        r->max = API_BODY_MAX;
        common_opts(h, c, r, errbuf);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, api_write_cb);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* gzip for JSON listings */
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
        CURLcode cc = curl_easy_perform(c);
        curl_easy_cleanup(c);
        if (r->oom) return ob_err(OB_ERR_OOM, "pull: out of memory reading %s", url);
        if (r->too_big) return ob_err(OB_ERR_FORMAT, "%s: the answer of %s is over %zu bytes", h->repo, url, r->max);
        bool again = cc != CURLE_OK ? transient(cc) && !connect_failure(cc) : (r->status >= 500 || r->status == 429);
        if (again && attempt < h->p->retries) {
            OB_LOGW("pull: %s: %s; retrying", url,
                    cc != CURLE_OK ? curl_why(cc, errbuf) : (r->status == 429 ? "rate limited" : "server error"));
            sleep_backoff(attempt);
            continue;
        }
        if (cc != CURLE_OK) return net_error(h, cc, errbuf, url);
        return 0;
    }
}

static int list_repo(hub *h) {
    char url[URL_MAX];
    int w = snprintf(url, sizeof url, "%s/api/models/%s/tree/%s?recursive=true", h->endpoint, h->repo, h->rev_enc);
    if (w < 0 || (size_t)w >= sizeof url) return ob_err(OB_ERR_RANGE, "listing URL too long");
    resp r = {0};
    int rc = 0;
    for (int page = 0; page < MAX_PAGES && rc == 0; page++) {
        rc = api_get(h, url, &r);
        if (rc < 0) break;
        if (r.status != 200) {
            rc = hub_error(h, &r, NULL);
            break;
        }
        rc = ob_hub_parse_listing(r.body, r.len, h->repo, url, &h->files, &h->n_files, &h->cap_files);
        if (rc < 0 || !r.link_next[0]) break;
        /* follow the next page only on the same endpoint: the token goes with it */
        if (r.link_next[0] == '/') w = snprintf(url, sizeof url, "%s%s", h->endpoint, r.link_next);
        else if (strncmp(r.link_next, h->endpoint, strlen(h->endpoint)) == 0)
            w = snprintf(url, sizeof url, "%s", r.link_next);
        else {
            rc = ob_err(OB_ERR_FORMAT, "%s: the listing continues on another host (%s); not followed", h->repo,
                        r.link_next);
            break;
        }
        if (w < 0 || (size_t)w >= sizeof url) rc = ob_err(OB_ERR_RANGE, "listing URL too long");
    }
    resp_free(&r);
    return rc;
}

/* ---- downloading one file ---- */

enum { HASH_NONE = 0, HASH_SHA256 = 1, HASH_GITSHA1 = 2 };

typedef struct dl {
    hub *h;
    const hub_file *f;
    const char *dest;
    int fd;
    uint64_t off;           /* bytes on disk (and hashed) */
    EVP_MD_CTX *md;
    int hash;
    resp r;                 /* error bodies only */
    bool started;           /* the body of this attempt's answer began */
    bool bad_range, too_long, cancelled;
    int werr;               /* errno of a failed write */
    uint64_t moved;         /* bytes written by this attempt */
    ob_pull_progress pp;
    int64_t last_ns;
} dl;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int emit(dl *d, ob_pull_event ev, const char *message) {
    d->pp.event = ev;
    d->pp.done = d->off;
    d->pp.message = message;
    if (!d->h->p->progress) return 0;
    return d->h->p->progress(&d->pp, d->h->p->progress_user);
}

static int hash_reset(dl *d) {
    if (d->hash == HASH_NONE) return 0;
    if (EVP_DigestInit_ex(d->md, d->hash == HASH_SHA256 ? EVP_sha256() : EVP_sha1(), NULL) != 1)
        return ob_err(OB_ERR_INTERNAL, "EVP_DigestInit_ex failed");
    if (d->hash == HASH_GITSHA1) {
        /* git hashes "blob <size>\0" + content */
        char hdr[48];
        int n = snprintf(hdr, sizeof hdr, "blob %" PRIu64, d->f->size);
        EVP_DigestUpdate(d->md, hdr, (size_t)n + 1);
    }
    return 0;
}

/* Hash the bytes a previous run left in the .part. */
static int hash_existing(dl *d) {
    if (d->hash == HASH_NONE || d->off == 0) return 0;
    char *buf = ob_malloc(HASH_CHUNK);
    if (!buf) return ob_err(OB_ERR_OOM, "pull: out of memory");
    uint64_t pos = 0;
    while (pos < d->off) {
        size_t want = d->off - pos < HASH_CHUNK ? (size_t)(d->off - pos) : HASH_CHUNK;
        ssize_t got = pread(d->fd, buf, want, (off_t)pos);
        if (got <= 0) {
            int e = errno;
            ob_free(buf);
            return ob_err(OB_ERR_IO, "reading %s.part: %s", d->dest, got < 0 ? strerror(e) : "short file");
        }
        EVP_DigestUpdate(d->md, buf, (size_t)got);
        pos += (uint64_t)got;
    }
    ob_free(buf);
    return 0;
}

static int restart_from_zero(dl *d) {
    if (ftruncate(d->fd, 0) < 0) {
        int e = errno;
        return ob_err(OB_ERR_IO, "truncating %s.part: %s", d->dest, strerror(e));
    }
    d->off = 0;
    return hash_reset(d);
}

static size_t dl_write_cb(char *p, size_t size, size_t nmemb, void *ud) {
    dl *d = ud;
    size_t n = size * nmemb;
    if (d->r.status < 200 || d->r.status >= 300) {
        body_append(&d->r, p, n); /* an error page: keep its start for the message */
        return n;
    }
    if (!d->started) {
        d->started = true;
        if (d->r.status == 206) {
            /* "bytes 1000-1999/2000": the server must resume where we are */
            unsigned long long a = 0;
            if (sscanf(d->r.content_range, "bytes %llu-", &a) != 1 || a != d->off) {
                d->bad_range = true;
                return 0;
            }
        } else if (d->off > 0) {
            /* 200 to a Range request: the server sends everything again */
            if (restart_from_zero(d) < 0) {
                d->werr = errno ? errno : EIO;
                return 0;
            }
        }
    }
    if (d->off + n > d->f->size) {
        d->too_long = true;
        return 0;
    }
    size_t w = 0;
    while (w < n) {
        ssize_t k = pwrite(d->fd, p + w, n - w, (off_t)(d->off + w));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            d->werr = k < 0 ? errno : EIO;
            return 0;
        }
        w += (size_t)k;
    }
    if (d->hash != HASH_NONE) EVP_DigestUpdate(d->md, p, n);
    d->off += n;
    d->moved += n;
    return n;
}

static int dl_xfer_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    dl *d = ud;
    if (d->cancelled) return 1;
    int64_t t = now_ns();
    if (t - d->last_ns < PROGRESS_EVERY_NS) return 0;
    d->last_ns = t;
    if (emit(d, OB_PULL_PROGRESS, NULL) != 0) d->cancelled = true;
    return d->cancelled ? 1 : 0;
}

/* One GET of the file from d->off. Returns 0 when the answer ended normally
 * (d->off tells how far it got), 1 for a failure worth another attempt, or a
 * negative status; both failures leave a message. */
static int attempt(dl *d) {
    hub *h = d->h;
    char path_enc[OB_STORE_PATH_MAX * 3], url[URL_MAX], range[48], errbuf[CURL_ERROR_SIZE];
    OB_TRY(url_escape(d->f->path, true, path_enc, sizeof path_enc));
    int w = snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", h->endpoint, h->repo, h->rev_enc, path_enc);
    if (w < 0 || (size_t)w >= sizeof url) return ob_err(OB_ERR_RANGE, "download URL too long");
    CURL *c = curl_easy_init();
    if (!c) return ob_err(OB_ERR_OOM, "curl_easy_init failed");
    resp_free(&d->r);
    resp_reset_headers(&d->r);
    d->r.max = ERR_BODY_MAX;
    d->started = d->bad_range = d->too_long = false;
    d->werr = 0;
    d->moved = 0;
    uint64_t start = d->off;
    common_opts(h, c, &d->r, errbuf);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, dl_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, d);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, dl_xfer_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, d);
    if (start > 0) {
        snprintf(range, sizeof range, "%" PRIu64 "-", start);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    CURLcode cc = curl_easy_perform(c);
    curl_easy_cleanup(c);

    const char *file = d->f->path;
    if (d->cancelled)
        return ob_err(OB_ERR_CANCELLED, "%s: cancelled; the partial download stays in %s.part and the next pull "
                      "resumes it", file, d->dest);
    if (d->werr)
        return ob_err(OB_ERR_IO, "writing %s.part: %s", d->dest, strerror(d->werr));
    if (d->too_long)
        return ob_err(OB_ERR_FORMAT, "%s: the server sent more than the %" PRIu64 " bytes the hub lists", file,
                      d->f->size);
    if (d->bad_range) {
        OB_TRY(restart_from_zero(d));
        return ob_err(1, "%s: the server resumed at the wrong offset (%s for byte %" PRIu64 "); starting over", file,
                      d->r.content_range, start);
    }
    if (d->r.status == 416 && start > 0) {
        /* our .part does not fit the file the server has now */
        OB_TRY(restart_from_zero(d));
        return ob_err(1, "%s: the server cannot resume at byte %" PRIu64 " (HTTP 416); starting over", file, start);
    }
    if (cc != CURLE_OK) {
        if (!transient(cc)) return net_error(h, cc, errbuf, url);
        return ob_err(1, "%s: %s at byte %" PRIu64 " of %" PRIu64, file, curl_why(cc, errbuf), d->off, d->f->size);
    }
    if (d->r.status >= 500 || d->r.status == 429)
        return ob_err(1, "%s: HTTP %ld from the server", file, d->r.status);
    if (d->r.status < 200 || d->r.status >= 300) return hub_error(h, &d->r, file);
    return 0;
}

static bool hex_eq(const unsigned char *dig, unsigned len, const char *hex) {
    static const char digits[] = "0123456789abcdef";
    if (strlen(hex) != (size_t)len * 2) return false;
    for (unsigned i = 0; i < len; i++)
        if (hex[2 * i] != digits[dig[i] >> 4] || hex[2 * i + 1] != digits[dig[i] & 15]) return false;
    return true;
}

static void to_hex(const unsigned char *dig, unsigned len, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < len; i++) {
        out[2 * i] = digits[dig[i] >> 4];
        out[2 * i + 1] = digits[dig[i] & 15];
    }
    out[2 * len] = '\0';
}

/* The .part holds every byte: check it, then give it its final name. */
static int finish(dl *d, const char *part) {
    const hub_file *f = d->f;
    if (d->off != f->size)
        return ob_err(OB_ERR_FORMAT, "%s: %" PRIu64 " bytes on disk, the hub lists %" PRIu64, f->path, d->off,
                      f->size);
    if (emit(d, OB_PULL_VERIFY, NULL) != 0)
        return ob_err(OB_ERR_CANCELLED, "%s: cancelled before the check; the next pull checks it", f->path);
    if (d->hash != HASH_NONE) {
        unsigned char dig[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        if (EVP_DigestFinal_ex(d->md, dig, &len) != 1) return ob_err(OB_ERR_INTERNAL, "EVP_DigestFinal_ex failed");
        const char *want = d->hash == HASH_SHA256 ? f->sha256 : f->gitsha1;
        if (!hex_eq(dig, len, want)) {
            char got[2 * EVP_MAX_MD_SIZE + 1];
            to_hex(dig, len, got);
            unlink(part);
            return ob_err(OB_ERR_FORMAT,
                          "%s: %s is %s but the hub says %s: the download is corrupt and was deleted; pull again",
                          f->path, d->hash == HASH_SHA256 ? "SHA-256" : "git SHA-1", got, want);
        }
    }
    if (ob_store_is_gguf(f->path)) {
        unsigned char magic[4] = {0};
        if (pread(d->fd, magic, 4, 0) != 4 || memcmp(magic, "GGUF", 4) != 0) {
            unlink(part);
            return ob_err(OB_ERR_FORMAT,
                          "%s: not a GGUF file (it starts with %02x %02x %02x %02x); the download was deleted",
                          f->path, magic[0], magic[1], magic[2], magic[3]);
        }
    }
    if (fsync(d->fd) < 0 || rename(part, d->dest) < 0) {
        int e = errno;
        return ob_err(OB_ERR_IO, "storing %s: %s", d->dest, strerror(e));
    }
    return 0;
}

static int download(hub *h, const hub_file *f, int index, int count) {
    char dest[OB_STORE_PATH_MAX], part[OB_STORE_PATH_MAX + 8];
    int w = snprintf(dest, sizeof dest, "%s/%s/%s", h->root, h->repo, f->path);
    if (w < 0 || (size_t)w >= sizeof dest) return ob_err(OB_ERR_RANGE, "store path too long for %s", f->path);
    snprintf(part, sizeof part, "%s.part", dest);
    dl d;
    memset(&d, 0, sizeof d);
    d.h = h;
    d.f = f;
    d.dest = dest;
    d.fd = -1;
    d.hash = f->sha256[0] ? HASH_SHA256 : f->gitsha1[0] ? HASH_GITSHA1 : HASH_NONE;
    d.pp = (ob_pull_progress){.repo = h->repo, .file = f->path, .path = dest, .index = index, .count = count,
                              .total = f->size,
                              .checksum = d.hash == HASH_SHA256 ? "sha256" : d.hash == HASH_GITSHA1 ? "git-sha1"
                                                                                                   : "none"};
    struct stat st;
    if (!h->p->force && stat(dest, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == f->size) {
        d.off = f->size;
        d.pp.resumed = f->size;
        return emit(&d, OB_PULL_CACHED, NULL) != 0 ? ob_err(OB_ERR_CANCELLED, "cancelled") : 0;
    }
    OB_TRY(ob_store_mkdirs_for(dest));
    d.fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (d.fd < 0) {
        int e = errno;
        return ob_err(OB_ERR_IO, "cannot open %s: %s", part, strerror(e));
    }
    int rc = 0;
    if (flock(d.fd, LOCK_EX | LOCK_NB) < 0) {
        close(d.fd);
        return ob_err(OB_ERR_IO, "%s: another pull is downloading it (%s is locked)", f->path, part);
    }
    if (fstat(d.fd, &st) < 0) {
        int e = errno;
        close(d.fd);
        return ob_err(OB_ERR_IO, "stat %s: %s", part, strerror(e));
    }
    d.off = (uint64_t)st.st_size;
    if (d.hash != HASH_NONE && !(d.md = EVP_MD_CTX_new())) {
        close(d.fd);
        return ob_err(OB_ERR_OOM, "EVP_MD_CTX_new failed");
    }
    if (h->p->force || d.off > f->size) rc = restart_from_zero(&d);
    else rc = hash_reset(&d);
    if (rc == 0) rc = hash_existing(&d);
    d.pp.resumed = d.off;
    d.last_ns = now_ns();
    if (rc == 0 && emit(&d, OB_PULL_START, NULL) != 0) rc = ob_err(OB_ERR_CANCELLED, "cancelled");

    int tries_left = h->p->retries, backoff = 0;
    while (rc == 0 && d.off < f->size) {
        int a = attempt(&d);
        if (a < 0) {
            rc = a;
            break;
        }
        if (a == 0 && d.off == f->size) break;
        if (a == 0)
            ob_err(1, "%s: the answer ended at byte %" PRIu64 " of %" PRIu64, f->path, d.off, f->size);
        /* a transfer that moved bytes resumes at once; one that did not waits
         * and counts against the retries */
        if (d.moved == 0) {
            if (tries_left-- <= 0) {
                rc = ob_err_wrap(OB_ERR_IO, "giving up after %d attempts (the partial download stays in %s; the "
                                            "next pull resumes it)",
                                 h->p->retries + 1, part);
                break;
            }
            sleep_backoff(backoff++);
        } else {
            tries_left = h->p->retries;
            backoff = 0;
        }
        char why[512];
        snprintf(why, sizeof why, "%s", ob_last_error());
        OB_LOGI("pull: %s; resuming at byte %" PRIu64, why, d.off);
        if (emit(&d, OB_PULL_RETRY, why) != 0) rc = ob_err(OB_ERR_CANCELLED, "cancelled");
    }
    if (rc == 0) rc = finish(&d, part);
    if (rc == 0) {
        ob_err_clear();
        (void)emit(&d, OB_PULL_DONE, NULL); /* a cancel now changes nothing: the file is stored */
    } else if (d.off == 0 && fstat(d.fd, &st) == 0 && st.st_size == 0) {
        unlink(part); /* nothing worth resuming: leave no empty .part behind */
    }
    resp_free(&d.r);
    EVP_MD_CTX_free(d.md);
    close(d.fd);
    return rc;
}

/* ---- ob_pull ---- */

/* The token: the parameter, else HF_TOKEN, else the file huggingface-cli
 * login writes (HF_TOKEN_PATH, else $HF_HOME/token, else
 * ~/.cache/huggingface/token). */
static void find_token(const ob_pull_params *p, char *out, size_t size) {
    out[0] = '\0';
    if (p->token) {
        snprintf(out, size, "%s", p->token);
        return;
    }
    const char *env = getenv("HF_TOKEN");
    if (!env || !*env) env = getenv("HUGGING_FACE_HUB_TOKEN");
    if (env && *env) {
        snprintf(out, size, "%s", env);
    } else {
        char path[OB_STORE_PATH_MAX] = "";
        const char *tp = getenv("HF_TOKEN_PATH"), *home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME"),
                   *uh = getenv("HOME");
        if (tp && *tp) snprintf(path, sizeof path, "%s", tp);
        else if (home && *home) snprintf(path, sizeof path, "%s/token", home);
        else if (xdg && xdg[0] == '/') snprintf(path, sizeof path, "%s/huggingface/token", xdg);
        else if (uh && *uh) snprintf(path, sizeof path, "%s/.cache/huggingface/token", uh);
        FILE *fp = path[0] ? fopen(path, "r") : NULL;
        if (fp) {
            if (!fgets(out, (int)size, fp)) out[0] = '\0';
            fclose(fp);
        }
    }
    size_t n = strlen(out);
    while (n && isspace((unsigned char)out[n - 1])) out[--n] = '\0';
    /* a header value may not carry line breaks */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] < 0x20) out[0] = '\0';
}

static bool env_true(const char *name) {
    const char *v = getenv(name);
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
                 strcasecmp(v, "on") == 0);
}

static void hub_free(hub *h) {
    ob_hub_files_free(h->files, h->n_files);
    curl_slist_free_all(h->headers);
}

static int hub_init(hub *h, const ob_pull_params *p, const char *repo) {
    memset(h, 0, sizeof *h);
    h->p = p;
    snprintf(h->repo, sizeof h->repo, "%s", repo);
    h->revision = p->revision && *p->revision ? p->revision : "main";
    OB_TRY(url_escape(h->revision, false, h->rev_enc, sizeof h->rev_enc));
    const char *ep = p->endpoint && *p->endpoint ? p->endpoint : getenv("HF_ENDPOINT");
    if (!ep || !*ep) ep = HF_DEFAULT_ENDPOINT;
    if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
        return ob_err(OB_ERR_INVALID_ARG, "HF_ENDPOINT '%s' must start with http:// or https://", ep);
    int w = snprintf(h->endpoint, sizeof h->endpoint, "%s", ep);
    if (w < 0 || (size_t)w >= sizeof h->endpoint) return ob_err(OB_ERR_RANGE, "HF_ENDPOINT too long");
    while (w > 0 && h->endpoint[w - 1] == '/') h->endpoint[--w] = '\0';
    OB_TRY(ob_store_dir(p->models_dir, h->root, sizeof h->root));
    snprintf(h->ua, sizeof h->ua, "1bit/%d.%d.%d libcurl/%s", OB_VERSION_MAJOR, OB_VERSION_MINOR, OB_VERSION_PATCH,
             curl_version_info(CURLVERSION_NOW)->version);
    char token[2048], header[2100];
    find_token(p, token, sizeof token);
    if (token[0]) {
        snprintf(header, sizeof header, "Authorization: Bearer %s", token);
        h->headers = curl_slist_append(NULL, header);
        if (!h->headers) return ob_err(OB_ERR_OOM, "pull: out of memory");
        h->have_token = true;
    }
    return 0;
}

int ob_pull(const char *spec, const ob_pull_params *params, char *out_path, size_t size) {
    if (!spec || !*spec) return ob_err(OB_ERR_INVALID_ARG, "pull: no model (expected org/repo[:file-or-quant])");
    ob_pull_params p = params ? *params : ob_pull_default_params();
    if (p.retries < 0) p.retries = 0;
    if (p.connect_timeout_s <= 0) p.connect_timeout_s = 30;
    if (p.stall_timeout_s <= 0) p.stall_timeout_s = 60;
    char repo[256];
    const char *sel = NULL;
    OB_TRY(ob_store_parse_spec(spec, repo, sizeof repo, &sel));
    if (sel && ob_store_is_gguf(sel)) OB_TRY(ob_store_check_rel_path(sel));

    if (env_true("HF_HUB_OFFLINE")) {
        /* no network allowed: what the store has is the answer */
        char path[OB_STORE_PATH_MAX];
        int rc = ob_store_resolve(p.models_dir, spec, path, sizeof path);
        if (rc < 0) return ob_err_wrap(rc, "HF_HUB_OFFLINE is set and %s is not in the store", spec);
        if (out_path && snprintf(out_path, size, "%s", path) >= (int)size)
            return ob_err(OB_ERR_RANGE, "path buffer too small");
        return 0;
    }

    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init != CURLE_OK)
        return ob_err(OB_ERR_INTERNAL, "curl_global_init: %s", curl_easy_strerror(g_curl_init));
    hub h;
    int rc = hub_init(&h, &p, repo);
    if (rc == 0) rc = list_repo(&h);
    if (rc == OB_ERR_IO) {
        /* the hub is out of reach: say so, and say whether the store has it anyway */
        char have[OB_STORE_PATH_MAX];
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ob_last_error());
        if (ob_store_resolve(p.models_dir, spec, have, sizeof have) == 0)
            ob_err(rc, "%s; the store already has %s: %s", msg, spec, have);
        else
            ob_err(rc, "%s", msg);
    }
    size_t chosen = 0;
    const char **paths = NULL;
    if (rc == 0) {
        paths = ob_calloc(h.n_files ? h.n_files : 1, sizeof *paths);
        if (!paths) rc = ob_err(OB_ERR_OOM, "pull: out of memory");
        for (size_t i = 0; paths && i < h.n_files; i++) paths[i] = h.files[i].path;
        char what[320];
        snprintf(what, sizeof what, "%s (revision %s)", repo, h.revision);
        if (rc == 0) rc = ob_store_pick(paths, h.n_files, sel, what, &chosen);
    }
    /* the files to fetch: one, or every part of a split model */
    int idx = 1, count = 1;
    if (rc == 0 && ob_store_split_name(paths[chosen], &idx, &count, NULL)) {
        for (int k = 1; k <= count && rc == 0; k++) {
            char name[OB_STORE_PATH_MAX];
            rc = ob_store_split_part_name(paths[chosen], k, name, sizeof name);
            size_t j = 0;
            while (rc == 0 && j < h.n_files && strcmp(h.files[j].path, name) != 0) j++;
            if (rc == 0 && j == h.n_files)
                rc = ob_err(OB_ERR_NOT_FOUND, "%s: part %d of %d (%s) is not in the repository", repo, k, count, name);
            if (rc == 0) rc = download(&h, &h.files[j], k, count);
        }
    } else if (rc == 0) {
        rc = download(&h, &h.files[chosen], 1, 1);
    }
    if (rc == 0 && out_path) {
        int w = snprintf(out_path, size, "%s/%s/%s", h.root, repo, paths[chosen]);
        if (w < 0 || (size_t)w >= size) rc = ob_err(OB_ERR_RANGE, "path buffer too small for the stored path");
    }
    ob_free(paths);
    hub_free(&h);
    return rc;
}
