// `--poll-interval` and `--poll-rate` (decision 0049): how often each listed
// directory is asked whether it changed, and how many are asked a second
// at most, so a library of thousands of directories is polled at a rate
// its servers can take (1,000 directories at 20 a second: one round in
// 50 s, whatever the interval).
public struct PollSchedule: Sendable, Equatable {
    public static let defaultPerSecond = 20.0
    /// More than this many a second is not "a bounded rate".
    public static let maxPerSecond = 1000.0

    /// Seconds between two polls of one directory.
    public let interval: Double
    /// Directories asked a second, all together.
    public let perSecond: Double

    /// A rate outside 1...`maxPerSecond` is taken as its nearest bound (the
    /// command line refuses it, naming the option).
    public init(interval: Double, perSecond: Double = PollSchedule.defaultPerSecond) {
        self.interval = interval
        self.perSecond = min(max(perSecond.isNaN ? 1 : perSecond, 1), Self.maxPerSecond)
    }
}
