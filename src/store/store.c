/*
 * store.c - the local model store: where it is, what it holds, and how a
 * `-m` argument becomes a file path.
 *
 * Layout: <store>/<org>/<repo>/<path in the repo>, so a model keeps the name
 * it was pulled by (`1bit pull ggml-org/models-moved:tinyllamas/stories260K.gguf`
 * lands in <store>/ggml-org/models-moved/tinyllamas/stories260K.gguf). A
 * download in progress is <file>.part beside it (pull.c). Files a user copies
 * in by hand are found too, at any depth.
 *
 * The picking rule (ob_store_pick) is shared with pull.c, so `-m org/repo:Q8_0`
 * finds on disk exactly the file `1bit pull org/repo:Q8_0` downloaded.
 * Nothing here touches the network or reads GGUF contents.
 */
#include "store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/mem.h"
#include "../core/status.h"

/* Directory depth the scan descends to below the store: org/repo/ plus
 * folders inside a repository (BF16/, Q4_K_M/ ...). Bounds symlink loops. */
#define SCAN_MAX_DEPTH 8
/* How much of a "what is there" list goes into one error message
 * (ob_err keeps 1024 bytes). */
#define LIST_BUDGET 560

/* ---- names ---- */

static bool ends_with_ci(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

bool ob_store_is_gguf(const char *path) { return ends_with_ci(path, ".gguf"); }

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

bool ob_store_is_aux(const char *path) {
    const char *b = base_name(path);
    for (const char *p = b; *p; p++)
        if (strncasecmp(p, "mmproj", 6) == 0) return true;
    return false;
}

static bool all_digits(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

bool ob_store_split_name(const char *path, int *index, int *count, size_t *prefix_len) {
    /* "<prefix>-00001-of-00003.gguf": 15 bytes of numbering before ".gguf" */
    size_t n = strlen(path);
    if (!ob_store_is_gguf(path) || n < 5 + 15 + 1) return false;
    const char *s = path + n - 5 - 15;
    if (s[0] != '-' || !all_digits(s + 1, 5) || strncmp(s + 6, "-of-", 4) != 0 || !all_digits(s + 10, 5))
        return false;
    int i = atoi(s + 1), c = atoi(s + 10);
    if (c < 1 || i < 1 || i > c) return false;
    if (index) *index = i;
    if (count) *count = c;
    if (prefix_len) *prefix_len = (size_t)(s - path);
    return true;
}

int ob_store_split_part_name(const char *path, int index, char *out, size_t size) {
    int i, c;
    size_t pl;
    if (!ob_store_split_name(path, &i, &c, &pl) || index < 1 || index > c)
        return ob_err(OB_ERR_INVALID_ARG, "'%s' is not part of a split set with a part %d", path, index);
    int n = snprintf(out, size, "%.*s-%05d-of-%05d%s", (int)pl, path, index, c, path + strlen(path) - 5);
    if (n < 0 || (size_t)n >= size) return ob_err(OB_ERR_RANGE, "split part name too long");
    return 0;
}

static bool tok_before(char c) { return c == '-' || c == '.' || c == '/' || c == '_'; }
static bool tok_after(char c) { return c == '\0' || c == '-' || c == '.' || c == '/'; }

bool ob_store_quant_match(const char *path, const char *quant) {
    size_t k = strlen(quant);
    if (k == 0) return false;
    for (const char *p = path; *p; p++) {
        if (strncasecmp(p, quant, k) != 0) continue;
        if (p != path && !tok_before(p[-1])) continue;
        if (!tok_after(p[k])) continue;
        return true;
    }
    return false;
}

/* ---- the picking rule ---- */

/* Is paths[i] a model in its own right: a GGUF that is not part 2+ of a
 * split set (part 1 stands for the set)? */
static bool is_model_entry(const char *path) {
    if (!ob_store_is_gguf(path)) return false;
    int idx;
    if (ob_store_split_name(path, &idx, NULL, NULL) && idx != 1) return false;
    return true;
}

/* Append "a, b, c" (the models among paths) to buf, within LIST_BUDGET. */
static void list_models(const char *const *paths, size_t n, char *buf, size_t size) {
    size_t used = strlen(buf), shown = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_model_entry(paths[i])) continue;
        total++;
        size_t len = strlen(paths[i]);
        if (used + len + 2 > LIST_BUDGET || used + len + 2 >= size) continue;
        int w = snprintf(buf + used, size - used, "%s%s", shown ? ", " : "", paths[i]);
        if (w > 0) used += (size_t)w;
        shown++;
    }
    if (total == 0 && used + 8 < size) snprintf(buf + used, size - used, "nothing");
    else if (shown < total && used + 24 < size) snprintf(buf + used, size - used, " and %zu more", total - shown);
}

