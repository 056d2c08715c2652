/*
 * store.h - the local model store, inside the library.
 *
 * The public half (ob_store_dir, ob_model_resolve, ob_store_list, ob_pull)
 * is declared in include/onebit.h. This header holds what store.c and pull.c
 * share: the rule that picks one GGUF out of a repository's files (the same
 * rule for `1bit pull org/repo:Q4_K_M` against the hub's listing and for
 * `-m org/repo:Q4_K_M` against the files already on disk), split-file names,
 * and the checks that keep names from the network inside the store.
 *
 * Knows nothing of HTTP (pull.c) or of GGUF contents (src/gguf).
 */
#ifndef OB_STORE_STORE_H
#define OB_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onebit.h"

/* The quant a bare `org/repo` picks when the repository has it. */
#define OB_STORE_DEFAULT_QUANT "Q4_K_M"

/* Longest path the store builds (a PATH_MAX-sized buffer). */
#define OB_STORE_PATH_MAX 4096

/* Split GGUF files are named <prefix>-00001-of-00003.gguf (gguf-split).
 * Returns true for such a name and fills the 1-based part index, the part
 * count and the length of <prefix> (the bytes before "-00001"). */
bool ob_store_split_name(const char *path, int *index, int *count, size_t *prefix_len);

/* Build the name of part `index` of the split set `path` belongs to into
 * out. Returns 0, or OB_ERR_RANGE when out is too small. */
int ob_store_split_part_name(const char *path, int index, char *out, size_t size);

/* True when path ends in ".gguf" (any case). */
bool ob_store_is_gguf(const char *path);

/* True for a projector or other side file (mmproj-*.gguf) that is never a
 * model to serve on its own; the picker skips them unless named exactly. */
bool ob_store_is_aux(const char *path);

/* True when `quant` occurs in path as a whole token, any case: bounded by
 * the start or end, '-', '.' or '/' (not '_', which is inside quant names, so
 * Q4_K does not match Q4_K_M and Q4_0 does not match Q4_0_4_4). */
bool ob_store_quant_match(const char *path, const char *quant);

/* Pick the GGUF that sel names among paths[0..n) (paths inside one
 * repository, '/'-separated; any order; non-GGUF entries are ignored):
 *
 *   sel ends in .gguf  the file with that path, else the one file with that
 *                      base name;
 *   other sel          a quant name (Q8_0, q4_k_m, IQ4_XS, UD-Q4_K_XL, BF16)
 *                      matched as a token (ob_store_quant_match); when
 *                      several models match, the shortest path wins (the
 *                      plain one over decorated variants), then the first in
 *                      byte order;
 *   sel NULL or ""     Q4_K_M as above when the repository has it, else the
 *                      first model in byte order (the only one, often).
 *
 * Split parts count as one model named by part 1; mmproj side files are
 * skipped unless named exactly. *out gets the index into paths of the chosen
 * file (part 1 for a split set). what names the repository in messages.
 * Returns 0 or OB_ERR_NOT_FOUND with a message listing what there is. */
int ob_store_pick(const char *const *paths, size_t n, const char *sel, const char *what, size_t *out);

/* "org/repo": two non-empty parts of [A-Za-z0-9._-], neither "." nor ".."
 * nor starting with '.', as the hub allows (96 characters at most each).
 * Returns 0 or OB_ERR_INVALID_ARG naming the problem. */
int ob_store_check_repo(const char *repo);

/* A path inside a repository, from the network or the command line, that
 * may become a file under the store: '/'-separated non-empty segments, no
 * "." or "..", no leading '/', no backslash or control bytes. Returns 0 or
 * OB_ERR_FORMAT. */
int ob_store_check_rel_path(const char *path);

/* mkdir -p for the directory part of path (the last segment is a file). */
int ob_store_mkdirs_for(const char *path);

/* Split "org/repo[:sel]" into repo (into repo_out) and sel (pointer into
 * spec, or NULL). Returns 0 or OB_ERR_INVALID_ARG. */
int ob_store_parse_spec(const char *spec, char *repo_out, size_t repo_size, const char **sel);

#endif
