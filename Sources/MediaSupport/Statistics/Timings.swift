// Histograms of how long reads and probes waited, for the metrics.
import Synchronization

/// Histograms of waits (Statistics.timings).
public final class Timings: Sendable {
    public let readWait = Histogram()
    public let probeDuration = Histogram()
    /// The mount's clock: the waits are measured on its monotonic time.
    public let clock: Clock

    init(clock: Clock) {
        self.clock = clock
    }
}
