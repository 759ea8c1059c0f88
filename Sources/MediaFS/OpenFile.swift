// What an open file handle carries between FUSE callbacks: its loader and
// its access pattern. Passed to the kernel as fuse_file_info.fh.
import MediaCache

final class OpenFile {
    let loader: FileLoader
    let pattern = ReadPattern()
    /// How the kernel reads this handle, when the mount has passthrough.
    var mode: Passthrough.Mode?

    init(loader: FileLoader) {
        self.loader = loader
    }

    var handle: UInt64 { UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())) }

    static func borrow(_ handle: UInt64) -> OpenFile {
        Unmanaged<OpenFile>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).takeUnretainedValue()
    }

    static func release(_ handle: UInt64) {
        Unmanaged<OpenFile>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).release()
    }
}