static int find_exact(const char *const *paths, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(paths[i], name) == 0) return (int)i;
    return -1;
}

/* Map a chosen split part to part 1 of its set (which must be listed). */
static int to_first_part(const char *const *paths, size_t n, size_t i, const char *what, size_t *out) {
    int idx;
    if (!ob_store_split_name(paths[i], &idx, NULL, NULL) || idx == 1) {
        *out = i;
        return 0;
    }
    char first[OB_STORE_PATH_MAX];
    OB_TRY(ob_store_split_part_name(paths[i], 1, first, sizeof first));
    int j = find_exact(paths, n, first);
    if (j < 0) return ob_err(OB_ERR_NOT_FOUND, "%s has '%s' but not its first part '%s'", what, paths[i], first);
    *out = (size_t)j;
    return 0;
}

/* Among models matching quant, the shortest path, then the first in byte order. */
static int pick_quant(const char *const *paths, size_t n, const char *quant, bool allow_aux, size_t *out) {
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        if (!is_model_entry(paths[i]) || (!allow_aux && ob_store_is_aux(paths[i]))) continue;
        if (!ob_store_quant_match(paths[i], quant)) continue;
        if (best < 0) {
            best = (int)i;
            continue;
        }
        size_t lb = strlen(paths[best]), li = strlen(paths[i]);
        if (li < lb || (li == lb && strcmp(paths[i], paths[best]) < 0)) best = (int)i;
    }
    if (best < 0) return -1;
    *out = (size_t)best;
    return 0;
}

int ob_store_pick(const char *const *paths, size_t n, const char *sel, const char *what, size_t *out) {
    char list[LIST_BUDGET + 64] = "";
    if (sel && *sel && ob_store_is_gguf(sel)) {
        /* an explicit file: the exact path, else (for a bare name) the one
         * file with that base name, exact case first, then any case */
        int j = find_exact(paths, n, sel);
        if (j >= 0) return to_first_part(paths, n, (size_t)j, what, out);
        for (int pass = 0; pass < 2 && !strchr(sel, '/'); pass++) {
            int hit = -1, hits = 0;
            for (size_t i = 0; i < n; i++) {
                const char *b = base_name(paths[i]);
                if ((pass == 0 ? strcmp(b, sel) : strcasecmp(b, sel)) == 0 && hits++ == 0) hit = (int)i;
            }
            if (hits == 1) return to_first_part(paths, n, (size_t)hit, what, out);
            if (hits > 1) {
                list_models(paths, n, list, sizeof list);
                return ob_err(OB_ERR_NOT_FOUND, "%s has several files named '%s'; give the full path: %s", what,
                              sel, list);
            }
        }
        list_models(paths, n, list, sizeof list);
        return ob_err(OB_ERR_NOT_FOUND, "%s has no file '%s'; its GGUF files: %s", what, sel, list);
    }
    if (sel && *sel) {
        if (pick_quant(paths, n, sel, ob_store_is_aux(sel), out) == 0) return 0;
        list_models(paths, n, list, sizeof list);
        return ob_err(OB_ERR_NOT_FOUND, "no GGUF in %s matches '%s'; it has: %s", what, sel, list);
    }
    if (pick_quant(paths, n, OB_STORE_DEFAULT_QUANT, false, out) == 0) return 0;
    int first = -1;
    for (size_t i = 0; i < n; i++) {
        if (!is_model_entry(paths[i]) || ob_store_is_aux(paths[i])) continue;
        if (first < 0 || strcmp(paths[i], paths[first]) < 0) first = (int)i;
    }
    if (first < 0) {
        list_models(paths, n, list, sizeof list);
        return ob_err(OB_ERR_NOT_FOUND, "%s has no GGUF model file (GGUF files: %s)", what, list);
    }
    *out = (size_t)first;
    return 0;
}

