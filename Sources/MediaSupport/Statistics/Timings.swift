// Histograms of how long reads and probes waited, for the metrics.
import Synchronization

/// Histograms of waits (Statistics.timings).
package final class Timings: Sendable {
    package let readWait = Histogram()
    package let probeDuration = Histogram()
    /// The mount's clock: the waits are measured on its monotonic time.
    package let clock: Clock

    init(clock: Clock) {
        self.clock = clock
    }
}
