// libfuse3 for Swift. FUSE_USE_VERSION must be defined here: a define in
// cSettings does not reach the Swift importer.
#ifndef MEDIAFS_CFUSE_SHIM_H
#define MEDIAFS_CFUSE_SHIM_H
#define FUSE_USE_VERSION 314
#include <fuse.h>
#include <fuse_lowlevel.h>
#endif