/* ---- checks on names that become paths ---- */

static bool repo_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.'; }

int ob_store_check_repo(const char *repo) {
    const char *slash = strchr(repo, '/');
    if (!slash || strchr(slash + 1, '/'))
        return ob_err(OB_ERR_INVALID_ARG, "'%s' is not a repository name: expected org/repo", repo);
    const char *parts[2] = {repo, slash + 1};
    size_t lens[2] = {(size_t)(slash - repo), strlen(slash + 1)};
    for (int k = 0; k < 2; k++) {
        if (lens[k] == 0 || lens[k] > 96)
            return ob_err(OB_ERR_INVALID_ARG, "'%s' is not a repository name: expected org/repo", repo);
        if (parts[k][0] == '.' || parts[k][0] == '-')
            return ob_err(OB_ERR_INVALID_ARG, "repository name '%s': a part may not start with '%c'", repo,
                          parts[k][0]);
        for (size_t i = 0; i < lens[k]; i++)
            if (!repo_char(parts[k][i]))
                return ob_err(OB_ERR_INVALID_ARG,
                              "repository name '%s': '%c' is not allowed (letters, digits, '-', '_', '.')", repo,
                              parts[k][i]);
    }
    return 0;
}

int ob_store_check_rel_path(const char *path) {
    size_t n = strlen(path);
    if (n == 0 || n > 1024 || path[0] == '/')
        return ob_err(OB_ERR_FORMAT, "file path '%s' is empty, too long or absolute", path);
    const char *seg = path;
    for (const char *p = path;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '\0' || c == '/') {
            size_t len = (size_t)(p - seg);
            if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
                return ob_err(OB_ERR_FORMAT, "file path '%s' has an empty, '.' or '..' segment", path);
            if (c == '\0') break;
            seg = p + 1;
        } else if (c < 0x20 || c == 0x7f || c == '\\') {
            return ob_err(OB_ERR_FORMAT, "file path '%s' has a control byte or backslash", path);
        }
    }
    return 0;
}

int ob_store_mkdirs_for(const char *path) {
    char buf[OB_STORE_PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof buf) return ob_err(OB_ERR_RANGE, "path too long: %s", path);
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
            int e = errno;
            return ob_err(OB_ERR_IO, "cannot create directory %s: %s", buf, strerror(e));
        }
        struct stat st;
        if (stat(buf, &st) < 0 || !S_ISDIR(st.st_mode))
            return ob_err(OB_ERR_IO, "%s exists and is not a directory", buf);
        *p = '/';
    }
    return 0;
}

int ob_store_parse_spec(const char *spec, char *repo_out, size_t repo_size, const char **sel) {
    static const char *const prefixes[] = {"https://huggingface.co/", "huggingface.co/", "https://hf.co/", "hf.co/"};
    for (size_t i = 0; i < OB_ARRAY_LEN(prefixes); i++) {
        size_t k = strlen(prefixes[i]);
        if (strncmp(spec, prefixes[i], k) == 0) {
            spec += k;
            break;
        }
    }
    const char *colon = strchr(spec, ':');
    size_t rl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (rl >= repo_size) return ob_err(OB_ERR_INVALID_ARG, "repository name too long in '%s'", spec);
    memcpy(repo_out, spec, rl);
    repo_out[rl] = '\0';
    OB_TRY(ob_store_check_repo(repo_out));
    *sel = colon && colon[1] ? colon + 1 : NULL;
    return 0;
}

