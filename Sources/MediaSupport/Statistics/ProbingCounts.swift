// What probing costs, counted for the stats.
import Synchronization

/// What probing costs (Statistics.probing).
public final class ProbingCounts: Sendable {
    public let scanReadsDelayed = Atomic<Int64>(0)
    public let lookaheadFetches = Atomic<Int64>(0)
}
