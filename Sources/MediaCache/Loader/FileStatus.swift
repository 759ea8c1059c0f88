// A snapshot of one file's cache state, for xattrs and `mediafs status`.
import MediaStore
import MediaSupport

public struct FileStatus: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case idle, fetching
        case error(String)
    }

    public var url: String
    public var info: ContentInfo?
    public var present: ByteRangeSet
    public var state: State
    public var pinned = false
    /// Bytes its transfers are fetching now: from where each will write
    /// next to where it stops for now (the status page draws them).
    public var inFlight = ByteRangeSet()
    /// Its handles open now.
    public var openHandles = 0

    public var cachedBytes: Int64 { present.byteCount }
    public var isComplete: Bool { info.map { present.contains(0..<$0.length) } ?? false }

    public var stateText: String {
        switch state {
        case .idle: return "idle"
        case .fetching: return "fetching"
        case .error(let message): return "error: \(message)"
        }
    }
}