/* ---- where the store is ---- */

static int put_path(char *out, size_t size, const char *a, const char *b) {
    int n = snprintf(out, size, "%s%s", a, b);
    if (n < 0 || (size_t)n >= size) return ob_err(OB_ERR_RANGE, "store path too long: %s%s", a, b);
    while (n > 1 && out[n - 1] == '/') out[--n] = '\0';
    return 0;
}

int ob_store_dir(const char *dir, char *out, size_t size) {
    if (!out || size == 0) return ob_err(OB_ERR_INVALID_ARG, "ob_store_dir: no output buffer");
    if (dir && *dir) return put_path(out, size, dir, "");
    const char *env = getenv("OB_MODELS_DIR");
    if (env && *env) return put_path(out, size, env, "");
    /* XDG says a relative XDG_CACHE_HOME is invalid and must be ignored */
    env = getenv("XDG_CACHE_HOME");
    if (env && env[0] == '/') return put_path(out, size, env, "/1bit/models");
    env = getenv("HOME");
    if (!env || !*env) {
        struct passwd *pw = getpwuid(getuid());
        env = pw ? pw->pw_dir : NULL;
    }
    if (!env || !*env)
        return ob_err(OB_ERR_NOT_FOUND, "no model store: set OB_MODELS_DIR (or HOME, or XDG_CACHE_HOME)");
    return put_path(out, size, env, "/.cache/1bit/models");
}

/* ---- scanning the store ---- */

typedef struct scan_entry {
    char *rel;      /* path below the store */
    uint64_t size;
    bool partial;   /* a .gguf.part */
} scan_entry;

typedef struct scan {
    scan_entry *e;
    size_t n, cap;
} scan;

static void scan_free(scan *s) {
    for (size_t i = 0; i < s->n; i++) ob_free(s->e[i].rel);
    ob_free(s->e);
    s->e = NULL;
    s->n = s->cap = 0;
}

static int scan_add(scan *s, const char *rel, uint64_t size, bool partial) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        scan_entry *e = ob_realloc(s->e, ob_mul_size(cap, sizeof *e));
        if (!e) return ob_err(OB_ERR_OOM, "store scan: out of memory");
        s->e = e;
        s->cap = cap;
    }
    char *r = ob_strdup(rel);
    if (!r) return ob_err(OB_ERR_OOM, "store scan: out of memory");
    s->e[s->n++] = (scan_entry){r, size, partial};
    return 0;
}

/* Walk root/rel (rel "" at the top), adding GGUF files and .gguf.part
 * downloads. Unreadable folders are skipped: a listing should show what it
 * can rather than fail on one bad directory. */
static int scan_dir(scan *s, const char *root, const char *rel, int depth) {
    char dir[OB_STORE_PATH_MAX];
    int w = snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
    if (w < 0 || (size_t)w >= sizeof dir) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char child_rel[OB_STORE_PATH_MAX], child[OB_STORE_PATH_MAX];
        w = snprintf(child_rel, sizeof child_rel, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        if (w < 0 || (size_t)w >= sizeof child_rel) continue;
        w = snprintf(child, sizeof child, "%s/%s", root, child_rel);
        if (w < 0 || (size_t)w >= sizeof child) continue;
        struct stat st;
        if (stat(child, &st) < 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth < SCAN_MAX_DEPTH) rc = scan_dir(s, root, child_rel, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            if (ob_store_is_gguf(de->d_name)) rc = scan_add(s, child_rel, (uint64_t)st.st_size, false);
            else if (ends_with_ci(de->d_name, ".gguf.part")) rc = scan_add(s, child_rel, (uint64_t)st.st_size, true);
        }
    }
    closedir(d);
    return rc;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const scan_entry *)a)->rel, ((const scan_entry *)b)->rel);
}

