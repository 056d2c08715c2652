/*
 * test_pull.c - `1bit pull`, the model store and `-m` resolution, against a
 * hub imitation on loopback.
 *
 * A libmicrohttpd server on a free 127.0.0.1 port answers the two endpoints
 * the hub does: /api/models/{org}/{repo}/tree/main (JSON, paginated with a
 * Link header when asked) and /{org}/{repo}/resolve/main/{path}, which
 * redirects to /cdn/... as the hub redirects to its CDN, where the bytes are
 * served with Range support. The server counts the bytes it hands out and
 * can drop a connection midway once, so the tests can tell a resumed
 * download from a restarted one. HF_ENDPOINT points at it, OB_MODELS_DIR at
 * a temporary directory; nothing touches the real network.
 */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mem.h"
#include "onebit.h"
#include "test.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#ifndef OB_CLI_PATH
#error "OB_CLI_PATH must name the 1bit binary"
#endif

/* ---- the repositories the imitation serves ---- */

typedef struct fake_file {
    const char *path;
    size_t size;
    bool lfs;         /* listed with lfs.oid (sha256); else oid = git SHA-1 */
    bool wrong_sha;   /* listed with a checksum that does not match */
    bool vanished;    /* listed, but resolve answers 404 */
    unsigned char *data;
    char sha256[65], gitsha1[41];
} fake_file;

typedef struct fake_repo {
    const char *name;
    bool gated;       /* needs Authorization: Bearer sekrit */
    int page_size;    /* 0: one page; else Link-paginated */
    fake_file files[8];
} fake_repo;

#define TOKEN "sekrit"

#define LFS(p, n) {.path = (p), .size = (n), .lfs = true}
#define GIT(p, n) {.path = (p), .size = (n)}

static fake_repo g_repos[] = {
    {.name = "test-org/tiny",
     .files = {LFS("tinyllamas/stories-test.gguf", 300000), GIT("README.md", 120),
               {.path = "gone.gguf", .size = 1000, .lfs = true, .vanished = true}}},
    {.name = "test-org/quants",
     .files = {LFS("model-Q4_K_M.gguf", 20000), LFS("model-UD-Q4_K_M.gguf", 21000), LFS("model-Q8_0.gguf", 30000),
               LFS("model-IQ4_XS.gguf", 18000), LFS("mmproj-model-f16.gguf", 9000), GIT("README.md", 50)}},
    {.name = "test-org/noq4", .files = {LFS("b-F16.gguf", 12000), LFS("a-Q8_0.gguf", 11000)}},
    {.name = "test-org/split",
     .files = {LFS("big-Q4_K_M-00002-of-00002.gguf", 40000), LFS("big-Q4_K_M-00001-of-00002.gguf", 50000)}},
    {.name = "test-org/badsha", .files = {{.path = "bad.gguf", .size = 25000, .lfs = true, .wrong_sha = true}}},
    {.name = "test-org/gated", .gated = true, .files = {LFS("g.gguf", 8000)}},
    {.name = "test-org/paged", .page_size = 1,
     .files = {LFS("p1.gguf", 5000), LFS("p2-Q4_K_M.gguf", 6000), GIT("z.txt", 10)}},
    {.name = "test-org/plain", .files = {GIT("plain.gguf", 4000)}},
    {.name = "test-org/drop", .files = {LFS("d.gguf", 400000)}},
};

/* ---- what the server saw ---- */

typedef struct req_log {
    char kind[8];        /* "tree", "resolve", "cdn" */
    char path[256];
    char auth[64];
    char ua[64];
    char cursor[16];
    long range_start;    /* -1: no Range header */
    size_t served;       /* body bytes handed to the connection */
} req_log;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static req_log g_log[256];
static int g_n_log;
static size_t g_drop_after;    /* cdn: close after this many bytes, once (0: off) */
static char g_drop_path[256];

static struct MHD_Daemon *g_mhd;
static int g_port;
static char g_dir[256];        /* temp root */
static char g_store[300];
static char g_endpoint[64];

static void log_reset(void) {
    pthread_mutex_lock(&g_mu);
    g_n_log = 0;
    pthread_mutex_unlock(&g_mu);
}

static int log_add(const char *kind, const char *path, struct MHD_Connection *c) {
    pthread_mutex_lock(&g_mu);
    int i = g_n_log < (int)ARRAY_LEN(g_log) ? g_n_log++ : (int)ARRAY_LEN(g_log) - 1;
    req_log *l = &g_log[i];
    memset(l, 0, sizeof *l);
    snprintf(l->kind, sizeof l->kind, "%s", kind);
    snprintf(l->path, sizeof l->path, "%s", path);
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    snprintf(l->auth, sizeof l->auth, "%s", v ? v : "");
    v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent");
    snprintf(l->ua, sizeof l->ua, "%s", v ? v : "");
    v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
    snprintf(l->cursor, sizeof l->cursor, "%s", v ? v : "");
    l->range_start = -1;
    pthread_mutex_unlock(&g_mu);
    return i;
}

static size_t served_total(const char *kind) {
    size_t n = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n_log; i++)
        if (!strcmp(g_log[i].kind, kind)) n += g_log[i].served;
    pthread_mutex_unlock(&g_mu);
    return n;
}

