// The files a session has open for reads, kept open between them: a read
// of a file already open costs its data's round trip alone, not an open
// and a stat first (and a close after), which at 100 ms a round trip is
// most of a small read's time. Few (a player reads one file, a scan a
// few), the least recently used closed beyond that; one left unused for
// a while is closed on the session's next use. Owned by one SFTPSession,
// used by one caller at a time as the session is.
import CSSH2
import MediaSupport

struct SFTPOpenFiles {
    /// Files kept open per session.
    static let maxOpen = 8
    /// A file unused this long is closed when its session is next used.
    static let idleSeconds = 60.0

    struct File {
        let handle: OpaquePointer
        /// A second handle on the file, opened with it, for reads that do
        /// not go on where `handle` is (SFTPSession+Reads); nil: none.
        var jump: OpaquePointer?
        var size: Int64?
        var mtime: Int64?
        /// When it was last used, and when its attributes were last asked
        /// (monotonic seconds).
        var used: Double
        var checked: Double
    }

    private var files: [String: File] = [:]

    var count: Int { files.count }

    func file(at path: String) -> File? { files[path] }

    /// Keeps `file` as `path`'s, closing the least recently used beyond the bound.
    mutating func keep(_ file: File, at path: String) {
        files[path] = file
        while files.count > Self.maxOpen, let oldest = files.min(by: { $0.value.used < $1.value.used }) {
            close(oldest.key)
        }
    }

    /// Closes the file at `path` (a round trip a handle: the server answers the close).
    mutating func close(_ path: String) {
        guard let file = files.removeValue(forKey: path) else { return }
        if let jump = file.jump { libssh2_sftp_close_handle(jump) }
        libssh2_sftp_close_handle(file.handle)
    }

    /// Closes those unused since before `now - idleSeconds`.
    mutating func closeIdle(now: Double) {
        for (path, file) in files where now - file.used >= Self.idleSeconds { close(path) }
    }

    mutating func closeAll() {
        for path in Array(files.keys) { close(path) }
    }

    /// Drops them without a word to the server (its connection is gone).
    /// libssh2 1.10 frees a handle only in its close; what is left of
    /// these few is freed with nothing else (a small leak a dropped session).
    mutating func forgetAll() {
        files = [:]
    }
}
