// The core's users (the FUSE adapter, the command line, the tests) see the
// layers below it through it, as when they were part of this module.
@_exported import MediaNetwork
@_exported import MediaSegmented
@_exported import MediaSources
@_exported import MediaStore
@_exported import MediaSupport