static int count_kind(const char *kind) {
    int n = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n_log; i++) n += !strcmp(g_log[i].kind, kind);
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* ---- the server ---- */

static fake_repo *find_repo(const char *name, size_t len) {
    for (size_t i = 0; i < ARRAY_LEN(g_repos); i++)
        if (strlen(g_repos[i].name) == len && !strncmp(g_repos[i].name, name, len)) return &g_repos[i];
    return NULL;
}

static fake_file *find_file(fake_repo *r, const char *path) {
    for (int i = 0; i < 8 && r->files[i].path; i++)
        if (!strcmp(r->files[i].path, path)) return &r->files[i];
    return NULL;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *body, const char *ctype,
                                 const char *err_code, const char *link) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", ctype);
    if (err_code) {
        MHD_add_response_header(r, "X-Error-Code", err_code);
        MHD_add_response_header(r, "X-Error-Message", "imitation says no");
    }
    if (link) MHD_add_response_header(r, "Link", link);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static bool authorized(fake_repo *r, struct MHD_Connection *c) {
    if (!r->gated) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return a && !strcmp(a, "Bearer " TOKEN);
}

static enum MHD_Result serve_tree(struct MHD_Connection *c, const char *url) {
    /* /api/models/{org}/{repo}/tree/main */
    const char *p = url + strlen("/api/models/");
    const char *t = strstr(p, "/tree/");
    log_add("tree", url, c);
    fake_repo *r = t ? find_repo(p, (size_t)(t - p)) : NULL;
    if (!r) return send_text(c, 404, "{\"error\":\"Repository not found\"}", "application/json", "RepoNotFound", NULL);
    if (!authorized(r, c))
        return send_text(c, 401, "{\"error\":\"Access to this model is restricted\"}", "application/json",
                         "GatedRepo", NULL);
    if (strcmp(t + 6, "main") != 0)
        return send_text(c, 404, "{\"error\":\"Revision not found\"}", "application/json", "RevisionNotFound", NULL);
    const char *cur = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
    int first = cur ? atoi(cur) : 0, n = 0;
    while (n < 8 && r->files[n].path) n++;
    int last = r->page_size ? first + r->page_size : n;
    if (last > n) last = n;
    json_t *arr = json_array();
    for (int i = first; i < last; i++) {
        fake_file *f = &r->files[i];
        json_t *o = json_pack("{s:s, s:s, s:I}", "type", "file", "path", f->path, "size", (json_int_t)f->size);
        if (f->lfs) {
            json_object_set_new(o, "oid", json_string("0123456789abcdef0123456789abcdef01234567"));
            json_object_set_new(o, "lfs", json_pack("{s:s, s:I, s:i}", "oid",
                                                    f->wrong_sha ? "00000000000000000000000000000000000000000000000000"
                                                                   "00000000000000"
                                                                 : f->sha256,
                                                    "size", (json_int_t)f->size, "pointerSize", 134));
        } else {
            json_object_set_new(o, "oid", json_string(f->gitsha1));
        }
        json_array_append_new(arr, o);
    }
    if (first == 0) json_array_append_new(arr, json_pack("{s:s, s:s, s:i}", "type", "directory", "path", "sub", "size", 0));
    char *body = json_dumps(arr, 0);
    json_decref(arr);
    char link[256];
    bool more = last < n;
    if (more)
        snprintf(link, sizeof link, "<%s/api/models/%s/tree/main?recursive=true&cursor=%d>; rel=\"next\"", g_endpoint,
                 r->name, last);
    enum MHD_Result ret = send_text(c, 200, body, "application/json", NULL, more ? link : NULL);
    free(body);
    return ret;
}

static enum MHD_Result serve_resolve(struct MHD_Connection *c, const char *url) {
    /* /{org}/{repo}/resolve/main/{path} -> 302 /cdn/{org}/{repo}/{path} */
    const char *t = strstr(url, "/resolve/main/");
    log_add("resolve", url, c);
    fake_repo *r = t ? find_repo(url + 1, (size_t)(t - url - 1)) : NULL;
    if (!r) return send_text(c, 404, "Repository not found", "text/plain", "RepoNotFound", NULL);
    if (!authorized(r, c)) return send_text(c, 401, "Access restricted", "text/plain", "GatedRepo", NULL);
    fake_file *f = find_file(r, t + strlen("/resolve/main/"));
    if (!f || f->vanished) return send_text(c, 404, "Entry not found", "text/plain", "EntryNotFound", NULL);
    char loc[512];
    snprintf(loc, sizeof loc, "/cdn/%s/%s", r->name, f->path);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Location", loc);
    enum MHD_Result ret = MHD_queue_response(c, 302, resp);
    MHD_destroy_response(resp);
    return ret;
}

typedef struct body_ctx {
    const unsigned char *data; /* from the first byte sent */
    size_t limit;              /* END_WITH_ERROR after this many bytes (SIZE_MAX: none) */
    int log;                   /* index in g_log */
} body_ctx;

