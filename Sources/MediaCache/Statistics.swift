// Counters for the whole mount, shown by the root's `user.mediafs.stats`.
// Atomics, since every reader and the network thread bump them.
import Synchronization

public final class Statistics: Sendable {
    let bytesFromCache = Atomic<Int64>(0)
    let bytesFromNetwork = Atomic<Int64>(0)
    let requests = Atomic<Int64>(0)
    let transfersInFlight = Atomic<Int64>(0)

    public init() {}

    public struct Snapshot: Sendable, Equatable {
        public var bytesFromCache: Int64
        public var bytesFromNetwork: Int64
        public var requests: Int64
        public var transfersInFlight: Int64
    }

    public var snapshot: Snapshot {
        Snapshot(bytesFromCache: bytesFromCache.load(ordering: .relaxed),
                 bytesFromNetwork: bytesFromNetwork.load(ordering: .relaxed),
                 requests: requests.load(ordering: .relaxed),
                 transfersInFlight: transfersInFlight.load(ordering: .relaxed))
    }
}
