// After a cache write fails (disk full, I/O error), reads are served from
// the network without caching for a while: said once, then quiet. Timed on
// the monotonic clock: on the wall clock, a clock stepped back an hour
// stopped cache writes for an hour.
import Synchronization

package final class CacheWritePause: Sendable {
    /// After a failed cache write, reads pass through for this long.
    package static let seconds: Int64 = 10
    /// Seconds on the monotonic clock until which the cache is not written.
    private let until = Atomic<Int64>(0)
    private let clock: Clock

    package init(clock: Clock) {
        self.clock = clock
    }

    /// Whether arriving bytes should be written into the cache now.
    package var isOver: Bool { until.load(ordering: .relaxed) <= now() }

    /// A cache write failed: say so once, then pause writes.
    package func failed(_ error: MediaError) {
        let end = now() + Self.seconds
        let before = until.exchange(end, ordering: .relaxed)
        if before <= now() {
            Log.error("\(error.message); serving reads from the network without caching for \(Self.seconds) s")
        }
    }

    private func now() -> Int64 { Int64(clock.monotonic()) }
}
