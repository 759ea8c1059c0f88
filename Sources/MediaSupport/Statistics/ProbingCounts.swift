// What probing costs, counted for the stats.
import Synchronization

/// What probing costs (Statistics.probing).
package final class ProbingCounts: Sendable {
    package let scanReadsDelayed = Atomic<Int64>(0)
    package let lookaheadFetches = Atomic<Int64>(0)
    /// Players' streams started at their first read (FileLoader+Lookahead).
    package let streamsAhead = Atomic<Int64>(0)
}
