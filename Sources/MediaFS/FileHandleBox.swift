// An object passed to the kernel as fuse_file_info.fh: retained while the
// kernel holds the handle, borrowed by each callback, released at release.
protocol FileHandleBox: AnyObject {}

extension FileHandleBox {
    /// Retains the object for the kernel's handle.
    var handle: UInt64 { UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())) }

    static func borrow(_ handle: UInt64) -> Self {
        Unmanaged<Self>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).takeUnretainedValue()
    }

    static func release(_ handle: UInt64) {
        Unmanaged<Self>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(handle))!).release()
    }
}
