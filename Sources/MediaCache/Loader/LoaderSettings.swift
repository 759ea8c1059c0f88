// How patient and how persistent a FileLoader is: timeouts, retries,
// backoff, and the distances that decide joining or stopping a transfer.
import MediaNetwork
import MediaSupport

public struct LoaderSettings: Sendable {
    /// How long a read waits for missing bytes before EIO.
    public var timeout: Double = 30
    /// Transfers one read may start for its bytes before giving up
    /// (`--retries` + 1).
    public var maxAttempts = 4
    /// Wait before retrying after the first failure; doubles each time.
    public var firstBackoff = 0.25
    public var maxBackoff = 4.0
    /// After a read gave up on a failing server, later reads fail at once
    /// for this long.
    public var unavailableFor = 2.0
    /// A read joins a running transfer at most this far ahead of it,
    /// rather than starting its own.
    public var joinDistance: Int64 = 8 << 20
    /// After a failed content probe, lookups fail fast for this long.
    public var probeRetryAfter: Double = 5
    /// A transfer with less than this left is let finish after a seek:
    /// stopping it would cost about what finishing it does.
    public var cancelTolerance: Int64 = 256 << 10

    /// A lookup's probe asks for this many first bytes with a ranged GET
    /// (0: HEAD), so the first read finds them on their way.
    public var probeFirstBytes: Int64 = 512 << 10

    /// A fetch that would stop this close to the end of the file reaches
    /// it: an mp4's `moov` or an mkv's cues there would cost a round trip more.
    public var tailStretch: Int64 = 256 << 10
    /// Where transfers learn the link's round trip and rate, and a reader
    /// after an open or a seek learns how much one fetch must ask for.
    public var link: LinkEstimate? = LinkEstimate.shared
    /// Deadlines and durations on its monotonic time, stored dates on its wall time.
    public var clock = Clock.system
    /// Whether some processes read as library scans (`--scanners` names
    /// any): then an entry no player has read is a scan's (its lookup's
    /// first bytes too), evicted first. Off, every byte is a player's.
    public var readClasses = false
    /// `--handle-grace`: how long a closed player's handle keeps its
    /// pattern and its running transfers for an open that reads on where
    /// it stopped (0: a close stops them at once).
    public var handleGrace: Double = 0
    /// `--background-daily`: what background jobs may fetch a day (nil: no cap).
    public var backgroundDaily: BackgroundAllowance?

    public init() {}
}
