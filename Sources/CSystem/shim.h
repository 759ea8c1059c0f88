// System calls that Glibc's Swift module leaves out.
#ifndef MEDIAFS_CSYSTEM_SHIM_H
#define MEDIAFS_CSYSTEM_SHIM_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/xattr.h>

/// fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length):
/// frees a range of a sparse file's blocks without changing its size.
static inline int mediafs_punch_hole(int fd, long long offset, long long length) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
}
#endif
