// What an open file handle carries between FUSE callbacks: its loader and
// its access pattern, with the class of the process that opened it (play
// or scan). Passed to the kernel as fuse_file_info.fh.
import MediaCache

final class OpenFile: FileHandleBox {
    let loader: FileLoader
    let pattern: ReadPattern
    /// Who else reads through it, each counted apart.
    let shared: SharedReaders?
    /// How the kernel reads this handle, when the mount has passthrough.
    var mode: Passthrough.Mode?

    init(_ opened: Opened, mode: Passthrough.Mode?) {
        loader = opened.loader
        pattern = opened.pattern
        shared = opened.shared
        self.mode = mode
    }
}
