// What an open file handle carries between FUSE callbacks: its loader and
// its access pattern, with the class of the process that opened it (play
// or scan). Passed to the kernel as fuse_file_info.fh.
import MediaCache

final class OpenFile: FileHandleBox {
    let loader: FileLoader
    let pattern: ReadPattern
    /// How the kernel reads this handle, when the mount has passthrough.
    var mode: Passthrough.Mode?

    init(_ opened: Opened, mode: Passthrough.Mode?) {
        loader = opened.loader
        pattern = opened.pattern
        self.mode = mode
    }
}
