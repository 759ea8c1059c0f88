// Counters for the whole mount, shown by the root's `user.mediafs.stats`.
// Atomics, since every reader and the network thread bump them.
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class Statistics: Sendable {
    let bytesFromCache = Atomic<Int64>(0)
    let bytesFromNetwork = Atomic<Int64>(0)
    let requests = Atomic<Int64>(0)
    let transfersInFlight = Atomic<Int64>(0)
    /// Opens whose reads the kernel serves from the cache itself (passthrough).
    let kernelReadOpens = Atomic<Int64>(0)
    /// Seconds since the epoch until which the cache is not written.
    private let cacheWritesPausedUntil = Atomic<Int64>(0)
    /// After a failed cache write, reads pass through for this long.
    public static let passThroughSeconds: Int64 = 10

    public init() {}

    /// Whether arriving bytes should be written into the cache now.
    var cacheWritable: Bool {
        cacheWritesPausedUntil.load(ordering: .relaxed) <= Self.seconds()
    }

    /// A cache write failed (disk full, I/O error): say so once, then serve
    /// from the network alone for a while.
    func cacheWriteFailed(_ error: MediaError) {
        let until = Self.seconds() + Self.passThroughSeconds
        let before = cacheWritesPausedUntil.exchange(until, ordering: .relaxed)
        if before <= Self.seconds() {
            Log.error("\(error.message); serving reads from the network without caching for "
                      + "\(Self.passThroughSeconds) s")
        }
    }

    private static func seconds() -> Int64 { Int64(time(nil)) }

    /// A file was opened for the kernel to read from the cache itself.
    public func countKernelReadOpen() {
        kernelReadOpens.add(1, ordering: .relaxed)
    }

    public struct Snapshot: Sendable, Equatable {
        public var bytesFromCache: Int64
        public var bytesFromNetwork: Int64
        public var requests: Int64
        public var transfersInFlight: Int64
        public var kernelReadOpens: Int64
    }

    public var snapshot: Snapshot {
        Snapshot(bytesFromCache: bytesFromCache.load(ordering: .relaxed),
                 bytesFromNetwork: bytesFromNetwork.load(ordering: .relaxed),
                 requests: requests.load(ordering: .relaxed),
                 transfersInFlight: transfersInFlight.load(ordering: .relaxed),
                 kernelReadOpens: kernelReadOpens.load(ordering: .relaxed))
    }
}
