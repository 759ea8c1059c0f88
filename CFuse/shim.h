// libfuse3 for Swift. FUSE_USE_VERSION must be defined here: a define in
// cSettings does not reach the Swift importer. libfuse picks versioned
// symbols with macros, which Swift cannot call: the wrappers below can.
#ifndef MEDIAFS_CFUSE_SHIM_H
#define MEDIAFS_CFUSE_SHIM_H
#define FUSE_USE_VERSION 314
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <sys/ioctl.h>

/// fuse_new (fuse_new_31 at this API version).
static inline struct fuse *mediafs_fuse_new(struct fuse_args *args, const struct fuse_operations *op,
                                            size_t size, void *private_data) {
    return fuse_new(args, op, size, private_data);
}

/// fuse_loop_mt (fuse_loop_mt_312 at this API version).
static inline int mediafs_fuse_loop_mt(struct fuse *f, struct fuse_loop_config *config) {
    return fuse_loop_mt(f, config);
}

/// ioctl with a pointer argument (Swift cannot call the variadic one).
static inline int mediafs_ioctl(int fd, unsigned long request, void *arg) {
    return ioctl(fd, request, arg);
}
#endif