static ssize_t body_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    body_ctx *b = cls;
    if (pos >= b->limit) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = max;
    if (pos + n > b->limit) n = b->limit - pos;
    memcpy(buf, b->data + pos, n);
    pthread_mutex_lock(&g_mu);
    g_log[b->log].served += n;
    pthread_mutex_unlock(&g_mu);
    return (ssize_t)n;
}

static enum MHD_Result serve_cdn(struct MHD_Connection *c, const char *url) {
    /* /cdn/{org}/{repo}/{path}: no auth here, as for the hub's signed CDN URLs */
    const char *p = url + 5;
    const char *s1 = strchr(p, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    int li = log_add("cdn", url, c);
    fake_repo *r = s2 ? find_repo(p, (size_t)(s2 - p)) : NULL;
    fake_file *f = r ? find_file(r, s2 + 1) : NULL;
    if (!f) return send_text(c, 404, "no such object", "text/plain", NULL, NULL);
    size_t start = 0;
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    if (range) {
        unsigned long long a;
        if (sscanf(range, "bytes=%llu-", &a) != 1) return send_text(c, 400, "bad range", "text/plain", NULL, NULL);
        pthread_mutex_lock(&g_mu);
        g_log[li].range_start = (long)a;
        pthread_mutex_unlock(&g_mu);
        if (a >= f->size) return send_text(c, 416, "range not satisfiable", "text/plain", NULL, NULL);
        start = (size_t)a;
    }
    body_ctx *b = malloc(sizeof *b);
    b->data = f->data + start;
    b->limit = SIZE_MAX;
    b->log = li;
    pthread_mutex_lock(&g_mu);
    if (g_drop_after && !strcmp(g_drop_path, f->path)) {
        b->limit = g_drop_after;
        g_drop_after = 0;
    }
    pthread_mutex_unlock(&g_mu);
    struct MHD_Response *resp = MHD_create_response_from_callback(f->size - start, 8192, body_reader, b, free);
    MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
    if (range) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %zu-%zu/%zu", start, f->size - 1, f->size);
        MHD_add_response_header(resp, "Content-Range", cr);
    }
    enum MHD_Result ret = MHD_queue_response(c, range ? 206 : 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls, (void)version, (void)upload, (void)upload_size;
    static int first_call_marker;
    if (*con_cls == NULL) {
        *con_cls = &first_call_marker;
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0) return send_text(c, 405, "GET only", "text/plain", NULL, NULL);
    if (!strncmp(url, "/api/models/", 12)) return serve_tree(c, url);
    if (!strncmp(url, "/cdn/", 5)) return serve_cdn(c, url);
    if (strstr(url, "/resolve/")) return serve_resolve(c, url);
    return send_text(c, 404, "not found", "text/plain", NULL, NULL);
}

/* ---- setup ---- */

static void digest_hex(const EVP_MD *md, const void *prefix, size_t plen, const void *data, size_t n, char *out) {
    unsigned char dig[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, md, NULL);
    if (plen) EVP_DigestUpdate(ctx, prefix, plen);
    EVP_DigestUpdate(ctx, data, n);
    EVP_DigestFinal_ex(ctx, dig, &len);
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; i < len; i++) sprintf(out + 2 * i, "%02x", dig[i]);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void teardown(void) {
    if (g_mhd) MHD_stop_daemon(g_mhd);
    g_mhd = NULL;
    if (g_dir[0]) nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (size_t i = 0; i < ARRAY_LEN(g_repos); i++)
        for (int k = 0; k < 8 && g_repos[i].files[k].path; k++) free(g_repos[i].files[k].data);
}

static void setup(void) {
    if (g_mhd) return;
    uint64_t seed = 42;
    for (size_t i = 0; i < ARRAY_LEN(g_repos); i++) {
        for (int k = 0; k < 8 && g_repos[i].files[k].path; k++) {
            fake_file *f = &g_repos[i].files[k];
            f->data = malloc(f->size);
            for (size_t j = 0; j < f->size; j++) f->data[j] = (unsigned char)test_rand_u64(&seed);
            if (f->size >= 4) memcpy(f->data, "GGUF", 4);
            digest_hex(EVP_sha256(), NULL, 0, f->data, f->size, f->sha256);
            char hdr[64];
            int hl = snprintf(hdr, sizeof hdr, "blob %zu", f->size) + 1;
            digest_hex(EVP_sha1(), hdr, (size_t)hl, f->data, f->size, f->gitsha1);
        }
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    g_mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                             MHD_OPTION_END);
    if (!g_mhd) {
        fprintf(stderr, "cannot start the hub imitation\n");
        exit(1);
    }
    g_port = MHD_get_daemon_info(g_mhd, MHD_DAEMON_INFO_BIND_PORT)->port;
    snprintf(g_endpoint, sizeof g_endpoint, "http://127.0.0.1:%d", g_port);
    snprintf(g_dir, sizeof g_dir, "/tmp/ob_test_pull_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(g_store, sizeof g_store, "%s/models", g_dir);
    char hf_home[300];
    snprintf(hf_home, sizeof hf_home, "%s/hf-home", g_dir);
    setenv("HF_ENDPOINT", g_endpoint, 1);
    setenv("OB_MODELS_DIR", g_store, 1);
    setenv("HF_HOME", hf_home, 1); /* no token file from the machine's real login */
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    unsetenv("HF_TOKEN_PATH");
    unsetenv("HF_HUB_OFFLINE");
    /* loopback must not go through a proxy the machine may have set */
    const char *proxies[] = {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"};
    for (size_t i = 0; i < ARRAY_LEN(proxies); i++) unsetenv(proxies[i]);
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    atexit(teardown);
}

/* ---- helpers ---- */

typedef struct events {
    int start, progress, retry, verify, done, cached;
    uint64_t resumed;
    char checksum[16];
} events;

static int count_events(const ob_pull_progress *p, void *user) {
    events *e = user;
    switch (p->event) {
    case OB_PULL_START: e->start++, e->resumed = p->resumed; break;
    case OB_PULL_PROGRESS: e->progress++; break;
    case OB_PULL_RETRY: e->retry++; break;
    case OB_PULL_VERIFY: e->verify++; break;
    case OB_PULL_DONE: e->done++, snprintf(e->checksum, sizeof e->checksum, "%s", p->checksum); break;
    case OB_PULL_CACHED: e->cached++; break;
    }
    return 0;
}

static int pull(const char *spec, char *out, size_t size, events *ev) {
    ob_pull_params p = ob_pull_default_params();
    p.progress = count_events;
    p.progress_user = ev;
    return ob_pull(spec, &p, out, size);
}

static const char *store_path(const char *repo, const char *file) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s/%s", g_store, repo, file);
    return buf;
}

static bool file_equals(const char *path, const fake_file *f) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    unsigned char *buf = malloc(f->size + 1);
    size_t n = fread(buf, 1, f->size + 1, fp);
    fclose(fp);
    bool eq = n == f->size && memcmp(buf, f->data, f->size) == 0;
    free(buf);
    return eq;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static fake_file *ff(const char *repo, const char *path) { return find_file(find_repo(repo, strlen(repo)), path); }

/* Run the CLI with the test environment; stdout (and stderr when
 * with_stderr) into out. Returns the exit status. */
static int run_cli(const char *args, bool with_stderr, char *out, size_t size) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s%s", OB_CLI_PATH, args, with_stderr ? " 2>&1" : " 2>/dev/null");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- tests ---- */

TEST(pull_downloads_through_the_redirect) {
    setup();
    log_reset();
    events ev = {0};
    char path[1024];
    CHECK_OK(pull("test-org/tiny:tinyllamas/stories-test.gguf", path, sizeof path, &ev));
    fake_file *f = ff("test-org/tiny", "tinyllamas/stories-test.gguf");
    CHECK_EQ_STR(path, store_path("test-org/tiny", "tinyllamas/stories-test.gguf"));
    CHECK(file_equals(path, f));
    char part[1100];
    snprintf(part, sizeof part, "%s.part", path);
    CHECK(!exists(part));
    CHECK_EQ_INT(count_kind("tree"), 1);
    CHECK_EQ_INT(count_kind("resolve"), 1);
    CHECK_EQ_INT(count_kind("cdn"), 1);
    CHECK_EQ_INT(served_total("cdn"), f->size);
    CHECK(strncmp(g_log[0].ua, "1bit/", 5) == 0);
    CHECK_EQ_STR(g_log[0].auth, ""); /* no token anywhere */
    CHECK_EQ_INT(ev.start, 1);
    CHECK_EQ_INT(ev.done, 1);
    CHECK_EQ_INT(ev.verify, 1);
    CHECK_EQ_STR(ev.checksum, "sha256");

    /* again: already there, nothing moves */
    log_reset();
    events ev2 = {0};
    CHECK_OK(pull("test-org/tiny:tinyllamas/stories-test.gguf", path, sizeof path, &ev2));
    CHECK_EQ_INT(ev2.cached, 1);
    CHECK_EQ_INT(count_kind("cdn"), 0);
    /* a unique base name is enough */
    CHECK_OK(pull("test-org/tiny:stories-test.gguf", path, sizeof path, &ev2));
    CHECK_EQ_STR(path, store_path("test-org/tiny", "tinyllamas/stories-test.gguf"));
}

TEST(pull_resumes_a_dropped_connection) {
    setup();
    log_reset();
    fake_file *f = ff("test-org/drop", "d.gguf");
    pthread_mutex_lock(&g_mu);
    g_drop_after = 100000;
    snprintf(g_drop_path, sizeof g_drop_path, "d.gguf");
    pthread_mutex_unlock(&g_mu);
    events ev = {0};
    char path[1024];
    CHECK_OK(pull("test-org/drop", path, sizeof path, &ev));
    CHECK(file_equals(path, f));
    CHECK_EQ_INT(ev.retry, 1);
    CHECK_EQ_INT(count_kind("cdn"), 2);
    /* the second request asked for the rest, not the whole file again */
    int second = -1;
    for (int i = 0, k = 0; i < g_n_log; i++)
        if (!strcmp(g_log[i].kind, "cdn") && k++ == 1) second = i;
    CHECK(second > 0);
    long start = second > 0 ? g_log[second].range_start : -1;
    /* MHD hands the socket each block before it asks for the next, so the
     * 100000 bytes before the drop all arrived and the rest is all that was
     * asked for: the whole run served the file once */
    CHECK_EQ_INT(start, 100000);
    CHECK_EQ_INT(g_log[second].served, f->size - 100000);
    CHECK_EQ_INT(served_total("cdn"), f->size);
}

TEST(pull_continues_a_part_file_from_an_earlier_run) {
    setup();
    log_reset();
    fake_file *f = ff("test-org/noq4", "b-F16.gguf");
    const char *dest = store_path("test-org/noq4", "b-F16.gguf");
    char dir[1100], part[1100];
    snprintf(dir, sizeof dir, "%s/test-org", g_store);
    mkdir(g_store, 0755);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/test-org/noq4", g_store);
    mkdir(dir, 0755);
    snprintf(part, sizeof part, "%s.part", dest);
    FILE *fp = fopen(part, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    fwrite(f->data, 1, 5000, fp);
    fclose(fp);
    events ev = {0};
    char path[1024];
    CHECK_OK(pull("test-org/noq4:b-f16.gguf", path, sizeof path, &ev)); /* any case for a base name */
    CHECK_EQ_STR(path, dest);
    CHECK(file_equals(path, f));
    CHECK_EQ_INT(ev.resumed, 5000);
    CHECK_EQ_INT(count_kind("cdn"), 1);
    CHECK_EQ_INT(g_log[g_n_log - 1].range_start, 5000);
    CHECK_EQ_INT(served_total("cdn"), f->size - 5000);
    CHECK(!exists(part));
}

TEST(pull_rejects_a_wrong_checksum) {
    setup();
    events ev = {0};
    char path[1024];
    int rc = pull("test-org/badsha", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_FORMAT);
    CHECK_MSG(strstr(ob_last_error(), "SHA-256") && strstr(ob_last_error(), "deleted"), "%s", ob_last_error());
    const char *dest = store_path("test-org/badsha", "bad.gguf");
    char part[1100];
    snprintf(part, sizeof part, "%s.part", dest);
    CHECK(!exists(dest));
    CHECK(!exists(part));

    /* a .part whose bytes are wrong is caught the same way, and deleted */
    fake_file *f = ff("test-org/noq4", "a-Q8_0.gguf");
    const char *d2 = store_path("test-org/noq4", "a-Q8_0.gguf");
    snprintf(part, sizeof part, "%s.part", d2);
    mkdir(g_store, 0755);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/test-org", g_store);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/test-org/noq4", g_store);
    mkdir(dir, 0755);
    FILE *fp = fopen(part, "wb");
    if (fp) {
        unsigned char junk[3000];
        memcpy(junk, f->data, sizeof junk);
        junk[1234] ^= 0xff;
        fwrite(junk, 1, sizeof junk, fp);
        fclose(fp);
    }
    rc = pull("test-org/noq4:a-Q8_0.gguf", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_FORMAT);
    CHECK(!exists(part));
    CHECK(!exists(d2));
    CHECK_OK(pull("test-org/noq4:a-Q8_0.gguf", path, sizeof path, &ev)); /* and the next pull is clean */
    CHECK(file_equals(d2, f));
}

TEST(pull_picks_by_quant) {
    setup();
    events ev = {0};
    char path[1024];
    CHECK_OK(pull("test-org/quants:q8_0", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/quants", "model-Q8_0.gguf"));
    CHECK(file_equals(path, ff("test-org/quants", "model-Q8_0.gguf")));
    /* nothing named: Q4_K_M, the plain one over UD-Q4_K_M, never the mmproj */
    CHECK_OK(pull("test-org/quants", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/quants", "model-Q4_K_M.gguf"));
    CHECK_OK(pull("test-org/quants:UD-Q4_K_M", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/quants", "model-UD-Q4_K_M.gguf"));
    CHECK_OK(pull("test-org/quants:iq4_xs", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/quants", "model-IQ4_XS.gguf"));
    /* Q4_XS is not IQ4_XS; the error lists what there is */
    int rc = pull("test-org/quants:Q4_XS", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "Q4_XS") && strstr(ob_last_error(), "model-Q8_0.gguf"), "%s", ob_last_error());
    /* no Q4_K_M: the first GGUF by name */
    CHECK_OK(pull("test-org/noq4", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/noq4", "a-Q8_0.gguf"));
    /* the listing continues on the next page (Link header) */
    log_reset();
    CHECK_OK(pull("test-org/paged", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/paged", "p2-Q4_K_M.gguf"));
    CHECK_EQ_INT(count_kind("tree"), 3);
}

TEST(pull_brings_every_part_of_a_split_model) {
    setup();
    events ev = {0};
    char path[1024];
    CHECK_OK(pull("test-org/split:Q4_K_M", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/split", "big-Q4_K_M-00001-of-00002.gguf"));
    CHECK(file_equals(path, ff("test-org/split", "big-Q4_K_M-00001-of-00002.gguf")));
    CHECK(file_equals(store_path("test-org/split", "big-Q4_K_M-00002-of-00002.gguf"),
                      ff("test-org/split", "big-Q4_K_M-00002-of-00002.gguf")));
    CHECK_EQ_INT(ev.done, 2);
}

TEST(pull_says_clearly_what_is_missing) {
    setup();
    events ev = {0};
    char path[1024];
    int rc = pull("test-org/missing", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "test-org/missing") && strstr(ob_last_error(), "not found") &&
                  strstr(ob_last_error(), "404"),
              "%s", ob_last_error());
    rc = pull("test-org/tiny:nope.gguf", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "nope.gguf") && strstr(ob_last_error(), "tinyllamas/stories-test.gguf"), "%s",
              ob_last_error());
    /* listed, but the server answers 404: named, and no empty .part left */
    rc = pull("test-org/tiny:gone.gguf", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "gone.gguf") && strstr(ob_last_error(), "404"), "%s", ob_last_error());
    char part[1100];
    snprintf(part, sizeof part, "%s.part", store_path("test-org/tiny", "gone.gguf"));
    CHECK(!exists(part));
    rc = pull("not-a-repo", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_INVALID_ARG);
    rc = pull("test-org/tiny:../../etc/passwd.gguf", path, sizeof path, &ev);
    CHECK(rc < 0);
}

TEST(pull_sends_hf_token) {
    setup();
    events ev = {0};
    char path[1024];
    int rc = pull("test-org/gated", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "HF_TOKEN") && strstr(ob_last_error(), "401"), "%s", ob_last_error());
    log_reset();
    setenv("HF_TOKEN", TOKEN, 1);
    rc = pull("test-org/gated", path, sizeof path, &ev);
    unsetenv("HF_TOKEN");
    CHECK_OK(rc);
    CHECK(file_equals(path, ff("test-org/gated", "g.gguf")));
    int seen = 0;
    for (int i = 0; i < g_n_log; i++)
        if (strcmp(g_log[i].kind, "cdn") != 0) {
            CHECK_EQ_STR(g_log[i].auth, "Bearer " TOKEN);
            seen++;
        }
    CHECK_EQ_INT(seen, 2); /* the listing and the resolve */
    /* a token file, as huggingface-cli login leaves it */
    char tok[400];
    snprintf(tok, sizeof tok, "%s/tokenfile", g_dir);
    FILE *fp = fopen(tok, "w");
    if (fp) {
        fputs(TOKEN "\n", fp);
        fclose(fp);
    }
    setenv("HF_TOKEN_PATH", tok, 1);
    log_reset();
    rc = pull("test-org/gated", path, sizeof path, &ev);
    unsetenv("HF_TOKEN_PATH");
    CHECK_OK(rc);
    CHECK_EQ_STR(g_log[0].auth, "Bearer " TOKEN);
}

TEST(pull_checks_git_sha1_of_non_lfs_files) {
    setup();
    events ev = {0};
    char path[1024];
    CHECK_OK(pull("test-org/plain", path, sizeof path, &ev));
    CHECK_EQ_STR(ev.checksum, "git-sha1");
    CHECK(file_equals(path, ff("test-org/plain", "plain.gguf")));
}

TEST(pull_offline_says_what_to_do) {
    setup();
    /* a loopback port nobody listens on */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    getsockname(s, (struct sockaddr *)&sa, &len);
    close(s);
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    ob_pull_params p = ob_pull_default_params();
    p.endpoint = ep;
    char path[1024];
    int rc = ob_pull("test-org/tiny", &p, path, sizeof path);
    CHECK_EQ_INT(rc, OB_ERR_IO);
    CHECK_MSG(strstr(ob_last_error(), "is the network reachable") && strstr(ob_last_error(), "HF_ENDPOINT"), "%s",
              ob_last_error());
    /* HF_HUB_OFFLINE: only the store answers */
    setenv("HF_HUB_OFFLINE", "1", 1);
    events ev = {0};
    CHECK_OK(pull("test-org/quants:Q8_0", path, sizeof path, &ev));
    CHECK_EQ_STR(path, store_path("test-org/quants", "model-Q8_0.gguf"));
    rc = pull("test-org/quants:Q6_K", path, sizeof path, &ev);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "HF_HUB_OFFLINE"), "%s", ob_last_error());
    unsetenv("HF_HUB_OFFLINE");
}

TEST(resolve_finds_stored_models) {
    setup();
    events ev = {0};
    char path[1024], got[1024];
    CHECK_OK(pull("test-org/quants:Q8_0", path, sizeof path, &ev));
    CHECK_OK(pull("test-org/quants", path, sizeof path, &ev));
    CHECK_OK(pull("test-org/split:Q4_K_M", path, sizeof path, &ev));
    const char *q8 = store_path("test-org/quants", "model-Q8_0.gguf");
    char q8s[1024];
    snprintf(q8s, sizeof q8s, "%s", q8);
    CHECK_OK(ob_model_resolve("test-org/quants:Q8_0", got, sizeof got));
    CHECK_EQ_STR(got, q8s);
    CHECK_OK(ob_model_resolve("test-org/quants:q8_0", got, sizeof got));
    CHECK_EQ_STR(got, q8s);
    CHECK_OK(ob_model_resolve("model-Q8_0.gguf", got, sizeof got));
    CHECK_EQ_STR(got, q8s);
    CHECK_OK(ob_model_resolve("model-Q8_0", got, sizeof got));
    CHECK_EQ_STR(got, q8s);
    CHECK_OK(ob_model_resolve("test-org/quants/model-Q8_0.gguf", got, sizeof got));
    CHECK_EQ_STR(got, q8s);
    CHECK_OK(ob_model_resolve("test-org/quants", got, sizeof got));
    CHECK_EQ_STR(got, store_path("test-org/quants", "model-Q4_K_M.gguf"));
    CHECK_OK(ob_model_resolve("test-org/split", got, sizeof got));
    CHECK_EQ_STR(got, store_path("test-org/split", "big-Q4_K_M-00001-of-00002.gguf"));
    /* an existing path is taken as it is */
    CHECK_OK(ob_model_resolve(q8s, got, sizeof got));
    CHECK_EQ_STR(got, q8s);
    /* nothing by that name: the error says what the store holds */
    int rc = ob_model_resolve("no-such-model.gguf", got, sizeof got);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "holds") && strstr(ob_last_error(), "test-org/quants:model-Q8_0.gguf"), "%s",
              ob_last_error());
    rc = ob_model_resolve("test-org/quants:Q5_K", got, sizeof got);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    rc = ob_model_resolve("other-org/thing:Q4_K_M", got, sizeof got);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "1bit pull other-org/thing:Q4_K_M"), "%s", ob_last_error());
    /* an empty store says how to fill it */
    char empty[400];
    snprintf(empty, sizeof empty, "%s/empty-store", g_dir);
    rc = ob_store_resolve(empty, "x.gguf", got, sizeof got);
    CHECK_EQ_INT(rc, OB_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ob_last_error(), "empty") && strstr(ob_last_error(), "1bit pull"), "%s", ob_last_error());
}

TEST(store_dir_follows_the_environment) {
    setup();
    char d[1024];
    CHECK_OK(ob_store_dir("/x/y/", d, sizeof d));
    CHECK_EQ_STR(d, "/x/y");
    CHECK_OK(ob_store_dir(NULL, d, sizeof d));
    CHECK_EQ_STR(d, g_store);
    char home[1024] = "", xdg[1024] = "";
    bool had_home = getenv("HOME") != NULL, had_xdg = getenv("XDG_CACHE_HOME") != NULL;
    if (had_home) snprintf(home, sizeof home, "%s", getenv("HOME"));
    if (had_xdg) snprintf(xdg, sizeof xdg, "%s", getenv("XDG_CACHE_HOME"));
    unsetenv("OB_MODELS_DIR");
    setenv("XDG_CACHE_HOME", "/cache", 1);
    CHECK_OK(ob_store_dir(NULL, d, sizeof d));
    CHECK_EQ_STR(d, "/cache/1bit/models");
    setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as XDG says */
    setenv("HOME", "/home/u", 1);
    CHECK_OK(ob_store_dir(NULL, d, sizeof d));
    CHECK_EQ_STR(d, "/home/u/.cache/1bit/models");
    setenv("OB_MODELS_DIR", g_store, 1);
    if (had_home) setenv("HOME", home, 1);
    else unsetenv("HOME");
    if (had_xdg) setenv("XDG_CACHE_HOME", xdg, 1);
    else unsetenv("XDG_CACHE_HOME");
}

TEST(list_shows_the_store) {
    setup();
    events ev = {0};
    char path[1024];
    CHECK_OK(pull("test-org/quants:Q8_0", path, sizeof path, &ev));
    CHECK_OK(pull("test-org/split:Q4_K_M", path, sizeof path, &ev));
    /* an unfinished download */
    char part[1100];
    snprintf(part, sizeof part, "%s.part", store_path("test-org/quants", "model-IQ4_XS.gguf"));
    remove(store_path("test-org/quants", "model-IQ4_XS.gguf"));
    FILE *fp = fopen(part, "wb");
    if (fp) {
        fwrite("GGUF", 1, 4, fp);
        fclose(fp);
    }
    ob_stored_model *m = NULL;
    size_t n = 0;
    CHECK_OK(ob_store_list(NULL, &m, &n));
    bool saw_q8 = false, saw_split = false, saw_part = false;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].name, "test-org/quants:model-Q8_0.gguf")) {
            saw_q8 = true;
            CHECK(m[i].complete);
            CHECK_EQ_INT(m[i].size, 30000);
        }
        if (!strcmp(m[i].name, "test-org/split:big-Q4_K_M-00001-of-00002.gguf")) {
            saw_split = true;
            CHECK_EQ_INT(m[i].n_parts, 2);
            CHECK_EQ_INT(m[i].size, 90000);
            CHECK(m[i].complete);
        }
        if (!strcmp(m[i].name, "test-org/quants:model-IQ4_XS.gguf")) {
            saw_part = true;
            CHECK(!m[i].complete);
        }
    }
    ob_store_list_free(m, n);
    CHECK(saw_q8 && saw_split && saw_part);

