// System calls that Glibc's Swift module leaves out. No feature macros
// here (_GNU_SOURCE would change libc's declarations under this module
// and clash with other modules that include the same headers).
#ifndef MEDIAFS_CSYSTEM_SHIM_H
#define MEDIAFS_CSYSTEM_SHIM_H
#include <crypt.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <malloc.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

/// fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length),
/// through syscall(2) since fallocate is declared only under _GNU_SOURCE:
/// frees a range of a sparse file's blocks without changing its size.
static inline int mediafs_punch_hole(int fd, long long offset, long long length) {
    return (int)syscall(SYS_fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
}

/// malloc_trim(0): gives freed heap pages back to the kernel. Wrapped
/// because Glibc's Swift module does not carry <malloc.h>.
static inline int mediafs_malloc_trim(void) {
    return malloc_trim(0);
}

/// Allocations of 4 MiB and more get their own mapping, given back whole
/// when freed. glibc's default threshold rises to the largest block freed
/// (up to 32 MiB), after which a catalog's dictionaries of 100,000 entries
/// (10 to 18 MiB each, copied whole when they grow) land in the heap and
/// leave holes there that no trim returns. Fixing it also keeps the trim
/// threshold at its 128 KiB default.
static inline void mediafs_malloc_tune(void) {
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
}

/// name_to_handle_at(AT_FDCWD, path, handle, &mount_id, 0), through
/// syscall(2) since it and struct file_handle are declared only under
/// _GNU_SOURCE: the kernel's file handle of `path`, its bytes copied to
/// `bytes` (at most `*size`; `*size` set to their count) and its type to
/// `*type`. Returns 0, or -1 with errno set.
static inline int mediafs_name_to_handle(const char *path, unsigned char *bytes, unsigned int *size, int *type) {
    struct {
        unsigned int handle_bytes;
        int handle_type;
        unsigned char f_handle[128];
    } handle;
    int mount_id;
    handle.handle_bytes = sizeof handle.f_handle;
    if (syscall(SYS_name_to_handle_at, AT_FDCWD, path, &handle, &mount_id, 0) != 0) return -1;
    unsigned int count = handle.handle_bytes < *size ? handle.handle_bytes : *size;
    for (unsigned int i = 0; i < count; i++) bytes[i] = handle.f_handle[i];
    *size = count;
    *type = handle.handle_type;
    return 0;
}
#endif
