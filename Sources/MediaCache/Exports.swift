// The core's users (the FUSE adapter, the command line, the tests) see the
// support layer through it, as when it was part of this module.
@_exported import MediaSupport
