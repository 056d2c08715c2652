/*
 * hub.h - what pull.c reads from a Hugging Face hub's answers, as functions
 * on plain buffers so tests and tests/fuzz/fuzz_store.c can feed them bytes
 * without a network: one page of the tree listing (JSON) and the Link header
 * that points at the next page.
 *
 * Owns: parsing those answers and checking the names in them. Leaves to
 * pull.c: HTTP, retries, downloads; to store.c: which file to pick.
 */
#ifndef OB_STORE_HUB_H
#define OB_STORE_HUB_H

#include <stddef.h>
#include <stdint.h>

/* One file of a repository as the listing describes it. */
typedef struct ob_hub_file {
    char *path;       /* relative path; passed ob_store_check_rel_path; owned (ob_free) */
    uint64_t size;    /* lfs.size, else size; 0 when absent or negative */
    char sha256[65];  /* lfs.oid, lowercase hex; "" when the file is not in LFS */
    char gitsha1[41]; /* oid: git's blob SHA-1; "" when absent */
} ob_hub_file;

/* Parse one page of GET /api/models/{repo}/tree/{rev} (a JSON array of
 * {"type", "path", "size", "oid", "lfs": {"oid", "size"}}) and append its
 * files to *files (n used, cap allocated; grown with ob_realloc). Entries
 * that are not files, or have no path, are skipped; so are unsafe paths,
 * with a warning naming repo. repo and url only name things in messages.
 * Returns 0, OB_ERR_FORMAT when the body is not a JSON array, or
 * OB_ERR_OOM; files appended before a failure stay appended. */
int ob_hub_parse_listing(const char *body, size_t len, const char *repo, const char *url, ob_hub_file **files,
                         size_t *n, size_t *cap);

/* Free n files' paths and the array. */
void ob_hub_files_free(ob_hub_file *files, size_t n);

/* The URL of a Link header's value (not NUL-terminated, n bytes) marked
 * rel="next" (or rel=next, any case), trimmed, into out (cut to size - 1
 * bytes); out is left as it was when there is none (a response may carry
 * several Link headers). `<u1>; rel="next", <u2>; rel="last"` gives u1. */
void ob_hub_parse_link(const char *v, size_t n, char *out, size_t size);

#endif
