/*
 * fuzz_store.c - libFuzzer target for what `1bit pull` reads from the
 * network and the command line before it names a file under the store
 * (src/store: hub.h, store.h): a page of the hub's tree listing (JSON), the
 * Link header that continues it, the org/repo[:sel] spec, repository names
 * and relative paths, split-file names, and the picking rule run on the
 * files a listing gives.
 *
 * Every input goes through all of them (a listing page, a header value, and
 * a NUL-terminated name made of the same bytes). Checked beyond "no crash":
 *   - a relative path that ob_store_check_rel_path accepts has no "." or
 *     ".." segment, no leading '/', no empty segment, no backslash or
 *     control byte, at most 1024 bytes: it cannot leave the store;
 *   - a repository name that ob_store_check_repo accepts is two parts of
 *     [A-Za-z0-9._-] (1..96 bytes, not starting with '.' or '-'), and a spec
 *     that ob_store_parse_spec accepts yields such a name and a selector
 *     after its ':';
 *   - every file a listing yields has an accepted path, and a hash field
 *     that is empty or full length; a refused listing has a message;
 *   - a split name has 1 <= part <= count and rebuilds itself from its
 *     prefix, and any part's name is a split name of the same set;
 *   - ob_store_pick on the listed paths returns a GGUF model among them (part
 *     1 of a split set) or OB_ERR_NOT_FOUND with a message;
 *   - the Link parser writes a NUL-terminated URL that is in the header.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/status.h"
#include "store/hub.h"
#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

static bool repo_byte(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
}

static void check_rel_path(const char *s) {
    const int rc = ob_store_check_rel_path(s);
    if (rc < 0) {
        REQUIRE(rc == OB_ERR_FORMAT && ob_last_error()[0] != '\0');
        ob_err_clear();
        return;
    }
    const size_t n = strlen(s);
    REQUIRE(n > 0 && n <= 1024 && s[0] != '/' && s[n - 1] != '/');
    REQUIRE(strstr(s, "//") == NULL);
    const char *seg = s;
    for (const char *p = s;; p++) {
        if (*p == '/' || *p == '\0') {
            const size_t len = (size_t)(p - seg);
            REQUIRE(len > 0 && !(len == 1 && seg[0] == '.') && !(len == 2 && seg[0] == '.' && seg[1] == '.'));
            if (*p == '\0') break;
            seg = p + 1;
        } else {
            REQUIRE((unsigned char)*p >= 0x20 && *p != 0x7f && *p != '\\');
        }
    }
}

static void check_repo_ok(const char *s) {
    const char *slash = strchr(s, '/');
    REQUIRE(slash && !strchr(slash + 1, '/'));
    const char *parts[2] = {s, slash + 1};
    const size_t lens[2] = {(size_t)(slash - s), strlen(slash + 1)};
    for (int k = 0; k < 2; k++) {
        REQUIRE(lens[k] >= 1 && lens[k] <= 96 && parts[k][0] != '.' && parts[k][0] != '-');
        for (size_t i = 0; i < lens[k]; i++) REQUIRE(repo_byte(parts[k][i]));
    }
}

static void check_names(const char *s) {
    check_rel_path(s);
    int rc = ob_store_check_repo(s);
    if (rc == 0) check_repo_ok(s);
    else REQUIRE(rc == OB_ERR_INVALID_ARG && ob_last_error()[0] != '\0');
    ob_err_clear();

    char repo[256];
    const char *sel = (const char *)&rc;
    rc = ob_store_parse_spec(s, repo, sizeof repo, &sel);
    if (rc == 0) {
        check_repo_ok(repo);
        REQUIRE(sel == NULL || (sel > s && sel <= s + strlen(s) && sel[-1] == ':'));
    } else {
        REQUIRE(rc < 0 && ob_last_error()[0] != '\0');
    }
    ob_err_clear();

    int idx = 0, count = 0;
    size_t plen = 0;
    if (ob_store_split_name(s, &idx, &count, &plen)) {
        REQUIRE(idx >= 1 && idx <= count && plen < strlen(s) && ob_store_is_gguf(s));
        char part[OB_STORE_PATH_MAX];
        if (ob_store_split_part_name(s, idx, part, sizeof part) == 0) REQUIRE(strcmp(part, s) == 0);
        if (ob_store_split_part_name(s, count, part, sizeof part) == 0) {
            int i2 = 0, c2 = 0;
            size_t p2 = 0;
            REQUIRE(ob_store_split_name(part, &i2, &c2, &p2) && i2 == count && c2 == count && p2 == plen);
        }
        ob_err_clear();
    }
    (void)ob_store_quant_match(s, "Q4_K_M");
    (void)ob_store_is_aux(s);
}

static void check_pick(const char *const *paths, size_t n, const char *sel) {
    size_t out = (size_t)-1;
    const int rc = ob_store_pick(paths, n, sel, "fuzz/repo", &out);
    if (rc < 0) {
        REQUIRE(rc == OB_ERR_NOT_FOUND && ob_last_error()[0] != '\0');
        ob_err_clear();
        return;
    }
    REQUIRE(rc == 0 && out < n && ob_store_is_gguf(paths[out]));
    int idx = 0;
    REQUIRE(!ob_store_split_name(paths[out], &idx, NULL, NULL) || idx == 1);
}

static void check_listing(const uint8_t *data, size_t size, const char *sel) {
    ob_hub_file *files = NULL;
    size_t n = 0, cap = 0;
    const int rc = ob_hub_parse_listing((const char *)data, size, "fuzz/repo", "http://fuzz/listing", &files, &n, &cap);
    REQUIRE(n <= cap);
    if (rc < 0) REQUIRE(ob_last_error()[0] != '\0');
    ob_err_clear();
    const char **paths = ob_calloc(n ? n : 1, sizeof *paths);
    REQUIRE(paths);
    for (size_t i = 0; i < n; i++) {
        const ob_hub_file *f = &files[i];
        REQUIRE(f->path && ob_store_check_rel_path(f->path) == 0);
        const size_t hs = strnlen(f->sha256, sizeof f->sha256), hg = strnlen(f->gitsha1, sizeof f->gitsha1);
        REQUIRE((hs == 0 || hs == 64) && (hg == 0 || hg == 40));
        paths[i] = f->path;
    }
    if (rc == 0) {
        check_pick(paths, n, NULL);
        check_pick(paths, n, "Q8_0");
        if (sel) check_pick(paths, n, sel);
        if (n) check_pick(paths, n, strrchr(paths[n - 1], '/') ? strrchr(paths[n - 1], '/') + 1 : paths[n - 1]);
    }
    ob_free(paths);
    ob_hub_files_free(files, n);
}

static void check_link(const uint8_t *data, size_t size) {
    char out[64];
    memcpy(out, "unchanged", 10);
    ob_hub_parse_link((const char *)data, size, out, sizeof out);
    const size_t n = strnlen(out, sizeof out);
    REQUIRE(n < sizeof out);
    if (strcmp(out, "unchanged") == 0 || n == 0) return;
    bool found = false; /* the URL (possibly cut) appears in the header */
    for (size_t i = 0; !found && i + n <= size; i++) found = memcmp(data + i, out, n) == 0;
    REQUIRE(found);
}

/* The listing warns about each unsafe path it skips: formatted, then dropped
 * here rather than flooding the fuzzer's output. */
static void quiet_log(ob_log_level level, const char *msg, void *user) {
    REQUIRE(msg && strlen(msg) < 1u << 20);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) ob_log_set_callback(quiet_log, NULL), quiet = true;
    char *s = ob_malloc(size + 1);
    REQUIRE(s);
    memcpy(s, data, size);
    s[size] = '\0';
    check_names(s);
    char repo[256];
    const char *sel = NULL;
    if (ob_store_parse_spec(s, repo, sizeof repo, &sel) < 0) sel = NULL;
    ob_err_clear();
    check_listing(data, size, sel);
    check_link(data, size);
    ob_free(s);
    return 0;
}
