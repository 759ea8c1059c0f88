// System calls that Glibc's Swift module leaves out.
#ifndef MEDIAFS_CSYSTEM_SHIM_H
#define MEDIAFS_CSYSTEM_SHIM_H
#include <sys/xattr.h>
#endif