static int cmp_model(const void *a, const void *b) {
    const ob_stored_model *x = a, *y = b;
    int c = strcmp(x->repo, y->repo);
    return c ? c : strcmp(x->file, y->file);
}

void ob_store_list_free(ob_stored_model *models, size_t n) {
    if (!models) return;
    for (size_t i = 0; i < n; i++) {
        ob_free(models[i].name);
        ob_free(models[i].repo);
        ob_free(models[i].file);
        ob_free(models[i].path);
    }
    ob_free(models);
}

/* Fill m from a path below the store: the first two segments are the
 * repository when there are three or more, else the file stands alone. */
static int model_init(ob_stored_model *m, const char *root, const char *rel) {
    const char *s1 = strchr(rel, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    size_t rl = s2 ? (size_t)(s2 - rel) : 0;
    const char *file = s2 ? s2 + 1 : rel;
    m->repo = ob_strndup(rel, rl);
    m->file = ob_strdup(file);
    size_t nl = rl + 1 + strlen(file) + 1, pl = strlen(root) + 1 + strlen(rel) + 1;
    m->name = ob_malloc(nl);
    m->path = ob_malloc(pl);
    if (!m->repo || !m->file || !m->name || !m->path) return ob_err(OB_ERR_OOM, "store list: out of memory");
    if (rl) snprintf(m->name, nl, "%s:%s", m->repo, file);
    else snprintf(m->name, nl, "%s", file);
    snprintf(m->path, pl, "%s/%s", root, rel);
    return 0;
}

int ob_store_list(const char *dir, ob_stored_model **out, size_t *n_out) {
    if (!out || !n_out) return ob_err(OB_ERR_INVALID_ARG, "ob_store_list: NULL output");
    *out = NULL;
    *n_out = 0;
    char root[OB_STORE_PATH_MAX];
    OB_TRY(ob_store_dir(dir, root, sizeof root));
    scan s = {0};
    int rc = scan_dir(&s, root, "", 0);
    if (rc < 0) {
        scan_free(&s);
        return rc;
    }
    if (s.n) qsort(s.e, s.n, sizeof *s.e, cmp_entry);
    ob_stored_model *m = s.n ? ob_calloc(s.n, sizeof *m) : NULL;
    if (s.n && !m) {
        scan_free(&s);
        return ob_err(OB_ERR_OOM, "store list: out of memory");
    }
    size_t nm = 0;
    for (size_t i = 0; i < s.n && rc == 0; i++) {
        scan_entry *e = &s.e[i];
        int idx, count;
        size_t pl;
        if (e->partial || !ob_store_split_name(e->rel, &idx, &count, &pl)) {
            ob_stored_model *x = &m[nm++];
            if (e->partial) {
                char rel[OB_STORE_PATH_MAX];
                snprintf(rel, sizeof rel, "%.*s", (int)(strlen(e->rel) - 5), e->rel); /* drop ".part" */
                rc = model_init(x, root, rel);
                if (rc == 0) {
                    ob_free(x->path);
                    size_t len = strlen(root) + strlen(e->rel) + 2;
                    x->path = ob_malloc(len);
                    if (!x->path) rc = ob_err(OB_ERR_OOM, "store list: out of memory");
                    else snprintf(x->path, len, "%s/%s", root, e->rel);
                }
            } else {
                rc = model_init(x, root, e->rel);
            }
            x->size = e->size;
            x->n_parts = 1;
            x->complete = !e->partial;
            continue;
        }
        /* a split set: entries are sorted, so its parts are adjacent; one
         * model named by part 1, complete when all parts are present */
        size_t j = i;
        uint64_t total = 0;
        int present = 0;
        while (j < s.n && !s.e[j].partial && strncmp(s.e[j].rel, e->rel, pl) == 0) {
            int ij, cj;
            size_t plj;
            if (!ob_store_split_name(s.e[j].rel, &ij, &cj, &plj) || plj != pl || cj != count) break;
            total += s.e[j].size;
            present++;
            j++;
        }
        char first[OB_STORE_PATH_MAX];
        rc = ob_store_split_part_name(e->rel, 1, first, sizeof first);
        ob_stored_model *x = &m[nm++];
        if (rc == 0) rc = model_init(x, root, first);
        x->size = total;
        x->n_parts = present;
        x->complete = present == count && idx == 1;
        i = j - 1;
    }
    scan_free(&s);
    if (rc < 0) {
        ob_store_list_free(m, nm);
        return rc;
    }
    if (nm) qsort(m, nm, sizeof *m, cmp_model);
    *out = m;
    *n_out = nm;
    return 0;
}

/* ---- -m NAME -> path ---- */

static int copy_out(char *out, size_t size, const char *path) {
    size_t n = strlen(path);
    if (n >= size) return ob_err(OB_ERR_RANGE, "model path too long for the buffer: %s", path);
    memcpy(out, path, n + 1);
    return 0;
}

/* "it holds: a, b (and N more)" for error messages. */
static void describe_store(const ob_stored_model *m, size_t n, const char *root, char *buf, size_t size) {
    size_t used = 0, shown = 0, complete = 0;
    for (size_t i = 0; i < n; i++) complete += m[i].complete;
    if (complete == 0) {
        snprintf(buf, size, "the store (%s) is empty; `1bit pull org/repo[:quant]` downloads a model into it", root);
        return;
    }
    int w = snprintf(buf, size, "the store (%s) holds: ", root);
    used = w > 0 ? (size_t)w : 0;
    for (size_t i = 0; i < n && used < size; i++) {
        if (!m[i].complete) continue;
        size_t len = strlen(m[i].name);
        if (used + len + 2 > LIST_BUDGET) continue;
        w = snprintf(buf + used, size - used, "%s%s", shown ? ", " : "", m[i].name);
        if (w > 0) used += (size_t)w;
        shown++;
    }
    if (shown < complete && used < size) snprintf(buf + used, size - used, " and %zu more", complete - shown);
}

/* Pick within one stored repository, with the same rule pull uses. */
static int resolve_in_repo(const ob_stored_model *m, size_t n, const char *repo, const char *sel, char *out,
                           size_t size) {
    size_t k = 0;
    const char **files = ob_calloc(n ? n : 1, sizeof *files);
    const ob_stored_model **owners = ob_calloc(n ? n : 1, sizeof *owners);
    if (!files || !owners) {
        ob_free(files);
        ob_free(owners);
        return ob_err(OB_ERR_OOM, "resolve: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (!m[i].complete || strcmp(m[i].repo, repo) != 0) continue;
        files[k] = m[i].file;
        owners[k++] = &m[i];
    }
    size_t pick = 0;
    char what[320];
    snprintf(what, sizeof what, "stored %s", repo);
    int rc = ob_store_pick(files, k, sel, what, &pick);
    if (rc == 0) rc = copy_out(out, size, owners[pick]->path);
    ob_free(files);
    ob_free(owners);
    return rc;
}

/* Does the base name of file equal name, or name + ".gguf"? */
static bool name_matches(const char *file, const char *name, bool any_case) {
    const char *b = base_name(file);
    size_t bl = strlen(b), nl = strlen(name);
    if (bl == nl) return (any_case ? strcasecmp(b, name) : strcmp(b, name)) == 0;
    if (bl != nl + 5 || !ob_store_is_gguf(b)) return false;
    return (any_case ? strncasecmp(b, name, nl) : strncmp(b, name, nl)) == 0;
}

int ob_store_resolve(const char *dir, const char *name, char *out, size_t size) {
    if (!name || !*name || !out || size == 0) return ob_err(OB_ERR_INVALID_ARG, "no model name");
    struct stat st;
    if (stat(name, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return ob_err(OB_ERR_INVALID_ARG, "'%s' is a directory, not a GGUF file", name);
        return copy_out(out, size, name);
    }
    char root[OB_STORE_PATH_MAX];
    OB_TRY(ob_store_dir(dir, root, sizeof root));
    ob_stored_model *m = NULL;
    size_t n = 0;
    OB_TRY(ob_store_list(dir, &m, &n));
    int rc;
    char repo[256];
    const char *sel = NULL;
    char where[OB_STORE_PATH_MAX * 2 + 8];

    /* org/repo:sel, or org/repo when the store has that repository */
    bool has_colon = strchr(name, ':') != NULL;
    bool repo_like = has_colon || (strchr(name, '/') && !strchr(strchr(name, '/') + 1, '/'));
    if (repo_like && ob_store_parse_spec(name, repo, sizeof repo, &sel) == 0) {
        snprintf(where, sizeof where, "%s/%s", root, repo);
        if (stat(where, &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = resolve_in_repo(m, n, repo, sel, out, size);
            ob_store_list_free(m, n);
            if (rc < 0) return ob_err_wrap(rc, "model '%s'", name);
            return 0;
        }
        if (has_colon) {
            char desc[LIST_BUDGET + OB_STORE_PATH_MAX + 96];
            describe_store(m, n, root, desc, sizeof desc);
            ob_store_list_free(m, n);
            return ob_err(OB_ERR_NOT_FOUND, "model '%s': %s is not in the store (`1bit pull %s` downloads it); %s",
                          name, repo, name, desc);
        }
    }
    ob_err_clear();

    /* a path inside the store: org/repo/file.gguf */
    int wn = snprintf(where, sizeof where, "%s/%s", root, name);
    if (wn > 0 && (size_t)wn < sizeof where && ob_store_check_rel_path(name) == 0 && stat(where, &st) == 0 &&
        S_ISREG(st.st_mode)) {
        ob_store_list_free(m, n);
        return copy_out(out, size, where);
    }
    ob_err_clear();

    /* a bare file name, with or without .gguf: exact case first, then any case */
    for (int pass = 0; pass < 2; pass++) {
        size_t hits = 0, hit = 0;
        for (size_t i = 0; i < n; i++)
            if (m[i].complete && name_matches(m[i].file, name, pass == 1) && hits++ == 0) hit = i;
        if (hits == 1) {
            rc = copy_out(out, size, m[hit].path);
            ob_store_list_free(m, n);
            return rc;
        }
        if (hits > 1) {
            char list[LIST_BUDGET + 32] = "";
            size_t used = 0;
            for (size_t i = 0; i < n; i++) {
                if (!m[i].complete || !name_matches(m[i].file, name, pass == 1)) continue;
                if (used + strlen(m[i].name) + 2 > LIST_BUDGET) break;
                int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", m[i].name);
                if (w > 0) used += (size_t)w;
            }
            ob_store_list_free(m, n);
            return ob_err(OB_ERR_NOT_FOUND, "model '%s' matches several stored files; name one as org/repo:file: %s",
                          name, list);
        }
    }
    char desc[LIST_BUDGET + OB_STORE_PATH_MAX + 96];
    describe_store(m, n, root, desc, sizeof desc);
    if (repo_like)
        rc = ob_err(OB_ERR_NOT_FOUND, "model '%s' is not a file or a stored model (`1bit pull %s` downloads it); %s",
                    name, name, desc);
    else
        rc = ob_err(OB_ERR_NOT_FOUND, "model '%s' is not a file, and %s", name, desc);
    ob_store_list_free(m, n);
    return rc;
}

int ob_model_resolve(const char *name_or_path, char *out, size_t size) {
    return ob_store_resolve(NULL, name_or_path, out, size);
}