    char out[16384];
    int rc = run_cli("list", false, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    CHECK_MSG(strstr(out, "MODEL") && strstr(out, "test-org/quants:model-Q8_0.gguf") && strstr(out, "30.0 kB") &&
                  strstr(out, "(2 parts)") && strstr(out, "incomplete"),
              "%s", out);
    rc = run_cli("list --json", false, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    CHECK(json_is_array(json_object_get(j, "models")));
    CHECK_EQ_STR(json_string_value(json_object_get(j, "dir")), g_store);
    json_decref(j);
    rc = run_cli("list --path test-org/quants:Q8_0", false, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    char want[1100];
    snprintf(want, sizeof want, "%s\n", store_path("test-org/quants", "model-Q8_0.gguf"));
    CHECK_EQ_STR(out, want);
    rc = run_cli("list --paths", false, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    CHECK(strstr(out, want) != NULL);
    CHECK(strstr(out, ".part") == NULL);
    rc = run_cli("list --path nothing-like-it", true, out, sizeof out);
    CHECK_EQ_INT(rc, 1);
    CHECK_MSG(strstr(out, "holds"), "%s", out);
    remove(part);
}

TEST(cli_pull_prints_the_stored_path) {
    setup();
    char out[8192];
    int rc = run_cli("pull test-org/noq4:b-F16.gguf --force", false, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    char want[1100];
    snprintf(want, sizeof want, "%s\n", store_path("test-org/noq4", "b-F16.gguf"));
    CHECK_EQ_STR(out, want);
    /* not a terminal: no bar, one line per file */
    rc = run_cli("pull test-org/noq4:b-F16.gguf --force", true, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    CHECK_MSG(strstr(out, "SHA-256 ok") && !strchr(out, '\r'), "%s", out);
    /* --models-dir wins over OB_MODELS_DIR */
    char args[600], other[400];
    snprintf(other, sizeof other, "%s/other-store", g_dir);
    snprintf(args, sizeof args, "pull test-org/noq4:a-Q8_0.gguf --models-dir '%s'", other);
    rc = run_cli(args, false, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    snprintf(want, sizeof want, "%s/test-org/noq4/a-Q8_0.gguf\n", other);
    CHECK_EQ_STR(out, want);
    snprintf(args, sizeof args, "list --models-dir '%s' --paths", other);
    rc = run_cli(args, false, out, sizeof out);
    CHECK_EQ_STR(out, want);
    snprintf(args, sizeof args, "list --models-dir '%s/none'", other);
    rc = run_cli(args, false, out, sizeof out);
    CHECK_EQ_INT(rc, 0);
    CHECK_MSG(strstr(out, "is empty"), "%s", out);
    rc = run_cli("pull test-org/missing", true, out, sizeof out);
    CHECK_EQ_INT(rc, 1);
    CHECK_MSG(strstr(out, "1bit: pull test-org/missing") && strstr(out, "not found"), "%s", out);
}

/* Every allocation the store makes can fail: the call returns OB_ERR_OOM
 * (or succeeds), never crashes or leaks (the ASan build checks leaks). */
TEST(allocation_failures_are_clean) {
    setup();
    events ev = {0};
    char path[1024], got[1024];
    CHECK_OK(pull("test-org/quants:Q8_0", path, sizeof path, &ev));
    CHECK_OK(pull("test-org/split:Q4_K_M", path, sizeof path, &ev));
    const char *names[] = {"test-org/quants:Q8_0", "model-Q8_0", "test-org/split", "no-such-model"};
    for (size_t k = 0; k < ARRAY_LEN(names); k++) {
        int ok = 0;
        for (long n = 1; n < 400 && !ok; n++) {
            ob_mem_fail_after(n);
            int rc = ob_model_resolve(names[k], got, sizeof got);
            ob_mem_fail_after(0);
            CHECK_MSG(rc == 0 || rc == OB_ERR_OOM || (k == 3 && rc == OB_ERR_NOT_FOUND), "%s at %ld: %d", names[k],
                      n, rc);
            ok = rc != OB_ERR_OOM;
        }
        CHECK(ok);
    }
    for (long n = 1; n < 400; n++) {
        ob_mem_fail_after(n);
        int rc = pull("test-org/quants:Q8_0", path, sizeof path, &ev);
        ob_mem_fail_after(0);
        CHECK_MSG(rc == 0 || rc == OB_ERR_OOM, "pull at %ld: %d (%s)", n, rc, ob_last_error());
        if (rc == 0) break;
    }
}

TEST(llama_server_name_is_serve) {
    setup();
    char link[400], a[8192], b[8192], cmd[1200];
    snprintf(link, sizeof link, "%s/llama-server", g_dir);
    CHECK(symlink(OB_CLI_PATH, link) == 0);
    snprintf(cmd, sizeof cmd, "'%s' --help 2>&1; echo \"rc=$?\"", link);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(a, 1, sizeof a - 1, p) : 0;
    a[n] = '\0';
    if (p) pclose(p);
    snprintf(cmd, sizeof cmd, "'%s' serve --help 2>&1; echo \"rc=$?\"", OB_CLI_PATH);
    p = popen(cmd, "r");
    n = p ? fread(b, 1, sizeof b - 1, p) : 0;
    b[n] = '\0';
    if (p) pclose(p);
    CHECK(n > 0);
    CHECK_EQ_STR(a, b);
}

int main(int argc, char **argv) { return test_main(argc, argv); }
