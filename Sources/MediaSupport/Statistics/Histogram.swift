// A Prometheus-style histogram of durations: fixed bucket bounds, counts
// kept per bucket and made cumulative only when read, so an observation is
// one short lock and a snapshot is consistent (its +Inf bucket is its count).
#if canImport(Glibc)
import Glibc
#endif

package final class Histogram: Sendable {
    /// Upper bounds in seconds, ascending; +Inf is implied.
    package let bounds: [Double]
    private struct State {
        var counts: [Int64]
        var sum = 0.0
    }
    private let state: Locked<State>

    /// From a quick cached read (well under a millisecond) to a stalled one
    /// near the default 30 s timeout.
    package static let secondsBounds: [Double] = [0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                 1, 2.5, 5, 10, 30]

    package init(bounds: [Double] = Histogram.secondsBounds) {
        self.bounds = bounds
        state = Locked(State(counts: Array(repeating: 0, count: bounds.count + 1)))
    }

    /// Records one value; NaN and negatives count as 0 (a clock step back).
    package func observe(_ value: Double) {
        let value = value.isNaN || value < 0 ? 0 : value
        let index = bounds.firstIndex { value <= $0 } ?? bounds.count
        state.withLock { state in
            state.counts[index] &+= 1
            state.sum += value
        }
    }

    /// Records the time since `start`, read from `clock.monotonic()`.
    package func observe(since start: Double, on clock: Clock) {
        observe(clock.monotonic() - start)
    }

    package struct Snapshot: Sendable, Equatable {
        /// (upper bound, observations at or below it), +Inf last.
        package var buckets: [(bound: Double, count: Int64)]
        package var sum: Double
        package var count: Int64 { buckets.last?.count ?? 0 }

        package static func == (a: Snapshot, b: Snapshot) -> Bool {
            a.sum == b.sum && a.buckets.elementsEqual(b.buckets) { $0.bound == $1.bound && $0.count == $1.count }
        }
    }

    package var snapshot: Snapshot {
        let (counts, sum) = state.withLock { ($0.counts, $0.sum) }
        var running: Int64 = 0
        let buckets = zip(bounds + [.infinity], counts).map { bound, count in
            running &+= count
            return (bound, running)
        }
        return Snapshot(buckets: buckets, sum: sum)
    }
}
