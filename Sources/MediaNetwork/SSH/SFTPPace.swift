// `--bwlimit` for SFTPFetcher's reads: a BandwidthLimit bucket of its own
// at the mount's rate, shared by its worker threads under a lock (the
// bucket is bookkeeping only, written for one thread), each waiting
// before it hands a piece over until the bucket lets it through.
import MediaSupport
#if canImport(Glibc)
import Glibc
#endif

/// Unchecked: the bucket and the counts are touched under `lock` only.
final class SFTPPace: @unchecked Sendable {
    private let lock = Locked(())
    private let bucket: BandwidthLimit
    /// Transfers handing a piece over now, by priority.
    private var running: [FetchRequest.Priority: Int] = [:]
    private let clock: Clock

    init?(bytesPerSecond: Int64?, clock: Clock) {
        guard let bucket = bytesPerSecond.flatMap(BandwidthLimit.init(bytesPerSecond:)) else { return nil }
        self.bucket = bucket
        self.clock = clock
    }

    /// Waits until `count` more bytes of a transfer of `priority` may pass.
    func wait(for count: Int, priority: FetchRequest.Priority) {
        lock.withLock { _ in running[priority, default: 0] += 1 }
        defer {
            lock.withLock { _ in
                running[priority, default: 1] -= 1
                if running[priority] == 0 { running[priority] = nil }
            }
        }
        while true {
            let wait = lock.withLock { _ -> Double in
                bucket.refill(now: clock.monotonic(), running: Set(running.keys))
                return bucket.take(count, priority: priority) ? 0 : max(bucket.wait(for: priority), 0.005)
            }
            if wait == 0 { return }
            usleep(UInt32(min(wait, 1) * 1_000_000))
        }
    }
}
