// What the loader's tests ask of a loader beyond its API.
@testable import MediaCache

extension FileLoader {
    /// Reads blocked on bytes still to come: what a test waits on to know a
    /// read has joined a transfer.
    var waitingReads: Int {
        lock.withLock { $0.fetches.waits.count }
    }
}
