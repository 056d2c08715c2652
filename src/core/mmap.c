/*
 * mmap.c - POSIX implementation of ob_mmap.
 */
#include "mmap.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"

int ob_mmap_open(const char *path, ob_mmap *out) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ob_err(OB_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ob_err(OB_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ob_err(OB_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return ob_err(OB_ERR_IO, "%s: mmap: %s", path, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    return 0;
}

void ob_mmap_close(ob_mmap *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

void ob_mmap_prefetch(const ob_mmap *m) {
    if (m->data) madvise((void *)m->data, m->size, MADV_WILLNEED);
}
