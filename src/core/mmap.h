/*
 * mmap.h - read-only file mapping. Model weights stay in the page cache and
 * tensors point straight into the mapping; nothing is copied at load.
 */
#ifndef OB_CORE_MMAP_H
#define OB_CORE_MMAP_H

#include <stddef.h>

typedef struct ob_mmap {
    const unsigned char *data; /* NULL for an empty file */
    size_t size;
} ob_mmap;

/* Map `path` read-only. Errors: OB_ERR_IO with the path and errno text. */
int ob_mmap_open(const char *path, ob_mmap *out);
void ob_mmap_close(ob_mmap *m);
/* Hint that the whole mapping will be read soon (MADV_WILLNEED). */
void ob_mmap_prefetch(const ob_mmap *m);

#endif
